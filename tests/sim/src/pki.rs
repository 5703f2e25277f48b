//! The simulator's PKI: one CA (ECDSA P-256, 10 years) that signs the API server's serving
//! certificate, the admin client certificate and, through the CSR signer, the kubelets'
//! certificates. One CA for everything keeps the kubeconfig simple: the same
//! `certificate-authority-data` verifies the server, and the server trusts client certificates
//! it (or the signer) issued — the way a kubeadm cluster with a single CA behaves.

use anyhow::Context;
use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer,
    KeyPair, KeyUsagePurpose, SanType,
};
use std::net::IpAddr;

/// A CA certificate with its private key, both PEM.
pub struct Ca {
    pub cert_pem: String,
    pub key_pem: String,
    params: CertificateParams,
}

/// A leaf certificate with its private key, both PEM.
pub struct Leaf {
    pub cert_pem: String,
    pub key_pem: String,
}

fn validity(params: &mut CertificateParams, days: i64) {
    let now = time::OffsetDateTime::now_utc();
    // Back-date by an hour so clocks slightly behind still accept it (as kubeadm does).
    params.not_before = now - time::Duration::hours(1);
    params.not_after = now + time::Duration::days(days);
}

impl Ca {
    /// Creates a new CA with subject CN=`cn` (e.g. `agent-day2-sim-ca`), valid 10 years.
    pub fn generate(cn: &str) -> anyhow::Result<Ca> {
        let mut params = CertificateParams::new(Vec::<String>::new())?;
        let mut dn = DistinguishedName::new();
        dn.push(DnType::OrganizationalUnitName, "openshift");
        dn.push(DnType::CommonName, cn);
        params.distinguished_name = dn;
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::CrlSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        validity(&mut params, 3650);
        let key = KeyPair::generate()?;
        let cert = params.self_signed(&key)?;
        Ok(Ca {
            cert_pem: cert.pem(),
            key_pem: key.serialize_pem(),
            params,
        })
    }

    fn issue(&self, params: CertificateParams) -> anyhow::Result<Leaf> {
        let ca_key = KeyPair::from_pem(&self.key_pem)?;
        let issuer = Issuer::from_params(&self.params, &ca_key);
        let key = KeyPair::generate()?;
        let cert = params.signed_by(&key, &issuer)?;
        Ok(Leaf {
            cert_pem: cert.pem(),
            key_pem: key.serialize_pem(),
        })
    }

    /// Issues the API server's serving certificate (1 year) for `dns` names and `ips`.
    pub fn issue_server(&self, dns: &[String], ips: &[IpAddr]) -> anyhow::Result<Leaf> {
        let mut params = CertificateParams::new(Vec::<String>::new())?;
        let mut dn = DistinguishedName::new();
        dn.push(DnType::CommonName, "api-server");
        params.distinguished_name = dn;
        for d in dns {
            params.subject_alt_names.push(SanType::DnsName(
                d.clone().try_into().with_context(|| format!("SAN {d}"))?,
            ));
        }
        for ip in ips {
            params.subject_alt_names.push(SanType::IpAddress(*ip));
        }
        params.key_usages = vec![
            KeyUsagePurpose::DigitalSignature,
            KeyUsagePurpose::KeyEncipherment,
        ];
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        validity(&mut params, 365);
        self.issue(params)
    }

    /// Issues a client certificate (1 year): identity CN=`user`, one O per group.
    pub fn issue_client(&self, user: &str, groups: &[&str]) -> anyhow::Result<Leaf> {
        let mut params = CertificateParams::new(Vec::<String>::new())?;
        let mut dn = DistinguishedName::new();
        for g in groups {
            dn.push(DnType::OrganizationName, *g);
        }
        dn.push(DnType::CommonName, user);
        params.distinguished_name = dn;
        params.key_usages = vec![
            KeyUsagePurpose::DigitalSignature,
            KeyUsagePurpose::KeyEncipherment,
        ];
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
        validity(&mut params, 365);
        self.issue(params)
    }
}

/// Identity in a client certificate: CN is the user, each O a group (Kubernetes' x509
/// authenticator, `k8s.io/apiserver/pkg/authentication/request/x509.CommonNameUserConversion`).
/// Returns None when the DER does not parse or has no CN.
pub fn identity_from_cert(der: &[u8]) -> Option<(String, Vec<String>)> {
    let (_, cert) = x509_parser::parse_x509_certificate(der).ok()?;
    let subject = cert.subject();
    // Go's pkix.Name keeps the last CN when there are several.
    let cn = subject.iter_common_name().last()?.as_str().ok()?.to_string();
    let groups = subject
        .iter_organization()
        .filter_map(|o| o.as_str().ok().map(str::to_string))
        .collect();
    Some((cn, groups))
}

/// Identity of a client certificate if it was issued by the CA `ca_der` (signature checked) and
/// is valid now with the client-auth usage; None otherwise (the server answers 401).
pub fn verify_client_cert(der: &[u8], ca_der: &[u8]) -> Option<(String, Vec<String>)> {
    let (_, cert) = x509_parser::parse_x509_certificate(der).ok()?;
    let (_, ca) = x509_parser::parse_x509_certificate(ca_der).ok()?;
    if cert.issuer() != ca.subject() || cert.verify_signature(Some(ca.public_key())).is_err() {
        return None;
    }
    if !cert.validity().is_valid() {
        return None;
    }
    // Go's x509 verification in the authenticator asks for ExtKeyUsageClientAuth.
    match cert.extended_key_usage() {
        Ok(Some(eku)) if !(eku.value.client_auth || eku.value.any) => return None,
        Err(_) => return None,
        _ => {}
    }
    identity_from_cert(der)
}

/// `n` random bytes as hex (2n characters): bearer tokens and passwords.
pub fn new_token(n: usize) -> String {
    let mut b = vec![0u8; n];
    getrandom::getrandom(&mut b).expect("getrandom");
    hex::encode(b)
}
