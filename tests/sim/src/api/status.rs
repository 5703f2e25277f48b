//! `metav1.Status` errors shaped like kube-apiserver's (`k8s.io/apimachinery/pkg/api/errors`).

use serde_json::{json, Value};

/// An error answered as a `Status` object with `code`.
#[derive(Debug, Clone)]
pub struct ApiError {
    pub code: u16,
    pub body: Value,
}

/// A field error for 422 Invalid (`metav1.StatusCause`).
#[derive(Debug, Clone)]
pub struct FieldCause {
    /// e.g. `FieldValueRequired`, `FieldValueInvalid`, `FieldValueNotSupported`.
    pub reason: String,
    /// e.g. `Required value`, `Invalid value: "x": must be ...`.
    pub message: String,
    /// e.g. `spec.releaseImage`.
    pub field: String,
}

fn status(code: u16, reason: &str, message: String, details: Option<Value>) -> ApiError {
    let mut body = json!({
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason,
    });
    if let Some(d) = details {
        body["details"] = d;
    }
    body["code"] = json!(code);
    ApiError { code, body }
}

/// `qualifiedResource` as the real server prints it: `configmaps`, `clusterimagesets.hive.openshift.io`.
pub fn qualified(group: &str, resource: &str) -> String {
    if group.is_empty() {
        resource.to_string()
    } else {
        format!("{resource}.{group}")
    }
}

fn details(group: &str, resource: &str, name: &str) -> Value {
    let mut d = serde_json::Map::new();
    if !name.is_empty() {
        d.insert("name".into(), json!(name));
    }
    if !group.is_empty() {
        d.insert("group".into(), json!(group));
    }
    d.insert("kind".into(), json!(resource));
    Value::Object(d)
}

impl ApiError {
    /// 404 `configmaps "x" not found`.
    pub fn not_found(group: &str, resource: &str, name: &str) -> ApiError {
        status(
            404,
            "NotFound",
            format!("{} \"{name}\" not found", qualified(group, resource)),
            Some(details(group, resource, name)),
        )
    }
    /// 404 for a URL no resource serves (`the server could not find the requested resource`).
    pub fn no_route() -> ApiError {
        status(
            404,
            "NotFound",
            "the server could not find the requested resource".into(),
            Some(json!({})),
        )
    }
    /// 409 AlreadyExists.
    pub fn already_exists(group: &str, resource: &str, name: &str) -> ApiError {
        status(
            409,
            "AlreadyExists",
            format!("{} \"{name}\" already exists", qualified(group, resource)),
            Some(details(group, resource, name)),
        )
    }
    /// 409 Conflict on a stale resourceVersion.
    pub fn conflict(group: &str, resource: &str, name: &str) -> ApiError {
        status(
            409,
            "Conflict",
            format!(
                "Operation cannot be fulfilled on {} \"{name}\": the object has been modified; please apply your changes to the latest version and try again",
                qualified(group, resource)
            ),
            Some(details(group, resource, name)),
        )
    }
    /// 409 Conflict with a custom message.
    pub fn conflict_msg(group: &str, resource: &str, name: &str, msg: &str) -> ApiError {
        status(
            409,
            "Conflict",
            format!(
                "Operation cannot be fulfilled on {} \"{name}\": {msg}",
                qualified(group, resource)
            ),
            Some(details(group, resource, name)),
        )
    }
    /// 403 as RBAC answers it (`k8s.io/apiserver/pkg/endpoints/handlers/responsewriters.forbiddenMessage`).
    #[allow(clippy::too_many_arguments)]
    pub fn forbidden(
        user: &str,
        verb: &str,
        group: &str,
        resource: &str,
        subresource: Option<&str>,
        namespace: Option<&str>,
        name: Option<&str>,
    ) -> ApiError {
        let res_full = match subresource {
            Some(s) => format!("{resource}/{s}"),
            None => resource.to_string(),
        };
        let q = qualified(group, resource);
        let subject = match name {
            Some(n) if !n.is_empty() => format!("{q} \"{n}\""),
            _ => q,
        };
        let scope = match namespace {
            Some(ns) if !ns.is_empty() => format!("in the namespace \"{ns}\""),
            _ => "at the cluster scope".to_string(),
        };
        let msg = format!(
            "{subject} is forbidden: User \"{user}\" cannot {verb} resource \"{res_full}\" in API group \"{group}\" {scope}"
        );
        status(
            403,
            "Forbidden",
            msg,
            Some(details(group, resource, name.unwrap_or(""))),
        )
    }
    /// 401, exactly as kube-apiserver sends it.
    pub fn unauthorized() -> ApiError {
        status(401, "Unauthorized", "Unauthorized".into(), None)
    }
    /// 400 BadRequest.
    pub fn bad_request(msg: impl Into<String>) -> ApiError {
        status(400, "BadRequest", msg.into(), None)
    }
    /// 405 MethodNotAllowed.
    pub fn method_not_allowed(msg: impl Into<String>) -> ApiError {
        status(405, "MethodNotAllowed", msg.into(), Some(json!({})))
    }
    /// 415 UnsupportedMediaType.
    pub fn unsupported_media(ct: &str) -> ApiError {
        status(415, "UnsupportedMediaType", format!("the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/strategic-merge-patch+json ({ct} is not supported by this server)"), None)
    }
    /// 504 for a list/watch from a resourceVersion the store has not reached within 3 s
    /// (apiserver `storage.NewTooLargeResourceVersionError` = `errors.NewTimeoutError` +
    /// a `ResourceVersionTooLarge` cause; the watch cache asks to retry after 1 s).
    pub fn too_large_resource_version(requested: u64, current: u64) -> ApiError {
        status(
            504,
            "Timeout",
            format!("Timeout: Too large resource version: {requested}, current: {current}"),
            Some(
                json!({"causes": [{"reason": "ResourceVersionTooLarge", "message": "Too large resource version"}], "retryAfterSeconds": 1}),
            ),
        )
    }
    /// 410 Gone for a watch/list from a compacted resourceVersion.
    pub fn gone(msg: impl Into<String>) -> ApiError {
        status(410, "Expired", msg.into(), None)
    }
    /// 422 without causes (a JSON patch that does not apply).
    pub fn unprocessable(msg: impl Into<String>) -> ApiError {
        status(422, "Invalid", msg.into(), Some(json!({})))
    }
    /// 413 for a request body over apiserver's `MaxRequestBodyBytes` (3 MiB;
    /// `errors.NewRequestEntityTooLargeError`): `Request entity too large: limit is 3145728`.
    pub fn too_large(limit: usize) -> ApiError {
        status(
            413,
            "RequestEntityTooLarge",
            format!("Request entity too large: limit is {limit}"),
            None,
        )
    }
    /// 500.
    pub fn internal(msg: impl Into<String>) -> ApiError {
        status(
            500,
            "InternalError",
            format!("Internal error occurred: {}", msg.into()),
            None,
        )
    }
    /// 422 Invalid with causes: `Kind.group "name" is invalid: field: message` (one cause) or
    /// `[field: message, field: message]` (several), as `errors.NewInvalid`.
    pub fn invalid(group: &str, kind: &str, name: &str, causes: &[FieldCause]) -> ApiError {
        let qk = if group.is_empty() {
            kind.to_string()
        } else {
            format!("{kind}.{group}")
        };
        let parts: Vec<String> = causes
            .iter()
            .map(|c| {
                if c.field.is_empty() {
                    c.message.clone()
                } else {
                    format!("{}: {}", c.field, c.message)
                }
            })
            .collect();
        let joined = if parts.len() == 1 {
            parts[0].clone()
        } else {
            format!("[{}]", parts.join(", "))
        };
        let mut d = serde_json::Map::new();
        d.insert("name".into(), json!(name));
        d.insert("group".into(), json!(group));
        d.insert("kind".into(), json!(kind));
        d.insert(
            "causes".into(),
            Value::Array(
                causes
                    .iter()
                    .map(|c| json!({"reason": c.reason, "message": c.message, "field": c.field}))
                    .collect(),
            ),
        );
        status(
            422,
            "Invalid",
            format!("{qk} \"{name}\" is invalid: {joined}"),
            Some(Value::Object(d)),
        )
    }
}

/// A `Required value` cause.
pub fn required(field: &str, detail: &str) -> FieldCause {
    FieldCause {
        reason: "FieldValueRequired".into(),
        message: if detail.is_empty() {
            "Required value".into()
        } else {
            format!("Required value: {detail}")
        },
        field: field.into(),
    }
}

/// An `Invalid value` cause; `value` is shown JSON-encoded as Go's field.Invalid does for strings.
pub fn invalid_value(field: &str, value: &Value, detail: &str) -> FieldCause {
    let v = match value {
        Value::String(s) => format!("{s:?}"),
        other => other.to_string(),
    };
    FieldCause {
        reason: "FieldValueInvalid".into(),
        message: format!("Invalid value: {v}: {detail}"),
        field: field.into(),
    }
}
