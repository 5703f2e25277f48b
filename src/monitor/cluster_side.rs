//! The cluster side of monitor: watches of CertificateSigningRequests, Nodes and the batch
//! ConfigMaps (`kube::runtime::watcher`, resumed from the last resourceVersion, re-listed after a 410,
//! with the default backoff on errors), merged into one stream, and the per-node view taken
//! from the two stores.

use std::collections::BTreeMap;
use std::pin::Pin;

use futures::{Stream, StreamExt};
use k8s_openapi::api::certificates::v1::CertificateSigningRequest;
use k8s_openapi::api::core::v1::{ConfigMap, Node};
use kube::api::Api;
use kube::runtime::watcher::{self, Event};
use kube::runtime::WatchStreamExt;

use super::state::KubeView;
use crate::csr::{parse_request, CsrView, Kind, Time, NODE_PREFIX};

/// One item of the merged watch stream.
pub enum Msg {
    /// A CSR watch event (boxed: the variants differ much in size).
    Csr(Box<Event<CertificateSigningRequest>>),
    /// A Node watch event.
    Node(Box<Event<Node>>),
    /// A batch ConfigMap watch event (labelled [`crate::batch::LABEL`]): one made, edited or
    /// deleted (`add-nodes batch delete`) while monitor runs.
    Batch(Box<Event<ConfigMap>>),
    /// A watch failed; `unauthorized` when the API server answered 401 (the login expired).
    Error {
        what: &'static str,
        unauthorized: bool,
        message: String,
    },
}

/// The merged stream of the three watches for `client`.
pub fn watch(client: kube::Client) -> Pin<Box<dyn Stream<Item = Msg> + Send>> {
    let csrs = watcher::watcher(
        Api::<CertificateSigningRequest>::all(client.clone()),
        watcher::Config::default(),
    )
    .default_backoff()
    .map(|r| match r {
        Ok(e) => Msg::Csr(Box::new(e)),
        Err(e) => err("CertificateSigningRequests", e),
    });
    let nodes = watcher::watcher(Api::<Node>::all(client.clone()), watcher::Config::default())
        .default_backoff()
        .map(|r| match r {
            Ok(e) => Msg::Node(Box::new(e)),
            Err(e) => err("Nodes", e),
        });
    let batches = watcher::watcher(
        Api::<ConfigMap>::namespaced(client, crate::batch::NAMESPACE),
        watcher::Config::default().labels(crate::batch::LABEL),
    )
    .default_backoff()
    .map(|r| match r {
        Ok(e) => Msg::Batch(Box::new(e)),
        Err(e) => err("batch ConfigMaps", e),
    });
    Box::pin(futures::stream::select_all([
        csrs.boxed(),
        nodes.boxed(),
        batches.boxed(),
    ]))
}

fn err(what: &'static str, e: watcher::Error) -> Msg {
    let code = match &e {
        watcher::Error::InitialListFailed(kube::Error::Api(s))
        | watcher::Error::WatchStartFailed(kube::Error::Api(s))
        | watcher::Error::WatchFailed(kube::Error::Api(s)) => Some(s.code),
        watcher::Error::WatchError(s) => Some(s.code),
        _ => None,
    };
    Msg::Error {
        what,
        unauthorized: code == Some(401),
        message: crate::kube::error_chain(&e),
    }
}

/// A store fed by watch events: a relist (Init … InitDone) replaces the content at once, so
/// the view never passes through an empty state.
pub struct Store<K> {
    /// Objects by name.
    pub items: BTreeMap<String, K>,
    relist: Option<BTreeMap<String, K>>,
}

impl<K> Default for Store<K> {
    fn default() -> Self {
        Store {
            items: BTreeMap::new(),
            relist: None,
        }
    }
}

impl<K: kube::Resource> Store<K> {
    /// Applies one event; true when `items` changed.
    pub fn apply(&mut self, e: Event<K>) -> bool {
        let name = |k: &K| k.meta().name.clone().unwrap_or_default();
        match e {
            Event::Apply(k) => {
                self.items.insert(name(&k), k);
                true
            }
            Event::Delete(k) => {
                self.items.remove(&name(&k));
                true
            }
            Event::Init => {
                self.relist = Some(BTreeMap::new());
                false
            }
            Event::InitApply(k) => {
                self.relist.get_or_insert_with(BTreeMap::new).insert(name(&k), k);
                false
            }
            Event::InitDone => {
                self.items = self.relist.take().unwrap_or_default();
                true
            }
        }
    }
}

/// The node a kubelet CSR is for: serving → `spec.username` minus `system:node:`; client →
/// the request's (last) CN minus `system:node:`. None for other signers or unreadable requests.
pub fn csr_node(csr: &CertificateSigningRequest) -> Option<(Kind, String)> {
    let v = CsrView::from_k8s(csr);
    match v.kind() {
        Kind::Serving => v
            .username
            .strip_prefix(NODE_PREFIX)
            .map(|n| (Kind::Serving, n.to_string())),
        Kind::Client => {
            let (parsed, _) = parse_request(&v.request);
            let cn = parsed?.common_names.last()?.clone();
            cn.strip_prefix(NODE_PREFIX)
                .map(|n| (Kind::Client, n.to_string()))
        }
        Kind::NotKubelet => None,
    }
}

/// [`csr_node`] remembered per CSR name and resourceVersion: parsing a request (with its
/// signature check) once per change, not once per node and event, keeps a watch of hundreds of
/// nodes cheap.
#[derive(Default)]
pub struct CsrIndex {
    /// CSR name → (resourceVersion, kind and node).
    cache: std::collections::HashMap<String, (Option<String>, CsrNode)>,
    /// Node → the names of its CSRs in the store, kept per event ([`CsrIndex::update`]) so
    /// that an event costs O(log n), not a pass over every CSR (issue 24).
    members: BTreeMap<String, std::collections::BTreeSet<String>>,
}

/// What [`csr_node`] returns.
type CsrNode = Option<(Kind, String)>;

impl CsrIndex {
    /// The (kind, node) of `csr`, parsed at most once per resourceVersion.
    pub fn node_of(&mut self, csr: &CertificateSigningRequest) -> Option<(Kind, String)> {
        let name = csr.metadata.name.clone().unwrap_or_default();
        let rv = csr.metadata.resource_version.clone();
        if let Some((seen, v)) = self.cache.get(&name) {
            if *seen == rv && rv.is_some() {
                return v.clone();
            }
        }
        let v = csr_node(csr);
        self.cache.insert(name, (rv, v.clone()));
        v
    }

    /// Keeps the index for CSR `name` after an event (in `store` now, or gone). Returns the
    /// node it speaks for (before or after the event), if any.
    pub fn update(&mut self, store: &Store<CertificateSigningRequest>, name: &str) -> Option<String> {
        let old = self
            .cache
            .get(name)
            .and_then(|(_, v)| v.as_ref().map(|(_, n)| n.clone()));
        if let Some(n) = &old {
            if let Some(set) = self.members.get_mut(n) {
                set.remove(name);
            }
        }
        match store.items.get(name) {
            Some(c) => {
                let new = self.node_of(c).map(|(_, n)| n);
                if let Some(n) = &new {
                    self.members
                        .entry(n.clone())
                        .or_default()
                        .insert(name.to_string());
                }
                new.or(old)
            }
            None => {
                self.cache.remove(name);
                old
            }
        }
    }

    /// The index built again over every CSR of `store` (after a relist).
    pub fn rebuild(&mut self, store: &Store<CertificateSigningRequest>) {
        self.cache.retain(|n, _| store.items.contains_key(n));
        self.members.clear();
        for (name, c) in &store.items {
            if let Some((_, n)) = self.node_of(c) {
                self.members.entry(n).or_default().insert(name.clone());
            }
        }
    }

    /// The kubelet CSRs of `node` with their kind, oldest first.
    pub fn of_node<'a>(
        &self,
        store: &'a Store<CertificateSigningRequest>,
        node: &str,
    ) -> Vec<(Kind, &'a CertificateSigningRequest)> {
        let mut v: Vec<(Kind, &CertificateSigningRequest)> = self
            .members
            .get(node)
            .into_iter()
            .flatten()
            .filter_map(|n| {
                let c = store.items.get(n)?;
                let (_, k) = self.cache.get(n)?;
                Some((k.as_ref()?.0, c))
            })
            .collect();
        v.sort_by_key(|(_, c)| c.metadata.creation_timestamp.as_ref().map(|t| t.0));
        v
    }

    /// How many client CSRs `node` has in the store.
    pub fn clients_of(&self, node: &str) -> usize {
        self.members
            .get(node)
            .into_iter()
            .flatten()
            .filter(|n| matches!(self.cache.get(*n), Some((_, Some((Kind::Client, _))))))
            .count()
    }
}

/// Which client CSRs of a node count for its stage ([`view_of`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Clients {
    /// Every one (nothing else is known of the host).
    All,
    /// None: the host's own service reports it has not rebooted into the installed system.
    None,
    /// Those made at or after its reboot record (less the clock skew approve allows).
    Since(Time),
}

/// The cluster's view of node `name` from its CSRs (`csrs`, from [`CsrIndex::of_node`]) created
/// at or after `since` (the batch's creation, so an earlier life of the same name does not
/// count) its client CSRs as `clients` says, and its Node.
/// The CSR's Approved condition is dated before `at` by more than the clock skew allowed
/// ([`crate::csr::REBOOT_CLOCK_SKEW_SECONDS`]: the condition is stamped with approve's clock, in
/// whole seconds, the record with monitor's): an approval of an earlier life. Within the skew
/// it counts as this boot's (a rogue that won the race right after the record stays visible).
pub(crate) fn approved_before(csr: &CertificateSigningRequest, at: Time) -> bool {
    csr.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|cs| {
            cs.iter().any(|c| {
                c.type_ == "Approved"
                    && c.last_update_time
                        .as_ref()
                        .or(c.last_transition_time.as_ref())
                        .is_some_and(|t| {
                            t.0.as_second() < at.as_second() - crate::csr::REBOOT_CLOCK_SKEW_SECONDS
                        })
            })
        })
}

pub fn view_of(
    name: &str,
    since: Option<Time>,
    clients: Clients,
    csrs: &[(Kind, &CertificateSigningRequest)],
    nodes: &Store<Node>,
) -> KubeView {
    let mut k = KubeView::default();
    for (kind, csr) in csrs {
        let (kind, csr) = (*kind, *csr);
        if let (Some(since), Some(created)) = (since, csr.metadata.creation_timestamp.as_ref()) {
            if created.0 < since {
                continue;
            }
        }
        if kind == Kind::Client {
            let eligible = match clients {
                Clients::All => true,
                Clients::None => false,
                // Not one approved before the record either: an earlier life's (a re-imaged
                // host's old kubelet, made within the skew of the new record).
                Clients::Since(at) => {
                    csr.metadata.creation_timestamp.as_ref().is_none_or(|c| {
                        c.0.as_second() >= at.as_second() - crate::csr::REBOOT_CLOCK_SKEW_SECONDS
                    }) && !approved_before(csr, at)
                }
            };
            if !eligible {
                // Not the host's (yet): kept apart for [`super::state::missed_reboot`].
                let v = CsrView::from_k8s(csr);
                if matches!(clients, Clients::None) && v.conditions.is_empty() && !v.has_certificate {
                    k.unbound_client_pending = Some(v.name);
                }
                continue;
            }
        }
        let v = CsrView::from_k8s(csr);
        let pending = v.conditions.is_empty() && !v.has_certificate;
        let issued = v.has_certificate && v.conditions.iter().any(|c| c == "Approved");
        let approved = v.conditions.iter().any(|c| c == "Approved");
        match kind {
            Kind::Client if pending => k.client_csr_pending = Some(v.name),
            Kind::Client if approved => k.client_approved = Some(v.name),
            Kind::Serving if pending => {
                k.serving_csr_pending = Some(v.name);
                k.serving_approved = false;
            }
            Kind::Serving if issued => k.serving_issued = Some(v.name),
            // Approved, the certificate not issued yet: still waiting on it.
            Kind::Serving if approved && !v.has_certificate => {
                k.serving_csr_pending = Some(v.name);
                k.serving_approved = true;
            }
            _ => {}
        }
    }
    if let Some(n) = nodes.items.get(name) {
        k.node_exists = true;
        k.client_csr_pending = None;
        k.ready = n
            .status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"));
    }
    if k.serving_issued.is_some() {
        k.serving_csr_pending = None;
        k.serving_approved = false;
    }
    k
}
