//! Where a simulated machine gets its config: the live ISO's embed area, PXE files, or an
//! appliance config image. Every source ends in one [`ignition::Config`] that
//! [`super::facts::read`] reads the same way; only the way to the archive differs.
//!
//! * Live ISO: [`super::embed::read_ignition`].
//! * PXE (docs/iso.md "PXE files", the agent installer's `agentpxefiles.go`): the initrd is the live
//!   initrd with the Ignition archive appended. The machine gets it as the kernel does: the
//!   initrd files are concatenated (iPXE `initrd` lines in order), then every archive in them,
//!   gzip, xz or plain newc with zero padding between, is unpacked; a later member replaces an
//!   earlier one of the same path; `config.ign` is the Ignition config. An iPXE script, when
//!   there is one, must boot it: a `kernel` line with `initrd=<name>` of an `initrd` line (UEFI
//!   firmware loads no initrd without it), `coreos.live.rootfs_url=` naming a file served next
//!   to it, `ignition.firstboot` and a valid `ignition.platform.id=`, no `coreos.liveiso=` (the
//!   live initrd would wait for an ISO that is not there), and a `boot` command; the kernel
//!   line is read with the live initramfs's rules ([`crate::noderun::livepxe`]: quoting, the
//!   last value wins). `run-node --pxe-dir` does not check these words: its machines boot the
//!   script as a live system does ([`crate::noderun::livepxe`]).
//! * Appliance (docs/iso.md "The appliance config image"): the loader finds the ISO9660 device
//!   labelled `agent_configimage`, reads the ClusterImageSet's `releaseImage` from `config.gz`
//!   and refuses one that differs from the release built into the appliance disk, then extracts
//!   the files by absolute path, replacing the disk's (upstream's `load-config-iso.sh` runs
//!   `cpio -icvdu`). The disk image already has the systemd units and the user's SSH key
//!   ([`appliance_disk_files`]); a config file at one of the disk's paths replaces it
//!   (reported). This is `boot`'s reading; `run-node --config-image` applies upstream's loader
//!   itself, with its file list (`crate::noderun::appliance`).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde_json::Value;

use super::{embed, ignition};

/// Volume label the appliance's loader looks for.
pub const CONFIG_IMAGE_LABEL: &str = "agent_configimage";
/// Path of the ClusterImageSet manifest inside the config.
pub const CLUSTER_IMAGE_SET: &str = "/etc/assisted/manifests/cluster-image-set.yaml";

/// A refused or unreadable source: the exit code (3 refused, 1 unreadable) and one line per
/// problem.
pub type Refusal = (i32, Vec<String>);

fn refused(line: impl Into<String>) -> Refusal {
    (3, vec![line.into()])
}

/// The config a machine read, what it came from (for the log line) and notes worth printing
/// (files the appliance loader did not extract).
#[derive(Debug, Clone)]
pub struct Loaded {
    pub cfg: ignition::Config,
    pub from: String,
    pub notes: Vec<String>,
}

/// Reads `config.ign` from the embed area of a live ISO.
pub fn from_iso(iso: &Path) -> Result<Loaded, Refusal> {
    let mut f =
        std::fs::File::open(iso).map_err(|e| (1, vec![format!("cannot open {}: {e}", iso.display())]))?;
    let (bytes, area) =
        embed::read_ignition(&mut f).map_err(|e| refused(format!("{}: {e}", iso.display())))?;
    let cfg = ignition::parse(&bytes).map_err(|e| refused(format!("{}: {e}", iso.display())))?;
    Ok(Loaded {
        cfg,
        from: format!(
            "{} (embed area {} at byte {}, {} bytes)",
            iso.display(),
            area.path,
            area.offset,
            area.len
        ),
        notes: vec![],
    })
}

/// The files a PXE boot uses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PxeSet {
    pub kernel: PathBuf,
    /// In load order; the kernel sees them concatenated.
    pub initrds: Vec<PathBuf>,
    pub rootfs: PathBuf,
    /// The iPXE script the set came from, if any.
    pub ipxe: Option<PathBuf>,
}

/// One parsed iPXE script (only the commands a PXE boot of a node uses).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Ipxe {
    /// `initrd [--name NAME] URL` lines in order: (name, URL).
    pub initrds: Vec<(Option<String>, String)>,
    /// `kernel URL ARGS...`: the URL.
    pub kernel: Option<String>,
    /// The kernel command line (the words after the kernel URL).
    pub kargs: Vec<String>,
    /// A `boot` command follows.
    pub boots: bool,
}

/// Parses an iPXE script. Errors: no `#!ipxe` first line, an `initrd` or `kernel` line
/// without a URL, an option this reader does not know.
pub fn parse_ipxe(text: &str) -> Result<Ipxe, Vec<String>> {
    let mut problems = Vec::new();
    let mut lines = text.lines().map(str::trim).filter(|l| !l.is_empty());
    if lines.next() != Some("#!ipxe") {
        problems.push("the first line is not #!ipxe (iPXE runs no script without it)".to_string());
    }
    let mut out = Ipxe::default();
    for line in lines {
        if line.starts_with('#') {
            continue;
        }
        let mut words = line.split_whitespace();
        let cmd = words.next().unwrap_or("");
        let rest: Vec<&str> = words.collect();
        match cmd {
            "initrd" | "imgfetch" | "module" => {
                let mut name = None;
                let mut url = None;
                let mut i = 0;
                while i < rest.len() {
                    match rest[i] {
                        "--name" | "-n" => {
                            name = rest.get(i + 1).map(|s| s.to_string());
                            i += 2;
                        }
                        w if w.starts_with("--name=") => {
                            name = Some(w["--name=".len()..].to_string());
                            i += 1;
                        }
                        w if w.starts_with('-') => {
                            problems.push(format!("{cmd} option {w} is not understood here"));
                            i += 1;
                        }
                        w => {
                            url = Some(w.to_string());
                            break;
                        }
                    }
                }
                match url {
                    Some(u) => out.initrds.push((name, u)),
                    None => problems.push(format!("{cmd} line {line:?} has no URL")),
                }
            }
            "kernel" | "chain" => match rest.split_first() {
                Some((url, args)) => {
                    out.kernel = Some(url.to_string());
                    out.kargs = args.iter().map(|s| s.to_string()).collect();
                }
                None => problems.push(format!("kernel line {line:?} has no URL")),
            },
            "boot" => out.boots = true,
            _ => {}
        }
    }
    if problems.is_empty() {
        Ok(out)
    } else {
        Err(problems)
    }
}

/// The file name a URL ends in (query and fragment dropped).
fn url_file(url: &str) -> &str {
    let u = url.split(['?', '#']).next().unwrap_or(url);
    u.rsplit('/').next().unwrap_or(u)
}

/// Checks an iPXE script and resolves its files in `dir` (the files are served from one
/// place, so each URL's last segment names a file in `dir`). Every problem is returned.
pub fn resolve_ipxe(script: &Path, dir: &Path) -> Result<PxeSet, Refusal> {
    let text = std::fs::read_to_string(script)
        .map_err(|e| (1, vec![format!("cannot read {}: {e}", script.display())]))?;
    let what = script.display().to_string();
    let ipxe = parse_ipxe(&text).map_err(|p| {
        (
            3,
            p.into_iter().map(|l| format!("{what}: {l}")).collect::<Vec<_>>(),
        )
    })?;
    let mut problems = Vec::new();
    let mut file = |url: &str, role: &str| -> Option<PathBuf> {
        let name = url_file(url);
        let p = dir.join(name);
        if name.is_empty() || !p.is_file() {
            problems.push(format!(
                "{what}: the {role} {url} names {name:?}, which is not in {}",
                dir.display()
            ));
            None
        } else {
            Some(p)
        }
    };
    let kernel = match &ipxe.kernel {
        Some(k) => file(k, "kernel"),
        None => {
            file("", "kernel");
            None
        }
    };
    let initrds: Vec<PathBuf> = ipxe
        .initrds
        .iter()
        .filter_map(|(_, u)| file(u, "initrd"))
        .collect();
    let rootfs_url = crate::boot::cmdline::dracut_getarg(&ipxe.kargs.join(" "), "coreos.live.rootfs_url")
        .filter(|u| !u.is_empty());
    let rootfs = rootfs_url
        .as_deref()
        .and_then(|u| file(u, "coreos.live.rootfs_url"));
    if ipxe.kernel.is_none() {
        problems.push(format!("{what}: no kernel line"));
    }
    if ipxe.initrds.is_empty() {
        problems.push(format!(
            "{what}: no initrd line (the Ignition config travels in the initrd)"
        ));
    }
    // UEFI: the kernel's EFI stub loads only the initrds that `initrd=` names.
    let names: Vec<&str> = ipxe
        .initrds
        .iter()
        .map(|(n, u)| n.as_deref().unwrap_or_else(|| url_file(u)))
        .collect();
    let wanted: Vec<&str> = ipxe
        .kargs
        .iter()
        .filter_map(|k| k.strip_prefix("initrd="))
        .collect();
    if ipxe.kernel.is_some() && wanted.is_empty() {
        problems.push(format!(
            "{what}: the kernel line lacks initrd=<name> (UEFI machines would boot without the initrd)"
        ));
    }
    for w in &wanted {
        if !names.contains(w) {
            problems.push(format!("{what}: the kernel line says initrd={w}, but no initrd line loads an image named {w} (names: {})", names.join(", ")));
        }
    }
    if ipxe.kernel.is_some() {
        // Read as the live initramfs reads /proc/cmdline (crate::boot::cmdline): dracut's
        // getarg for coreos.*, ignition-generator's words for ignition.*; the last value wins.
        use crate::boot::cmdline as live;
        let cmdline = ipxe.kargs.join(" ");
        if rootfs_url.is_none() {
            problems.push(format!("{what}: the kernel line lacks coreos.live.rootfs_url= (the live initrd has no root filesystem to fetch)"));
        }
        if !live::ignition_cmdline_bool(&cmdline, "ignition.firstboot", "0") {
            problems.push(format!(
                "{what}: the kernel line lacks ignition.firstboot (ignition-generator queues no Ignition: the embedded config is not applied)"
            ));
        }
        let platform = live::ignition_cmdline_arg(&cmdline, "ignition.platform.id", "");
        if !live::IGNITION_PLATFORMS.contains(&platform.as_str()) {
            problems.push(format!(
                "{what}: the kernel line lacks a valid ignition.platform.id= (got {platform:?}; ignition --platform refuses it and the boot stops; PXE machines use metal)"
            ));
        }
        if let Some(iso) = live::dracut_getarg(&cmdline, "coreos.liveiso").filter(|v| !v.is_empty()) {
            problems.push(format!("{what}: the kernel line has coreos.liveiso={iso}; a PXE boot has no ISO and the live initrd would wait for it"));
        }
    }
    if !ipxe.boots {
        problems.push(format!(
            "{what}: no boot command (the script would end without booting)"
        ));
    }
    match (kernel, rootfs) {
        (Some(kernel), Some(rootfs)) if problems.is_empty() => Ok(PxeSet {
            kernel,
            initrds,
            rootfs,
            ipxe: Some(script.to_path_buf()),
        }),
        _ => Err((3, problems)),
    }
}

/// The PXE set in `dir` as `add-nodes --pxe` writes it: `node.<arch>-vmlinuz`,
/// `node.<arch>-initrd.img`, `node.<arch>-rootfs.img` and, when a base URL was set,
/// `node.<arch>.ipxe` (then the script decides and is checked). Errors: no or several
/// architectures' initrds, a missing kernel or rootfs, a script problem.
pub fn pxe_dir(dir: &Path) -> Result<PxeSet, Refusal> {
    let entries = std::fs::read_dir(dir)
        .map_err(|e| (1, vec![format!("cannot read --pxe-dir {}: {e}", dir.display())]))?;
    let mut arches: Vec<String> = entries
        .filter_map(|e| e.ok())
        .filter_map(|e| {
            e.file_name().to_str().and_then(|n| {
                n.strip_prefix("node.")?
                    .strip_suffix("-initrd.img")
                    .map(String::from)
            })
        })
        .collect();
    arches.sort();
    let arch = match arches.as_slice() {
        [a] => a.clone(),
        [] => return Err(refused(format!("{} holds no node.<arch>-initrd.img (the PXE files add-nodes --pxe writes)", dir.display()))),
        many => {
            return Err((2, vec![format!(
                "{} holds PXE files of several architectures ({}); pick one with --ipxe, or --kernel/--initrd/--rootfs",
                dir.display(),
                many.join(", ")
            )]))
        }
    };
    let ipxe = dir.join(format!("node.{arch}.ipxe"));
    if ipxe.is_file() {
        return resolve_ipxe(&ipxe, dir);
    }
    let set = PxeSet {
        kernel: dir.join(format!("node.{arch}-vmlinuz")),
        initrds: vec![dir.join(format!("node.{arch}-initrd.img"))],
        rootfs: dir.join(format!("node.{arch}-rootfs.img")),
        ipxe: None,
    };
    let missing: Vec<String> = [&set.kernel, &set.rootfs]
        .into_iter()
        .filter(|p| !p.is_file())
        .map(|p| {
            format!(
                "{} is missing (a PXE boot needs the kernel, the initrd and the rootfs)",
                p.display()
            )
        })
        .collect();
    if missing.is_empty() {
        Ok(set)
    } else {
        Err((3, missing))
    }
}

/// Boots a PXE set: the kernel and rootfs must be non-empty files; the initrds are
/// concatenated (each padded with zeros to 4 bytes, as boot loaders place them) and unpacked as
/// the kernel does; `config.ign` is parsed.
pub fn from_pxe(set: &PxeSet) -> Result<Loaded, Refusal> {
    let mut problems = Vec::new();
    for (p, role) in [(&set.kernel, "kernel"), (&set.rootfs, "rootfs")] {
        match std::fs::metadata(p) {
            Ok(m) if m.is_file() && m.len() > 0 => {}
            Ok(_) => problems.push(format!("the {role} {} is empty", p.display())),
            Err(e) => problems.push(format!("the {role} {}: {e}", p.display())),
        }
    }
    let mut initrd = Vec::new();
    for p in &set.initrds {
        match std::fs::read(p) {
            Ok(b) => {
                initrd.extend_from_slice(&b);
                initrd.resize(initrd.len().div_ceil(4) * 4, 0);
            }
            Err(e) => problems.push(format!("the initrd {}: {e}", p.display())),
        }
    }
    if !problems.is_empty() {
        return Err((3, problems));
    }
    let what = set
        .initrds
        .iter()
        .map(|p| p.display().to_string())
        .collect::<Vec<_>>()
        .join(" + ");
    let members = embed::unpack_archives(&initrd, &what)
        .map_err(|e| refused(format!("the initrd as the kernel reads it: {e}")))?;
    let bytes = members.get("config.ign").ok_or_else(|| {
        refused(format!(
            "no Ignition in the initrd {what}: no archive in it holds config.ign (members: {}); add-nodes --pxe appends it",
            members.keys().cloned().collect::<Vec<_>>().join(", ")
        ))
    })?;
    let cfg = ignition::parse(bytes).map_err(|e| refused(format!("{what}: {e}")))?;
    let from = match &set.ipxe {
        Some(s) => format!("PXE script {} (initrd {what})", s.display()),
        None => format!(
            "PXE files (kernel {}, initrd {what}, rootfs {})",
            set.kernel.display(),
            set.rootfs.display()
        ),
    };
    Ok(Loaded {
        cfg,
        from,
        notes: vec![],
    })
}

/// The agent installer's units a simulated appliance disk carries, each with the units it is
/// ordered `After=` (names of the node image's units, `src/ignition/units.rs`). `boot` runs no
/// unit; `run-node --config-image` boots a disk made of a node image instead
/// (`crate::noderun::appliance`).
const DISK_UNITS: &[(&str, &[&str])] = &[
    ("assisted-service.service", &[]),
    ("agent-import-cluster.service", &["assisted-service.service"]),
    (
        "agent-register-infraenv.service",
        &["agent-import-cluster.service"],
    ),
    ("agent.service", &["agent-register-infraenv.service"]),
    ("apply-host-config.service", &["agent-register-infraenv.service"]),
    ("set-hostname.service", &[]),
    (
        "agent-add-node.service",
        &["agent.service", "apply-host-config.service"],
    ),
    ("agent-auth-token-status.service", &[]),
];

/// Files the simulated appliance disk image already has: the agent installer's systemd units
/// ([`DISK_UNITS`], enabled) and the user's SSH key. Path → contents.
pub fn appliance_disk_files() -> BTreeMap<String, Vec<u8>> {
    let mut out = BTreeMap::new();
    let mut units: Vec<(&str, &[&str], &str)> =
        DISK_UNITS.iter().map(|(n, after)| (*n, *after, "")).collect();
    units.push((
        "pre-network-manager-config.service",
        &[],
        "Before=NetworkManager.service\n",
    ));
    units.push(("assisted-service-db.service", &[], ""));
    // The commands of the roles, as the installer's units run them
    // (the agent installer's unit files): the database as postgres, the service with its
    // env files, the client with its inputs mounted. The rest run a script of the disk.
    let exec = |name: &str| -> String {
        let a = "/usr/local/share/assisted-service";
        match name {
            "assisted-service-db.service" => format!("/usr/bin/podman run --net host --user=postgres --name=assisted-db --env-file={a}/assisted-db.env ${{SERVICE_IMAGE}} /bin/bash start_db.sh"),
            "assisted-service.service" => format!("/usr/bin/podman run --net host --name=service --env-file=/etc/assisted/rendezvous-host.env --env-file={a}/assisted-service.env --env-file={a}/images.env --env-file={a}/agent-images.env ${{SERVICE_IMAGE}}"),
            "agent-import-cluster.service" => "/usr/bin/podman run --net host -v /etc/assisted/clusterconfig:/clusterconfig -v /etc/assisted/manifests:/manifests -v /etc/assisted/extra-manifests:/extra-manifests ${SERVICE_IMAGE} /usr/local/bin/agent-installer-client importCluster".into(),
            "agent-register-infraenv.service" => "/usr/bin/podman run --net host -v /etc/assisted/manifests:/manifests ${SERVICE_IMAGE} /usr/local/bin/agent-installer-client registerInfraEnv".into(),
            _ => format!("/usr/local/bin/{}.sh", name.trim_end_matches(".service")),
        }
    };
    for (name, after, extra) in units {
        let text = format!(
            "[Unit]\nDescription={name} (appliance disk image)\nAfter={}\n{extra}\n[Service]\nType=oneshot\nExecStart={}\n\n[Install]\nWantedBy=multi-user.target\n",
            if after.is_empty() { "local-fs.target".to_string() } else { after.join(" ") },
            exec(name),
        );
        out.insert(format!("/etc/systemd/system/{name}"), text.into_bytes());
    }
    out.insert(
        "/home/core/.ssh/authorized_keys.d/appliance".into(),
        b"ssh-ed25519 AAAA (appliance disk image)\n".to_vec(),
    );
    out
}

/// `spec.releaseImage` of the ClusterImageSet in `files`, if there is one.
fn release_of(files: &BTreeMap<String, Vec<u8>>) -> Option<String> {
    let text = String::from_utf8_lossy(files.get(CLUSTER_IMAGE_SET)?).into_owned();
    let docs: Vec<Value> = serde_saphyr::from_multiple(&text).ok()?;
    docs.iter()
        .filter(|d| d.get("kind").and_then(|k| k.as_str()) == Some("ClusterImageSet"))
        .find_map(|d| {
            d.pointer("/spec/releaseImage")
                .and_then(|r| r.as_str())
                .map(String::from)
        })
}

/// Boots the appliance with config image `img`. `disk_release` is the release built into the
/// simulated appliance disk (`--appliance-release`); without it the release is not checked.
///
/// Refused (exit 3): another volume label, no `config.gz`, a corrupt archive, a release that
/// differs from the disk's.
pub fn from_config_image(img: &Path, disk_release: Option<&str>) -> Result<Loaded, Refusal> {
    let mut f =
        std::fs::File::open(img).map_err(|e| (1, vec![format!("cannot open {}: {e}", img.display())]))?;
    let label = agent_day2_iso9660::volume_id(&mut f)
        .map_err(|e| refused(format!("{}: not an ISO9660 config image: {e}", img.display())))?;
    if label.trim_end() != CONFIG_IMAGE_LABEL {
        return Err(refused(format!(
            "{}: volume label {:?}; the appliance's loader only reads the device labelled {CONFIG_IMAGE_LABEL:?} (write it with add-nodes --config-image)",
            img.display(),
            label.trim_end()
        )));
    }
    let files = embed::read_config_image(&mut f).map_err(|e| refused(format!("{}: {e}", img.display())))?;
    let mut notes = Vec::new();
    match (disk_release, release_of(&files)) {
        (Some(disk), Some(cfg)) if disk != cfg => {
            return Err(refused(format!(
                "{}: the config image's ClusterImageSet releaseImage {cfg} differs from the release built into the appliance disk ({disk}): \
                 the cluster was upgraded since the appliance was built; boot these hosts from a live ISO (add-nodes without --config-image) \
                 or from an appliance disk built for {cfg}",
                img.display()
            )))
        }
        (None, _) => notes.push("no --appliance-release: the config's release is not compared with the appliance disk's".to_string()),
        _ => {}
    }
    let mut all = appliance_disk_files();
    for (path, data) in files {
        if let Some(old) = all.insert(path.clone(), data) {
            if all[&path] != old {
                notes.push(format!(
                    "{path} replaces the appliance disk image's file (the loader extracts with cpio -u)"
                ));
            }
        }
    }
    let mut cfg = ignition::Config {
        version: "appliance".into(),
        files: all,
        ..Default::default()
    };
    // The disk image's units are installed and enabled (WantedBy=) there.
    for (p, d) in cfg.files.iter() {
        if let Some(name) = p
            .strip_prefix("/etc/systemd/system/")
            .filter(|n| !n.contains('/'))
        {
            let text = String::from_utf8_lossy(d).into_owned();
            cfg.units.insert(
                name.to_string(),
                ignition::Unit {
                    name: name.to_string(),
                    enabled: None,
                    mask: false,
                    text,
                },
            );
        }
    }
    let keys: Vec<String> = cfg
        .under("/home/core/.ssh/authorized_keys.d/")
        .map(|(_, d)| String::from_utf8_lossy(d).trim().to_string())
        .collect();
    cfg.ssh_keys.insert("core".into(), keys);
    Ok(Loaded {
        cfg,
        from: format!("config image {} (label {CONFIG_IMAGE_LABEL})", img.display()),
        notes,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = "#!ipxe\ninitrd --name initrd http://h/pxe/node.x86_64-initrd.img\nkernel http://h/pxe/node.x86_64-vmlinuz initrd=initrd ignition.firstboot ignition.platform.id=metal coreos.live.rootfs_url=http://h/pxe/node.x86_64-rootfs.img\nboot\n";

    fn dir_with(names: &[&str]) -> tempfile::TempDir {
        let d = tempfile::tempdir().unwrap();
        for n in names {
            std::fs::write(d.path().join(n), b"x").unwrap();
        }
        d
    }

    #[test]
    fn parses_the_script_add_nodes_writes() {
        let s = parse_ipxe(GOOD).unwrap();
        assert_eq!(
            s.initrds,
            vec![(
                Some("initrd".to_string()),
                "http://h/pxe/node.x86_64-initrd.img".to_string()
            )]
        );
        assert_eq!(s.kernel.as_deref(), Some("http://h/pxe/node.x86_64-vmlinuz"));
        assert!(s.boots);
        assert_eq!(url_file("http://h/a/b.img?x=1"), "b.img");
    }

    #[test]
    fn resolves_files_next_to_the_script() {
        let d = dir_with(&[
            "node.x86_64-initrd.img",
            "node.x86_64-vmlinuz",
            "node.x86_64-rootfs.img",
        ]);
        let p = d.path().join("node.x86_64.ipxe");
        std::fs::write(&p, GOOD).unwrap();
        let set = resolve_ipxe(&p, d.path()).unwrap();
        assert_eq!(set.rootfs, d.path().join("node.x86_64-rootfs.img"));
        assert_eq!(set.initrds, vec![d.path().join("node.x86_64-initrd.img")]);
    }

    #[test]
    fn lists_every_script_problem() {
        let d = dir_with(&["node.x86_64-initrd.img", "node.x86_64-vmlinuz"]);
        let p = d.path().join("s.ipxe");
        let bad = GOOD
            .replace("ignition.firstboot ", "coreos.liveiso=rhcos-418 ")
            .replace("initrd=initrd", "initrd=other")
            .replace("boot\n", "");
        std::fs::write(&p, bad).unwrap();
        let (code, lines) = resolve_ipxe(&p, d.path()).unwrap_err();
        assert_eq!(code, 3);
        let all = lines.join("\n");
        for want in [
            "names \"node.x86_64-rootfs.img\", which is not in",
            "lacks ignition.firstboot",
            "has coreos.liveiso=rhcos-418",
            "initrd=other",
            "no boot command",
        ] {
            assert!(all.contains(want), "{want} not in:\n{all}");
        }
        assert_eq!(lines.len(), 5, "{all}");
    }

    #[test]
    fn disk_units_are_ordered_as_the_node_units() {
        let files = appliance_disk_files();
        let u = String::from_utf8(files["/etc/systemd/system/agent-add-node.service"].clone()).unwrap();
        assert_eq!(
            ignition::unit_directive(&u, "After"),
            vec!["agent.service", "apply-host-config.service"]
        );
        assert!(files.contains_key("/etc/systemd/system/pre-network-manager-config.service"));
    }
}
