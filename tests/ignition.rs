//! The node Ignition builder (`agent_day2::ignition`) and the auth material (`agent_day2::auth`),
//! held to checks written independently of them:
//! * the facts a machine reads from the Ignition (`agent_day2_sim::boot::facts::read`, the
//!   simulator's reader: cluster identity, tokens, hosts by MAC) and the files themselves, on
//!   clusters seeded by the simulator for each scenario (default, FIPS, disconnected, platform
//!   none, proxy, several hosts static and DHCP); whether the real consumers accept them is
//!   `tests/real_node.rs`'s (the real assisted-service and its client);
//! * assisted-service's own CRDs (the real kube-apiserver serving them, `--dry-run=server --validate=strict`; from its
//!   source tree, `agent_day2_sim::upstream`, so `#[ignore]`d where that is not there);
//! * upstream's node-joiner acceptance files (openshift/installer's
//!   `cmd/node-joiner/testdata/*.txt`, `#[ignore]`d likewise), parsed here and asserted on our
//!   Ignition;
//! * tokens as the node's service takes them (claims, base64 PEM key), and redaction.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use agent_day2::auth::{self, AuthMaterial};
use agent_day2::cluster::{ClusterModel, ClusterObjects};
use agent_day2::ignition::{self, ComponentImages, HostInterface, HostSpec, NodeImageInputs};
use agent_day2_sim::baseiso::BaseIsoInfo;
use agent_day2_sim::boot::{facts, ignition as sim_ignition};
use agent_day2_sim::scenario::{ProxySettings, Scenario};
use agent_day2_sim::seed::{seed_objects, SeedContext};
use serde_json::{json, Value};
use uuid::Uuid;

use crate::support::upstream;

use upstream::upstream_objects;

fn now() -> SystemTime {
    SystemTime::now()
}

fn ca_pem() -> String {
    agent_day2_sim::pki::Ca::generate("test-mcs-ca").unwrap().cert_pem
}

/// The cluster model of a simulator scenario (the objects the simulator would serve).
fn model(s: &Scenario) -> ClusterModel {
    let ctx = SeedContext {
        api_url: "https://192.168.111.5:6443".into(),
        files_base_url: "http://192.168.111.5:8080".into(),
        base_iso: BaseIsoInfo {
            path: "/nonexistent/base.iso".into(),
            file_name: "rhcos-live.x86_64.iso".into(),
            sha256: "0".repeat(64),
            size: 1 << 20,
        },
        ca_pem: ca_pem(),
    };
    let objs = seed_objects(s, &ctx).unwrap();
    ClusterModel::from_objects(&ClusterObjects::from_values(objs)).unwrap()
}

fn images() -> ComponentImages {
    let d = |n: u8| {
        format!(
            "quay.io/openshift-release-dev/ocp-v4.0-art-dev@sha256:{}",
            format!("{n:02x}").repeat(32)
        )
    };
    ComponentImages {
        api_server: d(1),
        node_agent: d(2),
        orchestrator: d(3),
        utils: d(4),
    }
}

fn dhcp_host(name: &str, mac: &str) -> HostSpec {
    HostSpec {
        hostname: name.into(),
        role: "worker".into(),
        interfaces: vec![HostInterface {
            name: "eth0".into(),
            mac_address: mac.into(),
        }],
        root_device_hints: None,
        network_config: None,
        keyfiles: vec![],
    }
}

fn static_host(name: &str, mac: &str, ip: &str) -> HostSpec {
    let nmstate = json!({
        "interfaces": [{"name": "eth0", "type": "ethernet", "state": "up", "mac-address": mac,
            "ipv4": {"enabled": true, "dhcp": false, "address": [{"ip": ip, "prefix-length": 24}]}}],
        "dns-resolver": {"config": {"server": ["192.168.111.1"]}},
        "routes": {"config": [{"destination": "0.0.0.0/0", "next-hop-address": "192.168.111.1", "next-hop-interface": "eth0"}]}
    });
    let keyfile = format!(
        "[connection]\nid=eth0\ntype=ethernet\ninterface-name=eth0\nautoconnect=true\n\n[ethernet]\nmac-address={}\n\n[ipv4]\nmethod=manual\naddress1={ip}/24,192.168.111.1\ndns=192.168.111.1;\n\n[ipv6]\nmethod=disabled\n",
        mac.to_uppercase()
    );
    HostSpec {
        hostname: name.into(),
        role: "worker".into(),
        interfaces: vec![HostInterface {
            name: "eth0".into(),
            mac_address: mac.into(),
        }],
        root_device_hints: Some(json!({"deviceName": "/dev/sda", "minSizeGigabytes": 100})),
        network_config: Some(nmstate),
        keyfiles: vec![("eth0.nmconnection".into(), keyfile)],
    }
}

struct Built {
    cfg: ignition_config::v3_2::Config,
    json: String,
    auth: AuthMaterial,
    model: ClusterModel,
}

#[allow(clippy::result_large_err)]
fn build_with(
    model: ClusterModel,
    hosts: &[HostSpec],
    pool: Option<&str>,
    ssh: Option<&str>,
) -> Result<Built, agent_day2::error::Error> {
    let auth = auth::generate(auth::DEFAULT_TTL, now()).unwrap();
    let images = images();
    let ps = model.pull_secret.0.clone();
    let cfg = ignition::build(&NodeImageInputs {
        cluster: &model,
        hosts,
        auth: &auth,
        images: &images,
        pull_secret: &ps,
        pool: pool.map(String::from),
        infra_env_id: Uuid::new_v4(),
        ssh_key: ssh.map(String::from),
        cpu_architecture: None,
        base_iso_url: None,
    })?;
    let json = ignition::to_json(&cfg);
    Ok(Built {
        cfg,
        json,
        auth,
        model,
    })
}

fn build(s: &Scenario, hosts: &[HostSpec]) -> Built {
    build_with(model(s), hosts, None, None).unwrap()
}

/// The facts a machine with one of `macs` reads from the JSON (the simulator's reader).
fn facts_of(b: &Built, macs: &[&str]) -> facts::Facts {
    let parsed = sim_ignition::parse(b.json.as_bytes()).unwrap();
    let macs: Vec<String> = macs.iter().map(|m| m.to_string()).collect();
    match facts::read(&parsed, &macs) {
        Ok(f) => f,
        Err(problems) => panic!("the machine cannot read the Ignition:\n{}", problems.join("\n")),
    }
}

/// worker-0 (DHCP) on a cluster of `s`, and the facts of its Ignition.
fn one_dhcp_worker(s: &Scenario) -> (Built, facts::Facts) {
    let b = build(s, &[dhcp_host("worker-0", "52:54:00:aa:00:30")]);
    let f = facts_of(&b, &["52:54:00:aa:00:30"]);
    (b, f)
}

fn file(b: &Built, path: &str) -> Option<String> {
    ignition::files(&b.cfg)
        .into_iter()
        .find(|(p, _, _)| p == path)
        .map(|(_, d, _)| String::from_utf8(d).unwrap())
}

fn mode(b: &Built, path: &str) -> i64 {
    ignition::files(&b.cfg)
        .into_iter()
        .find(|(p, _, _)| p == path)
        .map(|(_, _, m)| m)
        .unwrap_or_else(|| panic!("no {path}"))
}

#[test]
fn default_cluster_one_dhcp_host() {
    let s = Scenario::default();
    let b = build(&s, &[dhcp_host("worker-0", "52:54:00:AA:00:30")]);
    let f = facts_of(&b, &["52:54:00:aa:00:30"]);
    assert_eq!(f.cluster_id, s.cluster_id);
    assert_eq!(f.cluster_name, "ostest");
    assert_eq!(f.api_dns_name, "api.ostest.example.com");
    assert_eq!(f.base_domain, "example.com");
    assert!(
        !f.user_managed_networking,
        "baremetal: networking is cluster-managed"
    );
    assert_eq!(f.cpu_architecture, "x86_64");
    assert_eq!(f.openshift_version, "4.18.12");
    assert_eq!(f.release_image, b.model.version.release_image);
    assert_eq!(f.host_by_mac("52:54:00:aa:00:30").unwrap().hostname, "worker-0");
    assert_eq!(f.agent_token, b.auth.agent_token);
    assert_eq!(auth::parse_rfc3339(&f.token_expiry).unwrap(), b.auth.expires_at);
    // The MCS endpoint and its CA (base64 of the PEM, as assisted-service's swagger says).
    let ep: Value =
        serde_json::from_str(&file(&b, "/etc/assisted/clusterconfig/worker-ignition-endpoint.json").unwrap())
            .unwrap();
    // Without the pool: assisted-service appends it (GetIgnitionEndpointAndCert).
    assert_eq!(
        format!("{}/worker", ep["url"].as_str().unwrap()),
        b.model.machine_config_server.url
    );
    use base64::Engine;
    let ca = base64::engine::general_purpose::STANDARD
        .decode(ep["ca_certificate"].as_str().unwrap())
        .unwrap();
    assert_eq!(
        Some(String::from_utf8(ca).unwrap()),
        b.model.machine_config_server.ca_pem
    );
    // No mirrors: the live system's registries.conf stays; chrony from the cluster's MC.
    assert!(file(&b, "/etc/containers/registries.conf").is_none());
    assert_eq!(file(&b, "/etc/chrony.conf"), b.model.chrony_conf);
    assert!(file(&b, "/etc/chrony.conf").unwrap().contains("192.168.111.1"));
    // The client's importCluster reads networking.userManagedNetworking (nested).
    let imp: Value =
        serde_json::from_str(&file(&b, "/etc/assisted/clusterconfig/import-cluster-config.json").unwrap())
            .unwrap();
    assert_eq!(
        imp,
        serde_json::json!({"networking": {"userManagedNetworking": false}})
    );
    // The service starts only with OS_IMAGES, from the cluster's CoreOS stream.
    let images = file(&b, "/usr/local/share/assisted-service/images.env").unwrap();
    let os: Value =
        serde_json::from_str(images.lines().find_map(|l| l.strip_prefix("OS_IMAGES=")).unwrap()).unwrap();
    let iso = b.model.base_iso_for("x86_64").unwrap();
    assert_eq!(os[0]["url"], iso.location.as_str());
    assert_eq!(os[0]["openshift_version"], "4.18");
    assert_eq!(os[0]["cpu_architecture"], "x86_64");
    // The agent's token travels as PULL_SECRET_TOKEN in rendezvous-host.env; no AGENT_AUTH_TOKEN.
    let rdv = file(&b, "/etc/assisted/rendezvous-host.env").unwrap();
    assert!(
        rdv.contains(&format!("PULL_SECRET_TOKEN={}\n", b.auth.agent_token)),
        "{rdv}"
    );
    let svc = file(&b, "/usr/local/share/assisted-service/assisted-service.env").unwrap();
    assert!(!svc.contains("AGENT_AUTH_TOKEN"), "{svc}");
    // The database container runs as postgres (PostgreSQL refuses root).
    let parsed = sim_ignition::parse(b.json.as_bytes()).unwrap();
    assert!(parsed.units["assisted-service-db.service"]
        .text
        .contains("--user=postgres"));
    // Secret files are 0600, scripts 0755.
    for p in [
        "/root/.docker/config.json",
        "/etc/assisted/rendezvous-host.env",
        "/usr/local/share/assisted-service/assisted-service.env",
        "/etc/assisted/manifests/pull-secret.yaml",
        "/usr/local/share/assisted-service/assisted-db.env",
    ] {
        assert_eq!(mode(&b, p), 0o600, "{p}");
    }
    assert_eq!(mode(&b, "/usr/local/bin/add-node.sh"), 0o755);
    assert_eq!(mode(&b, "/etc/assisted/add-nodes.env"), 0o644);
    // No network config → no pre-NetworkManager unit and no keyfiles.
    assert!(!parsed.units.contains_key("pre-network-manager-config.service"));
    assert!(parsed.under("/etc/assisted/network/").next().is_none());
    assert_eq!(parsed.version, "3.2.0");
}

#[test]
fn fips_cluster() {
    let s = Scenario {
        fips: true,
        ..Default::default()
    };
    let (b, _) = one_dhcp_worker(&s);
    assert!(
        b.model.fips,
        "the model carries FIPS for the kargs (fips=1 goes into the ISO's kargs areas)"
    );
}

#[test]
fn disconnected_cluster() {
    let s = Scenario {
        disconnected: true,
        ..Default::default()
    };
    let (b, _) = one_dhcp_worker(&s);
    let conf = file(&b, "/etc/containers/registries.conf").expect("registries.conf from the mirror sets");
    assert!(!b.model.mirrors.digest_mirrors.is_empty());
    for e in &b.model.mirrors.digest_mirrors {
        assert!(conf.contains(&format!("location = \"{}\"", e.source)), "{conf}");
        for m in &e.mirrors {
            assert!(
                conf.contains(&format!("[[registry.mirror]]\n    location = \"{m}\"")),
                "{conf}"
            );
        }
    }
    // The mirror registry's CA is trusted on the node.
    assert!(!b.model.mirrors.registry_cas.is_empty());
    for pem in b.model.mirrors.registry_cas.values() {
        assert!(
            ignition::files(&b.cfg).iter().any(|(p, d, _)| p
                .starts_with("/etc/pki/ca-trust/source/anchors/agent-day2-registry-")
                && d == pem.as_bytes()),
            "mirror CA not written"
        );
    }
}

#[test]
fn platform_none_uses_user_managed_networking() {
    for platform in ["None", "External"] {
        let s = Scenario {
            platform: platform.into(),
            ..Default::default()
        };
        let (_, f) = one_dhcp_worker(&s);
        assert!(f.user_managed_networking, "platform {platform}");
    }
    let s = Scenario {
        platform: "VSphere".into(),
        ..Default::default()
    };
    assert!(!one_dhcp_worker(&s).1.user_managed_networking);
}

#[test]
fn a_proxy_value_that_would_break_the_systemd_drop_in_is_refused() {
    // Found by trying to break it: a quote or newline in the Proxy status ended the quoted word
    // and injected a [Manager] line into /etc/systemd/system.conf.d.
    for (field, bad) in [
        ("httpProxy", "http://a\"b@h:1"),
        ("httpProxy", "http://h:1\n[Manager]\nDefaultEnvironment=EVIL=1"),
        ("noProxy", "x,\\y"),
    ] {
        let mut m = model(&Scenario::default());
        let mut p = agent_day2::cluster::ProxyInfo {
            http_proxy: Some("http://proxy.example.com:3128".into()),
            https_proxy: None,
            no_proxy: None,
        };
        match field {
            "httpProxy" => p.http_proxy = Some(bad.into()),
            _ => p.no_proxy = Some(bad.into()),
        }
        m.proxy = Some(p);
        let e = build_with(m, &[dhcp_host("worker-0", "52:54:00:aa:00:30")], None, None)
            .err()
            .unwrap_or_else(|| panic!("{bad:?} accepted"))
            .to_string();
        assert!(e.contains(&format!("Proxy/cluster status.{field}")), "{e}");
    }
}

#[test]
fn proxy_cluster() {
    let s = Scenario {
        proxy: Some(ProxySettings {
            http_proxy: Some("http://proxy.example.com:3128".into()),
            https_proxy: Some("http://proxy.example.com:3128".into()),
            no_proxy: Some(".example.com".into()),
            trusted_ca: Some("user-ca-bundle".into()),
        }),
        ..Default::default()
    };
    let (b, _) = one_dhcp_worker(&s);
    let p = b.model.proxy.clone().expect("proxy in the model");
    let infraenv: Value =
        serde_saphyr::from_str(&file(&b, "/etc/assisted/manifests/infraenv.yaml").unwrap()).unwrap();
    assert_eq!(
        infraenv["spec"]["proxy"]["httpProxy"],
        p.http_proxy.clone().unwrap()
    );
    assert_eq!(infraenv["spec"]["proxy"]["noProxy"], p.no_proxy.clone().unwrap());
    let sysconf = file(&b, "/etc/systemd/system.conf.d/10-agent-day2-proxy.conf").unwrap();
    assert!(
        sysconf.contains(&format!("\"HTTPS_PROXY={}\"", p.https_proxy.unwrap())),
        "{sysconf}"
    );
    assert_eq!(
        mode(&b, "/etc/systemd/system.conf.d/10-agent-day2-proxy.conf"),
        0o600
    );
    // The trust bundle ConfigMap named by the Proxy is trusted on the node (once: not again in the InfraEnv).
    let bundle = b
        .model
        .trust_bundle
        .as_ref()
        .and_then(|t| t.pem.clone())
        .expect("trust bundle in the model");
    assert_eq!(
        file(
            &b,
            "/etc/pki/ca-trust/source/anchors/agent-day2-user-ca-bundle.crt"
        )
        .unwrap(),
        bundle
    );
    assert!(infraenv["spec"].get("additionalTrustBundle").is_none());
}

#[test]
fn several_hosts_static_and_dhcp() {
    let hosts = vec![
        static_host("worker-0", "52:54:00:aa:00:30", "192.168.111.30"),
        dhcp_host("worker-1", "52:54:00:aa:00:31"),
        static_host("worker-2", "52:54:00:AA:00:32", "192.168.111.32"),
    ];
    let b = build(&Scenario::default(), &hosts);
    let f = facts_of(
        &b,
        &["52:54:00:aa:00:30", "52:54:00:aa:00:31", "52:54:00:aa:00:32"],
    );
    assert_eq!(f.hosts.len(), 3);
    assert_eq!(f.host_by_mac("52:54:00:aa:00:32").unwrap().hostname, "worker-2");
    let parsed = sim_ignition::parse(b.json.as_bytes()).unwrap();
    let pre = &parsed.units["pre-network-manager-config.service"];
    assert!(pre
        .text
        .contains("Before=network-pre.target NetworkManager.service"));
    // Keyfiles of the static hosts only, 0600, with the MAC → interface map.
    assert_eq!(
        file(&b, "/etc/assisted/network/worker-0/eth0.nmconnection").unwrap(),
        hosts[0].keyfiles[0].1
    );
    assert_eq!(
        mode(&b, "/etc/assisted/network/worker-0/eth0.nmconnection"),
        0o600
    );
    assert_eq!(
        file(&b, "/etc/assisted/network/worker-2/mac_interface.ini").unwrap(),
        "52:54:00:aa:00:32=eth0\n"
    );
    assert!(parsed.under("/etc/assisted/network/worker-1/").next().is_none());
    // One NMStateConfig per static host, labelled for the InfraEnv's selector.
    let docs: Vec<Value> =
        serde_saphyr::from_multiple(&file(&b, "/etc/assisted/manifests/nmstateconfig.yaml").unwrap())
            .unwrap();
    let names: Vec<&str> = docs
        .iter()
        .map(|d| d["metadata"]["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["worker-0", "worker-2"]);
    assert_eq!(
        docs[1]["spec"]["interfaces"][0]["macAddress"],
        "52:54:00:aa:00:32"
    );
    assert_eq!(
        docs[0]["spec"]["config"],
        hosts[0].network_config.clone().unwrap()
    );
    assert_eq!(
        file(&b, "/etc/assisted/hostconfig/worker-0/root-device-hints.yaml")
            .unwrap()
            .trim(),
        "deviceName: /dev/sda\nminSizeGigabytes: 100"
    );
    // A machine whose MAC is in no host finds no host config (it would not find itself).
    let parsed = sim_ignition::parse(b.json.as_bytes()).unwrap();
    let err = facts::read(&parsed, &["52:54:00:aa:00:99".to_string()]).unwrap_err();
    assert!(
        err.iter()
            .any(|p| p.contains("no host for MAC 52:54:00:aa:00:99")),
        "{err:?}"
    );
}

#[test]
fn same_inputs_give_the_same_config() {
    let m = model(&Scenario::default());
    let a = auth::generate(auth::DEFAULT_TTL, now()).unwrap();
    let (imgs, id) = (images(), Uuid::new_v4());
    let hosts = [static_host("worker-0", "52:54:00:aa:00:30", "192.168.111.30")];
    let ps = m.pull_secret.0.clone();
    let inputs = NodeImageInputs {
        cluster: &m,
        hosts: &hosts,
        auth: &a,
        images: &imgs,
        pull_secret: &ps,
        pool: None,
        infra_env_id: id,
        ssh_key: None,
        cpu_architecture: None,
        base_iso_url: None,
    };
    assert_eq!(
        ignition::to_json(&ignition::build(&inputs).unwrap()),
        ignition::to_json(&ignition::build(&inputs).unwrap())
    );
}

#[test]
fn custom_pool_targets_its_mcs_path() {
    let b = build_with(
        model(&Scenario::default()),
        &[dhcp_host("infra-0", "52:54:00:aa:00:40")],
        Some("infra"),
        None,
    )
    .unwrap();
    let ep: Value =
        serde_json::from_str(&file(&b, "/etc/assisted/clusterconfig/worker-ignition-endpoint.json").unwrap())
            .unwrap();
    // The service appends the pool (the host's machine_config_pool_name, which add-node.sh sets).
    assert!(ep["url"].as_str().unwrap().ends_with(":22623/config"), "{ep}");
    assert!(file(&b, "/usr/local/bin/add-node.sh")
        .unwrap()
        .contains("pool=\"infra\""));
    let parsed = sim_ignition::parse(b.json.as_bytes()).unwrap();
    facts::read(&parsed, &[]).unwrap();
}

#[test]
fn bad_inputs_are_refused_with_the_field() {
    let m = model(&Scenario::default());
    let err = |hosts: &[HostSpec], pool: Option<&str>| match build_with(m.clone(), hosts, pool, None) {
        Err(e) => e.to_string(),
        Ok(_) => panic!("accepted"),
    };
    assert_eq!(err(&[], None), "hosts: at least one host must be defined");
    let dup = [
        dhcp_host("a", "52:54:00:aa:00:30"),
        dhcp_host("b", "52:54:00:AA:00:30"),
    ];
    assert_eq!(
        err(&dup, None),
        "hosts[1].interfaces[0].macAddress: \"52:54:00:AA:00:30\" is used by another interface"
    );
    let same = [
        dhcp_host("a", "52:54:00:aa:00:30"),
        dhcp_host("a", "52:54:00:aa:00:31"),
    ];
    assert_eq!(
        err(&same, None),
        "hosts[1].hostname: \"a\" is used by another host"
    );
    assert!(err(&[dhcp_host("../etc", "52:54:00:aa:00:30")], None).starts_with("hosts[0].hostname"));
    assert!(err(&[dhcp_host("a", "52:54:00:aa:00")], None).starts_with("hosts[0].interfaces[0].macAddress"));
    assert!(err(&[dhcp_host("a", "52:54:00:aa:00:30")], Some("Infra")).starts_with("--pool"));
    let mut noif = dhcp_host("a", "52:54:00:aa:00:30");
    noif.interfaces.clear();
    assert!(err(&[noif], None).starts_with("hosts[0].interfaces"));
    // No SSH key anywhere.
    let mut nokey = m.clone();
    nokey.ssh.keys.clear();
    let e = build_with(nokey.clone(), &[dhcp_host("a", "52:54:00:aa:00:30")], None, None)
        .err()
        .unwrap()
        .to_string();
    assert!(e.starts_with("sshKey: no SSH key"), "{e}");
    // ... but the nodes-config key is enough, and wins.
    let b = build_with(
        nokey,
        &[dhcp_host("a", "52:54:00:aa:00:30")],
        None,
        Some("ssh-ed25519 AAAAC3Nza mine"),
    )
    .unwrap();
    let f = facts_of(&b, &[]);
    assert!(!f.hosts.is_empty());
    let parsed = sim_ignition::parse(b.json.as_bytes()).unwrap();
    assert_eq!(parsed.ssh_keys["core"], vec!["ssh-ed25519 AAAAC3Nza mine"]);
}

// ------------------------------------------------------------------------------------------
// Manifests against the real CRDs.

/// The ISO's manifests as the real kube-apiserver judges them: a cluster on the real control
/// plane serving assisted-service's own CRDs takes each document with `kubectl create
/// --dry-run=server --validate=strict` (unknown or duplicate fields and schema violations are
/// errors there) without a warning, and refuses a value the CRD forbids (the check can fail).
#[test]
#[cfg_attr(
    not(real_assisted),
    ignore = "needs assisted-service's CRDs: scripts/real-components.sh assisted, then AGENT_DAY2_REAL_ASSISTED=1 (scripts/test.sh does both)"
)]
fn manifests_are_valid_against_their_crds() {
    let dirs = agent_day2_sim::upstream::assisted_crd_dirs().unwrap_or_else(|why| panic!("{why}"));
    if let Err(why) = agent_day2_sim::harness::enter_netns() {
        panic!("{why}");
    }
    let mut args = Vec::new();
    for d in &dirs {
        args.push("--crds".to_string());
        args.push(d.display().to_string());
    }
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let c =
        agent_day2_sim::harness::TestCluster::start_with_args("", &args).unwrap_or_else(|e| panic!("{e:#}"));
    let s = Scenario {
        proxy: Some(ProxySettings {
            http_proxy: Some("http://p:3128".into()),
            https_proxy: None,
            no_proxy: Some("x".into()),
            trusted_ca: Some("user-ca-bundle".into()),
        }),
        ..Default::default()
    };
    let b = build(
        &s,
        &[
            static_host("worker-0", "52:54:00:aa:00:30", "192.168.111.30"),
            static_host("worker-1", "52:54:00:aa:00:31", "192.168.111.31"),
            dhcp_host("worker-2", "52:54:00:aa:00:32"),
        ],
    );
    let ns = c.kubectl(&["create", "namespace", "cluster0"]);
    assert!(ns.status.success(), "{}", String::from_utf8_lossy(&ns.stderr));
    let dry_run = |doc: &Value| {
        let mut d = doc.clone();
        // The manifests name the namespace assisted-service imports them into.
        d["metadata"]["namespace"] = json!("cluster0");
        if d["kind"] == "ClusterImageSet" {
            d["metadata"].as_object_mut().unwrap().remove("namespace");
        }
        c.kubectl_stdin(
            &[
                "create",
                "--dry-run=server",
                "--validate=strict",
                "-o",
                "name",
                "-f",
                "-",
            ],
            &serde_json::to_string(&d).unwrap(),
        )
    };
    let mut checked = 0;
    for (path, kind) in [
        ("/etc/assisted/manifests/infraenv.yaml", "InfraEnv"),
        ("/etc/assisted/manifests/nmstateconfig.yaml", "NMStateConfig"),
        (
            "/etc/assisted/manifests/cluster-image-set.yaml",
            "ClusterImageSet",
        ),
        ("/etc/assisted/manifests/pull-secret.yaml", "Secret"),
    ] {
        let docs: Vec<Value> = serde_saphyr::from_multiple(&file(&b, path).unwrap()).unwrap();
        assert!(!docs.is_empty(), "{path}");
        for d in docs {
            assert_eq!(d["kind"], kind, "{path}");
            let o = dry_run(&d);
            let err = String::from_utf8_lossy(&o.stderr);
            assert!(
                o.status.success(),
                "{path}: the real kube-apiserver refused it: {err}"
            );
            assert!(err.trim().is_empty(), "{path}: warnings: {err}");
            checked += 1;
        }
    }
    assert_eq!(checked, 5);
    let mut bad: Value =
        serde_saphyr::from_str(&file(&b, "/etc/assisted/manifests/infraenv.yaml").unwrap()).unwrap();
    bad["spec"]["ipxeScriptType"] = json!("Sometimes");
    let o = dry_run(&bad);
    assert!(
        !o.status.success(),
        "an InfraEnv with ipxeScriptType Sometimes was accepted"
    );
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("ipxeScriptType"),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
}

// ------------------------------------------------------------------------------------------
// Upstream node-joiner acceptance data.

#[test]
#[ignore = "needs node-joiner's acceptance data: set AGENT_DAY2_INSTALLER_SRC to an openshift/installer checkout (its cmd/node-joiner/testdata)"]
fn upstream_node_joiner_acceptance() {
    let cases = upstream::cases();
    let release = "registry.ci.openshift.org/ocp/release:4.25.0";
    let mut asserted = 0;
    for case in &cases {
        let (name, files) = (&case.name, &case.files);
        let m = ClusterModel::from_objects(&ClusterObjects::from_values(upstream_objects(
            files, release, false,
        )))
        .unwrap();
        // The case's nodes-config (the subset the cases use).
        let nc: Value =
            serde_saphyr::from_str(files.get("nodes-config.yaml").expect("nodes-config.yaml")).unwrap();
        let hosts: Vec<HostSpec> = nc["hosts"]
            .as_array()
            .unwrap()
            .iter()
            .map(|h| HostSpec {
                hostname: h["hostname"].as_str().unwrap().into(),
                role: h["role"].as_str().unwrap_or("worker").into(),
                interfaces: h["interfaces"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|i| HostInterface {
                        name: i["name"].as_str().unwrap().into(),
                        mac_address: i["macAddress"].as_str().unwrap().into(),
                    })
                    .collect(),
                root_device_hints: h.get("rootDeviceHints").cloned(),
                network_config: None,
                keyfiles: vec![],
            })
            .collect();
        let auth = auth::generate(auth::DEFAULT_TTL, now()).unwrap();
        let imgs = images();
        let ps = m.pull_secret.0.clone();
        let cfg = ignition::build(&NodeImageInputs {
            cluster: &m,
            hosts: &hosts,
            auth: &auth,
            images: &imgs,
            pull_secret: &ps,
            pool: None,
            infra_env_id: Uuid::new_v4(),
            ssh_key: nc["sshKey"].as_str().map(String::from),
            cpu_architecture: nc["cpuArchitecture"].as_str().map(String::from),
            base_iso_url: None,
        })
        .unwrap_or_else(|e| panic!("{name}: build failed: {e}"));
        let json = ignition::to_json(&cfg);
        let parsed = sim_ignition::parse(json.as_bytes()).unwrap();
        for w in case.commands() {
            if upstream::check_ignition_command(case, &w, || &parsed) {
                asserted += 1;
                continue;
            }
            match w[0].as_str() {
                "isoFileCmpRegEx" => {
                    // A file of the ISO outside the Ignition (grub.cfg): fips=1 is a karg that the
                    // ISO writer adds when the model says FIPS.
                    assert!(
                        case.section(&w[3]).contains("fips=1") && m.fips,
                        "{name}: FIPS expected in the model"
                    );
                    asserted += 1;
                }
                "exec" | "grep" | "!" | "exists" => {} // the ISO/PXE writer's and CLI's part
                other => panic!("{name}: unknown command {other}"),
            }
        }
    }
    eprintln!("upstream acceptance: {asserted} assertions held");
    assert!(asserted >= 12, "only {asserted} assertions");
}

// ------------------------------------------------------------------------------------------
// Auth material.

/// The tokens as the node's service takes them (claims, key form), judged by the simulator's
/// own reading of assisted-service (`boot::jwt`, written from `pkg/auth/agent_local_*.go`),
/// not by the plugin's verifier alone. The Secret forms are unit-tested in src/auth.rs.
#[test]
fn tokens_carry_auth_scheme_and_exp_only_and_the_simulated_service_accepts_them() {
    use agent_day2_sim::boot::jwt;
    let t0 = UNIX_EPOCH + Duration::from_secs(1_800_000_000);
    let a = auth::generate(Duration::from_secs(48 * 3600), t0).unwrap();
    assert!(
        a.public_key_pem.starts_with("-----BEGIN EC PUBLIC KEY-----\n") && !a.public_key_pem.contains('\r')
    );
    // EC_PUBLIC_KEY_PEM is base64 of the PEM; the simulated service decodes it as the real one.
    let key = jwt::public_key(&a.public_key_b64()).unwrap();
    let now = 1_800_000_000i64;
    let exp = now + 48 * 3600;
    for (tok, scheme) in [
        (&a.agent_token, auth::SCHEME_AGENT),
        (&a.user_token, auth::SCHEME_USER),
        (&a.watcher_token, auth::SCHEME_WATCHER),
    ] {
        let c = auth::verify_token(tok, &a.public_key_b64(), scheme, t0).unwrap();
        assert_eq!(
            Value::Object(c),
            serde_json::json!({"auth_scheme": scheme, "exp": exp})
        );
        assert_eq!(
            jwt::judge(&[(scheme, Some(tok.as_bytes()))], &key, now),
            Ok(scheme)
        );
        // Still accepted by a node whose clock is a day behind ours (no iat to refuse).
        assert_eq!(
            jwt::judge(&[(scheme, Some(tok.as_bytes()))], &key, now - 86400),
            Ok(scheme)
        );
        // Refused once expired, and on another scheme's route.
        assert_eq!(
            jwt::judge(&[(scheme, Some(tok.as_bytes()))], &key, exp)
                .unwrap_err()
                .status,
            401
        );
        let other = if scheme == auth::SCHEME_USER {
            auth::SCHEME_WATCHER
        } else {
            auth::SCHEME_USER
        };
        assert_eq!(
            jwt::judge(&[(other, Some(tok.as_bytes()))], &key, now)
                .unwrap_err()
                .status,
            403
        );
    }
    assert_eq!(a.expiry_rfc3339(), "2027-01-17T08:00:00Z");
    // Another key does not verify them.
    let other = auth::generate(auth::DEFAULT_TTL, t0).unwrap();
    let okey = jwt::public_key(&other.public_key_b64()).unwrap();
    assert_eq!(
        jwt::judge(&[("agentAuth", Some(a.agent_token.as_bytes()))], &okey, now)
            .unwrap_err()
            .text,
        "Failed to parse token: crypto/ecdsa: verification error\n"
    );
    assert!(auth::generate(Duration::ZERO, t0).is_err());
}

#[test]
fn redaction_hides_every_secret() {
    let s = Scenario {
        proxy: Some(ProxySettings {
            http_proxy: Some("http://user:pw@proxy:3128".into()),
            https_proxy: None,
            no_proxy: None,
            trusted_ca: None,
        }),
        ..Default::default()
    };
    let b = build(
        &s,
        &[static_host("worker-0", "52:54:00:aa:00:30", "192.168.111.30")],
    );
    let red = ignition::redacted(&b.cfg);
    let debug = format!("{:?}", b.auth);
    let ps = &b.model.pull_secret.0;
    let auth_b64 = serde_json::from_str::<Value>(ps).unwrap()["auths"]
        .as_object()
        .unwrap()
        .values()
        .next()
        .unwrap()["auth"]
        .as_str()
        .unwrap()
        .to_string();
    for (what, secret) in [
        ("agent token", b.auth.agent_token.as_str()),
        ("user token", &b.auth.user_token),
        ("watcher token", &b.auth.watcher_token),
        ("pull secret auth", &auth_b64),
        ("proxy password", "user:pw@"),
    ] {
        // The secret is in the real config (so the check can fail) ...
        assert!(
            b.json.contains(secret)
                || ignition::files(&b.cfg)
                    .iter()
                    .any(|(_, d, _)| String::from_utf8_lossy(d).contains(secret)),
            "{what} not in the config"
        );
        // ... and in neither the redacted view nor Debug.
        assert!(!red.contains(secret), "{what} in the redacted config");
        assert!(!debug.contains(secret), "{what} in Debug");
    }
    assert!(debug.contains("<redacted>") && debug.contains("BEGIN EC PUBLIC KEY"));
    // The builder's inputs do not print the pull secret either.
    let imgs = images();
    let hosts = [dhcp_host("w", "52:54:00:aa:00:30")];
    let inputs = NodeImageInputs {
        cluster: &b.model,
        hosts: &hosts,
        auth: &b.auth,
        images: &imgs,
        pull_secret: ps,
        pool: None,
        infra_env_id: Uuid::nil(),
        ssh_key: None,
        cpu_architecture: None,
        base_iso_url: None,
    };
    let dbg = format!("{inputs:?}");
    assert!(
        !dbg.contains(&auth_b64) && !dbg.contains(&b.auth.agent_token) && dbg.contains("bytes redacted>"),
        "{dbg}"
    );
    assert!(red.contains("data:,<redacted>"));
    // The public parts stay visible.
    assert!(red.contains("CLUSTER_NAME=ostest"));
}

// ------------------------------------------------------------------------------------------
// Size: the RHCOS embed area is 256 KiB of compressed cpio.

#[test]
fn compressed_size_for_1_10_50_hosts() {
    const AREA: usize = 256 * 1024;
    let m = model(&Scenario {
        disconnected: true,
        ..Default::default()
    });
    let mut sizes = Vec::new();
    for n in [1usize, 10, 50] {
        let hosts: Vec<HostSpec> = (0..n)
            .map(|i| {
                let mac = format!("52:54:00:aa:{:02x}:{:02x}", i / 256, i % 256);
                if i % 2 == 0 {
                    static_host(&format!("worker-{i}"), &mac, &format!("192.168.111.{}", 30 + i))
                } else {
                    dhcp_host(&format!("worker-{i}"), &mac)
                }
            })
            .collect();
        let b = build_with(m.clone(), &hosts, None, None).unwrap();
        let archive = agent_day2::iso::embed::ignition_archive(b.json.as_bytes(), &[]).unwrap();
        eprintln!(
            "{n:>2} hosts: config.ign {:>7} bytes, xz cpio {:>6} bytes ({:.1}% of the 256 KiB area)",
            b.json.len(),
            archive.len(),
            archive.len() as f64 * 100.0 / AREA as f64
        );
        sizes.push(archive.len());
        if n == 50 {
            facts_of(&b, &["52:54:00:aa:00:31"]);
        }
    }
    assert!(sizes[0] < sizes[1] && sizes[1] < sizes[2]);
    assert!(sizes[2] < AREA / 4, "50 hosts take {} bytes", sizes[2]);
}

// ------------------------------------------------------------------------------------------
// From a real nodes-config: parsed and validated by `nodes_config` (NMState compiled to
// keyfiles by the nmstate crate), then built.

#[test]
fn from_a_validated_nodes_config() {
    use agent_day2::nodes_config;
    let yaml = r#"
hosts:
  - hostname: worker-0
    role: worker
    rootDeviceHints:
      deviceName: /dev/vda
    interfaces:
      - name: eth0
        macAddress: 52:54:00:AA:00:30
    networkConfig:
      interfaces:
        - name: eth0
          type: ethernet
          state: up
          mac-address: 52:54:00:AA:00:30
          ipv4:
            enabled: true
            dhcp: false
            address:
              - ip: 192.168.111.30
                prefix-length: 24
      dns-resolver:
        config:
          server: [192.168.111.1]
      routes:
        config:
          - destination: 0.0.0.0/0
            next-hop-address: 192.168.111.1
            next-hop-interface: eth0
  - hostname: worker-1
    interfaces:
      - name: eno1
        macAddress: 52:54:00:aa:00:31
"#;
    let m = model(&Scenario::default());
    let cfg = nodes_config::parse(yaml, std::path::Path::new("nodes-config.yaml"))
        .unwrap_or_else(|e| panic!("{:?}", e.lines()));
    let validated = nodes_config::validate(&cfg, &m);
    assert!(validated.is_ok(), "{:?}", validated.errors);
    let hosts = ignition::host_specs(&cfg, &validated.hosts);
    assert_eq!(hosts.len(), 2);
    assert_eq!(hosts[0].interfaces[0].mac_address, "52:54:00:aa:00:30");
    assert!(!hosts[0].keyfiles.is_empty(), "nmstate gave no keyfiles");
    assert!(hosts[1].keyfiles.is_empty());
    let b = build_with(m, &hosts, None, None).unwrap();
    let f = facts_of(&b, &["52:54:00:aa:00:30", "52:54:00:aa:00:31"]);
    assert_eq!(f.host_by_mac("52:54:00:aa:00:31").unwrap().hostname, "worker-1");
    let (name, text) = &hosts[0].keyfiles[0];
    assert_eq!(
        file(&b, &format!("/etc/assisted/network/worker-0/{name}")).as_ref(),
        Some(text)
    );
    assert!(text.contains("192.168.111.30"), "{text}");
    assert_eq!(
        file(&b, "/etc/assisted/hostconfig/worker-0/root-device-hints.yaml")
            .unwrap()
            .trim(),
        "deviceName: /dev/vda"
    );
    // No hints, no file (upstream omits it; the client then leaves the disk to the service).
    assert!(file(&b, "/etc/assisted/hostconfig/worker-1/root-device-hints.yaml").is_none());
}

#[test]
fn contributors_name_the_largest_file_first() {
    let mut m = model(&Scenario::default());
    // A large trust bundle (many CAs) dominates the config.
    let big: String = (0..40).map(|_| ca_pem()).collect();
    m.trust_bundle = Some(agent_day2::cluster::TrustBundle {
        config_map: "user-ca-bundle".into(),
        found: true,
        certificates: 40,
        pem: Some(big.clone()),
    });
    let b = build_with(m, &[dhcp_host("worker-0", "52:54:00:aa:00:30")], None, None).unwrap();
    let c = ignition::contributors(&b.cfg);
    assert_eq!(
        c[0].0,
        "/etc/pki/ca-trust/source/anchors/agent-day2-user-ca-bundle.crt"
    );
    assert!(c[0].1 >= big.len());
    assert!(c.windows(2).all(|w| w[0].1 >= w[1].1));
    assert!(c.iter().any(|(p, _)| p == "unit agent.service"));
}

/// add-node.sh as built, run by bash with `curl` and `sleep` stood in on PATH (the service
/// answers: the cluster, then the host `insufficient` with a `status_info` and two failing
/// validations in `validations_info`, then `known`, then 202 on install): it prints the status
/// and status_info, every failure/error/pending validation (id, status, message) and none that passed.
#[test]
fn add_node_script_names_the_failing_validations_while_it_waits() {
    use std::os::unix::fs::PermissionsExt;
    let b = build(
        &Scenario::default(),
        &[dhcp_host("worker-0", "52:54:00:aa:00:31")],
    );
    let script = file(&b, "/usr/local/bin/add-node.sh").unwrap();
    let d = tempfile::tempdir().unwrap();
    let validations = json!({
        "hardware": [
            {"id": "has-memory-for-role", "status": "failure", "message": "Insufficient memory"},
            {"id": "has-inventory", "status": "success", "message": "Valid inventory exists"},
        ],
        "network": [
            {"id": "api-domain-name-resolved-correctly", "status": "error", "message": "Parse error"},
            {"id": "ntp-synced", "status": "pending", "message": "Missing inventory"},
        ],
    })
    .to_string();
    let insufficient = json!([{
        "id": "h1", "status": "insufficient",
        "status_info": "Host cannot be installed due to following failing validation(s): ",
        "validations_info": validations,
    }]);
    std::fs::write(d.path().join("hosts-1.json"), insufficient.to_string()).unwrap();
    std::fs::write(
        d.path().join("hosts-2.json"),
        json!([{"id": "h1", "status": "known"}]).to_string(),
    )
    .unwrap();
    let curl = r#"#!/bin/bash
out=/dev/stdout; url=
while [ $# -gt 0 ]; do case "$1" in -o) out=$2; shift 2 ;; -w|-H|-X|-d) shift 2 ;; *) url=$1; shift ;; esac; done
case "$url" in
  */clusters) echo '[{"id":"c1"}]' ;;
  */hosts) n=$(( $(cat "$D/n" 2>/dev/null || echo 0) + 1 )); echo $n >"$D/n"; cat "$D/hosts-$n.json" ;;
  */actions/install) echo '{}' >"$out"; printf 202 ;;
  *) echo "unexpected $url" >&2; exit 22 ;;
esac
"#;
    for (n, text) in [("curl", curl), ("sleep", "#!/bin/sh\n")] {
        let p = d.path().join(n);
        std::fs::write(&p, text).unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    let sp = d.path().join("add-node.sh");
    std::fs::write(&sp, script).unwrap();
    let o = std::process::Command::new("bash")
        .arg(&sp)
        .env("PATH", format!("{}:/usr/bin:/bin", d.path().display()))
        .env("D", d.path())
        .env("SERVICE_BASE_URL", "http://127.0.0.1:8090")
        .env("USER_AUTH_TOKEN", "t")
        .env("INFRA_ENV_ID", "ie1")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "add-node.sh: {err}");
    assert!(
        err.contains("add-node: host is insufficient: Host cannot be installed due to following failing validation(s): \n"),
        "{err}"
    );
    assert!(
        err.contains("add-node:   validation has-memory-for-role (failure): Insufficient memory\n"),
        "{err}"
    );
    assert!(
        err.contains("add-node:   validation api-domain-name-resolved-correctly (error): Parse error\n"),
        "{err}"
    );
    assert!(
        err.contains("add-node:   validation ntp-synced (pending): Missing inventory\n"),
        "{err}"
    );
    assert!(
        !err.contains("has-inventory"),
        "a passed validation is not listed: {err}"
    );
    assert!(
        err.contains("add-node: installation of host h1 started (pool worker)"),
        "{err}"
    );
}
