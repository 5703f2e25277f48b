//! How a monitor run ends: the closing hints (pure: which nodes wait on a CSR and why, which
//! failed, what a timeout means for the exit code) and the summary itself, a table and `hint:`
//! lines, or one `summary` event with `-o json` (docs/monitor.md, docs/exit-codes.md).

use std::time::Duration;

use serde_json::json;

use super::output::{Event, Format, Out};
use super::state::{Stage, Track};
use crate::approve::cmd::Waiting;
use crate::assisted::LimiterStats;
use crate::error::exit;

/// How the run ended: each followed node's exit code (in the order of the tracks), the run's,
/// whether `--timeout` ended it, and the times.
pub struct Ending {
    /// Per track, its exit code (`state::track_exit`).
    pub codes: Vec<u8>,
    /// The run's exit code: the most serious of `codes` and of what else went wrong.
    pub code: u8,
    pub timed_out: bool,
    /// `--timeout`.
    pub timeout: Duration,
    /// Since the run started.
    pub elapsed: Duration,
}

/// The closing hints, each said once, in this order: why the approver holds a node's CSR
/// (`held`: approve's own `waiting:` words, for nodes that wait on a CSR), the nodes whose CSRs
/// wait on nobody's decision but approve's, the failed nodes (exit 6) and what to do, the
/// timeout and its exit code (7 wins over 5 when a node waits on a CSR, docs/exit-codes.md
/// "When several apply"), and the hosts whose address is unknown. `gather`: `--gather` given.
pub fn closing_hints(tracks: &[Track], end: &Ending, held: &[Waiting], gather: bool) -> Vec<String> {
    let pending: Vec<&Track> = tracks
        .iter()
        .zip(&end.codes)
        .filter(|(_, c)| **c == exit::CSRS)
        .map(|(t, _)| t)
        .collect();
    let held: Vec<&Waiting> = held
        .iter()
        .filter(|w| {
            w.waits_for.ends_with("-rejected")
                || w.waits_for.ends_with("-held")
                || w.waits_for.ends_with("-not-approved")
        })
        .filter(|w| pending.iter().any(|t| t.name == w.node))
        .collect();
    let mut hints: Vec<String> = held.iter().map(|w| w.message.clone()).collect();
    let unexplained: Vec<&str> = pending
        .iter()
        .filter(|t| !held.iter().any(|w| w.node == t.name))
        .map(|t| t.name.as_str())
        .collect();
    if !unexplained.is_empty() {
        hints.push(format!(
            "CSRs of {} are pending approval: run `oc agent-day2 approve` (or monitor --approve)",
            unexplained.join(", ")
        ));
    }
    let failed: Vec<&str> = tracks
        .iter()
        .filter(|t| t.now().0 == Stage::Failed)
        .map(|t| t.name.as_str())
        .collect();
    if !failed.is_empty() {
        // The closing line that says what exit 6 means and what to do (issue 22 trial finding:
        // the run ended with exit 6 and no word of it).
        hints.push(format!(
            "{} failed to install (exit 6; the reason is on {} row above): fix the cause, then boot {} again from {} image before its tokens expire, or make a new one with add-nodes{}",
            failed.join(", "),
            if failed.len() == 1 { "its" } else { "each" },
            if failed.len() == 1 { "it" } else { "them" },
            if failed.len() == 1 { "its" } else { "their" },
            if gather { "" } else { "; --gather DIR saves a failed host's logs" }
        ));
    }
    if end.timed_out {
        // docs/exit-codes.md "When several apply": each node has its own code, the run the
        // most serious; a node waiting on its CSRs is 7 even though the timeout ended the run.
        let all_on_csrs = end.codes.iter().all(|c| *c == exit::OK || *c == exit::CSRS);
        hints.push(if end.code == exit::CSRS && all_on_csrs {
            format!(
                "timed out after {}; every node not done waits on a CSR, so the exit code is 7 (CSRs), not 5",
                humanize(end.timeout)
            )
        } else if end.code == exit::CSRS {
            format!(
                "timed out after {}; the nodes waiting on a CSR make the exit code 7 (CSRs), the others were still short of that",
                humanize(end.timeout)
            )
        } else {
            format!("timed out after {}", humanize(end.timeout))
        });
    }
    for t in tracks.iter().filter(|t| t.ip.is_none() && !t.finished()) {
        hints.push(format!(
            "{}: address unknown (DHCP): pass --ip-addresses IP to follow its installation",
            t.name
        ));
    }
    hints
}

/// Prints the summary: with `-o json` one `summary` event (each node's stage and exit code,
/// the run's, the assisted-service request figures and the hints); else the table (NODE, IP,
/// STAGE, DETAIL) on stdout, flushed, then one `hint:` line each on stderr.
pub fn print_summary(
    out: &mut Out,
    format: Format,
    tracks: &[Track],
    end: &Ending,
    hints: &[String],
    stats: &LimiterStats,
) {
    match format {
        Format::Json => {
            let mut e = Event::new(
                "summary",
                format!(
                    "{} of {} node(s) done",
                    end.codes.iter().filter(|c| **c == 0).count(),
                    end.codes.len()
                ),
            );
            e.extra.insert("exitCode".into(), json!(end.code));
            e.extra.insert("timedOut".into(), json!(end.timed_out));
            e.extra
                .insert("elapsedSeconds".into(), json!(end.elapsed.as_secs_f64()));
            e.extra.insert(
                "nodes".into(),
                json!(tracks.iter().zip(&end.codes).map(|(t, code)| {
                    let (s, d) = t.now();
                    json!({"node": t.name, "ip": t.ip.map(|i| i.to_string()), "batch": t.batch, "stage": s, "message": d, "exitCode": code})
                }).collect::<Vec<_>>()),
            );
            e.extra.insert("requests".into(), json!(stats));
            e.extra.insert("hints".into(), json!(hints));
            out.emit(&e);
        }
        Format::Table => {
            let rows: Vec<Vec<String>> = tracks
                .iter()
                .map(|t| {
                    let (s, d) = t.now();
                    vec![
                        crate::output::display(&t.name),
                        t.ip.map(|i| i.to_string()).unwrap_or_else(|| "unknown".into()),
                        s.as_str().to_string(),
                        d,
                    ]
                })
                .collect();
            // The whole table, ending in a newline, flushed before anything goes to stderr
            // (so no stderr line lands inside or at the end of its last row).
            let mut t = crate::output::table(&["NODE", "IP", "STAGE", "DETAIL"], rows);
            t.push('\n');
            crate::output::emit(&t);
            for h in hints {
                crate::say!("hint: {h}");
            }
        }
    }
}

/// A duration as a person says it: `45s`, `5m`, `2m30s`, `1h30m` (seconds dropped from an hour on).
pub fn humanize(d: Duration) -> String {
    let s = d.as_secs();
    match (s / 3600, (s % 3600) / 60, s % 60) {
        (0, 0, s) => format!("{s}s"),
        (0, m, 0) => format!("{m}m"),
        (0, m, s) => format!("{m}m{s}s"),
        (h, m, _) => format!("{h}h{m}m"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::IpAddr;

    fn track(name: &str, ip: Option<&str>) -> Track {
        Track::new(name, ip.map(|i| i.parse::<IpAddr>().unwrap()))
    }

    fn end(codes: &[u8], timed_out: bool) -> Ending {
        Ending {
            codes: codes.to_vec(),
            code: codes
                .iter()
                .copied()
                .fold(exit::OK, |a, c| exit::most_serious([a, c])),
            timed_out,
            timeout: Duration::from_secs(5400),
            elapsed: Duration::from_secs(5400),
        }
    }

    fn waiting(node: &str, waits_for: &'static str, message: &str) -> Waiting {
        Waiting {
            node: node.into(),
            batch: "b1".into(),
            waits_for,
            csr: Some("csr-1".into()),
            reasons: vec![],
            message: message.into(),
        }
    }

    #[test]
    fn a_timeout_with_every_unfinished_node_on_a_csr_says_why_the_code_is_7() {
        let tracks = [
            track("worker-0", Some("192.168.111.30")),
            track("worker-1", Some("192.168.111.31")),
        ];
        let hints = closing_hints(&tracks, &end(&[exit::OK, exit::CSRS], true), &[], true);
        assert_eq!(
            hints,
            [
                "CSRs of worker-1 are pending approval: run `oc agent-day2 approve` (or monitor --approve)",
                "timed out after 1h30m; every node not done waits on a CSR, so the exit code is 7 (CSRs), not 5",
            ]
        );
    }

    #[test]
    fn a_timeout_with_a_node_short_of_its_csrs_says_the_others_were_short() {
        let tracks = [
            track("worker-0", Some("192.168.111.30")),
            track("worker-1", Some("192.168.111.31")),
        ];
        let hints = closing_hints(&tracks, &end(&[exit::TIMEOUT, exit::CSRS], true), &[], true);
        assert_eq!(hints.len(), 2, "{hints:?}");
        assert!(
            hints[1].contains("the others were still short of that"),
            "{hints:?}"
        );
        // No CSR waits: the plain timeout.
        let hints = closing_hints(&tracks[..1], &end(&[exit::TIMEOUT], true), &[], true);
        assert_eq!(hints, ["timed out after 1h30m"]);
    }

    #[test]
    fn the_approvers_reason_replaces_the_generic_pending_hint_for_its_node_only() {
        let tracks = [
            track("worker-0", Some("192.168.111.30")),
            track("worker-1", Some("192.168.111.31")),
        ];
        let held = [
            waiting(
                "worker-0",
                "client-csr-held",
                "worker-0 (batch b1): client CSR csr-1 held: no reboot record",
            ),
            // Waits on something that is not a decision (no CSR yet): not said as a reason.
            waiting("worker-1", "client-csr", "worker-1 (batch b1): no client CSR yet"),
        ];
        let hints = closing_hints(&tracks, &end(&[exit::CSRS, exit::CSRS], false), &held, true);
        assert_eq!(
            hints,
            [
                "worker-0 (batch b1): client CSR csr-1 held: no reboot record",
                "CSRs of worker-1 are pending approval: run `oc agent-day2 approve` (or monitor --approve)",
            ]
        );
        // A held CSR of a node that does not wait on CSRs (done) is not said.
        let hints = closing_hints(&tracks, &end(&[exit::OK, exit::OK], false), &held, true);
        assert!(hints.is_empty(), "{hints:?}");
    }

    #[test]
    fn failed_nodes_are_named_with_what_to_do_and_gather_is_offered_once() {
        let mut tracks = [
            track("worker-0", Some("192.168.111.30")),
            track("worker-1", Some("192.168.111.31")),
        ];
        for t in &mut tracks {
            t.assisted.stage = Stage::Failed;
            t.assisted.seen = true;
        }
        assert_eq!(tracks[0].now().0, Stage::Failed);
        let hints = closing_hints(
            &tracks,
            &end(&[exit::INSTALL_FAILED, exit::INSTALL_FAILED], false),
            &[],
            false,
        );
        assert_eq!(hints.len(), 1, "{hints:?}");
        assert!(
            hints[0].starts_with(
                "worker-0, worker-1 failed to install (exit 6; the reason is on each row above)"
            ) && hints[0].ends_with("; --gather DIR saves a failed host's logs"),
            "{hints:?}"
        );
        let hints = closing_hints(&tracks[..1], &end(&[exit::INSTALL_FAILED], false), &[], true);
        assert!(
            hints[0].contains("on its row above")
                && hints[0].contains("boot it again from its image")
                && !hints[0].contains("--gather"),
            "{hints:?}"
        );
    }

    #[test]
    fn a_dhcp_host_not_done_gets_the_ip_addresses_hint() {
        let tracks = [track("worker-2", None)];
        let hints = closing_hints(&tracks, &end(&[exit::TIMEOUT], false), &[], true);
        assert_eq!(
            hints,
            ["worker-2: address unknown (DHCP): pass --ip-addresses IP to follow its installation"]
        );
    }

    #[test]
    fn durations_read_as_people_say_them() {
        assert_eq!(humanize(Duration::from_secs(45)), "45s");
        assert_eq!(humanize(Duration::from_secs(300)), "5m");
        assert_eq!(humanize(Duration::from_secs(150)), "2m30s");
        assert_eq!(humanize(Duration::from_secs(5400)), "1h30m");
    }
}
