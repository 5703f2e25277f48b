//! nodes-config.yaml: parsing, validation against the fixture cluster
//! (tests/fixtures/cluster/default.yaml: 4.18.12, x86_64, machine network 192.168.111.0/24,
//! masters master-0..2 at .20-.22), the single-host flags, and the upstream node-joiner examples.

use std::net::IpAddr;
use std::path::{Path, PathBuf};

use agent_day2::cluster::{ClusterModel, ClusterObjects, NodeAddress};
use agent_day2::error::Error;
use agent_day2::nodes_config::{
    from_flags, parse, validate, ConfigErrors, FlagsHost, NodesConfig, Origin, Validated,
};
use serde_json::Value;

const ROOT: &str = env!("CARGO_MANIFEST_DIR");

fn fixture(rel: &str) -> PathBuf {
    Path::new(ROOT).join("tests/fixtures").join(rel)
}

fn cluster() -> ClusterModel {
    let text = std::fs::read_to_string(fixture("cluster/default.yaml")).unwrap();
    let values: Vec<Value> = serde_saphyr::from_multiple(&text).unwrap();
    ClusterModel::from_objects(&ClusterObjects::from_values(values)).unwrap()
}

/// The default cluster made dual-stack: an IPv6 machine network and master-0 with an IPv6 address.
fn dual_stack() -> ClusterModel {
    let mut c = cluster();
    c.machine_networks.cidrs.push("fd2e:6f44:5dd8:c956::/64".into());
    let m0 = c.nodes.iter_mut().find(|n| n.name == "master-0").unwrap();
    m0.addresses.push(NodeAddress {
        kind: "InternalIP".into(),
        address: "fd2e:6f44:5dd8:c956::14".into(),
    });
    c
}

fn parsed(yaml: &str) -> NodesConfig {
    parse(yaml, Path::new("nodes-config.yaml")).unwrap_or_else(|e| panic!("parse failed:\n{e}"))
}

fn parse_errors(yaml: &str) -> Vec<String> {
    parse(yaml, Path::new("nodes-config.yaml"))
        .expect_err("expected parse errors")
        .lines()
}

fn check_with(yaml: &str, c: &ClusterModel) -> Validated {
    validate(&parsed(yaml), c)
}

/// Validation error lines against the default cluster (parse must succeed).
fn errors(yaml: &str) -> Vec<String> {
    check_with(yaml, &cluster())
        .errors
        .iter()
        .map(ToString::to_string)
        .collect()
}

fn warnings(yaml: &str, c: &ClusterModel) -> Vec<String> {
    check_with(yaml, c)
        .warnings
        .iter()
        .map(ToString::to_string)
        .collect()
}

/// One host `worker-0`, MAC 52:54:00:aa:00:30 on eth0, `extra` appended under the host (indent 4).
fn host(extra: &str) -> String {
    format!("hosts:\n  - hostname: worker-0\n    interfaces:\n      - name: eth0\n        macAddress: 52:54:00:aa:00:30\n{extra}")
}

/// One host with static NMState addresses on eth0: `v4`/`v6` lists of addresses.
fn static_host(name: &str, mac: &str, v4: &[&str], v6: &[&str]) -> String {
    let list = |ips: &[&str], len: u8| {
        ips.iter()
            .map(|ip| format!("              - ip: \"{ip}\"\n                prefix-length: {len}\n"))
            .collect::<String>()
    };
    let mut s = format!(
        "  - hostname: {name}\n    interfaces:\n      - name: eth0\n        macAddress: {mac}\n    networkConfig:\n      interfaces:\n        - name: eth0\n          type: ethernet\n          state: up\n"
    );
    if !v4.is_empty() {
        s += &format!(
            "          ipv4:\n            enabled: true\n            address:\n{}",
            list(v4, 24)
        );
    }
    if !v6.is_empty() {
        s += &format!(
            "          ipv6:\n            enabled: true\n            address:\n{}",
            list(v6, 64)
        );
    }
    s
}

fn nmstate_host(nmstate_interfaces: &str) -> String {
    host(&format!(
        "    networkConfig:\n      interfaces:\n{nmstate_interfaces}"
    ))
}

// ---------------------------------------------------------------- good inputs

#[test]
fn static_and_dhcp_hosts_validate_with_keyfiles() {
    let text = std::fs::read_to_string(fixture("nodes-config/static-and-dhcp.yaml")).unwrap();
    let cfg = parse(&text, Path::new("static-and-dhcp.yaml")).unwrap();
    assert_eq!(cfg.origin, Origin::File("static-and-dhcp.yaml".into()));
    assert_eq!(cfg.hosts.len(), 2);
    let hints = cfg.hosts[0].root_device_hints.clone().unwrap();
    assert_eq!(hints.min_size_gigabytes, Some(120));
    assert_eq!(hints.rotational, Some(false));
    assert_eq!(hints.hctl.as_deref(), Some("0:0:0:0"));

    let v = validate(&cfg, &dual_stack());
    assert_eq!(v.errors, vec![], "{:?}", v.errors);
    assert_eq!(v.warnings, vec![]);
    let w0 = &v.hosts[0];
    assert_eq!(w0.hostname, "worker-0");
    assert_eq!(w0.role, "worker");
    assert_eq!(w0.arch, "x86_64");
    assert_eq!(w0.macs, vec!["52:54:00:aa:00:30"]);
    assert_eq!(
        w0.static_ips,
        vec![
            "192.168.111.30".parse::<IpAddr>().unwrap(),
            "fd2e:6f44:5dd8:c956::1e".parse::<IpAddr>().unwrap()
        ]
    );
    assert_eq!(w0.keyfiles.len(), 1);
    let (name, content) = &w0.keyfiles[0];
    assert_eq!(name, "eth0.nmconnection");
    assert!(content.contains("address0=192.168.111.30/24"), "{content}");
    assert!(
        content.contains("address0=fd2e:6f44:5dd8:c956::1e/64"),
        "{content}"
    );
    assert!(content.contains("method=manual"), "{content}");
    assert!(content.contains("dns=192.168.111.1"), "{content}");

    let w1 = &v.hosts[1];
    assert_eq!(w1.hostname, "worker-1");
    assert_eq!(w1.macs, vec!["52:54:00:aa:00:31"]);
    assert!(w1.static_ips.is_empty());
    assert!(w1.keyfiles.is_empty());
    assert!(v.clone().into_result("x").is_ok());
}

#[test]
fn bond_and_vlan_compile_to_keyfiles() {
    let text = std::fs::read_to_string(fixture("nodes-config/bond-vlan.yaml")).unwrap();
    let v = validate(&parse(&text, Path::new("bond-vlan.yaml")).unwrap(), &cluster());
    assert_eq!(v.errors, vec![], "{:?}", v.errors);
    let h = &v.hosts[0];
    assert_eq!(h.static_ips, vec!["192.168.111.40".parse::<IpAddr>().unwrap()]);
    let names: Vec<&str> = h.keyfiles.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(
        names,
        vec![
            "bond0.300.nmconnection",
            "bond0.nmconnection",
            "ens3.nmconnection",
            "ens4.nmconnection"
        ]
    );
    let file = |n: &str| &h.keyfiles.iter().find(|(f, _)| f == n).unwrap().1;
    assert!(file("bond0.nmconnection").contains("mode=active-backup"));
    assert!(file("bond0.300.nmconnection").contains("id=300"));
    assert!(file("bond0.300.nmconnection").contains("parent=bond0"));
    assert!(file("bond0.300.nmconnection").contains("address0=192.168.111.40/24"));
    assert!(file("ens3.nmconnection").contains("master=bond0"));
}

#[test]
fn undeclared_bond_ports_must_be_listed_nics() {
    let y = nmstate_host(
        "        - name: bond0\n          type: bond\n          state: up\n          link-aggregation:\n            mode: active-backup\n            port: [eth0, eth1]\n",
    );
    assert_eq!(
        errors(&y),
        vec![
            "hosts[0].networkConfig.interfaces[0]: port of \"bond0\" \"eth1\" is not in hosts[0].interfaces; list it there with its MAC ({name: eth1, macAddress: ...}) so the host's NICs can be matched"
        ]
    );
}

#[test]
#[ignore = "needs node-joiner's acceptance data: set AGENT_DAY2_INSTALLER_SRC to an openshift/installer checkout (its cmd/node-joiner/testdata)"]
fn upstream_node_joiner_examples_validate() {
    let dir = agent_day2_sim::upstream::node_joiner_testdata().unwrap_or_else(|why| panic!("{why}"));
    let entries = std::fs::read_dir(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
    let mut seen = 0;
    for e in entries.flatten() {
        let p = e.path();
        if p.extension().and_then(|x| x.to_str()) != Some("txt") {
            continue;
        }
        let text = std::fs::read_to_string(&p).unwrap();
        // txtar: the section runs from its `-- name --` marker to the next marker.
        let Some(start) = text.find("-- nodes-config.yaml --\n") else {
            continue;
        };
        let body = &text[start + "-- nodes-config.yaml --\n".len()..];
        let body = match body.find("\n-- ") {
            Some(end) => &body[..end + 1],
            None => body,
        };
        let cfg = parse(body, &p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
        let v = validate(&cfg, &cluster());
        assert_eq!(v.errors, vec![], "{}", p.display());
        assert_eq!(v.hosts[0].hostname, "extra-worker-0");
        assert_eq!(v.hosts[0].macs, vec!["00:f4:3d:a0:0e:2b"]);
        // add-nodes-overrides.txt says cpuArchitecture: amd64 → the CoreOS name.
        assert_eq!(v.hosts[0].arch, "x86_64");
        seen += 1;
    }
    assert!(seen >= 4, "only {seen} examples found in {}", dir.display());
}

#[test]
fn dual_stack_static_ipv6_only_host() {
    let y = format!(
        "hosts:\n{}",
        static_host("worker-6", "52:54:00:aa:00:60", &[], &["fd2e:6f44:5dd8:c956::60"])
    );
    let v = check_with(&y, &dual_stack());
    assert_eq!(v.errors, vec![]);
    assert_eq!(
        v.hosts[0].static_ips,
        vec!["fd2e:6f44:5dd8:c956::60".parse::<IpAddr>().unwrap()]
    );
    assert!(v.hosts[0].keyfiles[0]
        .1
        .contains("address0=fd2e:6f44:5dd8:c956::60/64"));
}

#[test]
fn architecture_spellings_and_multi_arch() {
    let mut c = cluster();
    let v = check_with(&format!("cpuArchitecture: amd64\n{}", host("")), &c);
    assert_eq!((v.errors.len(), v.hosts[0].arch.as_str()), (0, "x86_64"));
    let v = check_with(&format!("cpuArchitecture: x86_64\n{}", host("")), &c);
    assert_eq!((v.errors.len(), v.hosts[0].arch.as_str()), (0, "x86_64"));
    let arm = format!("cpuArchitecture: arm64\n{}", host(""));
    assert_eq!(
        errors(&arm),
        vec!["cpuArchitecture: \"arm64\" (aarch64) differs from the control plane's x86_64 and the cluster's release is not multi-arch; hosts must be x86_64 (or migrate the cluster to the multi-arch payload)"]
    );
    c.architecture.multi_arch = true;
    let v = check_with(&arm, &c);
    assert_eq!(v.errors, vec![]);
    assert_eq!(v.hosts[0].arch, "aarch64");
}

#[test]
fn warnings_do_not_block() {
    // Outside 192.168.111.0/24: a warning (routed remote workers are legitimate).
    let y = format!(
        "hosts:\n{}",
        static_host("worker-0", "52:54:00:aa:00:30", &["10.9.0.5"], &[])
    );
    let c = cluster();
    assert_eq!(
        warnings(&y, &c),
        vec!["hosts[0].networkConfig.interfaces[0].ipv4.address[0].ip: \"10.9.0.5\" is outside the machine networks (192.168.111.0/24); fine for a routed remote worker, otherwise check the address"]
    );
    assert_eq!(errors(&y), Vec::<String>::new());
    // No machine networks known (platform none): no warning.
    let mut none = cluster();
    none.machine_networks.cidrs.clear();
    assert_eq!(warnings(&y, &none), Vec::<String>::new());
    // IPv6 outside the IPv6 machine network of a dual-stack cluster.
    let y6 = format!(
        "hosts:\n{}",
        static_host("worker-0", "52:54:00:aa:00:30", &[], &["2001:db8::5"])
    );
    assert_eq!(
        warnings(&y6, &dual_stack()),
        vec!["hosts[0].networkConfig.interfaces[0].ipv6.address[0].ip: \"2001:db8::5\" is outside the machine networks (192.168.111.0/24, fd2e:6f44:5dd8:c956::/64); fine for a routed remote worker, otherwise check the address"]
    );
    // NMState mac-address that is not the host's, and an ignored bmc block.
    let y = nmstate_host(
        "        - name: eth0\n          type: ethernet\n          state: up\n          mac-address: 52:54:00:aa:00:99\n",
    )
    .replace("    interfaces:\n      - name: eth0", "    bmc:\n      address: redfish://10.0.0.1\n    interfaces:\n      - name: eth0");
    let v = check_with(&y, &c);
    assert_eq!(v.errors, vec![]);
    let w: Vec<String> = v.warnings.iter().map(ToString::to_string).collect();
    assert_eq!(
        w,
        vec![
            "hosts[0].bmc: ignored: add-nodes boots the hosts from the image you give them and does not use BMC settings",
            "hosts[0].networkConfig.interfaces[0].mac-address: \"52:54:00:aa:00:99\" is not one of the MACs in hosts[0].interfaces; the host is recognised by those",
        ]
    );
}

// ---------------------------------------------------------------- bad inputs: parse

#[test]
fn parse_errors_name_the_field() {
    let cases: Vec<(String, Vec<&str>)> = vec![
        (
            "".into(),
            vec!["nodes-config.yaml: the file is empty; it needs a hosts list (see `oc agent-day2 add-nodes --help`)"],
        ),
        (
            "- a\n".into(),
            vec!["nodes-config.yaml: expected a mapping with a hosts list at the top, got a list"],
        ),
        ("hosts: worker-0\n".into(), vec!["hosts: expected a list of hosts, got the string \"worker-0\""]),
        (
            "host:\n  - hostname: a\n".into(),
            vec!["host: unknown field; did you mean \"hosts\"?"],
        ),
        (
            "sshkey: x\nbootArtifactsBaseUrl: http://x\nfoo: 1\n".into(),
            vec![
                "sshkey: unknown field; did you mean \"sshKey\"?",
                "bootArtifactsBaseUrl: unknown field; did you mean \"bootArtifactsBaseURL\"?",
                "foo: unknown field; expected one of cpuArchitecture, sshKey, bootArtifactsBaseURL, hosts",
            ],
        ),
        (
            "hosts:\n  - hostnme: a\n".into(),
            vec!["hosts[0].hostnme: unknown field; did you mean \"hostname\"?"],
        ),
        (
            "hosts:\n  - hostname: a\n    interfaces:\n      - name: eth0\n        macAdress: 52:54:00:aa:00:30\n".into(),
            vec!["hosts[0].interfaces[0].macAdress: unknown field; did you mean \"macAddress\"?"],
        ),
        (
            host("    rootDeviceHints:\n      deviceNmae: /dev/sda\n      wwnWithExtension: \"0x1\"\n"),
            vec![
                "hosts[0].rootDeviceHints.wwnWithExtension: not supported by the agent installer; use wwn",
                "hosts[0].rootDeviceHints.deviceNmae: unknown field; did you mean \"deviceName\"?",
            ],
        ),
        (
            "hosts:\n  - hostname: 123\n".into(),
            vec!["hosts[0].hostname: expected a string, got the number 123; quote it"],
        ),
        (
            host("    rootDeviceHints:\n      minSizeGigabytes: -5\n      rotational: \"maybe\"\n"),
            vec![
                "hosts[0].rootDeviceHints.minSizeGigabytes: expected a whole number of gigabytes (0 or more), got the number -5",
                "hosts[0].rootDeviceHints.rotational: expected true or false, got the string \"maybe\"",
            ],
        ),
        (
            host("    networkConfig: |\n      interfaces: []\n"),
            vec!["hosts[0].networkConfig: expected an NMState mapping (interfaces, dns-resolver, routes) written inline, got the string \"interfaces: []\\n\""],
        ),
        (
            "hosts:\n  - worker-0\n".into(),
            vec!["hosts[0]: expected a mapping (hostname, interfaces, ...), got the string \"worker-0\""],
        ),
    ];
    for (yaml, want) in cases {
        assert_eq!(parse_errors(&yaml), want, "input:\n{yaml}");
    }
}

#[test]
fn yaml_syntax_error_has_position() {
    let e = parse_errors("hosts:\n  - hostname: a\n   interfaces: [\n");
    assert_eq!(e.len(), 1);
    assert!(
        e[0].starts_with("nodes-config.yaml: not valid YAML: line "),
        "{e:?}"
    );
}

/// A key given twice is an error at its field path with both lines, collected with the other
/// parse errors, and no library option ("DuplicateKeyPolicy in Options") reaches the user.
#[test]
fn duplicate_keys_name_the_field_and_lines() {
    let y = "hosts:\n  - hostname: worker-0\n    interfaces:\n      - name: eth0\n        macAddress: 52:54:00:aa:00:30\n        macAddress: 52:54:00:aa:00:31\n    colour: red\nhosts: []\n";
    let e = parse_errors(y);
    assert_eq!(
        e,
        vec![
            "hosts[0].interfaces[0].macAddress: given twice (lines 5 and 6); keep one (YAML allows each key once per mapping)",
            "hosts: given twice (lines 1 and 8); keep one (YAML allows each key once per mapping)",
            "hosts[0].colour: unknown field; expected one of hostname, role, rootDeviceHints, interfaces, networkConfig, bmc",
        ]
    );
    // Inside networkConfig too.
    let e = parse_errors(&nmstate_host(
        "        - name: eth0\n          type: ethernet\n          state: up\n          state: down\n",
    ));
    assert_eq!(e.len(), 1, "{e:?}");
    assert!(
        e[0].starts_with("hosts[0].networkConfig.interfaces[0].state: given twice (lines "),
        "{e:?}"
    );
    for bad in ["hosts: [\n", "hosts: *x\n", "hosts: 'x\n"] {
        let e = parse_errors(bad);
        assert!(
            e[0].starts_with("nodes-config.yaml: not valid YAML: line "),
            "{e:?}"
        );
        assert!(!e[0].contains("Option"), "{e:?}");
    }
}

#[test]
fn top_level_type_meta_is_ignored() {
    let cfg = parsed(&format!(
        "apiVersion: v1\nkind: Whatever\nmetadata:\n  name: x\n{}",
        host("")
    ));
    assert_eq!(cfg.hosts.len(), 1);
}

// ---------------------------------------------------------------- bad inputs: validation

#[test]
fn validation_errors_table() {
    let long63 = "a".repeat(63);
    let long64 = "a".repeat(64);
    let total254 = format!("{0}.{0}.{0}.{1}", "a".repeat(63), "a".repeat(62));
    let cases: Vec<(String, Vec<String>)> = vec![
        ("hosts: []\n".into(), vec!["hosts: at least one host is required".into()]),
        (
            "hosts:\n  - interfaces:\n      - name: eth0\n        macAddress: 52:54:00:aa:00:30\n".into(),
            vec!["hosts[0].hostname: required: the node's name (approve checks its certificate requests against it)".into()],
        ),
        (
            host("").replace("worker-0", "Worker-0"),
            vec!["hosts[0].hostname: \"Worker-0\" must be lowercase (RFC 1123; Kubernetes node names are lowercase): use \"worker-0\"".into()],
        ),
        (
            host("").replace("worker-0", "worker_0"),
            vec!["hosts[0].hostname: \"worker_0\" is not a valid hostname: each dot-separated label must be lowercase letters, digits and '-', starting and ending with a letter or digit (RFC 1123): use \"worker-0\"".into()],
        ),
        (
            host("").replace("worker-0", "-worker"),
            vec!["hosts[0].hostname: \"-worker\" is not a valid hostname: each dot-separated label must be lowercase letters, digits and '-', starting and ending with a letter or digit (RFC 1123): use \"worker\"".into()],
        ),
        (host("").replace("worker-0", &format!("{long63}.example.com")), vec![]),
        (
            host("").replace("worker-0", &format!("{long64}.example.com")),
            vec![format!("hosts[0].hostname: \"{long64}.example.com\": label \"{long64}\" is 64 characters long; at most 63")],
        ),
        (
            host("").replace("worker-0", &total254),
            vec![format!("hosts[0].hostname: \"{total254}\" is 254 characters long; a hostname has at most 253")],
        ),
        (
            host("").replace("worker-0", "localhost"),
            vec!["hosts[0].hostname: \"localhost\" is not a usable node name; give the host its own name".into()],
        ),
        (
            host("    role: master\n"),
            vec!["hosts[0].role: \"master\" is not supported: add-nodes adds worker nodes only (control-plane nodes cannot be added this way); remove role or set role: worker".into()],
        ),
        (
            host("    role: infra\n"),
            vec!["hosts[0].role: \"infra\" is not a role; the only role is worker".into()],
        ),
        (
            "hosts:\n  - hostname: worker-0\n".into(),
            vec!["hosts[0].interfaces: at least one interface {name, macAddress} is required: the host is recognised by its MAC".into()],
        ),
        (
            "hosts:\n  - hostname: worker-0\n    interfaces:\n      - macAddress: 52:54:00:aa:00:30\n".into(),
            vec!["hosts[0].interfaces[0].name: required: the NIC's name as the NMState uses it (e.g. eth0)".into()],
        ),
        (
            "hosts:\n  - hostname: worker-0\n    interfaces:\n      - name: eth0\n".into(),
            vec!["hosts[0].interfaces[0].macAddress: required: the NIC's MAC address, e.g. 52:54:00:aa:00:30".into()],
        ),
        (
            host("").replace("52:54:00:aa:00:30", "52:54:00:aa:00"),
            vec!["hosts[0].interfaces[0].macAddress: \"52:54:00:aa:00\" is not a MAC address: six two-digit hex octets separated by ':', e.g. 52:54:00:aa:00:30".into()],
        ),
        (
            host("").replace("52:54:00:aa:00:30", "52:54:00:aa:00:zz"),
            vec!["hosts[0].interfaces[0].macAddress: \"52:54:00:aa:00:zz\" is not a MAC address: six two-digit hex octets separated by ':', e.g. 52:54:00:aa:00:30".into()],
        ),
        (
            host("").replace("52:54:00:aa:00:30", "ff:ff:ff:ff:ff:ff"),
            vec!["hosts[0].interfaces[0].macAddress: \"ff:ff:ff:ff:ff:ff\" is a multicast/broadcast MAC; a NIC's own address is unicast (first octet even)".into()],
        ),
        (
            host("      - name: eth1\n        macAddress: 52-54-00-AA-00-30\n"),
            vec!["hosts[0].interfaces[1].macAddress: \"52-54-00-AA-00-30\" is already used by another interface of hosts[0]".into()],
        ),
        (
            host("      - name: eth0\n        macAddress: 52:54:00:aa:00:31\n"),
            vec!["hosts[0].interfaces[1].name: \"eth0\" is already used by hosts[0].interfaces[0]".into()],
        ),
        // The design's example line: MACs compared ignoring case.
        (
            format!(
                "{}  - hostname: worker-1\n    interfaces:\n      - name: eth0\n        macAddress: 52:54:00:AA:00:30\n",
                host("")
            ),
            vec!["hosts[1].interfaces[0].macAddress: \"52:54:00:AA:00:30\" is already used by hosts[0]".into()],
        ),
        (
            format!(
                "{}  - hostname: worker-0\n    interfaces:\n      - name: eth0\n        macAddress: 52:54:00:aa:00:31\n",
                host("")
            ),
            vec!["hosts[1].hostname: \"worker-0\" is already used by hosts[0]".into()],
        ),
        (
            host("").replace("worker-0", "master-1"),
            vec!["hosts[0].hostname: \"master-1\" is already used by the existing node master-1: choose another hostname, or, to re-image that machine under the same name, drain and delete the Node first (`oc adm drain master-1 --ignore-daemonsets --delete-emptydir-data`, then `oc delete node master-1`)".into()],
        ),
        // root device hints
        (
            host("    rootDeviceHints:\n      deviceName: sda\n"),
            vec!["hosts[0].rootDeviceHints.deviceName: \"sda\" must be a device path under /dev/, e.g. /dev/sda or /dev/disk/by-path/pci-0000:00:1f.2-ata-1".into()],
        ),
        // 0 means "no minimum", as oc adm node-image and assisted-service read it.
        (host("    rootDeviceHints:\n      minSizeGigabytes: 0\n"), vec![]),
        (
            host("    rootDeviceHints:\n      wwn: 0xZZ12\n"),
            vec!["hosts[0].rootDeviceHints.wwn: \"0xZZ12\" is not a hex World Wide Name, e.g. 0x5000c500a0b1c2d3".into()],
        ),
        (
            host("    rootDeviceHints:\n      hctl: \"0:0:0\"\n"),
            vec!["hosts[0].rootDeviceHints.hctl: \"0:0:0\" must be host:channel:target:lun numbers, e.g. 0:0:0:0".into()],
        ),
        (
            host("    rootDeviceHints:\n      model: \"\"\n"),
            vec!["hosts[0].rootDeviceHints.model: empty; remove the key or give a value".into()],
        ),
        // top level
        (
            format!("cpuArchitecture: i386\n{}", host("")),
            vec!["cpuArchitecture: \"i386\" is not an architecture OpenShift runs on; use x86_64 (amd64), aarch64 (arm64), ppc64le or s390x".into()],
        ),
        (
            format!("bootArtifactsBaseURL: ftp://pxe.example.com\n{}", host("")),
            vec!["bootArtifactsBaseURL: \"ftp://pxe.example.com\" is not an http(s) URL; give where the PXE files will be served, e.g. http://pxe.example.com/ostest".into()],
        ),
    ];
    for (yaml, want) in cases {
        assert_eq!(errors(&yaml), want, "input:\n{yaml}");
    }
}

#[test]
fn static_ip_errors_ipv4_and_ipv6() {
    let one = |v4: &[&str], v6: &[&str]| {
        format!("hosts:\n{}", static_host("worker-0", "52:54:00:aa:00:30", v4, v6))
    };
    let p4 = "hosts[0].networkConfig.interfaces[0].ipv4.address[0].ip";
    let p6 = "hosts[0].networkConfig.interfaces[0].ipv6.address[0].ip";
    let cases: Vec<(String, String)> = vec![
        (
            one(&["127.0.0.1"], &[]),
            format!("{p4}: \"127.0.0.1\" is a loopback address; a node needs a routable unicast address"),
        ),
        (
            one(&[], &["::1"]),
            format!("{p6}: \"::1\" is a loopback address; a node needs a routable unicast address"),
        ),
        (
            one(&["169.254.10.1"], &[]),
            format!(
                "{p4}: \"169.254.10.1\" is a link-local address; a node needs a routable unicast address"
            ),
        ),
        (
            one(&[], &["fe80::1"]),
            format!("{p6}: \"fe80::1\" is a link-local address; a node needs a routable unicast address"),
        ),
        (
            one(&["0.0.0.0"], &[]),
            format!("{p4}: \"0.0.0.0\" is the unspecified address; a node needs a routable unicast address"),
        ),
        (
            one(&[], &["::"]),
            format!("{p6}: \"::\" is the unspecified address; a node needs a routable unicast address"),
        ),
        (
            one(&["224.0.0.1"], &[]),
            format!("{p4}: \"224.0.0.1\" is a multicast address; a node needs a routable unicast address"),
        ),
        (
            one(&[], &["ff02::1"]),
            format!("{p6}: \"ff02::1\" is a multicast address; a node needs a routable unicast address"),
        ),
        (
            one(&["192.168.111.20"], &[]),
            format!("{p4}: \"192.168.111.20\" is already used by the existing node master-0"),
        ),
        // Compared as parsed addresses: another spelling of master-0's IPv6 address.
        (
            one(&[], &["fd2e:6f44:5dd8:c956:0:0:0:14"]),
            format!("{p6}: \"fd2e:6f44:5dd8:c956:0:0:0:14\" is already used by the existing node master-0"),
        ),
    ];
    for (yaml, want) in cases {
        let got: Vec<String> = check_with(&yaml, &dual_stack())
            .errors
            .iter()
            .map(ToString::to_string)
            .collect();
        assert_eq!(got, vec![want], "input:\n{yaml}");
    }
}

#[test]
fn duplicate_static_ips_among_new_hosts() {
    // IPv4 across hosts, IPv6 across hosts written differently, and dual-stack within one host.
    let y = format!(
        "hosts:\n{}{}{}",
        static_host(
            "worker-0",
            "52:54:00:aa:00:30",
            &["192.168.111.30"],
            &["fd2e:6f44:5dd8:c956::1e"]
        ),
        static_host(
            "worker-1",
            "52:54:00:aa:00:31",
            &["192.168.111.30"],
            &["FD2E:6F44:5DD8:C956:0::1E"]
        ),
        static_host(
            "worker-2",
            "52:54:00:aa:00:32",
            &["192.168.111.32", "192.168.111.32"],
            &["fd2e:6f44:5dd8:c956::20"]
        ),
    );
    let got: Vec<String> = check_with(&y, &dual_stack())
        .errors
        .iter()
        .map(ToString::to_string)
        .collect();
    assert_eq!(
        got,
        vec![
            "hosts[1].networkConfig.interfaces[0].ipv4.address[0].ip: \"192.168.111.30\" is already used by hosts[0]",
            "hosts[1].networkConfig.interfaces[0].ipv6.address[0].ip: \"FD2E:6F44:5DD8:C956:0::1E\" is already used by hosts[0]",
            "hosts[2].networkConfig.interfaces[0].ipv4.address[1].ip: \"192.168.111.32\" is already used by hosts[2].networkConfig.interfaces[0].ipv4.address[0].ip",
        ]
    );
}

#[test]
fn nmstate_errors() {
    let eth = |extra: &str| {
        nmstate_host(&format!(
            "        - name: eth0\n          type: ethernet\n          state: up\n{extra}"
        ))
    };
    let cases: Vec<(String, Vec<&str>)> = vec![
        (
            nmstate_host("        - name: eth0\n          type: foo\n          state: up\n"),
            vec!["hosts[0].networkConfig.interfaces[0].type: \"foo\" is not an interface type nmstate knows (it would treat it as \"unknown\"); use ethernet, bond, vlan, linux-bridge, ovs-bridge, ovs-interface, vxlan, mac-vlan, vrf, dummy, infiniband, ..."],
        ),
        (
            nmstate_host("        - name: eth0\n          type: unknown\n          state: up\n"),
            vec!["hosts[0].networkConfig.interfaces[0].type: \"unknown\" is not an interface type nmstate knows (it would treat it as \"unknown\"); use ethernet, bond, vlan, linux-bridge, ovs-bridge, ovs-interface, vxlan, mac-vlan, vrf, dummy, infiniband, ..."],
        ),
        (
            nmstate_host("        - name: eth0\n          state: up\n"),
            vec!["hosts[0].networkConfig.interfaces[0].type: required: nmstate cannot tell an interface's type offline (e.g. type: ethernet)"],
        ),
        (
            eth("          ipv4:\n            enabled: true\n            address:\n              - ip: 300.1.1.1\n                prefix-length: 24\n"),
            vec!["hosts[0].networkConfig.interfaces[0]: nmstate cannot read it: invalid IP address syntax"],
        ),
        (
            eth("          ipv4:\n            enabled: true\n            adress: []\n"),
            vec!["hosts[0].networkConfig.interfaces[0].ipv4.adress: unknown field; did you mean \"address\"?"],
        ),
        // Every unknown key of an interface, at every level, not only the first.
        (
            eth("          mtuu: 9000\n          ipv4:\n            enabled: true\n            adress: []\n            dhcpp: false\n          ipv6:\n            enabeld: false\n          colour: red\n"),
            vec![
                "hosts[0].networkConfig.interfaces[0].ipv4.adress: unknown field; did you mean \"address\"?",
                "hosts[0].networkConfig.interfaces[0].ipv4.dhcpp: unknown field; did you mean \"dhcp\"?",
                "hosts[0].networkConfig.interfaces[0].ipv6.enabeld: unknown field; did you mean \"enabled\"?",
                "hosts[0].networkConfig.interfaces[0].mtuu: unknown field; did you mean \"mtu\"?",
                "hosts[0].networkConfig.interfaces[0].colour: unknown field; expected one of",
            ],
        ),
        // And of the rest of the document.
        (
            eth("").replace("      interfaces:\n", "      dns-reslover:\n        config:\n          server: [192.168.111.1]\n      routes:\n        confg: []\n      interfaces:\n"),
            vec![
                "hosts[0].networkConfig.dns-reslover: unknown field; did you mean \"dns-resolver\"?",
                "hosts[0].networkConfig.routes.confg: unknown field; did you mean \"config\"?",
            ],
        ),
        (
            eth("          ipv4:\n            enabled: true\n            address:\n              - ip: 192.168.111.30\n                prefix-length: 40\n"),
            vec!["hosts[0].networkConfig: nmstate cannot compile it: Invalid IPv4 network prefix length '40', should be in the range of 0 to 32"],
        ),
        (
            eth("").replace("      interfaces:\n        - name: eth0\n          type", "      routes:\n        config:\n          - destination: 0.0.0.0/0\n            next-hop-address: 192.168.111.1\n            next-hop-interface: eth9\n      interfaces:\n        - name: eth0\n          type"),
            vec!["hosts[0].networkConfig: nmstate cannot compile it: Route 'destination: 0.0.0.0/0 next-hop-interface: eth9 next-hop-address: 192.168.111.1': next hop interface eth9 not found"],
        ),
        (
            nmstate_host("        - name: eth1\n          type: ethernet\n          state: up\n"),
            vec!["hosts[0].networkConfig.interfaces[0].name: ethernet interface \"eth1\" is not in hosts[0].interfaces; list it there with its MAC ({name: eth1, macAddress: ...}) so the host's NICs can be matched"],
        ),
        (
            nmstate_host("        - name: eth0.5000\n          type: vlan\n          state: up\n          vlan:\n            base-iface: eth0\n            id: 5000\n"),
            vec!["hosts[0].networkConfig.interfaces[0].vlan.id: 5000 is not a VLAN id; 802.1Q ids are 0 to 4094"],
        ),
        (
            nmstate_host("        - name: averyveryverylongname\n          type: dummy\n          state: up\n"),
            vec!["hosts[0].networkConfig.interfaces[0].name: \"averyveryverylongname\" is longer than 15 bytes, the longest interface name Linux takes"],
        ),
        (
            nmstate_host("        - name: eth 0\n          type: dummy\n          state: up\n"),
            vec!["hosts[0].networkConfig.interfaces[0].name: \"eth 0\" is not an interface name: no '/', ':', spaces or control characters"],
        ),
        (
            nmstate_host("        - name: eth0.10\n          type: vlan\n          state: up\n          vlan:\n            base-iface: eno9\n            id: 10\n"),
            vec!["hosts[0].networkConfig.interfaces[0].vlan.base-iface: base of VLAN \"eth0.10\" \"eno9\" is not in hosts[0].interfaces; list it there with its MAC ({name: eno9, macAddress: ...}) so the host's NICs can be matched"],
        ),
    ];
    for (yaml, want) in cases {
        let got = errors(&yaml);
        // A want that ends in "expected one of" is a prefix (the list is nmstate's, long).
        let same = got.len() == want.len()
            && got.iter().zip(&want).all(|(g, w)| {
                if w.ends_with("expected one of") {
                    g.starts_with(w)
                } else {
                    g == w
                }
            });
        assert!(same, "input:\n{yaml}\ngot:  {got:#?}\nwant: {want:#?}");
    }
}

#[test]
fn ssh_keys() {
    let ok = [
        "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIJ3DQrIguLYojdb208ozgfB4TCUkUL3i2RwwJNaG8KyQ admin@example.com",
        "ecdsa-sha2-nistp256 AAAAE2VjZHNhLXNoYTItbmlzdHAyNTYAAAAIbmlzdHAyNTYAAABBBPxkRKwkoV36zCjWY23No1u4oRUL76HTQpux78hup40o5e2lWblFBfd1LG3H+icUS3elCrTDd4/W8s3mV5vZZRo=",
        // ssh-keygen -t rsa -b 2048 / -t ecdsa -b 384.
        "ssh-rsa AAAAB3NzaC1yc2EAAAADAQABAAABAQDQe+9fO0guVj00B9DKvoMvJqtl0Z/AzI0bkbARbDlSeQeLrkO7gVno+u3IJoFZqLT0opQkGVC5MJC5Ex0VFYaHAjLpCMF1wpWXwsb5C1i5+FieSB6zcFwu9esoJkp5E5uX7/DgDlJxj9IS9gqiCA+ohHb629ss2PCzVQAvg4yPu3au7S3lo8dUKPK/iX1qEmbmCOgRgDVSCn6k5O08JfIl313mOR9IAWJU3Z0AvLE90DnwbwuZWoHrChsvW8+Arr2JASyFF+yZZaHqDp6x2SJ3shQWHu665h3nubt4I7N8tALVijtg58KDyIinNb9HOaYHQkExiGC3E2OzC9+ciwIt ops@example.com",
        "ecdsa-sha2-nistp384 AAAAE2VjZHNhLXNoYTItbmlzdHAzODQAAAAIbmlzdHAzODQAAABhBLl4GerxojU/e8su9J/kCqhEuOR5guZ6ovKbWO3JFekujQcpPTw5+uUPfArX0ab9S9IzjyV19XnWHVf7Y38e1EfIyKNxeA7n2X94Em74aK9rmPYb5xo+YFx94aT39rzKRA== x",
    ];
    for k in ok {
        assert_eq!(
            errors(&format!("sshKey: {k}\n{}", host(""))),
            Vec::<String>::new(),
            "{k}"
        );
    }
    // Two keys, one per line (a block scalar).
    let two = format!("sshKey: |\n  {}\n  {}\n{}", ok[0], ok[1], host(""));
    assert_eq!(errors(&two), Vec::<String>::new());

    // Cut short: an ed25519 key missing its tail (it used to pass the length check and land
    // in the image), an RSA key cut inside its modulus, and the second of three keys.
    let cut_ed = &ok[0][..60];
    let cut_rsa = &ok[2][..200];
    for k in [cut_ed, cut_rsa] {
        let e = errors(&format!("sshKey: {k}\n{}", host("")));
        assert_eq!(e.len(), 1, "{k}: {e:?}");
        assert!(e[0].starts_with("sshKey: \""), "{e:?}");
        assert!(
            e[0].ends_with("is not an OpenSSH public key: the key data is cut short or damaged; copy the whole line of the .pub file again (it is a single line)"),
            "{e:?}"
        );
    }
    let three = format!(
        "sshKey: |\n  {}\n  {}\n\n  {}\n{}",
        ok[0],
        &ok[3][..100],
        ok[1],
        host("")
    );
    let e = errors(&three);
    assert_eq!(e.len(), 1, "{e:?}");
    assert!(
        e[0].starts_with("sshKey: line 2: \"ecdsa-sha2-nistp384 AAAAE2VjZHNhLXNoYTIt…\" is not an OpenSSH public key: the key data is cut short"),
        "{e:?}"
    );
    // A changed character in the middle (the key's own length prefix now wrong).
    let mut damaged = ok[0].to_string();
    damaged.replace_range(14..15, "B");
    assert_eq!(
        errors(&format!("sshKey: {damaged}\n{}", host(""))).len(),
        1,
        "{damaged}"
    );

    let cases: Vec<(&str, &str)> = vec![
        ("not-a-key", "sshKey: \"not-a-key\" is not an OpenSSH public key: expected \"<type> <base64> [comment]\", e.g. ssh-ed25519 AAAAC3Nz... user@host"),
        ("ssh-dsa AAAA", "sshKey: \"ssh-dsa AAAA\" is not an OpenSSH public key: unknown key type \"ssh-dsa\"; expected ssh-ed25519, ssh-rsa or ecdsa-sha2-nistp256/384/521"),
        ("ssh-ed25519 !!notbase64!!", "sshKey: \"ssh-ed25519 !!notbase64!!\" is not an OpenSSH public key: the key data is not base64 (only A-Z, a-z, 0-9, +, / and = may appear)"),
        // An ECDSA blob labelled ed25519.
        ("ssh-rsa AAAAE2VjZHNhLXNoYTItbmlzdHAyNTYAAAAIbmlzdHAyNTYAAABBBPxkRKwkoV36zCjWY23No1u4oRUL76HTQpux78hup40o5e2lWblFBfd1LG3H+icUS3elCrTDd4/W8s3mV5vZZRo=",
         "sshKey: \"ssh-rsa AAAAE2VjZHNhLXNoYTItbmlzdHAyNTYA…\" is not an OpenSSH public key: the key data is not a ssh-rsa key"),
        ("\"-----BEGIN OPENSSH PRIVATE KEY-----\"", "sshKey: this is a private key; give the public key (the .pub file), and keep the private key out of the config"),
    ];
    for (k, want) in cases {
        assert_eq!(errors(&format!("sshKey: {k}\n{}", host(""))), vec![want], "{k}");
    }
    // A whole private key: one error, none of its lines quoted.
    let private = "sshKey: |\n  -----BEGIN OPENSSH PRIVATE KEY-----\n  b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQAAAAAAAAABAAAAMwAAAAtzc2gtZW\n  QyNTUxOQAAACBSECRETSECRETSECRETSECRETSECRETSECRETSECRETSECRETAAAA\n  -----END OPENSSH PRIVATE KEY-----\n";
    let e = errors(&format!("{private}{}", host("")));
    assert_eq!(
        e,
        vec!["sshKey: this is a private key; give the public key (the .pub file), and keep the private key out of the config"],
        "{e:?}"
    );
}

#[test]
fn old_cluster_is_refused_versions_as_numbers() {
    let mut c = cluster();
    for (v, ok) in [
        ("4.18.0", true),
        ("4.19.3", true),
        ("4.17.30", false),
        ("4.9.0", false),
        ("5.0.1", true),
    ] {
        c.version.current = v.into();
        let got: Vec<String> = check_with(&host(""), &c)
            .errors
            .iter()
            .map(ToString::to_string)
            .collect();
        if ok {
            assert_eq!(got, Vec::<String>::new(), "{v}");
        } else {
            assert_eq!(
                got,
                vec![format!("cluster: OpenShift {v} is older than 4.18, the oldest release add-nodes supports; upgrade the cluster first")],
                "{v}"
            );
        }
    }
}

#[test]
fn all_errors_are_collected_at_once() {
    let y = format!(
        "cpuArchitecture: arm64\nsshKey: nope\nhosts:\n  - hostname: Bad_Name\n    role: master\n    interfaces:\n      - name: eth0\n        macAddress: xx\n{}",
        static_host("worker-1", "52:54:00:aa:00:31", &["127.0.0.1"], &[])
    );
    let v = check_with(&y, &cluster());
    let paths: Vec<&str> = v.errors.iter().map(|e| e.path.as_str()).collect();
    assert_eq!(
        paths,
        vec![
            "cpuArchitecture",
            "sshKey",
            "hosts[0].hostname",
            "hosts[0].role",
            "hosts[0].interfaces[0].macAddress",
            "hosts[1].networkConfig.interfaces[0].ipv4.address[0].ip",
        ]
    );
}

// ---------------------------------------------------------------- errors → exit code 3

#[test]
fn config_errors_exit_3_with_one_error_line_each() {
    let y = format!(
        "{}  - hostname: worker-1\n    interfaces:\n      - name: eth0\n        macAddress: 52:54:00:AA:00:30\n",
        host("    role: master\n")
    );
    let e: ConfigErrors = check_with(&y, &cluster())
        .into_result("nodes-config.yaml")
        .unwrap_err();
    assert_eq!(e.source, "nodes-config.yaml");
    let err: Error = e.into();
    assert_eq!(err.exit_code(), 3);
    let shown = format!("error: {err}");
    assert_eq!(
        shown,
        "error: hosts[0].role: \"master\" is not supported: add-nodes adds worker nodes only (control-plane nodes cannot be added this way); remove role or set role: worker\n\
         error: hosts[1].interfaces[0].macAddress: \"52:54:00:AA:00:30\" is already used by hosts[0]"
    );
}

// ---------------------------------------------------------------- single-host flags

#[test]
fn flags_build_the_same_model() {
    let dir = fixture("nodes-config");
    let f = FlagsHost {
        mac: "52:54:00:AA:00:50".into(),
        hostname: Some("worker-3".into()),
        // Relative to the working directory, as typed.
        network_config_path: Some("worker-3.nmstate.yaml".into()),
        root_device_hints: vec![
            "deviceName:/dev/sda".into(),
            "minSizeGigabytes:100".into(),
            "hctl:0:0:0:1".into(),
        ],
        cpu_architecture: Some("amd64".into()),
        // Absolute path.
        ssh_key_path: Some(dir.join("ops.pub")),
    };
    let cfg = from_flags(&f, &dir).unwrap();
    assert_eq!(cfg.origin, Origin::Flags);
    assert_eq!(cfg.cpu_architecture.as_deref(), Some("amd64"));
    assert!(cfg
        .ssh_key
        .as_deref()
        .unwrap()
        .starts_with("ecdsa-sha2-nistp256 "));
    let h = &cfg.hosts[0];
    // The interface takes the NMState's name for that MAC, not a hard-coded eth0.
    assert_eq!(h.interfaces[0].name, "enp1s0");
    let hints = h.root_device_hints.clone().unwrap();
    assert_eq!(hints.device_name.as_deref(), Some("/dev/sda"));
    assert_eq!(hints.min_size_gigabytes, Some(100));
    assert_eq!(hints.hctl.as_deref(), Some("0:0:0:1"));

    let v = validate(&cfg, &cluster());
    assert_eq!(v.errors, vec![]);
    assert_eq!(v.hosts[0].macs, vec!["52:54:00:aa:00:50"]);
    assert_eq!(
        v.hosts[0].static_ips,
        vec!["192.168.111.50".parse::<IpAddr>().unwrap()]
    );
    assert!(v.hosts[0].keyfiles[0].1.contains("address0=192.168.111.50/24"));

    // Without NMState: eth0.
    let bare = from_flags(
        &FlagsHost {
            mac: "52:54:00:aa:00:51".into(),
            ..Default::default()
        },
        &dir,
    )
    .unwrap();
    assert_eq!(bare.hosts[0].interfaces[0].name, "eth0");
    assert_eq!(bare.hosts[0].root_device_hints, None);
}

#[test]
fn flag_errors_name_the_flag() {
    let dir = fixture("nodes-config");
    let f = FlagsHost {
        mac: "52:54:00:aa:00:50".into(),
        hostname: Some("worker-3".into()),
        network_config_path: Some("missing.yaml".into()),
        root_device_hints: vec![
            "/dev/sda".into(),
            "devicename:/dev/sda".into(),
            "minSizeGigabytes:lots".into(),
            "rotational:maybe".into(),
        ],
        cpu_architecture: None,
        ssh_key_path: Some("/nonexistent/id.pub".into()),
    };
    let e = from_flags(&f, &dir).unwrap_err();
    assert_eq!(e.source, "flags");
    let lines = e.lines();
    assert_eq!(lines.len(), 6, "{lines:#?}");
    assert!(lines[0].starts_with(&format!(
        "--network-config-path: cannot read {} (from --network-config-path): ",
        dir.join("missing.yaml").display()
    )));
    assert!(lines[1].starts_with("--ssh-key-path: cannot read /nonexistent/id.pub (from --ssh-key-path): "));
    assert_eq!(
        &lines[2..],
        [
            "--root-device-hint: \"/dev/sda\" is not KEY:VALUE, e.g. deviceName:/dev/sda",
            "--root-device-hint: unknown hint \"devicename\"; did you mean \"deviceName\"?",
            "--root-device-hint minSizeGigabytes: \"lots\" is not a whole number of gigabytes (0 or more)",
            "--root-device-hint rotational: \"maybe\" must be true or false",
        ]
    );

    // Validation of a flag-built config names the flags too.
    let f = FlagsHost {
        mac: "52:54:00:aa:00".into(),
        hostname: Some("master-0".into()),
        network_config_path: Some("worker-3.nmstate.yaml".into()),
        root_device_hints: vec!["wwn:xyz".into()],
        cpu_architecture: Some("arm64".into()),
        ssh_key_path: None,
    };
    let cfg = from_flags(&f, &dir).unwrap();
    let got: Vec<String> = validate(&cfg, &cluster())
        .errors
        .iter()
        .map(ToString::to_string)
        .collect();
    assert_eq!(
        got,
        vec![
            "--cpu-architecture: \"arm64\" (aarch64) differs from the control plane's x86_64 and the cluster's release is not multi-arch; hosts must be x86_64 (or migrate the cluster to the multi-arch payload)",
            "--hostname: \"master-0\" is already used by the existing node master-0: choose another hostname, or, to re-image that machine under the same name, drain and delete the Node first (`oc adm drain master-0 --ignore-daemonsets --delete-emptydir-data`, then `oc delete node master-0`)",
            "--mac-address: \"52:54:00:aa:00\" is not a MAC address: six two-digit hex octets separated by ':', e.g. 52:54:00:aa:00:30",
            "--root-device-hint wwn: \"xyz\" is not a hex World Wide Name, e.g. 0x5000c500a0b1c2d3",
        ]
    );
}

/// Static addresses the cluster itself uses are errors: the cluster and service networks (a
/// node there never gets its serving certificate), the machine network's network and
/// broadcast addresses, and the API server's IP when the API URL is an IP literal.
#[test]
fn cluster_owned_addresses_are_errors() {
    let mk = |ip: &str| {
        format!(
            "hosts:\n{}",
            static_host("worker-0", "52:54:00:aa:00:30", &[ip], &[])
        )
    };
    for (ip, needle) in [
        ("10.128.4.7", "cluster (pod) network 10.128.0.0/14"),
        ("172.30.0.10", "service network 172.30.0.0/16"),
        (
            "192.168.111.0",
            "network address of the machine network 192.168.111.0/24",
        ),
        (
            "192.168.111.255",
            "broadcast address of the machine network 192.168.111.0/24",
        ),
    ] {
        let e = errors(&mk(ip));
        assert!(
            e.iter()
                .any(|l| l.contains("hosts[0].networkConfig") && l.contains(ip) && l.contains(needle)),
            "{ip}: {e:?}"
        );
    }
    assert!(errors(&mk("192.168.111.30")).is_empty());
    // The API server by IP.
    let mut c = cluster();
    c.cluster.api_url = "https://192.168.111.5:6443".into();
    let v = check_with(&mk("192.168.111.5"), &c);
    assert!(
        v.errors
            .iter()
            .any(|e| e.to_string().contains("the API server's address")),
        "{:?}",
        v.errors
    );
    // IPv6: the subnet's own address (subnet-router anycast) is not a host address.
    let v = check_with(
        &format!(
            "hosts:\n{}",
            static_host("worker-0", "52:54:00:aa:00:30", &[], &["fd2e:6f44:5dd8:c956::"])
        ),
        &dual_stack(),
    );
    assert!(
        v.errors.iter().any(|e| e.to_string().contains("network address")),
        "{:?}",
        v.errors
    );
}

/// A new host may not take the API or ingress VIP (keepalived serves them on the control
/// plane), and `interfaces[].name` must be a Linux interface name.
#[test]
fn vips_and_interface_names_are_refused() {
    for (ip, what) in [
        ("192.168.111.5", "the API VIP"),
        ("192.168.111.4", "the ingress VIP"),
    ] {
        let y = format!(
            "hosts:\n{}",
            static_host("worker-0", "52:54:00:aa:00:30", &[ip], &[])
        );
        let e = errors(&y);
        assert_eq!(e.len(), 1, "{e:?}");
        assert!(
            e[0].starts_with(&format!(
                "hosts[0].networkConfig.interfaces[0].ipv4.address[0].ip: \"{ip}\" is {what} "
            )),
            "{e:?}"
        );
    }
    let e = errors("hosts:\n  - hostname: worker-0\n    interfaces:\n      - name: \"eth0\\e]0;x\\a\"\n        macAddress: 52:54:00:aa:00:30\n");
    assert_eq!(
        e,
        vec!["hosts[0].interfaces[0].name: \"eth0\\u001b]0;x\\u0007\" is not an interface name: no '/', ':', spaces or control characters"],
        "{e:?}"
    );
}
