//! `--help` of every command, as users see it: snapshots in tests/snapshots/help/ (one file per
//! command, named by its path: `approve.txt`, `migrate.export.txt`, root `agent-day2.txt`), and
//! the rules every help page keeps: each argument has help text, each command an `Examples:`
//! section (kubectl style), each flag an example (in that section, or an `e.g.` in its own
//! help), and no line wider than 100 columns.
//!
//! The commands come from clap's tree (`Cli::command()`), so a new command gets checked (and
//! needs a snapshot) without touching this file. `UPDATE_SNAPSHOTS=1 cargo test --test offline help::`
//! rewrites the snapshots (and removes those of commands that are gone); review the diff.
//!
//! Plain text files rather than the `insta` crate: the snapshots are read in review as the
//! help itself, no new dependency or review tool is needed, and the comparison is 40 lines.

use std::path::{Path, PathBuf};
use std::process::Command;

use agent_day2::cli::Cli;
use clap::CommandFactory;

const BIN: &str = env!("CARGO_BIN_EXE_kubectl-agent_day2");
const WIDTH: usize = 100;

/// Every visible command: (path of subcommand names, the built clap command).
fn commands() -> Vec<(Vec<String>, clap::Command)> {
    fn walk(path: Vec<String>, cmd: &clap::Command, out: &mut Vec<(Vec<String>, clap::Command)>) {
        out.push((path.clone(), cmd.clone()));
        for sub in cmd.get_subcommands() {
            // clap's generated `help` subcommand and the hidden `__complete` are not user commands.
            if sub.is_hide_set() || sub.get_name() == "help" {
                continue;
            }
            let mut p = path.clone();
            p.push(sub.get_name().to_string());
            walk(p, sub, out);
        }
    }
    let mut root = Cli::command();
    root.build();
    let mut out = Vec::new();
    walk(Vec::new(), &root, &mut out);
    out
}

/// `oc agent-day2 approve`.
fn shown(path: &[String]) -> String {
    ["oc agent-day2".to_string()]
        .iter()
        .chain(path)
        .cloned()
        .collect::<Vec<_>>()
        .join(" ")
}

fn snapshot_name(path: &[String]) -> String {
    if path.is_empty() {
        "agent-day2.txt".into()
    } else {
        format!("{}.txt", path.join("."))
    }
}

fn snapshot_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/snapshots/help")
}

/// `kubectl-agent_day2 PATH... FLAG` with stdout not a terminal and no COLUMNS: clap wraps at
/// 100 columns, as in a pipe.
fn help(path: &[String], flag: &str) -> String {
    let out = Command::new(BIN)
        .args(path)
        .arg(flag)
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{path:?} {flag}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn help_matches_the_snapshots() {
    let update = std::env::var_os("UPDATE_SNAPSHOTS").is_some_and(|v| v == "1");
    let dir = snapshot_dir();
    std::fs::create_dir_all(&dir).unwrap();
    let mut expected_files = Vec::new();
    let mut failures = Vec::new();
    for (path, _) in commands() {
        let name = snapshot_name(&path);
        let got = help(&path, "--help");
        let file = dir.join(&name);
        expected_files.push(name.clone());
        if update {
            if std::fs::read_to_string(&file).ok().as_deref() != Some(got.as_str()) {
                std::fs::write(&file, &got).unwrap();
                eprintln!("updated {}", file.display());
            }
            continue;
        }
        match std::fs::read_to_string(&file) {
            Ok(want) if want == got => {}
            Ok(want) => failures.push(format!(
                "{name}: `{} --help` differs from the snapshot:\n{}",
                shown(&path),
                diff(&want, &got)
            )),
            Err(_) => failures.push(format!("{name}: no snapshot for `{} --help`", shown(&path))),
        }
    }
    for entry in std::fs::read_dir(&dir).unwrap() {
        let name = entry.unwrap().file_name().to_string_lossy().into_owned();
        if !expected_files.contains(&name) {
            if update {
                std::fs::remove_file(dir.join(&name)).unwrap();
                eprintln!("removed {name} (no such command)");
            } else {
                failures.push(format!("{name}: snapshot of a command that does not exist"));
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{}\n\nIf the change is intended: UPDATE_SNAPSHOTS=1 cargo test --test offline help::, and review the diff.",
        failures.join("\n\n")
    );
}

/// A line diff (`-` snapshot, `+` now, with the line number on its side), from the longest
/// common subsequence of lines; at most 40 lines.
fn diff(want: &str, got: &str) -> String {
    let (w, g): (Vec<&str>, Vec<&str>) = (want.lines().collect(), got.lines().collect());
    // lcs[i][j]: length of the LCS of w[i..] and g[j..].
    let mut lcs = vec![vec![0usize; g.len() + 1]; w.len() + 1];
    for i in (0..w.len()).rev() {
        for j in (0..g.len()).rev() {
            lcs[i][j] = if w[i] == g[j] {
                lcs[i + 1][j + 1] + 1
            } else {
                lcs[i + 1][j].max(lcs[i][j + 1])
            };
        }
    }
    let (mut i, mut j, mut out) = (0, 0, Vec::new());
    while (i < w.len() || j < g.len()) && out.len() <= 40 {
        if i < w.len() && j < g.len() && w[i] == g[j] {
            (i, j) = (i + 1, j + 1);
        } else if i < w.len() && (j == g.len() || lcs[i + 1][j] >= lcs[i][j + 1]) {
            out.push(format!("{:4} - {}", i + 1, w[i]));
            i += 1;
        } else {
            out.push(format!("{:4} + {}", j + 1, g[j]));
            j += 1;
        }
    }
    if out.len() > 40 {
        out.push("...".into());
    }
    out.join("\n")
}

/// The indented lines under `Examples:` (up to the next line that is not indented).
fn examples(help: &str) -> Option<String> {
    let mut lines = help.lines().skip_while(|l| l.trim_end() != "Examples:");
    lines.next()?;
    Some(
        lines
            .take_while(|l| l.is_empty() || l.starts_with(' '))
            .collect::<Vec<_>>()
            .join("\n"),
    )
}

/// Whether `text` has `flag` as a whole word (`--batch` in `--batch x` or `--batch=x`, not in
/// `--batches`).
fn mentions(text: &str, flag: &str) -> bool {
    text.match_indices(flag).any(|(i, _)| {
        let before = text[..i].chars().last();
        let after = text[i + flag.len()..].chars().next();
        !before.is_some_and(|c| c.is_alphanumeric() || c == '-')
            && !after.is_some_and(|c| c.is_alphanumeric() || c == '-' || c == '_')
    })
}

/// Arguments a user can give to `cmd` (not clap's generated --help, not hidden ones), and the
/// global ones only where they are defined (the root).
fn user_args(cmd: &clap::Command, is_root: bool) -> impl Iterator<Item = &clap::Arg> {
    cmd.get_arguments()
        .filter(move |a| !a.is_hide_set() && a.get_id() != "help" && a.get_id() != "version")
        .filter(move |a| is_root || !a.is_global_set())
}

#[test]
fn every_argument_has_help_and_every_command_examples_of_each_flag() {
    let mut failures = Vec::new();
    for (path, cmd) in commands() {
        let shown = if path.is_empty() {
            "oc agent-day2".to_string()
        } else {
            path.join(" ")
        };
        if cmd.get_about().is_none_or(|a| a.to_string().trim().is_empty()) {
            failures.push(format!("{shown}: no about text"));
        }
        let text = help(&path, "--help");
        let Some(ex) = examples(&text) else {
            failures.push(format!("{shown}: no Examples: section"));
            continue;
        };
        if !ex
            .lines()
            .any(|l| !l.trim_start().starts_with('#') && l.contains("agent-day2 "))
        {
            failures.push(format!("{shown}: the Examples: section shows no command line"));
        }
        for a in user_args(&cmd, path.is_empty()) {
            let help_text = a
                .get_long_help()
                .or(a.get_help())
                .map(|h| h.to_string())
                .unwrap_or_default();
            let name = match (a.get_long(), a.get_short()) {
                (Some(l), _) => format!("--{l}"),
                (None, Some(s)) => format!("-{s}"),
                (None, None) => a
                    .get_value_names()
                    .and_then(|v| v.first())
                    .map_or_else(|| a.get_id().to_string().to_uppercase(), |v| v.to_string()),
            };
            if help_text.trim().is_empty() {
                failures.push(format!("{shown}: {name} has no help text"));
            }
            if a.is_positional() {
                continue;
            }
            let in_examples = a.get_long().is_some_and(|l| mentions(&ex, &format!("--{l}")))
                || a.get_short().is_some_and(|s| mentions(&ex, &format!("-{s}")));
            // A switch has no value to show: it must be in an example.
            let switch = matches!(
                a.get_action(),
                clap::ArgAction::SetTrue | clap::ArgAction::SetFalse
            );
            if !in_examples && (switch || !help_text.contains("e.g.")) {
                failures.push(if switch {
                    format!("{shown}: {name} is in no example")
                } else {
                    format!("{shown}: {name} is in no example and its help gives none (`e.g. {name} VALUE`)")
                });
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn help_lines_fit_100_columns() {
    let mut failures = Vec::new();
    for (path, cmd) in commands() {
        // Written text, before clap wraps it: a wrapped example line would break the command.
        let written = [
            cmd.get_long_about(),
            cmd.get_after_help(),
            cmd.get_after_long_help(),
        ];
        for text in written.into_iter().flatten().map(|t| t.to_string()) {
            for line in text.lines().filter(|l| l.chars().count() > WIDTH) {
                failures.push(format!(
                    "{}: a written line is wider than {WIDTH}: {line}",
                    shown(&path)
                ));
            }
        }
        for flag in ["--help", "-h"] {
            for (n, line) in help(&path, flag).lines().enumerate() {
                let w = line.chars().count();
                if w > WIDTH {
                    failures.push(format!(
                        "`{} {flag}` line {}: {w} columns: {line}",
                        path.join(" "),
                        n + 1
                    ));
                }
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn every_command_has_a_snapshot_name_of_its_own() {
    let names: Vec<String> = commands().iter().map(|(p, _)| snapshot_name(p)).collect();
    let mut unique = names.clone();
    unique.sort();
    unique.dedup();
    assert_eq!(unique.len(), names.len(), "{names:?}");
    // The tree really is walked: the commands the README documents are all there.
    for want in [
        "agent-day2.txt",
        "info.txt",
        "add-nodes.txt",
        "add-nodes.batch.delete.txt",
        "approve.txt",
        "monitor.txt",
        "version.txt",
        "completion.txt",
        "migrate.export.txt",
        "migrate.node0-unit.txt",
    ] {
        assert!(names.iter().any(|n| n == want), "{want} not in {names:?}");
    }
}
