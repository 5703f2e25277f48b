//! deploy/rbac.yaml against src/permissions.rs: every permission `info` checks must be granted
//! by the role of each command that needs it (info and add-nodes -> agent-day2-add-nodes,
//! approve and monitor -> agent-day2-approve, migrate import and status -> agent-day2-migrate,
//! migrate wait -> agent-day2-migrate-wait), and each role must be bound. The rule matcher
//! below follows the RBAC authorizer's rule semantics (kubernetes `pkg/apis/rbac/v1/evaluation_helpers.go`:
//! `*` matches everything; an empty `resourceNames` matches every name, a non-empty one only
//! requests that carry one of those names).
//! The simulator cannot take the file (it serves no RBAC API), so the objects are checked
//! against the Kubernetes types instead.

use agent_day2::permissions::{required_permissions, Permission};
use serde_json::Value;

const RBAC: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/deploy/rbac.yaml");

fn docs() -> Vec<Value> {
    let text = std::fs::read_to_string(RBAC).unwrap();
    serde_saphyr::from_multiple::<Value>(&text)
        .unwrap()
        .into_iter()
        .filter(|d| !d.is_null())
        .collect()
}

/// The role that serves a command.
fn role_for(command: &str) -> &'static str {
    match command {
        "info" | "add-nodes" => "agent-day2-add-nodes",
        "approve" | "monitor" => "agent-day2-approve",
        "migrate import" | "migrate status" => "agent-day2-migrate",
        "migrate wait" => "agent-day2-migrate-wait",
        other => panic!("no role for command {other}: add it to deploy/rbac.yaml and here"),
    }
}

fn has(list: &Value, want: &str) -> bool {
    list.as_array()
        .is_some_and(|a| a.iter().any(|v| v == "*" || v == want))
}

fn rule_grants(rule: &Value, p: &Permission) -> bool {
    let resource = match &p.subresource {
        Some(s) => format!("{}/{s}", p.resource),
        None => p.resource.clone(),
    };
    let names = rule["resourceNames"].as_array().cloned().unwrap_or_default();
    let name_ok = names.is_empty()
        || p.name
            .as_ref()
            .is_some_and(|n| names.iter().any(|v| v == n.as_str()));
    has(&rule["apiGroups"], &p.group)
        && has(&rule["resources"], &resource)
        && has(&rule["verbs"], &p.verb)
        && name_ok
}

/// Whether `role` (a ClusterRole of that name, or for a namespaced permission a Role of that
/// name in its namespace) grants `p`, and the object granting it is bound to a subject.
fn granted(docs: &[Value], role: &str, p: &Permission) -> bool {
    let bound = |kind: &str, ns: Option<&str>| {
        docs.iter().any(|d| {
            let binding = if kind == "ClusterRole" && ns.is_none() {
                "ClusterRoleBinding"
            } else {
                "RoleBinding"
            };
            d["kind"] == binding
                && d["roleRef"]["kind"] == kind
                && d["roleRef"]["name"] == role
                && ns.is_none_or(|n| d["metadata"]["namespace"] == n)
                && d["subjects"].as_array().is_some_and(|s| !s.is_empty())
        })
    };
    docs.iter().any(|d| {
        let kind = d["kind"].as_str().unwrap_or("");
        let applies = match kind {
            "ClusterRole" => true,
            "Role" => p
                .namespace
                .as_deref()
                .is_some_and(|ns| d["metadata"]["namespace"] == ns),
            _ => false,
        };
        applies
            && d["metadata"]["name"] == role
            && d["rules"]
                .as_array()
                .is_some_and(|r| r.iter().any(|r| rule_grants(r, p)))
            && bound(
                kind,
                if kind == "Role" {
                    p.namespace.as_deref()
                } else {
                    None
                },
            )
    })
}

#[test]
fn every_required_permission_is_granted_by_the_role_of_each_command_needing_it() {
    let docs = docs();
    let perms = required_permissions();
    assert!(perms.len() > 20, "{}", perms.len());
    let mut missing = Vec::new();
    for p in &perms {
        for cmd in &p.needed_by {
            let role = role_for(cmd);
            if !granted(&docs, role, p) {
                missing.push(format!("{role}: {} (for {cmd})", p.describe()));
            }
        }
    }
    assert!(
        missing.is_empty(),
        "deploy/rbac.yaml lacks:\n{}",
        missing.join("\n")
    );
}

#[test]
fn the_roles_grant_no_more_than_their_job() {
    let docs = docs();
    let perm =
        |verb: &str, group: &str, res: &str, sub: Option<&str>, ns: Option<&str>, name: Option<&str>| {
            Permission {
                verb: verb.into(),
                group: group.into(),
                resource: res.into(),
                subresource: sub.map(String::from),
                namespace: ns.map(String::from),
                name: name.map(String::from),
                needed_by: vec![],
            }
        };
    let csr = "certificates.k8s.io";
    // Only the two kubelet signers.
    for signer in [
        "kubernetes.io/kube-apiserver-client",
        "kubernetes.io/legacy-unknown",
    ] {
        let p = perm("approve", csr, "signers", None, None, Some(signer));
        assert!(!granted(&docs, "agent-day2-approve", &p), "approve on {signer}");
    }
    let p = perm(
        "approve",
        csr,
        "signers",
        None,
        None,
        Some("kubernetes.io/kubelet-serving"),
    );
    assert!(granted(&docs, "agent-day2-approve", &p));
    // The add-nodes operator cannot approve CSRs.
    let p = perm(
        "update",
        csr,
        "certificatesigningrequests",
        Some("approval"),
        None,
        None,
    );
    assert!(!granted(&docs, "agent-day2-add-nodes", &p));
    assert!(granted(&docs, "agent-day2-approve", &p));
    // Secrets are readable only by name outside openshift-agent-day2.
    let p = perm(
        "get",
        "",
        "secrets",
        None,
        Some("openshift-config"),
        Some("etcd-signer"),
    );
    assert!(!granted(&docs, "agent-day2-add-nodes", &p));
    let p = perm("list", "", "secrets", None, Some("openshift-config"), None);
    assert!(!granted(&docs, "agent-day2-add-nodes", &p));
    let p = perm("get", "", "secrets", None, Some("kube-system"), None);
    assert!(!granted(&docs, "agent-day2-approve", &p));
    // The node tokens' Secret in openshift-config (where oc adm node-image keeps it): add-nodes
    // reads and replaces that one only, and may create Secrets there (RBAC cannot name what
    // is created) but not read, change or delete other ones; approve/monitor only read it.
    let cfg = Some("openshift-config");
    let tokens = Some("agent-auth-token");
    for verb in ["get", "update"] {
        assert!(
            granted(
                &docs,
                "agent-day2-add-nodes",
                &perm(verb, "", "secrets", None, cfg, tokens)
            ),
            "{verb}"
        );
    }
    assert!(granted(
        &docs,
        "agent-day2-add-nodes",
        &perm("create", "", "secrets", None, cfg, None)
    ));
    for (verb, name) in [
        ("update", "pull-secret"),
        ("patch", "pull-secret"),
        ("delete", "agent-auth-token"),
        ("get", "etcd-client"),
    ] {
        let p = perm(verb, "", "secrets", None, cfg, Some(name));
        assert!(!granted(&docs, "agent-day2-add-nodes", &p), "{verb} {name}");
    }
    assert!(granted(
        &docs,
        "agent-day2-approve",
        &perm("get", "", "secrets", None, cfg, tokens)
    ));
    for verb in ["create", "update", "patch", "delete", "list"] {
        let p = perm(verb, "", "secrets", None, cfg, tokens);
        assert!(!granted(&docs, "agent-day2-approve", &p), "{verb}");
    }
    assert!(!granted(
        &docs,
        "agent-day2-approve",
        &perm("get", "", "secrets", None, cfg, Some("pull-secret"))
    ));
    // add-nodes no longer writes Secrets in its own namespace; it reads the old token Secret.
    let own = Some("openshift-agent-day2");
    assert!(granted(
        &docs,
        "agent-day2-add-nodes",
        &perm("get", "", "secrets", None, own, Some("agent-day2-auth"))
    ));
    for verb in ["create", "update", "delete"] {
        let p = perm(verb, "", "secrets", None, own, Some("agent-day2-auth"));
        assert!(!granted(&docs, "agent-day2-add-nodes", &p), "{verb}");
    }
    // Nothing deletes nodes.
    let p = perm("delete", "", "nodes", None, None, Some("worker-1"));
    assert!(!granted(&docs, "agent-day2-approve", &p));
    assert!(!granted(&docs, "agent-day2-add-nodes", &p));
    assert!(!granted(&docs, "agent-day2-migrate", &p));
}

/// approve and monitor create no batch record and write no Secret: they read the records
/// and update them, and monitor reads in openshift-agent-day2 only the old token Secret
/// `agent-day2-auth` (src/approve, src/monitor).
#[test]
fn approve_role_writes_no_secret_and_reads_only_the_auth_one() {
    let docs = docs();
    let own = Some("openshift-agent-day2");
    let perm = |verb: &str, res: &str, name: Option<&str>| Permission {
        verb: verb.into(),
        group: String::new(),
        resource: res.into(),
        subresource: None,
        namespace: own.map(String::from),
        name: name.map(String::from),
        needed_by: vec![],
    };
    let role = "agent-day2-approve";
    for verb in ["create", "update", "patch", "delete", "list"] {
        assert!(
            !granted(&docs, role, &perm(verb, "secrets", None)),
            "{verb} secrets"
        );
        assert!(
            !granted(&docs, role, &perm(verb, "secrets", Some("agent-day2-auth"))),
            "{verb} secrets/agent-day2-auth"
        );
    }
    assert!(granted(
        &docs,
        role,
        &perm("get", "secrets", Some("agent-day2-auth"))
    ));
    assert!(!granted(
        &docs,
        role,
        &perm("get", "secrets", Some("batch-x-signing"))
    ));
    // Approvals and reboot reports are records of their own, created once (issue 24); the
    // role still deletes nothing.
    assert!(!granted(
        &docs,
        role,
        &perm("delete", "configmaps", Some("batch-1"))
    ));
    for verb in ["get", "list", "watch", "update", "create"] {
        assert!(
            granted(&docs, role, &perm(verb, "configmaps", Some("batch-1"))),
            "{verb}"
        );
    }
}

/// What the two migrate roles may not do: the wait role reads one ConfigMap name; the
/// import role deletes nothing but its copy pod, lists no Secret, reads only the CRDs it
/// checks, approves nothing, touches no node.
#[test]
fn migrate_roles_are_bounded() {
    let docs = docs();
    let perm =
        |verb: &str, group: &str, res: &str, sub: Option<&str>, ns: Option<&str>, name: Option<&str>| {
            Permission {
                verb: verb.into(),
                group: group.into(),
                resource: res.into(),
                subresource: sub.map(String::from),
                namespace: ns.map(String::from),
                name: name.map(String::from),
                needed_by: vec![],
            }
        };
    let wait = "agent-day2-migrate-wait";
    let rec = perm(
        "get",
        "",
        "configmaps",
        None,
        Some("ostest"),
        Some("agent-day2-migration"),
    );
    assert!(granted(&docs, wait, &rec));
    for p in [
        perm("get", "", "configmaps", None, Some("ostest"), Some("other")),
        perm("list", "", "configmaps", None, Some("ostest"), None),
        perm("watch", "", "configmaps", None, Some("ostest"), None),
        perm(
            "update",
            "",
            "configmaps",
            None,
            Some("ostest"),
            Some("agent-day2-migration"),
        ),
        perm(
            "get",
            "",
            "secrets",
            None,
            Some("ostest"),
            Some("agent-day2-migration"),
        ),
    ] {
        assert!(!granted(&docs, wait, &p), "{wait}: {}", p.describe());
    }
    let mig = "agent-day2-migrate";
    assert!(granted(&docs, mig, &rec));
    assert!(granted(
        &docs,
        mig,
        &perm(
            "create",
            "",
            "pods",
            Some("exec"),
            Some("multicluster-engine"),
            Some("assisted-service-x")
        )
    ));
    assert!(granted(
        &docs,
        mig,
        &perm(
            "delete",
            "",
            "pods",
            None,
            Some("ostest"),
            Some("agent-day2-migration-copy")
        )
    ));
    let ai = "agent-install.openshift.io";
    for p in [
        perm("list", "", "secrets", None, Some("openshift-config"), None),
        perm("watch", "", "secrets", None, None, None),
        perm(
            "delete",
            "",
            "secrets",
            None,
            Some("ostest"),
            Some("ostest-pull-secret"),
        ),
        perm("delete", ai, "agents", None, Some("ostest"), Some("h1")),
        perm(
            "delete",
            "hive.openshift.io",
            "clusterdeployments",
            None,
            Some("ostest"),
            Some("ostest"),
        ),
        perm("delete", "", "namespaces", None, None, Some("ostest")),
        perm(
            "delete",
            "",
            "persistentvolumeclaims",
            None,
            Some("ostest"),
            Some("agent-day2-migration"),
        ),
        perm("update", ai, "agents", Some("status"), Some("ostest"), Some("h1")),
        perm(
            "patch",
            ai,
            "nmstateconfigs",
            Some("status"),
            Some("ostest"),
            Some("n"),
        ),
        perm("patch", ai, "agents", None, Some("ostest"), Some("h1")),
        perm(
            "get",
            "apiextensions.k8s.io",
            "customresourcedefinitions",
            None,
            None,
            Some("machines.machine.openshift.io"),
        ),
        perm(
            "list",
            "apiextensions.k8s.io",
            "customresourcedefinitions",
            None,
            None,
            None,
        ),
        perm("create", "", "pods", Some("attach"), Some("ostest"), Some("x")),
        perm(
            "create",
            "",
            "pods",
            Some("portforward"),
            Some("ostest"),
            Some("x"),
        ),
        perm("patch", "", "nodes", None, None, Some("worker-1")),
        perm(
            "update",
            "certificates.k8s.io",
            "certificatesigningrequests",
            Some("approval"),
            None,
            None,
        ),
        perm(
            "create",
            "rbac.authorization.k8s.io",
            "clusterrolebindings",
            None,
            None,
            None,
        ),
    ] {
        assert!(!granted(&docs, mig, &p), "{mig}: {}", p.describe());
    }
}

/// Strict schema check without a server: each object read as its k8s-openapi type and written
/// back must equal the YAML (serde drops unknown fields, so a misspelt or misplaced field shows
/// as a difference). Not through kubectl: the simulator serves no rbac.authorization.k8s.io API
/// (kubectl apply there says `no matches for kind "ClusterRole"`), and kubectl's
/// `--validate=strict` needs a server's OpenAPI schema.
#[test]
fn every_object_is_a_strictly_valid_kubernetes_object() {
    use k8s_openapi::api::core::v1::Namespace;
    use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, Role, RoleBinding};
    fn round<T: serde::de::DeserializeOwned + serde::Serialize>(d: &Value) -> Value {
        serde_json::to_value(serde_json::from_value::<T>(d.clone()).unwrap()).unwrap()
    }
    let docs = docs();
    let mut kinds = std::collections::BTreeMap::<String, usize>::new();
    for d in &docs {
        let kind = d["kind"].as_str().unwrap_or("").to_string();
        let back = match kind.as_str() {
            "Namespace" => round::<Namespace>(d),
            "ClusterRole" => round::<ClusterRole>(d),
            "Role" => round::<Role>(d),
            "ClusterRoleBinding" => round::<ClusterRoleBinding>(d),
            "RoleBinding" => round::<RoleBinding>(d),
            other => panic!("unexpected kind {other:?} in deploy/rbac.yaml"),
        };
        assert_eq!(
            &back, d,
            "{kind} {} has unknown or misplaced fields",
            d["metadata"]["name"]
        );
        *kinds.entry(kind).or_default() += 1;
    }
    // Every Role and ClusterRole has its binding.
    assert_eq!(kinds["ClusterRole"], kinds["ClusterRoleBinding"], "{kinds:?}");
    assert_eq!(kinds["Role"], kinds["RoleBinding"], "{kinds:?}");
}
