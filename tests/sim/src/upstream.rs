//! Where the tests, the simulator's users (demo, docs/simulator.md, benches) and the sim itself
//! take the public upstream reference data from: the one place that knows.
//!
//! A clone of the project carries none of this data (and must not: it is upstream's). Each data
//! set is taken from where any user gets it too, in this order:
//!
//! 1. an explicit environment variable naming a source tree;
//! 2. what `scripts/real-components.sh` (or `scripts/test.sh`) already fetched: its cache under
//!    `${XDG_CACHE_HOME:-~/.cache}/agent-day2/real/`, the Go module cache, the cargo registry;
//! 3. for what a public registry serves here (the openshift/api Go module, the coreos-installer
//!    crate), the registry itself through its own client (`go mod download`, `cargo fetch`).
//!
//! Otherwise the error says what provides it ("needs X: run scripts/real-components.sh Y or set
//! Z"). Callers decide what a missing data set means: a test that cannot run without it is
//! `#[ignore = "…"]`d (scripts/test.sh runs it in its second pass when the data is there) and
//! panics with this message when run anyway; nothing returns silently.
//!
//! | data set | env | else |
//! | --- | --- | --- |
//! | openshift/api module (config, machineconfiguration CRDs) | `AGENT_DAY2_OPENSHIFT_API` | `real-components.sh kube`'s `bin/openshift-api`, the Go module cache, `go mod download` |
//! | assisted-service source (config/crd/bases, hack/crds/hive, swagger.yaml) | `AGENT_DAY2_ASSISTED_SERVICE_SRC` | `real-components.sh assisted`'s `source` link, the Go module cache |
//! | node-joiner acceptance data (installer's cmd/node-joiner/testdata) | `AGENT_DAY2_INSTALLER_SRC` | none (no public module serves openshift/installer here) |
//! | CoreOS live-ISO layout fixtures (coreos-installer's fixtures/iso) | `AGENT_DAY2_COREOS_INSTALLER_SRC` | the cargo registry, `cargo fetch` of the crate |

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::Context;
use serde_json::{json, Value};

/// A checkout of github.com/openshift/assisted-service at the pinned commit (the same variable
/// `scripts/real-components.sh assisted` builds from).
pub const ASSISTED_SRC_ENV: &str = "AGENT_DAY2_ASSISTED_SERVICE_SRC";
/// A tree of the github.com/openshift/api module (a checkout or the module cache's copy).
pub const OPENSHIFT_API_ENV: &str = "AGENT_DAY2_OPENSHIFT_API";
/// A checkout of github.com/openshift/installer (its `cmd/node-joiner/testdata` is used).
pub const INSTALLER_SRC_ENV: &str = "AGENT_DAY2_INSTALLER_SRC";
/// A source tree of the coreos-installer crate (its `fixtures/iso` is used).
pub const COREOS_INSTALLER_SRC_ENV: &str = "AGENT_DAY2_COREOS_INSTALLER_SRC";

/// The coreos-installer release whose ISO fixtures the tests read (the one scripts/setup.sh
/// installs as the test oracle).
pub const COREOS_INSTALLER_VERSION: &str = "0.27.0";

const ASSISTED_GO_MOD: &str = include_str!("../../real/go.mod");
const REAL_COMPONENTS_SH: &str = include_str!("../../../scripts/real-components.sh");

/// `${XDG_CACHE_HOME:-~/.cache}/agent-day2/real`, where scripts/real-components.sh builds.
pub fn real_cache_root() -> PathBuf {
    std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(std::env::var_os("HOME").unwrap_or_else(|| "/root".into())).join(".cache")
        })
        .join("agent-day2/real")
}

/// The assisted-service pseudo-version tests/real/go.mod requires, e.g.
/// `v0.0.0-20260821015408-063b257950f7`.
pub fn assisted_pseudo_version() -> &'static str {
    ASSISTED_GO_MOD
        .lines()
        .find_map(|l| {
            l.trim()
                .strip_prefix("require github.com/openshift/assisted-service ")
        })
        .and_then(|rest| rest.split_whitespace().next())
        .unwrap_or("unknown")
}

/// The openshift/api pseudo-version `scripts/real-components.sh kube` downloads.
pub fn openshift_api_version() -> &'static str {
    REAL_COMPONENTS_SH
        .lines()
        .find_map(|l| l.trim().strip_prefix("local openshift_api="))
        .map(str::trim)
        .unwrap_or("unknown")
}

fn go_mod_cache() -> Option<PathBuf> {
    if let Some(d) = std::env::var_os("GOMODCACHE").filter(|d| !d.is_empty()) {
        return Some(PathBuf::from(d));
    }
    let out = Command::new("go").args(["env", "GOMODCACHE"]).output().ok()?;
    let d = String::from_utf8_lossy(&out.stdout).trim().to_string();
    (out.status.success() && !d.is_empty()).then(|| PathBuf::from(d))
}

fn env_dir(var: &str, must_have: &str) -> Option<Result<PathBuf, String>> {
    let d = PathBuf::from(std::env::var_os(var).filter(|v| !v.is_empty())?);
    Some(if d.join(must_have).exists() {
        Ok(d)
    } else {
        Err(format!("${var} is {}, which has no {must_have}", d.display()))
    })
}

/// The assisted-service source tree: `$AGENT_DAY2_ASSISTED_SERVICE_SRC`, else the `source` link
/// `scripts/real-components.sh assisted` leaves beside its binaries, else the Go module cache's
/// copy of the pinned pseudo-version.
pub fn assisted_service_src() -> Result<PathBuf, String> {
    let check = "config/crd/bases";
    if let Some(r) = env_dir(ASSISTED_SRC_ENV, check) {
        return r;
    }
    let pseudo = assisted_pseudo_version();
    let commit = pseudo.rsplit('-').next().unwrap_or(pseudo);
    let mut tried = vec![real_cache_root().join(commit).join("source")];
    if let Some(m) = go_mod_cache() {
        tried.push(m.join(format!("github.com/openshift/assisted-service@{pseudo}")));
    }
    for d in &tried {
        if d.join(check).is_dir() {
            return Ok(d.clone());
        }
    }
    Err(format!(
        "needs the assisted-service source at {pseudo} (its CRDs and swagger.yaml; not found in {}): \
         run scripts/real-components.sh assisted (where the Go module proxy refuses the module, with \
         {ASSISTED_SRC_ENV}=<a checkout of commit {commit}>), or set {ASSISTED_SRC_ENV}",
        tried
            .iter()
            .map(|p| p.display().to_string())
            .collect::<Vec<_>>()
            .join(", ")
    ))
}

/// assisted-service's CRD folders, for `agent-day2-sim up --crds`: `config/crd/bases` (Agent,
/// InfraEnv, NMStateConfig, AgentClusterInstall, AgentServiceConfig, …) and `hack/crds/hive`
/// (its copies of Hive's ClusterDeployment and ClusterImageSet).
pub fn assisted_crd_dirs() -> Result<Vec<PathBuf>, String> {
    let src = assisted_service_src()?;
    let dirs = vec![src.join("config/crd/bases"), src.join("hack/crds/hive")];
    for d in &dirs {
        if !d.is_dir() {
            return Err(format!(
                "{} is missing: not a full assisted-service tree",
                d.display()
            ));
        }
    }
    Ok(dirs)
}

/// assisted-service's REST API definition (`swagger.yaml` of the source tree).
pub fn assisted_swagger() -> Result<PathBuf, String> {
    let p = assisted_service_src()?.join("swagger.yaml");
    if p.is_file() {
        Ok(p)
    } else {
        Err(format!(
            "{} is missing: not a full assisted-service tree",
            p.display()
        ))
    }
}

/// The openshift/api module tree: `$AGENT_DAY2_OPENSHIFT_API`, else `real-components.sh kube`'s
/// `bin/openshift-api`, else the Go module cache, else `go mod download` of the pinned version
/// (the public module proxy serves it).
pub fn openshift_api() -> Result<PathBuf, String> {
    let check = "config/v1";
    if let Some(r) = env_dir(OPENSHIFT_API_ENV, check) {
        return r;
    }
    let link = crate::api::real::default_kube_bin_dir().join("openshift-api");
    if link.join(check).is_dir() {
        return Ok(link);
    }
    let ver = openshift_api_version();
    if let Some(m) = go_mod_cache() {
        let d = m.join(format!("github.com/openshift/api@{ver}"));
        if d.join(check).is_dir() {
            return Ok(d);
        }
    }
    let why = match Command::new("go")
        .args([
            "mod",
            "download",
            "-json",
            &format!("github.com/openshift/api@{ver}"),
        ])
        .env("GOFLAGS", "-mod=mod")
        .output()
    {
        Ok(o) => {
            let v: Value = serde_json::from_slice(&o.stdout).unwrap_or(Value::Null);
            match v["Dir"].as_str() {
                Some(d) if o.status.success() && Path::new(d).join(check).is_dir() => {
                    return Ok(PathBuf::from(d))
                }
                _ => format!(
                    "go mod download github.com/openshift/api@{ver} failed: {}{}",
                    v["Error"].as_str().unwrap_or(""),
                    String::from_utf8_lossy(&o.stderr).trim()
                ),
            }
        }
        Err(e) => format!("go is not runnable ({e}); install Go"),
    };
    Err(format!(
        "needs the github.com/openshift/api module at {ver} (the OpenShift CRDs): {why}; run \
         scripts/real-components.sh kube, or set {OPENSHIFT_API_ENV} to a tree of that module"
    ))
}

/// A folder of the openshift/api CRDs for the OpenShift kinds the simulator serves
/// ([`crate::api::registry::PERMISSIVE_OPENSHIFT`]; the `Default` feature-set variant), for
/// `up --crds`. Written once under the system temp directory (derived data, never in the repo).
pub fn openshift_crds_dir() -> Result<PathBuf, String> {
    let root = openshift_api()?;
    let dir = std::env::temp_dir().join(format!(
        "agent-day2-openshift-crds-{}-uid{}",
        openshift_api_version(),
        // SAFETY: getuid cannot fail.
        unsafe { libc::getuid() }
    ));
    materialize(&dir, || {
        let mut out = Vec::new();
        for (g, _, k, _, _, _) in crate::api::registry::PERMISSIVE_OPENSHIFT {
            if let Some(crd) = crate::api::real::openshift_crd(&root, g, k)? {
                out.push((
                    format!("{}.yaml", crd["metadata"]["name"].as_str().unwrap_or(k)),
                    crd,
                ));
            }
        }
        anyhow::ensure!(
            !out.is_empty(),
            "{} holds none of the OpenShift CRDs",
            root.display()
        );
        Ok(out)
    })
    .map_err(|e| format!("cannot write the OpenShift CRDs to {}: {e:#}", dir.display()))?;
    Ok(dir)
}

/// (group, version, kind, plural, short names, namespaced).
pub type AssistedKind = (
    &'static str,
    &'static str,
    &'static str,
    &'static str,
    &'static [&'static str],
    bool,
);

/// The assisted-service and Hive kinds `migrate import` creates.
pub const ASSISTED_KINDS: &[AssistedKind] = &[
    (
        "hive.openshift.io",
        "v1",
        "ClusterImageSet",
        "clusterimagesets",
        &["imgset"],
        false,
    ),
    (
        "hive.openshift.io",
        "v1",
        "ClusterDeployment",
        "clusterdeployments",
        &["cd"],
        true,
    ),
    (
        "extensions.hive.openshift.io",
        "v1beta1",
        "AgentClusterInstall",
        "agentclusterinstalls",
        &["aci"],
        true,
    ),
    (
        "agent-install.openshift.io",
        "v1beta1",
        "InfraEnv",
        "infraenvs",
        &[],
        true,
    ),
    (
        "agent-install.openshift.io",
        "v1beta1",
        "NMStateConfig",
        "nmstateconfigs",
        &[],
        true,
    ),
    (
        "agent-install.openshift.io",
        "v1beta1",
        "Agent",
        "agents",
        &[],
        true,
    ),
    (
        "agent-install.openshift.io",
        "v1beta1",
        "AgentServiceConfig",
        "agentserviceconfigs",
        &[],
        false,
    ),
];

/// A folder of permissive stand-ins for assisted-service's and Hive's CRDs ([`ASSISTED_KINDS`]:
/// right names, scope and status subresource, any content accepted), for `up --crds` where the
/// strict upstream schemas ([`assisted_crd_dirs`]) are not needed or not present. Generated.
pub fn permissive_assisted_crds_dir() -> anyhow::Result<PathBuf> {
    // SAFETY: getuid cannot fail.
    let dir = std::env::temp_dir().join(format!("agent-day2-permissive-assisted-crds-uid{}", unsafe {
        libc::getuid()
    }));
    materialize(&dir, || {
        Ok(ASSISTED_KINDS
            .iter()
            .map(|(g, v, k, p, short, namespaced)| {
                let mut crd = crate::api::registry::permissive_crd(g, v, k, p, short, true);
                if *namespaced {
                    crd["spec"]["scope"] = json!("Namespaced");
                }
                (format!("{p}.{g}.yaml"), crd)
            })
            .collect())
    })?;
    Ok(dir)
}

/// Writes the files `make` returns into `dir` unless it is there already: into a fresh sibling
/// first, renamed into place (so concurrent callers never see half a folder).
fn materialize(
    dir: &Path,
    make: impl FnOnce() -> anyhow::Result<Vec<(String, Value)>>,
) -> anyhow::Result<()> {
    if dir.join(".complete").exists() {
        return Ok(());
    }
    let files = make()?;
    static N: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let tmp = PathBuf::from(format!("{}.tmp-{}-{n}", dir.display(), std::process::id()));
    let _ = std::fs::remove_dir_all(&tmp);
    std::fs::create_dir_all(&tmp).with_context(|| format!("cannot create {}", tmp.display()))?;
    for (name, v) in files {
        std::fs::write(tmp.join(name), serde_json::to_string_pretty(&v)? + "\n")?;
    }
    std::fs::write(tmp.join(".complete"), "")?;
    if std::fs::rename(&tmp, dir).is_err() {
        let _ = std::fs::remove_dir_all(&tmp);
        // Another caller won the race; anything else in the way is an error to see.
        anyhow::ensure!(
            dir.join(".complete").exists(),
            "{} is in the way (remove it)",
            dir.display()
        );
    }
    Ok(())
}

/// node-joiner's acceptance data (`*.txt` txtar scripts and `setup/default/*.yaml`):
/// `$AGENT_DAY2_INSTALLER_SRC/cmd/node-joiner/testdata`. The openshift/installer module is not
/// served by the module proxy here, so nothing else provides it.
pub fn node_joiner_testdata() -> Result<PathBuf, String> {
    let sub = "cmd/node-joiner/testdata";
    match env_dir(INSTALLER_SRC_ENV, sub) {
        Some(r) => r.map(|d| d.join(sub)),
        None => Err(format!(
            "needs node-joiner's acceptance data: set {INSTALLER_SRC_ENV} to a checkout of \
             github.com/openshift/installer (its {sub} is read)"
        )),
    }
}

/// The CoreOS live-ISO layout fixtures (`INDEX`, `embed-areas-*.iso.xz`, `synthetic.iso.xz`)
/// of the coreos-installer crate: `$AGENT_DAY2_COREOS_INSTALLER_SRC/fixtures/iso`, else the
/// cargo registry's copy of coreos-installer [`COREOS_INSTALLER_VERSION`] (scripts/setup.sh's
/// `cargo install` leaves it there), else `cargo fetch` of that crate from crates.io.
pub fn coreos_iso_fixtures() -> Result<PathBuf, String> {
    let sub = "fixtures/iso";
    if let Some(r) = env_dir(COREOS_INSTALLER_SRC_ENV, sub) {
        return r.map(|d| d.join(sub));
    }
    let cargo_home = std::env::var_os("CARGO_HOME")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(std::env::var_os("HOME").unwrap_or_else(|| "/root".into())).join(".cargo")
        });
    let crate_dir = format!("coreos-installer-{COREOS_INSTALLER_VERSION}");
    if let Ok(rd) = std::fs::read_dir(cargo_home.join("registry/src")) {
        for e in rd.flatten() {
            let d = e.path().join(&crate_dir).join(sub);
            if d.join("INDEX").is_file() {
                return Ok(d);
            }
        }
    }
    // Fetch it the way scripts/real-components.sh fetches nmstate-clib: a throwaway manifest.
    let fetch = std::env::temp_dir().join(format!("agent-day2-fetch-{crate_dir}-{}", std::process::id()));
    let r = (|| -> anyhow::Result<PathBuf> {
        std::fs::create_dir_all(fetch.join("src"))?;
        std::fs::write(
            fetch.join("Cargo.toml"),
            format!(
                "[package]\nname = \"fixtures-fetch\"\nversion = \"0.0.0\"\nedition = \"2021\"\npublish = false\n\n\
                 [dependencies]\ncoreos-installer = \"={COREOS_INSTALLER_VERSION}\"\n\n[workspace]\n"
            ),
        )?;
        std::fs::write(fetch.join("src/main.rs"), "fn main() {}\n")?;
        let manifest = fetch.join("Cargo.toml");
        let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
        let o = Command::new(&cargo)
            .args(["fetch", "--quiet", "--manifest-path"])
            .arg(&manifest)
            .output()?;
        anyhow::ensure!(
            o.status.success(),
            "cargo fetch: {}",
            String::from_utf8_lossy(&o.stderr).trim()
        );
        let o = Command::new(&cargo)
            .args(["metadata", "--quiet", "--format-version", "1", "--manifest-path"])
            .arg(&manifest)
            .output()?;
        anyhow::ensure!(
            o.status.success(),
            "cargo metadata: {}",
            String::from_utf8_lossy(&o.stderr).trim()
        );
        let meta: Value = serde_json::from_slice(&o.stdout)?;
        let mp = meta["packages"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|p| p["name"] == "coreos-installer" && p["version"] == COREOS_INSTALLER_VERSION)
            .and_then(|p| p["manifest_path"].as_str())
            .context("coreos-installer is not in cargo metadata")?;
        let d = Path::new(mp).parent().context("manifest path")?.join(sub);
        anyhow::ensure!(d.join("INDEX").is_file(), "{} has no INDEX", d.display());
        Ok(d)
    })();
    let _ = std::fs::remove_dir_all(&fetch);
    r.map_err(|e| {
        format!(
            "needs the CoreOS ISO fixtures of the coreos-installer {COREOS_INSTALLER_VERSION} crate: {e:#}; \
             let cargo reach crates.io (scripts/setup.sh's `cargo install coreos-installer` fetches it), \
             or set {COREOS_INSTALLER_SRC_ENV} to its source tree"
        )
    })
}

/// `agent-day2-sim upstream WHAT`: prints the path(s) of data set WHAT, one a line (exit 0), or
/// why it is not there (stderr, exit 3; 2 for an unknown WHAT).
pub fn cli(what: &str) -> i32 {
    let r: Result<Vec<PathBuf>, String> = match what {
        "assisted-crds" => assisted_crd_dirs(),
        "openshift-crds" => openshift_crds_dir().map(|d| vec![d]),
        "permissive-assisted-crds" => permissive_assisted_crds_dir()
            .map(|d| vec![d])
            .map_err(|e| format!("{e:#}")),
        "assisted-swagger" => assisted_swagger().map(|d| vec![d]),
        "node-joiner-testdata" => node_joiner_testdata().map(|d| vec![d]),
        "coreos-iso-fixtures" => coreos_iso_fixtures().map(|d| vec![d]),
        other => {
            eprintln!(
                "error: unknown data set {other:?} (assisted-crds, openshift-crds, permissive-assisted-crds, \
                 assisted-swagger, node-joiner-testdata, coreos-iso-fixtures)"
            );
            return 2;
        }
    };
    match r {
        Ok(paths) => {
            for p in paths {
                println!("{}", p.display());
            }
            0
        }
        Err(why) => {
            eprintln!("agent-day2-sim upstream {what}: {why}");
            3
        }
    }
}

/// Parses every CRD document of the YAML/JSON files in `dirs` (as `up --crds` loads them).
pub fn load_crds(dirs: &[PathBuf]) -> anyhow::Result<Vec<Value>> {
    let mut out = Vec::new();
    for d in dirs {
        for (_, doc) in crate::api::up::load_yaml_dir(d)? {
            if doc["kind"] == "CustomResourceDefinition" {
                out.push(doc);
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pins_are_read_from_the_wrappers() {
        assert!(
            assisted_pseudo_version().starts_with("v0.0.0-"),
            "{}",
            assisted_pseudo_version()
        );
        assert!(
            openshift_api_version().starts_with("v0.0.0-"),
            "{}",
            openshift_api_version()
        );
    }

    #[test]
    fn permissive_assisted_crds_are_served_kinds() {
        let d = permissive_assisted_crds_dir().unwrap();
        let crds = load_crds(&[d]).unwrap();
        assert_eq!(crds.len(), ASSISTED_KINDS.len());
        for c in &crds {
            let v = &c["spec"]["versions"];
            assert!(
                v.as_array()
                    .is_some_and(|v| v.iter().any(|v| v["served"] == true)),
                "{c}"
            );
            assert!(
                c["spec"]["names"]["plural"]
                    .as_str()
                    .is_some_and(|p| !p.is_empty()),
                "{c}"
            );
        }
        let agent = crds
            .iter()
            .find(|c| c["spec"]["names"]["kind"] == "Agent")
            .unwrap();
        assert_eq!(agent["spec"]["scope"], "Namespaced");
    }
}
