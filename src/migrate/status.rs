//! `migrate status DIR`: the completion record on cluster 0 and what cluster 0 holds against
//! the bundle: the bundle's CRs present by kind, and rows per table in cluster 0's
//! assisted-service database (`SELECT count(*)` through exec `psql`, as import reaches it).
//! Table counts are whole tables: other clusters' rows on cluster 0 count too.

use std::collections::BTreeMap;

use kube::api::{Api, DynamicObject};
use serde::Serialize;

use super::bundle::Bundle;
use super::exec;
use super::import::{default_namespace, plan, read_crs};
use super::record::{self, Record};
use crate::cluster::classify;
use crate::error::{Error, ResourceRef};
use crate::kube_flags::KubeFlags;

/// Have/want of one kind or table.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct Count {
    /// In the bundle.
    pub bundle: u64,
    /// On cluster 0 (None: could not be read, see `errors`).
    pub cluster: Option<u64>,
}

/// The `-o json|yaml` document.
#[derive(Debug, Serialize)]
pub struct StatusDoc {
    /// Bundle checksum.
    pub bundle_sha256: String,
    /// Assisted cluster id and name.
    pub cluster_id: String,
    /// Cluster name.
    pub cluster_name: String,
    /// Namespace looked at.
    pub namespace: String,
    /// The record (None: no import of any bundle there).
    pub record: Option<Record>,
    /// Whether the record is of this bundle.
    pub record_is_this_bundle: bool,
    /// CRs by kind.
    pub objects: BTreeMap<String, Count>,
    /// Rows by table.
    pub rows: BTreeMap<String, Count>,
    /// What could not be read.
    pub errors: Vec<String>,
}

/// `migrate status`.
pub async fn run(kube: &KubeFlags, args: &super::StatusArgs) -> Result<u8, Error> {
    let bundle = Bundle::open(&args.bundle)?;
    let crs = read_crs(&bundle)?;
    let ns = default_namespace(&bundle, &crs, kube.namespace.as_deref());
    let plan = plan(&crs, &ns, bundle.checksum())?;
    let target = kube.resolve().await?;
    let rref = ResourceRef::namespaced("ConfigMap", &ns, record::RECORD_NAME);
    let rec = match record::read(&target.client, &ns).await {
        Ok(r) => r.map(|(r, _)| r),
        Err(record::ReadError::Bad(e)) => return Err(e),
        Err(record::ReadError::Kube(e)) => return Err(classify(e, "read", rref, &target)),
    };
    let mut errors = Vec::new();
    let mut objects: BTreeMap<String, Count> = BTreeMap::new();
    for p in &plan {
        let c = objects.entry(p.info.kind.to_string()).or_insert(Count {
            bundle: 0,
            cluster: Some(0),
        });
        c.bundle += 1;
        let ar = p.info.api_resource();
        let api: Api<DynamicObject> = match &p.namespace {
            Some(n) => Api::namespaced_with(target.client.clone(), n, &ar),
            None => Api::all_with(target.client.clone(), &ar),
        };
        match api.get_opt(&p.name).await {
            Ok(Some(_)) => {
                if let Some(n) = c.cluster.as_mut() {
                    *n += 1;
                }
            }
            Ok(None) => {}
            Err(e) => {
                let e = classify(e, "read", p.resource(), &target);
                if matches!(e, Error::Unreachable { .. } | Error::Unauthorized { .. }) {
                    return Err(e);
                }
                c.cluster = None;
                errors.push(e.to_string());
            }
        }
    }
    let mut rows: BTreeMap<String, Count> = bundle
        .manifest
        .counts
        .rows
        .iter()
        // The target keeps its own schema history (import does not restore `migrations`).
        .filter(|(t, _)| t.as_str() != "migrations")
        .map(|(t, n)| {
            (
                t.clone(),
                Count {
                    bundle: *n,
                    cluster: None,
                },
            )
        })
        .collect();
    let db = match rec.as_ref().and_then(|r| r.assisted_service.as_ref()) {
        Some(a) if a.pod == "db-url" => None,
        _ => match exec::find_assisted_db(&target).await {
            Ok(db) => Some(db),
            Err(e) => {
                errors.push(format!("database: {e}"));
                None
            }
        },
    };
    if let Some(db) = db {
        for (table, c) in rows.iter_mut() {
            if !table.chars().all(|ch| ch.is_ascii_alphanumeric() || ch == '_') {
                continue;
            }
            match db
                .query(Some(&target), &format!("SELECT count(*) FROM public.{table}"))
                .await
            {
                Ok(l) => c.cluster = l.first().and_then(|s| s.trim().parse().ok()),
                Err(e) => errors.push(format!("table {table}: {e}")),
            }
        }
    } else if rec
        .as_ref()
        .and_then(|r| r.assisted_service.as_ref())
        .is_some_and(|a| a.pod == "db-url")
    {
        errors.push("database: restored through --db-url; row counts not read".into());
    }
    let doc = StatusDoc {
        bundle_sha256: bundle.checksum().to_string(),
        cluster_id: bundle.manifest.cluster.id.clone(),
        cluster_name: bundle.manifest.cluster.name.clone(),
        namespace: ns.clone(),
        record_is_this_bundle: rec.as_ref().is_some_and(|r| r.is_of(bundle.checksum())),
        record: rec,
        objects,
        rows,
        errors,
    };
    let out = crate::output::render(args.output, &doc, || table(&doc))?;
    print!("{out}");
    Ok(0)
}

fn show(c: &Count) -> [String; 2] {
    [
        c.bundle.to_string(),
        c.cluster.map(|n| n.to_string()).unwrap_or_else(|| "?".into()),
    ]
}

/// The `-o table` text.
pub fn table(d: &StatusDoc) -> String {
    use crate::output::display;
    let phase = match &d.record {
        None => "no import yet".to_string(),
        Some(r) if !d.record_is_this_bundle => {
            format!("record of another bundle ({})", display(&r.bundle_sha256))
        }
        Some(r) => match r.phase {
            record::Phase::Complete => {
                format!("complete at {}", display(r.completed.as_deref().unwrap_or("?")))
            }
            record::Phase::InProgress => format!(
                "in progress since {} (done: {})",
                display(&r.started),
                display(&r.steps_done.join(", "))
            ),
        },
    };
    let mut s = crate::output::key_values(&[
        (
            "Cluster",
            format!("{} ({})", display(&d.cluster_name), display(&d.cluster_id)),
        ),
        ("Namespace", display(&d.namespace)),
        ("Bundle", d.bundle_sha256.clone()),
        ("Import", phase),
    ]);
    s.push_str("\n\n");
    let mut rows: Vec<Vec<String>> = Vec::new();
    for (k, c) in &d.objects {
        let [b, h] = show(c);
        rows.push(vec!["object".into(), k.clone(), b, h]);
    }
    for (t, c) in &d.rows {
        let [b, h] = show(c);
        rows.push(vec!["table".into(), display(t), b, h]);
    }
    s.push_str(&crate::output::table(
        &["what", "name", "bundle", "cluster 0"],
        rows,
    ));
    s.push('\n');
    for e in &d.errors {
        s.push_str(&format!("warning: {}\n", display(e)));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_shows_counts_and_unknowns() {
        let d = StatusDoc {
            bundle_sha256: "abc".into(),
            cluster_id: "c1".into(),
            cluster_name: "ostest".into(),
            namespace: "ostest".into(),
            record: None,
            record_is_this_bundle: false,
            objects: BTreeMap::from([(
                "Agent".into(),
                Count {
                    bundle: 3,
                    cluster: Some(2),
                },
            )]),
            rows: BTreeMap::from([(
                "events".into(),
                Count {
                    bundle: 300,
                    cluster: None,
                },
            )]),
            errors: vec!["table events: boom".into()],
        };
        let t = table(&d);
        assert!(t.contains("no import yet"), "{t}");
        assert!(
            t.lines()
                .any(|l| l.split_whitespace().collect::<Vec<_>>() == ["object", "Agent", "3", "2"]),
            "{t}"
        );
        assert!(
            t.lines()
                .any(|l| l.split_whitespace().collect::<Vec<_>>() == ["table", "events", "300", "?"]),
            "{t}"
        );
        assert!(t.contains("warning: table events: boom"), "{t}");
    }
}
