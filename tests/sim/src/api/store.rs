//! In-memory object store with Kubernetes semantics: one global resourceVersion counter, an
//! event log for watch resume (events from before the log's start are "compacted": 410 Gone),
//! and a broadcast channel for live watches.

use super::registry::Registry;
use serde_json::Value;
use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;

/// Longest event log kept for watch resume; older resourceVersions get 410 Gone.
pub const LOG_CAPACITY: usize = 20_000;

/// A change to one object.
#[derive(Debug, Clone)]
pub struct Event {
    pub rv: u64,
    /// Storage key `group/plural`.
    pub key: String,
    /// ADDED, MODIFIED, DELETED.
    pub kind: &'static str,
    pub obj: Value,
    /// The previous version for MODIFIED (selector transitions in watches).
    pub old: Option<Value>,
}

/// (namespace or "", name) → object.
pub type Bucket = BTreeMap<(String, String), Value>;

/// Everything the server holds.
pub struct State {
    pub registry: Registry,
    /// Storage key `group/plural` → objects.
    pub objects: BTreeMap<String, Bucket>,
    /// Last resourceVersion handed out.
    pub rv: u64,
    /// Recent events, oldest first.
    pub log: VecDeque<Arc<Event>>,
    /// Watches from a resourceVersion below this are too old (410).
    pub compacted_rv: u64,
    /// Bumped whenever the set of served types changes (OpenAPI hash).
    pub types_generation: u64,
}

impl State {
    pub fn new(registry: Registry) -> State {
        State {
            registry,
            objects: BTreeMap::new(),
            rv: 1,
            log: VecDeque::new(),
            compacted_rv: 0,
            types_generation: 1,
        }
    }

    /// Next resourceVersion.
    pub fn next_rv(&mut self) -> u64 {
        self.rv += 1;
        self.rv
    }

    /// Records an event in the log; the caller broadcasts it.
    pub fn record(&mut self, ev: Arc<Event>) {
        self.log.push_back(ev);
        while self.log.len() > LOG_CAPACITY {
            if let Some(old) = self.log.pop_front() {
                self.compacted_rv = old.rv;
            }
        }
    }

    /// Forgets the log: watches must start from now on (done after seeding, like an etcd
    /// compaction, so old resourceVersions give 410 Gone as on a real cluster).
    pub fn compact(&mut self) {
        self.log.clear();
        self.compacted_rv = self.rv;
    }

    pub fn bucket(&mut self, key: &str) -> &mut Bucket {
        self.objects.entry(key.to_string()).or_default()
    }
}
