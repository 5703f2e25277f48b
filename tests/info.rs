//! `info` end to end: the built plugin against the simulated cluster (agent-day2-sim), in a
//! private network namespace. Fails (with the reason) where no namespace can be made.

use std::process::{Command, Output};

use agent_day2_sim::harness::{TestCluster, API_LISTEN};
use serde_json::Value;

const BIN: &str = env!("CARGO_BIN_EXE_kubectl-agent_day2");

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// Runs the plugin with KUBECONFIG pointing at the cluster and no proxy variables.
fn plugin(c: &TestCluster, args: &[&str]) -> Output {
    Command::new(BIN)
        .args(args)
        .env("KUBECONFIG", &c.kubeconfig)
        .env_remove("HTTPS_PROXY")
        .env_remove("https_proxy")
        .env_remove("HTTP_PROXY")
        .env_remove("http_proxy")
        .output()
        .unwrap()
}

fn json_info(c: &TestCluster, extra: &[&str]) -> Value {
    let mut args = vec!["info", "-o", "json"];
    args.extend_from_slice(extra);
    let out = plugin(c, &args);
    assert_eq!(
        out.status.code(),
        Some(0),
        "stderr: {}\nsim log:\n{}",
        text(&out.stderr),
        c.log()
    );
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("not JSON ({e}): {}", text(&out.stdout)))
}

macro_rules! require_netns {
    () => {
        agent_day2_sim::harness::require_netns();
    };
}

#[test]
fn default_cluster_report_table_json_yaml() {
    require_netns!();
    let c = TestCluster::start("").unwrap();
    let out = plugin(&c, &["info"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let t = text(&out.stdout);
    let granted = format!(
        "all {} needed permissions granted",
        agent_day2::permissions::required_permissions().len()
    );
    for needle in [
        "ostest (",
        "https://api.ostest.example.com:6443",
        "4.18.12",
        "BareMetal  (day-2 nodes supported)",
        "192.168.111.0/24  (from infrastructure)",
        "(CA found)",
        "master-0",
        granted.as_str(),
    ] {
        assert!(t.contains(needle), "missing {needle:?} in\n{t}");
    }
    assert!(
        t.lines()
            .any(|l| l.starts_with("Can add nodes") && l.ends_with(" yes")),
        "{t}"
    );
    let d = json_info(&c, &[]);
    assert_eq!(d["apiVersion"], "agent-day2/v1");
    assert_eq!(d["kind"], "ClusterInfo");
    assert_eq!(d["cluster"]["name"], "ostest");
    assert_eq!(d["cluster"]["baseDomain"], "example.com");
    assert_eq!(d["version"]["current"], "4.18.12");
    assert_eq!(d["platform"]["type"], "BareMetal");
    assert_eq!(d["architecture"]["controlPlane"], "x86_64");
    assert_eq!(d["nodes"].as_array().unwrap().len(), 3);
    let sha = d["baseIso"]["sha256"].as_str().unwrap();
    assert!(
        sha.len() == 64
            && sha
                .chars()
                .all(|c| c.is_ascii_hexdigit() && !c.is_ascii_uppercase()),
        "{sha}"
    );
    assert_eq!(d["machineConfigServer"]["caFound"], true);
    assert_eq!(d["canAddNodes"], true);
    assert_eq!(d["permissions"]["missing"].as_array().unwrap().len(), 0);
    assert!(d["permissions"]["checked"].as_u64().unwrap() > 20);
    // Flags after the subcommand or before it, -n accepted.
    let out = plugin(&c, &["--context", "admin", "info", "-n", "default", "-o", "yaml"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let y = text(&out.stdout);
    assert!(
        y.contains("kind: ClusterInfo") && y.contains("apiVersion: agent-day2/v1"),
        "{y}"
    );
}

#[test]
fn scenarios_are_reported() {
    require_netns!();
    {
        let c = TestCluster::start("sno: true\n").unwrap();
        let d = json_info(&c, &[]);
        assert_eq!(d["cluster"]["controlPlaneTopology"], "SingleReplica");
        assert_eq!(d["nodes"].as_array().unwrap().len(), 1);
    }
    {
        let c = TestCluster::start("platform: None\n").unwrap();
        let d = json_info(&c, &[]);
        assert_eq!(d["platform"]["type"], "None");
        assert_eq!(d["platform"]["day2Supported"], true);
        assert_eq!(
            d["machineNetworks"]["cidrs"].as_array().unwrap().len(),
            0,
            "{}",
            d["machineNetworks"]
        );
    }
    {
        let c = TestCluster::start("fips: true\nupgradeTo: 4.19.2\nmultiArch: true\n").unwrap();
        let d = json_info(&c, &[]);
        assert_eq!(d["fips"], true);
        assert_eq!(d["version"]["current"], "4.18.12");
        assert_eq!(d["version"]["upgradeInProgress"]["version"], "4.19.2");
        assert_eq!(d["architecture"]["multiArch"], true);
        assert_eq!(d["canAddNodes"], true);
        let out = plugin(&c, &["info"]);
        assert!(text(&out.stdout).contains("(upgrade to 4.19.2 in progress)"));
    }
    {
        let c = TestCluster::start("dualStack: true\ndisconnected: true\n").unwrap();
        let d = json_info(&c, &[]);
        let mn: Vec<&str> = d["machineNetworks"]["cidrs"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_str().unwrap())
            .collect();
        assert!(
            mn.iter().any(|c| c.contains(':')),
            "no IPv6 machine network: {mn:?}"
        );
        assert!(d["networks"]["serviceNetworks"]
            .as_array()
            .unwrap()
            .iter()
            .any(|v| v.as_str().unwrap().contains(':')));
        assert!(
            !d["mirrors"]["digestMirrors"].as_array().unwrap().is_empty(),
            "{}",
            d["mirrors"]
        );
        assert!(
            d["mirrors"]["additionalTrustedCA"].is_string(),
            "{}",
            d["mirrors"]
        );
    }
    {
        let c = TestCluster::start(
            "proxy:\n  httpProxy: http://proxy.example.com:3128\n  httpsProxy: http://proxy.example.com:3128\n  noProxy: example.com\n",
        )
        .unwrap();
        let d = json_info(&c, &[]);
        assert_eq!(d["proxy"]["httpsProxy"], "http://proxy.example.com:3128");
    }
}

#[test]
fn unreachable_server_exits_4() {
    require_netns!();
    // Nothing listens on the API address in this fresh namespace.
    let out = Command::new(BIN)
        .args([
            "info",
            "--server",
            &format!("https://{API_LISTEN}"),
            "--token",
            "x",
            "--insecure-skip-tls-verify",
        ])
        .env_remove("KUBECONFIG")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(4));
    let e = text(&out.stderr);
    assert!(
        e.contains(&format!(
            "error: cannot reach the API server at https://{API_LISTEN}/"
        )),
        "{e}"
    );
    assert!(e.contains("check --server/--context"), "{e}");
    // Said plainly, not in the HTTP client's words.
    assert!(
        e.contains("connection refused: nothing listens at that address and port"),
        "{e}"
    );
    assert!(!e.contains("ServiceError") && !e.contains("os error"), "{e}");
}

#[test]
fn bad_token_is_unauthorized() {
    require_netns!();
    let c = TestCluster::start("").unwrap();
    // A token-only context: --token replaces its token (admin's client certificate would be
    // kept alongside a --token, as kubectl does).
    let out = plugin(
        &c,
        &["info", "--context", "viewer", "--token", "not-a-valid-token"],
    );
    assert_eq!(out.status.code(), Some(4), "{}", text(&out.stderr));
    let e = text(&out.stderr);
    assert!(
        e.contains("error: unauthorized at https://192.168.111.5:6443/"),
        "{e}"
    );
    assert!(e.contains("log in again (oc login)"), "{e}");
}

#[test]
fn forbidden_pull_secret_names_it_and_the_user() {
    require_netns!();
    let c = TestCluster::start(
        "forbidden:\n- resource: secrets\n  namespace: openshift-config\n  name: pull-secret\n",
    )
    .unwrap();
    let out = plugin(&c, &["info"]);
    assert_eq!(out.status.code(), Some(4), "{}", text(&out.stderr));
    let e = text(&out.stderr);
    assert!(
        e.contains("error: cannot read Secret openshift-config/pull-secret: forbidden for user \""),
        "{e}"
    );
    assert!(e.contains("README \"Permissions\""), "{e}");
    // The verdict agrees with the exit code (issue 22 item 2: it said "yes" and exited 4).
    let t = text(&out.stdout);
    assert!(
        t.lines()
            .any(|l| l.starts_with("Can add nodes") && l.contains(" NO (1 error: see below)")),
        "{t}"
    );
    let out = plugin(&c, &["info", "-o", "json"]);
    assert_eq!(out.status.code(), Some(4), "{}", text(&out.stderr));
    let d: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(d["canAddNodes"], false, "{d}");
    assert_eq!(d["pullSecretFound"], serde_json::Value::Null, "{d}");
}

#[test]
fn missing_coreos_bootimages_is_named() {
    require_netns!();
    let c = TestCluster::start("omit:\n- configmaps/openshift-machine-config-operator/coreos-bootimages\n")
        .unwrap();
    let out = plugin(&c, &["info"]);
    assert_eq!(out.status.code(), Some(4), "{}", text(&out.stderr));
    let e = text(&out.stderr);
    assert!(
        e.contains("error: ConfigMap openshift-machine-config-operator/coreos-bootimages not found"),
        "{e}"
    );
}

#[test]
fn unsupported_platform_prints_report_and_exits_4() {
    require_netns!();
    let c = TestCluster::start("platform: AWS\n").unwrap();
    let out = plugin(&c, &["info"]);
    assert_eq!(out.status.code(), Some(4), "{}", text(&out.stderr));
    assert!(
        text(&out.stdout).contains("AWS  (day-2 nodes NOT supported)"),
        "{}",
        text(&out.stdout)
    );
    let e = text(&out.stderr);
    assert!(
        e.contains("error: the cluster cannot take day-2 nodes: platform AWS is not supported"),
        "{e}"
    );
    // The JSON document is still printed whole, with canAddNodes false.
    let out = plugin(&c, &["info", "-o", "json"]);
    assert_eq!(out.status.code(), Some(4));
    let d: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(d["canAddNodes"], false);
    assert_eq!(d["platform"]["day2Supported"], false);
}

#[test]
fn too_old_version_prints_report_and_exits_4() {
    require_netns!();
    let c = TestCluster::start("version: 4.9.59\n").unwrap();
    let out = plugin(&c, &["info"]);
    assert_eq!(out.status.code(), Some(4), "{}", text(&out.stderr));
    assert!(
        text(&out.stdout).contains("4.9.59  (UNSUPPORTED: needs 4.18 or newer)"),
        "{}",
        text(&out.stdout)
    );
    let e = text(&out.stderr);
    assert!(
        e.contains("error: the cluster cannot take day-2 nodes: OpenShift 4.9.59 is too old"),
        "{e}"
    );
}

#[test]
fn viewer_context_shows_missing_permissions() {
    require_netns!();
    let c = TestCluster::start("").unwrap();
    let out = plugin(&c, &["info", "--context", "viewer"]);
    // The viewer cannot read the pull secret: exit 4 naming it, after the permission report.
    assert_eq!(out.status.code(), Some(4), "{}", text(&out.stderr));
    let t = text(&out.stdout);
    assert!(t.contains("Missing permissions"), "{t}");
    for needle in [
        "get secrets/pull-secret -n openshift-config",
        // The node tokens' Secret, where oc adm node-image keeps it.
        "get secrets/agent-auth-token -n openshift-config",
        "update secrets/agent-auth-token -n openshift-config",
        "create secrets -n openshift-config",
        "create namespaces",
        "update certificatesigningrequests.certificates.k8s.io/approval",
        "approve signers.certificates.k8s.io/kubernetes.io/kubelet-serving",
        "approve signers.certificates.k8s.io/kubernetes.io/kube-apiserver-client-kubelet",
        "patch nodes",
    ] {
        assert!(t.contains(needle), "missing {needle:?} in\n{t}");
    }
    // Reads the viewer has are not listed.
    assert!(!t.contains("get clusterversions"), "{t}");
    // Permissions only migrate needs are counted per subcommand, not listed one by one.
    assert!(t.lines().any(|l| l.starts_with("migrate import: ")), "{t}");
    assert!(
        t.contains("(ClusterRole agent-day2-migrate in deploy/rbac.yaml"),
        "{t}"
    );
    assert!(
        !t.contains("create pods/exec"),
        "migrate-only permission listed:\n{t}"
    );
    let lines = t.lines().filter(|l| l.contains("migrate")).count();
    assert!(
        lines <= 4,
        "migrate's missing permissions take {lines} lines:\n{t}"
    );
    assert!(text(&out.stderr)
        .contains("error: cannot read Secret openshift-config/pull-secret: forbidden for user \""));

    // The counts add up: "Missing permissions (N of M checked)" is the table's rows plus the
    // per-subcommand counts, each permission counted once (issue 15 §5).
    let head = t
        .lines()
        .find(|l| l.starts_with("Missing permissions ("))
        .unwrap();
    let n: usize = head["Missing permissions (".len()..]
        .split(' ')
        .next()
        .unwrap()
        .parse()
        .unwrap();
    let section: Vec<&str> = t
        .lines()
        .skip_while(|l| !l.starts_with("Missing permissions ("))
        .skip(1)
        .take_while(|l| !l.is_empty())
        .collect();
    let rows = section
        .iter()
        .filter(|l| !l.starts_with("migrate ") && !l.to_ascii_lowercase().starts_with("permission "))
        .count();
    let counted: usize = section
        .iter()
        .filter(|l| l.starts_with("migrate "))
        .map(|l| {
            let rest = l.split_once(": ").unwrap().1;
            rest.split(' ').next().unwrap().parse::<usize>().unwrap()
        })
        .sum();
    assert_eq!(rows + counted, n, "{rows} rows + {counted} counted != {n}:\n{t}");
    // migrate status's permissions are all migrate import's too: not a line of their own.
    assert!(!t.lines().any(|l| l.starts_with("migrate status: ")), "{t}");
    assert!(t.contains("of them also for migrate status"), "{t}");
    // The hint does not send the user to the command they just ran.
    let e = text(&out.stderr);
    assert!(!e.contains("`oc agent-day2 info` shows"), "{e}");
    assert!(
        e.contains("the \"Missing permissions\" part of the report above"),
        "{e}"
    );
}

/// A one-shot HTTP proxy stand-in on `addr`: records the first request line, then hangs up.
fn recording_proxy(addr: &str) -> std::thread::JoinHandle<String> {
    use std::io::Read;
    let l = std::net::TcpListener::bind(addr).unwrap();
    std::thread::spawn(move || {
        let (mut s, _) = l.accept().unwrap();
        let mut buf = [0u8; 4096];
        let n = s.read(&mut buf).unwrap_or(0);
        String::from_utf8_lossy(&buf[..n])
            .lines()
            .next()
            .unwrap_or("")
            .to_string()
    })
}

#[test]
fn api_traffic_goes_through_the_configured_proxy() {
    require_netns!();
    // HTTPS_PROXY from the environment (no DNS happens: the proxy gets the name in CONNECT,
    // and the namespace has no route out anyway).
    let h = recording_proxy("192.168.111.9:3128");
    let out = Command::new(BIN)
        .args([
            "info",
            "-s",
            "https://api.ostest.example.com:6443",
            "--token",
            "t",
            "--request-timeout",
            "5s",
        ])
        .env_remove("KUBECONFIG")
        .env("HTTPS_PROXY", "http://192.168.111.9:3128")
        .env_remove("NO_PROXY")
        .env_remove("no_proxy")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(4), "{}", text(&out.stderr));
    assert_eq!(h.join().unwrap(), "CONNECT api.ostest.example.com:6443 HTTP/1.1");

    // The kubeconfig's proxy-url wins over the environment.
    let h = recording_proxy("192.168.111.9:3129");
    let dir = tempfile::tempdir().unwrap();
    let kc = dir.path().join("kc");
    std::fs::write(
        &kc,
        "apiVersion: v1\nkind: Config\ncurrent-context: p\nclusters:\n- name: p\n  cluster:\n    server: https://api.ostest.example.com:6443\n    proxy-url: http://192.168.111.9:3129\ncontexts:\n- name: p\n  context:\n    cluster: p\n    user: p\nusers:\n- name: p\n  user:\n    token: t\n",
    )
    .unwrap();
    let out = Command::new(BIN)
        .args([
            "info",
            "--kubeconfig",
            kc.to_str().unwrap(),
            "--request-timeout",
            "5s",
        ])
        .env("HTTPS_PROXY", "http://192.168.111.9:9")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(4), "{}", text(&out.stderr));
    assert!(text(&out.stderr).contains("cannot reach the API server at https://api.ostest.example.com:6443/"));
    assert_eq!(h.join().unwrap(), "CONNECT api.ostest.example.com:6443 HTTP/1.1");
}

#[test]
fn forbidden_optional_reads_are_unknown_and_exit_4() {
    require_netns!();
    let c = TestCluster::start(
        "forbidden:\n- resource: machineconfigs\n  name: 99-worker-fips\n- resource: proxies\n- resource: imagedigestmirrorsets\n",
    )
    .unwrap();
    let out = plugin(&c, &["info"]);
    assert_eq!(out.status.code(), Some(4), "{}", text(&out.stderr));
    let t = text(&out.stdout);
    let fips = t.lines().find(|l| l.starts_with("FIPS")).unwrap();
    assert!(
        fips.contains("unknown (cannot read MachineConfig 99-worker-fips: forbidden"),
        "{t}"
    );
    assert!(
        t.lines()
            .any(|l| l.starts_with("Proxy") && l.contains("unknown (cannot read Proxy cluster")),
        "{t}"
    );
    let e = text(&out.stderr);
    for r in [
        "MachineConfig 99-worker-fips",
        "Proxy cluster",
        "ImageDigestMirrorSets",
    ] {
        assert!(
            e.contains(&format!("error: cannot read {r}: forbidden")),
            "{r}: {e}"
        );
    }
    assert!(e.contains("README \"Permissions\""), "{e}");
    assert!(!e.contains("WARN"), "{e}");
    let out = plugin(&c, &["info", "-o", "json"]);
    assert_eq!(out.status.code(), Some(4));
    let d: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(d["fips"].is_null() && d["proxy"].is_null(), "{d}");
    assert_eq!(d["canAddNodes"], false);
    assert_eq!(
        d["unreadable"].as_array().unwrap().len(),
        3,
        "{}",
        d["unreadable"]
    );
}

#[test]
fn viewer_gets_the_partial_report_and_document() {
    require_netns!();
    let c = TestCluster::start("").unwrap();
    let out = plugin(&c, &["info", "--context", "viewer", "-o", "json"]);
    assert_eq!(out.status.code(), Some(4), "{}", text(&out.stderr));
    let d: Value =
        serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}", text(&out.stdout)));
    assert_eq!(d["cluster"]["name"], "ostest");
    assert!(d["pullSecretFound"].is_null());
    assert!(d["errors"].as_array().unwrap().iter().any(|e| e
        .as_str()
        .unwrap()
        .contains("Secret openshift-config/pull-secret")));
    let out = plugin(&c, &["info", "--context", "viewer"]);
    let t = text(&out.stdout);
    assert!(t.contains("4.18.12") && t.contains("Missing permissions"), "{t}");
}

#[test]
fn refused_impersonation_says_so() {
    require_netns!();
    let c = TestCluster::start("").unwrap();
    let out = plugin(&c, &["info", "--context", "viewer", "--as", "system:admin"]);
    assert_eq!(out.status.code(), Some(4), "{}", text(&out.stderr));
    let e = text(&out.stderr);
    assert!(
        e.contains("error: impersonation refused: ") && e.contains("cannot impersonate"),
        "{e}"
    );
    assert!(!e.contains("missing RBAC"), "{e}");
}

#[test]
fn missing_coreos_bootimages_hint_fits_every_cluster() {
    require_netns!();
    let c = TestCluster::start("omit:\n- configmaps/openshift-machine-config-operator/coreos-bootimages\n")
        .unwrap();
    let out = plugin(&c, &["info"]);
    assert_eq!(out.status.code(), Some(4));
    let e = text(&out.stderr);
    assert!(
        e.contains("--base-iso") && !e.contains("agent-based installer"),
        "{e}"
    );
    assert!(text(&out.stdout).contains("Base ISO"), "partial report printed");
}

/// The cluster's name and base domain come from install-config and the API URL, cross-checked
/// (issue 22 item 6): an API host that is not `api.<name>.<domain>` no longer stops anything;
/// install-config names the cluster, a warning says so and the report says which source.
#[test]
fn cluster_identity_from_install_config_when_the_api_host_says_nothing() {
    require_netns!();
    let c = TestCluster::start("").unwrap();
    let d = json_info(&c, &[]);
    assert_eq!(
        d["cluster"]["identitySource"], "install-config+apiServerURL",
        "{d}"
    );
    let patch = r#"{"status":{"apiServerURL":"https://kube.lab.example.com:6443"}}"#;
    let o = c.kubectl(&[
        "patch",
        "infrastructure",
        "cluster",
        "--subresource=status",
        "--type=merge",
        "-p",
        patch,
    ]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let d = json_info(&c, &[]);
    assert_eq!(d["cluster"]["identitySource"], "install-config", "{d}");
    assert_eq!(d["cluster"]["name"], "ostest", "{d}");
    assert_eq!(d["cluster"]["baseDomain"], "example.com", "{d}");
    assert_eq!(d["canAddNodes"], true, "{d}");
    let w = d["warnings"].to_string();
    assert!(
        w.contains("kube.lab.example.com is not api.<cluster name>.<base domain>"),
        "{w}"
    );
    let t = text(&plugin(&c, &["info"]).stdout);
    assert!(
        t.contains("example.com (name and domain from install-config)"),
        "{t}"
    );
}
