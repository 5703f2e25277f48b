//! The real `kubectl` against the simulated cluster (the real kube-apiserver the simulator seeds;
//! default validation, i.e. `--validate=strict`): its seed, CRDs, CSR signing and identities.
//! Each test runs its own simulator in its own network namespace (root, or under
//! `agent-day2-sim netns`), and fails with the reason otherwise (kubectl and openssl are
//! installed by scripts/test.sh).

use agent_day2_sim::harness::{require_netns, require_tool, TestCluster};
use agent_day2_sim::upstream;
use serde_json::{json, Value};
use std::process::{Output, Stdio};
use std::time::{Duration, Instant};

fn have_kubectl() -> bool {
    std::process::Command::new("kubectl")
        .arg("version")
        .arg("--client")
        .output()
        .is_ok_and(|o| o.status.success())
}

/// Panics unless the real kubectl runs here.
fn require_kubectl() {
    require_tool("kubectl", "kubernetes-client");
    assert!(have_kubectl(), "`kubectl version --client` fails here");
}

/// Starts a cluster in a namespace of this thread's own; panics (saying what is missing) where
/// kubectl or the namespace cannot be had.
fn cluster(scenario: &str) -> TestCluster {
    require_kubectl();
    require_netns();
    TestCluster::start(scenario).expect("simulator starts")
}

fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

#[track_caller]
fn ok(c: &TestCluster, args: &[&str]) -> String {
    let o = c.kubectl(args);
    assert!(
        o.status.success(),
        "kubectl {args:?} failed: {}\nsimulator log:\n{}",
        text(&o),
        c.log()
    );
    String::from_utf8_lossy(&o.stdout).into_owned()
}

#[track_caller]
fn fails(c: &TestCluster, args: &[&str]) -> String {
    let o = c.kubectl(args);
    assert!(
        !o.status.success(),
        "kubectl {args:?} should fail but printed: {}",
        text(&o)
    );
    text(&o)
}

#[track_caller]
fn ok_stdin(c: &TestCluster, args: &[&str], input: &str) -> String {
    let o = c.kubectl_stdin(args, input);
    assert!(
        o.status.success(),
        "kubectl {args:?} failed: {}\ninput:\n{input}\nsimulator log:\n{}",
        text(&o),
        c.log()
    );
    String::from_utf8_lossy(&o.stdout).into_owned()
}

#[test]
fn reads_tables_and_discovery() {
    let c = cluster("");
    // The version kubectl reports for the server (the dispatcher picks a client within skew).
    let v: Value = serde_json::from_str(&ok(&c, &["version", "-o", "json"])).unwrap();
    assert!(
        v["serverVersion"]["gitVersion"]
            .as_str()
            .unwrap()
            .starts_with("v1.31."),
        "{v}"
    );

    // Nodes as a server-side table, with the real printer's columns.
    let nodes = ok(&c, &["get", "nodes"]);
    let header: Vec<&str> = nodes.lines().next().unwrap().split_whitespace().collect();
    assert_eq!(header, ["NAME", "STATUS", "ROLES", "AGE", "VERSION"], "{nodes}");
    assert!(
        nodes
            .lines()
            .skip(1)
            .any(|l| l.contains("Ready") && l.contains("master")),
        "{nodes}"
    );

    // -o wide adds the printer's priority-1 columns; each cell is read at its header's offset
    // (OS-IMAGE holds spaces) and compared with the Node object.
    let wide = ok(&c, &["get", "nodes", "-o", "wide"]);
    let head = wide.lines().next().unwrap();
    let names = [
        "NAME",
        "STATUS",
        "ROLES",
        "AGE",
        "VERSION",
        "INTERNAL-IP",
        "EXTERNAL-IP",
        "OS-IMAGE",
        "KERNEL-VERSION",
        "CONTAINER-RUNTIME",
    ];
    assert_eq!(head.split_whitespace().collect::<Vec<_>>(), names, "{wide}");
    let starts: Vec<usize> = names.iter().map(|n| head.find(n).unwrap()).collect();
    let list: Value = serde_json::from_str(&ok(&c, &["get", "nodes", "-o", "json"])).unwrap();
    let items = list["items"].as_array().unwrap();
    assert_eq!(wide.lines().count() - 1, items.len(), "{wide}");
    for line in wide.lines().skip(1) {
        let cell = |i: usize| {
            line[starts[i]..starts.get(i + 1).map_or(line.len(), |e| (*e).min(line.len()))]
                .trim()
                .to_string()
        };
        let n = items
            .iter()
            .find(|n| n["metadata"]["name"] == cell(0))
            .unwrap_or_else(|| panic!("no node {:?}", cell(0)));
        let addr = |t: &str| {
            n["status"]["addresses"]
                .as_array()
                .unwrap()
                .iter()
                .find(|a| a["type"] == t)
                .map_or("<none>".to_string(), |a| {
                    a["address"].as_str().unwrap().to_string()
                })
        };
        assert_eq!(cell(5), addr("InternalIP"), "{line}");
        assert_ne!(cell(5), "<none>", "seeded nodes have an InternalIP: {line}");
        assert_eq!(cell(6), addr("ExternalIP"), "{line}");
        assert_eq!(
            cell(7),
            n["status"]["nodeInfo"]["osImage"].as_str().unwrap(),
            "{line}"
        );
        assert_eq!(
            cell(8),
            n["status"]["nodeInfo"]["kernelVersion"].as_str().unwrap(),
            "{line}"
        );
        assert_eq!(
            cell(9),
            n["status"]["nodeInfo"]["containerRuntimeVersion"]
                .as_str()
                .unwrap(),
            "{line}"
        );
    }

    // ClusterVersion through jsonpath (created here if the seed has none).
    if !c.kubectl(&["get", "clusterversion", "version"]).status.success() {
        ok_stdin(
            &c,
            &["create", "-f", "-"],
            "apiVersion: config.openshift.io/v1\nkind: ClusterVersion\nmetadata: {name: version}\nspec: {clusterID: 6a9f4b7e-3d2c-4e1f-9b8a-0c5d7e2f1a34}\n",
        );
    }
    let id = ok(
        &c,
        &[
            "get",
            "clusterversion",
            "version",
            "-o",
            "jsonpath={.spec.clusterID}",
        ],
    );
    assert_eq!(id, "6a9f4b7e-3d2c-4e1f-9b8a-0c5d7e2f1a34");

    // api-resources: discovery of built-ins and the OpenShift kinds.
    let r = ok(&c, &["api-resources"]);
    for res in [
        "nodes",
        "certificatesigningrequests",
        "customresourcedefinitions",
        "clusterversions",
        "machineconfigs",
    ] {
        assert!(
            r.lines().any(|l| l.split_whitespace().next() == Some(res)),
            "{res} missing from:\n{r}"
        );
    }

    // --chunk-size: several pages, every item.
    ok(&c, &["create", "namespace", "chunks"]);
    for i in 0..7 {
        ok(&c, &["-n", "chunks", "create", "configmap", &format!("c{i}")]);
    }
    let o = c.kubectl(&[
        "-n",
        "chunks",
        "get",
        "cm",
        "--chunk-size=3",
        "-o",
        "name",
        "-v=6",
    ]);
    assert!(o.status.success(), "{}", text(&o));
    let names: Vec<String> = String::from_utf8_lossy(&o.stdout)
        .lines()
        .map(str::to_string)
        .collect();
    assert_eq!(names.len(), 7, "{names:?}");
    let pages = String::from_utf8_lossy(&o.stderr).matches("GET https").count();
    assert_eq!(
        pages,
        3,
        "7 items in pages of 3 need 3 requests:\n{}",
        String::from_utf8_lossy(&o.stderr)
    );

    // Built-in printers' columns for ConfigMaps and Secrets.
    let t = ok(&c, &["-n", "chunks", "get", "cm", "c0"]);
    assert_eq!(
        t.lines().next().unwrap().split_whitespace().collect::<Vec<_>>(),
        ["NAME", "DATA", "AGE"],
        "{t}"
    );
    assert_eq!(
        t.lines().nth(1).unwrap().split_whitespace().nth(1),
        Some("0"),
        "{t}"
    );

    // Secrets: stringData folds into base64 data; bad base64 is a 400 as on the real server.
    ok_stdin(
        &c,
        &["apply", "-f", "-"],
        "apiVersion: v1\nkind: Secret\nmetadata: {name: s1, namespace: chunks}\nstringData: {token: abc}\n",
    );
    let sec: Value =
        serde_json::from_str(&ok(&c, &["-n", "chunks", "get", "secret", "s1", "-o", "json"])).unwrap();
    assert_eq!(sec["data"]["token"], "YWJj", "{sec}");
    assert_eq!(sec["type"], "Opaque", "{sec}");
    assert!(sec.get("stringData").is_none(), "{sec}");
    let t = ok(&c, &["-n", "chunks", "get", "secret", "s1"]);
    assert_eq!(
        t.lines()
            .nth(1)
            .unwrap()
            .split_whitespace()
            .take(3)
            .collect::<Vec<_>>(),
        ["s1", "Opaque", "1"],
        "{t}"
    );
    let o = c.kubectl_stdin(
        &["create", "-f", "-"],
        "apiVersion: v1\nkind: Secret\nmetadata: {name: s2, namespace: chunks}\ndata: {token: '***'}\n",
    );
    assert!(
        text(&o).contains("illegal base64 data at input byte 0"),
        "{}",
        text(&o)
    );

    // A v1/List: kubectl reads /openapi/v2 (protobuf) for it; the items are still checked by
    // the server (strict), so a typo in one is refused.
    ok_stdin(&c, &["apply", "-f", "-"], "apiVersion: v1\nkind: List\nitems:\n- {apiVersion: v1, kind: ConfigMap, metadata: {name: l1, namespace: chunks}}\n");
    let o = c.kubectl_stdin(&["apply", "-f", "-"], "apiVersion: v1\nkind: List\nitems:\n- {apiVersion: v1, kind: ConfigMap, metadata: {name: l2, namespace: chunks}, bogus: 1}\n");
    assert!(
        !o.status.success() && text(&o).contains("unknown field \"bogus\""),
        "{}",
        text(&o)
    );

    // --dry-run=server validates without storing.
    let out = ok(
        &c,
        &[
            "-n",
            "chunks",
            "create",
            "configmap",
            "dry",
            "--dry-run=server",
            "-o",
            "name",
        ],
    );
    assert_eq!(out.trim(), "configmap/dry");
    let e = fails(&c, &["-n", "chunks", "get", "configmap", "dry"]);
    assert!(e.contains("NotFound"), "{e}");
}

/// An EC P-256 kubelet client CSR (`O=system:nodes, CN=system:node:<node>`) as PEM, from openssl
/// (panics where it cannot make one).
fn kubelet_csr_pem(dir: &std::path::Path, node: &str) -> String {
    require_tool("openssl", "openssl");
    kubelet_csr_pem_from_openssl(dir, node).expect("openssl makes a CSR")
}

fn kubelet_csr_pem_from_openssl(dir: &std::path::Path, node: &str) -> Option<String> {
    let key = dir.join(format!("{node}.key"));
    let req = dir.join(format!("{node}.csr"));
    let st = std::process::Command::new("openssl")
        .args([
            "req",
            "-new",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:P-256",
            "-nodes",
            "-keyout",
        ])
        .arg(&key)
        .args(["-subj", &format!("/O=system:nodes/CN=system:node:{node}"), "-out"])
        .arg(&req)
        .output()
        .ok()?;
    if !st.status.success() {
        return None;
    }
    std::fs::read_to_string(req).ok()
}

fn csr_yaml(name: &str, pem: &str, usages: &str) -> String {
    use base64::Engine;
    format!(
        "apiVersion: certificates.k8s.io/v1\nkind: CertificateSigningRequest\nmetadata:\n  name: {name}\nspec:\n  signerName: kubernetes.io/kube-apiserver-client-kubelet\n  request: {}\n  usages: [{usages}]\n",
        base64::engine::general_purpose::STANDARD.encode(pem)
    )
}

#[test]
fn csr_create_approve_and_sign() {
    let c = cluster("");
    let pem = kubelet_csr_pem(&c.dir, "worker-0");
    // The bootstrapper context authenticates with its bearer token.
    ok_stdin(
        &c,
        &["--context", "bootstrapper", "create", "-f", "-"],
        &csr_yaml("csr-w0", &pem, "digital signature, client auth"),
    );
    let csr: Value = serde_json::from_str(&ok(&c, &["get", "csr", "csr-w0", "-o", "json"])).unwrap();
    assert_eq!(
        csr["spec"]["username"],
        "system:serviceaccount:openshift-machine-config-operator:node-bootstrapper"
    );
    assert_eq!(
        csr["spec"]["groups"],
        json!([
            "system:serviceaccounts",
            "system:serviceaccounts:openshift-machine-config-operator",
            "system:authenticated"
        ])
    );
    let table = ok(&c, &["get", "csr"]);
    let header: Vec<&str> = table.lines().next().unwrap().split_whitespace().collect();
    assert_eq!(
        header,
        [
            "NAME",
            "AGE",
            "SIGNERNAME",
            "REQUESTOR",
            "REQUESTEDDURATION",
            "CONDITION"
        ]
    );
    assert!(
        table
            .lines()
            .any(|l| l.starts_with("csr-w0") && l.trim_end().ends_with("Pending")),
        "{table}"
    );

    // The bootstrapper may not approve.
    let e = fails(
        &c,
        &["--context", "bootstrapper", "certificate", "approve", "csr-w0"],
    );
    assert!(e.contains("forbidden"), "{e}");

    ok(&c, &["certificate", "approve", "csr-w0"]);
    let deadline = Instant::now() + Duration::from_secs(10);
    let cert = loop {
        let c64 = ok(
            &c,
            &["get", "csr", "csr-w0", "-o", "jsonpath={.status.certificate}"],
        );
        if !c64.is_empty() {
            break c64;
        }
        assert!(Instant::now() < deadline, "no certificate issued:\n{}", c.log());
        std::thread::sleep(Duration::from_millis(200));
    };
    use base64::Engine;
    let pem = String::from_utf8(base64::engine::general_purpose::STANDARD.decode(cert).unwrap()).unwrap();
    assert!(pem.starts_with("-----BEGIN CERTIFICATE-----"), "{pem}");
    let table = ok(&c, &["get", "csr", "csr-w0"]);
    assert!(table.contains("Approved,Issued"), "{table}");
    // The node authenticates with the issued certificate (identity from CN, groups from O).
    let crt = c.dir.join("worker-0.crt");
    std::fs::write(&crt, &pem).unwrap();
    let (ca, key) = (c.dir.join("ca.crt"), c.dir.join("worker-0.key"));
    let me = ok(
        &c,
        &[
            "--kubeconfig",
            "/dev/null",
            "--server",
            &c.api_url,
            "--certificate-authority",
            ca.to_str().unwrap(),
            "--client-certificate",
            crt.to_str().unwrap(),
            "--client-key",
            key.to_str().unwrap(),
            "auth",
            "whoami",
            "-o",
            "json",
        ],
    );
    let me: Value = serde_json::from_str(&me).unwrap();
    assert_eq!(
        me["status"]["userInfo"]["username"], "system:node:worker-0",
        "{me}"
    );
    assert_eq!(
        me["status"]["userInfo"]["groups"],
        json!(["system:nodes", "system:authenticated"]),
        "{me}"
    );

    // Denied then approved: 422 from /approval, as Approved and Denied exclude each other.
    let pem2 = kubelet_csr_pem(&c.dir, "worker-1");
    ok_stdin(
        &c,
        &["--context", "bootstrapper", "create", "-f", "-"],
        &csr_yaml("csr-w1", &pem2, "digital signature, client auth"),
    );
    ok(&c, &["certificate", "deny", "csr-w1"]);
    let e = fails(&c, &["certificate", "approve", "csr-w1"]);
    assert!(e.contains("already Denied"), "{e}");
    // kubectl refuses that itself; sent anyway (PUT /approval), the server answers 422.
    let mut csr: Value = serde_json::from_str(&ok(&c, &["get", "csr", "csr-w1", "-o", "json"])).unwrap();
    csr["status"]["conditions"]
        .as_array_mut()
        .unwrap()
        .push(json!({"type": "Approved", "status": "True", "reason": "Test"}));
    let o = c.kubectl_stdin(
        &[
            "replace",
            "--raw",
            "/apis/certificates.k8s.io/v1/certificatesigningrequests/csr-w1/approval",
            "-f",
            "-",
        ],
        &csr.to_string(),
    );
    assert!(!o.status.success(), "{}", text(&o));
    assert!(
        text(&o).contains("Approved and Denied conditions are mutually exclusive"),
        "{}",
        text(&o)
    );

    // A kubelet client CSR with server auth: approved, then Failed by the signer, never issued.
    ok_stdin(
        &c,
        &["--context", "bootstrapper", "create", "-f", "-"],
        &csr_yaml("csr-bad", &pem2, "digital signature, server auth"),
    );
    ok(&c, &["certificate", "approve", "csr-bad"]);
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let o: Value = serde_json::from_str(&ok(&c, &["get", "csr", "csr-bad", "-o", "json"])).unwrap();
        let failed = o["status"]["conditions"]
            .as_array()
            .is_some_and(|cs| cs.iter().any(|c| c["type"] == "Failed"));
        if failed {
            assert!(o["status"]["certificate"].is_null(), "{o}");
            break;
        }
        assert!(Instant::now() < deadline, "CSR not marked Failed: {o}");
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// A minimal object satisfying a CRD schema's `required` fields (strings "x", enums' first value).
fn minimal(schema: &Value) -> Value {
    if let Some(e) = schema["enum"].as_array().and_then(|e| e.first()) {
        return e.clone();
    }
    match schema["type"].as_str() {
        Some("object") => {
            let mut o = serde_json::Map::new();
            for r in schema["required"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
            {
                o.insert(r.to_string(), minimal(&schema["properties"][r]));
            }
            Value::Object(o)
        }
        Some("array") => json!([]),
        Some("integer") | Some("number") => json!(schema["minimum"].as_i64().unwrap_or(1)),
        Some("boolean") => json!(false),
        _ => json!("x"),
    }
}

/// openshift/api's CRDs (the module proxy serves it; `upstream::openshift_crds_dir`).
#[test]
fn crds_apply_objects_and_validation() {
    let dir = upstream::openshift_crds_dir().unwrap_or_else(|why| panic!("{why}"));
    crds_apply_objects_and_validation_in(&[dir]);
}

/// assisted-service's and Hive's CRDs, from an assisted-service source tree.
#[test]
#[ignore = "needs assisted-service's CRDs: scripts/real-components.sh assisted, or set AGENT_DAY2_ASSISTED_SERVICE_SRC"]
fn assisted_crds_apply_objects_and_validation() {
    let dirs = upstream::assisted_crd_dirs().unwrap_or_else(|why| panic!("{why}"));
    crds_apply_objects_and_validation_in(&dirs);
}

/// Each CRD file of `dirs`: applied and served, a minimal object of its schema created and
/// listed with its printer columns, a misspelled field refused; then one CRD deleted.
fn crds_apply_objects_and_validation_in(dirs: &[std::path::PathBuf]) {
    let c = cluster("");
    ok(&c, &["create", "namespace", "crs"]);
    let mut files: Vec<_> = dirs
        .iter()
        .flat_map(|d| std::fs::read_dir(d).unwrap())
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
        .collect();
    files.sort();
    assert!(!files.is_empty());
    let mut last = String::new();
    for f in &files {
        let yaml = std::fs::read_to_string(f).unwrap();
        let crd = agent_day2_sim::api::up::parse_docs(&yaml).unwrap().remove(0);
        let name = crd["metadata"]["name"].as_str().unwrap().to_string();
        last = name.clone();
        ok(&c, &["apply", "-f", f.to_str().unwrap()]);
        ok(
            &c,
            &[
                "wait",
                "--for",
                "condition=established",
                "--timeout=20s",
                &format!("crd/{name}"),
            ],
        );
        // Applying again is a patch of an existing object.
        ok(&c, &["apply", "-f", f.to_str().unwrap()]);

        let spec = &crd["spec"];
        let version = spec["versions"]
            .as_array()
            .unwrap()
            .iter()
            .find(|v| v["served"] == true)
            .unwrap();
        let schema = &version["schema"]["openAPIV3Schema"];
        let mut obj = minimal(schema);
        obj["apiVersion"] = json!(format!(
            "{}/{}",
            spec["group"].as_str().unwrap(),
            version["name"].as_str().unwrap()
        ));
        obj["kind"] = spec["names"]["kind"].clone();
        obj["metadata"] = json!({"name": "sample"});
        if spec["scope"] == "Namespaced" {
            obj["metadata"]["namespace"] = json!("crs");
        }
        if obj.get("spec").is_none() && schema["properties"].get("spec").is_some() {
            obj["spec"] = minimal(&schema["properties"]["spec"]);
        }
        let plural = spec["names"]["plural"].as_str().unwrap();
        let resource = format!("{plural}.{}", spec["group"].as_str().unwrap());
        ok_stdin(&c, &["apply", "-f", "-"], &obj.to_string());
        let got = ok(&c, &["-n", "crs", "get", &resource, "sample", "-o", "json"]);
        let got: Value = serde_json::from_str(&got).unwrap();
        assert_eq!(got["metadata"]["name"], "sample", "{got}");
        assert!(
            got["metadata"]["uid"].as_str().is_some_and(|u| u.len() == 36),
            "{got}"
        );
        // Table output uses the CRD's additionalPrinterColumns.
        let table = ok(&c, &["-n", "crs", "get", &resource]);
        let header: Vec<String> = table
            .lines()
            .next()
            .unwrap()
            .split_whitespace()
            .map(str::to_string)
            .collect();
        assert_eq!(header[0], "NAME", "{table}");
        if let Some(cols) = version["additionalPrinterColumns"].as_array() {
            let want: Vec<String> = cols
                .iter()
                .filter(|c| c["priority"].as_i64().unwrap_or(0) == 0)
                .map(|c| c["name"].as_str().unwrap().to_uppercase())
                .collect();
            assert_eq!(header[1..].join(" "), want.join(" "), "{table}");
        }

        // A misspelled field is refused, as on a real cluster (kubectl's default strict validation).
        let mut bad = obj.clone();
        bad["metadata"]["name"] = json!("typo");
        bad["spec"]["definitelyNotAField"] = json!("x");
        let o = c.kubectl_stdin(&["create", "-f", "-"], &bad.to_string());
        assert!(!o.status.success(), "typo accepted for {name}: {}", text(&o));
        assert!(
            text(&o).contains("unknown field \"spec.definitelyNotAField\""),
            "{}",
            text(&o)
        );
        // --validate=warn: created, with the server's warning shown, and the field pruned.
        let o = c.kubectl_stdin(&["create", "--validate=warn", "-f", "-"], &bad.to_string());
        assert!(o.status.success(), "{}", text(&o));
        assert!(
            String::from_utf8_lossy(&o.stderr)
                .contains("Warning: unknown field \"spec.definitelyNotAField\""),
            "{}",
            text(&o)
        );
        let got: Value =
            serde_json::from_str(&ok(&c, &["-n", "crs", "get", &resource, "typo", "-o", "json"])).unwrap();
        assert!(got["spec"].get("definitelyNotAField").is_none(), "{got}");
    }
    // Deleting a CRD stops serving its resource.
    ok(&c, &["delete", "crd", &last]);
    let e = fails(&c, &["get", &last]);
    assert!(
        e.contains("the server doesn't have a resource type")
            || e.contains("NotFound")
            || e.contains("not find"),
        "{e}"
    );
}

#[test]
fn real_openshift_crds_replace_permissive_ones() {
    let dirs = [upstream::openshift_crds_dir().unwrap_or_else(|why| panic!("{why}"))];
    require_kubectl();
    require_netns();
    let mut args = Vec::new();
    for d in &dirs {
        args.push("--crds".to_string());
        args.push(d.to_str().unwrap().to_string());
    }
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let c = TestCluster::start_with_args("", &args).expect("simulator starts with the real CRDs");
    // The real ClusterVersion CRD's printer columns.
    let t = ok(&c, &["get", "clusterversion"]);
    let header: Vec<&str> = t.lines().next().unwrap().split_whitespace().collect();
    assert_eq!(
        header,
        ["NAME", "VERSION", "AVAILABLE", "PROGRESSING", "SINCE", "STATUS"],
        "{t}"
    );
    // Its schema now validates: a typo in Infrastructure's spec is refused.
    let mut infra: Value =
        serde_json::from_str(&ok(&c, &["get", "infrastructure", "cluster", "-o", "json"])).unwrap();
    infra["spec"]["platformSpecc"] = json!({});
    let o = c.kubectl_stdin(&["replace", "-f", "-"], &infra.to_string());
    assert!(!o.status.success(), "{}", text(&o));
    assert!(
        text(&o).contains("unknown field \"spec.platformSpecc\""),
        "{}",
        text(&o)
    );
    // The permissive definitions were replaced: the CRD object is the upstream one.
    let crd: Value = serde_json::from_str(&ok(
        &c,
        &["get", "crd", "clusterversions.config.openshift.io", "-o", "json"],
    ))
    .unwrap();
    assert!(
        crd["spec"]["versions"][0]["additionalPrinterColumns"].is_array(),
        "{crd}"
    );
}

/// `agent-day2-sim up` refuses bad scenarios with exit 3, one `error:` prefix and the key named
/// (no kubectl needed; `up` listens on 127.0.0.1 here).
#[test]
fn up_refuses_bad_scenarios() {
    let bin = agent_day2_sim::harness::bin("agent-day2-sim").unwrap_or_else(|e| panic!("{e:#}"));
    let tmp = std::env::temp_dir().join(format!("sim-bad-scenarios-{}", std::process::id()));
    std::fs::create_dir_all(&tmp).unwrap();
    let cases = [
        ("architecture: sparc\n", "architecture"),
        ("objects: [{kind: ConfigMap}]\n", "objects[0]"),
        ("objectsDir: /nonexistent\n", "objectsDir"),
        ("sno: \"yes\"\n", "sno"),
        ("machineNetworks: [\"not-a-cidr\"]\n", "machineNetworks[0]"),
        ("omit: [\"bogus/thing\"]\n", "omit[0]"),
    ];
    for (i, (yaml, key)) in cases.iter().enumerate() {
        let f = tmp.join(format!("s{i}.yaml"));
        std::fs::write(&f, yaml).unwrap();
        let mut child = std::process::Command::new(&bin)
            .args(["up", "--dir"])
            .arg(tmp.join(format!("d{i}")))
            .arg("--scenario")
            .arg(&f)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let deadline = Instant::now() + Duration::from_secs(60);
        let status = loop {
            if let Some(s) = child.try_wait().unwrap() {
                break Some(s);
            }
            if Instant::now() > deadline {
                let _ = child.kill();
                let _ = child.wait();
                break None;
            }
            std::thread::sleep(Duration::from_millis(100));
        };
        let mut err = String::new();
        std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut err).unwrap();
        assert_eq!(status.and_then(|s| s.code()), Some(3), "{yaml}: {err}");
        let line = err
            .lines()
            .find(|l| l.starts_with("error:"))
            .unwrap_or_else(|| panic!("{yaml}: {err}"));
        assert!(line.contains(key), "{yaml}: {line}");
        assert_eq!(line.matches("error:").count(), 1, "{yaml}: {line}");
    }
    let _ = std::fs::remove_dir_all(&tmp);
}

/// The verbs `kubectl auth can-i --list` shows for `resource` (its last column; the real
/// server merges rules in no fixed order, so they come sorted).
fn verbs_of(list: &str, resource: &str) -> Option<Vec<String>> {
    let line = list
        .lines()
        .find(|l| l.split_whitespace().next() == Some(resource))?;
    let inner = line.rsplit_once('[')?.1.trim_end().strip_suffix(']')?;
    let mut v: Vec<String> = inner.split_whitespace().map(String::from).collect();
    v.sort();
    Some(v)
}

/// `kubectl auth can-i --list` (SelfSubjectRulesReview) lists the authorizer's rules.
#[test]
fn auth_can_i_list() {
    let c = cluster("");
    let sorted = |v: &[&str]| {
        let mut v: Vec<String> = v.iter().map(|s| s.to_string()).collect();
        v.sort();
        Some(v)
    };
    let admin = ok(&c, &["auth", "can-i", "--list"]);
    assert_eq!(verbs_of(&admin, "*.*"), sorted(&["*"]), "{admin}");
    let viewer = ok(&c, &["--context", "viewer", "auth", "can-i", "--list"]);
    assert_eq!(
        verbs_of(&viewer, "nodes"),
        sorted(&["get", "list", "watch"]),
        "{viewer}"
    );
    assert_eq!(verbs_of(&viewer, "secrets"), None, "{viewer}");
    let ssrr = verbs_of(&viewer, "selfsubjectrulesreviews.authorization.k8s.io").unwrap_or_default();
    assert!(ssrr.iter().any(|v| v == "create"), "{viewer}");
    let boot = ok(&c, &["--context", "bootstrapper", "auth", "can-i", "--list"]);
    let csr = verbs_of(&boot, "certificatesigningrequests.certificates.k8s.io").unwrap_or_default();
    for v in ["create", "get", "list", "watch"] {
        assert!(csr.iter().any(|x| x == v), "{v}: {boot}");
    }
    assert_eq!(verbs_of(&boot, "nodes"), None, "{boot}");
}
