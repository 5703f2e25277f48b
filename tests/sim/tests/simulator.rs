//! The simulator's own tests, one binary (docs/tests.md "Tiers"): each file beside this one is
//! a module of it, named as the file (`cargo test -p agent-day2-sim --test simulator boot::`).
//! Most run the simulated cluster in a private network namespace (root, as CI has).

mod boot;
mod exec;
mod kube_client;
mod kubectl;
mod mcs;
mod node0;
mod postgres_cmd;
mod registry;
mod seed;
