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
//! | `multiArch` | false | `ClusterVersion.spec.desiredUpdate.architecture: Multi` (as `oc adm upgrade --to-multi-arch` leaves it; the Default feature set has no `status.desired.architecture`), `multi` payload, both x86_64 and aarch64 in the stream |
//! | `multiArchInApi` | true | with `multiArch`: whether the ClusterVersion says so (`spec.desiredUpdate`); false plays a Default-feature-set cluster installed straight from the multi payload, which only its release image's manifest list tells |
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
    #[serde(deserialize_with = "strict_bool")]
    pub sno: bool,
    /// Control-plane architecture, Go spelling as in `Node.status.nodeInfo.architecture` (amd64, arm64).
    pub architecture: String,
    /// `ClusterVersion.spec.desiredUpdate.architecture: Multi` (multi-arch release payload).
    #[serde(deserialize_with = "strict_bool")]
    pub multi_arch: bool,
    /// With `multi_arch`: the ClusterVersion says so (default). False: only the payload's
    /// manifest list does.
    #[serde(deserialize_with = "strict_bool")]
    pub multi_arch_in_api: bool,
    /// FIPS cluster: `99-worker-fips` MachineConfig with `fips: true`.
    #[serde(deserialize_with = "strict_bool")]
    pub fips: bool,
    /// An upgrade to this version is in progress (a Partial history entry on top, desired = it).
    pub upgrade_to: Option<String>,
    /// Dual-stack: IPv6 machine, cluster and service networks and node addresses too.
    #[serde(deserialize_with = "strict_bool")]
    pub dual_stack: bool,
    /// Machine networks (CIDRs). Empty on platforms none/external unless set.
    pub machine_networks: Option<Vec<String>>,
    /// Disconnected: ImageDigestMirrorSet to `mirror_registry`, an additionalTrustedCA, release image from the mirror.
    #[serde(deserialize_with = "strict_bool")]
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
            multi_arch_in_api: true,
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

/// A scenario the simulator refuses (`up` exits 3 with it): the message names the file and
/// the key, e.g. `scenario s.yaml: architecture: unsupported value "sparc" ...`.
#[derive(Debug)]
pub struct ScenarioError(pub String);

impl std::fmt::Display for ScenarioError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for ScenarioError {}

/// A YAML boolean only: `sno: "yes"` or `sno: 1` is an error naming the key, not true.
fn strict_bool<'de, D: serde::Deserializer<'de>>(d: D) -> Result<bool, D::Error> {
    struct V;
    impl serde::de::Visitor<'_> for V {
        type Value = bool;
        fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
            f.write_str("a boolean (true or false)")
        }
        fn visit_bool<E: serde::de::Error>(self, v: bool) -> Result<bool, E> {
            Ok(v)
        }
    }
    d.deserialize_any(V)
}

/// Architectures the seed and the base ISOs know (Go and RPM spellings).
pub const ARCHITECTURES: &[&str] = &["amd64", "x86_64", "arm64", "aarch64", "ppc64le", "s390x"];

/// Whether `s` is an IPv4 or IPv6 CIDR (`address/prefix`, prefix within the family's width).
pub fn is_cidr(s: &str) -> bool {
    let Some((addr, len)) = s.split_once('/') else {
        return false;
    };
    let Ok(len) = len.parse::<u8>() else { return false };
    match addr.parse::<std::net::IpAddr>() {
        Ok(std::net::IpAddr::V4(_)) => len <= 32,
        Ok(std::net::IpAddr::V6(_)) => len <= 128,
        Err(_) => false,
    }
}

impl Scenario {
    /// Reads and checks a scenario file ([`Scenario::check`]). Errors are [`ScenarioError`]s
    /// naming the file and the offending key.
    pub fn load(path: &std::path::Path) -> anyhow::Result<Scenario> {
        let fail = |m: String| anyhow::Error::new(ScenarioError(format!("scenario {}: {m}", path.display())));
        let text = std::fs::read_to_string(path).map_err(|e| fail(format!("cannot read it: {e}")))?;
        let s: Scenario = serde_saphyr::from_str(&text).map_err(|e| {
            // serde-saphyr's message starts with its own "error: "; main adds one already.
            let m = e.to_string();
            let m = m.strip_prefix("error: ").unwrap_or(&m).to_string();
            // Name the key of the line the error points at (`sno: line 1 column 1: invalid type`).
            let key = m
                .strip_prefix("line ")
                .and_then(|r| r.split(|c: char| !c.is_ascii_digit()).next())
                .and_then(|n| n.parse::<usize>().ok())
                .and_then(|n| text.lines().nth(n.saturating_sub(1)))
                .and_then(|l| {
                    l.trim_start_matches([' ', '-'])
                        .split_once(':')
                        .map(|(k, _)| k.trim().to_string())
                })
                .filter(|k| !k.is_empty() && !m.contains(&format!("`{k}`")));
            fail(match key {
                Some(k) => format!("{k}: {m}"),
                None => m,
            })
        })?;
        s.check().map_err(fail)?;
        Ok(s)
    }

    /// Value checks serde cannot do: `architecture` known, `machineNetworks` CIDRs,
    /// `objects` each with `apiVersion`, `kind` and `metadata.name`, `objectsDir` a directory,
    /// `omit` entries of the form `resource` (all of them), `resource/name` or
    /// `resource/namespace/name`. Whether an
    /// `omit` entry names a seeded object is checked by `up` (it needs the seed).
    /// Errors: `<key>: <what is wrong>`.
    pub fn check(&self) -> Result<(), String> {
        if !ARCHITECTURES.contains(&self.architecture.as_str()) {
            return Err(format!(
                "architecture: unsupported value {:?}; supported: {}",
                self.architecture,
                ARCHITECTURES.join(", ")
            ));
        }
        for (i, n) in self.machine_networks.iter().flatten().enumerate() {
            if !is_cidr(n) {
                return Err(format!(
                    "machineNetworks[{i}]: {n:?} is not a CIDR such as 192.168.111.0/24"
                ));
            }
        }
        for (i, o) in self.objects.iter().enumerate() {
            let missing: Vec<&str> = [
                ("apiVersion", &o["apiVersion"]),
                ("kind", &o["kind"]),
                ("metadata.name", &o["metadata"]["name"]),
            ]
            .into_iter()
            .filter(|(_, v)| v.as_str().is_none_or(str::is_empty))
            .map(|(k, _)| k)
            .collect();
            if !missing.is_empty() {
                return Err(format!("objects[{i}]: {} required", missing.join(", ")));
            }
        }
        if let Some(d) = &self.objects_dir {
            if !d.is_dir() {
                return Err(format!("objectsDir: {} is not a directory", d.display()));
            }
        }
        for (i, o) in self.omit.iter().enumerate() {
            let parts: Vec<&str> = o.split('/').collect();
            if parts.len() > 3 || parts.iter().any(|p| p.is_empty()) {
                return Err(format!(
                    "omit[{i}]: {o:?} is not resource, resource/name or resource/namespace/name"
                ));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn load_text(text: &str) -> anyhow::Result<Scenario> {
        let p = std::env::temp_dir().join(format!(
            "scenario-test-{}-{}.yaml",
            std::process::id(),
            text.len()
        ));
        std::fs::write(&p, text).unwrap();
        let r = Scenario::load(&p);
        let _ = std::fs::remove_file(&p);
        r
    }

    #[track_caller]
    fn refused(text: &str, key: &str) {
        let e = load_text(text).unwrap_err();
        assert!(e.downcast_ref::<ScenarioError>().is_some(), "{e:#}");
        let m = format!("{e:#}");
        assert!(m.contains(key), "{text}: {m}");
        assert!(!m.contains("error:"), "one prefix only (main adds it): {m}");
    }

    #[test]
    fn bad_values_are_refused_naming_the_key() {
        refused(
            "architecture: sparc\n",
            "architecture: unsupported value \"sparc\"",
        );
        refused(
            "objects: [{kind: ConfigMap}]\n",
            "objects[0]: apiVersion, metadata.name required",
        );
        refused(
            "objectsDir: /nonexistent\n",
            "objectsDir: /nonexistent is not a directory",
        );
        refused("sno: \"yes\"\n", "sno: line 1");
        refused("machineNetworks: [\"not-a-cidr\"]\n", "machineNetworks[0]");
        refused("omit: [\"a/b/c/d\"]\n", "omit[0]");
        refused("nmae: x\n", "nmae");
        let s = load_text("sno: true\narchitecture: arm64\nmachineNetworks: [10.0.0.0/16, \"fd00::/64\"]\nomit: [nodes/master-2]\n").unwrap();
        assert!(s.sno);
        assert!(!is_cidr("10.0.0.0/33") && !is_cidr("10.0.0.0") && is_cidr("::/0"));
    }
}
