//! A registry that accepts connections and then says nothing: each request is bounded by the
//! request timeout, and every retry is announced on stderr (`waiting for registry X (retry
//! N/M ...)`) instead of a silent multi-minute wait. Runs in its own network namespace (root).

use std::io::Read;
use std::net::TcpListener;
use std::process::Command;
use std::time::{Duration, Instant};

use agent_day2::registry::{RegistryContext, RegistryError, ReleasePayload, RetryPolicy};

const STALL: &str = "192.168.111.7:5000";
const CHILD_ENV: &str = "AGENT_DAY2_TEST_STALL_CHILD";

/// The scenario itself; run in a child process so its stderr can be checked.
fn stalled_registry_scenario() {
    agent_day2_sim::harness::require_netns();
    let l = TcpListener::bind(STALL).unwrap();
    // Accept and hold every connection without answering.
    std::thread::spawn(move || {
        let mut held = Vec::new();
        for s in l.incoming().flatten() {
            let mut s2 = s.try_clone().unwrap();
            std::thread::spawn(move || {
                let mut b = [0u8; 4096];
                while matches!(s2.read(&mut b), Ok(n) if n > 0) {}
            });
            held.push(s);
        }
    });
    let cache = tempfile::tempdir().unwrap();
    let ctx = RegistryContext {
        arch: "x86_64".into(),
        cache_dir: Some(cache.path().to_path_buf()),
        retry: RetryPolicy {
            attempts: 3,
            initial_backoff: Duration::from_millis(50),
            max_backoff: Duration::from_millis(100),
        },
        request_timeout: Some(Duration::from_secs(1)),
        ..Default::default()
    };
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let release = format!("{STALL}/ocp/release@sha256:{}", "a".repeat(64));
    let t = Instant::now();
    let err = rt
        .block_on(ReleasePayload::component_images(&release, &ctx))
        .unwrap_err();
    let took = t.elapsed();
    let msg = err.to_string();
    assert!(
        matches!(
            err,
            RegistryError::Unavailable { .. } | RegistryError::AllSourcesFailed { .. }
        ),
        "{msg}"
    );
    assert!(
        msg.contains("no answer within 1 s") && msg.contains("3 tries"),
        "{msg}"
    );
    // 3 tries of 1 s plus 150 ms of backoff, not the minutes of the old 60 s read timeout.
    assert!(took < Duration::from_secs(6), "took {took:?}");
    println!("SCENARIO-DONE");
}

#[test]
fn stalled_registry_requests_are_bounded_and_announced() {
    if std::env::var_os(CHILD_ENV).is_some() {
        stalled_registry_scenario();
        return;
    }
    let out = Command::new(std::env::current_exe().unwrap())
        .args([
            crate::test_name(
                module_path!(),
                "stalled_registry_requests_are_bounded_and_announced",
            )
            .as_str(),
            "--exact",
            "--nocapture",
            "--test-threads",
            "1",
        ])
        .env(CHILD_ENV, "1")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success() && stdout.contains("SCENARIO-DONE"),
        "stdout:\n{stdout}\nstderr:\n{stderr}"
    );
    for n in [1, 2] {
        let line = format!("waiting for registry {STALL} (retry {n}/2 in ");
        assert!(stderr.contains(&line), "missing {line:?} in\n{stderr}");
    }
    assert!(
        stderr.contains("no answer within 1 s (--request-timeout)"),
        "{stderr}"
    );
}
