//! agent-day2: a kubectl/oc plugin that adds worker nodes to OpenShift clusters installed with
//! the agent-based installer, on day 2.
//!
//! Layout: layers that import downward only, from the leaves ([`error`], [`text`], ...) through
//! [`output`], [`kube`] and the field's facts ([`cluster`], [`csr`], [`batch`], ...) to [`cli`]
//! (every clap type) and the commands ([`add_nodes`], [`approve`], [`monitor`], [`migrate`], ...);
//! docs/design.md "Code layout" lists them and `tests/house.rs` keeps them. [`error`] maps
//! every failure to the exit codes of docs/exit-codes.md.

pub mod add_nodes;
pub mod approve;
pub mod assisted;
pub mod auth;
pub mod base_iso;
pub mod batch;
pub mod cli;
pub mod cluster;
pub mod csr;
pub mod duration;
pub mod error;
pub mod files;
pub mod follow;
pub mod ignition;
pub mod info;
pub mod iso;
pub mod k8s_names;
pub mod kube;

pub mod migrate;
pub mod monitor;
pub mod net;
pub mod nodes_config;
pub mod output;
pub mod permissions;
pub mod registry;
pub mod tempfiles;
pub mod text;
pub mod version;

use std::ffi::OsString;

use clap::Parser;

use crate::cli::{Cli, Command};
use crate::error::{exit, Error};

/// Parses `args` (argv including argv[0]), runs the command, prints data to stdout and
/// errors to stderr, and returns the exit code (docs/exit-codes.md).
pub fn run<I, T>(args: I) -> u8
where
    I: IntoIterator<Item = T>,
    T: Into<OsString> + Clone,
{
    let args: Vec<OsString> = args.into_iter().map(Into::into).collect();
    // kubectl's completion protocol passes flag words (`--no`, `--context`) as data: answer
    // before clap would take them as this program's own flags.
    if args.get(1).is_some_and(|a| a == "__complete") {
        let words: Vec<String> = args[2..]
            .iter()
            .map(|a| a.to_string_lossy().into_owned())
            .collect();
        return cli::completion::run_complete(&words);
    }
    let cli = match Cli::try_parse_from(args) {
        Ok(c) => c,
        Err(e) => {
            if let Err(w) = e.print() {
                output::note_write_failure(&w);
            }
            if let Some(why) = output::write_failure() {
                Error::Unexpected(format!("cannot write the help to stdout: {why}")).print();
                return exit::UNEXPECTED;
            }
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
    let doc = error_document_kind(&cli);
    let code = match rt.block_on(dispatch(cli)) {
        Ok(code) => code,
        Err(e) => {
            // -o json|yaml: one document on stdout either way (none yet: the error's).
            if let Some((kind, format)) = doc.filter(|_| !output::emitted()) {
                if let Ok(d) = output::error_document(kind, format, &e) {
                    output::emit(&d);
                }
            }
            e.print();
            e.exit_code()
        }
    };
    // Output lost (a full disk behind `> file`) is a failure whatever the command did.
    match output::write_failure() {
        Some(why) => {
            Error::Unexpected(format!("cannot write the output to stdout: {why}")).print();
            exit::UNEXPECTED
        }
        None => code,
    }
}

/// The error document of a command run with `-o json|yaml` whose errors come back here
/// (`approve` and `monitor` print their own): its kind and format.
fn error_document_kind(cli: &Cli) -> Option<(&'static str, cli::OutputFormat)> {
    use cli::migrate::MigrateCommand;
    let (kind, format) = match &cli.command {
        Command::AddNodes(a) => match &a.command {
            Some(cli::AddNodesCommand::Batch(b)) => {
                let sub = match &b.command {
                    Some(cli::BatchCommand::List { output })
                    | Some(cli::BatchCommand::Delete { output, .. }) => *output,
                    None => None,
                };
                ("AddNodesError", sub.unwrap_or(b.output))
            }
            None => ("AddNodesError", a.output),
        },
        Command::Info(a) => ("InfoError", a.output),
        Command::Migrate(m) => match &m.command {
            MigrateCommand::Status(s) => ("MigrateStatusError", s.output),
            _ => return None,
        },
        _ => return None,
    };
    (format != cli::OutputFormat::Table).then_some((kind, format))
}

async fn dispatch(cli: Cli) -> Result<u8, Error> {
    match &cli.command {
        Command::Version(args) => {
            output::emit(&version::run(args)?);
            Ok(exit::OK)
        }
        Command::AddNodes(args) => {
            let target = cli.kube.resolve().await?;
            tracing::info!(server = %target.server, context = ?target.context, "connecting");
            let out = add_nodes::run(&target, args).await?;
            output::emit(&out);
            Ok(exit::OK)
        }
        Command::Monitor(args) => monitor::run(cli.kube.resolver(), args).await,
        Command::Approve(args) => approve::cmd::run(cli.kube.resolver(), args).await,
        Command::Migrate(args) => {
            let plan = migrate::plan::Command::from_args(&cli.kube, args)?;
            migrate::run(cli.kube.resolver(), &plan).await
        }
        Command::Completion(args) => Ok(cli::completion::run_script(args.shell)),
        Command::Complete(args) => Ok(cli::completion::run_complete(&args.words)),
        Command::Info(args) => {
            let target = cli.kube.resolve().await?;
            tracing::info!(server = %target.server, context = ?target.context, proxy = ?target.proxy, "connecting");
            let outcome = info::run(&target, args).await?;
            output::emit(&outcome.stdout);
            match outcome.error {
                None => Ok(exit::OK),
                Some(e) => Err(e),
            }
        }
    }
}

/// `-v N` → tracing on stderr (kubectl-like). 0: only our own warnings and errors, as
/// `warning: ...` / `error: ...` lines; 1-2 info, 3-5 debug (ours only, same plain form);
/// 6+ trace with the kube client's, hyper's and rustls' own logs, in tracing's full format.
/// Colours only when stderr is a terminal. Field values are shown as text (`context=admin`,
/// not `Some("admin")`) and escaped like every other cluster-provided text. `RUST_LOG`
/// overrides the filter.
fn init_logging(v: u8) {
    use std::io::IsTerminal;
    let level = match v {
        0 => "warn",
        1 | 2 => "info",
        3..=5 => "debug",
        _ => "trace",
    };
    let directives = if v >= 6 {
        format!("warn,agent_day2={level},kube=debug,kube_client=debug,kube_runtime=debug,tower_http=debug")
    } else {
        // Everything that is not ours stays silent: its errors reach the user as our own
        // `error:` line, and its warnings (e.g. rustls' "Server cert bypassed" per connection
        // with --insecure-skip-tls-verify) are noise at this level.
        format!("off,agent_day2={level}")
    };
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(directives));
    // Whatever RUST_LOG says: the WebSocket layer logs whole frames at trace, and pod exec
    // frames carry the database restore (pull secret, credentials) of `migrate import`.
    let filter = ["tungstenite=off", "tokio_tungstenite=off"]
        .iter()
        .fold(filter, |f, d| {
            f.add_directive(d.parse().expect("static directive"))
        });
    if v >= 6 {
        let _ = tracing_subscriber::fmt()
            .with_env_filter(filter)
            .with_writer(std::io::stderr)
            .with_ansi(std::io::stderr().is_terminal())
            .try_init();
    } else {
        let _ = tracing_subscriber::fmt()
            .with_env_filter(filter)
            .with_writer(std::io::stderr)
            .with_ansi(false)
            .event_format(log_format::Plain)
            .try_init();
    }
}

/// The plain `warning: message key=value` log line format of [`init_logging`].
mod log_format {
    use std::fmt::Write as _;

    use tracing::field::{Field, Visit};
    use tracing::{Event, Level, Subscriber};
    use tracing_subscriber::fmt::format::Writer;
    use tracing_subscriber::fmt::{FmtContext, FormatEvent, FormatFields};
    use tracing_subscriber::registry::LookupSpan;

    pub struct Plain;

    #[derive(Default)]
    struct Fields {
        message: String,
        rest: String,
    }

    /// `Some("x")` → `x`, `None` → `-`, `"x"` → `x`: Debug output of the usual field types
    /// read as text.
    fn textual(s: &str) -> String {
        let s = s.trim();
        if s == "None" {
            return "-".into();
        }
        let s = s
            .strip_prefix("Some(")
            .and_then(|r| r.strip_suffix(')'))
            .unwrap_or(s);
        match s.strip_prefix('"').and_then(|r| r.strip_suffix('"')) {
            Some(inner) => inner.replace("\\\"", "\"").replace("\\\\", "\\"),
            None => s.to_string(),
        }
    }

    impl Visit for Fields {
        fn record_str(&mut self, field: &Field, value: &str) {
            if field.name() == "message" {
                self.message.push_str(value);
            } else {
                let _ = write!(self.rest, " {}={value}", field.name());
            }
        }
        fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
            if field.name() == "message" {
                let _ = write!(self.message, "{value:?}");
            } else {
                let _ = write!(self.rest, " {}={}", field.name(), textual(&format!("{value:?}")));
            }
        }
    }

    impl<S, N> FormatEvent<S, N> for Plain
    where
        S: Subscriber + for<'a> LookupSpan<'a>,
        N: for<'a> FormatFields<'a> + 'static,
    {
        fn format_event(
            &self,
            _: &FmtContext<'_, S, N>,
            mut w: Writer<'_>,
            event: &Event<'_>,
        ) -> std::fmt::Result {
            let prefix = match *event.metadata().level() {
                Level::ERROR => "error",
                Level::WARN => "warning",
                Level::INFO => "info",
                Level::DEBUG => "debug",
                Level::TRACE => "trace",
            };
            let mut f = Fields::default();
            event.record(&mut f);
            let line = format!("{}{}", f.message, f.rest);
            writeln!(w, "{prefix}: {}", crate::output::escape_for_display(&line, 4000))
        }
    }

    #[cfg(test)]
    mod tests {
        #[test]
        fn debug_values_read_as_text() {
            assert_eq!(super::textual("Some(\"admin\")"), "admin");
            assert_eq!(super::textual("None"), "-");
            assert_eq!(super::textual("42"), "42");
        }
    }
}
