//! newc ("070701") cpio archives: the format the Linux initramfs unpacker reads
//! (kernel `Documentation/driver-api/early-userspace/buffer-format.rst`) and the one inside
//! the appliance's `config.gz`.
//!
//! Layout of each member: a 110-byte ASCII header (`070701` and 13 eight-digit hex fields:
//! ino, mode, uid, gid, nlink, mtime, filesize, devmajor, devminor, rdevmajor, rdevminor,
//! namesize (with the NUL), check), the name and a NUL padded to a multiple of 4, the data
//! padded to a multiple of 4. The archive ends with a member named `TRAILER!!!`.

use std::collections::BTreeSet;

use super::error::{IsoError, Result};

/// One member to write.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CpioFile<'a> {
    /// Path inside the archive, `/` separated, recorded as given: relative for initrd
    /// archives (`config.ign`, `etc/coreos-firstboot-network/eth0.nmconnection`; the kernel
    /// unpacks into the initramfs root), absolute for the appliance's `config.gz`, whose
    /// loader matches and extracts members by absolute path (`/etc/assisted/...`).
    pub path: &'a str,
    /// Full `st_mode`, including the file type: `0o100600` for a regular file readable by
    /// root only. A mode without a type is taken as a regular file.
    pub mode: u32,
    /// Modification time, seconds since the Unix epoch (0 when unknown).
    pub mtime: u64,
    /// Contents.
    pub data: &'a [u8],
}

/// Mode of the parent directories [`newc_archive`] adds (`drwxr-xr-x`).
pub const DIR_MODE: u32 = 0o040755;
const S_IFMT: u32 = 0o170000;
const S_IFREG: u32 = 0o100000;
const S_IFDIR: u32 = 0o040000;
const TRAILER: &str = "TRAILER!!!";

fn push_member(out: &mut Vec<u8>, ino: u32, mode: u32, nlink: u32, mtime: u64, name: &str, data: &[u8]) {
    let header = format!(
        "070701{:08X}{:08X}{:08X}{:08X}{:08X}{:08X}{:08X}{:08X}{:08X}{:08X}{:08X}{:08X}{:08X}",
        ino,
        mode,
        0,
        0,
        nlink,
        // newc has 32-bit times; saturate rather than wrap (year 2106).
        mtime.min(u32::MAX as u64),
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
    pad4(out);
    out.extend_from_slice(data);
    pad4(out);
}

fn pad4(out: &mut Vec<u8>) {
    while !out.len().is_multiple_of(4) {
        out.push(0);
    }
}

fn check_path(path: &str) -> Result<()> {
    let rel = path.strip_prefix('/').unwrap_or(path);
    let bad = rel.is_empty()
        || rel.ends_with('/')
        || rel.split('/').any(|c| c.is_empty() || c == "." || c == "..")
        || path.bytes().any(|b| b == 0);
    if bad {
        return Err(IsoError::Invalid(format!(
            "cpio member path {path:?} must be a file path without empty, '.' or '..' components and without NUL bytes"
        )));
    }
    if path == TRAILER {
        return Err(IsoError::Invalid(format!(
            "cpio member path {path:?} is reserved for the archive end"
        )));
    }
    Ok(())
}

/// An uncompressed newc archive of `files`, in the given order, each preceded by its parent
/// directories (mode [`DIR_MODE`], the file's mtime) unless an earlier member created them,
/// then the trailer. Inode numbers count from 1. Files larger than 4 GiB - 1 cannot be
/// recorded (newc sizes are 32-bit).
///
/// Errors: [`IsoError::Invalid`] naming the path for an absolute path, `.`/`..`/empty
/// components, a duplicate path, or a file over 4 GiB - 1.
pub fn newc_archive(files: &[CpioFile<'_>]) -> Result<Vec<u8>> {
    build(files, true)
}

/// Like [`newc_archive`] but without parent directory members: for archives extracted with
/// `cpio -id` onto an existing system (the appliance config image), where recording `/etc`
/// would be pointless and could touch an existing directory's metadata.
pub fn newc_archive_flat(files: &[CpioFile<'_>]) -> Result<Vec<u8>> {
    build(files, false)
}

fn build(files: &[CpioFile<'_>], parents: bool) -> Result<Vec<u8>> {
    let mut out = Vec::with_capacity(
        files
            .iter()
            .map(|f| f.data.len() + f.path.len() + 128)
            .sum::<usize>()
            + 256,
    );
    let mut seen: BTreeSet<String> = BTreeSet::new();
    let mut ino = 1u32;
    for f in files {
        check_path(f.path)?;
        if f.data.len() > u32::MAX as usize {
            return Err(IsoError::Invalid(format!(
                "cpio member {} is larger than 4 GiB - 1 bytes",
                f.path
            )));
        }
        let comps: Vec<&str> = f.path.split('/').collect();
        // for "/etc/x" the components are "", "etc", "x": the first directory is "/etc"
        let first = if f.path.starts_with('/') { 2 } else { 1 };
        for i in first..comps.len() {
            if !parents {
                break;
            }
            let dir = comps[..i].join("/");
            if seen.insert(dir.clone()) {
                push_member(&mut out, ino, DIR_MODE, 2, f.mtime, &dir, &[]);
                ino += 1;
            }
        }
        if !seen.insert(f.path.to_string()) {
            return Err(IsoError::Invalid(format!(
                "cpio member {} is given twice (or is also a directory)",
                f.path
            )));
        }
        let mode = if f.mode & S_IFMT == 0 {
            f.mode | S_IFREG
        } else {
            f.mode
        };
        push_member(&mut out, ino, mode, 1, f.mtime, f.path, f.data);
        ino += 1;
    }
    push_member(&mut out, 0, 0, 1, 0, TRAILER, &[]);
    Ok(out)
}

/// One member read back by [`read_newc`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CpioMember {
    /// Name as recorded (no leading `/` in what we write).
    pub path: String,
    /// Full `st_mode`.
    pub mode: u32,
    /// Modification time in seconds since the epoch.
    pub mtime: u64,
    /// Contents (empty for directories).
    pub data: Vec<u8>,
}

impl CpioMember {
    /// Whether the member is a directory.
    pub fn is_dir(&self) -> bool {
        self.mode & S_IFMT == S_IFDIR
    }
}

/// Parses uncompressed newc archives: members up to each `TRAILER!!!`, then further
/// archives after zero padding (the kernel accepts concatenated archives the same way).
/// Returns every member except trailers, in order.
///
/// Errors: [`IsoError::Corrupt`] with the byte offset for a bad magic, a bad hex field, or a
/// member running past the end of `buf`.
pub fn read_newc(buf: &[u8]) -> Result<Vec<CpioMember>> {
    let corrupt = |what: String| IsoError::Corrupt { what };
    let mut members = Vec::new();
    let mut pos = 0usize;
    loop {
        // zero padding between (and after) archives
        while pos < buf.len() && buf[pos] == 0 {
            pos += 1;
        }
        if pos >= buf.len() {
            break;
        }
        // one archive
        loop {
            let h = buf.get(pos..pos + 110).ok_or_else(|| {
                corrupt(format!(
                    "cpio header at byte {pos} runs past the end ({} bytes)",
                    buf.len()
                ))
            })?;
            if &h[..6] != b"070701" && &h[..6] != b"070702" {
                return Err(corrupt(format!("no newc cpio magic at byte {pos}")));
            }
            let field = |i: usize| -> Result<u64> {
                let s = std::str::from_utf8(&h[6 + i * 8..14 + i * 8]).ok();
                s.and_then(|s| u64::from_str_radix(s, 16).ok())
                    .ok_or_else(|| corrupt(format!("bad hex field {i} in the cpio header at byte {pos}")))
            };
            let mode = field(1)? as u32;
            let mtime = field(5)?;
            let size = field(6)? as usize;
            let namesize = field(11)? as usize;
            let name_start = pos + 110;
            let name = buf
                .get(name_start..name_start + namesize)
                .ok_or_else(|| corrupt(format!("cpio name at byte {name_start} runs past the end")))?;
            let name = String::from_utf8_lossy(name.strip_suffix(&[0]).unwrap_or(name)).into_owned();
            let data_start = (name_start + namesize).next_multiple_of(4);
            let data = buf
                .get(data_start..data_start + size)
                .ok_or_else(|| corrupt(format!("cpio member {name:?} at byte {pos} runs past the end")))?;
            pos = (data_start + size).next_multiple_of(4);
            if name == TRAILER {
                break;
            }
            members.push(CpioMember {
                path: name,
                mode,
                mtime,
                data: data.to_vec(),
            });
        }
    }
    Ok(members)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_with_parent_dirs() {
        let a = newc_archive(&[
            CpioFile {
                path: "config.ign",
                mode: 0o100600,
                mtime: 5,
                data: b"{\"ignition\":{}}",
            },
            CpioFile {
                path: "etc/a/b.conf",
                mode: 0o644,
                mtime: 7,
                data: b"xyz",
            },
            CpioFile {
                path: "etc/a/c",
                mode: 0o100600,
                mtime: 7,
                data: b"",
            },
        ])
        .unwrap();
        assert_eq!(a.len() % 4, 0);
        let m = read_newc(&a).unwrap();
        let names: Vec<_> = m.iter().map(|m| m.path.as_str()).collect();
        assert_eq!(names, ["config.ign", "etc", "etc/a", "etc/a/b.conf", "etc/a/c"]);
        assert_eq!(m[0].mode, 0o100600);
        assert_eq!(m[0].data, b"{\"ignition\":{}}");
        assert!(m[1].is_dir() && m[2].is_dir());
        assert_eq!(m[3].mode, 0o100644, "type bits added");
        assert_eq!(m[3].mtime, 7);
        // concatenated with zero padding, as in an initrd
        let mut two = a.clone();
        two.extend_from_slice(&[0; 12]);
        two.extend_from_slice(&a);
        assert_eq!(read_newc(&two).unwrap().len(), 10);
    }

    #[test]
    fn absolute_and_flat() {
        let f = [CpioFile {
            path: "/etc/assisted/a.env",
            mode: 0o100600,
            mtime: 9,
            data: b"A=1\n",
        }];
        let names = |a: &[u8]| {
            read_newc(a)
                .unwrap()
                .into_iter()
                .map(|m| m.path)
                .collect::<Vec<_>>()
        };
        assert_eq!(
            names(&newc_archive(&f).unwrap()),
            ["/etc", "/etc/assisted", "/etc/assisted/a.env"]
        );
        assert_eq!(names(&newc_archive_flat(&f).unwrap()), ["/etc/assisted/a.env"]);
    }

    #[test]
    fn gnu_cpio_reads_it() {
        let a = newc_archive(&[CpioFile {
            path: "d/x.txt",
            mode: 0o100640,
            mtime: 1_700_000_000,
            data: b"hello\n",
        }])
        .unwrap();
        let dir = tempfile::tempdir().unwrap();
        let out = std::process::Command::new("cpio")
            .args([
                "-i",
                "-d",
                "--quiet",
                "--no-absolute-filenames",
                "--preserve-modification-time",
            ])
            .current_dir(dir.path())
            .stdin(std::process::Stdio::piped())
            .spawn()
            .and_then(|mut c| {
                use std::io::Write;
                c.stdin.take().unwrap().write_all(&a)?;
                c.wait()
            });
        match out {
            Ok(st) => {
                assert!(st.success());
                let p = dir.path().join("d/x.txt");
                assert_eq!(std::fs::read(&p).unwrap(), b"hello\n");
                use std::os::unix::fs::MetadataExt;
                let md = std::fs::metadata(&p).unwrap();
                assert_eq!(md.mode() & 0o7777, 0o640);
                assert_eq!(md.mtime(), 1_700_000_000);
            }
            Err(e) => panic!("cpio not runnable ({e}): apt-get install cpio (scripts/test.sh installs it)"),
        }
    }

    #[test]
    fn bad_paths_and_corrupt_input() {
        for p in ["/", "a/../b", "", "a//b", "TRAILER!!!", "d/", "/x/./y"] {
            assert!(
                newc_archive(&[CpioFile {
                    path: p,
                    mode: 0o600,
                    mtime: 0,
                    data: b""
                }])
                .is_err(),
                "{p}"
            );
        }
        let dup = [
            CpioFile {
                path: "a",
                mode: 0o600,
                mtime: 0,
                data: b"",
            },
            CpioFile {
                path: "a",
                mode: 0o600,
                mtime: 0,
                data: b"",
            },
        ];
        assert!(newc_archive(&dup)
            .unwrap_err()
            .to_string()
            .contains("given twice"));
        let a = newc_archive(&[CpioFile {
            path: "f",
            mode: 0o600,
            mtime: 0,
            data: b"0123456789",
        }])
        .unwrap();
        let e = read_newc(&a[..120]).unwrap_err().to_string();
        assert!(e.contains("runs past the end"), "{e}");
        assert!(read_newc(&[b'x'; 200]).unwrap_err().to_string().contains("magic"));
    }
}
