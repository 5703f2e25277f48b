//! The facts of a cluster as add-nodes, approve and info use them ([`ClusterModel`]), and what
//! `info` says of facts it could not read ([`Unreadable`]). Shapes only, and the questions asked of
//! a built model; [`super::facts`] builds it.

use std::collections::BTreeMap;

use serde::Serialize;
use serde_json::Value;

use crate::error::ResourceRef;

/// Oldest supported OpenShift release (major, minor): the add-nodes contract with three
/// signed tokens exists from 4.18 on (docs/design.md "What the cluster tells us").
pub const MIN_VERSION: (u64, u64) = (4, 18);

/// Platforms (`Infrastructure.status.platformStatus.type`) where day-2 nodes can be added
/// with a booted ISO: the agent-based installer's platforms.
pub const SUPPORTED_PLATFORMS: [&str; 4] = ["BareMetal", "None", "External", "VSphere"];

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
    /// The API and ingress VIPs the cluster's keepalived serves
    /// (`Infrastructure.status.platformStatus.<platform>.apiServerInternalIPs`/`ingressIPs`;
    /// empty on platforms without them): no new host may take one.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub api_vips: Vec<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub ingress_vips: Vec<String>,
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

impl ClusterModel {
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
pub(super) fn check_base_iso(stream: &Value, arch: &str) -> std::result::Result<BaseIso, String> {
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

pub(super) fn base_iso_for(stream: &Value, arch: &str) -> Option<BaseIso> {
    let metal = stream.pointer(&format!("/architectures/{arch}/artifacts/metal"))?;
    let disk = metal.pointer("/formats/iso/disk")?;
    Some(BaseIso {
        architecture: arch.to_string(),
        location: disk["location"].as_str()?.to_string(),
        sha256: disk["sha256"].as_str()?.to_ascii_lowercase(),
        release: metal["release"].as_str().map(String::from),
    })
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
