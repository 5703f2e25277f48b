//! Release payload reads against a REAL registry: Debian's `docker-registry` (Distribution v2)
//! started by each test on an address of the test's own network namespace, holding a small
//! fake release payload the test pushes with the simulator's pusher
//! (`agent_day2_sim::registry::push_release_payload`, also used by `agent-day2-sim up
//! --registry`): image-references in a gzip'd layer under a plain-tar top layer; four
//! agent-installer images; machine-os-images with the simulated CoreOS ISO and its .sha256;
//! manifest lists for multi-arch.
//!
//! Needs root (network namespace) and /usr/bin/docker-registry (scripts/setup.sh installs it);
//! each test fails saying which is missing otherwise.

use crate::support::registry as support;

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::time::{Duration, Instant};

use agent_day2::cluster::{MirrorEntry, Mirrors, PullSecret};
use agent_day2::registry::{
    machine_os_iso, ComponentImages, RegistryContext, RegistryError, ReleasePayload, RetryPolicy,
};
use base64::Engine;
use support::*;

/// Where the registry listens inside each test's namespace.
const REG: &str = "192.168.111.6:5000";

/// A network namespace and Debian's docker-registry, or the test fails saying which is missing.
fn setup() -> bool {
    agent_day2_sim::harness::require_netns();
    assert!(
        Path::new(REGISTRY_BIN).exists(),
        "{REGISTRY_BIN} is missing: apt-get install docker-registry (scripts/test.sh installs it through scripts/setup.sh)"
    );
    true
}

fn rt() -> tokio::runtime::Runtime {
    // Built after entering the namespace: its threads inherit it.
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

fn ctx(cache: &Path) -> RegistryContext {
    RegistryContext {
        // The test registry speaks plain HTTP, which needs --insecure (as with oc).
        insecure: true,
        arch: "x86_64".into(),
        cache_dir: Some(cache.to_path_buf()),
        retry: RetryPolicy {
            attempts: 5,
            initial_backoff: Duration::from_millis(50),
            max_backoff: Duration::from_millis(400),
        },
        ..Default::default()
    }
}

fn dockerconfig(registry: &str, user: &str, pass: &str) -> String {
    let auth = base64::engine::general_purpose::STANDARD.encode(format!("{user}:{pass}"));
    format!(r#"{{"auths":{{"{registry}":{{"auth":"{auth}","email":"x@example.com"}}}}}}"#)
}

/// What the test pushed.
struct Payload {
    /// `host/ocp/release@sha256:…` (the index for multi-arch).
    release: String,
    /// The digest of that manifest.
    release_digest: String,
    /// Expected answer for x86_64.
    amd64: ComponentImages,
    /// Expected answer for aarch64 (multi-arch only; differs on purpose in api_server).
    arm64: Option<ComponentImages>,
    /// ISO bytes per arch.
    iso_x86_64: Vec<u8>,
    iso_aarch64: Option<Vec<u8>>,
}

/// Pushes the payload with the simulator's pusher (`agent_day2_sim::registry`): component
/// images into `ocp/art-dev`, the release into `ocp/release` (tag `4.18.0-x86_64`; a manifest
/// list `4.18.0-multi` of amd64 and arm64 for `multi`, whose arm64 components differ).
/// `named_as` is the repository the image-references name them by (this registry's, or
/// `quay.io/…` for the disconnected case). `omit` leaves a tag out of image-references.
async fn push_payload(p: &Pusher, named_as: &str, multi: bool, omit: Option<&str>) -> Payload {
    let iso_x86_64 = base_iso("x86_64");
    let iso_aarch64 = multi.then(|| base_iso("aarch64"));
    let mut isos = std::collections::BTreeMap::new();
    isos.insert("x86_64".to_string(), iso_x86_64.clone());
    if let Some(a) = &iso_aarch64 {
        isos.insert("aarch64".to_string(), a.clone());
    }
    let spec = PayloadSpec {
        version: "4.18.0".into(),
        arches: if multi {
            vec!["amd64".into(), "arm64".into()]
        } else {
            vec!["amd64".into()]
        },
        release_repo: "ocp/release".into(),
        components_repo: "ocp/art-dev".into(),
        named_as: named_as.into(),
        omit: omit.map(String::from).into_iter().collect(),
        isos,
    };
    let pushed = push_release_payload(&p.sim, &spec).await.unwrap();
    let expected = |a: &ArchRelease| {
        let get = |t: &str| a.reference(t).unwrap_or_default().to_string();
        ComponentImages {
            api_server: get("agent-installer-api-server"),
            node_agent: get("agent-installer-node-agent"),
            orchestrator: get("agent-installer-orchestrator"),
            utils: get("agent-installer-utils"),
            machine_os_images: Some(get(MACHINE_OS_IMAGES)),
        }
    };
    Payload {
        release: pushed.release.clone(),
        release_digest: pushed.release_digest.clone(),
        amd64: expected(&pushed.arches["amd64"]),
        arm64: pushed.arches.get("arm64").map(expected),
        iso_x86_64,
        iso_aarch64,
    }
}

fn mode(p: &Path) -> u32 {
    std::fs::metadata(p).unwrap().permissions().mode() & 0o777
}

#[test]
fn happy_path_by_digest_reads_components_and_iso_and_caches_them() {
    if !setup() {
        return;
    }
    let rt = rt();
    let reg = Registry::start(REG, RegistryOpts::default());
    let host = reg.host();
    let payload = rt.block_on(push_payload(
        &reg.pusher(None),
        &format!("{host}/ocp/art-dev"),
        false,
        None,
    ));
    let cache = tempfile::tempdir().unwrap();
    let c = ctx(cache.path());

    let got = rt
        .block_on(ReleasePayload::component_images(&payload.release, &c))
        .unwrap();
    assert_eq!(got, payload.amd64);
    assert!(got.api_server.starts_with(&format!("{host}/ocp/art-dev@sha256:")));

    // The cache entry: <root>/releases/<digest>.json, 0600 in a 0700 directory.
    let entry = cache
        .path()
        .join("releases")
        .join(format!("{}.json", payload.release_digest));
    assert!(entry.is_file(), "no cache entry at {}", entry.display());
    assert_eq!(mode(&entry), 0o600);
    assert_eq!(mode(&cache.path().join("releases")), 0o700);
    let cached: serde_json::Value = serde_json::from_slice(&std::fs::read(&entry).unwrap()).unwrap();
    assert_eq!(
        cached["platforms"]["x86_64"]["apiServer"],
        serde_json::json!(got.api_server)
    );

    // The ISO from machine-os-images, byte for byte.
    let out = tempfile::tempdir().unwrap();
    let dest = out.path().join("base.x86_64.iso");
    let mos = got.machine_os_images.clone().unwrap();
    let path = rt.block_on(machine_os_iso(&mos, "amd64", &c, &dest)).unwrap();
    assert_eq!(path.as_deref(), Some(dest.as_path()));
    assert!(
        std::fs::read(&dest).unwrap() == payload.iso_x86_64,
        "extracted ISO differs from the pushed one"
    );
    // No temporary file left behind.
    let names: Vec<_> = std::fs::read_dir(out.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(names.len(), 1, "{names:?}");

    // No ISO for an architecture the image does not carry: None (the caller falls back).
    let none = rt
        .block_on(machine_os_iso(&mos, "aarch64", &c, &out.path().join("a.iso")))
        .unwrap();
    assert_eq!(none, None);
    assert!(!out.path().join("a.iso").exists());
}

#[test]
fn cache_hit_needs_no_registry() {
    if !setup() {
        return;
    }
    let rt = rt();
    let mut reg = Registry::start(REG, RegistryOpts::default());
    let payload = rt.block_on(push_payload(
        &reg.pusher(None),
        &format!("{}/ocp/art-dev", reg.host()),
        false,
        None,
    ));
    let cache = tempfile::tempdir().unwrap();
    let c = ctx(cache.path());
    let first = rt
        .block_on(ReleasePayload::component_images(&payload.release, &c))
        .unwrap();
    reg.stop();
    let second = rt
        .block_on(ReleasePayload::component_images(&payload.release, &c))
        .unwrap();
    assert_eq!(first, second);
    // A different cache root misses, and with the registry down that is an error naming it.
    let other = tempfile::tempdir().unwrap();
    let mut c2 = ctx(other.path());
    c2.retry.attempts = 2;
    let err = rt
        .block_on(ReleasePayload::component_images(&payload.release, &c2))
        .unwrap_err();
    let msg = err.to_string();
    assert!(matches!(err, RegistryError::Unavailable { .. }), "{msg}");
    assert!(msg.contains(REG) && msg.contains("after 2 tries"), "{msg}");
}

#[test]
fn multi_arch_manifest_list_picks_the_platform_asked_for() {
    if !setup() {
        return;
    }
    let rt = rt();
    let reg = Registry::start(REG, RegistryOpts::default());
    let payload = rt.block_on(push_payload(
        &reg.pusher(None),
        &format!("{}/ocp/art-dev", reg.host()),
        true,
        None,
    ));
    let cache = tempfile::tempdir().unwrap();
    let mut c = ctx(cache.path());
    c.arch = "arm64".into();
    let arm = rt
        .block_on(ReleasePayload::component_images(&payload.release, &c))
        .unwrap();
    assert_eq!(Some(&arm), payload.arm64.as_ref());
    assert_ne!(arm.api_server, payload.amd64.api_server);
    c.arch = "x86_64".into();
    let amd = rt
        .block_on(ReleasePayload::component_images(&payload.release, &c))
        .unwrap();
    assert_eq!(amd, payload.amd64);
    // Both architectures are cached under the one index digest.
    let entry = cache
        .path()
        .join("releases")
        .join(format!("{}.json", payload.release_digest));
    let cached: serde_json::Value = serde_json::from_slice(&std::fs::read(&entry).unwrap()).unwrap();
    assert_eq!(
        cached["platforms"]["aarch64"]["apiServer"],
        serde_json::json!(arm.api_server)
    );
    assert_eq!(
        cached["platforms"]["x86_64"]["apiServer"],
        serde_json::json!(amd.api_server)
    );

    // machine-os-images is a manifest list too: aarch64 gets the aarch64 ISO.
    let out = tempfile::tempdir().unwrap();
    let dest = out.path().join("base.aarch64.iso");
    rt.block_on(machine_os_iso(
        arm.machine_os_images.as_ref().unwrap(),
        "aarch64",
        &c,
        &dest,
    ))
    .unwrap()
    .unwrap();
    assert!(Some(std::fs::read(&dest).unwrap()) == payload.iso_aarch64);

    // A platform the list lacks is named, with what it has.
    c.arch = "s390x".into();
    let err = rt
        .block_on(ReleasePayload::component_images(&payload.release, &c))
        .unwrap_err();
    let msg = err.to_string();
    assert!(
        msg.contains("linux/s390x") && msg.contains("linux/amd64, linux/arm64"),
        "{msg}"
    );
}

#[test]
fn disconnected_digest_mirrors_are_tried_in_order_and_the_source_is_never_needed() {
    if !setup() {
        return;
    }
    let rt = rt();
    let reg = Registry::start(REG, RegistryOpts::default());
    let host = reg.host();
    // image-references names quay.io, as a real payload does.
    let art_src = "quay.io/openshift-release-dev/ocp-v4.0-art-dev";
    let payload = rt.block_on(push_payload(&reg.pusher(None), art_src, false, None));
    let digest = payload.release_digest.clone();
    let release = format!("quay.io/openshift-release-dev/ocp-release@{digest}");
    // Nothing listens on .7: the first mirror fails, the second answers.
    let dead = "192.168.111.7:5000";
    let mirrors = Mirrors {
        digest_mirrors: vec![
            MirrorEntry {
                source: "quay.io/openshift-release-dev/ocp-release".into(),
                mirrors: vec![format!("{dead}/ocp/release"), format!("{host}/ocp/release")],
                mirror_source_policy: None,
            },
            MirrorEntry {
                source: art_src.into(),
                mirrors: vec![format!("{host}/ocp/art-dev")],
                mirror_source_policy: Some("NeverContactSource".into()),
            },
        ],
        ..Default::default()
    };
    let cache = tempfile::tempdir().unwrap();
    let mut c = ctx(cache.path());
    c.mirrors = mirrors.clone();
    // Slow backoff: had the source (no DNS, no route in the namespace) been tried before the
    // working mirror, the call would take seconds.
    c.retry = RetryPolicy {
        attempts: 3,
        initial_backoff: Duration::from_millis(1500),
        max_backoff: Duration::from_secs(3),
    };
    // The dead mirror refuses connections at once, which is a retried connection error:
    // 1.5 s + 3 s before moving on. The source after the good mirror is never reached.
    let t = Instant::now();
    let got = rt
        .block_on(ReleasePayload::component_images(&release, &c))
        .unwrap();
    assert_eq!(got, payload.amd64);
    assert!(got.api_server.starts_with(art_src), "{}", got.api_server);
    assert!(t.elapsed() < Duration::from_secs(9), "took {:?}", t.elapsed());

    // The ISO through the art-dev mirror (NeverContactSource).
    let out = tempfile::tempdir().unwrap();
    let dest = out.path().join("base.iso");
    rt.block_on(machine_os_iso(
        got.machine_os_images.as_ref().unwrap(),
        "x86_64",
        &c,
        &dest,
    ))
    .unwrap()
    .unwrap();
    assert!(std::fs::read(&dest).unwrap() == payload.iso_x86_64);

    // NeverContactSource with only a dead mirror: the error names the mirror, and quay.io is
    // never contacted (it would be listed as "source").
    let mut c2 = ctx(tempfile::tempdir().unwrap().path());
    c2.retry.attempts = 2;
    c2.mirrors = Mirrors {
        digest_mirrors: vec![MirrorEntry {
            source: "quay.io/openshift-release-dev".into(),
            mirrors: vec![format!("{dead}/ocp")],
            mirror_source_policy: Some("NeverContactSource".into()),
        }],
        ..Default::default()
    };
    let err = rt
        .block_on(ReleasePayload::component_images(&release, &c2))
        .unwrap_err()
        .to_string();
    eprintln!("message: {err}");
    assert!(err.contains(&format!("{dead}/ocp/ocp-release@{digest}")), "{err}");
    assert!(!err.contains("source"), "{err}");

    // Digest mirrors do not apply to a reference by tag: that goes to quay.io, which cannot be
    // reached from here; a tag mirror (ImageTagMirrorSet) does apply.
    let by_tag = "quay.io/openshift-release-dev/ocp-release:4.18.0-x86_64";
    let mut c3 = ctx(tempfile::tempdir().unwrap().path());
    c3.retry.attempts = 1;
    c3.mirrors = mirrors.clone();
    let err = rt
        .block_on(ReleasePayload::component_images(by_tag, &c3))
        .unwrap_err()
        .to_string();
    assert!(err.contains("quay.io") && !err.contains(&host), "{err}");
    c3.mirrors.tag_mirrors = vec![MirrorEntry {
        source: "quay.io/openshift-release-dev/ocp-release".into(),
        mirrors: vec![format!("{host}/ocp/release")],
        mirror_source_policy: None,
    }];
    assert_eq!(
        rt.block_on(ReleasePayload::component_images(by_tag, &c3))
            .unwrap(),
        payload.amd64
    );
}

#[test]
fn refused_pull_secret_is_a_clear_error_and_registry_config_overrides_it() {
    if !setup() {
        return;
    }
    let rt = rt();
    let opts = RegistryOpts {
        user: Some(("puller".into(), "right-password".into())),
        ..Default::default()
    };
    let reg = Registry::start(REG, opts);
    let host = reg.host();
    let payload = rt.block_on(push_payload(
        &reg.pusher(None),
        &format!("{host}/ocp/art-dev"),
        false,
        None,
    ));
    let files = tempfile::tempdir().unwrap();

    // Wrong password in the pull secret → 401, named, not retried.
    let mut c = ctx(tempfile::tempdir().unwrap().path());
    c.retry.initial_backoff = Duration::from_secs(5);
    c.pull_secret = Some(PullSecret(dockerconfig(&host, "puller", "wrong-password")));
    let t = Instant::now();
    let err = rt
        .block_on(ReleasePayload::component_images(&payload.release, &c))
        .unwrap_err();
    assert!(
        t.elapsed() < Duration::from_secs(4),
        "a refusal must not be retried"
    );
    let msg = err.to_string();
    eprintln!("message: {msg}");
    assert!(matches!(err, RegistryError::Refused { .. }), "{msg}");
    assert!(msg.contains(&format!("registry {host} refused")), "{msg}");
    assert!(
        msg.contains("pull secret") && msg.contains("--registry-config"),
        "{msg}"
    );
    assert!(!msg.contains("wrong-password"), "the secret leaked: {msg}");

    // No entry at all → anonymous, refused, said so.
    c.pull_secret = Some(PullSecret(dockerconfig("other.example.com", "a", "b")));
    let msg = rt
        .block_on(ReleasePayload::component_images(&payload.release, &c))
        .unwrap_err()
        .to_string();
    assert!(
        msg.contains("anonymous access") && msg.contains("has no entry"),
        "{msg}"
    );

    // --registry-config with the right password replaces the (wrong) pull secret.
    c.pull_secret = Some(PullSecret(dockerconfig(&host, "puller", "wrong-password")));
    c.registry_config = Some(write_file(
        files.path(),
        "auth.json",
        &dockerconfig(&host, "puller", "right-password"),
    ));
    let got = rt
        .block_on(ReleasePayload::component_images(&payload.release, &c))
        .unwrap();
    assert_eq!(got, payload.amd64);
    let out = tempfile::tempdir().unwrap();
    let dest = out.path().join("base.iso");
    rt.block_on(machine_os_iso(
        got.machine_os_images.as_ref().unwrap(),
        "x86_64",
        &c,
        &dest,
    ))
    .unwrap()
    .unwrap();
    assert!(std::fs::read(&dest).unwrap() == payload.iso_x86_64);

    // A wrong --registry-config is named as such.
    let bad = write_file(files.path(), "bad.json", &dockerconfig(&host, "puller", "nope"));
    let mut c2 = ctx(tempfile::tempdir().unwrap().path());
    c2.pull_secret = Some(PullSecret(dockerconfig(&host, "puller", "right-password")));
    c2.registry_config = Some(bad.clone());
    let msg = rt
        .block_on(ReleasePayload::component_images(&payload.release, &c2))
        .unwrap_err()
        .to_string();
    assert!(
        msg.contains(&format!("--registry-config {}", bad.display())),
        "{msg}"
    );
    // ...and the right pull secret alone works.
    c2.registry_config = None;
    assert_eq!(
        rt.block_on(ReleasePayload::component_images(&payload.release, &c2))
            .unwrap(),
        payload.amd64
    );
    // A registry-config that is not a dockerconfigjson (fresh cache: a hit needs no credentials).
    c2.cache_dir = Some(files.path().join("cache2"));
    c2.registry_config = Some(write_file(files.path(), "junk.json", "[1,2]"));
    let msg = rt
        .block_on(ReleasePayload::component_images(&payload.release, &c2))
        .unwrap_err()
        .to_string();
    assert!(
        msg.contains("junk.json") && msg.contains("not a dockerconfigjson"),
        "{msg}"
    );
}

#[test]
fn tls_registry_with_the_clusters_ca() {
    if !setup() {
        return;
    }
    let rt = rt();
    let ca = agent_day2_sim::pki::Ca::generate("mirror-registry-ca").unwrap();
    let leaf = ca.issue_server(&[], &["192.168.111.6".parse().unwrap()]).unwrap();
    let reg = Registry::start(
        REG,
        RegistryOpts {
            tls: Some((leaf.cert_pem.clone(), leaf.key_pem.clone())),
            ..Default::default()
        },
    );
    let host = reg.host();
    let payload = rt.block_on(push_payload(
        &reg.pusher(Some(&ca.cert_pem)),
        &format!("{host}/ocp/art-dev"),
        false,
        None,
    ));

    // Verified TLS with the CA as an extra root (no --insecure).
    let mut c = ctx(tempfile::tempdir().unwrap().path());
    c.insecure = false;
    // A bundle: another CA first, as in a real trust bundle.
    let other = agent_day2_sim::pki::Ca::generate("unrelated").unwrap();
    c.extra_ca_pems = vec![format!("{}{}", other.cert_pem, ca.cert_pem)];
    let got = rt
        .block_on(ReleasePayload::component_images(&payload.release, &c))
        .unwrap();
    assert_eq!(got, payload.amd64);

    // Without the CA the certificate is refused, and said so.
    let mut c2 = ctx(tempfile::tempdir().unwrap().path());
    c2.insecure = false;
    c2.retry.attempts = 2;
    let msg = rt
        .block_on(ReleasePayload::component_images(&payload.release, &c2))
        .unwrap_err()
        .to_string();
    eprintln!("message: {msg}");
    assert!(msg.to_lowercase().contains("certificate"), "{msg}");

    // --insecure skips verification (and stays on HTTPS: the registry speaks nothing else).
    c2.insecure = true;
    assert_eq!(
        rt.block_on(ReleasePayload::component_images(&payload.release, &c2))
            .unwrap(),
        payload.amd64
    );
}

#[test]
fn a_registry_answering_503_twice_then_200_is_retried() {
    if !setup() {
        return;
    }
    let rt = rt();
    let reg = Registry::start(REG, RegistryOpts::default());
    let host = reg.host();
    let proxy = FlakyProxy::start("192.168.111.6:5001", reg.addr, 2);
    let via = proxy.addr.to_string();
    // image-references names the proxy, so the ISO read goes through it too.
    let payload = rt.block_on(push_payload(
        &reg.pusher(None),
        &format!("{via}/ocp/art-dev"),
        false,
        None,
    ));
    let release = payload.release.replace(&host, &via);
    let c = ctx(tempfile::tempdir().unwrap().path());
    let got = rt
        .block_on(ReleasePayload::component_images(&release, &c))
        .unwrap();
    assert_eq!(got, payload.amd64);
    assert_eq!(proxy.failed.load(std::sync::atomic::Ordering::SeqCst), 2);
    let seen = proxy.seen.lock().unwrap().clone();
    let manifest_gets = seen.iter().filter(|p| p.contains("/manifests/")).count();
    assert!(
        manifest_gets >= 3,
        "the manifest was not asked again after the 503s: {seen:?}"
    );

    // A registry that keeps answering 503: an error after the configured tries.
    let always = FlakyProxy::start("192.168.111.6:5002", reg.addr, usize::MAX);
    let mut c2 = ctx(tempfile::tempdir().unwrap().path());
    c2.retry.attempts = 3;
    let err = rt
        .block_on(ReleasePayload::component_images(
            &payload.release.replace(&host, &always.addr.to_string()),
            &c2,
        ))
        .unwrap_err();
    let msg = err.to_string();
    eprintln!("message: {msg}");
    assert!(msg.contains("after 3 tries") && msg.contains("503"), "{msg}");
    assert_eq!(always.failed.load(std::sync::atomic::Ordering::SeqCst), 3);
}

#[test]
fn a_missing_component_tag_is_named() {
    if !setup() {
        return;
    }
    let rt = rt();
    let reg = Registry::start(REG, RegistryOpts::default());
    let payload = rt.block_on(push_payload(
        &reg.pusher(None),
        &format!("{}/ocp/art-dev", reg.host()),
        false,
        Some("agent-installer-orchestrator"),
    ));
    let c = ctx(tempfile::tempdir().unwrap().path());
    let err = rt
        .block_on(ReleasePayload::component_images(&payload.release, &c))
        .unwrap_err();
    let msg = err.to_string();
    assert!(matches!(err, RegistryError::MissingTag { .. }), "{msg}");
    assert!(
        msg.contains("\"agent-installer-orchestrator\"") && msg.contains(&payload.release),
        "{msg}"
    );
    // A manifest that does not exist: not found, naming the image.
    let missing = format!("{}/ocp/release@sha256:{}", reg.host(), "ab".repeat(32));
    let msg = rt
        .block_on(ReleasePayload::component_images(&missing, &c))
        .unwrap_err()
        .to_string();
    assert!(msg.contains(&missing) && msg.contains("not found"), "{msg}");
}

/// Set in the child process that runs [`proxies_from_the_environment_inner`].
const PROXY_CHILD: &str = "AGENT_DAY2_REGISTRY_PROXY_CHILD";

#[test]
fn https_proxy_http_proxy_and_no_proxy_are_honoured() {
    if !setup() {
        return;
    }
    // Proxy variables are process-wide: run the check in a child process of this test binary,
    // with them set from its start (no other test sees them).
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "--ignored",
            "--exact",
            crate::test_name(module_path!(), "proxies_from_the_environment_inner").as_str(),
            "--nocapture",
            "--test-threads=1",
        ])
        .env(PROXY_CHILD, "1")
        .env("HTTPS_PROXY", "http://192.168.111.6:5003")
        .env("HTTP_PROXY", "http://192.168.111.6:5003")
        .env("NO_PROXY", "192.168.111.6")
        .output()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "{text}");
    assert!(text.contains("1 passed"), "{text}");
    assert!(text.contains("proxy check done"), "{text}");
}

#[test]
#[ignore = "run by https_proxy_http_proxy_and_no_proxy_are_honoured with the proxy variables set"]
fn proxies_from_the_environment_inner() {
    assert_eq!(
        std::env::var(PROXY_CHILD).as_deref(),
        Ok("1"),
        "only meaningful as the child of https_proxy_http_proxy_and_no_proxy_are_honoured (which runs it)"
    );
    setup();
    let rt = rt();
    let reg = Registry::start(REG, RegistryOpts::default());
    let proxy = FlakyProxy::start("192.168.111.6:5003", reg.addr, 0);
    // NO_PROXY covers the registry's own address: pushing and pulling it go direct.
    let payload = rt.block_on(push_payload(
        &reg.pusher(None),
        &format!("{}/ocp/art-dev", reg.host()),
        false,
        None,
    ));
    let c = ctx(tempfile::tempdir().unwrap().path());
    assert_eq!(
        rt.block_on(ReleasePayload::component_images(&payload.release, &c))
            .unwrap(),
        payload.amd64
    );
    let seen = proxy.seen.lock().unwrap().clone();
    assert!(seen.is_empty(), "NO_PROXY was not honoured: {seen:?}");
    // A name that does not resolve here is reachable only through the proxy. With --insecure
    // HTTPS goes first (a CONNECT through HTTPS_PROXY, which the registry cannot tunnel), then
    // plain HTTP through HTTP_PROXY.
    let release = payload.release.replace(&reg.host(), "registry.invalid:5000");
    let c = ctx(tempfile::tempdir().unwrap().path());
    let got = rt
        .block_on(ReleasePayload::component_images(&release, &c))
        .unwrap();
    assert_eq!(got, payload.amd64);
    let seen = proxy.seen.lock().unwrap().clone();
    assert!(
        seen.iter()
            .any(|l| l.starts_with("CONNECT registry.invalid:5000")),
        "HTTPS_PROXY unused: {seen:?}"
    );
    assert!(
        seen.iter()
            .any(|l| l.starts_with("GET http://registry.invalid:5000/v2/ocp/release/manifests/")),
        "HTTP_PROXY unused: {seen:?}"
    );
    eprintln!("proxy check done");
}
