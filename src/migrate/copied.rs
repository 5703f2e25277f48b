//! Option 1's CRs (pure): the objects node 0's own API server holds, copied for cluster 0
//! (docs/migrate.md "Two options on node 0"). Node 0's assisted-service ran in kube-api mode
//! there, so its rows were made from these CRs and carry their keys: the CRs are copied as
//! they are, not recreated ([`super::crs`] is option 2's).
//!
//! [`build`] copies them (server-set metadata and node 0's URLs dropped, status kept) and
//! changes only what must be true on cluster 0, as [`super::crs::build`] writes it for option 2:
//! the ClusterDeployment `spec.installed: true` with its `clusterMetadata` (MGMT-24834: day 1
//! never sets it) and the admin kubeconfig and password Secrets it names, held by
//! [`RECONCILE_PAUSE`]; the AgentClusterInstall `holdInstallation` and the same
//! `clusterMetadata`; [`SKIP_SPOKE_CLEANUP`] on the Agents; [`MIGRATION_ANNOTATION`] on every
//! object. [`check`] is what import accepts of such a set.

use std::collections::{BTreeMap, BTreeSet};

use base64::Engine;
use serde_json::{json, Map, Value};

use super::crs::{
    is_dns1123_label, is_dns1123_subdomain, ExpectedSet, INFRAENV_LABEL, MIGRATION_ANNOTATION,
    RECONCILE_PAUSE, RESERVED_NAMES, SKIP_SPOKE_CLEANUP,
};
use crate::error::Error;

/// `manifest.source.crs` of a bundle whose CRs were copied (option 1); absent or empty:
/// recreated (option 2).
pub const COPIED: &str = "copied";

/// Server-set metadata dropped from every copied or imported object (docs/migrate.md "The
/// order on cluster 0").
pub const STRIP_METADATA: [&str; 10] = [
    "uid",
    "resourceVersion",
    "creationTimestamp",
    "generation",
    "managedFields",
    "ownerReferences",
    "finalizers",
    "selfLink",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
];

/// Status fields that hold node 0's URLs, signed with node 0's key (docs/migrate.md "The order
/// on cluster 0": assisted-service's controllers fill `debugInfo.eventsURL/logsURL`,
/// `isoDownloadURL` and the InfraEnv's `debugInfo.staticNetworkDownloadURL` only when empty, so a
/// copied one would stay: agent_controller.go, clusterdeployments_controller.go,
/// infraenv_controller.go `setStaticNetworkDownloadURL`).
pub const STATUS_URLS: [&[&str]; 5] = [
    &["debugInfo", "eventsURL"],
    &["debugInfo", "logsURL"],
    &["debugInfo", "staticNetworkDownloadURL"],
    &["isoDownloadURL"],
    &["bootArtifacts"],
];

/// Drops [`STRIP_METADATA`], the namespace and kubectl's last-applied annotation from `obj`'s
/// metadata (status is kept).
pub fn strip_metadata(obj: &mut Value) {
    if let Some(meta) = obj.get_mut("metadata").and_then(Value::as_object_mut) {
        for k in STRIP_METADATA {
            meta.remove(k);
        }
        meta.remove("namespace");
        if let Some(a) = meta.get_mut("annotations").and_then(Value::as_object_mut) {
            a.remove("kubectl.kubernetes.io/last-applied-configuration");
        }
    }
}

/// Removes node 0's URLs ([`STATUS_URLS`]) from a status.
pub fn clear_status_urls(status: &mut Value) {
    for path in STATUS_URLS {
        let (last, parents) = path.split_last().expect("non-empty");
        let ptr: String = parents.iter().map(|p| format!("/{p}")).collect();
        if let Some(Value::Object(m)) = status.pointer_mut(&ptr) {
            m.remove(*last);
        }
    }
}

/// What node 0's API server holds for the cluster, as read (namespaced objects of the
/// ClusterDeployment's namespace).
#[derive(Debug, Clone, Default)]
pub struct Node0Objects {
    /// The ClusterDeployment.
    pub cluster_deployment: Value,
    /// Its AgentClusterInstall.
    pub agent_cluster_install: Value,
    /// The ClusterImageSet the AgentClusterInstall names.
    pub cluster_image_set: Value,
    /// The Secrets the ClusterDeployment and the InfraEnvs name as pull secret.
    pub secrets: Vec<Value>,
    /// The InfraEnvs of the cluster.
    pub infra_envs: Vec<Value>,
    /// The NMStateConfigs their `nmStateConfigLabelSelector` selects.
    pub nmstate_configs: Vec<Value>,
    /// The Agents of the cluster.
    pub agents: Vec<Value>,
}

/// What [`build`] adds: the cluster's ids and the admin credentials node 0 stored.
#[derive(Debug, Clone)]
pub struct Additions<'a> {
    /// assisted-service cluster id (the `clusterMetadata.infraID`).
    pub cluster_id: &'a str,
    /// `openshift_cluster_id` (the `clusterMetadata.clusterID`).
    pub openshift_cluster_id: &'a str,
    /// The admin kubeconfig (node 0's `kubeconfig-noingress` before its reboot).
    pub kubeconfig: &'a [u8],
    /// The kubeadmin password (node 0's `kubeadmin-password`).
    pub password: &'a [u8],
}

fn s<'a>(v: &'a Value, ptr: &str) -> &'a str {
    v.pointer(ptr).and_then(Value::as_str).unwrap_or("")
}

fn invalid(field: &str, message: impl Into<String>) -> Error {
    Error::InvalidInput {
        field: field.into(),
        message: message.into(),
    }
}

fn annotate(obj: &mut Value, key: &str, value: &str) {
    if let Some(meta) = obj.get_mut("metadata").and_then(Value::as_object_mut) {
        let a = meta.entry("annotations").or_insert_with(|| json!({}));
        if !a.is_object() {
            *a = json!({});
        }
        a[key] = json!(value);
    }
}

/// A copy of `obj` for the bundle: metadata stripped ([`strip_metadata`]), node 0's URLs
/// cleared from its status, an empty status dropped, the namespace of its references to the
/// ClusterDeployment dropped.
fn copy_of(obj: &Value, cluster_id: &str) -> Value {
    let mut o = obj.clone();
    strip_metadata(&mut o);
    if let Some(m) = o.as_object_mut() {
        if let Some(mut st) = m.remove("status") {
            clear_status_urls(&mut st);
            if st.as_object().is_some_and(|x| !x.is_empty()) {
                m.insert("status".into(), st);
            }
        }
    }
    // Node 0's namespace in references: import sets cluster 0's (`import::set_references`).
    for ptr in ["/spec/clusterRef", "/spec/clusterDeploymentName"] {
        if let Some(Value::Object(r)) = o.pointer_mut(ptr) {
            r.remove("namespace");
        }
    }
    annotate(&mut o, MIGRATION_ANNOTATION, cluster_id);
    o
}

/// The JSON pointer of annotation `key` (`~` and `/` escaped).
fn ann_ptr(key: &str) -> String {
    format!(
        "/metadata/annotations/{}",
        key.replace('~', "~0").replace('/', "~1")
    )
}

/// The admin Secrets' names for ClusterDeployment `cd` (as option 2's, [`super::crs::CrNames`]).
pub fn admin_secret_names(cd: &str) -> (String, String) {
    (format!("{cd}-admin-kubeconfig"), format!("{cd}-admin-password"))
}

/// The bundle's objects for option 1, in creation order (Secrets, ClusterImageSet,
/// ClusterDeployment, AgentClusterInstall, InfraEnvs, NMStateConfigs, Agents); namespaces
/// empty (import sets them). Errors: [`Error::InvalidInput`] (exit 3) when the
/// ClusterDeployment has no name.
pub fn build(n0: &Node0Objects, add: &Additions<'_>) -> Result<Vec<Value>, Error> {
    let cid = add.cluster_id;
    let cd = s(&n0.cluster_deployment, "/metadata/name").to_string();
    if cd.is_empty() {
        return Err(invalid("node 0's ClusterDeployment", "it has no name"));
    }
    let (kubeconfig, password) = admin_secret_names(&cd);
    let b64 = |b: &[u8]| base64::engine::general_purpose::STANDARD.encode(b);
    let mut objects: Vec<Value> = n0.secrets.iter().map(|o| copy_of(o, cid)).collect();
    for (name, data) in [
        (&kubeconfig, json!({"kubeconfig": b64(add.kubeconfig)})),
        (
            &password,
            json!({"username": b64(b"kubeadmin"), "password": b64(add.password)}),
        ),
    ] {
        objects.push(json!({
            "apiVersion": "v1", "kind": "Secret",
            "metadata": {"name": name, "annotations": {MIGRATION_ANNOTATION: cid}},
            "type": "Opaque", "data": data,
        }));
    }
    objects.push(copy_of(&n0.cluster_image_set, cid));
    let metadata = json!({
        "clusterID": add.openshift_cluster_id,
        "infraID": cid,
        "adminKubeconfigSecretRef": {"name": kubeconfig},
        "adminPasswordSecretRef": {"name": password},
    });
    let mut cdo = copy_of(&n0.cluster_deployment, cid);
    annotate(&mut cdo, RECONCILE_PAUSE, "true");
    cdo["spec"]["installed"] = json!(true);
    cdo["spec"]["clusterMetadata"] = metadata.clone();
    objects.push(cdo);
    let mut aci = copy_of(&n0.agent_cluster_install, cid);
    aci["spec"]["holdInstallation"] = json!(true);
    aci["spec"]["clusterMetadata"] = metadata;
    objects.push(aci);
    objects.extend(n0.infra_envs.iter().map(|o| copy_of(o, cid)));
    objects.extend(n0.nmstate_configs.iter().map(|o| copy_of(o, cid)));
    for a in &n0.agents {
        let mut o = copy_of(a, cid);
        annotate(&mut o, SKIP_SPOKE_CLEANUP, "true");
        objects.push(o);
    }
    Ok(objects)
}

/// Checks that `objects` (crs/crs.json of a bundle whose `manifest.source.crs` is [`COPIED`])
/// is a set [`build`] could have made for the cluster of `exp`, so that an edited and resealed
/// bundle cannot make import create anything else:
///
/// - kinds Secret, ClusterImageSet, ClusterDeployment, AgentClusterInstall, InfraEnv,
///   NMStateConfig, Agent with their apiVersions; names DNS-1123 (labels for the four guarded
///   kinds), none of [`RESERVED_NAMES`], no duplicates, no namespace; metadata only `name`,
///   `labels`, `annotations`; [`MIGRATION_ANNOTATION`] = the cluster id on every object;
/// - one ClusterDeployment, installed, `clusterMetadata.infraID` the cluster id, referring to
///   the one AgentClusterInstall (which refers back to it) and to Secrets of the set; one
///   ClusterImageSet, named by the AgentClusterInstall, with the manifest's release image;
/// - one InfraEnv per `exp.infra_env_ids`, of this ClusterDeployment or none; one Agent per
///   `exp.host_ids` (named by the id) of this ClusterDeployment, labelled for an InfraEnv of the
///   set; NMStateConfigs labelled as an InfraEnv of the set selects them;
/// - Secrets only those the ClusterDeployment and InfraEnvs name, of type
///   `kubernetes.io/dockerconfigjson` (pull secrets) or Opaque (the admin ones), `data` only.
///
/// Errors: [`Error::InvalidInput`] (exit 3) naming `crs/crs.json[i]` and what is wrong, or
/// `crs/crs.json` for what is missing.
pub fn check(objects: &[Value], exp: &ExpectedSet<'_>, openshift_cluster_id: &str) -> Result<(), Error> {
    let whole = "bundle file crs/crs.json";
    let mut seen: BTreeSet<(String, String)> = BTreeSet::new();
    let mut by_kind: BTreeMap<String, Vec<(usize, &Value)>> = BTreeMap::new();
    for (i, o) in objects.iter().enumerate() {
        let field = format!("{whole}[{i}]");
        let bad = |m: String| invalid(&field, m);
        let obj = o.as_object().ok_or_else(|| bad("not an object".into()))?;
        let kind = s(o, "/kind");
        let want_api = match kind {
            "Secret" => "v1",
            "ClusterImageSet" | "ClusterDeployment" => "hive.openshift.io/v1",
            "AgentClusterInstall" => "extensions.hive.openshift.io/v1beta1",
            "InfraEnv" | "NMStateConfig" | "Agent" => "agent-install.openshift.io/v1beta1",
            _ => {
                return Err(bad(format!(
                    "kind {kind:?} is not one export copies: Secrets, a ClusterImageSet, a \
                     ClusterDeployment, an AgentClusterInstall, InfraEnvs, NMStateConfigs, Agents"
                )))
            }
        };
        if s(o, "/apiVersion") != want_api {
            return Err(bad(format!(
                "{kind} with apiVersion {:?}, not {want_api}",
                s(o, "/apiVersion")
            )));
        }
        let meta = o
            .get("metadata")
            .and_then(Value::as_object)
            .ok_or_else(|| bad("no metadata".into()))?;
        let name = meta.get("name").and_then(Value::as_str).unwrap_or("");
        let what = format!("{kind} {name:?}");
        let label_named = matches!(
            kind,
            "ClusterDeployment" | "AgentClusterInstall" | "InfraEnv" | "Agent"
        );
        let ok = if label_named {
            is_dns1123_label(name)
        } else {
            is_dns1123_subdomain(name)
        };
        if !ok || RESERVED_NAMES.contains(&name) {
            return Err(bad(format!(
                "{what}: not a usable name (DNS-1123 {}, not one of import's own {RESERVED_NAMES:?})",
                if label_named { "label" } else { "subdomain" }
            )));
        }
        if !seen.insert((kind.to_string(), name.to_string())) {
            return Err(bad(format!("{what} appears twice")));
        }
        if let Some(k) = meta
            .keys()
            .find(|k| !matches!(k.as_str(), "name" | "labels" | "annotations"))
        {
            return Err(bad(format!(
                "{what}: metadata.{k} is not something export copies"
            )));
        }
        for k in ["labels", "annotations"] {
            if let Some(v) = meta.get(k) {
                if !v.as_object().is_some_and(|m| m.values().all(Value::is_string)) {
                    return Err(bad(format!("{what}: metadata.{k} is not a map of strings")));
                }
            }
        }
        if meta
            .get("annotations")
            .and_then(|a| a.get(MIGRATION_ANNOTATION))
            .and_then(Value::as_str)
            != Some(exp.cluster_id)
        {
            return Err(bad(format!(
                "{what}: annotation {MIGRATION_ANNOTATION} is not this bundle's cluster {}",
                exp.cluster_id
            )));
        }
        let top: &[&str] = match kind {
            "Secret" => &["apiVersion", "kind", "metadata", "type", "data"],
            "ClusterImageSet" | "NMStateConfig" => &["apiVersion", "kind", "metadata", "spec"],
            _ => &["apiVersion", "kind", "metadata", "spec", "status"],
        };
        if let Some(k) = obj.keys().find(|k| !top.contains(&k.as_str())) {
            return Err(bad(format!("{what}: field {k:?} is not something export copies")));
        }
        if kind == "Secret" {
            if !o
                .get("data")
                .and_then(Value::as_object)
                .is_some_and(|d| d.values().all(Value::is_string))
            {
                return Err(bad(format!("{what}: data must be a map of base64 text")));
            }
        } else if !o.get("spec").is_some_and(Value::is_object) {
            return Err(bad(format!("{what}: no spec")));
        }
        by_kind.entry(kind.to_string()).or_default().push((i, o));
    }
    let all = |k: &str| by_kind.get(k).cloned().unwrap_or_default();
    let one = |k: &str| -> Result<(usize, &Value), Error> {
        match all(k).as_slice() {
            [x] => Ok(*x),
            xs => Err(invalid(
                whole,
                format!("{} {k} objects; a bundle holds exactly one", xs.len()),
            )),
        }
    };
    let at = |i: usize| format!("{whole}[{i}]");
    let (cdi, cd) = one("ClusterDeployment")?;
    let (acii, aci) = one("AgentClusterInstall")?;
    let (cisi, cis) = one("ClusterImageSet")?;
    let cd_name = s(cd, "/metadata/name");
    let secret_names: BTreeSet<&str> = all("Secret")
        .iter()
        .map(|(_, o)| s(o, "/metadata/name"))
        .collect();
    let need = |i: usize, o: &Value, ptr: &str, want: &str| -> Result<(), Error> {
        if s(o, ptr) == want {
            Ok(())
        } else {
            Err(invalid(
                &at(i),
                format!(
                    "{} {:?}: {} must be {want:?} (it is {:?})",
                    s(o, "/kind"),
                    s(o, "/metadata/name"),
                    ptr.trim_start_matches('/').replace('/', "."),
                    s(o, ptr)
                ),
            ))
        }
    };
    let secret_ref = |i: usize, o: &Value, ptr: &str, used: &mut BTreeSet<String>| -> Result<(), Error> {
        let n = s(o, ptr);
        if !secret_names.contains(n) {
            return Err(invalid(
                &at(i),
                format!(
                    "{} {:?}: {} names Secret {n:?}, which the bundle does not hold",
                    s(o, "/kind"),
                    s(o, "/metadata/name"),
                    ptr.trim_start_matches('/').replace('/', ".")
                ),
            ));
        }
        used.insert(n.to_string());
        Ok(())
    };
    let mut used: BTreeSet<String> = BTreeSet::new();
    if cd.pointer("/spec/installed") != Some(&json!(true)) {
        return Err(invalid(
            &at(cdi),
            format!("ClusterDeployment {cd_name:?}: spec.installed must be true"),
        ));
    }
    // The holds (released at import's end) and what build writes.
    let (kubeconfig, password) = admin_secret_names(cd_name);
    need(cdi, cd, &ann_ptr(RECONCILE_PAUSE), "true")?;
    need(cdi, cd, "/spec/clusterMetadata/infraID", exp.cluster_id)?;
    need(cdi, cd, "/spec/clusterMetadata/clusterID", openshift_cluster_id)?;
    need(
        cdi,
        cd,
        "/spec/clusterMetadata/adminKubeconfigSecretRef/name",
        &kubeconfig,
    )?;
    need(
        cdi,
        cd,
        "/spec/clusterMetadata/adminPasswordSecretRef/name",
        &password,
    )?;
    if aci.pointer("/spec/holdInstallation") != Some(&json!(true))
        || aci.pointer("/spec/clusterMetadata") != cd.pointer("/spec/clusterMetadata")
    {
        return Err(invalid(
            &at(acii),
            format!(
                "AgentClusterInstall {:?}: spec.holdInstallation must be true and spec.clusterMetadata \
                 the ClusterDeployment's",
                s(aci, "/metadata/name")
            ),
        ));
    }
    need(
        cdi,
        cd,
        "/spec/clusterInstallRef/group",
        "extensions.hive.openshift.io",
    )?;
    need(cdi, cd, "/spec/clusterInstallRef/version", "v1beta1")?;
    need(cdi, cd, "/spec/clusterInstallRef/kind", "AgentClusterInstall")?;
    need(cdi, cd, "/spec/clusterInstallRef/name", s(aci, "/metadata/name"))?;
    need(acii, aci, "/spec/clusterDeploymentRef/name", cd_name)?;
    need(acii, aci, "/spec/imageSetRef/name", s(cis, "/metadata/name"))?;
    need(cisi, cis, "/spec/releaseImage", exp.release_image)?;
    for p in [
        "/spec/pullSecretRef/name",
        "/spec/clusterMetadata/adminKubeconfigSecretRef/name",
        "/spec/clusterMetadata/adminPasswordSecretRef/name",
    ] {
        secret_ref(cdi, cd, p, &mut used)?;
    }
    // InfraEnvs: one per id of the manifest (their count; the rows are keyed by name).
    let ies = all("InfraEnv");
    if ies.len() != exp.infra_env_ids.len() {
        return Err(invalid(
            whole,
            format!(
                "{} InfraEnvs, the manifest lists {} infra-envs",
                ies.len(),
                exp.infra_env_ids.len()
            ),
        ));
    }
    let mut selectors: Vec<Map<String, Value>> = Vec::new();
    for (i, ie) in &ies {
        if ie.pointer("/spec/clusterRef").is_some() {
            need(*i, ie, "/spec/clusterRef/name", cd_name)?;
        }
        secret_ref(*i, ie, "/spec/pullSecretRef/name", &mut used)?;
        if let Some(m) = ie
            .pointer("/spec/nmStateConfigLabelSelector/matchLabels")
            .and_then(Value::as_object)
            .filter(|m| !m.is_empty())
        {
            selectors.push(m.clone());
        }
    }
    let ie_names: BTreeSet<&str> = ies.iter().map(|(_, o)| s(o, "/metadata/name")).collect();
    for (i, n) in all("NMStateConfig") {
        let labels = n.pointer("/metadata/labels").and_then(Value::as_object);
        let selected = selectors
            .iter()
            .any(|sel| sel.iter().all(|(k, v)| labels.and_then(|l| l.get(k)) == Some(v)));
        if !selected {
            return Err(invalid(
                &at(i),
                format!(
                    "NMStateConfig {:?}: no InfraEnv of the bundle selects it",
                    s(n, "/metadata/name")
                ),
            ));
        }
    }
    let mut agent_names: BTreeSet<&str> = BTreeSet::new();
    for (i, a) in all("Agent") {
        need(i, a, "/spec/clusterDeploymentName/name", cd_name)?;
        need(i, a, &ann_ptr(SKIP_SPOKE_CLEANUP), "true")?;
        let label = a
            .pointer("/metadata/labels")
            .and_then(|l| l.get(INFRAENV_LABEL))
            .and_then(Value::as_str)
            .unwrap_or("");
        if !ie_names.contains(label) {
            return Err(invalid(
                &at(i),
                format!(
                    "Agent {:?}: label {INFRAENV_LABEL} must name one of the bundle's InfraEnvs",
                    s(a, "/metadata/name")
                ),
            ));
        }
        agent_names.insert(s(a, "/metadata/name"));
    }
    let hosts: BTreeSet<&str> = exp.host_ids.iter().map(String::as_str).collect();
    if agent_names != hosts {
        return Err(invalid(
            whole,
            format!("the Agents are not the manifest's hosts (Agents: {agent_names:?}; hosts: {hosts:?})"),
        ));
    }
    for (i, sec) in all("Secret") {
        let name = s(sec, "/metadata/name");
        if !used.contains(name) {
            return Err(invalid(
                &at(i),
                format!("Secret {name:?}: neither the ClusterDeployment nor an InfraEnv names it"),
            ));
        }
        // The admin Secrets build writes; every other one is a pull secret.
        let (ty, keys): (&str, &[&str]) = if name == kubeconfig {
            ("Opaque", &["kubeconfig"])
        } else if name == password {
            ("Opaque", &["password", "username"])
        } else {
            ("kubernetes.io/dockerconfigjson", &[".dockerconfigjson"])
        };
        let mut have: Vec<&str> = sec
            .get("data")
            .and_then(Value::as_object)
            .map(|d| d.keys().map(String::as_str).collect())
            .unwrap_or_default();
        have.sort_unstable();
        if s(sec, "/type") != ty || have != keys {
            return Err(invalid(
                &at(i),
                format!(
                    "Secret {name:?}: must be of type {ty} with exactly the keys {keys:?} (it is {:?} with {have:?})",
                    s(sec, "/type")
                ),
            ));
        }
    }
    // Pull secret references name pull secrets, not the admin ones.
    for (i, o) in all("ClusterDeployment").into_iter().chain(all("InfraEnv")) {
        let n = s(o, "/spec/pullSecretRef/name");
        if n == kubeconfig || n == password {
            return Err(invalid(
                &at(i),
                format!(
                    "{} {:?}: spec.pullSecretRef names the admin Secret {n:?}",
                    s(o, "/kind"),
                    s(o, "/metadata/name")
                ),
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const CID: &str = "2f3c1a9e-0b7d-4c55-9d1e-5a1b2c3d4e5f";

    fn node0() -> Node0Objects {
        let meta = |name: &str| {
            json!({"name": name, "namespace": "agent-cluster", "uid": "u", "resourceVersion": "9",
                   "creationTimestamp": "2026-12-03T00:00:00Z", "managedFields": [], "finalizers": ["f"],
                   "annotations": {"kubectl.kubernetes.io/last-applied-configuration": "{}"}})
        };
        Node0Objects {
            cluster_deployment: json!({"apiVersion": "hive.openshift.io/v1", "kind": "ClusterDeployment",
                "metadata": meta("ostest"),
                "spec": {"clusterName": "ostest", "baseDomain": "example.com",
                         "clusterInstallRef": {"group": "extensions.hive.openshift.io", "version": "v1beta1",
                                               "kind": "AgentClusterInstall", "name": "ostest"},
                         "platform": {"agentBareMetal": {"agentSelector": {}}},
                         "pullSecretRef": {"name": "pull-secret"}},
                "status": {"conditions": []}}),
            agent_cluster_install: json!({"apiVersion": "extensions.hive.openshift.io/v1beta1",
                "kind": "AgentClusterInstall", "metadata": meta("ostest"),
                "spec": {"clusterDeploymentRef": {"name": "ostest"}, "imageSetRef": {"name": "openshift-4.18"},
                         "provisionRequirements": {"controlPlaneAgents": 3}},
                "status": {"debugInfo": {"state": "installing",
                           "eventsURL": "http://192.168.111.80:8090/api/assisted-install/v2/events?api_key=k",
                           "logsURL": "http://192.168.111.80:8090/x"}}}),
            cluster_image_set: json!({"apiVersion": "hive.openshift.io/v1", "kind": "ClusterImageSet",
                "metadata": {"name": "openshift-4.18", "uid": "u"},
                "spec": {"releaseImage": "quay.io/openshift-release-dev/ocp-release:4.18.0-x86_64"}}),
            secrets: vec![json!({"apiVersion": "v1", "kind": "Secret", "metadata": meta("pull-secret"),
                "type": "kubernetes.io/dockerconfigjson", "data": {".dockerconfigjson": "e30="}})],
            infra_envs: vec![json!({"apiVersion": "agent-install.openshift.io/v1beta1", "kind": "InfraEnv",
                "metadata": meta("ostest"),
                "spec": {"clusterRef": {"name": "ostest", "namespace": "agent-cluster"},
                         "pullSecretRef": {"name": "pull-secret"},
                         "nmStateConfigLabelSelector": {"matchLabels": {"infraenvs.agent-install.openshift.io": "ostest"}}},
                "status": {"isoDownloadURL": "http://192.168.111.80:8888/iso",
                           "debugInfo": {"staticNetworkDownloadURL": "http://192.168.111.80:8090/x?api_key=k"}}})],
            nmstate_configs: vec![json!({"apiVersion": "agent-install.openshift.io/v1beta1", "kind": "NMStateConfig",
                "metadata": {"name": "master-0", "labels": {"infraenvs.agent-install.openshift.io": "ostest"}},
                "spec": {"config": {}, "interfaces": []}})],
            agents: ["h1", "h2"]
                .iter()
                .map(|h| json!({"apiVersion": "agent-install.openshift.io/v1beta1", "kind": "Agent",
                    "metadata": {"name": h, "namespace": "agent-cluster",
                                 "labels": {"infraenvs.agent-install.openshift.io": "ostest"}},
                    "spec": {"approved": true, "clusterDeploymentName": {"name": "ostest", "namespace": "agent-cluster"}},
                    "status": {"progress": {"currentStage": "Joined"}}}))
                .collect(),
        }
    }

    fn add() -> Additions<'static> {
        Additions {
            cluster_id: CID,
            openshift_cluster_id: "ocp-1",
            kubeconfig: b"KC",
            password: b"PW",
        }
    }

    fn exp<'a>(ies: &'a [String], hosts: &'a [String]) -> ExpectedSet<'a> {
        ExpectedSet {
            cluster_id: CID,
            cluster_name: "ostest",
            openshift_version: "4.18",
            release_image: "quay.io/openshift-release-dev/ocp-release:4.18.0-x86_64",
            infra_env_ids: ies,
            host_ids: hosts,
        }
    }

    #[test]
    fn copies_as_they_were_with_what_cluster_0_needs() {
        let set = build(&node0(), &add()).unwrap();
        let kinds: Vec<&str> = set.iter().map(|o| s(o, "/kind")).collect();
        assert_eq!(
            kinds,
            [
                "Secret",
                "Secret",
                "Secret",
                "ClusterImageSet",
                "ClusterDeployment",
                "AgentClusterInstall",
                "InfraEnv",
                "NMStateConfig",
                "Agent",
                "Agent"
            ]
        );
        let text = serde_json::to_string(&set).unwrap();
        for gone in [
            "\"uid\"",
            "resourceVersion",
            "managedFields",
            "finalizers",
            "last-applied",
            "agent-cluster",
            "192.168.111.80",
        ] {
            assert!(!text.contains(gone), "{gone} left in {text}");
        }
        let cd = &set[4];
        assert_eq!(cd["spec"]["installed"], true);
        assert_eq!(cd["spec"]["clusterMetadata"]["infraID"], CID);
        assert_eq!(
            cd["spec"]["clusterMetadata"]["adminKubeconfigSecretRef"]["name"],
            "ostest-admin-kubeconfig"
        );
        assert_eq!(cd["metadata"]["annotations"][RECONCILE_PAUSE], "true");
        assert_eq!(
            cd["spec"]["platform"],
            json!({"agentBareMetal": {"agentSelector": {}}}),
            "spec kept"
        );
        assert_eq!(set[5]["spec"]["holdInstallation"], true);
        assert_eq!(
            set[5]["status"]["debugInfo"],
            json!({"state": "installing"}),
            "status kept, URLs gone"
        );
        assert_eq!(set[8]["status"]["progress"]["currentStage"], "Joined");
        assert_eq!(set[8]["metadata"]["annotations"][SKIP_SPOKE_CLEANUP], "true");
        assert!(set
            .iter()
            .all(|o| o["metadata"]["annotations"][MIGRATION_ANNOTATION] == CID));
        assert_eq!(set[2]["data"]["password"], "UFc=");
        let (ies, hosts) = (vec!["ie1".to_string()], vec!["h1".to_string(), "h2".to_string()]);
        check(&set, &exp(&ies, &hosts), "ocp-1").unwrap();
    }

    /// Each way a resealed bundle could ask for something else is refused, naming the object.
    #[test]
    fn check_refuses_what_export_would_not_copy() {
        let set = build(&node0(), &add()).unwrap();
        let (ies, hosts) = (vec!["ie1".to_string()], vec!["h1".to_string(), "h2".to_string()]);
        let e = exp(&ies, &hosts);
        type Edit = Box<dyn Fn(&mut Vec<Value>)>;
        let cases: Vec<(Edit, &str)> = vec![
            (Box::new(|v| v[0]["kind"] = json!("ConfigMap")), "crs.json[0]"),
            (
                Box::new(|v| v[4]["spec"]["installed"] = json!(false)),
                "spec.installed",
            ),
            (
                Box::new(|v| v[4]["metadata"]["namespace"] = json!("x")),
                "metadata.namespace",
            ),
            (
                Box::new(|v| v[4]["spec"]["pullSecretRef"]["name"] = json!("other")),
                "does not hold",
            ),
            (
                Box::new(|v| v[3]["spec"]["releaseImage"] = json!("evil")),
                "releaseImage",
            ),
            (
                Box::new(|v| {
                    v.pop();
                }),
                "not the manifest's hosts",
            ),
            (
                Box::new(|v| v[8]["spec"]["clusterDeploymentName"]["name"] = json!("x")),
                "clusterDeploymentName",
            ),
            (
                Box::new(|v| v[7]["metadata"]["labels"] = json!({"a": "b"})),
                "selects it",
            ),
            (
                Box::new(|v| {
                    let x = v[0].clone();
                    v.push(x);
                }),
                "twice",
            ),
            (
                Box::new(|v| v[6]["metadata"]["annotations"][MIGRATION_ANNOTATION] = json!("c2")),
                "migration-cluster",
            ),
            (
                Box::new(|v| {
                    let mut x = v[0].clone();
                    x["metadata"]["name"] = json!("extra");
                    v.insert(0, x);
                }),
                "names it",
            ),
            (
                Box::new(|v| v[9]["metadata"]["name"] = json!("agent-day2-migration")),
                "usable name",
            ),
            // Found by the review: the holds, the Secrets, the metadata.
            (
                Box::new(|v| {
                    v[4]["metadata"]["annotations"]
                        .as_object_mut()
                        .unwrap()
                        .remove(RECONCILE_PAUSE);
                }),
                "reconcile-pause",
            ),
            (
                Box::new(|v| v[5]["spec"]["holdInstallation"] = json!(false)),
                "holdInstallation",
            ),
            (
                Box::new(|v| {
                    v[8]["metadata"]["annotations"]
                        .as_object_mut()
                        .unwrap()
                        .remove(SKIP_SPOKE_CLEANUP);
                }),
                "skip-spoke-cleanup",
            ),
            (Box::new(|v| v[0]["type"] = json!("Opaque")), "must be of type"),
            (
                Box::new(|v| v[1]["data"] = json!({"evil": "eA=="})),
                "exactly the keys",
            ),
            (
                Box::new(|v| v[6]["spec"]["pullSecretRef"]["name"] = json!("ostest-admin-password")),
                "admin Secret",
            ),
            (
                Box::new(|v| v[4]["spec"]["clusterMetadata"]["clusterID"] = json!("other")),
                "clusterID",
            ),
            (
                Box::new(|v| {
                    v[5]["spec"].as_object_mut().unwrap().remove("clusterMetadata");
                }),
                "clusterMetadata",
            ),
            (
                Box::new(|v| v[4]["spec"]["clusterInstallRef"]["group"] = json!("evil.example.com")),
                "group",
            ),
        ];
        for (edit, want) in cases {
            let mut v = set.clone();
            edit(&mut v);
            let err = check(&v, &e, "ocp-1").unwrap_err();
            assert_eq!(err.exit_code(), 3);
            assert!(err.to_string().contains(want), "{want}: {err}");
        }
    }
}
