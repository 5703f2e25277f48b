//! A resolved connection that can be resolved again: the commands that watch for an hour
//! (`approve --watch`, `monitor`) read the kubeconfig again once after a 401 (an `oc login`
//! token expires after 24 h), without carrying the connection flags into their loops.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use super::target::KubeTarget;
use crate::error::Result;

/// How a connection is resolved from its sources (kubeconfig, flags, environment), as often
/// as needed. Made by the flags' owner (`cli::kube_flags`).
pub type Resolve = Arc<dyn Fn() -> Pin<Box<dyn Future<Output = Result<KubeTarget>> + Send>> + Send + Sync>;

/// The resolved [`KubeTarget`] and the way to resolve it again.
pub struct Connection {
    target: KubeTarget,
    resolve: Resolve,
}

impl Connection {
    /// Resolves the connection for the first time. Errors as the resolver's: a kubeconfig that
    /// cannot be read or names nothing usable (exit 4), bad connection flags (exit 2).
    pub async fn open(resolve: Resolve) -> Result<Connection> {
        let target = resolve().await?;
        tracing::info!(server = %target.server, context = ?target.context, "connecting");
        Ok(Connection { target, resolve })
    }

    /// The connection as last resolved.
    pub fn target(&self) -> &KubeTarget {
        &self.target
    }

    /// Resolves again (after a 401: the kubeconfig may hold a new token by now) and returns the
    /// new target. Errors as [`Connection::open`]'s.
    pub async fn reconnect(&mut self) -> Result<KubeTarget> {
        self.target = (self.resolve)().await?;
        Ok(self.target.clone())
    }
}
