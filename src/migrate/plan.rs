//! The plans of the migrate subcommands: each subcommand's clap struct (`cli::migrate`) and the
//! global `-n`/`--context` (`cli::kube_flags`) turned once, before any bundle, node 0 or cluster
//! read, into plain values ("Parse first, resolve once", docs/design.md). This is the one file
//! of `migrate` that names a clap type; the subcommands take the plan.
//!
//! Only what needs nothing but the flags is checked here (a duration, the one database source
//! of `export`); a `-n` that is not a DNS-1123 label is refused where the bundle is read
//! ([`super::import::namespace_for`]), after the bundle's own checks, as before this module.

use std::path::PathBuf;
use std::time::Duration;

use crate::cli::kube_flags::KubeFlags;
use crate::cli::migrate::{
    ExportArgs, ImportArgs, MigrateArgs, MigrateCommand, StatusArgs, UnitArgs, WaitArgs,
};
use crate::duration::parse_flag;
use crate::error::Error;
use crate::output::OutputFormat;

/// One migrate subcommand with its plan (run by [`super::run`]).
#[derive(Debug, Clone)]
pub enum Command {
    /// `migrate export`.
    Export(Export),
    /// `migrate import`.
    Import(Import),
    /// `migrate wait`.
    Wait(Wait),
    /// `migrate status`.
    Status(Status),
    /// `migrate node0-unit`.
    Node0Unit(Unit),
}

impl Command {
    /// The plan of the subcommand in `args`, with the global flags of `kube` it uses (`-n` for
    /// import, wait, status and node0-unit; `--context` for node0-unit). Reads nothing.
    ///
    /// Errors: [`Error::Usage`] (exit 2, docs/exit-codes.md) as each `from_args` below.
    pub fn from_args(kube: &KubeFlags, args: &MigrateArgs) -> Result<Command, Error> {
        Ok(match &args.command {
            MigrateCommand::Export(a) => Command::Export(Export::from_args(a)?),
            MigrateCommand::Import(a) => Command::Import(Import::from_args(kube, a)?),
            MigrateCommand::Wait(a) => Command::Wait(Wait::from_args(kube, a)?),
            MigrateCommand::Status(a) => Command::Status(Status::from_args(kube, a)),
            MigrateCommand::Node0Unit(a) => Command::Node0Unit(Unit::from_args(kube, a)?),
        })
    }
}

/// The global `-n/--namespace` as the migration namespace's flag: `None` when not given or
/// empty (an empty flag counts as unset, as in kubectl). The namespace itself (this, else the
/// cluster's name from the bundle) is chosen by [`super::import::namespace_for`]; the
/// kubeconfig context's namespace is never used (see [`super::run`]).
fn namespace_flag(kube: &KubeFlags) -> Option<String> {
    kube.namespace.clone().filter(|n| !n.is_empty())
}

/// A duration flag: `Some(limit)`, or `None` for `0` (no limit), as
/// [`crate::duration::parse_duration`] reads it. Errors: [`Error::Usage`] (exit 2) naming the
/// flag and the value given.
fn duration_flag(flag: &str, value: &str) -> Result<Option<Duration>, Error> {
    parse_flag(flag, value).map_err(Error::Usage)
}

/// Where `migrate export`'s dump comes from (`manifest.source.db_source`, docs/migrate.md);
/// the command that makes it is in [`super::export`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DbSource {
    /// `--db-url URL`: the local `pg_dump` reaches the database.
    Url(String),
    /// `--db-container NAME`: `podman exec NAME pg_dump -h localhost ...` on node 0 (node 0's
    /// assisted-db container listens on localhost, its socket is in /tmp only).
    Container(String),
    /// `--db-dump FILE`: a dump made by hand.
    File(std::path::PathBuf),
}

impl DbSource {
    /// The manifest name: `db-url`, `db-container`, `db-dump`.
    pub fn name(&self) -> &'static str {
        match self {
            DbSource::Url(_) => "db-url",
            DbSource::Container(_) => "db-container",
            DbSource::File(_) => "db-dump",
        }
    }
}

/// Where `migrate export` reads node 0's service from (the user story's two options,
/// docs/migrate.md "Two options on node 0").
#[derive(Debug, Clone)]
pub enum Node0 {
    /// Option 2: REST mode, no API server on node 0; the CRs are recreated from REST answers.
    Rest {
        /// `--from`: node 0's assisted-service URL as given (checked by
        /// [`super::export::origin_of`] after `--out` and the dump program).
        from: String,
        /// `--token-file`: the file holding node 0's userAuth token, read by the export.
        token_file: Option<PathBuf>,
    },
    /// Option 1: kube-api mode on node 0's own API server; the CRs are copied from it.
    Kube(Node0Kube),
}

/// `--from-kube FILE [--from-context NAME] --storage DIR`.
#[derive(Clone)]
pub struct Node0Kube {
    /// `--from-kube`: node 0's API server's kubeconfig (that file only).
    pub kubeconfig: PathBuf,
    /// `--from-context`.
    pub context: Option<String>,
    /// `--storage`: node 0's assisted-service storage directory (its `WORK_DIR`).
    pub storage: PathBuf,
    /// The connection to node 0's API server, resolved when export runs (kubectl's rules for
    /// that one file and context; nothing of the global connection flags).
    pub resolve: crate::kube::Resolve,
}

impl std::fmt::Debug for Node0Kube {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Node0Kube")
            .field("kubeconfig", &self.kubeconfig)
            .field("context", &self.context)
            .field("storage", &self.storage)
            .finish_non_exhaustive()
    }
}

/// `migrate export`'s plan.
#[derive(Debug, Clone)]
pub struct Export {
    /// Node 0's service: REST (`--from`) or its API server (`--from-kube`).
    pub node0: Node0,
    /// `--out`: the bundle directory to create.
    pub out: PathBuf,
    /// The one database source of `--db-url`, `--db-container` and `--db-dump`.
    pub db: DbSource,
}

/// `--db-url` (export and import): a libpq connection string, a URI
/// `postgres[ql]://USER@HOST:PORT/DB` or keyword/value `host=H dbname=D ...` (PostgreSQL docs
/// "Connection Strings"). Anything else (`mysql://…`, a bare host name) is refused here instead
/// of by pg_dump or psql after the run started. Errors: [`Error::Usage`] (exit 2).
fn db_url_flag(u: &str) -> Result<String, Error> {
    let t = u.trim();
    let uri = t.starts_with("postgres://") || t.starts_with("postgresql://");
    let keywords = !t.contains("://") && t.contains('=');
    if uri || keywords {
        return Ok(u.to_string());
    }
    // Never echo it: it may hold a password.
    Err(Error::Usage(
        "--db-url is not a PostgreSQL connection string: give postgresql://USER:PASSWORD@HOST:5432/installer \
         or host=HOST port=5432 user=USER dbname=installer"
            .into(),
    ))
}

impl Export {
    /// Picks the one database source given. Errors: [`Error::Usage`] (exit 2) when none is
    /// given, explaining the three, or several (clap's group refuses that first).
    pub fn from_args(a: &ExportArgs) -> Result<Export, Error> {
        let given: Vec<DbSource> = [
            a.db_url
                .as_deref()
                .map(db_url_flag)
                .transpose()?
                .map(DbSource::Url),
            a.db_container.clone().map(DbSource::Container),
            a.db_dump.clone().map(DbSource::File),
        ]
        .into_iter()
        .flatten()
        .collect();
        let db = match given.len() {
            1 => given.into_iter().next().expect("one"),
            0 => {
                return Err(Error::Usage(
                    "the database is needed too: give one of --db-url URL (pg_dump here reaches \
                     node 0's database), --db-container NAME (run on node 0: `podman exec NAME pg_dump`, \
                     the container is assisted-db) or --db-dump FILE (a dump made with `pg_dump \
                     --data-only --no-owner --no-privileges -d installer`)"
                        .into(),
                ))
            }
            _ => {
                return Err(Error::Usage(
                    "give only one of --db-url, --db-container and --db-dump".into(),
                ))
            }
        };
        if a.from_kube.is_none() && a.storage.is_some() {
            return Err(Error::Usage(
                "--storage is read only with --from-kube (option 1); with --from the files come over REST"
                    .into(),
            ));
        }
        let node0 = match (&a.from_kube, &a.from) {
            (Some(kubeconfig), _) => {
                let storage = a.storage.clone().ok_or_else(|| {
                    Error::Usage(
                        "--from-kube needs --storage DIR: node 0's assisted-service storage directory".into(),
                    )
                })?;
                let flags = KubeFlags {
                    kubeconfig: Some(kubeconfig.clone()),
                    context: a.from_context.clone().filter(|c| !c.is_empty()),
                    ..KubeFlags::default()
                };
                Node0::Kube(Node0Kube {
                    kubeconfig: kubeconfig.clone(),
                    context: flags.context.clone(),
                    storage,
                    resolve: flags.resolver(),
                })
            }
            (None, Some(from)) => Node0::Rest {
                from: from.clone(),
                token_file: a.token_file.clone(),
            },
            (None, None) => {
                return Err(Error::Usage(
                    "give node 0's service: --from URL (REST mode) or --from-kube KUBECONFIG --storage DIR \
                     (its own API server)"
                        .into(),
                ))
            }
        };
        Ok(Export {
            node0,
            out: a.out.clone(),
            db,
        })
    }
}

/// `migrate import`'s plan.
#[derive(Debug, Clone)]
pub struct Import {
    /// The bundle directory.
    pub bundle: PathBuf,
    /// `-n`: `None` when not given or empty; the namespace is [`super::import::namespace_for`]'s.
    pub namespace: Option<String>,
    /// `--db-url`: restore through this URL instead of psql in the assisted-service pod.
    pub db_url: Option<String>,
    /// `--wait-for-crds`.
    pub wait_for_crds: bool,
    /// `--keep-held`.
    pub keep_held: bool,
    /// `--force`.
    pub force: bool,
    /// `--dry-run`.
    pub dry_run: bool,
    /// `--timeout`: the whole import's limit (also of `--wait-for-crds`); `None` for `0`.
    pub timeout: Option<Duration>,
    /// `--timeout` as given, for the messages that name it.
    pub timeout_text: String,
}

impl Import {
    /// Errors: [`Error::Usage`] (exit 2) for an unparsable `--timeout`.
    pub fn from_args(kube: &KubeFlags, a: &ImportArgs) -> Result<Import, Error> {
        Ok(Import {
            timeout: duration_flag("--timeout", &a.timeout)?,
            timeout_text: a.timeout.clone(),
            bundle: a.bundle.clone(),
            namespace: namespace_flag(kube),
            db_url: a.db_url.as_deref().map(db_url_flag).transpose()?,
            wait_for_crds: a.wait_for_crds,
            keep_held: a.keep_held,
            force: a.force,
            dry_run: a.dry_run,
        })
    }
}

/// `migrate wait`'s plan.
#[derive(Debug, Clone)]
pub struct Wait {
    /// The bundle directory (its checksum names the import waited for).
    pub bundle: PathBuf,
    /// `-n`: `None` when not given or empty; the namespace is [`super::import::namespace_for`]'s.
    pub namespace: Option<String>,
    /// `--timeout`: how long to wait; `None` for `0` (no limit).
    pub timeout: Option<Duration>,
    /// `--timeout` as given, for the message that names it.
    pub timeout_text: String,
    /// `--interval`: time between polls; `0` reads as 1 s.
    pub interval: Duration,
}

impl Wait {
    /// Errors: [`Error::Usage`] (exit 2) for an unparsable `--timeout` (checked first) or
    /// `--interval`.
    pub fn from_args(kube: &KubeFlags, a: &WaitArgs) -> Result<Wait, Error> {
        let timeout = duration_flag("--timeout", &a.timeout)?;
        let interval = duration_flag("--interval", &a.interval)?.unwrap_or(Duration::from_secs(1));
        Ok(Wait {
            bundle: a.bundle.clone(),
            namespace: namespace_flag(kube),
            timeout,
            timeout_text: a.timeout.clone(),
            interval,
        })
    }
}

/// `migrate status`'s plan.
#[derive(Debug, Clone)]
pub struct Status {
    /// The bundle directory.
    pub bundle: PathBuf,
    /// `-n`: `None` when not given or empty; the namespace is [`super::import::namespace_for`]'s.
    pub namespace: Option<String>,
    /// `-o`.
    pub output: OutputFormat,
}

impl Status {
    /// Nothing to refuse: clap has checked `-o`.
    pub fn from_args(kube: &KubeFlags, a: &StatusArgs) -> Status {
        Status {
            bundle: a.bundle.clone(),
            namespace: namespace_flag(kube),
            output: a.output,
        }
    }
}

/// `migrate node0-unit`'s plan: paths on node 0, written into the unit.
#[derive(Debug, Clone)]
pub struct Unit {
    /// `--bundle`.
    pub bundle: PathBuf,
    /// `--kubeconfig`.
    pub kubeconfig: PathBuf,
    /// `--plugin`.
    pub plugin: PathBuf,
    /// `--timeout`: how long the stop may wait (never zero).
    pub timeout: Duration,
    /// The global `--context`, non-empty, for the unit's `migrate wait`.
    pub context: Option<String>,
    /// `-n`: `None` when not given or empty; for the unit's `migrate wait`.
    pub namespace: Option<String>,
}

impl Unit {
    /// Errors: [`Error::Usage`] (exit 2) for an unparsable `--timeout` or `0` (the stop must
    /// have a limit). Paths, `-n` and `--context` are checked as the unit is written
    /// ([`super::unit::render`]).
    pub fn from_args(kube: &KubeFlags, a: &UnitArgs) -> Result<Unit, Error> {
        let timeout = duration_flag("--timeout", &a.timeout)?
            .ok_or_else(|| Error::Usage("--timeout 0: the stop must have a limit".into()))?;
        Ok(Unit {
            bundle: a.bundle.clone(),
            kubeconfig: a.kubeconfig.clone(),
            plugin: a.plugin.clone(),
            timeout,
            context: kube.context.clone().filter(|c| !c.is_empty()),
            namespace: namespace_flag(kube),
        })
    }
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;

    #[test]
    fn db_urls_are_libpq_connection_strings() {
        for ok in [
            "postgresql://admin:pw@192.168.111.20:5432/installer",
            "postgres://h/db",
            "host=h port=5432 dbname=installer",
        ] {
            assert_eq!(db_url_flag(ok).unwrap(), ok);
        }
        for bad in ["mysql://a:SECRET@h/x", "h:5432", "http://h/?a=b"] {
            let e = db_url_flag(bad).unwrap_err();
            assert_eq!(e.exit_code(), crate::error::exit::USAGE, "{bad}");
            assert!(!e.to_string().contains("SECRET"), "{e}");
        }
    }
    use crate::cli::{Cli, Command as CliCommand};

    fn parse(args: &[&str]) -> Cli {
        let argv = std::iter::once("kubectl-agent_day2").chain(args.iter().copied());
        Cli::try_parse_from(argv).unwrap_or_else(|e| panic!("{args:?}: {e}"))
    }

    fn plan(args: &[&str]) -> Result<Command, Error> {
        let cli = parse(args);
        match &cli.command {
            CliCommand::Migrate(m) => Command::from_args(&cli.kube, m),
            _ => panic!("{args:?}: not migrate"),
        }
    }

    fn namespace(c: &Command) -> Option<&str> {
        match c {
            Command::Import(p) => p.namespace.as_deref(),
            Command::Wait(p) => p.namespace.as_deref(),
            Command::Status(p) => p.namespace.as_deref(),
            Command::Node0Unit(p) => p.namespace.as_deref(),
            Command::Export(_) => None,
        }
    }

    /// `-n NS` and `--namespace NS` (the global flag, before or after the subcommand) give the
    /// migration namespace of import, wait and status; without them (or empty) it is unset, so
    /// the bundle's cluster name applies and not the kubeconfig context's namespace.
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
            let c = plan(args).unwrap_or_else(|e| panic!("{args:?}: {e}"));
            assert_eq!(namespace(&c), Some("ns1"), "{args:?}");
        }
        for sub in ["import", "wait", "status"] {
            assert_eq!(namespace(&plan(&["migrate", sub, "./b"]).unwrap()), None, "{sub}");
            assert_eq!(
                namespace(&plan(&["migrate", sub, "./b", "-n", ""]).unwrap()),
                None,
                "{sub}"
            );
        }
    }

    /// Export needs exactly one database source (exit 2 naming the three when none).
    #[test]
    fn export_takes_exactly_one_database_source() {
        let base = [
            "migrate",
            "export",
            "--from",
            "http://192.168.111.20:8090",
            "--out",
            "/tmp/x",
        ];
        let e = plan(&base).unwrap_err();
        assert_eq!(e.exit_code(), 2);
        let s = e.to_string();
        assert!(
            s.contains("--db-url") && s.contains("--db-container") && s.contains("--db-dump"),
            "{s}"
        );
        let with = |extra: &[&str]| plan(&[&base[..], extra].concat());
        match with(&["--db-container", "assisted-db"]).unwrap() {
            Command::Export(p) => assert_eq!(p.db, DbSource::Container("assisted-db".into())),
            c => panic!("{c:?}"),
        }
        match with(&["--db-dump", "d.sql"]).unwrap() {
            Command::Export(p) => assert_eq!(p.db, DbSource::File("d.sql".into())),
            c => panic!("{c:?}"),
        }
    }

    /// Durations are read once, with the flag named in the error; `0` is no limit except for
    /// the unit's stop.
    #[test]
    fn durations_are_read_before_anything_else() {
        let e = plan(&["migrate", "import", "./b", "--timeout", "soon"]).unwrap_err();
        assert_eq!(e.exit_code(), 2);
        assert!(e.to_string().contains("--timeout \"soon\""), "{e}");
        match plan(&["migrate", "import", "./b", "--timeout", "0"]).unwrap() {
            Command::Import(p) => assert_eq!((p.timeout, p.timeout_text.as_str()), (None, "0")),
            c => panic!("{c:?}"),
        }
        let e = plan(&["migrate", "wait", "./b", "--interval", "x"]).unwrap_err();
        assert!(e.to_string().contains("--interval \"x\""), "{e}");
        match plan(&["migrate", "wait", "./b", "--interval", "0"]).unwrap() {
            Command::Wait(p) => {
                assert_eq!(p.interval, Duration::from_secs(1));
                assert_eq!(p.timeout, Some(Duration::from_secs(3600)));
            }
            c => panic!("{c:?}"),
        }
        let e = plan(&["migrate", "node0-unit", "--timeout", "0"]).unwrap_err();
        assert!(e.to_string().contains("the stop must have a limit"), "{e}");
        match plan(&["--context", "", "-n", "ns1", "migrate", "node0-unit"]).unwrap() {
            Command::Node0Unit(p) => {
                assert_eq!((p.context, p.namespace.as_deref()), (None, Some("ns1")));
                assert_eq!(p.timeout, Duration::from_secs(7200));
            }
            c => panic!("{c:?}"),
        }
    }
}
