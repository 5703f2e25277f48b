//! The completion record of an import: ConfigMap `agent-day2-migration` in the CR namespace,
//! label `agent-day2.openshift.io/migration=true`, key `record.json` (the contract of issue 6,
//! docs/migrate.md "The migration contract", "Cluster 0").
//!
//! `import` writes it `in-progress` before its first change after the namespace, adds each step
//! to `steps_done` as it finishes (so a killed run resumes where it stopped), and sets
//! `complete` at the end. `wait` (node 0) returns once it is `complete` for the bundle's
//! checksum; `status` shows it.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, ObjectMeta};
use kube::Client;
use serde::{Deserialize, Serialize};

use crate::error::{Error, ResourceRef};

/// Name of the record ConfigMap.
pub const RECORD_NAME: &str = "agent-day2-migration";
/// Label on the record (value `true`), to find records across namespaces.
pub const RECORD_LABEL: &str = "agent-day2.openshift.io/migration";
/// Data key holding the JSON record.
pub const RECORD_KEY: &str = "record.json";

/// Where an import stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Phase {
    /// Started; `steps_done` says how far.
    InProgress,
    /// Every step done; node 0 may reboot.
    Complete,
}

/// Where the restored database lives on cluster 0 (the pod `psql` ran in), or `db-url`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct AssistedRef {
    /// Namespace of the assisted-service pod (empty with `--db-url`).
    pub namespace: String,
    /// The pod's name, or `db-url` when the restore went through `--db-url`.
    pub pod: String,
}

/// The record (JSON in the ConfigMap). Times are RFC 3339 UTC.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Record {
    /// The bundle checksum (manifest.json.sha256) this import is of.
    pub bundle_sha256: String,
    /// Assisted cluster id (UUID) of the imported cluster.
    pub cluster_id: String,
    /// The cluster's name (ClusterDeployment name).
    pub cluster_name: String,
    /// in-progress | complete.
    pub phase: Phase,
    /// Steps finished, in the order they finished (names of [`crate::migrate::import::Step`]).
    #[serde(default)]
    pub steps_done: Vec<String>,
    /// When the first run of this import started.
    pub started: String,
    /// When it completed (None while in progress).
    #[serde(default)]
    pub completed: Option<String>,
    /// The bundle's counts (hosts, infra_envs, events, nmstate_configs, rows per table), as
    /// in its manifest.
    #[serde(default)]
    pub counts: serde_json::Value,
    /// The PersistentVolumeClaim (in the record's namespace) holding logs and artifacts.
    #[serde(default)]
    pub pvc: Option<String>,
    /// Where the database was restored.
    #[serde(default)]
    pub assisted_service: Option<AssistedRef>,
    /// When the bundle was exported (its manifest's `created`), to tell two exports of the same
    /// node 0 apart in messages. Absent in records of earlier versions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bundle_created: Option<String>,
    /// The run holding the record while in progress ([`run_id`]: host, pid, process start,
    /// random part). The record is the lock of an import: see [`Record::held_by_other`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub holder: Option<String>,
    /// When the holder last wrote the record (each step; RFC 3339 UTC).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub heartbeat: Option<String>,
    /// The holder ended (an error or `--timeout`) and let go: the next run may take over.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub released: bool,
}

/// An in-progress record whose holder has not written it for this long may be taken over
/// by another run (an import writes the record after every step; the longest step, the
/// database restore of a large dump, takes minutes).
pub const STALE_AFTER: std::time::Duration = std::time::Duration::from_secs(15 * 60);

/// This process's holder id: `host:pid:start:random:machine`, where `start` is the process
/// start time (field 22 of /proc/self/stat, clock ticks since boot) so a reused pid is told
/// apart, and `machine` is [`machine_id`] (boot id and pid namespace), so a holder is judged by
/// its pid only on the machine and in the pid namespace it ran in (host names are shared by
/// containers and `localhost` machines). Holders written by earlier versions lack `machine`.
pub fn run_id() -> String {
    let pid = std::process::id();
    format!(
        "{}:{pid}:{}:{}:{}",
        host_name(),
        proc_start(pid).unwrap_or_default(),
        &uuid::Uuid::new_v4().simple().to_string()[..8],
        machine_id()
    )
}

/// `BOOTID.PIDNS`: this boot's id (/proc/sys/kernel/random/boot_id, a UUID, new at every boot
/// of every machine) and the inode of this process's pid namespace (/proc/self/ns/pid), the
/// scope in which a pid means one process. Empty when either cannot be read.
pub fn machine_id() -> String {
    let boot = std::fs::read_to_string("/proc/sys/kernel/random/boot_id")
        .map(|s| s.trim().to_string())
        .unwrap_or_default();
    // The link reads `pid:[4026531836]`.
    let ns = std::fs::read_link("/proc/self/ns/pid")
        .ok()
        .and_then(|l| {
            let l = l.to_string_lossy().into_owned();
            let inner = l.strip_prefix("pid:[")?.strip_suffix(']')?.to_string();
            Some(inner)
        })
        .unwrap_or_default();
    if boot.is_empty() || ns.is_empty() || boot.contains(':') {
        return String::new();
    }
    format!("{boot}.{ns}")
}

fn host_name() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|s| s.trim().to_string())
        .unwrap_or_default()
}

/// Field 22 (starttime) of /proc/PID/stat, None when the process does not exist.
fn proc_start(pid: u32) -> Option<String> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command (field 2) is in parentheses and may hold spaces: split after its last ')'.
    let rest = &stat[stat.rfind(')')? + 1..];
    rest.split_whitespace().nth(19).map(str::to_string)
}

/// Whether `holder` ([`run_id`]) is a process of this machine and pid namespace (its
/// `machine` part equals [`machine_id`]) that no longer runs (its pid is gone or now another
/// process). Holders of other machines, and holders without a `machine` part (earlier
/// versions, which named only the host): false (not known; the heartbeat rule decides).
pub fn holder_gone(holder: &str) -> bool {
    let mut p = holder.split(':');
    let (Some(_host), Some(pid), Some(start), Some(_random), Some(machine)) =
        (p.next(), p.next(), p.next(), p.next(), p.next())
    else {
        return false;
    };
    let mine = machine_id();
    if mine.is_empty() || machine != mine {
        return false;
    }
    let Ok(pid) = pid.parse::<u32>() else {
        return false;
    };
    proc_start(pid).as_deref() != Some(start)
}

/// Whether this run (holder `me`, which last wrote the record at resourceVersion `my_rv`)
/// lost the lock: `now` is the record read back with its resourceVersion (None: deleted).
/// None when the record is unchanged since this run read or last wrote it (same
/// resourceVersion); else Some(why): deleted, another run's (a take-over of a heartbeat
/// thought stale), or changed by someone else.
pub fn lock_lost(me: &str, my_rv: Option<&str>, now: Option<(&Record, Option<&str>)>) -> Option<String> {
    let Some((r, rv)) = now else {
        return Some("the record was deleted while this run held it".into());
    };
    // Unchanged since this run read it (a resumed run takes over the record it judged free)
    // or wrote it last: still this run's.
    if my_rv.is_some() && rv == my_rv {
        return None;
    }
    match r.holder.as_deref() {
        Some(h) if h != me => Some(format!(
            "the lock was taken over by {h} (heartbeat {})",
            r.heartbeat.as_deref().unwrap_or("?")
        )),
        _ => Some("the record changed while this run held it (someone else wrote it)".into()),
    }
}

/// A heartbeat further than this in the future (a holder with a wrong clock, or a hand-edited
/// record) is not trusted: the record may be taken over as if it had none.
pub const FUTURE_SKEW: std::time::Duration = std::time::Duration::from_secs(2 * 60);

/// How to clear a lock by hand (for refusals): mark the record released. Deleting the record
/// is not the way once the database was restored: a run without a record then finds the
/// cluster's rows and refuses to restore over them.
pub fn manual_release_hint(namespace: &str) -> String {
    format!(
        "when sure that no import runs, let the next run take over by setting \"released\": true in \
         {RECORD_KEY} (kubectl -n {namespace} edit configmap {RECORD_NAME}); do not delete the record \
         (it holds the steps done; without it a re-run refuses the restored database)"
    )
}

impl Record {
    /// A fresh in-progress record.
    pub fn new(
        bundle_sha256: &str,
        cluster_id: &str,
        cluster_name: &str,
        counts: serde_json::Value,
    ) -> Record {
        Record {
            bundle_sha256: bundle_sha256.into(),
            cluster_id: cluster_id.into(),
            cluster_name: cluster_name.into(),
            phase: Phase::InProgress,
            steps_done: Vec::new(),
            started: now_rfc3339(),
            completed: None,
            counts,
            pvc: None,
            assisted_service: None,
            bundle_created: None,
            holder: None,
            heartbeat: None,
            released: false,
        }
    }

    /// When this in-progress record is held by a run other than `me` that may still be running,
    /// why (for "another import is in progress (…)"); None when it may be taken over: complete,
    /// ours, released, without holder (earlier versions), its holder a process of this machine
    /// that is gone ([`holder_gone`]), or its heartbeat older than `stale_after`, more than
    /// [`FUTURE_SKEW`] ahead of `now`, or unreadable.
    pub fn held_by_other(
        &self,
        me: &str,
        now: time::OffsetDateTime,
        stale_after: std::time::Duration,
    ) -> Option<String> {
        if self.phase == Phase::Complete || self.released {
            return None;
        }
        let holder = self.holder.as_deref()?;
        if holder == me || holder_gone(holder) {
            return None;
        }
        let beat = self.heartbeat.as_deref().and_then(|t| {
            time::OffsetDateTime::parse(t, &time::format_description::well_known::Rfc3339).ok()
        })?;
        if now - beat > stale_after || beat - now > FUTURE_SKEW {
            return None;
        }
        Some(format!(
            "started {}, held by {holder}, last update {}; it can be taken over once it has not \
             updated the record for {} minutes",
            self.started,
            self.heartbeat.as_deref().unwrap_or("?"),
            stale_after.as_secs() / 60
        ))
    }

    /// Whether this record is of the bundle with checksum `sha`.
    pub fn is_of(&self, sha: &str) -> bool {
        self.bundle_sha256.eq_ignore_ascii_case(sha)
    }

    /// Whether `step` is done.
    pub fn done(&self, step: &str) -> bool {
        self.steps_done.iter().any(|s| s == step)
    }

    /// Marks `step` done (once). Returns whether it was new.
    pub fn mark(&mut self, step: &str) -> bool {
        if self.done(step) {
            return false;
        }
        self.steps_done.push(step.into());
        true
    }

    /// Sets phase complete with the completion time.
    pub fn complete(&mut self) {
        self.phase = Phase::Complete;
        self.completed = Some(now_rfc3339());
    }

    /// The ConfigMap carrying this record in `namespace`.
    pub fn to_config_map(&self, namespace: &str) -> ConfigMap {
        let json = serde_json::to_string_pretty(self).unwrap_or_default();
        ConfigMap {
            metadata: ObjectMeta {
                name: Some(RECORD_NAME.into()),
                namespace: Some(namespace.into()),
                labels: Some(BTreeMap::from([(RECORD_LABEL.to_string(), "true".to_string())])),
                ..Default::default()
            },
            data: Some(BTreeMap::from([(RECORD_KEY.to_string(), json)])),
            ..Default::default()
        }
    }

    /// Parses the record from its ConfigMap. Errors: [`Error::BadObject`] (exit 4) when the
    /// key is missing or not a record.
    pub fn from_config_map(cm: &ConfigMap) -> Result<Record, Error> {
        let ns = cm.metadata.namespace.clone().unwrap_or_default();
        let bad = |message: String| Error::BadObject {
            resource: ResourceRef::namespaced("ConfigMap", &ns, RECORD_NAME),
            message,
        };
        let text = cm
            .data
            .as_ref()
            .and_then(|d| d.get(RECORD_KEY))
            .ok_or_else(|| bad(format!("no key {RECORD_KEY}")))?;
        serde_json::from_str(text).map_err(|e| bad(format!("{RECORD_KEY} is not a migration record: {e}")))
    }
}

/// Reads the record in `namespace`: Ok(None) when absent; the kube error otherwise (callers
/// classify it, `wait` retries it).
pub async fn read(client: &Client, namespace: &str) -> Result<Option<(Record, ConfigMap)>, ReadError> {
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), namespace);
    match api.get_opt(RECORD_NAME).await {
        Ok(None) => Ok(None),
        Ok(Some(cm)) => Record::from_config_map(&cm)
            .map(|r| Some((r, cm)))
            .map_err(ReadError::Bad),
        Err(e) => Err(ReadError::Kube(e)),
    }
}

/// Why [`read`] failed.
#[derive(Debug)]
pub enum ReadError {
    /// The request failed (connection, 401/403, 5xx).
    Kube(kube::Error),
    /// The ConfigMap exists but holds no record.
    Bad(Error),
}

/// Writes `rec` as the lock: with `resource_version` None it creates the ConfigMap (409
/// AlreadyExists when someone else did); else it replaces the one read at that
/// resourceVersion (409 Conflict when it changed since), keeping its other keys and labels.
/// Returns the new resourceVersion. Errors: [`WriteError::Conflict`] when another writer came
/// first (re-read), else the kube error.
pub async fn write_if(
    client: &Client,
    namespace: &str,
    rec: &Record,
    resource_version: Option<&str>,
) -> Result<Option<String>, WriteError> {
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), namespace);
    let want = rec.to_config_map(namespace);
    let Some(rv) = resource_version else {
        let made = crate::kube::write::create_strict(client, &(), Some(namespace), &want).await?;
        return Ok(made.metadata.resource_version);
    };
    let mut cm = api.get(RECORD_NAME).await?;
    if cm.metadata.resource_version.as_deref() != Some(rv) {
        return Err(WriteError::Conflict);
    }
    let data = cm.data.get_or_insert_with(Default::default);
    data.extend(want.data.unwrap_or_default());
    cm.metadata
        .labels
        .get_or_insert_with(Default::default)
        .insert(RECORD_LABEL.into(), "true".into());
    cm.metadata.managed_fields = None;
    let req = kube::core::Request::new(format!("/api/v1/namespaces/{namespace}/configmaps"))
        .replace(
            RECORD_NAME,
            &crate::kube::write::post_params(),
            serde_json::to_vec(&cm).map_err(kube::Error::SerdeError)?,
        )
        .map_err(kube::Error::BuildRequest)?;
    // The body carries the resourceVersion read: the API server refuses (409) a replace of a
    // record changed in between.
    let done = client
        .request::<ConfigMap>(crate::kube::write::with_strict_validation(req))
        .await?;
    Ok(done.metadata.resource_version)
}

/// Why [`write_if`] failed.
#[derive(Debug)]
pub enum WriteError {
    /// Someone else created or changed the record since it was read (HTTP 409, or a
    /// resourceVersion that moved): re-read it.
    Conflict,
    /// Any other failure of the request.
    Kube(kube::Error),
}

impl From<kube::Error> for WriteError {
    fn from(e: kube::Error) -> WriteError {
        match &e {
            kube::Error::Api(s) if s.code == 409 => WriteError::Conflict,
            _ => WriteError::Kube(e),
        }
    }
}

/// Current time as RFC 3339 UTC with seconds (`2026-12-01T13:25:36Z`).
pub fn now_rfc3339() -> String {
    let now = time::OffsetDateTime::now_utc()
        .replace_nanosecond(0)
        .unwrap_or(time::OffsetDateTime::now_utc());
    now.format(&time::format_description::well_known::Rfc3339)
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_through_its_config_map() {
        let mut r = Record::new("AB12", "c-1", "ostest", serde_json::json!({"hosts": 3}));
        assert!(r.mark("db"));
        assert!(!r.mark("db"), "a step is recorded once");
        r.mark("crs");
        let cm = r.to_config_map("ostest");
        assert_eq!(cm.metadata.name.as_deref(), Some(RECORD_NAME));
        assert_eq!(cm.metadata.labels.as_ref().unwrap()[RECORD_LABEL], "true");
        let text = &cm.data.as_ref().unwrap()[RECORD_KEY];
        assert!(text.contains("\"phase\": \"in-progress\""), "{text}");
        let back = Record::from_config_map(&cm).unwrap();
        assert_eq!(back, r);
        assert_eq!(back.steps_done, vec!["db", "crs"]);
        assert!(back.is_of("ab12"), "checksums compare case-insensitively");
        assert!(!back.is_of("ab13"));
    }

    /// The record is the lock: another live holder with a fresh heartbeat keeps it; released,
    /// stale, complete, holder-less and our own records do not; a holder of this host whose
    /// process is gone does not either.
    #[test]
    fn a_record_is_held_until_released_stale_or_its_holder_is_gone() {
        let now = time::OffsetDateTime::now_utc();
        let stale = STALE_AFTER;
        let mut r = Record::new("x", "c", "n", serde_json::Value::Null);
        assert_eq!(
            r.held_by_other("me", now, stale),
            None,
            "no holder (earlier versions)"
        );
        r.holder = Some("elsewhere.example:42:123:abcd".into());
        r.heartbeat = Some(now_rfc3339());
        let why = r.held_by_other("me", now, stale).expect("held");
        assert!(
            why.contains("held by elsewhere.example:42:123:abcd") && why.contains("15 minutes"),
            "{why}"
        );
        assert_eq!(
            r.held_by_other("elsewhere.example:42:123:abcd", now, stale),
            None,
            "ours"
        );
        let later = now + time::Duration::minutes(16);
        assert_eq!(r.held_by_other("me", later, stale), None, "stale");
        let mut rel = r.clone();
        rel.released = true;
        assert_eq!(rel.held_by_other("me", now, stale), None, "released");
        let mut done = r.clone();
        done.complete();
        assert_eq!(done.held_by_other("me", now, stale), None, "complete");
        // This process is alive: held; a pid of this host that is not running: gone.
        let mine = run_id();
        assert!(!holder_gone(&mine), "{mine}");
        r.holder = Some(mine.clone());
        assert!(r.held_by_other("another-run", now, stale).is_some());
        let mut p = mine.split(':');
        let (host, pid) = (p.next().unwrap(), p.next().unwrap());
        let machine = machine_id();
        assert!(
            !machine.is_empty() && mine.ends_with(&format!(":{machine}")),
            "{mine}"
        );
        assert!(
            holder_gone(&format!("{host}:{pid}:999999999999:x:{machine}")),
            "pid reused by another start"
        );
        assert!(
            holder_gone(&format!("{host}:4000000:1:x:{machine}")),
            "no such pid"
        );
        assert!(
            holder_gone(&format!("other-host-name:4000000:1:x:{machine}")),
            "the machine decides, not the host name"
        );
        // The same host name on another machine (or in another pid namespace): not judged,
        // even though that pid is not running here.
        assert!(
            !holder_gone(&format!(
                "{host}:4000000:1:x:00000000-0000-0000-0000-000000000000.1"
            )),
            "another machine with our host name"
        );
        // Holders of earlier versions (no machine part) stay readable and are not judged.
        assert!(
            !holder_gone(&format!("{host}:4000000:1:x")),
            "earlier format, our host name"
        );
        let mut old = r.clone();
        old.holder = Some(format!("{host}:4000000:1:x"));
        assert!(
            old.held_by_other("me", now, stale).is_some(),
            "fresh heartbeat keeps it"
        );
        assert_eq!(
            old.held_by_other("me", now + time::Duration::minutes(16), stale),
            None,
            "the heartbeat rule still applies"
        );
        // The fields round-trip, and are absent from a record that never had them.
        let back = Record::from_config_map(&r.to_config_map("ns")).unwrap();
        assert_eq!(back.holder.as_deref(), Some(mine.as_str()));
        let plain = serde_json::to_string(&Record::new("x", "c", "n", serde_json::Value::Null)).unwrap();
        assert!(
            !plain.contains("holder") && !plain.contains("released"),
            "{plain}"
        );
    }

    /// A run re-reads the record before the database restore and before `complete`: another
    /// holder, a deleted record or someone else's write mean the lock is lost.
    #[test]
    fn a_lost_lock_is_noticed() {
        let mut r = Record::new("x", "c", "n", serde_json::Value::Null);
        r.holder = Some("me".into());
        assert_eq!(
            lock_lost("me", Some("7"), Some((&r, Some("7")))),
            None,
            "still ours"
        );
        assert!(lock_lost("me", Some("7"), None).unwrap().contains("deleted"));
        let why = lock_lost("me", Some("7"), Some((&r, Some("9")))).unwrap();
        assert!(why.contains("someone else wrote it"), "{why}");
        r.holder = Some("other:1:2:3:m".into());
        r.heartbeat = Some("2026-12-01T10:00:00Z".into());
        let why = lock_lost("me", Some("7"), Some((&r, Some("9")))).unwrap();
        assert!(why.contains("the lock was taken over by other:1:2:3:m"), "{why}");
        assert_eq!(
            lock_lost("me", Some("9"), Some((&r, Some("9")))),
            None,
            "read by this run (a resume) and unchanged since"
        );
        assert!(lock_lost("me", None, Some((&r, None))).is_some(), "never read");
    }

    /// A heartbeat more than FUTURE_SKEW ahead is not trusted (else it would block every
    /// import until it + 15 minutes); a small clock skew is.
    #[test]
    fn a_heartbeat_in_the_future_does_not_hold_the_record() {
        let now = time::OffsetDateTime::now_utc();
        let fmt = |t: time::OffsetDateTime| t.format(&time::format_description::well_known::Rfc3339).unwrap();
        let mut r = Record::new("x", "c", "n", serde_json::Value::Null);
        r.holder = Some("elsewhere.example:42:123:abcd:b.1".into());
        r.heartbeat = Some("2999-01-01T00:00:00Z".into());
        assert_eq!(r.held_by_other("me", now, STALE_AFTER), None, "far future");
        r.heartbeat = Some(fmt(now + time::Duration::minutes(3)));
        assert_eq!(r.held_by_other("me", now, STALE_AFTER), None, "3 minutes ahead");
        r.heartbeat = Some(fmt(now + time::Duration::seconds(90)));
        assert!(
            r.held_by_other("me", now, STALE_AFTER).is_some(),
            "90 s skew is tolerated"
        );
        let hint = manual_release_hint("ns1");
        assert!(
            hint.contains("kubectl -n ns1 edit configmap agent-day2-migration")
                && hint.contains("\"released\": true")
                && hint.contains("do not delete"),
            "{hint}"
        );
    }

    #[test]
    fn complete_sets_phase_and_time() {
        let mut r = Record::new("x", "c", "n", serde_json::Value::Null);
        assert_eq!(r.completed, None);
        r.complete();
        assert_eq!(r.phase, Phase::Complete);
        let t = r.completed.clone().unwrap();
        assert!(
            time::OffsetDateTime::parse(&t, &time::format_description::well_known::Rfc3339).is_ok(),
            "{t}"
        );
        let json = serde_json::to_value(&r).unwrap();
        assert_eq!(json["phase"], "complete");
    }

    #[test]
    fn a_config_map_without_a_record_is_an_error_naming_it() {
        let mut cm = Record::new("x", "c", "n", serde_json::Value::Null).to_config_map("ns1");
        cm.data
            .as_mut()
            .unwrap()
            .insert(RECORD_KEY.into(), "{\"phase\":1}".into());
        let e = Record::from_config_map(&cm).unwrap_err();
        assert!(
            e.to_string().starts_with("ConfigMap ns1/agent-day2-migration:"),
            "{e}"
        );
        assert_eq!(e.exit_code(), 4);
        cm.data = None;
        assert!(Record::from_config_map(&cm)
            .unwrap_err()
            .to_string()
            .contains("no key record.json"));
    }
}
