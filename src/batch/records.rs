//! A batch's records: each approval `approve` makes and each reboot report `monitor` sees is one
//! small ConfigMap of its own, created once and never updated, so that recording costs a few
//! hundred bytes whatever the batch's size and no writer rewrites what another wrote.
//!
//! Format (`agent-day2/v2` batches, docs/batch-records.md): a ConfigMap in
//! [`super::NAMESPACE`] labelled [`RECORD_OF`]`=<batch>`, [`RECORD`]`=approval|reboot` and
//! `app.kubernetes.io/managed-by=agent-day2`, whose `data["record.json"]` is one
//! [`super::Approval`] or [`super::Reboot`] as compact JSON. Names:
//! - `<batch>.<node>.<client|serving>-<n>`: the `n`-th (0-based) approval of that kind for that
//!   node on that batch. Two approvers that judged the same node at once both try the same
//!   name; the API server lets one create it (409 `AlreadyExists` for the other, which reads
//!   the winner's record and judges again). That is the compare-and-swap that keeps "never
//!   approve twice, even across crashes and concurrent approvers", per node instead of per batch.
//! - `<batch>.<host>.reboot`: the host's first reboot report; a second create fails and the
//!   first is kept (as `monitor` always kept the first).
//!
//! A name longer than 253 characters (a long FQDN node name) uses `h<16 hex of sha256(node)>`
//! for the node part; the record's JSON names the node in full either way.
//!
//! Batches written by earlier versions (`agent-day2/v1`) keep their approvals and reboots in
//! the batch's own JSON; readers merge both ([`merge`]), and the first write to such a batch
//! moves them into records and marks it `agent-day2/v2` ([`super::convert`]), so an earlier
//! version, which would not see records, refuses the batch instead of approving twice.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, ListParams, ObjectMeta};
use serde::Serialize;
use sha2::{Digest, Sha256};

use super::model::{Approval, BatchRecord, Reboot, NAMESPACE};
use crate::error::{Error, ResourceRef, Result};
use crate::kube::classify;
use crate::kube::write::create_strict;
use crate::kube::KubeTarget;

/// Label on every record: the batch it belongs to.
pub const RECORD_OF: &str = "agent-day2.openshift.io/record-of";
/// Label on every record: `approval` or `reboot`.
pub const RECORD: &str = "agent-day2.openshift.io/record";
/// The data key holding the record's JSON.
pub const DATA_KEY: &str = "record.json";

/// One record as read.
#[derive(Debug, Clone, PartialEq)]
pub enum Record {
    /// An approval recorded before `/approval` was called.
    Approval(Approval),
    /// A host's reboot report.
    Reboot(Reboot),
}

/// A record with the batch it belongs to and its ConfigMap name.
#[derive(Debug, Clone, PartialEq)]
pub struct Stored {
    /// The batch ([`RECORD_OF`]).
    pub batch: String,
    /// The ConfigMap's name.
    pub name: String,
    /// What it records.
    pub record: Record,
}

/// The node part of a record name: the node name itself, or `h<16 hex>` when the whole name
/// would pass 253 characters.
fn node_part(batch: &str, node: &str, suffix: &str) -> String {
    if batch.len() + node.len() + suffix.len() + 2 <= 253 {
        node.to_string()
    } else {
        let d = Sha256::digest(node.as_bytes());
        format!("h{}", &hex::encode(d)[..16])
    }
}

/// Name of the `index`-th `kind` (`client`/`serving`) approval of `node` on `batch`.
pub fn approval_name(batch: &str, node: &str, kind: &str, index: usize) -> String {
    let suffix = format!("{kind}-{index}");
    format!("{batch}.{}.{suffix}", node_part(batch, node, &suffix))
}

/// Name of `host`'s reboot record on `batch`.
pub fn reboot_name(batch: &str, host: &str) -> String {
    format!("{batch}.{}.reboot", node_part(batch, host, "reboot"))
}

fn config_map(name: String, batch: &str, what: &str, json: String) -> ConfigMap {
    ConfigMap {
        metadata: ObjectMeta {
            name: Some(name),
            namespace: Some(NAMESPACE.into()),
            labels: Some(BTreeMap::from([
                (RECORD_OF.to_string(), batch.to_string()),
                (RECORD.to_string(), what.to_string()),
                (
                    "app.kubernetes.io/managed-by".to_string(),
                    "agent-day2".to_string(),
                ),
            ])),
            ..Default::default()
        },
        data: Some(BTreeMap::from([(DATA_KEY.to_string(), json)])),
        ..Default::default()
    }
}

fn json<T: Serialize>(v: &T) -> String {
    // Plain structs of strings: serialising cannot fail.
    serde_json::to_string(v).unwrap_or_default()
}

/// The ConfigMap recording `a` as the `index`-th approval of its kind for its node.
pub fn approval_config_map(batch: &str, index: usize, a: &Approval) -> ConfigMap {
    config_map(
        approval_name(batch, &a.node, &a.kind, index),
        batch,
        "approval",
        json(a),
    )
}

/// The ConfigMap recording `r`.
pub fn reboot_config_map(batch: &str, r: &Reboot) -> ConfigMap {
    config_map(reboot_name(batch, &r.host), batch, "reboot", json(r))
}

/// The record in a record ConfigMap. Errors ([`Error::BadObject`]) name the ConfigMap and what
/// is wrong (label, data key, JSON field).
pub fn from_config_map(cm: &ConfigMap) -> Result<Stored> {
    let name = cm.metadata.name.clone().unwrap_or_default();
    let bad = |message: String| Error::BadObject {
        resource: ResourceRef::namespaced("ConfigMap", NAMESPACE, &name),
        message,
    };
    let labels = cm.metadata.labels.clone().unwrap_or_default();
    let batch = labels
        .get(RECORD_OF)
        .cloned()
        .ok_or_else(|| bad(format!("has no label {RECORD_OF}")))?;
    let text = cm
        .data
        .as_ref()
        .and_then(|d| d.get(DATA_KEY))
        .ok_or_else(|| bad(format!("has no data key {DATA_KEY}")))?;
    let record = match labels.get(RECORD).map(String::as_str) {
        Some("approval") => {
            let a: Approval = serde_json::from_str(text)
                .map_err(|e| bad(format!("{DATA_KEY} is not an approval record: {e}")))?;
            if a.kind != "client" && a.kind != "serving" {
                return Err(bad(format!(
                    "{DATA_KEY}: kind {:?} is neither client nor serving",
                    a.kind
                )));
            }
            // The name is the record's key (the create that can fail only once): it must be
            // what the content says, or an approver would try that name for ever.
            let full = approval_name(&batch, &a.node, &a.kind, 0);
            let prefix = &full[..full.len() - 1];
            let n = name.strip_prefix(prefix).unwrap_or("");
            if n.is_empty() || !n.bytes().all(|b| b.is_ascii_digit()) {
                return Err(bad(format!(
                    "its name does not match {DATA_KEY} (a {} approval of node {:?}: expected {prefix}<n>)",
                    a.kind, a.node
                )));
            }
            Record::Approval(a)
        }
        Some("reboot") => {
            let r: Reboot = serde_json::from_str(text)
                .map_err(|e| bad(format!("{DATA_KEY} is not a reboot record: {e}")))?;
            let want = reboot_name(&batch, &r.host);
            if name != want {
                return Err(bad(format!(
                    "its name does not match {DATA_KEY} (a reboot report of host {:?}: expected {want})",
                    r.host
                )));
            }
            Record::Reboot(r)
        }
        other => {
            return Err(bad(format!(
                "label {RECORD} is {}, expected approval or reboot",
                other
                    .map(|o| format!("{o:?}"))
                    .unwrap_or_else(|| "missing".into())
            )))
        }
    };
    Ok(Stored { batch, name, record })
}

/// What a create did.
#[derive(Debug, Clone, PartialEq)]
pub enum Created {
    /// Ours.
    Made(ConfigMap),
    /// The name was taken: someone else's record (read back), which stands.
    Existed(ConfigMap),
}

/// Creates record `cm` (`fieldValidation=Strict`). A 409 reads the existing one instead
/// ([`Created::Existed`]). Errors: the API's, naming the ConfigMap (403: the `create`
/// permission on ConfigMaps in the namespace, docs/permissions.md).
pub async fn create(target: &KubeTarget, cm: &ConfigMap) -> Result<Created> {
    let name = cm.metadata.name.clone().unwrap_or_default();
    let r = ResourceRef::namespaced("ConfigMap", NAMESPACE, &name);
    match create_strict(&target.client, &(), Some(NAMESPACE), cm).await {
        Ok(done) => Ok(Created::Made(done)),
        Err(kube::Error::Api(s)) if s.code == 409 => {
            let api: Api<ConfigMap> = Api::namespaced(target.client.clone(), NAMESPACE);
            let got = api
                .get(&name)
                .await
                .map_err(|e| classify(e, "read", r.clone(), target))?;
            Ok(Created::Existed(got))
        }
        Err(e) => Err(classify(e, "create", r, target)),
    }
}

/// Every record (of `batch` only, when given), in name order, and the labelled ConfigMaps that
/// are not records (batch, ConfigMap name, what is wrong). A missing namespace means none.
pub async fn list(
    target: &KubeTarget,
    batch: Option<&str>,
) -> Result<(Vec<Stored>, Vec<(String, String, String)>)> {
    let api: Api<ConfigMap> = Api::namespaced(target.client.clone(), NAMESPACE);
    let sel = match batch {
        Some(b) => format!("{RECORD_OF}={b}"),
        None => RECORD_OF.to_string(),
    };
    let l = match api.list(&ListParams::default().labels(&sel)).await {
        Ok(l) => l.items,
        Err(kube::Error::Api(s)) if s.code == 404 => vec![],
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
    let mut good = Vec::new();
    let mut bad = Vec::new();
    for cm in &l {
        // Only what carries the label is a record (a server that ignored the selector listed
        // everything: the batch itself is not a broken record).
        if cm
            .metadata
            .labels
            .as_ref()
            .and_then(|l| l.get(RECORD_OF))
            .is_none()
        {
            continue;
        }
        match from_config_map(cm) {
            Ok(s) => good.push(s),
            Err(Error::BadObject { message, .. }) => bad.push((
                cm.metadata
                    .labels
                    .as_ref()
                    .and_then(|l| l.get(RECORD_OF))
                    .cloned()
                    .unwrap_or_default(),
                cm.metadata.name.clone().unwrap_or_default(),
                message,
            )),
            Err(e) => return Err(e),
        }
    }
    good.sort_by(|a, b| a.name.cmp(&b.name));
    Ok((good, bad))
}

/// Deletes every record of `batch` (after the batch itself is gone). Returns how many.
/// Errors: the API's, naming the ConfigMaps (403: `delete` on ConfigMaps in the namespace).
pub async fn delete_of(target: &KubeTarget, batch: &str) -> Result<usize> {
    let (recs, bad) = list(target, Some(batch)).await?;
    let api: Api<ConfigMap> = Api::namespaced(target.client.clone(), NAMESPACE);
    let mut n = 0;
    for name in recs.iter().map(|s| &s.name).chain(bad.iter().map(|b| &b.1)) {
        match api.delete(name, &Default::default()).await {
            Ok(_) => n += 1,
            Err(kube::Error::Api(s)) if s.code == 404 => {}
            Err(e) => {
                return Err(classify(
                    e,
                    "delete",
                    ResourceRef::namespaced("ConfigMap", NAMESPACE, name),
                    target,
                ))
            }
        }
    }
    Ok(n)
}

/// Adds `s` to `rec` (the batch it belongs to) unless it is there already: an approval of the
/// same node, kind and CSR, or any reboot of the same host (the first is kept). Returns true
/// when it was new. This is how a batch read from the cluster shows every approval and reboot,
/// in the shape earlier versions stored them in.
pub fn add(rec: &mut BatchRecord, s: &Record) -> bool {
    match s {
        Record::Approval(a) => {
            if rec
                .approvals
                .iter()
                .any(|x| x.node == a.node && x.kind == a.kind && x.csr == a.csr)
            {
                return false;
            }
            rec.approvals.push(a.clone());
        }
        Record::Reboot(r) => {
            if rec.reboots.iter().any(|x| x.host == r.host) {
                return false;
            }
            rec.reboots.push(r.clone());
        }
    }
    true
}

/// `recs` added to the batches they belong to ([`add`]), approvals in name order (so in index
/// order per node and kind). Records of batches not in `batches` are left out.
pub fn merge(batches: &mut [BatchRecord], recs: &[Stored]) {
    let at: BTreeMap<String, usize> = batches
        .iter()
        .enumerate()
        .map(|(i, b)| (b.name.clone(), i))
        .collect();
    for s in recs {
        if let Some(i) = at.get(&s.batch) {
            add(&mut batches[*i], &s.record);
        }
    }
}

/// The index the next `kind` approval of `node` takes on `rec` (merged): how many it has.
pub fn next_index(rec: &BatchRecord, node: &str, kind: &str) -> usize {
    rec.approvals
        .iter()
        .filter(|a| a.node == node && a.kind == kind)
        .count()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn appr(node: &str, kind: &str, csr: &str) -> Approval {
        Approval {
            node: node.into(),
            kind: kind.into(),
            csr: csr.into(),
            at: "2026-12-02T10:00:00Z".into(),
            by: "admin".into(),
            csr_created: Some("2026-12-02T09:59:59Z".into()),
            requester: Some(
                "system:serviceaccount:openshift-machine-config-operator:node-bootstrapper".into(),
            ),
        }
    }

    #[test]
    fn names_are_per_node_kind_and_index_and_stay_within_253() {
        let b = "batch-20261202-100000-ab12";
        assert_eq!(
            approval_name(b, "worker-1", "client", 0),
            "batch-20261202-100000-ab12.worker-1.client-0"
        );
        assert_eq!(
            reboot_name(b, "worker-1"),
            "batch-20261202-100000-ab12.worker-1.reboot"
        );
        let long = format!("{}.example.com", "a".repeat(230));
        let n = approval_name(b, &long, "serving", 3);
        assert!(n.len() <= 253, "{n}");
        assert!(
            n.starts_with("batch-20261202-100000-ab12.h") && n.ends_with(".serving-3"),
            "{n}"
        );
        assert_ne!(
            approval_name(b, &long, "serving", 3),
            approval_name(b, &format!("b{long}"), "serving", 3)
        );
    }

    #[test]
    fn records_round_trip_small_and_refuse_what_they_are_not() {
        let a = appr("worker-1", "client", "csr-a");
        let cm = approval_config_map("batch-x", 0, &a);
        let text = &cm.data.as_ref().unwrap()[DATA_KEY];
        assert!(
            text.len() < 400,
            "an approval costs a few hundred bytes: {}",
            text.len()
        );
        let s = from_config_map(&cm).unwrap();
        assert_eq!(s.batch, "batch-x");
        assert_eq!(s.record, Record::Approval(a.clone()));
        let mut bad = cm.clone();
        bad.data
            .as_mut()
            .unwrap()
            .insert(DATA_KEY.into(), "{\"node\":1}".into());
        let e = from_config_map(&bad).unwrap_err().to_string();
        assert!(
            e.contains("ConfigMap openshift-agent-day2/batch-x.worker-1.client-0"),
            "{e}"
        );
        // A record whose name says another node, kind or host than its content is no record
        // (an approver would otherwise try that name for ever).
        let mut renamed = approval_config_map(
            "batch-x",
            0,
            &Approval {
                kind: "serving".into(),
                ..a.clone()
            },
        );
        renamed.metadata.name = Some("batch-x.worker-1.client-0".into());
        let e = from_config_map(&renamed).unwrap_err().to_string();
        assert!(e.contains("its name does not match"), "{e}");
        let mut r = reboot_config_map(
            "batch-x",
            &Reboot {
                host: "worker-1".into(),
                at: "2026-12-02T10:00:00Z".into(),
                ip: "192.168.111.31".into(),
                reported: "x".into(),
                stage_started_at: None,
                by: "a".into(),
            },
        );
        assert!(from_config_map(&r).is_ok());
        r.metadata.name = Some("batch-x.worker-2.reboot".into());
        assert!(from_config_map(&r)
            .unwrap_err()
            .to_string()
            .contains("expected batch-x.worker-1.reboot"));
        let mut unlabelled = approval_config_map("batch-x", 0, &a);
        unlabelled.metadata.labels.as_mut().unwrap().remove(RECORD);
        assert!(from_config_map(&unlabelled)
            .unwrap_err()
            .to_string()
            .contains("is missing, expected approval or reboot"));
        let mut odd = approval_config_map(
            "batch-x",
            0,
            &Approval {
                kind: "peer".into(),
                ..a
            },
        );
        assert!(from_config_map(&odd)
            .unwrap_err()
            .to_string()
            .contains("neither client nor serving"));
        odd.metadata.labels.as_mut().unwrap().remove(RECORD_OF);
        assert!(from_config_map(&odd).unwrap_err().to_string().contains(RECORD_OF));
    }

    #[test]
    fn merge_keeps_the_first_reboot_and_each_approval_once() {
        let mut recs = vec![super::super::tests::rec()];
        recs[0].name = "batch-x".into();
        let r1 = Reboot {
            host: "worker-1".into(),
            at: "2026-12-02T10:00:00Z".into(),
            ip: "192.168.111.31".into(),
            reported: "added-to-existing-cluster".into(),
            stage_started_at: None,
            by: "admin".into(),
        };
        let r2 = Reboot {
            at: "2026-12-02T11:00:00Z".into(),
            ..r1.clone()
        };
        let a = appr("worker-1", "client", "csr-a");
        let stored = |name: &str, record: Record| Stored {
            batch: "batch-x".into(),
            name: name.into(),
            record,
        };
        merge(
            &mut recs,
            &[
                stored("batch-x.worker-1.client-0", Record::Approval(a.clone())),
                stored("batch-x.worker-1.reboot", Record::Reboot(r1.clone())),
                Stored {
                    batch: "batch-other".into(),
                    name: "batch-other.worker-1.reboot".into(),
                    record: Record::Reboot(r2.clone()),
                },
            ],
        );
        assert!(!add(&mut recs[0], &Record::Reboot(r2)));
        assert!(!add(&mut recs[0], &Record::Approval(a)));
        assert_eq!(recs[0].reboots, vec![r1]);
        assert_eq!(next_index(&recs[0], "worker-1", "client"), 1);
        assert_eq!(next_index(&recs[0], "worker-1", "serving"), 0);
    }
}
