//! Test helpers for node-joiner's acceptance data (openshift/installer's
//! `cmd/node-joiner/testdata`, found by `agent_day2_sim::upstream::node_joiner_testdata`; txtar
//! files of a command script and named sections), shared by tests/ignition.rs (the
//! Ignition we build) and tests/add_nodes.rs (the ISO the binary writes). Included with
//! `#[path = "support/upstream.rs"] mod upstream;`.

#![allow(dead_code)]

use std::collections::BTreeMap;

use agent_day2_sim::boot::ignition as sim_ignition;
use serde_json::Value;

/// node-joiner's testdata folder (panics saying what provides it where it is not there: the
/// tests using it are `#[ignore]`d for that reason).
pub fn testdata() -> std::path::PathBuf {
    agent_day2_sim::upstream::node_joiner_testdata().unwrap_or_else(|why| panic!("{why}"))
}

/// One acceptance case: its file name, the script before the first section, the sections.
pub struct Case {
    pub name: String,
    pub head: String,
    pub files: BTreeMap<String, String>,
}

impl Case {
    /// The script's commands (blank lines and comments left out), each split into words.
    pub fn commands(&self) -> Vec<Vec<String>> {
        self.head
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty() && !l.starts_with('#'))
            .map(words)
            .collect()
    }

    /// The section named `name` (panics naming the case when there is none).
    pub fn section(&self, name: &str) -> String {
        self.files
            .get(name)
            .unwrap_or_else(|| panic!("{}: no section {name}", self.name))
            .clone()
    }
}

/// The acceptance cases (`*.txt`, sorted by name). Asserts there is at least one.
pub fn cases() -> Vec<Case> {
    let dir = testdata();
    let entries = std::fs::read_dir(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
    let mut paths: Vec<_> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "txt"))
        .collect();
    paths.sort();
    assert!(!paths.is_empty());
    paths
        .iter()
        .map(|p| {
            let (head, files) = txtar(&std::fs::read_to_string(p).unwrap());
            let name = p.file_name().unwrap().to_string_lossy().into_owned();
            Case { name, head, files }
        })
        .collect()
}

/// A txtar archive: the leading comment/command text and the named files.
pub fn txtar(text: &str) -> (String, BTreeMap<String, String>) {
    let mut files = BTreeMap::new();
    let mut head = String::new();
    let mut cur: Option<(String, String)> = None;
    for line in text.split_inclusive('\n') {
        let t = line.trim_end_matches('\n');
        if let Some(name) = t.strip_prefix("-- ").and_then(|r| r.strip_suffix(" --")) {
            if let Some((n, c)) = cur.take() {
                files.insert(n, c);
            }
            cur = Some((name.trim().to_string(), String::new()));
        } else if let Some((_, c)) = cur.as_mut() {
            c.push_str(line);
        } else {
            head.push_str(line);
        }
    }
    if let Some((n, c)) = cur {
        files.insert(n, c);
    }
    (head, files)
}

/// Splits a script line into words, honouring single quotes.
pub fn words(line: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let (mut quoted, mut any) = (false, false);
    for ch in line.chars() {
        match ch {
            '\'' => {
                quoted = !quoted;
                any = true;
            }
            c if c.is_whitespace() && !quoted => {
                if any {
                    out.push(std::mem::take(&mut cur));
                    any = false;
                }
            }
            c => {
                cur.push(c);
                any = true;
            }
        }
    }
    if any {
        out.push(cur);
    }
    out
}

/// Objects of `setup/default` plus a case's `setup/*` files (`$TEST_IMAGE` replaced by
/// `release`). A case object with the same kind and name replaces the default one, keeping the
/// default's `status` unless it has its own (status is a subresource: updating an object through
/// the API does not change it) and, when `keep_labels`, the default's metadata labels (roles)
/// unless it has its own.
pub fn upstream_objects(files: &BTreeMap<String, String>, release: &str, keep_labels: bool) -> Vec<Value> {
    let mut objs =
        agent_day2_sim::seed::load_objects_dir(&testdata().join("setup/default"), release).unwrap();
    for (name, t) in files.iter().filter(|(n, _)| n.starts_with("setup/")) {
        for mut d in serde_saphyr::from_multiple::<Value>(&t.replace("$TEST_IMAGE", release))
            .unwrap_or_else(|e| panic!("{name}: {e}"))
        {
            if d.is_null() {
                continue;
            }
            match objs
                .iter_mut()
                .find(|o| o["kind"] == d["kind"] && o["metadata"]["name"] == d["metadata"]["name"])
            {
                Some(o) => {
                    if d.get("status").is_none() {
                        if let Some(st) = o.get("status").cloned() {
                            d["status"] = st;
                        }
                    }
                    if keep_labels && d["metadata"].get("labels").is_none() {
                        if let Some(l) = o["metadata"].get("labels").cloned() {
                            d["metadata"]["labels"] = l;
                        }
                    }
                    *o = d;
                }
                None => objs.push(d),
            }
        }
    }
    objs
}

/// Go's zero values that node-joiner's marshalling writes and ours leaves out.
pub fn drop_empty(v: &mut Value) {
    if let Value::Object(m) = v {
        m.retain(|_, x| x.as_str() != Some(""));
        for x in m.values_mut() {
            drop_empty(x);
        }
    }
}

/// Runs one of the script's Ignition commands (`isoCmpRegEx`, `isoIgnitionContains`,
/// `isoIgnitionUser`, `isoCmp`) against `ign`, the Ignition of the case's image, which
/// `ign` gives when asked (so that a case without one fails only on such a command).
/// Returns false, asserting nothing, for any other command.
pub fn check_ignition_command<'a>(
    case: &Case,
    w: &[String],
    ign: impl FnOnce() -> &'a sim_ignition::Config,
) -> bool {
    let name = &case.name;
    let get = |ign: &sim_ignition::Config, path: &str| {
        ign.text(path)
            .unwrap_or_else(|| panic!("{name}: {path} is not in the Ignition"))
    };
    match w[0].as_str() {
        "isoCmpRegEx" => {
            let re = regex::Regex::new(case.section(&w[3]).trim_end()).unwrap();
            let got = get(ign(), &w[2]);
            assert!(
                re.is_match(&got),
                "{name}: {} does not match {:?}:\n{got}",
                w[2],
                re.as_str()
            );
        }
        "isoIgnitionContains" => {
            assert!(ign().files.contains_key(&w[2]), "{name}: {} missing", w[2]);
        }
        "isoIgnitionUser" => {
            assert_eq!(
                ign().ssh_keys.get(&w[2]),
                Some(&vec![w[3].clone()]),
                "{name}: SSH key of {}",
                w[2]
            );
        }
        "isoCmp" if w[2].ends_with(".yaml") => {
            let mut want: Value = serde_saphyr::from_str(&case.section(&w[3])).unwrap();
            let mut got: Value = serde_saphyr::from_str(&get(ign(), &w[2])).unwrap();
            drop_empty(&mut want);
            drop_empty(&mut got);
            // status is written by the server, never by a manifest's author.
            for k in ["apiVersion", "kind", "metadata", "spec"] {
                assert_eq!(got[k], want[k], "{name}: {} {k}", w[2]);
            }
        }
        "isoCmp" => {
            assert_eq!(
                get(ign(), &w[2]).trim_end(),
                case.section(&w[3]).trim_end(),
                "{name}: {}",
                w[2]
            );
        }
        _ => return false,
    }
    true
}
