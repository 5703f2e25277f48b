//! `migrate` against the REAL assisted-service as node 0 (issue 21; docs/migrate.md "Proved
//! against the real service"): `agent-day2-sim node0 --real` runs the real service in the
//! agent-based installer's REST mode on a real PostgreSQL, registers the cluster and InfraEnv
//! with the real agent-installer client, and drives a compact install up to the state node 0
//! holds just before it reboots (cluster `installing`, the bootstrap host `Rebooting`, the other
//! masters `Joined`, logs uploaded, events written by the service). Then the same flow as
//! tests/migrate.rs's `full_run`: export (REST + pg_dump of the real schema), import into
//! cluster 0 (the simulated API server with assisted-service's own CRDs, cluster 0's database
//! with the schema the real service's migrations make), killed after every step and resumed,
//! a file copy cut, wait; rows, CRs,
//! Secrets and files checked.
//!
//! Option 1 (node 0's service in kube-api mode on node 0's own API server, a second real
//! kube-apiserver): `export --from-kube` copies its CRs, import creates them as they were, and
//! cluster 0's real service starts on it.
//!
//! Needs the real binaries (`#[cfg_attr(not(real_assisted), ignore)]`, build.rs; scripts/test.sh
//! builds them), root (a network namespace) and PostgreSQL.

use crate::migrate::{full_run, versions, Crds};

/// The whole of what is proved here, in one run (a real node 0 takes about a minute): export from
/// the real node 0, import into cluster 0 (tests/migrate.rs's `full_run`: killed after every step and resumed,
/// rows, CRs, Secrets, files), then cluster 0's own real assisted-service started on it
/// (issue 21 item 4): it must keep everything (no new cluster row, no Agent recreated, the
/// ClusterDeployment installed, the AgentClusterInstall completed), serve the cluster, its hosts
/// and every event node 0 had, and give the clients its own URLs (none of node 0's left).
#[test]
#[cfg_attr(
    not(real_assisted),
    ignore = "needs the real assisted-service: scripts/real-components.sh assisted, then AGENT_DAY2_REAL_ASSISTED=1 (scripts/test.sh does both)"
)]
fn real_node0_to_cluster0s_real_service() {
    use serde_json::Value;
    let r = full_run(Crds::Upstream, &["--real"]);
    let e = &r.e;
    let node0_ip = e
        .node0
        .url
        .trim_start_matches("http://")
        .split(':')
        .next()
        .unwrap()
        .to_string();
    let before = versions(e, &r.ns);
    let node0_events: Vec<Value> =
        serde_json::from_slice(&std::fs::read(r.bundle.join(format!("api/events-{}.json", r.cid))).unwrap())
            .unwrap();
    assert!(node0_events.len() > 20, "{} events", node0_events.len());

    // Node 0's whole storage for the cluster (STORAGE=filesystem: logs, Ignition configs,
    // credentials, install-config.yaml, metadata.json, manifests) is in cluster 0's service
    // storage under the same names, byte for byte, before that service starts; only the
    // archives node 0 builds on a download are not carried.
    let node0_storage = e.node0.dir.join("real/data").join(&r.cid);
    let storage = agent_day2_sim::cluster0svc::pvc_dir(
        &e.volumes,
        agent_day2_sim::seed::ASSISTED_NAMESPACE,
        "assisted-service",
    );
    let node0_files = crate::migrate::walk(&node0_storage);
    assert!(node0_files.len() > 10, "{node0_files:?}");
    for f in &node0_files {
        let rel = f.strip_prefix(&node0_storage).unwrap();
        // Made by node 0 when export downloaded the all-logs archive (PrepareClusterLogFile,
        // createClusterDataFiles); cluster 0's service makes its own on each download.
        if rel.to_string_lossy().starts_with("logs/cluster") {
            continue;
        }
        let there = storage.join(&r.cid).join(rel);
        assert!(
            std::fs::read(f).unwrap() == std::fs::read(&there).unwrap_or_default(),
            "node 0's storage object {}/{} is not in cluster 0's storage as it was",
            r.cid,
            rel.display()
        );
    }
    // And nothing node 0 did not have (a `kubeconfig` there would stop cluster 0's service from
    // merging the ingress CA after the reboot).
    for f in crate::migrate::walk(&storage.join(&r.cid)) {
        let rel = f.strip_prefix(storage.join(&r.cid)).unwrap();
        assert!(
            node0_storage.join(rel).is_file(),
            "cluster 0's storage has {}/{}, which node 0 did not",
            r.cid,
            rel.display()
        );
    }

    let (svc, aci) = cluster0s_service_keeps_the_import(
        e,
        &r.cid,
        &r.cd,
        &r.ns,
        &r.bundle,
        &before,
        &node0_ip,
        &node0_storage,
    );
    every_event_served(&svc, &aci, &node0_events);
}

/// Every event node 0 served (its time and message) is served by cluster 0's service too.
fn every_event_served(
    svc: &agent_day2_sim::cluster0svc::Cluster0Service,
    aci: &serde_json::Value,
    node0_events: &[serde_json::Value],
) {
    let served = served_events(svc, aci);
    let missing: Vec<String> = node0_events
        .iter()
        .map(event_key)
        .filter(|k| !served.contains(k))
        .collect();
    assert!(
        missing.is_empty(),
        "{} of node 0's {} events not served: {missing:?}",
        missing.len(),
        node0_events.len()
    );
}

/// One event as compared between node 0 and cluster 0: its time and message.
fn event_key(v: &serde_json::Value) -> String {
    format!(
        "{} {}",
        v["event_time"].as_str().unwrap_or(""),
        v["message"].as_str().unwrap_or("")
    )
}

/// The events cluster 0's service serves through the AgentClusterInstall's signed eventsURL.
fn served_events(
    svc: &agent_day2_sim::cluster0svc::Cluster0Service,
    aci: &serde_json::Value,
) -> std::collections::BTreeSet<String> {
    let url = aci["status"]["debugInfo"]["eventsURL"]
        .as_str()
        .unwrap()
        .trim_start_matches(&svc.base)
        .to_string();
    let (code, served) = svc.get_json(&url, None).unwrap();
    assert_eq!(code, 200, "{served}");
    served.as_array().unwrap().iter().map(event_key).collect()
}

/// Cluster 0's own real assisted-service (issue 21 item 4), started in kube-api mode on what
/// import left in namespace `ns`, as the infrastructure operator runs it: it must keep
/// everything (no new cluster row, nothing deleted or re-created, the ClusterDeployment
/// installed, the AgentClusterInstall completed, the Agents installed), log no error, give the
/// clients its own URLs (none of node 0's at `node0_ip`), be what `migrate status` names, and
/// serve the cluster with its hosts and each host's logs as node 0 stored them
/// (`node0_storage`: node 0's storage directory of the cluster). Returns the service and the
/// AgentClusterInstall it reconciled.
#[allow(clippy::too_many_arguments)]
fn cluster0s_service_keeps_the_import(
    e: &crate::migrate::Env,
    cid: &str,
    cd: &str,
    ns: &str,
    bundle: &std::path::Path,
    before: &std::collections::BTreeMap<String, (String, String)>,
    node0_ip: &str,
    node0_storage: &std::path::Path,
) -> (agent_day2_sim::cluster0svc::Cluster0Service, serde_json::Value) {
    use crate::support::cluster::text;
    use agent_day2_sim::cluster0svc::{self, Cluster0Service};
    use serde_json::Value;
    // The operator's service account (the simulated cluster has it), bound as the operator's
    // ClusterRole binds it (here: cluster-admin), and a token for it.
    let ns_op = agent_day2_sim::seed::ASSISTED_NAMESPACE;
    for args in [
        vec!["get", "serviceaccount", "assisted-service", "-n", ns_op],
        vec![
            "create",
            "clusterrolebinding",
            "agent-day2-test:assisted-service",
            "--clusterrole",
            "cluster-admin",
            "--serviceaccount",
            "multicluster-engine:assisted-service",
        ],
    ] {
        let o = e.cluster.kubectl(&args);
        assert!(o.status.success(), "{}", text(&o));
    }
    let o = e.cluster.kubectl(&[
        "create",
        "token",
        "assisted-service",
        "-n",
        ns_op,
        "--duration",
        "2h",
    ]);
    assert!(o.status.success(), "{}", text(&o));
    let svc = Cluster0Service::start(&cluster0svc::Opts {
        bin_dir: agent_day2_sim::noderun::default_bin_dir(),
        dir: e.path("cluster0-service"),
        api_url: e.cluster.api_url.clone(),
        ca_file: e.cluster.dir.join("ca.crt"),
        token: String::from_utf8_lossy(&o.stdout).trim().to_string(),
        namespace: ns_op.into(),
        db_url: e.dst_pg.url_as("admin", "installer"),
        storage: cluster0svc::pvc_dir(&e.volumes, ns_op, "assisted-service"),
        listen: "192.168.111.81:8090".parse().unwrap(),
    })
    .unwrap_or_else(|err| panic!("{err:#}"));
    let json = |args: &[&str]| -> Value {
        let o = e.cluster.kubectl(args);
        assert!(o.status.success(), "{}", text(&o));
        serde_json::from_slice(&o.stdout).unwrap()
    };
    // The controllers have reconciled once the AgentClusterInstall's events URL is the service's.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(120);
    let aci = loop {
        let aci = json(&["get", "agentclusterinstall", cd, "-n", ns, "-o", "json"]);
        if aci["status"]["debugInfo"]["eventsURL"]
            .as_str()
            .is_some_and(|u| u.starts_with(&svc.base))
        {
            break aci;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "cluster 0's service did not reconcile in 120 s:\n{}",
            svc.tail(60)
        );
        std::thread::sleep(std::time::Duration::from_secs(2));
    };
    // Two more monitor cycles (host 8 s, cluster 10 s) on what it found.
    std::thread::sleep(std::time::Duration::from_secs(20));
    let log = std::fs::read_to_string(&svc.log).unwrap();
    let errors: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("level=error") || l.contains("level=fatal"))
        // Optimistic concurrency: the controllers re-read and retry.
        .filter(|l| !l.contains("the object has been modified"))
        .collect();
    assert!(
        errors.is_empty(),
        "cluster 0's service logged errors:\n{}",
        errors.join("\n")
    );

    // Nothing deleted, re-created or re-installed.
    let dst = e.dst_url();
    let q = |sql: &str| {
        agent_day2_sim::postgres::psql(&dst, sql)
            .unwrap()
            .trim()
            .to_string()
    };
    assert_eq!(
        q("SELECT string_agg(id::text, ',') FROM clusters"),
        cid,
        "no new cluster row"
    );
    // An installed cluster found by its kube keys becomes a day-2 cluster (`adding-hosts`), as
    // assisted-service does for every imported cluster.
    assert_eq!(
        q(&format!("SELECT status FROM clusters WHERE id = '{}'", cid)),
        "adding-hosts"
    );
    assert_eq!(
        q("SELECT string_agg(DISTINCT status, ',') FROM hosts"),
        "installed"
    );
    let after = crate::migrate::versions(e, ns);
    for (k, (_, uid)) in before {
        assert_eq!(after.get(k).map(|v| &v.1), Some(uid), "{k} deleted or re-created");
    }
    let cd = json(&["get", "clusterdeployment", cd, "-n", ns, "-o", "json"]);
    assert_eq!(cd["spec"]["installed"], true);
    let cond = |o: &Value, t: &str| {
        o["status"]["conditions"]
            .as_array()
            .and_then(|c| c.iter().find(|c| c["type"] == t).cloned())
            .unwrap_or_default()
    };
    assert_eq!(
        cond(&aci, "Completed")["reason"],
        "InstallationCompleted",
        "{aci}"
    );
    assert_eq!(cond(&aci, "Failed")["status"], "False", "{aci}");
    let agents = json(&["get", "agents", "-n", ns, "-o", "json"]);
    for a in agents["items"].as_array().unwrap() {
        assert_eq!(a["status"]["debugInfo"]["state"], "installed", "{a}");
        assert_eq!(cond(a, "Installed")["reason"], "InstallationCompleted", "{a}");
    }
    // The clients' new addresses: cluster 0's service, none of node 0's.
    let all = json(&[
        "get",
        "clusterdeployments,agentclusterinstalls,infraenvs,agents",
        "-n",
        ns,
        "-o",
        "json",
    ])
    .to_string();
    assert!(
        !all.contains(&format!("{node0_ip}:")),
        "a node 0 address is left: {all}"
    );

    // `migrate status` names it as the clients' new address, without the URL's key.
    let o = e.plugin(&["migrate", "status", bundle.to_str().unwrap()]);
    assert!(o.status.success(), "{}", text(&o));
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        out.contains(&format!("Served by: {}", svc.base))
            || out.contains(&format!("{} (cluster 0", svc.base)),
        "{out}"
    );
    assert!(!out.contains("api_key"), "{out}");
    let o = e.plugin(&["migrate", "status", bundle.to_str().unwrap(), "-o", "json"]);
    let doc: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(doc["servedBy"], svc.base.as_str(), "{doc}");

    // Its REST API serves the cluster, its hosts and every event node 0 had.
    let t = svc.cluster_token(cid).unwrap();
    let (code, c) = svc
        .get_json(&format!("/api/assisted-install/v2/clusters/{}", cid), Some(&t))
        .unwrap();
    assert_eq!(code, 200, "{c}");
    let manifest: Value =
        serde_json::from_slice(&std::fs::read(bundle.join("manifest.json")).unwrap()).unwrap();
    let hosts = manifest["counts"]["hosts"].as_u64().unwrap() as usize;
    assert_eq!(c["hosts"].as_array().map(Vec::len), Some(hosts), "{c}");

    // Each host's logs, through the Agent's logsURL (signed by cluster 0's service, what the
    // console offers): the archive the host uploaded to node 0, byte for byte, inside the tar
    // the service wraps it in.
    for a in agents["items"].as_array().unwrap() {
        let hid = a["metadata"]["name"].as_str().unwrap();
        let url = a["status"]["debugInfo"]["logsURL"].as_str().unwrap_or_default();
        assert!(url.starts_with(&svc.base), "{a}");
        let (code, body) = svc.get(url.trim_start_matches(&svc.base), None).unwrap();
        assert_eq!(code, 200, "{}", String::from_utf8_lossy(&body));
        let mut inner = Vec::new();
        for entry in tar::Archive::new(&body[..]).entries().unwrap() {
            let mut entry = entry.unwrap();
            std::io::Read::read_to_end(&mut entry, &mut inner).unwrap();
        }
        assert_eq!(
            inner,
            std::fs::read(node0_storage.join(format!("logs/{hid}/logs.tar.gz"))).unwrap(),
            "host {hid}'s logs served by cluster 0 differ from what node 0 stored"
        );
    }
    (svc, aci)
}

/// Node 0 reboots: its service stops, and frees the ports cluster 0's service binds (:8090, and
/// :8080 for its metrics server, on every address).
fn node0_reboots(n0: &mut agent_day2_sim::harness::Node0) {
    if let Some(mut ch) = n0.child.take() {
        let _ = ch.kill();
        let _ = ch.wait();
    }
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while [8090u16, 8080]
        .iter()
        .any(|p| std::net::TcpListener::bind(("0.0.0.0", *p)).is_err())
    {
        assert!(
            std::time::Instant::now() < deadline,
            "node 0's service still holds its ports"
        );
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
}

/// SNO (issue 21 item 6): node 0 is the only node, so cluster 0 exists only after node 0's
/// reboot. The real node 0 of a single-node install is exported as any other (its one host at
/// `Rebooting`, the SNO stages), and `migrate wait` refuses the bundle (exit 3) saying to let
/// node 0 reboot and import afterwards, instead of holding that reboot for ever. Then node 0
/// reboots (its service gone), the bundle is imported onto the installed cluster, and cluster
/// 0's real service starts on it with the checks of the compact case (nothing re-created, its
/// one host installed, logs byte for byte, every event node 0 served).
#[test]
#[cfg_attr(
    not(real_assisted),
    ignore = "needs the real assisted-service: scripts/real-components.sh assisted, then AGENT_DAY2_REAL_ASSISTED=1 (scripts/test.sh does both)"
)]
fn single_node_wait_refuses_to_hold_the_reboot_then_imports_after_it() {
    use crate::support::cluster::{text, BIN};
    use agent_day2_sim::harness::Node0;
    use agent_day2_sim::postgres::Postgres;
    agent_day2_sim::harness::require_netns();
    agent_day2_sim::harness::require_postgres();
    let tmp = tempfile::tempdir().unwrap();
    let pg = Postgres::start(&tmp.path().join("db"), "127.0.0.1".parse().unwrap()).unwrap();
    pg.create_db("installer", "admin").unwrap();
    let n0 = Node0::start(
        &tmp.path().join("node0"),
        "192.168.111.80:0",
        &pg.url("installer"),
        &["--real", "--hosts", "1"],
    )
    .unwrap_or_else(|e| panic!("{e:#}"));
    assert!(
        n0.log()
            .contains("master-0=installing-in-progress/Rebooting/bootstrap"),
        "{}",
        n0.log()
    );
    let bundle = tmp.path().join("bundle");
    let run = |args: &[&str]| {
        std::process::Command::new(BIN)
            .args(args)
            .env_remove("HTTP_PROXY")
            .env_remove("http_proxy")
            .stdin(std::process::Stdio::null())
            .output()
            .unwrap()
    };
    let token = n0.token_file.display().to_string();
    let db = pg.url("installer");
    let o = run(&[
        "migrate",
        "export",
        "--from",
        &n0.url,
        "--token-file",
        &token,
        "--db-url",
        &db,
        "--out",
        bundle.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", text(&o));
    let o = run(&[
        "migrate",
        "wait",
        bundle.to_str().unwrap(),
        "--timeout",
        "5s",
        "--server",
        "https://192.168.111.5:6443",
    ]);
    assert_eq!(o.status.code(), Some(3), "{}", text(&o));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("controlPlaneAgents") && err.contains("single-node") && err.contains("migrate import"),
        "{err}"
    );

    // Nor is a node0-unit made for it.
    let o = run(&["migrate", "node0-unit", "--bundle", bundle.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(3), "{}", text(&o));
    assert!(o.stdout.is_empty(), "a unit was printed: {}", text(&o));

    // After the reboot, as the message says: import onto the installed cluster.
    let mut n0 = n0;
    node0_reboots(&mut n0);
    let e = crate::migrate::Env::around(tmp, pg, n0, true, Crds::Upstream);
    let o = e.plugin(&["migrate", "import", bundle.to_str().unwrap()]);
    assert!(o.status.success(), "import: {}", text(&o));
    let manifest: serde_json::Value =
        serde_json::from_slice(&std::fs::read(bundle.join("manifest.json")).unwrap()).unwrap();
    assert_eq!(manifest["counts"]["hosts"], 1, "{manifest}");
    let cid = manifest["cluster"]["id"].as_str().unwrap().to_string();
    let crs: Vec<serde_json::Value> =
        serde_json::from_slice(&std::fs::read(bundle.join("crs/crs.json")).unwrap()).unwrap();
    let cd = crs
        .iter()
        .find(|o| o["kind"] == "ClusterDeployment")
        .and_then(|o| o["metadata"]["name"].as_str())
        .unwrap()
        .to_string();
    let ns = cd.clone();
    assert_eq!(e.record(&ns)["phase"], "complete");
    let before = versions(&e, &ns);
    let node0_events: Vec<serde_json::Value> =
        serde_json::from_slice(&std::fs::read(bundle.join(format!("api/events-{cid}.json"))).unwrap())
            .unwrap();
    let node0_storage = e.node0.dir.join("real/data").join(&cid);
    let (svc, aci) = cluster0s_service_keeps_the_import(
        &e,
        &cid,
        &cd,
        &ns,
        &bundle,
        &before,
        "192.168.111.80",
        &node0_storage,
    );
    every_event_served(&svc, &aci, &node0_events);
}

/// Option 1 of the user story (issue 21 items 3 and 4): node 0's real service in kube-api mode
/// on node 0's own API server (a second real kube-apiserver with assisted-service's CRDs, at
/// node 0's address), the agent-based installer's manifests applied there, driven to the state
/// before node 0 reboots. Its controllers make the rows from the CRs (kube keys set, unlike REST
/// mode); its REST API takes only tokens signed by its key (local authentication refuses a user
/// token), so `migrate export --from-kube` reads the CRs from the API server and the files from
/// node 0's storage. Import creates the CRs as they were (killed once and resumed), node 0 stops
/// (its reboot), and cluster 0's real service starts on it and keeps everything.
#[test]
#[cfg_attr(
    not(real_assisted),
    ignore = "needs the real assisted-service: scripts/real-components.sh assisted, then AGENT_DAY2_REAL_ASSISTED=1 (scripts/test.sh does both)"
)]
fn option_1_node0_on_its_own_api_server_to_cluster0s_real_service() {
    use crate::migrate::{Env, STOP};
    use crate::support::cluster::text;
    use agent_day2_sim::harness::{Node0, TestCluster};
    use agent_day2_sim::postgres::Postgres;
    use serde_json::Value;
    agent_day2_sim::harness::require_netns();
    agent_day2_sim::harness::require_postgres();
    let crds: Vec<String> = agent_day2_sim::upstream::assisted_crd_dirs()
        .unwrap()
        .iter()
        .flat_map(|d| ["--crds".to_string(), d.display().to_string()])
        .collect();
    let mut args: Vec<&str> = crds.iter().map(String::as_str).collect();
    // :8080 stays free for the service's metrics server (it binds every address).
    args.extend(["--files-listen", "192.168.111.80:8081"]);
    // Node 0's API server on node 0's address; cluster 0's is at 192.168.111.5.
    let boot = TestCluster::start_at("192.168.111.80:6443", "", &args).unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let pg = Postgres::start(&tmp.path().join("src-db"), "127.0.0.1".parse().unwrap()).unwrap();
    pg.create_db("installer", "admin").unwrap();
    let src = pg.url("installer");
    let kubeconfig = boot.kubeconfig.display().to_string();
    let n0 = Node0::start(
        &tmp.path().join("node0"),
        "192.168.111.80:8090",
        &src,
        &["--real", "--kube-api", &kubeconfig],
    )
    .unwrap_or_else(|e| panic!("{e:#}"));
    let log = n0.log();
    assert!(log.contains("made by the controllers from the CRs"), "{log}");

    // The rows come from the CRs: kube keys set.
    let q = |sql: &str| {
        agent_day2_sim::postgres::psql(&src, sql)
            .unwrap()
            .trim()
            .to_string()
    };
    assert_eq!(
        q("SELECT status || ' ' || kube_key_namespace || '/' || kube_key_name FROM clusters"),
        "installing agent-cluster/agent-cluster"
    );
    assert_eq!(
        q("SELECT count(*) FROM hosts WHERE kube_key_namespace = 'agent-cluster'"),
        "3"
    );
    // The CRs carry the state: every Agent approved, one (the bootstrap host) rebooting.
    let json = |args: &[&str]| -> Value {
        let o = boot.kubectl(args);
        assert!(o.status.success(), "{}", text(&o));
        serde_json::from_slice(&o.stdout).unwrap()
    };
    let agents = json(&["get", "agents", "-n", "agent-cluster", "-o", "json"]);
    let items = agents["items"].as_array().unwrap();
    assert_eq!(items.len(), 3, "{agents}");
    let mut stages: Vec<String> = items
        .iter()
        .map(|a| {
            assert_eq!(a["spec"]["approved"], true, "{a}");
            assert_eq!(a["status"]["debugInfo"]["state"], "installing-in-progress", "{a}");
            a["status"]["progress"]["currentStage"]
                .as_str()
                .unwrap_or("")
                .to_string()
        })
        .collect();
    stages.sort();
    assert_eq!(stages, ["Joined", "Joined", "Rebooting"]);
    let aci = json(&[
        "get",
        "agentclusterinstall",
        "agent-cluster",
        "-n",
        "agent-cluster",
        "-o",
        "json",
    ]);
    assert_eq!(aci["status"]["debugInfo"]["state"], "installing", "{aci}");
    let events_url = aci["status"]["debugInfo"]["eventsURL"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        events_url.starts_with(&n0.url) && events_url.contains("api_key="),
        "{events_url}"
    );

    // REST: the signed URL and a token signed by node 0's key work; a user token does not.
    let curl = |args: &[&str]| {
        let o = std::process::Command::new("curl")
            .args(["-s", "-o", "/dev/null", "-w", "%{http_code}"])
            .args(args)
            .output()
            .unwrap();
        String::from_utf8_lossy(&o.stdout).to_string()
    };
    assert_eq!(curl(&[&events_url]), "200");
    let cid = q("SELECT id FROM clusters");
    let token = std::fs::read_to_string(n0.dir.join("cluster-token")).unwrap();
    let cluster = format!("{}/api/assisted-install/v2/clusters/{cid}", n0.url);
    assert_eq!(curl(&["-H", &format!("X-Secret-Key: {token}"), &cluster]), "200");
    assert_eq!(curl(&["-H", &format!("Authorization: {token}"), &cluster]), "401");
    // Node 0's events, as its signed URL serves them (compared with cluster 0's below).
    let o = std::process::Command::new("curl")
        .args(["-sf", &events_url])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o));
    let node0_events: Vec<Value> = serde_json::from_slice(&o.stdout).unwrap();
    assert!(node0_events.len() > 20, "{} events", node0_events.len());

    // Export on node 0: the CRs from its API server, the rows, its storage.
    let mut e = Env::around(tmp, pg, n0, true, crate::migrate::Crds::Upstream);
    let bundle = e.path("bundle");
    let b = bundle.to_str().unwrap();
    let storage0 = e.node0.dir.join("real/data");
    let out = e.plugin(&[
        "migrate",
        "export",
        "--from-kube",
        &kubeconfig,
        "--storage",
        storage0.to_str().unwrap(),
        "--db-url",
        &src,
        "--out",
        b,
    ]);
    assert!(out.status.success(), "export: {}", text(&out));
    let said = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(
        said.contains("ClusterDeployment agent-cluster/agent-cluster, CRs copied")
            && said.contains("Agents 3"),
        "{said}"
    );
    let manifest: Value =
        serde_json::from_slice(&std::fs::read(bundle.join("manifest.json")).unwrap()).unwrap();
    assert_eq!(manifest["source"]["crs"], "copied");
    assert_eq!(manifest["cluster"]["id"], cid.as_str());
    assert_eq!(manifest["source"]["url"], "http://192.168.111.80:8090");
    let bundle_text = std::fs::read_to_string(bundle.join("crs/crs.json")).unwrap();
    if let Some(i) = bundle_text.find("api_key") {
        panic!(
            "node 0's signed URLs left in the bundle: …{}…",
            &bundle_text[i.saturating_sub(300)..(i + 100).min(bundle_text.len())]
        );
    }

    // A dump of a newer schema than cluster 0's (the real one plus a migration cluster 0's
    // service has not applied, the manifest agreeing, resealed) is refused naming the
    // migration, before any change.
    let newer = e.path("newer");
    crate::migrate::crafted(&bundle, &newer, |d| {
        d.replacen(
            "COPY public.migrations (id) FROM stdin;\n",
            "COPY public.migrations (id) FROM stdin;\n20300101000000\n",
            1,
        )
    });
    let mp = newer.join("manifest.json");
    let mut m: Value = serde_json::from_slice(&std::fs::read(&mp).unwrap()).unwrap();
    m["source"]["migration_ids"]
        .as_array_mut()
        .unwrap()
        .push("20300101000000".into());
    m["counts"]["rows"]["migrations"] = (m["counts"]["rows"]["migrations"].as_u64().unwrap() + 1).into();
    std::fs::write(&mp, serde_json::to_vec_pretty(&m).unwrap()).unwrap();
    crate::migrate::reseal(&newer);
    let out = e.plugin(&["migrate", "import", newer.to_str().unwrap()]);
    let err = String::from_utf8_lossy(&out.stderr).to_string();
    assert!(
        out.status.code() == Some(3)
            && err.contains("node 0's assisted-service is newer than cluster 0's")
            && err.contains("lacks: 20300101000000;"),
        "{}",
        text(&out)
    );
    let o = e.cluster.kubectl(&["get", "namespace", "agent-cluster"]);
    assert!(!o.status.success(), "the refused import changed cluster 0");

    // Import on cluster 0, killed once after the ClusterDeployment and resumed.
    let (ns, cd) = ("agent-cluster", "agent-cluster");
    let out = e
        .cmd(&["migrate", "import", b])
        .env(STOP, "clusterdeployment")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    let out = e.plugin(&["migrate", "import", b]);
    assert!(out.status.success(), "import: {}", text(&out));
    assert_eq!(e.record(ns)["phase"], "complete");
    // The CRs as they were on node 0: spec and status copied, not recreated.
    let have = e.kubectl_json(&["get", "agents", "-n", ns, "-o", "json"]);
    let mut names: Vec<(String, String, String)> = have["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| {
            (
                a["metadata"]["name"].as_str().unwrap().to_string(),
                a["spec"]["hostname"].as_str().unwrap_or("").to_string(),
                a["status"]["inventory"]["hostname"]
                    .as_str()
                    .unwrap_or("")
                    .to_string(),
            )
        })
        .collect();
    let mut want: Vec<(String, String, String)> = items
        .iter()
        .map(|a| {
            (
                a["metadata"]["name"].as_str().unwrap().to_string(),
                a["spec"]["hostname"].as_str().unwrap_or("").to_string(),
                a["status"]["inventory"]["hostname"]
                    .as_str()
                    .unwrap_or("")
                    .to_string(),
            )
        })
        .collect();
    names.sort();
    want.sort();
    assert_eq!(names, want);
    let cd0 = e.kubectl_json(&["get", "clusterdeployment", cd, "-n", ns, "-o", "json"]);
    assert_eq!(cd0["spec"]["installed"], true, "{cd0}");
    assert_eq!(cd0["spec"]["clusterMetadata"]["infraID"], cid.as_str(), "{cd0}");
    let dst = e.dst_url();
    assert_eq!(
        crate::migrate::sql(
            &dst,
            "SELECT kube_key_namespace || '/' || kube_key_name FROM clusters"
        ),
        format!("{ns}/{cd}")
    );
    let before = crate::migrate::versions(&e, ns);

    node0_reboots(&mut e.node0);
    let node0_storage = storage0.join(&cid);
    let (svc, aci) = cluster0s_service_keeps_the_import(
        &e,
        &cid,
        cd,
        ns,
        &bundle,
        &before,
        "192.168.111.80",
        &node0_storage,
    );
    every_event_served(&svc, &aci, &node0_events);
    // Node 0's storage of the cluster, all of it, is cluster 0's, byte for byte.
    let storage = agent_day2_sim::cluster0svc::pvc_dir(
        &e.volumes,
        agent_day2_sim::seed::ASSISTED_NAMESPACE,
        "assisted-service",
    );
    for f in crate::migrate::walk(&node0_storage) {
        let rel = f.strip_prefix(&node0_storage).unwrap();
        assert!(
            std::fs::read(&f).unwrap() == std::fs::read(storage.join(&cid).join(rel)).unwrap_or_default(),
            "node 0's storage object {cid}/{} is not in cluster 0's storage as it was",
            rel.display()
        );
    }
}

/// The hand-written node-0 schema (`agent_day2_sim::node0schema`, the source and target
/// databases of tests/migrate.rs, which every clone runs without the real build) is judged by
/// the real one: every table and column it creates is in the schema the real service's own
/// migrations make, with the same data type and nullability, each of its tables has the real
/// primary key, and its migration ids are the real database's. A column the stand-in invented
/// or typed its own way fails here, not in a user's import.
#[test]
#[cfg_attr(
    not(real_assisted),
    ignore = "needs the real assisted-service: scripts/real-components.sh assisted, then AGENT_DAY2_REAL_ASSISTED=1 (scripts/test.sh does both)"
)]
fn the_simulated_node0_schema_is_part_of_the_real_one() {
    use agent_day2_sim::node0schema;
    use agent_day2_sim::postgres::Postgres;
    use std::collections::BTreeSet;
    agent_day2_sim::harness::require_postgres();
    let tmp = tempfile::tempdir().unwrap();
    let pg = Postgres::start(&tmp.path().join("db"), "127.0.0.1".parse().unwrap()).unwrap();
    pg.create_db("real", "admin").unwrap();
    pg.create_db("sim", "admin").unwrap();
    agent_day2_sim::node0::real::migrate_schema(
        &agent_day2_sim::noderun::default_bin_dir(),
        &pg.url_as("admin", "real"),
        &tmp.path().join("work"),
    )
    .unwrap();
    node0schema::create(&pg.url("sim"), node0schema::DEFAULT_SCHEMA_VERSION).unwrap();
    let lines = |db: &str, q: &str| -> BTreeSet<String> {
        crate::migrate::sql(&pg.url(db), q)
            .lines()
            .map(str::to_string)
            .collect()
    };
    let columns = "SELECT table_name || '.' || column_name || ' ' || data_type || ' ' || is_nullable \
                   FROM information_schema.columns WHERE table_schema = 'public'";
    let (real, sim) = (lines("real", columns), lines("sim", columns));
    let missing: Vec<&String> = sim.difference(&real).collect();
    assert!(
        missing.is_empty(),
        "columns of the simulated schema that the real one lacks or types otherwise \
         (TABLE.COLUMN TYPE NULLABLE): {missing:?}"
    );
    let keys = "SELECT tc.table_name || ': ' || string_agg(k.column_name, ',' ORDER BY k.column_name) \
                FROM information_schema.table_constraints tc JOIN information_schema.key_column_usage k \
                ON k.constraint_name = tc.constraint_name AND k.table_name = tc.table_name \
                WHERE tc.table_schema = 'public' AND tc.constraint_type = 'PRIMARY KEY' \
                GROUP BY tc.table_name";
    let (real_keys, sim_keys) = (lines("real", keys), lines("sim", keys));
    let differ: Vec<&String> = sim_keys.difference(&real_keys).collect();
    assert!(
        differ.is_empty(),
        "primary keys of the simulated schema not in the real one: {differ:?}"
    );
    assert_eq!(
        node0schema::migration_ids(&pg.url("sim")).unwrap(),
        node0schema::migration_ids(&pg.url("real")).unwrap(),
        "the simulated schema's migration ids"
    );
}
