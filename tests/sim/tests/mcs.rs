//! The machine-config server stand-in of `agent-day2-sim up` (api::mcs): a client that trusts
//! only the CA of the seeded pointer Ignition (Secret openshift-machine-api/
//! worker-user-data-managed) downloads `https://api-int.<name>.<domain>:22623/config/worker`
//! as a new node would, and the answers for other requests are the real server's.
//! Needs root (a private network namespace).

use agent_day2_sim::harness::{enter_netns, TestCluster};
use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine;
use serde_json::Value;
use std::process::Command;

const API_INT: &str = "api-int.ostest.example.com";

/// The pointer Ignition's CA (PEM), read through the API as a client would.
fn pointer_ca(c: &TestCluster) -> (Value, String) {
    let o = c.kubectl(&[
        "-n",
        "openshift-machine-api",
        "get",
        "secret",
        "worker-user-data-managed",
        "-o",
        "jsonpath={.data.userData}",
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let ptr: Value = serde_json::from_slice(&B64.decode(&o.stdout).unwrap()).unwrap();
    let src = ptr["ignition"]["security"]["tls"]["certificateAuthorities"][0]["source"]
        .as_str()
        .unwrap()
        .to_string();
    let b64 = src.split_once("base64,").unwrap().1;
    (ptr, String::from_utf8(B64.decode(b64).unwrap()).unwrap())
}

/// curl against the MCS by name (resolved to the API's IP): (exit code, HTTP code, body).
fn get(ca: Option<&std::path::Path>, path: &str, accept: Option<&str>) -> (i32, u16, String) {
    let mut cmd = Command::new("curl");
    cmd.args(["-sS", "--max-time", "10", "-o", "-", "-w", "\n%{http_code}"])
        .args(["--resolve", &format!("{API_INT}:22623:192.168.111.5")]);
    if let Some(ca) = ca {
        cmd.arg("--cacert").arg(ca);
    }
    if let Some(a) = accept {
        cmd.arg("-H").arg(format!("Accept: {a}"));
    }
    let o = cmd
        .arg(format!("https://{API_INT}:22623{path}"))
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&o.stdout).into_owned();
    let (b, code) = out.rsplit_once('\n').unwrap_or(("", &out));
    (
        o.status.code().unwrap_or(-1),
        code.trim().parse().unwrap_or(0),
        b.to_string(),
    )
}

#[test]
fn worker_config_is_served_on_22623_under_the_pointer_ignitions_ca() {
    enter_netns().expect("a private network namespace (run as root)");
    let c = TestCluster::start("name: ostest\n").unwrap();
    let (ptr, ca_pem) = pointer_ca(&c);
    assert_eq!(
        ptr["ignition"]["config"]["merge"][0]["source"],
        format!("https://{API_INT}:22623/config/worker")
    );
    let ca = c.dir.join("pointer-ca.pem");
    std::fs::write(&ca, &ca_pem).unwrap();

    let ign3 = "application/vnd.coreos.ignition+json;version=3.2.0, */*;q=0.1";
    let (rc, code, body) = get(Some(&ca), "/config/worker", Some(ign3));
    assert_eq!((rc, code), (0, 200), "{body}\n{}", c.log());
    let cfg: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(cfg["ignition"]["version"], "3.2.0");
    // The pool's MachineConfigs (99-worker-ssh) and the appended bootstrap kubeconfig.
    assert!(
        cfg["passwd"]["users"][0]["sshAuthorizedKeys"][0]
            .as_str()
            .unwrap_or("")
            .starts_with("ssh-"),
        "{cfg:#}"
    );
    let files: Vec<&str> = cfg["storage"]["files"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|f| f["path"].as_str())
        .collect();
    assert!(files.contains(&"/etc/kubernetes/kubeconfig"), "{files:?}");

    // Spec 3.4 asked: served as 3.4.0; HEAD has no body.
    let (_, code, body) = get(
        Some(&ca),
        "/config/master",
        Some("application/vnd.coreos.ignition+json;version=3.4.0"),
    );
    assert_eq!(code, 200);
    assert_eq!(
        serde_json::from_str::<Value>(&body).unwrap()["ignition"]["version"],
        "3.4.0"
    );
    // An unknown pool: the real server's 500 (GetConfig cannot fetch the pool), empty body.
    let (_, code, body) = get(Some(&ca), "/config/infra", Some(ign3));
    assert_eq!((code, body.as_str()), (500, ""));
    // An unsupported Ignition version: 400.
    let (_, code, _) = get(
        Some(&ca),
        "/config/worker",
        Some("application/vnd.coreos.ignition+json;version=3.0.0"),
    );
    assert_eq!(code, 400);
    // No Ignition Accept (spec 2.2 on the real server): the stand-in refuses, saying so.
    let (_, code, body) = get(Some(&ca), "/config/worker", None);
    assert_eq!(code, 400);
    assert!(body.contains("stand-in"), "{body}");
    // A client trusting only the system bundle refuses the certificate (curl exit 60).
    let (rc, _, _) = get(None, "/config/worker", Some(ign3));
    assert_eq!(rc, 60, "the MCS certificate must chain to the cluster CA only");
}
