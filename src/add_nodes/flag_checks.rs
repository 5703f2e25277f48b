//! add-nodes flag values checked before any cluster or registry work (exit 3 naming the flag),
//! and the output-path errors found at write time mapped to exit 3 (docs/exit-codes.md, code 3:
//! an unusable `--dir` is invalid input, not an unexpected error).

use std::collections::BTreeMap;
use std::path::Path;

use serde_json::Value;

use crate::error::{Error, Result};

fn invalid(field: impl Into<String>, message: impl Into<String>) -> Error {
    Error::InvalidInput {
        field: field.into(),
        message: message.into(),
    }
}

/// Longest file name Linux filesystems take (NAME_MAX, bytes).
pub const NAME_MAX: usize = 255;

/// `--output-name`: at most [`NAME_MAX`] bytes, and so is the temporary name written first
/// (`.<name>.staging-<pid>`, then `..<name>.staging-<pid>.tmp-<pid>-<n>`), so a name that is
/// fine by itself cannot fail with "File name too long" after the ISO was copied.
pub fn check_output_name(name: &str) -> Result<()> {
    // the AtomicFile temporary of the staging file: two dots, ".staging-" and ".tmp-" with
    // PIDs (at most 7 digits on Linux, pid_max 4194304) and a counter (10 digits)
    const TEMP_EXTRA: usize = 2 + ".staging-".len() + 7 + ".tmp-".len() + 7 + 1 + 10;
    if name.len() + TEMP_EXTRA > NAME_MAX {
        return Err(invalid(
            "--output-name",
            format!(
                "is {} bytes long; at most {} bytes are allowed (file names are limited to {NAME_MAX} bytes, and the temporary name written first is {TEMP_EXTRA} bytes longer)",
                name.len(),
                NAME_MAX - TEMP_EXTRA
            ),
        ));
    }
    Ok(())
}

/// `--pool NAME`: not empty, a Kubernetes object name (RFC 1123 subdomain, at most 253), and
/// not the control-plane pool: add-nodes adds workers only (as `role: master` is refused).
pub fn check_pool_name(pool: &str) -> Result<()> {
    if pool.is_empty() {
        return Err(invalid(
            "--pool",
            "is empty; give a MachineConfigPool name, e.g. --pool infra, or leave --pool out for worker",
        ));
    }
    let label_ok = |l: &str| {
        !l.is_empty()
            && l.len() <= 63
            && l.bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
            && !l.starts_with('-')
            && !l.ends_with('-')
    };
    if pool.len() > 253 || !pool.split('.').all(label_ok) {
        return Err(invalid(
            "--pool",
            format!("{pool:?} is not a MachineConfigPool name (lowercase letters, digits, '-' and '.'), e.g. --pool infra"),
        ));
    }
    if pool == "master" || pool == "control-plane" {
        return Err(control_plane_pool(pool));
    }
    Ok(())
}

fn control_plane_pool(pool: &str) -> Error {
    invalid(
        "--pool",
        format!("MachineConfigPool {pool:?} is the control plane's; add-nodes adds worker nodes only (control-plane nodes are not supported on day 2 here): use worker or a custom worker pool"),
    )
}

/// A MachineConfigPool read from the cluster (`--pool NAME`): refused when its nodeSelector
/// picks control-plane nodes (`node-role.kubernetes.io/master` or `.../control-plane`).
pub fn check_pool_object(pool: &str, obj: &Value) -> Result<()> {
    let sel = &obj["spec"]["nodeSelector"];
    let in_labels = sel["matchLabels"]
        .as_object()
        .is_some_and(|m| m.keys().any(|k| is_control_plane_role(k)));
    let in_exprs = sel["matchExpressions"].as_array().is_some_and(|v| {
        v.iter().any(|e| {
            e["key"].as_str().is_some_and(is_control_plane_role)
                && matches!(e["operator"].as_str(), Some("In") | Some("Exists"))
        })
    });
    if in_labels || in_exprs {
        return Err(control_plane_pool(pool));
    }
    Ok(())
}

fn is_control_plane_role(k: &str) -> bool {
    k == "node-role.kubernetes.io/master" || k == "node-role.kubernetes.io/control-plane"
}

/// `--node-labels` keys in the kubernetes.io / k8s.io namespaces are the cluster's (the
/// NodeRestriction admission plugin and the kubelet reserve them); allowed are only
/// `node-role.kubernetes.io/<role>` for a role other than master/control-plane, and
/// `node.kubernetes.io/...`. Errors name the label.
pub fn check_node_labels(labels: &BTreeMap<String, String>) -> Result<()> {
    for k in labels.keys() {
        let Some((prefix, name)) = k.split_once('/') else {
            continue;
        };
        let reserved = ["kubernetes.io", "k8s.io"]
            .iter()
            .any(|ns| prefix == *ns || prefix.ends_with(&format!(".{ns}")));
        if !reserved {
            continue;
        }
        if prefix == "node.kubernetes.io" {
            continue;
        }
        if prefix == "node-role.kubernetes.io" {
            if name == "master" || name == "control-plane" {
                return Err(invalid(
                    "--node-labels",
                    format!("{k:?}: add-nodes adds worker nodes; a control-plane role label would put workloads meant for the control plane on them"),
                ));
            }
            continue;
        }
        return Err(invalid(
            "--node-labels",
            format!("{k:?} is in the {prefix} namespace, which Kubernetes reserves; use your own prefix (e.g. example.com/{name}), node-role.kubernetes.io/<role> or node.kubernetes.io/..."),
        ));
    }
    Ok(())
}

/// `--karg VALUE`: one kernel argument per flag, no whitespace or control characters (the ISO's
/// kargs area is a space-separated line), not empty. Errors name `--karg` and the value.
pub fn check_kargs(kargs: &[String]) -> Result<()> {
    for k in kargs {
        if k.is_empty() {
            return Err(invalid(
                "--karg",
                "is empty; give one kernel argument per --karg, e.g. --karg console=ttyS0",
            ));
        }
        if let Some(c) = k.chars().find(|c| c.is_whitespace() || c.is_control()) {
            return Err(invalid(
                "--karg",
                format!(
                    "{k:?} contains {}; give one kernel argument per --karg, e.g. --karg console=ttyS0 --karg quiet",
                    match c {
                        ' ' => "a space".to_string(),
                        '\n' => "a newline".to_string(),
                        '\t' => "a tab".to_string(),
                        c => format!("the character U+{:04X}", c as u32),
                    }
                ),
            ));
        }
    }
    Ok(())
}

/// The cache directory (`$XDG_CACHE_HOME/agent-day2`, else `~/.cache/agent-day2`): its nearest
/// existing ancestor must be a directory, else exit 3 naming the variable.
pub fn check_cache_root() -> Result<()> {
    let Some(root) = crate::files::cache_root() else {
        return Ok(());
    };
    let var =
        if std::env::var_os("XDG_CACHE_HOME").is_some_and(|v| !v.is_empty() && Path::new(&v).is_absolute()) {
            "XDG_CACHE_HOME"
        } else {
            "HOME (~/.cache)"
        };
    let mut p: Option<&Path> = Some(&root);
    while let Some(a) = p {
        if let Ok(m) = std::fs::metadata(a) {
            if !m.is_dir() {
                return Err(invalid(
                    var,
                    format!("the cache directory {} cannot be made: {} is not a directory; point {var} at a directory", root.display(), a.display()),
                ));
            }
            return Ok(());
        }
        p = a.parent();
    }
    Ok(())
}

/// With `--force`, an existing output path that is a directory cannot be replaced by a file.
pub fn check_force_targets(finals: &[std::path::PathBuf]) -> Result<()> {
    if let Some(p) = finals
        .iter()
        .find(|p| p.symlink_metadata().is_ok_and(|m| m.is_dir()))
    {
        return Err(invalid(
            p.display().to_string(),
            "is a directory; --force replaces files only: remove it, or choose another --dir or --output-name",
        ));
    }
    Ok(())
}

/// Out of space (ENOSPC, EDQUOT) or over the file size limit (EFBIG) while writing outputs:
/// a problem of `--dir` (exit 3), not an unexpected error.
pub fn out_of_space(context: &str, e: &std::io::Error) -> Option<Error> {
    match e.raw_os_error() {
        Some(libc::ENOSPC) | Some(libc::EDQUOT) | Some(libc::EFBIG) => Some(invalid(
            "--dir",
            format!("{context}: {e}; free space there or choose another --dir (the node ISO is about as large as the base ISO)"),
        )),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn code(r: Result<()>) -> u8 {
        r.err().map(|e| e.exit_code()).unwrap_or(0)
    }

    #[test]
    fn output_names_fit_with_their_temporary_name() {
        assert_eq!(code(check_output_name("batch-2.iso")), 0);
        let e = check_output_name(&"a".repeat(300)).unwrap_err();
        assert_eq!(e.exit_code(), 3);
        assert!(
            e.to_string().contains("--output-name") && e.to_string().contains("300 bytes"),
            "{e}"
        );
        assert_eq!(code(check_output_name(&"a".repeat(220))), 3);
        assert_eq!(code(check_output_name(&"a".repeat(200))), 0);
    }

    #[test]
    fn pools() {
        for p in ["", "master", "control-plane", "Infra", "a/b", "-x"] {
            let e = check_pool_name(p).unwrap_err();
            assert_eq!(e.exit_code(), 3, "{p}");
            assert!(e.to_string().contains("--pool"), "{p}: {e}");
        }
        assert_eq!(code(check_pool_name("infra")), 0);
        let cp = json!({"spec": {"nodeSelector": {"matchLabels": {"node-role.kubernetes.io/master": ""}}}});
        assert_eq!(code(check_pool_object("cp2", &cp)), 3);
        let cp = json!({"spec": {"nodeSelector": {"matchExpressions": [{"key": "node-role.kubernetes.io/control-plane", "operator": "Exists"}]}}});
        assert_eq!(code(check_pool_object("cp3", &cp)), 3);
        let infra = json!({"spec": {"nodeSelector": {"matchLabels": {"node-role.kubernetes.io/infra": ""}}}});
        assert_eq!(code(check_pool_object("infra", &infra)), 0);
    }

    #[test]
    fn reserved_label_namespaces() {
        let l = |k: &str| BTreeMap::from([(k.to_string(), String::new())]);
        for k in [
            "kubernetes.io/hostname",
            "foo.k8s.io/x",
            "node-role.kubernetes.io/master",
            "node-role.kubernetes.io/control-plane",
            "k8s.io/a",
            "node-restriction.kubernetes.io/x",
        ] {
            let e = check_node_labels(&l(k)).unwrap_err();
            assert!(
                e.to_string().contains(k) && e.to_string().contains("--node-labels"),
                "{k}: {e}"
            );
        }
        for k in [
            "node-role.kubernetes.io/infra",
            "node.kubernetes.io/exclude-from-external-load-balancers",
            "zone",
            "example.com/rack",
            "notkubernetes.io/x",
        ] {
            assert_eq!(code(check_node_labels(&l(k))), 0, "{k}");
        }
    }

    #[test]
    fn kargs_one_per_flag() {
        assert_eq!(code(check_kargs(&["console=ttyS0".into(), "quiet".into()])), 0);
        for k in ["", "a b", "a\nb", "a\tb", "x\u{7}"] {
            let e = check_kargs(&[k.to_string()]).unwrap_err();
            assert!(e.to_string().contains("--karg"), "{k:?}: {e}");
        }
    }

    #[test]
    fn enospc_is_a_dir_problem() {
        let e = out_of_space("cannot write x", &std::io::Error::from_raw_os_error(libc::ENOSPC)).unwrap();
        assert_eq!(e.exit_code(), 3);
        assert!(e.to_string().contains("--dir"));
        assert!(out_of_space("x", &std::io::Error::from_raw_os_error(libc::EACCES)).is_none());
    }
}
