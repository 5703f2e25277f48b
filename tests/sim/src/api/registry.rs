//! The permissive CRDs: the OpenShift kinds the seed uses, defined with a schema that keeps
//! every field (`x-kubernetes-preserve-unknown-fields`), for where no public module gives their
//! real CRD (openshift/api's are installed instead wherever they exist, see
//! [`super::real::openshift_crd`]), and the stand-ins of assisted-service's CRDs
//! ([`crate::upstream`]).

use serde_json::{json, Value};

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
