//! agent-day2-sim: a simulated OpenShift cluster (a kube API over HTTPS that the real kubectl
//! accepts) and simulated day-2 nodes, for agent-day2's tests and demo.
// A test tool: its HTTP handlers return whole error responses, and its parsers tuples; named
// types for each would not make it clearer.
#![allow(clippy::result_large_err, clippy::type_complexity, clippy::result_unit_err)]

pub mod api;
pub mod baseiso;
pub mod boot;
pub mod cluster0svc;
pub mod files;
pub mod harness;
pub mod kubeconfig;
pub mod netns;
pub mod node0;
pub mod node0kube;
pub mod node0schema;
pub mod noderun;
pub mod pki;
pub mod postgres;
pub mod registry;
pub mod scenario;
pub mod seed;
pub mod upstream;
