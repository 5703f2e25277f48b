//! Reading the Ignition config a live ISO carries, the way the booting machine gets it.
//!
//! Source of the rules: coreos-installer `src/live/embed.rs` (`InitrdEmbedArea::for_iso`) and
//! `src/io/compress.rs`, the kernel's initramfs unpacker (`init/initramfs.c`), and
//! docs/iso.md "Embedding the Ignition config":
//! * the embed area is found through `coreos/igninfo.json` (`file`, optional `offset` and
//!   `length`), else it is the whole of `images/ignition.img`;
//! * an area that is all zeros holds nothing (a pristine ISO);
//! * the area holds one or more archives, each gzip, xz or uncompressed newc cpio, possibly with
//!   zero padding between them (the kernel skips zero bytes up to the next 4-byte boundary and
//!   beyond);
//! * the kernel unpacks `config.ign` to `/config.ign` (Ignition reads it as the user config).
//!
//! The appliance flow's config image is read by [`read_config_image`]: ISO9660 with one
//! `config.gz` (gzip of a newc cpio of files at their target paths).

use std::collections::BTreeMap;
use std::io::{Read, Seek, SeekFrom};

use super::cpio;

/// Why an image cannot give its Ignition config. Every variant means "refuse the image" (exit 3).
#[derive(Debug, thiserror::Error)]
pub enum EmbedError {
    /// The file is not an ISO9660 image or lacks the embed area.
    #[error("{0}")]
    Iso(String),
    /// The embed area is all zeros: `add-nodes` did not write into this ISO.
    #[error("no Ignition embedded: the embed area ({path}, {len} bytes at byte offset {offset}) is all zeros; embed a config first (oc agent-day2 add-nodes writes it)")]
    Empty { path: String, offset: u64, len: u64 },
    /// The area holds bytes that are not a gzip/xz/cpio archive.
    #[error("embed area ({path}): {reason}")]
    Corrupt { path: String, reason: String },
    /// The archives hold no `config.ign`.
    #[error("no Ignition embedded: the archive in {path} has no config.ign (members: {members})")]
    NoConfig { path: String, members: String },
    /// I/O while reading the image.
    #[error("reading {path}: {source}")]
    Io { path: String, source: std::io::Error },
}

/// Where the embed area lies in the image: `path` is the ISO file that holds it,
/// `offset`/`len` are absolute byte offset and length in the image file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EmbedArea {
    pub path: String,
    pub offset: u64,
    pub len: u64,
}

/// Finds the embed area of `iso` (see the module docs for the rule).
///
/// Errors: not an ISO, no `images/ignition.img` and no `coreos/igninfo.json`, a malformed
/// `igninfo.json`, or an offset/length outside the named file.
pub fn find_area<R: Read + Seek>(iso: &mut R) -> Result<EmbedArea, EmbedError> {
    let info = agent_day2_iso9660::find(iso, "coreos/igninfo.json")
        .map_err(|e| EmbedError::Iso(format!("reading the ISO9660 directory: {e}")))?;
    let (file, off_in_file, length) = match info {
        Some(entry) => {
            let bytes = agent_day2_iso9660::read_entry(iso, &entry)
                .map_err(|e| EmbedError::Iso(format!("reading coreos/igninfo.json: {e}")))?;
            let v: serde_json::Value = serde_json::from_slice(&bytes)
                .map_err(|e| EmbedError::Iso(format!("coreos/igninfo.json is not JSON: {e}")))?;
            let file = v
                .get("file")
                .and_then(|f| f.as_str())
                .ok_or_else(|| EmbedError::Iso("coreos/igninfo.json lacks the string field \"file\"".into()))?
                .to_string();
            let offset = v.get("offset").and_then(|o| o.as_u64()).unwrap_or(0);
            let length = v.get("length").and_then(|o| o.as_u64());
            (file, offset, length)
        }
        None => ("images/ignition.img".to_string(), 0, None),
    };
    let entry = agent_day2_iso9660::find(iso, &file)
        .map_err(|e| EmbedError::Iso(format!("reading the ISO9660 directory: {e}")))?
        .ok_or_else(|| {
            EmbedError::Iso(format!(
                "not a CoreOS live ISO: {file} not found (looked for coreos/igninfo.json, then images/ignition.img)"
            ))
        })?;
    if off_in_file > entry.size {
        return Err(EmbedError::Iso(format!(
            "coreos/igninfo.json offset {off_in_file} lies past the end of {file} ({} bytes)",
            entry.size
        )));
    }
    let len = length.unwrap_or(entry.size - off_in_file);
    if off_in_file + len > entry.size {
        return Err(EmbedError::Iso(format!(
            "coreos/igninfo.json area {off_in_file}+{len} lies past the end of {file} ({} bytes)",
            entry.size
        )));
    }
    Ok(EmbedArea {
        path: file,
        offset: entry.offset + off_in_file,
        len,
    })
}

/// Reads the embed area's bytes.
pub fn read_area<R: Read + Seek>(iso: &mut R, area: &EmbedArea) -> Result<Vec<u8>, EmbedError> {
    let io = |source| EmbedError::Io {
        path: area.path.clone(),
        source,
    };
    iso.seek(SeekFrom::Start(area.offset)).map_err(io)?;
    let mut buf = vec![0u8; area.len as usize];
    iso.read_exact(&mut buf).map_err(io)?;
    Ok(buf)
}

/// The members of the archives in an embed area (or an initrd), path → contents, as the kernel
/// would leave them after unpacking: later members replace earlier ones of the same path.
/// Paths are as stored (no leading `/`, `./` removed); directories are left out.
///
/// Errors: an all-zero area ([`EmbedError::Empty`] is for the caller to build: this returns an
/// empty map), an unknown compression, a truncated or corrupt archive.
pub fn unpack_archives(area: &[u8], what: &str) -> Result<BTreeMap<String, Vec<u8>>, EmbedError> {
    let corrupt = |reason: String| EmbedError::Corrupt {
        path: what.to_string(),
        reason,
    };
    let mut out = BTreeMap::new();
    let mut pos = 0usize;
    loop {
        // Zero padding between archives (and after the last one) is skipped, as the kernel does.
        while pos < area.len() && area[pos] == 0 {
            pos += 1;
        }
        if pos >= area.len() {
            break;
        }
        let rest = &area[pos..];
        let (cpio_bytes, consumed) = if rest.starts_with(&[0x1f, 0x8b]) {
            let mut dec = flate2::bufread::GzDecoder::new(rest);
            let mut data = Vec::new();
            dec.read_to_end(&mut data)
                .map_err(|e| corrupt(format!("gzip archive at area byte {pos}: {e}")))?;
            let consumed = rest.len() - dec.into_inner().len();
            (data, consumed)
        } else if rest.starts_with(&[0xfd, b'7', b'z', b'X', b'Z', 0x00]) {
            xz_stream(rest).map_err(|e| corrupt(format!("xz archive at area byte {pos}: {e}")))?
        } else if rest.starts_with(b"070701") || rest.starts_with(b"070702") {
            let len = cpio::archive_len(rest)
                .map_err(|e| corrupt(format!("cpio archive at area byte {pos}: {e}")))?;
            (rest[..len].to_vec(), len)
        } else {
            return Err(corrupt(format!(
                "unknown data at area byte {pos} (starts {:02x?}); expected gzip, xz or newc cpio",
                &rest[..rest.len().min(6)]
            )));
        };
        // A decompressed stream may itself hold several cpio archives back to back.
        for (name, data) in cpio::read_all(&cpio_bytes)
            .map_err(|e| corrupt(format!("cpio inside the archive at area byte {pos}: {e}")))?
        {
            out.insert(name, data);
        }
        if consumed == 0 {
            break;
        }
        pos += consumed;
    }
    Ok(out)
}

/// Decompresses the xz stream at the start of `buf`; returns the data and the stream's length.
///
/// The kernel's decoder checks CRC32 or nothing (kernel `lib/xz`, used with
/// `xz --check=crc32` as `Documentation/driver-api/early-userspace` and coreos-installer say):
/// other check types are refused. lzma-rs refuses bytes after the stream, so the stream's end
/// is found as the first 4-byte-aligned footer magic `YZ` whose prefix decodes.
fn xz_stream(buf: &[u8]) -> Result<(Vec<u8>, usize), String> {
    if buf.len() < 12 {
        return Err("truncated stream header".into());
    }
    match buf[7] & 0x0f {
        0x00 | 0x01 => {}
        0x04 => return Err("the stream uses check CRC64; the kernel needs CRC32 (xz --check=crc32)".into()),
        0x0a => {
            return Err("the stream uses check SHA-256; the kernel needs CRC32 (xz --check=crc32)".into())
        }
        other => {
            return Err(format!(
                "the stream uses check type {other:#x}; the kernel needs CRC32 (xz --check=crc32)"
            ))
        }
    }
    let mut last_err = "no stream footer found (truncated?)".to_string();
    let mut end = 24;
    while end <= buf.len() {
        if &buf[end - 2..end] == b"YZ" {
            let mut data = Vec::new();
            match lzma_rs::xz_decompress(&mut std::io::Cursor::new(&buf[..end]), &mut data) {
                Ok(()) => return Ok((data, end)),
                Err(e) => last_err = format!("{e:?}"),
            }
        }
        end += 4;
    }
    Err(last_err)
}

/// Reads `config.ign` from a live ISO the way the kernel and Ignition do.
///
/// Returns the raw bytes of the config and where the area was. Errors: see [`EmbedError`];
/// [`EmbedError::Empty`] says "no Ignition embedded".
pub fn read_ignition<R: Read + Seek>(iso: &mut R) -> Result<(Vec<u8>, EmbedArea), EmbedError> {
    let area = find_area(iso)?;
    let bytes = read_area(iso, &area)?;
    if bytes.iter().all(|b| *b == 0) {
        return Err(EmbedError::Empty {
            path: area.path.clone(),
            offset: area.offset,
            len: area.len,
        });
    }
    let members = unpack_archives(&bytes, &area.path)?;
    match members.get("config.ign") {
        Some(cfg) => Ok((cfg.clone(), area)),
        None => Err(EmbedError::NoConfig {
            path: area.path.clone(),
            members: members.keys().cloned().collect::<Vec<_>>().join(", "),
        }),
    }
}

/// Reads an appliance config image: ISO9660 with `config.gz`, a gzip newc cpio of files at
/// their target paths. Returns absolute path → contents.
pub fn read_config_image<R: Read + Seek>(img: &mut R) -> Result<BTreeMap<String, Vec<u8>>, EmbedError> {
    let entry = agent_day2_iso9660::find(img, "config.gz")
        .map_err(|e| EmbedError::Iso(format!("reading the config image: {e}")))?
        .ok_or_else(|| EmbedError::Iso("config image has no config.gz".into()))?;
    let bytes = agent_day2_iso9660::read_entry(img, &entry)
        .map_err(|e| EmbedError::Iso(format!("reading config.gz: {e}")))?;
    let members = unpack_archives(&bytes, "config.gz")?;
    Ok(members.into_iter().map(|(k, v)| (format!("/{k}"), v)).collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn gz(data: &[u8]) -> Vec<u8> {
        let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        e.write_all(data).unwrap();
        e.finish().unwrap()
    }

    /// xz with CRC32 like coreos-installer, by the real xz when present, else lzma-rs (no check).
    fn xz(data: &[u8]) -> Vec<u8> {
        use std::process::{Command, Stdio};
        if let Ok(mut child) = Command::new("xz")
            .args(["--check=crc32", "-9", "-c"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
        {
            child.stdin.take().unwrap().write_all(data).unwrap();
            let out = child.wait_with_output().unwrap();
            assert!(out.status.success());
            assert_eq!(out.stdout[7], 0x01, "xz wrote a CRC32 stream");
            return out.stdout;
        }
        let mut out = Vec::new();
        lzma_rs::xz_compress(&mut std::io::Cursor::new(data), &mut out).unwrap();
        out
    }

    #[test]
    fn xz_crc64_is_refused_like_the_kernel() {
        let mut s = xz(&cpio::write(&[("config.ign", b"{}".as_slice())]));
        s[7] = 0x04;
        let e = unpack_archives(&s, "x").unwrap_err().to_string();
        assert!(e.contains("CRC64"), "{e}");
    }

    #[test]
    fn lzma_rs_stream_without_check_is_read() {
        let mut out = Vec::new();
        lzma_rs::xz_compress(
            &mut std::io::Cursor::new(cpio::write(&[("config.ign", b"{}".as_slice())])),
            &mut out,
        )
        .unwrap();
        out.extend_from_slice(&[0u8; 64]);
        assert_eq!(unpack_archives(&out, "x").unwrap()["config.ign"], b"{}");
    }

    #[test]
    fn gzip_then_padding_then_xz_both_read_later_wins() {
        let a = cpio::write(&[("config.ign", b"first".as_slice()), ("etc/a", b"A")]);
        let b = cpio::write(&[("config.ign", b"second".as_slice())]);
        let mut area = gz(&a);
        area.extend_from_slice(&[0u8; 13]);
        area.extend_from_slice(&xz(&b));
        area.extend_from_slice(&[0u8; 4096]);
        let m = unpack_archives(&area, "images/ignition.img").unwrap();
        assert_eq!(m.get("config.ign").unwrap(), b"second");
        assert_eq!(m.get("etc/a").unwrap(), b"A");
    }

    #[test]
    fn uncompressed_cpio_is_read() {
        let a = cpio::write(&[("config.ign", b"{}".as_slice())]);
        let mut area = a.clone();
        area.extend_from_slice(&[0u8; 100]);
        let m = unpack_archives(&area, "x").unwrap();
        assert_eq!(m.get("config.ign").unwrap(), b"{}");
    }

    #[test]
    fn garbage_is_refused_with_offset() {
        let mut area = vec![0u8; 8];
        area.extend_from_slice(b"hello world");
        let e = unpack_archives(&area, "images/ignition.img")
            .unwrap_err()
            .to_string();
        assert!(e.contains("area byte 8"), "{e}");
        assert!(e.contains("expected gzip, xz or newc cpio"), "{e}");
    }

    #[test]
    fn truncated_gzip_is_refused() {
        let a = gz(&cpio::write(&[("config.ign", b"{}".as_slice())]));
        let e = unpack_archives(&a[..a.len() / 2], "x").unwrap_err().to_string();
        assert!(e.contains("gzip archive at area byte 0"), "{e}");
    }

    #[test]
    fn all_zero_area_unpacks_to_nothing() {
        assert!(unpack_archives(&[0u8; 1024], "x").unwrap().is_empty());
    }
}
