//! Scenario files: what the simulated cluster looks like.
//!
//! A scenario is a YAML document; every key is optional and the defaults describe an
//! OpenShift 4.18 compact (three control-plane nodes) bare-metal cluster named `ostest`
//! in `example.com`, on the machine network 192.168.111.0/24 (API on .5, masters .20-.22).
//! Unknown keys are refused (exit 3 from `up`), so a typo in a test's scenario is loud.
//!
//! Keys (camelCase in YAML; defaults in brackets; what they change in the seed, see
//! [`crate::seed`]):
//!
//! | key | default | effect |
//! |---|---|---|
//! | `name`, `baseDomain` | `ostest`, `example.com` | API names `api.<name>.<baseDomain>` / `api-int...`, DNS `spec.baseDomain`, install-config |
//! | `clusterId` | fixed UUID | `ClusterVersion.spec.clusterID` |
//! | `version` | `4.18.12` | Completed history entry, `coreos-bootimages` `releaseVersion`, kubelet `v1.(minor+13).6` |
//! | `releaseImage` | by digest from quay.io (mirror when disconnected); with `up --registry` the pushed payload's true digest (`ADDR/ocp/release@…`, or `quay.io/openshift-release-dev/ocp-release@…` when disconnected) | current release image |
//! | `platform` | `BareMetal` | Infrastructure platform (`BareMetal`, `None`, `External`, `VSphere`, ...; case-insensitive) |
//! | `sno` | false | one node `master-0`, topology `SingleReplica` |
//! | `architecture` | `amd64` | Node arch labels and `nodeInfo.architecture`; the stream lists this arch's ISO |
//! | `multiArch` | false | `ClusterVersion.status.desired.architecture: Multi`, `multi` payload, both x86_64 and aarch64 in the stream |
//! | `fips` | false | `99-worker-fips`/`99-master-fips` with `fips: true` (absent otherwise, as the installer does) |
//! | `upgradeTo` | none | Partial history entry on top, `desired` = that version |
//! | `dualStack` | false | IPv6 machine (`fd2e:6f44:5dd8:c956::/120`), cluster (`fd01::/48`) and service (`fd02::/112`) networks, node IPv6 addresses |
//! | `machineNetworks` | `[192.168.111.0/24]`; none on None/External | Infrastructure `platformSpec.baremetal.machineNetworks` and install-config |
//! | `disconnected` | false | ImageDigestMirrorSet, `Image.spec.additionalTrustedCA` → ConfigMap `registry-ca`, mirror auth in the pull secret, release image from the mirror |
//! | `mirrorRegistry` | `registry.example.com:5000`; with `up --registry` its ADDR | mirror host:port (`<mirror>/ocp4/openshift4`) |
//! | `proxy` | none | `{httpProxy, httpsProxy, noProxy, trustedCa}`: Proxy spec/status with the computed noProxy; `trustedCa` names a ConfigMap in openshift-config holding the simulator CA |
//! | `sshKey` | fake ed25519 key | `99-{worker,master}-ssh`, install-config |
//! | `ntpServers` | `[192.168.111.1]` | `50-{workers,masters}-chrony-configuration`; `[]` = none |
//! | `omit` | `[]` | `resource/namespace/name` or `resource/name` (plural resource, e.g. `configmaps/openshift-machine-config-operator/coreos-bootimages`, `machineconfigs/99-worker-ssh`, `nodes/master-2`) |
//! | `forbidden` | `[]` | 403 switches, see [`ForbiddenRule`] |
//! | `objects` | `[]` | extra objects; one with the same group, kind, namespace and name replaces the seeded one; `$TEST_IMAGE` → release image |
//! | `objectsDir` | none | every `*.yaml` (multi-document) file of the directory, loaded like `objects` after them; Secret `stringData` becomes `data` |

use serde::Deserialize;

/// The whole scenario document. See the module docs for the defaults.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct Scenario {
    /// Cluster name (first label after `api.` in the API DNS name).
    pub name: String,
    /// Base domain, e.g. `example.com`.
    pub base_domain: String,
    /// `ClusterVersion.spec.clusterID`.
    pub cluster_id: String,
    /// OpenShift version of the last Completed history entry, e.g. `4.18.12`.
    pub version: String,
    /// Release image pull spec of that version (default: by digest,
    /// `quay.io/openshift-release-dev/ocp-release@sha256:<digest>`, or
    /// `<mirror_registry>/ocp4/openshift4@sha256:<digest>` when disconnected; the digest is
    /// [`crate::seed::release_digest`] of version and architecture).
    pub release_image: Option<String>,
    /// `Infrastructure.status.platformStatus.type`: BareMetal, None, External, VSphere, AWS, ...
    pub platform: String,
    /// Single-node OpenShift: one control-plane node, topology SingleReplica.
    pub sno: bool,
    /// Control-plane architecture, Go spelling as in `Node.status.nodeInfo.architecture` (amd64, arm64).
    pub architecture: String,
    /// `ClusterVersion.status.desired.architecture: Multi` (multi-arch release payload).
    pub multi_arch: bool,
    /// FIPS cluster: `99-worker-fips` MachineConfig with `fips: true`.
    pub fips: bool,
    /// An upgrade to this version is in progress (a Partial history entry on top, desired = it).
    pub upgrade_to: Option<String>,
    /// Dual-stack: IPv6 machine, cluster and service networks and node addresses too.
    pub dual_stack: bool,
    /// Machine networks (CIDRs). Empty on platforms none/external unless set.
    pub machine_networks: Option<Vec<String>>,
    /// Disconnected: ImageDigestMirrorSet to `mirror_registry`, an additionalTrustedCA, release image from the mirror.
    pub disconnected: bool,
    /// Mirror registry host:port used when `disconnected` (default registry.example.com:5000).
    pub mirror_registry: Option<String>,
    /// Cluster-wide proxy (Proxy/cluster spec and status).
    pub proxy: Option<ProxySettings>,
    /// Seeded objects to leave out, as `resource/namespace/name` or `resource/name` for
    /// cluster-scoped ones, e.g. `configmaps/openshift-machine-config-operator/coreos-bootimages`.
    pub omit: Vec<String>,
    /// Requests refused with 403 Forbidden, for every user (a test switch).
    pub forbidden: Vec<ForbiddenRule>,
    /// Extra objects (any kind the simulator serves), created after the seed; same name replaces.
    pub objects: Vec<serde_json::Value>,
    /// A directory of `*.yaml` object files loaded like `objects` (e.g. upstream
    /// node-joiner-testdata/setup/default); `$TEST_IMAGE` in them becomes the release image.
    pub objects_dir: Option<std::path::PathBuf>,
    /// SSH public key of the `core` user (`99-worker-ssh`, `99-master-ssh`, install-config);
    /// default: a well-formed fake ed25519 key.
    pub ssh_key: Option<String>,
    /// NTP servers written into chrony.conf by `50-{masters,workers}-chrony-configuration`;
    /// default `[192.168.111.1]`; an empty list means no chrony MachineConfigs.
    pub ntp_servers: Option<Vec<String>>,
}

/// Proxy settings, as in `Proxy/cluster`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ProxySettings {
    pub http_proxy: Option<String>,
    pub https_proxy: Option<String>,
    pub no_proxy: Option<String>,
    /// Name of a ConfigMap in openshift-config holding `ca-bundle.crt` (Proxy `spec.trustedCA.name`).
    pub trusted_ca: Option<String>,
}

/// One Forbidden switch. Empty fields match anything.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct ForbiddenRule {
    /// Plural resource name, e.g. `secrets`, `certificatesigningrequests`.
    pub resource: String,
    pub namespace: Option<String>,
    pub name: Option<String>,
    /// Kubernetes verbs (get, list, watch, create, update, patch, delete); empty = all.
    pub verbs: Vec<String>,
    /// Subresource, e.g. `approval`; None matches the main resource only.
    pub subresource: Option<String>,
}

impl Default for Scenario {
    fn default() -> Self {
        Scenario {
            name: "ostest".into(),
            base_domain: "example.com".into(),
            cluster_id: "6a9f4b7e-3d2c-4e1f-9b8a-0c5d7e2f1a34".into(),
            version: "4.18.12".into(),
            release_image: None,
            platform: "BareMetal".into(),
            sno: false,
            architecture: "amd64".into(),
            multi_arch: false,
            fips: false,
            upgrade_to: None,
            dual_stack: false,
            machine_networks: None,
            disconnected: false,
            mirror_registry: None,
            proxy: None,
            omit: Vec::new(),
            forbidden: Vec::new(),
            objects: Vec::new(),
            objects_dir: None,
            ssh_key: None,
            ntp_servers: None,
        }
    }
}

impl Scenario {
    /// Reads a scenario file. Errors name the file and the offending key.
    pub fn load(path: &std::path::Path) -> anyhow::Result<Scenario> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| anyhow::anyhow!("cannot read scenario {}: {e}", path.display()))?;
        let s: Scenario = serde_saphyr::from_str(&text)
            .map_err(|e| anyhow::anyhow!("scenario {}: {e}", path.display()))?;
        Ok(s)
    }
}
