//! ES256 JSON Web Tokens and how the node's local assisted-service judges them.
//!
//! Written from assisted-service @ 063b257950f7 (`AUTH_TYPE=agent-installer-local`), not from
//! the plugin's token code:
//! - `pkg/auth/agent_local_authenticator.go`: `EC_PUBLIC_KEY_PEM` is base64 of a PEM text, read
//!   with `jwt.ParseECPublicKeyFromPEM` (the first PEM block, PKIX inside, block type not
//!   checked); each scheme's authenticator is go-openapi `security.APIKeyAuth` (the header's
//!   whole value, no `Bearer ` stripping); `authenticateToken` calls `validateToken`
//!   (`local_authenticator.go`: golang-jwt v4.5.2 `Parser{ValidMethods: ES256}.Parse`) and
//!   answers 401 `infra_error` `Failed to parse token: <golang-jwt's reason>\n`; a numeric
//!   `exp` before now (only reachable with `exp: 0`) is 401 "The provided authentication token
//!   has expired. ...".
//! - golang-jwt v4 `MapClaims.Valid`: `exp`, `iat`, `nbf` are checked when present (a present
//!   one that is no number fails; a number 0 counts as absent); valid while now < exp, now >=
//!   iat, now >= nbf, in whole seconds; the last failing check names the reason.
//! - `pkg/auth/agent_local_authz_handler.go`: for the route's scheme that authenticated, claim
//!   `auth_scheme` not a string → 500 swagger `error` "malformed auth_scheme claim"; empty →
//!   400 "token missing authClaim or endpoint is missing authScheme"; another scheme → 403
//!   `infra_error` "authClaim <claim> is unauthorized to access".
//! - go-openapi `RouteAuthenticators.Authenticate`: the route's schemes are tried in swagger
//!   order; one whose header is absent or empty does not apply, one that fails to authenticate
//!   is skipped (its error kept); the first that authenticates is the one authorized; none
//!   applied → 401 "unauthenticated for invalid credentials", else the last error.
//!
//! Measured: the real assisted-service binary built from 063b257950f7 (scripts/real-components.sh),
//! started with `AUTH_TYPE=agent-installer-local`, answers the cases of the tests below (a
//! token with `sub` and no `auth_scheme`, `Bearer `, a future `iat`, an expired one, `exp: 0`,
//! an empty `auth_scheme`, another key, a watcher token under `Authorization`, no header, the
//! logs with only a watcher header, a bad user header beside a good watcher one) with exactly
//! these status codes and bodies.
//!
//! [`sign`] exists for tests that build tokens.

use base64::alphabet;
use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use base64::engine::{DecodePaddingMode, GeneralPurpose, GeneralPurposeConfig};
use base64::Engine;
use serde_json::{json, Map, Value};
use x509_parser::prelude::FromDer;

/// The uncompressed P-256 point of an EC public key given as PEM or as base64 of the PEM (the
/// service decodes the base64, then takes the first PEM block whatever its type, PKIX inside).
/// Errors say which form was expected.
pub fn public_key(pem_or_b64: &str) -> Result<Vec<u8>, String> {
    let pem = if pem_or_b64.contains("-----BEGIN") {
        pem_or_b64.replace("\\n", "\n")
    } else {
        let raw = STANDARD
            .decode(pem_or_b64.trim())
            .map_err(|_| "is neither a PEM public key nor base64 of one".to_string())?;
        String::from_utf8(raw).map_err(|_| "base64 does not hold a PEM text".to_string())?
    };
    let body: String = pem
        .lines()
        .map(str::trim)
        .skip_while(|l| !(l.starts_with("-----BEGIN ") && l.ends_with("-----")))
        .skip(1)
        .take_while(|l| !l.starts_with("-----END"))
        .collect();
    if body.is_empty() {
        return Err("holds no -----BEGIN ...----- PEM block".into());
    }
    let der = STANDARD
        .decode(body)
        .map_err(|e| format!("PEM body is not base64: {e}"))?;
    let (_, spki) = x509_parser::x509::SubjectPublicKeyInfo::from_der(&der)
        .map_err(|e| format!("not a PKIX public key (SubjectPublicKeyInfo): {e}"))?;
    // id-ecPublicKey with prime256v1.
    if spki.algorithm.algorithm.to_id_string() != "1.2.840.10045.2.1" {
        return Err(format!(
            "key algorithm {} is not EC",
            spki.algorithm.algorithm.to_id_string()
        ));
    }
    let curve = spki
        .algorithm
        .parameters
        .as_ref()
        .and_then(|p| p.as_oid().ok())
        .map(|o| o.to_id_string());
    if curve.as_deref() != Some("1.2.840.10045.3.1.7") {
        return Err(format!("EC curve {curve:?} is not P-256 (ES256 needs P-256)"));
    }
    Ok(spki.subject_public_key.data.to_vec())
}

/// Verifies `token` (ES256, signature over `header.payload`) with the P-256 point `key` and
/// returns its claims. Checks no claim (see [`authenticate`] for what the service checks).
pub fn verify(token: &str, key: &[u8]) -> Result<Map<String, Value>, String> {
    let parts: Vec<&str> = token.trim().split('.').collect();
    if parts.len() != 3 {
        return Err("is not a JWT (header.payload.signature)".into());
    }
    let header: Value = URL_SAFE_NO_PAD
        .decode(parts[0])
        .ok()
        .and_then(|b| serde_json::from_slice(&b).ok())
        .ok_or("JWT header is not base64url JSON")?;
    if header.get("alg").and_then(|a| a.as_str()) != Some("ES256") {
        return Err(format!(
            "JWT alg is {:?}; assisted-service accepts only ES256",
            header.get("alg")
        ));
    }
    let sig = URL_SAFE_NO_PAD
        .decode(parts[2])
        .map_err(|_| "JWT signature is not base64url")?;
    let msg = format!("{}.{}", parts[0], parts[1]);
    ring::signature::UnparsedPublicKey::new(&ring::signature::ECDSA_P256_SHA256_FIXED, key)
        .verify(msg.as_bytes(), &sig)
        .map_err(|_| "JWT signature does not verify with EC_PUBLIC_KEY_PEM".to_string())?;
    let claims: Map<String, Value> = URL_SAFE_NO_PAD
        .decode(parts[1])
        .ok()
        .and_then(|b| serde_json::from_slice(&b).ok())
        .ok_or("JWT payload is not base64url JSON")?;
    Ok(claims)
}

/// `exp` of a JWT's claims in Unix seconds, if any (not verified).
pub fn expiry(token: &str) -> Option<i64> {
    let payload = token.split('.').nth(1)?;
    let v: Value = serde_json::from_slice(&URL_SAFE_NO_PAD.decode(payload).ok()?).ok()?;
    v.get("exp").and_then(|e| e.as_i64())
}

/// Signs `claims` with a P-256 key in PKCS#8 DER (e.g. `rcgen::KeyPair::serialize_der`).
pub fn sign(claims: &Value, pkcs8: &[u8]) -> Result<String, String> {
    let rng = ring::rand::SystemRandom::new();
    let kp = ring::signature::EcdsaKeyPair::from_pkcs8(
        &ring::signature::ECDSA_P256_SHA256_FIXED_SIGNING,
        pkcs8,
        &rng,
    )
    .map_err(|e| format!("not a P-256 PKCS#8 key: {e}"))?;
    let head = URL_SAFE_NO_PAD.encode(br#"{"alg":"ES256","typ":"JWT"}"#);
    let body = URL_SAFE_NO_PAD.encode(claims.to_string());
    let msg = format!("{head}.{body}");
    let sig = kp
        .sign(&rng, msg.as_bytes())
        .map_err(|e| format!("signing: {e}"))?;
    Ok(format!("{msg}.{}", URL_SAFE_NO_PAD.encode(sig.as_ref())))
}

/// A request the service refuses: the status and the body it answers with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    /// 401, 403, 400 or 500.
    pub status: u16,
    /// The swagger model of the body: `infra_error` (`{code: int, message}`) for the
    /// authenticator's refusals and the 403, `error` (`{code: "500", reason, ...}`) for the
    /// authorizer's 400/500.
    pub infra: bool,
    /// `message` / `reason`.
    pub text: String,
}

impl Refusal {
    fn infra(status: u16, text: impl Into<String>) -> Refusal {
        Refusal {
            status,
            infra: true,
            text: text.into(),
        }
    }

    fn error(status: u16, text: impl Into<String>) -> Refusal {
        Refusal {
            status,
            infra: false,
            text: text.into(),
        }
    }

    /// The JSON body (`models.InfraError` or `models.Error`, as `internal/common/error_utils.go`
    /// writes them).
    pub fn body(&self) -> Value {
        if self.infra {
            json!({"code": self.status, "message": self.text})
        } else {
            json!({"code": self.status.to_string(), "href": "", "id": self.status, "kind": "Error", "reason": self.text})
        }
    }
}

/// base64url without padding as Go's `base64.RawURLEncoding` decodes it (golang-jwt v4
/// `DecodeSegment`): `\r` and `\n` are skipped, trailing bits need not be zero.
fn decode_segment(seg: &str) -> Result<Vec<u8>, String> {
    const GO_RAW_URL: GeneralPurpose = GeneralPurpose::new(
        &alphabet::URL_SAFE,
        GeneralPurposeConfig::new()
            .with_decode_padding_mode(DecodePaddingMode::RequireNone)
            .with_decode_allow_trailing_bits(true),
    );
    let clean: String = seg.chars().filter(|c| *c != '\r' && *c != '\n').collect();
    GO_RAW_URL.decode(&clean).map_err(|_| {
        let at = clean
            .bytes()
            .position(|b| !(b.is_ascii_alphanumeric() || b == b'-' || b == b'_'))
            .unwrap_or(clean.len());
        format!("illegal base64 data at input byte {at}")
    })
}

/// Signing methods golang-jwt v4 registers (`signing_method.go` users: hmac, rsa, rsa_pss,
/// ecdsa, ed25519, none).
const KNOWN_ALGS: &[&str] = &[
    "HS256", "HS384", "HS512", "RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384",
    "ES512", "EdDSA", "none",
];

/// golang-jwt v4 `Parser.Parse` with `ValidMethods: [ES256]` and `MapClaims`: the reason it
/// refuses `token` (its error text), or the claims.
fn parse(token: &str, key: &[u8], now: i64) -> Result<Map<String, Value>, String> {
    let parts: Vec<&str> = token.splitn(4, '.').collect();
    if parts.len() != 3 {
        return Err("token contains an invalid number of segments".into());
    }
    let head = decode_segment(parts[0]).map_err(|e| {
        if token.to_ascii_lowercase().starts_with("bearer ") {
            "tokenstring should not contain 'bearer '".to_string()
        } else {
            e
        }
    })?;
    let header: Map<String, Value> = serde_json::from_slice(&head).map_err(|e| e.to_string())?;
    let claims: Map<String, Value> =
        serde_json::from_slice(&decode_segment(parts[1])?).map_err(|e| e.to_string())?;
    let alg = match header.get("alg") {
        Some(Value::String(a)) => a.as_str(),
        _ => return Err("signing method (alg) is unspecified.".into()),
    };
    if !KNOWN_ALGS.contains(&alg) {
        return Err("signing method (alg) is unavailable.".into());
    }
    if alg != "ES256" {
        return Err(format!("signing method {alg} is invalid"));
    }
    let sig = decode_segment(parts[2])?;
    let msg = format!("{}.{}", parts[0], parts[1]);
    ring::signature::UnparsedPublicKey::new(&ring::signature::ECDSA_P256_SHA256_FIXED, key)
        .verify(msg.as_bytes(), &sig)
        .map_err(|_| "crypto/ecdsa: verification error".to_string())?;
    // MapClaims.Valid: a present time claim must be a number (0 counts as absent); the last
    // failing check is the one said.
    let fails = |k: &str, bad: &dyn Fn(i64) -> bool| match claims.get(k) {
        None => false,
        Some(v) => match v.as_f64() {
            Some(0.0) => false,
            Some(t) => bad(t.trunc() as i64),
            None => true,
        },
    };
    let mut reason = None;
    if fails("exp", &|t| now >= t) {
        reason = Some("Token is expired");
    }
    if fails("iat", &|t| now < t) {
        reason = Some("Token used before issued");
    }
    if fails("nbf", &|t| now < t) {
        reason = Some("Token is not valid yet");
    }
    match reason {
        Some(r) => Err(r.into()),
        None => Ok(claims),
    }
}

/// The authenticator of one scheme (`AgentLocalAuthenticator.AuthAgentAuth` / `AuthUserAuth` /
/// `AuthWatcherAuth`, all `authenticateToken`) on the header's raw value at Unix second `now`:
/// `Ok(None)` when it does not apply (header absent, or empty once trimmed as Go's header
/// parsing trims it), `Ok(Some(claims))` when the token is valid, else the 401.
pub fn authenticate(
    value: Option<&[u8]>,
    key: &[u8],
    now: i64,
) -> Result<Option<Map<String, Value>>, Refusal> {
    let token = value
        .map(|v| {
            String::from_utf8_lossy(v)
                .trim_matches(|c| c == ' ' || c == '\t')
                .to_string()
        })
        .unwrap_or_default();
    if token.is_empty() {
        return Ok(None);
    }
    let claims =
        parse(&token, key, now).map_err(|r| Refusal::infra(401, format!("Failed to parse token: {r}\n")))?;
    if let Some(exp) = claims.get("exp").and_then(Value::as_f64) {
        if (exp.trunc() as i64) < now {
            return Err(Refusal::infra(
                401,
                "The provided authentication token has expired. Please generate a new token and try again.",
            ));
        }
    }
    Ok(Some(claims))
}

/// The authorizer (`agentInstallerAuthorizer`) for a request authenticated by route scheme
/// `scheme` (`agentAuth`, `userAuth`, `watcherAuth`) with `claims`.
pub fn authorize(claims: &Map<String, Value>, scheme: &str) -> Result<(), Refusal> {
    let claim = match claims.get("auth_scheme") {
        Some(Value::String(s)) => s.as_str(),
        _ => return Err(Refusal::error(500, "malformed auth_scheme claim")),
    };
    if claim.is_empty() || scheme.is_empty() {
        return Err(Refusal::error(
            400,
            "token missing authClaim or endpoint is missing authScheme",
        ));
    }
    if claim != scheme {
        return Err(Refusal::infra(
            403,
            format!("authClaim {claim} is unauthorized to access"),
        ));
    }
    Ok(())
}

/// A whole request's judgement on a route whose swagger `security` lists `schemes` in order,
/// each `(scheme name, the request's value of its header)`: see the module doc
/// (go-openapi `RouteAuthenticators`). `Ok` carries the scheme that let it through.
pub fn judge<'a>(schemes: &[(&'a str, Option<&[u8]>)], key: &[u8], now: i64) -> Result<&'a str, Refusal> {
    let mut last = None;
    for (scheme, value) in schemes {
        match authenticate(*value, key, now) {
            Ok(None) => {}
            Ok(Some(claims)) => return authorize(&claims, scheme).map(|()| *scheme),
            Err(r) => last = Some(r),
        }
    }
    Err(last.unwrap_or_else(|| Refusal::infra(401, "unauthenticated for invalid credentials")))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key() -> (rcgen::KeyPair, Vec<u8>) {
        let k = rcgen::KeyPair::generate().unwrap();
        let point = public_key(&k.public_key_pem()).unwrap();
        (k, point)
    }

    #[test]
    fn sign_verify_pem_and_base64_forms() {
        let (k, key) = key();
        let pem = k.public_key_pem();
        let tok = sign(
            &json!({"auth_scheme": "watcherAuth", "exp": 4102444800i64}),
            &k.serialize_der(),
        )
        .unwrap();
        assert_eq!(verify(&tok, &key).unwrap()["auth_scheme"], "watcherAuth");
        assert_eq!(public_key(&STANDARD.encode(&pem)).unwrap(), key);
        // The installer's block type `EC PUBLIC KEY` around the same PKIX bytes is read too
        // (jwt.ParseECPublicKeyFromPEM does not look at the type).
        let ec = pem
            .replace("BEGIN PUBLIC KEY", "BEGIN EC PUBLIC KEY")
            .replace("END PUBLIC KEY", "END EC PUBLIC KEY");
        assert_eq!(public_key(&STANDARD.encode(&ec)).unwrap(), key);
        assert_eq!(expiry(&tok), Some(4102444800));
        // Another key does not verify it; a changed payload does not verify.
        let (_, other) = self::key();
        assert!(verify(&tok, &other).unwrap_err().contains("does not verify"));
        let mut parts: Vec<String> = tok.split('.').map(String::from).collect();
        parts[1] = URL_SAFE_NO_PAD.encode(r#"{"auth_scheme":"userAuth"}"#);
        assert!(verify(&parts.join("."), &key).is_err());
        assert!(public_key("not a key!").is_err());
    }

    /// Status codes and texts of `agent_local_authenticator.go` / `agent_local_authz_handler.go`
    /// (and golang-jwt v4.5.2's reasons inside the 401s).
    #[test]
    fn refusals_are_the_services() {
        let (k, key) = key();
        let now = 1_800_000_000i64;
        let tok = |c: Value| sign(&c, &k.serialize_der()).unwrap();
        let user = |t: &str| judge(&[("userAuth", Some(t.as_bytes()))], &key, now);
        let r = |status: u16, infra: bool, text: &str| Refusal {
            status,
            infra,
            text: text.into(),
        };
        assert_eq!(
            user(&tok(json!({"auth_scheme": "userAuth", "exp": now + 1}))),
            Ok("userAuth")
        );
        // The claim the plugin used to sign: no auth_scheme → 500 swagger error.
        let sub = tok(json!({"sub": "userAuth", "exp": now + 60}));
        let e = user(&sub).unwrap_err();
        assert_eq!(e, r(500, false, "malformed auth_scheme claim"));
        assert_eq!(
            e.body(),
            json!({"code": "500", "href": "", "id": 500, "kind": "Error", "reason": "malformed auth_scheme claim"})
        );
        assert_eq!(
            user(&tok(json!({"auth_scheme": ""}))).unwrap_err(),
            r(
                400,
                false,
                "token missing authClaim or endpoint is missing authScheme"
            )
        );
        let e = user(&tok(json!({"auth_scheme": "watcherAuth"}))).unwrap_err();
        assert_eq!(e, r(403, true, "authClaim watcherAuth is unauthorized to access"));
        assert_eq!(
            e.body(),
            json!({"code": 403, "message": "authClaim watcherAuth is unauthorized to access"})
        );
        // Expired, future iat (the node's clock behind the signer's), future nbf: 401.
        let good = tok(json!({"auth_scheme": "userAuth"}));
        assert_eq!(
            user(&tok(json!({"auth_scheme": "userAuth", "exp": now}))).unwrap_err(),
            r(401, true, "Failed to parse token: Token is expired\n")
        );
        assert_eq!(
            user(&tok(json!({"auth_scheme": "userAuth", "iat": now + 60}))).unwrap_err(),
            r(401, true, "Failed to parse token: Token used before issued\n")
        );
        assert_eq!(
            user(&tok(json!({"auth_scheme": "userAuth", "iat": now}))),
            Ok("userAuth")
        );
        assert_eq!(
            user(&tok(
                json!({"auth_scheme": "userAuth", "exp": now - 1, "nbf": now + 1})
            ))
            .unwrap_err(),
            r(401, true, "Failed to parse token: Token is not valid yet\n")
        );
        assert_eq!(
            user(&tok(json!({"auth_scheme": "userAuth", "exp": "later"})))
                .unwrap_err()
                .text,
            "Failed to parse token: Token is expired\n"
        );
        // exp 0 passes golang-jwt (absent) but not the authenticator's own check.
        assert_eq!(
            user(&tok(json!({"auth_scheme": "userAuth", "exp": 0}))).unwrap_err(),
            r(
                401,
                true,
                "The provided authentication token has expired. Please generate a new token and try again."
            )
        );
        // Another key's signature; a changed payload.
        let (k2, _) = self::key();
        let foreign = sign(&json!({"auth_scheme": "userAuth"}), &k2.serialize_der()).unwrap();
        assert_eq!(
            user(&foreign).unwrap_err(),
            r(
                401,
                true,
                "Failed to parse token: crypto/ecdsa: verification error\n"
            )
        );
        // A `Bearer ` prefix is not stripped: golang-jwt refuses it (any case).
        assert_eq!(
            user(&format!("Bearer {good}")).unwrap_err(),
            r(
                401,
                true,
                "Failed to parse token: tokenstring should not contain 'bearer '\n"
            )
        );
        assert_eq!(user(&format!("bEaReR {good}")).unwrap_err().status, 401);
        // Surrounding blanks are trimmed (Go's header parsing); blank is no header.
        assert_eq!(user(&format!(" \t{good} ")), Ok("userAuth"));
        assert_eq!(
            user("  ").unwrap_err(),
            r(401, true, "unauthenticated for invalid credentials")
        );
        assert_eq!(
            user("abc").unwrap_err().text,
            "Failed to parse token: token contains an invalid number of segments\n"
        );
        // Another algorithm.
        let parts: Vec<&str> = good.split('.').collect();
        let hs = format!(
            "{}.{}.{}",
            URL_SAFE_NO_PAD.encode(r#"{"alg":"HS256"}"#),
            parts[1],
            parts[2]
        );
        assert_eq!(
            user(&hs).unwrap_err().text,
            "Failed to parse token: signing method HS256 is invalid\n"
        );
        let xx = format!(
            "{}.{}.{}",
            URL_SAFE_NO_PAD.encode(r#"{"alg":"XX1"}"#),
            parts[1],
            parts[2]
        );
        assert_eq!(
            user(&xx).unwrap_err().text,
            "Failed to parse token: signing method (alg) is unavailable.\n"
        );
    }

    #[test]
    fn routes_with_several_schemes() {
        let (k, key) = key();
        let now = 1_800_000_000i64;
        let tok = |s: &str| sign(&json!({"auth_scheme": s}), &k.serialize_der()).unwrap();
        let (u, w) = (tok("userAuth"), tok("watcherAuth"));
        // GET /clusters: userAuth, then watcherAuth.
        let both = |user: Option<&str>, watcher: Option<&str>| {
            judge(
                &[
                    ("userAuth", user.map(str::as_bytes)),
                    ("watcherAuth", watcher.map(str::as_bytes)),
                ],
                &key,
                now,
            )
        };
        assert_eq!(both(None, Some(&w)), Ok("watcherAuth"));
        assert_eq!(both(Some(&u), Some(&w)), Ok("userAuth"));
        // A failing first scheme is skipped; the next one lets it through.
        assert_eq!(both(Some("garbage"), Some(&w)), Ok("watcherAuth"));
        // The first that authenticates is the one authorized: the watcher's token under
        // Authorization is 403 even with a good Watcher-Authorization.
        assert_eq!(both(Some(&w), Some(&w)).unwrap_err().status, 403);
        // All fail: the last error.
        assert_eq!(
            both(Some("garbage"), Some("x.y")).unwrap_err().text,
            "Failed to parse token: token contains an invalid number of segments\n"
        );
        assert_eq!(
            both(None, None).unwrap_err().text,
            "unauthenticated for invalid credentials"
        );
    }
}
