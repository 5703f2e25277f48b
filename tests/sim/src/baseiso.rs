//! The simulator's own small RHCOS-layout live ISO, served by the file server and named by the
//! seeded `coreos-bootimages` stream, so the plugin downloads, verifies and customises a base
//! ISO exactly as it would a real one.
//!
//! Layout (the CoreOS live ISO facts of docs/iso.md "Embedding the Ignition config"):
//! * `coreos/igninfo.json` = `{"file":"images/ignition.img"}` and a zeroed 256 KiB
//!   `images/ignition.img` (the Ignition embed area);
//! * `EFI/redhat/grub.cfg` and `isolinux/isolinux.cfg` whose kernel lines end in a karg embed
//!   area of [`KARGS_AREA_SIZE`] bytes (kargs, `\n`, `#` padding) followed by
//!   ` COREOS_KARG_EMBED_AREA`, described by `coreos/kargs.json`
//!   (`{"default", "files": [{"path", "offset", "pad", "end"}], "size"}`);
//! * `images/pxeboot/{vmlinuz, initrd.img, rootfs.img}`: small placeholders; `initrd.img` is a
//!   real gzip-compressed newc cpio (`etc/sim-initrd-release` and the live files of
//!   [`pxe_artifacts`]) so archives can be appended to it the way the agent installer does;
//!   `rootfs.img` is a newc cpio laid out as a live rootfs.
//!
//! The bytes depend only on `arch` (fixed mtimes), so the sha256 is stable.

use std::io::Write;
use std::path::Path;
use std::time::{Duration, UNIX_EPOCH};

use agent_day2_iso9660::{write_iso, IsoData, IsoInput};

/// A base ISO on disk, served by the file server under `file_name`.
#[derive(Debug, Clone)]
pub struct BaseIsoInfo {
    pub path: std::path::PathBuf,
    /// File name under the file server root, e.g. `rhcos-418.94.202501221327-0-live.x86_64.iso`.
    pub file_name: String,
    /// Lowercase hex sha256 of the file.
    pub sha256: String,
    /// Size in bytes.
    pub size: u64,
}

/// RHCOS build the simulated live ISO pretends to be (also its ISO9660 volume id).
pub const RHCOS_BUILD: &str = "rhcos-418.94.202501221327-0";
/// Release string of that build as the stream metadata spells it.
pub const RHCOS_RELEASE: &str = "418.94.202501221327-0";
/// Size of each karg embed area in bytes (the value of real CoreOS ISOs).
pub const KARGS_AREA_SIZE: usize = 1139;
/// Size of the Ignition embed area `images/ignition.img` (256 KiB, as cosa makes it).
pub const IGNITION_AREA_SIZE: usize = 256 * 1024;
/// mtime of every file: 2025-01-22T13:27:00Z, the build's timestamp.
const MTIME_SECS: u64 = 1_737_552_420;

/// File name of the simulated live ISO for `arch` (`x86_64` or `aarch64`).
pub fn iso_file_name(arch: &str) -> String {
    format!("{RHCOS_BUILD}-live.{arch}.iso")
}

/// The default kernel arguments recorded in `kargs.json` and in both embed areas.
pub fn default_kargs() -> String {
    format!("coreos.liveiso={RHCOS_BUILD} ignition.firstboot ignition.platform.id=metal")
}

/// Builds the ISO for `arch` at `path` (written to a temporary name in the same directory,
/// then renamed) and returns its size and sha256. Also writes the three [`pxe_artifacts`] into
/// the same directory (the seeded stream points at them). For a multi-arch scenario call it
/// once per architecture into the same file server root. Errors: an unknown `arch`, I/O errors naming
/// the path.
pub fn build_base_iso(path: &Path, arch: &str) -> anyhow::Result<BaseIsoInfo> {
    if arch != "x86_64" && arch != "aarch64" {
        anyhow::bail!("base ISO: architecture {arch:?} is not simulated (use x86_64 or aarch64)");
    }
    let bytes = base_iso_bytes(arch)?;
    let tmp = path.with_file_name(format!(
        ".{}.tmp-{}",
        path.file_name().and_then(|n| n.to_str()).unwrap_or("base.iso"),
        std::process::id()
    ));
    {
        let mut f = std::fs::File::create(&tmp)
            .map_err(|e| anyhow::anyhow!("cannot create {}: {e}", tmp.display()))?;
        f.write_all(&bytes)
            .and_then(|_| f.sync_all())
            .map_err(|e| anyhow::anyhow!("cannot write {}: {e}", tmp.display()))?;
    }
    std::fs::rename(&tmp, path)
        .map_err(|e| anyhow::anyhow!("cannot rename {} to {}: {e}", tmp.display(), path.display()))?;
    // the PXE artifacts the stream names, next to the ISO, so the file server serves them too
    let dir = path.parent().unwrap_or(Path::new("."));
    for (name, data) in pxe_artifacts(arch) {
        let p = dir.join(&name);
        std::fs::write(&p, &data).map_err(|e| anyhow::anyhow!("cannot write {}: {e}", p.display()))?;
    }
    use sha2::Digest;
    Ok(BaseIsoInfo {
        path: path.to_path_buf(),
        file_name: iso_file_name(arch),
        sha256: hex::encode(sha2::Sha256::digest(&bytes)),
        size: bytes.len() as u64,
    })
}

/// A bootloader config with a karg embed area; returns the text and the area's byte offset.
fn with_karg_area(head: &str, tail: &str) -> (String, usize) {
    let kargs = default_kargs();
    let mut area = format!("{kargs}\n");
    area.push_str(&"#".repeat(KARGS_AREA_SIZE - area.len()));
    let offset = head.len();
    (format!("{head}{area} COREOS_KARG_EMBED_AREA\n{tail}"), offset)
}

/// The ISO's bytes for `arch` (deterministic).
pub fn base_iso_bytes(arch: &str) -> anyhow::Result<Vec<u8>> {
    let mtime = UNIX_EPOCH + Duration::from_secs(MTIME_SECS);
    let (grub, grub_off) = with_karg_area(
        &format!(
            "# Simulated RHCOS live ISO ({arch}) for agent-day2 tests.\n\
             # The karg embed area ends the linux line; its padding is a comment line.\n\
             set default=\"1\"\nset timeout=5\n\
             menuentry 'RHEL CoreOS (Live)' --class fedora --class gnu-linux --class gnu --class os {{\n\
             \tlinux /images/pxeboot/vmlinuz "
        ),
        "\tinitrd /images/pxeboot/initrd.img /images/ignition.img\n}\n",
    );
    let (isolinux, isolinux_off) = with_karg_area(
        "# Simulated RHCOS live ISO: isolinux configuration.\n\
         serial 0\ndefault vesamenu.c32\ntimeout 600\n\
         label linux\n  menu label ^RHEL CoreOS (Live)\n  menu default\n  kernel /images/pxeboot/vmlinuz\n\
         \x20 append initrd=/images/pxeboot/initrd.img,/images/ignition.img ",
        "menu end\n",
    );
    let kargs_json = serde_json::json!({
        "default": default_kargs(),
        "files": [
            {"end": "\n", "offset": grub_off, "pad": "#", "path": "EFI/redhat/grub.cfg"},
            {"end": "\n", "offset": isolinux_off, "pad": "#", "path": "isolinux/isolinux.cfg"},
        ],
        "size": KARGS_AREA_SIZE,
    });
    let [(_, vmlinuz), (_, initrd), (_, rootfs)] = pxe_artifacts(arch);
    let file = |path: &str, data: Vec<u8>| IsoInput {
        path: path.into(),
        data: IsoData::Bytes(data),
        mtime,
    };
    let files = vec![
        file(
            "coreos/igninfo.json",
            br#"{"file":"images/ignition.img"}"#.to_vec(),
        ),
        file("coreos/kargs.json", serde_json::to_vec_pretty(&kargs_json)?),
        file("EFI/redhat/grub.cfg", grub.into_bytes()),
        file("isolinux/isolinux.cfg", isolinux.into_bytes()),
        file("images/ignition.img", vec![0; IGNITION_AREA_SIZE]),
        file("images/pxeboot/vmlinuz", vmlinuz),
        file("images/pxeboot/initrd.img", initrd),
        file("images/pxeboot/rootfs.img", rootfs),
    ];
    let mut out = Vec::new();
    write_iso(&mut out, RHCOS_BUILD, &files)?;
    Ok(out)
}

/// The PXE artifacts of `arch` as the stream names them (file name, bytes): kernel,
/// initramfs, rootfs, in that order; the same bytes as `images/pxeboot/{vmlinuz,initrd.img,rootfs.img}`
/// in the ISO. File names follow RHCOS: `<build>-live-kernel-<arch>`,
/// `<build>-live-initramfs.<arch>.img`, `<build>-live-rootfs.<arch>.img`.
///
/// As in a real live build (coreos-assembler's live step): the rootfs is an uncompressed newc
/// cpio whose first member is `root.squashfs` (here a placeholder that starts with the squashfs
/// magic `hsqs`, its data at byte 124 as the live ISO's `sysroot.mount` assumes) followed by
/// `etc/coreos-live-rootfs` (the build's version); the initramfs carries
/// `etc/coreos-live-initramfs` (the same version; `is-live-image` tests for it) and
/// `etc/coreos-live-want-rootfs`, the [`make_stream_hash`] of the rootfs that the live PXE
/// initrd checks a fetched rootfs against (`rdcore stream-hash`).
pub fn pxe_artifacts(arch: &str) -> [(String, Vec<u8>); 3] {
    let version = format!("{RHCOS_RELEASE}\n");
    let mut squashfs = b"hsqs".to_vec();
    squashfs.extend(
        format!(" simulated root.squashfs {RHCOS_BUILD} {arch}\n")
            .repeat(64)
            .into_bytes(),
    );
    let rootfs = newc_cpio(&[
        ("root.squashfs", &squashfs),
        ("etc/coreos-live-rootfs", version.as_bytes()),
    ]);
    let want = make_stream_hash(&rootfs, LIVE_ROOTFS_HASH_CHUNK);
    let initrd = gzip_stored(&newc_cpio(&[
        (
            "etc/sim-initrd-release",
            format!("NAME=\"simulated RHCOS initramfs\"\nBUILD={RHCOS_BUILD}\nARCH={arch}\n").as_bytes(),
        ),
        ("etc/coreos-live-initramfs", version.as_bytes()),
        ("etc/coreos-live-want-rootfs", want.as_bytes()),
    ]));
    [
        (
            format!("{RHCOS_BUILD}-live-kernel-{arch}"),
            format!("simulated kernel {RHCOS_BUILD} {arch}\n").into_bytes(),
        ),
        (format!("{RHCOS_BUILD}-live-initramfs.{arch}.img"), initrd),
        (format!("{RHCOS_BUILD}-live-rootfs.{arch}.img"), rootfs),
    ]
}

/// Chunk size of the live rootfs's stream hash (2 MiB, as the RHCOS/FCOS live builds write it).
pub const LIVE_ROOTFS_HASH_CHUNK: usize = 2 * 1024 * 1024;

/// The stream-hash file `rdcore stream-hash` reads (coreos-installer `src/bin/rdcore/
/// stream_hash.rs`): `stream-hash sha256 <chunk>` then the hex sha256 of each `chunk` bytes of
/// `data` (the last chunk may be shorter), one a line.
pub fn make_stream_hash(data: &[u8], chunk: usize) -> String {
    use sha2::Digest;
    let mut out = format!("stream-hash sha256 {chunk}\n");
    for c in data.chunks(chunk) {
        out.push_str(&hex::encode(sha2::Sha256::digest(c)));
        out.push('\n');
    }
    out
}

/// A newc ("070701") cpio archive with regular files (mode 0644, fixed inode numbers, mtime of
/// the build) and its `TRAILER!!!`, each header and body padded to 4 bytes.
pub fn newc_cpio(files: &[(&str, &[u8])]) -> Vec<u8> {
    let mut out = Vec::new();
    let entry = |out: &mut Vec<u8>, ino: usize, mode: u32, name: &str, data: &[u8]| {
        let header = format!(
            "070701{:08X}{:08X}{:08X}{:08X}{:08X}{:08X}{:08X}{:08X}{:08X}{:08X}{:08X}{:08X}{:08X}",
            ino,
            mode,
            0,
            0,
            1,
            if mode == 0 { 0 } else { MTIME_SECS },
            data.len(),
            0,
            0,
            0,
            0,
            name.len() + 1,
            0
        );
        out.extend_from_slice(header.as_bytes());
        out.extend_from_slice(name.as_bytes());
        out.push(0);
        while !out.len().is_multiple_of(4) {
            out.push(0);
        }
        out.extend_from_slice(data);
        while !out.len().is_multiple_of(4) {
            out.push(0);
        }
    };
    for (i, (name, data)) in files.iter().enumerate() {
        entry(&mut out, i + 1, 0o100644, name, data);
    }
    entry(&mut out, 0, 0, "TRAILER!!!", &[]);
    out
}

/// gzip (RFC 1952) of `data` using stored deflate blocks: valid for gunzip and the kernel's
/// initramfs unpacker, no compression library needed, byte-for-byte deterministic.
pub fn gzip_stored(data: &[u8]) -> Vec<u8> {
    let mut out = vec![0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 3];
    let mut chunks = data.chunks(65535).peekable();
    if chunks.peek().is_none() {
        out.extend_from_slice(&[1, 0, 0, 0xff, 0xff]);
    }
    while let Some(c) = chunks.next() {
        out.push(if chunks.peek().is_none() { 1 } else { 0 });
        let n = c.len() as u16;
        out.extend_from_slice(&n.to_le_bytes());
        out.extend_from_slice(&(!n).to_le_bytes());
        out.extend_from_slice(c);
    }
    out.extend_from_slice(&crc32(data).to_le_bytes());
    out.extend_from_slice(&(data.len() as u32).to_le_bytes());
    out
}

/// CRC-32 (IEEE 802.3, reflected, polynomial 0xEDB88320) as gzip uses it.
fn crc32(data: &[u8]) -> u32 {
    let mut crc = 0xFFFF_FFFFu32;
    for &b in data {
        crc ^= b as u32;
        for _ in 0..8 {
            crc = if crc & 1 != 0 {
                (crc >> 1) ^ 0xEDB8_8320
            } else {
                crc >> 1
            };
        }
    }
    !crc
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Cursor;

    #[test]
    fn layout_is_coreos_like() {
        let bytes = base_iso_bytes("x86_64").unwrap();
        let mut r = Cursor::new(&bytes);
        use agent_day2_iso9660::{get, read_entry, volume_id};
        assert_eq!(volume_id(&mut r).unwrap(), RHCOS_BUILD);
        let ign = get(&mut r, "coreos/igninfo.json").unwrap();
        let v: serde_json::Value = serde_json::from_slice(&read_entry(&mut r, &ign).unwrap()).unwrap();
        let area = get(&mut r, v["file"].as_str().unwrap()).unwrap();
        assert_eq!(area.size, IGNITION_AREA_SIZE as u64);
        assert!(read_entry(&mut r, &area).unwrap().iter().all(|b| *b == 0));
        let k = get(&mut r, "coreos/kargs.json").unwrap();
        let kj: serde_json::Value = serde_json::from_slice(&read_entry(&mut r, &k).unwrap()).unwrap();
        let size = kj["size"].as_u64().unwrap() as usize;
        let files = kj["files"].as_array().unwrap();
        assert_eq!(files.len(), 2);
        for f in files {
            let e = get(&mut r, f["path"].as_str().unwrap()).unwrap();
            let text = read_entry(&mut r, &e).unwrap();
            let off = f["offset"].as_u64().unwrap() as usize;
            let region = &text[off..off + size];
            let want = format!("{}\n", kj["default"].as_str().unwrap());
            assert!(region.starts_with(want.as_bytes()));
            assert!(region[want.len()..].iter().all(|b| *b == b'#'));
            assert!(text[off + size..].starts_with(b" COREOS_KARG_EMBED_AREA"));
            // the area ends the kernel line: the text before it is "linux ..." / "append ..."
            let line_start = text[..off].iter().rposition(|b| *b == b'\n').unwrap() + 1;
            let line = String::from_utf8_lossy(&text[line_start..off]);
            assert!(line.contains("vmlinuz ") || line.contains("append "), "{line}");
        }
        assert_eq!(bytes, base_iso_bytes("x86_64").unwrap(), "deterministic");
        assert_ne!(bytes, base_iso_bytes("aarch64").unwrap(), "per-arch content");
    }

    #[test]
    fn initrd_is_gzip_cpio() {
        let bytes = base_iso_bytes("aarch64").unwrap();
        let mut r = Cursor::new(&bytes);
        let e = agent_day2_iso9660::get(&mut r, "images/pxeboot/initrd.img").unwrap();
        let gz = agent_day2_iso9660::read_entry(&mut r, &e).unwrap();
        let tmp = std::env::temp_dir().join(format!("sim-initrd-{}.gz", std::process::id()));
        std::fs::write(&tmp, &gz).unwrap();
        match std::process::Command::new("gzip").arg("-dc").arg(&tmp).output() {
            Ok(o) => {
                assert!(
                    o.status.success(),
                    "gzip -t: {}",
                    String::from_utf8_lossy(&o.stderr)
                );
                assert!(o.stdout.starts_with(b"070701"));
                assert!(String::from_utf8_lossy(&o.stdout).contains("ARCH=aarch64"));
                assert!(String::from_utf8_lossy(&o.stdout).contains("TRAILER!!!"));
            }
            Err(e) => panic!("gzip not runnable: {e}"),
        }
        let _ = std::fs::remove_file(&tmp);
        assert_eq!(crc32(b"123456789"), 0xCBF4_3926);
    }
}
