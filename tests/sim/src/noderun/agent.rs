//! The discovery agent of a run-node machine: the REAL assisted-installer-agent where it is
//! built (`scripts/real-components.sh agent`, pinned by `tests/real/agent/go.mod`; found at
//! `$AGENT_DAY2_REAL_AGENT_BIN`, else `${XDG_CACHE_HOME:-~/.cache}/agent-day2/real/agent-<commit>/bin`),
//! with only what it touches outside the machine stood in; else (no build) the stand-in below.
//! The machine's first line says which (`<mac>: discovery agent: <module>@<version> (the real
//! agent)` or `... the stand-in of agent-day2-sim (no real agent: <why>)`).
//!
//! ## The real agent
//! It runs as upstream runs it: agent.service copies `/usr/bin/agent` out of the node-agent
//! image and runs it on the machine; the agent registers the host (its ID: the machine's SMBIOS
//! system UUID, read by ghw) and starts `next_step_runner` in a container
//! (`nsenter --target 1 ... podman run ... <node-agent image> next_step_runner`), which runs the
//! service's steps. Real, with the real binary and its real code paths:
//! - **inventory** (`podman run ... <image> inventory`: ghw, lscpu, netlink, /proc, /sys, udev
//!   database, `/dev/disk`, `findmnt /sysroot`), **domain-resolution** (Go's resolver: the
//!   machine's `/etc/hosts`, filled by run-node `--dns`), **api-vip-connectivity-check** (the
//!   Ignition download from the cluster and its filter), **ntp-synchronizer** (the step;
//!   chronyd is stood in, below), **connectivity-check** (no remote hosts here: each machine runs
//!   its own service, with itself the only host), **free-network-addresses** (the step; nmap is
//!   stood in), **installation-disk-speed-check** (the step; fio is stood in),
//!   **container-image-availability** (its `podman pull`s: only the mapped component images
//!   are pullable, others fail as on a disconnected site), **install** (the step: `podman
//!   images`, `podman run ... <installer image> --role ...`; the installer is stood in),
//!   registration, polling, replies, `next_instruction_seconds` as the service says.
//!
//! The machine the agent reads ([`machine_setup`], run while the machine's root is built):
//! - its hardware at the files the agent reads, from run-node's `--cpus`, `--memory-gib`,
//!   `--disk-gib` (the real inventory code judges them): `/proc/meminfo` (MemTotal),
//!   `/sys/devices/system/memory` (ghw's physical memory: 128 MiB blocks online),
//!   `/proc/cpuinfo` and `/sys/devices/system/cpu/{possible,present,online}` (lscpu's count),
//!   `/sys/class/dmi/id` (SMBIOS: Red Hat KVM, the system UUID run-node derives from the MAC,
//!   no board serial), one virtio disk `vda` (`/sys/block/vda`, its udev database entry
//!   `/run/udev/data/b252:0` with `ID_PATH=pci-0000:04:00.0`, `/dev/vda` and its
//!   `/dev/disk/by-path`, `/dev/disk/by-id` links; `/dev` is the machine's own tmpfs with the
//!   host's character devices: no host disk is visible), the NIC at a PCI device path in
//!   `/sys/class/net` (it is a veth, whose `devices/virtual/` path the agent would report as a
//!   virtual interface, which the service leaves out of the host's NICs), `/sysroot` mounted
//!   from `/dev/loop0` (a live system: `boot.device_type` ephemeral) or `/dev/vda4` (the
//!   appliance's installed disk: persistent);
//! - the live system's services the agent calls: `nsenter` (below), `chronyc` (chronyd's
//!   client: the machine's clock is the host kernel's, which the host keeps synchronised, so
//!   the configured sources are reported synchronised), journald (`/run/systemd/journal/socket`,
//!   read into the machine's `journal/journald.log`: the agent logs only there by default).
//!
//! Stood in, each for one thing that would leave the machine (tools of the node-agent image,
//! replaced in the image root by [`super::podman`], or of the machine):
//! - `nsenter --target 1 ...` (the agent's `ExecutePrivileged`): enters the machine's PID 1
//!   namespaces and the machine's root (PID 1 keeps every process chrooted there; util-linux's
//!   nsenter would land in the host's root and run the host's podman);
//! - `fio` of the disk speed check: it writes 22 MiB to the installation disk; the stand-in
//!   writes nothing and answers fio's JSON (99th percentile fdatasync 2 ms), so the real step
//!   answers `{"io_sync_duration":2,"path":...}`;
//! - `nmap -sn -PR` of the free-addresses step: it ARP-scans the host's LAN; the stand-in
//!   answers nmap's XML from the machine's own addresses and neighbour table;
//! - the installer image's entrypoint (assisted-installer: writes the disk, reboots): it says
//!   so and keeps running, as the installer does until its reboot, so the install step never
//!   replies and the host stays `installing`.
//!
//! Missing here (the image's OS layer is the host's `/usr`): `dmidecode` (memory then comes
//! from ghw, as the agent falls back), `sg_inq` (disks report no UUID), `biosdevname`,
//! `arping`/`ping` (only used with remote hosts, none here), the PCI ids database (no GPUs).
//! The machine's `/etc/resolv.conf` is the host's: names not in `/etc/hosts` time out.
//!
//! ## The stand-in (no real agent built)
//! It does what the agent does against the REAL service, through its REST API only
//! (swagger `v2RegisterHost`, `v2GetNextSteps`, `v2PostStepReply`; header `X-Secret-Key` with
//! `PULL_SECRET_TOKEN` from its environment): registers the host under the machine's SMBIOS
//! UUID, then polls for instructions (`?timestamp=` the machine's clock) and answers each step
//! with what this machine would report: its interfaces, addresses and routes (read from the
//! kernel of its network namespace), hostname, and the hardware run-node gave it (CPU cores,
//! memory, one virtio disk `/dev/vda`). Domain names resolve through the machine's resolver
//! (`getent ahosts`; run-node `--dns` fills /etc/hosts), the API connectivity check really
//! downloads the Ignition from the URL the service names (with its CA) and reports it filtered
//! as the real agent's `apivip_check` does. It never writes a
//! status: the service's own validations decide. A step type it cannot answer is answered
//! with exit code 1 and an error naming it (and logged).
//!
//! Flags as the real agent's: `--url`, `--infra-env-id`, `--agent-version`, `--insecure`,
//! `--cacert`; others are reported and ignored.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use serde_json::{json, Value};

use super::mounts::RUN_DIR;

fn log(msg: &str) {
    eprintln!("agent: {msg}");
}

/// One HTTP exchange through curl: (status, body). Errors: curl could not connect.
fn http(
    method: &str,
    url: &str,
    headers: &[(String, String)],
    body: Option<&str>,
    cacert: Option<&str>,
) -> Result<(u16, String), String> {
    let mut c = Command::new("curl");
    c.args([
        "-sS",
        "-X",
        method,
        "-o",
        "-",
        "-w",
        "\n%{http_code}",
        "--max-time",
        "30",
    ]);
    for (k, v) in headers {
        c.arg("-H").arg(format!("{k}: {v}"));
    }
    if let Some(ca) = cacert {
        c.arg("--cacert").arg(ca);
    }
    if body.is_some() {
        c.args(["-H", "Content-Type: application/json", "--data-binary", "@-"]);
    }
    c.arg(url)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut ch = c.spawn().map_err(|e| format!("curl: {e}"))?;
    if let Some(b) = body {
        let _ = ch.stdin.take().unwrap().write_all(b.as_bytes());
    } else {
        drop(ch.stdin.take());
    }
    let o = ch.wait_with_output().map_err(|e| format!("curl: {e}"))?;
    let out = String::from_utf8_lossy(&o.stdout).into_owned();
    let (b, code) = out.rsplit_once('\n').unwrap_or(("", &out));
    let code: u16 = code.trim().parse().unwrap_or(0);
    if code == 0 {
        return Err(String::from_utf8_lossy(&o.stderr).trim().to_string());
    }
    Ok((code, b.to_string()))
}

fn machine() -> Value {
    std::fs::read(format!("{RUN_DIR}/machine.json"))
        .ok()
        .and_then(|b| serde_json::from_slice(&b).ok())
        .unwrap_or(Value::Null)
}

fn ip_json(args: &[&str]) -> Value {
    Command::new("ip")
        .args(args)
        .output()
        .ok()
        .and_then(|o| serde_json::from_slice(&o.stdout).ok())
        .unwrap_or(Value::Array(vec![]))
}

fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .unwrap_or_default()
        .trim()
        .to_string()
}

/// The inventory of this machine (models.Inventory).
fn inventory(m: &Value) -> Value {
    let hw = &m["hardware"];
    let mut ifaces = vec![];
    for l in ip_json(&["-j", "addr", "show"])
        .as_array()
        .cloned()
        .unwrap_or_default()
    {
        let name = l["ifname"].as_str().unwrap_or("").to_string();
        if name == "lo" || name.is_empty() {
            continue;
        }
        let addrs = |fam: &str| -> Vec<String> {
            l["addr_info"]
                .as_array()
                .into_iter()
                .flatten()
                .filter(|a| a["family"] == fam && a["scope"] == "global")
                .map(|a| format!("{}/{}", a["local"].as_str().unwrap_or(""), a["prefixlen"]))
                .collect()
        };
        let flags: Vec<String> = l["flags"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|f| f.as_str())
            .map(|f| f.to_ascii_lowercase())
            .collect();
        ifaces.push(json!({
            "name": name, "mac_address": l["address"], "mtu": l["mtu"], "flags": flags,
            "ipv4_addresses": addrs("inet"), "ipv6_addresses": addrs("inet6"),
            "has_carrier": l["operstate"] == "UP", "speed_mbps": 10000, "type": "physical",
            "vendor": "0x1af4", "product": "0x0001", "biosdevname": "", "client_id": "",
        }));
    }
    let mut routes = vec![];
    for (fam, n) in [("-4", 2), ("-6", 10)] {
        for r in ip_json(&["-j", fam, "route", "show"])
            .as_array()
            .cloned()
            .unwrap_or_default()
        {
            let dst = match r["dst"].as_str() {
                Some("default") => {
                    if n == 2 {
                        "0.0.0.0".to_string()
                    } else {
                        "::".to_string()
                    }
                }
                Some(d) => d.split('/').next().unwrap_or(d).to_string(),
                None => continue,
            };
            routes.push(json!({
                "destination": dst, "gateway": r["gateway"].as_str().unwrap_or(if n == 2 { "0.0.0.0" } else { "::" }),
                "interface": r["dev"], "family": n, "metric": r["metric"].as_i64().unwrap_or(0),
            }));
        }
    }
    let disk_bytes = hw["disk_bytes"].as_u64().unwrap_or(0);
    json!({
        "hostname": hostname(),
        "bmc_address": "0.0.0.0", "bmc_v6address": "::/0",
        "boot": {"current_boot_mode": "uefi", "secure_boot_state": "Disabled", "device_type": hw["boot_device_type"].as_str().unwrap_or("ephemeral")},
        "cpu": {"architecture": "x86_64", "count": hw["cpus"], "frequency": 2400.0, "model_name": "Intel Xeon Processor (Icelake)",
                "flags": ["fpu", "vme", "de", "pse", "tsc", "msr", "pae", "mce", "cx8", "apic", "sep", "mtrr", "pge", "mca", "cmov", "pat", "pse36", "clflush", "mmx", "fxsr", "sse", "sse2", "ss", "syscall", "nx", "pdpe1gb", "rdtscp", "lm", "constant_tsc", "rep_good", "nopl", "xtopology", "cpuid", "tsc_known_freq", "pni", "pclmulqdq", "vmx", "ssse3", "fma", "cx16", "pcid", "sse4_1", "sse4_2", "x2apic", "movbe", "popcnt", "aes", "xsave", "avx", "f16c", "rdrand", "hypervisor", "lahf_lm", "abm", "avx2", "avx512f"]},
        "memory": {"physical_bytes": hw["memory_bytes"], "usable_bytes": hw["memory_bytes"].as_u64().unwrap_or(0) / 100 * 97, "physical_bytes_method": "dmidecode"},
        "disks": [{
            "id": "/dev/disk/by-path/pci-0000:04:00.0", "by_path": "/dev/disk/by-path/pci-0000:04:00.0", "by_id": "",
            "name": "vda", "path": "/dev/vda", "drive_type": "HDD", "size_bytes": disk_bytes, "bootable": false,
            "removable": false, "serial": format!("vd-{}", m["mac"].as_str().unwrap_or("").replace(':', "")),
            "model": "", "vendor": "0x1af4", "wwn": "", "hctl": "", "smart": "", "has_uuid": false,
            "is_installation_media": false, "holders": "", "io_perf": {},
        }],
        "gpus": [],
        "interfaces": ifaces,
        "routes": routes,
        "system_vendor": {"manufacturer": "Red Hat", "product_name": "KVM", "serial_number": hw["system_uuid"], "virtual": true},
        "tpm_version": "none",
    })
}

/// The worker Ignition as the real agent hands it to the service: `systemd.units` emptied,
/// `storage.files` reduced to `/etc/kubernetes/manifests/coredns.yaml`,
/// `/etc/kubernetes/manifests/keepalived.yaml` (the service reads their presence as managed
/// networking) and `/etc/kubernetes/kubeconfig` (its server address), the rest kept.
fn filter_ignition(ign: &Value) -> Value {
    const KEEP: [&str; 3] = [
        "/etc/kubernetes/manifests/coredns.yaml",
        "/etc/kubernetes/manifests/keepalived.yaml",
        "/etc/kubernetes/kubeconfig",
    ];
    let mut out = ign.clone();
    if let Some(files) = out.pointer_mut("/storage/files").and_then(Value::as_array_mut) {
        files.retain(|f| f["path"].as_str().is_some_and(|p| KEEP.contains(&p)));
    }
    if let Some(units) = out.pointer_mut("/systemd/units").and_then(Value::as_array_mut) {
        units.clear();
    }
    out
}

fn resolve(name: &str) -> (Vec<String>, Vec<String>) {
    let o = Command::new("getent").args(["ahosts", name]).output();
    let mut v4 = vec![];
    let mut v6 = vec![];
    if let Ok(o) = o {
        for l in String::from_utf8_lossy(&o.stdout).lines() {
            let a = l.split_whitespace().next().unwrap_or("").to_string();
            if a.contains(':') {
                if !v6.contains(&a) {
                    v6.push(a)
                }
            } else if !a.is_empty() && !v4.contains(&a) {
                v4.push(a)
            }
        }
    }
    (v4, v6)
}

/// Answers one step: (exit code, output JSON text, error text).
fn answer(step: &Value, m: &Value) -> (i64, String, String) {
    let ty = step["step_type"].as_str().unwrap_or("");
    let args: Vec<String> = step["args"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|a| a.as_str().map(String::from))
        .collect();
    // Most steps carry their request as the last argument (JSON).
    let req: Value = args
        .iter()
        .rev()
        .find_map(|a| serde_json::from_str(a).ok())
        .unwrap_or(Value::Null);
    match ty {
        "inventory" => (0, inventory(m).to_string(), String::new()),
        "free-network-addresses" => {
            let nets: Vec<Value> = req.as_array().cloned().unwrap_or_default();
            let out: Vec<Value> = nets
                .iter()
                .filter_map(|n| n.as_str().or_else(|| n["network"].as_str()))
                .map(|n| json!({"network": n, "free_addresses": []}))
                .collect();
            (0, Value::Array(out).to_string(), String::new())
        }
        "connectivity-check" => {
            // Remote hosts: the ones this machine could ping (none are on a shared service here).
            let hosts: Vec<Value> = req["remote_hosts"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|h| json!({"host_id": h["host_id"], "l2_connectivity": [], "l3_connectivity": [], "mtu_report": []}))
                .collect();
            (0, json!({"remote_hosts": hosts}).to_string(), String::new())
        }
        "ntp-synchronizer" => {
            // The sources chronyd would use (/etc/chrony.conf server/pool lines, plus the one
            // the request names); the machine's clock is the host's, which is synchronised.
            let conf = std::fs::read_to_string("/etc/chrony.conf").unwrap_or_default();
            let mut srcs: Vec<Value> = conf
                .lines()
                .filter_map(|l| {
                    let mut w = l.split_whitespace();
                    match w.next() {
                        Some("server") | Some("pool") => w
                            .next()
                            .map(|h| json!({"source_name": h, "source_state": "synced"})),
                        _ => None,
                    }
                })
                .collect();
            if let Some(extra) = req["ntp_source"].as_str().filter(|s| !s.is_empty()) {
                srcs.push(json!({"source_name": extra, "source_state": "synced"}));
            }
            (0, json!({"ntp_sources": srcs}).to_string(), String::new())
        }
        "installation-disk-speed-check" => {
            let path = req["path"].as_str().unwrap_or("/dev/vda");
            (
                0,
                json!({"path": path, "io_sync_duration": 4}).to_string(),
                String::new(),
            )
        }
        "domain-resolution" => {
            let mut res = vec![];
            for d in req["domains"].as_array().into_iter().flatten() {
                let name = d["domain_name"].as_str().unwrap_or("");
                let (v4, v6) = resolve(name.trim_end_matches('.'));
                res.push(
                    json!({"domain_name": name, "ipv4_addresses": v4, "ipv6_addresses": v6, "cnames": []}),
                );
            }
            (0, json!({"resolutions": res}).to_string(), String::new())
        }
        "api-vip-connectivity-check" => {
            let url = req["url"].as_str().unwrap_or("").to_string();
            let mut headers = vec![(
                "Accept".to_string(),
                "application/vnd.coreos.ignition+json; version=3.2.0".to_string(),
            )];
            if let Some(t) = req["ignition_endpoint_token"].as_str().filter(|t| !t.is_empty()) {
                headers.push(("Authorization".into(), format!("Bearer {t}")));
            }
            for h in req["request_headers"].as_array().into_iter().flatten() {
                if let (Some(k), Some(v)) = (h["key"].as_str(), h["value"].as_str()) {
                    headers.push((k.into(), v.into()));
                }
            }
            let ca_path = format!("{RUN_DIR}/agent-ignition-ca.pem");
            let ca = req["ca_certificate"].as_str().filter(|c| !c.is_empty()).map(|c| {
                use base64::Engine;
                let pem = base64::engine::general_purpose::STANDARD
                    .decode(c)
                    .unwrap_or_else(|_| c.as_bytes().to_vec());
                let _ = std::fs::create_dir_all(RUN_DIR);
                let _ = std::fs::write(&ca_path, pem);
                ca_path.clone()
            });
            // As the real agent's apivip_check: 2xx with a JSON body, parsed as Ignition, then
            // filtered to what the service reads (no units; files: only the on-prem networking
            // static pods and the bootstrap kubeconfig; storage.luks kept).
            let r = match http("GET", &url, &headers, None, ca.as_deref()) {
                Ok((code, body)) if (200..300).contains(&code) => {
                    match serde_json::from_str::<Value>(&body) {
                        Ok(ign)
                            if ign["ignition"]["version"]
                                .as_str()
                                .is_some_and(|v| v.starts_with("3.")) =>
                        {
                            json!({"is_success": true, "url": url, "ignition": filter_ignition(&ign).to_string()})
                        }
                        _ => {
                            json!({"is_success": false, "url": url, "download_error": format!("response is not a valid ignition file:\n{}", body.chars().take(200).collect::<String>())})
                        }
                    }
                }
                Ok((code, body)) => {
                    json!({"is_success": false, "url": url, "download_error": format!("ignition file download failed: bad status code: {code}. server response: {}", body.chars().take(200).collect::<String>())})
                }
                Err(e) => {
                    json!({"is_success": false, "url": url, "download_error": format!("ignition file download failed: request failed: {e}")})
                }
            };
            log(&format!(
                "api-vip-connectivity-check {url}: {}",
                if r["is_success"] == true {
                    "downloaded".to_string()
                } else {
                    r["download_error"].to_string()
                }
            ));
            (0, r.to_string(), String::new())
        }
        "container-image-availability" => {
            let imgs: Vec<Value> = req["images"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|i| i.as_str())
                .map(|i| json!({"name": i, "result": "failure", "download_rate": 0.0, "size_bytes": 0, "time": 0.0}))
                .collect();
            log("container-image-availability: the stand-in pulls no images; reported as failures");
            (0, json!({"images": imgs}).to_string(), String::new())
        }
        "install" => {
            log("install step received: the installation to disk is not simulated past this point");
            (0, String::new(), String::new())
        }
        "next-step-runner" | "upgrade-agent" | "stop-installation" | "logs-gather" => {
            (0, String::new(), String::new())
        }
        other => {
            let e = format!("step type {other} is not answered by the discovery agent stand-in");
            log(&e);
            (1, String::new(), e)
        }
    }
}

/// `agent-day2-sim discovery-agent ARGS...`: runs until killed; returns 2 on bad flags.
pub fn main(args: &[String]) -> i32 {
    let mut flags: BTreeMap<String, String> = BTreeMap::new();
    let mut i = 0;
    while i < args.len() {
        let a = args[i].trim_start_matches('-').to_string();
        if let Some((k, v)) = a.split_once('=') {
            flags.insert(k.into(), v.into());
            i += 1;
        } else if i + 1 < args.len() && !args[i + 1].starts_with("--") {
            flags.insert(a, args[i + 1].clone());
            i += 2;
        } else {
            flags.insert(a, "true".into());
            i += 1;
        }
    }
    for k in flags.keys() {
        if ![
            "url",
            "infra-env-id",
            "agent-version",
            "insecure",
            "cacert",
            "with-text-logging",
            "with-journal-logging",
        ]
        .contains(&k.as_str())
        {
            log(&format!("flag --{k} is not used by the stand-in"));
        }
    }
    let Some(url) = flags.get("url").cloned() else {
        log("--url is required");
        return 2;
    };
    let Some(infra) = flags.get("infra-env-id").cloned().filter(|s| !s.is_empty()) else {
        log("--infra-env-id is required (empty: the unit gave no INFRA_ENV_ID)");
        return 2;
    };
    let version = flags.get("agent-version").cloned().unwrap_or_default();
    let token = std::env::var("PULL_SECRET_TOKEN").unwrap_or_default();
    if token.is_empty() {
        log("PULL_SECRET_TOKEN is empty in the agent's environment: the service will refuse it");
    }
    let m = machine();
    let scale = m["time_scale"].as_f64().unwrap_or(1.0);
    let host_id = m["hardware"]["system_uuid"].as_str().unwrap_or("").to_string();
    let base = format!(
        "{}/api/assisted-install/v2/infra-envs/{infra}/hosts",
        url.trim_end_matches('/')
    );
    let hdr = vec![
        ("X-Secret-Key".to_string(), token.clone()),
        ("discovery_agent_version".to_string(), version.clone()),
    ];
    let cacert = flags.get("cacert").cloned();
    // Register (retry as the agent does).
    loop {
        let body = json!({"host_id": host_id, "discovery_agent_version": version}).to_string();
        match http("POST", &base, &hdr, Some(&body), cacert.as_deref()) {
            Ok((201, b)) => {
                log(&format!(
                    "registered host {host_id}: {}",
                    b.chars().take(200).collect::<String>()
                ));
                break;
            }
            Ok((c, b)) => log(&format!("register host: HTTP {c}: {}", b.trim())),
            Err(e) => log(&format!("register host: {e}")),
        }
        std::thread::sleep(Duration::from_secs_f64((5.0 * scale).max(0.2)));
    }
    let mut seen_types: Vec<String> = vec![];
    loop {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs();
        let mut wait = 5.0;
        match http(
            "GET",
            &format!("{base}/{host_id}/instructions?timestamp={now}"),
            &hdr,
            None,
            cacert.as_deref(),
        ) {
            Ok((200, b)) => {
                let steps: Value = serde_json::from_str(&b).unwrap_or(Value::Null);
                wait = steps["next_instruction_seconds"].as_f64().unwrap_or(5.0);
                for s in steps["instructions"].as_array().into_iter().flatten() {
                    let ty = s["step_type"].as_str().unwrap_or("").to_string();
                    if !seen_types.contains(&ty) {
                        log(&format!(
                            "first {ty} step: args {}",
                            s["args"].to_string().chars().take(400).collect::<String>()
                        ));
                        seen_types.push(ty.clone());
                    }
                    let (code, output, error) = answer(s, &m);
                    let reply = json!({"step_type": ty, "step_id": s["step_id"], "exit_code": code, "output": output, "error": error});
                    match http(
                        "POST",
                        &format!("{base}/{host_id}/instructions"),
                        &hdr,
                        Some(&reply.to_string()),
                        cacert.as_deref(),
                    ) {
                        Ok((204, _)) => {}
                        Ok((c, b)) => log(&format!(
                            "reply to {ty} step {}: HTTP {c}: {}",
                            s["step_id"],
                            b.trim()
                        )),
                        Err(e) => log(&format!("reply to {ty}: {e}")),
                    }
                }
                if steps["post_step_action"] == "exit" {
                    log("the service says exit");
                    return 0;
                }
            }
            Ok((c, b)) => log(&format!("next steps: HTTP {c}: {}", b.trim())),
            Err(e) => log(&format!("next steps: {e}")),
        }
        std::thread::sleep(Duration::from_secs_f64((wait * scale).clamp(0.2, 60.0)));
    }
}

// --- the real discovery agent on the machine ---------------------------------------------------

/// Inside the machine: the real discovery agent's directory (a read-only bind of
/// `scripts/real-components.sh agent`'s `bin/`: `agent`, `versions`).
pub const REAL_AGENT: &str = "/usr/libexec/agent-day2-sim/real-agent";
/// The pinned commit of `tests/real/agent/go.mod` (the default directory's name).
pub const AGENT_COMMIT: &str = "a272a11d4f78";
/// Environment variable naming the real agent's directory (default: the script's output,
/// `${XDG_CACHE_HOME:-~/.cache}/agent-day2/real/agent-<commit>/bin`).
pub const AGENT_BIN_ENV: &str = "AGENT_DAY2_REAL_AGENT_BIN";
/// The names the node-agent image gives the one `agent` binary (upstream's Dockerfile links
/// them to `/usr/bin/agent`; the binary acts by the name it is called as).
pub const AGENT_NAMES: [&str; 5] = [
    "next_step_runner",
    "inventory",
    "free_addresses",
    "disk_speed_check",
    "logs_sender",
];
/// The disk the machine has (its by-path id: a virtio disk on PCI slot 4, as libvirt gives it).
const DISK_BY_PATH: &str = "pci-0000:04:00.0";
/// The disk's block device numbers (virtio-blk's dynamic major, first disk).
const DISK_DEV: &str = "252:0";

/// The real agent's directory: `$AGENT_DAY2_REAL_AGENT_BIN`, else the script's default output.
pub fn default_agent_bin() -> PathBuf {
    if let Some(d) = std::env::var_os(AGENT_BIN_ENV) {
        return PathBuf::from(d);
    }
    let cache = std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(std::env::var_os("HOME").unwrap_or_else(|| "/root".into())).join(".cache")
        });
    cache
        .join("agent-day2/real")
        .join(format!("agent-{AGENT_COMMIT}"))
        .join("bin")
}

/// The `agent: <module>@<version> ...` line of the real agent's `versions` file, when `dir`
/// holds a built agent; else what is missing and how to build it.
pub fn real_agent(dir: &Path) -> Result<String, String> {
    let v = dir.join("versions");
    let text = std::fs::read_to_string(&v).map_err(|e| {
        format!(
            "{}: {e}: build it with scripts/real-components.sh agent (or set ${AGENT_BIN_ENV})",
            v.display()
        )
    })?;
    if !dir.join("agent").is_file() {
        return Err(format!(
            "{} is missing (scripts/real-components.sh agent builds it)",
            dir.join("agent").display()
        ));
    }
    text.lines()
        .find_map(|l| l.strip_prefix("agent: "))
        .map(|l| l.split_whitespace().next().unwrap_or(l).to_string())
        .ok_or_else(|| format!("{}: no 'agent: <module>@<version>' line", v.display()))
}

fn put(path: &Path, mode: u32, data: &[u8]) -> Result<(), String> {
    use std::os::unix::fs::PermissionsExt;
    if let Some(d) = path.parent() {
        std::fs::create_dir_all(d).map_err(|e| format!("mkdir {}: {e}", d.display()))?;
    }
    let _ = std::fs::remove_file(path);
    std::fs::write(path, data).map_err(|e| format!("write {}: {e}", path.display()))?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))
        .map_err(|e| format!("chmod {}: {e}", path.display()))
}

/// A `/bin/sh` script at `path` that runs the stand-in `tool` (`agent-day2-sim standin TOOL`).
pub fn standin_script(path: &Path, tool: &str) -> Result<(), String> {
    put(
        path,
        0o755,
        format!(
            "#!/bin/sh\n# {tool} stand-in of agent-day2-sim run-node (see agent-day2-sim's noderun::agent)\nexec {} standin {tool} \"$@\"\n",
            super::mounts::SIM_EXE
        )
        .as_bytes(),
    )
}

/// Makes the machine at `root` (its mount namespace, after the root is built) what the real
/// discovery agent reads: the real agent's binaries, the live system's `nsenter`, `chronyc`
/// and journald stood in, and the hardware of [`super::Hardware`] at the files the agent's
/// inventory reads (see the module docs). Prints which discovery agent the machine runs.
pub fn machine_setup(spec: &super::spec::Spec, root: &Path) -> Result<(), String> {
    use super::mounts::bind;
    let inside = |p: &str| root.join(p.trim_start_matches('/'));
    let dir = default_agent_bin();
    match real_agent(&dir) {
        Ok(v) => {
            bind(&dir, &inside(REAL_AGENT), true)?;
            println!("{}: discovery agent: {v} (the real agent)", spec.label);
        }
        Err(e) => println!(
            "{}: discovery agent: the stand-in of agent-day2-sim (no real agent: {e})",
            spec.label
        ),
    }
    // The live system's removable-media mount point (the agent's step containers bind it).
    std::fs::create_dir_all(inside("/run/media")).map_err(|e| e.to_string())?;
    standin_script(&inside("/usr/bin/nsenter"), "nsenter")?;
    standin_script(&inside("/usr/bin/chronyc"), "chronyc")?;
    hardware(spec, root)?;
    journald(spec, root)
}

/// The hardware files (see the module docs).
fn hardware(spec: &super::spec::Spec, root: &Path) -> Result<(), String> {
    use super::mounts::{bind, mount};
    let hw = &spec.hardware;
    let inside = |p: &str| root.join(p.trim_start_matches('/'));
    let stage = inside(&format!("{RUN_DIR}/hardware"));
    std::fs::create_dir_all(&stage).map_err(|e| format!("mkdir {}: {e}", stage.display()))?;

    // Memory: /proc/meminfo with MemTotal the machine's (MemFree, MemAvailable at most it).
    let total_kb = hw.memory_bytes / 1024;
    let host = std::fs::read_to_string("/proc/meminfo").map_err(|e| format!("/proc/meminfo: {e}"))?;
    let mut meminfo = String::new();
    for l in host.lines() {
        let key = l.split(':').next().unwrap_or("");
        let kb = l
            .split_whitespace()
            .nth(1)
            .and_then(|v| v.parse::<u64>().ok())
            .unwrap_or(0);
        match key {
            "MemTotal" => meminfo.push_str(&format!("MemTotal:       {total_kb:>8} kB\n")),
            "MemFree" | "MemAvailable" => meminfo.push_str(&format!(
                "{:<15} {:>8} kB\n",
                format!("{key}:"),
                kb.min(total_kb / 100 * 95)
            )),
            _ => {
                meminfo.push_str(l);
                meminfo.push('\n');
            }
        }
    }
    put(&stage.join("meminfo"), 0o444, meminfo.as_bytes())?;
    bind(&stage.join("meminfo"), &inside("/proc/meminfo"), true)?;

    // The kernel's memory blocks (what ghw counts as physical memory): 128 MiB blocks, all
    // online, as many as the machine's memory holds.
    let blocks = inside("/sys/devices/system/memory");
    if blocks.is_dir() {
        mount("tmpfs", &blocks, "tmpfs", 0, Some("mode=0755"))?;
        put(&blocks.join("block_size_bytes"), 0o444, b"8000000\n")?;
        for k in 0..(hw.memory_bytes >> 27).max(1) {
            put(&blocks.join(format!("memory{k}/state")), 0o644, b"online\n")?;
            put(&blocks.join(format!("memory{k}/online")), 0o644, b"1\n")?;
        }
    }

    // CPUs: /proc/cpuinfo with `cpus` processors (the host's first one repeated), and the
    // kernel's possible/present/online CPU lists (what lscpu counts).
    let n = hw.cpus.max(1);
    let host = std::fs::read_to_string("/proc/cpuinfo").map_err(|e| format!("/proc/cpuinfo: {e}"))?;
    let first = host.split("\n\n").next().unwrap_or("").to_string();
    let mut cpuinfo = String::new();
    for i in 0..n {
        for l in first.lines() {
            let key = l.split(':').next().unwrap_or("").trim();
            let v = match key {
                "processor" | "core id" | "apicid" | "initial apicid" => Some(i.to_string()),
                "cpu cores" | "siblings" => Some(n.to_string()),
                "physical id" => Some("0".to_string()),
                _ => None,
            };
            match v {
                Some(v) => cpuinfo.push_str(&format!("{}: {v}\n", l.split(':').next().unwrap_or(""))),
                None => {
                    cpuinfo.push_str(l);
                    cpuinfo.push('\n');
                }
            }
        }
        cpuinfo.push('\n');
    }
    put(&stage.join("cpuinfo"), 0o444, cpuinfo.as_bytes())?;
    bind(&stage.join("cpuinfo"), &inside("/proc/cpuinfo"), true)?;
    let list = if n == 1 {
        "0\n".to_string()
    } else {
        format!("0-{}\n", n - 1)
    };
    put(&stage.join("cpu-list"), 0o444, list.as_bytes())?;
    for f in ["possible", "present", "online"] {
        let p = inside(&format!("/sys/devices/system/cpu/{f}"));
        if p.exists() {
            bind(&stage.join("cpu-list"), &p, true)?;
        }
    }

    // /sys/class: the machine's own classes (its network interfaces), with `dmi` (the SMBIOS
    // tables: the system UUID is the agent's host ID) and `block` the machine's.
    let classes = stage.join("sysfs-class");
    bind(&inside("/sys/class"), &classes, false)?;
    mount("tmpfs", &inside("/sys/class"), "tmpfs", 0, Some("mode=0755"))?;
    for e in std::fs::read_dir(&classes)
        .map_err(|e| format!("{}: {e}", classes.display()))?
        .flatten()
    {
        let name = e.file_name().to_string_lossy().into_owned();
        if name == "dmi" || name == "block" {
            continue;
        }
        if name == "net" {
            continue;
        }
        bind(&e.path(), &inside(&format!("/sys/class/{name}")), false)?;
    }
    // /sys/class/net: the machine's NIC (a veth here, whose sysfs device sits under
    // devices/virtual/, which the agent reports as a virtual interface and the service then
    // leaves out) at a PCI device path, as a virtio NIC's; the device directory is the veth's
    // own (its carrier, speed, MTU). Other interfaces as the kernel shows them.
    let net = inside("/sys/class/net");
    std::fs::create_dir_all(&net).map_err(|e| e.to_string())?;
    for e in std::fs::read_dir(classes.join("net"))
        .map_err(|e| format!("{}: {e}", classes.display()))?
        .flatten()
    {
        let name = e.file_name().to_string_lossy().into_owned();
        let link = std::fs::read_link(e.path()).map_err(|e| format!("/sys/class/net/{name}: {e}"))?;
        if name == spec.ifname {
            let pci = format!(".devices/pci0000:00/0000:00:02.0/0000:01:00.0/virtio1/net/{name}");
            let real = inside("/sys").join(link.to_string_lossy().trim_start_matches("../"));
            bind(&real, &inside("/sys/class").join(&pci), false)?;
            std::os::unix::fs::symlink(format!("../{pci}"), net.join(&name)).map_err(|e| e.to_string())?;
        } else {
            std::os::unix::fs::symlink(&link, net.join(&name)).map_err(|e| e.to_string())?;
        }
    }
    let dmi = [
        ("product_uuid", hw.system_uuid.clone()),
        ("product_name", "KVM".to_string()),
        ("product_version", "RHEL-9.4.0 PC (Q35 + ICH9, 2009)".to_string()),
        ("product_serial", String::new()),
        ("product_family", "Red Hat Enterprise Linux".to_string()),
        ("product_sku", String::new()),
        ("sys_vendor", "Red Hat".to_string()),
        ("board_serial", String::new()),
        ("board_vendor", String::new()),
        ("board_name", String::new()),
        ("board_version", String::new()),
        ("board_asset_tag", String::new()),
        ("chassis_type", "1".to_string()),
        ("chassis_vendor", "QEMU".to_string()),
        ("chassis_serial", String::new()),
        ("chassis_version", "pc-q35-rhel9.4.0".to_string()),
        ("chassis_asset_tag", String::new()),
        ("bios_vendor", "EDK II".to_string()),
        ("bios_version", "edk2-20240524-1.el9".to_string()),
        ("bios_date", "05/24/2024".to_string()),
    ];
    for (f, v) in dmi {
        put(
            &inside(&format!("/sys/class/dmi/id/{f}")),
            0o444,
            format!("{v}\n").as_bytes(),
        )?;
    }

    // The disk: /sys/block/vda (size in 512-byte sectors, not rotational: virtio-blk), its
    // udev database entry, and /dev/vda with its /dev/disk links. /dev is the machine's own
    // (the host's character devices bound in; no host disk is in it).
    let serial = format!("vd{}", spec.mac.replace(':', "").get(6..).unwrap_or("0"));
    mount("tmpfs", &inside("/sys/block"), "tmpfs", 0, Some("mode=0755"))?;
    let vda = inside("/sys/block/vda");
    for (f, v) in [
        ("size", (hw.disk_bytes / 512).to_string()),
        ("dev", DISK_DEV.to_string()),
        ("removable", "0".to_string()),
        ("ro", "0".to_string()),
        ("hidden", "0".to_string()),
        ("queue/rotational", "0".to_string()),
        ("queue/physical_block_size", "512".to_string()),
        ("queue/logical_block_size", "512".to_string()),
        ("device/vendor", "0x1af4".to_string()),
    ] {
        put(&vda.join(f), 0o444, format!("{v}\n").as_bytes())?;
    }
    std::fs::create_dir_all(vda.join("holders")).map_err(|e| e.to_string())?;
    std::fs::create_dir_all(inside("/sys/class/block")).map_err(|e| e.to_string())?;
    std::os::unix::fs::symlink("../../block/vda", inside("/sys/class/block/vda"))
        .map_err(|e| e.to_string())?;
    put(
        &inside(&format!("/run/udev/data/b{DISK_DEV}")),
        0o644,
        format!(
            "S:disk/by-path/{DISK_BY_PATH}\nS:disk/by-id/virtio-{serial}\nE:DEVPATH=/devices/pci0000:00/0000:00:02.3/0000:04:00.0/virtio3/block/vda\nE:DEVNAME=/dev/vda\nE:DEVTYPE=disk\nE:MAJOR=252\nE:MINOR=0\nE:SUBSYSTEM=block\nE:ID_SERIAL={serial}\nE:ID_PATH={DISK_BY_PATH}\nE:ID_PATH_TAG={}\n",
            DISK_BY_PATH.replace([':', '.'], "_")
        )
        .as_bytes(),
    )?;
    let dev = inside("/dev");
    mount("tmpfs", &dev, "tmpfs", libc::MS_NOSUID, Some("mode=0755"))?;
    for d in ["null", "zero", "full", "random", "urandom", "tty", "ptmx"] {
        let host = Path::new("/dev").join(d);
        if host.exists() {
            bind(&host, &dev.join(d), false)?;
        }
    }
    if Path::new("/dev/pts").is_dir() {
        bind(Path::new("/dev/pts"), &dev.join("pts"), false)?;
    }
    std::fs::create_dir_all(dev.join("shm")).map_err(|e| e.to_string())?;
    mount(
        "tmpfs",
        &dev.join("shm"),
        "tmpfs",
        libc::MS_NOSUID | libc::MS_NODEV,
        Some("mode=1777"),
    )?;
    for (l, t) in [
        ("fd", "/proc/self/fd"),
        ("stdin", "/proc/self/fd/0"),
        ("stdout", "/proc/self/fd/1"),
        ("stderr", "/proc/self/fd/2"),
    ] {
        std::os::unix::fs::symlink(t, dev.join(l)).map_err(|e| e.to_string())?;
    }
    // The disk's node: an empty regular file (nothing here reads or writes a disk: the disk
    // speed check's fio and the installation are stood in).
    put(&dev.join("vda"), 0o660, b"")?;
    for (d, name) in [
        ("by-path", DISK_BY_PATH.to_string()),
        ("by-id", format!("virtio-{serial}")),
    ] {
        std::fs::create_dir_all(dev.join("disk").join(d)).map_err(|e| e.to_string())?;
        std::os::unix::fs::symlink("../../vda", dev.join("disk").join(d).join(name))
            .map_err(|e| e.to_string())?;
    }

    // The root file system: a live system's /sysroot is its loop-mounted rootfs image (the
    // agent reads `boot.device_type` ephemeral from that), an installed one's a disk partition.
    let sysroot = inside("/sysroot");
    std::fs::create_dir_all(&sysroot).map_err(|e| e.to_string())?;
    let src = if hw.boot_device_type == "persistent" {
        "/dev/vda4"
    } else {
        "/dev/loop0"
    };
    mount(src, &sysroot, "tmpfs", libc::MS_RDONLY, Some("mode=0755"))?;
    Ok(())
}

/// The journald stand-in: `/run/systemd/journal/socket` of the machine, read by a thread of its
/// PID 1; each entry (journald's native protocol) is appended to the machine's
/// `journal/journald.log` as `IDENTIFIER: MESSAGE`. The real agent logs there (its default:
/// journal logging only), and its step containers bind the socket.
fn journald(spec: &super::spec::Spec, root: &Path) -> Result<(), String> {
    let sock = root.join("run/systemd/journal/socket");
    std::fs::create_dir_all(sock.parent().unwrap()).map_err(|e| e.to_string())?;
    let _ = std::fs::remove_file(&sock);
    let s =
        std::os::unix::net::UnixDatagram::bind(&sock).map_err(|e| format!("bind {}: {e}", sock.display()))?;
    {
        use std::os::unix::fs::PermissionsExt;
        let _ = std::fs::set_permissions(&sock, std::fs::Permissions::from_mode(0o666));
    }
    let out = spec.dir.join("journal").join("journald.log");
    let _ = std::fs::create_dir_all(out.parent().unwrap());
    std::thread::spawn(move || {
        let mut buf = vec![0u8; 1 << 20];
        while let Ok(n) = s.recv(&mut buf) {
            let f = journal_fields(&buf[..n]);
            let ident = f
                .get("SYSLOG_IDENTIFIER")
                .or_else(|| f.get("TAG"))
                .cloned()
                .unwrap_or_else(|| "?".into());
            let msg = f.get("MESSAGE").cloned().unwrap_or_default();
            if let Ok(mut o) = std::fs::OpenOptions::new().create(true).append(true).open(&out) {
                for l in msg.trim_end().lines() {
                    let _ = writeln!(o, "{ident}: {l}");
                }
            }
        }
    });
    Ok(())
}

/// The fields of one journald native-protocol datagram (`KEY=VALUE\n`, or `KEY\n`, a 64-bit
/// little-endian length, the value and `\n` for values with newlines).
pub fn journal_fields(b: &[u8]) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let mut i = 0;
    while i < b.len() {
        let Some(end) = b[i..]
            .iter()
            .position(|c| *c == b'\n' || *c == b'=')
            .map(|p| p + i)
        else {
            break;
        };
        let key = String::from_utf8_lossy(&b[i..end]).into_owned();
        if b[end] == b'=' {
            let vend = b[end + 1..]
                .iter()
                .position(|c| *c == b'\n')
                .map(|p| p + end + 1)
                .unwrap_or(b.len());
            out.insert(key, String::from_utf8_lossy(&b[end + 1..vend]).into_owned());
            i = vend + 1;
        } else {
            if end + 9 > b.len() {
                break;
            }
            let len = u64::from_le_bytes(b[end + 1..end + 9].try_into().unwrap()) as usize;
            let start = end + 9;
            let stop = (start + len).min(b.len());
            out.insert(key, String::from_utf8_lossy(&b[start..stop]).into_owned());
            i = stop + 1;
        }
    }
    out
}

// --- stand-ins of the live system and of the image's tools ----------------------------------

/// `agent-day2-sim standin TOOL ARGS...`: the stand-in tools (see the module docs); returns
/// the exit code.
pub fn standin(args: &[String]) -> i32 {
    let (tool, rest) = match args.split_first() {
        Some((t, r)) => (t.as_str(), r),
        None => {
            eprintln!("standin: name a tool");
            return 2;
        }
    };
    match tool {
        "nsenter" => nsenter(rest),
        "chronyc" => chronyc(rest),
        "fio" => fio(rest),
        "nmap" => nmap(rest),
        "assisted-installer" => installer(rest),
        other => {
            eprintln!("standin: no stand-in for {other}");
            127
        }
    }
}

/// `nsenter --target 1 [--mount] [--net] [--ipc] [--cgroup] [--uts] [--pid] -- CMD...` as
/// util-linux runs it for the agent (`util.ExecutePrivileged`): enters the namespaces of the
/// machine's PID 1 and, with `--mount`, the machine's root (PID 1 keeps every process of the
/// machine chrooted there; the real nsenter would land in the host's root), then runs CMD.
fn nsenter(args: &[String]) -> i32 {
    let mut target = None;
    let mut ns: Vec<&str> = vec![];
    let mut i = 0;
    while i < args.len() {
        let a = args[i].as_str();
        match a {
            "--" => {
                i += 1;
                break;
            }
            "-t" | "--target" => {
                target = args.get(i + 1).cloned();
                i += 2;
                continue;
            }
            "-m" | "--mount" => ns.push("mnt"),
            "-n" | "--net" => ns.push("net"),
            "-i" | "--ipc" => ns.push("ipc"),
            "-C" | "--cgroup" => ns.push("cgroup"),
            "-u" | "--uts" => ns.push("uts"),
            "-p" | "--pid" => ns.push("pid"),
            s if s.starts_with("--target=") => target = Some(s["--target=".len()..].to_string()),
            s if s.starts_with('-') => {
                eprintln!("nsenter: option {s} is not supported by the stand-in of agent-day2-sim run-node");
                return 1;
            }
            _ => break,
        }
        i += 1;
    }
    if target.as_deref() != Some("1") {
        eprintln!("nsenter: the stand-in enters the machine's PID 1 only (--target 1), got {target:?}");
        return 1;
    }
    let cmd = &args[i..];
    if cmd.is_empty() {
        eprintln!("nsenter: no command");
        return 1;
    }
    // The machine's root as PID 1 sees it (host path), read before leaving this view.
    let root = machine()["root"].as_str().map(String::from);
    // As util-linux: every namespace file is opened first (after entering the mount
    // namespace, /proc is another one), then entered, the mount namespace last.
    ns.sort_by_key(|n| *n == "mnt");
    let mut files = vec![];
    for n in &ns {
        let p = format!("/proc/1/ns/{n}");
        match std::fs::File::open(&p) {
            Ok(f) => files.push((n, f)),
            Err(e) => {
                eprintln!("nsenter: cannot open {p}: {e}");
                return 1;
            }
        }
    }
    for (n, f) in files {
        use std::os::fd::AsRawFd;
        // SAFETY: setns on an open namespace file descriptor.
        if unsafe { libc::setns(f.as_raw_fd(), 0) } != 0 {
            eprintln!(
                "nsenter: reassociate to namespace '{n}' failed: {}",
                std::io::Error::last_os_error()
            );
            return 1;
        }
    }
    if ns.contains(&"mnt") {
        let Some(root) = root else {
            eprintln!(
                "nsenter: {RUN_DIR}/machine.json names no machine root (not inside a run-node machine?)"
            );
            return 1;
        };
        let c = std::ffi::CString::new(root.clone()).unwrap();
        // SAFETY: plain chroot/chdir.
        if unsafe { libc::chroot(c.as_ptr()) } != 0 || unsafe { libc::chdir(c"/".as_ptr()) } != 0 {
            eprintln!("nsenter: chroot {root}: {}", std::io::Error::last_os_error());
            return 1;
        }
    }
    use std::os::unix::process::CommandExt;
    let e = Command::new(&cmd[0]).args(&cmd[1..]).exec();
    eprintln!("nsenter: failed to execute {}: {e}", cmd[0]);
    if e.kind() == std::io::ErrorKind::NotFound {
        127
    } else {
        126
    }
}

/// chronyd's client: `chronyc [-n] sources` lists the machine's time sources (the `server`,
/// `pool` and `peer` lines of /etc/chrony.conf and those added), the first one selected (`^*`),
/// the others combined (`^+`): the machine's clock is the host kernel's, which the host keeps
/// synchronised. `chronyc add server NAME [iburst]` adds a source. chronyd itself is a
/// service of the live system the simulator does not run.
fn chronyc(args: &[String]) -> i32 {
    let a: Vec<&str> = args.iter().map(String::as_str).filter(|a| *a != "-n").collect();
    let added = format!("{RUN_DIR}/chronyc-added");
    match a.as_slice() {
        ["sources"] | ["sources", "-v"] => {
            let conf = std::fs::read_to_string("/etc/chrony.conf").unwrap_or_default();
            let mut names: Vec<String> = conf
                .lines()
                .filter_map(|l| {
                    let mut w = l.split_whitespace();
                    match w.next() {
                        Some("server") | Some("pool") | Some("peer") => w.next().map(String::from),
                        _ => None,
                    }
                })
                .collect();
            for l in std::fs::read_to_string(&added).unwrap_or_default().lines() {
                if !names.iter().any(|n| n == l) {
                    names.push(l.to_string());
                }
            }
            println!("MS Name/IP address         Stratum Poll Reach LastRx Last sample");
            println!("===============================================================================");
            for (i, n) in names.iter().enumerate() {
                println!(
                    "^{} {n:<27} 2   6   377    12   +12us[  +15us] +/-   12ms",
                    if i == 0 { '*' } else { '+' }
                );
            }
            0
        }
        ["add", "server", name, ..] => {
            let mut t = std::fs::read_to_string(&added).unwrap_or_default();
            t.push_str(name);
            t.push('\n');
            let _ = std::fs::create_dir_all(RUN_DIR);
            match std::fs::write(&added, t) {
                Ok(()) => {
                    println!("200 OK");
                    0
                }
                Err(e) => {
                    eprintln!("chronyc: {added}: {e}");
                    1
                }
            }
        }
        _ => {
            eprintln!("chronyc: '{}' is not supported by the stand-in of agent-day2-sim run-node (sources, add server)", args.join(" "));
            1
        }
    }
}

/// fio as the disk speed check runs it (`--filename PATH ... --fdatasync=1
/// --output-format=json`): it would write 22 MiB to the installation disk, so it writes
/// nothing and reports a 99th percentile fdatasync latency of 2 ms in fio's JSON
/// (`jobs[0].sync.lat_ns.percentile["99.000000"]`, in ns).
fn fio(args: &[String]) -> i32 {
    // `--filename PATH` (or `--filename=PATH`), its colons escaped (`\:`) as fio wants them.
    let path = args
        .iter()
        .position(|a| a == "--filename")
        .and_then(|i| args.get(i + 1).cloned())
        .or_else(|| {
            args.iter()
                .find_map(|a| a.strip_prefix("--filename=").map(String::from))
        })
        .unwrap_or_default()
        .replace("\\:", ":");
    let path = path.as_str();
    if !Path::new(path).exists() {
        eprintln!("fio: {path}: No such file or directory");
        return 1;
    }
    log(&format!(
        "fio stand-in: no write to {path} (the disk speed check's fio is stood in)"
    ));
    println!(
        "{}",
        json!({"fio version": "fio-3.35 (agent-day2-sim stand-in)", "jobs": [{"jobname": "test", "error": 0,
            "sync": {"total_ios": 10029, "lat_ns": {"min": 800000, "max": 3000000, "mean": 1200000.0,
            "percentile": {"90.000000": 1500000, "99.000000": 2000000, "99.900000": 2800000}}}}]})
    );
    0
}

/// nmap's ARP ping scan as the free-addresses step runs it (`-sn -PR -n -oX - CIDR`): the
/// real one sends ARP requests to every address of the network; this one answers from what
/// the machine's kernel knows is up on it: its own addresses and its neighbour table (the
/// gateway and any host it talked to), in nmap's XML.
fn nmap(args: &[String]) -> i32 {
    let Some(cidr) = args.last().filter(|a| a.contains('/')) else {
        eprintln!(
            "nmap: the stand-in scans one CIDR (-sn -PR -n -oX - CIDR), got: {}",
            args.join(" ")
        );
        return 1;
    };
    let Some((net, bits)) = cidr
        .split_once('/')
        .and_then(|(a, p)| Some((a.parse::<std::net::Ipv4Addr>().ok()?, p.parse::<u32>().ok()?)))
    else {
        eprintln!("nmap: {cidr}: not an IPv4 network");
        return 1;
    };
    let mask = if bits == 0 {
        0
    } else {
        u32::MAX << (32 - bits.min(32))
    };
    let inside = |ip: &str| {
        ip.parse::<std::net::Ipv4Addr>()
            .is_ok_and(|a| u32::from(a) & mask == u32::from(net) & mask)
    };
    let mut up: Vec<String> = vec![];
    for l in ip_json(&["-j", "-4", "addr", "show"])
        .as_array()
        .into_iter()
        .flatten()
    {
        for a in l["addr_info"].as_array().into_iter().flatten() {
            if let Some(ip) = a["local"].as_str() {
                up.push(ip.to_string());
            }
        }
    }
    for n in ip_json(&["-j", "-4", "neigh", "show"])
        .as_array()
        .into_iter()
        .flatten()
    {
        let st: Vec<&str> = n["state"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|s| s.as_str())
            .collect();
        if st
            .iter()
            .any(|s| matches!(*s, "REACHABLE" | "STALE" | "DELAY" | "PROBE" | "PERMANENT"))
        {
            if let Some(ip) = n["dst"].as_str() {
                up.push(ip.to_string());
            }
        }
    }
    up.retain(|ip| inside(ip));
    up.sort();
    up.dedup();
    let mut x =
        String::from("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<nmaprun scanner=\"nmap\" args=\"nmap ");
    x.push_str(&args.join(" "));
    x.push_str("\">\n");
    for ip in &up {
        x.push_str(&format!(
            "<host><status state=\"up\" reason=\"arp-response\"/><address addr=\"{ip}\" addrtype=\"ipv4\"/></host>\n"
        ));
    }
    x.push_str("</nmaprun>\n");
    print!("{x}");
    0
}

/// The installer image's entrypoint (assisted-installer, which writes the OS to the
/// installation disk and reboots the host): not simulated. It says so and stays running, as
/// the installer does until its reboot, so the host stays `installing` on the service.
fn installer(args: &[String]) -> i32 {
    log(&format!(
        "assisted-installer stand-in: the installation to disk is not simulated (args: {})",
        args.join(" ")
    ));
    loop {
        std::thread::sleep(Duration::from_secs(3600));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn journal_fields_reads_plain_and_length_prefixed_values() {
        let mut d = b"PRIORITY=6\nTAG=agent\nMESSAGE\n".to_vec();
        let msg = b"time=x level=info msg=\"two\nlines\"\n";
        d.extend_from_slice(&(msg.len() as u64).to_le_bytes());
        d.extend_from_slice(msg);
        d.extend_from_slice(b"\nDRY_AGENT_ID=\n");
        let f = journal_fields(&d);
        assert_eq!(f["PRIORITY"], "6");
        assert_eq!(f["TAG"], "agent");
        assert_eq!(f["MESSAGE"], String::from_utf8_lossy(msg));
        assert_eq!(f["DRY_AGENT_ID"], "");
    }

    #[test]
    fn the_real_agent_directory_needs_the_binary_and_its_versions_line() {
        let d = tempfile::tempdir().unwrap();
        let e = real_agent(d.path()).unwrap_err();
        assert!(e.contains("scripts/real-components.sh agent"), "{e}");
        std::fs::write(
            d.path().join("versions"),
            "agent: github.com/openshift/assisted-installer-agent/src/agent/main@v0.0.0-1-a (from x)\n",
        )
        .unwrap();
        assert!(real_agent(d.path()).unwrap_err().contains("is missing"));
        std::fs::write(d.path().join("agent"), b"").unwrap();
        assert_eq!(
            real_agent(d.path()).unwrap(),
            "github.com/openshift/assisted-installer-agent/src/agent/main@v0.0.0-1-a"
        );
    }
}
