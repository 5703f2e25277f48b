//! Temporary output files that hold secrets (a node ISO being written holds the pull secret and
//! the node tokens) must not outlive an interrupted run.
//!
//! - [`register`]/[`unregister`]: the one list of temporary paths (files or directories) being
//!   written now. [`crate::iso::output::AtomicFile`] and the add-nodes staging code register
//!   theirs. The first registration installs a SIGINT/SIGTERM handler (a thread of its own, so
//!   it runs while the main thread is busy copying an ISO) that removes every registered path
//!   and exits 130 (SIGINT) or 143 (SIGTERM), the shell's 128 + signal number.
//! - [`remove_stale`]: SIGKILL (or a power loss) cannot be handled, so add-nodes removes, at its
//!   start, the staging files of processes that no longer run, naming them in a warning.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, Once};

static PATHS: Mutex<BTreeSet<PathBuf>> = Mutex::new(BTreeSet::new());
static HANDLER: Once = Once::new();

/// Adds `path` to the paths removed when SIGINT/SIGTERM arrives (installs the handler once).
pub fn register(path: &Path) {
    HANDLER.call_once(install_handler);
    PATHS
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .insert(path.to_path_buf());
}

/// Removes `path` from the list (it was renamed into place or removed by its owner).
pub fn unregister(path: &Path) {
    PATHS.lock().unwrap_or_else(|e| e.into_inner()).remove(path);
}

/// Removes every registered path; returns how many existed.
fn remove_registered() -> usize {
    let paths = std::mem::take(&mut *PATHS.lock().unwrap_or_else(|e| e.into_inner()));
    let mut n = 0;
    // Reverse order: files inside a registered staging directory go before the directory.
    for p in paths.iter().rev() {
        let r = match p.symlink_metadata() {
            // The main thread may still be writing into the directory: removing it in place
            // races with its next file (remove_dir_all fails, or the file lands after it and
            // the directory is left). Renamed first, atomically, to a name nobody writes to,
            // its next file fails to open instead, and the renamed tree is removed whole.
            Ok(m) if m.is_dir() => {
                let mut gone = p.clone().into_os_string();
                gone.push(format!(".removing-{}", std::process::id()));
                let gone = PathBuf::from(gone);
                std::fs::rename(p, &gone).and_then(|()| std::fs::remove_dir_all(&gone))
            }
            Ok(_) => std::fs::remove_file(p),
            Err(_) => continue,
        };
        if r.is_ok() {
            n += 1;
        }
    }
    n
}

fn install_handler() {
    let (tx, rx) = std::sync::mpsc::channel::<()>();
    let spawned = std::thread::Builder::new().name("signals".into()).spawn(move || {
        use tokio::signal::unix::{signal, SignalKind};
        let Ok(rt) = tokio::runtime::Builder::new_current_thread().enable_io().build() else {
            let _ = tx.send(());
            return;
        };
        rt.block_on(async move {
            let (Ok(mut int), Ok(mut term)) =
                (signal(SignalKind::interrupt()), signal(SignalKind::terminate()))
            else {
                let _ = tx.send(());
                return;
            };
            // The handlers are in place: the caller may start writing.
            let _ = tx.send(());
            let (code, name) = tokio::select! {
                _ = int.recv() => (130, "interrupted"),
                _ = term.recv() => (143, "terminated"),
            };
            let n = remove_registered();
            crate::say!("error: {name}; removed {n} temporary file(s) holding secrets; nothing was written");
            std::process::exit(code);
        });
    });
    if spawned.is_ok() {
        let _ = rx.recv();
    }
}

/// Whether process `pid` runs (signal 0 reaches it, or it exists but belongs to someone else).
fn pid_alive(pid: u32) -> bool {
    let Ok(p) = libc::pid_t::try_from(pid) else {
        return false;
    };
    if p <= 0 {
        return false;
    }
    // SAFETY: kill with signal 0 only checks for existence and permission.
    let r = unsafe { libc::kill(p, 0) };
    r == 0 || std::io::Error::last_os_error().raw_os_error() == Some(libc::EPERM)
}

/// The PID in one of our temporary names: `.<name>.staging-<pid>` (add-nodes outputs, PXE
/// staging directories `.staging-<pid>`) or `.<name>.tmp-<pid>-<n>` ([`crate::iso::output`]).
pub fn staging_pid(name: &str) -> Option<u32> {
    if !name.starts_with('.') {
        return None;
    }
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    if let Some(i) = name.rfind(".tmp-") {
        let rest = &name[i + 5..];
        if let Some((pid, n)) = rest.split_once('-') {
            if digits(pid) && digits(n) {
                return pid.parse().ok();
            }
        }
    }
    if let Some(i) = name.rfind("staging-") {
        let pid = &name[i + 8..];
        if (i == 1 || name[..i].ends_with('.')) && digits(pid) {
            return pid.parse().ok();
        }
    }
    None
}

/// Removes the temporary files and staging directories left in `dirs` (not recursive) by
/// processes that no longer run; returns the removed paths for the caller's warning. Files of
/// running processes (another add-nodes writing to the same directory) are left alone.
pub fn remove_stale(dirs: &[PathBuf]) -> Vec<PathBuf> {
    let me = std::process::id();
    let mut removed = Vec::new();
    for dir in dirs {
        let Ok(entries) = std::fs::read_dir(dir) else {
            continue;
        };
        for e in entries.flatten() {
            let name = e.file_name();
            let Some(pid) = name.to_str().and_then(staging_pid) else {
                continue;
            };
            if pid == me || pid_alive(pid) {
                continue;
            }
            let p = e.path();
            let r = match e.file_type() {
                Ok(t) if t.is_dir() => std::fs::remove_dir_all(&p),
                Ok(_) => std::fs::remove_file(&p),
                Err(_) => continue,
            };
            if r.is_ok() {
                removed.push(p);
            }
        }
    }
    removed
}

/// [`remove_stale`], then one `warning:` line naming what was removed (add-nodes calls this
/// at its start for DIR and DIR/boot-artifacts: what an interrupted run, SIGKILL or a power
/// loss, left there are secrets under temporary names).
pub fn remove_stale_with_warning(dirs: &[PathBuf]) {
    let stale = remove_stale(dirs);
    if !stale.is_empty() {
        let names: Vec<String> = stale.iter().map(|p| p.display().to_string()).collect();
        crate::say!(
            "warning: removed temporary files of an interrupted add-nodes run (its process no longer runs): {}",
            names.join(", ")
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The SIGINT path while the main thread keeps writing into the staging directory (the
    /// breaker's interrupted `migrate export` left `.out.tmp-*/api/…` behind): nothing stays.
    #[test]
    fn a_directory_being_written_is_removed_whole() {
        let d = tempfile::tempdir().unwrap();
        for round in 0..20 {
            let tmp = d.path().join(format!(".out.tmp-1-{round}"));
            std::fs::create_dir(&tmp).unwrap();
            PATHS.lock().unwrap().insert(tmp.clone());
            let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
            let writer = {
                let (tmp, stop) = (tmp.clone(), stop.clone());
                std::thread::spawn(move || {
                    let mut i = 0;
                    while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                        // As BundleWriter: one level at a time, never recursive.
                        let sub = tmp.join(format!("d{i}"));
                        let _ = std::fs::create_dir(&sub);
                        let _ = std::fs::write(sub.join("f"), b"secret");
                        i += 1;
                    }
                })
            };
            std::thread::sleep(std::time::Duration::from_millis(2));
            assert!(remove_registered() >= 1, "round {round}");
            stop.store(true, std::sync::atomic::Ordering::Relaxed);
            writer.join().unwrap();
            let left: Vec<_> = std::fs::read_dir(d.path())
                .unwrap()
                .map(|e| e.unwrap().file_name())
                .collect();
            assert!(left.is_empty(), "round {round}: {left:?}");
        }
    }

    #[test]
    fn staging_names_give_their_pid() {
        assert_eq!(staging_pid(".node.x86_64.iso.staging-123"), Some(123));
        assert_eq!(staging_pid("..node.x86_64.iso.staging-123.tmp-123-0"), Some(123));
        assert_eq!(staging_pid(".staging-77"), Some(77));
        assert_eq!(staging_pid(".agentconfig.noarch.iso.tmp-9-12"), Some(9));
        for n in [
            "node.x86_64.iso",
            ".staging-",
            ".x.staging-12a",
            "staging-1",
            ".mystaging-1",
            ".x.tmp-1",
        ] {
            assert_eq!(staging_pid(n), None, "{n}");
        }
    }

    #[test]
    fn stale_files_of_dead_processes_go_live_ones_stay() {
        let d = tempfile::tempdir().unwrap();
        // A child that has exited and been reaped: its PID runs no more (reuse is unlikely
        // within the test).
        let mut c = std::process::Command::new("true").spawn().unwrap();
        let dead = c.id();
        c.wait().unwrap();
        let stale = d.path().join(format!(".node.x86_64.iso.staging-{dead}"));
        std::fs::write(&stale, "secret").unwrap();
        let stale_dir = d.path().join(format!(".staging-{dead}"));
        std::fs::create_dir(&stale_dir).unwrap();
        std::fs::write(stale_dir.join("x"), "secret").unwrap();
        let mine = d
            .path()
            .join(format!(".node.x86_64.iso.staging-{}", std::process::id()));
        std::fs::write(&mine, "").unwrap();
        let other = d.path().join("node.x86_64.iso");
        std::fs::write(&other, "").unwrap();
        let mut removed = remove_stale(&[d.path().to_path_buf()]);
        removed.sort();
        let mut want = vec![stale.clone(), stale_dir.clone()];
        want.sort();
        assert_eq!(removed, want);
        assert!(!stale.exists() && !stale_dir.exists() && mine.exists() && other.exists());
    }
}
