//! Shell completion: kubectl's plugin completion protocol through the real kubectl (which runs
//! scripts/kubectl_complete-agent_day2 from PATH), the candidates themselves, and the
//! `completion SHELL` scripts.

use std::ffi::OsString;
use std::path::PathBuf;
use std::process::Command;

use agent_day2::completion::{candidates, DIRECTIVE_DEFAULT, DIRECTIVE_NO_FILE};

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
    if Command::new("kubectl")
        .args(["version", "--client"])
        .output()
        .is_err()
    {
        eprintln!("skipped: kubectl is not installed");
        return None;
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
}

#[test]
fn completion_prints_a_script_for_each_shell() {
    for (shell, mark) in [
        ("bash", "complete -F"),
        ("zsh", "#compdef kubectl-agent_day2"),
        ("fish", "complete -c kubectl-agent_day2"),
        ("powershell", "Register-ArgumentCompleter"),
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
