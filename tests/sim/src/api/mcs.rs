//! The machine-config server stand-in of `agent-day2-sim up`: what a new node (and
//! assisted-service's `api-vip-connectivity-check`, through its discovery agent) downloads
//! from `https://api-int.<name>.<baseDomain>:22623/config/<pool>`.
//!
//! Served over TLS with a certificate for `api-int.<name>.<baseDomain>` (and the API's IP)
//! issued by the simulator's CA, the CA the seeded pointer Ignition in Secret
//! `openshift-machine-api/worker-user-data-managed` names in
//! `ignition.security.tls.certificateAuthorities`, so a client that trusts that Secret's CA
//! verifies this server as it would the real one.
//!
//! Answers, as the real machine-config-operator's `pkg/server` does (facts, not code):
//! - `GET|HEAD /config/<pool>` with `Accept: application/vnd.coreos.ignition+json;version=3.x`
//!   (3.1 ≤ x < 4; the highest-q Ignition entry decides): `200`, `Content-Type:
//!   application/json`, the pool's Ignition config with `ignition.version` set to the requested
//!   3.x spec (capped at 3.4.0, the newest spec OpenShift 4.18's MCO writes);
//! - an unknown pool: `500` with an empty body (the real server's `GetConfig` fails with
//!   "could not fetch pool" and the handler answers 500, not 404);
//! - an Ignition version outside 2.2–3.x in Accept: `400`, empty body;
//! - other methods: `405`; paths outside `/config/` (except `/healthz`, 200): `404`.
//!
//! Stand-in limits, said loudly: a request for spec 2.2 (an Accept without an Ignition
//! version, e.g. plain curl) gets `400` with a text body naming this limit, where the real
//! server converts the config to spec 2.2. The pool's config is the merge of the
//! MachineConfigs its `spec.machineConfigSelector.matchLabels` selects, in name order (what the
//! render controller writes into `rendered-<pool>-<hash>`; the seed has no rendered objects),
//! unless a MachineConfig of the name in the pool's `status.configuration.name` exists, which is
//! then served as it is. Like the real server it appends `/etc/kubernetes/kubeconfig` (the
//! node-bootstrapper's kubeconfig for `https://api-int.<name>.<baseDomain>:<API port>`) and
//! `/etc/kubernetes/kubelet-ca.crt`. The real server's refusal of addresses inside the pod
//! network is not simulated (there is no pod network).

use crate::pki::Ca;
use anyhow::Context;
use base64::Engine;
use bytes::Bytes;
use http_body_util::Full;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::{TokioExecutor, TokioIo};
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex};

/// The port of the machine-config server (the real one's `--secure-port` default, and the
/// port assisted-service's `constants.SecureMCSPort` names).
pub const MCS_PORT: u16 = 22623;

/// The newest Ignition spec the stand-in labels a served config with.
const NEWEST_SPEC: (u64, u64) = (3, 4);

/// The objects the server answers from, by name: a copy of the cluster's MachineConfigPools
/// and MachineConfigs (kept in step with the API server by its owner).
#[derive(Debug, Default, Clone)]
pub struct Mirror {
    pub pools: BTreeMap<String, Value>,
    pub configs: BTreeMap<String, Value>,
}

/// What the server needs besides the object store.
pub struct McsConfig {
    /// `api-int.<name>.<baseDomain>`: the certificate's DNS name.
    pub api_int: String,
    /// The API server's IP (also a SAN, for clients that dial it by address).
    pub ip: IpAddr,
    /// The node-bootstrapper kubeconfig appended as `/etc/kubernetes/kubeconfig`.
    pub bootstrap_kubeconfig: String,
    /// The cluster CA (PEM), appended as `/etc/kubernetes/kubelet-ca.crt`.
    pub ca_pem: String,
}

/// The node-bootstrapper kubeconfig the real server builds from its bootstrap token:
/// cluster `local`, server `https://<api_int>:<api_port>`, the CA, user `kubelet` with `token`.
pub fn bootstrap_kubeconfig(api_int: &str, api_port: u16, ca_pem: &str, token: &str) -> String {
    let ca = base64::engine::general_purpose::STANDARD.encode(ca_pem.as_bytes());
    format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: local\n  cluster:\n    server: https://{api_int}:{api_port}\n    certificate-authority-data: {ca}\nusers:\n- name: kubelet\n  user:\n    token: {token}\ncontexts:\n- name: kubelet\n  context:\n    cluster: local\n    user: kubelet\ncurrent-context: kubelet\npreferences: {{}}\n"
    )
}

/// Binds `addr` and serves the machine-config server until the process ends. Errors: the
/// address cannot be bound (the caller names the port), the certificate cannot be issued.
pub async fn serve(srv: Arc<Mutex<Mirror>>, ca: &Ca, addr: SocketAddr, cfg: McsConfig) -> anyhow::Result<()> {
    let leaf = ca.issue_server(std::slice::from_ref(&cfg.api_int), &[cfg.ip])?;
    let certs: Vec<_> = rustls_pemfile::certs(&mut leaf.cert_pem.as_bytes()).collect::<Result<_, _>>()?;
    let key = rustls_pemfile::private_key(&mut leaf.key_pem.as_bytes())?
        .ok_or_else(|| anyhow::anyhow!("machine-config server: no key in the issued certificate"))?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut tls = rustls::ServerConfig::builder_with_provider(provider)
        .with_protocol_versions(&[&rustls::version::TLS13, &rustls::version::TLS12])?
        .with_no_client_auth()
        .with_single_cert(certs, key)?;
    tls.alpn_protocols = vec![b"http/1.1".to_vec()];
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(tls));
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .with_context(|| format!("machine-config server: cannot listen on {addr}"))?;
    let cfg = Arc::new(cfg);
    tokio::spawn(async move {
        loop {
            let Ok((tcp, _)) = listener.accept().await else {
                tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                continue;
            };
            let (acceptor, srv, cfg) = (acceptor.clone(), srv.clone(), cfg.clone());
            tokio::spawn(async move {
                let Ok(tls) = acceptor.accept(tcp).await else {
                    return;
                };
                let svc = hyper::service::service_fn(move |req: Request<hyper::body::Incoming>| {
                    let r = {
                        let st = srv.lock().unwrap();
                        answer(
                            &st,
                            &cfg,
                            req.method().as_str(),
                            req.uri().path(),
                            accept_of(&req),
                        )
                    };
                    async move { Ok::<_, std::convert::Infallible>(r) }
                });
                let _ = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new())
                    .serve_connection(TokioIo::new(tls), svc)
                    .await;
            });
        }
    });
    Ok(())
}

fn accept_of<B>(req: &Request<B>) -> String {
    req.headers()
        .get_all(hyper::header::ACCEPT)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .collect::<Vec<_>>()
        .join(",")
}

fn empty(code: StatusCode) -> Response<Full<Bytes>> {
    let mut r = Response::new(Full::new(Bytes::new()));
    *r.status_mut() = code;
    r.headers_mut().insert(
        hyper::header::CONTENT_LENGTH,
        hyper::header::HeaderValue::from_static("0"),
    );
    r
}

/// The answer to one request (see the module docs).
pub fn answer(
    st: &Mirror,
    cfg: &McsConfig,
    method: &str,
    path: &str,
    accept: String,
) -> Response<Full<Bytes>> {
    if method != "GET" && method != "HEAD" {
        return empty(StatusCode::METHOD_NOT_ALLOWED);
    }
    if path == "/healthz" {
        return empty(StatusCode::OK);
    }
    let Some(pool) = path.strip_prefix("/config/").filter(|p| !p.is_empty()) else {
        return empty(StatusCode::NOT_FOUND);
    };
    // The real server takes the last path element as the pool.
    let pool = pool.rsplit('/').next().unwrap_or(pool);
    let version = match requested_spec(&accept) {
        Ok(Some(v)) => v,
        Ok(None) => {
            let mut r = Response::new(Full::new(Bytes::from(
                "the machine-config server stand-in of agent-day2-sim serves Ignition spec 3.x only \
                 (send Accept: application/vnd.coreos.ignition+json;version=3.x.0); the real server \
                 would convert to spec 2.2 here\n",
            )));
            *r.status_mut() = StatusCode::BAD_REQUEST;
            return r;
        }
        Err(()) => return empty(StatusCode::BAD_REQUEST),
    };
    let Some(mut ign) = pool_config(st, pool) else {
        return empty(StatusCode::INTERNAL_SERVER_ERROR);
    };
    let v = if version > NEWEST_SPEC {
        NEWEST_SPEC
    } else {
        version
    };
    ign["ignition"]["version"] = json!(format!("{}.{}.0", v.0, v.1));
    append_file(
        &mut ign,
        "/etc/kubernetes/kubeconfig",
        0o600,
        &cfg.bootstrap_kubeconfig,
    );
    append_file(&mut ign, "/etc/kubernetes/kubelet-ca.crt", 0o644, &cfg.ca_pem);
    let body = serde_json::to_vec(&ign).unwrap_or_default();
    let mut r = Response::new(Full::new(if method == "HEAD" {
        Bytes::new()
    } else {
        Bytes::from(body.clone())
    }));
    let h = r.headers_mut();
    h.insert(
        hyper::header::CONTENT_TYPE,
        hyper::header::HeaderValue::from_static("application/json"),
    );
    h.insert(hyper::header::CONTENT_LENGTH, body.len().into());
    r
}

/// The Ignition spec an Accept header asks for, as the real server reads it: entries sorted by
/// `q` (default 1, stable), the first `application/vnd.coreos.ignition+json` entry with a
/// `version` decides — 3.1 ≤ v < 4: `Some((3, minor))`; 2.2 ≤ v < 3: `None` (spec 2.2);
/// another version: `Err` (400) unless a later entry is supported. No such entry: `None`.
pub fn requested_spec(accept: &str) -> Result<Option<(u64, u64)>, ()> {
    let mut entries: Vec<(f32, Option<(u64, u64, u64)>, bool)> = Vec::new();
    for value in accept.split(',') {
        let parts: Vec<&str> = value.split(';').map(str::trim).collect();
        let Some((_, sub)) = parts[0].split_once('/') else {
            continue;
        };
        let (mut ver, mut q) = (None, None);
        for ext in &parts[1..] {
            if let Some((k, v)) = ext.split_once('=') {
                if k == "version" && ver.is_none() {
                    ver = semver3(v);
                } else if k == "q" && q.is_none() {
                    q = v.parse::<f32>().ok();
                }
            }
        }
        entries.push((q.unwrap_or(1.0), ver, sub == "vnd.coreos.ignition+json"));
    }
    entries.sort_by(|a, b| b.0.partial_cmp(&a.0).unwrap_or(std::cmp::Ordering::Equal));
    let mut unsupported = false;
    for (_, ver, ign) in entries {
        let (true, Some((ma, mi, _))) = (ign, ver) else {
            continue;
        };
        if ma == 3 && mi >= 1 {
            return Ok(Some((3, mi)));
        }
        if ma == 2 && mi >= 2 {
            return Ok(None);
        }
        unsupported = true;
    }
    if unsupported {
        Err(())
    } else {
        Ok(None)
    }
}

fn semver3(v: &str) -> Option<(u64, u64, u64)> {
    let mut it = v.split('.');
    let ma = it.next()?.parse().ok()?;
    let mi = it.next()?.parse().ok()?;
    let pa = it.next()?.split(['-', '+']).next()?.parse().ok()?;
    if it.next().is_some() {
        return None;
    }
    Some((ma, mi, pa))
}

/// The pool's Ignition config: the MachineConfig `status.configuration.name` names when it
/// exists, else the merge of the MachineConfigs the pool selects (name order). None: no such
/// MachineConfigPool.
pub fn pool_config(st: &Mirror, pool: &str) -> Option<Value> {
    let mcp = st.pools.get(pool)?;
    let mcs = &st.configs;
    if let Some(name) = mcp.pointer("/status/configuration/name").and_then(Value::as_str) {
        if let Some(mc) = mcs.get(name) {
            return Some(mc.pointer("/spec/config").cloned().unwrap_or_else(|| json!({})));
        }
    }
    let sel = mcp
        .pointer("/spec/machineConfigSelector/matchLabels")
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    let mut out = json!({"ignition": {"version": "3.2.0"}});
    for mc in mcs.values() {
        let labels = mc.pointer("/metadata/labels").and_then(Value::as_object);
        let selected = !sel.is_empty() && sel.iter().all(|(k, v)| labels.and_then(|l| l.get(k)) == Some(v));
        if selected {
            if let Some(c) = mc.pointer("/spec/config") {
                merge(&mut out, c);
            }
        }
    }
    Some(out)
}

/// Merges `child` into `parent` as Ignition 3 merging reads for the keys MachineConfigs use:
/// `storage.files`/`storage.directories`/`storage.links` by `path`, `systemd.units` by `name`,
/// `passwd.users` by `name` (SSH keys appended); other keys: the child's value wins.
fn merge(parent: &mut Value, child: &Value) {
    let keyed = |section: &str, list: &str| -> Option<&'static str> {
        match (section, list) {
            ("storage", "files" | "directories" | "links") => Some("path"),
            ("systemd", "units") => Some("name"),
            ("passwd", "users" | "groups") => Some("name"),
            _ => None,
        }
    };
    let Some(c) = child.as_object() else { return };
    for (section, cv) in c {
        if section == "ignition" {
            continue;
        }
        let pv = parent
            .as_object_mut()
            .unwrap()
            .entry(section.clone())
            .or_insert_with(|| json!({}));
        let (Some(pm), Some(cm)) = (pv.as_object_mut(), cv.as_object()) else {
            *pv = cv.clone();
            continue;
        };
        for (list, items) in cm {
            let Some(key) = keyed(section, list) else {
                pm.insert(list.clone(), items.clone());
                continue;
            };
            let arr = pm
                .entry(list.clone())
                .or_insert_with(|| json!([]))
                .as_array_mut()
                .map(std::mem::take)
                .unwrap_or_default();
            let mut arr = arr;
            for it in items.as_array().into_iter().flatten() {
                match arr
                    .iter_mut()
                    .find(|e| e.get(key).is_some() && e.get(key) == it.get(key))
                {
                    Some(e) if section == "passwd" => {
                        let keys: Vec<Value> =
                            it["sshAuthorizedKeys"].as_array().cloned().unwrap_or_default();
                        let mut merged = e.clone();
                        if let Some(o) = it.as_object() {
                            for (k, v) in o {
                                if k != "sshAuthorizedKeys" {
                                    merged[k] = v.clone();
                                }
                            }
                        }
                        let ek = merged["sshAuthorizedKeys"].as_array_mut();
                        match ek {
                            Some(ek) => ek.extend(keys),
                            None if !keys.is_empty() => merged["sshAuthorizedKeys"] = Value::Array(keys),
                            None => {}
                        }
                        *e = merged;
                    }
                    Some(e) => *e = it.clone(),
                    None => arr.push(it.clone()),
                }
            }
            pm.insert(list.clone(), Value::Array(arr));
        }
    }
}

fn append_file(ign: &mut Value, path: &str, mode: u32, text: &str) {
    let src = format!(
        "data:,{}",
        percent_encoding::utf8_percent_encode(text, percent_encoding::NON_ALPHANUMERIC)
    );
    let file = json!({"path": path, "mode": mode, "overwrite": true, "contents": {"source": src}});
    if !ign["storage"].is_object() {
        ign["storage"] = json!({});
    }
    let files = &mut ign["storage"]["files"];
    if !files.is_array() {
        *files = json!([]);
    }
    let a = files.as_array_mut().unwrap();
    a.retain(|f| f["path"] != path);
    a.push(file);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accept_header_picks_the_spec_as_the_real_server() {
        assert_eq!(
            requested_spec("application/vnd.coreos.ignition+json;version=3.4.0, */*;q=0.1"),
            Ok(Some((3, 4)))
        );
        assert_eq!(
            requested_spec("application/vnd.coreos.ignition+json; version=3.2.0"),
            Ok(Some((3, 2)))
        );
        // Ignition 0.x's header: 2.4.0 first, then 1 (not semver), then */*.
        assert_eq!(
            requested_spec("application/vnd.coreos.ignition+json; version=2.4.0, application/vnd.coreos.ignition+json; version=1; q=0.5, */*; q=0.1"),
            Ok(None)
        );
        assert_eq!(requested_spec(""), Ok(None));
        assert_eq!(requested_spec("*/*"), Ok(None));
        assert_eq!(
            requested_spec("application/vnd.coreos.ignition+json;version=3.0.0"),
            Err(())
        );
        assert_eq!(
            requested_spec("application/vnd.coreos.ignition+json;version=4.0.0"),
            Err(())
        );
        // q decides the order.
        assert_eq!(
            requested_spec("application/vnd.coreos.ignition+json;version=2.2.0;q=0.2, application/vnd.coreos.ignition+json;version=3.1.0"),
            Ok(Some((3, 1)))
        );
    }

    #[test]
    fn merge_keys_files_units_and_users() {
        let mut p = json!({"ignition": {"version": "3.2.0"}});
        merge(
            &mut p,
            &json!({"passwd": {"users": [{"name": "core", "sshAuthorizedKeys": ["a"]}]},
            "storage": {"files": [{"path": "/etc/x", "contents": {"source": "data:,1"}}]}}),
        );
        merge(
            &mut p,
            &json!({"passwd": {"users": [{"name": "core", "sshAuthorizedKeys": ["b"]}]},
            "storage": {"files": [{"path": "/etc/x", "contents": {"source": "data:,2"}}, {"path": "/etc/y"}]},
            "systemd": {"units": [{"name": "a.service", "enabled": true}]}}),
        );
        assert_eq!(p["passwd"]["users"][0]["sshAuthorizedKeys"], json!(["a", "b"]));
        assert_eq!(p["storage"]["files"].as_array().unwrap().len(), 2);
        assert_eq!(p["storage"]["files"][0]["contents"]["source"], "data:,2");
        assert_eq!(p["systemd"]["units"][0]["name"], "a.service");
    }
}
