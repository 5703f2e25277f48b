//! Test helpers shared by the end-to-end tests of add-nodes, approve and monitor
//! (tests/add_nodes.rs, tests/approve.rs, tests/monitor.rs; the migrate and add_nodes_inputs
//! tests take a few pieces): the built plugin run against the
//! simulated cluster (agent-day2-sim) in a private network namespace, the release payload made
//! readable for add-nodes, nodes-config text, batch records, and `agent-day2-sim boot`.
//! Included by each of those test crates with `#[macro_use] #[path = "support/cluster.rs"] mod
//! cluster;`; each uses a part.

#![allow(dead_code, unused_macros)]

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};

use agent_day2_sim::harness::{bin, TestCluster};
use serde_json::{json, Value};

/// The built plugin.
pub const BIN: &str = env!("CARGO_BIN_EXE_kubectl-agent_day2");

/// Two worker machines: (hostname, MAC, IPv4 address).
pub const W0: (&str, &str, &str) = ("worker-0", "52:54:00:aa:00:30", "192.168.111.30");
pub const W1: (&str, &str, &str) = ("worker-1", "52:54:00:aa:00:31", "192.168.111.31");

/// Enters a private network namespace, or fails the test saying why (no silent return).
macro_rules! require_netns {
    () => {
        agent_day2_sim::harness::require_netns()
    };
}

/// Exit status, stdout and stderr of a finished command, for assertion messages.
pub fn text(o: &Output) -> String {
    format!(
        "status {:?}\nstdout:\n{}\nstderr:\n{}",
        o.status.code(),
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// A test's working area: a cache directory (XDG_CACHE_HOME) and an output directory.
pub struct Work {
    pub tmp: tempfile::TempDir,
}

impl Work {
    pub fn new() -> Work {
        Work {
            tmp: tempfile::tempdir().unwrap(),
        }
    }
    pub fn cache(&self) -> PathBuf {
        self.tmp.path().join("cache")
    }
    pub fn out(&self) -> PathBuf {
        self.tmp.path().join("out")
    }
    pub fn path(&self, name: &str) -> PathBuf {
        self.tmp.path().join(name)
    }
    pub fn write(&self, name: &str, body: &str) -> PathBuf {
        let p = self.path(name);
        std::fs::write(&p, body).unwrap();
        p
    }
}

/// The plugin with `args` against `c`, the work's cache, no proxies and stdin /dev/null.
pub fn plugin_cmd(c: &TestCluster, w: &Work, args: &[&str]) -> Command {
    let mut cmd = Command::new(BIN);
    cmd.args(args)
        .env("KUBECONFIG", &c.kubeconfig)
        .env("XDG_CACHE_HOME", w.cache())
        .env_remove("HTTPS_PROXY")
        .env_remove("https_proxy")
        .env_remove("HTTP_PROXY")
        .env_remove("http_proxy")
        .stdin(Stdio::null());
    cmd
}

/// `add-nodes` for `hosts` (nodes-config entries: [`static_host`], [`dhcp_host`]) into
/// `w.out()`: the node ISO's path (`out/node.x86_64.iso`). Panics with the output when add-nodes
/// fails.
pub fn add_nodes_iso(c: &TestCluster, w: &Work, hosts: &[String]) -> PathBuf {
    let nc = w.write("nodes-config.yaml", &nodes_config(hosts));
    let out = w.out();
    let o = plugin(
        c,
        w,
        &[
            "add-nodes",
            "--nodes-config",
            nc.to_str().unwrap(),
            "--dir",
            out.to_str().unwrap(),
        ],
    );
    assert!(o.status.success(), "add-nodes: {}", text(&o));
    out.join("node.x86_64.iso")
}

/// CSR `name` as the API server has it (`kubectl get csr NAME -o json`).
pub fn csr_obj(c: &TestCluster, name: &str) -> Value {
    kubectl_json(c, &["get", "csr", name, "-o", "json"])
}

/// Runs [`plugin_cmd`] to the end.
pub fn plugin(c: &TestCluster, w: &Work, args: &[&str]) -> Output {
    plugin_cmd(c, w, args).output().unwrap()
}

/// Asserts that `o` exited with `code` and said `needle` on stderr.
pub fn assert_fails(o: &Output, code: i32, needle: &str) {
    assert_eq!(o.status.code(), Some(code), "{}", text(o));
    assert!(String::from_utf8_lossy(&o.stderr).contains(needle), "{}", text(o));
}

/// stdout parsed as one JSON document (panics with the output when it is not).
pub fn json_of(o: &Output) -> Value {
    serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("not JSON ({e}):\n{}", text(o)))
}

/// `kubectl args` (which must succeed) parsed as JSON.
pub fn kubectl_json(c: &TestCluster, args: &[&str]) -> Value {
    let o = c.kubectl(args);
    assert!(o.status.success(), "kubectl {args:?}: {}", text(&o));
    serde_json::from_slice(&o.stdout).unwrap()
}

/// The release image the cluster runs (the Completed history entry).
pub fn completed_release(c: &TestCluster) -> String {
    let cv = kubectl_json(c, &["get", "clusterversion", "version", "-o", "json"]);
    cv["status"]["history"]
        .as_array()
        .unwrap()
        .iter()
        .find(|h| h["state"] == "Completed")
        .and_then(|h| h["image"].as_str())
        .unwrap()
        .to_string()
}

/// Pull spec of a fake component image (digest of `n` repeated).
pub fn component(n: char) -> String {
    format!(
        "quay.io/openshift-release-dev/ocp-v4.0-art-dev@sha256:{}",
        n.to_string().repeat(64)
    )
}

/// Makes the release payload's component images available to add-nodes for `arches` without a
/// registry: the plugin's per-release-digest cache entry in the work's cache.
pub fn seed_release(c: &TestCluster, w: &Work, arches: &[&str]) {
    let release = completed_release(c);
    let digest = release.rsplit_once('@').expect("release by digest").1.to_string();
    let imgs = json!({
        "apiServer": component('1'),
        "nodeAgent": component('2'),
        "orchestrator": component('3'),
        "utils": component('4'),
        "machineOsImages": null,
    });
    let platforms: serde_json::Map<String, Value> =
        arches.iter().map(|a| (a.to_string(), imgs.clone())).collect();
    let dir = w.cache().join("agent-day2/releases");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join(format!("{digest}.json")),
        json!({"releaseImage": release, "platforms": platforms}).to_string(),
    )
    .unwrap();
}

/// A simulated cluster of `scenario` whose release payload add-nodes can read: with the
/// simulator's own registry (`up --registry`: Debian's docker-registry holding the payload, TLS
/// from the simulator's CA, credentials in the pull secret) when /usr/bin/docker-registry is
/// installed, else without it and with [`seed_release`] (x86_64 and aarch64).
pub fn cluster(scenario: &str, w: &Work) -> TestCluster {
    let registry = agent_day2_sim::registry::REGISTRY_BIN;
    if Path::new(registry).exists() {
        TestCluster::start_with_registry(scenario).unwrap()
    } else {
        eprintln!("note: {registry} missing: component images from the plugin's cache instead of a registry");
        let c = TestCluster::start(scenario).unwrap();
        seed_release(&c, w, &["x86_64", "aarch64"]);
        c
    }
}

/// A nodes-config.yaml of `hosts` (from [`dhcp_host`] / [`static_host`]).
pub fn nodes_config(hosts: &[String]) -> String {
    format!("hosts:\n{}", hosts.join(""))
}

/// A nodes-config host entry whose address comes from DHCP.
pub fn dhcp_host((h, mac, _): (&str, &str, &str)) -> String {
    format!("- hostname: {h}\n  interfaces:\n  - name: eth0\n    macAddress: \"{mac}\"\n")
}

/// A nodes-config host entry with a static address (IPv4 or IPv6 by its form) of `prefix` bits.
pub fn static_host((h, mac, ip): (&str, &str, &str), prefix: u8) -> String {
    let fam = if ip.contains(':') { "ipv6" } else { "ipv4" };
    format!(
        "- hostname: {h}\n  rootDeviceHints:\n    deviceName: /dev/vda\n  interfaces:\n  - name: eth0\n    macAddress: \"{mac}\"\n  networkConfig:\n    interfaces:\n    - name: eth0\n      type: ethernet\n      state: up\n      mac-address: \"{mac}\"\n      {fam}:\n        enabled: true\n        dhcp: false\n        address:\n        - ip: \"{ip}\"\n          prefix-length: {prefix}\n"
    )
}

/// `kubectl get` of the batch record ConfigMaps (as JSON args).
pub const BATCH_CONFIGMAPS: &[&str] = &[
    "-n",
    "openshift-agent-day2",
    "get",
    "configmaps",
    "-l",
    "agent-day2.openshift.io/batch",
    "-o",
    "json",
];

/// The batch records (parsed batch.json of each record ConfigMap).
pub fn batch_records(c: &TestCluster) -> Vec<Value> {
    let mut recs: Vec<Value> = kubectl_json(c, BATCH_CONFIGMAPS)["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|cm| serde_json::from_str(cm["data"]["batch.json"].as_str().unwrap()).unwrap())
        .collect();
    merge_records(c, &mut recs);
    recs
}

/// The record ConfigMaps (approvals, reboot reports; one each since agent-day2/v2) added to
/// the batches' JSON (`approvals`, `reboots`), as earlier versions stored them in the batch.
pub fn merge_records(c: &TestCluster, recs: &mut [Value]) {
    let l = kubectl_json(
        c,
        &[
            "-n",
            "openshift-agent-day2",
            "get",
            "configmaps",
            "-l",
            "agent-day2.openshift.io/record-of",
            "-o",
            "json",
        ],
    );
    let mut items: Vec<&Value> = l["items"].as_array().unwrap().iter().collect();
    items.sort_by_key(|cm| cm["metadata"]["name"].as_str().unwrap_or("").to_string());
    for cm in items {
        let of = cm["metadata"]["labels"]["agent-day2.openshift.io/record-of"].clone();
        let what = cm["metadata"]["labels"]["agent-day2.openshift.io/record"]
            .as_str()
            .unwrap_or("")
            .to_string();
        let r: Value = serde_json::from_str(cm["data"]["record.json"].as_str().unwrap()).unwrap();
        if let Some(b) = recs.iter_mut().find(|b| b["name"] == of) {
            let key = if what == "approval" {
                "approvals"
            } else {
                "reboots"
            };
            if !b[key].is_array() {
                b[key] = Value::Array(vec![]);
            }
            b[key].as_array_mut().unwrap().push(r);
        }
    }
    for b in recs.iter_mut() {
        if let Some(a) = b["approvals"].as_array_mut() {
            a.sort_by_key(|x| x["at"].as_str().unwrap_or("").to_string());
        }
    }
}

/// `agent-day2-sim boot` of `image` (`--iso F`, `--pxe-dir D`, ...) for `nodes` (MAC=IP), a
/// stage delay in milliseconds and a timeout (e.g. `90s`); stdio left to the caller.
pub fn boot_cmd(
    c: &TestCluster,
    image: &[&str],
    nodes: &[(&str, &str, &str)],
    stage_delay_ms: u32,
    timeout: &str,
) -> Command {
    let mut cmd = Command::new(bin("agent-day2-sim").unwrap());
    cmd.arg("boot").arg("--dir").arg(&c.dir).args(image);
    for (_, mac, ip) in nodes {
        cmd.arg("--node").arg(format!("{mac}={ip}"));
    }
    cmd.args([
        "--stage-delay-ms",
        &stage_delay_ms.to_string(),
        "--timeout",
        timeout,
    ])
    .stdin(Stdio::null());
    cmd
}

/// A child process killed and reaped when dropped.
pub struct Kid(pub Child);

impl Drop for Kid {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}
