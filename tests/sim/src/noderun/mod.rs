//! `agent-day2-sim run-node`: boots a node image's Ignition against the REAL assisted-service
//! and its agent-based-installer client (built by `scripts/real-components.sh`).
//!
//! The judge of the node side must be the real consumer code, not a second reading of our own
//! notes. So nothing here checks the Ignition against a contract: each machine lays the
//! Ignition's files into a root of its own and runs the enabled units in systemd order
//! ([`systemd`]), every command as the unit writes it. What the live system itself would
//! provide is stood in for, and only that:
//!
//! - the machine ([`machine`]): its own network, mount, UTS, IPC and PID namespaces; one
//!   veth interface carrying its MAC and IP (the peer stays in the caller's namespace, which
//!   reaches the machine's `:8090`), loopback for `127.0.0.1`; a root where `/etc`, `/usr`,
//!   `/var`, `/root`, `/opt`, `/home` are overlays of the host's directories with the Ignition's
//!   files on top, `/tmp` and `/run` fresh, `/sys` of the machine's network namespace;
//! - `podman` ([`podman`]): maps the release payload's component images (`--image ROLE=REF`)
//!   to the real binaries and runs them in a container root of the image's layout with the
//!   unit's `--env-file`/`-e`/`-v`/`--user`; a command or image it cannot map fails loudly;
//! - around the REAL discovery agent ([`agent`]; `scripts/real-components.sh agent`): the
//!   machine's hardware (`--cpus`, `--memory-gib`, `--disk-gib`) at the files its inventory
//!   reads, `nsenter`, `chronyc`, journald, and the image tools that would touch the disk or
//!   the LAN (fio, nmap) and the installer; without a built agent, a stand-in that answers
//!   the real service's next-step instructions with what a machine of that hardware reports;
//! - `hostnamectl` (sets the UTS name and `/etc/hostname`);
//! - for `--pxe-dir` with an iPXE script, the live initramfs's steps before Ignition
//!   ([`livepxe`]): the script's kernel command line as the machine's `/proc/cmdline`, read by
//!   the kernel's, dracut's and ignition-generator's rules; the rootfs fetched from
//!   `coreos.live.rootfs_url` with curl and checked against the initramfs's hash list;
//!   Ignition runs only with `ignition.firstboot`;
//! - for `--config-image`, the appliance disk (the `--appliance-disk` node ISO's Ignition
//!   without the loader's paths) and upstream's config image loader, its steps run with the
//!   real gunzip, cpio and diff ([`appliance`]).
//!
//! Output: `assisted-service: github.com/openshift/assisted-service@<version>` first (from
//! the binaries' `versions` file), then one line per unit event per machine
//! (`worker-0: [   1.20s] assisted-service.service: started (pid 41)`) and the journal of every
//! failure; the `--until` unit's journal lines as they are written
//! (`worker-0: [  12.30s] agent-add-node.service: | add-node: host is insufficient: …`); on a
//! goal failure or the timeout, the last lines of every failed or still activating unit's
//! journal. Exit: 0 when `--until` is reached on every machine (with `--stay`: after
//! SIGTERM/SIGINT, when every machine had reached it); 2 usage; 3 unreadable image; 5
//! `--timeout` (the units not started are named); 6 the `--until` unit failed or cannot start,
//! or a unit in its `Requires=` closure failed for good (given up after `--max-failures`
//! failed starts, or failed without `Restart=`), at once (the failing unit named, with its
//! journal's last lines); 130 SIGINT, 143 SIGTERM (128 + the signal: `interrupted` printed,
//! the machines stopped, before the goal or without `--stay`); 1 anything else.

pub mod agent;
pub mod appliance;
pub mod livepxe;
pub mod machine;
pub mod mounts;
pub mod podman;
pub mod spec;
pub mod systemd;

use std::collections::BTreeMap;
use std::io::Write;
use std::net::Ipv4Addr;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde::Serialize;

use crate::boot::{embed, ignition, source};

/// Environment variable naming the directory of the real binaries.
pub const BIN_ENV: &str = "AGENT_DAY2_REAL_BIN";
/// The pinned commit of `tests/real/go.mod` (the default binaries' directory name).
pub const PINNED_COMMIT: &str = "063b257950f7";
pub use spec::{Hardware, Spec, GOAL_MARKER};
/// Component roles `--image` takes, with the release payload tag each stands for.
pub const ROLES: [(&str, &str); 2] = [
    ("api-server", "agent-installer-api-server"),
    ("node-agent", "agent-installer-node-agent"),
];

/// Flags of `agent-day2-sim run-node`. Exactly one image source.
#[derive(Debug, Clone, clap::Args)]
#[command(group(clap::ArgGroup::new("image").required(true).multiple(false).args(["iso", "config_image", "pxe_dir", "initrd", "ignition"])))]
pub struct RunNodeArgs {
    /// A plain Ignition config (JSON) instead of a node image: what a machine boots whose image
    /// we do not build (node 0 of an agent-based install, for `migrate node0-unit`).
    #[arg(long, value_name = "FILE")]
    pub ignition: Option<PathBuf>,
    /// After the goal, reboot each machine as systemd does: the shutdown stops every active
    /// unit, the last started first, running its `ExecStop=` bounded by `TimeoutStopSec=`
    /// (default 90s; a failing or timed-out stop does not stop the reboot), then the machine
    /// ends (`REBOOTED`). Exit 0 once every machine rebooted.
    #[arg(long, conflicts_with = "stay")]
    pub reboot: bool,
    /// HOST_PATH:MACHINE_PATH (repeatable): bound read-only into every machine. Stands for
    /// what an administrator put on the machine's disk that its Ignition does not carry (the
    /// plugin binary `migrate node0-unit`'s unit calls, the bundle).
    #[arg(long = "bind", value_name = "HOST_PATH:MACHINE_PATH")]
    pub binds: Vec<String>,
    /// The node ISO (CoreOS live ISO with the Ignition embedded).
    #[arg(long)]
    pub iso: Option<PathBuf>,
    /// PXE files as `add-nodes --pxe` writes them (the initrd carries the Ignition).
    #[arg(long, value_name = "DIR")]
    pub pxe_dir: Option<PathBuf>,
    /// PXE: the initrd holding the Ignition archive (with --kernel and --rootfs).
    #[arg(long, requires_all = ["kernel", "rootfs"])]
    pub initrd: Option<PathBuf>,
    /// PXE: the kernel.
    #[arg(long, requires = "initrd")]
    pub kernel: Option<PathBuf>,
    /// PXE: the rootfs.
    #[arg(long, requires = "initrd")]
    pub rootfs: Option<PathBuf>,
    /// Appliance config image (`agentconfig.noarch.iso` of `add-nodes --config-image`: label
    /// agent_configimage, config.gz), loaded as upstream's `load-config-iso.sh` loads it onto
    /// the disk `--appliance-disk` stands for.
    #[arg(long, requires = "appliance_disk")]
    pub config_image: Option<PathBuf>,
    /// Appliance: the node ISO (as `add-nodes` writes it for the same hosts) whose Ignition
    /// stands for the appliance disk: its units, scripts and the files the loader does not
    /// copy.
    #[arg(long, value_name = "ISO", requires = "config_image")]
    pub appliance_disk: Option<PathBuf>,
    /// Appliance: the release the disk was built for (its cluster-image-set.yaml's
    /// `releaseImage`; default: the one the disk's Ignition has).
    #[arg(long, value_name = "PULLSPEC", requires = "config_image")]
    pub appliance_release: Option<String>,
    /// Appliance: built as a live ISO (openshift-appliance's live-ISO format), so the machine
    /// runs from memory (inventory boot device `ephemeral`) and reaches `installing`; default:
    /// the disk image, booted from its disk (`persistent`), whose install request the real
    /// service refuses today (HTTP 500 "no release image found for host": docs/limits.md).
    #[arg(long, requires = "config_image")]
    pub appliance_live_iso: bool,
    /// A machine: MAC=IP[/PREFIX] (repeatable; prefix default 24), e.g.
    /// 52:54:00:aa:00:30=192.168.111.30/24.
    #[arg(long = "node", value_name = "MAC=IP[/PREFIX]", required = true)]
    pub nodes: Vec<String>,
    /// Directory of the real binaries (`assisted-service`, `agent-installer-client`,
    /// `versions`); default $AGENT_DAY2_REAL_BIN, else scripts/real-components.sh's output
    /// (`${XDG_CACHE_HOME:-~/.cache}/agent-day2/real/<commit>/bin`).
    #[arg(long, value_name = "DIR")]
    pub bin_dir: Option<PathBuf>,
    /// A release payload component image: ROLE=PULLSPEC, ROLE one of api-server
    /// (agent-installer-api-server), node-agent (agent-installer-node-agent). Repeatable;
    /// podman refuses every image not given here.
    #[arg(long = "image", value_name = "ROLE=PULLSPEC")]
    pub images: Vec<String>,
    /// Working directory (per machine: journal/, spec.json); created if missing.
    #[arg(long)]
    pub work: PathBuf,
    /// Boot goal: the unit that must start successfully on every machine.
    #[arg(long, default_value = "agent-add-node.service")]
    pub until: String,
    /// Keep the machines running after the goal (until SIGTERM/SIGINT).
    #[arg(long)]
    pub stay: bool,
    /// Give up after this long (exit 5).
    #[arg(long, default_value = "10m", value_parser = crate::boot::parse_duration)]
    pub timeout: Duration,
    /// Factor applied to every `RestartSec=` and to the agent's instruction interval
    /// (1: as written; a finite number above 0, at most 1000).
    #[arg(long, default_value_t = 1.0, value_parser = parse_time_scale)]
    pub time_scale: f64,
    /// Failed starts after which a restarting unit is given up.
    #[arg(long, default_value_t = 4)]
    pub max_failures: u32,
    /// A machine's IPv6 address besides its IPv4 one (a dual-stack host): MAC=IPV6[/PREFIX]
    /// of a `--node` MAC (repeatable; prefix default 64), e.g.
    /// 52:54:00:aa:00:30=fd2e:6f44:5dd8:c956::1e/120. Set on the machine's interface with the
    /// IPv4 one, so the discovery agent's inventory reports both; no IPv6 route leaves it.
    #[arg(long = "node-ipv6", value_name = "MAC=IPV6[/PREFIX]")]
    pub nodes_ipv6: Vec<String>,
    /// Default gateway of the machines (an address of the caller's namespace).
    #[arg(long, default_value = "192.168.111.1")]
    pub gateway: Ipv4Addr,
    /// Name of the machine's network interface.
    #[arg(long, default_value = "enp1s0")]
    pub ifname: String,
    /// Site DNS: NAME=IP entries put into the machines' /etc/hosts (repeatable).
    #[arg(long = "dns", value_name = "NAME=IP")]
    pub dns: Vec<String>,
    /// Fault injection: the first run of UNIT's `ExecStart` is reported killed by SIGKILL as it
    /// ends (its work done, its success lost, as after a power cut at that moment), so the
    /// unit's `Restart=` decides what happens next (repeatable).
    #[arg(long = "interrupt", value_name = "UNIT")]
    pub interrupt: Vec<String>,
    /// Hardware of each machine: CPU cores.
    #[arg(long, default_value_t = 8)]
    pub cpus: u32,
    /// Hardware: memory in GiB.
    #[arg(long, default_value_t = 16)]
    pub memory_gib: u64,
    /// Hardware: the disk /dev/vda in GiB.
    #[arg(long, default_value_t = 120)]
    pub disk_gib: u64,
}

/// The binaries' directory: `--bin-dir`, else $AGENT_DAY2_REAL_BIN, else
/// scripts/real-components.sh's default output.
pub fn default_bin_dir() -> PathBuf {
    if let Some(d) = std::env::var_os(BIN_ENV) {
        return PathBuf::from(d);
    }
    let cache = std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(std::env::var_os("HOME").unwrap_or_else(|| "/root".into())).join(".cache")
        });
    cache.join("agent-day2/real").join(PINNED_COMMIT).join("bin")
}

/// The `assisted-service: <module>@<version>` line of the binaries' `versions` file, reduced
/// to module@version. Errors name the missing file and the script that makes it.
pub fn service_version(bin: &Path) -> Result<String, String> {
    let v = bin.join("versions");
    let text = std::fs::read_to_string(&v).map_err(|e| {
        format!(
            "{}: {e}: build the real components with scripts/real-components.sh (or give --bin-dir / ${BIN_ENV})",
            v.display()
        )
    })?;
    for b in ["assisted-service", "agent-installer-client"] {
        if !bin.join(b).is_file() {
            return Err(format!(
                "{} is missing (scripts/real-components.sh builds it)",
                bin.join(b).display()
            ));
        }
    }
    text.lines()
        .find_map(|l| l.strip_prefix("assisted-service: "))
        .and_then(|r| r.split_whitespace().next())
        .map(String::from)
        .ok_or_else(|| format!("{}: no 'assisted-service: <module>@<version>' line", v.display()))
}

/// `FLAG PATH: cannot open: ERROR`: an image flag whose file or directory cannot be opened,
/// naming the flag so the caller knows which argument to fix.
fn cannot_open(flag: &str, p: &Path, e: &std::io::Error) -> String {
    format!(
        "{flag} {}: cannot open: {e} (give an existing, readable path)",
        p.display()
    )
}

/// The Ignition (raw JSON bytes) of the image source the flags name, plus where it came from.
fn raw_ignition(a: &RunNodeArgs) -> Result<(Vec<u8>, ignition::Config, String), (i32, Vec<String>)> {
    for (flag, p) in [
        ("--iso", &a.iso),
        ("--config-image", &a.config_image),
        ("--initrd", &a.initrd),
        ("--kernel", &a.kernel),
        ("--rootfs", &a.rootfs),
    ] {
        if let Some(p) = p {
            std::fs::File::open(p).map_err(|e| (3, vec![cannot_open(flag, p, &e)]))?;
        }
    }
    if let Some(d) = &a.pxe_dir {
        std::fs::read_dir(d).map_err(|e| (3, vec![cannot_open("--pxe-dir", d, &e)]))?;
    }
    if let Some(p) = &a.ignition {
        let bytes = std::fs::read(p).map_err(|e| (3, vec![cannot_open("--ignition", p, &e)]))?;
        let cfg = ignition::parse(&bytes).map_err(|e| (3, vec![format!("{}: {e}", p.display())]))?;
        return Ok((bytes, cfg, format!("Ignition {}", p.display())));
    }
    if let Some(iso) = &a.iso {
        let mut f = std::fs::File::open(iso).map_err(|e| (3, vec![cannot_open("--iso", iso, &e)]))?;
        let (bytes, area) =
            embed::read_ignition(&mut f).map_err(|e| (3, vec![format!("{}: {e}", iso.display())]))?;
        let cfg = ignition::parse(&bytes).map_err(|e| (3, vec![format!("{}: {e}", iso.display())]))?;
        return Ok((
            bytes,
            cfg,
            format!("{} (embed area {})", iso.display(), area.path),
        ));
    }
    if let (Some(img), Some(disk)) = (&a.config_image, &a.appliance_disk) {
        let mut f =
            std::fs::File::open(disk).map_err(|e| (3, vec![cannot_open("--appliance-disk", disk, &e)]))?;
        let (bytes, _) =
            embed::read_ignition(&mut f).map_err(|e| (3, vec![format!("{}: {e}", disk.display())]))?;
        let (raw, removed) = appliance::disk_ignition(&bytes, a.appliance_release.as_deref())
            .map_err(|e| (3, vec![format!("--appliance-disk {}: {e}", disk.display())]))?;
        let cfg = ignition::parse(&raw).map_err(|e| (3, vec![format!("{}: {e}", disk.display())]))?;
        appliance::stage(img, &a.work)?;
        return Ok((
            raw,
            cfg,
            format!(
                "appliance disk {} ({} paths the loader copies left to the config image) + config image {}",
                disk.display(),
                removed.len(),
                img.display()
            ),
        ));
    }
    let set = if let Some(d) = &a.pxe_dir {
        source::pxe_dir(d)?
    } else {
        source::PxeSet {
            kernel: a.kernel.clone().unwrap_or_default(),
            initrds: vec![a.initrd.clone().unwrap_or_default()],
            rootfs: a.rootfs.clone().unwrap_or_default(),
            ipxe: None,
        }
    };
    let l = source::from_pxe(&set)?;
    // The modes: read config.ign out of the initrds again (from_pxe keeps only contents).
    let mut initrd = Vec::new();
    for p in &set.initrds {
        let b = std::fs::read(p).map_err(|e| (3, vec![format!("{}: {e}", p.display())]))?;
        initrd.extend_from_slice(&b);
        initrd.resize(initrd.len().div_ceil(4) * 4, 0);
    }
    let raw = embed::unpack_archives(&initrd, "initrd")
        .ok()
        .and_then(|m| m.get("config.ign").cloned())
        .unwrap_or_default();
    Ok((raw, l.cfg, l.from))
}

/// File modes of `storage.files` (Ignition default 0644). Without the JSON, scripts under
/// /usr/local/bin get 0755. (An appliance's disk is the `--appliance-disk` ISO's JSON; the
/// loader's files get their modes from the cpio.)
fn modes(raw: &[u8], cfg: &ignition::Config) -> BTreeMap<String, u32> {
    let mut out: BTreeMap<String, u32> = cfg
        .files
        .keys()
        .map(|p| {
            let m = if raw.is_empty() && p.starts_with("/usr/local/bin/") {
                0o755
            } else {
                0o644
            };
            (p.clone(), m)
        })
        .collect();
    if let Ok(v) = serde_json::from_slice::<serde_json::Value>(raw) {
        for f in v
            .pointer("/storage/files")
            .and_then(|f| f.as_array())
            .into_iter()
            .flatten()
        {
            if let (Some(p), Some(m)) = (
                f.get("path").and_then(|p| p.as_str()),
                f.get("mode").and_then(|m| m.as_u64()),
            ) {
                out.insert(p.to_string(), m as u32);
            }
        }
    }
    out
}

/// `storage.directories` of the Ignition JSON: path → mode (Ignition's default 0755).
fn directories(raw: &[u8]) -> BTreeMap<String, u32> {
    let mut out = BTreeMap::new();
    if let Ok(v) = serde_json::from_slice::<serde_json::Value>(raw) {
        for d in v
            .pointer("/storage/directories")
            .and_then(|f| f.as_array())
            .into_iter()
            .flatten()
        {
            if let Some(p) = d.get("path").and_then(|p| p.as_str()) {
                out.insert(
                    p.to_string(),
                    d.get("mode").and_then(|m| m.as_u64()).unwrap_or(0o755) as u32,
                );
            }
        }
    }
    out
}

/// A stable SMBIOS-like UUID from a MAC (the agent uses the system UUID as the host ID).
pub fn uuid_for_mac(mac: &str) -> String {
    use sha2::Digest;
    let h = sha2::Sha256::digest(format!("system-uuid-{}", mac.to_ascii_lowercase()));
    let mut b = [0u8; 16];
    b.copy_from_slice(&h[..16]);
    b[6] = (b[6] & 0x0f) | 0x40;
    b[8] = (b[8] & 0x3f) | 0x80;
    let x = hex::encode(b);
    format!(
        "{}-{}-{}-{}-{}",
        &x[0..8],
        &x[8..12],
        &x[12..16],
        &x[16..20],
        &x[20..32]
    )
}

/// `--image ROLE=PULLSPEC` values → pull spec → role. Errors (usage, exit 2) name the flag:
/// no `=`, a role not in [`ROLES`], or an empty pull spec (or one with a blank: a pull spec
/// has none).
fn parse_images(given: &[String]) -> Result<BTreeMap<String, String>, String> {
    let mut images = BTreeMap::new();
    for i in given {
        let Some((role, spec)) = i.split_once('=') else {
            return Err(format!("--image {i:?}: expected ROLE=PULLSPEC"));
        };
        if !ROLES.iter().any(|(r, _)| *r == role) {
            return Err(format!(
                "--image {i:?}: unknown role {role:?} (roles: {})",
                ROLES.map(|(r, t)| format!("{r} = {t}")).join(", ")
            ));
        }
        if spec.is_empty() || spec.chars().any(|c| c.is_whitespace() || c.is_control()) {
            return Err(format!(
                "--image {i:?}: the pull spec of {role} is empty or has a blank; give ROLE=PULLSPEC with the pull spec the image's {AGENT_IMAGES_ENV} names"
            ));
        }
        images.insert(spec.to_string(), role.to_string());
    }
    Ok(images)
}

/// The image's host configs: host directory name → the MACs its
/// `/etc/assisted/hostconfig/<host>/mac_addresses` lists (one per line, lower case; the
/// agent-based installer's client matches a machine to its host config by these).
pub fn host_macs(files: &BTreeMap<String, Vec<u8>>) -> BTreeMap<String, Vec<String>> {
    files
        .iter()
        .filter_map(|(p, d)| {
            let host = p
                .strip_prefix("/etc/assisted/hostconfig/")?
                .strip_suffix("/mac_addresses")?;
            let macs = String::from_utf8_lossy(d)
                .lines()
                .map(|l| l.trim().to_ascii_lowercase())
                .filter(|l| !l.is_empty())
                .collect();
            Some((host.to_string(), macs))
        })
        .collect()
}

/// The warning for a `--node` MAC no host config of the image lists (None when one does).
/// A real machine of that MAC boots the image too, but no host config (hostname, role, root
/// device hints, network) applies to it.
fn unlisted_mac_warning(mac: &str, hosts: &BTreeMap<String, Vec<String>>) -> Option<String> {
    if hosts.values().flatten().any(|m| m == mac) {
        return None;
    }
    let known = if hosts.is_empty() {
        "the image has no /etc/assisted/hostconfig/*/mac_addresses".to_string()
    } else {
        format!(
            "the image's hosts: {}",
            hosts
                .iter()
                .map(|(h, m)| format!("{h} ({})", m.join(", ")))
                .collect::<Vec<_>>()
                .join("; ")
        )
    };
    Some(format!(
        "--node MAC {mac} is not in any /etc/assisted/hostconfig/*/mac_addresses ({known}); booting it anyway, as a real machine would, but no host config applies to it (check the MAC)"
    ))
}

/// The path of the image's component pull specs (`SERVICE_IMAGE`: api-server,
/// `AGENT_DOCKER_IMAGE`: node-agent).
pub const AGENT_IMAGES_ENV: &str = "/usr/local/share/assisted-service/agent-images.env";

/// `--bind HOST_PATH:MACHINE_PATH` values: both absolute, the host path existing.
fn parse_binds(given: &[String]) -> Result<Vec<(PathBuf, String)>, String> {
    given
        .iter()
        .map(|b| {
            let (h, m) = b
                .split_once(':')
                .ok_or_else(|| format!("--bind {b:?}: expected HOST_PATH:MACHINE_PATH"))?;
            if !h.starts_with('/') || !m.starts_with('/') || m.split('/').any(|c| c == "..") {
                return Err(format!("--bind {b:?}: both paths must be absolute (no ..)"));
            }
            std::fs::metadata(h).map_err(|e| format!("--bind {b:?}: {h}: {e}"))?;
            Ok((PathBuf::from(h), m.to_string()))
        })
        .collect()
}

fn parse_node(n: &str) -> Result<(String, Ipv4Addr, u8), String> {
    let (mac, rest) = n
        .split_once('=')
        .ok_or_else(|| format!("--node {n:?}: expected MAC=IP[/PREFIX]"))?;
    let (ip, prefix) = rest.split_once('/').unwrap_or((rest, "24"));
    let ip: Ipv4Addr = ip
        .parse()
        .map_err(|_| format!("--node {n:?}: {ip:?} is not an IPv4 address"))?;
    let prefix: u8 = prefix
        .parse()
        .ok()
        .filter(|p| *p <= 32)
        .ok_or_else(|| format!("--node {n:?}: bad prefix {prefix:?}"))?;
    let m = mac.to_ascii_lowercase();
    let ok = m.split(':').count() == 6
        && m.split(':')
            .all(|o| o.len() == 2 && u8::from_str_radix(o, 16).is_ok());
    if !ok {
        return Err(format!("--node {n:?}: {mac:?} is not a MAC address"));
    }
    Ok((m, ip, prefix))
}

/// `--time-scale`: a finite factor in (0, 1000].
fn parse_time_scale(s: &str) -> Result<f64, String> {
    match s.trim().parse::<f64>() {
        Ok(f) if f.is_finite() && f > 0.0 && f <= 1000.0 => Ok(f),
        _ => Err(format!(
            "{s:?} is not a factor above 0 and at most 1000 (e.g. 0.1)"
        )),
    }
}

/// `--node-ipv6 MAC=IPV6[/PREFIX]` → (lower-case MAC, (address, prefix)); prefix default 64.
fn parse_node_ipv6(n: &str) -> Result<(String, (std::net::Ipv6Addr, u8)), String> {
    let (mac, rest) = n
        .split_once('=')
        .ok_or_else(|| format!("--node-ipv6 {n:?}: expected MAC=IPV6[/PREFIX]"))?;
    let (ip, prefix) = rest.split_once('/').unwrap_or((rest, "64"));
    let ip: std::net::Ipv6Addr = ip
        .parse()
        .map_err(|_| format!("--node-ipv6 {n:?}: {ip:?} is not an IPv6 address"))?;
    let prefix: u8 = prefix
        .parse()
        .ok()
        .filter(|p| *p <= 128)
        .ok_or_else(|| format!("--node-ipv6 {n:?}: bad prefix {prefix:?}"))?;
    Ok((mac.to_ascii_lowercase(), (ip, prefix)))
}

/// Writes `v` as JSON to `p` (mode 0600: the spec holds the image's tokens) via a temporary
/// file and a rename.
pub fn write_private_json<T: Serialize>(p: &Path, v: &T) -> std::io::Result<()> {
    use std::os::unix::fs::OpenOptionsExt;
    let tmp = p.with_extension("tmp");
    let _ = std::fs::remove_file(&tmp);
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&tmp)?;
    f.write_all(&serde_json::to_vec(v)?)?;
    drop(f);
    std::fs::rename(&tmp, p)
}

fn ip_cmd(args: &[&str]) -> Result<(), String> {
    let o = Command::new("ip")
        .args(args)
        .output()
        .map_err(|e| format!("cannot run ip: {e} (install iproute2)"))?;
    if o.status.success() {
        Ok(())
    } else {
        Err(format!(
            "`ip {}`: {}",
            args.join(" "),
            String::from_utf8_lossy(&o.stderr).trim()
        ))
    }
}

fn netns_inode(pid: &str) -> Option<u64> {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata(format!("/proc/{pid}/ns/net"))
        .ok()
        .map(|m| m.ino())
}

/// A private copy of the running simulator binary in `work` (`agent-day2-sim`, mode 0755,
/// written via a temporary file and a rename), which the machines run and bind into their
/// containers. The shared build directory's binary is replaced by every rebuild, and a bind
/// mount of a replaced (unlinked) file cannot be bound again: the node-agent container's
/// root then failed with `mount …/agent-day2-sim … No such file or directory`. Copied from
/// `/proc/self/exe`, so a binary replaced before this call still gives the running program.
pub fn private_exe(work: &Path) -> Result<PathBuf, String> {
    use std::os::unix::fs::PermissionsExt;
    let dst = work.join("agent-day2-sim");
    let tmp = work.join(".agent-day2-sim.tmp");
    let _ = std::fs::remove_file(&tmp);
    std::fs::copy("/proc/self/exe", &tmp)
        .and_then(|_| std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(0o755)))
        .and_then(|_| std::fs::rename(&tmp, &dst))
        .map_err(|e| {
            format!(
                "cannot copy the simulator binary to {}: {e} (is --work writable?)",
                dst.display()
            )
        })?;
    Ok(dst)
}

/// Runs `run-node`; returns the exit code.
pub fn run(a: RunNodeArgs) -> i32 {
    // clap drops `requires` when the required flag conflicts with the given image source (the
    // group), so a flag of another source is refused here instead of being ignored.
    let stray = [
        (
            "--appliance-disk",
            a.appliance_disk.is_some() && a.config_image.is_none(),
        ),
        ("--kernel", a.kernel.is_some() && a.initrd.is_none()),
        ("--rootfs", a.rootfs.is_some() && a.initrd.is_none()),
    ];
    if let Some((flag, _)) = stray.iter().find(|(_, bad)| *bad) {
        eprintln!(
            "error: {flag} belongs to another image source than the one given (--appliance-disk goes with --config-image, --kernel and --rootfs with --initrd)"
        );
        return 2;
    }
    let bin = a.bin_dir.clone().unwrap_or_else(default_bin_dir);
    let version = match service_version(&bin) {
        Ok(v) => v,
        Err(e) => {
            eprintln!("error: the real assisted-service is not available: {e}");
            return 1;
        }
    };
    println!("assisted-service: {version}");
    let images = match parse_images(&a.images) {
        Ok(m) => m,
        Err(e) => {
            eprintln!("error: {e}");
            return 2;
        }
    };
    let binds = match parse_binds(&a.binds) {
        Ok(b) => b,
        Err(e) => {
            eprintln!("error: {e}");
            return 2;
        }
    };
    let mut machines = Vec::new();
    for n in &a.nodes {
        match parse_node(n) {
            // One machine per MAC: machines are keyed by it (directory, journal, exit code).
            Ok(m)
                if machines
                    .iter()
                    .any(|(mac, _, _): &(String, Ipv4Addr, u8)| *mac == m.0) =>
            {
                eprintln!("error: --node {n:?}: MAC {} is given twice", m.0);
                return 2;
            }
            Ok(m)
                if machines
                    .iter()
                    .any(|(_, ip, _): &(String, Ipv4Addr, u8)| *ip == m.1) =>
            {
                eprintln!("error: --node {n:?}: address {} is given twice", m.1);
                return 2;
            }
            Ok(m) => machines.push(m),
            Err(e) => {
                eprintln!("error: {e}");
                return 2;
            }
        }
    }
    let mut ipv6_of = BTreeMap::new();
    for n in &a.nodes_ipv6 {
        match parse_node_ipv6(n) {
            Ok((mac, _)) if !machines.iter().any(|(m, _, _)| *m == mac) => {
                eprintln!("error: --node-ipv6 {n:?}: no --node has MAC {mac}");
                return 2;
            }
            Ok((_, (v6, _))) if v6.is_multicast() || v6.is_unspecified() || v6.is_loopback() => {
                eprintln!(
                    "error: --node-ipv6 {n:?}: {v6} cannot be a machine's address (give a unicast address)"
                );
                return 2;
            }
            Ok((_, (v6, _))) if ipv6_of.values().any(|(a, _): &(std::net::Ipv6Addr, u8)| *a == v6) => {
                eprintln!("error: --node-ipv6 {n:?}: address {v6} is given twice");
                return 2;
            }
            Ok((mac, v6)) => {
                if ipv6_of.insert(mac.clone(), v6).is_some() {
                    eprintln!("error: --node-ipv6 {n:?}: MAC {mac} is given twice");
                    return 2;
                }
            }
            Err(e) => {
                eprintln!("error: {e}");
                return 2;
            }
        }
    }
    let mut hosts = Vec::new();
    for d in &a.dns {
        match d.split_once('=') {
            // A host name of /etc/hosts: no blank or control character.
            Some((n, ip))
                if ip.parse::<std::net::IpAddr>().is_ok()
                    && !n.is_empty()
                    && !n.chars().any(|c| c.is_whitespace() || c.is_control()) =>
            {
                hosts.push((n.to_string(), ip.to_string()))
            }
            _ => {
                eprintln!("error: --dns {d:?}: expected NAME=IP");
                return 2;
            }
        }
    }
    // --pxe-dir with an iPXE script: the machines boot it as a live system (livepxe).
    let live = match a.pxe_dir.as_deref().map(livepxe::load).transpose() {
        Ok(l) => l.flatten(),
        Err((code, lines)) => {
            for l in lines {
                eprintln!("error: {l}");
            }
            return code;
        }
    };
    let loaded = match &live {
        Some(l) => Ok((l.raw.clone(), l.cfg.clone(), l.from.clone())),
        None => raw_ignition(&a),
    };
    let (raw, cfg, from) = match loaded {
        Ok(x) => x,
        Err((code, lines)) => {
            for l in lines {
                eprintln!("error: {l}");
            }
            return code;
        }
    };
    for p in &cfg.problems {
        eprintln!("warning: Ignition: {p}");
    }
    // An appliance's host configs come with the config image, not the disk.
    let host_configs = match &a.config_image {
        Some(img) => host_macs(&appliance::config_files(img)),
        None => host_macs(&cfg.files),
    };
    for (mac, _, _) in &machines {
        if let Some(w) = unlisted_mac_warning(mac, &host_configs) {
            eprintln!("warning: {w}");
        }
    }
    let modes = modes(&raw, &cfg);
    let dirs = directories(&raw);
    use base64::Engine;
    let b64 = base64::engine::general_purpose::STANDARD;
    let files: BTreeMap<String, (u32, String)> = cfg
        .files
        .iter()
        .map(|(p, d)| (p.clone(), (modes.get(p).copied().unwrap_or(0o644), b64.encode(d))))
        .collect();
    let mut units: BTreeMap<String, (Option<bool>, String)> = BTreeMap::new();
    for (n, u) in &cfg.units {
        if u.mask {
            continue;
        }
        units.insert(n.clone(), (u.enabled, u.text.clone()));
    }
    eprintln!(
        "run-node: {} machine(s) from {from}: {} files, {} units ({} enabled)",
        machines.len(),
        files.len(),
        units.len(),
        units.values().filter(|(e, _)| *e == Some(true)).count()
    );
    if let Err(e) = std::fs::create_dir_all(&a.work) {
        eprintln!("error: cannot create --work {}: {e}", a.work.display());
        return 1;
    }
    let exe = match private_exe(&a.work) {
        Ok(e) => e,
        Err(e) => {
            eprintln!("error: {e}");
            return 1;
        }
    };
    let mut kids = Vec::new();
    for (i, (mac, ip, prefix)) in machines.iter().enumerate() {
        let dir = a.work.join(format!("machine-{}", mac.replace(':', "")));
        let _ = std::fs::create_dir_all(dir.join("journal"));
        let _ = std::fs::create_dir_all(dir.join("root"));
        let _ = std::fs::remove_file(dir.join(GOAL_MARKER));
        let spec = Spec {
            label: mac.clone(),
            mac: mac.clone(),
            ip: *ip,
            prefix: *prefix,
            ipv6: ipv6_of.get(mac).copied(),
            gateway: a.gateway,
            ifname: a.ifname.clone(),
            files: files.clone(),
            dirs: dirs.clone(),
            units: units.clone(),
            bin_dir: bin.clone(),
            images: images.clone(),
            exe: exe.clone(),
            dir: dir.clone(),
            until: a.until.clone(),
            stay: a.stay,
            timeout_secs: a.timeout.as_secs_f64(),
            time_scale: a.time_scale,
            max_failures: a.max_failures,
            hosts: hosts.clone(),
            interrupt: a.interrupt.clone(),
            reboot: a.reboot,
            binds: binds.clone(),
            appliance: a.config_image.as_ref().map(|img| appliance::Load {
                config_gz: appliance::staged_path(&a.work),
                image: img.display().to_string(),
            }),
            live: live.as_ref().map(|l| l.live.clone()),
            hardware: Hardware {
                cpus: a.cpus,
                memory_bytes: a.memory_gib << 30,
                disk_bytes: a.disk_gib << 30,
                system_uuid: uuid_for_mac(mac),
                boot_device_type: if a.config_image.is_some() && !a.appliance_live_iso {
                    "persistent".into()
                } else {
                    "ephemeral".into()
                },
            },
        };
        let spec_path = dir.join("spec.json");
        if let Err(e) = write_private_json(&spec_path, &spec) {
            eprintln!("error: {}: {e}", spec_path.display());
            return 1;
        }
        let mut cmd = Command::new("unshare");
        cmd.args([
            "--fork",
            "--pid",
            "--net",
            "--mount",
            "--uts",
            "--ipc",
            "--propagation",
            "private",
            "--kill-child",
            "--",
        ])
        .arg(&exe)
        .arg("node-machine")
        .arg("--spec")
        .arg(&spec_path)
        .stdin(Stdio::piped());
        // SAFETY: prctl in the forked child before exec; async-signal-safe.
        unsafe {
            cmd.pre_exec(|| {
                libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
                Ok(())
            });
        }
        let child = match cmd.spawn() {
            Ok(c) => c,
            Err(e) => {
                eprintln!("error: cannot run unshare (util-linux): {e}");
                return 1;
            }
        };
        let pid = child.id().to_string();
        let own = netns_inode("self");
        let t = Instant::now();
        while netns_inode(&pid) == own && t.elapsed() < Duration::from_secs(10) {
            std::thread::sleep(Duration::from_millis(20));
        }
        let host_if = format!("nr{}x{}", i, child.id() % 100_000);
        let mut setup = vec![ip_cmd(&[
            "link", "add", &host_if, "type", "veth", "peer", "name", &a.ifname, "address", mac, "netns", &pid,
        ])];
        setup.push(ip_cmd(&["link", "set", &host_if, "up"]));
        setup.push(ip_cmd(&[
            "route",
            "replace",
            &format!("{ip}/32"),
            "dev",
            &host_if,
            "table",
            "local",
        ]));
        let gw_local = Command::new("ip")
            .args(["-o", "addr", "show"])
            .output()
            .map(|o| String::from_utf8_lossy(&o.stdout).contains(&format!("inet {}/", a.gateway)))
            .unwrap_or(false);
        if !gw_local {
            setup.push(ip_cmd(&[
                "addr",
                "add",
                &format!("{}/32", a.gateway),
                "dev",
                &host_if,
            ]));
        }
        if let Some(Err(e)) = setup.into_iter().find(|r| r.is_err()) {
            eprintln!("error: machine {mac}: network setup: {e}");
            return 1;
        }
        kids.push((mac.clone(), child));
    }
    for (_, k) in kids.iter_mut() {
        if let Some(mut s) = k.stdin.take() {
            let _ = s.write_all(b"go\n");
        }
    }
    // SIGTERM/SIGINT: stop the machines (their PID namespaces die with them).
    static STOP: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
    static SIGNAL: std::sync::atomic::AtomicI32 = std::sync::atomic::AtomicI32::new(0);
    extern "C" fn on_signal(sig: libc::c_int) {
        SIGNAL.store(sig, std::sync::atomic::Ordering::SeqCst);
        STOP.store(true, std::sync::atomic::Ordering::SeqCst);
    }
    // SAFETY: the handler only stores to an atomic.
    unsafe {
        libc::signal(libc::SIGTERM, on_signal as *const () as libc::sighandler_t);
        libc::signal(libc::SIGINT, on_signal as *const () as libc::sighandler_t);
    }
    // Per machine: its exit code, and whether it ended on its own (before the stop).
    let mut codes: BTreeMap<String, (i32, bool)> = BTreeMap::new();
    while codes.len() < kids.len() {
        let stopping = STOP.load(std::sync::atomic::Ordering::SeqCst);
        if stopping {
            for (mac, k) in kids.iter_mut() {
                if !codes.contains_key(mac) {
                    let _ = k.kill();
                }
            }
        }
        for (mac, k) in kids.iter_mut() {
            if codes.contains_key(mac) {
                continue;
            }
            if let Ok(Some(st)) = k.try_wait() {
                codes.insert(mac.clone(), (st.code().unwrap_or(1), !stopping));
            }
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let signal = SIGNAL.load(std::sync::atomic::Ordering::SeqCst);
    let mut code = 0;
    for (mac, (c, own)) in &codes {
        if *c != 0 && (*own || signal == 0) {
            eprintln!("run-node: machine {mac} ended with exit {c}");
            if code == 0 || *c == 5 {
                code = *c;
            }
        }
    }
    if signal != 0 {
        let all_goal = machines.iter().all(|(mac, _, _)| {
            a.work
                .join(format!("machine-{}", mac.replace(':', "")))
                .join(GOAL_MARKER)
                .exists()
        });
        if a.stay && all_goal && code == 0 {
            return 0;
        }
        eprintln!(
            "run-node: interrupted ({}); the machines are stopped",
            signal_name(signal)
        );
        return interrupted_code(signal);
    }
    code
}

/// `SIGINT`, `SIGTERM` or `signal N`.
fn signal_name(sig: i32) -> String {
    match sig {
        libc::SIGINT => "SIGINT".into(),
        libc::SIGTERM => "SIGTERM".into(),
        n => format!("signal {n}"),
    }
}

/// Exit code after a signal: 128 + its number, as shells report (130 SIGINT, 143 SIGTERM).
pub fn interrupted_code(sig: i32) -> i32 {
    128 + sig
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn image_flags_refuse_an_empty_pull_spec_naming_the_flag() {
        let e = parse_images(&["api-server=".into()]).unwrap_err();
        assert!(e.starts_with("--image \"api-server=\""), "{e}");
        assert!(e.contains("empty"), "{e}");
        assert!(parse_images(&["node-agent= q".into()]).is_err());
        assert!(parse_images(&["nope=x".into()])
            .unwrap_err()
            .contains("unknown role"));
        let m = parse_images(&["api-server=q/a:1".into(), "node-agent=q/b:1".into()]).unwrap();
        assert_eq!(m["q/a:1"], "api-server");
        assert_eq!(m["q/b:1"], "node-agent");
    }

    #[test]
    fn a_node_mac_no_host_config_lists_is_warned_about_with_the_hosts() {
        let mut files = BTreeMap::new();
        files.insert(
            "/etc/assisted/hostconfig/worker-0/mac_addresses".to_string(),
            b"52:54:00:AA:00:30\n52:54:00:aa:00:31\n".to_vec(),
        );
        files.insert(
            "/etc/assisted/hostconfig/worker-0/role".to_string(),
            b"worker".to_vec(),
        );
        let hosts = host_macs(&files);
        assert_eq!(hosts.len(), 1);
        assert_eq!(unlisted_mac_warning("52:54:00:aa:00:30", &hosts), None);
        assert_eq!(unlisted_mac_warning("52:54:00:aa:00:31", &hosts), None);
        let w = unlisted_mac_warning("52:54:00:aa:00:99", &hosts).unwrap();
        assert!(w.contains("52:54:00:aa:00:99"), "{w}");
        assert!(
            w.contains("worker-0 (52:54:00:aa:00:30, 52:54:00:aa:00:31)"),
            "{w}"
        );
        let w = unlisted_mac_warning("52:54:00:aa:00:30", &BTreeMap::new()).unwrap();
        assert!(w.contains("no /etc/assisted/hostconfig"), "{w}");
    }

    #[test]
    fn a_missing_image_names_its_flag() {
        let e = std::io::Error::from(std::io::ErrorKind::NotFound);
        let m = cannot_open("--iso", Path::new("/nonexistent.iso"), &e);
        assert!(m.starts_with("--iso /nonexistent.iso: cannot open: "), "{m}");
    }

    #[test]
    fn interrupted_exit_codes_are_the_shells() {
        assert_eq!(interrupted_code(libc::SIGINT), 130);
        assert_eq!(interrupted_code(libc::SIGTERM), 143);
        assert_eq!(signal_name(libc::SIGINT), "SIGINT");
        assert_eq!(signal_name(libc::SIGTERM), "SIGTERM");
    }
}
