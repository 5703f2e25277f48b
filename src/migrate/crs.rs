//! The CRs recreated from what node 0's assisted-service holds (pure): crs/crs.json of the bundle.
//!
//! The ABI manifests are only the input of the install; anything changed later through the REST API
//! never reached them (docs/migrate.md "Node 0 and cluster 0"), so the CRs are made from the REST
//! answers (cluster with hosts, infra-envs, hosts) plus the credentials and the pull secret from
//! the dump. Order and shape follow docs/migrate.md "The migration contract" ("CRs") and
//! docs/migrate.md "The order on cluster 0": Secrets (`<cd>-pull-secret`, `<cd>-admin-kubeconfig`,
//! `<cd>-admin-password`), ClusterImageSet `openshift-<version>`, ClusterDeployment `<cd>`
//! (installed, clusterMetadata, `platform.agentBareMetal.agentSelector: {}`, held by
//! `hive.openshift.io/reconcile-pause`), AgentClusterInstall `<cd>` (`holdInstallation`), the
//! InfraEnvs, their NMStateConfigs (`<infraenv>-<n>` from the infra-env's `static_network_config`),
//! the Agents (named by host id, `skip-spoke-cleanup`). Namespaces are left empty: import fills
//! them.
//!
//! Each object may carry a `status` that import writes through `/status`; node-0 URLs
//! (`debugInfo.eventsURL/logsURL`, `isoDownloadURL`) are never put there (the controllers
//! fill them only when empty; docs/migrate.md "The order on cluster 0").

use std::collections::BTreeMap;

use base64::Engine;
use serde_json::{json, Map, Value};

use crate::error::Error;

/// Annotation on every generated object: the assisted cluster id it was exported from.
pub const MIGRATION_ANNOTATION: &str = "agent-day2.openshift.io/migration-cluster";
/// The InfraEnv label on NMStateConfigs and Agents (assisted-service API).
pub const INFRAENV_LABEL: &str = "infraenvs.agent-install.openshift.io";
/// Keeps an Agent's deletion from removing the Node and Machine of cluster 0 (agent_controller.go
/// handleAgentFinalizer; docs/migrate.md "The order on cluster 0").
pub const SKIP_SPOKE_CLEANUP: &str = "agent.agent-install.openshift.io/skip-spoke-cleanup";
/// Hive's pause annotation on the ClusterDeployment (assisted-service reads it as a hold).
pub const RECONCILE_PAUSE: &str = "hive.openshift.io/reconcile-pause";

/// What [`build`] needs.
#[derive(Debug, Clone)]
pub struct CrInputs<'a> {
    /// swagger `cluster` as served (hosts embedded or not).
    pub cluster: &'a Value,
    /// swagger `infra-env`s of the cluster.
    pub infra_envs: &'a [Value],
    /// swagger `host`s of the cluster (from every infra-env).
    pub hosts: &'a [Value],
    /// `clusters.pull_secret` (a dockerconfigjson text).
    pub pull_secret: &'a str,
    /// The admin kubeconfig (downloads/credentials?file_name=kubeconfig).
    pub kubeconfig: &'a [u8],
    /// `credentials.username` (kubeadmin).
    pub username: &'a str,
    /// `credentials.password`.
    pub password: &'a str,
    /// `credentials.console_url`, if known.
    pub console_url: Option<&'a str>,
}

/// The generated objects.
#[derive(Debug, Clone, PartialEq)]
pub struct CrSet {
    /// In creation order; namespaces empty.
    pub objects: Vec<Value>,
    /// The ClusterDeployment / AgentClusterInstall name (DNS-1123 form of the cluster name).
    pub cd_name: String,
    /// NMStateConfigs generated.
    pub nmstate_configs: u64,
    /// Things the user should know (names changed to be valid), one sentence each.
    pub notes: Vec<String>,
}

/// The DNS-1123 label form of `name` (lowercase alphanumerics and `-`, starting and ending
/// alphanumeric, at most 63 characters; Kubernetes `IsDNS1123Label`): other characters become
/// `-`, runs of `-` collapse. None when nothing usable is left.
pub fn dns1123_label(name: &str) -> Option<String> {
    let mut out = String::new();
    for c in name.chars().flat_map(char::to_lowercase) {
        let c = if c.is_ascii_lowercase() || c.is_ascii_digit() {
            c
        } else {
            '-'
        };
        if c == '-' && (out.is_empty() || out.ends_with('-')) {
            continue;
        }
        out.push(c);
    }
    out.truncate(63);
    let out = out.trim_end_matches('-').to_string();
    (!out.is_empty()).then_some(out)
}

pub use crate::k8s_names::{is_dns1123_label, is_dns1123_subdomain};

/// The names of one cluster's CRs: the naming rules of this module, used by [`build`] and by
/// [`check_set`] (import accepts only what export makes).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CrNames {
    /// ClusterDeployment and AgentClusterInstall: the DNS-1123 label form of the cluster name
    /// ([`dns1123_label`]); also the default namespace of `migrate import`.
    pub cd: String,
    /// Secret `<cd>-pull-secret` (type `kubernetes.io/dockerconfigjson`, key `.dockerconfigjson`).
    pub pull_secret: String,
    /// Secret `<cd>-admin-kubeconfig` (Opaque, key `kubeconfig`).
    pub admin_kubeconfig: String,
    /// Secret `<cd>-admin-password` (Opaque, keys `username`, `password`).
    pub admin_password: String,
    /// ClusterImageSet `openshift-<openshift_version>` (DNS-1123 subdomain form).
    pub image_set: String,
}

impl CrNames {
    /// The names for the assisted cluster named `cluster_name` at `openshift_version`; None
    /// when the name has no character usable in a CR name.
    pub fn new(cluster_name: &str, openshift_version: &str) -> Option<CrNames> {
        let cd = dns1123_label(cluster_name)?;
        Some(CrNames {
            pull_secret: format!("{cd}-pull-secret"),
            admin_kubeconfig: format!("{cd}-admin-kubeconfig"),
            admin_password: format!("{cd}-admin-password"),
            image_set: dns1123_subdomain(&format!("openshift-{openshift_version}"))
                .unwrap_or_else(|| "openshift".into()),
            cd,
        })
    }
}

/// The DNS-1123 subdomain form (labels joined by `.`, at most 253), for ClusterImageSet names.
fn dns1123_subdomain(name: &str) -> Option<String> {
    let parts: Vec<String> = name.split('.').filter_map(dns1123_label).collect();
    let mut s = parts.join(".");
    s.truncate(253);
    let s = s.trim_end_matches(['-', '.']).to_string();
    (!s.is_empty()).then_some(s)
}

fn s<'a>(v: &'a Value, key: &str) -> &'a str {
    v.get(key).and_then(Value::as_str).unwrap_or("")
}

fn b64(bytes: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

fn invalid(field: &str, message: impl Into<String>) -> Error {
    Error::InvalidInput {
        field: field.to_string(),
        message: message.into(),
    }
}

fn meta(name: &str, cluster_id: &str, labels: Option<Value>, mut annotations: Map<String, Value>) -> Value {
    annotations.insert(MIGRATION_ANNOTATION.into(), json!(cluster_id));
    let mut m = json!({"name": name, "namespace": "", "annotations": annotations});
    if let Some(l) = labels {
        m["labels"] = l;
    }
    m
}

/// One host's entry of infra-env `static_network_config`.
#[derive(Debug, Clone, PartialEq)]
pub struct HostNetwork {
    /// nmstate YAML.
    pub network_yaml: String,
    /// (logical NIC name, MAC).
    pub interfaces: Vec<(String, String)>,
}

/// Parses infra-env `static_network_config`: the JSON list of `host_static_network_config`
/// assisted-service stores since migration 20220221193600, or the older text form (hosts
/// joined by `ZZZZZ`, each `<yaml>HHHHH<mac=nic lines>`; assisted-service
/// internal/migrations). Empty text → no hosts. Errors: a text in neither form.
pub fn parse_static_network_config(text: &str) -> Result<Vec<HostNetwork>, String> {
    let t = text.trim();
    if t.is_empty() {
        return Ok(vec![]);
    }
    if t.starts_with('[') {
        let v: Vec<Value> = serde_json::from_str(t).map_err(|e| format!("not a JSON list: {e}"))?;
        return Ok(v
            .iter()
            .map(|h| HostNetwork {
                network_yaml: s(h, "network_yaml").to_string(),
                interfaces: h
                    .get("mac_interface_map")
                    .and_then(Value::as_array)
                    .map(|a| {
                        a.iter()
                            .map(|m| {
                                (
                                    s(m, "logical_nic_name").to_string(),
                                    s(m, "mac_address").to_string(),
                                )
                            })
                            .collect()
                    })
                    .unwrap_or_default(),
            })
            .collect());
    }
    let mut out = Vec::new();
    for host in t.split("ZZZZZ") {
        let (yaml, map) = host
            .split_once("HHHHH")
            .ok_or("neither a JSON list nor the older ZZZZZ/HHHHH form")?;
        let interfaces = map
            .lines()
            .filter(|l| !l.trim().is_empty())
            .map(|l| {
                l.split_once('=')
                    .map(|(mac, nic)| (nic.to_string(), mac.to_string()))
                    .ok_or_else(|| format!("mac map line {l:?} is not mac=nic"))
            })
            .collect::<Result<_, _>>()?;
        out.push(HostNetwork {
            network_yaml: yaml.to_string(),
            interfaces,
        });
    }
    Ok(out)
}

/// `platform.type` of the cluster → AgentClusterInstall `platformType` (CRD enum).
fn platform_type(cluster: &Value) -> Option<&'static str> {
    let t = cluster
        .pointer("/platform/type")
        .and_then(Value::as_str)
        .unwrap_or("");
    match t {
        "baremetal" => Some("BareMetal"),
        "none" => Some("None"),
        "vsphere" => Some("VSphere"),
        "nutanix" => Some("Nutanix"),
        "external" | "oci" => Some("External"),
        _ => None,
    }
}

fn list_of(cluster: &Value, key: &str, field: &str) -> Vec<String> {
    cluster
        .get(key)
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .map(|x| s(x, field).to_string())
                .filter(|x| !x.is_empty())
                .collect()
        })
        .unwrap_or_default()
}

/// swagger `inventory` (JSON text) → the Agent status inventory subset the controllers show
/// (hostname, interfaces); None when absent or unreadable.
fn agent_inventory(host: &Value) -> Option<Value> {
    let inv: Value = serde_json::from_str(s(host, "inventory")).ok()?;
    let strs = |v: &Value, k: &str| -> Value {
        json!(v
            .get(k)
            .and_then(Value::as_array)
            .map(|a| a
                .iter()
                .filter_map(Value::as_str)
                .map(str::to_string)
                .collect::<Vec<_>>())
            .unwrap_or_default())
    };
    let interfaces: Vec<Value> = inv
        .get("interfaces")
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .map(|i| {
                    let mut o = json!({
                        "name": s(i, "name"),
                        "macAddress": s(i, "mac_address"),
                        "ipV4Addresses": strs(i, "ipv4_addresses"),
                        "ipV6Addresses": strs(i, "ipv6_addresses"),
                        "flags": strs(i, "flags"),
                    });
                    if let Some(m) = i.get("mtu").and_then(Value::as_i64) {
                        o["mtu"] = json!(m);
                    }
                    if let Some(c) = i.get("has_carrier").and_then(Value::as_bool) {
                        o["hasCarrier"] = json!(c);
                    }
                    o
                })
                .collect()
        })
        .unwrap_or_default();
    let mut o = json!({"interfaces": interfaces});
    if let Some(h) = inv.get("hostname").and_then(Value::as_str) {
        o["hostname"] = json!(h);
    }
    Some(o)
}

/// Builds the ordered CR list (see the module doc). Errors: [`Error::InvalidInput`] for a
/// cluster without an id or a name that cannot become a DNS-1123 label, a release image
/// missing, or an infra-env `static_network_config` / nmstate YAML that cannot be read.
pub fn build(inp: &CrInputs<'_>) -> Result<CrSet, Error> {
    let c = inp.cluster;
    let cid = s(c, "id");
    if cid.is_empty() {
        return Err(invalid("api/clusters.json", "the cluster has no id"));
    }
    let mut notes = Vec::new();
    let raw_name = s(c, "name");
    let version = s(c, "openshift_version");
    let names = CrNames::new(raw_name, version).ok_or_else(|| {
        invalid(
            "cluster name",
            format!("{raw_name:?} has no character usable in a CR name"),
        )
    })?;
    let cd = names.cd.clone();
    if cd != raw_name {
        notes.push(format!(
            "cluster name {raw_name:?} is not a valid Kubernetes name (DNS-1123 label): the CRs are named {cd:?}"
        ));
    }
    let release = s(c, "ocp_release_image");
    if release.is_empty() {
        return Err(invalid(
            "api/clusters.json",
            format!("cluster {cid} has no ocp_release_image; a ClusterImageSet needs it"),
        ));
    }
    let CrNames {
        image_set: cis,
        pull_secret: pull,
        admin_kubeconfig: kubeconfig,
        admin_password: password,
        ..
    } = names;
    let none = Map::new;
    let mut objects = vec![
        json!({
            "apiVersion": "v1", "kind": "Secret",
            "metadata": meta(&pull, cid, None, none()),
            "type": "kubernetes.io/dockerconfigjson",
            "data": {".dockerconfigjson": b64(inp.pull_secret.as_bytes())},
        }),
        json!({
            "apiVersion": "v1", "kind": "Secret",
            "metadata": meta(&kubeconfig, cid, None, none()),
            "type": "Opaque",
            "data": {"kubeconfig": b64(inp.kubeconfig)},
        }),
        json!({
            "apiVersion": "v1", "kind": "Secret",
            "metadata": meta(&password, cid, None, none()),
            "type": "Opaque",
            "data": {"username": b64(inp.username.as_bytes()), "password": b64(inp.password.as_bytes())},
        }),
        json!({
            "apiVersion": "hive.openshift.io/v1", "kind": "ClusterImageSet",
            "metadata": meta(&cis, cid, None, none()),
            "spec": {"releaseImage": release},
        }),
    ];
    // The metadata openshift-install/the CD controller keep (docs/migrate.md "The migration
    // contract", "CRs").
    let ocp_id = s(c, "openshift_cluster_id");
    let cluster_metadata = json!({
        "clusterID": ocp_id,
        "infraID": cid,
        "adminKubeconfigSecretRef": {"name": kubeconfig},
        "adminPasswordSecretRef": {"name": password},
    });
    let base = s(c, "base_dns_domain");
    let mut cd_ann = none();
    cd_ann.insert(RECONCILE_PAUSE.into(), json!("true"));
    let mut cd_status = Map::new();
    if !raw_name.is_empty() && !base.is_empty() {
        cd_status.insert(
            "apiURL".into(),
            json!(format!("https://api.{raw_name}.{base}:6443")),
        );
    }
    if let Some(u) = inp.console_url.filter(|u| !u.is_empty()) {
        cd_status.insert("webConsoleURL".into(), json!(u));
    }
    if let Some(t) = c
        .get("install_completed_at")
        .and_then(Value::as_str)
        .filter(|t| !t.starts_with("0001"))
    {
        cd_status.insert("installedTimestamp".into(), json!(t));
    }
    if let Some(t) = c
        .get("install_started_at")
        .and_then(Value::as_str)
        .filter(|t| !t.starts_with("0001"))
    {
        cd_status.insert("installStartedTimestamp".into(), json!(t));
    }
    if !version.is_empty() {
        cd_status.insert("installVersion".into(), json!(version));
    }
    let mut cd_obj = json!({
        "apiVersion": "hive.openshift.io/v1", "kind": "ClusterDeployment",
        "metadata": meta(&cd, cid, None, cd_ann),
        "spec": {
            "clusterName": raw_name,
            "baseDomain": base,
            "installed": true,
            "clusterMetadata": cluster_metadata,
            "platform": {"agentBareMetal": {"agentSelector": {}}},
            "clusterInstallRef": {
                "group": "extensions.hive.openshift.io", "version": "v1beta1",
                "kind": "AgentClusterInstall", "name": cd,
            },
            "pullSecretRef": {"name": pull},
        },
    });
    if !cd_status.is_empty() {
        cd_obj["status"] = Value::Object(cd_status);
    }
    objects.push(cd_obj);

    // AgentClusterInstall.
    let role_of = |h: &Value| s(h, "role").to_string();
    let masters = inp.hosts.iter().filter(|h| role_of(h) == "master").count();
    let arbiters = inp.hosts.iter().filter(|h| role_of(h) == "arbiter").count();
    let workers = inp.hosts.iter().filter(|h| role_of(h) == "worker").count();
    let cluster_networks: Vec<Value> = c
        .get("cluster_networks")
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter(|n| !s(n, "cidr").is_empty())
                .map(|n| {
                    let mut o = json!({"cidr": s(n, "cidr")});
                    if let Some(p) = n.get("host_prefix").and_then(Value::as_i64) {
                        o["hostPrefix"] = json!(p);
                    }
                    o
                })
                .collect()
        })
        .unwrap_or_default();
    let mut networking = json!({
        "clusterNetwork": cluster_networks,
        "serviceNetwork": list_of(c, "service_networks", "cidr"),
        "machineNetwork": list_of(c, "machine_networks", "cidr").into_iter().map(|x| json!({"cidr": x})).collect::<Vec<_>>(),
    });
    const NETWORK_TYPES: [&str; 6] = [
        "OpenShiftSDN",
        "OVNKubernetes",
        "CiscoACI",
        "Cilium",
        "Calico",
        "None",
    ];
    let nt = s(c, "network_type");
    if NETWORK_TYPES.contains(&nt) {
        networking["networkType"] = json!(nt);
    }
    if let Some(u) = c.get("user_managed_networking").and_then(Value::as_bool) {
        networking["userManagedNetworking"] = json!(u);
    }
    let mut prov = json!({"controlPlaneAgents": masters, "workerAgents": workers});
    if arbiters > 0 {
        prov["arbiterAgents"] = json!(arbiters);
    }
    let mut aci_spec = json!({
        "clusterDeploymentRef": {"name": cd},
        "imageSetRef": {"name": cis},
        "networking": networking,
        "provisionRequirements": prov,
        "holdInstallation": true,
        "clusterMetadata": cluster_metadata,
    });
    let api_vips = list_of(c, "api_vips", "ip");
    let ingress_vips = list_of(c, "ingress_vips", "ip");
    if !api_vips.is_empty() {
        aci_spec["apiVIPs"] = json!(api_vips);
    }
    if !ingress_vips.is_empty() {
        aci_spec["ingressVIPs"] = json!(ingress_vips);
    }
    if let Some(p) = platform_type(c) {
        aci_spec["platformType"] = json!(p);
    }
    if let Some(b) = c.get("schedulable_masters").and_then(Value::as_bool) {
        aci_spec["mastersSchedulable"] = json!(b);
    }
    let key = s(c, "ssh_public_key");
    if !key.is_empty() {
        aci_spec["sshPublicKey"] = json!(key);
    }
    let mut aci_status = json!({"debugInfo": {"state": s(c, "status"), "stateInfo": s(c, "status_info")}});
    if let Some(p) = c.pointer("/progress/total_percentage").and_then(Value::as_i64) {
        aci_status["progress"] = json!({"totalPercentage": p});
    }
    if !api_vips.is_empty() {
        aci_status["apiVIPs"] = json!(api_vips);
    }
    if !ingress_vips.is_empty() {
        aci_status["ingressVIPs"] = json!(ingress_vips);
    }
    objects.push(json!({
        "apiVersion": "extensions.hive.openshift.io/v1beta1", "kind": "AgentClusterInstall",
        "metadata": meta(&cd, cid, None, none()),
        "spec": aci_spec,
        "status": aci_status,
    }));

    // InfraEnvs and their NMStateConfigs.
    let mut ie_names: BTreeMap<String, String> = BTreeMap::new();
    let mut nmstate = Vec::new();
    let mut infra_objs = Vec::new();
    for ie in inp.infra_envs {
        let id = s(ie, "id");
        let raw = s(ie, "name");
        let name = dns1123_label(raw).ok_or_else(|| {
            invalid(
                &format!("infra-env {id} name"),
                format!("{raw:?} cannot become a CR name"),
            )
        })?;
        if name != raw {
            notes.push(format!(
                "infra-env name {raw:?} is not a valid Kubernetes name: the InfraEnv is named {name:?}"
            ));
        }
        ie_names.insert(id.to_string(), name.clone());
        let label = json!({ INFRAENV_LABEL: name });
        let mut spec = json!({"pullSecretRef": {"name": pull}});
        // A late-binding infra-env (no cluster_id) has no clusterRef; its hosts are bound one by one.
        if s(ie, "cluster_id") == cid {
            spec["clusterRef"] = json!({"name": cd, "namespace": ""});
        }
        for (from, to) in [
            ("ssh_authorized_key", "sshAuthorizedKey"),
            ("cpu_architecture", "cpuArchitecture"),
            ("ignition_config_override", "ignitionConfigOverride"),
            ("additional_trust_bundle", "additionalTrustBundle"),
            ("type", "imageType"),
            ("openshift_version", "osImageVersion"),
        ] {
            let v = s(ie, from);
            if !v.is_empty() {
                spec[to] = json!(v);
            }
        }
        let ntp: Vec<&str> = s(ie, "additional_ntp_sources")
            .split(',')
            .map(str::trim)
            .filter(|x| !x.is_empty())
            .collect();
        if !ntp.is_empty() {
            spec["additionalNTPSources"] = json!(ntp);
        }
        if let Some(p) = ie.get("proxy").filter(|p| p.is_object()) {
            let mut proxy = Map::new();
            for (from, to) in [
                ("http_proxy", "httpProxy"),
                ("https_proxy", "httpsProxy"),
                ("no_proxy", "noProxy"),
            ] {
                if !s(p, from).is_empty() {
                    proxy.insert(to.into(), json!(s(p, from)));
                }
            }
            if !proxy.is_empty() {
                spec["proxy"] = Value::Object(proxy);
            }
        }
        if let Ok(args) = serde_json::from_str::<Vec<Value>>(s(ie, "kernel_arguments")) {
            let args: Vec<Value> = args
                .iter()
                .map(|a| json!({"operation": s(a, "operation"), "value": s(a, "value")}))
                .collect();
            if !args.is_empty() {
                spec["kernelArguments"] = json!(args);
            }
        }
        let hosts_net = parse_static_network_config(s(ie, "static_network_config"))
            .map_err(|e| invalid(&format!("infra-env {id} static_network_config"), e))?;
        if !hosts_net.is_empty() {
            spec["nmStateConfigLabelSelector"] = json!({"matchLabels": label});
        }
        for (n, h) in hosts_net.iter().enumerate() {
            let config: Value = serde_saphyr::from_str(&h.network_yaml).map_err(|e| {
                invalid(
                    &format!("infra-env {id} static_network_config[{n}].network_yaml"),
                    format!("not YAML: {}", crate::nodes_config::yaml::error_text(&e)),
                )
            })?;
            let interfaces: Vec<Value> = h
                .interfaces
                .iter()
                .map(|(nic, mac)| json!({"name": nic, "macAddress": mac}))
                .collect();
            nmstate.push(json!({
                "apiVersion": "agent-install.openshift.io/v1beta1", "kind": "NMStateConfig",
                "metadata": meta(&format!("{name}-{n}"), cid, Some(label.clone()), none()),
                "spec": {"config": config, "interfaces": interfaces},
            }));
        }
        let mut status = Map::new();
        let created = s(ie, "created_at");
        if !created.is_empty() {
            status.insert("createdTime".into(), json!(created));
        }
        let mut obj = json!({
            "apiVersion": "agent-install.openshift.io/v1beta1", "kind": "InfraEnv",
            "metadata": meta(&name, cid, None, none()),
            "spec": spec,
        });
        if !status.is_empty() {
            obj["status"] = Value::Object(status);
        }
        infra_objs.push(obj);
    }
    let nmstate_configs = nmstate.len() as u64;
    objects.extend(infra_objs);
    objects.extend(nmstate);

    // Agents.
    for h in inp.hosts {
        let id = s(h, "id");
        if !is_dns1123_label(id) {
            return Err(invalid(
                &format!("host {id:?}"),
                "its id cannot be an Agent name (not a lowercase UUID)",
            ));
        }
        let ie = s(h, "infra_env_id");
        let ie_name = ie_names.get(ie).ok_or_else(|| {
            invalid(
                &format!("host {id}"),
                format!("its infra-env {ie} is not among the exported infra-envs"),
            )
        })?;
        let mut ann = none();
        ann.insert(SKIP_SPOKE_CLEANUP.into(), json!("true"));
        let role = match s(h, "role") {
            "" => "auto-assign",
            r => r,
        };
        let mut spec = json!({
            "clusterDeploymentName": {"name": cd, "namespace": ""},
            "role": role,
            "approved": true,
        });
        if !s(h, "requested_hostname").is_empty() {
            spec["hostname"] = json!(s(h, "requested_hostname"));
        }
        if !s(h, "installation_disk_id").is_empty() {
            spec["installation_disk_id"] = json!(s(h, "installation_disk_id"));
        }
        if !s(h, "installation_disk_path").is_empty() {
            spec["installation_disk_path"] = json!(s(h, "installation_disk_path"));
        }
        let mut status = json!({
            "debugInfo": {"state": s(h, "status"), "stateInfo": s(h, "status_info")},
            "role": role,
            "kind": if s(h, "kind").is_empty() { "Host" } else { s(h, "kind") },
        });
        if let Some(b) = h.get("bootstrap").and_then(Value::as_bool) {
            status["bootstrap"] = json!(b);
        }
        if let Some(p) = h.get("progress").filter(|p| p.is_object()) {
            let mut o = Map::new();
            for (from, to) in [
                ("current_stage", "currentStage"),
                ("progress_info", "progressInfo"),
                ("stage_started_at", "stageStartTime"),
                ("stage_updated_at", "stageUpdateTime"),
            ] {
                if !s(p, from).is_empty() && !s(p, from).starts_with("0001") {
                    o.insert(to.into(), json!(s(p, from)));
                }
            }
            if let Some(n) = p.get("installation_percentage").and_then(Value::as_i64) {
                o.insert("installationPercentage".into(), json!(n));
            }
            status["progress"] = Value::Object(o);
        }
        if let Some(inv) = agent_inventory(h) {
            status["inventory"] = inv;
        }
        objects.push(json!({
            "apiVersion": "agent-install.openshift.io/v1beta1", "kind": "Agent",
            "metadata": meta(id, cid, Some(json!({ INFRAENV_LABEL: ie_name })), ann),
            "spec": spec,
            "status": status,
        }));
    }
    Ok(CrSet {
        objects,
        cd_name: cd,
        nmstate_configs,
        notes,
    })
}

/// What the manifest says the CR set of a bundle is made of ([`check_set`]).
#[derive(Debug, Clone)]
pub struct ExpectedSet<'a> {
    /// The assisted cluster id (`manifest.cluster.id`): every object's [`MIGRATION_ANNOTATION`]
    /// and the `clusterMetadata.infraID`.
    pub cluster_id: &'a str,
    /// `manifest.cluster.name` (the CR names follow from it, [`CrNames`]).
    pub cluster_name: &'a str,
    /// `manifest.cluster.openshift_version` (the ClusterImageSet name).
    pub openshift_version: &'a str,
    /// `manifest.cluster.release_image`: the ClusterImageSet's `spec.releaseImage`.
    pub release_image: &'a str,
    /// `manifest.cluster.infra_env_ids`: one InfraEnv each.
    pub infra_env_ids: &'a [String],
    /// `manifest.cluster.host_ids`: one Agent each, named by the id.
    pub host_ids: &'a [String],
}

/// Names no bundle object may take: the record ConfigMap, the volume and the copy pod of
/// import (src/migrate/record.rs, import.rs).
pub const RESERVED_NAMES: [&str; 2] = ["agent-day2-migration", "agent-day2-migration-copy"];

/// Keys allowed in `spec` per kind (those [`build`] writes).
fn spec_keys(kind: &str) -> &'static [&'static str] {
    match kind {
        "ClusterImageSet" => &["releaseImage"],
        "ClusterDeployment" => &[
            "clusterName",
            "baseDomain",
            "installed",
            "clusterMetadata",
            "platform",
            "clusterInstallRef",
            "pullSecretRef",
        ],
        "AgentClusterInstall" => &[
            "clusterDeploymentRef",
            "imageSetRef",
            "networking",
            "provisionRequirements",
            "holdInstallation",
            "clusterMetadata",
            "apiVIPs",
            "ingressVIPs",
            "platformType",
            "mastersSchedulable",
            "sshPublicKey",
        ],
        "InfraEnv" => &[
            "pullSecretRef",
            "clusterRef",
            "sshAuthorizedKey",
            "cpuArchitecture",
            "ignitionConfigOverride",
            "additionalTrustBundle",
            "imageType",
            "osImageVersion",
            "additionalNTPSources",
            "proxy",
            "kernelArguments",
            "nmStateConfigLabelSelector",
        ],
        "NMStateConfig" => &["config", "interfaces"],
        "Agent" => &[
            "clusterDeploymentName",
            "role",
            "approved",
            "hostname",
            "installation_disk_id",
            "installation_disk_path",
        ],
        _ => &[],
    }
}

/// Checks that `objects` (crs/crs.json) is exactly the set [`build`] makes for the cluster of
/// `exp`, so that a bundle edited and resealed cannot make import create anything else:
///
/// - kinds: three Secrets `<cd>-pull-secret` (`kubernetes.io/dockerconfigjson`, key
///   `.dockerconfigjson`), `<cd>-admin-kubeconfig` (Opaque, `kubeconfig`), `<cd>-admin-password`
///   (Opaque, `username`, `password`); one ClusterImageSet `openshift-<version>` whose
///   `releaseImage` is the manifest's; one ClusterDeployment and one AgentClusterInstall `<cd>`
///   referring to these by name; one InfraEnv per infra-env id (DNS-1123 labels, pull secret
///   `<cd>-pull-secret`, cluster `<cd>` or none); NMStateConfigs `<infraenv>-<n>` labelled
///   for one of them; one Agent per host id, labelled for one of the InfraEnvs, of cluster `<cd>`;
/// - no duplicates, no name of [`RESERVED_NAMES`], no namespace set, names DNS-1123 (labels for
///   ClusterDeployment, AgentClusterInstall, InfraEnv and Agent; subdomains otherwise);
/// - metadata only `name`, `namespace` (empty), `labels` ([`INFRAENV_LABEL`] on NMStateConfigs
///   and Agents only), `annotations` ([`MIGRATION_ANNOTATION`] = the cluster id on every object;
///   [`RECONCILE_PAUSE`] on the ClusterDeployment, [`SKIP_SPOKE_CLEANUP`] on Agents); `spec`
///   only with the keys `build` writes; `status` only on the kinds `build` gives one.
///
/// Errors: [`Error::InvalidInput`] (exit 3) naming `crs/crs.json[i]` and what is wrong, or
/// `crs/crs.json` for what is missing.
pub fn check_set(objects: &[Value], exp: &ExpectedSet<'_>) -> Result<(), Error> {
    let names = CrNames::new(exp.cluster_name, exp.openshift_version).ok_or_else(|| {
        invalid(
            "bundle manifest.json cluster.name",
            format!("{:?} has no character usable in a CR name", exp.cluster_name),
        )
    })?;
    let whole = "bundle file crs/crs.json";
    let cd = names.cd.as_str();
    // First pass: the InfraEnv names (NMStateConfigs and Agents refer to them).
    let ie_names: Vec<&str> = objects
        .iter()
        .filter(|o| s(o, "kind") == "InfraEnv")
        .filter_map(|o| o.pointer("/metadata/name").and_then(Value::as_str))
        .collect();
    let mut seen: Vec<(String, String)> = Vec::new();
    let mut count: BTreeMap<&str, usize> = BTreeMap::new();
    let mut agents: Vec<String> = Vec::new();
    for (i, o) in objects.iter().enumerate() {
        let field = format!("{whole}[{i}]");
        let bad = |m: String| invalid(&field, m);
        let obj = o.as_object().ok_or_else(|| bad("not an object".into()))?;
        let kind = s(o, "kind");
        let api_version = s(o, "apiVersion");
        let want_api = match kind {
            "Secret" => "v1",
            "ClusterImageSet" | "ClusterDeployment" => "hive.openshift.io/v1",
            "AgentClusterInstall" => "extensions.hive.openshift.io/v1beta1",
            "InfraEnv" | "NMStateConfig" | "Agent" => "agent-install.openshift.io/v1beta1",
            _ => {
                return Err(bad(format!(
                    "kind {kind:?} ({api_version}) is not one export makes: a bundle holds only \
                     Secrets, a ClusterImageSet, a ClusterDeployment, an AgentClusterInstall, \
                     InfraEnvs, NMStateConfigs and Agents"
                )))
            }
        };
        if api_version != want_api {
            return Err(bad(format!(
                "{kind} with apiVersion {api_version:?}, not {want_api}"
            )));
        }
        let meta = o
            .get("metadata")
            .and_then(Value::as_object)
            .ok_or_else(|| bad("no metadata".into()))?;
        let name = meta.get("name").and_then(Value::as_str).unwrap_or("");
        let what = format!("{kind} {name:?}");
        let label_named = matches!(
            kind,
            "ClusterDeployment" | "AgentClusterInstall" | "InfraEnv" | "Agent"
        );
        let name_ok = if label_named {
            is_dns1123_label(name)
        } else {
            is_dns1123_subdomain(name)
        };
        if !name_ok {
            return Err(bad(format!(
                "{what}: the name is not a DNS-1123 {}",
                if label_named { "label" } else { "subdomain" }
            )));
        }
        if RESERVED_NAMES.contains(&name) {
            return Err(bad(format!(
                "{what}: the name is import's own (record, volume, copy pod)"
            )));
        }
        if seen.iter().any(|(k, n)| k == kind && n == name) {
            return Err(bad(format!("{what} appears twice")));
        }
        seen.push((kind.to_string(), name.to_string()));
        *count.entry(kind).or_default() += 1;
        if let Some(k) = meta
            .keys()
            .find(|k| !matches!(k.as_str(), "name" | "namespace" | "labels" | "annotations"))
        {
            return Err(bad(format!(
                "{what}: metadata.{k} is not something export writes"
            )));
        }
        if meta.get("namespace").is_some_and(|n| n.as_str() != Some("")) {
            return Err(bad(format!(
                "{what}: metadata.namespace is set; the bundle's objects have none (import sets it)"
            )));
        }
        // Annotations.
        let ann = match meta.get("annotations") {
            None => Map::new(),
            Some(Value::Object(m)) => m.clone(),
            Some(_) => return Err(bad(format!("{what}: metadata.annotations is not a map"))),
        };
        if ann.get(MIGRATION_ANNOTATION).and_then(Value::as_str) != Some(exp.cluster_id) {
            return Err(bad(format!(
                "{what}: annotation {MIGRATION_ANNOTATION} is not this bundle's cluster {}",
                exp.cluster_id
            )));
        }
        for k in ann.keys() {
            let allowed = k == MIGRATION_ANNOTATION
                || (kind == "ClusterDeployment" && k == RECONCILE_PAUSE)
                || (kind == "Agent" && k == SKIP_SPOKE_CLEANUP);
            if !allowed {
                return Err(bad(format!("{what}: annotation {k:?} is not one export writes")));
            }
        }
        // Labels.
        let labels = match meta.get("labels") {
            None => Map::new(),
            Some(Value::Object(m)) => m.clone(),
            Some(_) => return Err(bad(format!("{what}: metadata.labels is not a map"))),
        };
        let ie_label = labels.get(INFRAENV_LABEL).and_then(Value::as_str);
        if matches!(kind, "NMStateConfig" | "Agent") {
            if labels.len() != 1 || !ie_label.is_some_and(|l| ie_names.contains(&l)) {
                return Err(bad(format!(
                    "{what}: needs exactly the label {INFRAENV_LABEL} naming one of the bundle's InfraEnvs"
                )));
            }
        } else if !labels.is_empty() {
            return Err(bad(format!(
                "{what}: labels are not something export writes on a {kind}"
            )));
        }
        // Top-level keys.
        let top: &[&str] = match kind {
            "Secret" => &["apiVersion", "kind", "metadata", "type", "data"],
            "ClusterImageSet" | "NMStateConfig" => &["apiVersion", "kind", "metadata", "spec"],
            _ => &["apiVersion", "kind", "metadata", "spec", "status"],
        };
        if let Some(k) = obj.keys().find(|k| !top.contains(&k.as_str())) {
            return Err(bad(format!("{what}: field {k:?} is not something export writes")));
        }
        if kind != "Secret" {
            let spec = o
                .get("spec")
                .and_then(Value::as_object)
                .ok_or_else(|| bad(format!("{what}: no spec")))?;
            if let Some(k) = spec.keys().find(|k| !spec_keys(kind).contains(&k.as_str())) {
                return Err(bad(format!("{what}: spec.{k} is not something export writes")));
            }
        }
        let at = |p: &str| o.pointer(p).and_then(Value::as_str);
        let need = |p: &str, want: &str| -> Result<(), Error> {
            if at(p) == Some(want) {
                Ok(())
            } else {
                Err(invalid(
                    &field,
                    format!(
                        "{what}: {} must be {want:?} (it is {:?})",
                        p.replace('/', "."),
                        at(p)
                    ),
                ))
            }
        };
        match kind {
            "Secret" => {
                let (ty, keys): (&str, &[&str]) = if name == names.pull_secret {
                    ("kubernetes.io/dockerconfigjson", &[".dockerconfigjson"])
                } else if name == names.admin_kubeconfig {
                    ("Opaque", &["kubeconfig"])
                } else if name == names.admin_password {
                    ("Opaque", &["password", "username"])
                } else {
                    return Err(bad(format!(
                        "{what}: the bundle's Secrets are {}, {} and {}",
                        names.pull_secret, names.admin_kubeconfig, names.admin_password
                    )));
                };
                need("/type", ty)?;
                let data = o
                    .get("data")
                    .and_then(Value::as_object)
                    .ok_or_else(|| bad(format!("{what}: no data")))?;
                let mut have: Vec<&str> = data.keys().map(String::as_str).collect();
                have.sort_unstable();
                if have != keys || data.values().any(|v| !v.is_string()) {
                    return Err(bad(format!(
                        "{what}: data must hold exactly the keys {keys:?} (text)"
                    )));
                }
            }
            "ClusterImageSet" => {
                if name != names.image_set {
                    return Err(bad(format!(
                        "{what}: the bundle's ClusterImageSet is {} (manifest cluster.openshift_version)",
                        names.image_set
                    )));
                }
                need("/spec/releaseImage", exp.release_image)?;
            }
            "ClusterDeployment" => {
                if name != cd {
                    return Err(bad(format!(
                        "{what}: the ClusterDeployment is named {cd} (manifest cluster.name)"
                    )));
                }
                need("/spec/clusterInstallRef/kind", "AgentClusterInstall")?;
                need("/spec/clusterInstallRef/name", cd)?;
                need("/spec/pullSecretRef/name", &names.pull_secret)?;
                need("/spec/clusterMetadata/infraID", exp.cluster_id)?;
                need(
                    "/spec/clusterMetadata/adminKubeconfigSecretRef/name",
                    &names.admin_kubeconfig,
                )?;
                need(
                    "/spec/clusterMetadata/adminPasswordSecretRef/name",
                    &names.admin_password,
                )?;
                if o.pointer("/spec/platform") != Some(&json!({"agentBareMetal": {"agentSelector": {}}})) {
                    return Err(bad(format!(
                        "{what}: spec.platform must be agentBareMetal with an empty agentSelector"
                    )));
                }
            }
            "AgentClusterInstall" => {
                if name != cd {
                    return Err(bad(format!(
                        "{what}: the AgentClusterInstall is named {cd} (manifest cluster.name)"
                    )));
                }
                need("/spec/clusterDeploymentRef/name", cd)?;
                need("/spec/imageSetRef/name", &names.image_set)?;
                if o.pointer("/spec/clusterMetadata").is_some() {
                    need("/spec/clusterMetadata/infraID", exp.cluster_id)?;
                    need(
                        "/spec/clusterMetadata/adminKubeconfigSecretRef/name",
                        &names.admin_kubeconfig,
                    )?;
                    need(
                        "/spec/clusterMetadata/adminPasswordSecretRef/name",
                        &names.admin_password,
                    )?;
                }
            }
            "InfraEnv" => {
                need("/spec/pullSecretRef/name", &names.pull_secret)?;
                if o.pointer("/spec/clusterRef").is_some() {
                    need("/spec/clusterRef/name", cd)?;
                }
                if let Some(sel) = o.pointer("/spec/nmStateConfigLabelSelector") {
                    if sel != &json!({"matchLabels": {INFRAENV_LABEL: name}}) {
                        return Err(bad(format!(
                            "{what}: spec.nmStateConfigLabelSelector must select {INFRAENV_LABEL}={name}"
                        )));
                    }
                }
            }
            "NMStateConfig" => {
                let ie = ie_label.unwrap_or("");
                let n = name
                    .strip_prefix(ie)
                    .and_then(|r| r.strip_prefix('-'))
                    .unwrap_or("");
                if n.is_empty() || !n.bytes().all(|b| b.is_ascii_digit()) {
                    return Err(bad(format!(
                        "{what}: an NMStateConfig is named <infraenv>-<n> ({ie}-0, …)"
                    )));
                }
            }
            "Agent" => {
                if !exp.host_ids.iter().any(|h| h == name) {
                    return Err(bad(format!("{what}: not one of the manifest's host ids")));
                }
                agents.push(name.to_string());
                need("/spec/clusterDeploymentName/name", cd)?;
            }
            _ => {}
        }
    }
    let n = |k: &str| count.get(k).copied().unwrap_or(0);
    let want = [
        ("Secret", 3),
        ("ClusterImageSet", 1),
        ("ClusterDeployment", 1),
        ("AgentClusterInstall", 1),
        ("InfraEnv", exp.infra_env_ids.len()),
        ("Agent", exp.host_ids.len()),
    ];
    for (k, w) in want {
        if n(k) != w {
            return Err(invalid(
                whole,
                format!(
                    "{} {k} object(s), the manifest calls for {w} (export makes exactly that set)",
                    n(k)
                ),
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const CID: &str = "0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0";
    const IE: &str = "11111111-2222-3333-4444-555555555555";

    fn host(i: usize, role: &str) -> Value {
        json!({
            "id": format!("aaaaaaaa-0000-0000-0000-00000000000{i}"),
            "infra_env_id": IE, "cluster_id": CID, "role": role, "kind": "Host",
            "status": "installed", "status_info": "Done", "bootstrap": i == 0,
            "requested_hostname": format!("master-{i}"),
            "progress": {"current_stage": "Done", "installation_percentage": 100,
                         "stage_started_at": "2026-11-30T10:00:00Z", "stage_updated_at": "0001-01-01T00:00:00Z"},
            "inventory": json!({"hostname": format!("master-{i}"),
                "interfaces": [{"name": "eth0", "mac_address": format!("52:54:00:00:00:0{i}"),
                                "ipv4_addresses": [format!("192.168.111.2{i}/24")], "mtu": 1500, "has_carrier": true}]}).to_string(),
        })
    }

    fn cluster() -> Value {
        json!({
            "id": CID, "name": "Agent_Cluster", "base_dns_domain": "example.com",
            "openshift_version": "4.18.3", "ocp_release_image": "quay.io/openshift-release-dev/ocp-release:4.18.3-x86_64",
            "openshift_cluster_id": "9a8b7c6d-0000-1111-2222-333344445555",
            "status": "installed", "status_info": "Cluster is installed",
            "platform": {"type": "baremetal"}, "network_type": "OVNKubernetes", "user_managed_networking": false,
            "cluster_networks": [{"cidr": "10.128.0.0/14", "host_prefix": 23}],
            "service_networks": [{"cidr": "172.30.0.0/16"}],
            "machine_networks": [{"cidr": "192.168.111.0/24"}],
            "api_vips": [{"ip": "192.168.111.5"}], "ingress_vips": [{"ip": "192.168.111.4"}],
            "progress": {"total_percentage": 100},
            "install_completed_at": "2026-11-30T11:00:00Z",
            "ssh_public_key": "ssh-ed25519 AAAA test",
        })
    }

    fn infra_env() -> Value {
        let snc = json!([
            {"network_yaml": "interfaces:\n- name: eth0\n  type: ethernet\n  state: up\n", "mac_interface_map": [{"logical_nic_name": "eth0", "mac_address": "52:54:00:00:00:00"}]},
            {"network_yaml": "interfaces:\n- name: eth0\n  type: ethernet\n", "mac_interface_map": [{"logical_nic_name": "eth0", "mac_address": "52:54:00:00:00:01"}]},
        ]);
        json!({"id": IE, "name": "agent-cluster", "cluster_id": CID, "cpu_architecture": "x86_64",
               "type": "full-iso", "static_network_config": snc.to_string(), "created_at": "2026-11-30T09:00:00Z",
               "additional_ntp_sources": "ntp1.example.com, ntp2"})
    }

    fn built() -> CrSet {
        let c = cluster();
        let ies = vec![infra_env()];
        let hosts = vec![
            host(0, "master"),
            host(1, "master"),
            host(2, "master"),
            host(3, "worker"),
        ];
        build(&CrInputs {
            cluster: &c,
            infra_envs: &ies,
            hosts: &hosts,
            pull_secret: "{\"auths\":{}}",
            kubeconfig: b"apiVersion: v1\nkind: Config\n",
            username: "kubeadmin",
            password: "pw",
            console_url: Some("https://console-openshift-console.apps.agent_cluster.example.com"),
        })
        .unwrap()
    }

    #[test]
    fn order_names_and_references_follow_the_contract() {
        let set = built();
        assert_eq!(set.cd_name, "agent-cluster");
        assert_eq!(set.notes.len(), 1, "{:?}", set.notes);
        assert!(set.notes[0].contains("\"Agent_Cluster\"") && set.notes[0].contains("\"agent-cluster\""));
        let kinds: Vec<(String, String)> = set
            .objects
            .iter()
            .map(|o| {
                (
                    o["kind"].as_str().unwrap().into(),
                    o["metadata"]["name"].as_str().unwrap().into(),
                )
            })
            .collect();
        let want: Vec<(&str, &str)> = vec![
            ("Secret", "agent-cluster-pull-secret"),
            ("Secret", "agent-cluster-admin-kubeconfig"),
            ("Secret", "agent-cluster-admin-password"),
            ("ClusterImageSet", "openshift-4.18.3"),
            ("ClusterDeployment", "agent-cluster"),
            ("AgentClusterInstall", "agent-cluster"),
            ("InfraEnv", "agent-cluster"),
            ("NMStateConfig", "agent-cluster-0"),
            ("NMStateConfig", "agent-cluster-1"),
            ("Agent", "aaaaaaaa-0000-0000-0000-000000000000"),
            ("Agent", "aaaaaaaa-0000-0000-0000-000000000001"),
            ("Agent", "aaaaaaaa-0000-0000-0000-000000000002"),
            ("Agent", "aaaaaaaa-0000-0000-0000-000000000003"),
        ];
        assert_eq!(
            kinds,
            want.iter()
                .map(|(a, b)| (a.to_string(), b.to_string()))
                .collect::<Vec<_>>()
        );
        assert_eq!(set.nmstate_configs, 2);
        for o in &set.objects {
            assert_eq!(o["metadata"]["namespace"], "", "{o}");
            assert_eq!(o["metadata"]["annotations"][MIGRATION_ANNOTATION], CID);
            // No node-0 URL (events, logs, ISO) in a status; the API/console URLs are cluster 0's.
            let st = o.get("status").map(|s| s.to_string()).unwrap_or_default();
            for k in ["eventsURL", "logsURL", "isoDownloadURL", ":8090"] {
                assert!(!st.contains(k), "{st}");
            }
        }
        let cd = &set.objects[4];
        assert_eq!(cd["metadata"]["annotations"][RECONCILE_PAUSE], "true");
        assert_eq!(cd["spec"]["installed"], true);
        assert_eq!(cd["spec"]["clusterName"], "Agent_Cluster");
        assert_eq!(cd["spec"]["clusterMetadata"]["infraID"], CID);
        assert_eq!(
            cd["spec"]["clusterMetadata"]["clusterID"],
            "9a8b7c6d-0000-1111-2222-333344445555"
        );
        assert_eq!(
            cd["spec"]["platform"]["agentBareMetal"]["agentSelector"],
            json!({})
        );
        assert_eq!(cd["spec"]["clusterInstallRef"]["name"], "agent-cluster");
        let aci = &set.objects[5];
        assert_eq!(aci["spec"]["holdInstallation"], true);
        assert_eq!(
            aci["spec"]["provisionRequirements"],
            json!({"controlPlaneAgents": 3, "workerAgents": 1})
        );
        assert_eq!(aci["spec"]["imageSetRef"]["name"], "openshift-4.18.3");
        assert_eq!(aci["spec"]["platformType"], "BareMetal");
        assert_eq!(
            aci["status"]["debugInfo"],
            json!({"state": "installed", "stateInfo": "Cluster is installed"})
        );
        let ie = &set.objects[6];
        assert_eq!(
            ie["spec"]["nmStateConfigLabelSelector"]["matchLabels"][INFRAENV_LABEL],
            "agent-cluster"
        );
        assert_eq!(
            ie["spec"]["additionalNTPSources"],
            json!(["ntp1.example.com", "ntp2"])
        );
        let nm = &set.objects[7];
        assert_eq!(nm["metadata"]["labels"][INFRAENV_LABEL], "agent-cluster");
        assert_eq!(
            nm["spec"]["interfaces"],
            json!([{"name": "eth0", "macAddress": "52:54:00:00:00:00"}])
        );
        assert_eq!(nm["spec"]["config"]["interfaces"][0]["state"], "up");
        let agent = &set.objects[9];
        assert_eq!(agent["metadata"]["annotations"][SKIP_SPOKE_CLEANUP], "true");
        assert_eq!(agent["metadata"]["labels"][INFRAENV_LABEL], "agent-cluster");
        assert_eq!(agent["spec"]["role"], "master");
        assert_eq!(agent["status"]["progress"]["installationPercentage"], 100);
        assert!(
            agent["status"]["progress"].get("stageUpdateTime").is_none(),
            "zero time dropped"
        );
        assert_eq!(
            agent["status"]["inventory"]["interfaces"][0]["macAddress"],
            "52:54:00:00:00:00"
        );
        let secret = &set.objects[0];
        assert_eq!(secret["type"], "kubernetes.io/dockerconfigjson");
        assert_eq!(
            base64::engine::general_purpose::STANDARD
                .decode(secret["data"][".dockerconfigjson"].as_str().unwrap())
                .unwrap(),
            b"{\"auths\":{}}"
        );
    }

    #[test]
    fn names_become_dns1123_labels() {
        assert_eq!(dns1123_label("agent-cluster").as_deref(), Some("agent-cluster"));
        assert_eq!(dns1123_label("My_Cluster.01").as_deref(), Some("my-cluster-01"));
        assert_eq!(dns1123_label("--x--").as_deref(), Some("x"));
        assert_eq!(dns1123_label("___"), None);
        assert_eq!(dns1123_label(&"a".repeat(80)).unwrap().len(), 63);
        assert!(is_dns1123_label("0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0"));
        assert!(!is_dns1123_label("A"));
        assert_eq!(
            dns1123_subdomain("openshift-4.18.0-rc.1").as_deref(),
            Some("openshift-4.18.0-rc.1")
        );
    }

    #[test]
    fn static_network_config_in_both_stored_forms() {
        let old =
            "a: 1\nHHHHH52:54:00:00:00:01=eth1\n52:54:00:00:00:02=eth2ZZZZZb: 2\nHHHHH52:54:00:00:00:03=eth0";
        let v = parse_static_network_config(old).unwrap();
        assert_eq!(v.len(), 2);
        assert_eq!(
            v[0].interfaces[1],
            ("eth2".to_string(), "52:54:00:00:00:02".to_string())
        );
        assert_eq!(v[1].network_yaml, "b: 2\n");
        assert!(parse_static_network_config("garbage").is_err());
        assert_eq!(parse_static_network_config("").unwrap(), vec![]);
    }

    #[test]
    fn refuses_unusable_inputs() {
        let mut c = cluster();
        c["name"] = json!("___");
        let e = build(&CrInputs {
            cluster: &c,
            infra_envs: &[],
            hosts: &[],
            pull_secret: "",
            kubeconfig: b"",
            username: "",
            password: "",
            console_url: None,
        })
        .unwrap_err();
        assert_eq!(e.exit_code(), 3);
        let c = cluster();
        let hosts = vec![host(0, "master")];
        let e = build(&CrInputs {
            cluster: &c,
            infra_envs: &[],
            hosts: &hosts,
            pull_secret: "",
            kubeconfig: b"",
            username: "",
            password: "",
            console_url: None,
        })
        .unwrap_err();
        assert!(e.to_string().contains("not among the exported infra-envs"), "{e}");
    }

    // ---- structural validation against assisted-service's CRDs (agent_day2_sim::upstream) ----

    /// Checks `v` against an openAPIV3Schema subset: type, required, enum, properties
    /// (unknown fields refused unless x-kubernetes-preserve-unknown-fields or
    /// additionalProperties), items.
    fn check(schema: &Value, v: &Value, path: &str, errs: &mut Vec<String>) {
        if let Some(t) = schema.get("type").and_then(Value::as_str) {
            let ok = match t {
                "object" => v.is_object(),
                "array" => v.is_array(),
                "string" => {
                    v.is_string() || (schema.get("x-kubernetes-int-or-string").is_some() && v.is_number())
                }
                "integer" => v.is_i64() || v.is_u64(),
                "number" => v.is_number(),
                "boolean" => v.is_boolean(),
                _ => true,
            };
            if !ok {
                errs.push(format!("{path}: want {t}, got {v}"));
                return;
            }
        }
        if let Some(e) = schema.get("enum").and_then(Value::as_array) {
            if !e.contains(v) {
                errs.push(format!("{path}: {v} not in {e:?}"));
            }
        }
        if let Some(req) = schema.get("required").and_then(Value::as_array) {
            for r in req.iter().filter_map(Value::as_str) {
                if v.get(r).is_none() {
                    errs.push(format!("{path}: missing required {r}"));
                }
            }
        }
        if let (Some(props), Some(obj)) = (schema.get("properties").and_then(Value::as_object), v.as_object())
        {
            let open = schema.get("x-kubernetes-preserve-unknown-fields").is_some()
                || schema.get("additionalProperties").is_some();
            for (k, val) in obj {
                match props.get(k) {
                    Some(s) => check(s, val, &format!("{path}.{k}"), errs),
                    None if !open => errs.push(format!("{path}: unknown field {k}")),
                    None => {}
                }
            }
        }
        if let (Some(items), Some(arr)) = (schema.get("items"), v.as_array()) {
            for (i, x) in arr.iter().enumerate() {
                check(items, x, &format!("{path}[{i}]"), errs);
            }
        }
    }

    #[test]
    #[cfg_attr(
        not(real_assisted),
        ignore = "needs assisted-service's CRDs: scripts/real-components.sh assisted, then AGENT_DAY2_REAL_ASSISTED=1 (scripts/test.sh does both)"
    )]
    fn generated_objects_are_valid_against_the_real_crds() {
        let dirs = agent_day2_sim::upstream::assisted_crd_dirs().unwrap_or_else(|why| panic!("{why}"));
        let mut schemas: BTreeMap<(String, String), Value> = BTreeMap::new();
        for e in dirs.iter().flat_map(|d| std::fs::read_dir(d).unwrap()) {
            let p = e.unwrap().path();
            if p.extension().and_then(|x| x.to_str()) != Some("yaml") {
                continue;
            }
            let crd: Value = serde_saphyr::from_str(&std::fs::read_to_string(&p).unwrap()).unwrap();
            let group = crd["spec"]["group"].as_str().unwrap().to_string();
            let kind = crd["spec"]["names"]["kind"].as_str().unwrap().to_string();
            for v in crd["spec"]["versions"].as_array().unwrap() {
                let av = format!("{group}/{}", v["name"].as_str().unwrap());
                schemas.insert((av, kind.clone()), v["schema"]["openAPIV3Schema"].clone());
            }
        }
        let set = built();
        let mut checked = 0;
        for o in &set.objects {
            let key = (
                o["apiVersion"].as_str().unwrap().to_string(),
                o["kind"].as_str().unwrap().to_string(),
            );
            let Some(schema) = schemas.get(&key) else {
                assert_eq!(key.0, "v1", "no CRD for {key:?}");
                continue;
            };
            let mut body = o.clone();
            body.as_object_mut().unwrap().remove("metadata");
            body.as_object_mut().unwrap().remove("apiVersion");
            body.as_object_mut().unwrap().remove("kind");
            let mut errs = vec![];
            check(
                schema,
                &body,
                &format!("{}/{}", key.1, o["metadata"]["name"]),
                &mut errs,
            );
            assert!(errs.is_empty(), "{errs:#?}");
            checked += 1;
        }
        assert_eq!(checked, 10, "CIS, CD, ACI, InfraEnv, 2 NMStateConfigs, 4 Agents");
        // The checker itself catches a bad object.
        let mut bad = set.objects[5].clone();
        bad["spec"]["networking"]["networkType"] = json!("Flannel");
        bad.as_object_mut().unwrap().remove("metadata");
        let mut errs = vec![];
        check(
            &schemas[&(
                "extensions.hive.openshift.io/v1beta1".to_string(),
                "AgentClusterInstall".to_string(),
            )],
            &bad,
            "aci",
            &mut errs,
        );
        assert!(errs.iter().any(|e| e.contains("Flannel")), "{errs:?}");
    }

    fn expected_ids() -> (Vec<String>, Vec<String>) {
        (
            vec![IE.to_string()],
            (0..4)
                .map(|i| format!("aaaaaaaa-0000-0000-0000-00000000000{i}"))
                .collect(),
        )
    }

    fn check_built(objects: &[Value]) -> Result<(), Error> {
        let (ies, hosts) = expected_ids();
        check_set(
            objects,
            &ExpectedSet {
                cluster_id: CID,
                cluster_name: "Agent_Cluster",
                openshift_version: "4.18.3",
                release_image: "quay.io/openshift-release-dev/ocp-release:4.18.3-x86_64",
                infra_env_ids: &ies,
                host_ids: &hosts,
            },
        )
    }

    #[test]
    fn names_follow_one_rule() {
        let n = CrNames::new("Agent_Cluster", "4.18.3").unwrap();
        assert_eq!(n.cd, "agent-cluster");
        assert_eq!(n.pull_secret, "agent-cluster-pull-secret");
        assert_eq!(n.admin_kubeconfig, "agent-cluster-admin-kubeconfig");
        assert_eq!(n.admin_password, "agent-cluster-admin-password");
        assert_eq!(n.image_set, "openshift-4.18.3");
        assert!(CrNames::new("__", "4").is_none());
        assert!(is_dns1123_label("a--b"));
        assert!(!is_dns1123_label("-a") && !is_dns1123_label("A") && !is_dns1123_label(""));
        assert!(!is_dns1123_label(&"a".repeat(64)));
        assert!(is_dns1123_subdomain("openshift-4.18.3"));
        assert!(!is_dns1123_subdomain("../x") && !is_dns1123_subdomain("a..b"));
    }

    /// What export builds passes; every edit a crafted bundle could make is refused with
    /// exit 3 naming the object.
    #[test]
    fn check_set_accepts_exactly_what_build_makes() {
        let good = built().objects;
        check_built(&good).unwrap();
        let cid_ann = json!({ MIGRATION_ANNOTATION: CID });
        let refused = |what: &str, objects: Vec<Value>, needle: &str| {
            let e = check_built(&objects).expect_err(what);
            assert_eq!(e.exit_code(), 3, "{what}: {e}");
            assert!(e.to_string().contains(needle), "{what}: {e}");
        };
        let with = |extra: Value| {
            let mut v = good.clone();
            v.push(extra);
            v
        };
        let edit = |kind: &str, f: &dyn Fn(&mut Value)| {
            let mut v = good.clone();
            f(v.iter_mut().find(|o| o["kind"] == kind).unwrap());
            v
        };
        refused(
            "extra ClusterImageSet",
            with(
                json!({"apiVersion": "hive.openshift.io/v1", "kind": "ClusterImageSet",
                        "metadata": {"name": "img4.99.0-x86-64-appsub", "annotations": cid_ann},
                        "spec": {"releaseImage": "evil.example.com/ocp-release:4.99"}}),
            ),
            "the bundle's ClusterImageSet is openshift-4.18.3",
        );
        refused(
            "evil releaseImage",
            edit("ClusterImageSet", &|o| {
                o["spec"]["releaseImage"] = json!("evil/x:1")
            }),
            "spec.releaseImage must be",
        );
        refused(
            "ConfigMap",
            with(json!({"apiVersion": "v1", "kind": "ConfigMap",
                        "metadata": {"name": "assisted-service-config", "annotations": cid_ann}, "data": {}})),
            "kind \"ConfigMap\"",
        );
        refused(
            "record ConfigMap",
            with(json!({"apiVersion": "v1", "kind": "ConfigMap",
                        "metadata": {"name": "agent-day2-migration", "annotations": cid_ann}, "data": {}})),
            "is not one export makes",
        );
        refused(
            "sa token Secret",
            with(
                json!({"apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/service-account-token",
                        "metadata": {"name": "sa-token", "annotations": cid_ann}}),
            ),
            "the bundle's Secrets are",
        );
        refused(
            "token type on a known name",
            edit("Secret", &|o| {
                o["type"] = json!("kubernetes.io/service-account-token")
            }),
            ".type must be",
        );
        refused(
            "namespace set",
            edit("Secret", &|o| o["metadata"]["namespace"] = json!("kube-system")),
            "metadata.namespace is set",
        );
        refused("duplicate", with(good[0].clone()), "appears twice");
        refused(
            "CD renamed to a system namespace",
            edit("ClusterDeployment", &|o| {
                o["metadata"]["name"] = json!("multicluster-engine")
            }),
            "the ClusterDeployment is named agent-cluster",
        );
        refused(
            "bad name",
            edit("Secret", &|o| {
                o["metadata"]["name"] = json!("../../x\u{1b}]0;PWNED")
            }),
            "not a DNS-1123 subdomain",
        );
        refused(
            "extra annotation",
            edit("Secret", &|o| {
                o["metadata"]["annotations"]["kubernetes.io/service-account.name"] = json!("default")
            }),
            "kubernetes.io/service-account.name",
        );
        refused(
            "ACI manifests ConfigMap",
            edit("AgentClusterInstall", &|o| {
                o["spec"]["manifestsConfigMapRef"] = json!({"name": "x"})
            }),
            "spec.manifestsConfigMapRef",
        );
        refused(
            "Agent of another host",
            edit("Agent", &|o| {
                o["metadata"]["name"] = json!("bbbbbbbb-0000-0000-0000-000000000000")
            }),
            "not one of the manifest's host ids",
        );
        refused(
            "Agent missing",
            good.iter()
                .filter(|o| o["kind"] != "Agent" || o["metadata"]["name"] != expected_ids().1[0])
                .cloned()
                .collect(),
            "calls for 4",
        );
        refused(
            "Agent of another cluster",
            edit("Agent", &|o| {
                o["spec"]["clusterDeploymentName"]["name"] = json!("other")
            }),
            "clusterDeploymentName.name",
        );
        refused(
            "NMStateConfig label",
            edit("NMStateConfig", &|o| {
                o["metadata"]["labels"] = json!({INFRAENV_LABEL: "nope"})
            }),
            "naming one of the bundle's InfraEnvs",
        );
        refused(
            "owner references",
            edit("InfraEnv", &|o| o["metadata"]["ownerReferences"] = json!([])),
            "metadata.ownerReferences",
        );
        refused(
            "annotation of another cluster",
            edit("InfraEnv", &|o| {
                o["metadata"]["annotations"][MIGRATION_ANNOTATION] = json!("x")
            }),
            "is not this bundle's cluster",
        );
        // "Agent missing" says how many: one fewer than the manifest's.
        let e = check_built(&good[..good.len() - 1]).unwrap_err();
        assert!(
            e.to_string()
                .contains("3 Agent object(s), the manifest calls for 4"),
            "{e}"
        );
    }
}
