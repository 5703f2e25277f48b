//! `DIR/kubeconfig` of a running simulator: one cluster, three users and three contexts.
//!
//! | context | user | authenticates with |
//! |---|---|---|
//! | `admin` (current) | `system:admin`, groups `system:masters`, `system:authenticated` | client certificate from the simulator's CA |
//! | `bootstrapper` | `system:serviceaccount:openshift-machine-config-operator:node-bootstrapper` | bearer token |
//! | `viewer` | `viewer` (read everything but Secrets, write nothing) | bearer token |

use base64::Engine;
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

/// What goes into the kubeconfig.
pub struct KubeconfigParams<'a> {
    /// Cluster name used for the cluster entry (the scenario's cluster name, e.g. `ostest`).
    pub cluster_name: &'a str,
    /// e.g. `https://192.168.111.5:6443`.
    pub server: &'a str,
    pub ca_pem: &'a str,
    pub admin_cert_pem: &'a str,
    pub admin_key_pem: &'a str,
    pub bootstrapper_token: &'a str,
    pub viewer_token: &'a str,
}

/// Renders the kubeconfig YAML (all data embedded, base64).
pub fn render(p: &KubeconfigParams) -> String {
    let b64 = |s: &str| base64::engine::general_purpose::STANDARD.encode(s.as_bytes());
    format!(
        r#"apiVersion: v1
kind: Config
clusters:
- name: {cluster}
  cluster:
    server: {server}
    certificate-authority-data: {ca}
users:
- name: admin
  user:
    client-certificate-data: {cert}
    client-key-data: {key}
- name: bootstrapper
  user:
    token: {boot}
- name: viewer
  user:
    token: {viewer}
contexts:
- name: admin
  context:
    cluster: {cluster}
    user: admin
- name: bootstrapper
  context:
    cluster: {cluster}
    user: bootstrapper
- name: viewer
  context:
    cluster: {cluster}
    user: viewer
current-context: admin
preferences: {{}}
"#,
        cluster = p.cluster_name,
        server = p.server,
        ca = b64(p.ca_pem),
        cert = b64(p.admin_cert_pem),
        key = b64(p.admin_key_pem),
        boot = p.bootstrapper_token,
        viewer = p.viewer_token,
    )
}

/// Writes `content` to `path` with mode 0600 from the start (it holds credentials), replacing
/// an existing file through a temporary name and rename.
pub fn write_private(path: &Path, content: &str) -> anyhow::Result<()> {
    let tmp = path.with_extension("tmp");
    let _ = std::fs::remove_file(&tmp);
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&tmp)
        .map_err(|e| anyhow::anyhow!("cannot create {}: {e}", tmp.display()))?;
    f.write_all(content.as_bytes())?;
    f.sync_all()?;
    std::fs::rename(&tmp, path)
        .map_err(|e| anyhow::anyhow!("cannot rename {} to {}: {e}", tmp.display(), path.display()))?;
    Ok(())
}
