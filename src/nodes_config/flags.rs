//! The single-host flags of `oc adm node-image create` → [`NodesConfig`].

use std::path::{Path, PathBuf};

use serde_json::Value;

use super::model::{did_you_mean, q, Host, Interface, NodesConfig, Origin, RootDeviceHints};
use super::parse::HINT_KEYS;
use super::validate::normalize_mac;
use crate::error::{ConfigErrors, FieldError};

/// The single-host flags as typed (the anchor's names; docs/add-nodes.md "Single-host flags").
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FlagsHost {
    /// `--mac-address` (required in this mode).
    pub mac: String,
    /// `--hostname`.
    pub hostname: Option<String>,
    /// `--network-config-path`: an NMState YAML file.
    pub network_config_path: Option<PathBuf>,
    /// `--root-device-hint KEY:VALUE`, repeatable (e.g. `deviceName:/dev/sda`, `minSizeGigabytes:120`).
    pub root_device_hints: Vec<String>,
    /// `--cpu-architecture` (x86_64, aarch64, amd64, arm64, ...).
    pub cpu_architecture: Option<String>,
    /// `--ssh-key-path`: an OpenSSH public key file.
    pub ssh_key_path: Option<PathBuf>,
}

/// Builds a one-host [`NodesConfig`] from the single-host flags.
///
/// Paths are used as typed: absolute, or relative to `cwd` (the anchor resolves them under
/// `--dir` and fails on absolute ones; docs/add-nodes.md "Single-host flags"). `--cpu-architecture`
/// and `--ssh-key-path` become the top-level `cpuArchitecture`/`sshKey` (the anchor writes them
/// into the host, where node-joiner ignores them). The interface name is the NMState
/// ethernet interface whose `mac-address` is `--mac-address`, else the NMState's only ethernet
/// interface, else `eth0` (the anchor always uses `eth0`).
///
/// Errors name the flag: a file that cannot be read or parsed (`--network-config-path`,
/// `--ssh-key-path`), a hint without `:` or with an unknown key (with "did you mean"), a
/// `minSizeGigabytes` that is not a whole number (0 or more), a `rotational` that is not true/false.
/// Everything else (MAC syntax, hostname, NMState compile, ...) is [`validate`](super::validate)'s
/// job, which then also names the flags.
pub fn from_flags(f: &FlagsHost, cwd: &Path) -> Result<NodesConfig, ConfigErrors> {
    let mut errors = Vec::new();
    let resolve = |p: &Path| {
        if p.is_absolute() {
            p.to_path_buf()
        } else {
            cwd.join(p)
        }
    };

    let mut network_config = None;
    if let Some(p) = &f.network_config_path {
        let full = resolve(p);
        match crate::files::read_input_file(&full, crate::files::MAX_KEY_FILE, "--network-config-path") {
            Err(e) => errors.push(FieldError::new("--network-config-path", e.to_string())),
            Ok(text) => match super::yaml::load(&text) {
                Ok((v @ Value::Object(_), dups)) => {
                    for d in dups {
                        errors.push(FieldError::new(
                            format!("--network-config-path {}", d.path),
                            format!("{} (in {})", d.message(), full.display()),
                        ));
                    }
                    network_config = Some(v);
                }
                Ok((other, _)) => errors.push(FieldError::new(
                    "--network-config-path",
                    format!(
                        "{} must hold an NMState mapping (interfaces, dns-resolver, routes), not {}",
                        full.display(),
                        if other.is_null() {
                            "nothing".to_string()
                        } else {
                            other.to_string()
                        }
                    ),
                )),
                Err(e) => errors.push(FieldError::new(
                    "--network-config-path",
                    format!("{} is not valid YAML: {e}", full.display()),
                )),
            },
        }
    }

    let mut ssh_key = None;
    if let Some(p) = &f.ssh_key_path {
        let full = resolve(p);
        match crate::files::read_input_file(&full, crate::files::MAX_KEY_FILE, "--ssh-key-path") {
            Ok(s) => ssh_key = Some(s.trim().to_string()),
            Err(e) => errors.push(FieldError::new("--ssh-key-path", e.to_string())),
        }
    }

    let mut hints = RootDeviceHints::default();
    for h in &f.root_device_hints {
        let Some((k, val)) = h.split_once(':') else {
            errors.push(FieldError::new(
                "--root-device-hint",
                format!("{} is not KEY:VALUE, e.g. deviceName:/dev/sda", q(h)),
            ));
            continue;
        };
        let set = |slot: &mut Option<String>| *slot = Some(val.to_string());
        match k {
            "deviceName" => set(&mut hints.device_name),
            "hctl" => set(&mut hints.hctl),
            "model" => set(&mut hints.model),
            "vendor" => set(&mut hints.vendor),
            "serialNumber" => set(&mut hints.serial_number),
            "wwn" => set(&mut hints.wwn),
            "minSizeGigabytes" => match val.trim().parse::<u64>() {
                Ok(n) => hints.min_size_gigabytes = Some(n),
                Err(_) => errors.push(FieldError::new(
                    "--root-device-hint minSizeGigabytes",
                    format!("{} is not a whole number of gigabytes (0 or more)", q(val)),
                )),
            },
            "rotational" => match val.trim() {
                "true" => hints.rotational = Some(true),
                "false" => hints.rotational = Some(false),
                _ => errors.push(FieldError::new(
                    "--root-device-hint rotational",
                    format!("{} must be true or false", q(val)),
                )),
            },
            _ => errors.push(FieldError::new(
                "--root-device-hint",
                match did_you_mean(k, &HINT_KEYS) {
                    Some(s) => format!("unknown hint {}; did you mean {}?", q(k), q(s)),
                    None => format!("unknown hint {}; expected one of {}", q(k), HINT_KEYS.join(", ")),
                },
            )),
        }
    }

    if !errors.is_empty() {
        return Err(ConfigErrors {
            source: "flags".into(),
            errors,
        });
    }
    let name = iface_name(&f.mac, network_config.as_ref());
    Ok(NodesConfig {
        cpu_architecture: f.cpu_architecture.clone(),
        ssh_key,
        boot_artifacts_base_url: None,
        hosts: vec![Host {
            hostname: f.hostname.clone(),
            role: None,
            root_device_hints: (hints != RootDeviceHints::default()).then_some(hints),
            interfaces: vec![Interface {
                name,
                mac_address: f.mac.clone(),
            }],
            network_config,
        }],
        origin: Origin::Flags,
        notes: Vec::new(),
    })
}

/// The NIC name for `mac`: the NMState ethernet whose mac-address matches, else its only
/// ethernet, else `eth0`.
fn iface_name(mac: &str, nc: Option<&Value>) -> String {
    let ethernets: Vec<&Value> = nc
        .and_then(|n| n.get("interfaces"))
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter(|i| i.get("type").and_then(Value::as_str) == Some("ethernet"))
                .collect()
        })
        .unwrap_or_default();
    let want = normalize_mac(mac).ok();
    let by_mac = ethernets.iter().find(|i| {
        i.get("mac-address")
            .and_then(Value::as_str)
            .and_then(|m| normalize_mac(m).ok())
            .is_some()
            && i.get("mac-address")
                .and_then(Value::as_str)
                .and_then(|m| normalize_mac(m).ok())
                == want
    });
    let pick = by_mac.or(if ethernets.len() == 1 {
        ethernets.first()
    } else {
        None
    });
    pick.and_then(|i| i.get("name").and_then(Value::as_str))
        .unwrap_or("eth0")
        .to_string()
}
