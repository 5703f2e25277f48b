//! The discovery agent stand-in (`/usr/bin/agent` of the node-agent image inside a run-node
//! machine): the real assisted-installer-agent module cannot be fetched here.
//!
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
use std::process::{Command, Stdio};
use std::time::Duration;

use serde_json::{json, Value};

use super::machine::RUN_DIR;

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
