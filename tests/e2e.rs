//! The end-to-end tier: one test binary for every test that runs the built binaries against a
//! simulated cluster in a private network namespace, or against a real component (the real
//! kube-apiserver, assisted-service, krew). Each file beside this one is a module of it, named
//! as the file (`cargo test --test e2e approve::` runs tests/approve.rs). docs/tests.md has the
//! tiers and what each test needs; the tests that need no cluster are in tests/offline.rs.
//!
//! One binary instead of one per file: the workspace links 2 test binaries instead of 26, and
//! the helpers of tests/support/ are compiled once.

#[macro_use]
mod support;

mod add_nodes;
mod add_nodes_inputs;
mod approve;
mod approve_binding;
mod completion;
mod ignition;
mod info;
mod krew;
mod migrate;
mod migrate_export;
mod migrate_real;
mod monitor;
mod plugin_dispatch;
mod real_apiserver;
mod real_node;
mod registry;
mod registry_timeout;

/// The name libtest gives test `name` of the module at `module_path` (`module_path!()`):
/// `e2e::registry` + `x` gives `registry::x`. For a test that runs one test of this binary again
/// in a child process (`--exact`).
pub fn test_name(module_path: &str, name: &str) -> String {
    let module = module_path.split_once("::").map_or("", |(_, m)| m);
    if module.is_empty() {
        name.to_string()
    } else {
        format!("{module}::{name}")
    }
}
