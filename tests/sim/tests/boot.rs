//! `agent-day2-sim boot` end to end: a node ISO made here (the simulator's RHCOS-layout base ISO
//! with a contract-satisfying config.ign embedded as coreos-installer does), booted against the
//! simulated cluster; CSRs approved by hand with the real `kubectl certificate approve`.

use std::io::{Read, Seek, SeekFrom, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use agent_day2_sim::boot::{cpio, embed, jwt};
use agent_day2_sim::harness::{bin, TestCluster};
use base64::Engine;
use serde_json::{json, Value};

const CLUSTER_ID: &str = "c37c9544-4320-4380-9d8b-0753a4d9ea57";
const INFRA_ENV_ID: &str = "0f1e2d3c-4b5a-4978-8a6b-5c4d3e2f1a0b";
const W0: (&str, &str, &str) = ("worker-0", "52:54:00:aa:00:30", "192.168.111.30");
const W1: (&str, &str, &str) = ("worker-1", "52:54:00:aa:00:31", "192.168.111.31");

/// Tokens of the three auth schemes, signed by a key made here (claims as the installer signs
/// them: `auth_scheme` and `exp`).
struct Tokens {
    pub_pem: String,
    /// PKCS#8 DER of the signing key, to mint other tokens.
    key_der: Vec<u8>,
    agent: String,
    user: String,
    watcher: String,
}

fn tokens() -> Tokens {
    let k = rcgen::KeyPair::generate().unwrap();
    let exp = time::OffsetDateTime::now_utc().unix_timestamp() + 48 * 3600;
    let t =
        |scheme: &str| jwt::sign(&json!({"auth_scheme": scheme, "exp": exp}), &k.serialize_der()).unwrap();
    Tokens {
        pub_pem: k.public_key_pem(),
        key_der: k.serialize_der(),
        agent: t("agentAuth"),
        user: t("userAuth"),
        watcher: t("watcherAuth"),
    }
}

fn data_url(s: &str) -> String {
    format!(
        "data:;base64,{}",
        base64::engine::general_purpose::STANDARD.encode(s)
    )
}

/// Files of a complete config (path → contents); tests drop or change some.
fn contract_files(tok: &Tokens) -> Vec<(String, String)> {
    let b64 = |s: &str| base64::engine::general_purpose::STANDARD.encode(s);
    let pull = r#"{"auths":{"quay.io":{"auth":"dXNlcjpwYXNz"}}}"#;
    let mut f: Vec<(String, String)> = vec![
        ("/etc/assisted/add-nodes.env".into(), format!(
            "CLUSTER_ID={CLUSTER_ID}\nCLUSTER_NAME=ostest\nCLUSTER_API_VIP_DNS_NAME=api.ostest.example.com\nAUTH_TOKEN_EXPIRY=2099-01-01T00:00:00Z\n")),
        ("/etc/assisted/rendezvous-host.env".into(),
            format!("NODE_ZERO_IP=127.0.0.1\nSERVICE_BASE_URL=http://127.0.0.1:8090/\nIMAGE_SERVICE_BASE_URL=http://127.0.0.1:8888/\nPULL_SECRET_TOKEN={}\nUSER_AUTH_TOKEN={}\nWORKFLOW_TYPE=addnodes\n", tok.agent, tok.user)),
        ("/etc/assisted/clusterconfig/import-cluster-config.json".into(), r#"{"networking": {"userManagedNetworking": false}}"#.into()),
        ("/etc/assisted/clusterconfig/worker-ignition-endpoint.json".into(),
            r#"{"url":"https://api-int.ostest.example.com:22623/config","ca_certificate":"LS0tLS1CRUdJTi..."}"#.into()),
        ("/etc/assisted/manifests/cluster-image-set.yaml".into(),
            "apiVersion: hive.openshift.io/v1\nkind: ClusterImageSet\nmetadata:\n  name: openshift-4.18.12\nspec:\n  releaseImage: quay.io/openshift-release-dev/ocp-release:4.18.12-x86_64\n".into()),
        ("/etc/assisted/manifests/pull-secret.yaml".into(), format!(
            "apiVersion: v1\nkind: Secret\nmetadata:\n  name: pull-secret\n  namespace: cluster0\ntype: kubernetes.io/dockerconfigjson\ndata:\n  .dockerconfigjson: {}\n", b64(pull))),
        ("/etc/assisted/manifests/infraenv.yaml".into(),
            "apiVersion: agent-install.openshift.io/v1beta1\nkind: InfraEnv\nmetadata:\n  name: ostest\n  namespace: cluster0\nspec:\n  cpuArchitecture: x86_64\n  sshAuthorizedKey: ssh-ed25519 AAAAC3Nza test\n  pullSecretRef:\n    name: pull-secret\n  nmStateConfigLabelSelector:\n    matchLabels:\n      cluster0-nmstate-label-name: cluster0-nmstate-label-value\n".into()),
        ("/etc/assisted/manifests/nmstateconfig.yaml".into(), [W0, W1].iter().map(|(h, mac, ip)| format!(
            "apiVersion: agent-install.openshift.io/v1beta1\nkind: NMStateConfig\nmetadata:\n  name: {h}\n  namespace: cluster0\n  labels:\n    cluster0-nmstate-label-name: cluster0-nmstate-label-value\nspec:\n  interfaces:\n  - name: eth0\n    macAddress: {mac}\n  config:\n    interfaces:\n    - name: eth0\n      type: ethernet\n      state: up\n      ipv4:\n        enabled: true\n        address:\n        - ip: {ip}\n          prefix-length: 24\n")).collect::<Vec<_>>().join("---\n")),
        ("/etc/containers/registries.conf".into(), "unqualified-search-registries = []\n".into()),
        ("/root/.docker/config.json".into(), pull.into()),
        ("/usr/local/share/assisted-service/assisted-service.env".into(), format!(
            "AUTH_TYPE=agent-installer-local\nINFRA_ENV_ID={INFRA_ENV_ID}\nEC_PUBLIC_KEY_PEM={}\nUSER_AUTH_TOKEN={}\nWATCHER_AUTH_TOKEN={}\nDB_HOST=127.0.0.1\nDB_PORT=5432\nDB_USER=admin\nDB_PASS=admin\nDB_NAME=installer\nHW_VALIDATOR_REQUIREMENTS=[{{\"version\":\"default\",\"worker\":{{\"cpu_cores\":2,\"ram_mib\":8192,\"disk_size_gb\":100}}}}]\n",
            b64(&tok.pub_pem), tok.user, tok.watcher)),
        ("/usr/local/share/assisted-service/images.env".into(),
            "IMAGE_SERVICE_BASE_URL=http://127.0.0.1:8888/\nOS_IMAGES=[{\"openshift_version\":\"4.18\",\"cpu_architecture\":\"x86_64\",\"url\":\"https://example.com/rhcos.iso\",\"version\":\"418.94.202501221327-0\"}]\n".into()),
        ("/usr/local/share/assisted-service/agent-images.env".into(),
            "RELEASE_IMAGE=quay.io/openshift-release-dev/ocp-release:4.18.12-x86_64\nSERVICE_IMAGE=quay.io/openshift-release-dev/ocp-v4.0-art-dev@sha256:1111111111111111111111111111111111111111111111111111111111111111\nAGENT_DOCKER_IMAGE=quay.io/openshift-release-dev/ocp-v4.0-art-dev@sha256:2222222222222222222222222222222222222222222222222222222222222222\nINSTALLER_IMAGE=quay.io/openshift-release-dev/ocp-v4.0-art-dev@sha256:3333333333333333333333333333333333333333333333333333333333333333\nAGENT_INSTALLER_UTILS_IMAGE=quay.io/openshift-release-dev/ocp-v4.0-art-dev@sha256:4444444444444444444444444444444444444444444444444444444444444444\n".into()),
    ];
    for (h, mac, _) in [W0, W1] {
        f.push((
            format!("/etc/assisted/hostconfig/{h}/mac_addresses"),
            format!("{mac}\n"),
        ));
        f.push((
            format!("/etc/assisted/hostconfig/{h}/root-device-hints.yaml"),
            "deviceName: /dev/vda\n".into(),
        ));
        f.push((format!("/etc/assisted/hostconfig/{h}/role"), "worker\n".into()));
        f.push((format!("/etc/assisted/hostnames/{mac}"), format!("{h}\n")));
        f.push((
            format!("/etc/assisted/network/{h}/eth0.nmconnection"),
            "[connection]\nid=eth0\ntype=ethernet\n".into(),
        ));
    }
    f
}

fn units() -> Vec<(String, String)> {
    let u = |name: &str, after: &str, extra: &str| {
        (name.to_string(), format!("[Unit]\nDescription={name}\nAfter={after}\n{extra}\n[Service]\nExecStart=/usr/local/bin/{name}.sh\n\n[Install]\nWantedBy=multi-user.target\n"))
    };
    vec![
        (
            "assisted-service-db.service".to_string(),
            "[Unit]\nDescription=db\n[Service]\nExecStart=/usr/bin/podman run --user=postgres --env-file /usr/local/share/assisted-service/assisted-db.env ${SERVICE_IMAGE} /bin/bash start_db.sh\n\n[Install]\nWantedBy=multi-user.target\n".to_string(),
        ),
        (
            "assisted-service.service".to_string(),
            "[Unit]\nDescription=service\nAfter=network-online.target\n[Service]\nExecStart=/usr/bin/podman run --net host --env-file /etc/assisted/rendezvous-host.env --env-file /usr/local/share/assisted-service/assisted-service.env --env-file /usr/local/share/assisted-service/images.env --env-file /usr/local/share/assisted-service/agent-images.env ${SERVICE_IMAGE}\n\n[Install]\nWantedBy=multi-user.target\n".to_string(),
        ),
        (
            "agent-import-cluster.service".to_string(),
            "[Unit]\nDescription=import\nAfter=assisted-service.service\n[Service]\nExecStart=/usr/bin/podman run --net host -v /etc/assisted/clusterconfig:/clusterconfig -v /etc/assisted/manifests:/manifests ${SERVICE_IMAGE} /usr/local/bin/agent-installer-client importCluster\n\n[Install]\nWantedBy=multi-user.target\n".to_string(),
        ),
        (
            "agent-register-infraenv.service".to_string(),
            "[Unit]\nDescription=infraenv\nAfter=agent-import-cluster.service\n[Service]\nExecStart=/usr/bin/podman run --net host -v /etc/assisted/manifests:/manifests ${SERVICE_IMAGE} /usr/local/bin/agent-installer-client registerInfraEnv\n\n[Install]\nWantedBy=multi-user.target\n".to_string(),
        ),
        u("agent.service", "agent-register-infraenv.service", ""),
        u("apply-host-config.service", "agent-register-infraenv.service", ""),
        u("set-hostname.service", "local-fs.target", ""),
        u(
            "agent-add-node.service",
            "agent.service apply-host-config.service",
            "",
        ),
        u("agent-auth-token-status.service", "local-fs.target", ""),
        u(
            "pre-network-manager-config.service",
            "local-fs.target",
            "Before=NetworkManager.service",
        ),
    ]
}

fn ignition(files: &[(String, String)], units: &[(String, String)]) -> Vec<u8> {
    json!({
        "ignition": {"version": "3.2.0"},
        "passwd": {"users": [{"name": "core", "sshAuthorizedKeys": ["ssh-ed25519 AAAAC3Nza test"]}]},
        "storage": {"files": files.iter().map(|(p, c)| json!({"path": p, "mode": 0o600, "overwrite": true, "contents": {"source": data_url(c)}})).collect::<Vec<_>>()},
        "systemd": {"units": units.iter().map(|(n, c)| json!({"name": n, "enabled": true, "contents": c})).collect::<Vec<_>>()},
    })
    .to_string()
    .into_bytes()
}

/// Writes the simulator's base ISO to `dir/name.iso` and embeds `config` (gzip newc cpio, or xz
/// by the real xz with CRC32) into its embed area, zero-filling the rest, as coreos-installer does.
fn node_iso(dir: &Path, name: &str, config: Option<&[u8]>, xz: bool) -> PathBuf {
    let path = dir.join(format!("{name}.iso"));
    agent_day2_sim::baseiso::build_base_iso(&path, "x86_64").unwrap();
    let Some(config) = config else { return path };
    let archive = cpio::write(&[("config.ign", config)]);
    let compressed = if xz {
        let mut child = Command::new("xz")
            .args(["--check=crc32", "-c"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("xz");
        child.stdin.take().unwrap().write_all(&archive).unwrap();
        child.wait_with_output().unwrap().stdout
    } else {
        let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
        e.write_all(&archive).unwrap();
        e.finish().unwrap()
    };
    let mut f = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(&path)
        .unwrap();
    let area = embed::find_area(&mut f).unwrap();
    assert!(
        compressed.len() as u64 <= area.len,
        "config does not fit the embed area"
    );
    let mut buf = compressed;
    buf.resize(area.len as usize, 0);
    f.seek(SeekFrom::Start(area.offset)).unwrap();
    f.write_all(&buf).unwrap();
    path
}

fn boot_cmd(dir: &Path, iso: &Path, extra: &[&str]) -> Command {
    let mut c = Command::new(bin("agent-day2-sim").unwrap());
    c.arg("boot")
        .arg("--dir")
        .arg(dir)
        .arg("--iso")
        .arg(iso)
        .args(extra)
        .stdin(Stdio::null());
    c
}

fn run(mut c: Command) -> Output {
    c.output().expect("run agent-day2-sim boot")
}

fn text(o: &Output) -> String {
    format!(
        "status {:?}\nstdout:\n{}\nstderr:\n{}",
        o.status.code(),
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// A --dir for tests that never reach the kube part (boot reads DIR/kubeconfig up front).
fn fake_dir(tmp: &Path) -> PathBuf {
    let d = tmp.join("sim");
    std::fs::create_dir_all(&d).unwrap();
    std::fs::write(
        d.join("kubeconfig"),
        "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: https://192.168.111.5:6443\ncontexts:\n- name: bootstrapper\n  context:\n    cluster: c\n    user: b\ncurrent-context: bootstrapper\nusers:\n- name: b\n  user:\n    token: x\n",
    )
    .unwrap();
    d
}

fn node_arg((_, mac, ip): (&str, &str, &str)) -> String {
    format!("{mac}={ip}")
}

/// The simulator no longer judges the image (the real assisted-service does, in run-node): a
/// token the embedded key did not sign is not refused at boot, only a MAC no host config lists.
#[test]
fn refuses_an_unknown_mac_only() {
    let tmp = tempfile::tempdir().unwrap();
    let tok = tokens();
    let other = tokens();
    let mut files = contract_files(&tok);
    for f in files.iter_mut() {
        if f.0.ends_with("assisted-service.env") {
            f.1 = f.1.replace(&tok.watcher, &other.watcher);
        }
    }
    let iso = node_iso(tmp.path(), "badtok", Some(&ignition(&files, &units())), true);
    let o = run(boot_cmd(
        &fake_dir(tmp.path()),
        &iso,
        &["--node", "52:54:00:aa:00:99=192.168.111.99"],
    ));
    let t = text(&o);
    assert_eq!(o.status.code(), Some(3), "{t}");
    assert!(!t.contains("WATCHER_AUTH_TOKEN"), "{t}");
    assert!(
        t.contains("1 problem") && t.contains("no host for MAC 52:54:00:aa:00:99"),
        "{t}"
    );
}

#[test]
fn refuses_a_pristine_iso_with_an_all_zero_embed_area() {
    let tmp = tempfile::tempdir().unwrap();
    let iso = node_iso(tmp.path(), "pristine", None, false);
    let o = run(boot_cmd(&fake_dir(tmp.path()), &iso, &["--node", &node_arg(W0)]));
    let t = text(&o);
    assert_eq!(o.status.code(), Some(3), "{t}");
    assert!(t.contains("no Ignition embedded"), "{t}");
}

/// GET `path` on `ip:8090` with optional (header, value); returns (status, body).
fn http_get(ip: &str, path: &str, auth: Option<(&str, &str)>) -> (u16, Vec<u8>) {
    let mut s = TcpStream::connect((ip, 8090)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let hdr = auth.map(|(h, v)| format!("{h}: {v}\r\n")).unwrap_or_default();
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: {ip}:8090\r\n{hdr}Connection: close\r\n\r\n"
    )
    .unwrap();
    let mut raw = Vec::new();
    s.read_to_end(&mut raw).unwrap();
    let split = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .expect("HTTP response");
    let head = String::from_utf8_lossy(&raw[..split]).to_string();
    let status: u16 = head.split_whitespace().nth(1).unwrap().parse().unwrap();
    let mut body = raw[split + 4..].to_vec();
    if head.to_ascii_lowercase().contains("transfer-encoding: chunked") {
        // De-chunk.
        let mut out = Vec::new();
        let mut rest = &body[..];
        loop {
            let nl = rest.windows(2).position(|w| w == b"\r\n").unwrap();
            let n = usize::from_str_radix(std::str::from_utf8(&rest[..nl]).unwrap().trim(), 16).unwrap();
            if n == 0 {
                break;
            }
            out.extend_from_slice(&rest[nl + 2..nl + 2 + n]);
            rest = &rest[nl + 2 + n + 2..];
        }
        body = out;
    }
    (status, body)
}

fn wait_until<T>(what: &str, secs: u64, mut f: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + Duration::from_secs(secs);
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn rest_api_needs_the_tokens_and_fail_install_reaches_the_error_stage() {
    agent_day2_sim::harness::require_netns();
    let tmp = tempfile::tempdir().unwrap();
    let tok = tokens();
    let iso = node_iso(
        tmp.path(),
        "node",
        Some(&ignition(&contract_files(&tok), &units())),
        false,
    );
    // worker-0 fails to install; worker-1 stalls in discovering, so the process keeps serving
    // until --timeout (then exit 5, which wins over 6).
    let child = boot_cmd(
        &fake_dir(tmp.path()),
        &iso,
        &[
            "--node",
            &node_arg(W0),
            "--node",
            &node_arg(W1),
            "--fail-install",
            "worker-0",
            "--stall",
            "worker-1",
            "--stage-delay-ms",
            "50",
            "--timeout",
            "8s",
            "--json",
        ],
    )
    .stdout(Stdio::piped())
    .stderr(Stdio::piped())
    .spawn()
    .unwrap();
    let base = "/api/assisted-install/v2";
    let ip0 = W0.2;
    let ip1 = W1.2;
    // Up: the infra-envs list answers with the watcher token.
    wait_until("worker-1 API", 20, || {
        TcpStream::connect((ip1, 8090)).ok().map(|_| ())
    });
    // 401 without a token, with a wrong token; 403 with another persona's token.
    for path in ["/clusters", "/infra-envs", "/events"] {
        let (st, body) = http_get(ip1, &format!("{base}{path}"), None);
        assert_eq!(st, 401, "{path}: {}", String::from_utf8_lossy(&body));
        let v: Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(v["code"], 401);
        assert!(v["message"].is_string());
    }
    let (st, _) = http_get(
        ip1,
        &format!("{base}/clusters"),
        Some(("Watcher-Authorization", "Bearer not.a.token")),
    );
    assert_eq!(st, 401);
    let (st, _) = http_get(
        ip1,
        &format!("{base}/clusters"),
        Some(("Watcher-Authorization", &tok.agent)),
    );
    assert_eq!(st, 403, "an agent token is not a watcher token");
    // As the real service judges (pkg/auth/agent_local_authenticator.go,
    // agent_local_authz_handler.go): any token the image's key signed passes, not only the
    // image's own strings; `sub` without `auth_scheme` is a 500; `Bearer ` is not stripped; a
    // future iat (the node's clock behind the signer's) and another key are 401s.
    let now = time::OffsetDateTime::now_utc().unix_timestamp();
    let mint = |c: Value| jwt::sign(&c, &tok.key_der).unwrap();
    let watcher_get = |t: &str| {
        let (st, body) = http_get(
            ip1,
            &format!("{base}/clusters"),
            Some(("Watcher-Authorization", t)),
        );
        (st, serde_json::from_slice::<Value>(&body).unwrap_or(Value::Null))
    };
    assert_eq!(watcher_get(&mint(json!({"auth_scheme": "watcherAuth"}))).0, 200);
    let (st, v) = watcher_get(&mint(json!({"sub": "watcherAuth", "exp": now + 3600})));
    assert_eq!(
        (st, v["reason"].as_str()),
        (500, Some("malformed auth_scheme claim")),
        "{v}"
    );
    let (st, v) = watcher_get(&format!("Bearer {}", tok.watcher));
    assert_eq!(st, 401);
    assert_eq!(
        v["message"],
        "Failed to parse token: tokenstring should not contain 'bearer '\n"
    );
    let (st, v) = watcher_get(&mint(json!({"auth_scheme": "watcherAuth", "iat": now + 600})));
    assert_eq!(
        (st, v["message"].as_str()),
        (401, Some("Failed to parse token: Token used before issued\n"))
    );
    let (st, v) = watcher_get(&mint(json!({"auth_scheme": "watcherAuth", "exp": now - 1})));
    assert_eq!(
        (st, v["message"].as_str()),
        (401, Some("Failed to parse token: Token is expired\n"))
    );
    let other = rcgen::KeyPair::generate().unwrap();
    let foreign = jwt::sign(&json!({"auth_scheme": "watcherAuth"}), &other.serialize_der()).unwrap();
    let (st, v) = watcher_get(&foreign);
    assert_eq!(
        (st, v["message"].as_str()),
        (
            401,
            Some("Failed to parse token: crypto/ecdsa: verification error\n")
        )
    );
    let (st, v) = watcher_get(&tok.user);
    assert_eq!(
        (st, v["message"].as_str()),
        (403, Some("authClaim userAuth is unauthorized to access"))
    );
    // With the right tokens: the swagger models.
    let (st, body) = http_get(
        ip1,
        &format!("{base}/clusters"),
        Some(("Watcher-Authorization", &tok.watcher)),
    );
    assert_eq!(st, 200);
    let clusters: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(clusters[0]["kind"], "AddHostsCluster");
    assert_eq!(clusters[0]["openshift_cluster_id"], CLUSTER_ID);
    let cid = clusters[0]["id"].as_str().unwrap().to_string();
    let (st, body) = http_get(
        ip1,
        &format!("{base}/clusters/{cid}"),
        Some(("Authorization", &tok.user)),
    );
    assert_eq!(st, 200);
    assert_eq!(
        serde_json::from_slice::<Value>(&body).unwrap()["hosts"][0]["requested_hostname"],
        "worker-1"
    );
    let (st, body) = http_get(
        ip1,
        &format!("{base}/infra-envs/{INFRA_ENV_ID}/hosts"),
        Some(("Authorization", &tok.user)),
    );
    assert_eq!(st, 200);
    let hosts: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(
        hosts[0]["status"], "discovering",
        "--stall keeps worker-1 discovering"
    );
    let hid = hosts[0]["id"].as_str().unwrap().to_string();
    let (st, _) = http_get(
        ip1,
        &format!("{base}/infra-envs/{INFRA_ENV_ID}/hosts/{hid}"),
        None,
    );
    assert_eq!(st, 401);
    let (st, body) = http_get(
        ip1,
        &format!("{base}/events?cluster_id={cid}"),
        Some(("Watcher-Authorization", &tok.watcher)),
    );
    assert_eq!(st, 200);
    let events: Value = serde_json::from_slice(&body).unwrap();
    assert!(
        events
            .as_array()
            .unwrap()
            .iter()
            .any(|e| e["message"].as_str().unwrap().contains("Successfully registered")),
        "{events}"
    );
    let (st, body) = http_get(
        ip1,
        &format!("{base}/clusters/{cid}/logs"),
        Some(("Authorization", &tok.user)),
    );
    assert_eq!(st, 200);
    let mut names = vec![];
    let mut ar = tar::Archive::new(flate2::read::GzDecoder::new(&body[..]));
    for e in ar.entries().unwrap() {
        names.push(e.unwrap().path().unwrap().display().to_string());
    }
    assert!(names.contains(&"worker-1/events.log".to_string()), "{names:?}");
    let (st, _) = http_get(ip1, &format!("{base}/clusters/{cid}/logs"), None);
    assert_eq!(st, 401);

    // worker-0 reaches error with the failed stage and a reason, and keeps serving.
    let host0 = wait_until("worker-0 error", 20, || {
        let (st, body) = http_get(
            ip0,
            &format!("{base}/infra-envs/{INFRA_ENV_ID}/hosts"),
            Some(("X-Secret-Key", &tok.agent)),
        );
        let v: Value = serde_json::from_slice(&body).ok()?;
        (st == 200 && v[0]["status"] == "error").then(|| v[0].clone())
    });
    assert_eq!(host0["progress"]["current_stage"], "Failed");
    assert!(
        host0["status_info"]
            .as_str()
            .unwrap()
            .contains("Writing image to disk"),
        "{host0}"
    );

    let out = child.wait_with_output().unwrap();
    let t = text(&out);
    assert_eq!(out.status.code(), Some(5), "{t}");
    let lines: Vec<Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert!(
        lines.iter().any(|l| l["node"] == "worker-0"
            && l["event"] == "failed"
            && l["message"].as_str().unwrap().contains("installation failed")),
        "{t}"
    );
    assert!(
        lines
            .iter()
            .any(|l| l["node"] == "worker-1" && l["event"] == "stalled"),
        "{t}"
    );
    assert!(t.contains("worker-1: timed out"), "{t}");
}

#[test]
fn fail_install_alone_exits_6() {
    agent_day2_sim::harness::require_netns();
    let tmp = tempfile::tempdir().unwrap();
    let iso = node_iso(
        tmp.path(),
        "node",
        Some(&ignition(&contract_files(&tokens()), &units())),
        true,
    );
    let o = run(boot_cmd(
        &fake_dir(tmp.path()),
        &iso,
        &[
            "--node",
            &node_arg(W0),
            "--fail-install",
            "worker-0",
            "--stage-delay-ms",
            "20",
        ],
    ));
    let t = text(&o);
    assert_eq!(o.status.code(), Some(6), "{t}");
    assert!(
        t.contains("worker-0 192.168.111.30: host error (Failed, 50%)"),
        "{t}"
    );
    assert!(t.contains("FAILED: installation failed"), "{t}");
}

struct Boot(Child);
impl Drop for Boot {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn two_nodes_join_with_csrs_approved_by_kubectl() {
    agent_day2_sim::harness::require_netns();
    let cluster = TestCluster::start("").unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let tok = tokens();
    let iso = node_iso(
        tmp.path(),
        "node",
        Some(&ignition(&contract_files(&tok), &units())),
        false,
    );
    let log = tmp.path().join("boot.log");
    let child = boot_cmd(
        &cluster.dir,
        &iso,
        &[
            "--node",
            &node_arg(W0),
            "--node",
            &node_arg(W1),
            "--stage-delay-ms",
            "20",
            "--timeout",
            "90s",
        ],
    )
    .stdout(std::fs::File::create(&log).unwrap())
    .stderr(Stdio::piped())
    .spawn()
    .unwrap();
    let mut boot = Boot(child);
    let mut approved = std::collections::BTreeSet::new();
    let deadline = Instant::now() + Duration::from_secs(90);
    let status = loop {
        if let Some(st) = boot.0.try_wait().unwrap() {
            break st;
        }
        assert!(
            Instant::now() < deadline,
            "boot did not finish:\n{}",
            std::fs::read_to_string(&log).unwrap_or_default()
        );
        let o = cluster.kubectl(&["get", "csr", "-o", "json"]);
        assert!(o.status.success(), "{}", text(&o));
        let list: Value = serde_json::from_slice(&o.stdout).unwrap();
        for csr in list["items"].as_array().unwrap() {
            let name = csr["metadata"]["name"].as_str().unwrap().to_string();
            let pending = csr["status"]["conditions"]
                .as_array()
                .is_none_or(|c| c.is_empty());
            if pending && !approved.contains(&name) {
                let o = cluster.kubectl(&["certificate", "approve", &name]);
                assert!(o.status.success(), "{}", text(&o));
                approved.insert(name);
            }
        }
        std::thread::sleep(Duration::from_millis(200));
    };
    let mut err = String::new();
    boot.0.stderr.take().unwrap().read_to_string(&mut err).unwrap();
    let out = std::fs::read_to_string(&log).unwrap();
    assert_eq!(
        status.code(),
        Some(0),
        "stdout:\n{out}\nstderr:\n{err}\nsim log:\n{}",
        cluster.log()
    );
    for (h, _, ip) in [W0, W1] {
        for ev in [
            "client certificate issued",
            "serving certificate issued",
            "rebooting into the installed system",
        ] {
            assert!(out.contains(&format!("{h} {ip}: {ev}")), "{h} {ev}:\n{out}");
        }
    }
    assert_eq!(approved.len(), 4, "two client and two serving CSRs: {approved:?}");

    // Both Nodes Ready with their InternalIP.
    for (h, _, ip) in [W0, W1] {
        let o = cluster.kubectl(&["get", "node", h, "-o", "json"]);
        assert!(o.status.success(), "{}", text(&o));
        let n: Value = serde_json::from_slice(&o.stdout).unwrap();
        let ready = n["status"]["conditions"]
            .as_array()
            .unwrap()
            .iter()
            .any(|c| c["type"] == "Ready" && c["status"] == "True");
        assert!(ready, "{n}");
        assert!(
            n["status"]["addresses"]
                .as_array()
                .unwrap()
                .iter()
                .any(|a| a["type"] == "InternalIP" && a["address"] == ip),
            "{n}"
        );
        assert_eq!(n["metadata"]["labels"]["kubernetes.io/hostname"], h);
    }

    // Every certificate was issued by the simulator's CA and names its node.
    let ca_pem = std::fs::read(cluster.dir.join("ca.crt")).unwrap();
    let (_, ca) = x509_parser::pem::parse_x509_pem(&ca_pem).unwrap();
    let ca = ca.parse_x509().unwrap();
    let o = cluster.kubectl(&["get", "csr", "-o", "json"]);
    let list: Value = serde_json::from_slice(&o.stdout).unwrap();
    let mut seen = std::collections::BTreeMap::new();
    for csr in list["items"].as_array().unwrap() {
        let signer = csr["spec"]["signerName"].as_str().unwrap().to_string();
        let cert_b64 = csr["status"]["certificate"].as_str().expect("certificate issued");
        let pem = base64::engine::general_purpose::STANDARD
            .decode(cert_b64)
            .unwrap();
        let (_, p) = x509_parser::pem::parse_x509_pem(&pem).unwrap();
        let cert = p.parse_x509().unwrap();
        cert.verify_signature(Some(ca.public_key()))
            .expect("signed by the simulator's CA");
        assert_eq!(cert.issuer(), ca.subject());
        let cn = cert
            .subject()
            .iter_common_name()
            .next()
            .unwrap()
            .as_str()
            .unwrap()
            .to_string();
        *seen.entry((cn, signer)).or_insert(0) += 1;
    }
    for (h, _, _) in [W0, W1] {
        for signer in [
            "kubernetes.io/kube-apiserver-client-kubelet",
            "kubernetes.io/kubelet-serving",
        ] {
            assert_eq!(
                seen.get(&(format!("system:node:{h}"), signer.to_string())),
                Some(&1),
                "{seen:?}"
            );
        }
    }
    // After the reboot the live system's API is gone.
    assert!(
        TcpStream::connect((W0.2, 8090)).is_err(),
        "8090 still answers after the reboot"
    );
}

#[test]
fn failing_validation_keeps_the_host_insufficient_until_timeout() {
    agent_day2_sim::harness::require_netns();
    let tmp = tempfile::tempdir().unwrap();
    let tok = tokens();
    let iso = node_iso(
        tmp.path(),
        "node",
        Some(&ignition(&contract_files(&tok), &units())),
        false,
    );
    let child = boot_cmd(
        &fake_dir(tmp.path()),
        &iso,
        &[
            "--node",
            &node_arg(W0),
            "--fail-validation",
            "worker-0:ntp-synced",
            "--stage-delay-ms",
            "20",
            "--timeout",
            "4s",
        ],
    )
    .stdout(Stdio::piped())
    .stderr(Stdio::piped())
    .spawn()
    .unwrap();
    let base = "/api/assisted-install/v2";
    wait_until("worker-0 API", 20, || {
        TcpStream::connect((W0.2, 8090)).ok().map(|_| ())
    });
    let host = wait_until("worker-0 insufficient", 20, || {
        let (st, body) = http_get(
            W0.2,
            &format!("{base}/infra-envs/{INFRA_ENV_ID}/hosts"),
            Some(("Authorization", &tok.user)),
        );
        let v: Value = serde_json::from_slice(&body).ok()?;
        (st == 200 && v[0]["status"] == "insufficient").then(|| v[0].clone())
    });
    let vi: Value = serde_json::from_str(host["validations_info"].as_str().unwrap()).unwrap();
    let ntp = vi["network"]
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v["id"] == "ntp-synced")
        .unwrap()
        .clone();
    assert_eq!(ntp["status"], "failure", "{vi}");
    assert!(host["status_info"].as_str().unwrap().contains("NTP"), "{host}");
    let out = child.wait_with_output().unwrap();
    let t = text(&out);
    assert_eq!(out.status.code(), Some(5), "{t}");
    assert!(
        t.contains("worker-0 192.168.111.30: host insufficient: validation ntp-synced failing"),
        "{t}"
    );
}

// ---------------------------------------------------------------------------------------------
// PXE and appliance sources (H14).

/// `xz --check=crc32` of `data` by the real xz, as coreos-installer and the plugin write it.
fn xz(data: &[u8]) -> Vec<u8> {
    let mut child = Command::new("xz")
        .args(["--check=crc32", "-c"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("xz");
    child.stdin.take().unwrap().write_all(data).unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success());
    out.stdout
}

const BASE_URL: &str = "http://192.168.111.1:8000/pxe";

/// The PXE files `add-nodes --pxe` writes, made here from the simulator's base ISO: the
/// ISO's kernel and rootfs, its live initrd + zero padding to 4 bytes + each of `appended`
/// (an xz newc cpio holding `config.ign`), and with `kargs` an iPXE script
/// `node.x86_64.ipxe` whose kernel line ends in them. Returns the directory.
fn pxe_files(tmp: &Path, appended: &[&[u8]], kargs: Option<&str>) -> PathBuf {
    let dir = tmp.join("pxe");
    std::fs::create_dir_all(&dir).unwrap();
    let iso = tmp.join("base.iso");
    agent_day2_sim::baseiso::build_base_iso(&iso, "x86_64").unwrap();
    let mut f = std::fs::File::open(&iso).unwrap();
    let mut get = |p: &str| {
        let e = agent_day2_iso9660::get(&mut f, p).unwrap();
        agent_day2_iso9660::read_entry(&mut f, &e).unwrap()
    };
    let (kernel, mut initrd, rootfs) = (
        get("images/pxeboot/vmlinuz"),
        get("images/pxeboot/initrd.img"),
        get("images/pxeboot/rootfs.img"),
    );
    assert_eq!(&initrd[..2], &[0x1f, 0x8b], "the live initrd is gzip");
    for config in appended {
        initrd.resize(initrd.len().div_ceil(4) * 4, 0);
        initrd.extend_from_slice(&xz(&cpio::write(&[("config.ign", config)])));
    }
    std::fs::write(dir.join("node.x86_64-vmlinuz"), kernel).unwrap();
    std::fs::write(dir.join("node.x86_64-initrd.img"), initrd).unwrap();
    std::fs::write(dir.join("node.x86_64-rootfs.img"), rootfs).unwrap();
    if let Some(kargs) = kargs {
        std::fs::write(
            dir.join("node.x86_64.ipxe"),
            format!("#!ipxe\ninitrd --name initrd {BASE_URL}/node.x86_64-initrd.img\nkernel {BASE_URL}/node.x86_64-vmlinuz initrd=initrd {kargs}\nboot\n"),
        )
        .unwrap();
    }
    dir
}

/// The kernel arguments `add-nodes --pxe` writes with a base URL (kargs.json default without
/// coreos.liveiso=, plus the rootfs URL).
fn pxe_kargs() -> String {
    let base: Vec<String> = agent_day2_sim::baseiso::default_kargs()
        .split_whitespace()
        .filter(|k| !k.starts_with("coreos.liveiso="))
        .map(String::from)
        .collect();
    format!(
        "{} coreos.live.rootfs_url={BASE_URL}/node.x86_64-rootfs.img",
        base.join(" ")
    )
}

fn sim_cmd(dir: &Path, source: &[&str], extra: &[&str]) -> Command {
    let mut c = Command::new(bin("agent-day2-sim").unwrap());
    c.arg("boot")
        .arg("--dir")
        .arg(dir)
        .args(source)
        .args(extra)
        .stdin(Stdio::null());
    c
}

/// Runs `boot` and approves every pending CSR with the real `kubectl certificate approve` until
/// it ends. Returns (exit code, stdout + stderr, CSRs approved).
fn boot_approving(cluster: &TestCluster, mut cmd: Command, tmp: &Path) -> (Option<i32>, String, usize) {
    let log = tmp.join("boot-approving.log");
    cmd.args(["--stage-delay-ms", "20", "--timeout", "90s"])
        .stdout(std::fs::File::create(&log).unwrap())
        .stderr(Stdio::piped());
    let mut boot = Boot(cmd.spawn().unwrap());
    let mut approved = std::collections::BTreeSet::new();
    let deadline = Instant::now() + Duration::from_secs(100);
    let status = loop {
        if let Some(st) = boot.0.try_wait().unwrap() {
            break st;
        }
        assert!(
            Instant::now() < deadline,
            "boot did not finish:\n{}",
            std::fs::read_to_string(&log).unwrap_or_default()
        );
        let o = cluster.kubectl(&["get", "csr", "-o", "json"]);
        assert!(o.status.success(), "{}", text(&o));
        let list: Value = serde_json::from_slice(&o.stdout).unwrap();
        for csr in list["items"].as_array().unwrap() {
            let name = csr["metadata"]["name"].as_str().unwrap().to_string();
            let pending = csr["status"]["conditions"]
                .as_array()
                .is_none_or(|c| c.is_empty());
            if pending && !approved.contains(&name) {
                let o = cluster.kubectl(&["certificate", "approve", &name]);
                assert!(o.status.success(), "{}", text(&o));
                approved.insert(name);
            }
        }
        std::thread::sleep(Duration::from_millis(200));
    };
    let mut err = String::new();
    boot.0.stderr.take().unwrap().read_to_string(&mut err).unwrap();
    (
        status.code(),
        format!(
            "stdout:\n{}\nstderr:\n{err}",
            std::fs::read_to_string(&log).unwrap()
        ),
        approved.len(),
    )
}

#[track_caller]
fn assert_node_ready(cluster: &TestCluster, (h, _, ip): (&str, &str, &str)) {
    let o = cluster.kubectl(&["get", "node", h, "-o", "json"]);
    assert!(o.status.success(), "{}", text(&o));
    let n: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert!(
        n["status"]["conditions"]
            .as_array()
            .unwrap()
            .iter()
            .any(|c| c["type"] == "Ready" && c["status"] == "True"),
        "{n}"
    );
    assert!(
        n["status"]["addresses"]
            .as_array()
            .unwrap()
            .iter()
            .any(|a| a["type"] == "InternalIP" && a["address"] == ip),
        "{n}"
    );
}

#[test]
fn a_node_joins_via_pxe_with_the_ipxe_script() {
    agent_day2_sim::harness::require_netns();
    let cluster = TestCluster::start("").unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let cfg = ignition(&contract_files(&tokens()), &units());
    let dir = pxe_files(tmp.path(), &[&cfg], Some(&pxe_kargs()));
    let (code, out, approved) = boot_approving(
        &cluster,
        sim_cmd(
            &cluster.dir,
            &["--pxe-dir", dir.to_str().unwrap()],
            &["--node", &node_arg(W0)],
        ),
        tmp.path(),
    );
    assert_eq!(code, Some(0), "{out}\nsim log:\n{}", cluster.log());
    assert!(
        out.contains("from PXE script") && out.contains("node.x86_64.ipxe"),
        "{out}"
    );
    for ev in [
        "booted (MAC 52:54:00:aa:00:30)",
        "rebooting into the installed system",
        "client certificate issued",
        "serving certificate issued",
    ] {
        assert!(
            out.contains(&format!("worker-0 192.168.111.30: {ev}")),
            "{ev}:\n{out}"
        );
    }
    assert_eq!(approved, 2, "client and serving CSR");
    assert_node_ready(&cluster, W0);
    // The node as `kubectl get nodes -o wide` shows it: its IP and what its kubelet reported.
    let o = cluster.kubectl(&["get", "node", "worker-0", "-o", "wide", "--no-headers"]);
    let row = String::from_utf8_lossy(&o.stdout).to_string();
    for want in [
        "worker-0",
        "Ready",
        "worker",
        "192.168.111.30",
        "5.14.0-427.simulated.el9_4.x86_64",
        "cri-o://",
    ] {
        assert!(
            row.split_whitespace().any(|w| w.starts_with(want)),
            "{want} not in {row:?}"
        );
    }
}

#[test]
fn pxe_initrd_later_archive_wins_and_plain_live_initrd_has_no_ignition() {
    let tmp = tempfile::tempdir().unwrap();
    let tok = tokens();
    let good = ignition(&contract_files(&tok), &units());
    // A second appended archive replaces config.ign, as the kernel overwrites: its host
    // config lists another MAC, and that is what the machine sees (it finds no host).
    let mut files = contract_files(&tok);
    for f in files.iter_mut().filter(|f| f.0.ends_with("/mac_addresses")) {
        f.1 = "52:54:00:aa:00:99\n".into();
    }
    let later = ignition(&files, &units());
    let dir = pxe_files(&tmp.path().join("a"), &[&good, &later], None);
    let args = |d: &Path| {
        vec![
            "--kernel".to_string(),
            d.join("node.x86_64-vmlinuz").display().to_string(),
            "--initrd".to_string(),
            d.join("node.x86_64-initrd.img").display().to_string(),
            "--rootfs".to_string(),
            d.join("node.x86_64-rootfs.img").display().to_string(),
            "--node".to_string(),
            node_arg(W0),
        ]
    };
    let a = args(&dir);
    let o = run(sim_cmd(
        &fake_dir(tmp.path()),
        &a.iter().map(String::as_str).collect::<Vec<_>>(),
        &[],
    ));
    let t = text(&o);
    assert_eq!(o.status.code(), Some(3), "{t}");
    assert!(t.contains("no host for MAC 52:54:00:aa:00:30"), "{t}");

    // The live initrd alone: no config.ign, the machine is refused and says what it found.
    let bare = pxe_files(&tmp.path().join("b"), &[], None);
    let b = args(&bare);
    let o = run(sim_cmd(
        &fake_dir(tmp.path()),
        &b.iter().map(String::as_str).collect::<Vec<_>>(),
        &[],
    ));
    let t = text(&o);
    assert_eq!(o.status.code(), Some(3), "{t}");
    assert!(
        t.contains("no Ignition in the initrd") && t.contains("etc/sim-initrd-release"),
        "{t}"
    );
    // The same through --pxe-dir (no .ipxe there: the node.<arch>-* files are used).
    let o = run(sim_cmd(
        &fake_dir(tmp.path()),
        &["--pxe-dir", bare.to_str().unwrap()],
        &["--node", &node_arg(W0)],
    ));
    let t = text(&o);
    assert_eq!(o.status.code(), Some(3), "{t}");
    assert!(
        t.contains("no Ignition in the initrd") && t.contains("node.x86_64-initrd.img"),
        "{t}"
    );
    // A directory without PXE files, and one whose rootfs is gone.
    let o = run(sim_cmd(
        &fake_dir(tmp.path()),
        &["--pxe-dir", tmp.path().to_str().unwrap()],
        &["--node", &node_arg(W0)],
    ));
    assert_eq!(o.status.code(), Some(3), "{}", text(&o));
    assert!(
        text(&o).contains("holds no node.<arch>-initrd.img"),
        "{}",
        text(&o)
    );
    std::fs::remove_file(bare.join("node.x86_64-rootfs.img")).unwrap();
    let o = run(sim_cmd(
        &fake_dir(tmp.path()),
        &["--pxe-dir", bare.to_str().unwrap()],
        &["--node", &node_arg(W0)],
    ));
    assert_eq!(o.status.code(), Some(3), "{}", text(&o));
    assert!(
        text(&o).contains("node.x86_64-rootfs.img is missing"),
        "{}",
        text(&o)
    );
}

#[test]
fn pxe_script_problems_are_listed() {
    let tmp = tempfile::tempdir().unwrap();
    let cfg = ignition(&contract_files(&tokens()), &units());
    // The ISO's kargs unchanged (coreos.liveiso= kept), ignition.firstboot dropped, and the
    // rootfs URL naming a file that is not served.
    let kargs = agent_day2_sim::baseiso::default_kargs().replace("ignition.firstboot", "")
        + &format!(" coreos.live.rootfs_url={BASE_URL}/rootfs-missing.img");
    let dir = pxe_files(tmp.path(), &[&cfg], Some(&kargs));
    let o = run(sim_cmd(
        &fake_dir(tmp.path()),
        &["--ipxe", dir.join("node.x86_64.ipxe").to_str().unwrap()],
        &["--node", &node_arg(W0)],
    ));
    let t = text(&o);
    assert_eq!(o.status.code(), Some(3), "{t}");
    assert!(t.contains("names \"rootfs-missing.img\", which is not in"), "{t}");
    assert!(t.contains("lacks ignition.firstboot"), "{t}");
    assert!(t.contains("has coreos.liveiso="), "{t}");
    assert!(t.contains("3 problems"), "{t}");
    assert!(
        !t.contains("ignition.platform.id=metal (Ignition"),
        "the base kargs have it: {t}"
    );
}

/// A config image as `add-nodes --config-image` writes it: ISO9660 labelled `label` with
/// `config.gz` (gzip of a newc cpio of `files` at absolute paths), or without it.
fn config_image(
    tmp: &Path,
    name: &str,
    label: &str,
    files: &[(String, String)],
    with_archive: bool,
) -> PathBuf {
    use agent_day2_iso9660::{write_iso, IsoData, IsoInput};
    let members: Vec<(&str, &[u8])> = files.iter().map(|(p, c)| (p.as_str(), c.as_bytes())).collect();
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
    gz.write_all(&cpio::write(&members)).unwrap();
    let gz = gz.finish().unwrap();
    let entry = if with_archive { "config.gz" } else { "readme.txt" };
    let path = tmp.join(format!("{name}.iso"));
    let mut out = Vec::new();
    write_iso(
        &mut out,
        label,
        &[IsoInput {
            path: entry.into(),
            data: IsoData::Bytes(gz),
            mtime: std::time::SystemTime::now(),
        }],
    )
    .unwrap();
    std::fs::write(&path, out).unwrap();
    path
}

const RELEASE: &str = "quay.io/openshift-release-dev/ocp-release:4.18.12-x86_64";

#[test]
fn a_node_joins_via_the_appliance_config_image() {
    agent_day2_sim::harness::require_netns();
    let cluster = TestCluster::start("").unwrap();
    let tmp = tempfile::tempdir().unwrap();
    // No units and no SSH key in config.gz: the appliance disk has them. A unit file that would
    // replace the disk's is not extracted (it lacks the After= the contract needs, so the
    // contract check shows which one the machine uses).
    let mut files = contract_files(&tokens());
    files.push((
        "/etc/systemd/system/agent-add-node.service".into(),
        "[Unit]\nDescription=replaced\n".into(),
    ));
    let img = config_image(
        tmp.path(),
        "agentconfig.noarch",
        "agent_configimage",
        &files,
        true,
    );
    let cmd = sim_cmd(
        &cluster.dir,
        &[
            "--config-image",
            img.to_str().unwrap(),
            "--appliance-release",
            RELEASE,
        ],
        &["--node", &node_arg(W0)],
    );
    let (code, out, approved) = boot_approving(&cluster, cmd, tmp.path());
    assert_eq!(code, Some(0), "{out}\nsim log:\n{}", cluster.log());
    assert!(
        out.contains(
            "/etc/systemd/system/agent-add-node.service replaces the appliance disk image's file (the loader extracts with cpio -u)"
        ),
        "{out}"
    );
    assert!(
        out.contains("worker-0 192.168.111.30: serving certificate issued"),
        "{out}"
    );
    assert_eq!(approved, 2);
    assert_node_ready(&cluster, W0);
}

#[test]
fn appliance_refuses_another_release_a_missing_archive_and_another_label() {
    let tmp = tempfile::tempdir().unwrap();
    let sim = fake_dir(tmp.path());
    let files = contract_files(&tokens());
    let img = config_image(tmp.path(), "cfg", "agent_configimage", &files, true);
    let older = "quay.io/openshift-release-dev/ocp-release:4.17.9-x86_64";
    let o = run(sim_cmd(
        &sim,
        &[
            "--config-image",
            img.to_str().unwrap(),
            "--appliance-release",
            older,
        ],
        &["--node", &node_arg(W0)],
    ));
    let t = text(&o);
    assert_eq!(o.status.code(), Some(3), "{t}");
    assert!(
        t.contains(&format!(
            "releaseImage {RELEASE} differs from the release built into the appliance disk ({older})"
        )),
        "{t}"
    );
    assert!(
        t.contains("the cluster was upgraded since the appliance was built"),
        "{t}"
    );
    assert!(
        t.contains("1 problem"),
        "only the release is reported, as the loader stops there: {t}"
    );

    let none = config_image(tmp.path(), "noarchive", "agent_configimage", &files, false);
    let o = run(sim_cmd(
        &sim,
        &[
            "--config-image",
            none.to_str().unwrap(),
            "--appliance-release",
            RELEASE,
        ],
        &["--node", &node_arg(W0)],
    ));
    let t = text(&o);
    assert_eq!(o.status.code(), Some(3), "{t}");
    assert!(t.contains("config image has no config.gz"), "{t}");

    let other = config_image(tmp.path(), "label", "CONFIG_2", &files, true);
    let o = run(sim_cmd(
        &sim,
        &["--config-image", other.to_str().unwrap()],
        &["--node", &node_arg(W0)],
    ));
    let t = text(&o);
    assert_eq!(o.status.code(), Some(3), "{t}");
    assert!(
        t.contains("volume label \"CONFIG_2\"") && t.contains("agent_configimage"),
        "{t}"
    );
}
