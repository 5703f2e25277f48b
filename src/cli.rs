//! Command line definitions (clap only; nothing here talks to a cluster).
//!
//! `kubectl` and `oc` exec this binary with the words after `agent-day2` and parse none of
//! them, so the plugin takes kubectl's connection flags itself ([`KubeFlags`], flattened
//! once at the root with `global = true`, so they work before or after the subcommand).
//! Usage text says `oc agent-day2`: the plugin cannot tell which of the two called it.

use clap::{Args, Parser, Subcommand, ValueEnum};

use crate::kube_flags::KubeFlags;

/// Add worker nodes to an OpenShift cluster installed with the agent-based installer,
/// on day 2, without multicluster engine.
#[derive(Debug, Parser)]
#[command(
    name = "oc agent-day2",
    bin_name = "oc agent-day2",
    version,
    disable_version_flag = true,
    propagate_version = false,
    after_help = "Works as `oc agent-day2` and `kubectl agent-day2` (binary kubectl-agent_day2 on PATH).\n\
                  Exit codes: 0 ok, 1 unexpected, 2 usage, 3 invalid input, 4 cluster access,\n\
                  5 timed out, 6 install failed, 7 CSRs rejected or pending, 8 declined."
)]
pub struct Cli {
    /// kubectl's connection flags (global).
    #[command(flatten)]
    pub kube: KubeFlags,

    /// Log verbosity on stderr: 0 warnings, 1-2 info, 3-5 debug, 6+ trace (like kubectl -v).
    #[arg(short = 'v', long = "v", global = true, value_name = "N", default_value_t = 0)]
    pub verbosity: u8,

    #[command(subcommand)]
    pub command: Command,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Show what agent-day2 reads from the cluster, whether the cluster can take day-2
    /// nodes, and which permissions you lack.
    #[command(long_about = INFO_LONG)]
    Info(InfoArgs),
    /// Print the plugin's version and build.
    Version(VersionArgs),
}

const INFO_LONG: &str = "\
Show what agent-day2 reads from the cluster and what add-nodes will use: cluster ID, name,
base domain, API URLs, version and release image, platform, architecture, machine networks,
Machine Config Server endpoint, base ISO, proxy, trust bundle, mirrors, FIPS, SSH key, cluster
and service networks, existing nodes, and the permissions add-nodes/approve/monitor need that
you lack (checked with SelfSubjectAccessReviews, nothing is written).

Exit status:
  0  the report was printed and the cluster can take day-2 nodes (missing permissions are
     listed but do not change the status)
  4  a required read failed (unreachable, unauthorized, forbidden or missing object: the
     message names it), or the cluster cannot take day-2 nodes (OpenShift older than 4.18,
     or a platform other than baremetal, none, external, vsphere): the report is printed
     first, then an `error:` line with the reason";

/// Arguments of `info`.
#[derive(Debug, Args)]
pub struct InfoArgs {
    /// Output format. json/yaml print a stable document (apiVersion agent-day2/v1, kind ClusterInfo).
    #[arg(short = 'o', long = "output", value_enum, default_value_t = OutputFormat::Table)]
    pub output: OutputFormat,
}

/// Arguments of `version`.
#[derive(Debug, Args)]
pub struct VersionArgs {
    /// Output format.
    #[arg(short = 'o', long = "output", value_enum, default_value_t = OutputFormat::Table)]
    pub output: OutputFormat,
}

/// `-o` values of commands that report data.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum OutputFormat {
    /// Human-readable tables.
    Table,
    /// One JSON document.
    Json,
    /// One YAML document.
    Yaml,
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn clap_definition_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn kube_flags_work_before_and_after_the_subcommand() {
        let a = Cli::try_parse_from(["x", "--context", "c1", "info", "-n", "ns", "--token=t"]).unwrap();
        assert_eq!(a.kube.context.as_deref(), Some("c1"));
        assert_eq!(a.kube.namespace.as_deref(), Some("ns"));
        assert_eq!(a.kube.token.as_deref(), Some("t"));
        let b = Cli::try_parse_from(["x", "info", "--context", "c2", "-s", "https://h:6443"]).unwrap();
        assert_eq!(b.kube.context.as_deref(), Some("c2"));
        assert_eq!(b.kube.server.as_deref(), Some("https://h:6443"));
    }
}
