//! `add-nodes` flags resolved once (docs/design.md "Code layout", ripgrep's lowargs → hiargs): the
//! clap struct [`AddNodesArgs`] holds the raw flags, [`Plan::from_args`] checks every one of
//! them (with [`super::flag_checks`]) before any cluster or registry work, and the steps of
//! `make` read only the [`Plan`]. Nothing after this module sees a clap type.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use super::basics::{invalid, OutputKind, DEFAULT_TTL};
use super::flag_checks;
use super::token::TokenRequest;
use crate::cli::{AddNodesArgs, OutputFormat};
use crate::error::{Error, Result};
use crate::ignition;
use crate::nodes_config::FlagsHost;

/// Everything one `add-nodes` run was asked for, checked.
#[derive(Debug, Clone)]
pub struct Plan {
    /// ISO, PXE files or appliance config image (`--pxe`, `--config-image`).
    pub kind: OutputKind,
    /// `--dir`: checked writable (or creatable) unless a dry run; created only when writing.
    pub dir: PathBuf,
    /// `--output-name`: a plain file name that fits with its temporary name (ISO and config
    /// image only).
    pub output_name: Option<String>,
    /// `--token-ttl` (parsed, 1h..8760h) and `--new-token`.
    pub token: TokenRequest,
    /// `--boot-artifacts-base-url`: an http(s) URL without the trailing `/` (PXE only).
    pub base_url: Option<String>,
    /// `--node-labels`, parsed, none in a namespace Kubernetes reserves.
    pub node_labels: BTreeMap<String, String>,
    /// `--karg`, one kernel argument each (`fips=1` is added later from the cluster).
    pub kargs: Vec<String>,
    /// `--pool`, else `worker` ([`ignition::DEFAULT_POOL`]); never the control plane's.
    pub pool: String,
    /// `--base-iso` (not with `--config-image`).
    pub base_iso: Option<PathBuf>,
    /// `--registry-config`.
    pub registry_config: Option<PathBuf>,
    /// `--insecure`.
    pub insecure: bool,
    /// `--dry-run`: write nothing.
    pub dry_run: bool,
    /// `--force`: replace existing outputs.
    pub force: bool,
    /// `-o`.
    pub output: OutputFormat,
    /// Where the hosts come from.
    pub nodes: NodesSource,
    /// `--reimage HOSTNAME`: hosts whose MACs may already belong to a joined node or to a
    /// host of another live batch (the machine is being re-imaged on purpose).
    pub reimage: BTreeSet<String>,
}

/// Where the hosts come from: one host from flags, or a nodes-config file.
#[derive(Debug, Clone)]
pub enum NodesSource {
    /// `--mac-address` and its companions.
    Flags(FlagsHost),
    /// `--nodes-config FILE`, or `DIR/nodes-config.yaml`; `field` is how errors name it.
    File {
        /// The file.
        path: PathBuf,
        /// `--nodes-config` or `--nodes-config (default DIR/nodes-config.yaml)`.
        field: &'static str,
    },
}

impl Plan {
    /// Checks every flag, in this order (the order users see errors in): `--token-ttl`,
    /// `--boot-artifacts-base-url`, `--node-labels`, `--karg`, `--pool`, `--output-name`
    /// (length), the cache directory, `--output-name` with `--pxe` (exit 2) and as a plain
    /// name, `--karg`/`--base-iso` with `--config-image` (exit 2), `--reimage` names, and
    /// `--dir` writable (not for a dry run; checked, not created: a run that fails later
    /// leaves no directory).
    ///
    /// Errors: exit 3 naming the flag ([`Error::InvalidInput`]), exit 2 for flags that do not
    /// go together ([`Error::Usage`]).
    pub fn from_args(args: &AddNodesArgs) -> Result<Plan> {
        let kind = if args.pxe {
            OutputKind::Pxe
        } else if args.config_image {
            OutputKind::ConfigImage
        } else {
            OutputKind::Iso
        };
        let ttl = parse_ttl(args.token_ttl.as_deref().unwrap_or(DEFAULT_TTL))?;
        let base_url = match &args.boot_artifacts_base_url {
            Some(u) => Some(check_base_url(u, "--boot-artifacts-base-url")?),
            None => None,
        };
        let node_labels = parse_labels(args.node_labels.as_deref())?;
        flag_checks::check_node_labels(&node_labels)?;
        flag_checks::check_kargs(&args.kargs)?;
        if let Some(p) = &args.pool {
            flag_checks::check_pool_name(p)?;
        }
        if let Some(n) = &args.output_name {
            flag_checks::check_output_name(n)?;
        }
        flag_checks::check_cache_root()?;
        if let Some(n) = &args.output_name {
            if kind == OutputKind::Pxe {
                return Err(Error::Usage("--output-name names the ISO or the config image; PXE file names are fixed (node.<arch>-vmlinuz, ...)".into()));
            }
            if n.is_empty() || n.contains('/') || n.starts_with('.') || n.contains('\0') {
                return Err(invalid("--output-name", format!("{n:?} is not a plain file name (no '/', not starting with '.'); put the directory in --dir")));
            }
        }
        if kind == OutputKind::ConfigImage && !args.kargs.is_empty() {
            return Err(Error::Usage("--karg cannot be used with --config-image: appliance machines boot their disk image, whose kernel arguments the config image cannot change".into()));
        }
        if kind == OutputKind::ConfigImage && args.base_iso.is_some() {
            return Err(Error::Usage("--base-iso is not used with --config-image (the config image is not bootable and needs no base ISO)".into()));
        }
        let reimage = check_reimage(&args.reimage)?;
        if !args.dry_run {
            check_dir(&args.dir)?;
        }
        let nodes = match &args.mac_address {
            Some(mac) => NodesSource::Flags(FlagsHost {
                mac: mac.clone(),
                hostname: args.hostname.clone(),
                network_config_path: args.network_config_path.clone(),
                root_device_hints: args.root_device_hints.clone(),
                cpu_architecture: args.cpu_architecture.clone(),
                ssh_key_path: args.ssh_key_path.clone(),
            }),
            None => match &args.nodes_config {
                Some(p) => NodesSource::File {
                    path: p.clone(),
                    field: "--nodes-config",
                },
                None => NodesSource::File {
                    path: args.dir.join("nodes-config.yaml"),
                    field: "--nodes-config (default DIR/nodes-config.yaml)",
                },
            },
        };
        Ok(Plan {
            kind,
            dir: args.dir.clone(),
            output_name: args.output_name.clone(),
            token: TokenRequest {
                ttl,
                explicit: args.token_ttl.is_some(),
                new_token: args.new_token,
            },
            base_url,
            node_labels,
            kargs: args.kargs.clone(),
            pool: args
                .pool
                .clone()
                .unwrap_or_else(|| ignition::DEFAULT_POOL.to_string()),
            base_iso: args.base_iso.clone(),
            registry_config: args.registry_config.clone(),
            insecure: args.insecure,
            dry_run: args.dry_run,
            force: args.force,
            output: args.output,
            nodes,
            reimage,
        })
    }
}

/// `--reimage HOSTNAME` (repeatable): each a lowercase DNS-1123 subdomain (a hostname of the
/// nodes config), given once. That it names a host of this run is checked with the hosts.
fn check_reimage(names: &[String]) -> Result<BTreeSet<String>> {
    let mut out = BTreeSet::new();
    for n in names {
        if !crate::k8s_names::is_dns1123_subdomain(n) {
            return Err(invalid(
                "--reimage",
                format!("{n:?} is not a hostname (lowercase letters, digits, '-' and '.'); give the hostname of a host of this run, e.g. --reimage worker-0"),
            ));
        }
        if !out.insert(n.clone()) {
            return Err(invalid("--reimage", format!("{n:?} is given twice")));
        }
    }
    Ok(out)
}

/// `--boot-artifacts-base-url` / `bootArtifactsBaseURL`: an absolute http(s) URL without
/// spaces, query or fragment (it is joined with file names in the `.ipxe` script and the
/// kernel command line). Returns it without trailing `/`; errors name `field`.
pub(super) fn check_base_url(u: &str, field: &str) -> Result<String> {
    let ok_scheme = u.starts_with("http://") || u.starts_with("https://");
    let host = u
        .split_once("://")
        .map(|(_, r)| r.split('/').next().unwrap_or(""))
        .unwrap_or("");
    if !ok_scheme
        || host.is_empty()
        || u.chars().any(|c| c.is_whitespace() || c.is_control())
        || u.contains(['?', '#'])
    {
        return Err(invalid(
            field,
            format!("{u:?} is not an http:// or https:// URL of a directory (no spaces, query or fragment), e.g. http://192.168.111.1:8000/pxe"),
        ));
    }
    Ok(u.trim_end_matches('/').to_string())
}

/// `--token-ttl`: a Go-style duration (`48h`, `90m`, `2h30m`), at least 1 h (a node needs time
/// to boot and install), at most 8760 h.
pub fn parse_ttl(s: &str) -> Result<std::time::Duration> {
    use std::time::Duration;
    let d = crate::duration::parse_duration(s)
        .map_err(|e| {
            // The parser's own messages carry an example already, some of them.
            let e = if e.contains("e.g.") {
                e
            } else {
                format!("{e}; e.g. 48h")
            };
            invalid("--token-ttl", format!("{s:?}: {e}"))
        })?
        .ok_or_else(|| invalid("--token-ttl", format!("{s:?} is zero; give e.g. 48h")))?;
    if d < Duration::from_secs(3600) || d > Duration::from_secs(8760 * 3600) {
        return Err(invalid(
            "--token-ttl",
            format!("{s:?} is outside 1h..8760h; nodes need time to boot and install, e.g. 48h"),
        ));
    }
    Ok(d)
}

/// `--node-labels k=v,k2=v2`: Kubernetes label keys (optional DNS-subdomain prefix `/`, name of
/// at most 63 `[A-Za-z0-9._-]` starting and ending alphanumeric) and values (empty or the same
/// name rule). `node-role.kubernetes.io/*` other than worker-like roles is allowed: the kubelet
/// cannot set it, approve applies it.
pub fn parse_labels(s: Option<&str>) -> Result<BTreeMap<String, String>> {
    let mut out = BTreeMap::new();
    let Some(s) = s.filter(|s| !s.trim().is_empty()) else {
        return Ok(out);
    };
    fn name_ok(n: &str) -> bool {
        !n.is_empty()
            && n.len() <= 63
            && n.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_' || b == b'.')
            && n.as_bytes()[0].is_ascii_alphanumeric()
            && n.as_bytes()[n.len() - 1].is_ascii_alphanumeric()
    }
    fn prefix_ok(p: &str) -> bool {
        !p.is_empty()
            && p.len() <= 253
            && p.split('.').all(|l| {
                !l.is_empty()
                    && l.len() <= 63
                    && l.bytes()
                        .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
                    && !l.starts_with('-')
                    && !l.ends_with('-')
            })
    }
    for item in s.split(',') {
        let item = item.trim();
        let (k, v) = item.split_once('=').ok_or_else(|| {
            invalid(
                "--node-labels",
                format!("{item:?} is not KEY=VALUE, e.g. --node-labels zone=a,rack=r1"),
            )
        })?;
        let key_ok = match k.split_once('/') {
            Some((p, n)) => prefix_ok(p) && name_ok(n),
            None => name_ok(k),
        };
        if !key_ok {
            return Err(invalid("--node-labels", format!("{k:?} is not a Kubernetes label key ([prefix/]name, name of at most 63 letters, digits, '-', '_', '.')")));
        }
        if !v.is_empty() && !name_ok(v) {
            return Err(invalid("--node-labels", format!("value {v:?} of {k:?} is not a Kubernetes label value (at most 63 letters, digits, '-', '_', '.', starting and ending alphanumeric)")));
        }
        if out.insert(k.to_string(), v.to_string()).is_some() {
            return Err(invalid("--node-labels", format!("{k:?} is given twice")));
        }
    }
    Ok(out)
}

/// `--dir` before any work: an existing writable directory, or a missing one whose nearest
/// existing ancestor is a writable directory (created later by [`super::prepare_dir`]).
/// Creates nothing that stays.
fn check_dir(dir: &Path) -> Result<()> {
    if dir.exists() {
        return probe_dir(dir, dir);
    }
    let mut anc = dir.parent();
    while let Some(a) = anc {
        let a = if a.as_os_str().is_empty() {
            Path::new(".")
        } else {
            a
        };
        if a.exists() {
            if !a.is_dir() {
                return Err(invalid(
                    "--dir",
                    format!(
                        "cannot write to {}: {} is not a directory; choose a directory you can write to",
                        dir.display(),
                        a.display()
                    ),
                ));
            }
            return probe_dir(a, dir);
        }
        anc = a.parent();
    }
    Ok(())
}

/// A file can be created in `at` (removed at once); errors name `dir` (`--dir`).
pub(super) fn probe_dir(at: &Path, dir: &Path) -> Result<()> {
    if !at.is_dir() {
        return Err(invalid("--dir", format!("{} is not a directory", at.display())));
    }
    let probe = at.join(format!(".agent-day2-probe-{}", std::process::id()));
    match std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&probe)
    {
        Ok(_) => {
            let _ = std::fs::remove_file(&probe);
            Ok(())
        }
        Err(e) => Err(super::basics::dir_error(dir, e)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn ttl_and_labels() {
        assert_eq!(parse_ttl("48h").unwrap(), Duration::from_secs(48 * 3600));
        assert!(parse_ttl("10m").unwrap_err().to_string().contains("--token-ttl"));
        assert!(parse_ttl("x").is_err());
        let l = parse_labels(Some("zone=a, node-role.kubernetes.io/infra=,example.com/rack=r1")).unwrap();
        assert_eq!(l["zone"], "a");
        assert_eq!(l["node-role.kubernetes.io/infra"], "");
        assert_eq!(l["example.com/rack"], "r1");
        for bad in ["zone", "-a=b", "a=b c", "a=1,a=2", "Ex.com/x=1"] {
            let e = parse_labels(Some(bad)).unwrap_err();
            assert_eq!(e.exit_code(), 3, "{bad}");
            assert!(e.to_string().starts_with("--node-labels: "), "{e}");
        }
    }

    #[test]
    fn base_urls() {
        assert!(check_base_url("ftp://x/y", "--boot-artifacts-base-url").is_err());
        assert!(check_base_url("http:///y", "f").is_err());
        assert_eq!(
            check_base_url("http://h:8000/pxe/", "f").unwrap(),
            "http://h:8000/pxe"
        );
    }
}
