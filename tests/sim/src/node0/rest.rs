//! node 0's assisted-service REST v2 API (assisted-service's swagger.yaml)
//! as far as `migrate export` reads it, built from the database rows of a [`Snapshot`].
//!
//! Every endpoint needs userAuth, judged as assisted-service with `AUTH_TYPE=agent-installer-local`
//! judges it ([`authorize`]): the header `Authorization` holds the bare token (go-openapi's
//! APIKeyAuth passes the value on as it is), an ES256 JWT signed by the agent installer's key
//! whose claim `auth_scheme` is `userAuth`. Endpoints (all GET, under [`BASE`]):
//!
//! | path | answer |
//! |---|---|
//! | `/clusters[?with_hosts=true]` | `[cluster]` (hosts embedded only with `with_hosts`) |
//! | `/clusters/{id}[?exclude-hosts=true]` | `cluster` with hosts |
//! | `/clusters/{id}/credentials` | `{username, password, console_url}` |
//! | `/clusters/{id}/downloads/credentials?file_name=kubeconfig\|kubeconfig-noingress\|kubeadmin-password` | file |
//! | `/clusters/{id}/downloads/files?file_name=install-config.yaml\|metadata.json` | file |
//! | `/clusters/{id}/logs?logs_type=all\|controller\|host[&host_id=]` | tar (all, host) or tar.gz (controller) |
//! | `/clusters/{id}/manifests` | `[{folder, file_name, manifest_source}]` |
//! | `/clusters/{id}/manifests/files?folder=&file_name=` | file |
//! | `/infra-envs[?cluster_id=]`, `/infra-envs/{id}` | `[infra-env]`, `infra-env` |
//! | `/infra-envs/{id}/hosts`, `/infra-envs/{id}/hosts/{host_id}` | `[host]`, `host` |
//! | `/events?cluster_id=&host_id=&infra_env_id=&host_ids=&severities=&message=&cluster_level=&limit=&offset=&order=` | `[event]`, headers `Event-Count` (total matching, before limit/offset) and `Severity-Count-{Info,Warning,Error,Critical}` |
//!
//! Model mapping from rows: null columns are left out (omitempty); embedded structs are folded
//! back from their prefixed columns (`platform_type` → `platform.type`, `progress_*` →
//! `progress`, `load_balancer_type` → `load_balancer.type`); columns that are not in the
//! swagger model (`pull_secret`, `kube_key_*`, `deleted_at`, events' gorm `id`/`created_at`/
//! `updated_at`) are not served; the cluster gets its `hosts`, `api_vips`, `ingress_vips`,
//! `cluster_networks`, `service_networks`, `machine_networks`, `monitored_operators` from their
//! tables.
//!
//! Downloads (logs, credentials, files, manifests) are generated from the rows at start and
//! are deterministic (fixed tar mtimes, gzip without a timestamp).

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use bytes::Bytes;
use http::{Method, Request, Response, StatusCode};
use http_body_util::Full;
use serde_json::{json, Map, Value};

use super::seed::BASE_TIME;
use crate::boot::rest::{error, not_found, ok_json, segments, split_request};

/// API prefix (swagger `basePath` + `/v2`).
pub use crate::boot::rest::BASE;

/// Every table's rows as JSON objects (column → value; timestamps RFC 3339 in UTC), read from
/// the database in one query.
#[derive(Debug, Clone, Default)]
pub struct Snapshot {
    pub clusters: Vec<Value>,
    pub infra_envs: Vec<Value>,
    pub hosts: Vec<Value>,
    /// Ordered by `event_time`, then `id`.
    pub events: Vec<Value>,
    pub cluster_networks: Vec<Value>,
    pub service_networks: Vec<Value>,
    pub machine_networks: Vec<Value>,
    pub api_vips: Vec<Value>,
    pub ingress_vips: Vec<Value>,
    pub monitored_operators: Vec<Value>,
}

/// Downloadable files of one cluster.
#[derive(Default)]
struct ClusterFiles {
    credentials: Value,
    /// kubeconfig, kubeconfig-noingress, kubeadmin-password.
    creds_files: BTreeMap<String, Vec<u8>>,
    /// install-config.yaml, metadata.json.
    files: BTreeMap<String, Vec<u8>>,
    /// (folder, file_name) → contents.
    manifests: BTreeMap<(String, String), Vec<u8>>,
    logs_all: Vec<u8>,
    logs_controller: Vec<u8>,
    /// host id → that host's logs tar.gz.
    logs_host: BTreeMap<String, Vec<u8>>,
}

/// The API state: swagger objects made from the snapshot, plus the key tokens are checked with.
pub struct Node0Api {
    /// The agent installer's public key (uncompressed P-256 point), as assisted-service gets it
    /// in `EC_PUBLIC_KEY_PEM`.
    key: Vec<u8>,
    /// Cluster objects without hosts, by id (in row order).
    clusters: Vec<(String, Value)>,
    infra_envs: Vec<Value>,
    hosts: Vec<Value>,
    events: Vec<Value>,
    files: BTreeMap<String, ClusterFiles>,
}

/// Drops nulls and the named columns from a row object.
fn clean(row: &Value, drop: &[&str]) -> Map<String, Value> {
    let mut m = row.as_object().cloned().unwrap_or_default();
    m.retain(|k, v| !v.is_null() && !drop.contains(&k.as_str()));
    m
}

/// Moves `prefix_*` columns into an object under `field` (named without the prefix).
fn fold(m: &mut Map<String, Value>, prefix: &str, field: &str) {
    let keys: Vec<String> = m.keys().filter(|k| k.starts_with(prefix)).cloned().collect();
    if keys.is_empty() {
        return;
    }
    let mut inner = Map::new();
    for k in keys {
        if let Some(v) = m.remove(&k) {
            inner.insert(k[prefix.len()..].to_string(), v);
        }
    }
    m.insert(field.to_string(), Value::Object(inner));
}

fn str_of<'a>(v: &'a Value, k: &str) -> &'a str {
    v.get(k).and_then(Value::as_str).unwrap_or("")
}

/// swagger `host` from a `hosts` row.
pub fn host_json(row: &Value) -> Value {
    let mut m = clean(row, &["kube_key_namespace", "deleted_at"]);
    fold(&mut m, "progress_", "progress");
    Value::Object(m)
}

/// swagger `infra-env` from an `infra_envs` row.
pub fn infra_env_json(row: &Value) -> Value {
    let mut m = clean(row, &["kube_key_namespace", "deleted_at"]);
    m.insert("pull_secret_set".into(), json!(true));
    Value::Object(m)
}

/// swagger `event` from an `events` row.
pub fn event_json(row: &Value) -> Value {
    Value::Object(clean(row, &["id", "created_at", "updated_at", "deleted_at"]))
}

/// swagger `cluster` (without hosts) from a `clusters` row and the rows of its child tables.
pub fn cluster_json(row: &Value, snap: &Snapshot) -> Value {
    let id = str_of(row, "id");
    let mut m = clean(
        row,
        &["pull_secret", "kube_key_name", "kube_key_namespace", "deleted_at"],
    );
    fold(&mut m, "progress_", "progress");
    fold(&mut m, "platform_", "platform");
    fold(&mut m, "load_balancer_", "load_balancer");
    if let Some(snc) = m.remove("image_static_network_config") {
        m.insert("image_info".into(), json!({"static_network_config": snc}));
    }
    let of = |rows: &[Value]| -> Value {
        Value::Array(
            rows.iter()
                .filter(|r| str_of(r, "cluster_id") == id)
                .map(|r| {
                    let mut m = clean(r, &[]);
                    // monitored_operators.bundles: a JSON array kept as text (swagger: array).
                    if let Some(b) = m.get("bundles").and_then(Value::as_str) {
                        let arr = serde_json::from_str(b).unwrap_or_else(|_| json!([]));
                        m.insert("bundles".into(), arr);
                    }
                    Value::Object(m)
                })
                .collect(),
        )
    };
    m.insert("api_vips".into(), of(&snap.api_vips));
    m.insert("ingress_vips".into(), of(&snap.ingress_vips));
    m.insert("cluster_networks".into(), of(&snap.cluster_networks));
    m.insert("service_networks".into(), of(&snap.service_networks));
    m.insert("machine_networks".into(), of(&snap.machine_networks));
    m.insert("monitored_operators".into(), of(&snap.monitored_operators));
    m.insert("hosts".into(), json!([]));
    Value::Object(m)
}

/// A tar entry with fixed metadata.
fn tar_add<W: std::io::Write>(tar: &mut tar::Builder<W>, name: &str, data: &[u8]) {
    let mut h = tar::Header::new_gnu();
    h.set_size(data.len() as u64);
    h.set_mode(0o644);
    h.set_mtime(BASE_TIME as u64);
    h.set_cksum();
    tar.append_data(&mut h, name, data).expect("tar in memory");
}

/// A tar.gz (gzip header without a timestamp) of `files`.
fn tar_gz(files: &[(String, Vec<u8>)]) -> Vec<u8> {
    let mut tar = tar::Builder::new(flate2::write::GzEncoder::new(
        Vec::new(),
        flate2::Compression::fast(),
    ));
    for (n, d) in files {
        tar_add(&mut tar, n, d);
    }
    tar.into_inner()
        .and_then(|g| g.finish())
        .expect("tar.gz in memory")
}

fn kubeconfig(cluster: &str, domain: &str, server: &str, ca_seed: &str) -> Vec<u8> {
    use base64::Engine;
    let b64 = |s: &str| base64::engine::general_purpose::STANDARD.encode(s);
    let ca = b64(&format!(
        "-----BEGIN CERTIFICATE-----\n{}\n-----END CERTIFICATE-----\n",
        b64(&format!("simulated CA of {cluster}.{domain} {ca_seed}"))
    ));
    let cert = b64(&format!(
        "-----BEGIN CERTIFICATE-----\n{}\n-----END CERTIFICATE-----\n",
        b64(&format!("system:admin of {cluster} {ca_seed}"))
    ));
    let key = b64(&format!(
        "-----BEGIN RSA PRIVATE KEY-----\n{}\n-----END RSA PRIVATE KEY-----\n",
        b64(&format!("admin key of {cluster} {ca_seed}"))
    ));
    format!(
        "clusters:\n- cluster:\n    certificate-authority-data: {ca}\n    server: {server}\n  name: {cluster}\n\
         contexts:\n- context:\n    cluster: {cluster}\n    user: admin\n  name: admin\n\
         current-context: admin\npreferences: {{}}\nusers:\n- name: admin\n  user:\n    \
         client-certificate-data: {cert}\n    client-key-data: {key}\n"
    )
    .into_bytes()
}

impl ClusterFiles {
    fn new(c: &Value, snap: &Snapshot, hosts: &[Value], events: &[Value]) -> ClusterFiles {
        let id = str_of(c, "id");
        let name = str_of(c, "name");
        let domain = str_of(c, "base_dns_domain");
        let password = {
            use sha2::Digest;
            let h = hex::encode(sha2::Sha256::digest(format!("kubeadmin/{id}")));
            format!("{}-{}-{}-{}", &h[0..5], &h[5..10], &h[10..15], &h[15..20])
        };
        let credentials = json!({
            "username": "kubeadmin",
            "password": password,
            "console_url": format!("https://console-openshift-console.apps.{name}.{domain}"),
        });
        let api = format!("https://api.{name}.{domain}:6443");
        let mut creds_files = BTreeMap::new();
        creds_files.insert("kubeconfig".into(), kubeconfig(name, domain, &api, id));
        creds_files.insert(
            "kubeconfig-noingress".into(),
            kubeconfig(name, domain, &api, &format!("{id}/noingress")),
        );
        creds_files.insert("kubeadmin-password".into(), password.clone().into_bytes());
        let vips = |rows: &[Value]| -> Vec<String> {
            rows.iter()
                .filter(|r| str_of(r, "cluster_id") == id)
                .map(|r| str_of(r, "ip").to_string())
                .collect()
        };
        let row = snap
            .clusters
            .iter()
            .find(|r| str_of(r, "id") == id)
            .cloned()
            .unwrap_or_default();
        let install_config = format!(
            "apiVersion: v1\nbaseDomain: {domain}\nmetadata:\n  name: {name}\ncompute:\n- name: worker\n  \
             replicas: {workers}\ncontrolPlane:\n  name: master\n  replicas: 3\nnetworking:\n  networkType: \
             OVNKubernetes\n  clusterNetwork:\n  - cidr: 10.128.0.0/14\n    hostPrefix: 23\n  machineNetwork:\n  \
             - cidr: 192.168.111.0/24\n  serviceNetwork:\n  - 172.30.0.0/16\nplatform:\n  baremetal:\n    \
             apiVIPs: {api_vips:?}\n    ingressVIPs: {ingress_vips:?}\npullSecret: '{pull}'\nsshKey: '{ssh}'\n",
            workers = hosts.iter().filter(|h| str_of(h, "role") == "worker").count(),
            api_vips = vips(&snap.api_vips),
            ingress_vips = vips(&snap.ingress_vips),
            pull = str_of(&row, "pull_secret"),
            ssh = str_of(&row, "ssh_public_key"),
        );
        let metadata = json!({
            "clusterName": name,
            "clusterID": str_of(c, "openshift_cluster_id"),
            "infraID": format!("{name}-{}", &id[..5.min(id.len())]),
            "baremetal": {},
        });
        let mut files = BTreeMap::new();
        files.insert("install-config.yaml".into(), install_config.into_bytes());
        files.insert("metadata.json".into(), metadata.to_string().into_bytes());
        let mut manifests = BTreeMap::new();
        manifests.insert(
            ("manifests".to_string(), "50-masters-chrony-configuration.yaml".to_string()),
            b"apiVersion: machineconfiguration.openshift.io/v1\nkind: MachineConfig\nmetadata:\n  labels:\n    \
              machineconfiguration.openshift.io/role: master\n  name: 50-masters-chrony-configuration\nspec:\n  \
              config:\n    ignition:\n      version: 3.2.0\n    storage:\n      files:\n      - path: /etc/chrony.conf\n        \
              mode: 420\n        contents:\n          source: data:,server%20192.168.111.1%20iburst%0A\n"
                .to_vec(),
        );
        manifests.insert(
            ("openshift".to_string(), "99-openshift-machineconfig-master-kargs.yaml".to_string()),
            b"apiVersion: machineconfiguration.openshift.io/v1\nkind: MachineConfig\nmetadata:\n  labels:\n    \
              machineconfiguration.openshift.io/role: master\n  name: 99-openshift-machineconfig-master-kargs\n\
              spec:\n  kernelArguments:\n  - loglevel=7\n"
                .to_vec(),
        );
        // Logs: per host a tar.gz of its events and a journal excerpt; the controller's log.
        let mut logs_host = BTreeMap::new();
        let mut outer: Vec<(String, Vec<u8>)> = Vec::new();
        for h in hosts.iter().filter(|h| str_of(h, "cluster_id") == id) {
            let hid = str_of(h, "id");
            let hn = str_of(h, "requested_hostname");
            let mut evlog = String::new();
            for e in events.iter().filter(|e| str_of(e, "host_id") == hid) {
                evlog.push_str(&format!(
                    "{} {} {}\n",
                    str_of(e, "event_time"),
                    str_of(e, "severity"),
                    str_of(e, "message")
                ));
            }
            let journal = format!(
                "-- Logs begin at node boot --\n{hn} agent[1001]: host {hid} registered with cluster {id}\n\
                 {hn} installer[2002]: writing image to /dev/vda\n{hn} installer[2002]: done\n"
            );
            let gz = tar_gz(&[
                (format!("{hn}/events.log"), evlog.into_bytes()),
                (format!("{hn}/journal.log"), journal.into_bytes()),
            ]);
            outer.push((
                format!("{name}_{}_{hn}_{hid}.tar.gz", str_of(h, "role")),
                gz.clone(),
            ));
            // As assisted-service's PrepareHostLogFile: a tar of the host's stored objects.
            let mut one = tar::Builder::new(Vec::new());
            tar_add(
                &mut one,
                &format!("{name}_{}_{hn}.tar.gz", str_of(h, "role")),
                &gz,
            );
            logs_host.insert(hid.to_string(), one.into_inner().expect("tar in memory"));
        }
        let controller = tar_gz(&[(
            "assisted-installer-controller.logs".to_string(),
            format!(
                "level=info msg=\"Start running Assisted-Controller\" cluster={id}\n\
                 level=info msg=\"All hosts are installed\"\nlevel=info msg=\"Cluster installed\" version={}\n",
                str_of(c, "openshift_version")
            )
            .into_bytes(),
        )]);
        outer.push((format!("{name}_controller_logs.tar.gz"), controller.clone()));
        let mut tar = tar::Builder::new(Vec::new());
        for (n, d) in &outer {
            tar_add(&mut tar, n, d);
        }
        let logs_all = tar.into_inner().expect("tar in memory");
        ClusterFiles {
            credentials,
            creds_files,
            files,
            manifests,
            logs_all,
            logs_controller: controller,
            logs_host,
        }
    }
}

impl Node0Api {
    /// Builds every answer from `snap`; tokens are verified with `key` (the uncompressed P-256
    /// point of the signing key, e.g. from [`crate::boot::jwt::public_key`]).
    pub fn new(snap: Snapshot, key: Vec<u8>) -> Node0Api {
        let hosts: Vec<Value> = snap.hosts.iter().map(host_json).collect();
        let events: Vec<Value> = snap.events.iter().map(event_json).collect();
        let mut files = BTreeMap::new();
        let clusters: Vec<(String, Value)> = snap
            .clusters
            .iter()
            .filter(|r| r.get("deleted_at").is_none_or(Value::is_null))
            .map(|r| {
                let c = cluster_json(r, &snap);
                let id = str_of(r, "id").to_string();
                files.insert(id.clone(), ClusterFiles::new(&c, &snap, &hosts, &events));
                (id, c)
            })
            .collect();
        Node0Api {
            key,
            clusters,
            infra_envs: snap.infra_envs.iter().map(infra_env_json).collect(),
            hosts,
            events,
            files,
        }
    }

    fn cluster(&self, id: &str, with_hosts: bool) -> Option<Value> {
        let (_, c) = self.clusters.iter().find(|(i, _)| i == id)?;
        let mut c = c.clone();
        if with_hosts {
            c["hosts"] = Value::Array(
                self.hosts
                    .iter()
                    .filter(|h| str_of(h, "cluster_id") == id)
                    .cloned()
                    .collect(),
            );
        }
        Some(c)
    }

    /// Answers one request.
    pub fn handle(&self, req: &Request<hyper::body::Incoming>) -> Response<Full<Bytes>> {
        let (path, q) = match split_request(req) {
            Ok(v) => v,
            Err(r) => return r,
        };
        let value = req.headers().get("Authorization").map(|v| v.as_bytes());
        if let Err(refusal) = authorize(value, &self.key, now_unix()) {
            return crate::boot::rest::refusal_response(&refusal);
        }
        if req.method() != Method::GET {
            return error(
                StatusCode::METHOD_NOT_ALLOWED,
                format!("method {} is not allowed on {path}", req.method()),
            );
        }
        let segs = segments(&path);
        let truthy = |k: &str| q.get(k).is_some_and(|v| v.is_empty() || v == "true");
        let qs = |k: &str| q.get(k).map(String::as_str).unwrap_or("");
        match segs.as_slice() {
            ["clusters"] => {
                let with_hosts = truthy("with_hosts");
                let want = q.get("openshift_cluster_id");
                let v: Vec<Value> = self
                    .clusters
                    .iter()
                    .filter(|(_, c)| want.is_none_or(|w| str_of(c, "openshift_cluster_id") == w))
                    .filter_map(|(id, _)| self.cluster(id, with_hosts))
                    .collect();
                ok_json(&Value::Array(v))
            }
            ["clusters", id] => match self.cluster(id, !truthy("exclude-hosts")) {
                Some(c) => ok_json(&c),
                None => not_found("cluster", id),
            },
            ["clusters", id, rest @ ..] => {
                let Some(f) = self.files.get(*id) else {
                    return not_found("cluster", id);
                };
                match rest {
                    ["credentials"] => ok_json(&f.credentials),
                    ["downloads", "credentials"] => match f.creds_files.get(qs("file_name")) {
                        Some(d) => file(d, qs("file_name")),
                        None => bad_request(format!("invalid file_name {:?}", qs("file_name"))),
                    },
                    ["downloads", "files"] => match f.files.get(qs("file_name")) {
                        Some(d) => file(d, qs("file_name")),
                        None => not_found("file", qs("file_name")),
                    },
                    ["logs"] => match qs("logs_type") {
                        "" | "all" => file(&f.logs_all, &format!("{id}_logs.tar")),
                        "controller" => file(&f.logs_controller, &format!("{id}_controller_logs.tar.gz")),
                        "host" => match f.logs_host.get(qs("host_id")) {
                            Some(d) => file(d, &format!("{}_logs.tar", qs("host_id"))),
                            None => not_found("host", qs("host_id")),
                        },
                        t => bad_request(format!("invalid logs_type {t:?}")),
                    },
                    ["manifests"] => ok_json(&Value::Array(
                        f.manifests
                            .keys()
                            .map(|(d, n)| json!({"folder": d, "file_name": n, "manifest_source": "user"}))
                            .collect(),
                    )),
                    ["manifests", "files"] => {
                        let folder = if qs("folder").is_empty() {
                            "manifests"
                        } else {
                            qs("folder")
                        };
                        match f
                            .manifests
                            .get(&(folder.to_string(), qs("file_name").to_string()))
                        {
                            Some(d) => file(d, qs("file_name")),
                            None => not_found("manifest", &format!("{folder}/{}", qs("file_name"))),
                        }
                    }
                    _ => error(StatusCode::NOT_FOUND, format!("path {path} not found")),
                }
            }
            ["infra-envs"] => {
                let want = q.get("cluster_id");
                ok_json(&Value::Array(
                    self.infra_envs
                        .iter()
                        .filter(|i| want.is_none_or(|w| str_of(i, "cluster_id") == w))
                        .cloned()
                        .collect(),
                ))
            }
            ["infra-envs", id] => match self.infra_envs.iter().find(|i| str_of(i, "id") == *id) {
                Some(i) => ok_json(i),
                None => not_found("infra-env", id),
            },
            ["infra-envs", id, "hosts"] => {
                if !self.infra_envs.iter().any(|i| str_of(i, "id") == *id) {
                    return not_found("infra-env", id);
                }
                ok_json(&Value::Array(
                    self.hosts
                        .iter()
                        .filter(|h| str_of(h, "infra_env_id") == *id)
                        .cloned()
                        .collect(),
                ))
            }
            ["infra-envs", id, "hosts", hid] => match self
                .hosts
                .iter()
                .find(|h| str_of(h, "infra_env_id") == *id && str_of(h, "id") == *hid)
            {
                Some(h) => ok_json(h),
                None => not_found("host", hid),
            },
            ["events"] => self.events(&q),
            _ => error(StatusCode::NOT_FOUND, format!("path {path} not found")),
        }
    }

    /// `v2ListEvents`.
    fn events(&self, q: &BTreeMap<String, String>) -> Response<Full<Bytes>> {
        let eq = |k: &str, e: &Value| q.get(k).is_none_or(|w| w.is_empty() || str_of(e, k) == w);
        let list = |k: &str| -> Option<Vec<&str>> {
            q.get(k)
                .filter(|v| !v.is_empty())
                .map(|v| v.split(',').map(str::trim).collect())
        };
        let host_ids = list("host_ids");
        let severities = list("severities");
        let message = q.get("message").filter(|m| !m.is_empty());
        let cluster_level = q.get("cluster_level").is_some_and(|v| v == "true");
        let mut matching: Vec<&Value> = self
            .events
            .iter()
            .filter(|e| eq("cluster_id", e) && eq("host_id", e) && eq("infra_env_id", e))
            .filter(|e| {
                host_ids
                    .as_ref()
                    .is_none_or(|l| l.contains(&str_of(e, "host_id")))
            })
            .filter(|e| !cluster_level || e.get("host_id").is_none())
            .filter(|e| {
                message.is_none_or(|m| str_of(e, "message").to_lowercase().contains(&m.to_lowercase()))
            })
            .collect();
        let mut counts = BTreeMap::new();
        for e in &matching {
            *counts.entry(str_of(e, "severity")).or_insert(0u64) += 1;
        }
        if let Some(s) = &severities {
            matching.retain(|e| s.contains(&str_of(e, "severity")));
        }
        let filtered = matching.len();
        if q.get("order").is_some_and(|o| o == "descending") {
            matching.reverse();
        }
        let offset: usize = q.get("offset").and_then(|o| o.parse().ok()).unwrap_or(0);
        let limit: i64 = q.get("limit").and_then(|o| o.parse().ok()).unwrap_or(-1);
        let page: Vec<Value> = matching
            .into_iter()
            .skip(offset)
            .take(if limit < 0 { usize::MAX } else { limit as usize })
            .cloned()
            .collect();
        let mut r = ok_json(&Value::Array(page));
        let h = r.headers_mut();
        h.insert("Event-Count", filtered.into());
        for (sev, name) in [
            ("info", "Severity-Count-Info"),
            ("warning", "Severity-Count-Warning"),
            ("error", "Severity-Count-Error"),
            ("critical", "Severity-Count-Critical"),
        ] {
            h.insert(name, (*counts.get(sev).unwrap_or(&0)).into());
        }
        r
    }
}

/// Why [`authorize`] refused a request (the node API's judge, [`crate::boot::jwt`]).
pub use crate::boot::jwt::Refusal;

fn now_unix() -> i64 {
    time::OffsetDateTime::now_utc().unix_timestamp()
}

/// Judges a userAuth request as assisted-service 063b2579 does with
/// `AUTH_TYPE=agent-installer-local` (`value`: the `Authorization` header's bytes, None when
/// absent; `key`: the P-256 point of `EC_PUBLIC_KEY_PEM`; `now`: Unix seconds):
/// - the authenticator (`pkg/auth/agent_local_authenticator.go`, `CreateAuthenticator` =
///   go-openapi `security.APIKeyAuth`): no header or an empty one → 401 `unauthenticated for
///   invalid credentials` (go-openapi's); otherwise the whole value (surrounding whitespace
///   trimmed, as Go's header parsing does) is the token for `validateToken`
///   (`local_authenticator.go`: golang-jwt v4, ES256 only, claims validated), whose refusal is
///   401 `Failed to parse token: <reason>` — `tokenstring should not contain 'bearer '` for a
///   `Bearer ` prefix (any case), a bad signature, another algorithm, `Token is expired` for an
///   `exp` in the past (`Token used before issued` / `Token is not valid yet` for `iat` / `nbf`
///   in the future);
/// - the authorizer (`agent_local_authz_handler.go` `agentInstallerAuthorizer`, the route's
///   scheme `userAuth`): claim `auth_scheme` not a string (e.g. missing) → 500 `malformed
///   auth_scheme claim`; empty → 400 `token missing authClaim or endpoint is missing
///   authScheme`; another scheme → 403 `authClaim <scheme> is unauthorized to access`.
pub fn authorize(value: Option<&[u8]>, key: &[u8], now: i64) -> Result<(), Refusal> {
    crate::boot::jwt::judge(&[("userAuth", value)], key, now).map(|_| ())
}

fn file(data: &[u8], name: &str) -> Response<Full<Bytes>> {
    Response::builder()
        .status(StatusCode::OK)
        .header("Content-Type", "application/octet-stream")
        .header("Content-Disposition", format!("attachment; filename={name}"))
        .body(Full::new(Bytes::copy_from_slice(data)))
        .unwrap()
}

fn bad_request(reason: String) -> Response<Full<Bytes>> {
    error(StatusCode::BAD_REQUEST, reason)
}

/// Serves `api` on `listener` until the process ends. With `die_after = Some(n)`: the process
/// exits (status 0) shortly after the n-th answer is sent, and a request beyond the n-th is
/// not answered (the process exits at once), so clients see the port close.
pub async fn serve(listener: tokio::net::TcpListener, api: Arc<Node0Api>, die_after: Option<u64>) {
    let count = Arc::new(AtomicU64::new(0));
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            continue;
        };
        let api = api.clone();
        let count = count.clone();
        tokio::spawn(async move {
            let svc = hyper::service::service_fn(move |req| {
                let api = api.clone();
                let count = count.clone();
                async move {
                    let n = count.fetch_add(1, Ordering::SeqCst) + 1;
                    if let Some(max) = die_after {
                        if n > max {
                            eprintln!("node0: exiting after {max} requests (--die-after-requests)");
                            std::process::exit(0);
                        }
                        if n == max {
                            tokio::spawn(async move {
                                tokio::time::sleep(std::time::Duration::from_millis(200)).await;
                                eprintln!("node0: exiting after {max} requests (--die-after-requests)");
                                std::process::exit(0);
                            });
                        }
                    }
                    Ok::<_, Infallible>(api.handle(&req))
                }
            });
            let _ = hyper::server::conn::http1::Builder::new()
                .serve_connection(hyper_util::rt::TokioIo::new(stream), svc)
                .await;
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn time_claims_are_judged_as_golang_jwt_v4_does() {
        let k = rcgen::KeyPair::generate().unwrap();
        let key = crate::boot::jwt::public_key(&k.public_key_pem()).unwrap();
        let tok = |c: Value| crate::boot::jwt::sign(&c, &k.serialize_der()).unwrap();
        let now = 1_800_000_000;
        let judge = |c: Value| authorize(Some(tok(c).as_bytes()), &key, now).map_err(|r| (r.status, r.text));
        let ok = |extra: Value| {
            let mut c = json!({"auth_scheme": "userAuth"});
            c.as_object_mut()
                .unwrap()
                .extend(extra.as_object().unwrap().clone());
            judge(c)
        };
        assert_eq!(ok(json!({})), Ok(()));
        assert_eq!(ok(json!({"exp": now + 1, "iat": now, "nbf": now})), Ok(()));
        // exp == now is expired (now must be before it); 0 passes golang-jwt (absent there)
        // but not the authenticator's own exp check.
        let expired = Err((401, "Failed to parse token: Token is expired\n".to_string()));
        assert_eq!(ok(json!({"exp": now})), expired);
        assert_eq!(ok(json!({"exp": 0})).unwrap_err().0, 401);
        // A present time claim that is no number fails.
        assert_eq!(ok(json!({"exp": "tomorrow"})), expired);
        assert_eq!(ok(json!({"exp": null})), expired);
        assert_eq!(
            ok(json!({"iat": now + 60})),
            Err((
                401,
                "Failed to parse token: Token used before issued\n".to_string()
            ))
        );
        // Several failures: the last one checked is said (exp, iat, nbf).
        assert_eq!(
            ok(json!({"exp": now - 1, "nbf": now + 60})),
            Err((401, "Failed to parse token: Token is not valid yet\n".to_string()))
        );
        // The header value is trimmed as Go reads it; an empty one is no header.
        let t = tok(json!({"auth_scheme": "userAuth"}));
        assert_eq!(authorize(Some(format!("  {t} ").as_bytes()), &key, now), Ok(()));
        assert_eq!(authorize(Some(b"  "), &key, now).unwrap_err().status, 401);
        assert_eq!(
            authorize(Some(format!("bEaReR {t}").as_bytes()), &key, now)
                .unwrap_err()
                .status,
            401
        );
        // A non-string auth_scheme is malformed (500, swagger error), not another scheme.
        let r = judge(json!({"auth_scheme": 1})).unwrap_err();
        assert_eq!(r, (500, "malformed auth_scheme claim".to_string()));
    }
}
