//! A failed API request in the operator's words: [`classify`] turns a `kube::Error` into the
//! plugin's [`Error`] (and so its exit code), naming the resource, the verb and the server;
//! [`with_deadline`] bounds one request by `--request-timeout`.

use crate::error::{Error, ResourceRef};

use super::target::KubeTarget;

/// Whether a kube error is a timeout (hyper-timeout's io TimedOut, tower's Elapsed, or a
/// deadline of ours) rather than a connection failure.
fn is_timeout(e: &(dyn std::error::Error + 'static)) -> bool {
    let mut cur: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(err) = cur {
        if let Some(io) = err.downcast_ref::<std::io::Error>() {
            if io.kind() == std::io::ErrorKind::TimedOut {
                return true;
            }
        }
        let t = err.to_string().to_ascii_lowercase();
        if t.contains("timed out") || t.contains("deadline has elapsed") || t == "elapsed" {
            return true;
        }
        cur = err.source();
    }
    false
}

/// Runs one request under [`KubeTarget::deadline`] (if set); a request still waiting then
/// is [`Error::Timeout`] naming it (exit 5).
pub async fn with_deadline<T>(
    target: &KubeTarget,
    what: impl FnOnce() -> String,
    fut: impl std::future::Future<Output = std::result::Result<T, kube::Error>>,
) -> std::result::Result<std::result::Result<T, kube::Error>, Error> {
    match target.deadline {
        None => Ok(fut.await),
        Some(d) => match tokio::time::timeout(d, fut).await {
            Ok(r) => Ok(r),
            Err(_) => Err(Error::Timeout(format!(
                "{} at {}: no answer within {} ({})",
                what(),
                target.server,
                humantime_ish(d),
                if target.request_timeout_given {
                    "--request-timeout"
                } else {
                    "the default deadline; --request-timeout overrides it"
                }
            ))),
        },
    }
}

/// `30s`, `1.5s`, `250ms`.
fn humantime_ish(d: std::time::Duration) -> String {
    if d.as_millis() < 1000 {
        format!("{}ms", d.as_millis())
    } else if d.subsec_millis() == 0 {
        format!("{}s", d.as_secs())
    } else {
        format!("{:.1}s", d.as_secs_f64())
    }
}

/// Turns a kube error on `resource` into our error. Connection trouble and 401 are the same
/// whatever the resource; 403 names the user (from the API server's message when present).
pub fn classify(err: kube::Error, verb: &str, resource: ResourceRef, target: &KubeTarget) -> Error {
    match err {
        kube::Error::Api(status) => match status.code {
            401 => Error::Unauthorized {
                url: target.server.clone(),
            },
            // Impersonation refused: kube-apiserver's message is `users "x" is forbidden: User
            // "y" cannot impersonate resource "users" ...`; it is not missing RBAC on `resource`.
            403 if status.message.contains("cannot impersonate") => Error::ImpersonationRefused {
                message: status.message.clone(),
            },
            403 => Error::Forbidden {
                verb: verb.into(),
                resource,
                user: user_from_message(&status.message).or_else(|| target.user_hint.clone()),
            },
            404 => Error::NotFound { resource, why: None },
            code => Error::Api {
                verb: verb.into(),
                resource,
                message: format!("HTTP {code}: {}", status.message),
            },
        },
        kube::Error::SerdeError(e) => Error::Api {
            verb: verb.into(),
            resource,
            message: format!("unexpected answer: {e}"),
        },
        kube::Error::Auth(a) => Error::Kubeconfig {
            message: format!("authentication to {} failed: {}", target.server, auth_failure(&a)),
        },
        other if is_timeout(&other) => Error::Timeout(format!(
            "{verb} {resource}: no answer from {} within --request-timeout {}",
            target.server,
            target
                .request_timeout
                .map(humantime_ish)
                .unwrap_or_else(|| "(client default)".into())
        )),
        other => Error::Unreachable {
            url: target.server.clone(),
            cause: match &target.proxy {
                Some(p) => format!("{} (through proxy {p})", connect_failure(&other)),
                None => connect_failure(&other),
            },
        },
    }
}

/// A failure to reach a server in the operator's words, for [`Error::Unreachable`]'s cause:
/// the operating system's answer when the chain holds one (`connection refused: nothing
/// listens at that address and port`, `no route to host`, `connection timed out`), a name
/// that does not resolve, else the innermost cause (a TLS problem, e.g. `invalid peer
/// certificate: UnknownIssuer`) without the client library's wrapping (`ServiceError: client
/// error (Connect): ...`) and without `(os error N)`.
pub fn connect_failure(e: &(dyn std::error::Error + 'static)) -> String {
    use std::io::ErrorKind as K;
    let mut innermost = e.to_string();
    let mut cur: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(c) = cur {
        if let Some(a) = c.downcast_ref::<kube::client::AuthError>() {
            return auth_failure(a);
        }
        let text = c.to_string();
        if let Some(dns) = text.strip_prefix("dns error: ") {
            return format!("the host name does not resolve ({})", strip_os_error(dns));
        }
        if let Some(io) = c.downcast_ref::<std::io::Error>() {
            let plain = match io.kind() {
                K::ConnectionRefused => Some("connection refused: nothing listens at that address and port"),
                K::ConnectionReset => Some("connection reset by the server"),
                K::ConnectionAborted => Some("connection aborted"),
                K::HostUnreachable => Some("no route to host"),
                K::NetworkUnreachable => Some("network unreachable"),
                K::TimedOut => Some("connection timed out"),
                K::AddrNotAvailable => Some("the address is not available on this machine"),
                _ => None,
            };
            if let Some(p) = plain {
                return p.to_string();
            }
        }
        if !text.is_empty() {
            innermost = text;
        }
        cur = c.source();
    }
    strip_os_error(&innermost)
}

/// A failure of the kubeconfig user's credentials in the operator's words, never with what
/// kube's own text carries: an exec plugin's command line (its environment and arguments),
/// its stdout (the ExecCredential with the token) and stderr, in Rust's Debug format.
pub fn auth_failure(e: &kube::client::AuthError) -> String {
    use kube::client::AuthError as A;
    let run = "run the command of the kubeconfig user's `exec` entry by hand to see why";
    match e {
        A::AuthExecStart(io) => format!(
            "the kubeconfig user's exec plugin could not be started ({}); check its `command`",
            strip_os_error(&io.to_string())
        ),
        A::AuthExecRun { out, .. } => {
            format!("the kubeconfig user's exec plugin failed ({}); {run}", out.status)
        }
        A::AuthExecParse(_) | A::ExecPluginFailed => {
            format!("the kubeconfig user's exec plugin did not print a usable ExecCredential; {run}")
        }
        A::ReadTokenFile(io, path) => format!(
            "cannot read the kubeconfig user's tokenFile {}: {}",
            path.display(),
            strip_os_error(&io.to_string())
        ),
        A::MissingCommand => "the kubeconfig user's `exec` entry has no `command`".into(),
        other => other.to_string().lines().next().unwrap_or("").to_string(),
    }
}

/// `scheme://user:password@host…` → `scheme://user:***@host…`: a proxy URL as messages and
/// logs show it (a kubeconfig's `proxy-url` or `HTTPS_PROXY` may hold a password).
pub fn without_password(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_string();
    };
    let authority_end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    match rest[..authority_end].rfind('@') {
        Some(at) => {
            let user = rest[..at].split(':').next().unwrap_or("");
            let masked = if rest[..at].contains(':') {
                format!("{user}:***")
            } else {
                "***".into()
            };
            format!("{scheme}://{masked}{}", &rest[at..])
        }
        None => url.to_string(),
    }
}

/// `... (os error 111)` → `...`.
pub(crate) fn strip_os_error(s: &str) -> String {
    match s.rfind(" (os error ") {
        Some(i) if s.ends_with(')') => s[..i].to_string(),
        _ => s.to_string(),
    }
}

/// `User "dev" cannot get resource ...` → `dev` (the API server's Forbidden message).
pub(crate) fn user_from_message(msg: &str) -> Option<String> {
    let start = msg.find("User \"")? + 6;
    let end = msg[start..].find('"')? + start;
    Some(msg[start..end].to_string())
}

/// Joins an error and its sources with ": ", dropping repeats (hyper nests the same text).
pub fn error_chain(e: &dyn std::error::Error) -> String {
    let mut parts: Vec<String> = vec![e.to_string()];
    let mut src = e.source();
    while let Some(s) = src {
        let t = s.to_string();
        if !parts.iter().any(|p| p.contains(&t)) {
            parts.push(t);
        }
        src = s.source();
    }
    parts.join(": ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn proxy_passwords_are_masked() {
        assert_eq!(
            without_password("http://user:ProxySecretPW@192.168.111.9:7004/"),
            "http://user:***@192.168.111.9:7004/"
        );
        assert_eq!(
            without_password("http://TOKEN@proxy:3128"),
            "http://***@proxy:3128"
        );
        assert_eq!(without_password("http://proxy:3128/a@b"), "http://proxy:3128/a@b");
        assert_eq!(without_password("proxy:3128"), "proxy:3128");
    }

    #[test]
    fn a_failed_exec_plugin_shows_neither_its_output_nor_its_command() {
        use std::os::unix::process::ExitStatusExt;
        let e = kube::client::AuthError::AuthExecRun {
            cmd: "KUBERNETES_EXEC_INFO={} \"sh\" \"-c\" \"echo SECRET-cmd\"".into(),
            out: Box::new(std::process::Output {
                status: std::process::ExitStatus::from_raw(256),
                stdout: b"{\"status\":{\"token\":\"SECRET-out\"}}".to_vec(),
                stderr: b"SECRET-err".to_vec(),
            }),
        };
        let m = auth_failure(&e);
        assert!(!m.contains("SECRET") && m.contains("exit status: 1"), "{m}");
        let boxed: Box<dyn std::error::Error + Send + Sync> = Box::new(e);
        let m = connect_failure(&kube::Error::Service(boxed));
        assert!(!m.contains("SECRET") && m.contains("exec plugin failed"), "{m}");
    }
}
