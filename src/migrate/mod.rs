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
//! [`crs`] the CRs recreated from what the service holds (pure); [`export`] the REST reads and
//! the dump sources; [`exec`] pod exec over the API (what `oc exec -i` does); [`import`] the
//! ordered restore; [`record`] the completion record; [`wait`], [`status`], [`unit`]; [`plan`] each subcommand's flags,
//! read once before anything else (the one file here that sees the clap types).

pub mod bundle;
pub mod crs;
pub mod dump;
pub mod exec;
pub mod export;
pub mod import;
pub mod plan;
pub mod record;
pub mod restore;
pub mod status;
pub mod unit;
pub mod wait;

pub use crate::cli::migrate::{
    ExportArgs, ImportArgs, MigrateArgs, MigrateCommand, StatusArgs, UnitArgs, WaitArgs,
};
use crate::error::Error;
use crate::kube_flags::KubeFlags;

/// Runs one migrate subcommand; returns the exit code (docs/exit-codes.md).
///
/// Namespace of import/wait/status (the CRs and the completion record): the global
/// `-n/--namespace` of [`KubeFlags`] when given (non-empty), else the cluster's name from the
/// bundle ([`import::default_namespace`]). The kubeconfig context's namespace is deliberately
/// not used: a migration must land in the same namespace whichever context runs `import`,
/// `wait` (on node 0) and `status`, and `wait` must find the record `import` wrote.
pub async fn run(kube: &KubeFlags, args: &MigrateArgs) -> Result<u8, Error> {
    match &args.command {
        MigrateCommand::Export(a) => export::run(&plan::Export::from_args(a)?).await,
        MigrateCommand::Import(a) => import::run(kube, a).await,
        MigrateCommand::Wait(a) => wait::run(kube, a).await,
        MigrateCommand::Status(a) => status::run(kube, a).await,
        MigrateCommand::Node0Unit(a) => unit::run(&plan::Unit::from_args(kube, a)?),
    }
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use crate::cli::{Cli, Command};

    fn parse(args: &[&str]) -> Cli {
        let argv = std::iter::once("kubectl-agent_day2").chain(args.iter().copied());
        Cli::try_parse_from(argv).unwrap_or_else(|e| panic!("{args:?}: {e}"))
    }

    /// `-n NS` and `--namespace NS` (the global flag, before or after the subcommand) give the
    /// migration namespace of import, wait and status; without them it is unset, so the
    /// bundle's cluster name applies and not the kubeconfig context's namespace.
    #[test]
    fn namespace_is_the_global_flag_short_or_long() {
        for args in [
            &["migrate", "import", "./b", "-n", "ns1"][..],
            &["migrate", "import", "-n", "ns1", "./b", "--dry-run"],
            &["-n", "ns1", "migrate", "wait", "./b"],
            &["migrate", "wait", "./b", "--namespace", "ns1", "--timeout", "10s"],
            &["migrate", "status", "./b", "-n", "ns1", "-o", "json"],
            &["--namespace=ns1", "migrate", "status", "./b"],
        ] {
            let cli = parse(args);
            assert!(matches!(cli.command, Command::Migrate(_)), "{args:?}");
            assert_eq!(cli.kube.namespace.as_deref(), Some("ns1"), "{args:?}");
        }
        for sub in ["import", "wait", "status"] {
            let cli = parse(&["migrate", sub, "./b"]);
            assert_eq!(cli.kube.namespace, None, "{sub}");
        }
    }
}
