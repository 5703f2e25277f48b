//! `run-node --config-image IMG --appliance-disk ISO`: an appliance machine. Only `config.gz`
//! on the config image is ours; what reads it is upstream's loader on the appliance disk
//! (openshift/installer, read through the code index: `data/data/agent/files/usr/local/bin/
//! load-config-iso.sh` at 4bbb027d, run by `data/data/agent/systemd/units/
//! load-config-iso@.service.template` at de45fedd, started by udev
//! (`etc/udev/rules.d/80-agent-config-image.rules`: `ID_FS_LABEL=="agent_configimage"` →
//! `load-config-iso@$devnode.service`) with `CONFIG_IMAGE_FILES` = `GetConfigImageFiles()`
//! of `pkg/asset/agent/image/unconfigured_ignition.go` at 193d48fe, the list
//! [`LOADER_FILES`]). Nothing of upstream's is copied here; what each part stands for:
//!
//! - **the appliance disk** ([`disk_ignition`]): the node ISO's Ignition that `add-nodes`
//!   writes for the same hosts (`--appliance-disk`), laid into the machine root as the ISO path
//!   lays it: our node units (enabled as the ISO enables them), scripts and every file the
//!   loader does not copy. A real appliance disk is built once per release, before the
//!   cluster exists, from upstream's unconfigured Ignition (install workflow): it holds
//!   upstream's units, not ours, and none of the cluster's files. So of the paths the loader
//!   copies, the stand-in disk keeps only those a real appliance disk has too ([`DISK_HAS`]:
//!   what the unconfigured Ignition writes, among them `cluster-image-set.yaml`, the release
//!   the disk was built for, whose `releaseImage` `--appliance-release` sets); the rest
//!   (host configs, `rendezvous-host.env`, `/opt/agent/tls`, ...) must come out of
//!   `config.gz`. Files outside the loader's list (`add-nodes.env`, `clusterconfig/`,
//!   `images.env`, ...) stay as the ISO has them: on a real appliance disk nothing would put
//!   them there.
//! - **udev and systemd starting `load-config-iso@sr0.service`**: the machine runs [`load`]
//!   once, after laying the disk and before any unit starts (upstream orders the unit only
//!   `After=network-online.target`; the node units here do not wait for it).
//! - **the device mount** (`systemd-mount ... /media/config-image`): `config.gz` is read from
//!   the ISO9660 image by the runner ([`stage`]), after the volume label check the udev rule
//!   makes.
//! - **`load-config-iso.sh`** ([`load`]): its steps in its order, each with the real tool
//!   chrooted to the machine root: `gunzip -f`, `cpio --list`, the `diff` of the disk's
//!   cluster-image-set.yaml against the archive's (`cpio -iv --to-stdout`), then per entry
//!   `cpio -ivdu ENTRY` (a required file, `-f` checked) or `cpio -ivdu "ENTRY*"`,
//!   `mkdir -p /etc/assisted/extra-manifests`, `usermod --password "$(cat hash)" core`
//!   unless `/etc/assisted/appliance-override-password-set` exists, enabling
//!   `start-cluster-installation.service` when the disk has it disabled, and
//!   `pre-network-manager-config.sh` when `/etc/assisted/network` exists. Differences: `-c`
//!   is left out of the cpio flags (RHEL's cpio reads `-c` as newc, Debian's as the old ASCII
//!   format; without it GNU cpio detects newc itself); a failure ends the machine (exit 6)
//!   instead of the script's retry every 5 s, which would fail the same way on the same
//!   archive; `systemctl restart NetworkManager` and `nmcli conn up` are not run (run-node
//!   sets the machine's address itself).

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::boot::source::Refusal;

/// The loader's `CONFIG_IMAGE_FILES`, in its order (see the module docs for where it is read).
pub const LOADER_FILES: &[&str] = &[
    "/etc/assisted/manifests/pull-secret.yaml",
    "/etc/assisted/manifests/cluster-deployment.yaml",
    "/etc/assisted/manifests/cluster-image-set.yaml",
    "/etc/assisted/manifests/agent-cluster-install.yaml",
    "/etc/assisted/manifests/infraenv.yaml",
    "/etc/assisted/manifests",
    "/etc/assisted/extra-manifests",
    "/etc/assisted/hostconfig",
    "/etc/assisted/hostnames",
    "/etc/assisted/network",
    "/etc/NetworkManager/conf.d/clientid.conf",
    "/etc/issue",
    "/etc/systemd/system.conf.d/10-default-env.conf",
    "/root/.docker/config.json",
    "/usr/local/share/start-cluster/start-cluster.env",
    "/usr/local/share/assisted-service/assisted-service.env",
    "/opt/agent/tls/kubeadmin-password.hash",
    "/opt/agent/tls/admin-kubeconfig-signer.key",
    "/opt/agent/tls/admin-kubeconfig-signer.crt",
    "/opt/agent/tls/kube-apiserver-lb-signer.key",
    "/opt/agent/tls/kube-apiserver-lb-signer.crt",
    "/opt/agent/tls/kube-apiserver-localhost-signer.key",
    "/opt/agent/tls/kube-apiserver-localhost-signer.crt",
    "/opt/agent/tls/kube-apiserver-service-network-signer.key",
    "/opt/agent/tls/kube-apiserver-service-network-signer.crt",
    "/etc/assisted/rendezvous-host.env",
];

/// The release the disk was built for, and what the loader compares with the archive's.
pub const CLUSTER_IMAGE_SET: &str = "/etc/assisted/manifests/cluster-image-set.yaml";
/// Paths of the loader's list a real appliance disk already has: upstream's unconfigured
/// Ignition (install workflow, `unconfigured_ignition.go`) writes `agent/files` (the issue,
/// NetworkManager's `clientid.conf`, the default environment, root's pull secret,
/// `start-cluster.env`, `assisted-service.env`) and the InfraEnv, ClusterImageSet and pull
/// secret manifests. The loader replaces them (`cpio -u`); its `-f` check after the copy
/// finds the disk's copy when the archive lacks one, as on a real disk.
pub const DISK_HAS: &[&str] = &[
    "/etc/assisted/manifests/pull-secret.yaml",
    "/etc/assisted/manifests/cluster-image-set.yaml",
    "/etc/assisted/manifests/infraenv.yaml",
    "/etc/NetworkManager/conf.d/clientid.conf",
    "/etc/issue",
    "/etc/systemd/system.conf.d/10-default-env.conf",
    "/root/.docker/config.json",
    "/usr/local/share/start-cluster/start-cluster.env",
    "/usr/local/share/assisted-service/assisted-service.env",
];
/// The loader unit as udev starts it for the config image's device.
pub const UNIT: &str = "load-config-iso@sr0.service";
/// The device (`%I` of the unit).
pub const DEVICE: &str = "/dev/sr0";
/// The volume label the udev rule matches.
pub const LABEL: &str = "agent_configimage";

/// An entry naming one required file (the loader's `*.*` or `/etc/issue` test).
pub fn entry_is_file(entry: &str) -> bool {
    entry.contains('.') || entry == "/etc/issue"
}

/// Whether the loader copies member `path` (a file entry exactly; a directory entry as the
/// pattern `ENTRY*`, whose `*` also matches `/`).
pub fn copies(path: &str) -> bool {
    LOADER_FILES.iter().any(|e| {
        if entry_is_file(e) {
            path == *e
        } else {
            path.starts_with(e)
        }
    })
}

/// What a machine loads (`Spec::appliance`): `config.gz` as the device holds it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Load {
    /// Host path of the copy of `config.gz`.
    pub config_gz: PathBuf,
    /// The config image it came from (for messages).
    pub image: String,
}

/// Where [`stage`] puts `config.gz` in the work directory.
pub fn staged_path(work: &Path) -> PathBuf {
    work.join("config-image").join("config.gz")
}

/// Checks the image as udev does (ISO9660 labelled `agent_configimage`; otherwise the loader
/// never starts) and copies its `config.gz` to [`staged_path`]. Refused (exit 3): another
/// label, no `config.gz`; unreadable (exit 1).
pub fn stage(img: &Path, work: &Path) -> Result<Load, Refusal> {
    let mut f = std::fs::File::open(img).map_err(|e| {
        (
            3,
            vec![format!("--config-image {}: cannot open: {e}", img.display())],
        )
    })?;
    let label = agent_day2_iso9660::volume_id(&mut f).map_err(|e| {
        (
            3,
            vec![format!("{}: not an ISO9660 config image: {e}", img.display())],
        )
    })?;
    if label.trim_end() != LABEL {
        return Err((3, vec![format!(
            "{}: volume label {:?}; the appliance's udev rule starts the loader only for a device labelled {LABEL:?} (write it with add-nodes --config-image)",
            img.display(),
            label.trim_end()
        )]));
    }
    let entry = agent_day2_iso9660::find(&mut f, "config.gz")
        .map_err(|e| (3, vec![format!("{}: {e}", img.display())]))?
        .ok_or_else(|| {
            (3, vec![format!(
                "{}: no config.gz (the loader would print \"Could not find config.gz in /media/config-image\" every 5 s)",
                img.display()
            )])
        })?;
    let gz = agent_day2_iso9660::read_entry(&mut f, &entry)
        .map_err(|e| (3, vec![format!("{}: reading config.gz: {e}", img.display())]))?;
    let dst = staged_path(work);
    std::fs::create_dir_all(dst.parent().unwrap())
        .and_then(|()| std::fs::write(&dst, &gz))
        .map_err(|e| (1, vec![format!("{}: {e}", dst.display())]))?;
    Ok(Load {
        config_gz: dst,
        image: img.display().to_string(),
    })
}

/// The files of the config image's `config.gz` (absolute path → contents; empty when it
/// cannot be read, which [`stage`] reports).
pub fn config_files(img: &Path) -> BTreeMap<String, Vec<u8>> {
    std::fs::File::open(img)
        .ok()
        .and_then(|mut f| crate::boot::embed::read_config_image(&mut f).ok())
        .unwrap_or_default()
}

/// `text` with the value of every `releaseImage:` key replaced by `release` (a folded or
/// block value's continuation lines, indented deeper than the key, go with it). None: no such
/// key.
pub fn with_release(text: &str, release: &str) -> Option<String> {
    let mut found = false;
    let mut out: Vec<String> = Vec::new();
    let mut skip_deeper_than: Option<usize> = None;
    for l in text.lines() {
        let indent = l.len() - l.trim_start().len();
        if let Some(d) = skip_deeper_than {
            if indent > d && !l.trim().is_empty() {
                continue;
            }
            skip_deeper_than = None;
        }
        match l.find("releaseImage:") {
            Some(i) => {
                found = true;
                out.push(format!("{}releaseImage: {release}", &l[..i]));
                skip_deeper_than = Some(indent);
            }
            None => out.push(l.to_string()),
        }
    }
    found.then(|| out.join("\n") + if text.ends_with('\n') { "\n" } else { "" })
}

/// The stand-in disk's Ignition from the node ISO's `raw` JSON: every `storage.files` and
/// `storage.directories` entry the loader copies is removed, except those of [`DISK_HAS`];
/// the ClusterImageSet's `releaseImage` becomes `release` when given. Returns the new JSON and what was taken
/// off (paths). Errors: not JSON, no ClusterImageSet to rewrite.
pub fn disk_ignition(raw: &[u8], release: Option<&str>) -> Result<(Vec<u8>, Vec<String>), String> {
    let mut v: Value =
        serde_json::from_slice(raw).map_err(|e| format!("the disk's Ignition is not JSON: {e}"))?;
    let mut removed = Vec::new();
    let mut cis_seen = false;
    for key in ["files", "directories"] {
        let Some(list) = v
            .pointer_mut(&format!("/storage/{key}"))
            .and_then(|l| l.as_array_mut())
        else {
            continue;
        };
        let mut kept = Vec::new();
        for mut e in std::mem::take(list) {
            let path = e.get("path").and_then(|p| p.as_str()).unwrap_or("").to_string();
            if key == "files" && path == CLUSTER_IMAGE_SET {
                cis_seen = true;
                if let Some(r) = release {
                    let src = e
                        .pointer("/contents/source")
                        .and_then(|s| s.as_str())
                        .unwrap_or("");
                    let text = crate::boot::ignition::decode_data_url(src)
                        .map_err(|err| format!("{CLUSTER_IMAGE_SET}: {err}"))?;
                    let new = with_release(&String::from_utf8_lossy(&text), r)
                        .ok_or_else(|| format!("{CLUSTER_IMAGE_SET} of the disk has no releaseImage line"))?;
                    use base64::Engine;
                    let url = format!(
                        "data:;base64,{}",
                        base64::engine::general_purpose::STANDARD.encode(new.as_bytes())
                    );
                    e["contents"] = serde_json::json!({ "source": url });
                }
                kept.push(e);
            } else if copies(&path) && !(key == "files" && DISK_HAS.contains(&path.as_str())) {
                removed.push(path);
            } else {
                kept.push(e);
            }
        }
        *list = kept;
    }
    if release.is_some() && !cis_seen {
        return Err(format!(
            "the disk's Ignition has no {CLUSTER_IMAGE_SET} to set --appliance-release in"
        ));
    }
    Ok((serde_json::to_vec(&v).unwrap_or_default(), removed))
}

/// The loader's console and journal (`journal/load-config-iso@sr0.service.log`).
struct Log {
    label: String,
    t0: Instant,
    journal: Option<std::fs::File>,
}

impl Log {
    fn say(&mut self, msg: &str) {
        println!("{}: {} {UNIT}: {msg}", self.label, super::systemd::stamp(self.t0));
        let _ = std::io::stdout().flush();
        if let Some(j) = self.journal.as_mut() {
            let _ = writeln!(j, "{msg}");
        }
    }

    /// A command's output into the journal only (cpio's `-v` names, diff's lines).
    fn journal(&mut self, text: &str) {
        if let Some(j) = self.journal.as_mut() {
            for l in text.lines() {
                let _ = writeln!(j, "{l}");
            }
        }
    }
}

/// Runs `args` chrooted to `root` with `stdin` from a file of the machine (a path inside it),
/// root's environment reduced to a PATH; returns (success, stdout, stderr). Errors: the
/// command cannot be started.
fn chrooted(root: &Path, args: &[&str], stdin: Option<&str>) -> Result<(bool, String, String), String> {
    let chroot = if Path::new("/usr/sbin/chroot").exists() {
        "/usr/sbin/chroot"
    } else {
        "chroot"
    };
    let mut cmd = Command::new(chroot);
    cmd.arg(root)
        .args(args)
        .env_clear()
        .env(
            "PATH",
            "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
        )
        .env("LANG", "C")
        .current_dir("/");
    match stdin {
        Some(p) => {
            let f =
                std::fs::File::open(root.join(p.trim_start_matches('/'))).map_err(|e| format!("{p}: {e}"))?;
            cmd.stdin(Stdio::from(f));
        }
        None => {
            cmd.stdin(Stdio::null());
        }
    }
    let o = cmd
        .output()
        .map_err(|e| format!("cannot run chroot {}: {e}", args.join(" ")))?;
    Ok((
        o.status.success(),
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    ))
}

/// Loads `load` onto the machine root `root` as upstream's loader does (module docs); `units`
/// are the disk's units (name → Ignition `enabled`, text). Returns the units the loader
/// enables. Errors: the loader's failure message (the machine then stops; upstream retries
/// every 5 s with the same result).
pub fn load(
    label: &str,
    root: &Path,
    journal_dir: &Path,
    load: &Load,
    units: &BTreeMap<String, (Option<bool>, String)>,
) -> Result<Vec<String>, String> {
    let mut log = Log {
        label: label.to_string(),
        t0: Instant::now(),
        journal: std::fs::File::create(journal_dir.join(format!("{UNIT}.log"))).ok(),
    };
    let r = steps(&mut log, root, load, units);
    if let Err(e) = &r {
        log.say(&format!("failed: {e}"));
        log.say("(upstream's loader retries every 5 s; the same archive fails the same way, so the machine stops here)");
    }
    r
}

fn steps(
    log: &mut Log,
    root: &Path,
    load: &Load,
    units: &BTreeMap<String, (Option<bool>, String)>,
) -> Result<Vec<String>, String> {
    log.say(&format!(
        "Mounted {DEVICE} on /media/config-image ({}, label {LABEL})",
        load.image
    ));
    // The loader's temporary directory (mktemp --tmpdir -d "config-image--XXXXXXXXXX").
    let tmp = format!("/tmp/config-image--{:010}", std::process::id());
    let tmp_host = root.join(tmp.trim_start_matches('/'));
    std::fs::create_dir_all(&tmp_host).map_err(|e| format!("mkdir {tmp}: {e}"))?;
    std::fs::copy(&load.config_gz, tmp_host.join("config.gz"))
        .map_err(|e| format!("cp config.gz {tmp}: {e}"))?;
    let gz = format!("{tmp}/config.gz");
    let (ok, _, err) = chrooted(root, &["gunzip", "-f", &gz], None)?;
    if !ok {
        return Err(format!("gunzip -f {gz}: {}", err.trim()));
    }
    let archive = format!("{tmp}/config");
    let (ok, list, err) = chrooted(root, &["cpio", "--list"], Some(&archive))?;
    if !ok {
        return Err(format!("cpio --list < {archive}: {}", err.trim()));
    }
    log.say(&format!("List of files to copy: {}", list.lines().count()));
    log.journal(&list);

    // The release check: the disk's ClusterImageSet against the archive's, the whole file.
    let disk_cis =
        std::fs::read_to_string(root.join(CLUSTER_IMAGE_SET.trim_start_matches('/'))).unwrap_or_default();
    let release_image: String = disk_cis
        .lines()
        .filter(|l| l.contains("releaseImage"))
        .filter_map(|l| l.split_once("releaseImage: ").map(|(_, r)| r.to_string()))
        .collect::<Vec<_>>()
        .join("\n");
    let (same, diff, err) = chrooted(
        root,
        &[
            "bash",
            "-c",
            "diff \"$1\" <(cpio -iv --to-stdout \"$1\" < \"$2\")",
            "load-config-iso",
            CLUSTER_IMAGE_SET,
            &archive,
        ],
        None,
    )?;
    log.journal(&diff);
    log.journal(&err);
    if !same {
        let _ = std::fs::remove_dir_all(&tmp_host);
        return Err(format!(
            "The cluster-image-set in archive does not match current release {release_image} \
             (diff of the disk's {CLUSTER_IMAGE_SET} and the archive's: {})",
            diff.lines()
                .filter(|l| l.starts_with('<') || l.starts_with('>'))
                .collect::<Vec<_>>()
                .join(" | ")
        ));
    }
    log.say(&format!("Archive on {DEVICE} contains release {release_image}"));

    for entry in LOADER_FILES {
        if entry_is_file(entry) {
            let (_, out, err) = chrooted(root, &["cpio", "-ivdu", entry], Some(&archive))?;
            log.journal(&out);
            log.journal(&err);
            if root.join(entry.trim_start_matches('/')).is_file() {
                log.say(&format!("Copied file {entry}"));
            } else {
                log.say(&format!("Expected file {entry} is not in archive"));
                let _ = std::fs::remove_dir_all(&tmp_host);
                return Err(format!(
                    "Failure copying files from config-image, expected file {entry} is not in archive"
                ));
            }
        } else {
            let pattern = format!("{entry}*");
            let (_, out, err) = chrooted(root, &["cpio", "-ivdu", &pattern], Some(&archive))?;
            log.journal(&out);
            log.journal(&err);
            if root.join(entry.trim_start_matches('/')).is_dir() {
                log.say(&format!("Copied files in {entry}"));
            }
        }
    }
    let extra = root.join("etc/assisted/extra-manifests");
    if !extra.is_dir() {
        std::fs::create_dir_all(&extra)
            .map_err(|e| format!("mkdir -p /etc/assisted/extra-manifests: {e}"))?;
    }
    log.say(&format!("Successfully copied contents of config.gz on {DEVICE}"));

    if root.join("etc/assisted/appliance-override-password-set").exists() {
        log.say("Setting of core password is overridden");
    } else {
        log.say("Setting core password");
        let hash =
            std::fs::read_to_string(root.join("opt/agent/tls/kubeadmin-password.hash")).unwrap_or_default();
        // `usermod ... core` fails where the root has no core user (RHCOS has one; the host
        // whose /etc this root overlays may not); the loader goes on either way.
        let (ok, out, err) = chrooted(root, &["usermod", "--password", hash.trim_end(), "core"], None)?;
        log.journal(&out);
        if !ok {
            log.say(&format!("usermod: {} (the loader goes on)", err.trim()));
        }
    }

    let mut enable = Vec::new();
    let s = "start-cluster-installation.service";
    match units.get(s) {
        Some((Some(true), _)) => {}
        Some(_) => {
            log.say(&format!("Service {s} is disabled, enabling it"));
            enable.push(s.to_string());
        }
        None => log.say(&format!(
            "{s}: not on the disk (systemctl is-enabled finds no such unit)"
        )),
    }

    if root.join("etc/assisted/network").is_dir() {
        let script = "/usr/local/bin/pre-network-manager-config.sh";
        if root.join(script.trim_start_matches('/')).is_file() {
            let (ok, out, err) = chrooted(root, &[script], None)?;
            log.journal(&out);
            log.journal(&err);
            log.say(&format!(
                "{script}: {}",
                if ok {
                    "done".to_string()
                } else {
                    format!("failed: {}", err.trim())
                }
            ));
        } else {
            log.say(&format!("{script}: not on the disk"));
        }
        log.say("systemctl restart NetworkManager, nmcli conn up: not run here (run-node sets the machine's address)");
    }
    let _ = std::fs::remove_dir_all(&tmp_host);
    Ok(enable)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loader_entries_are_files_or_directory_patterns() {
        assert_eq!(LOADER_FILES.iter().filter(|e| entry_is_file(e)).count(), 21);
        assert!(copies("/etc/assisted/hostconfig/worker-0/role"));
        assert!(copies("/etc/assisted/manifests/nmstateconfig.yaml"));
        assert!(copies("/etc/issue"));
        assert!(!copies("/etc/issue.d/x"));
        assert!(!copies("/etc/assisted/add-nodes.env"));
        assert!(!copies(
            "/etc/assisted/clusterconfig/worker-ignition-endpoint.json"
        ));
    }

    #[test]
    fn the_disk_keeps_its_release_record_and_loses_what_the_loader_brings() {
        use base64::Engine;
        let b64 = |s: &str| {
            format!(
                "data:;base64,{}",
                base64::engine::general_purpose::STANDARD.encode(s)
            )
        };
        let ign = serde_json::json!({
            "ignition": {"version": "3.2.0"},
            "storage": {
                "files": [
                    {"path": CLUSTER_IMAGE_SET, "mode": 420, "contents": {"source": b64("kind: ClusterImageSet\nspec:\n  releaseImage: quay.io/a@sha256:1\n")}},
                    {"path": "/etc/assisted/rendezvous-host.env", "mode": 420, "contents": {"source": b64("X=1\n")}},
                    {"path": "/usr/local/share/assisted-service/assisted-service.env", "mode": 420, "contents": {"source": b64("Z=1\n")}},
                    {"path": "/etc/assisted/add-nodes.env", "mode": 420, "contents": {"source": b64("Y=1\n")}}
                ],
                "directories": [{"path": "/etc/assisted/extra-manifests", "mode": 493}]
            }
        });
        let raw = serde_json::to_vec(&ign).unwrap();
        let (out, removed) = disk_ignition(&raw, Some("quay.io/b@sha256:2")).unwrap();
        assert_eq!(
            removed,
            vec![
                "/etc/assisted/rendezvous-host.env",
                "/etc/assisted/extra-manifests"
            ]
        );
        let cfg = crate::boot::ignition::parse(&out).unwrap();
        assert_eq!(
            cfg.text(CLUSTER_IMAGE_SET).unwrap(),
            "kind: ClusterImageSet\nspec:\n  releaseImage: quay.io/b@sha256:2\n"
        );
        assert!(cfg.files.contains_key("/etc/assisted/add-nodes.env"));
        assert!(cfg
            .files
            .contains_key("/usr/local/share/assisted-service/assisted-service.env"));
        assert!(!cfg.files.contains_key("/etc/assisted/rendezvous-host.env"));
        assert_eq!(
            with_release(
                "spec:\n  releaseImage: >-\n    quay.io/a@sha256:1\nstatus: {}\n",
                "q/b:2"
            )
            .unwrap(),
            "spec:\n  releaseImage: q/b:2\nstatus: {}\n"
        );
        let (same, _) = disk_ignition(&raw, None).unwrap();
        let cfg = crate::boot::ignition::parse(&same).unwrap();
        assert!(cfg
            .text(CLUSTER_IMAGE_SET)
            .unwrap()
            .contains("quay.io/a@sha256:1"));
    }
}
