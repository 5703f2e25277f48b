//! The house's layering, checked on the source (issue 23 item 1): no import circle among the
//! files of `src/`, clap only under `src/cli/` (and the binary's entry in `lib.rs`/`main.rs`),
//! and the leaves import nothing above them. The rules and the layers are in docs/design.md "Code layout".
//!
//! What counts as an import: a `crate::a::b` path (also inside `use crate::a::{b, c}`), a
//! `super::x` path, and a child module named from its parent (`state::Stage`), in code outside
//! comments and `#[cfg(test)]` items (a test module in the middle of a file hides only itself).
//! Each resolves to the deepest module file it names.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The leaves: modules that may import only each other.
const LEAVES: [&str; 6] = ["error", "text", "net", "duration", "files", "k8s_names"];

/// The layers of docs/design.md "Code layout", bottom first: a module imports only modules of
/// its own layer or below (within a layer, the circle check keeps the order).
const LAYERS: [&[&str]; 6] = [
    &["error", "text", "net", "duration", "files", "k8s_names"],
    &["output", "tempfiles"],
    &["kube"],
    &[
        "cluster",
        "auth",
        "csr",
        "nodes_config",
        "registry",
        "base_iso",
        "ignition",
        "iso",
        "assisted",
        "batch",
    ],
    &["cli"],
    &[
        "info",
        "version",
        "add_nodes",
        "approve",
        "follow",
        "monitor",
        "migrate",
        "permissions",
    ],
];

/// Files that may use clap outside `src/cli/`: the binary's entry.
const CLAP_ENTRY: [&str; 2] = ["", "main"];

/// `text` without the items under `#[cfg(test)]`: each such item up to its `;` when it has no
/// body, else up to the `}` that closes its first `{`. Code after a test module still counts.
fn strip_cfg_test(text: &str) -> String {
    const ATTR: &str = "#[cfg(test)]";
    let mut out = String::new();
    let mut rest = text;
    while let Some(i) = rest.find(ATTR) {
        out.push_str(&rest[..i]);
        let after = &rest[i + ATTR.len()..];
        let end = match (after.find(';'), after.find('{')) {
            (Some(semi), Some(brace)) if semi < brace => semi + 1,
            (_, Some(brace)) => {
                let mut depth = 0usize;
                let mut end = after.len();
                for (k, c) in after[brace..].char_indices() {
                    match c {
                        '{' => depth += 1,
                        '}' => {
                            depth -= 1;
                            if depth == 0 {
                                end = brace + k + 1;
                                break;
                            }
                        }
                        _ => {}
                    }
                }
                end
            }
            (Some(semi), None) => semi + 1,
            (None, None) => after.len(),
        };
        rest = &after[end..];
    }
    out.push_str(rest);
    out
}

struct Tree {
    /// Module path (`a::b`, "" for lib.rs) → its code without comments and test modules.
    code: BTreeMap<String, String>,
}

impl Tree {
    fn read(root: &Path) -> Tree {
        let mut code = BTreeMap::new();
        let mut stack = vec![root.to_path_buf()];
        while let Some(dir) = stack.pop() {
            for e in std::fs::read_dir(&dir).unwrap() {
                let p: PathBuf = e.unwrap().path();
                if p.is_dir() {
                    stack.push(p);
                    continue;
                }
                if p.extension().is_none_or(|x| x != "rs") {
                    continue;
                }
                let rel = p.strip_prefix(root).unwrap().with_extension("");
                let mut parts: Vec<String> = rel.iter().map(|s| s.to_string_lossy().into_owned()).collect();
                if matches!(parts.last().map(String::as_str), Some("mod" | "lib")) {
                    parts.pop();
                }
                let text = std::fs::read_to_string(&p).unwrap();
                let text: String = text
                    .lines()
                    .filter(|l| !l.trim_start().starts_with("//"))
                    .collect::<Vec<_>>()
                    .join("\n");
                code.insert(parts.join("::"), strip_cfg_test(&text));
            }
        }
        Tree { code }
    }

    /// The deepest module that `path` (`a::b::Item`) names, if any.
    fn resolve(&self, path: &str) -> Option<String> {
        let mut parts: Vec<&str> = path.split("::").filter(|p| !p.is_empty()).collect();
        while !parts.is_empty() {
            let k = parts.join("::");
            if self.code.contains_key(&k) {
                return Some(k);
            }
            parts.pop();
        }
        None
    }

    /// The modules `m` imports (itself excluded).
    fn imports(&self, m: &str) -> BTreeSet<String> {
        let code = &self.code[m];
        let parent = m.rsplit_once("::").map(|(p, _)| p).unwrap_or("");
        let mut out = BTreeSet::new();
        for (prefix, base) in [("crate::", String::new()), ("super::", parent.to_string())] {
            let mut rest = code.as_str();
            while let Some(i) = rest.find(prefix) {
                let before = rest[..i].chars().last();
                rest = &rest[i + prefix.len()..];
                if before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == ':') {
                    continue;
                }
                let path: String = rest
                    .chars()
                    .take_while(|c| c.is_alphanumeric() || *c == '_' || *c == ':')
                    .collect();
                let path = path.trim_end_matches(':');
                let join = |p: &str| {
                    if base.is_empty() {
                        p.to_string()
                    } else {
                        format!("{base}::{p}")
                    }
                };
                // `use crate::a::{b, c::d}` and `use super::{b, c}`: each item of the group
                // (the latter imports siblings, not the parent).
                let after = &rest[path.len()..];
                let group = if path.is_empty() {
                    after.strip_prefix('{')
                } else {
                    after.strip_prefix("::{")
                };
                if let Some(group) = group {
                    if let Some(end) = group.find('}') {
                        for item in group[..end].split(',') {
                            let item = item.split_whitespace().next().unwrap_or("");
                            let item = if path.is_empty() {
                                item.to_string()
                            } else {
                                format!("{path}::{item}")
                            };
                            if let Some(t) = self.resolve(&join(&item)) {
                                out.insert(t);
                            }
                        }
                    }
                }
                let whole = if path.is_empty() {
                    // `super::*`: the parent itself.
                    (group.is_none()).then(|| base.clone())
                } else {
                    Some(join(path))
                };
                if let Some(t) = whole.and_then(|w| self.resolve(&w)) {
                    out.insert(t);
                }
            }
        }
        // A child module named from its parent: `child::Item`.
        for child in self
            .code
            .keys()
            .filter(|k| k.rsplit_once("::").map(|(p, _)| p).unwrap_or("") == m && !k.is_empty())
        {
            let name = child.rsplit("::").next().unwrap();
            let pat = format!("{name}::");
            let mut rest = code.as_str();
            while let Some(i) = rest.find(&pat) {
                let before = rest[..i].chars().last();
                rest = &rest[i + pat.len()..];
                if !before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == ':') {
                    out.insert(child.clone());
                    break;
                }
            }
        }
        out.remove(m);
        out
    }
}

fn src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

/// Strongly connected components of more than one module (Tarjan).
fn circles(edges: &BTreeMap<String, BTreeSet<String>>) -> Vec<Vec<String>> {
    struct S<'a> {
        edges: &'a BTreeMap<String, BTreeSet<String>>,
        index: BTreeMap<&'a str, usize>,
        low: BTreeMap<&'a str, usize>,
        stack: Vec<&'a str>,
        on: BTreeSet<&'a str>,
        out: Vec<Vec<String>>,
    }
    fn visit<'a>(s: &mut S<'a>, v: &'a str) {
        let n = s.index.len();
        s.index.insert(v, n);
        s.low.insert(v, n);
        s.stack.push(v);
        s.on.insert(v);
        for w in s.edges.get(v).into_iter().flatten() {
            let w = w.as_str();
            if !s.index.contains_key(w) {
                visit(s, w);
                let lw = s.low[w];
                let lv = s.low[v];
                s.low.insert(v, lv.min(lw));
            } else if s.on.contains(w) {
                let iw = s.index[w];
                let lv = s.low[v];
                s.low.insert(v, lv.min(iw));
            }
        }
        if s.low[v] == s.index[v] {
            let mut c = Vec::new();
            loop {
                let w = s.stack.pop().unwrap();
                s.on.remove(w);
                c.push(w.to_string());
                if w == v {
                    break;
                }
            }
            if c.len() > 1 {
                c.sort();
                s.out.push(c);
            }
        }
    }
    let mut s = S {
        edges,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: vec![],
        on: BTreeSet::new(),
        out: vec![],
    };
    for v in edges.keys() {
        if !s.index.contains_key(v.as_str()) {
            visit(&mut s, v);
        }
    }
    s.out
}

fn edges(t: &Tree) -> BTreeMap<String, BTreeSet<String>> {
    t.code
        .keys()
        .filter(|m| !m.is_empty())
        .map(|m| (m.clone(), t.imports(m)))
        .collect()
}

/// Between the crate's top-level modules (`approve`, `csr`, `kube`, ...), and between single
/// files (a parent module and its children counted apart): none.
#[test]
fn no_import_circle_in_src() {
    let t = Tree::read(&src());
    assert!(t.code.len() > 50, "read {} files", t.code.len());
    let mut top: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (m, to) in edges(&t) {
        let head = |x: &str| x.split("::").next().unwrap().to_string();
        let e = top.entry(head(&m)).or_default();
        e.extend(to.iter().map(|x| head(x)).filter(|x| *x != head(&m)));
    }
    let c = circles(&top);
    assert!(
        c.is_empty(),
        "top-level modules that import each other in a circle: {c:?}"
    );
    let files = file_level_circles(&t);
    assert!(
        files.is_empty(),
        "files that import each other in a circle: {files:?}"
    );
}

/// The simulator's crate (tests/sim) as well: no two of its files import each other, directly
/// or round a circle (issue 23: it had four circles, one of seven files).
#[test]
fn no_import_circle_in_the_simulator() {
    let t = Tree::read(&Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/sim/src"));
    assert!(t.code.len() > 30, "read {} files", t.code.len());
    let files = file_level_circles(&t);
    assert!(
        files.is_empty(),
        "files that import each other in a circle: {files:?}"
    );
}

/// The circles among single files (a parent module and its children counted apart).
fn file_level_circles(t: &Tree) -> Vec<Vec<String>> {
    circles(&edges(t))
}

#[test]
fn the_check_finds_a_circle() {
    // The checker itself: two files that import each other, and a parent whose child uses it.
    let mut t = Tree {
        code: BTreeMap::new(),
    };
    t.code.insert("a".into(), "use crate::b::X;".into());
    t.code.insert("b".into(), "fn f() { crate::a::g() }".into());
    t.code.insert("p".into(), "pub use c::Y;".into());
    t.code.insert("p::c".into(), "use super::Z;".into());
    t.code.insert("q".into(), "use crate::a::{self};".into());
    // `use super::{x, y}` imports the siblings, not the parent: no circle r ↔ r::d.
    t.code.insert("r".into(), "use d::W;".into());
    t.code.insert("r::d".into(), "use super::{e};".into());
    t.code.insert("r::e".into(), "pub struct V;".into());
    let c = circles(&edges(&t));
    assert_eq!(
        c,
        [
            vec!["a".to_string(), "b".to_string()],
            vec!["p".to_string(), "p::c".to_string()]
        ]
    );
}

/// The print macros panic on a closed pipe (`migrate import 2>&1 | head -1` exited 101 in
/// the middle of an import): stdout goes through `output::emit`, stderr through `say!`/`say_part!`
/// (src/text.rs), which ignore it. Test code may print.
#[test]
fn no_panicking_print_macros_in_src() {
    let t = Tree::read(&src());
    let mut found = Vec::new();
    for (m, code) in &t.code {
        for mac in ["println!", "print!", "eprintln!", "eprint!", "dbg!"] {
            let hit = code
                .match_indices(mac)
                .any(|(i, _)| !code[..i].ends_with(|c: char| c.is_alphanumeric() || c == '_' || c == ':'));
            if hit {
                found.push(format!("{m}: {mac}"));
            }
        }
    }
    assert!(
        found.is_empty(),
        "print macros in src/ (use crate::say! or output::emit): {found:?}"
    );
}

#[test]
fn clap_only_under_src_cli() {
    let t = Tree::read(&src());
    let outside: Vec<&String> = t
        .code
        .iter()
        .filter(|(m, _)| !m.starts_with("cli") && !CLAP_ENTRY.contains(&m.as_str()))
        .filter(|(_, code)| code.contains("clap::") || code.contains("use clap") || code.contains("::clap"))
        .map(|(m, _)| m)
        .collect();
    assert!(outside.is_empty(), "clap used outside src/cli/: {outside:?}");
}

#[test]
fn leaves_import_only_leaves() {
    let t = Tree::read(&src());
    for leaf in LEAVES {
        assert!(t.code.contains_key(leaf), "leaf {leaf} exists");
        let above: Vec<String> = t
            .imports(leaf)
            .into_iter()
            .filter(|m| !LEAVES.contains(&m.split("::").next().unwrap()))
            .collect();
        assert!(above.is_empty(), "leaf {leaf} imports {above:?}");
    }
}

#[test]
fn modules_import_only_their_layer_or_below() {
    let t = Tree::read(&src());
    let layer = |m: &str| {
        LAYERS
            .iter()
            .position(|l| l.contains(&m.split("::").next().unwrap()))
    };
    let mut up = Vec::new();
    // The binary's entry (`main.rs`) sits above every layer.
    for (m, to) in edges(&t).into_iter().filter(|(m, _)| m != "main") {
        let Some(lm) = layer(&m) else {
            up.push(format!("{m} is in no layer of docs/design.md \"Code layout\""));
            continue;
        };
        for x in to {
            if layer(&x).is_none_or(|lx| lx > lm) {
                up.push(format!("{m} imports {x}"));
            }
        }
    }
    assert!(up.is_empty(), "imports upward: {up:#?}");
}

/// A `#[cfg(test)]` item hides only itself: an import after it still counts (a trial hid one
/// behind `#[cfg(test)] const _T: () = ();`).
#[test]
fn a_test_item_hides_only_itself() {
    let code = "use crate::a;\n#[cfg(test)]\nconst _T: () = ();\nuse crate::b;\n#[cfg(test)]\nmod tests {\n    use crate::c;\n    fn f() { if true { } }\n}\nuse crate::d;\n";
    let kept = strip_cfg_test(code);
    for (path, expected) in [
        ("crate::a", true),
        ("crate::b", true),
        ("crate::c", false),
        ("crate::d", true),
    ] {
        assert_eq!(kept.contains(path), expected, "{path} in {kept:?}");
    }
}

/// The crate root re-exports no module: `crate::x` for a module deeper down would be read as an
/// import of the root and hide the edge (a trial found `pub use cli::{completion, kube_flags}`
/// doing so).
#[test]
fn the_crate_root_re_exports_no_module() {
    let t = Tree::read(&src());
    let reexports: Vec<&str> = t.code[""]
        .lines()
        .filter(|l| l.trim_start().starts_with("pub use"))
        .collect();
    assert!(reexports.is_empty(), "lib.rs re-exports: {reexports:?}");
}
