//! `monitor` end to end: the built plugin against the simulated cluster (agent-day2-sim) in a
//! private network namespace. add-nodes writes the image and the batch record, `agent-day2-sim
//! boot` boots simulated machines from it (their local assisted-service on IP:8090, then a
//! kubelet), and `monitor` follows them. Fails (with the reason) where no namespace can be made.
//!
//! Also, without a namespace: the client's requests and the simulator's answers checked against
//! assisted-service's `swagger.yaml` (from its source tree, `agent_day2_sim::upstream`;
//! `#[ignore]`d where that is not there).

use std::collections::BTreeMap;
use std::io::Read;
use std::path::PathBuf;
use std::process::{Command, Output, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::support::cluster;
use crate::support::tokens;

use agent_day2_sim::harness::TestCluster;
use cluster::*;
use serde_json::{json, Value};

/// A simulated cluster whose release payload add-nodes reads from the plugin's per-digest cache
/// ([`seed_release`], x86_64), and a work directory.
struct Env {
    c: TestCluster,
    w: Work,
}

impl Env {
    fn new() -> Env {
        Env::with_scenario("")
    }
    fn with_scenario(scenario: &str) -> Env {
        let c = TestCluster::start(scenario).unwrap();
        let w = Work::new();
        seed_release(&c, &w, &["x86_64"]);
        Env { c, w }
    }
    fn path(&self, n: &str) -> PathBuf {
        self.w.path(n)
    }
    fn cmd(&self, args: &[&str]) -> Command {
        plugin_cmd(&self.c, &self.w, args)
    }
    fn plugin(&self, args: &[&str]) -> Output {
        self.cmd(args).output().unwrap()
    }
    fn kubectl_json(&self, args: &[&str]) -> Value {
        kubectl_json(&self.c, args)
    }

    /// `monitor args --poll-interval 100ms --timeout timeout` to the end.
    fn monitor(&self, args: &[&str], timeout: &str) -> Output {
        let mut a = vec!["monitor"];
        a.extend_from_slice(args);
        a.extend(["--poll-interval", "100ms", "--timeout", timeout]);
        self.plugin(&a)
    }

    /// add-nodes for `hosts` (nodes-config text), extra flags; returns the report.
    fn add_nodes(&self, hosts: &[String], extra: &[&str]) -> Value {
        let nc = self.w.write("nodes-config.yaml", &nodes_config(hosts));
        let out = self.w.out();
        let mut args = vec![
            "add-nodes",
            "--nodes-config",
            nc.to_str().unwrap(),
            "--dir",
            out.to_str().unwrap(),
            "-o",
            "json",
            "--force",
        ];
        args.extend_from_slice(extra);
        let o = self.plugin(&args);
        assert_eq!(
            o.status.code(),
            Some(0),
            "{}\nsim log:\n{}",
            text(&o),
            self.c.log()
        );
        serde_json::from_slice(&o.stdout).unwrap()
    }

    fn batch_records(&self) -> Vec<Value> {
        batch_records(&self.c)
    }

    /// Starts `agent-day2-sim boot` of `image` for `nodes` (MAC=IP) with extra flags; output
    /// goes to a log file.
    fn boot(&self, image: &[&str], nodes: &[(&str, &str, &str)], extra: &[&str]) -> Boot {
        let log = self.path(&format!("boot-{}.log", nodes.first().map(|n| n.0).unwrap_or("x")));
        let mut cmd = boot_cmd(&self.c, image, nodes, 300, "300s");
        cmd.args(extra)
            .stdout(std::fs::File::create(&log).unwrap())
            .stderr(std::fs::File::create(log.with_extension("err")).unwrap());
        Boot {
            _child: Kid(cmd.spawn().unwrap()),
            log,
        }
    }

    /// Starts `args` (a monitor command line, output captured), then after `delay_ms` boots
    /// `image` for `nodes`; returns monitor's output and the boot (for its log).
    fn monitor_while_booting(
        &self,
        args: &[&str],
        delay_ms: u64,
        image: &[&str],
        nodes: &[(&str, &str, &str)],
    ) -> (Output, Boot) {
        self.monitor_while_booting_with(args, delay_ms, image, nodes, &[])
    }

    /// As [`Env::monitor_while_booting`], with `extra` flags for the boot (faults).
    fn monitor_while_booting_with(
        &self,
        args: &[&str],
        delay_ms: u64,
        image: &[&str],
        nodes: &[(&str, &str, &str)],
        extra: &[&str],
    ) -> (Output, Boot) {
        let mon = self
            .cmd(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        std::thread::sleep(Duration::from_millis(delay_ms));
        let boot = self.boot(image, nodes, extra);
        (mon.wait_with_output().unwrap(), boot)
    }
}

/// A running `agent-day2-sim boot` and its log file (stdout; stderr beside it as .err).
struct Boot {
    _child: Kid,
    log: PathBuf,
}
impl Boot {
    fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
            + &std::fs::read_to_string(self.log.with_extension("err")).unwrap_or_default()
    }
}

/// JSON events of `-o json` stdout (every line must parse).
fn events(o: &Output) -> Vec<Value> {
    String::from_utf8_lossy(&o.stdout)
        .lines()
        .map(|l| {
            serde_json::from_str(l).unwrap_or_else(|e| panic!("not a JSON event ({e}): {l}\n{}", text(o)))
        })
        .collect()
}

fn stages_of(evs: &[Value], node: &str) -> Vec<String> {
    evs.iter()
        .filter(|e| e["event"] == "stage" && e["node"] == node)
        .map(|e| e["stage"].as_str().unwrap().to_string())
        .fold(Vec::new(), |mut v, s| {
            if v.last() != Some(&s) {
                v.push(s);
            }
            v
        })
}

/// Approves, in a side thread, every pending CSR whose signer is `signer` until stopped.
fn approve_by_hand(env: &Env, signer: &'static str) -> (Arc<AtomicBool>, std::thread::JoinHandle<usize>) {
    let stop = Arc::new(AtomicBool::new(false));
    let s = stop.clone();
    let kc = env.c.kubeconfig.clone();
    let cache = env.c.dir.join("kubecache");
    let h = std::thread::spawn(move || {
        let mut n = 0;
        let kubectl = |args: &[&str]| {
            Command::new("kubectl")
                .args(args)
                .env("KUBECONFIG", &kc)
                .env("KUBECACHEDIR", &cache)
                .output()
                .unwrap()
        };
        while !s.load(Ordering::SeqCst) {
            let o = kubectl(&["get", "csr", "-o", "json"]);
            if let Ok(l) = serde_json::from_slice::<Value>(&o.stdout) {
                for c in l["items"].as_array().into_iter().flatten() {
                    let pending = c["status"]["conditions"].as_array().is_none_or(|c| c.is_empty());
                    if pending
                        && c["spec"]["signerName"] == signer
                        && kubectl(&["certificate", "approve", c["metadata"]["name"].as_str().unwrap()])
                            .status
                            .success()
                    {
                        n += 1;
                    }
                }
            }
            std::thread::sleep(Duration::from_millis(200));
        }
        n
    });
    (stop, h)
}

// ------------------------------------------------------------------------------------------

/// Two nodes (one static, one DHCP followed through --ip-addresses) go all the way under
/// `monitor --approve --yes`; -o json events parsed; the DHCP address is recorded on the batch;
/// the batch's labels are applied.
#[test]
fn two_nodes_reach_ready_with_serving_certificates_under_monitor_approve() {
    require_netns!();
    let env = Env::new();
    let r = env.add_nodes(
        &[static_host(W0, 24), dhcp_host(W1)],
        &["--node-labels", "zone=a"],
    );
    let iso = r["files"][0]["path"].as_str().unwrap().to_string();
    let before = env.batch_records();
    assert_eq!(before[0]["hosts"][1]["ipSource"], "unknown");

    let ips = format!("{},{}", W0.2, W1.2);
    let (o, boot) = env.monitor_while_booting(
        &[
            "monitor",
            "--approve",
            "--yes",
            "--ip-addresses",
            &ips,
            "-o",
            "json",
            "--poll-interval",
            "100ms",
            "--timeout",
            "180s",
        ],
        1500,
        &["--iso", &iso],
        &[W0, W1],
    );
    assert_eq!(o.status.code(), Some(0), "{}\nboot:\n{}", text(&o), boot.log());
    let evs = events(&o);
    for (h, _, ip) in [W0, W1] {
        let st = stages_of(&evs, h);
        for want in ["installing", "rebooting", "done"] {
            assert!(st.iter().any(|s| s == want), "{h}: {want} missing in {st:?}");
        }
        // Stages only move forward. Once the Node exists, Ready and the serving certificate
        // may come in either order (two watches, and the kubelet does not wait for the
        // certificate), so joined / ready / serving-csr-pending share a rank.
        let rank = |s: &str| match s {
            "waiting-for-boot" => 0,
            "api-reachable" => 1,
            "registered" => 2,
            "validations" => 3,
            "installing" => 4,
            "rebooting" => 5,
            "client-csr-pending" => 6,
            "client-approved" => 7,
            "joined" | "ready" | "serving-csr-pending" => 8,
            "done" => 9,
            other => panic!("unexpected stage {other}"),
        };
        let idx: Vec<usize> = st.iter().map(|s| rank(s)).collect();
        assert!(idx.windows(2).all(|w| w[0] <= w[1]), "{h}: {st:?}");
        assert!(
            evs.iter()
                .any(|e| e["event"] == "stage" && e["node"] == h && e["ip"] == ip),
            "{h} with its address"
        );
        assert!(
            evs.iter().any(|e| e["node"] == h
                && e["message"]
                    .as_str()
                    .unwrap_or("")
                    .starts_with("approved serving CSR")),
            "{h}: serving CSR approved by monitor"
        );
        let n = env.kubectl_json(&["get", "node", h, "-o", "json"]);
        assert_eq!(
            n["metadata"]["labels"]["zone"], "a",
            "batch labels applied to {h}"
        );
    }
    // Each client approval: after the stage that says its CSR is pending, and with the warning
    // approve prints for every client approval.
    for (h, _, _) in [W0, W1] {
        let approved = evs
            .iter()
            .position(|e| {
                e["node"] == h
                    && e["message"]
                        .as_str()
                        .unwrap_or("")
                        .starts_with("approved client CSR ")
            })
            .unwrap_or_else(|| panic!("{h}: client CSR approved by monitor: {}", text(&o)));
        let csr = evs[approved]["message"].as_str().unwrap()["approved client CSR ".len()..].to_string();
        let pending = evs
            .iter()
            .position(|e| {
                e["event"] == "stage"
                    && e["node"] == h
                    && e["message"] == format!("client CSR {csr} pending approval").as_str()
            })
            .unwrap_or_else(|| panic!("{h}: stage client-csr-pending for {csr}: {}", text(&o)));
        assert!(
            pending < approved,
            "{h}: pending at {pending}, approved at {approved}"
        );
        assert!(
            evs[approved + 1..].iter().any(|e| e["event"] == "warning"
                && e["node"] == h
                && e["message"].as_str().unwrap().starts_with(&format!(
                    "approved client CSR {csr} for {h}: approve cannot tell the real machine"
                ))),
            "{h}: the client-approval warning: {}",
            text(&o)
        );
    }
    // Installing events carry percentages.
    assert!(evs
        .iter()
        .any(|e| e["stage"] == "installing" && e["percent"].as_i64().is_some_and(|p| p > 0)));
    let summary = evs.last().unwrap();
    assert_eq!(summary["event"], "summary");
    assert_eq!(summary["exitCode"], 0);
    assert!(evs
        .iter()
        .any(|e| e["node"] == W1.0 && e["message"].as_str().unwrap().contains("recorded on batch")));
    let after = env.batch_records();
    assert_eq!(after[0]["hosts"][1]["ips"], json!([W1.2]));
    assert_eq!(after[0]["hosts"][1]["ipSource"], "monitor");
    let approvals = after[0]["approvals"].as_array().unwrap();
    assert_eq!(
        approvals.len(),
        4,
        "a client and a serving approval per node: {approvals:?}"
    );
}

/// Either tool's tokens: an ISO made while Secret openshift-config/agent-auth-token holds
/// tokens written the way `oc adm node-image` writes them carries those, and monitor follows
/// the node with them to Ready (the simulated node API judges them with the image's key, as
/// assisted-service's agent-installer-local auth does).
#[test]
fn monitor_follows_a_node_with_the_tokens_oc_adm_node_image_wrote() {
    require_netns!();
    let env = Env::new();
    let theirs =
        tokens::oc_adm_node_image_secret(&env.c, Duration::from_secs(40 * 3600), tokens::ALL_TOKEN_KEYS);
    let r = env.add_nodes(&[static_host(W0, 24)], &[]);
    assert_eq!(r["token"]["reused"], true, "{r}");
    let iso = r["files"][0]["path"].as_str().unwrap().to_string();
    let (o, boot) = env.monitor_while_booting(
        &[
            "monitor",
            "--approve",
            "--yes",
            "-o",
            "json",
            "--poll-interval",
            "100ms",
            "--timeout",
            "180s",
        ],
        1000,
        &["--iso", &iso],
        &[W0],
    );
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}
boot:
{}",
        text(&o),
        boot.log()
    );
    let st = stages_of(&events(&o), W0.0);
    for want in ["registered", "installing", "done"] {
        assert!(st.iter().any(|s| s == want), "{want} missing in {st:?}");
    }
    // The watcher token monitor used is oc adm node-image's (the ISO's EC key verifies it).
    let s = env.kubectl_json(&[
        "-n",
        "openshift-config",
        "get",
        "secret",
        "agent-auth-token",
        "-o",
        "json",
    ]);
    let watcher = s["data"]["watcherAuthToken"].as_str().unwrap();
    use base64::Engine;
    let watcher = base64::engine::general_purpose::STANDARD.decode(watcher).unwrap();
    assert_eq!(String::from_utf8(watcher).unwrap(), theirs[2]);
}

/// A failing validation (message shown, exit 5), a failed install (exit 6, logs gathered), a
/// node never booted (exit 5), a Ready node whose serving CSR stays pending (exit 7), and all of
/// them at once from the batch record (6: a failure outranks a timeout and pending CSRs).
#[test]
fn failures_timeouts_and_pending_csrs_give_their_exit_codes() {
    require_netns!();
    let env = Env::new();
    let val = ("w-val", "52:54:00:aa:00:40", "192.168.111.40");
    let bad = ("w-bad", "52:54:00:aa:00:41", "192.168.111.41");
    let never = ("w-never", "52:54:00:aa:00:42", "192.168.111.42");
    let ok = ("w-ok", "52:54:00:aa:00:43", "192.168.111.43");
    let hosts: Vec<String> = [val, bad, never, ok]
        .iter()
        .map(|&n| static_host(n, 24))
        .collect();
    let r = env.add_nodes(&hosts, &[]);
    let iso = r["files"][0]["path"].as_str().unwrap().to_string();
    let _boot = env.boot(
        &["--iso", &iso],
        &[val, bad, ok],
        &["--fail-validation", "w-val:ntp-synced", "--fail-install", "w-bad"],
    );
    // w-ok: only its client CSR is approved (by hand), so it goes Ready with the serving CSR pending.
    let (stop, approver) = approve_by_hand(&env, "kubernetes.io/kube-apiserver-client-kubelet");

    // Install failure: 6, with the reason, and the logs gathered.
    let logs = env.path("logs");
    let o = env.monitor(
        &[
            "--node",
            &format!("w-bad={}", bad.2),
            "--gather",
            logs.to_str().unwrap(),
        ],
        "60s",
    );
    assert_eq!(o.status.code(), Some(6), "{}", text(&o));
    let out = String::from_utf8_lossy(&o.stdout);
    eprintln!("monitor of a failed install:\n{}", text(&o));
    assert!(
        out.contains("installation failed") && out.contains("failed to write image to disk"),
        "{}",
        text(&o)
    );
    assert!(out.contains("last event (error)"), "{}", text(&o));
    let saved = logs.join("w-bad-logs.tar.gz");
    let mut tgz = Vec::new();
    std::fs::File::open(&saved)
        .unwrap_or_else(|e| panic!("{}: {e}\n{}", saved.display(), text(&o)))
        .read_to_end(&mut tgz)
        .unwrap();
    let mut names = String::new();
    let mut ar = tar::Archive::new(flate2::read::GzDecoder::new(&tgz[..]));
    for e in ar.entries().unwrap() {
        let mut e = e.unwrap();
        let p = e.path().unwrap().display().to_string();
        let mut body = String::new();
        e.read_to_string(&mut body).unwrap();
        names.push_str(&format!("{p}\n{body}"));
    }
    assert!(
        names.contains("w-bad/events.log") && names.contains("failed to write image"),
        "{names}"
    );
    assert!(out.contains(&saved.display().to_string()), "{}", text(&o));

    // A failing validation: its message, then 5 at the timeout.
    let o = env.monitor(&["--ip-addresses", val.2, "-o", "json"], "4s");
    assert_eq!(o.status.code(), Some(5), "{}", text(&o));
    let evs = events(&o);
    let v = evs
        .iter()
        .find(|e| e["stage"] == "validations" && e["validations"].is_array())
        .unwrap_or_else(|| panic!("{}", text(&o)));
    assert_eq!(v["validations"][0]["id"], "ntp-synced");
    assert_eq!(
        v["validations"][0]["message"],
        "Host couldn't synchronize with any NTP server"
    );
    assert!(v["message"].as_str().unwrap().contains("ntp-synced"));

    // Never booted: says so, 5.
    let o = env.monitor(&["--ip-addresses", never.2], "2s");
    assert_eq!(o.status.code(), Some(5), "{}", text(&o));
    assert!(
        String::from_utf8_lossy(&o.stdout)
            .contains("w-never 192.168.111.42: waiting-for-boot - not booted yet"),
        "{}",
        text(&o)
    );
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("timed out after 2s"),
        "{}",
        text(&o)
    );

    // Ready, serving CSR pending: 7 with the hint.
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let l = env.kubectl_json(&["get", "csr", "-o", "json"]);
        let serving_pending = l["items"].as_array().unwrap().iter().any(|c| {
            c["spec"]["signerName"] == "kubernetes.io/kubelet-serving"
                && c["spec"]["username"] == "system:node:w-ok"
                && c["status"]["conditions"].is_null()
        });
        if serving_pending {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "w-ok never sent its serving CSR:\n{}",
            _boot.log()
        );
        std::thread::sleep(Duration::from_millis(300));
    }
    let o = env.plugin(&["monitor", "--node", &format!("w-ok={}", ok.2), "--timeout", "3s"]);
    assert_eq!(o.status.code(), Some(7), "{}", text(&o));
    eprintln!(
        "monitor of a Ready node with its serving CSR pending:\n{}",
        text(&o)
    );
    assert!(
        String::from_utf8_lossy(&o.stdout).contains("serving-csr-pending"),
        "{}",
        text(&o)
    );
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("run `oc agent-day2 approve`"),
        "{}",
        text(&o)
    );

    // An unknown batch is a clear error.
    let o = env.plugin(&["monitor", "--batch", "batch-nosuch"]);
    assert_fails(&o, 4, "\"batch-nosuch\" not found");
    // The whole batch (--batch, no anchors): 6, 5 and 7 apply; the failure, 6, wins (issue 22
    // item 5: "lowest wins" gave 5 and hid the failed install behind a timeout).
    let o = env.monitor(&["--batch", r["batch"].as_str().unwrap(), "-o", "json"], "4s");
    assert_eq!(o.status.code(), Some(6), "{}", text(&o));
    let evs = events(&o);
    let s = evs.last().unwrap();
    let codes: BTreeMap<String, i64> = s["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| {
            (
                n["node"].as_str().unwrap().to_string(),
                n["exitCode"].as_i64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        codes,
        BTreeMap::from([
            ("w-bad".into(), 6),
            ("w-never".into(), 5),
            ("w-ok".into(), 7),
            ("w-val".into(), 5)
        ]),
        "{s}"
    );
    assert_eq!(
        s["exitCode"], 6,
        "the JSON summary keeps the run's code in step: {s}"
    );
    stop.store(true, Ordering::SeqCst);
    assert!(approver.join().unwrap() >= 1);
}

/// A host whose live system goes away mid-install (power lost at "Writing image to disk", 50 %)
/// has not rebooted: monitor calls it failed (exit 6, not 5 after "rebooting"), names the last
/// stage it saw, and with --gather says why nothing could be saved (issue 22 item 4).
#[test]
fn a_host_lost_mid_install_is_a_failure_not_a_reboot() {
    require_netns!();
    let env = Env::new();
    let off = ("w-off", "52:54:00:aa:00:44", "192.168.111.44");
    let r = env.add_nodes(&[static_host(off, 24)], &[]);
    let iso = r["files"][0]["path"].as_str().unwrap().to_string();
    let logs = env.path("logs");
    let (o, boot) = env.monitor_while_booting_with(
        &[
            "monitor",
            "--poll-interval",
            "100ms",
            "--timeout",
            "90s",
            "--gather",
            logs.to_str().unwrap(),
            "-o",
            "json",
        ],
        300,
        &["--iso", &iso],
        &[off],
        &["--power-off", "w-off"],
    );
    let all = format!("{}\nboot:\n{}", text(&o), boot.log());
    assert_eq!(o.status.code(), Some(6), "{all}");
    assert!(boot.log().contains("lost power mid-install"), "{all}");
    let evs = events(&o);
    let stages = stages_of(&evs, "w-off");
    assert!(stages.contains(&"installing".to_string()), "{stages:?} {all}");
    assert!(
        !stages.contains(&"rebooting".to_string()),
        "called rebooting: {stages:?} {all}"
    );
    assert_eq!(stages.last().map(String::as_str), Some("failed"), "{all}");
    let s = evs.last().unwrap();
    let node = &s["nodes"][0];
    assert_eq!(node["exitCode"], 6, "{s}");
    let msg = node["message"].as_str().unwrap();
    assert!(
        msg.contains("stopped answering during the install") && msg.contains("Writing image to disk"),
        "{msg}"
    );
    assert!(
        String::from_utf8_lossy(&o.stdout).contains("its logs cannot be saved under"),
        "{all}"
    );
    // A closing hint says what exit 6 means and what to do.
    assert!(
        s["hints"].as_array().unwrap().iter().any(|h| {
            h.as_str().is_some_and(|h| {
                h.starts_with("w-off failed to install (exit 6") && h.contains("boot it again")
            })
        }),
        "{s}"
    );
}

/// 100 simulated nodes (one boot process, PXE) followed at once: every node is followed through
/// its install, and the bound on assisted-service requests in flight holds (and is reached).
#[test]
fn a_hundred_nodes_keep_requests_in_flight_under_the_bound() {
    require_netns!();
    let env = Env::new();
    let nodes: Vec<(String, String, String)> = (0..100)
        .map(|i| {
            (
                format!("n{i:03}"),
                format!("52:54:00:bb:00:{i:02x}"),
                format!("192.168.111.{}", 100 + i),
            )
        })
        .collect();
    let hosts: Vec<String> = nodes.iter().map(|(h, m, i)| static_host((h, m, i), 24)).collect();
    let t = Instant::now();
    env.add_nodes(&hosts, &["--pxe"]);
    eprintln!("add-nodes for 100 hosts: {:.1}s", t.elapsed().as_secs_f64());
    let bound = 8;
    let refs: Vec<(&str, &str, &str)> = nodes
        .iter()
        .map(|(h, m, i)| (h.as_str(), m.as_str(), i.as_str()))
        .collect();
    let pxe = env.path("out").join("boot-artifacts");
    let (o, boot) = env.monitor_while_booting(
        &[
            "monitor",
            "-o",
            "json",
            "--poll-interval",
            "50ms",
            "--max-in-flight",
            &bound.to_string(),
            "--timeout",
            "45s",
        ],
        1000,
        &["--pxe-dir", pxe.to_str().unwrap()],
        &refs,
    );
    // Nobody approves: every node ends with its client CSR pending → 7.
    assert_eq!(o.status.code(), Some(7), "{}\nboot:\n{}", text(&o), boot.log());
    let evs = events(&o);
    let s = evs.last().unwrap();
    let req = &s["requests"];
    eprintln!("100 nodes: {req}, elapsed {}s", s["elapsedSeconds"]);
    let stderr = String::from_utf8_lossy(&o.stderr);
    eprintln!("{}", stderr.lines().last().unwrap_or(""));
    assert_eq!(req["bound"], bound);
    assert!(req["maxInFlight"].as_u64().unwrap() <= bound as u64, "{req}");
    assert_eq!(req["maxInFlight"], bound, "100 pollers reach the bound: {req}");
    assert!(req["waited"].as_u64().unwrap() > 0, "{req}");
    // How long until the last node reached its client CSR (event times, whole seconds).
    let secs = |e: &Value| {
        time::OffsetDateTime::parse(
            e["time"].as_str().unwrap(),
            &time::format_description::well_known::Rfc3339,
        )
        .unwrap()
        .unix_timestamp()
    };
    let first = secs(&evs[0]);
    let last_csr = evs
        .iter()
        .filter(|e| e["stage"] == "client-csr-pending")
        .map(secs)
        .max()
        .unwrap();
    eprintln!(
        "100 nodes: the last one reached client-csr-pending {}s after monitor started",
        last_csr - first
    );
    for (h, _, _) in &nodes {
        let st = stages_of(&evs, h);
        assert!(
            st.iter().any(|s| s == "installing") && st.iter().any(|s| s == "rebooting"),
            "{h}: {st:?}"
        );
        assert_eq!(
            st.last().map(String::as_str),
            Some("client-csr-pending"),
            "{h}: {st:?}"
        );
    }
}

// ------------------------------------------------------------------------------------------
// swagger conformance (no namespace needed)

pub(crate) fn swagger() -> Value {
    let p = agent_day2_sim::upstream::assisted_swagger().unwrap_or_else(|why| panic!("{why}"));
    serde_saphyr::from_str(&std::fs::read_to_string(p).unwrap()).unwrap()
}

/// Every property of `obj` is declared by swagger definition `def` with a compatible type.
pub(crate) fn check_model(sw: &Value, def: &str, obj: &Value, path: &str) {
    let d = &sw["definitions"][def];
    assert!(d.is_object(), "swagger has no definition {def}");
    let props = d["properties"]
        .as_object()
        .unwrap_or_else(|| panic!("{def} has no properties"));
    for (k, v) in obj.as_object().unwrap() {
        let p = props
            .get(k)
            .unwrap_or_else(|| panic!("{path}.{k}: not a property of swagger {def}"));
        let p = match p.get("$ref").and_then(Value::as_str) {
            Some(r) => {
                let name = r.trim_start_matches("#/definitions/");
                if v.is_object() && sw["definitions"][name]["properties"].is_object() {
                    check_model(sw, name, v, &format!("{path}.{k}"));
                }
                continue;
            }
            None => p,
        };
        let ok = match p["type"].as_str() {
            Some("string") => v.is_string(),
            Some("integer") => v.is_i64() || v.is_u64(),
            Some("number") => v.is_number(),
            Some("boolean") => v.is_boolean(),
            Some("array") => v.is_array(),
            Some("object") => v.is_object(),
            _ => true,
        };
        assert!(ok, "{path}.{k} = {v}: swagger {def}.{k} is {}", p["type"]);
        if let (Some(e), Some(s)) = (p["enum"].as_array(), v.as_str()) {
            assert!(
                e.iter().any(|x| x == s),
                "{path}.{k} = {s:?} is not in swagger's enum {e:?}"
            );
        }
        if let (Some(items), Some(arr)) = (p["items"]["$ref"].as_str(), v.as_array()) {
            let name = items.trim_start_matches("#/definitions/");
            for (i, x) in arr.iter().enumerate() {
                if x.is_object() {
                    check_model(sw, name, x, &format!("{path}.{k}[{i}]"));
                }
            }
        }
    }
}

/// GET `url` with the watcher token (assisted-service's `Watcher-Authorization` header); the
/// answer parsed as JSON.
async fn watcher_get(http: &reqwest::Client, url: &str, token: &str) -> Value {
    let r = http
        .get(url)
        .header("Watcher-Authorization", token)
        .send()
        .await
        .unwrap();
    r.json().await.unwrap()
}

#[test]
#[cfg_attr(
    not(real_assisted),
    ignore = "needs assisted-service's swagger.yaml: scripts/real-components.sh assisted, then AGENT_DAY2_REAL_ASSISTED=1 (scripts/test.sh does both)"
)]
fn requests_and_the_simulators_answers_follow_swagger() {
    use agent_day2::assisted::{self, Client, Limiter};
    use agent_day2_sim::boot::{facts::Facts, rest, stages};
    let sw = swagger();

    // 1. Each request the client builds: path, method, query parameters and security scheme.
    let reqs = [
        assisted::list_clusters_request(Some("c37c9544-4320-4380-9d8b-0753a4d9ea57")),
        assisted::list_events_request("c", "h", 3),
        assisted::download_logs_request("c", "h"),
    ];
    assert_eq!(sw["basePath"], "/api/assisted-install");
    assert_eq!(
        assisted::BASE_PATH,
        format!("{}/v2", sw["basePath"].as_str().unwrap())
    );
    for r in &reqs {
        let op = &sw["paths"][r.path_template][r.method];
        assert!(op.is_object(), "{} {}: not in swagger", r.method, r.path_template);
        assert_eq!(op["operationId"], r.operation);
        let params = op["parameters"].as_array().unwrap();
        for (k, _) in &r.query {
            assert!(
                params
                    .iter()
                    .any(|p| p["in"] == "query" && p["name"] == k.as_str()),
                "{}: query {k} not declared",
                r.operation
            );
        }
        for p in params.iter().filter(|p| p["in"] == "path") {
            assert!(r
                .path_template
                .contains(&format!("{{{}}}", p["name"].as_str().unwrap())));
        }
        let sec = op.get("security").unwrap_or(&sw["security"]);
        assert!(
            sec.as_array()
                .unwrap()
                .iter()
                .any(|s| s.get(r.scheme.name()).is_some()),
            "{}: scheme {} not allowed ({sec})",
            r.operation,
            r.scheme.name()
        );
        assert_eq!(
            sw["securityDefinitions"][r.scheme.name()]["name"],
            r.scheme.header()
        );
        assert_eq!(sw["securityDefinitions"][r.scheme.name()]["in"], "header");
    }

    // 2. The simulator's answers, through the client, and their raw JSON against the models.
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let addr: std::net::SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
        // Tokens as add-nodes makes them; the simulated API judges them with the public key
        // as the real service does (signature, exp, auth_scheme).
        let m = agent_day2::auth::generate(Duration::from_secs(3600), std::time::SystemTime::now()).unwrap();
        let tok = |scheme: &str| match scheme {
            "agentAuth" => m.agent_token.clone(),
            "userAuth" => m.user_token.clone(),
            _ => m.watcher_token.clone(),
        };
        let facts = Facts {
            ec_public_key: agent_day2_sim::boot::jwt::public_key(&m.public_key_b64()).unwrap(),
            cluster_id: "c37c9544-4320-4380-9d8b-0753a4d9ea57".into(),
            cluster_name: "ostest".into(),
            api_dns_name: "api.ostest.example.com".into(),
            base_domain: "example.com".into(),
            infra_env_id: rest::derived_uuid("ie"),
            agent_token: tok("agentAuth"),
            user_token: tok("userAuth"),
            watcher_token: tok("watcherAuth"),
            token_expiry: String::new(),
            release_image: "quay.io/x@sha256:00".into(),
            openshift_version: "4.18.12".into(),
            cpu_architecture: "x86_64".into(),
            user_managed_networking: false,
            hosts: Default::default(),
            hostnames: Default::default(),
        };
        let plan = stages::plan(
            "worker-0",
            &stages::Faults {
                fail_install: true,
                ..Default::default()
            },
        );
        let api = Arc::new(rest::NodeApi {
            facts: Arc::new(facts.clone()),
            hostname: "worker-0".into(),
            mac: "52:54:00:aa:00:30".into(),
            ip: "192.168.111.30".parse().unwrap(),
            ai_cluster_id: rest::derived_uuid("ai"),
            host_id: rest::derived_uuid("host"),
            created_at: rest::now(),
            state: std::sync::Mutex::new(rest::HostState {
                step: plan[0].clone(),
                events: vec![],
                status_updated_at: rest::now(),
                stage_started_at: rest::now(),
            }),
        });
        let server = rest::Server::start(addr, api.clone()).await.unwrap();
        let http = assisted::http_client().unwrap();
        let lim = Limiter::new(4);
        let origin = format!("http://{addr}");
        let c = Client::new(
            http.clone(),
            origin.clone(),
            &facts.watcher_token,
            &facts.user_token,
            lim.clone(),
        );
        for step in &plan {
            api.enter(step);
            let clusters = c.list_clusters(Some(&facts.cluster_id)).await.unwrap();
            assert_eq!(clusters.len(), 1);
            let h = &clusters[0].hosts[0];
            assert_eq!(h.status, step.status);
            assert_eq!(h.macs(), vec!["52:54:00:aa:00:30"]);
            // Raw answer against swagger's models.
            let raw = watcher_get(
                &http,
                &format!("{origin}/api/assisted-install/v2/clusters?with_hosts=true"),
                &facts.watcher_token,
            )
            .await;
            for (i, cl) in raw.as_array().unwrap().iter().enumerate() {
                check_model(&sw, "cluster", cl, &format!("clusters[{i}]"));
                let inv: Value = serde_json::from_str(cl["hosts"][0]["inventory"].as_str().unwrap()).unwrap();
                check_model(&sw, "inventory", &inv, "inventory");
            }
        }
        assert!(
            c.list_clusters(Some("00000000-0000-0000-0000-000000000000"))
                .await
                .unwrap()
                .is_empty(),
            "openshift_cluster_id filters"
        );
        let (cid, hid) = (rest::derived_uuid("ai"), rest::derived_uuid("host"));
        let evs = c.list_events(&cid, &hid, 2).await.unwrap();
        assert_eq!(evs.len(), 2);
        assert_eq!(evs[0].severity, "error", "newest first: {evs:?}");
        let raw = watcher_get(
            &http,
            &format!("{origin}/api/assisted-install/v2/events?host_id={hid}"),
            &facts.watcher_token,
        )
        .await;
        for (i, e) in raw.as_array().unwrap().iter().enumerate() {
            check_model(&sw, "event", e, &format!("events[{i}]"));
        }
        let logs = c.download_logs(&cid, &hid).await.unwrap();
        assert_eq!(&logs[..2], &[0x1f, 0x8b], "a gzip archive");
        // Tokens: the logs refuse the watcher persona (403), an unknown token is 401.
        let wrong = Client::new(
            http.clone(),
            origin.clone(),
            &facts.watcher_token,
            &facts.watcher_token,
            lim.clone(),
        );
        assert!(matches!(
            wrong.download_logs(&cid, &hid).await,
            Err(assisted::AssistedError::Forbidden { .. })
        ));
        let bad = Client::new(http.clone(), origin.clone(), "nope", "nope", lim.clone());
        assert!(matches!(
            bad.list_clusters(None).await,
            Err(assisted::AssistedError::Unauthorized { expired: false, .. })
        ));
        server.stop().await;
        assert!(matches!(
            c.list_clusters(None).await,
            Err(assisted::AssistedError::Unreachable { .. })
        ));
        assert!(lim.stats().max_in_flight <= 4);
    });
}

/// A batch whose token expires before --timeout ends is warned about; once it has expired, a
/// node that never booted ends as failed (6) instead of waiting for the timeout. On a terminal
/// (a pty from script(1)) the output is the live table, not lines.
#[test]
fn token_expiry_is_warned_and_the_live_table_shows_on_a_terminal() {
    require_netns!();
    let env = Env::new();
    let never = ("w-never", "52:54:00:aa:00:50", "192.168.111.50");
    env.add_nodes(&[static_host(never, 24)], &[]);

    // On a terminal: the live table (rows redrawn on stderr) and the final table, no lines.
    let cmd = format!("{BIN} monitor --timeout 2s --poll-interval 100ms");
    let o = Command::new("script")
        .args(["-qec", &cmd, "/dev/null"])
        .env("KUBECONFIG", &env.c.kubeconfig)
        .env("TERM", "xterm")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let tty = String::from_utf8_lossy(&o.stdout);
    assert_eq!(o.status.code(), Some(5), "{}", text(&o));
    assert!(
        tty.contains("w-never") && tty.contains("waiting-for-boot"),
        "{tty}"
    );
    assert!(
        tty.contains("NODE") && tty.contains("STAGE"),
        "final table: {tty}"
    );
    assert!(
        !tty.contains("w-never 192.168.111.50: waiting-for-boot -"),
        "no change lines on a terminal: {tty}"
    );

    // Usage: --approve needs --yes without a terminal; --yes needs --approve; no yaml stream.
    let o = env.plugin(&["monitor", "--approve"]);
    assert_fails(&o, 2, "pass --yes");
    assert_eq!(env.plugin(&["monitor", "--yes"]).status.code(), Some(2));
    assert_eq!(env.plugin(&["monitor", "-o", "yaml"]).status.code(), Some(2));
    assert_eq!(env.plugin(&["monitor", "--timeout", "0"]).status.code(), Some(2));

    // The token expires in 3 s, before --timeout: warned, then the unbooted node fails.
    let cms = env.kubectl_json(BATCH_CONFIGMAPS);
    let mut cm = cms["items"][0].clone();
    let mut rec: Value = serde_json::from_str(cm["data"]["batch.json"].as_str().unwrap()).unwrap();
    let soon = time::OffsetDateTime::now_utc() + time::Duration::seconds(3);
    rec["tokenExpiresAt"] = json!(soon
        .format(&time::format_description::well_known::Rfc3339)
        .unwrap());
    cm["data"]["batch.json"] = json!(rec.to_string());
    let o = env.c.kubectl_stdin(&["replace", "-f", "-"], &cm.to_string());
    assert!(o.status.success(), "{}", text(&o));
    let t = Instant::now();
    let o = env.plugin(&[
        "monitor",
        "-o",
        "json",
        "--timeout",
        "60s",
        "--poll-interval",
        "200ms",
    ]);
    assert_eq!(o.status.code(), Some(6), "{}", text(&o));
    assert!(
        t.elapsed() < Duration::from_secs(30),
        "ended at the expiry, not the timeout"
    );
    let evs = events(&o);
    assert!(
        evs.iter()
            .any(|e| e["event"] == "warning"
                && e["message"].as_str().unwrap().contains("before --timeout ends")),
        "{}",
        text(&o)
    );
    let last = evs
        .iter()
        .rev()
        .find(|e| e["event"] == "stage" && e["node"] == never.0)
        .unwrap();
    assert_eq!(last["stage"], "failed");
    assert!(
        last["message"].as_str().unwrap().contains("token has expired"),
        "{last}"
    );
}

/// A fake API server on loopback (plain HTTP) for the 401 path: token `t1` lists but its
/// watches get 401, at which point the server rewrites the kubeconfig with token `t2` (as a
/// new `oc login` would); `t2` lists too and its watches get 401 again. Returns the port and
/// a handle giving every "token request-line" seen.
fn fake_api_401(
    kubeconfig: PathBuf,
    batch_cm: Value,
    secret: Value,
    stop: Arc<AtomicBool>,
) -> (u16, std::thread::JoinHandle<Vec<String>>) {
    use std::io::{BufRead, BufReader, Write};
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    l.set_nonblocking(true).unwrap();
    let h = std::thread::spawn(move || {
        let mut seen = Vec::new();
        let until = Instant::now() + Duration::from_secs(40);
        while Instant::now() < until {
            let Ok((s, _)) = l.accept() else {
                if stop.load(Ordering::SeqCst) {
                    break;
                }
                std::thread::sleep(Duration::from_millis(10));
                continue;
            };
            s.set_nonblocking(false).unwrap();
            let mut r = BufReader::new(s.try_clone().unwrap());
            let mut w = s;
            loop {
                let mut line = String::new();
                if r.read_line(&mut line).unwrap_or(0) == 0 {
                    break;
                }
                let line = line.trim().to_string();
                let mut token = String::new();
                loop {
                    let mut hdr = String::new();
                    if r.read_line(&mut hdr).unwrap_or(0) == 0 || hdr.trim().is_empty() {
                        break;
                    }
                    if let Some(v) = hdr
                        .trim()
                        .strip_prefix("authorization: Bearer ")
                        .or(hdr.trim().strip_prefix("Authorization: Bearer "))
                    {
                        token = v.to_string();
                    }
                }
                seen.push(format!("{token} {line}"));
                let path = line.split_whitespace().nth(1).unwrap_or("");
                let list = |kind: &str, api: &str| json!({"apiVersion": api, "kind": kind, "metadata": {"resourceVersion": "5"}, "items": []});
                let (code, body) = if token != "t1" && token != "t2" {
                    (
                        401,
                        json!({"kind": "Status", "apiVersion": "v1", "status": "Failure", "message": "Unauthorized", "reason": "Unauthorized", "code": 401}),
                    )
                } else if path.contains("watch=true") {
                    if token == "t1" {
                        let kc = std::fs::read_to_string(&kubeconfig)
                            .unwrap()
                            .replace("token: t1", "token: t2");
                        std::fs::write(&kubeconfig, kc).unwrap();
                    }
                    (
                        401,
                        json!({"kind": "Status", "apiVersion": "v1", "status": "Failure", "message": "Unauthorized", "reason": "Unauthorized", "code": 401}),
                    )
                } else if path.starts_with("/api/v1/namespaces/openshift-agent-day2/configmaps") {
                    let mut l = list("ConfigMapList", "v1");
                    l["items"] = json!([batch_cm.clone()]);
                    (200, l)
                } else if path.starts_with("/api/v1/namespaces/openshift-config/secrets/agent-auth-token") {
                    (200, secret.clone())
                } else if path.starts_with("/apis/certificates.k8s.io/v1/certificatesigningrequests") {
                    (
                        200,
                        list("CertificateSigningRequestList", "certificates.k8s.io/v1"),
                    )
                } else if path.starts_with("/api/v1/nodes") {
                    (200, list("NodeList", "v1"))
                } else {
                    (
                        404,
                        json!({"kind": "Status", "apiVersion": "v1", "status": "Failure", "message": "not found", "reason": "NotFound", "code": 404}),
                    )
                };
                let b = body.to_string();
                let _ = write!(
                    w,
                    "HTTP/1.1 {code} X\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{b}",
                    b.len()
                );
                let _ = w.flush();
            }
        }
        seen
    });
    (port, h)
}

/// A 401 while watching reads the kubeconfig again once (the new token is used), and a second
/// 401 stops with "log in again" (exit 4).
#[test]
fn a_401_while_watching_reads_the_kubeconfig_again_once() {
    use base64::Engine;
    let tmp = tempfile::tempdir().unwrap();
    let kubeconfig = tmp.path().join("kubeconfig");
    let rec = json!({
        "apiVersion": "agent-day2/v1", "kind": "Batch", "name": "batch-20261129-211034-ab12",
        "createdAt": "2026-11-29T21:10:34Z", "createdBy": "system:admin",
        "clusterId": "c37c9544-4320-4380-9d8b-0753a4d9ea57", "releaseImage": "quay.io/x@sha256:00",
        "version": "4.18.12", "architecture": "x86_64", "pool": "worker", "nodeLabels": {},
        "outputKind": "iso", "files": ["node.x86_64.iso"], "imageSha256": "ab".repeat(32),
        "tokenExpiresAt": "2099-01-01T00:00:00Z",
        // 127.0.0.2:8090 answers nothing: the node stays "not booted".
        "hosts": [{"hostname": "worker-0", "macs": ["52:54:00:aa:00:30"], "ips": ["127.0.0.2"], "ipSource": "static"}],
        "approvals": []
    });
    let cm = json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "batch-20261129-211034-ab12", "namespace": "openshift-agent-day2", "resourceVersion": "3",
                     "labels": {"agent-day2.openshift.io/batch": "batch-20261129-211034-ab12"}},
        "data": {"batch.json": rec.to_string()}
    });
    let auth = agent_day2::auth::generate(Duration::from_secs(3600), std::time::SystemTime::now()).unwrap();
    let data: serde_json::Map<String, Value> = auth
        .to_secret_data()
        .into_iter()
        .map(|(k, v)| (k, json!(base64::engine::general_purpose::STANDARD.encode(v))))
        .collect();
    let secret = json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "agent-auth-token", "namespace": "openshift-config", "annotations": auth.secret_annotations(std::time::SystemTime::now())}, "type": "Opaque", "data": data});
    std::fs::write(&kubeconfig, "placeholder").unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let (port, h) = fake_api_401(kubeconfig.clone(), cm, secret, stop.clone());
    std::fs::write(
        &kubeconfig,
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: http://127.0.0.1:{port}\nusers:\n- name: u\n  user:\n    token: t1\ncontexts:\n- name: x\n  context:\n    cluster: c\n    user: u\ncurrent-context: x\n"
        ),
    )
    .unwrap();
    let o = Command::new(BIN)
        .args(["monitor", "--timeout", "60s", "--poll-interval", "1s"])
        .env("KUBECONFIG", &kubeconfig)
        .env_remove("HTTP_PROXY")
        .env_remove("http_proxy")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    stop.store(true, Ordering::SeqCst);
    let seen = h.join().unwrap();
    assert_eq!(o.status.code(), Some(4), "{}\nseen: {seen:#?}", text(&o));
    let out = String::from_utf8_lossy(&o.stdout).to_string() + &String::from_utf8_lossy(&o.stderr);
    assert!(out.contains("reading the kubeconfig again"), "{out}");
    assert!(out.contains("error: unauthorized at http://127.0.0.1:"), "{out}");
    assert!(out.contains("log in again"), "{out}");
    assert!(
        seen.iter()
            .any(|l| l.starts_with("t1 ") && l.contains("watch=true")),
        "{seen:#?}"
    );
    assert!(
        seen.iter().any(|l| l.starts_with("t2 ")),
        "the new token was used after the re-read: {seen:#?}"
    );
    assert!(
        !seen
            .iter()
            .any(|l| !l.starts_with("t1 ") && !l.starts_with("t2 ")),
        "{seen:#?}"
    );
}

/// An IPv6 node: its API is reached at http://[v6]:8090 and it goes all the way.
#[test]
fn an_ipv6_node_is_followed_through_its_bracketed_api_address() {
    require_netns!();
    let env = Env::with_scenario("dualStack: true\n");
    let v6 = ("worker-6", "52:54:00:aa:00:36", "fd2e:6f44:5dd8:c956::36");
    // An IPv6 /64 on lo is not all local as the IPv4 /24 is: make the node's address local
    // (in this test's own namespace) so the simulated node can serve on it.
    // (Also inside a shared `agent-day2-sim netns`, where an earlier run may have added it.)
    let o = Command::new("ip")
        .args([
            "-6",
            "addr",
            "add",
            &format!("{}/128", v6.2),
            "dev",
            "lo",
            "nodad",
        ])
        .output()
        .unwrap();
    assert!(
        o.status.success() || String::from_utf8_lossy(&o.stderr).contains("exists"),
        "cannot add {} to lo in this namespace: {}",
        v6.2,
        text(&o)
    );
    let r = env.add_nodes(&[static_host(v6, 64)], &[]);
    let iso = r["files"][0]["path"].as_str().unwrap().to_string();
    let (o, boot) = env.monitor_while_booting(
        &[
            "monitor",
            "--approve",
            "--yes",
            "-o",
            "json",
            "--poll-interval",
            "100ms",
            "--timeout",
            "120s",
        ],
        1500,
        &["--iso", &iso],
        &[v6],
    );
    assert_eq!(o.status.code(), Some(0), "{}\nboot:\n{}", text(&o), boot.log());
    let evs = events(&o);
    let st = stages_of(&evs, v6.0);
    assert!(
        st.iter().any(|s| s == "installing") && st.last().map(String::as_str) == Some("done"),
        "{st:?}"
    );
    assert!(evs.iter().any(|e| e["node"] == v6.0 && e["ip"] == v6.2));
    assert!(
        evs.iter().any(|e| e["message"]
            .as_str()
            .unwrap_or("")
            .contains("http://[fd2e:6f44:5dd8:c956::36]:8090/api/assisted-install/v2")),
        "the bracketed URL is shown while waiting: {}",
        text(&o)
    );
}

/// Line output (not a terminal) of `monitor --approve --yes` while a node boots: "client CSR X
/// pending approval" comes before "approved client CSR X", the client approval prints approve's
/// warning, the final table ends with a newline and nothing lands inside it; the request
/// counts are shown with -v only, after the table.
#[test]
fn monitor_lines_are_in_causal_order_with_the_client_warning_and_a_whole_final_table() {
    require_netns!();
    let env = Env::new();
    let r = env.add_nodes(&[static_host(W0, 24)], &[]);
    let iso = r["files"][0]["path"].as_str().unwrap().to_string();
    let (o, boot) = env.monitor_while_booting(
        &[
            "monitor",
            "--approve",
            "--yes",
            "--poll-interval",
            "100ms",
            "--timeout",
            "120s",
        ],
        1000,
        &["--iso", &iso],
        &[W0],
    );
    assert_eq!(o.status.code(), Some(0), "{}\nboot:\n{}", text(&o), boot.log());
    eprintln!("monitor --approve --yes of one node, as lines:\n{}", text(&o));
    let out = String::from_utf8_lossy(&o.stdout).to_string();
    let err = String::from_utf8_lossy(&o.stderr).to_string();
    let lines: Vec<&str> = out.lines().collect();
    let approved = lines
        .iter()
        .position(|l| l.starts_with("worker-0 192.168.111.30: approved client CSR "))
        .unwrap_or_else(|| panic!("{}", text(&o)));
    let csr = lines[approved].rsplit(' ').next().unwrap();
    let pending = lines
        .iter()
        .position(|l| {
            *l == format!("worker-0 192.168.111.30: client-csr-pending - client CSR {csr} pending approval")
        })
        .unwrap_or_else(|| panic!("pending line for {csr}: {}", text(&o)));
    assert!(pending < approved, "{}", text(&o));
    assert!(
        lines[approved + 1].starts_with(&format!(
            "warning: worker-0 192.168.111.30: approved client CSR {csr} for worker-0: approve cannot tell the real machine"
        )),
        "{}",
        text(&o)
    );
    // The final table: the last lines of stdout, whole, ending in a newline.
    assert!(out.ends_with('\n'), "{out:?}");
    let head = lines
        .iter()
        .rposition(|l| l.starts_with("NODE"))
        .unwrap_or_else(|| panic!("{out}"));
    assert_eq!(lines.len(), head + 2, "header and one row: {out}");
    let row: Vec<&str> = lines[head + 1].split_whitespace().collect();
    assert_eq!(&row[..3], &["worker-0", "192.168.111.30", "done"], "{out}");
    assert!(!err.contains("assisted-service requests"), "without -v: {err}");

    // Again with -v (the node is done: monitor ends at once): the counts on stderr, as an info
    // line of their own, and stdout still ends with the whole table.
    let o = env.plugin(&["monitor", "-v", "1", "--timeout", "30s"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.lines()
            .any(|l| l.starts_with("info: assisted-service requests: ") && l.contains("(bound 16)")),
        "{err}"
    );
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        out.ends_with('\n') && out.lines().last().unwrap().starts_with("worker-0"),
        "{out:?}"
    );
    let o = env.plugin(&["monitor", "--timeout", "30s"]);
    assert!(
        !String::from_utf8_lossy(&o.stderr).contains("assisted-service requests"),
        "{}",
        text(&o)
    );
}

/// With no batch recorded, monitor's next step works: it offers --ip-addresses only when the
/// node tokens exist (else add-nodes alone, no contradicting generic hint), and with them
/// --ip-addresses runs (exit 5 at the timeout, not a missing Secret). `-o json` ends with an
/// `error` event naming the problem.
#[test]
fn with_no_batch_monitor_offers_only_what_works() {
    require_netns!();
    let env = Env::new();
    let o = env.plugin(&["monitor"]);
    assert_fails(&o, 4, "run `oc agent-day2 add-nodes` first");
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        !err.contains("--ip-addresses") && !err.contains("is this an OpenShift"),
        "{err}"
    );
    let o = env.plugin(&["monitor", "-o", "json"]);
    assert_eq!(o.status.code(), Some(4), "{}", text(&o));
    let evs = events(&o);
    assert_eq!(evs.len(), 1, "{}", text(&o));
    assert_eq!(evs[0]["event"], "error");
    assert_eq!(evs[0]["exitCode"], 4);
    assert!(
        evs[0]["message"].as_str().unwrap().contains("add-nodes"),
        "{}",
        evs[0]
    );

    // The node tokens exist (oc adm node-image made an image): --ip-addresses is offered, and works.
    tokens::oc_adm_node_image_secret(&env.c, Duration::from_secs(40 * 3600), tokens::ALL_TOKEN_KEYS);
    let o = env.plugin(&["monitor"]);
    assert_fails(&o, 4, "--ip-addresses");
    let o = env.monitor(&["--ip-addresses", W0.2], "2s");
    assert_eq!(o.status.code(), Some(5), "{}", text(&o));
    assert!(
        String::from_utf8_lossy(&o.stdout).contains("192.168.111.30: waiting-for-boot - not booted yet"),
        "{}",
        text(&o)
    );

    // The Secret changed by hand (its watcher token removed): the key and what is wrong, the
    // Secret named once, not called the older single-token layout.
    let d = env
        .c
        .kubectl(&["-n", "openshift-config", "delete", "secret", "agent-auth-token"]);
    assert!(d.status.success(), "{}", text(&d));
    tokens::oc_adm_node_image_secret(
        &env.c,
        Duration::from_secs(40 * 3600),
        &["agentAuthToken", "userAuthToken", "authTokenPublicKey"],
    );
    let o = env.monitor(&["--ip-addresses", W0.2], "2s");
    assert_fails(
        &o,
        4,
        "Secret openshift-config/agent-auth-token: key watcherAuthToken: is missing while the other tokens are present",
    );
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(err.matches("agent-auth-token").count(), 1, "{err}");
    assert!(!err.contains("single-token"), "{err}");
}

/// `monitor --approve --yes` of a DHCP host nobody gave an address for: its client CSR is
/// approved, its serving CSR held (its IPs cannot be checked). The closing hint says that reason
/// and its fix in approve's `waiting:` words, not the generic "run approve"; the run ends at the
/// timeout and exits 7 (the node waits on a CSR: docs/exit-codes.md).
#[test]
fn monitor_approve_says_why_it_held_a_csr_and_exits_7_at_the_timeout() {
    require_netns!();
    let env = Env::new();
    let r = env.add_nodes(&[dhcp_host(W1)], &[]);
    let iso = r["files"][0]["path"].as_str().unwrap().to_string();
    let (o, boot) = env.monitor_while_booting(
        &[
            "monitor",
            "--approve",
            // Nobody gave its address, so no reboot is recorded for it: the client CSR is
            // approved only on the checks alone (issue 14); the serving one stays held.
            "--trust-unverified-boot",
            "--yes",
            "-o",
            "json",
            "--poll-interval",
            "100ms",
            "--timeout",
            "60s",
        ],
        1000,
        &["--iso", &iso],
        &[W1],
    );
    assert_eq!(o.status.code(), Some(7), "{}\nboot:\n{}", text(&o), boot.log());
    let evs = events(&o);
    let s = evs.last().unwrap();
    assert_eq!(s["event"], "summary", "{s}");
    assert_eq!(s["exitCode"], 7, "{s}");
    assert_eq!(s["timedOut"], true, "{s}");
    assert_eq!(s["nodes"][0]["stage"], "serving-csr-pending", "{s}");
    let hints: Vec<&str> = s["hints"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| h.as_str().unwrap())
        .collect();
    let held = hints
        .iter()
        .find(|h| h.contains("serving CSR") && h.contains(" held: "))
        .unwrap_or_else(|| panic!("{hints:#?}"));
    assert!(
        held.starts_with(&format!("{} (batch ", W1.0))
            && held.contains("IP addresses are not known (DHCP?)")
            && held.contains(&format!("--node {}=IP", W1.0)),
        "{held}"
    );
    assert!(
        !hints
            .iter()
            .any(|h| h.contains("pending approval: run `oc agent-day2 approve`")),
        "the generic hint is not repeated for a node with a reason: {hints:#?}"
    );
    assert!(
        hints
            .iter()
            .any(|h| h.starts_with("timed out after 1m") && h.contains("exit code is 7")),
        "{hints:#?}"
    );
}

/// On a terminal the live table has a header, an IP column, and no line wider than the
/// terminal (issue 22 item 9). The terminal is a pty of 80 columns from util-linux `script`.
#[test]
fn the_live_table_has_a_header_an_ip_column_and_fits_the_terminal() {
    require_netns!();
    let env = Env::new();
    let far = (
        "worker-with-a-rather-long-name-0",
        "52:54:00:aa:00:45",
        "192.168.111.45",
    );
    env.add_nodes(&[static_host(far, 24)], &[]);
    let inner = format!(
        "stty cols 80 rows 30; {} monitor --poll-interval 100ms --timeout 3s",
        cluster::BIN
    );
    let o = Command::new("script")
        .args(["-qec", &inner, "/dev/null"])
        .env("KUBECONFIG", &env.c.kubeconfig)
        .env("XDG_CACHE_HOME", env.w.cache())
        .env_remove("HTTPS_PROXY")
        .env_remove("https_proxy")
        .stdin(Stdio::null())
        .output()
        .expect("util-linux script");
    let raw = String::from_utf8_lossy(&o.stdout).to_string();
    // What was drawn, one drawn line per line: the terminal's control sequences (cursor moves,
    // line clears, which indicatif redraws its rows with) and carriage returns end a line.
    let plain: String = {
        let mut s = String::new();
        let mut it = raw.chars().peekable();
        while let Some(c) = it.next() {
            if c == '\u{1b}' {
                if it.peek() == Some(&'[') {
                    it.next();
                    for d in it.by_ref() {
                        if d.is_ascii_alphabetic() {
                            break;
                        }
                    }
                }
                s.push('\n');
                continue;
            }
            s.push(if c == '\r' { '\n' } else { c });
        }
        s
    };
    assert!(
        plain.contains("NODE") && plain.contains("STAGE") && plain.contains("DETAIL"),
        "{plain}"
    );
    assert!(plain.contains("192.168.111.45"), "{plain}");
    assert!(plain.contains("worker-with-a-rather-lo…"), "{plain}");
    // indicatif fills each row to the terminal's width and lets the terminal wrap to the next:
    // a drawn line is whole rows of 80 columns, each a row of its own (the node's row starts a
    // row), and the long detail is cut, never wrapped onto a row of its own.
    for l in plain.lines() {
        let chars: Vec<char> = l.chars().collect();
        for row in chars.chunks(80) {
            let row: String = row.iter().collect();
            if let Some(i) = row.find("worker-with") {
                assert!(
                    i <= 4,
                    "the node's row does not start a terminal row: {row:?}\nraw: {raw:?}"
                );
            }
        }
    }
    // The summary table at the end is plain text (the terminal wraps it like kubectl get's).
    let live = &plain[..plain
        .find("worker-with-a-rather-long-name-0")
        .expect("the summary table")];
    assert!(
        !live.contains("(no answer from"),
        "the detail was not cut at the width:\n{live}"
    );
}
