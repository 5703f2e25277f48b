//! `agent-day2-sim up`: PKI, the HTTPS API server, the file server with the base ISO, with
//! `--registry` a container registry holding the release payload ([`start_registry`]), with
//! `--assisted-db-url` cluster 0's assisted-service pod (pod exec runs `psql` against that
//! database, see [`super::exec`]), the seeded cluster, `DIR/kubeconfig`, `DIR/ca.crt` and `DIR/ready` (lines: API URL, file server
//! base URL, and with `--registry` the registry URL `https://ADDR`).

use super::authz::{UserInfo, NODE_BOOTSTRAPPER};
use super::registry::{self, Registry};
use super::server::{new_token, Server};
use super::store::State;
use crate::pki::{verify_client_cert, Ca};
use crate::scenario::Scenario;
use crate::seed::{BaseIsoInfo, SeedContext};
use anyhow::Context;
use hyper_util::rt::{TokioExecutor, TokioIo};
use serde_json::Value;
use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

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
    /// `--real-apiserver [BIN_DIR]`: run the real etcd, kube-apiserver and
    /// kube-controller-manager from BIN_DIR instead of the home-made API server (see
    /// [`super::real`]); None: the home-made server.
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

/// Splits a multi-document YAML text into JSON values (empty documents skipped).
pub fn parse_docs(text: &str) -> anyhow::Result<Vec<Value>> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let flush = |cur: &mut String, out: &mut Vec<Value>| -> anyhow::Result<()> {
        if cur
            .lines()
            .any(|l| !l.trim().is_empty() && !l.trim_start().starts_with('#'))
        {
            let v: Value = serde_saphyr::from_str(cur).map_err(|e| anyhow::anyhow!("{e}"))?;
            if !v.is_null() {
                out.push(v);
            }
        }
        cur.clear();
        Ok(())
    };
    for line in text.lines() {
        if line.trim_end() == "---" || line.starts_with("--- ") {
            flush(&mut cur, &mut out)?;
        } else {
            cur.push_str(line);
            cur.push('\n');
        }
    }
    flush(&mut cur, &mut out)?;
    Ok(out)
}

/// `resource/namespace/name` or `resource/name` of an object, for the scenario's `omit`.
fn omit_matches(omit: &[String], reg: &Registry, obj: &Value) -> bool {
    let av = obj["apiVersion"].as_str().unwrap_or("");
    let kind = obj["kind"].as_str().unwrap_or("");
    let Some(t) = reg.by_kind(av, kind) else {
        return false;
    };
    let name = obj["metadata"]["name"].as_str().unwrap_or("");
    let id = match obj["metadata"]["namespace"].as_str() {
        Some(ns) if t.namespaced => format!("{}/{ns}/{name}", t.plural),
        _ => format!("{}/{name}", t.plural),
    };
    omit.contains(&id)
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

/// Runs the simulator until SIGINT/SIGTERM.
pub async fn run(opts: UpOptions) -> anyhow::Result<()> {
    if let Some(bins) = opts.real_apiserver.clone() {
        return super::real::run(opts, bins).await;
    }
    let assisted_db = assisted_db(&opts).await?;
    let mut scenario = match &opts.scenario {
        Some(p) => Scenario::load(p)?,
        None => Scenario::default(),
    };
    std::fs::create_dir_all(&opts.dir).with_context(|| format!("cannot create {}", opts.dir.display()))?;
    let _ = std::fs::remove_file(opts.dir.join("ready"));
    let listen = opts
        .listen
        .unwrap_or(SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), 0));
    let listener = tokio::net::TcpListener::bind(listen).await.with_context(|| {
        format!("cannot listen on {listen} (inside `agent-day2-sim netns`, 192.168.111.0/24 is local)")
    })?;
    let local = listener.local_addr()?;
    let client_ip = if local.ip().is_unspecified() {
        IpAddr::V4(Ipv4Addr::LOCALHOST)
    } else {
        local.ip()
    };
    let server_addr = SocketAddr::new(client_ip, local.port()).to_string();
    let api_url = format!("https://{server_addr}");

    // PKI.
    let ca = Ca::generate("agent-day2-sim-ca")?;
    let api_dns = format!("api.{}.{}", scenario.name, scenario.base_domain);
    let api_int = format!("api-int.{}.{}", scenario.name, scenario.base_domain);
    let mut ips = vec![client_ip, IpAddr::V4(Ipv4Addr::LOCALHOST)];
    ips.dedup();
    let server_cert = ca.issue_server(&["localhost".into(), api_dns, api_int.clone()], &ips)?;
    let admin = ca.issue_client("system:admin", &["system:masters"])?;

    let boot_token = new_token(24);
    let viewer_token = new_token(24);
    let mut tokens = HashMap::new();
    tokens.insert(
        boot_token.clone(),
        UserInfo {
            name: NODE_BOOTSTRAPPER.into(),
            groups: vec![
                "system:serviceaccounts".into(),
                "system:serviceaccounts:openshift-machine-config-operator".into(),
                "system:authenticated".into(),
            ],
        },
    );
    tokens.insert(
        viewer_token.clone(),
        UserInfo {
            name: "viewer".into(),
            groups: vec!["system:authenticated".into()],
        },
    );

    let mut reg = Registry::default();
    for t in registry::builtins() {
        reg.add(t);
    }
    let (tx, _) = tokio::sync::broadcast::channel(4096);
    let srv = Arc::new(Server {
        state: Mutex::new(State::new(reg)),
        events: tx,
        tokens,
        forbidden: Mutex::new(Vec::new()),
        server_addr: server_addr.clone(),
        ca_cert_pem: ca.cert_pem.clone(),
        ca_key_pem: ca.key_pem.clone(),
        exec: super::exec::ExecConfig {
            assisted_db: assisted_db.clone(),
            volumes_dir: std::path::absolute(
                opts.volumes_dir
                    .clone()
                    .unwrap_or_else(|| opts.dir.join("volumes")),
            )?,
        },
    });
    std::fs::create_dir_all(&srv.exec.volumes_dir)
        .with_context(|| format!("cannot create {}", srv.exec.volumes_dir.display()))?;

    // OpenShift kinds: permissive CRDs, then real CRD files replace them.
    for (g, v, k, p, short, status) in registry::PERMISSIVE_OPENSHIFT {
        srv.create_any(registry::permissive_crd(g, v, k, p, short, *status))?;
    }
    for dir in &opts.crds {
        for (file, doc) in load_yaml_dir(dir)? {
            if doc["kind"] == "CustomResourceDefinition" {
                srv.create_any(doc)
                    .with_context(|| format!("CRD file {}", file.display()))?;
            }
        }
    }

    // Base ISO and file server.
    let arch = coreos_arch(&scenario.architecture).to_string();
    let (base_iso, files_base_url) = serve_base_iso(&opts, client_ip, &arch).await?;

    // The registry with the release payload, before the seed: the seed names its true digest.
    let registry = match opts.registry {
        Some(addr) => Some(start_registry(addr, &opts.dir, &ca, &mut scenario, &base_iso).await?),
        None => None,
    };

    // Seed.
    let ctx = SeedContext {
        api_url: api_url.clone(),
        files_base_url: files_base_url.clone(),
        base_iso,
        ca_pem: ca.cert_pem.clone(),
    };
    let mut objects =
        crate::seed::seed_objects_with_registry(&scenario, &ctx, registry.as_ref().map(|r| &r.seed))?;
    if let Some(db) = &assisted_db {
        objects.extend(crate::seed::assisted_service_objects(db));
    }
    objects.extend(scenario.objects.iter().cloned());
    if let Some(d) = &scenario.objects_dir {
        let image = scenario.release_image.clone().unwrap_or_else(|| {
            format!(
                "quay.io/openshift-release-dev/ocp-release:{}-{arch}",
                scenario.version
            )
        });
        for (file, _) in load_yaml_dir(d)? {
            let text = std::fs::read_to_string(&file)?.replace("$TEST_IMAGE", &image);
            objects.extend(parse_docs(&text).with_context(|| format!("{}", file.display()))?);
        }
    }
    // Every `omit` entry must name something: the seed (before its own omissions), the
    // scenario's objects or objectsDir. A typo would otherwise leave the object in silently.
    {
        let mut all = crate::seed::seed_objects_with_registry(
            &Scenario {
                omit: Vec::new(),
                ..scenario.clone()
            },
            &ctx,
            registry.as_ref().map(|r| &r.seed),
        )?;
        all.extend(objects.iter().cloned());
        let st = srv.state.lock().unwrap();
        for (i, spec) in scenario.omit.iter().enumerate() {
            let hit = all.iter().any(|o| {
                omit_matches(std::slice::from_ref(spec), &st.registry, o) || seed_omit_matches(spec, o)
            });
            if !hit {
                let file = opts
                    .scenario
                    .as_ref()
                    .map(|p| p.display().to_string())
                    .unwrap_or_default();
                return Err(anyhow::Error::new(crate::scenario::ScenarioError(format!(
                    "scenario {file}: omit[{i}]: {spec:?} names no seeded or scenario object (resource/name or resource/namespace/name, plural resource)"
                ))));
            }
        }
    }
    for obj in objects {
        let skip = {
            let st = srv.state.lock().unwrap();
            omit_matches(&scenario.omit, &st.registry, &obj)
        };
        if skip {
            continue;
        }
        srv.create_any(obj)?;
    }
    *srv.forbidden.lock().unwrap() = scenario.forbidden.clone();
    srv.state.lock().unwrap().compact();

    // Client files.
    std::fs::write(opts.dir.join("ca.crt"), &ca.cert_pem)?;
    let kc = crate::kubeconfig::render(&crate::kubeconfig::KubeconfigParams {
        cluster_name: &scenario.name,
        server: &api_url,
        ca_pem: &ca.cert_pem,
        admin_cert_pem: &admin.cert_pem,
        admin_key_pem: &admin.key_pem,
        bootstrapper_token: &boot_token,
        viewer_token: &viewer_token,
    });
    crate::kubeconfig::write_private(&opts.dir.join("kubeconfig"), &kc)?;

    // TLS.
    let tls = tls_config(&ca.cert_pem, &server_cert.cert_pem, &server_cert.key_pem)?;
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(tls));
    let ca_der: Arc<Vec<u8>> = Arc::new(
        rustls_pemfile::certs(&mut ca.cert_pem.as_bytes())
            .next()
            .ok_or_else(|| anyhow::anyhow!("CA PEM"))??
            .to_vec(),
    );
    tokio::spawn(srv.clone().run_signer());
    // The machine-config server stand-in on the API's IP, port 22623 (see super::mcs); only on
    // a routable address, and a port already taken (a second cluster in one namespace) leaves
    // this cluster without one, said on stderr.
    if !client_ip.is_loopback() {
        let addr = SocketAddr::new(client_ip, super::mcs::MCS_PORT);
        let cfg = super::mcs::McsConfig {
            api_int: api_int.clone(),
            ip: client_ip,
            bootstrap_kubeconfig: super::mcs::bootstrap_kubeconfig(
                &api_int,
                local.port(),
                &ca.cert_pem,
                &boot_token,
            ),
            ca_pem: ca.cert_pem.clone(),
        };
        match super::mcs::serve(srv.clone(), &ca, addr, cfg).await {
            Ok(()) => eprintln!(
                "agent-day2-sim: machine-config server https://{api_int}:{} ({addr})",
                super::mcs::MCS_PORT
            ),
            Err(e) => eprintln!("agent-day2-sim: warning: no machine-config server: {e:#}"),
        }
    }
    let srv2 = srv.clone();
    tokio::spawn(async move {
        loop {
            let (tcp, _) = match listener.accept().await {
                Ok(x) => x,
                Err(e) => {
                    tracing::warn!("accept: {e}");
                    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                    continue;
                }
            };
            let acceptor = acceptor.clone();
            let srv = srv2.clone();
            let ca_der = ca_der.clone();
            tokio::spawn(async move {
                let Ok(tls) = acceptor.accept(tcp).await else {
                    return;
                };
                let ident = tls
                    .get_ref()
                    .1
                    .peer_certificates()
                    .and_then(|c| c.first())
                    .map(|c| verify_client_cert(c.as_ref(), &ca_der).ok_or(()));
                let svc = hyper::service::service_fn(move |req| {
                    let srv = srv.clone();
                    let ident = ident.clone();
                    async move { Ok::<_, std::convert::Infallible>(srv.handle(req, ident).await) }
                });
                let _ = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new())
                    .serve_connection_with_upgrades(TokioIo::new(tls), svc)
                    .await;
            });
        }
    });
    // Written last, so its presence means "serving".
    write_ready(&opts.dir, &api_url, &files_base_url, registry.as_ref())?;
    eprintln!(
        "agent-day2-sim: API {api_url}, files {files_base_url}, kubeconfig {}",
        opts.dir.join("kubeconfig").display()
    );
    if let Some(r) = &registry {
        eprintln!(
            "agent-day2-sim: registry {} holds release {}",
            r.process.url(),
            crate::seed::release_image(&scenario)
        );
    }

    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = term.recv() => {}
    }
    let _ = std::fs::remove_file(opts.dir.join("ready"));
    // Dropping the registry kills docker-registry.
    drop(registry);
    Ok(())
}

/// The simulator's running registry and what the seed records about it.
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

/// Asks for a client certificate and takes whatever comes (checking only that the peer holds
/// its key): like kube-apiserver (`tls.VerifyClientCertIfGiven` with the check in the x509
/// authenticator), an unknown or expired certificate is a 401 from the server, not a TLS error.
/// The chain is verified per request by [`crate::pki::verify_client_cert`].
#[derive(Debug)]
struct AnyClientCert {
    algs: rustls::crypto::WebPkiSupportedAlgorithms,
}

impl rustls::server::danger::ClientCertVerifier for AnyClientCert {
    fn offer_client_auth(&self) -> bool {
        true
    }
    fn client_auth_mandatory(&self) -> bool {
        false
    }
    fn root_hint_subjects(&self) -> &[rustls::DistinguishedName] {
        &[]
    }
    fn verify_client_cert(
        &self,
        _end_entity: &rustls::pki_types::CertificateDer<'_>,
        _intermediates: &[rustls::pki_types::CertificateDer<'_>],
        _now: rustls::pki_types::UnixTime,
    ) -> Result<rustls::server::danger::ClientCertVerified, rustls::Error> {
        Ok(rustls::server::danger::ClientCertVerified::assertion())
    }
    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &rustls::pki_types::CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(message, cert, dss, &self.algs)
    }
    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &rustls::pki_types::CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(message, cert, dss, &self.algs)
    }
    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        self.algs.supported_schemes()
    }
}

fn tls_config(ca_pem: &str, cert_pem: &str, key_pem: &str) -> anyhow::Result<rustls::ServerConfig> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut roots = rustls::RootCertStore::empty();
    for c in rustls_pemfile::certs(&mut ca_pem.as_bytes()) {
        roots.add(c?)?;
    }
    let _ = roots;
    let verifier = Arc::new(AnyClientCert {
        algs: provider.signature_verification_algorithms,
    });
    let certs: Vec<_> = rustls_pemfile::certs(&mut cert_pem.as_bytes()).collect::<Result<_, _>>()?;
    let key = rustls_pemfile::private_key(&mut key_pem.as_bytes())?
        .ok_or_else(|| anyhow::anyhow!("no server key"))?;
    let mut cfg = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()?
        .with_client_cert_verifier(verifier)
        .with_single_cert(certs, key)?;
    cfg.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(cfg)
}
