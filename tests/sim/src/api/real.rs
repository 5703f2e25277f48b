//! `agent-day2-sim up --real-apiserver`: the simulated cluster on the REAL control plane
//! (issue 12). The simulator's own API server of earlier rounds is retired: everything runs here.
//!
//! Processes (children of `up`, killed when it stops, and by the kernel if it dies:
//! `PR_SET_PDEATHSIG`), each logging to `DIR/<name>.log`:
//!
//! - `etcd` on loopback (`127.0.0.1`, two free ports), data in `DIR/etcd/` (emptied first),
//!   `--unsafe-no-fsync` (a test cluster, thrown away with its directory);
//! - `kube-apiserver` on the simulator's API address (`--listen`, inside the test's network
//!   namespace) with the flags of [`apiserver_args`]: serving certificate for the API names,
//!   client CA and token file, `--authorization-mode=Node,RBAC`, the default admission plugins
//!   plus `NodeRestriction`, the service-account keys;
//! - `kube-controller-manager` with the CSR signing controller (never `csrapproving`: approving
//!   is the plugin's job), signing with the cluster's kubelet signer, which in the simulator is
//!   its one CA ([`crate::pki`]); and the two controllers every cluster has that a client
//!   notices at once: `serviceaccount` (a new namespace gets its `default` ServiceAccount, which
//!   the ServiceAccount admission plugin wants before it admits a Pod) and `namespace` (a
//!   deleted namespace is emptied and goes away instead of staying Terminating); for volumes,
//!   `persistentvolume-binder` (binds a claim to the volume [`super::cp_kubelet`] provisions)
//!   and `pvc-protection`/`pv-protection` (a claim in use is kept; an unused one can go).
//!
//! The file server, the `--registry` and the machine-config server stand-in ([`super::mcs`],
//! answering from a mirror of the real server's MachineConfigs) run beside it; the control-plane
//! nodes' kubelets, a scheduler and a volume provisioner come from [`super::cp_kubelet`].
//!
//! The binaries come from `scripts/real-components.sh kube` ([`default_kube_bin_dir`]); the
//! OpenShift CRDs from the openshift/api module that script fetched (`BIN/openshift-api`).
//! Identities: `system:admin` (client certificate, `system:masters`), the node-bootstrapper
//! service account and `viewer` (tokens of `--token-auth-file`), bound by [`identities`] to
//! what [`super::authz`] says each may do.

use super::client::client_for;
use crate::pki::Ca;
use anyhow::{anyhow, bail, Context};
use kube::api::{Api, DynamicObject, PostParams};
use kube::core::GroupVersionKind;
use kube::discovery::{ApiCapabilities, ApiResource, Scope};
use serde_json::{json, Value};
use std::collections::{BTreeMap, BTreeSet};
use std::io::{Read, Write};
use std::net::{IpAddr, Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::os::unix::fs::OpenOptionsExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Environment variable naming the directory of the real control-plane binaries
/// (`kube-apiserver`, `kube-controller-manager`, `etcd`, `versions`, `openshift-api/`).
pub const KUBE_BIN_ENV: &str = "AGENT_DAY2_REAL_KUBE_BIN";

/// The wrapper module that pins the control plane (`tests/real/kube/go.mod`), read at build time
/// so the simulator looks where `scripts/real-components.sh kube` builds.
const WRAPPER_GO_MOD: &str = include_str!("../../../real/kube/go.mod");

/// The ClusterRoleBinding that makes the kubeconfig's admin cluster-admin when the scenario has
/// `forbidden` switches (it is then no member of system:masters).
pub const ADMIN_BINDING: &str = "agent-day2-sim:admin";

/// The controllers kube-controller-manager runs (never `csrapproving`).
pub const KCM_CONTROLLERS: [&str; 6] = [
    "csrsigning",
    "serviceaccount",
    "namespace",
    "persistentvolume-binder",
    "pvc-protection",
    "pv-protection",
];

/// Name of the ClusterRole (and its binding) that gives user `viewer` what the simulator's
/// server's viewer may do: get/list/watch every served resource but core Secrets.
pub const VIEWER_ROLE: &str = "agent-day2-sim:viewer";

/// The `k8s.io/kubernetes` version `tests/real/kube/go.mod` requires, e.g. `v1.31.14`.
pub fn pinned_kubernetes() -> &'static str {
    WRAPPER_GO_MOD
        .lines()
        .map(str::trim)
        .filter_map(|l| l.strip_prefix("require ").map(str::trim).or(Some(l)))
        .find_map(|l| {
            let mut w = l.split_whitespace();
            (w.next() == Some("k8s.io/kubernetes"))
                .then(|| w.next())
                .flatten()
        })
        .filter(|v| v.starts_with('v'))
        .unwrap_or("unknown")
}

/// The binaries' directory: $AGENT_DAY2_REAL_KUBE_BIN, else where `scripts/real-components.sh
/// kube` puts them: `${XDG_CACHE_HOME:-~/.cache}/agent-day2/real/kube-<version>/bin`.
pub fn default_kube_bin_dir() -> PathBuf {
    if let Some(d) = std::env::var_os(KUBE_BIN_ENV) {
        return PathBuf::from(d);
    }
    let cache = std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(std::env::var_os("HOME").unwrap_or_else(|| "/root".into())).join(".cache")
        });
    cache
        .join("agent-day2/real")
        .join(format!("kube-{}", pinned_kubernetes()))
        .join("bin")
}

/// Checks that `dir` holds the three binaries and the `versions` file; returns that file's text.
///
/// Errors name the missing file and the command that builds it.
pub fn check_kube_bins(dir: &Path) -> Result<String, String> {
    for b in [
        "etcd",
        "kube-apiserver",
        "kube-controller-manager",
        "kubelet-exec",
    ] {
        if !dir.join(b).is_file() {
            return Err(format!(
                "{} is missing: build the real control plane with `scripts/real-components.sh kube` (or set ${KUBE_BIN_ENV})",
                dir.join(b).display()
            ));
        }
    }
    std::fs::read_to_string(dir.join("versions")).map_err(|e| {
        format!(
            "{}: {e}: build the real control plane with `scripts/real-components.sh kube`",
            dir.join("versions").display()
        )
    })
}

/// A child process of the control plane; SIGTERM, then SIGKILL after 10 s, on drop.
pub(crate) struct Proc {
    name: &'static str,
    child: Child,
    log: PathBuf,
}

impl Proc {
    /// Starts `bin args…` with stdout and stderr appended to `log`. The child gets SIGKILL if
    /// this process dies (`PR_SET_PDEATHSIG`), so a killed simulator leaves no etcd behind.
    pub(crate) fn spawn(
        name: &'static str,
        bin: &Path,
        args: &[String],
        log: PathBuf,
    ) -> anyhow::Result<Proc> {
        let f = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .mode(0o600)
            .open(&log)
            .with_context(|| format!("cannot create {}", log.display()))?;
        let mut cmd = Command::new(bin);
        cmd.args(args)
            .stdin(Stdio::null())
            .stdout(f.try_clone()?)
            .stderr(f);
        // SAFETY: prctl is async-signal-safe; nothing else runs between fork and exec.
        unsafe {
            cmd.pre_exec(|| {
                if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let child = cmd
            .spawn()
            .with_context(|| format!("cannot start {} ({})", name, bin.display()))?;
        Ok(Proc { name, child, log })
    }

    /// The last `n` lines of its log.
    fn log_tail(&self, n: usize) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(n)..].join("\n")
    }

    /// Err with its log when it has exited.
    fn check_running(&mut self) -> anyhow::Result<()> {
        if let Ok(Some(st)) = self.child.try_wait() {
            bail!(
                "{} exited with {st}; the end of {}:\n{}",
                self.name,
                self.log.display(),
                self.log_tail(40)
            );
        }
        Ok(())
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        if let Ok(Some(_)) = self.child.try_wait() {
            return;
        }
        // SAFETY: kill with the pid of our own child.
        unsafe { libc::kill(self.child.id() as libc::pid_t, libc::SIGTERM) };
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The running control plane. Dropping it stops kube-controller-manager, kube-apiserver, then
/// etcd.
pub struct ControlPlane {
    /// In start order (etcd first); stopped in reverse.
    procs: Vec<Proc>,
    /// Admin client (`system:admin`, `system:masters`).
    pub client: kube::Client,
    /// What `BIN/versions` says was built.
    pub versions: String,
}

impl Drop for ControlPlane {
    fn drop(&mut self) {
        while let Some(p) = self.procs.pop() {
            drop(p);
        }
    }
}

impl ControlPlane {
    /// Adds a process that runs with the control plane (checked by [`Self::check_running`],
    /// stopped first).
    pub(crate) fn add(&mut self, p: Proc) {
        self.procs.push(p);
    }

    /// Err with the process's log when one of them has exited.
    pub fn check_running(&mut self) -> anyhow::Result<()> {
        for p in &mut self.procs {
            p.check_running()?;
        }
        Ok(())
    }
}

/// One line of kube-apiserver's `--token-auth-file` (`token,user,uid,"group1,group2"`).
#[derive(Debug, Clone)]
pub struct StaticToken {
    pub token: String,
    pub user: String,
    pub uid: String,
    /// Without `system:authenticated` (the server adds it).
    pub groups: Vec<String>,
}

/// What [`start`] needs.
pub struct StartOptions<'a> {
    /// The simulator's `--dir`: logs, `etcd/`, `pki/` go there.
    pub dir: &'a Path,
    /// [`default_kube_bin_dir`] or `--kube-bin-dir`.
    pub bin_dir: &'a Path,
    /// The cluster CA: client CA, kubelet signer and issuer of the serving certificate.
    pub ca: &'a Ca,
    /// The API address (`--bind-address`, `--secure-port`, `--advertise-address`).
    pub listen: SocketAddr,
    /// DNS SANs of the serving certificate besides the in-cluster names (`api.<cluster>.<domain>`, …).
    pub api_names: Vec<String>,
    /// Service networks (`--service-cluster-ip-range`, at most one per IP family).
    pub service_cidrs: Vec<String>,
    /// `--token-auth-file` contents.
    pub tokens: Vec<StaticToken>,
    /// The admin kubeconfig text (context `admin`), for the seeding client.
    pub admin_kubeconfig: &'a str,
    /// The scenario's `forbidden` switches: when not empty, kube-apiserver asks
    /// [`forbidden_webhook`] first (`--authorization-mode=Node,Webhook,RBAC`), which denies them.
    pub forbidden: Vec<crate::scenario::ForbiddenRule>,
}

/// A free TCP port on `ip` (bound, read and released: the caller binds it right away).
fn free_port(ip: IpAddr) -> anyhow::Result<u16> {
    let l =
        TcpListener::bind(SocketAddr::new(ip, 0)).with_context(|| format!("cannot bind a port on {ip}"))?;
    Ok(l.local_addr()?.port())
}

/// Writes `data` to `path` with `mode` through a temporary file and rename.
fn write_file(path: &Path, data: &str, mode: u32) -> anyhow::Result<()> {
    let tmp = path.with_extension("tmp");
    let _ = std::fs::remove_file(&tmp);
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(mode)
        .open(&tmp)
        .with_context(|| format!("cannot create {}", tmp.display()))?;
    f.write_all(data.as_bytes())?;
    f.sync_all()?;
    std::fs::rename(&tmp, path)
        .with_context(|| format!("cannot rename {} to {}", tmp.display(), path.display()))
}

/// The first address of a service network (`172.30.0.0/16` → `172.30.0.1`): the `kubernetes`
/// Service's ClusterIP, which kube-apiserver's serving certificate must name.
pub fn first_service_ip(cidr: &str) -> Option<IpAddr> {
    let (net, _) = cidr.split_once('/')?;
    match net.parse::<IpAddr>().ok()? {
        IpAddr::V4(a) => Some(IpAddr::V4(Ipv4Addr::from(u32::from(a).wrapping_add(1)))),
        IpAddr::V6(a) => Some(IpAddr::V6(std::net::Ipv6Addr::from(
            u128::from(a).wrapping_add(1),
        ))),
    }
}

/// etcd's flags: one member on loopback.
pub fn etcd_args(data_dir: &Path, client_port: u16, peer_port: u16) -> Vec<String> {
    let client = format!("http://127.0.0.1:{client_port}");
    let peer = format!("http://127.0.0.1:{peer_port}");
    vec![
        "--name=sim".into(),
        format!("--data-dir={}", data_dir.display()),
        format!("--listen-client-urls={client}"),
        format!("--advertise-client-urls={client}"),
        format!("--listen-peer-urls={peer}"),
        format!("--initial-advertise-peer-urls={peer}"),
        format!("--initial-cluster=sim={peer}"),
        "--unsafe-no-fsync=true".into(),
        "--log-level=warn".into(),
    ]
}

/// Paths of the files in `DIR/pki` that the flags name.
pub struct PkiFiles {
    pub ca_crt: PathBuf,
    pub ca_key: PathBuf,
    pub serving_crt: PathBuf,
    pub serving_key: PathBuf,
    pub sa_pub: PathBuf,
    pub sa_key: PathBuf,
    pub tokens: PathBuf,
    pub kcm_kubeconfig: PathBuf,
    /// kube-apiserver's client certificate towards the kubelets (`--kubelet-client-certificate`).
    pub kubelet_client_crt: PathBuf,
    pub kubelet_client_key: PathBuf,
}

impl PkiFiles {
    fn in_dir(d: &Path) -> PkiFiles {
        PkiFiles {
            ca_crt: d.join("ca.crt"),
            ca_key: d.join("ca.key"),
            serving_crt: d.join("apiserver.crt"),
            serving_key: d.join("apiserver.key"),
            sa_pub: d.join("sa.pub"),
            sa_key: d.join("sa.key"),
            tokens: d.join("tokens.csv"),
            kcm_kubeconfig: d.join("kube-controller-manager.kubeconfig"),
            kubelet_client_crt: d.join("apiserver-kubelet-client.crt"),
            kubelet_client_key: d.join("apiserver-kubelet-client.key"),
        }
    }
}

/// kube-apiserver's flags. `etcd` is the client URL; the service-account issuer is
/// OpenShift's (`https://kubernetes.default.svc`). With a loopback API address the `kubernetes`
/// Endpoints cannot name it (the reconciler refuses loopback), so `--endpoint-reconciler-type=none`.
pub fn apiserver_args(
    p: &PkiFiles,
    listen: SocketAddr,
    etcd: &str,
    service_cidrs: &[String],
    cert_dir: &Path,
) -> Vec<String> {
    let mut a = vec![
        format!("--etcd-servers={etcd}"),
        format!("--bind-address={}", listen.ip()),
        format!("--secure-port={}", listen.port()),
        format!("--advertise-address={}", listen.ip()),
        format!("--cert-dir={}", cert_dir.display()),
        format!("--tls-cert-file={}", p.serving_crt.display()),
        format!("--tls-private-key-file={}", p.serving_key.display()),
        format!("--client-ca-file={}", p.ca_crt.display()),
        format!("--token-auth-file={}", p.tokens.display()),
        "--authorization-mode=Node,RBAC".into(),
        // Added to the default-on plugins (CertificateApproval, CertificateSigning,
        // CertificateSubjectRestriction, ServiceAccount, … stay on).
        "--enable-admission-plugins=NodeRestriction".into(),
        "--service-account-issuer=https://kubernetes.default.svc".into(),
        format!("--service-account-key-file={}", p.sa_pub.display()),
        format!("--service-account-signing-key-file={}", p.sa_key.display()),
        format!("--service-cluster-ip-range={}", service_cidrs.join(",")),
        "--allow-privileged=true".into(),
        "--profiling=false".into(),
        // The kubelet API (pod exec): as OpenShift runs it, by InternalIP, with a client
        // certificate, checking the kubelet's serving certificate against the cluster CA.
        format!("--kubelet-client-certificate={}", p.kubelet_client_crt.display()),
        format!("--kubelet-client-key={}", p.kubelet_client_key.display()),
        format!("--kubelet-certificate-authority={}", p.ca_crt.display()),
        "--kubelet-preferred-address-types=InternalIP".into(),
    ];
    if listen.ip().is_loopback() {
        a.push("--endpoint-reconciler-type=none".into());
    }
    a
}

/// kube-controller-manager's flags: the CSR signing controller, signing with the CA, and the
/// serviceaccount and namespace controllers (see the module documentation).
pub fn controller_manager_args(p: &PkiFiles) -> Vec<String> {
    vec![
        format!("--kubeconfig={}", p.kcm_kubeconfig.display()),
        format!("--controllers={}", KCM_CONTROLLERS.join(",")),
        format!("--cluster-signing-cert-file={}", p.ca_crt.display()),
        format!("--cluster-signing-key-file={}", p.ca_key.display()),
        "--leader-elect=false".into(),
        "--secure-port=0".into(),
        "--use-service-account-credentials=true".into(),
        // The binder's periodic resync (15 s by default) also retries a claim whose volume
        // came a moment after the claim's first sync.
        "--pvclaimbinder-sync-period=1s".into(),
        // OpenShift's own client limits for the controller manager (its operator's
        // bindata/assets/config/defaultconfig.yaml: kube-api-qps 150, kube-api-burst 300); the
        // upstream defaults (20/30) would cap the CSR signer at 20 certificates a second, a
        // floor no OpenShift cluster has (issue 24: 2,000 CSRs took 100 s behind it).
        "--kube-api-qps=150".into(),
        "--kube-api-burst=300".into(),
    ]
}

/// GET http://127.0.0.1:PORT/health until etcd answers `"health":"true"` (30 s).
fn wait_etcd(proc_: &mut Proc, port: u16) -> anyhow::Result<()> {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        proc_.check_running()?;
        let ok = (|| -> std::io::Result<bool> {
            let mut s = TcpStream::connect_timeout(
                &SocketAddr::from(([127, 0, 0, 1], port)),
                Duration::from_secs(1),
            )?;
            s.set_read_timeout(Some(Duration::from_secs(2)))?;
            s.write_all(b"GET /health HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n")?;
            let mut body = String::new();
            s.read_to_string(&mut body)?;
            Ok(body.contains("\"health\":\"true\""))
        })()
        .unwrap_or(false);
        if ok {
            return Ok(());
        }
        if Instant::now() > deadline {
            bail!(
                "etcd not healthy after 30 s; the end of {}:\n{}",
                proc_.log.display(),
                proc_.log_tail(40)
            );
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// A raw GET as admin; the body text.
pub async fn get_raw(client: &kube::Client, path: &str) -> Result<String, kube::Error> {
    let req = http::Request::get(path)
        .body(Vec::new())
        .map_err(kube::Error::HttpError)?;
    client.request_text(req).await
}

/// `GET /readyz` without credentials (anonymous may read it: `system:public-info-viewer`),
/// verifying the serving certificate against `ca_pem` for the IP address: (status, body).
/// Polled so, the wait leaves no client error log behind while the server starts.
async fn readyz(addr: SocketAddr, ca_pem: &str) -> anyhow::Result<(u16, String)> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut roots = rustls::RootCertStore::empty();
    for c in rustls_pemfile::certs(&mut ca_pem.as_bytes()) {
        roots.add(c?)?;
    }
    let provider = std::sync::Arc::new(rustls::crypto::ring::default_provider());
    let cfg = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()?
        .with_root_certificates(roots)
        .with_no_client_auth();
    let connector = tokio_rustls::TlsConnector::from(std::sync::Arc::new(cfg));
    let tcp = tokio::time::timeout(Duration::from_secs(2), tokio::net::TcpStream::connect(addr)).await??;
    let name = rustls::pki_types::ServerName::IpAddress(addr.ip().into());
    let mut tls = connector.connect(name, tcp).await?;
    tls.write_all(b"GET /readyz HTTP/1.0\r\nHost: kubernetes\r\n\r\n")
        .await?;
    let mut buf = Vec::new();
    // The server closes after an HTTP/1.0 answer; a missing close_notify is no error here.
    let _ = tokio::time::timeout(Duration::from_secs(5), tls.read_to_end(&mut buf)).await;
    let text = String::from_utf8_lossy(&buf);
    let status = text
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .ok_or_else(|| anyhow!("no HTTP status in the answer to GET /readyz"))?;
    let body = text
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_string())
        .unwrap_or_default();
    Ok((status, body))
}

/// Serves kube-apiserver's authorization webhook on a free loopback port: a SubjectAccessReview
/// matching one of `rules` (any user) is denied with the
/// reason `the scenario's forbidden switch`; any other gets no opinion (RBAC decides). Returns
/// the webhook's kubeconfig (server `https://127.0.0.1:PORT/authorize`, the CA). Members of
/// `system:masters` never reach it (kube-apiserver allows them first), so with such rules
/// [`run`] gives the kubeconfig's admin cluster-admin through RBAC instead.
pub async fn forbidden_webhook(
    ca: &Ca,
    rules: Vec<crate::scenario::ForbiddenRule>,
) -> anyhow::Result<String> {
    use http_body_util::BodyExt;
    use hyper_util::rt::{TokioExecutor, TokioIo};
    let ip = IpAddr::V4(Ipv4Addr::LOCALHOST);
    let leaf = ca.issue_server(&["localhost".to_string()], &[ip])?;
    let certs: Vec<_> = rustls_pemfile::certs(&mut leaf.cert_pem.as_bytes()).collect::<Result<_, _>>()?;
    let key = rustls_pemfile::private_key(&mut leaf.key_pem.as_bytes())?
        .ok_or_else(|| anyhow!("authorization webhook: no key in the issued certificate"))?;
    let provider = std::sync::Arc::new(rustls::crypto::ring::default_provider());
    let mut tls = rustls::ServerConfig::builder_with_provider(provider)
        .with_protocol_versions(&[&rustls::version::TLS13, &rustls::version::TLS12])?
        .with_no_client_auth()
        .with_single_cert(certs, key)?;
    tls.alpn_protocols = vec![b"http/1.1".to_vec()];
    let acceptor = tokio_rustls::TlsAcceptor::from(std::sync::Arc::new(tls));
    let listener = tokio::net::TcpListener::bind(SocketAddr::new(ip, 0)).await?;
    let addr = listener.local_addr()?;
    let rules = std::sync::Arc::new(rules);
    tokio::spawn(async move {
        loop {
            let Ok((tcp, _)) = listener.accept().await else {
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            };
            let (acceptor, rules) = (acceptor.clone(), rules.clone());
            tokio::spawn(async move {
                let Ok(tls) = acceptor.accept(tcp).await else {
                    return;
                };
                let svc = hyper::service::service_fn(move |req: hyper::Request<hyper::body::Incoming>| {
                    let rules = rules.clone();
                    async move {
                        let body = req
                            .into_body()
                            .collect()
                            .await
                            .map(|b| b.to_bytes())
                            .unwrap_or_default();
                        let review: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
                        let answer = json!({
                            "apiVersion": "authorization.k8s.io/v1",
                            "kind": "SubjectAccessReview",
                            "status": webhook_decision(&review, &rules),
                        });
                        let mut r = hyper::Response::new(http_body_util::Full::new(bytes::Bytes::from(
                            answer.to_string(),
                        )));
                        r.headers_mut().insert(
                            hyper::header::CONTENT_TYPE,
                            hyper::header::HeaderValue::from_static("application/json"),
                        );
                        Ok::<_, std::convert::Infallible>(r)
                    }
                });
                let _ = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new())
                    .serve_connection(TokioIo::new(tls), svc)
                    .await;
            });
        }
    });
    use base64::Engine;
    let ca_b64 = base64::engine::general_purpose::STANDARD.encode(ca.cert_pem.as_bytes());
    Ok(format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: webhook\n  cluster:\n    server: https://{addr}/authorize\n    certificate-authority-data: {ca_b64}\nusers:\n- name: apiserver\n  user: {{}}\ncontexts:\n- name: webhook\n  context:\n    cluster: webhook\n    user: apiserver\ncurrent-context: webhook\n"
    ))
}

/// The `status` of a SubjectAccessReview answer: denied when its resource attributes match one
/// of `rules` ([`super::authz::authorize`]'s scenario switches), else no opinion.
pub fn webhook_decision(review: &Value, rules: &[crate::scenario::ForbiddenRule]) -> Value {
    let Some(ra) = review["spec"]["resourceAttributes"].as_object() else {
        return json!({"allowed": false});
    };
    let field = |k: &str| {
        ra.get(k)
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
            .map(String::from)
    };
    let attrs = super::authz::Attributes {
        verb: field("verb").unwrap_or_default(),
        group: field("group").unwrap_or_default(),
        resource: field("resource").unwrap_or_default(),
        subresource: field("subresource"),
        namespace: field("namespace"),
        name: field("name"),
    };
    // Someone [`super::authz`] allows everything: the answer is then the switches' alone.
    let masters = super::authz::UserInfo {
        name: "system:admin".into(),
        groups: vec!["system:masters".into()],
    };
    match super::authz::authorize(&masters, &attrs, rules) {
        Ok(()) => json!({"allowed": false}),
        Err(_) => json!({"allowed": false, "denied": true, "reason": "the scenario's forbidden switch"}),
    }
}

/// Starts etcd, kube-apiserver (until `/readyz` answers ok, 120 s) and
/// kube-controller-manager.
///
/// Errors: a binary missing ([`check_kube_bins`]), a process exiting or not ready in time (the
/// end of its log is in the message).
pub async fn start(o: StartOptions<'_>) -> anyhow::Result<ControlPlane> {
    let versions = check_kube_bins(o.bin_dir).map_err(|e| anyhow!(e))?;
    let pki_dir = o.dir.join("pki");
    std::fs::create_dir_all(&pki_dir)?;
    std::fs::set_permissions(&pki_dir, std::os::unix::fs::PermissionsExt::from_mode(0o700))?;
    let p = PkiFiles::in_dir(&pki_dir);
    write_file(&p.ca_crt, &o.ca.cert_pem, 0o644)?;
    write_file(&p.ca_key, &o.ca.key_pem, 0o600)?;
    let mut dns: Vec<String> = vec![
        "localhost".into(),
        "kubernetes".into(),
        "kubernetes.default".into(),
        "kubernetes.default.svc".into(),
        "kubernetes.default.svc.cluster.local".into(),
        "openshift".into(),
        "openshift.default".into(),
        "openshift.default.svc".into(),
        "openshift.default.svc.cluster.local".into(),
    ];
    dns.extend(o.api_names.iter().cloned());
    let mut ips = vec![o.listen.ip(), IpAddr::V4(Ipv4Addr::LOCALHOST)];
    ips.extend(o.service_cidrs.iter().filter_map(|c| first_service_ip(c)));
    ips.dedup();
    let serving = o.ca.issue_server(&dns, &ips)?;
    write_file(&p.serving_crt, &serving.cert_pem, 0o644)?;
    write_file(&p.serving_key, &serving.key_pem, 0o600)?;
    let sa = rcgen::KeyPair::generate()?;
    write_file(&p.sa_pub, &sa.public_key_pem(), 0o644)?;
    write_file(&p.sa_key, &sa.serialize_pem(), 0o600)?;
    let mut csv = String::new();
    for t in &o.tokens {
        for f in [&t.token, &t.user, &t.uid] {
            if f.contains(',') || f.contains('"') || f.contains('\n') {
                bail!("token file: {f:?} may not contain a comma, quote or newline");
            }
        }
        csv.push_str(&format!(
            "{},{},{},\"{}\"\n",
            t.token,
            t.user,
            t.uid,
            t.groups.join(",")
        ));
    }
    write_file(&p.tokens, &csv, 0o600)?;
    // The controller manager's own identity: the user RBAC's bootstrap policy binds to
    // ClusterRole system:kube-controller-manager (it then acts per controller as its service
    // account, --use-service-account-credentials).
    let kcm = o.ca.issue_client("system:kube-controller-manager", &[])?;
    // OpenShift's kube-apiserver-to-kubelet client identity.
    let to_kubelet = o.ca.issue_client("system:kube-apiserver", &["kube-master"])?;
    write_file(&p.kubelet_client_crt, &to_kubelet.cert_pem, 0o644)?;
    write_file(&p.kubelet_client_key, &to_kubelet.key_pem, 0o600)?;
    let api_url = format!("https://{}", o.listen);
    write_file(
        &p.kcm_kubeconfig,
        &crate::kubeconfig::render(&crate::kubeconfig::KubeconfigParams {
            cluster_name: "sim",
            server: &api_url,
            ca_pem: &o.ca.cert_pem,
            admin_cert_pem: &kcm.cert_pem,
            admin_key_pem: &kcm.key_pem,
            bootstrapper_token: "unused",
            viewer_token: "unused",
        }),
        0o600,
    )?;

    let mut procs = Vec::new();
    // etcd.
    let data = o.dir.join("etcd");
    if data.exists() {
        std::fs::remove_dir_all(&data).with_context(|| format!("cannot empty {}", data.display()))?;
    }
    // Both held while the second is picked: released one by one, the kernel may hand out the
    // same port twice (etcd then fails on its own second listener; seen once in CI).
    let (cport, pport) = {
        let lo = SocketAddr::from(([127, 0, 0, 1], 0));
        let (a, b) = (TcpListener::bind(lo)?, TcpListener::bind(lo)?);
        (a.local_addr()?.port(), b.local_addr()?.port())
    };
    let mut etcd = Proc::spawn(
        "etcd",
        &o.bin_dir.join("etcd"),
        &etcd_args(&data, cport, pport),
        o.dir.join("etcd.log"),
    )?;
    wait_etcd(&mut etcd, cport)?;
    procs.push(etcd);

    // kube-apiserver.
    let mut args = apiserver_args(
        &p,
        o.listen,
        &format!("http://127.0.0.1:{cport}"),
        &o.service_cidrs,
        &pki_dir,
    );
    if !o.forbidden.is_empty() {
        let hook = forbidden_webhook(o.ca, o.forbidden.clone()).await?;
        let kc_path = pki_dir.join("authz-webhook.kubeconfig");
        write_file(&kc_path, &hook, 0o600)?;
        for a in args.iter_mut() {
            if a.starts_with("--authorization-mode=") {
                *a = "--authorization-mode=Node,Webhook,RBAC".into();
            }
        }
        args.extend([
            format!("--authorization-webhook-config-file={}", kc_path.display()),
            "--authorization-webhook-version=v1".into(),
            "--authorization-webhook-cache-authorized-ttl=0s".into(),
            "--authorization-webhook-cache-unauthorized-ttl=0s".into(),
        ]);
    }
    procs.push(Proc::spawn(
        "kube-apiserver",
        &o.bin_dir.join("kube-apiserver"),
        &args,
        o.dir.join("kube-apiserver.log"),
    )?);
    let client = client_for(o.admin_kubeconfig).await?;
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        for pr in &mut procs {
            pr.check_running()?;
        }
        match readyz(o.listen, &o.ca.cert_pem).await {
            Ok((200, t)) if t.trim() == "ok" => break,
            r => {
                if Instant::now() > deadline {
                    let last = procs.last().map(|p| p.log_tail(40)).unwrap_or_default();
                    bail!("kube-apiserver not ready after 120 s (last answer {r:?}); the end of its log:\n{last}");
                }
            }
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }

    // kube-controller-manager.
    procs.push(Proc::spawn(
        "kube-controller-manager",
        &o.bin_dir.join("kube-controller-manager"),
        &controller_manager_args(&p),
        o.dir.join("kube-controller-manager.log"),
    )?);
    let mut cp = ControlPlane {
        procs,
        client,
        versions,
    };
    tokio::time::sleep(Duration::from_millis(300)).await;
    cp.check_running()?;
    Ok(cp)
}

/// What [`resolve`] found, by `apiVersion/kind` (a kind once served stays served while `up`
/// runs: the seed resolves each kind once instead of once per object).
static RESOLVED: std::sync::Mutex<BTreeMap<String, (ApiResource, ApiCapabilities)>> =
    std::sync::Mutex::new(BTreeMap::new());

/// `(resource, capabilities)` of `apiVersion`/`kind` from the server's discovery.
async fn resolve(client: &kube::Client, obj: &Value) -> anyhow::Result<(ApiResource, ApiCapabilities)> {
    let av = obj["apiVersion"].as_str().unwrap_or("");
    let kind = obj["kind"].as_str().unwrap_or("");
    let key = format!("{av}/{kind}");
    if let Some(hit) = RESOLVED.lock().unwrap().get(&key) {
        return Ok(hit.clone());
    }
    let found = resolve_uncached(client, av, kind).await?;
    RESOLVED.lock().unwrap().insert(key, found.clone());
    Ok(found)
}

async fn resolve_uncached(
    client: &kube::Client,
    av: &str,
    kind: &str,
) -> anyhow::Result<(ApiResource, ApiCapabilities)> {
    let (group, version) = match av.split_once('/') {
        Some((g, v)) => (g, v),
        None => ("", av),
    };
    let gvk = GroupVersionKind::gvk(group, version, kind);
    kube::discovery::pinned_kind(client, &gvk)
        .await
        .with_context(|| format!("apiVersion {av} kind {kind}: not served by the real kube-apiserver"))
}

fn api_for(
    client: &kube::Client,
    ar: &ApiResource,
    caps: &ApiCapabilities,
    ns: Option<&str>,
) -> Api<DynamicObject> {
    match (caps.scope.clone(), ns) {
        (Scope::Namespaced, Some(ns)) => Api::namespaced_with(client.clone(), ns, ar),
        (Scope::Namespaced, None) => Api::default_namespaced_with(client.clone(), ar),
        (Scope::Cluster, _) => Api::all_with(client.clone(), ar),
    }
}

/// What the real server said about one object it refused.
fn refusal(what: &str, obj: &Value, e: &kube::Error) -> String {
    let kind = obj["kind"].as_str().unwrap_or("?");
    let ns = obj["metadata"]["namespace"]
        .as_str()
        .map(|n| format!("{n}/"))
        .unwrap_or_default();
    let name = obj["metadata"]["name"].as_str().unwrap_or("?");
    let msg = match e {
        kube::Error::Api(s) => format!("{} {}: {}", s.code, s.reason, s.message),
        other => other.to_string(),
    };
    format!("{what} {kind} {ns}{name}: {msg}")
}

/// The paths (`spec.platformSpec.none`, `status.conditions[0].reason`) of fields `sent` has
/// and `got` lacks: what the server dropped (a structural schema prunes unknown fields). Null
/// values are not counted (the server drops them by design); arrays are compared element by
/// element only when both have the same length.
pub fn dropped_fields(sent: &Value, got: &Value, prefix: &str) -> Vec<String> {
    let mut out = Vec::new();
    match (sent, got) {
        (Value::Object(a), Value::Object(b)) => {
            for (k, v) in a {
                if v.is_null() {
                    continue;
                }
                let path = if prefix.is_empty() {
                    k.clone()
                } else {
                    format!("{prefix}.{k}")
                };
                match b.get(k) {
                    None => out.push(path),
                    Some(w) => out.extend(dropped_fields(v, w, &path)),
                }
            }
        }
        (Value::Array(a), Value::Array(b)) if a.len() == b.len() => {
            for (i, (v, w)) in a.iter().zip(b).enumerate() {
                out.extend(dropped_fields(v, w, &format!("{prefix}[{i}]")));
            }
        }
        _ => {}
    }
    out
}

/// Creates `obj` as admin (an existing one of the same name is replaced, keeping nothing of
/// it), then, when it carries a `status` and the resource has the status subresource, writes
/// the status through it (as the component owning it would). Returns the paths of the fields
/// the server dropped ([`dropped_fields`]; metadata not compared). Errors: the server's
/// refusal, naming the object.
pub async fn apply(client: &kube::Client, obj: &Value) -> anyhow::Result<Vec<String>> {
    let (ar, caps) = resolve(client, obj).await?;
    let ns = obj["metadata"]["namespace"].as_str();
    let api = api_for(client, &ar, &caps, ns);
    let mut dynobj: DynamicObject = serde_json::from_value(obj.clone())
        .with_context(|| format!("{} {}: not an object", obj["kind"], obj["metadata"]["name"]))?;
    let name = dynobj.metadata.name.clone().unwrap_or_default();
    let pp = PostParams::default();
    let created = match api.create(&pp, &dynobj).await {
        Ok(c) => c,
        Err(kube::Error::Api(s)) if s.code == 409 && !name.is_empty() => {
            let cur = api
                .get(&name)
                .await
                .map_err(|e| anyhow!(refusal("get", obj, &e)))?;
            dynobj.metadata.resource_version = cur.metadata.resource_version.clone();
            api.replace(&name, &pp, &dynobj)
                .await
                .map_err(|e| anyhow!(refusal("replace", obj, &e)))?
        }
        Err(e) => bail!(refusal("create", obj, &e)),
    };
    let has_status_sub = caps.subresources.iter().any(|(s, _)| s.plural == "status");
    let mut got = serde_json::to_value(&created)?;
    if let (Some(status), true) = (obj.get("status"), has_status_sub) {
        let mut v = got.clone();
        v["status"] = status.clone();
        let cname = created.metadata.name.clone().unwrap_or_default();
        let with_status: DynamicObject = serde_json::from_value(v)?;
        let after = api
            .replace_status(&cname, &pp, &with_status)
            .await
            .map_err(|e| anyhow!(refusal("status of", obj, &e)))?;
        got = serde_json::to_value(&after)?;
    }
    let mut sent = obj.clone();
    if let Some(m) = sent.as_object_mut() {
        for k in ["apiVersion", "kind", "metadata"] {
            m.remove(k);
        }
    }
    Ok(dropped_fields(&sent, &got, ""))
}

/// The CRD of `group`/`kind` from the openshift/api module tree `root`: the feature-set
/// `Default` variant where there are several (`…-Default.crd.yaml`), else the one file without
/// a feature-set suffix. None when the module has no CRD for it.
pub fn openshift_crd(root: &Path, group: &str, kind: &str) -> anyhow::Result<Option<Value>> {
    let mut files = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(rd) = std::fs::read_dir(&d) else { continue };
        for e in rd.flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else if p.to_string_lossy().ends_with(".crd.yaml") {
                files.push(p);
            }
        }
    }
    files.sort();
    let kind_line = format!("kind: {kind}\n");
    let group_line = format!("group: {group}\n");
    let rank = |p: &Path| {
        let n = p.file_name().and_then(|n| n.to_str()).unwrap_or("");
        if n.ends_with("-Default.crd.yaml") {
            0
        } else if [
            "CustomNoUpgrade",
            "DevPreviewNoUpgrade",
            "TechPreviewNoUpgrade",
            "OKD",
        ]
        .iter()
        .any(|s| n.contains(&format!("-{s}.")))
        {
            2
        } else {
            1
        }
    };
    let mut best: Option<(i32, Value)> = None;
    for f in files {
        let r = rank(&f);
        if r == 2 || best.as_ref().is_some_and(|(b, _)| *b <= r) {
            continue;
        }
        let text = std::fs::read_to_string(&f).with_context(|| format!("cannot read {}", f.display()))?;
        if !text.contains(&kind_line) || !text.contains(&group_line) {
            continue;
        }
        for doc in super::client::parse_docs(&text).with_context(|| format!("{}", f.display()))? {
            if doc["kind"] == "CustomResourceDefinition"
                && doc["spec"]["group"] == group
                && doc["spec"]["names"]["kind"] == kind
            {
                best = Some((r, doc));
                break;
            }
        }
    }
    Ok(best.map(|(_, d)| d))
}

/// Creates the CRDs (each replaces one of the same name) and waits (30 s) until each kind is
/// served. Errors: a refused CRD or one never served, by name.
pub async fn install_crds(client: &kube::Client, crds: &[Value]) -> anyhow::Result<()> {
    for c in crds {
        let mut c = c.clone();
        // A CRD's status is the server's; the files carry an empty one.
        if let Some(m) = c.as_object_mut() {
            m.remove("status");
        }
        let dropped = apply(client, &c).await?;
        if !dropped.is_empty() {
            eprintln!(
                "agent-day2-sim: the real kube-apiserver dropped from CRD {}: {}",
                c["metadata"]["name"],
                dropped.join(", ")
            );
        }
    }
    let deadline = Instant::now() + Duration::from_secs(30);
    for c in crds {
        let group = c["spec"]["group"].as_str().unwrap_or("");
        let kind = c["spec"]["names"]["kind"].as_str().unwrap_or("");
        let Some(version) = c["spec"]["versions"]
            .as_array()
            .and_then(|vs| vs.iter().find(|v| v["served"] == true))
            .and_then(|v| v["name"].as_str())
        else {
            continue;
        };
        let probe = json!({"apiVersion": format!("{group}/{version}"), "kind": kind});
        loop {
            match resolve(client, &probe).await {
                Ok(_) => break,
                Err(e) if Instant::now() > deadline => {
                    bail!("CRD {}: not served after 30 s: {e:#}", c["metadata"]["name"])
                }
                Err(_) => tokio::time::sleep(Duration::from_millis(100)).await,
            }
        }
    }
    Ok(())
}

/// Every served `(group, plural)` of the main resources (no subresources), from discovery.
pub async fn served_resources(client: &kube::Client) -> anyhow::Result<Vec<(String, String)>> {
    let d = kube::Discovery::new(client.clone())
        .run()
        .await
        .context("discovery as admin")?;
    let mut out = BTreeSet::new();
    for g in d.groups() {
        for (ar, _) in g.recommended_resources() {
            out.insert((ar.group.clone(), ar.plural.clone()));
        }
        // Resources served only in a non-preferred version count too.
        for v in g.versions() {
            for (ar, _) in g.versioned_resources(v) {
                out.insert((ar.group.clone(), ar.plural.clone()));
            }
        }
    }
    Ok(out.into_iter().collect())
}

/// The RBAC objects that give the simulator's identities, on the real server, what
/// [`super::authz`] lets them do:
///
/// - the node-bootstrapper service account: ClusterRole `system:node-bootstrapper` (Kubernetes'
///   bootstrap policy: create/get/list/watch CSRs), as OpenShift binds it;
/// - user `viewer`: [`VIEWER_ROLE`], get/list/watch every resource in `served` but core Secrets
///   (RBAC cannot subtract, so the resources are listed one by one).
///
/// `system:admin` needs nothing (`system:masters`); nodes are judged by the Node authorizer.
pub fn identities(served: &[(String, String)]) -> Vec<Value> {
    let mut by_group: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for (g, p) in served {
        if !(g.is_empty() && p == "secrets") {
            by_group.entry(g.as_str()).or_default().push(p.as_str());
        }
    }
    let rules: Vec<Value> = by_group
        .into_iter()
        .map(|(g, ps)| json!({"apiGroups": [g], "resources": ps, "verbs": ["get", "list", "watch"]}))
        .collect();
    vec![
        json!({
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
            "metadata": {"name": "system:node-bootstrapper"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "system:node-bootstrapper"},
            "subjects": [{"kind": "ServiceAccount", "name": "node-bootstrapper", "namespace": "openshift-machine-config-operator"}],
        }),
        json!({
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
            "metadata": {"name": VIEWER_ROLE},
            "rules": rules,
        }),
        json!({
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
            "metadata": {"name": VIEWER_ROLE},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": VIEWER_ROLE},
            "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "viewer"}],
        }),
    ]
}

/// The order objects are created in: Namespaces, then ServiceAccounts, then the rest (a
/// namespaced object needs its Namespace, a Pod its ServiceAccount), each group in seed order.
pub fn creation_order(objects: Vec<Value>) -> Vec<Value> {
    let rank = |o: &Value| match o["kind"].as_str() {
        Some("Namespace") => 0,
        Some("ServiceAccount") => 1,
        _ => 2,
    };
    let mut v: Vec<(usize, Value)> = objects.into_iter().map(|o| (rank(&o), o)).collect();
    v.sort_by_key(|(r, _)| *r);
    v.into_iter().map(|(_, o)| o).collect()
}

/// What Kubernetes controllers not run here would have made for the seed: a Namespace for every
/// namespace an object names that the seed does not create (the namespace controller's
/// callers would have), and the `default` ServiceAccount of each namespace (the
/// serviceaccount controller's; the ServiceAccount admission plugin refuses Pods without it),
/// plus each ServiceAccount a Pod names.
pub fn implied_objects(objects: &[Value]) -> Vec<Value> {
    let mut have: BTreeSet<(String, String, String)> = BTreeSet::new();
    for o in objects {
        have.insert((
            o["kind"].as_str().unwrap_or("").to_string(),
            o["metadata"]["namespace"].as_str().unwrap_or("").to_string(),
            o["metadata"]["name"].as_str().unwrap_or("").to_string(),
        ));
    }
    let mut want: BTreeSet<(String, String, String)> = BTreeSet::new();
    for o in objects {
        let ns = o["metadata"]["namespace"].as_str().unwrap_or("");
        let own_ns = if o["kind"] == "Namespace" {
            o["metadata"]["name"].as_str().unwrap_or("")
        } else {
            ns
        };
        if !own_ns.is_empty() {
            want.insert(("Namespace".into(), String::new(), own_ns.to_string()));
            want.insert(("ServiceAccount".into(), own_ns.to_string(), "default".into()));
        }
        if o["kind"] == "Pod" {
            if let Some(sa) = o["spec"]["serviceAccountName"].as_str().filter(|s| !s.is_empty()) {
                want.insert(("ServiceAccount".into(), ns.to_string(), sa.to_string()));
            }
        }
    }
    // The server makes these itself.
    for ns in ["default", "kube-system", "kube-public", "kube-node-lease"] {
        want.remove(&("Namespace".into(), String::new(), ns.to_string()));
    }
    want.into_iter()
        .filter(|k| !have.contains(k))
        .map(|(kind, ns, name)| {
            let mut meta = json!({"name": name});
            if !ns.is_empty() {
                meta["namespace"] = json!(ns);
            }
            json!({"apiVersion": "v1", "kind": kind, "metadata": meta})
        })
        .collect()
}

/// The MachineConfig kinds the machine-config server stand-in reads: (apiVersion, kind, plural).
const MCS_KINDS: [(&str, &str, &str); 2] = [
    (
        "machineconfiguration.openshift.io/v1",
        "MachineConfig",
        "machineconfigs",
    ),
    (
        "machineconfiguration.openshift.io/v1",
        "MachineConfigPool",
        "machineconfigpools",
    ),
];

/// Copies the real server's MachineConfigs and MachineConfigPools into `mirror` (what the
/// machine-config server stand-in reads): the lists replace the copies, so objects gone from
/// the server go from the mirror. Errors: a list refused.
async fn sync_machine_configs(
    client: &kube::Client,
    mirror: &std::sync::Mutex<super::mcs::Mirror>,
) -> anyhow::Result<()> {
    let mut fresh = super::mcs::Mirror::default();
    for (av, kind, _) in MCS_KINDS {
        let probe = json!({"apiVersion": av, "kind": kind});
        let (ar, _) = resolve(client, &probe).await?;
        let api: Api<DynamicObject> = Api::all_with(client.clone(), &ar);
        let list = api
            .list(&Default::default())
            .await
            .with_context(|| format!("listing {kind}s for the machine-config server"))?;
        for item in list.items {
            let name = item.metadata.name.clone().unwrap_or_default();
            let v = serde_json::to_value(&item)?;
            if kind == "MachineConfigPool" {
                fresh.pools.insert(name, v);
            } else {
                fresh.configs.insert(name, v);
            }
        }
    }
    *mirror.lock().unwrap() = fresh;
    Ok(())
}

/// Starts the machine-config server stand-in ([`super::mcs`], as `up` runs it) on `ip`:22623,
/// answering from a mirror of the real server's MachineConfigs and pools, refreshed every 2 s.
/// Only on a routable address; a port already taken is said on stderr, as `up` does. Returns
/// the refreshing task (None when no server was started), to abort before the API stops.
async fn start_mcs(
    client: &kube::Client,
    ca: &Ca,
    ip: IpAddr,
    api_int: &str,
    api_port: u16,
    boot_token: &str,
) -> anyhow::Result<Option<tokio::task::JoinHandle<()>>> {
    if ip.is_loopback() {
        return Ok(None);
    }
    let mirror = std::sync::Arc::new(std::sync::Mutex::new(super::mcs::Mirror::default()));
    sync_machine_configs(client, &mirror).await?;
    let addr = SocketAddr::new(ip, super::mcs::MCS_PORT);
    let cfg = super::mcs::McsConfig {
        api_int: api_int.to_string(),
        ip,
        bootstrap_kubeconfig: super::mcs::bootstrap_kubeconfig(api_int, api_port, &ca.cert_pem, boot_token),
        ca_pem: ca.cert_pem.clone(),
    };
    match super::mcs::serve(mirror.clone(), ca, addr, cfg).await {
        Ok(()) => eprintln!(
            "agent-day2-sim: machine-config server https://{api_int}:{} ({addr}), from the real server's MachineConfigs",
            super::mcs::MCS_PORT
        ),
        Err(e) => {
            eprintln!("agent-day2-sim: warning: no machine-config server: {e:#}");
            return Ok(None);
        }
    }
    let client = client.clone();
    Ok(Some(tokio::spawn(async move {
        loop {
            tokio::time::sleep(Duration::from_secs(2)).await;
            if let Err(e) = sync_machine_configs(&client, &mirror).await {
                tracing::warn!("machine-config server mirror: {e:#}");
            }
        }
    })))
}

/// Runs the simulator until SIGINT/SIGTERM: the cluster on the real control plane in
/// `opts.real_apiserver` (default [`default_kube_bin_dir`]); see [`run`].
pub async fn up(opts: super::up::UpOptions) -> anyhow::Result<()> {
    let bins = opts.real_apiserver.clone().unwrap_or_else(default_kube_bin_dir);
    run(opts, bins).await
}

/// `up [--real-apiserver BIN_DIR]`: the simulated cluster (scenario, PKI, base
/// ISO and file server, seed, `DIR/kubeconfig` with contexts admin / bootstrapper / viewer,
/// `DIR/ca.crt`, `DIR/ready` written last), served by the real control plane. Runs until
/// SIGINT/SIGTERM, or fails when one of the processes exits.
///
/// With `--registry`, a container registry
/// ([`super::up::start_registry`]). The scenario's `forbidden` switches are denied by an
/// authorization webhook ([`forbidden_webhook`]; the admin is then cluster-admin through RBAC,
/// not system:masters). The control-plane nodes' kubelets, with `kubelet-exec` for pod exec,
/// come from [`super::cp_kubelet`]; `--assisted-db-url` seeds cluster 0's assisted-service as
/// namespace `multicluster-engine`, its pod made Running by master-0's kubelet.
/// Errors: a missing binary, a process that fails, an object the server refuses.
pub async fn run(opts: super::up::UpOptions, bins: PathBuf) -> anyhow::Result<()> {
    let mut scenario = match &opts.scenario {
        Some(p) => crate::scenario::Scenario::load(p)?,
        None => crate::scenario::Scenario::default(),
    };
    check_kube_bins(&bins).map_err(|e| anyhow!(e))?;
    std::fs::create_dir_all(&opts.dir).with_context(|| format!("cannot create {}", opts.dir.display()))?;
    let _ = std::fs::remove_file(opts.dir.join("ready"));

    // The API address: kube-apiserver cannot pick its own port, so take a free one.
    let listen = opts
        .listen
        .unwrap_or(SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), 0));
    let ip = if listen.ip().is_unspecified() {
        IpAddr::V4(Ipv4Addr::LOCALHOST)
    } else {
        listen.ip()
    };
    let port = if listen.port() == 0 {
        free_port(ip).with_context(|| {
            format!("--listen {listen} (inside `agent-day2-sim netns`, 192.168.111.0/24 is local)")
        })?
    } else {
        listen.port()
    };
    let listen = SocketAddr::new(ip, port);
    let api_url = format!("https://{listen}");

    let ca = Ca::generate("agent-day2-sim-ca")?;
    // With `forbidden` switches the kubeconfig's admin is no member of system:masters (which
    // kube-apiserver allows before any authorizer could deny): cluster-admin through RBAC
    // ([`ADMIN_BINDING`]), so the switches' webhook judges it; the seed uses a masters identity.
    let switches = !scenario.forbidden.is_empty();
    let admin = if switches {
        ca.issue_client("system:admin", &[])?
    } else {
        ca.issue_client("system:admin", &["system:masters"])?
    };
    let boot_token = crate::pki::new_token(24);
    let viewer_token = crate::pki::new_token(24);
    let render = |cert: &str, key: &str| {
        crate::kubeconfig::render(&crate::kubeconfig::KubeconfigParams {
            cluster_name: &scenario.name,
            server: &api_url,
            ca_pem: &ca.cert_pem,
            admin_cert_pem: cert,
            admin_key_pem: key,
            bootstrapper_token: &boot_token,
            viewer_token: &viewer_token,
        })
    };
    let kc = render(&admin.cert_pem, &admin.key_pem);
    let seed_kc = if switches {
        let seeder = ca.issue_client("agent-day2-sim:seeder", &["system:masters"])?;
        render(&seeder.cert_pem, &seeder.key_pem)
    } else {
        kc.clone()
    };

    // Base ISO, file server, seed objects.
    let arch = super::up::coreos_arch(&scenario.architecture).to_string();
    let (base_iso, files_base_url) = super::up::serve_base_iso(&opts, ip, &arch).await?;
    // The registry with the release payload, before the seed: the seed names its true digest.
    let registry = match opts.registry {
        Some(addr) => Some(super::up::start_registry(addr, &opts.dir, &ca, &mut scenario, &base_iso).await?),
        None => None,
    };
    let seed_registry = registry.as_ref().map(|r| &r.seed);
    let ctx = crate::seed::SeedContext {
        api_url: api_url.clone(),
        files_base_url: files_base_url.clone(),
        base_iso,
        ca_pem: ca.cert_pem.clone(),
    };
    // The seed includes the scenario's `objects` and `objectsDir` and applies `omit`.
    let mut objects = crate::seed::seed_objects_with_registry(&scenario, &ctx, seed_registry)?;
    // Cluster 0's assisted-service; its pod's status comes from master-0's kubelet.
    let assisted_db = super::up::assisted_db(&opts).await?;
    if let Some(db) = &assisted_db {
        objects.extend(crate::seed::assisted_service_objects(db));
    }
    let volumes_dir = std::path::absolute(
        opts.volumes_dir
            .clone()
            .unwrap_or_else(|| opts.dir.join("volumes")),
    )?;
    let mut masters = super::cp_kubelet::control_plane_nodes(&objects);
    // Another cluster in this network namespace (the harness's shared mode) may hold the
    // kubelet port of the same addresses: this cluster's control-plane Nodes then name a free
    // one. The port stays bound here until kubelet-exec starts, so a cluster starting at the
    // same moment sees it taken.
    let mut kubelet_port_hold = None;
    if let Some(a) = masters.first().and_then(|m| m.kubelet.first()).copied() {
        match TcpListener::bind(a) {
            Ok(l) => kubelet_port_hold = Some(l),
            Err(e) if e.kind() == std::io::ErrorKind::AddrInUse => {
                let l = TcpListener::bind(SocketAddr::new(a.ip(), 0))?;
                let port = l.local_addr()?.port();
                kubelet_port_hold = Some(l);
                for o in objects.iter_mut().filter(|o| o["kind"] == "Node") {
                    if masters.iter().any(|m| o["metadata"]["name"] == m.name.as_str()) {
                        o["status"]["daemonEndpoints"]["kubeletEndpoint"]["Port"] = json!(port);
                    }
                }
                masters = super::cp_kubelet::control_plane_nodes(&objects);
            }
            Err(_) => {}
        }
    }
    // Every `omit` entry must name something (as `up` checks): a typo would leave the object in.
    {
        let all = crate::seed::seed_objects_with_registry(
            &crate::scenario::Scenario {
                omit: Vec::new(),
                ..scenario.clone()
            },
            &ctx,
            seed_registry,
        )?;
        for (i, spec) in scenario.omit.iter().enumerate() {
            if !all.iter().any(|o| super::up::seed_omit_matches(spec, o)) {
                return Err(anyhow::Error::new(crate::scenario::ScenarioError(format!(
                    "scenario: omit[{i}]: {spec:?} names no seeded or scenario object (resource/name or resource/namespace/name, plural resource)"
                ))));
            }
        }
    }
    let service_cidrs: Vec<String> = objects
        .iter()
        .find(|o| o["kind"] == "Network" && o["apiVersion"] == "config.openshift.io/v1")
        .and_then(|o| o["spec"]["serviceNetwork"].as_array())
        .map(|a| a.iter().filter_map(|v| v.as_str().map(String::from)).collect())
        .filter(|v: &Vec<String>| !v.is_empty())
        .unwrap_or_else(|| vec!["172.30.0.0/16".into()]);

    // The control plane.
    let t0 = Instant::now();
    let mut cp = start(StartOptions {
        dir: &opts.dir,
        bin_dir: &bins,
        ca: &ca,
        listen,
        api_names: vec![
            format!("api.{}.{}", scenario.name, scenario.base_domain),
            format!("api-int.{}.{}", scenario.name, scenario.base_domain),
        ],
        service_cidrs,
        tokens: vec![
            StaticToken {
                token: boot_token.clone(),
                user: super::authz::NODE_BOOTSTRAPPER.into(),
                uid: "node-bootstrapper".into(),
                groups: vec![
                    "system:serviceaccounts".into(),
                    "system:serviceaccounts:openshift-machine-config-operator".into(),
                ],
            },
            StaticToken {
                token: viewer_token.clone(),
                user: "viewer".into(),
                uid: "viewer".into(),
                groups: Vec::new(),
            },
        ],
        admin_kubeconfig: &seed_kc,
        forbidden: scenario.forbidden.clone(),
    })
    .await?;
    let client = cp.client.clone();

    // CRDs: openshift/api's for the OpenShift kinds the seed uses (the permissive definition
    // only where the module has none), then every --crds folder's (they replace them).
    let api_root = bins.join("openshift-api");
    let mut crds = Vec::new();
    let mut permissive = Vec::new();
    for (g, v, k, p, short, status) in super::registry::PERMISSIVE_OPENSHIFT {
        match openshift_crd(&api_root, g, k)? {
            Some(c) => crds.push(c),
            None => {
                permissive.push(format!("{p}.{g}"));
                crds.push(super::registry::permissive_crd(g, v, k, p, short, *status));
            }
        }
    }
    for dir in &opts.crds {
        for (file, doc) in super::up::load_yaml_dir(dir)? {
            if doc["kind"] == "CustomResourceDefinition" {
                let name = doc["metadata"]["name"].clone();
                crds.retain(|c| c["metadata"]["name"] != name);
                crds.push(doc);
                let _ = file;
            }
        }
    }
    if !permissive.is_empty() {
        eprintln!(
            "agent-day2-sim: {} has no CRD for {}: served with a permissive schema",
            api_root.display(),
            permissive.join(", ")
        );
    }
    let t_cp = t0.elapsed();
    install_crds(&client, &crds).await?;
    let t_crds = t0.elapsed();

    // The seed, then the identities' RBAC.
    let mut all = implied_objects(&objects);
    all.extend(objects);
    let mut refused = Vec::new();
    for o in creation_order(all) {
        match apply(&client, &o).await {
            Ok(dropped) if !dropped.is_empty() => eprintln!(
                "agent-day2-sim: warning: the real kube-apiserver dropped from {} {}{}: {} (not in its schema)",
                o["kind"].as_str().unwrap_or("?"),
                o["metadata"]["namespace"].as_str().map(|n| format!("{n}/")).unwrap_or_default(),
                o["metadata"]["name"].as_str().unwrap_or("?"),
                dropped.join(", ")
            ),
            Ok(_) => {}
            Err(e) => refused.push(format!("{e:#}")),
        }
    }
    if !refused.is_empty() {
        bail!(
            "the real kube-apiserver refused {} seed object(s):\n  {}",
            refused.len(),
            refused.join("\n  ")
        );
    }
    let t_seed = t0.elapsed();
    let served = served_resources(&client).await?;
    let mut ids = identities(&served);
    if switches {
        ids.push(json!({
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
            "metadata": {"name": ADMIN_BINDING},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "cluster-admin"},
            "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "system:admin"}],
        }));
    }
    for o in ids {
        let dropped = apply(&client, &o).await?;
        if !dropped.is_empty() {
            bail!(
                "the real kube-apiserver dropped {} from {} {}",
                dropped.join(", "),
                o["kind"],
                o["metadata"]["name"]
            );
        }
    }
    let api_int = format!("api-int.{}.{}", scenario.name, scenario.base_domain);
    let mcs_mirror = start_mcs(&client, &ca, ip, &api_int, port, &boot_token).await?;

    // The control-plane nodes' kubelets: pod exec endpoint, pod status, volumes.
    let exec_file = super::cp_kubelet::ExecFile {
        assisted_db_url: opts.assisted_db_url.clone(),
        volumes_dir: volumes_dir.clone(),
    };
    write_file(
        &opts.dir.join(super::cp_kubelet::EXEC_FILE),
        &serde_json::to_string_pretty(&exec_file)?,
        0o600,
    )?;
    let mut kubelet_tasks = Vec::new();
    if !masters.is_empty() {
        let pki = opts.dir.join("pki");
        let names: Vec<String> = masters.iter().map(|m| m.name.clone()).collect();
        let ips: Vec<IpAddr> = masters
            .iter()
            .flat_map(|m| m.kubelet.iter().map(|a| a.ip()))
            .collect();
        let serving = ca.issue_server(&names, &ips)?;
        let (crt, key) = (pki.join("kubelet-serving.crt"), pki.join("kubelet-serving.key"));
        write_file(&crt, &serving.cert_pem, 0o644)?;
        write_file(&key, &serving.key_pem, 0o600)?;
        // This very binary, also after a rebuild replaced the file (container-exec is `up`'s own).
        let me = PathBuf::from(format!("/proc/{}/exe", std::process::id()));
        let args =
            super::cp_kubelet::kubelet_exec_args(&masters, &crt, &key, &pki.join("ca.crt"), &me, &opts.dir);
        drop(kubelet_port_hold.take());
        cp.add(Proc::spawn(
            "kubelet-exec",
            &bins.join("kubelet-exec"),
            &args,
            opts.dir.join("kubelet-exec.log"),
        )?);
        kubelet_tasks = super::cp_kubelet::start(&seed_kc, &ca, &api_url, &masters, &volumes_dir).await?;
    }
    if let Err(e) = cp.check_running() {
        // Quiet the mirror's polls while the control plane stops.
        if let Some(t) = &mcs_mirror {
            t.abort();
        }
        return Err(e);
    }

    // Client files; DIR/ready last.
    std::fs::write(opts.dir.join("ca.crt"), &ca.cert_pem)?;
    crate::kubeconfig::write_private(&opts.dir.join("kubeconfig"), &kc)?;
    super::up::write_ready(&opts.dir, &api_url, &files_base_url, registry.as_ref())?;
    eprintln!(
        "agent-day2-sim: real control plane ready in {:.1} s (etcd and kube-apiserver {:.1} s, CRDs {:.1} s, seed {:.1} s, identities and machine-config server {:.1} s)",
        t0.elapsed().as_secs_f64(),
        t_cp.as_secs_f64(),
        (t_crds - t_cp).as_secs_f64(),
        (t_seed - t_crds).as_secs_f64(),
        (t0.elapsed() - t_seed).as_secs_f64()
    );
    eprintln!(
        "agent-day2-sim: real kube-apiserver {api_url}, files {files_base_url}, kubeconfig {}",
        opts.dir.join("kubeconfig").display()
    );
    for l in cp.versions.lines() {
        eprintln!("agent-day2-sim:   {l}");
    }

    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    let result = loop {
        tokio::select! {
            _ = tokio::signal::ctrl_c() => break Ok(()),
            _ = term.recv() => break Ok(()),
            _ = tick.tick() => {
                if let Err(e) = cp.check_running() {
                    break Err(e);
                }
            }
        }
    };
    let _ = std::fs::remove_file(opts.dir.join("ready"));
    if let Some(t) = mcs_mirror {
        t.abort();
    }
    for t in kubelet_tasks {
        t.abort();
    }
    drop(cp);
    // Dropping the registry kills docker-registry.
    drop(registry);
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pinned_version_comes_from_the_wrapper() {
        let v = pinned_kubernetes();
        assert!(v.starts_with("v1."), "{v}");
        assert!(
            default_kube_bin_dir()
                .to_string_lossy()
                .contains(&format!("kube-{v}"))
                || std::env::var_os(KUBE_BIN_ENV).is_some()
        );
    }

    #[test]
    fn dropped_fields_are_named_by_path() {
        let sent = json!({"spec": {"a": 1, "b": {"c": 2, "gone": 3}, "n": null, "l": [{"x": 1}, {"y": 2}]}, "extra": true});
        let got = json!({"spec": {"a": 1, "b": {"c": 2}, "l": [{"x": 1}, {}], "defaulted": 5}});
        let mut d = dropped_fields(&sent, &got, "");
        d.sort();
        assert_eq!(d, vec!["extra", "spec.b.gone", "spec.l[1].y"]);
        assert!(dropped_fields(&got, &got, "").is_empty());
    }

    #[test]
    fn the_webhook_denies_only_the_switches() {
        let rules = vec![crate::scenario::ForbiddenRule {
            resource: "secrets".into(),
            namespace: Some("openshift-config".into()),
            name: Some("pull-secret".into()),
            ..Default::default()
        }];
        let review = |verb: &str, ns: &str, name: &str| {
            json!({"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview",
                   "spec": {"user": "system:admin", "resourceAttributes":
                       {"verb": verb, "group": "", "resource": "secrets", "namespace": ns, "name": name}}})
        };
        let denied = webhook_decision(&review("get", "openshift-config", "pull-secret"), &rules);
        assert_eq!(denied["denied"], true, "{denied}");
        assert_eq!(denied["allowed"], false);
        for other in [
            review("get", "openshift-config", "other"),
            review("get", "kube-system", "pull-secret"),
            json!({"spec": {"nonResourceAttributes": {"path": "/version", "verb": "get"}}}),
        ] {
            let d = webhook_decision(&other, &rules);
            assert_eq!(d, json!({"allowed": false}), "no opinion for {other}: {d}");
        }
    }

    #[test]
    fn first_service_ips() {
        assert_eq!(
            first_service_ip("172.30.0.0/16"),
            Some("172.30.0.1".parse().unwrap())
        );
        assert_eq!(first_service_ip("fd02::/112"), Some("fd02::1".parse().unwrap()));
        assert_eq!(first_service_ip("nonsense"), None);
    }

    #[test]
    fn implied_namespaces_and_service_accounts() {
        let objs = vec![
            json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "openshift-config"}}),
            json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s", "namespace": "openshift-config"}}),
            json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "mce"}, "spec": {"serviceAccountName": "svc"}}),
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "namespace": "kube-system"}}),
        ];
        let got: Vec<String> = implied_objects(&objs)
            .iter()
            .map(|o| {
                format!(
                    "{}/{}/{}",
                    o["kind"].as_str().unwrap(),
                    o["metadata"]["namespace"].as_str().unwrap_or(""),
                    o["metadata"]["name"].as_str().unwrap()
                )
            })
            .collect();
        assert_eq!(
            got,
            vec![
                "Namespace//mce",
                "ServiceAccount/kube-system/default",
                "ServiceAccount/mce/default",
                "ServiceAccount/mce/svc",
                "ServiceAccount/openshift-config/default",
            ]
        );
        let order: Vec<String> = creation_order(objs)
            .iter()
            .map(|o| o["kind"].as_str().unwrap().to_string())
            .collect();
        assert_eq!(order[0], "Namespace");
    }

    #[test]
    fn viewer_role_lists_everything_but_secrets() {
        let served = vec![
            (String::new(), "secrets".to_string()),
            (String::new(), "nodes".to_string()),
            (
                "certificates.k8s.io".to_string(),
                "certificatesigningrequests".to_string(),
            ),
        ];
        let objs = identities(&served);
        let role = objs.iter().find(|o| o["kind"] == "ClusterRole").unwrap();
        let text = role["rules"].to_string();
        assert!(!text.contains("secrets"), "{text}");
        assert!(
            text.contains("\"nodes\"") && text.contains("certificatesigningrequests"),
            "{text}"
        );
        for r in role["rules"].as_array().unwrap() {
            assert_eq!(r["verbs"], json!(["get", "list", "watch"]));
        }
    }

    #[test]
    fn apiserver_flags() {
        let p = PkiFiles::in_dir(Path::new("/d"));
        let a = apiserver_args(
            &p,
            "192.168.111.5:6443".parse().unwrap(),
            "http://127.0.0.1:1",
            &["172.30.0.0/16".into()],
            Path::new("/d"),
        );
        assert!(a.contains(&"--authorization-mode=Node,RBAC".to_string()));
        assert!(a.contains(&"--enable-admission-plugins=NodeRestriction".to_string()));
        assert!(!a.iter().any(|f| f.starts_with("--endpoint-reconciler-type")));
        let lo = apiserver_args(
            &p,
            "127.0.0.1:6443".parse().unwrap(),
            "http://127.0.0.1:1",
            &["172.30.0.0/16".into()],
            Path::new("/d"),
        );
        assert!(lo.contains(&"--endpoint-reconciler-type=none".to_string()));
        let k = controller_manager_args(&p);
        assert!(k.contains(
            &"--controllers=csrsigning,serviceaccount,namespace,persistentvolume-binder,pvc-protection,pv-protection".to_string()
        ));
        // The kubelet API as OpenShift reaches it.
        assert!(a.contains(&"--kubelet-preferred-address-types=InternalIP".to_string()));
        assert!(a
            .iter()
            .any(|f| f.starts_with("--kubelet-certificate-authority=")));
        assert!(a.iter().any(|f| f.starts_with("--kubelet-client-certificate=")));
        assert!(!k.iter().any(|f| f.contains("csrapproving")));
        assert!(k.contains(&"--kube-api-qps=150".to_string()));
    }
}
