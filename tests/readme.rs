//! Documented facts a user acts on: the add-nodes examples of docs/add-nodes.md (and the
//! README's) can be run one after another, and the exit-code table of docs/exit-codes.md is the
//! one the binary uses (issue 15 §5).

use std::collections::BTreeMap;

use agent_day2::error::exit;

const README: &str = include_str!("../README.md");
const ADD_NODES: &str = include_str!("../docs/add-nodes.md");
const EXIT_CODES: &str = include_str!("../docs/exit-codes.md");

/// A document's example command lines of `oc agent-day2 add-nodes` (a `\` continuation joined).
fn add_nodes_examples(doc: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur: Option<String> = None;
    for line in doc.lines() {
        let t = line.trim();
        if let Some(c) = cur.as_mut() {
            c.push(' ');
            c.push_str(t.trim_end_matches('\\'));
            if !t.ends_with('\\') {
                out.push(cur.take().unwrap());
            }
            continue;
        }
        if line.starts_with("    oc agent-day2 add-nodes ") {
            if t.ends_with('\\') {
                cur = Some(t.trim_end_matches('\\').to_string());
            } else {
                out.push(t.to_string());
            }
        }
    }
    out
}

/// `--dir X` of a command line (comment dropped).
fn dir_of(cmd: &str) -> Option<String> {
    let words: Vec<&str> = cmd.split('#').next().unwrap().split_whitespace().collect();
    words
        .windows(2)
        .find(|w| w[0] == "--dir")
        .map(|w| w[1].to_string())
}

/// Every add-nodes example of a document that writes files writes them to its own `--dir`, so
/// running them in order does not stop at "already exists" (exit 3). docs/add-nodes.md holds the
/// full set; the README shows one of them.
#[test]
fn add_nodes_examples_use_distinct_dirs() {
    for (doc, text, min_examples, min_dirs) in [
        ("docs/add-nodes.md", ADD_NODES, 5, 4),
        ("README.md", README, 1, 1),
    ] {
        let ex = add_nodes_examples(text);
        assert!(ex.len() >= min_examples, "{doc}: examples not found: {ex:#?}");
        let mut seen: BTreeMap<String, String> = BTreeMap::new();
        for cmd in &ex {
            // --dry-run writes nothing; batch list/delete write no files.
            if cmd.contains("--dry-run") || cmd.contains(" batch ") {
                continue;
            }
            let Some(dir) = dir_of(cmd) else {
                panic!("{doc}: example without --dir writes to the current directory: {cmd}");
            };
            if let Some(prev) = seen.insert(dir.clone(), cmd.clone()) {
                panic!("{doc}: --dir {dir} is used by two examples:\n  {prev}\n  {cmd}");
            }
        }
        assert!(seen.len() >= min_dirs, "{doc}: {seen:#?}");
    }
}

/// The exit-code table of docs/exit-codes.md lists every code of `agent_day2::error::exit`,
/// and 3 names an output file that already exists (what add-nodes returns then:
/// tests/add_nodes.rs checks the exit).
#[test]
fn exit_code_table_matches_the_code() {
    let table: BTreeMap<u8, String> = EXIT_CODES
        .lines()
        .skip_while(|l| *l != "# Exit codes")
        .skip(1)
        .take_while(|l| !l.starts_with("## "))
        .filter_map(|l| {
            let cells: Vec<&str> = l.split('|').map(str::trim).collect();
            (cells.len() >= 3)
                .then(|| cells[1].parse::<u8>().ok().map(|c| (c, cells[2].to_string())))
                .flatten()
        })
        .collect();
    for (code, what) in [
        (exit::OK, "done"),
        (exit::UNEXPECTED, "unexpected"),
        (exit::USAGE, "usage"),
        (exit::INVALID_INPUT, "invalid input"),
        (exit::CLUSTER_ACCESS, "cluster access"),
        (exit::TIMEOUT, "timed out"),
        (exit::INSTALL_FAILED, "installation failed"),
        (exit::CSRS, "CSRs"),
        (exit::DECLINED, "declined"),
    ] {
        let row = table
            .get(&code)
            .unwrap_or_else(|| panic!("exit {code} missing: {table:#?}"));
        assert!(row.contains(what), "exit {code}: {row:?} does not say {what:?}");
    }
    let three = &table[&exit::INVALID_INPUT];
    assert!(
        three.contains("output file that already exists") && three.contains("--force"),
        "{three}"
    );
}
