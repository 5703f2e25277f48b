//! `agent-day2-sim boot`: simulated day-2 machines booting the node ISO.
//!
//! Each `--node MAC=IP` is one machine; all run as tasks of one tokio runtime (no thread per
//! node, so hundreds are fine). A machine:
//! 1. reads its config from the live ISO's embed area ([`embed`]), PXE files or an appliance
//!    config image ([`source`]) and the facts it needs from it ([`facts`]; a reader, not a
//!    judge: the real assisted-service judges the image in `run-node`); an image it cannot
//!    read, or a `--node` MAC no host config lists, ends the run with exit 3 before any
//!    machine starts;
//! 2. finds its host by MAC, serves the local assisted-service API on `IP:8090` ([`rest`]) and
//!    walks the install stages on a fast clock ([`stages`]);
//! 3. "reboots" (stops serving 8090) and acts as a kubelet ([`kubelet`]): client CSR as the
//!    node-bootstrapper, Node + Ready with the issued certificate, serving CSR as itself.
//!
//! Output: one line per event on stdout (`worker-0 192.168.111.30: client certificate issued`),
//! or JSON lines with `--json`. Exit codes (docs/simulator.md "Machines joining: boot"): 0
//! every node has both certificates; 3 image refused; 4 cluster access; 5 `--timeout`; 6 a
//! node's installation failed or a CSR was denied; 1 anything else. When several apply, 5 wins
//! over 6.

pub mod cmdline;
pub mod cpio;
pub mod csr;
pub mod embed;
pub mod facts;
pub mod ignition;
pub mod jwt;
pub mod kubelet;
pub mod rest;
pub mod source;
pub mod stages;

use std::collections::BTreeMap;
use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::json;

use facts::Facts;
use stages::{End, Faults};

/// Flags of `agent-day2-sim boot`. Exactly one image source: `--iso`, `--pxe-dir`, `--ipxe`,
/// `--kernel`/`--initrd`/`--rootfs`, or `--config-image`.
#[derive(Debug, Clone, clap::Args)]
#[command(group(clap::ArgGroup::new("image").required(true).multiple(false).args(["iso", "config_image", "pxe_dir", "ipxe", "initrd"])))]
pub struct BootArgs {
    /// The simulator's `up` directory (its `kubeconfig` has the context `bootstrapper`).
    #[arg(long)]
    pub dir: PathBuf,
    /// The node ISO to boot (a CoreOS live ISO with the Ignition embedded).
    #[arg(long)]
    pub iso: Option<PathBuf>,
    /// PXE boot from the files `add-nodes --pxe` writes (`node.<arch>-vmlinuz`, `-initrd.img`,
    /// `-rootfs.img`, and `node.<arch>.ipxe` when present, which then decides).
    #[arg(long, value_name = "DIR")]
    pub pxe_dir: Option<PathBuf>,
    /// PXE boot as this iPXE script says; the files it names are taken from its directory.
    #[arg(long, value_name = "FILE")]
    pub ipxe: Option<PathBuf>,
    /// PXE boot: the kernel (with --initrd and --rootfs).
    #[arg(long, requires = "initrd")]
    pub kernel: Option<PathBuf>,
    /// PXE boot: the initrd holding the Ignition archive (with --kernel and --rootfs).
    #[arg(long, requires_all = ["kernel", "rootfs"])]
    pub initrd: Option<PathBuf>,
    /// PXE boot: the live root filesystem (with --kernel and --initrd).
    #[arg(long, requires = "initrd")]
    pub rootfs: Option<PathBuf>,
    /// Appliance mode: an ISO9660 config image labelled `agent_configimage` with `config.gz`
    /// (gzip newc cpio of files at their target paths) instead of a live ISO's Ignition.
    #[arg(long)]
    pub config_image: Option<PathBuf>,
    /// Appliance mode: the release image built into the simulated appliance disk; a config
    /// image for another release is refused. Without it the release is not compared.
    #[arg(long, value_name = "IMAGE", requires = "config_image")]
    pub appliance_release: Option<String>,
    /// A machine as MAC=IP (repeatable), e.g. 52:54:00:aa:00:30=192.168.111.30.
    #[arg(long = "node", value_name = "MAC=IP", required = true)]
    pub nodes: Vec<String>,
    /// JSON lines on stdout instead of text.
    #[arg(long)]
    pub json: bool,
    /// Give up after this long (e.g. 90s, 10m): exit 5.
    #[arg(long, default_value = "10m", value_parser = parse_duration)]
    pub timeout: Duration,
    /// Host stays insufficient with a failing validation (HOST or HOST:VALIDATION_ID, default
    /// ntp-synced). Repeatable.
    #[arg(long, value_name = "HOST[:NAME]")]
    pub fail_validation: Vec<String>,
    /// Host's installation fails (status error with a reason). Repeatable.
    #[arg(long, value_name = "HOST")]
    pub fail_install: Vec<String>,
    /// Host never gets past discovering. Repeatable.
    #[arg(long, value_name = "HOST")]
    pub stall: Vec<String>,
    /// Host loses power at "Writing image to disk", 50 %: its API goes away for good, before
    /// any reboot report (exit 6). Repeatable.
    #[arg(long, value_name = "HOST")]
    pub power_off: Vec<String>,
    /// Host's kubelet sends a second client CSR (as a restarted kubelet would). Repeatable.
    #[arg(long, value_name = "HOST")]
    pub second_client_csr: Vec<String>,
    /// While its client CSR stays unapproved this long, the kubelet makes a new key and a new
    /// client CSR and waits on that one only, as the real kubelet does every 15 minutes
    /// (client-go certificate manager `certificateWaitTimeout`), e.g. --kubelet-retry 3s.
    /// Default: wait for ever on the first CSR.
    #[arg(long, value_name = "DURATION", value_parser = parse_positive_duration)]
    pub kubelet_retry: Option<Duration>,
    /// Real-time factor of the stage clock: a stage that takes 60 s on a machine takes
    /// 60 s × scale here.
    #[arg(long, default_value_t = 0.005)]
    pub clock_scale: f64,
    /// Fixed delay between stages in milliseconds (overrides --clock-scale).
    #[arg(long)]
    pub stage_delay_ms: Option<u64>,
}

/// Flags of `agent-day2-sim csr`: post one client CSR as the node-bootstrapper, shaped as the
/// kubelet makes it (new P-256 key, CN system:node:NAME, generateName csr-), the way anyone
/// holding the bootstrap token can (issue 14: a rogue CSR in an expected node's name).
#[derive(Debug, Clone, clap::Args)]
pub struct CsrArgs {
    /// The simulator's `up` directory (its `kubeconfig` has the context `bootstrapper`).
    #[arg(long)]
    pub dir: PathBuf,
    /// Authenticate with the node-bootstrapper service account's token (context
    /// `bootstrapper`), as a kubelet's bootstrap kubeconfig does. Required: the only way.
    #[arg(long, required = true)]
    pub bootstrapper: bool,
    /// The node name for the CN (system:node:NAME), e.g. --node worker-0.
    #[arg(long, value_name = "NAME")]
    pub node: String,
}

/// Runs `csr`: prints the created CSR's name. Exit 0; 4 when the cluster refuses or cannot be
/// reached; 1 otherwise.
pub fn csr_sync(args: CsrArgs) -> i32 {
    let rt = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: {e}");
            return 1;
        }
    };
    rt.block_on(async {
        let kc_path = args.dir.join("kubeconfig");
        let kc = match kube::config::Kubeconfig::read_from(&kc_path) {
            Ok(k) => k,
            Err(e) => {
                eprintln!(
                    "error: cannot read {}: {e} (is --dir the simulator's up directory?)",
                    kc_path.display()
                );
                return 4;
            }
        };
        let r = async {
            let (boot, _) = kubelet::bootstrap_client(&kc).await?;
            let req = kubelet::client_request(&args.node)?;
            kubelet::create_csr(&boot, &req.pem, csr::CLIENT_SIGNER, kubelet::CLIENT_USAGES).await
        }
        .await;
        match r {
            Ok(name) => {
                println!("{name}");
                0
            }
            Err(e @ kubelet::KubeletError::Kube { .. }) => {
                eprintln!("error: {e}");
                4
            }
            Err(e) => {
                eprintln!("error: {e}");
                1
            }
        }
    })
}

/// Parses `90s`, `10m`, `1h`, `500ms` or plain seconds.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let s = s.trim();
    let (num, unit) = s
        .find(|c: char| !c.is_ascii_digit() && c != '.')
        .map(|i| s.split_at(i))
        .unwrap_or((s, "s"));
    let n: f64 = num
        .parse()
        .map_err(|_| format!("{s:?} is not a duration like 90s or 10m"))?;
    let secs = match unit {
        "ms" => n / 1000.0,
        "s" | "" => n,
        "m" => n * 60.0,
        "h" => n * 3600.0,
        _ => return Err(format!("{s:?}: unknown unit {unit:?} (ms, s, m, h)")),
    };
    // try_: a huge or negative value is an error, not a panic
    Duration::try_from_secs_f64(secs).map_err(|_| format!("{s:?} is out of range"))
}

/// [`parse_duration`] of at least 100 ms: a kubelet retry of zero would re-key without pause.
pub fn parse_positive_duration(s: &str) -> Result<Duration, String> {
    let d = parse_duration(s)?;
    if d < Duration::from_millis(100) {
        return Err(format!("{s:?} is too short: give at least 100ms, e.g. 3s"));
    }
    Ok(d)
}

/// Writes event lines.
#[derive(Clone)]
pub struct Output {
    json: bool,
}

impl Output {
    /// One event of `host` at `ip`: `kind` is a stable key for `--json`, `msg` the text.
    pub fn event(&self, host: &str, ip: &IpAddr, kind: &str, msg: &str) {
        if self.json {
            println!(
                "{}",
                json!({"time": rest::now(), "node": host, "ip": ip.to_string(), "event": kind, "message": msg})
            );
        } else {
            println!("{host} {ip}: {msg}");
        }
    }
}

/// How one machine ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// Both certificates issued.
    Done,
    /// Installation failed or a CSR was denied (exit 6).
    Failed(String),
    /// Cluster access failed (exit 4).
    Access(String),
    /// Anything else (exit 1).
    Error(String),
}

struct Machine {
    mac: String,
    ip: IpAddr,
    hostname: String,
    faults: Faults,
    second_client_csr: bool,
    kubelet_retry: Option<Duration>,
}

/// Parses and checks the flags into machines. Errors are usage errors (exit 2) or an image
/// the machines cannot play (exit 3), returned as (code, lines).
fn machines(args: &BootArgs, facts: &Facts) -> Result<Vec<Machine>, (i32, Vec<String>)> {
    let mut out = Vec::new();
    let mut seen_ip = BTreeMap::new();
    for n in &args.nodes {
        let (mac, ip) = n
            .split_once('=')
            .ok_or((2, vec![format!("--node {n:?}: expected MAC=IP")]))?;
        let ip: IpAddr = ip
            .parse()
            .map_err(|_| (2, vec![format!("--node {n:?}: {ip:?} is not an IP address")]))?;
        if let Some(prev) = seen_ip.insert(ip, mac.to_string()) {
            return Err((
                2,
                vec![format!("--node {n:?}: IP {ip} is already used by {prev}")],
            ));
        }
        let host = facts
            .host_by_mac(mac)
            .ok_or((3, vec![format!("node image: no host for MAC {mac}")]))?;
        out.push(Machine {
            mac: mac.to_ascii_lowercase(),
            ip,
            hostname: host.hostname.clone(),
            faults: Faults::default(),
            second_client_csr: false,
            kubelet_retry: args.kubelet_retry,
        });
    }
    let known: Vec<String> = out.iter().map(|m| m.hostname.clone()).collect();
    let pick = |flag: &str, v: &str| -> Result<usize, (i32, Vec<String>)> {
        out.iter().position(|m| m.hostname == v).ok_or((
            2,
            vec![format!(
                "{flag} {v:?}: no such node (booting: {})",
                known.join(", ")
            )],
        ))
    };
    type Setter = Box<dyn Fn(&mut Machine)>;
    let mut set: Vec<(usize, Setter)> = Vec::new();
    for v in &args.fail_validation {
        let (h, name) = v.split_once(':').unwrap_or((v, "ntp-synced"));
        let name = name.to_string();
        set.push((
            pick("--fail-validation", h)?,
            Box::new(move |m| m.faults.fail_validation = Some(name.clone())),
        ));
    }
    for h in &args.fail_install {
        set.push((
            pick("--fail-install", h)?,
            Box::new(|m| m.faults.fail_install = true),
        ));
    }
    for h in &args.power_off {
        set.push((pick("--power-off", h)?, Box::new(|m| m.faults.power_off = true)));
    }
    for h in &args.stall {
        set.push((pick("--stall", h)?, Box::new(|m| m.faults.stall = true)));
    }
    for h in &args.second_client_csr {
        set.push((
            pick("--second-client-csr", h)?,
            Box::new(|m| m.second_client_csr = true),
        ));
    }
    for (i, f) in set {
        f(&mut out[i]);
    }
    Ok(out)
}

/// Reads the config from the image source the flags name ([`source`]) and its facts
/// ([`facts`]), the same for every source. Err = (exit code, messages).
fn load_image(args: &BootArgs, macs: &[String]) -> Result<(Facts, String), (i32, Vec<String>)> {
    // clap drops `requires` when the required arg conflicts (through the group) with a given
    // one, so this pairing is checked here.
    if args.appliance_release.is_some() && args.config_image.is_none() {
        return Err((
            2,
            vec![
                "error: --appliance-release is the appliance disk's release; it needs --config-image".into(),
            ],
        ));
    }
    let loaded = if let Some(img) = &args.config_image {
        source::from_config_image(img, args.appliance_release.as_deref())?
    } else if let Some(dir) = &args.pxe_dir {
        source::from_pxe(&source::pxe_dir(dir)?)?
    } else if let Some(script) = &args.ipxe {
        let dir = script
            .parent()
            .filter(|p| !p.as_os_str().is_empty())
            .unwrap_or(std::path::Path::new("."));
        source::from_pxe(&source::resolve_ipxe(script, dir)?)?
    } else if let Some(initrd) = &args.initrd {
        let set = source::PxeSet {
            kernel: args.kernel.clone().expect("clap requires --kernel with --initrd"),
            initrds: vec![initrd.clone()],
            rootfs: args.rootfs.clone().expect("clap requires --rootfs with --initrd"),
            ipxe: None,
        };
        source::from_pxe(&set)?
    } else {
        source::from_iso(args.iso.as_ref().expect("clap requires one image source"))?
    };
    for n in &loaded.notes {
        eprintln!("note: {n}");
    }
    let facts = facts::read(&loaded.cfg, macs).map_err(|p| (3, p))?;
    Ok((facts, loaded.from))
}

/// Runs `boot`; returns the exit code. Builds its own multi-thread tokio runtime.
pub fn run_sync(args: BootArgs) -> anyhow::Result<i32> {
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    rt.block_on(run(args))
}

/// Runs `boot` (see the module docs); returns the exit code.
pub async fn run(args: BootArgs) -> anyhow::Result<i32> {
    let out = Output { json: args.json };
    let macs: Vec<String> = args
        .nodes
        .iter()
        .filter_map(|n| n.split_once('=').map(|(m, _)| m.to_string()))
        .collect();
    let (facts, from) = match load_image(&args, &macs) {
        Ok(x) => x,
        Err((code, lines)) => {
            if code == 3 {
                eprintln!(
                    "error: the image is refused ({} problem{}):",
                    lines.len(),
                    if lines.len() == 1 { "" } else { "s" }
                );
            }
            for l in &lines {
                eprintln!("  {l}");
            }
            return Ok(code);
        }
    };
    let machines = match machines(&args, &facts) {
        Ok(m) => m,
        Err((code, lines)) => {
            for l in &lines {
                eprintln!("error: {l}");
            }
            return Ok(code);
        }
    };
    eprintln!(
        "booting {} machine(s) from {from}: cluster {} ({})",
        machines.len(),
        facts.cluster_name,
        facts.cluster_id
    );
    let kc_path = args.dir.join("kubeconfig");
    let kubeconfig = match kube::config::Kubeconfig::read_from(&kc_path) {
        Ok(k) => k,
        Err(e) => {
            eprintln!(
                "error: cannot read {}: {e} (is --dir the simulator's up directory?)",
                kc_path.display()
            );
            return Ok(4);
        }
    };
    let facts = Arc::new(facts);
    let clock = Clock {
        scale: args.clock_scale,
        fixed_ms: args.stage_delay_ms,
    };
    let progress: Arc<Mutex<BTreeMap<String, String>>> = Arc::default();
    let mut set = tokio::task::JoinSet::new();
    for m in machines {
        let (facts, kc, out, progress) = (facts.clone(), kubeconfig.clone(), out.clone(), progress.clone());
        set.spawn(async move {
            let host = m.hostname.clone();
            let ip = m.ip;
            let outcome = run_machine(m, facts, kc, out.clone(), clock, progress).await;
            (host, ip, outcome)
        });
    }
    let mut outcomes = Vec::new();
    let deadline = tokio::time::sleep(args.timeout);
    tokio::pin!(deadline);
    let mut timed_out = false;
    while !set.is_empty() {
        tokio::select! {
            r = set.join_next() => match r {
                Some(Ok(o)) => outcomes.push(o),
                Some(Err(e)) => outcomes.push(("?".into(), IpAddr::from([0, 0, 0, 0]), Outcome::Error(format!("node task: {e}")))),
                None => break,
            },
            _ = &mut deadline => { timed_out = true; break; }
        }
    }
    set.abort_all();
    let mut code = 0;
    for (host, ip, o) in &outcomes {
        match o {
            Outcome::Done => {}
            Outcome::Failed(r) => {
                out.event(host, ip, "failed", &format!("FAILED: {r}"));
                code = pick_code(code, 6);
            }
            Outcome::Access(r) => {
                out.event(host, ip, "error", &format!("cluster access failed: {r}"));
                code = pick_code(code, 4);
            }
            Outcome::Error(r) => {
                out.event(host, ip, "error", &format!("error: {r}"));
                code = pick_code(code, 1);
            }
        }
    }
    if timed_out {
        let p = progress.lock().unwrap();
        let finished: Vec<&String> = outcomes.iter().map(|o| &o.0).collect();
        for (host, last) in p.iter().filter(|(h, _)| !finished.contains(h)) {
            eprintln!("{host}: timed out after {:?}; last: {last}", args.timeout);
        }
        code = 5;
    }
    let done = outcomes.iter().filter(|o| o.2 == Outcome::Done).count();
    eprintln!("{done} of {} machine(s) have both certificates", args.nodes.len());
    Ok(code)
}

/// Exit code precedence: 5 beats 6 (docs/simulator.md "Machines joining: boot"), otherwise the
/// first non-zero stays.
fn pick_code(cur: i32, new: i32) -> i32 {
    match (cur, new) {
        (0, n) => n,
        (6, 5) => 5,
        (c, _) => c,
    }
}

/// The least real time the live API keeps answering after the host reported its reboot: longer
/// than `monitor`'s default 5 s poll, so a monitor that polls slowly because the fast clock
/// hid the earlier stages from it still sees the report. A real host answers longer: the
/// assisted-installer reports the Rebooting stage and then reboots with `shutdown -r +1`
/// (its `ops.Reboot`), so its live system stays up about a minute; 6 s is the compressed,
/// stricter window.
pub const REBOOT_REPORT_WINDOW: Duration = Duration::from_secs(6);

/// The fast clock.
#[derive(Debug, Clone, Copy)]
struct Clock {
    scale: f64,
    fixed_ms: Option<u64>,
}

impl Clock {
    fn delay(&self, nominal_secs: u32) -> Duration {
        match self.fixed_ms {
            Some(ms) => Duration::from_millis(ms),
            None => Duration::from_secs_f64((nominal_secs as f64 * self.scale).max(0.0)),
        }
    }
}

async fn run_machine(
    m: Machine,
    facts: Arc<Facts>,
    kc: kube::config::Kubeconfig,
    out: Output,
    clock: Clock,
    progress: Arc<Mutex<BTreeMap<String, String>>>,
) -> Outcome {
    let host = m.hostname.clone();
    let ip = m.ip;
    let say = |kind: &str, msg: &str| {
        progress.lock().unwrap().insert(host.clone(), msg.to_string());
        out.event(&host, &ip, kind, msg);
    };
    let plan = stages::plan(&host, &m.faults);
    let created = rest::now();
    let api = Arc::new(rest::NodeApi {
        facts: facts.clone(),
        hostname: host.clone(),
        mac: m.mac.clone(),
        ip,
        ai_cluster_id: rest::derived_uuid(&format!("ai-cluster-{}", facts.cluster_id)),
        host_id: rest::derived_uuid(&format!("host-{}", m.mac)),
        created_at: created.clone(),
        state: Mutex::new(rest::HostState {
            step: plan[0].clone(),
            events: vec![],
            status_updated_at: created.clone(),
            stage_started_at: created,
        }),
    });
    let addr = SocketAddr::new(ip, 8090);
    let server = match rest::Server::start(addr, api.clone()).await {
        Ok(s) => s,
        Err(e) => return Outcome::Error(format!("cannot listen on {addr}: {e} (run inside the simulator's network namespace, where the machine network is local)")),
    };
    say(
        "booted",
        &format!(
            "booted (MAC {}), assisted-service API on http://{addr}{}",
            m.mac,
            rest::BASE
        ),
    );
    let mut reboot = false;
    for step in &plan {
        api.enter(step);
        let mut msg = format!("host {}", step.status);
        if let (Some(stage), Some(p)) = (step.stage, step.percent) {
            msg.push_str(&format!(" ({stage}, {p}%)"));
        }
        if let Some((id, text)) = &step.failing {
            msg.push_str(&format!(": validation {id} failing: {text}"));
        }
        say("host-status", &msg);
        match &step.end {
            End::Next => tokio::time::sleep(clock.delay(step.nominal_secs)).await,
            End::Stall => {
                say("stalled", &format!("host stays {} (simulated)", step.status));
                std::future::pending::<()>().await;
            }
            End::Failed(reason) => {
                // The live system stays up (and keeps serving) in the error state.
                tokio::time::sleep(clock.delay(step.nominal_secs)).await;
                std::mem::forget(server);
                return Outcome::Failed(format!("installation failed: {reason}"));
            }
            End::PowerOff => {
                tokio::time::sleep(clock.delay(step.nominal_secs)).await;
                server.stop().await;
                say(
                    "powered-off",
                    &format!(
                        "lost power mid-install ({addr} stops answering for good; simulated --power-off)"
                    ),
                );
                return Outcome::Failed("lost power mid-install (simulated --power-off)".into());
            }
            End::Reboot => {
                reboot = true;
                // A real host's live API still answers for seconds after it reports the reboot
                // (until its shutdown stops the service); the fast clock must not shrink that
                // below a poll of `monitor`, which records the report for `approve` (issue 14).
                tokio::time::sleep(clock.delay(step.nominal_secs).max(REBOOT_REPORT_WINDOW)).await;
                break;
            }
        }
    }
    if !reboot {
        return Outcome::Error("stage plan ended without a reboot".into());
    }
    server.stop().await;
    say(
        "rebooting",
        &format!("rebooting into the installed system ({addr} stops answering)"),
    );
    tokio::time::sleep(clock.delay(60)).await;
    match kubelet_flow(&m, &facts, &kc, &say).await {
        Ok(()) => Outcome::Done,
        Err(kubelet::KubeletError::Denied { name, reason }) => {
            Outcome::Failed(format!("CSR {name} was denied: {reason}"))
        }
        Err(e @ kubelet::KubeletError::Kube { .. }) => Outcome::Access(e.to_string()),
        Err(e) => Outcome::Error(e.to_string()),
    }
}

async fn kubelet_flow(
    m: &Machine,
    facts: &Facts,
    kc: &kube::config::Kubeconfig,
    say: &(dyn Fn(&str, &str) + Sync),
) -> Result<(), kubelet::KubeletError> {
    use kubelet::*;
    let host = &m.hostname;
    let (boot, _) = bootstrap_client(kc).await?;
    say(
        "kubelet",
        "kubelet started (bootstrap credentials: node-bootstrapper)",
    );
    let req = client_request(host)?;
    let name = create_csr(&boot, &req.pem, csr::CLIENT_SIGNER, CLIENT_USAGES).await?;
    say(
        "client-csr",
        &format!(
            "client CSR {name} sent (signer {}), waiting for approval",
            csr::CLIENT_SIGNER
        ),
    );
    let mut keys = vec![(name.clone(), req.key)];
    if m.second_client_csr {
        let req2 = client_request(host)?;
        let name2 = create_csr(&boot, &req2.pem, csr::CLIENT_SIGNER, CLIENT_USAGES).await?;
        say(
            "client-csr",
            &format!("second client CSR {name2} sent (simulated kubelet restart)"),
        );
        keys.push((name2, req2.key));
    }
    // The first of the client CSRs to be issued wins, as a restarted kubelet uses whichever key
    // it holds a certificate for. With --kubelet-retry, one that waits that long is abandoned
    // for a new key and CSR (the real kubelet's 15-minute re-keying).
    let (issued_name, cert) = loop {
        let waits = keys.iter().map(|(n, _)| {
            let boot = boot.clone();
            let n = n.clone();
            Box::pin(async move { (n.clone(), wait_certificate(&boot, &n).await) })
        });
        let first = futures::future::select_all(waits);
        let ((n, cert), _, _) = match m.kubelet_retry {
            None => first.await,
            Some(d) => match tokio::time::timeout(d, first).await {
                Ok(r) => r,
                Err(_) => {
                    let req = client_request(host)?;
                    let name = create_csr(&boot, &req.pem, csr::CLIENT_SIGNER, CLIENT_USAGES).await?;
                    let old: Vec<&str> = keys.iter().map(|(n, _)| n.as_str()).collect();
                    say(
                        "client-csr",
                        &format!(
                            "client CSR {} not approved within {d:?}: new key and client CSR {name} sent (kubelet re-keying), waiting for approval",
                            old.join(", ")
                        ),
                    );
                    keys = vec![(name, req.key)];
                    continue;
                }
            },
        };
        break (n, cert?);
    };
    let key = &keys
        .iter()
        .find(|(n, _)| *n == issued_name)
        .expect("waited on our own CSR")
        .1;
    check_issued(&cert, host, key).map_err(KubeletError::Other)?;
    say(
        "client-cert",
        &format!("client certificate issued (CSR {issued_name})"),
    );

    let client = node_client(kc, &cert, &key.serialize_pem()).await?;
    register_node(
        &client,
        kc,
        host,
        &[m.ip],
        &facts.cpu_architecture,
        &facts.openshift_version,
    )
    .await?;
    say("node-ready", &format!("Node {host} created, Ready=True"));

    let sreq = csr::serving(host, host, &[m.ip])
        .map_err(|e| KubeletError::Other(format!("building the serving CSR: {e}")))?;
    let sname = create_csr(&client, &sreq.pem, csr::SERVING_SIGNER, SERVING_USAGES).await?;
    say(
        "serving-csr",
        &format!(
            "serving CSR {sname} sent (signer {}), waiting for approval",
            csr::SERVING_SIGNER
        ),
    );
    let scert = wait_certificate(&client, &sname).await?;
    check_issued(&scert, host, &sreq.key).map_err(KubeletError::Other)?;
    say(
        "serving-cert",
        &format!("serving certificate issued (CSR {sname})"),
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        assert_eq!(parse_duration("90s").unwrap(), Duration::from_secs(90));
        assert_eq!(parse_duration("10m").unwrap(), Duration::from_secs(600));
        assert_eq!(parse_duration("250ms").unwrap(), Duration::from_millis(250));
        assert_eq!(parse_duration("3").unwrap(), Duration::from_secs(3));
        assert!(
            parse_duration("9999999999999999999999h").is_err(),
            "out of range is an error, not a panic"
        );
        assert!(parse_duration("3y").is_err());
        assert!(parse_positive_duration("0").is_err());
        assert!(parse_positive_duration("50ms").is_err());
        assert_eq!(parse_positive_duration("3s").unwrap(), Duration::from_secs(3));
    }

    #[derive(clap::Parser, Debug)]
    struct Cli {
        #[command(flatten)]
        boot: BootArgs,
    }

    #[test]
    fn exactly_one_image_source() {
        use clap::Parser;
        let p = |extra: &[&str]| {
            Cli::try_parse_from([&["boot", "--dir", "d", "--node", "m=1.2.3.4"], extra].concat())
        };
        assert!(p(&["--iso", "a"]).is_ok());
        assert!(p(&["--pxe-dir", "a"]).is_ok());
        assert!(p(&["--ipxe", "a"]).is_ok());
        assert!(p(&["--kernel", "k", "--initrd", "i", "--rootfs", "r"]).is_ok());
        assert!(p(&["--config-image", "c", "--appliance-release", "quay.io/x:1"]).is_ok());
        assert!(p(&[]).is_err(), "no source");
        assert!(p(&["--iso", "a", "--pxe-dir", "b"]).is_err(), "two sources");
        assert!(
            p(&["--initrd", "i", "--kernel", "k"]).is_err(),
            "--initrd without --rootfs"
        );
        assert!(
            p(&["--iso", "a", "--kernel", "k"]).is_err(),
            "--kernel without --initrd"
        );
        // --appliance-release without --config-image: clap lets it through (see load_image).
        let a = p(&["--iso", "a", "--appliance-release", "x"]).unwrap().boot;
        assert_eq!(load_image(&a, &[]).unwrap_err().0, 2);
    }

    #[test]
    fn exit_code_precedence() {
        assert_eq!(pick_code(0, 6), 6);
        assert_eq!(pick_code(6, 5), 5);
        assert_eq!(pick_code(5, 6), 5);
        assert_eq!(pick_code(4, 1), 4);
    }
}
