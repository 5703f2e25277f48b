//! The node tokens' Secret on the cluster for `add-nodes`: whether the stored material is
//! reused ([`reuse_decision`]), reading it ([`auth_material`]) and writing it back
//! ([`save_auth`]). The material itself (keys, tokens, the Secret's data) is [`crate::auth`].
//!
//! The Secret is the one `oc adm node-image` keeps, `openshift-config/agent-auth-token`
//! (installer `pkg/asset/agent/gencrypto/authconfig.go`), so either tool reuses the other's
//! tokens by the same rule. A cluster that only has the Secret of earlier agent-day2 versions
//! (`openshift-agent-day2/agent-day2-auth`) gets new material in the new Secret: the old tokens
//! carry `sub`, which the node's assisted-service refuses. The old Secret is left in place for
//! `monitor`, which follows the batches made with it.

use std::collections::BTreeMap;
use std::time::{Duration, SystemTime};

use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::ByteString;
use kube::api::{Api, ObjectMeta, PostParams};

use super::basics::invalid;
use super::report;
use crate::auth::{self, AuthMaterial};
use crate::error::{Error, ResourceRef, Result};
use crate::kube::classify;
use crate::kube::write::{create_strict, FIELD_MANAGER};
use crate::kube::KubeTarget;

/// Auth material for this batch and where it came from.
pub(super) struct Auth {
    /// The material the image carries.
    pub(super) material: AuthMaterial,
    /// Taken from the Secret (nothing to write).
    pub(super) reused: bool,
    /// The Secret as read, when it exists (replaced with its resourceVersion, so a concurrent
    /// writer makes the replace fail instead of being overwritten).
    pub(super) existing: Option<Secret>,
    /// Why the stored tokens were not reused (None when reused or there were none).
    pub(super) reason: Option<String>,
}

fn auth_ref() -> ResourceRef {
    ResourceRef::namespaced("Secret", auth::SECRET_NAMESPACE, auth::SECRET_NAME)
}

fn legacy_ref() -> ResourceRef {
    ResourceRef::namespaced("Secret", auth::LEGACY_SECRET_NAMESPACE, auth::LEGACY_SECRET_NAME)
}

/// What this run asks of the tokens.
#[derive(Debug, Clone, Copy)]
pub struct TokenRequest {
    /// `--token-ttl` (or [`super::DEFAULT_TTL`]).
    pub ttl: Duration,
    /// `--token-ttl` was given on the command line.
    pub explicit: bool,
    /// `--new-token`.
    pub new_token: bool,
}

/// Whether stored tokens expiring at `expires` serve a run at `now` that asks for `req`. The
/// rule (docs/add-nodes.md "Node tokens"), which for a default run is `oc adm node-image`'s:
/// - `--new-token` never reuses;
/// - tokens that have expired, or expire within [`auth::REUSE_MARGIN`] (24 h), are replaced
///   (installer `authconfig.go` regenerates once now is past `exp - 24h`);
/// - they must last at least half of the lifetime a new token would get (`ttl/2`), so a run
///   asking for `--token-ttl 96h` does not get tokens with 30 h left;
/// - with an explicit `--token-ttl`, they must not last longer than asked (a short lifetime is
///   asked for a reason; tokens of a default 48 h run are not handed to a `--token-ttl 2h` run).
///
/// `Err` says why not, for the warning.
pub fn reuse_decision(
    expires: SystemTime,
    now: SystemTime,
    req: &TokenRequest,
) -> std::result::Result<(), String> {
    let left = expires.duration_since(now).unwrap_or_default();
    let h = report::human_duration;
    if req.new_token {
        return Err("--new-token was given".into());
    }
    if left.is_zero() {
        return Err(format!("they expired at {}", auth::rfc3339(expires)));
    }
    if left < auth::REUSE_MARGIN {
        return Err(format!(
            "they expire within 24h (at {}, {} left)",
            auth::rfc3339(expires),
            h(left)
        ));
    }
    if left < req.ttl / 2 {
        return Err(format!(
            "they have only {} left, less than half of the {} a new token would get",
            h(left),
            h(req.ttl)
        ));
    }
    if req.explicit && left > req.ttl {
        return Err(format!(
            "they last {} more, longer than the --token-ttl {} asked for",
            h(left),
            h(req.ttl)
        ));
    }
    Ok(())
}

fn decoded(s: &Secret) -> (BTreeMap<String, Vec<u8>>, BTreeMap<String, String>) {
    let data = s
        .data
        .clone()
        .unwrap_or_default()
        .into_iter()
        .map(|(k, v)| (k, v.0))
        .collect();
    (data, s.metadata.annotations.clone().unwrap_or_default())
}

/// The material for this run: the stored one when [`reuse_decision`] allows, else new (made
/// here, written by [`save_auth`] later). Warns (stderr and `warnings`) when stored tokens
/// are replaced, when the stored Secret cannot be used, and once when the cluster only has
/// the Secret of earlier agent-day2 versions.
///
/// Errors: reading the Secret fails (forbidden, unreachable: exit 4 naming it), `--token-ttl`
/// out of range (exit 3).
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
    let mut warn = |w: String| {
        crate::say!("warning: {w}");
        warnings.push(w);
    };
    let verb = if dry_run { "would be made" } else { "are made" };
    let old = match &existing {
        Some(s) => {
            let (data, ann) = decoded(s);
            match AuthMaterial::from_secret_data(&data, &ann) {
                Ok(m) => Some(m),
                Err(e) => {
                    warn(format!("{e}; new tokens {verb} and replace them"));
                    None
                }
            }
        }
        None => {
            migration_notice(target, verb, &mut warn).await;
            None
        }
    };
    let mut reason = None;
    if let Some(m) = &old {
        match reuse_decision(m.expires_at, now, req) {
            Ok(()) => {
                tracing::info!(expires = %m.expiry_rfc3339(), secret = %auth_ref(), "reusing the node tokens");
                return Ok(Auth {
                    material: m.clone(),
                    reused: true,
                    existing,
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
        existing,
        reason,
    })
}

/// When the new Secret is missing but the one of earlier agent-day2 versions exists, says
/// (once: from the next run on the new Secret exists) that its tokens cannot be reused. A
/// failure to read the old Secret only shows in the log: it decides nothing.
async fn migration_notice(target: &KubeTarget, verb: &str, warn: &mut impl FnMut(String)) {
    let api: Api<Secret> = Api::namespaced(target.client.clone(), auth::LEGACY_SECRET_NAMESPACE);
    match api.get_opt(auth::LEGACY_SECRET_NAME).await {
        Ok(Some(_)) => warn(format!(
            "{} holds node tokens of earlier agent-day2 versions, whose claim sub the node's assisted-service refuses (HTTP 500 \"malformed auth_scheme claim\"): new tokens {verb} and kept in {}, where oc adm node-image keeps them; the old Secret stays for monitor to follow the batches made with it (delete it once they have joined)",
            legacy_ref(),
            auth_ref()
        )),
        Ok(None) => {}
        Err(e) => tracing::debug!(error = %e, secret = %legacy_ref(), "cannot read the old auth Secret"),
    }
}

/// Writes new material into Secret `openshift-config/agent-auth-token` at `now`: data keys
/// [`auth::keys`] and annotations `expiresAt`/`updatedAt` ([`AuthMaterial::secret_annotations`]),
/// type Opaque. An existing Secret is replaced with the resourceVersion it was read with
/// (keys and annotations of others kept), so a concurrent writer (another add-nodes, `oc adm
/// node-image`) makes this fail with a conflict instead of being overwritten; a new one is
/// created (labelled `app.kubernetes.io/managed-by: agent-day2`).
///
/// Errors: the API refuses (forbidden: exit 4 naming the Secret and verb; conflict: says to
/// run again).
pub(super) async fn save_auth(target: &KubeTarget, a: &Auth, now: SystemTime) -> Result<()> {
    let m = &a.material;
    let data = m.to_secret_data();
    let notes = m.secret_annotations(now);
    let api: Api<Secret> = Api::namespaced(target.client.clone(), auth::SECRET_NAMESPACE);
    match &a.existing {
        Some(old) => {
            let mut s = old.clone();
            let d = s.data.get_or_insert_with(BTreeMap::new);
            for (k, v) in data {
                d.insert(k, ByteString(v.into_bytes()));
            }
            s.string_data = None;
            s.metadata
                .annotations
                .get_or_insert_with(BTreeMap::new)
                .extend(notes);
            s.metadata.managed_fields = None;
            let pp = PostParams {
                dry_run: false,
                field_manager: Some(FIELD_MANAGER.into()),
            };
            api.replace(auth::SECRET_NAME, &pp, &s)
                .await
                .map(|_| ())
                .map_err(|e| match e {
                    kube::Error::Api(st) if st.code == 409 => Error::Api {
                        verb: "update".into(),
                        resource: auth_ref(),
                        message: format!(
                            "it changed while add-nodes ran (another add-nodes or oc adm node-image wrote it): {}; run add-nodes again, it reads the new tokens",
                            st.message
                        ),
                    },
                    e => classify(e, "update", auth_ref(), target),
                })
        }
        None => {
            let labels = BTreeMap::from([(
                "app.kubernetes.io/managed-by".to_string(),
                "agent-day2".to_string(),
            )]);
            let s = Secret {
                metadata: ObjectMeta {
                    name: Some(auth::SECRET_NAME.into()),
                    namespace: Some(auth::SECRET_NAMESPACE.into()),
                    labels: Some(labels),
                    annotations: Some(notes),
                    ..Default::default()
                },
                type_: Some("Opaque".into()),
                data: Some(
                    data.into_iter()
                        .map(|(k, v)| (k, ByteString(v.into_bytes())))
                        .collect(),
                ),
                ..Default::default()
            };
            create_strict(&target.client, &(), Some(auth::SECRET_NAMESPACE), &s)
                .await
                .map(|_| ())
                .map_err(|e| classify(e, "create", auth_ref(), target))
        }
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
        let (exp, now) = (t0 + h(48), t0 + h(1));
        assert!(reuse_decision(exp, now, &req(48, false)).is_ok());
        assert!(reuse_decision(exp, now, &req(48, true)).is_ok(), "same ttl given");
        // A shorter explicit lifetime than they have left: new ones.
        let e = reuse_decision(exp, now, &req(2, true)).unwrap_err();
        assert!(
            e.contains("they last 47h more, longer than the --token-ttl 2h asked for"),
            "{e}"
        );
        // A longer one they cannot give: 47 h < 96 h / 2.
        let e = reuse_decision(exp, now, &req(96, true)).unwrap_err();
        assert!(e.contains("only 47h left, less than half of the 96h"), "{e}");
        // 72 h asked, 47 h left: more than half of 72 h, and not longer than asked.
        assert!(reuse_decision(exp, now, &req(72, true)).is_ok());
        let e = reuse_decision(
            exp,
            now,
            &TokenRequest {
                new_token: true,
                ..req(48, false)
            },
        )
        .unwrap_err();
        assert!(e.contains("--new-token"), "{e}");
        // 24 h left: still reused (the installer regenerates once now is after exp - 24 h);
        // 1 s less: not.
        let s = Duration::from_secs(1);
        assert!(reuse_decision(exp, exp - h(24), &req(48, false)).is_ok());
        let e = reuse_decision(exp, exp - h(24) + s, &req(48, false)).unwrap_err();
        assert!(e.contains("they expire within 24h"), "{e}");
        let e = reuse_decision(exp, t0 + h(30), &req(48, false)).unwrap_err();
        assert!(e.contains("expire within 24h") && e.contains("18h left"), "{e}");
        let e = reuse_decision(exp, t0 + h(49), &req(48, false)).unwrap_err();
        assert!(e.contains("expired"), "{e}");
        // An explicit long lifetime: 100 h tokens with 90 h left serve --token-ttl 100h.
        assert!(reuse_decision(t0 + h(100), t0 + h(10), &req(100, true)).is_ok());
    }
}
