//! The permissions add-nodes, approve and monitor need, and which of them the user lacks,
//! asked one by one with SelfSubjectAccessReviews (read-only: the review is not stored).

use k8s_openapi::api::authorization::v1::{
    ResourceAttributes, SelfSubjectAccessReview, SelfSubjectAccessReviewSpec,
};
use kube::api::{Api, PostParams};
use serde::Serialize;

use crate::error::{Error, ResourceRef, Result};
use crate::kube_flags::KubeTarget;

/// Namespace where agent-day2 keeps its batch records and secrets.
pub const OWN_NAMESPACE: &str = "openshift-agent-day2";

/// One permission: a verb on a resource (optionally in a namespace, with a name).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Permission {
    /// Kubernetes verb: get, list, watch, create, update, patch, approve.
    pub verb: String,
    /// API group (`""` for core).
    pub group: String,
    /// Plural resource, e.g. `secrets`, `signers`.
    pub resource: String,
    /// Subresource, e.g. `approval`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub subresource: Option<String>,
    /// Namespace; None for cluster-scoped or all namespaces.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    /// Object name (for signers: the signer name).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Commands that need it: info, add-nodes, approve, monitor.
    pub needed_by: Vec<String>,
}

impl Permission {
    /// `get secrets/pull-secret -n openshift-config`-style rendering, as `oc auth can-i` takes it.
    pub fn describe(&self) -> String {
        let mut s = format!("{} {}", self.verb, self.resource);
        if !self.group.is_empty() {
            s.push('.');
            s.push_str(&self.group);
        }
        if let Some(sub) = &self.subresource {
            s.push('/');
            s.push_str(sub);
        }
        if let Some(n) = &self.name {
            s.push('/');
            s.push_str(n);
        }
        if let Some(ns) = &self.namespace {
            s.push_str(" -n ");
            s.push_str(ns);
        }
        s
    }
}

fn p(
    verb: &str,
    group: &str,
    resource: &str,
    ns: Option<&str>,
    name: Option<&str>,
    by: &[&str],
) -> Permission {
    Permission {
        verb: verb.into(),
        group: group.into(),
        resource: resource.into(),
        subresource: None,
        namespace: ns.map(String::from),
        name: name.map(String::from),
        needed_by: by.iter().map(|s| s.to_string()).collect(),
    }
}

/// Every permission the plugin's commands need (design.md "What the cluster tells us",
/// "Verifying kubelet CSRs", "monitor"). Reads are needed by info and add-nodes.
pub fn required_permissions() -> Vec<Permission> {
    const R: &[&str] = &["info", "add-nodes"];
    const ADD: &[&str] = &["add-nodes"];
    const APP: &[&str] = &["approve"];
    const MON: &[&str] = &["monitor", "approve"];
    let cfg = "config.openshift.io";
    let mut v = vec![
        p("get", cfg, "clusterversions", None, Some("version"), R),
        p("get", cfg, "infrastructures", None, Some("cluster"), R),
        p("get", cfg, "proxies", None, Some("cluster"), R),
        p("get", cfg, "images", None, Some("cluster"), R),
        p("get", cfg, "networks", None, Some("cluster"), R),
        p("list", cfg, "imagedigestmirrorsets", None, None, R),
        p("list", cfg, "imagetagmirrorsets", None, None, R),
        p(
            "list",
            "operator.openshift.io",
            "imagecontentsourcepolicies",
            None,
            None,
            R,
        ),
        p(
            "get",
            "",
            "secrets",
            Some("openshift-config"),
            Some("pull-secret"),
            R,
        ),
        p(
            "get",
            "",
            "secrets",
            Some("openshift-machine-api"),
            Some("worker-user-data-managed"),
            R,
        ),
        p("get", "", "configmaps", Some("openshift-config"), None, R),
        p(
            "get",
            "",
            "configmaps",
            Some("openshift-machine-config-operator"),
            Some("coreos-bootimages"),
            R,
        ),
        p(
            "get",
            "",
            "configmaps",
            Some("kube-system"),
            Some("cluster-config-v1"),
            R,
        ),
        p(
            "get",
            "machineconfiguration.openshift.io",
            "machineconfigs",
            None,
            None,
            R,
        ),
        p(
            "list",
            "",
            "nodes",
            None,
            None,
            &["info", "add-nodes", "approve", "monitor"],
        ),
        p("create", "", "namespaces", None, None, ADD),
    ];
    for res in ["secrets", "configmaps"] {
        for verb in ["create", "get", "update"] {
            v.push(p(
                verb,
                "",
                res,
                Some(OWN_NAMESPACE),
                None,
                &["add-nodes", "approve", "monitor"],
            ));
        }
    }
    let csr = "certificates.k8s.io";
    for verb in ["list", "watch", "get"] {
        v.push(p(verb, csr, "certificatesigningrequests", None, None, MON));
    }
    let mut approval = p("update", csr, "certificatesigningrequests", None, None, APP);
    approval.subresource = Some("approval".into());
    v.push(approval);
    for signer in [
        "kubernetes.io/kube-apiserver-client-kubelet",
        "kubernetes.io/kubelet-serving",
    ] {
        v.push(p("approve", csr, "signers", None, Some(signer), APP));
    }
    v.push(p("watch", "", "nodes", None, None, MON));
    v.push(p("get", "", "nodes", None, None, MON));
    v.push(p("patch", "", "nodes", None, None, &["monitor"]));
    v
}

/// Outcome of the permission check.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PermissionReport {
    /// Number of permissions asked about.
    pub checked: usize,
    /// Those the API server said no to.
    pub missing: Vec<Permission>,
    /// Set when the check itself could not run (e.g. SelfSubjectAccessReview forbidden).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// Asks the API server about every [`required_permissions`] entry with a
/// SelfSubjectAccessReview. Errors only for connection trouble, 401, refused impersonation
/// (exit 4) and timeouts under [`KubeTarget::deadline`] (exit 5); a refused review is recorded
/// in [`PermissionReport::error`].
pub async fn check(target: &KubeTarget) -> Result<PermissionReport> {
    let api: Api<SelfSubjectAccessReview> = Api::all(target.client.clone());
    let needed = required_permissions();
    let mut missing = Vec::new();
    let reviews = needed.iter().map(|perm| SelfSubjectAccessReview {
        spec: SelfSubjectAccessReviewSpec {
            resource_attributes: Some(ResourceAttributes {
                verb: Some(perm.verb.clone()),
                group: Some(perm.group.clone()),
                resource: Some(perm.resource.clone()),
                subresource: perm.subresource.clone(),
                namespace: perm.namespace.clone(),
                name: perm.name.clone(),
                ..Default::default()
            }),
            ..Default::default()
        },
        ..Default::default()
    });
    // Asked concurrently: ~30 round trips one after another are slow on a remote cluster.
    let pp = PostParams::default();
    let answers = futures::future::join_all(reviews.map(|r| {
        let api = api.clone();
        let pp = pp.clone();
        async move {
            crate::cluster::with_deadline(
                target,
                || "creating a SelfSubjectAccessReview".into(),
                api.create(&pp, &r),
            )
            .await
        }
    }))
    .await;
    for (perm, answer) in needed.iter().zip(answers) {
        let answer = answer?;
        match answer {
            Ok(r) => {
                if !r.status.map(|s| s.allowed).unwrap_or(false) {
                    missing.push(perm.clone());
                }
            }
            Err(e) => {
                let e = crate::cluster::classify(
                    e,
                    "create",
                    ResourceRef::list("SelfSubjectAccessReviews"),
                    target,
                );
                if matches!(
                    e,
                    Error::Unreachable { .. }
                        | Error::Unauthorized { .. }
                        | Error::Timeout(_)
                        | Error::ImpersonationRefused { .. }
                ) {
                    return Err(e);
                }
                return Ok(PermissionReport {
                    checked: 0,
                    missing: vec![],
                    error: Some(format!("permissions not checked: {e}")),
                });
            }
        }
    }
    Ok(PermissionReport {
        checked: needed.len(),
        missing,
        error: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn list_covers_csr_approval_and_signers() {
        let all = required_permissions();
        assert!(all.iter().any(|p| p.verb == "approve"
            && p.resource == "signers"
            && p.group == "certificates.k8s.io"
            && p.name.as_deref() == Some("kubernetes.io/kubelet-serving")));
        assert!(all
            .iter()
            .any(|p| p.subresource.as_deref() == Some("approval") && p.verb == "update"));
        assert!(all
            .iter()
            .any(|p| p.verb == "create" && p.resource == "namespaces"));
        assert_eq!(
            all.iter()
                .find(|p| p.name.as_deref() == Some("pull-secret"))
                .unwrap()
                .describe(),
            "get secrets/pull-secret -n openshift-config"
        );
    }
}
