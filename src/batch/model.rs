//! The batch record's shape: its ConfigMap's name, label and key, and the record's types
//! ([`BatchRecord`] and its hosts, approvals and reboots), below everything that reads or writes it.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// Our namespace ([`crate::permissions::OWN_NAMESPACE`]).
pub const NAMESPACE: &str = crate::k8s_names::OWN_NAMESPACE;
/// Label on every batch ConfigMap; its value is the batch name.
pub const LABEL: &str = "agent-day2.openshift.io/batch";
/// The data key holding the JSON record.
pub const DATA_KEY: &str = "batch.json";
/// `apiVersion` of the records this version writes: approvals and reboots in [`records`].
pub const API_VERSION: &str = "agent-day2/v2";
/// `apiVersion` of earlier versions' records (approvals and reboots inside the batch), read and
/// converted to [`API_VERSION`] on the first write ([`convert`]).
pub const API_VERSION_V1: &str = "agent-day2/v1";
/// `kind` of the record.
pub const KIND: &str = "Batch";

/// One batch of expected nodes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct BatchRecord {
    /// [`API_VERSION`], or [`API_VERSION_V1`] for a batch no write of this version touched yet.
    pub api_version: String,
    /// Always [`KIND`].
    pub kind: String,
    /// The batch (and ConfigMap) name.
    pub name: String,
    /// RFC 3339 UTC creation time (the plugin's clock).
    pub created_at: String,
    /// Who ran add-nodes: the API server's answer to a SelfSubjectReview, else the kubeconfig
    /// user (then suffixed ` (kubeconfig user)`), else `unknown`.
    pub created_by: String,
    /// Cluster ID (ClusterVersion spec.clusterID) the batch is for.
    pub cluster_id: String,
    /// The release the image was made for (Completed history entry).
    pub release_image: String,
    /// Its version, e.g. `4.18.12`.
    pub version: String,
    /// CoreOS architecture of the hosts (x86_64, aarch64, ...).
    pub architecture: String,
    /// MachineConfigPool the hosts join (`worker` unless `--pool`).
    pub pool: String,
    /// Labels to put on each node when it joins (`--node-labels`).
    #[serde(default)]
    pub node_labels: BTreeMap<String, String>,
    /// `iso`, `pxe` or `config-image`.
    pub output_kind: String,
    /// File names written (relative to `--dir`).
    pub files: Vec<String>,
    /// Lowercase hex sha256 of the file that carries the Ignition (ISO, PXE initrd or config
    /// image).
    pub image_sha256: String,
    /// RFC 3339 UTC expiry of the tokens in the image: the nodes cannot be added after it,
    /// and `approve` accepts no client CSR after it.
    pub token_expires_at: String,
    /// The hosts.
    pub hosts: Vec<BatchHost>,
    /// Approvals done by `approve`: stored as [`records`] (v2) or here (v1); [`list`] and
    /// [`get`] merge both.
    #[serde(default)]
    pub approvals: Vec<Approval>,
    /// Reboots reported by the hosts' own assisted-service, as `monitor` saw them (one per
    /// host, the first kept): `approve` approves a host's client CSR only when it was made
    /// after this. Stored as [`records`] (v2) or here (v1); merged as `approvals`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub reboots: Vec<Reboot>,
    /// How many of `approvals` and `reboots` the batch's own JSON held (an earlier version's,
    /// or a hand edit): [`update`] moves them into [`records`] first. Not stored.
    #[serde(skip)]
    pub embedded: usize,
}

/// A host's own assisted-service reported that it left the installation for its reboot.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Reboot {
    /// Host name (the future Node name).
    pub host: String,
    /// RFC 3339 UTC: when `monitor` got the report (its own clock) from the host's address.
    pub at: String,
    /// The address it was reached at.
    pub ip: String,
    /// What the host reported (`added-to-existing-cluster`, or its install stage `Rebooting`).
    pub reported: String,
    /// The host's own `progress.stage_started_at` for that stage (its clock), when given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stage_started_at: Option<String>,
    /// Who ran monitor.
    pub by: String,
}

/// One expected host.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct BatchHost {
    /// The future Node name (lowercase RFC 1123).
    pub hostname: String,
    /// Lowercase MACs.
    pub macs: Vec<String>,
    /// Addresses the operator gave (static NMState addresses); empty for DHCP hosts until
    /// `monitor --ip-addresses` records them ([`BatchHost::ip_source`]).
    #[serde(default)]
    pub ips: Vec<String>,
    /// Where `ips` come from: `static` (nodes-config), `unknown` (DHCP, not learnt yet), or
    /// `monitor` (given to `monitor --ip-addresses`). `static`, the common case, is left out of
    /// `agent-day2/v2` records (about a fifth of a host's bytes) and is what a missing field
    /// means.
    #[serde(default = "static_source", skip_serializing_if = "is_static")]
    pub ip_source: String,
}

fn static_source() -> String {
    "static".into()
}

fn is_static(s: &str) -> bool {
    s == "static"
}

/// One approved CSR.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Approval {
    /// Node name.
    pub node: String,
    /// `client` or `serving`.
    pub kind: String,
    /// CSR name.
    pub csr: String,
    /// RFC 3339 UTC.
    pub at: String,
    /// Who approved.
    pub by: String,
    /// The CSR's creationTimestamp (RFC 3339), kept for the alarms after the CSR is gone.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub csr_created: Option<String>,
    /// The CSR's `spec.username`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requester: Option<String>,
}

impl BatchHost {
    /// `ips` joined with `,`, or `unknown` (DHCP) for tables.
    pub fn ips_display(&self) -> String {
        if self.ips.is_empty() {
            "unknown (DHCP)".into()
        } else {
            self.ips.join(",")
        }
    }
}
