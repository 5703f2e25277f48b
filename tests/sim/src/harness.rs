//! Test harness for every end-to-end test of the project (the simulator's and the plugin's).
//!
//! Pattern (a plain `#[test]`, no tokio multi-thread runtime: the network namespace belongs to
//! the calling thread, and only processes spawned from it inherit it):
//!
//! ```no_run
//! use agent_day2_sim::harness::{require_netns, TestCluster};
//! require_netns(); // panics with the reason where there is no namespace to be had
//! let c = TestCluster::start("name: ostest\n").unwrap();
//! let out = c.kubectl(&["get", "nodes"]);
//! assert!(out.status.success());
//! ```

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

/// Address the API listens on inside the test namespace.
pub const API_LISTEN: &str = "192.168.111.5:6443";

thread_local! {
    /// Whether [`enter_netns`] gave this thread a namespace of its own (then port 6443 is free).
    static OWN_NETNS: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Puts the calling thread into a private network namespace whose loopback carries the machine
/// network (see [`crate::netns`]).
///
/// - root: `unshare(CLONE_NEWNET)` on this thread, then `lo` up with 192.168.111.1/24 and the
///   IPv6 /64. Each test thread gets its own namespace, so tests never collide on ports.
///   Calling it again on the same thread does nothing.
/// - already inside `agent-day2-sim netns` (env `AGENT_DAY2_NETNS=1`): nothing to do; all tests
///   of the process then share that namespace, so [`TestCluster`] listens on 192.168.111.5 with
///   a free port instead of 6443 (read `api_url`, don't assume the port).
/// - otherwise: `Err` with the reason ([`require_netns`] panics with it).
pub fn enter_netns() -> Result<(), String> {
    if OWN_NETNS.with(|o| o.get()) {
        return Ok(());
    }
    if std::env::var(crate::netns::ENV_MARK).as_deref() == Ok("1") {
        return Ok(());
    }
    // SAFETY: geteuid cannot fail.
    if unsafe { libc::geteuid() } != 0 {
        return Err("end-to-end tests need root (or run them under agent-day2-sim netns)".into());
    }
    crate::netns::unshare_net_as_root().map_err(|e| format!("cannot create a network namespace: {e}"))?;
    crate::netns::setup_loopback()?;
    OWN_NETNS.with(|o| o.set(true));
    Ok(())
}

/// `target/debug/<name>` (or whichever profile the test runs in), found from the test
/// executable's path (`target/<profile>/deps/<test>-<hash>`).
///
/// Errors when the binary is missing, saying to build it (`cargo build --workspace`).
pub fn bin(name: &str) -> anyhow::Result<PathBuf> {
    let exe = std::env::current_exe()?;
    let mut dir = exe.parent().map(Path::to_path_buf).unwrap_or_default();
    if dir.ends_with("deps") {
        dir.pop();
    }
    let p = dir.join(name);
    if p.is_file() {
        Ok(p)
    } else {
        anyhow::bail!(
            "{} is not built; run `cargo build --workspace` first (tests do not build other binaries)",
            p.display()
        )
    }
}

/// [`enter_netns`] for a test that cannot do without it: panics with the reason and what to do
/// (a test never passes by returning early).
pub fn require_netns() {
    if let Err(why) = enter_netns() {
        panic!("{why}: scripts/test.sh runs the tests so (as root, as CI does)");
    }
}

/// Panics unless `cmd` is on PATH, naming the Debian package that provides it (scripts/setup.sh's
/// `ensure_packages`, run by scripts/test.sh, installs it).
pub fn require_tool(cmd: &str, package: &str) {
    if !on_path(cmd) {
        panic!(
            "needs `{cmd}`: apt-get install {package} (scripts/test.sh installs it through scripts/setup.sh)"
        );
    }
}

/// Whether an executable `cmd` is on PATH.
pub fn on_path(cmd: &str) -> bool {
    std::env::var_os("PATH").is_some_and(|p| {
        std::env::split_paths(&p).any(|d| {
            use std::os::unix::fs::PermissionsExt;
            std::fs::metadata(d.join(cmd)).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        })
    })
}

/// [`crate::postgres::unavailable`] for a test that needs PostgreSQL: panics with the reason.
pub fn require_postgres() {
    if let Some(why) = crate::postgres::unavailable() {
        panic!("{why} (scripts/test.sh installs postgresql through scripts/setup.sh)");
    }
}

/// A running `agent-day2-sim up` in the current network namespace. Dropping it stops the
/// simulator (SIGTERM, then SIGKILL after 5 s) and removes its directory.
pub struct TestCluster {
    /// The simulator's `--dir` (temporary): kubeconfig, ca.crt, ready, sim.log.
    pub dir: PathBuf,
    /// `dir/kubeconfig` (contexts admin (current), bootstrapper, viewer).
    pub kubeconfig: PathBuf,
    /// `https://192.168.111.5:6443` (another port when the namespace is shared, see [`enter_netns`]).
    pub api_url: String,
    /// Base URL of the simulator's file server (base ISO), e.g. `http://192.168.111.5:8080`.
    pub files_url: String,
    /// URL of the simulator's container registry (`up --registry`), e.g.
    /// `https://192.168.111.6:5000`; None when started without one (third line of DIR/ready).
    pub registry_url: Option<String>,
    child: Option<Child>,
    _tmp: tempfile_dir::TempDir,
}

mod tempfile_dir {
    /// Minimal temporary directory (removed on drop) so the library needs no tempfile dependency.
    pub struct TempDir(pub std::path::PathBuf);
    impl TempDir {
        pub fn new() -> std::io::Result<TempDir> {
            let base = std::env::temp_dir();
            for i in 0..1000u32 {
                let p = base.join(format!("agent-day2-sim-{}-{}-{i}", std::process::id(), nanos()));
                match std::fs::create_dir(&p) {
                    Ok(()) => {
                        use std::os::unix::fs::PermissionsExt;
                        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o700))?;
                        return Ok(TempDir(p));
                    }
                    Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
                    Err(e) => return Err(e),
                }
            }
            Err(std::io::Error::other("cannot create a temporary directory"))
        }
    }
    fn nanos() -> u128 {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0)
    }
    impl Drop for TempDir {
        fn drop(&mut self) {
            if std::env::var_os("AGENT_DAY2_KEEP_TMP").is_none() {
                let _ = std::fs::remove_dir_all(&self.0);
            }
        }
    }
}

impl TestCluster {
    /// Starts `agent-day2-sim up --dir <tmp> --listen 192.168.111.5:6443 --scenario <file>`
    /// (port 0 when the namespace is shared)
    /// with `scenario_yaml` (may be empty for the defaults) and waits up to 120 s for
    /// `DIR/ready`. Call [`enter_netns`] first on this thread.
    pub fn start(scenario_yaml: &str) -> anyhow::Result<TestCluster> {
        Self::start_with_args(scenario_yaml, &[])
    }

    /// Like [`TestCluster::start`], with the simulator's container registry holding the release
    /// payload (`up --registry 192.168.111.6:5000`; another free port when the namespace is
    /// shared, see [`enter_netns`]): the cluster's release image, pull secret, registry CA and
    /// (disconnected) mirrors then name it; see [`TestCluster::registry_url`] and
    /// [`TestCluster::registry_host`]. Needs `/usr/bin/docker-registry`
    /// ([`crate::registry::REGISTRY_BIN`]); the error says so when it is missing.
    pub fn start_with_registry(scenario_yaml: &str) -> anyhow::Result<TestCluster> {
        let own = OWN_NETNS.with(|o| o.get());
        let addr = if own {
            crate::registry::DEFAULT_ADDR.to_string()
        } else {
            // docker-registry cannot report a port it picked: take a free one ourselves.
            let l = std::net::TcpListener::bind("192.168.111.6:0")?;
            l.local_addr()?.to_string()
        };
        Self::start_with_args(scenario_yaml, &["--registry", &addr])
    }

    /// `host:port` of the registry started by [`TestCluster::start_with_registry`].
    pub fn registry_host(&self) -> Option<&str> {
        self.registry_url
            .as_deref()
            .and_then(|u| u.split_once("://").map(|(_, h)| h))
    }

    /// Like [`TestCluster::start`] with extra `up` arguments (e.g. `--crds DIR`, `--base-iso F`).
    pub fn start_with_args(scenario_yaml: &str, extra: &[&str]) -> anyhow::Result<TestCluster> {
        let own = OWN_NETNS.with(|o| o.get());
        let listen = if own { API_LISTEN } else { "192.168.111.5:0" };
        TestCluster::start_at(listen, scenario_yaml, extra)
    }

    /// As [`TestCluster::start_with_args`], the API server on `listen` (`IP:PORT`): a second
    /// cluster in the same namespace, e.g. node 0's own API server beside cluster 0's.
    pub fn start_at(listen: &str, scenario_yaml: &str, extra: &[&str]) -> anyhow::Result<TestCluster> {
        let tmp = tempfile_dir::TempDir::new()?;
        let dir = tmp.0.join("sim");
        std::fs::create_dir(&dir)?;
        let scenario = tmp.0.join("scenario.yaml");
        std::fs::write(&scenario, scenario_yaml)?;
        let log = std::fs::File::create(tmp.0.join("sim.log"))?;
        let child = Command::new(bin("agent-day2-sim")?)
            .arg("up")
            .arg("--dir")
            .arg(&dir)
            .args(["--listen", listen])
            .arg("--scenario")
            .arg(&scenario)
            .args(extra)
            .stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log)
            .spawn()?;
        let mut c = TestCluster {
            kubeconfig: dir.join("kubeconfig"),
            dir,
            api_url: format!("https://{API_LISTEN}"),
            files_url: String::new(),
            registry_url: None,
            child: Some(child),
            _tmp: tmp,
        };
        let deadline = Instant::now() + Duration::from_secs(120);
        loop {
            if let Ok(ready) = std::fs::read_to_string(c.dir.join("ready")) {
                c.api_url = ready.lines().next().unwrap_or("").to_string();
                c.files_url = ready.lines().nth(1).unwrap_or("").to_string();
                c.registry_url = ready.lines().nth(2).filter(|l| !l.is_empty()).map(String::from);
                return Ok(c);
            }
            if let Some(st) = c.child.as_mut().and_then(|ch| ch.try_wait().ok().flatten()) {
                anyhow::bail!("agent-day2-sim up exited with {st} before ready:\n{}", c.log());
            }
            if Instant::now() > deadline {
                anyhow::bail!("agent-day2-sim up not ready after 120 s:\n{}", c.log());
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// The simulator's stdout+stderr so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.parent().unwrap_or(&self.dir).join("sim.log")).unwrap_or_default()
    }

    /// A `kubectl` command with `KUBECONFIG` set to this cluster (not yet run). `KUBECACHEDIR`
    /// points into the cluster's directory: every test cluster has the same address
    /// (192.168.111.5:6443, in its own namespace), so kubectl's shared discovery cache in
    /// ~/.kube/cache would otherwise mix up their CRDs.
    pub fn kubectl_cmd(&self, args: &[&str]) -> Command {
        let mut cmd = Command::new("kubectl");
        cmd.args(args).stdin(Stdio::null());
        for (k, v) in self.env() {
            cmd.env(k, v);
        }
        cmd
    }

    /// The environment for any client program run against this cluster: `KUBECONFIG` and
    /// `KUBECACHEDIR` (see [`TestCluster::kubectl_cmd`]).
    pub fn env(&self) -> Vec<(&'static str, PathBuf)> {
        vec![
            ("KUBECONFIG", self.kubeconfig.clone()),
            ("KUBECACHEDIR", self.dir.join("kubecache")),
        ]
    }

    /// Runs `kubectl ARGS` against this cluster and returns its output.
    pub fn kubectl(&self, args: &[&str]) -> Output {
        self.kubectl_cmd(args)
            .output()
            .expect("cannot run kubectl (is it on PATH?)")
    }

    /// Runs `kubectl ARGS` with `stdin` fed to it.
    pub fn kubectl_stdin(&self, args: &[&str], stdin: &str) -> Output {
        use std::io::Write;
        let mut child = self
            .kubectl_cmd(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("cannot run kubectl (is it on PATH?)");
        let _ = child.stdin.take().expect("stdin").write_all(stdin.as_bytes());
        child.wait_with_output().expect("kubectl")
    }
}

impl Drop for TestCluster {
    fn drop(&mut self) {
        if let Some(mut ch) = self.child.take() {
            // SAFETY: kill with the pid of our own child.
            unsafe { libc::kill(ch.id() as libc::pid_t, libc::SIGTERM) };
            let deadline = Instant::now() + Duration::from_secs(5);
            while Instant::now() < deadline {
                if let Ok(Some(_)) = ch.try_wait() {
                    return;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            let _ = ch.kill();
            let _ = ch.wait();
        }
    }
}

/// A running `agent-day2-sim node0` (node 0's simulated assisted-service, the source of
/// `migrate export`) in the current network namespace; killed (SIGKILL) on drop.
///
/// ```no_run
/// use agent_day2_sim::harness::{require_netns, Node0};
/// use agent_day2_sim::postgres::Postgres;
/// require_netns();
/// let tmp = tempfile::tempdir().unwrap();
/// let pg = Postgres::start(&tmp.path().join("src-db"), "127.0.0.1".parse().unwrap()).unwrap();
/// pg.create_db("installer", "admin").unwrap();
/// let n0 = Node0::start(&tmp.path().join("node0"), "192.168.111.80:8090", &pg.url("installer"), &[]).unwrap();
/// // n0.url = "http://192.168.111.80:8090", n0.token_file = DIR/user-token
/// ```
pub struct Node0 {
    /// Base URL (`http://IP:PORT`, the first line of `DIR/ready`); the API is under
    /// `/api/assisted-install/v2`.
    pub url: String,
    /// `DIR/user-token`: the userAuth token (for `migrate export --token-file`).
    pub token_file: PathBuf,
    /// The simulator's `--dir` (user-token, ready, node0.log).
    pub dir: PathBuf,
    /// The simulator process (None once waited for).
    pub child: Option<Child>,
}

impl Node0 {
    /// Runs `agent-day2-sim node0 --dir DIR --listen LISTEN --db-url DB_URL ARGS...` (`dir` is
    /// created; output to `DIR/node0.log`) and waits up to 120 s for `DIR/ready` (900 s with
    /// `--real`: the real service is driven through an install first).
    ///
    /// `listen`: `IP:PORT`, e.g. `192.168.111.80:8090` (port 0: a free one; read [`Node0::url`]).
    /// `args`: more flags, e.g. `["--hosts", "50", "--events", "10000"]`,
    /// `["--die-after-requests", "5"]`, `["--schema-version", "20250101000000"]`, `["--real"]`.
    /// The database at `db_url` gets the tables when it has none and is filled when `clusters`
    /// is empty (see [`crate::node0`]).
    ///
    /// Errors: the binary is not built ([`bin`]), it exits or is not ready in time (with its log).
    pub fn start(dir: &Path, listen: &str, db_url: &str, args: &[&str]) -> anyhow::Result<Node0> {
        std::fs::create_dir_all(dir)?;
        let _ = std::fs::remove_file(dir.join("ready"));
        let log = std::fs::File::create(dir.join("node0.log"))?;
        let child = Command::new(bin("agent-day2-sim")?)
            .arg("node0")
            .arg("--dir")
            .arg(dir)
            .args(["--listen", listen, "--db-url", db_url])
            .args(args)
            .stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log)
            .spawn()?;
        let mut n = Node0 {
            url: String::new(),
            token_file: dir.join("user-token"),
            dir: dir.to_path_buf(),
            child: Some(child),
        };
        // A real node 0 (`--real`) drives an install first (about 90 s here; its own --timeout
        // bounds it).
        let wait = if args.contains(&"--real") { 900 } else { 120 };
        let deadline = Instant::now() + Duration::from_secs(wait);
        loop {
            if let Ok(ready) = std::fs::read_to_string(dir.join("ready")) {
                n.url = ready.lines().next().unwrap_or("").to_string();
                return Ok(n);
            }
            if let Some(st) = n.child.as_mut().and_then(|ch| ch.try_wait().ok().flatten()) {
                n.child = None;
                anyhow::bail!("agent-day2-sim node0 exited with {st} before ready:\n{}", n.log());
            }
            if Instant::now() > deadline {
                anyhow::bail!("agent-day2-sim node0 not ready after {wait} s:\n{}", n.log());
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// The userAuth token (contents of [`Node0::token_file`]).
    pub fn token(&self) -> String {
        std::fs::read_to_string(&self.token_file)
            .unwrap_or_default()
            .trim()
            .to_string()
    }

    /// The simulator's stdout+stderr so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("node0.log")).unwrap_or_default()
    }

    /// Waits up to `timeout` for the process to exit on its own (e.g. `--die-after-requests`);
    /// its exit status, or None if still running.
    pub fn wait_exit(&mut self, timeout: Duration) -> Option<std::process::ExitStatus> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(st) = self.child.as_mut().and_then(|ch| ch.try_wait().ok().flatten()) {
                self.child = None;
                return Some(st);
            }
            if self.child.is_none() || Instant::now() > deadline {
                return None;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Node0 {
    fn drop(&mut self) {
        if let Some(mut ch) = self.child.take() {
            let _ = ch.kill();
            let _ = ch.wait();
        }
    }
}
