//! What the user can hit, as one typed error, and the exit code of each case.
//!
//! The exit codes are the contract of docs/exit-codes.md: 0 ok, 1 unexpected,
//! 2 usage, 3 invalid input, 4 cluster access, 5 timed out, 6 install failed, 7 CSRs,
//! 8 declined. Every message names the resource or field; [`Error::hint`] says what to do.

use std::fmt;

/// Exit codes of every command (docs/exit-codes.md).
pub mod exit {
    /// Everything asked for happened.
    pub const OK: u8 = 0;
    /// A bug or an error nobody planned for.
    pub const UNEXPECTED: u8 = 1;
    /// Bad flags or arguments (clap's own usage errors exit with this too).
    pub const USAGE: u8 = 2;
    /// Invalid input file (nodes-config, bundle): the message names the field.
    pub const INVALID_INPUT: u8 = 3;
    /// Unreachable, unauthorized, forbidden, a missing resource, or a cluster that cannot
    /// take day-2 nodes: the message names it.
    pub const CLUSTER_ACCESS: u8 = 4;
    /// Timed out.
    pub const TIMEOUT: u8 = 5;
    /// A node's installation failed.
    pub const INSTALL_FAILED: u8 = 6;
    /// CSRs rejected or still pending at the end.
    pub const CSRS: u8 = 7;
    /// Declined at the prompt; nothing was changed.
    pub const DECLINED: u8 = 8;

    /// The order in which codes win when several apply to one run, most serious first
    /// (docs/exit-codes.md "When several apply"): what stopped the run (1-4), then a node's
    /// failed installation (6: it needs a re-install), then CSRs that need a decision (7),
    /// then a plain timeout (5: waiting longer may be enough), then a decline (8). A failure
    /// always shows: a run with one failed node and one still installing exits 6, not 5.
    pub const PRECEDENCE: [u8; 8] = [
        UNEXPECTED,
        USAGE,
        INVALID_INPUT,
        CLUSTER_ACCESS,
        INSTALL_FAILED,
        CSRS,
        TIMEOUT,
        DECLINED,
    ];

    /// The code a run exits with when each of `codes` applies: 0 when all are 0 (or there are
    /// none), else the one first in [`PRECEDENCE`]; a code outside it ranks last.
    pub fn most_serious(codes: impl IntoIterator<Item = u8>) -> u8 {
        let rank = |c: u8| {
            PRECEDENCE
                .iter()
                .position(|p| *p == c)
                .unwrap_or(PRECEDENCE.len())
        };
        codes
            .into_iter()
            .filter(|c| *c != OK)
            .min_by_key(|c| rank(*c))
            .unwrap_or(OK)
    }
}

/// A Kubernetes object (or a collection of them) that a message talks about,
/// shown as `Secret openshift-config/pull-secret`, `ClusterVersion version` or `Nodes`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResourceRef {
    /// Kind as users know it (`Secret`, `ClusterVersion`); plural for lists (`Nodes`).
    pub kind: String,
    /// Namespace of namespaced objects.
    pub namespace: Option<String>,
    /// Object name; None for a list.
    pub name: Option<String>,
}

impl ResourceRef {
    /// A namespaced object.
    pub fn namespaced(kind: &str, namespace: &str, name: &str) -> Self {
        ResourceRef {
            kind: kind.into(),
            namespace: Some(namespace.into()),
            name: Some(name.into()),
        }
    }
    /// A cluster-scoped object.
    pub fn cluster(kind: &str, name: &str) -> Self {
        ResourceRef {
            kind: kind.into(),
            namespace: None,
            name: Some(name.into()),
        }
    }
    /// A list of objects (`kind` is the plural, e.g. `ImageDigestMirrorSets`).
    pub fn list(kind: &str) -> Self {
        ResourceRef {
            kind: kind.into(),
            namespace: None,
            name: None,
        }
    }
}

impl fmt::Display for ResourceRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (&self.namespace, &self.name) {
            (Some(ns), Some(n)) => write!(f, "{} {ns}/{n}", self.kind),
            (None, Some(n)) => write!(f, "{} {n}", self.kind),
            (Some(ns), None) => write!(f, "{} in namespace {ns}", self.kind),
            (None, None) => write!(f, "{}", self.kind),
        }
    }
}

/// Every error a command reports. `Display` is the `error:` line; [`Error::hint`] the
/// line below it; [`Error::exit_code`] the process exit status.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Flags that parse but do not make sense together (clap handles the rest).
    #[error("{0}")]
    Usage(String),

    /// An input file or value is wrong; `field` is its path (`hosts[1].interfaces[0].macAddress`).
    #[error("{field}: {message}")]
    InvalidInput { field: String, message: String },

    /// Every error of a nodes-config (file or single-host flags), one `error:` line each.
    #[error("{}", .0.lines().join("\nerror: "))]
    InvalidConfig(ConfigErrors),

    /// The kubeconfig or a connection flag cannot be used.
    #[error("{message}")]
    Kubeconfig { message: String },

    /// A kubeconfig entry or file that does not exist or cannot be used (`--user nosuch`,
    /// `--context nosuch`, a control character in a token); `hint` says what to do instead of
    /// the generic "log in" of [`Error::Kubeconfig`].
    #[error("{message}")]
    KubeconfigEntry { message: String, hint: String },

    /// The API server refused `--as`/`--as-group`/`--as-uid` (403 on verb `impersonate`).
    #[error("impersonation refused: {message}")]
    ImpersonationRefused { message: String },

    /// An object `info` could not read (403, server error): the facts it carries are unknown.
    #[error("cannot read {resource}: {reason} ({unknown} unknown)")]
    Unreadable {
        resource: ResourceRef,
        reason: String,
        /// What is unknown because of it, e.g. `FIPS mode`.
        unknown: String,
    },

    /// Several errors, each printed as its own `error:` line with its hint (e.g. every
    /// resource `info` could not read). The exit code is the most serious of theirs
    /// ([`exit::most_serious`]).
    #[error("{}", .0.iter().map(|e| e.to_string()).collect::<Vec<_>>().join("\nerror: "))]
    Many(Vec<Error>),

    /// No answer from the API server (connection refused, DNS, TLS).
    #[error("cannot reach the API server at {url}: {cause}")]
    Unreachable { url: String, cause: String },

    /// The API server rejected our credentials (HTTP 401).
    #[error("unauthorized at {url}: the credentials of the current context were rejected")]
    Unauthorized { url: String },

    /// HTTP 403 on a read or write we need.
    #[error("cannot {verb} {resource}: forbidden{}", user.as_ref().map(|u| format!(" for user \"{u}\"")).unwrap_or_default())]
    Forbidden {
        verb: String,
        resource: ResourceRef,
        user: Option<String>,
    },

    /// HTTP 404 on something required.
    #[error("{resource} not found{}", why.as_ref().map(|w| format!(" ({w})")).unwrap_or_default())]
    NotFound {
        resource: ResourceRef,
        why: Option<String>,
    },

    /// Any other API answer we cannot use (5xx, malformed object).
    #[error("cannot {verb} {resource}: {message}")]
    Api {
        verb: String,
        resource: ResourceRef,
        message: String,
    },

    /// A required object exists but lacks a field we need, or holds something unparseable.
    #[error("{resource}: {message}")]
    BadObject { resource: ResourceRef, message: String },

    /// The cluster cannot take day-2 nodes (too old, unsupported platform); one reason per line.
    #[error("the cluster cannot take day-2 nodes: {}", reasons.join("; "))]
    ClusterUnsupported { reasons: Vec<String> },

    /// Something did not finish in time.
    #[error("timed out: {0}")]
    Timeout(String),

    /// Local file trouble (output files, kubeconfig-referenced files).
    #[error("{path}: {source}")]
    Io {
        path: String,
        #[source]
        source: std::io::Error,
    },

    /// Anything else; exit 1.
    #[error("{0}")]
    Unexpected(String),

    /// `error` with a hint of the command that reports it instead of the generic one (e.g.
    /// `info`'s 403s: the generic hint would tell to run `info`). Message and exit code are
    /// `error`'s.
    #[error("{error}")]
    Hinted { error: Box<Error>, hint: String },
}

impl Error {
    /// The process exit status for this error (docs/exit-codes.md).
    pub fn exit_code(&self) -> u8 {
        match self {
            Error::Usage(_) => exit::USAGE,
            Error::InvalidInput { .. } | Error::InvalidConfig(_) => exit::INVALID_INPUT,
            Error::Many(v) if v.is_empty() => exit::UNEXPECTED,
            Error::Many(v) => exit::most_serious(v.iter().map(Error::exit_code)),
            Error::Kubeconfig { .. }
            | Error::KubeconfigEntry { .. }
            | Error::ImpersonationRefused { .. }
            | Error::Unreadable { .. }
            | Error::Unreachable { .. }
            | Error::Unauthorized { .. }
            | Error::Forbidden { .. }
            | Error::NotFound { .. }
            | Error::Api { .. }
            | Error::BadObject { .. }
            | Error::ClusterUnsupported { .. } => exit::CLUSTER_ACCESS,
            Error::Timeout(_) => exit::TIMEOUT,
            Error::Io { .. } | Error::Unexpected(_) => exit::UNEXPECTED,
            Error::Hinted { error, .. } => error.exit_code(),
        }
    }

    /// What to do about it, printed indented under the `error:` line. None when the
    /// message says it all.
    pub fn hint(&self) -> Option<String> {
        match self {
            Error::Kubeconfig { .. } => {
                Some("log in with `oc login`, or pass --kubeconfig / --context / --server".into())
            }
            Error::KubeconfigEntry { hint, .. } | Error::Hinted { hint, .. } => Some(hint.clone()),
            Error::Unreadable { .. } => Some(
                "ask for read access to it (cluster-admin has it; the exact permissions are in README \
                 \"Permissions\"), or check the API server if it answered with an error"
                    .into(),
            ),
            Error::ImpersonationRefused { .. } => Some(
                "your user may not impersonate that user/group: drop --as/--as-group/--as-uid, or ask \
                 for the `impersonate` verb on users/groups (cluster-admin has it)"
                    .into(),
            ),
            Error::Unreachable { .. } => {
                Some("check --server/--context (and HTTPS_PROXY/NO_PROXY), and that the cluster is up".into())
            }
            Error::Timeout(_) => Some(
                "the API server did not answer in time: check that it is up and reachable, or \
                 raise --request-timeout (0 = no limit)"
                    .into(),
            ),
            Error::Unauthorized { .. } => Some("log in again (oc login), or check --token".into()),
            Error::Forbidden { .. } => Some(
                "agent-day2 needs cluster-admin or the permissions listed in README \"Permissions\"; \
                 `oc agent-day2 info` shows what is missing"
                    .into(),
            ),
            Error::NotFound { resource, .. } if resource.name.as_deref() == Some("coreos-bootimages") => {
                Some(
                    "every OpenShift 4.x has it (the machine-config operator writes it): check \
                 `oc get clusteroperator machine-config`; add-nodes can go on with --base-iso FILE"
                        .into(),
                )
            }
            // A batch record is ours, not the cluster's: its message names what to run.
            Error::NotFound { resource, .. } if resource.kind == "batch" => None,
            Error::NotFound { .. } => Some(
                "is this an OpenShift 4.18+ cluster installed with the agent-based installer? \
                 check --context"
                    .into(),
            ),
            Error::ClusterUnsupported { .. } => Some(
                "agent-day2 supports OpenShift 4.18 and newer on platforms baremetal, none, \
                 external and vsphere"
                    .into(),
            ),
            _ => None,
        }
    }

    /// Prints `error: <message>` and the hint to stderr, the way every command ends
    /// ([`Error::Many`]: one such pair per error). See [`Error::render`].
    pub fn print(&self) {
        crate::say_part!("{}", self.render());
    }

    /// The text [`Error::print`] writes. Messages carry text from the cluster (server
    /// messages, object names, versions): each line is escaped with
    /// [`crate::text::escape_for_display`] (docs/design.md "Plugin conventions": everything
    /// shown to the operator is escaped), so a hostile value cannot send terminal control sequences.
    pub fn render(&self) -> String {
        if let Error::Many(v) = self {
            return v.iter().map(Error::render).collect();
        }
        let esc = |s: &str| {
            s.lines()
                .map(|l| crate::text::escape_for_display(l, 2000))
                .collect::<Vec<_>>()
                .join("\n")
        };
        // InvalidConfig joins its lines with "\nerror: " itself; escape line by line.
        let mut out = format!("error: {}\n", esc(&self.to_string()));
        if let Some(h) = self.hint() {
            out.push_str(&format!("       ({})\n", esc(&h)));
        }
        out
    }
}

/// Result with [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

// The input errors of nodes-config and flags (`crate::nodes_config` re-exports them): here,
// below everything that reports them.

/// One problem in the input: where and what.
///
/// `Display`: `hosts[1].interfaces[0].macAddress: "52:54:00:AA:00:30" is already used by hosts[0]`.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct FieldError {
    /// Field path (`hosts[0].rootDeviceHints.wwn`), a flag (`--mac-address`) or, for errors
    /// about the whole document, the file name.
    pub path: String,
    /// What is wrong, quoting the value, and what to do.
    pub message: String,
}

impl FieldError {
    /// A new error at `path`.
    pub fn new(path: impl Into<String>, message: impl Into<String>) -> Self {
        FieldError {
            path: path.into(),
            message: message.into(),
        }
    }
}

impl std::fmt::Display for FieldError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.path.is_empty() {
            write!(f, "{}", self.message)
        } else {
            write!(f, "{}: {}", self.path, self.message)
        }
    }
}

/// Every error found in one input (never empty when returned as an `Err`).
///
/// `Display`: one [`FieldError`] per line. Converts into
/// [`Error::InvalidConfig`] (exit code 3).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigErrors {
    /// The input as named to the user: the file path as given, or `flags`.
    pub source: String,
    /// The errors, in input order.
    pub errors: Vec<FieldError>,
}

impl ConfigErrors {
    /// The errors as display lines.
    pub fn lines(&self) -> Vec<String> {
        self.errors.iter().map(ToString::to_string).collect()
    }
}

impl std::fmt::Display for ConfigErrors {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.lines().join("\n"))
    }
}

impl std::error::Error for ConfigErrors {}

impl From<ConfigErrors> for Error {
    fn from(e: ConfigErrors) -> Self {
        Error::InvalidConfig(e)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn forbidden_names_resource_and_user_and_exits_4() {
        let e = Error::Forbidden {
            verb: "read".into(),
            resource: ResourceRef::namespaced("Secret", "openshift-config", "pull-secret"),
            user: Some("dev".into()),
        };
        assert_eq!(
            e.to_string(),
            "cannot read Secret openshift-config/pull-secret: forbidden for user \"dev\""
        );
        assert_eq!(e.exit_code(), 4);
        assert!(e.hint().unwrap().contains("Permissions"));
    }

    #[test]
    fn printed_errors_escape_terminal_controls_and_list_every_error() {
        let e = Error::Many(vec![
            Error::Api {
                verb: "read".into(),
                resource: ResourceRef::cluster("Proxy", "cluster"),
                message: "HTTP 500: \u{1b}]0;pwned\u{7}boom\u{202e}".into(),
            },
            Error::Timeout("x".into()),
        ]);
        let r = e.render();
        assert!(
            !r.contains('\u{1b}') && !r.contains('\u{202e}') && !r.contains('\u{7}'),
            "{r}"
        );
        assert!(r.contains("\\u{1b}]0;pwned\\u{7}boom\\u{202e}"), "{r}");
        assert_eq!(r.matches("error: ").count(), 2, "{r}");
        assert_eq!(e.exit_code(), 4, "4 outranks 5");
    }

    #[test]
    fn exit_codes_follow_design() {
        assert_eq!(Error::Usage("x".into()).exit_code(), 2);
        assert_eq!(
            Error::InvalidInput {
                field: "a".into(),
                message: "b".into()
            }
            .exit_code(),
            3
        );
        assert_eq!(Error::Timeout("x".into()).exit_code(), 5);
        assert_eq!(Error::Unexpected("x".into()).exit_code(), 1);
        assert_eq!(Error::ClusterUnsupported { reasons: vec![] }.exit_code(), 4);
    }

    #[test]
    fn a_failure_outranks_pending_csrs_and_a_timeout() {
        use exit::most_serious;
        assert_eq!(most_serious([]), 0);
        assert_eq!(most_serious([0, 0]), 0);
        assert_eq!(most_serious([5, 6]), 6);
        assert_eq!(most_serious([7, 5]), 7);
        assert_eq!(most_serious([7, 6, 5]), 6);
        assert_eq!(most_serious([7, 3]), 3);
        assert_eq!(most_serious([6, 4]), 4);
        assert_eq!(most_serious([8, 5]), 5);
        assert_eq!(most_serious([9, 5]), 5);
    }
}
