//! `migrate` end to end through the built binary, in a private network namespace: node 0's
//! simulated assisted-service (`agent-day2-sim node0`) on a real PostgreSQL (the source), the
//! simulated cluster 0 with the real CRDs of `../shared/upstream/crds` and its assisted-service
//! pod backed by a second real PostgreSQL (the target; pod exec runs the real `psql`, the copy
//! pod the real `tar` into a volumes directory) → `migrate export` → `migrate import` →
//! `migrate wait`. Then the outcome is checked against both databases, the CRs, the Secrets and
//! the volume; re-runs, an interrupted run, and the refusals (CRDs missing, corrupt bundle,
//! newer schema).
//!
//! Skipped (with the reason) without root / a namespace, PostgreSQL binaries or the CRDs.
//! The interrupted run uses the test hook `AGENT_DAY2_MIGRATE_STOP_AFTER=<step>` of
//! src/migrate/import.rs (stops right after that step is recorded, as a kill there would).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use agent_day2_sim::harness::{crds_dirs, enter_netns, Node0, TestCluster};
use agent_day2_sim::node0schema;
use agent_day2_sim::postgres::{self, Postgres};
use serde_json::Value;
use sha2::{Digest, Sha256};

#[path = "support/cluster.rs"]
mod cluster;
use cluster::{text, BIN};

fn skip() -> Option<String> {
    if let Err(why) = enter_netns() {
        return Some(why);
    }
    if let Some(why) = postgres::unavailable() {
        return Some(why);
    }
    if crds_dirs().is_empty() {
        return Some("../shared/upstream/crds is absent".into());
    }
    None
}

macro_rules! skip_unless_ready {
    () => {
        if let Some(why) = skip() {
            eprintln!("skipped: {why}");
            return;
        }
    };
}

/// Source (node 0) and target (cluster 0) of one migration.
struct Env {
    tmp: tempfile::TempDir,
    src_pg: Postgres,
    dst_pg: Postgres,
    node0: Node0,
    cluster: TestCluster,
    volumes: PathBuf,
}

impl Env {
    /// `node0_args`: e.g. `["--schema-version", "20990101000000"]`; `with_crds`: `up --crds`.
    fn start(node0_args: &[&str], with_crds: bool) -> Env {
        let tmp = tempfile::tempdir().unwrap();
        let lo = "127.0.0.1".parse().unwrap();
        let src_pg = Postgres::start(&tmp.path().join("src-db"), lo).unwrap();
        src_pg.create_db("installer", "admin").unwrap();
        let node0 = Node0::start(
            &tmp.path().join("node0"),
            "192.168.111.80:0",
            &src_pg.url("installer"),
            node0_args,
        )
        .unwrap();
        let dst_pg = Postgres::start(&tmp.path().join("dst-db"), lo).unwrap();
        dst_pg.create_db("installer", "admin").unwrap();
        node0schema::create(&dst_pg.url("installer"), node0schema::DEFAULT_SCHEMA_VERSION).unwrap();
        let volumes = tmp.path().join("volumes");
        let db_url = dst_pg.url_as("admin", "installer");
        let mut args: Vec<String> = vec![
            "--assisted-db-url".into(),
            db_url,
            "--volumes-dir".into(),
            volumes.display().to_string(),
        ];
        if with_crds {
            for d in crds_dirs() {
                args.push("--crds".into());
                args.push(d.display().to_string());
            }
        }
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let cluster = TestCluster::start_with_args("", &args).unwrap();
        Env {
            tmp,
            src_pg,
            dst_pg,
            node0,
            cluster,
            volumes,
        }
    }

    fn path(&self, n: &str) -> PathBuf {
        self.tmp.path().join(n)
    }

    fn cmd(&self, args: &[&str]) -> Command {
        let mut cmd = Command::new(BIN);
        cmd.args(args)
            .env_remove("HTTPS_PROXY")
            .env_remove("https_proxy")
            .env_remove("HTTP_PROXY")
            .env_remove("http_proxy")
            .env_remove(STOP)
            .stdin(Stdio::null());
        for (k, v) in self.cluster.env() {
            cmd.env(k, v);
        }
        cmd
    }

    fn plugin(&self, args: &[&str]) -> Output {
        self.cmd(args).output().unwrap()
    }

    fn export(&self, out: &Path) -> Output {
        let token = self.node0.token_file.display().to_string();
        let db = self.src_pg.url("installer");
        self.plugin(&[
            "migrate",
            "export",
            "--from",
            &self.node0.url,
            "--token-file",
            &token,
            "--db-url",
            &db,
            "--out",
            out.to_str().unwrap(),
        ])
    }

    fn kubectl_json(&self, args: &[&str]) -> Value {
        let o = self.cluster.kubectl(args);
        assert!(o.status.success(), "kubectl {args:?}: {}", text(&o));
        serde_json::from_slice(&o.stdout).unwrap()
    }

    fn src_url(&self) -> String {
        self.src_pg.url("installer")
    }
    fn dst_url(&self) -> String {
        self.dst_pg.url("installer")
    }
}

const STOP: &str = "AGENT_DAY2_MIGRATE_STOP_AFTER";

fn sql(url: &str, q: &str) -> String {
    postgres::psql(url, q).unwrap().trim().to_string()
}

/// Every row of `table` as sorted JSON texts, without the kube_key columns.
fn rows_without_kube_keys(url: &str, table: &str) -> Vec<String> {
    let cols = sql(
        url,
        &format!(
            "SELECT string_agg(quote_ident(column_name), ', ' ORDER BY ordinal_position) \
             FROM information_schema.columns WHERE table_schema = 'public' AND table_name = '{table}' \
             AND column_name NOT IN ('kube_key_name', 'kube_key_namespace')"
        ),
    );
    assert!(!cols.is_empty(), "table {table} has no columns at {url}");
    let out = postgres::psql(
        url,
        &format!("SELECT r FROM (SELECT row_to_json(x)::text AS r FROM (SELECT {cols} FROM public.{table}) x) y ORDER BY r"),
    )
    .unwrap();
    out.lines().map(str::to_string).collect()
}

fn counts(url: &str) -> BTreeMap<String, u64> {
    node0schema::row_counts(url).unwrap().into_iter().collect()
}

fn sha256_file(p: &Path) -> String {
    hex::encode(Sha256::digest(std::fs::read(p).unwrap()))
}

/// `metadata.resourceVersion` and `uid` of every object import made, by `Kind/name`.
fn versions(e: &Env, ns: &str) -> BTreeMap<String, (String, String)> {
    let mut out = BTreeMap::new();
    let kinds = "secrets,configmaps,clusterdeployments,agentclusterinstalls,infraenvs,nmstateconfigs,agents";
    let list = e.kubectl_json(&["get", kinds, "-n", ns, "-o", "json"]);
    let cis = e.kubectl_json(&["get", "clusterimagesets", "-o", "json"]);
    for o in list["items"]
        .as_array()
        .unwrap()
        .iter()
        .chain(cis["items"].as_array().unwrap())
    {
        out.insert(
            format!(
                "{}/{}",
                o["kind"].as_str().unwrap(),
                o["metadata"]["name"].as_str().unwrap()
            ),
            (
                o["metadata"]["resourceVersion"]
                    .as_str()
                    .unwrap_or("")
                    .to_string(),
                o["metadata"]["uid"].as_str().unwrap_or("").to_string(),
            ),
        );
    }
    out
}

fn b64(v: &Value) -> Vec<u8> {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD
        .decode(v.as_str().unwrap_or_else(|| panic!("not a string: {v}")))
        .unwrap()
}

#[test]
fn export_import_wait_then_reruns_and_an_interrupted_run() {
    skip_unless_ready!();
    let e = Env::start(&[], true);
    let bundle = e.path("bundle");
    let t = Instant::now();
    let out = e.export(&bundle);
    assert_eq!(out.status.code(), Some(0), "export: {}", text(&out));
    eprintln!("timing: export {:.2}s", t.elapsed().as_secs_f64());
    let manifest: Value =
        serde_json::from_slice(&std::fs::read(bundle.join("manifest.json")).unwrap()).unwrap();
    let crs: Vec<Value> =
        serde_json::from_slice(&std::fs::read(bundle.join("crs/crs.json")).unwrap()).unwrap();
    let cid = manifest["cluster"]["id"].as_str().unwrap().to_string();
    let cd = crs
        .iter()
        .find(|o| o["kind"] == "ClusterDeployment")
        .and_then(|o| o["metadata"]["name"].as_str())
        .unwrap()
        .to_string();
    let ns = cd.clone();
    let b = bundle.to_str().unwrap();

    // Dry run: the plan, in design.md's order, and nothing on the cluster.
    let out = e.plugin(&["migrate", "import", b, "--dry-run"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let plan = String::from_utf8_lossy(&out.stdout).to_string();
    let at = |needle: &str| {
        plan.find(needle)
            .unwrap_or_else(|| panic!("{needle:?} not in plan:\n{plan}"))
    };
    assert!(at("Namespace") < at("Secret") && at("Secret") < at("ClusterImageSet"));
    assert!(at("ClusterImageSet") < at("Database:") && at("Database:") < at("ClusterDeployment"));
    assert!(
        at("ClusterDeployment") < at("AgentClusterInstall") && at("AgentClusterInstall") < at("InfraEnv")
    );
    assert!(at("InfraEnv") < at("Agent ") && at("/status") > at("Agent "));
    let o = e.cluster.kubectl(&["get", "namespace", &ns]);
    assert!(!o.status.success(), "dry run created the namespace");

    // Interrupted after the database (as a kill there), then after the Agents.
    let t = Instant::now();
    let out = e.cmd(&["migrate", "import", b]).env(STOP, "db").output().unwrap();
    eprintln!(
        "timing: import up to the database restore {:.2}s",
        t.elapsed().as_secs_f64()
    );
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("stopped after step db"),
        "{}",
        text(&out)
    );
    assert_eq!(
        sql(
            &e.dst_url(),
            &format!("SELECT count(*) FROM clusters WHERE id = '{cid}'")
        ),
        "1"
    );
    let o = e
        .cluster
        .kubectl(&["get", "clusterdeployments", "-n", &ns, "-o", "name"]);
    assert!(
        String::from_utf8_lossy(&o.stdout).trim().is_empty(),
        "no CD before the restore is recorded"
    );
    let rec = e.kubectl_json(&[
        "get",
        "configmap",
        "agent-day2-migration",
        "-n",
        &ns,
        "-o",
        "json",
    ]);
    let r: Value = serde_json::from_str(rec["data"]["record.json"].as_str().unwrap()).unwrap();
    assert_eq!(r["phase"], "in-progress");
    assert!(
        r["steps_done"].as_array().unwrap().contains(&Value::from("db")),
        "{r}"
    );

    // wait while in progress: times out with exit 5.
    let out = e.plugin(&["migrate", "wait", b, "--timeout", "2s", "--interval", "1s"]);
    assert_eq!(out.status.code(), Some(5), "{}", text(&out));

    let out = e
        .cmd(&["migrate", "import", b])
        .env(STOP, "agents")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("database already restored"),
        "{}",
        text(&out)
    );
    let agents_before: BTreeMap<String, (String, String)> = versions(&e, &ns)
        .into_iter()
        .filter(|(k, _)| k.starts_with("Agent/"))
        .collect();
    assert_eq!(
        agents_before.len() as u64,
        manifest["counts"]["hosts"].as_u64().unwrap()
    );

    // The completing run, with a wait started before it that returns once it completes.
    let waiter = e
        .cmd(&["migrate", "wait", b, "--timeout", "60s", "--interval", "1s"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(1500));
    let t = Instant::now();
    let out = e.plugin(&["migrate", "import", b]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let w = waiter.wait_with_output().unwrap();
    assert_eq!(w.status.code(), Some(0), "{}", text(&w));
    assert!(
        String::from_utf8_lossy(&w.stderr).contains("import in progress"),
        "{}",
        text(&w)
    );
    eprintln!(
        "timing: import (resumed, CR status + artifacts + holds) {:.2}s",
        t.elapsed().as_secs_f64()
    );
    let t = Instant::now();
    let out = e.plugin(&["migrate", "wait", b, "--timeout", "30s", "--interval", "1s"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    eprintln!("timing: wait {:.2}s", t.elapsed().as_secs_f64());

    // Cluster 0 unreachable: wait says so (once within a minute) and times out with exit 5.
    let out = e.plugin(&[
        "migrate",
        "wait",
        b,
        "--timeout",
        "3s",
        "--interval",
        "1s",
        "--server",
        "https://192.168.111.9:6443",
    ]);
    assert_eq!(out.status.code(), Some(5), "{}", text(&out));
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.matches("cluster 0 unreachable, retrying").count(), 1, "{err}");

    // No Agent deleted or recreated across the runs.
    let v1 = versions(&e, &ns);
    for (k, (_, uid)) in &agents_before {
        assert_eq!(&v1[k].1, uid, "{k} was recreated");
    }

    // Database: every row equal to the source's except the kube keys; no duplicates.
    let src_counts = counts(&e.src_url());
    let dst_counts = counts(&e.dst_url());
    for t in node0schema::TABLES {
        assert_eq!(src_counts[*t], dst_counts[*t], "row count of {t}");
        assert_eq!(
            rows_without_kube_keys(&e.src_url(), t),
            rows_without_kube_keys(&e.dst_url(), t),
            "rows of {t}"
        );
    }
    let mut own = node0schema::migration_ids_of(node0schema::DEFAULT_SCHEMA_VERSION);
    own.sort();
    assert_eq!(
        node0schema::migration_ids(&e.dst_url()).unwrap(),
        own,
        "the target keeps its migrations"
    );
    assert_eq!(
        sql(
            &e.dst_url(),
            &format!("SELECT kube_key_name || '/' || kube_key_namespace FROM clusters WHERE id = '{cid}'")
        ),
        format!("{cd}/{ns}")
    );
    assert_eq!(
        sql(
            &e.dst_url(),
            &format!("SELECT count(*) FROM hosts WHERE kube_key_namespace <> '{ns}'")
        ),
        "0"
    );
    assert_eq!(
        sql(
            &e.dst_url(),
            &format!("SELECT count(*) FROM infra_envs WHERE kube_key_namespace <> '{ns}'")
        ),
        "0"
    );
    assert_eq!(
        sql(
            &e.src_url(),
            "SELECT count(*) FROM hosts WHERE kube_key_namespace <> ''"
        ),
        "0"
    );

    // CRs: all there (the simulator validated each against its CRD on create), pointing at
    // the right names and namespace, holds released.
    let get = |kind: &str| {
        e.kubectl_json(&["get", kind, "-n", &ns, "-o", "json"])["items"]
            .as_array()
            .unwrap()
            .clone()
    };
    let cds = get("clusterdeployments");
    assert_eq!(cds.len(), 1);
    let c = &cds[0];
    assert_eq!(c["spec"]["installed"], true);
    assert_eq!(c["spec"]["clusterMetadata"]["infraID"], cid.as_str());
    assert_eq!(
        c["spec"]["clusterMetadata"]["clusterID"],
        manifest["cluster"]["openshift_cluster_id"]
    );
    assert!(
        c["metadata"]["annotations"]
            .get("hive.openshift.io/reconcile-pause")
            .is_none(),
        "hold released"
    );
    let acis = get("agentclusterinstalls");
    assert_eq!(acis.len(), 1);
    assert_eq!(acis[0]["spec"]["clusterDeploymentRef"]["name"], cd.as_str());
    assert_eq!(
        c["spec"]["clusterInstallRef"]["name"],
        acis[0]["metadata"]["name"]
    );
    assert_ne!(acis[0]["spec"]["holdInstallation"], true, "hold released");
    let imageset = acis[0]["spec"]["imageSetRef"]["name"].as_str().unwrap();
    let cis = e.kubectl_json(&["get", "clusterimageset", imageset, "-o", "json"]);
    assert_eq!(cis["spec"]["releaseImage"], manifest["cluster"]["release_image"]);
    let ies = get("infraenvs");
    assert_eq!(
        ies.len() as u64,
        manifest["counts"]["infra_envs"].as_u64().unwrap()
    );
    // A late-binding InfraEnv (hosts bound to the cluster later) has no clusterRef.
    for ie in ies.iter().filter(|ie| ie["spec"].get("clusterRef").is_some()) {
        assert_eq!(ie["spec"]["clusterRef"]["name"], cd.as_str());
        assert_eq!(ie["spec"]["clusterRef"]["namespace"], ns.as_str());
    }
    assert!(ies
        .iter()
        .any(|ie| ie["spec"]["clusterRef"]["name"] == cd.as_str()));
    let agents = get("agents");
    assert_eq!(agents.len() as u64, manifest["counts"]["hosts"].as_u64().unwrap());
    let host_ids: Vec<&str> = manifest["cluster"]["host_ids"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    for a in &agents {
        assert!(host_ids.contains(&a["metadata"]["name"].as_str().unwrap()), "{a}");
        assert_eq!(a["spec"]["clusterDeploymentName"]["name"], cd.as_str());
        assert_eq!(a["spec"]["clusterDeploymentName"]["namespace"], ns.as_str());
        assert_eq!(
            a["metadata"]["annotations"]["agent.agent-install.openshift.io/skip-spoke-cleanup"],
            "true"
        );
        assert!(ies
            .iter()
            .any(|ie| ie["metadata"]["name"]
                == a["metadata"]["labels"]["infraenvs.agent-install.openshift.io"]));
    }
    let nm = get("nmstateconfigs");
    assert_eq!(
        nm.len() as u64,
        manifest["counts"]["nmstate_configs"].as_u64().unwrap()
    );
    // Status written where the bundle had one, with node 0's URLs cleared.
    for (kind, items) in [
        ("ClusterDeployment", &cds),
        ("AgentClusterInstall", &acis),
        ("InfraEnv", &ies),
        ("Agent", &agents),
    ] {
        let had = crs
            .iter()
            .filter(|o| {
                o["kind"] == kind
                    && o.get("status")
                        .is_some_and(|s| s.as_object().is_some_and(|m| !m.is_empty()))
            })
            .count();
        let has = items
            .iter()
            .filter(|o| {
                o.get("status")
                    .is_some_and(|s| s.as_object().is_some_and(|m| !m.is_empty()))
            })
            .count();
        assert_eq!(has, had, "{kind} status");
        eprintln!("{kind}: {had} of {} with a status in the bundle", items.len());
        for o in items {
            let s = o.get("status").cloned().unwrap_or_default().to_string();
            assert!(!s.contains(":8090"), "{kind} status keeps a node-0 URL: {s}");
        }
    }

    // Credentials in the standard Secrets, equal to what node 0 served.
    let cred = bundle.join("credentials").join(&cid);
    let kc = e.kubectl_json(&[
        "get",
        "secret",
        &format!("{cd}-admin-kubeconfig"),
        "-n",
        &ns,
        "-o",
        "json",
    ]);
    assert_eq!(
        b64(&kc["data"]["kubeconfig"]),
        std::fs::read(cred.join("kubeconfig")).unwrap()
    );
    let pw = e.kubectl_json(&[
        "get",
        "secret",
        &format!("{cd}-admin-password"),
        "-n",
        &ns,
        "-o",
        "json",
    ]);
    assert_eq!(b64(&pw["data"]["username"]), b"kubeadmin");
    assert_eq!(
        String::from_utf8(b64(&pw["data"]["password"])).unwrap().trim(),
        std::fs::read_to_string(cred.join("kubeadmin-password"))
            .unwrap()
            .trim()
    );
    let ps = e.kubectl_json(&[
        "get",
        "secret",
        &format!("{cd}-pull-secret"),
        "-n",
        &ns,
        "-o",
        "json",
    ]);
    assert_eq!(ps["type"], "kubernetes.io/dockerconfigjson");

    // Logs, events and artifacts on the volume, matching the bundle; no credentials there.
    let vol = e.volumes.join(&ns).join("agent-day2-migration").join(&cid);
    let mut copied = 0;
    for f in manifest["files"].as_array().unwrap() {
        let p = f["path"].as_str().unwrap();
        // install-config.yaml is there without its pull secret (tested below).
        if p.ends_with("/install-config.yaml") {
            continue;
        }
        if ["logs/", "api/", "manifests/", "files/"]
            .iter()
            .any(|d| p.starts_with(d))
        {
            assert_eq!(
                sha256_file(&vol.join(p)),
                f["sha256"].as_str().unwrap(),
                "{p} on the volume"
            );
            copied += 1;
        }
    }
    assert!(vol.join(format!("api/events-{cid}.json")).is_file());
    assert!(vol.join(format!("logs/{cid}/logs-all.tar")).is_file());
    assert!(!vol.join("credentials").exists());
    assert!(copied >= 4, "{copied} files");
    let o = e
        .cluster
        .kubectl(&["get", "pod", "agent-day2-migration-copy", "-n", &ns]);
    assert!(!o.status.success(), "copy pod deleted");

    // Record and status.
    let rec = e.kubectl_json(&[
        "get",
        "configmap",
        "agent-day2-migration",
        "-n",
        &ns,
        "-o",
        "json",
    ]);
    let r: Value = serde_json::from_str(rec["data"]["record.json"].as_str().unwrap()).unwrap();
    assert_eq!(r["phase"], "complete");
    assert_eq!(
        r["bundle_sha256"],
        std::fs::read_to_string(bundle.join("manifest.json.sha256"))
            .unwrap()
            .trim()
    );
    assert_eq!(r["pvc"], "agent-day2-migration");
    let out = e.plugin(&["migrate", "status", b, "-o", "json"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let st: Value = serde_json::from_slice(&out.stdout).unwrap();
    // The document style of every other command: apiVersion/kind, camelCase (issue 15 §5).
    assert_eq!(st["apiVersion"], "agent-day2/v1", "{st}");
    assert_eq!(st["kind"], "MigrateStatus", "{st}");
    assert_eq!(st["recordIsThisBundle"], true, "{st}");
    assert_eq!(st["record"]["bundleSha256"], r["bundle_sha256"], "{st}");
    assert_eq!(st["record"]["phase"], "complete", "{st}");
    for m in [&st, &st["record"]] {
        for k in m.as_object().unwrap().keys() {
            assert!(!k.contains('_'), "snake_case key {k:?} in {st}");
        }
    }
    for (k, c) in st["objects"].as_object().unwrap() {
        assert_eq!(c["bundle"], c["cluster"], "objects {k}");
    }
    for t in node0schema::TABLES {
        assert_eq!(
            st["rows"][*t]["cluster"], st["rows"][*t]["bundle"],
            "rows {t}: {st}"
        );
    }
    let out = e.plugin(&["migrate", "status", b]);
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("complete at"),
        "{}",
        text(&out)
    );

    // A second import changes nothing.
    let t = Instant::now();
    let out = e.plugin(&["migrate", "import", b]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    eprintln!(
        "timing: second import (no change) {:.2}s",
        t.elapsed().as_secs_f64()
    );
    assert_eq!(versions(&e, &ns), v1, "second import changed objects");
    assert_eq!(counts(&e.dst_url()), dst_counts);

    // An object edited since: a conflict naming it (exit 4), replaced with --force, not deleted.
    let o = e.cluster.kubectl(&[
        "label",
        "--overwrite",
        "nmstateconfig",
        "-n",
        &ns,
        nm[0]["metadata"]["name"].as_str().unwrap(),
        "infraenvs.agent-install.openshift.io=other",
    ]);
    assert!(o.status.success(), "{}", text(&o));
    let out = e.plugin(&["migrate", "import", b]);
    assert_eq!(out.status.code(), Some(4), "{}", text(&out));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("NMStateConfig"),
        "{}",
        text(&out)
    );
    let out = e.plugin(&["migrate", "import", b, "--force"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let v2 = versions(&e, &ns);
    let nmk = format!("NMStateConfig/{}", nm[0]["metadata"]["name"].as_str().unwrap());
    assert_eq!(v2[&nmk].1, v1[&nmk].1, "replaced, not recreated");

    // A corrupt bundle (one byte changed): refused with exit 3 naming the file.
    let bad = e.path("bad");
    copy_dir(&bundle, &bad);
    let ev = bad.join(format!("api/events-{cid}.json"));
    let mut bytes = std::fs::read(&ev).unwrap();
    bytes[10] ^= 0x01;
    std::fs::write(&ev, bytes).unwrap();
    let out = e.plugin(&["migrate", "import", bad.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(3), "{}", text(&out));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains(&format!("events-{cid}.json")),
        "{}",
        text(&out)
    );
}

fn copy_dir(from: &Path, to: &Path) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::create_dir_all(to).unwrap();
    std::fs::set_permissions(to, std::fs::Permissions::from_mode(0o700)).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let dst = to.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            copy_dir(&e.path(), &dst);
        } else {
            std::fs::copy(e.path(), &dst).unwrap();
        }
    }
}

#[test]
fn refused_before_the_crds_exist_and_for_a_newer_schema() {
    skip_unless_ready!();
    let e = Env::start(&["--schema-version", "20990101000000"], false);
    let bundle = e.path("bundle");
    let out = e.export(&bundle);
    assert_eq!(out.status.code(), Some(0), "export: {}", text(&out));
    let b = bundle.to_str().unwrap();

    // No CRDs: exit 4 naming them and what installs them; nothing created.
    let out = e.plugin(&["migrate", "import", b]);
    assert_eq!(out.status.code(), Some(4), "{}", text(&out));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("clusterdeployments.hive.openshift.io"), "{err}");
    assert!(err.contains("agents.agent-install.openshift.io"), "{err}");
    assert!(err.contains("multicluster engine"), "{err}");
    // --wait-for-crds gives up at --timeout with exit 5.
    let t = Instant::now();
    let out = e.plugin(&["migrate", "import", b, "--wait-for-crds", "--timeout", "3s"]);
    assert_eq!(out.status.code(), Some(5), "{}", text(&out));
    assert!(t.elapsed() < Duration::from_secs(30));
    // Not before the timeout (it gave up 5 s early once), and the whole message.
    assert!(t.elapsed() >= Duration::from_millis(2700), "{:?}", t.elapsed());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("still missing after --timeout 3s (installed by the multicluster engine"),
        "{err}"
    );
    assert!(
        err.contains("infrastructure operator / assisted-service)"),
        "whole, not cut: {err}"
    );
    let o = e.cluster.kubectl(&[
        "get",
        "configmaps",
        "-A",
        "-l",
        "agent-day2.openshift.io/migration=true",
        "-o",
        "name",
    ]);
    assert!(
        String::from_utf8_lossy(&o.stdout).trim().is_empty(),
        "{}",
        text(&o)
    );

    // --wait-for-crds started before the CRDs are installed goes on once they are (and then
    // stops at the newer schema, below).
    let waiting = e
        .cmd(&["migrate", "import", b, "--wait-for-crds", "--timeout", "90s"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_secs(1));
    // CRDs installed: now the newer schema of the dump is refused (exit 3), the database untouched.
    for d in crds_dirs() {
        for f in std::fs::read_dir(&d).unwrap() {
            let p = f.unwrap().path();
            if p.extension().is_some_and(|x| x == "yaml") && !p.is_dir() {
                let name = p.file_name().unwrap().to_string_lossy().to_string();
                if name.contains("hive.openshift.io") || name.contains("agent-install.openshift.io") {
                    let o = e.cluster.kubectl(&["create", "-f", p.to_str().unwrap()]);
                    assert!(o.status.success(), "{}", text(&o));
                }
            }
        }
    }
    let w = waiting.wait_with_output().unwrap();
    assert_eq!(w.status.code(), Some(3), "{}", text(&w));
    let err = String::from_utf8_lossy(&w.stderr);
    assert!(
        err.contains("waiting for CRDs") && err.contains("CRDs present"),
        "{err}"
    );

    // An Agent of this cluster that this import did not make (another namespace): refused, exit 4.
    let manifest: Value =
        serde_json::from_slice(&std::fs::read(bundle.join("manifest.json")).unwrap()).unwrap();
    let host = manifest["cluster"]["host_ids"][0].as_str().unwrap();
    let o = e.cluster.kubectl_stdin(
        &["create", "-f", "-"],
        &format!(
            "apiVersion: v1\nkind: Namespace\nmetadata: {{name: elsewhere}}\n---\n\
             apiVersion: agent-install.openshift.io/v1beta1\nkind: Agent\n\
             metadata: {{name: \"{host}\", namespace: elsewhere}}\nspec: {{approved: false, role: \"\"}}\n"
        ),
    );
    assert!(o.status.success(), "{}", text(&o));
    let before = counts(&e.dst_url());
    let out = e.plugin(&["migrate", "import", b]);
    assert_eq!(out.status.code(), Some(4), "{}", text(&out));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(&format!("Agent elsewhere/{host}")) && err.contains("not created by this bundle"),
        "{err}"
    );
    let o = e.cluster.kubectl(&["delete", "agent", host, "-n", "elsewhere"]);
    assert!(o.status.success(), "{}", text(&o));

    // node 0's build has a migration cluster 0's lacks (max(id) is 21211125182200 on both).
    let out = e.plugin(&["migrate", "import", b]);
    assert_eq!(out.status.code(), Some(3), "{}", text(&out));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("node 0's assisted-service is newer than cluster 0's")
            && err.contains("lacks: 20990101000000;"),
        "{err}"
    );
    assert_eq!(counts(&e.dst_url()), before);
}

/// Cluster 0's assisted-service older than node 0's: a table of cluster 0's database without a
/// column the dump's COPY block names, or a `migrations` table without one of the dump's ids,
/// is refused (exit 3, naming them) by `--dry-run` and by the import before any change — no
/// namespace, no Secret, no ClusterImageSet, no row; with both back as they were the same
/// bundle imports.
#[test]
fn an_older_cluster_0_schema_is_refused_before_any_change() {
    skip_unless_ready!();
    let e = Env::start(&[], true);
    let bundle = e.path("bundle");
    let out = e.export(&bundle);
    assert_eq!(out.status.code(), Some(0), "export: {}", text(&out));
    let b = bundle.to_str().unwrap();
    let dump = std::fs::read_to_string(bundle.join("db/dump.sql")).unwrap();
    let header = |t: &str| {
        dump.lines()
            .find(|l| l.starts_with(&format!("COPY public.{t} (")))
            .unwrap_or_else(|| panic!("no COPY block of {t}"))
            .to_string()
    };
    assert!(
        header("clusters").contains(" control_plane_count,"),
        "{}",
        header("clusters")
    );
    assert!(header("hosts").contains(" node_labels,"), "{}", header("hosts"));
    let before = counts(&e.dst_url());
    let untouched = |what: &str| {
        let o = e.cluster.kubectl(&["get", "namespace", "agent-cluster"]);
        assert!(!o.status.success(), "{what}: namespace made before the refusal");
        let o = e.cluster.kubectl(&["get", "secrets", "-A", "-o", "name"]);
        let secrets = String::from_utf8_lossy(&o.stdout).to_string();
        assert!(
            !secrets.contains("agent-cluster-pull-secret") && !secrets.contains("agent-cluster-admin"),
            "{what}: {secrets}"
        );
        let o = e.cluster.kubectl(&["get", "clusterimagesets", "-o", "name"]);
        assert!(o.status.success(), "{}", text(&o));
        assert_eq!(
            String::from_utf8_lossy(&o.stdout).trim(),
            "",
            "{what}: ClusterImageSet made"
        );
        // (migrations is what the test itself changes)
        let rows = |mut c: BTreeMap<String, u64>| {
            c.remove("migrations");
            c
        };
        assert_eq!(
            rows(counts(&e.dst_url())),
            rows(before.clone()),
            "{what}: rows changed"
        );
    };
    let refused = |needles: &[&str], what: &str| {
        for extra in [&["--dry-run"][..], &[][..]] {
            let mut args = vec!["migrate", "import", b];
            args.extend_from_slice(extra);
            let out = e.plugin(&args);
            assert_eq!(out.status.code(), Some(3), "{what} {extra:?}: {}", text(&out));
            let err = String::from_utf8_lossy(&out.stderr);
            for n in needles {
                assert!(err.contains(n), "{what} {extra:?}: {n:?} in {err}");
            }
            untouched(what);
        }
    };

    // (a) Columns the target lacks (as cluster 0's older build would: columns are added every
    // few months), in two tables.
    sql(
        &e.dst_url(),
        "ALTER TABLE clusters DROP COLUMN control_plane_count; ALTER TABLE hosts DROP COLUMN node_labels",
    );
    refused(
        &[
            "cluster 0's assisted-service is older than node 0's",
            "table clusters lacks control_plane_count",
            "table hosts lacks node_labels",
            "nothing was changed",
        ],
        "columns",
    );
    sql(
        &e.dst_url(),
        "ALTER TABLE clusters ADD COLUMN control_plane_count bigint; ALTER TABLE hosts ADD COLUMN node_labels text",
    );

    // (b) A migration of the dump the target has not applied.
    sql(&e.dst_url(), "DELETE FROM migrations WHERE id = '20251217120000'");
    assert_eq!(
        sql(&e.dst_url(), "SELECT max(id) FROM migrations"),
        sql(&e.src_url(), "SELECT max(id) FROM migrations"),
        "max(id) cannot tell them apart"
    );
    refused(&["lacks: 20251217120000;", "table migrations"], "migrations");
    sql(
        &e.dst_url(),
        "INSERT INTO migrations (id) VALUES ('20251217120000')",
    );

    // Both back: the same bundle imports.
    let out = e.plugin(&["migrate", "import", b]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("schema: cluster 0 has every column"),
        "{}",
        text(&out)
    );
    let (src, dst) = (counts(&e.src_url()), counts(&e.dst_url()));
    for t in node0schema::TABLES {
        assert_eq!(src[*t], dst[*t], "rows of {t}");
    }
}

/// The printed unit passes `systemd-analyze verify` (the plugin path replaced by one that
/// exists here). Skipped without systemd-analyze.
#[test]
fn node0_unit_passes_systemd_analyze_verify() {
    let Ok(sa) = which("systemd-analyze") else {
        eprintln!("skipped: systemd-analyze not installed");
        return;
    };
    let out = Command::new(BIN)
        .args([
            "migrate",
            "node0-unit",
            "--bundle",
            "/var/lib/agent-day2/migration",
            "--timeout",
            "90m",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let unit = String::from_utf8(out.stdout).unwrap();
    assert!(unit.contains("TimeoutStopSec=5520\n"), "{unit}");
    assert!(
        unit.contains("migrate wait \"/var/lib/agent-day2/migration\" --timeout 5400s"),
        "{unit}"
    );
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("agent-day2-migration-wait.service");
    std::fs::write(&f, unit.replace("/usr/local/bin/kubectl-agent_day2", "/bin/true")).unwrap();
    let o = Command::new(sa).arg("verify").arg(&f).output().unwrap();
    assert!(o.status.success() && o.stderr.is_empty(), "{}", text(&o));
}

fn which(name: &str) -> Result<PathBuf, ()> {
    std::env::var_os("PATH")
        .iter()
        .flat_map(std::env::split_paths)
        .map(|d| d.join(name))
        .find(|p| p.is_file())
        .ok_or(())
}

/// Timing at the issue's benchmark size (50 hosts, 10 000 events): export, import, wait, and
/// the row counts equal. `cargo test --test migrate -- --ignored --nocapture`.
#[test]
#[ignore]
fn large_bundle_timing() {
    skip_unless_ready!();
    let e = Env::start(&["--hosts", "50", "--events", "10000"], true);
    let bundle = e.path("bundle");
    let t = Instant::now();
    let out = e.export(&bundle);
    assert_eq!(out.status.code(), Some(0), "export: {}", text(&out));
    eprintln!(
        "timing: export (50 hosts, 10000 events) {:.2}s",
        t.elapsed().as_secs_f64()
    );
    let b = bundle.to_str().unwrap();
    let t = Instant::now();
    let mut cmd = e.cmd(&["migrate", "import", b]);
    // Peak memory through GNU time when present (its line is the last of stderr).
    if Path::new("/usr/bin/time").is_file() {
        let mut timed = Command::new("/usr/bin/time");
        timed
            .args(["-f", "peak RSS %M KiB"])
            .arg(BIN)
            .args(["migrate", "import", b])
            .stdin(Stdio::null());
        for (k, v) in e.cluster.env() {
            timed.env(k, v);
        }
        cmd = timed;
    }
    let out = cmd.output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    eprintln!(
        "timing: import {:.2}s\n{}",
        t.elapsed().as_secs_f64(),
        String::from_utf8_lossy(&out.stderr)
    );
    let out = e.plugin(&["migrate", "wait", b, "--timeout", "30s"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let src = counts(&e.src_url());
    let dst = counts(&e.dst_url());
    for t in node0schema::TABLES {
        assert_eq!(src[*t], dst[*t], "rows of {t}");
    }
    assert_eq!(dst["hosts"], 50);
    assert!(dst["events"] >= 10000, "{dst:?}");
}

/// Why import wraps the restore in BEGIN … COMMIT instead of `psql --single-transaction`: a
/// stream cut before its end (import killed mid-restore) must leave nothing behind. Checked on a
/// real server with the real psql: with `-1` psql commits what it read; ours does not.
#[test]
#[allow(clippy::result_large_err)] // the closures handed to write_stream
fn a_restore_stream_cut_short_commits_nothing() {
    if let Some(why) = postgres::unavailable() {
        eprintln!("skipped: {why}");
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let pg = Postgres::start(&tmp.path().join("db"), "127.0.0.1".parse().unwrap()).unwrap();
    let url = pg.url("postgres");
    postgres::psql(&url, "CREATE TABLE clusters (id text)").unwrap();
    let dump = "--\n-- PostgreSQL database dump\n--\n\nCOPY public.clusters (id) FROM stdin;\nc1\nc1\n\\.\n";
    let mut full = Vec::new();
    use agent_day2::migrate::restore;
    restore::write_stream(
        "d",
        &mut dump.as_bytes(),
        &restore::Scope::new("c1", &[]),
        &restore::Expect::default(),
        &|_| Ok(String::new()),
        &mut full,
        &mut restore::Checked::default(),
    )
    .unwrap();
    let run = |args: &[&str], input: &[u8]| {
        use std::io::Write;
        let mut ch = Command::new(postgres::psql_bin())
            .args(["-X", "-q", "-v", "ON_ERROR_STOP=1", "-d", &url])
            .args(args)
            .args(["-f", "-"])
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        ch.stdin.take().unwrap().write_all(input).unwrap();
        ch.wait().unwrap();
    };
    let count = || sql(&url, "SELECT count(*) FROM clusters");
    // Cut after the COPY block, before COMMIT.
    let cut = &full[..full.len() - "COMMIT;\n".len()];
    run(&[], cut);
    assert_eq!(count(), "0", "a cut stream committed rows");
    run(&[], &full);
    assert_eq!(count(), "2");
    // The hazard avoided: psql -1 on the same cut dump (without our BEGIN) commits it.
    // (Up to our count check, which would see the rows of the first run.)
    let do_at = cut.windows(3).position(|w| w == b"DO ").unwrap();
    let bare = &cut["BEGIN;\n".len()..do_at];
    run(&["--single-transaction"], bare);
    assert_eq!(count(), "4", "psql -1 commits at end of input");
}

/// On a real server: the kube-key UPDATEs touch only the rows the stream restored (a scope
/// that lists another cluster's infra-env does not take its rows over), and the count check
/// in the transaction rolls everything back when the target holds other rows of the cluster.
#[test]
#[allow(clippy::result_large_err)] // the closures handed to write_stream
fn restore_keys_only_its_rows_and_verifies_counts() {
    if let Some(why) = postgres::unavailable() {
        eprintln!("skipped: {why}");
        return;
    }
    use agent_day2::migrate::{import::kube_key_sql, restore};
    let tmp = tempfile::tempdir().unwrap();
    let pg = Postgres::start(&tmp.path().join("db"), "127.0.0.1".parse().unwrap()).unwrap();
    let url = pg.url("postgres");
    let schema = "CREATE TABLE clusters (id text primary key, name text, kube_key_name text, kube_key_namespace text); \
         CREATE TABLE infra_envs (id text primary key, cluster_id text, name text, kube_key_namespace text); \
         CREATE TABLE hosts (id text, infra_env_id text, cluster_id text, kube_key_namespace text, \
         PRIMARY KEY (id, infra_env_id)); CREATE TABLE api_vips (cluster_id text, ip text);";
    postgres::psql(&url, schema).unwrap();
    postgres::psql(
        &url,
        "INSERT INTO clusters VALUES ('victim', 'v', 'v', 'theirs'); \
         INSERT INTO infra_envs VALUES ('ie-v', 'victim', 'v', 'theirs'); \
         INSERT INTO hosts VALUES ('hv', 'ie-v', 'victim', 'theirs');",
    )
    .unwrap();
    let dump = "--\n-- PostgreSQL database dump\n--\n\nSET client_encoding = 'UTF8';\n\
        COPY public.clusters (id, name, kube_key_name, kube_key_namespace) FROM stdin;\nc1\tc\t\t\n\\.\n\
        COPY public.infra_envs (id, cluster_id, name, kube_key_namespace) FROM stdin;\nie1\tc1\tc\t\n\\.\n\
        COPY public.hosts (id, infra_env_id, cluster_id, kube_key_namespace) FROM stdin;\nh1\tie1\tc1\t\n\\.\n\
        COPY public.api_vips (cluster_id, ip) FROM stdin;\nc1\t10.0.0.5\n\\.\n";
    // The lying scope: lists the victim's infra-env too.
    let scope = restore::Scope::new("c1", &["ie1".to_string(), "ie-v".to_string()]);
    let stream = || {
        let mut out = Vec::new();
        restore::write_stream(
            "d",
            &mut dump.as_bytes(),
            &scope,
            &restore::Expect::default(),
            &|c| kube_key_sql("c1", "c", "ns1", c),
            &mut out,
            &mut restore::Checked::default(),
        )
        .unwrap();
        out
    };
    let run = |input: &[u8]| {
        use std::io::Write;
        let mut ch = Command::new(postgres::psql_bin())
            .args(["-X", "-q", "-v", "ON_ERROR_STOP=1", "-d", &url, "-f", "-"])
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        ch.stdin.take().unwrap().write_all(input).unwrap();
        ch.wait_with_output().unwrap()
    };
    let out = run(&stream());
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(
        sql(
            &url,
            "SELECT string_agg(id || '=' || kube_key_namespace, ',' ORDER BY id) FROM infra_envs"
        ),
        "ie-v=theirs,ie1=ns1"
    );
    assert_eq!(
        sql(
            &url,
            "SELECT string_agg(id || '=' || kube_key_namespace, ',' ORDER BY id) FROM hosts"
        ),
        "h1=ns1,hv=theirs"
    );
    // A fresh target holding a stray row of the cluster: the counts differ, nothing committed.
    postgres::psql(
        &url,
        "TRUNCATE clusters, infra_envs, hosts, api_vips; INSERT INTO api_vips VALUES ('c1', '10.9.9.9');",
    )
    .unwrap();
    let out = run(&stream());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{err}");
    assert!(
        err.contains("table api_vips holds 2 rows of the cluster after the restore, 1 were restored"),
        "{err}"
    );
    assert_eq!(sql(&url, "SELECT count(*) FROM clusters"), "0");
    assert_eq!(sql(&url, "SELECT count(*) FROM api_vips"), "1");
}

/// The record is the import's lock: an in-progress record held by another run that may still
/// be going (another host, fresh heartbeat) makes a second import exit 4 before any change,
/// `--dry-run` too; once its heartbeat is older than 15 minutes the next run takes over and
/// completes.
#[test]
fn a_second_import_is_refused_while_another_holds_the_record() {
    skip_unless_ready!();
    let e = Env::start(&[], true);
    let bundle = e.path("bundle");
    let out = e.export(&bundle);
    assert_eq!(out.status.code(), Some(0), "export: {}", text(&out));
    let b = bundle.to_str().unwrap();
    let out = e
        .cmd(&["migrate", "import", b])
        .env(STOP, "namespace")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    let crs: Vec<Value> =
        serde_json::from_slice(&std::fs::read(bundle.join("crs/crs.json")).unwrap()).unwrap();
    let ns = crs
        .iter()
        .find(|o| o["kind"] == "ClusterDeployment")
        .and_then(|o| o["metadata"]["name"].as_str())
        .unwrap()
        .to_string();
    let set_holder = |heartbeat: &str| {
        let mut cm = e.kubectl_json(&[
            "get",
            "configmap",
            "agent-day2-migration",
            "-n",
            &ns,
            "-o",
            "json",
        ]);
        let mut r: Value = serde_json::from_str(cm["data"]["record.json"].as_str().unwrap()).unwrap();
        assert_eq!(r["released"], true, "a stopped run lets go: {r}");
        r["released"] = false.into();
        r["holder"] = "another-host.example:4242:1:feedbeef".into();
        r["heartbeat"] = heartbeat.into();
        cm["data"]["record.json"] = serde_json::to_string(&r).unwrap().into();
        let o = e.cluster.kubectl_stdin(&["replace", "-f", "-"], &cm.to_string());
        assert!(o.status.success(), "{}", text(&o));
    };
    let now = time::OffsetDateTime::now_utc()
        .format(&time::format_description::well_known::Rfc3339)
        .unwrap();
    set_holder(&now);
    for extra in [&[][..], &["--dry-run"][..]] {
        let mut args = vec!["migrate", "import", b];
        args.extend_from_slice(extra);
        let out = e.cmd(&args).env(STOP, "namespace").output().unwrap();
        assert_eq!(out.status.code(), Some(4), "{extra:?}: {}", text(&out));
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains("another import is in progress") && err.contains("another-host.example:4242"),
            "{err}"
        );
    }
    // The refused runs changed nothing: the record is still the other holder's.
    let cm = e.kubectl_json(&[
        "get",
        "configmap",
        "agent-day2-migration",
        "-n",
        &ns,
        "-o",
        "json",
    ]);
    assert!(cm["data"]["record.json"]
        .as_str()
        .unwrap()
        .contains("another-host.example:4242"));
    // Released again (a stopped run), then stale: taken over.
    let mut cm2 = cm.clone();
    let mut r: Value = serde_json::from_str(cm2["data"]["record.json"].as_str().unwrap()).unwrap();
    r["released"] = true.into();
    cm2["data"]["record.json"] = serde_json::to_string(&r).unwrap().into();
    let o = e.cluster.kubectl_stdin(&["replace", "-f", "-"], &cm2.to_string());
    assert!(o.status.success(), "{}", text(&o));
    let old = (time::OffsetDateTime::now_utc() - time::Duration::minutes(20))
        .format(&time::format_description::well_known::Rfc3339)
        .unwrap();
    set_holder(&old);
    let out = e.plugin(&["migrate", "import", b]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let cm = e.kubectl_json(&[
        "get",
        "configmap",
        "agent-day2-migration",
        "-n",
        &ns,
        "-o",
        "json",
    ]);
    let r: Value = serde_json::from_str(cm["data"]["record.json"].as_str().unwrap()).unwrap();
    assert_eq!(r["phase"], "complete");
    assert_ne!(r["holder"], "another-host.example:4242:1:feedbeef");
}

/// A real kill (SIGKILL) while the database restore is under way, then a re-run: completes,
/// nothing duplicated (row counts equal to the source), every Agent there once.
#[test]
fn import_killed_during_the_restore_then_rerun() {
    skip_unless_ready!();
    use std::io::BufRead;
    let e = Env::start(&["--events", "3000"], true);
    let bundle = e.path("bundle");
    let out = e.export(&bundle);
    assert_eq!(out.status.code(), Some(0), "export: {}", text(&out));
    let b = bundle.to_str().unwrap();
    let mut child = e
        .cmd(&["migrate", "import", b])
        .stderr(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let err = std::io::BufReader::new(child.stderr.take().unwrap());
    let mut seen = Vec::new();
    for line in err.lines() {
        let line = line.unwrap();
        let hit = line.contains("restoring the database");
        seen.push(line);
        if hit {
            child.kill().unwrap();
            break;
        }
    }
    let st = child.wait().unwrap();
    assert!(
        seen.iter().any(|l| l.contains("restoring the database")),
        "{seen:?}"
    );
    eprintln!("killed: {st:?}; the target holds {:?}", counts(&e.dst_url()));
    // The re-run restores through --db-url (the local psql) instead of pod exec, with a
    // password in the URL: psql gets it in PGPASSWORD, never in its argv (a stand-in psql on
    // PATH records both, then runs the real one).
    use std::os::unix::fs::PermissionsExt;
    let fake = e.path("fakebin");
    std::fs::create_dir(&fake).unwrap();
    let (argv_log, env_log) = (e.path("psql-argv"), e.path("psql-env"));
    std::fs::write(
        fake.join("psql"),
        format!(
            "#!/bin/sh\necho \"$@\" >> {}\necho \"PGPASSWORD=${{PGPASSWORD-unset}}\" >> {}\nexec {} \"$@\"\n",
            argv_log.display(),
            env_log.display(),
            postgres::psql_bin().display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(fake.join("psql"), std::fs::Permissions::from_mode(0o755)).unwrap();
    let path = format!("{}:{}", fake.display(), std::env::var("PATH").unwrap_or_default());
    let db_url = e.dst_pg.url_as("admin:pw%20x", "installer");
    let out = e
        .cmd(&["migrate", "import", b, "--db-url", &db_url])
        .env("PATH", &path)
        .env_remove("PGPASSWORD")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let argv = std::fs::read_to_string(&argv_log).unwrap();
    assert!(
        !argv.is_empty() && !argv.contains("pw"),
        "password in psql's argv: {argv}"
    );
    let plain = e.dst_pg.url_as("admin", "installer");
    assert!(
        argv.lines().all(|l| l.contains(&format!("-d {plain} "))),
        "{argv}"
    );
    let envs = std::fs::read_to_string(&env_log).unwrap();
    assert!(envs.lines().all(|l| l == "PGPASSWORD=pw x"), "{envs}");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("the database of --db-url"),
        "{}",
        text(&out)
    );
    let src = counts(&e.src_url());
    let dst = counts(&e.dst_url());
    for t in node0schema::TABLES {
        assert_eq!(src[*t], dst[*t], "rows of {t}");
    }
    let manifest: Value =
        serde_json::from_slice(&std::fs::read(bundle.join("manifest.json")).unwrap()).unwrap();
    let ns = manifest["cluster"]["name"].as_str().unwrap();
    let agents = e.kubectl_json(&["get", "agents", "-A", "-o", "json"]);
    assert_eq!(
        agents["items"].as_array().unwrap().len() as u64,
        manifest["counts"]["hosts"].as_u64().unwrap()
    );
    let out = e.plugin(&["migrate", "wait", b, "-n", ns, "--timeout", "10s"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
}

/// Recomputes the sha256 and size of every file the manifest lists, then the manifest's own
/// checksum: an edited bundle that is self-consistent, as an attacker can make one.
fn reseal(dir: &Path) {
    let mp = dir.join("manifest.json");
    let mut m: Value = serde_json::from_slice(&std::fs::read(&mp).unwrap()).unwrap();
    for f in m["files"].as_array_mut().unwrap() {
        let p = dir.join(f["path"].as_str().unwrap());
        let bytes = std::fs::read(&p).unwrap();
        f["sha256"] = Value::from(hex::encode(Sha256::digest(&bytes)));
        f["size"] = Value::from(bytes.len() as u64);
    }
    let raw = serde_json::to_vec_pretty(&m).unwrap();
    std::fs::write(&mp, &raw).unwrap();
    std::fs::write(
        dir.join("manifest.json.sha256"),
        format!("{}\n", hex::encode(Sha256::digest(&raw))),
    )
    .unwrap();
}

/// A copy of `bundle` at `to` whose db/dump.sql is `edit`ed, resealed.
fn crafted(bundle: &Path, to: &Path, edit: impl FnOnce(String) -> String) {
    copy_dir(bundle, to);
    let p = to.join("db/dump.sql");
    let d = std::fs::read_to_string(&p).unwrap();
    let changed = edit(d.clone());
    assert_ne!(changed, d, "the edit changed nothing");
    std::fs::write(&p, changed).unwrap();
    reseal(to);
}

/// Resealed bundles that lie in their manifest (a schema version or migration ids other than
/// the dump's, an infra-env id of another cluster, with an InfraEnv CR for it), whose dump has a
/// migration cluster 0 lacks (manifest agreeing), or whose dump is not UTF8 or
/// would end a COPY early: import exits 3 before the first change (no namespace), `--dry-run`
/// too, and cluster 0's database is untouched.
#[test]
fn lying_manifests_and_encodings_are_refused_before_any_change() {
    skip_unless_ready!();
    let e = Env::start(&[], true);
    let bundle = e.path("bundle");
    let out = e.export(&bundle);
    assert_eq!(out.status.code(), Some(0), "export: {}", text(&out));
    let before = counts(&e.dst_url());
    let manifest_edit = |to: &Path, edit: &dyn Fn(&mut Value)| {
        copy_dir(&bundle, to);
        let mp = to.join("manifest.json");
        let mut m: Value = serde_json::from_slice(&std::fs::read(&mp).unwrap()).unwrap();
        edit(&mut m);
        std::fs::write(&mp, serde_json::to_vec_pretty(&m).unwrap()).unwrap();
        reseal(to);
    };
    let victim = "be000000-0000-0000-0000-000000000666";
    let mut cases: Vec<(&str, PathBuf, &str)> = Vec::new();
    let p = e.path("schema");
    manifest_edit(&p, &|m| m["source"]["schema_version"] = "20230101000000".into());
    cases.push(("schema", p, "schema version"));
    let p = e.path("ids");
    manifest_edit(&p, &|m| {
        m["source"]["migration_ids"].as_array_mut().unwrap().pop();
    });
    cases.push(("ids", p, "source.migration_ids"));
    // A dump (and a manifest agreeing with it) with a migration cluster 0 has not applied.
    let p = e.path("newer");
    crafted(&bundle, &p, |d| {
        d.replacen(
            "COPY public.migrations (id) FROM stdin;\n",
            "COPY public.migrations (id) FROM stdin;\n20300101000000\n",
            1,
        )
    });
    let mp = p.join("manifest.json");
    let mut m: Value = serde_json::from_slice(&std::fs::read(&mp).unwrap()).unwrap();
    m["source"]["migration_ids"]
        .as_array_mut()
        .unwrap()
        .push("20300101000000".into());
    m["counts"]["rows"]["migrations"] = (m["counts"]["rows"]["migrations"].as_u64().unwrap() + 1).into();
    std::fs::write(&mp, serde_json::to_vec_pretty(&m).unwrap()).unwrap();
    reseal(&p);
    cases.push(("newer", p, "lacks: 20300101000000;"));
    let p = e.path("ie");
    manifest_edit(&p, &|m| {
        m["cluster"]["infra_env_ids"]
            .as_array_mut()
            .unwrap()
            .push(victim.into());
        m["counts"]["infra_envs"] = (m["counts"]["infra_envs"].as_u64().unwrap() + 1).into();
    });
    // With an InfraEnv CR for it, as a lying node 0's export would make.
    let cp = p.join("crs/crs.json");
    let mut crs: Vec<Value> = serde_json::from_slice(&std::fs::read(&cp).unwrap()).unwrap();
    let mut ie = crs.iter().find(|o| o["kind"] == "InfraEnv").unwrap().clone();
    ie["metadata"]["name"] = "victim-ie".into();
    ie["spec"]["nmStateConfigLabelSelector"] =
        serde_json::json!({"matchLabels": {"infraenvs.agent-install.openshift.io": "victim-ie"}});
    crs.push(ie);
    std::fs::write(&cp, serde_json::to_vec_pretty(&crs).unwrap()).unwrap();
    reseal(&p);
    cases.push(("ie", p, victim));
    let p = e.path("sjis");
    crafted(&bundle, &p, |d| {
        d.replacen(
            "SET client_encoding = 'UTF8';",
            "SET client_encoding = 'SJIS';",
            1,
        )
    });
    cases.push(("sjis", p, "only UTF8"));
    let p = e.path("marker");
    crafted(&bundle, &p, |d| {
        let i = d.find("COPY public.api_vips").unwrap();
        let j = i + d[i..].find('\n').unwrap() + 1;
        let k = j + d[j..].find('\n').unwrap();
        format!("{}\\.{}", &d[..k], &d[k..])
    });
    cases.push(("marker", p, "backslash-period"));
    // Extra hosts rows in a listed infra-env: one whose id holds the dollar-quote tag of the
    // restore's verification block (refused when that block is built, which checks() does
    // too), and one unlisted and unbound (cluster_id NULL), which the manifest does not list.
    let extra_host = |to: &Path, id: &str, unbind: bool| {
        crafted(&bundle, to, |d| {
            let i = d.find("COPY public.hosts ").unwrap();
            let j = i + d[i..].find('\n').unwrap() + 1;
            let k = j + d[j..].find('\n').unwrap() + 1;
            let row = &d[j..k];
            let old_id = row.split('\t').next().unwrap();
            let mut new_row = row.replacen(old_id, id, 1);
            if unbind {
                let m: Value =
                    serde_json::from_slice(&std::fs::read(bundle.join("manifest.json")).unwrap()).unwrap();
                let cid = m["cluster"]["id"].as_str().unwrap();
                assert!(new_row.contains(&format!("\t{cid}\t")), "{new_row}");
                new_row = new_row.replacen(&format!("\t{cid}\t"), "\t\\N\t", 1);
            }
            format!("{}{new_row}{}", &d[..k], &d[k..])
        })
    };
    let p = e.path("tag");
    extra_host(&p, "be000000-0000-0000-0000-0000000$agent_day2_verify$", false);
    cases.push(("tag", p, "$agent_day2_verify$"));
    let p = e.path("unlisted");
    extra_host(&p, "be000000-0000-0000-0000-000000000777", true);
    cases.push((
        "unlisted",
        p,
        "host be000000-0000-0000-0000-000000000777 is restored but not listed",
    ));
    for (name, dir, needle) in &cases {
        let ns = format!("lying-{name}");
        let d = dir.to_str().unwrap();
        for extra in [&["--dry-run"][..], &[][..]] {
            let mut args = vec!["migrate", "import", d, "-n", &ns];
            args.extend_from_slice(extra);
            let out = e.plugin(&args);
            assert_eq!(out.status.code(), Some(3), "{name} {extra:?}: {}", text(&out));
            assert!(
                String::from_utf8_lossy(&out.stderr).contains(needle),
                "{name}: {}",
                text(&out)
            );
        }
        let o = e.cluster.kubectl(&["get", "namespace", &ns]);
        assert!(!o.status.success(), "{name}: namespace made before the refusal");
        assert_eq!(counts(&e.dst_url()), before, "{name}: rows changed");
    }
}

/// A resealed bundle whose dump carries psql meta-commands and SQL outside COPY data, rows of
/// another cluster, a case-bypassed `migrations` block, or data the server refuses: import exits
/// 3, runs none of it (the `\!` target file is never created) and leaves cluster 0's database as
/// it was, through pod exec and through --db-url; export --db-dump refuses such a dump too.
#[test]
fn a_crafted_dump_runs_nothing_and_restores_nothing() {
    skip_unless_ready!();
    let e = Env::start(&[], true);
    let bundle = e.path("bundle");
    let out = e.export(&bundle);
    assert_eq!(out.status.code(), Some(0), "export: {}", text(&out));
    let pwned = e.path("pwned");
    let before = counts(&e.dst_url());
    let tables_before = sql(
        &e.dst_url(),
        "SELECT string_agg(tablename, ',' ORDER BY tablename) FROM pg_tables WHERE schemaname = 'public'",
    );
    let unchanged = |what: &str| {
        assert!(!pwned.exists(), "{what}: the \\! command ran");
        assert_eq!(counts(&e.dst_url()), before, "{what}: rows changed");
        assert_eq!(
            sql(
                &e.dst_url(),
                "SELECT string_agg(tablename, ',' ORDER BY tablename) FROM pg_tables WHERE schemaname = 'public'",
            ),
            tables_before,
            "{what}: tables changed"
        );
    };
    let first_copy = |d: &str| d.find("\nCOPY ").unwrap() + 1;

    // Meta-commands and SQL between pg_dump's lines.
    let attack = format!(
        "\\! id > {p}\n\\copy (select 1) to '{p}'\nCOMMIT;\ncreate table public.attacker_tbl(x text);\n \
         drop table public.service_networks;\nBEGIN;\n",
        p = pwned.display()
    );
    let meta = e.path("meta");
    crafted(&bundle, &meta, |d| {
        let i = first_copy(&d);
        format!("{}{attack}{}", &d[..i], &d[i..])
    });
    let m = meta.to_str().unwrap();
    let out = e.plugin(&["migrate", "import", m, "-n", "crafted-meta"]);
    assert_eq!(out.status.code(), Some(3), "{}", text(&out));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("db/dump.sql") && err.contains("not something pg_dump --data-only writes"),
        "{err}"
    );
    unchanged("pod exec");
    // Refused before the first change on cluster 0 (no namespace, no Secrets), and by --dry-run.
    let ns = e.cluster.kubectl(&["get", "namespace", "crafted-meta"]);
    assert!(
        !ns.status.success(),
        "namespace made before the dump was checked: {}",
        text(&ns)
    );
    let out = e.plugin(&["migrate", "import", m, "-n", "crafted-meta", "--dry-run"]);
    assert_eq!(out.status.code(), Some(3), "dry-run: {}", text(&out));
    unchanged("dry-run");
    let db_url = e.dst_pg.url_as("admin", "installer");
    let out = e.plugin(&["migrate", "import", m, "-n", "crafted-meta", "--db-url", &db_url]);
    assert_eq!(out.status.code(), Some(3), "{}", text(&out));
    unchanged("--db-url");

    // Rows of another cluster, and a migrations block spelled in upper case.
    let foreign = e.path("foreign");
    crafted(&bundle, &foreign, |d| {
        let i = d.find("COPY public.clusters ").unwrap();
        let row_at = d[i..].find('\n').unwrap() + i + 1;
        let row_end = d[row_at..].find('\n').unwrap() + row_at + 1;
        let row = &d[row_at..row_end];
        let cid = row.split('\t').next().unwrap();
        let other = row.replace(cid, "11111111-2222-3333-4444-555555555555");
        let d = format!("{}{other}{}", &d[..row_end], &d[row_end..]);
        d.replacen(
            "\n-- PostgreSQL database dump complete",
            "\nCOPY public.MIGRATIONS (id) FROM stdin;\n20240617140000\n\\.\n\n-- PostgreSQL database dump complete",
            1,
        )
    });
    let f = foreign.to_str().unwrap();
    let out = e.plugin(&["migrate", "import", f, "-n", "crafted-foreign"]);
    assert_eq!(out.status.code(), Some(3), "{}", text(&out));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("table clusters, row 2") && err.contains("not of this bundle's cluster"),
        "{err}"
    );
    unchanged("foreign rows");

    // Well-formed COPY data the server refuses (an events id that is no number): exit 3, not 4.
    let refused = e.path("refused");
    crafted(&bundle, &refused, |d| {
        let i = d.find("COPY public.events ").unwrap();
        let row_at = d[i..].find('\n').unwrap() + i + 1;
        let id_end = d[row_at..].find('\t').unwrap() + row_at;
        format!("{}notanumber{}", &d[..row_at], &d[id_end..])
    });
    let r = refused.to_str().unwrap();
    let out = e.plugin(&["migrate", "import", r, "-n", "crafted-refused"]);
    assert_eq!(out.status.code(), Some(3), "{}", text(&out));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("refused the rows of table events"), "{err}");
    unchanged("refused data");

    // export --db-dump of a dump with a meta-command: refused with exit 3, no bundle.
    let hand = e.path("hand.sql");
    let st = Command::new("pg_dump")
        .args(["--data-only", "--no-owner", "--no-privileges", "-d", &e.src_url()])
        .args(["-f", hand.to_str().unwrap()])
        .status()
        .unwrap();
    assert!(st.success());
    let d = std::fs::read_to_string(&hand).unwrap();
    let i = first_copy(&d);
    std::fs::write(
        &hand,
        format!("{}\\! id > {}\n{}", &d[..i], pwned.display(), &d[i..]),
    )
    .unwrap();
    let token = e.node0.token_file.display().to_string();
    let out_dir = e.path("from-hand");
    let out = e.plugin(&[
        "migrate",
        "export",
        "--from",
        &e.node0.url,
        "--token-file",
        &token,
        "--db-dump",
        hand.to_str().unwrap(),
        "--out",
        out_dir.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(3), "{}", text(&out));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("not something pg_dump --data-only writes"),
        "{}",
        text(&out)
    );
    assert!(!out_dir.exists() && !pwned.exists());
}

/// A copy of `bundle` at `to` with crs/crs.json (and the manifest, as JSON) edited, resealed.
fn crafted_crs(bundle: &Path, to: &Path, edit: impl FnOnce(&mut Vec<Value>, &mut Value)) {
    copy_dir(bundle, to);
    let cp = to.join("crs/crs.json");
    let mut crs: Vec<Value> = serde_json::from_slice(&std::fs::read(&cp).unwrap()).unwrap();
    let mp = to.join("manifest.json");
    let mut m: Value = serde_json::from_slice(&std::fs::read(&mp).unwrap()).unwrap();
    edit(&mut crs, &mut m);
    std::fs::write(&cp, serde_json::to_vec_pretty(&crs).unwrap()).unwrap();
    std::fs::write(&mp, serde_json::to_vec_pretty(&m).unwrap()).unwrap();
    reseal(to);
}

/// The reviews' findings, end to end: crafted (resealed) crs.json sets are refused with exit 3
/// by --dry-run and by the import, before anything is made; -n is checked locally; a default
/// namespace that is a system one or exists without our label is refused; --dry-run runs the
/// checks and exits with the import's code, and survives `| head -1`; the volume holds no pull
/// secret; a re-run says "already complete"; a re-export's import says what is there and what
/// to do; status marks differences; wait's timeout names the last cause and hints at -n.
#[test]
fn crafted_sets_namespaces_dry_run_and_messages() {
    skip_unless_ready!();
    let e = Env::start(&[], true);
    let bundle = e.path("bundle");
    let out = e.export(&bundle);
    assert_eq!(out.status.code(), Some(0), "export: {}", text(&out));
    let b = bundle.to_str().unwrap();
    let manifest: Value =
        serde_json::from_slice(&std::fs::read(bundle.join("manifest.json")).unwrap()).unwrap();
    let cid = manifest["cluster"]["id"].as_str().unwrap().to_string();
    let crs: Vec<Value> =
        serde_json::from_slice(&std::fs::read(bundle.join("crs/crs.json")).unwrap()).unwrap();
    let cd = crs.iter().find(|o| o["kind"] == "ClusterDeployment").unwrap()["metadata"]["name"]
        .as_str()
        .unwrap()
        .to_string();
    let ann = serde_json::json!({ "agent-day2.openshift.io/migration-cluster": cid });
    let cis_before = e.kubectl_json(&["get", "clusterimagesets", "-o", "json"])["items"]
        .as_array()
        .unwrap()
        .len();

    // 1. Crafted sets: exit 3 from --dry-run and from the import, nothing made.
    type Edit = Box<dyn Fn(&mut Vec<Value>, &mut Value)>;
    let variants: Vec<(&str, Edit, &str)> = vec![
        (
            "evil-cis",
            Box::new({
                let ann = ann.clone();
                move |c, _| {
                    c.push(
                        serde_json::json!({"apiVersion": "hive.openshift.io/v1", "kind": "ClusterImageSet",
                        "metadata": {"name": "img4.99.0-x86-64-appsub", "annotations": ann},
                        "spec": {"releaseImage": "evil.example.com/ocp-release:4.99"}}),
                    )
                }
            }),
            "ClusterImageSet",
        ),
        (
            "sa-token",
            Box::new({
                let ann = ann.clone();
                move |c, _| {
                    c.push(serde_json::json!({"apiVersion": "v1", "kind": "Secret",
                        "type": "kubernetes.io/service-account-token",
                        "metadata": {"name": "sa-token", "annotations": ann}}))
                }
            }),
            "the bundle's Secrets are",
        ),
        (
            "configmap",
            Box::new({
                let ann = ann.clone();
                move |c, _| {
                    c.push(serde_json::json!({"apiVersion": "v1", "kind": "ConfigMap",
                        "metadata": {"name": "agent-day2-migration", "annotations": ann},
                        "data": {"record.json": "{}"}}))
                }
            }),
            "ConfigMap",
        ),
        (
            "dupe",
            Box::new(|c, _| {
                let first = c[0].clone();
                c.push(first)
            }),
            "appears twice",
        ),
        (
            "cd-sysns",
            Box::new(|c, _| {
                for o in c.iter_mut().filter(|o| o["kind"] == "ClusterDeployment") {
                    o["metadata"]["name"] = "multicluster-engine".into();
                }
            }),
            "the ClusterDeployment is named",
        ),
    ];
    for (name, edit, needle) in &variants {
        let to = e.path(&format!("b-{name}"));
        crafted_crs(&bundle, &to, edit);
        let t = to.to_str().unwrap();
        for args in [
            &["migrate", "import", t, "--dry-run"][..],
            &["migrate", "import", t],
        ] {
            let out = e.plugin(args);
            assert_eq!(out.status.code(), Some(3), "{name} {args:?}: {}", text(&out));
            let err = String::from_utf8_lossy(&out.stderr);
            assert!(
                err.contains("crs/crs.json") && err.contains(needle),
                "{name}: {err}"
            );
        }
    }
    // A consistent bundle whose cluster is named like a system namespace: refused without -n.
    let sys = e.path("b-sysname");
    crafted_crs(&bundle, &sys, |c, m| {
        let text = serde_json::to_string(c)
            .unwrap()
            .replace(&format!("\"{cd}"), "\"multicluster-engine");
        *c = serde_json::from_str(&text).unwrap();
        m["cluster"]["name"] = "multicluster-engine".into();
    });
    let out = e.plugin(&["migrate", "import", sys.to_str().unwrap(), "--dry-run"]);
    assert_eq!(out.status.code(), Some(3), "{}", text(&out));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("system namespace; pass -n NAMESPACE explicitly"),
        "{}",
        text(&out)
    );
    let items = e.kubectl_json(&["get", "clusterimagesets", "-o", "json"]);
    assert_eq!(
        items["items"].as_array().unwrap().len(),
        cis_before,
        "nothing made"
    );
    let o = e.cluster.kubectl(&["get", "secrets", "-A", "-o", "name"]);
    assert!(!String::from_utf8_lossy(&o.stdout).contains("sa-token"));

    // 2. -n checked locally: exit 2 (the server is not even asked).
    let out = e.plugin(&[
        "migrate",
        "import",
        b,
        "-n",
        "Bad_NS",
        "--server",
        "https://192.168.111.9:6443",
    ]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("-n/--namespace"),
        "{}",
        text(&out)
    );

    // A default namespace that exists and is not ours: refused by --dry-run and import (exit 4).
    let o = e.cluster.kubectl(&["create", "namespace", &cd]);
    assert!(o.status.success(), "{}", text(&o));
    for args in [
        &["migrate", "import", b, "--dry-run"][..],
        &["migrate", "import", b],
    ] {
        let out = e.plugin(args);
        assert_eq!(out.status.code(), Some(4), "{args:?}: {}", text(&out));
        assert!(
            String::from_utf8_lossy(&out.stderr).contains("pass -n NAMESPACE explicitly"),
            "{}",
            text(&out)
        );
    }
    let o = e
        .cluster
        .kubectl(&["get", "configmap", "agent-day2-migration", "-n", &cd]);
    assert!(!o.status.success(), "no record written");

    // 3. --dry-run into a fresh namespace: every check passes (exit 0), plan on stdout, nothing
    // made; through `| head -1` it neither panics nor fails.
    let ns = "mig-a";
    let out = e.plugin(&["migrate", "import", b, "-n", ns, "--dry-run"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let so = String::from_utf8_lossy(&out.stdout);
    assert!(
        so.contains("Dry run: every check passed (no import of this bundle yet)"),
        "{so}"
    );
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("schema: cluster 0 has every column of the dump's"),
        "the schema was read"
    );
    assert!(so.contains("table migrations is left out"), "{so}");
    assert!(!e.cluster.kubectl(&["get", "namespace", ns]).status.success());
    let sh = format!("set -o pipefail; '{BIN}' migrate import '{b}' -n {ns} --dry-run | head -1");
    let out = e.cmd(&[]).get_envs().fold(Command::new("bash"), |mut c, (k, v)| {
        match v {
            Some(v) => c.env(k, v),
            None => c.env_remove(k),
        };
        c
    });
    let mut out = out;
    let out = out.arg("-c").arg(&sh).stdin(Stdio::null()).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert!(
        !String::from_utf8_lossy(&out.stderr).contains("panicked"),
        "{}",
        text(&out)
    );
    assert_eq!(String::from_utf8_lossy(&out.stdout).lines().count(), 1);

    // 4. Import: the namespace is labelled ours; the summary reports cluster 0; the volume has
    // no pull secret.
    let out = e.plugin(&["migrate", "import", b, "-n", ns]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let so = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(so.contains("cluster 0 holds"), "{so}");
    assert!(
        so.contains("table migrations is cluster 0's own, not restored"),
        "{so}"
    );
    let nsobj = e.kubectl_json(&["get", "namespace", ns, "-o", "json"]);
    assert_eq!(
        nsobj["metadata"]["labels"]["agent-day2.openshift.io/migration"],
        "true"
    );
    let vol = e.volumes.join(ns);
    let mut stack = vec![vol.clone()];
    let mut seen_ic = false;
    while let Some(d) = stack.pop() {
        for f in std::fs::read_dir(&d).unwrap() {
            let p = f.unwrap().path();
            if p.is_dir() {
                stack.push(p);
                continue;
            }
            let bytes = std::fs::read(&p).unwrap();
            if p.ends_with("install-config.yaml") {
                seen_ic = true;
                let t = String::from_utf8_lossy(&bytes);
                assert!(t.contains(&format!("Secret {ns}/{cd}-pull-secret")), "{t}");
            }
            if p.extension().is_some_and(|x| x == "tar") {
                continue; // node 0's log tarballs carry no install-config
            }
            assert!(
                !bytes.windows(5).any(|w| w == b"auths"),
                "{} on the volume holds a pull secret",
                p.display()
            );
        }
    }
    let bundle_ic = bundle.join(format!("files/{cid}/install-config.yaml"));
    if bundle_ic.exists() {
        assert!(
            seen_ic,
            "install-config.yaml (without its pull secret) is on the volume"
        );
        assert!(
            std::fs::read_to_string(&bundle_ic)
                .unwrap()
                .contains("pullSecret"),
            "the bundle's own copy is unchanged"
        );
    }

    // 5. Re-run: "already complete", not "resuming"; the summary says nothing was to do.
    let out = e.plugin(&["migrate", "import", b, "-n", ns]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("already complete") && !err.contains("resuming"),
        "{err}"
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("already complete (nothing to do)"));

    // 6. A re-export of the same node 0: refused, saying what is there and what to do.
    let again = e.path("bundle2");
    let out = e.export(&again);
    assert_eq!(out.status.code(), Some(0), "export: {}", text(&out));
    let first_sum = std::fs::read_to_string(bundle.join("manifest.json.sha256")).unwrap();
    let out = e.plugin(&["migrate", "import", again.to_str().unwrap(), "-n", ns]);
    assert_eq!(out.status.code(), Some(4), "{}", text(&out));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(first_sum.trim()),
        "names the bundle on cluster 0: {err}"
    );
    assert!(err.contains("exported "), "{err}");
    assert!(
        err.contains("nothing to do") && err.contains("migrate status"),
        "{err}"
    );
    assert!(!err.contains("remove that import first"), "{err}");

    // 7. status marks what differs and says so last.
    let out = e.plugin(&["migrate", "status", b, "-n", ns]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let so = String::from_utf8_lossy(&out.stdout);
    assert!(
        so.trim_end()
            .ends_with("Every count read on cluster 0 equals the bundle's."),
        "{so}"
    );
    let one = crs
        .iter()
        .find(|o| o["kind"] == "NMStateConfig" || o["kind"] == "InfraEnv")
        .unwrap();
    let kind = one["kind"].as_str().unwrap().to_lowercase();
    let o = e.cluster.kubectl(&[
        "delete",
        &format!("{kind}s"),
        one["metadata"]["name"].as_str().unwrap(),
        "-n",
        ns,
    ]);
    assert!(o.status.success(), "{}", text(&o));
    let out = e.plugin(&["migrate", "status", b, "-n", ns]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let so = String::from_utf8_lossy(&out.stdout);
    assert!(so.contains(" ≠ "), "{so}");
    assert!(
        so.contains("count(s) on cluster 0 differ from the bundle"),
        "{so}"
    );
    let out = e.plugin(&["migrate", "status", b, "-n", ns, "-o", "json"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    let kind_name = one["kind"].as_str().unwrap();
    assert!(
        doc["differing"]
            .as_array()
            .unwrap()
            .contains(&Value::from(format!("object {kind_name}"))),
        "{doc}"
    );

    // 8. wait in the wrong namespace: the timeout names the last cause and hints at -n, and
    // never says "unreachable" for a cut poll.
    let out = e.plugin(&["migrate", "wait", b, "--timeout", "2s", "--interval", "1s"]);
    assert_eq!(out.status.code(), Some(5), "{}", text(&out));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(&format!(
            "last: no record ConfigMap agent-day2-migration in namespace {cd}"
        )),
        "{err}"
    );
    assert!(err.contains("pass the same -n"), "{err}");
    assert!(!err.contains("unreachable"), "{err}");
}
