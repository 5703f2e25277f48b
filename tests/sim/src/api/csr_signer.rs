//! The kube-controller-manager's kubelet signers (`kubernetes.io/kube-apiserver-client-kubelet`
//! and `kubernetes.io/kubelet-serving`), as the simulated cluster runs them on Approved CSRs.
//!
//! Sources: kubernetes `pkg/controller/certificates/signer/signer.go` (which CSRs a signer
//! handles, lifetime), `pkg/apis/certificates/v1/helpers.go` (`ValidateKubeletClientCSR`,
//! `ValidateKubeletServingCSR`: the exact checks and their messages) and
//! `pkg/controller/certificates/authority/{authority,policies}.go` (what the issued certificate
//! contains: the CSR's whole subject and SANs, key usages from `spec.usages`, CA:false, requested
//! extensions dropped, backdated 5 minutes, never past the CA's notAfter).
//! These are Kubernetes' own checks only, not agent-day2's stricter approve checklist.

use anyhow::{anyhow, bail, Context};
use base64::Engine;
use serde_json::Value;
use std::collections::BTreeSet;
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use x509_parser::certification_request::X509CertificationRequest;
use x509_parser::extensions::{GeneralName, ParsedExtension};
use x509_parser::prelude::FromDer;

/// Signer of kubelet client certificates (the node's identity towards the API server).
pub const KUBELET_CLIENT_SIGNER: &str = "kubernetes.io/kube-apiserver-client-kubelet";
/// Signer of kubelet serving certificates (port 10250).
pub const KUBELET_SERVING_SIGNER: &str = "kubernetes.io/kubelet-serving";
/// Reason of the `Failed` condition the signer adds when [`kubelet_check`] fails.
pub const SIGNER_VALIDATION_FAILURE: &str = "SignerValidationFailure";
/// The kube-controller-manager's default `--cluster-signing-duration` (1 year): the longest
/// lifetime issued, and the lifetime when `spec.expirationSeconds` is unset.
pub const MAX_TTL: Duration = Duration::from_secs(365 * 24 * 3600);
/// Shortest lifetime issued (signer.go: twice the 5-minute backdate).
pub const MIN_TTL: Duration = Duration::from_secs(600);
const BACKDATE: Duration = Duration::from_secs(300);

/// What a CSR's request contains, as Go's `x509.ParseCertificateRequest` exposes it.
#[derive(Debug, Default)]
struct Parsed {
    organizations: Vec<String>,
    /// Go keeps the last CN when there are several.
    common_name: String,
    dns: Vec<String>,
    ips: Vec<std::net::IpAddr>,
    emails: Vec<String>,
    uris: Vec<String>,
    /// The SubjectPublicKeyInfo, DER.
    spki: Vec<u8>,
    /// Every subject attribute in order: (OID arcs, value).
    subject: Vec<(Vec<u64>, String)>,
}

/// Runs Kubernetes' kubelet signer checks on a `certificates.k8s.io/v1` CSR object (JSON:
/// `spec.request` = base64 of the PEM `CERTIFICATE REQUEST`, `spec.signerName`, `spec.usages`).
///
/// Ok(()) means the signer would issue. Err texts:
/// - `signer not handled` — any other signerName (the caller leaves such CSRs alone);
/// - parse/signature problems (`spec.request ...`);
/// - helpers.go's messages, which the caller puts in a `Failed` condition with reason
///   [`SIGNER_VALIDATION_FAILURE`]: `subject organization is not system:nodes`,
///   `subject common name does not begin with system:node:`, `DNS subjectAltNames are not
///   allowed`, `Email subjectAltNames are not allowed`, `IP subjectAltNames are not allowed`,
///   `URI subjectAltNames are not allowed`, `DNS or IP subjectAltName is required`,
///   `usages did not match [client auth digital signature key encipherment]` (serving:
///   `[digital signature key encipherment server auth]`).
///
/// Usages must equal one of the two sets exactly: client {digital signature, key encipherment,
/// client auth} or {digital signature, client auth}; serving the same with server auth.
pub fn kubelet_check(csr: &Value) -> Result<(), String> {
    let signer = csr
        .pointer("/spec/signerName")
        .and_then(Value::as_str)
        .unwrap_or("");
    if signer != KUBELET_CLIENT_SIGNER && signer != KUBELET_SERVING_SIGNER {
        return Err("signer not handled".into());
    }
    let p = parse_request(csr).map_err(|e| format!("{e:#}"))?;
    let usages: BTreeSet<String> = csr
        .pointer("/spec/usages")
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(|u| u.as_str().map(str::to_owned)).collect())
        .unwrap_or_default();
    let set = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<BTreeSet<String>>();
    if p.organizations != ["system:nodes"] {
        return Err("subject organization is not system:nodes".into());
    }
    const CN_ERR: &str = "subject common name does not begin with system:node:";
    if signer == KUBELET_CLIENT_SIGNER {
        if !p.dns.is_empty() {
            return Err("DNS subjectAltNames are not allowed".into());
        }
        if !p.emails.is_empty() {
            return Err("Email subjectAltNames are not allowed".into());
        }
        if !p.ips.is_empty() {
            return Err("IP subjectAltNames are not allowed".into());
        }
        if !p.uris.is_empty() {
            return Err("URI subjectAltNames are not allowed".into());
        }
        if !p.common_name.starts_with("system:node:") {
            return Err(CN_ERR.into());
        }
        let full = set(&["client auth", "digital signature", "key encipherment"]);
        let no_rsa = set(&["client auth", "digital signature"]);
        if usages != full && usages != no_rsa {
            return Err("usages did not match [client auth digital signature key encipherment]".into());
        }
    } else {
        if p.dns.is_empty() && p.ips.is_empty() {
            return Err("DNS or IP subjectAltName is required".into());
        }
        if !p.emails.is_empty() {
            return Err("Email subjectAltNames are not allowed".into());
        }
        if !p.uris.is_empty() {
            return Err("URI subjectAltNames are not allowed".into());
        }
        let full = set(&["digital signature", "key encipherment", "server auth"]);
        let no_rsa = set(&["digital signature", "server auth"]);
        if usages != full && usages != no_rsa {
            return Err("usages did not match [digital signature key encipherment server auth]".into());
        }
        if !p.common_name.starts_with("system:node:") {
            return Err(CN_ERR.into());
        }
    }
    Ok(())
}

/// Issues the certificate for `csr` (a CSR object as in [`kubelet_check`]; call that first — this
/// function signs whatever it is given, like authority.go).
///
/// The certificate has the CSR's subject and DNS/IP/email/URI SANs, key usage and extended key
/// usage from `spec.usages` (unknown usage → error), CA:false, a random serial, notBefore =
/// `now` − 5 min, notAfter = `now` + `spec.expirationSeconds` (default and maximum [`MAX_TTL`],
/// minimum [`MIN_TTL`]) but not after the CA's notAfter. `ca_cert_pem`/`ca_key_pem` are the
/// signing CA (PEM certificate, PEM PKCS#8 key). Returns the certificate as PEM (what goes,
/// base64-encoded, into `status.certificate`).
pub fn sign(csr: &Value, ca_cert_pem: &str, ca_key_pem: &str, now: SystemTime) -> anyhow::Result<String> {
    use rcgen::{
        CertificateParams, DistinguishedName, DnType, DnValue, IsCa, Issuer, KeyPair, SanType, SerialNumber,
        SubjectPublicKeyInfo,
    };
    let p = parse_request(csr)?;
    let mut params = CertificateParams::default();
    let mut dn = DistinguishedName::new();
    for (oid, value) in &p.subject {
        let ty = match DnType::from_oid(oid) {
            // rcgen keeps one value per type; a second value of a well-known type (only seen in
            // requests the kubelet checks refuse) keeps its own entry via the raw OID.
            t if dn.get(&t).is_some() => DnType::CustomDnType(oid.clone()),
            t => t,
        };
        dn.push(ty, DnValue::Utf8String(value.clone()));
    }
    params.distinguished_name = dn;
    for d in &p.dns {
        params
            .subject_alt_names
            .push(SanType::DnsName(d.clone().try_into()?));
    }
    for ip in &p.ips {
        params.subject_alt_names.push(SanType::IpAddress(*ip));
    }
    for e in &p.emails {
        params
            .subject_alt_names
            .push(SanType::Rfc822Name(e.clone().try_into()?));
    }
    for u in &p.uris {
        params.subject_alt_names.push(SanType::URI(u.clone().try_into()?));
    }
    let usages: Vec<String> = csr
        .pointer("/spec/usages")
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(|u| u.as_str().map(str::to_owned)).collect())
        .unwrap_or_default();
    apply_usages(&mut params, &usages)?;
    params.is_ca = IsCa::ExplicitNoCa;
    params.use_authority_key_identifier_extension = true;
    let mut serial = [0u8; 16];
    fill_random(&mut serial);
    serial[0] &= 0x7f; // positive
    params.serial_number = Some(SerialNumber::from_slice(&serial));

    let ttl = match csr.pointer("/spec/expirationSeconds").and_then(Value::as_u64) {
        None => MAX_TTL,
        Some(s) => Duration::from_secs(s).clamp(MIN_TTL, MAX_TTL),
    };
    let ca_der = pem_block(ca_cert_pem, "CERTIFICATE").context("CA certificate PEM")?;
    let (_, ca) =
        x509_parser::parse_x509_certificate(&ca_der).map_err(|e| anyhow!("parse the CA certificate: {e}"))?;
    let now_secs = now
        .duration_since(UNIX_EPOCH)
        .context("clock before 1970")?
        .as_secs();
    let not_before = now_secs.saturating_sub(BACKDATE.as_secs());
    let ca_not_after = ca.validity().not_after.timestamp().max(0) as u64;
    let not_after = (now_secs + ttl.as_secs()).min(ca_not_after);
    let epoch = rcgen::date_time_ymd(1970, 1, 1);
    params.not_before = epoch + Duration::from_secs(not_before);
    params.not_after = epoch + Duration::from_secs(not_after);

    let key = KeyPair::from_pem(ca_key_pem).context("parse the CA private key PEM")?;
    let issuer = Issuer::from_ca_cert_pem(ca_cert_pem, key).context("use the CA certificate")?;
    let public_key =
        SubjectPublicKeyInfo::from_der(&p.spki).context("the CSR's public key algorithm is not supported")?;
    let cert = params
        .signed_by(&public_key, &issuer)
        .context("sign the certificate")?;
    Ok(cert.pem())
}

/// KU/EKU from `spec.usages` (authority/policies.go `keyUsagesFromStrings`).
fn apply_usages(params: &mut rcgen::CertificateParams, usages: &[String]) -> anyhow::Result<()> {
    use rcgen::{ExtendedKeyUsagePurpose as E, KeyUsagePurpose as K};
    for u in usages {
        let (ku, eku): (Option<K>, Option<E>) = match u.as_str() {
            "signing" | "digital signature" => (Some(K::DigitalSignature), None),
            "content commitment" => (Some(K::ContentCommitment), None),
            "key encipherment" => (Some(K::KeyEncipherment), None),
            "key agreement" => (Some(K::KeyAgreement), None),
            "data encipherment" => (Some(K::DataEncipherment), None),
            "cert sign" => (Some(K::KeyCertSign), None),
            "crl sign" => (Some(K::CrlSign), None),
            "encipher only" => (Some(K::EncipherOnly), None),
            "decipher only" => (Some(K::DecipherOnly), None),
            "any" => (None, Some(E::Any)),
            "server auth" => (None, Some(E::ServerAuth)),
            "client auth" => (None, Some(E::ClientAuth)),
            "code signing" => (None, Some(E::CodeSigning)),
            "email protection" | "s/mime" => (None, Some(E::EmailProtection)),
            "ipsec end system" => (None, Some(E::Other(vec![1, 3, 6, 1, 5, 5, 7, 3, 5]))),
            "ipsec tunnel" => (None, Some(E::Other(vec![1, 3, 6, 1, 5, 5, 7, 3, 6]))),
            "ipsec user" => (None, Some(E::Other(vec![1, 3, 6, 1, 5, 5, 7, 3, 7]))),
            "timestamping" => (None, Some(E::TimeStamping)),
            "ocsp signing" => (None, Some(E::OcspSigning)),
            "microsoft sgc" => (None, Some(E::Other(vec![1, 3, 6, 1, 4, 1, 311, 10, 3, 3]))),
            "netscape sgc" => (None, Some(E::Other(vec![2, 16, 840, 1, 113730, 4, 1]))),
            other => bail!("spec.usages: unrecognized usage {other:?}"),
        };
        if let Some(k) = ku {
            if !params.key_usages.contains(&k) {
                params.key_usages.push(k);
            }
        }
        if let Some(e) = eku {
            if !params.extended_key_usages.contains(&e) {
                params.extended_key_usages.push(e);
            }
        }
    }
    Ok(())
}

/// Decodes `spec.request` and parses the CSR (PEM type `CERTIFICATE REQUEST`, DER fully
/// consumed, self-signature valid).
fn parse_request(csr: &Value) -> anyhow::Result<Parsed> {
    let b64 = csr
        .pointer("/spec/request")
        .and_then(Value::as_str)
        .ok_or_else(|| anyhow!("spec.request: Required value"))?;
    let pem = base64::engine::general_purpose::STANDARD
        .decode(b64.trim())
        .context("spec.request is not base64")?;
    let pem = String::from_utf8(pem).context("spec.request is not a PEM text")?;
    let der = pem_block(&pem, "CERTIFICATE REQUEST")
        .context("spec.request: PEM block type must be CERTIFICATE REQUEST")?;
    let (rest, req) = X509CertificationRequest::from_der(&der)
        .map_err(|e| anyhow!("spec.request: cannot parse the certificate request: {e}"))?;
    if !rest.is_empty() {
        bail!("spec.request: trailing data after the certificate request");
    }
    req.verify_signature()
        .map_err(|e| anyhow!("spec.request: the certificate request's signature does not verify: {e}"))?;
    let info = &req.certification_request_info;
    let mut p = Parsed {
        spki: info.subject_pki.raw.to_vec(),
        ..Parsed::default()
    };
    for rdn in info.subject.iter() {
        for atv in rdn.iter() {
            let value = atv
                .as_str()
                .map_err(|e| anyhow!("spec.request: subject attribute is not a string: {e}"))?
                .to_string();
            let oid: Vec<u64> = atv
                .attr_type()
                .iter()
                .ok_or_else(|| anyhow!("spec.request: subject attribute OID too large"))?
                .collect();
            if oid == [2, 5, 4, 10] {
                p.organizations.push(value.clone());
            } else if oid == [2, 5, 4, 3] {
                p.common_name = value.clone();
            }
            p.subject.push((oid, value));
        }
    }
    if let Some(exts) = req.requested_extensions() {
        for ext in exts {
            if let ParsedExtension::SubjectAlternativeName(san) = ext {
                for name in &san.general_names {
                    match name {
                        GeneralName::DNSName(d) => p.dns.push(d.to_string()),
                        GeneralName::RFC822Name(e) => p.emails.push(e.to_string()),
                        GeneralName::URI(u) => p.uris.push(u.to_string()),
                        GeneralName::IPAddress(b) => match b.len() {
                            4 => p.ips.push(<[u8; 4]>::try_from(*b).unwrap().into()),
                            16 => p.ips.push(<[u8; 16]>::try_from(*b).unwrap().into()),
                            n => bail!("spec.request: IP SAN of {n} bytes"),
                        },
                        _ => {} // Go ignores other name forms too
                    }
                }
            }
        }
    }
    Ok(p)
}

/// The DER of the first PEM block with `label` (Go's `pem.Decode` also takes the first block).
fn pem_block(pem: &str, label: &str) -> anyhow::Result<Vec<u8>> {
    let first = x509_parser::pem::Pem::iter_from_buffer(pem.as_bytes())
        .next()
        .ok_or_else(|| anyhow!("no PEM block found"))?
        .map_err(|e| anyhow!("bad PEM: {e}"))?;
    if first.label != label {
        bail!("PEM block is {:?}, not {label:?}", first.label);
    }
    Ok(first.contents)
}

/// Serial-number randomness without an extra crate: the OS's random source.
fn fill_random(buf: &mut [u8]) {
    use std::io::Read;
    if std::fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(buf))
        .is_err()
    {
        // Unique enough for a simulator if /dev/urandom is unavailable.
        let t = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default()
            .as_nanos();
        for (i, b) in buf.iter_mut().enumerate() {
            *b = (t >> ((i % 16) * 8)) as u8 ^ (i as u8).wrapping_mul(37);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, KeyPair, KeyUsagePurpose, SanType};
    use serde_json::json;
    use x509_parser::extensions::ParsedExtension;

    fn csr_pem(o: &[&str], cn: &str, sans: Vec<SanType>) -> String {
        let key = KeyPair::generate().unwrap(); // ECDSA P-256, like the kubelet
        let mut params = CertificateParams::default();
        params.distinguished_name = rcgen::DistinguishedName::new();
        for (i, org) in o.iter().enumerate() {
            let ty = if i == 0 {
                DnType::OrganizationName
            } else {
                DnType::CustomDnType(vec![2, 5, 4, 10])
            };
            params.distinguished_name.push(ty, *org);
        }
        params.distinguished_name.push(DnType::CommonName, cn);
        params.subject_alt_names = sans;
        params.serialize_request(&key).unwrap().pem().unwrap()
    }

    fn csr_obj(pem: &str, signer: &str, usages: &[&str]) -> Value {
        json!({"apiVersion": "certificates.k8s.io/v1", "kind": "CertificateSigningRequest",
               "metadata": {"name": "csr-1"},
               "spec": {"request": base64::engine::general_purpose::STANDARD.encode(pem),
                        "signerName": signer, "usages": usages,
                        "username": "system:node:worker-1", "groups": ["system:nodes", "system:authenticated"]}})
    }

    fn dns(s: &str) -> SanType {
        SanType::DnsName(s.try_into().unwrap())
    }
    fn ip(s: &str) -> SanType {
        SanType::IpAddress(s.parse().unwrap())
    }

    const CLIENT_USAGES: &[&str] = &["digital signature", "client auth"];
    const SERVING_USAGES: &[&str] = &["digital signature", "server auth"];
    const NODES: &[&str] = &["system:nodes"];

    #[test]
    fn client_verdicts() {
        let good = csr_pem(NODES, "system:node:worker-1", vec![]);
        let c = |pem: &str, usages: &[&str]| kubelet_check(&csr_obj(pem, KUBELET_CLIENT_SIGNER, usages));
        assert_eq!(c(&good, CLIENT_USAGES), Ok(()));
        assert_eq!(
            c(&good, &["key encipherment", "digital signature", "client auth"]),
            Ok(())
        );
        assert_eq!(
            c(&good, &["client auth", "digital signature", "client auth"]),
            Ok(()),
            "duplicates collapse like sets.String"
        );
        let usage_err =
            Err("usages did not match [client auth digital signature key encipherment]".to_string());
        assert_eq!(c(&good, &["client auth"]), usage_err);
        assert_eq!(
            c(&good, &["digital signature", "client auth", "server auth"]),
            usage_err
        );
        assert_eq!(c(&good, &["digital signature", "key encipherment"]), usage_err);
        assert_eq!(
            c(
                &csr_pem(&["system:masters"], "system:node:worker-1", vec![]),
                CLIENT_USAGES
            ),
            Err("subject organization is not system:nodes".into())
        );
        assert_eq!(
            c(
                &csr_pem(
                    &["system:nodes", "system:masters"],
                    "system:node:worker-1",
                    vec![]
                ),
                CLIENT_USAGES
            ),
            Err("subject organization is not system:nodes".into())
        );
        assert_eq!(
            c(&csr_pem(&[], "system:node:worker-1", vec![]), CLIENT_USAGES),
            Err("subject organization is not system:nodes".into())
        );
        assert_eq!(
            c(&csr_pem(NODES, "worker-1", vec![]), CLIENT_USAGES),
            Err("subject common name does not begin with system:node:".into())
        );
        assert_eq!(
            c(
                &csr_pem(NODES, "system:node:worker-1", vec![dns("worker-1")]),
                CLIENT_USAGES
            ),
            Err("DNS subjectAltNames are not allowed".into())
        );
        assert_eq!(
            c(
                &csr_pem(NODES, "system:node:worker-1", vec![ip("10.0.0.11")]),
                CLIENT_USAGES
            ),
            Err("IP subjectAltNames are not allowed".into())
        );
        assert_eq!(
            c(
                &csr_pem(
                    NODES,
                    "system:node:worker-1",
                    vec![SanType::Rfc822Name("a@b.c".try_into().unwrap())]
                ),
                CLIENT_USAGES
            ),
            Err("Email subjectAltNames are not allowed".into())
        );
        assert_eq!(
            c(
                &csr_pem(
                    NODES,
                    "system:node:worker-1",
                    vec![SanType::URI("spiffe://x/y".try_into().unwrap())]
                ),
                CLIENT_USAGES
            ),
            Err("URI subjectAltNames are not allowed".into())
        );
    }

    #[test]
    fn serving_verdicts() {
        let s = |pem: &str, usages: &[&str]| kubelet_check(&csr_obj(pem, KUBELET_SERVING_SIGNER, usages));
        let good = csr_pem(
            NODES,
            "system:node:worker-1",
            vec![dns("worker-1"), ip("10.0.0.11")],
        );
        assert_eq!(s(&good, SERVING_USAGES), Ok(()));
        assert_eq!(
            s(&good, &["digital signature", "key encipherment", "server auth"]),
            Ok(())
        );
        assert_eq!(
            s(
                &csr_pem(NODES, "system:node:w", vec![ip("10.0.0.11")]),
                SERVING_USAGES
            ),
            Ok(())
        );
        assert_eq!(
            s(&csr_pem(NODES, "system:node:w", vec![dns("w")]), SERVING_USAGES),
            Ok(())
        );
        assert_eq!(
            s(&good, &["digital signature", "server auth", "client auth"]),
            Err("usages did not match [digital signature key encipherment server auth]".into())
        );
        assert_eq!(
            s(&good, CLIENT_USAGES),
            Err("usages did not match [digital signature key encipherment server auth]".into())
        );
        assert_eq!(
            s(&csr_pem(NODES, "system:node:worker-1", vec![]), SERVING_USAGES),
            Err("DNS or IP subjectAltName is required".into())
        );
        assert_eq!(
            s(
                &csr_pem(
                    NODES,
                    "system:node:w",
                    vec![dns("w"), SanType::Rfc822Name("r@x.y".try_into().unwrap())]
                ),
                SERVING_USAGES
            ),
            Err("Email subjectAltNames are not allowed".into())
        );
        assert_eq!(
            s(
                &csr_pem(
                    NODES,
                    "system:node:w",
                    vec![dns("w"), SanType::URI("spiffe://a/b".try_into().unwrap())]
                ),
                SERVING_USAGES
            ),
            Err("URI subjectAltNames are not allowed".into())
        );
        assert_eq!(
            s(&csr_pem(NODES, "w", vec![dns("w")]), SERVING_USAGES),
            Err("subject common name does not begin with system:node:".into())
        );
        assert_eq!(
            s(
                &csr_pem(&["system:nodes", "x"], "system:node:w", vec![dns("w")]),
                SERVING_USAGES
            ),
            Err("subject organization is not system:nodes".into())
        );
    }

    #[test]
    fn other_signers_and_broken_requests() {
        let good = csr_pem(NODES, "system:node:worker-1", vec![]);
        for signer in ["kubernetes.io/kube-apiserver-client", "example.com/x", ""] {
            assert_eq!(
                kubelet_check(&csr_obj(&good, signer, CLIENT_USAGES)),
                Err("signer not handled".into())
            );
        }
        // flip one bit of the signature
        let der = pem_block(&good, "CERTIFICATE REQUEST").unwrap();
        let mut bad = der.clone();
        let last = bad.len() - 1;
        bad[last] ^= 0x01;
        let bad_pem = to_pem("CERTIFICATE REQUEST", &bad);
        let e = kubelet_check(&csr_obj(&bad_pem, KUBELET_CLIENT_SIGNER, CLIENT_USAGES)).unwrap_err();
        assert!(e.contains("signature does not verify"), "{e}");
        // wrong PEM label
        let e = kubelet_check(&csr_obj(
            &to_pem("CERTIFICATE", &der),
            KUBELET_CLIENT_SIGNER,
            CLIENT_USAGES,
        ))
        .unwrap_err();
        assert!(e.contains("CERTIFICATE REQUEST"), "{e}");
        // not base64
        let mut o = csr_obj(&good, KUBELET_CLIENT_SIGNER, CLIENT_USAGES);
        o["spec"]["request"] = json!("%%%");
        assert!(kubelet_check(&o).unwrap_err().contains("base64"));
        // trailing garbage after the DER
        let mut long = der.clone();
        long.extend_from_slice(&[0, 0]);
        let e = kubelet_check(&csr_obj(
            &to_pem("CERTIFICATE REQUEST", &long),
            KUBELET_CLIENT_SIGNER,
            CLIENT_USAGES,
        ))
        .unwrap_err();
        assert!(e.contains("trailing"), "{e}");
    }

    fn to_pem(label: &str, der: &[u8]) -> String {
        let b = base64::engine::general_purpose::STANDARD.encode(der);
        let lines: Vec<&str> = b
            .as_bytes()
            .chunks(64)
            .map(|c| std::str::from_utf8(c).unwrap())
            .collect();
        format!(
            "-----BEGIN {label}-----\n{}\n-----END {label}-----\n",
            lines.join("\n")
        )
    }

    fn test_ca() -> (String, String) {
        let key = KeyPair::generate().unwrap();
        let mut params = CertificateParams::default();
        params.distinguished_name = rcgen::DistinguishedName::new();
        params
            .distinguished_name
            .push(DnType::CommonName, "kube-csr-signer_@1700000000");
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::CrlSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        params.not_before = rcgen::date_time_ymd(2020, 1, 1);
        params.not_after = rcgen::date_time_ymd(2040, 1, 1);
        let cert = params.self_signed(&key).unwrap();
        (cert.pem(), key.serialize_pem())
    }

    fn at(secs: u64) -> SystemTime {
        UNIX_EPOCH + Duration::from_secs(secs)
    }

    #[test]
    fn sign_serving_certificate() {
        let (ca_pem, ca_key) = test_ca();
        let pem = csr_pem(
            NODES,
            "system:node:worker-1",
            vec![dns("worker-1"), ip("10.0.0.11")],
        );
        let mut obj = csr_obj(&pem, KUBELET_SERVING_SIGNER, SERVING_USAGES);
        obj["spec"]["expirationSeconds"] = json!(86400);
        let now = 1_750_000_000;
        let out = sign(&obj, &ca_pem, &ca_key, at(now)).unwrap();
        let der = pem_block(&out, "CERTIFICATE").unwrap();
        let (_, cert) = x509_parser::parse_x509_certificate(&der).unwrap();
        let subject: Vec<String> = cert
            .subject()
            .iter_organization()
            .map(|a| a.as_str().unwrap().to_string())
            .collect();
        assert_eq!(subject, ["system:nodes"]);
        assert_eq!(
            cert.subject()
                .iter_common_name()
                .next()
                .unwrap()
                .as_str()
                .unwrap(),
            "system:node:worker-1"
        );
        assert_eq!(
            cert.issuer().iter_common_name().next().unwrap().as_str().unwrap(),
            "kube-csr-signer_@1700000000"
        );
        let san = cert.subject_alternative_name().unwrap().unwrap();
        let names: Vec<String> = san
            .value
            .general_names
            .iter()
            .map(|n| match n {
                GeneralName::DNSName(d) => format!("DNS:{d}"),
                GeneralName::IPAddress(b) => format!(
                    "IP:{}",
                    std::net::Ipv4Addr::from(<[u8; 4]>::try_from(*b).unwrap())
                ),
                other => format!("{other}"),
            })
            .collect();
        assert_eq!(names, ["DNS:worker-1", "IP:10.0.0.11"]);
        let eku = cert.extended_key_usage().unwrap().unwrap().value;
        assert!(eku.server_auth && !eku.client_auth);
        let ku = cert.key_usage().unwrap().unwrap().value;
        assert!(ku.digital_signature() && !ku.key_encipherment() && !ku.key_cert_sign());
        let bc = cert.basic_constraints().unwrap().unwrap().value;
        assert!(!bc.ca);
        assert_eq!(cert.validity().not_before.timestamp() as u64, now - 300);
        assert_eq!(cert.validity().not_after.timestamp() as u64, now + 86400);
        // the signature verifies with the CA's key, and the public key is the CSR's
        let ca_der = pem_block(&ca_pem, "CERTIFICATE").unwrap();
        let (_, ca) = x509_parser::parse_x509_certificate(&ca_der).unwrap();
        cert.verify_signature(Some(ca.public_key())).unwrap();
        let csr_der = pem_block(&pem, "CERTIFICATE REQUEST").unwrap();
        let (_, req) = X509CertificationRequest::from_der(&csr_der).unwrap();
        assert_eq!(
            cert.public_key().raw,
            req.certification_request_info.subject_pki.raw
        );
    }

    #[test]
    fn sign_client_certificate_lifetimes() {
        let (ca_pem, ca_key) = test_ca();
        let pem = csr_pem(NODES, "system:node:worker-1", vec![]);
        let now = 1_750_000_000;
        let life = |exp: Option<u64>| {
            let mut obj = csr_obj(
                &pem,
                KUBELET_CLIENT_SIGNER,
                &["digital signature", "key encipherment", "client auth"],
            );
            if let Some(e) = exp {
                obj["spec"]["expirationSeconds"] = json!(e);
            }
            let out = sign(&obj, &ca_pem, &ca_key, at(now)).unwrap();
            let der = pem_block(&out, "CERTIFICATE").unwrap();
            let (_, cert) = x509_parser::parse_x509_certificate(&der).unwrap();
            let eku = cert.extended_key_usage().unwrap().unwrap().value;
            assert!(eku.client_auth && !eku.server_auth);
            let ku = cert.key_usage().unwrap().unwrap().value;
            assert!(ku.digital_signature() && ku.key_encipherment());
            assert!(cert.subject_alternative_name().unwrap().is_none());
            cert.validity().not_after.timestamp() as u64 - now
        };
        assert_eq!(life(None), MAX_TTL.as_secs());
        assert_eq!(life(Some(10 * 365 * 86400)), MAX_TTL.as_secs());
        assert_eq!(life(Some(60)), MIN_TTL.as_secs());
        assert_eq!(life(Some(3600)), 3600);
        // capped at the CA's notAfter (2040-01-01)
        let mut obj = csr_obj(&pem, KUBELET_CLIENT_SIGNER, CLIENT_USAGES);
        obj["spec"]["expirationSeconds"] = json!(MAX_TTL.as_secs());
        let late = 2_208_988_800 - 3600; // 2039-12-31T23:00:00Z
        let out = sign(&obj, &ca_pem, &ca_key, at(late)).unwrap();
        let der = pem_block(&out, "CERTIFICATE").unwrap();
        let (_, cert) = x509_parser::parse_x509_certificate(&der).unwrap();
        assert_eq!(cert.validity().not_after.timestamp(), 2_208_988_800);
        // unknown usage
        let obj = csr_obj(&pem, KUBELET_CLIENT_SIGNER, &["client auth", "teleport"]);
        let e = sign(&obj, &ca_pem, &ca_key, at(now)).unwrap_err();
        assert!(format!("{e:#}").contains("teleport"), "{e:#}");
    }

    #[test]
    fn sign_drops_requested_extensions() {
        // A CSR asking for CA:TRUE and keyCertSign gets neither (authority.go copies only subject
        // and SANs).
        let (ca_pem, ca_key) = test_ca();
        let key = KeyPair::generate().unwrap();
        let mut params = CertificateParams::default();
        params.distinguished_name = rcgen::DistinguishedName::new();
        params
            .distinguished_name
            .push(DnType::OrganizationName, "system:nodes");
        params
            .distinguished_name
            .push(DnType::CommonName, "system:node:w");
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.key_usages = vec![KeyUsagePurpose::KeyCertSign];
        let pem = params.serialize_request(&key).unwrap().pem().unwrap();
        let obj = csr_obj(&pem, KUBELET_CLIENT_SIGNER, CLIENT_USAGES);
        let out = sign(&obj, &ca_pem, &ca_key, at(1_750_000_000)).unwrap();
        let der = pem_block(&out, "CERTIFICATE").unwrap();
        let (_, cert) = x509_parser::parse_x509_certificate(&der).unwrap();
        assert!(!cert.basic_constraints().unwrap().unwrap().value.ca);
        let ku = cert.key_usage().unwrap().unwrap().value;
        assert!(!ku.key_cert_sign() && ku.digital_signature());
        assert!(cert
            .extensions()
            .iter()
            .all(|e| !matches!(e.parsed_extension(), ParsedExtension::UnsupportedExtension { .. })));
    }
}
