//! The node contract (`shared/docs/node-contract.md`), checked on a parsed Ignition config.
//!
//! Each rule is what a real consumer of the image reads, with the code that reads it (the
//! real code is the judge; where it can run, `agent-day2-sim run-node` runs it on the image):
//! * assisted-service (`cmd/main.go` Options, envconfig): it reads the env files its unit
//!   passes with `--env-file` (the check reads that list from `assisted-service.service`), and
//!   exits at start without `OS_IMAGES` ("OS_IMAGES list is empty"; `internal/versions/
//!   osimages.go` needs openshift_version, cpu_architecture, url, version in each entry) or
//!   without `IMAGE_SERVICE_BASE_URL`; `AUTH_TYPE=agent-installer-local` with
//!   `EC_PUBLIC_KEY_PEM` (base64 of the PEM, `pkg/auth/agent_local_authenticator.go`),
//!   `USER_AUTH_TOKEN`, `WATCHER_AUTH_TOKEN`; `HW_VALIDATOR_REQUIREMENTS` with a `default`
//!   entry for workers (`internal/hardware/validator.go`: the default `[]` fails every host's
//!   hardware validation); `INSTALLER_IMAGE` and `AGENT_DOCKER_IMAGE` (the instruction
//!   manager's defaults are public images);
//! * tokens: ES256 JWTs signed by that key whose `auth_scheme` is agentAuth / userAuth /
//!   watcherAuth (`agent_local_authz_handler.go` answers 500 without it) and with no `iat`
//!   (golang-jwt v4 refuses a token "used before issued" while the node's clock is behind);
//!   the agent's token is `PULL_SECRET_TOKEN` in `rendezvous-host.env` (upstream's agent and
//!   add-node read it there);
//! * the agent-based-installer client (`cmd/agentbasedinstaller/client/main.go` defaults): it
//!   reads `/manifests/*.yaml` and `/clusterconfig/*.json` inside its container, so the units
//!   that run `importCluster` and `registerInfraEnv` bind-mount them; `importCluster` needs
//!   `import-cluster-config.json` shaped `{"networking":{"userManagedNetworking":bool}}`
//!   (`cmd/agentbasedinstaller/import.go`);
//! * the database: `start_db.sh` runs PostgreSQL, which refuses to run as root, so its unit
//!   runs the container `--user=postgres`;
//! * units: [`UNITS`] (names of the agent installer's units), enabled, ordered `After=` what
//!   they need.
//!
//! Every missing or wrong item is collected (not just the first), each as one line
//! `node contract: <path> <what is wrong>`.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;

use super::ignition::{env_file, unit_directive, Config};

/// Path of the local assisted-service environment file (agent installer's
/// `usr/local/share/assisted-service/assisted-service.env`).
pub const SERVICE_ENV: &str = "/usr/local/share/assisted-service/assisted-service.env";

/// Component image roles and the env keys the units and the service read them from.
pub const IMAGE_KEYS: &[(&str, &[&str])] = &[
    ("assisted-service API server image", &["SERVICE_IMAGE"]),
    (
        "node agent image (the service's AGENT_DOCKER_IMAGE)",
        &["AGENT_DOCKER_IMAGE"],
    ),
    (
        "installer (orchestrator) image (the service's INSTALLER_IMAGE)",
        &["INSTALLER_IMAGE"],
    ),
];

/// Units by role: (name, role, units it must be ordered `After=`, required always).
/// `pre-network-manager-config.service` is required only when the image carries network config.
pub const UNITS: &[(&str, &str, &[&str])] = &[
    (
        "assisted-service.service",
        "local assisted-service (pod, database, service on :8090)",
        &[],
    ),
    (
        "agent-import-cluster.service",
        "import the cluster (POST /v2/clusters/import)",
        &["assisted-service.service"],
    ),
    (
        "agent-register-infraenv.service",
        "register the InfraEnv",
        &["agent-import-cluster.service"],
    ),
    (
        "agent.service",
        "discovery agent (registers the host, pre-flight validations)",
        &["agent-register-infraenv.service"],
    ),
    (
        "apply-host-config.service",
        "apply host config (root device, role, by MAC)",
        &["agent-register-infraenv.service"],
    ),
    (
        "set-hostname.service",
        "set the hostname from /etc/assisted/hostnames",
        &[],
    ),
    (
        "agent-add-node.service",
        "add the node (install when known)",
        &["agent.service", "apply-host-config.service"],
    ),
    (
        "agent-auth-token-status.service",
        "console message when the auth token has expired",
        &[],
    ),
];

/// One host of the image, found by MAC.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostFacts {
    pub hostname: String,
    pub role: String,
    /// Lowercase MACs from `mac_addresses`.
    pub macs: Vec<String>,
}

/// What the node learned from its config, for the REST API and the kubelet.
#[derive(Debug, Clone, Default)]
pub struct Facts {
    pub cluster_id: String,
    pub cluster_name: String,
    pub api_dns_name: String,
    pub base_domain: String,
    pub infra_env_id: String,
    pub agent_token: String,
    pub user_token: String,
    pub watcher_token: String,
    /// The P-256 point of `EC_PUBLIC_KEY_PEM`: what the node's API verifies tokens with
    /// (empty when the key is missing or unreadable; then every token is refused).
    pub ec_public_key: Vec<u8>,
    /// `AUTH_TOKEN_EXPIRY` as given (RFC 3339).
    pub token_expiry: String,
    pub release_image: String,
    pub openshift_version: String,
    pub cpu_architecture: String,
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

struct Check {
    problems: Vec<String>,
}

impl Check {
    fn miss(&mut self, msg: impl Into<String>) {
        self.problems.push(format!("node contract: {}", msg.into()));
    }
}

fn yaml_docs(text: &str) -> Result<Vec<Value>, String> {
    serde_saphyr::from_multiple::<Value>(text)
        .map(|v| v.into_iter().filter(|d| !d.is_null()).collect())
        .map_err(|e| e.to_string())
}

fn str_at<'a>(v: &'a Value, ptr: &str) -> Option<&'a str> {
    v.pointer(ptr).and_then(|s| s.as_str()).filter(|s| !s.is_empty())
}

/// A plausible image pull spec: a registry path with a tag or digest.
fn is_pull_spec(s: &str) -> bool {
    s.contains('/')
        && (s.contains("@sha256:") || s.rsplit('/').next().is_some_and(|last| last.contains(':')))
        && !s.chars().any(char::is_whitespace)
}

/// Checks `cfg` against the node contract. `macs` are the MACs of the machines that boot it
/// (`--node MAC=IP`): each must find its host. Returns the facts, or every problem found.
pub fn check(cfg: &Config, macs: &[String]) -> Result<Facts, Vec<String>> {
    let mut c = Check {
        problems: cfg
            .problems
            .iter()
            .map(|p| format!("node contract: {p}"))
            .collect(),
    };
    let mut f = Facts::default();

    // --- Cluster identity and mode.
    const ADD_NODES: &str = "/etc/assisted/add-nodes.env";
    match cfg.text(ADD_NODES) {
        None => c.miss(format!("{ADD_NODES} is missing (the day-2 marker: CLUSTER_ID, CLUSTER_NAME, CLUSTER_API_VIP_DNS_NAME, AUTH_TOKEN_EXPIRY)")),
        Some(t) => {
            let env = env_file(&t);
            for key in ["CLUSTER_ID", "CLUSTER_NAME", "CLUSTER_API_VIP_DNS_NAME", "AUTH_TOKEN_EXPIRY"] {
                if env.get(key).is_none_or(|v| v.is_empty()) {
                    c.miss(format!("{ADD_NODES} lacks {key}"));
                }
            }
            f.cluster_id = env.get("CLUSTER_ID").cloned().unwrap_or_default();
            f.cluster_name = env.get("CLUSTER_NAME").cloned().unwrap_or_default();
            f.api_dns_name = env.get("CLUSTER_API_VIP_DNS_NAME").cloned().unwrap_or_default();
            f.token_expiry = env.get("AUTH_TOKEN_EXPIRY").cloned().unwrap_or_default();
            if !f.cluster_id.is_empty() && !is_uuid(&f.cluster_id) {
                c.miss(format!("{ADD_NODES} CLUSTER_ID {:?} is not a UUID (ClusterVersion spec.clusterID)", f.cluster_id));
            }
            if !f.api_dns_name.is_empty() && !f.cluster_name.is_empty() {
                let prefix = format!("api.{}.", f.cluster_name);
                match f.api_dns_name.strip_prefix(&prefix) {
                    Some(domain) if !domain.is_empty() => f.base_domain = domain.to_string(),
                    _ => c.miss(format!(
                        "{ADD_NODES} CLUSTER_API_VIP_DNS_NAME {:?} is not api.<CLUSTER_NAME>.<domain> (CLUSTER_NAME {:?})",
                        f.api_dns_name, f.cluster_name
                    )),
                }
            }
            if !f.token_expiry.is_empty()
                && time::OffsetDateTime::parse(&f.token_expiry, &time::format_description::well_known::Rfc3339).is_err()
            {
                c.miss(format!("{ADD_NODES} AUTH_TOKEN_EXPIRY {:?} is not an RFC 3339 time", f.token_expiry));
            }
        }
    }
    const RENDEZVOUS: &str = "/etc/assisted/rendezvous-host.env";
    match cfg.text(RENDEZVOUS) {
        None => c.miss(format!(
            "{RENDEZVOUS} is missing (NODE_ZERO_IP, SERVICE_BASE_URL, IMAGE_SERVICE_BASE_URL, WORKFLOW_TYPE, PULL_SECRET_TOKEN, USER_AUTH_TOKEN)"
        )),
        Some(t) => {
            let env = env_file(&t);
            let want = [
                ("NODE_ZERO_IP", Some("127.0.0.1")),
                ("SERVICE_BASE_URL", Some("http://127.0.0.1:8090/")),
                ("IMAGE_SERVICE_BASE_URL", None),
                ("WORKFLOW_TYPE", Some("addnodes")),
                ("PULL_SECRET_TOKEN", None),
                ("USER_AUTH_TOKEN", None),
            ];
            f.agent_token = env.get("PULL_SECRET_TOKEN").cloned().unwrap_or_default();
            for (key, value) in want {
                match (env.get(key), value) {
                    (None, _) => c.miss(format!("{RENDEZVOUS} lacks {key}")),
                    (Some(v), _) if v.is_empty() => c.miss(format!("{RENDEZVOUS} lacks {key}")),
                    (Some(v), Some(w)) if v != w => {
                        c.miss(format!("{RENDEZVOUS} {key} is {v:?}, expected {w:?}"))
                    }
                    _ => {}
                }
            }
        }
    }
    const IMPORT: &str = "/etc/assisted/clusterconfig/import-cluster-config.json";
    match cfg.files.get(IMPORT) {
        None => c.miss(format!("{IMPORT} is missing")),
        Some(b) => match serde_json::from_slice::<Value>(b) {
            Err(e) => c.miss(format!("{IMPORT} is not JSON: {e}")),
            Ok(v) => match v.pointer("/networking/userManagedNetworking").and_then(|u| u.as_bool()) {
                Some(u) => f.user_managed_networking = u,
                None => c.miss(format!(
                    "{IMPORT} lacks the boolean networking.userManagedNetworking (the client reads only that; a flat userManagedNetworking is ignored)"
                )),
            },
        },
    }
    const ENDPOINT: &str = "/etc/assisted/clusterconfig/worker-ignition-endpoint.json";
    match cfg.files.get(ENDPOINT) {
        None => c.miss(format!(
            "{ENDPOINT} is missing (the worker pool's MCS URL and CA)"
        )),
        Some(b) => match serde_json::from_slice::<Value>(b) {
            Err(e) => c.miss(format!("{ENDPOINT} is not JSON: {e}")),
            Ok(v) => {
                match str_at(&v, "/url") {
                    None => c.miss(format!("{ENDPOINT} lacks url")),
                    // assisted-service appends the host's pool to this URL
                    // (hostutil.GetIgnitionEndpointAndCert: path.Join(url.Path, poolName)).
                    Some(u) if !(u.starts_with("https://") && u.ends_with("/config")) => c.miss(format!(
                        "{ENDPOINT} url {u:?} is not https://…/config (the service appends the pool)"
                    )),
                    _ => {}
                }
                if str_at(&v, "/ca_certificate").is_none() {
                    c.miss(format!("{ENDPOINT} lacks ca_certificate"));
                }
            }
        },
    }

    // --- Manifests.
    let manifest = |c: &mut Check, name: &str, kind: &str| -> Vec<Value> {
        let path = format!("/etc/assisted/manifests/{name}");
        match cfg.text(&path) {
            None => {
                c.miss(format!("{path} is missing"));
                vec![]
            }
            Some(t) => match yaml_docs(&t) {
                Err(e) => {
                    c.miss(format!("{path} is not YAML: {e}"));
                    vec![]
                }
                Ok(docs) => {
                    let (good, bad): (Vec<_>, Vec<_>) = docs
                        .into_iter()
                        .partition(|d| d.get("kind").and_then(|k| k.as_str()) == Some(kind));
                    for d in bad {
                        c.miss(format!(
                            "{path} holds a {:?}, expected only {kind}",
                            d.get("kind")
                        ));
                    }
                    if good.is_empty() {
                        c.miss(format!("{path} holds no {kind}"));
                    }
                    for d in &good {
                        if str_at(d, "/metadata/name").is_none() {
                            c.miss(format!("{path} {kind} lacks metadata.name"));
                        }
                    }
                    good
                }
            },
        }
    };
    for d in manifest(&mut c, "cluster-image-set.yaml", "ClusterImageSet") {
        match str_at(&d, "/spec/releaseImage") {
            Some(r) if is_pull_spec(r) => {
                f.release_image = r.to_string();
                f.openshift_version = version_from(&d, r);
            }
            Some(r) => c.miss(format!("/etc/assisted/manifests/cluster-image-set.yaml spec.releaseImage {r:?} is not an image pull spec")),
            None => c.miss("/etc/assisted/manifests/cluster-image-set.yaml lacks spec.releaseImage"),
        }
    }
    let mut pull_secret_name = None;
    for d in manifest(&mut c, "pull-secret.yaml", "Secret") {
        pull_secret_name = str_at(&d, "/metadata/name").map(String::from);
        let data = d
            .pointer("/data/.dockerconfigjson")
            .and_then(|s| s.as_str())
            .map(|s| {
                use base64::Engine;
                base64::engine::general_purpose::STANDARD
                    .decode(s)
                    .ok()
                    .map(|b| String::from_utf8_lossy(&b).into_owned())
            });
        let text = match data {
            Some(Some(t)) => Some(t),
            Some(None) => {
                c.miss("/etc/assisted/manifests/pull-secret.yaml data..dockerconfigjson is not base64");
                None
            }
            None => str_at(&d, "/stringData/.dockerconfigjson").map(String::from),
        };
        match text {
            None => c.miss(
                "/etc/assisted/manifests/pull-secret.yaml lacks .dockerconfigjson (data or stringData)",
            ),
            Some(t) => {
                if serde_json::from_str::<Value>(&t)
                    .ok()
                    .and_then(|v| v.get("auths").cloned())
                    .is_none()
                {
                    c.miss("/etc/assisted/manifests/pull-secret.yaml .dockerconfigjson is not a JSON object with auths");
                }
            }
        }
    }
    let nmstate_path = "/etc/assisted/manifests/nmstateconfig.yaml";
    let has_nmstate = cfg.files.contains_key(nmstate_path);
    let mut selector: Option<serde_json::Map<String, Value>> = None;
    for d in manifest(&mut c, "infraenv.yaml", "InfraEnv") {
        let p = "/etc/assisted/manifests/infraenv.yaml";
        match str_at(&d, "/spec/cpuArchitecture") {
            Some(a) => f.cpu_architecture = a.to_string(),
            None => c.miss(format!("{p} lacks spec.cpuArchitecture")),
        }
        match str_at(&d, "/spec/pullSecretRef/name") {
            None => c.miss(format!("{p} lacks spec.pullSecretRef.name")),
            Some(n) => {
                if pull_secret_name.as_deref().is_some_and(|s| s != n) {
                    c.miss(format!(
                        "{p} spec.pullSecretRef.name {n:?} is not the Secret in pull-secret.yaml ({:?})",
                        pull_secret_name.as_deref().unwrap_or("")
                    ));
                }
            }
        }
        if str_at(&d, "/spec/sshAuthorizedKey").is_none() {
            c.miss(format!("{p} lacks spec.sshAuthorizedKey"));
        }
        selector = d
            .pointer("/spec/nmStateConfigLabelSelector/matchLabels")
            .and_then(|m| m.as_object())
            .cloned();
        if has_nmstate && selector.as_ref().is_none_or(|s| s.is_empty()) {
            c.miss(format!(
                "{p} lacks spec.nmStateConfigLabelSelector.matchLabels (nmstateconfig.yaml is present)"
            ));
        }
    }
    if has_nmstate {
        for d in manifest(&mut c, "nmstateconfig.yaml", "NMStateConfig") {
            let name = str_at(&d, "/metadata/name").unwrap_or("?").to_string();
            let ifaces = d.pointer("/spec/interfaces").and_then(|i| i.as_array());
            if ifaces.is_none_or(|i| {
                i.is_empty()
                    || i.iter()
                        .any(|x| str_at(x, "/macAddress").is_none() || str_at(x, "/name").is_none())
            }) {
                c.miss(format!(
                    "{nmstate_path} NMStateConfig {name} lacks spec.interfaces[] with name and macAddress"
                ));
            }
            if d.pointer("/spec/config").is_none_or(|v| v.is_null()) {
                c.miss(format!("{nmstate_path} NMStateConfig {name} lacks spec.config"));
            }
            if let Some(sel) = &selector {
                let labels = d.pointer("/metadata/labels").and_then(|l| l.as_object());
                for (k, v) in sel {
                    if labels.and_then(|l| l.get(k)) != Some(v) {
                        c.miss(format!(
                            "{nmstate_path} NMStateConfig {name} lacks label {k}={} of the InfraEnv selector",
                            v.as_str().unwrap_or("?")
                        ));
                    }
                }
            }
        }
        if cfg.under("/etc/assisted/network/").next().is_none() {
            c.miss("/etc/assisted/network/ holds no NetworkManager keyfiles (nmstateconfig.yaml is present)");
        }
    }

    // --- Hosts.
    let mut host_dirs: BTreeSet<String> = BTreeSet::new();
    for (p, _) in cfg.under("/etc/assisted/hostconfig/") {
        if let Some(h) = p
            .trim_start_matches("/etc/assisted/hostconfig/")
            .split('/')
            .next()
        {
            host_dirs.insert(h.to_string());
        }
    }
    if host_dirs.is_empty() {
        c.miss("/etc/assisted/hostconfig/ holds no host (expected <hostname>/mac_addresses, root-device-hints.yaml, role)");
    }
    for h in &host_dirs {
        let base = format!("/etc/assisted/hostconfig/{h}");
        let macs: Vec<String> = match cfg.text(&format!("{base}/mac_addresses")) {
            None => {
                c.miss(format!("{base}/mac_addresses is missing"));
                vec![]
            }
            Some(t) => t.split_whitespace().map(|m| m.to_ascii_lowercase()).collect(),
        };
        if macs.is_empty() && cfg.files.contains_key(&format!("{base}/mac_addresses")) {
            c.miss(format!("{base}/mac_addresses lists no MAC"));
        }
        if let Some(t) = cfg.text(&format!("{base}/root-device-hints.yaml")) {
            if serde_saphyr::from_str::<Value>(&t).is_err() {
                c.miss(format!("{base}/root-device-hints.yaml is not YAML"));
            }
        }
        let role = cfg.text(&format!("{base}/role")).map(|r| r.trim().to_string());
        match role.as_deref() {
            None => c.miss(format!("{base}/role is missing")),
            Some("worker") => {}
            Some(r) => c.miss(format!("{base}/role is {r:?}; day-2 hosts are workers")),
        }
        f.hosts.insert(
            h.clone(),
            HostFacts {
                hostname: h.clone(),
                role: role.unwrap_or_default(),
                macs,
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
    for host in f.hosts.values() {
        for mac in &host.macs {
            match f.hostnames.get(mac) {
                None => c.miss(format!(
                    "/etc/assisted/hostnames/{mac} is missing (host {})",
                    host.hostname
                )),
                Some(n) if n != &host.hostname => c.miss(format!(
                    "/etc/assisted/hostnames/{mac} says {n:?}, but hostconfig says {}",
                    host.hostname
                )),
                _ => {}
            }
        }
    }
    for mac in macs {
        if f.host_by_mac(mac).is_none() {
            c.miss(format!(
                "no host for MAC {mac}: no /etc/assisted/hostconfig/<hostname>/mac_addresses lists it (the image serves hosts {})",
                f.hosts.keys().cloned().collect::<Vec<_>>().join(", ")
            ));
        }
    }

    // --- Platform settings.
    match cfg.ssh_keys.get("core") {
        Some(k) if !k.is_empty() => {}
        _ => c.miss("passwd.users: the core user has no sshAuthorizedKeys"),
    }
    if let Some(t) = cfg.text("/etc/containers/registries.conf") {
        if !t.contains("[[registry]]") && !t.contains("unqualified-search-registries") {
            c.miss("/etc/containers/registries.conf holds no [[registry]] table");
        }
    }

    // --- What the service reads: the env files its unit passes with --env-file.
    let service_unit = cfg.units.get("assisted-service.service");
    let env_files: Vec<String> = service_unit
        .map(|u| {
            let words = unit_directive(&u.text, "ExecStart");
            let mut out = Vec::new();
            let mut it = words.iter();
            while let Some(w) = it.next() {
                if let Some(p) = w.strip_prefix("--env-file=") {
                    out.push(p.to_string());
                } else if w == "--env-file" {
                    if let Some(p) = it.next() {
                        out.push(p.to_string());
                    }
                }
            }
            out
        })
        .unwrap_or_default();
    if service_unit.is_some() && env_files.is_empty() {
        c.miss("systemd unit assisted-service.service passes no --env-file: the service would start without its settings");
    }
    let mut service_env: BTreeMap<String, String> = BTreeMap::new();
    for p in &env_files {
        match cfg.text(p) {
            Some(t) => service_env.extend(env_file(&t)),
            None => c.miss(format!(
                "{p} is missing (assisted-service.service passes it with --env-file)"
            )),
        }
    }
    let svc = "the env files of assisted-service.service";
    let need = |c: &mut Check, key: &str, why: &str| -> Option<String> {
        match service_env.get(key).filter(|v| !v.is_empty()) {
            Some(v) => Some(v.clone()),
            None => {
                c.miss(format!("{svc} lack {key} ({why})"));
                None
            }
        }
    };
    match need(&mut c, "AUTH_TYPE", "the agent installer's local token auth") {
        Some(v) if v != "agent-installer-local" => c.miss(format!(
            "{svc} set AUTH_TYPE={v:?}, expected \"agent-installer-local\""
        )),
        _ => {}
    }
    need(
        &mut c,
        "IMAGE_SERVICE_BASE_URL",
        "the service exits at start without it",
    );
    if let Some(v) = need(
        &mut c,
        "OS_IMAGES",
        "the service exits at start: \"OS_IMAGES list is empty\"",
    ) {
        match serde_json::from_str::<Value>(&v) {
            Ok(Value::Array(list)) if !list.is_empty() => {
                for (i, e) in list.iter().enumerate() {
                    for k in ["openshift_version", "cpu_architecture", "url", "version"] {
                        if str_at(e, &format!("/{k}")).is_none() {
                            c.miss(format!("{svc}: OS_IMAGES[{i}] lacks {k}"));
                        }
                    }
                }
            }
            _ => c.miss(format!("{svc}: OS_IMAGES is not a non-empty JSON list")),
        }
    }
    if let Some(v) = need(
        &mut c,
        "HW_VALIDATOR_REQUIREMENTS",
        "with the default [] every host's hardware validation fails and no host becomes known",
    ) {
        let ok = serde_json::from_str::<Value>(&v).ok().and_then(|r| {
            r.as_array()?
                .iter()
                .find(|e| e["version"] == "default")
                .map(|e| e["worker"]["cpu_cores"].is_u64() && e["worker"]["ram_mib"].is_u64())
        });
        if ok != Some(true) {
            c.miss(format!(
                "{svc}: HW_VALIDATOR_REQUIREMENTS has no \"default\" entry with worker cpu_cores and ram_mib"
            ));
        }
    }
    for key in ["DB_HOST", "DB_PORT", "DB_USER", "DB_NAME"] {
        need(&mut c, key, "the service's database connection");
    }
    f.user_token = need(
        &mut c,
        "USER_AUTH_TOKEN",
        "it verifies userAuth requests against it",
    )
    .unwrap_or_default();
    f.watcher_token = need(
        &mut c,
        "WATCHER_AUTH_TOKEN",
        "it verifies watcherAuth requests against it",
    )
    .unwrap_or_default();
    f.infra_env_id = need(&mut c, "INFRA_ENV_ID", "the InfraEnv the client registers").unwrap_or_default();
    if !f.infra_env_id.is_empty() && !is_uuid(&f.infra_env_id) {
        c.miss(format!("{svc}: INFRA_ENV_ID {:?} is not a UUID", f.infra_env_id));
    }
    if let Some(pem) = need(&mut c, "EC_PUBLIC_KEY_PEM", "the key that verifies every token") {
        match super::jwt::public_key(&pem) {
            Err(e) => c.miss(format!("{svc}: EC_PUBLIC_KEY_PEM: {e}")),
            Ok(key) => {
                f.ec_public_key = key.clone();
                for (var, scheme, tok) in [
                    (
                        "PULL_SECRET_TOKEN (rendezvous-host.env)",
                        "agentAuth",
                        &f.agent_token,
                    ),
                    ("USER_AUTH_TOKEN", "userAuth", &f.user_token),
                    ("WATCHER_AUTH_TOKEN", "watcherAuth", &f.watcher_token),
                ] {
                    if tok.is_empty() {
                        continue;
                    }
                    match super::jwt::verify(tok, &key) {
                        Err(e) => c.miss(format!("{var}: {e}")),
                        Ok(claims) => {
                            let got = claims.get("auth_scheme").and_then(|s| s.as_str());
                            if got != Some(scheme) {
                                c.miss(format!("{var} has auth_scheme {got:?}, expected {scheme:?} (the service answers 500 \"malformed auth_scheme claim\" or 403 otherwise)"));
                            }
                            if claims.contains_key("iat") {
                                c.miss(format!("{var} carries iat: the service refuses it while the node's clock is behind the signer's (\"Token used before issued\")"));
                            }
                        }
                    }
                }
            }
        }
    }
    if let Some(u) = cfg.units.get("assisted-service-db.service") {
        let exec = unit_directive(&u.text, "ExecStart").join(" ");
        if exec.contains("start_db.sh")
            && !(exec.contains("--user=postgres") || exec.contains("--user postgres"))
        {
            c.miss("systemd unit assisted-service-db.service runs start_db.sh as root: PostgreSQL refuses to (run the container --user=postgres)");
        }
    }
    for (unit, sub, mounts) in [
        (
            "agent-import-cluster.service",
            "importCluster",
            &[":/clusterconfig", ":/manifests"][..],
        ),
        (
            "agent-register-infraenv.service",
            "registerInfraEnv",
            &[":/manifests"][..],
        ),
    ] {
        if let Some(u) = cfg.units.get(unit) {
            let exec = unit_directive(&u.text, "ExecStart").join(" ");
            if !exec.contains(sub) {
                c.miss(format!(
                    "systemd unit {unit} does not run agent-installer-client {sub}"
                ));
            }
            for m in mounts {
                let bound = exec
                    .split_whitespace()
                    .any(|w| w.split(':').nth(1).is_some_and(|dst| format!(":{dst}") == *m));
                if !bound {
                    c.miss(format!("systemd unit {unit} does not bind-mount {} into the client's container (it reads its inputs there)", &m[1..]));
                }
            }
        }
    }
    let mut env_all: BTreeMap<String, String> = BTreeMap::new();
    for (p, d) in cfg.files.iter() {
        if p.ends_with(".env")
            && (p.starts_with("/usr/local/share/assisted-service/") || p.starts_with("/etc/assisted/"))
        {
            env_all.extend(env_file(&String::from_utf8_lossy(d)));
        }
    }
    for (role, keys) in IMAGE_KEYS {
        match keys
            .iter()
            .find_map(|k| env_all.get(*k).filter(|v| !v.is_empty()).map(|v| (k, v)))
        {
            None => c.miss(format!(
                "no *.env under /usr/local/share/assisted-service/ or /etc/assisted/ sets {} ({role})",
                keys.join(" or ")
            )),
            Some((k, v)) if !is_pull_spec(v) => {
                c.miss(format!("{k}={v:?} ({role}) is not an image pull spec"))
            }
            Some(_) => {}
        }
    }
    for key in ["INSTALLER_IMAGE", "AGENT_DOCKER_IMAGE"] {
        if service_unit.is_some() && service_env.get(key).is_none_or(|v| v.is_empty()) {
            c.miss(format!(
                "{svc} lack {key}: the service would send its public default image to the host"
            ));
        }
    }
    const PODMAN_AUTH: &str = "/root/.docker/config.json";
    match cfg.files.get(PODMAN_AUTH) {
        None => c.miss(format!("{PODMAN_AUTH} is missing (the pull secret for podman)")),
        Some(b) => {
            if serde_json::from_slice::<Value>(b)
                .ok()
                .and_then(|v| v.get("auths").cloned())
                .is_none()
            {
                c.miss(format!("{PODMAN_AUTH} is not a JSON object with auths"));
            }
        }
    }

    // --- Units.
    let mut units: Vec<(&str, &str, &[&str])> = UNITS.to_vec();
    if has_nmstate {
        units.push((
            "pre-network-manager-config.service",
            "apply network config before NetworkManager",
            &[],
        ));
    }
    for (name, role, after) in units {
        match cfg.units.get(name) {
            None => c.miss(format!("systemd unit {name} is missing ({role})")),
            Some(u) => {
                if u.mask {
                    c.miss(format!("systemd unit {name} is masked ({role})"));
                }
                let wanted = u.enabled == Some(true)
                    || !unit_directive(&u.text, "WantedBy").is_empty() && u.enabled != Some(false);
                if !wanted {
                    c.miss(format!("systemd unit {name} is not enabled ({role})"));
                }
                let have = unit_directive(&u.text, "After");
                for dep in after {
                    if !have.iter().any(|h| h == dep) {
                        c.miss(format!("systemd unit {name} is not ordered After={dep}"));
                    }
                }
                if name == "pre-network-manager-config.service"
                    && !unit_directive(&u.text, "Before")
                        .iter()
                        .any(|b| b == "NetworkManager.service")
                {
                    c.miss(format!(
                        "systemd unit {name} is not ordered Before=NetworkManager.service"
                    ));
                }
            }
        }
    }

    if c.problems.is_empty() {
        Ok(f)
    } else {
        Err(c.problems)
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
    str_at(cis, "/metadata/name")
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
