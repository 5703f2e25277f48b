//! `approve`: finds the pending kubelet CSRs of the expected nodes, judges each with the pure
//! verdict core ([`crate::csr::verdict_all`]) and approves only the good ones, recording every
//! approval for the node's batch *before* calling `/approval` (one record ConfigMap per
//! approval, created once: [`crate::batch::records`]).
//!
//! Rules (docs/approve.md "Verifying kubelet CSRs", issue 4):
//! - expected nodes come from the batch records in `openshift-agent-day2` (all, or one with
//!   `--batch`); `--nodes-config` / `--node NAME=IP` only add addresses to nodes of a batch.
//!   Expected IPs never come from `Node.status.addresses` (the node writes those itself);
//! - only the two kubelet signers, only pending CSRs; at most one client and one serving
//!   approval per expected node (`--reissue NODE` allows one more);
//! - the write path ([`Approver::approve`]) reads the CSR, the Node and the batch again, judges
//!   again, records the approval (a create of the node's next approval record; 409 → someone
//!   else's record: read it, judge again), then appends an `Approved` condition through `/approval` (409 → read again, re-check).
//!
//! Engine API (stable; `monitor --approve` uses it): [`ApproveOptions`], [`Approver::new`],
//! [`Approver::handle`] (one CSR as it arrives: judge, approve or deny as the options say),
//! [`Approver::observe_node`], [`Approver::node_states`], [`Approver::all_done`].
//! The command itself (table, prompt, `--watch`) is [`cmd`].

pub mod cmd;
pub mod io;

use std::collections::{BTreeMap, BTreeSet};
use std::net::IpAddr;

use k8s_openapi::api::certificates::v1::{CertificateSigningRequest, CertificateSigningRequestCondition};
use k8s_openapi::api::core::v1::{ConfigMap, Node};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time as MetaTime;
use serde::Serialize;

use crate::batch::records::{self, Created, Record};
use crate::batch::{self, Approval, BatchRecord};
use crate::csr::{
    self, escape_for_display, parse_request, verdict_all, ApprovalsRecorded, CsrView, ExistingNodes,
    ExpectedNode, ExpectedNodes, IpNet, Kind, Policy, RecordedApproval, Time, Verdict, NODE_PREFIX,
};
use crate::error::{Error, ResourceRef, Result};
use crate::kube::KubeTarget;

/// Reason of the `Approved` condition we add (kubectl uses `KubectlApprove`).
pub const APPROVED_REASON: &str = "AgentDay2Approved";
/// Reason of the `Denied` condition `--deny-invalid` adds.
pub const DENIED_REASON: &str = "AgentDay2Denied";
/// How often a write is retried after a 409 Conflict (an approval record taken or `/approval`).
const CONFLICT_RETRIES: usize = 8;

/// What the engine may do. `Default` = judge and approve, deny nothing, all batches.
#[derive(Debug, Clone, Default)]
pub struct ApproveOptions {
    /// Approve without asking (the command asks on a terminal otherwise; the engine never asks).
    pub yes: bool,
    /// Judge only: [`Approver::handle`] writes nothing and reports [`Action::WouldApprove`].
    pub dry_run: bool,
    /// [`Approver::handle`] denies rejected pending CSRs of expected nodes (Denied condition
    /// with the reasons), except those only waiting for an address (`no-expected-addresses`).
    pub deny_invalid: bool,
    /// Nodes allowed one more client and one more serving approval (`--reissue NODE`).
    pub reissue: Vec<String>,
    /// Only this batch's nodes are expected (`--batch NAME`); None: every batch record.
    pub batch: Option<String>,
    /// Addresses for expected nodes (`--node NAME=IP[,IP]`, `--nodes-config FILE`), added to the
    /// batch's. A name in no batch record is an error ([`Error::InvalidInput`], exit 3):
    /// every approval is recorded on the node's batch.
    pub extra_nodes: Vec<(String, Vec<IpAddr>)>,
    /// Approve client CSRs of hosts with no reboot record on the batch on the old rules
    /// (`--trust-unverified-boot`; [`crate::csr::Policy::trust_unverified_boot`]).
    pub trust_unverified_boot: bool,
    /// The kubelet's re-key interval in seconds (None: 15 min, the kubelet's own; a simulator
    /// passes its shorter one with the hidden `--kubelet-retry`).
    pub kubelet_retry_seconds: Option<i64>,
}

/// What happened to one CSR.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Action {
    /// Approved now (recorded on the batch, then `/approval`).
    Approved,
    /// Denied now (`--deny-invalid`).
    Denied,
    /// Passes every check; not approved (dry run, or not asked / declined).
    WouldApprove,
    /// Fails a check; left pending.
    Rejected,
    /// Waits for more information (the host's reboot record or address, rival CSRs sorted
    /// out: [`Verdict::held`]); left pending, judged again when it comes.
    Held,
    /// Not pending (approved, denied, failed or issued already): nothing done.
    NotPending,
    /// Another signer: never touched.
    Ignored,
}

impl Action {
    /// What a verdict that does not approve is: [`Action::Held`] or [`Action::Rejected`].
    pub fn refused(v: &Verdict) -> Action {
        if v.held() {
            Action::Held
        } else {
            Action::Rejected
        }
    }
}

/// The result of [`Approver::handle`] / [`Approver::approve`] for one CSR.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Outcome {
    /// CSR name.
    pub csr: String,
    /// The verdict (reasons empty when approved).
    pub verdict: Verdict,
    /// What was done.
    pub action: Action,
}

/// Progress of one expected node, from the watched Nodes and CSRs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeState {
    /// Node name.
    pub node: String,
    /// Batch that expects it.
    pub batch: String,
    /// Expected addresses (batch + flags); empty: unknown (DHCP).
    pub ips: Vec<String>,
    /// A Node of that name exists.
    pub joined: bool,
    /// Its Ready condition is True.
    pub ready: bool,
    /// A serving CSR of the node is approved (by anyone).
    pub serving_approved: bool,
    /// A serving certificate was issued to it.
    pub serving_issued: bool,
}

impl NodeState {
    /// Done as docs/monitor.md "What done means" says: Ready *and* its serving certificate issued.
    pub fn done(&self) -> bool {
        self.ready && self.serving_issued
    }
}

/// An approval decided on the state as watched ([`Approver::plan_approval`]), whose writes
/// ([`execute`]) run while the engine goes on with other events; [`Approver::complete`] takes
/// the result back. Its checks are those of [`Approver::approve`], made optimistic: the CSR is
/// the watched object (the `/approval` write carries its `resourceVersion`: a CSR changed
/// since is a 409), the Node is read again (client CSRs), and the approval record's create is
/// the compare-and-swap against any other approval of the node.
#[derive(Debug, Clone)]
pub struct Planned {
    csr: CertificateSigningRequest,
    verdict: Verdict,
    node: String,
    batch: String,
    /// The approval record to create (None: recorded already, by an interrupted run).
    record: Option<ConfigMap>,
    target: KubeTarget,
}

impl Planned {
    /// The CSR's name.
    pub fn csr_name(&self) -> &str {
        self.csr.metadata.name.as_deref().unwrap_or("")
    }

    /// The CSR as watched.
    pub fn csr(&self) -> &CertificateSigningRequest {
        &self.csr
    }

    /// The node it is for.
    pub fn node(&self) -> &str {
        &self.node
    }
}

/// What [`Approver::plan_approval`] makes of a CSR.
#[derive(Debug)]
pub enum Plan {
    /// Run [`execute`], then [`Approver::complete`].
    Io(Box<Planned>),
    /// Another approval of the same node and kind is being written: judge it after that one.
    Wait,
    /// Not an approval to pipeline (refused, not pending, dry run, a batch to convert, ...):
    /// use [`Approver::handle`].
    Handle,
}

/// One node's serving CSRs: name → (created, approved, issued).
type ServingCsrs = BTreeMap<String, (Option<Time>, bool, bool)>;

/// What the writes of a [`Planned`] approval met.
#[derive(Debug, Clone)]
pub enum Executed {
    /// Approved: the CSR as the API server returned it.
    Approved(Box<CertificateSigningRequest>),
    /// The Node exists now (client CSR): judged again.
    NodeExists(Box<Node>),
    /// Someone else's approval record took this one's number: judged again with it.
    Taken(Box<ConfigMap>),
    /// The CSR changed since it was watched (409 on `/approval`): read it again.
    Conflict,
    /// The node's batch was deleted meanwhile (`add-nodes batch delete`): nothing written.
    BatchGone,
}

/// What a record seen asks to judge again ([`Approver::observe_record`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Touched {
    /// Nothing new.
    Nothing,
    /// The pending CSRs of this node.
    Node(String),
    /// Every pending CSR.
    All,
}

#[derive(Debug, Clone)]
struct BatchState {
    rec: BatchRecord,
    rv: String,
    /// Server time the record was created (ConfigMap creationTimestamp), else `createdAt`.
    created: Time,
}

/// The approval engine: the expected nodes, the cluster facts, and what it has seen of CSRs
/// and Nodes (fed by [`Approver::refresh`] or by watches through [`Approver::handle`] /
/// [`Approver::observe_node`]).
pub struct Approver {
    target: KubeTarget,
    opts: ApproveOptions,
    policy: Policy,
    /// Newest first (the newest batch that names a host defines it).
    batches: Vec<BatchState>,
    expected: ExpectedNodes,
    node_batch: BTreeMap<String, String>,
    existing: BTreeSet<String>,
    ready: BTreeSet<String>,
    csrs: BTreeMap<String, CertificateSigningRequest>,
    /// (name, uid) → node the CSR speaks for ([`Approver::node_of`]).
    node_cache: std::sync::Mutex<BTreeMap<(String, String), Option<String>>>,
    /// Batch → its records (approvals, reboots) as read or watched, in arrival order: kept
    /// apart from the batches, so a batch read again is merged with them.
    records: BTreeMap<String, Vec<Record>>,
    /// Names of the record ConfigMaps seen (their watch echoes are skipped).
    seen_records: BTreeSet<String>,
    /// Every batch's approvals as the verdicts take them, kept up to date record by record
    /// (never rebuilt per CSR: that made approve quadratic in the batch size).
    recorded: ApprovalsRecorded,
    /// Node → the CSRs (names) that speak for it ([`Approver::node_of`]), kept per CSR event.
    by_node: BTreeMap<String, BTreeSet<String>>,
    /// Node (from the requester `system:node:NAME`) → its serving CSRs.
    serving: BTreeMap<String, ServingCsrs>,
    /// Expected nodes Ready with their serving certificate issued ([`NodeState::done`]).
    done: BTreeSet<String>,
    /// (node, kind) of the approvals planned and not completed yet ([`Approver::plan_approval`]):
    /// another CSR of the same node and kind waits for it.
    in_flight: BTreeSet<(String, Kind)>,
    /// Names of the approval records being created by this run: their watch echo may come
    /// before the write completes, and must not make the node's CSRs be judged again.
    own_pending: BTreeSet<String>,
    by: String,
    /// CSR → why recording its approval on the batch failed (said in the closing hints instead
    /// of "not approved (dry run, or not confirmed)").
    write_failures: BTreeMap<String, String>,
    /// Batch ConfigMaps that are not batch records: (name, what is wrong, hostnames read from
    /// them where possible). Skipped; their hosts' CSRs are held naming the field.
    bad_batches: Vec<(String, String, Vec<String>)>,
    /// Node → (batch, field): its reboot record is unusable (`at` not RFC 3339).
    bad_reboots: BTreeMap<String, (String, String)>,
    /// Under `--batch`: the hosts another batch expects, kept current from [`Approver::batch_cms`]
    /// as batches come and go. Their CSRs are out of scope: not judged, not shown, no exit 7
    /// ([`Approver::out_of_scope`]).
    other_hosts: OtherHosts,
    /// Every batch ConfigMap (labelled [`batch::LABEL`]) as last read or watched, by name: under
    /// `--batch` the other batches' hosts are read from it ([`Approver::observe_batch`]).
    batch_cms: BTreeMap<String, ConfigMap>,
    /// `--node` names left out because another batch expects them (under `--batch`), with that
    /// batch: said once in the hints.
    others_named: BTreeMap<String, String>,
    /// Batches forgotten as deleted and not said yet ([`Approver::take_forgotten`]): a delete
    /// found by the approval's own read comes before the watch's event, which is then nothing.
    forgotten: Vec<String>,
    /// What to say of batch ConfigMaps edited into something that is not a batch record while
    /// the run watches, not said yet ([`Approver::take_broken`]).
    broken: Vec<String>,
}

fn is_pending(c: &CertificateSigningRequest) -> bool {
    let st = c.status.as_ref();
    st.and_then(|s| s.conditions.as_ref())
        .is_none_or(|c| c.is_empty())
        && st
            .and_then(|s| s.certificate.as_ref())
            .is_none_or(|c| c.0.is_empty())
}

fn has_condition(c: &CertificateSigningRequest, t: &str) -> bool {
    c.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|cs| cs.iter().any(|x| x.type_ == t && x.status == "True"))
}

fn has_certificate(c: &CertificateSigningRequest) -> bool {
    c.status
        .as_ref()
        .and_then(|s| s.certificate.as_ref())
        .is_some_and(|b| !b.0.is_empty())
}

fn kube_409(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == 409)
}

fn parse_time(s: &str) -> Option<Time> {
    s.parse::<Time>().ok()
}

/// Static addresses of a nodes-config host: `networkConfig.interfaces[].ipv4|ipv6.address[].ip`.
fn nmstate_ips(nc: &serde_json::Value) -> Vec<IpAddr> {
    let mut out = Vec::new();
    for i in nc
        .get("interfaces")
        .and_then(|v| v.as_array())
        .into_iter()
        .flatten()
    {
        for fam in ["ipv4", "ipv6"] {
            for a in i
                .pointer(&format!("/{fam}/address"))
                .and_then(|v| v.as_array())
                .into_iter()
                .flatten()
            {
                if let Some(ip) = a.get("ip").and_then(|v| v.as_str()).and_then(|s| s.parse().ok()) {
                    out.push(ip);
                }
            }
        }
    }
    out
}

/// `(hostname, static IPs)` of every host of a nodes-config file (`--nodes-config`), for
/// [`ApproveOptions::extra_nodes`]. Errors: the file's problems ([`Error::InvalidConfig`] /
/// [`Error::Io`]), a host without hostname (exit 3).
pub fn nodes_config_addresses(path: &std::path::Path) -> Result<Vec<(String, Vec<IpAddr>)>> {
    let text = std::fs::read_to_string(path).map_err(|e| Error::Io {
        path: path.display().to_string(),
        source: e,
    })?;
    let cfg = crate::nodes_config::parse(&text, path).map_err(Error::InvalidConfig)?;
    let mut out = Vec::new();
    for (i, h) in cfg.hosts.iter().enumerate() {
        let name = h.hostname.clone().ok_or_else(|| Error::InvalidInput {
            field: format!("{}: hosts[{i}].hostname", path.display()),
            message: "is required (approve matches CSRs by node name)".into(),
        })?;
        out.push((
            name,
            h.network_config.as_ref().map(nmstate_ips).unwrap_or_default(),
        ));
    }
    Ok(out)
}

/// The batch ConfigMaps that are not batch records, or have a record that is not one (name,
/// what is wrong, the hostnames they name where readable).
type BadBatches = Vec<(String, String, Vec<String>)>;

/// What [`read_batches`] found: the batches (newest first, their records merged in), the bad
/// ones, the records by batch with the names of their ConfigMaps, and every batch ConfigMap.
type ReadBatches = (
    Vec<BatchState>,
    BadBatches,
    BTreeMap<String, Vec<Record>>,
    BTreeSet<String>,
    BTreeMap<String, ConfigMap>,
);

/// The hostnames a batch ConfigMap names, read as far as they parse
/// ([`batch::hostnames_of`]; a record that is not one still names its hosts).
fn cm_hostnames(cm: &ConfigMap) -> Vec<String> {
    cm.data
        .as_ref()
        .and_then(|d| d.get(batch::DATA_KEY))
        .map(|t| batch::hostnames_of(t))
        .unwrap_or_default()
}

/// Under `--batch B`: hostname → the other batch that has it (issue 22: `approve --batch B`
/// rejected the CSRs of every other batch's nodes as `not-expected-node` and exited 7).
pub type OtherHosts = BTreeMap<String, String>;

/// The hosts of `this` batch's neighbours in `all` (every batch ConfigMap, `this` among them),
/// hostnames read as far as they parse ([`batch::hostnames_of`], broken records too): the hosts
/// only other batches name, and those of `this` that a newer batch names too (the newest batch
/// naming a host is the one that expects it, as without `--batch`). Pure.
fn other_batches_hosts(this: &ConfigMap, all: &[ConfigMap]) -> OtherHosts {
    let hosts = cm_hostnames;
    let key = |cm: &ConfigMap| {
        (
            cm.metadata.creation_timestamp.as_ref().map(|t| t.0),
            cm.metadata.name.clone().unwrap_or_default(),
        )
    };
    let mine: BTreeSet<String> = hosts(this).into_iter().collect();
    let mut rest: Vec<&ConfigMap> = all
        .iter()
        .filter(|c| c.metadata.name != this.metadata.name)
        .collect();
    // Oldest first, so that the newest batch naming a host is the one kept.
    rest.sort_by_key(|c| key(c));
    let mut out = OtherHosts::new();
    for cm in rest {
        let newer = key(cm) > key(this);
        for h in hosts(cm) {
            if !mine.contains(&h) || newer {
                out.insert(h, cm.metadata.name.clone().unwrap_or_default());
            }
        }
    }
    out
}

fn batch_state(cm: &ConfigMap) -> Result<BatchState> {
    let rec = batch::from_config_map(cm)?;
    if parse_time(&rec.token_expires_at).is_none() {
        return Err(Error::BadObject {
            resource: ResourceRef::namespaced("ConfigMap", batch::NAMESPACE, &rec.name),
            message: format!(
                "tokenExpiresAt {:?} is not an RFC 3339 time",
                escape_for_display(&rec.token_expires_at, 60)
            ),
        });
    }
    let created = cm
        .metadata
        .creation_timestamp
        .as_ref()
        .map(|t| t.0)
        .or_else(|| parse_time(&rec.created_at))
        .unwrap_or(Time::UNIX_EPOCH);
    Ok(BatchState {
        rv: cm.metadata.resource_version.clone().unwrap_or_default(),
        rec,
        created,
    })
}

impl Approver {
    /// The expected nodes, from the batches (newest first) and `--node` / `--reissue`.
    /// `strict` (at the start): a `--node` or `--reissue` name no batch expects is an error
    /// (exit 3); later (a batch edited or deleted while watching) it is left out with a warning.
    /// Under `--batch`, a `--node` name another batch expects is left out (its CSRs are out of
    /// scope) and said in the hints.
    fn rebuild_expected(&mut self, strict: bool) -> Result<()> {
        let mut nodes: Vec<ExpectedNode> = Vec::new();
        let mut node_batch = BTreeMap::new();
        let mut bad_reboots = BTreeMap::new();
        for b in &self.batches {
            // Checked when read ([`batch_state`]).
            let expires = parse_time(&b.rec.token_expires_at).unwrap_or(Time::UNIX_EPOCH);
            // Host → its first reboot record on this batch (and its position, for the message).
            let mut first_reboot: BTreeMap<&str, (usize, &batch::Reboot)> = BTreeMap::new();
            for (i, r) in b.rec.reboots.iter().enumerate() {
                first_reboot.entry(r.host.as_str()).or_insert((i, r));
            }
            for h in &b.rec.hosts {
                if node_batch.contains_key(&h.hostname) || self.other_hosts.contains_key(&h.hostname) {
                    continue; // a newer batch names it
                }
                let ips: Vec<IpAddr> = h.ips.iter().filter_map(|i| i.parse().ok()).collect();
                node_batch.insert(h.hostname.clone(), b.rec.name.clone());
                // The first report of this host's reboot on its batch (monitor keeps the first).
                // One whose time does not parse holds the host's client CSRs ([`Approver::amend`]).
                let rebooted_at = match first_reboot.get(h.hostname.as_str()) {
                    Some((i, r)) => match parse_time(&r.at) {
                        Some(t) => Some(t),
                        None => {
                            bad_reboots.insert(
                                h.hostname.clone(),
                                (
                                    b.rec.name.clone(),
                                    format!(
                                        "reboots[{i}].at {:?} is not an RFC 3339 time",
                                        escape_for_display(&r.at, 60)
                                    ),
                                ),
                            );
                            None
                        }
                    },
                    None => None,
                };
                nodes.push(ExpectedNode {
                    hostname: h.hostname.clone(),
                    ips,
                    recorded_at: b.created,
                    token_expires: expires,
                    reissue: self.opts.reissue.iter().filter(|r| **r == h.hostname).count() as u32,
                    rebooted_at,
                });
            }
        }
        let mut others_named = BTreeMap::new();
        for (name, ips) in &self.opts.extra_nodes {
            if let Some(b) = self.other_hosts.get(name) {
                others_named.insert(name.clone(), b.clone());
                continue;
            }
            let Some(n) = nodes.iter_mut().find(|n| &n.hostname == name) else {
                if !strict {
                    tracing::info!("--node {name}: no batch expects it any more; left out");
                    continue;
                }
                return Err(Error::InvalidInput {
                    field: format!("--node {name}"),
                    message: format!(
                        "{name} is in no batch record{}; approve records every approval on the node's batch (see `oc agent-day2 add-nodes batch list`)",
                        self.opts.batch.as_ref().map(|b| format!(" (--batch {b})")).unwrap_or_default()
                    ),
                });
            };
            // First: the operator's word is newer than a recorded DHCP lease, and the
            // follower polls a host at its first address ([`Approver::hosts_to_follow`]).
            for (i, ip) in ips.iter().enumerate() {
                n.ips.retain(|x| x != ip);
                n.ips.insert(i, *ip);
            }
        }
        for r in &self.opts.reissue {
            if !node_batch.contains_key(r) && strict {
                return Err(Error::InvalidInput {
                    field: format!("--reissue {r}"),
                    message: format!("{r} is not an expected node of any batch record"),
                });
            }
        }
        self.expected = ExpectedNodes::new(nodes);
        self.others_named = others_named;
        self.node_batch = node_batch;
        self.bad_reboots = bad_reboots;
        self.rebuild_approvals();
        self.done = self
            .expected
            .nodes
            .iter()
            .filter(|n| self.node_done(n))
            .map(|n| n.hostname.clone())
            .collect();
        Ok(())
    }

    /// [`Approver::recorded`] from the batches (after a batch changed, or the CSRs were listed
    /// again: older records take the CSR's time and requester from the CSR itself).
    ///
    /// Only the approvals recorded on the batch that expects the node now (the newest naming
    /// it) count: a machine re-imaged on purpose (`add-nodes --reimage`) starts afresh under
    /// its new batch, whose reboot record binds the new kubelet's CSRs; the old batch's
    /// approvals made its serving CSR "already approved" for ever and raised an impostor alarm
    /// against the genuine machine (issue 22 item 3).
    fn rebuild_approvals(&mut self) {
        let mut approvals: Vec<RecordedApproval> = self
            .batches
            .iter()
            .flat_map(|b| {
                b.rec
                    .approvals
                    .iter()
                    .filter(|a| self.approval_counts(a, &b.rec.name))
            })
            .filter_map(|a| self.recorded_approval(a))
            .collect();
        // The CSRs that carry our approval count as well, recorded or not ([`approval_on_csr`]).
        let known: BTreeSet<String> = approvals.iter().map(|a| a.csr.clone()).collect();
        let witnessed: Vec<RecordedApproval> = self
            .csrs
            .values()
            .filter_map(approval_on_csr)
            .filter(|(b, a)| !known.contains(&a.csr) && self.approval_counts(a, b))
            .filter_map(|(_, a)| self.recorded_approval(&a))
            .collect();
        approvals.extend(witnessed);
        self.recorded = ApprovalsRecorded { approvals };
    }

    /// [`Approver::rebuild_approvals`] for one CSR seen: its approval by an approve run counts
    /// from now on, also when no record of it exists (kept per CSR event, not rebuilt).
    fn witness_approval(&mut self, csr: &CertificateSigningRequest) {
        let Some((b, a)) = approval_on_csr(csr) else {
            return;
        };
        if self.recorded.approvals.iter().any(|r| r.csr == a.csr) || !self.approval_counts(&a, &b) {
            return;
        }
        if let Some(r) = self.recorded_approval(&a) {
            self.recorded.approvals.push(r);
        }
    }

    /// Whether approval `a`, recorded on batch `on`, counts: always on the batch that expects
    /// the node now; on an older batch only when made after that batch was recorded (an
    /// approver still working from the old batch after a re-image: a break-it trial got a
    /// rogue CSR approved that way, and the real kubelet's then passed with no alarm).
    fn approval_counts(&self, a: &Approval, on: &str) -> bool {
        let Some(nb) = self.node_batch.get(&a.node) else {
            return true;
        };
        if nb == on {
            return true;
        }
        let current = self.batches.iter().find(|b| &b.rec.name == nb).map(|b| b.created);
        match (current, parse_time(&a.at)) {
            (Some(c), Some(at)) => at >= c,
            _ => true,
        }
    }

    /// One approval as the verdicts take it (None: a kind they do not know).
    fn recorded_approval(&self, a: &Approval) -> Option<RecordedApproval> {
        let kind = match a.kind.as_str() {
            "client" => Kind::Client,
            "serving" => Kind::Serving,
            _ => return None,
        };
        // Older records lack the CSR's time and requester: the CSR, while it exists, has them.
        let obj = self.csrs.get(&a.csr);
        Some(RecordedApproval {
            node: a.node.clone(),
            kind,
            csr: a.csr.clone(),
            created: a
                .csr_created
                .as_deref()
                .and_then(parse_time)
                .or_else(|| obj.and_then(|c| c.metadata.creation_timestamp.as_ref().map(|t| t.0))),
            requester: a
                .requester
                .clone()
                .or_else(|| obj.and_then(|c| c.spec.username.clone())),
        })
    }

    /// Ready with a serving certificate issued for a CSR made since its batch was recorded (a
    /// re-imaged machine's earlier incarnation, same name, had its own).
    fn node_done(&self, n: &ExpectedNode) -> bool {
        self.ready.contains(&n.hostname) && self.serving_of(n).1
    }

    /// (approved, issued) over `n`'s serving CSRs made since its batch was recorded.
    fn serving_of(&self, n: &ExpectedNode) -> (bool, bool) {
        self.serving
            .get(&n.hostname)
            .into_iter()
            .flat_map(|m| m.values())
            .filter(|(created, _, _)| created.is_none_or(|t| t >= n.recorded_at))
            .fold((false, false), |(a, i), (_, ca, ci)| (a || *ca, i || *ci))
    }

    /// Updates [`Approver::done`] for `node` after an event about it.
    fn update_done(&mut self, node: &str) {
        let Some(n) = self.expected.get(node) else {
            return;
        };
        if self.node_done(n) {
            self.done.insert(node.to_string());
        } else {
            self.done.remove(node);
        }
    }

    /// Replaces the client (after the kubeconfig was read again on a 401).
    pub fn set_target(&mut self, target: &KubeTarget) {
        self.target = target.clone();
    }

    /// The connection in use.
    pub fn target(&self) -> &KubeTarget {
        &self.target
    }

    /// The options.
    pub fn options(&self) -> &ApproveOptions {
        &self.opts
    }

    /// The expected nodes (newest batch wins for a hostname named twice).
    pub fn expected(&self) -> &ExpectedNodes {
        &self.expected
    }

    /// The hosts whose reboot reports `approve --watch` follows itself ([`crate::follow`]):
    /// expected nodes with a known address, no reboot record and no Node yet, unless
    /// `--trust-unverified-boot` makes records moot. Each with its batch's MACs, cluster and
    /// token expiry; a node whose batch is unknown or lists no such host is left out.
    pub fn hosts_to_follow(&self) -> Vec<crate::follow::Followed> {
        if self.opts.trust_unverified_boot {
            return vec![];
        }
        self.expected
            .nodes
            .iter()
            .filter(|n| n.rebooted_at.is_none() && !self.existing.contains(&n.hostname))
            .filter_map(|n| {
                let ip = *n.ips.first()?;
                let b = self.batch_of(&n.hostname)?;
                let rec = &self.batches.iter().find(|s| s.rec.name == b)?.rec;
                let h = rec.hosts.iter().find(|h| h.hostname == n.hostname)?;
                Some(crate::follow::Followed {
                    host: n.hostname.clone(),
                    batch: b.to_string(),
                    ip,
                    macs: h.macs.clone(),
                    cluster_id: rec.cluster_id.clone(),
                    token_expires_at: rec.token_expires_at.clone(),
                })
            })
            .collect()
    }

    /// The batch that expects `node`.
    pub fn batch_of(&self, node: &str) -> Option<&str> {
        self.node_batch.get(node).map(String::as_str)
    }

    /// The latest token expiry among the batches (None: no batch).
    pub fn token_expires(&self) -> Option<Time> {
        self.expected.nodes.iter().map(|n| n.token_expires).max()
    }

    /// What the operator can do about expected nodes that cannot get an approval as things
    /// stand: one line per expected node whose addresses are unknown (DHCP: no serving approval
    /// until they are given; a node already Ready with its serving certificate issued needs
    /// nothing and gets no hint), and one per pending client CSR of an expected node whose
    /// Node exists already ([`Approver::existing_node_client_hints`]).
    pub fn hints(&self) -> Vec<String> {
        let done: BTreeSet<String> = self
            .node_states()
            .into_iter()
            .filter(NodeState::done)
            .map(|n| n.node)
            .collect();
        let mut out: Vec<String> = self
            .bad_batches
            .iter()
            .map(|(b, m, _)| {
                format!(
                    "ConfigMap {}/{b} is not a batch record ({}): skipped, its hosts' CSRs are held; the other batches are judged as usual (exit 3 at the end)",
                    batch::NAMESPACE,
                    escape_for_display(m, 300)
                )
            })
            .collect();
        out.extend(self
            .expected
            .nodes
            .iter()
            .filter(|n| n.ips.is_empty() && !done.contains(&n.hostname))
            .map(|n| {
                format!(
                    "{0}: address unknown (DHCP): its serving CSR is not approved until you give it: \
                     `oc agent-day2 monitor --ip-addresses IP` (records it on the batch) or `approve --node {0}=IP`",
                    n.hostname
                )
            }));
        out.extend(self.others_named.iter().map(|(n, b)| {
            format!(
                "--node {n}: batch {b} (newer) expects {n}, so under --batch {} its CSRs are left to `approve --batch {b}`",
                self.opts.batch.as_deref().unwrap_or("")
            )
        }));
        out.extend(self.existing_node_client_hints());
        out
    }

    /// One line per pending client CSR that names an expected node whose Node exists already.
    /// No bootstrap client certificate is approved for a Node that exists (the machine-approver
    /// refuses it too: "node already exists"; the kubelet renews its client certificate as
    /// `system:node:NAME`, which the controller manager's selfnodeclient check handles:
    /// docs/approve.md "Verifying kubelet CSRs"), and `--reissue` does not change that. What the
    /// CSR is decides what to say, so no one deletes a good Node on a stale or foreign CSR's
    /// account:
    /// - made before the node's batch was recorded, or before its host's reboot report: from a
    ///   replaced image or someone else; never approved; the Node is fine: delete the CSR;
    /// - otherwise a second bootstrap request: a reinstalled machine, or another holder of the
    ///   bootstrap token; only a deliberate reinstall justifies deleting the old Node (then
    ///   `--reissue` when a client approval is recorded).
    fn existing_node_client_hints(&self) -> Vec<String> {
        self.evaluate_all(now())
            .into_iter()
            .filter(|(_, v)| v.kind == Kind::Client && !v.approve)
            .filter(|(_, v)| v.reasons.iter().any(|r| r.code() == "node-exists"))
            .filter_map(|(c, v)| {
                let node = v.node.clone().filter(|n| self.expected.get(n).is_some())?;
                let csr = escape_for_display(&c.name, 80);
                let batch = self.node_batch.get(&node).cloned().unwrap_or_default();
                if let Some(r) = v
                    .reasons
                    .iter()
                    .find(|r| matches!(r.code(), "created-before-batch" | "created-before-reboot"))
                {
                    let when = if r.code() == "created-before-batch" {
                        format!("before batch {batch} was recorded (from a replaced image, or someone else's)")
                    } else {
                        format!("before {node}'s own assisted-service reported its reboot (not its installed system's)")
                    };
                    return Some(format!(
                        "{node}: client CSR {csr} was made {when}: it is never approved and Node {node} does not need it (nothing is wrong with the Node); delete the CSR (`oc delete csr {csr}`)"
                    ));
                }
                let recorded = self
                    .recorded
                    .approvals
                    .iter()
                    .any(|a| a.node == node && a.kind == Kind::Client);
                Some(format!(
                    "{node}: client CSR {csr}: Node {node} exists already, and a bootstrap client certificate is never approved for a node that has joined (its kubelet renews its own as system:node:{node}), with or without --reissue; so this CSR comes from a machine booted again from {node}'s image or from another holder of the bootstrap token. Do not delete the Node on its account: delete the CSR (`oc delete csr {csr}`) or deny it (`approve --deny-invalid`); only if you reinstalled {node} on purpose, delete the old Node (`oc delete node {node}`), then run approve again{again}",
                    again = if recorded {
                        format!(" with --reissue {node} (its first client approval is recorded)")
                    } else {
                        String::new()
                    },
                ))
            })
            .collect()
    }

    /// Records a CSR seen (watch event or re-read) without judging it; keeps the indexes by
    /// node up to date (O(log n) per CSR).
    pub fn observe_csr(&mut self, csr: &CertificateSigningRequest) {
        let Some(n) = &csr.metadata.name else {
            return;
        };
        // A CSR's status only moves forward: an older copy (the `/approval` write's answer,
        // taken back after the watch already delivered the issued certificate) must not undo
        // what is known. It made a finished `approve --watch` see a node's serving certificate
        // as not issued and exit 7 (a flake of the e2e tests in cold CI runs).
        if let Some(known) = self.csrs.get(n) {
            let same = known.metadata.uid == csr.metadata.uid;
            if same && has_certificate(known) && !has_certificate(csr) {
                return;
            }
            if same
                && has_condition(known, "Approved")
                && !has_condition(csr, "Approved")
                && !has_certificate(csr)
            {
                return;
            }
        }
        if let Some(node) = self.node_of(csr) {
            self.by_node.entry(node).or_default().insert(n.clone());
        }
        if csr.spec.signer_name == csr::SERVING_SIGNER {
            if let Some(node) = csr
                .spec
                .username
                .as_deref()
                .and_then(|u| u.strip_prefix(NODE_PREFIX))
            {
                self.serving.entry(node.to_string()).or_default().insert(
                    n.clone(),
                    (
                        csr.metadata.creation_timestamp.as_ref().map(|t| t.0),
                        has_condition(csr, "Approved"),
                        has_certificate(csr),
                    ),
                );
                let node = node.to_string();
                self.csrs.insert(n.clone(), csr.clone());
                self.witness_approval(csr);
                self.update_done(&node);
                return;
            }
        }
        self.csrs.insert(n.clone(), csr.clone());
        self.witness_approval(csr);
    }

    /// Forgets a deleted CSR.
    pub fn forget_csr(&mut self, name: &str) {
        let Some(c) = self.csrs.remove(name) else {
            return;
        };
        if let Some(node) = self.node_of(&c) {
            if let Some(set) = self.by_node.get_mut(&node) {
                set.remove(name);
            }
        }
        if let Some(node) = c
            .spec
            .username
            .as_deref()
            .and_then(|u| u.strip_prefix(NODE_PREFIX))
        {
            if let Some(m) = self.serving.get_mut(node) {
                if m.remove(name).is_some() {
                    let node = node.to_string();
                    self.update_done(&node);
                }
            }
        }
    }

    /// The pending CSRs (names) that speak for `node`.
    pub fn pending_of(&self, node: &str) -> Vec<String> {
        self.by_node
            .get(node)
            .into_iter()
            .flatten()
            .filter(|n| self.csrs.get(*n).is_some_and(is_pending))
            .cloned()
            .collect()
    }

    /// Records a Node (exists; Ready or not).
    pub fn observe_node(&mut self, node: &Node) {
        let Some(name) = node.metadata.name.clone() else {
            return;
        };
        let ready = node
            .status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"));
        if ready {
            self.ready.insert(name.clone());
        } else {
            self.ready.remove(&name);
        }
        self.update_done(&name);
        self.existing.insert(name);
    }

    /// A kubelet CSR for a node another batch expects, under `--batch` ([`Approver::other_hosts`]):
    /// left alone (not judged, not shown; the other batch's approve run handles it).
    pub fn out_of_scope(&self, csr: &CertificateSigningRequest) -> bool {
        let Some(b) = &self.opts.batch else {
            return false;
        };
        // Under `--batch B`, B's nodes only: those of another batch and those no batch names
        // (a deleted batch's left-over CSRs made every later `approve --batch` exit 7).
        !self.node_of(csr).is_some_and(|n| self.in_batch_scope(b, &n))
    }

    /// Whether node `n` is one `--batch b` judges: expected through it, or named by it when its
    /// record is broken (held, `bad-batch-record`).
    fn in_batch_scope(&self, b: &str, n: &str) -> bool {
        self.node_batch.contains_key(n)
            || self
                .bad_batches
                .iter()
                .any(|(name, _, hosts)| name == b && hosts.iter().any(|h| h == n))
    }

    /// How many pending kubelet CSRs are left alone under `--batch`
    /// ([`Approver::out_of_scope`]), and the other batches they belong to (`no batch` for a
    /// node none names).
    pub fn out_of_scope_pending(&self) -> (usize, BTreeSet<String>) {
        let mut batches = BTreeSet::new();
        let mut n = 0;
        for c in self.csrs.values().filter(|c| is_pending(c)) {
            if CsrView::from_k8s(c).kind() == Kind::NotKubelet || !self.out_of_scope(c) {
                continue;
            }
            n += 1;
            let b = self
                .node_of(c)
                .and_then(|h| self.other_hosts.get(&h).cloned())
                .unwrap_or_else(|| "no batch".into());
            batches.insert(b);
        }
        (n, batches)
    }

    /// Forgets a deleted Node.
    pub fn forget_node(&mut self, name: &str) {
        self.existing.remove(name);
        self.ready.remove(name);
        self.update_done(name);
    }

    /// A batch ConfigMap was created or changed (e.g. `monitor --ip-addresses` recorded a DHCP
    /// host's address, or a new `add-nodes` run). Returns true when what is expected changed
    /// (pending CSRs should be judged again). Under `--batch B`, another batch only changes
    /// which hosts are left to it ([`Approver::out_of_scope`]): a batch made while
    /// `approve --batch B --watch` runs takes its hosts out of B's judgement.
    pub fn observe_batch(&mut self, cm: &ConfigMap) -> Result<bool> {
        let cm_name = cm.metadata.name.clone().unwrap_or_default();
        self.batch_cms.insert(cm_name.clone(), cm.clone());
        if self.opts.batch.as_ref().is_some_and(|b| *b != cm_name) {
            return self.refresh_others();
        }
        // Our own compare-and-swap's echo: already known, skip parsing it again.
        if let Some(rv) = &cm.metadata.resource_version {
            if self.batches.iter().any(|b| b.rec.name == cm_name && &b.rv == rv) {
                return Ok(false);
            }
        }
        let st = match batch_state(cm) {
            Ok(st) => st,
            // Edited into something that is not a batch record: skipped from now on, its
            // hosts' CSRs held naming the field ([`Approver::amend`]).
            Err(Error::BadObject { message, .. }) => {
                let hosts = cm_hostnames(cm);
                if !self.bad_batches.iter().any(|(n, _, _)| *n == cm_name) {
                    self.broken.push(broken_batch_warning(&cm_name, &message));
                }
                self.bad_batches.retain(|(n, _, _)| *n != cm_name);
                self.bad_batches.push((cm_name.clone(), message, hosts));
                self.batches.retain(|b| b.rec.name != cm_name);
                self.rebuild_expected(false)?;
                return Ok(true);
            }
            Err(e) => return Err(e),
        };
        self.bad_batches.retain(|(n, _, _)| *n != cm_name);
        let mut st = st;
        for r in self.records.get(&cm_name).into_iter().flatten() {
            records::add(&mut st.rec, r);
        }
        let before = self.expected.clone();
        match self.batches.iter_mut().find(|b| b.rec.name == st.rec.name) {
            Some(b) => *b = st,
            None => {
                self.batches.push(st);
                self.batches
                    .sort_by(|a, b| (b.created, &b.rec.name).cmp(&(a.created, &a.rec.name)));
            }
        }
        self.rebuild_expected(false)?;
        Ok(self.expected != before)
    }

    /// A batch ConfigMap was deleted (`add-nodes batch delete`, issue 22: a running approver
    /// went on approving the deleted batch's CSRs, a rogue one included). Its hosts are no
    /// longer expected: their pending CSRs are judged again (true) and rejected as
    /// `not-expected-node` unless another batch names them.
    ///
    /// Errors: under `--batch B`, B itself deleted ends the run (exit 4, naming the batch):
    /// nothing is left to approve.
    pub fn forget_batch(&mut self, name: &str) -> Result<bool> {
        if self.opts.batch.as_deref() == Some(name) {
            return Err(Error::NotFound {
                resource: ResourceRef {
                    kind: "batch".into(),
                    namespace: None,
                    name: Some(format!("{name:?}")),
                },
                why: Some(
                    "deleted while this run watched it (add-nodes batch delete): none of its CSRs is approved any more"
                        .into(),
                ),
            });
        }
        let known = self.batch_cms.remove(name).is_some()
            | self.batches.iter().any(|b| b.rec.name == name)
            | self.bad_batches.iter().any(|(n, _, _)| n == name);
        if !known {
            return Ok(false);
        }
        self.batches.retain(|b| b.rec.name != name);
        self.bad_batches.retain(|(n, _, _)| n != name);
        // Its records are kept: a batch of that name made again (deleted and re-created as it
        // was) is merged with them ([`Approver::observe_batch`]); a re-check trial saw a
        // re-created batch's reboot record ignored and its host's CSR held for good.
        self.forgotten.push(name.to_string());
        if self.batches.is_empty() && self.bad_batches.is_empty() {
            // Nothing is expected any more: the run ends as one started without a batch does,
            // not with "every expected node is Ready" (a break-it trial got exit 0).
            return Err(Error::NotFound {
                resource: ResourceRef {
                    kind: "batch".into(),
                    namespace: None,
                    name: None,
                },
                why: Some(format!(
                    "the last batch record ({name}) was deleted while this run watched (add-nodes batch delete): no node is expected any more"
                )),
            });
        }
        if self.opts.batch.is_some() {
            self.refresh_others()?;
        }
        self.rebuild_expected(false)?;
        Ok(true)
    }

    /// The sentences about batch ConfigMaps that stopped being batch records since the last
    /// call ([`broken_batch_warning`]), to be said once each (a re-check trial got exit 3 with
    /// nothing naming the ConfigMap).
    pub fn take_broken(&mut self) -> Vec<String> {
        std::mem::take(&mut self.broken)
    }

    /// The batches forgotten as deleted since the last call, to be said once each.
    pub fn take_forgotten(&mut self) -> Vec<String> {
        std::mem::take(&mut self.forgotten)
    }

    /// Under `--batch B`: the other batches' hosts again, from [`Approver::batch_cms`]; the
    /// expected nodes rebuilt when they changed. Returns whether anything changed.
    fn refresh_others(&mut self) -> Result<bool> {
        let Some(b) = self.opts.batch.clone() else {
            return Ok(false);
        };
        let Some(this) = self.batch_cms.get(&b) else {
            return Ok(false);
        };
        let all: Vec<ConfigMap> = self.batch_cms.values().cloned().collect();
        let others = other_batches_hosts(this, &all);
        if others == self.other_hosts {
            return Ok(false);
        }
        self.other_hosts = others;
        self.rebuild_expected(false)?;
        Ok(true)
    }

    /// A record ConfigMap of a batch ([`records`]: an approval, a reboot report) seen on the
    /// watch or written by us or `monitor`: merged into its batch, the indexes updated for that
    /// one node. Returns what to judge again: [`Touched::Node`] (its pending CSRs),
    /// [`Touched::All`] (a record that does not parse holds its batch's hosts) or
    /// [`Touched::Nothing`] (known already, another batch than `--batch`, or a host another
    /// batch defines). A record of a batch not seen yet is kept for when the batch comes.
    pub fn observe_record(&mut self, cm: &ConfigMap) -> Result<Touched> {
        let name = cm.metadata.name.clone().unwrap_or_default();
        if self.seen_records.contains(&name) {
            return Ok(Touched::Nothing);
        }
        let of = cm
            .metadata
            .labels
            .as_ref()
            .and_then(|l| l.get(records::RECORD_OF))
            .cloned()
            .unwrap_or_default();
        if self.opts.batch.as_ref().is_some_and(|b| *b != of) {
            return Ok(Touched::Nothing);
        }
        let s = match records::from_config_map(cm) {
            Ok(s) => s,
            Err(Error::BadObject { message, .. }) => {
                // It may be an approval: its batch is not judged without it.
                let Some(i) = self.batches.iter().position(|b| b.rec.name == of) else {
                    return Ok(Touched::Nothing);
                };
                let st = self.batches.remove(i);
                self.bad_batches.push((
                    of,
                    bad_record_message(&name, &message),
                    st.rec.hosts.iter().map(|h| h.hostname.clone()).collect(),
                ));
                self.rebuild_expected(false)?;
                return Ok(Touched::All);
            }
            Err(e) => return Err(e),
        };
        self.seen_records.insert(name.clone());
        self.records
            .entry(s.batch.clone())
            .or_default()
            .push(s.record.clone());
        let Some(bi) = self.batches.iter().position(|b| b.rec.name == s.batch) else {
            return Ok(Touched::Nothing);
        };
        if !records::add(&mut self.batches[bi].rec, &s.record) {
            return Ok(Touched::Nothing);
        }
        match &s.record {
            Record::Approval(a) => {
                // Counted only on the batch that expects the node ([`Approver::rebuild_approvals`]).
                let current = self.approval_counts(a, &s.batch);
                if let Some(r) = self.recorded_approval(a).filter(|_| current) {
                    self.recorded.approvals.push(r);
                }
                if self.own_pending.contains(&name) {
                    return Ok(Touched::Nothing);
                }
                Ok(Touched::Node(a.node.clone()))
            }
            Record::Reboot(r) => {
                // Only the batch that defines the host binds its CSRs.
                if self.node_batch.get(&r.host) != Some(&s.batch) {
                    return Ok(Touched::Nothing);
                }
                match parse_time(&r.at) {
                    Some(t) => {
                        if let Some(n) = self.expected.get_mut(&r.host) {
                            if n.rebooted_at.is_none() {
                                n.rebooted_at = Some(t);
                            }
                        }
                    }
                    None => {
                        self.bad_reboots.insert(
                            r.host.clone(),
                            (
                                s.batch.clone(),
                                format!(
                                    "reboot record {name}: at {:?} is not an RFC 3339 time",
                                    escape_for_display(&r.at, 60)
                                ),
                            ),
                        );
                    }
                }
                Ok(Touched::Node(r.host.clone()))
            }
        }
    }

    /// Every pending kubelet CSR with its verdict ([`verdict_all`] over all of them at once, so
    /// rival client CSRs and kubelet retries are seen together), oldest first.
    pub fn evaluate_all(&self, now: Time) -> Vec<(CsrView, Verdict)> {
        let mut views: Vec<CsrView> = self
            .csrs
            .values()
            .filter(|c| is_pending(c) && !self.out_of_scope(c))
            .map(CsrView::from_k8s)
            .filter(|v| v.kind() != Kind::NotKubelet)
            .collect();
        views.sort_by(|a, b| (a.created, &a.name).cmp(&(b.created, &b.name)));
        let existing = ExistingNodes::new(self.existing.iter().cloned());
        let v = verdict_all(
            &views,
            &self.expected,
            &existing,
            &self.recorded,
            &self.policy,
            now,
        );
        views
            .into_iter()
            .zip(v)
            .map(|(c, mut v)| {
                self.amend(&mut v);
                (c, v)
            })
            .collect()
    }

    /// Holds a verdict whose node's batch record or reboot record is broken (hand-edited):
    /// [`Reason::BadBatchRecord`] when a batch ConfigMap naming the node does not parse,
    /// [`Reason::BadRebootRecord`] (client CSRs, also with --trust-unverified-boot) when its
    /// reboot record's time does not.
    fn amend(&self, v: &mut Verdict) {
        let Some(node) = v.node.clone() else { return };
        for (b, msg, hosts) in &self.bad_batches {
            // A batch whose hostnames cannot be read may name any node no batch names.
            let unknown = hosts.is_empty()
                && v.reasons
                    .iter()
                    .any(|r| matches!(r, crate::csr::Reason::NotExpectedNode { .. }));
            if hosts.contains(&node) || unknown {
                v.reasons
                    .retain(|r| !matches!(r, crate::csr::Reason::NotExpectedNode { .. }));
                v.reasons.push(crate::csr::Reason::BadBatchRecord {
                    node: node.clone(),
                    batch: b.clone(),
                    message: if hosts.is_empty() {
                        format!("{msg}; its hosts cannot be read, so it may name {node}")
                    } else {
                        msg.clone()
                    },
                });
                v.approve = false;
            }
        }
        if v.kind == Kind::Client {
            if let Some((b, field)) = self.bad_reboots.get(&node) {
                v.reasons
                    .retain(|r| !matches!(r, crate::csr::Reason::BootUnverified { .. }));
                v.reasons.push(crate::csr::Reason::BadRebootRecord {
                    node: node.clone(),
                    batch: b.clone(),
                    field: field.clone(),
                });
                v.approve = false;
            }
        }
    }

    /// Batch ConfigMaps skipped because they are not batch records: (name, what is wrong).
    pub fn bad_batches(&self) -> Vec<(String, String)> {
        self.bad_batches
            .iter()
            .map(|(n, m, _)| (n.clone(), m.clone()))
            .collect()
    }

    /// Why recording the approval of CSR `name` on its batch failed, if it did.
    pub fn write_failure(&self, name: &str) -> Option<&str> {
        self.write_failures.get(name).map(String::as_str)
    }

    /// The verdict on CSR `name` among all pending ones (None: not pending, unknown, or
    /// another signer).
    ///
    /// Only the pending CSRs of the same kind for the same node are judged with it (the only
    /// ones [`verdict_all`] relates), so this stays cheap with hundreds of CSRs pending.
    pub fn evaluate(&self, name: &str, now: Time) -> Option<Verdict> {
        let target = self.csrs.get(name).filter(|c| is_pending(c))?;
        let kind = CsrView::from_k8s(target).kind();
        if kind == Kind::NotKubelet {
            return None;
        }
        let node = self.node_of(target);
        if node.as_ref().is_some_and(|n| self.other_hosts.contains_key(n)) {
            return None;
        }
        let same_node: Vec<&String> = match &node {
            Some(n) => self.by_node.get(n).into_iter().flatten().collect(),
            None => vec![],
        };
        let name_s = name.to_string();
        let mut names: BTreeSet<&String> = same_node.into_iter().collect();
        names.insert(&name_s);
        let mut views: Vec<CsrView> = names
            .into_iter()
            .filter_map(|n| self.csrs.get(n))
            .filter(|c| is_pending(c))
            .map(CsrView::from_k8s)
            .filter(|v| v.kind() == kind)
            .collect();
        views.sort_by(|a, b| (a.created, &a.name).cmp(&(b.created, &b.name)));
        let existing = ExistingNodes::new(self.existing.iter().cloned());
        let v = verdict_all(
            &views,
            &self.expected,
            &existing,
            &self.recorded,
            &self.policy,
            now,
        );
        views
            .into_iter()
            .zip(v)
            .find(|(c, _)| c.name == name)
            .map(|(_, mut v)| {
                self.amend(&mut v);
                v
            })
    }

    /// The node a CSR speaks for, as the verdict attributes it (cached by name and uid: the
    /// request of a CSR never changes).
    fn node_of(&self, c: &CertificateSigningRequest) -> Option<String> {
        let key = (
            c.metadata.name.clone().unwrap_or_default(),
            c.metadata.uid.clone().unwrap_or_default(),
        );
        let mut cache = self.node_cache.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(n) = cache.get(&key) {
            return n.clone();
        }
        let view = CsrView::from_k8s(c);
        let n = crate::csr::verdict(
            &view,
            &ExpectedNodes::default(),
            &ExistingNodes::default(),
            &Default::default(),
            &self.policy,
            now(),
        )
        .node;
        cache.insert(key, n.clone());
        n
    }

    fn settled_verdict(&self, view: &CsrView) -> Verdict {
        let node = parse_request(&view.request)
            .0
            .and_then(|p| p.common_names.first().cloned())
            .and_then(|cn| cn.strip_prefix(NODE_PREFIX).map(str::to_string));
        Verdict {
            kind: view.kind(),
            node,
            approve: false,
            reasons: vec![],
            unverified_boot: false,
        }
    }

    /// A CSR whose name cannot be put in a request path as it is (control characters, spaces,
    /// non-ASCII, `/ % ? #`; the API server's own rule is a DNS subdomain name, so a real
    /// cluster never has one, but a broken or hostile server may list one) is skipped with an
    /// escaped warning and [`Action::Ignored`], so the other CSRs are still processed.
    fn unaddressable(&self, name: &str) -> Option<Outcome> {
        if addressable(name) {
            return None;
        }
        crate::say!(
            "warning: skipped CSR \"{}\": its name is not a valid object name (it cannot be addressed in a URL); \
             inspect and delete it by hand",
            crate::output::escape_for_display(name, 200)
        );
        let verdict = self.evaluate(name, now()).unwrap_or(Verdict {
            kind: Kind::NotKubelet,
            node: None,
            approve: false,
            reasons: vec![],
            unverified_boot: false,
        });
        Some(Outcome {
            csr: name.into(),
            verdict,
            action: Action::Ignored,
        })
    }

    /// `--deny-invalid` denies a rejected CSR only when it names an expected node and is not
    /// merely waiting for that node's address or reboot record, nor for a rival to be sorted
    /// out by hand (denying every CSR of a race would deny the real node's too).
    pub fn deniable(&self, v: &Verdict) -> bool {
        !v.approve
            && v.node.as_ref().is_some_and(|n| self.expected.get(n).is_some())
            && v.reasons.iter().any(|r| !r.waits())
    }

    /// The alarms ([`crate::csr::alarms`]) over every kubelet CSR seen: a bootstrap client CSR
    /// for a node after its client CSR was approved (possible impostor), and pending client CSRs
    /// of one node too close together to be the kubelet's re-keying (second requester).
    pub fn alarms(&self) -> Vec<crate::csr::Alarm> {
        // Client CSRs of expected nodes only, attributed through the node cache (no parse per
        // call): the alarms are about those.
        let all: Vec<(CsrView, String)> = self
            .csrs
            .values()
            .filter(|c| c.spec.signer_name == csr::CLIENT_SIGNER)
            .filter_map(|c| {
                let n = self.node_of(c).filter(|n| self.expected.get(n).is_some())?;
                Some((CsrView::from_k8s(c), n))
            })
            .collect();
        if all.is_empty() {
            return vec![];
        }
        crate::csr::alarms(
            &all,
            &self.rival_verdicts(),
            &self.expected,
            &self.recorded,
            |n| self.existing.contains(n),
        )
    }

    /// The verdicts on the pending client CSRs of nodes that have two or more of them (the only
    /// ones a second requester can be among), without judging every pending CSR: this runs on
    /// every client CSR event of a watch, and judging all of them each time made a 200-node
    /// `approve --watch` quadratic.
    pub fn rival_verdicts(&self) -> Vec<(CsrView, Verdict)> {
        let mut by_node: BTreeMap<String, Vec<&str>> = BTreeMap::new();
        for (name, c) in &self.csrs {
            if c.spec.signer_name == csr::CLIENT_SIGNER && is_pending(c) {
                if let Some(n) = self.node_of(c) {
                    by_node.entry(n).or_default().push(name);
                }
            }
        }
        let t = now();
        by_node
            .values()
            .filter(|names| names.len() > 1)
            .flatten()
            .filter_map(|name| {
                let v = self.evaluate(name, t)?;
                Some((CsrView::from_k8s(&self.csrs[*name]), v))
            })
            .collect()
    }

    /// A pending client CSR its kubelet gave up on: superseded by a newer attempt of the same
    /// node, or made after the host's reboot record yet before the node's approved client CSR
    /// (an earlier attempt of the re-keying kubelet). It stays pending (the controller manager
    /// garbage-collects it) and does not make a run exit 7. A CSR made before the reboot record
    /// is never one: that is someone else's.
    pub fn abandoned(&self, name: &str) -> bool {
        let Some(c) = self.csrs.get(name).filter(|c| is_pending(c)) else {
            return false;
        };
        let view = CsrView::from_k8s(c);
        if view.kind() != Kind::Client || view.username != csr::BOOTSTRAPPER {
            return false;
        }
        if let Some(v) = self.evaluate(name, now()) {
            if !v.reasons.is_empty() && v.reasons.iter().all(|r| r.code() == "superseded") {
                return true;
            }
        }
        let (Some(node), Some(created)) = (self.node_of(c), view.created) else {
            return false;
        };
        let after_reboot = self
            .expected
            .get(&node)
            .and_then(|e| e.rebooted_at)
            .is_some_and(|r| created.as_second() >= r.as_second() - csr::REBOOT_CLOCK_SKEW_SECONDS);
        after_reboot
            && self.recorded.approvals.iter().any(|a| {
                a.node == node
                    && a.kind == Kind::Client
                    && a.csr != name
                    && a.created.is_some_and(|t| t > created)
            })
    }

    /// The record of approving CSR `view` as `node`'s next `kind` approval on batch `rec`, with
    /// its index; None when this CSR's approval is recorded already (a run interrupted between
    /// the record and `/approval` finishes it).
    fn approval_record(
        &self,
        rec: &BatchRecord,
        node: &str,
        kind: Kind,
        view: &CsrView,
    ) -> Option<(usize, ConfigMap)> {
        let kind_s = kind.to_string();
        if rec
            .approvals
            .iter()
            .any(|a| a.csr == view.name && a.node == node && a.kind == kind_s)
        {
            return None;
        }
        let index = records::next_index(rec, node, &kind_s);
        let a = Approval {
            node: node.to_string(),
            kind: kind_s,
            csr: view.name.clone(),
            at: now().to_string(),
            by: self.by.clone(),
            csr_created: view.created.map(|t| t.to_string()),
            requester: Some(view.username.clone()),
        };
        Some((index, records::approval_config_map(&rec.name, index, &a)))
    }

    /// Decides CSR `c` (as watched) on the state as it stands, for the pipelined write path
    /// ([`Plan`]). Only an approval of an expected node whose batch needs no conversion is
    /// pipelined; everything else is [`Plan::Handle`].
    pub fn plan_approval(&mut self, c: &CertificateSigningRequest) -> Plan {
        self.observe_csr(c);
        let name = c.metadata.name.clone().unwrap_or_default();
        if self.opts.dry_run || !addressable(&name) || !is_pending(c) {
            return Plan::Handle;
        }
        let Some(v) = self.evaluate(&name, now()) else {
            return Plan::Handle;
        };
        if !v.approve {
            return Plan::Handle;
        }
        let Some(node) = v.node.clone() else {
            return Plan::Handle;
        };
        let Some(bname) = self.node_batch.get(&node).cloned() else {
            return Plan::Handle;
        };
        let Some(b) = self.batches.iter().find(|b| b.rec.name == bname) else {
            return Plan::Handle;
        };
        if b.rec.embedded > 0 || b.rec.api_version != batch::API_VERSION {
            return Plan::Handle;
        }
        if self.in_flight.contains(&(node.clone(), v.kind)) {
            return Plan::Wait;
        }
        let record = self
            .approval_record(&b.rec, &node, v.kind, &CsrView::from_k8s(c))
            .map(|(_, cm)| cm);
        self.in_flight.insert((node.clone(), v.kind));
        if let Some(cm) = &record {
            self.own_pending
                .insert(cm.metadata.name.clone().unwrap_or_default());
        }
        Plan::Io(Box::new(Planned {
            csr: c.clone(),
            verdict: v,
            node,
            batch: bname,
            record,
            target: self.target.clone(),
        }))
    }

    /// Takes back what [`execute`] did for `p`: the record and the CSR observed. Returns the
    /// outcome when approved; None when the CSR must be judged again through
    /// [`Approver::handle`] (the Node appeared, another approval took the number, the CSR
    /// changed). Errors: `execute`'s, with the approval's write failure remembered
    /// ([`Approver::write_failure`]).
    pub fn complete(
        &mut self,
        p: &Planned,
        r: Result<(Option<ConfigMap>, Executed)>,
    ) -> Result<Option<Outcome>> {
        self.in_flight.remove(&(p.node.clone(), p.verdict.kind));
        if let Some(cm) = &p.record {
            // Kept until the record is merged below (its echo may still come: it is seen then).
            let n = cm.metadata.name.clone().unwrap_or_default();
            if !matches!(&r, Ok((Some(_), _))) {
                self.own_pending.remove(&n);
            }
        }
        let (made, ex) = match r {
            Ok(x) => x,
            Err(e) => {
                self.write_failures.insert(
                    p.csr_name().to_string(),
                    format!(
                        "recording or approving it for batch {} failed: {}",
                        p.batch,
                        e.render().trim()
                    ),
                );
                return Err(e);
            }
        };
        if let Some(cm) = &made {
            self.observe_record(cm)?;
            self.own_pending
                .remove(cm.metadata.name.as_deref().unwrap_or_default());
        }
        match ex {
            Executed::Approved(done) => {
                self.observe_csr(&done);
                tracing::info!(csr = p.csr_name(), node = %p.node, kind = %p.verdict.kind, "approved");
                Ok(Some(Outcome {
                    csr: p.csr_name().to_string(),
                    verdict: p.verdict.clone(),
                    action: Action::Approved,
                }))
            }
            Executed::NodeExists(n) => {
                self.observe_node(&n);
                Ok(None)
            }
            Executed::Taken(cm) => {
                self.observe_record(&cm)?;
                Ok(None)
            }
            Executed::Conflict => Ok(None),
            Executed::BatchGone => {
                self.forget_batch(&p.batch)?;
                Ok(None)
            }
        }
    }

    /// Progress of every expected node (in batch order).
    pub fn node_states(&self) -> Vec<NodeState> {
        self.expected
            .nodes
            .iter()
            .map(|n| {
                let (serving_approved, serving_issued) = self.serving_of(n);
                NodeState {
                    node: n.hostname.clone(),
                    batch: self.node_batch.get(&n.hostname).cloned().unwrap_or_default(),
                    ips: n.ips.iter().map(|i| i.to_string()).collect(),
                    joined: self.existing.contains(&n.hostname),
                    ready: self.ready.contains(&n.hostname),
                    serving_approved,
                    serving_issued,
                }
            })
            .collect()
    }

    /// Every expected node Ready with its serving certificate issued.
    /// O(1): kept per event ([`Approver::update_done`]).
    pub fn all_done(&self) -> bool {
        self.done.len() == self.expected.nodes.len()
    }
}

/// What is said when batch ConfigMap `name` is edited, while a run watches, into something
/// that is not a batch record (`message` names the field).
fn broken_batch_warning(name: &str, message: &str) -> String {
    format!(
        "ConfigMap {}/{} is no longer a batch record ({}): its hosts' CSRs are held until it is fixed or deleted (exit 3 at the end)",
        batch::NAMESPACE,
        escape_for_display(name, 253),
        escape_for_display(message, 300)
    )
}

/// Why a batch is held for its record ConfigMap `name` that is not a record (`message`).
fn bad_record_message(name: &str, message: &str) -> String {
    format!("its record ConfigMap {name} is not a record ({message}); fix or delete it")
}

/// `csr` with our `Approved` condition appended (reason [`APPROVED_REASON`], a message naming
/// the checks), for the `/approval` subresource.
fn with_approved_condition(
    csr: &CertificateSigningRequest,
    kind: Kind,
    node: &str,
    batch: &str,
) -> CertificateSigningRequest {
    with_condition(
        csr,
        "Approved",
        APPROVED_REASON,
        approval_message(kind, node, batch),
    )
}

/// `csr` with condition `type_` (`Approved` or `Denied`) appended, status True, stamped now.
fn with_condition(
    csr: &CertificateSigningRequest,
    type_: &str,
    reason: &str,
    message: String,
) -> CertificateSigningRequest {
    let mut obj = csr.clone();
    let t = MetaTime(now());
    obj.status
        .get_or_insert_with(Default::default)
        .conditions
        .get_or_insert_with(Vec::new)
        .push(CertificateSigningRequestCondition {
            type_: type_.into(),
            status: "True".into(),
            reason: Some(reason.into()),
            message: Some(message),
            last_update_time: Some(t.clone()),
            last_transition_time: Some(t),
        });
    obj
}

/// A CSR name that can be put in a request path as it is ([`Approver::unaddressable`]).
fn addressable(name: &str) -> bool {
    !name.is_empty()
        && name
            .chars()
            .all(|c| c.is_ascii_graphic() && !"/%?#\\".contains(c))
}

fn approval_message(kind: Kind, node: &str, batch: &str) -> String {
    let common = "one PEM CSR, signature and key algorithm allowed, subject O=system:nodes CN=system:node:<name>, pending, lifetime within policy";
    match kind {
        Kind::Client => format!(
            "agent-day2: client CSR of expected node {node} (batch {batch}): {common}, requested by the node-bootstrapper with exactly its groups, no SAN or extension, usages client auth, no Node {node} yet, created after the batch and before its token expired, first client approval recorded on the batch"
        ),
        _ => format!(
            "agent-day2: serving CSR of expected node {node} (batch {batch}): {common}, requested by system:node:{node} in group system:nodes, usages server auth, SANs only {node} and its expected addresses, no cluster/service network or API name, first serving approval recorded on the batch"
        ),
    }
}

/// The approval `csr` carries from an approve run (our `Approved` condition, reason
/// [`APPROVED_REASON`], whose message names the node and batch: [`approval_message`]), as the
/// batch's record would have it: (batch, approval). The CSR itself is the second witness of an
/// approval: a deleted approval record must not let a second bootstrap client certificate
/// through (a break-it trial deleted the record ConfigMap, which the add-nodes Role may, and a
/// fresh run approved a second rogue CSR). Pure.
fn approval_on_csr(csr: &CertificateSigningRequest) -> Option<(String, Approval)> {
    let cond = csr
        .status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == "Approved" && c.reason.as_deref() == Some(APPROVED_REASON))?;
    let msg = cond.message.as_deref()?;
    let (kind, rest) = if let Some(r) = msg.strip_prefix("agent-day2: client CSR of expected node ") {
        ("client", r)
    } else if let Some(r) = msg.strip_prefix("agent-day2: serving CSR of expected node ") {
        ("serving", r)
    } else {
        return None;
    };
    let (node, rest) = rest.split_once(" (batch ")?;
    let (batch, _) = rest.split_once("):")?;
    let at = cond
        .last_update_time
        .as_ref()
        .or(cond.last_transition_time.as_ref())
        .map(|t| t.0.to_string())
        .unwrap_or_default();
    Some((
        batch.to_string(),
        Approval {
            node: node.to_string(),
            kind: kind.to_string(),
            csr: csr.metadata.name.clone()?,
            at,
            by: String::new(),
            csr_created: csr.metadata.creation_timestamp.as_ref().map(|t| t.0.to_string()),
            requester: csr.spec.username.clone(),
        },
    ))
}

/// The error when no batch record exists (exit 4): named as the user knows it (a batch, not
/// a ConfigMap), so no generic "is this an OpenShift cluster" hint goes with it; the only
/// next step is add-nodes (monitor words its own: it can also follow addresses).
/// Exit 3 (docs/exit-codes.md: invalid input, naming the field) for a batch ConfigMap that is
/// not a batch record.
pub fn bad_batch_error(name: &str, message: &str) -> Error {
    Error::InvalidInput {
        field: format!("ConfigMap {}/{name}", batch::NAMESPACE),
        message: format!("{message}; its hosts' CSRs are held until it is fixed (or deleted)"),
    }
}

pub fn no_batch() -> Error {
    Error::NotFound {
        resource: ResourceRef {
            kind: "batch".into(),
            namespace: None,
            name: None,
        },
        why: Some(format!(
            "no batch record in namespace {}, so no node is expected: run `oc agent-day2 add-nodes` first",
            batch::NAMESPACE
        )),
    }
}

/// Now, as the verdict's time type.
pub fn now() -> Time {
    Time::now()
}

#[cfg(test)]
mod tests {
    //! The engine's state fed with events as the watches deliver them (no cluster: the client
    //! points at a closed port and is never used by what is tested here).
    use super::*;
    use k8s_openapi::api::certificates::v1::{
        CertificateSigningRequestSpec, CertificateSigningRequestStatus,
    };
    use k8s_openapi::api::core::v1::{NodeCondition, NodeStatus};
    use k8s_openapi::ByteString;
    use kube::api::ObjectMeta;

    const BATCH: &str = "batch-20261202-100000-ab12";
    const RECORDED: &str = "2026-12-02T10:00:00Z";

    fn target() -> KubeTarget {
        let cfg = kube::Config::new("http://127.0.0.1:9".parse().unwrap());
        KubeTarget {
            client: kube::Client::try_from(cfg).unwrap(),
            server: "http://127.0.0.1:9".into(),
            namespace: "default".into(),
            context: None,
            user_hint: None,
            proxy: None,
            request_timeout: None,
            request_timeout_given: false,
            deadline: None,
        }
    }

    fn batch_cm(hosts: &[&str], reboots: serde_json::Value) -> ConfigMap {
        batch_cm_named(BATCH, RECORDED, hosts, reboots)
    }

    fn batch_cm_named(name: &str, created: &str, hosts: &[&str], reboots: serde_json::Value) -> ConfigMap {
        let mut rec = crate::batch::tests::rec();
        rec.name = name.into();
        rec.created_at = created.into();
        rec.token_expires_at = "2099-01-01T00:00:00Z".into();
        rec.hosts = hosts
            .iter()
            .enumerate()
            .map(|(i, h)| batch::BatchHost {
                hostname: h.to_string(),
                macs: vec![format!("52:54:00:aa:00:{i:02x}")],
                ips: vec![format!("192.168.111.{}", 30 + i)],
                ip_source: "static".into(),
            })
            .collect();
        let mut cm = batch::to_config_map(&rec).unwrap();
        if reboots != serde_json::Value::Null {
            // An earlier version's batch: its reboots inside.
            let mut v: serde_json::Value =
                serde_json::from_str(&cm.data.as_ref().unwrap()[batch::DATA_KEY]).unwrap();
            v["apiVersion"] = batch::API_VERSION_V1.into();
            v["reboots"] = reboots;
            cm.data
                .as_mut()
                .unwrap()
                .insert(batch::DATA_KEY.into(), v.to_string());
        }
        cm.metadata.resource_version = Some("1".into());
        cm.metadata.creation_timestamp = Some(MetaTime(created.parse().unwrap()));
        cm
    }

    async fn approver(hosts: &[&str], reboots: serde_json::Value) -> Approver {
        let cm = batch_cm(hosts, reboots);
        let st = batch_state(&cm).unwrap();
        let mut a = Approver {
            target: target(),
            opts: ApproveOptions::default(),
            policy: Policy::for_cluster(
                "ostest",
                "test.metalkube.org",
                vec!["10.128.0.0/14".parse().unwrap()],
                vec!["172.30.0.0/16".parse().unwrap()],
            ),
            batches: vec![st],
            expected: ExpectedNodes::default(),
            node_batch: BTreeMap::new(),
            existing: BTreeSet::new(),
            ready: BTreeSet::new(),
            csrs: BTreeMap::new(),
            node_cache: Default::default(),
            records: BTreeMap::new(),
            seen_records: BTreeSet::new(),
            recorded: ApprovalsRecorded::default(),
            by_node: BTreeMap::new(),
            serving: BTreeMap::new(),
            done: BTreeSet::new(),
            in_flight: BTreeSet::new(),
            own_pending: BTreeSet::new(),
            by: "admin".into(),
            write_failures: BTreeMap::new(),
            bad_batches: vec![],
            bad_reboots: BTreeMap::new(),
            other_hosts: OtherHosts::new(),
            batch_cms: BTreeMap::from([(BATCH.to_string(), cm)]),
            others_named: BTreeMap::new(),
            forgotten: Vec::new(),
            broken: Vec::new(),
        };
        a.rebuild_expected(true).unwrap();
        a
    }

    /// Issue 22: a CSR that carries our approval counts as an approval even when its record
    /// ConfigMap was deleted: a second bootstrap client CSR for the node is refused.
    #[tokio::test]
    async fn an_approval_witnessed_by_its_csr_counts_without_its_record() {
        let reboots = serde_json::json!([{"host": "worker-0", "at": "2026-12-02T10:20:00Z", "ip": "x", "reported": "x", "by": "x"}]);
        let mut a = approver(&["worker-0"], reboots).await;
        let first = client_csr("csr-first", "worker-0", "2026-12-02T10:30:00Z");
        let approved = with_approved_condition(&first, Kind::Client, "worker-0", BATCH);
        assert_eq!(
            approval_on_csr(&approved).map(|(b, x)| (b, x.node, x.kind, x.csr)),
            Some((
                BATCH.into(),
                "worker-0".into(),
                "client".into(),
                "csr-first".into()
            ))
        );
        assert!(approval_on_csr(&first).is_none(), "pending: no approval");
        a.observe_csr(&approved);
        let second = client_csr("csr-second", "worker-0", "2026-12-02T10:40:00Z");
        a.observe_csr(&second);
        let v = a.evaluate("csr-second", now()).unwrap();
        assert!(!v.approve && codes(&v).contains(&"already-approved"), "{v:?}");
        // Also after the approvals are rebuilt from the batches (which hold no record of it).
        a.rebuild_approvals();
        let v = a.evaluate("csr-second", now()).unwrap();
        assert!(!v.approve && codes(&v).contains(&"already-approved"), "{v:?}");
    }

    /// Issue 22: a batch deleted while approve runs is no longer expected (its host's CSR is
    /// rejected as not expected); under `--batch` of it the run ends (exit 4).
    #[tokio::test]
    async fn a_deleted_batch_is_no_longer_expected() {
        let mut a = approver(&["worker-0"], serde_json::Value::Null).await;
        let other = "batch-20261202-110000-ef56";
        a.observe_batch(&batch_cm_named(
            other,
            "2026-12-02T11:00:00Z",
            &["worker-9"],
            serde_json::Value::Null,
        ))
        .unwrap();
        let x = client_csr("csr-x", "worker-0", "2026-12-02T10:30:00Z");
        a.observe_csr(&x);
        assert!(a.expected().get("worker-0").is_some());
        assert!(a.forget_batch(BATCH).unwrap());
        assert!(a.expected().get("worker-0").is_none());
        let v = a.evaluate("csr-x", now()).unwrap();
        assert!(!v.approve && codes(&v).contains(&"not-expected-node"), "{v:?}");
        assert!(!a.forget_batch(BATCH).unwrap(), "known no more");
        assert_eq!(a.take_forgotten(), [BATCH.to_string()], "said once");
        // Re-created as it was: its records (a reboot seen before the delete) count again.
        a.observe_record(&records::reboot_config_map(
            BATCH,
            &reboot("worker-0", "2026-12-02T10:20:00Z"),
        ))
        .unwrap();
        assert!(a
            .observe_batch(&batch_cm(&["worker-0"], serde_json::Value::Null))
            .unwrap());
        assert!(
            a.expected()
                .get("worker-0")
                .is_some_and(|n| n.rebooted_at.is_some()),
            "the re-created batch's reboot record is merged"
        );
        assert!(a.forget_batch(BATCH).unwrap());
        // The last batch gone: nothing is expected, the run ends as one without a batch (4).
        let e = a.forget_batch(other).unwrap_err();
        assert_eq!(e.exit_code(), crate::exit::CLUSTER_ACCESS, "{e}");

        let mut a = approver(&["worker-0"], serde_json::Value::Null).await;
        a.opts.batch = Some(BATCH.into());
        let e = a.forget_batch(BATCH).unwrap_err();
        assert_eq!(e.exit_code(), crate::exit::CLUSTER_ACCESS, "{e}");
        assert!(e.to_string().contains("deleted while this run watched it"), "{e}");
    }

    /// Issue 22: under `--batch A`, a batch made meanwhile that names A's host takes it out of
    /// scope (its CSRs are not judged), and deleting that batch brings it back.
    #[tokio::test]
    async fn under_batch_a_newer_batch_takes_its_hosts_and_gives_them_back() {
        let mut a = approver(&["worker-0", "worker-1"], serde_json::Value::Null).await;
        a.opts.batch = Some(BATCH.into());
        let x = client_csr("csr-x", "worker-1", "2026-12-02T12:30:00Z");
        a.observe_csr(&x);
        assert!(!a.out_of_scope(&x));
        let newer = batch_cm_named(
            "batch-20261202-120000-cd34",
            "2026-12-02T12:00:00Z",
            &["worker-1"],
            serde_json::Value::Null,
        );
        assert!(a.observe_batch(&newer).unwrap());
        assert!(a.out_of_scope(&x));
        assert!(a.expected().get("worker-1").is_none());
        assert!(a.evaluate_all(now()).is_empty());
        assert!(a.forget_batch("batch-20261202-120000-cd34").unwrap());
        assert!(!a.out_of_scope(&x));
        assert!(a.expected().get("worker-1").is_some());
    }

    fn reboot(host: &str, at: &str) -> batch::Reboot {
        batch::Reboot {
            host: host.into(),
            at: at.into(),
            ip: "192.168.111.30".into(),
            reported: "added-to-existing-cluster".into(),
            stage_started_at: None,
            by: "admin".into(),
        }
    }

    fn client_csr(name: &str, node: &str, at: &str) -> CertificateSigningRequest {
        let key = rcgen::KeyPair::generate().unwrap();
        let mut dn = rcgen::DistinguishedName::new();
        dn.push(rcgen::DnType::OrganizationName, "system:nodes");
        dn.push(rcgen::DnType::CommonName, format!("system:node:{node}"));
        let mut p = rcgen::CertificateParams::default();
        p.distinguished_name = dn;
        let pem = p.serialize_request(&key).unwrap().pem().unwrap();
        CertificateSigningRequest {
            metadata: ObjectMeta {
                name: Some(name.into()),
                uid: Some(format!("uid-{name}")),
                creation_timestamp: Some(MetaTime(at.parse().unwrap())),
                ..Default::default()
            },
            spec: CertificateSigningRequestSpec {
                request: ByteString(pem.into_bytes()),
                signer_name: csr::CLIENT_SIGNER.into(),
                username: Some(csr::BOOTSTRAPPER.into()),
                groups: Some(csr::BOOTSTRAPPER_GROUPS.iter().map(|s| s.to_string()).collect()),
                usages: Some(vec!["digital signature".into(), "client auth".into()]),
                ..Default::default()
            },
            status: None,
        }
    }

    fn serving_issued(name: &str, node: &str, at: &str) -> CertificateSigningRequest {
        let mut c = client_csr(name, node, at);
        c.spec.signer_name = csr::SERVING_SIGNER.into();
        c.spec.username = Some(format!("system:node:{node}"));
        c.status = Some(CertificateSigningRequestStatus {
            certificate: Some(ByteString(b"issued".to_vec())),
            conditions: Some(vec![CertificateSigningRequestCondition {
                type_: "Approved".into(),
                status: "True".into(),
                ..Default::default()
            }]),
        });
        c
    }

    fn ready_node(name: &str) -> Node {
        Node {
            metadata: ObjectMeta {
                name: Some(name.into()),
                ..Default::default()
            },
            status: Some(NodeStatus {
                conditions: Some(vec![NodeCondition {
                    type_: "Ready".into(),
                    status: "True".into(),
                    ..Default::default()
                }]),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    fn codes(v: &Verdict) -> Vec<&'static str> {
        v.reasons.iter().map(|r| r.code()).collect()
    }

    #[tokio::test]
    async fn a_reboot_record_binds_only_its_host_and_its_echo_is_nothing() {
        let mut a = approver(&["worker-0", "worker-1"], serde_json::Value::Null).await;
        let c = client_csr("csr-w0", "worker-0", "2026-12-02T10:30:00Z");
        a.observe_csr(&c);
        let t = now();
        assert_eq!(codes(&a.evaluate("csr-w0", t).unwrap()), ["boot-unverified"]);
        let rec = records::reboot_config_map(BATCH, &reboot("worker-0", "2026-12-02T10:20:00Z"));
        assert_eq!(a.observe_record(&rec).unwrap(), Touched::Node("worker-0".into()));
        assert!(
            a.evaluate("csr-w0", t).unwrap().approve,
            "bound to the reboot record"
        );
        assert_eq!(a.pending_of("worker-0"), ["csr-w0"]);
        assert!(a.pending_of("worker-1").is_empty());
        // The watch's echo, and a later report of the same host: the first is kept.
        assert_eq!(a.observe_record(&rec).unwrap(), Touched::Nothing);
        // (A second monitor's later report has the same name: its create fails, the first stands.)
        let later = records::reboot_config_map(BATCH, &reboot("worker-0", "2026-12-02T10:40:00Z"));
        assert_eq!(a.observe_record(&later).unwrap(), Touched::Nothing);
        assert_eq!(
            a.expected().get("worker-0").unwrap().rebooted_at,
            Some("2026-12-02T10:20:00Z".parse().unwrap())
        );
        // Another batch's record for a host this batch defines binds nothing.
        let other = records::reboot_config_map("batch-other", &reboot("worker-1", "2026-12-02T10:20:00Z"));
        assert_eq!(a.observe_record(&other).unwrap(), Touched::Nothing);
        assert_eq!(a.expected().get("worker-1").unwrap().rebooted_at, None);
    }

    #[tokio::test]
    async fn a_rival_approvers_record_refuses_a_second_client_csr_and_reissue_allows_it() {
        let reboots = serde_json::json!([{"host": "worker-0", "at": "2026-12-02T10:20:00Z", "ip": "x", "reported": "x", "by": "x"}]);
        let mut a = approver(&["worker-0"], reboots).await;
        assert_eq!(a.batches[0].rec.embedded, 1, "an earlier version's batch");
        let x = client_csr("csr-x", "worker-0", "2026-12-02T10:30:00Z");
        a.observe_csr(&x);
        assert!(a.evaluate("csr-x", now()).unwrap().approve);
        // Another approver recorded csr-y as worker-0's first client approval.
        let y = Approval {
            node: "worker-0".into(),
            kind: "client".into(),
            csr: "csr-y".into(),
            at: "2026-12-02T10:31:00Z".into(),
            by: "other".into(),
            csr_created: Some("2026-12-02T10:29:00Z".into()),
            requester: Some(csr::BOOTSTRAPPER.into()),
        };
        let cm = records::approval_config_map(BATCH, 0, &y);
        assert_eq!(a.observe_record(&cm).unwrap(), Touched::Node("worker-0".into()));
        let v = a.evaluate("csr-x", now()).unwrap();
        assert!(!v.approve && codes(&v).contains(&"already-approved"), "{v:?}");
        assert_eq!(records::next_index(&a.batches[0].rec, "worker-0", "client"), 1);
        // A batch read again (an address learnt) keeps the records seen.
        let reboots = serde_json::json!([{"host": "worker-0", "at": "2026-12-02T10:20:00Z", "ip": "x", "reported": "x", "by": "x"}]);
        let mut cm2 = batch_cm(&["worker-0"], reboots);
        cm2.metadata.resource_version = Some("2".into());
        a.observe_batch(&cm2).unwrap();
        let v = a.evaluate("csr-x", now()).unwrap();
        assert!(codes(&v).contains(&"already-approved"), "{v:?}");
        // With --reissue worker-0 one more is allowed, but only from a new install: csr-x
        // comes from the boot csr-y came from (its reboot record is older than csr-y), so it
        // is held (issue 22 item 3: a rogue CSR posted after the Node was deleted passed).
        a.opts.reissue = vec!["worker-0".into()];
        a.rebuild_expected(true).unwrap();
        let v = a.evaluate("csr-x", now()).unwrap();
        assert!(!v.approve && codes(&v) == ["reissue-unbound"], "{v:?}");
        let held = v.reasons[0].to_string();
        assert!(
            held.contains("add-nodes --reimage worker-0") && held.contains("csr-y"),
            "{held}"
        );
        // A reboot recorded after csr-y (a re-install from a new image): approved.
        a.expected.get_mut("worker-0").unwrap().rebooted_at = Some("2026-12-02T10:29:30Z".parse().unwrap());
        let v = a.evaluate("csr-x", now()).unwrap();
        assert!(v.approve, "{v:?}");
    }

    /// Issue 22 item 3: a machine re-imaged under a new batch (`add-nodes --reimage`) starts
    /// afresh: the old batch's approvals neither refuse its new CSRs nor raise an alarm.
    #[tokio::test]
    async fn approvals_of_an_older_batch_do_not_count_once_a_newer_batch_names_the_node() {
        let reboots = serde_json::json!([{"host": "worker-0", "at": "2026-12-02T10:20:00Z", "ip": "x", "reported": "x", "by": "x"}]);
        let mut a = approver(&["worker-0"], reboots).await;
        for (i, kind, csr_name) in [(0, "client", "csr-a1"), (0, "serving", "csr-a2")] {
            let ap = Approval {
                node: "worker-0".into(),
                kind: kind.into(),
                csr: csr_name.into(),
                at: "2026-12-02T10:31:00Z".into(),
                by: "admin".into(),
                csr_created: Some("2026-12-02T10:30:00Z".into()),
                requester: Some(csr::BOOTSTRAPPER.into()),
            };
            a.observe_record(&records::approval_config_map(BATCH, i, &ap))
                .unwrap();
        }
        let x = client_csr("csr-b1", "worker-0", "2026-12-02T12:30:00Z");
        a.observe_csr(&x);
        let v = a.evaluate("csr-b1", now()).unwrap();
        assert!(codes(&v).contains(&"already-approved"), "batch A alone: {v:?}");
        // Re-imaged: batch B (newer) names worker-0, with its own reboot record.
        let b_reboots = serde_json::json!([{"host": "worker-0", "at": "2026-12-02T12:20:00Z", "ip": "x", "reported": "x", "by": "x"}]);
        let b = batch_cm_named(
            "batch-20261202-120000-cd34",
            "2026-12-02T12:00:00Z",
            &["worker-0"],
            b_reboots,
        );
        assert!(a.observe_batch(&b).unwrap());
        assert_eq!(a.batch_of("worker-0"), Some("batch-20261202-120000-cd34"));
        let v = a.evaluate("csr-b1", now()).unwrap();
        assert!(v.approve, "batch A's approvals no longer count: {v:?}");
        assert!(a.alarms().is_empty(), "no impostor alarm: {:?}", a.alarms());
        // An approval recorded on A after the re-image (an approver still on A) counts: the
        // next CSR is refused and the theft is seen.
        let late = Approval {
            node: "worker-0".into(),
            kind: "client".into(),
            csr: "csr-a3".into(),
            at: "2026-12-02T12:31:00Z".into(),
            by: "other".into(),
            csr_created: Some("2026-12-02T12:29:00Z".into()),
            requester: Some(csr::BOOTSTRAPPER.into()),
        };
        a.observe_record(&records::approval_config_map(BATCH, 1, &late))
            .unwrap();
        let v = a.evaluate("csr-b1", now()).unwrap();
        assert!(codes(&v).contains(&"already-approved"), "{v:?}");
    }

    /// Issue 22 item 12: a stale DHCP address on the batch; `--node NAME=IP` is followed first.
    #[tokio::test]
    async fn an_address_given_with_node_is_followed_before_the_recorded_one() {
        let mut a = approver(&["worker-0"], serde_json::Value::Null).await;
        assert_eq!(a.hosts_to_follow()[0].ip.to_string(), "192.168.111.30");
        let fresh: IpAddr = "192.168.111.99".parse().unwrap();
        a.opts.extra_nodes = vec![("worker-0".into(), vec![fresh])];
        a.rebuild_expected(true).unwrap();
        assert_eq!(a.hosts_to_follow()[0].ip, fresh);
        let ips = &a.expected().get("worker-0").unwrap().ips;
        assert_eq!(
            ips.len(),
            2,
            "the recorded one is still accepted in a serving CSR: {ips:?}"
        );
    }

    #[tokio::test]
    async fn done_is_kept_per_event_and_a_deleted_csr_or_node_undoes_it() {
        let mut a = approver(&["worker-0", "worker-1"], serde_json::Value::Null).await;
        assert!(!a.all_done());
        for n in ["worker-0", "worker-1"] {
            a.observe_node(&ready_node(n));
        }
        assert!(!a.all_done(), "no serving certificate yet");
        a.observe_csr(&serving_issued("s0", "worker-0", "2026-12-02T10:40:00Z"));
        // A serving certificate of an earlier life (before the batch) does not count.
        a.observe_csr(&serving_issued("s1-old", "worker-1", "2026-12-01T10:40:00Z"));
        assert!(!a.all_done());
        a.observe_csr(&serving_issued("s1", "worker-1", "2026-12-02T10:41:00Z"));
        assert!(a.all_done());
        assert!(a.node_states().iter().all(NodeState::done));
        a.forget_csr("s1");
        assert!(!a.all_done());
        a.observe_csr(&serving_issued("s1", "worker-1", "2026-12-02T10:41:00Z"));
        a.forget_node("worker-0");
        assert!(!a.all_done());
        assert_eq!(
            a.node_states()
                .iter()
                .filter(|n| n.done())
                .map(|n| n.node.as_str())
                .collect::<Vec<_>>(),
            ["worker-1"]
        );
    }

    #[tokio::test]
    async fn a_record_that_does_not_parse_holds_its_batch() {
        let mut a = approver(&["worker-0"], serde_json::Value::Null).await;
        let mut cm = records::reboot_config_map(BATCH, &reboot("worker-0", "2026-12-02T10:20:00Z"));
        cm.data
            .as_mut()
            .unwrap()
            .insert(records::DATA_KEY.into(), "{}".into());
        assert_eq!(a.observe_record(&cm).unwrap(), Touched::All);
        assert!(a.expected().get("worker-0").is_none());
        let bad = a.bad_batches();
        assert_eq!(bad.len(), 1);
        assert!(bad[0].1.contains(&format!("{BATCH}.worker-0.reboot")), "{bad:?}");
        let c = client_csr("csr-w0", "worker-0", "2026-12-02T10:30:00Z");
        a.observe_csr(&c);
        let v = a.evaluate("csr-w0", now()).unwrap();
        assert_eq!(codes(&v), ["bad-batch-record"], "{v:?}");
    }
}
