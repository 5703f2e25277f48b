//! Reading files out of image layers as they stream in: a layer is a tar, gzip'd or not;
//! the reader runs on a blocking thread and stops as soon as it has what it needs (dropping
//! the stream closes the connection, so a 1 GiB layer is not read past the file we want).

use std::io::{self, BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};

use bytes::Bytes;
use sha2::{Digest, Sha256};

/// Marks an I/O error that came from the network (not from the tar format), so the caller
/// retries it.
#[derive(Debug)]
pub(crate) struct NetError(pub String);
impl std::fmt::Display for NetError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}
impl std::error::Error for NetError {}

/// Whether `e` is a network error forwarded by [`ChannelReader`].
pub(crate) fn is_net_error(e: &io::Error) -> bool {
    e.get_ref().is_some_and(|i| i.is::<NetError>())
}

/// A blocking `Read` over chunks sent from the async side.
pub(crate) struct ChannelReader {
    rx: tokio::sync::mpsc::Receiver<io::Result<Bytes>>,
    cur: Bytes,
}

impl ChannelReader {
    pub(crate) fn new(rx: tokio::sync::mpsc::Receiver<io::Result<Bytes>>) -> Self {
        ChannelReader {
            rx,
            cur: Bytes::new(),
        }
    }
}

impl Read for ChannelReader {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        while self.cur.is_empty() {
            match self.rx.blocking_recv() {
                None => return Ok(0),
                Some(Ok(b)) => self.cur = b,
                Some(Err(e)) => return Err(io::Error::other(NetError(e.to_string()))),
            }
        }
        let n = buf.len().min(self.cur.len());
        buf[..n].copy_from_slice(&self.cur[..n]);
        let _ = self.cur.split_to(n);
        Ok(n)
    }
}

/// Wraps a layer stream in the right decompressor, from its first bytes (gzip `1f 8b`, else a
/// plain tar). zstd layers are refused with a message naming the format.
pub(crate) fn decompress<R: Read + 'static>(r: R) -> io::Result<Box<dyn Read>> {
    let mut br = BufReader::with_capacity(256 * 1024, r);
    let head = br.fill_buf()?;
    if head.starts_with(&[0x1f, 0x8b]) {
        Ok(Box::new(flate2::read::MultiGzDecoder::new(br)))
    } else if head.starts_with(&[0x28, 0xb5, 0x2f, 0xfd]) {
        Err(io::Error::new(
            io::ErrorKind::InvalidData,
            "the layer is zstd-compressed, which is not supported",
        ))
    } else {
        Ok(Box::new(br))
    }
}

/// `./a/b`, `/a/b` → `a/b`.
fn entry_name(p: &Path) -> String {
    let s = p.to_string_lossy();
    s.trim_start_matches("./").trim_start_matches('/').to_string()
}

/// Reads the regular file `wanted` (path inside the layer, no leading slash) of a layer tar,
/// up to `limit` bytes; None when the layer has no such file. Stops reading at the file.
pub(crate) fn find_small_file(layer: Box<dyn Read>, wanted: &str, limit: u64) -> io::Result<Option<Vec<u8>>> {
    let mut ar = tar::Archive::new(layer);
    for entry in ar.entries()? {
        let entry = entry?;
        if !entry.header().entry_type().is_file() || entry_name(&entry.path()?) != wanted {
            continue;
        }
        if entry.header().size()? > limit {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("{wanted} is larger than {limit} bytes"),
            ));
        }
        let mut out = Vec::new();
        entry.take(limit).read_to_end(&mut out)?;
        return Ok(Some(out));
    }
    Ok(None)
}

/// What [`find_iso`] found in one layer.
#[derive(Debug, Default)]
pub(crate) struct IsoScan {
    /// The ISO, written to this temporary path, with its sha256 (hex) and size in bytes.
    pub iso: Option<(PathBuf, String, u64)>,
    /// The `.sha256` file's expected digest (first word, lower case hex).
    pub expected_sha256: Option<String>,
}

/// Scans a layer for `iso_name` and `iso_name.sha256`; the ISO (when `want_iso`) is streamed
/// to `tmp` (created new, 0644) while its sha256 is computed. Stops once everything wanted
/// was seen. The caller removes `tmp` on error.
pub(crate) fn find_iso(
    layer: Box<dyn Read>,
    iso_name: &str,
    want_iso: bool,
    tmp: &Path,
) -> io::Result<IsoScan> {
    let sha_name = format!("{iso_name}.sha256");
    let mut scan = IsoScan::default();
    let mut ar = tar::Archive::new(layer);
    for entry in ar.entries()? {
        let mut entry = entry?;
        if !entry.header().entry_type().is_file() {
            continue;
        }
        let name = entry_name(&entry.path()?);
        if want_iso && scan.iso.is_none() && name == iso_name {
            let mut f = std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .open(tmp)?;
            let mut hasher = Sha256::new();
            let mut buf = vec![0u8; 1 << 20];
            let mut size = 0u64;
            loop {
                let n = entry.read(&mut buf)?;
                if n == 0 {
                    break;
                }
                hasher.update(&buf[..n]);
                f.write_all(&buf[..n])?;
                size += n as u64;
            }
            f.sync_all()?;
            scan.iso = Some((tmp.to_path_buf(), hex::encode(hasher.finalize()), size));
        } else if scan.expected_sha256.is_none() && name == sha_name {
            let mut s = String::new();
            (&mut entry).take(4096).read_to_string(&mut s)?;
            let word = s.split_whitespace().next().unwrap_or("").to_ascii_lowercase();
            if word.len() != 64 || !word.bytes().all(|b| b.is_ascii_hexdigit()) {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!("{sha_name} does not start with a sha256 hex digest"),
                ));
            }
            scan.expected_sha256 = Some(word);
        }
        if (scan.iso.is_some() || !want_iso) && scan.expected_sha256.is_some() {
            break;
        }
    }
    Ok(scan)
}
