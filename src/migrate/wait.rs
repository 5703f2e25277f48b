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
use crate::error::{exit, Error, ResourceRef};
use crate::kube::classify;
use crate::kube::Resolve;

/// Longest single poll.
const POLL_MAX: Duration = Duration::from_secs(30);

/// How often the "unreachable, retrying" line is repeated.
const REPEAT_EVERY: Duration = Duration::from_secs(60);

/// Refuses a bundle whose cluster has one control-plane node (SNO, with or without workers:
/// the AgentClusterInstall's `spec.provisionRequirements.controlPlaneAgents` is 1). There node 0
/// is cluster 0's only control-plane node: cluster 0's API, and so its assisted-service, exist
/// only after node 0 has rebooted (assisted-installer reboots a single node at once,
/// docs/migrate.md "Node 0 and cluster 0"), so a wait held before that reboot would hold it for
/// ever. Errors: [`Error::InvalidInput`] (exit 3) saying what to do instead.
pub fn refuse_single_control_plane(crs: &[serde_json::Value]) -> Result<(), Error> {
    let single = crs.iter().any(|o| {
        o["kind"] == "AgentClusterInstall" && o["spec"]["provisionRequirements"]["controlPlaneAgents"] == 1
    });
    if !single {
        return Ok(());
    }
    Err(Error::InvalidInput {
        field: "bundle crs/crs.json AgentClusterInstall spec.provisionRequirements.controlPlaneAgents".into(),
        message: "1: a single-node cluster, where node 0 is cluster 0's only control-plane node; cluster 0 \
                  can hold nothing before node 0 reboots, so waiting would hold that reboot for ever; keep \
                  the bundle off node 0, let node 0 reboot (no node0-unit), then run migrate import \
                  against the installed cluster"
            .into(),
    })
}

/// `migrate wait`.
pub async fn run(resolve: Resolve, args: &super::plan::Wait) -> Result<u8, Error> {
    let (timeout, interval) = (args.timeout, args.interval);
    let start = Instant::now();
    let bundle = Bundle::open(&args.bundle)?;
    let crs = super::import::read_crs(&bundle)?;
    refuse_single_control_plane(&crs)?;
    let (ns, explicit) = super::import::namespace_for(&bundle, &crs, args.namespace.as_deref())?;
    let target = resolve().await?;
    let sum = bundle.checksum().to_string();
    let rref = ResourceRef::namespaced("ConfigMap", &ns, record::RECORD_NAME);
    crate::say!(
        "migrate: {}",
        crate::output::escape_for_display(
            &format!("waiting for {rref} to be complete for bundle {sum}"),
            2000
        )
    );
    let mut last_said: Option<(String, Instant)> = None;
    // The cause of the last poll that did not find the import complete (for the timeout error).
    let mut last_cause = String::from("no poll finished");
    // What the last finished poll found, for the timeout's hint.
    let mut last_poll = LastPoll::Nothing;
    let mut say = |what: String, last_cause: &mut String| {
        *last_cause = what.clone();
        let now = Instant::now();
        let repeat = match &last_said {
            Some((w, t)) => *w != what || now.duration_since(*t) >= REPEAT_EVERY,
            None => true,
        };
        if repeat {
            crate::say!("migrate: {}", crate::output::escape_for_display(&what, 2000));
            last_said = Some((what, now));
        }
    };
    loop {
        let remaining = timeout.map(|t| t.saturating_sub(start.elapsed()));
        let poll = record::read(&target.client, &ns);
        // One poll never outlives the timeout, nor hangs on a silent network.
        let cut_by_deadline = remaining.is_some_and(|r| r < POLL_MAX);
        let bound = remaining
            .map_or(POLL_MAX, |r| r.min(POLL_MAX))
            .max(Duration::from_millis(1));
        let res = tokio::time::timeout(bound, poll).await.ok();
        match res {
            // Only a record import writes (its label) counts; see docs/migrate.md "Limits of migrate".
            Some(Ok(Some((_, cm)))) if !has_record_label(&cm) => {
                last_poll = LastPoll::Other;
                say(
                    format!(
                        "{rref} has no label {}=true: not a record migrate import wrote; waiting",
                        record::RECORD_LABEL
                    ),
                    &mut last_cause,
                )
            }
            Some(Ok(Some((rec, _)))) if rec.is_of(&sum) && rec.phase == Phase::Complete => {
                crate::output::emit(&format!(
                    "cluster 0 holds the data of cluster {} ({}): import complete at {}\n",
                    crate::output::display(&rec.cluster_name),
                    crate::output::display(&rec.cluster_id),
                    crate::output::display(rec.completed.as_deref().unwrap_or("?"))
                ));
                return Ok(0);
            }
            Some(Ok(Some((rec, _)))) if rec.is_of(&sum) => {
                last_poll = LastPoll::Other;
                say(
                    format!(
                        "import in progress (done: {})",
                        if rec.steps_done.is_empty() {
                            "nothing yet".into()
                        } else {
                            rec.steps_done.join(", ")
                        }
                    ),
                    &mut last_cause,
                )
            }
            Some(Ok(Some((rec, _)))) => {
                last_poll = LastPoll::NoRecordOfThisBundle;
                say(
                    format!(
                        "{rref} is of another bundle ({}); waiting for this one's",
                        rec.bundle_sha256
                    ),
                    &mut last_cause,
                )
            }
            Some(Ok(None)) => {
                last_poll = LastPoll::NoRecordOfThisBundle;
                say(
                format!(
                    "no record ConfigMap {} in namespace {ns} yet (import not started, or it used another namespace)",
                    record::RECORD_NAME
                ),
                &mut last_cause,
            )
            }
            Some(Err(record::ReadError::Bad(e))) => {
                last_poll = LastPoll::Other;
                say(format!("{e}; retrying"), &mut last_cause)
            }
            Some(Err(record::ReadError::Kube(e))) => {
                let e = classify(e, "read", rref.clone(), &target);
                let first = e.to_string().lines().next().unwrap_or("").to_string();
                last_poll = match &e {
                    Error::Unreachable { .. } => LastPoll::Unreachable,
                    _ => LastPoll::Other,
                };
                match e {
                    Error::Unreachable { .. } => {
                        say("cluster 0 unreachable, retrying".into(), &mut last_cause);
                        last_cause = format!("cluster 0 unreachable: {first}");
                    }
                    _ => say(format!("{first}; retrying"), &mut last_cause),
                }
            }
            // The deadline cut this poll short: that says nothing about cluster 0.
            None if cut_by_deadline => {}
            None => {
                last_poll = LastPoll::Unreachable;
                say(
                    format!(
                        "cluster 0 did not answer within {}s, retrying",
                        POLL_MAX.as_secs()
                    ),
                    &mut last_cause,
                )
            }
        }
        let remaining = timeout.map(|t| t.saturating_sub(start.elapsed()));
        if remaining.is_some_and(|r| r.is_zero()) {
            // Printed here: Error::Timeout's hint is about single API requests.
            let esc = |t: &str| crate::output::escape_for_display(t, 4000);
            crate::say!(
                "error: {}",
                esc(&format!(
                    "timed out after --timeout {}: {rref} not complete for bundle {sum}; last: {last_cause}",
                    args.timeout_text
                ))
            );
            if let Some(hint) = timeout_hint(last_poll, &ns, explicit) {
                crate::say!("  hint: {}", esc(&hint));
            }
            return Ok(exit::TIMEOUT);
        }
        let nap = remaining.map_or(interval, |r| r.min(interval));
        tokio::time::sleep(nap).await;
    }
}

/// What the last finished poll of `wait` found: the timeout's hint follows from it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LastPoll {
    /// No poll finished.
    Nothing,
    /// No record, or the record of another bundle: the namespace may be the wrong one.
    NoRecordOfThisBundle,
    /// Cluster 0 did not answer (connection refused, DNS, TLS, or no answer in time).
    Unreachable,
    /// Anything else (import in progress, a bad record, a refused read): the last cause says it.
    Other,
}

/// The hint under `wait`'s timeout error, if one helps (issue 22 item 10: an unreachable
/// cluster got the `-n` hint, which cannot help there).
pub fn timeout_hint(last: LastPoll, ns: &str, explicit: bool) -> Option<String> {
    match last {
        LastPoll::NoRecordOfThisBundle => Some(super::import::namespace_hint(ns, explicit)),
        LastPoll::Unreachable | LastPoll::Nothing => Some(
            "cluster 0's API server did not answer: check the server address of the kubeconfig \
             and that it is reachable from here (oc --kubeconfig FILE get --raw /readyz)"
                .into(),
        ),
        LastPoll::Other => None,
    }
}

/// Whether the ConfigMap carries the record label (`agent-day2.openshift.io/migration=true`)
/// that import sets.
pub fn has_record_label(cm: &k8s_openapi::api::core::v1::ConfigMap) -> bool {
    cm.metadata
        .labels
        .as_ref()
        .and_then(|l| l.get(record::RECORD_LABEL))
        .is_some_and(|v| v == "true")
}

#[cfg(test)]
mod label_tests {
    use super::*;

    #[test]
    fn a_single_control_plane_bundle_is_refused_and_a_compact_one_is_not() {
        let aci = |cp: u64, w: u64| {
            vec![serde_json::json!({"kind": "AgentClusterInstall",
                "spec": {"provisionRequirements": {"controlPlaneAgents": cp, "workerAgents": w}}})]
        };
        for (cp, w) in [(1, 0), (1, 2)] {
            let e = refuse_single_control_plane(&aci(cp, w)).unwrap_err();
            assert_eq!(e.exit_code(), 3, "{e}");
            assert!(
                e.to_string().contains("single-node") && e.to_string().contains("migrate import"),
                "{e}"
            );
        }
        assert!(refuse_single_control_plane(&aci(3, 0)).is_ok());
        assert!(refuse_single_control_plane(&[]).is_ok());
    }

    #[test]
    fn the_timeout_hint_follows_the_last_poll() {
        let ns_hint = timeout_hint(LastPoll::NoRecordOfThisBundle, "ostest", false).unwrap();
        assert!(ns_hint.contains("pass the same -n"), "{ns_hint}");
        let down = timeout_hint(LastPoll::Unreachable, "ostest", false).unwrap();
        assert!(down.contains("did not answer") && !down.contains("-n"), "{down}");
        assert_eq!(timeout_hint(LastPoll::Other, "ostest", true), None);
    }

    #[test]
    fn only_a_labelled_config_map_is_a_record() {
        let r = record::Record::new("x", "c", "n", serde_json::Value::Null);
        let mut cm = r.to_config_map("ns");
        assert!(has_record_label(&cm));
        cm.metadata
            .labels
            .as_mut()
            .unwrap()
            .insert(record::RECORD_LABEL.into(), "false".into());
        assert!(!has_record_label(&cm));
        cm.metadata.labels = None;
        assert!(!has_record_label(&cm));
    }
}
