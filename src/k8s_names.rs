//! Kubernetes object-name rules (apimachinery `validation.IsDNS1123Label` /
//! `IsDNS1123Subdomain`), the one place for them: node names checked by the CSR verdict, and
//! the names `migrate` makes and accepts.

/// Namespace where agent-day2 keeps its batch records and secrets.
pub const OWN_NAMESPACE: &str = "openshift-agent-day2";

/// Whether `name` is a DNS-1123 label: 1–63 characters of `[a-z0-9-]`, starting and ending
/// alphanumeric (namespaces, `migrate`'s ClusterDeployment name).
pub fn is_dns1123_label(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 63
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !name.starts_with('-')
        && !name.ends_with('-')
}

/// Whether `name` is a DNS-1123 subdomain: at most 253 characters, DNS-1123 labels joined by
/// `.` (node names, Secrets, ClusterImageSets and most custom resources).
pub fn is_dns1123_subdomain(name: &str) -> bool {
    name.len() <= 253 && name.split('.').all(is_dns1123_label)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_and_subdomains() {
        assert!(is_dns1123_label("agent-cluster") && is_dns1123_label("a"));
        for bad in ["", "-a", "a-", "A", "a.b", "a_b", &"a".repeat(64)] {
            assert!(!is_dns1123_label(bad), "{bad:?}");
        }
        assert!(is_dns1123_subdomain("openshift-4.18.3") && is_dns1123_subdomain("worker-0"));
        for bad in ["", "../x", "a..b", ".a", "a.", &format!("{}.b", "a".repeat(64))] {
            assert!(!is_dns1123_subdomain(bad), "{bad:?}");
        }
        assert!(is_dns1123_subdomain(&["a"; 127].join(".")), "253 characters");
        assert!(!is_dns1123_subdomain(&["a"; 128].join(".")), "255 characters");
    }
}
