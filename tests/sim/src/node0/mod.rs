//! `agent-day2-sim node0`: node 0's ephemeral assisted-service after a finished agent-based
//! install, the source of `oc agent-day2 migrate export` (contract: docs/migrate.md "The migration
//! contract"). With `--real`, the REAL assisted-service instead, driven to the state node 0
//! really holds ([`real`]); without, the hand-written stand-in below (schema
//! [`crate::node0schema`], rows [`seed`], REST [`rest`]), kept for the tests that need what the
//! real one cannot give quickly (thousands of hosts and events, a node 0 dying mid-export, a
//! newer schema).
//!
//! 1. The database at `--db-url` (a real PostgreSQL, see [`crate::postgres`]) gets the
//!    assisted-service tables ([`crate::node0schema::create`] with `--schema-version`) unless
//!    `clusters` exists, and, when `clusters` is empty, one finished compact install
//!    ([`seed::fill_sql`]: `--hosts`, `--events`).
//! 2. Every table is read back (one `psql` query, `json_agg` per table); the REST answers are
//!    built from those rows, so they agree with the database (same ids, names, counts). The
//!    rows are read once: changes to the database after start are not served.
//! 3. The REST v2 API ([`rest`]) serves on `--listen` under `/api/assisted-install/v2`, every
//!    endpoint behind userAuth judged as the real agent-installer-local auth does
//!    ([`rest::authorize`]: `Authorization: <token>`, the bare token; claim `auth_scheme`
//!    `userAuth`). A signing key is made at start and kept in `DIR/auth-key.pk8` (PKCS#8 DER,
//!    mode 0600, the agent installer's private key: [`mint_token`] signs other tokens with it);
//!    the user token (ES256 JWT `{"auth_scheme":"userAuth"}`, no `exp`, as the install
//!    workflow's) is written to `DIR/user-token` (mode 0600), then `DIR/ready` holds the base
//!    URL (`http://IP:PORT`, one line).
//!
//! `--die-after-requests N`: once N requests have been answered the process exits (status 0,
//! port closed), standing for node 0 going away mid-export.
//!
//! Runs until killed. Exit status 1 on errors (database unreachable, port taken).

pub mod agents;
pub mod keys;
pub mod real;
pub mod rest;
pub mod seed;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use anyhow::Context;
use serde_json::Value;

/// Arguments of `agent-day2-sim node0`.
#[derive(Debug, Clone, clap::Args)]
pub struct Node0Args {
    /// Directory for user-token and ready (created if missing).
    #[arg(long)]
    pub dir: PathBuf,
    /// REST API address, e.g. 192.168.111.80:8090 (port 0: a free port, see DIR/ready).
    #[arg(long)]
    pub listen: SocketAddr,
    /// The source database, e.g. postgres://postgres@127.0.0.1:5432/installer.
    #[arg(long)]
    pub db_url: String,
    /// Number of hosts (masters for the first three, workers after).
    #[arg(long, default_value_t = 3)]
    pub hosts: usize,
    /// Number of events.
    #[arg(long, default_value_t = 300)]
    pub events: usize,
    /// Date of the newest migration of node 0's assisted-service build when the tables are
    /// created here (`migrations` gets that build's ids: [`crate::node0schema::create`]).
    #[arg(long, default_value = crate::node0schema::DEFAULT_SCHEMA_VERSION)]
    pub schema_version: String,
    /// Exit (closing the port) after answering this many requests.
    #[arg(long)]
    pub die_after_requests: Option<u64>,
    /// Node 0 is the REAL assisted-service (REST mode, on --db-url), driven through a compact
    /// install by the real agent-installer client and host stand-ins, held just before node 0
    /// reboots (see the `real` module). --hosts: 1 (SNO) or at least 3.
    #[arg(long, conflicts_with_all = ["events", "schema_version", "die_after_requests"])]
    pub real: bool,
    /// With --real: directory of `assisted-service`, `agent-installer-client` and `versions`
    /// (default $AGENT_DAY2_REAL_BIN, else scripts/real-components.sh's output).
    #[arg(long, value_name = "DIR", requires = "real")]
    pub bin_dir: Option<PathBuf>,
    /// With --real: node 0 as the user story's option 1: the service in kube-api mode on node
    /// 0's own API server (this kubeconfig; assisted-service's CRDs served), the agent-based
    /// installer's manifests applied there, the Agents approved (see `node0kube`). Writes
    /// DIR/cluster-token too. --hosts: at least 3.
    #[arg(long, value_name = "KUBECONFIG", requires = "real")]
    pub kube_api: Option<PathBuf>,
    /// With --real: give up when the install is not held within this time.
    #[arg(long, default_value = "10m", value_parser = crate::boot::parse_duration, requires = "real")]
    pub timeout: std::time::Duration,
}

pub use keys::{mint_token, KEY_FILE};
pub use rest::Snapshot;

/// Reads every table of [`crate::node0schema::TABLES`] at `url`.
pub fn read_snapshot(url: &str) -> anyhow::Result<Snapshot> {
    let order = |t: &str| match t {
        "events" => "event_time, id",
        "hosts" => "created_at, id",
        "clusters" | "infra_envs" => "created_at, id",
        "monitored_operators" => "name",
        "cluster_networks" | "service_networks" | "machine_networks" => "cidr",
        _ => "ip",
    };
    let parts: Vec<String> = crate::node0schema::TABLES
        .iter()
        .map(|t| {
            format!(
                "'{t}', (SELECT coalesce(json_agg(x ORDER BY {}), '[]'::json) FROM {t} x)",
                order(t)
            )
        })
        .collect();
    let sql = format!(
        "SET TimeZone = 'UTC';\nSELECT json_build_object({});",
        parts.join(", ")
    );
    let out = crate::postgres::psql(url, &sql).context("reading the source database back")?;
    let mut v: Value = serde_json::from_str(out.trim()).context("parsing the tables as JSON")?;
    let mut take = |k: &str| match v.get_mut(k).map(Value::take) {
        Some(Value::Array(a)) => a,
        _ => Vec::new(),
    };
    Ok(Snapshot {
        clusters: take("clusters"),
        infra_envs: take("infra_envs"),
        hosts: take("hosts"),
        events: take("events"),
        cluster_networks: take("cluster_networks"),
        service_networks: take("service_networks"),
        machine_networks: take("machine_networks"),
        api_vips: take("api_vips"),
        ingress_vips: take("ingress_vips"),
        monitored_operators: take("monitored_operators"),
    })
}

/// Creates the schema when missing and fills it when `clusters` is empty (see the module doc).
pub fn prepare_db(args: &Node0Args) -> anyhow::Result<()> {
    let url = &args.db_url;
    if !crate::node0schema::exists(url)? {
        crate::node0schema::create(url, &args.schema_version)?;
    }
    let n = crate::postgres::psql(url, "SELECT count(*) FROM clusters")?;
    if n.trim() == "0" {
        crate::postgres::psql(url, &seed::fill_sql(args.hosts, args.events))
            .context("filling the source database")?;
    }
    Ok(())
}

/// Runs the command (blocking; a tokio runtime of its own). Returns the exit status.
pub fn run_sync(args: Node0Args) -> i32 {
    match run(args) {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("error: {e:#}");
            1
        }
    }
}

/// The `--real` options of `args` (`--bin-dir` defaulted).
pub fn real_opts(args: &Node0Args) -> real::RealOpts {
    real::RealOpts {
        dir: args.dir.clone(),
        listen: args.listen,
        db_url: args.db_url.clone(),
        hosts: args.hosts,
        bin_dir: args
            .bin_dir
            .clone()
            .unwrap_or_else(crate::noderun::default_bin_dir),
        timeout: args.timeout,
    }
}

fn run(args: Node0Args) -> anyhow::Result<()> {
    std::fs::create_dir_all(&args.dir).with_context(|| format!("creating {}", args.dir.display()))?;
    let _ = std::fs::remove_file(args.dir.join("ready"));
    if args.real {
        return real::run(&real_opts(&args));
    }
    prepare_db(&args)?;
    let snap = read_snapshot(&args.db_url)?;
    anyhow::ensure!(!snap.clusters.is_empty(), "the source database holds no cluster");
    // The agent installer's key pair: the public half is what assisted-service verifies with.
    let k = rcgen::KeyPair::generate()?;
    let public = crate::boot::jwt::public_key(&k.public_key_pem()).map_err(anyhow::Error::msg)?;
    keys::write_private(&args.dir.join(KEY_FILE), &k.serialize_der())?;
    let token = mint_token(&args.dir, &serde_json::json!({"auth_scheme": "userAuth"}))?;
    keys::write_private(&args.dir.join("user-token"), token.as_bytes())?;
    let api = Arc::new(rest::Node0Api::new(snap, public));
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    rt.block_on(async move {
        let listener = tokio::net::TcpListener::bind(args.listen)
            .await
            .with_context(|| format!("binding {}", args.listen))?;
        let addr = listener.local_addr()?;
        let host = match addr.ip() {
            std::net::IpAddr::V6(a) => format!("[{a}]"),
            a => a.to_string(),
        };
        let base = format!("http://{host}:{}", addr.port());
        let tmp = args.dir.join(".ready.tmp");
        std::fs::write(&tmp, format!("{base}\n"))?;
        std::fs::rename(&tmp, args.dir.join("ready"))?;
        eprintln!("node0: serving {base}{}", rest::BASE);
        rest::serve(listener, api, args.die_after_requests).await;
        Ok(())
    })
}
