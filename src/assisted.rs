//! A client for a day-2 node's local assisted-service REST API, as far as `monitor` reads it.
//!
//! Source: assisted-service `swagger.yaml` at the pinned commit 063b2579 (`agent-day2-sim upstream assisted-swagger`):
//! `basePath` `/api/assisted-install`, paths under `/v2`, models `cluster`, `host`,
//! `host-progress-info`, `inventory`, `interface`, `event`, `error`, `infra_error`. The node
//! serves it on `http://<ip>:8090` (docs/monitor.md "How monitor reads a host"; IPv6 in
//! brackets).
//!
//! Operations used, each with the security scheme swagger allows and the token we send
//! (tokens from Secret openshift-config/agent-auth-token, [`crate::auth`]):
//!
//! | operation | method, path | scheme (header) |
//! |---|---|---|
//! | `v2ListClusters` | GET `/v2/clusters?with_hosts=true&openshift_cluster_id=` | watcherAuth (`Watcher-Authorization`) |
//! | `v2ListEvents` | GET `/v2/events?cluster_id=&host_id=&limit=&order=descending` | watcherAuth |
//! | `V2DownloadClusterLogs` | GET `/v2/clusters/{cluster_id}/logs?logs_type=host&host_id=` | userAuth (`Authorization`) |
//!
//! The watcher persona can only read; the user token is used for nothing but the logs, which
//! swagger does not open to the watcher. Every request goes through one [`Limiter`]: a fixed
//! bound on requests in flight, whatever the number of nodes, with counters the caller reports.

use std::collections::BTreeMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};

/// swagger `basePath` plus the v2 prefix, appended to `http://<ip>:8090`.
pub const BASE_PATH: &str = "/api/assisted-install/v2";
/// Port of the node's assisted-service API (agent installer).
pub const PORT: u16 = 8090;

/// Security schemes (swagger `securityDefinitions`) this client sends.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum Scheme {
    /// `watcherAuth`: header `Watcher-Authorization`, the watcher persona token.
    Watcher,
    /// `userAuth`: header `Authorization`, the user persona token.
    User,
}

impl Scheme {
    /// The swagger scheme name.
    pub fn name(self) -> &'static str {
        match self {
            Scheme::Watcher => "watcherAuth",
            Scheme::User => "userAuth",
        }
    }
    /// The header it is sent in (swagger `securityDefinitions.<name>.name`).
    pub fn header(self) -> &'static str {
        match self {
            Scheme::Watcher => "Watcher-Authorization",
            Scheme::User => "Authorization",
        }
    }
}

/// One request as built, before it is sent: what the swagger conformance test checks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiRequest {
    /// swagger `operationId`.
    pub operation: &'static str,
    /// HTTP method (lowercase, as swagger keys them).
    pub method: &'static str,
    /// swagger path key, e.g. `/v2/clusters/{cluster_id}/logs`.
    pub path_template: &'static str,
    /// The path with parameters filled in (below [`BASE_PATH`]'s `/api/assisted-install`).
    pub path: String,
    /// Query parameters, in order.
    pub query: Vec<(String, String)>,
    /// The security scheme whose header carries the token.
    pub scheme: Scheme,
}

/// `v2ListClusters` with hosts, optionally only the cluster whose OpenShift id is given.
pub fn list_clusters_request(openshift_cluster_id: Option<&str>) -> ApiRequest {
    let mut query = vec![("with_hosts".to_string(), "true".to_string())];
    if let Some(id) = openshift_cluster_id.filter(|s| !s.is_empty()) {
        query.push(("openshift_cluster_id".into(), id.into()));
    }
    ApiRequest {
        operation: "v2ListClusters",
        method: "get",
        path_template: "/v2/clusters",
        path: "/v2/clusters".into(),
        query,
        scheme: Scheme::Watcher,
    }
}

/// `v2ListEvents` for one host of one cluster, newest first, at most `limit`.
pub fn list_events_request(cluster_id: &str, host_id: &str, limit: u32) -> ApiRequest {
    ApiRequest {
        operation: "v2ListEvents",
        method: "get",
        path_template: "/v2/events",
        path: "/v2/events".into(),
        query: vec![
            ("cluster_id".into(), cluster_id.into()),
            ("host_id".into(), host_id.into()),
            ("limit".into(), limit.to_string()),
            ("order".into(), "descending".into()),
        ],
        scheme: Scheme::Watcher,
    }
}

/// `V2DownloadClusterLogs` of one host (a tar.gz).
pub fn download_logs_request(cluster_id: &str, host_id: &str) -> ApiRequest {
    ApiRequest {
        operation: "V2DownloadClusterLogs",
        method: "get",
        path_template: "/v2/clusters/{cluster_id}/logs",
        path: format!("/v2/clusters/{}/logs", path_segment(cluster_id)),
        query: vec![
            ("logs_type".into(), "host".into()),
            ("host_id".into(), host_id.into()),
        ],
        scheme: Scheme::User,
    }
}

/// A path parameter, percent-encoded so an id from the wire cannot change the path (also
/// `migrate export`'s reads of node 0).
pub fn path_segment(s: &str) -> String {
    s.bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() || b == b'-' || b == b'_' || b == b'.' {
                (b as char).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect()
}

// ---------------------------------------------------------------------------------------------
// Models (swagger definitions; only the fields monitor reads, unknown fields ignored)

/// swagger `cluster` (an imported `AddHostsCluster` on a day-2 node).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Cluster {
    /// `id` (uuid): the assisted cluster id, not the OpenShift one.
    pub id: String,
    /// `kind`: `Cluster`, `AddHostsCluster`, ...
    #[serde(default)]
    pub kind: String,
    /// `name`.
    #[serde(default)]
    pub name: Option<String>,
    /// `openshift_cluster_id` (uuid): ClusterVersion spec.clusterID.
    #[serde(default)]
    pub openshift_cluster_id: Option<String>,
    /// `status` (enum, e.g. `adding-hosts`).
    #[serde(default)]
    pub status: String,
    /// `status_info`.
    #[serde(default)]
    pub status_info: String,
    /// `hosts` (present with `with_hosts=true`).
    #[serde(default)]
    pub hosts: Vec<Host>,
}

/// swagger `host`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Host {
    /// `id` (uuid).
    pub id: String,
    /// `kind`: `Host` or `AddToExistingClusterHost`.
    #[serde(default)]
    pub kind: String,
    /// `cluster_id` (uuid).
    #[serde(default)]
    pub cluster_id: Option<String>,
    /// `infra_env_id` (uuid).
    #[serde(default)]
    pub infra_env_id: Option<String>,
    /// `status` (swagger enum: discovering, known, insufficient, installing,
    /// installing-in-progress, installing-pending-user-action, error, cancelled,
    /// added-to-existing-cluster, ...).
    pub status: String,
    /// `status_info`: a sentence explaining the status.
    pub status_info: String,
    /// `validations_info`: JSON text, see [`ValidationsInfo`].
    #[serde(default)]
    pub validations_info: Option<String>,
    /// `progress`.
    #[serde(default)]
    pub progress: Option<HostProgressInfo>,
    /// `requested_hostname`.
    #[serde(default)]
    pub requested_hostname: Option<String>,
    /// `inventory`: JSON text, see [`Inventory`].
    #[serde(default)]
    pub inventory: Option<String>,
    /// `role`.
    #[serde(default)]
    pub role: Option<String>,
}

/// swagger `host-progress-info`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct HostProgressInfo {
    /// `current_stage` (swagger `host-stage`, e.g. `Writing image to disk`).
    #[serde(default)]
    pub current_stage: Option<String>,
    /// `installation_percentage` (0-100).
    #[serde(default)]
    pub installation_percentage: Option<i64>,
    /// `progress_info`.
    #[serde(default)]
    pub progress_info: Option<String>,
    /// `stage_started_at` (date-time).
    #[serde(default)]
    pub stage_started_at: Option<String>,
    /// `stage_updated_at` (date-time).
    #[serde(default)]
    pub stage_updated_at: Option<String>,
}

/// swagger `inventory` (carried as JSON text in `host.inventory`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Inventory {
    /// `hostname`.
    #[serde(default)]
    pub hostname: Option<String>,
    /// `interfaces`.
    #[serde(default)]
    pub interfaces: Vec<Interface>,
}

/// swagger `interface`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Interface {
    /// `name`.
    #[serde(default)]
    pub name: Option<String>,
    /// `mac_address`.
    #[serde(default)]
    pub mac_address: Option<String>,
    /// `ipv4_addresses` (CIDR strings).
    #[serde(default)]
    pub ipv4_addresses: Vec<String>,
    /// `ipv6_addresses` (CIDR strings).
    #[serde(default)]
    pub ipv6_addresses: Vec<String>,
}

/// One entry of `validations_info` (swagger describes it as a JSON string keyed by group:
/// `{"network": [{"id", "status", "message"}], ...}`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Validation {
    /// Validation id, e.g. `ntp-synced`.
    pub id: String,
    /// `success`, `failure`, `pending`, `error`, `disabled`.
    pub status: String,
    /// Human text.
    #[serde(default)]
    pub message: String,
}

/// `validations_info` parsed: group name → validations.
pub type ValidationsInfo = BTreeMap<String, Vec<Validation>>;

/// swagger `event`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Event {
    /// `name`.
    #[serde(default)]
    pub name: Option<String>,
    /// `cluster_id`.
    #[serde(default)]
    pub cluster_id: Option<String>,
    /// `host_id`.
    #[serde(default)]
    pub host_id: Option<String>,
    /// `severity`: info, warning, error, critical.
    pub severity: String,
    /// `message`.
    pub message: String,
    /// `event_time` (date-time).
    pub event_time: String,
}

/// swagger `infra_error` (401/403 answers).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct InfraError {
    /// HTTP status.
    pub code: i32,
    /// Text.
    pub message: String,
}

/// swagger `error` (other error answers).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ApiError {
    /// Always `Error`.
    #[serde(default)]
    pub kind: String,
    /// The code as a string.
    #[serde(default)]
    pub code: String,
    /// Text.
    #[serde(default)]
    pub reason: String,
}

impl Host {
    /// `validations_info` parsed; an absent or malformed value gives an empty map.
    pub fn validations(&self) -> ValidationsInfo {
        self.validations_info
            .as_deref()
            .and_then(|s| serde_json::from_str(s).ok())
            .unwrap_or_default()
    }

    /// Validations whose status is `failure` or `error`, as (id, message), sorted by id.
    pub fn failing_validations(&self) -> Vec<(String, String)> {
        let mut v: Vec<(String, String)> = self
            .validations()
            .into_values()
            .flatten()
            .filter(|v| v.status == "failure" || v.status == "error")
            .map(|v| (v.id, v.message))
            .collect();
        v.sort();
        v
    }

    /// `inventory` parsed; None when absent or malformed.
    pub fn inventory(&self) -> Option<Inventory> {
        self.inventory
            .as_deref()
            .and_then(|s| serde_json::from_str(s).ok())
    }

    /// Lowercase MACs of the inventory's interfaces.
    pub fn macs(&self) -> Vec<String> {
        self.inventory()
            .map(|i| {
                i.interfaces
                    .iter()
                    .filter_map(|n| n.mac_address.as_ref())
                    .map(|m| m.to_ascii_lowercase())
                    .collect()
            })
            .unwrap_or_default()
    }

    /// The hostname the host reports: `requested_hostname`, else the inventory's.
    pub fn hostname(&self) -> Option<String> {
        self.requested_hostname
            .clone()
            .filter(|h| !h.is_empty())
            .or_else(|| self.inventory().and_then(|i| i.hostname))
    }
}

// ---------------------------------------------------------------------------------------------
// The bound on requests in flight

/// A fixed bound on assisted-service requests in flight across every node, with counters:
/// `max_in_flight()` never exceeds `bound()` (a semaphore), whatever the node count.
#[derive(Debug)]
pub struct Limiter {
    sem: tokio::sync::Semaphore,
    bound: usize,
    in_flight: AtomicUsize,
    max_seen: AtomicUsize,
    total: AtomicU64,
    waited: AtomicU64,
}

/// A snapshot of a [`Limiter`]'s counters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct LimiterStats {
    /// The configured bound.
    pub bound: usize,
    /// Requests sent so far.
    pub requests: u64,
    /// Highest number in flight at once.
    pub max_in_flight: usize,
    /// Requests that had to wait for a free slot.
    pub waited: u64,
}

struct Slot<'a> {
    l: &'a Limiter,
    _permit: tokio::sync::SemaphorePermit<'a>,
}

impl Drop for Slot<'_> {
    fn drop(&mut self) {
        self.l.in_flight.fetch_sub(1, Ordering::SeqCst);
    }
}

impl Limiter {
    /// A limiter allowing `bound` requests at once (at least 1).
    pub fn new(bound: usize) -> Arc<Limiter> {
        let bound = bound.max(1);
        Arc::new(Limiter {
            sem: tokio::sync::Semaphore::new(bound),
            bound,
            in_flight: AtomicUsize::new(0),
            max_seen: AtomicUsize::new(0),
            total: AtomicU64::new(0),
            waited: AtomicU64::new(0),
        })
    }

    async fn slot(&self) -> Slot<'_> {
        let permit = match self.sem.try_acquire() {
            Ok(p) => p,
            Err(_) => {
                self.waited.fetch_add(1, Ordering::Relaxed);
                self.sem.acquire().await.expect("the semaphore is never closed")
            }
        };
        let now = self.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
        self.max_seen.fetch_max(now, Ordering::SeqCst);
        self.total.fetch_add(1, Ordering::Relaxed);
        Slot {
            l: self,
            _permit: permit,
        }
    }

    /// The counters now.
    pub fn stats(&self) -> LimiterStats {
        LimiterStats {
            bound: self.bound,
            requests: self.total.load(Ordering::Relaxed),
            max_in_flight: self.max_seen.load(Ordering::SeqCst),
            waited: self.waited.load(Ordering::Relaxed),
        }
    }
}

// ---------------------------------------------------------------------------------------------
// The client

/// Why a call failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AssistedError {
    /// No answer (connection refused, timeout): the live system is not up, or gone.
    #[error("no answer from {url}: {cause}")]
    Unreachable { url: String, cause: String },
    /// 401: the token is not accepted (`expired` when the service says it expired).
    #[error("{url}: token refused (HTTP 401): {message}")]
    Unauthorized {
        url: String,
        message: String,
        expired: bool,
    },
    /// 403: the token is of a persona this endpoint does not allow.
    #[error("{url}: forbidden (HTTP 403): {message}")]
    Forbidden { url: String, message: String },
    /// Any other non-2xx answer.
    #[error("{url}: HTTP {status}: {message}")]
    Http {
        url: String,
        status: u16,
        message: String,
    },
    /// A 2xx answer whose body is not the swagger model.
    #[error("{url}: answer is not a swagger {model}: {cause}")]
    Decode {
        url: String,
        model: &'static str,
        cause: String,
    },
}

/// A client for one node's API. Cheap to clone (shares the HTTP pool and the limiter).
#[derive(Clone)]
pub struct Client {
    http: reqwest::Client,
    /// `http://<ip>:8090` (or another base for tests), no trailing slash.
    origin: String,
    watcher_token: Arc<str>,
    user_token: Arc<str>,
    limiter: Arc<Limiter>,
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client")
            .field("origin", &self.origin)
            .finish_non_exhaustive()
    }
}

/// `http://<ip>:8090` with IPv6 in brackets.
pub fn origin_for(ip: IpAddr) -> String {
    format!("http://{}", SocketAddr::new(ip, PORT))
}

/// The shared HTTP client: short timeouts (a node that is not up must not hold a slot long),
/// proxies from the environment as everywhere else in the plugin.
pub fn http_client() -> Result<reqwest::Client, String> {
    let _ = rustls::crypto::ring::default_provider().install_default();
    reqwest::Client::builder()
        .connect_timeout(Duration::from_secs(5))
        .timeout(Duration::from_secs(30))
        .user_agent(concat!("agent-day2/", env!("CARGO_PKG_VERSION")))
        .build()
        .map_err(|e| format!("cannot build the HTTP client: {e}"))
}

impl Client {
    /// A client for the API at `origin` (e.g. [`origin_for`]`(ip)`), sending `watcher_token`
    /// or `user_token` per operation, through `limiter`.
    pub fn new(
        http: reqwest::Client,
        origin: String,
        watcher_token: &str,
        user_token: &str,
        limiter: Arc<Limiter>,
    ) -> Client {
        Client {
            http,
            origin: origin.trim_end_matches('/').to_string(),
            watcher_token: Arc::from(watcher_token.trim()),
            user_token: Arc::from(user_token.trim()),
            limiter,
        }
    }

    /// `http://<ip>:8090/api/assisted-install/v2`, for messages.
    pub fn base_url(&self) -> String {
        format!("{}{BASE_PATH}", self.origin)
    }

    fn url(&self, r: &ApiRequest) -> Result<reqwest::Url, AssistedError> {
        let s = format!("{}/api/assisted-install{}", self.origin, r.path);
        let mut u = reqwest::Url::parse(&s).map_err(|e| AssistedError::Unreachable {
            url: s.clone(),
            cause: format!("bad URL: {e}"),
        })?;
        if !r.query.is_empty() {
            let mut q = u.query_pairs_mut();
            for (k, v) in &r.query {
                q.append_pair(k, v);
            }
        }
        Ok(u)
    }

    /// Sends `r` and returns the body of a 2xx answer; errors classified.
    pub async fn send(&self, r: &ApiRequest) -> Result<Vec<u8>, AssistedError> {
        let url = self.url(r)?;
        let shown = format!("{}{}", self.origin, url.path());
        let token = match r.scheme {
            Scheme::Watcher => &self.watcher_token,
            Scheme::User => &self.user_token,
        };
        let _slot = self.limiter.slot().await;
        let resp = self
            .http
            .get(url)
            .header(r.scheme.header(), token.as_ref())
            .header("Accept", "application/json")
            .send()
            .await
            .map_err(|e| AssistedError::Unreachable {
                url: shown.clone(),
                cause: crate::kube::error_chain(&e),
            })?;
        let status = resp.status().as_u16();
        let body = resp.bytes().await.map_err(|e| AssistedError::Unreachable {
            url: shown.clone(),
            cause: crate::kube::error_chain(&e),
        })?;
        if (200..300).contains(&status) {
            return Ok(body.to_vec());
        }
        let message = serde_json::from_slice::<InfraError>(&body)
            .map(|e| e.message)
            .or_else(|_| serde_json::from_slice::<ApiError>(&body).map(|e| e.reason))
            .unwrap_or_else(|_| String::from_utf8_lossy(&body).into_owned());
        let message = crate::text::http_message(&message);
        Err(match status {
            401 => AssistedError::Unauthorized {
                url: shown,
                expired: message.to_ascii_lowercase().contains("expired"),
                message,
            },
            403 => AssistedError::Forbidden { url: shown, message },
            _ => AssistedError::Http {
                url: shown,
                status,
                message,
            },
        })
    }

    async fn get_json<T: serde::de::DeserializeOwned>(
        &self,
        r: &ApiRequest,
        model: &'static str,
    ) -> Result<T, AssistedError> {
        let body = self.send(r).await?;
        serde_json::from_slice(&body).map_err(|e| AssistedError::Decode {
            url: format!("{}{}", self.origin, r.path),
            model,
            cause: e.to_string(),
        })
    }

    /// `v2ListClusters` with hosts (swagger `cluster-list`).
    pub async fn list_clusters(
        &self,
        openshift_cluster_id: Option<&str>,
    ) -> Result<Vec<Cluster>, AssistedError> {
        self.get_json(&list_clusters_request(openshift_cluster_id), "cluster-list")
            .await
    }

    /// `v2ListEvents` of one host, newest first (swagger `event-list`).
    pub async fn list_events(
        &self,
        cluster_id: &str,
        host_id: &str,
        limit: u32,
    ) -> Result<Vec<Event>, AssistedError> {
        self.get_json(&list_events_request(cluster_id, host_id, limit), "event-list")
            .await
    }

    /// `V2DownloadClusterLogs` of one host: the archive's bytes.
    pub async fn download_logs(&self, cluster_id: &str, host_id: &str) -> Result<Vec<u8>, AssistedError> {
        self.send(&download_logs_request(cluster_id, host_id)).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn origins_bracket_ipv6_and_paths_escape_ids() {
        assert_eq!(
            origin_for("192.168.111.30".parse().unwrap()),
            "http://192.168.111.30:8090"
        );
        assert_eq!(origin_for("fd2e::30".parse().unwrap()), "http://[fd2e::30]:8090");
        assert_eq!(
            download_logs_request("a/../b", "h").path,
            "/v2/clusters/a%2F..%2Fb/logs"
        );
    }

    #[test]
    fn failing_validations_and_macs_from_the_json_texts() {
        let h = Host {
            validations_info: Some(r#"{"network":[{"id":"ntp-synced","status":"failure","message":"no NTP"},{"id":"x","status":"success","message":""}]}"#.into()),
            inventory: Some(r#"{"hostname":"w","interfaces":[{"mac_address":"52:54:00:AA:00:31"}]}"#.into()),
            ..Default::default()
        };
        assert_eq!(
            h.failing_validations(),
            vec![("ntp-synced".to_string(), "no NTP".to_string())]
        );
        assert_eq!(h.macs(), vec!["52:54:00:aa:00:31"]);
        assert_eq!(h.hostname().as_deref(), Some("w"));
    }

    #[tokio::test]
    async fn the_limiter_never_exceeds_its_bound() {
        let l = Limiter::new(3);
        let mut set = tokio::task::JoinSet::new();
        for _ in 0..40 {
            let l = l.clone();
            set.spawn(async move {
                let _s = l.slot().await;
                tokio::time::sleep(Duration::from_millis(2)).await;
            });
        }
        while set.join_next().await.is_some() {}
        let s = l.stats();
        assert_eq!(s.requests, 40);
        assert_eq!(s.max_in_flight, 3);
        assert!(s.waited > 0);
    }
}
