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
    /// Where the base ISO would come from, in a dry run that has none at hand.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub base_iso_plan: Option<String>,
    /// Kernel arguments added (`fips=1`, `--karg`), PXE: the whole command line; without a
    /// boot artifacts base URL it ends with `coreos.live.rootfs_url=<where-you-serve>/node.<arch>-rootfs.img`,
    /// a placeholder to replace with the URL the rootfs is served at.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kargs: Option<String>,
    /// Compressed Ignition archive size and the room for it.
    pub ignition: IgnitionSize,
    /// Token lifetime.
    pub token: TokenSummary,
    /// The batch record (None with `--dry-run`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub batch: Option<String>,
    /// Earlier unexpired batches that listed exactly these hosts (same hostnames and MACs) and
    /// had no approval recorded: this run replaces them (their records are deleted once the
    /// new files are in place; with `--dry-run`, they would be).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub replaces_batches: Vec<String>,
    /// Warnings (also printed on stderr).
    pub warnings: Vec<String>,
    /// What the files hold.
    pub secrets_notice: String,
    /// What to do next.
    pub next_steps: Vec<String>,
    /// Dry run only: the files the Ignition would put on the node.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub ignition_files: Vec<IgnitionFile>,
}

/// One file of the node's Ignition (dry run listing).
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct IgnitionFile {
    /// Path on the node.
    pub path: String,
    /// Octal mode, e.g. `0600`.
    pub mode: String,
    /// Size of the contents in bytes.
    pub bytes: usize,
    /// Holds a secret (pull secret, tokens, key, proxy credentials): never shown.
    pub secret: bool,
    /// Shown contents (NetworkManager keyfiles, their secret values redacted).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub contents: Option<String>,
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
    /// Whole hours of life left at the time of the report.
    pub hours_left: u64,
    /// Life left, e.g. `47h 59m`, `35m` ([`human_duration`]).
    pub left: String,
    /// Why the stored tokens were not reused (absent when reused or there were none).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// `47h 59m`, `48h`, `35m`, `0m`: hours and minutes (seconds dropped), minutes shown whenever
/// they are not zero so that "under an hour" never reads as `0h`.
pub fn human_duration(d: std::time::Duration) -> String {
    let m = d.as_secs() / 60;
    match (m / 60, m % 60) {
        (0, m) => format!("{m}m"),
        (h, 0) => format!("{h}h"),
        (h, m) => format!("{h}h {m}m"),
    }
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
                    "DHCP".to_string()
                } else {
                    h.ips.join(",")
                }
            )
        })
        .collect::<Vec<_>>();
    // One host a line: a single line of them grew with the batch, and every row of the table
    // was padded to its width (2000 hosts: 22 s of padding).
    rows.push(("Hosts", hosts.join("\n")));
    if let Some(b) = &r.base_iso {
        let check = match (&b.source, &b.sha256) {
            (crate::base_iso::Source::File, _) => "given with --base-iso".to_string(),
            (s, Some(_)) => format!("{s}, sha256 ok"),
            (s, None) => s.to_string(),
        };
        rows.push(("Base ISO", format!("{}  {check}", b.name)));
    }
    if let Some(p) = &r.base_iso_plan {
        rows.push(("Base ISO", p.clone()));
    }
    let verb = if r.dry_run { "Would write" } else { "Wrote" };
    for (i, f) in r.files.iter().enumerate() {
        let v = if r.dry_run {
            if f.size > 0 {
                format!("{}  {}", f.path, human_size(f.size))
            } else {
                f.path.clone()
            }
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
    let how = match (r.token.reused, r.dry_run) {
        (true, false) => "reused".to_string(),
        (true, true) => "would be reused".to_string(),
        (false, d) => {
            let v = if d { "would be new" } else { "new" };
            match &r.token.reason {
                Some(why) => format!("{v}: {why}"),
                None => v.to_string(),
            }
        }
    };
    rows.push((
        "Token",
        format!(
            "valid until {} ({} left, {how})",
            r.token.expires_at, r.token.left
        ),
    ));
    if let Some(b) = &r.batch {
        rows.push((
            "Batch",
            format!("{b}  (ConfigMap in {})", crate::batch::NAMESPACE),
        ));
    }
    if !r.replaces_batches.is_empty() {
        rows.push((
            "Replaces",
            format!(
                "{} {}: listed exactly these hosts; {} (approve and monitor go by the new batch)",
                if r.replaces_batches.len() == 1 {
                    "batch"
                } else {
                    "batches"
                },
                r.replaces_batches.join(", "),
                if r.dry_run {
                    "its record would be deleted"
                } else {
                    "its record was deleted"
                }
            ),
        ));
    }
    rows.push(("Secrets", r.secrets_notice.clone()));
    for (i, f) in r.ignition_files.iter().enumerate() {
        rows.push((
            if i == 0 { "Ignition files" } else { "" },
            format!(
                "{} {} {}{}",
                f.mode,
                f.path,
                human_size(f.bytes as u64),
                if f.secret { "  (secret, not shown)" } else { "" }
            ),
        ));
    }
    if r.dry_run {
        for (i, w) in r.warnings.iter().enumerate() {
            rows.push((if i == 0 { "Warnings" } else { "" }, w.clone()));
        }
    }
    for (i, s) in r.next_steps.iter().enumerate() {
        rows.push((if i == 0 { "Next" } else { "" }, s.clone()));
    }
    // Warnings went to stderr as they arose; -o json|yaml carries them as data.
    let mut out = key_values(&rows);
    out.push('\n');
    // Keyfiles are reviewed as they are: multi-line, after the table.
    for f in r.ignition_files.iter().filter(|f| f.contents.is_some()) {
        out.push_str(&format!(
            "--- {}\n{}",
            f.path,
            f.contents.as_deref().unwrap_or("")
        ));
        if !out.ends_with('\n') {
            out.push('\n');
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_show_minutes_under_an_hour() {
        use std::time::Duration;
        assert_eq!(human_duration(Duration::from_secs(35 * 60 + 59)), "35m");
        assert_eq!(human_duration(Duration::from_secs(48 * 3600)), "48h");
        assert_eq!(
            human_duration(Duration::from_secs(47 * 3600 + 59 * 60)),
            "47h 59m"
        );
        assert_eq!(human_duration(Duration::ZERO), "0m");
    }

    #[test]
    fn sizes() {
        assert_eq!(human_size(999), "999 B");
        assert_eq!(human_size(1_200_000_000), "1.2 GB");
        assert_eq!(human_size(262_144), "262.1 kB");
    }
}
