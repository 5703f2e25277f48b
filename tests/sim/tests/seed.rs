//! The seeded cluster holds what the plugin reads, shaped as a real cluster has it.

use agent_day2_sim::baseiso;
use agent_day2_sim::baseiso::BaseIsoInfo;
use agent_day2_sim::scenario::{ProxySettings, Scenario};
use agent_day2_sim::seed::{seed_objects, SeedContext};
use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine;
use serde_json::Value;
use sha2::Digest;

const CA: &str = "-----BEGIN CERTIFICATE-----\nMIIBsim\n-----END CERTIFICATE-----\n";

fn ctx() -> SeedContext {
    SeedContext {
        api_url: "https://192.168.111.5:6443".into(),
        files_base_url: "http://192.168.111.5:8080".into(),
        base_iso: BaseIsoInfo {
            path: "/nonexistent/base.iso".into(),
            file_name: baseiso::iso_file_name("x86_64"),
            sha256: "ab".repeat(32),
            size: 1,
        },
        ca_pem: CA.into(),
    }
}

fn find<'a>(objs: &'a [Value], kind: &str, ns: &str, name: &str) -> Option<&'a Value> {
    objs.iter().find(|o| {
        o["kind"] == kind
            && o["metadata"]["name"] == name
            && o["metadata"]["namespace"].as_str().unwrap_or("") == ns
    })
}

fn get<'a>(objs: &'a [Value], kind: &str, ns: &str, name: &str) -> &'a Value {
    find(objs, kind, ns, name).unwrap_or_else(|| panic!("{kind} {ns}/{name} not seeded"))
}

fn secret_data(o: &Value, key: &str) -> String {
    String::from_utf8(B64.decode(o["data"][key].as_str().unwrap()).unwrap()).unwrap()
}

fn seed(s: &Scenario) -> Vec<Value> {
    seed_objects(s, &ctx()).unwrap()
}

fn stream_of(objs: &[Value]) -> Value {
    let cm = get(
        objs,
        "ConfigMap",
        "openshift-machine-config-operator",
        "coreos-bootimages",
    );
    serde_json::from_str(cm["data"]["stream"].as_str().unwrap()).unwrap()
}

#[test]
fn default_cluster_has_what_the_plugin_reads() {
    let s = Scenario::default();
    let objs = seed(&s);
    // namespaces first, every object complete
    let first_non_ns = objs.iter().position(|o| o["kind"] != "Namespace").unwrap();
    assert!(objs[first_non_ns..].iter().all(|o| o["kind"] != "Namespace"));
    for o in &objs {
        assert!(
            o["apiVersion"].is_string() && o["metadata"]["name"].is_string(),
            "{o}"
        );
    }
    for ns in [
        "openshift-config",
        "openshift-config-managed",
        "openshift-machine-config-operator",
        "openshift-machine-api",
        "kube-system",
        "default",
        "openshift-cluster-version",
    ] {
        get(&objs, "Namespace", "", ns);
    }
    let cv = get(&objs, "ClusterVersion", "", "version");
    assert_eq!(cv["spec"]["clusterID"], s.cluster_id.as_str());
    assert_eq!(cv["status"]["desired"]["version"], "4.18.12");
    let img = cv["status"]["desired"]["image"].as_str().unwrap();
    let prefix = "quay.io/openshift-release-dev/ocp-release@sha256:";
    assert!(img.starts_with(prefix) && img.len() == prefix.len() + 64, "{img}");
    assert!(cv["status"]["desired"].get("architecture").is_none());
    let h = cv["status"]["history"].as_array().unwrap();
    assert_eq!(h.len(), 1);
    assert_eq!(h[0]["state"], "Completed");
    assert_eq!(h[0]["image"], img);

    let infra = get(&objs, "Infrastructure", "", "cluster");
    assert_eq!(
        infra["status"]["apiServerURL"],
        "https://api.ostest.example.com:6443"
    );
    assert_eq!(
        infra["status"]["apiServerInternalURI"],
        "https://api-int.ostest.example.com:6443"
    );
    assert_eq!(infra["status"]["platformStatus"]["type"], "BareMetal");
    assert_eq!(infra["status"]["controlPlaneTopology"], "HighlyAvailable");
    assert_eq!(
        infra["spec"]["platformSpec"]["baremetal"]["machineNetworks"],
        serde_json::json!(["192.168.111.0/24"])
    );
    assert_eq!(
        get(&objs, "DNS", "", "cluster")["spec"]["baseDomain"],
        "ostest.example.com"
    );
    let net = get(&objs, "Network", "", "cluster");
    assert_eq!(net["status"]["clusterNetwork"][0]["cidr"], "10.128.0.0/14");
    assert_eq!(net["status"]["clusterNetwork"][0]["hostPrefix"], 23);
    assert_eq!(
        net["status"]["serviceNetwork"],
        serde_json::json!(["172.30.0.0/16"])
    );
    assert_eq!(net["spec"]["networkType"], "OVNKubernetes");
    let proxy = get(&objs, "Proxy", "", "cluster");
    assert!(proxy["status"].get("httpProxy").is_none() && proxy["status"].get("noProxy").is_none());
    assert!(find(&objs, "ImageDigestMirrorSet", "", "image-digest-mirror").is_none());
    assert!(get(&objs, "Image", "", "cluster")["spec"]
        .get("additionalTrustedCA")
        .is_none());

    let ps = get(&objs, "Secret", "openshift-config", "pull-secret");
    assert_eq!(ps["type"], "kubernetes.io/dockerconfigjson");
    let auths: Value = serde_json::from_str(&secret_data(ps, ".dockerconfigjson")).unwrap();
    for reg in ["quay.io", "registry.redhat.io"] {
        let a =
            String::from_utf8(B64.decode(auths["auths"][reg]["auth"].as_str().unwrap()).unwrap()).unwrap();
        assert!(a.contains(':'), "{reg}: user:password");
    }

    let cc = get(&objs, "ConfigMap", "kube-system", "cluster-config-v1");
    let ic: Value = serde_saphyr::from_str(cc["data"]["install-config"].as_str().unwrap()).unwrap();
    assert_eq!(ic["baseDomain"], "example.com");
    assert_eq!(ic["metadata"]["name"], "ostest");
    assert_eq!(ic["networking"]["machineNetwork"][0]["cidr"], "192.168.111.0/24");
    assert_eq!(ic["networking"]["clusterNetwork"][0]["cidr"], "10.128.0.0/14");
    assert_eq!(ic["networking"]["serviceNetwork"][0], "172.30.0.0/16");
    assert!(ic["platform"]["baremetal"].is_object());
    assert!(ic["sshKey"]
        .as_str()
        .unwrap()
        .starts_with("ssh-ed25519 AAAAC3NzaC1lZDI1NTE5"));
    assert!(
        ic.get("pullSecret").is_none(),
        "real clusters strip the pull secret"
    );

    let bi = get(
        &objs,
        "ConfigMap",
        "openshift-machine-config-operator",
        "coreos-bootimages",
    );
    assert_eq!(bi["data"]["releaseVersion"], "4.18.12");
    let stream = stream_of(&objs);
    let metal = &stream["architectures"]["x86_64"]["artifacts"]["metal"];
    assert_eq!(
        metal["formats"]["iso"]["disk"]["location"],
        format!("http://192.168.111.5:8080/{}", baseiso::iso_file_name("x86_64"))
    );
    assert_eq!(metal["formats"]["iso"]["disk"]["sha256"], "ab".repeat(32));
    for k in ["kernel", "initramfs", "rootfs"] {
        assert!(metal["formats"]["pxe"][k]["location"]
            .as_str()
            .unwrap()
            .starts_with("http://192.168.111.5:8080/rhcos-"));
        assert_eq!(metal["formats"]["pxe"][k]["sha256"].as_str().unwrap().len(), 64);
    }
    assert!(stream["architectures"].get("aarch64").is_none());

    let ud = get(
        &objs,
        "Secret",
        "openshift-machine-api",
        "worker-user-data-managed",
    );
    assert_eq!(secret_data(ud, "disableTemplating"), "true");
    let ign: Value = serde_json::from_str(&secret_data(ud, "userData")).unwrap();
    assert_eq!(
        ign["ignition"]["config"]["merge"][0]["source"],
        "https://api-int.ostest.example.com:22623/config/worker"
    );
    assert_eq!(ign["ignition"]["version"], "3.2.0");
    let ca_src = ign["ignition"]["security"]["tls"]["certificateAuthorities"][0]["source"]
        .as_str()
        .unwrap();
    let b64 = ca_src
        .strip_prefix("data:text/plain;charset=utf-8;base64,")
        .unwrap();
    assert_eq!(B64.decode(b64).unwrap(), CA.as_bytes());

    let ssh = get(&objs, "MachineConfig", "", "99-worker-ssh");
    assert_eq!(
        ssh["metadata"]["labels"]["machineconfiguration.openshift.io/role"],
        "worker"
    );
    assert_eq!(ssh["spec"]["config"]["passwd"]["users"][0]["name"], "core");
    assert_eq!(
        ssh["spec"]["config"]["passwd"]["users"][0]["sshAuthorizedKeys"][0],
        ic["sshKey"]
    );
    assert!(
        find(&objs, "MachineConfig", "", "99-worker-fips").is_none(),
        "only FIPS clusters have it"
    );
    let chrony = get(&objs, "MachineConfig", "", "50-workers-chrony-configuration");
    let file = &chrony["spec"]["config"]["storage"]["files"][0];
    assert_eq!(file["path"], "/etc/chrony.conf");
    let src = file["contents"]["source"].as_str().unwrap();
    let conf = B64
        .decode(src.strip_prefix("data:text/plain;charset=utf-8;base64,").unwrap())
        .unwrap();
    assert!(String::from_utf8(conf)
        .unwrap()
        .contains("server 192.168.111.1 iburst"));
    get(&objs, "MachineConfig", "", "99-master-ssh");
    get(&objs, "MachineConfigPool", "", "master");
    get(&objs, "MachineConfigPool", "", "worker");

    let nodes: Vec<&Value> = objs.iter().filter(|o| o["kind"] == "Node").collect();
    assert_eq!(nodes.len(), 3);
    for (i, n) in nodes.iter().enumerate() {
        assert_eq!(n["metadata"]["name"], format!("master-{i}"));
        assert_eq!(n["metadata"]["labels"]["node-role.kubernetes.io/master"], "");
        assert_eq!(
            n["metadata"]["labels"]["node-role.kubernetes.io/control-plane"],
            ""
        );
        assert_eq!(n["metadata"]["labels"]["kubernetes.io/arch"], "amd64");
        assert_eq!(n["status"]["nodeInfo"]["architecture"], "amd64");
        assert!(n["status"]["nodeInfo"]["kubeletVersion"]
            .as_str()
            .unwrap()
            .starts_with("v1.31."));
        let ready = n["status"]["conditions"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["type"] == "Ready")
            .unwrap();
        assert_eq!(ready["status"], "True");
        let addrs = n["status"]["addresses"].as_array().unwrap();
        assert_eq!(
            addrs[0],
            serde_json::json!({"type": "InternalIP", "address": format!("192.168.111.{}", 20 + i)})
        );
        assert!(addrs
            .iter()
            .any(|a| a["type"] == "Hostname" && a["address"] == format!("master-{i}")));
    }
}

#[test]
fn sno() {
    let s = Scenario {
        sno: true,
        platform: "None".into(),
        ..Default::default()
    };
    let objs = seed(&s);
    assert_eq!(objs.iter().filter(|o| o["kind"] == "Node").count(), 1);
    let infra = get(&objs, "Infrastructure", "", "cluster");
    assert_eq!(infra["status"]["controlPlaneTopology"], "SingleReplica");
    assert_eq!(infra["status"]["platformStatus"]["type"], "None");
    assert!(infra["spec"]["platformSpec"].get("baremetal").is_none());
    let ic: Value = serde_saphyr::from_str(
        get(&objs, "ConfigMap", "kube-system", "cluster-config-v1")["data"]["install-config"]
            .as_str()
            .unwrap(),
    )
    .unwrap();
    assert_eq!(
        ic["networking"]["machineNetwork"],
        serde_json::json!([]),
        "platform none: no machine networks"
    );
    assert_eq!(ic["controlPlane"]["replicas"], 1);
}

#[test]
fn disconnected_with_proxy() {
    let s = Scenario {
        disconnected: true,
        mirror_registry: Some("mirror.example.com:8443".into()),
        proxy: Some(ProxySettings {
            http_proxy: Some("http://proxy.example.com:3128".into()),
            https_proxy: Some("http://proxy.example.com:3128".into()),
            no_proxy: Some("example.org,10.0.0.0/8".into()),
            trusted_ca: Some("corp-ca".into()),
        }),
        ..Default::default()
    };
    let objs = seed(&s);
    let idms = get(&objs, "ImageDigestMirrorSet", "", "image-digest-mirror");
    let m = idms["spec"]["imageDigestMirrors"].as_array().unwrap();
    let sources: Vec<&str> = m.iter().map(|x| x["source"].as_str().unwrap()).collect();
    assert_eq!(
        sources,
        [
            "quay.io/openshift-release-dev/ocp-release",
            "quay.io/openshift-release-dev/ocp-v4.0-art-dev"
        ]
    );
    assert!(m
        .iter()
        .all(|x| x["mirrors"][0] == "mirror.example.com:8443/ocp4/openshift4"));
    let img = get(&objs, "ClusterVersion", "", "version")["status"]["desired"]["image"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        img.starts_with("mirror.example.com:8443/ocp4/openshift4@sha256:"),
        "{img}"
    );
    assert_eq!(
        get(&objs, "Image", "", "cluster")["spec"]["additionalTrustedCA"]["name"],
        "registry-ca"
    );
    assert_eq!(
        get(&objs, "ConfigMap", "openshift-config", "registry-ca")["data"]["mirror.example.com..8443"],
        CA
    );
    let auths: Value = serde_json::from_str(&secret_data(
        get(&objs, "Secret", "openshift-config", "pull-secret"),
        ".dockerconfigjson",
    ))
    .unwrap();
    assert!(auths["auths"]["mirror.example.com:8443"]["auth"].is_string());

    let proxy = get(&objs, "Proxy", "", "cluster");
    assert_eq!(proxy["spec"]["trustedCA"]["name"], "corp-ca");
    assert_eq!(proxy["status"]["httpsProxy"], "http://proxy.example.com:3128");
    let np: Vec<&str> = proxy["status"]["noProxy"].as_str().unwrap().split(',').collect();
    for want in [
        ".cluster.local",
        ".svc",
        "127.0.0.1",
        "localhost",
        "api-int.ostest.example.com",
        "192.168.111.0/24",
        "10.128.0.0/14",
        "172.30.0.0/16",
        "example.org",
        "10.0.0.0/8",
    ] {
        assert!(np.contains(&want), "noProxy lacks {want}: {np:?}");
    }
    let mut sorted = np.clone();
    sorted.sort();
    assert_eq!(np, sorted);
    assert_eq!(
        get(&objs, "ConfigMap", "openshift-config", "corp-ca")["data"]["ca-bundle.crt"],
        CA
    );
}

#[test]
fn fips() {
    let objs = seed(&Scenario {
        fips: true,
        ..Default::default()
    });
    for role in ["worker", "master"] {
        let mc = get(&objs, "MachineConfig", "", &format!("99-{role}-fips"));
        assert_eq!(mc["spec"]["fips"], true);
        assert_eq!(
            mc["metadata"]["labels"]["machineconfiguration.openshift.io/role"],
            role
        );
    }
}

#[test]
fn dual_stack() {
    let objs = seed(&Scenario {
        dual_stack: true,
        ..Default::default()
    });
    let net = get(&objs, "Network", "", "cluster");
    assert_eq!(net["status"]["clusterNetwork"].as_array().unwrap().len(), 2);
    assert_eq!(net["status"]["serviceNetwork"].as_array().unwrap().len(), 2);
    let infra = get(&objs, "Infrastructure", "", "cluster");
    assert_eq!(
        infra["spec"]["platformSpec"]["baremetal"]["machineNetworks"]
            .as_array()
            .unwrap()
            .len(),
        2
    );
    let n = get(&objs, "Node", "", "master-1");
    let ips: Vec<&str> = n["status"]["addresses"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|a| a["type"] == "InternalIP")
        .map(|a| a["address"].as_str().unwrap())
        .collect();
    assert_eq!(ips.len(), 2);
    let v6: std::net::IpAddr = ips[1].parse().unwrap();
    assert!(v6.is_ipv6());
}

#[test]
fn multi_arch_arm_control_plane() {
    let s = Scenario {
        multi_arch: true,
        architecture: "arm64".into(),
        ..Default::default()
    };
    let mut c = ctx();
    c.base_iso.file_name = baseiso::iso_file_name("aarch64");
    let objs = seed_objects(&s, &c).unwrap();
    let cv = get(&objs, "ClusterVersion", "", "version");
    // As a Default-feature-set cluster shows it (its CRD has no status.desired.architecture).
    assert_eq!(cv["spec"]["desiredUpdate"]["architecture"], "Multi");
    assert_eq!(
        get(&objs, "Node", "", "master-0")["status"]["nodeInfo"]["architecture"],
        "arm64"
    );
    let stream = stream_of(&objs);
    // the other architecture's ISO is listed with the true sha256 of what build_base_iso writes
    let x86 = &stream["architectures"]["x86_64"]["artifacts"]["metal"]["formats"]["iso"]["disk"];
    let want = hex::encode(sha2::Sha256::digest(baseiso::base_iso_bytes("x86_64").unwrap()));
    assert_eq!(x86["sha256"], want.as_str());
    assert!(x86["location"].as_str().unwrap().ends_with("-live.x86_64.iso"));
    assert_eq!(
        stream["architectures"]["aarch64"]["artifacts"]["metal"]["formats"]["iso"]["disk"]["sha256"],
        "ab".repeat(32)
    );
}

#[test]
fn upgrade_in_progress() {
    let objs = seed(&Scenario {
        upgrade_to: Some("4.19.2".into()),
        ..Default::default()
    });
    let cv = get(&objs, "ClusterVersion", "", "version");
    let h = cv["status"]["history"].as_array().unwrap();
    assert_eq!(h[0]["state"], "Partial");
    assert_eq!(h[0]["version"], "4.19.2");
    assert_eq!(h[1]["state"], "Completed");
    assert_eq!(h[1]["version"], "4.18.12");
    assert_eq!(cv["status"]["desired"]["version"], "4.19.2");
    assert_eq!(cv["status"]["desired"]["image"], h[0]["image"]);
    assert_ne!(h[0]["image"], h[1]["image"]);
}

#[test]
fn omit_and_objects() {
    let s = Scenario {
        omit: vec![
            "configmaps/openshift-machine-config-operator/coreos-bootimages".into(),
            "machineconfigs/99-worker-ssh".into(),
            "nodes/master-2".into(),
        ],
        objects: vec![
            serde_json::json!({"apiVersion": "config.openshift.io/v1", "kind": "Infrastructure", "metadata": {"name": "cluster"},
                "spec": {"platformSpec": {"type": "External"}}, "status": {"apiServerURL": "https://api.other.example.org:6443", "platformStatus": {"type": "External"}}}),
            serde_json::json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x", "namespace": "default"}, "data": {"image": "$TEST_IMAGE"}}),
        ],
        ..Default::default()
    };
    let objs = seed(&s);
    assert!(find(
        &objs,
        "ConfigMap",
        "openshift-machine-config-operator",
        "coreos-bootimages"
    )
    .is_none());
    assert!(find(&objs, "MachineConfig", "", "99-worker-ssh").is_none());
    assert!(find(&objs, "MachineConfig", "", "99-master-ssh").is_some());
    assert!(find(&objs, "Node", "", "master-2").is_none());
    assert_eq!(objs.iter().filter(|o| o["kind"] == "Infrastructure").count(), 1);
    assert_eq!(
        get(&objs, "Infrastructure", "", "cluster")["status"]["platformStatus"]["type"],
        "External"
    );
    let img = get(&objs, "ClusterVersion", "", "version")["status"]["desired"]["image"].clone();
    assert_eq!(get(&objs, "ConfigMap", "default", "x")["data"]["image"], img);
    let bad = Scenario {
        objects: vec![serde_json::json!({"kind": "ConfigMap"})],
        ..Default::default()
    };
    assert!(seed_objects(&bad, &ctx())
        .unwrap_err()
        .to_string()
        .contains("objects[0]"));
}

#[test]
#[ignore = "needs node-joiner's acceptance data: set AGENT_DAY2_INSTALLER_SRC to an openshift/installer checkout (its cmd/node-joiner/testdata)"]
fn objects_dir_from_upstream_node_joiner_testdata() {
    let dir = agent_day2_sim::upstream::node_joiner_testdata()
        .unwrap_or_else(|why| panic!("{why}"))
        .join("setup/default");
    let s = Scenario {
        objects_dir: Some(dir.to_path_buf()),
        ..Default::default()
    };
    let objs = seed(&s);
    let cv = get(&objs, "ClusterVersion", "", "version");
    assert_eq!(cv["spec"]["clusterID"], "c37c9544-4320-4380-9d8b-0753a4d9ea57");
    let img = agent_day2_sim::seed::release_image(&s);
    assert_eq!(
        cv["status"]["desired"]["image"],
        img.as_str(),
        "$TEST_IMAGE replaced"
    );
    assert_eq!(objs.iter().filter(|o| o["kind"] == "ClusterVersion").count(), 1);
    assert_eq!(
        get(&objs, "Infrastructure", "", "cluster")["status"]["apiServerURL"],
        "https://api.ostest.test.metalkube.org:6443"
    );
    // stringData became data, as the API server does it
    let ps = get(&objs, "Secret", "openshift-config", "pull-secret");
    assert!(ps.get("stringData").is_none());
    assert!(secret_data(ps, ".dockerconfigjson").contains("c3VwZXItc2VjcmV0Cg=="));
    assert!(find(&objs, "ImageDigestMirrorSet", "", "image-digest-mirror").is_some());
    assert_eq!(
        get(&objs, "MachineConfig", "", "99-worker-fips")["spec"]["fips"],
        true
    );
    // the seed's other objects remain
    get(&objs, "Node", "", "master-1");
    get(
        &objs,
        "Secret",
        "openshift-machine-api",
        "worker-user-data-managed",
    );
}

#[test]
fn stream_names_the_real_base_iso_and_pxe_files() {
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join(baseiso::iso_file_name("x86_64"));
    let info = baseiso::build_base_iso(&path, "x86_64").unwrap();
    let bytes = std::fs::read(&path).unwrap();
    assert_eq!(info.size, bytes.len() as u64);
    assert_eq!(info.sha256, hex::encode(sha2::Sha256::digest(&bytes)));
    assert_eq!(info.file_name, "rhcos-418.94.202501221327-0-live.x86_64.iso");
    let again = baseiso::build_base_iso(&tmp.path().join("again.iso"), "x86_64").unwrap();
    assert_eq!(again.sha256, info.sha256, "stable sha256");
    let mut c = ctx();
    c.base_iso = info.clone();
    let objs = seed_objects(&Scenario::default(), &c).unwrap();
    let stream = stream_of(&objs);
    let metal = &stream["architectures"]["x86_64"]["artifacts"]["metal"]["formats"];
    assert_eq!(metal["iso"]["disk"]["sha256"], info.sha256.as_str());
    for k in ["kernel", "initramfs", "rootfs"] {
        let loc = metal["pxe"][k]["location"].as_str().unwrap();
        let name = loc.rsplit('/').next().unwrap();
        let data = std::fs::read(tmp.path().join(name)).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(
            metal["pxe"][k]["sha256"],
            hex::encode(sha2::Sha256::digest(&data)).as_str(),
            "{k}"
        );
    }
    // our reader finds the CoreOS layout in the file that was written
    let mut f = std::fs::File::open(&path).unwrap();
    assert_eq!(
        agent_day2_iso9660::get(&mut f, "images/ignition.img")
            .unwrap()
            .size,
        262144
    );
    assert!(baseiso::build_base_iso(&tmp.path().join("x.iso"), "s390x").is_err());
}
