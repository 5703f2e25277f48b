//! Discovery (legacy, unaggregated format: client-go falls back to it when the response's
//! Content-Type is plain `application/json`) and the OpenAPI v3 documents kubectl reads to learn
//! that the server does field validation (`k8s.io/cli-runtime/pkg/resource/query_param_verifier_v3.go`:
//! a PATCH operation tagged with the GVK and a `fieldValidation` query parameter).

use super::registry::{Registry, ResourceType};
use serde_json::{json, Value};

/// The Kubernetes version reported by `/version`: OpenShift 4.18 ships Kubernetes 1.31.
pub const KUBE_GIT_VERSION: &str = "v1.31.6";

/// `/version`.
pub fn version() -> Value {
    json!({
        "major": "1",
        "minor": "31",
        "gitVersion": KUBE_GIT_VERSION,
        "gitCommit": "0000000000000000000000000000000000000000",
        "gitTreeState": "clean",
        "buildDate": "2025-01-21T00:00:00Z",
        "goVersion": "go1.22.9",
        "compiler": "gc",
        "platform": "linux/amd64"
    })
}

/// `/api`.
pub fn api_versions(server_addr: &str) -> Value {
    json!({
        "kind": "APIVersions",
        "versions": ["v1"],
        "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": server_addr}]
    })
}

fn group_json(group: &str, versions: &[String]) -> Value {
    let vs: Vec<Value> = versions
        .iter()
        .map(|v| json!({"groupVersion": format!("{group}/{v}"), "version": v}))
        .collect();
    json!({
        "name": group,
        "versions": vs,
        "preferredVersion": vs.first().cloned().unwrap_or(Value::Null),
    })
}

/// `/apis`.
pub fn api_group_list(reg: &Registry) -> Value {
    let groups: Vec<Value> = reg
        .groups()
        .iter()
        .filter(|(g, _)| !g.is_empty())
        .map(|(g, vs)| group_json(g, vs))
        .collect();
    json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": groups})
}

/// `/apis/<group>`, None when no version of the group is served.
pub fn api_group(reg: &Registry, group: &str) -> Option<Value> {
    let groups = reg.groups();
    let vs = groups.get(group)?;
    let mut g = group_json(group, vs);
    g["kind"] = json!("APIGroup");
    g["apiVersion"] = json!("v1");
    Some(g)
}

fn resource_entry(t: &ResourceType) -> Vec<Value> {
    let mut v = vec![json!({
        "name": t.plural,
        "singularName": t.singular,
        "namespaced": t.namespaced,
        "kind": t.kind,
        "verbs": t.verbs,
        "shortNames": t.short_names,
        "categories": t.categories,
        "storageVersionHash": "",
    })];
    for s in &t.subresources {
        v.push(json!({
            "name": format!("{}/{}", t.plural, s),
            "singularName": "",
            "namespaced": t.namespaced,
            "kind": t.kind,
            "verbs": ["get", "patch", "update"],
        }));
    }
    v
}

/// `/api/v1` or `/apis/<group>/<version>`, None when not served.
pub fn api_resource_list(reg: &Registry, group: &str, version: &str) -> Option<Value> {
    let types = reg.in_group_version(group, version);
    if types.is_empty() {
        return None;
    }
    let gv = if group.is_empty() {
        version.to_string()
    } else {
        format!("{group}/{version}")
    };
    let resources: Vec<Value> = types.iter().flat_map(|t| resource_entry(t)).collect();
    Some(json!({"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": gv, "resources": resources}))
}

/// Path of a group version in the OpenAPI v3 root: `api/v1`, `apis/hive.openshift.io/v1`.
pub fn openapi_gv_path(group: &str, version: &str) -> String {
    if group.is_empty() {
        format!("api/{version}")
    } else {
        format!("apis/{group}/{version}")
    }
}

/// `/openapi/v3`: every served group version, with a hash that changes when the CRDs do
/// (clients cache the documents by URL).
pub fn openapi_v3_root(reg: &Registry, generation: u64) -> Value {
    let mut paths = serde_json::Map::new();
    for (g, vs) in reg.groups() {
        for v in vs {
            let p = openapi_gv_path(&g, &v);
            paths.insert(
                p.clone(),
                json!({"serverRelativeURL": format!("/openapi/v3/{p}?hash={generation:016X}")}),
            );
        }
    }
    json!({"paths": paths})
}

fn query_param(name: &str) -> Value {
    json!({"name": name, "in": "query", "schema": {"type": "string", "uniqueItems": true}})
}

/// `/openapi/v3/<api/v1|apis/g/v>`: for each resource its collection and item paths with the
/// verbs, the GVK extension, the `fieldValidation` parameter on writes, and a component schema.
pub fn openapi_v3_gv(reg: &Registry, group: &str, version: &str) -> Option<Value> {
    let types = reg.in_group_version(group, version);
    if types.is_empty() {
        return None;
    }
    let prefix = if group.is_empty() {
        format!("/api/{version}")
    } else {
        format!("/apis/{group}/{version}")
    };
    let mut paths = serde_json::Map::new();
    let mut schemas = serde_json::Map::new();
    for t in &types {
        let gvk = json!({"group": t.group, "version": t.version, "kind": t.kind});
        let schema_name = format!(
            "{}.{}.{}",
            if t.group.is_empty() {
                "io.k8s.api.core"
            } else {
                &t.group
            },
            t.version,
            t.kind
        );
        let sref = json!({"$ref": format!("#/components/schemas/{schema_name}")});
        schemas.insert(
            schema_name.clone(),
            json!({"type": "object", "x-kubernetes-group-version-kind": [gvk.clone()], "x-kubernetes-preserve-unknown-fields": true}),
        );
        let write_params = json!([
            query_param("dryRun"),
            query_param("fieldManager"),
            query_param("fieldValidation")
        ]);
        let body = |cts: &[&str]| {
            let mut c = serde_json::Map::new();
            for ct in cts {
                c.insert(ct.to_string(), json!({"schema": sref.clone()}));
            }
            json!({"content": c, "required": true})
        };
        let ok =
            json!({"200": {"description": "OK", "content": {"application/json": {"schema": sref.clone()}}}});
        let op = |verb: &str, action: &str, extra: Value| {
            let mut o = json!({
                "operationId": format!("{verb}{}", t.kind),
                "x-kubernetes-action": action,
                "x-kubernetes-group-version-kind": gvk.clone(),
                "responses": ok.clone(),
            });
            if let Value::Object(m) = extra {
                for (k, v) in m {
                    o[k] = v;
                }
            }
            o
        };
        let coll = if t.namespaced {
            format!("{prefix}/namespaces/{{namespace}}/{}", t.plural)
        } else {
            format!("{prefix}/{}", t.plural)
        };
        let item = format!("{coll}/{{name}}");
        let only_create = t.verbs == ["create"];
        let mut c = json!({"post": op("create", "post", json!({"parameters": write_params.clone(), "requestBody": body(&["*/*"])}))});
        if !only_create {
            c["get"] = op("list", "list", json!({}));
            let mut i = json!({
                "get": op("read", "get", json!({})),
                "put": op("replace", "put", json!({"parameters": write_params.clone(), "requestBody": body(&["*/*"])})),
                "delete": op("delete", "delete", json!({})),
                "patch": op("patch", "patch", json!({
                    "parameters": write_params.clone(),
                    "requestBody": body(&["application/json-patch+json", "application/merge-patch+json"]),
                })),
            });
            if t.namespaced {
                i["parameters"] = json!([{"name": "namespace", "in": "path", "required": true, "schema": {"type": "string"}},
                                         {"name": "name", "in": "path", "required": true, "schema": {"type": "string"}}]);
            } else {
                i["parameters"] =
                    json!([{"name": "name", "in": "path", "required": true, "schema": {"type": "string"}}]);
            }
            paths.insert(item.clone(), i);
            for s in &t.subresources {
                paths.insert(
                    format!("{item}/{s}"),
                    json!({
                        "get": op("read", "get", json!({})),
                        "put": op("replace", "put", json!({"parameters": write_params.clone(), "requestBody": body(&["*/*"])})),
                        "patch": op("patch", "patch", json!({
                            "parameters": write_params.clone(),
                            "requestBody": body(&["application/json-patch+json", "application/merge-patch+json"]),
                        })),
                    }),
                );
            }
        }
        paths.insert(coll, c);
    }
    Some(json!({
        "openapi": "3.0.0",
        "info": {"title": "Kubernetes", "version": KUBE_GIT_VERSION},
        "paths": paths,
        "components": {"schemas": schemas},
    }))
}

/// `/openapi/v2` as protobuf (`application/com.github.proto-openapi.spec.v2@v1.0+protobuf`, the
/// only encoding client-go's `OpenAPISchema()` reads): a gnostic `openapi_v2.Document` with
/// `swagger: "2.0"` and `info`, and no definitions. kubectl falls back to it for client-side
/// validation of what the v3 documents do not cover (items of a `v1/List`); with no definition
/// for a kind it skips the client-side check, and the server still validates each item
/// (kubectl sends `fieldValidation` on every write).
pub fn openapi_v2_protobuf() -> Vec<u8> {
    fn field(out: &mut Vec<u8>, tag: u8, bytes: &[u8]) {
        out.push((tag << 3) | 2); // length-delimited
        let mut n = bytes.len();
        loop {
            let b = (n & 0x7f) as u8;
            n >>= 7;
            if n == 0 {
                out.push(b);
                break;
            }
            out.push(b | 0x80);
        }
        out.extend_from_slice(bytes);
    }
    let mut info = Vec::new();
    field(&mut info, 1, b"Kubernetes"); // Info.title
    field(&mut info, 2, KUBE_GIT_VERSION.as_bytes()); // Info.version
    let mut doc = Vec::new();
    field(&mut doc, 1, b"2.0"); // Document.swagger
    field(&mut doc, 2, &info); // Document.info
    doc
}

/// `/openapi/v2` as JSON (for clients asking for JSON), same content as the protobuf form.
pub fn openapi_v2_json() -> Value {
    json!({"swagger": "2.0", "info": {"title": "Kubernetes", "version": KUBE_GIT_VERSION}, "paths": {}, "definitions": {}})
}
