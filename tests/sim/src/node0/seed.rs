//! The source database's contents: one finished compact agent-based install, written with COPY
//! through one `psql` run (fast for `--hosts 50 --events 10000`).
//!
//! Deterministic: ids are derived from fixed seeds ([`crate::boot::rest::derived_uuid`]), times
//! count from [`BASE_TIME`]; the same `--hosts`/`--events` always give the same rows.

use serde_json::json;

use crate::boot::rest::derived_uuid;

/// Cluster name (also the infra-env's name).
pub const CLUSTER_NAME: &str = "agent-cluster";
/// Base DNS domain: the API is `api.agent-cluster.example.com`.
pub const BASE_DOMAIN: &str = "example.com";
/// OpenShift version of the installed cluster.
pub const OPENSHIFT_VERSION: &str = "4.18.12";
/// Release image of the installed cluster.
pub const RELEASE_IMAGE: &str = "quay.io/openshift-release-dev/ocp-release:4.18.12-x86_64";
/// API VIP and ingress VIP.
pub const API_VIP: &str = "192.168.111.5";
/// Ingress VIP.
pub const INGRESS_VIP: &str = "192.168.111.4";
/// When the install started (events count seconds from here).
pub const BASE_TIME: i64 = 1_767_261_600; // 2026-01-01T10:00:00Z
/// The pull secret stored in `clusters.pull_secret` (a dockerconfigjson).
pub const PULL_SECRET: &str = r#"{"auths":{"quay.io":{"auth":"bm9kZTA6c2VjcmV0","email":"node0@example.com"},"registry.redhat.io":{"auth":"bm9kZTA6c2VjcmV0"}}}"#;

/// Assisted-service id of the cluster (`clusters.id`).
pub fn cluster_id() -> String {
    derived_uuid("agent-day2-sim/node0/cluster")
}
/// OpenShift cluster id (`clusters.openshift_cluster_id`).
pub fn openshift_cluster_id() -> String {
    derived_uuid("agent-day2-sim/node0/openshift-cluster-id")
}
/// The infra-env's id.
pub fn infra_env_id() -> String {
    derived_uuid("agent-day2-sim/node0/infra-env")
}
/// Host number `i`'s id.
pub fn host_id(i: usize) -> String {
    derived_uuid(&format!("agent-day2-sim/node0/host/{i}"))
}
/// Host number `i`'s hostname: master-0..2, then worker-0...
pub fn hostname(i: usize) -> String {
    if i < 3 {
        format!("master-{i}")
    } else {
        format!("worker-{}", i - 3)
    }
}
/// Host number `i`'s role (master for the first three).
pub fn role(i: usize) -> &'static str {
    if i < 3 {
        "master"
    } else {
        "worker"
    }
}
/// Host number `i`'s MAC address.
pub fn mac(i: usize) -> String {
    format!("52:54:00:aa:{:02x}:{:02x}", i / 256, i % 256)
}
/// Host number `i`'s IPv4 address (192.168.111.20 + i, then 192.168.112.x).
pub fn ip(i: usize) -> String {
    let n = 20 + i;
    format!("192.168.{}.{}", 111 + n / 250, n % 250)
}

/// RFC 3339 UTC time `secs` after [`BASE_TIME`].
pub fn at(secs: i64) -> String {
    time::OffsetDateTime::from_unix_timestamp(BASE_TIME + secs)
        .ok()
        .and_then(|t| t.format(&time::format_description::well_known::Rfc3339).ok())
        .unwrap_or_default()
}

/// One COPY block: `COPY table (cols) FROM stdin;`, rows in COPY text format, `\.`.
struct Copy {
    text: String,
}

impl Copy {
    fn new() -> Copy {
        Copy { text: String::new() }
    }
    fn table(&mut self, table: &str, cols: &[&str], rows: &[Vec<Option<String>>]) {
        self.text
            .push_str(&format!("COPY {table} ({}) FROM stdin;\n", cols.join(", ")));
        for r in rows {
            assert_eq!(r.len(), cols.len(), "{table}: row width");
            let fields: Vec<String> = r
                .iter()
                .map(|f| match f {
                    None => "\\N".to_string(),
                    Some(s) => escape(s),
                })
                .collect();
            self.text.push_str(&fields.join("\t"));
            self.text.push('\n');
        }
        self.text.push_str("\\.\n");
    }
}

/// COPY text format escaping.
fn escape(s: &str) -> String {
    let mut o = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '\\' => o.push_str("\\\\"),
            '\n' => o.push_str("\\n"),
            '\r' => o.push_str("\\r"),
            '\t' => o.push_str("\\t"),
            c => o.push(c),
        }
    }
    o
}

fn s(v: impl Into<String>) -> Option<String> {
    Some(v.into())
}

/// nmstate YAML of host `i` (one ethernet NIC, static IPv4, default route, DNS).
fn network_yaml(i: usize) -> String {
    format!(
        "interfaces:\n- name: eth0\n  type: ethernet\n  state: up\n  mac-address: {mac}\n  ipv4:\n    \
         enabled: true\n    dhcp: false\n    address:\n    - ip: {ip}\n      prefix-length: 24\n\
         dns-resolver:\n  config:\n    server:\n    - 192.168.111.1\n\
         routes:\n  config:\n  - destination: 0.0.0.0/0\n    next-hop-address: 192.168.111.1\n    \
         next-hop-interface: eth0\n",
        mac = mac(i),
        ip = ip(i)
    )
}

/// swagger `infra-env.static_network_config`: a JSON list of
/// `{network_yaml, mac_interface_map: [{logical_nic_name, mac_address}]}`, one per host.
pub fn static_network_config(hosts: usize) -> String {
    let v: Vec<_> = (0..hosts)
        .map(|i| {
            json!({
                "network_yaml": network_yaml(i),
                "mac_interface_map": [{"logical_nic_name": "eth0", "mac_address": mac(i)}],
            })
        })
        .collect();
    serde_json::Value::Array(v).to_string()
}

/// swagger `inventory` of host `i` (as the agent reports it), JSON text.
fn inventory(i: usize) -> String {
    json!({
        "hostname": hostname(i),
        "bmc_address": "0.0.0.0",
        "boot": {"current_boot_mode": "uefi"},
        "cpu": {"architecture": "x86_64", "count": 8, "frequency": 2400, "model_name": "Intel Xeon (Icelake)",
                "flags": ["fpu", "vmx", "sse4_2", "avx2"]},
        "memory": {"physical_bytes": 34359738368u64, "usable_bytes": 33654566912u64},
        "interfaces": [{"name": "eth0", "mac_address": mac(i), "ipv4_addresses": [format!("{}/24", ip(i))],
                        "ipv6_addresses": [], "mtu": 1500, "speed_mbps": 10000, "has_carrier": true,
                        "type": "physical", "vendor": "0x1af4", "product": "0x0001"}],
        "disks": [{"id": "/dev/disk/by-path/pci-0000:00:05.0", "name": "vda", "path": "/dev/vda",
                   "by_path": "/dev/disk/by-path/pci-0000:00:05.0", "drive_type": "HDD",
                   "size_bytes": 137438953472u64, "bootable": true,
                   "installation_eligibility": {"eligible": true, "not_eligible_reasons": null}}],
        "routes": [{"destination": "0.0.0.0", "gateway": "192.168.111.1", "interface": "eth0", "family": 2}],
        "system_vendor": {"manufacturer": "Red Hat", "product_name": "KVM", "virtual": true,
                          "serial_number": format!("node0-sim-{i:04}")},
        "timestamp": BASE_TIME + 60,
    })
    .to_string()
}

/// Event texts: (name, severity, message) for event number `n` of the given kind.
fn cluster_event(n: usize) -> (&'static str, &'static str, String) {
    const M: &[(&str, &str, &str)] = &[
        (
            "cluster_registration_succeeded",
            "info",
            "Successfully registered cluster",
        ),
        (
            "cluster_validation_fixed",
            "info",
            "Cluster validation 'api-vips-valid' is now fixed",
        ),
        (
            "cluster_status_updated",
            "info",
            "Updated status of the cluster to preparing-for-installation",
        ),
        (
            "cluster_status_updated",
            "info",
            "Updated status of the cluster to installing",
        ),
        (
            "cluster_degraded_operators",
            "warning",
            "Operator console status: progressing",
        ),
        (
            "cluster_progress_updated",
            "info",
            "Cluster installation progress: finalizing",
        ),
        (
            "cluster_status_updated",
            "info",
            "Updated status of the cluster to installed",
        ),
    ];
    let (a, b, c) = M[n % M.len()];
    (a, b, format!("{c} (event {n})"))
}

fn host_event(n: usize, host: &str) -> (&'static str, &'static str, String) {
    const M: &[(&str, &str, &str)] = &[
        (
            "host_registration_succeeded",
            "info",
            "Host {h}: Successfully registered",
        ),
        (
            "host_status_updated",
            "info",
            "Host {h}: updated status from discovering to known (Host is ready to be installed)",
        ),
        (
            "host_install_progress_updated",
            "info",
            "Host {h}: reached installation stage Writing image to disk: 45%",
        ),
        (
            "host_install_progress_updated",
            "info",
            "Host {h}: reached installation stage Rebooting",
        ),
        (
            "host_validation_failed",
            "warning",
            "Host {h}: validation 'ntp-synced' that used to succeed is now failing",
        ),
        (
            "host_status_updated",
            "info",
            "Host {h}: updated status from installing-in-progress to installed (Done)",
        ),
    ];
    let (a, b, c) = M[n % M.len()];
    (a, b, format!("{} (event {n})", c.replace("{h}", host)))
}

/// The SQL (COPY blocks in one transaction) that fills an empty schema with one finished
/// compact install: cluster [`CLUSTER_NAME`] (status installed), one infra-env of the same
/// name with static network config for every host, `hosts` hosts (master for the first three,
/// worker after; status installed), `events` events (all with `cluster_id`; every tenth an
/// infra-env event with `infra_env_id` and no host, two of three others a host's event with
/// `host_id` and `infra_env_id`, the rest cluster events), networks, VIPs and the usual
/// monitored operators. `kube_key_name`/`kube_key_namespace` are '' (an agent-based install).
pub fn fill_sql(hosts: usize, events: usize) -> String {
    let cid = cluster_id();
    let ieid = infra_env_id();
    let mut c = Copy::new();
    c.text.push_str("BEGIN;\n");
    let t_done = (events as i64) + 3600;
    c.table(
        "clusters",
        &[
            "id", "kind", "href", "name", "user_name", "org_id", "email_domain", "openshift_version",
            "ocp_release_image", "openshift_cluster_id", "platform_type", "base_dns_domain",
            "cluster_network_cidr", "cluster_network_host_prefix", "service_network_cidr",
            "api_vip_dns_name", "machine_network_cidr", "ssh_public_key", "status", "status_info",
            "status_updated_at", "progress_total_percentage",
            "progress_preparing_for_installation_stage_percentage", "progress_installing_stage_percentage",
            "progress_finalizing_stage_percentage", "progress_finalizing_stage", "schedulable_masters", "schedulable_masters_forced_true",
            "updated_at", "created_at", "install_started_at", "install_completed_at", "pull_secret_set",
            "vip_dhcp_allocation", "validations_info", "logs_info", "install_config_overrides",
            "controller_logs_collected_at", "controller_logs_started_at", "user_managed_networking",
            "additional_ntp_source", "hyperthreading", "feature_usage", "network_type", "cpu_architecture",
            "imported", "control_plane_count", "high_availability_mode", "load_balancer_type",
            "pull_secret", "kube_key_name", "kube_key_namespace",
        ],
        &[vec![
            s(&cid),
            s("Cluster"),
            s(format!("/api/assisted-install/v2/clusters/{cid}")),
            s(CLUSTER_NAME),
            s("admin"),
            s(""),
            s(""),
            s(OPENSHIFT_VERSION),
            s(RELEASE_IMAGE),
            s(openshift_cluster_id()),
            s("baremetal"),
            s(BASE_DOMAIN),
            s("10.128.0.0/14"),
            s("23"),
            s("172.30.0.0/16"),
            s(format!("api.{CLUSTER_NAME}.{BASE_DOMAIN}")),
            s("192.168.111.0/24"),
            s("ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIAgentDay2SimNode0Key node0@example.com"),
            s("installed"),
            s("Cluster is installed"),
            s(at(t_done)),
            s("100"),
            s("100"),
            s("100"),
            s("100"),
            s("Done"),
            s("false"),
            s(if hosts <= 3 { "true" } else { "false" }),
            s(at(t_done)),
            s(at(0)),
            s(at(600)),
            s(at(t_done)),
            s("true"),
            s("false"),
            s(r#"{"configuration":[{"id":"pull-secret-set","status":"success","message":"The pull secret is set."}],"network":[{"id":"api-vips-valid","status":"success","message":"api vips 192.168.111.5 belongs to the Machine CIDR and is not in use."}]}"#),
            s("completed"),
            s(""),
            s(at(t_done - 60)),
            s(at(t_done - 120)),
            s("false"),
            s(""),
            s("all"),
            s(r#"{"Static Network Config":{"id":"STATIC_NETWORK_CONFIG","name":"Static Network Config"}}"#),
            s("OVNKubernetes"),
            s("x86_64"),
            s("false"),
            s("3"),
            s("Full"),
            s("cluster-managed"),
            s(PULL_SECRET),
            s(""),
            s(""),
        ]],
    );
    c.table(
        "infra_envs",
        &[
            "id",
            "kind",
            "href",
            "openshift_version",
            "name",
            "user_name",
            "ssh_authorized_key",
            "pull_secret_set",
            "static_network_config",
            "rendezvous_ip",
            "type",
            "cluster_id",
            "size_bytes",
            "download_url",
            "generator_version",
            "updated_at",
            "created_at",
            "expires_at",
            "cpu_architecture",
            "kube_key_namespace",
        ],
        &[vec![
            s(&ieid),
            s("InfraEnv"),
            s(format!("/api/assisted-install/v2/infra-envs/{ieid}")),
            s(OPENSHIFT_VERSION),
            s(CLUSTER_NAME),
            s("admin"),
            s("ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIAgentDay2SimNode0Key node0@example.com"),
            s("true"),
            s(static_network_config(hosts)),
            s(ip(0)),
            s("full-iso"),
            s(&cid),
            s("1178599424"),
            s(""),
            s("agent-day2-sim"),
            s(at(30)),
            s(at(0)),
            s(at(0)),
            s("x86_64"),
            s(""),
        ]],
    );
    let host_rows: Vec<Vec<Option<String>>> = (0..hosts)
        .map(|i| {
            let h = host_id(i);
            vec![
                s(&h),
                s(&ieid),
                s("Host"),
                s(format!("/api/assisted-install/v2/infra-envs/{ieid}/hosts/{h}")),
                s(&cid),
                s("installed"),
                s("Done"),
                s(r#"{"hardware":[{"id":"has-memory-for-role","status":"success","message":"Sufficient RAM for role"}]}"#),
                s("completed"),
                s(at(t_done - 300)),
                s("Done"),
                s("100"),
                s(""),
                s(at(t_done - 300)),
                s(at(t_done - 300)),
                s(at(t_done - 300)),
                s(at(t_done - 300)),
                s(inventory(i)),
                s(role(i)),
                s(role(i)),
                s(if i == 0 { "true" } else { "false" }),
                s(at(t_done - 200)),
                s("/dev/vda"),
                s("/dev/disk/by-path/pci-0000:00:05.0"),
                s(at(t_done)),
                s(at(60 + i as i64)),
                s(at(t_done)),
                s(at(60 + i as i64)),
                s("agent-day2-sim"),
                s(hostname(i)),
                s("admin"),
                s(if role(i) == "master" { "master" } else { "worker" }),
                s(""),
            ]
        })
        .collect();
    c.table(
        "hosts",
        &[
            "id",
            "infra_env_id",
            "kind",
            "href",
            "cluster_id",
            "status",
            "status_info",
            "validations_info",
            "logs_info",
            "status_updated_at",
            "progress_current_stage",
            "progress_installation_percentage",
            "progress_progress_info",
            "progress_stage_started_at",
            "progress_stage_updated_at",
            "stage_started_at",
            "stage_updated_at",
            "inventory",
            "role",
            "suggested_role",
            "bootstrap",
            "logs_collected_at",
            "installation_disk_path",
            "installation_disk_id",
            "updated_at",
            "created_at",
            "checked_in_at",
            "registered_at",
            "discovery_agent_version",
            "requested_hostname",
            "user_name",
            "machine_config_pool_name",
            "kube_key_namespace",
        ],
        &host_rows,
    );
    let mut ev = Vec::with_capacity(events);
    let (mut nc, mut nh) = (0usize, 0usize);
    for n in 0..events {
        let t = at(n as i64);
        let rid = derived_uuid(&format!("agent-day2-sim/node0/request/{}", n / 5));
        let (name, sev, msg, host, ie) = if n % 10 == 0 || hosts == 0 {
            (
                "image_info_updated",
                "info",
                format!("Generated image (Image type is \"full-iso\", SSH public key is set) (event {n})"),
                None,
                Some(ieid.clone()),
            )
        } else if n % 3 == 0 {
            nc += 1;
            let (a, b, m) = cluster_event(nc);
            (a, b, m, None, None)
        } else {
            nh += 1;
            let hi = nh % hosts;
            let (a, b, m) = host_event(nh / hosts, &hostname(hi));
            (a, b, m, Some(host_id(hi)), Some(ieid.clone()))
        };
        ev.push(vec![
            s(&t),
            s(&t),
            s(&cid),
            host,
            ie,
            s(sev),
            s("user"),
            s(name),
            s(msg),
            s(&t),
            s(rid),
            s(""),
        ]);
    }
    c.table(
        "events",
        &[
            "created_at",
            "updated_at",
            "cluster_id",
            "host_id",
            "infra_env_id",
            "severity",
            "category",
            "name",
            "message",
            "event_time",
            "request_id",
            "props",
        ],
        &ev,
    );
    c.table(
        "cluster_networks",
        &["cluster_id", "cidr", "host_prefix"],
        &[vec![s(&cid), s("10.128.0.0/14"), s("23")]],
    );
    c.table(
        "service_networks",
        &["cluster_id", "cidr"],
        &[vec![s(&cid), s("172.30.0.0/16")]],
    );
    c.table(
        "machine_networks",
        &["cluster_id", "cidr"],
        &[vec![s(&cid), s("192.168.111.0/24")]],
    );
    c.table(
        "api_vips",
        &["cluster_id", "ip", "verification"],
        &[vec![s(&cid), s(API_VIP), s("succeeded")]],
    );
    c.table(
        "ingress_vips",
        &["cluster_id", "ip", "verification"],
        &[vec![s(&cid), s(INGRESS_VIP), s("succeeded")]],
    );
    let ops: Vec<Vec<Option<String>>> = [
        ("console", "builtin", "", "", 3600),
        ("cvo", "builtin", "", "", 3600),
        (
            "lso",
            "olm",
            "openshift-local-storage",
            "local-storage-operator",
            4200,
        ),
    ]
    .iter()
    .map(|(name, ty, ns, sub, to)| {
        vec![
            s(&cid),
            s(*name),
            s(if *ty == "olm" { "4.18" } else { "" }),
            s(*ns),
            s(*sub),
            s(*ty),
            s(""),
            s(to.to_string()),
            s("available"),
            s("All is well"),
            s(at(t_done - 30)),
            s("{}"),
            s("false"),
        ]
    })
    .collect();
    c.table(
        "monitored_operators",
        &[
            "cluster_id",
            "name",
            "version",
            "namespace",
            "subscription_name",
            "operator_type",
            "properties",
            "timeout_seconds",
            "status",
            "status_info",
            "status_updated_at",
            "bundles",
            "dependency_only",
        ],
        &ops,
    );
    c.text.push_str("COMMIT;\n");
    c.text
}
