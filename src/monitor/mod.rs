//! `monitor`: follows every expected node from boot to Ready with its serving certificate, and
//! tells the truth in its exit status (docs/monitor.md, issue 5).
//!
//! Which nodes: every host of the batch records (or `--batch NAME`), or, as the anchor
//! `oc adm node-image monitor` does, the addresses of `--ip-addresses` and `--node NAME=IP`.
//! Names come from the batch records, never from reverse DNS. A DHCP host's address is given
//! with `--ip-addresses`: once the host's own assisted-service answers with the batch token and
//! one of its MACs is the batch host's, the address is recorded on the batch (compare-and-swap)
//! so that `approve` can check the serving CSR's IP SANs against it.
//!
//! Two sides, one loop:
//! - the node's live assisted-service ([`crate::assisted`]): polled per node (watcher token),
//!   with backoff while it does not answer, through one [`Limiter`] whatever the node count;
//! - the cluster: one watch of CSRs and one of Nodes ([`kube`]), resumed by
//!   `kube::runtime::watcher`; a 401 re-reads the kubeconfig once, a second one stops with
//!   "log in again" (exit 4).
//!
//! Reboot records (issue 14): when a host's own assisted-service (reached at the host's address
//! with the batch's watcher token, its MAC matching) reports that it left the installation for
//! its reboot, monitor records that time on the batch (`reboots`, compare-and-swap, the first
//! report kept); `approve` approves the host's client CSR only when it was made after it.
//!
//! Exit status ([`state::node_exit`], [`state::overall_exit`]): 0 only when every node is Ready
//! with its serving certificate; 6 a node failed; 5 timed out; 7 CSRs still pending (with a
//! hint to run `approve`); when several apply, 6 before 7 before 5 ([`crate::error::exit::most_serious`]).

pub mod cluster_side;
pub mod output;
pub mod state;
mod summary;

use std::collections::{BTreeMap, BTreeSet};
use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use futures::StreamExt;
use k8s_openapi::api::certificates::v1::CertificateSigningRequest;
use k8s_openapi::api::core::v1::{ConfigMap, Node};
use serde_json::json;

use crate::approve::{Action, ApproveOptions, Approver};
use crate::assisted::{self, AssistedError, Cluster, Limiter};
use crate::batch::{self, BatchRecord};
use crate::cli::monitor::MonitorArgs;
use crate::error::{exit, Error, ResourceRef, Result};
use crate::follow::{read_auth, record_reboots_retrying};
use crate::kube::classify;
use crate::kube::{Connection, KubeTarget, Resolve};
use output::{Event, Format, Out};
use state::{Stage, Track};

fn duration_flag(flag: &str, s: &str) -> Result<Duration> {
    crate::duration::parse_flag(flag, s)
        .map_err(Error::Usage)?
        .ok_or_else(|| Error::Usage(format!("{flag} {s:?}: must be longer than 0, e.g. 90m")))
}

/// What one poll (or a failure follow-up) tells the loop.
enum Report {
    Poll(usize, std::result::Result<Vec<Cluster>, AssistedError>),
    Info(usize, &'static str, String),
}

/// The longest wait between two polls of a host about to install or installing ([`poll_loop`]).
pub const INSTALLING_POLL: Duration = Duration::from_secs(1);

/// Polls one node's API until told to stop: `interval` while it answers, doubling up to a cap
/// while it does not (a node not booted yet costs little), and at most [`INSTALLING_POLL`]
/// from `known` to the end of the installation: its report that it leaves for the reboot (the
/// record `approve` binds the client CSR to) is on the API only for the seconds before the live
/// system goes.
async fn poll_loop(
    idx: usize,
    client: assisted::Client,
    cluster_id: Option<String>,
    interval: Duration,
    stop: Arc<AtomicBool>,
    tx: tokio::sync::mpsc::UnboundedSender<Report>,
) {
    let cap = interval.max((interval * 4).min(Duration::from_secs(30)));
    let mut delay = interval;
    while !stop.load(Ordering::SeqCst) {
        let r = client.list_clusters(cluster_id.as_deref()).await;
        delay = match &r {
            Err(AssistedError::Unreachable { .. }) => (delay * 2).min(cap),
            Ok(cs)
                if cs
                    .iter()
                    .flat_map(|c| &c.hosts)
                    .any(|h| crate::follow::about_to_install(&h.status)) =>
            {
                interval.min(INSTALLING_POLL)
            }
            _ => interval,
        };
        if tx.send(Report::Poll(idx, r)).is_err() {
            return;
        }
        tokio::time::sleep(delay).await;
    }
}

/// After a failure: the last events of the host (shown) and, with `--gather`, its logs.
async fn follow_failure(
    idx: usize,
    name: String,
    client: assisted::Client,
    ids: (String, String),
    gather: Option<PathBuf>,
    tx: tokio::sync::mpsc::UnboundedSender<Report>,
) {
    if let Ok(evs) = client.list_events(&ids.0, &ids.1, 3).await {
        if let Some(e) = evs
            .iter()
            .find(|e| e.severity == "error" || e.severity == "critical")
            .or(evs.first())
        {
            let _ = tx.send(Report::Info(
                idx,
                "info",
                format!(
                    "last event ({}): {}",
                    e.severity,
                    crate::output::display(&e.message)
                ),
            ));
        }
    }
    let Some(dir) = gather else { return };
    let msg = match client.download_logs(&ids.0, &ids.1).await {
        Ok(bytes) => match save_logs(&dir, &name, &bytes) {
            Ok(p) => (
                "info",
                format!(
                    "assisted-service logs saved to {} ({} bytes)",
                    p.display(),
                    bytes.len()
                ),
            ),
            Err(e) => (
                "warning",
                format!("cannot save the logs under {}: {e}", dir.display()),
            ),
        },
        Err(e) => ("warning", format!("cannot download the logs: {e}")),
    };
    let _ = tx.send(Report::Info(idx, msg.0, msg.1));
}

/// Writes `DIR/<node>-logs.tar.gz` (mode 0600, never replacing a file: `-2`, `-3`, ... when
/// taken). `DIR` is created 0700 if missing.
fn save_logs(dir: &Path, node: &str, bytes: &[u8]) -> std::io::Result<PathBuf> {
    use std::io::Write;
    use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
    if !dir.exists() {
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)?;
    }
    let safe: String = node
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '.' {
                c
            } else {
                '_'
            }
        })
        .collect();
    for i in 1..1000 {
        let p = dir.join(if i == 1 {
            format!("{safe}-logs.tar.gz")
        } else {
            format!("{safe}-logs-{i}.tar.gz")
        });
        match std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&p)
        {
            Ok(mut f) => {
                f.write_all(bytes)?;
                f.sync_all()?;
                return Ok(p);
            }
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(e),
        }
    }
    Err(std::io::Error::other("too many log files for this node"))
}

/// The batch records to follow, and one sentence per batch ConfigMap skipped as not a batch
/// record (said as a `warning` event, in `-o json` too; the run then exits 3 at the earliest,
/// as approve does).
///
/// Returns (batches, batch ConfigMaps skipped, record ConfigMaps skipped), the last two as
/// sentences. Errors: `--batch` of a ConfigMap that is not a batch record is invalid input
/// (exit 3, naming it), as in approve.
async fn read_batches(
    target: &KubeTarget,
    only: Option<&str>,
) -> Result<(Vec<BatchRecord>, Vec<String>, Vec<String>)> {
    Ok(match only {
        Some(n) => match batch::get_saying(target, n).await {
            Ok((rec, _, said)) => (vec![rec], vec![], said),
            Err(Error::BadObject { message, .. }) => {
                return Err(crate::approve::bad_batch_error(n, &message))
            }
            Err(e) => return Err(e),
        },
        None => {
            let (good, bad, records_said) = batch::list_checked(target).await?;
            let said = bad
                .iter()
                .map(|(name, message)| batch::bad_batch_message(name, message))
                .collect();
            (good.into_iter().map(|(r, _)| r).collect(), said, records_said)
        }
    })
}

/// Records `ip` for `host` on batch `name` (compare-and-swap; a 409 reads again, up to 8
/// times). Returns the updated ConfigMap for the approver. `Ok(None)`: already recorded.
async fn record_address(
    target: &KubeTarget,
    name: &str,
    host: &str,
    ip: IpAddr,
) -> Result<Option<ConfigMap>> {
    for _ in 0..8 {
        let (mut rec, rv) = batch::get(target, name).await?;
        let Some(h) = rec.hosts.iter_mut().find(|h| h.hostname == host) else {
            return Err(Error::BadObject {
                resource: ResourceRef::namespaced("ConfigMap", batch::NAMESPACE, name),
                message: format!("has no host {host} any more"),
            });
        };
        if h.ips.iter().any(|i| i.parse::<IpAddr>().ok() == Some(ip)) {
            return Ok(None);
        }
        h.ips = vec![ip.to_string()];
        h.ip_source = "monitor".into();
        match batch::update(target, &rec, &rv).await {
            Ok(_) => {
                let api: ::kube::Api<ConfigMap> =
                    ::kube::Api::namespaced(target.client.clone(), batch::NAMESPACE);
                return Ok(api.get(name).await.ok());
            }
            Err(Error::Api { message, .. }) if message.starts_with("HTTP 409") => continue,
            Err(e) => return Err(e),
        }
    }
    Err(Error::Unexpected(format!(
        "batch {name} kept changing while recording {host}'s address; run monitor again"
    )))
}

/// The reboot records of followed hosts, each from the batch the host is followed through
/// (`tracks`: host, batch): (host, its time; None when `at` is not RFC 3339 — recorded, but it
/// binds no CSR; approve holds them naming the field).
fn followed_reboots<'a>(
    tracks: &'a [(String, String)],
    batches: &'a [BatchRecord],
) -> impl Iterator<Item = (String, Option<crate::csr::Time>)> + 'a {
    tracks.iter().filter_map(move |(host, b)| {
        let rec = batches.iter().find(|r| &r.name == b)?;
        let r = rec.reboots.iter().find(|r| &r.host == host)?;
        Some((host.clone(), r.at.parse::<crate::csr::Time>().ok()))
    })
}

/// One reboot report to record: (track index, batch, record).
type RebootJob = (usize, String, batch::Reboot);
/// A job with the connection to write it through (the current one: after a 401 the old client
/// must not be kept alive by an idle writer).
type RebootQueued = (RebootJob, KubeTarget);
/// Its outcome: the jobs of one write and the record ConfigMaps as on the cluster (or why not).
type RebootDone = (Vec<RebootJob>, std::result::Result<Vec<ConfigMap>, String>);

/// The one writer of reboot records: takes every report queued meanwhile and writes them, one
/// small create each, off the event loop so stages keep being shown.
async fn reboot_writer(
    mut rx: tokio::sync::mpsc::UnboundedReceiver<RebootQueued>,
    tx: tokio::sync::mpsc::UnboundedSender<RebootDone>,
) {
    let mut by: Option<String> = None;
    let mut converted = BTreeSet::new();
    while let Some((first, mut target)) = rx.recv().await {
        let mut jobs = vec![first];
        while let Ok((j, t)) = rx.try_recv() {
            jobs.push(j);
            target = t;
        }
        if by.is_none() {
            by = Some(batch::whoami(&target).await);
        }
        for j in &mut jobs {
            j.2.by = by.clone().unwrap_or_default();
        }
        let mut by_batch: BTreeMap<String, Vec<RebootJob>> = BTreeMap::new();
        for j in jobs {
            by_batch.entry(j.1.clone()).or_default().push(j);
        }
        for (b, jobs) in by_batch {
            let recs: Vec<batch::Reboot> = jobs.iter().map(|j| j.2.clone()).collect();
            // A lost record holds the host's CSR: a few more rounds after a pause (the batch's
            // conversion is a compare-and-swap) before giving up.
            let r = record_reboots_retrying(&target, &b, &recs, &mut converted)
                .await
                .map_err(|e| e.to_string());
            if tx.send((jobs, r)).is_err() {
                return;
            }
        }
    }
}

/// The monitor's state and sinks.
struct Monitor {
    tracks: Vec<Track>,
    out: Out,
    batches: Vec<BatchRecord>,
    since: BTreeMap<String, crate::csr::Time>,
    /// Token expiry per batch (a node not seen by then can never register).
    token_expires: BTreeMap<String, SystemTime>,
    csrs: cluster_side::Store<CertificateSigningRequest>,
    nodes: cluster_side::Store<Node>,
    approver: Option<Approver>,
    told: BTreeSet<String>,
    index: cluster_side::CsrIndex,
    /// --approve on a terminal without --yes: ask before each approval.
    ask: bool,
    /// Stage events are shown (see [`Monitor::show_changes`]).
    showing: bool,
    /// CSR (name, resourceVersion) already handed to the approver.
    handled: BTreeSet<(Option<String>, Option<String>)>,
    /// Hosts whose reboot is recorded on their batch (or was tried and failed: said once).
    rebooted: BTreeSet<String>,
    /// When each host's reboot was recorded (on its batch, or noted by this run): its client
    /// CSRs count for its stage only from then on ([`cluster_side::view_of`]).
    reboot_at: BTreeMap<String, crate::csr::Time>,
    /// Queue of the reboot records' writer ([`reboot_writer`]).
    reboots: tokio::sync::mpsc::UnboundedSender<RebootQueued>,
    /// Records queued and not written yet.
    reboots_pending: usize,
    /// Batches deleted while this run watched (`add-nodes batch delete`): no reboot is recorded
    /// on them (it would be an orphan) and the approver no longer expects their hosts.
    deleted_batches: BTreeSet<String>,
}

impl Monitor {
    fn event(&mut self, idx: Option<usize>, kind: &'static str, message: String) {
        let mut e = Event::new(kind, message);
        if let Some(i) = idx {
            let t = &self.tracks[i];
            e.node = Some(t.name.clone());
            e.ip = t.ip.map(|i| i.to_string());
        }
        self.out.emit(&e);
    }

    /// Emits a `stage` event for every track whose (stage, detail) changed. Nothing before
    /// the watches listed CSRs and Nodes once (or 5 s passed): a node that already joined
    /// must not be reported "not booted" first.
    fn show_changes(&mut self) {
        self.show_changes_for(None);
    }

    /// [`Monitor::show_changes`] for the tracks of `only`'s nodes (None: every track): an
    /// event touches one node, and looking at every track on every event made monitor
    /// quadratic in the hosts (issue 24).
    fn show_changes_for(&mut self, only: Option<&BTreeSet<String>>) {
        if !self.showing {
            return;
        }
        for i in 0..self.tracks.len() {
            if only.is_some_and(|o| !o.contains(&self.tracks[i].name)) {
                continue;
            }
            let now = self.tracks[i].now();
            if self.tracks[i].shown.as_ref() == Some(&now) {
                continue;
            }
            self.tracks[i].shown = Some(now.clone());
            let t = &self.tracks[i];
            let mut e = Event::new("stage", now.1.clone());
            e.node = Some(t.name.clone());
            e.ip = t.ip.map(|i| i.to_string());
            e.stage = Some(now.0);
            if matches!(now.0, Stage::Installing | Stage::Rebooting) && t.assisted.stage == now.0 {
                e.percent = t.assisted.percent;
            }
            if now.0 == Stage::Validations {
                e.validations = t
                    .assisted
                    .failing
                    .iter()
                    .map(|(id, m)| {
                        BTreeMap::from([("id", id.clone()), ("message", crate::output::display(m))])
                    })
                    .collect();
            }
            self.out.emit(&e);
        }
    }

    /// The Kubernetes side of the tracks of `only`'s nodes (None: every track), from the CSR
    /// index ([`cluster_side::CsrIndex::of_node`]: O(log n) per track).
    fn refresh_kube_for(&mut self, only: Option<&BTreeSet<String>>) {
        for t in &mut self.tracks {
            if !t.named || only.is_some_and(|o| !o.contains(&t.name)) {
                continue;
            }
            let since = t.batch.as_ref().and_then(|b| self.since.get(b)).copied();
            // A client CSR counts for the host's stage only once it can be its installed
            // kubelet's: made after its reboot record; none while monitor follows the host's
            // own service before its reboot, or before the host answered at all (a rogue CSR
            // posted early must not hide the install's progress); any when monitor cannot
            // follow the host (DHCP address unknown) or its service ended (Failed).
            let clients = match self.reboot_at.get(&t.name) {
                Some(at) => cluster_side::Clients::Since(*at),
                None if t.ip.is_some() && t.assisted.stage < Stage::Rebooting => cluster_side::Clients::None,
                None => cluster_side::Clients::All,
            };
            let csrs = self.index.of_node(&self.csrs, &t.name);
            t.kube = cluster_side::view_of(&t.name, since, clients, &csrs, &self.nodes);
        }
    }

    /// With --approve: hands every pending kubelet CSR of a followed node to the approver.
    /// Not before the stages are shown ([`Monitor::show_changes`]): an approval is reported
    /// after the stage that says its CSR is pending.
    async fn approve_pending(&mut self) {
        self.approve_pending_for(None).await
    }

    /// [`Monitor::approve_pending`] for the CSRs of `only`'s nodes (None: every CSR), so that
    /// an event costs what its node's CSRs cost (issue 24).
    async fn approve_pending_for(&mut self, only: Option<&BTreeSet<String>>) {
        if !self.showing {
            return;
        }
        let Some(ap) = self.approver.as_mut() else {
            return;
        };
        let followed: BTreeSet<String> = self
            .tracks
            .iter()
            .filter(|t| t.named && only.is_none_or(|o| o.contains(&t.name)))
            .map(|t| t.name.clone())
            .collect();
        let candidates: Vec<&CertificateSigningRequest> = match only {
            Some(o) => o
                .iter()
                .flat_map(|n| self.index.of_node(&self.csrs, n))
                .map(|(_, c)| c)
                .collect(),
            None => self.csrs.items.values().collect(),
        };
        let pending: Vec<CertificateSigningRequest> = candidates
            .into_iter()
            .filter(|c| {
                let st = c.status.as_ref();
                st.and_then(|s| s.conditions.as_ref())
                    .is_none_or(|c| c.is_empty())
                    && st
                        .and_then(|s| s.certificate.as_ref())
                        .is_none_or(|c| c.0.is_empty())
            })
            .filter(|c| {
                !self
                    .handled
                    .contains(&(c.metadata.name.clone(), c.metadata.resource_version.clone()))
            })
            .cloned()
            .collect();
        // Hosts this run follows through their own service whose reboot is not recorded yet:
        // their boot-unverified CSRs wait for the record this run will write.
        let awaiting_reboot: BTreeSet<String> = self
            .tracks
            .iter()
            .filter(|t| only.is_none_or(|o| o.contains(&t.name)))
            .filter(|t| t.named && t.ip.is_some() && t.assisted.stage != Stage::Failed)
            .filter(|t| !self.reboot_at.contains_key(&t.name))
            .map(|t| t.name.clone())
            .collect();
        let mut lines = Vec::new();
        for c in pending {
            let Some(node) = self.index.node_of(&c).filter(|(_, n)| followed.contains(n)) else {
                continue;
            };
            let name = c.metadata.name.clone().unwrap_or_default();
            self.handled
                .insert((c.metadata.name.clone(), c.metadata.resource_version.clone()));
            let outcome = match ap.handle(&c).await {
                // On a terminal without --yes the engine only judges (dry run): ask, then
                // approve through the same checked write path.
                Ok(o) if o.action == Action::WouldApprove && self.ask => {
                    let q = format!(
                        "Approve {} CSR {name} of {} (every check passed)? [y/N] ",
                        node.0,
                        crate::output::display(&node.1)
                    );
                    if self.out.ask(&q) {
                        ap.approve(&name).await
                    } else {
                        lines.push((
                            node.1,
                            "warning",
                            format!("{} CSR {name} left pending: declined at the prompt", node.0),
                        ));
                        continue;
                    }
                }
                other => other,
            };
            match outcome {
                Ok(o) => match o.action {
                    Action::Approved => {
                        lines.push((node.1.clone(), "info", format!("approved {} CSR {name}", node.0)));
                        // The same warning as `approve` prints for every client approval.
                        if let Some(w) = crate::approve::cmd::client_approval_warning(&o) {
                            lines.push((node.1.clone(), "warning", w));
                        }
                        if let Some(w) = crate::approve::cmd::unverified_boot_warning(&o) {
                            lines.push((node.1, "warning", w));
                        }
                    }
                    Action::Rejected | Action::Held | Action::WouldApprove => {
                        let key = format!("{name}/{:?}", o.verdict.reasons);
                        if self.told.insert(key) {
                            let why = if o.verdict.reasons.is_empty() {
                                "not approved".to_string()
                            } else {
                                o.verdict
                                    .reasons
                                    .iter()
                                    .map(|r| match r {
                                        crate::csr::Reason::BootUnverified { node: n }
                                            if awaiting_reboot.contains(n) =>
                                        {
                                            format!(
                                                "waiting for {}'s own assisted-service to report its reboot: this monitor records it on the batch and judges the CSR again then",
                                                crate::output::display(n)
                                            )
                                        }
                                        r => r.to_string(),
                                    })
                                    .collect::<Vec<_>>()
                                    .join("; ")
                            };
                            lines.push((
                                node.1,
                                "warning",
                                format!("{} CSR {name} left pending: {why}", node.0),
                            ));
                        }
                    }
                    _ => {}
                },
                Err(e) => lines.push((
                    node.1,
                    "warning",
                    format!("cannot approve CSR {name}: {}", e.render().trim()),
                )),
            }
        }
        for (node, kind, msg) in lines {
            let idx = self.tracks.iter().position(|t| t.name == node);
            self.event(idx, kind, msg);
        }
    }

    /// A poll of track `i` answered at `at`: when the host (matched by MAC) reports that it left
    /// the installation for its reboot, queue its record for the batch, once
    /// ([`reboot_writer`]).
    fn note_reboot(&mut self, target: &KubeTarget, i: usize, clusters: &[Cluster], at: crate::csr::Time) {
        let t = &self.tracks[i];
        let (Some(b), Some(ip), true) = (t.batch.clone(), t.ip, t.named) else {
            return;
        };
        if self.rebooted.contains(&t.name) || self.deleted_batches.contains(&b) {
            return;
        }
        let Some((reported, started)) = state::reboot_report(clusters, &t.macs) else {
            return;
        };
        let host = t.name.clone();
        self.rebooted.insert(host.clone());
        // A record whose write failed is sent again with the time first seen (a later one
        // would refuse the kubelet's CSR made in between).
        let at = *self.reboot_at.entry(host.clone()).or_insert(at);
        let rec = batch::Reboot {
            host,
            at: at.to_string(),
            ip: ip.to_string(),
            reported,
            stage_started_at: started,
            // Filled in by the writer (one SelfSubjectReview, off the event loop).
            by: String::new(),
        };
        if self.reboots.send(((i, b, rec), target.clone())).is_ok() {
            self.reboots_pending += 1;
        }
    }

    /// A write of reboot records finished: say it per host, hand the record to the approver and
    /// judge the pending CSRs again (one may have waited for it).
    async fn reboots_recorded(&mut self, done: RebootDone) {
        let (jobs, r) = done;
        self.reboots_pending = self.reboots_pending.saturating_sub(jobs.len());
        match r {
            Ok(cms) => {
                for (i, b, rec) in &jobs {
                    self.event(
                        Some(*i),
                        "info",
                        format!(
                            "its own assisted-service at {} reported {}: reboot recorded on batch {b} at {} (approve approves its client CSR only if made after that)",
                            rec.ip, rec.reported, rec.at
                        ),
                    );
                }
                if let Some(ap) = self.approver.as_mut() {
                    let mut changed = false;
                    let mut errors = Vec::new();
                    for cm in &cms {
                        match ap.observe_record(cm) {
                            Ok(c) => changed |= c != crate::approve::Touched::Nothing,
                            Err(e) => errors.push(e),
                        }
                    }
                    for e in errors {
                        self.event(None, "warning", format!("approver: {e}"));
                    }
                    if changed {
                        self.handled.clear();
                        self.approve_pending().await;
                    }
                }
            }
            Err(e) => {
                for (i, b, rec) in &jobs {
                    // Not lost: the host's next report queues it again (same time).
                    self.rebooted.remove(&rec.host);
                    self.event(
                        Some(*i),
                        "warning",
                        format!(
                            "cannot record its reboot on batch {b}: {e}; approve will hold its client CSR (boot-unverified) unless given --trust-unverified-boot"
                        ),
                    );
                }
            }
        }
    }

    /// Emits an `alarm` event for every new alarm ([`crate::csr::alarms`]): a bootstrap client
    /// CSR for a node after its client CSR was approved, or a second requester. With
    /// `--approve` the approver's judgement; without, the CSRs watched and the batch records.
    fn show_alarms(&mut self) {
        // No alarm without two client CSRs for one node (an approved one and another, or two
        // pending): checked first, through the index's cache, as this runs on every event.
        let mut per_node: BTreeMap<String, usize> = BTreeMap::new();
        for c in self.csrs.items.values() {
            if c.spec.signer_name == crate::csr::CLIENT_SIGNER {
                if let Some((_, n)) = self.index.node_of(c) {
                    *per_node.entry(n).or_default() += 1;
                }
            }
        }
        if per_node.values().all(|n| *n < 2) {
            return;
        }
        // The client CSRs of followed nodes, attributed through the index's cache.
        let followed: BTreeSet<String> = self
            .tracks
            .iter()
            .filter(|t| t.named)
            .map(|t| t.name.clone())
            .collect();
        let mut all: Vec<(crate::csr::CsrView, String)> = Vec::new();
        for c in self.csrs.items.values() {
            if c.spec.signer_name != crate::csr::CLIENT_SIGNER {
                continue;
            }
            if let Some((_, n)) = self.index.node_of(c).filter(|(_, n)| followed.contains(n)) {
                // Approved before the followed batch's reboot record: an earlier life's (a
                // re-imaged host's old kubelet), no rival of this boot's.
                if self
                    .reboot_at
                    .get(&n)
                    .is_some_and(|at| cluster_side::approved_before(c, *at))
                {
                    continue;
                }
                all.push((crate::csr::CsrView::from_k8s(c), n));
            }
        }
        if all.is_empty() {
            return;
        }
        let expected = crate::csr::ExpectedNodes::new(
            self.tracks
                .iter()
                .filter(|t| t.named)
                .filter_map(|t| {
                    let b = t.batch.as_ref()?;
                    // From the followed batch's reboot record on (less the skew), when there
                    // is one: an approved client CSR from before is an earlier life's (a
                    // re-imaged host's old kubelet), not this boot's.
                    let since = *self.since.get(b)?;
                    let recorded_at = match self.reboot_at.get(&t.name) {
                        Some(at) => since.max(
                            *at - ::k8s_openapi::jiff::SignedDuration::from_secs(
                                crate::csr::REBOOT_CLOCK_SKEW_SECONDS,
                            ),
                        ),
                        None => since,
                    };
                    Some(crate::csr::ExpectedNode {
                        hostname: t.name.clone(),
                        ips: vec![],
                        recorded_at,
                        token_expires: crate::csr::Time::MAX,
                        reissue: 0,
                        rebooted_at: None,
                    })
                })
                .collect(),
        );
        // A host's approvals on the batch this run follows it through: a re-imaged host's
        // approvals on its old batch are its old image's.
        let followed_batch: BTreeMap<&str, &str> = self
            .tracks
            .iter()
            .filter(|t| t.named)
            .filter_map(|t| Some((t.name.as_str(), t.batch.as_deref()?)))
            .collect();
        let approvals = crate::csr::ApprovalsRecorded {
            approvals: self
                .batches
                .iter()
                .flat_map(|b| {
                    b.approvals
                        .iter()
                        .filter(|a| followed_batch.get(a.node.as_str()).is_none_or(|f| *f == b.name))
                })
                .filter(|a| a.kind == "client")
                .map(|a| crate::csr::RecordedApproval {
                    node: a.node.clone(),
                    kind: crate::csr::Kind::Client,
                    csr: a.csr.clone(),
                    created: a.csr_created.as_deref().and_then(|t| t.parse().ok()),
                    requester: a.requester.clone(),
                })
                .collect(),
        };
        // With --approve, its judgement of the pending CSRs adds the second requesters.
        let judged = self
            .approver
            .as_ref()
            .map(|ap| ap.rival_verdicts())
            .unwrap_or_default();
        let alarms = crate::csr::alarms(&all, &judged, &expected, &approvals, |n| {
            self.nodes.items.contains_key(n)
        });
        for al in alarms {
            if !self.told.insert(format!("alarm/{}", al.message)) {
                continue;
            }
            let idx = self.tracks.iter().position(|t| t.name == al.node);
            let mut e = Event::new("alarm", al.message.clone());
            if let Some(i) = idx {
                e.node = Some(self.tracks[i].name.clone());
                e.ip = self.tracks[i].ip.map(|i| i.to_string());
            } else {
                e.node = Some(al.node.clone());
            }
            e.extra.insert("code".into(), json!(al.code));
            e.extra.insert("csrs".into(), json!(al.csrs));
            self.out.emit(&e);
        }
    }

    /// Applies the batch's node labels once the Node exists (merge patch of metadata.labels).
    async fn apply_labels(&mut self, target: &KubeTarget) {
        for i in 0..self.tracks.len() {
            let t = &self.tracks[i];
            if t.labels_done || !t.kube.node_exists {
                continue;
            }
            let have = self
                .nodes
                .items
                .get(&t.name)
                .and_then(|n| n.metadata.labels.clone())
                .unwrap_or_default();
            let missing: BTreeMap<String, String> = t
                .labels
                .iter()
                .filter(|(k, v)| have.get(*k) != Some(*v))
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect();
            let name = t.name.clone();
            self.tracks[i].labels_done = true;
            if missing.is_empty() {
                continue;
            }
            let api: ::kube::Api<Node> = ::kube::Api::all(target.client.clone());
            // Field manager agent-day2, fieldValidation=Strict, as every write of the plugin.
            let pp = crate::kube::write::patch_params();
            let patch = ::kube::api::Patch::Merge(json!({"metadata": {"labels": missing}}));
            match api.patch(&name, &pp, &patch).await {
                Ok(_) => {
                    let l = missing
                        .iter()
                        .map(|(k, v)| format!("{k}={v}"))
                        .collect::<Vec<_>>()
                        .join(",");
                    self.event(
                        Some(i),
                        "info",
                        format!("labels {} applied to Node {name}", crate::output::display(&l)),
                    );
                }
                Err(e) => {
                    let e = classify(e, "patch", ResourceRef::cluster("Node", &name), target);
                    self.event(
                        Some(i),
                        "warning",
                        format!("cannot apply the batch's labels: {e}"),
                    );
                }
            }
        }
    }
}

/// Runs `monitor`; returns the exit code. The flags are checked before the connection is
/// opened ([`Connection::open`]), which reads the kubeconfig again once after a 401 (an
/// `oc login` token expires after 24 h).
///
/// With `-o json`, an error also ends the event stream with an `error` event (`message`,
/// `hint`, `exitCode`) before the `error:` line goes to stderr, so a script reading stdout
/// learns why it ended.
pub async fn run(resolve: Resolve, args: &MonitorArgs) -> Result<u8> {
    let format = Request::format_of(args);
    let r = match Request::from_args(args, std::io::IsTerminal::is_terminal(&std::io::stdin())) {
        Ok(req) => run_checked(resolve, &req).await,
        Err(e) => Err(e),
    };
    if let (Err(e), Format::Json) = (&r, format) {
        let esc = |s: &str| crate::output::escape_for_display(s, 4000);
        let mut ev = Event::new("error", esc(&e.to_string()));
        if let Some(h) = e.hint() {
            ev.extra.insert("hint".into(), json!(esc(&h)));
        }
        ev.extra.insert("exitCode".into(), json!(e.exit_code()));
        Out::new(Format::Json).emit(&ev);
    }
    r
}

/// `monitor` as asked, resolved once from its flags before any cluster read (docs/design.md
/// "Parse first, resolve once"): below [`run`], nothing reads `MonitorArgs`.
pub struct Request {
    /// `--batch`: only this batch's hosts.
    pub batch: Option<String>,
    /// `--ip-addresses`: hosts followed at these addresses.
    pub ip_addresses: Vec<IpAddr>,
    /// `--node NAME=IP`: named hosts followed at these addresses.
    pub nodes: Vec<(String, IpAddr)>,
    /// `--approve`, with `--yes`, `--trust-unverified-boot` and `--kubelet-retry` (seconds).
    pub approve: Option<ApproveMode>,
    /// `--gather DIR`: where a failed host's logs go.
    pub gather: Option<PathBuf>,
    /// `--timeout` and `--poll-interval`.
    pub timeout: Duration,
    pub interval: Duration,
    /// `-o`.
    pub format: Format,
    /// `--max-in-flight`: assisted-service requests at once.
    pub max_in_flight: usize,
}

/// `monitor --approve`'s own flags.
pub struct ApproveMode {
    /// `--yes`: approve without asking.
    pub yes: bool,
    pub trust_unverified_boot: bool,
    /// `--kubelet-retry` in seconds.
    pub kubelet_retry_seconds: i64,
}

impl Request {
    /// `-o` as monitor writes it.
    fn format_of(args: &MonitorArgs) -> Format {
        match args.output {
            crate::cli::monitor::Format::Table => Format::Table,
            crate::cli::monitor::Format::Json => Format::Json,
        }
    }

    /// Errors (exit 2): a zero `--timeout`/`--poll-interval`, a `--kubelet-retry` under 1 s,
    /// `--approve` without `--yes` and without a terminal to ask on.
    pub fn from_args(args: &MonitorArgs, interactive: bool) -> Result<Request> {
        let timeout = duration_flag("--timeout", &args.timeout)?;
        let interval = duration_flag("--poll-interval", &args.poll_interval)?;
        if args.approve && !args.yes && !interactive {
            return Err(Error::Usage(
                "--approve without --yes needs a terminal to ask on; pass --yes to approve every CSR that passes the checks".into(),
            ));
        }
        let approve = if args.approve {
            Some(ApproveMode {
                yes: args.yes,
                trust_unverified_boot: args.trust_unverified_boot,
                kubelet_retry_seconds: crate::approve::cmd::kubelet_retry(&args.kubelet_retry)?,
            })
        } else {
            None
        };
        Ok(Request {
            batch: args.batch.clone(),
            ip_addresses: args.ip_addresses.clone(),
            nodes: args.nodes.clone(),
            approve,
            gather: args.gather.clone(),
            timeout,
            interval,
            format: Request::format_of(args),
            max_in_flight: args.max_in_flight,
        })
    }
}

/// The hosts to follow, one [`Track`] each (pure): with `--node`/`--ip-addresses` those
/// addresses (a host a batch names gets its batch, MACs, labels and name; an address no batch
/// names is followed unnamed), else every host of `batches` (oldest first), the newest batch
/// naming a host defining it, sorted by name.
fn tracks_for(batches: &[BatchRecord], nodes: &[(String, IpAddr)], ips: &[IpAddr]) -> Vec<Track> {
    let host_of = |name: &str| -> Option<(&BatchRecord, &batch::BatchHost)> {
        batches
            .iter()
            .rev()
            .find_map(|b| b.hosts.iter().find(|h| h.hostname == name).map(|h| (b, h)))
    };
    let host_with_ip = |ip: IpAddr| -> Option<(&BatchRecord, &batch::BatchHost)> {
        batches.iter().rev().find_map(|b| {
            b.hosts
                .iter()
                .find(|h| h.ips.iter().any(|i| i.parse::<IpAddr>().ok() == Some(ip)))
                .map(|h| (b, h))
        })
    };
    let from_batch =
        |name: &str, ip: Option<IpAddr>, b: Option<(&BatchRecord, &batch::BatchHost)>| -> Track {
            let mut t = Track::new(name, ip);
            if let Some((b, h)) = b {
                t.batch = Some(b.name.clone());
                t.macs = h.macs.iter().map(|m| m.to_ascii_lowercase()).collect();
                t.labels = b.node_labels.clone();
                t.labels_done = b.node_labels.is_empty();
                if t.ip.is_none() {
                    t.set_ip(h.ips.iter().find_map(|i| i.parse().ok()));
                }
            }
            t
        };
    let mut tracks: Vec<Track> = Vec::new();
    if !nodes.is_empty() || !ips.is_empty() {
        for (name, ip) in nodes {
            tracks.push(from_batch(name, Some(*ip), host_of(name)));
        }
        for ip in ips {
            if tracks.iter().any(|t| t.ip == Some(*ip)) {
                continue;
            }
            match host_with_ip(*ip) {
                Some(b) => tracks.push(from_batch(&b.1.hostname.clone(), Some(*ip), Some(b))),
                None => {
                    let mut t = Track::new(&ip.to_string(), Some(*ip));
                    t.named = false;
                    tracks.push(t);
                }
            }
        }
    } else {
        let mut seen = BTreeSet::new();
        for b in batches.iter().rev() {
            for h in &b.hosts {
                if seen.insert(h.hostname.clone()) {
                    tracks.push(from_batch(&h.hostname, None, Some((b, h))));
                }
            }
        }
        tracks.sort_by(|a, b| a.name.cmp(&b.name));
    }
    tracks
}

/// Per batch, from its record alone (pure): the earliest time its kubelet CSRs can come (the
/// record's creation less 10 min of clock skew), its token's expiry, and the warnings about
/// tokens that expired, expire before `timeout` ends, or are the earlier versions' Secret's.
fn batch_facts(
    batches: &[BatchRecord],
    auth: &crate::follow::NodeTokens,
    now: SystemTime,
    timeout: Duration,
) -> (
    BTreeMap<String, crate::csr::Time>,
    BTreeMap<String, SystemTime>,
    Vec<String>,
) {
    let mut since = BTreeMap::new();
    let mut token_expires = BTreeMap::new();
    let mut warnings = Vec::new();
    for b in batches {
        if let Ok(t) = b.created_at.parse::<crate::csr::Time>() {
            // Kubelet CSRs of this batch's nodes come after the record (10 min of clock skew).
            since.insert(
                b.name.clone(),
                t - ::k8s_openapi::jiff::SignedDuration::from_secs(600),
            );
        }
        let exp = crate::auth::parse_rfc3339(&b.token_expires_at);
        let expired = exp.is_some_and(|e| e <= now);
        if let Some(e) = exp {
            token_expires.insert(b.name.clone(), e);
        }
        if expired {
            warnings.push(format!(
                "batch {}: its token expired at {}: nodes that have not registered yet cannot join; run add-nodes again for them",
                b.name, b.token_expires_at
            ));
        } else if exp.is_some_and(|e| e < now + timeout) {
            warnings.push(format!(
                "batch {}: its token expires at {}, before --timeout ends: a node booted after that cannot join",
                b.name, b.token_expires_at
            ));
        }
    }
    match auth.main_is_legacy {
        false if auth.main.is_expired(now) => warnings.push(format!(
            "the node tokens in Secret {} expired at {}",
            crate::auth::secret_ref(),
            auth.main.expiry_rfc3339()
        )),
        false => {}
        true => warnings.push(format!(
            "Secret {} does not exist: the nodes are followed with the tokens of Secret {}, which earlier agent-day2 versions wrote (the next add-nodes makes the new Secret)",
            crate::auth::secret_ref(),
            crate::auth::legacy_secret_ref()
        )),
    }
    if !auth.main_is_legacy {
        for b in batches {
            if auth.for_batch(Some(&b.token_expires_at)).1 {
                warnings.push(format!(
                    "batch {}: made with the tokens of Secret {} (earlier agent-day2 versions): its nodes are followed with those; later batches use Secret {}",
                    b.name,
                    crate::auth::legacy_secret_ref(),
                    crate::auth::secret_ref()
                ));
            }
        }
    }
    (since, token_expires, warnings)
}

/// What a monitor run follows, read once before its loop: the batch records (`--batch`'s
/// alone when given), the node tokens, the tracks (`tracks_for`) and what the records imply
/// (`batch_facts`), with the warnings to say first.
struct Expected {
    batches: Vec<BatchRecord>,
    /// Batch ConfigMaps skipped as not batch records (exit 3 at the end).
    skipped_batches: usize,
    auth: crate::follow::NodeTokens,
    tracks: Vec<Track>,
    since: BTreeMap<String, crate::csr::Time>,
    token_expires: BTreeMap<String, SystemTime>,
    warnings: Vec<String>,
}

/// Reads [`Expected`]. Errors: no batch record and nothing named on the command line (exit 4,
/// with the hint that fits: `--ip-addresses` when the node tokens exist, else add-nodes), every
/// batch record skipped (exit 3), the node tokens unreadable, and the reads' own errors.
async fn expected(target: &KubeTarget, args: &Request) -> Result<Expected> {
    let (batches, skipped, records_skipped) = read_batches(target, args.batch.as_deref()).await?;
    let skipped_batches = skipped.len();
    let anchors = !args.ip_addresses.is_empty() || !args.nodes.is_empty();
    let auth = read_auth(target).await;
    if batches.is_empty() && !anchors && skipped_batches > 0 {
        for w in &skipped {
            crate::say!("warning: {w}");
        }
        return Err(Error::InvalidInput {
            field: format!("ConfigMaps in {}", batch::NAMESPACE),
            message: "every batch record was skipped as not one (the warnings above say why): fix or delete them, or run add-nodes again".into(),
        });
    }
    if batches.is_empty() && !anchors {
        // Following addresses needs the node tokens: offer it only when they exist (e.g.
        // `oc adm node-image` made the image), so the next hint does not fail in turn.
        return Err(match auth {
            Ok(_) => Error::NotFound {
                resource: ResourceRef {
                    kind: "batch".into(),
                    namespace: None,
                    name: None,
                },
                why: Some(format!(
                    "no batch record in namespace {}, so no node is expected: run `oc agent-day2 add-nodes` \
                     first, or follow machines booted from another image of this cluster with \
                     --ip-addresses IP[,IP] (the node tokens of Secret {} exist)",
                    batch::NAMESPACE,
                    crate::auth::secret_ref()
                )),
            },
            Err(Error::NotFound { .. }) => crate::approve::no_batch(),
            Err(e) => e,
        });
    }
    let auth = auth?;

    let tracks = tracks_for(&batches, &args.nodes, &args.ip_addresses);

    let (since, token_expires, batch_warnings) =
        batch_facts(&batches, &auth, SystemTime::now(), args.timeout);
    let mut warnings = skipped;
    warnings.extend(records_skipped);
    warnings.extend(batch_warnings);
    Ok(Expected {
        batches,
        skipped_batches,
        auth,
        tracks,
        since,
        token_expires,
        warnings,
    })
}

async fn run_checked(resolve: Resolve, args: &Request) -> Result<u8> {
    let (timeout, interval) = (args.timeout, args.interval);
    let mut conn = Connection::open(resolve).await?;
    let mut target = conn.target().clone();
    let Expected {
        batches,
        skipped_batches,
        auth,
        tracks,
        since,
        token_expires,
        warnings,
    } = expected(&target, args).await?;

    let approver = if let Some(ap) = &args.approve {
        let opts = ApproveOptions {
            yes: ap.yes,
            dry_run: !ap.yes,
            batch: args.batch.clone(),
            extra_nodes: tracks
                .iter()
                .filter(|t| t.named && t.batch.is_some())
                .filter_map(|t| t.ip.map(|ip| (t.name.clone(), vec![ip])))
                .collect(),
            trust_unverified_boot: ap.trust_unverified_boot,
            kubelet_retry_seconds: Some(ap.kubelet_retry_seconds),
            ..Default::default()
        };
        Some(Approver::new(&target, opts).await?)
    } else {
        None
    };

    let tracks_batches: Vec<(String, String)> = tracks
        .iter()
        .filter(|t| t.named)
        .filter_map(|t| Some((t.name.clone(), t.batch.clone()?)))
        .collect();
    let (reboot_tx, reboot_rx) = tokio::sync::mpsc::unbounded_channel::<RebootQueued>();
    let (reboot_done_tx, mut reboot_done) = tokio::sync::mpsc::unbounded_channel::<RebootDone>();
    let writer = tokio::spawn(reboot_writer(reboot_rx, reboot_done_tx));
    let mut m = Monitor {
        tracks,
        out: Out::new(args.format),
        batches: batches.clone(),
        since,
        token_expires,
        csrs: Default::default(),
        nodes: Default::default(),
        approver,
        told: BTreeSet::new(),
        index: Default::default(),
        ask: args.approve.as_ref().is_some_and(|a| !a.yes),
        showing: false,
        handled: BTreeSet::new(),
        // Per (batch, host): a host's record counts only on the batch this run follows it
        // through (a re-imaged host's new batch needs its own record; the old batch's reboot
        // says nothing about the new image's boot).
        rebooted: followed_reboots(&tracks_batches, &batches)
            .map(|(h, _)| h)
            .collect(),
        reboot_at: followed_reboots(&tracks_batches, &batches)
            .filter_map(|(h, at)| Some((h, at?)))
            .collect(),
        reboots: reboot_tx,
        reboots_pending: 0,
        deleted_batches: BTreeSet::new(),
    };
    for w in warnings {
        m.event(None, "warning", w);
    }
    for i in 0..m.tracks.len() {
        if m.tracks[i].ip.is_none() {
            continue;
        }
        if m.tracks[i].named && m.tracks[i].batch.is_none() {
            m.event(
                Some(i),
                "warning",
                "not in any batch record: followed, but `approve` will not approve its CSRs".into(),
            );
        }
    }

    // Pollers.
    let limiter = Limiter::new(args.max_in_flight);
    let http = assisted::http_client().map_err(Error::Unexpected)?;
    let cluster_id = batches.first().map(|b| b.cluster_id.clone());
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<Report>();
    let mut stops: Vec<Option<Arc<AtomicBool>>> = Vec::new();
    let mut clients: Vec<Option<assisted::Client>> = Vec::new();
    let mut tasks = tokio::task::JoinSet::new();
    for (i, t) in m.tracks.iter().enumerate() {
        match t.ip {
            Some(ip) => {
                let tokens = auth
                    .for_batch(
                        t.batch
                            .as_ref()
                            .and_then(|b| batches.iter().find(|r| &r.name == b))
                            .map(|r| r.token_expires_at.as_str()),
                    )
                    .0;
                let c = assisted::Client::new(
                    http.clone(),
                    assisted::origin_for(ip),
                    &tokens.watcher_token,
                    &tokens.user_token,
                    limiter.clone(),
                );
                let stop = Arc::new(AtomicBool::new(false));
                let cid = t
                    .batch
                    .as_ref()
                    .and_then(|b| batches.iter().find(|r| &r.name == b))
                    .map(|r| r.cluster_id.clone())
                    .or(cluster_id.clone());
                tasks.spawn(poll_loop(i, c.clone(), cid, interval, stop.clone(), tx.clone()));
                stops.push(Some(stop));
                clients.push(Some(c));
            }
            None => {
                stops.push(None);
                clients.push(None);
            }
        }
    }
    m.show_changes();

    let deadline = tokio::time::Instant::now() + timeout;
    let started = Instant::now();
    let mut watch = cluster_side::watch(target.client.clone());
    let mut reread = false;
    let mut synced = (false, false);
    let mut follow_ups = tokio::task::JoinSet::new();
    let timed_out = loop {
        let all_done = synced.0 && synced.1 && m.tracks.iter().all(Track::finished);
        if all_done {
            break false;
        }
        if !m.showing && ((synced.0 && synced.1) || started.elapsed() > Duration::from_secs(5)) {
            m.showing = true;
            m.show_changes();
            // CSRs that were pending before the stages could be shown.
            m.approve_pending().await;
            m.show_changes();
        }
        // The live system is gone once the Node exists: stop polling it.
        for (i, t) in m.tracks.iter().enumerate() {
            if t.kube.node_exists {
                if let Some(s) = &stops[i] {
                    s.store(true, Ordering::SeqCst);
                }
            }
        }
        tokio::select! {
            _ = tokio::time::sleep_until(deadline) => break true,
            _ = tokio::time::sleep(Duration::from_secs(1)), if !m.showing => {}
            Some(r) = rx.recv() => match r {
                Report::Poll(i, poll) => {
                    if !m.tracks[i].named {
                        if let Ok(clusters) = &poll {
                            bind_anchor(&mut m, &target, i, clusters).await;
                        }
                    }
                    let at = crate::csr::Time::now();
                    let expired = m.tracks[i].batch.as_ref().and_then(|b| m.token_expires.get(b)).is_some_and(|e| *e <= SystemTime::now());
                    let before = m.tracks[i].assisted.stage;
                    let v = state::next_view(&m.tracks[i].assisted, &poll, &m.tracks[i].macs, expired);
                    m.tracks[i].assisted = v;
                    if m.tracks[i].assisted.finished {
                        if let Some(s) = &stops[i] { s.store(true, Ordering::SeqCst); }
                    }
                    if m.tracks[i].assisted.stage == Stage::Failed && before != Stage::Failed && !m.tracks[i].gathered {
                        m.tracks[i].gathered = true;
                        if matches!(poll, Err(AssistedError::Unreachable { .. })) {
                            // Lost mid-install: nothing answers to give its events or logs.
                            if let Some(dir) = &args.gather {
                                m.event(Some(i), "warning", format!(
                                    "its logs cannot be saved under {}: its live system no longer answers; read them on the host's console (journalctl -u agent-add-node)",
                                    dir.display()
                                ));
                            }
                        } else if let (Some(ids), Some(c)) = (m.tracks[i].assisted.ids.clone(), clients[i].clone()) {
                            follow_ups.spawn(follow_failure(i, m.tracks[i].name.clone(), c, ids, args.gather.clone(), tx.clone()));
                        }
                    }
                    // The record is queued first (written off the loop; its "reboot recorded"
                    // line comes when written, after this stage), so the stage shown already
                    // counts the host's client CSRs from the record on: a CSR made before it
                    // never shows as the host's, not even for one poll.
                    if let Ok(clusters) = &poll {
                        m.note_reboot(&target, i, clusters, at);
                    }
                    let only = BTreeSet::from([m.tracks[i].name.clone()]);
                    m.refresh_kube_for(Some(&only));
                    m.show_changes_for(Some(&only));
                    if let Some(w) = state::missed_reboot(&m.tracks[i], started.elapsed()) {
                        if m.told.insert(format!("missed-reboot/{}", m.tracks[i].name)) {
                            m.event(Some(i), "warning", w);
                        }
                    }
                }
                Report::Info(i, kind, msg) => m.event(Some(i), kind, msg),
            },
            Some(done) = reboot_done.recv() => m.reboots_recorded(done).await,
            Some(msg) = watch.next() => {
                // The nodes the event is about (None: all, after a relist).
                let only: Option<BTreeSet<String>>;
                match msg {
                    cluster_side::Msg::Csr(e) => {
                        use ::kube::runtime::watcher::Event as E;
                        let init = matches!(*e, E::InitDone);
                        if init { synced.0 = true; }
                        let name = match &*e {
                            E::Apply(c) | E::Delete(c) => c.metadata.name.clone(),
                            _ => None,
                        };
                        if !m.csrs.apply(*e) { continue; }
                        only = match (init, name) {
                            (false, Some(n)) => Some(m.index.update(&m.csrs, &n).into_iter().collect()),
                            _ => {
                                m.index.rebuild(&m.csrs);
                                None
                            }
                        };
                    }
                    cluster_side::Msg::Node(e) => {
                        use ::kube::runtime::watcher::Event as E;
                        let init = matches!(*e, E::InitDone);
                        if init { synced.1 = true; }
                        let changed = match &*e {
                            E::Apply(n) => Some((n.metadata.name.clone().unwrap_or_default(), true)),
                            E::Delete(n) => Some((n.metadata.name.clone().unwrap_or_default(), false)),
                            _ => None,
                        };
                        if !m.nodes.apply(*e) { continue; }
                        only = match changed {
                            Some((name, exists)) if !init => {
                                if let Some(ap) = m.approver.as_mut() {
                                    match (exists, m.nodes.items.get(&name)) {
                                        (true, Some(n)) => ap.observe_node(n),
                                        _ => ap.forget_node(&name),
                                    }
                                }
                                Some(BTreeSet::from([name]))
                            }
                            _ => {
                                if let Some(ap) = m.approver.as_mut() {
                                    for n in m.nodes.items.values() { ap.observe_node(n); }
                                }
                                None
                            }
                        };
                    }
                    cluster_side::Msg::Batch(e) => {
                        use ::kube::runtime::watcher::Event as E;
                        match *e {
                            E::Apply(cm) | E::InitApply(cm) => {
                                let r = match m.approver.as_mut() {
                                    Some(ap) => ap.observe_batch(&cm),
                                    None => Ok(false),
                                };
                                let broken = m.approver.as_mut().map(|ap| ap.take_broken()).unwrap_or_default();
                                for w in broken {
                                    m.event(None, "warning", w);
                                }
                                match r {
                                    Ok(true) => only = None,
                                    Ok(false) => continue,
                                    Err(e) => {
                                        m.event(None, "warning", format!("approver: {e}"));
                                        continue;
                                    }
                                }
                            }
                            E::Delete(cm) => {
                                let name = cm.metadata.name.clone().unwrap_or_default();
                                let r = match m.approver.as_mut() {
                                    Some(ap) => ap.forget_batch(&name)?,
                                    None => false,
                                };
                                let followed = m.tracks.iter().any(|t| t.batch.as_deref() == Some(name.as_str()));
                                if m.deleted_batches.insert(name.clone()) && (r || followed) {
                                    m.event(None, "warning", format!(
                                        "batch {} was deleted (add-nodes batch delete): no reboot is recorded on it{}",
                                        crate::text::escape_for_display(&name, 253),
                                        if m.approver.is_some() { " and its hosts' CSRs are no longer approved" } else { "" }
                                    ));
                                }
                                if !r { continue; }
                                only = None;
                            }
                            _ => continue,
                        }
                    }
                    cluster_side::Msg::Error { what, unauthorized, message } => {
                        if unauthorized {
                            if reread {
                                return Err(Error::Unauthorized { url: format!("{} (watching {what})", target.server) });
                            }
                            reread = true;
                            m.event(None, "warning", format!("the API server answered 401 while watching {what}: reading the kubeconfig again"));
                            target = conn.reconnect().await?;
                            if let Some(ap) = m.approver.as_mut() { ap.set_target(&target); }
                            watch = cluster_side::watch(target.client.clone());
                            synced = (false, false);
                        } else {
                            tracing::warn!("watching {what}: {message} (retrying)");
                        }
                        continue;
                    }
                }
                m.refresh_kube_for(only.as_ref());
                // Stages first: "client CSR X pending approval" comes before "approved client
                // CSR X" (the order in which they happened).
                m.show_changes_for(only.as_ref());
                m.approve_pending_for(only.as_ref()).await;
                // No alarm without two client CSRs of one node (an approved one and another,
                // or two pending): only a node the event touched can have gained one.
                if m.showing
                    && only.as_ref().is_none_or(|o| o.iter().any(|n| m.index.clients_of(n) >= 2))
                {
                    m.show_alarms();
                }
                m.apply_labels(&target).await;
                m.show_changes_for(only.as_ref());
            }
        }
    };
    for s in stops.iter().flatten() {
        s.store(true, Ordering::SeqCst);
    }
    m.showing = true;
    m.show_changes();
    // Alarms are said even when every node was done at the first look.
    m.show_alarms();
    // Let failure follow-ups (logs) finish: they are what is lost with the live system.
    let drain = tokio::time::sleep(Duration::from_secs(60));
    tokio::pin!(drain);
    while !follow_ups.is_empty() {
        tokio::select! {
            _ = follow_ups.join_next() => {}
            Some(Report::Info(i, kind, msg)) = rx.recv() => m.event(Some(i), kind, msg),
            _ = &mut drain => break,
        }
    }
    while let Ok(r) = rx.try_recv() {
        if let Report::Info(i, kind, msg) = r {
            m.event(Some(i), kind, msg);
        }
    }
    // Reboot records still being written: they are what approve binds the CSRs to.
    let wait = tokio::time::sleep(Duration::from_secs(10));
    tokio::pin!(wait);
    while m.reboots_pending > 0 {
        tokio::select! {
            Some(done) = reboot_done.recv() => m.reboots_recorded(done).await,
            _ = &mut wait => break,
        }
    }
    writer.abort();
    tasks.abort_all();
    m.out.finish();

    // Summary.
    let elapsed = started.elapsed();
    let codes: Vec<u8> = m.tracks.iter().map(|t| state::track_exit(t, elapsed)).collect();
    let mut code = state::overall_exit(codes.iter().copied());
    // A skipped batch record is invalid input (docs/exit-codes.md), as in approve; also one
    // the approver found broken while this run watched (hand-edited meanwhile).
    let broken_meanwhile = m.approver.as_ref().is_some_and(|a| !a.bad_batches().is_empty());
    if skipped_batches > 0 || broken_meanwhile {
        code = exit::most_serious([code, exit::INVALID_INPUT]);
    }
    let stats = limiter.stats();
    // With --approve: why the approver held a node's CSR and what to do, in approve's own
    // words (its `waiting:` lines, approve::cmd::waiting), judged on every CSR watched.
    let held: Vec<crate::approve::cmd::Waiting> = match m.approver.as_mut() {
        Some(ap) => {
            for c in m.csrs.items.values() {
                ap.observe_csr(c);
            }
            crate::approve::cmd::waiting(ap)
        }
        None => Vec::new(),
    };
    let end = summary::Ending {
        codes,
        code,
        timed_out,
        timeout,
        elapsed,
    };
    let hints = summary::closing_hints(&m.tracks, &end, &held, args.gather.is_some());
    summary::print_summary(&mut m.out, args.format, &m.tracks, &end, &hints, &stats);
    // A figure for whoever tunes the bound, not for the user following nodes: with -v only
    // (`-o json` has it in the summary's `requests`).
    tracing::info!(
        "assisted-service requests: {} sent, at most {} in flight (bound {}), {} waited for a slot; {} node(s) in {:.1}s",
        stats.requests,
        stats.max_in_flight,
        stats.bound,
        stats.waited,
        m.tracks.len(),
        elapsed.as_secs_f64()
    );
    let _ = &m.batches;
    Ok(code)
}

/// An `--ip-addresses` anchor's host answered: find its batch host by MAC, name the track,
/// and record the address on the batch.
async fn bind_anchor(m: &mut Monitor, target: &KubeTarget, i: usize, clusters: &[Cluster]) {
    let hosts: Vec<&assisted::Host> = clusters.iter().flat_map(|c| c.hosts.iter()).collect();
    let Some(ip) = m.tracks[i].ip else { return };
    for h in &hosts {
        let macs = h.macs();
        let found = m.batches.iter().rev().find_map(|b| {
            b.hosts
                .iter()
                .find(|bh| {
                    bh.macs
                        .iter()
                        .any(|x| macs.iter().any(|y| x.eq_ignore_ascii_case(y)))
                })
                .map(|bh| (b.clone(), bh.clone()))
        });
        if let Some((b, bh)) = found {
            if m.tracks
                .iter()
                .enumerate()
                .any(|(j, t)| j != i && t.named && t.name == bh.hostname)
            {
                continue;
            }
            let mac = bh
                .macs
                .iter()
                .find(|x| macs.iter().any(|y| x.eq_ignore_ascii_case(y)))
                .cloned()
                .unwrap_or_default();
            {
                let t = &mut m.tracks[i];
                t.name = bh.hostname.clone();
                t.named = true;
                t.batch = Some(b.name.clone());
                t.macs = bh.macs.iter().map(|x| x.to_ascii_lowercase()).collect();
                t.labels = b.node_labels.clone();
                t.labels_done = b.node_labels.is_empty();
            }
            if bh.ip_source == "static" && !bh.ips.is_empty() {
                m.event(
                    Some(i),
                    "warning",
                    format!(
                        "batch {} gives {} the static address(es) {}, not {ip}",
                        b.name,
                        bh.hostname,
                        bh.ips.join(",")
                    ),
                );
                return;
            }
            match record_address(target, &b.name, &bh.hostname, ip).await {
                Ok(cm) => {
                    m.event(
                        Some(i),
                        "info",
                        format!(
                            "address {ip} recorded on batch {} for {} (its assisted-service answered with the batch token; MAC {mac} matches)",
                            b.name, bh.hostname
                        ),
                    );
                    if let (Some(ap), Some(cm)) = (m.approver.as_mut(), cm) {
                        if let Err(e) = ap.observe_batch(&cm) {
                            m.event(Some(i), "warning", format!("approver: {e}"));
                        }
                    }
                }
                Err(e) => m.event(
                    Some(i),
                    "warning",
                    format!("cannot record the address on batch {}: {e}", b.name),
                ),
            }
            return;
        }
    }
    if let Some(h) = hosts.first() {
        if let Some(name) = h.hostname() {
            let t = &mut m.tracks[i];
            t.name = name;
            t.named = true;
            t.macs = h.macs();
            m.event(Some(i), "warning", "in no batch record (no MAC matches): followed by the name it reports; `approve` will not approve its CSRs".into());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::auth::AuthMaterial;
    use crate::cli::monitor::parse_node;
    use crate::follow::{retry_reboot_write, NodeTokens};

    /// Issue 23 item 3: whom monitor follows, decided from the batch records and the flags
    /// alone. Every host once (the newest batch naming it), sorted; with addresses, those
    /// addresses, a batch's host recognised by its address, another address unnamed.
    #[test]
    fn tracks_from_batches_and_addresses() {
        let old = crate::batch::tests::rec();
        let mut new = crate::batch::tests::rec();
        new.name = "batch-20261130-090112-cd34".into();
        new.hosts.truncate(1); // worker-0 again
        new.node_labels.clear();
        let batches = [old.clone(), new.clone()];
        let t = tracks_for(&batches, &[], &[]);
        let names: Vec<(&str, Option<&str>)> =
            t.iter().map(|t| (t.name.as_str(), t.batch.as_deref())).collect();
        assert_eq!(
            names,
            [
                ("worker-0", Some(new.name.as_str())),
                ("worker-1", Some(old.name.as_str()))
            ]
        );
        assert!(
            t[0].labels.is_empty() && t[0].labels_done,
            "the newer batch's labels"
        );
        assert_eq!(t[0].ip, Some("192.168.111.30".parse().unwrap()));
        assert_eq!(t[1].ip, None, "a DHCP host's address is not known yet");
        let ip = |s: &str| -> IpAddr { s.parse().unwrap() };
        let t = tracks_for(
            &batches,
            &[("worker-1".into(), ip("10.0.0.31"))],
            &[ip("192.168.111.30"), ip("10.0.0.31"), ip("10.0.0.99")],
        );
        let got: Vec<(&str, bool, Option<IpAddr>)> =
            t.iter().map(|t| (t.name.as_str(), t.named, t.ip)).collect();
        assert_eq!(
            got,
            [
                ("worker-1", true, Some(ip("10.0.0.31"))),
                ("worker-0", true, Some(ip("192.168.111.30"))),
                ("10.0.0.99", false, Some(ip("10.0.0.99"))),
            ]
        );
    }

    /// A batch's CSRs count from its record less 10 min; its token's expiry is kept and warned
    /// about once expired, or when it ends before --timeout does.
    #[test]
    fn batch_facts_warn_about_tokens_that_end() {
        let t0 = std::time::UNIX_EPOCH + Duration::from_secs(1_800_000_000);
        let tokens = NodeTokens {
            main: crate::auth::generate(Duration::from_secs(48 * 3600), t0).unwrap(),
            main_is_legacy: false,
            legacy: None,
        };
        let mut b = crate::batch::tests::rec();
        let rfc = |t: SystemTime| crate::csr::Time::try_from(t).unwrap().to_string();
        b.created_at = rfc(t0);
        b.token_expires_at = rfc(t0 + Duration::from_secs(3600));
        let (since, exp, w) = batch_facts(std::slice::from_ref(&b), &tokens, t0, Duration::from_secs(600));
        assert_eq!(since[&b.name].to_string(), rfc(t0 - Duration::from_secs(600)));
        assert_eq!(exp[&b.name], t0 + Duration::from_secs(3600));
        assert!(w.is_empty(), "{w:?}");
        let (_, _, w) = batch_facts(std::slice::from_ref(&b), &tokens, t0, Duration::from_secs(7200));
        assert!(w.len() == 1 && w[0].contains("before --timeout ends"), "{w:?}");
        let (_, _, w) = batch_facts(
            std::slice::from_ref(&b),
            &tokens,
            t0 + Duration::from_secs(3601),
            Duration::from_secs(60),
        );
        assert!(w.len() == 1 && w[0].contains("its token expired"), "{w:?}");
    }

    /// Batches made with the old Secret's tokens are followed with those; every other batch
    /// (and a node of no batch) with the current Secret's; only the old one: it for all.
    #[test]
    fn node_tokens_per_batch() {
        let t = |h: u64| std::time::UNIX_EPOCH + Duration::from_secs(1_800_000_000 + h * 3600);
        let cur = crate::auth::generate(Duration::from_secs(48 * 3600), t(0)).unwrap();
        let old = crate::auth::generate(Duration::from_secs(30 * 3600), t(0)).unwrap();
        let both = NodeTokens {
            main: cur.clone(),
            main_is_legacy: false,
            legacy: Some(old.clone()),
        };
        let (m, legacy) = both.for_batch(Some(&old.expiry_rfc3339()));
        assert!(legacy && m.watcher_token == old.watcher_token);
        let (m, legacy) = both.for_batch(Some(&cur.expiry_rfc3339()));
        assert!(!legacy && m.watcher_token == cur.watcher_token);
        assert!(!both.for_batch(Some("2099-01-01T00:00:00Z")).1);
        assert!(!both.for_batch(None).1);
        assert!(!both.for_batch(Some("not a time")).1);
        // Same expiry in both: the current Secret's.
        let same = NodeTokens {
            main: cur.clone(),
            main_is_legacy: false,
            legacy: Some(AuthMaterial {
                expires_at: cur.expires_at,
                ..old.clone()
            }),
        };
        assert_eq!(
            same.for_batch(Some(&cur.expiry_rfc3339())).0.user_token,
            cur.user_token
        );
        let only_old = NodeTokens {
            main: old.clone(),
            main_is_legacy: true,
            legacy: None,
        };
        assert!(only_old.for_batch(Some(&cur.expiry_rfc3339())).1);
    }

    /// Finding 1: a re-imaged host's reboot record on its old batch does not count for the
    /// batch it is followed through (which needs its own), nor does another host's.
    #[test]
    fn reboot_records_count_per_followed_batch() {
        let b = |name: &str, reboots: serde_json::Value| -> BatchRecord {
            serde_json::from_value(json!({
                "apiVersion": "agent-day2/v1", "kind": "Batch", "name": name,
                "createdAt": "2026-01-10T10:00:00Z", "createdBy": "a", "clusterId": "c",
                "releaseImage": "r", "version": "4.18.12", "architecture": "x86_64",
                "pool": "worker", "outputKind": "iso", "files": [], "imageSha256": "00",
                "tokenExpiresAt": "2026-01-11T10:00:00Z",
                "hosts": [{"hostname": "worker-0", "macs": [], "ips": [], "ipSource": "static"}],
                "reboots": reboots,
            }))
            .unwrap()
        };
        let rb =
            |at: &str| json!([{"host": "worker-0", "at": at, "ip": "1.2.3.4", "reported": "x", "by": "a"}]);
        let batches = vec![b("batch-b", json!([])), b("batch-a", rb("2026-01-10T10:20:00Z"))];
        let follow_b = vec![("worker-0".to_string(), "batch-b".to_string())];
        assert_eq!(followed_reboots(&follow_b, &batches).count(), 0);
        let follow_a = vec![("worker-0".to_string(), "batch-a".to_string())];
        let got: Vec<_> = followed_reboots(&follow_a, &batches).collect();
        assert_eq!(
            got,
            [(
                "worker-0".to_string(),
                Some("2026-01-10T10:20:00Z".parse().unwrap())
            )]
        );
        // Recorded but not a time: counted as recorded (not written again), binds nothing.
        let batches = vec![b("batch-a", rb("garbage"))];
        assert_eq!(
            followed_reboots(&follow_a, &batches).collect::<Vec<_>>(),
            [("worker-0".to_string(), None)]
        );
        // A refusal is not retried; a conflict or a transport failure is.
        assert!(!retry_reboot_write(&Error::Api {
            verb: "update".into(),
            resource: ResourceRef::namespaced("ConfigMap", "ns", "b"),
            message: "HTTP 422 too large".into()
        }));
        assert!(retry_reboot_write(&Error::Api {
            verb: "update".into(),
            resource: ResourceRef::namespaced("ConfigMap", "ns", "b"),
            message: "HTTP 409 conflict".into()
        }));
        assert!(retry_reboot_write(&Error::Unexpected("kept changing".into())));
    }

    #[test]
    fn node_flags_and_durations() {
        assert_eq!(
            parse_node("worker-1=192.168.111.31").unwrap(),
            ("worker-1".into(), "192.168.111.31".parse().unwrap())
        );
        assert_eq!(
            parse_node("w=[fd2e::31]").unwrap().1,
            "fd2e::31".parse::<IpAddr>().unwrap()
        );
        assert!(parse_node("w").is_err());
        assert!(parse_node("=1.2.3.4").is_err());
        assert!(parse_node("w=host").is_err());
        assert_eq!(
            duration_flag("--timeout", "90m").unwrap(),
            Duration::from_secs(5400)
        );
        assert!(duration_flag("--timeout", "0").is_err());
        assert_eq!(summary::humanize(Duration::from_secs(5400)), "1h30m");
    }

    #[test]
    fn logs_are_saved_0600_without_replacing() {
        use std::os::unix::fs::PermissionsExt;
        let d = tempfile::tempdir().unwrap();
        let dir = d.path().join("logs");
        let a = save_logs(&dir, "worker-0", b"one").unwrap();
        let b = save_logs(&dir, "worker-0", b"two").unwrap();
        assert_ne!(a, b);
        assert_eq!(std::fs::read(&a).unwrap(), b"one");
        assert_eq!(std::fs::metadata(&a).unwrap().permissions().mode() & 0o777, 0o600);
        assert_eq!(
            std::fs::metadata(&dir).unwrap().permissions().mode() & 0o777,
            0o700
        );
        assert!(save_logs(&dir, "../x", b"z").unwrap().starts_with(&dir));
    }
}
