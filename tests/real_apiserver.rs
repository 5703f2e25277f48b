//! The simulated cluster on the REAL control plane (issue 12): `agent-day2-sim up
//! --real-apiserver` runs etcd, kube-apiserver (Node,RBAC, NodeRestriction) and
//! kube-controller-manager (CSR signing only) built by `scripts/real-components.sh kube`.
//!
//! The test is `#[ignore]`d with the reason, so a run without the binaries counts it as
//! ignored; run it with `--include-ignored` where the script has built them (a missing binary
//! or a missing root then fails the test: it never passes silently). It needs root (a network
//! namespace of its own).

use std::path::PathBuf;
use std::process::Output;
use std::time::{Duration, Instant};

use agent_day2_sim::api::authz::{authorize, Attributes, UserInfo, NODE_BOOTSTRAPPER};
use agent_day2_sim::api::real;
use agent_day2_sim::harness::{enter_netns, TestCluster};

const NEEDS: &str = "needs the real kube-apiserver: scripts/real-components.sh kube";

/// The binaries' directory; panics (the test fails) when they are missing.
fn real_bins() -> PathBuf {
    let d = real::default_kube_bin_dir();
    if let Err(e) = real::check_kube_bins(&d) {
        panic!("{NEEDS}: {e}");
    }
    d
}

fn text(o: &Output) -> String {
    format!(
        "exit {:?}\nstdout:\n{}\nstderr:\n{}",
        o.status.code(),
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// One `kubectl auth can-i` question: (verb, API group, plural, subresource, namespace, name).
type Question = (
    &'static str,
    &'static str,
    &'static str,
    Option<&'static str>,
    Option<&'static str>,
    Option<&'static str>,
);

/// `kubectl --context CONTEXT auth can-i …` → yes (exit 0) or no (exit 1); anything else fails.
fn can_i(c: &TestCluster, context: &str, q: &Question) -> bool {
    let (verb, group, plural, sub, ns, name) = *q;
    let resource = if group.is_empty() {
        plural.to_string()
    } else {
        format!("{plural}.{group}")
    };
    let resource = match name {
        Some(n) => format!("{resource}/{n}"),
        None => resource,
    };
    let mut args = vec!["--context", context, "auth", "can-i", verb, resource.as_str()];
    if let Some(s) = sub {
        args.extend(["--subresource", s]);
    }
    if let Some(n) = ns {
        args.extend(["-n", n]);
    }
    let out = c.kubectl(&args);
    match out.status.code() {
        Some(0) => true,
        Some(1) => false,
        _ => panic!("kubectl {args:?}: {}", text(&out)),
    }
}

/// What the home-made server lets `user` do ([`authorize`], no scenario switches).
fn sim_allows(user: &UserInfo, q: &Question) -> bool {
    let (verb, group, plural, sub, ns, name) = *q;
    let a = Attributes {
        verb: verb.into(),
        group: group.into(),
        resource: plural.into(),
        subresource: sub.map(String::from),
        namespace: ns.map(String::from),
        name: name.map(String::from),
    };
    authorize(user, &a, &[]).is_ok()
}

#[test]
#[ignore = "needs the real kube-apiserver: scripts/real-components.sh kube"]
fn real_apiserver_serves_the_simulated_cluster() {
    let bins = real_bins();
    if let Err(why) = enter_netns() {
        panic!("{why}");
    }
    let bins_arg = bins.to_string_lossy().to_string();
    let c = TestCluster::start_with_args("", &["--real-apiserver", &bins_arg])
        .unwrap_or_else(|e| panic!("{e:#}"));

    // The real server, with etcd behind it.
    let livez = c.kubectl(&["get", "--raw", "/livez?verbose"]);
    assert!(livez.status.success(), "{}", text(&livez));
    let body = String::from_utf8_lossy(&livez.stdout);
    assert!(body.lines().any(|l| l.trim() == "[+]etcd ok"), "{body}");
    let version = c.kubectl(&["get", "--raw", "/version"]);
    assert!(version.status.success(), "{}", text(&version));
    let v: serde_json::Value = serde_json::from_slice(&version.stdout).unwrap();
    assert_eq!(v["gitVersion"], real::pinned_kubernetes(), "{v}");

    // What `info` and `add-nodes` read: the config objects with their status, the nodes.
    let cv = c.kubectl(&[
        "get",
        "clusterversion",
        "version",
        "-o",
        "jsonpath={.status.desired.version}",
    ]);
    assert!(cv.status.success(), "{}", text(&cv));
    assert!(
        String::from_utf8_lossy(&cv.stdout).starts_with("4."),
        "{}",
        text(&cv)
    );
    let infra = c.kubectl(&[
        "get",
        "infrastructure",
        "cluster",
        "-o",
        "jsonpath={.status.apiServerURL}",
    ]);
    assert!(infra.status.success(), "{}", text(&infra));
    assert!(
        String::from_utf8_lossy(&infra.stdout).starts_with("https://api."),
        "{}",
        text(&infra)
    );
    let nodes = c.kubectl(&[
        "get",
        "nodes",
        "-o",
        "jsonpath={range .items[*]}{.metadata.name}={.status.conditions[?(@.type==\"Ready\")].status}{\"\\n\"}{end}",
    ]);
    assert!(nodes.status.success(), "{}", text(&nodes));
    let nodes = String::from_utf8_lossy(&nodes.stdout).to_string();
    assert!(
        nodes.lines().count() >= 1 && nodes.lines().all(|l| l.ends_with("=True")),
        "{nodes}"
    );

    // The viewer may do on the real server what it may do on the home-made one.
    let viewer = UserInfo {
        name: "viewer".into(),
        groups: vec!["system:authenticated".into()],
    };
    let questions: &[Question] = &[
        ("get", "", "nodes", None, None, Some("master-0")),
        ("list", "", "nodes", None, None, None),
        (
            "watch",
            "certificates.k8s.io",
            "certificatesigningrequests",
            None,
            None,
            None,
        ),
        (
            "get",
            "config.openshift.io",
            "clusterversions",
            None,
            None,
            Some("version"),
        ),
        (
            "list",
            "machineconfiguration.openshift.io",
            "machineconfigs",
            None,
            None,
            None,
        ),
        ("get", "", "configmaps", None, Some("openshift-config"), None),
        ("get", "", "pods", None, Some("multicluster-engine"), Some("p")),
        (
            "get",
            "",
            "secrets",
            None,
            Some("openshift-config"),
            Some("pull-secret"),
        ),
        ("list", "", "secrets", None, None, None),
        ("create", "", "configmaps", None, Some("x"), Some("y")),
        ("delete", "", "nodes", None, None, Some("master-0")),
        ("patch", "", "nodes", None, None, Some("master-0")),
        (
            "update",
            "certificates.k8s.io",
            "certificatesigningrequests",
            Some("approval"),
            None,
            Some("c"),
        ),
        (
            "create",
            "",
            "pods",
            Some("exec"),
            Some("multicluster-engine"),
            Some("p"),
        ),
        (
            "create",
            "authorization.k8s.io",
            "selfsubjectaccessreviews",
            None,
            None,
            None,
        ),
    ];
    let mut differ = Vec::new();
    for q in questions {
        let (real_says, sim_says) = (can_i(&c, "viewer", q), sim_allows(&viewer, q));
        if real_says != sim_says {
            differ.push(format!("{q:?}: real {real_says}, simulated {sim_says}"));
        }
    }
    assert!(
        differ.is_empty(),
        "viewer permissions differ:\n{}",
        differ.join("\n")
    );
    // Both answers occur, so the comparison means something.
    assert!(
        questions.iter().any(|q| sim_allows(&viewer, q)) && questions.iter().any(|q| !sim_allows(&viewer, q))
    );

    // The node-bootstrapper may send CSRs and nothing else.
    let boot = UserInfo {
        name: NODE_BOOTSTRAPPER.into(),
        groups: vec![
            "system:serviceaccounts".into(),
            "system:serviceaccounts:openshift-machine-config-operator".into(),
            "system:authenticated".into(),
        ],
    };
    for q in [
        (
            "create",
            "certificates.k8s.io",
            "certificatesigningrequests",
            None,
            None,
            None,
        ),
        (
            "update",
            "certificates.k8s.io",
            "certificatesigningrequests",
            Some("approval"),
            None,
            Some("c"),
        ),
        ("get", "", "nodes", None, None, None),
    ] {
        assert_eq!(
            can_i(&c, "bootstrapper", &q),
            sim_allows(&boot, &q),
            "bootstrapper {q:?}"
        );
    }

    // The CSR signing controller signs an approved kubelet client CSR with the cluster's CA.
    let csr = kubelet_client_csr("worker-9");
    let created = c.kubectl_stdin(&["--context", "bootstrapper", "create", "-f", "-"], &csr);
    assert!(created.status.success(), "{}", text(&created));
    let approved = c.kubectl(&["certificate", "approve", "csr-real-test"]);
    assert!(approved.status.success(), "{}", text(&approved));
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let got = c.kubectl(&[
            "get",
            "csr",
            "csr-real-test",
            "-o",
            "jsonpath={.status.certificate}",
        ]);
        assert!(got.status.success(), "{}", text(&got));
        if !got.stdout.is_empty() {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "kube-controller-manager signed nothing in 60 s:\n{}",
            std::fs::read_to_string(c.dir.join("kube-controller-manager.log")).unwrap_or_default()
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// A CSR object (YAML) for `system:node:<node>`'s client certificate, signer
/// `kubernetes.io/kube-apiserver-client-kubelet`, ECDSA P-256 as the kubelet makes it.
fn kubelet_client_csr(node: &str) -> String {
    use base64::Engine;
    let key = rcgen::KeyPair::generate().unwrap();
    let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
    let mut dn = rcgen::DistinguishedName::new();
    dn.push(rcgen::DnType::OrganizationName, "system:nodes");
    dn.push(rcgen::DnType::CommonName, format!("system:node:{node}"));
    params.distinguished_name = dn;
    let pem = params.serialize_request(&key).unwrap().pem().unwrap();
    let b64 = base64::engine::general_purpose::STANDARD.encode(pem);
    format!(
        "apiVersion: certificates.k8s.io/v1\nkind: CertificateSigningRequest\nmetadata:\n  name: csr-real-test\nspec:\n  request: {b64}\n  signerName: kubernetes.io/kube-apiserver-client-kubelet\n  usages: [digital signature, client auth]\n"
    )
}
