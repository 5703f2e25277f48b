//! The facts of [`super::ClusterModel`], one function per fact, each from the objects that
//! hold it (docs/design.md "What the cluster tells us"). Pure: no I/O; what a fact finds wrong
//! goes into [`Findings`] in the order [`super::ClusterModel::from_objects`] reports it.

use std::collections::BTreeMap;

use serde_json::Value;

use super::model::{
    check_base_iso, normalize_arch, ArchitectureInfo, BaseIso, ClusterIdentity, ClusterModel,
    MachineNetworks, McsInfo, MirrorEntry, Mirrors, Networks, NodeAddress, NodeInfo, PlatformInfo, ProxyInfo,
    PullSecret, SshInfo, TrustBundle, Unreadable, UpgradeTarget, VersionInfo, MIN_VERSION,
    SUPPORTED_PLATFORMS,
};
use super::objects::{
    cm_value, count_certs, decode_data_url, missing, secret_value, str_at, strings_at, ClusterObjects,
};
use crate::error::{Error, ResourceRef, Result};

/// ClusterVersion `version`: required.
pub(super) fn cv_ref() -> ResourceRef {
    ResourceRef::cluster("ClusterVersion", "version")
}

/// Infrastructure `cluster`: required.
pub(super) fn infra_ref() -> ResourceRef {
    ResourceRef::cluster("Infrastructure", "cluster")
}

/// Secret `openshift-config/pull-secret`: required.
pub(super) fn ps_ref() -> ResourceRef {
    ResourceRef::namespaced("Secret", "openshift-config", "pull-secret")
}

/// ConfigMap `openshift-machine-config-operator/coreos-bootimages`: required.
pub(super) fn boot_ref() -> ResourceRef {
    ResourceRef::namespaced(
        "ConfigMap",
        "openshift-machine-config-operator",
        "coreos-bootimages",
    )
}

/// What reading the facts found: errors (exit 4 for add-nodes), problems (the cluster cannot take
/// day-2 nodes), warnings, and the facts left unknown by an unreadable object.
#[derive(Default)]
pub(super) struct Findings {
    pub errors: Vec<Error>,
    pub problems: Vec<String>,
    pub warnings: Vec<String>,
    pub unknown: Vec<Unreadable>,
}

impl Findings {
    /// Marks the facts `r` feeds unknown (once per object), `reason` being why it was not read;
    /// a fact add-nodes needs becomes a problem unless the object is `required` (its error says it).
    pub fn mark(&mut self, o: &ClusterObjects, r: &ResourceRef, reason: String, required: bool) {
        if self.unknown.iter().any(|u| u.resource_ref.as_ref() == Some(r)) {
            return;
        }
        let trust_name = o.proxy.as_ref().and_then(|p| str_at(p, "/spec/trustedCA/name"));
        let image_ca = o
            .image_config
            .as_ref()
            .and_then(|i| str_at(i, "/spec/additionalTrustedCA/name"));
        let (fields, what, blocks) = facts_of(r, trust_name, image_ca);
        let problem = (blocks && !required).then(|| format!("{what} is unknown: cannot read {r} ({reason})"));
        self.unknown.push(Unreadable {
            resource: r.to_string(),
            reason,
            fields: fields.into_iter().map(String::from).collect(),
            required,
            problem,
            resource_ref: Some(r.clone()),
            what: if what.is_empty() {
                "some facts".into()
            } else {
                what.into()
            },
        });
    }

    /// Whether the required object `obj` (`r`) is there; when not, its error and its facts
    /// marked unknown, with the reason it was not read (403's message, else "not found").
    pub fn required(&mut self, o: &ClusterObjects, obj: Option<&Value>, r: &ResourceRef) -> bool {
        if obj.is_some() {
            return true;
        }
        self.errors.push(missing(r.clone(), o));
        let why = o
            .unreadable
            .iter()
            .find(|(x, _)| x == r)
            .map(|(_, w)| w.clone())
            .unwrap_or_else(|| "not found".into());
        self.mark(o, r, why, true);
        false
    }

    /// The last findings: the problems of unknown facts add-nodes needs, and machine networks
    /// that are not CIDRs.
    pub fn finish(&mut self, machine_networks: &MachineNetworks) {
        // Unknown facts add-nodes needs block it (the document says which).
        for u in &self.unknown {
            if let Some(p) = &u.problem {
                self.problems.push(p.clone());
            }
        }
        if !self.unknown.iter().any(|u| u.covers("machineNetworks")) {
            for c in &machine_networks.cidrs {
                if c.parse::<ipnet::IpNet>().is_err() {
                    self.warnings.push(format!(
                        "machine network {c:?} (from {}) is not a CIDR; ignored when checking host addresses",
                        machine_networks.source
                    ));
                }
            }
        }
    }
}

/// install-config (ConfigMap `kube-system/cluster-config-v1`), when there and YAML.
pub(super) fn install_config(o: &ClusterObjects) -> Option<Value> {
    o.cluster_config
        .as_ref()
        .and_then(|cm| cm_value(cm, "install-config"))
        .and_then(|ic| serde_saphyr::from_str::<Value>(ic).ok())
}

/// Cluster ID (ClusterVersion `spec.clusterID`), API URLs, name and base domain (from the API
/// host, checked against install-config when there is one) and topology (Infrastructure).
pub(super) fn identity(
    cv: &Value,
    infra: &Value,
    have_cv: bool,
    have_infra: bool,
    install_config: Option<&Value>,
    f: &mut Findings,
) -> ClusterIdentity {
    let id = match str_at(cv, "/spec/clusterID") {
        Some(id) => id.to_string(),
        None => {
            if have_cv {
                f.errors.push(Error::BadObject {
                    resource: cv_ref(),
                    message: "spec.clusterID is empty".into(),
                });
            }
            String::new()
        }
    };
    let (api_url, name, base_domain, identity_source) = match str_at(infra, "/status/apiServerURL") {
        None => {
            if have_infra {
                f.errors.push(Error::BadObject {
                    resource: infra_ref(),
                    message: "status.apiServerURL is empty".into(),
                });
            }
            (String::new(), String::new(), String::new(), String::new())
        }
        Some(api_url) => {
            let api_url = api_url.to_string();
            match api_url
                .parse::<http::Uri>()
                .ok()
                .and_then(|u| u.host().map(String::from))
            {
                None => {
                    f.errors.push(Error::BadObject {
                        resource: infra_ref(),
                        message: format!("status.apiServerURL {api_url:?} is not a URL"),
                    });
                    (api_url, String::new(), String::new(), String::new())
                }
                Some(api_host) => match cluster_name_and_domain(&api_host, install_config) {
                    Ok(id) => {
                        f.warnings.extend(id.warning);
                        (api_url, id.name, id.base_domain, id.source.to_string())
                    }
                    Err(message) => {
                        f.errors.push(Error::BadObject {
                            resource: infra_ref(),
                            message,
                        });
                        (api_url, String::new(), String::new(), String::new())
                    }
                },
            }
        }
    };
    let api_int_url = str_at(infra, "/status/apiServerInternalURI")
        .map(String::from)
        .unwrap_or_else(|| format!("https://api-int.{name}.{base_domain}:6443"));
    let control_plane_topology = str_at(infra, "/status/controlPlaneTopology")
        .unwrap_or("HighlyAvailable")
        .to_string();
    ClusterIdentity {
        id,
        name,
        base_domain,
        identity_source,
        api_url,
        api_int_url,
        control_plane_topology,
    }
}

/// The running release (the newest Completed history entry), an upgrade in progress, and
/// whether the version is supported ([`super::MIN_VERSION`]).
pub(super) fn version(cv: &Value, have_cv: bool, f: &mut Findings) -> VersionInfo {
    let history = cv
        .pointer("/status/history")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let completed = history.iter().find(|h| h["state"].as_str() == Some("Completed"));
    let (current, release_image) = match completed {
        Some(h) => (
            h["version"].as_str().unwrap_or_default().to_string(),
            h["image"].as_str().unwrap_or_default().to_string(),
        ),
        None if !have_cv => (String::new(), String::new()),
        None => {
            f.problems.push(
                "the cluster has not completed an installation yet (no Completed entry in \
                 ClusterVersion status.history)"
                    .into(),
            );
            (
                str_at(cv, "/status/desired/version")
                    .unwrap_or_default()
                    .to_string(),
                str_at(cv, "/status/desired/image")
                    .unwrap_or_default()
                    .to_string(),
            )
        }
    };
    let upgrade_in_progress = history
        .first()
        .filter(|h| h["state"].as_str() != Some("Completed"))
        .and_then(|h| {
            Some(UpgradeTarget {
                version: h["version"].as_str()?.to_string(),
                image: h["image"].as_str().unwrap_or_default().to_string(),
            })
        })
        .filter(|_| completed.is_some());
    if let Some(u) = &upgrade_in_progress {
        f.warnings.push(format!(
            "an upgrade to {} is in progress; new nodes use the running release {current} until it completes",
            u.version
        ));
    }
    let supported = match major_minor(&current) {
        Some(v) => v >= MIN_VERSION,
        None if !have_cv => false,
        None => {
            f.problems
                .push(format!("cannot parse the cluster version {current:?}"));
            false
        }
    };
    if !supported && major_minor(&current).is_some() {
        f.problems.push(format!(
            "OpenShift {current} is too old: agent-day2 needs {}.{} or newer",
            MIN_VERSION.0, MIN_VERSION.1
        ));
    }
    VersionInfo {
        current,
        release_image,
        supported,
        upgrade_in_progress,
    }
}

/// The platform (Infrastructure) and whether day-2 nodes are supported on it
/// ([`super::SUPPORTED_PLATFORMS`]).
pub(super) fn platform(infra: &Value, have_infra: bool, f: &mut Findings) -> PlatformInfo {
    let platform_kind = str_at(infra, "/status/platformStatus/type")
        .or_else(|| str_at(infra, "/status/platform"))
        .or_else(|| str_at(infra, "/spec/platformSpec/type"))
        .unwrap_or("None")
        .to_string();
    let day2_supported = SUPPORTED_PLATFORMS.contains(&platform_kind.as_str());
    if !day2_supported && have_infra {
        f.problems.push(format!(
            "platform {platform_kind} is not supported for day-2 nodes (supported: baremetal, none, external, vsphere)"
        ));
    }
    // platformStatus.baremetal / .vsphere / ...: the lower-case platform type; the spec's
    // platformSpec where the status lacks them.
    let key = platform_kind.to_ascii_lowercase();
    let ips = |plural: &str, single: &str| -> Vec<String> {
        ["/status/platformStatus", "/spec/platformSpec"]
            .iter()
            .filter_map(|p| infra.pointer(p).and_then(|v| v.get(&key)))
            .map(|st| match st.get(plural).and_then(Value::as_array) {
                Some(a) => a.iter().filter_map(Value::as_str).map(str::to_string).collect(),
                None => st
                    .get(single)
                    .and_then(Value::as_str)
                    .map(|v| vec![v.to_string()])
                    .unwrap_or_default(),
            })
            .find(|v: &Vec<String>| !v.is_empty())
            .unwrap_or_default()
    };
    PlatformInfo {
        api_vips: ips("apiServerInternalIPs", "apiServerInternalIP"),
        ingress_vips: ips("ingressIPs", "ingressIP"),
        kind: platform_kind,
        day2_supported,
    }
}

/// The nodes, the control plane's architecture (a control-plane node's, else the first node's,
/// else guessed from the release image's tag, warned) and whether the release is multi-arch.
pub(super) fn nodes_and_architecture(
    o: &ClusterObjects,
    cv: &Value,
    release_image: &str,
    f: &mut Findings,
) -> (Vec<NodeInfo>, ArchitectureInfo) {
    let nodes: Vec<NodeInfo> = o.nodes.iter().map(node_info).collect();
    let cp_arch = nodes
        .iter()
        .find(|n| n.roles.iter().any(|r| r == "master" || r == "control-plane"))
        .or(nodes.first())
        .map(|n| n.architecture.clone());
    let control_plane = match cp_arch {
        Some(a) => a,
        None => {
            // The release image tag carries the arch for single-arch payloads (`4.18.12-x86_64`).
            let guess = ["x86_64", "aarch64", "ppc64le", "s390x"]
                .into_iter()
                .find(|a| release_image.ends_with(&format!("-{a}")))
                .unwrap_or("x86_64");
            f.warnings.push(format!(
                "no Node readable: assuming control-plane architecture {guess}"
            ));
            guess.to_string()
        }
    };
    let multi_arch = multi_arch_release(cv, &nodes);
    (
        nodes,
        ArchitectureInfo {
            control_plane,
            multi_arch,
        },
    )
}

/// The machine networks: Infrastructure's baremetal platform spec, else install-config's
/// `networking.machineNetwork`, else none.
pub(super) fn machine_networks(infra: &Value, install_config: Option<&Value>) -> MachineNetworks {
    let mut machine_networks = MachineNetworks {
        cidrs: strings_at(infra, "/spec/platformSpec/baremetal/machineNetworks"),
        source: "infrastructure".into(),
    };
    if machine_networks.cidrs.is_empty() {
        let from_ic = install_config
            .as_ref()
            .map(|ic| {
                ic.pointer("/networking/machineNetwork")
                    .and_then(Value::as_array)
                    .map(|a| {
                        a.iter()
                            .filter_map(|m| m["cidr"].as_str().map(String::from))
                            .collect::<Vec<_>>()
                    })
                    .unwrap_or_default()
            })
            .unwrap_or_default();
        machine_networks = if from_ic.is_empty() {
            MachineNetworks {
                cidrs: vec![],
                source: "none".into(),
            }
        } else {
            MachineNetworks {
                cidrs: from_ic,
                source: "install-config".into(),
            }
        };
    }
    machine_networks
}

/// The Machine Config Server's URL and CA, from the worker pointer Ignition (Secret
/// `openshift-machine-api/worker-user-data-managed`), else derived from the cluster's name.
pub(super) fn machine_config_server(
    o: &ClusterObjects,
    name: &str,
    base_domain: &str,
    have_infra: bool,
    f: &mut Findings,
) -> McsInfo {
    let derived_mcs = format!("https://api-int.{name}.{base_domain}:22623/config/worker");
    let machine_config_server = match o
        .worker_user_data
        .as_ref()
        .and_then(|s| secret_value(s, "userData"))
    {
        Some(ign) => {
            let ign: Value = match serde_json::from_str(&ign) {
                Ok(v) => v,
                Err(e) => {
                    f.errors.push(Error::BadObject {
                        resource: ResourceRef::namespaced(
                            "Secret",
                            "openshift-machine-api",
                            "worker-user-data-managed",
                        ),
                        message: format!("userData is not Ignition JSON: {e}"),
                    });
                    Value::Null
                }
            };
            let url = str_at(&ign, "/ignition/config/merge/0/source")
                .or_else(|| str_at(&ign, "/ignition/config/append/0/source"))
                .unwrap_or(&derived_mcs)
                .to_string();
            let ca_pem = ign
                .pointer("/ignition/security/tls/certificateAuthorities")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter_map(|ca| ca["source"].as_str().and_then(decode_data_url))
                .find(|pem| pem.contains("-----BEGIN CERTIFICATE-----"));
            McsInfo {
                url,
                ca_found: ca_pem.is_some(),
                source: "worker-user-data-managed".into(),
                ca_pem,
            }
        }
        None => McsInfo {
            url: derived_mcs,
            ca_found: false,
            source: "derived".into(),
            ca_pem: None,
        },
    };
    // A missing CA (secret absent, or present without one) blocks add-nodes: the node's
    // pointer Ignition could not verify the Machine Config Server's certificate and would
    // never get its config. Unreadable (403) is reported through `unreadable` instead.
    let mcs_forbidden = f.unknown.iter().any(|u| u.covers("machineConfigServer.caFound"));
    if !machine_config_server.ca_found && !mcs_forbidden && have_infra {
        f.problems.push(format!(
            "no Machine Config Server CA found (Secret openshift-machine-api/worker-user-data-managed {}): \
             new nodes could not verify {}; check that the machine-config operator is healthy \
             (`oc get clusteroperator machine-config`)",
            if o.worker_user_data.is_some() {
                "has none"
            } else {
                "not found"
            },
            machine_config_server.url
        ));
    }
    machine_config_server
}

/// The CoreOS stream (ConfigMap `coreos-bootimages`) and the live ISO of the control plane's
/// architecture in it, checked.
pub(super) fn base_iso(
    boot: &Value,
    have_boot: bool,
    control_plane: &str,
    f: &mut Findings,
) -> (Value, Option<BaseIso>) {
    let coreos_stream: Value = match cm_value(boot, "stream") {
        None if !have_boot => Value::Null,
        None => {
            f.errors.push(Error::BadObject {
                resource: boot_ref(),
                message: "data.stream is missing".into(),
            });
            Value::Null
        }
        Some(text) => match serde_json::from_str(text) {
            Ok(v) => v,
            Err(e) => {
                f.errors.push(Error::BadObject {
                    resource: boot_ref(),
                    message: format!("data.stream is not CoreOS stream JSON: {e}"),
                });
                Value::Null
            }
        },
    };
    let base_iso = match check_base_iso(&coreos_stream, control_plane) {
        Ok(iso) => {
            if !(iso.location.starts_with("https://") || iso.location.starts_with("http://")) {
                f.warnings.push(format!(
                    "the {control_plane} live ISO location {:?} in ConfigMap \
                     openshift-machine-config-operator/coreos-bootimages is not an http(s) URL; \
                     add-nodes cannot download it: use --base-iso FILE (or the release \
                     payload's machine-os-images image)",
                    iso.location
                ));
            }
            Some(iso)
        }
        Err(why) => {
            if have_boot && !coreos_stream.is_null() {
                f.warnings.push(format!(
                    "no usable base ISO for {control_plane} in ConfigMap \
                     openshift-machine-config-operator/coreos-bootimages: {why}; add-nodes needs \
                     --base-iso FILE (or the release payload's machine-os-images image)"
                ));
            }
            None
        }
    };
    (coreos_stream, base_iso)
}

/// The cluster-wide proxy (Proxy `status`) and the trust bundle its `spec.trustedCA` names.
pub(super) fn proxy_and_trust(
    o: &ClusterObjects,
    f: &mut Findings,
) -> (Option<ProxyInfo>, Option<TrustBundle>) {
    let proxy = o.proxy.as_ref().and_then(|p| {
        let get = |k: &str| str_at(p, &format!("/status/{k}")).map(String::from);
        let info = ProxyInfo {
            http_proxy: get("httpProxy"),
            https_proxy: get("httpsProxy"),
            no_proxy: get("noProxy"),
        };
        (info.http_proxy.is_some() || info.https_proxy.is_some()).then_some(info)
    });
    let trust_bundle = o
        .proxy
        .as_ref()
        .and_then(|p| str_at(p, "/spec/trustedCA/name"))
        .map(|cm_name| {
            let pem = o
                .trust_bundle
                .as_ref()
                .and_then(|cm| cm_value(cm, "ca-bundle.crt"))
                .map(String::from);
            TrustBundle {
                config_map: cm_name.to_string(),
                found: o.trust_bundle.is_some(),
                certificates: pem.as_deref().map(count_certs).unwrap_or(0),
                pem,
            }
        });
    if let Some(tb) = &trust_bundle {
        if !tb.found && !f.unknown.iter().any(|u| u.covers("trustBundle")) {
            f.warnings.push(format!(
                "trust bundle ConfigMap openshift-config/{} (Proxy spec.trustedCA) not found",
                tb.config_map
            ));
        }
    }
    (proxy, trust_bundle)
}

/// Digest, tag and legacy (ICSP) mirrors and the registry CAs of Image.config
/// `spec.additionalTrustedCA`.
pub(super) fn mirrors(o: &ClusterObjects, f: &mut Findings) -> Mirrors {
    let entries = |objs: &[Value], list: &str| -> Vec<MirrorEntry> {
        objs.iter()
            .flat_map(|o| {
                o.pointer(&format!("/spec/{list}"))
                    .and_then(Value::as_array)
                    .cloned()
                    .unwrap_or_default()
            })
            .filter_map(|m| {
                Some(MirrorEntry {
                    source: m["source"].as_str()?.to_string(),
                    mirrors: strings_at(&m, "/mirrors"),
                    mirror_source_policy: m["mirrorSourcePolicy"].as_str().map(String::from),
                })
            })
            .collect()
    };
    let additional_trusted_ca = o
        .image_config
        .as_ref()
        .and_then(|i| str_at(i, "/spec/additionalTrustedCA/name"))
        .map(String::from);
    let registry_cas: BTreeMap<String, String> = o
        .additional_trusted_ca
        .as_ref()
        .and_then(|cm| cm.get("data").and_then(Value::as_object))
        .map(|d| {
            // Keys are registry hosts; `host..port` stands for `host:port` (ConfigMap keys have no colon).
            d.iter()
                .filter_map(|(k, v)| Some((k.replace("..", ":"), v.as_str()?.to_string())))
                .collect()
        })
        .unwrap_or_default();
    if let (Some(n), None, false) = (
        &additional_trusted_ca,
        &o.additional_trusted_ca,
        f.unknown.iter().any(|u| u.covers("mirrors.trustedCARegistries")),
    ) {
        f.warnings.push(format!(
            "registry CA ConfigMap openshift-config/{n} (Image.config spec.additionalTrustedCA) not found"
        ));
    }
    let mirrors = Mirrors {
        digest_mirrors: entries(&o.image_digest_mirror_sets, "imageDigestMirrors"),
        tag_mirrors: entries(&o.image_tag_mirror_sets, "imageTagMirrors"),
        legacy_content_sources: entries(&o.image_content_source_policies, "repositoryDigestMirrors"),
        additional_trusted_ca,
        trusted_ca_registries: registry_cas.keys().cloned().collect(),
        registry_cas,
    };
    mirrors
}

/// What the worker MachineConfigs say: FIPS, the `core` user's SSH keys, and the chrony config
/// (whether there is one, and its `/etc/chrony.conf`).
pub(super) fn machine_configs(o: &ClusterObjects) -> (bool, SshInfo, bool, Option<String>) {
    let mc = |n: &str| {
        o.machine_configs
            .iter()
            .find(|m| str_at(m, "/metadata/name") == Some(n))
    };
    let fips = mc("99-worker-fips")
        .and_then(|m| m.pointer("/spec/fips"))
        .and_then(Value::as_bool)
        .unwrap_or(false);
    let keys: Vec<String> = mc("99-worker-ssh")
        .and_then(|m| m.pointer("/spec/config/passwd/users").and_then(Value::as_array))
        .into_iter()
        .flatten()
        .filter(|u| u["name"].as_str() == Some("core"))
        .flat_map(|u| strings_at(u, "/sshAuthorizedKeys"))
        .flat_map(|k| {
            k.lines()
                .map(str::trim)
                .filter(|l| !l.is_empty())
                .map(String::from)
                .collect::<Vec<_>>()
        })
        .collect();
    let ssh = SshInfo {
        key_present: !keys.is_empty(),
        keys,
    };
    let chrony = mc("50-workers-chrony-configuration");
    let chrony_conf = chrony.and_then(|m| {
        m.pointer("/spec/config/storage/files")
            .and_then(Value::as_array)?
            .iter()
            .find(|f| f["path"].as_str() == Some("/etc/chrony.conf"))
            .and_then(|f| f.pointer("/contents/source").and_then(Value::as_str))
            .and_then(decode_data_url)
    });
    (fips, ssh, chrony.is_some(), chrony_conf)
}

/// Cluster and service networks and the network type (Network.config `status`, else `spec`).
pub(super) fn networks(o: &ClusterObjects, f: &mut Findings) -> Networks {
    let networks = o
        .network
        .as_ref()
        .map(|n| {
            let cidrs = |p: &str| -> Vec<String> {
                n.pointer(p)
                    .and_then(Value::as_array)
                    .map(|a| {
                        a.iter()
                            .filter_map(|c| c["cidr"].as_str().map(String::from))
                            .collect()
                    })
                    .unwrap_or_default()
            };
            let mut cluster_networks = cidrs("/status/clusterNetwork");
            if cluster_networks.is_empty() {
                cluster_networks = cidrs("/spec/clusterNetwork");
            }
            let mut service_networks = strings_at(n, "/status/serviceNetwork");
            if service_networks.is_empty() {
                service_networks = strings_at(n, "/spec/serviceNetwork");
            }
            Networks {
                cluster_networks,
                service_networks,
                network_type: str_at(n, "/status/networkType")
                    .or_else(|| str_at(n, "/spec/networkType"))
                    .map(String::from),
            }
        })
        .unwrap_or_default();
    if o.network.is_none() && !f.unknown.iter().any(|u| u.covers("networks")) {
        f.warnings
            .push("Network.config/cluster not found: cluster and service networks unknown".into());
    }
    networks
}

/// The pull secret's text and whether it is usable: JSON with an `auths` object.
pub(super) fn pull_secret(ps: &Value, have_ps: bool, f: &mut Findings) -> (String, bool) {
    let pull_secret_text = if !have_ps {
        String::new()
    } else {
        match secret_value(ps, ".dockerconfigjson") {
            None => {
                f.errors.push(Error::BadObject {
                    resource: ps_ref(),
                    message: "no .dockerconfigjson key".into(),
                });
                String::new()
            }
            Some(text) => {
                match serde_json::from_str::<Value>(&text) {
                    Err(e) => f.errors.push(Error::BadObject {
                        resource: ps_ref(),
                        message: format!(".dockerconfigjson is not JSON ({e}); fix the pull secret with `oc set data secret/pull-secret -n openshift-config`"),
                    }),
                    Ok(j) if !j.get("auths").is_some_and(Value::is_object) => f.errors.push(Error::BadObject {
                        resource: ps_ref(),
                        message: ".dockerconfigjson has no \"auths\" object".into(),
                    }),
                    Ok(_) => {}
                }
                text
            }
        }
    };
    let pull_secret_found = have_ps
        && !f
            .errors
            .iter()
            .any(|e| matches!(e, Error::BadObject { resource, .. } if resource == &ps_ref()));
    (pull_secret_text, pull_secret_found)
}

/// The document fields a read of `r` feeds, what to call that fact, and whether add-nodes
/// needs it (an unknown value would silently build a wrong node: no FIPS, no proxy, no
/// mirrors, a node that cannot verify the Machine Config Server).
fn facts_of(
    r: &ResourceRef,
    trust_name: Option<&str>,
    image_ca: Option<&str>,
) -> (Vec<&'static str>, &'static str, bool) {
    let name = r.name.as_deref().unwrap_or("");
    match (r.kind.as_str(), r.namespace.as_deref(), name) {
        ("ClusterVersion", _, _) => (
            vec!["cluster.id", "version", "architecture.multiArch"],
            "the cluster version",
            true,
        ),
        ("Infrastructure", _, _) => (
            vec![
                "cluster.name",
                "cluster.baseDomain",
                "cluster.apiURL",
                "cluster.apiIntURL",
                "cluster.controlPlaneTopology",
                "platform",
                "machineConfigServer.url",
            ],
            "the cluster identity and platform",
            true,
        ),
        ("Secret", _, "pull-secret") => (vec!["pullSecretFound"], "the pull secret", true),
        ("ConfigMap", _, "coreos-bootimages") => (vec!["baseIso"], "the base ISO", true),
        ("Nodes", _, _) => (
            vec!["nodes", "architecture.controlPlane"],
            "the existing nodes",
            true,
        ),
        ("Proxy", _, _) => (vec!["proxy", "trustBundle"], "the cluster-wide proxy", true),
        ("Image.config.openshift.io", _, _) => (
            vec!["mirrors.additionalTrustedCA", "mirrors.trustedCARegistries"],
            "the registry CAs",
            true,
        ),
        ("ConfigMap", Some("kube-system"), "cluster-config-v1") => {
            (vec!["machineNetworks"], "the machine networks", false)
        }
        ("ConfigMap", Some("openshift-config"), n) if Some(n) == trust_name => {
            (vec!["trustBundle"], "the proxy trust bundle", true)
        }
        ("ConfigMap", Some("openshift-config"), n) if Some(n) == image_ca => {
            (vec!["mirrors.trustedCARegistries"], "the registry CAs", true)
        }
        ("ImageDigestMirrorSets", _, _) => (vec!["mirrors.digestMirrors"], "the digest mirrors", true),
        ("ImageTagMirrorSets", _, _) => (vec!["mirrors.tagMirrors"], "the tag mirrors", true),
        ("ImageContentSourcePolicies", _, _) => {
            (vec!["mirrors.legacyContentSources"], "the ICSP mirrors", true)
        }
        ("Secret", _, "worker-user-data-managed") => (
            vec!["machineConfigServer.caFound"],
            "the Machine Config Server CA",
            true,
        ),
        ("MachineConfig", _, "99-worker-fips") => (vec!["fips"], "FIPS mode", true),
        ("MachineConfig", _, "99-worker-ssh") => (vec!["ssh"], "the worker SSH key", true),
        ("MachineConfig", _, "50-workers-chrony-configuration") => {
            (vec!["chronyConfigured"], "the worker chrony config", true)
        }
        ("Network.config.openshift.io", _, _) => {
            (vec!["networks"], "the cluster and service networks", false)
        }
        _ => (vec![], "", false),
    }
}

/// Whether the cluster runs the multi-arch payload, as far as the API tells it.
///
/// OpenShift's ClusterVersion CRD keeps `status.desired.architecture` only with the
/// TechPreview/DevPreview feature sets (openshift/api: `Release.architecture` behind feature gate
/// ImageStreamImportMode); with the Default feature set (every production 4.18 cluster) the
/// server prunes it. So also: `spec.desiredUpdate.architecture: Multi` (what `oc adm upgrade
/// --to-multi-arch` writes; it stays until the next update request), and Nodes of two
/// architectures (a single-arch payload cannot run them). A Default cluster installed
/// directly from a multi payload shows none of these; only its release image's metadata
/// (`release.openshift.io/architecture: multi`) says so.
fn multi_arch_release(cv: &Value, nodes: &[NodeInfo]) -> bool {
    let multi = |p: &str| str_at(cv, p) == Some("Multi");
    let mut archs: Vec<&str> = nodes
        .iter()
        .map(|n| n.architecture.as_str())
        .filter(|a| !a.is_empty())
        .collect();
    archs.sort_unstable();
    archs.dedup();
    multi("/status/desired/architecture") || multi("/spec/desiredUpdate/architecture") || archs.len() > 1
}

/// Parses the leading `major.minor` of an OpenShift version (`4.18.12`, `4.19.0-rc.1`) as numbers.
pub fn major_minor(version: &str) -> Option<(u64, u64)> {
    let mut parts = version.trim_start_matches('v').split(['.', '-', '+']);
    let major = parts.next()?.parse().ok()?;
    let minor = parts.next()?.parse().ok()?;
    Some((major, minor))
}

/// A cluster's name and base domain, and where they come from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NameAndDomain {
    pub name: String,
    pub base_domain: String,
    /// `install-config+apiServerURL`, `install-config` or `apiServerURL`.
    pub source: &'static str,
    /// Said when the two sources disagree or one of them is unusable.
    pub warning: Option<String>,
}

/// The cluster's name and base domain from its two sources (issue 22 item 6: one field was
/// trusted): install-config's `metadata.name` and `baseDomain` (ConfigMap
/// `kube-system/cluster-config-v1`, what the installer named the cluster with) and the host of
/// `Infrastructure status.apiServerURL` (`api.<name>.<base domain>`, as the installer makes
/// it). Both agree: either. They differ: install-config's, with a warning naming both. Only one
/// usable: that one (a warning when the API host is not `api.<name>.<domain>`). Err: neither,
/// with what to do.
pub fn cluster_name_and_domain(
    api_host: &str,
    install_config: Option<&Value>,
) -> std::result::Result<NameAndDomain, String> {
    let from_api = api_host
        .strip_prefix("api.")
        .and_then(|r| r.split_once('.'))
        .filter(|(n, d)| !n.is_empty() && !d.is_empty())
        .map(|(n, d)| (n.to_string(), d.to_string()));
    let from_ic = install_config.and_then(|ic| {
        let n = ic.pointer("/metadata/name")?.as_str()?.trim();
        let d = ic.pointer("/baseDomain")?.as_str()?.trim().trim_end_matches('.');
        (!n.is_empty() && !d.is_empty()).then(|| (n.to_string(), d.to_string()))
    });
    let esc = |s: &str| crate::text::display(s);
    match (from_api, from_ic) {
        (Some(a), Some(i)) if a == i => Ok(NameAndDomain {
            name: i.0,
            base_domain: i.1,
            source: "install-config+apiServerURL",
            warning: None,
        }),
        (Some(a), Some(i)) => Ok(NameAndDomain {
            warning: Some(format!(
                "install-config (kube-system/cluster-config-v1) names the cluster {} with base domain {}, but \
                 Infrastructure status.apiServerURL's host {} says {} and {}: using install-config's; \
                 check the image's cluster name if the API name was changed on purpose",
                esc(&i.0),
                esc(&i.1),
                esc(api_host),
                esc(&a.0),
                esc(&a.1)
            )),
            name: i.0,
            base_domain: i.1,
            source: "install-config",
        }),
        (None, Some(i)) => Ok(NameAndDomain {
            warning: Some(format!(
                "Infrastructure status.apiServerURL's host {} is not api.<cluster name>.<base domain>: \
                 the cluster name {} and base domain {} come from install-config (kube-system/cluster-config-v1)",
                esc(api_host),
                esc(&i.0),
                esc(&i.1)
            )),
            name: i.0,
            base_domain: i.1,
            source: "install-config",
        }),
        (Some(a), None) => Ok(NameAndDomain {
            name: a.0,
            base_domain: a.1,
            source: "apiServerURL",
            warning: None,
        }),
        (None, None) => Err(format!(
            "status.apiServerURL host {api_host:?} is not api.<cluster name>.<base domain>, and ConfigMap \
             kube-system/cluster-config-v1 has no install-config with metadata.name and baseDomain: \
             cannot tell the cluster name and base domain; check that this is an OpenShift cluster \
             the installer made"
        )),
    }
}

fn node_info(n: &Value) -> NodeInfo {
    let mut roles: Vec<String> = n
        .pointer("/metadata/labels")
        .and_then(Value::as_object)
        .map(|l| {
            l.keys()
                .filter_map(|k| k.strip_prefix("node-role.kubernetes.io/"))
                .map(String::from)
                .collect()
        })
        .unwrap_or_default();
    roles.sort();
    NodeInfo {
        name: str_at(n, "/metadata/name").unwrap_or_default().to_string(),
        addresses: n
            .pointer("/status/addresses")
            .and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(|x| {
                        Some(NodeAddress {
                            kind: x["type"].as_str()?.to_string(),
                            address: x["address"].as_str()?.to_string(),
                        })
                    })
                    .collect()
            })
            .unwrap_or_default(),
        roles,
        architecture: normalize_arch(str_at(n, "/status/nodeInfo/architecture").unwrap_or("")),
    }
}

impl ClusterModel {
    /// Builds the model from the fetched objects. Pure: no I/O.
    ///
    /// Errors (exit 4): a required object (ClusterVersion `version`, Infrastructure `cluster`,
    /// Secret `openshift-config/pull-secret`, ConfigMap
    /// `openshift-machine-config-operator/coreos-bootimages`) is missing, or lacks what we need
    /// (cluster ID, API URL of the form `https://api.<name>.<domain>:port`, a parseable pull
    /// secret or stream). An unsupported version or platform is not an error here: it is listed
    /// in [`ClusterModel::problems`], so `info` can still print the report.
    pub fn from_objects(o: &ClusterObjects) -> Result<ClusterModel> {
        let (model, mut errors) = Self::from_objects_partial(o);
        if errors.is_empty() {
            Ok(model)
        } else {
            Err(errors.remove(0))
        }
    }

    /// Like [`ClusterModel::from_objects`], but never stops: every required object that is
    /// missing or unusable gives an error in the second value (in the order `from_objects`
    /// would report them) and its facts are marked unknown in [`ClusterModel::unreadable`]
    /// (empty strings / false in the struct, `null` in the `info` document). For `info`'s
    /// partial report; add-nodes must use `from_objects`.
    pub fn from_objects_partial(o: &ClusterObjects) -> (ClusterModel, Vec<Error>) {
        let mut f = Findings::default();
        let empty = Value::Object(Default::default());
        let (cv_ref, infra_ref, ps_ref, boot_ref) = (cv_ref(), infra_ref(), ps_ref(), boot_ref());
        let have_cv = f.required(o, o.cluster_version.as_ref(), &cv_ref);
        let have_infra = f.required(o, o.infrastructure.as_ref(), &infra_ref);
        let have_ps = f.required(o, o.pull_secret.as_ref(), &ps_ref);
        let have_boot = f.required(o, o.coreos_bootimages.as_ref(), &boot_ref);
        let cv = o.cluster_version.as_ref().unwrap_or(&empty);
        let infra = o.infrastructure.as_ref().unwrap_or(&empty);
        let ps = o.pull_secret.as_ref().unwrap_or(&empty);
        let boot = o.coreos_bootimages.as_ref().unwrap_or(&empty);
        for (r, why) in &o.unreadable {
            let is_required = [&cv_ref, &infra_ref, &ps_ref, &boot_ref].contains(&r) || r.kind == "Nodes";
            if is_required && r.kind == "Nodes" {
                f.errors.push(Error::BadObject {
                    resource: r.clone(),
                    message: why.clone(),
                });
            }
            f.mark(o, r, why.clone(), is_required);
        }

        let install_config = install_config(o);
        let cluster = identity(cv, infra, have_cv, have_infra, install_config.as_ref(), &mut f);
        let version = version(cv, have_cv, &mut f);
        let platform = platform(infra, have_infra, &mut f);
        let (nodes, architecture) = nodes_and_architecture(o, cv, &version.release_image, &mut f);
        let machine_networks = machine_networks(infra, install_config.as_ref());
        let machine_config_server =
            machine_config_server(o, &cluster.name, &cluster.base_domain, have_infra, &mut f);
        let (coreos_stream, base_iso) = base_iso(boot, have_boot, &architecture.control_plane, &mut f);
        let (proxy, trust_bundle) = proxy_and_trust(o, &mut f);
        let mirrors = mirrors(o, &mut f);
        let (fips, ssh, chrony_configured, chrony_conf) = machine_configs(o);
        let networks = networks(o, &mut f);
        let (pull_secret_text, pull_secret_found) = pull_secret(ps, have_ps, &mut f);
        f.finish(&machine_networks);

        let model = ClusterModel {
            cluster,
            version,
            platform,
            architecture,
            machine_networks,
            machine_config_server,
            base_iso,
            proxy,
            trust_bundle,
            mirrors,
            fips,
            ssh,
            chrony_configured,
            networks,
            nodes,
            pull_secret_found,
            problems: f.problems,
            warnings: f.warnings,
            unreadable: f.unknown,
            pull_secret: PullSecret(pull_secret_text),
            coreos_stream,
            chrony_conf,
        };
        (model, f.errors)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kube::connect_failure;
    use crate::kube::errors::{strip_os_error, user_from_message};
    use crate::net::cidr_contains;
    use std::net::IpAddr;

    #[test]
    fn cluster_name_and_domain_from_both_sources() {
        let ic = |n: &str, d: &str| serde_json::json!({"metadata": {"name": n}, "baseDomain": d});
        let both =
            cluster_name_and_domain("api.ostest.example.com", Some(&ic("ostest", "example.com"))).unwrap();
        assert_eq!(
            (both.name.as_str(), both.base_domain.as_str(), both.source),
            ("ostest", "example.com", "install-config+apiServerURL")
        );
        assert_eq!(both.warning, None);
        let differ =
            cluster_name_and_domain("api.other.example.org", Some(&ic("ostest", "example.com"))).unwrap();
        assert_eq!(
            (differ.name.as_str(), differ.source),
            ("ostest", "install-config")
        );
        assert!(differ
            .warning
            .unwrap()
            .contains("api.other.example.org says other and example.org"));
        let lb = cluster_name_and_domain("lb.example.com", Some(&ic("ostest", "example.com."))).unwrap();
        assert_eq!(
            (lb.name.as_str(), lb.base_domain.as_str()),
            ("ostest", "example.com")
        );
        assert!(lb
            .warning
            .unwrap()
            .contains("is not api.<cluster name>.<base domain>"));
        let api_only = cluster_name_and_domain("api.ostest.example.com", None).unwrap();
        assert_eq!(
            (api_only.name.as_str(), api_only.source),
            ("ostest", "apiServerURL")
        );
        assert!(cluster_name_and_domain("lb.example.com", None)
            .unwrap_err()
            .contains("cluster-config-v1"));
        assert!(cluster_name_and_domain("lb.example.com", Some(&ic("", "x"))).is_err());
    }

    /// An error wrapping another, the way the kube client wraps hyper's connect error.
    #[derive(Debug)]
    struct Wrap(&'static str, Box<dyn std::error::Error + Send + Sync + 'static>);
    impl std::fmt::Display for Wrap {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            write!(f, "{}", self.0)
        }
    }
    impl std::error::Error for Wrap {
        fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
            Some(self.1.as_ref())
        }
    }

    #[test]
    fn connect_failures_are_said_plainly() {
        let refused = Wrap(
            "ServiceError: client error (Connect)",
            Box::new(Wrap(
                "tcp connect error",
                Box::new(std::io::Error::from_raw_os_error(111)),
            )),
        );
        assert_eq!(
            connect_failure(&refused),
            "connection refused: nothing listens at that address and port"
        );
        let dns = Wrap(
            "ServiceError: client error (Connect)",
            Box::new(std::io::Error::other(
                "dns error: failed to lookup address information: Name or service not known",
            )),
        );
        assert_eq!(
            connect_failure(&dns),
            "the host name does not resolve (failed to lookup address information: Name or service not known)"
        );
        let tls = Wrap(
            "ServiceError: client error (Connect)",
            Box::new(std::io::Error::other("invalid peer certificate: UnknownIssuer")),
        );
        assert_eq!(connect_failure(&tls), "invalid peer certificate: UnknownIssuer");
        assert_eq!(strip_os_error("boom (os error 113)"), "boom");
    }

    #[test]
    fn versions_compare_as_numbers() {
        assert!(major_minor("4.9.59").unwrap() < major_minor("4.18.0").unwrap());
        assert_eq!(major_minor("4.19.0-rc.1"), Some((4, 19)));
        assert!(major_minor("4.18.1").unwrap() >= MIN_VERSION);
        assert_eq!(major_minor("garbage"), None);
    }

    #[test]
    fn arch_names_normalise() {
        assert_eq!(normalize_arch("amd64"), "x86_64");
        assert_eq!(normalize_arch("arm64"), "aarch64");
        assert_eq!(normalize_arch("aarch64"), "aarch64");
        assert_eq!(normalize_arch("s390x"), "s390x");
    }

    #[test]
    fn data_urls_decode() {
        assert_eq!(
            decode_data_url("data:text/plain;charset=utf-8;base64,aGVsbG8=").as_deref(),
            Some("hello")
        );
        assert_eq!(decode_data_url("data:,a%20b").as_deref(), Some("a b"));
        assert_eq!(decode_data_url("https://x"), None);
    }

    #[test]
    fn forbidden_message_names_user() {
        assert_eq!(
            user_from_message(
                "secrets \"pull-secret\" is forbidden: User \"dev\" cannot get resource \"secrets\""
            )
            .as_deref(),
            Some("dev")
        );
    }

    #[test]
    fn cidr_matching() {
        let ip = |s: &str| s.parse::<IpAddr>().unwrap();
        assert!(cidr_contains(ip("10.0.0.0"), 8, ip("10.1.2.3")));
        assert!(!cidr_contains(ip("10.0.0.0"), 8, ip("11.0.0.1")));
        assert!(cidr_contains(ip("fd00::"), 64, ip("fd00::5")));
        assert!(!cidr_contains(ip("fd00::"), 64, ip("10.0.0.1")));
    }
}
