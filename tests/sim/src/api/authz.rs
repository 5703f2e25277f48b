//! Who may do what on the simulated cluster: a small, fixed RBAC modelled on an OpenShift
//! cluster's default roles, plus the scenario's `forbidden` test switches.
//!
//! Order of evaluation ([`authorize`]):
//! 1. The scenario's [`ForbiddenRule`]s refuse matching requests for everybody (a test switch,
//!    e.g. to make `get secret pull-secret` fail for the admin).
//! 2. Group `system:masters` may do anything (the installer's `system:admin` kubeconfig).
//! 3. The node-bootstrapper service account (`system:serviceaccount:openshift-machine-config-operator:node-bootstrapper`,
//!    role `system:node-bootstrapper`): create/get/list/watch `certificatesigningrequests`
//!    (not `/approval`, not `/status`).
//! 4. A node (`system:node:<n>` in group `system:nodes`; roughly the Node authorizer's node rules
//!    plus NodeRestriction): create/get/list/watch CSRs; create node `<n>`; update/patch node
//!    `<n>` and `nodes/status` of `<n>` (no `get nodes/status`: a kubelet PATCHes it unread);
//!    create events; get/list/watch nodes, pods and services (main resources only).
//! 5. User `viewer`: get/list/watch every main resource except secrets (no subresource: not
//!    `nodes/status`, `pods/log`, `nodes/proxy`), as the ClusterRole `up --real-apiserver`
//!    binds to it lists them.
//! 6. Every authenticated user: create `selfsubjectaccessreviews` and `selfsubjectrulesreviews`
//!    (`system:basic-user`).
//!
//! Anything else is refused with [`forbidden_message`]. Pod exec is verb `create` on `pods/exec`
//! (also for its GET WebSocket upgrade, as Kubernetes 1.31+ checks it): only `system:masters`.

use crate::scenario::ForbiddenRule;

/// The requesting user as authentication established it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct UserInfo {
    /// E.g. `system:admin`, `system:node:worker-1`,
    /// `system:serviceaccount:openshift-machine-config-operator:node-bootstrapper`.
    pub name: String,
    /// E.g. `system:masters`, `system:nodes`, `system:authenticated`.
    pub groups: Vec<String>,
}

/// What a resource request wants to do (apiserver `authorizer.Attributes`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Attributes {
    /// Kubernetes verb: get, list, watch, create, update, patch, delete, deletecollection.
    pub verb: String,
    /// API group, `""` for core.
    pub group: String,
    /// Plural resource, e.g. `secrets`.
    pub resource: String,
    /// E.g. `approval`, `status`.
    pub subresource: Option<String>,
    /// None for cluster-scoped resources and for cluster-wide lists.
    pub namespace: Option<String>,
    /// The object's name; None for list/watch/collection requests. For `create`, pass the name
    /// from the body so the node rule "create node `<n>`" can apply (the real NodeRestriction
    /// admission plugin checks it the same way).
    pub name: Option<String>,
}

/// The node-bootstrapper service account a day-2 node's first client CSR comes from.
pub const NODE_BOOTSTRAPPER: &str =
    "system:serviceaccount:openshift-machine-config-operator:node-bootstrapper";

const READ_VERBS: [&str; 3] = ["get", "list", "watch"];
const CSR_VERBS: [&str; 4] = ["create", "get", "list", "watch"];
const CERTS_GROUP: &str = "certificates.k8s.io";
const CSRS: &str = "certificatesigningrequests";
/// What a node may read besides its CSRs (Kubernetes' bootstrap policy `NodeRules`; secrets,
/// configmaps and volumes only through the Node authorizer's graph, not modelled here).
const NODE_READS: [(&str, &str); 3] = [("", "nodes"), ("", "pods"), ("", "services")];

/// Decides whether `user` may do `attrs`.
///
/// Errors: the kube-apiserver's Forbidden message ([`forbidden_message`]); the caller answers
/// 403 with reason `Forbidden` and `details: {name, group, kind: <resource>}`.
pub fn authorize(user: &UserInfo, attrs: &Attributes, forbidden: &[ForbiddenRule]) -> Result<(), String> {
    if forbidden.iter().any(|r| rule_matches(r, attrs)) {
        return Err(forbidden_message(user, attrs));
    }
    if allowed(user, attrs) {
        Ok(())
    } else {
        Err(forbidden_message(user, attrs))
    }
}

/// A scenario switch matches when every non-empty field equals the request's; `subresource:
/// None` matches only the main resource.
fn rule_matches(r: &ForbiddenRule, a: &Attributes) -> bool {
    (r.resource.is_empty() || r.resource == a.resource)
        && r.namespace
            .as_ref()
            .is_none_or(|ns| a.namespace.as_deref() == Some(ns.as_str()))
        && r.name
            .as_ref()
            .is_none_or(|n| a.name.as_deref() == Some(n.as_str()))
        && (r.verbs.is_empty() || r.verbs.iter().any(|v| v == &a.verb))
        && r.subresource == a.subresource
}

fn allowed(user: &UserInfo, a: &Attributes) -> bool {
    let verb = a.verb.as_str();
    let in_group = |g: &str| user.groups.iter().any(|x| x == g);
    let main = a.subresource.is_none();
    let is = |group: &str, resource: &str| a.group == group && a.resource == resource;

    if in_group("system:masters") {
        return true;
    }
    // system:basic-user: everyone authenticated may ask what they may do.
    if (is("authorization.k8s.io", "selfsubjectaccessreviews")
        || is("authorization.k8s.io", "selfsubjectrulesreviews")
        || is("authentication.k8s.io", "selfsubjectreviews"))
        && verb == "create"
        && main
    {
        return authenticated(user);
    }
    if user.name == NODE_BOOTSTRAPPER {
        return is(CERTS_GROUP, CSRS) && main && CSR_VERBS.contains(&verb);
    }
    if let (Some(node), true) = (user.name.strip_prefix("system:node:"), in_group("system:nodes")) {
        if node.is_empty() {
            return false;
        }
        if is(CERTS_GROUP, CSRS) && main && CSR_VERBS.contains(&verb) {
            return true;
        }
        if is("", "nodes") {
            let own = a.name.as_deref() == Some(node);
            match (verb, a.subresource.as_deref()) {
                ("create", None) => return own,
                ("update" | "patch", None | Some("status")) => return own,
                _ => {}
            }
        }
        if (is("", "events") || is("events.k8s.io", "events")) && verb == "create" && main {
            return true;
        }
        return READ_VERBS.contains(&verb) && main && NODE_READS.iter().any(|(g, r)| is(g, r));
    }
    if user.name == "viewer" {
        return READ_VERBS.contains(&verb) && main && !is("", "secrets");
    }
    false
}

/// One rule of a SelfSubjectRulesReview status (`authorization.k8s.io/v1` `ResourceRule`).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ResourceRule {
    pub verbs: Vec<String>,
    pub api_groups: Vec<String>,
    pub resources: Vec<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub resource_names: Vec<String>,
}

fn rule(verbs: &[&str], group: &str, resources: &[&str], names: &[&str]) -> ResourceRule {
    let v = |xs: &[&str]| xs.iter().map(|x| x.to_string()).collect::<Vec<_>>();
    ResourceRule {
        verbs: v(verbs),
        api_groups: vec![group.to_string()],
        resources: v(resources),
        resource_names: v(names),
    }
}

/// A non-resource rule: (verbs, URLs).
pub type NonResourceRule = (Vec<String>, Vec<String>);

/// The rules [`allowed`] applies to `user`, as RBAC would list them for a
/// SelfSubjectRulesReview: `(resource rules, non-resource rules as (verbs, urls))`.
/// `served` is every served `(group, plural)`, so "read everything but Secrets" can be spelled
/// out. Scenario Forbidden switches are not subtracted (the caller reports `incomplete`).
pub fn rules_for(user: &UserInfo, served: &[(String, String)]) -> (Vec<ResourceRule>, Vec<NonResourceRule>) {
    let in_group = |g: &str| user.groups.iter().any(|x| x == g);
    let s = |xs: &[&str]| xs.iter().map(|x| x.to_string()).collect::<Vec<_>>();
    if in_group("system:masters") {
        return (vec![rule(&["*"], "*", &["*"], &[])], vec![(s(&["*"]), s(&["*"]))]);
    }
    if !authenticated(user) {
        return (Vec::new(), Vec::new());
    }
    let mut r = vec![
        rule(
            &["create"],
            "authorization.k8s.io",
            &["selfsubjectaccessreviews", "selfsubjectrulesreviews"],
            &[],
        ),
        rule(&["create"], "authentication.k8s.io", &["selfsubjectreviews"], &[]),
    ];
    let non_resource = vec![(
        s(&["get"]),
        s(&[
            "/api",
            "/api/*",
            "/apis",
            "/apis/*",
            "/healthz",
            "/livez",
            "/openapi",
            "/openapi/*",
            "/readyz",
            "/version",
            "/version/",
        ]),
    )];
    let read_all_but_secrets = |r: &mut Vec<ResourceRule>| {
        for (g, p) in served {
            if !(g.is_empty() && p == "secrets") {
                r.push(rule(&READ_VERBS, g, &[p.as_str()], &[]));
            }
        }
    };
    if user.name == NODE_BOOTSTRAPPER {
        r.push(rule(&CSR_VERBS, CERTS_GROUP, &[CSRS], &[]));
    } else if let (Some(node), true) = (user.name.strip_prefix("system:node:"), in_group("system:nodes")) {
        if !node.is_empty() {
            r.push(rule(&CSR_VERBS, CERTS_GROUP, &[CSRS], &[]));
            r.push(rule(&["create", "update", "patch"], "", &["nodes"], &[node]));
            r.push(rule(&["update", "patch"], "", &["nodes/status"], &[node]));
            r.push(rule(&["create"], "", &["events"], &[]));
            r.push(rule(&["create"], "events.k8s.io", &["events"], &[]));
            for (g, p) in NODE_READS {
                r.push(rule(&READ_VERBS, g, &[p], &[]));
            }
        }
    } else if user.name == "viewer" {
        read_all_but_secrets(&mut r);
    }
    (r, non_resource)
}

fn authenticated(user: &UserInfo) -> bool {
    !user.name.is_empty()
        && user.name != "system:anonymous"
        && !user.groups.iter().any(|g| g == "system:unauthenticated")
}

/// The message kube-apiserver returns for a refused request (apiserver
/// `responsewriters.Forbidden` + `forbiddenMessage` + `apierrors.NewForbidden`):
/// `<resource>[.<group>] ["<name>"] is forbidden: User "<user>" cannot <verb> resource
/// "<resource>[/<subresource>]" in API group "<group>" (in the namespace "<ns>" | at the cluster
/// scope)`, e.g. `secrets "pull-secret" is forbidden: User "system:admin" cannot get resource
/// "secrets" in API group "" in the namespace "openshift-config"`.
pub fn forbidden_message(user: &UserInfo, attrs: &Attributes) -> String {
    let mut resource = attrs.resource.clone();
    if let Some(sub) = attrs.subresource.as_deref().filter(|s| !s.is_empty()) {
        resource = format!("{resource}/{sub}");
    }
    let scope = match attrs.namespace.as_deref().filter(|n| !n.is_empty()) {
        Some(ns) => format!("in the namespace {}", q(ns)),
        None => "at the cluster scope".to_string(),
    };
    let reason = format!(
        "User {} cannot {} resource {} in API group {} {}",
        q(&user.name),
        attrs.verb,
        q(&resource),
        q(&attrs.group),
        scope
    );
    let qualified = if attrs.group.is_empty() {
        attrs.resource.clone()
    } else {
        format!("{}.{}", attrs.resource, attrs.group)
    };
    match attrs.name.as_deref().filter(|n| !n.is_empty()) {
        Some(name) => format!("{qualified} {} is forbidden: {reason}", q(name)),
        None => format!("{qualified} is forbidden: {reason}"),
    }
}

/// Go's `%q` for the plain strings used here.
fn q(s: &str) -> String {
    serde_json::Value::String(s.to_owned()).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn user(name: &str, groups: &[&str]) -> UserInfo {
        UserInfo {
            name: name.into(),
            groups: groups.iter().map(|g| g.to_string()).collect(),
        }
    }

    fn attrs(
        verb: &str,
        group: &str,
        res: &str,
        sub: Option<&str>,
        ns: Option<&str>,
        name: Option<&str>,
    ) -> Attributes {
        Attributes {
            verb: verb.into(),
            group: group.into(),
            resource: res.into(),
            subresource: sub.map(Into::into),
            namespace: ns.map(Into::into),
            name: name.map(Into::into),
        }
    }

    #[test]
    fn forbidden_message_formats() {
        let admin = user("system:admin", &["system:masters", "system:authenticated"]);
        assert_eq!(
            forbidden_message(&admin, &attrs("get", "", "secrets", None, Some("openshift-config"), Some("pull-secret"))),
            "secrets \"pull-secret\" is forbidden: User \"system:admin\" cannot get resource \"secrets\" in API group \"\" in the namespace \"openshift-config\""
        );
        assert_eq!(
            forbidden_message(&admin, &attrs("list", "", "nodes", None, None, None)),
            "nodes is forbidden: User \"system:admin\" cannot list resource \"nodes\" in API group \"\" at the cluster scope"
        );
        assert_eq!(
            forbidden_message(&admin, &attrs("update", CERTS_GROUP, CSRS, Some("approval"), None, Some("csr-abc"))),
            "certificatesigningrequests.certificates.k8s.io \"csr-abc\" is forbidden: User \"system:admin\" cannot update resource \"certificatesigningrequests/approval\" in API group \"certificates.k8s.io\" at the cluster scope"
        );
    }

    #[test]
    fn rbac_table() {
        let admin = user("system:admin", &["system:masters", "system:authenticated"]);
        let boot = user(
            NODE_BOOTSTRAPPER,
            &[
                "system:serviceaccounts:openshift-machine-config-operator",
                "system:serviceaccounts",
                "system:authenticated",
            ],
        );
        let node = user("system:node:worker-1", &["system:nodes", "system:authenticated"]);
        let fake_node = user("system:node:worker-1", &["system:authenticated"]);
        let viewer = user("viewer", &["system:authenticated"]);
        let nobody = user("alice", &["system:authenticated"]);
        let anon = user("system:anonymous", &["system:unauthenticated"]);
        let ocfg = Some("openshift-config");
        #[rustfmt::skip]
        let table: Vec<(&UserInfo, Attributes, bool)> = vec![
            (&admin, attrs("get", "", "secrets", None, ocfg, Some("pull-secret")), true),
            (&admin, attrs("update", CERTS_GROUP, CSRS, Some("approval"), None, Some("c")), true),
            (&admin, attrs("delete", "", "nodes", None, None, Some("worker-1")), true),
            // bootstrapper
            (&boot, attrs("create", CERTS_GROUP, CSRS, None, None, None), true),
            (&boot, attrs("get", CERTS_GROUP, CSRS, None, None, Some("c")), true),
            (&boot, attrs("list", CERTS_GROUP, CSRS, None, None, None), true),
            (&boot, attrs("watch", CERTS_GROUP, CSRS, None, None, None), true),
            (&boot, attrs("update", CERTS_GROUP, CSRS, Some("approval"), None, Some("c")), false),
            (&boot, attrs("approve", CERTS_GROUP, "signers", None, None, Some("kubernetes.io/kube-apiserver-client-kubelet")), false),
            (&boot, attrs("delete", CERTS_GROUP, CSRS, None, None, Some("c")), false),
            (&boot, attrs("create", "authorization.k8s.io", "selfsubjectaccessreviews", None, None, None), true),
            (&boot, attrs("get", "", "nodes", None, None, None), false),
            (&boot, attrs("get", "", "secrets", None, ocfg, Some("pull-secret")), false),
            // node
            (&node, attrs("create", CERTS_GROUP, CSRS, None, None, None), true),
            (&node, attrs("watch", CERTS_GROUP, CSRS, None, None, None), true),
            (&node, attrs("update", CERTS_GROUP, CSRS, Some("approval"), None, Some("c")), false),
            (&node, attrs("get", "", "nodes", None, None, Some("master-0")), true),
            (&node, attrs("list", "", "nodes", None, None, None), true),
            (&node, attrs("create", "", "nodes", None, None, Some("worker-1")), true),
            (&node, attrs("create", "", "nodes", None, None, Some("worker-2")), false),
            (&node, attrs("patch", "", "nodes", Some("status"), None, Some("worker-1")), true),
            (&node, attrs("update", "", "nodes", None, None, Some("worker-1")), true),
            (&node, attrs("patch", "", "nodes", Some("status"), None, Some("master-0")), false),
            (&node, attrs("delete", "", "nodes", None, None, Some("worker-1")), false),
            (&node, attrs("get", "", "configmaps", None, Some("openshift-config-managed"), Some("x")), false),
            (&node, attrs("list", "config.openshift.io", "clusterversions", None, None, None), false),
            (&node, attrs("get", "", "nodes", Some("status"), None, Some("worker-1")), false),
            (&node, attrs("get", "", "pods", None, Some("mce"), Some("p")), true),
            (&node, attrs("get", "", "secrets", None, ocfg, Some("pull-secret")), false),
            (&node, attrs("create", "", "events", None, Some("default"), None), true),
            (&node, attrs("create", "", "configmaps", None, Some("default"), Some("x")), false),
            (&fake_node, attrs("get", "", "nodes", None, None, None), false),
            // viewer
            (&viewer, attrs("get", "", "nodes", None, None, Some("master-0")), true),
            (&viewer, attrs("get", "", "nodes", Some("status"), None, Some("master-0")), false),
            (&viewer, attrs("get", "", "pods", Some("log"), Some("mce"), Some("p")), false),
            (&viewer, attrs("watch", CERTS_GROUP, CSRS, None, None, None), true),
            (&viewer, attrs("get", "", "secrets", None, ocfg, Some("pull-secret")), false),
            (&viewer, attrs("create", "", "configmaps", None, Some("x"), Some("y")), false),
            (&viewer, attrs("update", CERTS_GROUP, CSRS, Some("approval"), None, Some("c")), false),
            (&viewer, attrs("create", "authorization.k8s.io", "selfsubjectaccessreviews", None, None, None), true),
            // pod exec: create pods/exec
            (&admin, attrs("create", "", "pods", Some("exec"), Some("mce"), Some("p")), true),
            (&viewer, attrs("create", "", "pods", Some("exec"), Some("mce"), Some("p")), false),
            (&viewer, attrs("get", "", "pods", None, Some("mce"), Some("p")), true),
            (&node, attrs("create", "", "pods", Some("exec"), Some("mce"), Some("p")), false),
            // everyone else
            (&nobody, attrs("create", "authorization.k8s.io", "selfsubjectaccessreviews", None, None, None), true),
            (&nobody, attrs("get", "", "nodes", None, None, None), false),
            (&anon, attrs("create", "authorization.k8s.io", "selfsubjectaccessreviews", None, None, None), false),
        ];
        for (u, a, want) in table {
            let got = authorize(u, &a, &[]);
            assert_eq!(got.is_ok(), want, "{} {:?}: {:?}", u.name, a, got);
            if let Err(m) = got {
                assert_eq!(m, forbidden_message(u, &a));
            }
        }
    }

    #[test]
    fn rules_agree_with_authorize() {
        let served = vec![
            ("".to_string(), "nodes".to_string()),
            ("".to_string(), "secrets".to_string()),
            (CERTS_GROUP.to_string(), CSRS.to_string()),
        ];
        let admin = user("system:admin", &["system:masters"]);
        assert_eq!(rules_for(&admin, &served).0, vec![rule(&["*"], "*", &["*"], &[])]);
        let viewer = user("viewer", &["system:authenticated"]);
        let (r, nr) = rules_for(&viewer, &served);
        assert!(!nr.is_empty());
        // Every rule listed is allowed by authorize, and secrets are not listed.
        for rr in &r {
            for v in &rr.verbs {
                let a = attrs(v, &rr.api_groups[0], &rr.resources[0], None, None, None);
                assert!(authorize(&viewer, &a, &[]).is_ok(), "{rr:?}");
            }
        }
        assert!(
            !r.iter().any(|rr| rr.resources.contains(&"secrets".to_string())),
            "{r:?}"
        );
        assert!(
            r.iter()
                .any(|rr| rr.resources == ["nodes"] && rr.verbs == ["get", "list", "watch"]),
            "{r:?}"
        );
        let anon = user("system:anonymous", &["system:unauthenticated"]);
        assert!(rules_for(&anon, &served).0.is_empty());
    }

    #[test]
    fn forbidden_rules_apply_to_everybody_first() {
        let admin = user("system:admin", &["system:masters"]);
        let rule = ForbiddenRule {
            resource: "secrets".into(),
            namespace: Some("openshift-config".into()),
            name: Some("pull-secret".into()),
            verbs: vec!["get".into()],
            subresource: None,
        };
        let get = attrs(
            "get",
            "",
            "secrets",
            None,
            Some("openshift-config"),
            Some("pull-secret"),
        );
        assert_eq!(
            authorize(&admin, &get, std::slice::from_ref(&rule)).unwrap_err(),
            "secrets \"pull-secret\" is forbidden: User \"system:admin\" cannot get resource \"secrets\" in API group \"\" in the namespace \"openshift-config\""
        );
        // other verb, name, namespace: not matched
        for a in [
            attrs("list", "", "secrets", None, Some("openshift-config"), None),
            attrs(
                "get",
                "",
                "secrets",
                None,
                Some("openshift-config"),
                Some("other"),
            ),
            attrs(
                "get",
                "",
                "secrets",
                None,
                Some("kube-system"),
                Some("pull-secret"),
            ),
        ] {
            assert!(
                authorize(&admin, &a, std::slice::from_ref(&rule)).is_ok(),
                "{a:?}"
            );
        }
        // subresource rule matches only that subresource; empty fields match anything
        let approval = ForbiddenRule {
            resource: CSRS.into(),
            subresource: Some("approval".into()),
            ..Default::default()
        };
        let upd = attrs("update", CERTS_GROUP, CSRS, Some("approval"), None, Some("c"));
        assert!(authorize(&admin, &upd, std::slice::from_ref(&approval)).is_err());
        let get_csr = attrs("get", CERTS_GROUP, CSRS, None, None, Some("c"));
        assert!(authorize(&admin, &get_csr, std::slice::from_ref(&approval)).is_ok());
        // a main-resource rule does not block the subresource
        let csr_main = ForbiddenRule {
            resource: CSRS.into(),
            ..Default::default()
        };
        assert!(authorize(&admin, &get_csr, std::slice::from_ref(&csr_main)).is_err());
        assert!(authorize(&admin, &upd, std::slice::from_ref(&csr_main)).is_ok());
        // the empty rule blocks every main-resource request
        assert!(authorize(&admin, &get, &[ForbiddenRule::default()]).is_err());
    }
}
