//! What the simulator's control-plane parts share at the bottom: the admin client of a
//! kubeconfig text and the multi-document YAML reader (a leaf of `api`: it imports nothing of
//! this crate, so `real`, `up` and `cp_kubelet` use it without importing each other).

use anyhow::Context;
use serde_json::Value;

/// The context of `DIR/kubeconfig` used to seed the cluster.
pub const ADMIN_CONTEXT: &str = "admin";

/// The client of the kubeconfig text's `admin` context (the admin, or another identity rendered
/// into that context).
pub async fn client_for(kubeconfig: &str) -> anyhow::Result<kube::Client> {
    let kc = kube::config::Kubeconfig::from_yaml(kubeconfig).context("the admin kubeconfig")?;
    let opts = kube::config::KubeConfigOptions {
        context: Some(ADMIN_CONTEXT.into()),
        ..Default::default()
    };
    let cfg = kube::Config::from_custom_kubeconfig(kc, &opts)
        .await
        .context("the admin kubeconfig")?;
    kube::Client::try_from(cfg).context("building the admin client")
}

/// Splits a multi-document YAML text into JSON values (empty documents skipped).
pub fn parse_docs(text: &str) -> anyhow::Result<Vec<Value>> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let flush = |cur: &mut String, out: &mut Vec<Value>| -> anyhow::Result<()> {
        if cur
            .lines()
            .any(|l| !l.trim().is_empty() && !l.trim_start().starts_with('#'))
        {
            let v: Value = serde_saphyr::from_str(cur).map_err(|e| anyhow::anyhow!("{e}"))?;
            if !v.is_null() {
                out.push(v);
            }
        }
        cur.clear();
        Ok(())
    };
    for line in text.lines() {
        if line.trim_end() == "---" || line.starts_with("--- ") {
            flush(&mut cur, &mut out)?;
        } else {
            cur.push_str(line);
            cur.push('\n');
        }
    }
    flush(&mut cur, &mut out)?;
    Ok(out)
}
