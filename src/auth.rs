//! Auth material for a day-2 node's local assisted-service: an EC P-256 public key and three
//! ES256 JSON Web Tokens, one per auth scheme (agent, user, watcher).
//!
//! What the node's service accepts is decided by its own code (assisted-service @ 063b257950f7):
//! - `pkg/auth/agent_local_authenticator.go`: `EC_PUBLIC_KEY_PEM` is base64 of a PEM text; the
//!   PEM's public key (PKIX, the block type is not looked at) verifies the token; a token is
//!   parsed by golang-jwt v4 (`pkg/auth/local_authenticator.go` `validateToken`: ES256 only),
//!   whose `MapClaims.Valid` refuses an `exp` at or before now, an `iat` after now and an
//!   `nbf` after now (each only when present); any failure is HTTP 401.
//! - `pkg/auth/agent_local_authz_handler.go`: the claim `auth_scheme` must be a string (else
//!   HTTP 500 "malformed auth_scheme claim"), not empty (else 400) and equal to the scheme of
//!   the route's header that authenticated (else 403): `agentAuth` (header `X-Secret-Key`),
//!   `userAuth` (`Authorization`), `watcherAuth` (`Watcher-Authorization`).
//!
//! So the tokens carry exactly `{"auth_scheme": <scheme>, "exp": <Unix seconds>}` and no `iat`
//! (a node whose clock is behind ours would refuse a token "used before issued"), as the
//! installer signs them (openshift/installer `pkg/asset/agent/gencrypto/authconfig.go`).
//! They expire after `--token-ttl` (default 48 h).
//!
//! On the cluster the material lives where `oc adm node-image` keeps it, Secret
//! [`SECRET_NAME`] in [`SECRET_NAMESPACE`] (data keys in [`keys`], annotations in
//! [`annotations`]), so either tool's `monitor` follows either tool's node image. No private
//! key is stored: new tokens always come with a new key pair. Earlier agent-day2 versions kept
//! their own Secret ([`LEGACY_SECRET_NAME`] in [`LEGACY_SECRET_NAMESPACE`]) whose tokens carry
//! `sub` instead of `auth_scheme`; [`AuthMaterial::from_legacy_secret_data`] still reads it so
//! `monitor` can follow batches made with it.
//!
//! Everything here is pure: reading and writing the Secrets is the callers' job.

use std::collections::BTreeMap;
use std::fmt;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use base64::Engine;
use ring::rand::SystemRandom;
use ring::signature::{
    EcdsaKeyPair, KeyPair, UnparsedPublicKey, ECDSA_P256_SHA256_FIXED, ECDSA_P256_SHA256_FIXED_SIGNING,
};
use serde_json::{json, Map, Value};

/// Name of the Secret that keeps the material on the cluster (in [`SECRET_NAMESPACE`]); the
/// name `oc adm node-image` uses (installer `gencrypto/authconfig.go` `authTokenSecretName`).
pub const SECRET_NAME: &str = "agent-auth-token";
/// Namespace of [`SECRET_NAME`] (installer `authTokenSecretNamespace`).
pub const SECRET_NAMESPACE: &str = "openshift-config";
/// The Secret earlier agent-day2 versions wrote (tokens with `sub`, which the service refuses);
/// read only, so `monitor` can follow the batches made with it.
pub const LEGACY_SECRET_NAME: &str = "agent-day2-auth";
/// Namespace of [`LEGACY_SECRET_NAME`] (our own namespace).
pub const LEGACY_SECRET_NAMESPACE: &str = "openshift-agent-day2";
/// Default token lifetime (`--token-ttl`): 48 hours, as the installer's add-nodes tokens.
pub const DEFAULT_TTL: Duration = Duration::from_secs(48 * 3600);
/// Stored tokens that expire within this time are not reused (installer `authconfig.go`:
/// it regenerates once now is past `exp - 24h`).
pub const REUSE_MARGIN: Duration = Duration::from_secs(24 * 3600);

/// JWT `auth_scheme` of the agent token (swagger security scheme `agentAuth`, header
/// `X-Secret-Key`; `pkg/auth/agent_local_authz_handler.go` compares the claim with it).
pub const SCHEME_AGENT: &str = "agentAuth";
/// JWT `auth_scheme` of the user token (scheme `userAuth`, header `Authorization`).
pub const SCHEME_USER: &str = "userAuth";
/// JWT `auth_scheme` of the watcher token (scheme `watcherAuth`, header `Watcher-Authorization`).
pub const SCHEME_WATCHER: &str = "watcherAuth";

/// Data keys of Secret [`SECRET_NAME`] (installer `authconfig.go`).
pub mod keys {
    /// base64 of the PEM public key (the `EC_PUBLIC_KEY_PEM` value). A raw PEM text is read too.
    pub const PUBLIC_KEY: &str = "authTokenPublicKey";
    /// ES256 JWT, `auth_scheme` agentAuth.
    pub const AGENT_TOKEN: &str = "agentAuthToken";
    /// ES256 JWT, `auth_scheme` userAuth.
    pub const USER_TOKEN: &str = "userAuthToken";
    /// ES256 JWT, `auth_scheme` watcherAuth.
    pub const WATCHER_TOKEN: &str = "watcherAuthToken";
    /// Data key of [`super::LEGACY_SECRET_NAME`] holding the RFC 3339 expiry.
    pub const LEGACY_EXPIRES_AT: &str = "expiresAt";
}

/// Annotations of Secret [`SECRET_NAME`] (installer `authconfig.go`, "only for informational
/// purposes" there; the expiry that counts is the tokens' `exp`).
pub mod annotations {
    /// RFC 3339 UTC time the tokens expire.
    pub const EXPIRES_AT: &str = "expiresAt";
    /// RFC 3339 UTC time the material was last written.
    pub const UPDATED_AT: &str = "updatedAt";
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
    /// A Secret value is missing or malformed; names the Secret, the key and what is wrong.
    #[error("Secret {secret} key {key}: {what}")]
    BadSecret {
        /// `namespace/name` of the Secret.
        secret: String,
        /// The data key (or `metadata.annotations.<name>`).
        key: String,
        /// What is wrong.
        what: String,
    },
}

impl AuthError {
    /// The message without the `Secret namespace/name` prefix, for callers whose error names
    /// the Secret already: `key K: what` for [`AuthError::BadSecret`], the whole message else.
    pub fn without_secret(&self) -> String {
        match self {
            AuthError::BadSecret { key, what, .. } => format!("key {key}: {what}"),
            other => other.to_string(),
        }
    }
}

/// The public key and the three scheme tokens, with their expiry.
///
/// `Debug` shows only the public key and the expiry: the tokens grant access to the node's
/// API and are never printed.
#[derive(Clone, PartialEq, Eq)]
pub struct AuthMaterial {
    /// EC P-256 public key as a PEM text (PKIX inside; block `EC PUBLIC KEY` when made here,
    /// as the installer writes it). `EC_PUBLIC_KEY_PEM` is its base64.
    pub public_key_pem: String,
    /// ES256 JWT with `auth_scheme` = `agentAuth`. Secret.
    pub agent_token: String,
    /// ES256 JWT with `auth_scheme` = `userAuth`. Secret.
    pub user_token: String,
    /// ES256 JWT with `auth_scheme` = `watcherAuth`. Secret.
    pub watcher_token: String,
    /// When the tokens expire (`exp`), whole seconds.
    pub expires_at: SystemTime,
}

impl fmt::Debug for AuthMaterial {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AuthMaterial")
            .field("public_key_pem", &self.public_key_pem)
            .field("agent_token", &"<redacted>")
            .field("user_token", &"<redacted>")
            .field("watcher_token", &"<redacted>")
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
/// `AUTH_TOKEN_EXPIRY` in add-nodes.env and of the Secret's `expiresAt`).
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
/// uncompressed point. ring gives the point; this wraps it in PKIX.
const P256_SPKI_PREFIX: [u8; 26] = [
    0x30, 0x59, 0x30, 0x13, 0x06, 0x07, 0x2a, 0x86, 0x48, 0xce, 0x3d, 0x02, 0x01, 0x06, 0x08, 0x2a, 0x86,
    0x48, 0xce, 0x3d, 0x03, 0x01, 0x07, 0x03, 0x42, 0x00,
];

/// PEM block type of the public key we write: the installer's (`keyPairPEM` in
/// `authconfig.go` puts PKIX bytes in an `EC PUBLIC KEY` block; the service does not look at
/// the type).
pub const PUBLIC_KEY_PEM_TAG: &str = "EC PUBLIC KEY";

/// PEM with LF line ends (the `pem` crate defaults to CRLF; files on the node use LF).
fn pem_lf(p: &pem::Pem) -> String {
    pem::encode_config(p, pem::EncodeConfig::new().set_line_ending(pem::LineEnding::LF))
}

fn spki_pem(point: &[u8]) -> String {
    let mut der = P256_SPKI_PREFIX.to_vec();
    der.extend_from_slice(point);
    pem_lf(&pem::Pem::new(PUBLIC_KEY_PEM_TAG, der))
}

/// The PEM text of a public key given as PEM or as base64 of the PEM (the two forms a
/// Secret's `authTokenPublicKey` is found in). Errors say which form was expected.
pub fn public_key_pem_text(pem_or_b64: &str) -> Result<String, String> {
    let s = pem_or_b64.trim();
    if s.contains("-----BEGIN") {
        return Ok(s.to_string() + "\n");
    }
    let raw = STANDARD
        .decode(s)
        .map_err(|_| "is neither a PEM public key nor base64 of one".to_string())?;
    let text =
        String::from_utf8(raw).map_err(|_| "is base64 of something that is not a PEM text".to_string())?;
    if !text.contains("-----BEGIN") {
        return Err("is base64 of something that is not a PEM text".into());
    }
    Ok(text)
}

/// The uncompressed P-256 point of a PEM public key (or base64 of it), as
/// `jwt.ParseECPublicKeyFromPEM` reads it: the first PEM block, PKIX inside, whatever the
/// block type. Only P-256 can verify ES256.
fn point_from_pem(public_key_pem: &str) -> Result<Vec<u8>, String> {
    let text = public_key_pem_text(public_key_pem)?;
    let p = pem::parse(&text).map_err(|e| format!("not PEM: {e}"))?;
    match p.contents().strip_prefix(&P256_SPKI_PREFIX[..]) {
        Some(point) if point.len() == 65 && point[0] == 4 => Ok(point.to_vec()),
        _ => Err(format!(
            "the PEM block {:?} does not hold an EC P-256 public key (PKIX); ES256 needs one",
            p.tag()
        )),
    }
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

/// Decodes a JWT and verifies its ES256 signature with `public_key_pem` (PEM or base64 of
/// it), without looking at any claim. Returns the claims.
fn verify_signature(token: &str, public_key_pem: &str) -> Result<Map<String, Value>, String> {
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
        return Err(format!(
            "JWT alg is {}; assisted-service accepts only ES256",
            header
                .get("alg")
                .map_or_else(|| "missing".to_string(), Value::to_string)
        ));
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

/// The latest `exp` reused from a Secret, 9999-12-31T23:59:59Z in Unix seconds: the last time
/// an RFC 3339 date (and `AUTH_TOKEN_EXPIRY`) can write.
const MAX_EXP: i64 = 253_402_300_799;

/// A numeric date claim (`exp`, `iat`, `nbf`) in whole Unix seconds: `Ok(None)` when absent,
/// `Err` when present but not a number (golang-jwt v4 then fails the check).
fn numeric_claim(claims: &Map<String, Value>, name: &str) -> Result<Option<i64>, String> {
    match claims.get(name) {
        None => Ok(None),
        Some(v) => v
            .as_f64()
            .map(|f| Some(f as i64))
            .ok_or_else(|| format!("claim {name} is {v}, not a number")),
    }
}

/// Checks `token` as the node's assisted-service does for a request on a route of auth
/// scheme `scheme` ([`SCHEME_AGENT`], [`SCHEME_USER`] or [`SCHEME_WATCHER`]) at `now`, and
/// returns its claims:
/// - authentication (`agent_local_authenticator.go`, golang-jwt v4 `Parser.Parse` and
///   `MapClaims.Valid`): three segments, alg ES256, the signature verifies with
///   `public_key_pem` (PEM or base64 of it); `exp`, when present, must be a number after
///   `now`; `iat` and `nbf`, when present, numbers not after `now`;
/// - authorization (`agent_local_authz_handler.go`): `auth_scheme` is a string, not empty,
///   equal to `scheme`.
///
/// Errors say which check failed, in the service's words where it has some.
pub fn verify_token(
    token: &str,
    public_key_pem: &str,
    scheme: &str,
    now: SystemTime,
) -> Result<Map<String, Value>, String> {
    let claims = verify_signature(token.trim(), public_key_pem)?;
    let now_s = unix(now);
    match numeric_claim(&claims, "exp")? {
        Some(exp) if exp <= now_s => {
            return Err(format!("token is expired (exp {})", rfc3339(from_unix(exp))))
        }
        _ => {}
    }
    if let Some(iat) = numeric_claim(&claims, "iat")? {
        if iat > now_s {
            return Err(format!(
                "token used before issued (iat {})",
                rfc3339(from_unix(iat))
            ));
        }
    }
    if let Some(nbf) = numeric_claim(&claims, "nbf")? {
        if nbf > now_s {
            return Err(format!(
                "token is not valid yet (nbf {})",
                rfc3339(from_unix(nbf))
            ));
        }
    }
    check_scheme(&claims, scheme)?;
    Ok(claims)
}

/// The authorizer's part of [`verify_token`]: `auth_scheme` a non-empty string equal to
/// `scheme`. A token with `sub` but no `auth_scheme` (earlier agent-day2 versions and
/// installers before openshift/installer 58f798c8a6 signed those) is named as such.
fn check_scheme(claims: &Map<String, Value>, scheme: &str) -> Result<(), String> {
    match claims.get("auth_scheme") {
        Some(Value::String(s)) if s == scheme => Ok(()),
        Some(Value::String(s)) if s.is_empty() => Err("claim auth_scheme is empty".into()),
        Some(Value::String(s)) => Err(format!("claim auth_scheme is {s:?}, expected {scheme:?}")),
        Some(other) => Err(format!("malformed auth_scheme claim: {other} is not a string")),
        None if claims.contains_key("sub") => Err(
            "malformed auth_scheme claim: the token has the old claim sub and no auth_scheme (assisted-service answers HTTP 500 to it)"
                .into(),
        ),
        None => Err("malformed auth_scheme claim: the token has none".into()),
    }
}

/// Makes new material: a fresh P-256 key pair (ring, system random source; the private key
/// is dropped once the tokens are signed) and the three tokens with claims exactly
/// `{"auth_scheme": <scheme>, "exp": now + ttl}` (whole seconds, no `iat`).
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
    let exp = unix(now) + ttl.as_secs() as i64;
    let token = |scheme: &str| sign(&kp, &json!({"auth_scheme": scheme, "exp": exp}));
    Ok(AuthMaterial {
        public_key_pem: spki_pem(kp.public_key().as_ref()),
        agent_token: token(SCHEME_AGENT)?,
        user_token: token(SCHEME_USER)?,
        watcher_token: token(SCHEME_WATCHER)?,
        expires_at: from_unix(exp),
    })
}

/// `namespace/name` of [`SECRET_NAME`].
pub fn secret_ref() -> String {
    format!("{SECRET_NAMESPACE}/{SECRET_NAME}")
}

/// `namespace/name` of [`LEGACY_SECRET_NAME`].
pub fn legacy_secret_ref() -> String {
    format!("{LEGACY_SECRET_NAMESPACE}/{LEGACY_SECRET_NAME}")
}

/// A Secret's decoded data value as trimmed UTF-8, `Err` naming the key when it is missing,
/// empty or not text.
fn data_str(
    secret: &str,
    data: &BTreeMap<String, Vec<u8>>,
    key: &'static str,
    missing: &str,
) -> Result<String, AuthError> {
    let bad = |what: String| AuthError::BadSecret {
        secret: secret.to_string(),
        key: key.to_string(),
        what,
    };
    let v = data.get(key).ok_or_else(|| bad(missing.to_string()))?;
    let s = String::from_utf8(v.clone()).map_err(|_| bad("is not UTF-8".into()))?;
    if s.trim().is_empty() {
        return Err(bad("is empty".into()));
    }
    Ok(s.trim().to_string())
}

impl AuthMaterial {
    /// Whether the tokens have expired at `now` (the service refuses `exp` <= now).
    pub fn is_expired(&self, now: SystemTime) -> bool {
        now >= self.expires_at
    }

    /// `AUTH_TOKEN_EXPIRY` value: the expiry as RFC 3339 UTC.
    pub fn expiry_rfc3339(&self) -> String {
        rfc3339(self.expires_at)
    }

    /// `EC_PUBLIC_KEY_PEM` / the Secret's `authTokenPublicKey`: base64 (standard, padded) of
    /// the PEM text, as the installer writes both.
    pub fn public_key_b64(&self) -> String {
        STANDARD.encode(self.public_key_pem.as_bytes())
    }

    /// Data of Secret [`SECRET_NAME`] (keys in [`keys`], values as text; type Opaque): the
    /// three tokens and [`Self::public_key_b64`].
    pub fn to_secret_data(&self) -> BTreeMap<String, String> {
        BTreeMap::from([
            (keys::AGENT_TOKEN.to_string(), self.agent_token.clone()),
            (keys::USER_TOKEN.to_string(), self.user_token.clone()),
            (keys::WATCHER_TOKEN.to_string(), self.watcher_token.clone()),
            (keys::PUBLIC_KEY.to_string(), self.public_key_b64()),
        ])
    }

    /// Annotations of Secret [`SECRET_NAME`] written at `now`: `expiresAt` (the tokens'
    /// expiry) and `updatedAt` (`now`), both RFC 3339 UTC.
    pub fn secret_annotations(&self, now: SystemTime) -> BTreeMap<String, String> {
        BTreeMap::from([
            (annotations::EXPIRES_AT.to_string(), self.expiry_rfc3339()),
            (annotations::UPDATED_AT.to_string(), rfc3339(now)),
        ])
    }

    /// Reads material from Secret [`SECRET_NAME`]'s decoded `data` (bytes per key, as the API
    /// returns after base64) and its annotations, as `oc adm node-image` or add-nodes wrote
    /// it. Checks that the public key is a P-256 key (base64 PEM or raw PEM), and that each
    /// token verifies with it and carries its scheme in `auth_scheme`. The expiry is the
    /// earliest `exp` of the three tokens (the service checks each), else the `expiresAt`
    /// annotation; times are not compared with a clock here.
    ///
    /// Errors: [`AuthError::BadSecret`] naming the key: a missing user or watcher token says
    /// it is the single-token layout of older `oc adm node-image` versions; a token with `sub`
    /// and no `auth_scheme` says the service refuses it.
    pub fn from_secret_data(
        data: &BTreeMap<String, Vec<u8>>,
        annotations: &BTreeMap<String, String>,
    ) -> Result<AuthMaterial, AuthError> {
        let secret = secret_ref();
        let bad = |key: &str, what: String| AuthError::BadSecret {
            secret: secret.clone(),
            key: key.to_string(),
            what,
        };
        let public = data_str(&secret, data, keys::PUBLIC_KEY, "is missing")?;
        let public_key_pem = public_key_pem_text(&public).map_err(|w| bad(keys::PUBLIC_KEY, w))?;
        point_from_pem(&public_key_pem).map_err(|w| bad(keys::PUBLIC_KEY, w))?;
        // Neither user nor watcher token: the single-token layout of older oc adm node-image
        // versions; one of them alone: the Secret was changed by something else.
        let missing = if data.contains_key(keys::USER_TOKEN) || data.contains_key(keys::WATCHER_TOKEN) {
            "is missing while the other tokens are present: the Secret was changed after it was written"
        } else {
            "is missing: the Secret has the single-token layout of older oc adm node-image versions (agent token only), which cannot serve monitor"
        };
        let agent_token = data_str(&secret, data, keys::AGENT_TOKEN, "is missing")?;
        let user_token = data_str(&secret, data, keys::USER_TOKEN, missing)?;
        let watcher_token = data_str(&secret, data, keys::WATCHER_TOKEN, missing)?;
        let mut exp: Option<i64> = None;
        for (key, scheme, tok) in [
            (keys::AGENT_TOKEN, SCHEME_AGENT, &agent_token),
            (keys::USER_TOKEN, SCHEME_USER, &user_token),
            (keys::WATCHER_TOKEN, SCHEME_WATCHER, &watcher_token),
        ] {
            let claims = verify_signature(tok, &public_key_pem).map_err(|w| bad(key, w))?;
            check_scheme(&claims, scheme).map_err(|w| bad(key, w))?;
            // iat/nbf are refused by golang-jwt v4 while the node's clock is behind them, and
            // the installer never signs them: such tokens are not reused.
            for claim in ["iat", "nbf"] {
                if claims.contains_key(claim) {
                    return Err(bad(
                        key,
                        format!("carries the claim {claim}, which the node's assisted-service refuses while its clock is behind the signer's"),
                    ));
                }
            }
            if let Some(e) = numeric_claim(&claims, "exp").map_err(|w| bad(key, w))? {
                // An exp the service cannot hold as a time (golang-jwt turns 1e20 into a time
                // in the past) or that an RFC 3339 time cannot write is not an expiry.
                if e > MAX_EXP {
                    return Err(bad(key, format!("claim exp {e} is after 9999-12-31T23:59:59Z")));
                }
                exp = Some(exp.map_or(e, |x| x.min(e)));
            }
        }
        let expires_at = match exp {
            Some(e) => from_unix(e),
            None => {
                let k = format!("metadata.annotations.{}", annotations::EXPIRES_AT);
                let v = annotations.get(annotations::EXPIRES_AT).ok_or_else(|| {
                    bad(
                        keys::AGENT_TOKEN,
                        format!("the tokens carry no exp and {k} is missing: their expiry is unknown"),
                    )
                })?;
                parse_rfc3339(v).ok_or_else(|| bad(&k, format!("{v:?} is not an RFC 3339 time")))?
            }
        };
        Ok(AuthMaterial {
            public_key_pem,
            agent_token,
            user_token,
            watcher_token,
            expires_at,
        })
    }

    /// Reads material from the legacy Secret [`LEGACY_SECRET_NAME`] (earlier agent-day2:
    /// keys `authTokenPublicKey` as raw PEM, the three tokens with `sub`, `expiresAt` as RFC
    /// 3339 data). Checks only that each token verifies with the key: these tokens serve
    /// `monitor` for nodes booted from images made with them, never a new image.
    ///
    /// Errors: [`AuthError::BadSecret`] naming the key.
    pub fn from_legacy_secret_data(data: &BTreeMap<String, Vec<u8>>) -> Result<AuthMaterial, AuthError> {
        let secret = legacy_secret_ref();
        let bad = |key: &str, what: String| AuthError::BadSecret {
            secret: secret.clone(),
            key: key.to_string(),
            what,
        };
        let public_key_pem = public_key_pem_text(&data_str(&secret, data, keys::PUBLIC_KEY, "is missing")?)
            .map_err(|w| bad(keys::PUBLIC_KEY, w))?;
        let agent_token = data_str(&secret, data, keys::AGENT_TOKEN, "is missing")?;
        let user_token = data_str(&secret, data, keys::USER_TOKEN, "is missing")?;
        let watcher_token = data_str(&secret, data, keys::WATCHER_TOKEN, "is missing")?;
        for (key, tok) in [
            (keys::AGENT_TOKEN, &agent_token),
            (keys::USER_TOKEN, &user_token),
            (keys::WATCHER_TOKEN, &watcher_token),
        ] {
            verify_signature(tok, &public_key_pem).map_err(|w| bad(key, w))?;
        }
        let e = data_str(&secret, data, keys::LEGACY_EXPIRES_AT, "is missing")?;
        let expires_at = parse_rfc3339(&e)
            .ok_or_else(|| bad(keys::LEGACY_EXPIRES_AT, format!("{e:?} is not an RFC 3339 time")))?;
        Ok(AuthMaterial {
            public_key_pem,
            agent_token,
            user_token,
            watcher_token,
            expires_at,
        })
    }

    /// Every secret string of this material (the tokens), for redaction.
    pub fn secrets(&self) -> [&str; 3] {
        [&self.agent_token, &self.user_token, &self.watcher_token]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn claims_of(token: &str) -> Value {
        let body = token.split('.').nth(1).unwrap();
        serde_json::from_slice(&URL_SAFE_NO_PAD.decode(body).unwrap()).unwrap()
    }

    fn t(s: &str) -> SystemTime {
        parse_rfc3339(s).unwrap()
    }

    fn bytes(m: BTreeMap<String, String>) -> BTreeMap<String, Vec<u8>> {
        m.into_iter().map(|(k, v)| (k, v.into_bytes())).collect()
    }

    /// A fresh key pair and base64 of its PEM public key.
    fn key() -> (EcdsaKeyPair, String) {
        let rng = SystemRandom::new();
        let pkcs8 = EcdsaKeyPair::generate_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, &rng).unwrap();
        let kp = EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, pkcs8.as_ref(), &rng).unwrap();
        let pem = spki_pem(kp.public_key().as_ref());
        (kp, STANDARD.encode(pem))
    }

    /// Signs `claims` with a fresh key; returns (token, base64 of the PEM public key).
    fn signed(claims: &Value) -> (String, String) {
        let (kp, b64) = key();
        (sign(&kp, claims).unwrap(), b64)
    }

    #[test]
    fn tokens_carry_exactly_auth_scheme_and_exp() {
        let now = t("2026-12-01T10:00:00Z");
        let m = generate(DEFAULT_TTL, now).unwrap();
        assert_eq!(m.expiry_rfc3339(), "2026-12-03T10:00:00Z");
        let exp = unix(now) + 48 * 3600;
        for (tok, scheme) in [
            (&m.agent_token, "agentAuth"),
            (&m.user_token, "userAuth"),
            (&m.watcher_token, "watcherAuth"),
        ] {
            assert_eq!(claims_of(tok), json!({"auth_scheme": scheme, "exp": exp}));
            let head: Value =
                serde_json::from_slice(&URL_SAFE_NO_PAD.decode(tok.split('.').next().unwrap()).unwrap())
                    .unwrap();
            assert_eq!(head, json!({"alg": "ES256", "typ": "JWT"}));
        }
        assert!(
            m.public_key_pem.starts_with("-----BEGIN EC PUBLIC KEY-----\n"),
            "{}",
            m.public_key_pem
        );
        assert!(m.public_key_pem.ends_with("-----END EC PUBLIC KEY-----\n"));
        assert_eq!(pem::parse(&m.public_key_pem).unwrap().contents().len(), 91);
    }

    #[test]
    fn signature_verifies_with_the_base64_pem_key_and_the_raw_pem() {
        let now = t("2026-12-01T10:00:00Z");
        let m = generate(DEFAULT_TTL, now).unwrap();
        let b64 = m.public_key_b64();
        assert_eq!(STANDARD.decode(&b64).unwrap(), m.public_key_pem.as_bytes());
        for key in [b64.as_str(), m.public_key_pem.as_str()] {
            let c = verify_token(&m.user_token, key, SCHEME_USER, now).unwrap();
            assert_eq!(c["auth_scheme"], "userAuth");
        }
        // Another key does not verify it; a changed payload does not verify.
        let other = generate(DEFAULT_TTL, now).unwrap();
        let e = verify_token(&m.user_token, &other.public_key_b64(), SCHEME_USER, now).unwrap_err();
        assert!(e.contains("does not verify"), "{e}");
        let mut parts: Vec<String> = m.agent_token.split('.').map(String::from).collect();
        parts[1] = URL_SAFE_NO_PAD.encode(r#"{"auth_scheme":"userAuth","exp":9999999999}"#);
        assert!(verify_token(&parts.join("."), &b64, SCHEME_USER, now).is_err());
        assert!(verify_token("a.b", &b64, SCHEME_USER, now)
            .unwrap_err()
            .contains("not a JWT"));
    }

    #[test]
    fn verify_token_checks_what_the_service_checks() {
        let now = t("2026-12-01T10:00:00Z");
        let m = generate(Duration::from_secs(3600), now).unwrap();
        let key = m.public_key_b64();
        // The route's scheme must be the token's (authz handler: 403 otherwise).
        let e = verify_token(&m.watcher_token, &key, SCHEME_USER, now).unwrap_err();
        assert_eq!(e, r#"claim auth_scheme is "watcherAuth", expected "userAuth""#);
        // exp: refused at and after it (golang-jwt: valid while now < exp).
        assert!(verify_token(
            &m.agent_token,
            &key,
            SCHEME_AGENT,
            now + Duration::from_secs(3599)
        )
        .is_ok());
        let e = verify_token(
            &m.agent_token,
            &key,
            SCHEME_AGENT,
            now + Duration::from_secs(3600),
        )
        .unwrap_err();
        assert!(e.starts_with("token is expired"), "{e}");
        let exp = unix(now) + 3600;
        // A future iat is refused (the node's clock behind the signer's); a past one is not.
        let (tok, k) = signed(&json!({"auth_scheme": "userAuth", "exp": exp, "iat": unix(now) + 60}));
        let e = verify_token(&tok, &k, SCHEME_USER, now).unwrap_err();
        assert!(e.starts_with("token used before issued"), "{e}");
        assert!(verify_token(&tok, &k, SCHEME_USER, now + Duration::from_secs(60)).is_ok());
        let (tok, k) = signed(&json!({"auth_scheme": "userAuth", "nbf": unix(now) + 1}));
        assert!(verify_token(&tok, &k, SCHEME_USER, now)
            .unwrap_err()
            .contains("not valid yet"));
        // No exp at all is accepted (the install workflow's tokens).
        let (tok, k) = signed(&json!({"auth_scheme": "userAuth"}));
        assert!(verify_token(&tok, &k, SCHEME_USER, now).is_ok());
        // The old claim sub is what the service answers 500 to.
        let (tok, k) = signed(&json!({"sub": "userAuth", "exp": exp}));
        let e = verify_token(&tok, &k, SCHEME_USER, now).unwrap_err();
        assert!(
            e.starts_with("malformed auth_scheme claim: the token has the old claim sub"),
            "{e}"
        );
        let (tok, k) = signed(&json!({"auth_scheme": 7, "exp": exp}));
        assert!(verify_token(&tok, &k, SCHEME_USER, now)
            .unwrap_err()
            .starts_with("malformed auth_scheme claim"));
        let (tok, k) = signed(&json!({"auth_scheme": "", "exp": exp}));
        assert_eq!(
            verify_token(&tok, &k, SCHEME_USER, now).unwrap_err(),
            "claim auth_scheme is empty"
        );
        let (tok, k) = signed(&json!({"auth_scheme": "userAuth", "exp": "tomorrow"}));
        assert!(verify_token(&tok, &k, SCHEME_USER, now)
            .unwrap_err()
            .contains("not a number"));
    }

    #[test]
    fn stored_tokens_with_iat_nbf_or_an_exp_past_year_9999_are_not_reused() {
        // Found by trying to break it: these passed and were embedded, and the real service
        // refuses each (future iat/nbf: 401; exp 1e20: golang-jwt reads a time in the past).
        let (kp, b64) = key();
        let with = |extra: Value| -> BTreeMap<String, Vec<u8>> {
            let mut m: BTreeMap<String, String> = [
                (keys::AGENT_TOKEN, SCHEME_AGENT),
                (keys::USER_TOKEN, SCHEME_USER),
                (keys::WATCHER_TOKEN, SCHEME_WATCHER),
            ]
            .into_iter()
            .map(|(k, sch)| {
                let mut c = json!({"auth_scheme": sch, "exp": 1_800_000_000i64});
                for (ek, ev) in extra.as_object().unwrap() {
                    c[ek] = ev.clone();
                }
                (k.to_string(), sign(&kp, &c).unwrap())
            })
            .collect();
            m.insert(keys::PUBLIC_KEY.into(), b64.clone());
            bytes(m)
        };
        let none = BTreeMap::new();
        assert!(AuthMaterial::from_secret_data(&with(json!({})), &none).is_ok());
        for (extra, want) in [
            (json!({"iat": 1_900_000_000i64}), "carries the claim iat"),
            (json!({"iat": "soon"}), "carries the claim iat"),
            (json!({"nbf": 1_700_000_000i64}), "carries the claim nbf"),
            (json!({"exp": 1e20}), "after 9999-12-31T23:59:59Z"),
            (json!({"exp": 1_000_000_000_000i64}), "after 9999-12-31T23:59:59Z"),
        ] {
            let e = AuthMaterial::from_secret_data(&with(extra.clone()), &none)
                .unwrap_err()
                .to_string();
            assert!(e.contains(want), "{extra}: {e}");
        }
    }

    #[test]
    fn secret_round_trip_and_the_forms_oc_adm_node_image_writes() {
        let now = t("2026-12-01T10:00:00Z");
        let m = generate(DEFAULT_TTL, now).unwrap();
        let data = m.to_secret_data();
        assert_eq!(
            data.keys().collect::<Vec<_>>(),
            [
                "agentAuthToken",
                "authTokenPublicKey",
                "userAuthToken",
                "watcherAuthToken"
            ]
        );
        let ann = m.secret_annotations(now + Duration::from_secs(5));
        assert_eq!(ann["expiresAt"], "2026-12-03T10:00:00Z");
        assert_eq!(ann["updatedAt"], "2026-12-01T10:00:05Z");
        assert_eq!(
            AuthMaterial::from_secret_data(&bytes(data.clone()), &ann).unwrap(),
            m
        );
        // Raw PEM in authTokenPublicKey; no annotations (expiry from the tokens' exp).
        let mut raw = data.clone();
        raw.insert(keys::PUBLIC_KEY.into(), m.public_key_pem.clone());
        let back = AuthMaterial::from_secret_data(&bytes(raw), &BTreeMap::new()).unwrap();
        assert_eq!(back.expires_at, m.expires_at);
        assert_eq!(back.public_key_b64(), m.public_key_b64());
        // The single-token layout is named.
        let mut single = data.clone();
        single.remove(keys::USER_TOKEN);
        single.remove(keys::WATCHER_TOKEN);
        let e = AuthMaterial::from_secret_data(&bytes(single), &ann)
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with("Secret openshift-config/agent-auth-token key userAuthToken: is missing: the Secret has the single-token layout"),
            "{e}"
        );
        // Only the watcher token missing: not called the single-token layout.
        let mut edited = data.clone();
        edited.remove(keys::WATCHER_TOKEN);
        let e = AuthMaterial::from_secret_data(&bytes(edited), &ann)
            .unwrap_err()
            .to_string();
        assert_eq!(
            e,
            "Secret openshift-config/agent-auth-token key watcherAuthToken: is missing while the other tokens are present: the Secret was changed after it was written"
        );
        // A token of another scheme under a key is refused, naming the key.
        let mut swapped = data.clone();
        swapped.insert(keys::WATCHER_TOKEN.into(), m.user_token.clone());
        let e = AuthMaterial::from_secret_data(&bytes(swapped), &ann)
            .unwrap_err()
            .to_string();
        assert_eq!(
            e,
            r#"Secret openshift-config/agent-auth-token key watcherAuthToken: claim auth_scheme is "userAuth", expected "watcherAuth""#
        );
        // Tokens without exp take the expiresAt annotation; without both the expiry is unknown.
        let (kp, b64) = key();
        let no_exp: BTreeMap<String, String> = [
            (keys::AGENT_TOKEN, SCHEME_AGENT),
            (keys::USER_TOKEN, SCHEME_USER),
            (keys::WATCHER_TOKEN, SCHEME_WATCHER),
        ]
        .into_iter()
        .map(|(k, s)| (k.to_string(), sign(&kp, &json!({"auth_scheme": s})).unwrap()))
        .chain([(keys::PUBLIC_KEY.to_string(), b64)])
        .collect();
        let back = AuthMaterial::from_secret_data(&bytes(no_exp.clone()), &ann).unwrap();
        assert_eq!(back.expiry_rfc3339(), "2026-12-03T10:00:00Z");
        let e = AuthMaterial::from_secret_data(&bytes(no_exp), &BTreeMap::new())
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("carry no exp and metadata.annotations.expiresAt is missing"),
            "{e}"
        );
        // Tokens of different expiry: the earliest counts.
        let mut mixed = tokens_with_exp(&kp, &[4102444800, 4102441200, 4102444800]);
        mixed.insert(
            keys::PUBLIC_KEY.into(),
            STANDARD.encode(spki_pem(kp.public_key().as_ref())),
        );
        let back = AuthMaterial::from_secret_data(&bytes(mixed), &BTreeMap::new()).unwrap();
        assert_eq!(unix(back.expires_at), 4102441200);
        // A token signed by another key is refused, naming the key.
        let mut foreign = data.clone();
        foreign.insert(
            keys::AGENT_TOKEN.into(),
            generate(DEFAULT_TTL, now).unwrap().agent_token,
        );
        let e = AuthMaterial::from_secret_data(&bytes(foreign), &ann)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("key agentAuthToken: JWT signature does not verify"),
            "{e}"
        );
    }

    /// The three tokens signed by `kp` with the given `exp`s (agent, user, watcher).
    fn tokens_with_exp(kp: &EcdsaKeyPair, exps: &[i64; 3]) -> BTreeMap<String, String> {
        [
            (keys::AGENT_TOKEN, SCHEME_AGENT, exps[0]),
            (keys::USER_TOKEN, SCHEME_USER, exps[1]),
            (keys::WATCHER_TOKEN, SCHEME_WATCHER, exps[2]),
        ]
        .into_iter()
        .map(|(k, s, e)| {
            (
                k.to_string(),
                sign(kp, &json!({"auth_scheme": s, "exp": e})).unwrap(),
            )
        })
        .collect()
    }

    #[test]
    fn legacy_secret_is_read_for_monitor() {
        let (tok, key_b64) = signed(&json!({"sub": "watcherAuth", "iat": 1, "exp": 4102444800i64}));
        let pem = String::from_utf8(STANDARD.decode(&key_b64).unwrap()).unwrap();
        let data: BTreeMap<String, Vec<u8>> = [
            ("authTokenPublicKey", pem.clone()),
            (
                "authTokenPrivateKey",
                "-----BEGIN PRIVATE KEY-----\nx\n-----END PRIVATE KEY-----\n".into(),
            ),
            ("agentAuthToken", tok.clone()),
            ("userAuthToken", tok.clone()),
            ("watcherAuthToken", tok.clone()),
            ("issuedAt", "2026-11-30T10:00:00Z".into()),
            ("expiresAt", "2026-12-02T10:00:00Z".into()),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.into_bytes()))
        .collect();
        let m = AuthMaterial::from_legacy_secret_data(&data).unwrap();
        assert_eq!(m.expiry_rfc3339(), "2026-12-02T10:00:00Z");
        assert_eq!(m.watcher_token, tok);
        // The same data is not accepted as the new Secret: its tokens carry sub.
        let e = AuthMaterial::from_secret_data(&data, &BTreeMap::new())
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("key agentAuthToken: malformed auth_scheme claim: the token has the old claim sub"),
            "{e}"
        );
        let mut missing = data.clone();
        missing.remove("expiresAt");
        assert_eq!(
            AuthMaterial::from_legacy_secret_data(&missing)
                .unwrap_err()
                .to_string(),
            "Secret openshift-agent-day2/agent-day2-auth key expiresAt: is missing"
        );
    }

    #[test]
    fn debug_redacts_the_tokens() {
        let m = generate(DEFAULT_TTL, SystemTime::now()).unwrap();
        let d = format!("{m:?}");
        for s in m.secrets() {
            assert!(!d.contains(s));
        }
        assert!(d.contains("EC PUBLIC KEY"));
    }
}
