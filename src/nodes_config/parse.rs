//! YAML → [`NodesConfig`]: shape, types and unknown keys. Content checks are in `validate`.

use std::path::Path;

use serde_json::{Map, Value};

use super::model::{did_you_mean, q, Host, Interface, NodesConfig, Origin, RootDeviceHints};
use crate::error::{ConfigErrors, FieldError};

/// Top-level keys we read.
const TOP_KEYS: [&str; 4] = ["cpuArchitecture", "sshKey", "bootArtifactsBaseURL", "hosts"];
/// Top-level keys accepted and ignored (Kubernetes TypeMeta/ObjectMeta, allowed upstream).
const TOP_IGNORED: [&str; 3] = ["apiVersion", "kind", "metadata"];
/// Keys of a host. `bmc` is in upstream's `agent.Host` but unused there: accepted with a note.
const HOST_KEYS: [&str; 6] = [
    "hostname",
    "role",
    "rootDeviceHints",
    "interfaces",
    "networkConfig",
    "bmc",
];
const IFACE_KEYS: [&str; 2] = ["name", "macAddress"];
/// metal3 RootDeviceHints keys the agent installer accepts.
pub(crate) const HINT_KEYS: [&str; 8] = [
    "deviceName",
    "hctl",
    "model",
    "vendor",
    "serialNumber",
    "minSizeGigabytes",
    "wwn",
    "rotational",
];

/// Parses `nodes-config.yaml` text. `source` names the file in messages (as the user gave it).
///
/// Accepts the schema of `oc adm node-image create` (docs/add-nodes.md "nodes-config.yaml"):
/// top level `cpuArchitecture`, `sshKey`, `bootArtifactsBaseURL`, `hosts`, plus ignored
/// `apiVersion`/`kind`/`metadata`; per host `hostname`, `role`, `rootDeviceHints`, `interfaces`
/// (`name`, `macAddress`), `networkConfig` (an NMState mapping) and `bmc` (ignored, noted).
///
/// Errors: YAML syntax (path = `source`), a value of the wrong type (`hosts[0].hostname:
/// expected a string, got 123; quote it`), and every unknown key at any level
/// (`hosts[0].interfaces[0].macAdress: unknown field; did you mean "macAddress"?`), a key
/// given twice in one mapping (`hosts[0].interfaces[0].macAddress: given twice (lines 10 and
/// 11); ...`, the first value is read). All are collected; nothing here looks at the cluster.
pub fn parse(yaml: &str, source: &Path) -> Result<NodesConfig, ConfigErrors> {
    let (cfg, errors) = parse_partial(yaml, source)?;
    if errors.is_empty() {
        Ok(cfg)
    } else {
        Err(ConfigErrors {
            source: source.display().to_string(),
            errors,
        })
    }
}

/// Like [`parse`], but a document that is YAML with the right overall shape gives back the
/// model of what did parse together with the parse errors, so the caller can validate the rest
/// and report every error at once (an unknown key in one host must not hide a bad MAC in
/// another). Fields that failed to parse are left out of the model (validation errors on those
/// same fields are noise: [`merge_errors`] drops them).
///
/// `Err` only when there is no model to go on with: not YAML, not a mapping at the top, or a
/// host entry that is not a mapping (dropping it would shift the `hosts[i]` of the others).
pub fn parse_partial(yaml: &str, source: &Path) -> Result<(NodesConfig, Vec<FieldError>), ConfigErrors> {
    let src = source.display().to_string();
    let fail = |errors: Vec<FieldError>| ConfigErrors {
        source: src.clone(),
        errors,
    };
    let (doc, duplicates) = match super::yaml::load(yaml) {
        Ok(x) => x,
        Err(e) => {
            return Err(fail(vec![FieldError::new(&src, format!("not valid YAML: {e}"))]));
        }
    };
    let mut p = Parser::default();
    // A repeated key: its first value is read; the error names the key's path and lines.
    for d in duplicates {
        p.err(d.path.clone(), d.message());
    }
    let cfg = p.top(&doc, &src);
    if p.fatal {
        return Err(fail(p.errors));
    }
    Ok((
        NodesConfig {
            origin: Origin::File(src),
            notes: p.notes,
            ..cfg
        },
        p.errors,
    ))
}

/// Parse errors followed by the validation errors, without a validation error on a field that
/// already has a parse error, or inside it (a `hostname` of the wrong type is also "required"
/// for validation: one message is enough).
pub fn merge_errors(parse: Vec<FieldError>, validation: Vec<FieldError>) -> Vec<FieldError> {
    let covered = |path: &str| {
        parse.iter().any(|e| {
            path == e.path
                || path.starts_with(&format!("{}.", e.path))
                || path.starts_with(&format!("{}[", e.path))
        })
    };
    let rest: Vec<FieldError> = validation.into_iter().filter(|e| !covered(&e.path)).collect();
    let mut out = parse;
    out.extend(rest);
    out
}

#[derive(Default)]
struct Parser {
    errors: Vec<FieldError>,
    notes: Vec<FieldError>,
    /// The model cannot be validated (see [`parse_partial`]).
    fatal: bool,
}

fn kind_of(v: &Value) -> String {
    match v {
        Value::Null => "nothing".into(),
        Value::Bool(b) => format!("the boolean {b}"),
        Value::Number(n) => format!("the number {n}"),
        Value::String(s) => format!("the string {}", q(s)),
        Value::Array(_) => "a list".into(),
        Value::Object(_) => "a mapping".into(),
    }
}

fn join(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_string()
    } else {
        format!("{path}.{key}")
    }
}

impl Parser {
    fn err(&mut self, path: impl Into<String>, msg: impl Into<String>) {
        self.errors.push(FieldError::new(path, msg));
    }

    /// Reports keys of `m` not in `known` (nor `ignored`), with a suggestion from `known`, or a
    /// hint when the key belongs at another level.
    fn unknown_keys(&mut self, m: &Map<String, Value>, path: &str, known: &[&str], ignored: &[&str]) {
        for k in m.keys() {
            if known.contains(&k.as_str()) || ignored.contains(&k.as_str()) {
                continue;
            }
            let at = join(path, k);
            let msg = if let Some(s) = did_you_mean(k, known) {
                format!("unknown field; did you mean {}?", q(s))
            } else if let Some(home) = belongs_elsewhere(k, path) {
                format!("unknown field here; {k} belongs {home}")
            } else {
                format!("unknown field; expected one of {}", known.join(", "))
            };
            self.err(at, msg);
        }
    }

    fn string(&mut self, v: Option<&Value>, path: &str) -> Option<String> {
        match v? {
            Value::Null => None,
            Value::String(s) => Some(s.clone()),
            other => {
                self.err(
                    path,
                    format!("expected a string, got {}; quote it", kind_of(other)),
                );
                None
            }
        }
    }

    fn top(&mut self, doc: &Value, src: &str) -> NodesConfig {
        let m = match doc {
            Value::Object(m) => m,
            Value::Null => {
                self.err(
                    src,
                    "the file is empty; it needs a hosts list (see `oc agent-day2 add-nodes --help`)",
                );
                self.fatal = true;
                return NodesConfig::default();
            }
            other => {
                self.err(
                    src,
                    format!(
                        "expected a mapping with a hosts list at the top, got {}",
                        kind_of(other)
                    ),
                );
                self.fatal = true;
                return NodesConfig::default();
            }
        };
        self.unknown_keys(m, "", &TOP_KEYS, &TOP_IGNORED);
        let mut cfg = NodesConfig {
            cpu_architecture: self.string(m.get("cpuArchitecture"), "cpuArchitecture"),
            ssh_key: self.string(m.get("sshKey"), "sshKey"),
            boot_artifacts_base_url: self.string(m.get("bootArtifactsBaseURL"), "bootArtifactsBaseURL"),
            ..Default::default()
        };
        match m.get("hosts") {
            None | Some(Value::Null) => {}
            Some(Value::Array(hosts)) => {
                for (i, h) in hosts.iter().enumerate() {
                    if let Some(h) = self.host(h, &format!("hosts[{i}]")) {
                        cfg.hosts.push(h);
                    }
                }
            }
            Some(other) => {
                self.fatal = true;
                self.err(
                    "hosts",
                    format!("expected a list of hosts, got {}", kind_of(other)),
                )
            }
        }
        cfg
    }

    fn host(&mut self, v: &Value, path: &str) -> Option<Host> {
        let Value::Object(m) = v else {
            self.fatal = true;
            self.err(
                path,
                format!(
                    "expected a mapping (hostname, interfaces, ...), got {}",
                    kind_of(v)
                ),
            );
            return None;
        };
        self.unknown_keys(m, path, &HOST_KEYS, &[]);
        if m.get("bmc").is_some_and(|b| !b.is_null()) {
            self.notes.push(FieldError::new(
                join(path, "bmc"),
                "ignored: add-nodes boots the hosts from the image you give them and does not use BMC settings",
            ));
        }
        let mut h = Host {
            hostname: self.string(m.get("hostname"), &join(path, "hostname")),
            role: self.string(m.get("role"), &join(path, "role")),
            ..Default::default()
        };
        match m.get("rootDeviceHints") {
            None | Some(Value::Null) => {}
            Some(Value::Object(r)) => {
                h.root_device_hints = Some(self.hints(r, &join(path, "rootDeviceHints")))
            }
            Some(other) => self.err(
                join(path, "rootDeviceHints"),
                format!(
                    "expected a mapping (deviceName, minSizeGigabytes, ...), got {}",
                    kind_of(other)
                ),
            ),
        }
        let ipath = join(path, "interfaces");
        match m.get("interfaces") {
            None | Some(Value::Null) => {}
            Some(Value::Array(list)) => {
                for (j, iv) in list.iter().enumerate() {
                    let p = format!("{ipath}[{j}]");
                    match iv {
                        Value::Object(im) => {
                            self.unknown_keys(im, &p, &IFACE_KEYS, &[]);
                            h.interfaces.push(Interface {
                                name: self.string(im.get("name"), &join(&p, "name")).unwrap_or_default(),
                                mac_address: self
                                    .string(im.get("macAddress"), &join(&p, "macAddress"))
                                    .unwrap_or_default(),
                            });
                        }
                        other => self.err(
                            p,
                            format!("expected a mapping {{name, macAddress}}, got {}", kind_of(other)),
                        ),
                    }
                }
            }
            Some(other) => self.err(
                ipath,
                format!("expected a list of {{name, macAddress}}, got {}", kind_of(other)),
            ),
        }
        match m.get("networkConfig") {
            None | Some(Value::Null) => {}
            Some(nc @ Value::Object(_)) => h.network_config = Some(nc.clone()),
            Some(other) => self.err(
                join(path, "networkConfig"),
                format!(
                    "expected an NMState mapping (interfaces, dns-resolver, routes) written inline, got {}",
                    kind_of(other)
                ),
            ),
        }
        Some(h)
    }

    fn hints(&mut self, m: &Map<String, Value>, path: &str) -> RootDeviceHints {
        for k in m.keys() {
            if matches!(k.as_str(), "wwnWithExtension" | "wwnVendorExtension") {
                self.err(join(path, k), "not supported by the agent installer; use wwn");
            }
        }
        let known: Vec<&str> = HINT_KEYS.to_vec();
        self.unknown_keys(m, path, &known, &["wwnWithExtension", "wwnVendorExtension"]);
        let mut r = RootDeviceHints {
            device_name: self.string(m.get("deviceName"), &join(path, "deviceName")),
            hctl: self.string(m.get("hctl"), &join(path, "hctl")),
            model: self.string(m.get("model"), &join(path, "model")),
            vendor: self.string(m.get("vendor"), &join(path, "vendor")),
            serial_number: self.string(m.get("serialNumber"), &join(path, "serialNumber")),
            wwn: self.string(m.get("wwn"), &join(path, "wwn")),
            ..Default::default()
        };
        let sp = join(path, "minSizeGigabytes");
        match m.get("minSizeGigabytes") {
            None | Some(Value::Null) => {}
            Some(Value::Number(n)) if n.as_u64().is_some() => r.min_size_gigabytes = n.as_u64(),
            Some(other) => self.err(
                sp,
                format!(
                    "expected a whole number of gigabytes (0 or more), got {}",
                    kind_of(other)
                ),
            ),
        }
        match m.get("rotational") {
            None | Some(Value::Null) => {}
            Some(Value::Bool(b)) => r.rotational = Some(*b),
            Some(other) => self.err(
                join(path, "rotational"),
                format!("expected true or false, got {}", kind_of(other)),
            ),
        }
        r
    }
}

/// Where a key that is unknown at `path` belongs, when it is a key of another level
/// (a common slip: `macAddress` directly under a host, `cpuArchitecture` inside a host).
fn belongs_elsewhere(key: &str, path: &str) -> Option<&'static str> {
    let in_host = path.starts_with("hosts[") && !path.contains(".interfaces[");
    if TOP_KEYS.contains(&key) && path.starts_with("hosts[") {
        return Some("at the top level, not inside a host");
    }
    if IFACE_KEYS.contains(&key) && in_host {
        return Some("in an entry of the host's interfaces list");
    }
    if HOST_KEYS.contains(&key) && !path.starts_with("hosts[") {
        return Some("in an entry of the hosts list");
    }
    if HINT_KEYS.contains(&key) && in_host {
        return Some("under the host's rootDeviceHints");
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn errs(y: &str) -> Vec<String> {
        parse(y, Path::new("nodes-config.yaml")).unwrap_err().lines()
    }

    #[test]
    fn syntax_error_names_file_and_position() {
        let e = errs("hosts: [\n  - a: 1\n b");
        assert_eq!(e.len(), 1);
        assert!(
            e[0].starts_with("nodes-config.yaml: not valid YAML: line "),
            "{e:?}"
        );
    }

    #[test]
    fn partial_parse_keeps_the_rest_for_validation() {
        let (cfg, e) = parse_partial(
            "hosts:\n- hostname: a\n  colour: red\n  interfaces: [{name: eth0, macAddress: x}]\n- hostname: 5\n",
            Path::new("n.yaml"),
        )
        .unwrap();
        assert_eq!(cfg.hosts.len(), 2);
        assert_eq!(cfg.hosts[0].interfaces[0].mac_address, "x");
        assert_eq!(e.len(), 2, "{e:?}");
        let merged = merge_errors(
            e,
            vec![
                FieldError::new("hosts[1].hostname", "required"),
                FieldError::new("hosts[0].interfaces[0].macAddress", "bad"),
            ],
        );
        let paths: Vec<&str> = merged.iter().map(|e| e.path.as_str()).collect();
        assert_eq!(
            paths,
            [
                "hosts[0].colour",
                "hosts[1].hostname",
                "hosts[0].interfaces[0].macAddress"
            ]
        );
        assert!(parse_partial("hosts: [1]\n", Path::new("n.yaml")).is_err());
    }

    #[test]
    fn misplaced_keys_say_where_they_belong() {
        let e = errs("hosts:\n- hostname: a\n  macAddress: 52:54:00:00:00:01\n  cpuArchitecture: arm64\n");
        assert_eq!(
            e,
            vec![
                "hosts[0].macAddress: unknown field here; macAddress belongs in an entry of the host's interfaces list",
                "hosts[0].cpuArchitecture: unknown field here; cpuArchitecture belongs at the top level, not inside a host",
            ]
        );
    }
}
