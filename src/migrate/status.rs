//! `migrate status DIR`: the completion record on cluster 0 and what cluster 0 holds against
//! the bundle: the bundle's CRs present by kind, and rows per table in cluster 0's
//! assisted-service database (`SELECT count(*)` through exec `psql`, as import reaches it).
//! Table counts are whole tables: other clusters' rows on cluster 0 count too.
//!
//! A count on cluster 0 that differs from the bundle's is marked `≠` (`2 ≠ 3`: cluster 0 has
//! 2, the bundle 3) and a last line says how many differ. The exit code stays 0 (status
//! reports; `wait` is what answers "is the import complete"); errors reading are warnings.

use std::collections::BTreeMap;

use kube::api::{Api, DynamicObject};
use serde::Serialize;

use super::bundle::Bundle;
use super::exec;
use super::import::{namespace_for, plan, read_crs};
use super::record::{self, Record};
use crate::error::{Error, ResourceRef};
use crate::kube::classify;
use crate::kube::Resolve;

/// Have/want of one kind or table.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct Count {
    /// In the bundle.
    pub bundle: u64,
    /// On cluster 0 (None: could not be read, see `errors`).
    pub cluster: Option<u64>,
}

/// The `-o json|yaml` document, in the style of every other command's: `apiVersion:
/// agent-day2/v1`, `kind: MigrateStatus`, camelCase keys (`bundleSha256`, `recordIsThisBundle`;
/// the record's fields too, see [`RecordView`]). Keys of `objects` (kinds), `rows` (table
/// names) and the record's `counts` (the bundle manifest's) are data and stay as they are.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct StatusDoc {
    /// Always `agent-day2/v1`.
    pub api_version: &'static str,
    /// Always `MigrateStatus`.
    pub kind: &'static str,
    /// Bundle checksum.
    pub bundle_sha256: String,
    /// Assisted cluster id and name.
    pub cluster_id: String,
    /// Cluster name.
    pub cluster_name: String,
    /// Namespace looked at.
    pub namespace: String,
    /// Whether the namespace was given with `-n` (else the default, the cluster's name).
    #[serde(skip)]
    pub namespace_explicit: bool,
    /// The record (None: no import of any bundle there), shown as [`RecordView`].
    #[serde(serialize_with = "record_view")]
    pub record: Option<Record>,
    /// Whether the record is of this bundle.
    pub record_is_this_bundle: bool,
    /// CRs by kind.
    pub objects: BTreeMap<String, Count>,
    /// Rows by table.
    pub rows: BTreeMap<String, Count>,
    /// Where cluster 0's assisted-service serves the imported cluster, the clients' new address:
    /// the origin (`scheme://host:port`) of the AgentClusterInstall's
    /// `status.debugInfo.eventsURL` once cluster 0's controllers have signed it (None: not yet,
    /// or still node 0's). Only the origin: the URL's `api_key` is a credential.
    pub served_by: Option<String>,
    /// What could not be read.
    pub errors: Vec<String>,
    /// Counts on cluster 0 that differ from the bundle's (`object Kind`, `table name`; see
    /// [`StatusDoc::differing`]), so that `-o json` says it too.
    pub differing: Vec<String>,
}

/// `apiVersion` of [`StatusDoc`].
pub const API_VERSION: &str = "agent-day2/v1";
/// `kind` of [`StatusDoc`].
pub const KIND: &str = "MigrateStatus";

/// The import record as `migrate status -o json|yaml` shows it: the fields of [`Record`]
/// (which keeps its snake_case in the ConfigMap, where earlier versions wrote it so) in
/// camelCase.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RecordView<'a> {
    /// [`Record::bundle_sha256`].
    pub bundle_sha256: &'a str,
    /// [`Record::cluster_id`].
    pub cluster_id: &'a str,
    /// [`Record::cluster_name`].
    pub cluster_name: &'a str,
    /// [`Record::phase`]: in-progress | complete.
    pub phase: record::Phase,
    /// [`Record::steps_done`].
    pub steps_done: &'a [String],
    /// [`Record::started`] (RFC 3339 UTC).
    pub started: &'a str,
    /// [`Record::completed`] (RFC 3339 UTC).
    pub completed: Option<&'a str>,
    /// [`Record::counts`], as in the bundle's manifest.
    pub counts: &'a serde_json::Value,
    /// [`Record::pvc`].
    pub pvc: Option<&'a str>,
    /// [`Record::assisted_service`]: `{namespace, pod}`.
    pub assisted_service: Option<&'a record::AssistedRef>,
    /// [`Record::bundle_created`].
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bundle_created: Option<&'a str>,
    /// [`Record::holder`].
    #[serde(skip_serializing_if = "Option::is_none")]
    pub holder: Option<&'a str>,
    /// [`Record::heartbeat`].
    #[serde(skip_serializing_if = "Option::is_none")]
    pub heartbeat: Option<&'a str>,
    /// [`Record::released`].
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub released: bool,
}

impl<'a> From<&'a Record> for RecordView<'a> {
    fn from(r: &'a Record) -> Self {
        RecordView {
            bundle_sha256: &r.bundle_sha256,
            cluster_id: &r.cluster_id,
            cluster_name: &r.cluster_name,
            phase: r.phase,
            steps_done: &r.steps_done,
            started: &r.started,
            completed: r.completed.as_deref(),
            counts: &r.counts,
            pvc: r.pvc.as_deref(),
            assisted_service: r.assisted_service.as_ref(),
            bundle_created: r.bundle_created.as_deref(),
            holder: r.holder.as_deref(),
            heartbeat: r.heartbeat.as_deref(),
            released: r.released,
        }
    }
}

fn record_view<S: serde::Serializer>(r: &Option<Record>, s: S) -> Result<S::Ok, S::Error> {
    r.as_ref().map(RecordView::from).serialize(s)
}

/// `migrate status`.
pub async fn run(resolve: Resolve, args: &super::plan::Status) -> Result<u8, Error> {
    let bundle = Bundle::open(&args.bundle)?;
    let crs = read_crs(&bundle)?;
    let (ns, explicit) = namespace_for(&bundle, &crs, args.namespace.as_deref())?;
    let plan = plan(&crs, &ns, bundle.checksum())?;
    let target = resolve().await?;
    let rref = ResourceRef::namespaced("ConfigMap", &ns, record::RECORD_NAME);
    let rec = match record::read(&target.client, &ns).await {
        Ok(r) => r.map(|(r, _)| r),
        Err(record::ReadError::Bad(e)) => return Err(e),
        Err(record::ReadError::Kube(e)) => return Err(classify(e, "read", rref, &target)),
    };
    let mut errors = Vec::new();
    let mut served_by = None;
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
            Ok(Some(o)) => {
                if p.info.kind == "AgentClusterInstall" {
                    let events = o.data["status"]["debugInfo"]["eventsURL"].as_str();
                    served_by = served_by_origin(events, &bundle.manifest.source.url);
                }
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
        let tables: Vec<String> = rows.keys().cloned().collect();
        let (have, errs) = super::exec::table_counts(&db, &target, &tables).await;
        errors.extend(errs);
        for (table, n) in have {
            if let Some(c) = rows.get_mut(&table) {
                c.cluster = n;
            }
        }
    } else if rec
        .as_ref()
        .and_then(|r| r.assisted_service.as_ref())
        .is_some_and(|a| a.pod == "db-url")
    {
        errors.push("database: restored through --db-url; row counts not read".into());
    }
    let mut doc = StatusDoc {
        api_version: API_VERSION,
        kind: KIND,
        bundle_sha256: bundle.checksum().to_string(),
        cluster_id: bundle.manifest.cluster.id.clone(),
        cluster_name: bundle.manifest.cluster.name.clone(),
        namespace: ns.clone(),
        namespace_explicit: explicit,
        record_is_this_bundle: rec.as_ref().is_some_and(|r| r.is_of(bundle.checksum())),
        record: rec,
        objects,
        rows,
        served_by,
        errors,
        differing: Vec::new(),
    };
    doc.differing = doc.differing();
    let out = crate::output::render(args.output, &doc, || table(&doc))?;
    crate::output::emit(&out);
    Ok(0)
}

/// The origin (`scheme://host[:port]`) of `events_url` (an AgentClusterInstall's
/// `status.debugInfo.eventsURL`), unless it is node 0's (`node0_url`, the bundle's source) or
/// not an http(s) URL. Pure; never returns the query (its `api_key` is a credential).
pub fn served_by_origin(events_url: Option<&str>, node0_url: &str) -> Option<String> {
    let u = events_url?;
    let (scheme, rest) = u.split_once("://")?;
    if !matches!(scheme, "http" | "https") {
        return None;
    }
    let authority = rest
        .split(['/', '?', '#'])
        .next()
        .filter(|a| !a.is_empty() && !a.contains('@'))?;
    let origin = format!("{scheme}://{authority}");
    let node0 = node0_url.trim_end_matches('/');
    if node0.starts_with(&origin) && node0[origin.len()..].chars().next().is_none_or(|c| c == '/') {
        return None;
    }
    Some(origin)
}

impl Count {
    /// Whether cluster 0's count is known and not the bundle's.
    pub fn differs(&self) -> bool {
        self.cluster.is_some_and(|n| n != self.bundle)
    }
}

impl StatusDoc {
    /// `object Kind` / `table name` of every count that differs from the bundle's.
    pub fn differing(&self) -> Vec<String> {
        let o = self
            .objects
            .iter()
            .filter(|(_, c)| c.differs())
            .map(|(k, _)| format!("object {k}"));
        let t = self
            .rows
            .iter()
            .filter(|(_, c)| c.differs())
            .map(|(k, _)| format!("table {k}"));
        o.chain(t).collect()
    }
}

/// The bundle's count and cluster 0's (`2 ≠ 3` when they differ, `?` when unknown).
fn show(c: &Count) -> [String; 2] {
    let have = match c.cluster {
        None => "?".to_string(),
        Some(n) if c.differs() => format!("{n} ≠ {}", c.bundle),
        Some(n) => n.to_string(),
    };
    [c.bundle.to_string(), have]
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
        (
            "Served by",
            match &d.served_by {
                Some(o) => format!(
                    "{} (cluster 0's assisted-service; signed events and logs URLs in the \
                     AgentClusterInstall's status.debugInfo)",
                    display(o)
                ),
                None => "not yet: cluster 0's assisted-service has not reconciled the AgentClusterInstall \
                         (it does once it runs on cluster 0, started after the import)"
                    .to_string(),
            },
        ),
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
    let diff = d.differing();
    let all = || d.objects.values().chain(d.rows.values());
    let total = all().count();
    let unknown = all().filter(|c| c.cluster.is_none()).count();
    let unread = format!("{unknown} of {total} counts could not be read (see warnings)");
    if diff.is_empty() && unknown == 0 {
        s.push_str("Every count read on cluster 0 equals the bundle's.\n");
    } else if diff.is_empty() {
        s.push_str(&format!(
            "{unread}; the {} read equal the bundle's.\n",
            total - unknown
        ));
    } else {
        s.push_str(&format!(
            "{} count(s) on cluster 0 differ from the bundle (marked ≠, cluster 0 ≠ bundle): {}; \
             table counts include other clusters' rows and what cluster 0's assisted-service wrote since (its own events){}\n",
            diff.len(),
            display(&diff.join(", ")),
            if unknown == 0 {
                String::new()
            } else {
                format!("; {unread}")
            }
        ));
    }
    if d.record.is_none() {
        s.push_str(&format!(
            "hint: no import record in namespace {}: {}\n",
            display(&d.namespace),
            display(&super::import::namespace_hint(&d.namespace, d.namespace_explicit))
        ));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn served_by_is_cluster_0s_origin_without_the_key() {
        let n0 = "http://192.168.111.80:8090";
        let u = "http://192.168.111.81:8090/api/assisted-install/v2/events?api_key=eyJh.x.y&cluster_id=c";
        assert_eq!(
            served_by_origin(Some(u), n0).as_deref(),
            Some("http://192.168.111.81:8090")
        );
        let own = "http://192.168.111.80:8090/api/assisted-install/v2/events?api_key=k";
        assert_eq!(served_by_origin(Some(own), n0), None, "node 0's own URL");
        assert_eq!(
            served_by_origin(Some(own), "http://192.168.111.80:80901"),
            Some("http://192.168.111.80:8090".into())
        );
        for bad in ["", "ftp://x/y", "http://", "http://u:p@h/x", "nope"] {
            assert_eq!(served_by_origin(Some(bad), n0), None, "{bad}");
        }
        assert_eq!(served_by_origin(None, n0), None);
    }

    #[test]
    fn table_shows_counts_and_unknowns() {
        let d = StatusDoc {
            api_version: API_VERSION,
            kind: KIND,
            bundle_sha256: "abc".into(),
            cluster_id: "c1".into(),
            cluster_name: "ostest".into(),
            namespace: "ostest".into(),
            namespace_explicit: false,
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
            served_by: None,
            errors: vec!["table events: boom".into()],
            differing: vec![],
        };
        let t = table(&d);
        assert!(t.contains("no import yet"), "{t}");
        let hint = "hint: no import record in namespace ostest: namespace ostest is the default \
                    (the cluster's name); if the import ran with -n, pass the same -n";
        assert!(t.trim_end().ends_with(hint), "{t}");
        assert!(
            t.lines()
                .any(|l| l.split_whitespace().collect::<Vec<_>>() == ["object", "Agent", "3", "2", "≠", "3"]),
            "{t}"
        );
        assert!(
            t.contains(
                "1 count(s) on cluster 0 differ from the bundle (marked ≠, cluster 0 ≠ bundle): object Agent; \
                 table counts include other clusters' rows and what cluster 0's assisted-service wrote since (its own events); 1 of 2 counts could not be read (see warnings)\n"
            ),
            "{t}"
        );
        let mut same = d;
        same.objects.get_mut("Agent").unwrap().cluster = Some(3);
        let t = table(&same);
        assert!(!t.contains('≠'), "{t}");
        assert!(!t.contains("Every count read"), "{t}");
        assert!(
            t.contains("1 of 2 counts could not be read (see warnings); the 1 read equal the bundle's.\n"),
            "{t}"
        );
        assert!(
            t.lines()
                .any(|l| l.split_whitespace().collect::<Vec<_>>() == ["table", "events", "300", "?"]),
            "{t}"
        );
        assert!(t.contains("warning: table events: boom"), "{t}");
        // Every count read, a record there, -n given: no hint, and the plain last line.
        same.rows.get_mut("events").unwrap().cluster = Some(300);
        same.namespace_explicit = true;
        same.record = Some(
            serde_json::from_value(serde_json::json!({
                "bundle_sha256": "abc", "cluster_id": "c1", "cluster_name": "ostest",
                "phase": "complete", "started": "t0", "completed": "t1"
            }))
            .unwrap(),
        );
        same.record_is_this_bundle = true;
        let t = table(&same);
        assert!(!t.contains("hint:"), "{t}");
        assert!(
            t.trim_end()
                .ends_with("Every count read on cluster 0 equals the bundle's."),
            "{t}"
        );
    }

    /// `-o json`: apiVersion/kind and camelCase like every other command's document, the
    /// record's fields too; data keys (kinds, table names) unchanged.
    #[test]
    fn json_document_style() {
        let rec: Record = serde_json::from_value(serde_json::json!({
            "bundle_sha256": "abc", "cluster_id": "c1", "cluster_name": "ostest",
            "phase": "in-progress", "started": "t0", "steps_done": ["restore"],
            "counts": {"infra_envs": 1}, "assisted_service": {"namespace": "ns", "pod": "p"},
            "holder": "h:1", "heartbeat": "t1"
        }))
        .unwrap();
        let d = StatusDoc {
            api_version: API_VERSION,
            kind: KIND,
            bundle_sha256: "abc".into(),
            cluster_id: "c1".into(),
            cluster_name: "ostest".into(),
            namespace: "ostest".into(),
            namespace_explicit: false,
            record: Some(rec),
            record_is_this_bundle: true,
            objects: BTreeMap::from([(
                "Agent".into(),
                Count {
                    bundle: 1,
                    cluster: Some(1),
                },
            )]),
            rows: BTreeMap::from([(
                "infra_envs".into(),
                Count {
                    bundle: 1,
                    cluster: None,
                },
            )]),
            served_by: None,
            errors: vec![],
            differing: vec![],
        };
        let out = crate::output::render(crate::output::OutputFormat::Json, &d, String::new).unwrap();
        let v: serde_json::Value = serde_json::from_str(&out).unwrap();
        assert_eq!(v["apiVersion"], "agent-day2/v1");
        assert_eq!(v["kind"], "MigrateStatus");
        let top: Vec<&str> = v.as_object().unwrap().keys().map(String::as_str).collect();
        assert_eq!(
            top,
            [
                "apiVersion",
                "kind",
                "bundleSha256",
                "clusterId",
                "clusterName",
                "namespace",
                "record",
                "recordIsThisBundle",
                "objects",
                "rows",
                "servedBy",
                "errors",
                "differing"
            ]
        );
        let r: Vec<&str> = v["record"]
            .as_object()
            .unwrap()
            .keys()
            .map(String::as_str)
            .collect();
        assert_eq!(
            r,
            [
                "bundleSha256",
                "clusterId",
                "clusterName",
                "phase",
                "stepsDone",
                "started",
                "completed",
                "counts",
                "pvc",
                "assistedService",
                "holder",
                "heartbeat"
            ]
        );
        assert_eq!(v["record"]["phase"], "in-progress");
        assert_eq!(v["record"]["counts"]["infra_envs"], 1);
        assert_eq!(v["rows"]["infra_envs"]["bundle"], 1);
        assert_eq!(v["record"]["assistedService"]["pod"], "p");
    }

    #[test]
    fn explicit_namespace_hint_names_the_flag() {
        assert_eq!(
            crate::migrate::import::namespace_hint("x", true),
            "namespace x is the one given with -n; it must be the one import used"
        );
    }
}
