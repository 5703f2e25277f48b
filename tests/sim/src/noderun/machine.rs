//! One simulated machine, run as PID 1 of its own PID namespace (and in its own network, mount,
//! UTS and IPC namespaces, made by `unshare` for [`super::run`]): network up, root built, the
//! Ignition laid into it, then the units run ([`Executor`]).
//!
//! The root (a tmpfs at `<machine dir>/root`, seen only inside this mount namespace):
//! `/etc`, `/usr`, `/var`, `/root`, `/opt`, `/home`, `/srv` are overlays whose lower layer is the
//! host's directory and whose upper layer (a tmpfs) gets the Ignition's files, so the host's
//! programs and the node's files sit at the paths the units name and every write stays in the
//! machine; `/tmp` and `/run` are fresh tmpfs; `/proc` is this PID namespace's, `/sys` this
//! network namespace's (so `/sys/class/net/*/address` shows the machine's MAC); every other
//! top-level entry of the host is bind-mounted as it is. The stand-ins ([`super::podman`],
//! the discovery agent, `hostnamectl`) are installed into the upper layer over
//! `/usr/bin/podman`, `/usr/bin/hostnamectl` (`/usr/bin/agent` lives in the node-agent image).
//! Commands run chrooted to that root; the runner itself keeps the host view for the journal.

use std::collections::{BTreeMap, BTreeSet};
use std::ffi::CString;
use std::io::{BufRead, Write};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use super::spec::{Spec, GOAL_MARKER};
use super::systemd::{self, ExecLine, Kind, Planned, State, Timing};

use super::mounts::cstr;
pub use super::mounts::{bind, mount, IMAGE_BASE, NMSTATE_LIB, REAL_BIN, RUN_DIR, SIM_EXE};

/// Top-level host directories the machine gets as overlays (host lower, machine upper).
pub const OVERLAID: &[&str] = &["etc", "usr", "var", "root", "opt", "home", "srv"];

/// Builds the machine root at `root` (see the module docs); `layers` is a directory for the
/// overlays' upper and work dirs. Must run in a private mount namespace.
pub fn build_root(root: &Path, layers: &Path, fresh_proc: bool) -> Result<(), String> {
    mount("tmpfs", root, "tmpfs", 0, Some("mode=0755"))?;
    std::fs::create_dir_all(layers).map_err(|e| format!("mkdir {}: {e}", layers.display()))?;
    mount("tmpfs", layers, "tmpfs", 0, Some("mode=0700"))?;
    let rd = std::fs::read_dir("/").map_err(|e| format!("read /: {e}"))?;
    for e in rd.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let src = Path::new("/").join(&name);
        let dst = root.join(&name);
        let meta = std::fs::symlink_metadata(&src).map_err(|e| format!("{}: {e}", src.display()))?;
        if meta.file_type().is_symlink() {
            let t = std::fs::read_link(&src).map_err(|e| format!("{}: {e}", src.display()))?;
            std::os::unix::fs::symlink(&t, &dst).map_err(|e| format!("symlink {}: {e}", dst.display()))?;
            continue;
        }
        match name.as_str() {
            "proc" => {
                std::fs::create_dir_all(&dst).ok();
                if fresh_proc {
                    mount(
                        "proc",
                        &dst,
                        "proc",
                        libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC,
                        None,
                    )?;
                } else {
                    bind(&src, &dst, false)?;
                }
            }
            "sys" => {
                std::fs::create_dir_all(&dst).ok();
                mount(
                    "sysfs",
                    &dst,
                    "sysfs",
                    libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC,
                    None,
                )?;
            }
            "tmp" => {
                std::fs::create_dir_all(&dst).ok();
                mount("tmpfs", &dst, "tmpfs", 0, Some("mode=1777"))?;
            }
            "run" => {
                std::fs::create_dir_all(&dst).ok();
                mount("tmpfs", &dst, "tmpfs", 0, Some("mode=0755"))?;
            }
            n if OVERLAID.contains(&n) && meta.is_dir() => {
                let up = layers.join("upper").join(n);
                let wk = layers.join("work").join(n);
                std::fs::create_dir_all(&up).map_err(|e| format!("mkdir {}: {e}", up.display()))?;
                std::fs::create_dir_all(&wk).map_err(|e| format!("mkdir {}: {e}", wk.display()))?;
                std::fs::create_dir_all(&dst).ok();
                mount(
                    "overlay",
                    &dst,
                    "overlay",
                    0,
                    Some(&format!(
                        "lowerdir=/{n},upperdir={},workdir={}",
                        up.display(),
                        wk.display()
                    )),
                )?;
            }
            _ if meta.is_dir() => bind(&src, &dst, false)?,
            _ => {} // plain files at / are not part of a live system
        }
    }
    Ok(())
}

fn write_file(root: &Path, path: &str, mode: u32, data: &[u8]) -> Result<(), String> {
    let p = root.join(path.trim_start_matches('/'));
    if let Some(d) = p.parent() {
        std::fs::create_dir_all(d).map_err(|e| format!("mkdir {}: {e}", d.display()))?;
    }
    let _ = std::fs::remove_file(&p);
    std::fs::write(&p, data).map_err(|e| format!("write {path}: {e}"))?;
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(mode))
        .map_err(|e| format!("chmod {path}: {e}"))
}

/// The `hostnamectl` stand-in: `set-hostname NAME` (also `hostname NAME`) sets the UTS name and
/// /etc/hostname; a bare call or `status` prints the name. Anything else fails, naming it.
const HOSTNAMECTL: &str = r#"#!/bin/sh
# hostnamectl stand-in of agent-day2-sim run-node (no systemd-hostnamed here).
case "${1:-status}" in
  set-hostname|hostname)
    [ -n "${2:-}" ] || { echo "hostnamectl: $1 needs a name" >&2; exit 1; }
    [ "$1" = hostname ] && [ -z "${2:-}" ] && { hostname; exit 0; }
    hostname "$2" && printf '%s\n' "$2" >/etc/hostname ;;
  status|--static|--transient) hostname ;;
  *) echo "hostnamectl stand-in (agent-day2-sim run-node): '$*' is not supported" >&2; exit 1 ;;
esac
"#;

/// Lays the Ignition's files and units into the root, the stand-ins, `/etc/hosts` entries and
/// the runner's own files (machine.json for the agent, runner.json for podman).
fn lay_out(spec: &Spec, root: &Path) -> Result<(), String> {
    use base64::Engine;
    let b64 = base64::engine::general_purpose::STANDARD;
    for (path, mode) in &spec.dirs {
        let p = root.join(path.trim_start_matches('/'));
        std::fs::create_dir_all(&p).map_err(|e| format!("mkdir {path}: {e}"))?;
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(*mode))
            .map_err(|e| format!("chmod {path}: {e}"))?;
    }
    for (path, (mode, data)) in &spec.files {
        let bytes = b64.decode(data).map_err(|e| format!("{path}: {e}"))?;
        write_file(root, path, *mode, &bytes)?;
    }
    // Ignition writes units to /etc/systemd/system (with drop-ins merged in our text).
    for (name, (_, text)) in &spec.units {
        let p = format!("/etc/systemd/system/{name}");
        if !spec.files.contains_key(&p) {
            write_file(root, &p, 0o644, text.as_bytes())?;
        }
    }
    for (host, at) in &spec.binds {
        bind(host, &root.join(at.trim_start_matches('/')), true)?;
    }
    bind(&spec.exe, &root.join(SIM_EXE.trim_start_matches('/')), true)?;
    bind(&spec.bin_dir, &root.join(REAL_BIN.trim_start_matches('/')), true)?;
    let nm = spec.bin_dir.join("../nmstate/lib");
    if nm.is_dir() {
        bind(&nm, &root.join(NMSTATE_LIB.trim_start_matches('/')), true)?;
    }
    write_file(
        root,
        "/usr/bin/podman",
        0o755,
        format!("#!/bin/sh\n# podman stand-in of agent-day2-sim run-node\nexec {SIM_EXE} podman \"$@\"\n")
            .as_bytes(),
    )?;
    write_file(root, "/usr/bin/hostnamectl", 0o755, HOSTNAMECTL.as_bytes())?;
    write_file(root, "/etc/hostname", 0o644, b"localhost\n")?;
    // NetworkManager's keyfile directory (RHCOS ships it, root-only; the host here may have no
    // NetworkManager): the ISO's pre-network-manager-config copies the host's keyfiles there.
    let nm = root.join("etc/NetworkManager/system-connections");
    if !nm.is_dir() {
        std::fs::create_dir_all(&nm).map_err(|e| format!("mkdir {}: {e}", nm.display()))?;
        std::fs::set_permissions(&nm, std::fs::Permissions::from_mode(0o700))
            .map_err(|e| format!("chmod {}: {e}", nm.display()))?;
    }
    // RHCOS's default chrony configuration, unless the Ignition brings one.
    if !spec.files.contains_key("/etc/chrony.conf") {
        write_file(
            root,
            "/etc/chrony.conf",
            0o644,
            b"pool 2.rhel.pool.ntp.org iburst\ndriftfile /var/lib/chrony/drift\nmakestep 1.0 3\nrtcsync\n",
        )?;
    }
    // The live system's CA bundle at RHEL's path (RHCOS has it; Debian keeps it elsewhere).
    let bundle = root.join("etc/pki/ca-trust/extracted/pem/tls-ca-bundle.pem");
    if !bundle.exists() {
        let deb = std::fs::read("/etc/ssl/certs/ca-certificates.crt").unwrap_or_default();
        write_file(
            root,
            "/etc/pki/ca-trust/extracted/pem/tls-ca-bundle.pem",
            0o644,
            &deb,
        )?;
    }
    let mut hosts =
        String::from("127.0.0.1 localhost localhost.localdomain\n::1 localhost localhost.localdomain\n");
    for (n, ip) in &spec.hosts {
        hosts.push_str(&format!("{ip} {n}\n"));
    }
    write_file(root, "/etc/hosts", 0o644, hosts.as_bytes())?;
    // The image base: the host's pristine directories (the container images are RHEL; these
    // stand for their OS layer).
    let base = root.join(IMAGE_BASE.trim_start_matches('/'));
    for d in ["usr", "etc"] {
        bind(&Path::new("/").join(d), &base.join(d), true)?;
    }
    let machine = serde_json::json!({
        "mac": spec.mac, "ip": spec.ip.to_string(), "prefix": spec.prefix, "gateway": spec.gateway.to_string(),
        "ifname": spec.ifname, "hardware": spec.hardware, "time_scale": spec.time_scale,
        "root": root,
    });
    write_file(
        root,
        &format!("{RUN_DIR}/machine.json"),
        0o644,
        machine.to_string().as_bytes(),
    )?;
    let runner = serde_json::json!({"images": spec.images, "real_bin": REAL_BIN, "sim_exe": SIM_EXE});
    write_file(
        root,
        &format!("{RUN_DIR}/runner.json"),
        0o644,
        runner.to_string().as_bytes(),
    )?;
    // The discovery agent's view of the machine (the real agent, nsenter, chronyc, journald,
    // the hardware files): super::agent.
    super::agent::machine_setup(spec, root)?;
    Ok(())
}

fn sh(args: &[&str]) -> Result<(), String> {
    let o = Command::new(args[0])
        .args(&args[1..])
        .output()
        .map_err(|e| format!("{}: {e}", args[0]))?;
    if o.status.success() {
        Ok(())
    } else {
        Err(format!(
            "`{}`: {}",
            args.join(" "),
            String::from_utf8_lossy(&o.stderr).trim()
        ))
    }
}

/// `agent-day2-sim node-machine --spec FILE`: the machine's PID 1. Returns the exit code.
pub fn main(spec_path: &Path) -> i32 {
    let spec: Spec = match std::fs::read(spec_path)
        .map_err(|e| e.to_string())
        .and_then(|b| serde_json::from_slice(&b).map_err(|e| e.to_string()))
    {
        Ok(s) => s,
        Err(e) => {
            eprintln!("node-machine: {}: {e}", spec_path.display());
            return 1;
        }
    };
    let label = spec.label.clone();
    // Wait for the parent to move our interface in.
    let mut line = String::new();
    let _ = std::io::stdin().lock().read_line(&mut line);
    let net = || -> Result<(), String> {
        let cidr = format!("{}/{}", spec.ip, spec.prefix);
        sh(&["ip", "link", "set", "lo", "up"])?;
        sh(&["ip", "addr", "add", &cidr, "dev", &spec.ifname])?;
        if let Some((v6, p6)) = spec.ipv6 {
            // nodad: the address is usable at once (no duplicate detection wait).
            sh(&[
                "ip",
                "-6",
                "addr",
                "add",
                &format!("{v6}/{p6}"),
                "dev",
                &spec.ifname,
                "nodad",
            ])?;
        }
        sh(&["ip", "link", "set", &spec.ifname, "up"])?;
        sh(&[
            "ip",
            "route",
            "add",
            "default",
            "via",
            &spec.gateway.to_string(),
            "dev",
            &spec.ifname,
        ])
    };
    if let Err(e) = net() {
        eprintln!("{label}: network setup failed: {e}");
        return 1;
    }
    let name = CString::new("localhost").unwrap();
    // SAFETY: valid buffer; we are in our own UTS namespace.
    unsafe { libc::sethostname(name.as_ptr(), 9) };
    let root = spec.dir.join("root");
    if let Err(e) = build_root(&root, &spec.dir.join("layers"), true) {
        eprintln!("{label}: cannot build the machine root: {e}");
        return 1;
    }
    // A live PXE boot: the live initramfs's steps decide whether Ignition runs (super::livepxe).
    let spec = match spec.live.clone() {
        Some(live) => match super::livepxe::boot(&live, &spec, &root) {
            Ok(true) => spec,
            Ok(false) => super::livepxe::without_ignition(spec),
            Err(e) => {
                println!("{label}: live boot failed: {e}; {} cannot be reached", spec.until);
                return 6;
            }
        },
        None => spec,
    };
    if let Err(e) = lay_out(&spec, &root) {
        eprintln!("{label}: cannot build the machine root: {e}");
        return 1;
    }
    println!(
        "{label}: booted: {} {} {}/{} (gw {}), {} CPUs, {} GiB RAM, disk /dev/vda {} GiB",
        spec.ifname,
        spec.mac,
        spec.ip,
        spec.prefix,
        spec.gateway,
        spec.hardware.cpus,
        spec.hardware.memory_bytes >> 30,
        spec.hardware.disk_bytes >> 30
    );
    // An appliance: upstream's loader applies the config image to the disk before the units
    // run (super::appliance); a failed load stops the machine.
    let spec = match spec.appliance.clone() {
        Some(load) => {
            match super::appliance::load(&label, &root, &spec.dir.join("journal"), &load, &spec.units) {
                Ok(enable) => {
                    let mut spec = spec;
                    for u in enable {
                        if let Some(e) = spec.units.get_mut(&u) {
                            e.0 = Some(true);
                        }
                    }
                    spec
                }
                Err(e) => {
                    println!(
                        "{label}: GOAL FAILED: {} cannot be reached: {} failed: {e}",
                        spec.until,
                        super::appliance::UNIT
                    );
                    return 6;
                }
            }
        }
        None => spec,
    };
    let mut ex = match Executor::new(&spec, root) {
        Ok(e) => e,
        Err(e) => {
            eprintln!("{label}: {e}");
            return 6;
        }
    };
    ex.run()
}

/// Per-unit run state.
struct Run {
    plan: Planned,
    kind: Kind,
    state: State,
    failures: u32,
    /// Commands still to run in this start, in order (pre, main, post).
    queue: Vec<(Phase, ExecLine)>,
    /// The process running now and its phase.
    current: Option<(i32, Phase, bool)>,
    /// Main process of a simple/notify unit (running).
    main_pid: Option<i32>,
    restart_at: Option<Instant>,
    notify: Option<std::os::unix::net::UnixDatagram>,
    notify_deadline: Option<Instant>,
    env: BTreeMap<String, String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    Pre,
    Main,
    Post,
}

/// Runs a machine's transaction: see [`systemd`].
pub struct Executor {
    label: String,
    root: PathBuf,
    journal: PathBuf,
    units: BTreeMap<String, Run>,
    manager_env: BTreeMap<String, String>,
    timing: Timing,
    t0: Instant,
    until: String,
    stay: bool,
    timeout: Duration,
    goal_reached: bool,
    /// Units whose first ExecStart is reported killed as it ends (`run-node --interrupt`).
    interrupt: BTreeSet<String>,
    /// Bytes of the goal unit's journal already echoed to the console.
    goal_echoed: u64,
    /// `run-node --reboot`: after the goal, [`Executor::shutdown`].
    reboot: bool,
    /// Units in the order they became active (the shutdown stops them in reverse).
    started: Vec<String>,
}

impl Executor {
    /// Plans the transaction. Errors: a unit of an unsupported `Type=`.
    pub fn new(spec: &Spec, root: PathBuf) -> Result<Executor, String> {
        let (plan, external) = systemd::transaction(&spec.units);
        let manager_env = systemd::manager_env(&root)?;
        let mut units = BTreeMap::new();
        for (n, p) in plan {
            let kind = systemd::kind(&p.file)?;
            units.insert(
                n,
                Run {
                    plan: p,
                    kind,
                    state: State::Waiting,
                    failures: 0,
                    queue: vec![],
                    current: None,
                    main_pid: None,
                    restart_at: None,
                    notify: None,
                    notify_deadline: None,
                    env: BTreeMap::new(),
                },
            );
        }
        let label = spec.label.clone();
        println!(
            "{label}: {} units in the boot transaction: {}",
            units.len(),
            units.keys().cloned().collect::<Vec<_>>().join(" ")
        );
        let ext: Vec<&String> = external.iter().filter(|e| !e.ends_with(".target")).collect();
        if !ext.is_empty() {
            println!(
                "{label}: provided by the live system (counted as started, not simulated): {}",
                ext.iter().map(|s| s.as_str()).collect::<Vec<_>>().join(" ")
            );
        }
        if !units.contains_key(&spec.until) {
            return Err(format!(
                "the goal unit {} is not in the boot transaction (not enabled and not pulled in by an enabled unit)",
                spec.until
            ));
        }
        Ok(Executor {
            label,
            journal: spec.dir.join("journal"),
            root,
            units,
            manager_env,
            timing: Timing {
                restart_scale: spec.time_scale,
                max_failures: spec.max_failures.max(1),
                notify_timeout: Duration::from_secs(90),
            },
            t0: Instant::now(),
            until: spec.until.clone(),
            stay: spec.stay,
            timeout: Duration::from_secs_f64(spec.timeout_secs),
            goal_reached: false,
            interrupt: spec.interrupt.iter().cloned().collect(),
            goal_echoed: 0,
            reboot: spec.reboot,
            started: Vec::new(),
        })
    }

    fn say(&self, unit: &str, msg: &str) {
        println!("{}: {} {unit}: {msg}", self.label, systemd::stamp(self.t0));
        let _ = std::io::stdout().flush();
    }

    fn journal_path(&self, unit: &str) -> PathBuf {
        self.journal.join(format!("{unit}.log"))
    }

    /// Echoes the goal unit's journal lines written since the last call (complete lines only,
    /// without the runner's `-- ` command headers, which `say` already printed), as
    /// `<label>: [stamp] <unit>: | <line>`.
    fn echo_goal_journal(&mut self) {
        let mut offset = self.goal_echoed;
        self.echo_journal(&self.until, &mut offset);
        self.goal_echoed = offset;
    }

    /// Echoes `unit`'s journal lines written after byte `offset` (advanced), as
    /// [`Self::echo_goal_journal`] does for the goal unit.
    fn echo_journal(&self, unit: &str, offset: &mut u64) {
        for l in new_journal_lines(&self.journal_path(unit), offset) {
            println!("{}: {} {unit}: | {l}", self.label, systemd::stamp(self.t0));
        }
        let _ = std::io::stdout().flush();
    }

    /// Records that `name` became active (once: a restarted unit is stopped once at shutdown).
    fn mark_started(&mut self, name: &str) {
        if !self.started.iter().any(|n| n == name) {
            self.started.push(name.to_string());
        }
    }

    /// The last `n` lines of the journal of every unit that failed or is still activating
    /// (units without journal lines are left out).
    fn open_journals(&self, n: usize) {
        for (name, u) in &self.units {
            if matches!(u.state, State::Failed(_) | State::Activating)
                && std::fs::metadata(self.journal_path(name)).is_ok_and(|m| m.len() > 0)
            {
                self.journal_tail(name, n);
            }
        }
    }

    fn journal_tail(&self, unit: &str, n: usize) {
        let text = std::fs::read_to_string(self.journal_path(unit)).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        let from = lines.len().saturating_sub(n);
        println!(
            "{}: journal of {unit} (last {} lines):",
            self.label,
            lines.len() - from
        );
        for l in &lines[from..] {
            println!("{}:   | {l}", self.label);
        }
    }

    /// Spawns one command of `unit` chrooted to the machine root; returns its pid.
    fn spawn(
        &self,
        unit: &str,
        line: &ExecLine,
        env: &BTreeMap<String, String>,
        notify: Option<&str>,
    ) -> Result<i32, String> {
        let program = if line.program.starts_with('/') {
            line.program.clone()
        } else {
            systemd::EXEC_SEARCH
                .iter()
                .map(|d| format!("{d}/{}", line.program))
                .find(|p| self.root.join(p.trim_start_matches('/')).is_file())
                .ok_or_else(|| {
                    format!(
                        "status=203/EXEC: {} not found in {}",
                        line.program,
                        systemd::EXEC_SEARCH.join(":")
                    )
                })?
        };
        if !self.root.join(program.trim_start_matches('/')).exists() {
            return Err(format!("status=203/EXEC: {program}: No such file or directory"));
        }
        let mut j = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.journal_path(unit))
            .map_err(|e| format!("journal: {e}"))?;
        let _ = writeln!(j, "-- {} {}", systemd::stamp(self.t0), line.argv.join(" "));
        let j2 = j.try_clone().map_err(|e| format!("journal: {e}"))?;
        let mut cmd = Command::new(&program);
        cmd.arg0(&line.argv[0])
            .args(&line.argv[1..])
            .env_clear()
            .envs(env)
            .env("INVOCATION_ID", format!("{:032x}", self.t0.elapsed().as_nanos()))
            .stdin(Stdio::null())
            .stdout(j)
            .stderr(j2);
        if let Some(n) = notify {
            cmd.env("NOTIFY_SOCKET", n);
        }
        let root = cstr(&self.root);
        // SAFETY: chroot/chdir/setsid are async-signal-safe; no allocation after fork.
        unsafe {
            cmd.pre_exec(move || {
                if libc::chroot(root.as_ptr()) != 0 || libc::chdir(c"/".as_ptr()) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                libc::setsid();
                Ok(())
            });
        }
        let child = cmd
            .spawn()
            .map_err(|e| format!("status=203/EXEC: {program}: {e}"))?;
        Ok(child.id() as i32)
    }

    fn start(&mut self, name: &str) {
        let r = &self.units[name];
        match systemd::conditions(&r.plan.file, &self.root) {
            Ok(Some(why)) => {
                self.say(name, &format!("skipped: {why}"));
                self.units.get_mut(name).unwrap().state = State::Skipped(why);
                return;
            }
            Ok(None) => {}
            Err(e) => {
                self.say(name, &format!("FAILED: {e}"));
                self.units.get_mut(name).unwrap().state = State::Failed(e);
                return;
            }
        }
        let env = match systemd::unit_env(&r.plan.file, &self.root, &self.manager_env) {
            Ok(e) => e,
            Err(e) => return self.failed(name, &e),
        };
        let mut queue = Vec::new();
        let mut bad = None;
        for (phase, key) in [
            (Phase::Pre, "ExecStartPre"),
            (Phase::Main, "ExecStart"),
            (Phase::Post, "ExecStartPost"),
        ] {
            for v in r.plan.file.service_all(key) {
                match systemd::parse_exec(&v, name, &env) {
                    Ok(l) => queue.push((phase, l)),
                    Err(e) => bad = Some(format!("{key}: {e}")),
                }
            }
        }
        if let Some(e) = bad {
            return self.failed(name, &e);
        }
        if !queue.iter().any(|(p, _)| *p == Phase::Main) {
            return self.failed(name, "no ExecStart= (systemd refuses the unit)");
        }
        let notify = if r.kind == Kind::Notify {
            let p = self
                .root
                .join(RUN_DIR.trim_start_matches('/'))
                .join(format!("notify/{name}"));
            let _ = std::fs::create_dir_all(p.parent().unwrap());
            let _ = std::fs::remove_file(&p);
            std::os::unix::net::UnixDatagram::bind(&p).ok().inspect(|s| {
                let _ = s.set_nonblocking(true);
            })
        } else {
            None
        };
        let failures = r.failures;
        let u = self.units.get_mut(name).unwrap();
        u.env = env;
        u.queue = queue;
        u.state = State::Activating;
        u.notify = notify;
        u.notify_deadline = None;
        u.restart_at = None;
        self.say(
            name,
            &if failures == 0 {
                "starting".to_string()
            } else {
                format!("starting again (after {failures} failure(s))")
            },
        );
        self.next_command(name);
    }

    /// Runs the next queued command of `name`, or completes the start.
    fn next_command(&mut self, name: &str) {
        loop {
            let u = self.units.get_mut(name).unwrap();
            if u.queue.is_empty() {
                break;
            }
            // A simple/notify unit's ExecStartPost waits for readiness; oneshot runs in order.
            let (phase, line) = u.queue.remove(0);
            let env = u.env.clone();
            let kind = u.kind;
            let notify_path = if phase == Phase::Main && kind == Kind::Notify {
                Some(format!("{RUN_DIR}/notify/{name}"))
            } else {
                None
            };
            match self.spawn(name, &line, &env, notify_path.as_deref()) {
                Ok(pid) => {
                    self.say(
                        name,
                        &format!("{:?} {} (pid {pid})", phase, line.argv.join(" "))
                            .replace("Main ", "ExecStart ")
                            .replace("Pre ", "ExecStartPre ")
                            .replace("Post ", "ExecStartPost "),
                    );
                    let u = self.units.get_mut(name).unwrap();
                    if phase == Phase::Main && kind != Kind::Oneshot {
                        u.main_pid = Some(pid);
                        u.current = None;
                        if kind == Kind::Simple {
                            self.activated(name);
                        } else {
                            let t = self.timing.notify_timeout;
                            self.units.get_mut(name).unwrap().notify_deadline = Some(Instant::now() + t);
                            return;
                        }
                        continue;
                    }
                    u.current = Some((pid, phase, line.ignore_failure));
                    return;
                }
                Err(e) => {
                    if line.ignore_failure {
                        self.say(name, &format!("{e} (ignored: '-')"));
                        continue;
                    }
                    return self.failed(name, &e);
                }
            }
        }
        let u = &self.units[name];
        if u.kind == Kind::Oneshot && u.state == State::Activating {
            let remain = u
                .plan
                .file
                .service_last("RemainAfterExit")
                .map(systemd::parse_bool)
                .unwrap_or(false);
            let u = self.units.get_mut(name).unwrap();
            u.state = if remain { State::Active } else { State::Finished };
            if remain {
                self.mark_started(name);
            }
            self.say(
                name,
                if remain {
                    "finished: active (exited)"
                } else {
                    "finished: inactive (dead)"
                },
            );
            if name == self.until {
                self.goal();
            }
        }
    }

    fn activated(&mut self, name: &str) {
        let u = self.units.get_mut(name).unwrap();
        if u.state == State::Activating {
            u.state = State::Active;
            self.mark_started(name);
        }
        self.say(name, "active (running)");
        if name == self.until {
            self.goal();
        }
    }

    fn goal(&mut self) {
        if !self.goal_reached {
            self.goal_reached = true;
            // The marker `run-node` reads after SIGINT/SIGTERM with --stay (exit 0 only when
            // every machine has one); an empty file, via a temporary file and a rename.
            if let Some(dir) = self.journal.parent() {
                let tmp = dir.join(".goal-reached.tmp");
                let _ = std::fs::write(&tmp, b"").and_then(|()| std::fs::rename(&tmp, dir.join(GOAL_MARKER)));
            }
            println!(
                "{}: {} GOAL reached: {} started successfully",
                self.label,
                systemd::stamp(self.t0),
                self.until
            );
        }
    }

    fn kill_unit(&mut self, name: &str) {
        let u = self.units.get_mut(name).unwrap();
        for pid in [u.main_pid.take(), u.current.take().map(|c| c.0)]
            .into_iter()
            .flatten()
        {
            // SAFETY: plain kill of the process group we made (setsid).
            unsafe {
                libc::kill(-pid, libc::SIGKILL);
                libc::kill(pid, libc::SIGKILL);
            }
        }
    }

    fn failed(&mut self, name: &str, why: &str) {
        self.kill_unit(name);
        let u = self.units.get_mut(name).unwrap();
        u.failures += 1;
        u.queue.clear();
        let n = u.failures;
        let restart = systemd::restarts_on_failure(&u.plan.file);
        let sec = systemd::restart_sec(&u.plan.file).mul_f64(self.timing.restart_scale);
        if name == self.until {
            // Its lines are on the console already; show those written up to the failure.
            self.echo_goal_journal();
            self.say(name, &format!("FAILED ({why}); failure {n}"));
        } else {
            self.say(name, &format!("FAILED ({why}); failure {n}"));
            self.journal_tail(name, 12);
        }
        let u = self.units.get_mut(name).unwrap();
        if restart && n < self.timing.max_failures {
            u.state = State::Activating;
            u.restart_at = Some(Instant::now() + sec);
            self.say(
                name,
                &format!("scheduled restart in {:.1}s (Restart=)", sec.as_secs_f64()),
            );
        } else {
            let reason = if restart {
                format!("{why}; given up after {n} failed starts")
            } else {
                why.to_string()
            };
            u.state = State::Failed(reason);
        }
    }

    fn exited(&mut self, pid: i32, status: i32) {
        let Some(name) = self
            .units
            .iter()
            .find(|(_, u)| u.current.map(|c| c.0) == Some(pid) || u.main_pid == Some(pid))
            .map(|(n, _)| n.clone())
        else {
            return; // an orphan reparented to us
        };
        let desc = describe(status);
        let ok = exited_ok(status);
        let u = self.units.get_mut(&name).unwrap();
        if u.main_pid == Some(pid) {
            u.main_pid = None;
            let always = u.plan.file.service_last("Restart") == Some("always");
            self.say(&name, &format!("main process exited, {desc}"));
            if ok && !always {
                let u = self.units.get_mut(&name).unwrap();
                u.state = State::Finished;
                return;
            }
            return self.failed(&name, &format!("main process {desc}"));
        }
        let (_, phase, ignore) = u.current.take().unwrap();
        if phase == Phase::Main && self.interrupt.remove(&name) {
            // The command did its work; the machine loses it at this moment (power cut,
            // OOM kill) and systemd sees the kill, not the exit status.
            self.say(
                &name,
                &format!("ExecStart ended ({desc}); reported killed (--interrupt)"),
            );
            return self.failed(&name, "ExecStart command killed by signal 9 (--interrupt)");
        }
        if !ok && !ignore {
            return self.failed(
                &name,
                &format!("{phase:?} command {desc}")
                    .replace("Main", "ExecStart")
                    .replace("Pre", "ExecStartPre")
                    .replace("Post", "ExecStartPost"),
            );
        }
        if !ok {
            self.say(&name, &format!("{desc} (ignored: '-')"));
        }
        self.next_command(&name);
    }

    fn poll_notify(&mut self) {
        let names: Vec<String> = self.units.keys().cloned().collect();
        for n in names {
            let u = self.units.get_mut(&n).unwrap();
            let Some(dl) = u.notify_deadline else { continue };
            let mut buf = [0u8; 4096];
            let mut ready = false;
            if let Some(s) = &u.notify {
                while let Ok(k) = s.recv(&mut buf) {
                    if String::from_utf8_lossy(&buf[..k]).lines().any(|l| l == "READY=1") {
                        ready = true;
                    }
                }
            }
            if ready {
                u.notify_deadline = None;
                self.activated(&n);
                self.next_command(&n);
            } else if Instant::now() > dl {
                u.notify_deadline = None;
                self.failed(&n, "start timeout: no READY=1 on NOTIFY_SOCKET (Type=notify)");
            }
        }
    }

    /// The loop; returns the exit code (see [`super`]).
    pub fn run(&mut self) -> i32 {
        loop {
            // Reap every child (we are PID 1: orphans come here too).
            loop {
                let mut st = 0;
                // SAFETY: plain waitpid.
                let pid = unsafe { libc::waitpid(-1, &mut st, libc::WNOHANG) };
                if pid <= 0 {
                    break;
                }
                self.exited(pid, st);
            }
            self.poll_notify();
            self.echo_goal_journal();
            let now = Instant::now();
            let due: Vec<String> = self
                .units
                .iter()
                .filter(|(_, u)| u.restart_at.is_some_and(|t| t <= now))
                .map(|(n, _)| n.clone())
                .collect();
            for n in due {
                self.start(&n);
            }
            let ready: Vec<String> = self
                .units
                .iter()
                .filter(|(_, u)| u.state == State::Waiting)
                .filter(|(_, u)| u.plan.after.iter().all(|a| self.units[a].state.settled()))
                .map(|(n, _)| n.clone())
                .collect();
            for n in ready {
                let failed_req = self.units[&n]
                    .plan
                    .requires
                    .iter()
                    .find(|r| {
                        matches!(self.units[*r].state, State::Failed(_))
                            && self.units[&n].plan.after.contains(*r)
                    })
                    .cloned();
                if let Some(r) = failed_req {
                    let why = format!("dependency failed: {r}");
                    self.say(&n, &format!("FAILED ({why})"));
                    self.units.get_mut(&n).unwrap().state = State::Failed(why);
                } else {
                    self.start(&n);
                }
            }
            if self.goal_reached && !self.stay {
                return if self.reboot { self.shutdown() } else { 0 };
            }
            if let State::Failed(why) = &self.units[&self.until].state {
                println!(
                    "{}: {} GOAL FAILED: {} failed: {why}",
                    self.label,
                    systemd::stamp(self.t0),
                    self.until
                );
                self.print_failures();
                self.open_journals(15);
                return 6;
            }
            // A unit the goal requires (directly or through a unit it requires) that has
            // failed for good: the goal cannot be reached, so waiting for --timeout only hides
            // the cause.
            if !self.goal_reached {
                if let Some((r, why)) = failed_requirement(&self.until, |n| {
                    self.units.get(n).map(|u| (&u.plan.requires, &u.state))
                }) {
                    println!(
                        "{}: {} GOAL FAILED: {} cannot be reached: {r}, which it requires, failed for good: {why}",
                        self.label,
                        systemd::stamp(self.t0),
                        self.until
                    );
                    self.print_failures();
                    self.open_journals(15);
                    return 6;
                }
            }
            if self.t0.elapsed() > self.timeout {
                let open: Vec<String> = self
                    .units
                    .iter()
                    .filter(|(_, u)| !u.state.settled() || u.state == State::Waiting)
                    .map(|(n, u)| {
                        format!(
                            "{n} ({})",
                            if u.state == State::Waiting {
                                "waiting"
                            } else {
                                "activating"
                            }
                        )
                    })
                    .collect();
                println!(
                    "{}: {} TIMEOUT after {:?}: {} not reached; not started: {}",
                    self.label,
                    systemd::stamp(self.t0),
                    self.timeout,
                    self.until,
                    open.join(", ")
                );
                self.echo_goal_journal();
                self.print_failures();
                self.open_journals(15);
                return 5;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// systemd's shutdown before a reboot (`run-node --reboot`): every unit still active is
    /// stopped, the last started first (the reverse of the start order, which follows
    /// `After=`; systemd stops in the reverse of the ordering). Returns 0: the machine
    /// rebooted, whatever the stops did (systemd goes on with the shutdown after a failed or
    /// timed-out stop).
    fn shutdown(&mut self) -> i32 {
        println!(
            "{}: {} REBOOT: shutting down: stopping the active units, the last started first",
            self.label,
            systemd::stamp(self.t0)
        );
        let order: Vec<String> = self
            .started
            .iter()
            .rev()
            .filter(|n| self.units[*n].state == State::Active)
            .cloned()
            .collect();
        for n in order {
            self.stop(&n);
        }
        println!("{}: {} REBOOTED", self.label, systemd::stamp(self.t0));
        0
    }

    /// Stops `name`: its `ExecStop=` commands in order (its environment, journal lines echoed
    /// as they are written), all within `TimeoutStopSec=` (default 90s, `infinity` unbounded;
    /// on the timeout the command's process group is killed), then its processes killed. A
    /// stop command that fails (no `-` prefix) ends the stop, reported.
    fn stop(&mut self, name: &str) {
        let u = &self.units[name];
        let env = u.env.clone();
        // Per ExecStop= command, as systemd.service(5) says; 0 and `infinity`: no limit.
        let timeout = match u.plan.file.service_last("TimeoutStopSec") {
            Some("infinity") => None,
            Some(v) => match systemd::parse_timespan(v) {
                Some(d) if d.is_zero() => None,
                Some(d) => Some(d),
                None => Some(Duration::from_secs(90)),
            },
            None => Some(Duration::from_secs(90)),
        };
        let lines: Vec<Result<ExecLine, String>> = u
            .plan
            .file
            .service_all("ExecStop")
            .iter()
            .map(|v| systemd::parse_exec(v, name, &env))
            .collect();
        let t = Instant::now();
        let mut outcome = String::from("stopped");
        let mut echoed = std::fs::metadata(self.journal_path(name))
            .map(|m| m.len())
            .unwrap_or(0);
        for line in lines {
            let line = match line {
                Ok(l) => l,
                Err(e) => {
                    outcome = format!("stop failed: ExecStop: {e}");
                    break;
                }
            };
            self.say(name, &format!("stopping: ExecStop {}", line.argv.join(" ")));
            let pid = match self.spawn(name, &line, &env, None) {
                Ok(p) => p,
                Err(e) => {
                    outcome = format!("stop failed: {e}");
                    break;
                }
            };
            let started = Instant::now();
            let deadline = timeout.map(|d| started + d);
            let mut next_note = started + Duration::from_secs(10);
            let status = loop {
                let mut st = 0;
                // SAFETY: plain waitpid (we are PID 1: orphans are reaped here too).
                let r = unsafe { libc::waitpid(-1, &mut st, libc::WNOHANG) };
                if r == pid {
                    break Some(st);
                }
                self.echo_journal(name, &mut echoed);
                if r > 0 {
                    continue;
                }
                if deadline.is_some_and(|d| Instant::now() > d) {
                    // SAFETY: plain kill of the process group we made (setsid).
                    unsafe {
                        libc::kill(-pid, libc::SIGKILL);
                        libc::kill(pid, libc::SIGKILL);
                    }
                    let mut st = 0;
                    // SAFETY: plain waitpid of our child.
                    unsafe { libc::waitpid(pid, &mut st, 0) };
                    break None;
                }
                if Instant::now() > next_note {
                    next_note += Duration::from_secs(10);
                    self.say(
                        name,
                        &format!(
                            "still stopping: the reboot waits ({:.0}s)",
                            t.elapsed().as_secs_f64()
                        ),
                    );
                }
                std::thread::sleep(Duration::from_millis(50));
            };
            self.echo_journal(name, &mut echoed);
            match status {
                None => {
                    outcome = format!(
                        "stop timed out after {:.0}s (TimeoutStopSec=): killed",
                        started.elapsed().as_secs_f64()
                    );
                    break;
                }
                Some(st) if !line.ignore_failure && !exited_ok(st) => {
                    outcome = format!("stop failed: ExecStop {}", describe(st));
                    break;
                }
                Some(_) => {}
            }
        }
        self.kill_unit(name);
        let u = self.units.get_mut(name).unwrap();
        u.state = if outcome == "stopped" {
            State::Finished
        } else {
            State::Failed(outcome.clone())
        };
        self.say(name, &format!("{outcome} ({:.1}s)", t.elapsed().as_secs_f64()));
    }

    fn print_failures(&self) {
        let failed: BTreeSet<&String> = self
            .units
            .iter()
            .filter(|(_, u)| matches!(u.state, State::Failed(_)))
            .map(|(n, _)| n)
            .collect();
        for (n, u) in &self.units {
            if let State::Failed(why) = &u.state {
                println!("{}: failed unit {n}: {why}", self.label);
            }
        }
        let _ = failed;
    }
}

/// The first unit (breadth first from `goal`, by name within a level) of `goal`'s
/// `Requires=` closure, `goal` itself left out, that is [`State::Failed`] (given up after its
/// failed starts, or failed without `Restart=`: a state the executor never leaves), with its
/// reason. `unit(name)` gives a unit's `Requires=` within the transaction and its state (None:
/// not in the transaction).
pub fn failed_requirement<'a>(
    goal: &str,
    unit: impl Fn(&str) -> Option<(&'a BTreeSet<String>, &'a State)>,
) -> Option<(String, String)> {
    let mut seen = BTreeSet::from([goal.to_string()]);
    let mut level: Vec<String> = vec![goal.to_string()];
    while !level.is_empty() {
        let mut next = Vec::new();
        for n in &level {
            let Some((requires, _)) = unit(n) else { continue };
            for r in requires {
                if seen.insert(r.clone()) {
                    if let Some((_, State::Failed(why))) = unit(r) {
                        return Some((r.clone(), why.clone()));
                    }
                    next.push(r.clone());
                }
            }
        }
        level = next;
    }
    None
}

/// The complete lines appended to the journal at `path` since byte `*offset`, without the
/// runner's `-- <stamp> <argv>` command headers; `*offset` moves past the last newline read
/// (a line still being written waits for the next call). A missing file gives none.
pub fn new_journal_lines(path: &Path, offset: &mut u64) -> Vec<String> {
    use std::io::{Read, Seek, SeekFrom};
    let Ok(mut f) = std::fs::File::open(path) else {
        return Vec::new();
    };
    let mut buf = Vec::new();
    if f.seek(SeekFrom::Start(*offset)).is_err() || f.read_to_end(&mut buf).is_err() {
        return Vec::new();
    }
    let Some(end) = buf.iter().rposition(|b| *b == b'\n') else {
        return Vec::new();
    };
    *offset += end as u64 + 1;
    String::from_utf8_lossy(&buf[..end])
        .lines()
        .filter(|l| !l.starts_with("-- "))
        .map(String::from)
        .collect()
}

/// "exit status 1" / "killed by signal 9".
/// Whether a wait status is a normal exit with code 0.
fn exited_ok(status: i32) -> bool {
    libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0
}

pub fn describe(status: i32) -> String {
    if libc::WIFEXITED(status) {
        format!("status={}/exit", libc::WEXITSTATUS(status))
    } else if libc::WIFSIGNALED(status) {
        format!("killed by signal {}", libc::WTERMSIG(status))
    } else {
        format!("wait status {status:#x}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_required_unit_failed_for_good_is_found_through_the_requires_chain() {
        let set = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<BTreeSet<String>>();
        let mut units: BTreeMap<String, (BTreeSet<String>, State)> = BTreeMap::new();
        units.insert(
            "agent-add-node.service".into(),
            (
                set(&["agent.service", "apply-host-config.service"]),
                State::Activating,
            ),
        );
        units.insert(
            "agent.service".into(),
            (set(&["agent-register-infraenv.service"]), State::Active),
        );
        units.insert("apply-host-config.service".into(), (set(&[]), State::Active));
        units.insert(
            "agent-register-infraenv.service".into(),
            (set(&[]), State::Finished),
        );
        units.insert("unrelated.service".into(), (set(&[]), State::Failed("x".into())));
        let found = |u: &BTreeMap<String, (BTreeSet<String>, State)>| {
            failed_requirement("agent-add-node.service", |n| u.get(n).map(|(r, s)| (r, s)))
        };
        assert_eq!(
            found(&units),
            None,
            "a failed unit the goal does not require is not its cause"
        );
        units.get_mut("agent-register-infraenv.service").unwrap().1 = State::Activating;
        assert_eq!(found(&units), None, "a unit still restarting may yet start");
        units.get_mut("agent-register-infraenv.service").unwrap().1 =
            State::Failed("ExecStart command status=1/exit; given up after 4 failed starts".into());
        assert_eq!(
            found(&units),
            Some((
                "agent-register-infraenv.service".into(),
                "ExecStart command status=1/exit; given up after 4 failed starts".into()
            ))
        );
        units.get_mut("agent.service").unwrap().1 = State::Failed("main process killed by signal 9".into());
        assert_eq!(
            found(&units).unwrap().0,
            "agent.service",
            "the nearest failed requirement first"
        );
        units.get_mut("agent-add-node.service").unwrap().1 = State::Failed("own".into());
        assert_eq!(
            found(&units).unwrap().0,
            "agent.service",
            "the goal itself is not its own requirement"
        );
    }

    #[test]
    fn new_journal_lines_gives_complete_lines_once_without_headers() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("agent-add-node.service.log");
        let mut off = 0;
        assert!(new_journal_lines(&p, &mut off).is_empty(), "no journal yet");
        let mut f = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&p)
            .unwrap();
        write!(f, "-- [   1.00s] /usr/local/bin/add-node.sh\nadd-node: waiting for the imported cluster\nadd-node: host is insuff").unwrap();
        assert_eq!(
            new_journal_lines(&p, &mut off),
            ["add-node: waiting for the imported cluster"]
        );
        assert!(
            new_journal_lines(&p, &mut off).is_empty(),
            "nothing new, the partial line waits"
        );
        writeln!(f, "icient: x").unwrap();
        assert_eq!(
            new_journal_lines(&p, &mut off),
            ["add-node: host is insufficient: x"]
        );
        assert_eq!(off, std::fs::metadata(&p).unwrap().len());
    }
}
