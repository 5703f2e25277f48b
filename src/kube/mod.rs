//! The Kubernetes API layer: the resolved connection ([`KubeTarget`]), how a failed request is
//! said to the operator ([`classify`], exit codes by kind), and how the plugin writes
//! ([`write`]: `fieldValidation=Strict`). Below every command and every cluster fact; it imports
//! only the leaves ([`crate::error`], [`crate::text`]).

pub mod connection;
pub mod errors;
pub mod target;
pub mod write;

pub use connection::{Connection, Resolve};
pub use errors::{classify, connect_failure, error_chain, with_deadline};
pub use target::KubeTarget;
