//! The node tokens' Secret on the cluster for `add-nodes`: whether the stored material is
//! reused ([`reuse_decision`]), reading it ([`auth_material`]) and writing it back
//! ([`save_auth`]). The material itself (keys, tokens, the Secret's data) is [`crate::auth`].

use std::collections::BTreeMap;
use std::time::{Duration, SystemTime};

use base64::Engine;
use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, ObjectMeta, Patch};

use super::{invalid, report};
use crate::auth::{self, AuthMaterial};
use crate::cluster::classify;
use crate::error::{Error, ResourceRef, Result};
use crate::kube_flags::KubeTarget;
use crate::kube_write::{create_strict, patch_params};

/// Auth material for this batch and where it came from.
pub(super) struct Auth {
    pub(super) material: AuthMaterial,
    pub(super) reused: bool,
    pub(super) secret_exists: bool,
    /// Why the stored tokens were not reused (None when reused or there were none).
    pub(super) reason: Option<String>,
}

fn auth_ref() -> ResourceRef {
    ResourceRef::namespaced("Secret", auth::SECRET_NAMESPACE, auth::SECRET_NAME)
}

/// What this run asks of the tokens.
#[derive(Debug, Clone, Copy)]
pub struct TokenRequest {
    /// `--token-ttl` (or [`DEFAULT_TTL`]).
    pub ttl: Duration,
    /// `--token-ttl` was given on the command line.
    pub explicit: bool,
    /// `--new-token`.
    pub new_token: bool,
}

/// Whether stored tokens (signed at `issued`, expiring at `expires`) serve a run at `now` that
/// asks for `req`. The rule (README "Node tokens"):
/// - `--new-token` never reuses;
/// - an explicit `--token-ttl` that differs from the stored tokens' lifetime makes new ones
///   (the user asked for that lifetime);
/// - otherwise they are reused while strictly more than half of their own life is left
///   (auth's [`AuthMaterial::should_reuse`], as node-joiner reuses its token until 24 h of 48
///   are left) AND they expire no earlier than `now + ttl/2`, so a short-lived token from an
///   earlier `--token-ttl 1h` run is not handed to a default 48 h run.
///
/// `Err` says why not, for the warning.
pub fn reuse_decision(
    issued: SystemTime,
    expires: SystemTime,
    now: SystemTime,
    req: &TokenRequest,
) -> std::result::Result<(), String> {
    let life = expires.duration_since(issued).unwrap_or_default();
    let left = expires.duration_since(now).unwrap_or_default();
    let h = report::human_duration;
    if req.new_token {
        return Err("--new-token was given".into());
    }
    if left.is_zero() {
        return Err(format!("they expired at {}", auth::rfc3339(expires)));
    }
    if left.as_secs() * 2 <= life.as_secs() {
        return Err(format!(
            "they have less than half their life left: {} of {}",
            h(left),
            h(life)
        ));
    }
    if req.explicit && life != req.ttl {
        return Err(format!(
            "--token-ttl {} differs from their lifetime of {}",
            h(req.ttl),
            h(life)
        ));
    }
    if left < req.ttl / 2 {
        return Err(format!(
            "they have only {} left, less than half of the {} a new token would get",
            h(left),
            h(req.ttl)
        ));
    }
    Ok(())
}

pub(super) async fn auth_material(
    target: &KubeTarget,
    req: &TokenRequest,
    now: SystemTime,
    dry_run: bool,
    warnings: &mut Vec<String>,
) -> Result<Auth> {
    let api: Api<Secret> = Api::namespaced(target.client.clone(), auth::SECRET_NAMESPACE);
    let existing = api
        .get_opt(auth::SECRET_NAME)
        .await
        .map_err(|e| classify(e, "read", auth_ref(), target))?;
    let secret_exists = existing.is_some();
    let mut warn = |w: String| {
        eprintln!("warning: {w}");
        warnings.push(w);
    };
    let old = match existing.and_then(|s| s.data) {
        Some(d) => {
            let data: BTreeMap<String, Vec<u8>> = d.into_iter().map(|(k, v)| (k, v.0)).collect();
            match AuthMaterial::from_secret_data(&data) {
                Ok(m) => Some(m),
                Err(e) => {
                    warn(format!("{e}; new tokens are made and replace it"));
                    None
                }
            }
        }
        None => None,
    };
    let mut reason = None;
    if let Some(m) = &old {
        match reuse_decision(m.issued_at, m.expires_at, now, req) {
            Ok(()) => {
                tracing::info!(expires = %m.expiry_rfc3339(), "reusing the node tokens");
                return Ok(Auth {
                    material: m.clone(),
                    reused: true,
                    secret_exists,
                    reason: None,
                });
            }
            Err(why) => reason = Some(why),
        }
    }
    let material = auth::generate(req.ttl, now).map_err(|e| match e {
        auth::AuthError::BadTtl(_) => invalid("--token-ttl", e.to_string()),
        other => Error::Unexpected(other.to_string()),
    })?;
    if let (Some(m), Some(why)) = (&old, &reason) {
        let when = m.expiry_rfc3339();
        let verb = if dry_run { "would be made" } else { "are made" };
        if m.is_expired(now) {
            warn(format!("the node tokens in {} expired at {when}: new tokens {verb}; images made with them no longer work (make new ones)", auth_ref()));
        } else {
            warn(format!(
                "new node tokens {verb} instead of reusing those in {}: {why}; images made before keep working until their own tokens expire at {when}, but monitor (which uses the tokens in the Secret) can no longer reach nodes booted from them",
                auth_ref()
            ));
        }
    }
    Ok(Auth {
        material,
        reused: false,
        secret_exists,
        reason,
    })
}

pub(super) async fn save_auth(target: &KubeTarget, m: &AuthMaterial, exists: bool) -> Result<()> {
    let data = m.to_secret_data();
    let labels = BTreeMap::from([(
        "app.kubernetes.io/managed-by".to_string(),
        "agent-day2".to_string(),
    )]);
    if exists {
        let b64 = base64::engine::general_purpose::STANDARD;
        let enc: serde_json::Map<String, serde_json::Value> = data
            .iter()
            .map(|(k, v)| (k.clone(), serde_json::Value::String(b64.encode(v))))
            .collect();
        let api: Api<Secret> = Api::namespaced(target.client.clone(), auth::SECRET_NAMESPACE);
        let patch = serde_json::json!({"metadata": {"labels": labels}, "data": enc});
        api.patch(auth::SECRET_NAME, &patch_params(), &Patch::Merge(&patch))
            .await
            .map(|_| ())
            .map_err(|e| classify(e, "update", auth_ref(), target))
    } else {
        let s = Secret {
            metadata: ObjectMeta {
                name: Some(auth::SECRET_NAME.into()),
                namespace: Some(auth::SECRET_NAMESPACE.into()),
                labels: Some(labels),
                ..Default::default()
            },
            type_: Some("Opaque".into()),
            string_data: Some(data),
            ..Default::default()
        };
        create_strict(&target.client, &(), Some(auth::SECRET_NAMESPACE), &s)
            .await
            .map(|_| ())
            .map_err(|e| classify(e, "create", auth_ref(), target))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn token_reuse_rule() {
        let h = |n: u64| Duration::from_secs(n * 3600);
        let t0 = SystemTime::UNIX_EPOCH + h(1_000_000);
        let req = |ttl: u64, explicit: bool| TokenRequest {
            ttl: h(ttl),
            explicit,
            new_token: false,
        };
        // 48 h token, 1 h old: 47 h left.
        let (iss, exp, now) = (t0, t0 + h(48), t0 + h(1));
        assert!(reuse_decision(iss, exp, now, &req(48, false)).is_ok());
        assert!(
            reuse_decision(iss, exp, now, &req(48, true)).is_ok(),
            "same ttl given"
        );
        let e = reuse_decision(iss, exp, now, &req(1, true)).unwrap_err();
        assert!(
            e.contains("--token-ttl 1h differs from their lifetime of 48h"),
            "{e}"
        );
        assert!(reuse_decision(iss, exp, now, &req(72, true)).is_err());
        let e = reuse_decision(
            iss,
            exp,
            now,
            &TokenRequest {
                new_token: true,
                ..req(48, false)
            },
        )
        .unwrap_err();
        assert!(e.contains("--new-token"), "{e}");
        // 30 h old: less than half left.
        let e = reuse_decision(iss, exp, t0 + h(30), &req(48, false)).unwrap_err();
        assert!(e.contains("less than half their life left: 18h of 48h"), "{e}");
        // A 1 h token 10 minutes old has most of its life, but 50 m is less than 24 h.
        let ten_min = t0 + Duration::from_secs(600);
        let e = reuse_decision(t0, t0 + h(1), ten_min, &req(48, false)).unwrap_err();
        assert!(e.contains("only 50m left, less than half of the 48h"), "{e}");
        assert!(reuse_decision(t0, t0 + h(1), ten_min, &req(1, true)).is_ok());
        let e = reuse_decision(iss, exp, t0 + h(49), &req(48, false)).unwrap_err();
        assert!(e.contains("expired"), "{e}");
    }
}
