//! The simulated cluster on the REAL control plane (issue 12): `agent-day2-sim up
//! --real-apiserver` runs etcd, kube-apiserver (Node,RBAC, NodeRestriction) and
//! kube-controller-manager (CSR signing only) built by `scripts/real-components.sh kube`.
//!
//! The binaries come from `scripts/real-components.sh kube` (scripts/test.sh builds them; a
//! missing binary or a missing root fails the test, naming what to do). It needs root (a
//! network namespace of its own).

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

/// A simulated cluster on the control plane of [`real_bins`], in a network namespace of this
/// thread's own; panics saying what is missing.
fn real_cluster() -> TestCluster {
    let bins = real_bins();
    if let Err(why) = enter_netns() {
        panic!("{why}");
    }
    let bins_arg = bins.to_string_lossy().to_string();
    TestCluster::start_with_args("", &["--real-apiserver", &bins_arg]).unwrap_or_else(|e| panic!("{e:#}"))
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
fn real_apiserver_serves_the_simulated_cluster() {
    let c = real_cluster();

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

    // The machine-config server stand-in answers from the real server's MachineConfigs,
    // including one created through the API after `up`.
    let mc = "apiVersion: machineconfiguration.openshift.io/v1\nkind: MachineConfig\nmetadata:\n  name: 99-worker-real-test\n  labels:\n    machineconfiguration.openshift.io/role: worker\nspec:\n  config:\n    ignition:\n      version: 3.2.0\n    storage:\n      files:\n      - path: /etc/real-apiserver-test\n        mode: 420\n        contents:\n          source: data:,hello\n";
    let made = c.kubectl_stdin(&["create", "-f", "-"], mc);
    assert!(made.status.success(), "{}", text(&made));
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let o = std::process::Command::new("curl")
            .args(["-sS", "--max-time", "5", "--cacert"])
            .arg(c.dir.join("ca.crt"))
            .args(["--resolve", "api-int.ostest.example.com:22623:192.168.111.5"])
            .args(["-H", "Accept: application/vnd.coreos.ignition+json;version=3.2.0"])
            .arg("https://api-int.ostest.example.com:22623/config/worker")
            .output()
            .expect("curl");
        let body = String::from_utf8_lossy(&o.stdout);
        if body.contains("/etc/real-apiserver-test") {
            assert!(body.contains("\"ignition\""), "{body}");
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the MCS never served the new MachineConfig: {}\n{}",
            text(&o),
            c.log()
        );
        std::thread::sleep(Duration::from_millis(500));
    }

    // As on every cluster, a new namespace gets its `default` ServiceAccount (which the
    // ServiceAccount admission plugin wants before it admits a Pod), and a deleted one goes away
    // (kube-controller-manager's serviceaccount and namespace controllers).
    let made = c.kubectl(&["create", "namespace", "real-test"]);
    assert!(made.status.success(), "{}", text(&made));
    let deadline = Instant::now() + Duration::from_secs(20);
    while !c
        .kubectl(&["-n", "real-test", "get", "serviceaccount", "default"])
        .status
        .success()
    {
        assert!(
            Instant::now() < deadline,
            "no default ServiceAccount in a new namespace after 20 s"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let gone = c.kubectl(&["delete", "namespace", "real-test", "--timeout=30s"]);
    assert!(
        gone.status.success(),
        "a deleted namespace did not go away: {}",
        text(&gone)
    );

    // The viewer may do on the real server what it may do on the home-made one.
    let viewer = UserInfo {
        name: "viewer".into(),
        groups: vec!["system:authenticated".into()],
    };
    let questions: &[Question] = &[
        ("get", "", "nodes", None, None, Some("master-0")),
        ("get", "", "nodes", Some("status"), None, Some("master-0")),
        (
            "get",
            "",
            "pods",
            Some("log"),
            Some("multicluster-engine"),
            Some("p"),
        ),
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
    let (csr, node_key) = kubelet_client_csr("worker-9");
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

    // With that certificate the node is `system:node:worker-9` (Node authorizer and
    // NodeRestriction): it may register itself, not another node, and (upstream
    // NodeRestriction) not with a node-role label.
    let cert = c.kubectl(&[
        "get",
        "csr",
        "csr-real-test",
        "-o",
        "jsonpath={.status.certificate}",
    ]);
    let node_kc = c.dir.join("worker-9.kubeconfig");
    let ca = std::fs::read(c.dir.join("ca.crt")).unwrap();
    std::fs::write(
        &node_kc,
        node_kubeconfig(
            &c.api_url,
            &ca,
            std::str::from_utf8(&cert.stdout).unwrap().trim(),
            &node_key,
        ),
    )
    .unwrap();
    let as_node = |args: &[&str], stdin: Option<&str>| {
        let kc = node_kc.to_string_lossy().to_string();
        let mut all = vec!["--kubeconfig", kc.as_str()];
        all.extend_from_slice(args);
        match stdin {
            Some(s) => c.kubectl_stdin(&all, s),
            None => c.kubectl(&all),
        }
    };
    let who = as_node(
        &["auth", "whoami", "-o", "jsonpath={.status.userInfo.username}"],
        None,
    );
    assert_eq!(
        String::from_utf8_lossy(&who.stdout),
        "system:node:worker-9",
        "{}",
        text(&who)
    );
    let labelled = as_node(&["create", "-f", "-"], Some(&node_yaml("worker-9", true)));
    assert!(!labelled.status.success(), "{}", text(&labelled));
    assert!(
        String::from_utf8_lossy(&labelled.stderr)
            .contains("is not allowed to set the following labels: node-role.kubernetes.io/worker"),
        "{}",
        text(&labelled)
    );
    let other = as_node(&["create", "-f", "-"], Some(&node_yaml("worker-8", false)));
    assert!(!other.status.success(), "{}", text(&other));
    let own = as_node(&["create", "-f", "-"], Some(&node_yaml("worker-9", false)));
    assert!(own.status.success(), "{}", text(&own));
    let patch_other = as_node(&["label", "node", "master-0", "x=y"], None);
    assert!(!patch_other.status.success(), "{}", text(&patch_other));
    // Its own status, through the status subresource, as the kubelet posts Ready: a PATCH
    // without reading it first (the Node authorizer grants no `get nodes/status`, so `kubectl
    // patch --subresource=status`, which reads first, is refused).
    let refused = as_node(
        &[
            "patch",
            "node",
            "worker-9",
            "--subresource=status",
            "--type=merge",
            "-p",
            "{}",
        ],
        None,
    );
    assert!(
        String::from_utf8_lossy(&refused.stderr).contains("cannot get resource \"nodes/status\""),
        "{}",
        text(&refused)
    );
    patch_node_ready(&node_kc, "worker-9");
    let got = c.kubectl(&[
        "get",
        "node",
        "worker-9",
        "-o",
        "jsonpath={.status.conditions[?(@.type==\"Ready\")].status}",
    ]);
    assert_eq!(String::from_utf8_lossy(&got.stdout), "True", "{}", text(&got));
}

/// PATCHes (merge) `nodes/<name>/status` with a Ready condition, as that kubeconfig's user.
fn patch_node_ready(kubeconfig: &std::path::Path, name: &str) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let kc = kube::config::Kubeconfig::read_from(kubeconfig).unwrap();
        let cfg = kube::Config::from_custom_kubeconfig(kc, &Default::default())
            .await
            .unwrap();
        let client = kube::Client::try_from(cfg).unwrap();
        let nodes: kube::Api<k8s_openapi::api::core::v1::Node> = kube::Api::all(client);
        let ready = serde_json::json!({"status": {"conditions": [{
            "type": "Ready", "status": "True", "reason": "KubeletReady",
            "message": "kubelet is posting ready status",
            "lastHeartbeatTime": "2026-01-01T00:00:00Z", "lastTransitionTime": "2026-01-01T00:00:00Z",
        }]}});
        nodes
            .patch_status(
                name,
                &kube::api::PatchParams::default(),
                &kube::api::Patch::Merge(&ready),
            )
            .await
            .unwrap_or_else(|e| panic!("PATCH nodes/{name}/status as the node: {e}"));
    });
}

/// A Node object (YAML) named `name`, with the worker role label when `role`.
fn node_yaml(name: &str, role: bool) -> String {
    let role = if role {
        "\n    node-role.kubernetes.io/worker: \"\""
    } else {
        ""
    };
    format!("apiVersion: v1\nkind: Node\nmetadata:\n  name: {name}\n  labels:\n    kubernetes.io/hostname: {name}{role}\n")
}

/// A kubeconfig for the API at `server` with a client certificate (PEM) and its key (PEM).
fn node_kubeconfig(server: &str, ca_pem: &[u8], cert_b64: &str, key_pem: &str) -> String {
    use base64::Engine;
    let b64 = |b: &[u8]| base64::engine::general_purpose::STANDARD.encode(b);
    format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: {server}\n    certificate-authority-data: {}\nusers:\n- name: node\n  user:\n    client-certificate-data: {cert_b64}\n    client-key-data: {}\ncontexts:\n- name: node\n  context:\n    cluster: c\n    user: node\ncurrent-context: node\n",
        b64(ca_pem),
        b64(key_pem.as_bytes())
    )
}

/// A CSR object (YAML) for `system:node:<node>`'s client certificate, signer
/// `kubernetes.io/kube-apiserver-client-kubelet`, ECDSA P-256 as the kubelet makes it; and the
/// private key (PEM).
fn kubelet_client_csr(node: &str) -> (String, String) {
    use base64::Engine;
    let key = rcgen::KeyPair::generate().unwrap();
    let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
    let mut dn = rcgen::DistinguishedName::new();
    dn.push(rcgen::DnType::OrganizationName, "system:nodes");
    dn.push(rcgen::DnType::CommonName, format!("system:node:{node}"));
    params.distinguished_name = dn;
    let pem = params.serialize_request(&key).unwrap().pem().unwrap();
    let b64 = base64::engine::general_purpose::STANDARD.encode(pem);
    let csr = format!(
        "apiVersion: certificates.k8s.io/v1\nkind: CertificateSigningRequest\nmetadata:\n  name: csr-real-test\nspec:\n  request: {b64}\n  signerName: kubernetes.io/kube-apiserver-client-kubelet\n  usages: [digital signature, client auth]\n"
    );
    (csr, key.serialize_pem())
}

/// The plugin's role of each command (deploy/rbac.yaml's header; tests/rbac.rs checks it
/// statically).
fn role_for(command: &str) -> &'static str {
    match command {
        "info" | "add-nodes" => "agent-day2-add-nodes",
        "approve" | "monitor" => "agent-day2-approve",
        "migrate import" | "migrate status" => "agent-day2-migrate",
        "migrate wait" => "agent-day2-migrate-wait",
        other => panic!("no role for {other}"),
    }
}

/// A kubeconfig for user `user` in group `group`, made as a cluster admin makes a user: a CSR
/// for signer `kubernetes.io/kube-apiserver-client` (CN user, O group), approved by the admin,
/// signed by kube-controller-manager.
fn user_kubeconfig(c: &TestCluster, user: &str, group: Option<&str>) -> PathBuf {
    use base64::Engine;
    let key = rcgen::KeyPair::generate().unwrap();
    let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
    let mut dn = rcgen::DistinguishedName::new();
    if let Some(g) = group {
        dn.push(rcgen::DnType::OrganizationName, g);
    }
    dn.push(rcgen::DnType::CommonName, user);
    params.distinguished_name = dn;
    let pem = params.serialize_request(&key).unwrap().pem().unwrap();
    let name = format!("user-{user}");
    let csr = format!(
        "apiVersion: certificates.k8s.io/v1\nkind: CertificateSigningRequest\nmetadata:\n  name: {name}\nspec:\n  request: {}\n  signerName: kubernetes.io/kube-apiserver-client\n  usages: [digital signature, client auth]\n",
        base64::engine::general_purpose::STANDARD.encode(pem)
    );
    let made = c.kubectl_stdin(&["create", "-f", "-"], &csr);
    assert!(made.status.success(), "{}", text(&made));
    let ok = c.kubectl(&["certificate", "approve", &name]);
    assert!(ok.status.success(), "{}", text(&ok));
    let deadline = Instant::now() + Duration::from_secs(60);
    let cert = loop {
        let got = c.kubectl(&["get", "csr", &name, "-o", "jsonpath={.status.certificate}"]);
        assert!(got.status.success(), "{}", text(&got));
        if !got.stdout.is_empty() {
            break String::from_utf8(got.stdout).unwrap();
        }
        assert!(Instant::now() < deadline, "CSR {name} not signed in 60 s");
        std::thread::sleep(Duration::from_millis(200));
    };
    let ca = std::fs::read(c.dir.join("ca.crt")).unwrap();
    let path = c.dir.join(format!("{user}.kubeconfig"));
    std::fs::write(
        &path,
        node_kubeconfig(&c.api_url, &ca, cert.trim(), &key.serialize_pem()),
    )
    .unwrap();
    path
}

/// The real server's SelfSubjectAccessReview for `p` as the user of `kubeconfig` (created with
/// `kubectl create`: `kubectl auth can-i` cannot ask about `signers`, it drops their group).
fn can_i_as(c: &TestCluster, kubeconfig: &std::path::Path, p: &agent_day2::permissions::Permission) -> bool {
    let review = serde_json::json!({
        "apiVersion": "authorization.k8s.io/v1",
        "kind": "SelfSubjectAccessReview",
        "spec": {"resourceAttributes": {
            "verb": p.verb, "group": p.group, "resource": p.resource,
            "subresource": p.subresource.clone().unwrap_or_default(),
            "namespace": p.namespace.clone().unwrap_or_default(),
            "name": p.name.clone().unwrap_or_default(),
        }},
    });
    let kc = kubeconfig.to_string_lossy().to_string();
    let out = c.kubectl_stdin(
        &[
            "--kubeconfig",
            kc.as_str(),
            "create",
            "--validate=false",
            "-o",
            "json",
            "-f",
            "-",
        ],
        &review.to_string(),
    );
    assert!(
        out.status.success(),
        "SelfSubjectAccessReview {review}: {}",
        text(&out)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    v["status"]["allowed"] == true
}

/// deploy/rbac.yaml applied to the real server, one user per role (a certificate the cluster
/// signed, in the role's group, bound to nothing else) and one user with no role:
/// - every permission `info` checks (src/permissions.rs) is granted to the role of each command
///   needing it, by the real server's access review;
/// - `info -o json` as each user lists as missing exactly what the real server denies that user;
/// - `info` as the add-nodes user succeeds (exit 0); without a role it exits 4 naming the
///   missing verb and resource;
/// - `kubectl auth can-i --list` as the approve user shows the ClusterRole's rules.
#[test]
fn deploy_rbac_roles_on_the_real_server() {
    use agent_day2::permissions::required_permissions;
    let c = real_cluster();
    let rbac = concat!(env!("CARGO_MANIFEST_DIR"), "/deploy/rbac.yaml");
    let applied = c.kubectl(&["apply", "-f", rbac]);
    assert!(applied.status.success(), "{}", text(&applied));

    let roles = [
        "agent-day2-add-nodes",
        "agent-day2-approve",
        "agent-day2-migrate",
        "agent-day2-migrate-wait",
    ];
    let users: Vec<(Option<&str>, PathBuf)> = roles
        .iter()
        .enumerate()
        .map(|(i, r)| (Some(*r), user_kubeconfig(&c, &format!("user{i}"), Some(r))))
        .chain(std::iter::once((None, user_kubeconfig(&c, "nobody", None))))
        .collect();
    let perms = required_permissions();
    let plugin = |kc: &std::path::Path, args: &[&str]| {
        std::process::Command::new(env!("CARGO_BIN_EXE_kubectl-agent_day2"))
            .args(args)
            .env("KUBECONFIG", kc)
            .env("KUBECACHEDIR", c.dir.join("kubecache"))
            .env_remove("HTTPS_PROXY")
            .env_remove("https_proxy")
            .output()
            .unwrap()
    };
    for (role, kc) in &users {
        let denied: Vec<String> = perms
            .iter()
            .filter(|p| !can_i_as(&c, kc, p))
            .map(|p| p.describe())
            .collect();
        if let Some(role) = role {
            for p in &perms {
                if p.needed_by.iter().any(|cmd| role_for(cmd) == *role) {
                    assert!(
                        !denied.contains(&p.describe()),
                        "{role}: the real server denies {} (needed by {:?})",
                        p.describe(),
                        p.needed_by
                    );
                }
            }
        } else {
            assert_eq!(
                denied.len(),
                perms.len(),
                "a user with no role is granted something"
            );
        }
        let out = plugin(kc, &["info", "-o", "json"]);
        let doc: serde_json::Value = serde_json::from_slice(&out.stdout)
            .unwrap_or_else(|e| panic!("{role:?}: info -o json is not JSON ({e}): {}", text(&out)));
        let mut missing: Vec<String> = doc["permissions"]["missing"]
            .as_array()
            .unwrap_or_else(|| panic!("{role:?}: no permissions.missing: {doc}"))
            .iter()
            .map(|m| {
                let field = |k: &str| m[k].as_str().map(String::from);
                agent_day2::permissions::Permission {
                    verb: field("verb").unwrap_or_default(),
                    group: field("group").unwrap_or_default(),
                    resource: field("resource").unwrap_or_default(),
                    subresource: field("subresource"),
                    namespace: field("namespace"),
                    name: field("name"),
                    needed_by: Vec::new(),
                }
                .describe()
            })
            .collect();
        missing.sort();
        let mut want = denied.clone();
        want.sort();
        assert_eq!(
            missing, want,
            "{role:?}: info's missing permissions vs the real server's reviews"
        );
        match role {
            Some("agent-day2-add-nodes") => {
                assert_eq!(out.status.code(), Some(0), "add-nodes role: {}", text(&out))
            }
            None => {
                assert_eq!(out.status.code(), Some(4), "no role: {}", text(&out));
                let e = String::from_utf8_lossy(&out.stderr);
                assert!(
                    e.contains("cannot read ClusterVersion version: forbidden for user \"nobody\""),
                    "no role: the refusal names the object: {e}"
                );
                assert!(
                    missing.contains(&"get clusterversions.config.openshift.io/version".to_string()),
                    "no role: the verb and resource are listed: {missing:?}"
                );
            }
            _ => {}
        }
    }

    // add-nodes as the add-nodes user writes the node image and its batch record; as the approve
    // user (no create secrets, no create namespaces) it exits 4 naming what was refused. The
    // release's component images come from the plugin's cache (no registry here).
    let cache = c.dir.join("xdg-cache");
    let cv = c.kubectl(&[
        "get",
        "clusterversion",
        "version",
        "-o",
        "jsonpath={.status.history[-1:].image}",
    ]);
    let release = String::from_utf8(cv.stdout).unwrap();
    let digest = release.rsplit_once('@').expect("release by digest").1.to_string();
    let img = |n: char| {
        format!(
            "quay.io/openshift-release-dev/ocp-v4.0-art-dev@sha256:{}",
            n.to_string().repeat(64)
        )
    };
    std::fs::create_dir_all(cache.join("agent-day2/releases")).unwrap();
    std::fs::write(
        cache.join(format!("agent-day2/releases/{digest}.json")),
        serde_json::json!({"releaseImage": release, "platforms": {"x86_64": {
            "apiServer": img('1'), "nodeAgent": img('2'), "orchestrator": img('3'), "utils": img('4'),
            "machineOsImages": null}}})
        .to_string(),
    )
    .unwrap();
    let add_nodes = |kc: &std::path::Path, out: &str| {
        std::process::Command::new(env!("CARGO_BIN_EXE_kubectl-agent_day2"))
            .args([
                "add-nodes",
                "--mac-address",
                "52:54:00:aa:00:01",
                "--hostname",
                "worker-7",
                "--dir",
            ])
            .arg(c.dir.join(out))
            .env("KUBECONFIG", kc)
            .env("XDG_CACHE_HOME", &cache)
            .env_remove("HTTPS_PROXY")
            .env_remove("https_proxy")
            .output()
            .unwrap()
    };
    let refused = add_nodes(&users[1].1, "out-approve");
    assert_eq!(
        refused.status.code(),
        Some(4),
        "add-nodes as the approve user: {}",
        text(&refused)
    );
    assert!(
        String::from_utf8_lossy(&refused.stderr).contains("forbidden"),
        "add-nodes as the approve user: {}",
        text(&refused)
    );
    let made = add_nodes(&users[0].1, "out-add");
    assert_eq!(
        made.status.code(),
        Some(0),
        "add-nodes as the add-nodes user: {}",
        text(&made)
    );
    let batches = c.kubectl(&["-n", "openshift-agent-day2", "get", "configmaps", "-o", "name"]);
    assert!(
        String::from_utf8_lossy(&batches.stdout).contains("configmap/batch-"),
        "no batch record: {}",
        text(&batches)
    );

    // approve and monitor of that batch as the approve user: they run (no refusal) and end at
    // their --timeout, nothing booted; as the add-nodes user approve exits 4 (no CSR approval).
    let run_as = |kc: &std::path::Path, args: &[&str]| {
        std::process::Command::new(env!("CARGO_BIN_EXE_kubectl-agent_day2"))
            .args(args)
            .env("KUBECONFIG", kc)
            .env("XDG_CACHE_HOME", &cache)
            .env_remove("HTTPS_PROXY")
            .env_remove("https_proxy")
            .output()
            .unwrap()
    };
    for args in [
        &["approve", "--watch", "--yes", "--timeout", "3s"][..],
        &["monitor", "--timeout", "3s", "--poll-interval", "200ms"][..],
    ] {
        let o = run_as(&users[1].1, args);
        let err = String::from_utf8_lossy(&o.stderr);
        // 5: the timeout with nodes still short of it; 7: waiting on their CSRs.
        assert!(
            matches!(o.status.code(), Some(0 | 5 | 7)) && !err.contains("forbidden"),
            "{args:?} as the approve user: {}",
            text(&o)
        );
    }
    let o = run_as(&users[0].1, &["approve", "--watch", "--yes", "--timeout", "3s"]);
    assert_eq!(
        o.status.code(),
        Some(4),
        "approve as the add-nodes user: {}",
        text(&o)
    );

    // `kubectl auth can-i --list` as the approve user (cluster scope: namespace default, where
    // the file has no Role) is the ClusterRole's rules, plus what every authenticated user has
    // (system:basic-user's self reviews, system:public-info-viewer's non-resource URLs).
    let approve_kc = users[1].1.to_string_lossy().to_string();
    let list = c.kubectl(&["--kubeconfig", &approve_kc, "auth", "can-i", "--list"]);
    assert!(list.status.success(), "{}", text(&list));
    let listed = String::from_utf8_lossy(&list.stdout).to_string();
    let role = c.kubectl(&["get", "clusterrole", "agent-day2-approve", "-o", "json"]);
    let role: serde_json::Value = serde_json::from_slice(&role.stdout).unwrap();
    let strs = |v: &serde_json::Value| -> Vec<String> {
        v.as_array()
            .map(|a| a.iter().filter_map(|x| x.as_str().map(String::from)).collect())
            .unwrap_or_default()
    };
    // (resource as can-i spells it: plural.group/subresource, names, verbs)
    let mut want: Vec<(String, Vec<String>, Vec<String>)> = Vec::new();
    for r in role["rules"].as_array().unwrap() {
        for g in strs(&r["apiGroups"]) {
            for res in strs(&r["resources"]) {
                let (main, sub) = match res.split_once('/') {
                    Some((m, s)) => (m.to_string(), format!("/{s}")),
                    None => (res.clone(), String::new()),
                };
                let full = if g.is_empty() {
                    format!("{main}{sub}")
                } else {
                    format!("{main}.{g}{sub}")
                };
                let names = strs(&r["resourceNames"]);
                if names.is_empty() {
                    want.push((full, Vec::new(), strs(&r["verbs"])));
                } else {
                    // can-i --list prints one line per resource name.
                    for n in names {
                        want.push((full.clone(), vec![n], strs(&r["verbs"])));
                    }
                }
            }
        }
    }
    let bracket = |v: &[String]| format!("[{}]", v.join(" "));
    let mut got: Vec<(String, String, String)> = Vec::new();
    for l in listed.lines().skip(1) {
        // Columns: Resources, Non-Resource URLs, Resource Names, Verbs (bracketed lists).
        if l.starts_with(' ') {
            continue; // a non-resource URL line
        }
        let res = l.split_whitespace().next().unwrap_or("").to_string();
        let rest = l[res.len()..].trim();
        let lists: Vec<&str> = rest
            .split(']')
            .map(|x| x.trim().trim_start_matches('['))
            .collect();
        let (names, verbs) = (
            lists.get(1).copied().unwrap_or(""),
            lists.get(2).copied().unwrap_or(""),
        );
        got.push((res, format!("[{names}]"), format!("[{verbs}]")));
    }
    let basic = [
        "selfsubjectreviews.authentication.k8s.io",
        "selfsubjectaccessreviews.authorization.k8s.io",
        "selfsubjectrulesreviews.authorization.k8s.io",
    ];
    let mut want_lines: Vec<(String, String, String)> = want
        .iter()
        .map(|(r, n, v)| (r.clone(), bracket(n), bracket(v)))
        .collect();
    want_lines.sort();
    let mut got_lines: Vec<(String, String, String)> = got
        .into_iter()
        .filter(|(r, _, _)| !basic.contains(&r.as_str()))
        .collect();
    got_lines.sort();
    assert_eq!(
        got_lines, want_lines,
        "can-i --list as the approve user vs ClusterRole agent-day2-approve:\n{listed}"
    );
}

/// Item 5: a pod on the real control plane as on a cluster. Its PersistentVolumeClaim is bound by
/// kube-controller-manager's real persistentvolume-binder to the volume the provisioner stand-in
/// made; the pod is bound to master-0, reported Running by master-0's kubelet as
/// `system:node:master-0` (the real NodeRestriction admitted it); `kubectl exec` (the real
/// kubectl, WebSocket to kube-apiserver, which speaks SPDY to the kubelet) runs `mkdir`, `ls`,
/// `cat` in it with stdin, stdout, stderr and the exit code carried through; `kubectl logs` is
/// empty; a deleted pod goes away (the kubelet finishes the deletion), its claim only then
/// (pvc-protection), and the namespace after it.
#[test]
fn pod_exec_reaches_the_simulated_kubelet_through_the_real_server() {
    let c = real_cluster();
    let objs = r#"
apiVersion: v1
kind: Namespace
metadata: {name: exec-test}
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: data, namespace: exec-test}
spec: {accessModes: [ReadWriteOnce], resources: {requests: {storage: 300Mi}}}
"#;
    let o = c.kubectl_stdin(&["apply", "-f", "-"], objs);
    assert!(o.status.success(), "{}", text(&o));
    // The `default` ServiceAccount comes from the real serviceaccount controller.
    let pod = r#"
apiVersion: v1
kind: Pod
metadata: {name: copy, namespace: exec-test}
spec:
  containers:
  - {name: c, image: registry.example/ubi9:latest, command: [sleep, "3600"], volumeMounts: [{name: v, mountPath: /migration}]}
  volumes:
  - {name: v, persistentVolumeClaim: {claimName: data}}
"#;
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let o = c.kubectl_stdin(&["create", "-f", "-"], pod);
        if o.status.success() {
            break;
        }
        assert!(
            Instant::now() < deadline && text(&o).contains("serviceaccount"),
            "{}",
            text(&o)
        );
        std::thread::sleep(Duration::from_millis(300));
    }
    let w = c.kubectl(&[
        "-n",
        "exec-test",
        "wait",
        "--for=jsonpath={.status.phase}=Running",
        "pod/copy",
        "--timeout=60s",
    ]);
    assert!(w.status.success(), "{}", text(&w));
    let pvc = c.kubectl(&["-n", "exec-test", "get", "pvc", "data", "-o", "json"]);
    let pvc: serde_json::Value = serde_json::from_slice(&pvc.stdout).unwrap();
    assert_eq!(pvc["status"]["phase"], "Bound", "{pvc}");
    // Bound by the controller, not by us.
    assert_eq!(
        pvc["metadata"]["annotations"]["pv.kubernetes.io/bind-completed"], "yes",
        "{pvc}"
    );
    let p = c.kubectl(&[
        "-n",
        "exec-test",
        "get",
        "pod",
        "copy",
        "-o",
        "json",
        "--show-managed-fields",
    ]);
    let p: serde_json::Value = serde_json::from_slice(&p.stdout).unwrap();
    assert_eq!(p["spec"]["nodeName"], "master-0", "{p}");
    let status_writers: Vec<&str> = p["metadata"]["managedFields"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["subresource"] == "status")
        .filter_map(|m| m["manager"].as_str())
        .collect();
    assert!(!status_writers.is_empty(), "{p}");

    // stdin → the volume → stdout, through the real kube-apiserver.
    let o = c.kubectl_stdin(
        &[
            "-n",
            "exec-test",
            "exec",
            "-i",
            "copy",
            "-c",
            "c",
            "--",
            "tar",
            "-x",
            "-C",
            "/migration",
        ],
        "",
    );
    // An empty tar stream is an error of tar itself: the exit code comes back.
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("command terminated with exit code 2"),
        "{}",
        text(&o)
    );
    let o = c.kubectl(&[
        "-n",
        "exec-test",
        "exec",
        "copy",
        "--",
        "mkdir",
        "-p",
        "/migration/a/b",
    ]);
    assert!(o.status.success(), "{}", text(&o));
    let o = c.kubectl(&["-n", "exec-test", "exec", "copy", "--", "ls", "/migration/a"]);
    assert!(o.status.success(), "{}", text(&o));
    assert_eq!(String::from_utf8_lossy(&o.stdout).trim(), "b", "{}", text(&o));
    let vol = c.dir.join("volumes/exec-test/data/a/b");
    assert!(vol.is_dir(), "{} missing", vol.display());
    // stderr names the container path, not the host's.
    let o = c.kubectl(&["-n", "exec-test", "exec", "copy", "--", "cat", "/migration/nope"]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("/migration/nope") && !err.contains("volumes/exec-test"),
        "{}",
        text(&o)
    );
    // A program the container does not have.
    let o = c.kubectl(&[
        "-n",
        "exec-test",
        "exec",
        "copy",
        "--",
        "curl",
        "https://example.com",
    ]);
    assert_eq!(o.status.code(), Some(126), "{}", text(&o));

    // Logs through the kubelet API: the stand-in containers write none.
    let o = c.kubectl(&["-n", "exec-test", "logs", "copy"]);
    assert!(o.status.success() && o.stdout.is_empty(), "{}", text(&o));

    // A claim in use is kept (pvc-protection): deleting it waits for the pod.
    let o = c.kubectl(&["-n", "exec-test", "delete", "pvc", "data", "--wait=false"]);
    assert!(o.status.success(), "{}", text(&o));
    let o = c.kubectl(&[
        "-n",
        "exec-test",
        "get",
        "pvc",
        "data",
        "-o",
        "jsonpath={.status.phase}",
    ]);
    assert_eq!(String::from_utf8_lossy(&o.stdout), "Bound", "{}", text(&o));
    // Deleted: gone once the kubelet finished it; then the claim goes too.
    let o = c.kubectl(&["-n", "exec-test", "delete", "pod", "copy", "--timeout=30s"]);
    assert!(o.status.success(), "{}", text(&o));
    let o = c.kubectl(&["-n", "exec-test", "get", "pod", "copy"]);
    assert!(
        !o.status.success() && text(&o).contains("NotFound"),
        "{}",
        text(&o)
    );
    let o = c.kubectl(&[
        "-n",
        "exec-test",
        "wait",
        "--for=delete",
        "pvc/data",
        "--timeout=30s",
    ]);
    assert!(o.status.success(), "{}", text(&o));
    // And the namespace (the real namespace controller empties it).
    let o = c.kubectl(&["delete", "namespace", "exec-test", "--timeout=60s"]);
    assert!(o.status.success(), "{}", text(&o));
}
