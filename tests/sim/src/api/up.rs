//! `agent-day2-sim up`'s options and the parts it runs besides the control plane
//! ([`super::real`]): the file server with the base ISO, with `--registry` a container registry
//! holding the release payload ([`start_registry`]), with `--assisted-db-url` cluster 0's
//! database ([`assisted_db`]; pod exec runs `psql` against it, see [`super::exec`]), and
//! `DIR/ready` (lines: API URL, file server base URL, and with `--registry` the registry URL
//! `https://ADDR`).

use crate::baseiso::BaseIsoInfo;
use crate::pki::Ca;
use crate::scenario::Scenario;
use anyhow::Context;
use serde_json::Value;

pub use super::client::parse_docs;
use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};

/// Options of `up` (see main.rs for the flags).
#[derive(Debug, Clone, Default)]
pub struct UpOptions {
    /// Output directory: kubeconfig, ca.crt, ready, files/ (created if missing).
    pub dir: PathBuf,
    pub scenario: Option<PathBuf>,
    /// Serve this ISO instead of building the simulated one.
    pub base_iso: Option<PathBuf>,
    /// API address; default 127.0.0.1 on a free port.
    pub listen: Option<SocketAddr>,
    /// File server address; default the API's IP, port 8080 if free, else a free port.
    pub files_listen: Option<SocketAddr>,
    /// Folders of CRD YAML files loaded before the seed (they replace the permissive ones).
    pub crds: Vec<PathBuf>,
    /// `--registry [ADDR]`: run a container registry on ADDR holding the release payload
    /// (see [`start_registry`]); None: no registry (the seeded release digest is made up).
    pub registry: Option<SocketAddr>,
    /// `--assisted-db-url postgres://USER[:PASSWORD]@HOST:PORT/DB`: seed cluster 0's
    /// assisted-service (namespace `multicluster-engine`, its pod, Secret `postgres`) whose
    /// `postgres` container runs `psql` against this database over pod exec.
    pub assisted_db_url: Option<String>,
    /// `--assisted-schema-version V`: with `assisted_db_url`, the schema version of the
    /// assisted-service tables created there when the database has none (see
    /// [`ensure_assisted_schema`]); None: [`crate::node0schema::DEFAULT_SCHEMA_VERSION`].
    pub assisted_schema_version: Option<String>,
    /// `--volumes-dir DIR`: contents of the PersistentVolumeClaims (`DIR/<namespace>/<claim>/`)
    /// as pod exec's `tar` sees them; default `<dir>/volumes`.
    pub volumes_dir: Option<PathBuf>,
    /// `--real-apiserver [BIN_DIR]`: where the real etcd, kube-apiserver,
    /// kube-controller-manager and kubelet-exec are (see `api::real`); None: where
    /// `scripts/real-components.sh kube` builds them.
    pub real_apiserver: Option<PathBuf>,
}

/// Go architecture name → CoreOS name.
pub(crate) fn coreos_arch(go: &str) -> &str {
    match go {
        "amd64" => "x86_64",
        "arm64" => "aarch64",
        "ppc64le" => "ppc64le",
        "s390x" => "s390x",
        other => other,
    }
}

fn sha256_file(p: &Path) -> anyhow::Result<(String, u64)> {
    use sha2::Digest;
    let mut f = std::fs::File::open(p).with_context(|| format!("base ISO {}", p.display()))?;
    let mut h = sha2::Sha256::new();
    let n = std::io::copy(&mut f, &mut h)?;
    Ok((hex::encode(h.finalize()), n))
}

/// Every document of every `*.yaml`/`*.yml`/`*.json` file in `dir` (sorted by file name).
pub fn load_yaml_dir(dir: &Path) -> anyhow::Result<Vec<(PathBuf, Value)>> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .with_context(|| format!("cannot read {}", dir.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            p.is_file()
                && matches!(
                    p.extension().and_then(|e| e.to_str()),
                    Some("yaml" | "yml" | "json")
                )
        })
        .collect();
    files.sort();
    let mut out = Vec::new();
    for f in files {
        let text = std::fs::read_to_string(&f).with_context(|| format!("cannot read {}", f.display()))?;
        for v in parse_docs(&text).with_context(|| format!("{}", f.display()))? {
            out.push((f.clone(), v));
        }
    }
    Ok(out)
}

/// The seed's own `omit` rule (`seed::omitted`): the resource may carry a group suffix
/// (`machineconfigs.machineconfiguration.openshift.io/99-worker-ssh`).
pub(crate) fn seed_omit_matches(spec: &str, o: &Value) -> bool {
    let kind = o["kind"].as_str().unwrap_or("");
    let ns = o["metadata"]["namespace"].as_str().unwrap_or("");
    let name = o["metadata"]["name"].as_str().unwrap_or("");
    let parts: Vec<&str> = spec.split('/').collect();
    if parts[0].split('.').next().unwrap_or("").to_ascii_lowercase() != crate::seed::plural(kind) {
        return false;
    }
    match parts.as_slice() {
        [_, n] => ns.is_empty() && *n == name,
        [_, s, n] => *s == ns && *n == name,
        [_] => true,
        _ => false,
    }
}

/// What assisted-service does with its database on its first start (gorm AutoMigrate, then
/// gormigrate's `migrations` rows): when the database at `url` has no assisted-service tables
/// (no table `clusters`), creates them with [`crate::node0schema::create`] at `version` and
/// returns `Some(version)`; a database that has them is left untouched (`None`), whatever its
/// version (tests make older or newer ones on purpose).
///
/// Errors: the database cannot be reached, or the creation failed (psql's message).
pub fn ensure_assisted_schema(url: &str, version: &str) -> anyhow::Result<Option<String>> {
    let shown = super::exec::AssistedDb::parse(url)
        .map(|d| format!("{}@{}:{}/{}", d.user, d.host, d.port, d.dbname))
        .unwrap_or_else(|_| "the database".into());
    if crate::node0schema::exists(url).with_context(|| format!("--assisted-db-url: cannot reach {shown}"))? {
        return Ok(None);
    }
    crate::node0schema::create(url, version)
        .with_context(|| format!("--assisted-db-url: creating the assisted-service schema in {shown}"))?;
    Ok(Some(version.to_string()))
}

/// Lays the base ISO into `DIR/files/` (`--base-iso`, else the simulated one for `arch`, a
/// CoreOS architecture name) and serves that folder over HTTP (`--files-listen`, else
/// `client_ip`:8080 if free, else a free port). Returns the ISO's facts and the file server's
/// base URL. Errors: the ISO cannot be copied or built, the address cannot be bound.
pub(crate) async fn serve_base_iso(
    opts: &UpOptions,
    client_ip: IpAddr,
    arch: &str,
) -> anyhow::Result<(BaseIsoInfo, String)> {
    let files_root = opts.dir.join("files");
    std::fs::create_dir_all(&files_root)?;
    let base_iso: BaseIsoInfo = match &opts.base_iso {
        Some(p) => {
            let file_name = p
                .file_name()
                .and_then(|n| n.to_str())
                .unwrap_or("base.iso")
                .to_string();
            let dest = files_root.join(&file_name);
            let _ = std::fs::remove_file(&dest);
            if std::fs::hard_link(p, &dest).is_err() {
                std::fs::copy(p, &dest)
                    .with_context(|| format!("cannot copy {} to {}", p.display(), dest.display()))?;
            }
            let (sha256, size) = sha256_file(&dest)?;
            BaseIsoInfo {
                path: dest,
                file_name,
                sha256,
                size,
            }
        }
        None => {
            let name = crate::baseiso::iso_file_name(arch);
            crate::baseiso::build_base_iso(&files_root.join(&name), arch)?
        }
    };
    let files_listener = match opts.files_listen {
        Some(a) => tokio::net::TcpListener::bind(a)
            .await
            .with_context(|| format!("cannot listen on {a}"))?,
        None => match tokio::net::TcpListener::bind(SocketAddr::new(client_ip, 8080)).await {
            Ok(l) => l,
            Err(_) => tokio::net::TcpListener::bind(SocketAddr::new(client_ip, 0)).await?,
        },
    };
    let files_base_url = format!("http://{}", files_listener.local_addr()?);
    tokio::spawn(async move {
        if let Err(e) = crate::files::serve_files(files_listener, files_root).await {
            eprintln!("agent-day2-sim: file server stopped: {e:#}");
        }
    });
    Ok((base_iso, files_base_url))
}

/// `--assisted-db-url` parsed, its database given assisted-service's tables when it has none
/// ([`ensure_assisted_schema`], said on stderr); None without the option.
/// Errors: a URL that does not parse, a database that cannot be reached or written.
pub async fn assisted_db(opts: &UpOptions) -> anyhow::Result<Option<super::exec::AssistedDb>> {
    let Some(url) = opts.assisted_db_url.clone() else {
        return Ok(None);
    };
    let db = super::exec::AssistedDb::parse(&url).context("--assisted-db-url")?;
    let version = opts
        .assisted_schema_version
        .clone()
        .unwrap_or_else(|| crate::node0schema::DEFAULT_SCHEMA_VERSION.to_string());
    let made = tokio::task::spawn_blocking(move || ensure_assisted_schema(&url, &version)).await??;
    if let Some(v) = made {
        eprintln!("agent-day2-sim: created the assisted-service schema (version {v}) in --assisted-db-url");
    }
    Ok(Some(db))
}

/// Writes `DIR/failed` (the error that stopped `up`, one paragraph) under a temporary name
/// and renames it, so a loop waiting for `DIR/ready` can stop too: `while [ ! -f DIR/ready ] &&
/// [ ! -f DIR/failed ]`. Best effort: a directory that cannot be written is said on stderr.
pub fn write_failed(dir: &std::path::Path, error: &str) {
    let tmp = dir.join(".failed.tmp");
    let r = std::fs::create_dir_all(dir)
        .and_then(|_| std::fs::write(&tmp, format!("{error}\n")))
        .and_then(|_| std::fs::rename(&tmp, dir.join("failed")));
    if let Err(e) = r {
        eprintln!("cannot write {}: {e}", dir.join("failed").display());
    }
}

/// Writes `DIR/ready` (the API URL, the file server's base URL, and with `--registry` the
/// registry's URL, one per line) under a temporary name and renames it, so a reader that sees
/// the file sees all of it. Both `up` modes end their start-up with it.
pub fn write_ready(
    dir: &Path,
    api_url: &str,
    files_base_url: &str,
    registry: Option<&RunningRegistry>,
) -> std::io::Result<()> {
    let ready_tmp = dir.join(".ready.tmp");
    let registry_line = registry
        .map(|r| format!("{}\n", r.process.url()))
        .unwrap_or_default();
    std::fs::write(
        &ready_tmp,
        format!("{api_url}\n{files_base_url}\n{registry_line}"),
    )?;
    std::fs::rename(&ready_tmp, dir.join("ready"))
}

/// The simulator's running registry and what the seed records about it.
pub struct RunningRegistry {
    /// The docker-registry child (killed on drop).
    pub process: crate::registry::RegistryProcess,
    /// Host and credentials for the pull secret and the registry CA ConfigMap.
    pub seed: crate::seed::SeedRegistry,
    /// What was pushed.
    pub payload: crate::registry::PushedPayload,
}

/// `up --registry ADDR`: starts docker-registry on `addr` with storage in `DIR/registry/`
/// (emptied first), HTTPS with a certificate from the simulator's CA `ca` (SANs: the IP and
/// [`crate::registry::REGISTRY_DNS`]), htpasswd user [`crate::registry::DEFAULT_USER`] with a
/// random password; pushes the release payload of `scenario` (its version; both amd64 and arm64
/// in manifest lists when `multiArch`; machine-os-images holding the simulator's base ISO for
/// the control plane's architecture, the simulated one for the other) and records it in
/// `scenario`:
///
/// - connected: release in `ADDR/ocp/release`, components in `ADDR/ocp/art-dev` (named so in
///   image-references); `releaseImage` = `ADDR/ocp/release@sha256:<digest>`;
/// - `disconnected`: everything in `ADDR/ocp4/openshift4` (oc-mirror's layout), image-references
///   naming `quay.io/openshift-release-dev/ocp-v4.0-art-dev@…`; `releaseImage` =
///   `quay.io/openshift-release-dev/ocp-release@sha256:<digest>`; `mirrorRegistry` defaults to
///   ADDR (so the seeded ImageDigestMirrorSet points here).
///
/// A `releaseImage` or `mirrorRegistry` set in the scenario is kept (with a warning on stderr):
/// the cluster then names something this registry may not hold.
/// Errors: docker-registry missing or not starting (with its log), a failed push.
pub async fn start_registry(
    addr: SocketAddr,
    dir: &Path,
    ca: &Ca,
    scenario: &mut Scenario,
    base_iso: &BaseIsoInfo,
) -> anyhow::Result<RunningRegistry> {
    use crate::registry::{
        push_release_payload, PayloadSpec, RegistryOptions, RegistryProcess, DEFAULT_USER, REGISTRY_DNS,
    };
    let rdir = dir.join("registry");
    if rdir.exists() {
        std::fs::remove_dir_all(&rdir).with_context(|| format!("cannot empty {}", rdir.display()))?;
    }
    let cert = ca.issue_server(&[REGISTRY_DNS.to_string()], &[addr.ip()])?;
    let password = crate::registry::random_password()?;
    let process = RegistryProcess::start(RegistryOptions {
        addr,
        dir: rdir,
        tls: Some((cert.cert_pem.clone(), cert.key_pem.clone())),
        user: Some((DEFAULT_USER.to_string(), password.clone())),
    })
    .context("--registry")?;
    let host = process.host();
    let own_arch = crate::seed::go_arch(&scenario.architecture).to_string();
    let arches: Vec<String> = if scenario.multi_arch {
        vec!["amd64".into(), "arm64".into()]
    } else {
        vec![own_arch.clone()]
    };
    let mut isos = std::collections::BTreeMap::new();
    for a in &arches {
        let ra = coreos_arch(a).to_string();
        let bytes = if *a == own_arch {
            std::fs::read(&base_iso.path).with_context(|| format!("base ISO {}", base_iso.path.display()))?
        } else {
            match crate::baseiso::base_iso_bytes(&ra) {
                Ok(b) => b,
                // Only x86_64 and aarch64 are simulated: no ISO in that machine-os-images.
                Err(_) => continue,
            }
        };
        isos.insert(ra, bytes);
    }
    let (release_repo, components_repo, named_as) = if scenario.disconnected {
        (
            "ocp4/openshift4",
            "ocp4/openshift4",
            "quay.io/openshift-release-dev/ocp-v4.0-art-dev".to_string(),
        )
    } else {
        ("ocp/release", "ocp/art-dev", format!("{host}/ocp/art-dev"))
    };
    let spec = PayloadSpec {
        version: scenario.version.clone(),
        arches,
        release_repo: release_repo.into(),
        components_repo: components_repo.into(),
        named_as,
        omit: Vec::new(),
        isos,
    };
    let pusher = process.pusher(Some(&ca.cert_pem))?;
    let payload = push_release_payload(&pusher, &spec).await.with_context(|| {
        format!(
            "--registry: pushing the release payload to {host}:\n{}",
            process.log()
        )
    })?;
    let pull_spec = if scenario.disconnected {
        format!(
            "quay.io/openshift-release-dev/ocp-release@{}",
            payload.release_digest
        )
    } else {
        payload.release.clone()
    };
    match &scenario.release_image {
        Some(r) if *r != pull_spec => {
            eprintln!("agent-day2-sim: warning: the scenario's releaseImage {r} is kept; the registry holds {pull_spec}")
        }
        _ => scenario.release_image = Some(pull_spec),
    }
    if scenario.disconnected {
        match &scenario.mirror_registry {
            Some(m) if *m != host => {
                eprintln!("agent-day2-sim: warning: the scenario's mirrorRegistry {m} is kept; the payload is on {host}")
            }
            _ => scenario.mirror_registry = Some(host.clone()),
        }
    }
    Ok(RunningRegistry {
        process,
        seed: crate::seed::SeedRegistry {
            host,
            user: DEFAULT_USER.to_string(),
            password,
        },
        payload,
    })
}
