//! What monitor knows about one node, and the stage and exit code that follow from it. Pure:
//! no I/O, so every rule is unit-tested.
//!
//! Stages (docs/monitor.md, issue 5), in order: waiting for boot → API reachable → host
//! registered → pre-flight validations → installing (percent, stage) → rebooting → client CSR
//! pending → client CSR approved (the kubelet registers the Node) → node joined → Ready →
//! serving CSR pending → done (serving certificate issued).
//! `failed` (install failed, cancelled, token expired) ends a node.

use std::collections::BTreeMap;
use std::net::IpAddr;

use serde::Serialize;

use crate::assisted::{AssistedError, Cluster};
use crate::error::exit;
pub use crate::follow::{find_host, host_time, reboot_report};

/// A node's stage. The order is the order of the walk (`Failed` last).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Stage {
    /// The node's API does not answer yet (or its address is unknown).
    WaitingForBoot,
    /// The API answers with our token; the host has not registered yet.
    ApiReachable,
    /// The host registered and is discovering its hardware.
    Registered,
    /// Pre-flight validations: failing ones are listed; when all pass the host is `known`.
    Validations,
    /// Installing (percent and stage).
    Installing,
    /// Writing done; the live system reboots into the installed one (API goes away).
    Rebooting,
    /// The kubelet's client CSR waits for approval.
    ClientCsrPending,
    /// A client CSR of the node is approved; the kubelet has not registered the Node yet.
    ClientApproved,
    /// The Node object exists, not Ready yet.
    Joined,
    /// Ready; the serving CSR was not sent yet.
    Ready,
    /// Ready, and the serving CSR waits for approval.
    ServingCsrPending,
    /// Ready with its serving certificate issued: done.
    Done,
    /// Installation failed, was cancelled, or the token expired.
    Failed,
}

impl Stage {
    /// The name used in lines, tables and JSON events.
    pub fn as_str(self) -> &'static str {
        match self {
            Stage::WaitingForBoot => "waiting-for-boot",
            Stage::ApiReachable => "api-reachable",
            Stage::Registered => "registered",
            Stage::Validations => "validations",
            Stage::Installing => "installing",
            Stage::Rebooting => "rebooting",
            Stage::ClientCsrPending => "client-csr-pending",
            Stage::ClientApproved => "client-approved",
            Stage::Joined => "joined",
            Stage::Ready => "ready",
            Stage::ServingCsrPending => "serving-csr-pending",
            Stage::Done => "done",
            Stage::Failed => "failed",
        }
    }
}

/// What the node's own assisted-service says, as monitor keeps it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AssistedView {
    /// One of WaitingForBoot ..= Rebooting, or Failed.
    pub stage: Stage,
    /// The sentence shown.
    pub detail: String,
    /// Installation percent, when installing.
    pub percent: Option<i64>,
    /// Failing validations (id, message).
    pub failing: Vec<(String, String)>,
    /// The AI cluster and host ids, once seen (for events and logs).
    pub ids: Option<(String, String)>,
    /// The API has answered at least once.
    pub seen: bool,
    /// Polling can stop: the host left the live system (installed) or ended in error.
    pub finished: bool,
    /// Polls in a row that got no answer after the host answered.
    pub silent: u32,
}

impl Default for AssistedView {
    fn default() -> Self {
        AssistedView {
            stage: Stage::WaitingForBoot,
            detail: "not booted yet".into(),
            percent: None,
            failing: vec![],
            ids: None,
            seen: false,
            finished: false,
            silent: 0,
        }
    }
}

/// The next assisted view after one poll, from the previous one. `token_expired` says the
/// batch token's expiry has passed (a node not seen by then can never register).
pub fn next_view(
    prev: &AssistedView,
    poll: &Result<Vec<Cluster>, AssistedError>,
    macs: &[String],
    token_expired: bool,
) -> AssistedView {
    let mut v = prev.clone();
    match poll {
        Err(AssistedError::Unreachable { url, .. }) => {
            v.silent = prev.silent.saturating_add(1);
            if prev.stage >= Stage::Rebooting && prev.stage != Stage::Failed {
                v.stage = Stage::Rebooting;
                v.detail = "rebooting into the installed system (its live API went away)".into();
                v.finished = true;
            } else if prev.stage == Stage::Installing && v.silent >= crate::follow::LOST_AFTER {
                // Gone before it reported the Rebooting stage (issue 22 item 4): it did not
                // finish as far as anyone saw; calling it "rebooting" hid a failure behind a
                // timeout.
                let last = prev.detail.trim_end_matches(" (its API stopped answering)");
                v.stage = Stage::Failed;
                v.detail = format!(
                    "its live system stopped answering during the install ({last}), before it reported its reboot: \
                     the install did not finish as far as anyone saw; look at the host's console (if it rebooted \
                     anyway, that reboot was not seen and its client CSR stays held)"
                );
                v.finished = true;
            } else if !prev.seen {
                if token_expired {
                    v.stage = Stage::Failed;
                    v.detail = "not booted, and the batch token has expired: the image can no longer add this node; run add-nodes again".into();
                    v.finished = true;
                } else {
                    v.stage = Stage::WaitingForBoot;
                    v.detail = not_booted(url);
                }
            } else {
                v.detail = format!(
                    "{} (its API stopped answering)",
                    prev.detail.trim_end_matches(" (its API stopped answering)")
                );
            }
        }
        Err(AssistedError::Unauthorized {
            expired: true,
            message,
            ..
        }) => {
            v.stage = Stage::Failed;
            v.detail = format!("token expired: the node's assisted-service refuses it ({message}); run add-nodes again for a new image");
            v.finished = true;
        }
        Err(e @ (AssistedError::Unauthorized { .. } | AssistedError::Forbidden { .. })) => {
            v.detail = format!("the API answers but refuses our token: was this machine booted from another batch's image? ({e})");
        }
        Err(e) => {
            v.detail = format!(
                "{} (last poll: {e})",
                if prev.seen { "API error" } else { "waiting" }
            );
        }
        Ok(clusters) => {
            v.seen = true;
            v.silent = 0;
            let Some((c, h)) = find_host(clusters, macs) else {
                v.stage = Stage::ApiReachable;
                v.detail = "assisted-service API reachable; host not registered yet".into();
                return v;
            };
            v.ids = Some((c.id.clone(), h.id.clone()));
            // Host-supplied: ids escaped and cut, messages cut (escaped when shown), at most 32.
            v.failing = h
                .failing_validations()
                .into_iter()
                .take(32)
                .map(|(id, m)| (crate::output::display(&id), m.chars().take(1000).collect()))
                .collect();
            let progress = h.progress.clone().unwrap_or_default();
            let pct = progress.installation_percentage;
            let stage_name = progress.current_stage.clone().filter(|s| !s.is_empty());
            let info = crate::output::display(&h.status_info);
            v.percent = None;
            match h.status.as_str() {
                "insufficient" | "pending-for-input" | "insufficient-unbound" => {
                    v.stage = Stage::Validations;
                    v.detail = if v.failing.is_empty() {
                        format!("pre-flight validations not passing: {info}")
                    } else {
                        format!(
                            "pre-flight validation failing: {}",
                            v.failing
                                .iter()
                                .map(|(id, m)| format!("{id}: {}", crate::output::display(m)))
                                .collect::<Vec<_>>()
                                .join("; ")
                        )
                    };
                }
                "known" | "known-unbound" => {
                    v.stage = Stage::Validations;
                    v.detail = "pre-flight validations passed; installation starts".into();
                }
                "preparing-for-installation"
                | "preparing-successful"
                | "installing"
                | "installing-in-progress"
                | "installing-pending-user-action" => {
                    let rebooting = stage_name.as_deref() == Some("Rebooting");
                    v.stage = if rebooting {
                        Stage::Rebooting
                    } else {
                        Stage::Installing
                    };
                    v.percent = pct;
                    let mut d = match (&stage_name, pct) {
                        (Some(s), Some(p)) => {
                            format!("installing: {}, {p}%", crate::output::display(s))
                        }
                        (Some(s), None) => format!("installing: {}", crate::output::display(s)),
                        (None, Some(p)) => format!("installing: {p}%"),
                        (None, None) => format!("installing ({})", h.status),
                    };
                    if h.status == "installing-pending-user-action" {
                        d = format!("{d}; waiting for user action: {info}");
                    }
                    v.detail = d;
                }
                "added-to-existing-cluster" | "installed" => {
                    v.stage = Stage::Rebooting;
                    v.percent = pct;
                    v.detail = "installed; rebooting into the installed system".into();
                    v.finished = true;
                }
                "error" | "preparing-failed" => {
                    v.stage = Stage::Failed;
                    v.detail = format!("installation failed: {info}");
                    v.finished = true;
                }
                "cancelled" => {
                    v.stage = Stage::Failed;
                    v.detail = format!("installation cancelled: {info}");
                    v.finished = true;
                }
                other => {
                    v.stage = Stage::Registered;
                    v.detail = format!("host registered ({}): {info}", crate::output::display(other));
                }
            }
        }
    }
    v
}

/// "not booted yet (no answer from http://IP:8090/api/assisted-install/v2)" for a request URL.
pub fn not_booted(url: &str) -> String {
    let base = match url.find("/v2/") {
        Some(i) => &url[..i + 3],
        None => url,
    };
    format!("not booted yet (no answer from {base})")
}

/// What the cluster says about a node (from the CSR and Node watches).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct KubeView {
    /// A pending client CSR for this node (name).
    pub client_csr_pending: Option<String>,
    /// An approved client CSR (name): the kubelet has its credentials, the Node may follow.
    pub client_approved: Option<String>,
    /// The Node exists.
    pub node_exists: bool,
    /// Its Ready condition is True.
    pub ready: bool,
    /// A pending serving CSR (name), or an approved one whose certificate is not issued yet.
    pub serving_csr_pending: Option<String>,
    /// `serving_csr_pending` is approved (its certificate not issued yet).
    pub serving_approved: bool,
    /// An issued serving certificate (CSR name).
    pub serving_issued: Option<String>,
    /// A pending client CSR in this node's name that does not count as the host's (no reboot
    /// record binds it while monitor waits for the host's own service): said by
    /// [`missed_reboot`] when the host never answers, never shown as its stage (a rogue CSR
    /// posted before the host booted must not set it).
    pub unbound_client_pending: Option<String>,
}

pub use crate::follow::MISSED_REBOOT_AFTER;

/// The one warning for a host monitor never reached while a client CSR in its name is pending
/// (issue 22 item 1: a `monitor --approve` started after the hosts rebooted said "not booted
/// yet" for ever while their kubelets kept asking). None while the host answered once, is not
/// waiting for its boot, has no such CSR, or has been silent for less than
/// [`MISSED_REBOOT_AFTER`]. The stage stays `waiting-for-boot`: the same facts fit a rogue CSR
/// posted before the host booted, so the sentence gives both readings and the one safe way
/// forward (the console, then `approve --trust-unverified-boot` on a terminal). Pure.
pub fn missed_reboot(t: &Track, silent_for: std::time::Duration) -> Option<String> {
    let c = t.kube.unbound_client_pending.as_ref()?;
    if t.assisted.seen || t.assisted.stage != Stage::WaitingForBoot || silent_for < MISSED_REBOOT_AFTER {
        return None;
    }
    Some(crate::follow::missed_reboot_message(
        &crate::output::display(&t.name),
        &crate::output::display(c),
        silent_for.as_secs(),
        &t.batch
            .as_deref()
            .map(crate::output::display)
            .unwrap_or_else(|| "BATCH".into()),
    ))
}

/// The stage and sentence shown for a node, combining both sides. The kube side wins as soon
/// as it has something (a CSR or the Node), except that a failure from the live system stays.
pub fn combined(a: &AssistedView, k: &KubeView) -> (Stage, String) {
    if a.stage == Stage::Failed && !k.node_exists {
        return (Stage::Failed, a.detail.clone());
    }
    if k.node_exists {
        return match (k.ready, &k.serving_csr_pending, &k.serving_issued) {
            (true, _, Some(c)) => (
                Stage::Done,
                format!("Ready, serving certificate issued (CSR {c})"),
            ),
            (_, Some(c), None) => (
                Stage::ServingCsrPending,
                format!(
                    "{}; serving CSR {c} {}",
                    if k.ready { "Ready" } else { "joined, not Ready" },
                    if k.serving_approved {
                        "approved, waiting for its certificate"
                    } else {
                        "pending approval"
                    }
                ),
            ),
            (true, None, None) => (
                Stage::Ready,
                "Ready; waiting for the kubelet's serving CSR".into(),
            ),
            (false, _, Some(c)) => (
                Stage::Joined,
                format!("joined, not Ready yet (serving certificate issued, CSR {c})"),
            ),
            (false, None, None) => (Stage::Joined, "node joined the cluster; not Ready yet".into()),
        };
    }
    // An approved client CSR is the host's progress; a pending one besides it is an alarm's
    // business, not a step back.
    if let Some(c) = &k.client_approved {
        return (
            Stage::ClientApproved,
            format!("client CSR {c} approved; waiting for the kubelet to register the Node"),
        );
    }
    if let Some(c) = &k.client_csr_pending {
        return (
            Stage::ClientCsrPending,
            format!("client CSR {c} pending approval"),
        );
    }
    (a.stage, a.detail.clone())
}

/// The exit code of one node at the end (docs/exit-codes.md): 0 done; 6 failed;
/// 7 a CSR still pending; 5 anything else not finished (timed out).
pub fn node_exit(stage: Stage) -> u8 {
    match stage {
        Stage::Done => exit::OK,
        Stage::Failed => exit::INSTALL_FAILED,
        Stage::ClientCsrPending | Stage::ServingCsrPending => exit::CSRS,
        _ => exit::TIMEOUT,
    }
}

/// [`node_exit`] of track `t` at the end of a run that lasted `elapsed`: a host whose reboot
/// was missed ([`missed_reboot`]) waits on a decision about its client CSR, 7, not a timeout
/// (waiting longer does not bring its reboot record). Pure.
pub fn track_exit(t: &Track, elapsed: std::time::Duration) -> u8 {
    if missed_reboot(t, elapsed).is_some() {
        exit::CSRS
    } else {
        node_exit(t.now().0)
    }
}

/// The command's exit code from the nodes': 0 when every one is 0, else the most serious by
/// [`exit::most_serious`] (6 before 7 before 5: a failed installation always shows). The
/// run's timeout is not a code of its own: a node waiting on a CSR stays 7 when the timeout
/// ended the run (docs/exit-codes.md "When several apply"), else 7 could never be returned.
pub fn overall_exit(codes: impl IntoIterator<Item = u8>) -> u8 {
    exit::most_serious(codes)
}

/// One monitored node.
#[derive(Debug, Clone)]
pub struct Track {
    /// Node name (the batch hostname); for an `--ip-addresses` anchor not yet matched to a
    /// batch host, the address itself until the host names itself.
    pub name: String,
    /// Whether `name` is known (false: a placeholder until the host's API answers).
    pub named: bool,
    /// The node's address (None: DHCP host whose address is not known yet).
    pub ip: Option<IpAddr>,
    /// The batch it belongs to.
    pub batch: Option<String>,
    /// Expected MACs (lowercase; empty when unknown).
    pub macs: Vec<String>,
    /// Labels to apply when the Node appears.
    pub labels: BTreeMap<String, String>,
    /// Labels were applied (or none were asked for).
    pub labels_done: bool,
    /// The assisted side.
    pub assisted: AssistedView,
    /// The kube side.
    pub kube: KubeView,
    /// Last (stage, detail) reported.
    pub shown: Option<(Stage, String)>,
    /// Logs were gathered (or tried) after a failure.
    pub gathered: bool,
}

impl Track {
    /// A track for `name`.
    pub fn new(name: &str, ip: Option<IpAddr>) -> Track {
        let mut t = Track::blank(name);
        t.set_ip(ip);
        t
    }

    /// Sets the address (and the "not booted yet" sentence that names its API).
    pub fn set_ip(&mut self, ip: Option<IpAddr>) {
        self.ip = ip;
        if let (Some(ip), false) = (ip, self.assisted.seen) {
            self.assisted.detail = not_booted(&format!(
                "{}{}/",
                crate::assisted::origin_for(ip),
                crate::assisted::BASE_PATH
            ));
        }
    }

    fn blank(name: &str) -> Track {
        let assisted = AssistedView::default();
        let ip = None;
        Track {
            name: name.into(),
            named: true,
            ip,
            batch: None,
            macs: vec![],
            labels: BTreeMap::new(),
            labels_done: true,
            assisted,
            kube: KubeView::default(),
            shown: None,
            gathered: false,
        }
    }

    /// The current (stage, detail).
    pub fn now(&self) -> (Stage, String) {
        if self.ip.is_none() && self.kube == KubeView::default() {
            return (
                Stage::WaitingForBoot,
                "address unknown (DHCP): pass --ip-addresses to follow its installation; following its CSRs and Node".into(),
            );
        }
        combined(&self.assisted, &self.kube)
    }

    /// Whether nothing more can happen: done or failed.
    pub fn finished(&self) -> bool {
        matches!(self.now().0, Stage::Done | Stage::Failed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::assisted::{Host, HostProgressInfo};

    /// Finding 2: a host-supplied stage time is kept only as a normalized RFC 3339 time.
    #[test]
    fn host_times_are_rfc3339_or_dropped() {
        assert_eq!(
            host_time("2026-01-10T11:20:00+01:00").as_deref(),
            Some("2026-01-10T10:20:00Z")
        );
        assert_eq!(
            host_time("2026-01-10T10:20:00.123Z").as_deref(),
            Some("2026-01-10T10:20:00Z")
        );
        assert_eq!(host_time(&"A".repeat(1 << 20)), None);
        assert_eq!(host_time(""), None);
        assert_eq!(host_time("yesterday"), None);
    }

    fn host(status: &str, stage: Option<&str>, pct: Option<i64>) -> Vec<Cluster> {
        vec![Cluster {
            id: "c".into(),
            hosts: vec![Host {
                id: "h".into(),
                status: status.into(),
                status_info: format!("info of {status}"),
                progress: Some(HostProgressInfo { current_stage: stage.map(String::from), installation_percentage: pct, ..Default::default() }),
                inventory: Some(r#"{"interfaces":[{"mac_address":"52:54:00:aa:00:30"}]}"#.into()),
                validations_info: Some(r#"{"network":[{"id":"ntp-synced","status":"failure","message":"Host couldn't synchronize with any NTP server"}]}"#.into()),
                ..Default::default()
            }],
            ..Default::default()
        }]
    }

    fn macs() -> Vec<String> {
        vec!["52:54:00:aa:00:30".into()]
    }

    #[test]
    fn only_the_hosts_own_report_is_a_reboot_record() {
        let r = |status: &str, stage: Option<&str>| reboot_report(&host(status, stage, Some(100)), &macs());
        assert_eq!(
            r("added-to-existing-cluster", Some("Rebooting")),
            Some(("added-to-existing-cluster".into(), None))
        );
        assert_eq!(
            r("installing-in-progress", Some("Rebooting")),
            Some(("install stage Rebooting".into(), None))
        );
        assert_eq!(r("installing-in-progress", Some("Writing image to disk")), None);
        assert_eq!(r("known", None), None);
        // Another machine at the address (no MAC matches) reports nothing for this host.
        let other = vec!["52:54:00:aa:00:99".to_string()];
        assert_eq!(
            reboot_report(&host("added-to-existing-cluster", None, None), &other),
            None
        );
    }

    #[test]
    fn the_walk_of_a_healthy_host() {
        let mut v = AssistedView::default();
        let unreachable = Err(AssistedError::Unreachable {
            url: "http://x:8090".into(),
            cause: "refused".into(),
        });
        v = next_view(&v, &unreachable, &macs(), false);
        assert_eq!(v.stage, Stage::WaitingForBoot);
        assert!(v.detail.contains("not booted yet"));
        v = next_view(
            &v,
            &Ok(vec![Cluster {
                id: "c".into(),
                ..Default::default()
            }]),
            &macs(),
            false,
        );
        assert_eq!(v.stage, Stage::ApiReachable);
        v = next_view(&v, &Ok(host("discovering", None, None)), &macs(), false);
        assert_eq!(v.stage, Stage::Registered);
        v = next_view(&v, &Ok(host("insufficient", None, None)), &macs(), false);
        assert_eq!(v.stage, Stage::Validations);
        assert!(
            v.detail.contains("ntp-synced: Host couldn't synchronize"),
            "{}",
            v.detail
        );
        v = next_view(
            &v,
            &Ok(host(
                "installing-in-progress",
                Some("Writing image to disk"),
                Some(50),
            )),
            &macs(),
            false,
        );
        assert_eq!((v.stage, v.percent), (Stage::Installing, Some(50)));
        assert_eq!(v.detail, "installing: Writing image to disk, 50%");
        // Gone right after 50 % is not a reboot (issue 22 item 4); the Rebooting stage is.
        v = next_view(&v, &unreachable, &macs(), false);
        assert_eq!(v.stage, Stage::Installing);
        v = next_view(
            &v,
            &Ok(host("installing-in-progress", Some("Rebooting"), Some(83))),
            &macs(),
            false,
        );
        assert_eq!(v.stage, Stage::Rebooting);
        v = next_view(&v, &unreachable, &macs(), false);
        assert_eq!(v.stage, Stage::Rebooting);
        assert!(v.finished);
    }

    #[test]
    fn errors_end_the_node() {
        let v = next_view(
            &AssistedView::default(),
            &Ok(host("error", Some("Failed"), Some(50))),
            &macs(),
            false,
        );
        assert_eq!(v.stage, Stage::Failed);
        assert!(v.detail.starts_with("installation failed: info of error"));
        let v = next_view(
            &AssistedView::default(),
            &Ok(host("cancelled", None, None)),
            &macs(),
            false,
        );
        assert!(v.detail.starts_with("installation cancelled"));
        let exp = Err(AssistedError::Unauthorized {
            url: "u".into(),
            message: "token is expired".into(),
            expired: true,
        });
        assert_eq!(
            next_view(&AssistedView::default(), &exp, &macs(), false).stage,
            Stage::Failed
        );
        let unreachable = Err(AssistedError::Unreachable {
            url: "u".into(),
            cause: "c".into(),
        });
        assert_eq!(
            next_view(&AssistedView::default(), &unreachable, &macs(), true).stage,
            Stage::Failed
        );
    }

    /// Gone at "Writing image to disk": a few silent polls are a blip; LOST_AFTER of them is a
    /// failure naming the last stage, never "rebooting". Gone after "Rebooting": a reboot.
    #[test]
    fn a_host_gone_mid_install_fails_one_gone_after_rebooting_reboots() {
        let down = Err(AssistedError::Unreachable {
            url: "u".into(),
            cause: "c".into(),
        });
        let mut v = next_view(
            &AssistedView::default(),
            &Ok(host(
                "installing-in-progress",
                Some("Writing image to disk"),
                Some(50),
            )),
            &macs(),
            false,
        );
        for _ in 1..crate::follow::LOST_AFTER {
            v = next_view(&v, &down, &macs(), false);
            assert_eq!(v.stage, Stage::Installing, "{v:?}");
        }
        v = next_view(&v, &down, &macs(), false);
        assert_eq!(v.stage, Stage::Failed, "{v:?}");
        assert!(v.finished);
        assert!(
            v.detail.contains("installing: Writing image to disk, 50%"),
            "{}",
            v.detail
        );
        assert!(!v.detail.contains("(its API stopped answering)"), "{}", v.detail);
        assert_eq!(node_exit(v.stage), exit::INSTALL_FAILED);

        let r = next_view(
            &AssistedView::default(),
            &Ok(host("installing-in-progress", Some("Rebooting"), Some(83))),
            &macs(),
            false,
        );
        let r = next_view(&r, &down, &macs(), false);
        assert_eq!(r.stage, Stage::Rebooting);
        assert!(r.finished);
    }

    /// Issue 22 item 1: a host never reached while a client CSR in its name waits is said once
    /// it stayed silent long enough, never before, never once it answered; the stage is kept.
    #[test]
    fn a_silent_host_whose_kubelet_asks_is_said_after_a_while() {
        let mut t = Track::new("worker-0", Some("192.168.111.30".parse().unwrap()));
        t.batch = Some("batch-b".into());
        let long = MISSED_REBOOT_AFTER;
        assert_eq!(missed_reboot(&t, long), None, "no CSR");
        t.kube.unbound_client_pending = Some("csr-1".into());
        assert_eq!(
            missed_reboot(&t, long - std::time::Duration::from_secs(1)),
            None,
            "too early"
        );
        let m = missed_reboot(&t, long).unwrap();
        assert!(
            m.contains("client CSR csr-1 asks in worker-0's name") && m.contains("--batch batch-b"),
            "{m}"
        );
        assert_eq!(t.now().0, Stage::WaitingForBoot, "the stage is kept");
        // A decision is needed: 7 at the end, not the timeout's 5.
        assert_eq!(track_exit(&t, long), exit::CSRS);
        assert_eq!(track_exit(&t, long / 2), exit::TIMEOUT);
        t.assisted.seen = true;
        t.assisted.stage = Stage::Installing;
        assert_eq!(missed_reboot(&t, long * 10), None, "it answered");
    }

    #[test]
    fn another_machine_on_the_address_is_not_this_node() {
        let v = next_view(
            &AssistedView::default(),
            &Ok(host("known", None, None)),
            &["52:54:00:ff:ff:ff".into()],
            false,
        );
        assert_eq!(v.stage, Stage::ApiReachable);
    }

    #[test]
    fn kube_side_and_exit_codes() {
        let a = AssistedView {
            stage: Stage::Rebooting,
            ..Default::default()
        };
        let mut k = KubeView {
            client_csr_pending: Some("csr-1".into()),
            ..Default::default()
        };
        assert_eq!(combined(&a, &k).0, Stage::ClientCsrPending);
        // Approved, no Node yet: not "joined"; a pending CSR besides it is no step back.
        k.client_approved = Some("csr-0".into());
        assert_eq!(
            combined(&a, &k),
            (
                Stage::ClientApproved,
                "client CSR csr-0 approved; waiting for the kubelet to register the Node".into()
            )
        );
        k.node_exists = true;
        assert_eq!(combined(&a, &k).0, Stage::Joined);
        k.ready = true;
        assert_eq!(combined(&a, &k).0, Stage::Ready);
        k.serving_csr_pending = Some("csr-2".into());
        assert_eq!(combined(&a, &k).1, "Ready; serving CSR csr-2 pending approval");
        // Approved, its certificate not issued yet: not "pending approval" any more.
        k.serving_approved = true;
        assert_eq!(
            combined(&a, &k),
            (
                Stage::ServingCsrPending,
                "Ready; serving CSR csr-2 approved, waiting for its certificate".into()
            )
        );
        k.serving_csr_pending = None;
        k.serving_issued = Some("csr-2".into());
        assert_eq!(combined(&a, &k).0, Stage::Done);
        assert_eq!(node_exit(Stage::Done), 0);
        assert_eq!(node_exit(Stage::Failed), 6);
        assert_eq!(node_exit(Stage::ServingCsrPending), 7);
        assert_eq!(node_exit(Stage::Validations), 5);
        assert_eq!(overall_exit([0, 7, 6, 5]), 6);
        assert_eq!(overall_exit([0, 5, 6]), 6);
        assert_eq!(overall_exit([0, 7, 5]), 7);
        assert_eq!(overall_exit([5, 5]), 5);
        assert_eq!(overall_exit([7, 0]), 7);
        assert_eq!(overall_exit([0, 0]), 0);
    }
}
