//! Private network namespaces for end-to-end runs.
//!
//! Inside a fresh network namespace only `lo` exists, down. Bringing it up and adding
//! `192.168.111.1/24` makes the kernel add a `local 192.168.111.0/24` route, so every address of
//! the machine network (API .5, control plane .20-.22, new nodes .30+) is bindable, and no
//! packet can leave the namespace. The IPv6 /64 does the same for dual-stack scenarios.

use std::process::Command;

/// IPv4 address (with prefix) put on `lo`: the whole machine network becomes local.
pub const MACHINE_NET_V4: &str = "192.168.111.1/24";
/// IPv6 address (with prefix) put on `lo` for dual-stack scenarios.
pub const MACHINE_NET_V6: &str = "fd2e:6f44:5dd8:c956::1/64";
/// Set by `agent-day2-sim netns` for the command it runs: "we are inside a prepared namespace".
pub const ENV_MARK: &str = "AGENT_DAY2_NETNS";

fn errno() -> std::io::Error {
    std::io::Error::last_os_error()
}

/// Moves the calling thread into a new network namespace (`unshare(CLONE_NEWNET)`, needs
/// CAP_SYS_ADMIN, i.e. root). Allowed in multi-threaded processes; only this thread moves, and
/// processes it spawns afterwards inherit the namespace.
pub fn unshare_net_as_root() -> std::io::Result<()> {
    // SAFETY: plain syscall wrapper, no memory passed.
    if unsafe { libc::unshare(libc::CLONE_NEWNET) } != 0 {
        return Err(errno());
    }
    Ok(())
}

/// Non-root: a new user namespace (mapping our uid/gid to root inside) plus a new network
/// namespace. The kernel refuses CLONE_NEWUSER in a multi-threaded process, so call this
/// before any thread (tokio runtime, ...) is started.
pub fn unshare_user_and_net() -> std::io::Result<()> {
    // SAFETY: getuid/getgid cannot fail.
    let (uid, gid) = unsafe { (libc::getuid(), libc::getgid()) };
    // SAFETY: plain syscall wrapper.
    if unsafe { libc::unshare(libc::CLONE_NEWUSER | libc::CLONE_NEWNET) } != 0 {
        return Err(errno());
    }
    // Unprivileged gid_map needs setgroups denied first (user_namespaces(7)).
    std::fs::write("/proc/self/setgroups", "deny")?;
    std::fs::write("/proc/self/uid_map", format!("0 {uid} 1"))?;
    std::fs::write("/proc/self/gid_map", format!("0 {gid} 1"))?;
    Ok(())
}

fn ip(args: &[&str]) -> Result<(), String> {
    let out = Command::new("ip")
        .args(args)
        .output()
        .map_err(|e| format!("cannot run `ip {}`: {e} (install iproute2)", args.join(" ")))?;
    if !out.status.success() {
        return Err(format!(
            "`ip {}` failed: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    Ok(())
}

/// In the current (fresh) namespace: `lo` up, the machine network's IPv4 /24 and IPv6 /64 on
/// it. Errors name the failing `ip` command. IPv6 failing (disabled in the kernel) is tolerated
/// and reported on stderr, since only dual-stack scenarios need it.
pub fn setup_loopback() -> Result<(), String> {
    ip(&["link", "set", "lo", "up"])?;
    ip(&["addr", "add", MACHINE_NET_V4, "dev", "lo"])?;
    if let Err(e) = ip(&["-6", "addr", "add", MACHINE_NET_V6, "dev", "lo"]) {
        eprintln!("agent-day2-sim netns: IPv6 machine network not available: {e}");
    }
    Ok(())
}

/// `agent-day2-sim netns -- CMD ARGS...`: new namespace (root: network only; otherwise user +
/// network), loopback set up, `AGENT_DAY2_NETNS=1`, then exec CMD. Returns only on error.
pub fn run_in_new_netns(cmd: &[String]) -> anyhow::Error {
    use std::os::unix::process::CommandExt;
    let Some((prog, args)) = cmd.split_first() else {
        return anyhow::anyhow!("netns: give the command to run after `--`");
    };
    // SAFETY: geteuid cannot fail.
    let root = unsafe { libc::geteuid() } == 0;
    let r = if root {
        unshare_net_as_root()
    } else {
        unshare_user_and_net()
    };
    if let Err(e) = r {
        return anyhow::anyhow!(
            "netns: cannot create a network namespace ({e}); as non-root this needs unprivileged \
             user namespaces (sysctl kernel.unprivileged_userns_clone=1)"
        );
    }
    if let Err(e) = setup_loopback() {
        return anyhow::anyhow!("netns: {e}");
    }
    let err = Command::new(prog).args(args).env(ENV_MARK, "1").exec();
    anyhow::anyhow!("netns: cannot run {prog}: {err}")
}
