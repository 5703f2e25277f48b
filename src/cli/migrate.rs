//! The clap types of `migrate` and its subcommands (turned into plans by
//! [`crate::migrate::plan::Command::from_args`], run by [`crate::migrate::run`]).

use std::path::PathBuf;

use clap::{Args, Subcommand, ValueHint};

use crate::output::OutputFormat;

/// Default `--kubeconfig` of the unit: a file made for the wait alone (docs/permissions.md
/// "migrate wait on node 0", role agent-day2-migrate-wait), beside the default bundle directory.
pub const UNIT_KUBECONFIG_PATH: &str = "/var/lib/agent-day2/migrate-wait.kubeconfig";

/// `migrate` and its subcommands.
#[derive(Debug, Args)]
#[command(after_help = MIGRATE_AFTER)]
pub struct MigrateArgs {
    #[command(subcommand)]
    pub command: MigrateCommand,
}

/// The migrate subcommands.
#[derive(Debug, Subcommand)]
pub enum MigrateCommand {
    /// Read node 0's assisted-service (REST v2, or its API server's CRs, + a PostgreSQL dump)
    /// into a bundle directory.
    #[command(after_help = EXPORT_AFTER)]
    Export(ExportArgs),
    /// Restore a bundle onto the current context (cluster 0): database, CRs, logs, record.
    #[command(after_help = IMPORT_AFTER)]
    Import(ImportArgs),
    /// Wait until cluster 0 holds the completion record of this bundle (run on node 0).
    #[command(after_help = WAIT_AFTER)]
    Wait(WaitArgs),
    /// Show the completion record and what cluster 0 holds against the bundle's counts.
    #[command(after_help = STATUS_AFTER)]
    Status(StatusArgs),
    /// Print a systemd unit for node 0 whose stop waits for the import (a proposal); -n and
    /// --context given here go into its `migrate wait`.
    #[command(name = "node0-unit", after_help = UNIT_AFTER)]
    Node0Unit(UnitArgs),
}

// Examples (kubectl style) of each command; together they show every flag (tests/help.rs).
const MIGRATE_AFTER: &str = "\
Exit status: each subcommand's --help lists its own; the codes are the plugin's (0 done, 1
unexpected, 2 bad flags, 3 invalid input, 4 cluster or node 0 access, 5 timed out).

Examples:
  # 1. On node 0: its assisted-service data into a bundle directory
  oc agent-day2 migrate export --from http://192.168.111.20:8090 --token-file user-token \\
      --db-container assisted-db --out ./bundle

  # 2. Onto cluster 0 (the current context)
  oc agent-day2 migrate import ./bundle

  # 3. On node 0, before it reboots: wait for the import
  oc agent-day2 migrate wait ./bundle --timeout 2h";

const EXPORT_AFTER: &str = "\
Exit status: 0 the bundle was written; 2 bad flags (no or several database sources, a bad
--from, --out in a missing directory, --storage not a directory or without --from-kube, pg_dump
or podman not installed); 3 invalid input (--out exists, an unreadable --token-file or
--db-dump, a dump of another install or moment, an id unfit for a file name, not exactly one
agent ClusterDeployment on node 0's API server, --storage without the cluster's credentials); 4
node 0's service, API server or database refused or failed (HTTP error, pg_dump failed, the
kubeconfig unusable);
1 the bundle could not be written, or pg_dump or podman could not be run.

Examples:
  # On node 0: the REST API, and pg_dump run with podman exec in the database container
  oc agent-day2 migrate export --from http://192.168.111.20:8090 --token-file user-token \\
      --db-container assisted-db --out ./bundle

  # Where the database is reachable: the local pg_dump
  oc agent-day2 migrate export --from http://192.168.111.20:8090 --token-file user-token \\
      --db-url postgresql://admin:PASSWORD@localhost:5432/installer --out ./bundle

  # A dump made by hand on node 0 (pg_dump --data-only, see the README)
  oc agent-day2 migrate export --from http://192.168.111.20:8090 --token-file user-token \\
      --db-dump installer.sql --out ./bundle

  # Node 0's service on node 0's own API server (kube-api mode): the CRs are copied from it
  oc agent-day2 migrate export --from-kube /opt/openshift/auth/kubeconfig \\
      --from-context admin --storage /var/lib/assisted-service --db-container assisted-db \\
      --out ./bundle";

const IMPORT_AFTER: &str = "\
Exit status: 0 imported, or already complete (--dry-run: every check passed); 2 bad flags
(--timeout, a -n that is not a DNS-1123 label); 3 an invalid bundle (missing, altered, bad CRs or
dump) or no namespace from it without -n; 4 cluster access, the CRDs missing (without
--wait-for-crds), an object that differs from the bundle's (without --force) or belongs to
another import, the database restore failed; 5 --timeout or a request timed out. --dry-run exits
with the code the import would fail with, and changes nothing.

Examples:
  # The ordered plan; nothing is changed
  oc agent-day2 migrate import ./bundle --dry-run

  # Onto cluster 0, waiting up to an hour for the multicluster engine's CRDs
  oc agent-day2 migrate import ./bundle --wait-for-crds --timeout 1h

  # Into namespace ostest (default: the cluster's name); the ClusterDeployment and
  # AgentClusterInstall stay held
  oc agent-day2 migrate import ./bundle -n ostest --keep-held

  # Replace objects that differ from the bundle's; the database through a port-forward
  oc agent-day2 migrate import ./bundle --force \\
      --db-url postgresql://admin:PASSWORD@localhost:5432/installer";

const WAIT_AFTER: &str = "\
Exit status: 0 cluster 0 holds this bundle's completion record; 2 bad flags (--timeout,
--interval, -n); 3 an invalid bundle or no namespace from it without -n; 4 the kubeconfig or
context cannot be used (failed polls are retried until --timeout); 5 --timeout reached (the last
poll's outcome is printed).

Examples:
  # On node 0: exit 0 once cluster 0 holds this bundle's completion record
  oc agent-day2 migrate wait ./bundle --timeout 2h

  # The record in namespace ostest, polled every 30 s, with the wait's own kubeconfig
  oc agent-day2 migrate wait ./bundle -n ostest --interval 30s \\
      --kubeconfig /var/lib/agent-day2/migrate-wait.kubeconfig";

const STATUS_AFTER: &str = "\
Exit status: 0 the report was printed (counts that differ or cannot be read are listed in it,
not in the status); 2 bad flags (-n); 3 an invalid bundle or no namespace from it without -n; 4
cluster access (unreachable, unauthorized, the completion record unreadable); 5 a request timed
out.

Examples:
  # The completion record, CRs and database rows: the bundle's against cluster 0's
  oc agent-day2 migrate status ./bundle

  # As JSON, for the CRs in namespace ostest
  oc agent-day2 migrate status ./bundle -n ostest -o json";

const UNIT_AFTER: &str = "\
Exit status: 0 the unit was printed; 2 bad flags (--timeout 0 or unparsable; a path that is not
absolute, or a path, -n or --context with whitespace, control characters or '%', which a unit
file cannot hold); 3 a --bundle already there that is invalid or of a single-node cluster (nothing
would hold its reboot: export during the install, import after it). Nothing is read from a cluster.

Examples:
  # The unit for the default bundle directory, kubeconfig and plugin path on node 0
  oc agent-day2 migrate node0-unit > agent-day2-migration-wait.service

  # Other paths on node 0, the record in namespace ostest; the reboot waits at most 3 hours
  oc agent-day2 migrate node0-unit -n ostest --bundle /root/bundle --kubeconfig /root/kubeconfig \\
      --plugin /root/bin/kubectl-agent_day2 --timeout 3h > agent-day2-migration-wait.service";

/// Arguments of `migrate export`.
#[derive(Debug, Args)]
pub struct ExportArgs {
    /// Node 0's assisted-service in REST mode (no API server on node 0), e.g.
    /// http://192.168.111.20:8090.
    #[arg(long, value_name = "URL", required_unless_present = "from_kube")]
    pub from: Option<String>,
    /// File holding the userAuth token of node 0's service (agent-installer-local auth).
    #[arg(long, value_name = "FILE", conflicts_with = "from_kube")]
    pub token_file: Option<PathBuf>,
    /// Kubeconfig of node 0's own API server, where its assisted-service runs in kube-api mode:
    /// the CRs are copied from there. The global connection flags (--kubeconfig, --context,
    /// --server, ...) name cluster 0: export does not use them.
    #[arg(long, value_name = "FILE", conflicts_with = "from", requires = "storage")]
    pub from_kube: Option<PathBuf>,
    /// The context of --from-kube's kubeconfig (default: its current context).
    #[arg(long, value_name = "NAME", requires = "from_kube")]
    pub from_context: Option<String>,
    /// With --from-kube: the storage directory of node 0's assisted-service (its WORK_DIR,
    /// STORAGE=filesystem), read directly: logs, Ignition configs, credentials, manifests.
    #[arg(long, value_name = "DIR", value_hint = ValueHint::DirPath, requires = "from_kube")]
    pub storage: Option<PathBuf>,
    /// Bundle directory to create (must not exist).
    #[arg(long, value_name = "DIR", value_hint = ValueHint::DirPath)]
    pub out: PathBuf,
    /// Dump the database with the local pg_dump from this URL (when run where it is reachable).
    #[arg(long, value_name = "URL", group = "db")]
    pub db_url: Option<String>,
    /// Dump the database with `podman exec NAME pg_dump` on node 0 (container assisted-db).
    #[arg(long, value_name = "NAME", group = "db")]
    pub db_container: Option<String>,
    /// Use a dump made by hand (`pg_dump --data-only`, see README).
    #[arg(long, value_name = "FILE", group = "db")]
    pub db_dump: Option<PathBuf>,
}

/// Arguments of `migrate import`.
#[derive(Debug, Args)]
pub struct ImportArgs {
    /// The bundle directory written by `migrate export`.
    #[arg(value_hint = ValueHint::DirPath)]
    pub bundle: PathBuf,
    /// Restore the database through this URL instead of exec'ing psql in the assisted-service pod.
    #[arg(long, value_name = "URL")]
    pub db_url: Option<String>,
    /// Wait for the assisted-service CRDs instead of failing when they are missing.
    #[arg(long)]
    pub wait_for_crds: bool,
    /// Leave the ClusterDeployment and AgentClusterInstall held.
    #[arg(long)]
    pub keep_held: bool,
    /// Replace objects that differ from the bundle's instead of failing.
    #[arg(long)]
    pub force: bool,
    /// Print the plan; change nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// Give up after this long (e.g. 10m); also bounds --wait-for-crds.
    #[arg(long, value_name = "DURATION", default_value = "30m")]
    pub timeout: String,
}

/// Arguments of `migrate wait`.
#[derive(Debug, Args)]
pub struct WaitArgs {
    /// The bundle directory (its checksum identifies the import to wait for).
    #[arg(value_hint = ValueHint::DirPath)]
    pub bundle: PathBuf,
    /// Give up after this long (e.g. 2h).
    #[arg(long, value_name = "DURATION", default_value = "1h")]
    pub timeout: String,
    /// Time between polls (e.g. 5s, 1m).
    #[arg(long, value_name = "DURATION", default_value = "5s")]
    pub interval: String,
}

/// Arguments of `migrate status`.
#[derive(Debug, Args)]
pub struct StatusArgs {
    /// The bundle directory.
    #[arg(value_hint = ValueHint::DirPath)]
    pub bundle: PathBuf,
    /// Output format, e.g. -o json.
    #[arg(short = 'o', long = "output", value_enum, default_value_t = OutputFormat::Table)]
    pub output: OutputFormat,
}

/// Arguments of `migrate node0-unit`. The global `-n/--namespace` and `--context` given here
/// are written into the unit's `migrate wait` (they must name the namespace import used).
#[derive(Debug, Args)]
pub struct UnitArgs {
    /// Bundle directory on node 0 that the unit's stop waits for.
    #[arg(
        long,
        value_name = "DIR",
        value_hint = ValueHint::DirPath,
        default_value = "/var/lib/agent-day2/migration"
    )]
    pub bundle: PathBuf,
    /// Kubeconfig of cluster 0 on node 0 (a path on node 0), made for the wait: its user may
    /// only `get` ConfigMap agent-day2-migration in the migration namespace (role
    /// agent-day2-migrate-wait; README "Permissions" shows how to make the file). Not node 0's
    /// own /etc/kubernetes/kubeconfig, whose credential can do far more (a warning says so).
    #[arg(long, value_name = "FILE", default_value = UNIT_KUBECONFIG_PATH)]
    pub kubeconfig: PathBuf,
    /// The plugin binary on node 0 that the unit runs.
    #[arg(
        long,
        value_name = "PATH",
        default_value = "/usr/local/bin/kubectl-agent_day2"
    )]
    pub plugin: PathBuf,
    /// How long the stop may wait (TimeoutStopSec).
    #[arg(long, value_name = "DURATION", default_value = "2h")]
    pub timeout: String,
}
