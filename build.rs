// Records the git commit for `version` (AGENT_DAY2_GIT_COMMIT), unless the environment sets it.
fn main() {
    println!("cargo:rerun-if-env-changed=AGENT_DAY2_GIT_COMMIT");
    println!("cargo:rerun-if-changed=.git/HEAD");
    if std::env::var("AGENT_DAY2_GIT_COMMIT").is_ok() {
        return;
    }
    if let Ok(head) = std::fs::read_to_string(".git/HEAD") {
        if let Some(r) = head.trim().strip_prefix("ref: ") {
            println!("cargo:rerun-if-changed=.git/{r}");
        }
    }
    let out = std::process::Command::new("git")
        .args(["rev-parse", "--short=12", "HEAD"])
        .output();
    if let Ok(o) = out {
        if o.status.success() {
            let c = String::from_utf8_lossy(&o.stdout).trim().to_string();
            println!("cargo:rustc-env=AGENT_DAY2_GIT_COMMIT={c}");
        }
    }
}
