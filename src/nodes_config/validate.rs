//! [`NodesConfig`] × [`ClusterModel`] → every error and warning, plus what later steps need per
//! host (normalised MACs, static IPs, architecture, NetworkManager keyfiles).

use std::collections::{BTreeMap, HashMap, HashSet};
use std::net::IpAddr;

use serde::Serialize;
use serde_json::Value;

use super::model::{q, Host, NodesConfig, Origin, RootDeviceHints, ARCHITECTURES};
use crate::cluster::{major_minor, normalize_arch, ClusterModel, MIN_VERSION};
use crate::error::{ConfigErrors, FieldError};

/// The outcome of [`validate`]: all errors, all warnings, and the per-host facts.
///
/// `hosts` holds one entry per input host, in order, even when there are errors (best effort:
/// fields that failed their checks are left out); use it only when `errors` is empty
/// ([`Validated::into_result`]).
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Validated {
    /// Problems that stop add-nodes (exit code 3).
    pub errors: Vec<FieldError>,
    /// Things to show that do not stop it (address outside the machine networks, ignored keys).
    pub warnings: Vec<FieldError>,
    /// Per host, in input order.
    pub hosts: Vec<ValidatedHost>,
}

/// What later steps (Ignition, batch record, approve) need of one host.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ValidatedHost {
    /// Lowercase RFC 1123 hostname (the future Node name).
    pub hostname: String,
    /// Always `worker` (the only role add-nodes accepts).
    pub role: String,
    /// `interfaces[].macAddress`, normalised: lowercase, `:`-separated, input order.
    pub macs: Vec<String>,
    /// `interfaces[].name`, same order as `macs`.
    pub interface_names: Vec<String>,
    /// Static addresses from the NMState `interfaces[].ipv4/ipv6.address[].ip`, parsed; empty
    /// for DHCP hosts.
    pub static_ips: Vec<IpAddr>,
    /// CoreOS architecture name (x86_64, aarch64, ppc64le, s390x).
    pub arch: String,
    /// NetworkManager keyfiles from `nmstate` gen_conf: (file name, e.g. `eth0.nmconnection`,
    /// content). Empty without networkConfig.
    pub keyfiles: Vec<(String, String)>,
}

impl Validated {
    /// No errors.
    pub fn is_ok(&self) -> bool {
        self.errors.is_empty()
    }

    /// `Ok((hosts, warnings))` without errors, else every error as [`ConfigErrors`] (exit 3);
    /// `source` names the input (file path as given, or `flags`).
    pub fn into_result(self, source: &str) -> Result<(Vec<ValidatedHost>, Vec<FieldError>), ConfigErrors> {
        if self.errors.is_empty() {
            Ok((self.hosts, self.warnings))
        } else {
            Err(ConfigErrors {
                source: source.to_string(),
                errors: self.errors,
            })
        }
    }
}

/// Checks `cfg` against `cluster`, collecting every problem (docs/add-nodes.md "nodes-config.yaml").
///
/// Errors (each names its field path and quotes the value):
/// - the cluster: release older than 4.18 (compared as numbers, from [`ClusterModel::version`]);
/// - `hosts`: at least one;
/// - `hostname`: required, lowercase RFC 1123 (labels `[a-z0-9]([-a-z0-9]*[a-z0-9])?` of at most
///   63, at most 253 in all), not `localhost`, unique among the new hosts, not the name or an
///   address of an existing node;
/// - `role`: absent or `worker`; `master` is refused (control-plane nodes cannot be added);
/// - `interfaces`: at least one; `name` required and unique per host; `macAddress` six
///   hex octets, unicast, not all zero, unique across all hosts ignoring case;
/// - `rootDeviceHints`: `deviceName` under `/dev/`, `hctl` four numbers `H:C:T:L`,
///   `wwn` hex (`0x` optional), strings non-empty (`minSizeGigabytes` 0 is accepted and means
///   no minimum, as `oc adm node-image` and assisted-service read it: metal3 `minimum: 0`);
/// - `networkConfig`: interface types nmstate knows (it would silently map others to
///   `unknown`), every interface parses with nmstate, the document compiles with nmstate
///   `gen_conf` (its message carried through), every NMState ethernet interface (and every
///   undeclared bond/bridge port or VLAN base) is listed in the host's `interfaces`;
///   static IPs not loopback, link-local, unspecified, multicast or broadcast, unique among the
///   new hosts (compared as parsed addresses, IPv4 and IPv6), not an existing node's address;
/// - `sshKey`: each non-empty line an OpenSSH public key (`ssh-rsa`, `ssh-ed25519`,
///   `ecdsa-sha2-nistp256/384/521`, `sk-…@openssh.com`, then base64 of a blob naming the
///   same type);
/// - `cpuArchitecture`: a known architecture (amd64/arm64 accepted as x86_64/aarch64); one
///   that differs from the control plane's is refused unless the release is multi-arch;
/// - `bootArtifactsBaseURL`: an http(s) URL.
///
/// Warnings: a static address outside the machine networks (none known: no warning), an
/// NMState `mac-address` that is not one of the host's MACs, keys parse ignored.
///
/// For a config from [`from_flags`](super::from_flags) the paths name the flags instead
/// (`--mac-address`, `--network-config-path interfaces[0]...`).
pub fn validate(cfg: &NodesConfig, cluster: &ClusterModel) -> Validated {
    let mut v = V {
        errors: Vec::new(),
        warnings: cfg.notes.clone(),
    };
    v.cluster_version(cluster);
    let arch = v.arch(cfg, cluster);
    if let Some(k) = &cfg.ssh_key {
        v.ssh_key(k, "sshKey");
    }
    if let Some(u) = &cfg.boot_artifacts_base_url {
        v.base_url(u);
    }
    if cfg.hosts.is_empty() {
        v.err("hosts", "at least one host is required");
    }

    let existing = ExistingNodes::new(cluster);
    let machine_nets: Vec<ipnet::IpNet> = cluster
        .machine_networks
        .cidrs
        .iter()
        .filter_map(|c| c.parse().ok())
        .collect();
    let mut hostnames: HashMap<String, usize> = HashMap::new();
    let mut macs: HashMap<String, usize> = HashMap::new();
    let mut ips: HashMap<IpAddr, (usize, String)> = HashMap::new();
    let mut out = Vec::new();

    for (i, h) in cfg.hosts.iter().enumerate() {
        let hp = format!("hosts[{i}]");
        let mut vh = ValidatedHost {
            role: "worker".into(),
            arch: arch.clone().unwrap_or_default(),
            ..Default::default()
        };
        // hostname
        let np = format!("{hp}.hostname");
        match h.hostname.as_deref() {
            None | Some("") => v.err(
                &np,
                "required: the node's name (approve checks its certificate requests against it)",
            ),
            Some(name) => {
                if let Err(m) = check_hostname(name) {
                    v.err(&np, m);
                } else {
                    if let Some(prev) = hostnames.insert(name.to_string(), i) {
                        v.err(&np, format!("{} is already used by hosts[{prev}]", q(name)));
                        hostnames.insert(name.to_string(), prev);
                    }
                    if let Some(node) = existing.by_name(name) {
                        v.err(
                            &np,
                            format!(
                                "{} is already used by the existing node {node}: choose another hostname, or, to re-image that machine under the same name, drain and delete the Node first (`oc adm drain {node} --ignore-daemonsets --delete-emptydir-data`, then `oc delete node {node}`)",
                                q(name)
                            ),
                        );
                    }
                }
                vh.hostname = name.to_string();
            }
        }
        // role
        match h.role.as_deref() {
            None | Some("worker") => {}
            Some("master") | Some("control-plane") => v.err(
                format!("{hp}.role"),
                format!(
                    "{} is not supported: add-nodes adds worker nodes only (control-plane nodes \
                     cannot be added this way); remove role or set role: worker",
                    q(h.role.as_deref().unwrap_or_default())
                ),
            ),
            Some(r) => v.err(
                format!("{hp}.role"),
                format!("{} is not a role; the only role is worker", q(r)),
            ),
        }
        // interfaces
        let ip_ = format!("{hp}.interfaces");
        if h.interfaces.is_empty() {
            v.err(
                &ip_,
                "at least one interface {name, macAddress} is required: the host is recognised by its MAC",
            );
        }
        let mut names_seen: HashMap<&str, usize> = HashMap::new();
        for (j, itf) in h.interfaces.iter().enumerate() {
            let p = format!("{ip_}[{j}]");
            if itf.name.is_empty() {
                v.err(
                    format!("{p}.name"),
                    "required: the NIC's name as the NMState uses it (e.g. eth0)",
                );
            } else if let Some(why) = bad_ifname(&itf.name) {
                v.err(format!("{p}.name"), format!("{} {why}", q(&itf.name)));
            } else if let Some(prev) = names_seen.insert(&itf.name, j) {
                v.err(
                    format!("{p}.name"),
                    format!("{} is already used by {ip_}[{prev}]", q(&itf.name)),
                );
            }
            let mp = format!("{p}.macAddress");
            if itf.mac_address.is_empty() {
                v.err(&mp, "required: the NIC's MAC address, e.g. 52:54:00:aa:00:30");
                continue;
            }
            match normalize_mac(&itf.mac_address) {
                Err(m) => v.err(&mp, format!("{} {m}", q(&itf.mac_address))),
                Ok(mac) => {
                    match macs.get(&mac) {
                        Some(&prev) if prev == i => v.err(
                            &mp,
                            format!(
                                "{} is already used by another interface of {hp}",
                                q(&itf.mac_address)
                            ),
                        ),
                        Some(&prev) => v.err(
                            &mp,
                            format!("{} is already used by hosts[{prev}]", q(&itf.mac_address)),
                        ),
                        None => {
                            macs.insert(mac.clone(), i);
                        }
                    }
                    vh.macs.push(mac);
                    vh.interface_names.push(itf.name.clone());
                }
            }
        }
        // rootDeviceHints
        if let Some(r) = &h.root_device_hints {
            v.hints(r, &format!("{hp}.rootDeviceHints"));
        }
        // networkConfig
        if let Some(nc) = &h.network_config {
            let np = format!("{hp}.networkConfig");
            let (statics, keyfiles) = v.nmstate(h, nc, &np, &hp);
            for StaticIp { path, raw, ip } in statics {
                let shown = q(&raw);
                let ipc = ip.to_canonical();
                if let Some(why) = unusable_ip(ipc) {
                    v.err(
                        &path,
                        format!("{shown} is {why}; a node needs a routable unicast address"),
                    );
                    continue;
                }
                if let Some(why) = reserved_ip(ipc, cluster, &machine_nets) {
                    v.err(&path, format!("{shown} is {why}"));
                    continue;
                }
                match ips.get(&ipc) {
                    Some((prev, prev_path)) if *prev == i => {
                        v.err(&path, format!("{shown} is already used by {prev_path}"))
                    }
                    Some((prev, _)) => v.err(&path, format!("{shown} is already used by hosts[{prev}]")),
                    None => {
                        ips.insert(ipc, (i, path.clone()));
                    }
                }
                if let Some(node) = existing.by_ip(ipc) {
                    v.err(
                        &path,
                        format!("{shown} is already used by the existing node {node}"),
                    );
                }
                if !machine_nets.is_empty() && !machine_nets.iter().any(|n| n.contains(&ipc)) {
                    v.warn(
                        &path,
                        format!(
                            "{} is outside the machine networks ({}); fine for a routed remote worker, \
                             otherwise check the address",
                            shown,
                            cluster.machine_networks.cidrs.join(", ")
                        ),
                    );
                }
                vh.static_ips.push(ip);
            }
            vh.keyfiles = keyfiles;
        }
        out.push(vh);
    }

    let mut r = Validated {
        errors: v.errors,
        warnings: v.warnings,
        hosts: out,
    };
    if cfg.origin == Origin::Flags {
        for e in r.errors.iter_mut().chain(r.warnings.iter_mut()) {
            e.path = flag_path(&e.path);
        }
    }
    r
}

struct V {
    errors: Vec<FieldError>,
    warnings: Vec<FieldError>,
}

impl V {
    fn err(&mut self, path: impl Into<String>, msg: impl Into<String>) {
        self.errors.push(FieldError::new(path, msg));
    }
    fn warn(&mut self, path: impl Into<String>, msg: impl Into<String>) {
        self.warnings.push(FieldError::new(path, msg));
    }

    fn cluster_version(&mut self, c: &ClusterModel) {
        let cur = &c.version.current;
        match major_minor(cur) {
            Some(mm) if mm >= MIN_VERSION => {}
            Some(_) => self.err(
                "cluster",
                format!(
                    "OpenShift {cur} is older than {}.{}, the oldest release add-nodes supports; \
                     upgrade the cluster first",
                    MIN_VERSION.0, MIN_VERSION.1
                ),
            ),
            None => self.err(
                "cluster",
                format!(
                    "the cluster's OpenShift version is unknown ({}); add-nodes needs {}.{} or newer",
                    if cur.is_empty() {
                        "no Completed entry in ClusterVersion status.history".to_string()
                    } else {
                        q(cur)
                    },
                    MIN_VERSION.0,
                    MIN_VERSION.1
                ),
            ),
        }
    }

    /// The hosts' architecture (CoreOS spelling), or None after an error.
    fn arch(&mut self, cfg: &NodesConfig, c: &ClusterModel) -> Option<String> {
        let cp = &c.architecture.control_plane;
        let Some(typed) = cfg.cpu_architecture.as_deref() else {
            if cp.is_empty() {
                self.err(
                    "cpuArchitecture",
                    "required here: the control plane's architecture is unknown (no master node reports one)",
                );
                return None;
            }
            return Some(cp.clone());
        };
        let a = normalize_arch(typed.trim());
        if !ARCHITECTURES.contains(&a.as_str()) {
            self.err(
                "cpuArchitecture",
                format!(
                    "{} is not an architecture OpenShift runs on; use x86_64 (amd64), aarch64 (arm64), ppc64le or s390x",
                    q(typed)
                ),
            );
            return None;
        }
        if !cp.is_empty() && &a != cp && !c.architecture.multi_arch {
            self.err(
                "cpuArchitecture",
                format!(
                    "{} ({a}) differs from the control plane's {cp} and the cluster's release is not \
                     multi-arch; hosts must be {cp} (or migrate the cluster to the multi-arch payload)",
                    q(typed)
                ),
            );
            return None;
        }
        Some(a)
    }

    fn base_url(&mut self, u: &str) {
        let ok = (u.starts_with("http://") || u.starts_with("https://"))
            && u.parse::<http::Uri>()
                .is_ok_and(|x| x.host().is_some_and(|h| !h.is_empty()));
        if !ok {
            self.err(
                "bootArtifactsBaseURL",
                format!("{} is not an http(s) URL; give where the PXE files will be served, e.g. http://pxe.example.com/ostest", q(u)),
            );
        }
    }

    fn ssh_key(&mut self, text: &str, path: &str) {
        // (1-based line number, line) of each key; blank lines and comments are skipped.
        let lines: Vec<(usize, &str)> = text
            .lines()
            .map(str::trim)
            .enumerate()
            .map(|(i, l)| (i + 1, l))
            .filter(|(_, l)| !l.is_empty() && !l.starts_with('#'))
            .collect();
        if lines.is_empty() {
            self.err(path, "empty; give an OpenSSH public key (the content of ~/.ssh/id_ed25519.pub) or leave sshKey out to use the cluster's");
        }
        // A private key: said once, and none of its lines quoted (they are the key).
        if text.contains("PRIVATE KEY") {
            self.err(path, PRIVATE_KEY);
            return;
        }
        let several = lines.len() > 1;
        for (n, l) in lines {
            if let Err(m) = check_ssh_key(l) {
                // Several keys: say which line (of the sshKey value, or of the key file).
                if several {
                    self.err(path, format!("line {n}: {m}"));
                } else {
                    self.err(path, m);
                }
            }
        }
    }

    fn hints(&mut self, r: &RootDeviceHints, p: &str) {
        let strings = [
            ("deviceName", &r.device_name),
            ("hctl", &r.hctl),
            ("model", &r.model),
            ("vendor", &r.vendor),
            ("serialNumber", &r.serial_number),
            ("wwn", &r.wwn),
        ];
        for (k, v) in strings {
            if v.as_deref().is_some_and(|s| s.trim().is_empty()) {
                self.err(format!("{p}.{k}"), "empty; remove the key or give a value");
            }
        }
        if let Some(d) = r.device_name.as_deref().filter(|d| !d.trim().is_empty()) {
            if !d.starts_with("/dev/")
                || d.len() <= 5
                || d.contains("..")
                || d.chars().any(char::is_whitespace)
            {
                self.err(
                    format!("{p}.deviceName"),
                    format!("{} must be a device path under /dev/, e.g. /dev/sda or /dev/disk/by-path/pci-0000:00:1f.2-ata-1", q(d)),
                );
            }
        }
        if let Some(h) = r.hctl.as_deref().filter(|d| !d.trim().is_empty()) {
            let parts: Vec<&str> = h.split(':').collect();
            if parts.len() != 4
                || parts
                    .iter()
                    .any(|x| x.is_empty() || !x.bytes().all(|b| b.is_ascii_digit()))
            {
                self.err(
                    format!("{p}.hctl"),
                    format!("{} must be host:channel:target:lun numbers, e.g. 0:0:0:0", q(h)),
                );
            }
        }
        if let Some(w) = r.wwn.as_deref().filter(|d| !d.trim().is_empty()) {
            let hex = w.strip_prefix("0x").or_else(|| w.strip_prefix("0X")).unwrap_or(w);
            if hex.is_empty() || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
                self.err(
                    format!("{p}.wwn"),
                    format!("{} is not a hex World Wide Name, e.g. 0x5000c500a0b1c2d3", q(w)),
                );
            }
        }
    }

    /// Checks one host's NMState; returns its static addresses (with their paths) and keyfiles.
    fn nmstate(
        &mut self,
        h: &Host,
        nc: &Value,
        np: &str,
        hp: &str,
    ) -> (Vec<StaticIp>, Vec<(String, String)>) {
        let before = self.errors.len();
        let mut statics = Vec::new();
        // NIC names the host lists (the NMState must use only these for physical NICs).
        let listed: HashSet<&str> = h.interfaces.iter().map(|i| i.name.as_str()).collect();
        let listed_macs: HashSet<String> = h
            .interfaces
            .iter()
            .filter_map(|i| normalize_mac(&i.mac_address).ok())
            .collect();
        let raw_ifaces: &[Value] = nc
            .get("interfaces")
            .and_then(Value::as_array)
            .map(Vec::as_slice)
            .unwrap_or(&[]);
        let declared: HashSet<&str> = raw_ifaces
            .iter()
            .filter_map(|i| i.get("name").and_then(Value::as_str))
            .collect();
        let mut parsed_ok = true;
        let mut needs_listing: Vec<(String, String, String)> = Vec::new(); // (path, name, why)

        for (k, raw) in raw_ifaces.iter().enumerate() {
            let ipath = format!("{np}.interfaces[{k}]");
            let name = raw.get("name").and_then(Value::as_str).unwrap_or("");
            // Types nmstate does not know deserialise as `unknown` and gen_conf silently turns
            // them into ethernet: refuse them before nmstate sees them.
            let ty = match raw.get("type") {
                None | Some(Value::Null) => {
                    self.err(
                        format!("{ipath}.type"),
                        "required: nmstate cannot tell an interface's type offline (e.g. type: ethernet)",
                    );
                    parsed_ok = false;
                    continue;
                }
                Some(Value::String(t)) => t.clone(),
                Some(other) => {
                    self.err(format!("{ipath}.type"), format!("expected a string, got {other}"));
                    parsed_ok = false;
                    continue;
                }
            };
            let known = serde_json::from_value::<nmstate::InterfaceType>(Value::String(ty.clone()))
                .ok()
                .filter(|t| {
                    !matches!(
                        t,
                        nmstate::InterfaceType::Unknown | nmstate::InterfaceType::Other(_)
                    )
                });
            let Some(t) = known else {
                self.err(
                    format!("{ipath}.type"),
                    format!(
                        "{} is not an interface type nmstate knows (it would treat it as \"unknown\"); \
                         use ethernet, bond, vlan, linux-bridge, ovs-bridge, ovs-interface, vxlan, \
                         mac-vlan, vrf, dummy, infiniband, ...",
                        q(&ty)
                    ),
                );
                parsed_ok = false;
                continue;
            };
            if let Some(why) = bad_ifname(name) {
                self.err(format!("{ipath}.name"), format!("{} {why}", q(name)));
                parsed_ok = false;
                continue;
            }
            let iface = match read_reporting_unknown::<nmstate::Interface>(raw, &ipath, base_interface_keys) {
                Ok(x) => x,
                Err((unknown, other)) => {
                    self.errors.extend(unknown);
                    if let Some(m) = other {
                        self.err(&ipath, format!("nmstate cannot read it: {m}"));
                    }
                    parsed_ok = false;
                    continue;
                }
            };
            // nmstate reads any u16; 802.1Q ids are 12 bits, 4095 reserved.
            if let nmstate::Interface::Vlan(vl) = &iface {
                if let Some(id) = vl.vlan.as_ref().map(|c| c.id).filter(|id| *id > 4094) {
                    self.err(
                        format!("{ipath}.vlan.id"),
                        format!("{id} is not a VLAN id; 802.1Q ids are 0 to 4094"),
                    );
                    parsed_ok = false;
                }
            }
            if t == nmstate::InterfaceType::Ethernet {
                if !listed.contains(name) {
                    needs_listing.push((
                        format!("{ipath}.name"),
                        name.to_string(),
                        "ethernet interface".into(),
                    ));
                }
                if let Some(m) = iface.base_iface().mac_address.as_deref() {
                    if normalize_mac(m).is_ok_and(|n| !listed_macs.contains(&n)) {
                        self.warn(
                            format!("{ipath}.mac-address"),
                            format!("{} is not one of the MACs in {hp}.interfaces; the host is recognised by those", q(m)),
                        );
                    }
                }
            }
            // Ports of bonds/bridges and VLAN bases that the NMState does not declare become
            // ethernet connections (gen_conf writes them): they must be listed NICs too.
            for port in iface.ports().unwrap_or_default() {
                if !declared.contains(port) && !listed.contains(port) {
                    needs_listing.push((ipath.clone(), port.to_string(), format!("port of {}", q(name))));
                }
            }
            if let Some(base) = raw.pointer("/vlan/base-iface").and_then(Value::as_str) {
                if !declared.contains(base) && !listed.contains(base) {
                    needs_listing.push((
                        format!("{ipath}.vlan.base-iface"),
                        base.to_string(),
                        format!("base of VLAN {}", q(name)),
                    ));
                }
            }
            // Static addresses, as written.
            for fam in ["ipv4", "ipv6"] {
                let Some(addrs) = raw.pointer(&format!("/{fam}/address")).and_then(Value::as_array) else {
                    continue;
                };
                for (a, av) in addrs.iter().enumerate() {
                    let Some(raw) = av.get("ip").and_then(Value::as_str) else {
                        continue;
                    };
                    if let Ok(ip) = raw.parse::<IpAddr>() {
                        statics.push(StaticIp {
                            path: format!("{ipath}.{fam}.address[{a}].ip"),
                            raw: raw.to_string(),
                            ip,
                        });
                    }
                }
            }
        }
        for (path, name, why) in needs_listing {
            self.err(
                path,
                format!(
                    "{why} {} is not in {hp}.interfaces; list it there with its MAC ({{name: {name}, macAddress: ...}}) \
                     so the host's NICs can be matched",
                    q(&name)
                ),
            );
        }
        if !parsed_ok || self.errors.len() > before {
            return (statics, Vec::new());
        }
        // The whole document as nmstate reads it (NetworkState::new_from_json is this serde
        // read): every unknown key outside the interfaces (dns-resolver, routes, ...) at once.
        let state = match read_reporting_unknown::<nmstate::NetworkState>(nc, np, |_| Vec::new()) {
            Ok(s) => s,
            Err((unknown, other)) => {
                self.errors.extend(unknown);
                if let Some(m) = other {
                    self.err(np, format!("nmstate cannot read it: {}", clean_nmstate(&m)));
                }
                return (statics, Vec::new());
            }
        };
        match state.gen_conf() {
            Ok(mut m) => {
                let mut files = m.remove("NetworkManager").unwrap_or_default();
                files.sort();
                (statics, files)
            }
            Err(e) => {
                self.err(
                    np,
                    format!("nmstate cannot compile it: {}", clean_nmstate(&e.to_string())),
                );
                (statics, Vec::new())
            }
        }
    }
}

/// A static address of the NMState: where, as typed, parsed.
struct StaticIp {
    path: String,
    raw: String,
    ip: IpAddr,
}

/// Names and addresses of the existing nodes.
struct ExistingNodes {
    names: BTreeMap<String, String>,
    ips: HashMap<IpAddr, String>,
}

impl ExistingNodes {
    fn new(c: &ClusterModel) -> Self {
        let mut names = BTreeMap::new();
        let mut ips = HashMap::new();
        for n in &c.nodes {
            names.insert(n.name.to_ascii_lowercase(), n.name.clone());
            for a in &n.addresses {
                if let Ok(ip) = a.address.parse::<IpAddr>() {
                    ips.insert(ip.to_canonical(), n.name.clone());
                } else if matches!(a.kind.as_str(), "Hostname" | "InternalDNS" | "ExternalDNS") {
                    names.insert(a.address.to_ascii_lowercase(), n.name.clone());
                }
            }
        }
        ExistingNodes { names, ips }
    }
    fn by_name(&self, n: &str) -> Option<&str> {
        self.names.get(&n.to_ascii_lowercase()).map(String::as_str)
    }
    fn by_ip(&self, ip: IpAddr) -> Option<&str> {
        self.ips.get(&ip).map(String::as_str)
    }
}

/// Lowercase RFC 1123 hostname check; the error says what is wrong.
pub(crate) fn check_hostname(name: &str) -> Result<(), String> {
    let qn = q(name);
    if name.len() > 253 {
        return Err(format!(
            "{qn} is {} characters long; a hostname has at most 253",
            name.len()
        ));
    }
    if name.bytes().any(|b| b.is_ascii_uppercase()) {
        return Err(format!(
            "{qn} must be lowercase (RFC 1123; Kubernetes node names are lowercase){}",
            hostname_suggestion(name)
        ));
    }
    for label in name.split('.') {
        if label.is_empty() {
            return Err(format!(
                "{qn} has an empty label (leading, trailing or double dot)"
            ));
        }
        if label.len() > 63 {
            return Err(format!(
                "{qn}: label {} is {} characters long; at most 63",
                q(label),
                label.len()
            ));
        }
        let b = label.as_bytes();
        if !b
            .iter()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'-')
            || b[0] == b'-'
            || b[b.len() - 1] == b'-'
        {
            return Err(format!(
                "{qn} is not a valid hostname: each dot-separated label must be lowercase letters, digits \
                 and '-', starting and ending with a letter or digit (RFC 1123){}",
                hostname_suggestion(name)
            ));
        }
    }
    if name == "localhost" || name.starts_with("localhost.") {
        return Err(format!(
            "{qn} is not a usable node name; give the host its own name"
        ));
    }
    Ok(())
}

/// `: use "worker-8"` for `Worker_8`: the name lowercased, every character RFC 1123 does not
/// allow replaced by `-`, labels trimmed of leading/trailing `-`; empty when even that is not a
/// valid hostname (a suggestion must itself pass [`check_hostname`]).
fn hostname_suggestion(name: &str) -> String {
    let fixed: Vec<String> = name
        .to_ascii_lowercase()
        .split('.')
        .map(|l| {
            l.chars()
                .map(|c| {
                    if c.is_ascii_lowercase() || c.is_ascii_digit() {
                        c
                    } else {
                        '-'
                    }
                })
                .collect::<String>()
                .trim_matches('-')
                .to_string()
        })
        .collect();
    let s = fixed.join(".");
    if s != name && check_hostname(&s).is_ok() {
        format!(": use {}", q(&s))
    } else {
        String::new()
    }
}

/// `52:54:00:AA:00:30` / `52-54-00-aa-00-30` → `52:54:00:aa:00:30`; Err says why not.
pub(crate) fn normalize_mac(s: &str) -> Result<String, String> {
    let sep = if s.contains('-') { '-' } else { ':' };
    let parts: Vec<&str> = s.split(sep).collect();
    if parts.len() != 6
        || parts
            .iter()
            .any(|p| p.len() != 2 || !p.bytes().all(|b| b.is_ascii_hexdigit()))
    {
        return Err(
            "is not a MAC address: six two-digit hex octets separated by ':', e.g. 52:54:00:aa:00:30".into(),
        );
    }
    let mac = parts.join(":").to_ascii_lowercase();
    let first = u8::from_str_radix(parts[0], 16).unwrap_or(0);
    if mac == "00:00:00:00:00:00" {
        return Err("is the all-zero MAC; give the NIC's real address".into());
    }
    if first & 1 == 1 {
        return Err("is a multicast/broadcast MAC; a NIC's own address is unicast (first octet even)".into());
    }
    Ok(mac)
}

/// Why `ip` cannot be a node's static address (None: it can).
/// Addresses of the cluster itself that a new node must not take (why, for the error), from
/// the cluster model: the cluster (pod) and service networks (Network.config/cluster; a node
/// there never gets its serving certificate, approve refuses such SANs, and its traffic would
/// be routed to pods/services), a machine network's own network address and, for IPv4 with a
/// prefix of at most /30, its broadcast address, and the API server's address when the API
/// URLs (Infrastructure status) name an IP literal. The API/ingress VIPs are not part of the
/// model, so they are not checked here.
pub(crate) fn reserved_ip(
    ip: IpAddr,
    cluster: &ClusterModel,
    machine_nets: &[ipnet::IpNet],
) -> Option<String> {
    let nets = |cidrs: &[String]| -> Option<String> {
        cidrs
            .iter()
            .filter_map(|c| c.parse::<ipnet::IpNet>().ok().map(|n| (c, n)))
            .find(|(_, n)| n.contains(&ip))
            .map(|(c, _)| c.clone())
    };
    if let Some(c) = nets(&cluster.networks.cluster_networks) {
        return Some(format!(
            "in the cluster (pod) network {c}; a node address there collides with pod addresses and its serving certificate is never approved: use an address of the machine network"
        ));
    }
    if let Some(c) = nets(&cluster.networks.service_networks) {
        return Some(format!(
            "in the service network {c}; a node address there collides with service addresses and its serving certificate is never approved: use an address of the machine network"
        ));
    }
    for n in machine_nets {
        if !n.contains(&ip) {
            continue;
        }
        let host_bits = n.max_prefix_len() - n.prefix_len();
        if host_bits >= 2 && ip == n.network() {
            return Some(format!(
                "the network address of the machine network {n}, not a host address"
            ));
        }
        if let ipnet::IpNet::V4(n4) = n {
            if host_bits >= 2 && ip == IpAddr::V4(n4.broadcast()) {
                return Some(format!(
                    "the broadcast address of the machine network {n}, not a host address"
                ));
            }
        }
    }
    for url in [&cluster.cluster.api_url, &cluster.cluster.api_int_url] {
        let host = url
            .parse::<http::Uri>()
            .ok()
            .and_then(|u| u.host().map(str::to_string));
        let host_ip = host.and_then(|h| {
            h.trim_start_matches('[')
                .trim_end_matches(']')
                .parse::<IpAddr>()
                .ok()
        });
        if host_ip.map(|h| h.to_canonical()) == Some(ip) {
            return Some(format!("the API server's address ({url})"));
        }
    }
    for (vips, what) in [
        (&cluster.platform.api_vips, "the API VIP"),
        (&cluster.platform.ingress_vips, "the ingress VIP"),
    ] {
        if vips
            .iter()
            .any(|v| v.parse::<IpAddr>().is_ok_and(|v| v.to_canonical() == ip))
        {
            return Some(format!(
                "{what} (the Infrastructure's platformStatus), which the control plane's keepalived serves: use another address of the machine network"
            ));
        }
    }
    None
}

/// Why `name` cannot be a Linux interface name (the kernel's `dev_valid_name`: 1 to 15 bytes,
/// not `.` or `..`, no `/`, `:` or whitespace), nor a NetworkManager keyfile's name (no control
/// character): what follows the quoted name in the error. None when it can.
pub(crate) fn bad_ifname(name: &str) -> Option<&'static str> {
    if name.len() > 15 {
        Some("is longer than 15 bytes, the longest interface name Linux takes")
    } else if name == "." || name == ".." {
        Some("is not an interface name")
    } else if name
        .chars()
        .any(|c| c == '/' || c == ':' || c.is_whitespace() || c.is_control())
    {
        Some("is not an interface name: no '/', ':', spaces or control characters")
    } else {
        None
    }
}

pub(crate) fn unusable_ip(ip: IpAddr) -> Option<&'static str> {
    match ip {
        IpAddr::V4(a) => {
            if a.is_loopback() {
                Some("a loopback address")
            } else if a.is_link_local() {
                Some("a link-local address")
            } else if a.is_unspecified() {
                Some("the unspecified address")
            } else if a.is_multicast() {
                Some("a multicast address")
            } else if a.is_broadcast() {
                Some("the broadcast address")
            } else {
                None
            }
        }
        IpAddr::V6(a) => {
            if a.is_loopback() {
                Some("a loopback address")
            } else if a.is_unicast_link_local() {
                Some("a link-local address")
            } else if a.is_unspecified() {
                Some("the unspecified address")
            } else if a.is_multicast() {
                Some("a multicast address")
            } else {
                None
            }
        }
    }
}

/// What a private key given as `sshKey` gets: no line of it is ever quoted.
const PRIVATE_KEY: &str =
    "this is a private key; give the public key (the .pub file), and keep the private key out of the config";

/// Checks one `authorized_keys`-style line, `<type> <base64> [comment]`, by parsing it as an
/// OpenSSH public key (the `ssh-key` crate): the type must be one RHCOS's sshd accepts
/// (`ssh-ed25519`, `ssh-rsa`, `ecdsa-sha2-nistp256/384/521`, `sk-…@openssh.com`), the base64
/// data must decode to a whole key of that same type (length prefixes, Ed25519's 32 bytes,
/// RSA's exponent and modulus, an ECDSA curve point) with nothing left over. A line cut short
/// (a key pasted from a narrow terminal) fails here instead of landing in the image, where
/// login as `core` would fail.
///
/// Err: what is wrong and what to do, quoting the start of the line (never a private key).
pub(crate) fn check_ssh_key(line: &str) -> Result<(), String> {
    const TYPES: [&str; 7] = [
        "ssh-rsa",
        "ssh-ed25519",
        "ecdsa-sha2-nistp256",
        "ecdsa-sha2-nistp384",
        "ecdsa-sha2-nistp521",
        "sk-ecdsa-sha2-nistp256@openssh.com",
        "sk-ssh-ed25519@openssh.com",
    ];
    let shown = if line.chars().count() > 40 {
        format!(
            "{}…",
            &line[..line.char_indices().nth(40).map(|(i, _)| i).unwrap_or(line.len())]
        )
    } else {
        line.to_string()
    };
    let bad = |why: &str| Err(format!("{} is not an OpenSSH public key: {why}", q(&shown)));
    if line.contains("PRIVATE KEY") {
        return Err(PRIVATE_KEY.into());
    }
    let mut it = line.split_whitespace();
    let (Some(ty), Some(_)) = (it.next(), it.next()) else {
        return bad("expected \"<type> <base64> [comment]\", e.g. ssh-ed25519 AAAAC3Nz... user@host");
    };
    if !TYPES.contains(&ty) {
        return bad(&format!(
            "unknown key type {}; expected ssh-ed25519, ssh-rsa or ecdsa-sha2-nistp256/384/521",
            q(ty)
        ));
    }
    let (_, data) = line.split_once(char::is_whitespace).unwrap_or_default();
    let data = data.trim_start().split(char::is_whitespace).next().unwrap_or("");
    if !data
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'+' | b'/' | b'='))
    {
        return bad("the key data is not base64 (only A-Z, a-z, 0-9, +, / and = may appear)");
    }
    match ssh_key::PublicKey::from_openssh(line) {
        Ok(_) => Ok(()),
        // The type in the text differs from the one inside the key data.
        Err(ssh_key::Error::AlgorithmUnknown) => bad(&format!("the key data is not a {ty} key")),
        Err(_) => bad(
            "the key data is cut short or damaged; copy the whole line of the .pub file again \
             (it is a single line)",
        ),
    }
}

/// Deserialises `raw` as nmstate's `T`, reporting every unknown key, not only the first.
///
/// nmstate refuses unknown keys (serde `deny_unknown_fields`) one at a time, without saying
/// where: `unknown field \`adress\`, expected one of \`enabled\`, ...`. Each such key is looked
/// up in `raw` (the mapping holding it whose other keys best match the expected list, the
/// deepest on a tie), reported at its path under `path`
/// (`hosts[0].networkConfig.interfaces[0].ipv4.adress: unknown field; did you mean
/// "address"?`), removed, and the read retried, as the top level of the nodes-config reports
/// all of its unknown keys.
///
/// `flat_keys(path)` gives the keys to suggest from when serde names none (a key unknown to
/// a struct that flattens another: nmstate's interfaces flatten their base interface).
///
/// Err: (the unknown-key errors, the first other error's text if the read failed for another
/// reason too).
fn read_reporting_unknown<T: serde::de::DeserializeOwned>(
    raw: &Value,
    path: &str,
    flat_keys: impl Fn(&str) -> Vec<String>,
) -> Result<T, (Vec<FieldError>, Option<String>)> {
    let mut v = raw.clone();
    let mut unknown = Vec::new();
    // Each round removes one key: bounded by the document's size; the cap is a backstop.
    for _ in 0..256 {
        let msg = match serde_json::from_value::<T>(v.clone()) {
            Ok(t) if unknown.is_empty() => return Ok(t),
            Ok(_) => return Err((unknown, None)),
            Err(e) => strip_position(&e.to_string()),
        };
        let Some((key, mut expected)) = unknown_field(&msg) else {
            return Err((unknown, Some(msg)));
        };
        let Some(at) = remove_unknown(&mut v, &key, &expected) else {
            return Err((unknown, Some(msg)));
        };
        if expected.is_empty() {
            expected = flat_keys(&at);
        }
        let exp: Vec<&str> = expected.iter().map(String::as_str).collect();
        let text = match super::model::did_you_mean(&key, &exp) {
            Some(s) => format!("unknown field; did you mean {}?", q(s)),
            None if exp.is_empty() => "unknown field".to_string(),
            None => format!("unknown field; expected one of {}", exp.join(", ")),
        };
        let full = if at.is_empty() {
            key.clone()
        } else {
            format!("{at}.{key}")
        };
        unknown.push(FieldError::new(format!("{path}.{full}"), text));
    }
    Err((unknown, None))
}

/// Keys an nmstate interface takes at its top level, for a key unknown there (`at` empty):
/// through the flatten of nmstate's base interface serde names no expected keys. The base
/// interface's keys (nmstate 2.2 `BaseInterface`), then the type sections (`ethernet`, `bond`'s
/// `link-aggregation`, `vlan`, the bridges' `bridge`, ...).
fn base_interface_keys(at: &str) -> Vec<String> {
    const KEYS: [&str; 40] = [
        "name",
        "profile-name",
        "description",
        "type",
        "driver",
        "state",
        "identifier",
        "mac-address",
        "permanent-mac-address",
        "pci-address",
        "mtu",
        "min-mtu",
        "max-mtu",
        "wait-ip",
        "ipv4",
        "ipv6",
        "mptcp",
        "controller",
        "accept-all-mac-addresses",
        "copy-mac-from",
        "ovs-db",
        "802.1x",
        "lldp",
        "ethtool",
        "dispatch",
        "alt-names",
        "ethernet",
        "veth",
        "link-aggregation",
        "vlan",
        "bridge",
        "vxlan",
        "mac-vlan",
        "mac-vtap",
        "vrf",
        "infiniband",
        "ipvlan",
        "macsec",
        "hsr",
        "patch",
    ];
    if at.is_empty() {
        KEYS.iter().map(|k| k.to_string()).collect()
    } else {
        Vec::new()
    }
}

/// `unknown field \`x\`, expected one of \`a\`, \`b\`` (serde's wording) → (x, [a, b]).
fn unknown_field(msg: &str) -> Option<(String, Vec<String>)> {
    let rest = &msg[msg.find("unknown field `")? + "unknown field `".len()..];
    let end = rest.find('`')?;
    let key = rest[..end].to_string();
    let expected = rest[end + 1..]
        .split('`')
        .skip(1)
        .step_by(2)
        .map(str::to_string)
        .collect();
    Some((key, expected))
}

/// Removes `key` from the mapping in `v` that holds it and whose other keys are most often in
/// `expected` (deepest first on a tie); returns that mapping's path (`ipv4`, `bond.options`,
/// `""` for `v` itself), None when no mapping holds `key`.
fn remove_unknown(v: &mut Value, key: &str, expected: &[String]) -> Option<String> {
    fn walk(
        v: &Value,
        path: String,
        depth: usize,
        key: &str,
        exp: &[String],
        out: &mut Vec<(usize, usize, String)>,
    ) {
        match v {
            Value::Object(m) => {
                if m.contains_key(key) {
                    let score = m.keys().filter(|k| exp.contains(k)).count();
                    out.push((score, depth, path.clone()));
                }
                for (k, c) in m {
                    let p = if path.is_empty() {
                        k.clone()
                    } else {
                        format!("{path}.{k}")
                    };
                    walk(c, p, depth + 1, key, exp, out);
                }
            }
            Value::Array(a) => {
                for (i, c) in a.iter().enumerate() {
                    walk(c, format!("{path}[{i}]"), depth + 1, key, exp, out);
                }
            }
            _ => {}
        }
    }
    let mut found = Vec::new();
    walk(v, String::new(), 0, key, expected, &mut found);
    // Highest score, then deepest, then first in document order.
    let (_, _, at) = found
        .into_iter()
        .enumerate()
        .max_by_key(|(i, (score, depth, _))| (*score, *depth, std::cmp::Reverse(*i)))
        .map(|(_, f)| f)?;
    let mut cur = &mut *v;
    for step in path_steps(&at) {
        cur = match step {
            Step::Key(k) => cur.get_mut(k)?,
            Step::Index(i) => cur.get_mut(i)?,
        };
    }
    cur.as_object_mut()?.remove(key)?;
    Some(at)
}

enum Step<'a> {
    Key(&'a str),
    Index(usize),
}

/// `a.b[2].c` → Key(a), Key(b), Index(2), Key(c). Keys containing `.` or `[` would split
/// wrongly; nmstate's keys never do.
fn path_steps(p: &str) -> Vec<Step<'_>> {
    let mut out = Vec::new();
    for part in p.split('.').filter(|s| !s.is_empty()) {
        let (name, idx) = part.split_once('[').map_or((part, ""), |(n, r)| (n, r));
        if !name.is_empty() {
            out.push(Step::Key(name));
        }
        for i in idx.split('[') {
            if let Ok(n) = i.trim_end_matches(']').parse() {
                out.push(Step::Index(n));
            }
        }
    }
    out
}

/// Drops serde's " at line N column M" (positions in our re-serialised JSON mean nothing to the
/// user: the field path says where).
fn strip_position(s: &str) -> String {
    match s.rfind(" at line ") {
        Some(i) if s[i..].contains(" column ") => s[..i].to_string(),
        _ => s.to_string(),
    }
}

/// nmstate errors look like `InvalidArgument: Invalid JSON string: interfaces: ...`.
fn clean_nmstate(s: &str) -> String {
    let s = strip_position(s);
    let s = s.strip_prefix("InvalidArgument: ").unwrap_or(&s);
    let s = s.strip_prefix("Invalid JSON string: ").unwrap_or(s);
    s.to_string()
}

/// Maps YAML paths of the one flag-built host to the flags that set them.
fn flag_path(p: &str) -> String {
    let map: [(&str, &str); 6] = [
        ("hosts[0].hostname", "--hostname"),
        ("hosts[0].interfaces", "--mac-address"),
        ("hosts[0].rootDeviceHints.", "--root-device-hint "),
        ("hosts[0].networkConfig", "--network-config-path"),
        ("cpuArchitecture", "--cpu-architecture"),
        ("sshKey", "--ssh-key-path"),
    ];
    for (from, to) in map {
        if let Some(rest) = p.strip_prefix(from) {
            return match from {
                "hosts[0].interfaces" => to.to_string(),
                "hosts[0].networkConfig" => format!("{to}{}", rest.replacen('.', " ", 1)),
                _ => format!("{to}{rest}"),
            };
        }
    }
    if p == "hosts" {
        return "--mac-address".into();
    }
    p.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hostname_suggestions_are_valid_hostnames() {
        // A suggestion is only given when it passes the check itself (Worker_8 -> worker-8,
        // not the invalid "worker_8").
        let e = check_hostname("Worker_8").unwrap_err();
        assert!(e.ends_with(": use \"worker-8\""), "{e}");
        let e = check_hostname("worker_0").unwrap_err();
        assert!(e.ends_with(": use \"worker-0\""), "{e}");
        assert!(check_hostname("Worker-0")
            .unwrap_err()
            .ends_with(": use \"worker-0\""));
        let e = check_hostname("___").unwrap_err();
        assert!(!e.contains("use"), "no valid suggestion: {e}");
        assert!(check_hostname("worker-8").is_ok());
    }

    #[test]
    fn macs() {
        assert_eq!(normalize_mac("52:54:00:AA:00:30").unwrap(), "52:54:00:aa:00:30");
        assert_eq!(normalize_mac("52-54-00-AA-00-30").unwrap(), "52:54:00:aa:00:30");
        assert!(normalize_mac("52:54:00:AA:00").is_err());
        assert!(normalize_mac("52:54:00:AA:00:3g").is_err());
        assert!(normalize_mac("01:00:5e:00:00:01").is_err());
        assert!(normalize_mac("00:00:00:00:00:00").is_err());
    }

    #[test]
    fn hostnames() {
        assert!(check_hostname("worker-0.ostest.example.com").is_ok());
        assert!(check_hostname("Worker-0").is_err());
        assert!(check_hostname("-a").is_err());
        assert!(check_hostname("a..b").is_err());
        assert!(check_hostname(&"a".repeat(63)).is_ok());
        assert!(check_hostname(&"a".repeat(64)).is_err());
        assert!(check_hostname(&["a".repeat(63).as_str(); 4].join(".")).is_err()); // 255
        assert!(check_hostname("localhost").is_err());
    }

    #[test]
    fn flag_paths() {
        assert_eq!(flag_path("hosts[0].interfaces[0].macAddress"), "--mac-address");
        assert_eq!(
            flag_path("hosts[0].rootDeviceHints.wwn"),
            "--root-device-hint wwn"
        );
        assert_eq!(
            flag_path("hosts[0].networkConfig.interfaces[0].ipv4.address[0].ip"),
            "--network-config-path interfaces[0].ipv4.address[0].ip"
        );
        assert_eq!(flag_path("hosts[0].networkConfig"), "--network-config-path");
        assert_eq!(flag_path("cluster"), "cluster");
    }

    #[test]
    fn strip() {
        assert_eq!(strip_position("bad thing at line 3 column 1"), "bad thing");
        assert_eq!(
            clean_nmstate("InvalidArgument: Invalid JSON string: interfaces: x at line 1 column 9"),
            "interfaces: x"
        );
    }
}
