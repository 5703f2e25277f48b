//! Auth material for a day-2 node's local assisted-service: an EC P-256 key pair and three
//! ES256 JSON Web Tokens (agent, user, watcher personas).
//!
//! Facts (node-contract.md "Auth and images", research/node-image.md §4/§5): the agent
//! installer's local assisted-service authenticates with ES256 tokens verified by the key in
//! `EC_PUBLIC_KEY_PEM`, and authorizes by the token's `sub` claim: `agentAuth` (header
//! `X-Secret-Key`), `userAuth` (`Authorization`), `watcherAuth` (`Watcher-Authorization`).
//! Tokens expire (`exp`), default 48 h (`--token-ttl`). The material is kept on the cluster in a
//! Secret ([`SECRET_NAME`] in [`SECRET_NAMESPACE`]) so `monitor` can call the node's API, and a
//! new `add-nodes` reuses it while more than half of its life is left ([`AuthMaterial::should_reuse`]),
//! so images made a little earlier keep working with the same tokens.
//!
//! Everything here is pure: reading and writing the Secret is the caller's job
//! ([`AuthMaterial::to_secret_data`] / [`AuthMaterial::from_secret_data`]).

use std::collections::BTreeMap;
use std::fmt;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use ring::rand::SystemRandom;
use ring::signature::{
    EcdsaKeyPair, KeyPair, UnparsedPublicKey, ECDSA_P256_SHA256_FIXED, ECDSA_P256_SHA256_FIXED_SIGNING,
};
use serde_json::{json, Value};

/// Name of the Secret that keeps the material on the cluster (in [`SECRET_NAMESPACE`]).
pub const SECRET_NAME: &str = "agent-day2-auth";
/// Our namespace on the cluster (design.md: batch records and auth live there; only
/// administrators can write it).
pub const SECRET_NAMESPACE: &str = "openshift-agent-day2";
/// Default token lifetime (`--token-ttl`): 48 hours, as the agent installer's tokens.
pub const DEFAULT_TTL: Duration = Duration::from_secs(48 * 3600);

/// JWT `sub` of the three personas (assisted-service's local authorizer reads it).
pub const SUB_AGENT: &str = "agentAuth";
/// See [`SUB_AGENT`].
pub const SUB_USER: &str = "userAuth";
/// See [`SUB_AGENT`].
pub const SUB_WATCHER: &str = "watcherAuth";

/// Secret data keys written by [`AuthMaterial::to_secret_data`].
pub mod keys {
    /// PEM `PUBLIC KEY` (SPKI, P-256).
    pub const PUBLIC_KEY: &str = "authTokenPublicKey";
    /// PEM `PRIVATE KEY` (PKCS#8, P-256).
    pub const PRIVATE_KEY: &str = "authTokenPrivateKey";
    /// ES256 JWT, `sub` agentAuth.
    pub const AGENT_TOKEN: &str = "agentAuthToken";
    /// ES256 JWT, `sub` userAuth.
    pub const USER_TOKEN: &str = "userAuthToken";
    /// ES256 JWT, `sub` watcherAuth.
    pub const WATCHER_TOKEN: &str = "watcherAuthToken";
    /// RFC 3339 UTC time the tokens were signed.
    pub const ISSUED_AT: &str = "issuedAt";
    /// RFC 3339 UTC time the tokens expire.
    pub const EXPIRES_AT: &str = "expiresAt";
}

/// Why auth material could not be made or read back.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum AuthError {
    /// Key generation or signing failed (the system's random source).
    #[error("cannot create the auth key pair or sign its tokens: {0}")]
    Crypto(String),
    /// The lifetime is zero or does not fit in a Unix time.
    #[error("token lifetime {0:?} is invalid: give a positive duration such as 48h")]
    BadTtl(Duration),
    /// A Secret value is missing or malformed; names the key and what to do.
    #[error("Secret {ns}/{name} key {key}: {what} (delete the Secret to have new material made)", ns = SECRET_NAMESPACE, name = SECRET_NAME)]
    BadSecret {
        /// The data key.
        key: &'static str,
        /// What is wrong.
        what: String,
    },
}

/// The key pair and the three persona tokens, with their lifetime.
///
/// `Debug` shows only the public key and the times: the private key and the tokens grant
/// access to the node's API and are never printed.
#[derive(Clone, PartialEq, Eq)]
pub struct AuthMaterial {
    /// EC P-256 public key, PEM `PUBLIC KEY` (SPKI).
    pub public_key_pem: String,
    /// EC P-256 private key, PEM `PRIVATE KEY` (PKCS#8). Secret.
    pub private_key_pem: String,
    /// ES256 JWT with `sub` = `agentAuth`. Secret.
    pub agent_token: String,
    /// ES256 JWT with `sub` = `userAuth`. Secret.
    pub user_token: String,
    /// ES256 JWT with `sub` = `watcherAuth`. Secret.
    pub watcher_token: String,
    /// When the tokens were signed (`iat`), whole seconds.
    pub issued_at: SystemTime,
    /// When they expire (`exp`), whole seconds.
    pub expires_at: SystemTime,
}

impl fmt::Debug for AuthMaterial {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AuthMaterial")
            .field("public_key_pem", &self.public_key_pem)
            .field("private_key_pem", &"<redacted>")
            .field("agent_token", &"<redacted>")
            .field("user_token", &"<redacted>")
            .field("watcher_token", &"<redacted>")
            .field("issued_at", &rfc3339(self.issued_at))
            .field("expires_at", &rfc3339(self.expires_at))
            .finish()
    }
}

/// Seconds since the Unix epoch (0 before it).
fn unix(t: SystemTime) -> i64 {
    t.duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0)
}

fn from_unix(s: i64) -> SystemTime {
    UNIX_EPOCH + Duration::from_secs(s.max(0) as u64)
}

/// `t` as RFC 3339 UTC with whole seconds, e.g. `2026-12-01T14:02:00Z` (the format of
/// `AUTH_TOKEN_EXPIRY` in add-nodes.env).
pub fn rfc3339(t: SystemTime) -> String {
    let dt = time::OffsetDateTime::from_unix_timestamp(unix(t)).unwrap_or(time::OffsetDateTime::UNIX_EPOCH);
    dt.format(&time::format_description::well_known::Rfc3339)
        .unwrap_or_default()
}

/// Parses an RFC 3339 time (any offset) to a [`SystemTime`].
pub fn parse_rfc3339(s: &str) -> Option<SystemTime> {
    let dt = time::OffsetDateTime::parse(s.trim(), &time::format_description::well_known::Rfc3339).ok()?;
    Some(from_unix(dt.unix_timestamp()))
}

/// The DER prefix of a P-256 SubjectPublicKeyInfo (RFC 5480): SEQUENCE { SEQUENCE { OID
/// id-ecPublicKey, OID prime256v1 }, BIT STRING (0 unused bits) } followed by the 65-byte
/// uncompressed point. ring gives the point; this wraps it for `PUBLIC KEY` PEM.
const P256_SPKI_PREFIX: [u8; 26] = [
    0x30, 0x59, 0x30, 0x13, 0x06, 0x07, 0x2a, 0x86, 0x48, 0xce, 0x3d, 0x02, 0x01, 0x06, 0x08, 0x2a, 0x86,
    0x48, 0xce, 0x3d, 0x03, 0x01, 0x07, 0x03, 0x42, 0x00,
];

/// PEM with LF line ends (the `pem` crate defaults to CRLF; files on the node use LF).
fn pem_lf(p: &pem::Pem) -> String {
    pem::encode_config(p, pem::EncodeConfig::new().set_line_ending(pem::LineEnding::LF))
}

fn spki_pem(point: &[u8]) -> String {
    let mut der = P256_SPKI_PREFIX.to_vec();
    der.extend_from_slice(point);
    pem_lf(&pem::Pem::new("PUBLIC KEY", der))
}

/// The uncompressed P-256 point of a `PUBLIC KEY` PEM made by this module.
fn point_from_pem(public_key_pem: &str) -> Result<Vec<u8>, String> {
    let p = pem::parse(public_key_pem).map_err(|e| format!("not PEM: {e}"))?;
    if p.tag() != "PUBLIC KEY" {
        return Err(format!("PEM block is {:?}, expected PUBLIC KEY", p.tag()));
    }
    let der = p.contents();
    match der.strip_prefix(&P256_SPKI_PREFIX[..]) {
        Some(point) if point.len() == 65 && point[0] == 4 => Ok(point.to_vec()),
        _ => Err("not an EC P-256 public key".into()),
    }
}

fn key_pair(private_key_pem: &str) -> Result<EcdsaKeyPair, String> {
    let p = pem::parse(private_key_pem).map_err(|e| format!("not PEM: {e}"))?;
    if p.tag() != "PRIVATE KEY" {
        return Err(format!(
            "PEM block is {:?}, expected PRIVATE KEY (PKCS#8)",
            p.tag()
        ));
    }
    EcdsaKeyPair::from_pkcs8(
        &ECDSA_P256_SHA256_FIXED_SIGNING,
        p.contents(),
        &SystemRandom::new(),
    )
    .map_err(|e| format!("not an EC P-256 PKCS#8 key: {e}"))
}

/// Signs `claims` as an ES256 JWT (`header.payload.signature`, base64url without padding;
/// the signature is the fixed 64-byte r||s form JWS requires, RFC 7518 §3.4).
fn sign(kp: &EcdsaKeyPair, claims: &Value) -> Result<String, AuthError> {
    let head = URL_SAFE_NO_PAD.encode(br#"{"alg":"ES256","typ":"JWT"}"#);
    let body = URL_SAFE_NO_PAD.encode(claims.to_string());
    let msg = format!("{head}.{body}");
    let sig = kp
        .sign(&SystemRandom::new(), msg.as_bytes())
        .map_err(|e| AuthError::Crypto(format!("signing: {e}")))?;
    Ok(format!("{msg}.{}", URL_SAFE_NO_PAD.encode(sig.as_ref())))
}

/// Verifies an ES256 JWT against a `PUBLIC KEY` PEM and returns its claims. Does not check
/// `exp` (callers compare with their own clock). Errors say what failed.
pub fn verify_token(token: &str, public_key_pem: &str) -> Result<serde_json::Map<String, Value>, String> {
    let point = point_from_pem(public_key_pem)?;
    let parts: Vec<&str> = token.split('.').collect();
    if parts.len() != 3 {
        return Err("not a JWT (header.payload.signature)".into());
    }
    let header: Value = URL_SAFE_NO_PAD
        .decode(parts[0])
        .ok()
        .and_then(|b| serde_json::from_slice(&b).ok())
        .ok_or("JWT header is not base64url JSON")?;
    if header.get("alg").and_then(Value::as_str) != Some("ES256") {
        return Err(format!("JWT alg is {:?}, expected ES256", header.get("alg")));
    }
    let sig = URL_SAFE_NO_PAD
        .decode(parts[2])
        .map_err(|_| "JWT signature is not base64url")?;
    UnparsedPublicKey::new(&ECDSA_P256_SHA256_FIXED, &point)
        .verify(format!("{}.{}", parts[0], parts[1]).as_bytes(), &sig)
        .map_err(|_| "JWT signature does not verify with the public key".to_string())?;
    URL_SAFE_NO_PAD
        .decode(parts[1])
        .ok()
        .and_then(|b| serde_json::from_slice(&b).ok())
        .ok_or_else(|| "JWT payload is not base64url JSON".to_string())
}

/// Makes new material: a fresh P-256 key pair (ring, system random source) and the three
/// tokens with `iat` = `now` and `exp` = `now + ttl` (whole seconds).
///
/// Errors: [`AuthError::BadTtl`] for a zero or absurd `ttl`; [`AuthError::Crypto`] when the
/// random source fails.
pub fn generate(ttl: Duration, now: SystemTime) -> Result<AuthMaterial, AuthError> {
    if ttl.as_secs() == 0 || ttl.as_secs() > 100 * 365 * 86400 {
        return Err(AuthError::BadTtl(ttl));
    }
    let rng = SystemRandom::new();
    let pkcs8 = EcdsaKeyPair::generate_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, &rng)
        .map_err(|e| AuthError::Crypto(format!("key generation: {e}")))?;
    let kp = EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, pkcs8.as_ref(), &rng)
        .map_err(|e| AuthError::Crypto(format!("key load: {e}")))?;
    let iat = unix(now);
    let exp = iat + ttl.as_secs() as i64;
    let token = |sub: &str| sign(&kp, &json!({"sub": sub, "iat": iat, "exp": exp}));
    Ok(AuthMaterial {
        public_key_pem: spki_pem(kp.public_key().as_ref()),
        private_key_pem: pem_lf(&pem::Pem::new("PRIVATE KEY", pkcs8.as_ref().to_vec())),
        agent_token: token(SUB_AGENT)?,
        user_token: token(SUB_USER)?,
        watcher_token: token(SUB_WATCHER)?,
        issued_at: from_unix(iat),
        expires_at: from_unix(exp),
    })
}

impl AuthMaterial {
    /// Share of the lifetime still left at `now`: 1.0 at issue, 0.0 at or after expiry,
    /// clamped to [0, 1]. A zero-length lifetime counts as expired.
    pub fn remaining_life_fraction(&self, now: SystemTime) -> f64 {
        let total = unix(self.expires_at) - unix(self.issued_at);
        if total <= 0 {
            return 0.0;
        }
        let left = unix(self.expires_at) - unix(now);
        (left as f64 / total as f64).clamp(0.0, 1.0)
    }

    /// Whether a new batch should reuse this material (issue 3: "reused while more than half
    /// their life is left"): strictly more than half of the lifetime remains at `now`.
    pub fn should_reuse(&self, now: SystemTime) -> bool {
        self.remaining_life_fraction(now) > 0.5
    }

    /// Whether the tokens have expired at `now`.
    pub fn is_expired(&self, now: SystemTime) -> bool {
        now >= self.expires_at
    }

    /// `AUTH_TOKEN_EXPIRY` value: the expiry as RFC 3339 UTC.
    pub fn expiry_rfc3339(&self) -> String {
        rfc3339(self.expires_at)
    }

    /// The Secret's `stringData` (keys in [`keys`]): PEMs, tokens and the two times.
    /// The caller writes it as Secret [`SECRET_NAME`] in [`SECRET_NAMESPACE`], type Opaque.
    pub fn to_secret_data(&self) -> BTreeMap<String, String> {
        BTreeMap::from([
            (keys::PUBLIC_KEY.to_string(), self.public_key_pem.clone()),
            (keys::PRIVATE_KEY.to_string(), self.private_key_pem.clone()),
            (keys::AGENT_TOKEN.to_string(), self.agent_token.clone()),
            (keys::USER_TOKEN.to_string(), self.user_token.clone()),
            (keys::WATCHER_TOKEN.to_string(), self.watcher_token.clone()),
            (keys::ISSUED_AT.to_string(), rfc3339(self.issued_at)),
            (keys::EXPIRES_AT.to_string(), rfc3339(self.expires_at)),
        ])
    }

    /// Reads material back from a Secret's decoded `data` (bytes per key, as the API returns
    /// after base64). Checks that every key is present, the private key matches the public
    /// key, and each token verifies with it and carries its persona's `sub`.
    ///
    /// Errors: [`AuthError::BadSecret`] naming the key.
    pub fn from_secret_data(data: &BTreeMap<String, Vec<u8>>) -> Result<AuthMaterial, AuthError> {
        let get = |key: &'static str| -> Result<String, AuthError> {
            let v = data.get(key).ok_or(AuthError::BadSecret {
                key,
                what: "is missing".into(),
            })?;
            let s = String::from_utf8(v.clone()).map_err(|_| AuthError::BadSecret {
                key,
                what: "is not UTF-8".into(),
            })?;
            if s.trim().is_empty() {
                return Err(AuthError::BadSecret {
                    key,
                    what: "is empty".into(),
                });
            }
            Ok(s)
        };
        let time_of = |key: &'static str| -> Result<SystemTime, AuthError> {
            let s = get(key)?;
            parse_rfc3339(&s).ok_or(AuthError::BadSecret {
                key,
                what: format!("{s:?} is not an RFC 3339 time"),
            })
        };
        let public_key_pem = get(keys::PUBLIC_KEY)?;
        let private_key_pem = get(keys::PRIVATE_KEY)?;
        point_from_pem(&public_key_pem).map_err(|what| AuthError::BadSecret {
            key: keys::PUBLIC_KEY,
            what,
        })?;
        let kp = key_pair(&private_key_pem).map_err(|what| AuthError::BadSecret {
            key: keys::PRIVATE_KEY,
            what,
        })?;
        if spki_pem(kp.public_key().as_ref()).trim() != public_key_pem.trim() {
            return Err(AuthError::BadSecret {
                key: keys::PRIVATE_KEY,
                what: format!("does not belong to the public key in {}", keys::PUBLIC_KEY),
            });
        }
        let m = AuthMaterial {
            agent_token: get(keys::AGENT_TOKEN)?,
            user_token: get(keys::USER_TOKEN)?,
            watcher_token: get(keys::WATCHER_TOKEN)?,
            issued_at: time_of(keys::ISSUED_AT)?,
            expires_at: time_of(keys::EXPIRES_AT)?,
            public_key_pem,
            private_key_pem,
        };
        for (key, sub, tok) in [
            (keys::AGENT_TOKEN, SUB_AGENT, &m.agent_token),
            (keys::USER_TOKEN, SUB_USER, &m.user_token),
            (keys::WATCHER_TOKEN, SUB_WATCHER, &m.watcher_token),
        ] {
            let claims = verify_token(tok.trim(), &m.public_key_pem)
                .map_err(|what| AuthError::BadSecret { key, what })?;
            let got = claims.get("sub").and_then(Value::as_str).unwrap_or("");
            if got != sub {
                return Err(AuthError::BadSecret {
                    key,
                    what: format!("token has sub {got:?}, expected {sub:?}"),
                });
            }
        }
        Ok(m)
    }

    /// Every secret string of this material (private key, tokens), for redaction.
    pub fn secrets(&self) -> [&str; 4] {
        [
            &self.private_key_pem,
            &self.agent_token,
            &self.user_token,
            &self.watcher_token,
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spki_prefix_is_p256() {
        let m = generate(DEFAULT_TTL, SystemTime::now()).unwrap();
        let p = pem::parse(&m.public_key_pem).unwrap();
        assert_eq!(p.contents().len(), 91);
        assert!(point_from_pem(&m.public_key_pem).is_ok());
    }
}
