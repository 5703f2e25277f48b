//! The node ISO judged by the REAL consumer code: the built plugin's `add-nodes` writes the ISO
//! for a simulated cluster, then `agent-day2-sim run-node` boots its Ignition against the real
//! assisted-service and agent-based-installer client (built by scripts/real-components.sh from
//! their Go module), with only podman, the discovery agent and hostnamectl stood in.
//!
//! Every test here needs those binaries: they are `#[ignore]`d with the reason, so a run
//! without them counts them as ignored; run them with `--include-ignored` where
//! scripts/real-components.sh has built the binaries (a missing binary then fails the test,
//! it never passes silently). They need root (network and mount namespaces).

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

#[macro_use]
#[path = "support/cluster.rs"]
mod cluster;

use agent_day2_sim::boot::ignition as sim_ignition;
use agent_day2_sim::harness::{bin, TestCluster};
use cluster::*;
use serde_json::Value;

const NEEDS: &str = "needs the real assisted-service: scripts/real-components.sh";

/// The real binaries' directory; panics (the test fails) when they are missing.
fn real_bin() -> PathBuf {
    let d = agent_day2_sim::noderun::default_bin_dir();
    if let Err(e) = agent_day2_sim::noderun::service_version(&d) {
        panic!("{NEEDS}: {e}");
    }
    d
}

/// The Ignition embedded in an ISO we wrote (read by the simulator's reader).
fn iso_ignition(iso: &Path) -> sim_ignition::Config {
    let mut f = std::fs::File::open(iso).unwrap();
    let (bytes, _) = agent_day2_sim::boot::embed::read_ignition(&mut f).unwrap();
    sim_ignition::parse(&bytes).unwrap()
}

/// A value of an env file of the ISO (`KEY=VALUE` lines), if set.
fn env_of(cfg: &sim_ignition::Config, file: &str, key: &str) -> Option<String> {
    cfg.text(file)
        .and_then(|t| sim_ignition::env_file(&t).get(key).cloned())
}

/// The three tokens of the ISO: (agent, user, watcher). The agent token is looked for where
/// upstream keeps it (rendezvous-host.env PULL_SECRET_TOKEN), then in the service env.
fn tokens(cfg: &sim_ignition::Config) -> (String, String, String) {
    const SVC: &str = "/usr/local/share/assisted-service/assisted-service.env";
    const RDV: &str = "/etc/assisted/rendezvous-host.env";
    let agent = env_of(cfg, RDV, "PULL_SECRET_TOKEN")
        .or_else(|| env_of(cfg, SVC, "AGENT_AUTH_TOKEN"))
        .expect("the ISO carries an agent token");
    let user = env_of(cfg, SVC, "USER_AUTH_TOKEN").expect("USER_AUTH_TOKEN in assisted-service.env");
    let watcher = env_of(cfg, SVC, "WATCHER_AUTH_TOKEN").expect("WATCHER_AUTH_TOKEN in assisted-service.env");
    (agent, user, watcher)
}

/// GET `path` of the node's REST API with one auth header: (status, body).
fn api(ip: &str, path: &str, header: &str, token: &str) -> (u16, String) {
    let o = Command::new("curl")
        .args(["-sS", "--max-time", "10", "-o", "-", "-w", "\n%{http_code}", "-H"])
        .arg(format!("{header}: {token}"))
        .arg(format!("http://{ip}:8090/api/assisted-install/v2/{path}"))
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&o.stdout).into_owned();
    let (b, c) = out.rsplit_once('\n').unwrap_or(("", &out));
    (c.trim().parse().unwrap_or(0), b.to_string())
}

/// Keeps the work directory (journals, spec) when AGENT_DAY2_KEEP_WORK is set, for debugging.
fn keep(w: Work) {
    if std::env::var_os("AGENT_DAY2_KEEP_WORK").is_some() {
        eprintln!("kept {}", w.tmp.keep().display());
    }
}

/// Prints where the journals are when the test fails (and AGENT_DAY2_KEEP_WORK keeps them).
struct KeepOnPanic(PathBuf);
impl Drop for KeepOnPanic {
    fn drop(&mut self) {
        if std::thread::panicking() && std::env::var_os("AGENT_DAY2_KEEP_WORK").is_some() {
            let _ = Command::new("cp")
                .arg("-a")
                .arg(&self.0)
                .arg("/tmp/real-node-failed")
                .status();
            eprintln!("journals copied to /tmp/real-node-failed");
        }
    }
}

/// A running `run-node` (killed when dropped) and its collected output.
struct Node {
    kid: Kid,
    out: Arc<Mutex<String>>,
}

impl Node {
    fn text(&self) -> String {
        self.out.lock().unwrap().clone()
    }
    /// Waits until every label in `labels` said GOAL reached; panics with the output on a
    /// failure, an exit, or the timeout.
    fn wait_goal(&mut self, n: usize, timeout: Duration) {
        let t = Instant::now();
        loop {
            let text = self.text();
            if text.matches("GOAL reached").count() >= n {
                return;
            }
            if text.contains("GOAL FAILED") || text.contains("TIMEOUT") {
                panic!("run-node failed:\n{text}");
            }
            if let Ok(Some(st)) = self.kid.0.try_wait() {
                std::thread::sleep(Duration::from_millis(300));
                panic!("run-node exited ({st}) before the goal:\n{}", self.text());
            }
            if t.elapsed() > timeout {
                panic!("run-node did not reach the goal in {timeout:?}:\n{text}");
            }
            std::thread::sleep(Duration::from_millis(250));
        }
    }
}

/// `run-node --iso ISO --stay` for `nodes`, with the seeded payload's component images.
fn run_node(w: &Work, iso: &Path, nodes: &[(&str, &str, &str)], extra: &[&str]) -> Node {
    let mut cmd = Command::new(bin("agent-day2-sim").unwrap());
    cmd.arg("run-node")
        .arg("--iso")
        .arg(iso)
        .arg("--work")
        .arg(w.path("run"));
    cmd.arg("--bin-dir").arg(real_bin());
    for (_, mac, ip) in nodes {
        cmd.arg("--node").arg(format!("{mac}={ip}/24"));
    }
    cmd.args(["--image", &format!("api-server={}", component('1'))]);
    cmd.args(["--image", &format!("node-agent={}", component('2'))]);
    cmd.args(["--time-scale", "0.1", "--timeout", "8m", "--stay"]);
    cmd.args(["--dns", "api.ostest.example.com=192.168.111.5"]);
    cmd.args(["--dns", "api-int.ostest.example.com=192.168.111.5"]);
    // The site's wildcard `*.apps` record points at the ingress VIP; /etc/hosts has no
    // wildcards, so the one name assisted-service resolves for it (its domain-resolution step
    // asks for console-openshift-console.apps.<name>.<domain>). The cluster's DNS itself is
    // outside what the simulator runs.
    cmd.args([
        "--dns",
        &format!(
            "console-openshift-console.apps.ostest.example.com={}",
            agent_day2_sim::seed::INGRESS_VIP
        ),
    ]);
    cmd.args(extra);
    cmd.stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .stdin(Stdio::null());
    let mut child = cmd.spawn().unwrap();
    let out = Arc::new(Mutex::new(String::new()));
    for pipe in [
        Box::new(child.stdout.take().unwrap()) as Box<dyn std::io::Read + Send>,
        Box::new(child.stderr.take().unwrap()),
    ] {
        let out = out.clone();
        std::thread::spawn(move || {
            for l in BufReader::new(pipe).lines().map_while(Result::ok) {
                eprintln!("{l}");
                let mut o = out.lock().unwrap();
                o.push_str(&l);
                o.push('\n');
            }
        });
    }
    Node { kid: Kid(child), out }
}

/// A seeded cluster (component images from the plugin's cache: api server `1…`, node agent
/// `2…`), add-nodes of `hosts` (nodes-config text), the ISO's path.
fn iso_for(scenario: &str, w: &Work, hosts: &[String]) -> (TestCluster, PathBuf) {
    agent_day2_sim::harness::enter_netns().expect("a network namespace (root)");
    let c = TestCluster::start(scenario).unwrap();
    seed_release(&c, w, &["x86_64"]);
    let nc = w.write("nodes-config.yaml", &nodes_config(hosts));
    let o = plugin(
        &c,
        w,
        &[
            "add-nodes",
            "--nodes-config",
            nc.to_str().unwrap(),
            "--dir",
            w.out().to_str().unwrap(),
        ],
    );
    assert_eq!(o.status.code(), Some(0), "add-nodes: {}", text(&o));
    (c, w.out().join("node.x86_64.iso"))
}

/// The one cluster the node's service holds (GET /v2/clusters with the user token).
fn clusters(ip: &str, user: &str) -> Vec<Value> {
    let (code, body) = api(ip, "clusters", "Authorization", user);
    assert_eq!(code, 200, "GET /v2/clusters: {body}");
    serde_json::from_str::<Value>(&body)
        .unwrap()
        .as_array()
        .unwrap()
        .clone()
}

#[test]
#[ignore = "needs the real assisted-service: scripts/real-components.sh"]
fn dhcp_host_reaches_installing_on_the_real_service() {
    real_bin();
    let w = Work::new();
    let (_c, iso) = iso_for("name: ostest\n", &w, &[dhcp_host(W0)]);
    let cfg = iso_ignition(&iso);
    let (agent, user, watcher) = tokens(&cfg);
    let mut node = run_node(&w, &iso, &[W0], &[]);
    let _keep = KeepOnPanic(w.path(""));
    assert!(
        node.text()
            .contains("assisted-service: github.com/openshift/assisted-service@")
            || {
                std::thread::sleep(Duration::from_secs(1));
                node.text()
                    .contains("assisted-service: github.com/openshift/assisted-service@")
            },
        "{}",
        node.text()
    );
    node.wait_goal(1, Duration::from_secs(480));
    let ip = W0.2;
    // All three tokens on their headers.
    let cl = clusters(ip, &user);
    assert_eq!(cl.len(), 1, "exactly one imported cluster: {cl:?}");
    let (code, body) = api(ip, "clusters", "Watcher-Authorization", &watcher);
    assert_eq!(code, 200, "watcher token: {body}");
    let infra = env_of(
        &cfg,
        "/usr/local/share/assisted-service/assisted-service.env",
        "INFRA_ENV_ID",
    )
    .unwrap();
    let (code, body) = api(ip, &format!("infra-envs/{infra}/hosts"), "Authorization", &user);
    assert_eq!(code, 200, "{body}");
    let hosts: Value = serde_json::from_str(&body).unwrap();
    let status = hosts[0]["status"].as_str().unwrap_or("");
    assert!(
        status.starts_with("installing"),
        "host status {status}: {hosts:#}"
    );
    let (code, body) = api(ip, &format!("infra-envs/{infra}/hosts"), "X-Secret-Key", &agent);
    assert!(
        code == 200 || code == 401 || code == 403,
        "agent token on a user route: {code} {body}"
    );
    drop(node);
    keep(w);
}
