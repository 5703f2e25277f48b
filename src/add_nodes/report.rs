//! What `add-nodes` tells the user on stdout: the `AddNodesReport` document (`-o json|yaml`,
//! `apiVersion: agent-day2/v1`, `kind: AddNodesReport`) or its table.

use serde::Serialize;

use crate::output::key_values;

/// The report. Fields are only ever added within v1.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct AddNodesReport {
    /// `agent-day2/v1`.
    pub api_version: &'static str,
    /// `AddNodesReport`.
    pub kind: &'static str,
    /// True for `--dry-run`: nothing was written.
    pub dry_run: bool,
    /// The cluster.
    pub cluster: ClusterSummary,
    /// The hosts of the batch.
    pub hosts: Vec<HostSummary>,
    /// The base ISO (None for `--config-image`, or a dry run without a local one).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub base_iso: Option<crate::base_iso::BaseIsoFile>,
    /// `iso`, `pxe` or `config-image`.
    pub output_kind: String,
    /// Files written (or, with `--dry-run`, that would be).
    pub files: Vec<FileSummary>,
    /// Kernel arguments added (`fips=1`, `--karg`), PXE: the whole command line.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kargs: Option<String>,
    /// Compressed Ignition archive size and the room for it.
    pub ignition: IgnitionSize,
    /// Token lifetime.
    pub token: TokenSummary,
    /// The batch record (None with `--dry-run`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub batch: Option<String>,
    /// Warnings (also printed on stderr).
    pub warnings: Vec<String>,
    /// What the files hold.
    pub secrets_notice: String,
    /// What to do next.
    pub next_steps: Vec<String>,
}

/// Cluster facts shown.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ClusterSummary {
    pub name: String,
    pub id: String,
    pub version: String,
    pub release_image: String,
    pub platform: String,
    pub architecture: String,
    pub api_url: String,
}

/// One host.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct HostSummary {
    pub hostname: String,
    pub macs: Vec<String>,
    /// Static addresses; empty for DHCP.
    pub ips: Vec<String>,
    /// `static` or `dhcp`.
    pub network: String,
}

/// One output file.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct FileSummary {
    /// Path as written (`--dir` joined with the name).
    pub path: String,
    /// Bytes (0 in a dry run).
    pub size: u64,
    /// Lowercase hex sha256 (empty in a dry run).
    pub sha256: String,
}

/// Ignition archive size.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct IgnitionSize {
    /// Uncompressed `config.ign` bytes.
    pub config_bytes: usize,
    /// Compressed archive bytes.
    pub archive_bytes: usize,
    /// The ISO's embed area in bytes (None for PXE and config images, which have no limit).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub area_bytes: Option<u64>,
}

/// Token facts.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TokenSummary {
    /// RFC 3339 UTC.
    pub expires_at: String,
    /// Reused from the Secret (true) or newly made (false).
    pub reused: bool,
    /// Hours of life left at the time of the report.
    pub hours_left: u64,
}

/// `1.2 GB`, `256 KiB`-style human sizes (decimal units as in the design example).
pub fn human_size(n: u64) -> String {
    const U: [&str; 5] = ["B", "kB", "MB", "GB", "TB"];
    let mut v = n as f64;
    let mut i = 0;
    while v >= 1000.0 && i < U.len() - 1 {
        v /= 1000.0;
        i += 1;
    }
    if i == 0 {
        format!("{n} B")
    } else {
        format!("{v:.1} {}", U[i])
    }
}

/// The human report.
pub fn render_table(r: &AddNodesReport) -> String {
    let c = &r.cluster;
    let mut rows: Vec<(&str, String)> = vec![(
        "Cluster",
        format!(
            "{} ({}, {}, {})  {}",
            c.name, c.version, c.platform, c.architecture, c.api_url
        ),
    )];
    let hosts = r
        .hosts
        .iter()
        .map(|h| {
            format!(
                "{} {} {}",
                h.hostname,
                h.macs.join(","),
                if h.ips.is_empty() {
                    "dhcp".to_string()
                } else {
                    h.ips.join(",")
                }
            )
        })
        .collect::<Vec<_>>();
    rows.push(("Hosts", hosts.join("   ")));
    if let Some(b) = &r.base_iso {
        let check = match (&b.source, &b.sha256) {
            (crate::base_iso::Source::File, _) => "given with --base-iso".to_string(),
            (s, Some(_)) => format!("{s}, sha256 ok"),
            (s, None) => s.to_string(),
        };
        rows.push(("Base ISO", format!("{}  {check}", b.name)));
    }
    let verb = if r.dry_run { "Would write" } else { "Wrote" };
    for (i, f) in r.files.iter().enumerate() {
        let v = if r.dry_run {
            f.path.clone()
        } else {
            format!(
                "{}  {}  sha256 {}",
                f.path,
                human_size(f.size),
                &f.sha256[..f.sha256.len().min(12)]
            )
        };
        rows.push((if i == 0 { verb } else { "" }, v));
    }
    if let Some(k) = &r.kargs {
        rows.push(("Kargs", k.clone()));
    }
    rows.push((
        "Ignition",
        match r.ignition.area_bytes {
            Some(a) => format!(
                "{} compressed of {} in the embed area",
                human_size(r.ignition.archive_bytes as u64),
                human_size(a)
            ),
            None => format!("{} compressed", human_size(r.ignition.archive_bytes as u64)),
        },
    ));
    rows.push((
        "Token",
        format!(
            "valid until {} ({}h left, {})",
            r.token.expires_at,
            r.token.hours_left,
            if r.token.reused { "reused" } else { "new" }
        ),
    ));
    if let Some(b) = &r.batch {
        rows.push((
            "Batch",
            format!("{b}  (ConfigMap in {})", crate::batch::NAMESPACE),
        ));
    }
    rows.push(("Secrets", r.secrets_notice.clone()));
    for (i, s) in r.next_steps.iter().enumerate() {
        rows.push((if i == 0 { "Next" } else { "" }, s.clone()));
    }
    // Warnings went to stderr as they arose; -o json|yaml carries them as data.
    let mut out = key_values(&rows);
    out.push('\n');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes() {
        assert_eq!(human_size(999), "999 B");
        assert_eq!(human_size(1_200_000_000), "1.2 GB");
        assert_eq!(human_size(262_144), "262.1 kB");
    }
}
