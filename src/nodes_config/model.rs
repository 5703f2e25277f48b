//! The nodes-config document as read ([`NodesConfig`] and its hosts), and the helpers its
//! readers share (the "did you mean" of a mistyped key, quoting).

use serde::Serialize;
use serde_json::Value;

use crate::error::FieldError;

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
