//! The built binary without a cluster: help text, usage errors (exit 2), kubeconfig resolution
//! and connection failures (exit 4) against a tiny loopback HTTP stand-in.

use std::io::{Read, Write};
use std::net::TcpListener;
use std::path::Path;
use std::process::{Command, Output};

const BIN: &str = env!("CARGO_BIN_EXE_kubectl-agent_day2");

/// The plugin with a clean environment: no KUBECONFIG, HOME in `home`, no proxies.
fn plugin(home: &Path, args: &[&str]) -> Output {
    Command::new(BIN)
        .args(args)
        .env_clear()
        .env("HOME", home)
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .output()
        .unwrap()
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// A loopback port nobody listens on (bound, then released).
fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn kubeconfig(server: &str, ctx: &str, ns: Option<&str>) -> String {
    format!(
        "apiVersion: v1\nkind: Config\ncurrent-context: {ctx}\nclusters:\n- name: c-{ctx}\n  cluster:\n    server: {server}\n\
         contexts:\n- name: {ctx}\n  context:\n    cluster: c-{ctx}\n    user: u-{ctx}\n{}users:\n- name: u-{ctx}\n  user:\n    token: t-{ctx}\n",
        ns.map(|n| format!("    namespace: {n}\n")).unwrap_or_default()
    )
}

#[test]
fn help_says_oc_agent_day2_and_lists_kube_flags() {
    let home = tempfile::tempdir().unwrap();
    let out = plugin(home.path(), &["--help"]);
    assert_eq!(out.status.code(), Some(0));
    let s = text(&out.stdout);
    assert!(s.contains("Usage: oc agent-day2"), "{s}");
    for flag in [
        "--kubeconfig",
        "--context",
        "--cluster",
        "--user",
        "--namespace",
        "--server",
        "--token",
        "--as ",
        "--as-group",
        "--certificate-authority",
        "--client-certificate",
        "--client-key",
        "--insecure-skip-tls-verify",
        "--tls-server-name",
        "--request-timeout",
    ] {
        assert!(s.contains(flag), "--help lacks {flag}");
    }
}

#[test]
fn info_help_documents_exit_status() {
    let home = tempfile::tempdir().unwrap();
    let out = plugin(home.path(), &["info", "--help"]);
    assert_eq!(out.status.code(), Some(0));
    let s = text(&out.stdout);
    assert!(s.contains("Usage: oc agent-day2 info"), "{s}");
    assert!(
        s.contains("Exit status:") && s.contains("4  a required read failed"),
        "{s}"
    );
    assert!(s.contains("-o, --output"), "{s}");
}

#[test]
fn usage_errors_exit_2() {
    let home = tempfile::tempdir().unwrap();
    for args in [
        &["info", "--no-such-flag"][..],
        &["no-such-command"][..],
        &["info", "-o", "xml"][..],
        &[][..],
        &[
            "info",
            "--request-timeout",
            "10parsecs",
            "-s",
            "https://127.0.0.1:1",
        ][..],
        &["info", "--server", "https://[::1", "--token", "x"][..],
    ] {
        let out = plugin(home.path(), args);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", text(&out.stderr));
        assert!(!text(&out.stderr).is_empty(), "{args:?}: no message");
    }
}

#[test]
fn version_json_parses() {
    let home = tempfile::tempdir().unwrap();
    let out = plugin(home.path(), &["version", "-o", "json"]);
    assert_eq!(out.status.code(), Some(0));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["apiVersion"], "agent-day2/v1");
    assert_eq!(v["kind"], "Version");
    assert_eq!(v["version"], env!("CARGO_PKG_VERSION"));
    let out = plugin(home.path(), &["version"]);
    assert!(text(&out.stdout).starts_with(&format!("agent-day2 v{}", env!("CARGO_PKG_VERSION"))));
    let out = plugin(home.path(), &["version", "-o", "yaml"]);
    assert!(text(&out.stdout).contains("kind: Version"));
}

#[test]
fn no_kubeconfig_at_all_exits_4_with_hint() {
    let home = tempfile::tempdir().unwrap();
    let out = plugin(home.path(), &["info"]);
    assert_eq!(out.status.code(), Some(4));
    let e = text(&out.stderr);
    assert!(
        e.contains("error: no kubeconfig found ($KUBECONFIG, ~/.kube/config) and no --server given"),
        "{e}"
    );
    assert!(e.contains("oc login"), "{e}");
}

#[test]
fn missing_kubeconfig_file_is_named() {
    let home = tempfile::tempdir().unwrap();
    let out = plugin(home.path(), &["info", "--kubeconfig", "/nonexistent/kc"]);
    assert_eq!(out.status.code(), Some(4));
    assert!(
        text(&out.stderr).contains("cannot read kubeconfig /nonexistent/kc (from --kubeconfig)"),
        "{}",
        text(&out.stderr)
    );
}

#[test]
fn unreachable_server_exits_4_naming_the_url() {
    let home = tempfile::tempdir().unwrap();
    let port = free_port();
    let url = format!("https://127.0.0.1:{port}");
    let out = plugin(
        home.path(),
        &[
            "info",
            "--server",
            &url,
            "--token",
            "x",
            "--insecure-skip-tls-verify",
        ],
    );
    assert_eq!(out.status.code(), Some(4), "{}", text(&out.stderr));
    let e = text(&out.stderr);
    assert!(
        e.contains(&format!("error: cannot reach the API server at {url}/")),
        "{e}"
    );
    assert!(e.contains("check --server/--context"), "{e}");
    assert!(out.stdout.is_empty(), "nothing on stdout: {}", text(&out.stdout));
}

#[test]
fn kubeconfig_resolution_follows_client_go() {
    let home = tempfile::tempdir().unwrap();
    let (pa, pb, pc) = (free_port(), free_port(), free_port());
    let a = home.path().join("a.yaml");
    let b = home.path().join("b.yaml");
    std::fs::write(
        &a,
        kubeconfig(&format!("https://127.0.0.1:{pa}"), "ctx-a", Some("ns-a")),
    )
    .unwrap();
    std::fs::write(&b, kubeconfig(&format!("https://127.0.0.1:{pb}"), "ctx-b", None)).unwrap();
    std::fs::create_dir(home.path().join(".kube")).unwrap();
    std::fs::write(
        home.path().join(".kube/config"),
        kubeconfig(&format!("https://127.0.0.1:{pc}"), "ctx-c", None),
    )
    .unwrap();
    let run = |env_kc: Option<String>, args: &[&str]| {
        let mut c = Command::new(BIN);
        c.args(args).env_clear().env("HOME", home.path());
        if let Some(k) = env_kc {
            c.env("KUBECONFIG", k);
        }
        let out = c.output().unwrap();
        assert_eq!(out.status.code(), Some(4), "{args:?}: {}", text(&out.stderr));
        text(&out.stderr)
    };
    // ~/.kube/config when nothing else is set.
    assert!(run(None, &["info"]).contains(&format!(":{pc}/")));
    // KUBECONFIG merged: first file's current-context wins; a missing entry is skipped.
    let merged = format!("/nonexistent:{}:{}", a.display(), b.display());
    assert!(run(Some(merged.clone()), &["info"]).contains(&format!(":{pa}/")));
    // --context picks from the merged set, before or after the subcommand.
    assert!(run(Some(merged.clone()), &["info", "--context", "ctx-b"]).contains(&format!(":{pb}/")));
    assert!(run(Some(merged.clone()), &["--context", "ctx-b", "info"]).contains(&format!(":{pb}/")));
    // --kubeconfig is that file only: ctx-a is not in b.yaml.
    let e = run(
        Some(merged),
        &["info", "--kubeconfig", b.to_str().unwrap(), "--context", "ctx-a"],
    );
    assert!(e.contains("cannot use context \"ctx-a\""), "{e}");
    // --server overrides the context's server.
    let ps = free_port();
    assert!(run(None, &["info", "-s", &format!("https://127.0.0.1:{ps}")]).contains(&format!(":{ps}/")));
}

/// One-request HTTP stand-in: answers every request with `status` and a Kubernetes Status body.
fn fake_api(status: u16, message: &str) -> (u16, std::thread::JoinHandle<Vec<String>>) {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    let body = serde_json::json!({"kind": "Status", "apiVersion": "v1", "status": "Failure",
        "message": message, "reason": if status == 401 { "Unauthorized" } else { "Forbidden" }, "code": status})
    .to_string();
    let h = std::thread::spawn(move || {
        let mut seen = Vec::new();
        l.set_nonblocking(false).unwrap();
        // Serve until the client has gone (first connection is enough for one failing read).
        if let Ok((mut s, _)) = l.accept() {
            let mut buf = [0u8; 8192];
            let n = s.read(&mut buf).unwrap_or(0);
            let req = String::from_utf8_lossy(&buf[..n]).to_string();
            seen.push(req.lines().next().unwrap_or("").to_string());
            let reason = if status == 401 {
                "Unauthorized"
            } else {
                "Forbidden"
            };
            let _ = write!(
                s,
                "HTTP/1.1 {status} {reason}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            );
        }
        seen
    });
    (port, h)
}

#[test]
fn unauthorized_exits_4_and_says_log_in_again() {
    let home = tempfile::tempdir().unwrap();
    let (port, h) = fake_api(401, "Unauthorized");
    let out = plugin(
        home.path(),
        &[
            "info",
            "-s",
            &format!("http://127.0.0.1:{port}"),
            "--token",
            "expired",
        ],
    );
    assert_eq!(out.status.code(), Some(4), "{}", text(&out.stderr));
    let e = text(&out.stderr);
    assert!(e.contains("error: unauthorized at http://127.0.0.1:"), "{e}");
    assert!(e.contains("log in again (oc login)"), "{e}");
    let seen = h.join().unwrap();
    assert_eq!(
        seen,
        vec!["GET /apis/config.openshift.io/v1/clusterversions/version HTTP/1.1"]
    );
}

#[test]
fn forbidden_required_read_names_resource_and_user() {
    let home = tempfile::tempdir().unwrap();
    let (port, h) = fake_api(
        403,
        "clusterversions.config.openshift.io \"version\" is forbidden: User \"dev\" cannot get resource \"clusterversions\" in API group \"config.openshift.io\" at the cluster scope",
    );
    let out = plugin(
        home.path(),
        &["info", "-s", &format!("http://127.0.0.1:{port}"), "--token", "t"],
    );
    assert_eq!(out.status.code(), Some(4), "{}", text(&out.stderr));
    let e = text(&out.stderr);
    assert!(
        e.contains("error: cannot read ClusterVersion version: forbidden for user \"dev\""),
        "{e}"
    );
    assert!(e.contains("Permissions"), "{e}");
    h.join().unwrap();
}

#[test]
fn verbosity_flag_logs_to_stderr_only() {
    let home = tempfile::tempdir().unwrap();
    let url = format!("https://127.0.0.1:{}", free_port());
    let quiet = plugin(home.path(), &["info", "-s", &url, "--token", "x"]);
    let loud = plugin(home.path(), &["info", "-s", &url, "--token", "x", "-v", "4"]);
    assert_eq!(loud.status.code(), Some(4));
    let (q, l) = (text(&quiet.stderr), text(&loud.stderr));
    assert!(!q.contains("DEBUG"), "{q}");
    assert!(l.contains("DEBUG") && l.contains("ClusterVersion version"), "{l}");
    assert!(loud.stdout.is_empty());
}
