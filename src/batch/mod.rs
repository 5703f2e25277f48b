//! Batch records: what one `add-nodes` run promised the cluster, kept on the cluster so that
//! `approve` and `monitor` (possibly run by another administrator, on another machine) know
//! which nodes to expect, with which MACs and addresses, until when, and who asked for them.
//!
//! Format (stable within `agent-day2/v1`): a ConfigMap in [`NAMESPACE`] named
//! `batch-<YYYYMMDD>-<HHMMSS>-<4 hex>`, labelled [`LABEL`]`=<name>` and
//! `app.kubernetes.io/managed-by=agent-day2`, whose `data["batch.json"]` is one
//! [`BatchRecord`] as JSON (camelCase). A ConfigMap, not a Secret: the record holds no secret
//! (the tokens are in the auth Secret, see [`crate::auth`]). The namespace is one only
//! administrators can write (docs/approve.md "Verifying kubelet CSRs"), so a record can be trusted by
//! `approve`. The expected hosts do not change after add-nodes, except the addresses `monitor`
//! learns for DHCP hosts (compare-and-swap on the ConfigMap's `resourceVersion`, [`update`]).
//! Approvals and reboot reports are not written here but as one small ConfigMap each
//! ([`records`]), so that an approval costs the same at 1,000 hosts as at one; [`list`] and
//! [`get`] return a batch with its records merged in, in the shape of `agent-day2/v1`, where
//! they lived in the batch itself. All writes use `fieldValidation=Strict`.

mod model;
pub mod records;

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kube::api::{Api, DeleteParams, ListParams, ObjectMeta, PostParams};

use crate::error::{Error, ResourceRef, Result};
use crate::kube::classify;
use crate::kube::write::{create_strict, with_strict_validation, FIELD_MANAGER};
use crate::kube::KubeTarget;

pub use model::*;

/// A batch name for `now`: `batch-YYYYMMDD-HHMMSS-xxxx` (4 random hex digits), a valid
/// ConfigMap name and label value that sorts by time.
pub fn new_name(now: std::time::SystemTime) -> String {
    let secs = now
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0);
    let dt = time::OffsetDateTime::from_unix_timestamp(secs).unwrap_or(time::OffsetDateTime::UNIX_EPOCH);
    let fmt = time::macros::format_description!("[year][month][day]-[hour][minute][second]");
    let stamp = dt.format(&fmt).unwrap_or_else(|_| "00000000-000000".into());
    let r = uuid::Uuid::new_v4();
    format!("batch-{stamp}-{}", &r.simple().to_string()[..4])
}

/// The ConfigMap holding `rec`.
///
/// Compact JSON (a 1,000-host batch stays near 100 KB), without the approvals and reboots
/// (they are [`records`]) and as [`API_VERSION`].
pub fn to_config_map(rec: &BatchRecord) -> Result<ConfigMap> {
    let rec = BatchRecord {
        api_version: API_VERSION.into(),
        approvals: vec![],
        reboots: vec![],
        embedded: 0,
        ..rec.clone()
    };
    let json =
        serde_json::to_string(&rec).map_err(|e| Error::Unexpected(format!("batch record as JSON: {e}")))?;
    Ok(ConfigMap {
        metadata: ObjectMeta {
            name: Some(rec.name.clone()),
            namespace: Some(NAMESPACE.into()),
            labels: Some(BTreeMap::from([
                (LABEL.to_string(), rec.name.clone()),
                (
                    "app.kubernetes.io/managed-by".to_string(),
                    "agent-day2".to_string(),
                ),
            ])),
            ..Default::default()
        },
        data: Some(BTreeMap::from([(DATA_KEY.to_string(), json)])),
        ..Default::default()
    })
}

/// The record in a batch ConfigMap. Errors ([`Error::BadObject`], exit 4) name the ConfigMap.
pub fn from_config_map(cm: &ConfigMap) -> Result<BatchRecord> {
    let name = cm.metadata.name.clone().unwrap_or_default();
    let r = ResourceRef::namespaced("ConfigMap", NAMESPACE, &name);
    let text = cm
        .data
        .as_ref()
        .and_then(|d| d.get(DATA_KEY))
        .ok_or_else(|| Error::BadObject {
            resource: r.clone(),
            message: format!("has no data key {DATA_KEY}; it is not an agent-day2 batch record (delete it)"),
        })?;
    let mut rec: BatchRecord = serde_json::from_str(text).map_err(|e| Error::BadObject {
        resource: r.clone(),
        message: format!("{DATA_KEY} is not a batch record: {}", locate_error(text, &e)),
    })?;
    if (rec.api_version != API_VERSION && rec.api_version != API_VERSION_V1) || rec.kind != KIND {
        return Err(Error::BadObject {
            resource: r,
            message: format!(
                "{DATA_KEY} is {} {}, expected {API_VERSION} {KIND} (or {API_VERSION_V1})",
                rec.api_version, rec.kind
            ),
        });
    }
    rec.embedded = rec.approvals.len() + rec.reboots.len();
    Ok(rec)
}

/// `e` (a failed parse of `text` as a [`BatchRecord`]) with the field it is about: `reboots[0]:
/// missing field `at``, `reboots: not a list`; else `e` itself.
fn locate_error(text: &str, e: &serde_json::Error) -> String {
    fn first_bad<T: serde::de::DeserializeOwned>(v: &serde_json::Value, key: &str) -> Option<String> {
        let f = v.get(key)?;
        let Some(items) = f.as_array() else {
            return Some(format!("{key}: not a list"));
        };
        items.iter().enumerate().find_map(|(i, x)| {
            serde_json::from_value::<T>(x.clone())
                .err()
                .map(|e| format!("{key}[{i}]: {e}"))
        })
    }
    let Ok(v) = serde_json::from_str::<serde_json::Value>(text) else {
        return e.to_string();
    };
    first_bad::<BatchHost>(&v, "hosts")
        .or_else(|| first_bad::<Approval>(&v, "approvals"))
        .or_else(|| first_bad::<Reboot>(&v, "reboots"))
        .unwrap_or_else(|| e.to_string())
}

/// The hostnames a batch record's text names, read as loosely as possible (for a record that
/// does not parse: its hosts' CSRs are held, not approved on another record).
pub fn hostnames_of(text: &str) -> Vec<String> {
    serde_json::from_str::<serde_json::Value>(text)
        .ok()
        .and_then(|v| {
            v.get("hosts")?.as_array().map(|a| {
                a.iter()
                    .filter_map(|h| h.get("hostname")?.as_str().map(str::to_string))
                    .collect()
            })
        })
        .unwrap_or_default()
}

/// Creates [`NAMESPACE`] unless it exists (409 is fine). Errors: 403 names the Namespace.
pub async fn ensure_namespace(target: &KubeTarget) -> Result<()> {
    let ns = Namespace {
        metadata: ObjectMeta {
            name: Some(NAMESPACE.into()),
            labels: Some(BTreeMap::from([(
                "app.kubernetes.io/managed-by".to_string(),
                "agent-day2".to_string(),
            )])),
            ..Default::default()
        },
        ..Default::default()
    };
    match create_strict(&target.client, &(), None, &ns).await {
        Ok(_) => {
            tracing::info!("created namespace {NAMESPACE}");
            Ok(())
        }
        Err(kube::Error::Api(s)) if s.code == 409 => Ok(()),
        Err(e) => Err(classify(
            e,
            "create",
            ResourceRef::cluster("Namespace", NAMESPACE),
            target,
        )),
    }
}

/// Creates the record (the namespace must exist: [`ensure_namespace`]).
pub async fn create(target: &KubeTarget, rec: &BatchRecord) -> Result<()> {
    let cm = to_config_map(rec)?;
    create_strict(&target.client, &(), Some(NAMESPACE), &cm)
        .await
        .map(|_| ())
        .map_err(|e| {
            classify(
                e,
                "create",
                ResourceRef::namespaced("ConfigMap", NAMESPACE, &rec.name),
                target,
            )
        })
}

/// Every batch record, oldest first, with the ConfigMap's `resourceVersion`, its [`records`]
/// merged in. A labelled ConfigMap that does not parse (batch or record) is skipped with a
/// `warning:` naming it and what is wrong (issue 22 item 12: one hand-edited record stopped
/// monitor and `batch list` with exit 4, while approve skipped it). A missing namespace means
/// none.
pub async fn list(target: &KubeTarget) -> Result<Vec<(BatchRecord, String)>> {
    let (good, bad, records_said) = list_checked(target).await?;
    for (name, message) in &bad {
        crate::say!("warning: {}", bad_batch_message(name, message));
    }
    for w in records_said {
        crate::say!("warning: {w}");
    }
    Ok(good)
}

/// What is said of a batch ConfigMap that is not a batch record: its name, what is wrong, and
/// what to do.
pub fn bad_batch_message(name: &str, message: &str) -> String {
    format!(
        "ConfigMap {NAMESPACE}/{} is labelled a batch record but is not one ({}): skipped, its hosts \
         are not followed or approved; fix it or delete it (oc delete configmap -n {NAMESPACE} {})",
        crate::output::escape_for_display(name, 253),
        crate::output::escape_for_display(message, 300),
        crate::output::escape_for_display(name, 253)
    )
}

/// As [`list`], returning the skipped batch ConfigMaps (name, what is wrong) and the sentences
/// about skipped record ConfigMaps instead of warning about them.
pub async fn list_checked(
    target: &KubeTarget,
) -> Result<(Vec<(BatchRecord, String)>, Vec<(String, String)>, Vec<String>)> {
    let api: Api<ConfigMap> = Api::namespaced(target.client.clone(), NAMESPACE);
    let l = match api.list(&ListParams::default().labels(LABEL)).await {
        Ok(l) => l,
        Err(kube::Error::Api(s)) if s.code == 404 => return Ok((vec![], vec![], vec![])),
        Err(e) => {
            return Err(classify(
                e,
                "list",
                ResourceRef {
                    kind: "ConfigMaps".into(),
                    namespace: Some(NAMESPACE.into()),
                    name: None,
                },
                target,
            ))
        }
    };
    let mut out = Vec::new();
    let mut skipped = Vec::new();
    for cm in &l.items {
        match from_config_map(cm) {
            Ok(r) => out.push((r, cm.metadata.resource_version.clone().unwrap_or_default())),
            Err(e) => skipped.push((
                cm.metadata.name.clone().unwrap_or_default(),
                match e {
                    Error::BadObject { message, .. } => message,
                    e => e.to_string(),
                },
            )),
        }
    }
    let (recs, bad) = records::list(target, None).await?;
    let mut batches: Vec<BatchRecord> = out.iter().map(|(r, _)| r.clone()).collect();
    records::merge(&mut batches, &recs);
    for (o, b) in out.iter_mut().zip(batches) {
        o.0 = b;
    }
    out.sort_by(|a, b| {
        a.0.created_at
            .cmp(&b.0.created_at)
            .then_with(|| a.0.name.cmp(&b.0.name))
    });
    Ok((out, skipped, bad_records_said(&bad)))
}

/// One record and its `resourceVersion`, its [`records`] merged in. Errors: 404
/// ([`Error::NotFound`]) naming the batch; a record that does not parse ([`bad_record`]).
pub async fn get(target: &KubeTarget, name: &str) -> Result<(BatchRecord, String)> {
    let (rec, rv, said) = get_saying(target, name).await?;
    for w in said {
        crate::say!("warning: {w}");
    }
    Ok((rec, rv))
}

/// [`get`], with the sentences about its record ConfigMaps skipped as not records returned
/// instead of printed (monitor says them as `warning` events, in `-o json` too).
pub async fn get_saying(target: &KubeTarget, name: &str) -> Result<(BatchRecord, String, Vec<String>)> {
    let cm = get_labelled(target, name).await?;
    let mut rec = from_config_map(&cm)?;
    let (recs, bad) = records::list(target, Some(name)).await?;
    for s in &recs {
        records::add(&mut rec, &s.record);
    }
    Ok((
        rec,
        cm.metadata.resource_version.clone().unwrap_or_default(),
        bad_records_said(&bad),
    ))
}

/// Whether batch `name`'s ConfigMap exists now (read just before an approval or a reboot record
/// is written on it: a batch deleted meanwhile gets neither). Errors: the read's, naming the
/// ConfigMap (exit 4).
pub async fn exists(target: &KubeTarget, name: &str) -> Result<bool> {
    let api: Api<ConfigMap> = Api::namespaced(target.client.clone(), NAMESPACE);
    api.get_opt(name).await.map(|c| c.is_some()).map_err(|e| {
        classify(
            e,
            "read",
            ResourceRef::namespaced("ConfigMap", NAMESPACE, name),
            target,
        )
    })
}

/// Batch `name`'s ConfigMap, checked for the batch label only (not parsed: `batch delete` must
/// remove a hand-edited record that no longer parses). Errors as [`get`]'s.
pub async fn get_labelled(target: &KubeTarget, name: &str) -> Result<ConfigMap> {
    let api: Api<ConfigMap> = Api::namespaced(target.client.clone(), NAMESPACE);
    let r = ResourceRef::namespaced("ConfigMap", NAMESPACE, name);
    let cm = api
        .get(name)
        .await
        .map_err(|e| match classify(e, "read", r.clone(), target) {
            // Named as the user knows it (a batch, not a ConfigMap); the generic "is this an
            // OpenShift cluster" hint does not apply (error.rs leaves kind "batch" without one).
            Error::NotFound { .. } => Error::NotFound {
                resource: ResourceRef {
                    kind: "batch".into(),
                    namespace: None,
                    name: Some(format!("{name:?}")),
                },
                why: Some(format!(
                    "in namespace {NAMESPACE}; see: oc agent-day2 add-nodes batch list"
                )),
            },
            other => other,
        })?;
    if cm.metadata.labels.as_ref().and_then(|l| l.get(LABEL)).is_none() {
        return Err(Error::BadObject {
            resource: r,
            message: format!("is not labelled {LABEL}; not a batch record"),
        });
    }
    Ok(cm)
}

/// Says (on stderr) which record ConfigMaps were skipped as not records: (batch, name, what
/// is wrong). `approve` holds such a batch's hosts instead ([`crate::approve`]); the other
/// readers (lists, monitor's stages, add-nodes' overlaps) go on without them.
/// One sentence per record ConfigMap skipped as not a record: (batch, ConfigMap, what is wrong).
fn bad_records_said(bad: &[(String, String, String)]) -> Vec<String> {
    bad.iter()
        .map(|(b, name, message)| {
            format!(
                "ConfigMap {NAMESPACE}/{} is labelled a record of batch {} but is not one ({}): skipped; \
                 approve holds that batch's hosts until it is fixed or deleted",
                crate::output::escape_for_display(name, 253),
                crate::output::escape_for_display(b, 253),
                crate::output::escape_for_display(message, 300)
            )
        })
        .collect()
}

/// Replaces the record if its ConfigMap still has `resource_version` (compare-and-swap), as
/// [`API_VERSION`]: approvals and reboots its JSON held (`embedded`, an earlier version's) are
/// first created as [`records`] (an existing one is kept), so nothing is lost and an earlier
/// version refuses the batch from then on instead of missing its approvals. Returns the new
/// `resourceVersion`. Errors: a 409 (someone changed it meanwhile: read it again and retry) as
/// [`Error::Api`] whose message starts with `HTTP 409`; a record's create.
pub async fn update(target: &KubeTarget, rec: &BatchRecord, resource_version: &str) -> Result<String> {
    if rec.embedded > 0 {
        convert_records(target, rec).await?;
    }
    let mut cm = to_config_map(rec)?;
    cm.metadata.resource_version = Some(resource_version.to_string());
    let r = ResourceRef::namespaced("ConfigMap", NAMESPACE, &rec.name);
    let body = serde_json::to_vec(&cm).map_err(|e| Error::Unexpected(e.to_string()))?;
    let url = <ConfigMap as kube::Resource>::url_path(&(), Some(NAMESPACE));
    let pp = PostParams {
        dry_run: false,
        field_manager: Some(FIELD_MANAGER.into()),
    };
    let req = kube::core::Request::new(url)
        .replace(&rec.name, &pp, body)
        .map_err(|e| Error::Unexpected(format!("building the update of {r}: {e}")))?;
    let done = target
        .client
        .request::<ConfigMap>(with_strict_validation(req))
        .await
        .map_err(|e| classify(e, "update", r, target))?;
    if rec.embedded > 0 && rec.api_version == API_VERSION_V1 {
        crate::say!(
            "note: batch {}: its approvals and reboot reports now live in ConfigMaps of their own \
             (label {}={}), and it is marked {API_VERSION}; agent-day2 versions before that \
             refuse it (so none approves a node twice)",
            rec.name,
            records::RECORD_OF,
            rec.name
        );
    }
    Ok(done.metadata.resource_version.unwrap_or_default())
}

/// Creates every approval and reboot of `rec` (a merged batch) as a [`records`] ConfigMap,
/// approvals numbered in their order per node and kind; those that exist are kept.
async fn convert_records(target: &KubeTarget, rec: &BatchRecord) -> Result<()> {
    let mut seen: BTreeMap<(String, String), usize> = BTreeMap::new();
    for a in &rec.approvals {
        let i = seen.entry((a.node.clone(), a.kind.clone())).or_default();
        records::create(target, &records::approval_config_map(&rec.name, *i, a)).await?;
        *i += 1;
    }
    for r in &rec.reboots {
        records::create(target, &records::reboot_config_map(&rec.name, r)).await?;
    }
    Ok(())
}

/// Makes `name` an [`API_VERSION`] batch if it is not one yet (an earlier version's: its
/// approvals and reboots moved into [`records`], said once), before a record is written for it.
/// A batch once converted stays so (earlier versions refuse it), so a caller need not ask
/// twice. Errors as [`get`] and [`update`] (a 409 is retried, up to 8 times).
pub async fn convert(target: &KubeTarget, name: &str) -> Result<()> {
    for _ in 0..8 {
        let (rec, rv) = get(target, name).await?;
        if rec.embedded == 0 && rec.api_version == API_VERSION {
            return Ok(());
        }
        match update(target, &rec, &rv).await {
            Ok(_) => return Ok(()),
            Err(Error::Api { message, .. }) if message.starts_with("HTTP 409") => continue,
            Err(e) => return Err(e),
        }
    }
    Err(Error::Unexpected(format!(
        "batch {name} kept changing while converting it to {API_VERSION}; run the command again"
    )))
}

/// Deletes a batch record, then its [`records`]. Errors: 404 naming the batch; a ConfigMap
/// without [`LABEL`] is refused (not ours).
pub async fn delete(target: &KubeTarget, name: &str) -> Result<()> {
    // A record that does not parse is deleted too (docs/batch-records.md: the way out of a
    // broken one).
    get_labelled(target, name).await?;
    let api: Api<ConfigMap> = Api::namespaced(target.client.clone(), NAMESPACE);
    api.delete(name, &DeleteParams::default())
        .await
        .map(|_| ())
        .map_err(|e| {
            classify(
                e,
                "delete",
                ResourceRef::namespaced("ConfigMap", NAMESPACE, name),
                target,
            )
        })?;
    records::delete_of(target, name).await.map(|_| ())
}

/// Who we are, for `createdBy`: a SelfSubjectReview's username; else the kubeconfig user
/// (marked as such); else `unknown`. Never fails (the record is still useful without it).
pub async fn whoami(target: &KubeTarget) -> String {
    use k8s_openapi::api::authentication::v1::SelfSubjectReview;
    let ssr = SelfSubjectReview::default();
    match create_strict(&target.client, &(), None, &ssr).await {
        Ok(r) => {
            if let Some(u) = r
                .status
                .and_then(|s| s.user_info)
                .and_then(|u| u.username)
                .filter(|u| !u.is_empty())
            {
                return u;
            }
        }
        Err(e) => tracing::debug!("SelfSubjectReview failed: {e}"),
    }
    match &target.user_hint {
        Some(u) => format!("{u} (kubeconfig user)"),
        None => "unknown".into(),
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    pub(crate) fn rec() -> BatchRecord {
        BatchRecord {
            api_version: API_VERSION.into(),
            kind: KIND.into(),
            name: "batch-20261129-211034-ab12".into(),
            created_at: "2026-11-29T21:10:34Z".into(),
            created_by: "system:admin".into(),
            cluster_id: "c37c9544-4320-4380-9d8b-0753a4d9ea57".into(),
            release_image: "quay.io/x@sha256:00".into(),
            version: "4.18.12".into(),
            architecture: "x86_64".into(),
            pool: "worker".into(),
            node_labels: BTreeMap::from([("zone".into(), "a".into())]),
            output_kind: "iso".into(),
            files: vec!["node.x86_64.iso".into()],
            image_sha256: "ab".repeat(32),
            token_expires_at: "2026-12-01T21:10:34Z".into(),
            hosts: vec![
                BatchHost {
                    hostname: "worker-0".into(),
                    macs: vec!["52:54:00:aa:00:30".into()],
                    ips: vec!["192.168.111.30".into()],
                    ip_source: "static".into(),
                },
                BatchHost {
                    hostname: "worker-1".into(),
                    macs: vec!["52:54:00:aa:00:31".into()],
                    ips: vec![],
                    ip_source: "unknown".into(),
                },
            ],
            approvals: vec![],
            reboots: vec![],
            embedded: 0,
        }
    }

    #[test]
    fn config_map_round_trip_and_labels() {
        let r = rec();
        let cm = to_config_map(&r).unwrap();
        assert_eq!(cm.metadata.labels.as_ref().unwrap()[LABEL], r.name);
        assert_eq!(cm.metadata.namespace.as_deref(), Some("openshift-agent-day2"));
        let text = &cm.data.as_ref().unwrap()[DATA_KEY];
        assert!(
            text.contains("\"tokenExpiresAt\"") && text.contains("\"ipSource\":\"unknown\""),
            "{text}"
        );
        assert_eq!(from_config_map(&cm).unwrap(), r);
        assert_eq!(r.hosts[1].ips_display(), "unknown (DHCP)");
        let mut bad = cm.clone();
        bad.data
            .as_mut()
            .unwrap()
            .insert(DATA_KEY.into(), "{\"apiVersion\":\"x\"}".into());
        let e = from_config_map(&bad).unwrap_err().to_string();
        assert!(
            e.contains("ConfigMap openshift-agent-day2/batch-20261129-211034-ab12"),
            "{e}"
        );
    }

    #[test]
    fn names_sort_by_time_and_are_dns_labels() {
        let t = std::time::UNIX_EPOCH + std::time::Duration::from_secs(1_796_000_000);
        let n = new_name(t);
        assert!(n.starts_with("batch-202611"), "{n}");
        assert_eq!(n.len(), "batch-20261129-211034-ab12".len());
        assert!(n
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-'));
        assert_ne!(new_name(t), new_name(t), "random suffix");
    }
}
