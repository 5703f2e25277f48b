//! The day-2 node's Ignition config: everything the node contract (docs/node-contract.md)
//! lists, written from the facts of the cluster ([`ClusterModel`]), the batch's hosts
//! ([`HostSpec`]), the auth material ([`AuthMaterial`]) and the release's component images
//! ([`ComponentImages`]).
//!
//! Pure: [`build`] returns a typed Ignition 3.2 config (`ignition-config` crate; the RHCOS live
//! ISO's Ignition reads 3.2 and newer); [`to_json`] serialises it for embedding;
//! [`redacted`] is the `--dry-run` view with every secret file's contents replaced by
//! `<redacted>`.
//!
//! Layout of the files (paths are interface facts: docs/node-contract.md "Files and environment
//! keys"):
//! * the env files of [`env`]: `/etc/assisted/{add-nodes,rendezvous-host}.env`,
//!   `/usr/local/share/assisted-service/{assisted-service,images,agent-images,assisted-db}.env`;
//! * `/etc/assisted/clusterconfig/{import-cluster-config,worker-ignition-endpoint}.json`,
//!   `manifests/*.yaml`, `hostconfig/<host>/…`, `hostnames/<mac>`, `network/<host>/…`, and the
//!   empty `extra-manifests/` the client mounts;
//! * `/etc/containers/registries.conf`, `containers.conf` (empty `infra_image`), CA anchors
//!   under `/etc/pki/ca-trust/source/anchors/` (RHCOS runs `update-ca-trust` at boot when that
//!   directory has files), `/etc/chrony.conf`, the proxy as systemd's default environment,
//!   `/root/.docker/config.json`;
//! * units and scripts of [`units`].
//!
//! Files holding a secret (pull secret, tokens, keyfiles, proxy credentials) have mode 0600; scripts 0755; the rest 0644. Contents are inline `data:` URLs, percent-encoded text rather than base64 or
//! per-file gzip: the whole config is xz-compressed into the ISO's 256 KiB embed area, and
//! plain text compresses best there.

pub mod env;
pub mod registries;
pub mod units;

use std::collections::BTreeSet;

use base64::engine::general_purpose::STANDARD;
use base64::Engine;
use ignition_config::v3_2::{Config, Directory, File, Passwd, Resource, Storage, Systemd, Unit, User};
use serde_json::{json, Map, Value};
use uuid::Uuid;

use crate::auth::AuthMaterial;
use crate::cluster::{normalize_arch, ClusterModel};
use crate::error::Error;

/// The namespace of the manifests on the node's local assisted-service (the agent
/// installer's fixed `cluster0`).
pub const MANIFEST_NAMESPACE: &str = "cluster0";
/// Label of the InfraEnv's NMState selector; its value is the cluster name.
pub const NMSTATE_LABEL: &str = "infraenvs.agent-install.openshift.io";
/// The pool new hosts join unless `--pool` says otherwise.
pub const DEFAULT_POOL: &str = "worker";
pub use env::{IMAGE_SERVICE_BASE_URL, SERVICE_BASE_URL};
/// systemd's default environment with the cluster's proxy (written only when there is one).
pub const PROXY_CONF: &str = "/etc/systemd/system.conf.d/10-agent-day2-proxy.conf";

const MODE_PUBLIC: i64 = 0o644;
const MODE_SECRET: i64 = 0o600;
const MODE_SCRIPT: i64 = 0o755;

/// Pull specs of the release's agent-installer images (`image-references` of the release
/// payload: `agent-installer-api-server`, `-node-agent`, `-orchestrator`, `-utils`), read by
/// another part of add-nodes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ComponentImages {
    /// `agent-installer-api-server`: the local assisted-service (and its database).
    pub api_server: String,
    /// `agent-installer-node-agent`: the discovery agent.
    pub node_agent: String,
    /// `agent-installer-orchestrator`: assisted-installer, which writes the disk.
    pub orchestrator: String,
    /// `agent-installer-utils`.
    pub utils: String,
}

/// One interface of a host: its name in the NMState config and its MAC.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostInterface {
    /// e.g. `eth0`.
    pub name: String,
    /// `aa:bb:cc:dd:ee:ff` (any case; written lowercase).
    pub mac_address: String,
}

/// One host of the batch, as the builder needs it (adapted from the validated nodes-config).
#[derive(Debug, Clone, PartialEq)]
pub struct HostSpec {
    /// Lowercase RFC 1123 hostname; also a directory name on the node.
    pub hostname: String,
    /// `worker` (day-2 hosts are workers).
    pub role: String,
    /// At least one.
    pub interfaces: Vec<HostInterface>,
    /// `rootDeviceHints` as given (camelCase keys: deviceName, hctl, model, vendor,
    /// serialNumber, minSizeGigabytes, wwn, rotational); `None` = no hints.
    pub root_device_hints: Option<Value>,
    /// The NMState document (`networkConfig`), `None` for DHCP hosts.
    pub network_config: Option<Value>,
    /// NetworkManager keyfiles generated from `network_config`: (file name, contents), e.g.
    /// (`eth0.nmconnection`, …).
    pub keyfiles: Vec<(String, String)>,
}

impl HostSpec {
    /// Lowercase MACs of the interfaces, in order, without duplicates.
    pub fn macs(&self) -> Vec<String> {
        let mut out: Vec<String> = Vec::new();
        for i in &self.interfaces {
            let m = i.mac_address.to_ascii_lowercase();
            if !out.contains(&m) {
                out.push(m);
            }
        }
        out
    }
}

/// The builder's hosts from a validated nodes-config: `validated[i]` is the result of
/// [`crate::nodes_config::validate`] for `cfg.hosts[i]` (same order, as `validate` returns
/// them). MACs, interface names, role and keyfiles come from the validated host; root device
/// hints and the NMState document from the nodes-config entry.
pub fn host_specs(
    cfg: &crate::nodes_config::NodesConfig,
    validated: &[crate::nodes_config::ValidatedHost],
) -> Vec<HostSpec> {
    validated
        .iter()
        .zip(&cfg.hosts)
        .map(|(v, h)| HostSpec {
            hostname: v.hostname.clone(),
            role: v.role.clone(),
            interfaces: v
                .macs
                .iter()
                .zip(&v.interface_names)
                .map(|(mac, name)| HostInterface {
                    name: name.clone(),
                    mac_address: mac.clone(),
                })
                .collect(),
            root_device_hints: h
                .root_device_hints
                .as_ref()
                .and_then(|r| serde_json::to_value(r).ok()),
            network_config: h.network_config.clone(),
            keyfiles: v.keyfiles.clone(),
        })
        .collect()
}

/// What [`build`] reads. `Debug` leaves out the pull secret (the auth material redacts itself).
#[derive(Clone)]
pub struct NodeImageInputs<'a> {
    /// The cluster (identity, release, MCS, proxy, trust bundle, mirrors, SSH, chrony, platform).
    pub cluster: &'a ClusterModel,
    /// The batch's hosts (at least one).
    pub hosts: &'a [HostSpec],
    /// Key and tokens of the local assisted-service.
    pub auth: &'a AuthMaterial,
    /// The release's agent-installer images.
    pub images: &'a ComponentImages,
    /// `.dockerconfigjson` text (JSON with `auths`).
    pub pull_secret: &'a str,
    /// Custom MachineConfigPool (`--pool`); `None` = `worker`.
    pub pool: Option<String>,
    /// ID of the InfraEnv the node's assisted-service registers (one per batch).
    pub infra_env_id: Uuid,
    /// `sshKey` of the nodes-config; overrides the cluster's `99-worker-ssh` key. May hold
    /// several keys, one per line.
    pub ssh_key: Option<String>,
    /// `cpuArchitecture` of the nodes-config (x86_64/amd64, aarch64/arm64, …); `None` = the
    /// control plane's.
    pub cpu_architecture: Option<String>,
    /// Where the base ISO came from when the cluster's CoreOS stream has none for the
    /// architecture (`--base-iso`: a `file://` URL); recorded in the service's `OS_IMAGES`.
    pub base_iso_url: Option<String>,
}

impl std::fmt::Debug for NodeImageInputs<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NodeImageInputs")
            .field("cluster", &self.cluster.cluster)
            .field("hosts", &self.hosts)
            .field("auth", self.auth)
            .field("images", self.images)
            .field(
                "pull_secret",
                &format_args!("<{} bytes redacted>", self.pull_secret.len()),
            )
            .field("pool", &self.pool)
            .field("infra_env_id", &self.infra_env_id)
            .field("ssh_key", &self.ssh_key)
            .field("cpu_architecture", &self.cpu_architecture)
            .field("base_iso_url", &self.base_iso_url)
            .finish()
    }
}

fn invalid(field: impl Into<String>, message: impl Into<String>) -> Error {
    Error::InvalidInput {
        field: field.into(),
        message: message.into(),
    }
}

/// Percent-encodes `data` as an RFC 2397 `data:` URL. Letters, digits and `-._~/:=@+` stay
/// as they are (text stays readable and compresses well); everything else becomes `%XX`.
pub fn data_url(data: &[u8]) -> String {
    let mut out = String::with_capacity(data.len() + data.len() / 8 + 6);
    out.push_str("data:,");
    for &b in data {
        if b.is_ascii_alphanumeric() || b"-._~/:=@+".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// Files and directories of the config.
struct Files(Vec<File>, Vec<Directory>);

impl Files {
    /// Appends `data` to `path` (created when absent), as Ignition's `append` does.
    fn append(&mut self, path: impl Into<String>, data: impl AsRef<[u8]>, mode: i64) {
        let mut f = File::new(path.into());
        f.append = Some(vec![Resource {
            source: Some(data_url(data.as_ref())),
            ..Default::default()
        }]);
        f.mode = Some(mode);
        self.0.push(f);
    }

    /// An empty directory (mode 0755).
    fn dir(&mut self, path: impl Into<String>) {
        let mut d = Directory::new(path.into());
        d.mode = Some(MODE_SCRIPT);
        self.1.push(d);
    }

    fn add(&mut self, path: impl Into<String>, data: impl AsRef<[u8]>, mode: i64) {
        let mut f = File::new(path.into());
        f.contents = Some(Resource {
            source: Some(data_url(data.as_ref())),
            ..Default::default()
        });
        f.mode = Some(mode);
        // The live root already has some of these paths (/etc/chrony.conf,
        // /etc/containers/registries.conf); without overwrite Ignition would fail on them.
        f.overwrite = Some(true);
        self.0.push(f);
    }
}

/// A path component we create from user input (hostname, MAC, keyfile name): non-empty, no
/// `/`, no leading `.`, printable ASCII.
fn safe_component(s: &str) -> bool {
    !s.is_empty() && !s.starts_with('.') && s.bytes().all(|b| b.is_ascii_graphic() && b != b'/' && b != b'\\')
}

fn is_mac(s: &str) -> bool {
    let parts: Vec<&str> = s.split(':').collect();
    (parts.len() == 6 || parts.len() == 20)
        && parts
            .iter()
            .all(|p| p.len() == 2 && p.bytes().all(|b| b.is_ascii_hexdigit()))
}

/// A DNS label (MachineConfigPool names are Kubernetes names).
fn is_pool_name(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 63
        && s.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !s.starts_with('-')
        && !s.ends_with('-')
}

fn yaml(v: &Value, what: &str) -> Result<String, Error> {
    serde_saphyr::to_string(v).map_err(|e| Error::Unexpected(format!("cannot write {what} as YAML: {e}")))
}

/// The MCS endpoint as assisted-service wants it in the cluster's `ignition_endpoint.url`: the
/// cluster's worker URL without its pool (`https://api-int.<name>.<domain>:22623/config`).
/// The service appends the host's pool itself (`internal/host/hostutil/host_utils.go`
/// `GetIgnitionEndpointAndCert`: `path.Join(url.Path, poolName)`, the host's
/// `machine_config_pool_name` or its role), so a URL ending in `/config/worker` would be asked
/// for `/config/worker/worker`, which the MCS does not serve.
fn mcs_base_url(url: &str) -> String {
    match url.rfind("/config/") {
        Some(i) => format!("{}/config", &url[..i]),
        None if url.trim_end_matches('/').ends_with("/config") => url.trim_end_matches('/').to_string(),
        None => format!("{}/config", url.trim_end_matches('/')),
    }
}

/// Builds the node's Ignition config.
///
/// Errors ([`Error::InvalidInput`], naming the field): no hosts; a host without interfaces,
/// with an unusable hostname, MAC or keyfile name; a MAC or hostname used twice; a bad pool
/// name; no SSH key (neither the nodes-config `sshKey` nor the cluster's `99-worker-ssh`);
/// a pull secret that is not JSON with `auths`; a cluster model without ID, name, domain or
/// release image; an image pull spec that is empty.
pub fn build(inputs: &NodeImageInputs<'_>) -> Result<Config, Error> {
    let c = inputs.cluster;
    let id = &c.cluster;
    for (field, v) in [
        ("ClusterVersion spec.clusterID", &id.id),
        ("cluster name (Infrastructure status.apiServerURL)", &id.name),
        (
            "base domain (Infrastructure status.apiServerURL)",
            &id.base_domain,
        ),
        (
            "release image (ClusterVersion status.history)",
            &c.version.release_image,
        ),
    ] {
        if v.trim().is_empty() {
            return Err(invalid(
                field,
                "is empty in the cluster model; the node cannot import the cluster without it",
            ));
        }
    }
    for (field, v) in [
        ("images.agent-installer-api-server", &inputs.images.api_server),
        ("images.agent-installer-node-agent", &inputs.images.node_agent),
        ("images.agent-installer-orchestrator", &inputs.images.orchestrator),
        ("images.agent-installer-utils", &inputs.images.utils),
    ] {
        if v.trim().is_empty() || v.chars().any(char::is_whitespace) {
            return Err(invalid(field, format!("{v:?} is not an image pull spec")));
        }
    }
    if inputs.hosts.is_empty() {
        return Err(invalid("hosts", "at least one host must be defined"));
    }
    let pool = inputs.pool.clone().unwrap_or_else(|| DEFAULT_POOL.to_string());
    if !is_pool_name(&pool) {
        return Err(invalid(
            "--pool",
            format!("{pool:?} is not a MachineConfigPool name (lowercase letters, digits, '-')"),
        ));
    }
    let ps: Value = serde_json::from_str(inputs.pull_secret)
        .map_err(|e| invalid("pull secret .dockerconfigjson", format!("is not JSON: {e}")))?;
    if !ps.get("auths").is_some_and(Value::is_object) {
        return Err(invalid(
            "pull secret .dockerconfigjson",
            "has no \"auths\" object",
        ));
    }
    let ssh_keys: Vec<String> = match inputs.ssh_key.as_deref().filter(|k| !k.trim().is_empty()) {
        Some(k) => k
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty())
            .map(String::from)
            .collect(),
        None => c
            .ssh
            .keys
            .iter()
            .map(|k| k.trim().to_string())
            .filter(|k| !k.is_empty())
            .collect(),
    };
    if ssh_keys.is_empty() {
        return Err(invalid(
            "sshKey",
            "no SSH key: the cluster has none in MachineConfig 99-worker-ssh; set sshKey in the nodes-config",
        ));
    }
    let arch = normalize_arch(
        inputs
            .cpu_architecture
            .as_deref()
            .unwrap_or(&c.architecture.control_plane),
    );
    if arch.is_empty() {
        return Err(invalid(
            "cpuArchitecture",
            "unknown: the control plane's architecture was not found; set cpuArchitecture",
        ));
    }

    // Hosts: names and MACs become paths on the node, so check them here too.
    let mut seen_names = BTreeSet::new();
    let mut seen_macs = BTreeSet::new();
    for (i, h) in inputs.hosts.iter().enumerate() {
        if !safe_component(&h.hostname) {
            return Err(invalid(
                format!("hosts[{i}].hostname"),
                format!("{:?} cannot be used as a directory name", h.hostname),
            ));
        }
        if !seen_names.insert(h.hostname.clone()) {
            return Err(invalid(
                format!("hosts[{i}].hostname"),
                format!("{:?} is used by another host", h.hostname),
            ));
        }
        if h.interfaces.is_empty() {
            return Err(invalid(
                format!("hosts[{i}].interfaces"),
                "at least one interface with a macAddress is required",
            ));
        }
        for (j, itf) in h.interfaces.iter().enumerate() {
            let mac = itf.mac_address.to_ascii_lowercase();
            if !is_mac(&mac) {
                return Err(invalid(
                    format!("hosts[{i}].interfaces[{j}].macAddress"),
                    format!("{:?} is not a MAC address", itf.mac_address),
                ));
            }
            if !seen_macs.insert(mac) {
                return Err(invalid(
                    format!("hosts[{i}].interfaces[{j}].macAddress"),
                    format!("{:?} is used by another interface", itf.mac_address),
                ));
            }
        }
        for (k, (name, _)) in h.keyfiles.iter().enumerate() {
            if !safe_component(name) || name == "mac_interface.ini" {
                return Err(invalid(
                    format!("hosts[{i}].keyfiles[{k}]"),
                    format!("{name:?} cannot be used as a file name"),
                ));
            }
        }
    }

    let mut files = Files(Vec::new(), Vec::new());
    let api_dns = format!("api.{}.{}", id.name, id.base_domain);

    // User-managed networking on platforms none and external (OCPBUGS-43513): there the
    // cluster has no API/ingress VIPs the host's validations could check.
    let umn = matches!(c.platform.kind.to_ascii_lowercase().as_str(), "none" | "external");
    // The client's importCluster reads `networking.userManagedNetworking` and requires the
    // file (cmd/agentbasedinstaller/import.go); a flat object would be parsed and ignored.
    files.add(
        "/etc/assisted/clusterconfig/import-cluster-config.json",
        // Indented, as upstream writes it (its acceptance data matches `"userManagedNetworking": true`).
        format!(
            "{}\n",
            serde_json::to_string_pretty(&json!({"networking": {"userManagedNetworking": umn}}))
                .unwrap_or_default()
        ),
        MODE_PUBLIC,
    );
    let mut endpoint = Map::new();
    endpoint.insert(
        "url".into(),
        Value::String(mcs_base_url(&c.machine_config_server.url)),
    );
    if let Some(ca) = c
        .machine_config_server
        .ca_pem
        .as_deref()
        .filter(|s| !s.trim().is_empty())
    {
        // assisted-service's ignition-endpoint.ca_certificate is base64 of the PEM (swagger).
        endpoint.insert("ca_certificate".into(), Value::String(STANDARD.encode(ca)));
    }
    files.add(
        "/etc/assisted/clusterconfig/worker-ignition-endpoint.json",
        format!("{}\n", Value::Object(endpoint)),
        MODE_PUBLIC,
    );

    // --- Manifests.
    let m = manifests(inputs, &arch, &ssh_keys)?;
    files.add(
        "/etc/assisted/manifests/cluster-image-set.yaml",
        m.cluster_image_set,
        MODE_PUBLIC,
    );
    files.add(
        "/etc/assisted/manifests/pull-secret.yaml",
        m.pull_secret,
        MODE_SECRET,
    );
    // A proxy URL may carry credentials (`http://user:pass@host`): then the InfraEnv is secret.
    let proxy_creds = c.proxy.as_ref().is_some_and(|p| {
        [&p.http_proxy, &p.https_proxy].iter().any(|u| {
            u.as_deref()
                .is_some_and(|u| u.split("//").nth(1).unwrap_or(u).contains('@'))
        })
    });
    files.add(
        "/etc/assisted/manifests/infraenv.yaml",
        m.infraenv,
        if proxy_creds { MODE_SECRET } else { MODE_PUBLIC },
    );
    if let Some(n) = m.nmstateconfig {
        files.add("/etc/assisted/manifests/nmstateconfig.yaml", n, MODE_PUBLIC);
    }

    // --- Hosts, matched by MAC.
    let mut with_network = false;
    for h in inputs.hosts {
        let macs = h.macs();
        let base = format!("/etc/assisted/hostconfig/{}", h.hostname);
        files.add(
            format!("{base}/mac_addresses"),
            macs.join("\n") + "\n",
            MODE_PUBLIC,
        );
        // No hints, no file: the client's LoadHostConfigs then leaves the disk choice to the
        // service, as upstream does.
        if let Some(v) = h
            .root_device_hints
            .as_ref()
            .filter(|v| v.as_object().is_some_and(|o| !o.is_empty()))
        {
            files.add(
                format!("{base}/root-device-hints.yaml"),
                yaml(v, "rootDeviceHints")?,
                MODE_PUBLIC,
            );
        }
        files.add(
            format!("{base}/role"),
            format!("{}\n", if h.role.is_empty() { "worker" } else { &h.role }),
            MODE_PUBLIC,
        );
        for mac in &macs {
            // The hostname with no newline, as upstream writes it.
            files.add(format!("/etc/assisted/hostnames/{mac}"), &h.hostname, MODE_PUBLIC);
        }
        if !h.keyfiles.is_empty() {
            with_network = true;
            let dir = format!("/etc/assisted/network/{}", h.hostname);
            let map: String = h
                .interfaces
                .iter()
                .map(|i| format!("{}={}\n", i.mac_address.to_ascii_lowercase(), i.name))
                .collect();
            files.add(format!("{dir}/mac_interface.ini"), map, MODE_PUBLIC);
            for (name, text) in &h.keyfiles {
                // NetworkManager ignores keyfiles readable by others.
                files.add(format!("{dir}/{name}"), text, MODE_SECRET);
            }
        }
    }

    // --- Platform settings.
    if let Some(conf) = registries::registries_conf(&c.mirrors) {
        files.add("/etc/containers/registries.conf", conf, MODE_PUBLIC);
    }
    for (registry, pem) in &c.mirrors.registry_cas {
        let name: String = registry
            .chars()
            .map(|ch| {
                if ch.is_ascii_alphanumeric() || ch == '.' || ch == '-' {
                    ch
                } else {
                    '_'
                }
            })
            .collect();
        files.add(
            format!("/etc/pki/ca-trust/source/anchors/agent-day2-registry-{name}.crt"),
            pem,
            MODE_PUBLIC,
        );
    }
    if let Some(pem) = c
        .trust_bundle
        .as_ref()
        .and_then(|t| t.pem.as_deref())
        .filter(|p| !p.trim().is_empty())
    {
        files.add(
            "/etc/pki/ca-trust/source/anchors/agent-day2-user-ca-bundle.crt",
            pem,
            MODE_PUBLIC,
        );
    }
    if let Some(chrony) = c.chrony_conf.as_deref().filter(|s| !s.trim().is_empty()) {
        files.add("/etc/chrony.conf", chrony, MODE_PUBLIC);
    }
    if let Some(p) = &c.proxy {
        let mut env = Vec::new();
        for (k, v) in [
            ("HTTP_PROXY", &p.http_proxy),
            ("HTTPS_PROXY", &p.https_proxy),
            ("NO_PROXY", &p.no_proxy),
        ] {
            if let Some(v) = v.as_deref().filter(|v| !v.is_empty()) {
                // Each value becomes one quoted word of systemd's DefaultEnvironment=: a quote,
                // a backslash or a control character would end it or the line (and inject
                // settings); no proxy URL or noProxy list needs them.
                if v.chars().any(|ch| ch == '"' || ch == '\\' || ch.is_control()) {
                    return Err(invalid(
                        format!("Proxy/cluster status.{}", match k {
                            "HTTP_PROXY" => "httpProxy",
                            "HTTPS_PROXY" => "httpsProxy",
                            _ => "noProxy",
                        }),
                        "holds a quote, a backslash or a control character, which no proxy setting needs; fix the cluster's Proxy (spec) and let the network operator recompute its status",
                    ));
                }
                // systemd expands `%` specifiers in DefaultEnvironment=: a literal `%` (in a
                // percent-encoded proxy password) must be written `%%`.
                let v = v.replace('%', "%%");
                env.push(format!("\"{k}={v}\" \"{}={v}\"", k.to_ascii_lowercase()));
            }
        }
        if !env.is_empty() {
            // Every unit (podman pulls, the agent, the service) inherits systemd's default
            // environment. Proxy URLs may carry credentials: 0600.
            files.add(
                PROXY_CONF,
                format!("[Manager]\nDefaultEnvironment={}\n", env.join(" ")),
                MODE_SECRET,
            );
        }
    }

    // --- The env files of the units, the service and the client (env.rs).
    let a = inputs.auth;
    let os_image = match c.base_iso_for(&arch) {
        Some(iso) => {
            let version = iso.release.clone().unwrap_or_else(|| c.version.current.clone());
            (iso.location, version)
        }
        None => (
            inputs.base_iso_url.clone().unwrap_or_default(),
            c.version.current.clone(),
        ),
    };
    if os_image.0.is_empty() {
        return Err(invalid(
            "coreos-bootimages",
            format!("the cluster's CoreOS stream has no {arch} live ISO, which the node's assisted-service needs in OS_IMAGES; give --base-iso"),
        ));
    }
    let release_mirror = crate::registry::mirrors::pull_candidates(&c.version.release_image, &c.mirrors)
        .ok()
        .and_then(|cands| cands.into_iter().find(|p| p.mirror).map(|p| p.image));
    let expiry = a.expiry_rfc3339();
    let env_inputs = env::EnvInputs {
        cluster_id: &id.id,
        cluster_name: &id.name,
        api_dns_name: &api_dns,
        token_expiry: &expiry,
        public_key_pem_b64: a.public_key_b64(),
        agent_token: &a.agent_token,
        user_token: &a.user_token,
        watcher_token: &a.watcher_token,
        infra_env_id: inputs.infra_env_id.hyphenated().to_string(),
        release_image: &c.version.release_image,
        openshift_version: &c.version.current,
        cpu_architecture: &arch,
        os_image,
        release_image_mirror: release_mirror,
        public_registries: registries::public_registries(&c.mirrors),
        service_image: &inputs.images.api_server,
        agent_image: &inputs.images.node_agent,
        installer_image: &inputs.images.orchestrator,
        utils_image: &inputs.images.utils,
    };
    for f in env::env_files(&env_inputs) {
        files.add(f.path, f.text(), f.mode);
    }
    // podman's default pause image would be pulled from a public registry by `pod create`;
    // empty, podman builds a local one (upstream appends the same, AGENT-286).
    files.append(
        "/etc/containers/containers.conf",
        "\n[engine]\ninfra_image = \"\"\n",
        MODE_PUBLIC,
    );
    files.add(units::PODMAN_AUTH, format!("{}\n", ps), MODE_SECRET);

    // --- Units and scripts.
    files.add(
        "/usr/local/bin/add-node.sh",
        units::add_node_script(&pool),
        MODE_SCRIPT,
    );
    for s in units::scripts(with_network) {
        files.add(s.path, s.contents, MODE_SCRIPT);
    }
    let units: Vec<Unit> = units::units(with_network)
        .into_iter()
        .map(|u| {
            let mut unit = Unit::new(u.name.to_string());
            unit.contents = Some(u.contents);
            unit.enabled = Some(true);
            unit
        })
        .collect();

    let mut cfg = Config::default();
    let mut core = User::new("core".into());
    core.ssh_authorized_keys = Some(ssh_keys);
    cfg.passwd = Some(Passwd {
        users: Some(vec![core]),
        ..Default::default()
    });
    files.dir(units::EXTRA_MANIFESTS_DIR);
    cfg.storage = Some(Storage {
        files: Some(files.0),
        directories: Some(files.1),
        ..Default::default()
    });
    cfg.systemd = Some(Systemd { units: Some(units) });
    Ok(cfg)
}

struct Manifests {
    cluster_image_set: String,
    pull_secret: String,
    infraenv: String,
    nmstateconfig: Option<String>,
}

/// The ClusterImageSet as the installer writes it (`sigs.k8s.io/yaml` of a
/// `hivev1.ClusterImageSet`, openshift/installer `pkg/asset/agent/manifests/clusterimageset.go`:
/// keys sorted, `creationTimestamp: null`, `status: {}`, each value on its key's line). The
/// appliance's loader `diff`s this file against the disk's copy, which the installer wrote,
/// and reads the release with `grep releaseImage | sed 's/^.*releaseImage: //'`; the generic
/// writer folds a long pull spec (`releaseImage: >-` and the value on the next line), which
/// fails both. A value that would need quoting falls back to the generic writer.
fn cluster_image_set_yaml(name: &str, release: &str) -> Result<String, Error> {
    let cis = json!({
        "apiVersion": "hive.openshift.io/v1",
        "kind": "ClusterImageSet",
        "metadata": {"creationTimestamp": null, "name": name},
        "spec": {"releaseImage": release},
        "status": {},
    });
    let text = format!(
        "apiVersion: hive.openshift.io/v1\nkind: ClusterImageSet\nmetadata:\n  creationTimestamp: null\n  name: {name}\nspec:\n  releaseImage: {release}\nstatus: {{}}\n"
    );
    match serde_saphyr::from_str::<Value>(&text) {
        Ok(v) if v == cis => Ok(text),
        _ => yaml(&cis, "ClusterImageSet"),
    }
}

fn manifests(inputs: &NodeImageInputs<'_>, arch: &str, ssh_keys: &[String]) -> Result<Manifests, Error> {
    let c = inputs.cluster;
    let name = &c.cluster.name;
    let version = if c.version.current.is_empty() {
        "release".to_string()
    } else {
        c.version.current.clone()
    };
    let cluster_image_set =
        cluster_image_set_yaml(&format!("openshift-{version}"), &c.version.release_image)?;
    let ps_name = format!("{name}-pull-secret");
    let ps = json!({
        "apiVersion": "v1",
        "kind": "Secret",
        "type": "kubernetes.io/dockerconfigjson",
        "metadata": {"name": ps_name, "namespace": MANIFEST_NAMESPACE},
        "stringData": {".dockerconfigjson": inputs.pull_secret.trim()},
    });
    let mut proxy = Map::new();
    if let Some(p) = &c.proxy {
        for (k, v) in [
            ("httpProxy", &p.http_proxy),
            ("httpsProxy", &p.https_proxy),
            ("noProxy", &p.no_proxy),
        ] {
            if let Some(v) = v.as_deref().filter(|v| !v.is_empty()) {
                proxy.insert(k.into(), Value::String(v.to_string()));
            }
        }
    }
    let mut spec = Map::new();
    spec.insert(
        "clusterRef".into(),
        json!({"name": name, "namespace": MANIFEST_NAMESPACE}),
    );
    spec.insert("cpuArchitecture".into(), Value::String(arch.to_string()));
    spec.insert(
        "nmStateConfigLabelSelector".into(),
        json!({"matchLabels": {NMSTATE_LABEL: name}}),
    );
    spec.insert("proxy".into(), Value::Object(proxy));
    spec.insert("pullSecretRef".into(), json!({"name": ps_name}));
    spec.insert("sshAuthorizedKey".into(), Value::String(ssh_keys.join("\n")));
    // No additionalTrustBundle: the live system trusts the bundle through the CA anchors
    // written below, and the installed host gets the cluster's bundle from the MCS; a second
    // copy would only take room in the 256 KiB embed area.
    let infraenv = json!({
        "apiVersion": "agent-install.openshift.io/v1beta1",
        "kind": "InfraEnv",
        "metadata": {"name": name, "namespace": MANIFEST_NAMESPACE},
        "spec": Value::Object(spec),
    });
    let mut docs = Vec::new();
    for (i, h) in inputs.hosts.iter().enumerate() {
        let Some(cfg) = &h.network_config else { continue };
        if !cfg.is_object() {
            return Err(invalid(
                format!("hosts[{i}].networkConfig"),
                "is not an NMState mapping",
            ));
        }
        let ifaces: Vec<Value> = h
            .interfaces
            .iter()
            .map(|i| json!({"name": i.name, "macAddress": i.mac_address.to_ascii_lowercase()}))
            .collect();
        let doc = json!({
            "apiVersion": "agent-install.openshift.io/v1beta1",
            "kind": "NMStateConfig",
            "metadata": {"name": h.hostname, "namespace": MANIFEST_NAMESPACE, "labels": {NMSTATE_LABEL: name}},
            "spec": {"config": cfg, "interfaces": ifaces},
        });
        docs.push(yaml(&doc, "NMStateConfig")?);
    }
    Ok(Manifests {
        cluster_image_set,
        pull_secret: yaml(&ps, "pull-secret Secret")?,
        infraenv: yaml(&infraenv, "InfraEnv")?,
        nmstateconfig: (!docs.is_empty()).then(|| docs.join("---\n")),
    })
}

/// The config as compact JSON (what goes into the ISO as `config.ign`).
pub fn to_json(cfg: &Config) -> String {
    // Serialising plain data structures cannot fail.
    serde_json::to_string(cfg).unwrap_or_default()
}

/// The config as indented JSON with the contents of every secret file (mode 0600: pull
/// secret, tokens, database password, keyfiles, proxy credentials) replaced by
/// `data:,<redacted>`, for `--dry-run`. No secret is written anywhere else in the config.
pub fn redacted(cfg: &Config) -> String {
    let mut c = cfg.clone();
    if let Some(files) = c.storage.as_mut().and_then(|s| s.files.as_mut()) {
        for f in files.iter_mut().filter(|f| f.mode == Some(MODE_SECRET)) {
            // NetworkManager keyfiles are 0600 only because NetworkManager ignores others;
            // they are the network config the user wants to review. Only their secret values
            // (Wi-Fi keys, 802.1X and VPN passwords) are hidden.
            if f.path.ends_with(".nmconnection") {
                let text = f
                    .contents
                    .as_ref()
                    .and_then(|r| r.source.as_deref())
                    .and_then(decode_data_url);
                if let Some(text) = text {
                    let shown = redact_keyfile(&String::from_utf8_lossy(&text));
                    f.contents = Some(Resource {
                        source: Some(data_url(shown.as_bytes())),
                        ..Default::default()
                    });
                    continue;
                }
            }
            f.contents = Some(Resource {
                source: Some("data:,<redacted>".into()),
                ..Default::default()
            });
            f.append = None;
        }
    }
    serde_json::to_string_pretty(&c).unwrap_or_default()
}

/// A NetworkManager keyfile with the values of secret keys (`psk`, `*password*`, `*secret*`,
/// `wep-key*`, `pin`) replaced by `<redacted>`; every other line as it is.
pub fn redact_keyfile(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for line in text.lines() {
        match line.split_once('=') {
            Some((k, _))
                if !line.trim_start().starts_with(['#', '[']) && {
                    let k = k.trim().to_ascii_lowercase();
                    k == "psk"
                        || k == "pin"
                        || k.contains("password")
                        || k.contains("secret")
                        || k.starts_with("wep-key")
                        || k.contains("psk")
                } =>
            {
                out.push_str(k);
                out.push_str("=<redacted>");
            }
            _ => out.push_str(line),
        }
        out.push('\n');
    }
    out
}

/// Decodes a `data:` URL written by [`data_url`] (or a base64 one), for tests and `--dry-run`
/// listings. `None` for other URLs.
pub fn decode_data_url(url: &str) -> Option<Vec<u8>> {
    let rest = url.strip_prefix("data:")?;
    let (meta, data) = rest.split_once(',')?;
    if meta.split(';').any(|p| p == "base64") {
        return STANDARD.decode(data).ok();
    }
    let b = data.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' && i + 2 < b.len() {
            let hex = std::str::from_utf8(&b[i + 1..i + 3]).ok()?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    Some(out)
}

/// What takes room in the config, largest first: (file path or `unit <name>`, bytes of its
/// JSON-encoded contents). For the "does not fit in the embed area" message, which names the
/// largest contributor (e.g. a big CA bundle).
pub fn contributors(cfg: &Config) -> Vec<(String, usize)> {
    let mut out: Vec<(String, usize)> = Vec::new();
    for f in cfg
        .storage
        .as_ref()
        .and_then(|s| s.files.as_ref())
        .into_iter()
        .flatten()
    {
        let n = f
            .contents
            .as_ref()
            .and_then(|r| r.source.as_ref())
            .map_or(0, String::len);
        out.push((f.path.clone(), n));
    }
    for u in cfg
        .systemd
        .as_ref()
        .and_then(|s| s.units.as_ref())
        .into_iter()
        .flatten()
    {
        out.push((
            format!("unit {}", u.name),
            u.contents.as_ref().map_or(0, String::len),
        ));
    }
    out.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    out
}

/// Path → (contents, mode) of every file in `cfg` (inline data only), for reports and tests.
pub fn files(cfg: &Config) -> Vec<(String, Vec<u8>, i64)> {
    cfg.storage
        .as_ref()
        .and_then(|s| s.files.as_ref())
        .map(|fs| {
            fs.iter()
                .map(|f| {
                    let data = f
                        .contents
                        .as_ref()
                        .and_then(|r| r.source.as_deref())
                        .and_then(decode_data_url)
                        .unwrap_or_default();
                    (f.path.clone(), data, f.mode.unwrap_or(MODE_PUBLIC))
                })
                .collect()
        })
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cluster_image_set_is_written_as_the_installer_writes_it() {
        let r = "quay.io/openshift-release-dev/ocp-release@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";
        assert_eq!(
            cluster_image_set_yaml("openshift-4.18.3", r).unwrap(),
            format!(
                "apiVersion: hive.openshift.io/v1\nkind: ClusterImageSet\nmetadata:\n  creationTimestamp: null\n  name: openshift-4.18.3\nspec:\n  releaseImage: {r}\nstatus: {{}}\n"
            )
        );
        // A value plain YAML cannot hold is still written correctly.
        let odd = cluster_image_set_yaml("openshift-4.18.3", "x: #y").unwrap();
        let v: Value = serde_saphyr::from_str(&odd).unwrap();
        assert_eq!(v["spec"]["releaseImage"], "x: #y", "{odd}");
    }

    #[test]
    fn keyfiles_show_all_but_their_secret_values() {
        let k = "[connection]\nid=eth0\n[wifi-security]\nkey-mgmt=wpa-psk\npsk=hunter2\n[802-1x]\npassword=pw\nprivate-key-password-flags=0\n";
        let r = redact_keyfile(k);
        assert!(r.contains("id=eth0\n") && r.contains("key-mgmt=wpa-psk\n"), "{r}");
        assert!(!r.contains("hunter2") && !r.contains("=pw\n"), "{r}");
        assert!(
            r.contains("psk=<redacted>") && r.contains("password=<redacted>"),
            "{r}"
        );
    }

    #[test]
    fn data_url_round_trip() {
        let text = b"A=b c\n100%,#?\x00\xff\"'";
        let url = data_url(text);
        assert!(url.starts_with("data:,A=b%20c%0A100%25%2C%23%3F%00%FF"), "{url}");
        assert_eq!(decode_data_url(&url).unwrap(), text);
    }

    #[test]
    fn mcs_endpoint_is_the_base_without_the_pool() {
        for u in [
            "https://api-int.a.b:22623/config/worker",
            "https://api-int.a.b:22623/config/infra",
            "https://api-int.a.b:22623/config",
            "https://api-int.a.b:22623/config/",
            "https://api-int.a.b:22623",
        ] {
            assert_eq!(mcs_base_url(u), "https://api-int.a.b:22623/config", "{u}");
        }
    }

    #[test]
    fn names() {
        assert!(is_mac("00:f4:3d:a0:0e:2b"));
        assert!(!is_mac("00:f4:3d:a0:0e"));
        assert!(is_pool_name("infra-1"));
        assert!(!is_pool_name("Infra") && !is_pool_name("-a") && !is_pool_name(""));
        assert!(
            safe_component("worker-0")
                && !safe_component("../x")
                && !safe_component("a/b")
                && !safe_component(".x")
        );
    }
}
