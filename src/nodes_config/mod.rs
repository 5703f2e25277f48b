//! `nodes-config.yaml`: the hosts to add, as `oc adm node-image create` reads them, and their
//! validation against the cluster.
//!
//! Three steps, all pure (the only I/O is [`from_flags`] reading the files its flags name):
//! - [`parse`] turns the YAML into a [`NodesConfig`]: shape and types only, every unknown key
//!   refused with a "did you mean" (docs/add-nodes.md "nodes-config.yaml").
//! - [`from_flags`] builds the same model from the single-host flags of the anchor
//!   (`--mac-address`, `--hostname`, `--network-config-path`, `--root-device-hint`,
//!   `--cpu-architecture`, `--ssh-key-path`).
//! - [`validate`] checks the model against the [`ClusterModel`](crate::cluster::ClusterModel)
//!   and compiles each host's NMState with the `nmstate` crate into NetworkManager keyfiles,
//!   collecting every error and warning ([`Validated`]).
//!
//! Schema source: `Config` of openshift/installer `pkg/asset/agent/joiner/addnodesconfig.go`
//! and `agent.Host` of `pkg/types/agent/agent_config_type.go` (docs/add-nodes.md
//! "nodes-config.yaml").
//! Every error is a [`FieldError`]: the field path (`hosts[1].interfaces[0].macAddress`) and a
//! message that quotes the value and says what to do. [`ConfigErrors`] (all of them) becomes
//! [`Error::InvalidConfig`](crate::error::Error::InvalidConfig), exit code 3.

mod flags;
mod parse;
mod validate;
pub mod yaml;

use std::fmt;

use serde::Serialize;
use serde_json::Value;

pub use flags::{from_flags, FlagsHost};
pub use parse::{merge_errors, parse, parse_partial};
pub use validate::{validate, Validated, ValidatedHost};

/// A whole nodes-config (top level of `nodes-config.yaml`).
///
/// Serialises back to the camelCase keys it was read from (without `apiVersion`/`kind`/
/// `metadata`, which are ignored).
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct NodesConfig {
    /// `cpuArchitecture`: the hosts' architecture as typed (x86_64, aarch64, ppc64le, s390x,
    /// or the Go spellings amd64/arm64). None: the control plane's.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cpu_architecture: Option<String>,
    /// `sshKey`: OpenSSH public key(s) for user `core`, one per line. None: the cluster's
    /// (MachineConfig 99-worker-ssh).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ssh_key: Option<String>,
    /// `bootArtifactsBaseURL`: where PXE files will be served (for the `.ipxe` script).
    #[serde(rename = "bootArtifactsBaseURL", skip_serializing_if = "Option::is_none")]
    pub boot_artifacts_base_url: Option<String>,
    /// `hosts`: at least one (checked by [`validate`]).
    pub hosts: Vec<Host>,
    /// Where the model came from; [`validate`] names flags instead of YAML paths for
    /// [`Origin::Flags`].
    #[serde(skip)]
    pub origin: Origin,
    /// Things [`parse`] accepted but ignores (e.g. a host's `bmc`); [`validate`] passes them on
    /// as warnings.
    #[serde(skip)]
    pub notes: Vec<FieldError>,
}

/// Where a [`NodesConfig`] came from.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum Origin {
    /// A YAML file (its path as given, for messages).
    File(String),
    /// The single-host flags ([`from_flags`]).
    Flags,
    /// Built in code.
    #[default]
    Code,
}

/// One host (`hosts[i]`).
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Host {
    /// `hostname`: required here (unlike upstream): CSR verification needs the node name.
    /// None when absent; [`validate`] reports it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hostname: Option<String>,
    /// `role`: None or `worker`; `master` is refused by [`validate`].
    #[serde(skip_serializing_if = "Option::is_none")]
    pub role: Option<String>,
    /// `rootDeviceHints`: which disk to install to (metal3 RootDeviceHints keys).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub root_device_hints: Option<RootDeviceHints>,
    /// `interfaces`: the host's NICs by name and MAC; at least one (checked by [`validate`]).
    pub interfaces: Vec<Interface>,
    /// `networkConfig`: an NMState document (mapping), as JSON. None: DHCP.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub network_config: Option<Value>,
}

/// `hosts[i].rootDeviceHints` (metal3 `RootDeviceHints`; `wwnWithExtension` and
/// `wwnVendorExtension` are refused as upstream refuses them).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RootDeviceHints {
    /// `deviceName`: `/dev/sda` or `/dev/disk/by-path/...`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub device_name: Option<String>,
    /// `hctl`: SCSI `host:channel:target:lun`, e.g. `0:0:0:0`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hctl: Option<String>,
    /// `model`: disk model substring.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// `vendor`: disk vendor substring.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub vendor: Option<String>,
    /// `serialNumber`: disk serial number.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub serial_number: Option<String>,
    /// `minSizeGigabytes`: smallest acceptable disk size in GB; 0 means no minimum (metal3's
    /// BareMetalHost schema has `minimum: 0`, assisted-service skips the check for 0).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub min_size_gigabytes: Option<u64>,
    /// `wwn`: World Wide Name, hex (`0x5000c500a0b1c2d3`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub wwn: Option<String>,
    /// `rotational`: true for spinning disks, false for SSD/NVMe.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rotational: Option<bool>,
}

/// `hosts[i].interfaces[j]`: one NIC. Empty strings mean "absent" ([`validate`] reports them).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Interface {
    /// `name`: the NIC name the NMState uses (e.g. `eth0`, `enp1s0`).
    pub name: String,
    /// `macAddress`: as typed (validate normalises it to lowercase `aa:bb:..`).
    pub mac_address: String,
}

/// One problem in the input: where and what.
///
/// `Display`: `hosts[1].interfaces[0].macAddress: "52:54:00:AA:00:30" is already used by hosts[0]`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct FieldError {
    /// Field path (`hosts[0].rootDeviceHints.wwn`), a flag (`--mac-address`) or, for errors
    /// about the whole document, the file name.
    pub path: String,
    /// What is wrong, quoting the value, and what to do.
    pub message: String,
}

impl FieldError {
    /// A new error at `path`.
    pub fn new(path: impl Into<String>, message: impl Into<String>) -> Self {
        FieldError {
            path: path.into(),
            message: message.into(),
        }
    }
}

impl fmt::Display for FieldError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.path.is_empty() {
            write!(f, "{}", self.message)
        } else {
            write!(f, "{}: {}", self.path, self.message)
        }
    }
}

/// Every error found in one input (never empty when returned as an `Err`).
///
/// `Display`: one [`FieldError`] per line. Converts into
/// [`Error::InvalidConfig`](crate::error::Error::InvalidConfig) (exit code 3).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigErrors {
    /// The input as named to the user: the file path as given, or `flags`.
    pub source: String,
    /// The errors, in input order.
    pub errors: Vec<FieldError>,
}

impl ConfigErrors {
    /// The errors as display lines.
    pub fn lines(&self) -> Vec<String> {
        self.errors.iter().map(ToString::to_string).collect()
    }
}

impl fmt::Display for ConfigErrors {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.lines().join("\n"))
    }
}

impl std::error::Error for ConfigErrors {}

impl From<ConfigErrors> for crate::error::Error {
    fn from(e: ConfigErrors) -> Self {
        crate::error::Error::InvalidConfig(e)
    }
}

/// Architectures OpenShift nodes run, CoreOS spelling.
pub const ARCHITECTURES: [&str; 4] = ["x86_64", "aarch64", "ppc64le", "s390x"];

/// The closest of `candidates` to `key` when close enough to be a typo: compared ignoring case
/// (Levenshtein), accepted within 2 edits or a third of the key's length.
pub fn did_you_mean<'a>(key: &str, candidates: &[&'a str]) -> Option<&'a str> {
    let k = key.to_ascii_lowercase();
    candidates
        .iter()
        .map(|c| (strsim::levenshtein(&k, &c.to_ascii_lowercase()), *c))
        .filter(|(d, _)| *d <= 2.max(k.chars().count() / 3))
        .min_by_key(|(d, _)| *d)
        .map(|(_, c)| c)
}

/// Quotes a user value for messages the way Go's `%q` would: JSON string escaping, so control
/// characters and quotes cannot break the line.
pub(crate) fn q(s: &str) -> String {
    serde_json::to_string(s).unwrap_or_else(|_| "\"?\"".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn did_you_mean_finds_typos_and_case() {
        let keys = ["name", "macAddress"];
        assert_eq!(did_you_mean("macAdress", &keys), Some("macAddress"));
        assert_eq!(did_you_mean("macaddress", &keys), Some("macAddress"));
        assert_eq!(did_you_mean("nmae", &keys), Some("name"));
        assert_eq!(did_you_mean("ipAddress", &["hostname"]), None);
    }

    #[test]
    fn field_error_display() {
        let e = FieldError::new("hosts[0].hostname", "required");
        assert_eq!(e.to_string(), "hosts[0].hostname: required");
        assert_eq!(FieldError::new("", "x").to_string(), "x");
    }
}
