//! Following the hosts' own reboot reports, for `monitor` and `approve --watch` alike (issue 22
//! item 1: `approve --watch` alone approved nothing, as only monitor recorded reboots).
//!
//! A host booted from our image runs its own assisted-service on `http://IP:8090`. When that
//! service reports that the host left the installation for its reboot ([`reboot_report`]), the
//! time is recorded as a reboot record of the host's batch ([`crate::batch::records`]); approve
//! approves the host's client CSR only when it was made after that record (docs/approve.md
//! "Binding a client CSR to the machine" and its threat model). Here: the node tokens the
//! hosts' APIs take ([`read_auth`]), the pure reading of a poll ([`find_host`],
//! [`reboot_report`]), the record write ([`record_reboots`]), and the [`Follower`] that
//! `approve --watch` runs (monitor has its own loop, which also shows stages).

use std::collections::{BTreeMap, BTreeSet};
use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::{ConfigMap, Secret};

use crate::assisted::{self, AssistedError, Cluster, Host, Limiter};
use crate::auth::AuthMaterial;
use crate::batch;
use crate::error::{Error, ResourceRef, Result};
use crate::kube::classify;
use crate::kube::KubeTarget;

/// The node tokens `monitor` and `approve --watch` call the nodes' API with: those of Secret
/// `openshift-config/agent-auth-token` (written by add-nodes or `oc adm node-image`), and
/// those of the Secret earlier agent-day2 versions wrote (`openshift-agent-day2/agent-day2-auth`)
/// for the batches made with them.
#[derive(Clone)]
pub struct NodeTokens {
    /// The current Secret's material; when that Secret does not exist, the old one's.
    pub main: AuthMaterial,
    /// `main` comes from the old Secret (the current one does not exist).
    pub main_is_legacy: bool,
    /// The old Secret's material, when `main` is the current one and the old one exists.
    pub legacy: Option<AuthMaterial>,
}

impl NodeTokens {
    /// The material for nodes of a batch whose record says its tokens expire at
    /// `token_expires_at` (None: a node of no batch): the old Secret's when that is the one
    /// whose expiry the batch recorded (and the current one's is not), else `main`. The bool
    /// says whether the old Secret's was chosen.
    pub fn for_batch(&self, token_expires_at: Option<&str>) -> (&AuthMaterial, bool) {
        let exp = token_expires_at.and_then(crate::auth::parse_rfc3339);
        match &self.legacy {
            Some(l) if exp == Some(l.expires_at) && exp != Some(self.main.expires_at) => (l, true),
            _ => (&self.main, self.main_is_legacy),
        }
    }
}

fn secret_data(s: Secret) -> (BTreeMap<String, Vec<u8>>, BTreeMap<String, String>) {
    let ann = s.metadata.annotations.unwrap_or_default();
    let data = s
        .data
        .unwrap_or_default()
        .into_iter()
        .map(|(k, v)| (k, v.0))
        .collect();
    (data, ann)
}

/// Reads the node tokens ([`NodeTokens`]). The current Secret must be readable (missing is
/// fine when the old one exists); the old one is read only for the fallback, and when the
/// current one exists a failure to read or parse it is logged, not fatal.
///
/// Errors (exit 4 naming the Secret): neither Secret exists, the current one cannot be read
/// or is malformed, or only the old one exists and it is malformed.
pub async fn read_auth(target: &KubeTarget) -> Result<NodeTokens> {
    use crate::auth::{LEGACY_SECRET_NAME, LEGACY_SECRET_NAMESPACE, SECRET_NAME, SECRET_NAMESPACE};
    let r = ResourceRef::namespaced("Secret", SECRET_NAMESPACE, SECRET_NAME);
    let lr = ResourceRef::namespaced("Secret", LEGACY_SECRET_NAMESPACE, LEGACY_SECRET_NAME);
    let api: ::kube::Api<Secret> = ::kube::Api::namespaced(target.client.clone(), SECRET_NAMESPACE);
    let current = match api
        .get_opt(SECRET_NAME)
        .await
        .map_err(|e| classify(e, "read", r.clone(), target))?
    {
        None => None,
        Some(s) => {
            let (data, ann) = secret_data(s);
            Some(
                AuthMaterial::from_secret_data(&data, &ann).map_err(|e| Error::BadObject {
                    resource: r.clone(),
                    message: format!("{}; run `oc agent-day2 add-nodes` to have new node tokens made (images made before cannot be followed)", e.without_secret()),
                })?,
            )
        }
    };
    let lapi: ::kube::Api<Secret> = ::kube::Api::namespaced(target.client.clone(), LEGACY_SECRET_NAMESPACE);
    let legacy = match lapi.get_opt(LEGACY_SECRET_NAME).await {
        Ok(None) => None,
        Ok(Some(s)) => match AuthMaterial::from_legacy_secret_data(&secret_data(s).0) {
            Ok(m) => Some(m),
            Err(e) if current.is_some() => {
                tracing::warn!(error = %e, "the old node tokens cannot be used; batches made with them are followed with the current ones");
                None
            }
            Err(e) => {
                return Err(Error::BadObject {
                    resource: lr,
                    message: e.without_secret(),
                })
            }
        },
        Err(e) if current.is_some() => {
            tracing::debug!(error = %e, secret = %lr, "cannot read the old auth Secret");
            None
        }
        Err(e) => return Err(classify(e, "read", lr, target)),
    };
    match (current, legacy) {
        (Some(main), legacy) => Ok(NodeTokens {
            main,
            main_is_legacy: false,
            legacy,
        }),
        (None, Some(main)) => Ok(NodeTokens {
            main,
            main_is_legacy: true,
            legacy: None,
        }),
        (None, None) => Err(Error::NotFound {
            resource: r,
            why: Some(
                "it holds the node tokens add-nodes (or oc adm node-image) made; run `oc agent-day2 add-nodes` first".into(),
            ),
        }),
    }
}

/// Records `reboots` (hosts' own reboot reports) for batch `name`, one small record ConfigMap
/// each ([`batch::records`]; an earlier version's batch is converted first). The first record
/// of a host is kept: a host recorded already (by another monitor or approve) keeps its record, which is
/// returned as it stands. Returns the records as they are on the cluster, for the approver.
/// `converted`: the batches this run has converted or found converted already.
pub async fn record_reboots(
    target: &KubeTarget,
    name: &str,
    reboots: &[batch::Reboot],
    converted: &mut BTreeSet<String>,
) -> Result<Vec<ConfigMap>> {
    // A batch deleted meanwhile (`add-nodes batch delete`) gets no record: it would be an
    // orphan, and a batch of that name made later is another one.
    if !batch::exists(target, name).await? {
        return Err(Error::NotFound {
            resource: ResourceRef::namespaced("ConfigMap", batch::NAMESPACE, name),
            why: Some("its batch was deleted: the reboot is not recorded".into()),
        });
    }
    // Once per batch and run: the check reads the whole batch and lists its records.
    if !converted.contains(name) {
        batch::convert(target, name).await?;
        converted.insert(name.to_string());
    }
    let mut out = Vec::new();
    for r in reboots {
        match batch::records::create(target, &batch::records::reboot_config_map(name, r)).await? {
            batch::records::Created::Made(cm) | batch::records::Created::Existed(cm) => out.push(cm),
        }
    }
    Ok(out)
}

/// Whether a failed write of reboot records is worth another round: not a refusal (4xx other
/// than 409/429) that the same record would meet again.
pub fn retry_reboot_write(e: &Error) -> bool {
    match e {
        Error::Api { message, .. } => {
            !(message.starts_with("HTTP 4")
                && !message.starts_with("HTTP 409")
                && !message.starts_with("HTTP 429"))
        }
        Error::Forbidden { .. }
        | Error::Unauthorized { .. }
        | Error::BadObject { .. }
        | Error::NotFound { .. } => false,
        _ => true,
    }
}

/// [`record_reboots`], tried again up to five more times with a growing pause (200 ms, 400 ms,
/// ...) while it fails in a way another round may cure ([`retry_reboot_write`]): a lost record
/// holds the host's client CSR. The last outcome is returned.
pub async fn record_reboots_retrying(
    target: &KubeTarget,
    name: &str,
    reboots: &[batch::Reboot],
    converted: &mut BTreeSet<String>,
) -> Result<Vec<ConfigMap>> {
    let mut r = record_reboots(target, name, reboots, converted).await;
    for round in 1..=5u32 {
        if !matches!(&r, Err(e) if retry_reboot_write(e)) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(200 * u64::from(round))).await;
        r = record_reboots(target, name, reboots, converted).await;
    }
    r
}

/// Whether a host of `status` is about to install or installing (`known`, `preparing-*`,
/// `installing-*`): its reboot report is near, so it is polled at least every second.
pub fn about_to_install(status: &str) -> bool {
    ["known", "preparing", "installing"]
        .iter()
        .any(|s| status.starts_with(s))
}

/// The host among `clusters` that is this node: the one whose inventory MACs meet `macs`, else
/// (no MACs known) the only host. None when no host matches (not registered yet, or another
/// machine answers on this address).
pub fn find_host<'a>(clusters: &'a [Cluster], macs: &[String]) -> Option<(&'a Cluster, &'a Host)> {
    let all: Vec<(&Cluster, &Host)> = clusters
        .iter()
        .flat_map(|c| c.hosts.iter().map(move |h| (c, h)))
        .collect();
    if macs.is_empty() {
        return if all.len() == 1 {
            all.into_iter().next()
        } else {
            None
        };
    }
    all.into_iter().find(|(_, h)| {
        h.macs()
            .iter()
            .any(|m| macs.iter().any(|x| x.eq_ignore_ascii_case(m)))
    })
}

/// What the host's own assisted-service says about leaving the installation for its reboot:
/// `(reported, stage_started_at)` when the host matched by MAC ([`find_host`]) is
/// `added-to-existing-cluster` / `installed` or at install stage `Rebooting`; None otherwise.
/// Only an explicit report counts: a live API that stops answering proves nothing (a network
/// blip, or someone keeping the host's address quiet).
///
/// `stage_started_at` is host-supplied (anyone answering at the host's address with its MAC can
/// say anything): kept only when it is an RFC 3339 time, and then as its normalized UTC form
/// (bounded); otherwise dropped with a debug log. `reported` is one of our own fixed strings.
pub fn reboot_report(clusters: &[Cluster], macs: &[String]) -> Option<(String, Option<String>)> {
    let (_, h) = find_host(clusters, macs)?;
    let p = h.progress.clone().unwrap_or_default();
    let started = p.stage_started_at.as_deref().and_then(host_time);
    match h.status.as_str() {
        "added-to-existing-cluster" | "installed" => Some((h.status.clone(), started)),
        s if s.starts_with("installing") && p.current_stage.as_deref() == Some("Rebooting") => {
            Some(("install stage Rebooting".into(), started))
        }
        _ => None,
    }
}

/// A host-supplied time as normalized RFC 3339 UTC (`2026-01-10T10:20:00Z`), None (with a debug
/// log of its escaped, cut start) when it is empty or not RFC 3339.
pub fn host_time(s: &str) -> Option<String> {
    if s.is_empty() {
        return None;
    }
    match time::OffsetDateTime::parse(s, &time::format_description::well_known::Rfc3339) {
        Ok(t) => crate::csr::Time::from_second(t.unix_timestamp())
            .ok()
            .map(|t| t.to_string()),
        Err(_) => {
            tracing::debug!(
                "host-supplied time {} is not RFC 3339: ignored",
                crate::output::escape_for_display(s, 80)
            );
            None
        }
    }
}

/// One host to follow: its batch, its address and MACs (the batch's), the cluster it imports.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Followed {
    /// Host name (the future Node name).
    pub host: String,
    /// The batch that expects it.
    pub batch: String,
    /// The address its live system answers at (port 8090).
    pub ip: IpAddr,
    /// The batch's MACs of the host (lowercase); its API must report one of them.
    pub macs: Vec<String>,
    /// The cluster ID the batch was made for (the host imports it).
    pub cluster_id: String,
    /// The batch's `tokenExpiresAt` (picks the node tokens, [`NodeTokens::for_batch`]).
    pub token_expires_at: String,
}

/// What the [`Follower`] saw of one host.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Seen {
    /// Its live API answered for the first time.
    Answered { host: String },
    /// Its reboot report is recorded (`reported`: what it said); the record reaches approve
    /// through its watch of records.
    Recorded { host: String, reported: String },
    /// It answered before, then stopped answering without reporting its reboot: if it
    /// rebooted, that reboot was not seen and its client CSR stays held (boot-unverified).
    Lost { host: String, url: String },
    /// Its report could not be recorded (the error, one line).
    Failed { host: String, message: String },
}

/// Polls stop after this many failed polls in a row once a host has answered ([`Seen::Lost`]).
pub const LOST_AFTER: u32 = 5;

/// The pure step of one host's follow: from the previous poll state and a poll's outcome, the
/// new state and what to say. `macs`: the batch's MACs of the host.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HostFollow {
    /// The host's API answered at least once.
    pub answered: bool,
    /// Failed polls in a row since it last answered.
    pub silent: u32,
    /// Its last answer showed it about to install or installing (poll fast).
    pub installing: bool,
    /// Done: recorded, or lost (no more polls).
    pub done: bool,
}

/// What one poll means for a followed host.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    /// Nothing to say.
    Nothing,
    /// First answer.
    Answered,
    /// It reports its reboot: record `(reported, stage_started_at)`.
    Record(String, Option<String>),
    /// It went silent after answering, with no report.
    Lost,
}

impl HostFollow {
    /// Applies one poll's outcome. Pure.
    pub fn step(&mut self, poll: &std::result::Result<Vec<Cluster>, AssistedError>, macs: &[String]) -> Step {
        match poll {
            Ok(clusters) => {
                let first = !self.answered;
                self.answered = true;
                self.silent = 0;
                if let Some((reported, started)) = reboot_report(clusters, macs) {
                    self.done = true;
                    return Step::Record(reported, started);
                }
                self.installing = find_host(clusters, macs).is_some_and(|(_, h)| about_to_install(&h.status));
                if first {
                    Step::Answered
                } else {
                    Step::Nothing
                }
            }
            Err(AssistedError::Unreachable { .. }) if self.answered => {
                self.silent += 1;
                if self.silent >= LOST_AFTER {
                    self.done = true;
                    Step::Lost
                } else {
                    Step::Nothing
                }
            }
            Err(_) => Step::Nothing,
        }
    }
}

/// How long a host followed from the start may stay silent, while a client CSR in its name
/// waits, before its reboot is said to have been missed ([`missed_reboot_message`]). A live
/// ISO boots its assisted-service in minutes; a kubelet asks only after the install and reboot,
/// so a host that does not answer while its kubelet asks most likely rebooted before anything
/// followed it.
pub const MISSED_REBOOT_AFTER: Duration = Duration::from_secs(30);

/// The one sentence, in monitor and approve alike, for a host never reached while client CSR
/// `csr` asks in its name (issue 22 item 1: its reboot may have happened before anything
/// followed it, and then can never be recorded). Both readings are given, and the one safe way
/// forward (the console, then `approve --trust-unverified-boot` on a terminal). The arguments
/// are escaped for display by the caller. Pure.
pub fn missed_reboot_message(node: &str, csr: &str, silent_secs: u64, batch: &str) -> String {
    format!(
        "client CSR {csr} asks in {node}'s name, but {node}'s live system has not answered a poll in {silent_secs}s: if {node} rebooted into the installed system before anything followed it, or between two polls (a host that does not answer yet is polled with a growing pause, up to 30 s), its reboot was missed and cannot be recorded now; check on its console that it runs the installed system, then run `oc agent-day2 approve --batch {batch} --trust-unverified-boot` on a terminal (it asks for each CSR); if {node} has not booted yet, the CSR is not its kubelet's and is never approved"
    )
}

/// The follower `approve --watch` runs: one poll loop per host (all requests through one
/// [`Limiter`] of 16 in flight), each ending once the host's reboot is recorded or the host is
/// lost. Hosts of a batch made while it runs are added ([`Follower::add`]). Dropping it stops
/// every loop.
pub struct Follower {
    /// The loops; dropping the set aborts them.
    tasks: tokio::task::JoinSet<()>,
    /// Hosts recorded by someone else meanwhile (a monitor): their loops end at their next turn.
    recorded: Arc<std::sync::Mutex<BTreeSet<String>>>,
    /// What the loops saw, in arrival order.
    pub seen: tokio::sync::mpsc::UnboundedReceiver<Seen>,
    /// When each host followed got its loop (the missed-reboot warning counts from there).
    pub since: BTreeMap<String, std::time::Instant>,
    /// What a new loop needs.
    target: KubeTarget,
    tokens: NodeTokens,
    http: reqwest::Client,
    limiter: Arc<Limiter>,
    tx: tokio::sync::mpsc::UnboundedSender<Seen>,
    by: Arc<tokio::sync::OnceCell<String>>,
    interval: Duration,
}

impl Follower {
    /// Starts following `hosts` with `tokens`, writing records through `target`; `interval`
    /// between polls of a host that answers (1 s from `known` to the end of its install, as the
    /// report is on its API only until its live system shuts down; doubling to 30 s while it
    /// does not answer).
    pub fn start(
        target: &KubeTarget,
        tokens: &NodeTokens,
        hosts: Vec<Followed>,
        interval: Duration,
    ) -> Result<Follower> {
        let http = assisted::http_client().map_err(Error::Unexpected)?;
        let (tx, seen) = tokio::sync::mpsc::unbounded_channel();
        let mut f = Follower {
            tasks: tokio::task::JoinSet::new(),
            recorded: Default::default(),
            seen,
            since: BTreeMap::new(),
            target: target.clone(),
            tokens: tokens.clone(),
            http,
            limiter: Limiter::new(16),
            tx,
            by: Arc::new(tokio::sync::OnceCell::new()),
            interval,
        };
        f.add(hosts);
        Ok(f)
    }

    /// Follows `hosts` too, those not followed yet (a batch made while `approve --watch`
    /// runs). Returns how many were added.
    pub fn add(&mut self, hosts: Vec<Followed>) -> usize {
        let mut n = 0;
        for h in hosts {
            if self.since.contains_key(&h.host) {
                continue;
            }
            self.since.insert(h.host.clone(), std::time::Instant::now());
            let t = self.tokens.for_batch(Some(&h.token_expires_at)).0;
            let client = assisted::Client::new(
                self.http.clone(),
                assisted::origin_for(h.ip),
                &t.watcher_token,
                &t.user_token,
                self.limiter.clone(),
            );
            self.tasks.spawn(follow_one(
                self.target.clone(),
                client,
                h,
                self.interval,
                self.tx.clone(),
                (self.by.clone(), self.recorded.clone()),
            ));
            n += 1;
        }
        n
    }

    /// `host`'s reboot is recorded already (a monitor's record arrived): stop polling it.
    pub fn recorded(&self, host: &str) {
        if let Ok(mut r) = self.recorded.lock() {
            r.insert(host.to_string());
        }
    }
}

async fn follow_one(
    target: KubeTarget,
    client: assisted::Client,
    h: Followed,
    interval: Duration,
    tx: tokio::sync::mpsc::UnboundedSender<Seen>,
    (by, recorded): (
        Arc<tokio::sync::OnceCell<String>>,
        Arc<std::sync::Mutex<BTreeSet<String>>>,
    ),
) {
    let cap = interval.max((interval * 4).min(Duration::from_secs(30)));
    let mut delay = interval;
    let mut st = HostFollow::default();
    loop {
        if recorded.lock().is_ok_and(|r| r.contains(&h.host)) {
            return;
        }
        let poll = client.list_clusters(Some(&h.cluster_id)).await;
        let at = crate::csr::Time::now();
        let step = st.step(&poll, &h.macs);
        let said = match step {
            Step::Nothing => None,
            Step::Answered => Some(Seen::Answered { host: h.host.clone() }),
            Step::Lost => Some(Seen::Lost {
                host: h.host.clone(),
                url: client.base_url(),
            }),
            Step::Record(reported, started) => {
                let by = by.get_or_init(|| batch::whoami(&target)).await.clone();
                let rec = batch::Reboot {
                    host: h.host.clone(),
                    at: at.to_string(),
                    ip: h.ip.to_string(),
                    reported: reported.clone(),
                    stage_started_at: started,
                    by,
                };
                let mut converted = BTreeSet::new();
                let r =
                    record_reboots_retrying(&target, &h.batch, std::slice::from_ref(&rec), &mut converted)
                        .await;
                Some(match r {
                    Ok(_) => Seen::Recorded {
                        host: h.host.clone(),
                        reported,
                    },
                    Err(e) => Seen::Failed {
                        host: h.host.clone(),
                        message: e.to_string().lines().next().unwrap_or("").to_string(),
                    },
                })
            }
        };
        if let Some(s) = said {
            if tx.send(s).is_err() {
                return;
            }
        }
        if st.done {
            return;
        }
        delay = match &poll {
            Err(AssistedError::Unreachable { .. }) => (delay * 2).min(cap),
            _ if st.installing => interval.min(Duration::from_secs(1)),
            _ => interval,
        };
        tokio::time::sleep(delay).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::assisted::HostProgressInfo;

    fn clusters(status: &str, stage: Option<&str>, mac: &str) -> Vec<Cluster> {
        vec![Cluster {
            id: "c1".into(),
            hosts: vec![Host {
                id: "h1".into(),
                status: status.into(),
                progress: stage.map(|s| HostProgressInfo {
                    current_stage: Some(s.into()),
                    stage_started_at: Some("2026-01-10T10:20:00Z".into()),
                    ..Default::default()
                }),
                inventory: Some(format!(r#"{{"interfaces":[{{"mac_address":"{mac}"}}]}}"#)),
                ..Default::default()
            }],
            ..Default::default()
        }]
    }

    fn down() -> std::result::Result<Vec<Cluster>, AssistedError> {
        Err(AssistedError::Unreachable {
            url: "http://192.168.111.30:8090".into(),
            cause: "connection refused".into(),
        })
    }

    const MAC: &str = "52:54:00:aa:00:30";

    #[test]
    fn a_host_is_recorded_once_it_reports_its_reboot() {
        let macs = vec![MAC.to_string()];
        let mut f = HostFollow::default();
        // Not booted yet: silence before the first answer is not "lost".
        for _ in 0..10 {
            assert_eq!(f.step(&down(), &macs), Step::Nothing);
        }
        assert_eq!(f.step(&Ok(clusters("known", None, MAC)), &macs), Step::Answered);
        assert!(f.installing);
        assert_eq!(
            f.step(
                &Ok(clusters(
                    "installing-in-progress",
                    Some("Writing image to disk"),
                    MAC
                )),
                &macs
            ),
            Step::Nothing
        );
        assert_eq!(
            f.step(
                &Ok(clusters("installing-in-progress", Some("Rebooting"), MAC)),
                &macs
            ),
            Step::Record(
                "install stage Rebooting".into(),
                Some("2026-01-10T10:20:00Z".into())
            )
        );
        assert!(f.done);
    }

    #[test]
    fn another_machine_at_the_address_records_nothing() {
        let macs = vec![MAC.to_string()];
        let mut f = HostFollow::default();
        let other = clusters("installing-in-progress", Some("Rebooting"), "52:54:00:ff:ff:ff");
        assert_eq!(f.step(&Ok(other.clone()), &macs), Step::Answered);
        assert_eq!(f.step(&Ok(other), &macs), Step::Nothing);
        assert!(!f.done);
    }

    #[test]
    fn a_host_that_goes_silent_before_its_report_is_lost() {
        let macs = vec![MAC.to_string()];
        let mut f = HostFollow::default();
        f.step(
            &Ok(clusters(
                "installing-in-progress",
                Some("Writing image to disk"),
                MAC,
            )),
            &macs,
        );
        for _ in 1..LOST_AFTER {
            assert_eq!(f.step(&down(), &macs), Step::Nothing);
        }
        // An answer in between starts the count again.
        f.step(
            &Ok(clusters(
                "installing-in-progress",
                Some("Writing image to disk"),
                MAC,
            )),
            &macs,
        );
        for _ in 1..LOST_AFTER {
            assert_eq!(f.step(&down(), &macs), Step::Nothing);
        }
        assert_eq!(f.step(&down(), &macs), Step::Lost);
        assert!(f.done);
    }
}
