//! `agent-day2-sim up --registry`: a real docker-registry holding the release payload the seeded
//! cluster names, read back here through the registry API (oci-client, and curl for the
//! catalog and the auth/TLS checks) with the credentials and CA the cluster itself publishes.
//!
//! Needs root (network namespace), kubectl, curl and /usr/bin/docker-registry (scripts/test.sh
//! installs them); each test fails saying which is missing otherwise.

use std::io::Read;
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use agent_day2_sim::harness::{bin, require_netns, require_tool, TestCluster};
use agent_day2_sim::registry::{DOCKER_LIST, DOCKER_MANIFEST, OCI_INDEX, OCI_MANIFEST, REGISTRY_BIN};
use base64::Engine;
use oci_client::client::{Certificate, CertificateEncoding, ClientConfig, ClientProtocol};
use oci_client::secrets::RegistryAuth;
use oci_client::{Client, Reference};
use serde_json::Value;
use sha2::Digest;

const COMPONENTS: [&str; 4] = [
    "agent-installer-api-server",
    "agent-installer-node-agent",
    "agent-installer-orchestrator",
    "agent-installer-utils",
];

/// A network namespace, Debian's docker-registry, kubectl and curl, or the test fails saying
/// which is missing (scripts/test.sh installs them).
fn setup() -> bool {
    require_netns();
    assert!(
        Path::new(REGISTRY_BIN).exists(),
        "{REGISTRY_BIN} is missing: apt-get install docker-registry (scripts/test.sh installs it through scripts/setup.sh)"
    );
    require_tool("kubectl", "kubernetes-client");
    require_tool("curl", "curl");
    true
}

fn rt() -> tokio::runtime::Runtime {
    // Built after entering the namespace: its threads inherit it.
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

fn get_json(c: &TestCluster, args: &[&str]) -> Value {
    let mut a = vec!["get"];
    a.extend_from_slice(args);
    a.extend_from_slice(&["-o", "json"]);
    let out = c.kubectl(&a);
    assert!(
        out.status.success(),
        "kubectl {a:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// What the cluster says about its registry: (host, user, password) from the pull secret.
fn credentials(c: &TestCluster, host: &str) -> (String, String) {
    let s = get_json(c, &["secret", "-n", "openshift-config", "pull-secret"]);
    let b64 = base64::engine::general_purpose::STANDARD;
    let dc: Value = serde_json::from_slice(
        &b64.decode(s["data"][".dockerconfigjson"].as_str().unwrap())
            .unwrap(),
    )
    .unwrap();
    let auth = dc["auths"][host]["auth"]
        .as_str()
        .unwrap_or_else(|| panic!("no pull secret entry for {host}: {dc}"));
    let up = String::from_utf8(b64.decode(auth).unwrap()).unwrap();
    let (u, p) = up.split_once(':').unwrap();
    (u.to_string(), p.to_string())
}

/// The CA the cluster publishes for `host` (Image.config additionalTrustedCA ConfigMap).
fn registry_ca(c: &TestCluster, host: &str) -> String {
    let img = get_json(c, &["image.config.openshift.io", "cluster"]);
    let name = img["spec"]["additionalTrustedCA"]["name"]
        .as_str()
        .expect("Image.spec.additionalTrustedCA.name");
    let cm = get_json(c, &["configmap", "-n", "openshift-config", name]);
    cm["data"][host.replace(':', "..")]
        .as_str()
        .unwrap_or_else(|| panic!("no CA for {host} in {cm}"))
        .to_string()
}

/// `curl` against the registry; returns (exit code, HTTP status, body).
fn curl(c: &TestCluster, path: &str, user: Option<(&str, &str)>, cacert: bool) -> (i32, String, String) {
    let url = format!("{}{path}", c.registry_url.as_deref().unwrap());
    let mut cmd = Command::new("curl");
    cmd.args(["-sS", "--noproxy", "*", "-w", "\n%{http_code}", &url]);
    if cacert {
        cmd.arg("--cacert").arg(c.dir.join("ca.crt"));
    }
    if let Some((u, p)) = user {
        // On stdin, not argv: no secret in the process list.
        cmd.args(["--config", "-"]).stdin(Stdio::piped());
        let mut child = cmd.stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
        use std::io::Write;
        writeln!(child.stdin.take().unwrap(), "user = \"{u}:{p}\"").unwrap();
        let out = child.wait_with_output().unwrap();
        return split_curl(out);
    }
    split_curl(cmd.stdin(Stdio::null()).output().unwrap())
}

fn split_curl(out: std::process::Output) -> (i32, String, String) {
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    let (body, code) = text.rsplit_once('\n').unwrap_or(("", &text));
    (
        out.status.code().unwrap_or(-1),
        code.to_string(),
        body.to_string(),
    )
}

struct Reader {
    client: Client,
    auth: RegistryAuth,
    host: String,
}

impl Reader {
    fn new(host: &str, ca_pem: &str, user: (String, String)) -> Reader {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let client = Client::try_from(ClientConfig {
            protocol: ClientProtocol::Https,
            extra_root_certificates: vec![Certificate {
                encoding: CertificateEncoding::Pem,
                data: ca_pem.as_bytes().to_vec(),
            }],
            ..Default::default()
        })
        .unwrap();
        Reader {
            client,
            auth: RegistryAuth::Basic(user.0, user.1),
            host: host.to_string(),
        }
    }

    /// The manifest of `repo@digest` (or `repo:tag`) as JSON; checks the registry's digest and
    /// the body's sha256 are the digest asked for.
    async fn manifest(&self, image: &str) -> Value {
        serde_json::from_slice(&self.manifest_raw(image).await).unwrap()
    }

    /// The manifest's bytes, checked as [`Reader::manifest`] says.
    async fn manifest_raw(&self, image: &str) -> Vec<u8> {
        let r = Reference::try_from(image).unwrap();
        let (bytes, digest) = self
            .client
            .pull_manifest_raw(
                &r,
                &self.auth,
                &[OCI_MANIFEST, DOCKER_MANIFEST, OCI_INDEX, DOCKER_LIST],
            )
            .await
            .unwrap_or_else(|e| panic!("{image}: {e}"));
        let sha = format!("sha256:{}", hex::encode(sha2::Sha256::digest(&bytes)));
        assert_eq!(digest, sha, "{image}: registry digest vs body");
        if let Some((_, d)) = image.split_once('@') {
            assert_eq!(d, sha, "{image}: the manifest is not the one named");
        }
        bytes.to_vec()
    }

    async fn blob(&self, repo: &str, digest: &str) -> Vec<u8> {
        let r = Reference::try_from(format!("{}/{repo}@{digest}", self.host).as_str()).unwrap();
        let mut out = Vec::new();
        self.client.pull_blob(&r, digest, &mut out).await.unwrap();
        out
    }

    /// Every regular file of every layer of the image manifest `m` in `repo`: (path, bytes),
    /// top layer last.
    async fn files(&self, repo: &str, m: &Value) -> Vec<(String, Vec<u8>)> {
        let mut files = Vec::new();
        for l in m["layers"].as_array().unwrap() {
            let blob = self.blob(repo, l["digest"].as_str().unwrap()).await;
            let raw = if blob.starts_with(&[0x1f, 0x8b]) {
                let mut v = Vec::new();
                flate2::read::GzDecoder::new(&blob[..])
                    .read_to_end(&mut v)
                    .unwrap();
                v
            } else {
                blob
            };
            let mut a = tar::Archive::new(&raw[..]);
            for e in a.entries().unwrap() {
                let mut e = e.unwrap();
                let p = e.path().unwrap().to_string_lossy().to_string();
                let mut v = Vec::new();
                e.read_to_end(&mut v).unwrap();
                files.push((p, v));
            }
        }
        files
    }

    async fn config_arch(&self, repo: &str, m: &Value) -> String {
        let c: Value =
            serde_json::from_slice(&self.blob(repo, m["config"]["digest"].as_str().unwrap()).await).unwrap();
        c["architecture"].as_str().unwrap().to_string()
    }
}

fn file<'a>(files: &'a [(String, Vec<u8>)], path: &str) -> &'a [u8] {
    &files
        .iter()
        .rev()
        .find(|(p, _)| p == path)
        .unwrap_or_else(|| panic!("no {path} in the image"))
        .1
}

/// `repo` of a pull spec `host/repo@digest` (host given).
fn repo_of<'a>(spec: &'a str, host: &str) -> &'a str {
    spec.strip_prefix(&format!("{host}/"))
        .and_then(|r| r.split_once('@'))
        .map(|(r, _)| r)
        .unwrap_or_else(|| panic!("{spec} is not in {host}"))
}

/// The stream's sha256 of the ISO for `arch` (what the simulator's file server serves).
fn stream_iso_sha(c: &TestCluster, arch: &str) -> String {
    let cm = get_json(
        c,
        &[
            "configmap",
            "-n",
            "openshift-machine-config-operator",
            "coreos-bootimages",
        ],
    );
    let stream: Value = serde_json::from_str(cm["data"]["stream"].as_str().unwrap()).unwrap();
    stream["architectures"][arch]["artifacts"]["metal"]["formats"]["iso"]["disk"]["sha256"]
        .as_str()
        .unwrap()
        .to_string()
}

/// Checks one architecture's release image `rel` (manifest) in `repo`: release-metadata,
/// image-references naming every component under `named_as`, each present in `comp_repo` by
/// that digest, and machine-os-images holding the ISO of the RPM arch with its .sha256.
/// Returns the image-references tags (name → pull spec).
async fn check_release(
    r: &Reader,
    repo: &str,
    rel: &Value,
    named_as: &str,
    comp_repo: &str,
    (go_arch, rpm_arch): (&str, &str),
    iso_sha: &str,
) -> Vec<(String, String)> {
    assert_eq!(rel["mediaType"], OCI_MANIFEST);
    assert_eq!(r.config_arch(repo, rel).await, go_arch);
    let files = r.files(repo, rel).await;
    // The top layer holds neither file: a reader must look below it.
    assert_eq!(
        rel["layers"].as_array().unwrap().last().unwrap()["mediaType"],
        "application/vnd.oci.image.layer.v1.tar"
    );
    let meta: Value = serde_json::from_slice(file(&files, "release-manifests/release-metadata")).unwrap();
    assert_eq!(meta["version"], "4.18.12");
    let is: Value = serde_json::from_slice(file(&files, "release-manifests/image-references")).unwrap();
    assert_eq!(is["kind"], "ImageStream");
    let tags: Vec<(String, String)> = is["spec"]["tags"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| {
            (
                t["name"].as_str().unwrap().to_string(),
                t["from"]["name"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    for want in COMPONENTS.iter().chain(["machine-os-images"].iter()) {
        let spec = &tags
            .iter()
            .find(|(n, _)| n == want)
            .unwrap_or_else(|| panic!("{want} missing: {tags:?}"))
            .1;
        let digest = spec
            .strip_prefix(&format!("{named_as}@"))
            .unwrap_or_else(|| panic!("{spec} not under {named_as}"));
        assert!(digest.starts_with("sha256:") && digest.len() == 71, "{spec}");
        let m = r.manifest(&format!("{}/{comp_repo}@{digest}", r.host)).await;
        if *want != "machine-os-images" {
            assert_eq!(r.config_arch(comp_repo, &m).await, go_arch, "{want}");
            continue;
        }
        // A manifest list (multi-arch): take this architecture's entry.
        let m = if m["mediaType"] == DOCKER_LIST {
            let e = m["manifests"]
                .as_array()
                .unwrap()
                .iter()
                .find(|e| e["platform"]["architecture"] == go_arch)
                .unwrap_or_else(|| panic!("no {go_arch} in machine-os-images {m}"))
                .clone();
            r.manifest(&format!(
                "{}/{comp_repo}@{}",
                r.host,
                e["digest"].as_str().unwrap()
            ))
            .await
        } else {
            m
        };
        assert_eq!(m["mediaType"], DOCKER_MANIFEST);
        let mf = r.files(comp_repo, &m).await;
        let iso = file(&mf, &format!("coreos/coreos-{rpm_arch}.iso"));
        let sha = hex::encode(sha2::Sha256::digest(iso));
        assert_eq!(
            sha, iso_sha,
            "machine-os-images ISO vs the stream's (the file server's) ISO"
        );
        let sum =
            String::from_utf8(file(&mf, &format!("coreos/coreos-{rpm_arch}.iso.sha256")).to_vec()).unwrap();
        assert_eq!(sum, format!("{sha}  coreos-{rpm_arch}.iso\n"));
    }
    tags
}

fn wait_closed(addr: &str, within: Duration) -> bool {
    let a: SocketAddr = addr.parse().unwrap();
    let deadline = Instant::now() + within;
    while Instant::now() < deadline {
        if TcpStream::connect_timeout(&a, Duration::from_millis(100)).is_err() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    false
}

fn mode(p: &Path) -> u32 {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(p).unwrap().permissions().mode() & 0o777
}

#[test]
fn connected_cluster_names_its_release_in_the_registry_by_true_digest() {
    if !setup() {
        return;
    }
    let c = TestCluster::start_with_registry("").unwrap();
    let url = c.registry_url.clone().expect("DIR/ready has the registry URL");
    let host = c.registry_host().unwrap().to_string();
    assert_eq!(url, format!("https://{host}"));
    assert!(host.starts_with("192.168.111.6:"), "{host}");

    // The cluster: release image by digest in this registry; its credentials; its CA.
    let cv = get_json(&c, &["clusterversion", "version"]);
    let release = cv["status"]["history"][0]["image"].as_str().unwrap().to_string();
    assert_eq!(cv["status"]["desired"]["image"], release.as_str());
    let digest = release
        .strip_prefix(&format!("{host}/ocp/release@"))
        .unwrap_or_else(|| panic!("{release}"))
        .to_string();
    let (user, pass) = credentials(&c, &host);
    let ca = registry_ca(&c, &host);
    assert_eq!(ca, std::fs::read_to_string(c.dir.join("ca.crt")).unwrap());
    assert!(get_json(&c, &["imagedigestmirrorsets"])["items"]
        .as_array()
        .unwrap()
        .is_empty());

    // curl: the catalog with those credentials and CA; refused without or with a wrong
    // password; the certificate is not trusted without the CA.
    let (code, status, body) = curl(&c, "/v2/_catalog", Some((&user, &pass)), true);
    assert_eq!((code, status.as_str()), (0, "200"), "{body}");
    let cat: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(
        cat["repositories"],
        serde_json::json!(["ocp/art-dev", "ocp/release"])
    );
    let (_, status, _) = curl(&c, "/v2/_catalog", None, true);
    assert_eq!(status, "401");
    let (_, status, _) = curl(&c, "/v2/_catalog", Some((&user, "wrong")), true);
    assert_eq!(status, "401");
    let (code, _, _) = curl(&c, "/v2/", Some((&user, &pass)), false);
    assert_eq!(
        code, 60,
        "curl must refuse the certificate without the simulator's CA"
    );

    let rt = rt();
    let r = Reader::new(&host, &ca, (user, pass));
    rt.block_on(async {
        let rel = r.manifest(&release).await;
        let tags = check_release(
            &r,
            "ocp/release",
            &rel,
            &format!("{host}/ocp/art-dev"),
            "ocp/art-dev",
            ("amd64", "x86_64"),
            &stream_iso_sha(&c, "x86_64"),
        )
        .await;
        assert_eq!(repo_of(&tags[0].1, &host), "ocp/art-dev");
        // The tag oc-mirror would give it points at the same manifest.
        let by_tag = r.manifest(&format!("{host}/ocp/release:4.18.12-x86_64")).await;
        assert_eq!(by_tag, rel);
        assert!(digest.starts_with("sha256:"));
    });

    // Files: storage under DIR/registry, secrets private.
    let rdir = c.dir.join("registry");
    assert!(rdir
        .join("data/docker/registry/v2/repositories/ocp/release")
        .is_dir());
    for f in ["htpasswd", "tls.key", "config.yml"] {
        assert_eq!(mode(&rdir.join(f)), 0o600, "{f}");
    }
    assert!(!std::fs::read_to_string(rdir.join("htpasswd"))
        .unwrap()
        .contains(&r_password(&c, &host)));

    // `up` exiting takes the registry with it.
    drop(c);
    assert!(
        wait_closed(&host, Duration::from_secs(5)),
        "the registry still listens after up exited"
    );
}

fn r_password(c: &TestCluster, host: &str) -> String {
    credentials(c, host).1
}

#[test]
fn disconnected_cluster_reads_its_release_through_the_mirror() {
    if !setup() {
        return;
    }
    let c = TestCluster::start_with_registry("disconnected: true\n").unwrap();
    let host = c.registry_host().unwrap().to_string();
    let mirror = format!("{host}/ocp4/openshift4");

    let cv = get_json(&c, &["clusterversion", "version"]);
    let release = cv["status"]["history"][0]["image"].as_str().unwrap().to_string();
    let digest = release
        .strip_prefix("quay.io/openshift-release-dev/ocp-release@")
        .unwrap_or_else(|| panic!("{release}"))
        .to_string();
    // mirrorRegistry defaults to the registry: the IDMS maps both sources there.
    let idms = get_json(&c, &["imagedigestmirrorsets"]);
    let entries = idms["items"][0]["spec"]["imageDigestMirrors"]
        .as_array()
        .unwrap()
        .clone();
    for src in [
        "quay.io/openshift-release-dev/ocp-release",
        "quay.io/openshift-release-dev/ocp-v4.0-art-dev",
    ] {
        let e = entries
            .iter()
            .find(|e| e["source"] == src)
            .unwrap_or_else(|| panic!("no mirror for {src}: {idms}"));
        assert_eq!(e["mirrors"], serde_json::json!([mirror]));
    }
    let ic = get_json(&c, &["configmap", "-n", "kube-system", "cluster-config-v1"]);
    assert!(ic["data"]["install-config"].as_str().unwrap().contains(&mirror));
    // The pull secret's entry for the mirror holds the registry's real credentials.
    let (user, pass) = credentials(&c, &host);
    let ca = registry_ca(&c, &host);
    let (code, status, body) = curl(&c, "/v2/_catalog", Some((&user, &pass)), true);
    assert_eq!((code, status.as_str()), (0, "200"), "{body}");
    assert_eq!(
        serde_json::from_str::<Value>(&body).unwrap()["repositories"],
        serde_json::json!(["ocp4/openshift4"])
    );

    let rt = rt();
    let r = Reader::new(&host, &ca, (user, pass));
    rt.block_on(async {
        // The release by the digest the cluster names, found in the mirror.
        let rel = r.manifest(&format!("{mirror}@{digest}")).await;
        let tags = check_release(
            &r,
            "ocp4/openshift4",
            &rel,
            "quay.io/openshift-release-dev/ocp-v4.0-art-dev",
            "ocp4/openshift4",
            ("amd64", "x86_64"),
            &stream_iso_sha(&c, "x86_64"),
        )
        .await;
        assert!(
            tags.iter()
                .all(|(_, s)| s.starts_with("quay.io/openshift-release-dev/ocp-v4.0-art-dev@sha256:")),
            "{tags:?}"
        );
    });
}

#[test]
fn multi_arch_release_is_a_manifest_list_of_amd64_and_arm64() {
    if !setup() {
        return;
    }
    let c = TestCluster::start_with_registry("multiArch: true\n").unwrap();
    let host = c.registry_host().unwrap().to_string();
    let cv = get_json(&c, &["clusterversion", "version"]);
    // As a Default-feature-set cluster shows it (its CRD has no status.desired.architecture).
    assert_eq!(cv["spec"]["desiredUpdate"]["architecture"], "Multi");
    let release = cv["status"]["history"][0]["image"].as_str().unwrap().to_string();
    let (user, pass) = credentials(&c, &host);
    let r = Reader::new(&host, &registry_ca(&c, &host), (user, pass));
    let rt = rt();
    rt.block_on(async {
        let idx = r.manifest(&release).await;
        assert_eq!(idx["mediaType"], OCI_INDEX);
        let entries = idx["manifests"].as_array().unwrap();
        let arches: Vec<&str> = entries
            .iter()
            .map(|e| e["platform"]["architecture"].as_str().unwrap())
            .collect();
        assert_eq!(arches, ["amd64", "arm64"]);
        let mut api_servers = Vec::new();
        for (e, (go, rpm)) in entries.iter().zip([("amd64", "x86_64"), ("arm64", "aarch64")]) {
            assert_eq!(e["platform"]["os"], "linux");
            let raw = r
                .manifest_raw(&format!("{host}/ocp/release@{}", e["digest"].as_str().unwrap()))
                .await;
            assert_eq!(
                e["size"].as_u64(),
                Some(raw.len() as u64),
                "the list entry's size"
            );
            let m: Value = serde_json::from_slice(&raw).unwrap();
            let tags = check_release(
                &r,
                "ocp/release",
                &m,
                &format!("{host}/ocp/art-dev"),
                "ocp/art-dev",
                (go, rpm),
                &stream_iso_sha(&c, rpm),
            )
            .await;
            api_servers.push(
                tags.iter()
                    .find(|(n, _)| n == "agent-installer-api-server")
                    .unwrap()
                    .1
                    .clone(),
            );
        }
        assert_ne!(
            api_servers[0], api_servers[1],
            "each architecture names its own component images"
        );
    });
}

#[test]
fn without_the_flag_there_is_no_registry() {
    if !setup() {
        return;
    }
    let c = TestCluster::start("").unwrap();
    assert_eq!(c.registry_url, None);
    assert_eq!(
        std::fs::read_to_string(c.dir.join("ready"))
            .unwrap()
            .lines()
            .count(),
        2
    );
    assert!(!c.dir.join("registry").exists());
    let cv = get_json(&c, &["clusterversion", "version"]);
    assert!(cv["status"]["history"][0]["image"]
        .as_str()
        .unwrap()
        .starts_with("quay.io/openshift-release-dev/ocp-release@sha256:"));
    let img = get_json(&c, &["image.config.openshift.io", "cluster"]);
    assert!(img["spec"]["additionalTrustedCA"].is_null(), "{img}");
}

#[test]
fn a_killed_up_takes_its_registry_with_it() {
    if !setup() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("sim");
    let addr = "192.168.111.6:5009";
    let mut up = Command::new(bin("agent-day2-sim").unwrap())
        .args(["up", "--listen", "192.168.111.5:0", "--registry", addr, "--dir"])
        .arg(&dir)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    while !dir.join("ready").exists() {
        assert!(Instant::now() < deadline, "up not ready");
        assert!(up.try_wait().unwrap().is_none(), "up exited early");
        std::thread::sleep(Duration::from_millis(50));
    }
    let ready = std::fs::read_to_string(dir.join("ready")).unwrap();
    assert_eq!(ready.lines().nth(2), Some(format!("https://{addr}").as_str()));
    assert!(TcpStream::connect(addr).is_ok());
    // SIGKILL: no cleanup code runs in `up`; the kernel's parent-death signal stops the registry.
    up.kill().unwrap();
    up.wait().unwrap();
    assert!(
        wait_closed(addr, Duration::from_secs(5)),
        "the registry outlived a killed up"
    );
}
