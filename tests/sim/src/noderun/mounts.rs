//! Inside a simulated machine: the paths the runner uses and mount(2)/bind mounts with errors
//! that name what went where. A leaf of `noderun`: the machine, the agent stand-in, the live
//! PXE steps and podman all use it.

use std::ffi::CString;
use std::path::Path;

/// Inside the machine: where the runner keeps its own files (machine.json, podman state,
/// notify sockets, the image base).
pub const RUN_DIR: &str = "/run/agent-day2-sim";
/// Inside the machine: the simulator binary (a bind of the host's).
pub const SIM_EXE: &str = "/usr/libexec/agent-day2-sim/agent-day2-sim";
/// Inside the machine: the real binaries (a bind of `--bin-dir`).
pub const REAL_BIN: &str = "/usr/libexec/agent-day2-sim/real";
/// Inside the machine: libnmstate of the real binaries' build (`<bin>/../nmstate/lib`).
pub const NMSTATE_LIB: &str = "/usr/libexec/agent-day2-sim/nmstate";
/// Inside the machine: the pristine host directories the container images are built from.
pub const IMAGE_BASE: &str = "/run/agent-day2-sim/image-base";

/// `p` as a C string (paths hold no NUL).
pub fn cstr(p: &Path) -> CString {
    CString::new(p.as_os_str().as_encoded_bytes()).expect("path without NUL")
}

/// mount(2) with an error naming what was mounted where.
pub fn mount(
    src: &str,
    target: &Path,
    fstype: &str,
    flags: libc::c_ulong,
    data: Option<&str>,
) -> Result<(), String> {
    let s = CString::new(src).unwrap();
    let t = cstr(target);
    let f = CString::new(fstype).unwrap();
    let d = data.map(|d| CString::new(d).unwrap());
    // SAFETY: valid NUL-terminated strings for the duration of the call.
    let r = unsafe {
        libc::mount(
            s.as_ptr(),
            t.as_ptr(),
            if fstype.is_empty() {
                std::ptr::null()
            } else {
                f.as_ptr()
            },
            flags,
            d.as_ref()
                .map(|d| d.as_ptr() as *const libc::c_void)
                .unwrap_or(std::ptr::null()),
        )
    };
    if r != 0 {
        return Err(format!(
            "mount {src} on {} ({fstype}{}): {}",
            target.display(),
            data.map(|d| format!(", {d}")).unwrap_or_default(),
            std::io::Error::last_os_error()
        ));
    }
    Ok(())
}

/// Bind-mounts `src` (file or directory, recursively) onto `dst`, creating `dst`.
pub fn bind(src: &Path, dst: &Path, read_only: bool) -> Result<(), String> {
    let meta = std::fs::metadata(src).map_err(|e| format!("bind source {}: {e}", src.display()))?;
    if meta.is_dir() {
        std::fs::create_dir_all(dst).map_err(|e| format!("mkdir {}: {e}", dst.display()))?;
    } else {
        if let Some(p) = dst.parent() {
            std::fs::create_dir_all(p).map_err(|e| format!("mkdir {}: {e}", p.display()))?;
        }
        if !dst.exists() {
            std::fs::write(dst, b"").map_err(|e| format!("create {}: {e}", dst.display()))?;
        }
    }
    let s = src.to_string_lossy().into_owned();
    mount(&s, dst, "", libc::MS_BIND | libc::MS_REC, None)?;
    if read_only {
        mount(
            "none",
            dst,
            "",
            libc::MS_BIND | libc::MS_REMOUNT | libc::MS_RDONLY | libc::MS_REC,
            None,
        )?;
    }
    Ok(())
}
