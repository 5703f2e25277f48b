//! The tier of tests that need no cluster, no network namespace and no root: the command line,
//! the CSR checklist's cases and fuzzing, `--help` snapshots, the house's layering, the ISO
//! embedding, nodes-config validation, the RBAC roles and the README's claims. Each file beside
//! this one is a module of it, named as the file (`cargo test --test offline house::`).
//! docs/tests.md has the tiers; the end-to-end tests are in tests/e2e.rs.

mod csr_support;

mod cli;
mod cluster_model;
mod csr_cases;
mod csr_fuzz;
mod help;
mod house;
mod iso_embed;
mod nodes_config;
mod rbac;
mod readme;
