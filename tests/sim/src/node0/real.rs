//! `agent-day2-sim node0 --real`: node 0 as the REAL assisted-service, in the agent-based
//! installer's REST mode, driven through a compact install as the agent-based installer drives
//! it, and held at the state node 0's database holds just before node 0 reboots (the moment
//! `migrate export` runs: docs/migrate.md).
//!
//! Real (the consumer code that judges every request):
//! - `assisted-service` (built by `scripts/real-components.sh assisted` from the pinned source
//!   tree) on the PostgreSQL at `--db-url` (it runs its own migrations), with node 0's
//!   environment ([`service_env`], after the agent-based installer's
//!   `assisted-service.env.template`: `AUTH_TYPE=agent-installer-local`, `DEPLOY_TARGET=onprem`,
//!   `STORAGE=filesystem`, `INSTALL_INVOKER=agent-installer`), listening on `--listen`'s port;
//! - `agent-installer-client registerCluster` and `registerInfraEnv` on the agent-based
//!   installer's ZTP manifests ([`manifests`]: ClusterDeployment, AgentClusterInstall with
//!   platform `None` and user-managed networking, ClusterImageSet, InfraEnv, one NMStateConfig
//!   per host, the pull secret);
//! - every state change: the service's own validations, host and cluster monitors, install
//!   preparation, bootstrap choice, progress-stage ordering, log storage and events.
//!
//! Stand-ins, each naming what would replace it:
//! - the discovery agents of the hosts ([`super::agents`]; the real assisted-installer-agent on
//!   each machine replaces them): register with the agent token, answer the service's steps with
//!   the inventory of a KVM machine (8 cores, 32 GiB, a 120 GiB virtio disk);
//! - assisted-installer on each host (the real installer, which writes the disk and reboots):
//!   reports the install stages in the order upstream's installer does and uploads a host logs
//!   archive before its reboot;
//! - `oc` ([`oc_standin`]; a real `oc` with the release payload replaces it): answers the
//!   client's and the service's release lookups;
//! - `DUMMY_IGNITION=true`: the real Ignition generation extracts `openshift-install` from the
//!   release with `oc`, which cannot run here, so the service writes its placeholder files;
//! - the monitors run every 2 s (`CLUSTER_MONITOR_INTERVAL`, `HOST_MONITOR_INTERVAL`; upstream's
//!   defaults 10 s and 8 s): only time changes.
//!
//! The state it stops at (upstream code, docs/migrate.md "Node 0's state at export"): the
//! cluster `installing`; the bootstrap host (the one the service chose: node 0, where the
//! service runs) has reported `Rebooting` and uploaded its logs but not rebooted; the other
//! masters rebooted, fetched their Ignition and `Joined`; workers (if any) likewise; nothing is
//! `installed`. On SNO (`--hosts 1`) the one host is the bootstrap and reboots at once.
//!
//! Files in `--dir`: `auth-key.pk8` (the agent installer's ES256 key, PKCS#8, 0600),
//! `user-token` (0600), `real/` (the service's `WORK_DIR` `real/data/`, its log
//! `real/service.log`, the manifests, the `oc` stand-in) and, once held, `ready` (the base URL).

use std::net::{IpAddr, SocketAddr, TcpListener};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use serde_json::{json, Value};

use super::agents::{Api, Host, Tokens, API_BASE};
use super::seed;

/// The release's major.minor in `RELEASE_IMAGES` and `OS_IMAGES`.
const MAJOR_MINOR: &str = "4.18";

/// Parts of a `postgres://USER[:PASS]@HOST:PORT/DB` URL. Errors name what is missing.
#[derive(Debug, PartialEq)]
pub struct DbUrl {
    /// Role.
    pub user: String,
    /// Password (`None`: trust authentication).
    pub password: Option<String>,
    /// Host (an IP or name; brackets of an IPv6 literal removed).
    pub host: String,
    /// Port (default 5432).
    pub port: u16,
    /// Database name.
    pub db: String,
}

/// Parses `--db-url` for the service's `DB_*` variables.
pub fn parse_db_url(url: &str) -> anyhow::Result<DbUrl> {
    let rest = url
        .strip_prefix("postgres://")
        .or_else(|| url.strip_prefix("postgresql://"))
        .with_context(|| format!("--db-url {url:?}: not a postgres:// URL"))?;
    let (auth, rest) = rest
        .split_once('@')
        .with_context(|| format!("--db-url {url:?}: no user (postgres://USER@HOST:PORT/DB)"))?;
    let (user, password) = match auth.split_once(':') {
        Some((u, p)) => (u.to_string(), Some(p.to_string())),
        None => (auth.to_string(), None),
    };
    let (hostport, db) = rest
        .split_once('/')
        .with_context(|| format!("--db-url {url:?}: no database name"))?;
    let db = db.split('?').next().unwrap_or("").to_string();
    let (host, port) = if let Some(h) = hostport.strip_prefix('[') {
        let (h, p) = h.split_once(']').context("--db-url: unclosed [")?;
        (h.to_string(), p.strip_prefix(':').unwrap_or(""))
    } else {
        match hostport.rsplit_once(':') {
            Some((h, p)) => (h.to_string(), p),
            None => (hostport.to_string(), ""),
        }
    };
    let port = if port.is_empty() {
        5432
    } else {
        port.parse()
            .with_context(|| format!("--db-url {url:?}: bad port"))?
    };
    if user.is_empty() || host.is_empty() || db.is_empty() {
        bail!("--db-url {url:?}: needs postgres://USER@HOST:PORT/DB");
    }
    Ok(DbUrl {
        user,
        password,
        host,
        port,
        db,
    })
}

/// The assisted-service environment of node 0, as the agent-based installer's
/// `data/data/agent/files/usr/local/share/assisted-service/assisted-service.env.template`
/// (openshift/installer) sets it, with this module's deviations (`DUMMY_IGNITION`, the monitor
/// intervals, `WORK_DIR`, the addresses). `public_key_b64`: base64 of the PEM public key.
pub fn service_env(
    db: &DbUrl,
    public_key_b64: &str,
    tokens: &Tokens,
    service_host: &str,
    work_dir: &Path,
) -> Vec<(String, String)> {
    let v = seed::OPENSHIFT_VERSION;
    let hw = hw_requirements();
    let release = json!([{"openshift_version": MAJOR_MINOR, "cpu_architecture": "x86_64", "cpu_architectures": ["x86_64"],
        "url": seed::RELEASE_IMAGE, "version": v}]);
    let os = json!([{"openshift_version": MAJOR_MINOR, "cpu_architecture": "x86_64",
        "url": "https://mirror.example.com/rhcos-live.x86_64.iso", "version": "418.94.202501221327-0"}]);
    let mut env: Vec<(String, String)> = [
        ("AUTH_TYPE", "agent-installer-local"),
        ("DEPLOY_TARGET", "onprem"),
        ("STORAGE", "filesystem"),
        ("INSTALL_INVOKER", "agent-installer"),
        ("DUMMY_IGNITION", "true"),
        ("IPV6_SUPPORT", "true"),
        ("DISK_ENCRYPTION_SUPPORT", "true"),
        ("NTP_DEFAULT_SERVER", ""),
        ("PUBLIC_CONTAINER_REGISTRIES", "quay.io"),
        ("ENABLE_UPGRADE_AGENT", "false"),
        ("ENABLE_DATA_COLLECTION", "false"),
        ("ASSISTED_SERVICE_SCHEME", "http"),
        ("CLUSTER_MONITOR_INTERVAL", "2s"),
        ("HOST_MONITOR_INTERVAL", "2s"),
    ]
    .iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect();
    env.extend([
        ("EC_PUBLIC_KEY_PEM".into(), public_key_b64.to_string()),
        ("USER_AUTH_TOKEN".into(), tokens.user.clone()),
        ("WATCHER_AUTH_TOKEN".into(), tokens.watcher.clone()),
        ("DB_HOST".into(), db.host.clone()),
        ("DB_PORT".into(), db.port.to_string()),
        ("DB_USER".into(), db.user.clone()),
        (
            "DB_PASS".into(),
            db.password.clone().unwrap_or_else(|| "unused-trust".into()),
        ),
        ("DB_NAME".into(), db.db.clone()),
        ("HW_VALIDATOR_REQUIREMENTS".into(), hw.to_string()),
        ("RELEASE_IMAGES".into(), release.to_string()),
        ("OS_IMAGES".into(), os.to_string()),
        ("ASSISTED_SERVICE_HOST".into(), service_host.to_string()),
        (
            "IMAGE_SERVICE_BASE_URL".into(),
            format!(
                "http://{}:8888/",
                service_host.rsplit_once(':').map(|h| h.0).unwrap_or(service_host)
            ),
        ),
        ("WORK_DIR".into(), format!("{}/", work_dir.display())),
    ]);
    env
}

/// `HW_VALIDATOR_REQUIREMENTS` as the agent-based installer's env template and the infrastructure
/// operator's ConfigMap give it (one `default` version: masters 4 cores, 16 GiB, 100 GB; workers
/// 2 cores, 8 GiB, 100 GB; SNO 8 cores, 16 GiB).
pub fn hw_requirements() -> Value {
    json!([{"version": "default",
        "master": {"cpu_cores": 4, "ram_mib": 16384, "disk_size_gb": 100, "installation_disk_speed_threshold_ms": 10, "network_latency_threshold_ms": 100, "packet_loss_percentage": 0},
        "arbiter": {"cpu_cores": 2, "ram_mib": 8192, "disk_size_gb": 50, "installation_disk_speed_threshold_ms": 10, "network_latency_threshold_ms": 1000, "packet_loss_percentage": 0},
        "worker": {"cpu_cores": 2, "ram_mib": 8192, "disk_size_gb": 100, "installation_disk_speed_threshold_ms": 10, "network_latency_threshold_ms": 1000, "packet_loss_percentage": 10},
        "sno": {"cpu_cores": 8, "ram_mib": 16384, "disk_size_gb": 100, "installation_disk_speed_threshold_ms": 10},
        "edge-worker": {"cpu_cores": 2, "ram_mib": 8192, "disk_size_gb": 15, "installation_disk_speed_threshold_ms": 10}}])
}

/// The agent-based installer's ZTP manifests for `hosts` hosts (1: SNO; else three control-plane
/// agents and `hosts - 3` workers), as `openshift-install agent create image` writes them from
/// install-config.yaml and agent-config.yaml: file name → YAML.
pub fn manifests(hosts: usize) -> Vec<(&'static str, String)> {
    let (name, ns) = (seed::CLUSTER_NAME, seed::CLUSTER_NAME);
    let cp = if hosts == 1 { 1 } else { 3 };
    let workers = hosts.saturating_sub(cp);
    let ssh =
        "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIMZLA9nlB9hZgEi7riDh4+Lgyqgs7AjcYw5U4t4fI2JW admin@example.com";
    let pull = seed::PULL_SECRET;
    let nmstate: Vec<String> = (0..hosts)
        .map(|i| {
            format!(
                r#"apiVersion: agent-install.openshift.io/v1beta1
kind: NMStateConfig
metadata:
  name: {h}
  namespace: {ns}
  labels:
    {ns}-nmstate-label-name: {ns}-nmstate-label-value
spec:
  config:
    interfaces:
    - name: {nic}
      type: ethernet
      state: up
      mac-address: {mac}
      ipv4:
        enabled: true
        address:
        - ip: {ip}
          prefix-length: 24
        dhcp: false
    dns-resolver:
      config:
        server:
        - 192.168.111.1
    routes:
      config:
      - destination: 0.0.0.0/0
        next-hop-address: 192.168.111.1
        next-hop-interface: {nic}
        table-id: 254
  interfaces:
  - name: {nic}
    macAddress: {mac}
"#,
                h = seed::hostname(i),
                nic = super::agents::NIC,
                mac = seed::mac(i),
                ip = seed::ip(i),
            )
        })
        .collect();
    vec![
        ("cluster-deployment.yaml", format!(
            "apiVersion: hive.openshift.io/v1\nkind: ClusterDeployment\nmetadata:\n  name: {name}\n  namespace: {ns}\nspec:\n  baseDomain: {bd}\n  clusterInstallRef:\n    group: extensions.hive.openshift.io\n    kind: AgentClusterInstall\n    name: {name}\n    version: v1beta1\n  clusterName: {name}\n  controlPlaneConfig:\n    servingCertificates: {{}}\n  platform:\n    agentBareMetal:\n      agentSelector: {{}}\n  pullSecretRef:\n    name: pull-secret\n",
            bd = seed::BASE_DOMAIN)),
        ("agent-cluster-install.yaml", format!(
            "apiVersion: extensions.hive.openshift.io/v1beta1\nkind: AgentClusterInstall\nmetadata:\n  name: {name}\n  namespace: {ns}\nspec:\n  clusterDeploymentRef:\n    name: {name}\n  imageSetRef:\n    name: openshift-{v}\n  networking:\n    clusterNetwork:\n    - cidr: 10.128.0.0/14\n      hostPrefix: 23\n    machineNetwork:\n    - cidr: 192.168.111.0/24\n    serviceNetwork:\n    - 172.30.0.0/16\n    networkType: OVNKubernetes\n    userManagedNetworking: true\n  platformType: None\n  provisionRequirements:\n    controlPlaneAgents: {cp}\n    workerAgents: {workers}\n  sshPublicKey: {ssh}\n",
            v = seed::OPENSHIFT_VERSION)),
        ("cluster-image-set.yaml", format!(
            "apiVersion: hive.openshift.io/v1\nkind: ClusterImageSet\nmetadata:\n  name: openshift-{v}\nspec:\n  releaseImage: {r}\n",
            v = seed::OPENSHIFT_VERSION, r = seed::RELEASE_IMAGE)),
        ("infraenv.yaml", format!(
            "apiVersion: agent-install.openshift.io/v1beta1\nkind: InfraEnv\nmetadata:\n  name: {name}\n  namespace: {ns}\nspec:\n  clusterRef:\n    name: {name}\n    namespace: {ns}\n  cpuArchitecture: x86_64\n  pullSecretRef:\n    name: pull-secret\n  sshAuthorizedKey: {ssh}\n  nmStateConfigLabelSelector:\n    matchLabels:\n      {ns}-nmstate-label-name: {ns}-nmstate-label-value\n")),
        ("nmstateconfig.yaml", nmstate.join("---\n")),
        ("pull-secret.yaml", format!(
            "apiVersion: v1\nkind: Secret\ntype: kubernetes.io/dockerconfigjson\nmetadata:\n  name: pull-secret\n  namespace: {ns}\nstringData:\n  .dockerconfigjson: '{pull}'\n")),
    ]
}

/// `agent-day2-sim standin oc ARGS...`: the `oc` the agent-installer client and the service
/// call (`oc adm release info` for the version and `--image-for=` pull specs, `oc image info`
/// for the architecture), answered for [`seed::RELEASE_IMAGE`]; anything else exits 1 saying
/// so. A real `oc` with the release payload replaces it.
pub fn oc_standin(args: &[String]) -> i32 {
    let all = args.join(" ");
    let first: Vec<&str> = args.iter().take(3).map(String::as_str).collect();
    match first.as_slice() {
        ["adm", "release", "info", ..] => {
            if all.contains("{{.metadata.version}}") {
                println!("{}", seed::OPENSHIFT_VERSION);
                0
            } else if all.contains("--image-for=okd-rpms") {
                eprintln!("error: no image tag \"okd-rpms\" exists in the release image");
                1
            } else if all.contains("--image-for=") {
                println!(
                    "quay.io/openshift-release-dev/ocp-v4.0-art-dev@sha256:{}",
                    "0".repeat(64)
                );
                0
            } else {
                eprintln!("oc stand-in: unhandled: oc {all}");
                1
            }
        }
        ["image", "info", ..] => {
            println!(
                r#"{{"name":"release","digest":"sha256:0","config":{{"architecture":"amd64","os":"linux"}}}}"#
            );
            0
        }
        ["version", ..] => {
            println!("Client Version: {}", seed::OPENSHIFT_VERSION);
            0
        }
        _ => {
            eprintln!("oc stand-in: unhandled: oc {all}");
            1
        }
    }
}

/// Writes `DIR/oc`, a script running [`oc_standin`] through `sim_exe` (the agent-day2-sim
/// binary): put `DIR` first on the PATH of a program that calls `oc`.
pub fn write_oc_standin(dir: &Path, sim_exe: &Path) -> anyhow::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::create_dir_all(dir)?;
    let oc = dir.join("oc");
    std::fs::write(
        &oc,
        format!(
            "#!/bin/sh\n# oc stand-in of agent-day2-sim (node0::real::oc_standin)\nexec {} standin oc \"$@\"\n",
            sim_exe.display()
        ),
    )?;
    std::fs::set_permissions(&oc, std::fs::Permissions::from_mode(0o755))?;
    Ok(())
}

/// Options of a real node 0 (from `node0 --real`'s flags).
#[derive(Debug, Clone)]
pub struct RealOpts {
    /// `--dir`.
    pub dir: PathBuf,
    /// `--listen` (port 0: a free one). The service binds the port on every address of the
    /// network namespace; the IP is the one written to `DIR/ready` and `ASSISTED_SERVICE_HOST`.
    pub listen: SocketAddr,
    /// `--db-url`.
    pub db_url: String,
    /// `--hosts`: 1 (SNO) or at least 3.
    pub hosts: usize,
    /// Directory of `assisted-service`, `agent-installer-client` and `versions`.
    pub bin_dir: PathBuf,
    /// Give up (exit 1) when the install has not reached the held state in this time.
    pub timeout: Duration,
}

/// Kills the service when dropped (and, through `PR_SET_PDEATHSIG`, when this process dies).
struct Service {
    child: Child,
    log: PathBuf,
}

impl Service {
    fn tail(&self) -> String {
        let t = std::fs::read_to_string(&self.log).unwrap_or_default();
        let lines: Vec<&str> = t.lines().collect();
        lines[lines.len().saturating_sub(30)..].join("\n")
    }
    fn check(&mut self) -> anyhow::Result<()> {
        if let Some(st) = self.child.try_wait()? {
            bail!(
                "assisted-service exited with {st}; its log ends:\n{}",
                self.tail()
            );
        }
        Ok(())
    }
}

impl Drop for Service {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn free_port(ip: IpAddr) -> anyhow::Result<u16> {
    Ok(TcpListener::bind((ip, 0))
        .with_context(|| format!("binding {ip}:0"))?
        .local_addr()?
        .port())
}

/// Makes `cmd`'s child get SIGKILL when this process's spawning thread dies (`PR_SET_PDEATHSIG`).
pub(crate) fn die_with_parent(cmd: &mut Command) {
    // SAFETY: prctl is async-signal-safe; nothing else runs between fork and exec.
    unsafe {
        cmd.pre_exec(|| {
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
            Ok(())
        });
    }
}

/// A fresh key pair of the agent installer (ES256): its PKCS#8 DER, the base64 of its public PEM
/// (`EC_PUBLIC_KEY_PEM`) and the three tokens signed with it.
fn auth_key() -> anyhow::Result<(Vec<u8>, String, Tokens)> {
    use base64::Engine;
    let k = rcgen::KeyPair::generate()?;
    let der = k.serialize_der();
    let sign = |scheme: &str| {
        crate::boot::jwt::sign(&json!({"auth_scheme": scheme}), &der).map_err(anyhow::Error::msg)
    };
    let tokens = Tokens {
        user: sign("userAuth")?,
        agent: sign("agentAuth")?,
        watcher: sign("watcherAuth")?,
    };
    let pub_b64 = base64::engine::general_purpose::STANDARD.encode(k.public_key_pem());
    Ok((der, pub_b64, tokens))
}

/// Runs a real node 0 (the module docs) and holds it until killed. Errors: binaries missing,
/// the database unreachable, a request the real service refused (its answer quoted), the
/// timeout (the state reached named).
pub fn run(o: &RealOpts) -> anyhow::Result<()> {
    if o.hosts == 2 || o.hosts == 0 {
        bail!(
            "--hosts {}: node 0's install needs 1 host (SNO) or at least 3 (three control-plane agents)",
            o.hosts
        );
    }
    let version = crate::noderun::service_version(&o.bin_dir).map_err(anyhow::Error::msg)?;
    let db = parse_db_url(&o.db_url)?;
    // Absolute: the PATH (the `oc` stand-in) and WORK_DIR must not depend on the service's cwd.
    let real = std::path::absolute(o.dir.join("real"))?;
    let _ = std::fs::remove_dir_all(&real);
    for d in ["data", "manifests", "extra-manifests", "bin"] {
        std::fs::create_dir_all(real.join(d))?;
    }
    // The agent installer's key pair and tokens.
    let (der, pub_b64, tokens) = auth_key()?;
    super::keys::write_private(&o.dir.join(super::keys::KEY_FILE), &der)?;
    super::keys::write_private(&o.dir.join("user-token"), tokens.user.as_bytes())?;

    for (name, text) in manifests(o.hosts) {
        std::fs::write(real.join("manifests").join(name), text)?;
    }
    write_oc_standin(&real.join("bin"), &std::env::current_exe()?)?;
    let path = format!(
        "{}:/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin",
        real.join("bin").display()
    );

    let (mut svc, base) = spawn_service(&o.bin_dir, &db, o.listen, &real, &path, &tokens, &pub_b64)?;
    eprintln!(
        "node0: real assisted-service {version} on {base} (log {})",
        svc.log.display()
    );
    let api = Api::new(&base, &tokens);
    let deadline = Instant::now() + o.timeout;
    wait_answering(&mut svc, &api, &base, deadline)?;
    for step in ["registerCluster", "registerInfraEnv"] {
        client(o, &real, &path, &base, &tokens.user, step)?;
    }
    let (_, infra_envs) = api.user("GET", "/infra-envs", None)?;
    let ie = infra_envs[0]["id"]
        .as_str()
        .context("registerInfraEnv made no infra-env")?
        .to_string();
    let cid = infra_envs[0]["cluster_id"]
        .as_str()
        .context("the infra-env names no cluster")?
        .to_string();
    eprintln!("node0: cluster {cid}, infra-env {ie} registered by agent-installer-client");

    let hosts: Vec<Host> = (0..o.hosts).map(Host::new).collect();
    let progress = |what: &str, svc: &mut Service| -> anyhow::Result<()> {
        svc.check()?;
        if Instant::now() > deadline {
            bail!(
                "node 0's install did not reach {what} within --timeout {}s",
                o.timeout.as_secs()
            );
        }
        Ok(())
    };
    for h in &hosts {
        api.register(&ie, h)?;
    }
    // Discovery: hosts answer steps until the cluster is ready.
    let mut last = String::new();
    let mut drive = |what: &str, done: &dyn Fn(&Value) -> bool, svc: &mut Service| -> anyhow::Result<()> {
        loop {
            progress(what, svc)?;
            api.answer_steps(&ie, &hosts)?;
            let (_, c) = api.user("GET", &format!("/clusters/{cid}"), None)?;
            let now = status_line(&c);
            if now != last {
                eprintln!("node0: {now}");
                last = now;
            }
            if done(&c) {
                return Ok(());
            }
            std::thread::sleep(Duration::from_secs(1));
        }
    };
    drive("a ready cluster", &|c| c["status"] == "ready", &mut svc)?;
    let (code, b) = api.user("POST", &format!("/clusters/{cid}/actions/install"), None)?;
    if code != 202 {
        bail!("the real service refused actions/install: HTTP {code} {b}");
    }
    let installing = |c: &Value| {
        let hosts_installing = c["hosts"]
            .as_array()
            .is_some_and(|hs| !hs.is_empty() && hs.iter().all(|h| h["status"] == "installing"));
        c["status"] == "installing" && hosts_installing
    };
    drive("installing", &installing, &mut svc)?;
    let (_, c) = api.user("GET", &format!("/clusters/{cid}"), None)?;
    super::agents::install(&api, &ie, &cid, &hosts, &super::agents::bootstrap_host(&c)?)?;
    // One more monitor cycle so statuses reflect the last reports.
    std::thread::sleep(Duration::from_secs(3));
    svc.check()?;
    let (_, c) = api.user("GET", &format!("/clusters/{cid}"), None)?;
    eprintln!("node0: held before node 0's reboot: {}", status_line(&c));
    let tmp = o.dir.join(".ready.tmp");
    std::fs::write(&tmp, format!("{base}\n"))?;
    std::fs::rename(&tmp, o.dir.join("ready"))?;
    eprintln!("node0: serving {base}{API_BASE}");
    loop {
        svc.check()?;
        std::thread::sleep(Duration::from_millis(500));
    }
}

/// Starts `BIN/assisted-service --port PORT` (port 0 of `listen`: a free one) with
/// [`service_env`] for the database `db`, `WORK_DIR` `real/data/`, log `real/service.log`.
/// Returns the running service and its base URL (`http://IP:PORT`).
fn spawn_service(
    bin_dir: &Path,
    db: &DbUrl,
    listen: SocketAddr,
    real: &Path,
    path: &str,
    tokens: &Tokens,
    pub_b64: &str,
) -> anyhow::Result<(Service, String)> {
    let port = if listen.port() == 0 {
        free_port(listen.ip())?
    } else {
        listen.port()
    };
    let host = match listen.ip() {
        IpAddr::V6(a) => format!("[{a}]"),
        a => a.to_string(),
    };
    let service_host = format!("{host}:{port}");
    let data = real.join("data");
    std::fs::create_dir_all(&data)?;
    let log = real.join("service.log");
    let lf = std::fs::File::create(&log)?;
    let mut cmd = Command::new(bin_dir.join("assisted-service"));
    cmd.arg("--port")
        .arg(port.to_string())
        .current_dir(&data)
        .env_clear()
        .env("PATH", path)
        .env("HOME", &data)
        .envs(service_env(db, pub_b64, tokens, &service_host, &data))
        .stdin(Stdio::null())
        .stdout(lf.try_clone()?)
        .stderr(lf);
    die_with_parent(&mut cmd);
    let child = cmd
        .spawn()
        .with_context(|| format!("starting {}", bin_dir.join("assisted-service").display()))?;
    Ok((Service { child, log }, format!("http://{service_host}")))
}

/// Waits until the service answers `GET /clusters` with 200 (its migrations have run).
fn wait_answering(svc: &mut Service, api: &Api, base: &str, deadline: Instant) -> anyhow::Result<()> {
    loop {
        svc.check()?;
        if let Ok((200, _)) = api.user("GET", "/clusters", None) {
            return Ok(());
        }
        if Instant::now() > deadline {
            bail!(
                "assisted-service did not answer on {base} in time; its log ends:\n{}",
                svc.tail()
            );
        }
        std::thread::sleep(Duration::from_millis(300));
    }
}

/// Gives the database at `db_url` the schema of the real assisted-service in `bin_dir`, as
/// cluster 0's service leaves it after its first start: the service is started in REST mode on
/// it (a free port of 127.0.0.1, files under `work`), runs its own migrations, answers once and
/// is stopped. Errors: the binaries missing, the database unreachable, no answer in 120 s.
pub fn migrate_schema(bin_dir: &Path, db_url: &str, work: &Path) -> anyhow::Result<()> {
    crate::noderun::service_version(bin_dir).map_err(anyhow::Error::msg)?;
    let db = parse_db_url(db_url)?;
    std::fs::create_dir_all(work)?;
    let (_, pub_b64, tokens) = auth_key()?;
    let listen: SocketAddr = "127.0.0.1:0".parse()?;
    let (mut svc, base) = spawn_service(bin_dir, &db, listen, work, "/usr/bin:/bin", &tokens, &pub_b64)?;
    let api = Api::new(&base, &tokens);
    wait_answering(&mut svc, &api, &base, Instant::now() + Duration::from_secs(120))
}

/// `cluster STATUS (INFO); NAME=STATUS[/STAGE][/bootstrap], ...`.
fn status_line(c: &Value) -> String {
    let hosts: Vec<String> = c["hosts"]
        .as_array()
        .map(|hs| {
            hs.iter()
                .map(|h| {
                    let mut s = format!(
                        "{}={}",
                        h["requested_hostname"].as_str().unwrap_or("?"),
                        h["status"].as_str().unwrap_or("?")
                    );
                    if let Some(st) = h["progress"]["current_stage"].as_str().filter(|s| !s.is_empty()) {
                        s += &format!("/{st}");
                    }
                    if h["bootstrap"] == true {
                        s += "/bootstrap";
                    }
                    s
                })
                .collect()
        })
        .unwrap_or_default();
    format!(
        "cluster {} ({}); {}",
        c["status"].as_str().unwrap_or("?"),
        c["status_info"].as_str().unwrap_or(""),
        hosts.join(", ")
    )
}

/// Runs the real `agent-installer-client STEP` as the agent-based installer's
/// agent-register-cluster / agent-register-infraenv units do. The client writes
/// `/etc/assisted/client_config`; when that directory exists here it gets a private tmpfs
/// (`unshare -m`), so nothing of the host's changes.
fn client(o: &RealOpts, real: &Path, path: &str, base: &str, token: &str, step: &str) -> anyhow::Result<()> {
    let m = real.join("manifests");
    let bin = o.bin_dir.join("agent-installer-client");
    let mut cmd = if Path::new("/etc/assisted").exists() {
        let mut c = Command::new("unshare");
        c.args([
            "-m",
            "--propagation",
            "private",
            "sh",
            "-c",
            "mount -t tmpfs tmpfs /etc/assisted && exec \"$0\" \"$@\"",
        ])
        .arg(&bin)
        .arg(step);
        c
    } else {
        let mut c = Command::new(&bin);
        c.arg(step);
        c
    };
    let out = cmd
        .env_clear()
        .env("PATH", path)
        .env("HOME", real.join("data"))
        .env("SERVICE_BASE_URL", format!("{base}/"))
        .env("USER_AUTH_TOKEN", token)
        .env("CLUSTER_DEPLOYMENT_FILE", m.join("cluster-deployment.yaml"))
        .env("AGENT_CLUSTER_INSTALL_FILE", m.join("agent-cluster-install.yaml"))
        .env("INFRA_ENV_FILE", m.join("infraenv.yaml"))
        .env("PULL_SECRET_FILE", m.join("pull-secret.yaml"))
        .env("CLUSTER_IMAGE_SET_FILE", m.join("cluster-image-set.yaml"))
        .env("NMSTATE_CONFIG_FILE", m.join("nmstateconfig.yaml"))
        .env("EXTRA_MANIFESTS_PATH", real.join("extra-manifests"))
        .env("OPERATOR_INSTALL_FILE", m.join("operators.yaml"))
        .stdin(Stdio::null())
        .output()
        .with_context(|| format!("running {}", bin.display()))?;
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    std::fs::write(real.join(format!("client-{step}.log")), &text)?;
    if !out.status.success() {
        let lines: Vec<&str> = text.lines().collect();
        bail!(
            "agent-installer-client {step} failed ({}):\n{}",
            out.status,
            lines[lines.len().saturating_sub(15)..].join("\n")
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn db_url_parts() {
        assert_eq!(
            parse_db_url("postgres://admin:admin@127.0.0.1:5433/installer").unwrap(),
            DbUrl {
                user: "admin".into(),
                password: Some("admin".into()),
                host: "127.0.0.1".into(),
                port: 5433,
                db: "installer".into()
            }
        );
        let u = parse_db_url("postgres://postgres@[fd00::1]/x?sslmode=disable").unwrap();
        assert_eq!(
            (u.host.as_str(), u.port, u.db.as_str(), u.password),
            ("fd00::1", 5432, "x", None)
        );
        for bad in [
            "mysql://a@b/c",
            "postgres://b:1/c",
            "postgres://a@b:1",
            "postgres://a@b:xx/c",
        ] {
            assert!(parse_db_url(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn manifests_name_every_host_and_the_control_plane_count() {
        let m = manifests(4);
        let get = |n: &str| m.iter().find(|(f, _)| *f == n).unwrap().1.clone();
        assert!(get("agent-cluster-install.yaml").contains("controlPlaneAgents: 3\n    workerAgents: 1"));
        let nm = get("nmstateconfig.yaml");
        assert_eq!(nm.matches("kind: NMStateConfig").count(), 4);
        assert!(nm.contains(&seed::mac(3)) && nm.contains(&seed::ip(3)));
        assert!(manifests(1)[1]
            .1
            .contains("controlPlaneAgents: 1\n    workerAgents: 0"));
    }

    #[test]
    fn oc_standin_answers_the_clients_lookups_and_refuses_the_rest() {
        let a = |s: &str| s.split(' ').map(String::from).collect::<Vec<_>>();
        assert_eq!(
            oc_standin(&a(
                "adm release info quay.io/x -o template --template {{.metadata.version}}"
            )),
            0
        );
        assert_eq!(
            oc_standin(&a("adm release info --image-for=okd-rpms quay.io/x")),
            1
        );
        assert_eq!(
            oc_standin(&a(
                "adm release info --image-for=machine-config-operator quay.io/x"
            )),
            0
        );
        assert_eq!(oc_standin(&a("image info --output json quay.io/x")), 0);
        assert_eq!(oc_standin(&a("delete node x")), 1);
    }
}
