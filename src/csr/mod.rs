//! The verdict on a kubelet CSR: a pure function of the CSR, the expected and existing nodes,
//! the approvals already recorded, the policy and the time. No I/O.
//!
//! Source of every rule: design.md "Verifying kubelet CSRs (approve)" and research/csr.md §3.
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
//! the batch window (design.md), only to the expected node, its addresses and its count.

mod escape;
mod parse;
mod reason;

use std::collections::BTreeSet;
use std::net::IpAddr;

pub use escape::escape_for_display;
pub use ipnet::IpNet;
pub use parse::{parse_request, KeyKind, ParsedRequest, RequestedExtension, San, SigKind};
pub use reason::Reason;

use k8s_openapi::api::certificates::v1::CertificateSigningRequest;

/// A point in time (UTC), the type k8s-openapi uses for `metav1.Time`.
pub type Time = k8s_openapi::jiff::Timestamp;

/// Signer of the first (client) CSR of a new node.
pub const CLIENT_SIGNER: &str = "kubernetes.io/kube-apiserver-client-kubelet";
/// Signer of the kubelet's serving CSR.
pub const SERVING_SIGNER: &str = "kubernetes.io/kubelet-serving";
/// The only identity allowed to request a new node's client certificate (CMA `isReqFromNodeBootstrapper`).
pub const BOOTSTRAPPER: &str = "system:serviceaccount:openshift-machine-config-operator:node-bootstrapper";
/// The bootstrapper's groups, exactly (order ignored).
pub const BOOTSTRAPPER_GROUPS: [&str; 3] = [
    "system:serviceaccounts",
    "system:serviceaccounts:openshift-machine-config-operator",
    "system:authenticated",
];
/// CN prefix and username prefix of node identities.
pub const NODE_PREFIX: &str = "system:node:";
/// Clock-skew tolerance for "created in the future", in seconds.
pub const CLOCK_SKEW_SECONDS: i64 = 600;
/// Length at which CSR-supplied values are cut in reason texts.
pub const DISPLAY_MAX: usize = 80;

pub(crate) fn esc(s: &str) -> String {
    escape_for_display(s, DISPLAY_MAX)
}

/// Which kubelet certificate a CSR asks for, from `spec.signerName`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Kind {
    /// `kubernetes.io/kube-apiserver-client-kubelet`.
    Client,
    /// `kubernetes.io/kubelet-serving`.
    Serving,
    /// Any other signer: never approved, never touched.
    NotKubelet,
}

impl std::fmt::Display for Kind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Kind::Client => "client",
            Kind::Serving => "serving",
            Kind::NotKubelet => "not-kubelet",
        })
    }
}

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
}

/// Every expected node. A hostname should appear once; the first entry wins otherwise.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ExpectedNodes {
    /// The nodes.
    pub nodes: Vec<ExpectedNode>,
}

impl ExpectedNodes {
    /// The entry for `hostname`, if expected.
    pub fn get(&self, hostname: &str) -> Option<&ExpectedNode> {
        self.nodes.iter().find(|n| n.hostname == hostname)
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
}

/// Decides whether `csr` may be approved. Pure and total: never panics, never does I/O.
///
/// A CSR of any other signer gets `Kind::NotKubelet`, `approve == false` and the single reason
/// `other-signer` (callers leave it alone). For kubelet CSRs every check of design.md is run
/// even after one failed, and all failures are returned.
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
/// - client CSRs with *different* public keys: the bootstrap identity is shared, so one of them
///   may be a rival racing the real kubelet (which reuses its key across retries, client-go
///   `bootstrap.go` `loadOrGenerateKeyFile`); none is approved (`competing-requests`);
/// - otherwise (client CSRs with the same key, or serving CSRs, which only the node's own
///   credentials can create) the newest is approved, the one the kubelet is waiting on, and the
///   older ones get `superseded`.
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
    let mut groups: std::collections::BTreeMap<(String, Kind), Vec<usize>> = Default::default();
    for (i, (v, _)) in out.iter().enumerate() {
        if let (true, Some(n)) = (v.approve, &v.node) {
            groups.entry((n.clone(), v.kind)).or_default().push(i);
        }
    }
    for ((node, kind), idx) in groups {
        if idx.len() < 2 {
            continue;
        }
        let same_key = idx.iter().all(|&i| out[i].1 == out[idx[0]].1);
        if kind == Kind::Client && !same_key {
            let names: Vec<String> = idx.iter().map(|&i| csrs[i].name.clone()).collect();
            for &i in &idx {
                out[i].0.reasons.push(Reason::CompetingRequests {
                    node: node.clone(),
                    csrs: names.clone(),
                });
                out[i].0.approve = false;
            }
            continue;
        }
        // Newest by creation time, then by name, is kept.
        let keep = *idx
            .iter()
            .max_by(|&&a, &&b| (csrs[a].created, &csrs[a].name).cmp(&(csrs[b].created, &csrs[b].name)))
            .expect("two or more");
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
        };
        return (v, None);
    }
    let mut reasons = Vec::new();

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
        Kind::Client => check_client(
            csr,
            parsed.as_ref(),
            node.as_deref(),
            expected,
            existing,
            approvals,
            &mut reasons,
        ),
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
    expected: &ExpectedNodes,
    existing: &ExistingNodes,
    approvals: &ApprovalsRecorded,
    reasons: &mut Vec<Reason>,
) {
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
    let Some(name) = node else { return };
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
        return;
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
