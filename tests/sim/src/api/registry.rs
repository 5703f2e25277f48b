//! The resource types the simulator serves: Kubernetes built-ins, plus one entry per served
//! version of every CustomResourceDefinition (including the permissive OpenShift CRDs created
//! at start-up).

use super::validation::{self, Schema};
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::sync::Arc;

/// One additional printer column (CRD `additionalPrinterColumns`).
#[derive(Debug, Clone)]
pub struct PrinterColumn {
    pub name: String,
    /// integer, number, string, boolean, date.
    pub type_: String,
    pub format: String,
    pub description: String,
    pub priority: i64,
    /// Simple JSONPath such as `.spec.releaseImage` or `.status.conditions[?(@.type=="Ready")].status`.
    pub json_path: String,
}

/// A served resource (one group/version/plural).
#[derive(Debug, Clone)]
pub struct ResourceType {
    pub group: String,
    pub version: String,
    pub kind: String,
    pub list_kind: String,
    pub plural: String,
    pub singular: String,
    pub short_names: Vec<String>,
    pub categories: Vec<String>,
    pub namespaced: bool,
    /// Subresources with their own endpoint: `status`, `approval`.
    pub subresources: Vec<String>,
    /// Verbs of the main resource, as discovery lists them.
    pub verbs: Vec<&'static str>,
    pub schema: Arc<Schema>,
    /// CRD additionalPrinterColumns (None: built-in table or NAME/AGE).
    pub columns: Option<Vec<PrinterColumn>>,
    /// Name of the CRD that defines it (None for built-ins).
    pub crd: Option<String>,
    /// Field selector labels accepted beyond metadata.name/metadata.namespace.
    pub extra_fields: Vec<&'static str>,
    /// The CRD version's `openAPIV3Schema` (defaulting and null pruning); None for built-ins.
    pub raw_schema: Option<Arc<Value>>,
}

impl ResourceType {
    /// `apiVersion` of its objects: `v1` or `group/version`.
    pub fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.clone()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }
    /// Storage key shared by all versions: `group/plural`.
    pub fn key(&self) -> String {
        format!("{}/{}", self.group, self.plural)
    }
    pub fn has_status(&self) -> bool {
        self.subresources.iter().any(|s| s == "status")
    }
}

const ALL_VERBS: &[&str] = &[
    "create",
    "delete",
    "deletecollection",
    "get",
    "list",
    "patch",
    "update",
    "watch",
];

#[allow(clippy::too_many_arguments)]
fn builtin(
    group: &str,
    version: &str,
    kind: &str,
    plural: &str,
    short: &[&str],
    namespaced: bool,
    subresources: &[&str],
    extra_fields: &[&'static str],
) -> ResourceType {
    let schema = validation::builtin_schema(group, version, kind).unwrap_or_else(validation::permissive);
    ResourceType {
        group: group.into(),
        version: version.into(),
        kind: kind.into(),
        list_kind: format!("{kind}List"),
        plural: plural.into(),
        singular: kind.to_lowercase(),
        short_names: short.iter().map(|s| s.to_string()).collect(),
        categories: Vec::new(),
        namespaced,
        subresources: subresources.iter().map(|s| s.to_string()).collect(),
        verbs: ALL_VERBS.to_vec(),
        schema: Arc::new(schema),
        columns: None,
        crd: None,
        extra_fields: extra_fields.to_vec(),
        raw_schema: None,
    }
}

/// The Kubernetes built-in resources the simulator serves.
pub fn builtins() -> Vec<ResourceType> {
    let mut v = vec![
        builtin(
            "",
            "v1",
            "Namespace",
            "namespaces",
            &["ns"],
            false,
            &["status"],
            &["status.phase"],
        ),
        builtin("", "v1", "ConfigMap", "configmaps", &["cm"], true, &[], &[]),
        builtin("", "v1", "Secret", "secrets", &[], true, &[], &["type"]),
        builtin(
            "",
            "v1",
            "Node",
            "nodes",
            &["no"],
            false,
            &["status"],
            &["spec.unschedulable"],
        ),
        builtin(
            "",
            "v1",
            "Pod",
            "pods",
            &["po"],
            true,
            &["status"],
            &["spec.nodeName", "status.phase"],
        ),
        builtin(
            "",
            "v1",
            "PersistentVolumeClaim",
            "persistentvolumeclaims",
            &["pvc"],
            true,
            &["status"],
            &[],
        ),
        builtin(
            "",
            "v1",
            "ServiceAccount",
            "serviceaccounts",
            &["sa"],
            true,
            &[],
            &[],
        ),
        builtin(
            "",
            "v1",
            "Event",
            "events",
            &["ev"],
            true,
            &[],
            &[
                "involvedObject.kind",
                "involvedObject.name",
                "involvedObject.namespace",
                "involvedObject.uid",
                "reason",
                "type",
            ],
        ),
        builtin(
            "certificates.k8s.io",
            "v1",
            "CertificateSigningRequest",
            "certificatesigningrequests",
            &["csr"],
            false,
            &["status", "approval"],
            &["spec.signerName"],
        ),
        builtin(
            "apiextensions.k8s.io",
            "v1",
            "CustomResourceDefinition",
            "customresourcedefinitions",
            &["crd", "crds"],
            false,
            &["status"],
            &[],
        ),
    ];
    let mut ssar = builtin(
        "authorization.k8s.io",
        "v1",
        "SelfSubjectAccessReview",
        "selfsubjectaccessreviews",
        &[],
        false,
        &[],
        &[],
    );
    ssar.verbs = vec!["create"];
    v.push(ssar);
    // `kubectl auth can-i --list`.
    let mut ssrr = builtin(
        "authorization.k8s.io",
        "v1",
        "SelfSubjectRulesReview",
        "selfsubjectrulesreviews",
        &[],
        false,
        &[],
        &[],
    );
    ssrr.verbs = vec!["create"];
    v.push(ssrr);
    // `kubectl auth whoami`.
    let mut ssr = builtin(
        "authentication.k8s.io",
        "v1",
        "SelfSubjectReview",
        "selfsubjectreviews",
        &[],
        false,
        &[],
        &[],
    );
    ssr.verbs = vec!["create"];
    v.push(ssr);
    v
}

/// (group, version, kind, plural, short names, status subresource).
pub type PermissiveKind = (
    &'static str,
    &'static str,
    &'static str,
    &'static str,
    &'static [&'static str],
    bool,
);

/// The OpenShift kinds served from the start with a permissive schema, as CRD objects:
/// (group, version, kind, plural, short names, status subresource).
pub const PERMISSIVE_OPENSHIFT: &[PermissiveKind] = &[
    (
        "config.openshift.io",
        "v1",
        "ClusterVersion",
        "clusterversions",
        &[],
        true,
    ),
    (
        "config.openshift.io",
        "v1",
        "Infrastructure",
        "infrastructures",
        &[],
        true,
    ),
    ("config.openshift.io", "v1", "DNS", "dnses", &[], true),
    ("config.openshift.io", "v1", "Network", "networks", &[], true),
    ("config.openshift.io", "v1", "Proxy", "proxies", &[], true),
    ("config.openshift.io", "v1", "Image", "images", &[], true),
    (
        "config.openshift.io",
        "v1",
        "ImageDigestMirrorSet",
        "imagedigestmirrorsets",
        &["idms"],
        true,
    ),
    (
        "config.openshift.io",
        "v1",
        "ImageTagMirrorSet",
        "imagetagmirrorsets",
        &["itms"],
        true,
    ),
    ("config.openshift.io", "v1", "Ingress", "ingresses", &[], true),
    (
        "operator.openshift.io",
        "v1alpha1",
        "ImageContentSourcePolicy",
        "imagecontentsourcepolicies",
        &[],
        false,
    ),
    (
        "machineconfiguration.openshift.io",
        "v1",
        "MachineConfig",
        "machineconfigs",
        &["mc"],
        false,
    ),
    (
        "machineconfiguration.openshift.io",
        "v1",
        "MachineConfigPool",
        "machineconfigpools",
        &["mcp"],
        true,
    ),
];

/// A permissive CRD object (cluster-scoped, `x-kubernetes-preserve-unknown-fields` everywhere)
/// for one entry of [`PERMISSIVE_OPENSHIFT`].
pub fn permissive_crd(
    group: &str,
    version: &str,
    kind: &str,
    plural: &str,
    short: &[&str],
    status: bool,
) -> Value {
    let mut v = json!({
        "name": version, "served": true, "storage": true,
        "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}},
    });
    if status {
        v["subresources"] = json!({"status": {}});
    }
    json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": format!("{plural}.{group}")},
        "spec": {
            "group": group,
            "names": {"kind": kind, "listKind": format!("{kind}List"), "plural": plural,
                      "singular": kind.to_lowercase(), "shortNames": short},
            "scope": "Cluster",
            "versions": [v],
        }
    })
}

/// The resource types a CRD object serves (one per served version). Errors are 422 causes'
/// texts: `(field, message)`.
pub fn types_from_crd(crd: &Value) -> Result<Vec<ResourceType>, Vec<(String, String)>> {
    let spec = &crd["spec"];
    let mut errs = Vec::new();
    let s = |v: &Value| v.as_str().unwrap_or("").to_string();
    let group = s(&spec["group"]);
    let names = &spec["names"];
    let plural = s(&names["plural"]);
    let kind = s(&names["kind"]);
    if group.is_empty() {
        errs.push(("spec.group".to_string(), "Required value".to_string()));
    }
    if plural.is_empty() {
        errs.push(("spec.names.plural".into(), "Required value".into()));
    }
    if kind.is_empty() {
        errs.push(("spec.names.kind".into(), "Required value".into()));
    }
    let name = s(&crd["metadata"]["name"]);
    if !plural.is_empty() && !group.is_empty() && name != format!("{plural}.{group}") {
        errs.push((
            "metadata.name".into(),
            format!("Invalid value: \"{name}\": must be spec.names.plural+\".\"+spec.group"),
        ));
    }
    let scope = s(&spec["scope"]);
    if scope != "Namespaced" && scope != "Cluster" {
        errs.push((
            "spec.scope".into(),
            format!("Unsupported value: \"{scope}\": supported values: \"Cluster\", \"Namespaced\""),
        ));
    }
    let versions = spec["versions"].as_array().cloned().unwrap_or_default();
    if versions.is_empty() {
        errs.push((
            "spec.versions".into(),
            "Invalid value: null: must have exactly one version marked as storage version".into(),
        ));
    }
    if !errs.is_empty() {
        return Err(errs);
    }
    let list_kind = names["listKind"]
        .as_str()
        .map(str::to_string)
        .unwrap_or_else(|| format!("{kind}List"));
    let singular = names["singular"]
        .as_str()
        .map(str::to_string)
        .unwrap_or_else(|| kind.to_lowercase());
    let strs = |v: &Value| -> Vec<String> {
        v.as_array()
            .map(|a| a.iter().filter_map(|x| x.as_str().map(str::to_string)).collect())
            .unwrap_or_default()
    };
    let mut out = Vec::new();
    for v in versions {
        if v["served"].as_bool() != Some(true) {
            continue;
        }
        let schema = match v.pointer("/schema/openAPIV3Schema") {
            Some(sch) if sch.is_object() => validation::schema_from_crd_version(sch),
            _ => validation::permissive(),
        };
        let mut subresources = Vec::new();
        if v.pointer("/subresources/status").is_some() {
            subresources.push("status".to_string());
        }
        let columns = v["additionalPrinterColumns"].as_array().map(|cols| {
            cols.iter()
                .map(|c| PrinterColumn {
                    name: s(&c["name"]),
                    type_: s(&c["type"]),
                    format: s(&c["format"]),
                    description: s(&c["description"]),
                    priority: c["priority"].as_i64().unwrap_or(0),
                    json_path: s(&c["jsonPath"]),
                })
                .collect()
        });
        out.push(ResourceType {
            group: group.clone(),
            version: s(&v["name"]),
            kind: kind.clone(),
            list_kind: list_kind.clone(),
            plural: plural.clone(),
            singular: singular.clone(),
            short_names: strs(&names["shortNames"]),
            categories: strs(&names["categories"]),
            namespaced: scope == "Namespaced",
            subresources,
            verbs: ALL_VERBS.to_vec(),
            schema: Arc::new(schema),
            columns,
            crd: Some(name.clone()),
            extra_fields: Vec::new(),
            raw_schema: v
                .pointer("/schema/openAPIV3Schema")
                .filter(|s| s.is_object())
                .cloned()
                .map(Arc::new),
        });
    }
    Ok(out)
}

/// All served types, indexed for routing.
#[derive(Default, Clone)]
pub struct Registry {
    /// (group, version, plural) → type.
    pub by_gvr: BTreeMap<(String, String, String), Arc<ResourceType>>,
}

impl Registry {
    pub fn add(&mut self, t: ResourceType) {
        self.by_gvr.insert(
            (t.group.clone(), t.version.clone(), t.plural.clone()),
            Arc::new(t),
        );
    }
    /// Removes every type defined by the CRD `crd_name`.
    pub fn remove_crd(&mut self, crd_name: &str) {
        self.by_gvr.retain(|_, t| t.crd.as_deref() != Some(crd_name));
    }
    pub fn get(&self, group: &str, version: &str, plural: &str) -> Option<Arc<ResourceType>> {
        self.by_gvr
            .get(&(group.to_string(), version.to_string(), plural.to_string()))
            .cloned()
    }
    /// Any version of `group/plural` (for the storage key's metadata).
    pub fn any_version(&self, group: &str, plural: &str) -> Option<Arc<ResourceType>> {
        self.by_gvr
            .values()
            .find(|t| t.group == group && t.plural == plural)
            .cloned()
    }
    /// Type of an object by its apiVersion and kind.
    pub fn by_kind(&self, api_version: &str, kind: &str) -> Option<Arc<ResourceType>> {
        let (g, v) = match api_version.split_once('/') {
            Some((g, v)) => (g, v),
            None => ("", api_version),
        };
        self.by_gvr
            .values()
            .find(|t| t.group == g && t.version == v && t.kind == kind)
            .cloned()
    }
    /// group → versions (sorted newest-looking first: v1 before v1beta1 before v1alpha1).
    pub fn groups(&self) -> BTreeMap<String, Vec<String>> {
        let mut m: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for t in self.by_gvr.values() {
            let e = m.entry(t.group.clone()).or_default();
            if !e.contains(&t.version) {
                e.push(t.version.clone());
            }
        }
        for vs in m.values_mut() {
            vs.sort_by_key(|v| version_priority(v));
        }
        m
    }
    pub fn in_group_version(&self, group: &str, version: &str) -> Vec<Arc<ResourceType>> {
        self.by_gvr
            .values()
            .filter(|t| t.group == group && t.version == version)
            .cloned()
            .collect()
    }
}

/// Kubernetes version ordering: GA (higher major first), then beta, then alpha.
fn version_priority(v: &str) -> (u8, i64, i64) {
    let rest = v.strip_prefix('v').unwrap_or(v);
    let num: String = rest.chars().take_while(|c| c.is_ascii_digit()).collect();
    let major: i64 = num.parse().unwrap_or(0);
    let tail = &rest[num.len()..];
    if tail.is_empty() {
        (0, -major, 0)
    } else if let Some(b) = tail.strip_prefix("beta") {
        (1, -major, -b.parse::<i64>().unwrap_or(0))
    } else if let Some(a) = tail.strip_prefix("alpha") {
        (2, -major, -a.parse::<i64>().unwrap_or(0))
    } else {
        (3, 0, 0)
    }
}

/// Structural defaulting as apiextensions-apiserver does it before validation
/// (`pkg/apiserver/schema/defaulting`: `Default` and `PruneNonNullableNullsWithoutDefaults`):
/// a missing property with a `default` gets it; a `null` property that is not `nullable` is
/// replaced by its default, or dropped when it has none. Recurses through properties,
/// `additionalProperties` and `items`. `metadata` at the root is left alone.
pub fn apply_defaults(schema: &Value, v: &mut Value, root: bool) {
    match v {
        Value::Object(m) => {
            if let Some(props) = schema["properties"].as_object() {
                for (k, ps) in props {
                    if root && (k == "metadata" || k == "apiVersion" || k == "kind") {
                        continue;
                    }
                    let nullable = ps["nullable"] == true;
                    match m.get(k) {
                        None => {
                            if let Some(d) = ps.get("default") {
                                m.insert(k.clone(), d.clone());
                            }
                        }
                        Some(Value::Null) if !nullable => match ps.get("default") {
                            Some(d) => {
                                m.insert(k.clone(), d.clone());
                            }
                            None => {
                                m.remove(k);
                            }
                        },
                        _ => {}
                    }
                }
                for (k, val) in m.iter_mut() {
                    if root && k == "metadata" {
                        continue;
                    }
                    if let Some(ps) = props.get(k) {
                        apply_defaults(ps, val, false);
                    }
                }
            } else if let Some(ap) = schema.get("additionalProperties").filter(|a| a.is_object()) {
                let nullable = ap["nullable"] == true;
                if !nullable {
                    m.retain(|_, val| !val.is_null());
                }
                for val in m.values_mut() {
                    apply_defaults(ap, val, false);
                }
            }
        }
        Value::Array(a) => {
            if let Some(items) = schema.get("items").filter(|i| i.is_object()) {
                for val in a.iter_mut() {
                    apply_defaults(items, val, false);
                }
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_and_null_pruning() {
        let schema = json!({"type": "object", "properties": {"spec": {"type": "object", "properties": {
            "a": {"type": "string", "default": "d"},
            "b": {"type": "array", "items": {"type": "string"}},
            "c": {"type": "string", "nullable": true},
            "e": {"type": "integer", "default": 3},
        }}}});
        let mut o = json!({"metadata": {"name": "x"}, "spec": {"b": null, "c": null, "e": null}});
        apply_defaults(&schema, &mut o, true);
        assert_eq!(
            o,
            json!({"metadata": {"name": "x"}, "spec": {"a": "d", "c": null, "e": 3}})
        );
    }
}
