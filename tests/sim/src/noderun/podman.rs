//! The `podman` stand-in of the node runner (`/usr/bin/podman` inside a machine).
//!
//! It runs the release payload's component images as the units ask, with the REAL binaries:
//! the image pull spec is mapped to a role (`run-node --image ROLE=PULLSPEC`; nothing else is
//! pullable), and the role's image layout is rebuilt as a container root of its own:
//!
//! - `api-server` (agent-installer-api-server; facts from assisted-service's
//!   `Dockerfile.assisted-service.ocp`): `/assisted-service` (the default command),
//!   `/usr/local/bin/agent-installer-client` (and the
//!   `/agent-based-installer-register-cluster-and-infraenv` link), `/start_db.sh` in the working
//!   directory `/`, a PostgreSQL data directory initialised by the `postgres` user in
//!   `/tmp/postgres/data` (trust authentication, as `initdb` makes it), `/data` (mode 0775),
//!   no `USER` (root), `GODEBUG=madvdontneed=1`, `GOGC=50`. PostgreSQL is Debian's, linked as
//!   `/usr/bin/{pg_ctl,postgres,initdb,createuser,createdb,psql}` (RHEL's paths), so it refuses
//!   root itself. `start_db.sh` is ours, written from what the image's script does: start the
//!   server, create the superuser role `admin` and the database `installer` (fixed names; the
//!   image's script reads no `POSTGRESQL_*`), stop it and run it in the foreground with its
//!   socket in `/tmp`.
//! - `node-agent` (agent-installer-node-agent; facts from assisted-installer-agent's
//!   `Dockerfile.ocp`): `/usr/bin/agent`, the REAL agent binary (`scripts/real-components.sh
//!   agent`), with the image's links `next_step_runner`, `inventory`, `free_addresses`,
//!   `disk_speed_check`, `logs_sender` to it (it acts by the name it is called as), so the
//!   step containers the agent starts (`podman run <this image> inventory`, ...) run the real
//!   code. Three of the image's tools are stood in ([`super::agent`] says why): `fio` (would
//!   write the installation disk), `nmap` (would scan the LAN), `nsenter` (would leave the
//!   machine's root). Without a built agent, `/usr/bin/agent` is the discovery agent stand-in
//!   of [`super::agent`]. As podman does for a host-network container, the machine's
//!   `/etc/hosts` and `/etc/resolv.conf` are the container's.
//! - `installer` (agent-installer-orchestrator: assisted-installer), the image the service
//!   names in the install step, known as `INSTALLER_IMAGE` of the image's agent-images.env
//!   (no `--image` needed): its entrypoint `/usr/bin/installer` is stood in (it would write
//!   the OS to the disk and reboot): it says so and keeps running, as the installer does.
//!
//! `podman images IMAGE` lists an image the stand-in can run (so the install step pulls
//! nothing); `podman ps` lists running containers (`--format '{{.Names}}'`, `--quiet`,
//! `--filter name=...` as the agent's steps use them).
//!
//! The OS layer of both images is the host's `/usr` and `/etc` (Debian, not RHEL 9): a
//! container sees none of the machine's own files unless a `-v` bind gives them, as with the
//! real podman. Only the commands the image is known to run are run; any other command, image,
//! option, network mode or subcommand fails with exit 125 (127 for an unknown command) and a
//! message naming it. Containers share the machine's network (`--net host`, or a pod created
//! with `--network host`) and PID namespace; the pod's infra container is not run.

use std::collections::BTreeMap;
use std::ffi::CString;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicI32, Ordering};
use std::time::{Duration, Instant};

use super::machine::{bind, mount, IMAGE_BASE, RUN_DIR};

fn state_dir() -> PathBuf {
    Path::new(RUN_DIR).join("podman")
}

/// A podman error: exit code and message (podman's own wording where it matters).
type Fail = (i32, String);

fn fail<T>(code: i32, msg: impl Into<String>) -> Result<T, Fail> {
    Err((code, msg.into()))
}

/// `agent-day2-sim podman ARGS...`: returns the exit code.
pub fn main(args: &[String]) -> i32 {
    match dispatch(args) {
        Ok(c) => c,
        Err((code, msg)) => {
            eprintln!("Error: {msg}");
            eprintln!(
                "(podman stand-in of agent-day2-sim run-node: podman {})",
                args.join(" ")
            );
            code
        }
    }
}

fn dispatch(args: &[String]) -> Result<i32, Fail> {
    let mut i = 0;
    // Global options.
    while i < args.len() && args[i].starts_with('-') {
        let a = &args[i];
        if a.starts_with("--log-level") {
            i += if a.contains('=') { 1 } else { 2 };
            continue;
        }
        return fail(125, format!("global option {a} is not supported by the stand-in"));
    }
    let Some(sub) = args.get(i) else {
        return fail(125, "missing command");
    };
    let rest = &args[i + 1..];
    match sub.as_str() {
        "run" => run(rest),
        "rm" => rm(rest),
        "stop" | "kill" => stop(rest, sub == "kill"),
        "pod" => pod(rest),
        "pull" => {
            let img = rest.iter().find(|a| !a.starts_with('-')).ok_or((125, "pull needs an image".to_string()))?;
            role_of(img)?;
            println!("{img}");
            Ok(0)
        }
        "ps" => ps(rest),
        "images" => images(rest),
        "version" | "--version" => {
            println!("podman version 5.0.0 (agent-day2-sim stand-in)");
            Ok(0)
        }
        other => fail(125, format!("podman {other}: subcommand not supported by the stand-in (run, rm, stop, kill, pod, pull, ps, images)")),
    }
}

/// `podman ps [-a] [--quiet] [--format '{{.Names}}'] [--filter name=RE]` (the discovery
/// agent's steps ask whether their container already runs): running containers (all with
/// `-a`); `--quiet` prints IDs (here: names), `--format '{{.Names}}'` names, otherwise
/// `NAME\tSTATE`. A `name=` filter matches as a substring, or anchored by `^`/`$`, as
/// podman's regular expression does for the agents' patterns.
fn ps(args: &[String]) -> Result<i32, Fail> {
    let (mut all, mut names_only) = (false, false);
    let mut filter: Option<String> = None;
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let (k, v) = match a.split_once('=') {
            Some((k, v)) if k.starts_with("--") => (k.to_string(), Some(v.to_string())),
            _ => (a.clone(), None),
        };
        match k.as_str() {
            "-a" | "--all" => all = true,
            "-q" | "--quiet" => names_only = true,
            "--noheading" => {}
            "--format" => {
                let f = v.or_else(|| it.next().cloned()).unwrap_or_default();
                if f.trim() != "{{.Names}}" {
                    return fail(
                        125,
                        format!("ps --format {f:?}: only {{{{.Names}}}} is supported by the stand-in"),
                    );
                }
                names_only = true;
            }
            "-f" | "--filter" => {
                let f = v.or_else(|| it.next().cloned()).unwrap_or_default();
                match f.strip_prefix("name=") {
                    Some(n) => filter = Some(n.to_string()),
                    None => {
                        return fail(
                            125,
                            format!("ps --filter {f:?}: only name= is supported by the stand-in"),
                        )
                    }
                }
            }
            s => return fail(125, format!("ps option {s} is not supported by the stand-in")),
        }
    }
    let matches = |n: &str| match &filter {
        None => true,
        Some(f) => {
            let (a, f) = f
                .strip_prefix('^')
                .map(|r| (true, r))
                .unwrap_or((false, f.as_str()));
            let (z, f) = f.strip_suffix('$').map(|r| (true, r)).unwrap_or((false, f));
            match (a, z) {
                (true, true) => n == f,
                (true, false) => n.starts_with(f),
                (false, true) => n.ends_with(f),
                (false, false) => n.contains(f),
            }
        }
    };
    for (n, st) in list("containers") {
        let running = container_pid(&n).is_some_and(pid_alive);
        if (!all && !running) || !matches(&n) {
            continue;
        }
        if names_only {
            println!("{n}");
        } else {
            println!("{n}\t{st}");
        }
    }
    Ok(0)
}

/// `podman images [--quiet] IMAGE`: an image the stand-in can run is "present" (its ID: the
/// first 12 hex digits of its pull spec's sha256); any other prints nothing, as for an image
/// not in the local storage.
fn images(args: &[String]) -> Result<i32, Fail> {
    use sha2::Digest;
    let quiet = args.iter().any(|a| a == "-q" || a == "--quiet");
    for img in args.iter().filter(|a| !a.starts_with('-')) {
        if role_of(img).is_ok() {
            let id = hex::encode(sha2::Sha256::digest(img.as_bytes()));
            if quiet {
                println!("{}", &id[..12]);
            } else {
                println!("{img}\t{}", &id[..12]);
            }
        }
    }
    Ok(0)
}

fn list(kind: &str) -> Vec<(String, String)> {
    let mut out = vec![];
    if let Ok(rd) = std::fs::read_dir(state_dir().join(kind)) {
        for e in rd.flatten() {
            let n = e.file_name().to_string_lossy().into_owned();
            let st = std::fs::read_to_string(e.path()).unwrap_or_default();
            out.push((n, st.trim().to_string()));
        }
    }
    out
}

fn record(kind: &str, name: &str) -> PathBuf {
    state_dir().join(kind).join(name)
}

fn runner() -> Result<serde_json::Value, Fail> {
    let p = Path::new(RUN_DIR).join("runner.json");
    let t = std::fs::read(&p).map_err(|e| {
        (
            125,
            format!("{}: {e} (not inside a run-node machine?)", p.display()),
        )
    })?;
    serde_json::from_slice(&t).map_err(|e| (125, format!("{}: {e}", p.display())))
}

/// The role of a pull spec, from run-node's `--image` map.
fn role_of(image: &str) -> Result<String, Fail> {
    let r = runner()?;
    let images = r["images"].as_object().cloned().unwrap_or_default();
    match images.get(image).and_then(|v| v.as_str()) {
        Some(role) => Ok(role.to_string()),
        None if installer_image().as_deref() == Some(image) => Ok("installer".to_string()),
        None => fail(125, unknown_image(image, &images)),
    }
}

/// The installer image (agent-installer-orchestrator) the machine's service hands the install
/// step: `INSTALLER_IMAGE` of the image's agent-images.env (read in the machine's root).
fn installer_image() -> Option<String> {
    let t = std::fs::read_to_string(super::AGENT_IMAGES_ENV).ok()?;
    podman_env_file(&t)
        .into_iter()
        .find(|(k, _)| k == "INSTALLER_IMAGE")
        .map(|(_, v)| v.trim_matches('"').to_string())
        .filter(|v| !v.is_empty())
}

/// The refusal of a pull spec `--image` did not map (`images`: pull spec → role). Without any
/// `--image` it says so and where the pull specs are: the image's agent-images.env
/// (`SERVICE_IMAGE` is api-server, `AGENT_DOCKER_IMAGE` is node-agent).
fn unknown_image(image: &str, images: &serde_json::Map<String, serde_json::Value>) -> String {
    let known = if images.is_empty() {
        format!(
            "no --image was given to run-node: pass --image api-server=<SERVICE_IMAGE> and --image node-agent=<AGENT_DOCKER_IMAGE>, the pull specs in the image's {}",
            super::AGENT_IMAGES_ENV
        )
    } else {
        format!(
            "known: {}",
            images
                .iter()
                .map(|(k, v)| format!("{} = {k}", v.as_str().unwrap_or("")))
                .collect::<Vec<_>>()
                .join(", ")
        )
    };
    format!(
        "image {image:?} is not a release payload component this runner can run ({known}); the real podman would pull it, the stand-in has no binary for it"
    )
}

fn pid_alive(pid: i32) -> bool {
    // SAFETY: signal 0 only checks existence.
    pid > 0 && unsafe { libc::kill(pid, 0) } == 0 && {
        let st = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        !st.rsplit(')').next().unwrap_or("").trim_start().starts_with('Z')
    }
}

fn container_pid(name: &str) -> Option<i32> {
    let t = std::fs::read_to_string(record("containers", name)).ok()?;
    t.split_whitespace().nth(1)?.parse().ok()
}

fn rm(args: &[String]) -> Result<i32, Fail> {
    let mut ignore = false;
    let mut names = vec![];
    for a in args {
        match a.as_str() {
            "-f" | "--force" => {}
            "-i" | "--ignore" => ignore = true,
            s if s.starts_with('-') => {
                return fail(125, format!("rm option {s} is not supported by the stand-in"))
            }
            s => names.push(s.to_string()),
        }
    }
    let mut code = 0;
    for n in names {
        let p = record("containers", &n);
        if !p.exists() {
            if !ignore {
                eprintln!("Error: no container with name or ID \"{n}\" found: no such container");
                code = 1;
            }
            continue;
        }
        if let Some(pid) = container_pid(&n) {
            kill_wait(pid, libc::SIGKILL, Duration::from_secs(5));
        }
        let _ = std::fs::remove_file(&p);
        println!("{n}");
    }
    Ok(code)
}

fn kill_wait(pid: i32, sig: i32, grace: Duration) {
    if !pid_alive(pid) {
        return;
    }
    // SAFETY: plain kill.
    unsafe { libc::kill(pid, sig) };
    let t = Instant::now();
    while pid_alive(pid) && t.elapsed() < grace {
        std::thread::sleep(Duration::from_millis(50));
    }
    if pid_alive(pid) {
        // SAFETY: plain kill.
        unsafe { libc::kill(pid, libc::SIGKILL) };
    }
}

fn stop(args: &[String], kill: bool) -> Result<i32, Fail> {
    let mut ignore = false;
    let mut names = vec![];
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "-i" | "--ignore" => ignore = true,
            "-t" | "--time" => {
                it.next();
            }
            s if s.starts_with("--time=") || s.starts_with("-t=") => {}
            s if s.starts_with('-') => {
                return fail(125, format!("stop option {s} is not supported by the stand-in"))
            }
            s => names.push(s.to_string()),
        }
    }
    let mut code = 0;
    for n in names {
        match container_pid(&n) {
            Some(pid) => {
                kill_wait(
                    pid,
                    if kill { libc::SIGKILL } else { libc::SIGTERM },
                    Duration::from_secs(10),
                );
                println!("{n}");
            }
            None if record("containers", &n).exists() => println!("{n}"),
            None if ignore => {}
            None => {
                eprintln!("Error: no container with name or ID \"{n}\" found: no such container");
                code = 125;
            }
        }
    }
    Ok(code)
}

fn pod(args: &[String]) -> Result<i32, Fail> {
    let Some(sub) = args.first() else {
        return fail(125, "pod needs a subcommand");
    };
    let rest = &args[1..];
    let _ = std::fs::create_dir_all(state_dir().join("pods"));
    match sub.as_str() {
        "create" => {
            let mut name = None;
            let mut net = None;
            let mut it = rest.iter();
            while let Some(a) = it.next() {
                let (k, v) = match a.split_once('=') {
                    Some((k, v)) => (k.to_string(), Some(v.to_string())),
                    None => (a.clone(), None),
                };
                let mut val = || v.clone().or_else(|| it.next().cloned());
                match k.as_str() {
                    "--name" | "-n" => name = val(),
                    "--network" | "--net" => net = val(),
                    "--replace" => {}
                    "--infra-image" | "--infra-name" | "--infra-conmon-pidfile" | "--label" | "--share" => {
                        val();
                    }
                    s => {
                        return fail(
                            125,
                            format!("pod create option {s} is not supported by the stand-in"),
                        )
                    }
                }
            }
            let name = name.ok_or((
                125,
                "pod create without --name (the units name their pod)".to_string(),
            ))?;
            let net = net.unwrap_or_else(|| "bridge".into());
            let p = record("pods", &name);
            if p.exists() && !rest.iter().any(|a| a == "--replace") {
                return fail(
                    125,
                    format!("adding pod to state: name \"{name}\" is in use: pod already exists"),
                );
            }
            infra_image_note(&name);
            std::fs::write(&p, format!("network={net}\n")).map_err(|e| (125, e.to_string()))?;
            println!("{name}");
            Ok(0)
        }
        "rm" | "stop" | "kill" => {
            let ignore = rest.iter().any(|a| a == "-i" || a == "--ignore");
            let mut code = 0;
            for n in rest.iter().filter(|a| !a.starts_with('-')) {
                let p = record("pods", n);
                if !p.exists() {
                    if !ignore && sub != "stop" {
                        eprintln!("Error: no pod with name or ID {n} found: no such pod");
                        code = 1;
                    }
                    continue;
                }
                // Containers of the pod go with it.
                for (c, st) in list("containers") {
                    if st.split_whitespace().nth(2) == Some(&format!("pod={n}")) {
                        if let Some(pid) = container_pid(&c) {
                            kill_wait(pid, libc::SIGKILL, Duration::from_secs(5));
                        }
                        if sub == "rm" {
                            let _ = std::fs::remove_file(record("containers", &c));
                        }
                    }
                }
                if sub == "rm" {
                    let _ = std::fs::remove_file(&p);
                }
                println!("{n}");
            }
            Ok(code)
        }
        "exists" => Ok(if rest.first().is_some_and(|n| record("pods", n).exists()) {
            0
        } else {
            1
        }),
        other => fail(
            125,
            format!("podman pod {other}: not supported by the stand-in (create, rm, stop, kill, exists)"),
        ),
    }
}

/// Says when a pod would need the default pause image (no `infra_image = ""` override in
/// /etc/containers/containers.conf): a real podman pulls it from a public registry.
fn infra_image_note(pod: &str) {
    let conf = std::fs::read_to_string("/etc/containers/containers.conf").unwrap_or_default();
    let overridden = conf.lines().any(|l| {
        let l = l.trim();
        l.starts_with("infra_image")
            && l.split_once('=')
                .is_some_and(|(_, v)| v.trim() == "\"\"" || v.trim() == "''")
    });
    if !overridden {
        eprintln!(
            "podman stand-in: note: pod {pod}: /etc/containers/containers.conf sets no empty infra_image; a real podman pulls its default pause image for the pod's infra container (a public registry: fails on disconnected sites)"
        );
    }
}

/// Options of `podman run` the stand-in understands.
#[derive(Debug, Default)]
struct RunOpts {
    name: Option<String>,
    pod: Option<String>,
    net: Option<String>,
    rm: bool,
    detach: bool,
    replace: bool,
    env_files: Vec<String>,
    envs: Vec<String>,
    volumes: Vec<String>,
    user: Option<String>,
    entrypoint: Option<String>,
    workdir: Option<String>,
    authfile: Option<String>,
    sdnotify: Option<String>,
    image: String,
    cmd: Vec<String>,
}

fn parse_run(args: &[String]) -> Result<RunOpts, Fail> {
    let mut o = RunOpts::default();
    let mut i = 0;
    const WITH_VALUE: &[&str] = &[
        "--name",
        "--pod",
        "--net",
        "--network",
        "--env-file",
        "-e",
        "--env",
        "-v",
        "--volume",
        "--user",
        "-u",
        "--entrypoint",
        "-w",
        "--workdir",
        "--authfile",
        "--sdnotify",
        "--log-driver",
        "--security-opt",
        "--cap-add",
        "--cap-drop",
        "--restart",
        "--hostname",
        "--label",
        "-l",
        "--pull",
        "--ipc",
        "--uts",
        "--pid",
        "--cgroups",
        "--log-opt",
        "--stop-timeout",
        "--systemd",
        "--tls-verify",
        "--conmon-pidfile",
        "--cidfile",
        "--pids-limit",
    ];
    const FLAGS: &[&str] = &[
        "--rm",
        "-d",
        "--detach",
        "--privileged",
        "--replace",
        "-i",
        "-t",
        "-it",
        "-ti",
        "--interactive",
        "--tty",
        "--init",
        "-q",
        "--quiet",
    ];
    while i < args.len() {
        let a = &args[i];
        if !a.starts_with('-') {
            break;
        }
        let (k, inline) = match a.split_once('=') {
            Some((k, v)) if k.starts_with("--") || k.len() == 2 => (k.to_string(), Some(v.to_string())),
            _ => (a.clone(), None),
        };
        if FLAGS.contains(&k.as_str()) {
            let on = inline.as_deref().map(|v| v != "false").unwrap_or(true);
            match k.as_str() {
                "--rm" => o.rm = on,
                "-d" | "--detach" => o.detach = on,
                "--replace" => o.replace = on,
                _ => {}
            }
            i += 1;
            continue;
        }
        if !WITH_VALUE.contains(&k.as_str()) {
            return fail(
                125,
                format!("podman run option {k} is not supported by the stand-in"),
            );
        }
        let v = match inline {
            Some(v) => {
                i += 1;
                v
            }
            None => {
                let v = args
                    .get(i + 1)
                    .cloned()
                    .ok_or((125, format!("option {k} needs a value")))?;
                i += 2;
                v
            }
        };
        match k.as_str() {
            "--name" => o.name = Some(v),
            "--pod" => o.pod = Some(v),
            "--net" | "--network" => o.net = Some(v),
            "--env-file" => o.env_files.push(v),
            "-e" | "--env" => o.envs.push(v),
            "-v" | "--volume" => o.volumes.push(v),
            "--user" | "-u" => o.user = Some(v),
            "--entrypoint" => o.entrypoint = Some(v),
            "-w" | "--workdir" => o.workdir = Some(v),
            "--authfile" => o.authfile = Some(v),
            "--sdnotify" => o.sdnotify = Some(v),
            "--pid" | "--ipc" | "--uts" if v != "host" => {
                return fail(
                    125,
                    format!(
                        "{k} {v}: the stand-in runs containers in the machine's {} namespace only (host)",
                        &k[2..]
                    ),
                )
            }
            _ => {} // accepted, no effect here (security options, labels, logging)
        }
    }
    o.image = args
        .get(i)
        .cloned()
        .ok_or((125, "run needs an image".to_string()))?;
    o.cmd = args[i + 1..].to_vec();
    Ok(o)
}

/// podman's `--env-file` format: `KEY=VALUE` taken verbatim (no quote removal), `KEY` alone
/// takes the caller's value, `#` lines are comments.
fn podman_env_file(text: &str) -> Vec<(String, String)> {
    let mut out = vec![];
    for l in text.lines() {
        let t = l.trim_start();
        if t.is_empty() || t.starts_with('#') {
            continue;
        }
        match t.split_once('=') {
            Some((k, v)) => out.push((k.to_string(), v.to_string())),
            None => {
                if let Ok(v) = std::env::var(t.trim()) {
                    out.push((t.trim().to_string(), v));
                }
            }
        }
    }
    out
}

/// The commands an image is known to run: Ok(()) or the loud refusal.
fn check_command(role: &str, argv: &[String]) -> Result<(), Fail> {
    let prog = argv.first().map(String::as_str).unwrap_or("");
    let ok = match role {
        "api-server" => {
            matches!(
                prog,
                "/assisted-service"
                    | "/usr/local/bin/agent-installer-client"
                    | "agent-installer-client"
                    | "/agent-based-installer-register-cluster-and-infraenv"
            ) || (matches!(prog, "/bin/bash" | "bash" | "/usr/bin/bash")
                && argv
                    .get(1)
                    .is_some_and(|s| s == "start_db.sh" || s == "/start_db.sh"))
                || matches!(prog, "/start_db.sh" | "./start_db.sh")
        }
        "node-agent" => {
            matches!(
                prog,
                "/usr/bin/agent" | "agent" | "cp" | "/usr/bin/cp" | "/bin/cp"
            ) || super::agent::AGENT_NAMES
                .iter()
                .any(|n| prog == *n || prog.strip_prefix("/usr/bin/") == Some(n))
        }
        "installer" => prog == INSTALLER_ENTRYPOINT,
        _ => false,
    };
    if ok {
        Ok(())
    } else {
        fail(
            127,
            format!(
                "the {role} image: command {:?} is not one this image is known to run (the stand-in runs only those, with the real binaries)",
                argv.join(" ")
            ),
        )
    }
}

fn passwd_lookup(root: &Path, user: &str) -> Result<(u32, u32, String), Fail> {
    let (u, g) = user
        .split_once(':')
        .map(|(u, g)| (u, Some(g)))
        .unwrap_or((user, None));
    let text = std::fs::read_to_string(root.join("etc/passwd")).unwrap_or_default();
    let mut found = None;
    for l in text.lines() {
        let f: Vec<&str> = l.split(':').collect();
        if f.len() >= 7 && (f[0] == u || f[2] == u) {
            found = Some((
                f[2].parse().unwrap_or(0),
                f[3].parse().unwrap_or(0),
                f[5].to_string(),
            ));
            break;
        }
    }
    let (uid, mut gid, home) = match (found, u.parse::<u32>()) {
        (Some(x), _) => x,
        (None, Ok(n)) => (n, n, "/".to_string()),
        (None, Err(_)) => {
            return fail(
                126,
                format!("unable to find user {u}: no matching entries in passwd file"),
            )
        }
    };
    if let Some(g) = g {
        gid = g
            .parse()
            .map_err(|_| (125, format!("--user {user}: group must be numeric here")))?;
    }
    Ok((uid, gid, home))
}

static CHILD: AtomicI32 = AtomicI32::new(0);
extern "C" fn forward(sig: libc::c_int) {
    let c = CHILD.load(Ordering::SeqCst);
    if c > 0 {
        // SAFETY: kill is async-signal-safe.
        unsafe { libc::kill(c, sig) };
    }
}

fn run(args: &[String]) -> Result<i32, Fail> {
    let o = parse_run(args)?;
    let role = role_of(&o.image)?;
    if let Some(a) = &o.authfile {
        if !Path::new(a).exists() {
            return fail(
                125,
                format!("credential file is not accessible: faccessat {a}: no such file or directory"),
            );
        }
    }
    // Network: the machine's (host), directly or through a host-network pod; any other mode
    // gets a network namespace of its own with only loopback (a bridge container cannot reach
    // the machine's 127.0.0.1:8090 nor see its MACs either; it has no outbound NAT here).
    let private_net = match (&o.pod, o.net.as_deref()) {
        (_, Some("host")) => false,
        (Some(p), None) => {
            let rec = std::fs::read_to_string(record("pods", p))
                .map_err(|_| (125, format!("no pod with name or ID {p} found: no such pod")))?;
            !rec.contains("network=host")
        }
        (_, Some("none")) | (None, None) | (_, Some("bridge")) | (_, Some("private")) => true,
        (_, Some(other)) => {
            return fail(
                125,
                format!("network mode {other:?} is not supported by the stand-in (host, bridge, none)"),
            )
        }
    };
    let name = o
        .name
        .clone()
        .unwrap_or_else(|| format!("c{}", std::process::id()));
    let _ = std::fs::create_dir_all(state_dir().join("containers"));
    let rec = record("containers", &name);
    if rec.exists() {
        if o.replace {
            if let Some(pid) = container_pid(&name) {
                kill_wait(pid, libc::SIGKILL, Duration::from_secs(5));
            }
            let _ = std::fs::remove_file(&rec);
        } else {
            return fail(
                125,
                format!("creating container storage: the container name \"{name}\" is already in use. You have to remove that container to be able to reuse that name: that name is already in use"),
            );
        }
    }
    // Command: entrypoint + args, or the image's CMD.
    let mut argv: Vec<String> = match &o.entrypoint {
        Some(e) => {
            let mut v = vec![e.clone()];
            v.extend(o.cmd.iter().cloned());
            v
        }
        None if role == "installer" => {
            let mut v = vec![INSTALLER_ENTRYPOINT.to_string()];
            v.extend(o.cmd.iter().cloned());
            v
        }
        None if o.cmd.is_empty() => match role.as_str() {
            "api-server" => vec!["/assisted-service".to_string()],
            _ => return fail(125, format!("the {role} image has no default command; give one")),
        },
        None => o.cmd.clone(),
    };
    check_command(&role, &argv)?;
    if argv[0] == "agent-installer-client" {
        argv[0] = "/usr/local/bin/agent-installer-client".into();
    }

    // Private mount namespace for the container root.
    // SAFETY: single-threaded here (nothing spawned yet).
    if unsafe { libc::unshare(libc::CLONE_NEWNS) } != 0 {
        return fail(
            125,
            format!("unshare(CLONE_NEWNS): {}", std::io::Error::last_os_error()),
        );
    }
    mount("none", Path::new("/"), "", libc::MS_REC | libc::MS_PRIVATE, None).map_err(|e| (125, e))?;
    if private_net {
        // SAFETY: single-threaded.
        if unsafe { libc::unshare(libc::CLONE_NEWNET) } != 0 {
            return fail(
                125,
                format!("unshare(CLONE_NEWNET): {}", std::io::Error::last_os_error()),
            );
        }
        let _ = Command::new("ip").args(["link", "set", "lo", "up"]).status();
    }
    let cdir = state_dir().join("roots").join(&name);
    let root = cdir.join("root");
    std::fs::create_dir_all(&root).map_err(|e| (125, e.to_string()))?;
    let uses_db = argv.iter().any(|a| a.ends_with("start_db.sh"));
    build_image_root(&role, &root, &cdir.join("layer"), uses_db)
        .map_err(|e| (125, format!("building the {role} image root: {e}")))?;

    // Environment: image, then env files, then -e.
    let mut env: BTreeMap<String, String> = BTreeMap::new();
    env.insert(
        "PATH".into(),
        "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin".into(),
    );
    env.insert("container".into(), "podman".into());
    env.insert(
        "HOSTNAME".into(),
        std::fs::read_to_string("/proc/sys/kernel/hostname")
            .unwrap_or_default()
            .trim()
            .to_string(),
    );
    if role == "api-server" {
        env.insert("GODEBUG".into(), "madvdontneed=1".into());
        env.insert("GOGC".into(), "50".into());
    }
    for f in &o.env_files {
        let t = std::fs::read_to_string(f).map_err(|e| (125, format!("open {f}: {e}")))?;
        env.extend(podman_env_file(&t));
    }
    for e in &o.envs {
        match e.split_once('=') {
            Some((k, v)) => {
                env.insert(k.into(), v.into());
            }
            None => {
                if let Ok(v) = std::env::var(e) {
                    env.insert(e.clone(), v);
                }
            }
        }
    }
    // Binds.
    for v in &o.volumes {
        let parts: Vec<&str> = v.split(':').collect();
        if parts.len() < 2 || !parts[0].starts_with('/') {
            return fail(
                125,
                format!("-v {v}: only host-path binds SRC:DST[:OPTS] are supported by the stand-in"),
            );
        }
        let (src, dst) = (parts[0], parts[1]);
        let opts: Vec<&str> = parts.get(2).map(|o| o.split(',').collect()).unwrap_or_default();
        for op in &opts {
            if !matches!(
                *op,
                "ro" | "rw"
                    | "z"
                    | "Z"
                    | "rslave"
                    | "slave"
                    | "rshared"
                    | "shared"
                    | "private"
                    | "rprivate"
                    | "U"
                    | ""
            ) {
                return fail(
                    125,
                    format!("-v {v}: option {op} is not supported by the stand-in"),
                );
            }
        }
        if !Path::new(src).exists() {
            return fail(125, format!("statfs {src}: no such file or directory"));
        }
        if !dst.starts_with('/') {
            return fail(
                125,
                format!("-v {v}: invalid container path {dst:?}, must be an absolute path"),
            );
        }
        bind(
            Path::new(src),
            &root.join(dst.trim_start_matches('/')),
            opts.contains(&"ro"),
        )
        .map_err(|e| (125, e))?;
    }
    let notify = std::env::var("NOTIFY_SOCKET").ok();
    if let (Some(n), Some("container") | None) = (&notify, o.sdnotify.as_deref()) {
        // The socket is handed to the container (podman's default): it must notify itself.
        if Path::new(n).exists() {
            bind(Path::new(n), &root.join("run/notify/notify.sock"), false).map_err(|e| (125, e))?;
            env.insert("NOTIFY_SOCKET".into(), "/run/notify/notify.sock".into());
        }
    }
    let (uid, gid, home) = match &o.user {
        Some(u) => passwd_lookup(&root, u)?,
        None => (0, 0, "/root".to_string()),
    };
    env.insert("HOME".into(), if uid == 0 { "/root".into() } else { home });
    let workdir = o.workdir.clone().unwrap_or_else(|| "/".into());

    // Program lookup in the container's PATH.
    let prog = if argv[0].starts_with('/') {
        argv[0].clone()
    } else {
        ["/usr/local/sbin", "/usr/local/bin", "/usr/sbin", "/usr/bin", "/sbin", "/bin"]
            .iter()
            .map(|d| format!("{d}/{}", argv[0]))
            .find(|p| root.join(p.trim_start_matches('/')).exists())
            .ok_or((127, format!("crun: executable file `{}` not found in $PATH: No such file or directory: OCI runtime attempted to invoke a command that was not found", argv[0])))?
    };
    if !root.join(prog.trim_start_matches('/')).exists() {
        return fail(127, format!("crun: executable file `{prog}` not found: No such file or directory: OCI runtime attempted to invoke a command that was not found"));
    }
    let croot = CString::new(root.as_os_str().as_encoded_bytes()).unwrap();
    let cwd = CString::new(workdir.clone()).unwrap();
    let mut cmd = Command::new(&prog);
    cmd.arg0(&argv[0]).args(&argv[1..]).env_clear().envs(&env);
    // SAFETY: async-signal-safe calls only between fork and exec.
    unsafe {
        cmd.pre_exec(move || {
            if libc::chroot(croot.as_ptr()) != 0 || libc::chdir(cwd.as_ptr()) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            if uid != 0 {
                let groups = [gid];
                if libc::setgroups(1, groups.as_ptr()) != 0
                    || libc::setgid(gid) != 0
                    || libc::setuid(uid) != 0
                {
                    return Err(std::io::Error::last_os_error());
                }
            }
            Ok(())
        });
    }
    let child = cmd.spawn().map_err(|e| (126, format!("crun: {prog}: {e}")))?;
    let pid = child.id() as i32;
    CHILD.store(pid, Ordering::SeqCst);
    std::fs::write(
        &rec,
        format!("running {pid} pod={}\n", o.pod.clone().unwrap_or_default()),
    )
    .map_err(|e| (125, e.to_string()))?;
    if let (Some(n), Some("conmon")) = (&notify, o.sdnotify.as_deref()) {
        if let Ok(s) = std::os::unix::net::UnixDatagram::unbound() {
            let _ = s.send_to(format!("MAINPID={pid}\nREADY=1").as_bytes(), n);
        }
    }
    if o.detach {
        println!("{name}");
        return Ok(0);
    }
    // SAFETY: installing a handler that only calls kill.
    unsafe {
        libc::signal(libc::SIGTERM, forward as *const () as libc::sighandler_t);
        libc::signal(libc::SIGINT, forward as *const () as libc::sighandler_t);
    }
    let mut st = 0;
    loop {
        // SAFETY: plain waitpid on our child.
        let r = unsafe { libc::waitpid(pid, &mut st, 0) };
        if r == pid || (r < 0 && std::io::Error::last_os_error().raw_os_error() != Some(libc::EINTR)) {
            break;
        }
    }
    let code = if libc::WIFEXITED(st) {
        libc::WEXITSTATUS(st)
    } else {
        128 + libc::WTERMSIG(st)
    };
    if o.rm {
        let _ = std::fs::remove_file(&rec);
    } else {
        let _ = std::fs::write(&rec, format!("exited {code} pod={}\n", o.pod.unwrap_or_default()));
    }
    Ok(code)
}

/// The installer image's entrypoint (assisted-installer; stood in: [`super::agent`]).
const INSTALLER_ENTRYPOINT: &str = "/usr/bin/installer";

/// PostgreSQL's major version directory under /usr/lib/postgresql (the newest).
fn pg_bin() -> Result<PathBuf, String> {
    let base = Path::new(IMAGE_BASE).join("usr/lib/postgresql");
    let mut v: Vec<u32> = std::fs::read_dir(&base)
        .map_err(|e| format!("{}: {e} (install Debian's postgresql)", base.display()))?
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse().ok())
        .collect();
    v.sort();
    let m = v
        .last()
        .ok_or_else(|| "no PostgreSQL under /usr/lib/postgresql (install Debian's postgresql)".to_string())?;
    Ok(Path::new("/usr/lib/postgresql").join(m.to_string()).join("bin"))
}

/// The image's own script, written from what the agent-installer-api-server image's
/// `start_db.sh` does (see the module docs).
const START_DB: &str = r#"#!/usr/bin/env bash
# start_db.sh of the agent-installer-api-server image, as rebuilt by agent-day2-sim run-node:
# bring up the database the image initialised, add the role and database the service uses,
# then keep the server in the foreground (socket directory /tmp).
set -euo pipefail
data=/tmp/postgres/data/
pg_ctl -D "$data" -l /tmp/postgres/logfile start -w -o "-k /tmp"
createuser -s admin -h localhost
createdb installer -h localhost
pg_ctl -D "$data" -l /tmp/postgres/logfile stop -w -o "-k /tmp"
exec postgres -D "$data" -k /tmp
"#;

fn build_image_root(role: &str, root: &Path, layer: &Path, with_db: bool) -> Result<(), String> {
    mount("tmpfs", root, "tmpfs", 0, Some("mode=0755"))?;
    std::fs::create_dir_all(layer).map_err(|e| e.to_string())?;
    mount("tmpfs", layer, "tmpfs", 0, Some("mode=0700"))?;
    for d in ["usr", "etc"] {
        let (up, wk) = (layer.join("upper").join(d), layer.join("work").join(d));
        std::fs::create_dir_all(&up).map_err(|e| e.to_string())?;
        std::fs::create_dir_all(&wk).map_err(|e| e.to_string())?;
        std::fs::create_dir_all(root.join(d)).map_err(|e| e.to_string())?;
        mount(
            "overlay",
            &root.join(d),
            "overlay",
            0,
            Some(&format!(
                "lowerdir={IMAGE_BASE}/{d},upperdir={},workdir={}",
                up.display(),
                wk.display()
            )),
        )?;
    }
    for (l, t) in [
        ("bin", "usr/bin"),
        ("sbin", "usr/sbin"),
        ("lib", "usr/lib"),
        ("lib64", "usr/lib64"),
    ] {
        std::os::unix::fs::symlink(t, root.join(l)).map_err(|e| e.to_string())?;
    }
    bind(Path::new("/proc"), &root.join("proc"), false)?;
    bind(Path::new("/sys"), &root.join("sys"), false)?;
    bind(Path::new("/dev"), &root.join("dev"), false)?;
    for (d, mode) in [("tmp", "mode=1777"), ("run", "mode=0755")] {
        std::fs::create_dir_all(root.join(d)).map_err(|e| e.to_string())?;
        mount("tmpfs", &root.join(d), "tmpfs", 0, Some(mode))?;
    }
    for d in ["var/tmp", "var/log", "root", "home"] {
        std::fs::create_dir_all(root.join(d)).map_err(|e| e.to_string())?;
    }
    let real = Path::new(super::machine::REAL_BIN);
    match role {
        "api-server" => {
            bind(
                &real.join("assisted-service"),
                &root.join("assisted-service"),
                true,
            )?;
            bind(
                &real.join("agent-installer-client"),
                &root.join("usr/local/bin/agent-installer-client"),
                true,
            )?;
            std::os::unix::fs::symlink(
                "/usr/local/bin/agent-installer-client",
                root.join("agent-based-installer-register-cluster-and-infraenv"),
            )
            .map_err(|e| e.to_string())?;
            // libnmstate (the image's nmstate-libs), from the real binaries' build.
            let lib = Path::new(super::machine::NMSTATE_LIB).join("libnmstate.so.2");
            if lib.exists() {
                bind(&lib, &root.join("usr/lib/x86_64-linux-gnu/libnmstate.so.2"), true)?;
            }
            std::fs::create_dir_all(root.join("data")).map_err(|e| e.to_string())?;
            std::fs::set_permissions(
                root.join("data"),
                std::os::unix::fs::PermissionsExt::from_mode(0o775),
            )
            .map_err(|e| e.to_string())?;
            std::fs::write(root.join("start_db.sh"), START_DB).map_err(|e| e.to_string())?;
            std::fs::set_permissions(
                root.join("start_db.sh"),
                std::os::unix::fs::PermissionsExt::from_mode(0o755),
            )
            .map_err(|e| e.to_string())?;
            let pg = pg_bin()?;
            for b in [
                "pg_ctl",
                "postgres",
                "initdb",
                "createuser",
                "createdb",
                "psql",
                "pg_isready",
            ] {
                let l = root.join("usr/bin").join(b);
                let _ = std::fs::remove_file(&l);
                std::os::unix::fs::symlink(pg.join(b), &l).map_err(|e| e.to_string())?;
            }
            if with_db {
                init_db(root)?;
            }
        }
        "node-agent" => {
            let sim = Path::new(super::machine::SIM_EXE);
            bind(sim, &root.join(sim.strip_prefix("/").unwrap()), true)?;
            let agent = root.join("usr/bin/agent");
            let real = Path::new(super::agent::REAL_AGENT).join("agent");
            if real.is_file() {
                // The real agent (one binary, acting by the name it is called as) and the
                // image's links to it (upstream's Dockerfile).
                let _ = std::fs::remove_file(&agent);
                bind(&real, &agent, true)?;
                for n in super::agent::AGENT_NAMES {
                    let l = root.join("usr/bin").join(n);
                    let _ = std::fs::remove_file(&l);
                    std::os::unix::fs::symlink("agent", &l).map_err(|e| e.to_string())?;
                }
                // The image's tools that cannot run here: fio (writes the disk), nmap (scans
                // the LAN), nsenter (would leave the machine's root): super::agent.
                for t in ["fio", "nmap", "nsenter"] {
                    super::agent::standin_script(&root.join("usr/bin").join(t), t)?;
                }
            } else {
                std::fs::write(&agent, format!("#!/bin/sh\n# discovery agent stand-in of agent-day2-sim run-node\nexec {} discovery-agent \"$@\"\n", super::machine::SIM_EXE))
                    .map_err(|e| e.to_string())?;
                std::fs::set_permissions(&agent, std::os::unix::fs::PermissionsExt::from_mode(0o755))
                    .map_err(|e| e.to_string())?;
            }
            // nsenter's stand-in (and the stand-in agent) read the machine's description.
            let mj = Path::new(RUN_DIR).join("machine.json");
            bind(&mj, &root.join(mj.strip_prefix("/").unwrap()), true)?;
            // Host network: podman gives the container the host's /etc/hosts and
            // /etc/resolv.conf (the steps resolve the site's names with them).
            for f in ["etc/hosts", "etc/resolv.conf"] {
                let src = Path::new("/").join(f);
                if src.is_file() {
                    let _ = std::fs::remove_file(root.join(f));
                    bind(&src, &root.join(f), true)?;
                }
            }
        }
        "installer" => {
            // agent-installer-orchestrator (assisted-installer): its entrypoint stood in.
            let sim = Path::new(super::machine::SIM_EXE);
            bind(sim, &root.join(sim.strip_prefix("/").unwrap()), true)?;
            super::agent::standin_script(
                &root.join(INSTALLER_ENTRYPOINT.trim_start_matches('/')),
                "assisted-installer",
            )?;
        }
        _ => return Err(format!("no image layout for role {role}")),
    }
    Ok(())
}

/// The image's build step `initdb -D /tmp/postgres/data` as the `postgres` user.
fn init_db(root: &Path) -> Result<(), String> {
    let (uid, gid, _) = passwd_lookup(root, "postgres").map_err(|e| e.1)?;
    let data = root.join("tmp/postgres/data");
    std::fs::create_dir_all(&data).map_err(|e| e.to_string())?;
    for p in [root.join("tmp/postgres"), data.clone()] {
        std::os::unix::fs::chown(&p, Some(uid), Some(gid)).map_err(|e| e.to_string())?;
    }
    let croot = CString::new(root.as_os_str().as_encoded_bytes()).unwrap();
    let out = unsafe {
        Command::new("/usr/bin/initdb")
            .args(["-D", "/tmp/postgres/data"])
            .env_clear()
            .env("PATH", "/usr/bin:/bin")
            .env("LANG", "C")
            .pre_exec(move || {
                if libc::chroot(croot.as_ptr()) != 0 || libc::chdir(c"/tmp".as_ptr()) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                let g = [gid];
                if libc::setgroups(1, g.as_ptr()) != 0 || libc::setgid(gid) != 0 || libc::setuid(uid) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            })
            .output()
    }
    .map_err(|e| format!("initdb: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "initdb (the image's build step) failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_unmapped_image_without_any_image_flag_says_where_the_pull_specs_are() {
        let none = serde_json::Map::new();
        let m = unknown_image("quay.io/x/y@sha256:1", &none);
        assert!(m.contains("no --image was given"), "{m}");
        assert!(m.contains("api-server=<SERVICE_IMAGE>"), "{m}");
        assert!(m.contains("node-agent=<AGENT_DOCKER_IMAGE>"), "{m}");
        assert!(
            m.contains("/usr/local/share/assisted-service/agent-images.env"),
            "{m}"
        );
        assert!(!m.contains("(known: )"), "{m}");
        let mut some = serde_json::Map::new();
        some.insert("q/a:1".into(), "api-server".into());
        let m = unknown_image("q/b:1", &some);
        assert!(m.contains("(known: api-server = q/a:1)"), "{m}");
    }
}
