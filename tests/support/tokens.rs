//! Node-token Secrets as other tools write them, for the end-to-end tests of add-nodes and
//! monitor (`crate::support::tokens` of tests/e2e.rs).

use std::time::Duration;

use agent_day2_sim::harness::TestCluster;
use serde_json::{json, Value};

/// Creates Secret openshift-config/agent-auth-token the way `oc adm node-image` writes it
/// (installer `pkg/asset/agent/gencrypto/authconfig.go`): tokens `{"auth_scheme", "exp"}`
/// signed here (not by the plugin), `authTokenPublicKey` = base64 of an `EC PUBLIC KEY` PEM,
/// annotations `updatedAt` empty and `expiresAt`; type Opaque. `keys` limits the data keys
/// (the older single-token layout has agentAuthToken and authTokenPublicKey only). Returns
/// (agent, user, watcher token, authTokenPublicKey value).
pub fn oc_adm_node_image_secret(c: &TestCluster, left: Duration, keys: &[&str]) -> [String; 4] {
    use base64::Engine;
    let b64 = |s: &str| base64::engine::general_purpose::STANDARD.encode(s);
    let k = rcgen::KeyPair::generate().unwrap();
    let pem = k
        .public_key_pem()
        .replace("BEGIN PUBLIC KEY", "BEGIN EC PUBLIC KEY")
        .replace("END PUBLIC KEY", "END EC PUBLIC KEY");
    let exp = std::time::SystemTime::now() + left;
    let exp_s = exp.duration_since(std::time::UNIX_EPOCH).unwrap().as_secs();
    let tok = |scheme: &str| {
        agent_day2_sim::boot::jwt::sign(&json!({"auth_scheme": scheme, "exp": exp_s}), &k.serialize_der())
            .unwrap()
    };
    let out = [tok("agentAuth"), tok("userAuth"), tok("watcherAuth"), b64(&pem)];
    let data: serde_json::Map<String, Value> = [
        "agentAuthToken",
        "userAuthToken",
        "watcherAuthToken",
        "authTokenPublicKey",
    ]
    .iter()
    .zip(&out)
    .filter(|(key, _)| keys.contains(key))
    .map(|(key, v)| (key.to_string(), json!(b64(v))))
    .collect();
    let secret = json!({
        "apiVersion": "v1", "kind": "Secret", "type": "Opaque",
        "metadata": {"name": "agent-auth-token", "namespace": "openshift-config",
                     "annotations": {"updatedAt": "", "expiresAt": agent_day2::auth::rfc3339(exp)}},
        "data": data,
    });
    let o = c.kubectl_stdin(&["create", "-f", "-"], &secret.to_string());
    assert!(o.status.success(), "{}", super::cluster::text(&o));
    out
}

/// Every data key of the Secret.
pub const ALL_TOKEN_KEYS: &[&str] = &[
    "agentAuthToken",
    "userAuthToken",
    "watcherAuthToken",
    "authTokenPublicKey",
];
