//! What the parent hands each machine (`spec.json`): [`Spec`], its [`Hardware`], the live PXE
//! boot it starts from, and the marker of a reached goal. A leaf of `noderun` but for
//! [`super::appliance::Load`]: every part of the runner reads it, none is read by it.

use std::collections::BTreeMap;
use std::net::Ipv4Addr;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use super::appliance;

/// Marker file a machine writes into its directory when it reaches `--until`.
pub const GOAL_MARKER: &str = "goal-reached";

/// One machine as the parent hands it to its namespace child (`spec.json`).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Spec {
    /// Label for output lines (the MAC until the machine has its hostname).
    pub label: String,
    pub mac: String,
    pub ip: Ipv4Addr,
    pub prefix: u8,
    /// A second, IPv6 address with its prefix length (`--node-ipv6`).
    #[serde(default)]
    pub ipv6: Option<(std::net::Ipv6Addr, u8)>,
    pub gateway: Ipv4Addr,
    pub ifname: String,
    /// Absolute path → (mode, contents base64).
    pub files: BTreeMap<String, (u32, String)>,
    /// `storage.directories`: absolute path → mode.
    #[serde(default)]
    pub dirs: BTreeMap<String, u32>,
    /// Unit name → (Ignition `enabled`, text).
    pub units: BTreeMap<String, (Option<bool>, String)>,
    /// Directory of the real binaries (host path).
    pub bin_dir: PathBuf,
    /// Image pull spec → role.
    pub images: BTreeMap<String, String>,
    /// The simulator binary (host path), bound into the machine for podman and the agent.
    pub exe: PathBuf,
    /// This machine's directory (host path): journal/, root/ (its mount point).
    pub dir: PathBuf,
    pub until: String,
    pub stay: bool,
    pub timeout_secs: f64,
    pub time_scale: f64,
    pub max_failures: u32,
    pub hosts: Vec<(String, String)>,
    pub hardware: Hardware,
    /// `--interrupt` units.
    #[serde(default)]
    pub interrupt: Vec<String>,
    /// `--reboot`: after the goal, the shutdown (every active unit's `ExecStop=`), then end.
    #[serde(default)]
    pub reboot: bool,
    /// `--bind`: host path → machine path, bound read-only.
    #[serde(default)]
    pub binds: Vec<(PathBuf, String)>,
    /// Appliance: the config image the loader applies before the units start.
    #[serde(default)]
    pub appliance: Option<appliance::Load>,
    /// A live PXE boot (`--pxe-dir` with an iPXE script): the kernel command line and the
    /// initramfs files the live steps of `livepxe::boot` read before Ignition.
    #[serde(default)]
    pub live: Option<LiveBoot>,
}

/// What the machine is made of (the discovery agent reports it).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Hardware {
    pub cpus: u32,
    pub memory_bytes: u64,
    pub disk_bytes: u64,
    /// SMBIOS system UUID (derived from the MAC): the agent's host ID.
    pub system_uuid: String,
    /// The inventory's `boot.device_type`: `ephemeral` for a live system (node ISO, PXE: the
    /// root file system is in memory), `persistent` for a system booted from its disk (the
    /// appliance). assisted-service reads `persistent` as "install to the existing root"
    /// (no disk speed check; `validateReleaseImageForDay2HostInstall` then needs the
    /// cluster's release image).
    #[serde(default = "ephemeral")]
    pub boot_device_type: String,
}

fn ephemeral() -> String {
    "ephemeral".into()
}

/// What a live PXE machine boots with, handed to it in its spec.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LiveBoot {
    /// The kernel command line (what `/proc/cmdline` shows, without its newline).
    pub cmdline: String,
    /// The `livepxe::LIVE_FILES` the initrd holds, base64.
    pub files: BTreeMap<String, String>,
    /// The initrd holds `config.ign` (the Ignition config appended by add-nodes).
    pub has_config: bool,
    /// The first bytes of `root.squashfs` when the initrd itself holds it (the rootfs given as
    /// a second initrd).
    #[serde(default)]
    pub initrd_squashfs: Option<String>,
}
