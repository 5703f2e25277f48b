//! A small systemd for the node runner: reads the unit files of a node's Ignition and runs the
//! enabled ones (and what they pull in) in systemd's order, every command as the unit writes it.
//!
//! What is honoured (systemd.unit(5), systemd.service(5), systemd.exec(5)):
//! - `[Unit]` `Requires=`, `Wants=`, `After=`, `Before=`, `ConditionPathExists=` (also `!`),
//!   `ConditionPathIsDirectory=`, `ConditionFileNotEmpty=`; an unknown `Condition*=`/`Assert*=`
//!   stops the boot (it would be judged by rules nobody wrote here).
//! - `[Service]` `Type=` (`simple`, `exec`, `oneshot`, `notify`), `RemainAfterExit=`,
//!   `Environment=`, `EnvironmentFile=` (a leading `-`: optional), `ExecStartPre=`,
//!   `ExecStart=`, `ExecStartPost=` (prefixes `-`, `@`, `+`, `!`, `:`), `Restart=`
//!   (`no`, `on-failure`, `always`), `RestartSec=`, `TimeoutStartSec=` (notify), and the
//!   manager's `DefaultEnvironment=` from `/etc/systemd/system.conf(.d)`.
//! - `[Install]` `WantedBy=`/`RequiredBy=` of enabled units.
//! - Command lines: systemd's quoting, `${VAR}` (one word) and `$VAR` (split on whitespace),
//!   `%%`, `%n`, `%N`, `%i`, `%t`; an empty assignment resets a list (drop-ins).
//!
//! Not simulated: units the live system itself provides (targets, `NetworkManager.service`,
//! ...) count as started; stop propagation along `Requires=` after a unit dies is not done;
//! `ExecStop=` runs when the runner stops a unit for a restart, and at the shutdown of
//! `run-node --reboot` (every active unit, the last started first, each within its
//! `TimeoutStopSec=`).
//!
//! A start job of a unit in auto-restart stays pending (as in systemd), so units ordered after
//! it wait; after `max_failures` failed starts the unit is given up: the boot fails naming it.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// One parsed unit file: directives per section, in order (repeated keys kept).
#[derive(Debug, Clone, Default)]
pub struct UnitFile {
    /// e.g. `agent.service`.
    pub name: String,
    /// `[Unit]` key/values.
    pub unit: Vec<(String, String)>,
    /// `[Service]` key/values.
    pub service: Vec<(String, String)>,
    /// `[Install]` key/values.
    pub install: Vec<(String, String)>,
}

impl UnitFile {
    /// Parses unit text (contents then drop-ins, as [`crate::boot::ignition::Unit::text`]
    /// holds them). Lines ending in `\` continue; `#` and `;` start comments.
    pub fn parse(name: &str, text: &str) -> UnitFile {
        let mut out = UnitFile {
            name: name.to_string(),
            ..Default::default()
        };
        let mut section = String::new();
        let mut pending = String::new();
        for raw in text.lines() {
            let line = raw.trim_end();
            if let Some(stripped) = line.strip_suffix('\\') {
                pending.push_str(stripped);
                pending.push(' ');
                continue;
            }
            pending.push_str(line);
            let full = std::mem::take(&mut pending);
            let l = full.trim();
            if l.is_empty() || l.starts_with('#') || l.starts_with(';') {
                continue;
            }
            if l.starts_with('[') && l.ends_with(']') {
                section = l[1..l.len() - 1].to_string();
                continue;
            }
            let Some((k, v)) = l.split_once('=') else {
                continue;
            };
            let kv = (k.trim().to_string(), v.trim().to_string());
            match section.as_str() {
                "Unit" => out.unit.push(kv),
                "Service" => out.service.push(kv),
                "Install" => out.install.push(kv),
                _ => {}
            }
        }
        out
    }

    fn list(kvs: &[(String, String)], key: &str, split: bool) -> Vec<String> {
        let mut out = Vec::new();
        for (k, v) in kvs {
            if k != key {
                continue;
            }
            if v.is_empty() {
                out.clear(); // an empty assignment resets the list
            } else if split {
                out.extend(v.split_whitespace().map(String::from));
            } else {
                out.push(v.clone());
            }
        }
        out
    }

    fn last<'a>(kvs: &'a [(String, String)], key: &str) -> Option<&'a str> {
        kvs.iter().rev().find(|(k, _)| k == key).map(|(_, v)| v.as_str())
    }

    /// Space-separated unit names of a `[Unit]` directive (all its occurrences).
    pub fn deps(&self, key: &str) -> Vec<String> {
        Self::list(&self.unit, key, true)
    }

    /// Every value of a `[Service]` directive, in order (empty assignments reset).
    pub fn service_all(&self, key: &str) -> Vec<String> {
        Self::list(&self.service, key, false)
    }

    /// The last value of a `[Service]` directive.
    pub fn service_last(&self, key: &str) -> Option<&str> {
        Self::last(&self.service, key)
    }

    /// Unit names of an `[Install]` directive.
    pub fn install_deps(&self, key: &str) -> Vec<String> {
        Self::list(&self.install, key, true)
    }
}

/// systemd's boolean spellings.
pub fn parse_bool(v: &str) -> bool {
    matches!(v.to_ascii_lowercase().as_str(), "1" | "yes" | "true" | "on")
}

/// A time span as systemd writes it (`5`, `5s`, `100ms`, `1min 30s`, `infinity`).
pub fn parse_timespan(v: &str) -> Option<Duration> {
    let v = v.trim();
    if v == "infinity" {
        return Some(Duration::from_secs(365 * 24 * 3600));
    }
    let mut total = 0f64;
    for word in v.split_whitespace() {
        let i = word
            .find(|c: char| !c.is_ascii_digit() && c != '.')
            .unwrap_or(word.len());
        let (n, unit) = word.split_at(i);
        let n: f64 = n.parse().ok()?;
        let mult = match unit {
            "" | "s" | "sec" | "second" | "seconds" => 1.0,
            "ms" | "msec" => 0.001,
            "us" | "usec" => 0.000_001,
            "m" | "min" | "minute" | "minutes" => 60.0,
            "h" | "hr" | "hour" | "hours" => 3600.0,
            _ => return None,
        };
        total += n * mult;
    }
    Some(Duration::from_secs_f64(total))
}

/// `KEY=VALUE` assignments of an `EnvironmentFile=` (systemd rules: `#`/`;` comments, quotes
/// stripped, backslash-newline continues, `export` is not special).
pub fn env_file(text: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut pending = String::new();
    for raw in text.lines() {
        if let Some(s) = raw.strip_suffix('\\') {
            pending.push_str(s);
            continue;
        }
        pending.push_str(raw);
        let line = std::mem::take(&mut pending);
        let l = line.trim_start();
        if l.is_empty() || l.starts_with('#') || l.starts_with(';') {
            continue;
        }
        let Some((k, v)) = l.split_once('=') else {
            continue;
        };
        let v = v.trim();
        let v = if v.len() >= 2
            && ((v.starts_with('"') && v.ends_with('"')) || (v.starts_with('\'') && v.ends_with('\'')))
        {
            v[1..v.len() - 1].to_string()
        } else {
            v.to_string()
        };
        out.push((k.trim().to_string(), v));
    }
    out
}

/// `Environment=` value: space-separated `KEY=VALUE` words with systemd quoting.
fn environment_words(v: &str) -> Vec<(String, String)> {
    split_words(v)
        .unwrap_or_default()
        .into_iter()
        .filter_map(|w| w.split_once('=').map(|(k, v)| (k.to_string(), v.to_string())))
        .collect()
}

/// Splits a command line as systemd does: whitespace separates words, double and single quotes
/// group, backslash escapes (`\\`, `\"`, `\'`, `\n`, `\t`, `\s`). Errors: an unclosed quote.
pub fn split_words(s: &str) -> Result<Vec<String>, String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut in_word = false;
    let mut quote: Option<char> = None;
    let mut it = s.chars().peekable();
    while let Some(c) = it.next() {
        match (quote, c) {
            (_, '\\') => {
                in_word = true;
                match it.next() {
                    Some('n') => cur.push('\n'),
                    Some('t') => cur.push('\t'),
                    Some('s') => cur.push(' '),
                    Some(o) => cur.push(o),
                    None => {}
                }
            }
            (None, '"') | (None, '\'') => {
                quote = Some(c);
                in_word = true;
            }
            (Some(q), c) if c == q => quote = None,
            (None, c) if c.is_whitespace() => {
                if in_word {
                    out.push(std::mem::take(&mut cur));
                    in_word = false;
                }
            }
            (_, c) => {
                cur.push(c);
                in_word = true;
            }
        }
    }
    if quote.is_some() {
        return Err(format!("unclosed quote in {s:?}"));
    }
    if in_word {
        out.push(cur);
    }
    Ok(out)
}

/// Expands `%` specifiers of a unit (`%%`, `%n`, `%N`, `%p`, `%i`, `%t`).
fn specifiers(s: &str, unit: &str) -> String {
    let stem = unit.rsplit_once('.').map(|(a, _)| a).unwrap_or(unit);
    let (prefix, inst) = stem.split_once('@').unwrap_or((stem, ""));
    let mut out = String::new();
    let mut it = s.chars();
    while let Some(c) = it.next() {
        if c != '%' {
            out.push(c);
            continue;
        }
        match it.next() {
            Some('%') => out.push('%'),
            Some('n') => out.push_str(unit),
            Some('N') => out.push_str(stem),
            Some('p') => out.push_str(prefix),
            Some('i') => out.push_str(inst),
            Some('t') => out.push_str("/run"),
            Some(o) => {
                out.push('%');
                out.push(o);
            }
            None => out.push('%'),
        }
    }
    out
}

/// One `Exec*=` line, parsed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExecLine {
    /// `-`: a failing exit status is ignored.
    pub ignore_failure: bool,
    /// The argument vector after variable expansion (argv[0] as written, or replaced by `@`).
    pub argv: Vec<String>,
    /// The program to run (argv[0] unless `@` gave another).
    pub program: String,
}

/// Parses an `Exec*=` value with `env` for `$VAR`/`${VAR}`. Errors: bad quoting, no command,
/// a relative program that is not a plain name.
pub fn parse_exec(value: &str, unit: &str, env: &BTreeMap<String, String>) -> Result<ExecLine, String> {
    let mut v = value.trim();
    let mut ignore = false;
    let mut at = false;
    loop {
        match v.chars().next() {
            Some('-') => ignore = true,
            Some('@') => at = true,
            Some('+') | Some('!') | Some(':') => {}
            _ => break,
        }
        v = &v[1..];
    }
    let expanded = specifiers(v, unit);
    let words = split_words(&expanded)?;
    let mut argv = Vec::new();
    for w in words {
        // `$VAR` alone as a word splits; `${VAR}` anywhere stays one word.
        if let Some(name) = w.strip_prefix('$').filter(|n| {
            !n.starts_with('{') && !n.is_empty() && n.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
        }) {
            if let Some(val) = env.get(name) {
                argv.extend(val.split_whitespace().map(String::from));
            }
            continue;
        }
        argv.push(expand_braces(&w, env));
    }
    if argv.is_empty() {
        return Err(format!("empty command line {value:?}"));
    }
    let program = argv[0].clone();
    if at {
        argv.remove(0);
        if argv.is_empty() {
            return Err(format!("{value:?}: `@` without argv[0]"));
        }
    }
    if !program.starts_with('/') && program.contains('/') {
        return Err(format!(
            "{value:?}: the program {program:?} is neither absolute nor a plain name (systemd refuses it)"
        ));
    }
    Ok(ExecLine {
        ignore_failure: ignore,
        argv,
        program,
    })
}

fn expand_braces(w: &str, env: &BTreeMap<String, String>) -> String {
    let mut out = String::new();
    let mut rest = w;
    while let Some(i) = rest.find("${") {
        out.push_str(&rest[..i]);
        let after = &rest[i + 2..];
        match after.find('}') {
            Some(j) => {
                out.push_str(env.get(&after[..j]).map(String::as_str).unwrap_or(""));
                rest = &after[j + 1..];
            }
            None => {
                out.push_str(&rest[i..]);
                rest = "";
            }
        }
    }
    out.push_str(rest);
    out
}

/// Where systemd looks for a program given by plain name (systemd.service(5) "Command lines").
pub const EXEC_SEARCH: &[&str] = &["/usr/local/sbin", "/usr/local/bin", "/usr/sbin", "/usr/bin"];

/// The manager's environment for every unit (systemd's default PATH) plus `DefaultEnvironment=`
/// of `/etc/systemd/system.conf` and `system.conf.d/*.conf` under `root`.
pub fn manager_env(root: &Path) -> Result<BTreeMap<String, String>, String> {
    let mut env = BTreeMap::new();
    env.insert("PATH".to_string(), EXEC_SEARCH.join(":"));
    env.insert("LANG".to_string(), "C.UTF-8".to_string());
    let mut files = vec![root.join("etc/systemd/system.conf")];
    if let Ok(rd) = std::fs::read_dir(root.join("etc/systemd/system.conf.d")) {
        let mut d: Vec<PathBuf> = rd.filter_map(|e| e.ok().map(|e| e.path())).collect();
        d.sort();
        files.extend(
            d.into_iter()
                .filter(|p| p.extension().is_some_and(|e| e == "conf")),
        );
    }
    for f in files {
        let Ok(text) = std::fs::read_to_string(&f) else {
            continue;
        };
        let uf = UnitFile::parse("system.conf", &text.replace("[Manager]", "[Service]"));
        for v in uf.service_all("DefaultEnvironment") {
            let words = split_words(&v).map_err(|e| format!("{}: DefaultEnvironment: {e}", f.display()))?;
            for w in words {
                if let Some((k, val)) = w.split_once('=') {
                    env.insert(k.to_string(), val.to_string());
                }
            }
        }
    }
    Ok(env)
}

/// How a unit's start job stands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum State {
    /// In the transaction, not started yet.
    Waiting,
    /// Start job running (ExecStartPre/oneshot ExecStart/notify wait), or auto-restart pending.
    Activating,
    /// Started (simple running, oneshot exited with RemainAfterExit, notify ready).
    Active,
    /// A oneshot without RemainAfterExit ran successfully.
    Finished,
    /// A `Condition*=` was false: skipped (dependents go on).
    Skipped(String),
    /// Given up after failures, or a required unit failed.
    Failed(String),
}

impl State {
    /// The start job is over (dependents ordered after it may start).
    pub fn settled(&self) -> bool {
        !matches!(self, State::Waiting | State::Activating)
    }
    /// Counts as started for `Requires=`.
    pub fn ok(&self) -> bool {
        matches!(self, State::Active | State::Finished | State::Skipped(_))
    }
}

/// A unit of the transaction: its file and the derived order.
#[derive(Debug, Clone)]
pub struct Planned {
    pub file: UnitFile,
    /// Units it must wait for (After= of it, Before= of others), within the transaction.
    pub after: BTreeSet<String>,
    /// Requires= within the transaction (a failure there fails this one).
    pub requires: BTreeSet<String>,
}

/// The boot transaction: enabled units (Ignition `enabled: true`, or `[Install]` `WantedBy=` of
/// a target when `enabled` is unset) and, transitively, their `Requires=`/`Wants=`, plus
/// `WantedBy=`/`RequiredBy=` of enabled units naming a unit of the transaction. Units the
/// Ignition does not define are the live system's own (returned as the second value).
pub fn transaction(
    units: &BTreeMap<String, (Option<bool>, String)>,
) -> (BTreeMap<String, Planned>, BTreeSet<String>) {
    let files: BTreeMap<String, UnitFile> = units
        .iter()
        .filter(|(n, _)| !n.contains("@."))
        .map(|(n, (_, t))| (n.clone(), UnitFile::parse(n, t)))
        .collect();
    let enabled = |n: &str| -> bool { units.get(n).and_then(|(e, _)| *e).unwrap_or_default() };
    // Install edges of enabled units: target -> units it wants.
    let mut wanted_by: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for (n, f) in &files {
        if !enabled(n) {
            continue;
        }
        for t in f
            .install_deps("WantedBy")
            .into_iter()
            .chain(f.install_deps("RequiredBy"))
        {
            wanted_by.entry(t).or_default().push(n.clone());
        }
    }
    let mut todo: Vec<String> = files
        .keys()
        .filter(|n| enabled(n) && n.ends_with(".service"))
        .cloned()
        .collect();
    let mut inside = BTreeSet::new();
    let mut external = BTreeSet::new();
    while let Some(n) = todo.pop() {
        if !inside.insert(n.clone()) {
            continue;
        }
        let f = &files[&n];
        let mut pulled = f.deps("Requires");
        pulled.extend(f.deps("Wants"));
        pulled.extend(wanted_by.get(&n).cloned().unwrap_or_default());
        for p in pulled {
            if files.contains_key(&p) {
                todo.push(p);
            } else {
                external.insert(p);
            }
        }
    }
    let mut plan: BTreeMap<String, Planned> = inside
        .iter()
        .map(|n| {
            let f = files[n].clone();
            let after = f
                .deps("After")
                .into_iter()
                .filter(|a| inside.contains(a))
                .collect();
            let requires = f
                .deps("Requires")
                .into_iter()
                .filter(|a| inside.contains(a))
                .collect();
            (
                n.clone(),
                Planned {
                    file: f,
                    after,
                    requires,
                },
            )
        })
        .collect();
    let befores: Vec<(String, String)> = plan
        .iter()
        .flat_map(|(n, p)| p.file.deps("Before").into_iter().map(move |b| (n.clone(), b)))
        .collect();
    for (n, b) in befores {
        if let Some(p) = plan.get_mut(&b) {
            p.after.insert(n);
        }
    }
    for p in plan.values() {
        for a in p.file.deps("After").into_iter().chain(p.file.deps("Before")) {
            if !files.contains_key(&a) {
                external.insert(a);
            }
        }
    }
    (plan, external)
}

/// The `Condition*=` verdict of a unit: None when all hold, Some(reason) when one is false.
/// Paths are checked under `root`. Errors: a condition kind this runner does not judge.
pub fn conditions(f: &UnitFile, root: &Path) -> Result<Option<String>, String> {
    for (k, v) in &f.unit {
        if !(k.starts_with("Condition") || k.starts_with("Assert")) || v.is_empty() {
            continue;
        }
        let (neg, path) = match v.strip_prefix('!') {
            Some(p) => (true, p),
            None => (false, v.as_str()),
        };
        let path = path.trim_start_matches('|');
        let p = root.join(path.trim_start_matches('/'));
        let holds = match k.trim_start_matches("Condition").trim_start_matches("Assert") {
            "PathExists" => p.exists() || p.symlink_metadata().is_ok(),
            "PathIsDirectory" => p.is_dir(),
            "FileNotEmpty" => std::fs::metadata(&p).map(|m| m.is_file() && m.len() > 0).unwrap_or(false),
            "PathExistsGlob" | "DirectoryNotEmpty" | "FileIsExecutable" | "PathIsSymbolicLink" | "KernelCommandLine"
            | "Virtualization" | "Host" | "Architecture" | "Security" | "FirstBoot" | "NeedsUpdate" => {
                return Err(format!(
                    "{}: {k}={v} is a condition the node runner does not judge; it would decide this unit's fate on a real machine",
                    f.name
                ))
            }
            other => return Err(format!("{}: unknown condition {k} ({other})", f.name)),
        };
        if holds == neg {
            return Ok(Some(format!("{k}={v} is false")));
        }
    }
    Ok(None)
}

/// Timing knobs of the runner.
#[derive(Debug, Clone, Copy)]
pub struct Timing {
    /// `RestartSec=` is multiplied by this (1.0: as written).
    pub restart_scale: f64,
    /// Failed starts after which a restarting unit is given up (systemd would go on forever
    /// with these units' `Restart=`; a test needs an end).
    pub max_failures: u32,
    /// Start timeout of `Type=notify` units when the unit gives none (systemd: 90 s).
    pub notify_timeout: Duration,
}

/// The service kinds of `Type=`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Simple,
    Oneshot,
    Notify,
}

/// The kind of a unit (`Type=`, default simple; `exec` is simple here). Errors: `forking`,
/// `dbus`, `idle` or an unknown value.
pub fn kind(f: &UnitFile) -> Result<Kind, String> {
    match f.service_last("Type").unwrap_or("simple") {
        "simple" | "exec" => Ok(Kind::Simple),
        "oneshot" => Ok(Kind::Oneshot),
        "notify" | "notify-reload" => Ok(Kind::Notify),
        other => Err(format!(
            "{}: Type={other} is not run by the node runner (simple, exec, oneshot, notify)",
            f.name
        )),
    }
}

/// Reads the unit's environment: manager env, `Environment=`, then each `EnvironmentFile=` (in
/// order; `-` optional) under `root`. Errors: a required file missing (systemd fails the unit
/// with "Failed to load environment files").
pub fn unit_env(
    f: &UnitFile,
    root: &Path,
    manager: &BTreeMap<String, String>,
) -> Result<BTreeMap<String, String>, String> {
    let mut env = manager.clone();
    for (k, v) in &f.service {
        match k.as_str() {
            "Environment" => env.extend(environment_words(v)),
            "EnvironmentFile" => {
                let (optional, path) = match v.strip_prefix('-') {
                    Some(p) => (true, p),
                    None => (false, v.as_str()),
                };
                let p = root.join(path.trim_start_matches('/'));
                match std::fs::read_to_string(&p) {
                    Ok(t) => env.extend(env_file(&t)),
                    Err(_) if optional => {}
                    Err(e) => {
                        return Err(format!(
                            "{}: Failed to load environment files: EnvironmentFile={path}: {e}",
                            f.name
                        ))
                    }
                }
            }
            _ => {}
        }
    }
    Ok(env)
}

/// Restart policy of a unit after a failed or finished run.
pub fn restarts_on_failure(f: &UnitFile) -> bool {
    matches!(
        f.service_last("Restart").unwrap_or("no"),
        "on-failure" | "always" | "on-abnormal" | "on-abort"
    )
}

/// `RestartSec=` (systemd's default 100 ms).
pub fn restart_sec(f: &UnitFile) -> Duration {
    f.service_last("RestartSec")
        .and_then(parse_timespan)
        .unwrap_or(Duration::from_millis(100))
}

/// Elapsed time since `t0` as `[ 12.34s]`.
pub fn stamp(t0: Instant) -> String {
    format!("[{:7.2}s]", t0.elapsed().as_secs_f64())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_sections_lists_and_resets() {
        let f = UnitFile::parse(
            "a.service",
            "[Unit]\nAfter=x.service y.service\nAfter=z.service\n# c\n[Service]\nExecStart=/bin/a \\\n  --b\nExecStart=\nExecStart=/bin/c\nEnvironmentFile=-/e\n[Install]\nWantedBy=multi-user.target\n",
        );
        assert_eq!(f.deps("After"), vec!["x.service", "y.service", "z.service"]);
        assert_eq!(f.service_all("ExecStart"), vec!["/bin/c"]);
        assert_eq!(f.install_deps("WantedBy"), vec!["multi-user.target"]);
    }

    #[test]
    fn exec_lines_expand_as_systemd() {
        let env: BTreeMap<String, String> = [
            ("IMG".to_string(), "quay.io/x@sha256:1".to_string()),
            ("OPTS".to_string(), "-a  -b".to_string()),
        ]
        .into();
        let e = parse_exec(
            "-/usr/bin/podman run ${IMG} $OPTS \"two words\" 100%%",
            "u.service",
            &env,
        )
        .unwrap();
        assert!(e.ignore_failure);
        assert_eq!(
            e.argv,
            vec![
                "/usr/bin/podman",
                "run",
                "quay.io/x@sha256:1",
                "-a",
                "-b",
                "two words",
                "100%"
            ]
        );
        assert!(parse_exec("bin/x", "u.service", &env).is_err());
        assert_eq!(parse_exec("@/bin/a b c", "u", &env).unwrap().argv, vec!["b", "c"]);
    }

    #[test]
    fn env_files_and_timespans() {
        let m = env_file("A=1\n# c\nB=\"x y\"\nC='{\"k\": 1}'\n");
        assert_eq!(m[1], ("B".to_string(), "x y".to_string()));
        assert_eq!(m[2].1, "{\"k\": 1}");
        assert_eq!(parse_timespan("5"), Some(Duration::from_secs(5)));
        assert_eq!(parse_timespan("1min 30s"), Some(Duration::from_secs(90)));
        assert_eq!(parse_timespan("250ms"), Some(Duration::from_millis(250)));
    }

    #[test]
    fn transaction_follows_install_and_requires() {
        let u = |t: &str| (Some(true), t.to_string());
        let mut units = BTreeMap::new();
        units.insert("a.service".to_string(), u("[Unit]\nRequires=b.service\nAfter=b.service NetworkManager.service\n[Install]\nWantedBy=multi-user.target\n"));
        units.insert(
            "b.service".to_string(),
            (None, "[Unit]\nBefore=c.service\n".to_string()),
        );
        units.insert("c.service".to_string(), (Some(false), "[Unit]\n".to_string()));
        let (plan, ext) = transaction(&units);
        assert_eq!(
            plan.keys().cloned().collect::<Vec<_>>(),
            vec!["a.service", "b.service"]
        );
        assert!(plan["a.service"].after.contains("b.service"));
        assert!(ext.contains("NetworkManager.service"));
    }
}
