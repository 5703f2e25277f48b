//! The objects a new simulated cluster starts with: an OpenShift 4.18 compact bare-metal
//! cluster installed with the agent-based installer by default; the [`Scenario`] changes it.
//!
//! The seed holds what docs/design.md ("What the cluster tells us") says the plugin reads,
//! shaped as a real cluster has it: ClusterVersion `version`, Infrastructure/DNS/Network/
//! Proxy/Image/Ingress `cluster`, the pull secret, `kube-system/cluster-config-v1`,
//! `coreos-bootimages` (a CoreOS stream naming the simulator's own base ISO and PXE files with
//! their true sha256), the worker pointer Ignition secrets, the MachineConfigs for SSH, FIPS
//! and chrony, the MachineConfigPools and the control-plane Nodes. Facts that follow real
//! clusters rather than the obvious: `99-<role>-fips` exists only on FIPS clusters (the
//! installer adds it only when `fips: true`); `Proxy.status.noProxy` is the computed list
//! (cluster, service and machine networks, `.cluster.local`, `.svc`, `127.0.0.1`,
//! `localhost`, the api-int name, plus the user's entries, sorted) and is empty without a
//! proxy; `cluster-config-v1`'s install-config carries no pull secret (the installer strips it).

use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine;
use serde_json::{json, Value};
use sha2::Digest;

use crate::baseiso::{self, BaseIsoInfo};
use crate::scenario::Scenario;

/// What the seed needs to know about the running simulator.
#[derive(Debug, Clone)]
pub struct SeedContext {
    /// URL clients use for the API, e.g. `https://192.168.111.5:6443`.
    pub api_url: String,
    /// Base URL of the simulator's plain-HTTP file server, e.g. `http://192.168.111.5:8080`.
    pub files_base_url: String,
    /// The base ISO served by the file server (for the control plane's architecture).
    pub base_iso: BaseIsoInfo,
    /// PEM of the simulator's CA (also used as the Machine Config Server CA).
    pub ca_pem: String,
}

/// The default machine network (IPv4) and, for dual-stack, IPv6.
pub const MACHINE_NETWORK_V4: &str = "192.168.111.0/24";
pub const MACHINE_NETWORK_V6: &str = "fd2e:6f44:5dd8:c956::/120";
/// Control-plane node addresses (`master-N` gets index N).
pub const MASTER_IPS_V4: [&str; 3] = ["192.168.111.20", "192.168.111.21", "192.168.111.22"];
pub const MASTER_IPS_V6: [&str; 3] = [
    "fd2e:6f44:5dd8:c956::14",
    "fd2e:6f44:5dd8:c956::15",
    "fd2e:6f44:5dd8:c956::16",
];
/// API and ingress VIPs of the default bare-metal platform.
pub const API_VIP: &str = "192.168.111.5";
pub const INGRESS_VIP: &str = "192.168.111.4";

/// Go architecture name (amd64, arm64, ...) for a Go or RPM spelling.
pub fn go_arch(a: &str) -> &str {
    match a {
        "x86_64" | "amd64" => "amd64",
        "aarch64" | "arm64" => "arm64",
        "ppc64le" => "ppc64le",
        "s390x" => "s390x",
        other => other,
    }
}

/// RPM architecture name (x86_64, aarch64, ...) for a Go or RPM spelling.
pub fn rpm_arch(a: &str) -> &str {
    match a {
        "x86_64" | "amd64" => "x86_64",
        "aarch64" | "arm64" => "aarch64",
        other => other,
    }
}

/// The fake but well-formed digest of the release image of `version` for `arch`
/// (`multi` for a multi-arch payload): hex sha256 of `ocp-release:<version>-<arch>`.
pub fn release_digest(version: &str, arch: &str) -> String {
    hex::encode(sha2::Sha256::digest(
        format!("ocp-release:{version}-{arch}").as_bytes(),
    ))
}

/// Mirror registry of a disconnected scenario (`registry.example.com:5000` by default).
pub fn mirror_registry(s: &Scenario) -> String {
    s.mirror_registry
        .clone()
        .unwrap_or_else(|| "registry.example.com:5000".into())
}

fn payload_arch(s: &Scenario) -> &str {
    if s.multi_arch {
        "multi"
    } else {
        rpm_arch(&s.architecture)
    }
}

/// Pull spec of the release image of `version` as this scenario's cluster records it.
pub fn release_image_for(s: &Scenario, version: &str) -> String {
    let digest = release_digest(version, payload_arch(s));
    if s.disconnected {
        format!("{}/ocp4/openshift4@sha256:{digest}", mirror_registry(s))
    } else {
        format!("quay.io/openshift-release-dev/ocp-release@sha256:{digest}")
    }
}

/// The current (Completed) release image: `scenario.release_image` or [`release_image_for`].
pub fn release_image(s: &Scenario) -> String {
    s.release_image
        .clone()
        .unwrap_or_else(|| release_image_for(s, &s.version))
}

/// Platform type in the Infrastructure spelling (BareMetal, None, External, VSphere, ...).
pub fn platform_type(s: &Scenario) -> String {
    match s.platform.to_ascii_lowercase().as_str() {
        "baremetal" => "BareMetal".into(),
        "none" | "" => "None".into(),
        "external" => "External".into(),
        "vsphere" => "VSphere".into(),
        "aws" => "AWS".into(),
        "gcp" => "GCP".into(),
        "azure" => "Azure".into(),
        "nutanix" => "Nutanix".into(),
        "openstack" => "OpenStack".into(),
        _ => s.platform.clone(),
    }
}

/// The machine networks: `scenario.machine_networks`, else none on platforms None/External,
/// else 192.168.111.0/24 (plus fd2e:6f44:5dd8:c956::/120 for dual-stack).
pub fn machine_networks(s: &Scenario) -> Vec<String> {
    if let Some(n) = &s.machine_networks {
        return n.clone();
    }
    match platform_type(s).as_str() {
        "None" | "External" => Vec::new(),
        _ => {
            let mut v = vec![MACHINE_NETWORK_V4.to_string()];
            if s.dual_stack {
                v.push(MACHINE_NETWORK_V6.to_string());
            }
            v
        }
    }
}

fn cluster_networks(s: &Scenario) -> Vec<(String, u32)> {
    let mut v = vec![("10.128.0.0/14".to_string(), 23)];
    if s.dual_stack {
        v.push(("fd01::/48".to_string(), 64));
    }
    v
}

fn service_networks(s: &Scenario) -> Vec<String> {
    let mut v = vec!["172.30.0.0/16".to_string()];
    if s.dual_stack {
        v.push("fd02::/112".to_string());
    }
    v
}

/// The default SSH key: a well-formed ed25519 public key with a fixed fake key.
pub fn default_ssh_key() -> String {
    let mut blob = Vec::new();
    blob.extend_from_slice(&11u32.to_be_bytes());
    blob.extend_from_slice(b"ssh-ed25519");
    blob.extend_from_slice(&32u32.to_be_bytes());
    blob.extend_from_slice(&sha2::Sha256::digest(b"agent-day2-sim core user"));
    format!("ssh-ed25519 {} core@agent-day2-sim", B64.encode(blob))
}

fn ssh_key(s: &Scenario) -> String {
    s.ssh_key.clone().unwrap_or_else(default_ssh_key)
}

/// Kubernetes minor of an OpenShift 4.x release (4.18 → 31): the kubelet version nodes report.
fn kube_minor(version: &str) -> u32 {
    let minor: u32 = version
        .split('.')
        .nth(1)
        .and_then(|m| m.parse().ok())
        .unwrap_or(18);
    minor + 13
}

fn ns(name: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name,
        "labels": {"kubernetes.io/metadata.name": name, "openshift.io/run-level": if name.starts_with("openshift-") || name == "kube-system" { "0" } else { "" }}}})
}

fn data_url(text: &str) -> String {
    format!("data:text/plain;charset=utf-8;base64,{}", B64.encode(text))
}

fn secret(ns: &str, name: &str, ty: &str, data: &[(&str, &str)]) -> Value {
    let d: serde_json::Map<String, Value> = data
        .iter()
        .map(|(k, v)| (k.to_string(), Value::String(B64.encode(v))))
        .collect();
    json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": name, "namespace": ns}, "type": ty, "data": d})
}

fn configmap(ns: &str, name: &str, data: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": ns}, "data": data})
}

fn machine_config(name: &str, role: &str, spec: Value) -> Value {
    json!({"apiVersion": "machineconfiguration.openshift.io/v1", "kind": "MachineConfig",
        "metadata": {"name": name, "labels": {"machineconfiguration.openshift.io/role": role}},
        "spec": spec})
}

/// The computed `Proxy.status.noProxy` of a cluster with a proxy (what the cluster network
/// operator writes): the fixed local names, the api-int name, machine, cluster and service
/// networks and the user's entries, deduplicated and sorted, comma separated.
pub fn computed_no_proxy(s: &Scenario, user: Option<&str>) -> String {
    let mut v: Vec<String> = vec![
        ".cluster.local".into(),
        ".svc".into(),
        "127.0.0.1".into(),
        "localhost".into(),
        format!("api-int.{}.{}", s.name, s.base_domain),
    ];
    v.extend(machine_networks(s));
    v.extend(cluster_networks(s).into_iter().map(|(c, _)| c));
    v.extend(service_networks(s));
    if let Some(u) = user {
        v.extend(
            u.split(',')
                .map(|x| x.trim().to_string())
                .filter(|x| !x.is_empty()),
        );
    }
    v.sort();
    v.dedup();
    v.join(",")
}

fn stream_json(s: &Scenario, ctx: &SeedContext) -> anyhow::Result<String> {
    let base = ctx.files_base_url.trim_end_matches('/');
    let own = rpm_arch(&s.architecture).to_string();
    let mut arches = vec![own.clone()];
    if s.multi_arch {
        for other in ["x86_64", "aarch64"] {
            if other != own {
                arches.push(other.to_string());
            }
        }
    }
    let mut archs = serde_json::Map::new();
    for arch in arches {
        let (iso_name, iso_sha) = if arch == own {
            (ctx.base_iso.file_name.clone(), ctx.base_iso.sha256.clone())
        } else {
            // the other architecture's ISO, built by baseiso::build_base_iso into the same root
            let bytes = baseiso::base_iso_bytes(&arch)?;
            (
                baseiso::iso_file_name(&arch),
                hex::encode(sha2::Sha256::digest(&bytes)),
            )
        };
        let art = |(name, data): &(String, Vec<u8>)| json!({"location": format!("{base}/{name}"), "sha256": hex::encode(sha2::Sha256::digest(data))});
        let [k, i, r] = baseiso::pxe_artifacts(&arch);
        archs.insert(
            arch.clone(),
            json!({
                "artifacts": {"metal": {
                    "release": baseiso::RHCOS_RELEASE,
                    "formats": {
                        "iso": {"disk": {"location": format!("{base}/{iso_name}"), "sha256": iso_sha}},
                        "pxe": {"kernel": art(&k), "initramfs": art(&i), "rootfs": art(&r)}
                    }
                }}
            }),
        );
    }
    let minor = s.version.split('.').take(2).collect::<Vec<_>>().join(".");
    let stream = json!({
        "stream": format!("rhcos-{minor}"),
        "metadata": {"last-modified": "2025-01-22T13:27:00Z", "generator": "agent-day2-sim"},
        "architectures": archs,
    });
    Ok(serde_json::to_string_pretty(&stream)?)
}

fn install_config(s: &Scenario) -> anyhow::Result<String> {
    let platform = match platform_type(s).as_str() {
        "BareMetal" => json!({"baremetal": {"apiVIPs": [API_VIP], "ingressVIPs": [INGRESS_VIP]}}),
        "External" => json!({"external": {"platformName": "oci"}}),
        "VSphere" => json!({"vsphere": {"apiVIPs": [API_VIP], "ingressVIPs": [INGRESS_VIP]}}),
        "None" => json!({"none": {}}),
        other => json!({other.to_ascii_lowercase(): {}}),
    };
    let replicas = if s.sno { 1 } else { 3 };
    let mut ic = json!({
        "apiVersion": "v1",
        "baseDomain": s.base_domain,
        "metadata": {"name": s.name},
        "compute": [{"architecture": go_arch(&s.architecture), "hyperthreading": "Enabled", "name": "worker", "platform": {}, "replicas": 0}],
        "controlPlane": {"architecture": go_arch(&s.architecture), "hyperthreading": "Enabled", "name": "master", "platform": {}, "replicas": replicas},
        "networking": {
            "clusterNetwork": cluster_networks(s).into_iter().map(|(c, h)| json!({"cidr": c, "hostPrefix": h})).collect::<Vec<_>>(),
            "machineNetwork": machine_networks(s).into_iter().map(|c| json!({"cidr": c})).collect::<Vec<_>>(),
            "networkType": "OVNKubernetes",
            "serviceNetwork": service_networks(s),
        },
        "platform": platform,
        "publish": "External",
        "sshKey": ssh_key(s),
    });
    if s.fips {
        ic["fips"] = json!(true);
    }
    if let Some(p) = &s.proxy {
        ic["proxy"] = json!({"httpProxy": p.http_proxy, "httpsProxy": p.https_proxy, "noProxy": p.no_proxy});
    }
    if s.disconnected {
        ic["imageDigestSources"] = json!([
            {"mirrors": [format!("{}/ocp4/openshift4", mirror_registry(s))], "source": "quay.io/openshift-release-dev/ocp-release"},
            {"mirrors": [format!("{}/ocp4/openshift4", mirror_registry(s))], "source": "quay.io/openshift-release-dev/ocp-v4.0-art-dev"},
        ]);
    }
    Ok(serde_saphyr::to_string(&ic)?)
}

fn node(s: &Scenario, i: usize) -> Value {
    let name = format!("master-{i}");
    let mut addresses = vec![json!({"type": "InternalIP", "address": MASTER_IPS_V4[i]})];
    if s.dual_stack {
        addresses.push(json!({"type": "InternalIP", "address": MASTER_IPS_V6[i]}));
    }
    addresses.push(json!({"type": "Hostname", "address": name}));
    let arch = go_arch(&s.architecture).to_string();
    let mut labels = json!({
        "beta.kubernetes.io/arch": arch, "beta.kubernetes.io/os": "linux",
        "kubernetes.io/arch": arch, "kubernetes.io/hostname": name, "kubernetes.io/os": "linux",
        "node-role.kubernetes.io/control-plane": "", "node-role.kubernetes.io/master": "",
        "node.openshift.io/os_id": "rhcos",
    });
    if s.sno {
        labels["node-role.kubernetes.io/worker"] = json!("");
    }
    let kminor = kube_minor(&s.version);
    let taints = if s.sno {
        json!([])
    } else {
        json!([{"effect": "NoSchedule", "key": "node-role.kubernetes.io/master"}])
    };
    json!({
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": name, "labels": labels, "annotations": {
            "machineconfiguration.openshift.io/state": "Done",
            "machineconfiguration.openshift.io/currentConfig": "rendered-master-0f6b9e9a1d0c5e3b7a2f4c8d1e6b3a90",
        }},
        "spec": {"taints": taints},
        "status": {
            "addresses": addresses,
            "capacity": {"cpu": "8", "memory": "32827900Ki", "pods": "250", "ephemeral-storage": "125293548Ki"},
            "allocatable": {"cpu": "7500m", "memory": "31676924Ki", "pods": "250", "ephemeral-storage": "114396791822"},
            "conditions": [
                {"type": "MemoryPressure", "status": "False", "reason": "KubeletHasSufficientMemory", "message": "kubelet has sufficient memory available", "lastHeartbeatTime": "2025-02-01T10:00:00Z", "lastTransitionTime": "2025-02-01T09:00:00Z"},
                {"type": "DiskPressure", "status": "False", "reason": "KubeletHasNoDiskPressure", "message": "kubelet has no disk pressure", "lastHeartbeatTime": "2025-02-01T10:00:00Z", "lastTransitionTime": "2025-02-01T09:00:00Z"},
                {"type": "PIDPressure", "status": "False", "reason": "KubeletHasSufficientPID", "message": "kubelet has sufficient PID available", "lastHeartbeatTime": "2025-02-01T10:00:00Z", "lastTransitionTime": "2025-02-01T09:00:00Z"},
                {"type": "Ready", "status": "True", "reason": "KubeletReady", "message": "kubelet is posting ready status", "lastHeartbeatTime": "2025-02-01T10:00:00Z", "lastTransitionTime": "2025-02-01T09:00:00Z"},
            ],
            "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
            "nodeInfo": {
                "architecture": arch,
                "bootID": format!("7d3c1e2a-0b4f-4c6d-9e8a-{:012x}", i),
                "containerRuntimeVersion": format!("cri-o://1.{kminor}.6-3.rhaos4.{}.git1a2b3c4.el9", kminor - 13),
                "kernelVersion": "5.14.0-427.50.1.el9_4.x86_64".replace("x86_64", rpm_arch(&s.architecture)),
                "kubeProxyVersion": "",
                "kubeletVersion": format!("v1.{kminor}.6"),
                "machineID": hex::encode(&sha2::Sha256::digest(name.as_bytes())[..16]),
                "operatingSystem": "linux",
                "osImage": format!("Red Hat Enterprise Linux CoreOS {} (Plow)", baseiso::RHCOS_RELEASE),
                "systemUUID": format!("4c4c4544-0042-3510-8052-{:012x}", 0xb4c04f4d3332u64 + i as u64),
            },
        }
    })
}

fn mcp(role: &str, count: usize) -> Value {
    json!({
        "apiVersion": "machineconfiguration.openshift.io/v1", "kind": "MachineConfigPool",
        "metadata": {"name": role, "labels": {"machineconfiguration.openshift.io/mco-built-in": "", format!("pools.operator.machineconfiguration.openshift.io/{role}"): ""}},
        "spec": {
            "machineConfigSelector": {"matchLabels": {"machineconfiguration.openshift.io/role": role}},
            "nodeSelector": {"matchLabels": {format!("node-role.kubernetes.io/{role}"): ""}},
            "paused": false,
        },
        "status": {
            "configuration": {"name": format!("rendered-{role}-0f6b9e9a1d0c5e3b7a2f4c8d1e6b3a90")},
            "machineCount": count, "readyMachineCount": count, "updatedMachineCount": count, "degradedMachineCount": 0,
            "conditions": [{"type": "Updated", "status": "True", "reason": "", "message": format!("All nodes are updated with rendered-{role}-0f6b9e9a1d0c5e3b7a2f4c8d1e6b3a90"), "lastTransitionTime": "2025-02-01T09:30:00Z"}],
            "observedGeneration": 2,
        }
    })
}

/// Plural resource name of a kind, as `scenario.omit` spells it.
pub fn plural(kind: &str) -> String {
    let k = kind.to_ascii_lowercase();
    match k.as_str() {
        "dns" => "dnses".into(),
        "proxy" => "proxies".into(),
        "ingress" => "ingresses".into(),
        "imagecontentsourcepolicy" => "imagecontentsourcepolicies".into(),
        _ if k.ends_with('s') => format!("{k}es"),
        _ if k.ends_with('y') => format!("{}ies", &k[..k.len() - 1]),
        _ => format!("{k}s"),
    }
}

fn identity(o: &Value) -> (String, String, String, String) {
    let api = o["apiVersion"].as_str().unwrap_or("");
    let group = api.rsplit_once('/').map(|(g, _)| g).unwrap_or("").to_string();
    (
        group,
        o["kind"].as_str().unwrap_or("").to_string(),
        o["metadata"]["namespace"].as_str().unwrap_or("").to_string(),
        o["metadata"]["name"].as_str().unwrap_or("").to_string(),
    )
}

fn omitted(o: &Value, omit: &[String]) -> bool {
    let (_, kind, ns, name) = identity(o);
    let res = plural(&kind);
    omit.iter().any(|spec| {
        let parts: Vec<&str> = spec.split('/').collect();
        let r = parts[0].split('.').next().unwrap_or("").to_ascii_lowercase();
        if r != res {
            return false;
        }
        match parts.as_slice() {
            [_, n] => ns.is_empty() && *n == name,
            [_, s, n] => *s == ns && *n == name,
            [_] => true,
            _ => false,
        }
    })
}

/// A Secret's `stringData` moved into base64 `data`, as the API server does on create.
fn normalise(mut o: Value) -> Value {
    if o["kind"] == "Secret" && o["apiVersion"] == "v1" {
        if let Some(sd) = o.as_object_mut().and_then(|m| m.remove("stringData")) {
            if let Some(map) = sd.as_object() {
                if !o["data"].is_object() {
                    o["data"] = json!({});
                }
                for (k, v) in map {
                    o["data"][k] = json!(B64.encode(v.as_str().unwrap_or_default()));
                }
            }
        }
    }
    o
}

/// Loads every `*.yaml`/`*.yml` file of `dir` (sorted by name; multi-document files allowed),
/// with `$TEST_IMAGE` replaced by `release_image`. Errors name the file.
pub fn load_objects_dir(dir: &std::path::Path, release_image: &str) -> anyhow::Result<Vec<Value>> {
    let mut files: Vec<_> = std::fs::read_dir(dir)
        .map_err(|e| anyhow::anyhow!("scenario objectsDir {}: {e}", dir.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| matches!(p.extension().and_then(|x| x.to_str()), Some("yaml" | "yml")))
        .collect();
    files.sort();
    let mut out = Vec::new();
    for f in files {
        let text =
            std::fs::read_to_string(&f).map_err(|e| anyhow::anyhow!("cannot read {}: {e}", f.display()))?;
        let text = text.replace("$TEST_IMAGE", release_image);
        let docs: Vec<Value> =
            serde_saphyr::from_multiple(&text).map_err(|e| anyhow::anyhow!("{}: {e}", f.display()))?;
        for d in docs {
            if d.is_null() {
                continue;
            }
            if !d["kind"].is_string() || !d["metadata"]["name"].is_string() {
                anyhow::bail!("{}: an object without kind or metadata.name", f.display());
            }
            out.push(d);
        }
    }
    Ok(out)
}

/// The seeded objects, in creation order (namespaces first). Each is a full object with
/// apiVersion, kind and metadata; the server assigns uid, resourceVersion and timestamps.
/// `scenario.omit` removes objects, `scenario.objects` and then `scenario.objects_dir` add
/// objects or replace a seeded one with the same API group, kind, namespace and name (in its
/// place). Errors: an unreadable or malformed `objects_dir` file, an `objects` entry without
/// kind or name.
pub fn seed_objects(scenario: &Scenario, ctx: &SeedContext) -> anyhow::Result<Vec<Value>> {
    seed_objects_with_registry(scenario, ctx, None)
}

/// The simulator's own container registry (`up --registry`, see [`crate::registry`]), as the
/// seed records it.
#[derive(Debug, Clone)]
pub struct SeedRegistry {
    /// `host:port`, e.g. `192.168.111.6:5000`.
    pub host: String,
    /// The htpasswd user and password the registry accepts.
    pub user: String,
    pub password: String,
}

/// [`seed_objects`] for a simulator that runs its own registry: the pull secret gets an entry
/// for `registry.host` with its user and password, and `Image.spec.additionalTrustedCA` names
/// the ConfigMap `openshift-config/registry-ca` whose key `<host>..<port>` holds the
/// simulator's CA (the registry's certificate is signed by it), connected or not, as on a
/// cluster that pulls from a private registry. The release image itself comes from
/// `scenario.release_image`, which `up` sets to the pushed digest.
pub fn seed_objects_with_registry(
    scenario: &Scenario,
    ctx: &SeedContext,
    registry: Option<&SeedRegistry>,
) -> anyhow::Result<Vec<Value>> {
    let s = scenario;
    let platform = platform_type(s);
    let api_name = format!("api.{}.{}", s.name, s.base_domain);
    let api_int = format!("api-int.{}.{}", s.name, s.base_domain);
    let release = release_image(s);
    let mnets = machine_networks(s);
    let mut objs: Vec<Value> = Vec::new();

    for n in [
        "default",
        "kube-system",
        "openshift-config",
        "openshift-config-managed",
        "openshift-cluster-version",
        "openshift-machine-api",
        "openshift-machine-config-operator",
    ] {
        objs.push(ns(n));
    }

    // ClusterVersion
    let desired_arch = if s.multi_arch && s.multi_arch_in_api {
        "Multi"
    } else {
        ""
    };
    let mut history = Vec::new();
    let mut desired = json!({"version": s.version, "image": release, "url": format!("https://access.redhat.com/errata/RHSA-2025:0{}", s.version.replace('.', ""))});
    if let Some(up) = &s.upgrade_to {
        let up_image = release_image_for(s, up);
        history.push(json!({"state": "Partial", "version": up, "image": up_image, "startedTime": "2025-03-01T08:00:00Z", "completionTime": null, "verified": true, "acceptedRisks": ""}));
        desired = json!({"version": up, "image": up_image});
    }
    history.push(json!({"state": "Completed", "version": s.version, "image": release, "startedTime": "2025-02-01T08:00:00Z", "completionTime": "2025-02-01T09:30:00Z", "verified": false}));
    // A multi-arch cluster as a Default-feature-set 4.18 cluster shows it: the ClusterVersion
    // CRD has no `status.desired.architecture` there (openshift/api gates it behind
    // ImageStreamImportMode, TechPreview only; the real server prunes it), so the cluster says it
    // in `spec.desiredUpdate`, as `oc adm upgrade --to-multi-arch` leaves it (architecture
    // Multi, the desired version, no image).
    let mut cv_spec = json!({"clusterID": s.cluster_id, "channel": format!("stable-{}", s.version.split('.').take(2).collect::<Vec<_>>().join("."))});
    if !desired_arch.is_empty() {
        cv_spec["desiredUpdate"] =
            json!({"architecture": desired_arch, "version": desired["version"], "force": false});
    }
    let progressing = s.upgrade_to.is_some();
    objs.push(json!({
        "apiVersion": "config.openshift.io/v1", "kind": "ClusterVersion",
        "metadata": {"name": "version"},
        "spec": cv_spec,
        "status": {
            "desired": desired,
            "history": history,
            "observedGeneration": 2,
            "versionHash": "NC4xOC4xMi1zaW0K",
            "availableUpdates": null,
            "conditions": [
                {"type": "Available", "status": "True", "lastTransitionTime": "2025-02-01T09:30:00Z", "message": format!("Done applying {}", s.version)},
                {"type": "Failing", "status": "False", "lastTransitionTime": "2025-02-01T09:30:00Z"},
                {"type": "Progressing", "status": if progressing { "True" } else { "False" }, "lastTransitionTime": "2025-02-01T09:30:00Z",
                 "message": if progressing { format!("Working towards {}", s.upgrade_to.as_deref().unwrap_or("")) } else { format!("Cluster version is {}", s.version) }},
            ],
        }
    }));

    // Infrastructure
    let topology = if s.sno { "SingleReplica" } else { "HighlyAvailable" };
    let mut platform_spec = json!({"type": platform});
    let mut platform_status = json!({"type": platform});
    match platform.as_str() {
        "BareMetal" => {
            platform_spec["baremetal"] = json!({"apiServerInternalIPs": [API_VIP], "ingressIPs": [INGRESS_VIP], "machineNetworks": mnets});
            platform_status["baremetal"] = json!({"apiServerInternalIP": API_VIP, "apiServerInternalIPs": [API_VIP], "ingressIP": INGRESS_VIP, "ingressIPs": [INGRESS_VIP], "machineNetworks": mnets, "loadBalancer": {"type": "OpenShiftManagedDefault"}});
        }
        "External" => {
            platform_spec["external"] = json!({"platformName": "oci"});
            platform_status["external"] = json!({"cloudControllerManager": {"state": "External"}});
        }
        "VSphere" => {
            platform_spec["vsphere"] = json!({"apiServerInternalIPs": [API_VIP], "ingressIPs": [INGRESS_VIP], "machineNetworks": mnets});
            platform_status["vsphere"] = json!({"apiServerInternalIP": API_VIP, "apiServerInternalIPs": [API_VIP], "ingressIP": INGRESS_VIP, "ingressIPs": [INGRESS_VIP], "machineNetworks": mnets});
        }
        _ => {}
    }
    let infra_name = format!(
        "{}-{}",
        s.name,
        &hex::encode(sha2::Sha256::digest(s.cluster_id.as_bytes()))[..5]
    );
    objs.push(json!({
        "apiVersion": "config.openshift.io/v1", "kind": "Infrastructure", "metadata": {"name": "cluster"},
        "spec": {"cloudConfig": {"name": ""}, "platformSpec": platform_spec},
        "status": {
            "apiServerURL": format!("https://{api_name}:6443"),
            "apiServerInternalURI": format!("https://{api_int}:6443"),
            "controlPlaneTopology": topology,
            "infrastructureTopology": topology,
            "cpuPartitioning": "None",
            "etcdDiscoveryDomain": "",
            "infrastructureName": infra_name,
            "platform": platform,
            "platformStatus": platform_status,
        }
    }));
    objs.push(json!({
        "apiVersion": "config.openshift.io/v1", "kind": "DNS", "metadata": {"name": "cluster"},
        "spec": {"baseDomain": format!("{}.{}", s.name, s.base_domain), "platform": {"type": ""}},
        "status": {}
    }));
    objs.push(json!({
        "apiVersion": "config.openshift.io/v1", "kind": "Ingress", "metadata": {"name": "cluster"},
        "spec": {"domain": format!("apps.{}.{}", s.name, s.base_domain)},
        "status": {}
    }));
    let cn: Vec<Value> = cluster_networks(s)
        .into_iter()
        .map(|(c, h)| json!({"cidr": c, "hostPrefix": h}))
        .collect();
    objs.push(json!({
        "apiVersion": "config.openshift.io/v1", "kind": "Network", "metadata": {"name": "cluster"},
        "spec": {"clusterNetwork": cn, "serviceNetwork": service_networks(s), "networkType": "OVNKubernetes", "externalIP": {"policy": {}}},
        "status": {"clusterNetwork": cn, "serviceNetwork": service_networks(s), "networkType": "OVNKubernetes", "clusterNetworkMTU": 1400}
    }));

    // Proxy (+ its trust bundle)
    let mut proxy_spec = json!({"trustedCA": {"name": ""}});
    let mut proxy_status = json!({});
    if let Some(p) = &s.proxy {
        if let Some(v) = &p.http_proxy {
            proxy_spec["httpProxy"] = json!(v);
            proxy_status["httpProxy"] = json!(v);
        }
        if let Some(v) = &p.https_proxy {
            proxy_spec["httpsProxy"] = json!(v);
            proxy_status["httpsProxy"] = json!(v);
        }
        if let Some(v) = &p.no_proxy {
            proxy_spec["noProxy"] = json!(v);
        }
        if p.http_proxy.is_some() || p.https_proxy.is_some() {
            proxy_status["noProxy"] = json!(computed_no_proxy(s, p.no_proxy.as_deref()));
        }
        if let Some(ca) = &p.trusted_ca {
            proxy_spec["trustedCA"] = json!({"name": ca});
            objs.push(configmap(
                "openshift-config",
                ca,
                json!({"ca-bundle.crt": ctx.ca_pem}),
            ));
        }
    }
    objs.push(json!({"apiVersion": "config.openshift.io/v1", "kind": "Proxy", "metadata": {"name": "cluster"}, "spec": proxy_spec, "status": proxy_status}));

    // Image, mirrors
    let mirror = mirror_registry(s);
    let mut image_spec = json!({});
    let mut registry_cas = serde_json::Map::new();
    if s.disconnected {
        registry_cas.insert(mirror.replace(':', ".."), json!(ctx.ca_pem));
    }
    if let Some(r) = registry {
        registry_cas.insert(r.host.replace(':', ".."), json!(ctx.ca_pem));
    }
    if !registry_cas.is_empty() {
        image_spec["additionalTrustedCA"] = json!({"name": "registry-ca"});
        objs.push(configmap(
            "openshift-config",
            "registry-ca",
            Value::Object(registry_cas),
        ));
    }
    objs.push(json!({
        "apiVersion": "config.openshift.io/v1", "kind": "Image", "metadata": {"name": "cluster"},
        "spec": image_spec,
        "status": {"internalRegistryHostname": "image-registry.openshift-image-registry.svc:5000"}
    }));
    if s.disconnected {
        let m = format!("{mirror}/ocp4/openshift4");
        objs.push(json!({
            "apiVersion": "config.openshift.io/v1", "kind": "ImageDigestMirrorSet", "metadata": {"name": "image-digest-mirror"},
            "spec": {"imageDigestMirrors": [
                {"mirrors": [m], "source": "quay.io/openshift-release-dev/ocp-release"},
                {"mirrors": [m], "source": "quay.io/openshift-release-dev/ocp-v4.0-art-dev"},
            ]}
        }));
    }

    // pull secret: fake but well-formed
    let auth = |user: &str| B64.encode(format!("{user}:sim-password-not-a-secret"));
    let mut auths = json!({
        "cloud.openshift.com": {"auth": auth("sim+cloud"), "email": "admin@example.com"},
        "quay.io": {"auth": auth("sim+quay"), "email": "admin@example.com"},
        "registry.connect.redhat.com": {"auth": auth("sim-connect"), "email": "admin@example.com"},
        "registry.redhat.io": {"auth": auth("sim-rh"), "email": "admin@example.com"},
    });
    if s.disconnected {
        auths[&mirror] = json!({"auth": auth("mirror"), "email": "admin@example.com"});
    }
    if let Some(r) = registry {
        auths[&r.host] =
            json!({"auth": B64.encode(format!("{}:{}", r.user, r.password)), "email": "admin@example.com"});
    }
    let pull = serde_json::to_string(&json!({"auths": auths}))?;
    objs.push(secret(
        "openshift-config",
        "pull-secret",
        "kubernetes.io/dockerconfigjson",
        &[(".dockerconfigjson", &pull)],
    ));

    objs.push(configmap(
        "kube-system",
        "cluster-config-v1",
        json!({"install-config": install_config(s)?}),
    ));
    objs.push(configmap(
        "openshift-machine-config-operator",
        "coreos-bootimages",
        json!({
            "releaseVersion": s.version,
            "stream": stream_json(s, ctx)?,
        }),
    ));

    // worker pointer Ignition
    let pointer = serde_json::to_string(&json!({
        "ignition": {
            "config": {"merge": [{"source": format!("https://{api_int}:22623/config/worker")}]},
            "security": {"tls": {"certificateAuthorities": [{"source": format!("data:text/plain;charset=utf-8;base64,{}", B64.encode(&ctx.ca_pem))}]}},
            "version": "3.2.0"
        }
    }))?;
    for name in ["worker-user-data-managed", "worker-user-data"] {
        objs.push(secret(
            "openshift-machine-api",
            name,
            "Opaque",
            &[("disableTemplating", "true"), ("userData", &pointer)],
        ));
    }

    // MachineConfigs
    for role in ["master", "worker"] {
        objs.push(machine_config(&format!("99-{role}-ssh"), role, json!({
            "config": {"ignition": {"version": "3.2.0"}, "passwd": {"users": [{"name": "core", "sshAuthorizedKeys": [ssh_key(s)]}]}},
            "extensions": null, "fips": false, "kernelArguments": null, "kernelType": "", "osImageURL": ""
        })));
        if s.fips {
            objs.push(machine_config(
                &format!("99-{role}-fips"),
                role,
                json!({
                    "config": {"ignition": {"version": "3.2.0"}}, "fips": true
                }),
            ));
        }
    }
    let ntp = s
        .ntp_servers
        .clone()
        .unwrap_or_else(|| vec!["192.168.111.1".into()]);
    if !ntp.is_empty() {
        let mut chrony = String::new();
        for server in &ntp {
            chrony.push_str(&format!("server {server} iburst\n"));
        }
        chrony.push_str("driftfile /var/lib/chrony/drift\nmakestep 1.0 3\nrtcsync\nlogdir /var/log/chrony\n");
        for (role, roles) in [("master", "masters"), ("worker", "workers")] {
            objs.push(machine_config(&format!("50-{roles}-chrony-configuration"), role, json!({
                "config": {"ignition": {"version": "3.2.0"}, "storage": {"files": [
                    {"path": "/etc/chrony.conf", "mode": 420, "overwrite": true, "user": {"name": "root"}, "contents": {"source": data_url(&chrony)}}
                ]}}
            })));
        }
    }
    let masters = if s.sno { 1 } else { 3 };
    objs.push(mcp("master", masters));
    objs.push(mcp("worker", 0));
    for i in 0..masters {
        objs.push(node(s, i));
    }

    // omit, then extra objects (replace in place, else append)
    objs.retain(|o| !omitted(o, &s.omit));
    let mut extra: Vec<Value> = Vec::new();
    for (i, o) in s.objects.iter().enumerate() {
        if !o["kind"].is_string() || !o["metadata"]["name"].is_string() {
            anyhow::bail!("scenario objects[{i}]: kind and metadata.name are required");
        }
        extra.push(serde_json::from_str(
            &serde_json::to_string(o)?.replace("$TEST_IMAGE", &release),
        )?);
    }
    if let Some(dir) = &s.objects_dir {
        extra.extend(load_objects_dir(dir, &release)?);
    }
    for o in extra {
        let o = normalise(o);
        let id = identity(&o);
        match objs.iter().position(|x| identity(x) == id) {
            Some(p) => objs[p] = o,
            None if o["kind"] == "Namespace" => {
                let at = objs.iter().take_while(|x| x["kind"] == "Namespace").count();
                objs.insert(at, o);
            }
            None => objs.push(o),
        }
    }
    Ok(objs)
}

/// Namespace of cluster 0's assisted-service (the multicluster engine's infrastructure operator).
pub const ASSISTED_NAMESPACE: &str = "multicluster-engine";
/// Name of the seeded assisted-service pod (label `app=assisted-service`).
pub const ASSISTED_POD: &str = "assisted-service-5f8c9d7b6-x2x7k";

/// Cluster 0's assisted-service as `up --assisted-db-url` seeds it: Namespace
/// `multicluster-engine`; PersistentVolumeClaims `assisted-service` and `postgres`; Secret
/// `postgres` (`db.host` localhost, `db.name`/`db.user` from the URL, `db.password` the URL's
/// or a random one, `db.port` 5432, as in the pod); the pod [`ASSISTED_POD`] (made Running by master-0's kubelet) (label
/// `app=assisted-service`) with containers `assisted-service`
/// (quay.io/stolostron/assisted-service:latest, the claim `assisted-service` at /data) and
/// `postgres` (quay.io/sclorg/postgresql-16-c9s:latest, the claim `postgres` at
/// /var/lib/pgsql/data), on master-0. Pod exec's `psql` in that container reaches the URL's
/// database ([`crate::api::exec`]).
pub fn assisted_service_objects(db: &crate::api::exec::AssistedDb) -> Vec<Value> {
    let ns_name = ASSISTED_NAMESPACE;
    let password = db.password.clone().unwrap_or_else(|| crate::pki::new_token(16));
    let pvc = |name: &str, size: &str| {
        json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim",
            "metadata": {"name": name, "namespace": ns_name, "labels": {"app": "assisted-service"}},
            "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": size}}}})
    };
    let from_secret = |env: &str, key: &str| json!({"name": env, "valueFrom": {"secretKeyRef": {"name": "postgres", "key": key}}});
    let pod = json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {
            "name": ASSISTED_POD, "namespace": ns_name,
            "labels": {"app": "assisted-service", "pod-template-hash": "5f8c9d7b6"},
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "assisted-service-5f8c9d7b6",
                "uid": "6c1f3b52-7d0e-4a8e-9b61-2f4d5c3a1e90", "controller": true, "blockOwnerDeletion": true}],
        },
        "spec": {
            "nodeName": "master-0",
            "serviceAccountName": "assisted-service",
            "containers": [
                {"name": "assisted-service", "image": "quay.io/stolostron/assisted-service:latest",
                 "ports": [{"containerPort": 8090, "protocol": "TCP"}],
                 "env": [from_secret("DB_HOST", "db.host"), from_secret("DB_NAME", "db.name"),
                         from_secret("DB_USER", "db.user"), from_secret("DB_PASS", "db.password"),
                         from_secret("DB_PORT", "db.port")],
                 "volumeMounts": [{"name": "bucket-filesystem", "mountPath": "/data"}]},
                {"name": "postgres", "image": "quay.io/sclorg/postgresql-16-c9s:latest",
                 "ports": [{"containerPort": 5432, "protocol": "TCP"}],
                 "env": [from_secret("POSTGRESQL_USER", "db.user"), from_secret("POSTGRESQL_PASSWORD", "db.password"),
                         from_secret("POSTGRESQL_DATABASE", "db.name")],
                 "volumeMounts": [{"name": "postgresdb", "mountPath": "/var/lib/pgsql/data"}]},
            ],
            "volumes": [
                {"name": "bucket-filesystem", "persistentVolumeClaim": {"claimName": "assisted-service"}},
                {"name": "postgresdb", "persistentVolumeClaim": {"claimName": "postgres"}},
            ],
        },
    });
    vec![
        ns(ns_name),
        pvc("assisted-service", "10Gi"),
        pvc("postgres", "10Gi"),
        secret(
            ns_name,
            "postgres",
            "Opaque",
            &[
                ("db.host", "localhost"),
                ("db.name", &db.dbname),
                ("db.user", &db.user),
                ("db.password", &password),
                ("db.port", "5432"),
            ],
        ),
        pod,
    ]
}
