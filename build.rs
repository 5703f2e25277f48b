// Build facts for `version` (src/version.rs), as rustc-env variables:
// - AGENT_DAY2_GIT_COMMIT: `git rev-parse --short=12 HEAD`, unless the environment sets it;
// - AGENT_DAY2_BUILD_DATE: RFC 3339 UTC from SOURCE_DATE_EPOCH (reproducible builds), else the
//   time this script ran (it re-runs when HEAD moves or these variables change);
// - AGENT_DAY2_K8S_API: the Kubernetes API version k8s-openapi was built for (`1.37`), from its
//   `DEP_K8S_OPENAPI_*_VERSION` (0x00_MM_NN_00; k8s-openapi's documented way, src/lib.rs).
// And two cfgs for the tests:
// - `real_assisted`, when AGENT_DAY2_REAL_ASSISTED=1: scripts/test.sh sets it once
//   scripts/real-components.sh built the real assisted-service and linked its source tree. The
//   tests that need them are `#[cfg_attr(not(real_assisted), ignore = "...")]`: run (never
//   ignored) where the real service is there, counted as ignored elsewhere. A test run with the
//   variable set and the binaries missing fails; it does not skip.
// - `real_agent`, when AGENT_DAY2_REAL_AGENT=1 (the real discovery agent, group `agent`), the
//   same way, for the tests that judge what only the real agent reports.
// - `real_krew`, when AGENT_DAY2_REAL_KREW=1 (the real krew, group `krew`), the same way, for
//   tests/krew.rs's installs through `kubectl krew`.
fn main() {
    println!("cargo:rerun-if-env-changed=AGENT_DAY2_GIT_COMMIT");
    println!("cargo:rerun-if-env-changed=SOURCE_DATE_EPOCH");
    // A path that does not exist would re-run this script (and rebuild the crate) every time:
    // outside a plain checkout (a tarball, a `git worktree`) watch only this file.
    if std::path::Path::new(".git/HEAD").exists() {
        println!("cargo:rerun-if-changed=.git/HEAD");
    } else {
        println!("cargo:rerun-if-changed=build.rs");
    }
    git_commit();
    build_date();
    k8s_api();
    real_assisted();
}

fn real_assisted() {
    for (var, cfg, what) in [
        (
            "AGENT_DAY2_REAL_ASSISTED",
            "real_assisted",
            "the real assisted-service",
        ),
        ("AGENT_DAY2_REAL_AGENT", "real_agent", "the real discovery agent"),
        ("AGENT_DAY2_REAL_KREW", "real_krew", "the real krew"),
    ] {
        println!("cargo::rustc-check-cfg=cfg({cfg})");
        println!("cargo:rerun-if-env-changed={var}");
        match std::env::var(var).as_deref() {
            Ok("1") => println!("cargo:rustc-cfg={cfg}"),
            Ok("") | Ok("0") | Err(_) => {}
            Ok(v) => panic!("{var}={v:?}: give 1 ({what} is built) or 0"),
        }
    }
}

fn git_commit() {
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

fn build_date() {
    let secs = match std::env::var("SOURCE_DATE_EPOCH") {
        Ok(s) => s
            .trim()
            .parse::<i64>()
            .unwrap_or_else(|_| panic!("SOURCE_DATE_EPOCH={s:?} is not a number of seconds")),
        Err(_) => std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs() as i64)
            .unwrap_or(0),
    };
    let (days, rem) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    let (y, m, d) = civil_from_days(days);
    println!(
        "cargo:rustc-env=AGENT_DAY2_BUILD_DATE={y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    );
}

/// Days since 1970-01-01 → (year, month, day), proleptic Gregorian (H. Hinnant's algorithm).
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

fn k8s_api() {
    let v = std::env::vars()
        .find_map(|(k, v)| (k.starts_with("DEP_K8S_OPENAPI_") && k.ends_with("_VERSION")).then_some(v));
    let Some(v) = v.and_then(|v| v.trim().parse::<u32>().ok()) else {
        panic!("k8s-openapi did not report its Kubernetes version (DEP_K8S_OPENAPI_*_VERSION)");
    };
    println!(
        "cargo:rustc-env=AGENT_DAY2_K8S_API={}.{}",
        (v >> 16) & 0xff,
        (v >> 8) & 0xff
    );
}
