//! `migrate wait DIR`: poll cluster 0 until the completion record of this bundle's import is
//! `complete` (run on node 0 before its reboot, e.g. from the unit of [`super::unit`]).
//!
//! The record is ConfigMap `agent-day2-migration` in the CR namespace ([`super::record`]);
//! "this bundle" is its checksum. While cluster 0 cannot be reached (it is still coming up, or
//! node 0 is cut off) the wait goes on and says so on stderr (once, then once a minute), until
//! `--timeout` (exit 5).

use std::time::{Duration, Instant};

use super::bundle::Bundle;
use super::record::{self, Phase};
use crate::cluster::classify;
use crate::error::{exit, Error, ResourceRef};
use crate::kube_flags::{parse_duration, KubeFlags};

/// Longest single poll.
const POLL_MAX: Duration = Duration::from_secs(30);

/// How often the "unreachable, retrying" line is repeated.
const REPEAT_EVERY: Duration = Duration::from_secs(60);

/// `migrate wait`.
pub async fn run(kube: &KubeFlags, args: &super::WaitArgs) -> Result<u8, Error> {
    let timeout = parse_duration(&args.timeout)
        .map_err(|e| Error::Usage(format!("--timeout {:?}: {e}", args.timeout)))?;
    let interval = parse_duration(&args.interval)
        .map_err(|e| Error::Usage(format!("--interval {:?}: {e}", args.interval)))?
        .unwrap_or(Duration::from_secs(1));
    let start = Instant::now();
    let bundle = Bundle::open(&args.bundle)?;
    let crs = super::import::read_crs(&bundle)?;
    let ns = super::import::default_namespace(&bundle, &crs, kube.namespace.as_deref());
    let target = kube.resolve().await?;
    let sum = bundle.checksum().to_string();
    let rref = ResourceRef::namespaced("ConfigMap", &ns, record::RECORD_NAME);
    eprintln!(
        "migrate: {}",
        crate::output::escape_for_display(
            &format!("waiting for {rref} to be complete for bundle {sum}"),
            2000
        )
    );
    let mut last_said: Option<(String, Instant)> = None;
    let mut say = |what: String| {
        let now = Instant::now();
        let repeat = match &last_said {
            Some((w, t)) => *w != what || now.duration_since(*t) >= REPEAT_EVERY,
            None => true,
        };
        if repeat {
            eprintln!("migrate: {}", crate::output::escape_for_display(&what, 2000));
            last_said = Some((what, now));
        }
    };
    loop {
        let remaining = timeout.map(|t| t.saturating_sub(start.elapsed()));
        let poll = record::read(&target.client, &ns);
        // One poll never outlives the timeout, nor hangs on a silent network.
        let bound = remaining
            .map_or(POLL_MAX, |r| r.min(POLL_MAX))
            .max(Duration::from_millis(1));
        let res = tokio::time::timeout(bound, poll).await.ok();
        match res {
            Some(Ok(Some((rec, _)))) if rec.is_of(&sum) && rec.phase == Phase::Complete => {
                println!(
                    "cluster 0 holds the data of cluster {} ({}): import complete at {}",
                    crate::output::display(&rec.cluster_name),
                    crate::output::display(&rec.cluster_id),
                    crate::output::display(rec.completed.as_deref().unwrap_or("?"))
                );
                return Ok(0);
            }
            Some(Ok(Some((rec, _)))) if rec.is_of(&sum) => say(format!(
                "import in progress (done: {})",
                if rec.steps_done.is_empty() {
                    "nothing yet".into()
                } else {
                    rec.steps_done.join(", ")
                }
            )),
            Some(Ok(Some((rec, _)))) => say(format!(
                "{rref} is of another bundle ({}); waiting for this one's",
                rec.bundle_sha256
            )),
            Some(Ok(None)) => say(format!("no {rref} yet (import not started)")),
            Some(Err(record::ReadError::Bad(e))) => say(format!("{e}; retrying")),
            Some(Err(record::ReadError::Kube(e))) => {
                let e = classify(e, "read", rref.clone(), &target);
                match e {
                    Error::Unreachable { .. } | Error::Timeout(_) => {
                        say("cluster 0 unreachable, retrying".into())
                    }
                    other => say(format!(
                        "{}; retrying",
                        other.to_string().lines().next().unwrap_or("")
                    )),
                }
            }
            None => say("cluster 0 unreachable, retrying".into()),
        }
        let remaining = timeout.map(|t| t.saturating_sub(start.elapsed()));
        if remaining.is_some_and(|r| r.is_zero()) {
            // Printed here: Error::Timeout's hint is about single API requests.
            eprintln!(
                "error: timed out: {} not complete for bundle {sum} after --timeout {}",
                crate::output::display(&rref.to_string()),
                args.timeout
            );
            return Ok(exit::TIMEOUT);
        }
        let nap = remaining.map_or(interval, |r| r.min(interval));
        tokio::time::sleep(nap).await;
    }
}
