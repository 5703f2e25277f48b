//! Shell completion: `completion SHELL` prints a clap_complete script for the binary, and the
//! hidden `__complete WORDS... CURRENT` answers kubectl's plugin completion protocol
//! (kubectl 1.26+ runs `kubectl_complete-agent_day2` from PATH, which execs
//! `kubectl-agent_day2 __complete "$@"`; research/plugin.md §1).
//!
//! Protocol (Cobra's `__complete`): the arguments are the words after the plugin name, the last
//! one being the word under the cursor (`""` when starting a new word). The answer is one
//! candidate per line, optionally `candidate<TAB>description`, then a last line `:<directive>`:
//! 4 (`ShellCompDirectiveNoFileComp`) when only the listed candidates make sense, 0 (default)
//! when the shell should also offer file names (values of path flags).

use std::io::Write;

use clap::{Arg, ArgAction, CommandFactory, ValueHint};

use crate::cli::Cli;

/// Cobra's ShellCompDirectiveDefault: the shell may also complete file names.
pub const DIRECTIVE_DEFAULT: u8 = 0;
/// Cobra's ShellCompDirectiveNoFileComp: offer only the listed candidates.
pub const DIRECTIVE_NO_FILE: u8 = 4;

/// Candidates for `words` (the last one is the word being completed) and the Cobra directive.
/// Candidates are `name` or `name\tdescription`. Subcommands and flags come from the clap
/// definition ([`Cli`]), so they never drift from the parser.
pub fn candidates(words: &[String]) -> (Vec<String>, u8) {
    let mut root = Cli::command();
    // Adds the generated --help flags and `help` subcommand, as the parser sees them.
    root.build();
    let (current, before) = match words.split_last() {
        Some((c, b)) => (c.as_str(), b),
        None => ("", &[][..]),
    };
    // Walk the finished words: descend into subcommands, step over flags and their values.
    let mut cmd = &root;
    let mut globals: Vec<&Arg> = global_args(&root);
    let mut pending_value: Option<&Arg> = None;
    for w in before {
        if pending_value.take().is_some() {
            continue;
        }
        if let Some(long) = w.strip_prefix("--") {
            if !long.contains('=') {
                pending_value =
                    find_flag(cmd, &globals, |a| a.get_long() == Some(long)).filter(|a| takes_value(a));
            }
        } else if let Some(short) = w.strip_prefix('-').filter(|s| s.chars().count() == 1) {
            let c = short.chars().next();
            pending_value = find_flag(cmd, &globals, |a| a.get_short() == c).filter(|a| takes_value(a));
        } else if let Some(sub) = cmd.find_subcommand(w) {
            cmd = sub;
            globals.extend(global_args(sub));
        }
    }
    if let Some(arg) = pending_value {
        return value_candidates(arg, current);
    }
    let mut out = Vec::new();
    if current.starts_with('-') {
        let mut seen = std::collections::BTreeSet::new();
        for a in cmd.get_arguments().chain(globals.iter().copied()) {
            if a.is_hide_set() {
                continue;
            }
            if let Some(long) = a.get_long() {
                let flag = format!("--{long}");
                if flag.starts_with(current) && seen.insert(flag.clone()) {
                    out.push(with_help(flag, a.get_help()));
                }
            }
        }
    } else {
        for s in cmd.get_subcommands() {
            if !s.is_hide_set() && s.get_name().starts_with(current) {
                out.push(with_help(s.get_name().to_string(), s.get_about()));
            }
        }
    }
    (out, DIRECTIVE_NO_FILE)
}

fn global_args(cmd: &clap::Command) -> Vec<&Arg> {
    cmd.get_arguments().filter(|a| a.is_global_set()).collect()
}

fn find_flag<'a>(
    cmd: &'a clap::Command,
    globals: &[&'a Arg],
    pred: impl Fn(&Arg) -> bool,
) -> Option<&'a Arg> {
    cmd.get_arguments()
        .find(|a| pred(a))
        .or_else(|| globals.iter().copied().find(|a| pred(a)))
}

fn takes_value(a: &Arg) -> bool {
    matches!(a.get_action(), ArgAction::Set | ArgAction::Append)
}

fn value_candidates(arg: &Arg, current: &str) -> (Vec<String>, u8) {
    let values: Vec<String> = arg
        .get_possible_values()
        .iter()
        .filter(|v| !v.is_hide_set() && v.get_name().starts_with(current))
        .map(|v| with_help(v.get_name().to_string(), v.get_help()))
        .collect();
    if !values.is_empty() {
        return (values, DIRECTIVE_NO_FILE);
    }
    match arg.get_value_hint() {
        ValueHint::AnyPath | ValueHint::FilePath | ValueHint::DirPath => (vec![], DIRECTIVE_DEFAULT),
        _ => (vec![], DIRECTIVE_NO_FILE),
    }
}

/// `name<TAB>first line of help` (Cobra shows the description next to the candidate).
fn with_help(name: String, help: Option<&clap::builder::StyledStr>) -> String {
    match help
        .map(|h| h.to_string())
        .and_then(|h| h.lines().next().map(str::to_string))
    {
        Some(h) if !h.is_empty() => format!("{name}\t{h}"),
        _ => name,
    }
}

/// Prints the answer to `__complete WORDS...` in Cobra's format on stdout. Never fails the shell:
/// a broken pipe is ignored.
pub fn run_complete(words: &[String]) -> u8 {
    let (cands, directive) = candidates(words);
    let mut out = std::io::stdout().lock();
    for c in cands {
        let _ = writeln!(out, "{c}");
    }
    let _ = writeln!(out, ":{directive}");
    crate::error::exit::OK
}

/// Prints the completion script for `shell` for the binary `kubectl-agent_day2` (completes
/// `kubectl-agent_day2 <TAB>` when run directly; `kubectl agent-day2 <TAB>` goes through
/// kubectl and `scripts/kubectl_complete-agent_day2` instead).
pub fn run_script(shell: clap_complete::Shell) -> u8 {
    let mut cmd = Cli::command();
    clap_complete::generate(shell, &mut cmd, "kubectl-agent_day2", &mut std::io::stdout());
    crate::error::exit::OK
}
