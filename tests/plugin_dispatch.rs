//! Plugin dispatch through the real kubectl on this machine: the built binary is linked into a
//! temporary PATH directory as `kubectl-agent_day2`, then `kubectl agent-day2 ...` and
//! `kubectl plugin list` must find and run it. Fails, naming what to install, when kubectl is
//! absent (scripts/test.sh installs it; no test passes by skipping).

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use agent_day2_sim::harness::TestCluster;

const BIN: &str = env!("CARGO_BIN_EXE_kubectl-agent_day2");

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// A temp dir holding `kubectl-agent_day2` (a copy of the built binary) and the PATH that puts
/// it first. None when kubectl is not installed.
fn plugin_path() -> Option<(tempfile::TempDir, OsString)> {
    if Command::new("kubectl")
        .arg("version")
        .arg("--client")
        .output()
        .is_err()
    {
        return None;
    }
    let dir = tempfile::tempdir().unwrap();
    std::fs::copy(BIN, dir.path().join("kubectl-agent_day2")).unwrap();
    let mut paths: Vec<PathBuf> = vec![dir.path().to_path_buf()];
    paths.extend(std::env::split_paths(
        &std::env::var_os("PATH").unwrap_or_default(),
    ));
    let path = std::env::join_paths(paths).unwrap();
    Some((dir, path))
}

fn kubectl(path: &OsString, home: &Path, args: &[&str], kubeconfig: Option<&Path>) -> Output {
    let mut c = Command::new("kubectl");
    c.args(args)
        .env("PATH", path)
        .env("HOME", home)
        .env_remove("KUBECONFIG");
    if let Some(k) = kubeconfig {
        c.env("KUBECONFIG", k);
    }
    c.output().unwrap()
}

#[test]
fn kubectl_finds_and_runs_the_plugin() {
    let (dir, path) = plugin_path().expect("needs kubectl: apt-get install kubernetes-client (scripts/test.sh installs it through scripts/setup.sh)");
    let home = tempfile::tempdir().unwrap();
    let out = kubectl(&path, home.path(), &["plugin", "list"], None);
    let listed = text(&out.stdout);
    let ours = dir.path().join("kubectl-agent_day2");
    assert!(
        listed.lines().any(|l| l.trim() == ours.display().to_string()),
        "plugin list:\n{listed}\n{}",
        text(&out.stderr)
    );

    let out = kubectl(&path, home.path(), &["agent-day2", "--help"], None);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(text(&out.stdout).contains("Usage: oc agent-day2"));
    // kubectl's underscore spelling reaches the same file.
    let out = kubectl(&path, home.path(), &["agent_day2", "version", "-o", "json"], None);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["kind"], "Version");
    // kubectl passes our exit codes through: a usage error stays 2.
    let out = kubectl(&path, home.path(), &["agent-day2", "info", "--bogus"], None);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
}

#[test]
fn kubectl_agent_day2_info_against_the_simulator() {
    let (_dir, path) = plugin_path().expect("needs kubectl: apt-get install kubernetes-client (scripts/test.sh installs it through scripts/setup.sh)");
    agent_day2_sim::harness::require_netns();
    let c = TestCluster::start("").unwrap();
    let home = tempfile::tempdir().unwrap();
    // KUBECONFIG reaches the plugin untouched.
    let out = kubectl(
        &path,
        home.path(),
        &["agent-day2", "info", "-o", "json"],
        Some(&c.kubeconfig),
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let d: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(d["cluster"]["name"], "ostest");
    // --kubeconfig and --context after the plugin name are ours to parse.
    let kc = c.kubeconfig.to_str().unwrap();
    let out = kubectl(
        &path,
        home.path(),
        &["agent-day2", "info", "--kubeconfig", kc, "--context", "viewer"],
        None,
    );
    assert_eq!(out.status.code(), Some(4), "{}", text(&out.stderr));
    assert!(text(&out.stdout).contains("Missing permissions"));
    assert!(text(&out.stderr).contains("cannot read Secret openshift-config/pull-secret: forbidden"));
}
