//! The hosts of `agent-day2-sim node0 --real` ([`super::real`]): stand-ins for the discovery
//! agent (the real assisted-installer-agent replaces it) and for assisted-installer (the real
//! installer replaces it), talking to the REAL assisted-service's REST v2 API with the agent
//! token, as those programs do:
//! - [`Api::register`]: `POST /infra-envs/{id}/hosts` `{host_id, discovery_agent_version}`;
//! - [`Api::answer_steps`]: `GET .../instructions`, then one `POST .../instructions` reply per
//!   step (`{step_id, step_type, exit_code: 0, output, error}`) with what a KVM machine of
//!   [`inventory`]'s hardware reports (shapes the real service took on first contact: the
//!   connectivity-check request is a bare list of hosts, the disk-speed step's last argument
//!   its timeout, the wildcard DNS probe must not resolve);
//! - [`install`]: the install stages (`PUT .../progress`) in the order upstream's installer
//!   reports them, and a host logs archive (`POST /clusters/{id}/logs?logs_type=host`, form
//!   field `upfile`, then `PUT .../logs-progress` `completed`) before each host's reboot.
//!
//! Every request goes through curl; an answer other than the expected status is an error that
//! quotes the service (the real service judges).

use std::io::Write;
use std::process::{Command, Stdio};

use anyhow::{bail, Context};
use serde_json::{json, Value};

use super::seed;

/// API base path of the REST v2 API.
pub const API_BASE: &str = "/api/assisted-install/v2";

/// The three tokens the agent-based installer mints (ES256, claim `auth_scheme` only, no `exp`).
#[derive(Debug, Clone)]
pub struct Tokens {
    /// `{"auth_scheme":"userAuth"}`: header `Authorization: <token>`.
    pub user: String,
    /// `{"auth_scheme":"agentAuth"}`: header `X-Secret-Key: <token>`.
    pub agent: String,
    /// `{"auth_scheme":"watcherAuth"}`.
    pub watcher: String,
}

/// The discovery agent's image the hosts report (`discovery_agent_version`).
pub const AGENT_IMAGE: &str = "registry.redhat.io/rhai/assisted-installer-agent-rhel9:latest";

/// The hosts' network interface name.
pub const NIC: &str = "enp1s0";

/// The address DNS gives for api and api-int (the load balancer of a user-managed network, not
/// a host).
const LB_IP: &str = seed::API_VIP;
/// The address DNS gives for names outside the cluster (the registries): a documentation address.
const PUBLIC_IP: &str = "203.0.113.10";

/// One host of node 0's cluster: number `i` of [`seed`]'s hosts (master-0.., then workers).
#[derive(Debug, Clone)]
pub struct Host {
    /// Host id (the machine's SMBIOS UUID).
    pub id: String,
    /// Hostname.
    pub name: String,
    /// IPv4 address.
    pub ip: String,
    /// MAC address.
    pub mac: String,
}

impl Host {
    /// Host number `i`.
    pub fn new(i: usize) -> Host {
        Host {
            id: seed::host_id(i),
            name: seed::hostname(i),
            ip: seed::ip(i),
            mac: seed::mac(i),
        }
    }
}

/// The REST v2 API of the real service at a base URL, with the user and agent tokens.
pub struct Api {
    base: String,
    user: String,
    agent: String,
}

impl Api {
    /// `base`: `http://IP:PORT`.
    pub fn new(base: &str, t: &Tokens) -> Api {
        Api {
            base: format!("{base}{API_BASE}"),
            user: t.user.clone(),
            agent: t.agent.clone(),
        }
    }

    /// A request as the user (`Authorization: <token>`): (status, JSON body or Null).
    pub fn user(&self, method: &str, path: &str, body: Option<&Value>) -> anyhow::Result<(u16, Value)> {
        self.call(method, path, body, ("Authorization", &self.user))
    }

    /// A request as an agent (`X-Secret-Key: <token>`).
    pub fn agent(&self, method: &str, path: &str, body: Option<&Value>) -> anyhow::Result<(u16, Value)> {
        self.call(method, path, body, ("X-Secret-Key", &self.agent))
    }

    fn call(
        &self,
        method: &str,
        path: &str,
        body: Option<&Value>,
        auth: (&str, &str),
    ) -> anyhow::Result<(u16, Value)> {
        let mut args = vec![
            "-X".to_string(),
            method.into(),
            "-H".into(),
            format!("{}: {}", auth.0, auth.1),
        ];
        if body.is_some() {
            args.extend(["-H", "Content-Type: application/json", "--data-binary", "@-"].map(String::from));
        }
        args.push(format!("{}{path}", self.base));
        let stdin = body.map(|b| b.to_string().into_bytes()).unwrap_or_default();
        let (code, b) = curl(&format!("{method} {path}"), &args, &stdin)?;
        Ok((code, json_or_text(&b)))
    }

    /// Registers `h` into infra-env `ie` (201 expected).
    pub fn register(&self, ie: &str, h: &Host) -> anyhow::Result<()> {
        let body = json!({"host_id": h.id, "discovery_agent_version": AGENT_IMAGE});
        let (code, b) = self.agent("POST", &format!("/infra-envs/{ie}/hosts"), Some(&body))?;
        if code != 201 {
            bail!(
                "the real service refused to register host {}: HTTP {code} {b}",
                h.name
            );
        }
        Ok(())
    }

    /// One round: every host fetches its instructions and replies to each step.
    pub fn answer_steps(&self, ie: &str, hosts: &[Host]) -> anyhow::Result<()> {
        for h in hosts {
            // The agent sends its clock (`timestamp`): the service's time-sync validation reads it.
            let now = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_secs())
                .unwrap_or(0);
            let (code, b) = self.agent(
                "GET",
                &format!("/infra-envs/{ie}/hosts/{}/instructions?timestamp={now}", h.id),
                None,
            )?;
            if code != 200 {
                bail!("next steps of {}: HTTP {code} {b}", h.name);
            }
            for s in b["instructions"].as_array().cloned().unwrap_or_default() {
                let t = s["step_type"].as_str().unwrap_or("");
                let out = answer(h, t, &s["args"], hosts);
                let reply = json!({"step_id": s["step_id"], "step_type": t, "exit_code": 0,
                    "output": if let Value::String(x) = &out { x.clone() } else { out.to_string() }, "error": ""});
                let (code, b) = self.agent(
                    "POST",
                    &format!("/infra-envs/{ie}/hosts/{}/instructions", h.id),
                    Some(&reply),
                )?;
                // A malformed reply is ours to fix (400); a reply the host's state no longer takes
                // (e.g. an inventory arriving while the host prepares for installation) the real
                // agent logs and goes on, and so does this one.
                if code == 400 || code == 401 || code == 403 || code == 404 {
                    bail!("the real service refused {}'s {t} reply: HTTP {code} {b}", h.name);
                } else if code != 204 {
                    eprintln!(
                        "node0: {} {t} reply not taken (as the agent, going on): HTTP {code} {}",
                        h.name,
                        b["reason"].as_str().unwrap_or("")
                    );
                }
            }
        }
        Ok(())
    }

    /// Reports stage `stage` (with `info`) for `h` (200 expected; the service refuses a stage
    /// lower than the host's current one, or one its role does not have).
    pub fn stage(&self, ie: &str, h: &Host, stage: &str, info: &str) -> anyhow::Result<()> {
        let body = json!({"current_stage": stage, "progress_info": info});
        let (code, b) = self.agent(
            "PUT",
            &format!("/infra-envs/{ie}/hosts/{}/progress", h.id),
            Some(&body),
        )?;
        if code != 200 {
            bail!(
                "the real service refused stage {stage:?} of {}: HTTP {code} {b}",
                h.name
            );
        }
        Ok(())
    }

    /// Uploads `h`'s logs archive (tar.gz) as the installer does before a reboot, then marks the
    /// host's logs `completed`.
    pub fn upload_logs(&self, cid: &str, ie: &str, h: &Host, archive: &[u8]) -> anyhow::Result<()> {
        // The archive goes on curl's stdin (`@-`), named as the installer names it.
        let args = [
            "-H".to_string(),
            format!("X-Secret-Key: {}", self.agent),
            "-F".into(),
            format!(
                "upfile=@-;filename={}_{}.tar.gz;type=application/gzip",
                h.name, h.id
            ),
            format!(
                "{}/clusters/{cid}/logs?logs_type=host&infra_env_id={ie}&host_id={}",
                self.base, h.id
            ),
        ];
        let (code, b) = curl("POST /clusters/…/logs", &args, archive)?;
        if code != 204 {
            bail!(
                "the real service refused {}'s logs: HTTP {code} {}",
                h.name,
                json_or_text(&b)
            );
        }
        let (code, b) = self.agent(
            "PUT",
            &format!("/infra-envs/{ie}/hosts/{}/logs-progress", h.id),
            Some(&json!({"logs_state": "completed"})),
        )?;
        if code != 204 {
            bail!(
                "the real service refused {}'s logs-progress: HTTP {code} {b}",
                h.name
            );
        }
        Ok(())
    }
}

/// Runs `curl -sS -o - -w "\n%{http_code}" --max-time 60 ARGS...` with `stdin` on its standard
/// input (read where ARGS say `@-`): (HTTP status, body). Errors: curl could not be run, or reached
/// nothing (status 0: its stderr quoted after `what`, e.g. `GET /clusters`).
pub fn curl(what: &str, args: &[String], stdin: &[u8]) -> anyhow::Result<(u16, Vec<u8>)> {
    let mut ch = Command::new("curl")
        .args(["-sS", "-o", "-", "-w", "\n%{http_code}", "--max-time", "60"])
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .context("running curl")?;
    let mut input = ch.stdin.take().context("curl's stdin")?;
    // curl reads stdin only for `@-`; an unread input must not stop us.
    let _ = input.write_all(stdin);
    drop(input);
    let o = ch.wait_with_output()?;
    let pos = o.stdout.iter().rposition(|b| *b == b'\n');
    let (body, code) = match pos {
        Some(p) => (&o.stdout[..p], &o.stdout[p + 1..]),
        None => (&o.stdout[..0], &o.stdout[..]),
    };
    let code: u16 = String::from_utf8_lossy(code).trim().parse().unwrap_or(0);
    if code == 0 {
        bail!("{what}: {}", String::from_utf8_lossy(&o.stderr).trim());
    }
    Ok((code, body.to_vec()))
}

/// A body as JSON, else as a string (Null when empty).
pub fn json_or_text(b: &[u8]) -> Value {
    let t = String::from_utf8_lossy(b);
    if t.trim().is_empty() {
        Value::Null
    } else {
        serde_json::from_str(&t).unwrap_or_else(|_| Value::String(t.into_owned()))
    }
}

/// The inventory a KVM machine's discovery agent reports: 8 cores, 32 GiB, one 120 GiB virtio
/// disk, one NIC with the host's static address, booted from the live ISO (`ephemeral`).
pub fn inventory(h: &Host) -> Value {
    json!({"hostname": h.name, "boot": {"current_boot_mode": "uefi", "device_type": "ephemeral"},
        "cpu": {"architecture": "x86_64", "count": 8, "flags": ["vmx", "avx2", "sse4_2"], "model_name": "Intel Xeon Processor (Icelake)"},
        "memory": {"physical_bytes": 34_359_738_368u64, "usable_bytes": 33_285_996_544u64},
        "disks": [{"id": "/dev/disk/by-path/pci-0000:04:00.0", "by_path": "/dev/disk/by-path/pci-0000:04:00.0", "name": "vda",
            "path": "/dev/vda", "drive_type": "HDD", "size_bytes": 128_849_018_880u64, "serial": format!("vd-{}", h.mac.replace(':', "")),
            "removable": false, "is_installation_media": false, "io_perf": {}}],
        "interfaces": [{"name": NIC, "mac_address": h.mac, "mtu": 1500, "flags": ["up", "broadcast"],
            "ipv4_addresses": [format!("{}/24", h.ip)], "ipv6_addresses": [], "has_carrier": true, "speed_mbps": 10000, "type": "physical"}],
        "routes": [{"destination": "0.0.0.0", "gateway": "192.168.111.1", "interface": NIC, "family": 2}],
        "system_vendor": {"manufacturer": "Red Hat", "product_name": "KVM", "serial_number": h.id, "virtual": true},
        "tpm_version": "none"})
}

/// The step's request: its last argument that parses as a JSON object or array.
fn request(args: &Value) -> Value {
    args.as_array()
        .into_iter()
        .flatten()
        .rev()
        .filter_map(|a| a.as_str())
        .find_map(|a| {
            serde_json::from_str::<Value>(a)
                .ok()
                .filter(|v| v.is_object() || v.is_array())
        })
        .unwrap_or(Value::Null)
}

/// What `h` replies to a step of type `t` (a JSON value; an empty string for steps whose
/// output the service does not read, e.g. `install`).
pub fn answer(h: &Host, t: &str, args: &Value, all: &[Host]) -> Value {
    let rq = request(args);
    match t {
        "inventory" => inventory(h),
        "connectivity-check" => {
            let remotes: Vec<Value> = rq.as_array().cloned().or_else(|| rq["remote_hosts"].as_array().cloned()).unwrap_or_default();
            json!({"remote_hosts": remotes.iter().map(|r| {
                let id = r["host_id"].as_str().unwrap_or("");
                let ips: Vec<String> = r["nics"].as_array().into_iter().flatten()
                    .flat_map(|n| n["ip_addresses"].as_array().cloned().unwrap_or_default())
                    .filter_map(|a| a.as_str().map(|a| a.split('/').next().unwrap_or("").to_string()))
                    .filter(|ip| all.iter().any(|x| &x.ip == ip))
                    .collect();
                json!({"host_id": id, "l2_connectivity": [], "mtu_report": [],
                    "l3_connectivity": ips.iter().map(|ip| json!({"remote_ip_address": ip, "successful": true, "average_rtt_ms": 0.2, "packet_loss_percentage": 0})).collect::<Vec<_>>()})
            }).collect::<Vec<_>>()})
        }
        "ntp-synchronizer" => json!({"ntp_sources": [{"source_name": "192.168.111.1", "source_state": "synced"}]}),
        "installation-disk-speed-check" => json!({"path": rq["path"].as_str().unwrap_or("/dev/vda"), "io_sync_duration": 2}),
        "free-network-addresses" => Value::Array(
            rq.as_array()
                .into_iter()
                .flatten()
                .map(|n| json!({"network": n.as_str().or(n["network"].as_str()).unwrap_or(""), "free_addresses": []}))
                .collect(),
        ),
        "domain-resolution" => json!({"resolutions": rq["domains"].as_array().into_iter().flatten().map(|d| {
            let name = d["domain_name"].as_str().unwrap_or("");
            // The wildcard probe must not resolve; api, api-int and apps go to the load balancer.
            let cluster = format!(".{}.{}", seed::CLUSTER_NAME, seed::BASE_DOMAIN);
            let v4: Vec<&str> = if name.contains("validateNoWildcardDNS") {
                vec![]
            } else if name.trim_end_matches('.').ends_with(&format!(".apps{cluster}")) {
                vec![seed::INGRESS_VIP]
            } else if name.trim_end_matches('.').ends_with(&cluster) {
                vec![LB_IP]
            } else {
                vec![PUBLIC_IP]
            };
            json!({"domain_name": name, "ipv4_addresses": v4, "ipv6_addresses": [], "cnames": []})
        }).collect::<Vec<_>>()}),
        "container-image-availability" => json!({"images": rq["images"].as_array().into_iter().flatten().map(|i|
            json!({"name": i, "result": "success", "download_rate": 100.0, "size_bytes": 1, "time": 0.1})).collect::<Vec<_>>()}),
        _ => Value::String(String::new()),
    }
}

/// A host logs archive as the installer's log sender writes it (tar.gz of journal extracts).
pub fn logs_archive(h: &Host, stages: &[&str]) -> anyhow::Result<Vec<u8>> {
    let gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    let mut t = tar::Builder::new(gz);
    let journal: String = stages
        .iter()
        .enumerate()
        .map(|(n, s)| {
            format!(
                "Jan 01 10:{:02}:00 {} installer[1201]: Updating node installation stage: {s}\n",
                n + 10,
                h.name
            )
        })
        .collect();
    for (name, data) in [
        (format!("{}/journal_assisted-installer.log", h.name), journal),
        (
            format!("{}/journal_agent.log", h.name),
            format!("{} agent: registered host {} into the infra-env\n", h.name, h.id),
        ),
    ] {
        let mut hd = tar::Header::new_gnu();
        hd.set_size(data.len() as u64);
        hd.set_mode(0o644);
        hd.set_mtime(seed::BASE_TIME as u64);
        hd.set_cksum();
        t.append_data(&mut hd, name, data.as_bytes())?;
    }
    Ok(t.into_inner()?.finish()?)
}

/// The id of the host the service chose as bootstrap (`bootstrap: true`) in a cluster as
/// `GET /clusters/{id}` answers it.
pub fn bootstrap_host(cluster: &Value) -> anyhow::Result<String> {
    cluster["hosts"]
        .as_array()
        .and_then(|hs| hs.iter().find(|h| h["bootstrap"] == true))
        .and_then(|h| h["id"].as_str())
        .map(String::from)
        .context("the service chose no bootstrap host")
}

/// The install, as assisted-installer on each host reports it, up to the moment node 0 (the
/// bootstrap host `bootstrap`) is about to reboot. Upstream's stage lists
/// (internal/host/common.go of assisted-service) for a compact cluster:
/// masters Starting installation → Installing → Writing image to disk → Rebooting →
/// Configuring → Joined; the bootstrap Starting installation → Installing → Writing image to
/// disk → Waiting for control plane → Waiting for controller → Rebooting; workers … → Waiting
/// for control plane → Rebooting → Waiting for ignition → Configuring → Joined; SNO's one host
/// Starting installation → Installing → Waiting for bootkube → Writing image to disk →
/// Rebooting. Each host uploads its logs just before `Rebooting`.
pub fn install(api: &Api, ie: &str, cid: &str, hosts: &[Host], bootstrap: &str) -> anyhow::Result<()> {
    let sno = hosts.len() == 1;
    let boot = hosts
        .iter()
        .find(|h| h.id == bootstrap)
        .context("the bootstrap host is not one of ours")?;
    let others: Vec<&Host> = hosts.iter().filter(|h| h.id != bootstrap).collect();
    let role = |h: &Host| {
        if h.name.starts_with("master") {
            "master"
        } else {
            "worker"
        }
    };
    let run = |h: &Host, stages: &[(&str, &str)]| -> anyhow::Result<()> {
        for (s, info) in stages {
            api.stage(ie, h, s, info)?;
        }
        Ok(())
    };
    let to_disk: [(&str, &str); 3] = [
        ("Starting installation", ""),
        ("Installing", ""),
        ("Writing image to disk", "100%"),
    ];
    if sno {
        run(
            boot,
            &[
                ("Starting installation", "bootstrap"),
                ("Installing", "bootstrap"),
                ("Waiting for bootkube", ""),
                ("Writing image to disk", "100%"),
            ],
        )?;
    } else {
        run(
            boot,
            &[
                ("Starting installation", "bootstrap"),
                ("Installing", "bootstrap"),
                ("Writing image to disk", "100%"),
            ],
        )?;
        for h in &others {
            let mut st: Vec<(&str, &str)> = to_disk
                .iter()
                .map(|(s, i)| (*s, if *s == "Installing" { role(h) } else { i }))
                .collect();
            if role(h) == "worker" {
                st.push(("Waiting for control plane", ""));
            }
            run(h, &st)?;
        }
        run(
            boot,
            &[("Waiting for control plane", "waiting for 2 master nodes")],
        )?;
        for h in &others {
            api.upload_logs(
                cid,
                ie,
                h,
                &logs_archive(
                    h,
                    &[
                        "Starting installation",
                        "Installing",
                        "Writing image to disk",
                        "Rebooting",
                    ],
                )?,
            )?;
            api.stage(ie, h, "Rebooting", "")?;
        }
        for h in others.iter().filter(|h| role(h) == "master") {
            run(h, &[("Configuring", ""), ("Joined", "")])?;
        }
        run(
            boot,
            &[(
                "Waiting for controller",
                "waiting for assisted-installer-controller",
            )],
        )?;
        for h in others.iter().filter(|h| role(h) == "worker") {
            run(
                h,
                &[("Waiting for ignition", ""), ("Configuring", ""), ("Joined", "")],
            )?;
        }
    }
    api.upload_logs(
        cid,
        ie,
        boot,
        &logs_archive(
            boot,
            &[
                "Starting installation",
                "Installing",
                "Writing image to disk",
                "Waiting for control plane",
                "Rebooting",
            ],
        )?,
    )?;
    api.stage(ie, boot, "Rebooting", "")?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn connectivity_reply_lists_each_remote_hosts_addresses() {
        let hs: Vec<Host> = (0..3).map(Host::new).collect();
        let arg = json!([{"host_id": hs[1].id, "nics": [{"ip_addresses": [format!("{}/24", hs[1].ip)], "mac": hs[1].mac}]}]);
        let out = answer(&hs[0], "connectivity-check", &json!([arg.to_string()]), &hs);
        assert_eq!(out["remote_hosts"][0]["host_id"], hs[1].id);
        assert_eq!(
            out["remote_hosts"][0]["l3_connectivity"][0]["remote_ip_address"],
            hs[1].ip
        );
    }

    #[test]
    fn the_wildcard_probe_does_not_resolve() {
        let h = Host::new(0);
        let rq = json!({"domains": [{"domain_name": "api.agent-cluster.example.com"}, {"domain_name": "*.validateNoWildcardDNS.agent-cluster.example.com."}]});
        let out = answer(&h, "domain-resolution", &json!(["x", rq.to_string()]), &[]);
        assert_eq!(out["resolutions"][0]["ipv4_addresses"][0], LB_IP);
        assert_eq!(out["resolutions"][1]["ipv4_addresses"], json!([]));
    }

    #[test]
    fn logs_archive_is_a_gzipped_tar_with_the_stages() {
        let a = logs_archive(&Host::new(1), &["Installing", "Rebooting"]).unwrap();
        let mut t = tar::Archive::new(flate2::read::GzDecoder::new(&a[..]));
        let names: Vec<String> = t
            .entries()
            .unwrap()
            .map(|e| e.unwrap().path().unwrap().display().to_string())
            .collect();
        assert_eq!(
            names,
            [
                "master-1/journal_assisted-installer.log",
                "master-1/journal_agent.log"
            ]
        );
    }
}
