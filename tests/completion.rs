//! Shell completion: kubectl's plugin completion protocol through the real kubectl (which runs
//! scripts/kubectl_complete-agent_day2 from PATH), the candidates themselves, and the
//! `completion SHELL` scripts. Batch and host names come from the simulated cluster
//! (agent-day2-sim, in a private network namespace; the tests fail with the reason where none can be
//! made), after `add-nodes` made the batches.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use agent_day2::batch::{BatchHost, BatchRecord};
use agent_day2::cli::completion::{
    candidates, cluster_candidates, ClusterValue, DIRECTIVE_DEFAULT, DIRECTIVE_FILTER_DIRS,
    DIRECTIVE_NO_FILE, DIRECTIVE_NO_SPACE,
};
use agent_day2_sim::harness::TestCluster;
use serde_json::{json, Value};

const BIN: &str = env!("CARGO_BIN_EXE_kubectl-agent_day2");
const HELPER: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/scripts/kubectl_complete-agent_day2");

fn words(w: &[&str]) -> Vec<String> {
    w.iter().map(|s| s.to_string()).collect()
}

fn names(c: &[String]) -> Vec<&str> {
    c.iter().map(|l| l.split('\t').next().unwrap()).collect()
}

/// `kubectl __complete ARGS` with a PATH whose first directory holds the plugin and the helper.
/// None (after printing why) when kubectl is not installed.
fn kubectl_complete(args: &[&str]) -> Option<Vec<String>> {
    kubectl_complete_env(args, &[])
}

/// [`kubectl_complete`] with extra environment variables (`KUBECONFIG`).
fn kubectl_complete_env(args: &[&str], env: &[(&str, &Path)]) -> Option<Vec<String>> {
    if Command::new("kubectl")
        .args(["version", "--client"])
        .output()
        .is_err()
    {
        panic!("needs kubectl: apt-get install kubernetes-client (scripts/test.sh installs it through scripts/setup.sh)");
    }
    let dir = tempfile::tempdir().unwrap();
    std::fs::copy(BIN, dir.path().join("kubectl-agent_day2")).unwrap();
    std::fs::copy(HELPER, dir.path().join("kubectl_complete-agent_day2")).unwrap();
    let mut paths: Vec<PathBuf> = vec![dir.path().to_path_buf()];
    paths.extend(std::env::split_paths(
        &std::env::var_os("PATH").unwrap_or_default(),
    ));
    let path: OsString = std::env::join_paths(paths).unwrap();
    let home = tempfile::tempdir().unwrap();
    let out = Command::new("kubectl")
        .arg("__complete")
        .args(args)
        .env("PATH", path)
        .env("HOME", home.path())
        .env_remove("KUBECONFIG")
        .envs(env.iter().map(|(k, v)| (*k, *v)))
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    Some(
        String::from_utf8(out.stdout)
            .unwrap()
            .lines()
            .map(String::from)
            .collect(),
    )
}

#[test]
fn kubectl_completes_subcommands_through_the_helper() {
    let Some(lines) = kubectl_complete(&["agent-day2", ""]) else {
        return;
    };
    assert_eq!(lines.last().map(String::as_str), Some(":4"), "{lines:?}");
    let got = names(&lines[..lines.len() - 1]);
    for want in ["add-nodes", "approve", "info", "monitor", "version", "completion"] {
        assert!(got.contains(&want), "{want} missing from {lines:?}");
    }
    assert!(
        !got.contains(&"__complete"),
        "the hidden command is offered: {lines:?}"
    );
}

#[test]
fn kubectl_completes_flags_through_the_helper() {
    let Some(lines) = kubectl_complete(&["agent-day2", "add-nodes", "--no"]) else {
        return;
    };
    assert_eq!(lines.last().map(String::as_str), Some(":4"), "{lines:?}");
    let got = names(&lines[..lines.len() - 1]);
    assert!(got.contains(&"--nodes-config"), "{lines:?}");
    assert!(got.iter().all(|f| f.starts_with("--no")), "{lines:?}");
    // A flag's fixed values.
    let Some(lines) = kubectl_complete(&["agent-day2", "version", "-o", "j"]) else {
        return;
    };
    assert_eq!(lines, ["json\tOne JSON document", ":4"]);
}

#[test]
fn kubectl_passes_positional_and_path_directives_through() {
    // `completion <TAB>`: the shells.
    let Some(lines) = kubectl_complete(&["agent-day2", "completion", ""]) else {
        return;
    };
    assert_eq!(
        lines,
        ["bash", "elvish", "fish", "powershell", "zsh", ":4"],
        "completion <TAB>"
    );
    let lines = kubectl_complete(&["agent-day2", "completion", "z"]).unwrap();
    assert_eq!(lines, ["zsh", ":4"]);
    // Directories only (Cobra's FilterDirs, 16): the bundle and the export's --out, as kubectl
    // hands them to the shell.
    for args in [
        &["agent-day2", "migrate", "import", ""][..],
        &["agent-day2", "migrate", "import", "--dry-run", ""][..],
        &["agent-day2", "migrate", "wait", ""][..],
        &["agent-day2", "migrate", "status", "b"][..],
        &["agent-day2", "migrate", "export", "--out", ""][..],
        &["agent-day2", "migrate", "export", "--out=b"][..],
        &["agent-day2", "migrate", "node0-unit", "--bundle", ""][..],
        &["agent-day2", "add-nodes", "--dir", ""][..],
    ] {
        let lines = kubectl_complete(args).unwrap();
        assert_eq!(lines, [format!(":{DIRECTIVE_FILTER_DIRS}")], "{args:?}");
    }
    // Files (the default directive, 0).
    for args in [
        &["agent-day2", "migrate", "export", "--token-file", ""][..],
        &["agent-day2", "migrate", "export", "--db-dump", "x"][..],
        &["agent-day2", "migrate", "export", "--db-dump=x"][..],
        &["agent-day2", "info", "--kubeconfig", ""][..],
        &["agent-day2", "--kubeconfig", ""][..],
    ] {
        let lines = kubectl_complete(args).unwrap();
        assert_eq!(lines, [format!(":{DIRECTIVE_DEFAULT}")], "{args:?}");
    }
    // One bundle only: nothing after it.
    let lines = kubectl_complete(&["agent-day2", "migrate", "status", "./b", ""]).unwrap();
    assert_eq!(lines, [":4"]);
}

#[test]
fn candidates_follow_the_clap_definition() {
    let (c, d) = candidates(&words(&["app"]));
    assert_eq!((names(&c), d), (vec!["approve"], DIRECTIVE_NO_FILE));
    // Global connection flags are offered in subcommands, and skipped with their values.
    let (c, _) = candidates(&words(&["--context", "prod", "info", "--kubec"]));
    assert_eq!(names(&c), ["--kubeconfig"]);
    // A path flag's value: the shell completes file names.
    let (c, d) = candidates(&words(&["add-nodes", "--nodes-config", ""]));
    assert!(c.is_empty(), "{c:?}");
    assert_eq!(d, DIRECTIVE_DEFAULT);
    // After a flag's value, subcommands of the current command again (none for info).
    let (c, d) = candidates(&words(&["info", "-o", "json", ""]));
    assert!(c.is_empty(), "{c:?}");
    assert_eq!(d, DIRECTIVE_NO_FILE);
    let (c, _) = candidates(&words(&["completion", "-"]));
    assert!(names(&c).contains(&"--help"), "{c:?}");
    // `--flag=value`: the value, as Cobra completes it.
    let (c, d) = candidates(&words(&["version", "--output=j"]));
    assert_eq!((names(&c), d), (vec!["json"], DIRECTIVE_NO_FILE));
    let (c, _) = candidates(&words(&["version", "--no-such=j"]));
    assert!(c.is_empty(), "{c:?}");
    // Positional values: the shells of `completion`, a directory for the bundle.
    let (c, d) = candidates(&words(&["completion", ""]));
    assert_eq!(
        (names(&c), d),
        (
            vec!["bash", "elvish", "fish", "powershell", "zsh"],
            DIRECTIVE_NO_FILE
        )
    );
    let (c, d) = candidates(&words(&["-v", "2", "migrate", "status", "-o", "json", ""]));
    assert_eq!((c.len(), d), (0, DIRECTIVE_FILTER_DIRS));
    let (c, d) = candidates(&words(&["migrate", ""]));
    assert!(names(&c).contains(&"import"), "{c:?}");
    assert_eq!(d, DIRECTIVE_NO_FILE);
}

#[test]
fn completion_prints_a_script_for_each_shell() {
    for (shell, mark) in [
        ("bash", "complete -F"),
        ("zsh", "#compdef kubectl-agent_day2"),
        ("fish", "complete -c kubectl-agent_day2"),
        ("powershell", "Register-ArgumentCompleter"),
        ("elvish", "edit:completion:arg-completer[kubectl-agent_day2]"),
    ] {
        let out = Command::new(BIN).args(["completion", shell]).output().unwrap();
        assert_eq!(
            out.status.code(),
            Some(0),
            "{shell}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let s = String::from_utf8(out.stdout).unwrap();
        assert!(s.contains(mark), "{shell} script lacks {mark:?}");
        assert!(s.contains("add-nodes"), "{shell} script lacks the subcommands");
    }
    let out = Command::new(BIN).args(["completion", "tcsh"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
}

/// `COMPREPLY` of the bash script of `completion bash` for the command line `line` (the cursor
/// at its end), run by the real bash through the function `complete -p` registered.
fn bash_complete(script: &Path, line: &str) -> Vec<String> {
    let prog = r#"
source "$1" || exit 9
spec=$(complete -p kubectl-agent_day2) || exit 8
f=${spec#*-F }; f=${f%% *}
COMP_LINE=$2; COMP_POINT=${#COMP_LINE}
read -ra COMP_WORDS <<<"$COMP_LINE"
[[ $COMP_LINE == *" " ]] && COMP_WORDS+=("")
COMP_CWORD=$(( ${#COMP_WORDS[@]} - 1 ))
COMPREPLY=()
"$f" kubectl-agent_day2 "${COMP_WORDS[COMP_CWORD]}" "${COMP_WORDS[COMP_CWORD-1]}"
printf '%s
' "${COMPREPLY[@]}"
"#;
    let out = Command::new("bash")
        .args(["--norc", "--noprofile", "-c", prog, "bash"])
        .arg(script)
        .arg(line)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{line:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .filter(|l| !l.is_empty())
        .map(String::from)
        .collect()
}

#[test]
fn bash_script_completes_past_the_first_word() {
    assert!(
        Command::new("bash").arg("--version").output().is_ok(),
        "needs bash"
    );
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("kubectl-agent_day2.bash");
    let out = Command::new(BIN).args(["completion", "bash"]).output().unwrap();
    assert_eq!(out.status.code(), Some(0));
    std::fs::write(&script, &out.stdout).unwrap();

    let top = bash_complete(&script, "kubectl-agent_day2 ");
    for want in ["approve", "migrate", "completion", "--context"] {
        assert!(top.iter().any(|c| c == want), "{want} missing: {top:?}");
    }
    assert!(
        !top.iter().any(|c| c.contains("__complete")),
        "the hidden command is offered: {top:?}"
    );
    assert_eq!(
        bash_complete(&script, "kubectl-agent_day2 __"),
        Vec::<String>::new()
    );
    // A subcommand's own flags (only the first word completed before).
    assert_eq!(
        bash_complete(&script, "kubectl-agent_day2 approve --b"),
        ["--batch"]
    );
    let shells = bash_complete(&script, "kubectl-agent_day2 completion ");
    for want in ["bash", "zsh", "fish", "powershell", "elvish"] {
        assert!(shells.iter().any(|c| c == want), "{want} missing: {shells:?}");
    }
    // Two levels down, a name with a `-`.
    let got = bash_complete(&script, "kubectl-agent_day2 add-nodes batch d");
    assert_eq!(got, ["delete"]);
    let got = bash_complete(&script, "kubectl-agent_day2 migrate node0-unit --pl");
    assert_eq!(got, ["--plugin"]);
}

#[test]
fn zsh_and_fish_scripts_define_every_function_they_call() {
    let script = |shell: &str| {
        let out = Command::new(BIN).args(["completion", shell]).output().unwrap();
        assert_eq!(out.status.code(), Some(0));
        String::from_utf8(out.stdout).unwrap()
    };
    let idents = |s: &str, prefix: &str| -> std::collections::BTreeSet<String> {
        s.match_indices(prefix)
            .map(|(i, _)| {
                s[i..]
                    .chars()
                    .take_while(|c| c.is_ascii_alphanumeric() || *c == '_' || *c == '-')
                    .collect()
            })
            .collect()
    };
    let zsh = script("zsh");
    assert!(!zsh.contains("__complete"), "zsh offers the hidden command");
    let defined: std::collections::BTreeSet<String> = zsh
        .lines()
        .filter_map(|l| l.strip_suffix("() {"))
        .map(String::from)
        .collect();
    assert!(
        defined.contains("_kubectl-agent_day2__subcmd__migrate_commands"),
        "{defined:?}"
    );
    for f in idents(&zsh, "_kubectl-agent_day2") {
        assert!(defined.contains(&f), "zsh calls {f}, which it does not define");
    }
    let fish = script("fish");
    assert!(!fish.contains("__complete"), "fish offers the hidden command");
    let defined: std::collections::BTreeSet<String> = fish
        .lines()
        .filter_map(|l| l.strip_prefix("function "))
        .map(|l| l.split_whitespace().next().unwrap().to_string())
        .collect();
    for f in idents(&fish, "__fish_kubectl") {
        assert!(defined.contains(&f), "fish calls {f}, which it does not define");
    }
    assert!(fish.contains("__fish_kubectl_agent_day2_using_subcommand approve\" -l batch"));
}

#[test]
fn completion_script_write_errors_do_not_panic() {
    // A full disk: an `error:` line and exit 1.
    if let Ok(full) = std::fs::OpenOptions::new().write(true).open("/dev/full") {
        for shell in ["bash", "elvish"] {
            let out = Command::new(BIN)
                .args(["completion", shell])
                .stdout(full.try_clone().unwrap())
                .output()
                .unwrap();
            let err = String::from_utf8_lossy(&out.stderr);
            assert_eq!(out.status.code(), Some(1), "{shell}: {err}");
            assert!(err.starts_with("error: "), "{shell}: {err}");
            assert!(!err.contains("panicked"), "{shell}: {err}");
        }
    } else {
        panic!("no /dev/full here (Linux has it)");
    }
    // A closed pipe (`| head` that already exited): quiet, exit 0.
    for shell in ["bash", "zsh", "fish", "powershell", "elvish"] {
        let (reader, writer) = std::io::pipe().unwrap();
        drop(reader);
        let out = Command::new(BIN)
            .args(["completion", shell])
            .stdout(writer)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(0), "{shell}: {err}");
        assert!(err.is_empty(), "{shell}: {err}");
    }
}

fn record(name: &str, hosts: &[(&str, &[&str])]) -> (String, Option<BatchRecord>) {
    let rec = BatchRecord {
        api_version: "agent-day2/v1".into(),
        kind: "Batch".into(),
        name: name.into(),
        created_at: "2026-11-29T21:10:34Z".into(),
        created_by: "kube:admin".into(),
        cluster_id: "c".into(),
        release_image: "r".into(),
        version: "4.18.12".into(),
        architecture: "x86_64".into(),
        pool: "worker".into(),
        node_labels: Default::default(),
        output_kind: "iso".into(),
        files: vec![],
        image_sha256: String::new(),
        token_expires_at: "2026-12-01T21:10:34Z".into(),
        hosts: hosts
            .iter()
            .map(|(h, ips)| BatchHost {
                hostname: h.to_string(),
                macs: vec![],
                ips: ips.iter().map(|i| i.to_string()).collect(),
                ip_source: if ips.is_empty() { "unknown" } else { "static" }.into(),
            })
            .collect(),
        approvals: vec![],
        reboots: vec![],
        embedded: 0,
    };
    (name.into(), Some(rec))
}

#[test]
fn cluster_candidates_from_batch_records() {
    let recs = vec![
        record("batch-a", &[("worker-0", &["192.168.111.30"]), ("worker-1", &[])]),
        record(
            "batch-b",
            &[
                ("worker-2", &["192.168.111.32", "fd00::32"]),
                ("worker-0", &["192.168.111.30"]),
            ],
        ),
        // Cluster text that would break the line protocol is left out.
        record("batch-c", &[("evil\tname\n:0", &["192.168.111.40"])]),
        ("not-a-record".into(), None),
        ("Bad\nName".into(), None),
    ];
    let c = cluster_candidates(&recs, ClusterValue::Batch, None);
    assert_eq!(names(&c), ["batch-a", "batch-b", "batch-c", "not-a-record"]);
    assert_eq!(c[0], "batch-a\t2 host(s), created 2026-11-29T21:10:34Z");
    let c = cluster_candidates(&recs, ClusterValue::Host, None);
    assert_eq!(
        names(&c),
        ["worker-0", "worker-1", "worker-2"],
        "one entry per host name"
    );
    let c = cluster_candidates(&recs, ClusterValue::HostAddress, Some("batch-b"));
    assert_eq!(
        names(&c),
        ["worker-0=192.168.111.30", "worker-2=192.168.111.32,fd00::32"]
    );
    let c = cluster_candidates(&recs, ClusterValue::HostAddress, Some("batch-a"));
    assert_eq!(
        names(&c),
        ["worker-0=192.168.111.30", "worker-1="],
        "DHCP host: NAME= only"
    );
    let c = cluster_candidates(&recs, ClusterValue::Address, None);
    assert_eq!(names(&c), ["192.168.111.30", "192.168.111.32", "fd00::32"]);
    assert!(
        c.iter()
            .all(|l| !l.contains('\n') && l.matches('\t').count() == 1),
        "{c:?}"
    );
}

#[test]
fn cluster_names_are_silent_and_quick_when_the_cluster_does_not_answer() {
    // A server that accepts connections and never answers: completion gives up after ~2 s.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let dir = tempfile::tempdir().unwrap();
    let kc = dir.path().join("kubeconfig");
    std::fs::write(
        &kc,
        format!(
            "apiVersion: v1\nkind: Config\ncurrent-context: c\nclusters:\n- name: c\n  cluster:\n    \
             server: https://{}\ncontexts:\n- name: c\n  context: {{cluster: c, user: u}}\nusers:\n- name: u\n  \
             user: {{token: x}}\n",
            listener.local_addr().unwrap()
        ),
    )
    .unwrap();
    for args in [
        &["approve", "--batch", ""][..],
        &["monitor", "--node", "w"][..],
        &["add-nodes", "batch", "delete", ""][..],
    ] {
        let start = Instant::now();
        let out = Command::new(BIN)
            .arg("__complete")
            .args(["--kubeconfig", kc.to_str().unwrap()])
            .args(args)
            .env_remove("KUBECONFIG")
            .stdin(Stdio::null())
            .output()
            .unwrap();
        let took = start.elapsed();
        assert_eq!(out.status.code(), Some(0), "{args:?}");
        assert_eq!(String::from_utf8_lossy(&out.stdout), ":4\n", "{args:?}");
        assert!(
            out.stderr.is_empty(),
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(
            took >= Duration::from_millis(1500) && took < Duration::from_secs(6),
            "{args:?}: {took:?}"
        );
    }
    // No kubeconfig at all: nothing, at once.
    let home = tempfile::tempdir().unwrap();
    let out = Command::new(BIN)
        .args(["__complete", "approve", "--reissue", ""])
        .env_remove("KUBECONFIG")
        .env("HOME", home.path())
        .output()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&out.stdout), ":4\n");
}

/// add-nodes against `c` for `hosts` (nodes-config text) with the release payload seeded in the
/// plugin's cache (as tests/monitor.rs does); returns the batch name.
fn add_nodes(c: &TestCluster, work: &Path, hosts: &str) -> String {
    let cv = c.kubectl(&["get", "clusterversion", "version", "-o", "json"]);
    assert!(cv.status.success(), "{}", String::from_utf8_lossy(&cv.stderr));
    let cv: Value = serde_json::from_slice(&cv.stdout).unwrap();
    let release = cv["status"]["history"]
        .as_array()
        .unwrap()
        .iter()
        .find(|h| h["state"] == "Completed")
        .and_then(|h| h["image"].as_str())
        .unwrap()
        .to_string();
    let digest = release.rsplit_once('@').unwrap().1.to_string();
    let img = |n: char| {
        format!(
            "quay.io/openshift-release-dev/ocp-v4.0-art-dev@sha256:{}",
            n.to_string().repeat(64)
        )
    };
    let imgs = json!({"apiServer": img('1'), "nodeAgent": img('2'), "orchestrator": img('3'), "utils": img('4'), "machineOsImages": null});
    let cache = work.join("cache");
    std::fs::create_dir_all(cache.join("agent-day2/releases")).unwrap();
    std::fs::write(
        cache.join(format!("agent-day2/releases/{digest}.json")),
        json!({"releaseImage": release, "platforms": {"x86_64": imgs}}).to_string(),
    )
    .unwrap();
    let nc = work.join("nodes-config.yaml");
    std::fs::write(&nc, format!("hosts:\n{hosts}")).unwrap();
    let out = Command::new(BIN)
        .args([
            "add-nodes",
            "--nodes-config",
            nc.to_str().unwrap(),
            "--force",
            "-o",
            "json",
        ])
        .args(["--dir", work.join("out").to_str().unwrap()])
        .env("KUBECONFIG", &c.kubeconfig)
        .env("XDG_CACHE_HOME", &cache)
        .env_remove("HTTPS_PROXY")
        .env_remove("https_proxy")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "add-nodes: {}\nsim log:\n{}",
        String::from_utf8_lossy(&out.stderr),
        c.log()
    );
    let r: Value = serde_json::from_slice(&out.stdout).unwrap();
    r["batch"]
        .as_str()
        .unwrap_or_else(|| panic!("no batch name in {r}"))
        .to_string()
}

fn static_host(h: &str, mac: &str, ip: &str) -> String {
    format!(
        "- hostname: {h}\n  rootDeviceHints:\n    deviceName: /dev/vda\n  interfaces:\n  - name: eth0\n    \
         macAddress: \"{mac}\"\n  networkConfig:\n    interfaces:\n    - name: eth0\n      type: ethernet\n      \
         state: up\n      mac-address: \"{mac}\"\n      ipv4:\n        enabled: true\n        dhcp: false\n        \
         address:\n        - ip: \"{ip}\"\n          prefix-length: 24\n"
    )
}

#[test]
fn kubectl_completes_batch_and_node_names_from_the_cluster() {
    agent_day2_sim::harness::require_netns();
    let c = TestCluster::start("").unwrap();
    let work = tempfile::tempdir().unwrap();
    let a = add_nodes(
        &c,
        work.path(),
        &format!(
            "{}- hostname: worker-1\n  interfaces:\n  - name: eth0\n    macAddress: \"52:54:00:aa:00:31\"\n",
            static_host("worker-0", "52:54:00:aa:00:30", "192.168.111.30")
        ),
    );
    let b = add_nodes(
        &c,
        work.path(),
        &static_host("worker-2", "52:54:00:aa:00:32", "192.168.111.32"),
    );
    assert_ne!(a, b);
    let env = [("KUBECONFIG", c.kubeconfig.as_path())];
    let complete = |args: &[&str]| kubectl_complete_env(args, &env);

    let Some(lines) = complete(&["agent-day2", "approve", "--batch", ""]) else {
        return;
    };
    let mut want = vec![a.as_str(), b.as_str()];
    want.sort();
    assert_eq!(names(&lines[..lines.len() - 1]), want, "{lines:?}");
    assert_eq!(lines.last().unwrap(), ":4");
    assert!(lines[0].contains("\t"), "a description: {lines:?}");

    // The prefix typed narrows; monitor --batch=... too.
    let lines = complete(&["agent-day2", "monitor", "--batch", &b[..b.len() - 2]]).unwrap();
    assert_eq!(names(&lines[..lines.len() - 1]), [b.as_str()], "{lines:?}");

    // Hosts of every batch, or of the --batch given before.
    let lines = complete(&["agent-day2", "approve", "--reissue", ""]).unwrap();
    assert_eq!(
        names(&lines[..lines.len() - 1]),
        ["worker-0", "worker-1", "worker-2"],
        "{lines:?}"
    );
    let lines = complete(&["agent-day2", "approve", "--batch", &a, "--reissue", "w"]).unwrap();
    assert_eq!(
        names(&lines[..lines.len() - 1]),
        ["worker-0", "worker-1"],
        "{lines:?}"
    );

    // --node NAME=IP: the recorded address, or NAME= for the DHCP host (no space after it).
    let lines = complete(&["agent-day2", "monitor", "--node", ""]).unwrap();
    assert_eq!(
        names(&lines[..lines.len() - 1]),
        ["worker-0=192.168.111.30", "worker-1=", "worker-2=192.168.111.32"],
        "{lines:?}"
    );
    assert_eq!(
        lines.last().unwrap(),
        &format!(":{}", DIRECTIVE_NO_FILE | DIRECTIVE_NO_SPACE)
    );
    let lines = complete(&["agent-day2", "approve", "--node", "worker-2"]).unwrap();
    assert_eq!(
        lines,
        ["worker-2=192.168.111.32\tbatch ".to_string() + &b, ":4".into()]
    );
    let lines = complete(&["agent-day2", "approve", "--batch=batch-"]).unwrap();
    assert_eq!(names(&lines[..lines.len() - 1]), want, "--batch=: {lines:?}");
    let lines = complete(&["agent-day2", "monitor", "--ip-addresses", "192.168.111.3"]).unwrap();
    assert_eq!(
        names(&lines[..lines.len() - 1]),
        ["192.168.111.30", "192.168.111.32"],
        "{lines:?}"
    );

    // batch delete: names not typed yet.
    let lines = complete(&["agent-day2", "add-nodes", "batch", "delete", &a, ""]).unwrap();
    assert_eq!(names(&lines[..lines.len() - 1]), [b.as_str()], "{lines:?}");

    // The connection flags on the line are used: a context that does not exist gives nothing.
    let lines = complete(&["agent-day2", "approve", "--context", "nope", "--batch", ""]).unwrap();
    assert_eq!(lines, [":4"]);
    let lines = complete(&["agent-day2", "--context=nope", "monitor", "--node", ""]).unwrap();
    assert_eq!(lines, [":4"]);
    // ...and --kubeconfig FILE without KUBECONFIG.
    let lines = kubectl_complete_env(
        &[
            "agent-day2",
            "approve",
            "--kubeconfig",
            c.kubeconfig.to_str().unwrap(),
            "--batch",
            "",
        ],
        &[],
    )
    .unwrap();
    assert_eq!(names(&lines[..lines.len() - 1]), want, "{lines:?}");
}
