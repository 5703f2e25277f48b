//! The raw objects read from the cluster ([`ClusterObjects`]) and the readers of their JSON that
//! the facts share (a string at a JSON pointer, a Secret's or ConfigMap's key, a data URL).

use base64::Engine;
use serde_json::Value;

use crate::error::{Error, ResourceRef};

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

pub(super) fn str_at<'a>(v: &'a Value, pointer: &str) -> Option<&'a str> {
    v.pointer(pointer)
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
}

pub(super) fn strings_at(v: &Value, pointer: &str) -> Vec<String> {
    v.pointer(pointer)
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(|x| x.as_str().map(String::from)).collect())
        .unwrap_or_default()
}

/// Reads a ConfigMap/Secret data value: `data` (base64 for Secrets) or `stringData`.
pub(super) fn secret_value(secret: &Value, key: &str) -> Option<String> {
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

pub(super) fn cm_value<'a>(cm: &'a Value, key: &str) -> Option<&'a str> {
    cm.pointer("/data")
        .and_then(|d| d.get(key))
        .and_then(Value::as_str)
}

/// Decodes an Ignition `data:` URL (base64 or percent-encoded).
pub(super) fn decode_data_url(url: &str) -> Option<String> {
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

pub(super) fn count_certs(pem: &str) -> usize {
    pem.matches("-----BEGIN CERTIFICATE-----").count()
}

pub(super) fn missing(resource: ResourceRef, objects: &ClusterObjects) -> Error {
    // A required object we could not read is reported with the read's reason.
    if let Some((_, why)) = objects.unreadable.iter().find(|(r, _)| *r == resource) {
        return Error::BadObject {
            resource,
            message: why.clone(),
        };
    }
    Error::NotFound { resource, why: None }
}
