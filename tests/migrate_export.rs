//! `migrate export` end to end through the built binary, in a private network namespace, against
//! `agent-day2-sim node0` (node 0's simulated assisted-service) on a real PostgreSQL:
//! the bundle (modes 0700/0600, manifest counts equal to the database's, every event page,
//! `Bundle::open` verifies), one changed byte refused (exit 3), node 0 gone mid-way (non-zero
//! exit, nothing left on disk), a wrong token (exit 4, says where the token is), `--db-dump`
//! with a plain dump (accepted), a custom-format dump and a dump of another install (refused,
//! exit 3), no database flag (exit 2).
//!
//! Fails (with the reason) without root / a namespace or the PostgreSQL binaries.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Command, Output, Stdio};

use agent_day2::migrate::bundle::{Bundle, BundleManifest};
use agent_day2_sim::harness::Node0;
use agent_day2_sim::postgres::{self, Postgres};
use serde_json::Value;

use crate::support::cluster;
use cluster::{text, BIN};

/// Root (a network namespace) and PostgreSQL, or the test fails saying which is missing.
macro_rules! require_ready {
    () => {
        agent_day2_sim::harness::require_netns();
        agent_day2_sim::harness::require_postgres();
    };
}

fn plugin(args: &[&str]) -> Output {
    Command::new(BIN)
        .args(args)
        .env_remove("HTTP_PROXY")
        .env_remove("http_proxy")
        .env_remove("HTTPS_PROXY")
        .env_remove("https_proxy")
        .stdin(Stdio::null())
        .output()
        .unwrap()
}

fn export(n0: &Node0, token_file: &Path, db: &[&str], out: &Path) -> Output {
    let mut args = vec![
        "migrate",
        "export",
        "--from",
        &n0.url,
        "--token-file",
        token_file.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
    ];
    args.extend_from_slice(db);
    plugin(&args)
}

fn sql(url: &str, q: &str) -> String {
    postgres::psql(url, q).unwrap().trim().to_string()
}

fn mode(p: &Path) -> u32 {
    std::fs::symlink_metadata(p).unwrap().permissions().mode() & 0o777
}

/// Every path under `dir` (relative), with its mode.
fn tree(dir: &Path, prefix: &str, out: &mut Vec<(String, bool, u32)>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let e = e.unwrap();
        let rel = format!("{prefix}{}", e.file_name().to_string_lossy());
        let is_dir = e.file_type().unwrap().is_dir();
        out.push((rel.clone(), is_dir, mode(&e.path())));
        if is_dir {
            tree(&e.path(), &format!("{rel}/"), out);
        }
    }
}

fn names(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

fn start_source(tmp: &Path, name: &str, args: &[&str]) -> (Postgres, Node0) {
    let pg = Postgres::start(&tmp.join(format!("{name}-db")), "127.0.0.1".parse().unwrap()).unwrap();
    pg.create_db("installer", "admin").unwrap();
    let n0 = Node0::start(&tmp.join(name), "192.168.111.80:0", &pg.url("installer"), args).unwrap();
    (pg, n0)
}

#[test]
fn export_writes_a_private_verified_bundle_that_matches_the_database() {
    require_ready!();
    let tmp = tempfile::tempdir().unwrap();
    // More events than one page (1000) and a worker: every page must arrive.
    let (pg, n0) = start_source(tmp.path(), "node0", &["--hosts", "4", "--events", "2345"]);
    let db = pg.url("installer");
    let outdir = tmp.path().join("out");
    std::fs::create_dir(&outdir).unwrap();
    let out = outdir.join("bundle");
    let o = export(&n0, &n0.token_file, &["--db-url", &db], &out);
    assert!(o.status.success(), "{}", text(&o));
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(
        stdout.contains("keep it private") && stdout.contains("checksum sha256:"),
        "{stdout}"
    );
    assert_eq!(names(&outdir), vec!["bundle"], "no temporary directory left");

    // Modes: every directory 0700, every file 0600.
    assert_eq!(mode(&out), 0o700);
    let mut all = vec![];
    tree(&out, "", &mut all);
    assert!(all.len() > 10, "{all:?}");
    for (rel, is_dir, m) in &all {
        assert_eq!(*m, if *is_dir { 0o700 } else { 0o600 }, "{rel}");
    }

    // The manifest against the database.
    let b = Bundle::open(&out).unwrap();
    let m: &BundleManifest = &b.manifest;
    let want_rows: std::collections::BTreeMap<String, u64> = agent_day2_sim::node0schema::row_counts(&db)
        .unwrap()
        .into_iter()
        .collect();
    for (t, n) in &want_rows {
        assert_eq!(m.counts.rows.get(t), Some(n), "rows of {t}: {:?}", m.counts.rows);
    }
    assert_eq!(m.counts.rows.len(), want_rows.len(), "{:?}", m.counts.rows);
    let cid = sql(&db, "SELECT id FROM clusters");
    assert_eq!(m.cluster.id, cid);
    assert_eq!(m.cluster.name, sql(&db, "SELECT name FROM clusters"));
    assert_eq!(
        m.source.schema_version,
        sql(&db, "SELECT max(id) FROM migrations")
    );
    // Every migration id, the typos too (the greatest says nothing: it is always 21211125182200).
    let mut want_ids = agent_day2_sim::node0schema::migration_ids(&db).unwrap();
    want_ids.sort();
    assert_eq!(m.source.migration_ids, want_ids);
    assert!(m.source.migration_ids.contains(&"2021115162400".to_string()));
    assert_eq!(m.source.schema_version, "21211125182200");
    assert_eq!(m.source.db_source, "db-url");
    assert_eq!(m.counts.hosts, 4);
    let mut hosts = m.cluster.host_ids.clone();
    hosts.sort();
    assert_eq!(
        hosts.join("\n"),
        sql(
            &db,
            &format!("SELECT id FROM hosts WHERE cluster_id = '{cid}' ORDER BY id")
        )
    );
    let cluster_events: u64 = sql(
        &db,
        &format!("SELECT count(*) FROM events WHERE cluster_id = '{cid}'"),
    )
    .parse()
    .unwrap();
    assert!(cluster_events > 1000, "{cluster_events}");
    assert_eq!(m.counts.events, cluster_events);
    let ev: Vec<Value> = serde_json::from_slice(&b.read(&format!("api/events-{cid}.json")).unwrap()).unwrap();
    assert_eq!(ev.len() as u64, cluster_events, "all pages, each once");
    let ie = &m.cluster.infra_env_ids[0];
    let ie_events: usize = sql(
        &db,
        &format!("SELECT count(*) FROM events WHERE infra_env_id = '{ie}'"),
    )
    .parse()
    .unwrap();
    let iev: Vec<Value> =
        serde_json::from_slice(&b.read(&format!("api/events-infraenv-{ie}.json")).unwrap()).unwrap();
    assert_eq!(iev.len(), ie_events);
    assert_eq!(
        m.counts.nmstate_configs, 4,
        "one per host of the static network config"
    );
    for f in [
        "db/dump.sql".to_string(),
        "api/clusters.json".into(),
        "api/infra-envs.json".into(),
        format!("api/hosts-{ie}.json"),
        format!("credentials/{cid}/kubeconfig"),
        format!("credentials/{cid}/kubeconfig-noingress"),
        format!("credentials/{cid}/kubeadmin-password"),
        format!("credentials/{cid}/credentials.json"),
        format!("files/{cid}/install-config.yaml"),
        format!("files/{cid}/metadata.json"),
        format!("logs/{cid}/logs-all.tar"),
        "crs/crs.json".into(),
    ] {
        assert!(b.entry(&f).is_some_and(|e| e.size > 0), "{f} missing or empty");
    }
    assert!(
        m.files
            .iter()
            .any(|e| e.path.starts_with(&format!("manifests/{cid}/"))),
        "{:?}",
        m.files
    );
    // The logs tar is a tar; the kubeconfig is node 0's.
    let tar = b.read(&format!("logs/{cid}/logs-all.tar")).unwrap();
    assert_eq!(&tar[257..262], b"ustar");
    // The CRs: the kinds of the contract, the pull secret from the dump.
    let crs: Vec<Value> = serde_json::from_slice(&b.read("crs/crs.json").unwrap()).unwrap();
    let count = |k: &str| crs.iter().filter(|o| o["kind"] == k).count();
    assert_eq!(
        (
            count("Secret"),
            count("ClusterImageSet"),
            count("ClusterDeployment"),
            count("AgentClusterInstall"),
            count("InfraEnv"),
            count("NMStateConfig"),
            count("Agent")
        ),
        (3, 1, 1, 1, 1, 4, 4)
    );
    use base64::Engine;
    let ps = crs
        .iter()
        .find(|o| o["type"] == "kubernetes.io/dockerconfigjson")
        .unwrap();
    let ps = base64::engine::general_purpose::STANDARD
        .decode(ps["data"][".dockerconfigjson"].as_str().unwrap())
        .unwrap();
    assert_eq!(
        String::from_utf8(ps).unwrap(),
        sql(&db, "SELECT pull_secret FROM clusters")
    );
    let kc = crs
        .iter()
        .find(|o| o["data"].get("kubeconfig").is_some())
        .unwrap();
    let kc = base64::engine::general_purpose::STANDARD
        .decode(kc["data"]["kubeconfig"].as_str().unwrap())
        .unwrap();
    assert_eq!(kc, b.read(&format!("credentials/{cid}/kubeconfig")).unwrap());

    // Exporting again onto the same path: refused with exit 3 like add-nodes' existing output
    // (issue 22 item 10: it was 2), the bundle untouched.
    let o = export(&n0, &n0.token_file, &["--db-url", &db], &out);
    assert_eq!(o.status.code(), Some(3), "{}", text(&o));
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("already exists"),
        "{}",
        text(&o)
    );
    assert_eq!(Bundle::open(&out).unwrap().checksum, b.checksum);

    // One changed byte: refused with exit 3 naming the file (in-process and through the binary).
    let p = out.join(format!("api/events-{cid}.json"));
    let mut bytes = std::fs::read(&p).unwrap();
    bytes[1] ^= 0x20;
    std::fs::write(&p, &bytes).unwrap();
    let e = Bundle::open(&out).unwrap_err();
    assert_eq!(e.exit_code(), 3);
    assert!(
        e.to_string()
            .contains(&format!("bundle file api/events-{cid}.json: sha256 mismatch")),
        "{e}"
    );
    let o = plugin(&["migrate", "wait", out.to_str().unwrap(), "--timeout", "1s"]);
    assert_eq!(o.status.code(), Some(3), "{}", text(&o));
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("sha256 mismatch"),
        "{}",
        text(&o)
    );

    // A wrong token: exit 4, says which token is needed and where it is.
    let bad = tmp.path().join("bad-token");
    std::fs::write(&bad, "not-the-token\n").unwrap();
    let out2 = outdir.join("b2");
    let o = export(&n0, &bad, &["--db-url", &db], &out2);
    assert_eq!(o.status.code(), Some(4), "{}", text(&o));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("HTTP 401")
            && err.contains("user token")
            && err.contains(".openshift_install_state.json"),
        "{err}"
    );
    assert_eq!(
        names(&outdir),
        vec!["bundle"],
        "nothing left by the refused export"
    );
    // A token of node 0's key for another persona (agentAuth): 403, exit 4, says which one.
    let agent = tmp.path().join("agent-token");
    let t =
        agent_day2_sim::node0::mint_token(&n0.dir, &serde_json::json!({"auth_scheme": "agentAuth"})).unwrap();
    std::fs::write(&agent, t).unwrap();
    let o = export(&n0, &agent, &["--db-url", &db], &out2);
    assert_eq!(o.status.code(), Some(4), "{}", text(&o));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("HTTP 403") && err.contains("authClaim agentAuth") && err.contains("not the user token"),
        "{err}"
    );
    assert_eq!(names(&outdir), vec!["bundle"]);

    // No database flag: usage error explaining the three.
    let o = plugin(&[
        "migrate",
        "export",
        "--from",
        &n0.url,
        "--out",
        out2.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("--db-url") && err.contains("--db-container") && err.contains("--db-dump"),
        "{err}"
    );
    assert_eq!(names(&outdir), vec!["bundle"]);
}

#[test]
fn source_gone_mid_way_leaves_nothing_and_db_dump_files_are_checked() {
    require_ready!();
    let tmp = tempfile::tempdir().unwrap();
    let (pg, mut n0) = start_source(tmp.path(), "dying", &["--die-after-requests", "5"]);
    let db = pg.url("installer");
    let outdir = tmp.path().join("out");
    std::fs::create_dir(&outdir).unwrap();
    let out = outdir.join("bundle");
    let o = export(&n0, &n0.token_file, &["--db-url", &db], &out);
    assert_eq!(o.status.code(), Some(4), "{}", text(&o));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains(&n0.url) && err.contains("no answer"), "{err}");
    assert!(
        n0.wait_exit(std::time::Duration::from_secs(10)).is_some(),
        "node 0 exited"
    );
    assert_eq!(
        names(&outdir),
        Vec::<String>::new(),
        "no bundle and no temporary directory"
    );
    drop(n0);

    // The same database served again (the rows are already there), dumps made by hand.
    let n0 = Node0::start(&tmp.path().join("node0"), "192.168.111.80:0", &db, &[]).unwrap();
    let pg_dump = |extra: &[&str], file: &Path| {
        let st = Command::new("pg_dump")
            .args(["--data-only", "--no-owner", "--no-privileges"])
            .args(extra)
            .args(["-d", &db, "-f", file.to_str().unwrap()])
            .status()
            .unwrap();
        assert!(st.success());
    };
    // A host soft-deleted after node 0 read its rows (gorm sets deleted_at; REST never shows
    // it): the dump holds the row, the host cross-check must not count it.
    sql(
        &db,
        "CREATE TEMP TABLE t AS SELECT * FROM hosts LIMIT 1; \
         UPDATE t SET id = 'dddddddd-0000-0000-0000-000000000001', deleted_at = now(); \
         INSERT INTO hosts SELECT * FROM t;",
    );
    let plain = tmp.path().join("plain.sql");
    pg_dump(&[], &plain);
    let o = export(&n0, &n0.token_file, &["--db-dump", plain.to_str().unwrap()], &out);
    assert!(o.status.success(), "{}", text(&o));
    let b = Bundle::open(&out).unwrap();
    assert_eq!(b.manifest.source.db_source, "db-dump");
    assert_eq!(
        b.read("db/dump.sql").unwrap(),
        std::fs::read(&plain).unwrap(),
        "copied as is"
    );
    assert_eq!(b.manifest.counts.hosts, 3);
    assert_eq!(
        b.manifest.counts.rows["hosts"], 4,
        "the soft-deleted row travels in the dump"
    );

    // A custom-format dump: refused before anything is kept, saying how to make the right one.
    let custom = tmp.path().join("custom.dump");
    pg_dump(&["-Fc"], &custom);
    let out2 = outdir.join("b2");
    let o = export(
        &n0,
        &n0.token_file,
        &["--db-dump", custom.to_str().unwrap()],
        &out2,
    );
    assert_eq!(o.status.code(), Some(3), "{}", text(&o));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("custom-format") && err.contains("pg_dump --data-only --no-owner --no-privileges"),
        "{err}"
    );
    assert_eq!(names(&outdir), vec!["bundle"]);

    // A dump of another install (another cluster id): refused.
    let cid = sql(&db, "SELECT id FROM clusters");
    let other = tmp.path().join("other.sql");
    let text_dump = std::fs::read_to_string(&plain).unwrap();
    std::fs::write(
        &other,
        text_dump.replace(&cid, "00000000-0000-0000-0000-00000000abcd"),
    )
    .unwrap();
    let o = export(
        &n0,
        &n0.token_file,
        &["--db-dump", other.to_str().unwrap()],
        &out2,
    );
    assert_eq!(o.status.code(), Some(3), "{}", text(&o));
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("another install"),
        "{}",
        text(&o)
    );
    assert_eq!(names(&outdir), vec!["bundle"]);

    // Ctrl-C while the dump runs (pg_dump waits on a server that never answers): the temporary
    // bundle, which already holds the credentials, is removed; exit 130.
    let hang = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = hang.local_addr().unwrap().port();
    let out3 = outdir.join("b3");
    let child = Command::new(BIN)
        .args(["migrate", "export", "--from", &n0.url, "--token-file"])
        .arg(&n0.token_file)
        .args([
            "--db-url",
            &format!("postgresql://admin@127.0.0.1:{port}/installer"),
            "--out",
        ])
        .arg(&out3)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    let tmp_bundle = loop {
        let found = std::fs::read_dir(&outdir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .find(|p| {
                p.file_name().unwrap().to_string_lossy().starts_with(".b3.tmp-") && p.join("db").is_dir()
            });
        if let Some(p) = found {
            break p;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "export never reached the dump"
        );
        std::thread::sleep(std::time::Duration::from_millis(10));
    };
    assert!(tmp_bundle.join("credentials").is_dir());
    let st = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(st.success());
    let o = child.wait_with_output().unwrap();
    assert_eq!(o.status.code(), Some(130), "{}", text(&o));
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("interrupted"),
        "{}",
        text(&o)
    );
    assert_eq!(names(&outdir), vec!["bundle"], "temporary bundle removed");
    drop(hang);

    // --db-container: `podman exec NAME pg_dump ... -h localhost -U admin -d installer`, here
    // through a stand-in podman that records its arguments and runs the real pg_dump as node
    // 0's assisted-db container would: the server listens on localhost (`--net host`) with its
    // socket only in its own directory (start_db.sh: `-k /tmp`), nothing in libpq's default
    // socket directory, no PGHOST set; PGPORT stands for the container's default port.
    let fake = tmp.path().join("fakebin");
    std::fs::create_dir(&fake).unwrap();
    let argv = tmp.path().join("podman-argv");
    std::fs::write(
        fake.join("podman"),
        format!(
            "#!/bin/sh\necho \"$@\" > {}\n[ \"$1\" = exec ] || exit 99\nshift 2\n\
             unset PGHOST PGHOSTADDR PGSERVICE PGDATABASE\nPGPORT={} exec \"$@\"\n",
            argv.display(),
            pg.port()
        ),
    )
    .unwrap();
    std::fs::set_permissions(fake.join("podman"), std::fs::Permissions::from_mode(0o755)).unwrap();
    let path = format!("{}:{}", fake.display(), std::env::var("PATH").unwrap_or_default());
    // The stand-in refuses what the container refuses: pg_dump without -h finds no socket.
    let o = Command::new(fake.join("podman"))
        .args([
            "exec",
            "assisted-db",
            "pg_dump",
            "--data-only",
            "-U",
            "admin",
            "-d",
            "installer",
        ])
        .env("PATH", &path)
        .env("PGHOST", "127.0.0.1")
        .output()
        .unwrap();
    assert!(
        !o.status.success(),
        "pg_dump without -h reached the database: {}",
        text(&o)
    );
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("socket"),
        "{}",
        text(&o)
    );
    let out4 = outdir.join("b4");
    let o = Command::new(BIN)
        .args(["migrate", "export", "--from", &n0.url, "--token-file"])
        .arg(&n0.token_file)
        .args(["--db-container", "assisted-db", "--out"])
        .arg(&out4)
        .env("PATH", &path)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o));
    assert_eq!(
        std::fs::read_to_string(&argv).unwrap().trim(),
        "exec assisted-db pg_dump --data-only --no-owner --no-privileges -h localhost -U admin -d installer"
    );
    let b4 = Bundle::open(&out4).unwrap();
    assert_eq!(b4.manifest.source.db_source, "db-container");
    assert_eq!(b4.manifest.counts.rows, b.manifest.counts.rows);
    std::fs::remove_dir_all(&out4).unwrap();

    // --db-url with a password: pg_dump gets it in PGPASSWORD, its argv holds the URL without
    // it (argv is visible to every user in `ps`). A stand-in pg_dump records both, then runs
    // the real one.
    let real_pg_dump = postgres::bin_dir()
        .map(|b| b.join("pg_dump"))
        .filter(|p| p.is_file())
        .unwrap_or_else(|| "pg_dump".into());
    let pg_argv = tmp.path().join("pg_dump-argv");
    let pg_env = tmp.path().join("pg_dump-env");
    std::fs::write(
        fake.join("pg_dump"),
        format!(
            "#!/bin/sh\necho \"$@\" > {}\necho \"PGPASSWORD=${{PGPASSWORD-unset}}\" > {}\nexec {} \"$@\"\n",
            pg_argv.display(),
            pg_env.display(),
            real_pg_dump.display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(fake.join("pg_dump"), std::fs::Permissions::from_mode(0o755)).unwrap();
    let secret_url = pg.url_as("admin:s3cr%40t", "installer");
    let out5 = outdir.join("b5");
    let o = Command::new(BIN)
        .args(["migrate", "export", "--from", &n0.url, "--token-file"])
        .arg(&n0.token_file)
        .args(["--db-url", &secret_url, "--out"])
        .arg(&out5)
        .env("PATH", &path)
        .env_remove("PGPASSWORD")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o));
    let argv5 = std::fs::read_to_string(&pg_argv).unwrap();
    assert!(
        !argv5.contains("s3cr"),
        "password on pg_dump's command line: {argv5}"
    );
    assert_eq!(
        argv5.trim(),
        format!(
            "--data-only --no-owner --no-privileges -d {}",
            pg.url_as("admin", "installer")
        )
    );
    assert_eq!(
        std::fs::read_to_string(&pg_env).unwrap().trim(),
        "PGPASSWORD=s3cr@t"
    );
    let b5 = Bundle::open(&out5).unwrap();
    assert_eq!(b5.manifest.counts.rows, b.manifest.counts.rows);
    std::fs::remove_dir_all(&out5).unwrap();

    // pg_dump not installed: a usage error saying what to do, nothing left.
    let o = Command::new(BIN)
        .args(["migrate", "export", "--from", &n0.url, "--token-file"])
        .arg(&n0.token_file)
        .args(["--db-url", &db, "--out"])
        .arg(&out4)
        .env("PATH", "/nonexistent")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("pg_dump is not installed"),
        "{}",
        text(&o)
    );
    assert_eq!(names(&outdir), vec!["bundle"]);
}

/// Node 0's REST answer and its database must agree on what import keys and names: a dump whose
/// cluster name, infra-env name or host ids differ from the REST answer is refused (exit 3)
/// and nothing is kept.
#[test]
fn rest_and_dump_that_disagree_are_refused() {
    require_ready!();
    let tmp = tempfile::tempdir().unwrap();
    let (pg, n0) = start_source(tmp.path(), "n0", &[]);
    let db = pg.url("installer");
    let plain = tmp.path().join("plain.sql");
    let st = Command::new("pg_dump")
        .args(["--data-only", "--no-owner", "--no-privileges", "-d", &db, "-f"])
        .arg(&plain)
        .status()
        .unwrap();
    assert!(st.success());
    let dump = std::fs::read_to_string(&plain).unwrap();
    // Replaces `from` by `to` in the rows of `table`'s COPY block only.
    let edit = |table: &str, from: &str, to: &str| -> String {
        let mut out = String::new();
        let mut inside = false;
        let mut hit = false;
        for l in dump.split_inclusive('\n') {
            if l.starts_with(&format!("COPY public.{table} ")) {
                inside = true;
            } else if l == "\\.\n" {
                inside = false;
            } else if inside && l.contains(from) && !hit {
                out.push_str(&l.replace(from, to));
                hit = true;
                continue;
            }
            out.push_str(l);
        }
        assert!(hit, "{from} not in table {table}");
        out
    };
    let cname = sql(&db, "SELECT name FROM clusters");
    let iename = sql(&db, "SELECT name FROM infra_envs ORDER BY id LIMIT 1");
    let host = sql(
        &db,
        "SELECT id FROM hosts WHERE deleted_at IS NULL ORDER BY id LIMIT 1",
    );
    let outdir = tmp.path().join("out");
    std::fs::create_dir(&outdir).unwrap();
    for (table, from, to, needle) in [
        (
            "clusters",
            format!("\t{cname}\t"),
            "\tother-name\t".to_string(),
            "cluster name",
        ),
        (
            "infra_envs",
            format!("\t{iename}\t"),
            "\tother-ie\t".to_string(),
            "infra-env",
        ),
        (
            "hosts",
            host.clone(),
            "eeeeeeee-0000-0000-0000-000000000001".to_string(),
            "hosts in only one",
        ),
    ] {
        let f = tmp.path().join(format!("{table}.sql"));
        std::fs::write(&f, edit(table, &from, &to)).unwrap();
        let o = export(
            &n0,
            &n0.token_file,
            &["--db-dump", f.to_str().unwrap()],
            &outdir.join("b"),
        );
        assert_eq!(o.status.code(), Some(3), "{table}: {}", text(&o));
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(
            err.contains("node 0's REST answer and its database disagree") && err.contains(needle),
            "{table}: {err}"
        );
        assert_eq!(names(&outdir), Vec::<String>::new(), "nothing kept");
    }
    // A host row REST does not list, not bound to the cluster (cluster_id NULL) but in one of
    // its infra-envs: import would restore it, so it is compared too.
    let cid = sql(&db, "SELECT id FROM clusters");
    let mut unbound = String::new();
    let mut inside = false;
    let mut added = false;
    for l in dump.split_inclusive('\n') {
        unbound.push_str(l);
        if l.starts_with("COPY public.hosts ") {
            inside = true;
        } else if inside && !added && l.starts_with(&host) && l.contains(&format!("\t{cid}\t")) {
            unbound.push_str(
                &l.replacen(&host, "eeeeeeee-0000-0000-0000-000000000002", 1)
                    .replacen(&format!("\t{cid}\t"), "\t\\N\t", 1),
            );
            added = true;
        }
    }
    assert!(added, "no hosts row of {host} bound to {cid}");
    let f = tmp.path().join("unbound.sql");
    std::fs::write(&f, &unbound).unwrap();
    let o = export(
        &n0,
        &n0.token_file,
        &["--db-dump", f.to_str().unwrap()],
        &outdir.join("b"),
    );
    assert_eq!(o.status.code(), Some(3), "unbound: {}", text(&o));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("hosts in only one") && err.contains("eeeeeeee-0000-0000-0000-000000000002"),
        "unbound: {err}"
    );
    assert_eq!(names(&outdir), Vec::<String>::new(), "nothing kept");
    // The untouched dump passes.
    let o = export(
        &n0,
        &n0.token_file,
        &["--db-dump", plain.to_str().unwrap()],
        &outdir.join("b"),
    );
    assert!(o.status.success(), "{}", text(&o));
}

/// The simulated node 0's REST answers (the source of tests/migrate.rs and of the tests above,
/// which every clone runs without the real build) are judged by assisted-service's own
/// swagger.yaml, from its source tree: every property of the clusters (with their hosts,
/// networks, VIPs and operators), InfraEnvs, hosts, events, credentials and manifests it serves
/// is declared by the model, with its type and enum. tests/migrate_real.rs holds its database
/// schema to the real one the same way.
#[test]
#[cfg_attr(
    not(real_assisted),
    ignore = "needs assisted-service's swagger.yaml: scripts/real-components.sh assisted, then AGENT_DAY2_REAL_ASSISTED=1 (scripts/test.sh does both)"
)]
fn node0s_answers_follow_swagger() {
    use crate::monitor::{check_model, swagger};
    require_ready!();
    let sw = swagger();
    let tmp = tempfile::tempdir().unwrap();
    let (_pg, n0) = start_source(tmp.path(), "node0", &["--hosts", "4", "--events", "20"]);
    let token = std::fs::read_to_string(&n0.token_file).unwrap();
    let get = |path: &str| -> Value {
        let o = Command::new("curl")
            .args(["-sS", "--fail-with-body", "-H"])
            .arg(format!("Authorization: {}", token.trim()))
            .arg(format!("{}/api/assisted-install/v2{path}", n0.url))
            .output()
            .unwrap();
        assert!(o.status.success(), "GET {path}: {}", text(&o));
        serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("GET {path}: {e}"))
    };
    let each = |v: &Value, def: &str, what: &str| {
        let a = v.as_array().unwrap_or_else(|| panic!("{what}: not a list: {v}"));
        assert!(!a.is_empty(), "{what}: empty");
        for (i, x) in a.iter().enumerate() {
            check_model(&sw, def, x, &format!("{what}[{i}]"));
        }
    };
    let clusters = get("/clusters?with_hosts=true");
    each(&clusters, "cluster", "clusters");
    let cid = clusters[0]["id"].as_str().unwrap().to_string();
    let cluster = get(&format!("/clusters/{cid}"));
    check_model(&sw, "cluster", &cluster, "cluster");
    assert_eq!(cluster["hosts"].as_array().map(Vec::len), Some(4), "{cluster}");
    check_model(
        &sw,
        "credentials",
        &get(&format!("/clusters/{cid}/credentials")),
        "credentials",
    );
    each(
        &get(&format!("/clusters/{cid}/manifests")),
        "manifest",
        "manifests",
    );
    let infra_envs = get(&format!("/infra-envs?cluster_id={cid}"));
    each(&infra_envs, "infra-env", "infra-envs");
    let ie = infra_envs[0]["id"].as_str().unwrap().to_string();
    check_model(&sw, "infra-env", &get(&format!("/infra-envs/{ie}")), "infra-env");
    each(&get(&format!("/infra-envs/{ie}/hosts")), "host", "hosts");
    each(&get(&format!("/events?cluster_id={cid}")), "event", "events");
}
