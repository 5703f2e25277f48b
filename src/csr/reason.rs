//! Why a CSR is not approved: one variant per check, each with a stable code for JSON output.

use std::fmt;

use super::basics::{esc, Kind, Time};

/// A failed check. `Display` names the check and the offending value (CSR-supplied text is
/// escaped with [`super::escape_for_display`]); [`Reason::code`] is a stable kebab-case code
/// for `-o json|yaml` and scripts. Source of the rules: docs/approve.md "Verifying kubelet CSRs".
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reason {
    /// `spec.signerName` is not a kubelet signer: the CSR is never touched.
    OtherSigner { signer: String },
    /// `spec.request` is not exactly one PEM `CERTIFICATE REQUEST` block.
    Pem { problem: String },
    /// The DER is not a PKCS#10 request x509-parser can read.
    DerInvalid { detail: String },
    /// Bytes after the DER structure (not covered by the signature).
    DerTrailing { bytes: usize },
    /// PKCS#10 version is not v1 (0).
    Version { version: u32 },
    /// The self-signature does not verify.
    SignatureInvalid { detail: String },
    /// Key type or size not on the allow-list.
    KeyNotAllowed { key: String },
    /// Signature algorithm not on the allow-list (or not the one that goes with the key).
    SignatureAlgorithmNotAllowed { algorithm: String },
    /// The attributes / extensions could not be walked as DER.
    AttributesMalformed { detail: String },
    /// The same attribute type twice (e.g. two ExtensionRequest attributes).
    DuplicateAttribute { attribute: String },
    /// An ExtensionRequest attribute whose SET does not hold exactly one value.
    ExtensionRequestValues { count: usize },
    /// An attribute other than ExtensionRequest (challengePassword, unknown ones).
    UnexpectedAttribute { attribute: String },
    /// The same extension twice (e.g. two subjectAltName).
    DuplicateExtension { extension: String },
    /// The subjectAltName extension could not be read.
    SanMalformed { detail: String },
    /// A subject attribute that is not a text string.
    SubjectValueNotText { attr: String },
    /// An RDN with zero or several attributes.
    MultiValuedRdn,
    /// Subject attributes other than O and CN.
    SubjectExtra { attrs: Vec<String> },
    /// O is not exactly `[system:nodes]`.
    Organization { found: Vec<String> },
    /// Not exactly one CN.
    CommonNameCount { found: Vec<String> },
    /// The CN does not start with `system:node:` or has an empty name.
    CommonNameNotNode { cn: String },
    /// The node name in the CN is not a lowercase DNS-1123 subdomain.
    NodeNameInvalid { name: String },
    /// The CSR already has conditions or a certificate.
    NotPending { state: String },
    /// `spec.expirationSeconds` above the policy maximum.
    ExpirationTooLong { seconds: i32, max: i32 },
    /// `spec.expirationSeconds` below the API minimum of 600.
    ExpirationTooShort { seconds: i32 },
    /// `spec.usages` is not one of the allowed sets for the signer.
    Usages { kind: Kind, usages: Vec<String> },
    /// Client: not requested by the node-bootstrapper service account.
    ClientRequester { username: String },
    /// Client: groups are not exactly the bootstrapper's three.
    ClientGroups { groups: Vec<String> },
    /// Client: the request carries SANs.
    ClientHasSan { sans: Vec<String> },
    /// Client: the request carries an ExtensionRequest (any extension at all).
    ClientHasExtensions { extensions: Vec<String> },
    /// Client: a Node of that name already exists.
    NodeExists { node: String },
    /// The node is not one the batches expect.
    NotExpectedNode { node: String },
    /// The node already has its approval(s) of this kind recorded. `reissue_helps`: another
    /// approval can be allowed with `--reissue NODE` (false for a client CSR of a Node that
    /// exists: that is refused whatever `--reissue` says, see [`Reason::NodeExists`]).
    AlreadyApproved {
        node: String,
        kind: Kind,
        count: u32,
        reissue_helps: bool,
    },
    /// Client: created before the batch was recorded.
    CreatedBeforeBatch {
        node: String,
        created: Time,
        recorded: Time,
    },
    /// Client: created at or after the batch token expired.
    CreatedAfterTokenExpiry {
        node: String,
        created: Time,
        expires: Time,
    },
    /// Client: no creationTimestamp to check the batch window against.
    CreationTimeUnknown,
    /// Created later than now (beyond clock-skew tolerance): the clocks disagree.
    CreatedInFuture { created: Time, now: Time },
    /// Serving: requester is not a `system:node:<name>` user.
    ServingRequester { username: String },
    /// Serving: CN is not the requester.
    CommonNameMismatch { cn: String, username: String },
    /// Serving: groups lack `system:nodes` / `system:authenticated`.
    ServingGroups { missing: Vec<String> },
    /// Serving: no SAN at all.
    NoSan,
    /// Serving: a SAN kind other than DNS or IP.
    SanKindNotAllowed { san: String },
    /// Serving: an extension other than subjectAltName.
    UnexpectedExtension { extension: String, critical: bool },
    /// Serving: a wildcard DNS SAN.
    DnsSanWildcard { name: String },
    /// Serving: a DNS SAN naming the API server or an in-cluster service.
    DnsSanApiServer { name: String },
    /// Serving: a DNS SAN other than the node's hostname.
    DnsSanNotHostname {
        name: String,
        node: String,
        hostname: String,
    },
    /// Serving: an IP SAN that is not 4 or 16 bytes.
    IpSanLength { len: usize },
    /// Serving: an IPv4-mapped IPv6 SAN (`::ffff:a.b.c.d`).
    IpSanV4Mapped { ip: String },
    /// Serving: loopback, link-local, unspecified, multicast or broadcast.
    IpSanSpecial { ip: String, what: &'static str },
    /// Serving: an IP in the cluster (pod) network.
    IpSanClusterNetwork { ip: String, net: String },
    /// Serving: an IP in the service network.
    IpSanServiceNetwork { ip: String, net: String },
    /// Serving: an IP SAN that is not one of the node's expected addresses.
    IpSanNotNodeAddress {
        ip: String,
        node: String,
        expected: Vec<String>,
    },
    /// Serving: the node's IPs are not known (DHCP host) so nothing can be checked.
    NoExpectedAddresses { node: String },
    /// Client ([`super::verdict_all`]): several passing client CSRs for one node with different keys.
    CompetingRequests { node: String, csrs: Vec<String> },
    /// [`super::verdict_all`]: a newer passing CSR of the same kind for the node is approved instead.
    Superseded { node: String, kind: Kind, by: String },
    /// Client: created before the host's own assisted-service reported leaving the installation
    /// for its reboot (less [`super::basics::REBOOT_CLOCK_SKEW_SECONDS`]): not its installed kubelet's.
    CreatedBeforeReboot {
        node: String,
        /// The CSR's name.
        csr: String,
        created: Time,
        rebooted: Time,
    },
    /// Client ([`super::verdict_all`]): created before the host's reboot record but within
    /// [`super::basics::REBOOT_CLOCK_SKEW_SECONDS`] of it, while another client CSR for the node was
    /// made before that window (after the batch): someone was asking before the installed
    /// system existed, so a CSR of the skew window may be theirs; never approved (the real
    /// kubelet's next CSR comes after the record).
    EarlyRequester {
        node: String,
        csr: String,
        created: Time,
        rebooted: Time,
        /// The earlier CSR (name, creationTimestamp).
        earlier: String,
        earlier_created: Time,
    },
    /// Client: the host's reboot record on its batch is unusable (`field` names what is wrong):
    /// held, also with `--trust-unverified-boot`, until the record is fixed.
    BadRebootRecord {
        node: String,
        batch: String,
        field: String,
    },
    /// Client and serving: the host's batch record does not parse (`message` names the field):
    /// held until the record is fixed.
    BadBatchRecord {
        node: String,
        batch: String,
        message: String,
    },
    /// Client: no reboot of the host is recorded on its batch, so nothing binds the CSR to the
    /// machine (approved only with `--trust-unverified-boot`).
    BootUnverified { node: String },
    /// Client, under `--reissue`: no reboot of the node was recorded after the client CSR
    /// approved before (`previous`, made at `previous_created`), so nothing binds this one to a
    /// new install (issue 22 item 3: a rogue CSR posted after the Node was deleted was
    /// approved). Waits for a newer record: a re-install from a new image (`add-nodes
    /// --reimage`) records one on its batch.
    ReissueUnbound {
        node: String,
        previous: String,
        previous_created: Time,
        rebooted: Option<Time>,
    },
    /// Client ([`super::verdict_all`]): passing client CSRs of one node with different keys made
    /// closer together than the kubelet re-keys: a second requester exists; all are held.
    SecondRequester {
        node: String,
        /// (name, creationTimestamp), oldest first.
        csrs: Vec<(String, Option<Time>)>,
        /// The smallest time between two of them with different keys.
        gap_seconds: i64,
        retry_seconds: i64,
    },
}

impl Reason {
    /// The CSR waits for more information rather than fails: the node's reboot record or
    /// address, or an operator sorting out rival CSRs. A CSR whose every reason waits is
    /// *held* (HOLD, `"held"`), not rejected, and `--deny-invalid` leaves it alone.
    pub fn waits(&self) -> bool {
        matches!(
            self,
            Reason::BootUnverified { .. }
                | Reason::ReissueUnbound { .. }
                | Reason::BadRebootRecord { .. }
                | Reason::BadBatchRecord { .. }
                | Reason::SecondRequester { .. }
                | Reason::CompetingRequests { .. }
                | Reason::NoExpectedAddresses { .. }
        )
    }

    /// Stable short code for JSON/YAML output (never changes once released).
    pub fn code(&self) -> &'static str {
        use Reason::*;
        match self {
            OtherSigner { .. } => "other-signer",
            Pem { .. } => "pem",
            DerInvalid { .. } => "der-invalid",
            DerTrailing { .. } => "der-trailing-data",
            Version { .. } => "version",
            SignatureInvalid { .. } => "signature-invalid",
            KeyNotAllowed { .. } => "key-not-allowed",
            SignatureAlgorithmNotAllowed { .. } => "signature-algorithm-not-allowed",
            AttributesMalformed { .. } => "attributes-malformed",
            DuplicateAttribute { .. } => "duplicate-attribute",
            ExtensionRequestValues { .. } => "extension-request-values",
            UnexpectedAttribute { .. } => "unexpected-attribute",
            DuplicateExtension { .. } => "duplicate-extension",
            SanMalformed { .. } => "san-malformed",
            SubjectValueNotText { .. } => "subject-value-not-text",
            MultiValuedRdn => "subject-multi-valued-rdn",
            SubjectExtra { .. } => "subject-extra-attribute",
            Organization { .. } => "subject-organization",
            CommonNameCount { .. } => "subject-cn-count",
            CommonNameNotNode { .. } => "subject-cn-not-node",
            NodeNameInvalid { .. } => "node-name-invalid",
            NotPending { .. } => "not-pending",
            ExpirationTooLong { .. } => "expiration-too-long",
            ExpirationTooShort { .. } => "expiration-too-short",
            Usages { .. } => "usages",
            ClientRequester { .. } => "client-requester",
            ClientGroups { .. } => "client-groups",
            ClientHasSan { .. } => "client-has-san",
            ClientHasExtensions { .. } => "client-has-extensions",
            NodeExists { .. } => "node-exists",
            NotExpectedNode { .. } => "not-expected-node",
            AlreadyApproved { .. } => "already-approved",
            CreatedBeforeBatch { .. } => "created-before-batch",
            CreatedAfterTokenExpiry { .. } => "created-after-token-expiry",
            CreationTimeUnknown => "creation-time-unknown",
            CreatedInFuture { .. } => "created-in-future",
            ServingRequester { .. } => "serving-requester",
            CommonNameMismatch { .. } => "cn-mismatch",
            ServingGroups { .. } => "serving-groups",
            NoSan => "no-san",
            SanKindNotAllowed { .. } => "san-kind",
            UnexpectedExtension { .. } => "unexpected-extension",
            DnsSanWildcard { .. } => "dns-san-wildcard",
            DnsSanApiServer { .. } => "dns-san-api-server",
            DnsSanNotHostname { .. } => "dns-san-not-hostname",
            IpSanLength { .. } => "ip-san-length",
            IpSanV4Mapped { .. } => "ip-san-v4-mapped",
            IpSanSpecial { .. } => "ip-san-special",
            IpSanClusterNetwork { .. } => "ip-san-cluster-network",
            IpSanServiceNetwork { .. } => "ip-san-service-network",
            IpSanNotNodeAddress { .. } => "ip-san-not-node-address",
            NoExpectedAddresses { .. } => "no-expected-addresses",
            CompetingRequests { .. } => "competing-requests",
            Superseded { .. } => "superseded",
            CreatedBeforeReboot { .. } => "created-before-reboot",
            EarlyRequester { .. } => "early-requester",
            BadRebootRecord { .. } => "bad-reboot-record",
            BadBatchRecord { .. } => "bad-batch-record",
            BootUnverified { .. } => "boot-unverified",
            ReissueUnbound { .. } => "reissue-unbound",
            SecondRequester { .. } => "second-requester",
        }
    }
}

/// `15m`, `3s`, `1h30m` for a retry interval in seconds.
pub(crate) fn human_secs(s: i64) -> String {
    match (s / 3600, (s % 3600) / 60, s % 60) {
        (0, 0, s) => format!("{s}s"),
        (0, m, 0) => format!("{m}m"),
        (0, m, s) => format!("{m}m{s}s"),
        (h, 0, 0) => format!("{h}h"),
        (h, m, _) => format!("{h}h{m}m"),
    }
}

fn list(v: &[String]) -> String {
    if v.is_empty() {
        return "none".into();
    }
    v.iter().map(|s| esc(s)).collect::<Vec<_>>().join(", ")
}

impl fmt::Display for Reason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        use Reason::*;
        match self {
            OtherSigner { signer } => write!(f, "signer {} is not a kubelet signer; not touched", esc(signer)),
            Pem { problem } => write!(f, "spec.request {problem}"),
            DerInvalid { detail } => write!(f, "spec.request is not a PKCS#10 request: {}", esc(detail)),
            DerTrailing { bytes } => write!(f, "spec.request has {bytes} bytes after the DER request"),
            Version { version } => write!(f, "request version is {version}, expected 0 (v1)"),
            SignatureInvalid { detail } => write!(f, "self-signature does not verify ({})", esc(detail)),
            KeyNotAllowed { key } => write!(
                f,
                "key {} is not allowed (ECDSA P-256/P-384 or RSA 2048-8192 bits)",
                esc(key)
            ),
            SignatureAlgorithmNotAllowed { algorithm } => write!(
                f,
                "signature algorithm {} is not allowed (ecdsa-with-SHA256 on P-256, ecdsa-with-SHA384 on P-384, RSA with SHA-256/384/512)",
                esc(algorithm)
            ),
            AttributesMalformed { detail } => write!(f, "request attributes are malformed: {}", esc(detail)),
            DuplicateAttribute { attribute } => write!(f, "attribute {} appears more than once", esc(attribute)),
            ExtensionRequestValues { count } => {
                write!(f, "extensionRequest attribute has {count} values, expected exactly one")
            }
            UnexpectedAttribute { attribute } => write!(f, "attribute {} is not allowed", esc(attribute)),
            DuplicateExtension { extension } => write!(f, "extension {} is requested more than once", esc(extension)),
            SanMalformed { detail } => write!(f, "subjectAltName is malformed: {}", esc(detail)),
            SubjectValueNotText { attr } => write!(f, "subject {} is not a text string", esc(attr)),
            MultiValuedRdn => write!(f, "subject has an RDN that does not hold exactly one attribute"),
            SubjectExtra { attrs } => {
                write!(f, "subject has {} besides O and CN", list(attrs))
            }
            Organization { found } => write!(f, "subject O is [{}], expected exactly [system:nodes]", list(found)),
            CommonNameCount { found } => write!(
                f,
                "subject has {} CNs ({}), expected exactly one",
                found.len(),
                list(found)
            ),
            CommonNameNotNode { cn } => write!(f, "CN {} is not system:node:<name>", esc(cn)),
            NodeNameInvalid { name } => {
                write!(f, "node name {} is not a lowercase DNS-1123 name", esc(name))
            }
            NotPending { state } => write!(f, "CSR is not pending ({state})"),
            ExpirationTooLong { seconds, max } => {
                write!(f, "spec.expirationSeconds {seconds} is above the maximum {max}")
            }
            ExpirationTooShort { seconds } => {
                write!(f, "spec.expirationSeconds {seconds} is below the minimum 600")
            }
            Usages { kind, usages } => {
                let allowed = match kind {
                    Kind::Client => "{digital signature, client auth} or {digital signature, key encipherment, client auth}",
                    _ => "{digital signature, server auth} or {digital signature, key encipherment, server auth}",
                };
                write!(f, "usages are [{}], expected {allowed}", list(usages))
            }
            ClientRequester { username } => write!(
                f,
                "requester is {}, expected the node-bootstrapper service account",
                esc(username)
            ),
            ClientGroups { groups } => write!(
                f,
                "requester groups are [{}], expected exactly system:serviceaccounts, system:serviceaccounts:openshift-machine-config-operator, system:authenticated",
                list(groups)
            ),
            ClientHasSan { sans } => write!(f, "client CSR asks for SANs ({}); it must have none", sans.join(", ")),
            ClientHasExtensions { extensions } if extensions.is_empty() => {
                write!(f, "client CSR has an (empty) extensionRequest attribute; it must have none")
            }
            ClientHasExtensions { extensions } => write!(
                f,
                "client CSR requests extensions ({}); it must request none",
                list(extensions)
            ),
            NodeExists { node } => write!(f, "node {} already exists", esc(node)),
            NotExpectedNode { node } => write!(f, "node {} is not an expected new node", esc(node)),
            AlreadyApproved {
                node,
                kind: Kind::Client,
                count,
                reissue_helps: true,
            } => write!(
                f,
                "{0} already has {count} client CSR approval(s) recorded and no Node {0} registered with it: see the possible-impostor alarm; only once you have checked on {0}'s console that this CSR is its kubelet's, approve it with --reissue {0}",
                esc(node)
            ),
            AlreadyApproved {
                node,
                kind,
                count,
                reissue_helps: true,
            } => write!(
                f,
                "{} already has {count} {kind} CSR approval(s) recorded (use --reissue {} for another)",
                esc(node),
                esc(node)
            ),
            AlreadyApproved { node, kind, count, .. } => write!(
                f,
                "{} already has {count} {kind} CSR approval(s) recorded",
                esc(node)
            ),
            CreatedBeforeBatch { node, created, recorded } => write!(
                f,
                "CSR created at {created}, before {}'s batch was recorded at {recorded}",
                esc(node)
            ),
            CreatedAfterTokenExpiry { node, created, expires } => write!(
                f,
                "CSR created at {created}, after {}'s bootstrap token expired at {expires}",
                esc(node)
            ),
            CreationTimeUnknown => write!(f, "CSR has no creationTimestamp to check against the batch"),
            CreatedInFuture { created, now } => {
                write!(f, "CSR created at {created}, later than now ({now}): check the clocks")
            }
            ServingRequester { username } => {
                write!(f, "requester is {}, expected system:node:<name>", esc(username))
            }
            CommonNameMismatch { cn, username } => {
                write!(f, "CN {} is not the requester {}", esc(cn), esc(username))
            }
            ServingGroups { missing } => write!(f, "requester groups lack {}", list(missing)),
            NoSan => write!(f, "serving CSR has no SAN; it needs the node's hostname or IPs"),
            SanKindNotAllowed { san } => write!(f, "SAN {san} is not allowed (only DNS and IP)"),
            UnexpectedExtension { extension, critical } => write!(
                f,
                "extension {}{} is not allowed (only subjectAltName)",
                esc(extension),
                if *critical { " (critical)" } else { "" }
            ),
            DnsSanWildcard { name } => write!(f, "DNS SAN {} is a wildcard", esc(name)),
            DnsSanApiServer { name } => write!(f, "DNS SAN {} names the API server or an in-cluster service", esc(name)),
            DnsSanNotHostname { name, node, hostname } => write!(
                f,
                "DNS SAN {} is not {}'s hostname ({})",
                esc(name),
                esc(node),
                esc(hostname)
            ),
            IpSanLength { len } => write!(f, "IP SAN is {len} bytes long, expected 4 or 16"),
            IpSanV4Mapped { ip } => write!(f, "IP SAN {ip} is an IPv4-mapped IPv6 address"),
            IpSanSpecial { ip, what } => write!(f, "IP SAN {ip} is a {what} address"),
            IpSanClusterNetwork { ip, net } => write!(f, "IP SAN {ip} is in the cluster network {net}"),
            IpSanServiceNetwork { ip, net } => write!(f, "IP SAN {ip} is in the service network {net}"),
            IpSanNotNodeAddress { ip, node, expected } => write!(
                f,
                "IP SAN {ip} is not one of {}'s addresses ({}); if {ip} is {}'s own new address (a DHCP lease that changed after the batch learnt the old one), check it on the host, then give it with --node {}={ip} (or monitor --ip-addresses {ip} records it); otherwise this CSR is not {}'s",
                esc(node),
                expected.join(", "),
                esc(node),
                esc(node),
                esc(node)
            ),
            NoExpectedAddresses { node } => write!(
                f,
                "{}'s IP addresses are not known (DHCP?): give them with --node {}=IP or monitor --ip-addresses",
                esc(node),
                esc(node)
            ),
            CompetingRequests { node, csrs } => write!(
                f,
                "{} pending client CSRs for {} pass with different keys ({}): one may be a rival of the real node; none is approved — delete the wrong one (oc delete csr NAME) and run again",
                csrs.len(),
                esc(node),
                list(csrs)
            ),
            Superseded { node, kind: Kind::Client, by } => write!(
                f,
                "a newer client CSR for {} ({}) is approved instead (the kubelet makes a new key and CSR each time one waits too long; this one is abandoned)",
                esc(node),
                esc(by)
            ),
            Superseded { node, kind, by } => {
                write!(f, "a newer {kind} CSR for {} ({}) is approved instead", esc(node), esc(by))
            }
            CreatedBeforeReboot {
                node,
                csr,
                created,
                rebooted,
            } => write!(
                f,
                "CSR created at {created}, before {0}'s own assisted-service reported at {rebooted} that it left the installation for its reboot (allowing {1} s of clock skew): it is not from {0}'s installed system and is never approved; someone else holding the bootstrap token made it: delete it (oc delete csr {2}); if you are sure it is {0}'s kubelet, the clock of the machine running monitor is ahead of the API server's: fix NTP there",
                esc(node),
                super::basics::REBOOT_CLOCK_SKEW_SECONDS,
                esc(csr)
            ),
            EarlyRequester {
                node,
                csr,
                created,
                rebooted,
                earlier,
                earlier_created,
            } => write!(
                f,
                "CSR created at {created}, before {0}'s own assisted-service reported at {rebooted} that it left the installation for its reboot; within the {1} s of clock skew allowed, but client CSR {2} for {0} was made at {earlier_created}, before the installed system existed: someone else holding the bootstrap token is asking for {0}, and a CSR made before the record may be theirs, so it is never approved (the real kubelet asks again after the record); delete it (oc delete csr {3})",
                esc(node),
                super::basics::REBOOT_CLOCK_SKEW_SECONDS,
                esc(earlier),
                esc(csr)
            ),
            BadRebootRecord { node, batch, field } => write!(
                f,
                "the reboot record of {0} on batch {1} is unusable ({2}): nothing binds this CSR to the machine, and --trust-unverified-boot does not override a broken record; fix or remove that entry of ConfigMap {3}/{1} (or run monitor again after removing it)",
                esc(node),
                esc(batch),
                esc(field),
                crate::k8s_names::OWN_NAMESPACE
            ),
            BadBatchRecord { node, batch, message } => write!(
                f,
                "{0}'s batch record, ConfigMap {3}/{1}, is not a batch record ({2}): held until it is fixed (the other batches are judged as usual)",
                esc(node),
                esc(batch),
                esc(message),
                crate::k8s_names::OWN_NAMESPACE
            ),
            BootUnverified { node } => write!(
                f,
                "could not verify that this CSR comes from the machine that booted {0}'s image: no reboot of {0} is recorded on its batch (`approve --watch` and `monitor` record it when the host's own assisted-service reports it; a DHCP host needs its address: --node NAME=IP, or monitor --ip-addresses IP); if a watch follows this host, wait for its reboot record (approve --watch judges the CSR again when it lands); pass --trust-unverified-boot only after checking on the host's console that it rebooted into the installed system and that this CSR is its kubelet's",
                esc(node)
            ),
            ReissueUnbound {
                node,
                previous,
                previous_created,
                rebooted,
            } => write!(
                f,
                "a second client certificate for {0} must come from a new install: its client CSR {1} (made {previous_created}) was approved before, and no reboot of {0} was recorded after that ({2}); re-install {0} from a new image (oc agent-day2 add-nodes --reimage {0}), whose new batch records the new reboot and starts afresh (no --reissue needed); pass --trust-unverified-boot only after checking on its console that this CSR is its kubelet's",
                esc(node),
                esc(previous),
                match rebooted {
                    Some(r) => format!("its reboot record is from {r}"),
                    None => "it has no reboot record".into(),
                }
            ),
            SecondRequester {
                node,
                csrs,
                gap_seconds,
                retry_seconds,
            } => write!(
                f,
                "a second requester exists: {} pending client CSRs for {} with different keys ({}), two of them {gap_seconds} s apart, while the kubelet makes a new key and CSR only every {} while one is not approved; none is approved — find which is {}'s own, delete the other(s) (oc delete csr NAME) and run again",
                csrs.len(),
                esc(node),
                csrs.iter()
                    .map(|(n, t)| format!("{} at {}", esc(n), t.map(|t| t.to_string()).unwrap_or_else(|| "unknown time".into())))
                    .collect::<Vec<_>>()
                    .join(", "),
                human_secs(*retry_seconds),
                esc(node)
            ),
        }
    }
}

impl serde::Serialize for Reason {
    /// `{"code": "...", "message": "..."}`.
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeStruct;
        let mut st = s.serialize_struct("Reason", 2)?;
        st.serialize_field("code", self.code())?;
        st.serialize_field("message", &self.to_string())?;
        st.end()
    }
}
