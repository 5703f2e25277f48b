//! Node 0's agent-installer key and tokens on disk, shared by the simulated node 0 and the real
//! one ([`super::real`]): the key in `DIR/auth-key.pk8`, tokens signed with it.

use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;

use anyhow::Context;
use serde_json::Value;

/// The signing key's file in `--dir` (PKCS#8 DER, mode 0600).
pub const KEY_FILE: &str = "auth-key.pk8";

/// Creates `path` with mode 0600 holding `data` (replacing an old file: temp file + rename).
pub fn write_private(path: &std::path::Path, data: &[u8]) -> anyhow::Result<()> {
    let tmp = path.with_extension("tmp");
    let _ = std::fs::remove_file(&tmp);
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&tmp)
        .with_context(|| format!("writing {}", tmp.display()))?;
    f.write_all(data)?;
    f.sync_all()?;
    drop(f);
    std::fs::rename(&tmp, path).with_context(|| format!("writing {}", path.display()))?;
    Ok(())
}

/// Signs `claims` (a JSON object) with the key of the node 0 simulator whose `--dir` is `dir`
/// (`DIR/auth-key.pk8`): an ES256 JWT that simulator verifies, e.g.
/// `{"auth_scheme":"agentAuth"}` or `{"auth_scheme":"userAuth","exp":1}` for tests of its
/// refusals. Errors: no key file (the simulator has not started), or a key that is not P-256.
pub fn mint_token(dir: &std::path::Path, claims: &Value) -> anyhow::Result<String> {
    let p = dir.join(KEY_FILE);
    let der = std::fs::read(&p).with_context(|| format!("reading {}", p.display()))?;
    crate::boot::jwt::sign(claims, &der).map_err(anyhow::Error::msg)
}
