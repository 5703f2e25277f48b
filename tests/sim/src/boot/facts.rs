//! What a simulated machine (`agent-day2-sim boot`) reads from a node image's config to play
//! the parts nothing real plays here: the local assisted-service's answers to `monitor`
//! ([`super::rest`]), the install stages and the kubelet.
//!
//! This is a reader, not a judge. Whether the image is right is decided by the real consumers:
//! `agent-day2-sim run-node` boots the same config against the real assisted-service and its
//! agent-based-installer client (`tests/real_node.rs`, run in every CI run). The simulator's
//! earlier second reading of the node contract (a list of rules written from the same notes
//! as the plugin) is retired. A fact the image does not give is left empty, and the part of the
//! simulation that needs it fails there (an empty token is refused by [`super::rest`], say).
//!
//! The one refusal: a `--node` MAC that no `/etc/assisted/hostconfig/<hostname>/mac_addresses`
//! lists, because then there is no host for the simulator to play (a real machine would boot
//! and find no host config; `run-node` says so and boots it anyway).

use std::collections::BTreeMap;

use serde_json::Value;

use super::ignition::{env_file, Config};

/// Path of the local assisted-service environment file (agent installer's
/// `usr/local/share/assisted-service/assisted-service.env`).
pub const SERVICE_ENV: &str = "/usr/local/share/assisted-service/assisted-service.env";
const ADD_NODES_ENV: &str = "/etc/assisted/add-nodes.env";
const RENDEZVOUS_ENV: &str = "/etc/assisted/rendezvous-host.env";
const IMPORT_CONFIG: &str = "/etc/assisted/clusterconfig/import-cluster-config.json";
const CLUSTER_IMAGE_SET: &str = "/etc/assisted/manifests/cluster-image-set.yaml";
const INFRA_ENV: &str = "/etc/assisted/manifests/infraenv.yaml";

/// One host of the image, found by MAC.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostFacts {
    pub hostname: String,
    /// `hostconfig/<host>/role`, trimmed (empty when absent).
    pub role: String,
    /// Lowercase MACs from `mac_addresses`.
    pub macs: Vec<String>,
}

/// What the node learned from its config, for the simulated REST API and the kubelet. Each
/// field is empty (or false) when the image does not give it.
#[derive(Debug, Clone, Default)]
pub struct Facts {
    /// `add-nodes.env` CLUSTER_ID (ClusterVersion `spec.clusterID`).
    pub cluster_id: String,
    /// `add-nodes.env` CLUSTER_NAME.
    pub cluster_name: String,
    /// `add-nodes.env` CLUSTER_API_VIP_DNS_NAME (`api.<name>.<domain>`).
    pub api_dns_name: String,
    /// What follows `api.<cluster_name>.` in `api_dns_name`.
    pub base_domain: String,
    /// The service env's INFRA_ENV_ID.
    pub infra_env_id: String,
    /// `rendezvous-host.env` PULL_SECRET_TOKEN (agentAuth).
    pub agent_token: String,
    /// The service env's USER_AUTH_TOKEN (userAuth).
    pub user_token: String,
    /// The service env's WATCHER_AUTH_TOKEN (watcherAuth).
    pub watcher_token: String,
    /// The P-256 point of `EC_PUBLIC_KEY_PEM`: what the node's API verifies tokens with
    /// (empty when the key is missing or unreadable; then every token is refused).
    pub ec_public_key: Vec<u8>,
    /// `AUTH_TOKEN_EXPIRY` as given (RFC 3339).
    pub token_expiry: String,
    /// The ClusterImageSet's `spec.releaseImage`.
    pub release_image: String,
    /// `x.y.z` from the ClusterImageSet's name, else from the release tag.
    pub openshift_version: String,
    /// The InfraEnv's `spec.cpuArchitecture`.
    pub cpu_architecture: String,
    /// `import-cluster-config.json` `networking.userManagedNetworking`.
    pub user_managed_networking: bool,
    /// hostname → host.
    pub hosts: BTreeMap<String, HostFacts>,
    /// lowercase MAC → hostname (from `/etc/assisted/hostnames/<mac>`).
    pub hostnames: BTreeMap<String, String>,
}

impl Facts {
    /// The host whose `mac_addresses` holds `mac` (case-insensitive).
    pub fn host_by_mac(&self, mac: &str) -> Option<&HostFacts> {
        let mac = mac.to_ascii_lowercase();
        self.hosts.values().find(|h| h.macs.contains(&mac))
    }
}

/// The env file at `path` of the config (empty when absent).
fn env(cfg: &Config, path: &str) -> BTreeMap<String, String> {
    cfg.text(path).map(|t| env_file(&t)).unwrap_or_default()
}

/// The first document of kind `kind` in the YAML file at `path`, if any.
fn manifest(cfg: &Config, path: &str, kind: &str) -> Option<Value> {
    let docs: Vec<Value> = serde_saphyr::from_multiple(&cfg.text(path)?).ok()?;
    docs.into_iter()
        .find(|d| d.get("kind").and_then(|k| k.as_str()) == Some(kind))
}

/// Reads the facts of `cfg` for machines with MACs `macs`. Errors: one line per MAC that no
/// host config lists (`node image: no host for MAC …`).
pub fn read(cfg: &Config, macs: &[String]) -> Result<Facts, Vec<String>> {
    let mut f = Facts::default();
    let add = env(cfg, ADD_NODES_ENV);
    let get = |m: &BTreeMap<String, String>, k: &str| m.get(k).cloned().unwrap_or_default();
    f.cluster_id = get(&add, "CLUSTER_ID");
    f.cluster_name = get(&add, "CLUSTER_NAME");
    f.api_dns_name = get(&add, "CLUSTER_API_VIP_DNS_NAME");
    f.token_expiry = get(&add, "AUTH_TOKEN_EXPIRY");
    f.base_domain = f
        .api_dns_name
        .strip_prefix(&format!("api.{}.", f.cluster_name))
        .unwrap_or_default()
        .to_string();
    f.agent_token = get(&env(cfg, RENDEZVOUS_ENV), "PULL_SECRET_TOKEN");
    let svc = env(cfg, SERVICE_ENV);
    f.user_token = get(&svc, "USER_AUTH_TOKEN");
    f.watcher_token = get(&svc, "WATCHER_AUTH_TOKEN");
    f.infra_env_id = get(&svc, "INFRA_ENV_ID");
    f.ec_public_key = svc
        .get("EC_PUBLIC_KEY_PEM")
        .and_then(|pem| super::jwt::public_key(pem).ok())
        .unwrap_or_default();
    f.user_managed_networking = cfg
        .files
        .get(IMPORT_CONFIG)
        .and_then(|b| serde_json::from_slice::<Value>(b).ok())
        .and_then(|v| v.pointer("/networking/userManagedNetworking")?.as_bool())
        .unwrap_or(false);
    if let Some(cis) = manifest(cfg, CLUSTER_IMAGE_SET, "ClusterImageSet") {
        if let Some(r) = cis.pointer("/spec/releaseImage").and_then(|r| r.as_str()) {
            f.release_image = r.to_string();
            f.openshift_version = version_from(&cis, r);
        }
    }
    f.cpu_architecture = manifest(cfg, INFRA_ENV, "InfraEnv")
        .and_then(|ie| Some(ie.pointer("/spec/cpuArchitecture")?.as_str()?.to_string()))
        .unwrap_or_default();
    for (p, _) in cfg.under("/etc/assisted/hostconfig/") {
        let Some(h) = p
            .trim_start_matches("/etc/assisted/hostconfig/")
            .split('/')
            .next()
        else {
            continue;
        };
        if f.hosts.contains_key(h) {
            continue;
        }
        let base = format!("/etc/assisted/hostconfig/{h}");
        f.hosts.insert(
            h.to_string(),
            HostFacts {
                hostname: h.to_string(),
                role: cfg
                    .text(&format!("{base}/role"))
                    .map(|r| r.trim().to_string())
                    .unwrap_or_default(),
                macs: cfg
                    .text(&format!("{base}/mac_addresses"))
                    .map(|t| t.split_whitespace().map(|m| m.to_ascii_lowercase()).collect())
                    .unwrap_or_default(),
            },
        );
    }
    for (p, d) in cfg.under("/etc/assisted/hostnames/") {
        let mac = p
            .trim_start_matches("/etc/assisted/hostnames/")
            .to_ascii_lowercase();
        f.hostnames
            .insert(mac, String::from_utf8_lossy(d).trim().to_string());
    }
    let missing: Vec<String> = macs
        .iter()
        .filter(|m| f.host_by_mac(m).is_none())
        .map(|m| {
            format!(
                "node image: no host for MAC {m}: no /etc/assisted/hostconfig/<hostname>/mac_addresses lists it (the image serves hosts {})",
                f.hosts.keys().cloned().collect::<Vec<_>>().join(", ")
            )
        })
        .collect();
    if missing.is_empty() {
        Ok(f)
    } else {
        Err(missing)
    }
}

/// `x.y.z` from the ClusterImageSet name (`openshift-4.18.12`) or the release tag (`:4.18.12-x86_64`).
fn version_from(cis: &Value, release: &str) -> String {
    let pick = |s: &str| -> Option<String> {
        let start = s.find(|ch: char| ch.is_ascii_digit())?;
        let v: String = s[start..]
            .chars()
            .take_while(|ch| ch.is_ascii_digit() || *ch == '.')
            .collect();
        (v.split('.').count() >= 2).then(|| v.trim_end_matches('.').to_string())
    };
    cis.pointer("/metadata/name")
        .and_then(|n| n.as_str())
        .and_then(pick)
        .or_else(|| release.rsplit(':').next().and_then(pick))
        .unwrap_or_default()
}

/// 8-4-4-4-12 hex.
pub fn is_uuid(s: &str) -> bool {
    let parts: Vec<&str> = s.split('-').collect();
    parts.len() == 5
        && parts
            .iter()
            .zip([8, 4, 4, 4, 12])
            .all(|(p, n)| p.len() == n && p.chars().all(|c| c.is_ascii_hexdigit()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(files: &[(&str, &str)]) -> Config {
        Config {
            files: files
                .iter()
                .map(|(p, t)| (p.to_string(), t.as_bytes().to_vec()))
                .collect(),
            ..Default::default()
        }
    }

    #[test]
    fn reads_the_hosts_and_the_cluster_identity() {
        let c = cfg(&[
            (ADD_NODES_ENV, "CLUSTER_ID=0b3e5c4d-1111-4222-8333-444455556666\nCLUSTER_NAME=ostest\nCLUSTER_API_VIP_DNS_NAME=api.ostest.example.com\n"),
            ("/etc/assisted/hostconfig/worker-0/mac_addresses", "52:54:00:AA:00:30\n"),
            ("/etc/assisted/hostconfig/worker-0/role", "worker\n"),
            (CLUSTER_IMAGE_SET, "apiVersion: hive.openshift.io/v1\nkind: ClusterImageSet\nmetadata:\n  name: openshift-4.18.12\nspec:\n  releaseImage: quay.io/x/y:4.18.12-x86_64\n"),
        ]);
        let f = read(&c, &["52:54:00:aa:00:30".into()]).unwrap();
        assert_eq!(f.base_domain, "example.com");
        assert_eq!(f.openshift_version, "4.18.12");
        assert_eq!(f.host_by_mac("52:54:00:AA:00:30").unwrap().role, "worker");
        assert!(is_uuid(&f.cluster_id));
        // Facts the image does not give stay empty: the reader does not judge.
        assert!(f.user_token.is_empty() && f.ec_public_key.is_empty());
    }

    #[test]
    fn a_mac_no_host_config_lists_is_the_one_refusal() {
        let c = cfg(&[(
            "/etc/assisted/hostconfig/worker-0/mac_addresses",
            "52:54:00:aa:00:30\n",
        )]);
        let e = read(&c, &["52:54:00:aa:00:99".into()]).unwrap_err();
        assert_eq!(e.len(), 1);
        assert!(
            e[0].contains("no host for MAC 52:54:00:aa:00:99") && e[0].contains("worker-0"),
            "{e:?}"
        );
    }
}
