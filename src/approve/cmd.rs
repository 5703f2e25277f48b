//! The `approve` command: the verdict table, the prompt, the approvals, `--watch`.
//!
//! Data (the table or the `-o json|yaml` document) goes to stdout; hints and progress to
//! stderr. Every value that comes from a CSR is escaped ([`crate::csr::escape_for_display`]).

use std::collections::{BTreeMap, BTreeSet};
use std::io::IsTerminal;
use std::pin::Pin;
use std::time::Duration;

use futures::{Stream, StreamExt};
use k8s_openapi::api::certificates::v1::CertificateSigningRequest;
use k8s_openapi::api::core::v1::{ConfigMap, Node};
use kube::api::Api;
use kube::runtime::watcher::{self, watcher, Event};
use kube::runtime::WatchStreamExt;
use serde::Serialize;

use super::{
    io::execute, nodes_config_addresses, now, Action, ApproveOptions, Approver, Executed, NodeState, Outcome,
    Plan, Planned, Touched,
};
use crate::batch;
use crate::cli::{ApproveArgs, OutputFormat};
use crate::csr::{escape_for_display, parse_request, CsrView, Kind, Time, Verdict};
use crate::duration::parse_flag;
use crate::error::{exit, Error, Result};
use crate::follow::{Follower, Seen};
use crate::kube::{Connection, KubeTarget, Resolve};

/// Longest CSR-provided value in a table cell (after escaping).
const CELL_MAX: usize = 48;

/// One row of the report.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Row {
    /// CSR name.
    pub name: String,
    /// Node the CSR speaks for (escaped), `-` when none.
    pub node: String,
    /// client / serving.
    pub kind: Kind,
    /// `spec.username` (escaped).
    pub requester: String,
    /// SANs of the request (escaped).
    pub sans: Vec<String>,
    /// `metadata.creationTimestamp`, RFC 3339.
    pub created: Option<String>,
    /// What happened: approved, denied, would-approve, rejected, held (waits for more
    /// information), not-pending, ignored.
    pub action: Action,
    /// Every failed check: stable code and message (escaped).
    pub reasons: Vec<ReasonDoc>,
    /// A client CSR approved (or to be) without a reboot record of its host
    /// (`--trust-unverified-boot`): nothing bound it to the machine. Absent when false.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub unverified_boot: bool,
}

/// A reason in the document.
#[derive(Debug, Clone, Serialize)]
pub struct ReasonDoc {
    /// Stable kebab-case code ([`crate::csr::Reason::code`]).
    pub code: String,
    /// The explanation.
    pub message: String,
}

/// The `-o json|yaml` document.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Report {
    /// `agent-day2/v1`.
    pub api_version: &'static str,
    /// `ApproveReport`.
    pub kind: &'static str,
    /// Pending kubelet CSRs and those acted on, oldest first.
    pub csrs: Vec<Row>,
    /// Progress of each expected node.
    pub nodes: Vec<NodeState>,
    /// What to do about expected nodes that cannot get an approval as things stand
    /// ([`Approver::hints`]).
    pub hints: Vec<String>,
    /// Possible impostors and second requesters ([`Approver::alarms`]), each with the CSRs'
    /// names, creation times and requesters.
    pub alarms: Vec<crate::csr::Alarm>,
    /// Every expected node not done yet (Ready with its serving certificate) and what it
    /// waits for ([`waiting`]); empty when every one is done.
    pub waiting: Vec<Waiting>,
    /// The exit status this run ends with.
    pub exit_code: u8,
}

/// What one expected node still waits for: printed on stderr when approve ends with 7 or 5,
/// and the `waiting` list of the document.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Waiting {
    /// Node name.
    pub node: String,
    /// Batch that expects it.
    pub batch: String,
    /// Stable code of what is missing: `client-csr` (no client CSR yet), `client-csr-rejected`,
    /// `client-csr-held` (waits for the reboot record, or rivals sorted out),
    /// `client-csr-not-approved` (passes, not approved: dry run or declined), `node-join`
    /// (client certificate approved, Node not registered yet), `serving-csr`,
    /// `serving-csr-rejected`, `serving-csr-held` (address unknown), `serving-csr-not-approved`,
    /// `serving-certificate` (approved, not
    /// issued yet), `ready` (Node not Ready).
    pub waits_for: &'static str,
    /// The CSR concerned, when one is (escaped).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub csr: Option<String>,
    /// Why that CSR was rejected (codes and messages, escaped).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub reasons: Vec<ReasonDoc>,
    /// The sentence shown (`worker-1 (batch B): no client CSR yet: ...`).
    pub message: String,
}

/// The newest CSR of `kind` for `node` (pending or not) among those the approver saw, with
/// its verdict when it is pending.
fn newest_csr<'a>(
    a: &'a Approver,
    node: &str,
    kind: Kind,
    verdicts: &'a [(CsrView, Verdict)],
) -> Option<(&'a CertificateSigningRequest, Option<&'a Verdict>)> {
    a.csrs
        .values()
        .filter(|c| CsrView::from_k8s(c).kind() == kind)
        .filter(|c| a.node_of(c).as_deref() == Some(node))
        .max_by(|x, y| {
            let t = |c: &CertificateSigningRequest| c.metadata.creation_timestamp.as_ref().map(|t| t.0);
            (t(x), &x.metadata.name).cmp(&(t(y), &y.metadata.name))
        })
        .map(|c| {
            let v = verdicts
                .iter()
                .find(|(v, _)| Some(&v.name) == c.metadata.name.as_ref())
                .map(|(_, v)| v);
            (c, v)
        })
}

/// `(waits_for suffix, csr, reasons, sentence)` for the newest CSR of a kind: pending and
/// rejected, pending and passing (not approved), approved without certificate, denied.
fn csr_wait(
    c: &CertificateSigningRequest,
    v: Option<&Verdict>,
    kind: Kind,
    write_failure: Option<&str>,
) -> Option<(&'static str, String, Vec<ReasonDoc>, String)> {
    let name = escape_for_display(c.metadata.name.as_deref().unwrap_or(""), usize::MAX);
    if let Some(v) = v {
        if let (true, Some(e)) = (v.approve, write_failure) {
            return Some((
                "not-approved",
                name.clone(),
                vec![],
                format!(
                    "{kind} CSR {name} passes every check but was not approved: {}",
                    escape_for_display(e, 400)
                ),
            ));
        }
        if v.approve {
            return Some((
                "not-approved",
                name.clone(),
                vec![],
                format!(
                    "{kind} CSR {name} passes every check but was not approved (dry run, or not confirmed)"
                ),
            ));
        }
        let reasons: Vec<ReasonDoc> = v
            .reasons
            .iter()
            .map(|r| ReasonDoc {
                code: r.code().to_string(),
                message: r.to_string(),
            })
            .collect();
        let why = reasons
            .iter()
            .map(|r| r.message.clone())
            .collect::<Vec<_>>()
            .join("; ");
        let code = if v.held() { "held" } else { "rejected" };
        return Some((
            code,
            name.clone(),
            reasons,
            format!("{kind} CSR {name} {code}: {why}"),
        ));
    }
    if super::has_condition(c, "Denied") || super::has_condition(c, "Failed") {
        return Some((
            "rejected",
            name.clone(),
            vec![],
            format!("{kind} CSR {name} was denied (or failed); the kubelet sends a new one after a while"),
        ));
    }
    None
}

/// `waits_for` of a CSR left pending: rejected by the checklist, held (waiting for more
/// information: [`crate::csr::Verdict::held`]), or passing but not approved.
fn held_code(kind: Kind, code: &str) -> &'static str {
    match (kind, code) {
        (Kind::Client, "rejected") => "client-csr-rejected",
        (Kind::Client, "held") => "client-csr-held",
        (Kind::Client, _) => "client-csr-not-approved",
        // waiting() asks only for client and serving CSRs.
        (_, "rejected") => "serving-csr-rejected",
        (_, "held") => "serving-csr-held",
        (_, _) => "serving-csr-not-approved",
    }
}

/// What each expected node that is not done still waits for, from the approver's view of
/// Nodes and CSRs (docs/monitor.md "What done means": Ready *and* serving certificate issued).
pub fn waiting(a: &Approver) -> Vec<Waiting> {
    let verdicts = a.evaluate_all(now());
    let mut out = Vec::new();
    for n in a.node_states().into_iter().filter(|n| !n.done()) {
        let mk =
            |waits_for: &'static str, csr: Option<String>, reasons: Vec<ReasonDoc>, what: String| Waiting {
                message: format!("{} (batch {}): {what}", n.node, n.batch),
                node: n.node.clone(),
                batch: n.batch.clone(),
                waits_for,
                csr,
                reasons,
            };
        if !n.joined {
            let w = match newest_csr(a, &n.node, Kind::Client, &verdicts) {
                Some((c, v)) => match csr_wait(
                    c,
                    v,
                    Kind::Client,
                    c.metadata.name.as_deref().and_then(|n| a.write_failure(n)),
                ) {
                    Some((code, csr, reasons, what)) => {
                        mk(held_code(Kind::Client, code), Some(csr), reasons, what)
                    }
                    None => {
                        let csr = escape_for_display(c.metadata.name.as_deref().unwrap_or(""), usize::MAX);
                        mk(
                            "node-join",
                            Some(csr.clone()),
                            vec![],
                            format!("client CSR {csr} is approved; Node {} has not registered yet (its kubelet is starting)", n.node),
                        )
                    }
                },
                None => mk(
                    "client-csr",
                    None,
                    vec![],
                    "no client CSR yet: the host has not booted its installed system \
                    (`oc agent-day2 monitor` shows its install stages)"
                        .into(),
                ),
            };
            out.push(w);
            continue;
        }
        if !n.serving_issued {
            let w = match newest_csr(a, &n.node, Kind::Serving, &verdicts) {
                Some((c, v)) => match csr_wait(
                    c,
                    v,
                    Kind::Serving,
                    c.metadata.name.as_deref().and_then(|n| a.write_failure(n)),
                ) {
                    Some((code, csr, reasons, what)) => {
                        mk(held_code(Kind::Serving, code), Some(csr), reasons, what)
                    }
                    None => {
                        let csr = escape_for_display(c.metadata.name.as_deref().unwrap_or(""), usize::MAX);
                        mk(
                            "serving-certificate",
                            Some(csr.clone()),
                            vec![],
                            format!("serving CSR {csr} is approved; the certificate is not issued yet"),
                        )
                    }
                },
                None if n.ips.is_empty() => mk(
                    "serving-csr",
                    None,
                    vec![],
                    format!(
                        "no serving CSR yet; its address is unknown (DHCP): give it with --node {}=IP \
                    or `oc agent-day2 monitor --ip-addresses IP` before it comes",
                        n.node
                    ),
                ),
                None => mk(
                    "serving-csr",
                    None,
                    vec![],
                    "joined; no serving CSR yet (the kubelet sends it once it runs)".into(),
                ),
            };
            out.push(w);
            continue;
        }
        out.push(mk(
            "ready",
            None,
            vec![],
            format!("serving certificate issued; Node {} is not Ready yet", n.node),
        ));
    }
    out
}

/// The exit-7 explanation on stderr: each expected node still waiting (its batch, what it
/// waits for) and, when every one is done, the CSRs that were rejected.
/// The `waiting:` lines on stderr, one per host. A reason that several hosts share at length
/// (`boot-unverified`: a paragraph naming the way forward) is shortened on each line and
/// said in full once after them (a new user read the same paragraph on every line).
fn print_waiting(waiting: &[Waiting]) {
    const SHARED: &str = "boot-unverified";
    let shared = |w: &Waiting| w.reasons.iter().find(|r| r.code == SHARED).cloned();
    let many = waiting.iter().filter(|w| shared(w).is_some()).count() > 1;
    let mut full: Option<String> = None;
    for w in waiting {
        match shared(w) {
            Some(r) if many => {
                let short = format!(
                    "{SHARED} (no reboot of {} is recorded on its batch; see below)",
                    w.node
                );
                crate::say!("waiting: {}", w.message.replace(&r.message, &short));
                full.get_or_insert(r.message);
            }
            _ => crate::say!("waiting: {}", w.message),
        }
    }
    if let Some(f) = full {
        crate::say!("       ({SHARED}, for the first of them: {f})");
    }
}

fn explain_exit_7(waiting: &[Waiting], rows: &[Row]) {
    print_waiting(waiting);
    if waiting.is_empty() {
        let of = |a: Action| -> Vec<String> {
            rows.iter()
                .filter(|r| r.action == a)
                .map(|r| cut(&r.name))
                .collect()
        };
        let (rejected, held) = (of(Action::Rejected), of(Action::Held));
        if !rejected.is_empty() {
            crate::say!(
                "every expected node is Ready with its serving certificate; exit 7 because CSR(s) {} \
                 were rejected (REASONS above): they stay pending unless you deny them (--deny-invalid) \
                 or delete them",
                rejected.join(", ")
            );
        }
        if !held.is_empty() {
            crate::say!(
                "every expected node is Ready with its serving certificate; exit 7 because CSR(s) {} \
                 are held (REASONS above: they wait for more information; --deny-invalid leaves them): \
                 delete them once you know they are not needed",
                held.join(", ")
            );
        }
    }
}

fn row(view: &CsrView, v: &Verdict, action: Action) -> Row {
    let sans = parse_request(&view.request)
        .0
        .map(|p| {
            p.sans
                .iter()
                .map(|s| escape_for_display(&s.to_string(), usize::MAX))
                .collect()
        })
        .unwrap_or_default();
    Row {
        name: escape_for_display(&view.name, usize::MAX),
        node: v
            .node
            .as_deref()
            .map(|n| escape_for_display(n, usize::MAX))
            .unwrap_or_else(|| "-".into()),
        kind: v.kind,
        requester: escape_for_display(&view.username, usize::MAX),
        sans,
        created: view.created.map(|t| t.to_string()),
        action,
        unverified_boot: v.unverified_boot && matches!(action, Action::Approved | Action::WouldApprove),
        reasons: v
            .reasons
            .iter()
            .map(|r| ReasonDoc {
                code: r.code().to_string(),
                message: r.to_string(),
            })
            .collect(),
    }
}

fn age(created: Option<&str>, now: Time) -> String {
    let Some(t) = created.and_then(|c| c.parse::<Time>().ok()) else {
        return "-".into();
    };
    let s = now.duration_since(t).as_secs().max(0);
    match s {
        0..=119 => format!("{s}s"),
        120..=7199 => format!("{}m", s / 60),
        7200..=172_799 => format!("{}h", s / 3600),
        _ => format!("{}d", s / 86400),
    }
}

fn verdict_cell(r: &Row) -> String {
    // A kubelet's own earlier attempt is no rejection (issue 22 item 9).
    if r.action == Action::Rejected
        && !r.reasons.is_empty()
        && r.reasons.iter().all(|x| x.code == "superseded")
    {
        return "superseded".into();
    }
    match r.action {
        Action::Approved => "approved".into(),
        Action::Denied => "DENIED".into(),
        Action::WouldApprove => "approve".into(),
        Action::Rejected => "REJECT".into(),
        Action::Held => "HOLD".into(),
        Action::NotPending => "not pending".into(),
        Action::Ignored => "ignored".into(),
    }
}

/// Cuts an already escaped value ([`escape_for_display`] output) to [`CELL_MAX`] characters for
/// a table cell, ending in `…`, never inside an escape (`\\`, `\u{..}`). Only the table
/// cuts: `-o json|yaml` carry the full escaped values.
fn cut(escaped: &str) -> String {
    let tokens = escape_tokens(escaped);
    let total: usize = tokens.iter().map(|t| t.chars().count()).sum();
    if total <= CELL_MAX {
        return escaped.to_string();
    }
    let mut out = String::new();
    let mut used = 0usize;
    for t in tokens {
        let n = t.chars().count();
        if used + n > CELL_MAX - 1 {
            break;
        }
        out.push_str(&t);
        used += n;
    }
    out.push('…');
    out
}

/// The REQUESTER cell: the node-bootstrapper service account as `node-bootstrapper (SA)`;
/// anything else longer than [`CELL_MAX`] cut in the middle, so its end (a service account's
/// name) stays visible.
fn requester_cell(escaped: &str) -> String {
    if escaped == crate::csr::BOOTSTRAPPER {
        return "node-bootstrapper (SA)".into();
    }
    let tokens = escape_tokens(escaped);
    let total: usize = tokens.iter().map(|t| t.chars().count()).sum();
    if total <= CELL_MAX {
        return escaped.to_string();
    }
    let (mut head, mut tail) = (Vec::new(), Vec::new());
    let (mut h, mut t) = (0usize, 0usize);
    let (mut i, mut j) = (0usize, tokens.len());
    // The end gets the larger half.
    while i < j {
        let n = tokens[j - 1].chars().count();
        if t + n + h > CELL_MAX - 1 || t + n > (CELL_MAX - 1) - (CELL_MAX - 1) / 3 {
            break;
        }
        t += n;
        j -= 1;
        tail.push(tokens[j].clone());
    }
    while i < j {
        let n = tokens[i].chars().count();
        if h + n + t > CELL_MAX - 1 {
            break;
        }
        h += n;
        head.push(tokens[i].clone());
        i += 1;
    }
    tail.reverse();
    format!("{}…{}", head.concat(), tail.concat())
}

/// An escaped value split into characters, an escape (`\\`, `\u{..}`) being one.
fn escape_tokens(escaped: &str) -> Vec<String> {
    let mut tokens: Vec<String> = Vec::new();
    let mut it = escaped.chars().peekable();
    while let Some(c) = it.next() {
        let mut t = c.to_string();
        if c == '\\' {
            match it.peek() {
                Some('\\') => t.push(it.next().unwrap_or('\\')),
                Some('u') => {
                    for d in it.by_ref() {
                        t.push(d);
                        if d == '}' {
                            break;
                        }
                    }
                }
                _ => {}
            }
        }
        tokens.push(t);
    }
    tokens
}

/// The cells of one row: CSR, NODE, KIND, REQUESTER, AGE, VERDICT, REASONS (codes), and with
/// `wide` SANS before AGE and each reason in full.
fn cells(r: &Row, wide: bool, now: Time) -> Vec<String> {
    let mut v = vec![
        cut(&r.name),
        cut(&r.node),
        r.kind.to_string(),
        requester_cell(&r.requester),
    ];
    if wide {
        v.push(if r.sans.is_empty() {
            "-".into()
        } else {
            r.sans.iter().map(|x| cut(x)).collect::<Vec<_>>().join(",")
        });
    }
    v.push(age(r.created.as_deref(), now));
    v.push(verdict_cell(r));
    v.push(if r.reasons.is_empty() {
        "-".into()
    } else if wide {
        r.reasons
            .iter()
            .map(|x| x.message.clone())
            .collect::<Vec<_>>()
            .join("; ")
    } else {
        r.reasons
            .iter()
            .map(|x| x.code.clone())
            .collect::<Vec<_>>()
            .join(",")
    });
    v
}

fn header(wide: bool) -> Vec<&'static str> {
    let mut h = vec!["csr", "node", "kind", "requester"];
    if wide {
        h.push("sans");
    }
    h.extend(["age", "verdict", "reasons"]);
    h
}

/// The verdict table (issue 22 item 9: `kubectl get`'s density). With no row, one sentence
/// instead of a header alone.
fn table(rows: &[Row], wide: bool) -> String {
    if rows.is_empty() {
        return "No pending kubelet CSRs of the expected nodes.".into();
    }
    let now = now();
    crate::output::table(&header(wide), rows.iter().map(|r| cells(r, wide, now)).collect())
}

/// Said once after a table whose REASONS are codes.
const CODES_HINT: &str = "hint: REASONS are codes; -o wide shows each in full, -o json each with its message";

/// Prints [`CODES_HINT`] on stderr when a table of `rows` (not wide) showed a reason.
fn hint_codes(rows: &[Row], wide: bool) {
    if !wide && rows.iter().any(|r| !r.reasons.is_empty()) {
        crate::say!("{CODES_HINT}");
    }
}

/// Column widths of the rows `--watch` prints one at a time (they must line up although each
/// is printed alone): CSR, NODE, KIND, REQUESTER, [SANS,] AGE, VERDICT; REASONS takes the rest.
fn watch_widths(wide: bool) -> Vec<usize> {
    let mut w = vec![26, 20, 8, 24];
    if wide {
        w.push(32);
    }
    w.extend([5, 11]);
    w
}

/// One line of `--watch` at [`watch_widths`]: each cell cut to its width (ending in `…`).
fn watch_line(cells: &[String], widths: &[usize]) -> String {
    let mut out = String::new();
    for (i, c) in cells.iter().enumerate() {
        match widths.get(i) {
            Some(&w) => {
                let n = c.chars().count();
                let cell: String = if n > w {
                    c.chars().take(w - 1).chain(['…']).collect()
                } else {
                    c.clone()
                };
                let pad = w.saturating_sub(cell.chars().count()) + 2;
                out.push_str(&cell);
                out.push_str(&" ".repeat(pad));
            }
            None => out.push_str(c),
        }
    }
    out.trim_end().to_string()
}

/// Exit status from the rows and the node states: 0 nothing rejected, held or left pending
/// (a CSR denied now is handled) and every expected node's serving CSR approved or issued; 7
/// otherwise. A client CSR its kubelet
/// abandoned for a newer one ([`Approver::abandoned`]) is not a rejection.
fn exit_code(rows: &[Row], nodes: &[NodeState], abandoned: impl Fn(&Row) -> bool) -> u8 {
    // Denied CSRs are handled (--deny-invalid); held ones are still pending.
    let rejected = rows
        .iter()
        .any(|r| matches!(r.action, Action::Rejected | Action::Held) && !abandoned(r));
    let pending = rows.iter().any(|r| r.action == Action::WouldApprove);
    let all = nodes.iter().all(|n| n.serving_approved || n.serving_issued);
    if rejected || pending || !all {
        exit::CSRS
    } else {
        exit::OK
    }
}

fn options(args: &ApproveArgs) -> Result<ApproveOptions> {
    let mut extra = Vec::new();
    if let Some(p) = &args.nodes_config {
        extra.extend(nodes_config_addresses(p)?);
    }
    extra.extend(args.nodes.iter().cloned());
    Ok(ApproveOptions {
        yes: args.yes,
        dry_run: args.dry_run,
        deny_invalid: args.deny_invalid,
        reissue: args.reissue.clone(),
        batch: args.batch.clone(),
        extra_nodes: extra,
        trust_unverified_boot: args.trust_unverified_boot,
        kubelet_retry_seconds: Some(kubelet_retry(&args.kubelet_retry)?),
    })
}

/// `--kubelet-retry` in seconds (at least 1 s).
pub fn kubelet_retry(s: &str) -> Result<i64> {
    match parse_flag("--kubelet-retry", s).map_err(Error::Usage)? {
        Some(d) if d.as_secs() >= 1 => Ok(d.as_secs() as i64),
        _ => Err(Error::Usage(format!(
            "--kubelet-retry {s:?}: give at least 1s (the kubelet's own is 15m)"
        ))),
    }
}

/// Prints each alarm on stderr once per run (`shown` keeps the messages printed).
pub fn print_alarms(a: &Approver, shown: &mut std::collections::BTreeSet<String>) {
    for al in a.alarms() {
        if shown.insert(al.message.clone()) {
            crate::say!("alarm: {}: {}", al.node, al.message);
        }
    }
}

async fn confirm(question: String) -> Result<bool> {
    tokio::task::spawn_blocking(move || {
        dialoguer::Confirm::new()
            .with_prompt(question)
            .default(false)
            .interact_opt()
            .map(|o| o.unwrap_or(false))
    })
    .await
    .map_err(|e| Error::Unexpected(format!("prompt: {e}")))?
    .map_err(|e| Error::Unexpected(format!("prompt: {e}")))
}

/// Runs `approve`. Returns the exit status (docs/exit-codes.md); errors carry theirs.
///
/// With `-o json|yaml`, an error also prints an `ApproveError` document on stdout
/// ([`crate::output::error_document`]) before the `error:` line goes to stderr, so a script reading stdout
/// gets one document either way (as add-nodes does).
///
/// The flags are resolved into a [`Request`] first (usage errors before any kubeconfig read),
/// then the connection is opened.
pub async fn run(resolve: Resolve, args: &ApproveArgs) -> Result<u8> {
    let r = async {
        let req = Request::from_args(args, std::io::stdin().is_terminal())?;
        let conn = Connection::open(resolve).await?;
        run_checked(conn, req).await
    }
    .await;
    if let (Err(e), true) = (&r, args.output.format() != OutputFormat::Table) {
        if let Ok(doc) = crate::output::error_document("ApproveError", args.output.format(), e) {
            crate::output::emit(&doc);
        }
    }
    r
}

/// `approve` as asked, resolved once from its flags before any cluster read (docs/design.md
/// "Parse first, resolve once"): below [`run`], nothing reads `ApproveArgs`.
pub struct Request {
    /// The approver's options: `--batch`, `--node`/`--nodes-config`, `--reissue`, `--yes`,
    /// `--dry-run`, `--deny-invalid`, `--trust-unverified-boot`, `--kubelet-retry`.
    pub options: ApproveOptions,
    /// `--watch` with its `--timeout`; None: one look.
    pub watch: Option<Duration>,
    /// `--timeout` as typed, for messages.
    pub timeout: String,
    /// `-o`: the document format, and whether the table is `wide`.
    pub format: OutputFormat,
    pub wide: bool,
}

impl Request {
    /// Errors: `--yes` missing without a terminal, a `--timeout` of 0 or a `--kubelet-retry`
    /// under 1 s (exit 2); a `--nodes-config` that cannot be read (exit 3).
    pub fn from_args(args: &ApproveArgs, interactive: bool) -> Result<Request> {
        if !args.yes && !args.dry_run && !interactive {
            return Err(Error::Usage(
                "approve needs --yes when stdin is not a terminal (nobody can answer the prompt); \
                 use --dry-run to only see the verdicts"
                    .into(),
            ));
        }
        let options = options(args)?;
        let watch = if args.watch {
            Some(
                parse_flag("--timeout", &args.timeout)
                    .map_err(Error::Usage)?
                    // 0 is refused rather than read as "no limit": a watch that never ends is
                    // what the batch token's expiry already bounds, and a typo should not hang.
                    .ok_or_else(|| {
                        Error::Usage(format!(
                            "--timeout {:?}: give a positive duration, e.g. --timeout 30m (0 is not accepted)",
                            args.timeout
                        ))
                    })?,
            )
        } else {
            None
        };
        Ok(Request {
            options,
            watch,
            timeout: args.timeout.clone(),
            format: args.output.format(),
            wide: args.output.wide(),
        })
    }
}

async fn run_checked(mut conn: Connection, req: Request) -> Result<u8> {
    let mut a = Approver::new(conn.target(), req.options.clone()).await?;
    for h in a.hints() {
        crate::say!("hint: {h}");
    }
    if let Some(note) = other_batches_note(&a, req.options.batch.as_deref()) {
        crate::say!("{note}");
    }
    match req.watch {
        Some(t) => watch(&mut conn, &mut a, &req, t).await,
        None => once(&mut a, &req).await,
    }
}

/// Under `--batch B`, the one line saying that other batches' pending kubelet CSRs are left
/// alone (None when there are none, or without `--batch`).
fn other_batches_note(a: &Approver, batch: Option<&str>) -> Option<String> {
    let b = batch?;
    let (n, others) = a.out_of_scope_pending();
    (n > 0).then(|| {
        let names: Vec<String> = others.iter().map(|x| escape_for_display(x, CELL_MAX)).collect();
        format!(
            "note: --batch {}: {n} pending CSR{} of other nodes ({}) left alone; approve without --batch judges every CSR",
            escape_for_display(b, CELL_MAX),
            if n == 1 { "" } else { "s" },
            names.join(", ")
        )
    })
}

async fn once(a: &mut Approver, req: &Request) -> Result<u8> {
    let evals = a.evaluate_all(now());
    let todo_approve: Vec<String> = evals
        .iter()
        .filter(|(_, v)| v.approve)
        .map(|(c, _)| c.name.clone())
        .collect();
    let todo_deny: Vec<String> = if req.options.deny_invalid {
        evals
            .iter()
            .filter(|(_, v)| a.deniable(v))
            .map(|(c, _)| c.name.clone())
            .collect()
    } else {
        vec![]
    };
    let mut rows: Vec<Row> = evals
        .iter()
        .map(|(c, v)| {
            row(
                c,
                v,
                if v.approve {
                    Action::WouldApprove
                } else {
                    Action::refused(v)
                },
            )
        })
        .collect();
    let writes = !todo_approve.is_empty() || !todo_deny.is_empty();
    if req.options.dry_run || !writes {
        let doc = report(a, rows);
        let code = doc.exit_code;
        crate::output::emit(&crate::output::render(req.format, &doc, || {
            table(&doc.csrs, req.wide)
        })?);
        if req.format == OutputFormat::Table {
            hint_codes(&doc.csrs, req.wide);
        }
        print_alarms(a, &mut Default::default());
        if code == exit::CSRS {
            explain_exit_7(&doc.waiting, &doc.csrs);
        }
        return Ok(code);
    }
    if !req.options.yes {
        // Show what would happen, then ask (the prompt is on the terminal, not stdout; with
        // -o json|yaml the table goes to stderr so stdout stays one document).
        if req.format == OutputFormat::Table {
            crate::output::emit(&format!("{}\n", table(&rows, req.wide)));
            hint_codes(&rows, req.wide);
        } else {
            crate::say!("{}", table(&rows, req.wide));
        }
        let mut q = format!(
            "Approve {} CSR{}",
            todo_approve.len(),
            if todo_approve.len() == 1 { "" } else { "s" }
        );
        if !todo_deny.is_empty() {
            q = format!("{q} and deny {}", todo_deny.len());
        }
        if !confirm(format!("{q}?")).await? {
            crate::say!("declined: nothing was changed");
            return Ok(exit::DECLINED);
        }
    }
    let mut done: BTreeMap<String, Outcome> = BTreeMap::new();
    for n in &todo_approve {
        let o = a.approve(n).await?;
        warn_client(&o);
        if o.action == Action::Approved {
            crate::say!(
                "approved {} ({} {})",
                escape_for_display(n, CELL_MAX),
                o.verdict.kind,
                o.verdict
                    .node
                    .as_deref()
                    .map(|x| escape_for_display(x, CELL_MAX))
                    .unwrap_or_default()
            );
        }
        done.insert(n.clone(), o);
    }
    for n in &todo_deny {
        let o = a.deny(n).await?;
        if o.action == Action::Denied {
            crate::say!("denied {}", escape_for_display(n, CELL_MAX));
        }
        done.insert(n.clone(), o);
    }
    for ((c, _), r) in evals.iter().zip(rows.iter_mut()) {
        if let Some(o) = done.get(&c.name) {
            *r = row(c, &o.verdict, o.action);
        }
    }
    let doc = report(a, rows);
    let code = doc.exit_code;
    if req.options.yes || req.format != OutputFormat::Table {
        crate::output::emit(&crate::output::render(req.format, &doc, || {
            table(&doc.csrs, req.wide)
        })?);
    }
    print_alarms(a, &mut Default::default());
    if code == exit::CSRS {
        explain_exit_7(&doc.waiting, &doc.csrs);
    }
    Ok(code)
}

fn report(a: &Approver, csrs: Vec<Row>) -> Report {
    let nodes = a.node_states();
    let mut exit_code = exit_code(&csrs, &nodes, |r| a.abandoned(&r.name));
    // A skipped batch record is invalid input (docs/exit-codes.md "When several apply").
    if !a.bad_batches().is_empty() {
        exit_code = exit::most_serious([exit_code, exit::INVALID_INPUT]);
    }
    Report {
        api_version: "agent-day2/v1",
        kind: "ApproveReport",
        csrs,
        nodes,
        hints: a.hints(),
        alarms: a.alarms(),
        waiting: waiting(a),
        exit_code,
    }
}

#[allow(clippy::large_enum_variant)] // one event at a time; boxing buys nothing here
enum Ev {
    Csr(Event<CertificateSigningRequest>),
    Node(Event<Node>),
    Batch(Event<ConfigMap>),
    Record(Event<ConfigMap>),
}

type EvStream = Pin<Box<dyn Stream<Item = std::result::Result<Ev, watcher::Error>> + Send>>;

/// Watches on CSRs, Nodes, the batches' records (approvals and reboot reports, a few hundred
/// bytes each: [`crate::batch::records`]) and every batch ConfigMap: a batch deleted while the
/// watch runs stops its hosts' approvals, and under `--batch` a batch made meanwhile takes its
/// hosts out of scope ([`Approver::forget_batch`], [`Approver::observe_batch`]).
fn streams(target: &KubeTarget, batch_name: Option<&str>) -> EvStream {
    let c = target.client.clone();
    let csr = watcher(
        Api::<CertificateSigningRequest>::all(c.clone()),
        watcher::Config::default(),
    )
    .default_backoff()
    .map(|r| r.map(Ev::Csr));
    let node = watcher(Api::<Node>::all(c.clone()), watcher::Config::default())
        .default_backoff()
        .map(|r| r.map(Ev::Node));
    let rsel = match batch_name {
        Some(b) => format!("{}={b}", crate::batch::records::RECORD_OF),
        None => crate::batch::records::RECORD_OF.to_string(),
    };
    let recs = watcher(
        Api::<ConfigMap>::namespaced(c.clone(), batch::NAMESPACE),
        watcher::Config::default().labels(&rsel),
    )
    .default_backoff()
    .map(|r| r.map(Ev::Record));
    let batches = watcher(
        Api::<ConfigMap>::namespaced(c, batch::NAMESPACE),
        watcher::Config::default().labels(batch::LABEL),
    )
    .default_backoff()
    .map(|r| r.map(Ev::Batch));
    Box::pin(futures::stream::select_all(vec![
        csr.boxed(),
        node.boxed(),
        recs.boxed(),
        batches.boxed(),
    ]))
}

fn is_401(e: &watcher::Error) -> bool {
    let k = match e {
        watcher::Error::InitialListFailed(k)
        | watcher::Error::WatchStartFailed(k)
        | watcher::Error::WatchFailed(k) => Some(k),
        _ => None,
    };
    match (k, e) {
        (Some(kube::Error::Api(s)), _) => s.code == 401,
        (_, watcher::Error::WatchError(s)) => s.code == 401,
        _ => false,
    }
}

/// Streams a row per decision (table: one line each; json/yaml: one document at the end).
struct Live {
    format: OutputFormat,
    /// `-o wide`: every detail in the rows.
    wide: bool,
    /// [`CODES_HINT`] was said.
    hinted: bool,
    header: bool,
    last: BTreeMap<String, (Row, Action)>,
    /// Approvals being written ([`super::execute`]), at most [`PIPELINE`].
    pipe: futures::stream::FuturesUnordered<InFlight>,
    /// Nodes whose deferred CSRs are judged again (an approval of theirs completed).
    retouch: std::collections::BTreeSet<String>,
    /// Node → CSRs deferred while an approval of the same node and kind was written
    /// ([`Plan::Wait`]): judged when it completes, as they would have been after it.
    deferred: BTreeMap<String, std::collections::BTreeSet<String>>,
}

/// How many approvals `approve --watch --yes` writes at once: a CSR's writes are three round
/// trips to the API server, so one at a time capped a 1,000-node batch at ~20 approvals a
/// second (issue 24); two approvals of one node and kind never run together
/// ([`Plan::Wait`]).
const PIPELINE: usize = 16;

type Written = (Box<Planned>, Result<(Option<ConfigMap>, Executed)>);
type InFlight = Pin<Box<dyn std::future::Future<Output = Written> + Send>>;

fn start(p: Box<Planned>) -> InFlight {
    Box::pin(async move {
        let r = execute(&p).await;
        (p, r)
    })
}

/// Takes a finished write back into the engine and shows it; a CSR that must be judged again
/// goes through the checked path ([`Approver::handle`]). Its node's other pending CSRs are
/// judged again on the next turn of the loop.
async fn finish(a: &mut Approver, live: &mut Live, w: Written) -> Result<()> {
    let (p, r) = w;
    live.retouch.insert(p.node().to_string());
    let view = CsrView::from_k8s(p.csr());
    let o = match a.complete(&p, r)? {
        Some(o) => o,
        None => {
            let c = a_csr(a, p.csr_name()).unwrap_or_else(|| p.csr().clone());
            a.handle(&c).await?
        }
    };
    warn_client(&o);
    live.show(&view, &o);
    Ok(())
}

/// Judges the CSRs deferred for the nodes in `live.retouch` (only those: the others were
/// judged when they came, and judging them again would change what their rows said).
async fn retouch(
    a: &mut Approver,
    req: &Request,
    live: &mut Live,
    declined: &mut std::collections::BTreeSet<String>,
) -> Result<()> {
    while let Some(n) = live.retouch.pop_first() {
        let names = live.deferred.remove(&n).unwrap_or_default();
        for name in names {
            if let Some(c) = a_csr(a, &name) {
                process_one(a, req, &c, live, declined).await?;
            }
        }
    }
    Ok(())
}

impl Live {
    fn show(&mut self, view: &CsrView, o: &Outcome) {
        if matches!(o.action, Action::NotPending | Action::Ignored) {
            return;
        }
        let r = row(view, &o.verdict, o.action);
        let key = r.name.clone();
        let same = self
            .last
            .get(&key)
            .is_some_and(|(p, a)| *a == o.action && p.reasons.len() == r.reasons.len());
        self.last.insert(key, (r.clone(), o.action));
        if same || self.format != OutputFormat::Table {
            return;
        }
        let widths = watch_widths(self.wide);
        if !self.header {
            let h: Vec<String> = header(self.wide).iter().map(|h| h.to_uppercase()).collect();
            crate::output::emit(&format!("{}\n", watch_line(&h, &widths)));
            self.header = true;
        }
        crate::output::emit(&format!(
            "{}\n",
            watch_line(&cells(&r, self.wide, now()), &widths)
        ));
        if !self.wide && !self.hinted && !r.reasons.is_empty() {
            crate::say!("{CODES_HINT}");
            self.hinted = true;
        }
    }
}

/// Starts following the hosts' own reboot reports (issue 22 item 1: without it, `approve
/// --watch` alone held every client CSR as boot-unverified until its timeout). None when no
/// host needs it, or the node tokens cannot be read (said once, with the way around).
async fn start_follower(a: &Approver) -> Option<Follower> {
    // A dry run changes nothing, reboot records included.
    let hosts = a.hosts_to_follow();
    if hosts.is_empty() {
        return None;
    }
    if a.options().dry_run {
        // Said, so that a HOLD (boot-unverified) row is not read as "wait and it will pass".
        crate::say!(
            "note: --dry-run: the {} host(s) without a reboot record are not followed and no reboot is recorded, so their client CSRs show HOLD (boot-unverified) here; `oc agent-day2 monitor` records them",
            hosts.len()
        );
        return None;
    }
    let n = hosts.len();
    let started = match crate::follow::read_auth(a.target()).await {
        Ok(tokens) => Follower::start(a.target(), &tokens, hosts, FOLLOW_INTERVAL),
        Err(e) => Err(e),
    };
    match started {
        Ok(f) => {
            crate::say!(
                "approve: following {n} host(s) at their own assisted-service (port 8090) to record their reboots, which their client CSRs are checked against"
            );
            Some(f)
        }
        Err(e) => {
            crate::say!(
                "warning: cannot follow the hosts' reboots ({}): their client CSRs stay held (boot-unverified) unless `oc agent-day2 monitor` runs alongside and records them",
                e.to_string().lines().next().unwrap_or("")
            );
            None
        }
    }
}

/// How often `approve --watch` polls a followed host that answers (1 s while it installs).
const FOLLOW_INTERVAL: Duration = Duration::from_secs(5);

async fn next_seen(f: &mut Option<Follower>) -> Option<Seen> {
    match f {
        Some(f) => f.seen.recv().await,
        None => None,
    }
}

/// One line on stderr for what the follower saw that matters to the operator.
fn say_seen(a: &Approver, seen: &Seen) {
    let esc = |s: &str| escape_for_display(s, 253);
    match seen {
        Seen::Answered { host } => tracing::debug!(host = %host, "its live assisted-service answers"),
        Seen::Recorded { host, reported } => {
            crate::say!("approve: {}: reboot recorded ({})", esc(host), esc(reported))
        }
        Seen::Failed { host, message } => crate::say!(
            "warning: {}: its reboot could not be recorded ({}); its client CSR stays held (boot-unverified)",
            esc(host),
            escape_for_display(message, 400)
        ),
        Seen::Lost { host, url } => crate::say!(
            "warning: {}: its live system at {url} stopped answering before it reported its reboot: if it rebooted, \
             that reboot was not seen and its client CSR stays held (boot-unverified). Check on the host's console \
             that it runs the installed system, then run `oc agent-day2 approve --batch {} --trust-unverified-boot` \
             on a terminal: it shows each CSR and asks before approving",
            esc(host),
            esc(a.batch_of(host).unwrap_or("BATCH"))
        ),
    }
}

/// One `warning:` per batch ConfigMap broken meanwhile ([`Approver::take_broken`]) and per batch
/// forgotten as deleted ([`Approver::take_forgotten`]), however the delete was found (the watch's
/// event, or an approval's own read of the batch).
fn say_forgotten(a: &mut Approver) {
    for w in a.take_broken() {
        crate::say!("warning: {w}");
    }
    for name in a.take_forgotten() {
        crate::say!(
            "warning: batch {} was deleted: its hosts are no longer expected (unless another batch names them), so their pending CSRs are rejected as not-expected-node from now on; delete those CSRs (oc delete csr NAME) if nobody needs them",
            escape_for_display(&name, 253)
        );
    }
}

/// Issue 22 item 1, as monitor says it: a followed host that never answered while a client
/// CSR in its name is held as boot-unverified gets one warning
/// ([`crate::follow::missed_reboot_message`]); its reboot may have come before approve looked.
fn say_missed_reboots(
    a: &Approver,
    live: &Live,
    f: &Follower,
    answered: &BTreeSet<String>,
    told: &mut BTreeSet<String>,
) {
    for (host, since) in &f.since {
        let silent = since.elapsed();
        if told.contains(host) || answered.contains(host) || silent < crate::follow::MISSED_REBOOT_AFTER {
            continue;
        }
        let held = live.last.values().find(|(r, act)| {
            r.kind == Kind::Client
                && *act == Action::Held
                && r.node == escape_for_display(host, usize::MAX)
                && r.reasons.iter().any(|x| x.code == "boot-unverified")
                && still_pending(a, &r.name)
        });
        if let Some((r, _)) = held {
            told.insert(host.clone());
            crate::say!(
                "warning: {}",
                crate::follow::missed_reboot_message(
                    &escape_for_display(host, 253),
                    &r.name,
                    silent.as_secs(),
                    &escape_for_display(a.batch_of(host).unwrap_or("BATCH"), 253),
                )
            );
        }
    }
}

async fn watch(conn: &mut Connection, a: &mut Approver, req: &Request, timeout: Duration) -> Result<u8> {
    let deadline = tokio::time::Instant::now() + timeout;
    let token_left = a
        .token_expires()
        .map(|t| t.duration_since(now()).as_secs_f64().max(0.0))
        .map(Duration::from_secs_f64)
        .unwrap_or(timeout);
    let token_deadline = tokio::time::Instant::now() + token_left;
    let mut live = Live {
        format: req.format,
        wide: req.wide,
        hinted: false,
        header: false,
        last: BTreeMap::new(),
        pipe: Default::default(),
        retouch: Default::default(),
        deferred: Default::default(),
    };
    let mut declined: std::collections::BTreeSet<String> = Default::default();
    let mut alarmed: std::collections::BTreeSet<String> = Default::default();
    let mut reauthed = false;
    // A watch failed at least once (the API server did not answer throughout).
    let mut api_trouble = false;
    let mut s = streams(a.target(), req.options.batch.as_deref());
    let mut csr_synced = false;
    let mut follower = start_follower(a).await;
    // No follower at the start (no host needed one): one is started for a batch made later.
    let mut late_follow_tried = follower.is_some();
    // The hosts that answered at least once, and those whose missed reboot was said
    // ([`say_missed_reboots`]).
    let mut answered: BTreeSet<String> = BTreeSet::new();
    let mut missed_told: BTreeSet<String> = BTreeSet::new();
    let mut tick = tokio::time::interval(Duration::from_secs(5));
    // The watch's own deadlines (--timeout, token expiry), as opposed to an API request that
    // timed out: only the latter is the API server's fault (issue 15 §2).
    let mut own_deadline: Option<&'static str> = None;
    let end: Result<()> = loop {
        if let Err(e) = retouch(a, req, &mut live, &mut declined).await {
            break Err(e);
        }
        say_forgotten(a);
        if csr_synced && a.all_done() {
            break Ok(());
        }
        let ev = tokio::select! {
            Some(w) = live.pipe.next(), if !live.pipe.is_empty() => {
                if let Err(e) = finish(a, &mut live, w).await {
                    break Err(e);
                }
                continue;
            }
            seen = next_seen(&mut follower), if follower.is_some() => {
                match seen {
                    Some(seen) => {
                        if let Seen::Answered { host } = &seen {
                            answered.insert(host.clone());
                        }
                        say_seen(a, &seen)
                    }
                    None => follower = None,
                }
                continue;
            }
            _ = tick.tick(), if follower.is_some() && csr_synced => {
                if let Some(f) = &follower {
                    say_missed_reboots(a, &live, f, &answered, &mut missed_told);
                }
                continue;
            }
            ev = s.next(), if live.pipe.len() < PIPELINE => ev,
            _ = tokio::time::sleep_until(deadline) => {
                own_deadline = Some("timeout");
                break Err(Error::Timeout(format!("after --timeout {}", req.timeout)));
            }
            _ = tokio::time::sleep_until(token_deadline) => {
                own_deadline = Some("token");
                break Err(Error::Timeout(format!("the batch token expired ({}): no new node can join",
                    a.token_expires().map(|t| t.to_string()).unwrap_or_default())));
            }
        };
        let Some(ev) = ev else {
            break Err(Error::Unexpected("the watch ended".into()));
        };
        let ev = match ev {
            Ok(ev) => ev,
            Err(e) if is_401(&e) => {
                if reauthed {
                    break Err(Error::Unauthorized {
                        url: a.target().server.clone(),
                    });
                }
                // An `oc login` token expires after 24 h: read the kubeconfig again, once.
                tracing::warn!("the API server answered 401: reading the kubeconfig again");
                let t = conn.reconnect().await?;
                a.set_target(&t);
                s = streams(a.target(), req.options.batch.as_deref());
                reauthed = true;
                continue;
            }
            Err(e) => {
                tracing::warn!("watch: {e} (retrying)");
                api_trouble = true;
                continue;
            }
        };
        let r = match ev {
            Ev::Node(Event::Apply(n) | Event::InitApply(n)) => {
                a.observe_node(&n);
                Ok(())
            }
            Ev::Node(Event::Delete(n)) => {
                a.forget_node(n.metadata.name.as_deref().unwrap_or(""));
                Ok(())
            }
            Ev::Node(_) => Ok(()),
            Ev::Batch(Event::Apply(cm) | Event::InitApply(cm)) => {
                match a.observe_batch(&cm) {
                    Ok(changed) => {
                        say_forgotten(a); // a batch broken by this edit, before its rows
                                          // A batch made while the watch runs: its hosts are followed too (they were
                                          // not, and their client CSRs stayed held as boot-unverified).
                        if changed {
                            match follower.as_mut() {
                                Some(f) => {
                                    let n = f.add(a.hosts_to_follow());
                                    if n > 0 {
                                        crate::say!(
                                            "approve: following {n} more host(s), of a batch made meanwhile"
                                        );
                                    }
                                }
                                None if csr_synced && !late_follow_tried => {
                                    late_follow_tried = true;
                                    follower = start_follower(a).await;
                                }
                                None => {}
                            }
                        }
                        if changed && csr_synced {
                            process_pending(a, req, &mut live, &mut declined).await
                        } else {
                            Ok(())
                        }
                    }
                    Err(e) => Err(e),
                }
            }
            Ev::Batch(Event::Delete(cm)) => {
                let name = cm.metadata.name.clone().unwrap_or_default();
                // The follower goes on (a batch of that name may come back); it records no
                // reboot on a batch that does not exist ([`crate::follow::record_reboots`]).
                match a.forget_batch(&name) {
                    Ok(true) => {
                        say_forgotten(a);
                        if csr_synced {
                            process_pending(a, req, &mut live, &mut declined).await
                        } else {
                            Ok(())
                        }
                    }
                    Ok(false) => Ok(()),
                    Err(e) => Err(e),
                }
            }
            Ev::Batch(_) => Ok(()),
            Ev::Record(Event::Apply(cm) | Event::InitApply(cm)) => match a.observe_record(&cm) {
                Ok(Touched::Node(n)) if csr_synced => {
                    // Recorded (by us or a monitor): no need to poll the host any more.
                    if let Some(f) = &follower {
                        if a.expected().get(&n).is_some_and(|e| e.rebooted_at.is_some()) {
                            f.recorded(&n);
                        }
                    }
                    let names = a.pending_of(&n);
                    let mut r = Ok(());
                    for name in names {
                        if let Some(c) = a_csr(a, &name) {
                            r = process_one(a, req, &c, &mut live, &mut declined).await;
                            if r.is_err() {
                                break;
                            }
                        }
                    }
                    r
                }
                Ok(Touched::All) if csr_synced => process_pending(a, req, &mut live, &mut declined).await,
                Ok(_) => Ok(()),
                Err(e) => Err(e),
            },
            Ev::Record(_) => Ok(()),
            Ev::Csr(Event::InitApply(c)) => {
                a.observe_csr(&c);
                Ok(())
            }
            Ev::Csr(Event::Init) => Ok(()),
            Ev::Csr(Event::InitDone) => {
                csr_synced = true;
                let r = process_pending(a, req, &mut live, &mut declined).await;
                print_alarms(a, &mut alarmed);
                r
            }
            Ev::Csr(Event::Apply(c)) => {
                let r = process_one(a, req, &c, &mut live, &mut declined).await;
                // Only a client CSR judged to have a rival or to come after its node's approval
                // can raise an alarm (judging every CSR on every event made 200 nodes slow).
                let name = escape_for_display(c.metadata.name.as_deref().unwrap_or(""), usize::MAX);
                let suspect = live.last.get(&name).is_some_and(|(row, _)| {
                    row.kind == Kind::Client
                        && row.reasons.iter().any(|x| {
                            matches!(
                                x.code.as_str(),
                                "second-requester" | "already-approved" | "node-exists"
                            )
                        })
                });
                if suspect {
                    print_alarms(a, &mut alarmed);
                }
                r
            }
            Ev::Csr(Event::Delete(c)) => {
                a.forget_csr(c.metadata.name.as_deref().unwrap_or(""));
                Ok(())
            }
        };
        match r {
            Ok(()) => {}
            Err(Error::Unauthorized { .. }) if !reauthed => {
                let t = conn.reconnect().await?;
                a.set_target(&t);
                s = streams(a.target(), req.options.batch.as_deref());
                reauthed = true;
            }
            Err(e) => break Err(e),
        }
    };
    // The writes under way finish (their outcome shown), whatever ended the loop.
    let mut end = end;
    while let Some(w) = live.pipe.next().await {
        if let Err(e) = finish(a, &mut live, w).await {
            if end.is_ok() {
                end = Err(e);
            }
        }
    }
    // A CSR whose host a batch made meanwhile took out of `--batch`'s scope is that batch's.
    let rows: Vec<Row> = live
        .last
        .values()
        .filter(|(r, _)| !a.csrs.get(&r.name).is_some_and(|c| a.out_of_scope(c)))
        .map(|(r, _)| r.clone())
        .collect();
    let nodes = a.node_states();
    // A client CSR made before its node's batch was recorded (a replaced image's, or someone
    // else's before add-nodes) is never approved and a done node does not need it: said, but
    // not an exit 7 of a run that got every node there.
    let stale = |r: &Row| {
        r.kind == Kind::Client
            && r.reasons.iter().any(|x| x.code == "created-before-batch")
            && nodes.iter().any(|n| n.node == r.node && n.done())
    };
    for r in rows.iter().filter(|r| stale(r) && still_pending(a, &r.name)) {
        crate::say!(
            "note: client CSR {} for {} was made before its batch was recorded (from a replaced image, or someone else's): it is never approved and {} does not need it; delete it (oc delete csr {})",
            cut(&r.name),
            cut(&r.node),
            cut(&r.node),
            cut(&r.name)
        );
    }
    let rejected = rows
        .iter()
        // A rejected CSR that was later approved or issued no longer counts.
        .any(|r| {
            matches!(r.action, Action::Rejected | Action::Held)
                && !stale(r)
                && !a.abandoned(&r.name)
                && still_pending(a, &r.name)
        });
    let mut code = match &end {
        Ok(()) if !rejected && declined.is_empty() => exit::OK,
        Ok(()) => exit::CSRS,
        // Held or rejected CSRs still pending at our own deadline need a decision, which
        // waiting longer does not bring: 7 wins over 5 (docs/exit-codes.md "When several apply").
        Err(Error::Timeout(_)) if own_deadline.is_some() && rejected => exit::CSRS,
        Err(e) => e.exit_code(),
    };
    if code == exit::OK && !nodes.iter().all(NodeState::done) {
        code = exit::CSRS;
    }
    // A skipped batch record is invalid input (docs/exit-codes.md "When several apply").
    if !a.bad_batches().is_empty() {
        code = exit::most_serious([code, exit::INVALID_INPUT]);
        for (name, msg) in a.bad_batches() {
            crate::say!(
                "note: ConfigMap {}/{} is not a batch record ({}): its hosts' CSRs were held (exit 3)",
                batch::NAMESPACE,
                escape_for_display(&name, 253),
                escape_for_display(&msg, 300)
            );
        }
    }
    let still = waiting(a);
    if req.format != OutputFormat::Table {
        let doc = Report {
            api_version: "agent-day2/v1",
            kind: "ApproveReport",
            csrs: rows,
            nodes,
            hints: a.hints(),
            alarms: a.alarms(),
            waiting: still.clone(),
            exit_code: code,
        };
        crate::output::emit(&crate::output::render(req.format, &doc, String::new)?);
    }
    match end {
        Ok(()) => {
            if code == exit::OK {
                crate::say!("done: every expected node is Ready with its serving certificate");
            } else {
                crate::say!("done: every expected node is Ready with its serving certificate; some CSRs were rejected (see above)");
            }
            Ok(code)
        }
        // Our own deadline: Error::Timeout's hint (about a single API request) does not apply.
        // Say which hosts did not get there, and why. The code is the report's (7 when CSRs
        // wait on a decision, 3 with a skipped batch record).
        Err(Error::Timeout(m)) if own_deadline.is_some() => {
            crate::say!("error: timed out: {}", escape_for_display(&m, 4000));
            print_waiting(&still);
            let batches: std::collections::BTreeSet<&str> = still.iter().map(|w| w.batch.as_str()).collect();
            // Whether the API server answers now (a watch on a frozen server fails nothing: a
            // break-it trial got "answered throughout" after a 25 s SIGSTOP).
            let answers = tokio::time::timeout(Duration::from_secs(3), a.target().client.apiserver_version())
                .await
                .is_ok_and(|r| r.is_ok());
            let api = match (answers, api_trouble) {
                (true, false) => "the API server answers and no watch failed",
                (true, true) => {
                    "the API server answers, though a watch failed on the way (see the warnings above)"
                }
                (false, _) => "the API server does not answer now (its outage may explain the wait)",
            };
            let decide = code == exit::CSRS;
            let mut hint = if decide {
                format!(
                    "{api}; some CSRs wait on a decision that more time does not bring: the rejected or held rows above, and the waiting: lines, say what each needs"
                )
            } else {
                format!(
                    "{api}; the hosts above did not get that far: `oc agent-day2 monitor` shows their install stages"
                )
            };
            if req.options.batch.is_none() && batches.len() > 1 {
                hint.push_str("; to follow one batch only, pass --batch NAME");
            }
            hint.push_str(
                "; a host that will not come can be dropped with `oc agent-day2 add-nodes batch delete BATCH`",
            );
            hint.push_str(if own_deadline == Some("token") {
                "; a host that has not booted yet needs a new image: run add-nodes again for it"
            } else if decide {
                ""
            } else {
                "; or give them more time with --timeout"
            });
            crate::say!("       ({hint})");
            Ok(code)
        }
        Err(e) => Err(e),
    }
}

fn still_pending(a: &Approver, escaped_name: &str) -> bool {
    a.evaluate_all(now())
        .iter()
        .any(|(c, _)| escape_for_display(&c.name, usize::MAX) == escaped_name)
}

async fn process_pending(
    a: &mut Approver,
    req: &Request,
    live: &mut Live,
    declined: &mut std::collections::BTreeSet<String>,
) -> Result<()> {
    let pending: Vec<CertificateSigningRequest> = a
        .evaluate_all(now())
        .into_iter()
        .filter_map(|(c, _)| a_csr(a, &c.name))
        .collect();
    for c in pending {
        process_one(a, req, &c, live, declined).await?;
    }
    Ok(())
}

fn a_csr(a: &Approver, name: &str) -> Option<CertificateSigningRequest> {
    a.csrs.get(name).cloned()
}

async fn process_one(
    a: &mut Approver,
    req: &Request,
    c: &CertificateSigningRequest,
    live: &mut Live,
    declined: &mut std::collections::BTreeSet<String>,
) -> Result<()> {
    let name = c.metadata.name.clone().unwrap_or_default();
    let view = CsrView::from_k8s(c);
    if req.options.yes && !req.options.dry_run {
        // Pipelined: decided now, written while the next events are handled.
        while live.pipe.len() >= PIPELINE {
            match live.pipe.next().await {
                Some(w) => finish(a, live, w).await?,
                None => break,
            }
        }
        match a.plan_approval(c) {
            Plan::Io(p) => {
                live.pipe.push(start(p));
                return Ok(());
            }
            Plan::Wait => {
                if let Some(node) = a.evaluate(&name, now()).and_then(|v| v.node) {
                    live.deferred.entry(node).or_default().insert(name);
                }
                return Ok(());
            }
            Plan::Handle => {}
        }
    }
    if !req.options.yes && !req.options.dry_run {
        // On a terminal without --yes: ask for each approvable CSR, once.
        a.observe_csr(c);
        if let Some(v) = a.evaluate(&name, now()) {
            if v.approve && !declined.contains(&name) {
                let r = row(&view, &v, Action::WouldApprove);
                crate::output::emit(&format!("{}\n", table(std::slice::from_ref(&r), req.wide)));
                if confirm(format!("Approve {} ({} {})?", r.name, r.kind, r.node)).await? {
                    let o = a.approve(&name).await?;
                    warn_client(&o);
                    live.show(&view, &o);
                } else {
                    declined.insert(name);
                }
                return Ok(());
            }
        }
    }
    let o = a.handle(c).await?;
    warn_client(&o);
    live.show(&view, &o);
    Ok(())
}

/// The warning shown once per client CSR approved, by `approve` and by `monitor --approve`
/// alike (None for anything else): approve cannot tell the real machine from anyone holding
/// the node-bootstrapper token (the CSR's checks only see what the requester claims; tester
/// finding "rogue client CSR before boot"). If the real node's own CSR is then refused as a
/// second client approval, `--reissue NODE` after deleting the rogue one recovers.
pub fn client_approval_warning(o: &Outcome) -> Option<String> {
    (o.action == Action::Approved && o.verdict.kind == Kind::Client).then(|| {
        format!(
            "approved client CSR {} for {}: approve cannot tell the real machine from anyone \
             holding the node-bootstrapper token: check that this host was booting when the CSR was \
             made (oc agent-day2 monitor shows each host's install stages)",
            escape_for_display(&o.csr, CELL_MAX),
            o.verdict
                .node
                .as_deref()
                .map(|x| escape_for_display(x, CELL_MAX))
                .unwrap_or_default()
        )
    })
}

/// The warning for each client CSR approved without a reboot record of its host
/// (`--trust-unverified-boot`), by `approve` and `monitor --approve` alike; None otherwise.
pub fn unverified_boot_warning(o: &Outcome) -> Option<String> {
    (o.action == Action::Approved && o.verdict.kind == Kind::Client && o.verdict.unverified_boot).then(|| {
        format!(
            "client CSR {} for {} was approved without a reboot record (--trust-unverified-boot): \
             nothing bound it to the machine that booted the image",
            escape_for_display(&o.csr, CELL_MAX),
            o.verdict
                .node
                .as_deref()
                .map(|x| escape_for_display(x, CELL_MAX))
                .unwrap_or_default()
        )
    })
}

/// Prints [`client_approval_warning`] and [`unverified_boot_warning`] on stderr.
fn warn_client(o: &Outcome) {
    if let Some(w) = client_approval_warning(o) {
        crate::say!("warning: {w}");
    }
    if let Some(w) = unverified_boot_warning(o) {
        crate::say!("warning: {w}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn r(name: &str, action: Action) -> Row {
        Row {
            name: name.into(),
            node: "worker-0".into(),
            kind: Kind::Client,
            requester: crate::csr::BOOTSTRAPPER.into(),
            sans: vec![],
            created: None,
            action,
            reasons: vec![],
            unverified_boot: false,
        }
    }

    #[test]
    fn requester_cells_keep_the_name_end() {
        assert_eq!(requester_cell(crate::csr::BOOTSTRAPPER), "node-bootstrapper (SA)");
        let other = "system:serviceaccount:openshift-machine-config-operator:node-bootstrapperx";
        let c = requester_cell(other);
        assert!(c.chars().count() <= CELL_MAX, "{c}");
        assert!(
            c.starts_with("system:") && c.ends_with(":node-bootstrapperx") && c.contains('…'),
            "{c}"
        );
        assert_eq!(requester_cell("system:node:worker-0"), "system:node:worker-0");
    }

    #[test]
    fn denied_csrs_are_handled_held_ones_are_pending() {
        let done = NodeState {
            node: "worker-0".into(),
            batch: "b".into(),
            ips: vec![],
            joined: true,
            ready: true,
            serving_approved: true,
            serving_issued: true,
        };
        let nodes = [done];
        let rows = [r("csr-a", Action::Denied), r("csr-b", Action::Denied)];
        assert_eq!(exit_code(&rows, &nodes, |_| false), exit::OK);
        let rows = [r("csr-a", Action::Denied), r("csr-b", Action::Held)];
        assert_eq!(exit_code(&rows, &nodes, |_| false), exit::CSRS);
        let rows = [r("csr-a", Action::Rejected)];
        assert_eq!(exit_code(&rows, &nodes, |_| false), exit::CSRS);
    }
}
