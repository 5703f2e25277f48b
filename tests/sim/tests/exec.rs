//! Pod exec against the simulator, with the real `kubectl exec` (WebSocket, `v5.channel.k8s.io`)
//! and kube-rs `Api::<Pod>::exec`: stdin streamed to the process and its EOF delivered, output
//! back, exit codes in the status channel, `pods/exec` authorization, PersistentVolumeClaims
//! bound and written through `tar`, and `psql` in the seeded assisted-service pod against a real
//! PostgreSQL server. Each test runs its own simulator in its own network namespace (root, or
//! under `agent-day2-sim netns`) and fails with the reason otherwise.

use agent_day2_sim::harness::TestCluster;
use agent_day2_sim::postgres::Postgres;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, AttachParams, AttachedProcess};
use kube::config::{KubeConfigOptions, Kubeconfig};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Output, Stdio};
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const NS: &str = "mig";
const ASSISTED_NS: &str = "multicluster-engine";
const ASSISTED_POD: &str = "assisted-service-5f8c9d7b6-x2x7k";

/// A PVC and a pod mounting it at /migration (the archive pod `migrate import` makes).
const COPY_POD: &str = r#"
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: data, namespace: mig}
spec:
  accessModes: [ReadWriteOnce]
  resources: {requests: {storage: 1Gi}}
---
apiVersion: v1
kind: Pod
metadata: {name: copy, namespace: mig}
spec:
  restartPolicy: Never
  containers:
  - name: copy
    image: quay.io/stolostron/assisted-service:latest
    command: [sleep, infinity]
    volumeMounts: [{name: data, mountPath: /migration}]
  volumes:
  - name: data
    persistentVolumeClaim: {claimName: data}
"#;

fn have_kubectl() -> bool {
    std::process::Command::new("kubectl")
        .args(["version", "--client"])
        .output()
        .is_ok_and(|o| o.status.success())
}

/// Starts a simulator with `extra` `up` arguments (panics where kubectl or a namespace is missing).
fn cluster(extra: &[&str]) -> Option<TestCluster> {
    assert!(have_kubectl(), "needs kubectl: apt-get install kubernetes-client (scripts/test.sh installs it through scripts/setup.sh)");
    agent_day2_sim::harness::require_netns();
    Some(TestCluster::start_with_args("", extra).expect("simulator starts"))
}

fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// How long one exec may take before the test fails (instead of hanging when, e.g., stdin EOF
/// never reaches the process).
const EXEC_TIMEOUT: Duration = Duration::from_secs(60);

/// `kubectl ARGS` with `input` on stdin (binary); killed and failed after [`EXEC_TIMEOUT`].
fn kubectl_in(c: &TestCluster, args: &[&str], input: &[u8]) -> Output {
    let mut child = c
        .kubectl_cmd(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("kubectl runs");
    let mut w = child.stdin.take().unwrap();
    let input = input.to_vec();
    let feeder = std::thread::spawn(move || {
        let _ = w.write_all(&input);
    });
    let read = |mut r: Box<dyn Read + Send>| {
        std::thread::spawn(move || {
            let mut v = Vec::new();
            let _ = r.read_to_end(&mut v);
            v
        })
    };
    let out = read(Box::new(child.stdout.take().unwrap()));
    let err = read(Box::new(child.stderr.take().unwrap()));
    let deadline = Instant::now() + EXEC_TIMEOUT;
    let status = loop {
        if let Some(st) = child.try_wait().unwrap() {
            break st;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!(
                "kubectl {args:?} did not finish in {EXEC_TIMEOUT:?}\nsimulator log:\n{}",
                c.log()
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    feeder.join().unwrap();
    Output {
        status,
        stdout: out.join().unwrap(),
        stderr: err.join().unwrap(),
    }
}

#[track_caller]
fn ok(c: &TestCluster, args: &[&str], input: &[u8]) -> String {
    let o = kubectl_in(c, args, input);
    assert!(
        o.status.success(),
        "kubectl {args:?} failed ({}): {}\nsimulator log:\n{}",
        o.status,
        text(&o),
        c.log()
    );
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// A tar archive of `files` (path, contents), directories implied.
fn tar_of(files: &[(&str, &[u8])]) -> Vec<u8> {
    let mut b = tar::Builder::new(Vec::new());
    for (p, data) in files {
        let mut h = tar::Header::new_gnu();
        h.set_size(data.len() as u64);
        h.set_mode(0o644);
        h.set_mtime(1_700_000_000);
        h.set_cksum();
        b.append_data(&mut h, p, *data).unwrap();
    }
    b.into_inner().unwrap()
}

fn sha256_hex(b: &[u8]) -> String {
    use sha2::Digest;
    hex::encode(sha2::Sha256::digest(b))
}

fn volume(c: &TestCluster, ns: &str, claim: &str) -> PathBuf {
    c.dir.join("volumes").join(ns).join(claim)
}

/// Creates the namespace and the copy pod, and waits until the pod is Ready: the scheduler,
/// provisioner and kubelet stand-ins act on watch events, so an exec straight after `apply`
/// can meet a pod with no node yet ("pod copy does not have a host assigned", seen in CI).
fn make_copy_pod(c: &TestCluster) {
    ok(c, &["create", "namespace", NS], b"");
    ok(c, &["apply", "-f", "-"], COPY_POD.as_bytes());
    ok(
        c,
        &[
            "wait",
            "-n",
            NS,
            "--for=condition=Ready",
            "pod/copy",
            "--timeout=60s",
        ],
        b"",
    );
}

#[test]
fn kubectl_exec_tar_exit_codes_and_authz() {
    let Some(c) = cluster(&[]) else { return };
    make_copy_pod(&c);
    // Once the pod is Ready: the claim is bound, the pod Running and ready on a master.
    let phase = ok(
        &c,
        &[
            "get",
            "pvc",
            "-n",
            NS,
            "data",
            "-o",
            "jsonpath={.status.phase} {.status.capacity.storage}",
        ],
        b"",
    );
    assert_eq!(phase, "Bound 1Gi");
    let listed = ok(&c, &["get", "pvc", "-n", NS], b"");
    assert!(listed.lines().any(|l| l.starts_with("data ")), "{listed}");
    let pod = ok(
        &c,
        &[
            "get",
            "pod",
            "-n",
            NS,
            "copy",
            "-o",
            "jsonpath={.status.phase} {.spec.nodeName} {.status.containerStatuses[0].ready}",
        ],
        b"",
    );
    assert_eq!(pod, "Running master-0 true");
    ok(
        &c,
        &[
            "wait",
            "-n",
            NS,
            "--for=condition=Ready",
            "pod/copy",
            "--timeout=10s",
        ],
        b"",
    );

    // tar -x from stdin: EOF must reach tar, or this never returns.
    let big: Vec<u8> = (0..3_000_000u32).map(|i| (i % 251) as u8).collect();
    let archive = tar_of(&[("a.txt", b"hello\n"), ("d/b.bin", &big)]);
    ok(
        &c,
        &["exec", "-n", NS, "copy", "--", "mkdir", "-p", "/migration/abc"],
        b"",
    );
    let out = ok(
        &c,
        &[
            "exec",
            "-i",
            "-n",
            NS,
            "copy",
            "--",
            "tar",
            "-x",
            "-f",
            "-",
            "-C",
            "/migration/abc",
        ],
        &archive,
    );
    assert_eq!(out, "");
    let vol = volume(&c, NS, "data");
    assert_eq!(std::fs::read(vol.join("abc/a.txt")).unwrap(), b"hello\n");
    assert_eq!(std::fs::read(vol.join("abc/d/b.bin")).unwrap(), big);

    // Output back, with container paths; a tar stream out of the volume.
    let sums = ok(
        &c,
        &[
            "exec",
            "-n",
            NS,
            "copy",
            "--",
            "sha256sum",
            "/migration/abc/d/b.bin",
        ],
        b"",
    );
    assert_eq!(sums, format!("{}  /migration/abc/d/b.bin\n", sha256_hex(&big)));
    let o = kubectl_in(
        &c,
        &[
            "exec",
            "-n",
            NS,
            "copy",
            "--",
            "tar",
            "-c",
            "-f",
            "-",
            "-C",
            "/migration/abc",
            ".",
        ],
        b"",
    );
    assert!(o.status.success(), "{}", text(&o));
    let mut names: Vec<String> = tar::Archive::new(&o.stdout[..])
        .entries()
        .unwrap()
        .map(|e| e.unwrap().path().unwrap().display().to_string())
        .collect();
    names.sort();
    assert_eq!(names, ["./", "./a.txt", "./d/", "./d/b.bin"]);

    // kubectl cp both ways (tar through exec; members named by their container paths).
    let local = c.dir.join("cp");
    std::fs::create_dir_all(&local).unwrap();
    let got = local.join("a.txt");
    ok(
        &c,
        &[
            "cp",
            &format!("{NS}/copy:/migration/abc/a.txt"),
            got.to_str().unwrap(),
        ],
        b"",
    );
    assert_eq!(std::fs::read(&got).unwrap(), b"hello\n");
    let up = local.join("up.txt");
    std::fs::write(&up, b"uploaded\n").unwrap();
    ok(
        &c,
        &[
            "cp",
            up.to_str().unwrap(),
            &format!("{NS}/copy:/migration/abc/up.txt"),
        ],
        b"",
    );
    assert_eq!(std::fs::read(vol.join("abc/up.txt")).unwrap(), b"uploaded\n");

    // Non-zero exits: kubectl exits with the code; stderr comes through with container paths.
    let o = kubectl_in(
        &c,
        &["exec", "-n", NS, "copy", "--", "ls", "/migration/nope"],
        b"",
    );
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("/migration/nope"), "{err}");
    assert!(
        !err.contains(&vol.display().to_string()),
        "host path leaked: {err}"
    );
    assert!(err.contains("command terminated with exit code 2"), "{err}");
    // Like the real tar, -C needs an existing directory.
    let o = kubectl_in(
        &c,
        &[
            "exec",
            "-i",
            "-n",
            NS,
            "copy",
            "--",
            "tar",
            "-x",
            "-f",
            "-",
            "-C",
            "/migration/missing",
        ],
        &archive,
    );
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    // Commands the simulated container does not have, paths outside the volumes.
    let o = kubectl_in(&c, &["exec", "-n", NS, "copy", "--", "sh", "-c", "id"], b"");
    assert_eq!(o.status.code(), Some(126), "{}", text(&o));
    assert!(
        text(&o).contains("not available in the simulated container"),
        "{}",
        text(&o)
    );
    let o = kubectl_in(&c, &["exec", "-n", NS, "copy", "--", "cat", "/etc/passwd"], b"");
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    let o = kubectl_in(
        &c,
        &[
            "exec",
            "-n",
            NS,
            "copy",
            "--",
            "cat",
            "/migration/../../etc/passwd",
        ],
        b"",
    );
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(!String::from_utf8_lossy(&o.stdout).contains("root:"));

    // The viewer may get pods but not create pods/exec.
    let o = kubectl_in(
        &c,
        &[
            "--context",
            "viewer",
            "exec",
            "-n",
            NS,
            "copy",
            "--",
            "ls",
            "/migration",
        ],
        b"",
    );
    assert!(!o.status.success());
    assert!(
        text(&o).contains(r#"cannot create resource "pods/exec" in API group "" in the namespace "mig""#),
        "{}",
        text(&o)
    );

    // The pod goes away; the claim and its data stay.
    ok(&c, &["delete", "pod", "-n", NS, "copy", "--timeout=20s"], b"");
    let o = kubectl_in(&c, &["get", "pod", "-n", NS, "copy"], b"");
    assert!(
        !o.status.success() && text(&o).contains("NotFound"),
        "{}",
        text(&o)
    );
    assert!(vol.join("abc/a.txt").is_file());
}

async fn client(c: &TestCluster, context: &str) -> kube::Client {
    let kc = Kubeconfig::read_from(&c.kubeconfig).unwrap();
    let opts = KubeConfigOptions {
        context: Some(context.into()),
        ..Default::default()
    };
    let cfg = kube::Config::from_custom_kubeconfig(kc, &opts).await.unwrap();
    kube::Client::try_from(cfg).unwrap()
}

type ExecResult = (
    Vec<u8>,
    Vec<u8>,
    Option<k8s_openapi::apimachinery::pkg::apis::meta::v1::Status>,
);

/// Runs an attached process to the end: writes `input` then closes stdin, collects stdout and
/// stderr, returns them with the final status. Fails after [`EXEC_TIMEOUT`].
async fn run(p: AttachedProcess, input: &[u8]) -> ExecResult {
    tokio::time::timeout(EXEC_TIMEOUT, run_inner(p, input))
        .await
        .expect("the exec finishes in time")
}

async fn run_inner(mut p: AttachedProcess, input: &[u8]) -> ExecResult {
    let status = p.take_status().unwrap();
    let stdin = p.stdin();
    let mut stdout = p.stdout().unwrap();
    let mut stderr = p.stderr().unwrap();
    let input = input.to_vec();
    let feed = tokio::spawn(async move {
        if let Some(mut w) = stdin {
            w.write_all(&input).await.unwrap();
            w.shutdown().await.unwrap();
        }
    });
    let (mut out, mut err) = (Vec::new(), Vec::new());
    let (a, b) = tokio::join!(stdout.read_to_end(&mut out), stderr.read_to_end(&mut err));
    a.unwrap();
    b.unwrap();
    feed.await.unwrap();
    let st = status.await;
    p.join().await.unwrap();
    (out, err, st)
}

fn exit_code(st: &k8s_openapi::apimachinery::pkg::apis::meta::v1::Status) -> Option<String> {
    st.details.as_ref()?.causes.as_ref()?.iter().find_map(|c| {
        (c.reason.as_deref() == Some("ExitCode")).then(|| c.message.clone().unwrap_or_default())
    })
}

#[test]
fn kube_rs_exec_streams_stdin_and_reports_status() {
    let vols = tempfile::tempdir().unwrap();
    let Some(c) = cluster(&["--volumes-dir", vols.path().to_str().unwrap()]) else {
        return;
    };
    make_copy_pod(&c);
    let vol = vols.path().join(NS).join("data");
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let admin = client(&c, "admin").await;
        let pods: Api<Pod> = Api::namespaced(admin.clone(), NS);
        let ap = AttachParams::default().stdin(true).stdout(true).stderr(true);

        // tar -x of a piped archive into the claim: stdin EOF (v5 close signal) ends tar.
        let payload: Vec<u8> = (0..2_000_000u32).map(|i| (i % 13) as u8).collect();
        let archive = tar_of(&[("logs/x.log", b"line\n"), ("api/big.bin", &payload)]);
        let p = pods
            .exec("copy", ["tar", "-x", "-f", "-", "-C", "/migration"], &ap)
            .await
            .unwrap();
        let (out, err, st) = run(p, &archive).await;
        let st = st.expect("a status");
        assert_eq!(st.status.as_deref(), Some("Success"), "{st:?} {}", String::from_utf8_lossy(&err));
        assert!(out.is_empty());
        assert_eq!(std::fs::read(vol.join("logs/x.log")).unwrap(), b"line\n");
        assert_eq!(std::fs::read(vol.join("api/big.bin")).unwrap(), payload);
        assert!(!c.dir.join("volumes").join(NS).exists(), "--volumes-dir not used");

        // cat streams large output back before the status.
        let p = pods
            .exec("copy", ["cat", "/migration/api/big.bin"], &ap)
            .await
            .unwrap();
        let (out, _, st) = run(p, b"").await;
        assert_eq!(st.unwrap().status.as_deref(), Some("Success"));
        assert!(out == payload, "cat returned {} bytes", out.len());

        // A non-zero exit: reason NonZeroExitCode, cause ExitCode.
        let p = pods.exec("copy", ["ls", "/migration/none"], &ap).await.unwrap();
        let (_, err, st) = run(p, b"").await;
        let st = st.unwrap();
        assert_eq!(st.status.as_deref(), Some("Failure"));
        assert_eq!(st.reason.as_deref(), Some("NonZeroExitCode"));
        assert_eq!(exit_code(&st).as_deref(), Some("2"), "{st:?}");
        assert!(String::from_utf8_lossy(&err).contains("/migration/none"));

        // Unknown program: 126.
        let p = pods.exec("copy", ["bash"], &ap).await.unwrap();
        let (_, err, st) = run(p, b"").await;
        assert_eq!(exit_code(&st.unwrap()).as_deref(), Some("126"));
        assert!(String::from_utf8_lossy(&err).contains("not available in the simulated container"));

        // Refused before the upgrade, as kube::Error::Api.
        let e = pods.exec("missing", ["ls"], &ap).await.err().expect("404");
        assert!(matches!(&e, kube::Error::Api(s) if s.code == 404), "{e:?}");
        let bad = AttachParams::default().container("nope").stdout(true);
        let e = pods.exec("copy", ["ls"], &bad).await.err().expect("400");
        assert!(
            matches!(&e, kube::Error::Api(s) if s.code == 400 && s.message.contains("container nope is not valid")),
            "{e:?}"
        );
        // No command: the real kube-apiserver passes the session on (it does not check the
        // command; the home-made server answered 400), and the node side fails it.
        let p = pods.exec("copy", Vec::<String>::new(), &ap).await.unwrap();
        let (_, _, st) = run(p, b"").await;
        let st = st.unwrap();
        assert_eq!(st.status.as_deref(), Some("Failure"), "{st:?}");
        let viewer: Api<Pod> = Api::namespaced(client(&c, "viewer").await, NS);
        let e = viewer.exec("copy", ["ls", "/migration"], &ap).await.err().expect("403");
        assert!(matches!(&e, kube::Error::Api(s) if s.code == 403), "{e:?}");
    });
}

/// A real PostgreSQL server for the target database (the test fails where there is none).
fn target_db(dir: &Path) -> Option<Postgres> {
    agent_day2_sim::harness::require_postgres();
    let pg = Postgres::start(dir, "127.0.0.1".parse().unwrap()).expect("postgres starts");
    pg.create_db("installer", "admin").expect("database");
    Some(pg)
}

#[test]
fn psql_in_the_assisted_service_pod() {
    assert!(have_kubectl(), "needs kubectl: apt-get install kubernetes-client (scripts/test.sh installs it through scripts/setup.sh)");
    agent_day2_sim::harness::require_netns();
    let tmp = tempfile::tempdir().unwrap();
    let Some(pg) = target_db(tmp.path()) else { return };
    let url = pg.url_as("admin", "installer");
    let c = TestCluster::start_with_args("", &["--assisted-db-url", &url]).expect("simulator starts");
    // The database had no schema: `up` made assisted-service's, owned by the database's owner,
    // as the real service does on its first start.
    assert_eq!(
        agent_day2_sim::node0schema::schema_version(&pg.url("installer")).unwrap(),
        agent_day2_sim::node0schema::DEFAULT_SCHEMA_VERSION
    );
    assert_eq!(
        pg.sql(
            "installer",
            "SELECT tableowner FROM pg_tables WHERE tablename = 'clusters'"
        )
        .unwrap()
        .trim(),
        "admin"
    );

    // The seed: pod Running with both containers, Secret postgres naming the URL's db and user.
    let pod = ok(
        &c,
        &[
            "get",
            "pod",
            "-n",
            ASSISTED_NS,
            "-l",
            "app=assisted-service",
            "-o",
            "jsonpath={.items[0].metadata.name} {.items[0].status.phase} {.items[0].spec.containers[*].name}",
        ],
        b"",
    );
    assert_eq!(pod, format!("{ASSISTED_POD} Running assisted-service postgres"));
    let secret: serde_json::Value = serde_json::from_str(&ok(
        &c,
        &["get", "secret", "-n", ASSISTED_NS, "postgres", "-o", "json"],
        b"",
    ))
    .unwrap();
    let field = |k: &str| {
        use base64::Engine;
        let b = base64::engine::general_purpose::STANDARD
            .decode(secret["data"][k].as_str().unwrap_or(""))
            .unwrap();
        String::from_utf8(b).unwrap()
    };
    assert_eq!(
        (
            field("db.host"),
            field("db.name"),
            field("db.user"),
            field("db.port")
        ),
        (
            "localhost".into(),
            "installer".into(),
            "admin".into(),
            "5432".into()
        )
    );
    assert!(!field("db.password").is_empty());

    let psql = |extra: &[&str]| -> Vec<String> {
        let mut v: Vec<String> = [
            "exec",
            "-i",
            "-n",
            ASSISTED_NS,
            ASSISTED_POD,
            "-c",
            "postgres",
            "--",
            "psql",
            "-X",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        v.extend(extra.iter().map(|s| s.to_string()));
        v
    };
    let args = psql(&["-At", "-U", "admin", "-d", "installer", "-c", "SELECT 1"]);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    assert_eq!(ok(&c, &args, b""), "1\n");

    // A script on stdin (-f -), in one transaction, as import restores the dump.
    let mut script = String::from(
        "CREATE TABLE stream_rows (id bigint PRIMARY KEY, message text);\nCOPY stream_rows (id, message) FROM stdin;\n",
    );
    for i in 0..20_000 {
        script.push_str(&format!(
            "{i}\tevent number {i} with some text to make the stream longer\n"
        ));
    }
    script.push_str("\\.\n");
    let args = psql(&[
        "-q",
        "-v",
        "ON_ERROR_STOP=1",
        "--single-transaction",
        "-U",
        "admin",
        "-d",
        "installer",
        "-f",
        "-",
    ]);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    ok(&c, &args, script.as_bytes());
    assert_eq!(
        pg.sql("installer", "SELECT count(*), max(id) FROM stream_rows")
            .unwrap()
            .trim(),
        "20000|19999"
    );

    // A failing script: psql's exit code 3 comes back, nothing of it committed.
    let o = kubectl_in(
        &c,
        &args,
        b"INSERT INTO stream_rows VALUES (-1, 'x');\nSELECT no_such_column FROM stream_rows;\n",
    );
    assert_eq!(o.status.code(), Some(3), "{}", text(&o));
    assert!(text(&o).contains("no_such_column"), "{}", text(&o));
    assert_eq!(
        pg.sql("installer", "SELECT count(*) FROM stream_rows WHERE id = -1")
            .unwrap()
            .trim(),
        "0"
    );

    // psql runs only in that container.
    let o = kubectl_in(
        &c,
        &[
            "exec",
            "-n",
            ASSISTED_NS,
            ASSISTED_POD,
            "-c",
            "assisted-service",
            "--",
            "psql",
            "-c",
            "SELECT 1",
        ],
        b"",
    );
    assert_eq!(o.status.code(), Some(126), "{}", text(&o));

    // The same through kube-rs, reading the schema version as import does.
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let pods: Api<Pod> = Api::namespaced(client(&c, "admin").await, ASSISTED_NS);
        let ap = AttachParams::default()
            .container("postgres")
            .stdin(true)
            .stdout(true)
            .stderr(true);
        let p = pods
            .exec(
                ASSISTED_POD,
                [
                    "psql",
                    "-X",
                    "-At",
                    "-U",
                    "admin",
                    "-d",
                    "installer",
                    "-c",
                    "SELECT max(id) FROM migrations",
                ],
                &ap,
            )
            .await
            .unwrap();
        let (out, err, st) = run(p, b"").await;
        assert_eq!(
            st.unwrap().status.as_deref(),
            Some("Success"),
            "{}",
            String::from_utf8_lossy(&err)
        );
        assert_eq!(String::from_utf8_lossy(&out), "21211125182200\n");
        let p = pods
            .exec(
                ASSISTED_POD,
                [
                    "psql",
                    "-X",
                    "-q",
                    "-v",
                    "ON_ERROR_STOP=1",
                    "-U",
                    "admin",
                    "-d",
                    "installer",
                    "-f",
                    "-",
                ],
                &ap,
            )
            .await
            .unwrap();
        let (_, _, st) = run(p, b"UPDATE stream_rows SET message = 'changed' WHERE id < 10;\n").await;
        assert_eq!(st.unwrap().status.as_deref(), Some("Success"));

        // A client that goes away mid-stream: as with a real container runtime the process is
        // not killed, its stdin ends. psql then ends the script there: with --single-transaction
        // it COMMITs what it got; an explicit BEGIN without the final COMMIT is rolled back.
        for (id, single, script, committed) in [
            (-5, true, "INSERT INTO stream_rows VALUES (-5, 'partial');\n", true),
            (-6, false, "BEGIN;\nINSERT INTO stream_rows VALUES (-6, 'partial');\n", false),
        ] {
            let mut argv = vec!["psql", "-X", "-q", "-v", "ON_ERROR_STOP=1", "-U", "admin", "-d", "installer"];
            if single {
                argv.push("--single-transaction");
            }
            argv.extend(["-f", "-"]);
            let mut p = pods.exec(ASSISTED_POD, argv, &ap).await.unwrap();
            let mut w = p.stdin().unwrap();
            w.write_all(script.as_bytes()).await.unwrap();
            w.flush().await.unwrap();
            // Until the server holds the row (uncommitted) in an open transaction.
            let seen = "SELECT count(*) FROM pg_stat_activity WHERE usename = 'admin' AND state = 'idle in transaction'";
            let deadline = Instant::now() + Duration::from_secs(20);
            while pg.sql("installer", seen).unwrap().trim() != "1" {
                assert!(Instant::now() < deadline, "psql never got the script");
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            p.abort();
            drop(p);
            drop(w);
            let gone = "SELECT count(*) FROM pg_stat_activity WHERE usename = 'admin'";
            let deadline = Instant::now() + Duration::from_secs(20);
            while pg.sql("installer", gone).unwrap().trim() != "0" {
                assert!(Instant::now() < deadline, "psql did not end after the client left");
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            let n = pg.sql("installer", &format!("SELECT count(*) FROM stream_rows WHERE id = {id}")).unwrap();
            assert_eq!(n.trim(), if committed { "1" } else { "0" }, "single-transaction {single}");
        }
    });
    assert_eq!(
        pg.sql(
            "installer",
            "SELECT count(*) FROM stream_rows WHERE message = 'changed'"
        )
        .unwrap()
        .trim(),
        "10"
    );
    drop(c);
}
