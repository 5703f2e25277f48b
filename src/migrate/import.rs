//! `migrate import DIR`: restore a bundle on the current context (cluster 0), in the order of
//! docs/migrate.md "The order on cluster 0":
//!
//! 1. checks, before any change: the bundle (checksums), the CRDs (missing ones named, or
//!    `--wait-for-crds`), conflicts (a ClusterDeployment, AgentClusterInstall, InfraEnv or
//!    Agent of this cluster that this bundle's import did not create), the assisted-service
//!    database (found by label, or `--db-url`), its schema against the dump's (every column of
//!    the dump's COPY blocks and every migration id of the dump must be there:
//!    [`check_target_schema`]), and whether it already holds this cluster;
//! 2. namespace, then the completion record `in-progress` ([`super::record`]);
//! 3. Secrets, ClusterImageSet;
//! 4. the database restore in one transaction (`BEGIN;` … `COMMIT;` around it, stdin = the dump
//!    without the `migrations` rows, then UPDATEs writing `kube_key_name`/`kube_key_namespace`)
//!    — before any ClusterDeployment exists, so the controllers find the rows instead of
//!    creating a new cluster record;
//! 5. ClusterDeployment (held), AgentClusterInstall (held), InfraEnv, NMStateConfigs, Agents,
//!    with `fieldValidation=Strict`, server-set fields stripped, namespace and references set;
//! 6. their `/status`;
//! 7. logs and artifacts onto a PersistentVolumeClaim through a short-lived pod (a tar stream
//!    over exec, as `oc cp` does), the pod deleted afterwards;
//! 8. holds released (unless `--keep-held`), record `complete`.
//!
//! Re-running is safe: every step checks what is there; identical objects are left alone, different
//! ones are a conflict (exit 4) unless `--force` (replaced, never deleted: an Agent is never
//! deleted, docs/migrate.md "The order on cluster 0": "skip-spoke-cleanup"); the database is
//! restored once (the record says so); a killed run resumes from the record's `steps_done`.
//!
//! Test hook: `AGENT_DAY2_MIGRATE_STOP_AFTER=<step>` stops the run (exit 1) right after that
//! step is recorded, standing for a run killed there (tests/migrate.rs). Steps: [`STEPS`].

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{Namespace, PersistentVolumeClaim, Pod};
use kube::api::{Api, DeleteParams, DynamicObject, ListParams, Patch};
use kube::core::{ApiResource, GroupVersionKind};
use serde_json::{json, Value};

use super::bundle::Bundle;
use super::copy::{self, CopyItem};
use super::exec::{self, Db, PodContainer, Producer};
use super::record::{self, Phase, Record};
use super::restore;
use crate::error::{Error, ResourceRef};
use crate::kube::classify;
use crate::kube::write::{create_strict, patch_params};
use crate::kube::{KubeTarget, Resolve};

/// Annotation on every object import creates: the bundle checksum (whose import made it).
pub const BUNDLE_ANNOTATION: &str = "agent-day2.openshift.io/migration-bundle";
/// Annotation export puts on every object: the assisted cluster id.
pub const CLUSTER_ANNOTATION: &str = "agent-day2.openshift.io/migration-cluster";
/// hive's pause annotation on the ClusterDeployment (assisted-service reads it as a hold).
pub const PAUSE_ANNOTATION: &str = "hive.openshift.io/reconcile-pause";
/// The PVC (and the prefix of the copy pod) holding logs and artifacts.
pub const PVC_NAME: &str = "agent-day2-migration";
/// The short-lived pod that receives the tar stream.
pub const COPY_POD: &str = "agent-day2-migration-copy";
/// Where the copy pod mounts the PVC.
pub const MOUNT_PATH: &str = "/migration";
/// Bundle folders copied to the PVC (credentials stay in Secrets only).
pub const ARTIFACT_DIRS: [&str; 4] = ["logs/", "api/", "manifests/", "files/"];
/// Test hook: stop after this step (see the module doc).
pub const STOP_AFTER_ENV: &str = "AGENT_DAY2_MIGRATE_STOP_AFTER";

/// Step names, in order (as recorded in `steps_done`).
pub const STEPS: [&str; 13] = [
    "namespace",
    "secrets",
    "clusterimageset",
    "db",
    "clusterdeployment",
    "agentclusterinstall",
    "infraenv",
    "nmstateconfigs",
    "agents",
    "status",
    "artifacts",
    "storage",
    "release-holds",
];

/// A kind import knows: where it is served, its place in the order, its step.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KindInfo {
    /// Kind.
    pub kind: &'static str,
    /// API group ("" for core).
    pub group: &'static str,
    /// Version.
    pub version: &'static str,
    /// Plural resource name.
    pub plural: &'static str,
    /// Namespaced (else cluster-scoped).
    pub namespaced: bool,
    /// Position in the order of docs/migrate.md "The order on cluster 0" (lower first).
    pub rank: u8,
    /// The step that applies it.
    pub step: &'static str,
}

impl KindInfo {
    /// The `ApiResource` for dynamic requests.
    pub fn api_resource(&self) -> ApiResource {
        ApiResource::from_gvk_with_plural(
            &GroupVersionKind::gvk(self.group, self.version, self.kind),
            self.plural,
        )
    }
    /// `plural.group` (the CRD's name); None for core kinds.
    pub fn crd_name(&self) -> Option<String> {
        (!self.group.is_empty()).then(|| format!("{}.{}", self.plural, self.group))
    }
    /// Kinds whose existence for this cluster blocks an import not its own.
    pub fn is_guarded(&self) -> bool {
        matches!(
            self.kind,
            "ClusterDeployment" | "AgentClusterInstall" | "InfraEnv" | "Agent"
        )
    }
}

/// The kinds of crs/crs.json (docs/migrate.md "The order on cluster 0").
pub const KINDS: [KindInfo; 8] = [
    KindInfo {
        kind: "Secret",
        group: "",
        version: "v1",
        plural: "secrets",
        namespaced: true,
        rank: 1,
        step: "secrets",
    },
    KindInfo {
        kind: "ConfigMap",
        group: "",
        version: "v1",
        plural: "configmaps",
        namespaced: true,
        rank: 1,
        step: "secrets",
    },
    KindInfo {
        kind: "ClusterImageSet",
        group: "hive.openshift.io",
        version: "v1",
        plural: "clusterimagesets",
        namespaced: false,
        rank: 2,
        step: "clusterimageset",
    },
    KindInfo {
        kind: "ClusterDeployment",
        group: "hive.openshift.io",
        version: "v1",
        plural: "clusterdeployments",
        namespaced: true,
        rank: 4,
        step: "clusterdeployment",
    },
    KindInfo {
        kind: "AgentClusterInstall",
        group: "extensions.hive.openshift.io",
        version: "v1beta1",
        plural: "agentclusterinstalls",
        namespaced: true,
        rank: 5,
        step: "agentclusterinstall",
    },
    KindInfo {
        kind: "InfraEnv",
        group: "agent-install.openshift.io",
        version: "v1beta1",
        plural: "infraenvs",
        namespaced: true,
        rank: 6,
        step: "infraenv",
    },
    KindInfo {
        kind: "NMStateConfig",
        group: "agent-install.openshift.io",
        version: "v1beta1",
        plural: "nmstateconfigs",
        namespaced: true,
        rank: 7,
        step: "nmstateconfigs",
    },
    KindInfo {
        kind: "Agent",
        group: "agent-install.openshift.io",
        version: "v1beta1",
        plural: "agents",
        namespaced: true,
        rank: 8,
        step: "agents",
    },
];

/// How often `--wait-for-crds` looks for the CRDs.
const CRD_POLL: Duration = Duration::from_secs(5);
/// The last look for the CRDs is this long before `--timeout` ends.
const CRD_MARGIN: Duration = Duration::from_millis(200);

/// Rank of the database restore: after the ClusterImageSet, before any ClusterDeployment.
pub const DB_RANK: u8 = 3;

/// The [`KindInfo`] of `kind` (apiVersion must match too).
pub fn kind_info(api_version: &str, kind: &str) -> Option<&'static KindInfo> {
    KINDS.iter().find(|k| {
        k.kind == kind
            && (if k.group.is_empty() {
                api_version == k.version
            } else {
                api_version == format!("{}/{}", k.group, k.version)
            })
    })
}

/// One object to apply.
#[derive(Debug, Clone)]
pub struct Planned {
    /// Its kind.
    pub info: &'static KindInfo,
    /// Name.
    pub name: String,
    /// Namespace (None for cluster-scoped).
    pub namespace: Option<String>,
    /// The object to create: stripped, namespace and references set, annotations added,
    /// without `status`.
    pub desired: Value,
    /// The status to write through `/status` (node-0 URLs cleared), if any.
    pub status: Option<Value>,
}

impl Planned {
    /// `Kind ns/name` for messages.
    pub fn resource(&self) -> ResourceRef {
        match &self.namespace {
            Some(ns) => ResourceRef::namespaced(self.info.kind, ns, &self.name),
            None => ResourceRef::cluster(self.info.kind, &self.name),
        }
    }
}

use super::copied::clear_status_urls;

/// Turns the objects of crs/crs.json into the ordered plan for namespace `ns`: server-set
/// fields stripped (uid, resourceVersion, creationTimestamp, generation, managedFields,
/// ownerReferences, finalizers, the last-applied annotation), namespace set on namespaced
/// objects, `InfraEnv.spec.clusterRef.namespace` and `Agent.spec.clusterDeploymentName.namespace`
/// set to `ns`, Secret `stringData` folded into `data`, annotation [`BUNDLE_ANNOTATION`] =
/// `checksum` added, `status` split off with node-0 URLs cleared. Sorted by the order of
/// docs/migrate.md "The order on cluster 0"
/// (stable within a kind). A Namespace object in the list is skipped (import makes its own).
///
/// Errors: [`Error::InvalidInput`] (exit 3) naming `crs/crs.json[i]` for an object without
/// apiVersion/kind/metadata.name or of a kind import does not know.
pub fn plan(crs: &[Value], ns: &str, checksum: &str) -> Result<Vec<Planned>, Error> {
    let mut out = Vec::new();
    for (i, o) in crs.iter().enumerate() {
        let field = |f: &str| format!("crs/crs.json[{i}]{f}");
        let api_version = o.get("apiVersion").and_then(Value::as_str).unwrap_or("");
        let kind = o.get("kind").and_then(Value::as_str).unwrap_or("");
        if kind == "Namespace" {
            continue;
        }
        let info = kind_info(api_version, kind).ok_or_else(|| Error::InvalidInput {
            field: field(""),
            message: format!("apiVersion {api_version:?} kind {kind:?} is not an object import knows"),
        })?;
        let name = o
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .filter(|n| !n.is_empty())
            .ok_or_else(|| Error::InvalidInput {
                field: field(".metadata.name"),
                message: "missing".into(),
            })?
            .to_string();
        let mut desired = o.clone();
        let status = desired.as_object_mut().and_then(|m| m.remove("status"));
        strip_server_fields(&mut desired);
        let namespace = info.namespaced.then(|| ns.to_string());
        let meta = desired
            .as_object_mut()
            .ok_or_else(|| Error::InvalidInput {
                field: field(""),
                message: "not an object".into(),
            })?
            .entry("metadata")
            .or_insert_with(|| json!({}));
        match &namespace {
            Some(n) => meta["namespace"] = json!(n),
            None => {
                if let Some(m) = meta.as_object_mut() {
                    m.remove("namespace");
                }
            }
        }
        let ann = meta
            .as_object_mut()
            .map(|m| m.entry("annotations").or_insert_with(|| json!({})));
        if let Some(Value::Object(a)) = ann {
            a.insert(BUNDLE_ANNOTATION.into(), json!(checksum));
        }
        set_references(info.kind, &mut desired, ns);
        if info.kind == "Secret" {
            fold_string_data(&mut desired);
        }
        let status = status
            .filter(|s| s.as_object().is_some_and(|m| !m.is_empty()))
            .map(|mut s| {
                clear_status_urls(&mut s);
                s
            });
        out.push(Planned {
            info,
            name,
            namespace,
            desired,
            status,
        });
    }
    out.sort_by_key(|p| p.info.rank);
    Ok(out)
}

/// Drops server-set metadata ([`STRIP_METADATA`]), the namespace, the kubectl last-applied
/// annotation and `status` from `obj` ([`super::copied::strip_metadata`], the one rule).
pub fn strip_server_fields(obj: &mut Value) {
    if let Some(m) = obj.as_object_mut() {
        m.remove("status");
    }
    super::copied::strip_metadata(obj);
}

/// Sets the namespace of the references that carry one: InfraEnv `spec.clusterRef.namespace`,
/// Agent `spec.clusterDeploymentName.namespace` (when the reference is present).
pub fn set_references(kind: &str, obj: &mut Value, ns: &str) {
    let ptr = match kind {
        "InfraEnv" => "/spec/clusterRef",
        "Agent" => "/spec/clusterDeploymentName",
        _ => return,
    };
    if let Some(Value::Object(r)) = obj.pointer_mut(ptr) {
        r.insert("namespace".into(), json!(ns));
    }
}

/// Secret `stringData` → base64 `data` (what the server stores), so comparisons see the same.
fn fold_string_data(obj: &mut Value) {
    use base64::Engine;
    let Some(m) = obj.as_object_mut() else { return };
    let Some(Value::Object(sd)) = m.remove("stringData") else {
        return;
    };
    let data = m.entry("data").or_insert_with(|| json!({}));
    if let Some(d) = data.as_object_mut() {
        for (k, v) in sd {
            let s = v.as_str().unwrap_or_default();
            d.insert(k, json!(base64::engine::general_purpose::STANDARD.encode(s)));
        }
    }
}

/// Fields left out when comparing a planned object with what the cluster holds: the holds
/// (released at the end), and the namespace. Our two annotations are compared only on the
/// guarded kinds (a pre-existing identical Secret or ClusterImageSet is left alone as it is).
fn comparable(p: &Planned) -> Value {
    let mut d = p.desired.clone();
    if let Some(meta) = d.get_mut("metadata").and_then(Value::as_object_mut) {
        meta.remove("namespace");
        meta.remove("name");
        if let Some(a) = meta.get_mut("annotations").and_then(Value::as_object_mut) {
            a.remove(PAUSE_ANNOTATION);
            if !p.info.is_guarded() {
                a.remove(BUNDLE_ANNOTATION);
                a.remove(CLUSTER_ANNOTATION);
            }
        }
    }
    if p.info.kind == "AgentClusterInstall" {
        if let Some(s) = d.get_mut("spec").and_then(Value::as_object_mut) {
            s.remove("holdInstallation");
        }
    }
    d
}

/// The first path where `want` is not contained in `have` (objects: every key of `want`
/// present and contained; arrays: same length, element-wise; scalars: equal). None when
/// contained. Server defaults and fields added by controllers therefore do not count.
pub fn first_difference(want: &Value, have: &Value, path: &str) -> Option<String> {
    match (want, have) {
        (Value::Object(w), Value::Object(h)) => w.iter().find_map(|(k, wv)| match h.get(k) {
            None if wv.is_null() => None,
            None => Some(format!("{path}.{k}")),
            Some(hv) => first_difference(wv, hv, &format!("{path}.{k}")),
        }),
        (Value::Array(w), Value::Array(h)) => {
            if w.len() != h.len() {
                return Some(path.to_string());
            }
            w.iter()
                .zip(h)
                .enumerate()
                .find_map(|(i, (a, b))| first_difference(a, b, &format!("{path}[{i}]")))
        }
        (w, h) if w == h => None,
        _ => Some(path.to_string()),
    }
}

/// A SQL string literal (`'…'`, quotes doubled; standard_conforming_strings, which pg_dump
/// sets). Errors: [`Error::InvalidInput`] for a NUL character, which PostgreSQL text cannot hold.
pub fn sql_literal(s: &str) -> Result<String, Error> {
    if s.contains('\0') {
        return Err(Error::InvalidInput {
            field: "bundle".into(),
            message: format!("{s:?}: NUL in a value written to the database"),
        });
    }
    Ok(format!("'{}'", s.replace('\'', "''")))
}

/// `'a', 'b'` of ids, each a quoted SQL literal (errors: a NUL in an id).
fn id_list<'a>(ids: impl IntoIterator<Item = &'a String>) -> Result<String, Error> {
    Ok(ids
        .into_iter()
        .map(|s| sql_literal(s))
        .collect::<Result<Vec<_>, _>>()?
        .join(", "))
}

/// `('h', 'ie'), ...` of host keys (host id, infra-env id), quoted SQL literals.
fn host_key_list(keys: &BTreeSet<(String, String)>) -> Result<String, Error> {
    Ok(keys
        .iter()
        .map(|(h, ie)| Ok(format!("({}, {})", sql_literal(h)?, sql_literal(ie)?)))
        .collect::<Result<Vec<_>, Error>>()?
        .join(", "))
}

/// The UPDATEs appended to the restore (docs/migrate.md "Node 0 and cluster 0": the controllers find the
/// rows by these keys; ABI leaves them empty): the cluster row gets `kube_key_name` =
/// ClusterDeployment name and `kube_key_namespace` = `ns`; the infra-envs and hosts this
/// restore wrote (`restored.infra_env_ids`, `restored.host_keys`: collected while the dump was
/// streamed, so rows already on the target are never touched, whatever the manifest lists) get
/// `kube_key_namespace` = `ns` (InfraEnv CRs are named by `infra_envs.name`, Agents by host id).
pub fn kube_key_sql(
    cluster_id: &str,
    cd_name: &str,
    ns: &str,
    restored: &restore::Checked,
) -> Result<String, Error> {
    let cid = sql_literal(cluster_id)?;
    let name = sql_literal(cd_name)?;
    let nsl = sql_literal(ns)?;
    let mut sql = format!(
        "-- agent-day2 migrate import: kube keys for the controllers of cluster 0\n\
         UPDATE public.clusters SET kube_key_name = {name}, kube_key_namespace = {nsl} WHERE id::text = {cid};\n"
    );
    let ies = id_list(&restored.infra_env_ids)?;
    if !ies.is_empty() {
        sql.push_str(&format!(
            "UPDATE public.infra_envs SET kube_key_namespace = {nsl} WHERE id::text IN ({ies});\n"
        ));
    }
    let hosts = host_key_list(&restored.host_keys)?;
    if !hosts.is_empty() {
        sql.push_str(&format!(
            "UPDATE public.hosts SET kube_key_namespace = {nsl} WHERE (id::text, infra_env_id::text) IN ({hosts});\n"
        ));
    }
    Ok(sql)
}

/// The UPDATEs that record, in the same transaction as the rows, what is true on cluster 0 when
/// import runs (docs/migrate.md "Node 0 and cluster 0"): the cluster is installed. Node 0's
/// database never says so (its service stops with node 0's reboot while the cluster is
/// `installing`), and cluster 0's service, finding `installing`, would run the install monitor on
/// a finished cluster and time its hosts out. So the cluster row becomes `installed` ("Cluster
/// is installed", `install_completed_at` and `status_updated_at` now, progress 100 %) and each
/// host this restore wrote (`restored.host_keys`) `installed` at stage `Done` ("Done", 100 %), as
/// assisted-service's own state machine leaves them (internal/cluster/common.go,
/// internal/host/host.go of assisted-service). Rows already `installed` are left alone. The
/// restored infra-envs lose node 0's ISO URL (`download_url`, node 0's image service).
pub fn installed_sql(cluster_id: &str, restored: &restore::Checked) -> Result<String, Error> {
    let cid = sql_literal(cluster_id)?;
    let mut sql = format!(
        "-- agent-day2 migrate import: cluster 0 is installed\n\
         UPDATE public.clusters SET status = 'installed', status_info = 'Cluster is installed', \
         status_updated_at = now(), install_completed_at = now(), progress_total_percentage = 100 \
         WHERE id::text = {cid} AND status IS DISTINCT FROM 'installed';\n"
    );
    // Node 0's discovery ISO URL (its image service, gone with node 0): cluster 0's service
    // would copy it into the InfraEnv's status as the ISO to boot.
    let ies = id_list(&restored.infra_env_ids)?;
    if !ies.is_empty() {
        sql.push_str(&format!(
            "UPDATE public.infra_envs SET download_url = '' WHERE id::text IN ({ies});\n"
        ));
    }
    let hosts = host_key_list(&restored.host_keys)?;
    if !hosts.is_empty() {
        sql.push_str(&format!(
            "UPDATE public.hosts SET status = 'installed', status_info = 'Done', status_updated_at = now(), \
             progress_current_stage = 'Done', progress_installation_percentage = 100, progress_stage_updated_at = now() \
             WHERE (id::text, infra_env_id::text) IN ({hosts}) AND status IS DISTINCT FROM 'installed';\n"
        ));
    }
    Ok(sql)
}

/// What the restore stream appends after the rows: [`kube_key_sql`] then [`installed_sql`].
pub fn after_rows_sql(
    cluster_id: &str,
    cd_name: &str,
    ns: &str,
    restored: &restore::Checked,
) -> Result<String, Error> {
    Ok(kube_key_sql(cluster_id, cd_name, ns, restored)? + &installed_sql(cluster_id, restored)?)
}

/// The manifest's infra-env and host ids must each have a row in the dump (restored: of this
/// cluster): a manifest listing ids the dump does not hold is not export's.
/// Errors: [`Error::InvalidInput`] (exit 3) naming the ids.
pub fn check_listed_rows(
    infra_env_ids: &[String],
    host_ids: &[String],
    found: &restore::Checked,
) -> Result<(), Error> {
    let ies: Vec<&str> = infra_env_ids
        .iter()
        .filter(|i| !found.infra_env_ids.contains(*i))
        .map(String::as_str)
        .collect();
    let hosts: Vec<&str> = host_ids
        .iter()
        .filter(|h| !found.host_keys.iter().any(|(id, _)| id == *h))
        .map(String::as_str)
        .collect();
    if ies.is_empty() && hosts.is_empty() {
        return Ok(());
    }
    Err(Error::InvalidInput {
        field: "bundle manifest.json".into(),
        message: crate::output::display(&format!(
            "it lists infra-envs [{}] and hosts [{}] that have no row of this cluster in db/dump.sql: \
             the manifest and the dump are not from the same export",
            ies.join(", "),
            hosts.join(", ")
        )),
    })
}

/// What the restore would write must be what the manifest says: the live hosts it restores
/// are exactly `host_ids` (no unlisted host row, e.g. one without cluster in a listed
/// infra-env), and per restored table the rows restored plus the soft-deleted rows of other
/// clusters left out are the dump's rows of `manifest_rows` (`counts.rows`). Errors:
/// [`Error::InvalidInput`] (exit 3) naming the differences.
pub fn check_restored_counts(
    host_ids: &[String],
    manifest_rows: &std::collections::BTreeMap<String, u64>,
    found: &restore::Checked,
) -> Result<(), Error> {
    let listed: std::collections::BTreeSet<&str> = host_ids.iter().map(String::as_str).collect();
    let restored: std::collections::BTreeSet<&str> =
        found.live_host_keys.iter().map(|(id, _)| id.as_str()).collect();
    let mut diffs: Vec<String> = restored
        .difference(&listed)
        .map(|h| format!("host {h} is restored but not listed"))
        .collect();
    for (t, n) in &found.rows {
        let left_out = found.skipped_deleted.get(t).copied().unwrap_or(0);
        let want = manifest_rows.get(t).copied();
        if want != Some(n + left_out) {
            diffs.push(format!(
                "table {t}: {n} rows restored and {left_out} left out, the manifest counts {}",
                want.map_or("none".to_string(), |w| w.to_string())
            ));
        }
    }
    if diffs.is_empty() {
        return Ok(());
    }
    Err(Error::InvalidInput {
        field: "bundle manifest.json".into(),
        message: crate::output::display(&format!(
            "db/dump.sql does not hold what the manifest lists: {}; the manifest and the dump are not from the same export",
            diffs.join("; ")
        )),
    })
}

/// The bundle's dump as errors name it.
const DUMP_FILE: &str = "bundle file db/dump.sql";

/// What the restore left out, for the progress lines.
fn restore_note(c: &restore::Checked) -> String {
    let rows: u64 = c.rows.values().sum();
    let mut s = format!("restored {rows} rows in {} tables", c.rows.len());
    if !c.skipped_tables.is_empty() {
        let t: Vec<String> = c
            .skipped_tables
            .iter()
            .map(|(t, n)| format!("{t} ({n} rows)"))
            .collect();
        s.push_str(&format!(
            "; not restored: {}",
            crate::output::display(&t.join(", "))
        ));
    }
    let deleted: u64 = c.skipped_deleted.values().sum();
    if deleted > 0 {
        s.push_str(&format!(
            "; left out {deleted} soft-deleted rows of other clusters"
        ));
    }
    s
}

/// What cluster 0's database must have for the dump to restore, checked before any change
/// (pure): (a) every column of each restored table's COPY block (`found.columns`) is a column
/// of that table there (`target_columns`: table → its columns, from
/// `information_schema.columns`), else the COPY would fail mid-restore; (b) every migration id
/// of the dump (`found.migration_ids`) is one of the target's (`target_ids`, its `migrations`
/// table): a migration node 0's assisted-service applied and cluster 0's did not means cluster
/// 0's is the older build. Neither compares `max(id)`: real ids include typos
/// (`21211125182200`), so the greatest id is the same on every database since 2021
/// (docs/migrate.md "Node 0 and cluster 0"). Errors: [`Error::InvalidInput`] (exit 3) naming the tables and
/// columns, or the ids, that cluster 0 lacks; both as [`Error::Many`] when both fail.
pub fn check_target_schema(
    found: &restore::Checked,
    target_ids: &BTreeSet<String>,
    target_columns: &BTreeMap<String, BTreeSet<String>>,
) -> Result<(), Error> {
    const UPGRADE: &str = "upgrade the multicluster engine on cluster 0 so that its assisted-service is at \
                           least node 0's version, wait until it has started once, then import again";
    let mut errors = Vec::new();
    let mut lacking = Vec::new();
    for (table, cols) in &found.columns {
        let have = target_columns.get(table);
        let missing: Vec<&str> = cols
            .iter()
            .filter(|c| !have.is_some_and(|h| h.contains(*c)))
            .map(String::as_str)
            .collect();
        match have {
            None => lacking.push(format!("table {table} does not exist")),
            Some(_) if !missing.is_empty() => {
                lacking.push(format!("table {table} lacks {}", missing.join(", ")))
            }
            Some(_) => {}
        }
    }
    if !lacking.is_empty() {
        errors.push(Error::InvalidInput {
            field: DUMP_FILE.into(),
            message: format!(
                "cluster 0's assisted-service is older than node 0's: its database lacks columns the \
                 dump holds ({}), so the restore would fail; nothing was changed; {UPGRADE}",
                lacking.join("; ")
            ),
        });
    }
    let newer: Vec<&str> = found
        .migration_ids
        .difference(target_ids)
        .map(String::as_str)
        .collect();
    if !newer.is_empty() {
        errors.push(Error::InvalidInput {
            field: format!("{DUMP_FILE} (table migrations)"),
            message: crate::output::display(&format!(
                "node 0's assisted-service is newer than cluster 0's: the dump's schema has migrations \
                 cluster 0's database lacks: {}; nothing was changed; {UPGRADE}",
                newer.join(", ")
            )),
        });
    }
    match errors.len() {
        0 => Ok(()),
        1 => Err(errors.remove(0)),
        _ => Err(Error::Many(errors)),
    }
}

/// The namespace of the CRs and the record when `-n` is not given: the ClusterDeployment's name
/// in the bundle, else the cluster's name in the manifest ([`namespace_for`] decides between
/// the two).
fn default_namespace(bundle: &Bundle, crs: &[Value]) -> String {
    crs.iter()
        .find(|o| o.get("kind").and_then(Value::as_str) == Some("ClusterDeployment"))
        .and_then(|o| o.pointer("/metadata/name").and_then(Value::as_str))
        .map(str::to_string)
        .unwrap_or_else(|| bundle.manifest.cluster.name.clone())
}

/// crs/crs.json of the bundle, checked to be exactly the object set export makes for the
/// bundle's manifest ([`super::crs::check_set`]; option 1's copied set:
/// [`super::copied::check`]). Errors: [`Error::InvalidInput`] (exit 3) when
/// it is not a JSON array, or holds anything else (another kind, name, namespace, Secret type,
/// release image, a duplicate, a missing object).
pub fn read_crs(bundle: &Bundle) -> Result<Vec<Value>, Error> {
    let bytes = bundle.read("crs/crs.json")?;
    let crs = serde_json::from_slice::<Vec<Value>>(&bytes).map_err(|e| Error::InvalidInput {
        field: "bundle file crs/crs.json".into(),
        message: format!("not a JSON array of objects: {e}"),
    })?;
    let c = &bundle.manifest.cluster;
    let exp = super::crs::ExpectedSet {
        cluster_id: &c.id,
        cluster_name: &c.name,
        openshift_version: &c.openshift_version,
        release_image: &c.release_image,
        infra_env_ids: &c.infra_env_ids,
        host_ids: &c.host_ids,
    };
    if bundle.manifest.source.crs == super::copied::COPIED {
        super::copied::check(&crs, &exp, &c.openshift_cluster_id)?;
    } else {
        super::crs::check_set(&crs, &exp)?;
    }
    Ok(crs)
}

/// Namespaces a migration never lands in by default (without an explicit `-n`): Kubernetes',
/// OpenShift's and the multicluster engine's own.
pub fn is_system_namespace(ns: &str) -> bool {
    matches!(ns, "default" | "openshift" | "multicluster-engine" | "hive")
        || ns.starts_with("kube-")
        || ns.starts_with("openshift-")
        || ns.starts_with("open-cluster-management")
}

/// What to check when no import is found in namespace `ns` (`explicit`: given with `-n`, else
/// the default, the cluster's name); shared by `migrate wait` and `migrate status`.
pub fn namespace_hint(ns: &str, explicit: bool) -> String {
    if explicit {
        format!("namespace {ns} is the one given with -n; it must be the one import used")
    } else {
        format!(
            "namespace {ns} is the default (the cluster's name); if the import ran with -n, pass the same -n"
        )
    }
}

/// Label import puts on a Namespace it creates (value `true`): a default namespace that exists
/// without it (and without this bundle's record) is someone else's.
pub const NAMESPACE_LABEL: &str = record::RECORD_LABEL;

/// The migration namespace for `flag` (the global `-n`) and `bundle`, checked locally before
/// any cluster access: an explicit one must be a DNS-1123 label ([`Error::Usage`], exit 2); the
/// default (the ClusterDeployment name) must not be a system namespace ([`is_system_namespace`];
/// [`Error::InvalidInput`], exit 3, telling to pass `-n`). Returns (namespace, explicit).
pub fn namespace_for(bundle: &Bundle, crs: &[Value], flag: Option<&str>) -> Result<(String, bool), Error> {
    if let Some(n) = flag.filter(|n| !n.is_empty()) {
        if !super::crs::is_dns1123_label(n) {
            return Err(Error::Usage(format!(
                "-n/--namespace {}: not a valid namespace name (DNS-1123 label: at most 63 \
                 lowercase letters, digits and '-', starting and ending with a letter or digit)",
                crate::output::display(n)
            )));
        }
        return Ok((n.to_string(), true));
    }
    let ns = default_namespace(bundle, crs);
    if is_system_namespace(&ns) {
        return Err(Error::InvalidInput {
            field: "bundle cluster name".into(),
            message: format!(
                "the default namespace would be {}, a system namespace; pass -n NAMESPACE explicitly",
                crate::output::display(&ns)
            ),
        });
    }
    Ok((ns, false))
}

/// The ClusterDeployment name of the plan (the cluster's CR name).
fn cd_name(plan: &[Planned], bundle: &Bundle) -> String {
    plan.iter()
        .find(|p| p.info.kind == "ClusterDeployment")
        .map(|p| p.name.clone())
        .unwrap_or_else(|| bundle.manifest.cluster.name.clone())
}

/// The ordered plan as printed by `--dry-run` (one numbered line per action).
pub fn plan_lines(plan: &[Planned], bundle: &Bundle, ns: &str, keep_held: bool) -> Vec<String> {
    let m = &bundle.manifest;
    let mut lines = vec![
        format!("Namespace {ns} (created if absent)"),
        format!(
            "ConfigMap {ns}/{} (completion record, in-progress)",
            record::RECORD_NAME
        ),
    ];
    let mut db_done = false;
    let push_db = |lines: &mut Vec<String>| {
        let (rows, tables) = restored_rows(&m.counts.rows);
        lines.push(format!(
            "Database: restore db/dump.sql ({rows} rows in {tables} tables; table migrations is left \
             out, cluster 0 keeps its own and must hold the dump's {} migration ids) into cluster 0's \
             assisted-service PostgreSQL in one transaction; kube_key_namespace/kube_key_name of \
             cluster {} set to {ns}/{}",
            m.counts.rows.get("migrations").copied().unwrap_or(0),
            m.cluster.id,
            cd_name(plan, bundle)
        ));
    };
    for p in plan {
        if !db_done && p.info.rank > DB_RANK {
            push_db(&mut lines);
            db_done = true;
        }
        let held = match p.info.kind {
            "ClusterDeployment" => " (held: hive.openshift.io/reconcile-pause)",
            "AgentClusterInstall" => " (held: spec.holdInstallation)",
            _ => "",
        };
        lines.push(format!("{}{held}", p.resource()));
    }
    if !db_done {
        push_db(&mut lines);
    }
    for p in plan.iter().filter(|p| p.status.is_some()) {
        lines.push(format!("{} /status", p.resource()));
    }
    let files: Vec<_> = artifact_files(bundle);
    let bytes: u64 = files.iter().map(|e| e.size).sum();
    lines.push(format!(
        "PersistentVolumeClaim {ns}/{PVC_NAME}, Pod {ns}/{COPY_POD}: {} files ({bytes} bytes) of {} \
         into {MOUNT_PATH}/{}/, read back, then the pod deleted",
        files.len(),
        ARTIFACT_DIRS.map(|d| d.trim_end_matches('/')).join(", "),
        m.cluster.id
    ));
    let storage = copy::storage_items(&bundle.dir, &m.cluster.id, &m.files);
    if !storage.is_empty() {
        lines.push(format!(
            "assisted-service's storage (WORK_DIR of container assisted-service): {} files ({} bytes) \
             under {}/ as node 0 stored them (logs, Ignition configs, credentials, manifests), read back",
            storage.len(),
            storage.iter().map(|i| i.size).sum::<u64>(),
            m.cluster.id
        ));
    }
    if keep_held {
        lines.push("holds kept (--keep-held)".into());
    } else {
        lines.push("release the holds of the ClusterDeployment and AgentClusterInstall".into());
    }
    lines.push(format!("ConfigMap {ns}/{} phase complete", record::RECORD_NAME));
    lines
        .into_iter()
        .enumerate()
        .map(|(i, l)| format!("{:>2}. {l}", i + 1))
        .collect()
}

/// Rows and tables of the dump that the restore writes (every table but `migrations`).
pub fn restored_rows(rows: &std::collections::BTreeMap<String, u64>) -> (u64, usize) {
    let r = rows.iter().filter(|(t, _)| t.as_str() != "migrations");
    let (mut n, mut t) = (0, 0);
    for (_, c) in r {
        n += c;
        t += 1;
    }
    (n, t)
}

/// The bundle files copied to the PVC.
pub fn artifact_files(bundle: &Bundle) -> Vec<&super::bundle::BundleFileEntry> {
    bundle
        .manifest
        .files
        .iter()
        .filter(|e| ARTIFACT_DIRS.iter().any(|d| e.path.starts_with(d)))
        .collect()
}

/// `migrate import`. With `--dry-run` every read-only check of the real import runs (bundle,
/// CR set, namespace rules, CRDs, the assisted-service database and its schema version, the
/// record, conflicts) after the plan is printed; the exit code is the one the real import would
/// fail with (0 when every check passes), and nothing is changed.
pub async fn run(resolve: Resolve, args: &super::plan::Import) -> Result<u8, Error> {
    let timeout = args.timeout;
    let started = Instant::now();
    let bundle = Bundle::open(&args.bundle)?;
    let crs = read_crs(&bundle)?;
    let (ns, explicit_ns) = namespace_for(&bundle, &crs, args.namespace.as_deref())?;
    if explicit_ns && is_system_namespace(&ns) {
        crate::say!(
            "warning: -n {ns} is a system namespace; the import puts the cluster's credentials \
             Secrets (kubeconfig, kubeadmin password, pull secret) there"
        );
    }
    let plan = plan(&crs, &ns, bundle.checksum())?;
    if args.dry_run {
        let esc = |s: &str| crate::output::escape_for_display(s, 2000);
        let mut out = esc(&format!(
            "Plan for bundle {} (cluster {} {}, checksum {}) into namespace {ns}; nothing changed:",
            bundle.dir.display(),
            bundle.manifest.cluster.name,
            bundle.manifest.cluster.id,
            bundle.checksum()
        ));
        out.push('\n');
        for l in plan_lines(&plan, &bundle, &ns, args.keep_held) {
            out.push_str(&esc(&l));
            out.push('\n');
        }
        crate::output::emit(&out);
    }
    let target = resolve().await?;
    let mut imp = Importer {
        target,
        bundle,
        plan,
        ns,
        explicit_ns,
        args,
        deadline: timeout.map(|t| started + t),
        record: None,
        counts: Counts::default(),
        agents: 0,
        kind_tally: None,
        run_id: record::run_id(),
        record_rv: None,
    };
    let deadline_err = || {
        Error::Timeout(format!(
            "migrate import did not finish within --timeout {}; run it again to resume",
            args.timeout_text
        ))
    };
    if args.dry_run {
        let checks = imp.checks();
        let res = match timeout {
            Some(t) => tokio::time::timeout(t, checks)
                .await
                .unwrap_or_else(|_| Err(deadline_err())),
            None => checks.await,
        };
        return match res {
            Ok(c) => {
                crate::output::emit(&format!(
                    "Dry run: every check passed ({}); the import would {}.\n",
                    match &c.existing {
                        Some(r) if r.phase == Phase::Complete => "this bundle's import is already complete",
                        Some(_) => "this bundle's import is in progress",
                        None => "no import of this bundle yet",
                    },
                    match &c.existing {
                        Some(r) if r.phase == Phase::Complete => "find everything in place",
                        Some(_) => "resume it",
                        None => "run the plan above",
                    }
                ));
                Ok(0)
            }
            Err(e) => {
                crate::output::emit(&format!(
                    "Dry run: the import would fail with exit code {} (error below); nothing changed.\n",
                    e.exit_code()
                ));
                Err(e)
            }
        };
    }
    let work = imp.run();
    let result = match timeout {
        Some(t) => tokio::time::timeout(t, work)
            .await
            .unwrap_or_else(|_| Err(deadline_err())),
        None => work.await,
    };
    if result.is_err() {
        // Let go of the record so the next run need not wait for it to go stale.
        imp.release().await;
    }
    let summary = match result {
        Ok(s) => s,
        // Our own deadline: printed here, since Error::Timeout's hint is about single requests.
        Err(Error::Timeout(m)) if m.contains("--timeout ") => {
            // Whole (the CRD names and what installs them), escaped.
            crate::say!(
                "error: timed out: {}",
                crate::output::escape_for_display(&m, 4000)
            );
            return Ok(crate::error::exit::TIMEOUT);
        }
        Err(e) => return Err(e),
    };
    crate::output::emit(&summary);
    crate::say!("migrate: done in {:.1}s", started.elapsed().as_secs_f64());
    Ok(0)
}

/// What the checks found ([`Importer::checks`]).
struct Checked {
    /// This bundle's record on cluster 0, if any.
    existing: Option<Record>,
    /// The record's resourceVersion as read (None: no record yet), for the locked writes.
    record_rv: Option<String>,
    /// Where the database is.
    db: Db,
    /// Whether the database must be restored.
    restore: bool,
}

#[derive(Debug, Default)]
struct Counts {
    created: u32,
    unchanged: u32,
    replaced: u32,
    status_written: u32,
}

struct Importer<'a> {
    target: KubeTarget,
    bundle: Bundle,
    plan: Vec<Planned>,
    ns: String,
    /// Whether `ns` was given with `-n` (else it is the default, see [`namespace_for`]).
    explicit_ns: bool,
    args: &'a super::plan::Import,
    deadline: Option<Instant>,
    record: Option<Record>,
    counts: Counts,
    /// Agents present after `apply` (created, unchanged or replaced in this run).
    agents: u32,
    /// Objects of the kind being applied: (kind, [created, unchanged, replaced]).
    kind_tally: Option<(&'static str, [u32; 3])>,
    /// This run's holder id ([`record::run_id`]): the record is the import's lock.
    run_id: String,
    /// The record's resourceVersion last read or written by this run.
    record_rv: Option<String>,
}

/// A progress line on stderr, escaped (it carries names from the bundle and the cluster).
fn progress(msg: &str) {
    crate::say!("migrate: {}", crate::output::escape_for_display(msg, 2000));
}

impl Importer<'_> {
    async fn run(&mut self) -> Result<String, Error> {
        let cluster = self.bundle.manifest.cluster.clone();
        progress(&format!(
            "bundle {} verified (cluster {} {}, checksum {})",
            self.bundle.dir.display(),
            cluster.name,
            cluster.id,
            self.bundle.checksum()
        ));
        // 1. checks before any change.
        let Checked {
            existing,
            record_rv,
            db,
            restore,
        } = self.checks().await?;
        self.record_rv = record_rv;

        // 2. namespace and record.
        self.ensure_namespace().await?;
        let mut rec = match existing {
            Some(r) if r.phase == Phase::Complete => {
                progress(&format!(
                    "this bundle's import is already complete (at {}); checking that everything is still there",
                    r.completed.as_deref().unwrap_or("?")
                ));
                r
            }
            Some(r) => {
                progress(&format!(
                    "resuming this bundle's import (done: {})",
                    if r.steps_done.is_empty() {
                        "nothing".into()
                    } else {
                        r.steps_done.join(", ")
                    }
                ));
                r
            }
            None => {
                let mut r = Record::new(
                    self.bundle.checksum(),
                    &cluster.id,
                    &cd_name(&self.plan, &self.bundle),
                    serde_json::to_value(&self.bundle.manifest.counts).unwrap_or(Value::Null),
                );
                r.bundle_created = Some(self.bundle.manifest.created.clone());
                r
            }
        };
        if rec.assisted_service.is_none() {
            rec.assisted_service = Some(match &db {
                Db::Pod { at, .. } => record::AssistedRef {
                    namespace: at.namespace.clone(),
                    pod: at.pod.clone(),
                },
                Db::Url(_) => record::AssistedRef {
                    namespace: String::new(),
                    pod: "db-url".into(),
                },
            });
        }
        self.record = Some(rec);
        self.step_done("namespace").await?;

        // 3-5. objects and the database, in order.
        let plan = self.plan.clone();
        let mut db_done = false;
        let mut created_now: Vec<usize> = Vec::new();
        let mut step_of_prev: Option<&str> = None;
        for (i, p) in plan.iter().enumerate() {
            if !db_done && p.info.rank > DB_RANK {
                self.flush_tally();
                self.finish_steps_before(step_of_prev, "db").await?;
                self.restore_db(&db, restore).await?;
                db_done = true;
            }
            if let Some(prev) = step_of_prev.filter(|s| *s != p.info.step) {
                self.flush_tally();
                self.step_done(prev).await?;
            }
            step_of_prev = Some(p.info.step);
            if self.apply(p).await? {
                created_now.push(i);
            }
            if p.info.kind == "Agent" {
                self.agents += 1;
            }
        }
        if let Some(prev) = step_of_prev {
            self.flush_tally();
            self.step_done(prev).await?;
        }
        if !db_done {
            self.restore_db(&db, restore).await?;
        }
        // Steps of kinds the bundle has none of.
        for s in [
            "secrets",
            "clusterimageset",
            "clusterdeployment",
            "agentclusterinstall",
            "infraenv",
            "nmstateconfigs",
            "agents",
        ] {
            if !self.rec().done(s) {
                self.step_done(s).await?;
            }
        }

        // 6. status.
        if !self.rec().done("status") {
            for p in plan.iter().filter(|p| p.status.is_some()) {
                self.write_status(p).await?;
            }
            self.step_done("status").await?;
        } else {
            // Objects made again in this run (deleted by someone since) get their status too.
            for i in created_now {
                if plan[i].status.is_some() {
                    self.write_status(&plan[i]).await?;
                }
            }
        }

        // 7. artifacts.
        if !self.rec().done("artifacts") {
            self.copy_artifacts(&db).await?;
            self.step_done("artifacts").await?;
        } else {
            progress("artifacts already on the volume (record)");
        }
        if !self.rec().done("storage") {
            if self.copy_to_storage(&db).await? {
                self.step_done("storage").await?;
            }
        } else {
            progress("node 0's files already in assisted-service's storage (record)");
        }

        // 8. holds, record.
        if !self.args.keep_held {
            self.release_holds().await?;
            self.step_done("release-holds").await?;
        } else {
            progress("holds kept (--keep-held)");
        }
        // What cluster 0 holds now (the summary reports it, not the bundle's counts).
        let tables: Vec<String> = self
            .bundle
            .manifest
            .counts
            .rows
            .keys()
            .filter(|t| t.as_str() != "migrations")
            .cloned()
            .collect();
        let (have_rows, errs) = super::exec::table_counts(&db, &self.target, &tables).await;
        for e in errs {
            progress(&format!("warning: {e}"));
        }
        let already = self.rec().phase == Phase::Complete;
        if !already {
            self.ensure_still_held().await?;
            let rec = self.record.as_mut().expect("record");
            rec.complete();
            rec.pvc = Some(PVC_NAME.into());
            self.save_record().await?;
            progress(&format!("record {}/{} complete", self.ns, record::RECORD_NAME));
        }
        Ok(self.summary(already, &have_rows))
    }

    /// Every read-only check before the first change (also what `--dry-run` runs): the
    /// namespace rules, the CRDs, this bundle's record, conflicts, the database (found, schema
    /// version, whether it holds the cluster already).
    async fn checks(&self) -> Result<Checked, Error> {
        // The dump first: a crafted or damaged one is refused (exit 3) before anything is made
        // on cluster 0, and `--dry-run` says so too. restore_db checks it again as it streams.
        let m = &self.bundle.manifest;
        let scope = restore::Scope::new(&m.cluster.id, &m.cluster.infra_env_ids);
        let mut dump = self.bundle.open_file("db/dump.sql")?;
        let sha = self.bundle.entry("db/dump.sql").map(|e| e.sha256.clone());
        let expect = restore::Expect {
            sha256: sha.as_deref(),
            schema_version: Some(&m.source.schema_version),
            migration_ids: Some(&m.source.migration_ids),
        };
        let found = restore::check_dump(DUMP_FILE, &mut dump, &scope, &expect)?;
        check_listed_rows(&m.cluster.infra_env_ids, &m.cluster.host_ids, &found)?;
        // The SQL the restore stream adds after the rows (the verification block, the kube keys)
        // is built from what the dump holds: built here too, so whatever it refuses (an id
        // holding the block's dollar-quote tag, a NUL) is refused before any change.
        restore::verify_sql(&scope, &found)?;
        after_rows_sql(
            &m.cluster.id,
            &cd_name(&self.plan, &self.bundle),
            &self.ns,
            &found,
        )?;
        check_restored_counts(&m.cluster.host_ids, &m.counts.rows, &found)?;
        let (existing, record_rv) = match self.existing_record().await? {
            Some((r, rv)) => (Some(r), rv),
            None => (None, None),
        };
        self.check_namespace(existing.as_ref()).await?;
        self.check_crds().await?;
        self.check_conflicts(existing.as_ref()).await?;
        let db = match &self.args.db_url {
            Some(u) => Db::Url(u.clone()),
            None => exec::find_assisted_db(&self.target).await?,
        };
        progress(&format!("assisted-service database: {}", db.describe()));
        self.check_schema(&db, &found).await?;
        let restore = self.db_state(&db, existing.as_ref()).await?;
        Ok(Checked {
            existing,
            record_rv,
            db,
            restore,
        })
    }

    /// A default namespace (no `-n`) that exists must be one import made (label
    /// [`NAMESPACE_LABEL`]) or hold this bundle's record; else it is someone else's and the user
    /// is told to pass `-n`. Errors: [`Error::BadObject`] (exit 4).
    async fn check_namespace(&self, existing: Option<&Record>) -> Result<(), Error> {
        if self.explicit_ns || existing.is_some() {
            return Ok(());
        }
        let api: Api<Namespace> = Api::all(self.target.client.clone());
        let r = ResourceRef::cluster("Namespace", &self.ns);
        let Some(n) = api
            .get_opt(&self.ns)
            .await
            .map_err(|e| classify(e, "read", r.clone(), &self.target))?
        else {
            return Ok(());
        };
        let ours = n
            .metadata
            .labels
            .as_ref()
            .and_then(|l| l.get(NAMESPACE_LABEL))
            .is_some_and(|v| v == "true");
        if ours {
            return Ok(());
        }
        Err(Error::BadObject {
            resource: r,
            message: format!(
                "exists and was not created by migrate import (no label {NAMESPACE_LABEL}=true, no \
                 record of this bundle): the default namespace (the cluster's name) is someone \
                 else's; pass -n NAMESPACE explicitly"
            ),
        })
    }

    /// Counts one object of `kind`: 0 created, 1 unchanged, 2 replaced.
    fn tally(&mut self, kind: &'static str, what: usize) {
        if self.kind_tally.as_ref().is_some_and(|(k, _)| *k != kind) {
            self.flush_tally();
        }
        let t = self.kind_tally.get_or_insert((kind, [0; 3]));
        t.1[what] += 1;
    }

    /// Prints the progress line of the kind just applied (`Agent: 50 created, 0 unchanged`).
    fn flush_tally(&mut self) {
        if let Some((kind, [c, u, r])) = self.kind_tally.take() {
            let mut line = format!("{kind}: {c} created, {u} unchanged");
            if r > 0 {
                line.push_str(&format!(", {r} replaced (--force)"));
            }
            progress(&line);
        }
    }

    fn rec(&self) -> &Record {
        self.record.as_ref().expect("record")
    }

    /// The summary on stdout: what cluster 0 holds after this run (`have_rows`: rows per
    /// restored table read back from cluster 0's database; None where unreadable).
    fn summary(&self, already: bool, have_rows: &std::collections::BTreeMap<String, Option<u64>>) -> String {
        let m = &self.bundle.manifest;
        let c = &self.counts;
        let (bundle_rows, tables) = restored_rows(&m.counts.rows);
        let known: Vec<u64> = have_rows.values().flatten().copied().collect();
        let database = if known.len() == have_rows.len() && !have_rows.is_empty() {
            format!(
                "cluster 0 holds {} rows in the {tables} restored tables (the bundle has {bundle_rows}; \
                 table migrations is cluster 0's own, not restored)",
                known.iter().sum::<u64>()
            )
        } else {
            format!(
                "{tables} tables restored (bundle: {bundle_rows} rows); cluster 0's row counts could not \
                 all be read (warnings above)"
            )
        };
        let events = match have_rows.get("events") {
            Some(Some(n)) => format!(
                "{n} in cluster 0's events table (the bundle has {})",
                m.counts.events
            ),
            _ => format!("? (the bundle has {})", m.counts.events),
        };
        let mut s = String::new();
        s.push_str(&crate::output::key_values(&[
            (
                "Cluster",
                format!(
                    "{} ({})",
                    crate::output::display(&m.cluster.name),
                    crate::output::display(&m.cluster.id)
                ),
            ),
            ("Namespace", crate::output::display(&self.ns)),
            ("Bundle", self.bundle.checksum().to_string()),
            (
                "Phase",
                if already && c.created == 0 && c.replaced == 0 {
                    "already complete (nothing to do)".into()
                } else if already {
                    "already complete; objects missing since were made again".into()
                } else {
                    "complete".into()
                },
            ),
            (
                "Objects",
                format!(
                    "{} created, {} unchanged, {} replaced, {} status written",
                    c.created, c.unchanged, c.replaced, c.status_written
                ),
            ),
            ("Database", database),
            (
                "Hosts",
                format!("{} Agents in {}", self.agents, crate::output::display(&self.ns)),
            ),
            ("Events", events),
            (
                "Artifacts",
                format!(
                    "PersistentVolumeClaim {}/{PVC_NAME} at {}/",
                    crate::output::display(&self.ns),
                    crate::output::display(&m.cluster.id)
                ),
            ),
            (
                "Holds",
                if self.args.keep_held {
                    "kept (--keep-held)".into()
                } else {
                    "released".into()
                },
            ),
        ]));
        s.push('\n');
        s
    }

    /// Err when `r` (read from cluster 0) is another bundle's, or this bundle's held by another
    /// run that may still be going.
    fn lock_error(&self, r: &Record) -> Result<(), Error> {
        let resource = ResourceRef::namespaced("ConfigMap", &self.ns, record::RECORD_NAME);
        if !r.is_of(self.bundle.checksum()) {
            return Err(Error::BadObject {
                resource,
                message: other_bundle_message(r, &self.bundle, &self.ns),
            });
        }
        let now = time::OffsetDateTime::now_utc();
        if let Some(why) = r.held_by_other(&self.run_id, now, record::STALE_AFTER) {
            return Err(Error::BadObject {
                resource,
                message: format!(
                    "another import is in progress ({why}); {}",
                    record::manual_release_hint(&self.ns)
                ),
            });
        }
        Ok(())
    }

    /// Writes the record as this run's lock: only over the version this run read or wrote
    /// last (created when there was none). Someone else's write in between (another import)
    /// is re-read and reported ([`Importer::lock_error`]); exit 4.
    async fn save_record(&mut self) -> Result<(), Error> {
        let resource = ResourceRef::namespaced("ConfigMap", &self.ns, record::RECORD_NAME);
        let run_id = self.run_id.clone();
        let rec = self.record.as_mut().expect("record");
        rec.holder = Some(run_id);
        rec.heartbeat = Some(record::now_rfc3339());
        rec.released = false;
        let rec = rec.clone();
        match record::write_if(&self.target.client, &self.ns, &rec, self.record_rv.as_deref()).await {
            Ok(rv) => {
                self.record_rv = rv;
                Ok(())
            }
            Err(record::WriteError::Kube(e)) => Err(classify(e, "write", resource, &self.target)),
            Err(record::WriteError::Conflict) => {
                let now = match record::read(&self.target.client, &self.ns).await {
                    Ok(Some((r, _))) => Some(r),
                    _ => None,
                };
                if let Some(r) = &now {
                    self.lock_error(r)?;
                }
                Err(Error::BadObject {
                    resource,
                    message: format!(
                        "another import is in progress or was: the record changed while this run held it \
                         (now {}); run the import again",
                        match &now {
                            Some(r) => format!(
                                "held by {}, started {}",
                                r.holder.as_deref().unwrap_or("?"),
                                r.started
                            ),
                            None => "deleted".into(),
                        }
                    ),
                })
            }
        }
    }

    /// Re-reads the record and checks it is still this run's lock ([`record::lock_lost`]),
    /// before the database restore and before `complete`: a run whose heartbeat was thought
    /// stale and taken over stops here. Errors: lost, or the read failed: exit 4.
    async fn ensure_still_held(&self) -> Result<(), Error> {
        let resource = ResourceRef::namespaced("ConfigMap", &self.ns, record::RECORD_NAME);
        let now = match record::read(&self.target.client, &self.ns).await {
            Ok(r) => r,
            Err(record::ReadError::Bad(e)) => return Err(e),
            Err(record::ReadError::Kube(e)) => return Err(classify(e, "read", resource, &self.target)),
        };
        let now = now
            .as_ref()
            .map(|(r, cm)| (r, cm.metadata.resource_version.as_deref()));
        match record::lock_lost(&self.run_id, self.record_rv.as_deref(), now) {
            None => Ok(()),
            Some(why) => Err(Error::BadObject {
                resource,
                message: format!("{why}; this run stops here (the holder now carries on; run the import again if it fails)"),
            }),
        }
    }

    /// After a failed run: marks the record released (best effort, only over this run's own
    /// last write), so the next run takes over at once.
    async fn release(&mut self) {
        let Some(rv) = self.record_rv.clone() else {
            return;
        };
        let Some(rec) = self.record.as_mut() else {
            return;
        };
        if rec.phase == Phase::Complete {
            return;
        }
        rec.released = true;
        rec.heartbeat = Some(record::now_rfc3339());
        let rec = rec.clone();
        let _ = record::write_if(&self.target.client, &self.ns, &rec, Some(&rv)).await;
    }

    /// Records `step` (writing the record when it is new) and honours the test hook.
    async fn step_done(&mut self, step: &str) -> Result<(), Error> {
        let new = self.record.as_mut().expect("record").mark(step);
        if new {
            self.save_record().await?;
        }
        if new && std::env::var(STOP_AFTER_ENV).ok().as_deref() == Some(step) {
            return Err(Error::Unexpected(format!(
                "stopped after step {step} ({STOP_AFTER_ENV}, a test hook standing for a killed run)"
            )));
        }
        Ok(())
    }

    /// Marks the steps that come before `next` in [`STEPS`] and are not done (kinds absent).
    async fn finish_steps_before(&mut self, prev: Option<&str>, next: &str) -> Result<(), Error> {
        if let Some(p) = prev {
            self.step_done(p).await?;
        }
        for s in STEPS.iter().take_while(|s| **s != next) {
            if !self.rec().done(s) {
                self.step_done(s).await?;
            }
        }
        Ok(())
    }

    fn remaining(&self) -> Option<Duration> {
        self.deadline.map(|d| d.saturating_duration_since(Instant::now()))
    }

    async fn check_crds(&self) -> Result<(), Error> {
        let needed: Vec<String> = {
            let mut v: Vec<String> = self.plan.iter().filter_map(|p| p.info.crd_name()).collect();
            v.sort();
            v.dedup();
            v
        };
        let crd = ApiResource::from_gvk_with_plural(
            &GroupVersionKind::gvk("apiextensions.k8s.io", "v1", "CustomResourceDefinition"),
            "customresourcedefinitions",
        );
        let api: Api<DynamicObject> = Api::all_with(self.target.client.clone(), &crd);
        let mut said = false;
        loop {
            let mut missing = Vec::new();
            for n in &needed {
                match api.get_opt(n).await {
                    Ok(Some(_)) => {}
                    Ok(None) => missing.push(n.clone()),
                    Err(e) => {
                        return Err(classify(
                            e,
                            "read",
                            ResourceRef::cluster("CustomResourceDefinition", n),
                            &self.target,
                        ))
                    }
                }
            }
            if missing.is_empty() {
                if said {
                    progress("CRDs present");
                }
                return Ok(());
            }
            let why = crd_installers(&missing);
            if !self.args.wait_for_crds {
                return Err(Error::NotFound {
                    resource: ResourceRef::cluster("CustomResourceDefinition", &missing.join(", ")),
                    why: Some(format!(
                        "{why}; install and configure them first (an AgentServiceConfig makes the \
                         infrastructure operator start assisted-service), or pass --wait-for-crds"
                    )),
                });
            }
            if !said {
                progress(&format!("waiting for CRDs {} ({why})", missing.join(", ")));
                said = true;
            }
            // Polled until the deadline (the last look CRD_MARGIN before it, so that this
            // message and not the whole run's deadline is what the user reads).
            let remaining = self.remaining().map(|r| r.saturating_sub(CRD_MARGIN));
            if remaining.is_some_and(|r| r.is_zero()) {
                return Err(Error::Timeout(format!(
                    "CRDs {} still missing after --timeout {} ({why})",
                    missing.join(", "),
                    self.args.timeout_text
                )));
            }
            let nap = remaining.map_or(CRD_POLL, |r| r.min(CRD_POLL));
            tokio::time::sleep(nap).await;
        }
    }

    /// This bundle's record and its resourceVersion. Errors: another bundle's record, or this
    /// bundle's held by another run that may still be going ([`Record::held_by_other`]): exit 4.
    async fn existing_record(&self) -> Result<Option<(Record, Option<String>)>, Error> {
        match record::read(&self.target.client, &self.ns).await {
            Ok(None) => Ok(None),
            Ok(Some((r, cm))) => {
                self.lock_error(&r)?;
                Ok(Some((r, cm.metadata.resource_version)))
            }
            Err(record::ReadError::Bad(e)) => Err(e),
            Err(record::ReadError::Kube(e)) => Err(classify(
                e,
                "read",
                ResourceRef::namespaced("ConfigMap", &self.ns, record::RECORD_NAME),
                &self.target,
            )),
        }
    }

    /// Guarded objects (CD, ACI, InfraEnv, Agent) of this cluster that are not this bundle's:
    /// at their planned names, Agents named by the bundle's host ids in any namespace, and
    /// ClusterDeployments in any namespace whose infraID is this cluster's id.
    async fn check_conflicts(&self, _existing: Option<&Record>) -> Result<(), Error> {
        let mut errors = Vec::new();
        let sum = self.bundle.checksum();
        let cid = &self.bundle.manifest.cluster.id;
        let not_ours = |o: &DynamicObject| -> bool {
            o.metadata
                .annotations
                .as_ref()
                .and_then(|a| a.get(BUNDLE_ANNOTATION))
                .is_none_or(|v| !v.eq_ignore_ascii_case(sum))
        };
        let conflict = |r: ResourceRef, why: String| Error::BadObject {
            resource: r,
            message: format!(
                "{why}; it was not created by this bundle's import (annotation {BUNDLE_ANNOTATION}): \
                 refusing to import over it (cluster 0's assisted-service already has this cluster)"
            ),
        };
        for kind in ["ClusterDeployment", "AgentClusterInstall", "InfraEnv", "Agent"] {
            let Some(info) = KINDS.iter().find(|k| k.kind == kind) else {
                continue;
            };
            let ar = info.api_resource();
            let all: Api<DynamicObject> = Api::all_with(self.target.client.clone(), &ar);
            let list = all
                .list(&ListParams::default())
                .await
                .map_err(|e| classify(e, "list", ResourceRef::list(&format!("{kind}s")), &self.target))?;
            let planned: Vec<&Planned> = self.plan.iter().filter(|p| p.info.kind == kind).collect();
            for o in &list.items {
                let name = o.metadata.name.clone().unwrap_or_default();
                let ons = o.metadata.namespace.clone().unwrap_or_default();
                let r = ResourceRef::namespaced(kind, &ons, &name);
                let same_place = ons == self.ns && planned.iter().any(|p| p.name == name);
                let same_host = kind == "Agent" && self.bundle.manifest.cluster.host_ids.contains(&name);
                let same_cluster = kind == "ClusterDeployment"
                    && o.data
                        .pointer("/spec/clusterMetadata/infraID")
                        .and_then(Value::as_str)
                        == Some(cid);
                let marked = o
                    .metadata
                    .annotations
                    .as_ref()
                    .and_then(|a| a.get(CLUSTER_ANNOTATION))
                    .is_some_and(|v| v == cid);
                if !(same_place || same_host || same_cluster || marked) {
                    continue;
                }
                if not_ours(o) {
                    let why = if same_host && !same_place {
                        format!("an Agent for host {name} of this cluster exists")
                    } else if same_cluster && !same_place {
                        format!("a ClusterDeployment with infraID {cid} (this cluster) exists")
                    } else {
                        "exists".to_string()
                    };
                    errors.push(conflict(r, why));
                } else if ons != self.ns {
                    errors.push(Error::BadObject {
                        resource: r,
                        message: format!(
                            "this bundle was imported into namespace {ons}, not {}: use --namespace {ons}",
                            self.ns
                        ),
                    });
                }
            }
        }
        match errors.len() {
            0 => Ok(()),
            1 => Err(errors.remove(0)),
            _ => Err(Error::Many(errors)),
        }
    }

    /// Reads cluster 0's `migrations` ids and the columns of the dump's restored tables and
    /// refuses what [`check_target_schema`] refuses. Errors: [`Error::Api`] (exit 4) when they
    /// cannot be read or `migrations` is empty (assisted-service has not created its schema).
    async fn check_schema(&self, db: &Db, found: &restore::Checked) -> Result<(), Error> {
        let pg = || ResourceRef {
            kind: "PostgreSQL".into(),
            namespace: None,
            name: Some(db.describe()),
        };
        let ids: BTreeSet<String> = db
            .query(Some(&self.target), "SELECT id FROM public.migrations")
            .await
            .map_err(|e| match e {
                Error::Api { message, .. } => Error::Api {
                    verb: "read the migrations of".into(),
                    resource: pg(),
                    message: format!(
                        "{message} (has assisted-service on cluster 0 started once and created its schema?)"
                    ),
                },
                other => other,
            })?
            .into_iter()
            .filter(|l| !l.is_empty())
            .collect();
        if ids.is_empty() {
            return Err(Error::Api {
                verb: "read the migrations of".into(),
                resource: pg(),
                message: "table migrations is empty: assisted-service on cluster 0 has not created its \
                          schema yet; wait until it has started once"
                    .into(),
            });
        }
        let tables: Vec<String> = found
            .columns
            .keys()
            .map(|t| sql_literal(t))
            .collect::<Result<_, _>>()?;
        let mut columns: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
        if !tables.is_empty() {
            let lines = db
                .query(
                    Some(&self.target),
                    &format!(
                        "SELECT table_name || '|' || column_name FROM information_schema.columns \
                         WHERE table_schema = 'public' AND table_name IN ({})",
                        tables.join(", ")
                    ),
                )
                .await?;
            for l in lines {
                if let Some((t, c)) = l.split_once('|') {
                    columns.entry(t.to_string()).or_default().insert(c.to_string());
                }
            }
        }
        check_target_schema(found, &ids, &columns)?;
        progress(&format!(
            "schema: cluster 0 has every column of the dump's {} tables and its {} migrations ({} of its own)",
            found.columns.len(),
            found.migration_ids.len(),
            ids.len()
        ));
        Ok(())
    }

    /// Whether the database must be restored: Ok(true) restore, Ok(false) already restored by
    /// this bundle's import. The cluster's row there but not ours → refused.
    async fn db_state(&self, db: &Db, existing: Option<&Record>) -> Result<bool, Error> {
        let cid = sql_literal(&self.bundle.manifest.cluster.id)?;
        let lines = db
            .query(
                Some(&self.target),
                &format!(
                    "SELECT coalesce(kube_key_name, '') || '/' || coalesce(kube_key_namespace, '') \
                     FROM public.clusters WHERE id = {cid}"
                ),
            )
            .await?;
        let Some(keys) = lines.first().map(|l| l.trim().to_string()) else {
            if existing.is_some_and(|r| r.done("db")) {
                progress("warning: the record says the database was restored, but cluster 0's database has no row of this cluster: restoring again");
            }
            return Ok(true);
        };
        let ours = format!("{}/{}", cd_name(&self.plan, &self.bundle), self.ns);
        let by_record = existing.is_some_and(|r| r.done("db"));
        // Committed, then killed before the record said so: the keys are the ones only this
        // import writes (the row's id is node 0's, which cluster 0's controllers never create).
        let by_keys = existing.is_some() && keys == ours;
        if by_record || by_keys {
            return Ok(false);
        }
        Err(Error::BadObject {
            resource: ResourceRef {
                kind: "PostgreSQL".into(),
                namespace: None,
                name: Some(db.describe()),
            },
            message: format!(
                "already holds cluster {} (kube key {keys:?}) and no import of this bundle restored \
                 it: refusing to restore over it",
                self.bundle.manifest.cluster.id
            ),
        })
    }

    async fn restore_db(&mut self, db: &Db, restore: bool) -> Result<(), Error> {
        if self.rec().done("db") || !restore {
            progress("database already restored by this bundle's import");
            return self.step_done("db").await;
        }
        self.ensure_still_held().await?;
        let t = Instant::now();
        let m = &self.bundle.manifest;
        let (cid, cdn, ns) = (
            m.cluster.id.clone(),
            cd_name(&self.plan, &self.bundle),
            self.ns.clone(),
        );
        let mut dump = self.bundle.open_file("db/dump.sql")?;
        let size = self.bundle.entry("db/dump.sql").map(|e| e.size).unwrap_or(0);
        progress(&format!(
            "restoring the database ({size} bytes of dump) in one transaction"
        ));
        // The stream is built from the dump's checked COPY data (super::restore), hashed again
        // while read; a refusal on the way ends it with ROLLBACK and is the error (exit 3).
        let scope = restore::Scope::new(&m.cluster.id, &m.cluster.infra_env_ids);
        let sha = self.bundle.entry("db/dump.sql").map(|e| e.sha256.clone());
        let schema = m.source.schema_version.clone();
        let migration_ids = m.source.migration_ids.clone();
        let found = std::sync::Arc::new(std::sync::Mutex::new((restore::Checked::default(), None)));
        let slot = found.clone();
        let producer = Producer::spawn(move |w| {
            let expect = restore::Expect {
                sha256: sha.as_deref(),
                schema_version: Some(&schema),
                migration_ids: Some(&migration_ids),
            };
            let mut checked = restore::Checked::default();
            let r = restore::write_stream(
                DUMP_FILE,
                &mut dump,
                &scope,
                &expect,
                &|c| after_rows_sql(&cid, &cdn, &ns, c),
                w,
                &mut checked,
            );
            let failed = r.is_err();
            *slot.lock().unwrap_or_else(|p| p.into_inner()) = (checked, r.err());
            match failed {
                true => Err(std::io::Error::other("the restore stream stopped")),
                false => Ok(()),
            }
        });
        let ran = db
            .psql(
                Some(&self.target),
                &["-q", "-v", "ON_ERROR_STOP=1", "-f", "-"],
                Some(producer),
            )
            .await;
        let (checked, refused) = std::mem::take(&mut *found.lock().unwrap_or_else(|p| p.into_inner()));
        if let Some(e @ Error::InvalidInput { .. }) = refused {
            return Err(e);
        }
        let out = ran?;
        if out.code != 0 {
            // The server refused the data (psql exits 3 on a script error): an invalid bundle.
            if let Some(table) = checked.copy_error(&out.stderr) {
                return Err(Error::InvalidInput {
                    field: DUMP_FILE.into(),
                    message: format!(
                        "cluster 0's database refused the rows of table {table}; nothing was restored: {}",
                        out.stderr.trim()
                    ),
                });
            }
            return Err(db.failed("restore the dump into", &out));
        }
        progress(&restore_note(&checked));
        // The keys must have reached the cluster's row.
        let cid = sql_literal(&m.cluster.id)?;
        let check = db
            .query(
                Some(&self.target),
                &format!("SELECT coalesce(kube_key_name, '') FROM public.clusters WHERE id = {cid}"),
            )
            .await?;
        if check.first().map(|s| s.trim()) != Some(cd_name(&self.plan, &self.bundle).as_str()) {
            return Err(Error::Api {
                verb: "restore".into(),
                resource: ResourceRef {
                    kind: "PostgreSQL".into(),
                    namespace: None,
                    name: Some(db.describe()),
                },
                message: format!(
                    "after the restore the clusters row {} has kube_key_name {:?}: the dump does not hold this cluster",
                    m.cluster.id,
                    check.first()
                ),
            });
        }
        progress(&format!("database restored in {:.1}s", t.elapsed().as_secs_f64()));
        self.step_done("db").await
    }

    async fn ensure_namespace(&self) -> Result<(), Error> {
        let api: Api<Namespace> = Api::all(self.target.client.clone());
        let r = ResourceRef::cluster("Namespace", &self.ns);
        match api.get_opt(&self.ns).await {
            Ok(Some(_)) => Ok(()),
            Ok(None) => {
                let n = Namespace {
                    metadata: kube::api::ObjectMeta {
                        name: Some(self.ns.clone()),
                        labels: Some([(NAMESPACE_LABEL.to_string(), "true".to_string())].into()),
                        ..Default::default()
                    },
                    ..Default::default()
                };
                match create_strict(&self.target.client, &(), None, &n).await {
                    Ok(_) => {
                        progress(&format!("created Namespace {}", self.ns));
                        Ok(())
                    }
                    Err(kube::Error::Api(s)) if s.code == 409 => Ok(()),
                    Err(e) => Err(classify(e, "create", r, &self.target)),
                }
            }
            Err(e) => Err(classify(e, "read", r, &self.target)),
        }
    }

    fn api(&self, p: &Planned) -> Api<DynamicObject> {
        let ar = p.info.api_resource();
        match &p.namespace {
            Some(ns) => Api::namespaced_with(self.target.client.clone(), ns, &ar),
            None => Api::all_with(self.target.client.clone(), &ar),
        }
    }

    /// Creates `p`, or leaves an identical one alone, or replaces a different one (--force).
    /// Returns whether it was created now.
    async fn apply(&mut self, p: &Planned) -> Result<bool, Error> {
        let api = self.api(p);
        let existing = api
            .get_opt(&p.name)
            .await
            .map_err(|e| classify(e, "read", p.resource(), &self.target))?;
        let Some(have) = existing else {
            let obj: DynamicObject =
                serde_json::from_value(p.desired.clone()).map_err(|e| Error::InvalidInput {
                    field: format!("bundle file crs/crs.json {}", p.resource()),
                    message: e.to_string(),
                })?;
            let ar = p.info.api_resource();
            match create_strict(&self.target.client, &ar, p.namespace.as_deref(), &obj).await {
                Ok(_) => {}
                Err(kube::Error::Api(s)) if s.code == 409 => {
                    return Err(Error::BadObject {
                        resource: p.resource(),
                        message: "created by someone else meanwhile; run the import again".into(),
                    })
                }
                Err(e) => return Err(classify(e, "create", p.resource(), &self.target)),
            }
            self.counts.created += 1;
            self.tally(p.info.kind, 0);
            tracing::info!("created {}", p.resource());
            return Ok(true);
        };
        let have_v = serde_json::to_value(&have).unwrap_or(Value::Null);
        let Some(diff) = first_difference(&comparable(p), &have_v, "") else {
            self.counts.unchanged += 1;
            self.tally(p.info.kind, 1);
            return Ok(false);
        };
        let diff = diff.trim_start_matches('.').to_string();
        if p.info.is_guarded() {
            let ours = have
                .metadata
                .annotations
                .as_ref()
                .and_then(|a| a.get(BUNDLE_ANNOTATION))
                .is_some_and(|v| v.eq_ignore_ascii_case(self.bundle.checksum()));
            if !ours {
                return Err(Error::BadObject {
                    resource: p.resource(),
                    message: format!("exists and was not created by this bundle's import ({diff} differs)"),
                });
            }
        }
        if !self.args.force {
            return Err(Error::BadObject {
                resource: p.resource(),
                message: format!(
                    "exists and differs from the bundle at {diff}: pass --force to replace it with the \
                     bundle's (never deleted), or remove it"
                ),
            });
        }
        let mut want = p.desired.clone();
        want["metadata"]["resourceVersion"] = have_v["metadata"]["resourceVersion"].clone();
        for k in ["finalizers", "ownerReferences"] {
            if let Some(v) = have_v["metadata"].get(k) {
                want["metadata"][k] = v.clone();
            }
        }
        if let Some(v) = have_v.get("status") {
            want["status"] = v.clone();
        }
        // A released hold stays released.
        if p.info.kind == "ClusterDeployment"
            && have_v
                .pointer(&format!(
                    "/metadata/annotations/{}",
                    PAUSE_ANNOTATION.replace('/', "~1")
                ))
                .is_none()
        {
            if let Some(a) = want["metadata"]["annotations"].as_object_mut() {
                a.remove(PAUSE_ANNOTATION);
            }
        }
        if p.info.kind == "AgentClusterInstall" {
            if let Some(h) = have_v.pointer("/spec/holdInstallation") {
                want["spec"]["holdInstallation"] = h.clone();
            }
        }
        let obj: DynamicObject =
            serde_json::from_value(want).map_err(|e| Error::Unexpected(e.to_string()))?;
        let url = format!(
            "{}/{}",
            <DynamicObject as kube::Resource>::url_path(&p.info.api_resource(), p.namespace.as_deref()),
            p.name
        );
        let body = serde_json::to_vec(&obj).map_err(|e| Error::Unexpected(e.to_string()))?;
        let req = http::Request::put(format!(
            "{url}?fieldManager={}&fieldValidation=Strict",
            crate::kube::write::FIELD_MANAGER
        ))
        .header(http::header::CONTENT_TYPE, "application/json")
        .body(body)
        .map_err(|e| Error::Unexpected(e.to_string()))?;
        self.target
            .client
            .request::<DynamicObject>(req)
            .await
            .map_err(|e| classify(e, "replace", p.resource(), &self.target))?;
        self.counts.replaced += 1;
        self.tally(p.info.kind, 2);
        progress(&format!("replaced {} (--force; {diff} differed)", p.resource()));
        Ok(false)
    }

    async fn write_status(&mut self, p: &Planned) -> Result<(), Error> {
        let Some(st) = &p.status else { return Ok(()) };
        let api = self.api(p);
        api.patch_status(&p.name, &patch_params(), &Patch::Merge(json!({ "status": st })))
            .await
            .map_err(|e| classify(e, "write the status of", p.resource(), &self.target))?;
        self.counts.status_written += 1;
        Ok(())
    }

    async fn release_holds(&mut self) -> Result<(), Error> {
        for p in self.plan.clone().iter() {
            let patch = match p.info.kind {
                "ClusterDeployment" => json!({"metadata": {"annotations": {PAUSE_ANNOTATION: null}}}),
                "AgentClusterInstall" => json!({"spec": {"holdInstallation": false}}),
                _ => continue,
            };
            let api = self.api(p);
            let have = api
                .get(&p.name)
                .await
                .map_err(|e| classify(e, "read", p.resource(), &self.target))?;
            let held = match p.info.kind {
                "ClusterDeployment" => have
                    .metadata
                    .annotations
                    .as_ref()
                    .is_some_and(|a| a.contains_key(PAUSE_ANNOTATION)),
                _ => have.data.pointer("/spec/holdInstallation") == Some(&json!(true)),
            };
            if !held {
                continue;
            }
            api.patch(&p.name, &patch_params(), &Patch::Merge(patch))
                .await
                .map_err(|e| classify(e, "release the hold of", p.resource(), &self.target))?;
            progress(&format!("released the hold of {}", p.resource()));
        }
        Ok(())
    }

    async fn copy_artifacts(&mut self, db: &Db) -> Result<(), Error> {
        let files: Vec<super::bundle::BundleFileEntry> =
            artifact_files(&self.bundle).into_iter().cloned().collect();
        let bytes: u64 = files.iter().map(|e| e.size).sum();
        let t = Instant::now();
        let client = self.target.client.clone();
        let ns = self.ns.clone();
        // PVC.
        let pvcs: Api<PersistentVolumeClaim> = Api::namespaced(client.clone(), &ns);
        let pvc_ref = ResourceRef::namespaced("PersistentVolumeClaim", &ns, PVC_NAME);
        if pvcs
            .get_opt(PVC_NAME)
            .await
            .map_err(|e| classify(e, "read", pvc_ref.clone(), &self.target))?
            .is_none()
        {
            let mib = (bytes * 12 / 10) / (1 << 20) + 256;
            let pvc: PersistentVolumeClaim = serde_json::from_value(json!({
                "apiVersion": "v1", "kind": "PersistentVolumeClaim",
                "metadata": {"name": PVC_NAME, "namespace": ns,
                             "labels": {record::RECORD_LABEL: "true"},
                             "annotations": {BUNDLE_ANNOTATION: self.bundle.checksum()}},
                "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": format!("{mib}Mi")}}}
            }))
            .map_err(|e| Error::Unexpected(e.to_string()))?;
            create_strict(&client, &(), Some(&ns), &pvc)
                .await
                .map_err(|e| classify(e, "create", pvc_ref.clone(), &self.target))?;
            progress(&format!(
                "created PersistentVolumeClaim {ns}/{PVC_NAME} ({mib}Mi)"
            ));
        }
        // Pod.
        let image = self.copy_image(db).await;
        let pods: Api<Pod> = Api::namespaced(client.clone(), &ns);
        let pod_ref = ResourceRef::namespaced("Pod", &ns, COPY_POD);
        if pods
            .get_opt(COPY_POD)
            .await
            .map_err(|e| classify(e, "read", pod_ref.clone(), &self.target))?
            .is_none()
        {
            let pod: Pod = serde_json::from_value(json!({
                "apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": COPY_POD, "namespace": ns, "labels": {record::RECORD_LABEL: "true"}},
                "spec": {
                    "restartPolicy": "Never",
                    "terminationGracePeriodSeconds": 1,
                    "containers": [{
                        "name": "copy",
                        "image": image,
                        "command": ["sleep", "3600"],
                        "volumeMounts": [{"name": "migration", "mountPath": MOUNT_PATH}],
                        "securityContext": {"allowPrivilegeEscalation": false, "capabilities": {"drop": ["ALL"]}}
                    }],
                    "volumes": [{"name": "migration", "persistentVolumeClaim": {"claimName": PVC_NAME}}]
                }
            }))
            .map_err(|e| Error::Unexpected(e.to_string()))?;
            // A namespace made a moment ago may not have its `default` ServiceAccount yet
            // (the controller-manager creates it): the ServiceAccount admission plugin then
            // refuses the Pod. Retried for up to 30 s, as `kubectl run` users do by hand.
            let sa_deadline = Instant::now() + Duration::from_secs(30);
            loop {
                match create_strict(&client, &(), Some(&ns), &pod).await {
                    Ok(_) => break,
                    Err(kube::Error::Api(s))
                        if service_account_not_ready(&s) && Instant::now() < sa_deadline =>
                    {
                        tracing::debug!(namespace = %ns, "default ServiceAccount not there yet; creating the copy pod again");
                        tokio::time::sleep(Duration::from_millis(500)).await;
                    }
                    Err(e) => return Err(classify(e, "create", pod_ref.clone(), &self.target)),
                }
            }
        }
        // Running?
        let wait_until = Instant::now()
            + self
                .remaining()
                .unwrap_or(Duration::from_secs(600))
                .min(Duration::from_secs(600));
        loop {
            let p = pods
                .get(COPY_POD)
                .await
                .map_err(|e| classify(e, "read", pod_ref.clone(), &self.target))?;
            let phase = p
                .status
                .as_ref()
                .and_then(|s| s.phase.clone())
                .unwrap_or_default();
            if phase == "Running" {
                break;
            }
            if phase == "Failed" || phase == "Succeeded" {
                return Err(Error::BadObject {
                    resource: pod_ref,
                    message: format!(
                        "phase {phase}: the copy pod stopped; delete it and run the import again"
                    ),
                });
            }
            if Instant::now() > wait_until {
                return Err(Error::Timeout(format!("{pod_ref} not Running (phase {phase:?})")));
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
        progress(&format!(
            "copying {} files ({bytes} bytes) to {ns}/{PVC_NAME} through Pod {COPY_POD}",
            files.len()
        ));
        // The ClusterDeployment's pull secret (option 1 keeps node 0's name for it).
        let pull_secret = self
            .plan
            .iter()
            .find(|p| p.info.kind == "ClusterDeployment")
            .and_then(|p| p.desired.pointer("/spec/pullSecretRef/name"))
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string();
        let note = format!(
            "removed by agent-day2 migrate import: the pull secret is in Secret {}/{pull_secret}",
            self.ns,
        );
        let items =
            side_items(&self.bundle.dir, &self.bundle.manifest.cluster.id, &files, &note).map_err(|e| {
                Error::Io {
                    path: self.bundle.dir.display().to_string(),
                    source: e,
                }
            })?;
        let at = PodContainer {
            namespace: ns.clone(),
            pod: COPY_POD.into(),
            container: "copy".into(),
        };
        copy::copy_verified(
            &self.target,
            &at,
            MOUNT_PATH,
            items,
            &format!("PersistentVolumeClaim {ns}/{PVC_NAME}"),
            &progress,
        )
        .await?;
        match pods.delete(COPY_POD, &DeleteParams::default()).await {
            Ok(_) => {}
            Err(kube::Error::Api(s)) if s.code == 404 => {}
            Err(e) => return Err(classify(e, "delete", pod_ref, &self.target)),
        }
        progress(&format!(
            "artifacts copied in {:.1}s; Pod {COPY_POD} deleted",
            t.elapsed().as_secs_f64()
        ));
        Ok(())
    }

    /// Node 0's storage objects (logs, Ignition configs, credentials, files, manifests; see
    /// [`copy::storage_object`]) into cluster 0's assisted-service storage: its `WORK_DIR`
    /// (`/data` unless the container sets it) in the `assisted-service` container of the pod
    /// that holds the database, or of the one `app=assisted-service` pod with `--db-url`. With no
    /// such pod, or no volume under `WORK_DIR`, a warning says the files are only on the side
    /// volume.
    ///
    /// Returns whether the step is done (false: skipped with that warning, so that a later run
    /// copies them).
    async fn copy_to_storage(&mut self, db: &Db) -> Result<bool, Error> {
        let cid = self.bundle.manifest.cluster.id.clone();
        let items = copy::storage_items(&self.bundle.dir, &cid, &self.bundle.manifest.files);
        if items.is_empty() {
            return Ok(true);
        }
        let found = self.storage_container(db).await?;
        let (at, dir) = match found {
            Ok(v) => v,
            Err(why) => {
                progress(&format!(
                    "warning: node 0's logs, Ignition configs and credentials stay on \
                     PersistentVolumeClaim {}/{PVC_NAME} only: {why}; cluster 0's \
                     assisted-service will not serve them; run the import again once it can \
                     reach that container",
                    self.ns
                ));
                return Ok(false);
            }
        };
        let bytes: u64 = items.iter().map(|i| i.size).sum();
        let t = Instant::now();
        let what = format!(
            "assisted-service's storage {dir} (Pod {}/{} container {})",
            at.namespace, at.pod, at.container
        );
        progress(&format!(
            "copying {} files ({bytes} bytes) to {what}",
            items.len()
        ));
        copy::copy_verified(&self.target, &at, &dir, items, &what, &progress).await?;
        progress(&format!(
            "node 0's files are in {what}, checked, in {:.1}s",
            t.elapsed().as_secs_f64()
        ));
        Ok(true)
    }

    /// The `assisted-service` container and its `WORK_DIR` (Ok(Err(why)) when there is none to
    /// use).
    async fn storage_container(&self, db: &Db) -> Result<Result<(PodContainer, String), String>, Error> {
        let pods: Vec<Pod> = match db {
            Db::Pod { at, .. } => {
                let api: Api<Pod> = Api::namespaced(self.target.client.clone(), &at.namespace);
                let r = ResourceRef::namespaced("Pod", &at.namespace, &at.pod);
                vec![api
                    .get(&at.pod)
                    .await
                    .map_err(|e| classify(e, "read", r, &self.target))?]
            }
            Db::Url(_) => {
                let api: Api<Pod> = Api::all(self.target.client.clone());
                match api
                    .list(&ListParams::default().labels("app=assisted-service"))
                    .await
                {
                    Ok(l) => l.items,
                    Err(e) => {
                        let r = ResourceRef::cluster("Pod", "app=assisted-service");
                        let e = classify(e, "list", r, &self.target);
                        return Ok(Err(e.to_string().lines().next().unwrap_or("").to_string()));
                    }
                }
            }
        };
        let mut found = Vec::new();
        let mut no_volume = None;
        // A pod on its way out (a rollout) is not where the service will run.
        for p in pods.iter().filter(|p| p.metadata.deletion_timestamp.is_none()) {
            let Some(c) = p
                .spec
                .as_ref()
                .and_then(|s| s.containers.iter().find(|c| c.name == "assisted-service"))
            else {
                continue;
            };
            let name = p.metadata.name.clone().unwrap_or_default();
            let ns = p.metadata.namespace.clone().unwrap_or_default();
            // WORK_DIR as the pod gets it (assisted-service's default /data/); a value import
            // cannot read is not guessed.
            let dir = match self.container_env(&ns, c, "WORK_DIR").await {
                Ok(v) => v.unwrap_or_else(|| "/data".into()),
                Err(why) => {
                    no_volume = Some(format!(
                        "Pod {ns}/{name} container assisted-service: its WORK_DIR cannot be read ({why})"
                    ));
                    continue;
                }
            };
            let dir = dir.trim_end_matches('/').to_string();
            let on_volume = c.volume_mounts.iter().flatten().any(|m| {
                let mp = m.mount_path.trim_end_matches('/');
                dir == mp || dir.starts_with(&format!("{mp}/"))
            });
            if !on_volume {
                no_volume = Some(format!(
                    "Pod {ns}/{name} container assisted-service has no volume at its WORK_DIR {dir}"
                ));
                continue;
            }
            found.push((
                PodContainer {
                    namespace: ns,
                    pod: name,
                    container: "assisted-service".into(),
                },
                dir,
            ));
        }
        Ok(match found.len() {
            1 => Ok(found.remove(0)),
            0 => Err(no_volume.unwrap_or_else(|| {
                "no Pod with container assisted-service (label app=assisted-service) was found".into()
            })),
            n => Err(format!(
                "{n} Pods with container assisted-service (label app=assisted-service); with --db-url \
                 import cannot tell which one serves this cluster"
            )),
        })
    }

    /// The value of `key` in container `c`'s environment as the kubelet makes it: `env` (a value,
    /// or a `configMapKeyRef`/`secretKeyRef` read from namespace `ns`) before `envFrom` (each
    /// ConfigMap or Secret, later ones winning, with its `prefix`). Ok(None): not set. Err: a
    /// source import cannot read (named).
    async fn container_env(
        &self,
        ns: &str,
        c: &k8s_openapi::api::core::v1::Container,
        key: &str,
    ) -> Result<Option<String>, String> {
        use k8s_openapi::api::core::v1::{ConfigMap, Secret};
        let cm = |name: String| async move {
            Api::<ConfigMap>::namespaced(self.target.client.clone(), ns)
                .get_opt(&name)
                .await
                .map_err(|e| format!("ConfigMap {ns}/{name}: {e}"))
                .map(|o| o.and_then(|c| c.data).unwrap_or_default())
        };
        let secret = |name: String| async move {
            Api::<Secret>::namespaced(self.target.client.clone(), ns)
                .get_opt(&name)
                .await
                .map_err(|e| format!("Secret {ns}/{name}: {e}"))
                .map(|o| {
                    o.and_then(|s| s.data)
                        .unwrap_or_default()
                        .into_iter()
                        .map(|(k, v)| (k, String::from_utf8_lossy(&v.0).into_owned()))
                        .collect::<std::collections::BTreeMap<String, String>>()
                })
        };
        if let Some(e) = c.env.iter().flatten().find(|e| e.name == key) {
            if let Some(v) = &e.value {
                return Ok(Some(v.clone()));
            }
            let from = e.value_from.as_ref();
            if let Some(r) = from.and_then(|f| f.config_map_key_ref.as_ref()) {
                return Ok(cm(r.name.clone()).await?.get(&r.key).cloned());
            }
            if let Some(r) = from.and_then(|f| f.secret_key_ref.as_ref()) {
                return Ok(secret(r.name.clone()).await?.get(&r.key).cloned());
            }
            return Err(format!("env {key} comes from a field or resource reference"));
        }
        let mut found = None;
        for f in c.env_from.iter().flatten() {
            let prefix = f.prefix.clone().unwrap_or_default();
            let data = if let Some(r) = &f.config_map_ref {
                cm(r.name.clone()).await?
            } else if let Some(r) = &f.secret_ref {
                secret(r.name.clone()).await?
            } else {
                continue;
            };
            if let Some(v) = data.get(key.strip_prefix(prefix.as_str()).unwrap_or("\0")) {
                found = Some(v.clone());
            }
        }
        Ok(found)
    }

    /// The image of the assisted-service container (it has tar and sleep); a UBI image when
    /// that pod cannot be read (`--db-url`).
    async fn copy_image(&self, db: &Db) -> String {
        let fallback = "registry.access.redhat.com/ubi9/ubi-minimal:latest".to_string();
        let pods: Api<Pod> = match db {
            Db::Pod { at, .. } => Api::namespaced(self.target.client.clone(), &at.namespace),
            Db::Url(_) => Api::all(self.target.client.clone()),
        };
        let Ok(list) = pods
            .list(&ListParams::default().labels("app=assisted-service"))
            .await
        else {
            return fallback;
        };
        list.items
            .iter()
            .filter_map(|p| p.spec.as_ref())
            .flat_map(|s| s.containers.iter())
            .find(|c| c.name == "assisted-service")
            .and_then(|c| c.image.clone())
            .unwrap_or(fallback)
    }
}

/// The refusal when namespace `ns` holds the record of another bundle: what is there (bundle
/// checksum, exported when, phase) and what to do. Replacing an import is not supported
/// (docs/migrate.md "Limits of migrate"): for the same cluster (e.g. node 0 exported again) the
/// data is already on cluster 0, so there is nothing to do but `migrate status`; for another
/// cluster, another namespace.
pub fn other_bundle_message(r: &Record, bundle: &Bundle, ns: &str) -> String {
    let exported = r
        .bundle_created
        .as_deref()
        .map(|c| format!("exported {c}"))
        .unwrap_or_else(|| format!("imported from {}", r.started));
    let phase = match r.phase {
        Phase::Complete => format!("complete since {}", r.completed.as_deref().unwrap_or("?")),
        Phase::InProgress => format!("in progress (done: {})", r.steps_done.join(", ")),
    };
    let there = format!(
        "holds the import of another bundle of cluster {} ({}): checksum {}, {exported}, {phase}; \
         this bundle is {} (exported {})",
        r.cluster_name,
        r.cluster_id,
        r.bundle_sha256,
        bundle.checksum(),
        bundle.manifest.created
    );
    let todo = if r.cluster_id == bundle.manifest.cluster.id {
        match r.phase {
            Phase::Complete => format!(
                "cluster 0 already has this cluster's data: nothing to do (`oc agent-day2 migrate status \
                 BUNDLE -n {ns}` with the bundle that was imported shows it); replacing an import is not supported"
            ),
            Phase::InProgress => "finish that import by running `migrate import` again with the bundle it \
                 started from; replacing an import is not supported"
                .to_string(),
        }
    } else {
        "import this bundle into another namespace (-n NAMESPACE)".to_string()
    };
    format!("{there}. {todo}")
}

/// What installs the missing CRDs (docs/migrate.md "Node 0 and cluster 0", "Cluster 0").
fn crd_installers(missing: &[String]) -> String {
    let hive = missing
        .iter()
        .any(|m| m.ends_with(".hive.openshift.io") && !m.contains("extensions."));
    let ai = missing
        .iter()
        .any(|m| m.ends_with("agent-install.openshift.io") || m.ends_with("extensions.hive.openshift.io"));
    match (hive, ai) {
        (true, true) => {
            "installed by the multicluster engine (hive, and its infrastructure operator / assisted-service)"
                .into()
        }
        (true, false) => "installed by the multicluster engine (hive)".into(),
        _ => "installed by the multicluster engine's infrastructure operator (assisted-service)".into(),
    }
}

/// Whether `rel` is an install-config.yaml of the bundle (`files/<cluster-id>/install-config.yaml`),
/// whose `pullSecret` stays out of the volume.
pub fn is_install_config(rel: &str) -> bool {
    rel.starts_with("files/") && rel.ends_with("/install-config.yaml") && rel.matches('/').count() == 2
}

/// install-config.yaml with the value of `pullSecret` replaced by `note` (the pull secret is in
/// a Secret; the volume is readable by whoever can mount it). Parsed and written as YAML
/// (serde-saphyr); None when it is not a YAML mapping (then the file stays out of the volume).
pub fn redact_install_config(yaml: &[u8], note: &str) -> Option<Vec<u8>> {
    let text = std::str::from_utf8(yaml).ok()?;
    let mut v: Value = serde_saphyr::from_str(text).ok()?;
    let m = v.as_object_mut()?;
    if m.contains_key("pullSecret") {
        m.insert("pullSecret".into(), json!(note));
    }
    serde_saphyr::to_string(&v).ok().map(String::into_bytes)
}

/// The side volume's copy items: `files` (bundle-relative paths) under `prefix/`, mode 0640. An
/// install-config.yaml ([`is_install_config`]) goes in with its `pullSecret` replaced by
/// `pull_secret_note` ([`redact_install_config`]), or not at all when it cannot be parsed.
pub fn side_items(
    dir: &std::path::Path,
    prefix: &str,
    files: &[super::bundle::BundleFileEntry],
    pull_secret_note: &str,
) -> std::io::Result<Vec<CopyItem>> {
    let mut items = Vec::new();
    for e in files {
        let dest = format!("{prefix}/{}", e.path);
        if is_install_config(&e.path) {
            let raw = std::fs::read(dir.join(&e.path))?;
            if let Some(red) = redact_install_config(&raw, pull_secret_note) {
                items.push(CopyItem::bytes(dest, red, 0o640));
            }
            continue;
        }
        items.push(CopyItem::file(dir, dest, e, 0o640));
    }
    Ok(items)
}

/// Whether `e` is the ServiceAccount admission plugin's refusal of a Pod whose namespace has
/// no `default` ServiceAccount yet (403, "error looking up service account NS/default"), which
/// passes once the controller-manager's serviceaccount controller made it.
fn service_account_not_ready(e: &kube::core::Status) -> bool {
    e.code == 403 && e.message.contains("error looking up service account")
}

#[cfg(test)]
mod tests {

    /// The admission plugin's words for a namespace without its `default` ServiceAccount yet
    /// (kube-apiserver 1.31 plugin/pkg/admission/serviceaccount) are retried; other 403s not.
    #[test]
    fn copy_pod_waits_only_for_the_missing_default_service_account() {
        let e = |code: u16, message: &str| kube::core::Status::failure(message, "Forbidden").with_code(code);
        assert!(super::service_account_not_ready(&e(
            403,
            "pods \"agent-day2-migrate-copy\" is forbidden: error looking up service account mig/default: serviceaccount \"default\" not found"
        )));
        assert!(!super::service_account_not_ready(&e(
            403,
            "pods is forbidden: User \"u\" cannot create resource \"pods\" in API group \"\" in the namespace \"mig\""
        )));
        assert!(!super::service_account_not_ready(&e(
            404,
            "error looking up service account"
        )));
    }
    use super::*;

    /// An unlisted live host (one without cluster in a listed infra-env) or counts that differ
    /// from the manifest's are refused; soft-deleted rows left out and soft-deleted hosts are
    /// not a difference.
    #[test]
    fn restored_rows_must_be_what_the_manifest_lists() {
        let mut found = restore::Checked::default();
        found.rows.insert("hosts".into(), 3);
        found.rows.insert("events".into(), 5);
        found.skipped_deleted.insert("events".into(), 2);
        for (h, ie) in [("h1", "ie"), ("h2", "ie")] {
            found.host_keys.insert((h.into(), ie.into()));
            found.live_host_keys.insert((h.into(), ie.into()));
        }
        found.host_keys.insert(("gone".into(), "ie".into()));
        let rows: std::collections::BTreeMap<String, u64> = [
            ("hosts".to_string(), 3),
            ("events".to_string(), 7),
            ("migrations".to_string(), 9),
        ]
        .into();
        let listed = vec!["h1".to_string(), "h2".to_string()];
        check_restored_counts(&listed, &rows, &found).unwrap();
        let mut extra = found.clone();
        extra.live_host_keys.insert(("intruder".into(), "ie".into()));
        let e = check_restored_counts(&listed, &rows, &extra).unwrap_err();
        assert_eq!(e.exit_code(), 3);
        assert!(
            e.to_string().contains("host intruder is restored but not listed"),
            "{e}"
        );
        let mut more = found.clone();
        more.rows.insert("hosts".into(), 4);
        let e = check_restored_counts(&listed, &rows, &more)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("table hosts: 4 rows restored and 0 left out, the manifest counts 3"),
            "{e}"
        );
        let mut unknown = found.clone();
        unknown.rows.insert("agents".into(), 1);
        let e = check_restored_counts(&listed, &rows, &unknown)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("table agents: 1 rows restored and 0 left out, the manifest counts none"),
            "{e}"
        );
    }

    fn crs() -> Vec<Value> {
        serde_json::from_value(json!([
            {"apiVersion": "agent-install.openshift.io/v1beta1", "kind": "Agent",
             "metadata": {"name": "h1", "namespace": "", "uid": "u", "resourceVersion": "9",
                          "finalizers": ["agent.agent-install.openshift.io/ai-deprovision"],
                          "ownerReferences": [{"kind": "InfraEnv"}], "managedFields": [{}],
                          "creationTimestamp": "2026-01-01T00:00:00Z", "generation": 2,
                          "labels": {"infraenvs.agent-install.openshift.io": "ostest"},
                          "annotations": {"agent.agent-install.openshift.io/skip-spoke-cleanup": "true",
                                          "kubectl.kubernetes.io/last-applied-configuration": "{}"}},
             "spec": {"clusterDeploymentName": {"name": "ostest", "namespace": ""}, "approved": true},
             "status": {"debugInfo": {"eventsURL": "http://node0:8090/x", "state": "installed"}, "progress": {}}},
            {"apiVersion": "hive.openshift.io/v1", "kind": "ClusterDeployment",
             "metadata": {"name": "ostest", "annotations": {PAUSE_ANNOTATION: "true"}},
             "spec": {"clusterName": "ostest", "installed": true}},
            {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "ostest-admin-password"},
             "stringData": {"username": "kubeadmin", "password": "p'w"}},
            {"apiVersion": "hive.openshift.io/v1", "kind": "ClusterImageSet",
             "metadata": {"name": "openshift-4.18.1", "namespace": ""}, "spec": {"releaseImage": "r"}},
            {"apiVersion": "agent-install.openshift.io/v1beta1", "kind": "InfraEnv",
             "metadata": {"name": "ostest"}, "spec": {"clusterRef": {"name": "ostest"}},
             "status": {"isoDownloadURL": "http://node0/iso", "conditions": [{"type": "ImageCreated"}]}},
            {"apiVersion": "agent-install.openshift.io/v1beta1", "kind": "NMStateConfig",
             "metadata": {"name": "ostest-0"}, "spec": {"config": {}}},
            {"apiVersion": "extensions.hive.openshift.io/v1beta1", "kind": "AgentClusterInstall",
             "metadata": {"name": "ostest"}, "spec": {"holdInstallation": true}},
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "x"}}
        ]))
        .unwrap()
    }

    #[test]
    fn plan_follows_design_order_and_skips_namespace() {
        let p = plan(&crs(), "ns1", "sum").unwrap();
        let kinds: Vec<&str> = p.iter().map(|p| p.info.kind).collect();
        assert_eq!(
            kinds,
            [
                "Secret",
                "ClusterImageSet",
                "ClusterDeployment",
                "AgentClusterInstall",
                "InfraEnv",
                "NMStateConfig",
                "Agent"
            ]
        );
        // The restore comes between the ClusterImageSet and the ClusterDeployment.
        let db_at = p.iter().position(|x| x.info.rank > DB_RANK).unwrap();
        assert_eq!(p[db_at].info.kind, "ClusterDeployment");
        assert_eq!(p[db_at - 1].info.kind, "ClusterImageSet");
        // Steps follow STEPS' order.
        let steps: Vec<usize> = p
            .iter()
            .map(|x| STEPS.iter().position(|s| *s == x.info.step).unwrap())
            .collect();
        assert!(steps.windows(2).all(|w| w[0] <= w[1]), "{steps:?}");
    }

    #[test]
    fn server_fields_are_stripped_and_namespace_refs_set() {
        let p = plan(&crs(), "ns1", "sum").unwrap();
        let agent = p.iter().find(|x| x.info.kind == "Agent").unwrap();
        let m = &agent.desired["metadata"];
        for k in crate::migrate::copied::STRIP_METADATA {
            assert!(m.get(k).is_none(), "{k} left: {m}");
        }
        assert_eq!(m["namespace"], "ns1");
        assert_eq!(m["annotations"][BUNDLE_ANNOTATION], "sum");
        assert!(m["annotations"]
            .get("kubectl.kubernetes.io/last-applied-configuration")
            .is_none());
        assert_eq!(
            m["annotations"]["agent.agent-install.openshift.io/skip-spoke-cleanup"],
            "true"
        );
        assert_eq!(agent.desired["spec"]["clusterDeploymentName"]["namespace"], "ns1");
        assert!(agent.desired.get("status").is_none());
        let st = agent.status.as_ref().unwrap();
        assert!(st["debugInfo"].get("eventsURL").is_none(), "{st}");
        assert_eq!(st["debugInfo"]["state"], "installed");
        let ie = p.iter().find(|x| x.info.kind == "InfraEnv").unwrap();
        assert_eq!(
            ie.desired["spec"]["clusterRef"],
            json!({"name": "ostest", "namespace": "ns1"})
        );
        assert!(ie.status.as_ref().unwrap().get("isoDownloadURL").is_none());
        let cis = p.iter().find(|x| x.info.kind == "ClusterImageSet").unwrap();
        assert!(cis.namespace.is_none());
        assert!(
            cis.desired["metadata"].get("namespace").is_none(),
            "cluster-scoped"
        );
        let s = p.iter().find(|x| x.info.kind == "Secret").unwrap();
        assert!(s.desired.get("stringData").is_none());
        assert_eq!(s.desired["data"]["password"], "cCd3", "base64 of p'w");
        // Empty status objects are not written.
        assert!(p
            .iter()
            .find(|x| x.info.kind == "NMStateConfig")
            .unwrap()
            .status
            .is_none());
    }

    #[test]
    fn unknown_kinds_and_nameless_objects_name_their_index() {
        let e = plan(
            &[json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "x"}})],
            "n",
            "s",
        )
        .unwrap_err();
        assert!(e.to_string().starts_with("crs/crs.json[0]:"), "{e}");
        assert_eq!(e.exit_code(), 3);
        let e = plan(
            &[json!({"apiVersion": "hive.openshift.io/v1", "kind": "ClusterDeployment"})],
            "n",
            "s",
        )
        .unwrap_err();
        assert!(e.to_string().contains("crs/crs.json[0].metadata.name"), "{e}");
        // Same kind, other version: not known.
        assert!(kind_info("hive.openshift.io/v2", "ClusterDeployment").is_none());
    }

    #[test]
    fn comparison_ignores_server_additions_and_holds_but_not_changes() {
        let p = plan(&crs(), "ns1", "sum").unwrap();
        let aci = p.iter().find(|x| x.info.kind == "AgentClusterInstall").unwrap();
        let mut have = aci.desired.clone();
        have["metadata"]["uid"] = json!("x");
        have["metadata"]["finalizers"] = json!(["f"]);
        have["spec"]["holdInstallation"] = json!(false);
        have["spec"]["defaulted"] = json!(1);
        have["status"] = json!({"conditions": []});
        assert_eq!(first_difference(&comparable(aci), &have, ""), None);
        have["spec"]["imageSetRef"] = json!({"name": "other"});
        let mut want = comparable(aci);
        want["spec"]["imageSetRef"] = json!({"name": "openshift-4.18.1"});
        assert_eq!(
            first_difference(&want, &have, "").as_deref(),
            Some(".spec.imageSetRef.name")
        );
        // Arrays compare element-wise with equal lengths.
        assert_eq!(
            first_difference(&json!([1, 2]), &json!([1]), "x").as_deref(),
            Some("x")
        );
        assert_eq!(
            first_difference(&json!([{"a": 1}]), &json!([{"a": 1, "b": 2}]), "x"),
            None
        );
        // A pre-existing Secret without our annotations is the same Secret.
        let s = p.iter().find(|x| x.info.kind == "Secret").unwrap();
        let mut have = s.desired.clone();
        have["metadata"]["annotations"] = json!({});
        assert_eq!(first_difference(&comparable(s), &have, ""), None);
        // A guarded kind needs the bundle annotation.
        let cd = p.iter().find(|x| x.info.kind == "ClusterDeployment").unwrap();
        let mut have = cd.desired.clone();
        have["metadata"]["annotations"] = json!({});
        assert!(first_difference(&comparable(cd), &have, "").is_some());
    }

    #[test]
    fn installed_sql_marks_the_cluster_and_the_restored_hosts_installed() {
        let mut restored = restore::Checked::default();
        restored.host_keys.insert(("h'1".into(), "ie-1".into()));
        let sql = installed_sql("c-1", &restored).unwrap();
        assert!(sql.contains(
            "UPDATE public.clusters SET status = 'installed', status_info = 'Cluster is installed'"
        ));
        assert!(sql.contains("WHERE id::text = 'c-1' AND status IS DISTINCT FROM 'installed'"));
        assert!(sql.contains("progress_current_stage = 'Done'"));
        assert!(sql.contains("IN (('h''1', 'ie-1'))"));
        let none = installed_sql("c", &restore::Checked::default()).unwrap();
        assert!(!none.contains("public.hosts"));
    }

    #[test]
    fn kube_key_sql_quotes_values() {
        let mut restored = restore::Checked::default();
        restored.infra_env_ids.insert("ie-1".into());
        restored.infra_env_ids.insert("ie'2".into());
        restored.host_keys.insert(("h'1".into(), "ie-1".into()));
        let sql = kube_key_sql("c-1", "o'brien", "ns", &restored).unwrap();
        assert!(sql.contains(
            "UPDATE public.clusters SET kube_key_name = 'o''brien', kube_key_namespace = 'ns' WHERE id::text = 'c-1';"
        ));
        assert!(
            sql.contains(
                "UPDATE public.infra_envs SET kube_key_namespace = 'ns' WHERE id::text IN ('ie''2', 'ie-1');"
            ),
            "{sql}"
        );
        assert!(sql.contains(
            "UPDATE public.hosts SET kube_key_namespace = 'ns' WHERE (id::text, infra_env_id::text) IN (('h''1', 'ie-1'));"
        ), "{sql}");
        let none = kube_key_sql("c", "n", "ns", &restore::Checked::default()).unwrap();
        assert!(
            none.contains("WHERE id::text = 'c';\n")
                && !none.contains("infra_envs")
                && !none.contains("hosts"),
            "{none}"
        );
        assert!(sql_literal("a\0b").is_err());
        assert_eq!(
            sql_literal(r"a\b").unwrap(),
            r"'a\b'",
            "backslash is literal in standard strings"
        );
    }

    /// The UPDATEs key only the rows the stream restored, never rows the manifest merely lists
    /// (a lying manifest naming another cluster's infra-env must not take its rows over).
    #[test]
    fn kube_keys_touch_only_restored_rows() {
        let cid = "c0ffee00-0000-0000-0000-000000000001";
        let ie = "1e000000-0000-0000-0000-000000000001";
        let victim = "be000000-0000-0000-0000-000000000666";
        let dump = format!(
            "--\n-- PostgreSQL database dump\n--\n\nSET client_encoding = 'UTF8';\n\
             COPY public.clusters (id, name) FROM stdin;\n{cid}\tc\n\\.\n\
             COPY public.infra_envs (id, cluster_id, name) FROM stdin;\n{ie}\t{cid}\tc\n\\.\n\
             COPY public.hosts (id, infra_env_id, cluster_id) FROM stdin;\nh1\t{ie}\t{cid}\n\\.\n"
        );
        let listed = vec![ie.to_string(), victim.to_string()];
        let scope = restore::Scope::new(cid, &listed);
        let mut out = Vec::new();
        let mut c = restore::Checked::default();
        restore::write_stream(
            "d",
            &mut dump.as_bytes(),
            &scope,
            &restore::Expect::default(),
            &|c| kube_key_sql(cid, "c", "ns", c),
            &mut out,
            &mut c,
        )
        .unwrap();
        let out = String::from_utf8(out).unwrap();
        assert!(!out.contains(victim), "{out}");
        assert!(out.contains(&format!("WHERE id::text IN ('{ie}');")), "{out}");
        assert!(
            out.contains("IN (('h1', '1e000000-0000-0000-0000-000000000001'));"),
            "{out}"
        );
        // And import refuses such a manifest before any change.
        let e = check_listed_rows(&listed, &["h1".into()], &c).unwrap_err();
        assert_eq!(e.exit_code(), 3);
        assert!(e.to_string().contains(victim), "{e}");
        let e = check_listed_rows(&listed[..1], &["h2".into()], &c).unwrap_err();
        assert!(e.to_string().contains("h2"), "{e}");
        check_listed_rows(&listed[..1], &["h1".into()], &c).unwrap();
    }

    #[test]
    fn target_schema_must_hold_the_dumps_columns_and_migrations() {
        let set = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<BTreeSet<String>>();
        let mut found = restore::Checked::default();
        found
            .columns
            .insert("clusters".into(), vec!["id".into(), "primary_ip_stack".into()]);
        found
            .columns
            .insert("hosts".into(), vec!["id".into(), "timestamp".into()]);
        // The real typo ids: the greatest is the same on both sides, the sets are not.
        found.migration_ids = set(&["2021115162400", "20251217120000", "21211125182200"]);
        let mut cols = BTreeMap::new();
        cols.insert("clusters".to_string(), set(&["id", "primary_ip_stack", "extra"]));
        cols.insert("hosts".to_string(), set(&["id", "timestamp"]));
        let ids = set(&[
            "2021115162400",
            "20251216120000",
            "20251217120000",
            "21211125182200",
        ]);
        check_target_schema(&found, &ids, &cols).unwrap();
        // (a) a column the target lacks, and a table it lacks altogether.
        let mut older = cols.clone();
        older.get_mut("clusters").unwrap().remove("primary_ip_stack");
        let e = check_target_schema(&found, &ids, &older).unwrap_err();
        assert_eq!(e.exit_code(), 3);
        let s = e.to_string();
        assert!(s.contains("table clusters lacks primary_ip_stack"), "{s}");
        assert!(
            s.contains("cluster 0's assisted-service is older than node 0's"),
            "{s}"
        );
        assert!(!s.contains("hosts"), "{s}");
        older.remove("hosts");
        let s = check_target_schema(&found, &ids, &older).unwrap_err().to_string();
        assert!(s.contains("table hosts does not exist"), "{s}");
        // (b) a migration the target lacks, though max(id) is equal on both sides.
        let lacking = set(&["2021115162400", "20251216120000", "21211125182200"]);
        let e = check_target_schema(&found, &lacking, &cols).unwrap_err();
        assert_eq!(e.exit_code(), 3);
        let s = e.to_string();
        assert!(s.contains("lacks: 20251217120000"), "{s}");
        assert!(!s.contains("2021115162400"), "only the missing ids: {s}");
        // Both: both are said.
        let e = check_target_schema(&found, &lacking, &older).unwrap_err();
        assert!(matches!(&e, Error::Many(v) if v.len() == 2), "{e}");
        assert_eq!(e.exit_code(), 3);
    }

    /// The volume copy of install-config.yaml keeps everything but the pull secret.
    #[test]
    fn install_config_loses_its_pull_secret_in_the_volume_copy() {
        let yaml = b"apiVersion: v1\nbaseDomain: example.com\nmetadata:\n  name: ostest\n\
                     pullSecret: '{\"auths\":{\"quay.io\":{\"auth\":\"c2VjcmV0\"}}}'\nsshKey: ssh-ed25519 AAAA\n";
        let out = redact_install_config(yaml, "see Secret ns/ostest-pull-secret").unwrap();
        let text = String::from_utf8(out).unwrap();
        assert!(!text.contains("auths") && !text.contains("c2VjcmV0"), "{text}");
        let v: Value = serde_saphyr::from_str(&text).unwrap();
        assert_eq!(v["pullSecret"], "see Secret ns/ostest-pull-secret");
        assert_eq!(v["metadata"]["name"], "ostest");
        assert_eq!(v["sshKey"], "ssh-ed25519 AAAA");
        assert!(redact_install_config(b"- a list\n", "n").is_none());
        assert!(is_install_config("files/c1/install-config.yaml"));
        assert!(!is_install_config("manifests/c1/openshift/install-config.yaml"));
        // In the volume copy: redacted; unparseable → left out.
        let d = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(d.path().join("files/c1")).unwrap();
        std::fs::write(d.path().join("files/c1/install-config.yaml"), yaml).unwrap();
        let files = vec![super::super::bundle::BundleFileEntry {
            path: "files/c1/install-config.yaml".into(),
            sha256: String::new(),
            size: yaml.len() as u64,
        }];
        let items = side_items(d.path(), "c1", &files, "gone").unwrap();
        let [it] = &items[..] else { panic!("{items:?}") };
        assert_eq!(it.dest, "c1/files/c1/install-config.yaml");
        let copy::CopySrc::Bytes(b) = &it.src else {
            panic!("{it:?}")
        };
        let s = String::from_utf8_lossy(b);
        assert!(!s.contains("auths") && s.contains("pullSecret: gone"), "{s}");
        // Its checksum is the redacted bytes' (what the volume is checked against).
        assert_eq!(
            it.sha256,
            hex::encode(<sha2::Sha256 as sha2::Digest>::digest(&b[..]))
        );
        std::fs::write(d.path().join("files/c1/install-config.yaml"), b"- x\n").unwrap();
        assert!(side_items(d.path(), "c1", &files, "gone").unwrap().is_empty());
    }

    #[test]
    fn system_namespaces_are_never_a_default() {
        for ns in [
            "default",
            "kube-system",
            "kube-public",
            "openshift",
            "openshift-config",
            "multicluster-engine",
            "open-cluster-management",
            "open-cluster-management-hub",
            "hive",
        ] {
            assert!(is_system_namespace(ns), "{ns}");
        }
        for ns in ["ostest", "openshiftx", "kubex", "hive-cluster", "my-default"] {
            assert!(!is_system_namespace(ns), "{ns}");
        }
    }

    #[test]
    fn restored_rows_leave_migrations_out() {
        let rows = std::collections::BTreeMap::from([
            ("clusters".to_string(), 1),
            ("events".to_string(), 300),
            ("migrations".to_string(), 19),
        ]);
        assert_eq!(restored_rows(&rows), (301, 2));
    }
}
