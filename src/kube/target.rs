//! The resolved connection a command works through (built by `KubeFlags::resolve`).

use std::time::Duration;

/// The resolved connection: a ready client plus what messages need to name.
#[derive(Clone)]
pub struct KubeTarget {
    /// The client; all requests of a command go through it.
    pub client: kube::Client,
    /// API server URL as used (after `--server`), for "cannot reach ... at URL".
    pub server: String,
    /// Namespace from `-n`, else the context's, else `default`.
    pub namespace: String,
    /// The kubeconfig context used, if any.
    pub context: Option<String>,
    /// Who we act as, as far as we can tell locally (`--as`, else the kubeconfig user entry);
    /// the API server's 403 message names the real user and wins over this.
    pub user_hint: Option<String>,
    /// The proxy used for API traffic, if any.
    pub proxy: Option<String>,
    /// `--request-timeout` as given (None: flag absent or `0`).
    pub request_timeout: Option<Duration>,
    /// Whether `--request-timeout` was given at all (`0` included): commands that pick their
    /// own default deadline (`info`) keep the user's choice then.
    pub request_timeout_given: bool,
    /// Deadline for each single read of [`crate::cluster::fetch`] and the permission check,
    /// enforced around the request (exit 5 naming the request). None: only the client's own
    /// timeouts apply. `resolve` sets it to `request_timeout`; `info` to its default.
    pub deadline: Option<Duration>,
}

impl std::fmt::Debug for KubeTarget {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KubeTarget")
            .field("server", &self.server)
            .field("namespace", &self.namespace)
            .field("context", &self.context)
            .field("user_hint", &self.user_hint)
            .field("proxy", &self.proxy)
            .field("deadline", &self.deadline)
            .finish_non_exhaustive()
    }
}
