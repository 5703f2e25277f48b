//! Issue 14 end to end: `approve` binds each client CSR to the host's own reboot report, which
//! `monitor` records on the batch, and tells the kubelet's re-keying from a second requester.
//! The built plugin against the simulated cluster in a private network namespace; the machines
//! are `agent-day2-sim boot` of the ISO a real `add-nodes` wrote, their kubelet re-keying like
//! the real one (`--kubelet-retry`); rogue client CSRs come from `agent-day2-sim csr
//! --bootstrapper`, made as anyone holding the node-bootstrapper token can.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use crate::support::cluster;

use agent_day2_sim::harness::{bin, TestCluster};
use cluster::*;
use serde_json::{json, Value};

const CLIENT_SIGNER: &str = "kubernetes.io/kube-apiserver-client-kubelet";
const SERVING_SIGNER: &str = "kubernetes.io/kubelet-serving";
const BOOTSTRAPPER: &str = "system:serviceaccount:openshift-machine-config-operator:node-bootstrapper";

/// add-nodes for worker-0 (static address): the ISO's path.
fn add_worker_0(c: &TestCluster, w: &Work) -> PathBuf {
    add_nodes_iso(c, w, &[static_host(W0, 24)])
}

/// `cmd` in the background, stdout and stderr to `log`.
fn spawn_logged(mut cmd: Command, log: &Path) -> Kid {
    let f = std::fs::File::create(log).unwrap();
    cmd.stdout(f.try_clone().unwrap()).stderr(f).stdin(Stdio::null());
    Kid(cmd.spawn().unwrap())
}

fn read(log: &Path) -> String {
    std::fs::read_to_string(log).unwrap_or_default()
}

/// Waits until `log` holds `needle` `times` times; panics with the log after `secs`.
fn wait_for(log: &Path, needle: &str, times: usize, secs: u64) -> String {
    let end = Instant::now() + Duration::from_secs(secs);
    loop {
        let s = read(log);
        if s.matches(needle).count() >= times {
            return s;
        }
        assert!(
            Instant::now() < end,
            "no {times}× {needle:?} after {secs}s in:\n{s}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Waits for `kid` to exit (at most `secs`): its exit code.
fn wait_exit(kid: &mut Kid, secs: u64, log: &Path) -> i32 {
    let end = Instant::now() + Duration::from_secs(secs);
    loop {
        if let Some(s) = kid.0.try_wait().unwrap() {
            return s.code().unwrap_or(-1);
        }
        assert!(
            Instant::now() < end,
            "still running after {secs}s:\n{}",
            read(log)
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// `monitor` without --approve (it records the hosts' reboot reports), in the background.
fn monitor(c: &TestCluster, w: &Work) -> (Kid, PathBuf) {
    let log = w.path("monitor.log");
    let cmd = plugin_cmd(
        c,
        w,
        &[
            "monitor",
            "--poll-interval",
            "100ms",
            "--timeout",
            "240s",
            "-o",
            "json",
        ],
    );
    (spawn_logged(cmd, &log), log)
}

/// `agent-day2-sim boot` of worker-0 from `iso` (150 ms per stage) with `extra` flags.
fn boot(c: &TestCluster, w: &Work, iso: &Path, extra: &[&str]) -> (Kid, PathBuf) {
    let log = w.path("boot.log");
    let mut cmd = boot_cmd(c, &["--iso", iso.to_str().unwrap()], &[W0], 150, "240s");
    cmd.args(extra);
    (spawn_logged(cmd, &log), log)
}

/// A rogue client CSR for `node` with the node-bootstrapper token: its name.
fn rogue_csr(c: &TestCluster, node: &str) -> String {
    let o = Command::new(bin("agent-day2-sim").unwrap())
        .args([
            "csr",
            "--dir",
            c.dir.to_str().unwrap(),
            "--bootstrapper",
            "--node",
            node,
        ])
        .output()
        .unwrap();
    assert!(o.status.success(), "agent-day2-sim csr: {}", text(&o));
    String::from_utf8(o.stdout).unwrap().trim().to_string()
}

fn approved(c: &TestCluster, name: &str) -> bool {
    csr_obj(c, name)["status"]["conditions"]
        .as_array()
        .is_some_and(|a| a.iter().any(|x| x["type"] == "Approved"))
}

fn client_csrs(c: &TestCluster) -> Vec<Value> {
    kubectl_json(c, &["get", "csr", "-o", "json"])["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|x| x["spec"]["signerName"] == CLIENT_SIGNER)
        .cloned()
        .collect()
}

fn node_ready_with_serving_cert(c: &TestCluster, node: &str) -> bool {
    let n = c.kubectl(&["get", "node", node, "-o", "json"]);
    if !n.status.success() {
        return false;
    }
    let n: Value = serde_json::from_slice(&n.stdout).unwrap();
    let ready = n["status"]["conditions"]
        .as_array()
        .is_some_and(|a| a.iter().any(|x| x["type"] == "Ready" && x["status"] == "True"));
    ready
        && kubectl_json(c, &["get", "csr", "-o", "json"])["items"]
            .as_array()
            .unwrap()
            .iter()
            .any(|x| {
                x["spec"]["signerName"] == SERVING_SIGNER
                    && x["spec"]["username"] == format!("system:node:{node}")
                    && x["status"]["certificate"].as_str().is_some_and(|s| !s.is_empty())
            })
}

/// The row of CSR `name` in an ApproveReport.
fn row(doc: &Value, name: &str) -> Value {
    doc["csrs"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["name"] == name)
        .cloned()
        .unwrap_or_else(|| panic!("{name} in {doc:#}"))
}

fn codes(row: &Value) -> Vec<String> {
    row["reasons"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["code"].as_str().unwrap().to_string())
        .collect()
}

fn approve(c: &TestCluster, w: &Work, args: &[&str]) -> Output {
    plugin(c, w, &[&["approve"], args].concat())
}

/// A rogue client CSR posted before the machine booted is never approved, also by
/// `approve --watch --yes`: created before the host's own reboot report (which monitor records
/// on the batch), while the real kubelet's CSR after it is approved and the node joins.
#[test]
fn a_rogue_client_csr_posted_before_boot_is_never_approved_under_watch_yes() {
    require_netns!();
    let w = Work::new();
    let c = cluster("", &w);
    let iso = add_worker_0(&c, &w);
    let rogue = rogue_csr(&c, "worker-0");
    // Older than the reboot report by more than the 2 s of clock skew approve allows.
    std::thread::sleep(Duration::from_secs(4));
    let (_mon, mon_log) = monitor(&c, &w);
    let ap_out = w.path("approve.json");
    let ap_err = w.path("approve.err");
    let mut cmd = plugin_cmd(
        &c,
        &w,
        &["approve", "--watch", "--yes", "--timeout", "200s", "-o", "json"],
    );
    cmd.stdout(std::fs::File::create(&ap_out).unwrap())
        .stderr(std::fs::File::create(&ap_err).unwrap());
    let mut ap = Kid(cmd.spawn().unwrap());
    let (mut bt, boot_log) = boot(&c, &w, &iso, &[]);
    let code = wait_exit(&mut ap, 220, &ap_err);
    let boot_code = wait_exit(&mut bt, 60, &boot_log);
    let all = format!(
        "approve exit {code}\nstdout:\n{}\nstderr:\n{}\nboot:\n{}\nmonitor:\n{}",
        read(&ap_out),
        read(&ap_err),
        read(&boot_log),
        read(&mon_log)
    );
    assert_eq!(boot_code, 0, "{all}");
    assert!(node_ready_with_serving_cert(&c, "worker-0"), "{all}");
    assert!(!approved(&c, &rogue), "the rogue CSR was approved: {all}");
    // The record monitor made, from the host's own service.
    let recs = batch_records(&c);
    let reboot = &recs[0]["reboots"][0];
    assert_eq!(reboot["host"], "worker-0", "{:#}", recs[0]);
    assert_eq!(reboot["ip"], W0.2);
    let reported = reboot["reported"].as_str().unwrap();
    assert!(
        ["install stage Rebooting", "added-to-existing-cluster"].contains(&reported),
        "{reported}"
    );
    assert!(read(&mon_log).contains("reboot recorded on batch"), "{all}");
    // approve said why, and the rogue left pending is the run's exit 7.
    let doc: Value = serde_json::from_str(&read(&ap_out)).unwrap_or_else(|e| panic!("{e}: {all}"));
    let r = row(&doc, &rogue);
    assert_eq!(r["action"], "rejected", "{all}");
    assert!(codes(&r).contains(&"created-before-reboot".to_string()), "{r:#}");
    let msg = r["reasons"][0]["message"].as_str().unwrap();
    assert!(
        msg.contains("before worker-0's own assisted-service reported") && msg.contains("never approved"),
        "{msg}"
    );
    let real: Vec<String> = client_csrs(&c)
        .iter()
        .filter(|x| x["metadata"]["name"] != rogue.as_str())
        .map(|x| x["metadata"]["name"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(real.len(), 1, "{all}");
    assert!(approved(&c, &real[0]), "{all}");
    assert_eq!(code, 7, "{all}");
}

/// `approve --watch --yes` alone, no monitor (issue 22 item 1): approve follows the host's own
/// assisted-service itself and records its reboot, so the kubelet's client CSR is approved and
/// the node joins. Once with a static host; once with a DHCP host whose address is given with
/// `--node NAME=IP`.
#[test]
fn approve_watch_alone_records_the_reboot_and_the_node_joins() {
    approve_watch_alone(false);
}

/// The DHCP half of [`approve_watch_alone_records_the_reboot_and_the_node_joins`].
#[test]
fn approve_watch_alone_records_a_dhcp_hosts_reboot_given_with_node() {
    approve_watch_alone(true);
}

fn approve_watch_alone(dhcp: bool) {
    require_netns!();
    {
        let w = Work::new();
        let c = cluster("", &w);
        let host = if dhcp { dhcp_host(W0) } else { static_host(W0, 24) };
        let iso = add_nodes_iso(&c, &w, &[host]);
        let ap_log = w.path("approve.log");
        let node_flag = format!("{}={}", W0.0, W0.2);
        let mut args = vec!["approve", "--watch", "--yes", "--timeout", "200s"];
        if dhcp {
            args.extend(["--node", &node_flag]);
        }
        let mut ap = spawn_logged(plugin_cmd(&c, &w, &args), &ap_log);
        let (mut bt, boot_log) = boot(&c, &w, &iso, &[]);
        let code = wait_exit(&mut ap, 220, &ap_log);
        let boot_code = wait_exit(&mut bt, 60, &boot_log);
        let all = format!(
            "dhcp {dhcp}: approve exit {code}\n{}\nboot:\n{}",
            read(&ap_log),
            read(&boot_log)
        );
        assert_eq!(code, 0, "{all}");
        assert_eq!(boot_code, 0, "{all}");
        assert!(node_ready_with_serving_cert(&c, "worker-0"), "{all}");
        let log = read(&ap_log);
        assert!(log.contains("approve: following 1 host(s)"), "{all}");
        assert!(log.contains("approve: worker-0: reboot recorded ("), "{all}");
        // The record approve made, from the host's own service, before the client CSR.
        let recs = batch_records(&c);
        let reboot = &recs[0]["reboots"][0];
        assert_eq!(reboot["host"], "worker-0", "{:#}", recs[0]);
        assert_eq!(reboot["ip"], W0.2);
        assert!(reboot["by"].as_str().is_some_and(|b| !b.is_empty()), "{reboot:#}");
        let client = &recs[0]["approvals"]
            .as_array()
            .unwrap()
            .iter()
            .find(|a| a["kind"] == "client")
            .cloned()
            .unwrap_or_else(|| panic!("no client approval: {:#}", recs[0]));
        assert!(client["csr"].as_str().is_some(), "{client:#}");
        assert!(!log.contains("boot-unverified"), "{all}");
    }
}

/// A re-install is re-bound (issue 22 item 3): after worker-0 joined, its Node is deleted as for
/// a re-install and a rogue client CSR is posted; `approve --reissue worker-0 --yes` holds it
/// (`reissue-unbound`: no reboot recorded after the approved client CSR) instead of approving it.
#[test]
fn a_reissue_needs_a_reboot_recorded_after_the_first_approval() {
    require_netns!();
    let w = Work::new();
    let c = cluster("", &w);
    let iso = add_worker_0(&c, &w);
    let ap_log = w.path("approve.log");
    let mut ap = spawn_logged(
        plugin_cmd(&c, &w, &["approve", "--watch", "--yes", "--timeout", "150s"]),
        &ap_log,
    );
    let (mut bt, boot_log) = boot(&c, &w, &iso, &[]);
    assert_eq!(
        wait_exit(&mut bt, 150, &boot_log),
        0,
        "{}\n{}",
        read(&boot_log),
        read(&ap_log)
    );
    assert_eq!(wait_exit(&mut ap, 60, &ap_log), 0, "{}", read(&ap_log));
    let o = c.kubectl(&["delete", "node", "worker-0"]);
    assert!(o.status.success(), "{}", text(&o));
    let rogue = rogue_csr(&c, "worker-0");
    let o = approve(&c, &w, &["--reissue", "worker-0", "--yes", "-o", "json"]);
    let doc = json_of(&o);
    let r = row(&doc, &rogue);
    assert_eq!(r["action"], "held", "{}", text(&o));
    assert_eq!(codes(&r), ["reissue-unbound"], "{r:#}");
    assert!(!approved(&c, &rogue), "{}", text(&o));
    assert_eq!(o.status.code(), Some(7), "{}", text(&o));
}

/// A node whose kubelet re-keyed twice (three client CSRs, each with a new key, spaced by the
/// kubelet's retry) gets the newest approved, the older ones shown as superseded, and joins; the
/// abandoned attempts do not make the run exit 7.
#[test]
fn a_node_approved_after_two_kubelet_retries_joins() {
    require_netns!();
    let w = Work::new();
    let c = cluster("", &w);
    let iso = add_worker_0(&c, &w);
    let (_mon, mon_log) = monitor(&c, &w);
    let (mut bt, boot_log) = boot(&c, &w, &iso, &["--kubelet-retry", "6s"]);
    wait_for(&boot_log, "(kubelet re-keying)", 2, 120);
    let o = approve(
        &c,
        &w,
        &[
            "--watch",
            "--yes",
            "--kubelet-retry",
            "6s",
            "--timeout",
            "90s",
            "-o",
            "json",
        ],
    );
    let boot_code = wait_exit(&mut bt, 60, &boot_log);
    let all = format!(
        "{}\nboot:\n{}\nmonitor:\n{}",
        text(&o),
        read(&boot_log),
        read(&mon_log)
    );
    assert_eq!(boot_code, 0, "{all}");
    assert!(node_ready_with_serving_cert(&c, "worker-0"), "{all}");
    let mut csrs = client_csrs(&c);
    csrs.sort_by_key(|x| x["metadata"]["creationTimestamp"].as_str().unwrap().to_string());
    assert_eq!(csrs.len(), 3, "{all}");
    let names: Vec<&str> = csrs
        .iter()
        .map(|x| x["metadata"]["name"].as_str().unwrap())
        .collect();
    assert!(approved(&c, names[2]), "the newest is approved: {all}");
    assert!(!approved(&c, names[0]) && !approved(&c, names[1]), "{all}");
    let doc = json_of(&o);
    assert_eq!(row(&doc, names[2])["action"], "approved", "{all}");
    for old in &names[..2] {
        assert_eq!(codes(&row(&doc, old)), ["superseded"], "{all}");
    }
    assert!(doc["alarms"].as_array().unwrap().is_empty(), "{all}");
    assert_eq!(o.status.code(), Some(0), "{all}");
}

/// A rogue client CSR racing the real one within seconds (both after the reboot record, with
/// different keys, closer than any kubelet re-keys): both are held, and approve says a second
/// requester exists, in its output and in `-o json`'s alarms with both CSRs' times and
/// requesters.
#[test]
fn a_rogue_client_csr_racing_the_real_one_is_held_with_the_alarm() {
    require_netns!();
    let w = Work::new();
    let c = cluster("", &w);
    let iso = add_worker_0(&c, &w);
    let (_mon, mon_log) = monitor(&c, &w);
    let (_bt, boot_log) = boot(&c, &w, &iso, &[]);
    let log = wait_for(&boot_log, "client CSR csr-", 1, 120);
    let rogue = rogue_csr(&c, "worker-0");
    let real = log
        .split("client CSR ")
        .nth(1)
        .and_then(|s| s.split_whitespace().next())
        .unwrap()
        .to_string();
    wait_for(&mon_log, "reboot recorded on batch", 1, 30);
    let o = approve(&c, &w, &["--yes", "-o", "json"]);
    let all = format!(
        "{}\nboot:\n{}\nmonitor:\n{}",
        text(&o),
        read(&boot_log),
        read(&mon_log)
    );
    assert_eq!(o.status.code(), Some(7), "{all}");
    assert!(!approved(&c, &rogue) && !approved(&c, &real), "{all}");
    let doc = json_of(&o);
    for n in [&real, &rogue] {
        assert_eq!(codes(&row(&doc, n)), ["second-requester"], "{all}");
        // Waiting for someone to sort the rivals out: held, not rejected for good.
        assert_eq!(row(&doc, n)["action"], "held", "{all}");
    }
    let alarms = doc["alarms"].as_array().unwrap();
    assert_eq!(alarms.len(), 1, "{all}");
    let a = &alarms[0];
    assert_eq!(a["code"], "second-requester");
    assert_eq!(a["node"], "worker-0");
    let names: Vec<&str> = a["csrs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x["name"].as_str().unwrap())
        .collect();
    assert!(
        names.contains(&real.as_str()) && names.contains(&rogue.as_str()),
        "{a:#}"
    );
    for x in a["csrs"].as_array().unwrap() {
        assert_eq!(x["requester"], BOOTSTRAPPER, "{a:#}");
        assert!(
            x["created"].as_str().is_some_and(|t| t.starts_with("20")),
            "{a:#}"
        );
    }
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("alarm: worker-0: a second requester exists"),
        "{all}"
    );
}

/// Once the node joined, a client CSR it sends as itself (`system:node:worker-0`, a renewal)
/// is no alarm; a bootstrapper client CSR in its name is a possible impostor, reported by
/// approve (stderr and `-o json`) and by monitor, with both CSRs' times and requesters.
#[test]
fn a_renewal_after_join_is_not_an_alarm_a_bootstrap_request_is() {
    require_netns!();
    let w = Work::new();
    let c = cluster("", &w);
    let iso = add_worker_0(&c, &w);
    let (mut mon, mon_log) = monitor(&c, &w);
    let ap_log = w.path("approve.log");
    let mut ap = spawn_logged(
        plugin_cmd(&c, &w, &["approve", "--watch", "--yes", "--timeout", "150s"]),
        &ap_log,
    );
    let (mut bt, boot_log) = boot(&c, &w, &iso, &[]);
    assert_eq!(
        wait_exit(&mut bt, 150, &boot_log),
        0,
        "{}\n{}",
        read(&boot_log),
        read(&ap_log)
    );
    assert_eq!(wait_exit(&mut ap, 60, &ap_log), 0, "{}", read(&ap_log));
    wait_exit(&mut mon, 60, &mon_log);
    let real = client_csrs(&c)[0]["metadata"]["name"]
        .as_str()
        .unwrap()
        .to_string();

    // The node's own renewal: requested as system:node:worker-0.
    use base64::Engine;
    let key = rcgen::KeyPair::generate().unwrap();
    let mut dn = rcgen::DistinguishedName::new();
    dn.push(rcgen::DnType::OrganizationName, "system:nodes");
    dn.push(rcgen::DnType::CommonName, "system:node:worker-0");
    let mut p = rcgen::CertificateParams::default();
    p.distinguished_name = dn;
    let pem = p.serialize_request(&key).unwrap().pem().unwrap();
    let obj = json!({
        "apiVersion": "certificates.k8s.io/v1",
        "kind": "CertificateSigningRequest",
        "metadata": {"name": "renewal-worker-0"},
        "spec": {"request": base64::engine::general_purpose::STANDARD.encode(pem), "signerName": CLIENT_SIGNER,
                 "usages": ["digital signature", "client auth"]},
    });
    let k = c.kubectl_stdin(
        &[
            "--as",
            "system:node:worker-0",
            "--as-group",
            "system:nodes",
            "--as-group",
            "system:authenticated",
            "create",
            "-f",
            "-",
        ],
        &obj.to_string(),
    );
    assert!(k.status.success(), "{}", text(&k));
    let o = approve(&c, &w, &["--dry-run", "-o", "json"]);
    let doc = json_of(&o);
    assert!(
        doc["alarms"].as_array().unwrap().is_empty(),
        "a renewal is no alarm: {}",
        text(&o)
    );
    assert!(
        !String::from_utf8_lossy(&o.stderr).contains("alarm:"),
        "{}",
        text(&o)
    );

    // A bootstrap request in its name after the approval.
    let rogue = rogue_csr(&c, "worker-0");
    let o = approve(&c, &w, &["--dry-run", "-o", "json"]);
    let doc = json_of(&o);
    let alarms = doc["alarms"].as_array().unwrap();
    assert_eq!(alarms.len(), 1, "{}", text(&o));
    let a = &alarms[0];
    assert_eq!(a["code"], "possible-impostor", "{a:#}");
    assert_eq!(a["csrs"][0]["name"], real.as_str(), "{a:#}");
    assert_eq!(a["csrs"][0]["state"], "approved", "{a:#}");
    assert_eq!(a["csrs"][1]["name"], rogue.as_str(), "{a:#}");
    for x in a["csrs"].as_array().unwrap() {
        assert_eq!(x["requester"], BOOTSTRAPPER, "{a:#}");
        assert!(
            x["created"].as_str().is_some_and(|t| t.starts_with("20")),
            "{a:#}"
        );
    }
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains(&format!("alarm: worker-0: possible impostor: client CSR {rogue}")),
        "{}",
        text(&o)
    );
    assert!(!approved(&c, &rogue));

    // monitor says it too, as an `alarm` event.
    let o = plugin(&c, &w, &["monitor", "--timeout", "10s", "-o", "json"]);
    let ev: Vec<Value> = String::from_utf8_lossy(&o.stdout)
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    let al = ev
        .iter()
        .find(|e| e["event"] == "alarm")
        .unwrap_or_else(|| panic!("no alarm event: {}", text(&o)));
    assert_eq!(al["code"], "possible-impostor", "{al:#}");
    assert_eq!(al["node"], "worker-0");
    assert_eq!(al["csrs"][1]["name"], rogue.as_str(), "{al:#}");

    // --deny-invalid --yes denies the rogue (node-exists); a denied CSR is handled: exit 0, and
    // no advice to deny what was just denied.
    let k = c.kubectl(&["delete", "csr", "renewal-worker-0"]);
    assert!(k.status.success(), "{}", text(&k));
    let o = approve(&c, &w, &["--deny-invalid", "--yes"]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains(&format!("denied {rogue}")), "{}", text(&o));
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert!(
        !err.contains("exit 7") && !err.contains("unless you deny them"),
        "{}",
        text(&o)
    );
}

/// The trial's race: a rogue client CSR posted after the host's reboot record and before its
/// kubelet's is approved by `approve --yes`; the real kubelet's CSR then comes and no Node ever
/// registers. The alarm must not call the real one someone else's: either may be the
/// impostor, the approved one is suspect, deleting a CSR revokes nothing, `--reissue` only after
/// checking the console; the waiting line agrees; monitor never says `joined` without a Node.
#[test]
fn a_rogue_that_won_the_race_is_the_suspect_when_no_node_registers() {
    require_netns!();
    let w = Work::new();
    let c = cluster("", &w);
    let iso = add_worker_0(&c, &w);
    let (_mon, mon_log) = monitor(&c, &w);
    let (_bt, boot_log) = boot(&c, &w, &iso, &[]);
    wait_for(&mon_log, "reboot recorded on batch", 1, 120);
    let rogue = rogue_csr(&c, "worker-0");
    let o = approve(&c, &w, &["--yes", "-o", "json"]);
    let all = || {
        format!(
            "{}\nboot:\n{}\nmonitor:\n{}",
            text(&o),
            read(&boot_log),
            read(&mon_log)
        )
    };
    assert!(
        !read(&boot_log).contains("client CSR csr-") || approved(&c, &rogue),
        "the real kubelet asked first; the race was not won: {}",
        all()
    );
    assert!(approved(&c, &rogue), "{}", all());
    let log = wait_for(&boot_log, "client CSR csr-", 1, 60);
    let real = log
        .split("client CSR ")
        .nth(1)
        .and_then(|s| s.split_whitespace().next())
        .unwrap()
        .to_string();
    assert_ne!(real, rogue);
    let o = approve(&c, &w, &["--dry-run", "-o", "json"]);
    let all = format!("{}\nmonitor:\n{}", text(&o), read(&mon_log));
    assert_eq!(o.status.code(), Some(7), "{all}");
    let doc = json_of(&o);
    let alarms = doc["alarms"].as_array().unwrap();
    assert_eq!(alarms.len(), 1, "{all}");
    let m = alarms[0]["message"].as_str().unwrap();
    assert_eq!(alarms[0]["csrs"][0]["name"], rogue.as_str(), "{all}");
    for want in [
        "either may be the impostor",
        "the approved one is suspect because no Node appeared after its approval",
        "console",
        &format!("the certificate issued for {rogue} stays valid until its notAfter"),
        "Kubernetes has no certificate revocation",
        "`approve --reissue worker-0`",
    ] {
        assert!(m.contains(want), "{want}: {m}");
    }
    assert!(
        !m.contains("renews as") && !m.contains("comes from another holder"),
        "{m}"
    );
    assert!(
        !m.contains(&format!("then delete it (oc delete csr {real})")),
        "{m}"
    );
    // The real one's reason and the waiting line say the same: --reissue only once checked.
    let r = row(&doc, &real);
    assert_eq!(r["action"], "rejected", "{all}");
    let why = r["reasons"][0]["message"].as_str().unwrap();
    assert!(
        why.contains("no Node worker-0 registered")
            && why.contains("only once you have checked on worker-0's console"),
        "{why}"
    );
    let err = String::from_utf8_lossy(&o.stderr);
    let waiting = err
        .lines()
        .find(|l| l.starts_with("waiting: worker-0"))
        .unwrap_or_else(|| panic!("{all}"));
    assert!(waiting.contains("only once you have checked"), "{waiting}");
    // monitor: client-approved while no Node exists, never joined.
    let evs: Vec<Value> = read(&mon_log)
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    let stages: Vec<&str> = evs
        .iter()
        .filter(|e| e["event"] == "stage" && e["node"] == "worker-0")
        .filter_map(|e| e["stage"].as_str())
        .collect();
    assert!(!stages.contains(&"joined"), "{stages:?}\n{all}");
    let ok = wait_for(&mon_log, "waiting for the kubelet to register the Node", 1, 30);
    assert!(ok.contains("\"stage\":\"client-approved\""), "{ok}");
}

/// No reboot record (no monitor ran): the kubelet's client CSR is held (HOLD, "held",
/// waitsFor client-csr-held), not rejected, and the hint says to wait for monitor's record or
/// check the console; `--trust-unverified-boot` approves it with a warning and the JSON mark.
#[test]
fn an_unverified_boot_is_held_and_trusting_it_is_warned() {
    require_netns!();
    let w = Work::new();
    let c = cluster("", &w);
    let iso = add_worker_0(&c, &w);
    let (_bt, boot_log) = boot(&c, &w, &iso, &[]);
    let log = wait_for(&boot_log, "client CSR csr-", 1, 120);
    let real = log
        .split("client CSR ")
        .nth(1)
        .and_then(|s| s.split_whitespace().next())
        .unwrap()
        .to_string();
    let o = approve(&c, &w, &["--dry-run", "-o", "wide"]);
    assert_eq!(o.status.code(), Some(7), "{}", text(&o));
    let out = String::from_utf8_lossy(&o.stdout);
    let line = out
        .lines()
        .find(|l| l.starts_with(&real))
        .unwrap_or_else(|| panic!("{}", text(&o)));
    assert!(line.contains("HOLD") && !line.contains("REJECT"), "{line}");
    assert!(line.contains("node-bootstrapper (SA)"), "{line}");
    assert!(
        line.contains("if a watch follows this host, wait for its reboot record"),
        "{line}"
    );
    let o = approve(&c, &w, &["--dry-run", "-o", "json"]);
    let doc = json_of(&o);
    let r = row(&doc, &real);
    assert_eq!(r["action"], "held", "{doc:#}");
    assert_eq!(codes(&r), ["boot-unverified"]);
    assert_eq!(doc["waiting"][0]["waitsFor"], "client-csr-held", "{doc:#}");
    assert!(r.get("unverifiedBoot").is_none(), "{r:#}");

    // A monitor started after the host rebooted: the stage stays waiting-for-boot (the same
    // facts fit a rogue CSR before boot), but once the host stayed silent for 30 s while its
    // kubelet asks, one warning says its reboot may have been missed and the way forward
    // (issue 22 item 1); the node waits on a decision about that CSR, so the timeout exits 7.
    // `approve --watch` alone, meanwhile, says the same once and exits 7 as well.
    let watch = plugin_cmd(&c, &w, &["approve", "--watch", "--yes", "--timeout", "34s"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let o = plugin(
        &c,
        &w,
        &[
            "monitor",
            "--timeout",
            "33s",
            "--poll-interval",
            "1s",
            "-o",
            "json",
        ],
    );
    assert_eq!(o.status.code(), Some(7), "{}", text(&o));
    let out = String::from_utf8_lossy(&o.stdout);
    let evs: Vec<Value> = out.lines().filter_map(|l| serde_json::from_str(l).ok()).collect();
    let watched = watch.wait_with_output().unwrap();
    assert_eq!(watched.status.code(), Some(7), "{}", text(&watched));
    let err = String::from_utf8_lossy(&watched.stderr);
    assert_eq!(
        err.matches(&format!(
            "warning: client CSR {real} asks in worker-0's name, but worker-0's live system has not answered"
        ))
        .count(),
        1,
        "{err}"
    );
    let missed: Vec<&Value> = evs
        .iter()
        .filter(|e| {
            e["event"] == "warning"
                && e["message"]
                    .as_str()
                    .is_some_and(|m| m.contains("its reboot was missed"))
        })
        .collect();
    assert_eq!(missed.len(), 1, "once: {out}");
    let m = missed[0]["message"].as_str().unwrap();
    assert!(
        m.contains(&format!("client CSR {real} asks in worker-0's name"))
            && m.contains("--trust-unverified-boot` on a terminal"),
        "{m}"
    );
    assert!(
        evs.iter()
            .filter(|e| e["event"] == "stage")
            .all(|e| e["stage"] == "waiting-for-boot"),
        "{out}"
    );

    let o = approve(&c, &w, &["--yes", "--trust-unverified-boot", "-o", "json"]);
    let doc = json_of(&o);
    let r = row(&doc, &real);
    assert_eq!(r["action"], "approved", "{}", text(&o));
    assert_eq!(r["unverifiedBoot"], true, "{r:#}");
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains(&format!(
            "warning: client CSR {real} for worker-0 was approved without a reboot record (--trust-unverified-boot)"
        )),
        "{}",
        text(&o)
    );
}

/// A client CSR from a replaced image (made before the batch that replaced it was recorded) is
/// never approved; once the node joined from the new image, `approve --watch` says so in a
/// `note:` and exits 0, without telling anyone to delete the Node.
#[test]
fn a_client_csr_from_a_replaced_image_does_not_fail_the_watch_or_blame_the_node() {
    require_netns!();
    let w = Work::new();
    let c = cluster("", &w);
    add_worker_0(&c, &w);
    // The first image's machine asked (or someone did) before the image was replaced.
    let stale = rogue_csr(&c, "worker-0");
    std::thread::sleep(Duration::from_secs(1));
    // add-nodes again for the same host: the earlier batch is replaced.
    let nc = w.path("nodes-config.yaml");
    let out2 = w.path("out2");
    let o = plugin(
        &c,
        &w,
        &[
            "add-nodes",
            "--nodes-config",
            nc.to_str().unwrap(),
            "--dir",
            out2.to_str().unwrap(),
        ],
    );
    assert!(o.status.success(), "add-nodes again: {}", text(&o));
    assert_eq!(batch_records(&c).len(), 1, "the first batch was replaced");
    let (_mon, mon_log) = monitor(&c, &w);
    let ap_log = w.path("approve.log");
    let mut ap = spawn_logged(
        plugin_cmd(&c, &w, &["approve", "--watch", "--yes", "--timeout", "150s"]),
        &ap_log,
    );
    let (mut bt, boot_log) = boot(&c, &w, &out2.join("node.x86_64.iso"), &[]);
    let code = wait_exit(&mut ap, 170, &ap_log);
    let all = format!(
        "approve exit {code}:\n{}\nboot:\n{}\nmonitor:\n{}",
        read(&ap_log),
        read(&boot_log),
        read(&mon_log)
    );
    assert_eq!(wait_exit(&mut bt, 60, &boot_log), 0, "{all}");
    assert!(node_ready_with_serving_cert(&c, "worker-0"), "{all}");
    assert!(!approved(&c, &stale), "{all}");
    assert_eq!(code, 0, "{all}");
    let log = read(&ap_log);
    assert!(
        log.contains(&format!(
            "note: client CSR {stale} for worker-0 was made before its batch was recorded (from a replaced image"
        )),
        "{all}"
    );
    assert!(!log.contains("oc delete node"), "{all}");
}

/// A rogue pending client CSR posted before boot does not hide the host's progress in
/// `monitor --approve --yes`: its stages come from its own service until the reboot, then from
/// its own CSRs (never back to client-csr-pending for the rogue); the rogue's boot-unverified
/// verdict before the reboot says that monitor waits for the reboot report, not to pass
/// --trust-unverified-boot.
#[test]
fn a_rogue_csr_before_boot_does_not_set_the_hosts_stage_in_monitor() {
    require_netns!();
    let w = Work::new();
    let c = cluster("", &w);
    let iso = add_worker_0(&c, &w);
    let rogue = rogue_csr(&c, "worker-0");
    // Older than the reboot report by more than the 2 s of clock skew approve allows (the
    // simulated install takes seconds, a real one many minutes).
    std::thread::sleep(Duration::from_secs(4));
    let mon_log = w.path("monitor.log");
    let mut mon = spawn_logged(
        plugin_cmd(
            &c,
            &w,
            &[
                "monitor",
                "--approve",
                "--yes",
                "--poll-interval",
                "100ms",
                "--timeout",
                "200s",
                "-o",
                "json",
            ],
        ),
        &mon_log,
    );
    std::thread::sleep(Duration::from_millis(1500));
    let (mut bt, boot_log) = boot(&c, &w, &iso, &[]);
    let booted = wait_exit(&mut bt, 150, &mon_log);
    assert_eq!(booted, 0, "{}", read(&boot_log));
    let code = wait_exit(&mut mon, 90, &mon_log);
    let all = format!("monitor:\n{}\nboot:\n{}", read(&mon_log), read(&boot_log));
    assert_eq!(code, 0, "{all}");
    assert!(!approved(&c, &rogue), "{all}");
    let evs: Vec<Value> = read(&mon_log)
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    let stages: Vec<(String, String)> = evs
        .iter()
        .filter(|e| e["event"] == "stage" && e["node"] == "worker-0")
        .map(|e| {
            (
                e["stage"].as_str().unwrap_or("").to_string(),
                e["message"].as_str().unwrap_or("").to_string(),
            )
        })
        .collect();
    let names: Vec<&str> = stages.iter().map(|(s, _)| s.as_str()).collect();
    for want in ["installing", "rebooting", "done"] {
        assert!(names.contains(&want), "{want} in {names:?}\n{all}");
    }
    // Only forward: no client-csr-pending once its own CSR was approved or the Node joined.
    let approved_at = names
        .iter()
        .position(|s| *s == "client-approved" || *s == "joined");
    let approved_at = approved_at.unwrap_or_else(|| panic!("{names:?}\n{all}"));
    assert!(
        !names[approved_at..].contains(&"client-csr-pending"),
        "{names:?}\n{all}"
    );
    assert!(
        !stages.iter().any(|(_, m)| m.contains(&rogue)),
        "the rogue set a stage: {stages:?}\n{all}"
    );
    let messages: Vec<&str> = evs.iter().filter_map(|e| e["message"].as_str()).collect();
    assert!(
        !messages
            .iter()
            .any(|m| m.contains("pass --trust-unverified-boot")),
        "{all}"
    );
    assert!(
        messages.iter().any(|m| m.contains(&rogue)
            && (m.contains("waiting for worker-0's own assisted-service to report its reboot")
                || m.contains("created-before-reboot")
                || m.contains("before worker-0's own assisted-service reported"))),
        "{all}"
    );
}

/// Finding 1: a re-imaged host (joined from batch A, its Node deleted, `add-nodes --reimage`
/// makes batch B) gets its own reboot record on B from monitor (A's says nothing about the new
/// image's boot), approve binds the new kubelet's CSR to B's record and approves it without
/// `--reissue` (A's approvals do not count against B: issue 22 item 3, the serving CSR was
/// never approved), the node joins again, and monitor raises no impostor alarm against it.
#[test]
fn a_reimaged_host_gets_a_reboot_record_on_its_new_batch_and_joins_again() {
    require_netns!();
    let w = Work::new();
    let c = cluster("", &w);
    let iso = add_worker_0(&c, &w);
    let (mon, mon_log) = monitor(&c, &w);
    let ap_log = w.path("approve-a.log");
    let mut ap = spawn_logged(
        plugin_cmd(&c, &w, &["approve", "--watch", "--yes", "--timeout", "150s"]),
        &ap_log,
    );
    let (mut bt, boot_log) = boot(&c, &w, &iso, &[]);
    let code = wait_exit(&mut ap, 170, &ap_log);
    assert_eq!(wait_exit(&mut bt, 60, &boot_log), 0, "{}", read(&boot_log));
    assert_eq!(code, 0, "{}\nmonitor:\n{}", read(&ap_log), read(&mon_log));
    drop(mon);
    let a_csrs: Vec<String> = client_csrs(&c)
        .iter()
        .map(|x| x["metadata"]["name"].as_str().unwrap().to_string())
        .collect();

    // Re-image: the Node goes, a new batch for the same host. A real re-install takes minutes;
    // here the new boot's record comes at least the 2 s of clock skew after the old approval.
    std::thread::sleep(Duration::from_secs(4));
    let k = c.kubectl(&["delete", "node", "worker-0"]);
    assert!(k.status.success(), "{}", text(&k));
    let nc = w.path("nodes-config.yaml");
    let out2 = w.path("out2");
    let o = plugin(
        &c,
        &w,
        &[
            "add-nodes",
            "--nodes-config",
            nc.to_str().unwrap(),
            "--reimage",
            "worker-0",
            "--dir",
            out2.to_str().unwrap(),
            "-o",
            "json",
        ],
    );
    assert!(o.status.success(), "add-nodes --reimage: {}", text(&o));
    let b = json_of(&o)["batch"].as_str().unwrap().to_string();
    assert_eq!(batch_records(&c).len(), 2, "batch A is kept");

    let mon2_log = w.path("monitor-b.log");
    let _mon2 = spawn_logged(
        plugin_cmd(
            &c,
            &w,
            &[
                "monitor",
                "--poll-interval",
                "100ms",
                "--timeout",
                "240s",
                "-o",
                "json",
            ],
        ),
        &mon2_log,
    );
    let ap2_log = w.path("approve-b.log");
    let mut ap2 = spawn_logged(
        plugin_cmd(&c, &w, &["approve", "--watch", "--yes", "--timeout", "150s"]),
        &ap2_log,
    );
    let boot2_log = w.path("boot-b.log");
    let cmd = boot_cmd(
        &c,
        &["--iso", out2.join("node.x86_64.iso").to_str().unwrap()],
        &[W0],
        150,
        "240s",
    );
    let mut bt2 = spawn_logged(cmd, &boot2_log);
    let code = wait_exit(&mut ap2, 170, &ap2_log);
    let all = format!(
        "approve exit {code}:\n{}\nboot:\n{}\nmonitor:\n{}",
        read(&ap2_log),
        read(&boot2_log),
        read(&mon2_log)
    );
    assert_eq!(wait_exit(&mut bt2, 60, &boot2_log), 0, "{all}");
    assert!(node_ready_with_serving_cert(&c, "worker-0"), "{all}");
    let recs = batch_records(&c);
    let rec_b = recs.iter().find(|r| r["name"] == b.as_str()).expect("batch B");
    assert_eq!(
        rec_b["reboots"][0]["host"], "worker-0",
        "B has its own reboot record: {rec_b:#}\n{all}"
    );
    let new: Vec<String> = client_csrs(&c)
        .iter()
        .map(|x| x["metadata"]["name"].as_str().unwrap().to_string())
        .filter(|n| !a_csrs.contains(n))
        .collect();
    assert_eq!(new.len(), 1, "{all}");
    assert!(approved(&c, &new[0]), "{all}");
    assert_eq!(code, 0, "{all}");
    let mon = read(&mon2_log);
    assert!(mon.contains(&format!("reboot recorded on batch {b}")), "{all}");
    assert!(
        !mon.contains("\"alarm\""),
        "no impostor alarm against the genuine machine: {all}"
    );
}
