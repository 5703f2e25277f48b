//! Shell completion: `completion SHELL` prints a clap_complete script for the binary, and the
//! hidden `__complete WORDS... CURRENT` answers kubectl's plugin completion protocol
//! (kubectl 1.26+ runs `kubectl_complete-agent_day2` from PATH, which execs
//! `kubectl-agent_day2 __complete "$@"`; docs/commands.md "completion").
//!
//! Protocol (Cobra's `__complete`): the arguments are the words after the plugin name, the last
//! one being the word under the cursor (`""` when starting a new word). The answer is one
//! candidate per line, optionally `candidate<TAB>description`, then a last line `:<directive>`:
//! 4 (`ShellCompDirectiveNoFileComp`) when only the listed candidates make sense, 0 (default)
//! when the shell should also offer file names (values of file flags), 16
//! (`ShellCompDirectiveFilterDirs`) when only directories fit (bundle and output directories).
//! kubectl passes the directive of the helper through unchanged (checked in tests/completion.rs).
//!
//! Names from the cluster, as kubectl completes resource names: batch names (`--batch`,
//! `add-nodes batch delete NAME`) and the batches' expected hosts (`--node`, `--reissue`,
//! `monitor --ip-addresses`) are read from the batch ConfigMaps in openshift-agent-day2 with the
//! connection flags typed on the line (`--context`, `--kubeconfig`, ...), within
//! [`CLUSTER_TIMEOUT`]; any error or timeout gives no candidates and no message.

use std::io::Write;
use std::net::IpAddr;
use std::time::Duration;

use clap::{Arg, ArgAction, Args, CommandFactory, FromArgMatches, ValueHint};
use k8s_openapi::api::core::v1::ConfigMap;

use crate::batch::{self, BatchRecord};
use crate::cli::kube_flags::KubeFlags;
use crate::cli::Cli;

/// Cobra's ShellCompDirectiveDefault: the shell may also complete file names.
pub const DIRECTIVE_DEFAULT: u8 = 0;
/// Cobra's ShellCompDirectiveNoSpace: no space after the candidate (`worker-1=` waits for
/// an address).
pub const DIRECTIVE_NO_SPACE: u8 = 2;
/// Cobra's ShellCompDirectiveNoFileComp: offer only the listed candidates.
pub const DIRECTIVE_NO_FILE: u8 = 4;
/// Cobra's ShellCompDirectiveFilterDirs: the shell offers directory names only (no candidates
/// listed: directories under the current one).
pub const DIRECTIVE_FILTER_DIRS: u8 = 16;
/// The binary name the `completion SHELL` scripts complete (the command name and the name
/// given to clap_complete must agree, or the bash script's case labels miss its loop's names).
pub const BIN_NAME: &str = "kubectl-agent_day2";
/// How long completion may spend asking the cluster for names (a TAB must not hang; kubectl
/// completion has no deadline of its own but users give up after a moment).
pub const CLUSTER_TIMEOUT: Duration = Duration::from_secs(2);

/// Values completed from the batch records on the cluster.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClusterValue {
    /// Batch (ConfigMap) names.
    Batch,
    /// Expected host names (`--reissue NODE`).
    Host,
    /// `NAME=IP[,IP]` of expected hosts (`--node`): the recorded addresses, or `NAME=` for a
    /// DHCP host whose address is not known yet.
    HostAddress,
    /// Recorded addresses of expected hosts (`monitor --ip-addresses`).
    Address,
}

/// Which arguments complete from the cluster: `(command, argument id)`.
const CLUSTER_VALUES: &[(&str, &str, ClusterValue)] = &[
    ("approve", "batch", ClusterValue::Batch),
    ("approve", "nodes", ClusterValue::HostAddress),
    ("approve", "reissue", ClusterValue::Host),
    ("monitor", "batch", ClusterValue::Batch),
    ("monitor", "nodes", ClusterValue::HostAddress),
    ("monitor", "ip_addresses", ClusterValue::Address),
    ("delete", "names", ClusterValue::Batch),
];

fn cluster_value(cmd: &clap::Command, arg: &Arg) -> Option<ClusterValue> {
    CLUSTER_VALUES
        .iter()
        .find(|(c, a, _)| *c == cmd.get_name() && arg.get_id() == *a)
        .map(|(_, _, v)| *v)
}

/// What the finished words say beyond the command: the connection flags typed and `--batch`.
#[derive(Debug, Default)]
struct Typed {
    /// Connection flag words as typed (`--context`, `prod`, `--kubeconfig=f`).
    kube: Vec<String>,
    /// `--batch NAME`, which narrows the hosts offered.
    batch: Option<String>,
}

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
    let kube_ids = kube_flag_ids();
    let mut cmd = &root;
    let mut globals: Vec<&Arg> = global_args(&root);
    let mut pending_value: Option<&Arg> = None;
    let mut typed = Typed::default();
    let mut positionals: Vec<&str> = Vec::new();
    for w in before {
        if let Some(arg) = pending_value.take() {
            typed.note_value(arg, w, &kube_ids);
            continue;
        }
        if let Some(long) = w.strip_prefix("--") {
            let (name, value) = match long.split_once('=') {
                Some((n, v)) => (n, Some(v)),
                None => (long, None),
            };
            let flag = find_flag(cmd, &globals, |a| a.get_long() == Some(name));
            match (flag, value) {
                (Some(a), Some(v)) => {
                    typed.note_flag(a, w, &kube_ids);
                    typed.note_value_only(a, v);
                }
                (Some(a), None) => {
                    typed.note_flag(a, w, &kube_ids);
                    pending_value = Some(a).filter(|a| takes_value(a));
                }
                (None, _) => {}
            }
        } else if let Some(short) = w.strip_prefix('-').filter(|s| s.chars().count() == 1) {
            let c = short.chars().next();
            let flag = find_flag(cmd, &globals, |a| a.get_short() == c);
            if let Some(a) = flag {
                typed.note_flag(a, w, &kube_ids);
            }
            pending_value = flag.filter(|a| takes_value(a));
        } else if let Some(sub) = cmd.find_subcommand(w) {
            cmd = sub;
            globals.extend(global_args(sub));
            positionals.clear();
        } else {
            positionals.push(w);
        }
    }
    if let Some(arg) = pending_value {
        if let Some(what) = cluster_value(cmd, arg) {
            return from_cluster(&typed, what, current, &[]);
        }
        return value_candidates(arg, current);
    }
    // `--flag=val<TAB>`: the value is completed, without the `--flag=` part (Cobra does the same
    // and the shell script keeps the prefix).
    if let Some((name, partial)) = current.strip_prefix("--").and_then(|c| c.split_once('=')) {
        let flag = find_flag(cmd, &globals, |a| a.get_long() == Some(name)).filter(|a| takes_value(a));
        return match flag {
            Some(arg) => match cluster_value(cmd, arg) {
                Some(what) => from_cluster(&typed, what, partial, &[]),
                None => value_candidates(arg, partial),
            },
            None => (vec![], DIRECTIVE_NO_FILE),
        };
    }
    if !current.starts_with('-') {
        if let Some(what) = cmd.get_positionals().find_map(|a| cluster_value(cmd, a)) {
            // `batch delete b1 <TAB>`: names not typed yet.
            return from_cluster(&typed, what, current, &positionals);
        }
    }
    if !current.starts_with('-') && !cmd.has_subcommands() {
        // A positional value: `completion <TAB>` (shells), `migrate import <TAB>` (a directory).
        let args: Vec<&Arg> = cmd.get_positionals().filter(|a| !a.is_hide_set()).collect();
        let n = positionals.len();
        let arg = args.get(n).copied().or_else(|| {
            args.last()
                .copied()
                .filter(|a| matches!(a.get_action(), ArgAction::Append) && n > 0)
        });
        return match arg {
            Some(a) => value_candidates(a, current),
            None => (vec![], DIRECTIVE_NO_FILE),
        };
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
        ValueHint::DirPath => (vec![], DIRECTIVE_FILTER_DIRS),
        ValueHint::AnyPath | ValueHint::FilePath | ValueHint::ExecutablePath => (vec![], DIRECTIVE_DEFAULT),
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

impl Typed {
    /// A flag word: kept when it is a connection flag.
    fn note_flag(&mut self, arg: &Arg, word: &str, kube_ids: &[String]) {
        if kube_ids.iter().any(|id| arg.get_id() == id.as_str()) {
            self.kube.push(word.to_string());
        }
    }
    /// The value word after a flag.
    fn note_value(&mut self, arg: &Arg, value: &str, kube_ids: &[String]) {
        if kube_ids.iter().any(|id| arg.get_id() == id.as_str()) {
            self.kube.push(value.to_string());
        }
        self.note_value_only(arg, value);
    }
    /// A value (`--batch=NAME` or the word after `--batch`) that narrows the candidates.
    fn note_value_only(&mut self, arg: &Arg, value: &str) {
        if arg.get_id() == "batch" {
            self.batch = Some(value.to_string());
        }
    }
    /// The connection flags typed, parsed as the command would (bad ones: defaults).
    fn kube_flags(&self) -> KubeFlags {
        let cmd = KubeFlags::augment_args(clap::Command::new("complete").no_binary_name(true));
        cmd.try_get_matches_from(&self.kube)
            .ok()
            .and_then(|m| KubeFlags::from_arg_matches(&m).ok())
            .unwrap_or_default()
    }
}

/// Ids of [`KubeFlags`]' arguments.
fn kube_flag_ids() -> Vec<String> {
    KubeFlags::augment_args(clap::Command::new("k"))
        .get_arguments()
        .map(|a| a.get_id().to_string())
        .collect()
}

/// Candidates read from the cluster (empty on any error or after [`CLUSTER_TIMEOUT`]), minus
/// `exclude`, and the directive.
fn from_cluster(typed: &Typed, what: ClusterValue, current: &str, exclude: &[&str]) -> (Vec<String>, u8) {
    let records = read_batches(&typed.kube_flags());
    let mut out = cluster_candidates(&records, what, typed.batch.as_deref());
    out.retain(|c| {
        let name = c.split('\t').next().unwrap_or(c);
        name.starts_with(current) && !exclude.contains(&name)
    });
    let no_space = out
        .iter()
        .any(|c| c.split('\t').next().is_some_and(|n| n.ends_with('=')));
    let directive = DIRECTIVE_NO_FILE | if no_space { DIRECTIVE_NO_SPACE } else { 0 };
    (out, directive)
}

/// The batch records on the cluster, read with `kube` within [`CLUSTER_TIMEOUT`]; `[]` on any
/// error. A labelled ConfigMap that is not a record counts by its name only (a batch name to
/// delete), without hosts.
pub fn read_batches(kube: &KubeFlags) -> Vec<(String, Option<BatchRecord>)> {
    let Ok(rt) = tokio::runtime::Builder::new_current_thread().enable_all().build() else {
        return vec![];
    };
    let read = async {
        let target = kube.resolve().await.ok()?;
        let api: kube::Api<ConfigMap> = kube::Api::namespaced(target.client, batch::NAMESPACE);
        let list = api
            .list(&kube::api::ListParams::default().labels(batch::LABEL))
            .await
            .ok()?;
        Some(
            list.items
                .iter()
                .filter_map(|cm| {
                    let name = cm.metadata.name.clone()?;
                    Some((name, batch::from_config_map(cm).ok()))
                })
                .collect::<Vec<_>>(),
        )
    };
    rt.block_on(async { tokio::time::timeout(CLUSTER_TIMEOUT, read).await.ok().flatten() })
        .unwrap_or_default()
}

/// Candidates of kind `what` from the batch records (pure): `value<TAB>description`, sorted,
/// without duplicates; hosts only of batch `only` when given. Names and addresses that are not
/// plain DNS labels or IPs are left out (the protocol is line-based and the text is the
/// cluster's).
pub fn cluster_candidates(
    records: &[(String, Option<BatchRecord>)],
    what: ClusterValue,
    only: Option<&str>,
) -> Vec<String> {
    let mut out = std::collections::BTreeMap::<String, String>::new();
    for (name, rec) in records {
        if !is_dns_name(name) {
            continue;
        }
        if what == ClusterValue::Batch {
            let desc = match rec {
                Some(r) => format!(
                    "{} host(s), created {}",
                    r.hosts.len(),
                    r.created_at
                        .chars()
                        .filter(|c| !c.is_control())
                        .collect::<String>()
                ),
                None => "not a readable batch record".into(),
            };
            out.insert(name.clone(), desc);
            continue;
        }
        if only.is_some_and(|b| b != name) {
            continue;
        }
        let Some(rec) = rec else { continue };
        for h in rec.hosts.iter().filter(|h| is_dns_name(&h.hostname)) {
            let ips: Vec<String> = h
                .ips
                .iter()
                .filter_map(|i| i.parse::<IpAddr>().ok())
                .map(|i| i.to_string())
                .collect();
            let desc = format!("batch {name}");
            match what {
                ClusterValue::Host => {
                    out.entry(h.hostname.clone()).or_insert(desc);
                }
                ClusterValue::HostAddress if ips.is_empty() => {
                    out.entry(format!("{}=", h.hostname))
                        .or_insert(format!("{desc}, address not known yet (DHCP)"));
                }
                ClusterValue::HostAddress => {
                    out.entry(format!("{}={}", h.hostname, ips.join(",")))
                        .or_insert(desc);
                }
                ClusterValue::Address => {
                    for ip in ips {
                        out.entry(ip).or_insert(format!("{} ({desc})", h.hostname));
                    }
                }
                ClusterValue::Batch => unreachable!(),
            }
        }
    }
    out.into_iter().map(|(v, d)| format!("{v}\t{d}")).collect()
}

/// A lowercase RFC 1123 name (what ConfigMap and Node names are), safe on one protocol line.
fn is_dns_name(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 253
        && s.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'.')
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

/// Prints the completion script for `shell` for the binary [`BIN_NAME`] (completes
/// `kubectl-agent_day2 <TAB>` when run directly; `kubectl agent-day2 <TAB>` goes through
/// kubectl and `scripts/kubectl_complete-agent_day2` instead). Exit code: 0, also when stdout
/// is a closed pipe (`| head`); 1 with an `error:` line on any other write error (`> /dev/full`).
pub fn run_script(shell: clap_complete::Shell) -> u8 {
    let script = script(shell);
    match write_stdout(&script) {
        Ok(()) => crate::error::exit::OK,
        Err(e) => {
            crate::error::Error::Unexpected(format!("cannot write the completion script: {e}")).print();
            crate::error::exit::UNEXPECTED
        }
    }
}

/// The completion script for `shell`, as bytes. The command is [`Cli`] renamed to [`BIN_NAME`]
/// (name and bin name alike) without the hidden `__complete`, which clap_complete would offer.
pub fn script(shell: clap_complete::Shell) -> Vec<u8> {
    let full = Cli::command();
    let mut cmd = clap::Command::new(BIN_NAME)
        .bin_name(BIN_NAME)
        .about(full.get_about().cloned().unwrap_or_default())
        .disable_version_flag(true)
        .args(full.get_arguments().cloned())
        .subcommands(full.get_subcommands().filter(|s| !s.is_hide_set()).cloned());
    let mut buf = Vec::new();
    clap_complete::generate(shell, &mut cmd, BIN_NAME, &mut buf);
    if shell == clap_complete::Shell::Bash {
        // clap_complete 4.6's bash script names the commands in its word loop with `-` turned
        // into `__` (`kubectl__agent_day2__subcmd__approve`) but labels their case branches with
        // `-` turned into `__subcmd__` (`kubectl__subcmd__agent_day2__subcmd__approve`), so a
        // bin name with a `-` completes only its first word. The labels are renamed to the loop's
        // names (a no-op once clap_complete agrees with itself). zsh and fish name consistently.
        let wrong = format!("{}__subcmd__", BIN_NAME.replace('-', "__subcmd__"));
        let right = format!("{}__subcmd__", BIN_NAME.replace('-', "__"));
        buf = String::from_utf8_lossy(&buf).replace(&wrong, &right).into_bytes();
    }
    buf
}

/// Writes `bytes` to stdout; a closed pipe (EPIPE) counts as written, as in `emit`.
fn write_stdout(bytes: &[u8]) -> std::io::Result<()> {
    let mut out = std::io::stdout().lock();
    match out.write_all(bytes).and_then(|()| out.flush()) {
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        r => r,
    }
}
