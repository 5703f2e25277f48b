//! The node images judged by the REAL consumer code: the built plugin's `add-nodes` writes the
//! ISO, the PXE files or the appliance config image for a simulated cluster, then
//! `agent-day2-sim run-node` boots them against the real assisted-service, its
//! agent-based-installer client and the real discovery agent (built from source by
//! scripts/real-components.sh), with only the live system, podman and what would leave the
//! machine stood in (docs/real-vs-simulated.md).
//!
//! Every test here needs those binaries: `#[cfg_attr(not(real_assisted), ignore = ...)]`
//! (build.rs), so they are ordinary tests where scripts/test.sh built them (it sets
//! AGENT_DAY2_REAL_ASSISTED=1, and AGENT_DAY2_REAL_AGENT=1 for the one test that judges what
//! only the real agent reports) and counted as ignored elsewhere; a missing binary with the
//! variable set fails the test, it never passes silently. They need root (network and mount
//! namespaces).

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::support::cluster;

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

/// `run-node --iso ISO --stay` for `nodes`, with the seeded payload's component images
/// (`--pxe-dir ISO` when `iso` is a directory of PXE files).
fn run_node(w: &Work, iso: &Path, nodes: &[(&str, &str, &str)], extra: &[&str]) -> Node {
    let flag = if iso.is_dir() { "--pxe-dir" } else { "--iso" };
    spawn_run_node(w, &[flag.as_ref(), iso.as_os_str()], nodes, extra)
}

/// `run-node IMAGE-SOURCE... --stay` for `nodes` (the image source as flags, e.g. `--iso X`),
/// with the seeded payload's component images and the site's DNS names.
fn spawn_run_node(
    w: &Work,
    source: &[&std::ffi::OsStr],
    nodes: &[(&str, &str, &str)],
    extra: &[&str],
) -> Node {
    let mut cmd = Command::new(bin("agent-day2-sim").unwrap());
    cmd.arg("run-node").args(source).arg("--work").arg(w.path("run"));
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
#[cfg_attr(
    not(real_assisted),
    ignore = "needs the real assisted-service: scripts/real-components.sh assisted, then AGENT_DAY2_REAL_ASSISTED=1 (scripts/test.sh does both)"
)]
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

/// The path, seen from here, of `path` on the running machine with MAC `mac` (through its
/// PID 1's mount namespace: `/proc/<node-machine pid>/root` + the machine's root directory)
/// for which `found` holds; None when no such file.
fn machine_path(b: &Booted, mac: &str, path: &str, found: impl Fn(&Path) -> bool) -> Option<PathBuf> {
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
            if found(&p) {
                return Some(p);
            }
        }
    }
    None
}

/// A file of the running machine with MAC `mac` ([`machine_path`]); None when absent.
fn machine_file(b: &Booted, mac: &str, path: &str) -> Option<String> {
    let p = machine_path(b, mac, path, |p| std::fs::read_to_string(p).is_ok())?;
    std::fs::read_to_string(p).ok()
}

/// The host ID run-node's machine reports (its SMBIOS UUID, derived from the MAC).
fn uuid_of(mac: &str) -> String {
    agent_day2_sim::noderun::uuid_for_mac(mac)
}

#[test]
#[cfg_attr(
    not(real_assisted),
    ignore = "needs the real assisted-service: scripts/real-components.sh assisted, then AGENT_DAY2_REAL_ASSISTED=1 (scripts/test.sh does both)"
)]
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
#[cfg_attr(
    not(real_assisted),
    ignore = "needs the real assisted-service: scripts/real-components.sh assisted, then AGENT_DAY2_REAL_ASSISTED=1 (scripts/test.sh does both)"
)]
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
#[cfg_attr(
    not(real_assisted),
    ignore = "needs the real assisted-service: scripts/real-components.sh assisted, then AGENT_DAY2_REAL_ASSISTED=1 (scripts/test.sh does both)"
)]
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
#[cfg_attr(
    not(real_assisted),
    ignore = "needs the real assisted-service: scripts/real-components.sh assisted, then AGENT_DAY2_REAL_ASSISTED=1 (scripts/test.sh does both)"
)]
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
#[cfg_attr(
    not(real_assisted),
    ignore = "needs the real assisted-service: scripts/real-components.sh assisted, then AGENT_DAY2_REAL_ASSISTED=1 (scripts/test.sh does both)"
)]
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

/// The journal of `unit` on the machine with MAC `mac` (run-node's `journal/<unit>.log`).
fn journal(w: &Work, mac: &str, unit: &str) -> String {
    std::fs::read_to_string(
        w.path("run")
            .join(format!("machine-{}", mac.replace(':', "")))
            .join("journal")
            .join(format!("{unit}.log")),
    )
    .unwrap_or_default()
}

#[test]
#[cfg_attr(
    not(real_assisted),
    ignore = "needs the real assisted-service: scripts/real-components.sh assisted, then AGENT_DAY2_REAL_ASSISTED=1 (scripts/test.sh does both)"
)]
fn a_worker_with_too_little_memory_stays_insufficient_and_monitor_says_why() {
    real_bin();
    let w = Work::new();
    let (c, iso) = iso_for("name: ostest\n", &w, &[dhcp_host(W0)]);
    let cfg = iso_ignition(&iso);
    let (_, user, _) = tokens(&cfg);
    let infra = env_of(
        &cfg,
        "/usr/local/share/assisted-service/assisted-service.env",
        "INFRA_ENV_ID",
    )
    .unwrap();
    // 4 GiB: below what the real service asks of a worker (its hardware validations).
    let node = run_node(&w, &iso, &[W0], &["--memory-gib", "4"]);
    let _keep = KeepOnPanic(w.path(""));
    let t = Instant::now();
    // The real service judges the host: insufficient, with a memory validation failing, and
    // add-node.sh (the goal unit, never reached) prints that validation's message.
    let (host, add_node) = loop {
        let hs = if node.text().contains("GOAL reached") {
            panic!("the host was installed with 4 GiB:\n{}", node.text())
        } else {
            let (code, body) = api(W0.2, &format!("infra-envs/{infra}/hosts"), "Authorization", &user);
            if code == 200 {
                serde_json::from_str::<Value>(&body).unwrap_or(Value::Null)
            } else {
                Value::Null
            }
        };
        let j = journal(&w, W0.1, "agent-add-node.service");
        if hs[0]["status"] == "insufficient" && j.contains("validation has-memory-for-role (failure)") {
            break (hs[0].clone(), j);
        }
        assert!(
            t.elapsed() < Duration::from_secs(300),
            "no insufficient host with a failing memory validation in 300 s: hosts {hs:#}\nadd-node journal:\n{j}\n{}",
            node.text()
        );
        std::thread::sleep(Duration::from_millis(500));
    };
    let vinfo: Value = serde_json::from_str(host["validations_info"].as_str().unwrap()).unwrap();
    let mem = vinfo["hardware"]
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v["id"] == "has-memory-for-role")
        .cloned()
        .unwrap();
    assert_eq!(mem["status"], "failure", "{vinfo:#}");
    let message = mem["message"].as_str().unwrap().to_string();
    eprintln!("the real service: has-memory-for-role: {message}");
    assert!(
        add_node.contains(&message),
        "add-node.sh prints the service's message:\n{add_node}"
    );
    // monitor shows the message and never exits 0 for it: 5 when it gives up waiting (the host
    // can still be fixed: more memory, a reboot), docs/exit-codes.md.
    let o = plugin(
        &c,
        &w,
        &[
            "monitor",
            "--ip-addresses",
            W0.2,
            "--poll-interval",
            "500ms",
            "--timeout",
            "20s",
        ],
    );
    let out = text(&o);
    assert!(
        out.contains(&message),
        "monitor shows the failing validation's message:\n{out}"
    );
    assert!(matches!(o.status.code(), Some(5) | Some(6)), "{out}");
    eprintln!(
        "measured: to insufficient with the message {:?}; monitor exit {:?}",
        t.elapsed(),
        o.status.code()
    );
    drop(node);
    keep(w);
}

#[test]
#[cfg_attr(
    not(real_assisted),
    ignore = "needs the real assisted-service: scripts/real-components.sh assisted, then AGENT_DAY2_REAL_ASSISTED=1 (scripts/test.sh does both)"
)]
fn dual_stack_static_host_on_an_ipv6_machine_network_reaches_installing() {
    // The dual-stack scenario's IPv6 machine network is fd2e:6f44:5dd8:c956::/120.
    const V6: &str = "fd2e:6f44:5dd8:c956::1e";
    let (h, mac, ip) = W0;
    let host = format!(
        "- hostname: {h}\n  rootDeviceHints:\n    deviceName: /dev/vda\n  interfaces:\n  - name: eth0\n    macAddress: \"{mac}\"\n  networkConfig:\n    interfaces:\n    - name: eth0\n      type: ethernet\n      state: up\n      mac-address: \"{mac}\"\n      ipv4:\n        enabled: true\n        dhcp: false\n        address:\n        - ip: \"{ip}\"\n          prefix-length: 24\n      ipv6:\n        enabled: true\n        dhcp: false\n        autoconf: false\n        address:\n        - ip: \"{V6}\"\n          prefix-length: 120\n"
    );
    let b = boot(
        "name: ostest\ndualStack: true\n",
        &[host],
        &[W0],
        &["--node-ipv6", &format!("{mac}={V6}/120")],
    );
    // The client registered the InfraEnv with both addresses: the real service's libnmstate
    // accepted the IPv6 part.
    let (code, body) = api(ip, &format!("infra-envs/{}", b.infra), "Authorization", &b.user);
    assert_eq!(code, 200, "{body}");
    let ie: Value = serde_json::from_str(&body).unwrap();
    let snc = ie["static_network_config"].as_str().unwrap_or("");
    assert!(
        snc.contains(ip) && snc.contains(V6),
        "static_network_config: {snc:?}"
    );
    let hv = b.installing_host(W0);
    let inv: Value = serde_json::from_str(hv["inventory"].as_str().unwrap_or("null")).unwrap();
    let v6s: Vec<String> = inv["interfaces"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|i| i["ipv6_addresses"].as_array().cloned().unwrap_or_default())
        .filter_map(|a| a.as_str().map(String::from))
        .collect();
    assert!(v6s.contains(&format!("{V6}/120")), "inventory IPv6 {v6s:?}");
    let kf = machine_file(
        &b,
        mac,
        "/etc/NetworkManager/system-connections/eth0.nmconnection",
    )
    .expect("the keyfile on the machine");
    assert!(kf.contains(&format!("{V6}/120")), "{kf}");
    eprintln!("measured: dual-stack static host to installing {:?}", b.took);
    b.finish();
}

// ---- the appliance config image ----------------------------------------------------------

/// The config image's files (`config.gz` of `agentconfig.noarch.iso`) as a config of the
/// simulator's reader, so the ISO helpers above read its tokens.
fn config_image_files(img: &Path) -> sim_ignition::Config {
    let mut f = std::fs::File::open(img).unwrap();
    let files = agent_day2_sim::boot::embed::read_config_image(&mut f).unwrap();
    sim_ignition::Config {
        files,
        ..Default::default()
    }
}

/// add-nodes twice for `hosts`: the node ISO first (its Ignition stands for the appliance disk,
/// `agent_day2_sim::noderun::appliance`), then the config image (that batch replaces the
/// ISO's; the tokens are reused). Returns the cluster, the ISO and the config image.
fn appliance_for(w: &Work, hosts: &[String]) -> (TestCluster, PathBuf, PathBuf) {
    let (c, iso) = iso_for("name: ostest\n", w, hosts);
    let dir = w.path("appliance");
    let nc = w.path("nodes-config.yaml");
    let o = plugin(
        &c,
        w,
        &[
            "add-nodes",
            "--nodes-config",
            nc.to_str().unwrap(),
            "--dir",
            dir.to_str().unwrap(),
            "--config-image",
        ],
    );
    assert_eq!(o.status.code(), Some(0), "add-nodes --config-image: {}", text(&o));
    (c, iso, dir.join("agentconfig.noarch.iso"))
}

/// `run-node --config-image IMG --appliance-disk ISO --stay` for `nodes`, otherwise as
/// [`run_node`].
fn run_node_appliance(
    w: &Work,
    disk: &Path,
    img: &Path,
    nodes: &[(&str, &str, &str)],
    extra: &[&str],
) -> Node {
    spawn_run_node(
        w,
        &[
            "--config-image".as_ref(),
            img.as_os_str(),
            "--appliance-disk".as_ref(),
            disk.as_os_str(),
        ],
        nodes,
        extra,
    )
}

/// The journal of the appliance loader on the machine with MAC `mac`.
fn loader_journal(w: &Work, mac: &str) -> String {
    std::fs::read_to_string(
        w.path("run")
            .join(format!("machine-{}", mac.replace(':', "")))
            .join("journal")
            .join(format!("{}.log", agent_day2_sim::noderun::appliance::UNIT)),
    )
    .unwrap_or_default()
}

/// The permission bits of a file of the running machine with MAC `mac` ([`machine_path`]).
fn machine_mode(b: &Booted, mac: &str, path: &str) -> Option<u32> {
    use std::os::unix::fs::PermissionsExt;
    let p = machine_path(b, mac, path, |p| std::fs::metadata(p).is_ok())?;
    Some(std::fs::metadata(p).ok()?.permissions().mode() & 0o7777)
}

#[test]
#[cfg_attr(
    not(real_assisted),
    ignore = "needs the real assisted-service: scripts/real-components.sh assisted, then AGENT_DAY2_REAL_ASSISTED=1 (scripts/test.sh does both)"
)]
fn config_image_loaded_by_upstreams_loader_reaches_installing_on_the_real_service() {
    const SVC: &str = "/usr/local/share/assisted-service/assisted-service.env";
    real_bin();
    // One reading of upstream's GetConfigImageFiles() in the product and in the loader's
    // stand-in.
    assert_eq!(
        agent_day2::iso::config_image::LOADER_FILES,
        agent_day2_sim::noderun::appliance::LOADER_FILES
    );
    let w = Work::new();
    let (c, iso, img) = appliance_for(&w, &[dhcp_host(W0)]);
    let cfg = config_image_files(&img);
    let (agent, user, watcher) = tokens(&cfg);
    let infra =
        env_of(&cfg, SVC, "INFRA_ENV_ID").expect("INFRA_ENV_ID in the config image's assisted-service.env");
    let disk_svc = iso_ignition(&iso).text(SVC).unwrap();
    let t = Instant::now();
    // An appliance built as a live ISO: the machine runs from memory, as the node ISO does
    // (for the disk image, see the test below).
    let mut node = run_node_appliance(&w, &iso, &img, &[W0], &["--appliance-live-iso"]);
    let _keep = KeepOnPanic(w.path(""));
    let validations = Validations::watch(&[W0.2], &infra, &user);
    node.wait_goal(1, Duration::from_secs(480));
    let took = t.elapsed();
    let b = Booted {
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
    };
    let h = b.installing_host(W0);
    eprintln!(
        "host {} on the appliance: {}",
        h["requested_hostname"], h["status"]
    );
    let j = loader_journal(&b.w, W0.1);
    for want in [
        "Archive on /dev/sr0 contains release",
        "Copied file /etc/issue",
        "Copied file /opt/agent/tls/kubeadmin-password.hash",
        "Copied files in /etc/assisted/hostconfig",
        "Copied file /etc/assisted/rendezvous-host.env",
        "Successfully copied contents of config.gz on /dev/sr0",
    ] {
        assert!(j.contains(want), "{want:?} not in the loader's journal:\n{j}");
    }
    // `cpio -u` replaced the disk's assisted-service.env (the ISO's, another add-nodes run)
    // with the config image's, whose INFRA_ENV_ID the real service registered.
    assert_eq!(machine_file(&b, W0.1, SVC).as_deref(), cfg.text(SVC).as_deref());
    eprintln!(
        "the disk's assisted-service.env {} the config image's",
        if disk_svc == cfg.text(SVC).unwrap() {
            "equals"
        } else {
            "differed from, and was replaced by,"
        }
    );
    // Modes as the cpio records them.
    assert_eq!(
        machine_mode(&b, W0.1, "/etc/assisted/manifests/pull-secret.yaml"),
        Some(0o600)
    );
    assert_eq!(
        machine_mode(&b, W0.1, "/etc/assisted/hostconfig/worker-0/role"),
        Some(0o644)
    );
    eprintln!("measured: appliance host to installing {took:?}");
    b.finish();
}

#[test]
#[cfg_attr(
    not(real_assisted),
    ignore = "needs the real assisted-service: scripts/real-components.sh assisted, then AGENT_DAY2_REAL_ASSISTED=1 (scripts/test.sh does both)"
)]
fn config_image_for_another_release_than_the_disks_is_refused_by_the_loader() {
    real_bin();
    let w = Work::new();
    let (_c, iso, img) = appliance_for(&w, &[dhcp_host(W0)]);
    let other = format!(
        "quay.io/openshift-release-dev/ocp-release@sha256:{}",
        "0".repeat(64)
    );
    let mut node = run_node_appliance(&w, &iso, &img, &[W0], &["--appliance-release", &other]);
    let t = Instant::now();
    let status = loop {
        if let Ok(Some(st)) = node.kid.0.try_wait() {
            break st;
        }
        assert!(
            t.elapsed() < Duration::from_secs(120),
            "run-node still runs after 120 s:\n{}",
            node.text()
        );
        std::thread::sleep(Duration::from_millis(200));
    };
    std::thread::sleep(Duration::from_millis(300));
    let out = node.text();
    assert_eq!(status.code(), Some(6), "{out}");
    assert!(
        out.contains(&format!(
            "The cluster-image-set in archive does not match current release {other}"
        )),
        "{out}"
    );
    assert!(out.contains("GOAL FAILED"), "{out}");
    let j = loader_journal(&w, W0.1);
    assert!(
        !j.contains("Copied file"),
        "nothing is copied before the release check:\n{j}"
    );
    // No unit ran: the service never started on this machine.
    assert!(!out.contains("assisted-service.service: started"), "{out}");
    eprintln!("measured: refused in {:?}", t.elapsed());
    keep(w);
}

// ---- PXE: add-nodes --pxe files booted by a live PXE machine --------------------------------
//
// add-nodes writes the PXE files with a base URL into a directory this test serves over HTTP in
// its network namespace; `run-node --pxe-dir` boots them as a live PXE machine (the script's
// kernel line as the machine's /proc/cmdline, read by the live initramfs's rules; the rootfs
// fetched from coreos.live.rootfs_url with curl and checked against the initramfs's hash list;
// Ignition only with ignition.firstboot: agent_day2_sim::noderun::livepxe), then the real
// assisted-service takes the host to `installing`.

use agent_day2_sim::noderun::livepxe;

/// Serves `root` over HTTP with the simulator's file server (GET and HEAD; 404 for what is not
/// there) on every address of the test's network namespace, where a machine reaches it at its
/// gateway 192.168.111.1; returns the port. The server runs until the test process ends.
fn serve_dir(root: &Path) -> u16 {
    let l = std::net::TcpListener::bind("0.0.0.0:0").unwrap();
    let port = l.local_addr().unwrap().port();
    l.set_nonblocking(true).unwrap();
    let root = root.to_path_buf();
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async move {
            let l = tokio::net::TcpListener::from_std(l).unwrap();
            if let Err(e) = agent_day2_sim::files::serve_files(l, root).await {
                eprintln!("PXE file server: {e}");
            }
        });
    });
    port
}

/// PXE files of a seeded cluster, and the ISO of the same cluster and hosts.
struct PxeFiles {
    c: TestCluster,
    w: Work,
    /// The node ISO add-nodes wrote first (the PXE run then replaced its batch).
    iso: PathBuf,
    /// `boot-artifacts/` of `add-nodes --pxe`, served over HTTP.
    dir: PathBuf,
    /// The base URL given to add-nodes (`http://192.168.111.1:<port>/boot-artifacts`).
    base_url: String,
    /// The script's kernel line after the kernel URL: the command line iPXE hands the kernel.
    kargs: String,
}

/// add-nodes of `hosts` on a cluster of `scenario`: the ISO, then `--pxe` with
/// `--boot-artifacts-base-url` into a directory served over HTTP (the same hosts: the second
/// run replaces the first batch).
fn pxe_files_for(scenario: &str, hosts: &[String]) -> PxeFiles {
    real_bin();
    let w = Work::new();
    agent_day2_sim::harness::enter_netns().expect("a network namespace (root)");
    let c = TestCluster::start(scenario).unwrap();
    seed_release(&c, &w, &["x86_64"]);
    let nc = w.write("nodes-config.yaml", &nodes_config(hosts));
    let nc = nc.to_str().unwrap();
    let out = w.out();
    let o = plugin(
        &c,
        &w,
        &["add-nodes", "--nodes-config", nc, "--dir", out.to_str().unwrap()],
    );
    assert_eq!(o.status.code(), Some(0), "add-nodes (ISO): {}", text(&o));
    let srv = w.path("srv");
    std::fs::create_dir_all(&srv).unwrap();
    let base_url = format!("http://192.168.111.1:{}/boot-artifacts", serve_dir(&srv));
    let o = plugin(
        &c,
        &w,
        &[
            "add-nodes",
            "--nodes-config",
            nc,
            "--dir",
            srv.to_str().unwrap(),
            "--pxe",
            "--boot-artifacts-base-url",
            &base_url,
        ],
    );
    assert_eq!(o.status.code(), Some(0), "add-nodes --pxe: {}", text(&o));
    let dir = srv.join("boot-artifacts");
    let script = std::fs::read_to_string(dir.join("node.x86_64.ipxe")).unwrap();
    eprintln!("node.x86_64.ipxe:\n{script}");
    let kernel = script
        .lines()
        .find(|l| l.starts_with("kernel "))
        .expect("a kernel line");
    let kargs = kernel.split_whitespace().skip(2).collect::<Vec<_>>().join(" ");
    PxeFiles {
        c,
        iso: out.join("node.x86_64.iso"),
        w,
        dir,
        base_url,
        kargs,
    }
}

/// The PXE set as run-node reads it (script, initrd, config.ign).
fn pxe_loaded(dir: &Path) -> livepxe::Loaded {
    livepxe::load(dir)
        .unwrap_or_else(|(code, lines)| panic!("run-node would refuse it ({code}): {lines:?}"))
        .expect("an iPXE script in the directory")
}

/// Values that differ from one add-nodes run to the next (tokens, InfraEnv ID): PXE → ISO.
fn per_run_values(iso: &sim_ignition::Config, pxe: &sim_ignition::Config) -> Vec<(String, String)> {
    const SVC: &str = "/usr/local/share/assisted-service/assisted-service.env";
    let (a0, u0, w0) = tokens(iso);
    let (a1, u1, w1) = tokens(pxe);
    let i0 = env_of(iso, SVC, "INFRA_ENV_ID").expect("INFRA_ENV_ID");
    let i1 = env_of(pxe, SVC, "INFRA_ENV_ID").expect("INFRA_ENV_ID");
    vec![(a1, a0), (u1, u0), (w1, w0), (i1, i0)]
}

/// Where the PXE initrd's Ignition differs from the ISO's once `per_run` values are replaced:
/// every file (decoded contents), unit and SSH key, and the rest of the JSON (modes,
/// directories, users) with the file and unit contents left out. One line each.
fn ignition_differences(iso_raw: &[u8], pxe_raw: &[u8], per_run: &[(String, String)]) -> Vec<String> {
    let norm = |t: &str| -> String {
        let mut t = t.to_string();
        for (p, i) in per_run {
            t = t.replace(p.as_str(), i);
        }
        t
    };
    let first_diff = |a: &str, b: &str| -> String {
        let (la, lb): (Vec<&str>, Vec<&str>) = (a.lines().collect(), b.lines().collect());
        let i = la.iter().zip(&lb).take_while(|(x, y)| x == y).count();
        let cut = |s: Option<&&str>| {
            s.map(|s| s.chars().take(160).collect::<String>())
                .unwrap_or_default()
        };
        format!(
            "line {}: ISO {:?} / PXE {:?}",
            i + 1,
            cut(la.get(i)),
            cut(lb.get(i))
        )
    };
    let iso = sim_ignition::parse(iso_raw).unwrap();
    let pxe = sim_ignition::parse(pxe_raw).unwrap();
    let mut out = Vec::new();
    let paths: std::collections::BTreeSet<&String> = iso.files.keys().chain(pxe.files.keys()).collect();
    for p in paths {
        match (iso.files.get(p), pxe.files.get(p)) {
            (Some(a), Some(b)) => {
                let (a, b) = (String::from_utf8_lossy(a), norm(&String::from_utf8_lossy(b)));
                if a != b {
                    out.push(format!("{p}: {}", first_diff(&a, &b)));
                }
            }
            (a, _) => out.push(format!(
                "{p}: only in the {}",
                if a.is_some() { "ISO" } else { "PXE initrd" }
            )),
        }
    }
    let names: std::collections::BTreeSet<&String> = iso.units.keys().chain(pxe.units.keys()).collect();
    for n in names {
        match (iso.units.get(n), pxe.units.get(n)) {
            (Some(a), Some(b)) => {
                if (a.enabled, a.mask) != (b.enabled, b.mask) || a.text != norm(&b.text) {
                    out.push(format!("unit {n}: {}", first_diff(&a.text, &norm(&b.text))));
                }
            }
            (a, _) => out.push(format!(
                "unit {n}: only in the {}",
                if a.is_some() { "ISO" } else { "PXE initrd" }
            )),
        }
    }
    if iso.ssh_keys != pxe.ssh_keys {
        out.push(format!(
            "SSH keys: ISO {:?} / PXE {:?}",
            iso.ssh_keys, pxe.ssh_keys
        ));
    }
    let skeleton = |raw: &[u8]| -> String {
        let mut v: Value = serde_json::from_slice(raw).unwrap();
        for f in v
            .pointer_mut("/storage/files")
            .and_then(|f| f.as_array_mut())
            .into_iter()
            .flatten()
        {
            if let Some(o) = f.as_object_mut() {
                o.remove("contents");
                o.remove("append");
            }
        }
        for u in v
            .pointer_mut("/systemd/units")
            .and_then(|f| f.as_array_mut())
            .into_iter()
            .flatten()
        {
            if let Some(o) = u.as_object_mut() {
                o.remove("contents");
                o.remove("dropins");
            }
        }
        serde_json::to_string_pretty(&v).unwrap()
    };
    let (a, b) = (skeleton(iso_raw), norm(&skeleton(pxe_raw)));
    if a != b {
        out.push(format!("the JSON apart from contents: {}", first_diff(&a, &b)));
    }
    out
}

/// A booted PXE set: the machines, the files' facts.
struct PxeBooted {
    b: Booted,
    base_url: String,
    kargs: String,
}

/// `run-node --pxe-dir` of the files on `machines`, waiting until every machine's add-node
/// unit succeeded.
fn boot_pxe(p: PxeFiles, machines: &[(&str, &str, &str)]) -> PxeBooted {
    let PxeFiles {
        c,
        w,
        dir,
        base_url,
        kargs,
        ..
    } = p;
    let l = pxe_loaded(&dir);
    let (agent, user, watcher) = tokens(&l.cfg);
    let infra = env_of(
        &l.cfg,
        "/usr/local/share/assisted-service/assisted-service.env",
        "INFRA_ENV_ID",
    )
    .expect("INFRA_ENV_ID in assisted-service.env");
    let t = Instant::now();
    let mut node = run_node(&w, &dir, machines, &[]);
    let _keep = KeepOnPanic(w.path(""));
    let ips: Vec<&str> = machines.iter().map(|m| m.2).collect();
    let validations = Validations::watch(&ips, &infra, &user);
    node.wait_goal(machines.len(), Duration::from_secs(480));
    let took = t.elapsed();
    eprintln!(
        "run-node --pxe-dir: {} machine(s) at their goal after {took:?}",
        machines.len()
    );
    assert!(
        node.text()
            .contains("assisted-service: github.com/openshift/assisted-service@"),
        "{}",
        node.text()
    );
    PxeBooted {
        b: Booted {
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
        },
        base_url,
        kargs,
    }
}

impl PxeBooted {
    /// What the live machine `m` read from its kernel command line and did before Ignition:
    /// its /proc/cmdline is the script's kernel line; ignition-generator found
    /// `ignition.firstboot` and platform metal; coreos-livepxe-rootfs fetched
    /// `coreos.live.rootfs_url` over HTTP, verified it and unpacked it; the kernel's FIPS mode
    /// is `fips`.
    fn assert_live_boot(&self, m: (&str, &str, &str), fips: bool) {
        let b = &self.b;
        let text = b.node.text();
        assert_eq!(
            machine_file(b, m.1, "/proc/cmdline"),
            Some(format!("{}\n", self.kargs)),
            "the machine's /proc/cmdline is the script's kernel line"
        );
        assert!(
            text.contains(
                "ignition-generator: ignition.firstboot: ignition-complete.target queued (PLATFORM_ID=metal)"
            ),
            "{text}"
        );
        let journal = std::fs::read_to_string(
            b.w.path("run")
                .join(format!("machine-{}", m.1.replace(':', "")))
                .join("journal/coreos-livepxe-rootfs.service.log"),
        )
        .unwrap();
        let url = format!("{}/node.x86_64-rootfs.img", self.base_url);
        assert!(
            journal.contains(&format!("Fetching rootfs image from {url}...")),
            "{journal}"
        );
        assert!(
            journal.contains("verified against /etc/coreos-live-want-rootfs"),
            "{journal}"
        );
        assert_eq!(
            machine_file(b, m.1, "/run/agent-day2-sim/initramfs/etc/coreos-live-rootfs"),
            Some(format!("{}\n", agent_day2_sim::baseiso::RHCOS_RELEASE)),
            "the fetched rootfs is unpacked in the initramfs"
        );
        assert_eq!(
            machine_file(b, m.1, livepxe::FIPS_ENABLED).as_deref(),
            Some(if fips { "1\n" } else { "0\n" }),
            "fips_enabled"
        );
        assert_eq!(text.contains("kernel: fips mode: enabled"), fips, "{text}");
    }
}

#[test]
#[cfg_attr(
    not(real_assisted),
    ignore = "needs the real assisted-service: scripts/real-components.sh assisted, then AGENT_DAY2_REAL_ASSISTED=1 (scripts/test.sh does both)"
)]
fn pxe_host_reaches_installing_on_the_real_service() {
    let p = pxe_files_for("name: ostest\n", &[dhcp_host(W0)]);
    // The initrd carries the Ignition the ISO of the same cluster and hosts carries (the
    // tokens and the InfraEnv ID are made anew by every add-nodes run).
    let iso_raw = {
        let mut f = std::fs::File::open(&p.iso).unwrap();
        agent_day2_sim::boot::embed::read_ignition(&mut f).unwrap().0
    };
    let l = pxe_loaded(&p.dir);
    let per_run = per_run_values(&sim_ignition::parse(&iso_raw).unwrap(), &l.cfg);
    let d = ignition_differences(&iso_raw, &l.raw, &per_run);
    assert!(
        d.is_empty(),
        "the PXE initrd's Ignition differs from the ISO's:\n{}",
        d.join("\n")
    );
    // The kernel command line the script gives.
    let words: Vec<&str> = p.kargs.split_whitespace().collect();
    let rootfs_url = format!("coreos.live.rootfs_url={}/node.x86_64-rootfs.img", p.base_url);
    for want in [
        "initrd=initrd",
        "ignition.firstboot",
        "ignition.platform.id=metal",
        &rootfs_url,
    ] {
        assert!(words.contains(&want), "{want} not in {}", p.kargs);
    }
    assert!(
        !words
            .iter()
            .any(|w| w.starts_with("fips") || w.starts_with("coreos.liveiso")),
        "{}",
        p.kargs
    );
    let pb = boot_pxe(p, &[W0]);
    pb.assert_live_boot(W0, false);
    pb.b.installing_host(W0);
    eprintln!("measured: PXE host to installing {:?}", pb.b.took);
    pb.b.finish();
}

#[test]
#[cfg_attr(
    not(real_assisted),
    ignore = "needs the real assisted-service: scripts/real-components.sh assisted, then AGENT_DAY2_REAL_ASSISTED=1 (scripts/test.sh does both)"
)]
fn pxe_host_of_a_fips_cluster_boots_in_fips_mode_and_reaches_installing() {
    let p = pxe_files_for("name: ostest\nfips: true\n", &[dhcp_host(W0)]);
    assert!(
        p.kargs.split_whitespace().any(|w| w == "fips=1"),
        "a FIPS cluster's script has fips=1: {}",
        p.kargs
    );
    let pb = boot_pxe(p, &[W0]);
    pb.assert_live_boot(W0, true);
    pb.b.installing_host(W0);
    eprintln!("measured: FIPS PXE host to installing {:?}", pb.b.took);
    pb.b.finish();
}

/// `run-node --pxe-dir` of `p` on `m` until it exits by itself: (exit code, output).
fn run_pxe_to_exit(p: &PxeFiles, m: (&str, &str, &str)) -> (Option<i32>, String) {
    let mut node = run_node(&p.w, &p.dir, &[m], &[]);
    let t = Instant::now();
    loop {
        if let Ok(Some(st)) = node.kid.0.try_wait() {
            std::thread::sleep(Duration::from_millis(300));
            return (st.code(), node.text());
        }
        if t.elapsed() > Duration::from_secs(120) {
            panic!("run-node did not stop in 120 s:\n{}", node.text());
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

#[test]
#[cfg_attr(
    not(real_assisted),
    ignore = "needs the real assisted-service: scripts/real-components.sh assisted, then AGENT_DAY2_REAL_ASSISTED=1 (scripts/test.sh does both)"
)]
fn pxe_boot_without_ignition_firstboot_or_its_rootfs_stops_as_a_live_system_does() {
    let p = pxe_files_for("name: ostest\n", &[dhcp_host(W0)]);
    let _keep = KeepOnPanic(p.w.path(""));
    let script_path = p.dir.join("node.x86_64.ipxe");
    let script = std::fs::read_to_string(&script_path).unwrap();
    // Without ignition.firstboot the rootfs is still fetched, but Ignition does not run: the
    // node's units never exist, so add-node cannot start.
    assert!(script.contains(" ignition.firstboot "), "{script}");
    std::fs::write(&script_path, script.replace(" ignition.firstboot ", " ")).unwrap();
    let (code, text) = run_pxe_to_exit(&p, W0);
    assert_eq!(code, Some(6), "{text}");
    for want in [
        "ignition.firstboot is not set: ignition-subsequent.target queued, Ignition does not run",
        "coreos-livepxe-rootfs.service: finished",
        "the goal unit agent-add-node.service is not in the boot transaction",
    ] {
        assert!(text.contains(want), "{want:?} not in:\n{text}");
    }
    // The rootfs not on the server: coreos-livepxe-rootfs's HEAD --fail gets a 404 and the boot
    // stops before any unit of the node runs.
    std::fs::write(&script_path, &script).unwrap();
    std::fs::rename(p.dir.join("node.x86_64-rootfs.img"), p.w.path("rootfs.img")).unwrap();
    let (code, text) = run_pxe_to_exit(&p, W0);
    assert_eq!(code, Some(6), "{text}");
    for want in [
        "coreos-livepxe-rootfs.service: | Couldn't query the server for the rootfs specified by:",
        "404",
        "OnFailure=emergency.target",
    ] {
        assert!(text.contains(want), "{want:?} not in:\n{text}");
    }
    assert!(!text.contains("assisted-service.service: started"), "{text}");
    // A rootfs of another build at the URL: refused by the hash list in the initramfs.
    std::fs::write(p.dir.join("node.x86_64-rootfs.img"), b"070701 another build").unwrap();
    let (code, text) = run_pxe_to_exit(&p, W0);
    assert_eq!(code, Some(6), "{text}");
    assert!(
        text.contains("Couldn't fetch, verify, and unpack image specified by:")
            && text.contains("hash mismatch at offset 0"),
        "{text}"
    );
    drop(p);
}

#[test]
#[cfg_attr(
    not(real_assisted),
    ignore = "needs the real assisted-service: scripts/real-components.sh assisted, then AGENT_DAY2_REAL_ASSISTED=1 (scripts/test.sh does both)"
)]
fn appliance_disk_image_host_is_refused_at_install_by_the_real_service() {
    // Booted from the appliance's disk, the host reports a persistent boot device; the real
    // service then wants a release image for the imported cluster (which has no OpenShift
    // version: the client's importCluster sends none) or the CoreOS image of the worker
    // Ignition's encapsulated MachineConfig (which the discovery agent's API VIP check filters
    // out), and refuses the install (inventory.go validateReleaseImageForDay2HostInstall).
    real_bin();
    let w = Work::new();
    let (_c, iso, img) = appliance_for(&w, &[dhcp_host(W0)]);
    let mut node = run_node_appliance(&w, &iso, &img, &[W0], &[]);
    let _keep = KeepOnPanic(w.path(""));
    let t = Instant::now();
    let status = loop {
        if let Ok(Some(st)) = node.kid.0.try_wait() {
            break st;
        }
        assert!(
            t.elapsed() < Duration::from_secs(300),
            "run-node still runs after 300 s:\n{}",
            node.text()
        );
        std::thread::sleep(Duration::from_millis(250));
    };
    std::thread::sleep(Duration::from_millis(300));
    let out = node.text();
    assert!(out.contains("Successfully copied contents of config.gz"), "{out}");
    assert_eq!(status.code(), Some(6), "{out}");
    assert!(
        out.contains("GOAL FAILED: agent-add-node.service failed"),
        "{out}"
    );
    assert!(
        out.contains("no release image found for host: invalid openshiftVersion ''"),
        "{out}"
    );
    eprintln!("measured: refused at install after {:?}", t.elapsed());
    keep(w);
}

#[test]
#[cfg_attr(
    not(all(real_assisted, real_agent)),
    ignore = "needs the real assisted-service and discovery agent: scripts/real-components.sh assisted, then agent (AGENT_DAY2_AGENT_SRC), then AGENT_DAY2_REAL_ASSISTED=1 AGENT_DAY2_REAL_AGENT=1 (scripts/test.sh does both)"
)]
fn a_root_device_hint_matching_no_disk_keeps_the_host_from_installing() {
    // The real discovery agent reports the machine's one disk (/dev/vda, read by its own
    // inventory from the machine's /sys/block and udev database); nodes-config asks for
    // /dev/sdz. Measured at the pinned commits: the real client finds no disk for the hint and
    // asks for `/dev/not-found-by-hints`; the real service refuses that update ("Requested
    // installation disk is not part of the host's valid disks") and keeps the host `known`
    // on its own choice of disk, so the host is not held `insufficient` by a validation.
    // What keeps it from being installed is the client: apply-host-config retries and never
    // finishes, so agent-add-node.service never starts.
    real_bin();
    let (h, mac, ip) = W0;
    let host = format!(
        "- hostname: {h}\n  rootDeviceHints:\n    deviceName: /dev/sdz\n  interfaces:\n  - name: eth0\n    macAddress: \"{mac}\"\n"
    );
    let w = Work::new();
    let (_c, iso) = iso_for("name: ostest\n", &w, &[host]);
    let cfg = iso_ignition(&iso);
    let (_, user, _) = tokens(&cfg);
    let infra = env_of(
        &cfg,
        "/usr/local/share/assisted-service/assisted-service.env",
        "INFRA_ENV_ID",
    )
    .unwrap();
    let node = run_node(&w, &iso, &[W0], &[]);
    let _keep = KeepOnPanic(w.path(""));
    let t = Instant::now();
    const REFUSED: &str = "Host worker-0 update refused: AssistedServiceError Code: 409 Href:  ID: 409 Kind: Error Reason: Requested installation disk is not part of the host's valid disks";
    let host = loop {
        assert!(
            !node.text().contains("GOAL reached"),
            "the host was installed although no disk matches its hint:\n{}",
            node.text()
        );
        let (code, body) = api(ip, &format!("infra-envs/{infra}/hosts"), "Authorization", &user);
        let hs = if code == 200 {
            serde_json::from_str::<Value>(&body).unwrap_or(Value::Null)
        } else {
            Value::Null
        };
        let applied = journal(&w, mac, "apply-host-config.service");
        // Refused twice (the client retries, the service refuses again), and the host known
        // on the service's own choice of disk.
        if applied.matches(REFUSED).count() >= 2 && hs[0]["status"] == "known" {
            break hs[0].clone();
        }
        assert!(
            t.elapsed() < Duration::from_secs(300),
            "no known host with the hint's disk refused twice in 300 s: hosts {hs:#}\napply-host-config journal:\n{applied}\n{}",
            node.text()
        );
        std::thread::sleep(Duration::from_millis(500));
    };
    let out = node.text();
    assert!(
        out.contains("discovery agent: github.com/openshift/assisted-installer-agent/"),
        "the real discovery agent ran (scripts/real-components.sh agent builds it):\n{out}"
    );
    // The real inventory's one disk, as the client saw it when it found no match.
    let applied = journal(&w, mac, "apply-host-config.service");
    assert!(
        applied.contains("No disk found matching root device hints"),
        "{applied}"
    );
    assert!(
        applied.contains(
            "Eligible disks: [Disk - path: /dev/vda, by-path: /dev/disk/by-path/pci-0000:04:00.0, wwn: ]"
        ),
        "{applied}"
    );
    assert!(
        !out.contains("apply-host-config.service: finished"),
        "apply-host-config must not finish:\n{out}"
    );
    assert!(
        !out.contains("agent-add-node.service: starting"),
        "agent-add-node.service must not start:\n{out}"
    );
    let inv: Value = serde_json::from_str(host["inventory"].as_str().unwrap()).unwrap();
    let disks: Vec<&str> = inv["disks"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|d| d["path"].as_str())
        .collect();
    assert_eq!(disks, ["/dev/vda"], "{:#}", inv["disks"]);
    // Not the hint's disk: the service's own choice.
    assert_eq!(host["installation_disk_path"], "/dev/vda", "{host:#}");
    eprintln!(
        "the real service: host {} ({}), installation disk {}",
        host["status"], host["status_info"], host["installation_disk_path"]
    );
    eprintln!(
        "measured: known, the hint's disk refused twice, after {:?}",
        t.elapsed()
    );
    drop(node);
    keep(w);
}
