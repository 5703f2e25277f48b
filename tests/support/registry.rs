//! Test helpers for tests/registry.rs: Debian's `docker-registry` (Distribution v2) started on
//! an address of the test's network namespace, a fake release payload pushed into it with
//! oci-client, and a tiny fault-injecting HTTP proxy.

#![allow(dead_code)]

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use oci_client::client::{Certificate, CertificateEncoding, ClientConfig, ClientProtocol};
use oci_client::secrets::RegistryAuth;
use oci_client::{Client, Reference, RegistryOperation};
use sha2::{Digest, Sha256};

pub const REGISTRY_BIN: &str = "/usr/bin/docker-registry";

/// How to run the registry.
#[derive(Default, Clone)]
pub struct RegistryOpts {
    /// Serving certificate and key (PEM) → HTTPS.
    pub tls: Option<(String, String)>,
    /// One htpasswd user (name, password) → basic auth required.
    pub user: Option<(String, String)>,
}

/// A running docker-registry; dropping it kills it (by its pid) and removes its storage.
pub struct Registry {
    pub addr: SocketAddr,
    pub opts: RegistryOpts,
    child: Option<Child>,
    pub dir: tempfile::TempDir,
}

impl Registry {
    /// `host:port` as used in pull specs.
    pub fn host(&self) -> String {
        self.addr.to_string()
    }

    /// Starts `docker-registry serve` on `addr` and waits until it accepts connections.
    pub fn start(addr: &str, opts: RegistryOpts) -> Registry {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("data");
        std::fs::create_dir_all(&root).unwrap();
        let mut cfg = format!(
            "version: 0.1\nlog:\n  level: warn\n  accesslog:\n    disabled: true\nstorage:\n  filesystem:\n    rootdirectory: {}\n  delete:\n    enabled: true\nhttp:\n  addr: {addr}\n",
            root.display()
        );
        if let Some((cert, key)) = &opts.tls {
            let c = dir.path().join("tls.crt");
            let k = dir.path().join("tls.key");
            std::fs::write(&c, cert).unwrap();
            std::fs::write(&k, key).unwrap();
            cfg.push_str(&format!("  tls:\n    certificate: {}\n    key: {}\n", c.display(), k.display()));
        }
        if let Some((user, pass)) = &opts.user {
            let h = bcrypt::hash_with_result(pass, 4).unwrap().format_for_version(bcrypt::Version::TwoA);
            let p = dir.path().join("htpasswd");
            std::fs::write(&p, format!("{user}:{h}\n")).unwrap();
            cfg.push_str(&format!("auth:\n  htpasswd:\n    realm: test-realm\n    path: {}\n", p.display()));
        }
        let cfg_path = dir.path().join("config.yml");
        std::fs::write(&cfg_path, cfg).unwrap();
        let log = std::fs::File::create(dir.path().join("registry.log")).unwrap();
        let child = Command::new(REGISTRY_BIN)
            .arg("serve")
            .arg(&cfg_path)
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .expect("start docker-registry");
        let addr: SocketAddr = addr.parse().unwrap();
        let mut r = Registry { addr, opts, child: Some(child), dir };
        r.wait_up();
        r
    }

    fn wait_up(&mut self) {
        let deadline = Instant::now() + Duration::from_secs(20);
        while Instant::now() < deadline {
            if TcpStream::connect_timeout(&self.addr, Duration::from_millis(200)).is_ok() {
                return;
            }
            if let Some(Ok(Some(st))) = self.child.as_mut().map(|c| c.try_wait()) {
                panic!("docker-registry exited ({st}): {}", self.log());
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        panic!("docker-registry did not listen on {} in 20 s: {}", self.addr, self.log());
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("registry.log")).unwrap_or_default()
    }

    /// Stops the registry (kill by pid, then wait) and checks nothing listens any more.
    pub fn stop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
        assert!(TcpStream::connect_timeout(&self.addr, Duration::from_millis(200)).is_err());
    }

    /// An oci-client for pushing, trusting `ca_pem` for TLS registries, with the user's
    /// credentials when auth is on.
    pub fn pusher(&self, ca_pem: Option<&str>) -> Pusher {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let certs = ca_pem
            .map(|p| {
                vec![Certificate {
                    encoding: CertificateEncoding::Pem,
                    data: p.as_bytes().to_vec(),
                }]
            })
            .unwrap_or_default();
        let client = Client::try_from(ClientConfig {
            protocol: if self.opts.tls.is_some() { ClientProtocol::Https } else { ClientProtocol::Http },
            extra_root_certificates: certs,
            ..Default::default()
        })
        .unwrap();
        let auth = match &self.opts.user {
            Some((u, p)) => RegistryAuth::Basic(u.clone(), p.clone()),
            None => RegistryAuth::Anonymous,
        };
        Pusher { client, auth, host: self.host() }
    }
}

impl Drop for Registry {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

pub fn sha256_digest(data: &[u8]) -> String {
    format!("sha256:{}", hex::encode(Sha256::digest(data)))
}

/// A gzip'd tar of `files` (path, content), regular files mode 0644, as image layers are.
pub fn tar_gz(files: &[(&str, &[u8])]) -> Vec<u8> {
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    {
        let mut b = tar::Builder::new(&mut gz);
        for (path, data) in files {
            let mut h = tar::Header::new_gnu();
            h.set_size(data.len() as u64);
            h.set_mode(0o644);
            h.set_entry_type(tar::EntryType::Regular);
            h.set_cksum();
            b.append_data(&mut h, path, *data).unwrap();
        }
        b.finish().unwrap();
    }
    gz.finish().unwrap()
}

/// A plain (uncompressed) tar.
pub fn tar_plain(files: &[(&str, &[u8])]) -> Vec<u8> {
    let mut b = tar::Builder::new(Vec::new());
    for (path, data) in files {
        let mut h = tar::Header::new_gnu();
        h.set_size(data.len() as u64);
        h.set_mode(0o644);
        h.set_entry_type(tar::EntryType::Regular);
        h.set_cksum();
        b.append_data(&mut h, path, *data).unwrap();
    }
    b.into_inner().unwrap()
}

pub struct Pusher {
    pub client: Client,
    pub auth: RegistryAuth,
    pub host: String,
}

const OCI_MANIFEST: &str = "application/vnd.oci.image.manifest.v1+json";
const DOCKER_MANIFEST: &str = "application/vnd.docker.distribution.manifest.v2+json";
const OCI_INDEX: &str = "application/vnd.oci.image.index.v1+json";
const DOCKER_LIST: &str = "application/vnd.docker.distribution.manifest.list.v2+json";

impl Pusher {
    fn reference(&self, repo: &str, tag: &str) -> Reference {
        Reference::try_from(format!("{}/{repo}:{tag}", self.host)).unwrap()
    }

    async fn login(&self, r: &Reference) {
        self.client.auth(r, &self.auth, RegistryOperation::Push).await.unwrap();
    }

    /// Pushes an image of `layers` (blobs as given; gzip'd or plain tars) with a minimal config,
    /// tagged `tag` in `repo`; OCI media types unless `docker`. Returns the manifest digest.
    pub async fn push_image(&self, repo: &str, tag: &str, arch: &str, layers: &[Vec<u8>], docker: bool) -> String {
        let r = self.reference(repo, tag);
        self.login(&r).await;
        let config = format!(
            r#"{{"architecture":"{arch}","os":"linux","rootfs":{{"type":"layers","diff_ids":[]}},"config":{{}}}}"#
        )
        .into_bytes();
        let cd = sha256_digest(&config);
        self.client.push_blob(&r, config.clone(), &cd).await.unwrap();
        let mut descs = Vec::new();
        for l in layers {
            let d = sha256_digest(l);
            self.client.push_blob(&r, l.clone(), &d).await.unwrap();
            let gz = l.starts_with(&[0x1f, 0x8b]);
            let mt = match (docker, gz) {
                (true, _) => "application/vnd.docker.image.rootfs.diff.tar.gzip",
                (false, true) => "application/vnd.oci.image.layer.v1.tar+gzip",
                (false, false) => "application/vnd.oci.image.layer.v1.tar",
            };
            descs.push(serde_json::json!({"mediaType": mt, "digest": d, "size": l.len()}));
        }
        let (mt, cmt) = if docker {
            (DOCKER_MANIFEST, "application/vnd.docker.container.image.v1+json")
        } else {
            (OCI_MANIFEST, "application/vnd.oci.image.config.v1+json")
        };
        let manifest = serde_json::to_vec(&serde_json::json!({
            "schemaVersion": 2,
            "mediaType": mt,
            "config": {"mediaType": cmt, "digest": cd, "size": config.len()},
            "layers": descs,
        }))
        .unwrap();
        let md = sha256_digest(&manifest);
        self.client
            .push_manifest_raw(&r, manifest, http::HeaderValue::from_static(mt))
            .await
            .unwrap();
        md
    }

    /// Pushes a manifest list (`docker`) or OCI index of `(arch, digest, size)` entries.
    pub async fn push_index(&self, repo: &str, tag: &str, entries: &[(&str, String)], docker: bool) -> String {
        let r = self.reference(repo, tag);
        self.login(&r).await;
        let (mt, emt) = if docker { (DOCKER_LIST, DOCKER_MANIFEST) } else { (OCI_INDEX, OCI_MANIFEST) };
        let manifests: Vec<_> = entries
            .iter()
            .map(|(arch, d)| {
                serde_json::json!({"mediaType": emt, "digest": d, "size": 1,
                    "platform": {"architecture": arch, "os": "linux"}})
            })
            .collect();
        let body = serde_json::to_vec(&serde_json::json!({
            "schemaVersion": 2, "mediaType": mt, "manifests": manifests
        }))
        .unwrap();
        let d = sha256_digest(&body);
        self.client
            .push_manifest_raw(&r, body, http::HeaderValue::from_static(mt))
            .await
            .unwrap();
        d
    }
}

/// An `image-references` ImageStream with `tags` (name → pull spec).
pub fn image_references(tags: &[(&str, String)]) -> Vec<u8> {
    let tags: Vec<_> = tags
        .iter()
        .map(|(n, s)| serde_json::json!({"name": n, "from": {"kind": "DockerImage", "name": s}}))
        .collect();
    serde_json::to_vec_pretty(&serde_json::json!({
        "kind": "ImageStream", "apiVersion": "image.openshift.io/v1",
        "metadata": {"name": "4.18.0", "creationTimestamp": null},
        "spec": {"lookupPolicy": {"local": false}, "tags": tags}
    }))
    .unwrap()
}

/// The simulated CoreOS ISO for `arch` (from agent_day2_sim::baseiso), as bytes.
pub fn base_iso(arch: &str) -> Vec<u8> {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join(format!("coreos-{arch}.iso"));
    agent_day2_sim::baseiso::build_base_iso(&p, arch).unwrap();
    std::fs::read(&p).unwrap()
}

/// A fault-injecting HTTP/1.1 proxy in front of `backend`: the first `fail` requests that are
/// not the `/v2/` ping are answered 503; everything else is forwarded, one request per
/// connection (`Connection: close`), so every request is seen.
pub struct FlakyProxy {
    pub addr: SocketAddr,
    /// Requests answered 503 so far.
    pub failed: Arc<AtomicUsize>,
    /// Requests forwarded so far.
    pub forwarded: Arc<AtomicUsize>,
    /// Request lines seen, in order.
    pub seen: Arc<std::sync::Mutex<Vec<String>>>,
}

impl FlakyProxy {
    pub fn start(listen: &str, backend: SocketAddr, fail: usize) -> FlakyProxy {
        let l = TcpListener::bind(listen).unwrap();
        let addr = l.local_addr().unwrap();
        let failed = Arc::new(AtomicUsize::new(0));
        let forwarded = Arc::new(AtomicUsize::new(0));
        let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
        let (f2, fw2, s2) = (failed.clone(), forwarded.clone(), seen.clone());
        // Threads inherit the namespace of the thread that spawns them.
        std::thread::spawn(move || {
            for conn in l.incoming() {
                let Ok(mut c) = conn else { continue };
                let (f, fw, s) = (f2.clone(), fw2.clone(), s2.clone());
                std::thread::spawn(move || {
                    let mut head = Vec::new();
                    let mut b = [0u8; 1];
                    while !head.ends_with(b"\r\n\r\n") {
                        match c.read(&mut b) {
                            // A TLS ClientHello: hang up, as a plain HTTP server would.
                            Ok(1) if head.is_empty() && b[0] == 0x16 => return,
                            Ok(1) => head.push(b[0]),
                            _ => return,
                        }
                    }
                    let text = String::from_utf8_lossy(&head).to_string();
                    let path = text.split_whitespace().nth(1).unwrap_or("").to_string();
                    s.lock().unwrap().push(text.lines().next().unwrap_or("").to_string());
                    if path != "/v2/" && f.load(Ordering::SeqCst) < fail {
                        f.fetch_add(1, Ordering::SeqCst);
                        let body = "{\"errors\":[{\"code\":\"UNAVAILABLE\",\"message\":\"try later\"}]}";
                        let _ = write!(
                            c,
                            "HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                            body.len()
                        );
                        return;
                    }
                    fw.fetch_add(1, Ordering::SeqCst);
                    let mut lines: Vec<&str> = text.trim_end().split("\r\n").collect();
                    lines.retain(|l| !l.to_ascii_lowercase().starts_with("connection:"));
                    let head = format!("{}\r\nConnection: close\r\n\r\n", lines.join("\r\n"));
                    let Ok(mut up) = TcpStream::connect(backend) else { return };
                    if up.write_all(head.as_bytes()).is_err() {
                        return;
                    }
                    let _ = std::io::copy(&mut up, &mut c);
                });
            }
        });
        FlakyProxy { addr, failed, forwarded, seen }
    }
}

/// Writes `content` to `dir/name` and returns the path.
pub fn write_file(dir: &Path, name: &str, content: &str) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, content).unwrap();
    p
}
