//! Rendering of reports: JSON and YAML documents for programs, tables for humans.
//! Data goes to stdout; logs and progress go to stderr (tracing).

use serde::Serialize;
use tabled::builder::Builder;
use tabled::settings::{Padding, Style};

use crate::error::{Error, Result};

/// Writes `s` to stdout as it is. A closed pipe (`| head`) is not an error worth a message, nor
/// a reason to stop: `print!` would panic (exit 101). Any other failure (a full disk behind
/// `> file`) is kept for [`write_failure`], so the run ends with exit 1 instead of 0 with the
/// output lost. The one way this crate writes to stdout (tests/house.rs keeps it so).
pub fn emit(s: &str) {
    use std::io::Write as _;
    EMITTED.store(true, std::sync::atomic::Ordering::Relaxed);
    let mut out = std::io::stdout().lock();
    if let Err(e) = out.write_all(s.as_bytes()).and_then(|()| out.flush()) {
        note_write_failure(&e);
    }
}

/// Whether [`emit`] wrote anything: a command that printed its document before failing gets
/// no error document after it (one document on stdout either way).
static EMITTED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Whether anything was written to stdout through [`emit`].
pub fn emitted() -> bool {
    EMITTED.load(std::sync::atomic::Ordering::Relaxed)
}

/// The first failure to write stdout other than a closed pipe, as `emit` met it.
static WRITE_FAILURE: std::sync::Mutex<Option<String>> = std::sync::Mutex::new(None);

/// Keeps `e` for [`write_failure`] unless it is a closed pipe (EPIPE) or one is kept already.
pub fn note_write_failure(e: &std::io::Error) {
    if e.kind() == std::io::ErrorKind::BrokenPipe {
        return;
    }
    if let Ok(mut f) = WRITE_FAILURE.lock() {
        f.get_or_insert(crate::files::io_reason(e));
    }
}

/// Why stdout could not be written, if it could not (see [`emit`]): the run's end turns it into
/// `error: cannot write the output to stdout: …` and exit 1.
pub fn write_failure() -> Option<String> {
    WRITE_FAILURE.lock().ok().and_then(|f| f.clone())
}

/// Serialises `doc` as pretty JSON or YAML (serde-saphyr), or returns `table()` for `-o table`.
/// The string ends with a newline.
pub fn render<T: Serialize>(format: OutputFormat, doc: &T, table: impl FnOnce() -> String) -> Result<String> {
    let mut s = match format {
        OutputFormat::Json => {
            serde_json::to_string_pretty(doc).map_err(|e| Error::Unexpected(format!("JSON output: {e}")))?
        }
        OutputFormat::Yaml => {
            serde_saphyr::to_string(doc).map_err(|e| Error::Unexpected(format!("YAML output: {e}")))?
        }
        OutputFormat::Table => table(),
    };
    if !s.ends_with('\n') {
        s.push('\n');
    }
    Ok(s)
}

/// A two-column key/value block without borders (`Cluster   ostest`).
pub fn key_values(rows: &[(&str, String)]) -> String {
    let mut b = Builder::default();
    for (k, v) in rows {
        b.push_record([k.to_string(), crate::text::neutralize(v).into_owned()]);
    }
    let mut t = b.build();
    t.with(Style::blank()).with(Padding::new(0, 2, 0, 0));
    trim_lines(&t.to_string())
}

/// A table with a header row, kubectl-style (no borders, upper-case headers).
pub fn table(header: &[&str], rows: Vec<Vec<String>>) -> String {
    let mut b = Builder::default();
    b.push_record(header.iter().map(|h| h.to_uppercase()));
    for r in rows {
        b.push_record(r.iter().map(|c| crate::text::neutralize(c).into_owned()));
    }
    let mut t = b.build();
    t.with(Style::blank()).with(Padding::new(0, 2, 0, 0));
    trim_lines(&t.to_string())
}

/// Drops the padding tabled leaves at line ends (it pads every row to the widest).
fn trim_lines(s: &str) -> String {
    s.lines().map(str::trim_end).collect::<Vec<_>>().join("\n")
}

// ---------------------------------------------------------------------------------------------

pub use crate::text::{display, escape_for_display, http_message, VALUE_MAX};

/// `-o` values of commands that report data (`-o table|json|yaml`; its clap parsing is in
/// `crate::cli`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OutputFormat {
    /// Human-readable tables.
    Table,
    /// One JSON document.
    Json,
    /// One YAML document.
    Yaml,
}

/// One error in a command's error document.
#[derive(Debug, Serialize)]
struct ErrorItem {
    /// Flag or field path (`--node worker-9`, `hosts[0].hostname`) when the error is about one,
    /// else empty.
    field: String,
    /// The `error:` line's text (escaped).
    message: String,
    /// What to do, when the error has a hint.
    #[serde(skip_serializing_if = "Option::is_none")]
    hint: Option<String>,
}

fn error_items(e: &Error, out: &mut Vec<ErrorItem>) {
    let esc = |s: &str| escape_for_display(s, 4000);
    match e {
        Error::Many(v) => v.iter().for_each(|e| error_items(e, out)),
        Error::InvalidConfig(c) => out.extend(c.errors.iter().map(|f| ErrorItem {
            field: esc(&f.path),
            message: esc(&f.message),
            hint: None,
        })),
        Error::InvalidInput { field, message } => out.push(ErrorItem {
            field: esc(field),
            message: esc(message),
            hint: e.hint().map(|h| esc(&h)),
        }),
        other => out.push(ErrorItem {
            field: String::new(),
            message: esc(&other.to_string()),
            hint: other.hint().map(|h| esc(&h)),
        }),
    }
}

/// The one error document of the commands that print documents (`add-nodes`, `info`,
/// `migrate status`, `approve`):
/// `{apiVersion: agent-day2/v1, kind, exitCode, errors: [{field, message, hint}]}` in `format`
/// (JSON or YAML), printed on stdout before the `error:` line goes to stderr, so a script
/// reading stdout gets one document either way. `kind`: `AddNodesError`, `InfoError`,
/// `MigrateStatusError`, `ApproveError`.
pub fn error_document(kind: &'static str, format: OutputFormat, e: &Error) -> Result<String> {
    #[derive(Serialize)]
    #[serde(rename_all = "camelCase")]
    struct Doc {
        api_version: &'static str,
        kind: &'static str,
        exit_code: u8,
        errors: Vec<ErrorItem>,
    }
    let mut errors = Vec::new();
    error_items(e, &mut errors);
    render(
        format,
        &Doc {
            api_version: "agent-day2/v1",
            kind,
            exit_code: e.exit_code(),
            errors,
        },
        String::new,
    )
}
