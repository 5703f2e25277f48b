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
        s.contains("Exit status:")
            && s.contains("4  a read failed")
            && s.contains("the report with what\n     could be read is printed first"),
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
        // Issue 22: a batch name that cannot be one, an address that cannot be a host's: usage
        // errors, before any cluster read (they were exit 4, or accepted).
        &["approve", "--batch", ""][..],
        &["approve", "--batch", "b\x1b[31m"][..],
        &["monitor", "--batch", "Batch_1"][..],
        &["approve", "--node", "worker-1=0.0.0.0"][..],
        &["monitor", "--node", "worker-1=224.0.0.1"][..],
        &["monitor", "--ip-addresses", "192.168.111.30,::"][..],
        &["monitor", "--ip-addresses", "255.255.255.255"][..],
        // A bad duration too (it was found after connecting: exit 4 without a cluster).
        &["approve", "--watch", "--timeout", "10x"][..],
        &["approve", "--kubelet-retry", "5x"][..],
        &["approve", "--reissue", ""][..],
        &["approve", "--reissue", "Worker_1"][..],
        &["monitor", "--timeout", "soon"][..],
    ] {
        let out = plugin(home.path(), args);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", text(&out.stderr));
        assert!(!text(&out.stderr).is_empty(), "{args:?}: no message");
        assert!(!text(&out.stderr).contains('\x1b'), "{args:?}: escaped");
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

/// The Kubernetes API version k8s-openapi was compiled for, by its own `k8s_if_*` macros (an
/// independent path from build.rs's `DEP_K8S_OPENAPI_*_VERSION`).
// Only one of the macros expands, so clippy sees a push right after `Vec::new()`.
#[allow(clippy::vec_init_then_push)]
fn k8s_openapi_version() -> &'static str {
    let mut v = Vec::new();
    k8s_openapi::k8s_if_1_33! { v.push("1.33"); }
    k8s_openapi::k8s_if_1_34! { v.push("1.34"); }
    k8s_openapi::k8s_if_1_35! { v.push("1.35"); }
    k8s_openapi::k8s_if_1_36! { v.push("1.36"); }
    k8s_openapi::k8s_if_1_37! { v.push("1.37"); }
    assert_eq!(v.len(), 1, "k8s-openapi: exactly one version feature: {v:?}");
    v[0]
}

#[test]
fn version_names_build_kubernetes_api_and_openshift_minimum() {
    let home = tempfile::tempdir().unwrap();
    let out = plugin(home.path(), &["version", "-o", "json"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["kubernetesApiVersion"], k8s_openapi_version(), "{v}");
    let (major, minor) = agent_day2::cluster::MIN_VERSION;
    assert_eq!(v["minOpenShiftVersion"], format!("{major}.{minor}"), "{v}");
    let date = v["buildDate"].as_str().unwrap();
    assert!(
        date.len() == 20 && date.ends_with('Z') && date.as_bytes()[10] == b'T',
        "buildDate {date:?} is not RFC 3339 UTC"
    );
    // Built in a git checkout: the commit is HEAD's or an ancestor's (the tree may have moved
    // on since the build); outside one it is null.
    if let Some(c) = v["gitCommit"].as_str() {
        assert!(
            c.len() >= 7 && c.chars().all(|ch| ch.is_ascii_hexdigit()),
            "{c:?}"
        );
    }
    let out = plugin(home.path(), &["version"]);
    let t = text(&out.stdout);
    for want in [
        format!(
            "Client types:   Kubernetes {} (servers 1.31 and newer)",
            k8s_openapi_version()
        ),
        format!("OpenShift:      {major}.{minor} and newer"),
        format!("Build date:     {date}"),
        "Git commit:".to_string(),
        "Platform:".to_string(),
    ] {
        assert!(t.contains(&want), "{want:?} missing from\n{t}");
    }
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
    // Said plainly, not in the HTTP client's words.
    assert!(
        e.contains("connection refused: nothing listens at that address and port"),
        "{e}"
    );
    assert!(!e.contains("ServiceError") && !e.contains("os error"), "{e}");
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
    assert!(
        e.contains("context \"ctx-a\" not found in the kubeconfig (contexts: ctx-b)"),
        "{e}"
    );
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
        l.set_nonblocking(true).unwrap();
        // Serve every connection until the client has been quiet for 2 s (info goes on
        // reading after a refused required read, to print what it can).
        let mut idle_since = std::time::Instant::now();
        while idle_since.elapsed() < std::time::Duration::from_secs(2) {
            let Ok((mut s, _)) = l.accept() else {
                std::thread::sleep(std::time::Duration::from_millis(20));
                continue;
            };
            idle_since = std::time::Instant::now();
            s.set_nonblocking(false).unwrap();
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
    // A 401 stops everything at the first read.
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
    assert!(!q.contains("debug:"), "{q}");
    assert!(
        l.contains("debug: ") && l.contains("ClusterVersion version"),
        "{l}"
    );
    assert!(loud.stdout.is_empty());
}

fn write_kc(home: &Path, name: &str, content: &str) -> String {
    let p = home.join(name);
    std::fs::write(&p, content).unwrap();
    p.to_str().unwrap().to_string()
}

#[test]
fn control_characters_in_header_values_are_refused_not_a_panic() {
    let home = tempfile::tempdir().unwrap();
    let url = format!("http://127.0.0.1:{}", free_port());
    // From a flag: usage (exit 2), naming the flag.
    for (args, flag) in [
        (vec!["--token", "abc\ndef"], "--token"),
        (vec!["--token", "abc\rdef"], "--token"),
        (vec!["--as", "x\ny"], "--as"),
        (vec!["--as", "u", "--as-group", "g\u{1}"], "--as-group"),
        (vec!["--as", "u", "--as-uid", "1\n"], "--as-uid"),
    ] {
        let mut a = vec!["info", "-s", url.as_str()];
        a.extend(args.iter().copied());
        let out = plugin(home.path(), &a);
        let e = text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {e}");
        assert!(e.contains(&format!("error: {flag}: the value contains")), "{e}");
        assert!(!e.contains("panicked"), "{e}");
    }
    let out = plugin(home.path(), &["info", "-s", &url, "--token", "abc\ndef"]);
    assert!(text(&out.stderr).contains("oc login"), "{}", text(&out.stderr));
    // From the kubeconfig: exit 4, naming the user entry.
    let kc = kubeconfig(&url, "c", None).replace("token: t-c", "token: \"abc\\ndef\"");
    let kc = write_kc(home.path(), "kc", &kc);
    let out = plugin(home.path(), &["info", "--kubeconfig", &kc]);
    let e = text(&out.stderr);
    assert_eq!(out.status.code(), Some(4), "{e}");
    assert!(
        e.contains("kubeconfig user \"u-c\": field \"token\": the value contains a newline"),
        "{e}"
    );
    assert!(
        e.contains("copy the token again") && e.contains("oc login"),
        "{e}"
    );
    assert!(!e.contains("panicked"), "{e}");
}

#[test]
fn unknown_kubeconfig_names_are_errors_like_kubectl() {
    let home = tempfile::tempdir().unwrap();
    let url = format!("http://127.0.0.1:{}", free_port());
    let kc = write_kc(home.path(), "kc", &kubeconfig(&url, "admin", None));
    let run = |extra: &[&str]| {
        let mut a = vec!["info", "--kubeconfig", kc.as_str()];
        a.extend_from_slice(extra);
        let out = plugin(home.path(), &a);
        assert_eq!(out.status.code(), Some(4), "{extra:?}: {}", text(&out.stderr));
        text(&out.stderr)
    };
    let e = run(&["--user", "nosuch"]);
    assert!(
        e.contains("error: auth info \"nosuch\" does not exist (users: u-admin)"),
        "{e}"
    );
    let e = run(&["--cluster", "nosuch"]);
    assert!(
        e.contains("error: no server found for cluster \"nosuch\" (clusters: c-admin)"),
        "{e}"
    );
    let e = run(&["--context", "nosuch"]);
    assert!(
        e.contains("error: context \"nosuch\" not found in the kubeconfig (contexts: admin)"),
        "{e}"
    );
    assert!(
        e.contains("kubectl config get-contexts") && !e.contains("oc login"),
        "{e}"
    );
    // A context naming a cluster that is not there names the cluster.
    let broken = kubeconfig(&url, "admin", None).replace("cluster: c-admin", "cluster: gone");
    let kc2 = write_kc(home.path(), "kc2", &broken);
    let out = plugin(home.path(), &["info", "--kubeconfig", &kc2]);
    let e = text(&out.stderr);
    assert_eq!(out.status.code(), Some(4), "{e}");
    assert!(
        e.contains("context \"admin\" names cluster \"gone\", which is not in the kubeconfig"),
        "{e}"
    );
    // --kubeconfig /missing: the path once, plainly.
    let out = plugin(home.path(), &["info", "--kubeconfig", "/missing/kc"]);
    let e = text(&out.stderr);
    assert_eq!(out.status.code(), Some(4), "{e}");
    assert_eq!(e.matches("/missing/kc").count(), 1, "{e}");
    assert!(!e.contains("'\"") && !e.contains("os error"), "{e}");
    // KUBECONFIG naming only missing files names them.
    let out = Command::new(BIN)
        .args(["info"])
        .env_clear()
        .env("HOME", home.path())
        .env("KUBECONFIG", "/missing/a:/missing/b")
        .output()
        .unwrap();
    let e = text(&out.stderr);
    assert_eq!(out.status.code(), Some(4), "{e}");
    assert!(
        e.contains("KUBECONFIG names no existing file: /missing/a, /missing/b"),
        "{e}"
    );
}

#[test]
fn empty_flag_values_count_as_unset() {
    let home = tempfile::tempdir().unwrap();
    let port = free_port();
    let kc = write_kc(
        home.path(),
        "kc",
        &kubeconfig(&format!("http://127.0.0.1:{port}"), "admin", None),
    );
    for extra in [
        vec!["--context="],
        vec!["--cluster="],
        vec!["--user="],
        vec!["--token", ""],
        vec!["--as", ""],
        vec!["--as", "", "--as-group", ""],
    ] {
        let mut a = vec!["info", "--kubeconfig", kc.as_str()];
        a.extend(extra.iter().copied());
        let out = plugin(home.path(), &a);
        let e = text(&out.stderr);
        // The context's server was used (nothing listens there): the flags were ignored.
        assert_eq!(out.status.code(), Some(4), "{extra:?}: {e}");
        assert!(
            e.contains(&format!(
                "cannot reach the API server at http://127.0.0.1:{port}/"
            )),
            "{extra:?}: {e}"
        );
    }
}

#[test]
fn impersonating_groups_needs_a_user() {
    let home = tempfile::tempdir().unwrap();
    let url = format!("http://127.0.0.1:{}", free_port());
    for extra in [["--as-group", "system:masters"], ["--as-uid", "42"]] {
        let mut a = vec!["info", "-s", url.as_str(), "--token", "t"];
        a.extend(extra);
        let out = plugin(home.path(), &a);
        let e = text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{e}");
        assert!(
            e.contains("requesting uid, groups or user-extra for")
                && e.contains("without impersonating a user"),
            "{e}"
        );
    }
}

/// Accepts connections and never answers (a stuck API server or TLS terminator).
fn silent_server() -> u16 {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    std::thread::spawn(move || {
        let mut keep = Vec::new();
        while let Ok((s, _)) = l.accept() {
            keep.push(s);
        }
    });
    port
}

#[test]
fn request_timeouts_exit_5_naming_the_request() {
    let home = tempfile::tempdir().unwrap();
    let port = silent_server();
    for (scheme, t) in [("http", "1s"), ("https", "1ms"), ("https", "1s")] {
        let start = std::time::Instant::now();
        let out = plugin(
            home.path(),
            &[
                "info",
                "-s",
                &format!("{scheme}://127.0.0.1:{port}"),
                "--token",
                "t",
                "--insecure-skip-tls-verify",
                "--request-timeout",
                t,
            ],
        );
        let e = text(&out.stderr);
        assert_eq!(out.status.code(), Some(5), "{scheme} {t}: {e}");
        assert!(
            e.contains("error: timed out: ") && e.contains("ClusterVersion version"),
            "{e}"
        );
        assert!(!e.contains("check that the cluster is up"), "{e}");
        assert!(start.elapsed() < std::time::Duration::from_secs(20));
    }
}

#[test]
fn info_help_names_the_default_deadline() {
    let home = tempfile::tempdir().unwrap();
    let out = plugin(home.path(), &["info", "--help"]);
    let s = text(&out.stdout);
    assert!(
        s.contains("30 s") && s.contains("--request-timeout") && s.contains("5  "),
        "{s}"
    );
}

#[test]
fn dash_dash_version_prints_the_version() {
    let home = tempfile::tempdir().unwrap();
    let out = plugin(home.path(), &["--version"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(text(&out.stdout).starts_with(&format!("agent-day2 v{}", env!("CARGO_PKG_VERSION"))));
}

#[test]
fn default_verbosity_shows_only_our_own_lines_without_colour() {
    let home = tempfile::tempdir().unwrap();
    let url = format!("https://127.0.0.1:{}", free_port());
    let out = plugin(
        home.path(),
        &["info", "-s", &url, "--token", "x", "--insecure-skip-tls-verify"],
    );
    let e = text(&out.stderr);
    assert_eq!(out.status.code(), Some(4), "{e}");
    assert!(!e.contains('\u{1b}'), "ANSI escape in {e:?}");
    for l in e.lines() {
        assert!(
            l.starts_with("error: ") || l.starts_with("warning: ") || l.starts_with("       ("),
            "{l:?} in\n{e}"
        );
    }
    assert_eq!(e.lines().filter(|l| l.starts_with("error: ")).count(), 1, "{e}");
    // -v 6: kube's own logs appear.
    let out = plugin(home.path(), &["info", "-s", &url, "--token", "x", "-v", "6"]);
    let e = text(&out.stderr);
    assert!(e.lines().count() > 2 && !e.contains('\u{1b}'), "{e}");
}

/// A duration too large for Go's time.Duration (and for Rust's Duration from f64) is a usage
/// error naming the flag, never a panic (exit 101).
#[test]
fn huge_durations_are_refused_naming_the_flag() {
    let home = tempfile::tempdir().unwrap();
    let out = plugin(
        home.path(),
        &[
            "info",
            "--request-timeout",
            "9999999999999999h",
            "-s",
            "https://127.0.0.1:1",
            "--token",
            "x",
        ],
    );
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
    assert!(
        text(&out.stderr).contains("--request-timeout"),
        "{}",
        text(&out.stderr)
    );
    // --token-ttl is checked before any cluster work: exit 3 naming it.
    let dir = home.path().join("out");
    let out = plugin(
        home.path(),
        &[
            "add-nodes",
            "--token-ttl",
            "9999999999999999h",
            "--hostname",
            "w",
            "--mac-address",
            "52:54:00:aa:00:30",
            "--dir",
            dir.to_str().unwrap(),
            "-s",
            "https://127.0.0.1:1",
            "--token",
            "x",
        ],
    );
    assert_eq!(out.status.code(), Some(3), "{}", text(&out.stderr));
    let err = text(&out.stderr);
    assert!(
        err.contains("--token-ttl") && err.contains("out of range") && err.matches("e.g.").count() == 1,
        "{err}"
    );
}

/// Kubeconfigs and the files they or the kube flags name are read with a cap: a device is
/// refused by name (exit 4, kubeconfig trouble) instead of being read until memory runs out.
#[test]
fn unbounded_kubeconfig_and_key_files_are_refused() {
    let home = tempfile::tempdir().unwrap();
    let out = plugin(home.path(), &["info", "--kubeconfig", "/dev/zero"]);
    assert_eq!(out.status.code(), Some(4), "{}", text(&out.stderr));
    assert!(
        text(&out.stderr).contains("/dev/zero (from --kubeconfig)")
            && text(&out.stderr).contains("character device"),
        "{}",
        text(&out.stderr)
    );

    let out = Command::new(BIN)
        .args(["info"])
        .env_clear()
        .env("HOME", home.path())
        .env("KUBECONFIG", "/dev/zero")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(4), "{}", text(&out.stderr));
    assert!(
        text(&out.stderr).contains("/dev/zero (from KUBECONFIG)"),
        "{}",
        text(&out.stderr)
    );

    let srv = format!("https://127.0.0.1:{}", free_port());
    for flag in ["--client-key", "--client-certificate", "--certificate-authority"] {
        let out = plugin(
            home.path(),
            &["info", "-s", &srv, "--token", "x", flag, "/dev/zero"],
        );
        assert_eq!(out.status.code(), Some(4), "{flag}: {}", text(&out.stderr));
        assert!(
            text(&out.stderr).contains(&format!("/dev/zero (from {flag})")),
            "{flag}: {}",
            text(&out.stderr)
        );
    }

    // A file named inside the kubeconfig: refused naming the entry; relative to the kubeconfig.
    let kc = kubeconfig(&srv, "c", None).replace(
        "    token: t-c\n",
        "    client-key: zero\n    client-certificate-data: eA==\n",
    );
    std::fs::write(home.path().join("kc"), kc).unwrap();
    std::os::unix::fs::symlink("/dev/zero", home.path().join("zero")).unwrap();
    let kc_path = home.path().join("kc");
    let out = plugin(home.path(), &["info", "--kubeconfig", kc_path.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(4), "{}", text(&out.stderr));
    let err = text(&out.stderr);
    assert!(
        err.contains("client-key of user \"u-c\"") && err.contains("character device"),
        "{err}"
    );

    // ...but only the entries in use are read, as kubectl does: another user's bad file is fine
    // (here the run gets as far as the unreachable server).
    let kc = kubeconfig(&srv, "c", None)
        + "- name: other\n  user:\n    client-key: zero\n    client-certificate: /nonexistent\n";
    std::fs::write(&kc_path, kc).unwrap();
    let out = plugin(home.path(), &["info", "--kubeconfig", kc_path.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(4), "{}", text(&out.stderr));
    assert!(
        text(&out.stderr).contains("cannot reach the API server"),
        "{}",
        text(&out.stderr)
    );

    // An over-size regular kubeconfig (8 MiB cap; sparse, so cheap).
    let big = home.path().join("big");
    std::fs::File::create(&big)
        .unwrap()
        .set_len((8 << 20) + 1)
        .unwrap();
    let out = plugin(home.path(), &["info", "--kubeconfig", big.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(4), "{}", text(&out.stderr));
    assert!(
        text(&out.stderr).contains("more than the 8388608 bytes"),
        "{}",
        text(&out.stderr)
    );
}

/// The single-host flags with --nodes-config are a usage error (exit 2), not silently ignored.
#[test]
fn single_host_flags_conflict_with_nodes_config() {
    let home = tempfile::tempdir().unwrap();
    let nc = home.path().join("nc.yaml");
    std::fs::write(&nc, "hosts: []\n").unwrap();
    for flag in [
        &["--cpu-architecture", "aarch64"][..],
        &["--hostname", "w"][..],
        &["--network-config-path", "x.yaml"][..],
        &["--root-device-hint", "deviceName:/dev/sda"][..],
        &["--ssh-key-path", "id.pub"][..],
        &["--mac-address", "52:54:00:aa:00:30"][..],
    ] {
        let mut a = vec![
            "add-nodes",
            "--nodes-config",
            nc.to_str().unwrap(),
            "-s",
            "https://127.0.0.1:1",
            "--token",
            "x",
        ];
        a.extend_from_slice(flag);
        let out = plugin(home.path(), &a);
        assert_eq!(out.status.code(), Some(2), "{flag:?}: {}", text(&out.stderr));
        assert!(
            text(&out.stderr).contains(flag[0]),
            "{flag:?}: {}",
            text(&out.stderr)
        );
    }
}

/// A closed pipe on stdout and stderr (`… 2>&1 | head -1` after `head` has exited) leaves the
/// documented exit code: the print macros' panic (exit 101) used to replace it, in the middle
/// of a `migrate import` as much as here (tests/house.rs keeps them out of src/).
#[test]
fn closed_pipes_keep_the_exit_code() {
    let home = tempfile::tempdir().unwrap();
    let bundle = home.path().join("bundle");
    std::fs::create_dir(&bundle).unwrap();
    for args in [
        vec![
            "migrate",
            "status",
            "--kubeconfig",
            "/nonexistent",
            bundle.to_str().unwrap(),
        ],
        vec!["version"],
    ] {
        let (r_out, w_out) = std::io::pipe().unwrap();
        let (r_err, w_err) = std::io::pipe().unwrap();
        drop((r_out, r_err));
        let status = Command::new(BIN)
            .args(&args)
            .env_clear()
            .env("HOME", home.path())
            .stdout(w_out)
            .stderr(w_err)
            .status()
            .unwrap();
        let want = if args[0] == "version" { 0 } else { 3 };
        assert_eq!(status.code(), Some(want), "{args:?}");
    }
    // A full disk behind stdout is not a closed pipe: the output is lost, so exit 1, saying so.
    for args in [vec!["version"], vec!["version", "-o", "json"], vec!["--help"]] {
        let out = Command::new(BIN)
            .args(&args)
            .env_clear()
            .env("HOME", home.path())
            .stdout(std::fs::OpenOptions::new().write(true).open("/dev/full").unwrap())
            .output()
            .unwrap();
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {err}");
        assert!(
            err.contains("to stdout: No space left on device"),
            "{args:?}: {err}"
        );
    }
}

/// A kubeconfig the YAML parser refuses: one line naming the file, the flag and the position,
/// never the file's text (the parser quotes the lines around the fault, here a token) nor the
/// parser's own advice; exit 4.
#[test]
fn a_broken_kubeconfig_is_named_without_its_secrets() {
    let home = tempfile::tempdir().unwrap();
    let kc = home.path().join("kc");
    std::fs::write(
        &kc,
        "apiVersion: v1\nusers:\n- name: u\n  user:\n    token: sekrit-one\n    token: sekrit-two\n",
    )
    .unwrap();
    let out = plugin(home.path(), &["info", "--kubeconfig", kc.to_str().unwrap()]);
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(4), "{err}");
    assert!(
        !err.contains("sekrit") && !err.contains("DuplicateKeyPolicy"),
        "{err}"
    );
    assert!(
        err.contains("(from --kubeconfig) is not a valid kubeconfig: line 6 column 5")
            && err.contains("give --kubeconfig another kubeconfig"),
        "{err}"
    );
    assert_eq!(err.lines().count(), 2, "{err}");
}

/// With -o json|yaml a failed run prints one document on stdout even when it fails before any
/// cluster read (no kubeconfig): the error document of its command, with the exit code.
#[test]
fn json_output_gets_an_error_document_on_every_failure() {
    let home = tempfile::tempdir().unwrap();
    for (args, kind) in [
        (vec!["info", "-o", "json"], "InfoError"),
        (
            vec![
                "add-nodes",
                "--mac-address",
                "52:54:00:aa:00:50",
                "--dir",
                "/tmp",
                "-o",
                "json",
            ],
            "AddNodesError",
        ),
        (vec!["add-nodes", "batch", "list", "-o", "json"], "AddNodesError"),
    ] {
        let out = plugin(home.path(), &args);
        assert_eq!(out.status.code(), Some(4), "{args:?}: {}", text(&out.stderr));
        let doc: serde_json::Value = serde_json::from_slice(&out.stdout)
            .unwrap_or_else(|e| panic!("{args:?}: {e}: {}", text(&out.stdout)));
        assert_eq!(doc["kind"], kind, "{doc}");
        assert_eq!(doc["exitCode"], 4, "{doc}");
        assert!(
            doc["errors"][0]["message"]
                .as_str()
                .unwrap()
                .contains("no kubeconfig found"),
            "{doc}"
        );
    }
}
