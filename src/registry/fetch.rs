//! The Distribution API side: clients per scheme and credentials, retries, mirrors, manifests
//! (with platform selection from manifest lists / OCI indexes) and layer streams.

use std::collections::{HashMap, HashSet};
use std::future::Future;
use std::io::{self, Read};
use std::sync::Mutex;
use std::time::Duration;

use futures::StreamExt;
use oci_client::client::{Certificate, CertificateEncoding, ClientConfig, ClientProtocol};
use oci_client::errors::{OciDistributionError, OciErrorCode};
use oci_client::secrets::RegistryAuth;
use oci_client::{Client, Reference};
use serde::Deserialize;
use sha2::{Digest, Sha256};

use super::auth::DockerConfig;
use super::layers::{decompress, is_net_error, ChannelReader};
use super::mirrors::{pull_candidates, PullCandidate};
use super::types::{CredentialSource, RegistryContext, RegistryError};

/// Manifest media types we accept, lists first (a multi-arch release is an index).
const ACCEPT: &[&str] = &[
    "application/vnd.oci.image.index.v1+json",
    "application/vnd.docker.distribution.manifest.list.v2+json",
    "application/vnd.oci.image.manifest.v1+json",
    "application/vnd.docker.distribution.manifest.v2+json",
];

/// A failure of one operation against one registry, before it is classified.
pub(crate) enum OpError {
    Oci(OciDistributionError),
    Io(io::Error),
    /// The registry answered, but with content we cannot use (not retried).
    Content(String),
    /// No answer within the request timeout (retried).
    Timeout(Duration),
}

enum Class {
    /// Worth another try: 5xx, 408/429, connection errors, a stream cut short.
    Transient { connect: bool },
    /// 401/403 (or a token request that was refused).
    Refused(String),
    /// 404 / MANIFEST_UNKNOWN / NAME_UNKNOWN / BLOB_UNKNOWN.
    NotFound,
    /// The server's certificate is not trusted.
    Tls,
    /// Anything else.
    Fatal,
}

fn classify(e: &OpError) -> Class {
    match e {
        OpError::Oci(e) => match e {
            OciDistributionError::UnauthorizedError { .. } => Class::Refused("HTTP 401".into()),
            OciDistributionError::AuthenticationFailure(_) => {
                Class::Refused("the token service refused the credentials".into())
            }
            OciDistributionError::RegistryError { envelope, .. } => {
                let codes: Vec<&OciErrorCode> = envelope.errors.iter().map(|e| &e.code).collect();
                if codes.iter().any(|c| matches!(c, OciErrorCode::Unauthorized)) {
                    Class::Refused("HTTP 401".into())
                } else if codes.iter().any(|c| matches!(c, OciErrorCode::Denied)) {
                    Class::Refused("HTTP 403, access denied".into())
                } else if codes.iter().any(|c| matches!(c, OciErrorCode::Toomanyrequests)) {
                    Class::Transient { connect: false }
                } else if codes.iter().any(|c| {
                    matches!(
                        c,
                        OciErrorCode::ManifestUnknown
                            | OciErrorCode::NameUnknown
                            | OciErrorCode::BlobUnknown
                            | OciErrorCode::NotFound
                    )
                }) {
                    Class::NotFound
                } else {
                    Class::Fatal
                }
            }
            OciDistributionError::ServerError { code, .. } => match *code {
                401 => Class::Refused("HTTP 401".into()),
                403 => Class::Refused("HTTP 403".into()),
                404 => Class::NotFound,
                408 | 429 => Class::Transient { connect: false },
                c if c >= 500 => Class::Transient { connect: false },
                _ => Class::Fatal,
            },
            OciDistributionError::RequestError(r) => {
                let chain = error_chain(r);
                if chain.contains("certificate") || chain.contains("UnknownIssuer") {
                    // Retrying will not change the certificate.
                    Class::Tls
                } else if r.is_connect() {
                    Class::Transient { connect: true }
                } else if r.is_timeout() || r.is_request() || r.is_body() || r.is_decode() {
                    Class::Transient { connect: false }
                } else {
                    Class::Fatal
                }
            }
            OciDistributionError::IoError(_) => Class::Transient { connect: false },
            _ => Class::Fatal,
        },
        OpError::Io(e) if is_net_error(e) || e.kind() == io::ErrorKind::UnexpectedEof => {
            Class::Transient { connect: false }
        }
        OpError::Io(_) | OpError::Content(_) => Class::Fatal,
        OpError::Timeout(_) => Class::Transient { connect: false },
    }
}

/// The message of an operation error, with the underlying causes (reqwest hides the useful
/// part — "connection refused", "invalid peer certificate" — in its source chain).
fn describe(e: &OpError) -> String {
    match e {
        OpError::Oci(e) => error_chain(e),
        OpError::Io(e) => error_chain(e),
        OpError::Content(s) => s.clone(),
        OpError::Timeout(d) => format!("no answer within {} s (--request-timeout)", d.as_secs_f64()),
    }
}

fn error_chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut cur = e.source();
    while let Some(c) = cur {
        let m = c.to_string();
        if !s.contains(&m) {
            s.push_str(": ");
            s.push_str(&m);
        }
        cur = c.source();
    }
    s
}

/// One platform manifest's layers.
#[derive(Debug, Clone)]
pub(crate) struct Resolved {
    /// The pull spec that answered (a mirror or the source).
    pub image: String,
    /// Reference to that image pinned to the platform manifest.
    pub reference: Reference,
    /// Digest of the manifest the pull spec names (the index of a multi-arch image).
    pub top_digest: String,
    /// Layer digests, bottom first.
    pub layers: Vec<String>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct RawManifest {
    #[serde(default)]
    manifests: Option<Vec<IndexEntry>>,
    #[serde(default)]
    layers: Option<Vec<LayerDesc>>,
}
#[derive(Deserialize)]
struct IndexEntry {
    digest: String,
    #[serde(default)]
    platform: Option<Platform>,
}
#[derive(Deserialize)]
struct Platform {
    architecture: String,
    os: String,
}
#[derive(Deserialize)]
struct LayerDesc {
    digest: String,
}

/// `x86_64`/`amd64` → `amd64` (the OCI/Go name used in manifest lists).
pub fn go_arch(arch: &str) -> &str {
    match arch {
        "x86_64" | "amd64" => "amd64",
        "aarch64" | "arm64" => "arm64",
        a => a,
    }
}

/// `amd64`/`x86_64` → `x86_64` (the name in CoreOS file names).
pub fn coreos_arch(arch: &str) -> &str {
    match arch {
        "x86_64" | "amd64" => "x86_64",
        "aarch64" | "arm64" => "aarch64",
        a => a,
    }
}

/// Talks to registries for one [`RegistryContext`].
pub(crate) struct Fetcher<'a> {
    ctx: &'a RegistryContext,
    creds: DockerConfig,
    cred_source: CredentialSource,
    certs: Vec<Certificate>,
    clients: Mutex<HashMap<(bool, String), Client>>,
    /// Registries found to speak plain HTTP (only with `insecure`).
    http_hosts: Mutex<HashSet<String>>,
}

impl<'a> Fetcher<'a> {
    /// Reads the credentials (`--registry-config` file, else the pull secret) and the CAs.
    pub(crate) fn new(ctx: &'a RegistryContext) -> Result<Fetcher<'a>, RegistryError> {
        // reqwest is built without a bundled crypto provider: use ring, which kube already
        // uses. Err only means a provider is installed already.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let (creds, cred_source) = match &ctx.registry_config {
            Some(path) => {
                let source = CredentialSource::RegistryConfig(path.clone());
                let text =
                    crate::files::read_input_file(path, crate::files::MAX_KEY_FILE, "--registry-config")
                        .map_err(|e| RegistryError::Credentials {
                            from: source.clone(),
                            message: format!("cannot read it: {}", e.reason),
                        })?;
                let c = DockerConfig::parse(&text).map_err(|message| RegistryError::Credentials {
                    from: source.clone(),
                    message,
                })?;
                (c, source)
            }
            None => match &ctx.pull_secret {
                Some(ps) if !ps.0.trim().is_empty() => {
                    let source = CredentialSource::PullSecret;
                    let c = DockerConfig::parse(&ps.0).map_err(|message| RegistryError::Credentials {
                        from: source.clone(),
                        message,
                    })?;
                    (c, source)
                }
                _ => (DockerConfig::default(), CredentialSource::None),
            },
        };
        let mut certs = Vec::new();
        for (i, bundle) in ctx.extra_ca_pems.iter().enumerate() {
            let parsed = pem::parse_many(bundle).map_err(|e| RegistryError::Credentials {
                from: CredentialSource::None,
                message: format!("extra CA bundle #{i} is not PEM: {e}"),
            })?;
            certs.extend(
                parsed
                    .into_iter()
                    .filter(|p| p.tag() == "CERTIFICATE")
                    .map(|p| Certificate {
                        encoding: CertificateEncoding::Der,
                        data: p.into_contents(),
                    }),
            );
        }
        Ok(Fetcher {
            ctx,
            creds,
            cred_source,
            certs,
            clients: Mutex::new(HashMap::new()),
            http_hosts: Mutex::new(HashSet::new()),
        })
    }

    fn client(&self, http: bool, auth_key: &str) -> Result<Client, RegistryError> {
        let mut map = self.clients.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(c) = map.get(&(http, auth_key.to_string())) {
            return Ok(c.clone());
        }
        let config = ClientConfig {
            protocol: if http {
                ClientProtocol::Http
            } else {
                ClientProtocol::Https
            },
            accept_invalid_certificates: self.ctx.insecure,
            extra_root_certificates: self.certs.clone(),
            // Lists are resolved here, for the architecture asked for, not the running one.
            platform_resolver: None,
            // Both bounded by the request timeout: a registry that accepts the connection and
            // then says nothing must not hold a run for minutes without a word.
            connect_timeout: Some(self.request_timeout().min(Duration::from_secs(15))),
            read_timeout: Some(self.request_timeout()),
            user_agent: concat!("agent-day2/", env!("CARGO_PKG_VERSION")),
            // Proxies: none set here, so reqwest reads HTTPS_PROXY/HTTP_PROXY/NO_PROXY.
            ..Default::default()
        };
        let c = Client::try_from(config).map_err(|e| RegistryError::Unavailable {
            image: String::new(),
            message: format!(
                "cannot set up the registry client: {}",
                describe(&OpError::Oci(e))
            ),
        })?;
        map.insert((http, auth_key.to_string()), c.clone());
        Ok(c)
    }

    /// Runs `op` against `image` (one pull spec, no mirrors), with the credentials for its
    /// repository, retrying transient failures with exponential backoff; with `insecure`, a
    /// registry that fails the HTTPS connection is tried over plain HTTP (as `oc --insecure`).
    pub(crate) async fn attempt<T, F, Fut>(&self, image: &str, op: F) -> Result<T, RegistryError>
    where
        F: FnMut(Client, RegistryAuth, Reference) -> Fut,
        Fut: Future<Output = Result<T, OpError>>,
    {
        self.attempt_with(image, true, op).await
    }

    /// `--request-timeout` or [`super::types::DEFAULT_REQUEST_TIMEOUT`].
    fn request_timeout(&self) -> Duration {
        self.ctx
            .request_timeout
            .unwrap_or(super::types::DEFAULT_REQUEST_TIMEOUT)
    }

    /// [`Fetcher::attempt`]; `bounded`: the whole `op` must finish within the request timeout
    /// (manifests). Layer streams pass false: they may take long, and the client's read timeout
    /// (the same value) bounds each wait for bytes instead.
    pub(crate) async fn attempt_with<T, F, Fut>(
        &self,
        image: &str,
        bounded: bool,
        mut op: F,
    ) -> Result<T, RegistryError>
    where
        F: FnMut(Client, RegistryAuth, Reference) -> Fut,
        Fut: Future<Output = Result<T, OpError>>,
    {
        let reference = Reference::try_from(image).map_err(|e| RegistryError::InvalidReference {
            image: image.to_string(),
            message: e.to_string(),
        })?;
        let registry = reference.registry().to_string();
        let repo = format!("{}/{}", reference.registry(), reference.repository());
        let auth = self.creds.auth_for(&repo);
        let had_credentials = !matches!(auth, RegistryAuth::Anonymous);
        let auth_key = match &auth {
            RegistryAuth::Anonymous => String::new(),
            RegistryAuth::Basic(u, p) => hex::encode(Sha256::digest(format!("basic\0{u}\0{p}"))),
            RegistryAuth::Bearer(t) => hex::encode(Sha256::digest(format!("bearer\0{t}"))),
        };
        let policy = &self.ctx.retry;
        let mut delay = policy.initial_backoff;
        let mut tries = 0u32;
        loop {
            tries += 1;
            let http = self
                .http_hosts
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .contains(&registry);
            let client = self.client(http, &auth_key)?;
            client
                .store_auth_if_needed(reference.resolve_registry(), &auth)
                .await;
            let fut = op(client, auth.clone(), reference.clone());
            let res = if bounded {
                let limit = self.request_timeout();
                tokio::time::timeout(limit, fut)
                    .await
                    .unwrap_or(Err(OpError::Timeout(limit)))
            } else {
                fut.await
            };
            let err = match res {
                Ok(v) => return Ok(v),
                Err(e) => e,
            };
            let class = classify(&err);
            tracing::debug!(image, try_ = tries, error = %describe(&err), "registry request failed");
            match class {
                Class::Transient { connect } => {
                    if connect && self.ctx.insecure && !http {
                        // The anchor's --insecure: HTTPS first, then plain HTTP.
                        self.http_hosts
                            .lock()
                            .unwrap_or_else(|p| p.into_inner())
                            .insert(registry.clone());
                        // Not a failed try: the same request again, over HTTP.
                        tries -= 1;
                        continue;
                    }
                    if tries >= policy.attempts.max(1) {
                        return Err(RegistryError::Unavailable {
                            image: image.to_string(),
                            message: format!(
                                "registry {registry} did not answer usably after {tries} tries: {}",
                                describe(&err)
                            ),
                        });
                    }
                    // On stderr at every verbosity: a stalled registry must not look like a hang.
                    crate::say!(
                        "waiting for registry {registry} (retry {tries}/{} in {} s): {}",
                        policy.attempts.max(1) - 1,
                        delay.as_secs_f64(),
                        crate::text::escape_for_display(&describe(&err), 300)
                    );
                    tokio::time::sleep(delay).await;
                    delay = (delay * 2).min(policy.max_backoff);
                }
                Class::Refused(status) => {
                    return Err(RegistryError::Refused {
                        registry,
                        image: image.to_string(),
                        status,
                        credentials: self.cred_source.clone(),
                        had_credentials,
                    })
                }
                Class::NotFound => {
                    return Err(RegistryError::NotFound {
                        image: image.to_string(),
                        message: describe(&err),
                    })
                }
                Class::Tls => {
                    return Err(RegistryError::Tls {
                        registry,
                        image: image.to_string(),
                        message: describe(&err),
                    })
                }
                Class::Fatal => {
                    return Err(RegistryError::BadContent {
                        image: image.to_string(),
                        message: describe(&err),
                    })
                }
            }
        }
    }

    /// Finds the manifest of `image` for `arch` through the mirrors (each in order, then the
    /// source unless NeverContactSource) and returns its layers.
    pub(crate) async fn resolve(&self, image: &str, arch: &str) -> Result<Resolved, RegistryError> {
        let candidates =
            pull_candidates(image, &self.ctx.mirrors).map_err(|message| RegistryError::InvalidReference {
                image: image.to_string(),
                message,
            })?;
        let mut failures: Vec<(PullCandidate, RegistryError)> = Vec::new();
        for c in &candidates {
            match self.resolve_one(&c.image, arch).await {
                Ok(r) => return Ok(r),
                // A manifest list without our platform is the image's answer, not the mirror's.
                Err(e @ RegistryError::NoPlatform { .. }) => return Err(e),
                Err(e) => {
                    tracing::info!(image, candidate = %c.image, "{e}");
                    failures.push((c.clone(), e));
                }
            }
        }
        if failures.len() == 1 {
            return Err(failures.remove(0).1);
        }
        Err(RegistryError::AllSourcesFailed {
            image: image.to_string(),
            attempts: failures
                .into_iter()
                .map(|(c, e)| {
                    let what = if c.mirror { "mirror" } else { "source" };
                    format!("{what} {}: {e}", c.image)
                })
                .collect(),
        })
    }

    async fn resolve_one(&self, image: &str, arch: &str) -> Result<Resolved, RegistryError> {
        let (body, top_digest) = self
            .attempt(image, |client, auth, reference| async move {
                client
                    .pull_manifest_raw(&reference, &auth, ACCEPT)
                    .await
                    .map(|(b, d)| (b.to_vec(), d))
                    .map_err(OpError::Oci)
            })
            .await?;
        let bad = |message: String| RegistryError::BadContent {
            image: image.to_string(),
            message,
        };
        let raw: RawManifest =
            serde_json::from_slice(&body).map_err(|e| bad(format!("manifest is not JSON: {e}")))?;
        let reference = Reference::try_from(image).map_err(|e| RegistryError::InvalidReference {
            image: image.to_string(),
            message: e.to_string(),
        })?;
        let (platform_digest, raw) = match raw.manifests {
            Some(list) => {
                let want = go_arch(arch);
                let available: Vec<String> = list
                    .iter()
                    .filter_map(|m| {
                        m.platform
                            .as_ref()
                            .map(|p| format!("{}/{}", p.os, p.architecture))
                    })
                    .collect();
                let Some(entry) = list.iter().find(|m| {
                    m.platform
                        .as_ref()
                        .is_some_and(|p| p.os == "linux" && p.architecture == want)
                }) else {
                    return Err(RegistryError::NoPlatform {
                        image: image.to_string(),
                        platform: format!("linux/{want}"),
                        available,
                    });
                };
                let digest = entry.digest.clone();
                let pinned = reference.clone_with_digest(digest.clone()).whole();
                let (body, _) = self
                    .attempt(&pinned, |client, auth, reference| async move {
                        client
                            .pull_manifest_raw(&reference, &auth, ACCEPT)
                            .await
                            .map(|(b, d)| (b.to_vec(), d))
                            .map_err(OpError::Oci)
                    })
                    .await?;
                let raw: RawManifest = serde_json::from_slice(&body)
                    .map_err(|e| bad(format!("manifest for linux/{want} is not JSON: {e}")))?;
                if raw.manifests.is_some() {
                    return Err(bad(format!("the linux/{want} entry is itself a manifest list")));
                }
                (digest, raw)
            }
            None => (top_digest.clone(), raw),
        };
        let layers = raw
            .layers
            .ok_or_else(|| bad("manifest has no layers (not an image manifest)".into()))?
            .into_iter()
            .map(|l| l.digest)
            .collect();
        Ok(Resolved {
            image: image.to_string(),
            reference: reference.clone_with_digest(platform_digest),
            top_digest,
            layers,
        })
    }

    /// Streams layer `digest` of `resolved` into `read` (run on a blocking thread, given the
    /// decompressed tar), retrying transient failures from the start of the layer.
    pub(crate) async fn read_layer<T, F>(
        &self,
        resolved: &Resolved,
        digest: &str,
        read: F,
    ) -> Result<T, RegistryError>
    where
        T: Send + 'static,
        F: Fn(Box<dyn Read>) -> io::Result<T> + Send + Sync + Clone + 'static,
    {
        let pinned = resolved.reference.whole();
        self.attempt_with(&pinned, false, |client, _auth, reference| {
            let read = read.clone();
            let digest = digest.to_string();
            async move {
                let sized = client
                    .pull_blob_stream(&reference, digest.as_str())
                    .await
                    .map_err(OpError::Oci)?;
                let (tx, rx) = tokio::sync::mpsc::channel::<io::Result<bytes::Bytes>>(16);
                let task = tokio::task::spawn_blocking(move || {
                    let r = decompress(ChannelReader::new(rx))?;
                    read(r)
                });
                let mut stream = sized.stream;
                while let Some(chunk) = stream.next().await {
                    let failed = chunk.is_err();
                    // The reader hung up: it has what it needs.
                    if tx.send(chunk).await.is_err() || failed {
                        break;
                    }
                }
                drop(tx);
                task.await
                    .map_err(|e| OpError::Content(format!("layer reader stopped: {e}")))?
                    .map_err(OpError::Io)
            }
        })
        .await
    }
}
