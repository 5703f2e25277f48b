//! `agent-day2-sim postgres` (a real PostgreSQL server in the foreground for the migrate flow
//! of docs/simulator.md) and `up --assisted-db-url` creating assisted-service's schema in a database
//! that has none (and leaving one that has it alone). Each test runs in its own network
//! namespace (root) and fails with the reason when that or the PostgreSQL server is unavailable.

use agent_day2_sim::harness::{bin, require_netns, TestCluster};
use agent_day2_sim::node0schema;
use agent_day2_sim::postgres::psql;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A network namespace and PostgreSQL, or the test fails saying which is missing.
fn require_ready() {
    require_netns();
    agent_day2_sim::harness::require_postgres();
}

/// Starts `agent-day2-sim postgres --dir DIR ARGS...`; waits for DIR/ready.
fn serve(dir: &Path, args: &[&str]) -> Child {
    let log = std::fs::File::create(dir.with_extension("log")).unwrap();
    let mut child = Command::new(bin("agent-day2-sim").unwrap())
        .arg("postgres")
        .arg("--dir")
        .arg(dir)
        .args(args)
        .stdin(Stdio::null())
        .stdout(log.try_clone().unwrap())
        .stderr(log)
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    while !dir.join("ready").is_file() {
        if let Some(st) = child.try_wait().unwrap() {
            panic!("exited with {st}: {}", log_of(dir));
        }
        assert!(Instant::now() < deadline, "not ready: {}", log_of(dir));
        std::thread::sleep(Duration::from_millis(50));
    }
    child
}

fn log_of(dir: &Path) -> String {
    std::fs::read_to_string(dir.with_extension("log")).unwrap_or_default()
}

fn stop(child: &mut Child, sig: i32) -> std::process::ExitStatus {
    // SAFETY: kill(2) on our own child's pid.
    unsafe { libc::kill(child.id() as i32, sig) };
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if let Some(st) = child.try_wait().unwrap() {
            return st;
        }
        assert!(Instant::now() < deadline, "still running 30 s after signal {sig}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn postgres_serves_until_sigterm_with_url_and_ready() {
    require_ready();
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("pg");
    let mut child = serve(
        &dir,
        &[
            "--listen",
            "192.168.111.9",
            "--port",
            "5439",
            "--db",
            "inst2",
            "--owner",
            "own2",
        ],
    );
    let url = std::fs::read_to_string(dir.join("url")).unwrap();
    assert_eq!(url, "postgres://own2@192.168.111.9:5439/inst2\n");
    assert_eq!(std::fs::read_to_string(dir.join("ready")).unwrap(), url);
    let url = url.trim();
    // The URL's user owns the database and may create tables in it.
    assert_eq!(
        psql(url, "SELECT current_user, pg_get_userbyid(datdba) FROM pg_database WHERE datname = current_database()")
            .unwrap()
            .trim(),
        "own2|own2"
    );
    psql(url, "CREATE TABLE t (x int); INSERT INTO t VALUES (1);").unwrap();
    // Role admin (password admin) exists too, as the simulator's Secret `postgres` names it.
    assert_eq!(
        psql("postgres://admin:admin@192.168.111.9:5439/inst2", "SELECT 1")
            .unwrap()
            .trim(),
        "1"
    );
    // The same port again: refused with the server's reason, the first one unharmed.
    let again = Command::new(bin("agent-day2-sim").unwrap())
        .args(["postgres", "--listen", "192.168.111.9", "--port", "5439", "--dir"])
        .arg(tmp.path().join("pg2"))
        .output()
        .unwrap();
    assert_eq!(again.status.code(), Some(1));
    let err = String::from_utf8_lossy(&again.stderr);
    assert!(
        err.contains("error: starting PostgreSQL") && err.contains("5439"),
        "{err}"
    );
    assert!(!tmp.path().join("pg2/ready").exists());
    // A --dir holding data already is refused before anything starts.
    let reuse = Command::new(bin("agent-day2-sim").unwrap())
        .args(["postgres", "--dir"])
        .arg(&dir)
        .output()
        .unwrap();
    assert_eq!(reuse.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&reuse.stderr).contains("pgdata exists"),
        "{reuse:?}"
    );

    let st = stop(&mut child, libc::SIGTERM);
    assert_eq!(st.code(), Some(0), "{}", log_of(&dir));
    assert!(!dir.join("ready").exists(), "ready removed");
    assert!(log_of(&dir).contains("PostgreSQL stopped"), "{}", log_of(&dir));
    let e = psql(url, "SELECT 1").unwrap_err();
    assert!(format!("{e:#}").contains("refused"), "{e:#}");
}

/// `up --assisted-db-url` on an empty database creates the schema (default version, or
/// `--assisted-schema-version`), owned by the database's owner; on a database that has one it
/// changes nothing (tests make older or newer schemas on purpose).
#[test]
fn up_creates_the_assisted_schema_only_when_absent() {
    require_ready();
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("pg");
    let mut child = serve(&dir, &["--listen", "127.0.0.1"]);
    let url = std::fs::read_to_string(dir.join("url"))
        .unwrap()
        .trim()
        .to_string();
    assert!(
        url.starts_with("postgres://admin@127.0.0.1:") && url.ends_with("/installer"),
        "{url}"
    );
    let super_url = url.replacen("admin@", "postgres@", 1);
    assert!(!node0schema::exists(&url).unwrap());

    let c = TestCluster::start_with_args("", &["--assisted-db-url", &url]).unwrap();
    assert_eq!(
        node0schema::schema_version(&url).unwrap(),
        node0schema::DEFAULT_SCHEMA_VERSION
    );
    let owners = psql(
        &super_url,
        "SELECT DISTINCT tableowner FROM pg_tables WHERE schemaname = 'public'",
    )
    .unwrap();
    assert_eq!(owners.trim(), "admin");
    for (t, n) in node0schema::row_counts(&url).unwrap() {
        let want = if t == "migrations" { n.max(1) } else { 0 };
        assert_eq!(n, want, "table {t}");
    }
    assert!(
        c.log().contains("created the assisted-service schema"),
        "{}",
        c.log()
    );
    drop(c);

    // A schema already there (here: made above, then given another version) is left alone.
    psql(&url, "INSERT INTO clusters (id, name) VALUES ('c1', 'keep'); INSERT INTO migrations VALUES ('20990101000000');")
        .unwrap();
    let c = TestCluster::start_with_args(
        "",
        &[
            "--assisted-db-url",
            &url,
            "--assisted-schema-version",
            "20250101000000",
        ],
    )
    .unwrap();
    assert_eq!(node0schema::schema_version(&url).unwrap(), "20990101000000");
    assert_eq!(psql(&url, "SELECT name FROM clusters").unwrap().trim(), "keep");
    assert!(
        !c.log().contains("created the assisted-service schema"),
        "{}",
        c.log()
    );
    drop(c);

    // Another empty database and an explicit version.
    psql(
        &super_url.replace("/installer", "/postgres"),
        "CREATE DATABASE other OWNER admin",
    )
    .unwrap();
    let other = url.replace("/installer", "/other");
    let c = TestCluster::start_with_args(
        "",
        &[
            "--assisted-db-url",
            &other,
            "--assisted-schema-version",
            "20250101000000",
        ],
    )
    .unwrap();
    assert_eq!(node0schema::schema_version(&other).unwrap(), "20250101000000");
    drop(c);

    // An unreachable database stops `up` with exit 1 and says which.
    let gone = url.replace("/installer", "/nosuchdb");
    let e = TestCluster::start_with_args("", &["--assisted-db-url", &gone])
        .err()
        .expect("refused");
    let e = format!("{e:#}");
    assert!(
        e.contains("exited with exit status: 1") && e.contains("cannot reach admin@127.0.0.1"),
        "{e}"
    );

    // SIGINT (Ctrl-C in docs/simulator.md's shell) stops it too.
    assert_eq!(stop(&mut child, libc::SIGINT).code(), Some(0));
    assert!(psql(&url, "SELECT 1").is_err(), "server stopped");
}
