//! The environment files of the day-2 live system, one table per upstream role: what the
//! agent installer's units, the local assisted-service (`cmd/main.go` `Options`, envconfig) and
//! its agent-based-installer client (`cmd/agentbasedinstaller/client/main.go`) read, and where.
//!
//! Pure: [`env_files`] turns the resolved facts into `(path, text, mode)`. Keys and file
//! names are interface facts (docs/node-contract.md "Files and environment keys"); the values
//! are ours.
//!
//! Format: one `KEY=VALUE` per line, no quotes. podman's `--env-file` takes the value
//! literally; systemd's `EnvironmentFile=` strips quotes only around a whole value, and no value
//! here starts with a quote (JSON values start with `[`).

/// Local assisted-service URL (the node is its own rendezvous host).
pub const SERVICE_BASE_URL: &str = "http://127.0.0.1:8090/";
/// Local image service URL.
pub const IMAGE_SERVICE_BASE_URL: &str = "http://127.0.0.1:8888/";

use serde_json::{json, Value};

/// Day-2 marker and cluster identity (`ConditionPathExists=` of the day-2 units; read by the
/// client's `importCluster`: `CLUSTER_ID`, `CLUSTER_NAME`, `CLUSTER_API_VIP_DNS_NAME`).
pub const ADD_NODES_ENV: &str = "/etc/assisted/add-nodes.env";
/// Rendezvous settings: the node is its own rendezvous host. Also the agent's
/// `PULL_SECRET_TOKEN` and the clients' `USER_AUTH_TOKEN` (upstream puts both here).
pub const RENDEZVOUS_ENV: &str = "/etc/assisted/rendezvous-host.env";
/// The local assisted-service's settings (auth, database, storage, validations).
pub const SERVICE_ENV: &str = "/usr/local/share/assisted-service/assisted-service.env";
/// `OS_IMAGES` and the image service settings of the local assisted-service.
pub const IMAGES_ENV: &str = "/usr/local/share/assisted-service/images.env";
/// The release's agent-installer component images. Upstream resolves them at boot
/// (`get-container-images.sh`); we read the payload when the image is made.
pub const AGENT_IMAGES_ENV: &str = "/usr/local/share/assisted-service/agent-images.env";
/// The database container's settings (`start_db.sh` reads `POSTGRESQL_*`).
pub const DB_ENV: &str = "/usr/local/share/assisted-service/assisted-db.env";

/// Database name, user and password of the local assisted-service, as the agent installer's
/// `assisted-db.env` and `assisted-service.env` have them. The database listens on the
/// node's loopback only and lives in RAM until the node reboots; `start_db.sh` initialises it
/// with trust authentication, so the password is not a secret boundary.
pub const DB_NAME: &str = "installer";
/// See [`DB_NAME`].
pub const DB_USER: &str = "admin";
/// See [`DB_NAME`].
pub const DB_PASS: &str = "admin";

/// What the env files are written from, resolved by the caller.
#[derive(Debug, Clone)]
pub struct EnvInputs<'a> {
    /// ClusterVersion `spec.clusterID`.
    pub cluster_id: &'a str,
    /// Cluster name (first label of the API name after `api.`).
    pub cluster_name: &'a str,
    /// `api.<name>.<domain>`.
    pub api_dns_name: &'a str,
    /// RFC 3339 UTC expiry of the tokens.
    pub token_expiry: &'a str,
    /// base64 of the PEM public key that verifies the tokens (`EC_PUBLIC_KEY_PEM`).
    pub public_key_pem_b64: String,
    /// ES256 JWTs, `auth_scheme` agentAuth / userAuth / watcherAuth.
    pub agent_token: &'a str,
    /// See `agent_token`.
    pub user_token: &'a str,
    /// See `agent_token`.
    pub watcher_token: &'a str,
    /// The InfraEnv ID the client registers (hyphenated UUID).
    pub infra_env_id: String,
    /// The cluster's release image pull spec.
    pub release_image: &'a str,
    /// The cluster's version, e.g. `4.18.12`.
    pub openshift_version: &'a str,
    /// CoreOS/assisted-service architecture of the new hosts (`x86_64`, `aarch64`, …).
    pub cpu_architecture: &'a str,
    /// The RHCOS live ISO the hosts boot: (URL, RHCOS build), from `coreos-bootimages` or,
    /// for `--base-iso`, the file's `file://` URL and the build its stream entry names.
    pub os_image: (String, String),
    /// The mirror of the release image when the cluster is disconnected
    /// (`OPENSHIFT_INSTALL_RELEASE_IMAGE_MIRROR`).
    pub release_image_mirror: Option<String>,
    /// Registries the service treats as public (no pull-secret entry needed),
    /// comma-separated.
    pub public_registries: String,
    /// Component images (`SERVICE_IMAGE` = agent-installer-api-server, `AGENT_DOCKER_IMAGE` =
    /// -node-agent, `INSTALLER_IMAGE` = -orchestrator, `AGENT_INSTALLER_UTILS_IMAGE` = -utils).
    pub service_image: &'a str,
    /// See `service_image`.
    pub agent_image: &'a str,
    /// See `service_image`.
    pub installer_image: &'a str,
    /// See `service_image`.
    pub utils_image: &'a str,
}

/// One env file: path, lines, mode.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EnvFile {
    /// Absolute path on the node.
    pub path: &'static str,
    /// `(KEY, VALUE)` in file order.
    pub entries: Vec<(&'static str, String)>,
    /// File mode: 0600 when a value grants access (tokens), else 0644.
    pub mode: i64,
}

impl EnvFile {
    /// `KEY=VALUE\n` lines.
    pub fn text(&self) -> String {
        self.entries.iter().map(|(k, v)| format!("{k}={v}\n")).collect()
    }
}

/// `major.minor` of a version (`4.18.12` → `4.18`); the input when it has no dot.
pub fn major_minor(version: &str) -> String {
    let mut parts = version.split('.');
    match (parts.next(), parts.next()) {
        (Some(a), Some(b)) if !a.is_empty() && !b.is_empty() => {
            let b: String = b.chars().take_while(char::is_ascii_digit).collect();
            format!("{a}.{b}")
        }
        _ => version.to_string(),
    }
}

/// `OS_IMAGES`: the one RHCOS live ISO of the new hosts' architecture. assisted-service
/// exits at start when the list is empty ("OS_IMAGES list is empty", `cmd/main.go`) and
/// requires `openshift_version`, `cpu_architecture`, `url` and `version` in each entry
/// (`internal/versions/osimages.go`). The URL is only recorded: the node already booted it.
pub fn os_images(i: &EnvInputs<'_>) -> Value {
    let (url, version) = &i.os_image;
    json!([{
        "openshift_version": major_minor(i.openshift_version),
        "cpu_architecture": i.cpu_architecture,
        "url": url,
        "version": version,
    }])
}

/// `RELEASE_IMAGES`: the cluster's own release (`models.ReleaseImage`).
pub fn release_images(i: &EnvInputs<'_>) -> Value {
    json!([{
        "openshift_version": major_minor(i.openshift_version),
        "cpu_architecture": i.cpu_architecture,
        "cpu_architectures": [i.cpu_architecture],
        "url": i.release_image,
        "version": i.openshift_version,
    }])
}

/// `HW_VALIDATOR_REQUIREMENTS`: the per-role minimums the service judges hosts by
/// (`internal/hardware/validator.go`; its default `[]` fails every host's CPU and memory
/// validation with "requirements for version … not found", so no host becomes `known`).
/// The values are assisted-service's published defaults for OpenShift (CPU cores, RAM in
/// MiB, installation disk in GB, disk speed and network thresholds in ms, packet loss in %).
pub fn hw_requirements() -> Value {
    json!([{
        "version": "default",
        "master": {"cpu_cores": 4, "ram_mib": 16384, "disk_size_gb": 100,
                   "installation_disk_speed_threshold_ms": 10,
                   "network_latency_threshold_ms": 100, "packet_loss_percentage": 0},
        "arbiter": {"cpu_cores": 2, "ram_mib": 8192, "disk_size_gb": 50,
                    "installation_disk_speed_threshold_ms": 10,
                    "network_latency_threshold_ms": 1000, "packet_loss_percentage": 0},
        "worker": {"cpu_cores": 2, "ram_mib": 8192, "disk_size_gb": 100,
                   "installation_disk_speed_threshold_ms": 10,
                   "network_latency_threshold_ms": 1000, "packet_loss_percentage": 10},
        "sno": {"cpu_cores": 8, "ram_mib": 16384, "disk_size_gb": 100,
                "installation_disk_speed_threshold_ms": 10},
        "edge-worker": {"cpu_cores": 2, "ram_mib": 8192, "disk_size_gb": 15,
                        "installation_disk_speed_threshold_ms": 10}
    }])
}

/// Every env file, in the order they are written.
pub fn env_files(i: &EnvInputs<'_>) -> Vec<EnvFile> {
    let s = String::from;
    let mut service: Vec<(&'static str, String)> = vec![
        ("AUTH_TYPE", s("agent-installer-local")),
        ("EC_PUBLIC_KEY_PEM", i.public_key_pem_b64.clone()),
        ("USER_AUTH_TOKEN", s(i.user_token)),
        ("WATCHER_AUTH_TOKEN", s(i.watcher_token)),
        ("INFRA_ENV_ID", i.infra_env_id.clone()),
        ("DB_HOST", s("127.0.0.1")),
        ("DB_PORT", s("5432")),
        ("DB_USER", s(DB_USER)),
        ("DB_PASS", s(DB_PASS)),
        ("DB_NAME", s(DB_NAME)),
        ("DEPLOY_TARGET", s("onprem")),
        ("STORAGE", s("filesystem")),
        ("INSTALL_INVOKER", s("agent-installer")),
        ("DUMMY_IGNITION", s("false")),
        ("IPV6_SUPPORT", s("true")),
        ("DISK_ENCRYPTION_SUPPORT", s("true")),
        ("NTP_DEFAULT_SERVER", String::new()),
        ("HW_VALIDATOR_REQUIREMENTS", hw_requirements().to_string()),
        ("RELEASE_IMAGES", release_images(i).to_string()),
        ("PUBLIC_CONTAINER_REGISTRIES", i.public_registries.clone()),
        // The node's discovery agent is the release's own; never replace it.
        ("ENABLE_UPGRADE_AGENT", s("false")),
        // The service would otherwise upload install data to an external endpoint.
        ("ENABLE_DATA_COLLECTION", s("false")),
    ];
    if let Some(m) = &i.release_image_mirror {
        service.push(("OPENSHIFT_INSTALL_RELEASE_IMAGE_MIRROR", m.clone()));
    }
    vec![
        EnvFile {
            path: ADD_NODES_ENV,
            // Exactly these four: upstream's acceptance data matches the whole file.
            entries: vec![
                ("CLUSTER_ID", s(i.cluster_id)),
                ("CLUSTER_NAME", s(i.cluster_name)),
                ("CLUSTER_API_VIP_DNS_NAME", s(i.api_dns_name)),
                ("AUTH_TOKEN_EXPIRY", s(i.token_expiry)),
            ],
            mode: 0o644,
        },
        EnvFile {
            path: RENDEZVOUS_ENV,
            entries: vec![
                ("NODE_ZERO_IP", s("127.0.0.1")),
                ("SERVICE_BASE_URL", s(SERVICE_BASE_URL)),
                ("IMAGE_SERVICE_BASE_URL", s(IMAGE_SERVICE_BASE_URL)),
                ("PULL_SECRET_TOKEN", s(i.agent_token)),
                ("USER_AUTH_TOKEN", s(i.user_token)),
                ("WORKFLOW_TYPE", s("addnodes")),
            ],
            mode: 0o600,
        },
        EnvFile {
            path: SERVICE_ENV,
            entries: service,
            mode: 0o600,
        },
        EnvFile {
            path: IMAGES_ENV,
            entries: vec![
                ("ASSISTED_SERVICE_HOST", s("127.0.0.1:8090")),
                ("ASSISTED_SERVICE_SCHEME", s("http")),
                ("IMAGE_SERVICE_BASE_URL", s(IMAGE_SERVICE_BASE_URL)),
                ("OS_IMAGES", os_images(i).to_string()),
            ],
            mode: 0o644,
        },
        EnvFile {
            path: AGENT_IMAGES_ENV,
            entries: vec![
                ("RELEASE_IMAGE", s(i.release_image)),
                ("OPENSHIFT_VERSION", s(i.openshift_version)),
                ("SERVICE_IMAGE", s(i.service_image)),
                ("AGENT_DOCKER_IMAGE", s(i.agent_image)),
                ("INSTALLER_IMAGE", s(i.installer_image)),
                ("AGENT_INSTALLER_UTILS_IMAGE", s(i.utils_image)),
            ],
            mode: 0o644,
        },
        EnvFile {
            path: DB_ENV,
            entries: vec![
                ("POSTGRESQL_DATABASE", s(DB_NAME)),
                ("POSTGRESQL_USER", s(DB_USER)),
                ("POSTGRESQL_PASSWORD", s(DB_PASS)),
            ],
            mode: 0o600,
        },
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn major_minor_of_versions() {
        assert_eq!(major_minor("4.18.12"), "4.18");
        assert_eq!(major_minor("4.19.0-rc.1"), "4.19");
        assert_eq!(major_minor("4.20"), "4.20");
        assert_eq!(major_minor("release"), "release");
    }

    #[test]
    fn hw_requirements_have_a_default_worker_entry() {
        let v = hw_requirements();
        let d = &v[0];
        assert_eq!(d["version"], "default");
        assert!(d["worker"]["cpu_cores"].as_u64().unwrap() >= 2);
        assert!(d["worker"]["ram_mib"].as_u64().unwrap() >= 8192);
    }
}
