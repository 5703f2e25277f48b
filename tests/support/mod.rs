//! Helpers of the end-to-end tier (tests/e2e.rs): the simulated cluster and the plugin's runs
//! (`cluster`, with the `require_netns!` macro), a local registry (`registry`), node-token
//! Secrets as other tools write them (`tokens`) and upstream data found on this machine
//! (`upstream`). Each test module takes what it needs with `use crate::support::…`.

#[macro_use]
pub mod cluster;
pub mod registry;
pub mod tokens;
pub mod upstream;
