//! The live PXE boot of a `run-node --pxe-dir` machine whose directory holds an iPXE script:
//! what the RHCOS live initramfs does between the kernel and Ignition, so the kernel command line
//! the script gives is judged the way a live system reads it, not by a list of expected words.
//!
//! run-node side ([`load`]): the script is parsed as iPXE runs it (`initrd` lines, then `kernel
//! URL ARGS...`, `boot`); the kernel and initrd files are taken from the directory (each URL's
//! last segment; the files are served from one place); the initrds are concatenated and unpacked
//! as the kernel does ([`embed::unpack_archives`]); the kernel command line is the `kernel` line's
//! arguments joined by one space, as iPXE's `kernel` sets an image's command line. The rootfs is
//! NOT read from the directory: the machine fetches it from `coreos.live.rootfs_url`.
//!
//! Machine side ([`boot`], run by the machine's PID 1 after its network is up, before Ignition's
//! files are laid out). Each step names the real thing it stands in for; upstream is
//! coreos/fedora-coreos-config `overlay.d/05core/usr/lib/dracut/modules.d/35coreos-live/` and
//! `35coreos-ignition/`, coreos/ignition `dracut/30ignition/`, the kernel and dracut:
//!
//! 1. The kernel's command line: written to a file that is bind-mounted over the machine's
//!    `/proc/cmdline` (as `ostree-cmdline.sh` itself does in the live initrd), then read back
//!    from there by every later step.
//! 2. The kernel's `fips=` (`crypto/fips.c`, a `__setup("fips=")` handler: `fips_enabled =
//!    !!simple_strtol(val, NULL, 0)`, last one wins, parameters after `--` are init's): printed
//!    as the kernel prints it (`fips mode: enabled`) and written to `/run/agent-day2-sim/
//!    fips_enabled`, the stand-in for `/proc/sys/crypto/fips_enabled`, which is bind-mounted
//!    over the machine's `/proc/sys/crypto/fips_enabled` where the host kernel has one (a proc
//!    file cannot be created where it lacks it). assisted-service reads that file
//!    (`internal/system/system.go` `FIPSEnabled`) only to pick the installer binary and the
//!    disk-encryption cipher, which a day-2 host's way to `installing` does not reach.
//! 3. `is-live-image` (`test -f /etc/coreos-live-initramfs` in the initramfs): without it the
//!    generators set up a diskful boot, which waits for a boot disk a PXE machine lacks.
//! 4. `live-generator`: `getarg coreos.liveiso=` non-empty means the root file system is on an
//!    ISO of that label, whose device never appears in a PXE boot.
//! 5. `ignition-generator`: `ignition.firstboot` (bash word splitting of `/proc/cmdline`, no
//!    quote handling, last one wins; "", 0, no, off are false) decides whether Ignition runs at
//!    all: without it `ignition-subsequent.target` is queued and the config in the initrd is
//!    never applied. `PLATFORM_ID` is `ignition.platform.id` read the same way.
//! 6. `coreos-livepxe-rootfs.service` (`ConditionKernelCommandLine=!coreos.liveiso`, systemd's
//!    rules) running `coreos-livepxe-rootfs.sh`: a rootfs appended as an initrd must have the
//!    initramfs's version; else `getarg coreos.live.rootfs_url=` (dracut's `dracut-getarg`: the
//!    kernel's `next_arg` quoting, last one wins) must be http, https or tftp; the real `curl` is
//!    run with the script's flags: `--head` until the server answers (upstream retries forever
//!    every 5 s; here until `--timeout`, every 5 s times `--time-scale`), `--head --fail` once
//!    (a 404 ends the boot), then the download piped through [`stream_hash`] (a port of `rdcore
//!    stream-hash` against the initramfs's `etc/coreos-live-want-rootfs`) into an unpacker
//!    standing in for `bsdtar -xf - -C /` (newc only, `..` refused), into
//!    `/run/agent-day2-sim/initramfs/`, the stand-in for the initramfs's own root. curl runs in
//!    the machine's network namespace, so the URL must be reachable from the machine.
//! 7. `sysroot.mount` (`What=/root.squashfs`, `Type=squashfs`): the file must be there and start
//!    with the squashfs magic `hsqs`.
//! 8. `coreos-ignition-setup-user.sh` on a live image copies `/config.ign` to
//!    `/usr/lib/ignition/user.ign`; `ignition-fetch-offline.service` runs `ignition
//!    --platform=${PLATFORM_ID}`, which exits 2 with `'--platform' must be provided` for an empty
//!    one and refuses a name it does not know ([`IGNITION_PLATFORMS`]). Ignition itself is the
//!    existing stand-in: the config's files and units are laid into the machine root.
//!
//! A failing step isolates `emergency.target` on a real machine (`OnFailure=emergency.target`):
//! here the machine stops with exit 6 and the step's journal
//! (`<machine>/journal/<unit>.log`) says why. Not modelled: NetworkManager in the initrd (the
//! machine's address is set by run-node), `ostree-prepare-root`, the switch to the real root
//! (the units then run on the machine root as for an ISO boot), bash pathname expansion of the
//! words `ignition-generator` reads.

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use super::mounts::{bind, RUN_DIR};
use super::spec::Spec;
use crate::boot::cmdline::*;
use crate::boot::{cpio, embed, ignition, source};

/// Initramfs files the live steps read (paths as stored in the initrd, without `/`).
pub const LIVE_FILES: [&str; 3] = [
    "etc/coreos-live-initramfs",
    "etc/coreos-live-want-rootfs",
    "etc/coreos-live-rootfs",
];

/// Inside the machine: the stand-in for the initramfs's root (the fetched rootfs is unpacked
/// here).
pub const INITRAMFS_DIR: &str = "/run/agent-day2-sim/initramfs";
/// Inside the machine: the stand-in for `/proc/sys/crypto/fips_enabled`.
pub const FIPS_ENABLED: &str = "/run/agent-day2-sim/fips_enabled";

pub use super::spec::LiveBoot;

/// A PXE set with an iPXE script, read as run-node needs it.
#[derive(Debug, Clone)]
pub struct Loaded {
    /// `config.ign` as stored.
    pub raw: Vec<u8>,
    pub cfg: ignition::Config,
    /// For the log line.
    pub from: String,
    pub live: LiveBoot,
}

/// The PXE set in `dir` when it holds exactly one iPXE script `node.<arch>.ipxe`: the script is
/// parsed and its kernel and initrds resolved in `dir` (not the rootfs, which the machine
/// fetches), the initrds unpacked, `config.ign` parsed. `Ok(None)`: no script (then
/// [`source::pxe_dir`] decides). Refused (exit 3): several `node.*.ipxe` scripts (which one the
/// PXE server hands out is not ours to guess), a script iPXE would not boot (no `#!ipxe`,
/// no kernel or initrd line, a file not in `dir`, `initrd=` naming no loaded initrd: UEFI
/// machines then boot without it, no `boot`), an initrd that does not unpack or holds no
/// `config.ign`.
pub fn load(dir: &Path) -> Result<Option<Loaded>, source::Refusal> {
    let entries = std::fs::read_dir(dir)
        .map_err(|e| (3, vec![format!("--pxe-dir {}: cannot open: {e}", dir.display())]))?;
    let mut scripts: Vec<PathBuf> = entries
        .filter_map(|e| e.ok())
        .filter(|e| {
            e.file_name()
                .to_str()
                .is_some_and(|n| n.starts_with("node.") && n.ends_with(".ipxe"))
        })
        .map(|e| e.path())
        .collect();
    scripts.sort();
    let script = match scripts.as_slice() {
        [] => return Ok(None),
        [one] => one,
        several => {
            return Err((
                3,
                vec![format!(
                    "--pxe-dir {}: several iPXE scripts ({}): keep the one your PXE server hands out (add-nodes --pxe writes node.<arch>.ipxe)",
                    dir.display(),
                    several
                        .iter()
                        .filter_map(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
                        .collect::<Vec<_>>()
                        .join(", ")
                )],
            ))
        }
    };
    let what = script.display().to_string();
    let text = std::fs::read_to_string(script).map_err(|e| (1, vec![format!("cannot read {what}: {e}")]))?;
    let ipxe = source::parse_ipxe(&text).map_err(|p| {
        (
            3,
            p.into_iter().map(|l| format!("{what}: {l}")).collect::<Vec<_>>(),
        )
    })?;
    let mut problems = Vec::new();
    let url_file = |url: &str| -> String {
        let u = url.split(['?', '#']).next().unwrap_or(url);
        u.rsplit('/').next().unwrap_or(u).to_string()
    };
    let mut file = |url: &str, role: &str| -> Option<PathBuf> {
        let name = url_file(url);
        let p = dir.join(&name);
        match std::fs::metadata(&p) {
            Ok(m) if m.is_file() && m.len() > 0 && !name.is_empty() => Some(p),
            _ => {
                problems.push(format!(
                    "{what}: the {role} {url} names {name:?}, which is not a non-empty file in {}",
                    dir.display()
                ));
                None
            }
        }
    };
    if let Some(k) = &ipxe.kernel {
        file(k, "kernel");
    }
    let initrds: Vec<PathBuf> = ipxe
        .initrds
        .iter()
        .filter_map(|(_, u)| file(u, "initrd"))
        .collect();
    if ipxe.kernel.is_none() {
        problems.push(format!("{what}: no kernel line"));
    }
    if ipxe.initrds.is_empty() {
        problems.push(format!(
            "{what}: no initrd line (the Ignition config travels in the initrd)"
        ));
    }
    // UEFI: the kernel's EFI stub loads only the initrds that `initrd=` names.
    let names: Vec<String> = ipxe
        .initrds
        .iter()
        .map(|(n, u)| n.clone().unwrap_or_else(|| url_file(u)))
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
        if !names.iter().any(|n| n == w) {
            problems.push(format!(
                "{what}: the kernel line says initrd={w}, but no initrd line loads an image named {w} (names: {})",
                names.join(", ")
            ));
        }
    }
    if !ipxe.boots {
        problems.push(format!(
            "{what}: no boot command (the script would end without booting)"
        ));
    }
    if !problems.is_empty() {
        return Err((3, problems));
    }
    let mut initrd = Vec::new();
    for p in &initrds {
        let b = std::fs::read(p).map_err(|e| (1, vec![format!("cannot read {}: {e}", p.display())]))?;
        initrd.extend_from_slice(&b);
        initrd.resize(initrd.len().div_ceil(4) * 4, 0);
    }
    let joined = initrds
        .iter()
        .map(|p| p.display().to_string())
        .collect::<Vec<_>>()
        .join(" + ");
    let members = embed::unpack_archives(&initrd, &joined)
        .map_err(|e| (3, vec![format!("the initrd as the kernel reads it: {e}")]))?;
    let raw = members.get("config.ign").cloned().ok_or_else(|| {
        (
            3,
            vec![format!(
                "no Ignition in the initrd {joined}: no archive in it holds config.ign (members: {}); add-nodes --pxe appends it",
                members.keys().cloned().collect::<Vec<_>>().join(", ")
            )],
        )
    })?;
    let cfg = ignition::parse(&raw).map_err(|e| (3, vec![format!("{joined}: {e}")]))?;
    use base64::Engine;
    let b64 = base64::engine::general_purpose::STANDARD;
    let files = LIVE_FILES
        .iter()
        .filter_map(|f| members.get(*f).map(|d| (f.to_string(), b64.encode(d))))
        .collect();
    let cmdline = ipxe.kargs.join(" ");
    Ok(Some(Loaded {
        raw,
        cfg,
        from: format!("PXE script {what} (initrd {joined}; kernel command line: {cmdline})"),
        live: LiveBoot {
            cmdline,
            files,
            has_config: true,
            initrd_squashfs: members
                .get("root.squashfs")
                .map(|d| b64.encode(&d[..d.len().min(4)])),
        },
    }))
}

/// The spec of a machine on which Ignition did not run: none of the config's files, directories
/// or units.
pub fn without_ignition(spec: Spec) -> Spec {
    Spec {
        files: BTreeMap::new(),
        dirs: BTreeMap::new(),
        units: BTreeMap::new(),
        ..spec
    }
}

// ---- rdcore stream-hash and the rootfs fetch ----------------------------------------------

/// `rdcore stream-hash HASH_FILE` (coreos-installer `src/bin/rdcore/stream_hash.rs`): copies
/// `input` to `output` a chunk at a time, writing each chunk only after its sha256 matched the
/// next line of `hash_file` (`stream-hash sha256 <chunk-size>` then one hex digest a line).
/// Errors are rdcore's messages.
pub fn stream_hash(hash_file: &str, input: &mut impl Read, output: &mut impl Write) -> Result<(), String> {
    use sha2::Digest;
    const MAX_CHUNK_SIZE: usize = 64 * 1024 * 1024;
    let mut lines = hash_file.split_inclusive('\n');
    let header = lines.next().ok_or("hash file is empty")?;
    let rest = header
        .strip_prefix("stream-hash ")
        .and_then(|r| r.strip_suffix('\n'))
        .and_then(|r| r.split_once(' '))
        .filter(|(alg, n)| {
            !alg.is_empty()
                && alg.bytes().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit())
                && !n.is_empty()
                && n.bytes().all(|c| c.is_ascii_digit())
        })
        .ok_or("couldn't parse hash file header")?;
    if rest.0 != "sha256" {
        return Err(format!("unknown digest algorithm {}", rest.0));
    }
    let chunk: usize = rest
        .1
        .parse()
        .map_err(|_| "couldn't parse chunk size".to_string())?;
    if chunk == 0 {
        return Err("chunk size cannot be zero".into());
    } else if chunk > MAX_CHUNK_SIZE {
        return Err(format!(
            "chunk size {chunk} is greater than maximum {MAX_CHUNK_SIZE}"
        ));
    }
    let mut buf = vec![0u8; chunk];
    let mut offset: u64 = 0;
    for line in lines {
        let line = line.strip_suffix('\n').unwrap_or(line);
        let line = line.strip_suffix('\r').unwrap_or(line);
        let expected = hex::decode(line).map_err(|_| format!("couldn't decode hash: {line:?}"))?;
        let mut count = 0;
        loop {
            match input.read(&mut buf[count..]) {
                Ok(0) => break,
                Ok(n) => {
                    count += n;
                    if count == chunk {
                        break;
                    }
                }
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(format!("reading input: {e}")),
            }
        }
        if count == 0 {
            return Err(format!("premature end of input data at offset {offset}"));
        }
        let found = sha2::Sha256::digest(&buf[..count]);
        if expected.as_slice() != found.as_slice() {
            return Err(format!(
                "hash mismatch at offset {offset}; expected {}, found {}",
                hex::encode(&expected),
                hex::encode(found)
            ));
        }
        output
            .write_all(&buf[..count])
            .map_err(|e| format!("writing output: {e}"))?;
        offset += count as u64;
    }
    let mut one = [0u8; 1];
    if input.read(&mut one).map_err(|e| format!("draining input: {e}"))? != 0 {
        return Err(format!("found extra input data at offset {offset}"));
    }
    Ok(())
}

/// Where the live steps write: the machine's journal of each unit and its console.
pub struct Log {
    pub label: String,
    pub journal: PathBuf,
    pub t0: Instant,
    /// Print to the console (off in unit tests).
    pub console: bool,
}

impl Log {
    /// A line the unit wrote (journal and console: `label: [stamp] unit: | line`).
    pub fn line(&self, unit: &str, line: &str) {
        if let Ok(mut f) = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.journal.join(format!("{unit}.log")))
        {
            let _ = writeln!(f, "{line}");
        }
        if self.console {
            println!(
                "{}: {} {unit}: | {line}",
                self.label,
                super::systemd::stamp(self.t0)
            );
            let _ = std::io::stdout().flush();
        }
    }
    /// An event of the unit (console only: `label: [stamp] unit: msg`).
    pub fn event(&self, unit: &str, msg: &str) {
        if self.console {
            println!("{}: {} {unit}: {msg}", self.label, super::systemd::stamp(self.t0));
            let _ = std::io::stdout().flush();
        }
    }
}

const ROOTFS_UNIT: &str = "coreos-livepxe-rootfs.service";

/// The curl flags `coreos-livepxe-rootfs.sh` starts from.
const CURL_COMMON: [&str; 4] = ["--silent", "--show-error", "--insecure", "--location"];

fn curl(args: &[&str], url: &str) -> Result<std::process::Output, String> {
    Command::new("curl")
        .args(args)
        .arg(url)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("cannot run curl: {e} (install curl)"))
}

fn log_stderr(log: &Log, unit: &str, stderr: &[u8]) {
    for l in String::from_utf8_lossy(stderr).lines() {
        log.line(unit, l);
    }
}

/// The fetch branch of `coreos-livepxe-rootfs.sh` for `url`: HEAD until the server answers
/// (until `deadline`, sleeping `retry`), HEAD with `--fail` once, then GET piped through
/// [`stream_hash`] against `want` (the initramfs's `etc/coreos-live-want-rootfs`) and unpacked
/// into `dest`. Every line the script or curl writes goes to the unit's journal; the error is
/// the script's last words.
pub fn fetch_rootfs(
    url: &str,
    want: Option<&str>,
    dest: &Path,
    deadline: Instant,
    retry: Duration,
    log: &Log,
) -> Result<(), String> {
    let u = ROOTFS_UNIT;
    log.line(u, &format!("Fetching rootfs image from {url}..."));
    if !(url.starts_with("http:") || url.starts_with("https:") || url.starts_with("tftp:")) {
        for l in [
            "Unsupported scheme for image specified by:".to_string(),
            format!("coreos.live.rootfs_url={url}"),
            "Only HTTP, HTTPS, and TFTP are supported. Please fix your PXE configuration.".into(),
        ] {
            log.line(u, &l);
        }
        return Err(format!(
            "coreos.live.rootfs_url={url}: unsupported scheme (HTTP, HTTPS and TFTP only)"
        ));
    }
    let mut head: Vec<&str> = vec!["--head"];
    head.extend(CURL_COMMON);
    loop {
        let o = curl(&head, url)?;
        if o.status.success() {
            break;
        }
        log_stderr(log, u, &o.stderr);
        log.line(u, "Couldn't establish connectivity with the server specified by:");
        log.line(u, &format!("coreos.live.rootfs_url={url}"));
        if Instant::now() + retry > deadline {
            log.line(
                u,
                "(run-node: giving up at --timeout; the real script retries forever)",
            );
            return Err(format!(
                "no connectivity with the server of coreos.live.rootfs_url={url} before the timeout"
            ));
        }
        log.line(u, "Retrying in 5s...");
        std::thread::sleep(retry);
    }
    let mut common: Vec<&str> = CURL_COMMON.to_vec();
    common.extend(["--retry", "5", "--fail"]);
    let mut head_fail = vec!["--head"];
    head_fail.extend(&common);
    let o = curl(&head_fail, url)?;
    if !o.status.success() {
        log_stderr(log, u, &o.stderr);
        log.line(u, "Couldn't query the server for the rootfs specified by:");
        log.line(u, &format!("coreos.live.rootfs_url={url}"));
        return Err(format!(
            "couldn't query the server for the rootfs specified by coreos.live.rootfs_url={url}: {}",
            String::from_utf8_lossy(&o.stderr).trim()
        ));
    }
    // curl | rdcore stream-hash /etc/coreos-live-want-rootfs | bsdtar -xf - -C /  (pipefail)
    let mut child = Command::new("curl")
        .args(&common)
        .arg(url)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot run curl: {e} (install curl)"))?;
    let mut stdout = child.stdout.take().expect("piped");
    let mut verified = Vec::new();
    let hashed = match want {
        Some(w) => stream_hash(w, &mut stdout, &mut verified),
        None => Err(format!(
            "opening /etc/coreos-live-want-rootfs: No such file or directory (the initramfs has no {})",
            LIVE_FILES[1]
        )),
    };
    // Drain so curl can finish, then collect its status.
    let _ = std::io::copy(&mut stdout, &mut std::io::sink());
    let out = child.wait_with_output().map_err(|e| format!("curl: {e}"))?;
    let mut problems = Vec::new();
    if !out.status.success() {
        log_stderr(log, u, &out.stderr);
        problems.push(format!("curl: {}", String::from_utf8_lossy(&out.stderr).trim()));
    }
    let unpacked = match &hashed {
        Err(e) => {
            log.line(u, &format!("Error: {e}"));
            problems.push(format!("rdcore stream-hash: {e}"));
            None
        }
        Ok(()) if verified.is_empty() => None,
        Ok(()) => match unpack(&verified, dest) {
            Ok(n) => Some(n),
            Err(e) => {
                log.line(u, &format!("bsdtar: {e}"));
                problems.push(format!("bsdtar: {e}"));
                None
            }
        },
    };
    if !problems.is_empty() {
        for l in [
            "Couldn't fetch, verify, and unpack image specified by:".to_string(),
            format!("coreos.live.rootfs_url={url}"),
            "Check that the URL is correct and that the rootfs version matches the initramfs.".into(),
        ] {
            log.line(u, &l);
        }
        return Err(format!(
            "couldn't fetch, verify, and unpack the image specified by coreos.live.rootfs_url={url}: {}",
            problems.join("; ")
        ));
    }
    log.line(
        u,
        &format!(
            "(run-node: {} bytes fetched, verified against /etc/coreos-live-want-rootfs, {} files unpacked)",
            verified.len(),
            unpacked.unwrap_or(0)
        ),
    );
    Ok(())
}

/// The `bsdtar -xf - -C DEST` stand-in: the regular files of the newc archive(s) in `data`
/// written under `dest` (a name with a `..` component is refused, as bsdtar does without
/// `-P`). Returns how many.
pub fn unpack(data: &[u8], dest: &Path) -> Result<usize, String> {
    let files = cpio::read_all(data)?;
    for (name, bytes) in &files {
        if Path::new(name)
            .components()
            .any(|c| matches!(c, std::path::Component::ParentDir))
        {
            return Err(format!("{name}: Path contains '..'"));
        }
        let p = dest.join(name);
        if let Some(d) = p.parent() {
            std::fs::create_dir_all(d).map_err(|e| format!("mkdir {}: {e}", d.display()))?;
        }
        std::fs::write(&p, bytes).map_err(|e| format!("write {}: {e}", p.display()))?;
    }
    Ok(files.len())
}

/// A step that ends the boot: the unit, then why.
fn emergency(log: &Log, unit: &str, why: String) -> String {
    log.event(
        unit,
        &format!("FAILED: {why}; OnFailure=emergency.target: the boot stops in the emergency shell"),
    );
    format!("{unit} failed: {why}")
}

/// The live initramfs's steps on the machine (see the module docs). `root` is the machine
/// root; must run in the machine's mount and network namespaces. `Ok(true)`: Ignition runs
/// with the initrd's config; `Ok(false)`: Ignition does not run (the machine boots without the
/// config); `Err`: the boot stops (a real machine isolates `emergency.target`).
pub fn boot(live: &LiveBoot, spec: &Spec, root: &Path) -> Result<bool, String> {
    use base64::Engine;
    let b64 = base64::engine::general_purpose::STANDARD;
    let log = Log {
        label: spec.label.clone(),
        journal: spec.dir.join("journal"),
        t0: Instant::now(),
        console: true,
    };
    let _ = std::fs::create_dir_all(&log.journal);
    let inside = |p: &str| root.join(p.trim_start_matches('/'));
    let file = |name: &str| -> Option<Vec<u8>> { live.files.get(name).and_then(|d| b64.decode(d).ok()) };

    // 1. /proc/cmdline
    let run = inside(RUN_DIR);
    std::fs::create_dir_all(&run).map_err(|e| format!("mkdir {}: {e}", run.display()))?;
    let cmdline_file = run.join("cmdline");
    std::fs::write(&cmdline_file, format!("{}\n", live.cmdline))
        .map_err(|e| format!("write {}: {e}", cmdline_file.display()))?;
    bind(&cmdline_file, &inside("/proc/cmdline"), true)?;
    let cmdline = std::fs::read_to_string(inside("/proc/cmdline"))
        .map_err(|e| format!("read the machine's /proc/cmdline: {e}"))?;
    let cmdline = cmdline.trim_end_matches('\n').to_string();
    log.event("kernel", &format!("command line: {cmdline}"));

    // 2. fips=
    let fips = kernel_fips(&cmdline);
    if let Some(on) = fips {
        log.event(
            "kernel",
            &format!("fips mode: {}", if on { "enabled" } else { "disabled" }),
        );
    }
    let fips_file = inside(FIPS_ENABLED);
    std::fs::write(&fips_file, if fips == Some(true) { "1\n" } else { "0\n" })
        .map_err(|e| format!("write {}: {e}", fips_file.display()))?;
    // Where the host kernel has the real file (CONFIG_CRYPTO_FIPS), the machine's shows ours.
    let proc_fips = inside("/proc/sys/crypto/fips_enabled");
    if proc_fips.is_file() {
        bind(&fips_file, &proc_fips, true)?;
    }

    // 3. is-live-image; the initramfs's own files
    let initramfs = inside(INITRAMFS_DIR);
    for (name, _) in live.files.iter() {
        if let Some(d) = file(name) {
            let p = initramfs.join(name);
            let _ = std::fs::create_dir_all(p.parent().unwrap_or(&initramfs));
            std::fs::write(&p, d).map_err(|e| format!("write {}: {e}", p.display()))?;
        }
    }
    let initramfs_ver = file(LIVE_FILES[0]);
    if initramfs_ver.is_none() {
        return Err(emergency(
            &log,
            "initrd-root-device.target",
            "the initrd is not a CoreOS live initramfs (is-live-image: no /etc/coreos-live-initramfs): its generators set up a diskful boot, which waits for the boot disk (dev-disk-by\\x2dlabel-boot.device) a PXE machine does not have".into(),
        ));
    }

    // 4. live-generator
    let isoroot = dracut_getarg(&cmdline, "coreos.liveiso").unwrap_or_default();
    if !isoroot.is_empty() {
        return Err(emergency(
            &log,
            "live-generator",
            format!("coreos.liveiso={isoroot}: the root file system is taken from the ISO labelled {isoroot} (run-media-iso.mount of /dev/disk/by-label/{isoroot}); a PXE-booted machine has no such device, so initrd-root-device.target never completes"),
        ));
    }

    // 5. ignition-generator
    let firstboot = ignition_cmdline_bool(&cmdline, "ignition.firstboot", "0");
    let platform = ignition_cmdline_arg(&cmdline, "ignition.platform.id", "");
    log.event(
        "ignition-generator",
        &if firstboot {
            format!("ignition.firstboot: ignition-complete.target queued (PLATFORM_ID={platform})")
        } else {
            "ignition.firstboot is not set: ignition-subsequent.target queued, Ignition does not run"
                .to_string()
        },
    );

    // 6. coreos-livepxe-rootfs.service
    let version = |d: Vec<u8>| String::from_utf8_lossy(&d).trim_end_matches('\n').to_string();
    if systemd_cmdline_has(&cmdline, "coreos.liveiso") {
        log.event(
            ROOTFS_UNIT,
            "skipped (ConditionKernelCommandLine=!coreos.liveiso)",
        );
    } else if let Some(rootfs_ver) = file(LIVE_FILES[2]) {
        // the rootfs was appended as an initrd
        let (i, r) = (
            version(initramfs_ver.clone().unwrap_or_default()),
            version(rootfs_ver),
        );
        if i != r {
            log.line(
                ROOTFS_UNIT,
                &format!("Found initramfs version {i} but rootfs version {r}."),
            );
            log.line(ROOTFS_UNIT, "Please fix your PXE configuration.");
            return Err(emergency(
                &log,
                ROOTFS_UNIT,
                format!("initramfs version {i}, rootfs version {r}"),
            ));
        }
        log.event(ROOTFS_UNIT, "finished (the rootfs came as an initrd)");
    } else {
        let url = dracut_getarg(&cmdline, "coreos.live.rootfs_url").unwrap_or_default();
        if url.is_empty() {
            for l in [
                "No rootfs image found.  Modify your PXE configuration to add the rootfs",
                "image as a second initrd, or use the coreos.live.rootfs_url kernel parameter",
                "to specify an HTTP or HTTPS URL to the rootfs.",
            ] {
                log.line(ROOTFS_UNIT, l);
            }
            return Err(emergency(
                &log,
                ROOTFS_UNIT,
                "no rootfs image found: no coreos.live.rootfs_url= and no rootfs initrd".into(),
            ));
        }
        log.event(ROOTFS_UNIT, "started");
        let want = file(LIVE_FILES[1]).map(|d| String::from_utf8_lossy(&d).into_owned());
        let deadline = log.t0 + Duration::from_secs_f64(spec.timeout_secs);
        let retry = Duration::from_secs_f64((5.0 * spec.time_scale).max(0.1));
        fetch_rootfs(&url, want.as_deref(), &initramfs, deadline, retry, &log)
            .map_err(|e| emergency(&log, ROOTFS_UNIT, e))?;
        log.event(ROOTFS_UNIT, "finished");
    }

    // 7. sysroot.mount
    let squashfs = std::fs::read(initramfs.join("root.squashfs"))
        .ok()
        .map(|d| d[..d.len().min(4)].to_vec())
        .or_else(|| live.initrd_squashfs.as_ref().and_then(|s| b64.decode(s).ok()));
    match squashfs {
        Some(m) if m == b"hsqs" => log.event("sysroot.mount", "mounted /root.squashfs on /sysroot"),
        Some(_) => {
            return Err(emergency(
                &log,
                "sysroot.mount",
                "mount /root.squashfs on /sysroot: wrong fs type (no squashfs magic)".into(),
            ))
        }
        None => return Err(emergency(
            &log,
            "sysroot.mount",
            "mount /root.squashfs on /sysroot: No such file or directory (no rootfs was fetched or appended)"
                .into(),
        )),
    }
    if !firstboot {
        return Ok(false);
    }

    // 8. coreos-ignition-setup-user, ignition-fetch-offline
    let setup = "coreos-ignition-setup-user.service";
    if live.has_config {
        log.line(setup, "Copying /config.ign to /usr/lib/ignition/user.ign");
    } else {
        log.line(setup, "File /config.ign does not exist.. Skipping copy");
    }
    let fetch = "ignition-fetch-offline.service";
    if platform.is_empty() {
        log.line(fetch, "'--platform' must be provided");
        return Err(emergency(
            &log,
            fetch,
            "ignition exited 2: '--platform' must be provided (no ignition.platform.id=)".into(),
        ));
    }
    if !IGNITION_PLATFORMS.contains(&platform.as_str()) {
        let m = format!(
            "invalid argument {platform:?} for \"--platform\" flag: {platform} is not a valid platform"
        );
        log.line(fetch, &m);
        return Err(emergency(&log, fetch, format!("ignition exited 2: {m}")));
    }
    if !live.has_config {
        log.event("ignition", "no user config: nothing to apply");
        return Ok(false);
    }
    log.event(
        "ignition",
        &format!("applying /usr/lib/ignition/user.ign (platform {platform})"),
    );
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(s: &str) -> Vec<(String, Option<String>)> {
        kernel_params(s)
    }

    fn kv(k: &str, v: Option<&str>) -> (String, Option<String>) {
        (k.to_string(), v.map(String::from))
    }

    #[test]
    fn the_kernel_splits_with_its_quote_rules() {
        assert_eq!(
            p("  initrd=initrd ignition.firstboot  a=\"b c\" \"d=e f\" \"g h\" x= \n"),
            vec![
                kv("initrd", Some("initrd")),
                kv("ignition.firstboot", None),
                kv("a", Some("b c")),
                kv("d", Some("e f")),
                kv("g h", None),
                kv("x", Some("")),
            ]
        );
        // A quote cannot be escaped; an inner quote toggles grouping.
        assert_eq!(
            p("a=x\"y z\"w b"),
            vec![kv("a", Some("x\"y z\"w")), kv("b", None)]
        );
        assert_eq!(p("-- fips=1"), vec![kv("--", None), kv("fips", Some("1"))]);
        assert_eq!(p("\"a\""), vec![kv("a", None)]);
        assert_eq!(p("a=\""), vec![kv("a", Some(""))]);
    }

    #[test]
    fn dracut_getarg_takes_the_last_occurrence() {
        let c = "coreos.live.rootfs_url=http://a/1 x coreos.live.rootfs_url=\"http://b/2\"";
        assert_eq!(
            dracut_getarg(c, "coreos.live.rootfs_url").as_deref(),
            Some("http://b/2")
        );
        assert_eq!(
            dracut_getarg("coreos.live.rootfs_url", "coreos.live.rootfs_url").as_deref(),
            Some("")
        );
        assert_eq!(
            dracut_getarg("coreos.liveiso=x coreos.liveiso", "coreos.liveiso").as_deref(),
            Some("")
        );
        assert_eq!(dracut_getarg("a=1", "coreos.liveiso"), None);
        // dracut compares names exactly (the kernel treats - and _ alike, dracut does not).
        assert_eq!(
            dracut_getarg("coreos-live-rootfs_url=x", "coreos.live.rootfs_url"),
            None
        );
    }

    #[test]
    fn ignition_generator_reads_words_without_quote_handling() {
        assert!(ignition_cmdline_bool(
            "ignition.firstboot ignition.platform.id=metal",
            "ignition.firstboot",
            "0"
        ));
        assert!(!ignition_cmdline_bool(
            "ignition.platform.id=metal",
            "ignition.firstboot",
            "0"
        ));
        assert!(!ignition_cmdline_bool(
            "ignition.firstboot ignition.firstboot=0",
            "ignition.firstboot",
            "0"
        ));
        assert!(!ignition_cmdline_bool(
            "ignition.firstboot=off",
            "ignition.firstboot",
            "0"
        ));
        // bash keeps the quotes: "0" is not 0.
        assert!(ignition_cmdline_bool(
            "ignition.firstboot=\"0\"",
            "ignition.firstboot",
            "0"
        ));
        assert_eq!(
            ignition_cmdline_arg(
                "ignition.platform.id=qemu ignition.platform.id=metal",
                "ignition.platform.id",
                ""
            ),
            "metal"
        );
        assert_eq!(ignition_cmdline_arg("x=1", "ignition.platform.id", ""), "");
    }

    #[test]
    fn fips_is_the_kernels_last_fips_before_the_double_dash() {
        assert_eq!(kernel_fips("ignition.firstboot fips=1"), Some(true));
        assert_eq!(kernel_fips("fips=1 fips=0"), Some(false));
        assert_eq!(kernel_fips("fips=\"1\""), Some(true));
        assert_eq!(kernel_fips("fips=yes"), Some(false));
        assert_eq!(kernel_fips("fips=0x1"), Some(true));
        assert_eq!(kernel_fips("fips"), None);
        assert_eq!(kernel_fips("a -- fips=1"), None);
        assert_eq!(simple_strtol("010"), 8);
        assert_eq!(simple_strtol("-3z"), -3);
    }

    #[test]
    fn systemd_condition_matches_the_name_with_or_without_a_value() {
        assert!(systemd_cmdline_has(
            "a coreos.liveiso=rhcos-1 b",
            "coreos.liveiso"
        ));
        assert!(systemd_cmdline_has("coreos.liveiso", "coreos.liveiso"));
        assert!(!systemd_cmdline_has(
            "coreos.liveisox=1 'coreos.liveiso x'",
            "coreos.liveiso"
        ));
    }

    #[test]
    fn stream_hash_is_rdcores() {
        let data = b"asdfasd\nqwer\n";
        let good = crate::baseiso::make_stream_hash(data, 8);
        assert_eq!(
            good,
            "stream-hash sha256 8\n3af36011654a7bc5159ecf41c610f1f7dbd9deb0d5638f8626db66f7b6467106\n5f70ae29b3019ec851ef6b664b59d3fd88dda0de5eb58212ddbd97c65c3f8198\n"
        );
        let mut out = Vec::new();
        stream_hash(&good, &mut &data[..], &mut out).unwrap();
        assert_eq!(out, data);
        let mut out = Vec::new();
        let e = stream_hash(&good, &mut &b"asdfasd\nqwerX\n"[..], &mut out).unwrap_err();
        assert!(e.starts_with("hash mismatch at offset 8;"), "{e}");
        assert_eq!(out, b"asdfasd\n", "only verified chunks are written");
        assert_eq!(
            stream_hash(&good, &mut &b""[..], &mut Vec::new()).unwrap_err(),
            "premature end of input data at offset 0"
        );
        let one = crate::baseiso::make_stream_hash(b"asdfasd\n", 8);
        assert_eq!(
            stream_hash(&one, &mut &b"asdfasd\nqqq"[..], &mut Vec::new()).unwrap_err(),
            "found extra input data at offset 8"
        );
        assert_eq!(
            stream_hash("aardvark\n", &mut &b""[..], &mut Vec::new()).unwrap_err(),
            "couldn't parse hash file header"
        );
        assert_eq!(
            stream_hash("stream-hash sha255 8\n", &mut &b""[..], &mut Vec::new()).unwrap_err(),
            "unknown digest algorithm sha255"
        );
    }

    #[test]
    fn the_simulated_live_rootfs_verifies_against_its_initramfs() {
        let [_, (_, initrd), (_, rootfs)] = crate::baseiso::pxe_artifacts("x86_64");
        let m = embed::unpack_archives(&initrd, "initrd").unwrap();
        let want = String::from_utf8(m["etc/coreos-live-want-rootfs"].clone()).unwrap();
        let mut out = Vec::new();
        stream_hash(&want, &mut &rootfs[..], &mut out).unwrap();
        let files = cpio::read_all(&out).unwrap();
        assert!(files["root.squashfs"].starts_with(b"hsqs"));
        assert_eq!(files["etc/coreos-live-rootfs"], m["etc/coreos-live-initramfs"]);
        // root.squashfs is the first member, its data at byte 124 (sysroot.mount's offset).
        assert_eq!(&rootfs[124..128], b"hsqs");
    }

    /// A one-file HTTP server on 127.0.0.1 (GET and HEAD; 404 for every other path).
    fn serve(path: &'static str, body: Vec<u8>) -> String {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        std::thread::spawn(move || {
            for s in l.incoming().flatten() {
                let mut s = s;
                let mut req = Vec::new();
                let mut b = [0u8; 1];
                while !req.ends_with(b"\r\n\r\n") && s.read(&mut b).unwrap_or(0) == 1 {
                    req.push(b[0]);
                }
                let req = String::from_utf8_lossy(&req).into_owned();
                let mut words = req.split_whitespace();
                let (m, p) = (words.next().unwrap_or(""), words.next().unwrap_or(""));
                let (code, data): (&str, &[u8]) = if p == path {
                    ("200 OK", &body)
                } else {
                    ("404 Not Found", b"not found\n")
                };
                let _ = write!(
                    s,
                    "HTTP/1.1 {code}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                    data.len()
                );
                if m == "GET" {
                    let _ = s.write_all(data);
                }
            }
        });
        format!("http://{addr}")
    }

    #[test]
    fn the_rootfs_is_fetched_over_http_verified_and_unpacked_and_a_404_ends_the_boot() {
        if !crate::harness::on_path("curl") {
            panic!("curl is needed (apt-get install curl)");
        }
        let [_, (_, initrd), (_, rootfs)] = crate::baseiso::pxe_artifacts("x86_64");
        let want = String::from_utf8(
            embed::unpack_archives(&initrd, "i").unwrap()["etc/coreos-live-want-rootfs"].clone(),
        )
        .unwrap();
        let base = serve("/pxe/node.x86_64-rootfs.img", rootfs.clone());
        let d = tempfile::tempdir().unwrap();
        let log = Log {
            label: "m".into(),
            journal: d.path().to_path_buf(),
            t0: Instant::now(),
            console: false,
        };
        let dest = d.path().join("initramfs");
        let deadline = Instant::now() + Duration::from_secs(20);
        fetch_rootfs(
            &format!("{base}/pxe/node.x86_64-rootfs.img"),
            Some(&want),
            &dest,
            deadline,
            Duration::from_millis(100),
            &log,
        )
        .unwrap();
        assert!(std::fs::read(dest.join("root.squashfs"))
            .unwrap()
            .starts_with(b"hsqs"));
        let e = fetch_rootfs(
            &format!("{base}/pxe/missing.img"),
            Some(&want),
            &dest,
            deadline,
            Duration::from_millis(100),
            &log,
        )
        .unwrap_err();
        assert!(
            e.contains("couldn't query the server") && e.contains("404"),
            "{e}"
        );
        let j = std::fs::read_to_string(d.path().join(format!("{ROOTFS_UNIT}.log"))).unwrap();
        assert!(
            j.contains("Couldn't query the server for the rootfs specified by:"),
            "{j}"
        );
        // Another image at the URL: refused by the hash check.
        let other = serve("/r.img", b"070701 not the rootfs".to_vec());
        let e = fetch_rootfs(
            &format!("{other}/r.img"),
            Some(&want),
            &dest,
            deadline,
            Duration::from_millis(100),
            &log,
        )
        .unwrap_err();
        assert!(e.contains("hash mismatch at offset 0"), "{e}");
        let e = fetch_rootfs(
            "ftp://x/r.img",
            Some(&want),
            &dest,
            deadline,
            Duration::from_millis(100),
            &log,
        )
        .unwrap_err();
        assert!(e.contains("unsupported scheme"), "{e}");
    }
}
