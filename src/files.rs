//! Reading files the user names (`--nodes-config`, `--ssh-key-path`, `--network-config-path`,
//! `--registry-config`, kubeconfigs and the certificate/key files of the kube flags) with a
//! size cap, so `--nodes-config /dev/zero` is an error naming the flag instead of an
//! out-of-memory kill (exit 137).
//!
//! One rule for every such file: it must be a regular file (not a device, FIFO, socket or
//! directory), at most `max_bytes` long (checked on the metadata before reading *and* while
//! reading, since a file can grow in between), and, for text, valid UTF-8. Callers wrap the
//! [`InputFileError`] in the error variant of their exit code (3 for inputs, 4 for kubeconfig).
//!
//! Also where the plugin keeps its caches ([`cache_root`]).

use std::fmt;
use std::io::Read;
use std::os::unix::fs::FileTypeExt;
use std::path::{Path, PathBuf};

/// Cap of a nodes-config file: 8 MiB (hundreds of hosts with NMState fit in well under 1 MiB).
pub const MAX_NODES_CONFIG: u64 = 8 << 20;
/// Cap of an SSH key, an NMState file, a registry config, a certificate or a key: 1 MiB.
pub const MAX_KEY_FILE: u64 = 1 << 20;
/// Cap of one kubeconfig file: 8 MiB.
pub const MAX_KUBECONFIG: u64 = 8 << 20;

/// Why a user-given file could not be read. Display: `cannot read <path> (from <what>): <why>`,
/// with the advice of the case (`give a regular file`, the cap in bytes).
#[derive(Debug)]
pub struct InputFileError {
    /// The file as given.
    pub path: String,
    /// The flag or field it came from, e.g. `--nodes-config`.
    pub what: String,
    /// The reason, without the path.
    pub reason: String,
}

impl fmt::Display for InputFileError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "cannot read {} (from {}): {}",
            self.path, self.what, self.reason
        )
    }
}

impl std::error::Error for InputFileError {}

/// `No such file or directory` without Rust's ` (os error 2)`: an I/O error as messages show it.
pub fn io_reason(e: &std::io::Error) -> String {
    let s = e.to_string();
    match s.find(" (os error") {
        Some(i) => s[..i].to_string(),
        None => s,
    }
}

fn kind_name(ft: &std::fs::FileType) -> Option<&'static str> {
    if ft.is_file() {
        None
    } else if ft.is_dir() {
        Some("a directory")
    } else if ft.is_char_device() {
        Some("a character device")
    } else if ft.is_block_device() {
        Some("a block device")
    } else if ft.is_fifo() {
        Some("a FIFO (pipe)")
    } else if ft.is_socket() {
        Some("a socket")
    } else {
        Some("not a regular file")
    }
}

/// Checks that `path` is a regular file of at most `max_bytes` without reading it (for files
/// another library reads later, e.g. a kubeconfig `tokenFile`).
/// Errors: missing/unreadable, not a regular file, too large.
pub fn check_input_file(path: &Path, max_bytes: u64, what: &str) -> Result<(), InputFileError> {
    let err = |reason: String| InputFileError {
        path: path.display().to_string(),
        what: what.to_string(),
        reason,
    };
    let md = std::fs::metadata(path).map_err(|e| err(io_reason(&e)))?;
    if let Some(k) = kind_name(&md.file_type()) {
        return Err(err(format!("it is {k}; give a regular file")));
    }
    if md.len() > max_bytes {
        return Err(err(format!(
            "it is {} bytes, more than the {max_bytes} bytes allowed here",
            md.len()
        )));
    }
    Ok(())
}

/// Reads a user-given file of at most `max_bytes` bytes (see the module doc for the rules).
/// Errors name `path` and `what`: missing/unreadable, not a regular file, larger than the cap.
pub fn read_input_bytes(path: &Path, max_bytes: u64, what: &str) -> Result<Vec<u8>, InputFileError> {
    let err = |reason: String| InputFileError {
        path: path.display().to_string(),
        what: what.to_string(),
        reason,
    };
    // Checked before opening, so opening a FIFO does not block waiting for a writer.
    check_input_file(path, max_bytes, what)?;
    let f = std::fs::File::open(path).map_err(|e| err(io_reason(&e)))?;
    // Checked again on the opened file: the path may have been replaced in between.
    let md = f.metadata().map_err(|e| err(io_reason(&e)))?;
    if let Some(k) = kind_name(&md.file_type()) {
        return Err(err(format!("it is {k}; give a regular file")));
    }
    let mut out = Vec::with_capacity(md.len().min(max_bytes) as usize);
    f.take(max_bytes + 1)
        .read_to_end(&mut out)
        .map_err(|e| err(io_reason(&e)))?;
    if out.len() as u64 > max_bytes {
        return Err(err(format!("it is more than the {max_bytes} bytes allowed here")));
    }
    Ok(out)
}

/// [`read_input_bytes`] for text files: the content must be UTF-8 (error names the byte offset).
pub fn read_input_file(path: &Path, max_bytes: u64, what: &str) -> Result<String, InputFileError> {
    let bytes = read_input_bytes(path, max_bytes, what)?;
    String::from_utf8(bytes).map_err(|e| InputFileError {
        path: path.display().to_string(),
        what: what.to_string(),
        reason: format!(
            "it is not UTF-8 text (invalid byte at offset {})",
            e.utf8_error().valid_up_to()
        ),
    })
}

/// The plugin's cache directory (base ISOs, release metadata): `$XDG_CACHE_HOME/agent-day2`
/// (an absolute XDG_CACHE_HOME only, as the XDG Base Directory spec says), else
/// `$HOME/.cache/agent-day2`. None without either. One rule for every cache of the plugin.
pub fn cache_root() -> Option<PathBuf> {
    let xdg = std::env::var_os("XDG_CACHE_HOME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from);
    xdg.filter(|p| p.is_absolute())
        .or_else(|| {
            std::env::var_os("HOME")
                .filter(|v| !v.is_empty())
                .map(|h| PathBuf::from(h).join(".cache"))
        })
        .map(|p| p.join("agent-day2"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn devices_dirs_and_fifos_are_refused_without_reading() {
        let e = read_input_file(Path::new("/dev/zero"), 10, "--nodes-config").unwrap_err();
        assert!(
            e.to_string()
                .contains("/dev/zero (from --nodes-config): it is a character device"),
            "{e}"
        );
        let d = tempfile::tempdir().unwrap();
        let e = read_input_file(d.path(), 10, "--ssh-key-path").unwrap_err();
        assert!(e.to_string().contains("a directory"), "{e}");
        let fifo = d.path().join("fifo");
        assert!(std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap()
            .success());
        // Would block forever if it were opened before the check.
        let e = read_input_file(&fifo, 10, "--kubeconfig").unwrap_err();
        assert!(e.to_string().contains("FIFO"), "{e}");
    }

    #[test]
    fn size_cap_utf8_and_missing_files() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("f");
        std::fs::write(&p, "0123456789").unwrap();
        assert_eq!(read_input_file(&p, 10, "x").unwrap(), "0123456789");
        let e = read_input_file(&p, 9, "--network-config-path").unwrap_err();
        assert!(e.to_string().contains("10 bytes, more than the 9 bytes"), "{e}");
        std::fs::write(&p, b"ok\xff").unwrap();
        let e = read_input_file(&p, 10, "x").unwrap_err();
        assert!(
            e.to_string().contains("not UTF-8") && e.to_string().contains("offset 2"),
            "{e}"
        );
        assert_eq!(read_input_bytes(&p, 10, "x").unwrap(), b"ok\xff");
        let e = read_input_file(&d.path().join("nope"), 10, "--registry-config").unwrap_err();
        assert_eq!(
            e.to_string(),
            format!(
                "cannot read {}/nope (from --registry-config): No such file or directory",
                d.path().display()
            )
        );
    }
}
