//! The simulated Kubernetes API server.
//!
//! Pure parts (H1b): [`validation`] (field validation and pruning), [`authz`] (who may do what),
//! [`csr_signer`] (kubelet CSR checks and signing). Server parts: [`server`] (HTTP, auth,
//! REST verbs), [`store`], [`registry`], [`discovery`], [`table`], [`selectors`], [`status`],
//! [`exec`] (pod exec over WebSocket), [`mcs`] (the machine-config server stand-in) and [`up`] (the `agent-day2-sim up` command).

pub mod authz;
pub mod cp_kubelet;
pub mod csr_signer;
pub mod discovery;
pub mod exec;
pub mod mcs;
pub mod real;
pub mod registry;
pub mod selectors;
pub mod server;
pub mod status;
pub mod store;
pub mod table;
pub mod up;
pub mod validation;
