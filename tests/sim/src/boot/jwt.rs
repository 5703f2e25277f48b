//! ES256 JSON Web Tokens, as the agent installer signs them for the local assisted-service
//! (assisted-service `pkg/auth/agent_local_authenticator.go`: ES256 only, key from
//! `EC_PUBLIC_KEY_PEM`, which the agent installer base64-encodes to keep it on one line).
//!
//! [`sign`] exists for tests that build a contract-satisfying Ignition.

use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use base64::Engine;
use serde_json::{Map, Value};
use x509_parser::prelude::FromDer;

/// The uncompressed P-256 point of an EC public key given as PEM (`PUBLIC KEY`, SPKI) or as
/// base64 of that PEM. Errors say which form was expected.
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
        .skip_while(|l| !l.starts_with("-----BEGIN PUBLIC KEY-----"))
        .skip(1)
        .take_while(|l| !l.starts_with("-----END"))
        .collect();
    if body.is_empty() {
        return Err("holds no -----BEGIN PUBLIC KEY----- block".into());
    }
    let der = STANDARD
        .decode(body)
        .map_err(|e| format!("PEM body is not base64: {e}"))?;
    let (_, spki) = x509_parser::x509::SubjectPublicKeyInfo::from_der(&der)
        .map_err(|e| format!("not a SubjectPublicKeyInfo: {e}"))?;
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
/// checks `exp` if present. Returns the claims.
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sign_verify_pem_and_base64_forms() {
        let k = rcgen::KeyPair::generate().unwrap();
        let pem = k.public_key_pem();
        let tok = sign(
            &serde_json::json!({"sub": "watcherAuth", "exp": 4102444800i64}),
            &k.serialize_der(),
        )
        .unwrap();
        let key = public_key(&pem).unwrap();
        assert_eq!(verify(&tok, &key).unwrap()["sub"], "watcherAuth");
        assert_eq!(public_key(&STANDARD.encode(&pem)).unwrap(), key);
        assert_eq!(expiry(&tok), Some(4102444800));
        // Another key does not verify it; a changed payload does not verify.
        let other = public_key(&rcgen::KeyPair::generate().unwrap().public_key_pem()).unwrap();
        assert!(verify(&tok, &other).unwrap_err().contains("does not verify"));
        let mut parts: Vec<String> = tok.split('.').map(String::from).collect();
        parts[1] = URL_SAFE_NO_PAD.encode(r#"{"sub":"userAuth"}"#);
        assert!(verify(&parts.join("."), &key).is_err());
        assert!(public_key("not a key!").is_err());
    }
}
