//! The CSRs a kubelet sends (docs/approve.md "What a real kubelet sends"; client-go `certificate_manager.go`
//! `generateCSR`, kubelet `pkg/kubelet/certificate/kubelet.go`): an ECDSA P-256 key, subject
//! exactly O=`system:nodes`, CN=`system:node:<name>`; the client CSR has no SANs and no
//! extension request; the serving CSR has DNS and IP SANs only.

use std::net::IpAddr;

use rcgen::{CertificateParams, DistinguishedName, DnType, KeyPair, SanType};

/// Signer of kubelet client certificates.
pub const CLIENT_SIGNER: &str = "kubernetes.io/kube-apiserver-client-kubelet";
/// Signer of kubelet serving certificates.
pub const SERVING_SIGNER: &str = "kubernetes.io/kubelet-serving";

/// A CSR in PEM with the key that signed it.
pub struct Request {
    pub pem: String,
    pub key: KeyPair,
}

fn subject(node: &str) -> DistinguishedName {
    let mut dn = DistinguishedName::new();
    dn.push(DnType::OrganizationName, "system:nodes");
    dn.push(DnType::CommonName, format!("system:node:{node}"));
    dn
}

/// The client CSR of `node` with a new P-256 key.
pub fn client(node: &str) -> Result<Request, rcgen::Error> {
    let key = KeyPair::generate()?;
    let mut params = CertificateParams::default();
    params.distinguished_name = subject(node);
    let pem = params.serialize_request(&key)?.pem()?;
    Ok(Request { pem, key })
}

/// The serving CSR of `node`, reusing no key: DNS SAN `hostname`, one IP SAN per address.
pub fn serving(node: &str, hostname: &str, ips: &[IpAddr]) -> Result<Request, rcgen::Error> {
    let key = KeyPair::generate()?;
    let mut params = CertificateParams::default();
    params.distinguished_name = subject(node);
    params
        .subject_alt_names
        .push(SanType::DnsName(hostname.try_into()?));
    for ip in ips {
        params.subject_alt_names.push(SanType::IpAddress(*ip));
    }
    let pem = params.serialize_request(&key)?.pem()?;
    Ok(Request { pem, key })
}

#[cfg(test)]
mod tests {
    use super::*;
    use x509_parser::prelude::*;

    fn parse(pem: &str) -> Vec<u8> {
        let (_, p) = x509_parser::pem::parse_x509_pem(pem.as_bytes()).unwrap();
        assert_eq!(p.label, "CERTIFICATE REQUEST");
        p.contents
    }

    #[test]
    fn client_csr_is_what_a_kubelet_sends() {
        let r = client("worker-0").unwrap();
        let der = parse(&r.pem);
        let (rest, csr) = X509CertificationRequest::from_der(&der).unwrap();
        assert!(rest.is_empty());
        csr.verify_signature().unwrap();
        let s = &csr.certification_request_info.subject;
        let cns: Vec<_> = s
            .iter_common_name()
            .map(|c| c.as_str().unwrap().to_string())
            .collect();
        let os: Vec<_> = s
            .iter_organization()
            .map(|c| c.as_str().unwrap().to_string())
            .collect();
        assert_eq!(cns, vec!["system:node:worker-0"]);
        assert_eq!(os, vec!["system:nodes"]);
        assert_eq!(s.iter().count(), 2);
        // No SANs, no extension request at all.
        assert!(csr.requested_extensions().is_none_or(|mut e| e.next().is_none()));
        // Not even an empty extensionRequest attribute: Go's x509.CreateCertificateRequest
        // writes none when there are no extensions, and approve refuses one.
        assert_eq!(csr.certification_request_info.iter_attributes().count(), 0);
        assert_eq!(
            csr.signature_algorithm.algorithm.to_id_string(),
            "1.2.840.10045.4.3.2"
        );
    }

    #[test]
    fn serving_csr_has_dns_and_ip_sans_only() {
        let ip: IpAddr = "192.168.111.30".parse().unwrap();
        let r = serving("worker-0", "worker-0", &[ip]).unwrap();
        let der = parse(&r.pem);
        let (_, csr) = X509CertificationRequest::from_der(&der).unwrap();
        csr.verify_signature().unwrap();
        let mut dns = vec![];
        let mut ips = vec![];
        for ext in csr.requested_extensions().unwrap() {
            match ext {
                ParsedExtension::SubjectAlternativeName(san) => {
                    for n in &san.general_names {
                        match n {
                            GeneralName::DNSName(d) => dns.push(d.to_string()),
                            GeneralName::IPAddress(b) => ips.push(b.to_vec()),
                            other => panic!("unexpected SAN {other:?}"),
                        }
                    }
                }
                other => panic!("unexpected extension {other:?}"),
            }
        }
        assert_eq!(dns, vec!["worker-0"]);
        assert_eq!(ips, vec![vec![192, 168, 111, 30]]);
    }
}
