//! `agent-day2-sim`: the simulated OpenShift cluster for agent-day2's tests and demo.
//!
//! - `agent-day2-sim up --dir DIR [--listen IP:PORT] [--scenario FILE] [--base-iso ISO] [--crds DIR]... [--registry [ADDR]]
//!   [--assisted-db-url URL [--assisted-schema-version V]] [--volumes-dir DIR] [--real-apiserver [BIN_DIR]]`
//! - `agent-day2-sim netns -- CMD [ARGS...]`
//! - `agent-day2-sim boot --dir DIR --iso ISO --node MAC=IP [--node ...]` (see `boot` module)
//! - `agent-day2-sim csr --dir DIR --bootstrapper --node NAME`: one client CSR with the
//!   node-bootstrapper token (a rogue one, for approve's tests)
//! - `agent-day2-sim node0 --dir DIR --listen IP:PORT --db-url URL [--hosts N] [--events N]
//!   [--schema-version V] [--die-after-requests N]`, or `--real [--bin-dir DIR] [--timeout D]`
//!   (the real assisted-service; see `node0` and `node0::real`)
//! - `agent-day2-sim postgres --dir DIR [--listen IP] [--port N] [--db NAME] [--owner ROLE]`
//!   (a real PostgreSQL server for node 0's or cluster 0's database, see [`run_postgres`])
//!
//! Exit status: 0 after SIGINT/SIGTERM, 1 on errors, 2 on usage errors, 3 on an invalid scenario.

use clap::{Parser, Subcommand};
use std::net::SocketAddr;
use std::path::PathBuf;

#[derive(Parser)]
#[command(
    name = "agent-day2-sim",
    version,
    about = "Simulated OpenShift cluster for agent-day2's tests and demo"
)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Run the simulated cluster: HTTPS Kubernetes API with its own CA, file server with the
    /// base ISO; writes DIR/kubeconfig (contexts admin, bootstrapper, viewer), DIR/ca.crt and,
    /// once requests are accepted, DIR/ready (lines: the API URL, the file server's base URL and,
    /// with --registry, the registry's URL). Runs until SIGINT/SIGTERM.
    Up {
        /// Directory for kubeconfig, ca.crt, ready and files/ (created if missing).
        #[arg(long)]
        dir: PathBuf,
        /// Scenario YAML (default: OpenShift 4.18 compact bare-metal cluster `ostest`).
        #[arg(long)]
        scenario: Option<PathBuf>,
        /// Serve this ISO as the base ISO instead of building the simulated one.
        #[arg(long)]
        base_iso: Option<PathBuf>,
        /// API address, e.g. 192.168.111.5:6443 (default: 127.0.0.1, a free port).
        #[arg(long)]
        listen: Option<SocketAddr>,
        /// File server address (default: the API's IP, port 8080 if free, else a free port).
        #[arg(long)]
        files_listen: Option<SocketAddr>,
        /// Folder of CRD YAML files to serve (repeatable); they replace the permissive
        /// built-in OpenShift definitions of the same name.
        #[arg(long)]
        crds: Vec<PathBuf>,
        /// Also run a container registry (Debian's /usr/bin/docker-registry) on ADDR (default
        /// 192.168.111.6:5000) holding the release payload, HTTPS with the simulator's CA and
        /// basic auth from the seeded pull secret; the cluster's release image then names it
        /// (by digest; through an ImageDigestMirrorSet when the scenario is disconnected), and
        /// DIR/ready gets its URL as a third line.
        #[arg(long, value_name = "ADDR", num_args = 0..=1, default_missing_value = agent_day2_sim::registry::DEFAULT_ADDR)]
        registry: Option<SocketAddr>,
        /// Seed cluster 0's assisted-service (namespace multicluster-engine, pod
        /// assisted-service-5f8c9d7b6-x2x7k, Secret postgres) whose `postgres` container runs
        /// `psql` over pod exec against this database (postgres://USER[:PASSWORD]@HOST:PORT/DB).
        #[arg(long, value_name = "URL")]
        assisted_db_url: Option<String>,
        /// Schema version (a gormigrate id: digits) of the assisted-service tables `up` creates
        /// in --assisted-db-url's database when it has none (no table `clusters`), as
        /// assisted-service does on its first start; a database that has them is left as it is.
        #[arg(long, value_name = "V", default_value = agent_day2_sim::node0schema::DEFAULT_SCHEMA_VERSION, requires = "assisted_db_url", value_parser = schema_version)]
        assisted_schema_version: String,
        /// Contents of the PersistentVolumeClaims as pod exec's `tar` sees them:
        /// DIR/<namespace>/<claim>/ (default: <--dir>/volumes).
        #[arg(long, value_name = "DIR")]
        volumes_dir: Option<PathBuf>,
        /// Where the REAL etcd, kube-apiserver (Node,RBAC authorization, NodeRestriction),
        /// kube-controller-manager (CSR signing, service accounts, namespaces, volume binding)
        /// and kubelet-exec are that serve the cluster (default: $AGENT_DAY2_REAL_KUBE_BIN, else
        /// where `scripts/real-components.sh kube` builds them); the control-plane nodes'
        /// kubelets are simulated (pod status, pod exec through kubelet-exec, volumes).
        #[arg(long, value_name = "BIN_DIR", num_args = 0..=1)]
        real_apiserver: Option<Option<PathBuf>>,
    },
    /// Run CMD in a new private network namespace (root: `unshare -n`; otherwise a user
    /// namespace too, like `unshare -rn`) whose loopback carries 192.168.111.0/24 and
    /// fd2e:6f44:5dd8:c956::/64; sets AGENT_DAY2_NETNS=1.
    Netns {
        /// The command and its arguments (after `--`).
        #[arg(trailing_var_arg = true, allow_hyphen_values = true, required = true)]
        cmd: Vec<String>,
    },
    /// Print where the public upstream data set WHAT is on this machine (one path a line;
    /// exit 3 saying what provides it when it is not): assisted-crds, openshift-crds,
    /// permissive-assisted-crds, assisted-swagger, node-joiner-testdata, coreos-iso-fixtures,
    /// assisted-service-bin (the real binaries scripts/real-components.sh built).
    /// The tests, the demo and the benches take it from the same place (agent_day2_sim::upstream).
    Upstream { what: String },
    /// Boot simulated day-2 machines from a node ISO: check its Ignition against the node
    /// contract (exit 3 if refused), serve each host's assisted-service API on IP:8090, walk
    /// the install stages, reboot, then send kubelet CSRs. Exit 0 when every node has both
    /// certificates; 5 on --timeout; 6 when an installation failed.
    Boot(agent_day2_sim::boot::BootArgs),
    /// Post one kubelet-shaped client CSR for --node NAME with the node-bootstrapper token
    /// (context bootstrapper), as anyone holding that token can; prints its name.
    Csr(agent_day2_sim::boot::CsrArgs),
    /// Node 0's ephemeral assisted-service after a finished install (the source of `migrate
    /// export`): fills the PostgreSQL database at --db-url (tables created when missing), serves
    /// the REST v2 API from those rows on --listen (userAuth; token in DIR/user-token), writes
    /// DIR/ready (the base URL). Runs until killed. With --real: the real assisted-service,
    /// driven through a compact install up to the state before node 0 reboots.
    Node0(agent_day2_sim::node0::Node0Args),
    /// A real PostgreSQL server (Debian's, /usr/lib/postgresql/*/bin; run as the `postgres`
    /// user when root) with data in DIR/pgdata, log in DIR/postgres.log, trust authentication:
    /// creates role `admin` (password `admin`), role --owner and database --db owned by it,
    /// writes DIR/url (postgres://OWNER@IP:PORT/DB) and then DIR/ready (the same URL), and
    /// stays in the foreground; SIGINT/SIGTERM stops the server (DIR stays). Meant for
    /// `agent-day2-sim netns`: anyone who reaches the address gets in.
    Postgres(PostgresArgs),
    /// Give an empty PostgreSQL database the schema of the REAL assisted-service (started once
    /// on it in REST mode: its own migrations), as cluster 0's service leaves it after its first
    /// start. Needs scripts/real-components.sh assisted.
    AssistedSchema {
        /// The database, e.g. postgres://admin@127.0.0.1:5433/installer.
        #[arg(long)]
        db_url: String,
        /// Directory of the real binaries (default $AGENT_DAY2_REAL_BIN, else
        /// scripts/real-components.sh's output).
        #[arg(long, value_name = "DIR")]
        bin_dir: Option<PathBuf>,
    },
    /// Cluster 0's REAL assisted-service in kube-api mode, as the infrastructure operator runs
    /// it (see the cluster0svc module): writes DIR/ready (its base URL) once it answers; runs
    /// until killed.
    Cluster0Service(agent_day2_sim::cluster0svc::Cluster0ServiceArgs),
    /// Boot day-2 machines from a node image against the REAL assisted-service and its
    /// agent-based-installer client and the real discovery agent (scripts/real-components.sh
    /// builds them; the agent's stand-in where it is not built, said): lays the Ignition into a
    /// root per machine (own network/mount/PID namespaces, a veth with the machine's MAC and
    /// IP) and runs its units in systemd order, with the live system, podman and hostnamectl
    /// stood in. Run it in the network namespace of `up` (`agent-day2-sim netns`). Prints the
    /// service's module@version first. Exit 0 when
    /// --until started on every machine, 5 on --timeout, 6 when it failed or a unit it requires
    /// failed for good (unit named),
    /// 130 on SIGINT and 143 on SIGTERM (`interrupted`, machines stopped; with --stay 0 once
    /// every machine reached --until).
    RunNode(agent_day2_sim::noderun::RunNodeArgs),
    /// (internal) The container runtime behind the control-plane kubelets' exec endpoint
    /// (`kubelet-exec`, `up --real-apiserver`): runs COMMAND as container CONTAINER of pod
    /// NAMESPACE/POD would, with this process's stdio; exits with its code.
    #[command(hide = true)]
    ContainerExec {
        #[arg(long)]
        dir: PathBuf,
        namespace: String,
        pod: String,
        container: String,
        #[arg(last = true)]
        command: Vec<String>,
    },
    /// (internal) One run-node machine, as PID 1 of its namespaces.
    #[command(hide = true)]
    NodeMachine {
        #[arg(long)]
        spec: PathBuf,
    },
    /// (internal) The podman stand-in inside a run-node machine.
    #[command(hide = true)]
    Podman {
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<String>,
    },
    /// (internal) The discovery agent stand-in inside a run-node machine.
    #[command(hide = true)]
    DiscoveryAgent {
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<String>,
    },
}

#[derive(clap::Args)]
struct PostgresArgs {
    /// Directory for pgdata/, postgres.log, url and ready (created if missing; must not hold
    /// a pgdata/ already).
    #[arg(long)]
    dir: PathBuf,
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1")]
    listen: std::net::IpAddr,
    /// TCP port (default: a free one).
    #[arg(long)]
    port: Option<u16>,
    /// Database to create.
    #[arg(long, default_value = "installer")]
    db: String,
    /// Role owning the database (LOGIN; the URL's user).
    #[arg(long, default_value = "admin")]
    owner: String,
}

/// `--assisted-schema-version`: digits (a gormigrate id such as 20240617140000).
fn schema_version(v: &str) -> Result<String, String> {
    if !v.is_empty() && v.bytes().all(|b| b.is_ascii_digit()) {
        Ok(v.to_string())
    } else {
        Err(format!(
            "expected digits, e.g. {}",
            agent_day2_sim::node0schema::DEFAULT_SCHEMA_VERSION
        ))
    }
}

/// `agent-day2-sim postgres`: see [`Cmd::Postgres`]. Returns the exit code: 0 after
/// SIGINT/SIGTERM, 1 when the server cannot be started or set up (the message says why).
fn run_postgres(a: PostgresArgs) -> i32 {
    use agent_day2_sim::postgres::{unavailable, Postgres};
    if let Some(why) = unavailable() {
        eprintln!("error: {why}");
        return 1;
    }
    if a.dir.join("pgdata").exists() {
        eprintln!(
            "error: {} exists: remove it or give another --dir (the server starts from fresh data)",
            a.dir.join("pgdata").display()
        );
        return 1;
    }
    for f in ["ready", "url"] {
        let _ = std::fs::remove_file(a.dir.join(f));
    }
    // Signals are taken before the server exists, so a SIGTERM right after DIR/ready stops it.
    let rt = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: tokio runtime: {e}");
            return 1;
        }
    };
    let signals = rt.block_on(async {
        use tokio::signal::unix::{signal, SignalKind};
        Ok::<_, std::io::Error>((signal(SignalKind::interrupt())?, signal(SignalKind::terminate())?))
    });
    let (mut int, mut term) = match signals {
        Ok(s) => s,
        Err(e) => {
            eprintln!("error: signal handlers: {e}");
            return 1;
        }
    };
    let pg = match Postgres::start_on(&a.dir, a.listen, a.port) {
        Ok(pg) => pg,
        Err(e) => {
            eprintln!("error: starting PostgreSQL: {e:#}");
            return 1;
        }
    };
    let url = pg.url_as(&a.owner, &a.db);
    let setup = pg.create_db(&a.db, &a.owner).and_then(|()| {
        std::fs::write(a.dir.join("url"), format!("{url}\n"))?;
        let tmp = a.dir.join("ready.tmp");
        std::fs::write(&tmp, format!("{url}\n"))?;
        std::fs::rename(&tmp, a.dir.join("ready"))?;
        Ok(())
    });
    if let Err(e) = setup {
        eprintln!("error: setting up database {}: {e:#}", a.db);
        return 1; // pg dropped: server stopped
    }
    eprintln!(
        "agent-day2-sim: PostgreSQL {url} (data {}, log {}); SIGINT/SIGTERM stops it",
        a.dir.join("pgdata").display(),
        a.dir.join("postgres.log").display()
    );
    rt.block_on(async {
        tokio::select! {
            _ = int.recv() => {}
            _ = term.recv() => {}
        }
    });
    let _ = std::fs::remove_file(a.dir.join("ready"));
    drop(pg);
    eprintln!("agent-day2-sim: PostgreSQL stopped");
    0
}

fn main() {
    // The stand-ins take their arguments verbatim (podman's own flags, e.g. `--version`).
    // Lossy: a non-UTF-8 argument must not panic here (clap then names it).
    let raw: Vec<String> = std::env::args_os()
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    match raw.get(1).map(String::as_str) {
        Some("podman") => std::process::exit(agent_day2_sim::noderun::podman::main(&raw[2..])),
        Some("discovery-agent") => std::process::exit(agent_day2_sim::noderun::agent::main(&raw[2..])),
        // node 0's `oc` (node0 --real, cluster0svc); the run-node machines' tools.
        Some("standin") if raw.get(2).map(String::as_str) == Some("oc") => {
            std::process::exit(agent_day2_sim::node0::real::oc_standin(&raw[3..]))
        }
        Some("standin") => std::process::exit(agent_day2_sim::noderun::agent::standin(&raw[2..])),
        _ => {}
    }
    let cli = Cli::parse();
    match cli.cmd {
        Cmd::RunNode(args) => std::process::exit(agent_day2_sim::noderun::run(args)),
        Cmd::ContainerExec {
            dir,
            namespace,
            pod,
            container,
            command,
        } => std::process::exit(agent_day2_sim::api::cp_kubelet::container_exec(
            &dir, &namespace, &pod, &container, &command,
        )),
        Cmd::NodeMachine { spec } => std::process::exit(agent_day2_sim::noderun::machine::main(&spec)),
        Cmd::Podman { args } => std::process::exit(agent_day2_sim::noderun::podman::main(&args)),
        Cmd::DiscoveryAgent { args } => std::process::exit(agent_day2_sim::noderun::agent::main(&args)),
        Cmd::Node0(args) if args.kube_api.is_some() => {
            std::process::exit(agent_day2_sim::node0kube::run_sync(args))
        }
        Cmd::Node0(args) => std::process::exit(agent_day2_sim::node0::run_sync(args)),
        Cmd::Postgres(args) => std::process::exit(run_postgres(args)),
        Cmd::AssistedSchema { db_url, bin_dir } => {
            let bin = bin_dir.unwrap_or_else(agent_day2_sim::noderun::default_bin_dir);
            let work = std::env::temp_dir().join(format!("agent-day2-schema-{}", std::process::id()));
            let r = agent_day2_sim::node0::real::migrate_schema(&bin, &db_url, &work);
            let _ = std::fs::remove_dir_all(&work);
            match r {
                Ok(()) => std::process::exit(0),
                Err(e) => {
                    eprintln!("error: {e:#}");
                    std::process::exit(1)
                }
            }
        }
        Cmd::Cluster0Service(args) => std::process::exit(agent_day2_sim::cluster0svc::run_cli(args)),
        Cmd::Csr(args) => std::process::exit(agent_day2_sim::boot::csr_sync(args)),
        Cmd::Boot(args) => match agent_day2_sim::boot::run_sync(args) {
            Ok(code) => std::process::exit(code),
            Err(e) => {
                eprintln!("error: {e:#}");
                std::process::exit(1);
            }
        },
        // Before any thread exists: CLONE_NEWUSER refuses multi-threaded callers.
        // The real binaries' directory, when scripts/real-components.sh built them (exit 3 else).
        Cmd::Upstream { what } if what == "assisted-service-bin" => {
            let d = agent_day2_sim::noderun::default_bin_dir();
            match agent_day2_sim::noderun::service_version(&d) {
                Ok(_) => {
                    println!("{}", d.display());
                    std::process::exit(0)
                }
                Err(why) => {
                    eprintln!("agent-day2-sim upstream assisted-service-bin: {why}");
                    std::process::exit(3)
                }
            }
        }
        Cmd::Upstream { what } => std::process::exit(agent_day2_sim::upstream::cli(&what)),
        Cmd::Netns { cmd } => {
            let e = agent_day2_sim::netns::run_in_new_netns(&cmd);
            eprintln!("error: {e:#}");
            std::process::exit(1);
        }
        Cmd::Up {
            dir,
            scenario,
            base_iso,
            listen,
            files_listen,
            crds,
            registry,
            assisted_db_url,
            assisted_schema_version,
            volumes_dir,
            real_apiserver,
        } => {
            let _ = tracing_subscriber::fmt()
                .with_env_filter(
                    tracing_subscriber::EnvFilter::try_from_env("AGENT_DAY2_SIM_LOG")
                        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
                )
                .with_writer(std::io::stderr)
                .try_init();
            if let Some(p) = &scenario {
                if let Err(e) = agent_day2_sim::scenario::Scenario::load(p) {
                    eprintln!("error: {e:#}");
                    std::process::exit(3);
                }
            }
            let opts = agent_day2_sim::api::up::UpOptions {
                dir,
                scenario,
                base_iso,
                listen,
                files_listen,
                crds,
                registry,
                assisted_db_url,
                assisted_schema_version: Some(assisted_schema_version),
                volumes_dir,
                real_apiserver: real_apiserver
                    .map(|d| d.unwrap_or_else(agent_day2_sim::api::real::default_kube_bin_dir)),
            };
            let rt = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .enable_all()
                .build()
                .expect("tokio runtime");
            let up_dir = opts.dir.clone();
            // A `failed` left by an earlier run must not stop a waiting loop early.
            let _ = std::fs::remove_file(up_dir.join("failed"));
            if let Err(e) = rt.block_on(agent_day2_sim::api::real::up(opts)) {
                eprintln!("error: {e:#}");
                // Where a loop waiting for `DIR/ready` sees it (issue 22 item 11: it waited
                // for ever): `DIR/failed` holds the error.
                agent_day2_sim::api::up::write_failed(&up_dir, &format!("{e:#}"));
                // A scenario found invalid only while seeding (an `omit` naming nothing) is
                // still an invalid scenario.
                let invalid_scenario = e
                    .downcast_ref::<agent_day2_sim::scenario::ScenarioError>()
                    .is_some();
                std::process::exit(if invalid_scenario { 3 } else { 1 });
            }
        }
    }
}
