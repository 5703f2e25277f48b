//! How the real kube-apiserver decodes, prunes and validates a request body.
//!
//! Rules followed (Kubernetes sources):
//! - Unknown fields (`?fieldValidation=`; apimachinery strict decoding and
//!   apiextensions-apiserver `pkg/apiserver/schema/pruning`): every field that the schema does not
//!   declare is collected with its dotted path (`spec.releaseImagee`, list items as
//!   `spec.hosts[0].foo`, map values as `spec.labels.key`). `Strict` refuses the object,
//!   `Warn` (the default) drops the fields and returns one warning each, `Ignore` drops them
//!   silently. The message text is `unknown field "<path>"`; the server prefixes the Strict error
//!   with `strict decoding error: ` and sends each warning as a `Warning: 299` header.
//! - At the root and in `x-kubernetes-embedded-resource` objects, `apiVersion`, `kind` and
//!   `metadata` are always allowed, and `metadata` is checked against `ObjectMeta` (unknown
//!   metadata fields are unknown fields, e.g. `metadata.labelz`).
//! - `x-kubernetes-preserve-unknown-fields: true` keeps unknown fields of that object; declared
//!   properties below it are pruned normally again (same as the Go `skipPrune`).
//! - After pruning, custom resources are validated like `apiextensions-apiserver`'s
//!   `ValidateCustomResource` (kube-openapi): `required` → `Required value`; `type` → `Invalid
//!   value: "string": spec.x in body must be of type integer: "string"`; `enum` → `Unsupported
//!   value: "c": supported values: "a", "b"`; `null` where not `nullable` → type error with
//!   `"null"`. Built-in kinds are checked here for unknown fields only (their real validation is in
//!   the simulator's handlers); [`go_decode_check`] adds the Go JSON decoder's type errors for
//!   them, accepting what Quantity, IntOrString, Time and RawExtension accept.

use serde_json::Value;
use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::sync::{Arc, OnceLock};

/// The `?fieldValidation=` query parameter (metav1 `FieldValidation*`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FieldValidation {
    /// Drop unknown fields silently.
    Ignore,
    /// Drop unknown fields and return one warning per field (the server default).
    Warn,
    /// Refuse the request with `strict decoding error: unknown field "..."` (kubectl's default,
    /// `--validate=strict`).
    Strict,
}

impl FieldValidation {
    /// Parses the query value. `None` and `""` mean `Warn` (server default). Any other value than
    /// `Ignore`, `Warn`, `Strict` (case-sensitive, like apimachinery's `ValidateFieldValidation`)
    /// is an error whose text is what the server returns in its 400 BadRequest:
    /// `fieldValidation: Unsupported value: "x": supported values: "", "Ignore", "Strict", "Warn"`.
    pub fn from_query(v: Option<&str>) -> Result<Self, String> {
        match v {
            None | Some("") | Some("Warn") => Ok(FieldValidation::Warn),
            Some("Ignore") => Ok(FieldValidation::Ignore),
            Some("Strict") => Ok(FieldValidation::Strict),
            Some(other) => Err(format!(
                "fieldValidation: Unsupported value: {}: supported values: \"\", \"Ignore\", \"Strict\", \"Warn\"",
                go_quote(other)
            )),
        }
    }
}

/// One node of a structural schema (the subset of OpenAPI v3 the API server uses for pruning
/// and validation). `reference` points into the schema's definitions (built-in types only).
#[derive(Debug, Clone, Default)]
struct Node {
    reference: Option<String>,
    /// `type`: object, array, string, integer, number, boolean; None = any.
    ty: Option<String>,
    properties: BTreeMap<String, Node>,
    items: Option<Box<Node>>,
    /// `additionalProperties` schema (a map); `additionalProperties: true` is stored as an
    /// any-node with `preserve_unknown_fields`.
    additional_properties: Option<Box<Node>>,
    required: Vec<String>,
    enum_values: Option<Vec<Value>>,
    nullable: bool,
    preserve_unknown_fields: bool,
    int_or_string: bool,
    embedded_resource: bool,
    /// `format` (int32, int64, byte, date-time, ...): the Go type of built-in fields.
    format: Option<String>,
}

/// A structural schema for one kind: what [`validate`] prunes and checks against.
/// Cheap to clone (shared definitions).
#[derive(Debug, Clone)]
pub struct Schema {
    root: Arc<Node>,
    defs: Arc<HashMap<String, Node>>,
    /// Whether values are checked (type, enum, required, nullable): true for CRD schemas, false
    /// for built-in and permissive ones.
    check_values: bool,
    /// Whether root/embedded `metadata` is checked against ObjectMeta (false for `permissive`).
    check_metadata: bool,
}

/// Builds the schema of a CRD version from its `spec.versions[].schema.openAPIV3Schema`
/// (a JSON value). Unknown or malformed schema keywords are ignored; a missing or non-object
/// value gives a schema whose root has no properties (everything but apiVersion/kind/metadata is
/// pruned, as the real server does for a structural schema without properties).
pub fn schema_from_crd_version(openapi_v3_schema: &Value) -> Schema {
    Schema {
        root: Arc::new(parse_node(openapi_v3_schema, false)),
        defs: Arc::new(HashMap::new()),
        check_values: true,
        check_metadata: true,
    }
}

/// The schema of a built-in kind, generated from k8s-openapi's `JsonSchema` impls (Kubernetes'
/// own OpenAPI), with `$ref`s resolved lazily (recursive types like JSONSchemaProps are fine).
/// Only unknown-field detection uses it (no value checks). Supported:
/// core `v1` Namespace, ConfigMap, Secret, Node, Pod, ServiceAccount, Event;
/// `certificates.k8s.io/v1` CertificateSigningRequest; `authorization.k8s.io/v1`
/// SelfSubjectAccessReview; `apiextensions.k8s.io/v1` CustomResourceDefinition. Others → None.
/// Built once per process and cached.
pub fn builtin_schema(group: &str, version: &str, kind: &str) -> Option<Schema> {
    static CACHE: OnceLock<HashMap<(&'static str, &'static str, &'static str), Schema>> = OnceLock::new();
    let cache = CACHE.get_or_init(|| {
        use k8s_openapi::api::authorization::v1 as authz;
        use k8s_openapi::api::certificates::v1 as certs;
        use k8s_openapi::api::core::v1 as core;
        use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1 as apiext;
        let mut m = HashMap::new();
        m.insert(("", "v1", "Namespace"), gen_builtin::<core::Namespace>());
        m.insert(("", "v1", "ConfigMap"), gen_builtin::<core::ConfigMap>());
        m.insert(("", "v1", "Secret"), gen_builtin::<core::Secret>());
        m.insert(("", "v1", "Node"), gen_builtin::<core::Node>());
        m.insert(("", "v1", "Pod"), gen_builtin::<core::Pod>());
        m.insert(
            ("", "v1", "ServiceAccount"),
            gen_builtin::<core::ServiceAccount>(),
        );
        m.insert(("", "v1", "Event"), gen_builtin::<core::Event>());
        m.insert(
            ("certificates.k8s.io", "v1", "CertificateSigningRequest"),
            gen_builtin::<certs::CertificateSigningRequest>(),
        );
        m.insert(
            ("authorization.k8s.io", "v1", "SelfSubjectAccessReview"),
            gen_builtin::<authz::SelfSubjectAccessReview>(),
        );
        m.insert(
            ("apiextensions.k8s.io", "v1", "CustomResourceDefinition"),
            gen_builtin::<apiext::CustomResourceDefinition>(),
        );
        m
    });
    let group = if group == "core" { "" } else { group };
    cache.get(&(group, version, kind)).cloned()
}

/// A schema that keeps everything (x-kubernetes-preserve-unknown-fields everywhere, metadata
/// included) and checks nothing: for kinds the simulator serves without a schema.
pub fn permissive() -> Schema {
    Schema {
        root: Arc::new(Node {
            preserve_unknown_fields: true,
            ..Node::default()
        }),
        defs: Arc::new(HashMap::new()),
        check_values: false,
        check_metadata: false,
    }
}

/// One `details.causes[]` entry of a 422 Invalid Status (metav1 `StatusCause`).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Cause {
    /// `FieldValueRequired`, `FieldValueTypeInvalid` (wrong type or null, message "Invalid
    /// value: ..."), `FieldValueInvalid` or `FieldValueNotSupported` (enum).
    pub reason: String,
    /// E.g. `Required value`, `Unsupported value: "c": supported values: "a", "b"`.
    pub message: String,
    /// Dotted path, e.g. `spec.releaseImage`, `spec.hosts[0].role`.
    pub field: String,
}

impl fmt::Display for Cause {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.field, self.message)
    }
}

/// Why [`validate`] refused an object.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ValidationError {
    /// `fieldValidation=Strict` and unknown fields were found: one `unknown field "<path>"`
    /// message each, sorted. The server answers 400 BadRequest with
    /// `strict decoding error: ` + the messages joined by `, `.
    StrictDecoding(Vec<String>),
    /// Value errors against a CRD schema. The server answers 422 Invalid:
    /// `<Kind>.<group> "<name>" is invalid: [<cause>, ...]` (without brackets for one cause).
    Invalid(Vec<Cause>),
}

impl fmt::Display for ValidationError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ValidationError::StrictDecoding(msgs) => {
                write!(f, "strict decoding error: {}", msgs.join(", "))
            }
            ValidationError::Invalid(causes) => {
                let parts: Vec<String> = causes.iter().map(|c| c.to_string()).collect();
                if parts.len() == 1 {
                    write!(f, "{}", parts[0])
                } else {
                    write!(f, "[{}]", parts.join(", "))
                }
            }
        }
    }
}

impl std::error::Error for ValidationError {}

/// Prunes unknown fields from `obj` according to `mode` and validates the rest.
///
/// Returns the warnings (`unknown field "<path>"`, sorted; empty unless `mode` is `Warn`).
/// Errors: `StrictDecoding` when `mode` is `Strict` and unknown fields exist (obj is left
/// unchanged); `Invalid` when a CRD schema's value checks fail (obj is already pruned).
pub fn validate(
    schema: &Schema,
    obj: &mut Value,
    mode: FieldValidation,
) -> Result<Vec<String>, ValidationError> {
    let mut w = Walker {
        defs: &schema.defs,
        check_values: schema.check_values,
        check_metadata: schema.check_metadata,
        prune: mode != FieldValidation::Strict,
        unknown: Vec::new(),
        causes: Vec::new(),
    };
    let mut path = Vec::new();
    w.walk_resource(&schema.root, obj, &mut path, true);
    let mut unknown: Vec<String> = w
        .unknown
        .iter()
        .map(|p| format!("unknown field {}", go_quote(p)))
        .collect();
    unknown.sort();
    unknown.dedup();
    if mode == FieldValidation::Strict && !unknown.is_empty() {
        return Err(ValidationError::StrictDecoding(unknown));
    }
    if !w.causes.is_empty() {
        return Err(ValidationError::Invalid(w.causes));
    }
    Ok(if mode == FieldValidation::Warn {
        unknown
    } else {
        Vec::new()
    })
}

/// Decodes `obj` against a built-in kind's schema the way the real server's JSON decoder
/// (`sigs.k8s.io/json`, encoding/json rules) fills the Go struct, and returns its first
/// `*UnmarshalTypeError` text: `json: cannot unmarshal number into Go struct field
/// ConfigMap.data of type string` (innermost struct's name, then the JSON field path without
/// indexes or map keys; Go type names: string, int32, int64, float64, bool, []T,
/// map[string]T, v1.Struct, []uint8 for base64 bytes). `null` fits everything; Quantity and
/// IntOrString take numbers and strings (their UnmarshalJSON), Time any string. Unknown fields
/// are not this function's concern ([`validate`] handles them). `kind` names the root struct.
/// Ok for schemas that are not built-in.
pub fn go_decode_check(schema: &Schema, kind: &str, obj: &Value) -> Result<(), String> {
    if schema.check_values || !schema.check_metadata {
        return Ok(());
    }
    let cx = GoCx { defs: &schema.defs };
    let mut path = Vec::new();
    cx.check(&schema.root, obj, kind, &mut path)
}

struct GoCx<'a> {
    defs: &'a HashMap<String, Node>,
}

fn go_value_kind(v: &Value) -> &'static str {
    match v {
        Value::String(_) => "string",
        Value::Number(_) => "number",
        Value::Bool(_) => "bool",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
        Value::Null => "null",
    }
}

impl GoCx<'_> {
    fn resolve<'n>(&'n self, mut n: &'n Node) -> (&'n Node, Option<&'n str>) {
        let mut name = None;
        for _ in 0..32 {
            match n
                .reference
                .as_ref()
                .and_then(|r| self.defs.get(r).map(|d| (r, d)))
            {
                Some((r, d)) => {
                    name = Some(r.as_str());
                    n = d
                }
                None => break,
            }
        }
        (n, name)
    }

    /// Go's reflect type name of a node (`v1.ObjectMeta`, `map[string]string`, ...).
    fn go_type(&self, n: &Node) -> String {
        let (n, def) = self.resolve(n);
        if n.int_or_string {
            return match def {
                Some(d) if d.ends_with(".Quantity") => "resource.Quantity".into(),
                _ => "intstr.IntOrString".into(),
            };
        }
        match n.ty.as_deref() {
            Some("string") if n.format.as_deref() == Some("byte") => "[]uint8".into(),
            Some("string") if n.format.as_deref() == Some("date-time") => "v1.Time".into(),
            Some("string") => "string".into(),
            Some("integer") => {
                if n.format.as_deref() == Some("int32") {
                    "int32".into()
                } else {
                    "int64".into()
                }
            }
            Some("number") => "float64".into(),
            Some("boolean") => "bool".into(),
            Some("array") => format!(
                "[]{}",
                n.items
                    .as_deref()
                    .map(|i| self.go_type(i))
                    .unwrap_or_else(|| "interface {}".into())
            ),
            Some("object") if n.properties.is_empty() => match &n.additional_properties {
                Some(a) => format!("map[string]{}", self.go_type(a)),
                None => "map[string]interface {}".into(),
            },
            _ => match def {
                Some(d) => {
                    let mut parts = d.rsplit('.');
                    let name = parts.next().unwrap_or(d);
                    format!("{}.{name}", parts.next().unwrap_or("v1"))
                }
                None => "interface {}".into(),
            },
        }
    }

    fn check(&self, node: &Node, v: &Value, strukt: &str, path: &mut Vec<String>) -> Result<(), String> {
        if v.is_null() {
            return Ok(());
        }
        let (n, def) = self.resolve(node);
        let fail = |what: String| {
            let ty = self.go_type(node);
            Err(if path.is_empty() {
                format!("json: cannot unmarshal {what} into Go value of type {ty}")
            } else {
                format!(
                    "json: cannot unmarshal {what} into Go struct field {strukt}.{} of type {ty}",
                    path.join(".")
                )
            })
        };
        // RawExtension, JSON (e.g. JSONSchemaProps.default) and other shapeless nodes hold any
        // JSON value.
        if n.preserve_unknown_fields
            && n.properties.is_empty()
            && n.additional_properties.is_none()
            && !n.int_or_string
        {
            return Ok(());
        }
        if n.int_or_string {
            return match v {
                Value::String(_) | Value::Number(_) => Ok(()),
                // Quantity.UnmarshalJSON parses the raw text and fails with ParseQuantity's error.
                _ if def.is_some_and(|d| d.ends_with(".Quantity")) => {
                    Err("quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'".into())
                }
                // IntOrString.UnmarshalJSON unmarshals a non-string into its int32.
                _ => {
                    let ty = "int32";
                    Err(format!("json: cannot unmarshal {} into Go struct field {strukt}.{} of type {ty}", go_value_kind(v), path.join(".")))
                }
            };
        }
        match (n.ty.as_deref(), v) {
            (Some("string"), Value::String(_)) => Ok(()),
            (Some("boolean"), Value::Bool(_)) => Ok(()),
            (Some("number"), Value::Number(_)) => Ok(()),
            (Some("integer"), Value::Number(x)) => {
                let fits = match n.format.as_deref() {
                    Some("int32") => x.as_i64().is_some_and(|i| i32::try_from(i).is_ok()),
                    _ => x.as_i64().is_some(),
                };
                if fits {
                    Ok(())
                } else {
                    fail(format!("number {x}"))
                }
            }
            (Some("array"), Value::Array(items)) => {
                if let Some(it) = &n.items {
                    for i in items {
                        self.check(it, i, strukt, path)?;
                    }
                }
                Ok(())
            }
            (Some("object") | None, Value::Object(m))
                if !n.properties.is_empty() || n.additional_properties.is_some() =>
            {
                if n.properties.is_empty() {
                    if let Some(a) = &n.additional_properties {
                        for x in m.values() {
                            self.check(a, x, strukt, path)?;
                        }
                    }
                    return Ok(());
                }
                // A struct: its fields are reported with this struct's Go name.
                let name = def
                    .map(|d| d.rsplit('.').next().unwrap_or(d))
                    .unwrap_or(strukt)
                    .to_string();
                for (k, x) in m {
                    if let Some(p) = n.properties.get(k) {
                        path.push(k.clone());
                        let r = self.check(p, x, &name, path);
                        path.pop();
                        r?;
                    }
                }
                Ok(())
            }
            (Some("object"), Value::Object(_)) | (None, _) => Ok(()),
            (Some(_), other) => fail(go_value_kind(other).to_string()),
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Schema construction

fn gen_builtin<T: k8s_openapi::schemars::JsonSchema>() -> Schema {
    let root = k8s_openapi::schemars::SchemaGenerator::default().into_root_schema_for::<T>();
    let root = root.to_value();
    let mut defs = HashMap::new();
    for key in ["$defs", "definitions"] {
        if let Some(Value::Object(d)) = root.get(key) {
            for (name, s) in d {
                defs.insert(name.clone(), parse_node(s, true));
            }
        }
    }
    Schema {
        root: Arc::new(parse_node(&root, true)),
        defs: Arc::new(defs),
        check_values: false,
        check_metadata: true,
    }
}

/// ObjectMeta, for root and embedded `metadata` (unknown-field detection only).
fn object_meta() -> &'static Schema {
    static META: OnceLock<Schema> = OnceLock::new();
    META.get_or_init(gen_builtin::<k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta>)
}

/// Parses one schema node. `builtin` applies the k8s-openapi conventions: an object type with
/// neither properties nor additionalProperties (RawExtension, JSON) and a type-less node
/// (oneOf unions such as JSONSchemaPropsOrBool) accept anything.
fn parse_node(v: &Value, builtin: bool) -> Node {
    let Some(o) = v.as_object() else {
        // `true` schema (or junk): anything goes.
        return Node {
            preserve_unknown_fields: true,
            ..Node::default()
        };
    };
    let mut n = Node::default();
    if let Some(Value::String(r)) = o.get("$ref") {
        n.reference = Some(
            r.rsplit('/')
                .next()
                .unwrap_or(r)
                .replace("~1", "/")
                .replace("~0", "~"),
        );
    }
    n.ty = match o.get("type") {
        Some(Value::String(t)) => Some(t.clone()),
        // e.g. ["string", "null"]: the first non-null type, nullable.
        Some(Value::Array(ts)) => {
            if ts.iter().any(|t| t == "null") {
                n.nullable = true;
            }
            ts.iter()
                .filter_map(|t| t.as_str())
                .find(|t| *t != "null")
                .map(str::to_owned)
        }
        _ => None,
    };
    if let Some(Value::Object(props)) = o.get("properties") {
        for (k, s) in props {
            n.properties.insert(k.clone(), parse_node(s, builtin));
        }
    }
    match o.get("items") {
        Some(s @ Value::Object(_)) => n.items = Some(Box::new(parse_node(s, builtin))),
        Some(Value::Array(_)) | Some(Value::Bool(true)) => {
            n.items = Some(Box::new(Node {
                preserve_unknown_fields: true,
                ..Node::default()
            }))
        }
        _ => {}
    }
    match o.get("additionalProperties") {
        Some(s @ Value::Object(_)) => n.additional_properties = Some(Box::new(parse_node(s, builtin))),
        Some(Value::Bool(true)) => {
            n.additional_properties = Some(Box::new(Node {
                preserve_unknown_fields: true,
                ..Node::default()
            }))
        }
        _ => {}
    }
    if let Some(Value::Array(req)) = o.get("required") {
        n.required = req.iter().filter_map(|r| r.as_str().map(str::to_owned)).collect();
    }
    if let Some(Value::Array(e)) = o.get("enum") {
        n.enum_values = Some(e.clone());
    }
    let flag = |k: &str| o.get(k).and_then(Value::as_bool).unwrap_or(false);
    n.nullable |= flag("nullable");
    n.preserve_unknown_fields = flag("x-kubernetes-preserve-unknown-fields");
    n.int_or_string = flag("x-kubernetes-int-or-string");
    n.embedded_resource = flag("x-kubernetes-embedded-resource");
    n.format = o.get("format").and_then(Value::as_str).map(str::to_owned);
    if builtin && n.reference.is_none() {
        let shapeless = n.properties.is_empty() && n.additional_properties.is_none();
        if n.ty.as_deref() == Some("object") && shapeless {
            n.preserve_unknown_fields = true;
        }
        if n.ty.is_none() && shapeless && n.items.is_none() {
            n.preserve_unknown_fields = true;
        }
    }
    n
}

// ---------------------------------------------------------------------------------------------
// Walking

#[derive(Clone)]
enum Seg {
    Key(String),
    Index(usize),
}

fn path_string(path: &[Seg]) -> String {
    let mut s = String::new();
    for seg in path {
        match seg {
            Seg::Key(k) => {
                if !s.is_empty() {
                    s.push('.');
                }
                s.push_str(k);
            }
            Seg::Index(i) => s.push_str(&format!("[{i}]")),
        }
    }
    s
}

struct Walker<'a> {
    defs: &'a HashMap<String, Node>,
    check_values: bool,
    check_metadata: bool,
    prune: bool,
    unknown: Vec<String>,
    causes: Vec<Cause>,
}

const META_FIELDS: [&str; 3] = ["apiVersion", "kind", "metadata"];

impl<'a> Walker<'a> {
    /// Follows `$ref`s (bounded, to survive a self-referencing definition).
    fn resolve<'n>(&self, mut n: &'n Node) -> &'n Node
    where
        'a: 'n,
    {
        for _ in 0..32 {
            match n.reference.as_ref().and_then(|r| self.defs.get(r)) {
                Some(d) => n = d,
                None => return n,
            }
        }
        n
    }

    /// The root object or an embedded resource: apiVersion/kind kept, metadata checked as
    /// ObjectMeta, the rest by the schema.
    fn walk_resource(&mut self, node: &Node, v: &mut Value, path: &mut Vec<Seg>, _root: bool) {
        let node = self.resolve(node);
        if let (Some(Value::Object(_)), true) = (v.get("metadata"), self.check_metadata) {
            let meta = object_meta();
            let mut sub = Walker {
                defs: &meta.defs,
                check_values: false,
                check_metadata: true,
                prune: self.prune,
                unknown: Vec::new(),
                causes: Vec::new(),
            };
            path.push(Seg::Key("metadata".into()));
            sub.walk(Some(&meta.root), v.get_mut("metadata").unwrap(), path);
            path.pop();
            self.unknown.append(&mut sub.unknown);
        }
        self.walk_node(node, v, path, true);
    }

    fn walk(&mut self, node: Option<&Node>, v: &mut Value, path: &mut Vec<Seg>) {
        match node {
            Some(n) => {
                let n = self.resolve(n);
                if n.embedded_resource && v.is_object() {
                    self.walk_resource(n, v, path, false);
                } else {
                    self.walk_node(n, v, path, false);
                }
            }
            None => self.walk_none(v, path),
        }
    }

    /// No schema at all (e.g. array without items): objects lose every field.
    fn walk_none(&mut self, v: &mut Value, path: &mut Vec<Seg>) {
        match v {
            Value::Object(m) => {
                let keys: Vec<String> = m.keys().cloned().collect();
                for k in keys {
                    path.push(Seg::Key(k.clone()));
                    self.unknown.push(path_string(path));
                    path.pop();
                    if self.prune {
                        m.remove(&k);
                    }
                }
            }
            Value::Array(items) => {
                for (i, item) in items.iter_mut().enumerate() {
                    path.push(Seg::Index(i));
                    self.walk_none(item, path);
                    path.pop();
                }
            }
            _ => {}
        }
    }

    /// `resource`: the object is a resource (root or embedded), so apiVersion/kind/metadata are
    /// not pruned here (metadata was handled by `walk_resource`).
    fn walk_node(&mut self, n: &Node, v: &mut Value, path: &mut Vec<Seg>, resource: bool) {
        if self.check_values && !self.check_value(n, v, path) {
            return; // wrong type: nothing below to check
        }
        match v {
            Value::Object(m) => {
                let keys: Vec<String> = m.keys().cloned().collect();
                for k in keys {
                    if resource && META_FIELDS.contains(&k.as_str()) {
                        continue;
                    }
                    path.push(Seg::Key(k.clone()));
                    let child = m.get_mut(&k).unwrap();
                    if let Some(p) = n.properties.get(&k) {
                        self.walk(Some(p), child, path);
                    } else if let Some(ap) = &n.additional_properties {
                        self.walk(Some(ap), child, path);
                    } else if !n.preserve_unknown_fields {
                        self.unknown.push(path_string(path));
                        if self.prune {
                            m.remove(&k);
                        }
                    }
                    path.pop();
                }
                if self.check_values {
                    for r in &n.required {
                        if !m.contains_key(r) {
                            path.push(Seg::Key(r.clone()));
                            self.causes.push(Cause {
                                reason: "FieldValueRequired".into(),
                                message: "Required value".into(),
                                field: path_string(path),
                            });
                            path.pop();
                        }
                    }
                }
            }
            Value::Array(items) => {
                for (i, item) in items.iter_mut().enumerate() {
                    path.push(Seg::Index(i));
                    match &n.items {
                        Some(it) => self.walk(Some(it), item, path),
                        // Go skipPrune: a preserving node without items keeps its items.
                        None if n.preserve_unknown_fields => {}
                        None => self.walk(None, item, path),
                    }
                    path.pop();
                }
            }
            _ => {}
        }
    }

    /// Type, nullable and enum checks of one value. Returns false on a type mismatch.
    fn check_value(&mut self, n: &Node, v: &Value, path: &[Seg]) -> bool {
        let field = path_string(path);
        if v.is_null() && (n.nullable || (n.ty.is_none() && !n.int_or_string)) {
            return true;
        }
        let expected: Option<String> = if n.int_or_string {
            Some("integer,string".into())
        } else {
            n.ty.clone()
        };
        if let Some(t) = expected {
            let ok = match t.as_str() {
                "object" => v.is_object(),
                "array" => v.is_array(),
                "string" => v.is_string(),
                "boolean" => v.is_boolean(),
                "number" => v.is_number(),
                "integer" => is_integer(v),
                "integer,string" => is_integer(v) || v.is_string(),
                _ => true,
            };
            if !ok {
                let actual = json_type(v);
                self.causes.push(Cause {
                    reason: "FieldValueTypeInvalid".into(),
                    message: format!(
                        "Invalid value: {}: {} in body must be of type {}: {}",
                        go_quote(actual),
                        field,
                        t,
                        go_quote(actual)
                    ),
                    field,
                });
                return false;
            }
        }
        if let Some(allowed) = &n.enum_values {
            if !v.is_null() && !allowed.iter().any(|a| json_eq(a, v)) {
                let list: Vec<String> = allowed.iter().map(enum_text).collect();
                self.causes.push(Cause {
                    reason: "FieldValueNotSupported".into(),
                    message: format!(
                        "Unsupported value: {}: supported values: {}",
                        enum_text(v),
                        list.join(", ")
                    ),
                    field,
                });
            }
        }
        true
    }
}

fn is_integer(v: &Value) -> bool {
    match v {
        Value::Number(n) => n.is_i64() || n.is_u64() || n.as_f64().is_some_and(|f| f.fract() == 0.0),
        _ => false,
    }
}

/// kube-openapi's type names of a JSON value.
fn json_type(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(_) if is_integer(v) => "integer",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

fn json_eq(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => x.as_f64() == y.as_f64(),
        _ => a == b,
    }
}

/// A value as field.NotSupported prints it: strings Go-quoted, anything else as JSON.
fn enum_text(v: &Value) -> String {
    match v {
        Value::String(s) => go_quote(s),
        other => other.to_string(),
    }
}

/// Go's `%q` for ordinary strings (JSON escaping is the same for the printable ASCII we see).
fn go_quote(s: &str) -> String {
    Value::String(s.to_owned()).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn crd_schema() -> Schema {
        schema_from_crd_version(&json!({
            "type": "object",
            "properties": {
                "apiVersion": {"type": "string"},
                "kind": {"type": "string"},
                "metadata": {"type": "object"},
                "spec": {
                    "type": "object",
                    "required": ["releaseImage"],
                    "properties": {
                        "releaseImage": {"type": "string"},
                        "replicas": {"type": "integer"},
                        "role": {"type": "string", "enum": ["master", "worker"]},
                        "note": {"type": "string", "nullable": true},
                        "port": {"x-kubernetes-int-or-string": true},
                        "hosts": {"type": "array", "items": {
                            "type": "object",
                            "properties": {"hostname": {"type": "string"}}
                        }},
                        "labels": {"type": "object", "additionalProperties": {"type": "string"}},
                        "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": true,
                                 "properties": {"inner": {"type": "object",
                                     "properties": {"a": {"type": "string"}}}}},
                        "template": {"type": "object", "x-kubernetes-embedded-resource": true,
                                     "properties": {"data": {"type": "object",
                                         "additionalProperties": {"type": "string"}}}}
                    }
                },
                "status": {"type": "object"}
            }
        }))
    }

    #[test]
    fn field_validation_query() {
        assert_eq!(FieldValidation::from_query(None).unwrap(), FieldValidation::Warn);
        assert_eq!(
            FieldValidation::from_query(Some("")).unwrap(),
            FieldValidation::Warn
        );
        assert_eq!(
            FieldValidation::from_query(Some("Strict")).unwrap(),
            FieldValidation::Strict
        );
        assert_eq!(
            FieldValidation::from_query(Some("Ignore")).unwrap(),
            FieldValidation::Ignore
        );
        let e = FieldValidation::from_query(Some("strict")).unwrap_err();
        assert_eq!(
            e,
            "fieldValidation: Unsupported value: \"strict\": supported values: \"\", \"Ignore\", \"Strict\", \"Warn\""
        );
    }

    #[test]
    fn unknown_fields_in_three_modes() {
        let s = crd_schema();
        let obj = json!({
            "apiVersion": "hive.openshift.io/v1", "kind": "ClusterImageSet",
            "metadata": {"name": "x", "labelz": {"a": "b"}},
            "spec": {"releaseImage": "quay.io/x:1", "releaseImagee": "y",
                     "hosts": [{"hostname": "a"}, {"hostname": "b", "foo": 1}]}
        });
        let mut o = obj.clone();
        let err = validate(&s, &mut o, FieldValidation::Strict).unwrap_err();
        assert_eq!(
            err,
            ValidationError::StrictDecoding(vec![
                "unknown field \"metadata.labelz\"".into(),
                "unknown field \"spec.hosts[1].foo\"".into(),
                "unknown field \"spec.releaseImagee\"".into(),
            ])
        );
        assert_eq!(o, obj, "strict leaves the object alone");
        assert!(err
            .to_string()
            .starts_with("strict decoding error: unknown field \"metadata.labelz\", "));

        let mut o = obj.clone();
        let warnings = validate(&s, &mut o, FieldValidation::Warn).unwrap();
        assert_eq!(warnings.len(), 3);
        assert_eq!(warnings[2], "unknown field \"spec.releaseImagee\"");
        assert!(o["spec"].get("releaseImagee").is_none());
        assert!(o["spec"]["hosts"][1].get("foo").is_none());
        assert!(o["metadata"].get("labelz").is_none());
        assert_eq!(o["metadata"]["name"], "x");
        assert_eq!(o["spec"]["releaseImage"], "quay.io/x:1");

        let mut o = obj.clone();
        assert_eq!(
            validate(&s, &mut o, FieldValidation::Ignore).unwrap(),
            Vec::<String>::new()
        );
        assert!(o["spec"].get("releaseImagee").is_none());
    }

    #[test]
    fn preserve_unknown_fields_and_maps_and_embedded() {
        let s = crd_schema();
        let mut o = json!({
            "apiVersion": "x/v1", "kind": "K", "metadata": {"name": "n"},
            "spec": {"releaseImage": "r",
                     "labels": {"any-key": "v"},
                     "free": {"whatever": {"deep": [1, 2]}, "inner": {"a": "x", "b": "pruned"}},
                     "template": {"apiVersion": "v1", "kind": "ConfigMap",
                                  "metadata": {"name": "c", "bogus": 1},
                                  "data": {"k": "v"}, "extra": true}}
        });
        let w = validate(&s, &mut o, FieldValidation::Warn).unwrap();
        assert_eq!(
            w,
            vec![
                "unknown field \"spec.free.inner.b\"".to_string(),
                "unknown field \"spec.template.extra\"".to_string(),
                "unknown field \"spec.template.metadata.bogus\"".to_string(),
            ]
        );
        assert_eq!(o["spec"]["free"]["whatever"]["deep"], json!([1, 2]));
        assert_eq!(o["spec"]["labels"]["any-key"], "v");
        assert_eq!(o["spec"]["template"]["kind"], "ConfigMap");
        assert_eq!(o["spec"]["template"]["metadata"], json!({"name": "c"}));
    }

    #[test]
    fn value_errors() {
        let s = crd_schema();
        let mut o = json!({"apiVersion": "x/v1", "kind": "K", "metadata": {"name": "n"},
            "spec": {"replicas": "three", "role": "boss", "note": null, "port": "http"}});
        let err = validate(&s, &mut o, FieldValidation::Strict).unwrap_err();
        let ValidationError::Invalid(causes) = err else {
            panic!("{err:?}")
        };
        assert_eq!(
            causes,
            vec![
                Cause {
                    reason: "FieldValueTypeInvalid".into(),
                    message:
                        "Invalid value: \"string\": spec.replicas in body must be of type integer: \"string\""
                            .into(),
                    field: "spec.replicas".into()
                },
                Cause {
                    reason: "FieldValueNotSupported".into(),
                    message: "Unsupported value: \"boss\": supported values: \"master\", \"worker\"".into(),
                    field: "spec.role".into()
                },
                Cause {
                    reason: "FieldValueRequired".into(),
                    message: "Required value".into(),
                    field: "spec.releaseImage".into()
                },
            ]
        );
        // null where not nullable; int-or-string rejects a bool
        let mut o = json!({"apiVersion": "x/v1", "kind": "K", "metadata": {},
            "spec": {"releaseImage": null, "port": true}});
        let ValidationError::Invalid(causes) = validate(&s, &mut o, FieldValidation::Warn).unwrap_err()
        else {
            panic!()
        };
        let msgs: Vec<String> = causes.iter().map(|c| c.to_string()).collect();
        assert!(msgs.contains(&"spec.releaseImage: Invalid value: \"null\": spec.releaseImage in body must be of type string: \"null\"".to_string()), "{msgs:?}");
        assert!(
            msgs.iter()
                .any(|m| m.starts_with("spec.port: Invalid value: \"boolean\"")),
            "{msgs:?}"
        );
        // a good object passes, port as integer
        let mut o = json!({"apiVersion": "x/v1", "kind": "K", "metadata": {},
            "spec": {"releaseImage": "r", "port": 8080, "replicas": 3, "role": "worker"}});
        assert_eq!(
            validate(&s, &mut o, FieldValidation::Strict).unwrap(),
            Vec::<String>::new()
        );
    }

    #[test]
    fn builtin_configmap_and_pod() {
        let s = builtin_schema("", "v1", "ConfigMap").expect("ConfigMap schema");
        let mut o = json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "c", "namespace": "n", "labels": {"a": "b"},
                         "creationTimestamp": "2024-01-01T00:00:00Z"},
            "data": {"k": "v"}, "dataa": {"x": "y"}});
        let err = validate(&s, &mut o, FieldValidation::Strict).unwrap_err();
        assert_eq!(
            err,
            ValidationError::StrictDecoding(vec!["unknown field \"dataa\"".into()])
        );

        let s = builtin_schema("", "v1", "Pod").unwrap();
        let mut o = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
            "spec": {"containers": [{"name": "c", "image": "i",
                "resources": {"limits": {"cpu": "1", "memory": 100}},
                "ports": [{"containerPort": 80}], "imagee": "x"}]}});
        let w = validate(&s, &mut o, FieldValidation::Warn).unwrap();
        assert_eq!(w, vec!["unknown field \"spec.containers[0].imagee\"".to_string()]);
        assert_eq!(o["spec"]["containers"][0]["resources"]["limits"]["memory"], 100);
    }

    #[test]
    fn go_decode_errors_for_builtin_kinds() {
        let cm = builtin_schema("", "v1", "ConfigMap").unwrap();
        let ok = |s: &Schema, k: &str, o: Value| go_decode_check(s, k, &o);
        assert_eq!(
            ok(&cm, "ConfigMap", json!({"data": {"a": 1}})),
            Err("json: cannot unmarshal number into Go struct field ConfigMap.data of type string".into())
        );
        assert_eq!(
            ok(&cm, "ConfigMap", json!({"metadata": {"labels": {"a": true}}})),
            Err(
                "json: cannot unmarshal bool into Go struct field ObjectMeta.metadata.labels of type string"
                    .into()
            )
        );
        assert_eq!(
            ok(&cm, "ConfigMap", json!({"data": "x"})),
            Err(
                "json: cannot unmarshal string into Go struct field ConfigMap.data of type map[string]string"
                    .into()
            )
        );
        assert_eq!(
            ok(&cm, "ConfigMap", json!({"immutable": "yes"})),
            Err("json: cannot unmarshal string into Go struct field ConfigMap.immutable of type bool".into())
        );
        assert_eq!(
            ok(
                &cm,
                "ConfigMap",
                json!({"metadata": {"name": "x", "creationTimestamp": null}, "data": {"a": "1"}})
            ),
            Ok(())
        );
        let pod = builtin_schema("", "v1", "Pod").unwrap();
        // Quantity and IntOrString take numbers and strings; ints must be whole.
        assert_eq!(
            ok(
                &pod,
                "Pod",
                json!({"spec": {"containers": [{"name": "c", "resources": {"limits": {"cpu": 1, "memory": "1Gi"}},
            "ports": [{"containerPort": 80}], "livenessProbe": {"httpGet": {"port": "http"}}}]}})
            ),
            Ok(())
        );
        assert_eq!(
            ok(&pod, "Pod", json!({"spec": {"containers": [{"name": 5}]}})),
            Err("json: cannot unmarshal number into Go struct field Container.spec.containers.name of type string".into())
        );
        assert_eq!(
            ok(&pod, "Pod", json!({"spec": {"containers": [{"name": "c", "ports": [{"containerPort": 1.5}]}]}})),
            Err("json: cannot unmarshal number 1.5 into Go struct field ContainerPort.spec.containers.ports.containerPort of type int32".into())
        );
        assert!(ok(
            &pod,
            "Pod",
            json!({"spec": {"containers": [{"name": "c", "resources": {"limits": {"cpu": true}}}]}})
        )
        .unwrap_err()
        .starts_with("quantities must match"));
        let sec = builtin_schema("", "v1", "Secret").unwrap();
        assert_eq!(
            ok(&sec, "Secret", json!({"data": {"a": 1}})),
            Err("json: cannot unmarshal number into Go struct field Secret.data of type []uint8".into())
        );
        // JSON-typed fields (JSONSchemaProps.default, example) take any value.
        let crd = builtin_schema("apiextensions.k8s.io", "v1", "CustomResourceDefinition").unwrap();
        let o = json!({"spec": {"versions": [{"name": "v1", "schema": {"openAPIV3Schema": {"properties": {"a": {"type": "string", "default": "x"}, "b": {"default": {"k": 1}}, "c": {"default": 3}}}}}]}});
        assert_eq!(ok(&crd, "CustomResourceDefinition", o), Ok(()));
        // CRD schemas are not decoded this way.
        assert_eq!(ok(&crd_schema(), "K", json!({"spec": {"replicas": "x"}})), Ok(()));
    }

    #[test]
    fn builtin_all_listed_kinds_exist() {
        for (g, k) in [
            ("", "Namespace"),
            ("", "ConfigMap"),
            ("", "Secret"),
            ("", "Node"),
            ("", "Pod"),
            ("", "ServiceAccount"),
            ("", "Event"),
            ("certificates.k8s.io", "CertificateSigningRequest"),
            ("authorization.k8s.io", "SelfSubjectAccessReview"),
            ("apiextensions.k8s.io", "CustomResourceDefinition"),
        ] {
            assert!(builtin_schema(g, "v1", k).is_some(), "{g}/{k}");
        }
        assert!(builtin_schema("", "v1", "Service").is_none());
    }

    #[test]
    fn builtin_csr_and_crd_recursive() {
        let s = builtin_schema("certificates.k8s.io", "v1", "CertificateSigningRequest").unwrap();
        let mut o = json!({"apiVersion": "certificates.k8s.io/v1", "kind": "CertificateSigningRequest",
            "metadata": {"generateName": "csr-"},
            "spec": {"request": "AAAA", "signerName": "kubernetes.io/kubelet-serving",
                     "usages": ["digital signature"], "expirationSeconds": 3600, "extra": {"a": ["b"]},
                     "signer": "x"},
            "status": {"conditions": [{"type": "Approved", "status": "True", "lastUpdateTime": "2024-01-01T00:00:00Z"}]}});
        let err = validate(&s, &mut o, FieldValidation::Strict).unwrap_err();
        assert_eq!(
            err,
            ValidationError::StrictDecoding(vec!["unknown field \"spec.signer\"".into()])
        );

        let s = builtin_schema("apiextensions.k8s.io", "v1", "CustomResourceDefinition").unwrap();
        let mut o = json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": "foos.example.com"},
            "spec": {"group": "example.com", "scope": "Namespaced",
                "names": {"plural": "foos", "kind": "Foo"},
                "versions": [{"name": "v1", "served": true, "storage": true,
                    "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                        "spec": {"type": "object", "x-kubernetes-preserve-unknown-fields": true,
                                 "properties": {"a": {"type": "array", "items": {"type": "string"}}}}}}}}]}});
        assert_eq!(
            validate(&s, &mut o, FieldValidation::Strict).unwrap(),
            Vec::<String>::new()
        );
        o["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["typo"] = json!(1);
        let err = validate(&s, &mut o, FieldValidation::Strict).unwrap_err();
        assert_eq!(
            err,
            ValidationError::StrictDecoding(vec![
                "unknown field \"spec.versions[0].schema.openAPIV3Schema.properties.spec.typo\"".into()
            ])
        );
    }

    #[test]
    fn permissive_keeps_everything() {
        let s = permissive();
        let obj = json!({"apiVersion": "a/v1", "kind": "X", "metadata": {"name": "x", "odd": 1},
                         "spec": {"anything": [1, {"b": 2}]}});
        let mut o = obj.clone();
        assert_eq!(
            validate(&s, &mut o, FieldValidation::Strict).unwrap(),
            Vec::<String>::new()
        );
        assert_eq!(o, obj);
    }

    // ---- upstream CRDs (from crate::upstream: openshift/api's module, assisted-service's tree) ----

    /// kind → (served storage version schema) for every CRD file in `dirs`.
    fn load_upstream_crds(dirs: &[std::path::PathBuf]) -> HashMap<String, Schema> {
        let mut out = HashMap::new();
        for dir in dirs {
            let mut files: Vec<_> = std::fs::read_dir(dir)
                .unwrap()
                .flatten()
                .map(|e| e.path())
                .collect();
            files.sort();
            for f in files {
                if f.extension().and_then(|e| e.to_str()) != Some("yaml") {
                    continue;
                }
                let text = std::fs::read_to_string(&f).unwrap();
                let crd: Value =
                    serde_saphyr::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", f.display()));
                // The CRD itself must pass the built-in CRD schema strictly.
                let mut c = crd.clone();
                let crd_schema =
                    builtin_schema("apiextensions.k8s.io", "v1", "CustomResourceDefinition").unwrap();
                if let Err(e) = validate(&crd_schema, &mut c, FieldValidation::Strict) {
                    panic!("{}: {e}", f.display());
                }
                let kind = crd["spec"]["names"]["kind"].as_str().unwrap().to_string();
                let versions = crd["spec"]["versions"].as_array().unwrap();
                let v = versions
                    .iter()
                    .find(|v| v["storage"] == true)
                    .unwrap_or(&versions[0]);
                out.insert(kind, schema_from_crd_version(&v["schema"]["openAPIV3Schema"]));
            }
        }
        out
    }

    fn openshift_crds() -> HashMap<String, Schema> {
        load_upstream_crds(&[crate::upstream::openshift_crds_dir().unwrap_or_else(|why| panic!("{why}"))])
    }

    fn assisted_crds() -> HashMap<String, Schema> {
        load_upstream_crds(&crate::upstream::assisted_crd_dirs().unwrap_or_else(|why| panic!("{why}")))
    }

    #[test]
    fn openshift_crds_realistic_and_misspelled() {
        let cases = vec![
            (
                "ClusterVersion",
                json!({
            "apiVersion": "config.openshift.io/v1", "kind": "ClusterVersion",
            "metadata": {"name": "version"},
            "spec": {"clusterID": "6a9f4b7e-3d2c-4e1f-9b8a-0c5d7e2f1a34", "channel": "stable-4.18",
                     "desiredUpdate": {"version": "4.18.13", "image": "quay.io/x@sha256:00", "force": false}}}),
                "channel",
            ),
            (
                "MachineConfig",
                json!({
            "apiVersion": "machineconfiguration.openshift.io/v1", "kind": "MachineConfig",
            "metadata": {"name": "99-worker-x", "labels": {"machineconfiguration.openshift.io/role": "worker"}},
            "spec": {"config": {"ignition": {"version": "3.2.0"}, "storage": {"files": []}},
                     "kernelArguments": ["a=b"]}}),
                "kernelArguments",
            ),
        ];
        assert_eq!(realistic_and_misspelled(&openshift_crds(), cases), 2);
    }

    #[test]
    #[ignore = "needs assisted-service's CRDs: scripts/real-components.sh assisted, or set AGENT_DAY2_ASSISTED_SERVICE_SRC"]
    fn assisted_crds_realistic_and_misspelled() {
        let mut cases: Vec<(&str, Value, &str)> = Vec::new();
        cases.push((
            "ClusterImageSet",
            json!({
            "apiVersion": "hive.openshift.io/v1", "kind": "ClusterImageSet",
            "metadata": {"name": "img4.18.12"},
            "spec": {"releaseImage": "quay.io/openshift-release-dev/ocp-release:4.18.12-x86_64"}}),
            "releaseImage",
        ));
        cases.push(("InfraEnv", json!({
            "apiVersion": "agent-install.openshift.io/v1beta1", "kind": "InfraEnv",
            "metadata": {"name": "day2", "namespace": "agent-day2"},
            "spec": {"pullSecretRef": {"name": "pull-secret"}, "cpuArchitecture": "x86_64",
                     "sshAuthorizedKey": "ssh-ed25519 AAAA", "nmStateConfigLabelSelector": {"matchLabels": {"a": "b"}},
                     "clusterRef": {"name": "c", "namespace": "n"}}}),
            "sshAuthorizedKey"));
        cases.push((
            "Agent",
            json!({
            "apiVersion": "agent-install.openshift.io/v1beta1", "kind": "Agent",
            "metadata": {"name": "a1", "namespace": "n"},
            "spec": {"approved": true, "hostname": "worker-1", "role": "worker",
                     "clusterDeploymentName": {"name": "c", "namespace": "n"}}}),
            "hostname",
        ));
        assert_eq!(realistic_and_misspelled(&assisted_crds(), cases), 3);
    }

    /// Each (kind, good object, a field of its spec): the object passes strictly, the field
    /// misspelled is refused strictly and pruned with a warning. Returns how many were checked
    /// (a kind missing from `crds` fails).
    fn realistic_and_misspelled(crds: &HashMap<String, Schema>, cases: Vec<(&str, Value, &str)>) -> usize {
        let mut checked = 0;
        for (kind, obj, field) in cases {
            let schema = crds
                .get(kind)
                .unwrap_or_else(|| panic!("{kind}: CRD not among the upstream files"));
            let mut o = obj.clone();
            assert_eq!(
                validate(schema, &mut o, FieldValidation::Strict),
                Ok(vec![]),
                "{kind} good object"
            );
            assert_eq!(o, obj, "{kind}: nothing pruned");
            // misspell the field
            let mut bad = obj.clone();
            let spec = bad["spec"].as_object_mut().unwrap();
            let val = spec.remove(field).unwrap();
            spec.insert(format!("{field}e"), val);
            let err = validate(schema, &mut bad.clone(), FieldValidation::Strict).unwrap_err();
            match &err {
                ValidationError::StrictDecoding(m) => {
                    assert_eq!(m, &vec![format!("unknown field \"spec.{field}e\"")], "{kind}")
                }
                other => panic!("{kind}: {other:?}"),
            }
            let w = validate(schema, &mut bad, FieldValidation::Warn);
            match kind {
                // releaseImage is required: after pruning the object is invalid.
                "ClusterImageSet" => assert_eq!(
                    w,
                    Err(ValidationError::Invalid(vec![Cause {
                        reason: "FieldValueRequired".into(),
                        message: "Required value".into(),
                        field: "spec.releaseImage".into()
                    }]))
                ),
                _ => assert_eq!(w, Ok(vec![format!("unknown field \"spec.{field}e\"")]), "{kind}"),
            }
            checked += 1;
        }
        checked
    }

    #[test]
    #[ignore = "needs assisted-service's CRDs: scripts/real-components.sh assisted, or set AGENT_DAY2_ASSISTED_SERVICE_SRC"]
    fn assisted_crds_enum_and_type_errors() {
        let crds = assisted_crds();
        let schema = crds.get("Agent").expect("Agent CRD");
        let mut o = json!({"apiVersion": "agent-install.openshift.io/v1beta1", "kind": "Agent",
            "metadata": {"name": "a"}, "spec": {"approved": "yes"}});
        let err = validate(schema, &mut o, FieldValidation::Warn).unwrap_err();
        let ValidationError::Invalid(causes) = err else {
            panic!("{err:?}")
        };
        assert!(causes.iter().any(|c| c.field == "spec.approved"
            && c.message == "Invalid value: \"string\": spec.approved in body must be of type boolean: \"string\""), "{causes:?}");
        let schema = crds.get("InfraEnv").expect("InfraEnv CRD");
        let mut o = json!({"apiVersion": "agent-install.openshift.io/v1beta1", "kind": "InfraEnv",
            "metadata": {"name": "i"}, "spec": {"pullSecretRef": {"name": "ps"},
            "ipxeScriptType": "Sometimes", "kernelArguments": [{"operation": "prepend", "value": "a"}]}});
        let err = validate(schema, &mut o, FieldValidation::Strict).unwrap_err();
        let ValidationError::Invalid(causes) = err else {
            panic!("{err:?}")
        };
        let msgs: Vec<String> = causes.iter().map(|c| c.to_string()).collect();
        assert!(msgs.contains(&"spec.ipxeScriptType: Unsupported value: \"Sometimes\": supported values: \"\", \"DiscoveryImageAlways\", \"BootOrderControl\"".to_string()), "{msgs:?}");
        assert!(
            msgs.iter()
                .any(|m| m.starts_with("spec.kernelArguments[0].operation: Unsupported value: \"prepend\"")),
            "{msgs:?}"
        );
    }
}
