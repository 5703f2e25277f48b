//! The HTTPS Kubernetes API server: TLS (with optional client certificates), authentication,
//! impersonation, authorization, routing and the REST verbs with kube-apiserver's semantics.

use super::authz::{self, Attributes, UserInfo};
use super::registry::{self, Registry, ResourceType};
use super::selectors;
use super::status::{ApiError, FieldCause};
use super::store::{Event, State};
use super::validation::{self, FieldValidation, ValidationError};
use super::{discovery, table};
use crate::scenario::ForbiddenRule;
use bytes::Bytes;
use http::{Method, Request, Response};
use http_body_util::{combinators::BoxBody, BodyExt, Full, StreamBody};
use hyper::body::{Frame, Incoming};
use serde_json::{json, Value};
use std::collections::HashMap;
use std::convert::Infallible;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::broadcast;

/// The response body type of every handler.
pub type Body = BoxBody<Bytes, Infallible>;

/// kube-apiserver's default `--max-request-body-bytes`-like limit (`MaxRequestBodyBytes`, 3 MiB).
const MAX_REQUEST_BODY_BYTES: usize = 3 * 1024 * 1024;

/// `core.MaxSecretSize`: the most data a ConfigMap or Secret may hold (1 MiB).
const MAX_SECRET_SIZE: usize = 1024 * 1024;

/// `ValidateObjectMeta`'s label and annotation rules (apimachinery `ValidateLabels`,
/// `ValidateAnnotations`): label keys are qualified names, values label values; annotation keys
/// (lower-cased) qualified names. One `metadata.labels`/`metadata.annotations` cause each.
fn check_meta_labels(t: &ResourceType, obj: &Value) -> Result<(), ApiError> {
    let mut causes = Vec::new();
    if let Some(m) = obj["metadata"]["labels"].as_object() {
        for (k, v) in m {
            for e in selectors::label_key_errors(k) {
                causes.push(super::status::invalid_value("metadata.labels", &json!(k), &e));
            }
            for e in selectors::label_value_errors(v.as_str().unwrap_or("")) {
                causes.push(super::status::invalid_value("metadata.labels", v, &e));
            }
        }
    }
    if let Some(m) = obj["metadata"]["annotations"].as_object() {
        for k in m.keys() {
            for e in selectors::label_key_errors(&k.to_lowercase()) {
                causes.push(super::status::invalid_value(
                    "metadata.annotations",
                    &json!(k),
                    &e,
                ));
            }
        }
    }
    if causes.is_empty() {
        return Ok(());
    }
    let name = obj["metadata"]["name"].as_str().unwrap_or("");
    Err(ApiError::invalid(&t.group, &t.kind, name, &causes))
}

/// Go's `strconv.ParseInt(s, 10, 64)` error text.
fn go_parse_int_error(s: &str) -> String {
    let digits = s.strip_prefix(['-', '+']).unwrap_or(s);
    let why = if !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()) {
        "value out of range"
    } else {
        "invalid syntax"
    };
    format!("strconv.ParseInt: parsing {s:?}: {why}")
}

/// Go's `strconv.ParseUint(s, 10, 64)` error text.
fn go_parse_uint_error(s: &str) -> String {
    let why = if !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()) {
        "value out of range"
    } else {
        "invalid syntax"
    };
    format!("strconv.ParseUint: parsing {s:?}: {why}")
}

/// ValidateConfigMap / ValidateSecret size rule (pkg/apis/core/validation): the keys plus the
/// (decoded) values may not exceed 1 MiB. 422 with the pre-1.32 `TooLongMaxLength` text, field
/// `[]` for ConfigMaps (the whole object) and `data` for Secrets.
fn check_data_size(t: &ResourceType, obj: &Value) -> Result<(), ApiError> {
    use base64::Engine;
    if !t.group.is_empty() || !(t.plural == "configmaps" || t.plural == "secrets") {
        return Ok(());
    }
    let b64 = base64::engine::general_purpose::STANDARD;
    let mut total = 0usize;
    let secret = t.plural == "secrets";
    for (field, encoded) in [("data", secret), ("binaryData", true)] {
        if let Some(m) = obj[field].as_object() {
            for (k, v) in m {
                let s = v.as_str().unwrap_or("");
                total += k.len()
                    + if encoded {
                        b64.decode(s).map(|b| b.len()).unwrap_or(s.len())
                    } else {
                        s.len()
                    };
            }
        }
    }
    if total <= MAX_SECRET_SIZE {
        return Ok(());
    }
    let field = if secret { "data" } else { "[]" };
    let name = obj["metadata"]["name"].as_str().unwrap_or("");
    Err(ApiError::invalid(
        &t.group,
        &t.kind,
        name,
        &[FieldCause {
            reason: "FieldValueTooLong".into(),
            message: format!("Too long: must have at most {MAX_SECRET_SIZE} bytes"),
            field: field.into(),
        }],
    ))
}

/// The client certificate of a connection: Ok(user, groups) when the CA issued it and it is
/// valid, Err(()) when one was presented but does not verify.
pub type ClientCert = Result<(String, Vec<String>), ()>;

/// Shared server state.
pub struct Server {
    pub state: Mutex<State>,
    pub events: broadcast::Sender<Arc<Event>>,
    /// Bearer token → identity.
    pub tokens: HashMap<String, UserInfo>,
    /// Scenario switch: requests refused with 403 for everyone.
    pub forbidden: Mutex<Vec<ForbiddenRule>>,
    /// `host:port` clients use (discovery's serverAddressByClientCIDRs).
    pub server_addr: String,
    pub ca_cert_pem: String,
    pub ca_key_pem: String,
    /// What `pods/exec` may run ([`super::exec`]).
    pub exec: super::exec::ExecConfig,
}

/// Current time as RFC 3339 with whole seconds (`2026-01-02T03:04:05Z`), as metav1.Time.
pub fn now_rfc3339() -> String {
    let t = time::OffsetDateTime::now_utc()
        .replace_nanosecond(0)
        .unwrap_or(time::OffsetDateTime::UNIX_EPOCH);
    t.format(&time::format_description::well_known::Rfc3339)
        .unwrap_or_default()
}

fn random_bytes<const N: usize>() -> [u8; N] {
    let mut b = [0u8; N];
    getrandom::getrandom(&mut b).expect("getrandom");
    b
}

/// A random UUID v4 (metadata.uid).
pub fn new_uid() -> String {
    let mut b = random_bytes::<16>();
    b[6] = (b[6] & 0x0f) | 0x40;
    b[8] = (b[8] & 0x3f) | 0x80;
    let h = hex::encode(b);
    format!(
        "{}-{}-{}-{}-{}",
        &h[0..8],
        &h[8..12],
        &h[12..16],
        &h[16..20],
        &h[20..32]
    )
}

/// A random lowercase hex token of `n` bytes.
pub fn new_token(n: usize) -> String {
    let mut b = vec![0u8; n];
    getrandom::getrandom(&mut b).expect("getrandom");
    hex::encode(b)
}

/// generateName suffix: 5 characters from apiserver's alphabet (`k8s.io/apimachinery/pkg/util/rand`).
fn name_suffix() -> String {
    const ALPHA: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    random_bytes::<5>()
        .iter()
        .map(|b| ALPHA[*b as usize % ALPHA.len()] as char)
        .collect()
}

fn json_response(code: u16, v: &Value, warnings: &[String]) -> Response<Body> {
    let mut b = Response::builder()
        .status(code)
        .header("Content-Type", "application/json");
    for w in warnings {
        // RFC 7234 warning: code 299, agent "-", quoted text.
        let text = w.replace('\\', "\\\\").replace('"', "\\\"");
        b = b.header("Warning", format!("299 - \"{text}\""));
    }
    b.body(Full::new(Bytes::from(serde_json::to_vec(v).unwrap_or_default())).boxed())
        .expect("response")
}

/// The JSON `Status` response of an API error.
pub fn err_response(e: ApiError) -> Response<Body> {
    json_response(e.code, &e.body, &[])
}

/// Parsed query string (last value wins, as Go's url.Values.Get takes the first; kubectl sends each once).
struct Query(HashMap<String, String>);
impl Query {
    /// Like Go's `url.ParseQuery` as `req.URL.Query()` uses it: a pair whose key or value holds
    /// a bad `%` escape is dropped (so `labelSelector=%ZZ` selects nothing away, as on the real
    /// server), the rest decoded.
    fn parse(q: Option<&str>) -> Query {
        let bad_escape = |s: &str| {
            let b = s.as_bytes();
            (0..b.len()).any(|i| {
                b[i] == b'%'
                    && !(i + 2 < b.len() && b[i + 1].is_ascii_hexdigit() && b[i + 2].is_ascii_hexdigit())
            })
        };
        let ok_pairs: Vec<&str> = q.unwrap_or("").split('&').filter(|p| !bad_escape(p)).collect();
        Query(
            form_urlencoded::parse(ok_pairs.join("&").as_bytes())
                .into_owned()
                .collect(),
        )
    }
    fn get(&self, k: &str) -> Option<&str> {
        self.0.get(k).map(String::as_str).filter(|s| !s.is_empty())
    }
    fn flag(&self, k: &str) -> bool {
        matches!(self.get(k), Some("true") | Some("1"))
    }
}

/// What a resource URL addresses.
#[derive(Debug)]
struct Target {
    t: Arc<ResourceType>,
    namespace: Option<String>,
    name: Option<String>,
    sub: Option<String>,
}

enum Route {
    Version,
    Health,
    Api,
    Apis,
    Group(String),
    GroupVersion(String, String),
    OpenApiRoot,
    OpenApiV2,
    OpenApiGv(String, String),
    Resource(Target),
    NotFound,
}

fn route(reg: &Registry, path: &str) -> Route {
    let segs: Vec<&str> = path
        .trim_matches('/')
        .split('/')
        .filter(|s| !s.is_empty())
        .collect();
    let (group, version, rest): (&str, &str, &[&str]) = match segs.as_slice() {
        ["version"] => return Route::Version,
        ["healthz" | "readyz" | "livez", ..] => return Route::Health,
        ["api"] => return Route::Api,
        ["apis"] => return Route::Apis,
        ["apis", g] => return Route::Group(g.to_string()),
        ["openapi", "v3"] => return Route::OpenApiRoot,
        ["openapi", "v2"] => return Route::OpenApiV2,
        ["openapi", "v3", "api", v] => return Route::OpenApiGv(String::new(), v.to_string()),
        ["openapi", "v3", "apis", g, v] => return Route::OpenApiGv(g.to_string(), v.to_string()),
        ["api", v] => return Route::GroupVersion(String::new(), v.to_string()),
        ["apis", g, v] => return Route::GroupVersion(g.to_string(), v.to_string()),
        ["api", v, rest @ ..] => ("", *v, rest),
        ["apis", g, v, rest @ ..] => (*g, *v, rest),
        _ => return Route::NotFound,
    };
    // Namespaced: namespaces/<ns>/<plural>[/<name>[/<sub>]].
    if rest.len() >= 3 && rest[0] == "namespaces" {
        if let Some(t) = reg.get(group, version, rest[2]).filter(|t| t.namespaced) {
            if rest.len() > 5 {
                return Route::NotFound;
            }
            return Route::Resource(Target {
                t,
                namespace: Some(rest[1].to_string()),
                name: rest.get(3).map(|s| s.to_string()),
                sub: rest.get(4).map(|s| s.to_string()),
            });
        }
    }
    if rest.is_empty() || rest.len() > 3 {
        return Route::NotFound;
    }
    match reg.get(group, version, rest[0]) {
        Some(t) => Route::Resource(Target {
            t,
            namespace: None,
            name: rest.get(1).map(|s| s.to_string()),
            sub: rest.get(2).map(|s| s.to_string()),
        }),
        None => Route::NotFound,
    }
}

/// Why a request was refused before routing: a Status (401/403) or a plain-text body, as
/// responsewriters.InternalError writes it.
enum AuthFail {
    Api(ApiError),
    Plain(u16, String),
}

impl From<ApiError> for AuthFail {
    fn from(e: ApiError) -> Self {
        AuthFail::Api(e)
    }
}

/// The HTML escaping of apiserver's responsewriters (`&`, `<`, `>`, `"`, `'`).
fn html_escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&#34;")
        .replace('\'', "&#39;")
}

/// The authenticated (and possibly impersonated) caller.
fn authenticate(
    srv: &Server,
    req: &Request<Incoming>,
    cert: Option<&ClientCert>,
) -> Result<UserInfo, AuthFail> {
    let mut user = if let Some(Ok((cn, groups))) = cert {
        let mut g = groups.clone();
        g.push("system:authenticated".into());
        UserInfo {
            name: cn.clone(),
            groups: g,
        }
    } else if let Some(auth) = req.headers().get("authorization") {
        let v = auth.to_str().unwrap_or("");
        let tok = v
            .strip_prefix("Bearer ")
            .or_else(|| v.strip_prefix("bearer "))
            .map(str::trim);
        match tok.and_then(|t| srv.tokens.get(t)) {
            Some(u) => u.clone(),
            None => return Err(ApiError::unauthorized().into()),
        }
    } else if cert.is_some() {
        // A certificate the CA did not issue (or expired), and no token.
        return Err(ApiError::unauthorized().into());
    } else {
        UserInfo {
            name: "system:anonymous".into(),
            groups: vec!["system:unauthenticated".into()],
        }
    };
    // Impersonation (k8s.io/apiserver endpoints/filters/impersonation.go): `Impersonate-User`,
    // `Impersonate-Group`, `Impersonate-Uid`, `Impersonate-Extra-<key>`. Header values are taken
    // as bytes (Go's net/http keeps non-ASCII octets), so `--as 'ünïcode'` impersonates that
    // literal name instead of being ignored. Groups, extras or a UID without a user is a 500
    // (`requested [...] without impersonating a user`, written by responsewriters.InternalError as
    // plain text). Each request is authorized (verb impersonate on users/groups/uids/userextras);
    // only system:masters may here, as cluster-admin may.
    let header_text = |v: &http::HeaderValue| String::from_utf8_lossy(v.as_bytes()).into_owned();
    let imp_user = req
        .headers()
        .get("impersonate-user")
        .map(header_text)
        .filter(|s| !s.is_empty());
    let imp_groups: Vec<String> = req
        .headers()
        .get_all("impersonate-group")
        .iter()
        .map(header_text)
        .collect();
    let imp_uid = req
        .headers()
        .get("impersonate-uid")
        .map(header_text)
        .filter(|s| !s.is_empty());
    let mut imp_extra: Vec<(String, String)> = Vec::new();
    for (k, v) in req.headers() {
        if let Some(key) = k.as_str().strip_prefix("impersonate-extra-") {
            imp_extra.push((key.to_string(), header_text(v)));
        }
    }
    if imp_user.is_none() && (!imp_groups.is_empty() || !imp_extra.is_empty() || imp_uid.is_some()) {
        // Go's %v of []v1.ObjectReference: {Kind Namespace Name UID APIVersion ResourceVersion FieldPath}.
        let mut refs: Vec<String> = imp_groups.iter().map(|g| format!("{{Group  {g}    }}")).collect();
        refs.extend(
            imp_extra
                .iter()
                .map(|(k, v)| format!("{{UserExtra  {v}  authentication.k8s.io/v1  {k}}}")),
        );
        if let Some(u) = &imp_uid {
            refs.push(format!("{{UID  {u}  authentication.k8s.io/v1  }}"));
        }
        let msg = format!(
            "Internal Server Error: {:?}: requested [{}] without impersonating a user",
            req.uri().to_string(),
            refs.join(" ")
        );
        return Err(AuthFail::Plain(500, html_escape(&msg)));
    }
    if let Some(name) = imp_user {
        if !user.groups.iter().any(|g| g == "system:masters") {
            let attrs = Attributes {
                verb: "impersonate".into(),
                group: String::new(),
                resource: "users".into(),
                subresource: None,
                namespace: None,
                name: Some(name.clone()),
            };
            return Err(AuthFail::Api(forbidden_error(
                &authz::forbidden_message(&user, &attrs),
                &attrs,
            )));
        }
        let mut groups = imp_groups;
        if name != "system:anonymous"
            && !groups
                .iter()
                .any(|g| g == "system:authenticated" || g == "system:unauthenticated")
        {
            groups.push("system:authenticated".into());
        }
        user = UserInfo { name, groups };
    }
    Ok(user)
}

fn forbidden_error(message: &str, a: &Attributes) -> ApiError {
    let mut e = ApiError::forbidden(
        "",
        &a.verb,
        &a.group,
        &a.resource,
        a.subresource.as_deref(),
        a.namespace.as_deref(),
        a.name.as_deref(),
    );
    e.body["message"] = json!(message);
    e
}

impl Server {
    /// RBAC plus the scenario's Forbidden switches; a 403 `Status` when refused.
    pub fn authorize(&self, user: &UserInfo, a: &Attributes) -> Result<(), ApiError> {
        let rules = self.forbidden.lock().unwrap().clone();
        authz::authorize(user, a, &rules).map_err(|m| forbidden_error(&m, a))
    }

    /// Entry point for one HTTP request.
    pub async fn handle(self: Arc<Self>, req: Request<Incoming>, cert: Option<ClientCert>) -> Response<Body> {
        let method = req.method().clone();
        let path = req.uri().path().to_string();
        let user = match authenticate(&self, &req, cert.as_ref()) {
            Ok(u) => u,
            Err(AuthFail::Api(e)) => {
                tracing::debug!(%method, uri = %req.uri(), code = e.code, "unauthenticated");
                return err_response(e);
            }
            Err(AuthFail::Plain(code, text)) => {
                return Response::builder()
                    .status(code)
                    .header("Content-Type", "text/plain; charset=utf-8")
                    .header("X-Content-Type-Options", "nosniff")
                    .body(Full::new(Bytes::from(text + "\n")).boxed())
                    .expect("response");
            }
        };
        tracing::debug!(%method, uri = %req.uri(), user = %user.name, "request");
        let q = Query::parse(req.uri().query());
        let accept = req
            .headers()
            .get("accept")
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_string();
        let ctype = req
            .headers()
            .get("content-type")
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_string();
        let r = {
            let st = self.state.lock().unwrap();
            route(&st.registry, &path)
        };
        let anonymous = user.name == "system:anonymous";
        let non_resource = |v: Value| {
            if anonymous {
                err_response(nonresource_forbidden(&user, &path))
            } else {
                json_response(200, &v, &[])
            }
        };
        match r {
            Route::Version => json_response(200, &discovery::version(), &[]),
            Route::Health => Response::builder()
                .status(200)
                .header("Content-Type", "text/plain")
                .body(Full::new(Bytes::from_static(b"ok")).boxed())
                .unwrap(),
            Route::Api => non_resource(discovery::api_versions(&self.server_addr)),
            Route::Apis => non_resource(discovery::api_group_list(&self.state.lock().unwrap().registry)),
            Route::Group(g) => match discovery::api_group(&self.state.lock().unwrap().registry, &g) {
                Some(v) => non_resource(v),
                None => err_response(ApiError::no_route()),
            },
            Route::GroupVersion(g, v) => {
                match discovery::api_resource_list(&self.state.lock().unwrap().registry, &g, &v) {
                    Some(v) => non_resource(v),
                    None => err_response(ApiError::no_route()),
                }
            }
            Route::OpenApiRoot => {
                let st = self.state.lock().unwrap();
                non_resource(discovery::openapi_v3_root(&st.registry, st.types_generation))
            }
            Route::OpenApiGv(g, v) => {
                match discovery::openapi_v3_gv(&self.state.lock().unwrap().registry, &g, &v) {
                    Some(v) => non_resource(v),
                    None => err_response(ApiError::no_route()),
                }
            }
            Route::OpenApiV2 => {
                if anonymous {
                    err_response(nonresource_forbidden(&user, &path))
                } else if accept.contains("protobuf") {
                    Response::builder()
                        .status(200)
                        .header(
                            "Content-Type",
                            "application/com.github.proto-openapi.spec.v2.v1.0+protobuf",
                        )
                        .body(Full::new(Bytes::from(discovery::openapi_v2_protobuf())).boxed())
                        .expect("response")
                } else {
                    json_response(200, &discovery::openapi_v2_json(), &[])
                }
            }
            Route::NotFound => err_response(ApiError::no_route()),
            // pods/exec: a WebSocket upgrade, served before any body is read.
            Route::Resource(target)
                if target.t.group.is_empty()
                    && target.t.plural == "pods"
                    && target.sub.as_deref() == Some("exec")
                    && target.name.is_some() =>
            {
                if method != Method::GET && method != Method::POST {
                    return err_response(ApiError::method_not_allowed(
                        "the server does not allow this method on the requested resource",
                    ));
                }
                let ns = target.namespace.clone().unwrap_or_default();
                let name = target.name.clone().unwrap_or_default();
                super::exec::handle(self.clone(), req, ns, name, &user).await
            }
            Route::Resource(target) => {
                let body = if method == Method::POST
                    || method == Method::PUT
                    || method == Method::PATCH
                    || method == Method::DELETE
                {
                    // limitedReadBody (apiserver handlers/rest.go): at most MaxRequestBodyBytes.
                    match http_body_util::Limited::new(req.into_body(), MAX_REQUEST_BODY_BYTES)
                        .collect()
                        .await
                    {
                        Ok(b) => b.to_bytes(),
                        Err(e) if e.is::<http_body_util::LengthLimitError>() => {
                            return err_response(ApiError::too_large(MAX_REQUEST_BODY_BYTES))
                        }
                        Err(e) => {
                            return err_response(ApiError::bad_request(format!("cannot read body: {e}")))
                        }
                    }
                } else {
                    Bytes::new()
                };
                match self
                    .clone()
                    .resource(&method, target, &user, &q, &accept, &ctype, body)
                    .await
                {
                    Ok(r) => r,
                    Err(e) => err_response(e),
                }
            }
        }
    }

    #[allow(clippy::too_many_arguments)]
    async fn resource(
        self: Arc<Self>,
        method: &Method,
        tg: Target,
        user: &UserInfo,
        q: &Query,
        accept: &str,
        ctype: &str,
        body: Bytes,
    ) -> Result<Response<Body>, ApiError> {
        let t = tg.t.clone();
        let verb = match (method, tg.name.is_some()) {
            (&Method::GET, true) => "get",
            (&Method::GET, false) if q.flag("watch") => "watch",
            (&Method::GET, false) => "list",
            (&Method::POST, false) => "create",
            (&Method::PUT, true) => "update",
            (&Method::PATCH, true) => "patch",
            (&Method::DELETE, true) => "delete",
            (&Method::DELETE, false) => "deletecollection",
            _ => {
                return Err(ApiError::method_not_allowed(
                    "the server does not allow this method on the requested resource",
                ))
            }
        };
        if let Some(sub) = &tg.sub {
            if !t.subresources.contains(sub) || !matches!(verb, "get" | "update" | "patch") {
                return Err(ApiError::no_route());
            }
        }
        if t.verbs == ["create"] && verb != "create" {
            return Err(ApiError::method_not_allowed(
                "the server does not allow this method on the requested resource",
            ));
        }
        let attrs = Attributes {
            verb: verb.into(),
            group: t.group.clone(),
            resource: t.plural.clone(),
            subresource: tg.sub.clone(),
            namespace: tg.namespace.clone(),
            // For create, the name comes from the body (as NodeRestriction reads it), so the
            // node rule "create node <n>" can apply.
            name: tg.name.clone().or_else(|| {
                (verb == "create")
                    .then(|| serde_json::from_slice::<Value>(&body).ok())
                    .flatten()
                    .and_then(|v| {
                        v.pointer("/metadata/name")
                            .and_then(|n| n.as_str())
                            .map(String::from)
                    })
            }),
        };
        // system:basic-user lets every authenticated user ask who they are (authz.rs covers the
        // rest of the RBAC defaults).
        let whoami = t.plural == "selfsubjectreviews" && verb == "create" && user.name != "system:anonymous";
        if !whoami {
            self.authorize(user, &attrs)?;
        }
        let want_table = accept.contains("as=Table");
        // dryRun=All: everything but storing (kubectl --dry-run=server).
        let dry = match q.get("dryRun") {
            None => false,
            Some("All") => true,
            Some(other) => {
                return Err(ApiError::bad_request(format!(
                    "Invalid dryRun value: {other:?}: supported values: \"All\""
                )))
            }
        };
        match verb {
            "get" => {
                let obj = self.get_obj(&t, &tg)?;
                if want_table {
                    let tbl = table::table(
                        &t,
                        &[obj],
                        json!({"resourceVersion": self.state.lock().unwrap().rv.to_string()}),
                        q.get("includeObject").unwrap_or("Metadata"),
                        true,
                    );
                    return Ok(json_response(200, &tbl, &[]));
                }
                Ok(json_response(200, &obj, &[]))
            }
            "list" | "watch" => {
                // Query parameters decoded like metav1.ListOptions (ParameterCodec: integer
                // fields through strconv, a bad one is a 400 with its error).
                for k in ["timeoutSeconds", "limit"] {
                    if let Some(v) = q.get(k) {
                        if v.parse::<i64>().is_err() {
                            return Err(ApiError::bad_request(go_parse_int_error(v)));
                        }
                    }
                }
                // resourceVersion: a number ("0" = any); the watch cache waits up to 3 s
                // (blockTimeout) for a newer one, then answers Too large resource version.
                let rv_param = q.get("resourceVersion").map(str::to_string);
                let mut too_large = None;
                if let Some(s) = rv_param.as_deref() {
                    let n = s.parse::<u64>().map_err(|_| {
                        ApiError::bad_request(format!(
                            "invalid resource version: resourceVersion: Invalid value: {s:?}: {}",
                            go_parse_uint_error(s)
                        ))
                    })?;
                    let deadline = tokio::time::Instant::now() + Duration::from_secs(3);
                    loop {
                        let cur = self.state.lock().unwrap().rv;
                        if n <= cur {
                            break;
                        }
                        if tokio::time::Instant::now() >= deadline {
                            too_large = Some(ApiError::too_large_resource_version(n, cur));
                            break;
                        }
                        tokio::time::sleep(Duration::from_millis(50)).await;
                    }
                }
                match (verb, too_large) {
                    ("list", Some(e)) => Err(e),
                    ("list", None) => self.list(&t, &tg, q, want_table),
                    // A watch reports it as its only event (the cacher's newErrWatcher).
                    (_, Some(e)) => {
                        let line = format!("{}\n", json!({"type": "ERROR", "object": e.body}));
                        Ok(Response::builder()
                            .status(200)
                            .header("Content-Type", "application/json")
                            .header("Cache-Control", "no-cache, private")
                            .body(Full::new(Bytes::from(line)).boxed())
                            .expect("response"))
                    }
                    (_, None) => self.watch(t, tg, q, want_table),
                }
            }
            "create" => {
                let obj = parse_body(&body, ctype)?;
                let mode = field_validation(q)?;
                if t.plural == "selfsubjectaccessreviews" {
                    return self.ssar(user, obj);
                }
                if t.plural == "selfsubjectrulesreviews" {
                    // The authorizer's rules for the caller; scenario Forbidden switches are
                    // not subtracted, hence incomplete.
                    let served: Vec<(String, String)> = {
                        let st = self.state.lock().unwrap();
                        let mut v: Vec<(String, String)> = st
                            .registry
                            .by_gvr
                            .values()
                            .filter(|t| t.verbs.contains(&"list"))
                            .map(|t| (t.group.clone(), t.plural.clone()))
                            .collect();
                        v.sort();
                        v.dedup();
                        v
                    };
                    let (rules, non_resource) = authz::rules_for(user, &served);
                    let mut o = obj;
                    o["metadata"] = json!({"creationTimestamp": null});
                    o["status"] = json!({
                        "resourceRules": rules,
                        "nonResourceRules": non_resource.into_iter().map(|(v, u)| json!({"verbs": v, "nonResourceURLs": u})).collect::<Vec<_>>(),
                        "incomplete": !self.forbidden.lock().unwrap().is_empty(),
                    });
                    return Ok(json_response(201, &o, &[]));
                }
                if t.plural == "selfsubjectreviews" {
                    // Who the server thinks the caller is (after impersonation).
                    let mut o = obj;
                    o["metadata"] = json!({"creationTimestamp": null});
                    o["status"] = json!({"userInfo": {"username": user.name, "groups": user.groups}});
                    return Ok(json_response(201, &o, &[]));
                }
                let (o, w) = self.create(&t, tg.namespace.as_deref(), obj, mode, Some(user), dry)?;
                Ok(json_response(201, &o, &w))
            }
            "update" => {
                let obj = parse_body(&body, ctype)?;
                let mode = field_validation(q)?;
                let (o, w) = self.update(&t, &tg, obj, mode, dry)?;
                Ok(json_response(200, &o, &w))
            }
            "patch" => {
                let mode = field_validation(q)?;
                let (o, w) = self.patch(&t, &tg, &body, ctype, mode, dry)?;
                Ok(json_response(200, &o, &w))
            }
            "delete" => {
                let pre: Value = if body.is_empty() {
                    Value::Null
                } else {
                    serde_json::from_slice(&body).unwrap_or(Value::Null)
                };
                let name = tg.name.as_deref().unwrap_or("");
                let cur = self.get_obj(&t, &tg)?;
                check_preconditions(&t, name, &cur, &pre["preconditions"])?;
                if dry {
                    return Ok(json_response(200, &cur, &[]));
                }
                let o = self.delete(&t, tg.namespace.as_deref(), name)?;
                Ok(json_response(200, &o, &[]))
            }
            "deletecollection" => {
                let items = self.select(&t, tg.namespace.as_deref(), q)?;
                for o in &items {
                    let ns = o["metadata"]["namespace"].as_str().map(str::to_string);
                    let name = o["metadata"]["name"].as_str().unwrap_or("").to_string();
                    let _ = self.delete(&t, ns.as_deref(), &name);
                }
                let rv = self.state.lock().unwrap().rv;
                Ok(json_response(
                    200,
                    &json!({"kind": t.list_kind, "apiVersion": t.api_version(), "metadata": {"resourceVersion": rv.to_string()}, "items": items}),
                    &[],
                ))
            }
            _ => Err(ApiError::no_route()),
        }
    }

    fn get_obj(&self, t: &ResourceType, tg: &Target) -> Result<Value, ApiError> {
        let st = self.state.lock().unwrap();
        let name = tg.name.clone().unwrap_or_default();
        let ns = if t.namespaced {
            tg.namespace.clone().unwrap_or_default()
        } else {
            String::new()
        };
        st.objects
            .get(&t.key())
            .and_then(|b| b.get(&(ns, name.clone())))
            .map(|o| with_api_version(o, t))
            .ok_or_else(|| ApiError::not_found(&t.group, &t.plural, &name))
    }

    /// Objects of `t` in `namespace` (all when None) matching the label/field selectors, sorted.
    fn select(&self, t: &ResourceType, namespace: Option<&str>, q: &Query) -> Result<Vec<Value>, ApiError> {
        let labels =
            selectors::parse_labels(q.get("labelSelector").unwrap_or("")).map_err(ApiError::bad_request)?;
        let mut allowed = vec!["metadata.name", "metadata.namespace"];
        allowed.extend(t.extra_fields.iter().copied());
        let fields =
            selectors::parse_fields(q.get("fieldSelector").unwrap_or(""), &allowed).map_err(|e| {
                ApiError::bad_request(format!(
                    "Unable to find \"{}\" that match label selector \"\", field selector \"{}\": {e}",
                    t.plural,
                    q.get("fieldSelector").unwrap_or("")
                ))
            })?;
        let st = self.state.lock().unwrap();
        let Some(b) = st.objects.get(&t.key()) else {
            return Ok(Vec::new());
        };
        Ok(b.iter()
            .filter(|((ns, _), _)| namespace.is_none_or(|n| n == ns))
            .map(|(_, o)| o)
            .filter(|o| {
                selectors::labels_match(&labels, o["metadata"].get("labels"))
                    && selectors::fields_match(&fields, o)
            })
            .map(|o| with_api_version(o, t))
            .collect())
    }

    fn list(
        &self,
        t: &ResourceType,
        tg: &Target,
        q: &Query,
        want_table: bool,
    ) -> Result<Response<Body>, ApiError> {
        let rv = self.state.lock().unwrap().rv;
        let mut items = self.select(t, tg.namespace.as_deref(), q)?;
        // Pagination: the continue token is base64 of {"rv", "start": "<ns>/<name>"}; items
        // strictly after `start` follow.
        if let Some(c) = q.get("continue") {
            use base64::Engine;
            let tok: Value = base64::engine::general_purpose::STANDARD
                .decode(c)
                .ok()
                .and_then(|b| serde_json::from_slice(&b).ok())
                .ok_or_else(|| {
                    ApiError::bad_request("continue key is not valid: illegal base64 data at input byte 0")
                })?;
            let start = tok["start"].as_str().unwrap_or("").to_string();
            items.retain(|o| obj_key(o) > start);
        }
        let mut meta = json!({"resourceVersion": rv.to_string()});
        if let Some(limit) = q
            .get("limit")
            .and_then(|l| l.parse::<usize>().ok())
            .filter(|l| *l > 0)
        {
            if items.len() > limit {
                let remaining = items.len() - limit;
                items.truncate(limit);
                use base64::Engine;
                let tok = json!({"v": "meta.k8s.io/v1", "rv": rv, "start": obj_key(items.last().unwrap())});
                meta["continue"] = json!(base64::engine::general_purpose::STANDARD.encode(tok.to_string()));
                meta["remainingItemCount"] = json!(remaining);
            }
        }
        if want_table {
            let tbl = table::table(
                t,
                &items,
                meta,
                q.get("includeObject").unwrap_or("Metadata"),
                true,
            );
            return Ok(json_response(200, &tbl, &[]));
        }
        Ok(json_response(
            200,
            &json!({"kind": t.list_kind, "apiVersion": t.api_version(), "metadata": meta, "items": items}),
            &[],
        ))
    }

    fn watch(
        self: Arc<Self>,
        t: Arc<ResourceType>,
        tg: Target,
        q: &Query,
        want_table: bool,
    ) -> Result<Response<Body>, ApiError> {
        let labels =
            selectors::parse_labels(q.get("labelSelector").unwrap_or("")).map_err(ApiError::bad_request)?;
        let mut allowed = vec!["metadata.name", "metadata.namespace"];
        allowed.extend(t.extra_fields.iter().copied());
        let fields = selectors::parse_fields(q.get("fieldSelector").unwrap_or(""), &allowed)
            .map_err(ApiError::bad_request)?;
        let bookmarks = q.flag("allowWatchBookmarks");
        let initial_events = q.flag("sendInitialEvents");
        let include = q.get("includeObject").unwrap_or("Metadata").to_string();
        // A negative timeout ends the watch at once, as time.After(negative) fires immediately.
        let timeout = q
            .get("timeoutSeconds")
            .and_then(|s| s.parse::<i64>().ok())
            .map(|s| Duration::from_secs(s.max(0) as u64));
        let rv_param = q.get("resourceVersion").map(str::to_string);
        let ns = tg.namespace.clone();
        let key = t.key();
        let matches = {
            let t = t.clone();
            move |o: &Value| {
                (!t.namespaced
                    || ns
                        .as_deref()
                        .is_none_or(|n| o["metadata"]["namespace"].as_str() == Some(n)))
                    && selectors::labels_match(&labels, o["metadata"].get("labels"))
                    && selectors::fields_match(&fields, o)
            }
        };
        let (tx, rx) = tokio::sync::mpsc::channel::<Bytes>(256);
        let mut first_table = true;
        let encode = {
            let t = t.clone();
            move |typ: &str, o: &Value, first: &mut bool| -> Bytes {
                let obj = if want_table && typ != "BOOKMARK" && typ != "ERROR" {
                    let tb = table::table(
                        &t,
                        std::slice::from_ref(o),
                        json!({"resourceVersion": o["metadata"]["resourceVersion"]}),
                        &include,
                        *first,
                    );
                    *first = false;
                    tb
                } else {
                    o.clone()
                };
                let mut line = serde_json::to_vec(&json!({"type": typ, "object": obj})).unwrap_or_default();
                line.push(b'\n');
                Bytes::from(line)
            }
        };
        // Under the lock: subscribe, then collect the initial/replayed events, so nothing is
        // missed or duplicated.
        let mut sub = self.events.subscribe();
        let mut initial: Vec<Bytes> = Vec::new();
        let start_rv;
        {
            let st = self.state.lock().unwrap();
            start_rv = st.rv;
            let from: Option<u64> = match rv_param.as_deref() {
                None | Some("0") => None,
                Some(s) => Some(
                    s.parse::<u64>()
                        .map_err(|_| ApiError::bad_request(format!("invalid resource version: {s}")))?,
                ),
            };
            match from {
                Some(n) if !initial_events => {
                    if n < st.compacted_rv {
                        let e =
                            ApiError::gone(format!("too old resource version: {n} ({})", st.compacted_rv));
                        initial.push(encode("ERROR", &e.body, &mut first_table));
                    } else {
                        for ev in st.log.iter().filter(|e| e.rv > n && e.key == key) {
                            if let Some(kind) = event_type_for(ev, &matches) {
                                initial.push(encode(kind, &with_api_version(&ev.obj, &t), &mut first_table));
                            }
                        }
                    }
                }
                _ => {
                    if let Some(b) = st.objects.get(&key) {
                        for o in b.values().filter(|o| matches(o)) {
                            initial.push(encode("ADDED", &with_api_version(o, &t), &mut first_table));
                        }
                    }
                    if initial_events && bookmarks {
                        let bm = json!({"kind": t.kind, "apiVersion": t.api_version(),
                            "metadata": {"resourceVersion": st.rv.to_string(), "annotations": {"k8s.io/initial-events-end": "true"}}});
                        initial.push(encode("BOOKMARK", &bm, &mut first_table));
                    }
                }
            }
        }
        let gone = initial.len() == 1 && rv_param.is_some() && initial[0].starts_with(b"{\"type\":\"ERROR\"");
        let srv = self.clone();
        tokio::spawn(async move {
            for b in initial {
                if tx.send(b).await.is_err() {
                    return;
                }
            }
            if gone {
                return;
            }
            let deadline = timeout.map(|d| tokio::time::Instant::now() + d);
            let mut last_rv = start_rv;
            let mut tick = tokio::time::interval(Duration::from_secs(5));
            tick.tick().await;
            loop {
                let sleep_until = deadline
                    .unwrap_or_else(|| tokio::time::Instant::now() + Duration::from_secs(86400 * 365));
                tokio::select! {
                    ev = sub.recv() => match ev {
                        Ok(ev) => {
                            if ev.rv <= last_rv { continue; }
                            last_rv = ev.rv;
                            if ev.key != key { continue; }
                            let Some(kind) = event_type_for(&ev, &matches) else { continue };
                            if tx.send(encode(kind, &with_api_version(&ev.obj, &t), &mut first_table)).await.is_err() { return; }
                        }
                        Err(broadcast::error::RecvError::Lagged(_)) => {
                            let e = ApiError::gone("the watch fell behind; restart it");
                            let _ = tx.send(encode("ERROR", &e.body, &mut first_table)).await;
                            return;
                        }
                        Err(_) => return,
                    },
                    _ = tick.tick(), if bookmarks => {
                        let rv = srv.state.lock().unwrap().rv.max(last_rv);
                        let bm = json!({"kind": t.kind, "apiVersion": t.api_version(), "metadata": {"resourceVersion": rv.to_string()}});
                        if tx.send(encode("BOOKMARK", &bm, &mut first_table)).await.is_err() { return; }
                    }
                    _ = tx.closed() => return,
                    _ = tokio::time::sleep_until(sleep_until) => return,
                }
            }
        });
        let stream = tokio_stream::wrappers::ReceiverStream::new(rx);
        use futures::StreamExt;
        let body = StreamBody::new(stream.map(|b| Ok::<_, Infallible>(Frame::data(b))));
        Ok(Response::builder()
            .status(200)
            .header("Content-Type", "application/json")
            .header("Cache-Control", "no-cache, private")
            .body(BodyExt::boxed(body))
            .expect("response"))
    }

    fn ssar(&self, user: &UserInfo, mut obj: Value) -> Result<Response<Body>, ApiError> {
        let ra = &obj["spec"]["resourceAttributes"];
        let (allowed, reason) = if ra.is_object() {
            let s = |k: &str| ra[k].as_str().unwrap_or("").to_string();
            let attrs = Attributes {
                verb: s("verb"),
                group: s("group"),
                resource: s("resource"),
                subresource: Some(s("subresource")).filter(|x| !x.is_empty()),
                namespace: Some(s("namespace")).filter(|x| !x.is_empty()),
                name: Some(s("name")).filter(|x| !x.is_empty()),
            };
            let rules = self.forbidden.lock().unwrap().clone();
            match authz::authorize(user, &attrs, &rules) {
                Ok(()) => (true, String::new()),
                Err(_) => (false, String::new()),
            }
        } else {
            // Non-resource URLs: authenticated users may read them.
            (user.name != "system:anonymous", String::new())
        };
        obj["metadata"] = json!({"creationTimestamp": null});
        let mut status = json!({"allowed": allowed});
        if !reason.is_empty() {
            status["reason"] = json!(reason);
        }
        obj["status"] = status;
        Ok(json_response(201, &obj, &[]))
    }

    /// The JSON decoder's type errors for built-in kinds (a number where the Go field is a
    /// string, ...), as transformDecodeError reports them: 400 `ConfigMap in version "v1"
    /// cannot be handled as a ConfigMap: json: cannot unmarshal number into Go struct field
    /// ConfigMap.data of type string`.
    fn go_decode(&self, t: &ResourceType, obj: &Value) -> Result<(), ApiError> {
        validation::go_decode_check(&t.schema, &t.kind, obj).map_err(|e| {
            ApiError::bad_request(format!(
                "{kind} in version {v:?} cannot be handled as a {kind}: {e}",
                kind = t.kind,
                v = t.version
            ))
        })
    }

    /// Validates and prunes per the schema; maps errors to 400/422.
    fn validate(
        &self,
        t: &ResourceType,
        obj: &mut Value,
        mode: FieldValidation,
    ) -> Result<Vec<String>, ApiError> {
        let keep = (obj.get("apiVersion").cloned(), obj.get("kind").cloned());
        if let Some(raw) = &t.raw_schema {
            registry::apply_defaults(raw, obj, true);
        }
        let r = validation::validate(&t.schema, obj, mode);
        if let (Some(a), Some(k)) = keep {
            obj["apiVersion"] = a;
            obj["kind"] = k;
        }
        r.map_err(|e| {
            let name = obj["metadata"]["name"].as_str().unwrap_or("").to_string();
            match e {
                ValidationError::StrictDecoding(msgs) => ApiError::bad_request(format!(
                    "{kind} in version \"{v}\" cannot be handled as a {kind}: strict decoding error: {}",
                    msgs.join(", "),
                    kind = t.kind,
                    v = t.version
                )),
                ValidationError::Invalid(causes) => ApiError::invalid(
                    &t.group,
                    &t.kind,
                    &name,
                    &causes
                        .into_iter()
                        .map(|c| FieldCause {
                            reason: c.reason,
                            message: c.message,
                            field: c.field,
                        })
                        .collect::<Vec<_>>(),
                ),
            }
        })
    }

    /// Creates an object (POST). `user` is the caller (CSR spec.username etc.); None for seeding.
    pub fn create(
        &self,
        t: &Arc<ResourceType>,
        url_ns: Option<&str>,
        mut obj: Value,
        mode: FieldValidation,
        user: Option<&UserInfo>,
        dry: bool,
    ) -> Result<(Value, Vec<String>), ApiError> {
        if !obj.is_object() {
            return Err(ApiError::bad_request(
                "the body of the request must be a JSON object",
            ));
        }
        check_kind(t, &obj)?;
        // Seeds (no user) are the simulator's own objects; requests are decoded like Go.
        if user.is_some() {
            self.go_decode(t, &obj)?;
        }
        if !obj["metadata"].is_object() {
            obj["metadata"] = json!({});
        }
        // Namespace from the URL wins; a different one in the body is a 400 as in the real server.
        if t.namespaced {
            let url_ns = url_ns.unwrap_or("");
            match obj["metadata"]["namespace"].as_str() {
                Some(ns) if !ns.is_empty() && ns != url_ns => {
                    return Err(ApiError::bad_request("the namespace of the provided object does not match the namespace sent on the request"));
                }
                _ => obj["metadata"]["namespace"] = json!(url_ns),
            }
        } else if let Some(m) = obj["metadata"].as_object_mut() {
            m.remove("namespace");
        }
        // Custom resources with a status subresource ignore status on create.
        if t.crd.is_some() && t.has_status() {
            if let Some(o) = obj.as_object_mut() {
                o.remove("status");
            }
        }
        let mut warnings = self.validate(t, &mut obj, mode)?;
        normalize(t, &mut obj)?;
        let name = match obj["metadata"]["name"].as_str().filter(|n| !n.is_empty()) {
            Some(n) => n.to_string(),
            None => match obj["metadata"]["generateName"].as_str().filter(|n| !n.is_empty()) {
                Some(g) => format!("{g}{}", name_suffix()),
                None => {
                    return Err(ApiError::invalid(
                        &t.group,
                        &t.kind,
                        "",
                        &[super::status::required(
                            "metadata.name",
                            "name or generateName is required",
                        )],
                    ));
                }
            },
        };
        check_name(t, &name)?;
        obj["metadata"]["name"] = json!(name);
        check_meta_labels(t, &obj)?;
        check_data_size(t, &obj)?;
        let ns = if t.namespaced {
            url_ns.unwrap_or("").to_string()
        } else {
            String::new()
        };
        // Type-specific defaults and checks.
        match (t.group.as_str(), t.plural.as_str()) {
            ("certificates.k8s.io", "certificatesigningrequests") => {
                if let Some(u) = user {
                    obj["spec"]["username"] = json!(u.name);
                    obj["spec"]["groups"] = json!(u.groups);
                    obj["spec"]["uid"] = json!("");
                    if let Some(s) = obj["spec"].as_object_mut() {
                        s.remove("uid");
                    }
                }
                if let Some(o) = obj.as_object_mut() {
                    o.remove("status");
                }
                validate_csr_spec(&obj, &name)?;
            }
            // Created through the API: scheduled on a master and Running with ready containers
            // at once (no kubelet to wait for); a seeded pod keeps the status it names.
            ("", "pods") if user.is_some() => {
                let node = obj["spec"]["nodeName"]
                    .as_str()
                    .filter(|n| !n.is_empty())
                    .map(str::to_string)
                    .or_else(|| self.a_master_node());
                if let Some(n) = &node {
                    obj["spec"]["nodeName"] = json!(n);
                }
                obj["status"] = running_pod_status(&obj);
            }
            ("", "pods") if obj["status"]["phase"].is_null() => {
                obj["status"] = json!({"phase": "Pending", "qosClass": "BestEffort"});
            }
            // No provisioner to wait for: bound to a made-up volume of the requested size.
            ("", "persistentvolumeclaims") if user.is_some() || obj["status"]["phase"].is_null() => {
                let size = obj["spec"]["resources"]["requests"]["storage"].clone();
                let modes = match &obj["spec"]["accessModes"] {
                    Value::Array(a) if !a.is_empty() => Value::Array(a.clone()),
                    _ => json!(["ReadWriteOnce"]),
                };
                obj["spec"]["volumeName"] = json!(format!("pvc-{}", new_uid()));
                if obj["spec"]["volumeMode"].is_null() {
                    obj["spec"]["volumeMode"] = json!("Filesystem");
                }
                let ann = &mut obj["metadata"]["annotations"];
                if !ann.is_object() {
                    *ann = json!({});
                }
                ann["pv.kubernetes.io/bind-completed"] = json!("yes");
                ann["pv.kubernetes.io/bound-by-controller"] = json!("yes");
                obj["status"] = json!({
                    "phase": "Bound",
                    "accessModes": modes,
                    "capacity": if size.is_null() { json!({}) } else { json!({"storage": size}) },
                });
            }
            ("", "namespaces") => {
                obj["spec"] = json!({"finalizers": ["kubernetes"]});
                obj["status"] = json!({"phase": "Active"});
                if obj["metadata"]["labels"].is_null() {
                    obj["metadata"]["labels"] = json!({});
                }
                obj["metadata"]["labels"]["kubernetes.io/metadata.name"] = json!(name);
            }
            ("apiextensions.k8s.io", "customresourcedefinitions") => {
                let types = registry::types_from_crd(&obj).map_err(|errs| crd_invalid(&name, errs))?;
                crd_status(&mut obj);
                let mut st = self.state.lock().unwrap();
                if dry {
                    return Ok((obj, warnings));
                }
                if st
                    .objects
                    .get(&t.key())
                    .is_some_and(|b| b.contains_key(&(String::new(), name.clone())))
                {
                    return Err(ApiError::already_exists(&t.group, &t.plural, &name));
                }
                for ty in types {
                    st.registry.add(ty);
                }
                st.types_generation += 1;
            }
            _ => {}
        }
        let mut st = self.state.lock().unwrap();
        if t.namespaced
            && !st
                .objects
                .get("/namespaces")
                .is_some_and(|b| b.contains_key(&(String::new(), ns.clone())))
        {
            return Err(ApiError::not_found("", "namespaces", &ns));
        }
        let bucket_key = t.key();
        if st
            .objects
            .get(&bucket_key)
            .is_some_and(|b| b.contains_key(&(ns.clone(), name.clone())))
        {
            return Err(ApiError::already_exists(&t.group, &t.plural, &name));
        }
        if dry {
            obj["apiVersion"] = json!(t.api_version());
            obj["kind"] = json!(t.kind);
            return Ok((obj, warnings));
        }
        let rv = st.next_rv();
        let m = &mut obj["metadata"];
        m["uid"] = json!(new_uid());
        m["resourceVersion"] = json!(rv.to_string());
        m["creationTimestamp"] = json!(now_rfc3339());
        if let Some(mm) = m.as_object_mut() {
            mm.remove("deletionTimestamp");
            mm.remove("deletionGracePeriodSeconds");
            mm.remove("managedFields");
        }
        if t.has_status() || t.crd.is_some() {
            m["generation"] = json!(1);
        }
        obj["apiVersion"] = json!(t.api_version());
        obj["kind"] = json!(t.kind);
        st.bucket(&bucket_key).insert((ns, name), obj.clone());
        let ev = Arc::new(Event {
            rv,
            key: bucket_key,
            kind: "ADDED",
            obj: obj.clone(),
            old: None,
        });
        st.record(ev.clone());
        // Sent under the lock so watchers get events in resourceVersion order.
        let _ = self.events.send(ev);
        drop(st);
        warnings.dedup();
        Ok((obj, warnings))
    }

    /// The first master node by name (label `node-role.kubernetes.io/master` or
    /// `node-role.kubernetes.io/control-plane`), where the scheduler would put a pod.
    fn a_master_node(&self) -> Option<String> {
        let st = self.state.lock().unwrap();
        let nodes = st.objects.get("/nodes")?;
        nodes
            .values()
            .filter(|n| {
                let l = &n["metadata"]["labels"];
                !l["node-role.kubernetes.io/master"].is_null()
                    || !l["node-role.kubernetes.io/control-plane"].is_null()
            })
            .filter_map(|n| n["metadata"]["name"].as_str().map(str::to_string))
            .min()
    }

    /// PUT (main resource or a subresource). `from_patch`: resourceVersion only checked when given.
    fn update(
        &self,
        t: &Arc<ResourceType>,
        tg: &Target,
        mut obj: Value,
        mode: FieldValidation,
        dry: bool,
    ) -> Result<(Value, Vec<String>), ApiError> {
        let name = tg.name.clone().unwrap_or_default();
        if !obj.is_object() {
            return Err(ApiError::bad_request(
                "the body of the request must be a JSON object",
            ));
        }
        check_kind(t, &obj)?;
        self.go_decode(t, &obj)?;
        match obj["metadata"]["name"].as_str() {
            Some(n) if n != name => {
                return Err(ApiError::bad_request(format!(
                    "the name of the object ({n}) does not match the name on the URL ({name})"
                )));
            }
            _ => {}
        }
        if !obj["metadata"].is_object() {
            obj["metadata"] = json!({});
        }
        obj["metadata"]["name"] = json!(name);
        let ns = if t.namespaced {
            tg.namespace.clone().unwrap_or_default()
        } else {
            String::new()
        };
        if t.namespaced {
            match obj["metadata"]["namespace"].as_str() {
                Some(n) if !n.is_empty() && n != ns => {
                    return Err(ApiError::bad_request("the namespace of the provided object does not match the namespace sent on the request"));
                }
                _ => obj["metadata"]["namespace"] = json!(ns),
            }
        }
        let warnings = self.validate(t, &mut obj, mode)?;
        normalize(t, &mut obj)?;
        check_meta_labels(t, &obj)?;
        check_data_size(t, &obj)?;
        let bucket_key = t.key();
        let old = {
            let st = self.state.lock().unwrap();
            st.objects
                .get(&bucket_key)
                .and_then(|b| b.get(&(ns.clone(), name.clone())))
                .cloned()
        }
        .ok_or_else(|| ApiError::not_found(&t.group, &t.plural, &name))?;
        if let Some(rv) = obj["metadata"]["resourceVersion"]
            .as_str()
            .filter(|s| !s.is_empty())
        {
            if Some(rv) != old["metadata"]["resourceVersion"].as_str() {
                return Err(ApiError::conflict(&t.group, &t.plural, &name));
            }
        }
        let sub = tg.sub.as_deref();
        let is_csr = t.group == "certificates.k8s.io" && t.plural == "certificatesigningrequests";
        let mut new = match sub {
            Some("status") | Some("approval") => {
                // Only status changes; everything else stays.
                let mut n = old.clone();
                n["status"] = obj["status"].clone();
                if n["status"].is_null() {
                    if let Some(o) = n.as_object_mut() {
                        o.remove("status");
                    }
                }
                n
            }
            _ => {
                let mut n = obj.clone();
                if t.has_status() {
                    match old.get("status") {
                        Some(s) => n["status"] = s.clone(),
                        None => {
                            if let Some(o) = n.as_object_mut() {
                                o.remove("status");
                            }
                        }
                    }
                }
                if is_csr {
                    n["spec"] = old["spec"].clone();
                }
                n
            }
        };
        if is_csr {
            csr_condition_rules(&old, &mut new, sub, &name)?;
        }
        if t.group == "apiextensions.k8s.io" && t.plural == "customresourcedefinitions" && sub.is_none() {
            let types = registry::types_from_crd(&new).map_err(|errs| crd_invalid(&name, errs))?;
            if !dry
                && (new["spec"]["names"] != old["spec"]["names"]
                    || new["spec"]["versions"] != old["spec"]["versions"]
                    || new["spec"]["scope"] != old["spec"]["scope"])
            {
                let mut st = self.state.lock().unwrap();
                st.registry.remove_crd(&name);
                for ty in types {
                    st.registry.add(ty);
                }
                st.types_generation += 1;
            }
            crd_status(&mut new);
        }
        // Metadata the client cannot change.
        for k in [
            "uid",
            "creationTimestamp",
            "generation",
            "deletionTimestamp",
            "deletionGracePeriodSeconds",
        ] {
            match old["metadata"].get(k) {
                Some(v) => new["metadata"][k] = v.clone(),
                None => {
                    if let Some(m) = new["metadata"].as_object_mut() {
                        m.remove(k);
                    }
                }
            }
        }
        if sub.is_none() && (t.has_status() || t.crd.is_some()) {
            let strip = |v: &Value| {
                let mut v = v.clone();
                if let Some(o) = v.as_object_mut() {
                    o.remove("metadata");
                    o.remove("status");
                    o.remove("apiVersion");
                    o.remove("kind");
                }
                v
            };
            if strip(&old) != strip(&new) {
                new["metadata"]["generation"] =
                    json!(old["metadata"]["generation"].as_i64().unwrap_or(1) + 1);
            }
        }
        new["apiVersion"] = json!(t.api_version());
        new["kind"] = json!(t.kind);
        let mut st = self.state.lock().unwrap();
        // Re-check under the lock: a concurrent writer may have won.
        let cur = st
            .objects
            .get(&bucket_key)
            .and_then(|b| b.get(&(ns.clone(), name.clone())))
            .cloned();
        let Some(cur) = cur else {
            return Err(ApiError::not_found(&t.group, &t.plural, &name));
        };
        if cur["metadata"]["resourceVersion"] != old["metadata"]["resourceVersion"] {
            return Err(ApiError::conflict(&t.group, &t.plural, &name));
        }
        let mut cmp_new = new.clone();
        cmp_new["metadata"]["resourceVersion"] = cur["metadata"]["resourceVersion"].clone();
        if cmp_new == cur {
            // No-op update: the real server keeps the resourceVersion and sends no event.
            return Ok((with_api_version(&cur, t), warnings));
        }
        if dry {
            return Ok((new, warnings));
        }
        let rv = st.next_rv();
        new["metadata"]["resourceVersion"] = json!(rv.to_string());
        // An object being deleted goes away once its last finalizer is removed.
        let finalized = !new["metadata"]["deletionTimestamp"].is_null()
            && new["metadata"]["finalizers"]
                .as_array()
                .is_none_or(|f| f.is_empty());
        if finalized {
            st.bucket(&bucket_key).remove(&(ns, name));
            let ev = Arc::new(Event {
                rv,
                key: bucket_key,
                kind: "DELETED",
                obj: new.clone(),
                old: None,
            });
            st.record(ev.clone());
            let _ = self.events.send(ev);
            return Ok((new, warnings));
        }
        st.bucket(&bucket_key).insert((ns, name), new.clone());
        let ev = Arc::new(Event {
            rv,
            key: bucket_key,
            kind: "MODIFIED",
            obj: new.clone(),
            old: Some(cur),
        });
        st.record(ev.clone());
        // Sent under the lock so watchers get events in resourceVersion order.
        let _ = self.events.send(ev);
        drop(st);
        Ok((new, warnings))
    }

    fn patch(
        &self,
        t: &Arc<ResourceType>,
        tg: &Target,
        body: &[u8],
        ctype: &str,
        mode: FieldValidation,
        dry: bool,
    ) -> Result<(Value, Vec<String>), ApiError> {
        // apiserver applies a patch inside GuaranteedUpdate: when the object changed between
        // the read and the write and the patch itself names no resourceVersion, it reads again
        // and re-applies instead of answering 409 (a kubelet's status patch racing a label
        // patch must not fail).
        let names_rv = String::from_utf8_lossy(body).contains("resourceVersion");
        let mut tries = 0;
        loop {
            match self.patch_once(t, tg, body, ctype, mode, dry) {
                Err(e) if e.code == 409 && !names_rv && tries < 5 => tries += 1,
                r => return r,
            }
        }
    }

    fn patch_once(
        &self,
        t: &Arc<ResourceType>,
        tg: &Target,
        body: &[u8],
        ctype: &str,
        mode: FieldValidation,
        dry: bool,
    ) -> Result<(Value, Vec<String>), ApiError> {
        let cur = self.get_obj(t, tg)?;
        let ct = ctype.split(';').next().unwrap_or("").trim();
        let patched = match ct {
            "application/merge-patch+json" | "application/strategic-merge-patch+json" => {
                let mut p: Value = serde_json::from_slice(body)
                    .map_err(|e| ApiError::bad_request(format!("error decoding patch: {e}")))?;
                if ct.starts_with("application/strategic") {
                    strip_smp_directives(&mut p);
                }
                let mut c = cur.clone();
                merge_patch(&mut c, &p);
                c
            }
            "application/json-patch+json" => {
                let ops: Vec<Value> = serde_json::from_slice(body)
                    .map_err(|e| ApiError::bad_request(format!("error decoding patch: {e}")))?;
                // apiserver's jsonPatcher: a patch that does not apply is a 422.
                json_patch(&cur, &ops).map_err(ApiError::unprocessable)?
            }
            other => return Err(ApiError::unsupported_media(other)),
        };
        // The current resourceVersion stays in the patched object unless the patch sets
        // another one, which then acts as a precondition (409 when stale), as on the real server.
        let mut patched = patched;
        if !patched["metadata"].is_object() {
            patched["metadata"] = json!({});
        }
        self.update(t, tg, patched, mode, dry)
    }

    /// Deletes one object; namespaces take their contents with them, CRDs their types and objects.
    pub fn delete(&self, t: &ResourceType, url_ns: Option<&str>, name: &str) -> Result<Value, ApiError> {
        let ns = if t.namespaced {
            url_ns.unwrap_or("").to_string()
        } else {
            String::new()
        };
        let mut st = self.state.lock().unwrap();
        let key = t.key();
        // Finalizers: the object stays, marked with deletionTimestamp, until they are removed
        // (then `update` drops it). Namespaces and CRDs are removed at once with their contents.
        let cascading =
            (t.group.is_empty() && t.plural == "namespaces") || t.plural == "customresourcedefinitions";
        if !cascading {
            if let Some(cur) = st
                .objects
                .get(&key)
                .and_then(|b| b.get(&(ns.clone(), name.to_string())))
                .cloned()
            {
                if cur["metadata"]["finalizers"]
                    .as_array()
                    .is_some_and(|f| !f.is_empty())
                {
                    if !cur["metadata"]["deletionTimestamp"].is_null() {
                        return Ok(with_api_version(&cur, t));
                    }
                    let mut marked = cur.clone();
                    let rv = st.next_rv();
                    marked["metadata"]["deletionTimestamp"] = json!(now_rfc3339());
                    marked["metadata"]["deletionGracePeriodSeconds"] = json!(0);
                    marked["metadata"]["resourceVersion"] = json!(rv.to_string());
                    st.bucket(&key).insert((ns, name.to_string()), marked.clone());
                    let ev = Arc::new(Event {
                        rv,
                        key,
                        kind: "MODIFIED",
                        obj: marked.clone(),
                        old: Some(cur),
                    });
                    st.record(ev.clone());
                    let _ = self.events.send(ev);
                    return Ok(with_api_version(&marked, t));
                }
            }
        }
        let Some(mut old) = st
            .objects
            .get_mut(&key)
            .and_then(|b| b.remove(&(ns.clone(), name.to_string())))
        else {
            return Err(ApiError::not_found(&t.group, &t.plural, name));
        };
        let mut evs = Vec::new();
        let rv = st.next_rv();
        old["metadata"]["resourceVersion"] = json!(rv.to_string());
        evs.push(Arc::new(Event {
            rv,
            key: key.clone(),
            kind: "DELETED",
            obj: old.clone(),
            old: None,
        }));
        let mut cascade: Vec<(String, (String, String))> = Vec::new();
        if t.group.is_empty() && t.plural == "namespaces" {
            for (k, b) in &st.objects {
                for (id, _) in b.iter().filter(|((n, _), _)| n == name) {
                    cascade.push((k.clone(), id.clone()));
                }
            }
        }
        if t.group == "apiextensions.k8s.io" && t.plural == "customresourcedefinitions" {
            let g = old["spec"]["group"].as_str().unwrap_or("").to_string();
            let p = old["spec"]["names"]["plural"].as_str().unwrap_or("").to_string();
            let k = format!("{g}/{p}");
            if let Some(b) = st.objects.get(&k) {
                for id in b.keys() {
                    cascade.push((k.clone(), id.clone()));
                }
            }
            st.registry.remove_crd(name);
            st.types_generation += 1;
        }
        for (k, id) in cascade {
            if let Some(mut o) = st.objects.get_mut(&k).and_then(|b| b.remove(&id)) {
                let rv = st.next_rv();
                o["metadata"]["resourceVersion"] = json!(rv.to_string());
                evs.push(Arc::new(Event {
                    rv,
                    key: k.clone(),
                    kind: "DELETED",
                    obj: o,
                    old: None,
                }));
            }
        }
        for ev in evs {
            st.record(ev.clone());
            let _ = self.events.send(ev);
        }
        drop(st);
        Ok(with_api_version(&old, t))
    }

    /// Creates an object of any served kind (seeding, scenario objects, `--crds` files); an
    /// existing object of the same name is replaced.
    pub fn create_any(&self, obj: Value) -> anyhow::Result<()> {
        let av = obj["apiVersion"].as_str().unwrap_or("").to_string();
        let kind = obj["kind"].as_str().unwrap_or("").to_string();
        let t = self
            .state
            .lock()
            .unwrap()
            .registry
            .by_kind(&av, &kind)
            .ok_or_else(|| anyhow::anyhow!("no served resource for apiVersion {av:?} kind {kind:?}"))?;
        let ns = obj["metadata"]["namespace"].as_str().map(str::to_string);
        let name = obj["metadata"]["name"].as_str().unwrap_or("").to_string();
        if !name.is_empty() {
            let _ = self.delete(&t, ns.as_deref(), &name);
        }
        let status = obj.get("status").cloned();
        let (created, _) = self
            .create(&t, ns.as_deref(), obj, FieldValidation::Ignore, None, false)
            .map_err(|e| {
                anyhow::anyhow!(
                    "creating {kind} {name:?}: {}",
                    e.body["message"].as_str().unwrap_or("")
                )
            })?;
        // Seeds carry their status (nodes Ready, ClusterVersion history): write it as the
        // status subresource would.
        if let (Some(s), true) = (status, t.has_status()) {
            let mut st = self.state.lock().unwrap();
            let cns = created["metadata"]["namespace"]
                .as_str()
                .unwrap_or("")
                .to_string();
            let cname = created["metadata"]["name"].as_str().unwrap_or("").to_string();
            if let Some(o) = st.bucket(&t.key()).get_mut(&(cns, cname)) {
                if t.group == "apiextensions.k8s.io" {
                    return Ok(());
                }
                o["status"] = s;
            }
        }
        Ok(())
    }

    /// Sets a CSR's status through the same path as `PUT /status` (used by the signer).
    fn write_csr_status(&self, name: &str, status: Value) -> Result<(), ApiError> {
        let t = self
            .state
            .lock()
            .unwrap()
            .registry
            .get("certificates.k8s.io", "v1", "certificatesigningrequests")
            .ok_or_else(ApiError::no_route)?;
        let tg = Target {
            t: t.clone(),
            namespace: None,
            name: Some(name.into()),
            sub: Some("status".into()),
        };
        let mut cur = self.get_obj(&t, &tg)?;
        cur["status"] = status;
        self.update(&t, &tg, cur, FieldValidation::Ignore, false)
            .map(|_| ())
    }

    /// The CSR signer (kube-controller-manager's csrsigning for the kubelet signers): issues a
    /// certificate for every Approved kubelet CSR that passes Kubernetes' kubelet checks, and
    /// marks the others Failed (reason SignerValidationFailure). Runs until the channel closes.
    pub async fn run_signer(self: Arc<Self>) {
        let mut rx = self.events.subscribe();
        // CSRs approved before the signer subscribed.
        let pending: Vec<String> = {
            let st = self.state.lock().unwrap();
            st.objects
                .get("certificates.k8s.io/certificatesigningrequests")
                .map(|b| {
                    b.values()
                        .map(|o| o["metadata"]["name"].as_str().unwrap_or("").to_string())
                        .collect()
                })
                .unwrap_or_default()
        };
        for n in pending {
            self.sign_one(&n);
        }
        loop {
            match rx.recv().await {
                Ok(ev)
                    if ev.key == "certificates.k8s.io/certificatesigningrequests" && ev.kind != "DELETED" =>
                {
                    let n = ev.obj["metadata"]["name"].as_str().unwrap_or("").to_string();
                    self.sign_one(&n);
                }
                Ok(_) => {}
                Err(broadcast::error::RecvError::Lagged(_)) => continue,
                Err(_) => return,
            }
        }
    }

    fn sign_one(&self, name: &str) {
        let obj = {
            let st = self.state.lock().unwrap();
            st.objects
                .get("certificates.k8s.io/certificatesigningrequests")
                .and_then(|b| b.get(&(String::new(), name.to_string())))
                .cloned()
        };
        let Some(obj) = obj else { return };
        let conds = obj["status"]["conditions"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        let has = |ty: &str| conds.iter().any(|c| c["type"] == ty && c["status"] != "False");
        if !has("Approved") || has("Denied") || has("Failed") {
            return;
        }
        if obj["status"]["certificate"]
            .as_str()
            .is_some_and(|c| !c.is_empty())
        {
            return;
        }
        let mut status = obj["status"].clone();
        match super::csr_signer::kubelet_check(&obj) {
            Err(e) if e == "signer not handled" => return,
            Err(e) => {
                let mut c = conds.clone();
                c.push(json!({"type": "Failed", "status": "True", "reason": super::csr_signer::SIGNER_VALIDATION_FAILURE,
                              "message": e, "lastUpdateTime": now_rfc3339(), "lastTransitionTime": now_rfc3339()}));
                status["conditions"] = json!(c);
            }
            Ok(()) => match super::csr_signer::sign(
                &obj,
                &self.ca_cert_pem,
                &self.ca_key_pem,
                std::time::SystemTime::now(),
            ) {
                Ok(pem) => {
                    use base64::Engine;
                    status["certificate"] =
                        json!(base64::engine::general_purpose::STANDARD.encode(pem.as_bytes()));
                }
                Err(e) => {
                    let mut c = conds.clone();
                    c.push(json!({"type": "Failed", "status": "True", "reason": "SignerFailure",
                                  "message": e.to_string(), "lastUpdateTime": now_rfc3339(), "lastTransitionTime": now_rfc3339()}));
                    status["conditions"] = json!(c);
                }
            },
        }
        if let Err(e) = self.write_csr_status(name, status) {
            tracing::warn!("signer: cannot update CSR {name}: {}", e.body["message"]);
        }
    }
}

/// The event a selector-filtered watch sees (the cacher's rule): an object entering the
/// selection is ADDED, one leaving it DELETED, None when neither version matches.
/// The status of a pod that started at once: phase Running, conditions true, every container
/// running and ready (a made-up pod IP and container ids).
pub fn running_pod_status(pod: &Value) -> Value {
    let now = now_rfc3339();
    let statuses: Vec<Value> = pod["spec"]["containers"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|c| {
            json!({
                "name": c["name"],
                "image": c["image"],
                "imageID": "",
                "containerID": format!("cri-o://{}", hex::encode(random_bytes::<32>())),
                "ready": true,
                "started": true,
                "restartCount": 0,
                "state": {"running": {"startedAt": now}},
            })
        })
        .collect();
    let b = random_bytes::<2>();
    let cond =
        |t: &str| json!({"type": t, "status": "True", "lastProbeTime": null, "lastTransitionTime": now});
    json!({
        "phase": "Running",
        "conditions": [cond("PodReadyToStartContainers"), cond("Initialized"), cond("Ready"), cond("ContainersReady"), cond("PodScheduled")],
        "podIP": format!("10.128.{}.{}", b[0], b[1].max(2)),
        "startTime": now,
        "qosClass": "BestEffort",
        "containerStatuses": statuses,
    })
}

fn event_type_for(ev: &Event, matches: &impl Fn(&Value) -> bool) -> Option<&'static str> {
    let now = matches(&ev.obj);
    match (ev.kind, ev.old.as_ref().map(matches)) {
        ("MODIFIED", Some(before)) => match (before, now) {
            (true, true) => Some("MODIFIED"),
            (false, true) => Some("ADDED"),
            (true, false) => Some("DELETED"),
            (false, false) => None,
        },
        (k, _) => now.then_some(k),
    }
}

fn nonresource_forbidden(user: &UserInfo, path: &str) -> ApiError {
    let mut e = ApiError::forbidden(&user.name, "get", "", "", None, None, None);
    e.body["message"] = json!(format!(
        "forbidden: User \"{}\" cannot get path \"{path}\"",
        user.name
    ));
    e.body["details"] = json!({});
    e
}

/// Write-time normalisation the real registry strategies do: Secrets fold `stringData` into
/// `data` (base64) and require base64 `data` (`Secret in version "v1" cannot be handled as a
/// Secret: illegal base64 data at input byte N`), default `type: Opaque`.
fn normalize(t: &ResourceType, obj: &mut Value) -> Result<(), ApiError> {
    use base64::Engine;
    if t.group.is_empty() && t.plural == "secrets" {
        let b64 = base64::engine::general_purpose::STANDARD;
        if let Some(data) = obj["data"].as_object() {
            for v in data.values() {
                let s = v.as_str().unwrap_or("");
                if let Err(e) = b64.decode(s) {
                    let at = match e {
                        base64::DecodeError::InvalidByte(i, _)
                        | base64::DecodeError::InvalidLastSymbol(i, _) => i,
                        _ => s.len(),
                    };
                    return Err(ApiError::bad_request(format!(
                        "Secret in version \"v1\" cannot be handled as a Secret: illegal base64 data at input byte {at}"
                    )));
                }
            }
        }
        if let Some(sd) = obj.as_object_mut().and_then(|o| o.remove("stringData")) {
            if let Some(m) = sd.as_object() {
                if !obj["data"].is_object() {
                    obj["data"] = json!({});
                }
                for (k, v) in m {
                    obj["data"][k] = json!(b64.encode(v.as_str().unwrap_or("")));
                }
            }
        }
        if obj["type"].as_str().unwrap_or("").is_empty() {
            obj["type"] = json!("Opaque");
        }
    }
    Ok(())
}

/// DeleteOptions preconditions (`uid`, `resourceVersion`): 409 Conflict when they do not hold.
fn check_preconditions(t: &ResourceType, name: &str, cur: &Value, pre: &Value) -> Result<(), ApiError> {
    if let Some(uid) = pre["uid"].as_str() {
        let have = cur["metadata"]["uid"].as_str().unwrap_or("");
        if uid != have {
            return Err(ApiError::conflict_msg(
                &t.group,
                &t.plural,
                name,
                &format!("Precondition failed: UID in precondition: {uid}, UID in object meta: {have}"),
            ));
        }
    }
    if let Some(rv) = pre["resourceVersion"].as_str() {
        let have = cur["metadata"]["resourceVersion"].as_str().unwrap_or("");
        if rv != have {
            return Err(ApiError::conflict_msg(&t.group, &t.plural, name, &format!("Precondition failed: ResourceVersion in precondition: {rv}, ResourceVersion in object meta: {have}")));
        }
    }
    Ok(())
}

fn obj_key(o: &Value) -> String {
    format!(
        "{}/{}",
        o["metadata"]["namespace"].as_str().unwrap_or(""),
        o["metadata"]["name"].as_str().unwrap_or("")
    )
}

fn with_api_version(o: &Value, t: &ResourceType) -> Value {
    let mut o = o.clone();
    o["apiVersion"] = json!(t.api_version());
    o["kind"] = json!(t.kind);
    o
}

fn parse_body(body: &[u8], ctype: &str) -> Result<Value, ApiError> {
    let ct = ctype.split(';').next().unwrap_or("").trim();
    if ct.contains("yaml") {
        let s = std::str::from_utf8(body).map_err(|e| ApiError::bad_request(e.to_string()))?;
        return serde_saphyr::from_str(s)
            .map_err(|e| ApiError::bad_request(format!("error decoding YAML: {e}")));
    }
    if ct.contains("protobuf") {
        return Err(ApiError::unsupported_media(ct));
    }
    serde_json::from_slice(body)
        .map_err(|e| ApiError::bad_request(format!("couldn't get version/kind; json parse error: {e}")))
}

fn field_validation(q: &Query) -> Result<FieldValidation, ApiError> {
    FieldValidation::from_query(q.get("fieldValidation")).map_err(ApiError::bad_request)
}

fn check_kind(t: &ResourceType, obj: &Value) -> Result<(), ApiError> {
    let kind = obj["kind"].as_str().unwrap_or("");
    let av = obj["apiVersion"].as_str().unwrap_or("");
    if !kind.is_empty() && kind != t.kind {
        // The decoder reads the body as its own kind, then fails to convert it to the URL's
        // internal type; transformDecodeError (apiserver handlers/rest.go) wraps that:
        // `Secret in version "v1" cannot be handled as a ConfigMap: converting (v1.Secret) to
        // (core.ConfigMap): unknown conversion`.
        let version = av.rsplit('/').next().unwrap_or(av);
        let internal_pkg = if t.group.is_empty() {
            "core"
        } else {
            t.group.split('.').next().unwrap_or("")
        };
        return Err(ApiError::bad_request(format!(
            "{kind} in version {version:?} cannot be handled as a {want}: converting ({version}.{kind}) to ({internal_pkg}.{want}): unknown conversion",
            want = t.kind
        )));
    }
    if !av.is_empty() && av != t.api_version() {
        return Err(ApiError::bad_request(format!(
            "the API version in the data ({av}) does not match the expected API version ({})",
            t.api_version()
        )));
    }
    Ok(())
}

/// Name rules of `ValidateObjectMeta` per kind: namespaces are DNS-1123 labels
/// (`ValidateNamespaceName`), CSRs any path segment (`ValidateCertificateRequestName`), every
/// other kind served here (ConfigMap, Secret, Node, Pod, ServiceAccount, Event, CRDs and custom
/// resources) a DNS-1123 subdomain (`NameIsDNSSubdomain`: at most 253 characters matching the
/// regex; no per-label length limit). Each failed rule is one cause, as `nameFn` returns a list
/// (apimachinery `pkg/util/validation`: `MaxLenError`, `RegexError`).
fn check_name(t: &ResourceType, name: &str) -> Result<(), ApiError> {
    let label_re = |l: &str| {
        !l.is_empty()
            && l.chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
            && !l.starts_with('-')
            && !l.ends_with('-')
    };
    let mut msgs: Vec<&str> = Vec::new();
    if t.group.is_empty() && t.plural == "namespaces" {
        if name.len() > 63 {
            msgs.push("must be no more than 63 characters");
        }
        if !label_re(name) {
            msgs.push("a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')");
        }
    } else if t.group == "certificates.k8s.io" && t.plural == "certificatesigningrequests" {
        if name == "." || name == ".." {
            msgs.push("may not be '.' or '..'");
        } else if name.contains('/') {
            msgs.push("may not contain '/'");
        } else if name.contains('%') {
            msgs.push("may not contain '%'");
        }
    } else {
        if name.len() > 253 {
            msgs.push("must be no more than 253 characters");
        }
        if !name.split('.').all(label_re) {
            msgs.push("a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')");
        }
    }
    if msgs.is_empty() {
        Ok(())
    } else {
        let causes: Vec<FieldCause> = msgs
            .iter()
            .map(|m| super::status::invalid_value("metadata.name", &json!(name), m))
            .collect();
        Err(ApiError::invalid(&t.group, &t.kind, name, &causes))
    }
}

fn crd_invalid(name: &str, errs: Vec<(String, String)>) -> ApiError {
    let causes: Vec<FieldCause> = errs
        .into_iter()
        .map(|(f, m)| FieldCause {
            reason: if m.starts_with("Required") {
                "FieldValueRequired".into()
            } else {
                "FieldValueInvalid".into()
            },
            message: m,
            field: f,
        })
        .collect();
    ApiError::invalid("apiextensions.k8s.io", "CustomResourceDefinition", name, &causes)
}

/// Status of an accepted CRD: NamesAccepted and Established True, acceptedNames, storedVersions.
fn crd_status(obj: &mut Value) {
    let now = now_rfc3339();
    let mut names = obj["spec"]["names"].clone();
    if names["singular"].is_null() {
        names["singular"] = json!(names["kind"].as_str().unwrap_or("").to_lowercase());
    }
    if names["listKind"].is_null() {
        names["listKind"] = json!(format!("{}List", names["kind"].as_str().unwrap_or("")));
    }
    let stored: Vec<Value> = obj["spec"]["versions"]
        .as_array()
        .map(|vs| {
            vs.iter()
                .filter(|v| v["storage"] == true)
                .map(|v| v["name"].clone())
                .collect()
        })
        .unwrap_or_default();
    let old_stored = obj["status"]["storedVersions"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let mut all = old_stored;
    for s in stored {
        if !all.contains(&s) {
            all.push(s);
        }
    }
    obj["status"] = json!({
        "acceptedNames": names,
        "conditions": [
            {"type": "NamesAccepted", "status": "True", "reason": "NoConflicts", "message": "no conflicts found", "lastTransitionTime": now},
            {"type": "Established", "status": "True", "reason": "InitialNamesAccepted", "message": "the initial names have been accepted", "lastTransitionTime": now},
        ],
        "storedVersions": all,
    });
}

/// Create-time CSR validation (`k8s.io/kubernetes/pkg/apis/certificates/validation`):
/// request is a PEM CERTIFICATE REQUEST, signerName set, usages known.
fn validate_csr_spec(obj: &Value, name: &str) -> Result<(), ApiError> {
    use base64::Engine;
    let mut causes = Vec::new();
    let req = obj["spec"]["request"].as_str().unwrap_or("");
    let pem_ok = base64::engine::general_purpose::STANDARD
        .decode(req)
        .ok()
        .map(|b| String::from_utf8_lossy(&b).contains("-----BEGIN CERTIFICATE REQUEST-----"))
        .unwrap_or(false);
    if req.is_empty() {
        causes.push(super::status::required("spec.request", ""));
    } else if !pem_ok {
        causes.push(super::status::invalid_value(
            "spec.request",
            &json!([]),
            "PEM block type must be CERTIFICATE REQUEST",
        ));
    }
    let signer = obj["spec"]["signerName"].as_str().unwrap_or("");
    if signer.is_empty() {
        causes.push(super::status::required("spec.signerName", ""));
    } else if !signer.contains('/') {
        causes.push(super::status::invalid_value(
            "spec.signerName",
            &json!(signer),
            "must be a fully qualified domain and path of the form 'example.com/signer-name'",
        ));
    }
    if let Some(secs) = obj["spec"]["expirationSeconds"].as_i64() {
        if secs < 600 {
            causes.push(super::status::invalid_value(
                "spec.expirationSeconds",
                &json!(secs),
                "may not specify a duration less than 600 seconds (10 minutes)",
            ));
        }
    }
    const USAGES: &[&str] = &[
        "signing",
        "digital signature",
        "content commitment",
        "key encipherment",
        "key agreement",
        "data encipherment",
        "cert sign",
        "crl sign",
        "encipher only",
        "decipher only",
        "any",
        "server auth",
        "client auth",
        "code signing",
        "email protection",
        "s/mime",
        "ipsec end system",
        "ipsec tunnel",
        "ipsec user",
        "timestamping",
        "ocsp signing",
        "microsoft sgc",
        "netscape sgc",
    ];
    match obj["spec"]["usages"].as_array() {
        None => causes.push(super::status::required("spec.usages", "")),
        Some(us) => {
            for (i, u) in us.iter().enumerate() {
                let s = u.as_str().unwrap_or("");
                if !USAGES.contains(&s) {
                    causes.push(FieldCause {
                        reason: "FieldValueNotSupported".into(),
                        message: format!(
                            "Unsupported value: {s:?}: supported values: {}",
                            USAGES
                                .iter()
                                .map(|u| format!("{u:?}"))
                                .collect::<Vec<_>>()
                                .join(", ")
                        ),
                        field: format!("spec.usages[{i}]"),
                    });
                }
            }
        }
    }
    if causes.is_empty() {
        Ok(())
    } else {
        Err(ApiError::invalid(
            "certificates.k8s.io",
            "CertificateSigningRequest",
            name,
            &causes,
        ))
    }
}

/// Condition rules of `certificates.k8s.io` (validation.go `validateConditions` and the
/// approval/status strategies): Approved/Denied only through `/approval`, not both, never
/// removed; `/status` keeps the approval conditions; the certificate only through `/status`.
fn csr_condition_rules(old: &Value, new: &mut Value, sub: Option<&str>, name: &str) -> Result<(), ApiError> {
    let conds = |v: &Value| v["status"]["conditions"].as_array().cloned().unwrap_or_default();
    let is_approval = |c: &Value| c["type"] == "Approved" || c["type"] == "Denied";
    let old_c = conds(old);
    let mut new_c = conds(new);
    match sub {
        Some("approval") => {
            // csrApprovalStrategy.PrepareForUpdate: the request's whole condition list is taken
            // (custom condition types included); the certificate stays.
            new["status"]["certificate"] = old["status"]["certificate"].clone();
            if new["status"]["certificate"].is_null() {
                if let Some(s) = new["status"].as_object_mut() {
                    s.remove("certificate");
                }
            }
        }
        Some("status") => {
            let mut merged: Vec<Value> = old_c.iter().filter(|c| is_approval(c)).cloned().collect();
            merged.extend(new_c.iter().filter(|c| !is_approval(c)).cloned());
            new_c = merged;
        }
        _ => {
            new_c = old_c.clone();
            new["status"] = old["status"].clone();
        }
    }
    for c in new_c.iter_mut() {
        if c["status"].is_null() {
            c["status"] = json!("True");
        }
        if c["lastUpdateTime"].is_null() {
            c["lastUpdateTime"] = json!(now_rfc3339());
        }
        if c["lastTransitionTime"].is_null() {
            c["lastTransitionTime"] = json!(now_rfc3339());
        }
    }
    let mut causes = Vec::new();
    let has = |ty: &str| new_c.iter().any(|c| c["type"] == ty && c["status"] == "True");
    if has("Approved") && has("Denied") {
        let idx = new_c.iter().position(|c| c["type"] == "Denied").unwrap_or(0);
        causes.push(FieldCause {
            reason: "FieldValueInvalid".into(),
            message: "Invalid value: \"Denied\": Approved and Denied conditions are mutually exclusive"
                .into(),
            field: format!("status.conditions[{idx}].type"),
        });
    }
    for ty in ["Approved", "Denied"] {
        let had = old_c.iter().any(|c| c["type"] == ty);
        let still = new_c.iter().any(|c| c["type"] == ty);
        if had && !still {
            causes.push(FieldCause {
                reason: "FieldValueForbidden".into(),
                message: format!("Forbidden: updates may not remove a condition of type \"{ty}\""),
                field: "status.conditions".into(),
            });
        }
    }
    // validateConditions (pkg/apis/certificates/validation): a type is required, status is
    // True/False/Unknown, and Approved, Denied and Failed may only be "True".
    for (i, c) in new_c.iter().enumerate() {
        let ty = c["type"].as_str().unwrap_or("");
        let st = c["status"].as_str().unwrap_or("");
        if ty.is_empty() {
            causes.push(super::status::required(
                &format!("status.conditions[{i}].type"),
                "",
            ));
        }
        if !matches!(st, "True" | "False" | "Unknown") {
            causes.push(FieldCause {
                reason: "FieldValueNotSupported".into(),
                message: format!(
                    "Unsupported value: {st:?}: supported values: \"False\", \"True\", \"Unknown\""
                ),
                field: format!("status.conditions[{i}].status"),
            });
        }
        if matches!(ty, "Approved" | "Denied" | "Failed") && st != "True" {
            causes.push(FieldCause {
                reason: "FieldValueNotSupported".into(),
                message: format!("Unsupported value: {st:?}: supported values: \"True\""),
                field: format!("status.conditions[{i}].status"),
            });
        }
    }
    let mut seen = Vec::new();
    for (i, c) in new_c.iter().enumerate() {
        let ty = c["type"].as_str().unwrap_or("").to_string();
        if (ty == "Approved" || ty == "Denied" || ty == "Failed") && seen.contains(&ty) {
            causes.push(FieldCause {
                reason: "FieldValueDuplicate".into(),
                message: format!("Duplicate value: {ty:?}"),
                field: format!("status.conditions[{i}].type"),
            });
        }
        seen.push(ty);
    }
    if old["status"]["certificate"]
        .as_str()
        .is_some_and(|c| !c.is_empty())
        && new["status"]["certificate"] != old["status"]["certificate"]
    {
        causes.push(FieldCause {
            reason: "FieldValueForbidden".into(),
            message: "Forbidden: updates may not modify existing certificate content".into(),
            field: "status.certificate".into(),
        });
    }
    if !causes.is_empty() {
        return Err(ApiError::invalid(
            "certificates.k8s.io",
            "CertificateSigningRequest",
            name,
            &causes,
        ));
    }
    if new_c.is_empty() {
        if let Some(s) = new["status"].as_object_mut() {
            s.remove("conditions");
        }
    } else {
        if !new["status"].is_object() {
            new["status"] = json!({});
        }
        new["status"]["conditions"] = json!(new_c);
    }
    Ok(())
}

/// RFC 7386 JSON merge patch.
pub fn merge_patch(target: &mut Value, patch: &Value) {
    match patch {
        Value::Object(p) => {
            if !target.is_object() {
                *target = json!({});
            }
            let t = target.as_object_mut().expect("object");
            for (k, v) in p {
                if v.is_null() {
                    t.remove(k);
                } else {
                    merge_patch(t.entry(k.clone()).or_insert(Value::Null), v);
                }
            }
        }
        other => *target = other.clone(),
    }
}

/// Drops strategic-merge-patch directives (`$patch`, `$retainKeys`, `$setElementOrder/...`,
/// `$deleteFromPrimitiveList/...`) so the rest applies as a JSON merge patch.
fn strip_smp_directives(p: &mut Value) {
    if let Value::Object(m) = p {
        m.retain(|k, _| !k.starts_with('$'));
        for v in m.values_mut() {
            strip_smp_directives(v);
        }
    }
}

fn pointer_parts(path: &str) -> Vec<String> {
    path.split('/')
        .skip(1)
        .map(|s| s.replace("~1", "/").replace("~0", "~"))
        .collect()
}

/// RFC 6902 JSON patch (add, remove, replace, test, move, copy).
pub fn json_patch(doc: &Value, ops: &[Value]) -> Result<Value, String> {
    let mut d = doc.clone();
    for op in ops {
        let path = op["path"].as_str().ok_or("json patch: missing path")?;
        match op["op"].as_str().unwrap_or("") {
            "add" => add_at(&mut d, path, op["value"].clone())?,
            "remove" => {
                remove_at(&mut d, path)?;
            }
            "replace" => {
                remove_at(&mut d, path)?;
                add_at(&mut d, path, op["value"].clone())?;
            }
            "test" => {
                if d.pointer(path) != Some(&op["value"]) {
                    return Err(format!("testing value {path} failed"));
                }
            }
            "move" => {
                let from = op["from"].as_str().ok_or("json patch: missing from")?;
                let v = remove_at(&mut d, from)?;
                add_at(&mut d, path, v)?;
            }
            "copy" => {
                let from = op["from"].as_str().ok_or("json patch: missing from")?;
                let v = d
                    .pointer(from)
                    .cloned()
                    .ok_or(format!("json patch: {from} not found"))?;
                add_at(&mut d, path, v)?;
            }
            o => return Err(format!("Unexpected kind: {o}")),
        }
    }
    Ok(d)
}

fn add_at(d: &mut Value, path: &str, v: Value) -> Result<(), String> {
    let parts = pointer_parts(path);
    let Some((last, parent)) = parts.split_last() else {
        *d = v;
        return Ok(());
    };
    let mut cur = d;
    for p in parent {
        cur = match cur {
            Value::Object(m) => m.get_mut(p).ok_or(format!(
                "add operation does not apply: doc is missing path: \"{path}\""
            ))?,
            Value::Array(a) => a
                .get_mut(p.parse::<usize>().map_err(|e| e.to_string())?)
                .ok_or(format!("doc is missing path: {path}"))?,
            _ => return Err(format!("doc is missing path: {path}")),
        };
    }
    match cur {
        Value::Object(m) => {
            m.insert(last.clone(), v);
        }
        Value::Array(a) => {
            if last == "-" {
                a.push(v);
            } else {
                let i: usize = last.parse().map_err(|e: std::num::ParseIntError| e.to_string())?;
                if i > a.len() {
                    return Err(format!(
                        "add operation does not apply: index out of range: {path}"
                    ));
                }
                a.insert(i, v);
            }
        }
        _ => return Err(format!("doc is missing path: {path}")),
    }
    Ok(())
}

fn remove_at(d: &mut Value, path: &str) -> Result<Value, String> {
    let parts = pointer_parts(path);
    let Some((last, parent)) = parts.split_last() else {
        return Err("cannot remove the root".into());
    };
    let pp = if parent.is_empty() {
        String::new()
    } else {
        format!("/{}", parent.join("/"))
    };
    let cur = d.pointer_mut(&pp).ok_or(format!(
        "remove operation does not apply: doc is missing path: \"{path}\""
    ))?;
    match cur {
        Value::Object(m) => m.remove(last).ok_or(format!(
            "remove operation does not apply: doc is missing path: \"{path}\""
        )),
        Value::Array(a) => {
            let i: usize = last.parse().map_err(|e: std::num::ParseIntError| e.to_string())?;
            if i >= a.len() {
                return Err(format!(
                    "remove operation does not apply: doc is missing path: \"{path}\""
                ));
            }
            Ok(a.remove(i))
        }
        _ => Err(format!(
            "remove operation does not apply: doc is missing path: \"{path}\""
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn merge_patch_rfc7386() {
        let mut t = json!({"a": {"b": 1, "c": 2}, "d": [1]});
        merge_patch(&mut t, &json!({"a": {"b": null, "e": 3}, "d": [2]}));
        assert_eq!(t, json!({"a": {"c": 2, "e": 3}, "d": [2]}));
    }

    #[test]
    fn json_patch_ops() {
        let d = json!({"metadata": {"labels": {"a": "1"}}, "l": [1, 2]});
        let r = json_patch(
            &d,
            &[
                json!({"op": "add", "path": "/metadata/labels/b", "value": "2"}),
                json!({"op": "remove", "path": "/l/0"}),
                json!({"op": "add", "path": "/l/-", "value": 3}),
            ],
        )
        .unwrap();
        assert_eq!(
            r,
            json!({"metadata": {"labels": {"a": "1", "b": "2"}}, "l": [2, 3]})
        );
        assert!(json_patch(&d, &[json!({"op": "test", "path": "/l/0", "value": 9})]).is_err());
    }

    #[test]
    fn uid_is_v4() {
        let u = new_uid();
        assert_eq!(u.len(), 36);
        assert_eq!(&u[14..15], "4");
    }
}
