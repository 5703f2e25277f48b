//! The permissions add-nodes, approve, monitor and migrate need, and which of them the user lacks,
//! asked one by one with SelfSubjectAccessReviews (read-only: the review is not stored).

use k8s_openapi::api::authorization::v1::{
    ResourceAttributes, SelfSubjectAccessReview, SelfSubjectAccessReviewSpec,
};
use kube::api::{Api, PostParams};
use serde::Serialize;

use crate::error::{Error, ResourceRef, Result};
use crate::kube::KubeTarget;

pub use crate::k8s_names::OWN_NAMESPACE;

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

/// Every permission the plugin's commands need (the table of docs/permissions.md; what they
/// read: docs/design.md "What the cluster tells us"), each with the commands that need it
/// (`needed_by`: info, add-nodes, approve, monitor, migrate import, migrate status,
/// migrate wait). Each (verb, group, resource, subresource, namespace, name) appears once.
///
/// The list follows the API calls the code makes:
/// - info, add-nodes: the cluster facts (src/cluster/read.rs), the batch records in
///   [`OWN_NAMESPACE`] (src/batch.rs), the node tokens' Secret `agent-auth-token` in
///   `openshift-config` (read, created or replaced; src/add_nodes/token.rs) and the old
///   `agent-day2-auth` read.
/// - approve: Infrastructure and Network `cluster` (the API names and networks a serving
///   certificate must not claim, src/approve `read_policy`), CSRs, Nodes, the batch records
///   (read, listed, watched by `--watch`, updated with each approval); with `--watch`, Secret
///   `openshift-config/agent-auth-token` (and the old `agent-day2-auth`) read for the node
///   tokens it follows the hosts' reboots with (src/follow.rs).
/// - monitor: CSRs and Nodes (watched; Nodes labelled), the batch records (read, listed,
///   updated with learnt addresses), Secret `openshift-config/agent-auth-token` read for the
///   node tokens and the old `agent-day2-auth` for batches made with it; with
///   `--approve` also what approve needs.
/// - migrate: [`migrate_permissions`].
pub fn required_permissions() -> Vec<Permission> {
    const R: &[&str] = &["info", "add-nodes"];
    const RA: &[&str] = &["info", "add-nodes", "approve"];
    const ADD: &[&str] = &["add-nodes"];
    const APP: &[&str] = &["approve"];
    const MON: &[&str] = &["monitor", "approve"];
    const BATCH_RW: &[&str] = &["add-nodes", "approve", "monitor"];
    let cfg = "config.openshift.io";
    let own = Some(OWN_NAMESPACE);
    let mut v = vec![
        p("get", cfg, "clusterversions", None, Some("version"), R),
        p("get", cfg, "infrastructures", None, Some("cluster"), RA),
        p("get", cfg, "proxies", None, Some("cluster"), R),
        p("get", cfg, "images", None, Some("cluster"), R),
        p("get", cfg, "networks", None, Some("cluster"), RA),
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
        // The node tokens, where oc adm node-image keeps them (src/add_nodes/token.rs):
        // add-nodes reads Secret agent-auth-token, replaces it (PUT) or creates it (RBAC
        // cannot limit create by name); monitor and approve --watch read it (src/follow.rs,
        // never writing it).
        p(
            "get",
            "",
            "secrets",
            Some(crate::auth::SECRET_NAMESPACE),
            Some(crate::auth::SECRET_NAME),
            &["add-nodes", "approve", "monitor"],
        ),
        p(
            "create",
            "",
            "secrets",
            Some(crate::auth::SECRET_NAMESPACE),
            None,
            ADD,
        ),
        p(
            "update",
            "",
            "secrets",
            Some(crate::auth::SECRET_NAMESPACE),
            Some(crate::auth::SECRET_NAME),
            ADD,
        ),
        // The Secret of earlier agent-day2 versions, read only: add-nodes says its tokens are
        // replaced, monitor follows the batches made with them.
        p(
            "get",
            "",
            "secrets",
            own,
            Some(crate::auth::LEGACY_SECRET_NAME),
            &["add-nodes", "approve", "monitor"],
        ),
        p("create", "", "configmaps", own, None, BATCH_RW),
        p("get", "", "configmaps", own, None, BATCH_RW),
        p("update", "", "configmaps", own, None, BATCH_RW),
        p("list", "", "configmaps", own, None, BATCH_RW),
        p("watch", "", "configmaps", own, None, APP),
    ];
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
    // Shared with add-nodes: `create namespaces`.
    for m in migrate_permissions() {
        add(&mut v, m);
    }
    v
}

/// Pushes `perm`, or adds its `needed_by` to an entry asking the same thing.
fn add(v: &mut Vec<Permission>, perm: Permission) {
    let same = |q: &Permission| {
        (
            &q.verb,
            &q.group,
            &q.resource,
            &q.subresource,
            &q.namespace,
            &q.name,
        ) == (
            &perm.verb,
            &perm.group,
            &perm.resource,
            &perm.subresource,
            &perm.namespace,
            &perm.name,
        )
    };
    match v.iter_mut().find(|q| same(q)) {
        Some(q) => {
            for c in perm.needed_by {
                if !q.needed_by.contains(&c) {
                    q.needed_by.push(c);
                }
            }
        }
        None => v.push(perm),
    }
}

/// Kinds whose `status` `migrate import` writes through `/status` (crs/crs.json carries one
/// for them: src/migrate/crs.rs).
pub const MIGRATE_STATUS_KINDS: [&str; 4] = ["ClusterDeployment", "AgentClusterInstall", "InfraEnv", "Agent"];

/// Kinds whose hold `migrate import` releases with a merge patch (src/migrate/import.rs
/// `release_holds`).
pub const MIGRATE_HELD_KINDS: [&str; 2] = ["ClusterDeployment", "AgentClusterInstall"];

/// What `migrate import`, `migrate status` and `migrate wait` need on cluster 0 (`export`
/// and `node0-unit` use no Kubernetes API). Namespaced permissions have no namespace: the
/// migration namespace is the cluster's name or `-n`, and the assisted-service pod is found
/// by label in any namespace, so they must hold in every namespace.
///
/// - import (src/migrate/import.rs, exec.rs, record.rs): get the CRDs of the bundle's kinds
///   by name; get/create the Namespace; get/create/update ConfigMaps (the completion record
///   `agent-day2-migration`, bundle ConfigMaps) and every kind of [`crate::migrate::import::KINDS`]
///   (`update` is `--force`'s replace); list ClusterDeployments, AgentClusterInstalls,
///   InfraEnvs and Agents in all namespaces (conflicts); patch `/status` of
///   [`MIGRATE_STATUS_KINDS`]; patch [`MIGRATE_HELD_KINDS`] (holds released); list Pods in
///   all namespaces (label `app=assisted-service`) and get Secret `postgres` in the pod's
///   namespace (covered by get Secrets); exec in the pod's `postgres` container (psql) and in
///   the copy pod (tar); get/create PersistentVolumeClaims; get/create/delete Pods (the copy
///   pod).
/// - status (src/migrate/status.rs): get the record and each bundle object by name; list Pods,
///   get Secret `postgres`, exec psql (row counts).
/// - wait (src/migrate/wait.rs): get ConfigMap `agent-day2-migration` only.
///
/// Exec is asked as `create` and `get` on `pods/exec`: kube-rs execs over a WebSocket, an
/// HTTP GET, authorized as `get` on clusters before Kubernetes 1.35 and also as `create` from
/// 1.35 on (KEP-4006, feature gate AuthorizePodWebsocketUpgradeCreatePermission).
pub fn migrate_permissions() -> Vec<Permission> {
    use crate::migrate::import::KINDS;
    use crate::migrate::record::RECORD_NAME;
    const I: &[&str] = &["migrate import"];
    const IS: &[&str] = &["migrate import", "migrate status"];
    let mut v = Vec::new();
    for k in KINDS.iter() {
        if let Some(crd) = k.crd_name() {
            v.push(p(
                "get",
                "apiextensions.k8s.io",
                "customresourcedefinitions",
                None,
                Some(&crd),
                I,
            ));
        }
    }
    v.push(p("get", "", "namespaces", None, None, I));
    v.push(p("create", "", "namespaces", None, None, I));
    // wait reads the record by name only.
    v.push(p(
        "get",
        "",
        "configmaps",
        None,
        Some(RECORD_NAME),
        &["migrate wait"],
    ));
    // The record is a ConfigMap (read, created, replaced) whether or not bundle objects are.
    for (verb, by) in [("get", IS), ("create", I), ("update", I)] {
        v.push(p(verb, "", "configmaps", None, None, by));
    }
    for k in KINDS.iter() {
        add(&mut v, p("get", k.group, k.plural, None, None, IS));
        add(&mut v, p("create", k.group, k.plural, None, None, I));
        add(&mut v, p("update", k.group, k.plural, None, None, I));
        if k.is_guarded() {
            v.push(p("list", k.group, k.plural, None, None, I));
        }
        if MIGRATE_HELD_KINDS.contains(&k.kind) {
            v.push(p("patch", k.group, k.plural, None, None, I));
        }
        if MIGRATE_STATUS_KINDS.contains(&k.kind) {
            let mut s = p("patch", k.group, k.plural, None, None, I);
            s.subresource = Some("status".into());
            v.push(s);
        }
    }
    v.push(p("list", "", "pods", None, None, IS));
    v.push(p("get", "", "pods", None, None, I));
    v.push(p("create", "", "pods", None, None, I));
    v.push(p("delete", "", "pods", None, None, I));
    for verb in ["create", "get"] {
        let mut e = p(verb, "", "pods", None, None, IS);
        e.subresource = Some("exec".into());
        v.push(e);
    }
    v.push(p("get", "", "persistentvolumeclaims", None, None, I));
    v.push(p("create", "", "persistentvolumeclaims", None, None, I));
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
            crate::kube::with_deadline(
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
                let e =
                    crate::kube::classify(e, "create", ResourceRef::list("SelfSubjectAccessReviews"), target);
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

    fn key(p: &Permission) -> String {
        format!(
            "{:?}",
            (
                &p.verb,
                &p.group,
                &p.resource,
                &p.subresource,
                &p.namespace,
                &p.name
            )
        )
    }

    #[test]
    fn each_permission_is_asked_once() {
        let all = required_permissions();
        let mut seen = std::collections::BTreeSet::new();
        for p in &all {
            assert!(seen.insert(key(p)), "asked twice: {}", p.describe());
            assert!(!p.needed_by.is_empty(), "{}", p.describe());
        }
        let ns = all
            .iter()
            .find(|p| p.verb == "create" && p.resource == "namespaces")
            .unwrap();
        assert_eq!(ns.needed_by, ["add-nodes", "migrate import"]);
    }

    /// approve and monitor write no Secret (they read batch records; monitor and approve
    /// --watch read the node tokens of `agent-auth-token` and the old `agent-day2-auth` by name).
    #[test]
    fn approve_and_monitor_write_no_secret() {
        for p in required_permissions() {
            if p.resource != "secrets" {
                continue;
            }
            if p.needed_by.iter().any(|c| c == "monitor" || c == "approve") {
                assert!(
                    [
                        "get secrets/agent-auth-token -n openshift-config",
                        "get secrets/agent-day2-auth -n openshift-agent-day2"
                    ]
                    .contains(&p.describe().as_str()),
                    "{}",
                    p.describe()
                );
            }
        }
    }

    /// add-nodes keeps the tokens in the Secret oc adm node-image uses and writes no other
    /// Secret; the only unnamed Secret verb is create (RBAC cannot name what is created).
    #[test]
    fn add_nodes_writes_only_the_node_tokens_secret() {
        let mut got: Vec<String> = required_permissions()
            .into_iter()
            .filter(|p| p.resource == "secrets" && p.needed_by.iter().any(|c| c == "add-nodes"))
            .map(|p| p.describe())
            .collect();
        got.sort();
        assert_eq!(
            got,
            [
                "create secrets -n openshift-config",
                "get secrets/agent-auth-token -n openshift-config",
                "get secrets/agent-day2-auth -n openshift-agent-day2",
                "get secrets/pull-secret -n openshift-config",
                "get secrets/worker-user-data-managed -n openshift-machine-api",
                "update secrets/agent-auth-token -n openshift-config",
            ]
        );
    }

    #[test]
    fn migrate_subcommands() {
        let by = |cmd: &str| -> Vec<String> {
            required_permissions()
                .into_iter()
                .filter(|p| p.needed_by.iter().any(|c| c == cmd))
                .map(|p| p.describe())
                .collect()
        };
        assert_eq!(by("migrate wait"), ["get configmaps/agent-day2-migration"]);
        let status = by("migrate status");
        for want in [
            "create pods/exec",
            "get pods/exec",
            "list pods",
            "get secrets",
            "get configmaps",
            "get agents.agent-install.openshift.io",
        ] {
            assert!(status.contains(&want.to_string()), "{want} not in {status:?}");
        }
        assert!(
            !status
                .iter()
                .any(|d| d.starts_with("create ") && d != "create pods/exec"),
            "{status:?}"
        );
        let import = by("migrate import");
        for want in [
            "get customresourcedefinitions.apiextensions.k8s.io/agents.agent-install.openshift.io",
            "get customresourcedefinitions.apiextensions.k8s.io/clusterimagesets.hive.openshift.io",
            "create namespaces",
            "update secrets",
            "list clusterdeployments.hive.openshift.io",
            "patch agentclusterinstalls.extensions.hive.openshift.io",
            "patch agents.agent-install.openshift.io/status",
            "create nmstateconfigs.agent-install.openshift.io",
            "delete pods",
            "create persistentvolumeclaims",
        ] {
            assert!(import.contains(&want.to_string()), "{want} not in {import:?}");
        }
        // Nothing of the bundle is ever deleted, nor listed beyond the conflict check.
        assert!(
            import
                .iter()
                .all(|d| !d.starts_with("delete ") || d == "delete pods"),
            "{import:?}"
        );
        assert!(!import.contains(&"list secrets".to_string()));
        assert!(!import.contains(&"list nmstateconfigs.agent-install.openshift.io".to_string()));
    }
}
