//! `migrate`: carry node 0's ephemeral assisted-service data (database, CRs, credentials, logs)
//! onto cluster 0 (user story 001; docs/migrate.md).
//!
//! Flow: `export` reads node 0's REST v2 API and a PostgreSQL dump into a bundle directory
//! ([`bundle`]); `import` checks the bundle and restores it on the current context in the order of
//! docs/migrate.md "The order on cluster 0" ([`import`]); it ends with a completion record
//! ([`record`]) that `wait` (run on node 0 before its reboot, see [`unit`]) and `status` read.
//!
//! Module map (one idea each): [`bundle`] the on-disk format, manifest and checksums;
//! [`dump`] reading a `pg_dump --data-only` text (COPY blocks: row counts, schema version, filters);
//! [`crs`] the CRs recreated from what the service holds (pure); [`copied`] option 1's CRs copied
//! from node 0's API server (pure); [`export_kube`] option 1's export; [`export`] the REST reads and
//! the dump sources; [`exec`] pod exec over the API (what `oc exec -i` does); [`import`] the
//! ordered restore; [`record`] the completion record; [`wait`], [`status`], [`unit`]; [`plan`]
//! each subcommand's flags, read once before anything else (the one file here that sees the
//! clap types).

pub mod bundle;
pub mod copied;
pub mod copy;
pub mod crs;
pub mod dump;
pub mod exec;
pub mod export;
pub mod export_kube;
pub mod import;
pub mod plan;
pub mod record;
pub mod restore;
pub mod status;
pub mod unit;
pub mod wait;

use crate::error::Error;
use crate::kube::Resolve;

/// Runs one migrate subcommand from its plan ([`plan::Command::from_args`]); returns the exit
/// code (docs/exit-codes.md). `resolve` makes the connection to cluster 0 from the global connection
/// flags ([`crate::kube::Resolve`]); only import, wait and status call it, once, after the bundle's local
/// checks, so that an invalid bundle (exit 3) is reported before an unusable kubeconfig (exit 4),
/// and export and node0-unit (on node 0) need no kubeconfig at all.
///
/// Namespace of import/wait/status (the CRs and the completion record): the global
/// `-n/--namespace` when given (non-empty), else the cluster's name from the bundle
/// ([`import::namespace_for`], the one place of that rule). The kubeconfig context's namespace is
/// deliberately not used: a migration must land in the same namespace whichever context runs
/// `import`, `wait` (on node 0) and `status`, and `wait` must find the record `import` wrote
/// (docs/migrate.md).
pub async fn run(resolve: Resolve, cmd: &plan::Command) -> Result<u8, Error> {
    match cmd {
        plan::Command::Export(p) => match &p.node0 {
            plan::Node0::Rest { from, token_file } => export::run(p, from, token_file.as_ref()).await,
            plan::Node0::Kube(k) => export_kube::run(p, k).await,
        },
        plan::Command::Import(p) => import::run(resolve, p).await,
        plan::Command::Wait(p) => wait::run(resolve, p).await,
        plan::Command::Status(p) => status::run(resolve, p).await,
        plan::Command::Node0Unit(p) => unit::run(p),
    }
}
