//! `agent-day2-sim node0` and the test PostgreSQL: a real server started here, the
//! assisted-service schema, the simulator's REST answers checked against the database rows.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::time::{Duration, Instant};

use agent_day2_sim::harness::{require_netns, Node0};
use agent_day2_sim::node0schema;
use agent_day2_sim::postgres::{self, Postgres};
use serde_json::Value;

/// A network namespace and PostgreSQL, or the test fails saying which is missing.
macro_rules! require_ready {
    () => {
        require_netns();
        agent_day2_sim::harness::require_postgres();
    };
}

struct Resp {
    status: u16,
    head: String,
    body: Vec<u8>,
}

impl Resp {
    fn header(&self, name: &str) -> Option<String> {
        self.head.lines().find_map(|l| {
            let (k, v) = l.split_once(':')?;
            k.trim().eq_ignore_ascii_case(name).then(|| v.trim().to_string())
        })
    }
    fn json(&self) -> Value {
        serde_json::from_slice(&self.body)
            .unwrap_or_else(|e| panic!("not JSON ({e}): {}", String::from_utf8_lossy(&self.body)))
    }
}

/// GET `base` + `path` over HTTP/1.1 (Connection: close) with an optional Authorization value.
fn get(base: &str, path: &str, auth: Option<&str>) -> std::io::Result<Resp> {
    let hostport = base.trim_start_matches("http://");
    let mut s = TcpStream::connect(hostport)?;
    s.set_read_timeout(Some(Duration::from_secs(20)))?;
    let hdr = auth
        .map(|v| format!("Authorization: {v}\r\n"))
        .unwrap_or_default();
    write!(
        s,
        "GET /api/assisted-install/v2{path} HTTP/1.1\r\nHost: {hostport}\r\n{hdr}Connection: close\r\n\r\n"
    )?;
    let mut raw = Vec::new();
    s.read_to_end(&mut raw)?;
    let split = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .ok_or_else(|| std::io::Error::other("no HTTP response"))?;
    let head = String::from_utf8_lossy(&raw[..split]).to_string();
    let status: u16 = head.split_whitespace().nth(1).unwrap_or("0").parse().unwrap_or(0);
    assert!(
        !head.to_ascii_lowercase().contains("transfer-encoding: chunked"),
        "unexpected chunked answer"
    );
    Ok(Resp {
        status,
        head,
        body: raw[split + 4..].to_vec(),
    })
}

fn sql(url: &str, q: &str) -> String {
    postgres::psql(url, q).unwrap().trim().to_string()
}

fn lines(url: &str, q: &str) -> Vec<String> {
    postgres::psql(url, q)
        .unwrap()
        .lines()
        .filter(|l| !l.is_empty())
        .map(String::from)
        .collect()
}

fn source(tmp: &Path) -> Postgres {
    let pg = Postgres::start(&tmp.join("src-db"), "127.0.0.1".parse().unwrap()).unwrap();
    pg.create_db("installer", "admin").unwrap();
    pg
}

#[test]
fn postgres_runs_two_servers_with_the_schema_and_stops_on_drop() {
    require_ready!();
    let tmp = tempfile::tempdir().unwrap();
    let t0 = Instant::now();
    let a = Postgres::start(&tmp.path().join("a"), "127.0.0.1".parse().unwrap()).unwrap();
    eprintln!("first server up in {:?}", t0.elapsed());
    let b = Postgres::start(&tmp.path().join("b"), "192.168.111.7".parse().unwrap()).unwrap();
    assert_ne!((a.host(), a.port()), (b.host(), b.port()));
    assert_eq!(
        b.url("installer"),
        format!("postgres://postgres@192.168.111.7:{}/installer", b.port())
    );
    a.create_db("installer", "admin").unwrap();
    b.create_db("installer", "admin").unwrap();
    // Creating the same database again is an error naming it.
    let e = a.create_db("installer", "admin").unwrap_err().to_string();
    assert!(e.contains("installer"), "{e}");

    node0schema::create(&a.url("installer"), "20240617140000").unwrap();
    node0schema::create(&b.url("installer"), "20250101000000").unwrap();
    assert_eq!(
        node0schema::schema_version(&a.url("installer")).unwrap(),
        "20240617140000"
    );
    assert_eq!(
        node0schema::schema_version(&b.url("installer")).unwrap(),
        "20250101000000"
    );
    // The real ids of that date or earlier (typos included), plus the version itself when it
    // is no real migration's date; none written later.
    let ids = node0schema::migration_ids(&a.url("installer")).unwrap();
    assert_eq!(ids.len(), 19, "18 real ones and the version: {ids:?}");
    assert!(ids.contains(&"2021115162400".to_string()), "{ids:?}");
    assert!(ids.contains(&"21211125182200".to_string()), "{ids:?}");
    assert!(ids.contains(&"20240617140000".to_string()), "{ids:?}");
    assert!(!ids.contains(&"20241122160000".to_string()), "{ids:?}");
    assert!(ids.iter().all(|i| (
        node0schema::migration_date(i).len(),
        node0schema::migration_date(i)
    ) <= (14, "20240617140000")));
    // max(id) is the typo on both, whatever the version: it says nothing.
    for db in [a.url("installer"), b.url("installer")] {
        assert_eq!(sql(&db, "SELECT max(id) FROM migrations"), "21211125182200");
    }
    // The default is assisted-service 063b2579's 26 ids exactly.
    let c = a.create_db("current", "admin").map(|_| a.url("current")).unwrap();
    node0schema::create(&c, node0schema::DEFAULT_SCHEMA_VERSION).unwrap();
    let mut real: Vec<String> = node0schema::REAL_MIGRATIONS
        .iter()
        .map(|(i, _)| i.to_string())
        .collect();
    real.sort();
    assert_eq!(real.len(), 26);
    assert_eq!(node0schema::migration_ids(&c).unwrap(), real);
    assert_eq!(node0schema::schema_version(&c).unwrap(), "20260413120000");
    assert!(node0schema::create(&a.url("installer"), "2024-06").is_err());
    assert!(
        node0schema::create(&a.url("installer"), "20240617140000").is_err(),
        "tables exist"
    );

    // Tables belong to the database owner; the owner can write through its own URL.
    let owners = lines(
        &a.url("installer"),
        "SELECT DISTINCT tableowner FROM pg_tables WHERE schemaname = 'public'",
    );
    assert_eq!(owners, vec!["admin".to_string()]);
    let admin = a.url_as("admin", "installer");
    sql(
        &admin,
        "INSERT INTO events (cluster_id, message) VALUES ('c', 'm')",
    );
    assert_eq!(
        sql(&admin, "SELECT id FROM events"),
        "1",
        "events.id is a bigserial"
    );
    let counts = node0schema::row_counts(&a.url("installer")).unwrap();
    assert_eq!(counts.len(), node0schema::TABLES.len() + 1);
    assert!(counts.contains(&("events".to_string(), 1)));
    assert!(counts.contains(&("clusters".to_string(), 0)));
    // Columns the migrate contract names.
    for (t, c) in [
        ("clusters", "pull_secret"),
        ("clusters", "kube_key_name"),
        ("clusters", "kube_key_namespace"),
        ("clusters", "openshift_cluster_id"),
        ("infra_envs", "kube_key_namespace"),
        ("infra_envs", "static_network_config"),
        ("hosts", "kube_key_namespace"),
        ("hosts", "requested_hostname"),
        ("hosts", "inventory"),
    ] {
        let n = sql(
            &a.url("installer"),
            &format!("SELECT count(*) FROM information_schema.columns WHERE table_name = '{t}' AND column_name = '{c}'"),
        );
        assert_eq!(n, "1", "{t}.{c}");
    }

    let port = a.port();
    drop(a);
    assert!(
        TcpStream::connect(("127.0.0.1", port)).is_err(),
        "server still listening after drop"
    );
    // The other one is still up.
    assert_eq!(sql(&b.url("installer"), "SELECT 1"), "1");
}

#[test]
fn postgres_start_error_names_the_problem() {
    require_ready!();
    let tmp = tempfile::tempdir().unwrap();
    // An address that is not local: the server cannot bind it, the error carries the log.
    let e = match Postgres::start(tmp.path(), "203.0.113.9".parse().unwrap()) {
        Ok(_) => panic!("started on a foreign address"),
        Err(e) => format!("{e:#}"),
    };
    assert!(e.contains("203.0.113.9"), "{e}");
}

#[test]
fn node0_rest_answers_match_the_database_rows() {
    require_ready!();
    let tmp = tempfile::tempdir().unwrap();
    let pg = source(tmp.path());
    let db = pg.url("installer");
    let n0 = Node0::start(
        &tmp.path().join("node0"),
        "192.168.111.80:0",
        &db,
        &[
            "--hosts",
            "4",
            "--events",
            "57",
            "--schema-version",
            "20240617140000",
        ],
    )
    .unwrap();
    assert!(n0.url.starts_with("http://192.168.111.80:"), "{}", n0.url);
    let tok = n0.token();
    assert!(!tok.is_empty());
    use std::os::unix::fs::PermissionsExt;
    for f in [
        n0.token_file.clone(),
        n0.dir.join(agent_day2_sim::node0::KEY_FILE),
    ] {
        let mode = std::fs::metadata(&f).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600, "{}", f.display());
    }
    let auth = Some(tok.as_str());

    // userAuth as assisted-service's agent-installer-local auth judges it: the bare token.
    assert_eq!(get(&n0.url, "/clusters", auth).unwrap().status, 200);
    let claims: Value = {
        use base64::Engine;
        let p = tok.split('.').nth(1).unwrap();
        serde_json::from_slice(
            &base64::engine::general_purpose::URL_SAFE_NO_PAD
                .decode(p)
                .unwrap(),
        )
        .unwrap()
    };
    assert_eq!(
        claims,
        serde_json::json!({"auth_scheme": "userAuth"}),
        "install-workflow token: no exp"
    );
    // No header: go-openapi's 401.
    let r = get(&n0.url, "/clusters", None).unwrap();
    assert_eq!(r.status, 401);
    assert_eq!(r.json()["code"], 401);
    assert_eq!(r.json()["message"], "unauthenticated for invalid credentials");
    assert_eq!(get(&n0.url, "/events?cluster_id=x", None).unwrap().status, 401);
    // The right token behind "Bearer " (any case): jwt v4's refusal, 401.
    for prefix in ["Bearer ", "bearer ", "BEARER "] {
        let r = get(&n0.url, "/clusters", Some(&format!("{prefix}{tok}"))).unwrap();
        assert_eq!(r.status, 401, "{prefix}");
        let m = r.json()["message"].as_str().unwrap().to_string();
        assert!(m.contains("tokenstring should not contain 'bearer '"), "{m}");
    }
    let mint = |claims: Value| agent_day2_sim::node0::mint_token(&n0.dir, &claims).unwrap();
    let status_and_text = |t: &str| {
        let r = get(&n0.url, "/clusters", Some(t)).unwrap();
        let j = r.json();
        let text = j
            .get("message")
            .or(j.get("reason"))
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        (r.status, text)
    };
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64;
    // Not a JWT, or signed by another key: 401.
    assert_eq!(status_and_text("nope").0, 401);
    let other = agent_day2_sim::boot::jwt::sign(
        &serde_json::json!({"auth_scheme": "userAuth"}),
        &rcgen::KeyPair::generate().unwrap().serialize_der(),
    )
    .unwrap();
    let (st, m) = status_and_text(&other);
    assert_eq!(st, 401, "{m}");
    assert!(m.starts_with("Failed to parse token: "), "{m}");
    // Expired (add-nodes tokens carry exp): 401; one still valid: 200.
    let (st, m) = status_and_text(&mint(
        serde_json::json!({"auth_scheme": "userAuth", "exp": now - 5}),
    ));
    assert_eq!((st, m.trim()), (401, "Failed to parse token: Token is expired"));
    let (st, m) = status_and_text(&mint(
        serde_json::json!({"auth_scheme": "userAuth", "exp": now + 600}),
    ));
    assert_eq!(st, 200, "{m}");
    // The authorizer: another persona's scheme → 403; no auth_scheme (e.g. a `sub` claim) →
    // 500; an empty one → 400.
    let (st, m) = status_and_text(&mint(serde_json::json!({"auth_scheme": "agentAuth"})));
    assert_eq!(
        (st, m.as_str()),
        (403, "authClaim agentAuth is unauthorized to access")
    );
    let (st, m) = status_and_text(&mint(serde_json::json!({"sub": "userAuth"})));
    assert_eq!((st, m.as_str()), (500, "malformed auth_scheme claim"));
    let (st, m) = status_and_text(&mint(serde_json::json!({"auth_scheme": ""})));
    assert_eq!(st, 400, "{m}");

    // The database.
    assert_eq!(node0schema::schema_version(&db).unwrap(), "20240617140000");
    let cid = sql(&db, "SELECT id FROM clusters");
    let ieid = sql(&db, "SELECT id FROM infra_envs");
    let host_ids = lines(&db, "SELECT id FROM hosts ORDER BY id");
    assert_eq!(host_ids.len(), 4);
    assert_eq!(sql(&db, "SELECT count(*) FROM events"), "57");
    assert_eq!(
        sql(
            &db,
            "SELECT kube_key_name || '|' || kube_key_namespace FROM clusters"
        ),
        "|",
        "ABI leaves kube_key_* empty"
    );
    let pull: Value = serde_json::from_str(&sql(&db, "SELECT pull_secret FROM clusters")).unwrap();
    assert!(pull["auths"].as_object().is_some_and(|a| !a.is_empty()));
    assert_eq!(
        lines(&db, "SELECT role FROM hosts ORDER BY requested_hostname"),
        vec!["master", "master", "master", "worker"]
    );

    // Clusters with hosts.
    let r = get(&n0.url, "/clusters?with_hosts=true", auth).unwrap();
    assert_eq!(r.status, 200);
    let cl = r.json();
    let cl = cl.as_array().unwrap();
    assert_eq!(cl.len(), 1);
    let c = &cl[0];
    assert_eq!(c["id"], cid.as_str());
    assert_eq!(c["name"], "agent-cluster");
    assert_eq!(c["status"], "installed");
    assert_eq!(
        c["base_dns_domain"],
        sql(&db, "SELECT base_dns_domain FROM clusters")
    );
    assert_eq!(
        c["openshift_cluster_id"],
        sql(&db, "SELECT openshift_cluster_id FROM clusters")
    );
    assert_eq!(c["platform"]["type"], "baremetal");
    assert_eq!(c["api_vips"][0]["ip"], sql(&db, "SELECT ip FROM api_vips"));
    assert_eq!(c["cluster_networks"][0]["host_prefix"], 23);
    let ops: Vec<&str> = c["monitored_operators"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        ops.len().to_string(),
        sql(&db, "SELECT count(*) FROM monitored_operators")
    );
    assert!(ops.contains(&"console"), "{ops:?}");
    assert!(c["monitored_operators"][0]["bundles"].is_array());
    assert!(c.get("pull_secret").is_none(), "pull secret not served");
    assert!(c.get("kube_key_name").is_none());
    let mut served: Vec<String> = c["hosts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| h["id"].as_str().unwrap().to_string())
        .collect();
    served.sort();
    assert_eq!(served, host_ids);
    let h0 = &c["hosts"][0];
    assert_eq!(h0["progress"]["current_stage"], "Done");
    let inv: Value = serde_json::from_str(h0["inventory"].as_str().unwrap()).unwrap();
    assert_eq!(inv["hostname"], h0["requested_hostname"]);
    // Without with_hosts: no hosts.
    let r = get(&n0.url, "/clusters", auth).unwrap().json();
    assert_eq!(r[0]["hosts"].as_array().unwrap().len(), 0);
    let r = get(&n0.url, &format!("/clusters/{cid}"), auth).unwrap().json();
    assert_eq!(r["hosts"].as_array().unwrap().len(), 4);
    assert_eq!(get(&n0.url, "/clusters/nope", auth).unwrap().status, 404);

    // Infra-envs and their hosts.
    let ie = get(&n0.url, "/infra-envs", auth).unwrap().json();
    assert_eq!(ie.as_array().unwrap().len(), 1);
    assert_eq!(ie[0]["id"], ieid.as_str());
    assert_eq!(ie[0]["name"], "agent-cluster");
    assert_eq!(ie[0]["cluster_id"], cid.as_str());
    let snc: Value = serde_json::from_str(ie[0]["static_network_config"].as_str().unwrap()).unwrap();
    assert_eq!(snc.as_array().unwrap().len(), 4);
    assert!(snc[0]["network_yaml"].as_str().unwrap().contains("interfaces:"));
    assert_eq!(snc[0]["mac_interface_map"][0]["logical_nic_name"], "eth0");
    let hs = get(&n0.url, &format!("/infra-envs/{ieid}/hosts"), auth)
        .unwrap()
        .json();
    assert_eq!(hs.as_array().unwrap().len(), 4);

    // Events: paged, total in Event-Count, same rows as the table.
    let r = get(
        &n0.url,
        &format!("/events?cluster_id={cid}&limit=10&offset=50&order=ascending"),
        auth,
    )
    .unwrap();
    assert_eq!(r.status, 200);
    assert_eq!(r.header("Event-Count").as_deref(), Some("57"));
    assert_eq!(r.json().as_array().unwrap().len(), 7);
    let mut all = Vec::new();
    for off in (0..57).step_by(20) {
        let r = get(
            &n0.url,
            &format!("/events?cluster_id={cid}&limit=20&offset={off}&order=ascending"),
            auth,
        )
        .unwrap();
        all.extend(r.json().as_array().unwrap().iter().cloned());
    }
    assert_eq!(all.len(), 57);
    let msgs: Vec<String> = all
        .iter()
        .map(|e| e["message"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(
        msgs,
        lines(&db, "SELECT message FROM events ORDER BY event_time, id")
    );
    let desc = get(
        &n0.url,
        &format!("/events?cluster_id={cid}&limit=1&order=descending"),
        auth,
    )
    .unwrap()
    .json();
    assert_eq!(desc[0]["message"], msgs[56].as_str());
    let ie_ev = get(&n0.url, &format!("/events?infra_env_id={ieid}"), auth).unwrap();
    assert_eq!(
        ie_ev.header("Event-Count").unwrap(),
        sql(
            &db,
            &format!("SELECT count(*) FROM events WHERE infra_env_id = '{ieid}'")
        )
    );
    let h_ev = get(
        &n0.url,
        &format!("/events?cluster_id={cid}&host_id={}", host_ids[0]),
        auth,
    )
    .unwrap();
    let n_h = sql(
        &db,
        &format!("SELECT count(*) FROM events WHERE host_id = '{}'", host_ids[0]),
    );
    assert_ne!(n_h, "0");
    assert_eq!(h_ev.header("Event-Count").unwrap(), n_h);
    assert_eq!(h_ev.json().as_array().unwrap().len().to_string(), n_h);

    // Logs: a tar of one tar.gz per host plus the controller's; deterministic.
    let r = get(&n0.url, &format!("/clusters/{cid}/logs?logs_type=all"), auth).unwrap();
    assert_eq!(r.status, 200);
    let mut names = Vec::new();
    let mut ar = tar::Archive::new(&r.body[..]);
    for e in ar.entries().unwrap() {
        let mut e = e.unwrap();
        let name = e.path().unwrap().to_string_lossy().to_string();
        let mut gz = Vec::new();
        e.read_to_end(&mut gz).unwrap();
        let mut inner = tar::Archive::new(flate2::read::GzDecoder::new(&gz[..]));
        assert!(inner.entries().unwrap().count() >= 1, "{name}");
        names.push(name);
    }
    assert_eq!(names.len(), 5, "{names:?}");
    assert!(names.iter().any(|n| n.contains("controller")), "{names:?}");
    for h in &host_ids {
        assert!(names.iter().any(|n| n.contains(h.as_str())), "{h} in {names:?}");
    }
    let again = get(&n0.url, &format!("/clusters/{cid}/logs?logs_type=all"), auth).unwrap();
    assert_eq!(again.body, r.body, "logs are deterministic");

    // Credentials, files, manifests.
    let kc = get(
        &n0.url,
        &format!("/clusters/{cid}/downloads/credentials?file_name=kubeconfig"),
        auth,
    )
    .unwrap();
    assert_eq!(kc.status, 200);
    assert!(String::from_utf8_lossy(&kc.body).contains("server: https://api.agent-cluster.example.com:6443"));
    let kn = get(
        &n0.url,
        &format!("/clusters/{cid}/downloads/credentials?file_name=kubeconfig-noingress"),
        auth,
    )
    .unwrap();
    assert_eq!(kn.status, 200);
    let pw = get(
        &n0.url,
        &format!("/clusters/{cid}/downloads/credentials?file_name=kubeadmin-password"),
        auth,
    )
    .unwrap();
    let creds = get(&n0.url, &format!("/clusters/{cid}/credentials"), auth)
        .unwrap()
        .json();
    assert_eq!(creds["username"], "kubeadmin");
    assert_eq!(creds["password"], String::from_utf8_lossy(&pw.body).as_ref());
    assert!(creds["console_url"]
        .as_str()
        .unwrap()
        .contains("apps.agent-cluster.example.com"));
    let ic = get(
        &n0.url,
        &format!("/clusters/{cid}/downloads/files?file_name=install-config.yaml"),
        auth,
    )
    .unwrap();
    assert!(String::from_utf8_lossy(&ic.body).contains("baseDomain: example.com"));
    let md = get(
        &n0.url,
        &format!("/clusters/{cid}/downloads/files?file_name=metadata.json"),
        auth,
    )
    .unwrap();
    assert_eq!(md.json()["clusterID"], c["openshift_cluster_id"]);
    let mf = get(&n0.url, &format!("/clusters/{cid}/manifests"), auth)
        .unwrap()
        .json();
    let mf = mf.as_array().unwrap();
    assert!(mf.len() >= 2);
    for m in mf {
        let p = format!(
            "/clusters/{cid}/manifests/files?folder={}&file_name={}",
            m["folder"].as_str().unwrap(),
            m["file_name"].as_str().unwrap()
        );
        let f = get(&n0.url, &p, auth).unwrap();
        assert_eq!(f.status, 200, "{p}");
        assert!(String::from_utf8_lossy(&f.body).contains("kind: MachineConfig"));
    }
    assert_eq!(
        get(
            &n0.url,
            &format!("/clusters/{cid}/manifests/files?folder=x&file_name=y"),
            auth
        )
        .unwrap()
        .status,
        404
    );
}

#[test]
fn die_after_requests_closes_the_port() {
    require_ready!();
    let tmp = tempfile::tempdir().unwrap();
    let pg = source(tmp.path());
    let mut n0 = Node0::start(
        &tmp.path().join("node0"),
        "192.168.111.81:0",
        &pg.url("installer"),
        &["--die-after-requests", "3"],
    )
    .unwrap();
    let tok = n0.token();
    for _ in 0..3 {
        assert_eq!(get(&n0.url, "/clusters", Some(&tok)).unwrap().status, 200);
    }
    let st = n0
        .wait_exit(Duration::from_secs(10))
        .expect("node0 still running after 3 requests");
    assert!(st.success(), "{st}");
    let hostport = n0.url.trim_start_matches("http://").to_string();
    assert!(TcpStream::connect(&hostport).is_err(), "port still open");
    assert!(n0.log().contains("exiting after 3 requests"), "{}", n0.log());
}

#[test]
fn benchmark_sized_source_fills_fast() {
    require_ready!();
    let tmp = tempfile::tempdir().unwrap();
    let pg = source(tmp.path());
    let db = pg.url("installer");
    let t0 = Instant::now();
    let n0 = Node0::start(
        &tmp.path().join("node0"),
        "192.168.111.82:0",
        &db,
        &["--hosts", "50", "--events", "10000"],
    )
    .unwrap();
    let took = t0.elapsed();
    eprintln!("node0 with 50 hosts and 10000 events ready in {took:?}");
    assert!(took < Duration::from_secs(60), "{took:?}");
    assert_eq!(sql(&db, "SELECT count(*) FROM hosts"), "50");
    assert_eq!(sql(&db, "SELECT count(*) FROM events"), "10000");
    assert_eq!(
        sql(&db, "SELECT count(*) FROM hosts WHERE role = 'master'"),
        "3",
        "three masters, workers after"
    );
    let tok = n0.token();
    let cid = sql(&db, "SELECT id FROM clusters");
    let r = get(
        &n0.url,
        &format!("/events?cluster_id={cid}&limit=1000&offset=9500"),
        Some(&tok),
    )
    .unwrap();
    assert_eq!(r.header("Event-Count").as_deref(), Some("10000"));
    assert_eq!(r.json().as_array().unwrap().len(), 500);
    let ie = sql(&db, "SELECT id FROM infra_envs");
    let hs = get(&n0.url, &format!("/infra-envs/{ie}/hosts"), Some(&tok))
        .unwrap()
        .json();
    assert_eq!(hs.as_array().unwrap().len(), 50);
}

#[test]
fn node0_serves_an_already_filled_database_as_is_and_fails_clearly_without_one() {
    require_ready!();
    let tmp = tempfile::tempdir().unwrap();
    let pg = source(tmp.path());
    let db = pg.url("installer");
    let first = Node0::start(
        &tmp.path().join("a"),
        "192.168.111.83:0",
        &db,
        &["--hosts", "2", "--events", "9"],
    )
    .unwrap();
    drop(first);
    // A second run on the same database: not seeded again, other counts ignored.
    let n0 = Node0::start(
        &tmp.path().join("b"),
        "192.168.111.83:0",
        &db,
        &["--hosts", "5", "--events", "1"],
    )
    .unwrap();
    assert_eq!(sql(&db, "SELECT count(*) FROM hosts"), "2");
    assert_eq!(sql(&db, "SELECT count(*) FROM events"), "9");
    let tok = n0.token();
    let c = get(&n0.url, "/clusters?with_hosts=true", Some(&tok))
        .unwrap()
        .json();
    assert_eq!(c[0]["hosts"].as_array().unwrap().len(), 2);

    // No server behind --db-url: exit status 1 naming psql's error, no ready file.
    let dir = tmp.path().join("c");
    let port = pg.port();
    drop(pg);
    let out = std::process::Command::new(agent_day2_sim::harness::bin("agent-day2-sim").unwrap())
        .args(["node0", "--listen", "192.168.111.84:0", "--db-url"])
        .arg(format!("postgres://postgres@127.0.0.1:{port}/installer"))
        .arg("--dir")
        .arg(&dir)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("error:") && err.contains("psql"), "{err}");
    assert!(!dir.join("ready").exists());
}
