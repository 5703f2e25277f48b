//! The verdict on a kubelet CSR: a pure function of the CSR, the expected and existing nodes,
//! the approvals already recorded, the policy and the time. No I/O.
//!
//! Source of every rule: docs/approve.md "Verifying kubelet CSRs".
//! [`verdict`] runs every check it can and returns every reason that failed, so the operator
//! sees the whole story at once; a CSR is approved only when there is none.
//!
//! ```text
//! CertificateSigningRequest ──CsrView::from_k8s──▶ CsrView ─┐
//! ExpectedNodes, ExistingNodes, ApprovalsRecorded, Policy ───┼─▶ verdict(.., now) ─▶ Verdict
//! ```
//!
//! For a whole listing use [`verdict_all`], which adds the one rule that needs several CSRs at
//! once (rival client CSRs for one node, kubelet retries). What the caller still owns (I/O):
//! recording the approval on the batch with compare-and-swap before `/approval`, reading the
//! CSR and the Node again just before approving, and never touching `NotKubelet` CSRs.
//!
//! Client CSRs whose checks are tied to the batch (expected, not yet a Node, created inside the
//! batch window, approval count) need `metadata.creationTimestamp`; serving CSRs are not tied to
//! the batch window (docs/approve.md), only to the expected node, its addresses and its count.
//!
//! Binding to the machine (issue 14): a client CSR of an expected node is approved only when it
//! was created after that host's own assisted-service reported leaving the installation for its
//! reboot ([`ExpectedNode::rebooted_at`], recorded on the batch by `monitor`), less
//! [`REBOOT_CLOCK_SKEW_SECONDS`]; without such a record only with
//! [`Policy::trust_unverified_boot`]. Several passing client CSRs of one node with different keys
//! are the kubelet re-keying (a new key and CSR every [`Policy::kubelet_retry_seconds`] while one
//! is not approved, client-go certificate manager) only when spaced like that: the newest is
//! approved; closer ones mean a second requester and all are held. [`alarms`] reports what
//! looks like an impostor.

mod basics;
mod escape;
mod parse;
mod reason;

use std::collections::{BTreeMap, BTreeSet};
use std::net::IpAddr;

pub use escape::escape_for_display;
pub use ipnet::IpNet;
pub use parse::{parse_request, KeyKind, ParsedRequest, RequestedExtension, San, SigKind};
pub use reason::Reason;

use k8s_openapi::api::certificates::v1::CertificateSigningRequest;

pub use basics::*;

/// The parts of a CertificateSigningRequest the verdict reads.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct CsrView {
    /// `metadata.name`.
    pub name: String,
    /// `metadata.creationTimestamp` (set by the API server; None on objects never stored).
    pub created: Option<Time>,
    /// `spec.signerName`.
    pub signer_name: String,
    /// `spec.username` (set by the API server from the requester's credentials).
    pub username: String,
    /// `spec.groups`.
    pub groups: Vec<String>,
    /// `spec.usages`.
    pub usages: Vec<String>,
    /// `spec.expirationSeconds`.
    pub expiration_seconds: Option<i32>,
    /// `spec.request`: the PEM bytes (base64-decoded by the API machinery).
    pub request: Vec<u8>,
    /// `status.conditions[].type` (Approved, Denied, Failed).
    pub conditions: Vec<String>,
    /// True when `status.certificate` is non-empty.
    pub has_certificate: bool,
}

impl CsrView {
    /// Takes what the checks need from a k8s-openapi CSR (missing fields become empty).
    pub fn from_k8s(csr: &CertificateSigningRequest) -> Self {
        let status = csr.status.as_ref();
        CsrView {
            name: csr.metadata.name.clone().unwrap_or_default(),
            created: csr.metadata.creation_timestamp.as_ref().map(|t| t.0),
            signer_name: csr.spec.signer_name.clone(),
            username: csr.spec.username.clone().unwrap_or_default(),
            groups: csr.spec.groups.clone().unwrap_or_default(),
            usages: csr.spec.usages.clone().unwrap_or_default(),
            expiration_seconds: csr.spec.expiration_seconds,
            request: csr.spec.request.0.clone(),
            conditions: status
                .and_then(|s| s.conditions.as_ref())
                .map(|c| c.iter().map(|c| c.type_.clone()).collect())
                .unwrap_or_default(),
            has_certificate: status
                .and_then(|s| s.certificate.as_ref())
                .is_some_and(|c| !c.0.is_empty()),
        }
    }

    /// The kind of CSR, from the signer name.
    pub fn kind(&self) -> Kind {
        match self.signer_name.as_str() {
            CLIENT_SIGNER => Kind::Client,
            SERVING_SIGNER => Kind::Serving,
            _ => Kind::NotKubelet,
        }
    }
}

/// A node the operator's batches expect (from the batch record, `--nodes-config`, `--node`).
#[derive(Debug, Clone, PartialEq)]
pub struct ExpectedNode {
    /// Hostname, which is also the Node name (lowercase, as the kubelet registers it).
    pub hostname: String,
    /// The node's addresses as the operator gave them — never `Node.status.addresses`. Empty
    /// for a DHCP host whose address is not known yet: no serving approval then.
    pub ips: Vec<IpAddr>,
    /// When the batch was recorded (server time); client CSRs created earlier are refused.
    pub recorded_at: Time,
    /// When the batch's bootstrap token expires; client CSRs created then or later are refused.
    pub token_expires: Time,
    /// Extra approvals allowed beyond one client and one serving approval (`--reissue NODE`).
    pub reissue: u32,
    /// When the host's own assisted-service (reached at the host's address with the batch's
    /// watcher token) reported that it left the installation for its reboot, as `monitor`
    /// recorded it on the batch. None: no such record (no monitor ran, or a DHCP host without
    /// its address).
    pub rebooted_at: Option<Time>,
}

/// Every expected node. A hostname should appear once; the first entry wins otherwise.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ExpectedNodes {
    /// The nodes. Their fields may be changed in place; adding, removing or renaming one needs
    /// [`ExpectedNodes::new`] again (a stale index is noticed and falls back to a scan).
    pub nodes: Vec<ExpectedNode>,
    /// Hostname → position of its first entry (built by [`ExpectedNodes::new`]).
    index: BTreeMap<String, usize>,
    /// `nodes.len()` when the index was built (None: never, as in a struct literal).
    built_for: Option<usize>,
}

impl ExpectedNodes {
    /// The nodes, indexed by hostname (lookups in O(log n): approve judges thousands of CSRs
    /// against a thousand nodes).
    pub fn new(nodes: Vec<ExpectedNode>) -> Self {
        let mut index = BTreeMap::new();
        for (i, n) in nodes.iter().enumerate() {
            index.entry(n.hostname.clone()).or_insert(i);
        }
        let built_for = Some(nodes.len());
        ExpectedNodes {
            nodes,
            index,
            built_for,
        }
    }

    fn position(&self, hostname: &str) -> Option<usize> {
        match self.index.get(hostname) {
            Some(&i) if self.nodes.get(i).is_some_and(|n| n.hostname == hostname) => Some(i),
            // Built by `new` for these very nodes (none added since): a miss is a miss.
            None if self.built_for == Some(self.nodes.len()) => None,
            _ => self.nodes.iter().position(|n| n.hostname == hostname),
        }
    }

    /// The entry for `hostname`, if expected.
    pub fn get(&self, hostname: &str) -> Option<&ExpectedNode> {
        self.position(hostname).map(|i| &self.nodes[i])
    }

    /// The entry for `hostname`, to change its fields in place.
    pub fn get_mut(&mut self, hostname: &str) -> Option<&mut ExpectedNode> {
        self.position(hostname).map(move |i| &mut self.nodes[i])
    }
}

/// Names of the Node objects that exist in the cluster.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ExistingNodes {
    /// Node names.
    pub names: BTreeSet<String>,
}

impl ExistingNodes {
    /// From any list of names.
    pub fn new<I: IntoIterator<Item = S>, S: Into<String>>(names: I) -> Self {
        ExistingNodes {
            names: names.into_iter().map(Into::into).collect(),
        }
    }
}

/// One approval recorded on a batch (compare-and-swap before `/approval` is called).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordedApproval {
    /// Node name.
    pub node: String,
    /// Client or serving.
    pub kind: Kind,
    /// Name of the CSR approved. A CSR recorded but not yet approved (a run interrupted between
    /// the record and `/approval`) does not count against itself, so a restart finishes it.
    pub csr: String,
    /// Its creationTimestamp, when known (recorded with the approval, or read from the CSR).
    pub created: Option<Time>,
    /// Its `spec.username`, when known.
    pub requester: Option<String>,
}

/// Approvals already recorded on the batches.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ApprovalsRecorded {
    /// Every recorded approval.
    pub approvals: Vec<RecordedApproval>,
}

impl ApprovalsRecorded {
    /// How many `kind` approvals are recorded for `node`, not counting CSR `except`.
    pub fn count(&self, node: &str, kind: Kind, except: &str) -> u32 {
        self.approvals
            .iter()
            .filter(|a| a.node == node && a.kind == kind && a.csr != except)
            .count() as u32
    }

    /// The newest recorded client approval of `node` (by its CSR's creation time), not
    /// counting CSR `except`.
    pub fn last_client(&self, node: &str, except: &str) -> Option<&RecordedApproval> {
        self.approvals
            .iter()
            .filter(|a| a.node == node && a.kind == Kind::Client && a.csr != except)
            .max_by_key(|a| a.created.map(|t| t.as_second()))
    }
}

/// Cluster facts and limits the checks use.
#[derive(Debug, Clone, PartialEq)]
pub struct Policy {
    /// Cluster (pod) networks (`networking.clusterNetwork[].cidr`).
    pub cluster_networks: Vec<IpNet>,
    /// Service networks (`networking.serviceNetwork`).
    pub service_networks: Vec<IpNet>,
    /// Names a node must never get a certificate for: `api.<cluster>.<domain>`,
    /// `api-int.<cluster>.<domain>`, the in-cluster `kubernetes.default.svc…` names (lowercase).
    pub api_server_names: Vec<String>,
    /// Upper bound for `spec.expirationSeconds` (PKCA's default is 367 days).
    pub max_expiration_seconds: i32,
    /// Approve client CSRs of nodes without a reboot record on the old rules
    /// (`--trust-unverified-boot`): the operator checked the host some other way.
    pub trust_unverified_boot: bool,
    /// The kubelet's wait before it re-keys ([`KUBELET_RETRY_SECONDS`]; simulators shorten it).
    pub kubelet_retry_seconds: i64,
}

impl Policy {
    /// PKCA's default maximum lifetime: 367 days, in seconds.
    pub const DEFAULT_MAX_EXPIRATION_SECONDS: i32 = 367 * 24 * 3600;

    /// The policy for cluster `<cluster_name>.<base_domain>`: API names from the cluster's
    /// domain plus the in-cluster `kubernetes` service names, and the default maximum lifetime.
    pub fn for_cluster(
        cluster_name: &str,
        base_domain: &str,
        cluster_networks: Vec<IpNet>,
        service_networks: Vec<IpNet>,
    ) -> Self {
        let domain = format!("{cluster_name}.{base_domain}").to_ascii_lowercase();
        let mut api_server_names = vec![format!("api.{domain}"), format!("api-int.{domain}")];
        for n in [
            "kubernetes",
            "kubernetes.default",
            "kubernetes.default.svc",
            "kubernetes.default.svc.cluster.local",
            "openshift",
            "openshift.default",
            "openshift.default.svc",
            "openshift.default.svc.cluster.local",
        ] {
            api_server_names.push(n.to_string());
        }
        Policy {
            cluster_networks,
            service_networks,
            api_server_names,
            max_expiration_seconds: Self::DEFAULT_MAX_EXPIRATION_SECONDS,
            trust_unverified_boot: false,
            kubelet_retry_seconds: KUBELET_RETRY_SECONDS,
        }
    }
}

/// The outcome for one CSR.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Verdict {
    /// Client, serving, or not a kubelet CSR.
    pub kind: Kind,
    /// The node the CSR speaks for: the name in its single CN, or for a serving CSR without a
    /// usable CN the name in `spec.username`; None when neither names one. Raw text from the
    /// CSR (it may be an invalid name with control characters): escape it with
    /// [`escape_for_display`] before showing it; the reasons' texts are already escaped.
    pub node: Option<String>,
    /// True only for a kubelet CSR with no failed check.
    pub approve: bool,
    /// Every failed check, in checklist order.
    pub reasons: Vec<Reason>,
    /// A client CSR of an expected node whose reboot is not recorded, judged without that
    /// check because of [`Policy::trust_unverified_boot`]: nothing binds it to the machine
    /// (an approval of it is said with a warning and marked in `-o json`).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub unverified_boot: bool,
}

impl Verdict {
    /// Not approved, and every reason waits for more information ([`Reason::waits`]): held,
    /// not rejected.
    pub fn held(&self) -> bool {
        !self.approve && !self.reasons.is_empty() && self.reasons.iter().all(Reason::waits)
    }
}

/// Decides whether `csr` may be approved. Pure and total: never panics, never does I/O.
///
/// A CSR of any other signer gets `Kind::NotKubelet`, `approve == false` and the single reason
/// `other-signer` (callers leave it alone). For kubelet CSRs every check of
/// docs/approve.md "Verifying kubelet CSRs" is run even after one failed, and all failures are returned.
pub fn verdict(
    csr: &CsrView,
    expected: &ExpectedNodes,
    existing: &ExistingNodes,
    approvals: &ApprovalsRecorded,
    policy: &Policy,
    now: Time,
) -> Verdict {
    verdict_with_key(csr, expected, existing, approvals, policy, now).0
}

/// The verdicts on every CSR of a listing, in the same order: [`verdict`] on each, then the
/// rule that needs them all at once — several pending CSRs of one kind for one node that each
/// pass:
/// - serving CSRs (only the node's own credentials can create them), and client CSRs that all
///   carry the same public key (only the key's holder can sign them): the newest is approved,
///   the one the kubelet waits on, and the older ones get `superseded`;
/// - client CSRs with different keys, the node's reboot recorded: the kubelet on OpenShift's
///   path makes a new key and CSR each time one stays unapproved for
///   [`Policy::kubelet_retry_seconds`] (docs/approve.md "What a real kubelet sends"). When every two
///   consecutive ones with different keys are at least 90 % of that apart, the newest is
///   approved and the older ones are `superseded`; when two are closer (no kubelet does that),
///   a second requester exists and all are held (`second-requester`);
/// - client CSRs with different keys and no reboot record (`--trust-unverified-boot`): nothing
///   tells the retries from a rival, all are held (`competing-requests`).
pub fn verdict_all(
    csrs: &[CsrView],
    expected: &ExpectedNodes,
    existing: &ExistingNodes,
    approvals: &ApprovalsRecorded,
    policy: &Policy,
    now: Time,
) -> Vec<Verdict> {
    let mut out: Vec<(Verdict, Option<Vec<u8>>)> = csrs
        .iter()
        .map(|c| verdict_with_key(c, expected, existing, approvals, policy, now))
        .collect();
    contest_skew_window(csrs, expected, &mut out);
    let mut groups: std::collections::BTreeMap<(String, Kind), Vec<usize>> = Default::default();
    for (i, (v, _)) in out.iter().enumerate() {
        if let (true, Some(n)) = (v.approve, &v.node) {
            groups.entry((n.clone(), v.kind)).or_default().push(i);
        }
    }
    for ((node, kind), mut idx) in groups {
        if idx.len() < 2 {
            continue;
        }
        // Oldest first, by creation time then name.
        idx.sort_by(|&a, &b| (csrs[a].created, &csrs[a].name).cmp(&(csrs[b].created, &csrs[b].name)));
        let same_key = idx.iter().all(|&i| out[i].1 == out[idx[0]].1);
        if kind == Kind::Client && !same_key {
            let names: Vec<String> = idx.iter().map(|&i| csrs[i].name.clone()).collect();
            let verified = expected.get(&node).is_some_and(|e| e.rebooted_at.is_some());
            let held = if verified {
                closest_rekey_gap(&idx, csrs, &out)
                    .filter(|gap| *gap < min_rekey_gap(policy))
                    .map(|gap| Reason::SecondRequester {
                        node: node.clone(),
                        csrs: idx
                            .iter()
                            .map(|&i| (csrs[i].name.clone(), csrs[i].created))
                            .collect(),
                        gap_seconds: gap,
                        retry_seconds: policy.kubelet_retry_seconds,
                    })
            } else {
                Some(Reason::CompetingRequests {
                    node: node.clone(),
                    csrs: names,
                })
            };
            if let Some(r) = held {
                for &i in &idx {
                    out[i].0.reasons.push(r.clone());
                    out[i].0.approve = false;
                }
                continue;
            }
        }
        let keep = *idx.last().expect("two or more");
        for &i in idx.iter().filter(|&&i| i != keep) {
            out[i].0.reasons.push(Reason::Superseded {
                node: node.clone(),
                kind,
                by: csrs[keep].name.clone(),
            });
            out[i].0.approve = false;
        }
    }
    out.into_iter().map(|(v, _)| v).collect()
}

/// The clock-skew window's rule: a passing client CSR created before its host's reboot record
/// (so only inside [`REBOOT_CLOCK_SKEW_SECONDS`] of it) is not approved on that record alone
/// when another client CSR for the same node was created after the batch was recorded but
/// before the window opened (`rebooted - skew`): the installed system did not exist then, so
/// someone else holding the bootstrap token is asking, and re-posting every few seconds puts one
/// of their CSRs in any window. Such a CSR gets [`Reason::EarlyRequester`] (never approved).
///
/// A real kubelet always passes: nothing of the installed system asks before the reboot, so no
/// such earlier CSR exists, and its first CSR comes seconds to minutes after the reboot (a CSR
/// before the record is only clocks disagreeing, which the window allows). If a rogue did ask
/// early, a genuine CSR inside the window is refused too, and the kubelet's next CSR (a new key
/// after its retry wait) is after the record and judged as usual. CSRs made before the batch
/// (a replaced image's) do not count.
fn contest_skew_window(csrs: &[CsrView], expected: &ExpectedNodes, out: &mut [(Verdict, Option<Vec<u8>>)]) {
    for i in 0..csrs.len() {
        let (true, Kind::Client, Some(node), Some(created)) = (
            out[i].0.approve,
            out[i].0.kind,
            out[i].0.node.clone(),
            csrs[i].created,
        ) else {
            continue;
        };
        let Some(exp) = expected.get(&node) else { continue };
        let Some(rebooted) = exp.rebooted_at else { continue };
        if created.as_second() >= rebooted.as_second() {
            continue;
        }
        let opens = rebooted.as_second() - REBOOT_CLOCK_SKEW_SECONDS;
        let earlier = csrs
            .iter()
            .enumerate()
            .filter(|(j, c)| {
                *j != i
                    && c.kind() == Kind::Client
                    && out[*j].0.node.as_deref() == Some(node.as_str())
                    && c.created
                        .is_some_and(|t| t >= exp.recorded_at && t.as_second() < opens)
            })
            .filter_map(|(_, c)| Some((c.created?, c.name.clone())))
            .min();
        if let Some((earlier_created, earlier)) = earlier {
            out[i].0.reasons.push(Reason::EarlyRequester {
                node,
                csr: csrs[i].name.clone(),
                created,
                rebooted,
                earlier,
                earlier_created,
            });
            out[i].0.approve = false;
        }
    }
}

/// 90 % of the kubelet's retry wait: the least time between two of its CSRs (the wait starts
/// before the CSR is created, so consecutive ones are at least the wait apart).
fn min_rekey_gap(policy: &Policy) -> i64 {
    policy.kubelet_retry_seconds - policy.kubelet_retry_seconds / 10
}

/// The smallest time in seconds between two consecutive CSRs of `idx` (oldest first) whose keys
/// differ (None: no such pair). A CSR without a creation time counts as 0 s from its neighbour.
fn closest_rekey_gap(idx: &[usize], csrs: &[CsrView], out: &[(Verdict, Option<Vec<u8>>)]) -> Option<i64> {
    idx.windows(2)
        .filter(|w| out[w[0]].1 != out[w[1]].1)
        .map(|w| match (csrs[w[0]].created, csrs[w[1]].created) {
            (Some(a), Some(b)) => b.as_second() - a.as_second(),
            _ => 0,
        })
        .min()
}

fn verdict_with_key(
    csr: &CsrView,
    expected: &ExpectedNodes,
    existing: &ExistingNodes,
    approvals: &ApprovalsRecorded,
    policy: &Policy,
    now: Time,
) -> (Verdict, Option<Vec<u8>>) {
    let kind = csr.kind();
    if kind == Kind::NotKubelet {
        let v = Verdict {
            kind,
            node: None,
            approve: false,
            reasons: vec![Reason::OtherSigner {
                signer: csr.signer_name.clone(),
            }],
            unverified_boot: false,
        };
        return (v, None);
    }
    let mut reasons = Vec::new();
    let mut unverified_boot = false;

    // 1. PEM, DER, algorithms, signature, attributes.
    let (parsed, parse_reasons) = parse_request(&csr.request);
    reasons.extend(parse_reasons);

    // 2. Subject: exactly O=system:nodes and one CN=system:node:<name>.
    let mut node: Option<String> = None;
    if let Some(p) = &parsed {
        if p.multi_valued_rdn {
            reasons.push(Reason::MultiValuedRdn);
        }
        if !p.other_subject.is_empty() {
            reasons.push(Reason::SubjectExtra {
                attrs: p.other_subject.clone(),
            });
        }
        if p.organizations.len() != 1 || p.organizations[0] != "system:nodes" {
            reasons.push(Reason::Organization {
                found: p.organizations.clone(),
            });
        }
        if p.common_names.len() != 1 {
            reasons.push(Reason::CommonNameCount {
                found: p.common_names.clone(),
            });
        } else {
            let cn = &p.common_names[0];
            match cn.strip_prefix(NODE_PREFIX) {
                Some(name) if !name.is_empty() => {
                    if !is_dns1123_subdomain(name) {
                        reasons.push(Reason::NodeNameInvalid {
                            name: name.to_string(),
                        });
                    }
                    node = Some(name.to_string());
                }
                _ => reasons.push(Reason::CommonNameNotNode { cn: cn.clone() }),
            }
        }
    }

    // 3. Pending, lifetime.
    if !csr.conditions.is_empty() || csr.has_certificate {
        let mut state: Vec<String> = csr.conditions.clone();
        if csr.has_certificate {
            state.push("certificate issued".into());
        }
        reasons.push(Reason::NotPending {
            state: state.iter().map(|s| esc(s)).collect::<Vec<_>>().join(", "),
        });
    }
    if let Some(s) = csr.expiration_seconds {
        if s > policy.max_expiration_seconds {
            reasons.push(Reason::ExpirationTooLong {
                seconds: s,
                max: policy.max_expiration_seconds,
            });
        }
        if s < 600 {
            reasons.push(Reason::ExpirationTooShort { seconds: s });
        }
    }
    if let Some(created) = csr.created {
        if created.as_second().saturating_sub(now.as_second()) > CLOCK_SKEW_SECONDS {
            reasons.push(Reason::CreatedInFuture { created, now });
        }
    }

    // 4. Signer-specific checks.
    match kind {
        Kind::Client => {
            unverified_boot = check_client(
                csr,
                parsed.as_ref(),
                node.as_deref(),
                (expected, existing, approvals),
                policy,
                &mut reasons,
            )
        }
        Kind::Serving => {
            if node.is_none() {
                // No usable CN: attribute the CSR to the requester for display and grouping.
                node = csr
                    .username
                    .strip_prefix(NODE_PREFIX)
                    .filter(|n| !n.is_empty())
                    .map(str::to_string);
            }
            check_serving(
                csr,
                parsed.as_ref(),
                node.as_deref(),
                expected,
                approvals,
                policy,
                &mut reasons,
            )
        }
        Kind::NotKubelet => unreachable!("handled above"),
    }

    let spki = parsed.map(|p| p.spki);
    (
        Verdict {
            kind,
            node,
            approve: reasons.is_empty(),
            reasons,
            unverified_boot,
        },
        spki,
    )
}

fn usages_ok(usages: &[String], last: &str) -> bool {
    let mut u: Vec<&str> = usages.iter().map(String::as_str).collect();
    u.sort_unstable();
    let mut a = vec!["digital signature", last];
    let mut b = vec!["digital signature", "key encipherment", last];
    a.sort_unstable();
    b.sort_unstable();
    u == a || u == b
}

fn check_client(
    csr: &CsrView,
    parsed: Option<&ParsedRequest>,
    node: Option<&str>,
    (expected, existing, approvals): (&ExpectedNodes, &ExistingNodes, &ApprovalsRecorded),
    policy: &Policy,
    reasons: &mut Vec<Reason>,
) -> bool {
    if csr.username != BOOTSTRAPPER {
        reasons.push(Reason::ClientRequester {
            username: csr.username.clone(),
        });
    }
    let mut groups: Vec<&str> = csr.groups.iter().map(String::as_str).collect();
    groups.sort_unstable();
    let mut want = BOOTSTRAPPER_GROUPS.to_vec();
    want.sort_unstable();
    if groups != want {
        reasons.push(Reason::ClientGroups {
            groups: csr.groups.clone(),
        });
    }
    if let Some(p) = parsed {
        // No SAN and no extension request at all (a real kubelet sends neither).
        if !p.sans.is_empty() {
            reasons.push(Reason::ClientHasSan {
                sans: p.sans.iter().map(|s| s.to_string()).collect(),
            });
        }
        // Every requested extension except a SAN already reported above; an empty
        // extensionRequest is reported too (a real kubelet sends none).
        let ext_req = parse::extension_request_oid();
        let others: Vec<String> = dedup_names(
            p.extensions
                .iter()
                .filter(|e| p.sans.is_empty() || e.oid != "2.5.29.17")
                .map(|e| e.name()),
        );
        if !others.is_empty() || (p.sans.is_empty() && p.attributes.contains(&ext_req)) {
            reasons.push(Reason::ClientHasExtensions { extensions: others });
        }
        for a in dedup(p.attributes.iter().filter(|a| **a != ext_req)) {
            reasons.push(Reason::UnexpectedAttribute {
                attribute: attr_name(a),
            });
        }
    }
    if !usages_ok(&csr.usages, "client auth") {
        reasons.push(Reason::Usages {
            kind: Kind::Client,
            usages: csr.usages.clone(),
        });
    }
    let Some(name) = node else { return false };
    let node_exists = existing.names.contains(name);
    if node_exists {
        reasons.push(Reason::NodeExists {
            node: name.to_string(),
        });
    }
    let Some(exp) = expected.get(name) else {
        reasons.push(Reason::NotExpectedNode {
            node: name.to_string(),
        });
        return false;
    };
    let count = approvals.count(name, Kind::Client, &csr.name);
    if count > exp.reissue {
        reasons.push(Reason::AlreadyApproved {
            node: name.to_string(),
            kind: Kind::Client,
            count,
            // --reissue does not lift node-exists: no hint that leads nowhere.
            reissue_helps: !node_exists,
        });
    }
    match csr.created {
        None => reasons.push(Reason::CreationTimeUnknown),
        Some(created) => {
            if created < exp.recorded_at {
                reasons.push(Reason::CreatedBeforeBatch {
                    node: name.to_string(),
                    created,
                    recorded: exp.recorded_at,
                });
            }
            if created >= exp.token_expires {
                reasons.push(Reason::CreatedAfterTokenExpiry {
                    node: name.to_string(),
                    created,
                    expires: exp.token_expires,
                });
            }
        }
    }
    // A reissue is bound to a new install: a reboot recorded after the client CSR approved
    // before (issue 22 item 3).
    if count >= 1 && count <= exp.reissue && !policy.trust_unverified_boot {
        if let Some(prev) = approvals.last_client(name, &csr.name) {
            if let Some(prev_created) = prev.created {
                if exp
                    .rebooted_at
                    .is_none_or(|r| r.as_second() <= prev_created.as_second())
                {
                    reasons.push(Reason::ReissueUnbound {
                        node: name.to_string(),
                        previous: prev.csr.clone(),
                        previous_created: prev_created,
                        rebooted: exp.rebooted_at,
                    });
                }
            }
        }
    }
    // Bound to the machine: only the real host runs our ISO's assisted-service, and its
    // installed kubelet cannot have asked before the host left the installation.
    match (exp.rebooted_at, csr.created) {
        (Some(rebooted), Some(created))
            if created.as_second() < rebooted.as_second() - REBOOT_CLOCK_SKEW_SECONDS =>
        {
            reasons.push(Reason::CreatedBeforeReboot {
                node: name.to_string(),
                csr: csr.name.clone(),
                created,
                rebooted,
            })
        }
        (Some(_), _) => {}
        (None, _) if policy.trust_unverified_boot => return true,
        (None, _) => reasons.push(Reason::BootUnverified {
            node: name.to_string(),
        }),
    }
    false
}

fn check_serving(
    csr: &CsrView,
    parsed: Option<&ParsedRequest>,
    node: Option<&str>,
    expected: &ExpectedNodes,
    approvals: &ApprovalsRecorded,
    policy: &Policy,
    reasons: &mut Vec<Reason>,
) {
    // Requester: system:node:<name>, the same identity as the CN.
    match csr.username.strip_prefix(NODE_PREFIX) {
        Some(u) if !u.is_empty() => {
            if let Some(p) = parsed {
                if p.common_names.len() == 1 && p.common_names[0] != csr.username {
                    reasons.push(Reason::CommonNameMismatch {
                        cn: p.common_names[0].clone(),
                        username: csr.username.clone(),
                    });
                }
            }
        }
        _ => reasons.push(Reason::ServingRequester {
            username: csr.username.clone(),
        }),
    }
    let missing: Vec<String> = ["system:nodes", "system:authenticated"]
        .into_iter()
        .filter(|g| !csr.groups.iter().any(|x| x == g))
        .map(str::to_string)
        .collect();
    if !missing.is_empty() {
        reasons.push(Reason::ServingGroups { missing });
    }
    if !usages_ok(&csr.usages, "server auth") {
        reasons.push(Reason::Usages {
            kind: Kind::Serving,
            usages: csr.usages.clone(),
        });
    }
    let exp = node.and_then(|n| expected.get(n));
    if let Some(n) = node {
        if exp.is_none() {
            reasons.push(Reason::NotExpectedNode { node: n.to_string() });
        }
    }
    if let (Some(n), Some(e)) = (node, exp) {
        let count = approvals.count(n, Kind::Serving, &csr.name);
        if count > e.reissue {
            reasons.push(Reason::AlreadyApproved {
                node: n.to_string(),
                kind: Kind::Serving,
                count,
                reissue_helps: true,
            });
        }
        if e.ips.is_empty() {
            reasons.push(Reason::NoExpectedAddresses { node: n.to_string() });
        }
    }
    let Some(p) = parsed else { return };
    let ext_req = parse::extension_request_oid();
    for a in dedup(p.attributes.iter().filter(|a| **a != ext_req)) {
        reasons.push(Reason::UnexpectedAttribute {
            attribute: attr_name(a),
        });
    }
    let mut seen = BTreeSet::new();
    for e in p.extensions.iter().filter(|e| e.oid != "2.5.29.17") {
        if seen.insert(e.oid.clone()) {
            reasons.push(Reason::UnexpectedExtension {
                extension: e.name(),
                critical: e.critical,
            });
        }
    }
    if p.sans.is_empty() {
        reasons.push(Reason::NoSan);
    }
    for san in &p.sans {
        match san {
            San::Dns { name, .. } => check_dns_san(name, node, exp, policy, reasons),
            San::Ip(bytes) => check_ip_san(bytes, node, exp, policy, reasons),
            other => reasons.push(Reason::SanKindNotAllowed {
                san: other.to_string(),
            }),
        }
    }
}

fn check_dns_san(
    name: &str,
    node: Option<&str>,
    exp: Option<&ExpectedNode>,
    policy: &Policy,
    reasons: &mut Vec<Reason>,
) {
    // One reason per SAN, the most specific one.
    if name.contains('*') {
        reasons.push(Reason::DnsSanWildcard {
            name: name.to_string(),
        });
        return;
    }
    let lower = name.to_ascii_lowercase();
    let lower = lower.trim_end_matches('.');
    if policy.api_server_names.iter().any(|a| a == lower)
        || lower.ends_with(".svc")
        || lower.ends_with(".cluster.local")
    {
        reasons.push(Reason::DnsSanApiServer {
            name: name.to_string(),
        });
        return;
    }
    // Exact, case-sensitive: the kubelet sends its hostname as is, lowercase.
    match exp {
        Some(e) if e.hostname == name => {}
        _ => reasons.push(Reason::DnsSanNotHostname {
            name: name.to_string(),
            node: node.unwrap_or("?").to_string(),
            hostname: exp
                .map(|e| e.hostname.clone())
                .unwrap_or_else(|| "not expected".into()),
        }),
    }
}

fn check_ip_san(
    bytes: &[u8],
    node: Option<&str>,
    exp: Option<&ExpectedNode>,
    policy: &Policy,
    reasons: &mut Vec<Reason>,
) {
    let Some(ip) = parse::ip_of(bytes) else {
        reasons.push(Reason::IpSanLength { len: bytes.len() });
        return;
    };
    let s = ip.to_string();
    if let IpAddr::V6(v6) = ip {
        if v6.to_ipv4_mapped().is_some() {
            reasons.push(Reason::IpSanV4Mapped { ip: s });
            return;
        }
    }
    if let Some(what) = special_ip(ip) {
        reasons.push(Reason::IpSanSpecial { ip: s, what });
        return;
    }
    if let Some(net) = policy.cluster_networks.iter().find(|n| n.contains(&ip)) {
        reasons.push(Reason::IpSanClusterNetwork {
            ip: s,
            net: net.to_string(),
        });
        return;
    }
    if let Some(net) = policy.service_networks.iter().find(|n| n.contains(&ip)) {
        reasons.push(Reason::IpSanServiceNetwork {
            ip: s,
            net: net.to_string(),
        });
        return;
    }
    match exp {
        // Unknown addresses are reported once (NoExpectedAddresses), not per SAN.
        Some(e) if e.ips.is_empty() => {}
        Some(e) if e.ips.contains(&ip) => {}
        _ => reasons.push(Reason::IpSanNotNodeAddress {
            ip: s,
            node: node.unwrap_or("?").to_string(),
            expected: exp
                .map(|e| e.ips.iter().map(|i| i.to_string()).collect())
                .unwrap_or_default(),
        }),
    }
}

fn special_ip(ip: IpAddr) -> Option<&'static str> {
    match ip {
        IpAddr::V4(v4) => {
            if v4.is_loopback() {
                Some("loopback")
            } else if v4.is_unspecified() {
                Some("unspecified")
            } else if v4.is_link_local() {
                Some("link-local")
            } else if v4.is_multicast() {
                Some("multicast")
            } else if v4.is_broadcast() {
                Some("broadcast")
            } else if v4.octets()[0] == 0 {
                Some("\"this network\" (0.0.0.0/8)")
            } else {
                None
            }
        }
        IpAddr::V6(v6) => {
            if v6.is_loopback() {
                Some("loopback")
            } else if v6.is_unspecified() {
                Some("unspecified")
            } else if v6.is_unicast_link_local() {
                Some("link-local")
            } else if v6.is_multicast() {
                Some("multicast")
            } else if v6.to_ipv4().is_some() && v6.segments()[..6] == [0; 6] {
                // ::a.b.c.d (deprecated IPv4-compatible): another way to smuggle an IPv4 address.
                Some("IPv4-compatible")
            } else {
                None
            }
        }
    }
}

fn dedup<'a, I: Iterator<Item = &'a String>>(it: I) -> Vec<&'a String> {
    let mut out: Vec<&String> = Vec::new();
    for a in it {
        if !out.contains(&a) {
            out.push(a);
        }
    }
    out
}

fn dedup_names<I: Iterator<Item = String>>(it: I) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for n in it {
        if !out.contains(&n) {
            out.push(n);
        }
    }
    out
}

fn attr_name(oid: &str) -> String {
    if parse::is_challenge_password(oid) {
        return "challengePassword".into();
    }
    parse::oid_name(oid)
        .map(str::to_string)
        .unwrap_or_else(|| oid.to_string())
}

/// Kubernetes node names: a lowercase RFC 1123 subdomain ([`crate::k8s_names`]).
pub use crate::k8s_names::is_dns1123_subdomain;

/// One CSR named in an [`Alarm`] (values escaped for display).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct AlarmCsr {
    /// CSR name.
    pub name: String,
    /// creationTimestamp, RFC 3339 (None: unknown).
    pub created: Option<String>,
    /// `spec.username` (None: unknown, e.g. an approval recorded before it was kept).
    pub requester: Option<String>,
    /// `approved` (its client certificate was approved) or `pending` / `denied` / `failed`.
    pub state: String,
}

/// Something that looks like another holder of the bootstrap token asking in a node's name.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Alarm {
    /// `possible-impostor`: a bootstrapper client CSR for a node after its client CSR was
    /// approved; `second-requester`: pending client CSRs of one node with different keys closer
    /// together than the kubelet re-keys ([`Reason::SecondRequester`]).
    pub code: &'static str,
    /// The node (escaped).
    pub node: String,
    /// The sentence shown (escaped).
    pub message: String,
    /// The CSRs concerned, the approved one first for `possible-impostor`.
    pub csrs: Vec<AlarmCsr>,
}

fn state_of(c: &CsrView) -> String {
    if c.conditions.iter().any(|t| t == "Approved") {
        "approved".into()
    } else if c.conditions.iter().any(|t| t == "Denied") {
        "denied".into()
    } else if c.conditions.iter().any(|t| t == "Failed") {
        "failed".into()
    } else {
        "pending".into()
    }
}

/// The node a client CSR's single CN names (`system:node:<name>`), if any.
pub fn client_cn_node(c: &CsrView) -> Option<String> {
    let (p, _) = parse_request(&c.request);
    let p = p?;
    match p.common_names.as_slice() {
        [cn] => cn
            .strip_prefix(NODE_PREFIX)
            .filter(|n| !n.is_empty())
            .map(str::to_string),
        _ => None,
    }
}

/// The alarms of a listing. Pure. `all`: the client CSRs seen (any state) with the node their
/// CN names ([`client_cn_node`]; callers cache it rather than parse every CSR on every event);
/// `judged`: the pending ones with their [`verdict_all`] verdicts (empty when nothing was
/// judged, e.g. `monitor` without `--approve`).
///
/// - `possible-impostor`, per expected node: a client CSR from the node-bootstrapper created
///   after a client CSR of that node that was approved (recorded on the batch, or Approved in
///   the cluster), both made since its batch was recorded. When the Node exists (`node_exists`),
///   its kubelet renews as `system:node:<name>` (not an alarm), so a new bootstrap request is
///   someone else's; when it does not, the approved certificate was never used to register it,
///   and either CSR may be the impostor's (the approved one suspect). A recorded approval whose
///   CSR was deleted is cited as `NAME (deleted)`.
/// - `second-requester`, per node whose pending client CSRs got [`Reason::SecondRequester`].
pub fn alarms(
    all: &[(CsrView, String)],
    judged: &[(CsrView, Verdict)],
    expected: &ExpectedNodes,
    approvals: &ApprovalsRecorded,
    node_exists: impl Fn(&str) -> bool,
) -> Vec<Alarm> {
    let show = |s: &str| escape_for_display(s, usize::MAX);
    let view_csr = |c: &CsrView| AlarmCsr {
        name: show(&c.name),
        created: c.created.map(|t| t.to_string()),
        requester: Some(show(&c.username)),
        state: state_of(c),
    };
    // Grouped by node once: this runs on every client CSR event of a watch.
    let mut clients: std::collections::BTreeMap<&str, Vec<&CsrView>> = Default::default();
    for (c, n) in all.iter().filter(|(c, _)| c.kind() == Kind::Client) {
        clients.entry(n.as_str()).or_default().push(c);
    }
    let mut recorded: std::collections::BTreeMap<&str, Vec<&RecordedApproval>> = Default::default();
    for a in approvals.approvals.iter().filter(|a| a.kind == Kind::Client) {
        recorded.entry(a.node.as_str()).or_default().push(a);
    }
    let mut out = Vec::new();
    for exp in &expected.nodes {
        let node = exp.hostname.as_str();
        let Some(cs) = clients.get(node) else {
            continue;
        };
        let since = |t: Option<Time>| t.is_none_or(|t| t >= exp.recorded_at);
        // The approved client CSRs (raw name, shown, created): recorded approvals first, then
        // Approved objects nobody recorded (oc adm certificate approve).
        let mut approved: Vec<(&str, AlarmCsr, Option<Time>)> = Vec::new();
        for a in recorded.get(node).into_iter().flatten() {
            let obj = cs.iter().find(|c| c.name == a.csr);
            let created = a.created.or(obj.and_then(|c| c.created));
            if !since(created) {
                continue;
            }
            let shown = AlarmCsr {
                // Only CSRs that still exist are cited as they are.
                name: if obj.is_some() {
                    show(&a.csr)
                } else {
                    format!("{} (deleted)", show(&a.csr))
                },
                created: created.map(|t| t.to_string()),
                requester: a
                    .requester
                    .clone()
                    .or(obj.map(|c| c.username.clone()))
                    .map(|r| show(&r)),
                state: "approved".into(),
            };
            approved.push((a.csr.as_str(), shown, created));
        }
        for c in cs.iter().filter(|c| state_of(c) == "approved") {
            if since(c.created) && !approved.iter().any(|(n, _, _)| *n == c.name) {
                approved.push((c.name.as_str(), view_csr(c), c.created));
            }
        }
        let Some(first_i) = (0..approved.len()).min_by_key(|&i| approved[i].2) else {
            continue;
        };
        let first = approved[first_i].2;
        for c in cs.iter().filter(|c| c.username == BOOTSTRAPPER) {
            if approved.iter().any(|(n, _, _)| *n == c.name) {
                continue;
            }
            // creationTimestamp has whole seconds: the same second counts as after (no kubelet
            // re-keys within one).
            let after = match (first, c.created) {
                (Some(a), Some(b)) => b >= a,
                _ => true,
            };
            if !after {
                continue;
            }
            let a = &approved[first_i].1;
            let b = view_csr(c);
            let message = if node_exists(node) {
                format!(
                    "possible impostor: client CSR {} (created {}, by {}, {}) asks the bootstrap way for {} after its client CSR {} (created {}, by {}) was approved; a joined kubelet renews as {NODE_PREFIX}{}, so this one comes from another holder of the bootstrap token (or a machine booted again from {}'s image); it is not approved: find out who made it, then delete it (oc delete csr {})",
                    b.name,
                    b.created.as_deref().unwrap_or("at an unknown time"),
                    b.requester.as_deref().unwrap_or("?"),
                    b.state,
                    show(node),
                    a.name,
                    a.created.as_deref().unwrap_or("at an unknown time"),
                    a.requester.as_deref().unwrap_or("an unrecorded requester"),
                    show(node),
                    show(node),
                    b.name,
                )
            } else {
                // The approved certificate was never used to register the Node: nothing says
                // which of the two is the host's kubelet.
                format!(
                    "possible impostor: client CSR {} (created {}, by {}, {}) asks the bootstrap way for {} after its client CSR {} (created {}, by {}) was approved, and no Node {} has registered since: either may be the impostor, and the approved one is suspect because no Node appeared after its approval. Check on {}'s console which kubelet is real (the host runs its installed system; its kubelet's log from when the CSRs were made: `journalctl -u kubelet`). Deleting a CSR revokes nothing: the certificate issued for {} stays valid until its notAfter (Kubernetes has no certificate revocation). Only once you have checked that {} is the real kubelet's, approve it with `approve --reissue {}`; if {} is, delete {} (oc delete csr {})",
                    b.name,
                    b.created.as_deref().unwrap_or("at an unknown time"),
                    b.requester.as_deref().unwrap_or("?"),
                    b.state,
                    show(node),
                    a.name,
                    a.created.as_deref().unwrap_or("at an unknown time"),
                    a.requester.as_deref().unwrap_or("an unrecorded requester"),
                    show(node),
                    show(node),
                    a.name,
                    b.name,
                    show(node),
                    a.name,
                    b.name,
                    b.name,
                )
            };
            out.push(Alarm {
                code: "possible-impostor",
                node: show(node),
                message,
                csrs: vec![a.clone(), b],
            });
        }
    }
    let mut seen = BTreeSet::new();
    for (c, v) in judged {
        for r in &v.reasons {
            if let Reason::SecondRequester { node, csrs, .. } = r {
                if !seen.insert(node.clone()) {
                    continue;
                }
                let named: Vec<AlarmCsr> = csrs
                    .iter()
                    .map(|(n, _)| {
                        judged
                            .iter()
                            .find(|(x, _)| &x.name == n)
                            .map(|(x, _)| view_csr(x))
                            .unwrap_or_else(|| view_csr(c))
                    })
                    .collect();
                out.push(Alarm {
                    code: "second-requester",
                    node: show(node),
                    message: r.to_string(),
                    csrs: named,
                });
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(s: &str) -> Time {
        s.parse().unwrap()
    }

    /// A kubelet-shaped client CSR for `node` (new P-256 key), created at `at`.
    fn client(name: &str, node: &str, at: &str) -> CsrView {
        let key = rcgen::KeyPair::generate().unwrap();
        client_with_key(name, node, at, &key)
    }

    fn client_with_key(name: &str, node: &str, at: &str, key: &rcgen::KeyPair) -> CsrView {
        let mut dn = rcgen::DistinguishedName::new();
        dn.push(rcgen::DnType::OrganizationName, "system:nodes");
        dn.push(rcgen::DnType::CommonName, format!("system:node:{node}"));
        let mut p = rcgen::CertificateParams::default();
        p.distinguished_name = dn;
        let pem = p.serialize_request(key).unwrap().pem().unwrap();
        CsrView {
            name: name.into(),
            created: Some(t(at)),
            signer_name: CLIENT_SIGNER.into(),
            username: BOOTSTRAPPER.into(),
            groups: BOOTSTRAPPER_GROUPS.iter().map(|s| s.to_string()).collect(),
            usages: vec!["digital signature".into(), "client auth".into()],
            request: pem.into_bytes(),
            ..Default::default()
        }
    }

    struct Sc {
        expected: ExpectedNodes,
        approvals: ApprovalsRecorded,
        policy: Policy,
    }

    /// worker-0's batch recorded at 10:00, its reboot reported at 10:20 (unless `reboot` None).
    fn sc(reboot: Option<&str>) -> Sc {
        Sc {
            expected: ExpectedNodes::new(vec![ExpectedNode {
                hostname: "worker-0".into(),
                ips: vec!["192.168.111.30".parse().unwrap()],
                recorded_at: t("2026-01-10T10:00:00Z"),
                token_expires: t("2026-01-11T10:00:00Z"),
                reissue: 0,
                rebooted_at: reboot.map(t),
            }]),
            approvals: ApprovalsRecorded::default(),
            policy: Policy::for_cluster("ostest", "example.com", vec![], vec![]),
        }
    }

    impl Sc {
        fn all(&self, csrs: &[CsrView]) -> Vec<Vec<&'static str>> {
            verdict_all(
                csrs,
                &self.expected,
                &ExistingNodes::default(),
                &self.approvals,
                &self.policy,
                t("2026-01-10T12:00:00Z"),
            )
            .iter()
            .map(|v| v.reasons.iter().map(Reason::code).collect())
            .collect()
        }
    }

    const NONE: Vec<&str> = Vec::new();

    /// Finding 3: re-posting a key every 9 s from before the boot always has a CSR inside the
    /// 2 s skew window before the record; none of those is approved, while a real kubelet's
    /// CSR inside the window (clocks a few seconds apart, nobody asking earlier) still is.
    #[test]
    fn a_csr_in_the_skew_window_is_refused_when_someone_asked_before_the_reboot() {
        let s = sc(Some("2026-01-10T10:20:00Z"));
        let flood = [
            client("csr-r1", "worker-0", "2026-01-10T10:19:41Z"),
            client("csr-r2", "worker-0", "2026-01-10T10:19:58Z"),
            client("csr-r3", "worker-0", "2026-01-10T10:19:59Z"),
        ];
        assert_eq!(
            s.all(&flood),
            [
                vec!["created-before-reboot"],
                vec!["early-requester"],
                vec!["early-requester"]
            ]
        );
        // The same key re-posted: the same answer.
        let key = rcgen::KeyPair::generate().unwrap();
        let same = [
            client_with_key("csr-k1", "worker-0", "2026-01-10T10:19:44Z", &key),
            client_with_key("csr-k2", "worker-0", "2026-01-10T10:19:59Z", &key),
        ];
        assert_eq!(
            s.all(&same),
            [vec!["created-before-reboot"], vec!["early-requester"]]
        );
        let v = verdict_all(
            &flood,
            &s.expected,
            &ExistingNodes::default(),
            &s.approvals,
            &s.policy,
            t("2026-01-10T12:00:00Z"),
        );
        let m = v[2].reasons[0].to_string();
        assert!(
            m.contains("client CSR csr-r1 for worker-0 was made at 2026-01-10T10:19:41Z")
                && m.contains("never approved"),
            "{m}"
        );
        assert!(!v[2].held() && !v[2].approve, "{v:?}");
        // Genuine: the kubelet's CSR 2 s before the record (clock skew), nobody asking earlier.
        let real = client("csr-real", "worker-0", "2026-01-10T10:19:58Z");
        assert_eq!(s.all(std::slice::from_ref(&real)), [NONE]);
        // A replaced image's CSR from before the batch does not count as an early requester.
        let stale = client("csr-stale", "worker-0", "2026-01-10T09:59:00Z");
        assert_eq!(
            s.all(&[stale, real.clone()]),
            [vec!["created-before-batch", "created-before-reboot"], NONE]
        );
        // Genuine after the record: approved even after an early flood.
        let after = client("csr-after", "worker-0", "2026-01-10T10:24:00Z");
        assert_eq!(
            s.all(&[flood[0].clone(), flood[2].clone(), after]),
            [vec!["created-before-reboot"], vec!["early-requester"], NONE]
        );
    }

    #[test]
    fn a_client_csr_is_bound_to_the_hosts_reboot_record() {
        let s = sc(Some("2026-01-10T10:20:00Z"));
        let before = client("csr-rogue", "worker-0", "2026-01-10T10:19:57Z");
        let skew = client("csr-skew", "worker-0", "2026-01-10T10:19:58Z");
        let after = client("csr-real", "worker-0", "2026-01-10T10:24:00Z");
        assert_eq!(
            s.all(std::slice::from_ref(&before)),
            [vec!["created-before-reboot"]]
        );
        assert_eq!(
            s.all(std::slice::from_ref(&skew)),
            [NONE],
            "2 s of clock skew allowed"
        );
        assert_eq!(s.all(std::slice::from_ref(&after)), [NONE]);
        // A rogue made before the reboot does not stand in the way of the real one.
        assert_eq!(
            s.all(&[before.clone(), after.clone()]),
            [vec!["created-before-reboot"], NONE]
        );
        let v = verdict_all(
            &[before],
            &s.expected,
            &ExistingNodes::default(),
            &s.approvals,
            &s.policy,
            t("2026-01-10T12:00:00Z"),
        );
        let m = v[0].reasons[0].to_string();
        assert!(
            m.contains("before worker-0's own assisted-service reported at 2026-01-10T10:20:00Z")
                && m.contains("never approved")
                && m.contains("(oc delete csr csr-rogue)")
                && !m.contains("NAME"),
            "{m}"
        );
        assert!(!v[0].held(), "refused for good: {v:?}");

        // No record: what could not be verified (held, not rejected), and the flag that
        // approves anyway, marked as such.
        let mut s = sc(None);
        let v = s.all(std::slice::from_ref(&after));
        assert_eq!(v, [vec!["boot-unverified"]]);
        let judge = |s: &Sc| {
            verdict_all(
                std::slice::from_ref(&after),
                &s.expected,
                &ExistingNodes::default(),
                &s.approvals,
                &s.policy,
                t("2026-01-10T12:00:00Z"),
            )
            .remove(0)
        };
        assert!(judge(&s).held() && !judge(&s).unverified_boot);
        s.policy.trust_unverified_boot = true;
        assert_eq!(s.all(std::slice::from_ref(&after)), [NONE]);
        assert!(judge(&s).approve && judge(&s).unverified_boot);
        let m = Reason::BootUnverified {
            node: "worker-0".into(),
        }
        .to_string();
        assert!(
            m.contains("no reboot of worker-0 is recorded")
                && m.contains("if a watch follows this host, wait for its reboot record")
                && m.contains("approve --watch judges the CSR again when it lands")
                && m.contains("pass --trust-unverified-boot only after checking on the host's console that it rebooted into the installed system and that this CSR is its kubelet's")
                && !m.contains("having checked the host yourself"),
            "{m}"
        );
    }

    #[test]
    fn kubelet_rekeying_approves_the_newest_and_close_requests_hold_all() {
        let s = sc(Some("2026-01-10T10:20:00Z"));
        // Three attempts 15 min apart, each with a new key: the newest is the kubelet's.
        let a = client("csr-a", "worker-0", "2026-01-10T10:21:00Z");
        let b = client("csr-b", "worker-0", "2026-01-10T10:36:01Z");
        let c = client("csr-c", "worker-0", "2026-01-10T10:51:03Z");
        assert_eq!(
            s.all(&[c.clone(), a.clone(), b.clone()]),
            [NONE, vec!["superseded"], vec!["superseded"]]
        );
        // 90 % of the retry wait is still a retry; closer is a second requester.
        let b2 = client("csr-b2", "worker-0", "2026-01-10T10:34:30Z");
        assert_eq!(s.all(&[a.clone(), b2]), [vec!["superseded"], NONE]);
        let rival = client("csr-rival", "worker-0", "2026-01-10T10:21:02Z");
        assert_eq!(
            s.all(&[a.clone(), rival.clone(), c.clone()]),
            [
                vec!["second-requester"],
                vec!["second-requester"],
                vec!["second-requester"]
            ]
        );
        let v = verdict_all(
            &[a.clone(), rival.clone()],
            &s.expected,
            &ExistingNodes::default(),
            &s.approvals,
            &s.policy,
            t("2026-01-10T12:00:00Z"),
        );
        let m = v[0].reasons[0].to_string();
        assert!(
            m.starts_with("a second requester exists: 2 pending client CSRs for worker-0 with different keys (csr-a at 2026-01-10T10:21:00Z, csr-rival at 2026-01-10T10:21:02Z), two of them 2 s apart")
                && m.contains("only every 15m"),
            "{m}"
        );
        // The same key twice is one requester (only the key's holder can sign): newest.
        let key = rcgen::KeyPair::generate().unwrap();
        let k1 = client_with_key("csr-k1", "worker-0", "2026-01-10T10:21:00Z", &key);
        let k2 = client_with_key("csr-k2", "worker-0", "2026-01-10T10:21:01Z", &key);
        assert_eq!(s.all(&[k1, k2]), [vec!["superseded"], NONE]);
        // A shorter retry (a simulator's) moves the bound.
        let mut fast = sc(Some("2026-01-10T10:20:00Z"));
        fast.policy.kubelet_retry_seconds = 2;
        assert_eq!(fast.all(&[a.clone(), rival.clone()]), [vec!["superseded"], NONE]);

        // Unverified boot (--trust-unverified-boot): retries cannot be told from a rival.
        let mut u = sc(None);
        u.policy.trust_unverified_boot = true;
        assert_eq!(
            u.all(&[a, c]),
            [vec!["competing-requests"], vec!["competing-requests"]]
        );
    }

    #[test]
    fn a_bootstrap_request_after_the_approval_is_an_alarm_a_renewal_is_not() {
        let mut s = sc(Some("2026-01-10T10:20:00Z"));
        let mut real = client("csr-real", "worker-0", "2026-01-10T10:21:00Z");
        real.conditions = vec!["Approved".into()];
        real.has_certificate = true;
        s.approvals.approvals.push(RecordedApproval {
            node: "worker-0".into(),
            kind: Kind::Client,
            csr: "csr-real".into(),
            created: Some(t("2026-01-10T10:21:00Z")),
            requester: Some(BOOTSTRAPPER.into()),
        });
        let older = client("csr-older", "worker-0", "2026-01-10T10:20:30Z");
        let rogue = client("csr-rogue", "worker-0", "2026-01-10T11:00:00Z");
        let mut renewal = client("csr-renew", "worker-0", "2026-01-10T11:05:00Z");
        renewal.username = "system:node:worker-0".into();
        let with_node = |v: &[&CsrView]| -> Vec<(CsrView, String)> {
            v.iter()
                .map(|c| ((*c).clone(), client_cn_node(c).unwrap()))
                .collect()
        };
        let joined = |n: &str| n == "worker-0";
        let al = alarms(
            &with_node(&[&real, &older, &rogue, &renewal]),
            &[],
            &s.expected,
            &s.approvals,
            joined,
        );
        assert_eq!(al.len(), 1, "{al:#?}");
        assert_eq!(al[0].code, "possible-impostor");
        assert_eq!(al[0].csrs[0].name, "csr-real");
        assert_eq!(al[0].csrs[0].created.as_deref(), Some("2026-01-10T10:21:00Z"));
        assert_eq!(al[0].csrs[1].name, "csr-rogue");
        assert_eq!(al[0].csrs[1].requester.as_deref(), Some(BOOTSTRAPPER));
        assert!(
            al[0].message.contains("csr-rogue (created 2026-01-10T11:00:00Z"),
            "{}",
            al[0].message
        );
        // Approved in the cluster but not recorded (someone ran oc adm certificate approve): same.
        let none = ApprovalsRecorded::default();
        let al = alarms(&with_node(&[&real, &rogue]), &[], &s.expected, &none, joined);
        assert_eq!(al.len(), 1);
        // Nothing approved: no alarm.
        assert!(alarms(&with_node(&[&rogue]), &[], &s.expected, &none, joined).is_empty());

        // No Node registered with the approved certificate: either may be the impostor (the
        // approved one suspect); no advice to delete the newer one as someone else's, and the
        // revocation caveat with the --reissue way for the real one.
        let al = alarms(
            &with_node(&[&real, &rogue]),
            &[],
            &s.expected,
            &s.approvals,
            |_| false,
        );
        assert_eq!(al.len(), 1, "{al:#?}");
        let m = &al[0].message;
        assert!(m.contains("either may be the impostor"), "{m}");
        assert!(
            m.contains("the approved one is suspect because no Node appeared after its approval"),
            "{m}"
        );
        assert!(
            m.contains("the certificate issued for csr-real stays valid until its notAfter"),
            "{m}"
        );
        assert!(m.contains("Kubernetes has no certificate revocation"), "{m}");
        assert!(m.contains("console"), "{m}");
        assert!(m.contains("`approve --reissue worker-0`"), "{m}");
        assert!(!m.contains("renews as"), "{m}");
        assert!(!m.contains("comes from another holder"), "{m}");
        // The approved CSR deleted since: cited as such.
        let al = alarms(&with_node(&[&rogue]), &[], &s.expected, &s.approvals, |_| false);
        assert_eq!(al[0].csrs[0].name, "csr-real (deleted)");
        assert!(
            al[0].message.contains("its client CSR csr-real (deleted)"),
            "{}",
            al[0].message
        );
    }
}
