//! newc ("SVR4 no CRC", magic `070701`; also `070702` with CRC) cpio archives, as the kernel's
//! initramfs unpacker reads them.
//!
//! Format (cpio(5), kernel `Documentation/driver-api/early-userspace/buffer-format.rst`): a
//! 110-byte ASCII header of 13 eight-digit hex fields after the magic, the NUL-terminated name
//! padded to a multiple of 4 (counting from the header start), then the data padded to 4. The
//! member `TRAILER!!!` ends an archive.

use std::collections::BTreeMap;

const HEADER: usize = 110;
const TRAILER: &str = "TRAILER!!!";

fn pad4(n: usize) -> usize {
    (n + 3) & !3
}

fn hex_field(h: &[u8], i: usize) -> Result<u32, String> {
    let s = std::str::from_utf8(&h[6 + i * 8..6 + (i + 1) * 8])
        .map_err(|_| format!("header field {i} is not ASCII"))?;
    u32::from_str_radix(s, 16).map_err(|_| format!("header field {i} {s:?} is not hex"))
}

/// One parsed member: name, mode (file type and permissions) and data.
struct Member<'a> {
    name: String,
    mode: u32,
    data: &'a [u8],
}

/// Parses one archive starting at `buf[0]`; returns its members and its length including the
/// trailer and padding.
fn parse_one(buf: &[u8]) -> Result<(Vec<Member<'_>>, usize), String> {
    let mut pos = 0usize;
    let mut members = Vec::new();
    loop {
        if buf.len() < pos + HEADER {
            return Err(format!(
                "truncated header at byte {pos} (archive has no {TRAILER})"
            ));
        }
        let h = &buf[pos..pos + HEADER];
        if &h[..6] != b"070701" && &h[..6] != b"070702" {
            return Err(format!(
                "bad magic {:?} at byte {pos}",
                String::from_utf8_lossy(&h[..6])
            ));
        }
        let mode = hex_field(h, 1)?;
        let filesize = hex_field(h, 6)? as usize;
        let namesize = hex_field(h, 11)? as usize;
        if namesize == 0 {
            return Err(format!("empty name at byte {pos}"));
        }
        let name_start = pos + HEADER;
        let name_end = name_start + namesize;
        if buf.len() < name_end {
            return Err(format!("truncated name at byte {name_start}"));
        }
        let raw = &buf[name_start..name_end - 1];
        let name =
            String::from_utf8(raw.to_vec()).map_err(|_| format!("name at byte {name_start} is not UTF-8"))?;
        let data_start = pos + pad4(HEADER + namesize);
        let data_end = data_start + filesize;
        if buf.len() < data_end {
            return Err(format!(
                "member {name:?} data truncated ({filesize} bytes at byte {data_start})"
            ));
        }
        pos = pad4(data_end).min(buf.len());
        if name == TRAILER {
            return Ok((members, pos));
        }
        members.push(Member {
            name,
            mode,
            data: &buf[data_start..data_end],
        });
    }
}

fn clean(name: &str) -> String {
    let mut n = name;
    while let Some(r) = n.strip_prefix("./") {
        n = r;
    }
    n.trim_start_matches('/').to_string()
}

/// Length in bytes of the newc archive that starts at `buf[0]` (through its trailer's padding).
pub fn archive_len(buf: &[u8]) -> Result<usize, String> {
    parse_one(buf).map(|(_, len)| len)
}

/// Every regular file in `buf`, which holds one or more newc archives, possibly separated by
/// zero padding. Path → data; a later member of the same path replaces an earlier one (as the
/// kernel overwrites). Names lose a leading `./` or `/`.
pub fn read_all(buf: &[u8]) -> Result<BTreeMap<String, Vec<u8>>, String> {
    let mut out = BTreeMap::new();
    let mut pos = 0usize;
    while pos < buf.len() {
        if buf[pos] == 0 {
            pos += 1;
            continue;
        }
        let (members, len) = parse_one(&buf[pos..]).map_err(|e| format!("archive at byte {pos}: {e}"))?;
        for m in members {
            // S_IFREG = 0o100000; directories, symlinks and device nodes are not config files.
            if m.mode & 0o170000 == 0o100000 {
                out.insert(clean(&m.name), m.data.to_vec());
            }
        }
        pos += len;
    }
    Ok(out)
}

/// Writes a newc archive of regular files (mode 0644, parents not added), for tests and for the
/// logs this simulator serves.
pub fn write(files: &[(&str, &[u8])]) -> Vec<u8> {
    let mut out = Vec::new();
    let mut ino = 1u32;
    let mut entry = |out: &mut Vec<u8>, name: &str, mode: u32, data: &[u8]| {
        let header = format!(
            "070701{:08x}{:08x}{:08x}{:08x}{:08x}{:08x}{:08x}{:08x}{:08x}{:08x}{:08x}{:08x}{:08x}",
            ino,
            mode,
            0,
            0,
            1,
            0,
            data.len(),
            0,
            0,
            0,
            0,
            name.len() + 1,
            0
        );
        ino += 1;
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
    for (name, data) in files {
        entry(&mut out, name, 0o100644, data);
    }
    entry(&mut out, TRAILER, 0, &[]);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_length() {
        let a = write(&[
            ("config.ign", b"{\"x\":1}".as_slice()),
            ("./etc/hostname", b"w0\n"),
        ]);
        assert_eq!(a.len() % 4, 0);
        assert_eq!(archive_len(&a).unwrap(), a.len());
        let m = read_all(&a).unwrap();
        assert_eq!(m.get("config.ign").unwrap(), b"{\"x\":1}");
        assert_eq!(m.get("etc/hostname").unwrap(), b"w0\n");
    }

    #[test]
    fn reads_what_gnu_cpio_writes() {
        // `printf config.ign | cpio -o -H newc` output checked with the real cpio when present.
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("config.ign"), b"{\"ignition\":{}}").unwrap();
        let out = std::process::Command::new("sh")
            .arg("-c")
            .arg("printf 'config.ign\\n' | cpio -o -H newc 2>/dev/null")
            .current_dir(dir.path())
            .output();
        let out = out.expect("sh runs");
        assert!(
            out.status.success() && !out.stdout.is_empty(),
            "cpio failed or is not installed (apt-get install cpio; scripts/test.sh installs it)"
        );
        let m = read_all(&out.stdout).unwrap();
        assert_eq!(m.get("config.ign").unwrap(), b"{\"ignition\":{}}");
    }

    #[test]
    fn truncated_archive_is_an_error() {
        let a = write(&[("config.ign", b"0123456789".as_slice())]);
        let e = read_all(&a[..120]).unwrap_err();
        assert!(e.contains("truncated"), "{e}");
        let e = read_all(&a[..a.len() - 20]).unwrap_err();
        assert!(e.contains("no TRAILER!!!") || e.contains("truncated"), "{e}");
    }

    #[test]
    fn directories_are_skipped() {
        let mut a = Vec::new();
        // A directory entry by hand: 13 fields; filesize (field 6) 0, namesize (field 11) 4.
        let fields = [1u32, 0o040755, 0, 0, 2, 0, 0, 0, 0, 0, 0, 4, 0];
        a.extend_from_slice(b"070701");
        for f in fields {
            a.extend_from_slice(format!("{f:08x}").as_bytes());
        }
        a.extend_from_slice(b"etc\0");
        while a.len() % 4 != 0 {
            a.push(0);
        }
        a.extend_from_slice(&write(&[("etc/x", b"y".as_slice())]));
        let m = read_all(&a).unwrap();
        assert_eq!(m.len(), 1);
        assert_eq!(m.get("etc/x").unwrap(), b"y");
    }
}
