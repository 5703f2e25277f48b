//! `meta.k8s.io/v1` Table output, as `kubectl get` asks for it
//! (`Accept: application/json;as=Table;v=v1;g=meta.k8s.io`). Columns follow the real printers
//! (`k8s.io/kubernetes/pkg/printers/internalversion/printers.go`) for nodes, namespaces and CSRs,
//! CRD `additionalPrinterColumns` for custom resources, NAME/AGE otherwise.

use super::registry::{PrinterColumn, ResourceType};
use serde_json::{json, Value};

/// Go's `k8s.io/apimachinery/pkg/util/duration.HumanDuration`.
pub fn human_duration(secs: i64) -> String {
    if secs < -1 {
        return "<invalid>".into();
    }
    if secs < 0 {
        return "0s".into();
    }
    if secs < 120 {
        return format!("{secs}s");
    }
    let minutes = secs / 60;
    if minutes < 10 {
        let s = secs % 60;
        return if s == 0 {
            format!("{minutes}m")
        } else {
            format!("{minutes}m{s}s")
        };
    }
    if minutes < 180 {
        return format!("{minutes}m");
    }
    let hours = secs / 3600;
    if hours < 8 {
        let m = minutes % 60;
        return if m == 0 {
            format!("{hours}h")
        } else {
            format!("{hours}h{m}m")
        };
    }
    if hours < 48 {
        return format!("{hours}h");
    }
    if hours < 24 * 8 {
        let h = hours % 24;
        return if h == 0 {
            format!("{}d", hours / 24)
        } else {
            format!("{}d{}h", hours / 24, h)
        };
    }
    if hours < 24 * 365 * 2 {
        return format!("{}d", hours / 24);
    }
    if hours < 24 * 365 * 8 {
        let dy = (hours / 24) % 365;
        return if dy == 0 {
            format!("{}y", hours / 24 / 365)
        } else {
            format!("{}y{}d", hours / 24 / 365, dy)
        };
    }
    format!("{}y", hours / 24 / 365)
}

/// Age of an RFC 3339 timestamp as `HumanDuration`, `<unknown>` when absent.
pub fn age(ts: Option<&str>) -> String {
    let Some(ts) = ts else { return "<unknown>".into() };
    match time::OffsetDateTime::parse(ts, &time::format_description::well_known::Rfc3339) {
        Ok(t) => human_duration((time::OffsetDateTime::now_utc() - t).whole_seconds()),
        Err(_) => "<unknown>".into(),
    }
}

fn col(name: &str, type_: &str, format: &str, desc: &str, priority: i64) -> Value {
    json!({"name": name, "type": type_, "format": format, "description": desc, "priority": priority})
}

/// Evaluates the simple JSONPath forms CRDs use: `.a.b`, `.a[0].b`, `.a[?(@.k=="v")].b`.
/// Returns None when a step is missing.
pub fn json_path<'a>(obj: &'a Value, path: &str) -> Option<&'a Value> {
    let mut cur = obj;
    let mut rest = path
        .trim()
        .trim_start_matches('{')
        .trim_end_matches('}')
        .trim_start_matches('$');
    while !rest.is_empty() {
        if let Some(r) = rest.strip_prefix('.') {
            let end = r.find(['.', '[']).unwrap_or(r.len());
            cur = cur.get(&r[..end])?;
            rest = &r[end..];
        } else if let Some(r) = rest.strip_prefix('[') {
            let end = r.find(']')?;
            let inner = &r[..end];
            // A filter may contain ']' only in quotes; CRDs in practice do not.
            if let Some(f) = inner.strip_prefix("?(@.").and_then(|f| f.strip_suffix(')')) {
                let (k, v) = f.split_once("==")?;
                let v = v.trim().trim_matches('"').trim_matches('\'');
                cur = cur.as_array()?.iter().find(|e| {
                    e.get(k.trim())
                        .map(|x| x.as_str().map(str::to_string).unwrap_or(x.to_string()))
                        == Some(v.to_string())
                })?;
            } else {
                let i: usize = inner.parse().ok()?;
                cur = cur.as_array()?.get(i)?;
            }
            rest = &r[end + 1..];
        } else {
            return None;
        }
    }
    Some(cur)
}

fn crd_cell(obj: &Value, c: &PrinterColumn) -> Value {
    match json_path(obj, &c.json_path) {
        None | Some(Value::Null) => Value::Null,
        Some(v) if c.type_ == "date" => json!(age(v.as_str())),
        Some(v) => v.clone(),
    }
}

fn node_cells(o: &Value) -> Vec<Value> {
    let ready = o["status"]["conditions"]
        .as_array()
        .and_then(|cs| cs.iter().find(|c| c["type"] == "Ready"))
        .map(|c| c["status"] == "True");
    let mut status = match ready {
        Some(true) => "Ready".to_string(),
        Some(false) => "NotReady".to_string(),
        None => "Unknown".to_string(),
    };
    if o["spec"]["unschedulable"] == true {
        status.push_str(",SchedulingDisabled");
    }
    let mut roles: Vec<String> = o["metadata"]["labels"]
        .as_object()
        .map(|l| {
            l.keys()
                .filter_map(|k| k.strip_prefix("node-role.kubernetes.io/").map(str::to_string))
                .filter(|r| !r.is_empty())
                .collect()
        })
        .unwrap_or_default();
    roles.sort();
    let roles = if roles.is_empty() {
        "<none>".into()
    } else {
        roles.join(",")
    };
    vec![
        o["metadata"]["name"].clone(),
        json!(status),
        json!(roles),
        json!(age(o["metadata"]["creationTimestamp"].as_str())),
        json!(o["status"]["nodeInfo"]["kubeletVersion"].as_str().unwrap_or("")),
        // The wide (priority 1) cells: the apiserver always sends them (its printer runs with
        // Wide: true); kubectl shows them with -o wide. Values as kubernetes
        // pkg/printers/internalversion printNode: first address of the type or <none>, empty
        // nodeInfo fields as <unknown>.
        json!(node_address(o, "InternalIP")),
        json!(node_address(o, "ExternalIP")),
        json!(node_info(o, "osImage")),
        json!(node_info(o, "kernelVersion")),
        json!(node_info(o, "containerRuntimeVersion")),
    ]
}

fn node_address(o: &Value, type_: &str) -> String {
    o["status"]["addresses"]
        .as_array()
        .and_then(|a| a.iter().find(|x| x["type"] == type_))
        .and_then(|x| x["address"].as_str())
        .unwrap_or("<none>")
        .to_string()
}

fn node_info(o: &Value, field: &str) -> String {
    match o["status"]["nodeInfo"][field].as_str() {
        Some(v) if !v.is_empty() => v.to_string(),
        _ => "<unknown>".to_string(),
    }
}

fn csr_cells(o: &Value) -> Vec<Value> {
    let mut cond = Vec::new();
    let conds = o["status"]["conditions"].as_array().cloned().unwrap_or_default();
    for t in ["Approved", "Denied", "Failed"] {
        if conds.iter().any(|c| c["type"] == t && c["status"] != "False") {
            cond.push(t.to_string());
        }
    }
    if o["status"]["certificate"].as_str().is_some_and(|c| !c.is_empty()) {
        cond.push("Issued".into());
    }
    let cond = if cond.is_empty() {
        "Pending".into()
    } else {
        cond.join(",")
    };
    let dur = o["spec"]["expirationSeconds"]
        .as_i64()
        .map(human_duration)
        .unwrap_or_else(|| "<none>".into());
    vec![
        o["metadata"]["name"].clone(),
        json!(age(o["metadata"]["creationTimestamp"].as_str())),
        json!(o["spec"]["signerName"].as_str().unwrap_or("")),
        json!(o["spec"]["username"].as_str().unwrap_or("")),
        json!(dur),
        json!(cond),
    ]
}

/// `NodeStatus.addresses` description (core/v1 swagger), used by both address columns.
const NODE_ADDRESSES_DOC: &str = "List of addresses reachable to the node. Queried from cloud provider, if available. More info: https://kubernetes.io/docs/reference/node/node-status/#addresses Note: This field is declared as mergeable, but the merge key is not sufficiently unique, which can cause data corruption when it is merged. Callers should instead use a full-replacement patch. See https://pr.k8s.io/79391 for an example. Consumers should assume that addresses can change during the lifetime of a Node. However, there are some exceptions where this may not be possible, such as Pods that inherit a Node's address in its own status or consumers of the downward API (status.hostIP).";

/// Column definitions for a type.
pub fn columns(t: &ResourceType) -> Vec<Value> {
    let name = col(
        "Name",
        "string",
        "name",
        "Name must be unique within a namespace.",
        0,
    );
    let age_c = col(
        "Age",
        "string",
        "",
        "CreationTimestamp is a timestamp representing the server time when this object was created.",
        0,
    );
    if let Some(cols) = &t.columns {
        let mut v = vec![name];
        for c in cols {
            v.push(col(&c.name, &c.type_, &c.format, &c.description, c.priority));
        }
        return v;
    }
    match (t.group.as_str(), t.plural.as_str()) {
        ("", "nodes") => vec![
            name,
            col("Status", "string", "", "The status of the node", 0),
            col("Roles", "string", "", "The roles of the node", 0),
            age_c,
            col("Version", "string", "", "Kubelet Version reported by the node.", 0),
            col("Internal-IP", "string", "", NODE_ADDRESSES_DOC, 1),
            col("External-IP", "string", "", NODE_ADDRESSES_DOC, 1),
            col("OS-Image", "string", "", "OS Image reported by the node from /etc/os-release (e.g. Debian GNU/Linux 7 (wheezy)).", 1),
            col("Kernel-Version", "string", "", "Kernel Version reported by the node from 'uname -r' (e.g. 3.16.0-0.bpo.4-amd64).", 1),
            col("Container-Runtime", "string", "", "ContainerRuntime Version reported by the node through runtime remote API (e.g. containerd://1.4.2).", 1),
        ],
        ("", "namespaces") => vec![name, col("Status", "string", "", "The status of the namespace", 0), age_c],
        ("", "configmaps") => vec![name, col("Data", "integer", "", "Number of data entries", 0), age_c],
        ("", "secrets") => vec![
            name,
            col("Type", "string", "", "The type of the secret", 0),
            col("Data", "integer", "", "Number of data entries", 0),
            age_c,
        ],
        ("", "serviceaccounts") => vec![name, col("Secrets", "integer", "", "Number of secrets", 0), age_c],
        ("", "pods") => vec![
            name,
            col("Ready", "string", "", "The aggregate readiness state of this pod for accepting traffic.", 0),
            col("Status", "string", "", "The aggregate status of the containers in this pod.", 0),
            col("Restarts", "string", "", "The number of times the containers in this pod have been restarted.", 0),
            age_c,
        ],
        ("apiextensions.k8s.io", "customresourcedefinitions") => vec![
            name,
            col("Created At", "date", "", "CreationTimestamp of the CustomResourceDefinition", 0),
        ],
        ("certificates.k8s.io", "certificatesigningrequests") => vec![
            name,
            age_c,
            col("SignerName", "string", "", "Only one signer name is allowed.", 0),
            col("Requestor", "string", "", "Name of the user who requested the CSR.", 0),
            col("RequestedDuration", "string", "", "Requested duration of the certificate.", 0),
            col("Condition", "string", "", "Conditions of the CSR.", 0),
        ],
        _ => vec![name, age_c],
    }
}

/// The row cells of one object.
pub fn cells(t: &ResourceType, o: &Value) -> Vec<Value> {
    if let Some(cols) = &t.columns {
        let mut v = vec![o["metadata"]["name"].clone()];
        v.extend(cols.iter().map(|c| crd_cell(o, c)));
        return v;
    }
    match (t.group.as_str(), t.plural.as_str()) {
        ("", "nodes") => node_cells(o),
        ("", "namespaces") => vec![
            o["metadata"]["name"].clone(),
            json!(o["status"]["phase"].as_str().unwrap_or("Active")),
            json!(age(o["metadata"]["creationTimestamp"].as_str())),
        ],
        ("certificates.k8s.io", "certificatesigningrequests") => csr_cells(o),
        ("", "configmaps") => {
            let n = o["data"].as_object().map_or(0, |m| m.len())
                + o["binaryData"].as_object().map_or(0, |m| m.len());
            vec![
                o["metadata"]["name"].clone(),
                json!(n),
                json!(age(o["metadata"]["creationTimestamp"].as_str())),
            ]
        }
        ("", "secrets") => vec![
            o["metadata"]["name"].clone(),
            json!(o["type"].as_str().unwrap_or("Opaque")),
            json!(o["data"].as_object().map_or(0, |m| m.len())),
            json!(age(o["metadata"]["creationTimestamp"].as_str())),
        ],
        ("", "serviceaccounts") => vec![
            o["metadata"]["name"].clone(),
            json!(o["secrets"].as_array().map_or(0, |a| a.len())),
            json!(age(o["metadata"]["creationTimestamp"].as_str())),
        ],
        ("", "pods") => {
            let statuses = o["status"]["containerStatuses"]
                .as_array()
                .cloned()
                .unwrap_or_default();
            let total = o["spec"]["containers"].as_array().map_or(0, |a| a.len());
            let ready = statuses.iter().filter(|c| c["ready"] == true).count();
            let restarts: i64 = statuses.iter().filter_map(|c| c["restartCount"].as_i64()).sum();
            vec![
                o["metadata"]["name"].clone(),
                json!(format!("{ready}/{total}")),
                json!(o["status"]["phase"].as_str().unwrap_or("Pending")),
                json!(restarts.to_string()),
                json!(age(o["metadata"]["creationTimestamp"].as_str())),
            ]
        }
        ("apiextensions.k8s.io", "customresourcedefinitions") => vec![
            o["metadata"]["name"].clone(),
            o["metadata"]["creationTimestamp"].clone(),
        ],
        _ => vec![
            o["metadata"]["name"].clone(),
            json!(age(o["metadata"]["creationTimestamp"].as_str())),
        ],
    }
}

/// `includeObject` query parameter: None, Metadata (default), Object.
fn row_object(o: &Value, include: &str) -> Value {
    match include {
        "None" => Value::Null,
        "Object" => o.clone(),
        _ => json!({
            "kind": "PartialObjectMetadata",
            "apiVersion": "meta.k8s.io/v1",
            "metadata": o["metadata"],
        }),
    }
}

/// A Table of `objs`; `with_columns` false omits columnDefinitions (watch events after the first).
pub fn table(t: &ResourceType, objs: &[Value], meta: Value, include: &str, with_columns: bool) -> Value {
    let rows: Vec<Value> = objs
        .iter()
        .map(|o| json!({"cells": cells(t, o), "object": row_object(o, include)}))
        .collect();
    json!({
        "kind": "Table",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": meta,
        "columnDefinitions": if with_columns { Value::Array(columns(t)) } else { Value::Null },
        "rows": rows,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn human_duration_matches_go() {
        assert_eq!(human_duration(5), "5s");
        assert_eq!(human_duration(119), "119s");
        assert_eq!(human_duration(125), "2m5s");
        assert_eq!(human_duration(600), "10m");
        assert_eq!(human_duration(3 * 3600 + 60), "3h1m");
        assert_eq!(human_duration(86400 * 3), "3d");
    }

    #[test]
    fn json_path_filters() {
        let o = json!({"status": {"conditions": [{"type": "A", "status": "x"}, {"type": "Ready", "status": "True"}]}});
        assert_eq!(
            json_path(&o, ".status.conditions[?(@.type==\"Ready\")].status"),
            Some(&json!("True"))
        );
        assert_eq!(json_path(&o, ".status.conditions[0].type"), Some(&json!("A")));
        assert_eq!(json_path(&o, ".spec.x"), None);
    }
}
