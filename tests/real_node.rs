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

/// The three tokens of the ISO: (agent, user, watcher). The agent token is where upstream
/// keeps it and the agent reads it: rendezvous-host.env PULL_SECRET_TOKEN.
fn tokens(cfg: &sim_ignition::Config) -> (String, String, String) {
    const SVC: &str = "/usr/local/share/assisted-service/assisted-service.env";
    const RDV: &str = "/etc/assisted/rendezvous-host.env";
    let agent = env_of(cfg, RDV, "PULL_SECRET_TOKEN").expect("PULL_SECRET_TOKEN in rendezvous-host.env");
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

/// The clusters the node's service holds (GET /v2/clusters with the user token).
fn clusters(ip: &str, user: &str) -> Vec<Value> {
    let (code, body) = api(ip, "clusters", "Authorization", user);
    assert_eq!(code, 200, "GET /v2/clusters: {body}");
    serde_json::from_str::<Value>(&body)
        .unwrap()
        .as_array()
        .unwrap()
        .clone()
}

/// The hosts of the node's InfraEnv (user token).
fn hosts(ip: &str, infra: &str, user: &str) -> Vec<Value> {
    let (code, body) = api(ip, &format!("infra-envs/{infra}/hosts"), "Authorization", user);
    assert_eq!(code, 200, "GET hosts on {ip}: {body}");
    serde_json::from_str::<Value>(&body)
        .unwrap()
        .as_array()
        .unwrap()
        .clone()
}

/// Every validation result other than `success` the real service reported on the way, each
/// once, in the order first seen: `IP validation-id status: message` (polled every 500 ms
/// until dropped; printed for the record, the tests assert on the end state).
struct Validations {
    seen: Arc<Mutex<Vec<String>>>,
    stop: Arc<std::sync::atomic::AtomicBool>,
}

impl Validations {
    fn watch(ips: &[&str], infra: &str, user: &str) -> Validations {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let (s2, st2) = (seen.clone(), stop.clone());
        let ips: Vec<String> = ips.iter().map(|s| s.to_string()).collect();
        let (infra, user) = (infra.to_string(), user.to_string());
        std::thread::spawn(move || {
            while !st2.load(std::sync::atomic::Ordering::SeqCst) {
                for ip in &ips {
                    let (code, body) = api(ip, &format!("infra-envs/{infra}/hosts"), "Authorization", &user);
                    if code != 200 {
                        continue;
                    }
                    let hs: Value = serde_json::from_str(&body).unwrap_or(Value::Null);
                    for h in hs.as_array().into_iter().flatten() {
                        let v: Value = h["validations_info"]
                            .as_str()
                            .and_then(|t| serde_json::from_str(t).ok())
                            .unwrap_or(Value::Null);
                        for r in v
                            .as_object()
                            .into_iter()
                            .flat_map(|o| o.values())
                            .flat_map(|l| l.as_array().cloned().unwrap_or_default())
                        {
                            if r["status"] == "success" {
                                continue;
                            }
                            let line = format!(
                                "{ip} {} {}: {}",
                                r["id"].as_str().unwrap_or(""),
                                r["status"].as_str().unwrap_or(""),
                                r["message"].as_str().unwrap_or("")
                            );
                            let mut s = s2.lock().unwrap();
                            if !s.contains(&line) {
                                s.push(line);
                            }
                        }
                    }
                }
                std::thread::sleep(Duration::from_millis(500));
            }
        });
        Validations { seen, stop }
    }
}

impl Drop for Validations {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::SeqCst);
        let s = self.seen.lock().unwrap();
        eprintln!(
            "validations the real service did not pass on the way ({}):",
            s.len()
        );
        for l in s.iter() {
            eprintln!("  {l}");
        }
    }
}

/// A booted node image: the cluster, the ISO's facts and the running machines.
struct Booted {
    c: TestCluster,
    w: Work,
    agent: String,
    user: String,
    watcher: String,
    infra: String,
    node: Node,
    validations: Validations,
    /// From run-node's start to every machine's goal.
    took: Duration,
    _keep: KeepOnPanic,
}

/// add-nodes for `hosts` on a cluster of `scenario`, then `run-node` of the ISO on `machines`
/// (with `extra` flags), waiting until every machine's add-node unit succeeded.
fn boot(scenario: &str, hosts: &[String], machines: &[(&str, &str, &str)], extra: &[&str]) -> Booted {
    real_bin();
    let w = Work::new();
    let (c, iso) = iso_for(scenario, &w, hosts);
    let cfg = iso_ignition(&iso);
    let (agent, user, watcher) = tokens(&cfg);
    let infra = env_of(
        &cfg,
        "/usr/local/share/assisted-service/assisted-service.env",
        "INFRA_ENV_ID",
    )
    .expect("INFRA_ENV_ID in assisted-service.env");
    let t = Instant::now();
    let mut node = run_node(&w, &iso, machines, extra);
    let _keep = KeepOnPanic(w.path(""));
    let ips: Vec<&str> = machines.iter().map(|m| m.2).collect();
    let validations = Validations::watch(&ips, &infra, &user);
    node.wait_goal(machines.len(), Duration::from_secs(480));
    let took = t.elapsed();
    eprintln!(
        "run-node: {} machine(s) at their goal after {took:?}",
        machines.len()
    );
    assert!(
        node.text()
            .contains("assisted-service: github.com/openshift/assisted-service@"),
        "{}",
        node.text()
    );
    Booted {
        c,
        w,
        agent,
        user,
        watcher,
        infra,
        node,
        validations,
        took,
        _keep,
    }
}

impl Booted {
    /// The one host of the machine at `ip`, asserted `installing*` (the add-node unit's 202
    /// moved it there), with its requested hostname and its MAC in the inventory.
    fn installing_host(&self, (name, mac, ip): (&str, &str, &str)) -> Value {
        let hs = hosts(ip, &self.infra, &self.user);
        assert_eq!(hs.len(), 1, "one host in {ip}'s service: {hs:#?}");
        let h = hs[0].clone();
        let status = h["status"].as_str().unwrap_or("");
        assert!(status.starts_with("installing"), "host status {status}: {h:#}");
        assert_eq!(h["requested_hostname"], name, "{h:#}");
        let inv: Value = serde_json::from_str(h["inventory"].as_str().unwrap_or("null")).unwrap();
        let macs: Vec<&str> = inv["interfaces"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|i| i["mac_address"].as_str())
            .collect();
        assert!(macs.contains(&mac), "{name}: inventory MACs {macs:?}");
        h
    }

    fn finish(self) {
        let Booted {
            node, w, validations, ..
        } = self;
        drop(validations);
        drop(node);
        keep(w);
    }
}

#[test]
#[ignore = "needs the real assisted-service: scripts/real-components.sh"]
fn dhcp_host_reaches_installing_on_the_real_service() {
    let b = boot("name: ostest\n", &[dhcp_host(W0)], &[W0], &[]);
    let ip = W0.2;
    // All three tokens on their headers.
    let cl = clusters(ip, &b.user);
    assert_eq!(cl.len(), 1, "exactly one imported cluster: {cl:?}");
    assert_eq!(cl[0]["kind"], "AddHostsCluster", "{cl:?}");
    let (code, body) = api(ip, "clusters", "Watcher-Authorization", &b.watcher);
    assert_eq!(code, 200, "watcher token: {body}");
    let (code, body) = api(ip, "clusters", "Authorization", &b.watcher);
    // Measured: the real authorizer knows the token (its signature and auth_scheme pass) and
    // refuses the scheme on a user route.
    assert_eq!(code, 403, "the watcher token is not a user token: {body}");
    assert!(body.contains("watcherAuth is unauthorized"), "{body}");
    b.installing_host(W0);
    let host_id = uuid_of(W0.1);
    let (code, body) = api(
        ip,
        &format!("infra-envs/{}/hosts/{host_id}/instructions", b.infra),
        "X-Secret-Key",
        &b.agent,
    );
    assert_eq!(code, 200, "agent token on the agent's route: {body}");
    // v2ListHosts names agentAuth among its schemes (swagger), GET /v2/clusters does not.
    let (code, body) = api(
        ip,
        &format!("infra-envs/{}/hosts", b.infra),
        "X-Secret-Key",
        &b.agent,
    );
    assert_eq!(code, 200, "agent token on v2ListHosts: {body}");
    let (code, body) = api(ip, "clusters", "X-Secret-Key", &b.agent);
    eprintln!("agent token on GET /v2/clusters: {code} {body}");
    assert_eq!(code, 401, "agent token on a user-only route: {body}");
    eprintln!("measured: boot to installing {:?}", b.took);
    b.finish();
}

/// A file of the running machine with MAC `mac` (read through its PID 1's mount namespace:
/// `/proc/<node-machine pid>/root` + the machine's root directory); None when absent.
fn machine_file(b: &Booted, mac: &str, path: &str) -> Option<String> {
    let dir = b.w.path("run").join(format!("machine-{}", mac.replace(':', "")));
    let spec = dir.join("spec.json").to_string_lossy().into_owned();
    for e in std::fs::read_dir("/proc").ok()?.flatten() {
        let cmd = std::fs::read(e.path().join("cmdline")).unwrap_or_default();
        let args: Vec<String> = cmd
            .split(|c| *c == 0)
            .map(|a| String::from_utf8_lossy(a).into_owned())
            .collect();
        if args.iter().any(|a| a == "node-machine") && args.contains(&spec) {
            let p = e
                .path()
                .join("root")
                .join(dir.join("root").strip_prefix("/").unwrap())
                .join(path.trim_start_matches('/'));
            if let Ok(t) = std::fs::read_to_string(&p) {
                return Some(t);
            }
        }
    }
    None
}

/// The host ID run-node's machine reports (its SMBIOS UUID, derived from the MAC).
fn uuid_of(mac: &str) -> String {
    agent_day2_sim::noderun::uuid_for_mac(mac)
}

#[test]
#[ignore = "needs the real assisted-service: scripts/real-components.sh"]
fn two_hosts_from_one_iso_each_find_their_own_config() {
    let b = boot("name: ostest\n", &[dhcp_host(W0), dhcp_host(W1)], &[W0, W1], &[]);
    // Each machine runs its own assisted-service; each holds one cluster and only itself,
    // under the hostname its MAC's host config names.
    for m in [W0, W1] {
        let cl = clusters(m.2, &b.user);
        assert_eq!(cl.len(), 1, "{}: {cl:?}", m.0);
        b.installing_host(m);
    }
    eprintln!("measured: two machines to installing {:?}", b.took);
    b.finish();
}

#[test]
#[ignore = "needs the real assisted-service: scripts/real-components.sh"]
fn static_ip_host_registers_its_nmstate_config_and_reaches_installing() {
    let b = boot("name: ostest\n", &[static_host(W0, 24)], &[W0], &[]);
    let ip = W0.2;
    // The client registered the InfraEnv with the host's NMState (the service ran its own
    // libnmstate validation on it); the InfraEnv keeps it with the MAC map.
    let (code, body) = api(ip, &format!("infra-envs/{}", b.infra), "Authorization", &b.user);
    assert_eq!(code, 200, "{body}");
    let ie: Value = serde_json::from_str(&body).unwrap();
    let snc = ie["static_network_config"].as_str().unwrap_or("");
    assert!(
        snc.contains(ip) && snc.contains(W0.1),
        "static_network_config: {snc:?}"
    );
    b.installing_host(W0);
    // On the machine: pre-network-manager-config copied the host's keyfile (picked by MAC)
    // and renamed the interface to the machine's (nodes-config says eth0, the machine has
    // enp1s0). NetworkManager itself is not run here: run-node sets the address.
    let kf = machine_file(
        &b,
        W0.1,
        "/etc/NetworkManager/system-connections/eth0.nmconnection",
    )
    .expect("the keyfile on the machine");
    assert!(kf.contains("interface-name=enp1s0"), "{kf}");
    assert!(kf.contains(&format!("{}/24", W0.2)), "{kf}");
    eprintln!("measured: static host to installing {:?}", b.took);
    b.finish();
}

#[test]
#[ignore = "needs the real assisted-service: scripts/real-components.sh"]
fn platform_none_cluster_is_imported_with_user_managed_networking() {
    let b = boot("name: ostest\nplatform: None\n", &[dhcp_host(W0)], &[W0], &[]);
    let cl = clusters(W0.2, &b.user);
    assert_eq!(cl.len(), 1, "{cl:?}");
    assert_eq!(cl[0]["user_managed_networking"], true, "{:#}", cl[0]);
    b.installing_host(W0);
    eprintln!("measured: platform none host to installing {:?}", b.took);
    b.finish();
}

#[test]
#[ignore = "needs the real assisted-service: scripts/real-components.sh"]
fn import_happens_once_across_a_restart_of_the_import_unit() {
    let b = boot(
        "name: ostest\n",
        &[dhcp_host(W0)],
        &[W0],
        &["--interrupt", "agent-import-cluster.service"],
    );
    let text = b.node.text();
    assert!(
        text.contains("agent-import-cluster.service: ExecStart ended")
            && text.contains("agent-import-cluster.service: starting again"),
        "the import unit was interrupted and restarted:\n{text}"
    );
    let journal = std::fs::read_to_string(
        b.w.path("run")
            .join(format!("machine-{}", W0.1.replace(':', "")))
            .join("journal/agent-import-cluster.service.log"),
    )
    .unwrap();
    assert!(journal.contains("is already imported"), "second run: {journal}");
    let cl = clusters(W0.2, &b.user);
    assert_eq!(cl.len(), 1, "one cluster after the restart: {cl:?}");
    b.installing_host(W0);
    b.finish();
}

#[test]
#[ignore = "needs the real assisted-service: scripts/real-components.sh"]
fn monitor_reads_the_real_service_with_the_watcher_token() {
    let b = boot("name: ostest\n", &[dhcp_host(W0)], &[W0], &[]);
    b.installing_host(W0);
    let o = plugin(
        &b.c,
        &b.w,
        &[
            "monitor",
            "--ip-addresses",
            W0.2,
            "-o",
            "json",
            "--poll-interval",
            "200ms",
            "--timeout",
            "15s",
        ],
    );
    let evs: Vec<Value> = String::from_utf8_lossy(&o.stdout)
        .lines()
        .map(|l| {
            serde_json::from_str(l).unwrap_or_else(|e| panic!("not a JSON event ({e}): {l}\n{}", text(&o)))
        })
        .collect();
    let stages: Vec<&str> = evs
        .iter()
        .filter(|e| e["event"] == "stage" && e["node"] == W0.0)
        .filter_map(|e| e["stage"].as_str())
        .collect();
    assert!(stages.contains(&"installing"), "stages {stages:?}\n{}", text(&o));
    assert!(
        evs.iter()
            .any(|e| e["node"] == W0.0 && e["message"].as_str().unwrap_or("").contains("recorded on batch")),
        "the DHCP host's address is recorded: {}",
        text(&o)
    );
    // Nothing boots past installing here (the installation to disk is not simulated): monitor
    // ends on its timeout (exit 5), not on a failed installation (6).
    assert_eq!(o.status.code(), Some(5), "{}", text(&o));
    // The batch record now has the address monitor found.
    let recs = batch_records(&b.c);
    assert_eq!(recs.len(), 1, "{recs:?}");
    assert_eq!(
        recs[0]["hosts"][0]["ips"],
        serde_json::json!([W0.2]),
        "{:#}",
        recs[0]
    );
    assert_eq!(recs[0]["hosts"][0]["ipSource"], "monitor", "{:#}", recs[0]);
    b.finish();
}
