//! Test helpers for tests/registry.rs: Debian's `docker-registry` (Distribution v2) started on
//! an address of the test's network namespace and the fake release payload pushed into it, both
//! by the simulator's own code (`agent_day2_sim::registry`, the one copy `up --registry` uses
//! too), and a tiny fault-injecting HTTP proxy.

#![allow(dead_code)]

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

// Shared by several test crates; each uses a part.
#[allow(unused_imports)]
pub use agent_day2_sim::registry::{
    push_release_payload, sha256_digest, tar_gz, tar_plain, ArchRelease, PayloadSpec, RegistryOptions,
    RegistryProcess, MACHINE_OS_IMAGES, REGISTRY_BIN,
};

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
    process: RegistryProcess,
    pub dir: tempfile::TempDir,
}

impl Registry {
    /// `host:port` as used in pull specs.
    pub fn host(&self) -> String {
        self.addr.to_string()
    }

    /// Starts `docker-registry serve` on `addr` (storage in a temporary directory) and waits
    /// until it accepts connections.
    pub fn start(addr: &str, opts: RegistryOpts) -> Registry {
        let dir = tempfile::tempdir().unwrap();
        let addr: SocketAddr = addr.parse().unwrap();
        let process = RegistryProcess::start(RegistryOptions {
            addr,
            dir: dir.path().join("registry"),
            tls: opts.tls.clone(),
            user: opts.user.clone(),
        })
        .expect("start docker-registry");
        Registry {
            addr,
            opts,
            process,
            dir,
        }
    }

    pub fn log(&self) -> String {
        self.process.log()
    }

    /// Stops the registry (kill by pid, then wait) and checks nothing listens any more.
    pub fn stop(&mut self) {
        self.process.stop();
        assert!(TcpStream::connect_timeout(&self.addr, Duration::from_millis(200)).is_err());
    }

    /// A pusher trusting `ca_pem` for TLS registries, with the user's credentials when auth is on.
    pub fn pusher(&self, ca_pem: Option<&str>) -> Pusher {
        Pusher {
            host: self.host(),
            sim: self.process.pusher(ca_pem).unwrap(),
        }
    }
}

/// The simulator's pusher ([`agent_day2_sim::registry::Pusher`], in `sim`, for
/// [`push_release_payload`]) with methods that panic on failure, for tests.
pub struct Pusher {
    /// `host:port`.
    pub host: String,
    pub sim: agent_day2_sim::registry::Pusher,
}

impl Pusher {
    /// See [`agent_day2_sim::registry::Pusher::push_image`]; returns the manifest digest.
    pub async fn push_image(
        &self,
        repo: &str,
        tag: &str,
        arch: &str,
        layers: &[Vec<u8>],
        docker: bool,
    ) -> String {
        self.sim
            .push_image(repo, tag, arch, layers, docker)
            .await
            .unwrap()
    }

    /// See [`agent_day2_sim::registry::Pusher::push_index`]; returns the list's digest.
    pub async fn push_index(
        &self,
        repo: &str,
        tag: &str,
        entries: &[(&str, String)],
        docker: bool,
    ) -> String {
        self.sim.push_index(repo, tag, entries, docker).await.unwrap()
    }
}

/// An `image-references` ImageStream (named 4.18.0) with `tags` (name → pull spec).
pub fn image_references(tags: &[(&str, String)]) -> Vec<u8> {
    let tags: Vec<(String, String)> = tags.iter().map(|(n, s)| (n.to_string(), s.clone())).collect();
    agent_day2_sim::registry::image_references("4.18.0", &tags)
}

/// The simulated CoreOS ISO for `arch` (x86_64, aarch64), as bytes.
pub fn base_iso(arch: &str) -> Vec<u8> {
    agent_day2_sim::baseiso::base_iso_bytes(arch).unwrap()
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
                    s.lock()
                        .unwrap()
                        .push(text.lines().next().unwrap_or("").to_string());
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
                    let Ok(mut up) = TcpStream::connect(backend) else {
                        return;
                    };
                    if up.write_all(head.as_bytes()).is_err() {
                        return;
                    }
                    let _ = std::io::copy(&mut up, &mut c);
                });
            }
        });
        FlakyProxy {
            addr,
            failed,
            forwarded,
            seen,
        }
    }
}

/// Writes `content` to `dir/name` and returns the path.
pub fn write_file(dir: &Path, name: &str, content: &str) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, content).unwrap();
    p
}
