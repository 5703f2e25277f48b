//! Cluster 0's assisted-service as the infrastructure operator runs it (its Deployment of
//! `internal/controller/controllers/agentserviceconfig_controller.go`, assisted-service source
//! tree), but as a process of the test's network namespace: the REAL `assisted-service` binary
//! (scripts/real-components.sh assisted) in kube-api mode against the simulated cluster's real
//! kube-apiserver, cluster 0's database and a storage directory.
//!
//! What the operator's pod gives it, given here:
//! - the ConfigMap's environment ([`env`]: `DEPLOY_TARGET=k8s`, `ENABLE_KUBE_API=True`,
//!   `AUTH_TYPE=local`, `STORAGE=filesystem`, `NAMESPACE`, ...), the database Secret's `DB_*`, the
//!   local-auth Secret's `EC_PUBLIC_KEY_PEM`/`EC_PRIVATE_KEY_PEM` (a key pair made here), and
//!   `ENABLE_METAL3=false` (no BareMetalHost CRDs on this cluster);
//! - the in-cluster API config: `KUBERNETES_SERVICE_HOST`/`_PORT` and the service account's
//!   `token`, `ca.crt`, `namespace` at `/var/run/secrets/kubernetes.io/serviceaccount/`: the
//!   process runs in a mount namespace of its own (`unshare -m`) where `/run` is a directory of
//!   ours holding them (the host's `/run` is untouched);
//! - the filesystem volume mounted at `/data`: `WORK_DIR` is the directory given (the PVC's
//!   directory of the simulator's volume provisioner).
//!
//! Stood in: the Deployment, its pod and Service, TLS (plain HTTP on the address given), and
//! `oc` (the image's; [`crate::node0::real::oc_standin`] answers its release lookups). A real
//! infrastructure operator on a real cluster replaces this.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use serde_json::{json, Value};

/// Flags of `agent-day2-sim cluster0-service` ([`run_cli`]): the [`Opts`] fields.
#[derive(Debug, Clone, clap::Args)]
pub struct Cluster0ServiceArgs {
    /// Working directory (created): run/, bin/, service.log, then ready (the base URL).
    #[arg(long)]
    pub dir: PathBuf,
    /// The cluster's API URL, e.g. https://192.168.111.5:6443.
    #[arg(long)]
    pub api_url: String,
    /// PEM file of the CA of the API server's certificate (`up`'s DIR/ca.crt).
    #[arg(long)]
    pub ca_file: PathBuf,
    /// File holding a service account token (`kubectl create token assisted-service -n NS`).
    #[arg(long)]
    pub token_file: PathBuf,
    /// The operator's namespace.
    #[arg(long, default_value = "multicluster-engine")]
    pub namespace: String,
    /// Cluster 0's assisted-service database, postgres://USER[:PASS]@HOST:PORT/DB.
    #[arg(long)]
    pub db_url: String,
    /// The filesystem storage (the PVC directory mounted at /data).
    #[arg(long)]
    pub storage: PathBuf,
    /// REST API address, e.g. 192.168.111.7:8090.
    #[arg(long)]
    pub listen: SocketAddr,
    /// Directory of the real binaries (default $AGENT_DAY2_REAL_BIN, else
    /// scripts/real-components.sh's output).
    #[arg(long, value_name = "DIR")]
    pub bin_dir: Option<PathBuf>,
}

/// `agent-day2-sim cluster0-service`: starts [`Cluster0Service`], writes `DIR/ready` (the base
/// URL) once its REST API answers, and stays until killed (exit 1 when the service exits or
/// cannot start, its log's end printed).
pub fn run_cli(a: Cluster0ServiceArgs) -> i32 {
    let run = || -> anyhow::Result<()> {
        let token = std::fs::read_to_string(&a.token_file)
            .with_context(|| format!("--token-file {}", a.token_file.display()))?;
        let mut svc = Cluster0Service::start(&Opts {
            bin_dir: a.bin_dir.clone().unwrap_or_else(crate::noderun::default_bin_dir),
            dir: a.dir.clone(),
            api_url: a.api_url.clone(),
            ca_file: a.ca_file.clone(),
            token: token.trim().to_string(),
            namespace: a.namespace.clone(),
            db_url: a.db_url.clone(),
            storage: a.storage.clone(),
            listen: a.listen,
        })?;
        let tmp = a.dir.join(".ready.tmp");
        std::fs::write(&tmp, format!("{}\n", svc.base))?;
        std::fs::rename(&tmp, a.dir.join("ready"))?;
        eprintln!(
            "cluster0-service: assisted-service serving {} (log {})",
            svc.base,
            svc.log.display()
        );
        while svc.running() {
            std::thread::sleep(Duration::from_millis(500));
        }
        bail!("assisted-service exited; its log ends:\n{}", svc.tail(30))
    };
    match run() {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("error: {e:#}");
            1
        }
    }
}

/// What [`Cluster0Service::start`] needs.
#[derive(Debug, Clone)]
pub struct Opts {
    /// Directory of the real binaries (`assisted-service`, `versions`).
    pub bin_dir: PathBuf,
    /// Working directory (created): `run/` (the pod's `/run`), `service.log`.
    pub dir: PathBuf,
    /// The cluster's API URL, `https://IP:PORT`.
    pub api_url: String,
    /// PEM file of the CA that signed the API server's certificate.
    pub ca_file: PathBuf,
    /// A service account token of `namespace` allowed what the operator's ClusterRole allows.
    pub token: String,
    /// The operator's namespace (`NAMESPACE`, leader election), e.g. `multicluster-engine`.
    pub namespace: String,
    /// Cluster 0's assisted-service database, `postgres://USER[:PASS]@HOST:PORT/DB`.
    pub db_url: String,
    /// The filesystem storage (`WORK_DIR`, the volume the operator mounts at `/data`).
    pub storage: PathBuf,
    /// Where the REST API listens (`SERVICE_BASE_URL` is `http://` this).
    pub listen: SocketAddr,
}

/// A running cluster-0 assisted-service; killed on drop (and with this process).
pub struct Cluster0Service {
    child: Child,
    /// `http://IP:PORT`; the API is under `/api/assisted-install/v2`.
    pub base: String,
    /// Its stdout and stderr.
    pub log: PathBuf,
    key_der: Vec<u8>,
}

/// The environment of the operator's ConfigMap and Secrets for these options (see the module
/// docs); `public_pem`/`private_pem`: the local-auth key pair.
pub fn env(o: &Opts, public_pem: &str, private_pem: &str) -> anyhow::Result<Vec<(String, String)>> {
    let db = crate::node0::real::parse_db_url(&o.db_url)?;
    let v = crate::node0::seed::OPENSHIFT_VERSION;
    let os = json!([{"openshift_version": v.rsplit_once('.').map(|x| x.0).unwrap_or(v), "cpu_architecture": "x86_64",
        "url": "https://mirror.example.com/rhcos-live.x86_64.iso", "version": "418.94.202501221327-0"}]);
    let base = format!("http://{}", o.listen);
    let pairs: Vec<(&str, String)> = vec![
        ("SERVICE_BASE_URL", base.clone()),
        ("IMAGE_SERVICE_BASE_URL", format!("http://{}:8888", o.listen.ip())),
        ("OS_IMAGES", os.to_string()),
        ("ISO_IMAGE_TYPE", "minimal-iso".into()),
        // Stand-in (as node 0's, node0::real): the real Ignition generation extracts
        // openshift-install from the release payload, which no registry here holds. Only a
        // service that installs (node 0 of option 1) generates; cluster 0's never does here.
        ("DUMMY_IGNITION", "true".into()),
        // The agent image the operator configures (`AGENT_IMAGE` of its Deployment): the one
        // its discovery ISO runs, so the agents report it and need no upgrade step.
        ("AGENT_DOCKER_IMAGE", crate::node0::agents::AGENT_IMAGE.into()),
        ("LOG_LEVEL", "info".into()),
        ("LOG_FORMAT", "text".into()),
        ("DEPLOY_TARGET", "k8s".into()),
        ("STORAGE", "filesystem".into()),
        ("ISO_WORKSPACE_BASE_DIR", o.storage.display().to_string()),
        ("WORK_DIR", format!("{}/", o.storage.display())),
        ("AUTH_TYPE", "local".into()),
        ("CHECK_CLUSTER_VERSION", "True".into()),
        ("CREATE_S3_BUCKET", "False".into()),
        ("ENABLE_KUBE_API", "True".into()),
        ("ENABLE_AUTO_ASSIGN", "True".into()),
        ("IPV6_SUPPORT", "True".into()),
        ("PUBLIC_CONTAINER_REGISTRIES", "quay.io".into()),
        (
            "HW_VALIDATOR_REQUIREMENTS",
            crate::node0::real::hw_requirements().to_string(),
        ),
        ("ENABLE_DATA_COLLECTION", "False".into()),
        ("NAMESPACE", o.namespace.clone()),
        ("INSTALL_INVOKER", "assisted-installer-operator".into()),
        ("SKIP_CERT_VERIFICATION", "False".into()),
        ("ENABLE_METAL3", "false".into()),
        ("DB_HOST", db.host.clone()),
        ("DB_PORT", db.port.to_string()),
        ("DB_USER", db.user.clone()),
        (
            "DB_PASS",
            db.password.clone().unwrap_or_else(|| "unused-trust".into()),
        ),
        ("DB_NAME", db.db.clone()),
        ("EC_PUBLIC_KEY_PEM", public_pem.to_string()),
        ("EC_PRIVATE_KEY_PEM", private_pem.to_string()),
    ];
    Ok(pairs.into_iter().map(|(k, v)| (k.to_string(), v)).collect())
}

impl Cluster0Service {
    /// Starts the service (see the module docs) and waits up to 120 s for its REST API to answer.
    /// Errors: binaries missing, the API URL unparsable, the service exiting (its log's end).
    pub fn start(o: &Opts) -> anyhow::Result<Cluster0Service> {
        crate::noderun::service_version(&o.bin_dir).map_err(anyhow::Error::msg)?;
        // Absolute: the mount of DIR/run, WORK_DIR and the PATH must not depend on the cwd.
        let o = &Opts {
            dir: std::path::absolute(&o.dir)?,
            storage: std::path::absolute(&o.storage)?,
            ..o.clone()
        };
        // assisted-service listens on every address at its port (and controller-runtime's
        // metrics server on :8080): a port taken anywhere in the namespace (node 0's service,
        // say) would answer in its place.
        for port in [o.listen.port(), 8080] {
            std::net::TcpListener::bind(("0.0.0.0", port)).with_context(|| {
                format!("port {port} is taken in this network namespace (assisted-service binds it on every address); stop what holds it, e.g. node 0's service")
            })?;
        }
        let sa = o.dir.join("run/secrets/kubernetes.io/serviceaccount");
        std::fs::create_dir_all(&sa)?;
        std::fs::create_dir_all(&o.storage)?;
        crate::node0::keys::write_private(&sa.join("token"), o.token.as_bytes())?;
        std::fs::copy(&o.ca_file, sa.join("ca.crt"))
            .with_context(|| format!("copying {}", o.ca_file.display()))?;
        std::fs::write(sa.join("namespace"), &o.namespace)?;
        let hostport = o
            .api_url
            .strip_prefix("https://")
            .with_context(|| format!("API URL {}: not https://", o.api_url))?
            .trim_end_matches('/');
        let (host, port) = hostport.rsplit_once(':').context("API URL without a port")?;
        let host = host.trim_start_matches('[').trim_end_matches(']');
        // The service looks release versions up with `oc` (the operator's image has it).
        let bin = o.dir.join("bin");
        crate::node0::real::write_oc_standin(&bin, &crate::harness::bin("agent-day2-sim")?)?;
        let k = rcgen::KeyPair::generate()?;
        let env = env(o, &k.public_key_pem(), &k.serialize_pem())?;
        let log = o.dir.join("service.log");
        let lf = std::fs::File::create(&log)?;
        let mut cmd = Command::new("unshare");
        cmd.args([
            "-m",
            "--propagation",
            "private",
            "sh",
            "-c",
            "mount --bind \"$AGENT_DAY2_POD_RUN\" /run && unset AGENT_DAY2_POD_RUN && exec \"$0\" \"$@\"",
        ])
        .arg(o.bin_dir.join("assisted-service"))
        .arg("--port")
        .arg(o.listen.port().to_string())
        .current_dir(&o.storage)
        .env_clear()
        .env("PATH", format!("{}:/usr/bin:/bin:/usr/sbin:/sbin", bin.display()))
        .env("HOME", &o.dir)
        .env("AGENT_DAY2_POD_RUN", o.dir.join("run"))
        .env("KUBERNETES_SERVICE_HOST", host)
        .env("KUBERNETES_SERVICE_PORT", port)
        .envs(env)
        .stdin(Stdio::null())
        .stdout(lf.try_clone()?)
        .stderr(lf);
        crate::node0::real::die_with_parent(&mut cmd);
        let child = cmd.spawn().context("starting assisted-service")?;
        let mut s = Cluster0Service {
            child,
            base: format!("http://{}", o.listen),
            log,
            key_der: k.serialize_der(),
        };
        let deadline = Instant::now() + Duration::from_secs(120);
        loop {
            if let Some(st) = s.child.try_wait()? {
                bail!(
                    "cluster 0's assisted-service exited with {st}; its log ends:\n{}",
                    s.tail(40)
                );
            }
            if let Ok((code, _)) = s.get("/health", None) {
                if code == 200 {
                    return Ok(s);
                }
            }
            if Instant::now() > deadline {
                bail!(
                    "cluster 0's assisted-service did not answer in 120 s; its log ends:\n{}",
                    s.tail(40)
                );
            }
            std::thread::sleep(Duration::from_millis(500));
        }
    }

    /// The last `n` lines of its log.
    pub fn tail(&self, n: usize) -> String {
        let t = std::fs::read_to_string(&self.log).unwrap_or_default();
        let l: Vec<&str> = t.lines().collect();
        l[l.len().saturating_sub(n)..].join("\n")
    }

    /// A local-auth token for a cluster (`{"cluster_id": ID}`, ES256 with the service's key), as
    /// the service signs its agents' tokens and presigned URLs.
    pub fn cluster_token(&self, cluster_id: &str) -> anyhow::Result<String> {
        crate::boot::jwt::sign(&json!({"cluster_id": cluster_id}), &self.key_der).map_err(anyhow::Error::msg)
    }

    /// A local-auth token for an InfraEnv (`{"infra_env_id": ID}`): what its discovery ISO gives
    /// the agents.
    pub fn infra_env_token(&self, infra_env_id: &str) -> anyhow::Result<String> {
        crate::boot::jwt::sign(&json!({"infra_env_id": infra_env_id}), &self.key_der)
            .map_err(anyhow::Error::msg)
    }

    /// `GET path` (under the base URL; `/api/assisted-install/v2/...` or `/health`) with an
    /// optional agent token (`X-Secret-Key`): (status, body bytes).
    pub fn get(&self, path: &str, token: Option<&str>) -> anyhow::Result<(u16, Vec<u8>)> {
        let mut args = vec![];
        if let Some(t) = token {
            args.extend(["-H".to_string(), format!("X-Secret-Key: {t}")]);
        }
        args.push(format!("{}{path}", self.base));
        crate::node0::agents::curl(&format!("GET {path}"), &args, &[])
    }

    /// `get` parsed as JSON (Null when empty or not JSON).
    pub fn get_json(&self, path: &str, token: Option<&str>) -> anyhow::Result<(u16, Value)> {
        let (c, b) = self.get(path, token)?;
        Ok((c, serde_json::from_slice(&b).unwrap_or(Value::Null)))
    }

    /// Whether it still runs.
    pub fn running(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }
}

impl Drop for Cluster0Service {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Path of the PVC `name` of namespace `ns` under `up --volumes-dir DIR` (the simulator's volume
/// provisioner: `DIR/<ns>/<name>`).
pub fn pvc_dir(volumes: &Path, ns: &str, name: &str) -> PathBuf {
    volumes.join(ns).join(name)
}
