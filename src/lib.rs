//! agent-day2: a kubectl/oc plugin that adds worker nodes to OpenShift clusters installed with
//! the agent-based installer, on day 2.
//!
//! Layout: [`cli`] (clap definitions only) → [`kube_flags`] (the one place that turns kubectl's
//! connection flags into a client) → commands ([`info`], [`add_nodes`], [`version`]) built on the pure
//! [`cluster::ClusterModel`]; [`error`] maps every failure to the exit codes of design.md.

pub mod add_nodes;
pub mod auth;
pub mod base_iso;
pub mod batch;
pub mod cli;
pub mod cluster;
pub mod csr;
pub mod error;
pub mod ignition;
pub mod info;
pub mod iso;
pub mod kube_flags;
pub mod kube_write;
pub mod nodes_config;
pub mod output;
pub mod permissions;
pub mod registry;
pub mod version;

use std::ffi::OsString;
use std::io::Write;

use clap::Parser;

use crate::cli::{Cli, Command};
use crate::error::{exit, Error};

/// Parses `args` (argv including argv[0]), runs the command, prints data to stdout and
/// errors to stderr, and returns the exit code (design.md "Exit codes").
pub fn run<I, T>(args: I) -> u8
where
    I: IntoIterator<Item = T>,
    T: Into<OsString> + Clone,
{
    let cli = match Cli::try_parse_from(args) {
        Ok(c) => c,
        Err(e) => {
            let _ = e.print();
            return match e.kind() {
                clap::error::ErrorKind::DisplayHelp | clap::error::ErrorKind::DisplayVersion => exit::OK,
                // No subcommand: help is shown, but the invocation was still wrong.
                _ => exit::USAGE,
            };
        }
    };
    init_logging(cli.verbosity);
    let rt = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
        Ok(rt) => rt,
        Err(e) => {
            Error::Unexpected(format!("cannot start the async runtime: {e}")).print();
            return exit::UNEXPECTED;
        }
    };
    match rt.block_on(dispatch(cli)) {
        Ok(code) => code,
        Err(e) => {
            e.print();
            e.exit_code()
        }
    }
}

async fn dispatch(cli: Cli) -> Result<u8, Error> {
    match &cli.command {
        Command::Version(args) => {
            emit(&version::run(args)?);
            Ok(exit::OK)
        }
        Command::AddNodes(args) => {
            let target = cli.kube.resolve().await?;
            tracing::info!(server = %target.server, context = ?target.context, "connecting");
            let out = add_nodes::run(&target, args).await?;
            emit(&out);
            Ok(exit::OK)
        }
        Command::Info(args) => {
            let target = cli.kube.resolve().await?;
            tracing::info!(server = %target.server, context = ?target.context, proxy = ?target.proxy, "connecting");
            let outcome = info::run(&target, args).await?;
            emit(&outcome.stdout);
            match outcome.error {
                None => Ok(exit::OK),
                Some(e) => Err(e),
            }
        }
    }
}

fn emit(s: &str) {
    let mut out = std::io::stdout().lock();
    // A closed pipe (`| head`) is not an error worth a message.
    let _ = out.write_all(s.as_bytes());
    let _ = out.flush();
}

/// `-v N` → tracing level on stderr (kubectl-like: 0 warn, 1-2 info, 3-5 debug, 6+ trace).
/// `RUST_LOG` overrides it.
fn init_logging(v: u8) {
    let level = match v {
        0 => "warn",
        1 | 2 => "info",
        3..=5 => "debug",
        _ => "trace",
    };
    let filter = tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| {
        tracing_subscriber::EnvFilter::new(format!(
            "agent_day2={level},kube={}",
            if v >= 6 { "debug" } else { "warn" }
        ))
    });
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_target(false)
        .try_init();
}
