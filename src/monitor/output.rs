//! How monitor shows progress: a live table on a terminal (one row per node, indicatif), one
//! line per change otherwise, or one JSON event per line with `-o json`.
//!
//! Lines and events go to stdout (they are the command's data, for scripts and logs); the live
//! table goes to stderr like every progress display of the plugin. Every value that came from a
//! node or the cluster is escaped before it is shown ([`crate::output::display`]).

use std::collections::BTreeMap;
use std::io::Write;

use serde::Serialize;
use serde_json::Value;

/// How monitor writes (from `-o`, resolved in [`super::Request`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// A live table on a terminal, else one line per change.
    Table,
    /// One JSON event per line (apiVersion agent-day2/v1, kind MonitorEvent).
    Json,
}

use super::state::Stage;

/// One JSON event (`-o json`): `event` is `stage` (a node changed stage or detail), `warning`,
/// `info` (labels applied, address or reboot recorded, logs saved), `alarm` (a possible
/// impostor or second requester: `code` and `csrs` with each CSR's name, created, requester
/// and state), `summary` (last line) or `error`
/// (last line instead of the summary when monitor stops on an error: `hint`, `exitCode`).
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Event {
    /// `agent-day2/v1`.
    pub api_version: &'static str,
    /// `MonitorEvent`.
    pub kind: &'static str,
    /// `stage`, `warning`, `info`, `summary` or `error`.
    pub event: &'static str,
    /// RFC 3339 UTC.
    pub time: String,
    /// Node name (absent for command-wide events).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub node: Option<String>,
    /// Node address.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ip: Option<String>,
    /// Stage (for `stage` events).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stage: Option<Stage>,
    /// Install percent, when installing.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub percent: Option<i64>,
    /// Failing validations, when any.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub validations: Vec<BTreeMap<&'static str, String>>,
    /// The sentence.
    pub message: String,
    /// Extra fields (summary: exitCode, nodes, requests).
    #[serde(flatten)]
    pub extra: serde_json::Map<String, Value>,
}

/// RFC 3339 UTC now.
pub fn now() -> String {
    crate::auth::rfc3339(std::time::SystemTime::now())
}

impl Event {
    /// An event of `event` kind with `message`.
    pub fn new(event: &'static str, message: String) -> Event {
        Event {
            api_version: "agent-day2/v1",
            kind: "MonitorEvent",
            event,
            time: now(),
            node: None,
            ip: None,
            stage: None,
            percent: None,
            validations: vec![],
            message,
            extra: serde_json::Map::new(),
        }
    }
}

/// The sink for events.
pub struct Out {
    format: Format,
    live: Option<Live>,
}

struct Live {
    multi: indicatif::MultiProgress,
    rows: BTreeMap<String, indicatif::ProgressBar>,
    /// The header row, added with the first node's row.
    header: Option<indicatif::ProgressBar>,
}

/// The live table's columns before the detail: NODE, IP, STAGE (issue 22 item 9: no header,
/// no address, and rows wrapped past the terminal). The detail takes the rest of the line and
/// is cut at the terminal's width (indicatif's `wide_msg`).
fn live_prefix(node: &str, ip: &str, stage: &str) -> String {
    let cut = |s: &str, w: usize| -> String {
        if s.chars().count() > w {
            s.chars().take(w - 1).chain(['…']).collect()
        } else {
            format!("{s:<w$}")
        }
    };
    format!("{} {} {}", cut(node, 24), cut(ip, 17), cut(stage, 19))
}

impl Out {
    /// Live table when `format` is table and stderr is a terminal.
    pub fn new(format: Format) -> Out {
        use std::io::IsTerminal;
        let live = (format == Format::Table && std::io::stderr().is_terminal()).then(|| Live {
            multi: indicatif::MultiProgress::with_draw_target(indicatif::ProgressDrawTarget::stderr()),
            rows: BTreeMap::new(),
            header: None,
        });
        Out { format, live }
    }

    /// Whether the live table is used.
    pub fn is_live(&self) -> bool {
        self.live.is_some()
    }

    /// Shows `e`.
    pub fn emit(&mut self, e: &Event) {
        match (self.format, &mut self.live) {
            (Format::Json, _) => {
                if let Ok(s) = serde_json::to_string(e) {
                    line(&s);
                }
            }
            (Format::Table, Some(live)) => {
                if let (Some(node), "stage") = (&e.node, e.event) {
                    let style = || {
                        indicatif::ProgressStyle::with_template("{spinner} {prefix} {wide_msg}")
                            .unwrap_or_else(|_| indicatif::ProgressStyle::default_spinner())
                    };
                    if live.header.is_none() {
                        let h = live.multi.add(indicatif::ProgressBar::new_spinner());
                        h.set_style(style());
                        h.set_prefix(live_prefix("NODE", "IP", "STAGE"));
                        h.finish_with_message("DETAIL");
                        live.header = Some(h);
                    }
                    let bar = live.rows.entry(node.clone()).or_insert_with(|| {
                        let b = live.multi.add(indicatif::ProgressBar::new_spinner());
                        b.set_style(style());
                        b.enable_steady_tick(std::time::Duration::from_millis(200));
                        b
                    });
                    let stage = e.stage.map(|s| s.as_str()).unwrap_or("");
                    bar.set_prefix(live_prefix(
                        &crate::output::display(node),
                        e.ip.as_deref().unwrap_or("-"),
                        stage,
                    ));
                    bar.set_message(e.message.clone());
                    if matches!(e.stage, Some(Stage::Done | Stage::Failed)) {
                        bar.finish();
                    }
                } else {
                    let _ = live.multi.println(text_line(e));
                }
            }
            (Format::Table, None) => line(&text_line(e)),
        }
    }

    /// Asks `question` on stderr and reads a line from stdin (the live table is paused);
    /// true only for `y` or `yes`.
    pub fn ask(&self, question: &str) -> bool {
        let read = || {
            crate::say_part!("{question}");
            let _ = std::io::stderr().flush();
            let mut line = String::new();
            let _ = std::io::stdin().read_line(&mut line);
            matches!(line.trim().to_ascii_lowercase().as_str(), "y" | "yes")
        };
        match &self.live {
            Some(l) => l.multi.suspend(read),
            None => read(),
        }
    }

    /// Ends the live table (rows stay on screen).
    pub fn finish(&mut self) {
        if let Some(live) = &self.live {
            for b in live.rows.values() {
                b.finish();
            }
        }
    }
}

/// `worker-0 192.168.111.30: installing: Writing image to disk, 50%` / `warning: ...`.
pub fn text_line(e: &Event) -> String {
    let who = match (&e.node, &e.ip) {
        (Some(n), Some(ip)) => format!("{} {ip}: ", crate::output::display(n)),
        (Some(n), None) => format!("{}: ", crate::output::display(n)),
        _ => String::new(),
    };
    match e.event {
        "warning" => format!("warning: {who}{}", e.message),
        "alarm" => format!("alarm: {who}{}", e.message),
        // `installing: Writing image to disk, 50%` names its stage already (it said
        // "installing - installing: ...").
        "stage" => match e.stage.map(|s| s.as_str()).unwrap_or("") {
            st if !st.is_empty() && e.message.starts_with(st) => format!("{who}{}", e.message),
            st => format!("{who}{st} - {}", e.message),
        },
        _ => format!("{who}{}", e.message),
    }
}

fn line(s: &str) {
    crate::output::emit(&format!("{s}\n"));
}
