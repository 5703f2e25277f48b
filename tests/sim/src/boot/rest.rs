//! The node's local assisted-service REST API, as far as monitoring reads it, on `IP:8090`
//! under `/api/assisted-install/v2` (paths, models and security from assisted-service
//! `swagger.yaml`).
//!
//! Auth (agent-installer local auth, [`super::jwt`]): each endpoint allows some security schemes
//! (swagger `security`); a scheme reads its header (`agentAuth` → `X-Secret-Key`, `userAuth` →
//! `Authorization`, `watcherAuth` → `Watcher-Authorization`; the whole value is the token, a
//! `Bearer ` prefix is refused), the token must verify with the image's `EC_PUBLIC_KEY_PEM`
//! and pass golang-jwt's time checks (401 otherwise), and its `auth_scheme` must be the
//! scheme's (500 without one, 403 for another), as `pkg/auth/agent_local_authenticator.go`
//! and `agent_local_authz_handler.go` decide.

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use http::{Method, Request, Response, StatusCode};
use http_body_util::Full;
use serde_json::{json, Value};

use super::facts::Facts;
use super::stages::{validations_info, Step, WORKER_STAGES};

/// API prefix (swagger `basePath`).
pub const BASE: &str = "/api/assisted-install/v2";

/// Security schemes (swagger `securityDefinitions`) and their header names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scheme {
    Agent,
    User,
    Watcher,
}

impl Scheme {
    /// Header the scheme reads.
    pub fn header(self) -> &'static str {
        match self {
            Scheme::Agent => "X-Secret-Key",
            Scheme::User => "Authorization",
            Scheme::Watcher => "Watcher-Authorization",
        }
    }
    fn name(self) -> &'static str {
        match self {
            Scheme::Agent => "agentAuth",
            Scheme::User => "userAuth",
            Scheme::Watcher => "watcherAuth",
        }
    }
}

/// What the host looks like now; the node's stage walker writes it, the API reads it.
#[derive(Debug, Clone)]
pub struct HostState {
    pub step: Step,
    pub events: Vec<Value>,
    pub status_updated_at: String,
    pub stage_started_at: String,
}

/// Everything one node's API serves.
pub struct NodeApi {
    pub facts: Arc<Facts>,
    pub hostname: String,
    pub mac: String,
    pub ip: std::net::IpAddr,
    /// AI cluster id (the imported AddHostsCluster), not the OpenShift cluster id.
    pub ai_cluster_id: String,
    pub host_id: String,
    pub created_at: String,
    pub state: Mutex<HostState>,
}

/// RFC 3339 "now" in UTC.
pub fn now() -> String {
    time::OffsetDateTime::now_utc()
        .format(&time::format_description::well_known::Rfc3339)
        .unwrap_or_default()
}

/// A UUID-shaped id derived from `seed` (stable across runs, distinct per seed).
pub fn derived_uuid(seed: &str) -> String {
    use sha2::Digest;
    let h = hex::encode(sha2::Sha256::digest(seed.as_bytes()));
    format!(
        "{}-{}-4{}-8{}-{}",
        &h[0..8],
        &h[8..12],
        &h[13..16],
        &h[17..20],
        &h[20..32]
    )
}

impl NodeApi {
    /// Posts an event (swagger `event`).
    pub fn event(&self, severity: &str, message: &str) {
        let mut st = self.state.lock().unwrap();
        st.events.push(json!({
            "name": "host_status_updated",
            "cluster_id": self.ai_cluster_id,
            "host_id": self.host_id,
            "infra_env_id": self.facts.infra_env_id,
            "severity": severity,
            "category": "user",
            "message": message,
            "event_time": now(),
        }));
    }

    /// Moves the host to `step` and posts its event.
    pub fn enter(&self, step: &Step) {
        {
            let mut st = self.state.lock().unwrap();
            let t = now();
            if st.step.status != step.status {
                st.status_updated_at = t.clone();
            }
            if st.step.stage != step.stage {
                st.stage_started_at = t;
            }
            st.step = step.clone();
        }
        let severity = match (step.status, &step.failing) {
            ("error", _) => "error",
            (_, Some(_)) => "warning",
            _ => "info",
        };
        self.event(severity, &step.event);
    }

    fn host_json(&self) -> Value {
        let st = self.state.lock().unwrap();
        let s = &st.step;
        let arch = &self.facts.cpu_architecture;
        let inventory = json!({
            "hostname": self.hostname,
            "cpu": {"architecture": arch, "count": 4},
            "memory": {"physical_bytes": 17179869184u64},
            "interfaces": [{"name": "eth0", "mac_address": self.mac, "ipv4_addresses": [format!("{}/24", self.ip)]}],
            "disks": [{"name": "vda", "path": "/dev/vda", "size_bytes": 128849018880u64, "installation_eligibility": {"eligible": true}}],
            "system_vendor": {"manufacturer": "agent-day2-sim", "product_name": "simulated", "virtual": true}
        });
        let mut progress = json!({
            "installation_percentage": s.percent.unwrap_or(0),
            "progress_info": "",
            "stage_started_at": st.stage_started_at,
            "stage_updated_at": st.status_updated_at,
        });
        if let Some(stage) = s.stage {
            progress["current_stage"] = json!(stage);
        }
        json!({
            "kind": "AddToExistingClusterHost",
            "id": self.host_id,
            "href": format!("{BASE}/infra-envs/{}/hosts/{}", self.facts.infra_env_id, self.host_id),
            "cluster_id": self.ai_cluster_id,
            "infra_env_id": self.facts.infra_env_id,
            "status": s.status,
            "status_info": s.status_info,
            "validations_info": validations_info(s.failing.as_ref().map(|f| f.0.as_str())),
            "status_updated_at": st.status_updated_at,
            "progress": progress,
            "progress_stages": WORKER_STAGES,
            "stage_started_at": st.stage_started_at,
            "stage_updated_at": st.status_updated_at,
            "role": "worker",
            "suggested_role": "worker",
            "bootstrap": false,
            "requested_hostname": self.hostname,
            "inventory": inventory.to_string(),
            "installation_disk_path": "/dev/vda",
            "discovery_agent_version": "agent-day2-sim",
            "created_at": self.created_at,
            "registered_at": self.created_at,
            "updated_at": st.status_updated_at,
            "checked_in_at": now(),
            "machine_config_pool_name": "worker",
        })
    }

    fn cluster_json(&self, with_hosts: bool) -> Value {
        let f = &self.facts;
        let mut c = json!({
            "kind": "AddHostsCluster",
            "id": self.ai_cluster_id,
            "href": format!("{BASE}/clusters/{}", self.ai_cluster_id),
            "name": f.cluster_name,
            "openshift_cluster_id": f.cluster_id,
            "openshift_version": f.openshift_version,
            "ocp_release_image": f.release_image,
            "base_dns_domain": f.base_domain,
            "api_vip_dns_name": f.api_dns_name,
            "cpu_architecture": f.cpu_architecture,
            "image_info": {},
            "platform": {"type": if f.user_managed_networking {"none"} else {"baremetal"}},
            "user_managed_networking": f.user_managed_networking,
            "imported": true,
            "status": "adding-hosts",
            "status_info": "cluster is adding hosts to existing OCP cluster",
            "high_availability_mode": "Full",
            "created_at": self.created_at,
            "updated_at": now(),
            "total_host_count": 1,
            "enabled_host_count": 1,
            "ready_host_count": 1,
            "hosts": [],
        });
        if with_hosts {
            c["hosts"] = json!([self.host_json()]);
        }
        c
    }

    fn infra_env_json(&self) -> Value {
        let f = &self.facts;
        json!({
            "kind": "InfraEnv",
            "id": f.infra_env_id,
            "href": format!("{BASE}/infra-envs/{}", f.infra_env_id),
            "name": f.cluster_name,
            "type": "full-iso",
            "cluster_id": self.ai_cluster_id,
            "cpu_architecture": f.cpu_architecture,
            "openshift_version": f.openshift_version,
            "pull_secret_set": true,
            "rendezvous_ip": "127.0.0.1",
            "created_at": self.created_at,
            "updated_at": self.created_at,
        })
    }

    /// Judges the request's credentials for an endpoint whose swagger `security` allows
    /// `schemes` (in swagger order) as the node's assisted-service does ([`super::jwt::judge`]):
    /// any token signed by the image's `EC_PUBLIC_KEY_PEM` key with the route's `auth_scheme`
    /// passes, whichever image it came from.
    fn authorize(
        &self,
        req: &Request<hyper::body::Incoming>,
        schemes: &[Scheme],
    ) -> Result<(), super::jwt::Refusal> {
        let values: Vec<(&str, Option<&[u8]>)> = schemes
            .iter()
            .map(|s| (s.name(), req.headers().get(s.header()).map(|v| v.as_bytes())))
            .collect();
        let now = time::OffsetDateTime::now_utc().unix_timestamp();
        super::jwt::judge(&values, &self.facts.ec_public_key, now).map(|_| ())
    }

    /// Handles one request.
    pub fn handle(&self, req: &Request<hyper::body::Incoming>) -> Response<Full<Bytes>> {
        let (path, query) = match split_request(req) {
            Ok(v) => v,
            Err(r) => return r,
        };
        let segs = segments(&path);
        use Scheme::*;
        let ie = self.facts.infra_env_id.as_str();
        let cl = self.ai_cluster_id.as_str();
        let hid = self.host_id.as_str();
        // (schemes from swagger `security`, handler)
        type Handler<'a> = Box<dyn Fn() -> Response<Full<Bytes>> + 'a>;
        let route: Option<(&[Scheme], Handler<'_>)> = match segs.as_slice() {
            ["clusters"] => Some((
                &[User, Watcher],
                Box::new(|| {
                    let with_hosts = query
                        .get("with_hosts")
                        .is_some_and(|v| v.is_empty() || v == "true");
                    let want = query.get("openshift_cluster_id");
                    if want.is_some_and(|w| w != &self.facts.cluster_id) {
                        return ok_json(&json!([]));
                    }
                    ok_json(&json!([self.cluster_json(with_hosts)]))
                }),
            )),
            ["clusters", id] => Some((
                &[User, Agent, Watcher],
                Box::new(move || {
                    if *id != cl {
                        return not_found("cluster", id);
                    }
                    let exclude = query.get("exclude-hosts").is_some_and(|v| v == "true");
                    ok_json(&self.cluster_json(!exclude))
                }),
            )),
            ["clusters", id, "hosts"] => Some((
                &[User, Agent],
                Box::new(move || {
                    if *id != cl {
                        return not_found("cluster", id);
                    }
                    ok_json(&json!([self.host_json()]))
                }),
            )),
            ["clusters", id, "logs"] => Some((
                &[User],
                Box::new(move || {
                    if *id != cl {
                        return not_found("cluster", id);
                    }
                    self.logs()
                }),
            )),
            ["infra-envs"] => Some((
                &[User, Watcher],
                Box::new(|| ok_json(&json!([self.infra_env_json()]))),
            )),
            ["infra-envs", id] => Some((
                &[User, Agent],
                Box::new(move || {
                    if *id != ie {
                        return not_found("infra-env", id);
                    }
                    ok_json(&self.infra_env_json())
                }),
            )),
            ["infra-envs", id, "hosts"] => Some((
                &[User, Agent],
                Box::new(move || {
                    if *id != ie {
                        return not_found("infra-env", id);
                    }
                    ok_json(&json!([self.host_json()]))
                }),
            )),
            ["infra-envs", id, "hosts", h] => Some((
                &[User],
                Box::new(move || {
                    if *id != ie {
                        return not_found("infra-env", id);
                    }
                    if *h != hid {
                        return not_found("host", h);
                    }
                    ok_json(&self.host_json())
                }),
            )),
            ["events"] => Some((
                &[User, Watcher],
                Box::new(|| {
                    let st = self.state.lock().unwrap();
                    let keep = |e: &&Value| {
                        let m = |k: &str| {
                            query
                                .get(k)
                                .is_none_or(|want| e.get(k).and_then(|v| v.as_str()) == Some(want.as_str()))
                        };
                        m("cluster_id") && m("infra_env_id") && m("host_id")
                    };
                    let mut evs: Vec<Value> = st.events.iter().filter(keep).cloned().collect();
                    if query.get("order").map(String::as_str) == Some("descending") {
                        evs.reverse();
                    }
                    let offset = query.get("offset").and_then(|o| o.parse().ok()).unwrap_or(0usize);
                    let evs: Vec<Value> = match query.get("limit").and_then(|l| l.parse::<usize>().ok()) {
                        Some(l) => evs.into_iter().skip(offset).take(l).collect(),
                        None => evs.into_iter().skip(offset).collect(),
                    };
                    let mut r = ok_json(&Value::Array(evs.clone()));
                    r.headers_mut().insert("Event-Count", evs.len().into());
                    r
                }),
            )),
            _ => None,
        };
        let Some((schemes, handler)) = route else {
            return error(
                StatusCode::NOT_FOUND,
                format!("path {path} is not served by this simulated assisted-service"),
            );
        };
        if req.method() != Method::GET {
            return error(
                StatusCode::METHOD_NOT_ALLOWED,
                format!("method {} is not allowed on {path}", req.method()),
            );
        }
        if let Err(refusal) = self.authorize(req, schemes) {
            return refusal_response(&refusal);
        }
        handler()
    }

    /// A small tar.gz of this host's logs (swagger: `type: file`).
    fn logs(&self) -> Response<Full<Bytes>> {
        let st = self.state.lock().unwrap();
        let mut text = String::new();
        for e in &st.events {
            text.push_str(&format!(
                "{} {} {}\n",
                e["event_time"].as_str().unwrap_or(""),
                e["severity"].as_str().unwrap_or(""),
                e["message"].as_str().unwrap_or("")
            ));
        }
        drop(st);
        let mut tar = tar::Builder::new(flate2::write::GzEncoder::new(
            Vec::new(),
            flate2::Compression::default(),
        ));
        let mut add = |name: &str, data: &[u8]| {
            let mut h = tar::Header::new_gnu();
            h.set_size(data.len() as u64);
            h.set_mode(0o644);
            h.set_mtime(time::OffsetDateTime::now_utc().unix_timestamp() as u64);
            h.set_cksum();
            let _ = tar.append_data(&mut h, name, data);
        };
        add(&format!("{}/events.log", self.hostname), text.as_bytes());
        add(
            &format!("{}/agent.log", self.hostname),
            format!("simulated agent on {} ({})\n", self.hostname, self.mac).as_bytes(),
        );
        let gz = tar.into_inner().and_then(|g| g.finish()).unwrap_or_default();
        Response::builder()
            .status(StatusCode::OK)
            .header("Content-Type", "application/octet-stream")
            .header(
                "Content-Disposition",
                format!("attachment; filename={}_logs.tar.gz", self.hostname),
            )
            .body(Full::new(Bytes::from(gz)))
            .unwrap()
    }
}

/// The path (without a trailing `/`) and the query of a request to the v2 API; a path outside
/// [`BASE`] is answered 404 (the `Err` response). Shared by this node API and `node0`.
pub(crate) fn split_request<B>(
    req: &Request<B>,
) -> Result<(String, BTreeMap<String, String>), Response<Full<Bytes>>> {
    let path = req.uri().path().trim_end_matches('/').to_string();
    let query = req
        .uri()
        .query()
        .map(|q| form_urlencoded::parse(q.as_bytes()).into_owned().collect())
        .unwrap_or_default();
    if !path.starts_with(BASE) {
        return Err(error(
            StatusCode::NOT_FOUND,
            format!("path {path} not found (the API is under {BASE})"),
        ));
    }
    Ok((path, query))
}

/// The non-empty segments of `path` after [`BASE`] (`["clusters", "<id>", "logs"]`).
pub(crate) fn segments(path: &str) -> Vec<&str> {
    path.strip_prefix(BASE)
        .unwrap_or(path)
        .split('/')
        .filter(|s| !s.is_empty())
        .collect()
}

/// A 200 answer with a JSON body.
pub(crate) fn ok_json(v: &Value) -> Response<Full<Bytes>> {
    Response::builder()
        .status(StatusCode::OK)
        .header("Content-Type", "application/json")
        .body(Full::new(Bytes::from(v.to_string())))
        .unwrap()
}

/// swagger `error`.
pub(crate) fn error(code: StatusCode, reason: String) -> Response<Full<Bytes>> {
    let body = json!({"kind": "Error", "id": code.as_u16(), "href": "", "code": code.as_u16().to_string(), "reason": reason});
    Response::builder()
        .status(code)
        .header("Content-Type", "application/json")
        .body(Full::new(Bytes::from(body.to_string())))
        .unwrap()
}

/// swagger `error` 404 for `what id`.
pub(crate) fn not_found(what: &str, id: &str) -> Response<Full<Bytes>> {
    error(StatusCode::NOT_FOUND, format!("{what} {id} not found"))
}

/// The answer to a refused request: its status and body ([`super::jwt::Refusal::body`]).
pub(crate) fn refusal_response(r: &super::jwt::Refusal) -> Response<Full<Bytes>> {
    Response::builder()
        .status(StatusCode::from_u16(r.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR))
        .header("Content-Type", "application/json")
        .body(Full::new(Bytes::from(r.body().to_string())))
        .unwrap()
}

/// A running API; [`Server::stop`] closes the listener and every open connection (the live
/// system going away at reboot).
pub struct Server {
    stop: tokio::sync::watch::Sender<bool>,
    task: tokio::task::JoinHandle<()>,
}

impl Server {
    /// Binds `addr` and serves `api`. Errors: the address cannot be bound (not inside the
    /// simulator's network namespace, or taken).
    pub async fn start(addr: SocketAddr, api: Arc<NodeApi>) -> std::io::Result<Server> {
        let listener = tokio::net::TcpListener::bind(addr).await?;
        let (stop, mut stopped) = tokio::sync::watch::channel(false);
        let task = tokio::spawn(async move {
            let mut conns = tokio::task::JoinSet::new();
            loop {
                tokio::select! {
                    _ = stopped.changed() => break,
                    acc = listener.accept() => {
                        let Ok((stream, _)) = acc else { continue };
                        let api = api.clone();
                        conns.spawn(async move {
                            let svc = hyper::service::service_fn(move |req| {
                                let api = api.clone();
                                async move { Ok::<_, Infallible>(api.handle(&req)) }
                            });
                            let _ = hyper::server::conn::http1::Builder::new()
                                .serve_connection(hyper_util::rt::TokioIo::new(stream), svc)
                                .await;
                        });
                    }
                    Some(_) = conns.join_next(), if !conns.is_empty() => {}
                }
            }
            drop(listener);
            conns.abort_all();
            while conns.join_next().await.is_some() {}
        });
        Ok(Server { stop, task })
    }

    /// Stops serving; returns when the port is closed.
    pub async fn stop(self) {
        let _ = self.stop.send(true);
        let _ = self.task.await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};

    /// GET `path` with `headers` on 127.0.0.1:`port`; (status, JSON body or Null).
    fn get(port: u16, path: &str, headers: &[(&str, &str)]) -> (u16, Value) {
        let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
        let mut req = format!("GET {BASE}{path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n");
        for (k, v) in headers {
            req.push_str(&format!("{k}: {v}\r\n"));
        }
        req.push_str("\r\n");
        s.write_all(req.as_bytes()).unwrap();
        let mut raw = Vec::new();
        s.read_to_end(&mut raw).unwrap();
        let out = String::from_utf8_lossy(&raw);
        let status = out[9..12].parse().unwrap();
        let body = out.split_once("\r\n\r\n").map(|(_, b)| b).unwrap_or("");
        (status, serde_json::from_str(body).unwrap_or(Value::Null))
    }

    /// The node API over HTTP judges credentials as assisted-service's agent-installer-local
    /// auth does (`pkg/auth/agent_local_authenticator.go`, `agent_local_authz_handler.go`): any
    /// token the image's key signed, by the scheme of the header that authenticated; the
    /// refusals with the service's status codes and bodies.
    #[test]
    fn credentials_are_judged_as_the_real_service_does() {
        let k = rcgen::KeyPair::generate().unwrap();
        let mint = |c: Value| super::super::jwt::sign(&c, &k.serialize_der()).unwrap();
        let facts = Facts {
            cluster_id: "c37c9544-4320-4380-9d8b-0753a4d9ea57".into(),
            infra_env_id: derived_uuid("ie"),
            ec_public_key: super::super::jwt::public_key(&k.public_key_pem()).unwrap(),
            ..Default::default()
        };
        let plan = super::super::stages::plan("worker-0", &Default::default());
        let api = Arc::new(NodeApi {
            facts: Arc::new(facts),
            hostname: "worker-0".into(),
            mac: "52:54:00:aa:00:30".into(),
            ip: "127.0.0.1".parse().unwrap(),
            ai_cluster_id: derived_uuid("ai"),
            host_id: derived_uuid("host"),
            created_at: now(),
            state: Mutex::new(HostState {
                step: plan[0].clone(),
                events: vec![],
                status_updated_at: now(),
                stage_started_at: now(),
            }),
        });
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let rt = tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build()
            .unwrap();
        let server = rt
            .block_on(Server::start(SocketAddr::from(([127, 0, 0, 1], port)), api))
            .unwrap();
        let t = time::OffsetDateTime::now_utc().unix_timestamp();
        let watcher = mint(json!({"auth_scheme": "watcherAuth", "exp": t + 3600}));
        let user = mint(json!({"auth_scheme": "userAuth", "exp": t + 3600}));
        let w = |tok: &str| get(port, "/clusters", &[("Watcher-Authorization", tok)]);
        assert_eq!(w(&watcher).0, 200);
        // Minted here, not the image's: signed by its key, so it passes.
        assert_eq!(w(&mint(json!({"auth_scheme": "watcherAuth"}))).0, 200);
        assert_eq!(
            w(&mint(json!({"sub": "watcherAuth", "exp": t + 3600}))),
            (
                500,
                json!({"code": "500", "href": "", "id": 500, "kind": "Error", "reason": "malformed auth_scheme claim"})
            )
        );
        assert_eq!(
            w(&user),
            (
                403,
                json!({"code": 403, "message": "authClaim userAuth is unauthorized to access"})
            )
        );
        assert_eq!(
            w(&format!("Bearer {watcher}")),
            (
                401,
                json!({"code": 401, "message": "Failed to parse token: tokenstring should not contain 'bearer '\n"})
            )
        );
        let ahead = mint(json!({"auth_scheme": "watcherAuth", "iat": t + 600}));
        assert_eq!(
            w(&ahead).1["message"],
            "Failed to parse token: Token used before issued\n"
        );
        let expired = mint(json!({"auth_scheme": "watcherAuth", "exp": t - 1}));
        assert_eq!(
            w(&expired).1["message"],
            "Failed to parse token: Token is expired\n"
        );
        let other = rcgen::KeyPair::generate().unwrap();
        let foreign =
            super::super::jwt::sign(&json!({"auth_scheme": "watcherAuth"}), &other.serialize_der()).unwrap();
        assert_eq!(
            w(&foreign),
            (
                401,
                json!({"code": 401, "message": "Failed to parse token: crypto/ecdsa: verification error\n"})
            )
        );
        assert_eq!(
            get(port, "/clusters", &[]),
            (
                401,
                json!({"code": 401, "message": "unauthenticated for invalid credentials"})
            )
        );
        // The route's first scheme that authenticates is the one authorized: userAuth first.
        let both = [
            ("Authorization", user.as_str()),
            ("Watcher-Authorization", watcher.as_str()),
        ];
        assert_eq!(get(port, "/clusters", &both).0, 200);
        let crossed = [
            ("Authorization", watcher.as_str()),
            ("Watcher-Authorization", watcher.as_str()),
        ];
        assert_eq!(get(port, "/clusters", &crossed).0, 403);
        // The logs take userAuth only: a watcher token under Watcher-Authorization is no credential.
        let cid = derived_uuid("ai");
        assert_eq!(
            get(
                port,
                &format!("/clusters/{cid}/logs"),
                &[("Watcher-Authorization", &watcher)]
            )
            .0,
            401
        );
        assert_eq!(
            get(
                port,
                &format!("/clusters/{cid}/logs"),
                &[("Authorization", &user)]
            )
            .0,
            200
        );
        let ie = derived_uuid("ie");
        let agent = mint(json!({"auth_scheme": "agentAuth"}));
        assert_eq!(
            get(
                port,
                &format!("/infra-envs/{ie}/hosts"),
                &[("X-Secret-Key", &agent)]
            )
            .0,
            200
        );
        rt.block_on(server.stop());
    }
}
