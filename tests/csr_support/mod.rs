//! Shared by tests/csr_cases.rs, tests/csr_fuzz.rs and benches/csr_verdict.rs: a tiny DER
//! writer and a PKCS#10 builder signed with ring, so every odd shape an attacker could send
//! (two CNs, two ExtensionRequest attributes, duplicate extensions, 5-byte IP SANs…) can be
//! produced with a valid self-signature; the scenario of the CSR case table (docs/tests.md
//! "The CSR case table").
#![allow(dead_code)]

use std::net::IpAddr;

use agent_day2::csr::*;
use base64::Engine;
use ring::rand::SystemRandom;
use ring::signature::{
    EcdsaKeyPair, Ed25519KeyPair, KeyPair, ECDSA_P256_SHA256_ASN1_SIGNING, ECDSA_P384_SHA384_ASN1_SIGNING,
};

// ---- DER writer -------------------------------------------------------------------------

pub fn tlv(tag: u8, content: &[u8]) -> Vec<u8> {
    let mut out = vec![tag];
    let n = content.len();
    if n < 0x80 {
        out.push(n as u8);
    } else {
        let bytes: Vec<u8> = n.to_be_bytes().iter().copied().skip_while(|b| *b == 0).collect();
        out.push(0x80 | bytes.len() as u8);
        out.extend(bytes);
    }
    out.extend_from_slice(content);
    out
}
pub fn seq(parts: &[Vec<u8>]) -> Vec<u8> {
    tlv(0x30, &parts.concat())
}
pub fn set(parts: &[Vec<u8>]) -> Vec<u8> {
    tlv(0x31, &parts.concat())
}
pub fn oid(dotted: &str) -> Vec<u8> {
    let arcs: Vec<u64> = dotted.split('.').map(|a| a.parse().unwrap()).collect();
    let mut body = Vec::new();
    let mut enc = |mut v: u64| {
        let mut tmp = vec![(v & 0x7f) as u8];
        v >>= 7;
        while v > 0 {
            tmp.push(0x80 | (v & 0x7f) as u8);
            v >>= 7;
        }
        tmp.reverse();
        body.extend(tmp);
    };
    enc(arcs[0] * 40 + arcs[1]);
    for a in &arcs[2..] {
        enc(*a);
    }
    tlv(0x06, &body)
}
pub fn printable(s: &str) -> Vec<u8> {
    tlv(0x13, s.as_bytes())
}
pub fn utf8(s: &str) -> Vec<u8> {
    tlv(0x0c, s.as_bytes())
}
pub fn octets(b: &[u8]) -> Vec<u8> {
    tlv(0x04, b)
}
pub fn bitstring(b: &[u8]) -> Vec<u8> {
    let mut c = vec![0u8];
    c.extend_from_slice(b);
    tlv(0x03, &c)
}

pub const CN: &str = "2.5.4.3";
pub const O: &str = "2.5.4.10";
pub const OU: &str = "2.5.4.11";
pub const EXT_REQ: &str = "1.2.840.113549.1.9.14";
pub const CHALLENGE: &str = "1.2.840.113549.1.9.7";
pub const SAN_OID: &str = "2.5.29.17";
pub const BC_OID: &str = "2.5.29.19";
pub const KU_OID: &str = "2.5.29.15";
pub const EKU_OID: &str = "2.5.29.37";

/// A GeneralName.
pub enum Gn {
    Dns(String),
    Ip(Vec<u8>),
    Email(String),
    Uri(String),
}
pub fn dns(s: &str) -> Gn {
    Gn::Dns(s.into())
}
pub fn ip(s: &str) -> Gn {
    match s.parse::<IpAddr>().unwrap() {
        IpAddr::V4(v) => Gn::Ip(v.octets().to_vec()),
        IpAddr::V6(v) => Gn::Ip(v.octets().to_vec()),
    }
}
pub fn san_value(names: &[Gn]) -> Vec<u8> {
    let items: Vec<Vec<u8>> = names
        .iter()
        .map(|g| match g {
            Gn::Dns(s) => tlv(0x82, s.as_bytes()),
            Gn::Ip(b) => tlv(0x87, b),
            Gn::Email(s) => tlv(0x81, s.as_bytes()),
            Gn::Uri(s) => tlv(0x86, s.as_bytes()),
        })
        .collect();
    seq(&items)
}
/// Extension ::= SEQUENCE { extnID, critical BOOLEAN DEFAULT FALSE, extnValue OCTET STRING }
pub fn ext(id: &str, critical: bool, value: &[u8]) -> Vec<u8> {
    let mut parts = vec![oid(id)];
    if critical {
        parts.push(tlv(0x01, &[0xff]));
    }
    parts.push(octets(value));
    seq(&parts)
}
pub fn san_ext(names: &[Gn]) -> Vec<u8> {
    ext(SAN_OID, false, &san_value(names))
}
/// An ExtensionRequest attribute with one value per `values` entry (each a list of extensions).
pub fn ext_req_attr(values: &[Vec<Vec<u8>>]) -> Vec<u8> {
    let vals: Vec<Vec<u8>> = values.iter().map(|exts| seq(exts)).collect();
    seq(&[oid(EXT_REQ), set(&vals)])
}

// ---- CSR builder ------------------------------------------------------------------------

/// Signs the encoded CertificationRequestInfo.
type Signer = Box<dyn Fn(&[u8]) -> Vec<u8>>;

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Key {
    P256,
    P384,
    Ed25519,
}

pub struct Builder {
    /// RDNs, each a list of (type OID, encoded value).
    pub rdns: Vec<Vec<(&'static str, Vec<u8>)>>,
    /// Raw Attribute encodings.
    pub attributes: Vec<Vec<u8>>,
    pub key: Key,
    /// Signature algorithm OID to write (None: the right one for the key).
    pub sig_oid: Option<&'static str>,
    /// Rewrites the encoded CertificationRequestInfo before it is signed (odd shapes that
    /// still carry a valid signature).
    pub cri_hook: Option<fn(Vec<u8>) -> Vec<u8>>,
}

impl Builder {
    pub fn node(name: &str) -> Self {
        Builder {
            rdns: vec![
                vec![(O, printable("system:nodes"))],
                vec![(CN, utf8(&format!("system:node:{name}")))],
            ],
            attributes: vec![],
            key: Key::P256,
            sig_oid: None,
            cri_hook: None,
        }
    }
    pub fn serving(name: &str, sans: &[Gn]) -> Self {
        let mut b = Self::node(name);
        b.attributes.push(ext_req_attr(&[vec![san_ext(sans)]]));
        b
    }
    pub fn der(&self) -> Vec<u8> {
        let rng = SystemRandom::new();
        let name = seq(&self
            .rdns
            .iter()
            .map(|rdn| {
                set(&rdn
                    .iter()
                    .map(|(t, v)| seq(&[oid(t), v.clone()]))
                    .collect::<Vec<_>>())
            })
            .collect::<Vec<_>>());
        let attrs = tlv(0xa0, &self.attributes.concat());
        let (spki, sign): (Vec<u8>, Signer) = match self.key {
            Key::P256 | Key::P384 => {
                let (alg, curve) = if self.key == Key::P256 {
                    (&ECDSA_P256_SHA256_ASN1_SIGNING, "1.2.840.10045.3.1.7")
                } else {
                    (&ECDSA_P384_SHA384_ASN1_SIGNING, "1.3.132.0.34")
                };
                let pkcs8 = EcdsaKeyPair::generate_pkcs8(alg, &rng).unwrap();
                let kp = EcdsaKeyPair::from_pkcs8(alg, pkcs8.as_ref(), &rng).unwrap();
                let spki = seq(&[
                    seq(&[oid("1.2.840.10045.2.1"), oid(curve)]),
                    bitstring(kp.public_key().as_ref()),
                ]);
                (
                    spki,
                    Box::new(move |m: &[u8]| kp.sign(&SystemRandom::new(), m).unwrap().as_ref().to_vec()),
                )
            }
            Key::Ed25519 => {
                let pkcs8 = Ed25519KeyPair::generate_pkcs8(&rng).unwrap();
                let kp = Ed25519KeyPair::from_pkcs8(pkcs8.as_ref()).unwrap();
                let spki = seq(&[seq(&[oid("1.3.101.112")]), bitstring(kp.public_key().as_ref())]);
                (spki, Box::new(move |m: &[u8]| kp.sign(m).as_ref().to_vec()))
            }
        };
        let mut cri = seq(&[tlv(0x02, &[0]), name, spki, attrs]);
        if let Some(hook) = self.cri_hook {
            cri = hook(cri);
        }
        let sig = sign(&cri);
        let sig_oid = self.sig_oid.unwrap_or(match self.key {
            Key::P256 => "1.2.840.10045.4.3.2",
            Key::P384 => "1.2.840.10045.4.3.3",
            Key::Ed25519 => "1.3.101.112",
        });
        seq(&[cri, seq(&[oid(sig_oid)]), bitstring(&sig)])
    }
    pub fn pem(&self) -> Vec<u8> {
        pem_of(&self.der())
    }
}

pub fn pem_of(der: &[u8]) -> Vec<u8> {
    let b64 = base64::engine::general_purpose::STANDARD.encode(der);
    let mut s = String::from("-----BEGIN CERTIFICATE REQUEST-----\n");
    for chunk in b64.as_bytes().chunks(64) {
        s.push_str(std::str::from_utf8(chunk).unwrap());
        s.push('\n');
    }
    s.push_str("-----END CERTIFICATE REQUEST-----\n");
    s.into_bytes()
}

// ---- Scenario (docs/tests.md "The CSR case table") -----------------------------------------

pub fn t(s: &str) -> Time {
    s.parse().unwrap()
}
/// When the batch was recorded.
pub fn t0() -> Time {
    t("2026-01-10T10:00:00Z")
}
pub fn token_expiry() -> Time {
    t("2026-01-11T10:00:00Z")
}
/// When the hosts' own assisted-service reported the reboot (before the CSRs).
pub fn rebooted() -> Time {
    t("2026-01-10T10:20:00Z")
}
/// CSRs are created 30 minutes after the batch; "now" is one hour after it.
pub fn created() -> Time {
    t("2026-01-10T10:30:00Z")
}
pub fn now() -> Time {
    t("2026-01-10T11:00:00Z")
}

pub struct Scenario {
    pub expected: ExpectedNodes,
    pub existing: ExistingNodes,
    pub approvals: ApprovalsRecorded,
    pub policy: Policy,
    pub now: Time,
}

impl Scenario {
    pub fn new() -> Self {
        let node = |h: &str, ip: &str| ExpectedNode {
            hostname: h.into(),
            ips: vec![ip.parse().unwrap()],
            recorded_at: t0(),
            token_expires: token_expiry(),
            reissue: 0,
            // monitor recorded the host's reboot report 20 minutes after the batch.
            rebooted_at: Some(rebooted()),
        };
        Scenario {
            expected: ExpectedNodes::new(vec![
                node("worker-0", "192.168.111.30"),
                node("worker-1", "192.168.111.31"),
            ]),
            existing: ExistingNodes::new(["master-0", "master-1", "master-2"]),
            approvals: ApprovalsRecorded::default(),
            policy: Policy::for_cluster(
                "ostest",
                "test.metalkube.org",
                vec!["10.128.0.0/14".parse().unwrap(), "fd01::/48".parse().unwrap()],
                vec!["172.30.0.0/16".parse().unwrap(), "fd02::/112".parse().unwrap()],
            ),
            now: now(),
        }
    }
    pub fn judge(&self, csr: &CsrView) -> Verdict {
        verdict(
            csr,
            &self.expected,
            &self.existing,
            &self.approvals,
            &self.policy,
            self.now,
        )
    }
}

pub fn client_view(pem: Vec<u8>) -> CsrView {
    CsrView {
        name: "csr-client".into(),
        created: Some(created()),
        signer_name: CLIENT_SIGNER.into(),
        username: BOOTSTRAPPER.into(),
        groups: BOOTSTRAPPER_GROUPS.iter().map(|s| s.to_string()).collect(),
        usages: vec!["digital signature".into(), "client auth".into()],
        expiration_seconds: None,
        request: pem,
        conditions: vec![],
        has_certificate: false,
    }
}

pub fn serving_view(node: &str, pem: Vec<u8>) -> CsrView {
    CsrView {
        name: "csr-serving".into(),
        created: Some(created()),
        signer_name: SERVING_SIGNER.into(),
        username: format!("system:node:{node}"),
        groups: vec!["system:nodes".into(), "system:authenticated".into()],
        usages: vec!["digital signature".into(), "server auth".into()],
        expiration_seconds: None,
        request: pem,
        conditions: vec![],
        has_certificate: false,
    }
}

pub fn codes(v: &Verdict) -> Vec<&'static str> {
    v.reasons.iter().map(|r| r.code()).collect()
}
