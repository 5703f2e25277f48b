//! Creating output files that hold secrets (node ISOs, PXE initrds, config images, migration
//! bundles): mode 0600 from the first byte, written under a temporary name in the target
//! directory, fsync-ed, then renamed into place without replacing an existing file
//! (docs/iso.md "Output files"). The target directory itself is never chmod-ed.

use std::ffi::CString;
use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};

use super::error::{IsoError, Result};

/// Mode of every file created here: owner read/write only.
pub const SECRET_FILE_MODE: u32 = 0o600;

static COUNTER: AtomicU32 = AtomicU32::new(0);

/// An output file being written under a temporary name (`.<name>.tmp-<pid>-<n>` in the
/// destination's directory, mode 0600). [`AtomicFile::commit`] moves it into place; dropping
/// it without committing removes the temporary file, so a failed or interrupted write leaves
/// no partial output under the real name.
#[derive(Debug)]
pub struct AtomicFile {
    file: Option<File>,
    tmp: PathBuf,
    dest: PathBuf,
    force: bool,
}

impl AtomicFile {
    /// Starts writing `dest`. Without `force`, an existing `dest` (any kind of file, also a
    /// dangling symlink) is refused here already, so no time is spent writing a large file
    /// that cannot be placed; the final rename checks again atomically.
    ///
    /// Errors: [`IsoError::AlreadyExists`] naming `dest`; I/O errors naming the temporary path
    /// (e.g. a missing or read-only directory).
    pub fn create(dest: &Path, force: bool) -> Result<Self> {
        if !force && dest.symlink_metadata().is_ok() {
            return Err(IsoError::AlreadyExists {
                path: dest.to_path_buf(),
            });
        }
        let name = dest
            .file_name()
            .ok_or_else(|| IsoError::Invalid(format!("output path {} has no file name", dest.display())))?;
        let dir = match dest.parent() {
            Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
            _ => PathBuf::from("."),
        };
        let tmp = dir.join(format!(
            ".{}.tmp-{}-{}",
            name.to_string_lossy(),
            std::process::id(),
            COUNTER.fetch_add(1, Ordering::Relaxed)
        ));
        let file = OpenOptions::new()
            .write(true)
            .read(true)
            .create_new(true)
            .mode(SECRET_FILE_MODE)
            .open(&tmp)
            .map_err(|e| IsoError::io(format!("cannot create {}", tmp.display()), e))?;
        // Removed by the SIGINT/SIGTERM handler if the run is interrupted while writing.
        crate::tempfiles::register(&tmp);
        Ok(AtomicFile {
            file: Some(file),
            tmp,
            dest: dest.to_path_buf(),
            force,
        })
    }

    /// The open temporary file (read/write), e.g. for `copy_file_range` or positioned writes.
    pub fn file(&mut self) -> &mut File {
        self.file.as_mut().expect("AtomicFile used after commit")
    }

    /// The temporary path being written.
    pub fn temp_path(&self) -> &Path {
        &self.tmp
    }

    /// The final path.
    pub fn dest(&self) -> &Path {
        &self.dest
    }

    /// fsyncs the data, renames the temporary file to the destination (without `force`:
    /// `renameat2(RENAME_NOREPLACE)`, or `link`+`unlink` where the filesystem lacks it; with
    /// `force`: a plain `rename` that replaces), and fsyncs the directory.
    ///
    /// Errors: [`IsoError::AlreadyExists`] when the destination appeared meanwhile (the
    /// temporary file is removed); I/O errors naming the paths.
    pub fn commit(self) -> Result<()> {
        self.finish(true)
    }

    /// As [`AtomicFile::commit`], but leaves writing the data to disk to the kernel, as
    /// `coreos-installer iso ignition embed -o` does: for large outputs that can be made again
    /// (node ISOs, PXE files), where an fsync of a 1 GiB copy costs more than the whole embed.
    /// The name still only ever shows a complete file; after a power loss right after the run,
    /// run it again with `--force`.
    pub fn commit_without_fsync(self) -> Result<()> {
        self.finish(false)
    }

    fn finish(mut self, durable: bool) -> Result<()> {
        let file = self.file.take().expect("AtomicFile committed twice");
        if durable {
            file.sync_all()
                .map_err(|e| IsoError::io(format!("cannot flush {} to disk", self.tmp.display()), e))?;
        }
        drop(file);
        let r = if self.force {
            std::fs::rename(&self.tmp, &self.dest)
        } else {
            rename_noreplace(&self.tmp, &self.dest)
        };
        crate::tempfiles::unregister(&self.tmp);
        if let Err(e) = r {
            let _ = std::fs::remove_file(&self.tmp);
            return Err(if e.kind() == io::ErrorKind::AlreadyExists {
                IsoError::AlreadyExists {
                    path: self.dest.clone(),
                }
            } else {
                IsoError::io(
                    format!("cannot rename {} to {}", self.tmp.display(), self.dest.display()),
                    e,
                )
            });
        }
        // the rename itself must survive a crash too
        if let (true, Some(dir)) = (durable, self.dest.parent()) {
            let dir = if dir.as_os_str().is_empty() {
                Path::new(".")
            } else {
                dir
            };
            if let Ok(d) = File::open(dir) {
                let _ = d.sync_all();
            }
        }
        Ok(())
    }
}

impl Write for AtomicFile {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.file().write(buf)
    }
    fn flush(&mut self) -> io::Result<()> {
        self.file().flush()
    }
}

impl Drop for AtomicFile {
    fn drop(&mut self) {
        if self.file.take().is_some() {
            let _ = std::fs::remove_file(&self.tmp);
            crate::tempfiles::unregister(&self.tmp);
        }
    }
}

/// Copies `len` bytes from `src`'s current position to `dst`'s current position in constant
/// memory: in-kernel `copy_file_range` through `std::io::copy` (std falls back to read/write
/// where the kernel or filesystem cannot). Returns the bytes copied (less than `len` only
/// when `src` ends). Writeback is left to the kernel (until [`AtomicFile::commit`]'s fsync, if used):
/// kicking it per chunk with `sync_file_range` made a 1 GiB copy 3.7x slower here.
pub fn copy_range(src: &File, dst: &File, len: u64) -> io::Result<u64> {
    use std::io::Read;
    let mut dst_ref = dst;
    io::copy(&mut src.take(len), &mut dst_ref)
}

fn cstr(p: &Path) -> io::Result<CString> {
    CString::new(p.as_os_str().as_bytes())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "path contains a NUL byte"))
}

/// Renames `from` to `to` unless `to` exists (then `ErrorKind::AlreadyExists`), atomically.
pub fn rename_noreplace(from: &Path, to: &Path) -> io::Result<()> {
    let (f, t) = (cstr(from)?, cstr(to)?);
    // SAFETY: both are valid NUL-terminated strings that outlive the call.
    let rc = unsafe {
        libc::renameat2(
            libc::AT_FDCWD,
            f.as_ptr(),
            libc::AT_FDCWD,
            t.as_ptr(),
            libc::RENAME_NOREPLACE,
        )
    };
    if rc == 0 {
        return Ok(());
    }
    let err = io::Error::last_os_error();
    match err.raw_os_error() {
        // filesystems (or kernels) without RENAME_NOREPLACE: link() fails with EEXIST too
        Some(libc::EINVAL) | Some(libc::ENOSYS) | Some(libc::EOPNOTSUPP) => {
            std::fs::hard_link(from, to)?;
            std::fs::remove_file(from)
        }
        _ => Err(err),
    }
}

/// Writes `bytes` to a new file `dest` through [`AtomicFile`] (mode 0600, temporary name,
/// no replacing without `force`). Errors as [`AtomicFile::create`] and [`AtomicFile::commit`].
pub fn write_new_file(dest: &Path, bytes: &[u8], force: bool) -> Result<()> {
    let mut f = AtomicFile::create(dest, force)?;
    f.write_all(bytes)
        .map_err(|e| IsoError::io(format!("cannot write {}", f.temp_path().display()), e))?;
    f.commit()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn new_file_is_0600_and_not_replaced() {
        let d = tempfile::tempdir().unwrap();
        let dir_mode = std::fs::metadata(d.path()).unwrap().permissions().mode();
        let p = d.path().join("node.iso");
        write_new_file(&p, b"one", false).unwrap();
        assert_eq!(std::fs::metadata(&p).unwrap().permissions().mode() & 0o777, 0o600);
        let e = write_new_file(&p, b"two", false).unwrap_err();
        assert!(matches!(e, IsoError::AlreadyExists { .. }));
        assert!(
            e.to_string().contains("--force") && e.to_string().contains("node.iso"),
            "{e}"
        );
        assert_eq!(std::fs::read(&p).unwrap(), b"one");
        write_new_file(&p, b"three", true).unwrap();
        assert_eq!(std::fs::read(&p).unwrap(), b"three");
        assert_eq!(std::fs::metadata(&p).unwrap().permissions().mode() & 0o777, 0o600);
        assert_eq!(
            std::fs::metadata(d.path()).unwrap().permissions().mode(),
            dir_mode,
            "dir not chmod-ed"
        );
        // no temporary files left
        let names: Vec<_> = std::fs::read_dir(d.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, vec![std::ffi::OsString::from("node.iso")]);
    }

    #[test]
    fn race_at_rename_is_refused_and_dropped_file_removed() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("x");
        let mut f = AtomicFile::create(&p, false).unwrap();
        f.write_all(b"mine").unwrap();
        std::fs::write(&p, b"theirs").unwrap(); // someone else created it meanwhile
        assert!(matches!(f.commit().unwrap_err(), IsoError::AlreadyExists { .. }));
        assert_eq!(std::fs::read(&p).unwrap(), b"theirs");
        let g = AtomicFile::create(&d.path().join("y"), false).unwrap();
        let tmp = g.temp_path().to_path_buf();
        assert!(tmp.exists());
        drop(g);
        assert!(!tmp.exists() && !d.path().join("y").exists());
        assert_eq!(std::fs::read_dir(d.path()).unwrap().count(), 1);
    }
}
