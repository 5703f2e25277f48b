//! PXE files for a node, from the cluster's live ISO (docs/iso.md "PXE files", as the
//! agent installer's `agentpxefiles.go` does it): the kernel, the live initrd with the
//! Ignition archive appended, the rootfs, and an iPXE script when a base URL is known.
//!
//! Names: `node.<arch>-vmlinuz`, `node.<arch>-initrd.img`, `node.<arch>-rootfs.img`,
//! `node.<arch>.ipxe`. Every file is created through [`AtomicFile`] (mode 0600); the initrd
//! holds the pull secret.

use std::fs::File;
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use agent_day2_iso9660 as iso9660;

use super::embed::EmbedPlan;
use super::error::{IsoError, Result};
use super::output::{write_new_file, AtomicFile};

/// What to write.
#[derive(Debug, Clone, Default)]
pub struct PxeOptions {
    /// Architecture in RPM spelling (`x86_64`, `aarch64`), used in the file names.
    pub arch: String,
    /// URL the files will be served from (no trailing `/` needed). With it the iPXE script is
    /// written and `coreos.live.rootfs_url` points at the rootfs.
    pub base_url: Option<String>,
    /// Kernel arguments to add (`fips=1`, user `--karg`).
    pub extra_kargs: Vec<String>,
    /// Replace existing files.
    pub force: bool,
}

/// What [`write_pxe_files`] wrote.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PxeFiles {
    /// `node.<arch>-vmlinuz`: the ISO's kernel (decompressed on aarch64).
    pub kernel: PathBuf,
    /// `node.<arch>-initrd.img`: the live initrd with the Ignition archive appended; holds
    /// the pull secret.
    pub initrd: PathBuf,
    /// `node.<arch>-rootfs.img`: the live root filesystem, fetched by the booted initrd from
    /// `coreos.live.rootfs_url`.
    pub rootfs: PathBuf,
    /// The iPXE script, when a base URL was given.
    pub ipxe: Option<PathBuf>,
    /// The kernel command line to boot with (without `initrd=`), for the report and for
    /// users of other PXE loaders.
    pub kargs: String,
}

/// File names of the four outputs for `arch`: kernel, initrd, rootfs, iPXE script.
pub fn file_names(arch: &str) -> [String; 4] {
    [
        format!("node.{arch}-vmlinuz"),
        format!("node.{arch}-initrd.img"),
        format!("node.{arch}-rootfs.img"),
        format!("node.{arch}.ipxe"),
    ]
}

/// The PXE kernel command line: kargs.json `default` (else the kargs the areas hold) without
/// `coreos.liveiso=...` (there is no ISO to find), plus `coreos.live.rootfs_url=<base>/<rootfs>`
/// when `base_url` is given, plus `extra`.
pub fn pxe_kargs(plan: &EmbedPlan, arch: &str, base_url: Option<&str>, extra: &[String]) -> Result<String> {
    let base = plan
        .default_kargs
        .as_deref()
        .or(plan.current_kargs.as_deref())
        .unwrap_or("ignition.firstboot ignition.platform.id=metal");
    let mut v: Vec<String> = base
        .split_whitespace()
        .filter(|k| !k.starts_with("coreos.liveiso="))
        .map(str::to_string)
        .collect();
    if let Some(url) = base_url {
        v.push(format!(
            "coreos.live.rootfs_url={}/{}",
            url.trim_end_matches('/'),
            file_names(arch)[2]
        ));
    }
    for k in extra {
        let k = k.trim();
        if k.is_empty() || k.contains(['\n', '\r', '\0']) {
            return Err(IsoError::Invalid(format!(
                "kernel argument {k:?} is empty or contains a line break or NUL"
            )));
        }
        v.push(k.to_string());
    }
    Ok(v.join(" "))
}

fn copy_extent(base: &mut File, e: &iso9660::IsoEntry, out: &mut AtomicFile, what: &str) -> Result<u64> {
    base.seek(SeekFrom::Start(e.offset))
        .map_err(|err| IsoError::io(format!("seeking to {what}"), err))?;
    let tmp = out.temp_path().display().to_string();
    let n = super::output::copy_range(base, out.file(), e.size)
        .map_err(|err| IsoError::io(format!("copying {what} to {tmp}"), err))?;
    if n != e.size {
        return Err(IsoError::Truncated {
            what: what.to_string(),
            offset: e.offset + n,
        });
    }
    Ok(n)
}

/// Writes the PXE files for `opts.arch` into `dir` from `base_path` (planned by
/// [`super::embed::plan`]), appending `archive` (from [`super::embed::ignition_archive`]) to
/// the live `images/pxeboot/initrd.img` after zero padding to a 4-byte boundary (the kernel
/// reads concatenated, separately compressed cpio archives). On aarch64 a gzip-compressed
/// kernel is written decompressed, as the agent installer does, because PXE loaders there
/// do not decompress it.
///
/// Errors: [`IsoError::MissingFile`] when the image lacks `images/pxeboot/*`;
/// [`IsoError::AlreadyExists`] for an existing file without `force` (checked for all four
/// before anything is written); I/O errors naming the paths.
pub fn write_pxe_files(
    base_path: &Path,
    dir: &Path,
    plan: &EmbedPlan,
    archive: &[u8],
    opts: &PxeOptions,
) -> Result<PxeFiles> {
    let names = file_names(&opts.arch);
    let paths: Vec<PathBuf> = names.iter().map(|n| dir.join(n)).collect();
    if !opts.force {
        let last = if opts.base_url.is_some() { 4 } else { 3 };
        if let Some(p) = paths[..last].iter().find(|p| p.symlink_metadata().is_ok()) {
            return Err(IsoError::AlreadyExists { path: p.clone() });
        }
    }
    let kargs = pxe_kargs(plan, &opts.arch, opts.base_url.as_deref(), &opts.extra_kargs)?;
    let mut base = File::open(base_path)
        .map_err(|e| IsoError::io(format!("cannot open base ISO {}", base_path.display()), e))?;
    let find = |base: &mut File, p: &str| -> Result<iso9660::IsoEntry> {
        iso9660::find(base, p)?.ok_or_else(|| IsoError::MissingFile { path: p.to_string() })
    };
    let vmlinuz = find(&mut base, "images/pxeboot/vmlinuz")?;
    let initrd = find(&mut base, "images/pxeboot/initrd.img")?;
    let rootfs = find(&mut base, "images/pxeboot/rootfs.img")?;

    // kernel
    let mut out = AtomicFile::create(&paths[0], opts.force)?;
    let mut magic = [0u8; 2];
    base.seek(SeekFrom::Start(vmlinuz.offset))
        .and_then(|_| base.read_exact(&mut magic))
        .map_err(|e| IsoError::io("reading images/pxeboot/vmlinuz", e))?;
    if opts.arch == "aarch64" && magic == [0x1f, 0x8b] {
        base.seek(SeekFrom::Start(vmlinuz.offset))
            .map_err(|e| IsoError::io("seeking to images/pxeboot/vmlinuz", e))?;
        let mut gz = flate2::read::GzDecoder::new((&base).take(vmlinuz.size));
        std::io::copy(&mut gz, out.file())
            .map_err(|e| IsoError::io("decompressing images/pxeboot/vmlinuz", e))?;
    } else {
        copy_extent(&mut base, &vmlinuz, &mut out, "images/pxeboot/vmlinuz")?;
    }
    out.commit()?;

    // initrd + padding + archive
    let mut out = AtomicFile::create(&paths[1], opts.force)?;
    let n = copy_extent(&mut base, &initrd, &mut out, "images/pxeboot/initrd.img")?;
    let pad = vec![0u8; ((4 - n % 4) % 4) as usize];
    let tmp = out.temp_path().display().to_string();
    out.write_all(&pad)
        .and_then(|_| out.write_all(archive))
        .map_err(|e| IsoError::io(format!("writing {tmp}"), e))?;
    out.commit()?;

    // rootfs
    let mut out = AtomicFile::create(&paths[2], opts.force)?;
    copy_extent(&mut base, &rootfs, &mut out, "images/pxeboot/rootfs.img")?;
    out.commit_without_fsync()?; // the ~1 GB one; see AtomicFile::commit_without_fsync

    let ipxe = match &opts.base_url {
        Some(url) => {
            let url = url.trim_end_matches('/');
            let script = format!(
                "#!ipxe\ninitrd --name initrd {url}/{initrd}\nkernel {url}/{kernel} initrd=initrd {kargs}\nboot\n",
                initrd = names[1],
                kernel = names[0],
            );
            write_new_file(&paths[3], script.as_bytes(), opts.force)?;
            Some(paths[3].clone())
        }
        None => None,
    };
    Ok(PxeFiles {
        kernel: paths[0].clone(),
        initrd: paths[1].clone(),
        rootfs: paths[2].clone(),
        ipxe,
        kargs,
    })
}
