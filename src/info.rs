//! `info`: what the plugin learns from the cluster, whether the cluster can take day-2 nodes,
//! and which permissions the user lacks.
//!
//! A fact whose object could not be read (403, server error) is unknown, never "none": the
//! table shows `unknown (cannot read ...)`, the JSON/YAML document `null` plus an entry in
//! `unreadable`, and `info` ends with an `error:` line per such object and exit 4. A required
//! read that fails still gives the partial report (what was read) before its error.

use std::time::Duration;

use serde::{Serialize, Serializer};
use serde_json::Value;

use crate::cli::InfoArgs;
use crate::cluster::{self, ClusterModel};
use crate::error::{Error, ResourceRef, Result};
use crate::kube::KubeTarget;
use crate::output::{self, display, key_values, table};
use crate::permissions::{self, PermissionReport};

/// Deadline of each single request of `info` when `--request-timeout` is not given: a server
/// that accepts the connection and never answers ends with exit 5 instead of hanging.
pub const DEFAULT_REQUEST_DEADLINE: Duration = Duration::from_secs(30);

/// The `info -o json|yaml` document: `apiVersion: agent-day2/v1`, `kind: ClusterInfo`, then
/// the [`ClusterModel`] fields (camelCase), `permissions`, `canAddNodes` and `errors`. Fields
/// are only ever added within v1.
///
/// Unknown facts: every field named in an `unreadable[].fields` entry (dotted paths, e.g.
/// `fips`, `mirrors.digestMirrors`) is `null`, and that entry names the resource and the
/// reason. A field that is `null` without being listed there means "none" (e.g. `proxy`).
/// `errors` holds the text of each error `info` ends with (empty when it exits 0).
#[derive(Debug, Clone)]
pub struct ClusterInfo {
    /// Always `agent-day2/v1`.
    pub api_version: &'static str,
    /// Always `ClusterInfo`.
    pub kind: &'static str,
    /// The cluster model.
    pub model: ClusterModel,
    /// Permissions the user lacks.
    pub permissions: PermissionReport,
    /// True when add-nodes can go ahead: no [`ClusterModel::problems`] and every object
    /// add-nodes cannot do without was read and usable (an unknown fact add-nodes needs makes
    /// it false; `errors` then says which).
    pub can_add_nodes: bool,
    /// The `error:` lines `info` ends with (cannot read X, cluster unsupported), as text.
    pub errors: Vec<String>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct RawInfo<'a> {
    api_version: &'static str,
    kind: &'static str,
    #[serde(flatten)]
    model: &'a ClusterModel,
    permissions: &'a PermissionReport,
    can_add_nodes: bool,
    errors: &'a [String],
}

impl Serialize for ClusterInfo {
    fn serialize<S: Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        use serde::ser::Error as _;
        let mut v = serde_json::to_value(RawInfo {
            api_version: self.api_version,
            kind: self.kind,
            model: &self.model,
            permissions: &self.permissions,
            can_add_nodes: self.can_add_nodes,
            errors: &self.errors,
        })
        .map_err(S::Error::custom)?;
        for u in &self.model.unreadable {
            for f in &u.fields {
                set_null(&mut v, f);
            }
        }
        v.serialize(s)
    }
}

/// Sets the dotted `path` of `v` to null, if its parent exists.
fn set_null(v: &mut Value, path: &str) {
    let mut cur = v;
    let mut parts = path.split('.').peekable();
    while let Some(p) = parts.next() {
        let Some(obj) = cur.as_object_mut() else { return };
        if parts.peek().is_none() {
            obj.insert(p.to_string(), Value::Null);
            return;
        }
        match obj.get_mut(p) {
            Some(next) if next.is_object() => cur = next,
            // Parent unknown already (null) or absent: nothing finer to mark.
            _ => return,
        }
    }
}

impl ClusterInfo {
    /// Wraps a model and a permission report into the versioned document (no errors).
    pub fn new(model: ClusterModel, permissions: PermissionReport) -> Self {
        let can_add_nodes = model.can_add_nodes();
        ClusterInfo {
            api_version: "agent-day2/v1",
            kind: "ClusterInfo",
            model,
            permissions,
            can_add_nodes,
            errors: vec![],
        }
    }
}

/// What `info` prints and how it ends.
pub struct InfoOutcome {
    /// Text for stdout.
    pub stdout: String,
    /// The error to print after the report (decides the exit code), if any.
    pub error: Option<Error>,
}

/// `info`'s hint under a 403 when the permission check ran: the report lists what is missing.
pub const FORBIDDEN_HINT: &str = "the \"Missing permissions\" part of the report above (permissions.missing \
     with -o json) lists what your user lacks; ask for it, or use cluster-admin (README \"Permissions\")";

/// `info`'s hint under a 403 when the permission check itself was refused.
pub const FORBIDDEN_HINT_UNCHECKED: &str = "your user may not even ask which permissions it has \
     (SelfSubjectAccessReview); ask for cluster-admin or the permissions in README \"Permissions\"";

fn resource_of(e: &Error) -> Option<&ResourceRef> {
    match e {
        Error::Forbidden { resource, .. }
        | Error::NotFound { resource, .. }
        | Error::Api { resource, .. }
        | Error::BadObject { resource, .. }
        | Error::Unreadable { resource, .. } => Some(resource),
        _ => None,
    }
}

/// Runs `info`: reads the cluster and checks permissions, renders the report, and returns
/// the errors to end with: one per required read that failed, one per unreadable object
/// (its facts unknown), and "cannot take day-2 nodes" for the other problems (exit 4).
/// Unreachable, 401, refused impersonation (exit 4) and timeouts (exit 5) stop it with no
/// report. Each request has [`DEFAULT_REQUEST_DEADLINE`] unless `--request-timeout` is given.
pub async fn run(target: &KubeTarget, args: &InfoArgs) -> Result<InfoOutcome> {
    let mut target = target.clone();
    if !target.request_timeout_given {
        target.deadline = Some(DEFAULT_REQUEST_DEADLINE);
    }
    let (objects, fetch_errors) = cluster::fetch_all(&target).await?;
    let (model, model_errors) = ClusterModel::from_objects_partial(&objects);
    let stops_add_nodes = !model_errors.is_empty();
    let perms = permissions::check(&target).await?;

    let mut errors = fetch_errors;
    for e in model_errors {
        let named = resource_of(&e).is_some_and(|r| errors.iter().any(|x| resource_of(x) == Some(r)));
        if !named {
            errors.push(e);
        }
    }
    for u in model.unreadable.iter().filter(|u| !u.required) {
        if let Some(r) = &u.resource_ref {
            errors.push(Error::Unreadable {
                resource: r.clone(),
                reason: u.reason.clone(),
                unknown: u.what.clone(),
            });
        }
    }
    let other_problems = model.other_problems();
    if !other_problems.is_empty() {
        errors.push(Error::ClusterUnsupported {
            reasons: other_problems,
        });
    }
    // A 403 here: the generic hint says "`oc agent-day2 info` shows what is missing", which is
    // this command; point at the report instead.
    let errors: Vec<Error> = errors
        .into_iter()
        .map(|e| match e {
            Error::Forbidden { .. } => Error::Hinted {
                error: Box::new(e),
                hint: if perms.error.is_some() {
                    FORBIDDEN_HINT_UNCHECKED.to_string()
                } else {
                    FORBIDDEN_HINT.to_string()
                },
            },
            e => e,
        })
        .collect();
    let mut errors = errors;
    let mut doc = ClusterInfo::new(model, perms);
    // add-nodes builds its model with `from_objects`, which stops on any of these (a required
    // object unreadable or unusable): the verdict must say so (issue 22 item 2: "yes" and exit
    // 4 together).
    doc.can_add_nodes &= !stops_add_nodes;
    doc.errors = errors.iter().map(|e| e.to_string()).collect();
    let stdout = output::render(args.output, &doc, || render_table(&doc))?;
    let error = match errors.len() {
        0 => None,
        1 => errors.pop(),
        _ => Some(Error::Many(errors)),
    };
    Ok(InfoOutcome { stdout, error })
}

fn yes_no(b: bool) -> String {
    if b {
        "yes".into()
    } else {
        "no".into()
    }
}

/// Escaped values joined with ", ", or `none`.
fn or_none(v: &[String]) -> String {
    if v.is_empty() {
        "none".into()
    } else {
        v.iter().map(|s| display(s)).collect::<Vec<_>>().join(", ")
    }
}

fn plural(n: usize, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

/// The human report (pure, for snapshot-like tests). Every cluster-provided value is escaped
/// with [`output::display`]; an unknown fact reads `unknown (cannot read R: reason)`.
pub fn render_table(doc: &ClusterInfo) -> String {
    let m = &doc.model;
    // `unknown (...)` when `field` (or a parent) could not be read.
    let unknown = |field: &str| -> Option<String> {
        m.unreadable.iter().find(|u| u.covers(field)).map(|u| {
            format!(
                "unknown (cannot read {}: {})",
                display(&u.resource),
                display(&u.reason)
            )
        })
    };
    let val = |field: &str, v: &dyn Fn() -> String| unknown(field).unwrap_or_else(v);
    let mut rows: Vec<(&str, String)> = vec![
        (
            "Cluster",
            format!(
                "{} ({})",
                val("cluster.name", &|| display(&m.cluster.name)),
                val("cluster.id", &|| display(&m.cluster.id))
            ),
        ),
        (
            "Base domain",
            val("cluster.baseDomain", &|| {
                // Where name and domain come from, when not both sources agree.
                match m.cluster.identity_source.as_str() {
                    "install-config+apiServerURL" | "" => display(&m.cluster.base_domain),
                    src => format!("{} (name and domain from {src})", display(&m.cluster.base_domain)),
                }
            }),
        ),
        ("API", val("cluster.apiURL", &|| display(&m.cluster.api_url))),
        (
            "API (internal)",
            val("cluster.apiIntURL", &|| display(&m.cluster.api_int_url)),
        ),
        (
            "Topology",
            val("cluster.controlPlaneTopology", &|| {
                display(&m.cluster.control_plane_topology)
            }),
        ),
    ];
    rows.push((
        "Version",
        val("version", &|| {
            let mut version = display(&m.version.current);
            if !m.version.supported {
                let (major, minor) = crate::cluster::MIN_VERSION;
                version.push_str(&format!("  (UNSUPPORTED: needs {major}.{minor} or newer)"));
            }
            if let Some(u) = &m.version.upgrade_in_progress {
                version.push_str(&format!("  (upgrade to {} in progress)", display(&u.version)));
            }
            version
        }),
    ));
    rows.push((
        "Release image",
        val("version", &|| display(&m.version.release_image)),
    ));
    rows.push((
        "Platform",
        val("platform", &|| {
            format!(
                "{}  ({})",
                display(&m.platform.kind),
                if m.platform.day2_supported {
                    "day-2 nodes supported"
                } else {
                    "day-2 nodes NOT supported"
                }
            )
        }),
    ));
    rows.push((
        "Architecture",
        val("architecture.controlPlane", &|| {
            format!(
                "{}  ({})",
                display(&m.architecture.control_plane),
                if m.architecture.multi_arch {
                    "multi-arch release: other architectures may join"
                } else {
                    "single-arch release"
                }
            )
        }),
    ));
    rows.push((
        "Machine networks",
        val("machineNetworks", &|| {
            if m.machine_networks.cidrs.is_empty() {
                "none".into()
            } else {
                format!(
                    "{}  (from {})",
                    or_none(&m.machine_networks.cidrs),
                    display(&m.machine_networks.source)
                )
            }
        }),
    ));
    rows.push((
        "MCS endpoint",
        format!(
            "{}  (CA {})",
            val("machineConfigServer.url", &|| display(
                &m.machine_config_server.url
            )),
            unknown("machineConfigServer.caFound").unwrap_or_else(|| if m.machine_config_server.ca_found {
                "found".into()
            } else {
                "NOT found".into()
            })
        ),
    ));
    rows.push((
        "Base ISO",
        val("baseIso", &|| match &m.base_iso {
            Some(iso) => format!("{}  sha256 {}", display(&iso.location), display(&iso.sha256)),
            None => format!("none usable for {}", display(&m.architecture.control_plane)),
        }),
    ));
    rows.push((
        "Proxy",
        val("proxy", &|| match &m.proxy {
            Some(p) => format!(
                "http {}  https {}  noProxy {}",
                display(p.http_proxy.as_deref().unwrap_or("-")),
                display(p.https_proxy.as_deref().unwrap_or("-")),
                display(p.no_proxy.as_deref().unwrap_or("-"))
            ),
            None => "none".into(),
        }),
    ));
    rows.push((
        "Trust bundle",
        val("trustBundle", &|| match &m.trust_bundle {
            Some(t) if t.found => format!(
                "ConfigMap openshift-config/{}  ({})",
                display(&t.config_map),
                plural(t.certificates, "certificate", "certificates")
            ),
            Some(t) => format!(
                "ConfigMap openshift-config/{}  (NOT found)",
                display(&t.config_map)
            ),
            None => "none".into(),
        }),
    ));
    let mirror_list = |e: &[cluster::MirrorEntry]| -> String {
        if e.is_empty() {
            return "none".into();
        }
        e.iter()
            .map(|m| {
                format!(
                    "{} -> {}",
                    display(&m.source),
                    m.mirrors.iter().map(|x| display(x)).collect::<Vec<_>>().join(" ")
                )
            })
            .collect::<Vec<_>>()
            .join(", ")
    };
    rows.push((
        "Digest mirrors",
        val("mirrors.digestMirrors", &|| {
            mirror_list(&m.mirrors.digest_mirrors)
        }),
    ));
    rows.push((
        "Tag mirrors",
        val("mirrors.tagMirrors", &|| mirror_list(&m.mirrors.tag_mirrors)),
    ));
    rows.push((
        "ICSP mirrors",
        val("mirrors.legacyContentSources", &|| {
            mirror_list(&m.mirrors.legacy_content_sources)
        }),
    ));
    rows.push((
        "Registry CAs",
        unknown("mirrors.additionalTrustedCA")
            .or_else(|| unknown("mirrors.trustedCARegistries"))
            .unwrap_or_else(|| match &m.mirrors.additional_trusted_ca {
                Some(n) => format!(
                    "ConfigMap openshift-config/{}: {}",
                    display(n),
                    or_none(&m.mirrors.trusted_ca_registries)
                ),
                None => "none".into(),
            }),
    ));
    rows.push(("FIPS", val("fips", &|| yes_no(m.fips))));
    rows.push((
        "SSH key",
        val("ssh", &|| {
            if m.ssh.key_present {
                format!("yes ({})", m.ssh.keys.len())
            } else {
                "no".into()
            }
        }),
    ));
    rows.push((
        "Chrony config",
        val("chronyConfigured", &|| yes_no(m.chrony_configured)),
    ));
    rows.push((
        "Cluster networks",
        val("networks", &|| or_none(&m.networks.cluster_networks)),
    ));
    rows.push((
        "Service networks",
        val("networks", &|| or_none(&m.networks.service_networks)),
    ));
    rows.push((
        "Pull secret",
        val("pullSecretFound", &|| {
            if m.pull_secret_found {
                "found".into()
            } else {
                "NOT usable".into()
            }
        }),
    ));
    rows.push((
        "Can add nodes",
        if doc.can_add_nodes {
            "yes".into()
        } else if doc.errors.is_empty() {
            "NO".into()
        } else {
            format!("NO ({}: see below)", plural(doc.errors.len(), "error", "errors"))
        },
    ));
    let mut out = key_values(&rows);
    out.push_str("\n\n");
    match unknown("nodes") {
        Some(u) => out.push_str(&format!("Nodes  {u}")),
        None => out.push_str(&table(
            &["node", "roles", "arch", "addresses"],
            m.nodes
                .iter()
                .map(|n| {
                    vec![
                        display(&n.name),
                        or_none(&n.roles),
                        display(&n.architecture),
                        n.addresses
                            .iter()
                            .map(|a| format!("{}={}", display(&a.kind), display(&a.address)))
                            .collect::<Vec<_>>()
                            .join(" "),
                    ]
                })
                .collect(),
        )),
    }
    out.push('\n');
    if !m.warnings.is_empty() {
        out.push('\n');
        for w in &m.warnings {
            out.push_str(&format!("warning: {}\n", output::escape_for_display(w, 2000)));
        }
    }
    if !m.problems.is_empty() {
        out.push('\n');
        for p in &m.problems {
            out.push_str(&format!("problem: {}\n", output::escape_for_display(p, 2000)));
        }
    }
    out.push('\n');
    out.push_str(&render_permissions(&doc.permissions));
    out
}

/// The permission part of the report.
pub fn render_permissions(p: &PermissionReport) -> String {
    if let Some(e) = &p.error {
        return format!("Permissions  {}\n", output::escape_for_display(e, 2000));
    }
    if p.missing.is_empty() {
        return format!("Permissions  all {} needed permissions granted\n", p.checked);
    }
    let mut s = format!(
        "Missing permissions ({} of {} checked):\n",
        p.missing.len(),
        p.checked
    );
    // Migrate runs once per cluster, with a role granted for it: permissions only migrate needs
    // are counted per subcommand instead of listed (`-o json` lists every one).
    let migrate_only =
        |m: &&crate::permissions::Permission| m.needed_by.iter().all(|c| c.starts_with("migrate"));
    let (only_migrate, rest): (Vec<_>, Vec<_>) = p.missing.iter().partition(migrate_only);
    if !rest.is_empty() {
        s.push_str(&table(
            &["permission", "needed by"],
            rest.iter()
                .map(|m| vec![m.describe(), m.needed_by.join(", ")])
                .collect(),
        ));
        if !s.ends_with('\n') {
            s.push('\n');
        }
    }
    // Each permission counted once, so the lines add up to the total above: under the
    // subcommand that needs the most of them (migrate status's reads are all migrate import's
    // too), with how many of those the others share.
    let mut needs: std::collections::BTreeMap<&str, usize> = Default::default();
    for m in &only_migrate {
        for c in &m.needed_by {
            *needs.entry(c.as_str()).or_default() += 1;
        }
    }
    // command → (count, other command → shared count)
    type Shared<'a> = std::collections::BTreeMap<&'a str, usize>;
    let mut per_command: std::collections::BTreeMap<&str, (usize, Shared)> = Default::default();
    for m in &only_migrate {
        let Some(home) = m
            .needed_by
            .iter()
            .map(String::as_str)
            .max_by_key(|c| (needs[c], std::cmp::Reverse(*c)))
        else {
            continue;
        };
        let e = per_command.entry(home).or_default();
        e.0 += 1;
        for other in m.needed_by.iter().filter(|c| c.as_str() != home) {
            *e.1.entry(other.as_str()).or_default() += 1;
        }
    }
    for (command, (n, shared)) in per_command {
        let also: Vec<String> = shared
            .iter()
            .map(|(c, k)| format!("{k} of them also for {c}"))
            .collect();
        s.push_str(&format!(
            "{command}: {n} more permission{} missing{} (ClusterRole {} in deploy/rbac.yaml; -o json lists them)\n",
            if n == 1 { "" } else { "s" },
            if also.is_empty() { String::new() } else { format!(", {}", also.join(", ")) },
            if command == "migrate wait" { "agent-day2-migrate-wait" } else { "agent-day2-migrate" },
        ));
    }
    s.push('\n');
    s
}
