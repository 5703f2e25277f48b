//! `info`: what the plugin learns from the cluster, whether the cluster can take day-2 nodes,
//! and which permissions the user lacks.

use serde::Serialize;

use crate::cli::InfoArgs;
use crate::cluster::{self, ClusterModel};
use crate::error::{Error, Result};
use crate::kube_flags::KubeTarget;
use crate::output::{self, key_values, table};
use crate::permissions::{self, PermissionReport};

/// The `info -o json|yaml` document: `apiVersion: agent-day2/v1`, `kind: ClusterInfo`, then
/// the [`ClusterModel`] fields (camelCase), `permissions` and `canAddNodes`. Fields are only
/// ever added within v1.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ClusterInfo {
    /// Always `agent-day2/v1`.
    pub api_version: &'static str,
    /// Always `ClusterInfo`.
    pub kind: &'static str,
    /// The cluster model.
    #[serde(flatten)]
    pub model: ClusterModel,
    /// Permissions the user lacks.
    pub permissions: PermissionReport,
    /// True when [`ClusterModel::problems`] is empty.
    pub can_add_nodes: bool,
}

impl ClusterInfo {
    /// Wraps a model and a permission report into the versioned document.
    pub fn new(model: ClusterModel, permissions: PermissionReport) -> Self {
        let can_add_nodes = model.can_add_nodes();
        ClusterInfo {
            api_version: "agent-day2/v1",
            kind: "ClusterInfo",
            model,
            permissions,
            can_add_nodes,
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

/// Runs `info`: reads the cluster and checks permissions, renders the report.
/// Errors (exit 4) when a required read fails; the permission table is still printed then.
pub async fn run(target: &KubeTarget, args: &InfoArgs) -> Result<InfoOutcome> {
    let objects = cluster::fetch(target).await;
    let objects = match objects {
        Ok(o) => o,
        // Unreachable/401 make the permission check pointless too.
        Err(e @ (Error::Unreachable { .. } | Error::Unauthorized { .. })) => return Err(e),
        Err(e) => return Ok(partial(target, args, e).await),
    };
    let model = match ClusterModel::from_objects(&objects) {
        Ok(m) => m,
        Err(e) => return Ok(partial(target, args, e).await),
    };
    let perms = permissions::check(target).await?;
    let doc = ClusterInfo::new(model, perms);
    let stdout = output::render(args.output, &doc, || render_table(&doc))?;
    let error = (!doc.can_add_nodes).then(|| Error::ClusterUnsupported {
        reasons: doc.model.problems.clone(),
    });
    Ok(InfoOutcome { stdout, error })
}

/// A required read failed: print what we can (the missing permissions) and end with the error.
async fn partial(target: &KubeTarget, args: &InfoArgs, err: Error) -> InfoOutcome {
    let stdout = match permissions::check(target).await {
        Ok(perms) if args.output == crate::cli::OutputFormat::Table => render_permissions(&perms),
        // Machine output stays a single well-formed document or nothing.
        _ => String::new(),
    };
    InfoOutcome {
        stdout,
        error: Some(err),
    }
}

fn yes_no(b: bool) -> String {
    if b {
        "yes".into()
    } else {
        "no".into()
    }
}

fn or_none(v: &[String]) -> String {
    if v.is_empty() {
        "none".into()
    } else {
        v.join(", ")
    }
}

/// The human report (pure, for snapshot-like tests).
pub fn render_table(doc: &ClusterInfo) -> String {
    let m = &doc.model;
    let mut rows: Vec<(&str, String)> = vec![
        ("Cluster", format!("{} ({})", m.cluster.name, m.cluster.id)),
        ("Base domain", m.cluster.base_domain.clone()),
        ("API", m.cluster.api_url.clone()),
        ("API (internal)", m.cluster.api_int_url.clone()),
        ("Topology", m.cluster.control_plane_topology.clone()),
    ];
    let mut version = m.version.current.clone();
    if !m.version.supported {
        version.push_str("  (UNSUPPORTED: needs 4.18 or newer)");
    }
    if let Some(u) = &m.version.upgrade_in_progress {
        version.push_str(&format!("  (upgrade to {} in progress)", u.version));
    }
    rows.push(("Version", version));
    rows.push(("Release image", m.version.release_image.clone()));
    rows.push((
        "Platform",
        format!(
            "{}  ({})",
            m.platform.kind,
            if m.platform.day2_supported {
                "day-2 nodes supported"
            } else {
                "day-2 nodes NOT supported"
            }
        ),
    ));
    rows.push((
        "Architecture",
        format!(
            "{}  ({})",
            m.architecture.control_plane,
            if m.architecture.multi_arch {
                "multi-arch release: other architectures may join"
            } else {
                "single-arch release"
            }
        ),
    ));
    rows.push((
        "Machine networks",
        if m.machine_networks.cidrs.is_empty() {
            "none".into()
        } else {
            format!(
                "{}  (from {})",
                m.machine_networks.cidrs.join(", "),
                m.machine_networks.source
            )
        },
    ));
    rows.push((
        "MCS endpoint",
        format!(
            "{}  (CA {})",
            m.machine_config_server.url,
            if m.machine_config_server.ca_found {
                "found"
            } else {
                "NOT found"
            }
        ),
    ));
    rows.push((
        "Base ISO",
        match &m.base_iso {
            Some(iso) => format!("{}  sha256 {}", iso.location, iso.sha256),
            None => format!("none for {}", m.architecture.control_plane),
        },
    ));
    rows.push((
        "Proxy",
        match &m.proxy {
            Some(p) => format!(
                "http {}  https {}  noProxy {}",
                p.http_proxy.as_deref().unwrap_or("-"),
                p.https_proxy.as_deref().unwrap_or("-"),
                p.no_proxy.as_deref().unwrap_or("-")
            ),
            None => "none".into(),
        },
    ));
    rows.push((
        "Trust bundle",
        match &m.trust_bundle {
            Some(t) if t.found => format!(
                "ConfigMap openshift-config/{}  ({} certificates)",
                t.config_map, t.certificates
            ),
            Some(t) => format!("ConfigMap openshift-config/{}  (NOT found)", t.config_map),
            None => "none".into(),
        },
    ));
    let mirror_list = |e: &[cluster::MirrorEntry]| -> String {
        or_none(
            &e.iter()
                .map(|m| format!("{} -> {}", m.source, m.mirrors.join(" ")))
                .collect::<Vec<_>>(),
        )
    };
    rows.push(("Digest mirrors", mirror_list(&m.mirrors.digest_mirrors)));
    rows.push(("Tag mirrors", mirror_list(&m.mirrors.tag_mirrors)));
    rows.push(("ICSP mirrors", mirror_list(&m.mirrors.legacy_content_sources)));
    rows.push((
        "Registry CAs",
        match &m.mirrors.additional_trusted_ca {
            Some(n) => format!(
                "ConfigMap openshift-config/{n}: {}",
                or_none(&m.mirrors.trusted_ca_registries)
            ),
            None => "none".into(),
        },
    ));
    rows.push(("FIPS", yes_no(m.fips)));
    rows.push((
        "SSH key",
        if m.ssh.key_present {
            format!("yes ({})", m.ssh.keys.len())
        } else {
            "no".into()
        },
    ));
    rows.push(("Chrony config", yes_no(m.chrony_configured)));
    rows.push(("Cluster networks", or_none(&m.networks.cluster_networks)));
    rows.push(("Service networks", or_none(&m.networks.service_networks)));
    rows.push((
        "Can add nodes",
        if doc.can_add_nodes {
            "yes".into()
        } else {
            "NO".into()
        },
    ));
    let mut out = key_values(&rows);
    out.push_str("\n\n");
    out.push_str(&table(
        &["node", "roles", "arch", "addresses"],
        m.nodes
            .iter()
            .map(|n| {
                vec![
                    n.name.clone(),
                    or_none(&n.roles),
                    n.architecture.clone(),
                    n.addresses
                        .iter()
                        .map(|a| format!("{}={}", a.kind, a.address))
                        .collect::<Vec<_>>()
                        .join(" "),
                ]
            })
            .collect(),
    ));
    out.push('\n');
    if !m.warnings.is_empty() {
        out.push('\n');
        for w in &m.warnings {
            out.push_str(&format!("warning: {w}\n"));
        }
    }
    if !m.problems.is_empty() {
        out.push('\n');
        for p in &m.problems {
            out.push_str(&format!("problem: {p}\n"));
        }
    }
    out.push('\n');
    out.push_str(&render_permissions(&doc.permissions));
    out
}

/// The permission part of the report.
pub fn render_permissions(p: &PermissionReport) -> String {
    if let Some(e) = &p.error {
        return format!("Permissions  {e}\n");
    }
    if p.missing.is_empty() {
        return format!("Permissions  all {} needed permissions granted\n", p.checked);
    }
    let mut s = format!(
        "Missing permissions ({} of {} checked):\n",
        p.missing.len(),
        p.checked
    );
    s.push_str(&table(
        &["permission", "needed by"],
        p.missing
            .iter()
            .map(|m| vec![m.describe(), m.needed_by.join(", ")])
            .collect(),
    ));
    s.push('\n');
    s
}
