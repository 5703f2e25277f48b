//! What agent-day2 reads from the cluster: the read-only cluster model.
//!
//! [`ClusterObjects`] holds the raw objects (docs/design.md "What the cluster tells us"), as JSON;
//! [`ClusterModel::from_objects`] turns them into the facts add-nodes, approve and info use,
//! purely (no I/O, unit-tested on fixtures). [`fetch`] is the thin async layer that reads the
//! objects with the user's own credentials.

use std::collections::BTreeMap;

use base64::Engine;
use kube::api::{Api, DynamicObject, ListParams};
use kube::core::{ApiResource, GroupVersionKind};
use serde::Serialize;
use serde_json::Value;

use crate::error::{Error, ResourceRef, Result};
use crate::kube::KubeTarget;
pub use crate::kube::{classify, connect_failure, error_chain, with_deadline};
pub use crate::net::cidr_contains;

/// Oldest supported OpenShift release (major, minor): the add-nodes contract with three
/// signed tokens exists from 4.18 on (docs/design.md "What the cluster tells us").
pub const MIN_VERSION: (u64, u64) = (4, 18);

/// Platforms (`Infrastructure.status.platformStatus.type`) where day-2 nodes can be added
/// with a booted ISO: the agent-based installer's platforms.
pub const SUPPORTED_PLATFORMS: [&str; 4] = ["BareMetal", "None", "External", "VSphere"];

/// The raw objects read from the cluster, as JSON values (whole objects with apiVersion,
/// kind, metadata). `None`/empty means "not there" (404, or forbidden for optional ones;
/// see [`ClusterObjects::unreadable`]).
#[derive(Debug, Clone, Default)]
pub struct ClusterObjects {
    /// `ClusterVersion/version` (required).
    pub cluster_version: Option<Value>,
    /// `Infrastructure/cluster` (required).
    pub infrastructure: Option<Value>,
    /// Secret `openshift-config/pull-secret` (required).
    pub pull_secret: Option<Value>,
    /// `Proxy/cluster`.
    pub proxy: Option<Value>,
    /// ConfigMap `openshift-config/<Proxy spec.trustedCA.name>`.
    pub trust_bundle: Option<Value>,
    /// `Image.config.openshift.io/cluster`.
    pub image_config: Option<Value>,
    /// ConfigMap `openshift-config/<Image spec.additionalTrustedCA.name>` (registry CAs, one key per registry).
    pub additional_trusted_ca: Option<Value>,
    /// ConfigMap `kube-system/cluster-config-v1` (install-config, older source of machine networks).
    pub cluster_config: Option<Value>,
    /// ImageDigestMirrorSets.
    pub image_digest_mirror_sets: Vec<Value>,
    /// ImageTagMirrorSets.
    pub image_tag_mirror_sets: Vec<Value>,
    /// Legacy ImageContentSourcePolicies.
    pub image_content_source_policies: Vec<Value>,
    /// ConfigMap `openshift-machine-config-operator/coreos-bootimages` (required).
    pub coreos_bootimages: Option<Value>,
    /// Secret `openshift-machine-api/worker-user-data-managed` (worker pointer Ignition).
    pub worker_user_data: Option<Value>,
    /// MachineConfigs `99-worker-ssh`, `99-worker-fips`, `50-workers-chrony-configuration` (those present).
    pub machine_configs: Vec<Value>,
    /// All Nodes.
    pub nodes: Vec<Value>,
    /// `Network.config.openshift.io/cluster`.
    pub network: Option<Value>,
    /// Reads that failed with something other than 404 (forbidden, server error): what and
    /// why. The facts they carry are unknown (see [`Unreadable`]), never "none".
    pub unreadable: Vec<(ResourceRef, String)>,
}

impl ClusterObjects {
    /// Sorts loose objects (e.g. the documents of fixture YAML files) into their slots by kind
    /// and name. Unknown kinds and other names are ignored; a list's `items` are unpacked.
    pub fn from_values(values: impl IntoIterator<Item = Value>) -> ClusterObjects {
        let mut o = ClusterObjects::default();
        let mut trust_name = None;
        let mut extra_cms = Vec::new();
        for v in values {
            if let Some(items) = v.get("items").and_then(Value::as_array) {
                let sub = ClusterObjects::from_values(items.clone());
                o.merge(sub);
                continue;
            }
            let kind = v
                .get("kind")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string();
            let name = str_at(&v, "/metadata/name").unwrap_or_default().to_string();
            let ns = str_at(&v, "/metadata/namespace").unwrap_or_default().to_string();
            match (kind.as_str(), ns.as_str(), name.as_str()) {
                ("ClusterVersion", _, "version") => o.cluster_version = Some(v),
                ("Infrastructure", _, "cluster") => o.infrastructure = Some(v),
                ("Secret", "openshift-config", "pull-secret") => o.pull_secret = Some(v),
                ("Secret", "openshift-machine-api", "worker-user-data-managed") => {
                    o.worker_user_data = Some(v)
                }
                ("Proxy", _, "cluster") => {
                    trust_name = str_at(&v, "/spec/trustedCA/name").map(String::from);
                    o.proxy = Some(v)
                }
                ("Image", _, "cluster") => o.image_config = Some(v),
                ("Network", _, "cluster")
                    if v["apiVersion"]
                        .as_str()
                        .unwrap_or("")
                        .starts_with("config.openshift.io") =>
                {
                    o.network = Some(v)
                }
                ("ConfigMap", "kube-system", "cluster-config-v1") => o.cluster_config = Some(v),
                ("ConfigMap", "openshift-machine-config-operator", "coreos-bootimages") => {
                    o.coreos_bootimages = Some(v)
                }
                ("ConfigMap", "openshift-config", _) => extra_cms.push(v),
                ("ImageDigestMirrorSet", _, _) => o.image_digest_mirror_sets.push(v),
                ("ImageTagMirrorSet", _, _) => o.image_tag_mirror_sets.push(v),
                ("ImageContentSourcePolicy", _, _) => o.image_content_source_policies.push(v),
                (
                    "MachineConfig",
                    _,
                    "99-worker-ssh" | "99-worker-fips" | "50-workers-chrony-configuration",
                ) => o.machine_configs.push(v),
                ("Node", _, _) => o.nodes.push(v),
                _ => {}
            }
        }
        // ConfigMaps in openshift-config are only meaningful once we know who names them.
        let image_ca = o
            .image_config
            .as_ref()
            .and_then(|i| str_at(i, "/spec/additionalTrustedCA/name"))
            .map(String::from);
        for cm in extra_cms {
            let name = str_at(&cm, "/metadata/name").map(String::from);
            if name.is_some() && name == trust_name {
                o.trust_bundle = Some(cm.clone());
            }
            if name.is_some() && name == image_ca {
                o.additional_trusted_ca = Some(cm);
            }
        }
        o
    }

    fn merge(&mut self, other: ClusterObjects) {
        macro_rules! opt { ($($f:ident),*) => { $( if other.$f.is_some() { self.$f = other.$f; } )* } }
        opt!(
            cluster_version,
            infrastructure,
            pull_secret,
            proxy,
            trust_bundle,
            image_config,
            additional_trusted_ca,
            cluster_config,
            coreos_bootimages,
            worker_user_data,
            network
        );
        self.image_digest_mirror_sets
            .extend(other.image_digest_mirror_sets);
        self.image_tag_mirror_sets.extend(other.image_tag_mirror_sets);
        self.image_content_source_policies
            .extend(other.image_content_source_policies);
        self.machine_configs.extend(other.machine_configs);
        self.nodes.extend(other.nodes);
        self.unreadable.extend(other.unreadable);
    }
}

/// The read-only cluster model: everything add-nodes, approve and monitor take from the
/// cluster, normalised. Serialises (camelCase) into the `ClusterInfo` document of `info -o json`;
/// secret material (pull secret) is never serialised or printed by `Debug`.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ClusterModel {
    /// Identity and endpoints.
    pub cluster: ClusterIdentity,
    /// Release version and image.
    pub version: VersionInfo,
    /// Platform and whether day-2 nodes are supported on it.
    pub platform: PlatformInfo,
    /// Architectures.
    pub architecture: ArchitectureInfo,
    /// Machine networks (CIDRs) and where they came from.
    pub machine_networks: MachineNetworks,
    /// The Machine Config Server endpoint new nodes fetch their config from.
    pub machine_config_server: McsInfo,
    /// The RHCOS live ISO for the control plane's architecture, from coreos-bootimages.
    pub base_iso: Option<BaseIso>,
    /// Cluster-wide proxy (Proxy/cluster status); None when unset.
    pub proxy: Option<ProxyInfo>,
    /// Trust bundle named by Proxy `spec.trustedCA.name`; None when unset.
    pub trust_bundle: Option<TrustBundle>,
    /// Registry mirrors and their CAs.
    pub mirrors: Mirrors,
    /// FIPS mode (MachineConfig 99-worker-fips `spec.fips`).
    pub fips: bool,
    /// Worker SSH keys (MachineConfig 99-worker-ssh, user core).
    pub ssh: SshInfo,
    /// Whether MachineConfig 50-workers-chrony-configuration exists.
    pub chrony_configured: bool,
    /// Cluster and service networks (Network.config/cluster).
    pub networks: Networks,
    /// Existing nodes: names and addresses new hosts must not collide with.
    pub nodes: Vec<NodeInfo>,
    /// Whether the pull secret was read and parsed (its content is never shown).
    pub pull_secret_found: bool,
    /// Reasons the cluster cannot take day-2 nodes (empty when it can).
    pub problems: Vec<String>,
    /// Things worth knowing that do not block add-nodes.
    pub warnings: Vec<String>,
    /// Objects that could not be read (403, server error) or, for required ones, are
    /// missing: the document fields they feed are unknown. `info -o json|yaml` shows those
    /// fields as `null` and lists them here; a 404 on an optional object is not listed (its
    /// fact is "none").
    pub unreadable: Vec<Unreadable>,
    /// The pull secret (`.dockerconfigjson` content). Never serialised; `Debug` redacts it.
    #[serde(skip)]
    pub pull_secret: PullSecret,
    /// The CoreOS stream metadata (`coreos-bootimages` data.stream) for PXE and other arches.
    #[serde(skip)]
    pub coreos_stream: Value,
    /// chrony.conf for workers when MachineConfig 50-workers-chrony-configuration has one.
    #[serde(skip)]
    pub chrony_conf: Option<String>,
}

/// A resource whose read failed, and the facts that are unknown because of it.
#[derive(Debug, Clone, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Unreadable {
    /// e.g. `MachineConfig 99-worker-fips`.
    pub resource: String,
    /// e.g. `forbidden for user "viewer"`, `not found`, `HTTP 500: ...`.
    pub reason: String,
    /// Dotted camelCase paths of the `ClusterInfo` document that are unknown (`null`), e.g.
    /// `fips`, `mirrors.digestMirrors`, `machineConfigServer.caFound`.
    pub fields: Vec<String>,
    /// Whether the object is one add-nodes cannot do without (ClusterVersion,
    /// Infrastructure, pull secret, coreos-bootimages, Nodes).
    pub required: bool,
    /// The [`ClusterModel::problems`] entry this caused, if it blocks add-nodes.
    #[serde(skip)]
    pub problem: Option<String>,
    /// The resource, for messages.
    #[serde(skip)]
    pub resource_ref: Option<ResourceRef>,
    /// What is unknown, in words (`FIPS mode`), for messages.
    #[serde(skip)]
    pub what: String,
}

impl Unreadable {
    /// Whether `field` (a dotted document path) or a parent of it is unknown.
    pub fn covers(&self, field: &str) -> bool {
        self.fields
            .iter()
            .any(|f| f == field || field.starts_with(&format!("{f}.")))
    }
}

/// The document fields a read of `r` feeds, what to call that fact, and whether add-nodes
/// needs it (an unknown value would silently build a wrong node: no FIPS, no proxy, no
/// mirrors, a node that cannot verify the Machine Config Server).
fn facts_of(
    r: &ResourceRef,
    trust_name: Option<&str>,
    image_ca: Option<&str>,
) -> (Vec<&'static str>, &'static str, bool) {
    let name = r.name.as_deref().unwrap_or("");
    match (r.kind.as_str(), r.namespace.as_deref(), name) {
        ("ClusterVersion", _, _) => (
            vec!["cluster.id", "version", "architecture.multiArch"],
            "the cluster version",
            true,
        ),
        ("Infrastructure", _, _) => (
            vec![
                "cluster.name",
                "cluster.baseDomain",
                "cluster.apiURL",
                "cluster.apiIntURL",
                "cluster.controlPlaneTopology",
                "platform",
                "machineConfigServer.url",
            ],
            "the cluster identity and platform",
            true,
        ),
        ("Secret", _, "pull-secret") => (vec!["pullSecretFound"], "the pull secret", true),
        ("ConfigMap", _, "coreos-bootimages") => (vec!["baseIso"], "the base ISO", true),
        ("Nodes", _, _) => (
            vec!["nodes", "architecture.controlPlane"],
            "the existing nodes",
            true,
        ),
        ("Proxy", _, _) => (vec!["proxy", "trustBundle"], "the cluster-wide proxy", true),
        ("Image.config.openshift.io", _, _) => (
            vec!["mirrors.additionalTrustedCA", "mirrors.trustedCARegistries"],
            "the registry CAs",
            true,
        ),
        ("ConfigMap", Some("kube-system"), "cluster-config-v1") => {
            (vec!["machineNetworks"], "the machine networks", false)
        }
        ("ConfigMap", Some("openshift-config"), n) if Some(n) == trust_name => {
            (vec!["trustBundle"], "the proxy trust bundle", true)
        }
        ("ConfigMap", Some("openshift-config"), n) if Some(n) == image_ca => {
            (vec!["mirrors.trustedCARegistries"], "the registry CAs", true)
        }
        ("ImageDigestMirrorSets", _, _) => (vec!["mirrors.digestMirrors"], "the digest mirrors", true),
        ("ImageTagMirrorSets", _, _) => (vec!["mirrors.tagMirrors"], "the tag mirrors", true),
        ("ImageContentSourcePolicies", _, _) => {
            (vec!["mirrors.legacyContentSources"], "the ICSP mirrors", true)
        }
        ("Secret", _, "worker-user-data-managed") => (
            vec!["machineConfigServer.caFound"],
            "the Machine Config Server CA",
            true,
        ),
        ("MachineConfig", _, "99-worker-fips") => (vec!["fips"], "FIPS mode", true),
        ("MachineConfig", _, "99-worker-ssh") => (vec!["ssh"], "the worker SSH key", true),
        ("MachineConfig", _, "50-workers-chrony-configuration") => {
            (vec!["chronyConfigured"], "the worker chrony config", true)
        }
        ("Network.config.openshift.io", _, _) => {
            (vec!["networks"], "the cluster and service networks", false)
        }
        _ => (vec![], "", false),
    }
}

/// The pull secret; `Debug` prints only its length.
#[derive(Clone, Default)]
pub struct PullSecret(pub String);
impl std::fmt::Debug for PullSecret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "PullSecret(<{} bytes redacted>)", self.0.len())
    }
}

/// Cluster identity and API endpoints.
#[derive(Debug, Clone, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ClusterIdentity {
    /// `ClusterVersion.spec.clusterID` (UUID).
    pub id: String,
    /// Cluster name: install-config's `metadata.name`, else the label after `api.` in the API
    /// DNS name ([`cluster_name_and_domain`]).
    pub name: String,
    /// Base domain: the API DNS name after `api.<name>.`.
    pub base_domain: String,
    /// Where `name` and `base_domain` come from ([`cluster_name_and_domain`]):
    /// `install-config+apiServerURL` (both agree), `install-config` or `apiServerURL`.
    pub identity_source: String,
    /// `Infrastructure.status.apiServerURL`, e.g. `https://api.ostest.example.com:6443`.
    #[serde(rename = "apiURL")]
    pub api_url: String,
    /// `Infrastructure.status.apiServerInternalURI` (or derived `https://api-int.<name>.<domain>:6443`).
    #[serde(rename = "apiIntURL")]
    pub api_int_url: String,
    /// `Infrastructure.status.controlPlaneTopology`: HighlyAvailable, SingleReplica, External, ...
    pub control_plane_topology: String,
}

/// Release version facts.
#[derive(Debug, Clone, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct VersionInfo {
    /// Version of the newest Completed history entry (what the control plane runs).
    pub current: String,
    /// Its release image pull spec.
    pub release_image: String,
    /// Whether `current` is 4.18 or newer (compared as numbers: 4.9 < 4.18).
    pub supported: bool,
    /// A newer target still being upgraded to, if any.
    pub upgrade_in_progress: Option<UpgradeTarget>,
}

/// An upgrade that has not completed.
#[derive(Debug, Clone, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct UpgradeTarget {
    /// Target version.
    pub version: String,
    /// Target release image.
    pub image: String,
}

/// Platform facts.
#[derive(Debug, Clone, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct PlatformInfo {
    /// As in the API: BareMetal, None, External, VSphere, AWS, ...
    #[serde(rename = "type")]
    pub kind: String,
    /// Whether day-2 nodes can be added on it with agent-day2.
    pub day2_supported: bool,
}

/// Architecture facts; names use the CoreOS spelling (x86_64, aarch64, ppc64le, s390x).
#[derive(Debug, Clone, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ArchitectureInfo {
    /// Architecture of the control-plane nodes.
    pub control_plane: String,
    /// The cluster runs the multi-arch payload, so hosts of another architecture may join.
    /// Read from the API ([`multi_arch_release`]): `ClusterVersion.status.desired.architecture`
    /// (served only with the TechPreview/DevPreview feature sets: gate ImageStreamImportMode),
    /// `spec.desiredUpdate.architecture` (`oc adm upgrade --to-multi-arch`), or Nodes of more
    /// than one architecture already in the cluster.
    pub multi_arch: bool,
}

/// Machine networks.
#[derive(Debug, Clone, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct MachineNetworks {
    /// CIDRs, e.g. `192.168.111.0/24`; empty when the cluster has none.
    pub cidrs: Vec<String>,
    /// `infrastructure` (spec.platformSpec.baremetal.machineNetworks), `install-config`
    /// (kube-system/cluster-config-v1), or `none`.
    pub source: String,
}

/// Machine Config Server endpoint.
#[derive(Debug, Clone, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct McsInfo {
    /// e.g. `https://api-int.ostest.example.com:22623/config/worker`.
    pub url: String,
    /// Whether the pointer Ignition carried the MCS CA.
    pub ca_found: bool,
    /// `worker-user-data-managed` (read from the pointer Ignition) or `derived` (from api-int).
    pub source: String,
    /// The CA PEM when found.
    #[serde(skip)]
    pub ca_pem: Option<String>,
}

/// Base ISO from coreos-bootimages.
#[derive(Debug, Clone, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct BaseIso {
    /// CoreOS architecture name.
    pub architecture: String,
    /// Download URL.
    pub location: String,
    /// Lowercase hex sha256 of the ISO.
    pub sha256: String,
    /// RHCOS build, e.g. `418.94.202501221327-0`.
    pub release: Option<String>,
}

/// Proxy settings (Proxy/cluster status).
#[derive(Debug, Clone, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ProxyInfo {
    pub http_proxy: Option<String>,
    pub https_proxy: Option<String>,
    /// The computed (complete) noProxy of the status.
    pub no_proxy: Option<String>,
}

/// Trust bundle ConfigMap.
#[derive(Debug, Clone, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct TrustBundle {
    /// Name of the ConfigMap in openshift-config.
    pub config_map: String,
    /// Whether it was read.
    pub found: bool,
    /// Number of certificates in `ca-bundle.crt`.
    pub certificates: usize,
    /// The PEM bundle.
    #[serde(skip)]
    pub pem: Option<String>,
}

/// Mirror configuration.
#[derive(Debug, Clone, Serialize, PartialEq, Default)]
#[serde(rename_all = "camelCase")]
pub struct Mirrors {
    /// ImageDigestMirrorSet entries.
    pub digest_mirrors: Vec<MirrorEntry>,
    /// ImageTagMirrorSet entries.
    pub tag_mirrors: Vec<MirrorEntry>,
    /// Legacy ImageContentSourcePolicy entries (digest mirrors).
    pub legacy_content_sources: Vec<MirrorEntry>,
    /// Name of the ConfigMap of registry CAs (Image.config spec.additionalTrustedCA), if set.
    #[serde(rename = "additionalTrustedCA")]
    pub additional_trusted_ca: Option<String>,
    /// Registries that have a CA in that ConfigMap (its keys, `..` turned back into `:`).
    #[serde(rename = "trustedCARegistries")]
    pub trusted_ca_registries: Vec<String>,
    /// Registry host → PEM, from the additionalTrustedCA ConfigMap.
    #[serde(skip)]
    pub registry_cas: BTreeMap<String, String>,
}

/// One mirrored source.
#[derive(Debug, Clone, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct MirrorEntry {
    /// Source repository, e.g. `quay.io/openshift-release-dev/ocp-release`.
    pub source: String,
    /// Mirrors in order of preference.
    pub mirrors: Vec<String>,
    /// `mirrorSourcePolicy` (AllowContactingSource / NeverContactSource) when set.
    pub mirror_source_policy: Option<String>,
}

/// SSH keys.
#[derive(Debug, Clone, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct SshInfo {
    /// Whether at least one key was found.
    pub key_present: bool,
    /// The public keys (public, not secret).
    pub keys: Vec<String>,
}

/// Cluster networks.
#[derive(Debug, Clone, Serialize, PartialEq, Default)]
#[serde(rename_all = "camelCase")]
pub struct Networks {
    /// Pod networks (CIDRs).
    pub cluster_networks: Vec<String>,
    /// Service networks (CIDRs).
    pub service_networks: Vec<String>,
    /// OVNKubernetes, ...
    pub network_type: Option<String>,
}

/// One existing node.
#[derive(Debug, Clone, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct NodeInfo {
    pub name: String,
    /// `status.addresses` (type, address).
    pub addresses: Vec<NodeAddress>,
    /// Roles from `node-role.kubernetes.io/<role>` labels, sorted.
    pub roles: Vec<String>,
    /// CoreOS architecture name (normalised from the Go name).
    pub architecture: String,
}

/// A node address.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct NodeAddress {
    #[serde(rename = "type")]
    pub kind: String,
    pub address: String,
}

/// Whether the cluster runs the multi-arch payload, as far as the API tells it.
///
/// OpenShift's ClusterVersion CRD keeps `status.desired.architecture` only with the
/// TechPreview/DevPreview feature sets (openshift/api: `Release.architecture` behind feature gate
/// ImageStreamImportMode); with the Default feature set (every production 4.18 cluster) the
/// server prunes it. So also: `spec.desiredUpdate.architecture: Multi` (what `oc adm upgrade
/// --to-multi-arch` writes; it stays until the next update request), and Nodes of two
/// architectures (a single-arch payload cannot run them). A Default cluster installed
/// directly from a multi payload shows none of these; only its release image's metadata
/// (`release.openshift.io/architecture: multi`) says so.
fn multi_arch_release(cv: &Value, nodes: &[NodeInfo]) -> bool {
    let multi = |p: &str| str_at(cv, p) == Some("Multi");
    let mut archs: Vec<&str> = nodes
        .iter()
        .map(|n| n.architecture.as_str())
        .filter(|a| !a.is_empty())
        .collect();
    archs.sort_unstable();
    archs.dedup();
    multi("/status/desired/architecture") || multi("/spec/desiredUpdate/architecture") || archs.len() > 1
}

fn str_at<'a>(v: &'a Value, pointer: &str) -> Option<&'a str> {
    v.pointer(pointer)
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
}

fn strings_at(v: &Value, pointer: &str) -> Vec<String> {
    v.pointer(pointer)
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(|x| x.as_str().map(String::from)).collect())
        .unwrap_or_default()
}

/// Normalises Go architecture names (amd64, arm64) to CoreOS ones (x86_64, aarch64);
/// CoreOS names and ppc64le/s390x pass through.
pub fn normalize_arch(a: &str) -> String {
    match a.to_ascii_lowercase().as_str() {
        "amd64" | "x86_64" => "x86_64".into(),
        "arm64" | "aarch64" => "aarch64".into(),
        other => other.into(),
    }
}

/// Parses the leading `major.minor` of an OpenShift version (`4.18.12`, `4.19.0-rc.1`) as numbers.
pub fn major_minor(version: &str) -> Option<(u64, u64)> {
    let mut parts = version.trim_start_matches('v').split(['.', '-', '+']);
    let major = parts.next()?.parse().ok()?;
    let minor = parts.next()?.parse().ok()?;
    Some((major, minor))
}

/// Reads a ConfigMap/Secret data value: `data` (base64 for Secrets) or `stringData`.
fn secret_value(secret: &Value, key: &str) -> Option<String> {
    if let Some(b64) = secret
        .pointer("/data")
        .and_then(|d| d.get(key))
        .and_then(Value::as_str)
    {
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(b64.trim())
            .ok()?;
        return String::from_utf8(bytes).ok();
    }
    secret
        .pointer("/stringData")
        .and_then(|d| d.get(key))
        .and_then(Value::as_str)
        .map(String::from)
}

fn cm_value<'a>(cm: &'a Value, key: &str) -> Option<&'a str> {
    cm.pointer("/data")
        .and_then(|d| d.get(key))
        .and_then(Value::as_str)
}

/// Decodes an Ignition `data:` URL (base64 or percent-encoded).
fn decode_data_url(url: &str) -> Option<String> {
    let rest = url.strip_prefix("data:")?;
    let (meta, data) = rest.split_once(',')?;
    if meta.ends_with(";base64") {
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(data.trim())
            .ok()?;
        String::from_utf8(bytes).ok()
    } else {
        let mut out = Vec::new();
        let b = data.as_bytes();
        let mut i = 0;
        while i < b.len() {
            if b[i] == b'%' && i + 2 < b.len() {
                let h = std::str::from_utf8(&b[i + 1..i + 3]).ok()?;
                out.push(u8::from_str_radix(h, 16).ok()?);
                i += 3;
            } else {
                out.push(b[i]);
                i += 1;
            }
        }
        String::from_utf8(out).ok()
    }
}

/// A cluster's name and base domain, and where they come from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NameAndDomain {
    pub name: String,
    pub base_domain: String,
    /// `install-config+apiServerURL`, `install-config` or `apiServerURL`.
    pub source: &'static str,
    /// Said when the two sources disagree or one of them is unusable.
    pub warning: Option<String>,
}

/// The cluster's name and base domain from its two sources (issue 22 item 6: one field was
/// trusted): install-config's `metadata.name` and `baseDomain` (ConfigMap
/// `kube-system/cluster-config-v1`, what the installer named the cluster with) and the host of
/// `Infrastructure status.apiServerURL` (`api.<name>.<base domain>`, as the installer makes
/// it). Both agree: either. They differ: install-config's, with a warning naming both. Only one
/// usable: that one (a warning when the API host is not `api.<name>.<domain>`). Err: neither,
/// with what to do.
pub fn cluster_name_and_domain(
    api_host: &str,
    install_config: Option<&Value>,
) -> std::result::Result<NameAndDomain, String> {
    let from_api = api_host
        .strip_prefix("api.")
        .and_then(|r| r.split_once('.'))
        .filter(|(n, d)| !n.is_empty() && !d.is_empty())
        .map(|(n, d)| (n.to_string(), d.to_string()));
    let from_ic = install_config.and_then(|ic| {
        let n = ic.pointer("/metadata/name")?.as_str()?.trim();
        let d = ic.pointer("/baseDomain")?.as_str()?.trim().trim_end_matches('.');
        (!n.is_empty() && !d.is_empty()).then(|| (n.to_string(), d.to_string()))
    });
    let esc = |s: &str| crate::text::display(s);
    match (from_api, from_ic) {
        (Some(a), Some(i)) if a == i => Ok(NameAndDomain {
            name: i.0,
            base_domain: i.1,
            source: "install-config+apiServerURL",
            warning: None,
        }),
        (Some(a), Some(i)) => Ok(NameAndDomain {
            warning: Some(format!(
                "install-config (kube-system/cluster-config-v1) names the cluster {} with base domain {}, but \
                 Infrastructure status.apiServerURL's host {} says {} and {}: using install-config's; \
                 check the image's cluster name if the API name was changed on purpose",
                esc(&i.0),
                esc(&i.1),
                esc(api_host),
                esc(&a.0),
                esc(&a.1)
            )),
            name: i.0,
            base_domain: i.1,
            source: "install-config",
        }),
        (None, Some(i)) => Ok(NameAndDomain {
            warning: Some(format!(
                "Infrastructure status.apiServerURL's host {} is not api.<cluster name>.<base domain>: \
                 the cluster name {} and base domain {} come from install-config (kube-system/cluster-config-v1)",
                esc(api_host),
                esc(&i.0),
                esc(&i.1)
            )),
            name: i.0,
            base_domain: i.1,
            source: "install-config",
        }),
        (Some(a), None) => Ok(NameAndDomain {
            name: a.0,
            base_domain: a.1,
            source: "apiServerURL",
            warning: None,
        }),
        (None, None) => Err(format!(
            "status.apiServerURL host {api_host:?} is not api.<cluster name>.<base domain>, and ConfigMap \
             kube-system/cluster-config-v1 has no install-config with metadata.name and baseDomain: \
             cannot tell the cluster name and base domain; check that this is an OpenShift cluster \
             the installer made"
        )),
    }
}

fn count_certs(pem: &str) -> usize {
    pem.matches("-----BEGIN CERTIFICATE-----").count()
}

fn missing(resource: ResourceRef, objects: &ClusterObjects) -> Error {
    // A required object we could not read is reported with the read's reason.
    if let Some((_, why)) = objects.unreadable.iter().find(|(r, _)| *r == resource) {
        return Error::BadObject {
            resource,
            message: why.clone(),
        };
    }
    Error::NotFound { resource, why: None }
}

impl ClusterModel {
    /// Builds the model from the fetched objects. Pure: no I/O.
    ///
    /// Errors (exit 4): a required object (ClusterVersion `version`, Infrastructure `cluster`,
    /// Secret `openshift-config/pull-secret`, ConfigMap
    /// `openshift-machine-config-operator/coreos-bootimages`) is missing, or lacks what we need
    /// (cluster ID, API URL of the form `https://api.<name>.<domain>:port`, a parseable pull
    /// secret or stream). An unsupported version or platform is not an error here: it is listed
    /// in [`ClusterModel::problems`], so `info` can still print the report.
    pub fn from_objects(o: &ClusterObjects) -> Result<ClusterModel> {
        let (model, mut errors) = Self::from_objects_partial(o);
        if errors.is_empty() {
            Ok(model)
        } else {
            Err(errors.remove(0))
        }
    }

    /// Like [`ClusterModel::from_objects`], but never stops: every required object that is
    /// missing or unusable gives an error in the second value (in the order `from_objects`
    /// would report them) and its facts are marked unknown in [`ClusterModel::unreadable`]
    /// (empty strings / false in the struct, `null` in the `info` document). For `info`'s
    /// partial report; add-nodes must use `from_objects`.
    pub fn from_objects_partial(o: &ClusterObjects) -> (ClusterModel, Vec<Error>) {
        let mut errors: Vec<Error> = Vec::new();
        let mut unknown: Vec<Unreadable> = Vec::new();
        let empty = Value::Object(Default::default());
        let trust_name_of = o
            .proxy
            .as_ref()
            .and_then(|p| str_at(p, "/spec/trustedCA/name"))
            .map(String::from);
        let image_ca_of = o
            .image_config
            .as_ref()
            .and_then(|i| str_at(i, "/spec/additionalTrustedCA/name"))
            .map(String::from);
        let mark = |unknown: &mut Vec<Unreadable>, r: &ResourceRef, reason: String, required: bool| {
            if unknown.iter().any(|u| u.resource_ref.as_ref() == Some(r)) {
                return;
            }
            let (fields, what, blocks) = facts_of(r, trust_name_of.as_deref(), image_ca_of.as_deref());
            let problem =
                (blocks && !required).then(|| format!("{what} is unknown: cannot read {r} ({reason})"));
            unknown.push(Unreadable {
                resource: r.to_string(),
                reason,
                fields: fields.into_iter().map(String::from).collect(),
                required,
                problem,
                resource_ref: Some(r.clone()),
                what: if what.is_empty() {
                    "some facts".into()
                } else {
                    what.into()
                },
            });
        };
        let why = |r: &ResourceRef| {
            o.unreadable
                .iter()
                .find(|(x, _)| x == r)
                .map(|(_, w)| w.clone())
                .unwrap_or_else(|| "not found".into())
        };
        let cv_ref = ResourceRef::cluster("ClusterVersion", "version");
        let infra_ref = ResourceRef::cluster("Infrastructure", "cluster");
        let ps_ref = ResourceRef::namespaced("Secret", "openshift-config", "pull-secret");
        let boot_ref = ResourceRef::namespaced(
            "ConfigMap",
            "openshift-machine-config-operator",
            "coreos-bootimages",
        );
        let required = |obj: Option<&'_ Value>,
                        r: &ResourceRef,
                        errors: &mut Vec<Error>,
                        unknown: &mut Vec<Unreadable>|
         -> bool {
            if obj.is_some() {
                return true;
            }
            errors.push(missing(r.clone(), o));
            mark(unknown, r, why(r), true);
            false
        };
        let have_cv = required(o.cluster_version.as_ref(), &cv_ref, &mut errors, &mut unknown);
        let have_infra = required(o.infrastructure.as_ref(), &infra_ref, &mut errors, &mut unknown);
        let have_ps = required(o.pull_secret.as_ref(), &ps_ref, &mut errors, &mut unknown);
        let have_boot = required(o.coreos_bootimages.as_ref(), &boot_ref, &mut errors, &mut unknown);
        let cv = o.cluster_version.as_ref().unwrap_or(&empty);
        let infra = o.infrastructure.as_ref().unwrap_or(&empty);
        let ps = o.pull_secret.as_ref().unwrap_or(&empty);
        let boot = o.coreos_bootimages.as_ref().unwrap_or(&empty);
        let mut problems = Vec::new();
        let mut warnings = Vec::new();
        for (r, why) in &o.unreadable {
            let is_required = [&cv_ref, &infra_ref, &ps_ref, &boot_ref].contains(&r) || r.kind == "Nodes";
            if is_required && r.kind == "Nodes" {
                errors.push(Error::BadObject {
                    resource: r.clone(),
                    message: why.clone(),
                });
            }
            mark(&mut unknown, r, why.clone(), is_required);
        }

        // --- identity
        let id = match str_at(cv, "/spec/clusterID") {
            Some(id) => id.to_string(),
            None => {
                if have_cv {
                    errors.push(Error::BadObject {
                        resource: cv_ref.clone(),
                        message: "spec.clusterID is empty".into(),
                    });
                }
                String::new()
            }
        };
        let install_config = o
            .cluster_config
            .as_ref()
            .and_then(|cm| cm_value(cm, "install-config"))
            .and_then(|ic| serde_saphyr::from_str::<Value>(ic).ok());
        let (api_url, name, base_domain, identity_source) = match str_at(infra, "/status/apiServerURL") {
            None => {
                if have_infra {
                    errors.push(Error::BadObject {
                        resource: infra_ref.clone(),
                        message: "status.apiServerURL is empty".into(),
                    });
                }
                (String::new(), String::new(), String::new(), String::new())
            }
            Some(api_url) => {
                let api_url = api_url.to_string();
                match api_url
                    .parse::<http::Uri>()
                    .ok()
                    .and_then(|u| u.host().map(String::from))
                {
                    None => {
                        errors.push(Error::BadObject {
                            resource: infra_ref.clone(),
                            message: format!("status.apiServerURL {api_url:?} is not a URL"),
                        });
                        (api_url, String::new(), String::new(), String::new())
                    }
                    Some(api_host) => match cluster_name_and_domain(&api_host, install_config.as_ref()) {
                        Ok(id) => {
                            warnings.extend(id.warning);
                            (api_url, id.name, id.base_domain, id.source.to_string())
                        }
                        Err(message) => {
                            errors.push(Error::BadObject {
                                resource: infra_ref.clone(),
                                message,
                            });
                            (api_url, String::new(), String::new(), String::new())
                        }
                    },
                }
            }
        };
        let api_int_url = str_at(infra, "/status/apiServerInternalURI")
            .map(String::from)
            .unwrap_or_else(|| format!("https://api-int.{name}.{base_domain}:6443"));
        let control_plane_topology = str_at(infra, "/status/controlPlaneTopology")
            .unwrap_or("HighlyAvailable")
            .to_string();

        // --- version: history is newest first; the newest Completed entry is what runs.
        let history = cv
            .pointer("/status/history")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        let completed = history.iter().find(|h| h["state"].as_str() == Some("Completed"));
        let (current, release_image) = match completed {
            Some(h) => (
                h["version"].as_str().unwrap_or_default().to_string(),
                h["image"].as_str().unwrap_or_default().to_string(),
            ),
            None if !have_cv => (String::new(), String::new()),
            None => {
                problems.push(
                    "the cluster has not completed an installation yet (no Completed entry in \
                     ClusterVersion status.history)"
                        .into(),
                );
                (
                    str_at(cv, "/status/desired/version")
                        .unwrap_or_default()
                        .to_string(),
                    str_at(cv, "/status/desired/image")
                        .unwrap_or_default()
                        .to_string(),
                )
            }
        };
        let upgrade_in_progress = history
            .first()
            .filter(|h| h["state"].as_str() != Some("Completed"))
            .and_then(|h| {
                Some(UpgradeTarget {
                    version: h["version"].as_str()?.to_string(),
                    image: h["image"].as_str().unwrap_or_default().to_string(),
                })
            })
            .filter(|_| completed.is_some());
        if let Some(u) = &upgrade_in_progress {
            warnings.push(format!(
                "an upgrade to {} is in progress; new nodes use the running release {current} until it completes",
                u.version
            ));
        }
        let supported = match major_minor(&current) {
            Some(v) => v >= MIN_VERSION,
            None if !have_cv => false,
            None => {
                problems.push(format!("cannot parse the cluster version {current:?}"));
                false
            }
        };
        if !supported && major_minor(&current).is_some() {
            problems.push(format!(
                "OpenShift {current} is too old: agent-day2 needs {}.{} or newer",
                MIN_VERSION.0, MIN_VERSION.1
            ));
        }

        // --- platform
        let platform_kind = str_at(infra, "/status/platformStatus/type")
            .or_else(|| str_at(infra, "/status/platform"))
            .or_else(|| str_at(infra, "/spec/platformSpec/type"))
            .unwrap_or("None")
            .to_string();
        let day2_supported = SUPPORTED_PLATFORMS.contains(&platform_kind.as_str());
        if !day2_supported && have_infra {
            problems.push(format!(
                "platform {platform_kind} is not supported for day-2 nodes (supported: baremetal, none, external, vsphere)"
            ));
        }

        // --- nodes and architecture
        let nodes: Vec<NodeInfo> = o.nodes.iter().map(node_info).collect();
        let cp_arch = nodes
            .iter()
            .find(|n| n.roles.iter().any(|r| r == "master" || r == "control-plane"))
            .or(nodes.first())
            .map(|n| n.architecture.clone());
        let control_plane = match cp_arch {
            Some(a) => a,
            None => {
                // The release image tag carries the arch for single-arch payloads (`4.18.12-x86_64`).
                let guess = ["x86_64", "aarch64", "ppc64le", "s390x"]
                    .into_iter()
                    .find(|a| release_image.ends_with(&format!("-{a}")))
                    .unwrap_or("x86_64");
                warnings.push(format!(
                    "no Node readable: assuming control-plane architecture {guess}"
                ));
                guess.to_string()
            }
        };
        let multi_arch = multi_arch_release(cv, &nodes);

        // --- machine networks
        let mut machine_networks = MachineNetworks {
            cidrs: strings_at(infra, "/spec/platformSpec/baremetal/machineNetworks"),
            source: "infrastructure".into(),
        };
        if machine_networks.cidrs.is_empty() {
            let from_ic = install_config
                .as_ref()
                .map(|ic| {
                    ic.pointer("/networking/machineNetwork")
                        .and_then(Value::as_array)
                        .map(|a| {
                            a.iter()
                                .filter_map(|m| m["cidr"].as_str().map(String::from))
                                .collect::<Vec<_>>()
                        })
                        .unwrap_or_default()
                })
                .unwrap_or_default();
            machine_networks = if from_ic.is_empty() {
                MachineNetworks {
                    cidrs: vec![],
                    source: "none".into(),
                }
            } else {
                MachineNetworks {
                    cidrs: from_ic,
                    source: "install-config".into(),
                }
            };
        }

        // --- MCS endpoint from the worker pointer Ignition
        let derived_mcs = format!("https://api-int.{name}.{base_domain}:22623/config/worker");
        let machine_config_server = match o
            .worker_user_data
            .as_ref()
            .and_then(|s| secret_value(s, "userData"))
        {
            Some(ign) => {
                let ign: Value = match serde_json::from_str(&ign) {
                    Ok(v) => v,
                    Err(e) => {
                        errors.push(Error::BadObject {
                            resource: ResourceRef::namespaced(
                                "Secret",
                                "openshift-machine-api",
                                "worker-user-data-managed",
                            ),
                            message: format!("userData is not Ignition JSON: {e}"),
                        });
                        Value::Null
                    }
                };
                let url = str_at(&ign, "/ignition/config/merge/0/source")
                    .or_else(|| str_at(&ign, "/ignition/config/append/0/source"))
                    .unwrap_or(&derived_mcs)
                    .to_string();
                let ca_pem = ign
                    .pointer("/ignition/security/tls/certificateAuthorities")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                    .filter_map(|ca| ca["source"].as_str().and_then(decode_data_url))
                    .find(|pem| pem.contains("-----BEGIN CERTIFICATE-----"));
                McsInfo {
                    url,
                    ca_found: ca_pem.is_some(),
                    source: "worker-user-data-managed".into(),
                    ca_pem,
                }
            }
            None => McsInfo {
                url: derived_mcs,
                ca_found: false,
                source: "derived".into(),
                ca_pem: None,
            },
        };
        // A missing CA (secret absent, or present without one) blocks add-nodes: the node's
        // pointer Ignition could not verify the Machine Config Server's certificate and would
        // never get its config. Unreadable (403) is reported through `unreadable` instead.
        let mcs_forbidden = unknown.iter().any(|u| u.covers("machineConfigServer.caFound"));
        if !machine_config_server.ca_found && !mcs_forbidden && have_infra {
            problems.push(format!(
                "no Machine Config Server CA found (Secret openshift-machine-api/worker-user-data-managed {}): \
                 new nodes could not verify {}; check that the machine-config operator is healthy \
                 (`oc get clusteroperator machine-config`)",
                if o.worker_user_data.is_some() { "has none" } else { "not found" },
                machine_config_server.url
            ));
        }

        // --- base ISO
        let coreos_stream: Value = match cm_value(boot, "stream") {
            None if !have_boot => Value::Null,
            None => {
                errors.push(Error::BadObject {
                    resource: boot_ref.clone(),
                    message: "data.stream is missing".into(),
                });
                Value::Null
            }
            Some(text) => match serde_json::from_str(text) {
                Ok(v) => v,
                Err(e) => {
                    errors.push(Error::BadObject {
                        resource: boot_ref.clone(),
                        message: format!("data.stream is not CoreOS stream JSON: {e}"),
                    });
                    Value::Null
                }
            },
        };
        let base_iso = match check_base_iso(&coreos_stream, &control_plane) {
            Ok(iso) => {
                if !(iso.location.starts_with("https://") || iso.location.starts_with("http://")) {
                    warnings.push(format!(
                        "the {control_plane} live ISO location {:?} in ConfigMap \
                         openshift-machine-config-operator/coreos-bootimages is not an http(s) URL; \
                         add-nodes cannot download it: use --base-iso FILE (or the release \
                         payload's machine-os-images image)",
                        iso.location
                    ));
                }
                Some(iso)
            }
            Err(why) => {
                if have_boot && !coreos_stream.is_null() {
                    warnings.push(format!(
                        "no usable base ISO for {control_plane} in ConfigMap \
                         openshift-machine-config-operator/coreos-bootimages: {why}; add-nodes needs \
                         --base-iso FILE (or the release payload's machine-os-images image)"
                    ));
                }
                None
            }
        };

        // --- proxy and trust bundle
        let proxy = o.proxy.as_ref().and_then(|p| {
            let get = |k: &str| str_at(p, &format!("/status/{k}")).map(String::from);
            let info = ProxyInfo {
                http_proxy: get("httpProxy"),
                https_proxy: get("httpsProxy"),
                no_proxy: get("noProxy"),
            };
            (info.http_proxy.is_some() || info.https_proxy.is_some()).then_some(info)
        });
        let trust_bundle = o
            .proxy
            .as_ref()
            .and_then(|p| str_at(p, "/spec/trustedCA/name"))
            .map(|cm_name| {
                let pem = o
                    .trust_bundle
                    .as_ref()
                    .and_then(|cm| cm_value(cm, "ca-bundle.crt"))
                    .map(String::from);
                TrustBundle {
                    config_map: cm_name.to_string(),
                    found: o.trust_bundle.is_some(),
                    certificates: pem.as_deref().map(count_certs).unwrap_or(0),
                    pem,
                }
            });
        if let Some(tb) = &trust_bundle {
            if !tb.found && !unknown.iter().any(|u| u.covers("trustBundle")) {
                warnings.push(format!(
                    "trust bundle ConfigMap openshift-config/{} (Proxy spec.trustedCA) not found",
                    tb.config_map
                ));
            }
        }

        // --- mirrors
        let entries = |objs: &[Value], list: &str| -> Vec<MirrorEntry> {
            objs.iter()
                .flat_map(|o| {
                    o.pointer(&format!("/spec/{list}"))
                        .and_then(Value::as_array)
                        .cloned()
                        .unwrap_or_default()
                })
                .filter_map(|m| {
                    Some(MirrorEntry {
                        source: m["source"].as_str()?.to_string(),
                        mirrors: strings_at(&m, "/mirrors"),
                        mirror_source_policy: m["mirrorSourcePolicy"].as_str().map(String::from),
                    })
                })
                .collect()
        };
        let additional_trusted_ca = o
            .image_config
            .as_ref()
            .and_then(|i| str_at(i, "/spec/additionalTrustedCA/name"))
            .map(String::from);
        let registry_cas: BTreeMap<String, String> = o
            .additional_trusted_ca
            .as_ref()
            .and_then(|cm| cm.get("data").and_then(Value::as_object))
            .map(|d| {
                // Keys are registry hosts; `host..port` stands for `host:port` (ConfigMap keys have no colon).
                d.iter()
                    .filter_map(|(k, v)| Some((k.replace("..", ":"), v.as_str()?.to_string())))
                    .collect()
            })
            .unwrap_or_default();
        if let (Some(n), None, false) = (
            &additional_trusted_ca,
            &o.additional_trusted_ca,
            unknown.iter().any(|u| u.covers("mirrors.trustedCARegistries")),
        ) {
            warnings.push(format!("registry CA ConfigMap openshift-config/{n} (Image.config spec.additionalTrustedCA) not found"));
        }
        let mirrors = Mirrors {
            digest_mirrors: entries(&o.image_digest_mirror_sets, "imageDigestMirrors"),
            tag_mirrors: entries(&o.image_tag_mirror_sets, "imageTagMirrors"),
            legacy_content_sources: entries(&o.image_content_source_policies, "repositoryDigestMirrors"),
            additional_trusted_ca,
            trusted_ca_registries: registry_cas.keys().cloned().collect(),
            registry_cas,
        };

        // --- machine configs
        let mc = |n: &str| {
            o.machine_configs
                .iter()
                .find(|m| str_at(m, "/metadata/name") == Some(n))
        };
        let fips = mc("99-worker-fips")
            .and_then(|m| m.pointer("/spec/fips"))
            .and_then(Value::as_bool)
            .unwrap_or(false);
        let keys: Vec<String> = mc("99-worker-ssh")
            .and_then(|m| m.pointer("/spec/config/passwd/users").and_then(Value::as_array))
            .into_iter()
            .flatten()
            .filter(|u| u["name"].as_str() == Some("core"))
            .flat_map(|u| strings_at(u, "/sshAuthorizedKeys"))
            .flat_map(|k| {
                k.lines()
                    .map(str::trim)
                    .filter(|l| !l.is_empty())
                    .map(String::from)
                    .collect::<Vec<_>>()
            })
            .collect();
        let ssh = SshInfo {
            key_present: !keys.is_empty(),
            keys,
        };
        let chrony = mc("50-workers-chrony-configuration");
        let chrony_conf = chrony.and_then(|m| {
            m.pointer("/spec/config/storage/files")
                .and_then(Value::as_array)?
                .iter()
                .find(|f| f["path"].as_str() == Some("/etc/chrony.conf"))
                .and_then(|f| f.pointer("/contents/source").and_then(Value::as_str))
                .and_then(decode_data_url)
        });

        // --- networks
        let networks = o
            .network
            .as_ref()
            .map(|n| {
                let cidrs = |p: &str| -> Vec<String> {
                    n.pointer(p)
                        .and_then(Value::as_array)
                        .map(|a| {
                            a.iter()
                                .filter_map(|c| c["cidr"].as_str().map(String::from))
                                .collect()
                        })
                        .unwrap_or_default()
                };
                let mut cluster_networks = cidrs("/status/clusterNetwork");
                if cluster_networks.is_empty() {
                    cluster_networks = cidrs("/spec/clusterNetwork");
                }
                let mut service_networks = strings_at(n, "/status/serviceNetwork");
                if service_networks.is_empty() {
                    service_networks = strings_at(n, "/spec/serviceNetwork");
                }
                Networks {
                    cluster_networks,
                    service_networks,
                    network_type: str_at(n, "/status/networkType")
                        .or_else(|| str_at(n, "/spec/networkType"))
                        .map(String::from),
                }
            })
            .unwrap_or_default();
        if o.network.is_none() && !unknown.iter().any(|u| u.covers("networks")) {
            warnings.push("Network.config/cluster not found: cluster and service networks unknown".into());
        }

        // --- pull secret: must be JSON with an `auths` object.
        let pull_secret_text = if !have_ps {
            String::new()
        } else {
            match secret_value(ps, ".dockerconfigjson") {
                None => {
                    errors.push(Error::BadObject {
                        resource: ps_ref.clone(),
                        message: "no .dockerconfigjson key".into(),
                    });
                    String::new()
                }
                Some(text) => {
                    match serde_json::from_str::<Value>(&text) {
                        Err(e) => errors.push(Error::BadObject {
                            resource: ps_ref.clone(),
                            message: format!(".dockerconfigjson is not JSON ({e}); fix the pull secret with `oc set data secret/pull-secret -n openshift-config`"),
                        }),
                        Ok(j) if !j.get("auths").is_some_and(Value::is_object) => errors.push(Error::BadObject {
                            resource: ps_ref.clone(),
                            message: ".dockerconfigjson has no \"auths\" object".into(),
                        }),
                        Ok(_) => {}
                    }
                    text
                }
            }
        };
        let pull_secret_found = have_ps
            && !errors
                .iter()
                .any(|e| matches!(e, Error::BadObject { resource, .. } if *resource == ps_ref));
        // Unknown facts add-nodes needs block it (the document says which).
        for u in &unknown {
            if let Some(p) = &u.problem {
                problems.push(p.clone());
            }
        }
        if !unknown.iter().any(|u| u.covers("machineNetworks")) {
            for c in &machine_networks.cidrs {
                if c.parse::<ipnet::IpNet>().is_err() {
                    warnings.push(format!(
                        "machine network {c:?} (from {}) is not a CIDR; ignored when checking host addresses",
                        machine_networks.source
                    ));
                }
            }
        }

        let model = ClusterModel {
            cluster: ClusterIdentity {
                id,
                name,
                base_domain,
                identity_source,
                api_url,
                api_int_url,
                control_plane_topology,
            },
            version: VersionInfo {
                current,
                release_image,
                supported,
                upgrade_in_progress,
            },
            platform: PlatformInfo {
                kind: platform_kind,
                day2_supported,
            },
            architecture: ArchitectureInfo {
                control_plane,
                multi_arch,
            },
            machine_networks,
            machine_config_server,
            base_iso,
            proxy,
            trust_bundle,
            mirrors,
            fips,
            ssh,
            chrony_configured: chrony.is_some(),
            networks,
            nodes,
            pull_secret_found,
            problems,
            warnings,
            unreadable: unknown,
            pull_secret: PullSecret(pull_secret_text),
            coreos_stream,
            chrony_conf,
        };
        (model, errors)
    }

    /// The [`ClusterModel::problems`] that no unreadable object caused (too old, unsupported
    /// platform): what "the cluster cannot take day-2 nodes" lists; an unreadable object's
    /// problem is said as that read's error instead.
    pub fn other_problems(&self) -> Vec<String> {
        self.problems
            .iter()
            .filter(|p| !self.unreadable.iter().any(|u| u.problem.as_ref() == Some(*p)))
            .cloned()
            .collect()
    }

    /// Whether no [`ClusterModel::problems`] stand in add-nodes' way. Only part of the verdict:
    /// a required object that could not be read is an error of [`ClusterModel::from_objects_partial`],
    /// not a problem (`info` combines both).
    pub fn can_add_nodes(&self) -> bool {
        self.problems.is_empty()
    }

    /// The live ISO for `arch` (Go or CoreOS spelling) from the cluster's CoreOS stream.
    pub fn base_iso_for(&self, arch: &str) -> Option<BaseIso> {
        base_iso_for(&self.coreos_stream, &normalize_arch(arch))
    }
}

/// The live ISO of `arch` in a CoreOS stream, checked: it must exist and have a sha256 of 64
/// hex digits. Err says what is wrong (for the "no usable base ISO" warning). A location that
/// is not http(s) only warns (the ISO may still come from --base-iso or machine-os-images with
/// the same sha256).
fn check_base_iso(stream: &Value, arch: &str) -> std::result::Result<BaseIso, String> {
    let Some(metal) = stream.pointer(&format!("/architectures/{arch}/artifacts/metal")) else {
        let have: Vec<&str> = stream
            .pointer("/architectures")
            .and_then(Value::as_object)
            .map(|a| a.keys().map(String::as_str).collect())
            .unwrap_or_default();
        return Err(format!(
            "the stream has no metal artifacts for {arch} (architectures: {})",
            if have.is_empty() {
                "none".to_string()
            } else {
                have.join(", ")
            }
        ));
    };
    let Some(disk) = metal.pointer("/formats/iso/disk") else {
        return Err(format!("the {arch} metal artifacts have no iso format"));
    };
    let location = disk["location"].as_str().unwrap_or("");
    let sha = disk["sha256"].as_str().unwrap_or("");
    if sha.len() != 64 || !sha.chars().all(|c| c.is_ascii_hexdigit()) {
        return Err(format!("the ISO sha256 {sha:?} is not 64 hex digits"));
    }
    Ok(BaseIso {
        architecture: arch.to_string(),
        location: location.to_string(),
        sha256: sha.to_ascii_lowercase(),
        release: metal["release"].as_str().map(String::from),
    })
}

fn base_iso_for(stream: &Value, arch: &str) -> Option<BaseIso> {
    let metal = stream.pointer(&format!("/architectures/{arch}/artifacts/metal"))?;
    let disk = metal.pointer("/formats/iso/disk")?;
    Some(BaseIso {
        architecture: arch.to_string(),
        location: disk["location"].as_str()?.to_string(),
        sha256: disk["sha256"].as_str()?.to_ascii_lowercase(),
        release: metal["release"].as_str().map(String::from),
    })
}

fn node_info(n: &Value) -> NodeInfo {
    let mut roles: Vec<String> = n
        .pointer("/metadata/labels")
        .and_then(Value::as_object)
        .map(|l| {
            l.keys()
                .filter_map(|k| k.strip_prefix("node-role.kubernetes.io/"))
                .map(String::from)
                .collect()
        })
        .unwrap_or_default();
    roles.sort();
    NodeInfo {
        name: str_at(n, "/metadata/name").unwrap_or_default().to_string(),
        addresses: n
            .pointer("/status/addresses")
            .and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(|x| {
                        Some(NodeAddress {
                            kind: x["type"].as_str()?.to_string(),
                            address: x["address"].as_str()?.to_string(),
                        })
                    })
                    .collect()
            })
            .unwrap_or_default(),
        roles,
        architecture: normalize_arch(str_at(n, "/status/nodeInfo/architecture").unwrap_or("")),
    }
}

// ---------------------------------------------------------------------------------------------
// Fetch layer

/// How a read failure is treated.
#[derive(Clone, Copy, PartialEq)]
enum Need {
    /// 404 and 403 are errors (exit 4) naming the resource.
    Required,
    /// 404 is "none"; 403 and other API errors make the fact unknown.
    Optional,
}

fn ar(group: &str, version: &str, kind: &str, plural: &str) -> ApiResource {
    ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(group, version, kind), plural)
}

/// The ConfigMap in `openshift-config` that a config object names at `pointer` (Proxy
/// `spec.trustedCA.name`, Image `spec.additionalTrustedCA.name`); None when the object or the
/// name is absent. Optional: a 404 is None, a 403 is recorded in `unreadable`.
async fn referenced_config_map(
    target: &KubeTarget,
    cm: &ApiResource,
    obj: Option<&Value>,
    pointer: &str,
    unreadable: &mut Vec<(ResourceRef, String)>,
) -> Result<Option<Value>> {
    let Some(name) = obj.and_then(|o| str_at(o, pointer)) else {
        return Ok(None);
    };
    let r = ResourceRef::namespaced("ConfigMap", "openshift-config", name);
    get_obj(
        target,
        cm,
        Some("openshift-config"),
        name,
        r,
        Need::Optional,
        unreadable,
    )
    .await
}

async fn get_obj(
    target: &KubeTarget,
    res: &ApiResource,
    namespace: Option<&str>,
    name: &str,
    r: ResourceRef,
    need: Need,
    unreadable: &mut Vec<(ResourceRef, String)>,
) -> Result<Option<Value>> {
    let api: Api<DynamicObject> = match namespace {
        Some(ns) => Api::namespaced_with(target.client.clone(), ns, res),
        None => Api::all_with(target.client.clone(), res),
    };
    tracing::debug!(resource = %r, "get");
    let answer = with_deadline(target, || format!("reading {r}"), api.get(name)).await?;
    match answer {
        Ok(o) => Ok(Some(
            serde_json::to_value(o).map_err(|e| Error::Unexpected(e.to_string()))?,
        )),
        Err(e) => match (classify(e, "read", r.clone(), target), need) {
            (Error::NotFound { .. }, Need::Optional) => Ok(None),
            (Error::NotFound { resource, .. }, Need::Required) => {
                Err(Error::NotFound { resource, why: None })
            }
            (
                e @ (Error::Unreachable { .. }
                | Error::Unauthorized { .. }
                | Error::Timeout(_)
                | Error::ImpersonationRefused { .. }),
                _,
            ) => Err(e),
            (e, Need::Required) => Err(e),
            (e, Need::Optional) => {
                tracing::debug!("{e}");
                unreadable.push((r, short_reason(&e)));
                Ok(None)
            }
        },
    }
}

fn short_reason(e: &Error) -> String {
    match e {
        Error::Forbidden { user: Some(u), .. } => format!("forbidden for user \"{u}\""),
        Error::Forbidden { .. } => "forbidden".into(),
        Error::Api { message, .. } => message.clone(),
        other => other.to_string(),
    }
}

async fn list_objs(
    target: &KubeTarget,
    res: &ApiResource,
    r: ResourceRef,
    need: Need,
    unreadable: &mut Vec<(ResourceRef, String)>,
) -> Result<Vec<Value>> {
    let api: Api<DynamicObject> = Api::all_with(target.client.clone(), res);
    tracing::debug!(resource = %r, "list");
    let lp = ListParams::default();
    let answer = with_deadline(target, || format!("listing {r}"), api.list(&lp)).await?;
    match answer {
        Ok(l) => l
            .items
            .into_iter()
            .map(|o| serde_json::to_value(o).map_err(|e| Error::Unexpected(e.to_string())))
            .collect(),
        Err(e) => match (classify(e, "list", r.clone(), target), need) {
            // A 404 on a list means the API (CRD) does not exist on this cluster: none.
            (Error::NotFound { .. }, _) if need == Need::Optional => Ok(vec![]),
            (
                e @ (Error::Unreachable { .. }
                | Error::Unauthorized { .. }
                | Error::Timeout(_)
                | Error::ImpersonationRefused { .. }),
                _,
            ) => Err(e),
            (e, Need::Required) => Err(e),
            (e, Need::Optional) => {
                tracing::debug!("{e}");
                unreadable.push((r, short_reason(&e)));
                Ok(vec![])
            }
        },
    }
}

/// Reads every object of [`ClusterObjects`] with the user's credentials.
///
/// Errors (exit 4): unreachable API server, 401, and 403/404 on the required objects
/// (ClusterVersion, Infrastructure, pull secret, coreos-bootimages, Nodes), each naming the
/// resource. 404 on optional objects means "none"; 403 on them is recorded in
/// [`ClusterObjects::unreadable`] and becomes a warning.
pub async fn fetch(target: &KubeTarget) -> Result<ClusterObjects> {
    let (objects, mut errors) = fetch_all(target).await?;
    if errors.is_empty() {
        Ok(objects)
    } else {
        Err(errors.remove(0))
    }
}

/// For [`fetch_all`]: a failed required read that is a 403/404/5xx is recorded in `failed` (and
/// in `u`, the unreadable list, unless a 404) and read as the default (absent); unreachable,
/// 401, timeouts and refused impersonation stop everything.
fn keep_failed<T: Default>(
    r: Result<T>,
    failed: &mut Vec<Error>,
    u: &mut Vec<(ResourceRef, String)>,
    what: ResourceRef,
) -> Result<T> {
    match r {
        Ok(v) => Ok(v),
        Err(
            e @ (Error::Unreachable { .. }
            | Error::Unauthorized { .. }
            | Error::Timeout(_)
            | Error::ImpersonationRefused { .. }),
        ) => Err(e),
        Err(e) => {
            if !matches!(e, Error::NotFound { .. }) {
                u.push((what, short_reason(&e)));
            }
            failed.push(e);
            Ok(T::default())
        }
    }
}

/// A required single-object read of [`fetch_all`], failures kept by [`keep_failed`].
async fn required_get(
    target: &KubeTarget,
    res: &ApiResource,
    namespace: Option<&str>,
    name: &str,
    what: ResourceRef,
    failed: &mut Vec<Error>,
    u: &mut Vec<(ResourceRef, String)>,
) -> Result<Option<Value>> {
    let r = get_obj(target, res, namespace, name, what.clone(), Need::Required, u).await;
    keep_failed(r, failed, u, what)
}

/// Like [`fetch`], but a failed required read does not stop it: the error is returned in the
/// second value (in read order), the resource recorded in [`ClusterObjects::unreadable`]
/// unless it was a 404, and reading goes on, so `info` can print what it could read.
/// Errors (first value): unreachable, 401, timeouts, refused impersonation.
pub async fn fetch_all(target: &KubeTarget) -> Result<(ClusterObjects, Vec<Error>)> {
    let cfg = "config.openshift.io";
    let mut u = Vec::new();
    let mut failed: Vec<Error> = Vec::new();
    // The first read also tells us whether the server is reachable and accepts us.
    let cluster_version = required_get(
        target,
        &ar(cfg, "v1", "ClusterVersion", "clusterversions"),
        None,
        "version",
        ResourceRef::cluster("ClusterVersion", "version"),
        &mut failed,
        &mut u,
    )
    .await?;
    let infrastructure = required_get(
        target,
        &ar(cfg, "v1", "Infrastructure", "infrastructures"),
        None,
        "cluster",
        ResourceRef::cluster("Infrastructure", "cluster"),
        &mut failed,
        &mut u,
    )
    .await?;
    let secret = ar("", "v1", "Secret", "secrets");
    let cm = ar("", "v1", "ConfigMap", "configmaps");
    let pull_secret = required_get(
        target,
        &secret,
        Some("openshift-config"),
        "pull-secret",
        ResourceRef::namespaced("Secret", "openshift-config", "pull-secret"),
        &mut failed,
        &mut u,
    )
    .await?;
    let coreos_bootimages = required_get(
        target,
        &cm,
        Some("openshift-machine-config-operator"),
        "coreos-bootimages",
        ResourceRef::namespaced(
            "ConfigMap",
            "openshift-machine-config-operator",
            "coreos-bootimages",
        ),
        &mut failed,
        &mut u,
    )
    .await?;
    let what = ResourceRef::list("Nodes");
    let nodes = list_objs(
        target,
        &ar("", "v1", "Node", "nodes"),
        what.clone(),
        Need::Required,
        &mut u,
    )
    .await;
    let nodes = keep_failed(nodes, &mut failed, &mut u, what)?;

    let proxy = get_obj(
        target,
        &ar(cfg, "v1", "Proxy", "proxies"),
        None,
        "cluster",
        ResourceRef::cluster("Proxy", "cluster"),
        Need::Optional,
        &mut u,
    )
    .await?;
    let trust_bundle =
        referenced_config_map(target, &cm, proxy.as_ref(), "/spec/trustedCA/name", &mut u).await?;
    let image_config = get_obj(
        target,
        &ar(cfg, "v1", "Image", "images"),
        None,
        "cluster",
        ResourceRef::cluster("Image.config.openshift.io", "cluster"),
        Need::Optional,
        &mut u,
    )
    .await?;
    let additional_trusted_ca = referenced_config_map(
        target,
        &cm,
        image_config.as_ref(),
        "/spec/additionalTrustedCA/name",
        &mut u,
    )
    .await?;
    let cluster_config = get_obj(
        target,
        &cm,
        Some("kube-system"),
        "cluster-config-v1",
        ResourceRef::namespaced("ConfigMap", "kube-system", "cluster-config-v1"),
        Need::Optional,
        &mut u,
    )
    .await?;
    let image_digest_mirror_sets = list_objs(
        target,
        &ar(cfg, "v1", "ImageDigestMirrorSet", "imagedigestmirrorsets"),
        ResourceRef::list("ImageDigestMirrorSets"),
        Need::Optional,
        &mut u,
    )
    .await?;
    let image_tag_mirror_sets = list_objs(
        target,
        &ar(cfg, "v1", "ImageTagMirrorSet", "imagetagmirrorsets"),
        ResourceRef::list("ImageTagMirrorSets"),
        Need::Optional,
        &mut u,
    )
    .await?;
    let image_content_source_policies = list_objs(
        target,
        &ar(
            "operator.openshift.io",
            "v1alpha1",
            "ImageContentSourcePolicy",
            "imagecontentsourcepolicies",
        ),
        ResourceRef::list("ImageContentSourcePolicies"),
        Need::Optional,
        &mut u,
    )
    .await?;
    let worker_user_data = get_obj(
        target,
        &secret,
        Some("openshift-machine-api"),
        "worker-user-data-managed",
        ResourceRef::namespaced("Secret", "openshift-machine-api", "worker-user-data-managed"),
        Need::Optional,
        &mut u,
    )
    .await?;
    let mut machine_configs = Vec::new();
    let mc = ar(
        "machineconfiguration.openshift.io",
        "v1",
        "MachineConfig",
        "machineconfigs",
    );
    for name in [
        "99-worker-ssh",
        "99-worker-fips",
        "50-workers-chrony-configuration",
    ] {
        if let Some(v) = get_obj(
            target,
            &mc,
            None,
            name,
            ResourceRef::cluster("MachineConfig", name),
            Need::Optional,
            &mut u,
        )
        .await?
        {
            machine_configs.push(v);
        }
    }
    let network = get_obj(
        target,
        &ar(cfg, "v1", "Network", "networks"),
        None,
        "cluster",
        ResourceRef::cluster("Network.config.openshift.io", "cluster"),
        Need::Optional,
        &mut u,
    )
    .await?;
    let objects = ClusterObjects {
        cluster_version,
        infrastructure,
        pull_secret,
        proxy,
        trust_bundle,
        image_config,
        additional_trusted_ca,
        cluster_config,
        image_digest_mirror_sets,
        image_tag_mirror_sets,
        image_content_source_policies,
        coreos_bootimages,
        worker_user_data,
        machine_configs,
        nodes,
        network,
        unreadable: u,
    };
    Ok((objects, failed))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kube::errors::{strip_os_error, user_from_message};
    use std::net::IpAddr;

    #[test]
    fn cluster_name_and_domain_from_both_sources() {
        let ic = |n: &str, d: &str| serde_json::json!({"metadata": {"name": n}, "baseDomain": d});
        let both =
            cluster_name_and_domain("api.ostest.example.com", Some(&ic("ostest", "example.com"))).unwrap();
        assert_eq!(
            (both.name.as_str(), both.base_domain.as_str(), both.source),
            ("ostest", "example.com", "install-config+apiServerURL")
        );
        assert_eq!(both.warning, None);
        let differ =
            cluster_name_and_domain("api.other.example.org", Some(&ic("ostest", "example.com"))).unwrap();
        assert_eq!(
            (differ.name.as_str(), differ.source),
            ("ostest", "install-config")
        );
        assert!(differ
            .warning
            .unwrap()
            .contains("api.other.example.org says other and example.org"));
        let lb = cluster_name_and_domain("lb.example.com", Some(&ic("ostest", "example.com."))).unwrap();
        assert_eq!(
            (lb.name.as_str(), lb.base_domain.as_str()),
            ("ostest", "example.com")
        );
        assert!(lb
            .warning
            .unwrap()
            .contains("is not api.<cluster name>.<base domain>"));
        let api_only = cluster_name_and_domain("api.ostest.example.com", None).unwrap();
        assert_eq!(
            (api_only.name.as_str(), api_only.source),
            ("ostest", "apiServerURL")
        );
        assert!(cluster_name_and_domain("lb.example.com", None)
            .unwrap_err()
            .contains("cluster-config-v1"));
        assert!(cluster_name_and_domain("lb.example.com", Some(&ic("", "x"))).is_err());
    }

    /// An error wrapping another, the way the kube client wraps hyper's connect error.
    #[derive(Debug)]
    struct Wrap(&'static str, Box<dyn std::error::Error + Send + Sync + 'static>);
    impl std::fmt::Display for Wrap {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            write!(f, "{}", self.0)
        }
    }
    impl std::error::Error for Wrap {
        fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
            Some(self.1.as_ref())
        }
    }

    #[test]
    fn connect_failures_are_said_plainly() {
        let refused = Wrap(
            "ServiceError: client error (Connect)",
            Box::new(Wrap(
                "tcp connect error",
                Box::new(std::io::Error::from_raw_os_error(111)),
            )),
        );
        assert_eq!(
            connect_failure(&refused),
            "connection refused: nothing listens at that address and port"
        );
        let dns = Wrap(
            "ServiceError: client error (Connect)",
            Box::new(std::io::Error::other(
                "dns error: failed to lookup address information: Name or service not known",
            )),
        );
        assert_eq!(
            connect_failure(&dns),
            "the host name does not resolve (failed to lookup address information: Name or service not known)"
        );
        let tls = Wrap(
            "ServiceError: client error (Connect)",
            Box::new(std::io::Error::other("invalid peer certificate: UnknownIssuer")),
        );
        assert_eq!(connect_failure(&tls), "invalid peer certificate: UnknownIssuer");
        assert_eq!(strip_os_error("boom (os error 113)"), "boom");
    }

    #[test]
    fn versions_compare_as_numbers() {
        assert!(major_minor("4.9.59").unwrap() < major_minor("4.18.0").unwrap());
        assert_eq!(major_minor("4.19.0-rc.1"), Some((4, 19)));
        assert!(major_minor("4.18.1").unwrap() >= MIN_VERSION);
        assert_eq!(major_minor("garbage"), None);
    }

    #[test]
    fn arch_names_normalise() {
        assert_eq!(normalize_arch("amd64"), "x86_64");
        assert_eq!(normalize_arch("arm64"), "aarch64");
        assert_eq!(normalize_arch("aarch64"), "aarch64");
        assert_eq!(normalize_arch("s390x"), "s390x");
    }

    #[test]
    fn data_urls_decode() {
        assert_eq!(
            decode_data_url("data:text/plain;charset=utf-8;base64,aGVsbG8=").as_deref(),
            Some("hello")
        );
        assert_eq!(decode_data_url("data:,a%20b").as_deref(), Some("a b"));
        assert_eq!(decode_data_url("https://x"), None);
    }

    #[test]
    fn forbidden_message_names_user() {
        assert_eq!(
            user_from_message(
                "secrets \"pull-secret\" is forbidden: User \"dev\" cannot get resource \"secrets\""
            )
            .as_deref(),
            Some("dev")
        );
    }

    #[test]
    fn cidr_matching() {
        let ip = |s: &str| s.parse::<IpAddr>().unwrap();
        assert!(cidr_contains(ip("10.0.0.0"), 8, ip("10.1.2.3")));
        assert!(!cidr_contains(ip("10.0.0.0"), 8, ip("11.0.0.1")));
        assert!(cidr_contains(ip("fd00::"), 64, ip("fd00::5")));
        assert!(!cidr_contains(ip("fd00::"), 64, ip("10.0.0.1")));
    }
}
