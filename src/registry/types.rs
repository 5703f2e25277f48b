//! The registry layer's vocabulary: where and how to read ([`RegistryContext`], [`RetryPolicy`]),
//! what went wrong ([`RegistryError`]) and the release's component images ([`ComponentImages`]).

use std::path::PathBuf;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::cluster::{ClusterModel, Mirrors, PullSecret};
use crate::error::{Error, ResourceRef};

/// The path of the ImageStream listing a release's component images, inside the release image.
pub const IMAGE_REFERENCES: &str = "release-manifests/image-references";

/// Largest `image-references` we accept (real ones are ~100 KiB).
pub(super) const IMAGE_REFERENCES_LIMIT: u64 = 16 << 20;

/// Retry policy for transient registry failures.
#[derive(Debug, Clone)]
pub struct RetryPolicy {
    /// Tries per request in total (≥ 1). Default 5.
    pub attempts: u32,
    /// Wait before the second try; doubled after each failure. Default 500 ms.
    pub initial_backoff: Duration,
    /// Upper bound of the wait. Default 8 s.
    pub max_backoff: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy {
            attempts: 5,
            initial_backoff: Duration::from_millis(500),
            max_backoff: Duration::from_secs(8),
        }
    }
}

/// Everything needed to read images the way the cluster would.
#[derive(Debug, Clone, Default)]
pub struct RegistryContext {
    /// The cluster's pull secret (`.dockerconfigjson`); None or empty → anonymous.
    pub pull_secret: Option<PullSecret>,
    /// Mirrors from the cluster (see [`mirrors`] for the rules).
    pub mirrors: Mirrors,
    /// Extra trusted CAs, PEM (bundles allowed): the cluster's registry CAs
    /// (Image.config `additionalTrustedCA`) and the Proxy trust bundle.
    pub extra_ca_pems: Vec<String>,
    /// `--registry-config FILE`: a dockerconfigjson used instead of the pull secret.
    pub registry_config: Option<PathBuf>,
    /// `--insecure`: do not verify registry certificates, and use plain HTTP for a registry
    /// whose HTTPS connection fails.
    pub insecure: bool,
    /// The architecture whose manifest is taken from a multi-arch release (x86_64/amd64,
    /// aarch64/arm64, ppc64le, s390x).
    pub arch: String,
    /// Cache root (holds `releases/`); None → `$XDG_CACHE_HOME/agent-day2`, else
    /// `$HOME/.cache/agent-day2`.
    pub cache_dir: Option<PathBuf>,
    /// Retries for transient failures.
    pub retry: RetryPolicy,
    /// `--request-timeout`: bound of each registry request (a manifest read; for a layer
    /// stream, the longest wait for the next bytes). None → [`DEFAULT_REQUEST_TIMEOUT`].
    pub request_timeout: Option<Duration>,
}

/// Bound of one registry request when `--request-timeout` is not given: 30 s, as `info` uses
/// for each API read. A stalled registry then costs at most 5 tries of this plus the backoff,
/// with a `waiting for registry ...` line on stderr before each retry.
pub const DEFAULT_REQUEST_TIMEOUT: Duration = Duration::from_secs(30);

impl RegistryContext {
    /// The context for `model`: its pull secret, mirrors, registry CAs and trust bundle, the
    /// control plane's architecture, plus the user's `--registry-config` and `--insecure`.
    pub fn from_cluster(model: &ClusterModel, registry_config: Option<PathBuf>, insecure: bool) -> Self {
        let mut extra_ca_pems: Vec<String> = model.mirrors.registry_cas.values().cloned().collect();
        if let Some(pem) = model.trust_bundle.as_ref().and_then(|t| t.pem.clone()) {
            extra_ca_pems.push(pem);
        }
        RegistryContext {
            pull_secret: Some(model.pull_secret.clone()),
            mirrors: model.mirrors.clone(),
            extra_ca_pems,
            registry_config,
            insecure,
            arch: model.architecture.control_plane.clone(),
            cache_dir: None,
            retry: RetryPolicy::default(),
            request_timeout: None,
        }
    }
}

/// Where credentials came from, for messages.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CredentialSource {
    /// The cluster's pull secret.
    PullSecret,
    /// `--registry-config FILE`.
    RegistryConfig(PathBuf),
    /// No credentials at all.
    None,
}

impl std::fmt::Display for CredentialSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CredentialSource::PullSecret => {
                f.write_str("the cluster's pull secret (Secret openshift-config/pull-secret)")
            }
            CredentialSource::RegistryConfig(p) => write!(f, "--registry-config {}", p.display()),
            CredentialSource::None => f.write_str("no credentials"),
        }
    }
}

/// Registry failures. Each names the image (and registry) and says what to do.
#[derive(Debug, thiserror::Error)]
pub enum RegistryError {
    /// Not a pull spec.
    #[error("{image}: not a valid image reference: {message}")]
    InvalidReference { image: String, message: String },
    /// The credentials file or pull secret cannot be used.
    #[error("{from}: {message}")]
    Credentials { from: CredentialSource, message: String },
    /// 401/403.
    #[error(
        "registry {registry} refused {} for {image} ({status}); {}",
        if *had_credentials { format!("the credentials from {credentials}") } else { format!("anonymous access ({credentials} has no entry for it)") },
        if matches!(credentials, CredentialSource::RegistryConfig(_)) {
            "fix the entry for this registry in that file"
        } else {
            "add or fix the entry for this registry in the pull secret, or pass --registry-config FILE with working credentials"
        }
    )]
    Refused {
        registry: String,
        image: String,
        status: String,
        credentials: CredentialSource,
        had_credentials: bool,
    },
    /// 404.
    #[error("{image} not found in its registry: {message}")]
    NotFound { image: String, message: String },
    /// Retries exhausted or the client could not be set up.
    #[error(
        "cannot read {image}: {message} (check the registry, its CA, HTTPS_PROXY/NO_PROXY, or --insecure)"
    )]
    Unavailable { image: String, message: String },
    /// The registry's certificate is not trusted.
    #[error(
        "registry {registry} (for {image}): its TLS certificate is not trusted: {message}; add its CA to the cluster \
         (Image.config additionalTrustedCA or the proxy trust bundle), or pass --insecure"
    )]
    Tls {
        registry: String,
        image: String,
        message: String,
    },
    /// Every mirror and the source failed.
    #[error("cannot read {image} from any of its locations: {}", attempts.join("; "))]
    AllSourcesFailed { image: String, attempts: Vec<String> },
    /// A manifest list without the platform asked for.
    #[error("{image} has no {platform} image (it has: {})", if available.is_empty() { "none".to_string() } else { available.join(", ") })]
    NoPlatform {
        image: String,
        platform: String,
        available: Vec<String>,
    },
    /// The release payload lacks a tag we need.
    #[error("release {release_image}: image-references has no tag {tag:?}; is this an OpenShift 4.18+ release payload?")]
    MissingTag { release_image: String, tag: String },
    /// The registry answered with something we cannot use.
    #[error("{image}: {message}")]
    BadContent { image: String, message: String },
    /// Local file trouble (cache, ISO destination).
    #[error("{path}: {source}")]
    Io {
        path: String,
        #[source]
        source: std::io::Error,
    },
}

impl From<RegistryError> for Error {
    fn from(e: RegistryError) -> Error {
        match e {
            RegistryError::Io { path, source } => Error::Io { path, source },
            RegistryError::InvalidReference { .. } => Error::Usage(e.to_string()),
            // A file's or a Secret's content, not a flag: invalid input (exit 3), as the
            // help and docs/exit-codes.md say of a file a flag names.
            RegistryError::Credentials { from, message } => Error::InvalidInput {
                field: from.to_string(),
                message,
            },
            other => Error::Api {
                verb: "read".into(),
                resource: ResourceRef {
                    kind: "the release payload".into(),
                    namespace: None,
                    name: None,
                },
                message: other.to_string(),
            },
        }
    }
}

/// The agent-installer component images of a release (pull specs as the payload names them;
/// nodes reach them through the cluster's registries.conf mirrors).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ComponentImages {
    /// `agent-installer-api-server`.
    pub api_server: String,
    /// `agent-installer-node-agent`.
    pub node_agent: String,
    /// `agent-installer-orchestrator`.
    pub orchestrator: String,
    /// `agent-installer-utils`.
    pub utils: String,
    /// `machine-os-images` (holds `/coreos/coreos-<arch>.iso`); None when the payload has none.
    pub machine_os_images: Option<String>,
}

/// Tag names in `image-references`.
pub mod tags {
    /// assisted-service.
    pub const API_SERVER: &str = "agent-installer-api-server";
    /// The discovery agent.
    pub const NODE_AGENT: &str = "agent-installer-node-agent";
    /// assisted-installer-controller.
    pub const ORCHESTRATOR: &str = "agent-installer-orchestrator";
    /// agent-installer-client and friends.
    pub const UTILS: &str = "agent-installer-utils";
    /// The CoreOS ISOs.
    pub const MACHINE_OS_IMAGES: &str = "machine-os-images";
}

#[derive(Deserialize)]
struct ImageStream {
    spec: ImageStreamSpec,
}
#[derive(Deserialize)]
struct ImageStreamSpec {
    #[serde(default)]
    tags: Vec<TagRef>,
}
#[derive(Deserialize)]
struct TagRef {
    name: String,
    #[serde(default)]
    from: Option<ObjectRef>,
}
#[derive(Deserialize)]
struct ObjectRef {
    name: String,
}

/// Parses an `image-references` ImageStream (`spec.tags[].name` → `from.name`). Errors name the
/// missing tag.
pub fn parse_image_references(release_image: &str, json: &[u8]) -> Result<ComponentImages, RegistryError> {
    let is: ImageStream = serde_json::from_slice(json).map_err(|e| RegistryError::BadContent {
        image: release_image.to_string(),
        message: format!("{IMAGE_REFERENCES} is not an ImageStream: {e}"),
    })?;
    let get = |tag: &str| {
        is.spec
            .tags
            .iter()
            .find(|t| t.name == tag)
            .and_then(|t| t.from.as_ref())
            .map(|f| f.name.clone())
            .filter(|n| !n.is_empty())
    };
    let need = |tag: &str| {
        get(tag).ok_or_else(|| RegistryError::MissingTag {
            release_image: release_image.to_string(),
            tag: tag.to_string(),
        })
    };
    Ok(ComponentImages {
        api_server: need(tags::API_SERVER)?,
        node_agent: need(tags::NODE_AGENT)?,
        orchestrator: need(tags::ORCHESTRATOR)?,
        utils: need(tags::UTILS)?,
        machine_os_images: get(tags::MACHINE_OS_IMAGES),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unusable_credentials_are_invalid_input_naming_their_source() {
        let e: Error = RegistryError::Credentials {
            from: CredentialSource::RegistryConfig("rc.json".into()),
            message: "not a dockerconfigjson document".into(),
        }
        .into();
        assert_eq!(e.exit_code(), crate::error::exit::INVALID_INPUT);
        assert!(
            e.to_string()
                .starts_with("--registry-config rc.json: not a dockerconfigjson"),
            "{e}"
        );
    }
}
