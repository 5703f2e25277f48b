//! The objects a new simulated cluster starts with (an OpenShift 4.18 compact bare-metal
//! cluster by default; the scenario changes it). Owned by the seed work; stub for now.

use crate::scenario::Scenario;

/// What the seed needs to know about the running simulator.
#[derive(Debug, Clone)]
pub struct SeedContext {
    /// URL clients use for the API, e.g. `https://192.168.111.5:6443`.
    pub api_url: String,
    /// Base URL of the simulator's plain-HTTP file server, e.g. `http://192.168.111.5:8080`.
    pub files_base_url: String,
    /// The base ISO served by the file server.
    pub base_iso: BaseIsoInfo,
    /// PEM of the simulator's CA (also used as the Machine Config Server CA).
    pub ca_pem: String,
}

/// A base ISO on disk, served by the file server under `file_name`.
#[derive(Debug, Clone)]
pub struct BaseIsoInfo {
    pub path: std::path::PathBuf,
    /// File name under the file server root, e.g. `rhcos-418.94.202501221327-0-live.x86_64.iso`.
    pub file_name: String,
    /// Lowercase hex sha256 of the file.
    pub sha256: String,
    /// Size in bytes.
    pub size: u64,
}

/// The seeded objects, in creation order (namespaces first). Each is a full object with
/// apiVersion, kind and metadata; the server assigns uid, resourceVersion and timestamps.
pub fn seed_objects(_scenario: &Scenario, _ctx: &SeedContext) -> anyhow::Result<Vec<serde_json::Value>> {
    Ok(Vec::new())
}
