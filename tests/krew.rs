//! The krew manifests (`plugin.yaml`, `krew/plugins/agent-day2.yaml`) checked by krew's own rules,
//! the plugin's archive installed by the real krew, and the release binary's glibc needs.
//!
//! The real krew v0.4.3 (`kubectl krew` and `validate-krew-manifest`, built from the module
//! proxy by `scripts/real-components.sh krew`) installs an archive of this build's binary from a
//! manifest (`--manifest=… --archive=…`) and from the `krew/` index made a local git repository,
//! and kubectl runs the plugin through krew's link (`real_krew_*` tests, cfg `real_krew`: see
//! "the real krew" below). Beside it, this file replays krew's rules in Rust, so that a
//! machine without the real krew still checks the manifests, and the release archive when
//! there is one:
//! - `validate_plugin`: `internal/index/validation/validate.go` (`ValidatePlugin`,
//!   `IsSafePluginName`, `validatePlatform`, `validateFiles`, `validateSelector`), with the
//!   version parsed as `internal/installation/semver.Parse` does (leading `v`, then
//!   apimachinery's `version.ParseSemantic`);
//! - `validate_manifest_file`: `cmd/validate-krew-manifest/main.go` (file name = plugin name,
//!   every platform selects a supported os/arch, no os/arch selected twice, a license file among
//!   the installed files), with label selectors matched as apimachinery's
//!   `LabelSelectorAsSelector` does;
//! - `krew_install`: `internal/installation/install.go`, `move.go` and `internal/download`
//!   (sha256 check, gzip detection, tar extraction that refuses `..`/absolute entries and
//!   anything but files and directories, `files` moves, the `bin` inside the install dir).
//!
//! `real_krew_judges_as_the_replay_does` holds the replay to the real krew, case by case.
//!
//! The release archive and binary are checked by two `#[ignore]`d tests (a release build takes
//! long; scripts/test.sh runs them with `--ignored` when `scripts/release.sh` has filled
//! `dist/`); run anyway without a build, they fail saying so. With the real krew, the release
//! archive is also installed by it from the committed plugin.yaml.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

const ROOT: &str = env!("CARGO_MANIFEST_DIR");
const PLUGIN_NAME: &str = "agent-day2";
/// The glibc of RHEL 8, the oldest bastion OS the release binary must run on.
const GLIBC_FLOOR: (u32, u32) = (2, 28);

// ---- krew's types (pkg/index/types.go); like krew's decoder, unknown fields are ignored ----
// (Serialize: the real krew is handed these as JSON, which its YAML reader takes.)

#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
struct Plugin {
    #[serde(default)]
    api_version: String,
    #[serde(default)]
    kind: String,
    #[serde(default)]
    metadata: Metadata,
    #[serde(default)]
    spec: PluginSpec,
}

#[derive(Debug, Clone, Default, Deserialize, Serialize)]
struct Metadata {
    #[serde(default)]
    name: String,
}

#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
struct PluginSpec {
    #[serde(default)]
    version: String,
    #[serde(default)]
    short_description: String,
    #[serde(default)]
    description: String,
    #[serde(default)]
    caveats: String,
    #[serde(default)]
    homepage: String,
    #[serde(default)]
    platforms: Vec<Platform>,
}

#[derive(Debug, Clone, Default, Deserialize, Serialize)]
struct Platform {
    #[serde(default)]
    uri: String,
    #[serde(default)]
    sha256: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    selector: Option<LabelSelector>,
    /// `None` when absent (krew then moves everything: `[{from: "*", to: "."}]`).
    #[serde(skip_serializing_if = "Option::is_none")]
    files: Option<Vec<FileOperation>>,
    #[serde(default)]
    bin: String,
}

#[derive(Debug, Clone, Default, Deserialize, Serialize)]
struct FileOperation {
    #[serde(default)]
    from: String,
    #[serde(default)]
    to: String,
}

#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
struct LabelSelector {
    #[serde(skip_serializing_if = "Option::is_none")]
    match_labels: Option<BTreeMap<String, String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    match_expressions: Option<Vec<Requirement>>,
}

#[derive(Debug, Clone, Default, Deserialize, Serialize)]
struct Requirement {
    #[serde(default)]
    key: String,
    #[serde(default)]
    operator: String,
    #[serde(default)]
    values: Vec<String>,
}

// ---- validate.go ----

const WINDOWS_FORBIDDEN: &[&str] = &[
    "CON", "PRN", "AUX", "NUL", "COM1", "COM2", "COM3", "COM4", "COM5", "COM6", "COM7", "COM8", "COM9",
    "LPT1", "LPT2", "LPT3", "LPT4", "LPT5", "LPT6", "LPT7", "LPT8", "LPT9",
];

/// krew `IsSafePluginName`: `^[\w-]+$` (Go's `\w` is ASCII `[0-9A-Za-z_]`) and not a reserved
/// Windows file name (case-insensitive).
fn is_safe_plugin_name(name: &str) -> bool {
    !name.is_empty()
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
        && !WINDOWS_FORBIDDEN.iter().any(|f| f.eq_ignore_ascii_case(name))
}

/// krew `semver.Parse`: a leading `v`, then apimachinery `version.ParseSemantic`
/// (`^\s*v?([0-9]+(?:\.[0-9]+)*)(.*)*$`, exactly three numeric components without leading
/// zeros, then an optional `-pre.release` and `+build.meta` of `[0-9A-Za-z-]` identifiers and
/// optional trailing whitespace).
fn parse_semver(s: &str) -> Result<(u64, u64, u64), String> {
    if !s.starts_with('v') {
        return Err(format!("version string {s:?} not starting with 'v'"));
    }
    let version_re = regex::Regex::new(r"^\s*v?([0-9]+(?:\.[0-9]+)*)(.*)$").unwrap();
    let extra_re = regex::Regex::new(
        r"^(?:-([0-9A-Za-z-]+(?:\.[0-9A-Za-z-]+)*))?(?:\+([0-9A-Za-z-]+(?:\.[0-9A-Za-z-]+)*))?\s*$",
    )
    .unwrap();
    let caps = version_re
        .captures(s)
        .ok_or_else(|| format!("could not parse {s:?} as version"))?;
    let parts: Vec<&str> = caps[1].split('.').collect();
    if parts.len() != 3 {
        return Err(format!("illegal version string {s:?}"));
    }
    let mut nums = [0u64; 3];
    for (i, p) in parts.iter().enumerate() {
        if p.len() > 1 && p.starts_with('0') {
            return Err(format!("illegal zero-prefixed version component {p:?} in {s:?}"));
        }
        nums[i] = p
            .parse()
            .map_err(|e| format!("illegal version string {s:?}: {e}"))?;
    }
    if !extra_re.is_match(&caps[2]) {
        return Err(format!("illegal version string {s:?}"));
    }
    Ok((nums[0], nums[1], nums[2]))
}

fn is_valid_sha256(s: &str) -> bool {
    s.len() == 64 && s.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

/// krew `ValidatePlugin(name, p)`: the first rule broken, in krew's order and words.
fn validate_plugin(name: &str, p: &Plugin) -> Result<(), String> {
    if p.api_version != "krew.googlecontainertools.github.com/v1alpha2" {
        return Err(format!(
            "plugin manifest has apiVersion={:?}, not supported",
            p.api_version
        ));
    }
    if p.kind != "Plugin" {
        return Err(format!(
            "plugin manifest has kind={:?}, but only \"Plugin\" is supported",
            p.kind
        ));
    }
    if !is_safe_plugin_name(name) {
        return Err(format!(
            "the plugin name {name:?} is not allowed, must match ^[\\w-]+$"
        ));
    }
    if p.metadata.name != name {
        return Err(format!(
            "plugin should be named {name:?}, not {:?}",
            p.metadata.name
        ));
    }
    if p.spec.short_description.is_empty() {
        return Err("should have a short description".into());
    }
    if p.spec.short_description.contains(['\r', '\n']) {
        return Err("should not have line breaks in short description".into());
    }
    if p.spec.platforms.is_empty() {
        return Err("should have a platform specified".into());
    }
    if p.spec.version.is_empty() {
        return Err("should have a version specified".into());
    }
    parse_semver(&p.spec.version).map_err(|e| format!("failed to parse plugin version: {e}"))?;
    for (i, pl) in p.spec.platforms.iter().enumerate() {
        validate_platform(pl).map_err(|e| format!("platform [{i}] is badly constructed: {e}"))?;
    }
    Ok(())
}

/// krew `validatePlatform`.
fn validate_platform(p: &Platform) -> Result<(), String> {
    if p.uri.is_empty() {
        return Err("`uri` has to be set".into());
    }
    if p.sha256.is_empty() {
        return Err("`sha256` sum has to be set".into());
    }
    if !is_valid_sha256(&p.sha256) {
        return Err(format!(
            "`sha256` value {} is not valid, must match pattern ^[a-f0-9]{{64}}$",
            p.sha256
        ));
    }
    if p.bin.is_empty() {
        return Err("`bin` has to be set".into());
    }
    if let Some(files) = &p.files {
        if files.is_empty() {
            return Err("`files` is invalid: `files` has to be unspecified or non-empty".into());
        }
        for op in files {
            if op.from.is_empty() {
                return Err("`files` is invalid: `from` field has to be set".into());
            }
            if op.to.is_empty() {
                return Err("`files` is invalid: `to` field has to be set".into());
            }
        }
    }
    validate_selector(p.selector.as_ref()).map_err(|e| format!("invalid platform selector: {e}"))
}

/// krew `validateSelector`.
fn validate_selector(sel: Option<&LabelSelector>) -> Result<(), String> {
    let sel = sel.ok_or("nil selector is not supported")?;
    let exprs = sel.match_expressions.as_deref().unwrap_or_default();
    if sel.match_labels.is_none() && exprs.is_empty() {
        return Err("empty selector is not supported".into());
    }
    let keys = sel
        .match_labels
        .iter()
        .flat_map(|m| m.keys())
        .chain(exprs.iter().map(|e| &e.key));
    for key in keys {
        if key != "os" && key != "arch" {
            return Err(format!("key {key:?} not supported"));
        }
    }
    if sel.match_labels.as_ref().is_some_and(|m| m.is_empty()) {
        return Err("`matchLabels` specified but empty".into());
    }
    if sel.match_expressions.as_ref().is_some_and(|m| m.is_empty()) {
        return Err("`matchExpressions` specified but empty".into());
    }
    Ok(())
}

// ---- validate-krew-manifest ----

/// The os/arch pairs krew supports (`allPlatforms` in cmd/validate-krew-manifest, as krew after
/// v0.4.3 lists them: v0.4.3 itself has no linux/ppc64le, see
/// `real_krew_judges_as_the_replay_does`).
const ALL_PLATFORMS: &[(&str, &str)] = &[
    ("windows", "386"),
    ("windows", "amd64"),
    ("windows", "arm64"),
    ("linux", "386"),
    ("linux", "amd64"),
    ("linux", "arm"),
    ("linux", "arm64"),
    ("linux", "ppc64le"),
    ("darwin", "386"),
    ("darwin", "amd64"),
    ("darwin", "arm64"),
];

/// Whether `sel` selects the labels `{os, arch}`, as apimachinery's `LabelSelectorAsSelector`
/// then `Matches`: no selector selects nothing, an empty one everything; a malformed expression
/// (unknown operator, In/NotIn without values, Exists/DoesNotExist with values) selects nothing.
fn selector_matches(sel: Option<&LabelSelector>, os: &str, arch: &str) -> bool {
    let Some(sel) = sel else { return false };
    let labels = BTreeMap::from([("os", os), ("arch", arch)]);
    let label = |k: &str| labels.get(k).copied();
    let labels_ok = sel
        .match_labels
        .iter()
        .flatten()
        .all(|(k, v)| label(k) == Some(v.as_str()));
    let exprs_ok = sel.match_expressions.iter().flatten().all(|e| {
        let has = |v: &str| e.values.iter().any(|x| x == v);
        match (e.operator.as_str(), e.values.is_empty()) {
            ("In", false) => label(&e.key).is_some_and(has),
            ("NotIn", false) => !label(&e.key).is_some_and(has),
            ("Exists", true) => label(&e.key).is_some(),
            ("DoesNotExist", true) => label(&e.key).is_none(),
            _ => false,
        }
    });
    labels_ok && exprs_ok
}

/// cmd/validate-krew-manifest `validateManifestFile`, less the install (see `krew_install`).
fn validate_manifest_file(path: &Path) -> Result<Plugin, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let plugin: Plugin =
        serde_saphyr::from_str(&text).map_err(|e| format!("failed to read plugin file: {e}"))?;
    let file_name = path.file_name().unwrap().to_str().unwrap();
    let name = file_name
        .strip_suffix(".yaml")
        .ok_or_else(|| format!("expected manifest extension \".yaml\" in {file_name:?}"))?;
    validate_plugin(name, &plugin).map_err(|e| format!("plugin validation error: {e}"))?;
    validate_platform_coverage(&plugin.spec.platforms)?;
    Ok(plugin)
}

/// Every platform selects some supported os/arch, and no os/arch is selected by two platforms.
fn validate_platform_coverage(platforms: &[Platform]) -> Result<(), String> {
    for (i, p) in platforms.iter().enumerate() {
        if !ALL_PLATFORMS
            .iter()
            .any(|(os, arch)| selector_matches(p.selector.as_ref(), os, arch))
        {
            return Err(format!(
                "spec.platform[{i}]'s selector doesn't match any supported platforms"
            ));
        }
    }
    for (os, arch) in ALL_PLATFORMS {
        let idx: Vec<usize> = (0..platforms.len())
            .filter(|&i| selector_matches(platforms[i].selector.as_ref(), os, arch))
            .collect();
        if idx.len() > 1 {
            return Err(format!(
                "overlapping platform selectors found: multiple spec.platforms (at indexes {idx:?}) \
                 select os={os}/arch={arch}"
            ));
        }
    }
    Ok(())
}

/// The license file names validate-krew-manifest looks for among the installed files.
const LICENSE_FILES: &[&str] = &[
    "license",
    "license.txt",
    "license.md",
    "licenses",
    "licenses.txt",
    "licenses.md",
    "copying",
    "copying.txt",
];

// ---- the manifests in the repository ----

fn manifest_paths() -> [PathBuf; 2] {
    [
        Path::new(ROOT).join("plugin.yaml"),
        Path::new(ROOT)
            .join("krew/plugins")
            .join(format!("{PLUGIN_NAME}.yaml")),
    ]
}

/// The index copy passes krew's validation with the name taken from its file name; the top-level
/// `plugin.yaml` (installed with `--manifest`, where krew validates against its own
/// `metadata.name`) passes `ValidatePlugin` for `agent-day2` and the platform rules (by the
/// replay; `real_validate_krew_manifest_accepts_the_manifests` runs the real validator on both).
#[test]
fn manifests_pass_krews_validation() {
    let [top, index] = manifest_paths();
    let p = validate_manifest_file(&index).unwrap_or_else(|e| panic!("{}: {e}", index.display()));
    assert_eq!(p.metadata.name, PLUGIN_NAME);

    let text = std::fs::read_to_string(&top).unwrap();
    let p: Plugin = serde_saphyr::from_str(&text).unwrap();
    validate_plugin(PLUGIN_NAME, &p).unwrap_or_else(|e| panic!("plugin.yaml: {e}"));
    validate_platform_coverage(&p.spec.platforms).unwrap_or_else(|e| panic!("plugin.yaml: {e}"));
}

/// The index copy is the top-level manifest, byte for byte.
#[test]
fn index_manifest_is_the_top_level_manifest() {
    let [top, index] = manifest_paths();
    assert_eq!(
        std::fs::read_to_string(&top).unwrap(),
        std::fs::read_to_string(&index).unwrap(),
        "krew/plugins/{PLUGIN_NAME}.yaml differs from plugin.yaml: run scripts/release.sh"
    );
}

/// What the project itself asks beyond krew's checks: the version of Cargo.toml, the fields
/// spelled as krew reads them (krew ignores unknown fields, so a typo would pass its checks
/// silently), only Linux platforms (the only OS the plugin builds for), the plugin's binary as
/// `bin`, a non-empty homepage and description, and the line lengths an older
/// validate-krew-manifest warned about (70 for shortDescription, 80 for description and caveats).
#[test]
fn manifest_fields_match_the_project() {
    let [top, _] = manifest_paths();
    let text = std::fs::read_to_string(&top).unwrap();
    let p: Plugin = serde_saphyr::from_str(&text).unwrap();
    assert_eq!(
        p.spec.version,
        format!("v{}", env!("CARGO_PKG_VERSION")),
        "run scripts/release.sh"
    );
    assert!(p.spec.homepage.starts_with("https://"), "{}", p.spec.homepage);
    assert!(!p.spec.description.trim().is_empty());
    assert!(
        p.spec.caveats.contains("kubectl_complete-agent_day2"),
        "caveats tell how to complete"
    );

    let raw: serde_json::Value = serde_saphyr::from_str(&text).unwrap();
    let keys = |v: &serde_json::Value| -> Vec<String> {
        v.as_object()
            .map(|o| o.keys().cloned().collect())
            .unwrap_or_default()
    };
    let within = |v: &serde_json::Value, allowed: &[&str], at: &str| {
        for k in keys(v) {
            assert!(allowed.contains(&k.as_str()), "unknown field {at}.{k}");
        }
    };
    within(&raw, &["apiVersion", "kind", "metadata", "spec"], "");
    within(&raw["metadata"], &["name"], "metadata");
    let spec_keys = [
        "version",
        "homepage",
        "shortDescription",
        "description",
        "caveats",
        "platforms",
    ];
    within(&raw["spec"], &spec_keys, "spec");
    for pl in raw["spec"]["platforms"].as_array().unwrap() {
        within(pl, &["selector", "uri", "sha256", "files", "bin"], "platform");
        within(&pl["selector"], &["matchLabels", "matchExpressions"], "selector");
        for f in pl["files"].as_array().into_iter().flatten() {
            within(f, &["from", "to"], "files[]");
        }
    }

    for (i, pl) in p.spec.platforms.iter().enumerate() {
        assert_eq!(pl.bin, "kubectl-agent_day2", "platform {i}");
        let linux_only = ALL_PLATFORMS
            .iter()
            .filter(|(os, arch)| selector_matches(pl.selector.as_ref(), os, arch))
            .all(|(os, _)| *os == "linux");
        assert!(
            linux_only,
            "platform {i} selects a non-Linux OS; the plugin builds for Linux only"
        );
        let archive = pl.uri.rsplit('/').next().unwrap();
        assert!(
            archive.starts_with(&format!("kubectl-agent_day2-{}-linux-", p.spec.version))
                && archive.ends_with(".tar.gz"),
            "platform {i}: uri {} does not name this version's archive",
            pl.uri
        );
    }
    let too_long = |s: &str, max: usize| {
        s.lines()
            .find(|l| l.chars().count() > max && l.trim().contains(' '))
            .map(str::to_string)
    };
    assert_eq!(too_long(&p.spec.short_description, 70), None);
    assert_eq!(too_long(&p.spec.description, 80), None);
    assert_eq!(too_long(&p.spec.caveats, 80), None);
    if p.spec.platforms.iter().any(|pl| pl.uri.contains("/OWNER/")) {
        println!(
            "note: the platform uri is the placeholder base; scripts/release.sh --url-base sets the real one"
        );
    }
}

// ---- the validator itself: each rule rejects what krew rejects ----

fn good_plugin() -> Plugin {
    serde_saphyr::from_str(
        r#"
apiVersion: krew.googlecontainertools.github.com/v1alpha2
kind: Plugin
metadata: {name: foo}
spec:
  version: v1.2.3
  shortDescription: does foo
  platforms:
    - selector: {matchLabels: {os: linux, arch: amd64}}
      uri: https://example.invalid/foo.tar.gz
      sha256: 0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef
      bin: kubectl-foo
"#,
    )
    .unwrap()
}

/// Manifests of a plugin `foo` that krew's validation (validate-krew-manifest, as `foo.yaml`)
/// refuses, each with what is wrong with it.
fn refused_manifests() -> Vec<(String, Plugin)> {
    let mut cases = Vec::new();
    let mut reject = |what: &str, f: &dyn Fn(&mut Plugin)| {
        let mut p = good_plugin();
        f(&mut p);
        cases.push((what.to_string(), p));
    };
    reject("another apiVersion", &|p| {
        p.api_version = "krew.googlecontainertools.github.com/v1alpha1".into()
    });
    reject("another kind", &|p| p.kind = "Plugins".into());
    reject("a name that differs from the file name", &|p| {
        p.metadata.name = "bar".into()
    });
    reject("an empty short description", &|p| {
        p.spec.short_description.clear()
    });
    reject("a line break in the short description", &|p| {
        p.spec.short_description = "a\nb".into()
    });
    reject("no platforms", &|p| p.spec.platforms.clear());
    reject("no version", &|p| p.spec.version.clear());
    for v in [
        "1.2.3", "v1", "v1.2", "v 1.2.3", "v01.2.3", "v1.02.3", "v1.2.03", "v1.0.1-", "v1.0.1+", "v0.0.0a",
    ] {
        reject(&format!("version {v}"), &|p| p.spec.version = v.into());
    }
    reject("no uri", &|p| p.spec.platforms[0].uri.clear());
    reject("no sha256", &|p| p.spec.platforms[0].sha256.clear());
    reject("an uppercase sha256", &|p| {
        p.spec.platforms[0].sha256.make_ascii_uppercase()
    });
    reject("a short sha256", &|p| p.spec.platforms[0].sha256.truncate(63));
    reject("no bin", &|p| p.spec.platforms[0].bin.clear());
    reject("files: []", &|p| p.spec.platforms[0].files = Some(vec![]));
    reject("a file without to", &|p| {
        p.spec.platforms[0].files = Some(vec![FileOperation {
            from: "x".into(),
            to: String::new(),
        }])
    });
    reject("no selector", &|p| p.spec.platforms[0].selector = None);
    reject("an empty selector", &|p| {
        p.spec.platforms[0].selector = Some(LabelSelector::default())
    });
    reject("matchLabels: {}", &|p| {
        let exprs = vec![Requirement {
            key: "os".into(),
            operator: "Exists".into(),
            values: vec![],
        }];
        p.spec.platforms[0].selector = Some(LabelSelector {
            match_labels: Some(BTreeMap::new()),
            match_expressions: Some(exprs),
        })
    });
    reject("a selector key other than os/arch", &|p| {
        let labels = BTreeMap::from([
            ("os".to_string(), "linux".to_string()),
            ("distro".into(), "rhel".into()),
        ]);
        p.spec.platforms[0].selector = Some(LabelSelector {
            match_labels: Some(labels),
            match_expressions: None,
        })
    });
    reject("a selector matching no supported platform", &|p| {
        let labels = BTreeMap::from([("os".to_string(), "plan9".to_string())]);
        p.spec.platforms[0].selector = Some(LabelSelector {
            match_labels: Some(labels),
            match_expressions: None,
        })
    });
    reject("two platforms selecting linux/amd64", &|p| {
        let mut other = p.spec.platforms[0].clone();
        other.selector = Some(LabelSelector {
            match_labels: None,
            match_expressions: Some(vec![Requirement {
                key: "os".into(),
                operator: "In".into(),
                values: vec!["linux".into(), "darwin".into()],
            }]),
        });
        p.spec.platforms.push(other)
    });
    cases
}

/// The replay of krew's validation of `foo.yaml`: validate_manifest_file's rules on a plugin.
fn replay_validation(p: &Plugin) -> Result<(), String> {
    validate_plugin("foo", p).and_then(|_| validate_platform_coverage(&p.spec.platforms))
}

#[test]
fn validator_rejects_what_krew_rejects() {
    let ok = good_plugin();
    replay_validation(&ok).unwrap();
    for (what, p) in refused_manifests() {
        assert!(replay_validation(&p).is_err(), "{what} was accepted");
    }

    for bad in ["CON", "nul", "Com1", "a.b", "a/b", "", "ä"] {
        assert!(!is_safe_plugin_name(bad), "{bad:?}");
    }
    assert!(is_safe_plugin_name("agent-day2") && is_safe_plugin_name("a_b-1"));
    assert_eq!(parse_semver("v1.2.3-beta.2+foo.bar"), Ok((1, 2, 3)));
    assert_eq!(parse_semver("v0.0.0"), Ok((0, 0, 0)));
    assert!(selector_matches(
        Some(&LabelSelector {
            match_labels: None,
            match_expressions: Some(vec![Requirement {
                key: "arch".into(),
                operator: "NotIn".into(),
                values: vec!["arm".into()]
            }]),
        }),
        "linux",
        "amd64"
    ));
    assert!(!selector_matches(None, "linux", "amd64"));
}

// ---- the release archive, installed as krew installs it ----

/// An installed plugin: the install directory (krew's `store/<name>/<version>`) and its files.
#[derive(Debug)]
struct Installed {
    _tmp: tempfile::TempDir,
    /// KREW_ROOT: `store/<name>/<version>/` holds the plugin, `bin/` is empty (see `link`).
    root: PathBuf,
    dir: PathBuf,
    files: Vec<String>,
}

/// Go `filepath.Clean` for slash-separated relative paths.
fn clean(p: &str) -> String {
    let mut out: Vec<&str> = Vec::new();
    for c in p.split('/') {
        match c {
            "" | "." => {}
            ".." if out.last().is_some_and(|l| *l != "..") => {
                out.pop();
            }
            c => out.push(c),
        }
    }
    let s = out.join("/");
    match (p.starts_with('/'), s.is_empty()) {
        (true, _) => format!("/{s}"),
        (false, true) => ".".into(),
        (false, false) => s,
    }
}

/// Go `filepath.Match` for one path component, for the `*` and `?` wildcards.
fn wildcard(pattern: &[u8], name: &[u8]) -> bool {
    match (pattern.first(), name.first()) {
        (None, None) => true,
        (Some(b'*'), _) => {
            wildcard(&pattern[1..], name) || (!name.is_empty() && wildcard(pattern, &name[1..]))
        }
        (Some(b'?'), Some(_)) => wildcard(&pattern[1..], &name[1..]),
        (Some(p), Some(n)) if p == n => wildcard(&pattern[1..], &name[1..]),
        _ => false,
    }
}

/// Go `filepath.Glob` below `dir` for a relative pattern.
fn glob(dir: &Path, pattern: &str) -> Vec<PathBuf> {
    let mut found = vec![dir.to_path_buf()];
    for comp in clean(pattern).split('/') {
        let mut next = Vec::new();
        for d in &found {
            let Ok(rd) = std::fs::read_dir(d) else { continue };
            let mut names: Vec<String> = rd
                .filter_map(|e| e.ok()?.file_name().into_string().ok())
                .collect();
            names.sort();
            next.extend(
                names
                    .into_iter()
                    .filter(|n| wildcard(comp.as_bytes(), n.as_bytes()))
                    .map(|n| d.join(n)),
            );
        }
        found = next;
    }
    found
}

/// krew's install of `platform` at `version` from a local archive (`--archive`): sha256 check,
/// extraction, the `files` moves into the install dir, and the `bin` check before the link.
fn krew_install(platform: &Platform, version: &str, archive: &Path) -> Result<Installed, String> {
    let data = std::fs::read(archive).map_err(|e| e.to_string())?;
    let got = hex::encode(Sha256::digest(&data));
    if got != platform.sha256 {
        return Err(format!(
            "checksum does not match, want: {}, got {got}",
            platform.sha256
        ));
    }
    if !data.starts_with(&[0x1f, 0x8b, 0x08]) {
        return Err("mime type of the archive is not application/x-gzip".into());
    }
    let tmp = tempfile::tempdir().unwrap();
    let staging = tmp.path().join("download");
    let install = tmp.path().join("store").join(PLUGIN_NAME).join(version);
    std::fs::create_dir_all(tmp.path().join("bin")).unwrap();
    std::fs::create_dir_all(&staging).unwrap();

    let mut tar = tar::Archive::new(flate2::read::GzDecoder::new(&data[..]));
    for entry in tar.entries().map_err(|e| format!("tar extraction error: {e}"))? {
        let mut entry = entry.map_err(|e| format!("tar extraction error: {e}"))?;
        let name = String::from_utf8_lossy(&entry.path_bytes()).into_owned();
        if name == "pax_global_header" {
            continue;
        }
        if name.contains("..") {
            return Err(format!(
                "refusing to unpack archive with suspicious entry {name:?}"
            ));
        }
        if name.starts_with('/') || name.starts_with('\\') {
            return Err(format!("refusing to unpack archive with absolute entry {name:?}"));
        }
        let path = staging.join(&name);
        match entry.header().entry_type() {
            tar::EntryType::Directory => std::fs::create_dir_all(&path).unwrap(),
            tar::EntryType::Regular => {
                std::fs::create_dir_all(path.parent().unwrap()).unwrap();
                let mut out = std::fs::File::create(&path).unwrap();
                std::io::copy(&mut entry, &mut out).map_err(|e| format!("failed to copy {name:?}: {e}"))?;
                let mode = entry.header().mode().unwrap();
                use std::os::unix::fs::PermissionsExt;
                std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).unwrap();
            }
            t => return Err(format!("unable to handle file type {t:?} for {name:?} in tar")),
        }
    }

    let default_files = vec![FileOperation {
        from: "*".into(),
        to: ".".into(),
    }];
    let moves_dir = tmp.path().join("move");
    std::fs::create_dir_all(&moves_dir).unwrap();
    for op in platform.files.as_ref().unwrap_or(&default_files) {
        if op.to != clean(&op.to) {
            return Err(format!(
                "the provided path is not clean, {:?} should be {:?}",
                op.to,
                clean(&op.to)
            ));
        }
        let inside = |base: &Path, p: &Path| {
            let rel = p.strip_prefix(base).ok();
            rel.is_some_and(|r| !r.components().any(|c| c == std::path::Component::ParentDir))
        };
        let direct = staging.join(clean(&op.from));
        let moves: Vec<(PathBuf, PathBuf)> = if direct.exists() {
            let to = if clean(&op.to) == "." {
                direct.file_name().unwrap().to_str().unwrap().to_string()
            } else {
                op.to.clone()
            };
            vec![(direct, moves_dir.join(clean(&to)))]
        } else {
            let found = glob(&staging, &op.from);
            if found.is_empty() {
                return Err(format!(
                    "no files in the plugin archive matched the glob pattern={}",
                    op.from
                ));
            }
            let to_dir = moves_dir.join(clean(&op.to));
            found
                .into_iter()
                .map(|f| {
                    let base = f.file_name().unwrap().to_owned();
                    (f, to_dir.join(base))
                })
                .collect()
        };
        for (from, to) in moves {
            if !inside(&staging, &from) || !inside(&moves_dir, &to) {
                return Err(format!("can't move {from:?} to {to:?}: out of bounds"));
            }
            std::fs::create_dir_all(to.parent().unwrap()).unwrap();
            std::fs::rename(&from, &to).map_err(|e| format!("could not move {from:?} to {to:?}: {e}"))?;
        }
    }
    std::fs::create_dir_all(install.parent().unwrap()).unwrap();
    std::fs::rename(&moves_dir, &install).unwrap();

    let bin = install.join(clean(&platform.bin));
    if !bin.starts_with(&install) || clean(&platform.bin).starts_with("..") {
        return Err(format!("the bin {:?} is outside the install dir", platform.bin));
    }
    if !bin.is_file() {
        return Err(format!(
            "can't create symbolic link, source binary ({}) cannot be found in extracted archive",
            bin.display()
        ));
    }
    let mut files = Vec::new();
    let mut stack = vec![install.clone()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let e = e.unwrap();
            if e.file_type().unwrap().is_dir() {
                stack.push(e.path());
            } else if e.file_type().unwrap().is_file() {
                files.push(
                    e.path()
                        .strip_prefix(&install)
                        .unwrap()
                        .to_str()
                        .unwrap()
                        .to_string(),
                );
            }
        }
    }
    files.sort();
    Ok(Installed {
        root: tmp.path().to_path_buf(),
        _tmp: tmp,
        dir: install,
        files,
    })
}

/// The archive each platform names, when `scripts/release.sh` has put it in dist/.
fn built_archives() -> Vec<(Platform, PathBuf)> {
    let [top, _] = manifest_paths();
    let p: Plugin = serde_saphyr::from_str(&std::fs::read_to_string(top).unwrap()).unwrap();
    let mut out = Vec::new();
    for pl in p.spec.platforms {
        let name = pl.uri.rsplit('/').next().unwrap().to_string();
        let path = Path::new(ROOT).join("dist").join(&name);
        assert!(
            path.is_file(),
            "dist/{name} is not there (scripts/release.sh builds it)"
        );
        out.push((pl, path));
    }
    out
}

/// The archive in dist/ installs as krew would install it: the sha256 in the manifest is the
/// archive's, `bin` is in it and executable, a license file is installed, the completion helper
/// the caveats name is installed, and the installed binary runs and reports the manifest's version.
#[test]
#[ignore = "needs the release archive: scripts/release.sh builds dist/ (scripts/test.sh runs these with --ignored when dist/ holds an archive)"]
fn release_archive_installs_like_krew() {
    let [top, _] = manifest_paths();
    let p: Plugin = serde_saphyr::from_str(&std::fs::read_to_string(&top).unwrap()).unwrap();
    for (pl, archive) in built_archives() {
        let inst = krew_install(&pl, &p.spec.version, &archive)
            .unwrap_or_else(|e| panic!("{}: {e}", archive.display()));
        println!("{}: installs {:?}", archive.display(), inst.files);
        assert!(
            inst.files.iter().any(|f| {
                let base = f.rsplit('/').next().unwrap().to_ascii_lowercase();
                LICENSE_FILES.contains(&base.as_str())
            }),
            "no license file among the installed files {:?}",
            inst.files
        );
        assert!(inst.files.contains(&"kubectl_complete-agent_day2".to_string()));
        use std::os::unix::fs::PermissionsExt;
        for exe in [pl.bin.as_str(), "kubectl_complete-agent_day2"] {
            let mode = std::fs::metadata(inst.dir.join(exe))
                .unwrap()
                .permissions()
                .mode();
            assert_eq!(mode & 0o111, 0o111, "{exe} is not executable ({mode:o})");
        }
        let linux_amd64 = selector_matches(pl.selector.as_ref(), "linux", "amd64");
        if linux_amd64 && cfg!(all(target_os = "linux", target_arch = "x86_64")) {
            let out = std::process::Command::new(inst.dir.join(&pl.bin))
                .args(["version", "-o", "json"])
                .output()
                .unwrap();
            assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
            let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
            assert_eq!(format!("v{}", v["version"].as_str().unwrap()), p.spec.version);
            // krew links bin/kubectl-agent_day2 to the installed binary by its absolute path
            // (internal/installation/install.go, createOrUpdateLink).
            let link = inst.root.join("bin").join("kubectl-agent_day2");
            std::os::unix::fs::symlink(inst.dir.join(&pl.bin), link).unwrap();
            let home = tempfile::tempdir().unwrap();
            through_kubectl(&inst.root, home.path(), &p.spec.caveats, &p.spec.version);
            if cfg!(real_krew) {
                // The same archive and the committed plugin.yaml, through the real krew.
                let krew = RealKrew::new();
                let sandbox = krew.sandbox();
                sandbox.install_from_manifest(&top, &archive, &p);
            }
        }
    }
}

/// After the install (`bin/kubectl-agent_day2` linked under `krew_root`): the caveats' commands
/// run as written (they copy the completion helper into `bin/`), then the real kubectl finds
/// the plugin, runs it (it reports `version`, the manifest's) and completes through the helper.
/// Fails when kubectl is missing.
fn through_kubectl(krew_root: &Path, home: &Path, caveats: &str, version: &str) {
    let bin_dir = krew_root.join("bin");
    // The indented lines of the caveats are the commands to run.
    let script: Vec<&str> = caveats.lines().filter(|l| l.starts_with("  ")).collect();
    assert!(!script.is_empty(), "caveats without commands: {caveats}");
    let out = std::process::Command::new("sh")
        .args(["-euc", &script.join("\n")])
        .env("KREW_ROOT", krew_root)
        .env("HOME", home)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "caveats' commands failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        bin_dir.join("kubectl_complete-agent_day2").is_file(),
        "the caveats did not install the helper"
    );

    need_kubectl();
    let mut paths = vec![bin_dir.clone()];
    paths.extend(std::env::split_paths(
        &std::env::var_os("PATH").unwrap_or_default(),
    ));
    let path = std::env::join_paths(paths).unwrap();
    let kubectl = |args: &[&str]| {
        let out = std::process::Command::new("kubectl")
            .args(args)
            .env("PATH", &path)
            .env("HOME", home)
            .env_remove("KUBECONFIG")
            .output()
            .unwrap();
        (
            out.status.success(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
        )
    };
    let (ok, listed) = kubectl(&["plugin", "list", "--name-only"]);
    assert!(
        listed.lines().any(|l| l == "kubectl-agent_day2"),
        "plugin list ({ok}): {listed}"
    );
    let (ok, out) = kubectl(&["agent-day2", "version"]);
    assert!(
        ok && out.lines().next() == Some(format!("agent-day2 {version}").as_str()),
        "{out}"
    );
    let (ok, completed) = kubectl(&["__complete", "agent-day2", ""]);
    assert!(
        ok && completed.lines().any(|l| l.starts_with("add-nodes")),
        "{completed}"
    );
    println!(
        "kubectl runs the krew-installed plugin (agent-day2 {version}) and completes through the helper"
    );
}

/// A small plugin archive (`LICENSE`, `kubectl-foo`) in `dir`, and its sha256.
fn small_archive(dir: &Path) -> (PathBuf, String) {
    let archive = dir.join("a.tar.gz");
    let gz = flate2::write::GzEncoder::new(std::fs::File::create(&archive).unwrap(), Default::default());
    let mut tar = tar::Builder::new(gz);
    for (name, mode) in [("LICENSE", 0o644), ("kubectl-foo", 0o755)] {
        let mut h = tar::Header::new_gnu();
        h.set_size(3);
        h.set_mode(mode);
        h.set_cksum();
        tar.append_data(&mut h, name, &b"abc"[..]).unwrap();
    }
    tar.into_inner().unwrap().finish().unwrap();
    let sha = hex::encode(Sha256::digest(std::fs::read(&archive).unwrap()));
    (archive, sha)
}

/// What krew's install makes of a platform: the installed files, or a word of its error.
type InstallOutcome = Result<Vec<&'static str>, &'static str>;

/// Platforms of plugin `foo` for the small archive (sha256 `sha`), each with its outcome.
fn install_cases(sha: &str) -> Vec<(&'static str, Platform, InstallOutcome)> {
    let mut pl = good_plugin().spec.platforms.remove(0);
    pl.sha256 = sha.to_string();
    let mut cases = vec![(
        "no files: everything",
        pl.clone(),
        Ok(vec!["LICENSE", "kubectl-foo"]),
    )];
    pl.files = Some(vec![FileOperation {
        from: "kubectl-*".into(),
        to: "bin".into(),
    }]);
    pl.bin = "bin/kubectl-foo".into();
    cases.push(("a glob into bin/", pl.clone(), Ok(vec!["bin/kubectl-foo"])));

    let mut bad = pl.clone();
    bad.sha256 = "0".repeat(64);
    cases.push(("another sha256", bad, Err("checksum")));
    let mut bad = pl.clone();
    bad.files = Some(vec![FileOperation {
        from: "README*".into(),
        to: ".".into(),
    }]);
    cases.push(("a glob matching nothing", bad, Err("matched")));
    let mut bad = pl.clone();
    bad.bin = "kubectl-foo".into();
    cases.push(("a bin that was not installed", bad, Err("cannot be found")));
    let mut bad = pl;
    bad.files = Some(vec![FileOperation {
        from: "kubectl-foo".into(),
        to: "./x/../y".into(),
    }]);
    cases.push(("a `to` that is not clean", bad, Err("not clean")));
    cases
}

/// The archive replay refuses what krew refuses: a wrong checksum, a `files` entry that matches
/// nothing, a `bin` that is not in the archive, a `to` that is not a clean path.
#[test]
fn krew_install_replay_rejects_broken_platforms() {
    let tmp = tempfile::tempdir().unwrap();
    let (archive, sha) = small_archive(tmp.path());
    for (what, pl, want) in install_cases(&sha) {
        match (krew_install(&pl, "v1.2.3", &archive), want) {
            (Ok(inst), Ok(files)) => assert_eq!(inst.files, files, "{what}"),
            (Err(e), Err(word)) => assert!(e.contains(word), "{what}: {e}"),
            (got, want) => panic!("{what}: replay {got:?}, expected {want:?}"),
        }
    }
}

// ---- the real krew ----
//
// `scripts/real-components.sh krew` builds krew v0.4.3 (`kubectl-krew`) and its manifest checker
// `validate-krew-manifest` from the module proxy (tests/real/krew/go.mod). The tests below run
// them, each in a KREW_ROOT and HOME of its own, offline: the archive comes from `--archive` or
// from an HTTP server of the test on 127.0.0.1, the index from a git repository in a temporary
// folder, and KREW_NO_UPGRADE_CHECK=1 keeps krew from asking GitHub for a newer krew (with a
// custom index added, krew adds no default index and fetches only that one). They are ordinary
// tests where scripts/test.sh built krew (AGENT_DAY2_REAL_KREW=1: cfg real_krew) and ignored
// elsewhere; with the cfg set, a missing binary fails them.

/// The real krew's binaries and what built them.
struct RealKrew {
    bin: PathBuf,
    versions: String,
}

/// `kubectl` on PATH, or the test fails saying how to get it.
fn need_kubectl() {
    if std::process::Command::new("kubectl")
        .args(["version", "--client"])
        .output()
        .is_err()
    {
        panic!("needs kubectl to run the installed plugin through it: apt-get install kubernetes-client (scripts/test.sh installs it)");
    }
}

impl RealKrew {
    /// `$AGENT_DAY2_REAL_KREW_DIR/bin`, else where `scripts/real-components.sh krew` builds:
    /// `${XDG_CACHE_HOME:-~/.cache}/agent-day2/real/krew-<version of tests/real/krew/go.mod>/bin`.
    fn new() -> RealKrew {
        let bin = match std::env::var_os("AGENT_DAY2_REAL_KREW_DIR") {
            Some(d) => PathBuf::from(d).join("bin"),
            None => {
                let gomod = Path::new(ROOT).join("tests/real/krew/go.mod");
                let text = std::fs::read_to_string(&gomod).unwrap();
                let version = text
                    .lines()
                    .find_map(|l| {
                        let l = l.trim().trim_start_matches("require ").trim_start();
                        l.strip_prefix("sigs.k8s.io/krew ")?.split_whitespace().next()
                    })
                    .unwrap_or_else(|| panic!("{}: no sigs.k8s.io/krew requirement", gomod.display()));
                let cache = std::env::var_os("XDG_CACHE_HOME")
                    .map(PathBuf::from)
                    .unwrap_or_else(|| {
                        PathBuf::from(std::env::var_os("HOME").unwrap_or_else(|| "/root".into()))
                            .join(".cache")
                    });
                cache
                    .join("agent-day2/real")
                    .join(format!("krew-{version}"))
                    .join("bin")
            }
        };
        for f in ["kubectl-krew", "validate-krew-manifest", "versions"] {
            assert!(
                bin.join(f).is_file(),
                "{} is missing: build the real krew with `scripts/real-components.sh krew` (or set AGENT_DAY2_REAL_KREW_DIR)",
                bin.join(f).display()
            );
        }
        need_kubectl();
        let versions = std::fs::read_to_string(bin.join("versions")).unwrap();
        RealKrew { bin, versions }
    }

    /// A fresh KREW_ROOT and HOME.
    fn sandbox(&self) -> Sandbox {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join("krew-root");
        let home = tmp.path().join("home");
        std::fs::create_dir_all(&home).unwrap();
        let mut paths = vec![root.join("bin"), self.bin.clone()];
        paths.extend(std::env::split_paths(
            &std::env::var_os("PATH").unwrap_or_default(),
        ));
        Sandbox {
            path: std::env::join_paths(paths).unwrap(),
            root,
            home,
            _tmp: tmp,
            krew: self.versions.lines().next().unwrap_or_default().to_string(),
        }
    }

    /// `validate-krew-manifest -manifest PATH -skip-install` (krew-index's check less its install,
    /// which the tests here do with `kubectl krew install`): Ok, or its fatal message.
    fn validate(&self, manifest: &Path) -> Result<(), String> {
        let out = std::process::Command::new(self.bin.join("validate-krew-manifest"))
            .args(["-skip-install", "-manifest"])
            .arg(manifest)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr).into_owned();
        if out.status.success() {
            assert!(err.contains("no overlapping spec.platform[].selector"), "{err}");
            return Ok(());
        }
        // klog's fatal line (`F1202 ... main.go:64] <message>`), without the stack dump after it.
        Err(err
            .lines()
            .find(|l| l.starts_with('F'))
            .and_then(|l| l.split_once("] "))
            .map_or(err.clone(), |(_, m)| m.to_string()))
    }
}

/// A KREW_ROOT and HOME of one test; its PATH has KREW_ROOT/bin, then the real krew, then the
/// test's PATH.
struct Sandbox {
    _tmp: tempfile::TempDir,
    root: PathBuf,
    home: PathBuf,
    path: std::ffi::OsString,
    krew: String,
}

impl Sandbox {
    /// `kubectl ARGS` here: (success, stdout, stderr).
    fn kubectl(&self, args: &[&str]) -> (bool, String, String) {
        let out = std::process::Command::new("kubectl")
            .args(args)
            .env("PATH", &self.path)
            .env("KREW_ROOT", &self.root)
            .env("HOME", &self.home)
            .env("KREW_NO_UPGRADE_CHECK", "1")
            .env_remove("KUBECONFIG")
            .env_remove("KREW_OS")
            .env_remove("KREW_ARCH")
            .output()
            .unwrap();
        (
            out.status.success(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    }

    /// `kubectl ARGS` that must succeed; its stdout.
    fn ok(&self, args: &[&str]) -> String {
        let (ok, out, err) = self.kubectl(args);
        assert!(
            ok,
            "kubectl {} failed ({}):\n{out}\n{err}",
            args.join(" "),
            self.krew
        );
        out
    }

    /// `kubectl krew install --manifest=MANIFEST --archive=ARCHIVE`, then the link, the
    /// caveats, kubectl and the plugin as `through_kubectl` checks them, then
    /// `kubectl krew uninstall`.
    fn install_from_manifest(&self, manifest: &Path, archive: &Path, p: &Plugin) {
        let m = format!("--manifest={}", manifest.display());
        let a = format!("--archive={}", archive.display());
        self.ok(&["krew", "install", &m, &a]);
        println!("{}: kubectl krew install {m} {a}", self.krew);
        self.check_installed(p, "detached");
        // krew v0.4.3's uninstall (like list, info, search) first checks that an index is there
        // (cmd/krew/cmd/root.go, checkIndex), which a krew installed the usual way has (its
        // default index); here there is none, and the default one is on GitHub: a local one.
        let (ok, _, err) = self.kubectl(&["krew", "uninstall", PLUGIN_NAME]);
        assert!(
            !ok && err.contains("krew local plugin index is not initialized"),
            "uninstall without an index: {err}"
        );
        let index = self._tmp.path().join("empty-index");
        std::fs::create_dir_all(index.join("plugins")).unwrap();
        std::fs::write(index.join("plugins/.keep"), "").unwrap();
        git(&index, &self.home, &["init", "-q"]);
        git(&index, &self.home, &["add", "-A"]);
        git(
            &index,
            &self.home,
            &["commit", "-q", "-m", "an index without plugins"],
        );
        self.ok(&["krew", "index", "add", "local", &index.display().to_string()]);
        self.uninstall();
    }

    /// What krew left after installing `p` from `index`: its receipt, the link to the binary,
    /// the installed files; then the caveats' commands and the plugin through kubectl.
    fn check_installed(&self, p: &Plugin, index: &str) {
        let version = &p.spec.version;
        let dir = self.root.join("store").join(PLUGIN_NAME).join(version);
        let link = self.root.join("bin").join("kubectl-agent_day2");
        assert_eq!(
            std::fs::read_link(&link).unwrap(),
            dir.join("kubectl-agent_day2"),
            "krew links bin/kubectl-agent_day2 to the installed binary by its absolute path"
        );
        let mut files: Vec<String> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        files.sort();
        assert_eq!(
            files,
            [
                "LICENSE",
                "README.md",
                "kubectl-agent_day2",
                "kubectl_complete-agent_day2"
            ],
            "installed into {}",
            dir.display()
        );
        let receipt =
            std::fs::read_to_string(self.root.join("receipts").join(format!("{PLUGIN_NAME}.yaml"))).unwrap();
        let receipt: serde_json::Value = serde_saphyr::from_str(&receipt).unwrap();
        assert_eq!(receipt["status"]["source"]["name"], index, "{receipt}");
        assert_eq!(receipt["spec"]["version"].as_str(), Some(version.as_str()));

        let (ok, out, err) = self.kubectl(&["agent-day2", "version", "-o", "json"]);
        assert!(ok, "{err}");
        let v: serde_json::Value = serde_json::from_str(&out).unwrap();
        assert_eq!(format!("v{}", v["version"].as_str().unwrap()), *version);
        through_kubectl(&self.root, &self.home, &p.spec.caveats, version);
    }

    /// docs/release.md's uninstall: `kubectl krew uninstall agent-day2` (the plugin, its link and
    /// receipt are gone; the completion helper the caveats copied stays), then `rm` of the helper.
    fn uninstall(&self) {
        self.ok(&["krew", "uninstall", PLUGIN_NAME]);
        let bin = self.root.join("bin");
        assert!(std::fs::symlink_metadata(bin.join("kubectl-agent_day2")).is_err());
        assert!(!self.root.join("store").join(PLUGIN_NAME).exists());
        assert!(!self
            .root
            .join("receipts")
            .join(format!("{PLUGIN_NAME}.yaml"))
            .exists());
        let (ok, _, err) = self.kubectl(&["agent-day2", "version"]);
        assert!(!ok, "the plugin still runs after the uninstall: {err}");
        // The helper left in bin/ with no receipt at all (krew here is not installed by krew,
        // so no receipt of its own): krew v0.4.3 takes that for a krew home older than v0.3
        // (internal/receiptsmigration: files in bin/, no receipts) and refuses every command.
        assert!(bin.join("kubectl_complete-agent_day2").is_file());
        let (ok, _, err) = self.kubectl(&["krew", "index", "list"]);
        assert!(!ok && err.contains("krew home outdated"), "{err}");
        std::fs::remove_file(bin.join("kubectl_complete-agent_day2")).unwrap();
        self.ok(&["krew", "index", "list"]);
    }
}

/// The plugin archive as `scripts/release.sh` packs it (same entries, same tar options), with
/// this build's (debug) binary in it, compressed fast: written to `dir/<name>`, with its sha256.
fn debug_archive(dir: &Path, name: &str) -> (PathBuf, String) {
    let entries = "LICENSE README.md kubectl-agent_day2 kubectl_complete-agent_day2";
    let release = std::fs::read_to_string(Path::new(ROOT).join("scripts/release.sh")).unwrap();
    assert!(
        release.contains(&format!("--numeric-owner -cf - \\\n    {entries})")),
        "scripts/release.sh no longer packs `{entries}`: update debug_archive"
    );
    let stage = dir.join("stage");
    std::fs::create_dir_all(&stage).unwrap();
    let install = |from: &Path, name: &str, mode: u32| {
        use std::os::unix::fs::PermissionsExt;
        std::fs::copy(from, stage.join(name)).unwrap();
        std::fs::set_permissions(stage.join(name), std::fs::Permissions::from_mode(mode)).unwrap();
    };
    install(
        Path::new(env!("CARGO_BIN_EXE_kubectl-agent_day2")),
        "kubectl-agent_day2",
        0o755,
    );
    install(
        &Path::new(ROOT).join("scripts/kubectl_complete-agent_day2"),
        "kubectl_complete-agent_day2",
        0o755,
    );
    install(&Path::new(ROOT).join("LICENSE"), "LICENSE", 0o644);
    install(&Path::new(ROOT).join("README.md"), "README.md", 0o644);
    let archive = dir.join(name);
    // tar and gzip as release.sh runs them (gzip -1, not -9: the debug binary is large).
    let out = std::process::Command::new("sh")
        .args([
            "-ec",
            &format!(
                "cd \"$1\"; LC_ALL=C tar --format=gnu --sort=name --owner=0 --group=0 --numeric-owner \
                 -cf - {entries} | gzip -n -1 >\"$2\"; sha256sum \"$2\""
            ),
            "sh",
        ])
        .arg(&stage)
        .arg(&archive)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    std::fs::remove_dir_all(&stage).unwrap();
    let sha = String::from_utf8_lossy(&out.stdout)
        .split_whitespace()
        .next()
        .unwrap()
        .to_string();
    assert!(is_valid_sha256(&sha), "{sha}");
    (archive, sha)
}

/// The committed plugin.yaml with the linux/amd64 platform's sha256 (and `uri`, when given)
/// replaced, and `version` for spec.version: the manifest of an archive built here. The rest
/// stays byte for byte.
fn test_manifest(sha: &str, uri: Option<&str>, version: Option<&str>) -> (String, Plugin) {
    let [top, _] = manifest_paths();
    let text = std::fs::read_to_string(top).unwrap();
    let p: Plugin = serde_saphyr::from_str(&text).unwrap();
    let i = p
        .spec
        .platforms
        .iter()
        .position(|pl| selector_matches(pl.selector.as_ref(), "linux", "amd64"))
        .expect("plugin.yaml has no linux/amd64 platform");
    let (mut uris, mut shas) = (0, 0);
    let mut out = String::new();
    for line in text.lines() {
        let line = if let Some(old) = line.strip_prefix("    uri: ") {
            uris += 1;
            match uri {
                Some(u) if uris == i + 1 => format!("    uri: {u}"),
                _ => format!("    uri: {old}"),
            }
        } else if line.starts_with("    sha256: ") {
            shas += 1;
            if shas == i + 1 {
                format!("    sha256: {sha}")
            } else {
                line.to_string()
            }
        } else if let (Some(v), true) = (version, line.starts_with("  version: ")) {
            format!("  version: {v}")
        } else {
            line.to_string()
        };
        out.push_str(&line);
        out.push('\n');
    }
    assert_eq!((uris, shas), (p.spec.platforms.len(), p.spec.platforms.len()));
    let q: Plugin = serde_saphyr::from_str(&out).unwrap();
    assert_eq!(q.spec.platforms[i].sha256, sha);
    assert_eq!(q.spec.caveats, p.spec.caveats);
    (out, q)
}

/// (a) The real krew installs our archive from the manifest, as README "Install with krew" says
/// (`kubectl krew install --manifest=plugin.yaml --archive=…`); kubectl runs the plugin through
/// krew's link; `kubectl krew uninstall` removes it.
#[test]
#[cfg_attr(
    not(real_krew),
    ignore = "needs the real krew: scripts/real-components.sh krew, then AGENT_DAY2_REAL_KREW=1 (scripts/test.sh does both)"
)]
fn real_krew_installs_the_archive_from_the_manifest() {
    let krew = RealKrew::new();
    let tmp = tempfile::tempdir().unwrap();
    let t = std::time::Instant::now();
    let (archive, sha) = debug_archive(tmp.path(), "kubectl-agent_day2-linux-amd64.tar.gz");
    println!("debug archive packed in {:?}", t.elapsed());
    let (text, p) = test_manifest(&sha, None, None);
    // krew validates an install from --manifest against metadata.name, not the file name.
    let manifest = tmp.path().join("plugin.yaml");
    std::fs::write(&manifest, text).unwrap();
    let t = std::time::Instant::now();
    krew.sandbox().install_from_manifest(&manifest, &archive, &p);
    println!("installed, run and uninstalled in {:?}", t.elapsed());
}

/// A one-file HTTP server on 127.0.0.1 (krew downloads a platform's `uri` with Go's http.Get:
/// http and https only), serving `body` at `path`; counts the downloads.
struct ArchiveServer {
    addr: std::net::SocketAddr,
    hits: std::sync::Arc<std::sync::atomic::AtomicUsize>,
}

impl ArchiveServer {
    fn start(path: String, body: Vec<u8>) -> ArchiveServer {
        use std::io::{BufRead, Write};
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let hits = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let count = hits.clone();
        std::thread::spawn(move || {
            for conn in listener.incoming() {
                let Ok(mut conn) = conn else { continue };
                let mut reader = std::io::BufReader::new(conn.try_clone().unwrap());
                let mut request = String::new();
                if reader.read_line(&mut request).is_err() {
                    continue;
                }
                // The headers, up to the blank line.
                let mut line = String::new();
                while reader.read_line(&mut line).is_ok_and(|n| n > 2) {
                    line.clear();
                }
                let target = request.split_whitespace().nth(1).unwrap_or_default();
                let _ = if request.starts_with("GET ") && target == path {
                    count.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                    write!(
                        conn,
                        "HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                        body.len()
                    )
                    .and_then(|_| conn.write_all(&body))
                } else {
                    conn.write_all(
                        b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
                    )
                };
            }
        });
        ArchiveServer { addr, hits }
    }

    fn hits(&self) -> usize {
        self.hits.load(std::sync::atomic::Ordering::SeqCst)
    }
}

/// `git ARGS` in `dir` (no user or system configuration); fails the test when git does.
fn git(dir: &Path, home: &Path, args: &[&str]) {
    let out = std::process::Command::new("git")
        .args([
            "-c",
            "user.name=agent-day2 test",
            "-c",
            "user.email=test@agent-day2.invalid",
        ])
        .args(["-c", "init.defaultBranch=main"])
        .args(args)
        .current_dir(dir)
        .env("HOME", home)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .output()
        .unwrap_or_else(|e| panic!("needs git (krew's index is a git repository): {e}"));
    assert!(
        out.status.success(),
        "git {}: {}",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// (b) The real krew installs the plugin from the `krew/` index, as the README says for a published
/// index (`kubectl krew index add`, `kubectl krew install agent-day2/agent-day2`): the index is
/// a git repository made from `krew/` whose manifest names the archive on a local HTTP server;
/// then `kubectl krew upgrade` takes a new version committed to the index (krew fetches the
/// index first), `kubectl krew uninstall` and `kubectl krew index remove` undo it.
#[test]
#[cfg_attr(
    not(real_krew),
    ignore = "needs the real krew: scripts/real-components.sh krew, then AGENT_DAY2_REAL_KREW=1 (scripts/test.sh does both)"
)]
fn real_krew_installs_from_the_local_index() {
    let krew = RealKrew::new();
    let sandbox = krew.sandbox();
    let tmp = tempfile::tempdir().unwrap();
    let [top, _] = manifest_paths();
    let committed: Plugin = serde_saphyr::from_str(&std::fs::read_to_string(top).unwrap()).unwrap();
    let name = committed.spec.platforms[0]
        .uri
        .rsplit('/')
        .next()
        .unwrap()
        .to_string();
    let (archive, sha) = debug_archive(tmp.path(), &name);
    let path = format!("/{}/{name}", committed.spec.version);
    let server = ArchiveServer::start(path.clone(), std::fs::read(&archive).unwrap());
    let uri = format!("http://{}{path}", server.addr);

    // The index repository: krew/ as it is, with the manifest of this archive.
    let index = tmp.path().join("index");
    let copy = std::process::Command::new("cp")
        .args(["-r", &format!("{ROOT}/krew"), &index.display().to_string()])
        .status()
        .unwrap();
    assert!(copy.success());
    let (text, p) = test_manifest(&sha, Some(&uri), None);
    let manifest = index.join("plugins").join(format!("{PLUGIN_NAME}.yaml"));
    std::fs::write(&manifest, &text).unwrap();
    krew.validate(&manifest)
        .unwrap_or_else(|e| panic!("validate-krew-manifest: {e}"));
    git(&index, &sandbox.home, &["init", "-q"]);
    git(&index, &sandbox.home, &["add", "-A"]);
    git(&index, &sandbox.home, &["commit", "-q", "-m", "agent-day2 index"]);

    let t = std::time::Instant::now();
    sandbox.ok(&["krew", "index", "add", PLUGIN_NAME, &index.display().to_string()]);
    let indexes = sandbox.ok(&["krew", "index", "list"]);
    assert!(
        indexes.lines().any(|l| l
            .split_whitespace()
            .eq([PLUGIN_NAME, &index.display().to_string()])),
        "{indexes}"
    );
    let canonical = format!("{PLUGIN_NAME}/{PLUGIN_NAME}");
    sandbox.ok(&["krew", "install", &canonical]);
    assert_eq!(
        server.hits(),
        1,
        "krew downloads the archive from the index's uri"
    );
    assert!(
        !sandbox.root.join("index").join("default").exists(),
        "krew added its default index (from GitHub)"
    );
    println!(
        "{}: kubectl krew install {canonical} from {uri}",
        krew.versions.lines().next().unwrap_or_default()
    );
    sandbox.check_installed(&p, PLUGIN_NAME);
    let listed = sandbox.ok(&["krew", "list"]);
    assert!(listed.lines().any(|l| l.trim() == canonical), "{listed}");

    // A new version in the index: `kubectl krew upgrade` fetches the index and installs it.
    let (major, minor, patch) = parse_semver(&committed.spec.version).unwrap();
    let next = format!("v{major}.{minor}.{}", patch + 1);
    let (text, _) = test_manifest(&sha, Some(&uri), Some(&next));
    std::fs::write(&manifest, text).unwrap();
    git(
        &index,
        &sandbox.home,
        &["commit", "-q", "-a", "-m", "agent-day2 next version"],
    );
    sandbox.ok(&["krew", "upgrade", PLUGIN_NAME]);
    assert_eq!(server.hits(), 2, "krew downloads the archive of the new version");
    let store = sandbox.root.join("store").join(PLUGIN_NAME);
    assert_eq!(
        std::fs::read_link(sandbox.root.join("bin/kubectl-agent_day2")).unwrap(),
        store.join(&next).join("kubectl-agent_day2")
    );
    assert!(
        !store.join(&committed.spec.version).exists(),
        "krew keeps the old version"
    );
    let receipt =
        std::fs::read_to_string(sandbox.root.join("receipts").join(format!("{PLUGIN_NAME}.yaml"))).unwrap();
    assert!(receipt.contains(&format!("version: {next}")), "{receipt}");

    sandbox.uninstall();
    sandbox.ok(&["krew", "index", "remove", PLUGIN_NAME]);
    assert!(!sandbox.root.join("index").join(PLUGIN_NAME).exists());
    println!(
        "index add, install, upgrade, uninstall, index remove in {:?}",
        t.elapsed()
    );
}

/// The real validate-krew-manifest (krew-index's check) accepts both committed manifests and
/// the manifest of an archive built here.
#[test]
#[cfg_attr(
    not(real_krew),
    ignore = "needs the real krew: scripts/real-components.sh krew, then AGENT_DAY2_REAL_KREW=1 (scripts/test.sh does both)"
)]
fn real_validate_krew_manifest_accepts_the_manifests() {
    let krew = RealKrew::new();
    let [top, index] = manifest_paths();
    krew.validate(&index)
        .unwrap_or_else(|e| panic!("{}: {e}", index.display()));
    // It takes the plugin's name from the file name: plugin.yaml is checked as agent-day2.yaml.
    let tmp = tempfile::tempdir().unwrap();
    let copy = tmp.path().join(format!("{PLUGIN_NAME}.yaml"));
    std::fs::copy(&top, &copy).unwrap();
    krew.validate(&copy)
        .unwrap_or_else(|e| panic!("plugin.yaml: {e}"));
    assert_eq!(
        krew.validate(&top).unwrap_err(),
        "plugin validation error: plugin should be named \"plugin\", not \"agent-day2\""
    );
    // (Not all digits: unquoted, YAML reads such a sha256 as a number, and krew then as "0".)
    let (text, _) = test_manifest(&"ab".repeat(32), Some("http://127.0.0.1:1/a.tar.gz"), None);
    std::fs::write(&copy, text).unwrap();
    krew.validate(&copy).unwrap();
}

/// The Rust replay of krew's rules above against the real krew: every manifest the replay's
/// validator refuses, and the good one, judged by validate-krew-manifest; every platform of
/// the archive replay installed (or refused) by `kubectl krew install --manifest --archive`,
/// with the same files installed. Where they differ (one known difference, asserted as such),
/// the real krew is right.
#[test]
#[cfg_attr(
    not(real_krew),
    ignore = "needs the real krew: scripts/real-components.sh krew, then AGENT_DAY2_REAL_KREW=1 (scripts/test.sh does both)"
)]
fn real_krew_judges_as_the_replay_does() {
    let krew = RealKrew::new();
    let tmp = tempfile::tempdir().unwrap();
    let manifest = tmp.path().join("foo.yaml");
    let write = |p: &Plugin| std::fs::write(&manifest, serde_json::to_string_pretty(p).unwrap()).unwrap();

    let mut cases = vec![("the good manifest".to_string(), good_plugin())];
    cases.extend(refused_manifests());
    for (what, p) in &cases {
        write(p);
        let real = krew.validate(&manifest);
        let replay = replay_validation(p);
        assert_eq!(
            real.is_ok(),
            replay.is_ok(),
            "{what}: validate-krew-manifest {real:?}, replay {replay:?}"
        );
        println!("{what}: both {}", real.err().unwrap_or_else(|| "accept".into()));
    }
    // linux/ppc64le: krew v0.4.3's validate-krew-manifest lists no such platform (later krew
    // does, and so does the replay's ALL_PLATFORMS); `kubectl krew install` on a ppc64le machine
    // takes it either way (it matches its own os/arch).
    let mut ppc = good_plugin();
    ppc.spec.platforms[0].selector = Some(LabelSelector {
        match_labels: Some(BTreeMap::from([
            ("os".to_string(), "linux".to_string()),
            ("arch".to_string(), "ppc64le".to_string()),
        ])),
        match_expressions: None,
    });
    write(&ppc);
    replay_validation(&ppc).unwrap();
    let real = krew.validate(&manifest).unwrap_err();
    assert!(real.contains("doesn't match any supported platforms"), "{real}");
    println!("linux/ppc64le only: the replay accepts, validate-krew-manifest v0.4.3 refuses: {real}");

    let (archive, sha) = small_archive(tmp.path());
    let a = format!("--archive={}", archive.display());
    let m = format!("--manifest={}", manifest.display());
    for (what, pl, want) in install_cases(&sha) {
        let mut p = good_plugin();
        p.spec.platforms = vec![pl.clone()];
        write(&p);
        let sandbox = krew.sandbox();
        let (ok, _, err) = sandbox.kubectl(&["krew", "install", &m, &a]);
        let replay = krew_install(&pl, "v1.2.3", &archive);
        assert_eq!(
            ok,
            replay.is_ok(),
            "{what}: kubectl krew install: {err}\nreplay: {replay:?}"
        );
        assert_eq!(ok, want.is_ok(), "{what}: {err}");
        if let Ok(inst) = replay {
            let dir = sandbox.root.join("store/foo/v1.2.3");
            let mut files = Vec::new();
            let mut stack = vec![dir.clone()];
            while let Some(d) = stack.pop() {
                for e in std::fs::read_dir(&d).unwrap() {
                    let e = e.unwrap();
                    if e.file_type().unwrap().is_dir() {
                        stack.push(e.path());
                    } else {
                        files.push(e.path().strip_prefix(&dir).unwrap().to_str().unwrap().to_string());
                    }
                }
            }
            files.sort();
            assert_eq!(files, inst.files, "{what}: installed files");
            println!("{what}: both install {files:?}");
        } else {
            let last = err.lines().last().unwrap_or_default().to_string();
            println!("{what}: both refuse; krew: {last}");
        }
    }
}

// ---- glibc needs of the release binary ----

/// The sonames glibc itself provides (a binary that needs only these runs wherever a new
/// enough glibc is).
const GLIBC_LIBS: &[&str] = &[
    "libc.so.6",
    "libm.so.6",
    "libpthread.so.0",
    "libdl.so.2",
    "librt.so.1",
    "libutil.so.1",
    "libresolv.so.2",
    "libanl.so.1",
    "ld-linux-x86-64.so.2",
    "ld-linux-aarch64.so.1",
    "ld64.so.2",
];

/// What an ELF file needs from the dynamic loader.
#[derive(Debug, Default)]
struct ElfNeeds {
    /// DT_NEEDED sonames.
    needed: Vec<String>,
    /// (file, version) pairs of the GNU version needs section, e.g. ("libc.so.6", "GLIBC_2.17").
    versions: Vec<(String, String)>,
    /// Whether the file still has a symbol table (not stripped).
    has_symtab: bool,
}

fn elf_needs(data: &[u8]) -> Result<ElfNeeds, String> {
    use object::elf::FileHeader64;
    use object::read::elf::{FileHeader, SectionHeader};
    let e = |e: object::read::Error| e.to_string();
    let hdr = FileHeader64::<object::Endianness>::parse(data).map_err(e)?;
    let endian = hdr.endian().map_err(e)?;
    let sections = hdr.sections(endian, data).map_err(e)?;
    let mut out = ElfNeeds {
        has_symtab: sections
            .iter()
            .any(|s| s.sh_type(endian) == object::elf::SHT_SYMTAB),
        ..Default::default()
    };
    let dynamic = sections.dynamic_table(endian, data).map_err(e)?;
    for d in &dynamic {
        if d.tag == object::elf::DT_NEEDED {
            let s = dynamic.string(d).map_err(e)?;
            out.needed.push(String::from_utf8_lossy(s).into_owned());
        }
    }
    if let Some((mut iter, link)) = sections.gnu_verneed(endian, data).map_err(e)? {
        let strings = sections.strings(endian, data, link).map_err(e)?;
        while let Some((need, mut aux)) = iter.next().map_err(e)? {
            let file = String::from_utf8_lossy(need.file(endian, strings).map_err(e)?).into_owned();
            while let Some(a) = aux.next().map_err(e)? {
                let name = String::from_utf8_lossy(a.name(endian, strings).map_err(e)?).into_owned();
                out.versions.push((file.clone(), name));
            }
        }
    }
    Ok(out)
}

/// `GLIBC_2.28` -> (2, 28); `GLIBC_2.2.5` -> (2, 2); other names -> None.
fn glibc_version(name: &str) -> Option<(u32, u32)> {
    let mut it = name.strip_prefix("GLIBC_")?.split('.');
    let major = it.next()?.parse().ok()?;
    let minor = it.next()?.parse().ok()?;
    Some((major, minor))
}

/// Checks a release binary: only glibc's libraries, no symbol version above the floor, no
/// GLIBC_PRIVATE, stripped. Returns the highest GLIBC version needed.
fn check_release_binary(data: &[u8]) -> Result<(u32, u32), String> {
    let needs = elf_needs(data)?;
    if let Some(lib) = needs.needed.iter().find(|l| !GLIBC_LIBS.contains(&l.as_str())) {
        return Err(format!(
            "needs {lib}, which is not part of glibc (needed: {:?})",
            needs.needed
        ));
    }
    let mut highest = (0, 0);
    for (file, v) in &needs.versions {
        if !GLIBC_LIBS.contains(&file.as_str()) {
            return Err(format!("needs version {v} of {file}, which is not part of glibc"));
        }
        let ver = glibc_version(v).ok_or_else(|| format!("needs {v} of {file}, not a public GLIBC_x.y"))?;
        highest = highest.max(ver);
    }
    if highest == (0, 0) {
        return Err("no GLIBC symbol versions found: not a glibc binary?".into());
    }
    if highest > GLIBC_FLOOR {
        return Err(format!(
            "needs GLIBC_{}.{}, newer than glibc {}.{} (RHEL 8)",
            highest.0, highest.1, GLIBC_FLOOR.0, GLIBC_FLOOR.1
        ));
    }
    if needs.has_symtab {
        return Err("not stripped (has a .symtab)".into());
    }
    Ok(highest)
}

/// The ELF reader sees this very test binary's needs (built for the host's glibc): libc.so.6
/// and GLIBC_x.y versions. Keeps the release check below honest when no release is built.
#[test]
fn elf_reader_sees_glibc_needs_of_the_host_build() {
    let data = std::fs::read(std::env::current_exe().unwrap()).unwrap();
    let needs = elf_needs(&data).unwrap();
    assert!(
        needs.needed.iter().any(|l| l == "libc.so.6"),
        "{:?}",
        needs.needed
    );
    assert!(
        needs
            .versions
            .iter()
            .any(|(f, v)| f == "libc.so.6" && glibc_version(v).is_some()),
        "{:?}",
        needs.versions
    );
    assert!(needs.has_symtab, "a test binary keeps its symbols");
    assert!(
        check_release_binary(&data).is_err(),
        "an unstripped binary passed the release check"
    );
    assert_eq!(glibc_version("GLIBC_2.2.5"), Some((2, 2)));
    assert_eq!(glibc_version("GLIBC_PRIVATE"), None);
}

/// The linux/amd64 release binary (in the dist/ archive and in cargo-zigbuild's target dir, where
/// present) runs on glibc 2.28: its highest GLIBC symbol version is at most 2.28 and it needs no
/// library outside glibc. Built by `scripts/release.sh` (a cold zigbuild release build takes
/// long on 2 cores, so the test command does not build it; see docs/release.md).
#[test]
#[ignore = "needs the release archive: scripts/release.sh builds dist/ (scripts/test.sh runs these with --ignored when dist/ holds an archive)"]
fn release_binary_runs_on_rhel8_glibc() {
    let [top, _] = manifest_paths();
    let p: Plugin = serde_saphyr::from_str(&std::fs::read_to_string(top).unwrap()).unwrap();
    let mut checked = 0;
    for (pl, archive) in built_archives() {
        if !selector_matches(pl.selector.as_ref(), "linux", "amd64") {
            continue;
        }
        let inst = krew_install(&pl, &p.spec.version, &archive).unwrap();
        let data = std::fs::read(inst.dir.join(&pl.bin)).unwrap();
        let hi = check_release_binary(&data).unwrap_or_else(|e| panic!("{}: {e}", archive.display()));
        println!(
            "{}: highest glibc symbol version GLIBC_{}.{}",
            archive.display(),
            hi.0,
            hi.1
        );
        checked += 1;
    }
    let built = Path::new(ROOT).join("target/x86_64-unknown-linux-gnu/release/kubectl-agent_day2");
    match std::fs::read(&built) {
        Ok(data) => {
            let hi = check_release_binary(&data).unwrap_or_else(|e| panic!("{}: {e}", built.display()));
            println!(
                "{}: highest glibc symbol version GLIBC_{}.{}",
                built.display(),
                hi.0,
                hi.1
            );
            checked += 1;
        }
        // The archive's copy was checked above; this one is there only after a local build.
        Err(_) => println!(
            "{} is not there (only the dist/ archive's binary was checked)",
            built.display()
        ),
    }
    assert!(checked > 0, "no release binary to check; run scripts/release.sh");
}
