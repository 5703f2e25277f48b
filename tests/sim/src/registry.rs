//! A real container registry for the simulated cluster, holding a small fake release payload.
//!
//! [`RegistryProcess`] runs Debian's Distribution v2 server (`/usr/bin/docker-registry`,
//! package `docker-registry`) as a child process on an address of the network namespace
//! (default [`DEFAULT_ADDR`]), optionally with TLS (a serving certificate signed by the
//! simulator's CA) and htpasswd basic auth (one bcrypt user). The child is killed when the
//! handle drops, and by the kernel when the thread that started it dies
//! (`prctl(PR_SET_PDEATHSIG, SIGKILL)`), so a crashed `up` or test leaves no registry behind.
//!
//! [`Pusher`] pushes blobs, image manifests and manifest lists through the registry API
//! (oci-client); [`push_release_payload`] pushes a whole fake release payload:
//!
//! - per architecture the four agent-installer component images (`agent-installer-api-server`,
//!   `-node-agent`, `-orchestrator`, `-utils`: one tiny layer each, OCI media types) and
//!   `machine-os-images` (Docker media types, as the real one; its top layer holds
//!   `coreos/coreos-<arch>.iso`, `coreos/coreos-<arch>.iso.sha256` (`<hex>  coreos-<arch>.iso`)
//!   and `coreos/coreos-stream.json`);
//! - per architecture the release image (OCI) of three layers: one with a CVO manifest, one
//!   (gzip) with `release-manifests/release-metadata` (Cincinnati metadata) and
//!   `release-manifests/image-references` (an ImageStream naming every component by digest,
//!   under the repository `named_as`), and an uncompressed top layer without either file, so a
//!   reader must search below the top;
//! - for more than one architecture, `machine-os-images` and the release are OCI/Docker
//!   manifest lists with one `linux/<arch>` entry per architecture, in the order given.
//!
//! Tags follow oc-mirror's layout: `<version>-<rpm arch>` for a release,
//! `<version>-multi` for the release list, `<version>-<rpm arch>-<component>` for components,
//! `<version>-multi-machine-os-images` for the machine-os-images list. Readers should go by
//! digest, as the cluster does.

use std::collections::BTreeMap;
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::Context;
use oci_client::client::{Certificate, CertificateEncoding, ClientConfig, ClientProtocol};
use oci_client::secrets::RegistryAuth;
use oci_client::{Client, Reference, RegistryOperation};
use sha2::{Digest, Sha256};

/// Debian's Distribution v2 server (`apt-get install docker-registry`).
pub const REGISTRY_BIN: &str = "/usr/bin/docker-registry";
/// Where `up --registry` listens by default: next to the API VIP (.5) on the machine network.
pub const DEFAULT_ADDR: &str = "192.168.111.6:5000";
/// DNS name put in the registry's certificate besides its IP (nothing resolves it; clients
/// use the IP).
pub const REGISTRY_DNS: &str = "registry.ostest.example.com";
/// User the simulator's registry accepts (password random per `up`, in the pull secret).
pub const DEFAULT_USER: &str = "sim-registry";
/// bcrypt cost of the htpasswd entry. The registry checks the hash on every request, so a low
/// cost keeps pushes fast; the credentials only guard a simulator inside a private namespace.
const BCRYPT_COST: u32 = 4;

/// Media types.
pub const OCI_MANIFEST: &str = "application/vnd.oci.image.manifest.v1+json";
pub const DOCKER_MANIFEST: &str = "application/vnd.docker.distribution.manifest.v2+json";
pub const OCI_INDEX: &str = "application/vnd.oci.image.index.v1+json";
pub const DOCKER_LIST: &str = "application/vnd.docker.distribution.manifest.list.v2+json";

/// The agent-installer component tags of `image-references` that `add-nodes` needs, with the
/// binary each fake image carries.
pub const COMPONENTS: [(&str, &str); 4] = [
    ("agent-installer-api-server", "assisted-service"),
    ("agent-installer-node-agent", "agent"),
    ("agent-installer-orchestrator", "assisted-installer-controller"),
    ("agent-installer-utils", "agent-installer-client"),
];
/// The image-references tag of the image holding the CoreOS ISOs.
pub const MACHINE_OS_IMAGES: &str = "machine-os-images";

/// How to run the registry.
#[derive(Debug, Clone)]
pub struct RegistryOptions {
    /// Listen address, e.g. 192.168.111.6:5000 (must be local: inside `agent-day2-sim netns`
    /// or a test's namespace the whole 192.168.111.0/24 is).
    pub addr: SocketAddr,
    /// Working directory, created if missing: `config.yml`, `htpasswd`, `tls.crt`, `tls.key`
    /// (0600), `registry.log`, storage under `data/`.
    pub dir: PathBuf,
    /// Serving certificate and key (PEM): HTTPS; None: plain HTTP.
    pub tls: Option<(String, String)>,
    /// One htpasswd user (name, password): basic auth on every request; None: anonymous.
    pub user: Option<(String, String)>,
}

/// A running `docker-registry serve`. Dropping it kills the process (by its pid) and waits.
pub struct RegistryProcess {
    /// The listen address.
    pub addr: SocketAddr,
    /// The working directory (see [`RegistryOptions::dir`]).
    pub dir: PathBuf,
    tls: bool,
    user: Option<(String, String)>,
    child: Option<Child>,
}

fn write_private(p: &Path, data: &str) -> anyhow::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let _ = std::fs::remove_file(p);
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(p)
        .with_context(|| format!("cannot create {}", p.display()))?;
    f.write_all(data.as_bytes())
        .with_context(|| format!("cannot write {}", p.display()))
}

impl RegistryProcess {
    /// Writes the configuration into `opts.dir`, starts [`REGISTRY_BIN`] and waits up to 20 s
    /// until it accepts TCP connections on `opts.addr`.
    ///
    /// Errors: the binary is missing (says which package to install), the directory cannot be
    /// written, the process exits early or never listens (with its log).
    pub fn start(opts: RegistryOptions) -> anyhow::Result<RegistryProcess> {
        if !Path::new(REGISTRY_BIN).exists() {
            anyhow::bail!("{REGISTRY_BIN} is missing: install Debian's docker-registry package (apt-get install docker-registry)");
        }
        let dir = opts.dir.clone();
        std::fs::create_dir_all(dir.join("data"))
            .with_context(|| format!("cannot create {}", dir.display()))?;
        {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700))?;
        }
        let mut cfg = format!(
            "version: 0.1\nlog:\n  level: warn\n  accesslog:\n    disabled: true\nstorage:\n  filesystem:\n    rootdirectory: {}\n  delete:\n    enabled: true\nhttp:\n  addr: {}\n  secret: {}\n",
            dir.join("data").display(),
            opts.addr,
            hex::encode(random_bytes::<16>()?),
        );
        if let Some((cert, key)) = &opts.tls {
            let c = dir.join("tls.crt");
            let k = dir.join("tls.key");
            std::fs::write(&c, cert).with_context(|| format!("cannot write {}", c.display()))?;
            write_private(&k, key)?;
            cfg.push_str(&format!(
                "  tls:\n    certificate: {}\n    key: {}\n",
                c.display(),
                k.display()
            ));
        }
        if let Some((user, pass)) = &opts.user {
            let h = bcrypt::hash_with_result(pass, BCRYPT_COST)
                .map_err(|e| anyhow::anyhow!("bcrypt: {e}"))?
                .format_for_version(bcrypt::Version::TwoA);
            let p = dir.join("htpasswd");
            write_private(&p, &format!("{user}:{h}\n"))?;
            cfg.push_str(&format!(
                "auth:\n  htpasswd:\n    realm: agent-day2-sim\n    path: {}\n",
                p.display()
            ));
        }
        let cfg_path = dir.join("config.yml");
        write_private(&cfg_path, &cfg)?;
        let log_path = dir.join("registry.log");
        let log = std::fs::File::create(&log_path)
            .with_context(|| format!("cannot create {}", log_path.display()))?;
        let mut cmd = Command::new(REGISTRY_BIN);
        cmd.arg("serve")
            .arg(&cfg_path)
            .stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log);
        // SAFETY: getpid cannot fail.
        let parent = unsafe { libc::getpid() };
        {
            use std::os::unix::process::CommandExt;
            // SAFETY: only async-signal-safe calls (prctl, getppid, _exit) between fork and exec.
            unsafe {
                cmd.pre_exec(move || {
                    // Killed when the thread that spawned it exits (up's main thread, a test's thread).
                    if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL as libc::c_ulong, 0, 0, 0) != 0 {
                        return Err(std::io::Error::last_os_error());
                    }
                    // The parent may have died before prctl: then nobody would ever kill us.
                    if libc::getppid() != parent {
                        libc::_exit(1);
                    }
                    Ok(())
                });
            }
        }
        let child = cmd
            .spawn()
            .with_context(|| format!("cannot run {REGISTRY_BIN}"))?;
        let mut r = RegistryProcess {
            addr: opts.addr,
            dir,
            tls: opts.tls.is_some(),
            user: opts.user,
            child: Some(child),
        };
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            if TcpStream::connect_timeout(&r.addr, Duration::from_millis(200)).is_ok() {
                return Ok(r);
            }
            if let Some(Ok(Some(st))) = r.child.as_mut().map(|c| c.try_wait()) {
                r.child = None;
                anyhow::bail!("docker-registry on {} exited ({st}):\n{}", r.addr, r.log());
            }
            if Instant::now() > deadline {
                anyhow::bail!(
                    "docker-registry did not listen on {} within 20 s:\n{}",
                    r.addr,
                    r.log()
                );
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// `host:port`, as in pull specs.
    pub fn host(&self) -> String {
        self.addr.to_string()
    }

    /// `https://host:port` or `http://host:port`.
    pub fn url(&self) -> String {
        format!("{}://{}", if self.tls { "https" } else { "http" }, self.addr)
    }

    /// The pid of the registry process, while it runs.
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    /// The registry's stdout and stderr so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("registry.log")).unwrap_or_default()
    }

    /// Kills the registry (by its pid) and waits for it.
    pub fn stop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// A [`Pusher`] for this registry with its user's credentials, trusting `ca_pem` (PEM,
    /// bundles allowed) when the registry speaks TLS.
    pub fn pusher(&self, ca_pem: Option<&str>) -> anyhow::Result<Pusher> {
        Pusher::new(&self.host(), self.tls, ca_pem, self.user.clone())
    }
}

impl Drop for RegistryProcess {
    fn drop(&mut self) {
        self.stop();
    }
}

fn random_bytes<const N: usize>() -> anyhow::Result<[u8; N]> {
    let mut b = [0u8; N];
    getrandom::getrandom(&mut b).map_err(|e| anyhow::anyhow!("getrandom: {e}"))?;
    Ok(b)
}

/// A random password of 32 hex characters (for the registry's one user).
pub fn random_password() -> anyhow::Result<String> {
    Ok(hex::encode(random_bytes::<16>()?))
}

/// `sha256:<hex>` of `data`.
pub fn sha256_digest(data: &[u8]) -> String {
    format!("sha256:{}", hex::encode(Sha256::digest(data)))
}

fn tar_of<W: std::io::Write>(w: W, files: &[(&str, &[u8])]) -> std::io::Result<W> {
    let mut b = tar::Builder::new(w);
    for (path, data) in files {
        let mut h = tar::Header::new_gnu();
        h.set_size(data.len() as u64);
        h.set_mode(0o644);
        h.set_mtime(1_737_552_420);
        h.set_entry_type(tar::EntryType::Regular);
        h.set_cksum();
        b.append_data(&mut h, path, *data)?;
    }
    b.into_inner()
}

/// A gzip'd tar of `files` (path, content), regular files mode 0644, as image layers are.
pub fn tar_gz(files: &[(&str, &[u8])]) -> Vec<u8> {
    let gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    // Writing to memory cannot fail.
    tar_of(gz, files)
        .and_then(|gz| gz.finish())
        .expect("in-memory tar.gz")
}

/// A plain (uncompressed) tar of `files`.
pub fn tar_plain(files: &[(&str, &[u8])]) -> Vec<u8> {
    tar_of(Vec::new(), files).expect("in-memory tar")
}

/// An `image-references` ImageStream (`image.openshift.io/v1`, named `version`) with `tags`
/// (name → pull spec), as `oc adm release new` writes it.
pub fn image_references(version: &str, tags: &[(String, String)]) -> Vec<u8> {
    let tags: Vec<_> = tags
        .iter()
        .map(|(n, s)| serde_json::json!({"name": n, "annotations": {"io.openshift.build.source-location": ""}, "from": {"kind": "DockerImage", "name": s}}))
        .collect();
    serde_json::to_vec_pretty(&serde_json::json!({
        "kind": "ImageStream", "apiVersion": "image.openshift.io/v1",
        "metadata": {"name": version, "creationTimestamp": null,
            "annotations": {"release.openshift.io/from-image-stream": "ocp/4.18-art-latest"}},
        "spec": {"lookupPolicy": {"local": false}, "tags": tags}
    }))
    .expect("JSON")
}

/// Pushes blobs and manifests to one registry (oci-client; basic auth when given).
pub struct Pusher {
    pub client: Client,
    pub auth: RegistryAuth,
    /// `host:port`.
    pub host: String,
}

impl Pusher {
    /// A pusher for `host` (`host:port`) over HTTPS (`tls`, trusting `ca_pem` besides the
    /// system roots) or plain HTTP, with `user` (name, password) or anonymously.
    pub fn new(
        host: &str,
        tls: bool,
        ca_pem: Option<&str>,
        user: Option<(String, String)>,
    ) -> anyhow::Result<Pusher> {
        // oci-client is built without a crypto provider of its own: ring, as everywhere here.
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
            protocol: if tls {
                ClientProtocol::Https
            } else {
                ClientProtocol::Http
            },
            extra_root_certificates: certs,
            ..Default::default()
        })
        .map_err(|e| anyhow::anyhow!("registry client for {host}: {e}"))?;
        let auth = match user {
            Some((u, p)) => RegistryAuth::Basic(u, p),
            None => RegistryAuth::Anonymous,
        };
        Ok(Pusher {
            client,
            auth,
            host: host.to_string(),
        })
    }

    fn reference(&self, repo: &str, tag: &str) -> anyhow::Result<Reference> {
        let s = format!("{}/{repo}:{tag}", self.host);
        Reference::try_from(s.as_str()).map_err(|e| anyhow::anyhow!("{s}: {e}"))
    }

    async fn login(&self, r: &Reference) -> anyhow::Result<()> {
        self.client
            .auth(r, &self.auth, RegistryOperation::Push)
            .await
            .map_err(|e| anyhow::anyhow!("registry {}: login for push: {e}", self.host))?;
        Ok(())
    }

    /// Pushes an image of `layers` (blobs as given: gzip'd or plain tars, media types chosen
    /// by the gzip magic) with a minimal config for linux/`arch` (Go spelling), tagged `tag` in
    /// `repo`; OCI media types unless `docker`. Returns the manifest digest (`sha256:<hex>`).
    /// Errors name the registry and what failed.
    pub async fn push_image(
        &self,
        repo: &str,
        tag: &str,
        arch: &str,
        layers: &[Vec<u8>],
        docker: bool,
    ) -> anyhow::Result<String> {
        let r = self.reference(repo, tag)?;
        self.login(&r).await?;
        let diff_ids: Vec<String> = layers
            .iter()
            .map(|l| {
                if l.starts_with(&[0x1f, 0x8b]) {
                    let mut raw = Vec::new();
                    let _ = std::io::Read::read_to_end(&mut flate2::read::GzDecoder::new(&l[..]), &mut raw);
                    sha256_digest(&raw)
                } else {
                    sha256_digest(l)
                }
            })
            .collect();
        let config = serde_json::to_vec(&serde_json::json!({
            "architecture": arch, "os": "linux",
            "rootfs": {"type": "layers", "diff_ids": diff_ids}, "config": {}
        }))?;
        let cd = sha256_digest(&config);
        let push_err = |what: &str, e: oci_client::errors::OciDistributionError| {
            anyhow::anyhow!("registry {}: cannot push {what} to {repo}: {e}", self.host)
        };
        self.client
            .push_blob(&r, config.clone(), &cd)
            .await
            .map_err(|e| push_err("the image config", e))?;
        let mut descs = Vec::new();
        for l in layers {
            let d = sha256_digest(l);
            self.client
                .push_blob(&r, l.clone(), &d)
                .await
                .map_err(|e| push_err("a layer", e))?;
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
        }))?;
        let md = sha256_digest(&manifest);
        self.client
            .push_manifest_raw(&r, manifest, http::HeaderValue::from_static(mt))
            .await
            .map_err(|e| push_err("the manifest", e))?;
        Ok(md)
    }

    /// Pushes a manifest list (`docker`) or OCI index tagged `tag` in `repo` whose entries are
    /// `(arch, manifest digest)` (linux, Go arch spelling), in the order given; the entries'
    /// manifests must already be in `repo`. Returns the list's digest.
    pub async fn push_index(
        &self,
        repo: &str,
        tag: &str,
        entries: &[(&str, String)],
        docker: bool,
    ) -> anyhow::Result<String> {
        let r = self.reference(repo, tag)?;
        self.login(&r).await?;
        let (mt, emt) = if docker {
            (DOCKER_LIST, DOCKER_MANIFEST)
        } else {
            (OCI_INDEX, OCI_MANIFEST)
        };
        let mut manifests = Vec::new();
        for (arch, d) in entries {
            // The true size of each entry (clients may check it).
            let er = Reference::try_from(format!("{}/{repo}@{d}", self.host).as_str())
                .map_err(|e| anyhow::anyhow!("{d}: {e}"))?;
            let size = self
                .client
                .pull_manifest_raw(&er, &self.auth, &[OCI_MANIFEST, DOCKER_MANIFEST])
                .await
                .map(|(b, _)| b.len())
                .map_err(|e| anyhow::anyhow!("registry {}: cannot read back {repo}@{d}: {e}", self.host))?;
            manifests.push(serde_json::json!({"mediaType": emt, "digest": d, "size": size,
                "platform": {"architecture": arch, "os": "linux"}}));
        }
        let body = serde_json::to_vec(&serde_json::json!({
            "schemaVersion": 2, "mediaType": mt, "manifests": manifests
        }))?;
        let d = sha256_digest(&body);
        self.client
            .push_manifest_raw(&r, body, http::HeaderValue::from_static(mt))
            .await
            .map_err(|e| {
                anyhow::anyhow!(
                    "registry {}: cannot push the manifest list {repo}:{tag}: {e}",
                    self.host
                )
            })?;
        Ok(d)
    }
}

/// What [`push_release_payload`] pushes.
#[derive(Debug, Clone)]
pub struct PayloadSpec {
    /// OpenShift version, e.g. `4.18.12` (tags, release-metadata, the ImageStream's name).
    pub version: String,
    /// Architectures, Go spelling (`amd64`, `arm64`); more than one → manifest lists.
    pub arches: Vec<String>,
    /// Repository of the release image(s) in the registry, e.g. `ocp/release`.
    pub release_repo: String,
    /// Repository of the component images in the registry, e.g. `ocp/art-dev` (may equal
    /// `release_repo`, as oc-mirror does with `ocp4/openshift4`).
    pub components_repo: String,
    /// Repository `image-references` names the components by (`<named_as>@sha256:…`): this
    /// registry's `host/components_repo`, or `quay.io/openshift-release-dev/ocp-v4.0-art-dev`
    /// for a mirrored (disconnected) payload.
    pub named_as: String,
    /// Tags left out of `image-references` (for error tests).
    pub omit: Vec<String>,
    /// The CoreOS live ISO per RPM architecture (`x86_64`, `aarch64`) for machine-os-images; an
    /// architecture without one gets a machine-os-images image without an ISO.
    pub isos: BTreeMap<String, Vec<u8>>,
}

/// One architecture's part of a pushed payload.
#[derive(Debug, Clone)]
pub struct ArchRelease {
    /// Digest of this architecture's release image manifest.
    pub release_digest: String,
    /// `image-references` of that release: (tag, pull spec), in file order.
    pub references: Vec<(String, String)>,
}

impl ArchRelease {
    /// The pull spec `image-references` gives `tag`, if listed.
    pub fn reference(&self, tag: &str) -> Option<&str> {
        self.references
            .iter()
            .find(|(t, _)| t == tag)
            .map(|(_, s)| s.as_str())
    }
}

/// A pushed payload.
#[derive(Debug, Clone)]
pub struct PushedPayload {
    /// `host/release_repo@<digest>` (the manifest list's for several architectures).
    pub release: String,
    /// Digest of that manifest (`sha256:<hex>`).
    pub release_digest: String,
    /// Per architecture (Go spelling).
    pub arches: BTreeMap<String, ArchRelease>,
}

fn rpm_arch(go: &str) -> &str {
    crate::seed::rpm_arch(go)
}

/// Pushes the fake release payload described in the module docs and returns what went where.
/// Errors name the registry and the failing push.
pub async fn push_release_payload(p: &Pusher, spec: &PayloadSpec) -> anyhow::Result<PushedPayload> {
    anyhow::ensure!(!spec.arches.is_empty(), "release payload: no architecture given");
    let v = &spec.version;
    let comp = &spec.components_repo;
    let multi = spec.arches.len() > 1;
    let base = tar_gz(&[(
        "etc/os-release",
        b"NAME=\"Red Hat Enterprise Linux CoreOS\"\nID=rhcos\n",
    )]);

    // Components per architecture.
    let mut refs: BTreeMap<String, Vec<(String, String)>> = BTreeMap::new();
    let mut mos: Vec<(String, String)> = Vec::new();
    for arch in &spec.arches {
        let ra = rpm_arch(arch);
        let mut r = Vec::new();
        for (tag, bin) in COMPONENTS {
            let layer = tar_gz(&[(
                &format!("usr/bin/{bin}"),
                format!("#!/bin/sh\n# {bin} ({ra})\n").as_bytes(),
            )]);
            let d = p
                .push_image(comp, &format!("{v}-{ra}-{tag}"), arch, &[layer], false)
                .await?;
            r.push((tag.to_string(), format!("{}@{d}", spec.named_as)));
        }
        let mut layers = vec![base.clone()];
        if let Some(iso) = spec.isos.get(ra) {
            let sha = format!("{}  coreos-{ra}.iso\n", hex::encode(Sha256::digest(iso)));
            layers.push(tar_gz(&[
                (&format!("coreos/coreos-{ra}.iso.sha256"), sha.as_bytes()),
                ("coreos/coreos-stream.json", b"{}"),
                (&format!("coreos/coreos-{ra}.iso"), iso),
            ]));
        }
        let d = p
            .push_image(
                comp,
                &format!("{v}-{ra}-{MACHINE_OS_IMAGES}"),
                arch,
                &layers,
                true,
            )
            .await?;
        mos.push((arch.clone(), d));
        refs.insert(arch.clone(), r);
    }
    let mos_for = |arch: &str| {
        mos.iter()
            .find(|(a, _)| a == arch)
            .map(|(_, d)| d.clone())
            .unwrap_or_default()
    };
    let mos_list = if multi {
        let entries: Vec<(&str, String)> = mos.iter().map(|(a, d)| (a.as_str(), d.clone())).collect();
        Some(
            p.push_index(comp, &format!("{v}-multi-{MACHINE_OS_IMAGES}"), &entries, true)
                .await?,
        )
    } else {
        None
    };

    // Release images.
    let metadata = serde_json::to_vec(&serde_json::json!({
        "kind": "cincinnati-metadata-v0", "version": v, "previous": [], "next": [], "metadata": {}
    }))?;
    let mut arches = BTreeMap::new();
    let mut rel_entries: Vec<(String, String)> = Vec::new();
    for arch in &spec.arches {
        let ra = rpm_arch(arch);
        let mut r = refs.remove(arch).unwrap_or_default();
        let mos_digest = mos_list.clone().unwrap_or_else(|| mos_for(arch));
        r.push((
            MACHINE_OS_IMAGES.to_string(),
            format!("{}@{mos_digest}", spec.named_as),
        ));
        r.retain(|(t, _)| !spec.omit.contains(t));
        let layers = vec![
            tar_gz(&[(
                "release-manifests/0000_00_cluster-version-operator_03_deployment.yaml",
                b"apiVersion: apps/v1\nkind: Deployment\n",
            )]),
            tar_gz(&[
                ("release-manifests/release-metadata", &metadata),
                ("release-manifests/image-references", &image_references(v, &r)),
            ]),
            // A top layer without the files, uncompressed: readers must search below it.
            tar_plain(&[(
                "etc/motd",
                format!("agent-day2-sim release {v} ({ra})\n").as_bytes(),
            )]),
        ];
        let d = p
            .push_image(&spec.release_repo, &format!("{v}-{ra}"), arch, &layers, false)
            .await?;
        rel_entries.push((arch.clone(), d.clone()));
        arches.insert(
            arch.clone(),
            ArchRelease {
                release_digest: d,
                references: r,
            },
        );
    }
    let release_digest = if multi {
        let entries: Vec<(&str, String)> = rel_entries.iter().map(|(a, d)| (a.as_str(), d.clone())).collect();
        p.push_index(&spec.release_repo, &format!("{v}-multi"), &entries, false)
            .await?
    } else {
        rel_entries[0].1.clone()
    };
    Ok(PushedPayload {
        release: format!("{}/{}@{release_digest}", p.host, spec.release_repo),
        release_digest,
        arches,
    })
}
