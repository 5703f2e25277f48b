//! Strict parsing of `spec.request`: PEM → DER → PKCS#10 (RFC 2986), stricter than Go.
//!
//! x509-parser does the structure, the subject and the signature; the attributes, the
//! requested extensions and the SubjectAltName are walked here from the DER, because
//! x509-parser only exposes the *first* ExtensionRequest attribute and the first value of
//! its SET (Go merges every value it finds), and neither reports duplicates
//! (docs/approve.md "Verifying kubelet CSRs", "Parsing, stricter than Go's"). asn1-rs 0.7 (under
//! x509-parser) also accepts BER lengths (rusticata/asn1-rs#149), non-minimal OIDs (#150) and
//! any primitive TLV where an OID belongs, so [`parse_request`] re-walks the DER strictly.

use base64::Engine;
use x509_parser::asn1_rs::{Any, Class, FromDer, Oid, Tag};
use x509_parser::certification_request::X509CertificationRequest;
use x509_parser::oid_registry::{
    OID_EC_P256, OID_KEY_TYPE_EC_PUBLIC_KEY, OID_NIST_EC_P384, OID_PKCS1_RSAENCRYPTION,
    OID_PKCS1_SHA1WITHRSA, OID_PKCS1_SHA256WITHRSA, OID_PKCS1_SHA384WITHRSA, OID_PKCS1_SHA512WITHRSA,
    OID_PKCS9_CHALLENGE_PASSWORD, OID_PKCS9_EXTENSION_REQUEST, OID_SIG_ECDSA_WITH_SHA256,
    OID_SIG_ECDSA_WITH_SHA384, OID_SIG_ED25519, OID_X509_COMMON_NAME, OID_X509_EXT_SUBJECT_ALT_NAME,
    OID_X509_ORGANIZATION_NAME,
};
use x509_parser::public_key::PublicKey;

use super::reason::Reason;

const PEM_LABEL: &str = "CERTIFICATE REQUEST";
/// RSA modulus sizes accepted (bits); ring's PKCS#1 verifiers accept 2048–8192 too.
const RSA_MIN_BITS: usize = 2048;
const RSA_MAX_BITS: usize = 8192;

/// The public key of the request, as far as the allow-list cares.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KeyKind {
    /// ECDSA on NIST P-256.
    EcP256,
    /// ECDSA on NIST P-384.
    EcP384,
    /// RSA with the modulus size in bits.
    Rsa(usize),
    /// Anything else, described for the operator (`Ed25519`, `EC on curve 1.3.132.0.35`).
    Other(String),
}

/// The signature algorithm of the request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SigKind {
    /// ecdsa-with-SHA256.
    EcdsaSha256,
    /// ecdsa-with-SHA384.
    EcdsaSha384,
    /// sha256/384/512WithRSAEncryption (PKCS#1 v1.5), with the hash size in bits.
    RsaPkcs1(u16),
    /// Anything else, by name or dotted OID (`sha1WithRSAEncryption`, `Ed25519`).
    Other(String),
}

/// One SubjectAltName entry (RFC 5280 GeneralName).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum San {
    /// dNSName, raw bytes as text (non-ASCII bytes replaced, flagged by `ascii == false`).
    Dns { name: String, ascii: bool },
    /// iPAddress, raw octets (any length; the checks want 4 or 16).
    Ip(Vec<u8>),
    /// rfc822Name.
    Email(String),
    /// uniformResourceIdentifier.
    Uri(String),
    /// Any other GeneralName kind, by name (`otherName`, `directoryName`, …).
    Other(&'static str),
}

impl std::fmt::Display for San {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            San::Dns { name, .. } => write!(f, "DNS:{}", super::basics::esc(name)),
            San::Ip(b) => match ip_of(b) {
                Some(ip) => write!(f, "IP:{ip}"),
                None => write!(
                    f,
                    "IP:<{} bytes: {}>",
                    b.len(),
                    hex::encode(&b[..b.len().min(20)])
                ),
            },
            San::Email(s) => write!(f, "email:{}", super::basics::esc(s)),
            San::Uri(s) => write!(f, "URI:{}", super::basics::esc(s)),
            San::Other(k) => write!(f, "{k}"),
        }
    }
}

/// Raw IP SAN octets as an address, when they are 4 or 16 bytes long.
pub fn ip_of(b: &[u8]) -> Option<std::net::IpAddr> {
    match b.len() {
        4 => Some(std::net::IpAddr::from(<[u8; 4]>::try_from(b).ok()?)),
        16 => Some(std::net::IpAddr::from(<[u8; 16]>::try_from(b).ok()?)),
        _ => None,
    }
}

/// One requested extension, from every value of every ExtensionRequest attribute.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestedExtension {
    /// Dotted OID.
    pub oid: String,
    /// The critical flag.
    pub critical: bool,
}

impl RequestedExtension {
    /// A readable name for the extension (`subjectAltName`, `basicConstraints`, or the OID).
    pub fn name(&self) -> String {
        oid_name(&self.oid)
            .map(str::to_string)
            .unwrap_or_else(|| self.oid.clone())
    }
}

/// What the checks need from a parsed request. Produced by [`parse_request`].
#[derive(Debug, Clone, Default)]
pub struct ParsedRequest {
    /// The SubjectPublicKeyInfo DER: tells a kubelet's retries (same key) from a rival's.
    pub spki: Vec<u8>,
    /// Every CN value, in order (Go keeps the last one; we reject more than one).
    pub common_names: Vec<String>,
    /// Every O value, in order.
    pub organizations: Vec<String>,
    /// Other subject attributes as `name=value` (shown escaped).
    pub other_subject: Vec<String>,
    /// True when some RDN holds more than one attribute.
    pub multi_valued_rdn: bool,
    /// Dotted OIDs of the attributes, in order (duplicates kept).
    pub attributes: Vec<String>,
    /// Requested extensions, in order (duplicates kept).
    pub extensions: Vec<RequestedExtension>,
    /// SAN entries of every SAN extension.
    pub sans: Vec<San>,
}

/// Parses the PEM in `spec.request` strictly and checks the crypto. Returns what could be read
/// (None when the PEM or the DER structure is unusable) and every problem found, in order.
/// Never panics, whatever the input.
pub fn parse_request(pem: &[u8]) -> (Option<ParsedRequest>, Vec<Reason>) {
    let mut reasons = Vec::new();
    let der = match pem_to_der(pem) {
        Ok(d) => d,
        Err(problem) => {
            reasons.push(Reason::Pem { problem });
            return (None, reasons);
        }
    };
    let (rest, req) = match X509CertificationRequest::from_der(&der) {
        Ok(v) => v,
        Err(e) => {
            reasons.push(Reason::DerInvalid {
                detail: e.to_string(),
            });
            return (None, reasons);
        }
    };
    if !rest.is_empty() {
        reasons.push(Reason::DerTrailing { bytes: rest.len() });
    }
    let parsed_der = &der[..der.len() - rest.len()];
    if let Err(detail) = strict_der(parsed_der, 0).and_then(|_| check_structure(parsed_der)) {
        reasons.push(Reason::DerInvalid { detail });
    }
    let info = &req.certification_request_info;
    if info.version.0 != 0 {
        reasons.push(Reason::Version {
            version: info.version.0,
        });
    }

    // Algorithms first (the allow-list), then the signature itself: a SHA-1 or RSA-1024
    // signature can verify and still be refused.
    let key = key_kind(&req);
    let sig = sig_kind(&req);
    check_algorithms(&key, &sig, &mut reasons);
    if let Err(e) = req.verify_signature() {
        reasons.push(Reason::SignatureInvalid {
            detail: e.to_string(),
        });
    }

    let mut out = ParsedRequest {
        spki: info.subject_pki.raw.to_vec(),
        ..ParsedRequest::default()
    };
    for rdn in info.subject.iter_rdn() {
        if rdn.iter().count() != 1 {
            out.multi_valued_rdn = true;
        }
        for atv in rdn.iter() {
            let value = match atv.as_str() {
                Ok(s) => s.to_string(),
                Err(_) => {
                    reasons.push(Reason::SubjectValueNotText {
                        attr: subject_attr_name(atv.attr_type()),
                    });
                    String::from_utf8_lossy(atv.as_slice()).into_owned()
                }
            };
            if *atv.attr_type() == OID_X509_COMMON_NAME {
                out.common_names.push(value);
            } else if *atv.attr_type() == OID_X509_ORGANIZATION_NAME {
                out.organizations.push(value);
            } else {
                out.other_subject
                    .push(format!("{}={}", subject_attr_name(atv.attr_type()), value));
            }
        }
    }

    if let Err(detail) = walk_attributes(info.raw, &mut out, &mut reasons) {
        reasons.push(Reason::AttributesMalformed { detail });
    }
    (Some(out), reasons)
}

/// Exactly one PEM block labelled `CERTIFICATE REQUEST`, nothing but whitespace around it, no
/// headers, strict base64 (padding required). Go's `pem.Decode` ignores text before and after
/// the first block; we do not.
fn pem_to_der(input: &[u8]) -> Result<Vec<u8>, String> {
    let text = std::str::from_utf8(input).map_err(|_| "is not text (not UTF-8)".to_string())?;
    let begins = text.matches("-----BEGIN ").count();
    if begins == 0 {
        return Err("has no PEM block".into());
    }
    if begins > 1 {
        return Err(format!(
            "has {begins} PEM blocks, expected exactly one {PEM_LABEL}"
        ));
    }
    let t = text.trim_matches(|c: char| c.is_ascii_whitespace());
    let Some(after_begin) = t.strip_prefix("-----BEGIN ") else {
        return Err("has text before the PEM block".into());
    };
    let Some((label, body)) = after_begin.split_once("-----") else {
        return Err("has a malformed BEGIN line".into());
    };
    if label != PEM_LABEL {
        return Err(format!(
            "PEM block is {:?}, expected {PEM_LABEL}",
            super::basics::esc(label)
        ));
    }
    let end = format!("-----END {PEM_LABEL}-----");
    let Some(idx) = body.find(&end) else {
        return Err(format!("has no END {PEM_LABEL} line"));
    };
    if !body[idx + end.len()..].is_empty() {
        return Err("has text after the PEM block".into());
    }
    let b64 = &body[..idx];
    if b64.contains(':') {
        return Err("PEM block has headers".into());
    }
    let clean: String = b64
        .chars()
        .filter(|c| !matches!(c, '\n' | '\r' | ' ' | '\t'))
        .collect();
    let der = base64::engine::general_purpose::STANDARD
        .decode(clean.as_bytes())
        .map_err(|e| format!("PEM body is not valid base64: {e}"))?;
    if der.is_empty() {
        return Err("PEM block is empty".into());
    }
    Ok(der)
}

fn key_kind(req: &X509CertificationRequest<'_>) -> KeyKind {
    let spki = &req.certification_request_info.subject_pki;
    let alg = &spki.algorithm.algorithm;
    if *alg == OID_KEY_TYPE_EC_PUBLIC_KEY {
        let curve = spki
            .algorithm
            .parameters
            .as_ref()
            .filter(|p| p.tag() == Tag::Oid)
            .map(|p| p.data);
        return match curve {
            Some(c) if c == OID_EC_P256.as_bytes() => KeyKind::EcP256,
            Some(c) if c == OID_NIST_EC_P384.as_bytes() => KeyKind::EcP384,
            Some(c) => match Oid::new(std::borrow::Cow::Borrowed(c)).to_id_string() {
                s if s == "1.3.132.0.35" => KeyKind::Other("EC on curve P-521".into()),
                s => KeyKind::Other(format!("EC on curve {s}")),
            },
            None => KeyKind::Other("EC without a named curve".into()),
        };
    }
    if *alg == OID_PKCS1_RSAENCRYPTION {
        return match spki.parsed() {
            Ok(PublicKey::RSA(rsa)) => KeyKind::Rsa(rsa_bits(rsa.modulus)),
            _ => KeyKind::Other("RSA with an unreadable key".into()),
        };
    }
    if *alg == OID_SIG_ED25519 {
        return KeyKind::Other("Ed25519".into());
    }
    let s = alg.to_id_string();
    KeyKind::Other(oid_name(&s).map(str::to_string).unwrap_or(s))
}

/// Modulus size in bits without leading zero bytes (x509-parser 0.18's `key_size` returns 0
/// for a modulus without its sign byte).
fn rsa_bits(modulus: &[u8]) -> usize {
    let m: &[u8] = {
        let first = modulus.iter().position(|&b| b != 0).unwrap_or(modulus.len());
        &modulus[first..]
    };
    match m.first() {
        None => 0,
        Some(&b) => m.len() * 8 - b.leading_zeros() as usize,
    }
}

fn sig_kind(req: &X509CertificationRequest<'_>) -> SigKind {
    let a = &req.signature_algorithm.algorithm;
    if *a == OID_SIG_ECDSA_WITH_SHA256 {
        SigKind::EcdsaSha256
    } else if *a == OID_SIG_ECDSA_WITH_SHA384 {
        SigKind::EcdsaSha384
    } else if *a == OID_PKCS1_SHA256WITHRSA {
        SigKind::RsaPkcs1(256)
    } else if *a == OID_PKCS1_SHA384WITHRSA {
        SigKind::RsaPkcs1(384)
    } else if *a == OID_PKCS1_SHA512WITHRSA {
        SigKind::RsaPkcs1(512)
    } else if *a == OID_PKCS1_SHA1WITHRSA {
        SigKind::Other("sha1WithRSAEncryption".into())
    } else {
        let s = a.to_id_string();
        SigKind::Other(oid_name(&s).map(str::to_string).unwrap_or(s))
    }
}

/// The allow-list (docs/approve.md "Verifying kubelet CSRs"): ECDSA P-256 with SHA-256, P-384
/// with SHA-384 (what Go's `CreateCertificateRequest` pairs them with), RSA 2048–8192 bits with
/// PKCS#1 v1.5 SHA-256/384/512.
fn check_algorithms(key: &KeyKind, sig: &SigKind, reasons: &mut Vec<Reason>) {
    let key_ok = match key {
        KeyKind::EcP256 | KeyKind::EcP384 => true,
        KeyKind::Rsa(bits) => (RSA_MIN_BITS..=RSA_MAX_BITS).contains(bits),
        KeyKind::Other(_) => false,
    };
    if !key_ok {
        let key = match key {
            KeyKind::Rsa(bits) => format!("RSA {bits}-bit"),
            KeyKind::Other(s) => s.clone(),
            _ => unreachable!("allowed keys are ok"),
        };
        reasons.push(Reason::KeyNotAllowed { key });
    }
    let sig_name = match sig {
        SigKind::EcdsaSha256 => "ecdsa-with-SHA256".to_string(),
        SigKind::EcdsaSha384 => "ecdsa-with-SHA384".to_string(),
        SigKind::RsaPkcs1(h) => format!("sha{h}WithRSAEncryption"),
        SigKind::Other(s) => s.clone(),
    };
    let pair_ok = matches!(
        (key, sig),
        (KeyKind::EcP256, SigKind::EcdsaSha256)
            | (KeyKind::EcP384, SigKind::EcdsaSha384)
            | (KeyKind::Rsa(_), SigKind::RsaPkcs1(_))
    );
    if !pair_ok {
        let with = match key {
            KeyKind::EcP256 => " with a P-256 key".to_string(),
            KeyKind::EcP384 => " with a P-384 key".to_string(),
            KeyKind::Rsa(_) => " with an RSA key".to_string(),
            KeyKind::Other(_) => String::new(),
        };
        reasons.push(Reason::SignatureAlgorithmNotAllowed {
            algorithm: format!("{sig_name}{with}"),
        });
    }
}

fn universal<'a>(i: &'a [u8], tag: Tag, what: &str) -> Result<(&'a [u8], Any<'a>), String> {
    let (r, a) = Any::from_der(i).map_err(|e| format!("{what}: {e}"))?;
    if a.class() != Class::Universal || a.tag() != tag {
        return Err(format!("{what} is not a {tag}"));
    }
    Ok((r, a))
}

/// Nesting deeper than this is refused (a kubelet CSR nests about 6 levels).
const MAX_DER_DEPTH: usize = 32;

/// Every TLV in `i`, recursively into constructed ones: definite, minimal length encodings
/// (X.690 10.1) and single-byte tags, contents within bounds. asn1-rs accepts BER lengths such
/// as `81 14` where DER (and Go) require `14`.
fn strict_der(mut i: &[u8], depth: usize) -> Result<(), String> {
    if depth > MAX_DER_DEPTH {
        return Err("nested too deeply".into());
    }
    while !i.is_empty() {
        let tag = i[0];
        if tag & 0x1f == 0x1f {
            return Err(format!("multi-byte tag {tag:#04x}"));
        }
        let Some(&l0) = i.get(1) else {
            return Err("truncated header".into());
        };
        let (len, hdr) = if l0 < 0x80 {
            (l0 as usize, 2)
        } else {
            let n = (l0 & 0x7f) as usize;
            if n == 0 {
                return Err("indefinite length".into());
            }
            if n > 4 || i.len() < 2 + n {
                return Err("length too long or truncated".into());
            }
            let bytes = &i[2..2 + n];
            let len = bytes.iter().fold(0usize, |a, b| (a << 8) | *b as usize);
            if bytes[0] == 0 || len < 0x80 {
                return Err(format!("non-minimal length encoding for tag {tag:#04x}"));
            }
            (len, 2 + n)
        };
        let end = hdr
            .checked_add(len)
            .filter(|e| *e <= i.len())
            .ok_or("content runs past its parent")?;
        if tag & 0x20 != 0 {
            strict_der(&i[hdr..end], depth + 1)?;
        }
        i = &i[end..];
    }
    Ok(())
}

/// An OBJECT IDENTIFIER with its tag checked: asn1-rs 0.7's `Oid::from_der` (and so
/// x509-parser) reads *any* primitive TLV as an OID, which would let a request carry, say, a
/// PrintableString that x509-parser takes for the CN type while Go rejects or reads it
/// otherwise. Also checks the content is a minimal base-128 encoding (X.690 8.19).
fn oid_der<'a>(i: &'a [u8], what: &str) -> Result<(&'a [u8], Oid<'a>), String> {
    let (r, a) = Any::from_der(i).map_err(|e| format!("{what}: {e}"))?;
    if a.class() != Class::Universal || a.tag() != Tag::Oid || a.header.is_constructed() {
        return Err(format!("{what} is not an OBJECT IDENTIFIER"));
    }
    let d = a.data;
    let minimal = !d.is_empty()
        && d[d.len() - 1] & 0x80 == 0
        && d.iter()
            .enumerate()
            .all(|(k, &b)| b != 0x80 || (k > 0 && d[k - 1] & 0x80 != 0));
    if !minimal {
        return Err(format!("{what} is not a valid OBJECT IDENTIFIER encoding"));
    }
    Ok((r, Oid::new(std::borrow::Cow::Borrowed(d))))
}

fn done(i: &[u8], what: &str) -> Result<(), String> {
    if i.is_empty() {
        Ok(())
    } else {
        Err(format!("{} extra bytes inside {what}", i.len()))
    }
}

/// AlgorithmIdentifier ::= SEQUENCE { algorithm OID, parameters ANY OPTIONAL } — nothing more.
fn check_alg_id(i: &[u8], what: &str) -> Result<(), String> {
    let (r, _) = oid_der(i, &format!("{what} algorithm"))?;
    if r.is_empty() {
        return Ok(());
    }
    let (r, _) = Any::from_der(r).map_err(|e| format!("{what} parameters: {e}"))?;
    done(r, what)
}

/// The shape x509-parser does not enforce: no extra elements inside the outer SEQUENCE, the
/// AlgorithmIdentifiers, the SubjectPublicKeyInfo, or the Name's AttributeTypeAndValues (a
/// parser that reads them differently would see another request than we checked).
fn check_structure(der: &[u8]) -> Result<(), String> {
    let (_, outer) = universal(der, Tag::Sequence, "CertificationRequest")?;
    let (r, cri) = universal(outer.data, Tag::Sequence, "CertificationRequestInfo")?;
    let (r, alg) = universal(r, Tag::Sequence, "signatureAlgorithm")?;
    check_alg_id(alg.data, "signatureAlgorithm")?;
    let (r, _) = universal(r, Tag::BitString, "signature")?;
    done(r, "CertificationRequest")?;

    let (r, _) = universal(cri.data, Tag::Integer, "version")?;
    let (r, name) = universal(r, Tag::Sequence, "subject")?;
    let (_, spki) = universal(r, Tag::Sequence, "subjectPKInfo")?;
    let mut n = name.data;
    while !n.is_empty() {
        let (rest, rdn) = universal(n, Tag::Set, "subject RDN")?;
        n = rest;
        let mut a = rdn.data;
        while !a.is_empty() {
            let (rest, atv) = universal(a, Tag::Sequence, "subject attribute")?;
            a = rest;
            let (v, _) = oid_der(atv.data, "subject attribute type")?;
            let (v, _) = Any::from_der(v).map_err(|e| format!("subject attribute value: {e}"))?;
            done(v, "a subject attribute")?;
        }
    }
    let (r, alg) = universal(spki.data, Tag::Sequence, "subjectPKInfo algorithm")?;
    check_alg_id(alg.data, "subjectPKInfo algorithm")?;
    let (r, _) = universal(r, Tag::BitString, "subjectPublicKey")?;
    done(r, "subjectPKInfo")
}

/// Walks `CertificationRequestInfo.attributes` ([0] IMPLICIT SET OF Attribute) from the DER.
/// Records every attribute, every value of every ExtensionRequest, every extension and every
/// SAN; pushes reasons for duplicates and odd shapes. Err = the structure is not DER we can read.
fn walk_attributes(cri_raw: &[u8], out: &mut ParsedRequest, reasons: &mut Vec<Reason>) -> Result<(), String> {
    let (rest, cri) = Any::from_der(cri_raw).map_err(|e| format!("CertificationRequestInfo: {e}"))?;
    if !rest.is_empty() || cri.tag() != Tag::Sequence {
        return Err("CertificationRequestInfo is not one SEQUENCE".into());
    }
    let mut i = cri.data;
    for what in ["version", "subject", "subjectPKInfo"] {
        let (r, _) = Any::from_der(i).map_err(|e| format!("{what}: {e}"))?;
        i = r;
    }
    let (r, attrs) = Any::from_der(i).map_err(|e| format!("attributes: {e}"))?;
    if !r.is_empty() {
        return Err("data after the attributes".into());
    }
    if attrs.class() != Class::ContextSpecific || attrs.tag() != Tag(0) || !attrs.header.is_constructed() {
        return Err("attributes are not [0] IMPLICIT SET".into());
    }
    let mut a = attrs.data;
    while !a.is_empty() {
        let (r, attr) = Any::from_der(a).map_err(|e| format!("attribute: {e}"))?;
        a = r;
        if attr.tag() != Tag::Sequence || attr.class() != Class::Universal {
            return Err("attribute is not a SEQUENCE".into());
        }
        let (r, oid) = oid_der(attr.data, "attribute type")?;
        let (r2, values) = Any::from_der(r).map_err(|e| format!("attribute values: {e}"))?;
        if !r2.is_empty() || values.tag() != Tag::Set || values.class() != Class::Universal {
            return Err(format!("attribute {} values are not one SET", oid.to_id_string()));
        }
        let oid_s = oid.to_id_string();
        if out.attributes.contains(&oid_s) {
            reasons.push(Reason::DuplicateAttribute {
                attribute: oid_name(&oid_s).unwrap_or(&oid_s).to_string(),
            });
        }
        out.attributes.push(oid_s.clone());
        if oid == OID_PKCS9_EXTENSION_REQUEST {
            let mut v = values.data;
            let mut count = 0usize;
            while !v.is_empty() {
                let (r, value) = Any::from_der(v).map_err(|e| format!("ExtensionRequest value: {e}"))?;
                v = r;
                count += 1;
                walk_extensions(&value, out, reasons)?;
            }
            if count != 1 {
                reasons.push(Reason::ExtensionRequestValues { count });
            }
        }
    }
    Ok(())
}

fn walk_extensions(
    value: &Any<'_>,
    out: &mut ParsedRequest,
    reasons: &mut Vec<Reason>,
) -> Result<(), String> {
    if value.tag() != Tag::Sequence || value.class() != Class::Universal {
        return Err("ExtensionRequest value is not a SEQUENCE OF Extension".into());
    }
    let mut e = value.data;
    while !e.is_empty() {
        let (r, ext) = Any::from_der(e).map_err(|err| format!("extension: {err}"))?;
        e = r;
        if ext.tag() != Tag::Sequence || ext.class() != Class::Universal {
            return Err("extension is not a SEQUENCE".into());
        }
        let (mut r, oid) = oid_der(ext.data, "extension id")?;
        let (r1, next) = Any::from_der(r).map_err(|err| format!("extension {oid}: {err}"))?;
        let mut critical = false;
        let octets = if next.tag() == Tag::Boolean && next.class() == Class::Universal {
            // DER: TRUE is 0xff, and FALSE (the DEFAULT) must be omitted.
            if next.data != [0xff] {
                return Err(format!("extension {oid}: critical flag is not DER TRUE"));
            }
            critical = true;
            let (r2, o) = Any::from_der(r1).map_err(|err| format!("extension {oid}: {err}"))?;
            r = r2;
            o
        } else {
            r = r1;
            next
        };
        if !r.is_empty()
            || octets.tag() != Tag::OctetString
            || octets.class() != Class::Universal
            || octets.header.is_constructed()
        {
            return Err(format!("extension {oid}: value is not one OCTET STRING"));
        }
        strict_der(octets.data, 0).map_err(|e| format!("extension {oid} value: {e}"))?;
        let oid_s = oid.to_id_string();
        let ext_rec = RequestedExtension {
            oid: oid_s.clone(),
            critical,
        };
        if out.extensions.iter().any(|x| x.oid == oid_s) {
            reasons.push(Reason::DuplicateExtension {
                extension: ext_rec.name(),
            });
        }
        out.extensions.push(ext_rec);
        if oid == OID_X509_EXT_SUBJECT_ALT_NAME {
            if let Err(detail) = walk_san(octets.data, &mut out.sans) {
                reasons.push(Reason::SanMalformed { detail });
            }
        }
    }
    Ok(())
}

/// GeneralNames ::= SEQUENCE SIZE (1..MAX) OF GeneralName (RFC 5280 4.2.1.6).
fn walk_san(der: &[u8], sans: &mut Vec<San>) -> Result<(), String> {
    let (rest, seq) = Any::from_der(der).map_err(|e| e.to_string())?;
    if !rest.is_empty() || seq.tag() != Tag::Sequence || seq.class() != Class::Universal {
        return Err("not one SEQUENCE of GeneralName".into());
    }
    if seq.data.is_empty() {
        return Err("empty SEQUENCE of GeneralName".into());
    }
    let mut i = seq.data;
    while !i.is_empty() {
        let (r, gn) = Any::from_der(i).map_err(|e| e.to_string())?;
        i = r;
        if gn.class() != Class::ContextSpecific {
            return Err("GeneralName is not context-tagged".into());
        }
        let text = || String::from_utf8_lossy(gn.data).into_owned();
        let san = match gn.tag().0 {
            0 => San::Other("otherName"),
            1 => San::Email(text()),
            2 => San::Dns {
                name: text(),
                ascii: gn.data.is_ascii(),
            },
            3 => San::Other("x400Address"),
            4 => San::Other("directoryName"),
            5 => San::Other("ediPartyName"),
            6 => San::Uri(text()),
            7 => San::Ip(gn.data.to_vec()),
            8 => San::Other("registeredID"),
            _ => San::Other("unknown GeneralName"),
        };
        let primitive_kinds = matches!(gn.tag().0, 1 | 2 | 6 | 7 | 8);
        if primitive_kinds && gn.header.is_constructed() {
            return Err(format!("GeneralName [{}] is constructed", gn.tag().0));
        }
        sans.push(san);
    }
    Ok(())
}

fn subject_attr_name(oid: &Oid<'_>) -> String {
    let s = oid.to_id_string();
    match s.as_str() {
        "2.5.4.3" => "CN".into(),
        "2.5.4.10" => "O".into(),
        "2.5.4.11" => "OU".into(),
        "2.5.4.6" => "C".into(),
        "2.5.4.7" => "L".into(),
        "2.5.4.8" => "ST".into(),
        "2.5.4.5" => "serialNumber".into(),
        "1.2.840.113549.1.9.1" => "emailAddress".into(),
        "0.9.2342.19200300.100.1.25" => "DC".into(),
        "0.9.2342.19200300.100.1.1" => "UID".into(),
        _ => s,
    }
}

/// Names of the OIDs an operator is likely to meet in a CSR (the registry is not built per call:
/// the verdict must stay fast).
pub(crate) fn oid_name(oid: &str) -> Option<&'static str> {
    Some(match oid {
        "2.5.29.17" => "subjectAltName",
        "2.5.29.19" => "basicConstraints",
        "2.5.29.15" => "keyUsage",
        "2.5.29.37" => "extKeyUsage",
        "2.5.29.14" => "subjectKeyIdentifier",
        "2.5.29.35" => "authorityKeyIdentifier",
        "2.5.29.30" => "nameConstraints",
        "2.5.29.31" => "cRLDistributionPoints",
        "2.5.29.32" => "certificatePolicies",
        "1.3.6.1.5.5.7.1.1" => "authorityInfoAccess",
        "1.2.840.113549.1.9.14" => "extensionRequest",
        "1.2.840.113549.1.9.7" => "challengePassword",
        "1.2.840.113549.1.9.2" => "unstructuredName",
        "1.3.101.112" => "Ed25519",
        "1.3.101.113" => "Ed448",
        "1.2.840.10040.4.1" => "DSA",
        "1.2.840.10045.4.1" => "ecdsa-with-SHA1",
        "1.2.840.10045.4.3.4" => "ecdsa-with-SHA512",
        "1.2.840.113549.1.1.10" => "RSASSA-PSS",
        "1.2.840.113549.1.1.4" => "md5WithRSAEncryption",
        "1.3.14.3.2.29" => "sha1WithRSASignature",
        _ => return None,
    })
}

/// True for the challengePassword attribute OID (dotted).
pub(crate) fn is_challenge_password(oid: &str) -> bool {
    oid == OID_PKCS9_CHALLENGE_PASSWORD.to_id_string()
}

/// The dotted ExtensionRequest OID.
pub(crate) fn extension_request_oid() -> String {
    OID_PKCS9_EXTENSION_REQUEST.to_id_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rsa_bits_ignores_leading_zeros() {
        let mut m = vec![0u8];
        m.extend(std::iter::repeat_n(0xffu8, 256));
        assert_eq!(rsa_bits(&m), 2048);
        assert_eq!(rsa_bits(&[0x01, 0, 0]), 17);
        assert_eq!(rsa_bits(&[]), 0);
    }

    #[test]
    fn strict_der_refuses_ber() {
        assert!(strict_der(&[0x30, 0x03, 0x02, 0x01, 0x00], 0).is_ok());
        assert!(strict_der(&[0x30, 0x81, 0x03, 0x02, 0x01, 0x00], 0)
            .unwrap_err()
            .contains("non-minimal"));
        assert!(strict_der(&[0x30, 0x80, 0x02, 0x01, 0x00, 0x00, 0x00], 0)
            .unwrap_err()
            .contains("indefinite"));
        assert!(strict_der(&[0x30, 0x05, 0x02, 0x01, 0x00], 0).is_err());
        assert!(strict_der(&[0x1f, 0x02, 0x01, 0x00], 0)
            .unwrap_err()
            .contains("multi-byte tag"));
        let deep: Vec<u8> = std::iter::repeat_n([0x30u8, 0x80], 40).flatten().collect();
        assert!(strict_der(&deep, 0).is_err());
    }

    #[test]
    fn oid_der_checks_tag_and_encoding() {
        assert_eq!(
            oid_der(&[0x06, 0x03, 0x55, 0x04, 0x03], "x")
                .unwrap()
                .1
                .to_id_string(),
            "2.5.4.3"
        );
        assert!(oid_der(&[0x13, 0x03, 0x55, 0x04, 0x03], "x")
            .unwrap_err()
            .contains("not an OBJECT IDENTIFIER"));
        assert!(oid_der(&[0x06, 0x03, 0x2a, 0x80, 0x01], "x")
            .unwrap_err()
            .contains("encoding"));
        assert!(oid_der(&[0x06, 0x02, 0x2a, 0x81], "x")
            .unwrap_err()
            .contains("encoding"));
        assert!(oid_der(&[0x06, 0x00], "x").is_err());
        // 0x80 inside a multi-byte sub-identifier is fine: 1.2.16384 = 2a 81 80 00.
        assert!(oid_der(&[0x06, 0x04, 0x2a, 0x81, 0x80, 0x00], "x").is_ok());
    }

    #[test]
    fn pem_framing_is_strict() {
        let good = "-----BEGIN CERTIFICATE REQUEST-----\nAAAA\n-----END CERTIFICATE REQUEST-----\n";
        assert_eq!(pem_to_der(good.as_bytes()).unwrap(), vec![0, 0, 0]);
        assert!(pem_to_der(format!("junk\n{good}").as_bytes())
            .unwrap_err()
            .contains("before"));
        assert!(pem_to_der(format!("{good}junk").as_bytes())
            .unwrap_err()
            .contains("after"));
        assert!(pem_to_der(format!("{good}{good}").as_bytes())
            .unwrap_err()
            .contains("2 PEM blocks"));
        assert!(
            pem_to_der(good.replace("CERTIFICATE REQUEST", "CERTIFICATE").as_bytes())
                .unwrap_err()
                .contains("expected")
        );
        assert!(pem_to_der(good.replace("AAAA", "AAA").as_bytes())
            .unwrap_err()
            .contains("base64"));
        assert!(
            pem_to_der(good.replace("AAAA", "Proc-Type: 4\n\nAAAA").as_bytes())
                .unwrap_err()
                .contains("headers")
        );
        assert!(pem_to_der(&[0xff, 0xfe]).unwrap_err().contains("UTF-8"));
    }
}
