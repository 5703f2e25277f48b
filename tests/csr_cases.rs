//! The CSR verdict (`agent_day2::csr`): an external case table (a folder of `NN-name/` cases with
//! case.json, csr.yaml, request.pem, named by `$AGENT_DAY2_CSR_CASES`; not part of this
//! repository, so that test is `#[ignore]`d; docs/tests.md "The CSR case table") and one
//! generated case per checklist line of docs/approve.md "Verifying kubelet CSRs", built the way an
//! attacker would (hand-built DER signed with ring, rcgen, openssl).

use crate::csr_support;

use std::path::{Path, PathBuf};
use std::process::Command;

use agent_day2::csr::*;
use csr_support::*;
use k8s_openapi::api::certificates::v1::CertificateSigningRequest;

/// Names the external case table.
const CASES_ENV: &str = "AGENT_DAY2_CSR_CASES";

fn cases_dir() -> PathBuf {
    let d = PathBuf::from(
        std::env::var_os(CASES_ENV).unwrap_or_else(|| panic!("set {CASES_ENV} to the CSR case table")),
    );
    assert!(
        Path::new(&d).is_dir(),
        "${CASES_ENV} is {}, not a folder",
        d.display()
    );
    d
}

/// reason_category of case.json → the reason codes that category means.
fn category_codes(category: &str) -> &'static [&'static str] {
    match category {
        "existing-node" => &["node-exists"],
        "wrong-requester" => &["client-requester", "client-groups", "serving-requester"],
        "cn-mismatch" => &["cn-mismatch"],
        "foreign-san" => &[
            "ip-san-not-node-address",
            "dns-san-not-hostname",
            "dns-san-wildcard",
            "dns-san-api-server",
            "ip-san-special",
            "ip-san-service-network",
            "ip-san-cluster-network",
        ],
        "client-has-san" => &["client-has-san"],
        "extra-subject" => &["subject-organization", "subject-extra-attribute"],
        "multi-cn" => &["subject-cn-count"],
        "ca-or-keyusage-extension" => &["unexpected-extension", "client-has-extensions"],
        "usages" => &["usages"],
        "email-uri-san" => &["san-kind", "client-has-san"],
        "bad-signature" => &["signature-invalid"],
        "weak-key" => &["key-not-allowed", "signature-algorithm-not-allowed"],
        "duplicate-extension" => &["duplicate-extension"],
        "not-pending" => &["not-pending"],
        "expiration" => &["expiration-too-long", "expiration-too-short"],
        "not-expected-node" => &["not-expected-node"],
        "pem-garbage" => &["pem", "der-trailing-data", "der-invalid"],
        "wrong-signer" => &["other-signer"],
        other => panic!("unknown reason_category {other} in case.json: add it to category_codes"),
    }
}

#[test]
#[ignore = "needs an external CSR case table: set AGENT_DAY2_CSR_CASES"]
fn shared_cases_table() {
    let dir = cases_dir();
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_dir())
        .collect();
    dirs.sort();
    assert!(!dirs.is_empty(), "no case dirs in {}", dir.display());
    let sc = Scenario::new();
    let mut approved = 0;
    for d in &dirs {
        let name = d.file_name().unwrap().to_string_lossy().to_string();
        let case: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(d.join("case.json")).unwrap()).unwrap();
        assert_eq!(case["name"], name.as_str(), "{name}: case.json name");
        let yaml = std::fs::read_to_string(d.join("csr.yaml")).unwrap();
        let obj: CertificateSigningRequest =
            serde_saphyr::from_str(&yaml).unwrap_or_else(|e| panic!("{name}: csr.yaml: {e}"));
        let pem = std::fs::read(d.join("request.pem")).unwrap();
        assert_eq!(obj.spec.request.0, pem, "{name}: spec.request is request.pem");
        let mut view = CsrView::from_k8s(&obj);
        // The cases carry no creationTimestamp (docs/tests.md "The CSR case table"): the API
        // server would set it; put it inside the batch window so only what the case is about
        // decides.
        if view.created.is_none() {
            view.created = Some(created());
        }
        let v = sc.judge(&view);
        let want = case["expected"].as_str().unwrap();
        let category = case["reason_category"].as_str().unwrap();
        let shown: Vec<String> = v.reasons.iter().map(|r| format!("{}: {r}", r.code())).collect();
        eprintln!("{name}: approve={} node={:?} {shown:#?}", v.approve, v.node);
        match want {
            "approve" => {
                assert!(v.approve, "{name}: expected approve, got {shown:#?}");
                assert!(v.reasons.is_empty());
                assert_ne!(v.kind, Kind::NotKubelet);
                approved += 1;
            }
            "reject" => {
                assert!(!v.approve, "{name}: expected reject");
                let allowed = category_codes(category);
                assert!(
                    v.reasons.iter().any(|r| allowed.contains(&r.code())),
                    "{name}: no reason of category {category} ({allowed:?}) in {shown:#?}"
                );
            }
            other => panic!("{name}: expected is {other}"),
        }
        // Exact texts for the cases whose failing values are known.
        let msgs: Vec<String> = v.reasons.iter().map(|r| r.to_string()).collect();
        match name.as_str() {
            "05-client-existing-node-master-1" => assert!(
                msgs.contains(&"node master-1 already exists".to_string()),
                "{msgs:?}"
            ),
            "06-client-wrong-requester" => assert_eq!(codes(&v), ["client-requester"], "{msgs:?}"),
            "07-serving-cn-mismatch" => assert!(codes(&v).contains(&"cn-mismatch")),
            "08-serving-foreign-ip-san" => assert!(
                msgs.len() == 1
                    && msgs[0].starts_with(
                        "IP SAN 192.168.111.20 is not one of worker-0's addresses (192.168.111.30); "
                    )
                    && msgs[0].contains("--node worker-0=192.168.111.20"),
                "{msgs:?}"
            ),
            "09-serving-wildcard-service-loopback" => {
                let mut c = codes(&v);
                c.sort();
                assert_eq!(
                    c,
                    [
                        "dns-san-api-server",
                        "dns-san-wildcard",
                        "ip-san-service-network",
                        "ip-san-special"
                    ],
                    "{msgs:?}"
                );
            }
            "12-serving-ca-true-keycertsign" => {
                assert!(
                    msgs.contains(
                        &"extension basicConstraints (critical) is not allowed (only subjectAltName)"
                            .to_string()
                    ),
                    "{msgs:?}"
                );
                assert!(
                    msgs.contains(
                        &"extension keyUsage (critical) is not allowed (only subjectAltName)".to_string()
                    ),
                    "{msgs:?}"
                );
            }
            "14-client-unexpected-node-worker-9" => assert_eq!(codes(&v), ["not-expected-node"]),
            _ => {}
        }
    }
    let tsv = std::fs::read_to_string(dir.join("cases.tsv")).unwrap();
    assert_eq!(
        tsv.lines().skip(1).filter(|l| !l.trim().is_empty()).count(),
        dirs.len(),
        "cases.tsv lists every dir"
    );
    assert!(approved >= 1);
}

// ---- helpers ----------------------------------------------------------------------------

fn judge(view: CsrView) -> Verdict {
    Scenario::new().judge(&view)
}

#[track_caller]
fn assert_only(v: &Verdict, want: &[&str]) {
    let mut got = codes(v);
    got.sort();
    let mut w = want.to_vec();
    w.sort();
    let msgs: Vec<String> = v.reasons.iter().map(|r| r.to_string()).collect();
    assert_eq!(got, w, "reasons: {msgs:#?}");
    assert_eq!(v.approve, want.is_empty());
}

#[track_caller]
fn assert_has(v: &Verdict, code: &str) {
    let msgs: Vec<String> = v.reasons.iter().map(|r| format!("{}: {r}", r.code())).collect();
    assert!(codes(v).contains(&code), "missing {code} in {msgs:#?}");
    assert!(!v.approve);
}

fn message(v: &Verdict, code: &str) -> String {
    v.reasons
        .iter()
        .find(|r| r.code() == code)
        .map(|r| r.to_string())
        .unwrap_or_else(|| panic!("no {code}"))
}

fn good_client() -> CsrView {
    client_view(Builder::node("worker-0").pem())
}

fn good_serving() -> CsrView {
    serving_view(
        "worker-0",
        Builder::serving("worker-0", &[dns("worker-0"), ip("192.168.111.30")]).pem(),
    )
}

fn serving_with(sans: &[Gn]) -> Verdict {
    judge(serving_view("worker-0", Builder::serving("worker-0", sans).pem()))
}

/// `openssl req -new` with the given key options and digest; None (and a printed skip) when
/// openssl is not installed.
fn openssl_csr(newkey: &[&str], digest: &str, subj: &str) -> Option<Vec<u8>> {
    let dir = tempfile::tempdir().unwrap();
    let key = dir.path().join("k.pem");
    let out = Command::new("openssl")
        .args(["req", "-new", "-nodes", "-keyout"])
        .arg(&key)
        .args(newkey)
        .arg(digest)
        .args(["-subj", subj, "-outform", "PEM"])
        .output();
    match out {
        Ok(o) if o.status.success() => Some(o.stdout),
        Ok(o) => panic!("openssl failed: {}", String::from_utf8_lossy(&o.stderr)),
        Err(e) => panic!("openssl not runnable ({e}): apt-get install openssl (scripts/test.sh installs it)"),
    }
}

const NODE_SUBJ: &str = "/O=system:nodes/CN=system:node:worker-0";

// ---- good requests ----------------------------------------------------------------------

#[test]
fn good_client_p256_is_approved() {
    let v = judge(good_client());
    assert_only(&v, &[]);
    assert_eq!(v.kind, Kind::Client);
    assert_eq!(v.node.as_deref(), Some("worker-0"));
}

#[test]
fn good_serving_p256_and_p384_are_approved() {
    let v = judge(good_serving());
    assert_only(&v, &[]);
    assert_eq!(v.kind, Kind::Serving);
    let mut b = Builder::serving("worker-0", &[dns("worker-0"), ip("192.168.111.30")]);
    b.key = Key::P384;
    assert_only(&judge(serving_view("worker-0", b.pem())), &[]);
}

#[test]
fn good_serving_ip_only_and_ipv6_expected_address_are_approved() {
    let mut sc = Scenario::new();
    sc.expected.nodes[0].ips.push("fd00:1101::30".parse().unwrap());
    let pem = Builder::serving("worker-0", &[ip("192.168.111.30"), ip("fd00:1101::30")]).pem();
    assert_only(&sc.judge(&serving_view("worker-0", pem)), &[]);
}

#[test]
fn rcgen_client_and_serving_requests() {
    use rcgen::{CertificateParams, DistinguishedName, DnType, KeyPair, SanType};
    let mut dn = DistinguishedName::new();
    dn.push(DnType::OrganizationName, "system:nodes");
    dn.push(DnType::CommonName, "system:node:worker-1");
    let mut p = CertificateParams::default();
    p.distinguished_name = dn.clone();
    let key = KeyPair::generate().unwrap();
    let pem = p.serialize_request(&key).unwrap().pem().unwrap();
    let v = judge(client_view(pem.into_bytes()));
    // rcgen writes an extensionRequest attribute even with no extension: a real kubelet does
    // not, and the checklist says "no extension request at all".
    let c = codes(&v);
    assert!(c.is_empty() || c == ["client-has-extensions"], "{:?}", v.reasons);

    let mut p = CertificateParams::default();
    p.distinguished_name = dn;
    p.subject_alt_names = vec![
        SanType::DnsName("worker-1".try_into().unwrap()),
        SanType::IpAddress("192.168.111.31".parse().unwrap()),
    ];
    let pem = p.serialize_request(&key).unwrap().pem().unwrap();
    assert_only(&judge(serving_view("worker-1", pem.into_bytes())), &[]);
}

#[test]
fn rsa_2048_sha256_client_with_key_encipherment_is_approved() {
    let Some(pem) = openssl_csr(&["-newkey", "rsa:2048"], "-sha256", NODE_SUBJ) else {
        return;
    };
    let mut v = client_view(pem);
    v.usages = vec![
        "digital signature".into(),
        "key encipherment".into(),
        "client auth".into(),
    ];
    assert_only(&judge(v), &[]);
}

// ---- PEM and DER ------------------------------------------------------------------------

#[test]
fn two_pem_blocks_are_rejected() {
    let mut pem = Builder::node("worker-0").pem();
    pem.extend(Builder::node("master-0").pem());
    let v = judge(client_view(pem));
    assert_has(&v, "pem");
    assert!(message(&v, "pem").contains("2 PEM blocks"));
    assert_eq!(v.node, None);
}

#[test]
fn text_around_the_pem_block_is_rejected() {
    let pem = Builder::node("worker-0").pem();
    let mut before = b"hello\n".to_vec();
    before.extend(&pem);
    assert_has(&judge(client_view(before)), "pem");
    let mut after = pem.clone();
    after.extend(b"trailing text\n");
    assert_has(&judge(client_view(after)), "pem");
}

#[test]
fn wrong_pem_label_and_empty_request_are_rejected() {
    let pem = String::from_utf8(Builder::node("worker-0").pem())
        .unwrap()
        .replace("CERTIFICATE REQUEST", "NEW CERTIFICATE REQUEST");
    assert_has(&judge(client_view(pem.into_bytes())), "pem");
    assert_has(&judge(client_view(vec![])), "pem");
}

#[test]
fn trailing_garbage_after_the_der_is_rejected() {
    let mut der = Builder::node("worker-0").der();
    der.extend([0x05, 0x00]);
    let v = judge(client_view(pem_of(&der)));
    assert_only(&v, &["der-trailing-data"]);
    assert_eq!(
        message(&v, "der-trailing-data"),
        "spec.request has 2 bytes after the DER request"
    );
}

#[test]
fn not_a_pkcs10_request_is_rejected() {
    let v = judge(client_view(pem_of(&seq(&[tlv(0x02, &[1])]))));
    assert_has(&v, "der-invalid");
}

#[test]
fn broken_signature_is_rejected() {
    let mut der = Builder::node("worker-0").der();
    let n = der.len();
    der[n - 1] ^= 0x01;
    assert_only(&judge(client_view(pem_of(&der))), &["signature-invalid"]);
}

#[test]
fn signature_of_another_subject_is_rejected() {
    // Swap the CN bytes after signing: the signature no longer covers what is read.
    let der = Builder::node("worker-0").der();
    let pos = der.windows(8).position(|w| w == b"worker-0").unwrap();
    let mut der2 = der.clone();
    der2[pos..pos + 8].copy_from_slice(b"worker-1");
    assert_has(&judge(client_view(pem_of(&der2))), "signature-invalid");
}

// ---- algorithms ------------------------------------------------------------------------

#[test]
fn rsa_1024_with_sha256_is_rejected() {
    let Some(pem) = openssl_csr(&["-newkey", "rsa:1024"], "-sha256", NODE_SUBJ) else {
        return;
    };
    let v = judge(client_view(pem));
    assert_has(&v, "key-not-allowed");
    assert!(message(&v, "key-not-allowed").contains("RSA 1024-bit"));
}

#[test]
fn rsa_1024_with_sha1_is_rejected_even_though_its_signature_verifies() {
    let Some(pem) = openssl_csr(&["-newkey", "rsa:1024"], "-sha1", NODE_SUBJ) else {
        return;
    };
    let v = judge(client_view(pem));
    // x509-parser (ring's legacy profile) verifies RSA-1024/SHA-1: only our allow-list refuses it.
    assert_only(&v, &["key-not-allowed", "signature-algorithm-not-allowed"]);
    assert!(message(&v, "signature-algorithm-not-allowed").contains("sha1WithRSAEncryption"));
}

#[test]
fn rsa_2048_with_sha1_is_rejected() {
    let Some(pem) = openssl_csr(&["-newkey", "rsa:2048"], "-sha1", NODE_SUBJ) else {
        return;
    };
    assert_only(&judge(client_view(pem)), &["signature-algorithm-not-allowed"]);
}

#[test]
fn ed25519_is_rejected_even_though_its_signature_verifies() {
    let mut b = Builder::node("worker-0");
    b.key = Key::Ed25519;
    let v = judge(client_view(b.pem()));
    assert_only(&v, &["key-not-allowed", "signature-algorithm-not-allowed"]);
    assert!(message(&v, "key-not-allowed").contains("Ed25519"));
}

#[test]
fn p256_with_sha384_is_rejected() {
    let Some(pem) = openssl_csr(
        &["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256"],
        "-sha384",
        NODE_SUBJ,
    ) else {
        return;
    };
    let v = judge(client_view(pem));
    assert_only(&v, &["signature-algorithm-not-allowed"]);
    assert!(message(&v, "signature-algorithm-not-allowed").contains("ecdsa-with-SHA384 with a P-256 key"));
}

#[test]
fn p521_is_rejected() {
    let Some(pem) = openssl_csr(
        &["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-521"],
        "-sha512",
        NODE_SUBJ,
    ) else {
        return;
    };
    let v = judge(client_view(pem));
    assert_has(&v, "key-not-allowed");
    assert!(message(&v, "key-not-allowed").contains("P-521"));
}

// ---- subject ----------------------------------------------------------------------------

#[test]
fn two_cns_are_rejected_go_would_read_the_last() {
    let mut b = Builder::node("worker-0");
    b.rdns.push(vec![(CN, utf8("system:node:master-0"))]);
    let v = judge(client_view(b.pem()));
    assert_only(&v, &["subject-cn-count"]);
    assert_eq!(
        message(&v, "subject-cn-count"),
        "subject has 2 CNs (system:node:worker-0, system:node:master-0), expected exactly one"
    );
    assert_eq!(v.node, None);
}

#[test]
fn extra_or_missing_organization_is_rejected() {
    let mut b = Builder::node("worker-0");
    b.rdns.insert(1, vec![(O, printable("system:masters"))]);
    assert_only(&judge(client_view(b.pem())), &["subject-organization"]);
    let mut b = Builder::node("worker-0");
    b.rdns.remove(0);
    assert_only(&judge(client_view(b.pem())), &["subject-organization"]);
    let mut b = Builder::node("worker-0");
    b.rdns[0] = vec![(O, printable("system:node"))];
    assert_only(&judge(client_view(b.pem())), &["subject-organization"]);
}

#[test]
fn other_subject_attributes_and_multi_valued_rdns_are_rejected() {
    let mut b = Builder::node("worker-0");
    b.rdns.push(vec![(OU, utf8("ops"))]);
    let v = judge(client_view(b.pem()));
    assert_only(&v, &["subject-extra-attribute"]);
    assert!(message(&v, "subject-extra-attribute").contains("OU=ops"));
    let mut b = Builder::node("worker-0");
    let o = b.rdns.remove(0);
    b.rdns[0].extend(o);
    assert_only(&judge(client_view(b.pem())), &["subject-multi-valued-rdn"]);
}

#[test]
fn cn_that_is_not_a_node_identity_is_rejected() {
    let mut b = Builder::node("x");
    b.rdns[1] = vec![(CN, utf8("worker-0"))];
    assert_only(&judge(client_view(b.pem())), &["subject-cn-not-node"]);
    b.rdns[1] = vec![(CN, utf8("system:node:"))];
    assert_only(&judge(client_view(b.pem())), &["subject-cn-not-node"]);
}

#[test]
fn names_with_control_or_bidi_characters_are_rejected_and_shown_escaped() {
    let evil = "worker-0\u{202e}1-rekrow\n";
    let v = judge(client_view(Builder::node(evil).pem()));
    assert_has(&v, "node-name-invalid");
    assert_has(&v, "not-expected-node");
    for r in &v.reasons {
        let s = r.to_string();
        assert!(!s.contains('\u{202e}') && !s.contains('\n'), "unescaped: {s:?}");
    }
    assert_eq!(
        message(&v, "node-name-invalid"),
        "node name worker-0\\u{202e}1-rekrow\\u{a} is not a lowercase DNS-1123 name"
    );
}

#[test]
fn uppercase_node_name_is_rejected() {
    let v = judge(client_view(Builder::node("Worker-0").pem()));
    assert_has(&v, "node-name-invalid");
    assert_has(&v, "not-expected-node");
}

// ---- status and lifetime ---------------------------------------------------------------

#[test]
fn csrs_that_are_not_pending_are_rejected() {
    for (conds, cert) in [
        (vec!["Approved"], false),
        (vec!["Denied"], false),
        (vec!["Failed"], false),
        (vec![], true),
    ] {
        let mut v = good_client();
        v.conditions = conds.iter().map(|s| s.to_string()).collect();
        v.has_certificate = cert;
        assert_only(&judge(v), &["not-pending"]);
    }
}

#[test]
fn expiration_seconds_outside_policy_is_rejected() {
    let mut v = good_client();
    v.expiration_seconds = Some(315_360_000);
    assert_only(&judge(v.clone()), &["expiration-too-long"]);
    v.expiration_seconds = Some(599);
    assert_only(&judge(v.clone()), &["expiration-too-short"]);
    v.expiration_seconds = Some(Policy::DEFAULT_MAX_EXPIRATION_SECONDS);
    assert_only(&judge(v.clone()), &[]);
    v.expiration_seconds = Some(3600);
    assert_only(&judge(v), &[]);
}

// ---- client ------------------------------------------------------------------------------

#[test]
fn client_from_a_node_identity_is_rejected() {
    let mut v = good_client();
    v.username = "system:node:worker-0".into();
    v.groups = vec!["system:nodes".into(), "system:authenticated".into()];
    let v = judge(v);
    assert_only(&v, &["client-requester", "client-groups"]);
    assert_eq!(
        message(&v, "client-requester"),
        "requester is system:node:worker-0, expected the node-bootstrapper service account"
    );
}

#[test]
fn client_groups_must_be_exactly_the_bootstrappers() {
    let mut v = good_client();
    v.groups.push("system:masters".into());
    assert_only(&judge(v.clone()), &["client-groups"]);
    v.groups.truncate(2);
    assert_only(&judge(v.clone()), &["client-groups"]);
    v.groups = BOOTSTRAPPER_GROUPS.iter().rev().map(|s| s.to_string()).collect();
    assert_only(&judge(v), &[]);
}

#[test]
fn client_with_a_san_is_rejected() {
    let b = Builder::serving("worker-0", &[dns("worker-0")]);
    let v = judge(client_view(b.pem()));
    assert_only(&v, &["client-has-san"]);
    assert_eq!(
        message(&v, "client-has-san"),
        "client CSR asks for SANs (DNS:worker-0); it must have none"
    );
}

#[test]
fn client_with_any_extension_request_is_rejected() {
    // Empty extensionRequest.
    let mut b = Builder::node("worker-0");
    b.attributes.push(ext_req_attr(&[vec![]]));
    let v = judge(client_view(b.pem()));
    assert_only(&v, &["client-has-extensions"]);
    assert_eq!(
        message(&v, "client-has-extensions"),
        "client CSR has an (empty) extensionRequest attribute; it must have none"
    );
    // basicConstraints CA:TRUE.
    let mut b = Builder::node("worker-0");
    b.attributes.push(ext_req_attr(&[vec![ext(
        BC_OID,
        true,
        &seq(&[tlv(0x01, &[0xff])]),
    )]]));
    let v = judge(client_view(b.pem()));
    assert_only(&v, &["client-has-extensions"]);
    assert!(message(&v, "client-has-extensions").contains("basicConstraints"));
}

#[test]
fn challenge_password_and_unknown_attributes_are_rejected() {
    let mut b = Builder::node("worker-0");
    b.attributes.push(seq(&[oid(CHALLENGE), set(&[utf8("hunter2")])]));
    let v = judge(client_view(b.pem()));
    assert_only(&v, &["unexpected-attribute"]);
    assert_eq!(
        message(&v, "unexpected-attribute"),
        "attribute challengePassword is not allowed"
    );
    let mut b = Builder::serving("worker-0", &[dns("worker-0"), ip("192.168.111.30")]);
    b.attributes.push(seq(&[oid("1.2.3.4.5"), set(&[utf8("x")])]));
    assert_only(
        &judge(serving_view("worker-0", b.pem())),
        &["unexpected-attribute"],
    );
}

#[test]
fn client_usages_must_be_exact() {
    let mut v = good_client();
    v.usages = vec![
        "digital signature".into(),
        "key encipherment".into(),
        "client auth".into(),
    ];
    assert_only(&judge(v.clone()), &[]);
    v.usages.push("server auth".into());
    assert_only(&judge(v.clone()), &["usages"]);
    v.usages = vec!["client auth".into()];
    assert_only(&judge(v.clone()), &["usages"]);
    v.usages = vec![
        "digital signature".into(),
        "client auth".into(),
        "client auth".into(),
    ];
    assert_only(&judge(v), &["usages"]);
}

#[test]
fn client_for_an_existing_node_is_rejected_even_if_expected() {
    let mut sc = Scenario::new();
    sc.existing.names.insert("worker-0".into());
    let v = sc.judge(&good_client());
    assert_only(&v, &["node-exists"]);
    assert_eq!(message(&v, "node-exists"), "node worker-0 already exists");
}

#[test]
fn client_for_an_unexpected_node_is_rejected() {
    let v = judge(client_view(Builder::node("worker-9").pem()));
    assert_only(&v, &["not-expected-node"]);
    // Prefix/suffix tricks on the node name are not the expected node either.
    assert_only(
        &judge(client_view(Builder::node("worker-00").pem())),
        &["not-expected-node"],
    );
    assert_only(
        &judge(client_view(Builder::node("worker-0.evil").pem())),
        &["not-expected-node"],
    );
}

#[test]
fn rogue_client_csr_racing_the_real_one_gets_only_one_approval() {
    let mut sc = Scenario::new();
    // csr-real was recorded on the batch first (compare-and-swap), so the rogue one loses.
    sc.approvals.approvals.push(RecordedApproval {
        node: "worker-0".into(),
        kind: Kind::Client,
        csr: "csr-real".into(),
        created: None,
        requester: None,
    });
    let mut rogue = good_client();
    rogue.name = "csr-rogue".into();
    let v = sc.judge(&rogue);
    assert_only(&v, &["already-approved"]);
    assert!(message(&v, "already-approved").contains("--reissue worker-0"));
    // The recorded CSR itself (run interrupted between the record and /approval) still passes.
    let mut real = good_client();
    real.name = "csr-real".into();
    assert_only(&sc.judge(&real), &[]);
    // A serving approval does not count against the client one, nor another node's.
    sc.approvals.approvals[0].kind = Kind::Serving;
    sc.approvals.approvals.push(RecordedApproval {
        node: "worker-1".into(),
        kind: Kind::Client,
        csr: "csr-w1".into(),
        created: None,
        requester: None,
    });
    assert_only(&sc.judge(&rogue), &[]);
}

#[test]
fn reissue_allows_exactly_one_more_client_approval() {
    let mut sc = Scenario::new();
    sc.expected.nodes[0].reissue = 1;
    sc.approvals.approvals.push(RecordedApproval {
        node: "worker-0".into(),
        kind: Kind::Client,
        csr: "csr-1".into(),
        created: None,
        requester: None,
    });
    assert_only(&sc.judge(&good_client()), &[]);
    sc.approvals.approvals.push(RecordedApproval {
        node: "worker-0".into(),
        kind: Kind::Client,
        csr: "csr-2".into(),
        created: None,
        requester: None,
    });
    assert_only(&sc.judge(&good_client()), &["already-approved"]);
}

#[test]
fn client_created_before_the_batch_is_rejected() {
    let mut v = good_client();
    v.created = Some(t("2026-01-10T09:59:59Z"));
    let v = judge(v);
    // Before the batch is before the host's reboot report too: both are said.
    assert_only(&v, &["created-before-batch", "created-before-reboot"]);
    assert_eq!(
        message(&v, "created-before-batch"),
        "CSR created at 2026-01-10T09:59:59Z, before worker-0's batch was recorded at 2026-01-10T10:00:00Z"
    );
    // The batch window alone (no reboot record, --trust-unverified-boot).
    let mut sc = Scenario::new();
    sc.expected.nodes[0].rebooted_at = None;
    sc.policy.trust_unverified_boot = true;
    let mut v = good_client();
    v.created = Some(t0());
    assert_only(&sc.judge(&v), &[]);
}

#[test]
fn client_created_after_token_expiry_is_rejected() {
    let mut sc = Scenario::new();
    sc.now = t("2026-01-11T12:00:00Z");
    let mut v = good_client();
    v.created = Some(token_expiry());
    assert_only(&sc.judge(&v), &["created-after-token-expiry"]);
    v.created = Some(t("2026-01-11T09:59:59Z"));
    assert_only(&sc.judge(&v), &[]);
}

#[test]
fn client_without_creation_time_or_from_the_future_is_rejected() {
    let mut v = good_client();
    v.created = None;
    assert_only(&judge(v), &["creation-time-unknown"]);
    let mut v = good_client();
    v.created = Some(t("2026-01-10T11:11:00Z"));
    assert_only(&judge(v), &["created-in-future"]);
}

// ---- serving -----------------------------------------------------------------------------

#[test]
fn serving_cn_must_equal_the_requester() {
    let mut v = serving_view(
        "worker-0",
        Builder::serving("worker-1", &[dns("worker-0"), ip("192.168.111.30")]).pem(),
    );
    v.username = "system:node:worker-0".into();
    let v = judge(v);
    assert_has(&v, "cn-mismatch");
    assert_eq!(
        message(&v, "cn-mismatch"),
        "CN system:node:worker-1 is not the requester system:node:worker-0"
    );
}

#[test]
fn serving_from_a_non_node_requester_is_rejected() {
    let mut v = good_serving();
    v.username = BOOTSTRAPPER.into();
    v.groups = BOOTSTRAPPER_GROUPS.iter().map(|s| s.to_string()).collect();
    assert_only(&judge(v), &["serving-requester", "serving-groups"]);
}

#[test]
fn serving_groups_must_include_system_nodes() {
    let mut v = good_serving();
    v.groups = vec!["system:authenticated".into()];
    let v = judge(v);
    assert_only(&v, &["serving-groups"]);
    assert_eq!(
        message(&v, "serving-groups"),
        "requester groups lack system:nodes"
    );
}

#[test]
fn serving_usages_must_be_exact() {
    let mut v = good_serving();
    v.usages.push("client auth".into());
    assert_only(&judge(v.clone()), &["usages"]);
    v.usages = vec![
        "digital signature".into(),
        "key encipherment".into(),
        "server auth".into(),
    ];
    assert_only(&judge(v), &[]);
}

#[test]
fn serving_without_san_is_rejected() {
    assert_only(
        &judge(serving_view("worker-0", Builder::node("worker-0").pem())),
        &["no-san"],
    );
}

#[test]
fn serving_email_and_uri_sans_are_rejected() {
    let v = serving_with(&[
        dns("worker-0"),
        Gn::Email("root@example.com".into()),
        Gn::Uri("spiffe://cluster.local/ns/kube-system/sa/admin".into()),
    ]);
    assert_only(&v, &["san-kind", "san-kind"]);
}

#[test]
fn serving_wildcard_dns_is_rejected() {
    let v = serving_with(&[dns("*.apps.ostest.test.metalkube.org"), ip("192.168.111.30")]);
    assert_only(&v, &["dns-san-wildcard"]);
}

#[test]
fn serving_dns_must_be_the_exact_hostname() {
    for bad in [
        "worker-0.evil",
        "worker-00",
        "WORKER-0",
        "worker-0.",
        "worker-1",
        "worker-0\u{0}",
    ] {
        let v = serving_with(&[dns(bad), ip("192.168.111.30")]);
        assert_only(&v, &["dns-san-not-hostname"]);
    }
    let v = serving_with(&[dns("worker-0.evil"), ip("192.168.111.30")]);
    assert_eq!(
        message(&v, "dns-san-not-hostname"),
        "DNS SAN worker-0.evil is not worker-0's hostname (worker-0)"
    );
}

#[test]
fn serving_api_server_and_service_names_are_rejected() {
    for bad in [
        "api.ostest.test.metalkube.org",
        "api-int.ostest.test.metalkube.org",
        "kubernetes.default.svc",
        "KUBERNETES",
        "foo.bar.svc.cluster.local",
    ] {
        let v = serving_with(&[dns(bad), ip("192.168.111.30")]);
        assert_only(&v, &["dns-san-api-server"]);
    }
}

#[test]
fn serving_foreign_ip_is_rejected() {
    let v = serving_with(&[dns("worker-0"), ip("192.168.111.30"), ip("10.0.0.9")]);
    assert_only(&v, &["ip-san-not-node-address"]);
    let m = message(&v, "ip-san-not-node-address");
    assert!(
        m.starts_with("IP SAN 10.0.0.9 is not one of worker-0's addresses (192.168.111.30); ")
            && m.ends_with("otherwise this CSR is not worker-0's"),
        "{m}"
    );
    // Another expected node's address is foreign too.
    assert_only(
        &serving_with(&[dns("worker-0"), ip("192.168.111.31")]),
        &["ip-san-not-node-address"],
    );
}

#[test]
fn serving_special_ips_are_rejected() {
    for (bad, what) in [
        ("127.0.0.1", "loopback"),
        ("::1", "loopback"),
        ("169.254.169.254", "link-local"),
        ("fe80::1", "link-local"),
        ("0.0.0.0", "unspecified"),
        ("::", "unspecified"),
        ("224.0.0.1", "multicast"),
        ("255.255.255.255", "broadcast"),
        ("::192.168.111.30", "IPv4-compatible"),
    ] {
        let v = serving_with(&[dns("worker-0"), ip(bad)]);
        assert_only(&v, &["ip-san-special"]);
        assert!(message(&v, "ip-san-special").contains(what), "{bad}");
    }
}

#[test]
fn serving_cluster_and_service_network_ips_are_rejected() {
    let v = serving_with(&[dns("worker-0"), ip("172.30.0.1")]);
    assert_only(&v, &["ip-san-service-network"]);
    assert_eq!(
        message(&v, "ip-san-service-network"),
        "IP SAN 172.30.0.1 is in the service network 172.30.0.0/16"
    );
    assert_only(
        &serving_with(&[dns("worker-0"), ip("10.128.2.5")]),
        &["ip-san-cluster-network"],
    );
    assert_only(
        &serving_with(&[dns("worker-0"), ip("fd02::1")]),
        &["ip-san-service-network"],
    );
}

#[test]
fn serving_even_an_expected_ip_in_the_service_network_is_rejected() {
    let mut sc = Scenario::new();
    sc.expected.nodes[0].ips = vec!["172.30.0.10".parse().unwrap()];
    let v = sc.judge(&serving_view(
        "worker-0",
        Builder::serving("worker-0", &[ip("172.30.0.10")]).pem(),
    ));
    assert_only(&v, &["ip-san-service-network"]);
}

#[test]
fn serving_ipv4_mapped_ipv6_is_rejected() {
    let v = serving_with(&[dns("worker-0"), ip("::ffff:192.168.111.30")]);
    assert_only(&v, &["ip-san-v4-mapped"]);
}

#[test]
fn serving_ip_sans_of_odd_length_are_rejected() {
    for len in [0usize, 3, 5, 8, 17] {
        let v = serving_with(&[dns("worker-0"), Gn::Ip(vec![192; len])]);
        assert_only(&v, &["ip-san-length"]);
        assert_eq!(
            message(&v, "ip-san-length"),
            format!("IP SAN is {len} bytes long, expected 4 or 16")
        );
    }
}

#[test]
fn serving_extensions_other_than_san_are_rejected() {
    let sans = [dns("worker-0"), ip("192.168.111.30")];
    let ca = ext(BC_OID, true, &seq(&[tlv(0x01, &[0xff])]));
    let ku = ext(KU_OID, true, &tlv(0x03, &[0x01, 0x06]));
    let eku = ext(EKU_OID, false, &seq(&[oid("1.3.6.1.5.5.7.3.2")]));
    let unknown = ext("1.3.6.1.4.1.99999.1", false, &octets(b"x"));
    for e in [ca, ku, eku, unknown] {
        let mut b = Builder::node("worker-0");
        b.attributes.push(ext_req_attr(&[vec![san_ext(&sans), e]]));
        assert_only(
            &judge(serving_view("worker-0", b.pem())),
            &["unexpected-extension"],
        );
    }
}

#[test]
fn duplicate_san_extension_is_rejected_and_both_are_checked() {
    let mut b = Builder::node("worker-0");
    b.attributes.push(ext_req_attr(&[vec![
        san_ext(&[dns("worker-0"), ip("192.168.111.30")]),
        san_ext(&[ip("192.168.111.20")]),
    ]]));
    let v = judge(serving_view("worker-0", b.pem()));
    assert_only(&v, &["duplicate-extension", "ip-san-not-node-address"]);
    assert_eq!(
        message(&v, "duplicate-extension"),
        "extension subjectAltName is requested more than once"
    );
}

#[test]
fn two_extension_request_attributes_are_rejected_and_the_second_is_checked() {
    // x509-parser's requested_extensions() reads only the first; Go merges both.
    let mut b = Builder::serving("worker-0", &[dns("worker-0"), ip("192.168.111.30")]);
    b.attributes
        .push(ext_req_attr(&[vec![san_ext(&[ip("192.168.111.20")])]]));
    let v = judge(serving_view("worker-0", b.pem()));
    assert_only(
        &v,
        &[
            "duplicate-attribute",
            "duplicate-extension",
            "ip-san-not-node-address",
        ],
    );
    assert_eq!(
        message(&v, "duplicate-attribute"),
        "attribute extensionRequest appears more than once"
    );
}

#[test]
fn extension_request_with_two_values_is_rejected() {
    let mut b = Builder::node("worker-0");
    b.attributes.push(ext_req_attr(&[
        vec![san_ext(&[dns("worker-0")])],
        vec![ext(BC_OID, false, &seq(&[]))],
    ]));
    let v = judge(serving_view("worker-0", b.pem()));
    assert_only(&v, &["extension-request-values", "unexpected-extension"]);
}

#[test]
fn second_serving_csr_is_rejected() {
    let mut sc = Scenario::new();
    sc.approvals.approvals.push(RecordedApproval {
        node: "worker-0".into(),
        kind: Kind::Serving,
        csr: "csr-first".into(),
        created: None,
        requester: None,
    });
    let v = sc.judge(&good_serving());
    assert_only(&v, &["already-approved"]);
    assert_eq!(v.node.as_deref(), Some("worker-0"));
}

#[test]
fn serving_for_a_dhcp_node_with_unknown_ips_gets_a_hint() {
    let mut sc = Scenario::new();
    sc.expected.nodes[0].ips.clear();
    let v = sc.judge(&good_serving());
    assert_only(&v, &["no-expected-addresses"]);
    assert!(message(&v, "no-expected-addresses").contains("--node worker-0=IP"));
    // Even a DNS-only request is not approved without known addresses.
    let v = sc.judge(&serving_view(
        "worker-0",
        Builder::serving("worker-0", &[dns("worker-0")]).pem(),
    ));
    assert_only(&v, &["no-expected-addresses"]);
}

#[test]
fn serving_for_an_unexpected_node_is_rejected() {
    let v = judge(serving_view(
        "master-0",
        Builder::serving("master-0", &[dns("master-0"), ip("192.168.111.20")]).pem(),
    ));
    assert_has(&v, "not-expected-node");
    assert_eq!(v.node.as_deref(), Some("master-0"));
}

// ---- other signers, several failures, output ------------------------------------------

#[test]
fn other_signers_are_never_approved() {
    for signer in [
        "kubernetes.io/kube-apiserver-client",
        "kubernetes.io/legacy-unknown",
        "example.com/x",
        "",
    ] {
        let mut v = good_client();
        v.signer_name = signer.into();
        let v = judge(v);
        assert_eq!(v.kind, Kind::NotKubelet);
        assert_only(&v, &["other-signer"]);
    }
}

#[test]
fn every_failed_check_is_reported_not_only_the_first() {
    let mut b = Builder::serving(
        "master-1",
        &[dns("*.evil"), ip("127.0.0.1"), Gn::Ip(vec![1, 2, 3, 4, 5])],
    );
    b.rdns.push(vec![(OU, utf8("x"))]);
    let mut v = client_view(b.pem());
    v.username = "system:anonymous".into();
    v.groups.clear();
    v.usages = vec!["server auth".into()];
    v.conditions = vec!["Denied".into()];
    v.expiration_seconds = Some(i32::MAX);
    v.created = Some(t("2020-01-01T00:00:00Z"));
    let v = judge(v);
    for code in [
        "subject-extra-attribute",
        "not-pending",
        "expiration-too-long",
        "client-requester",
        "client-groups",
        "client-has-san",
        "usages",
        "node-exists",
        "not-expected-node",
    ] {
        assert_has(&v, code);
    }
}

#[test]
fn verdict_serializes_with_codes_and_messages() {
    let v = judge(client_view(Builder::node("worker-9").pem()));
    let j = serde_json::to_value(&v).unwrap();
    assert_eq!(j["kind"], "client");
    assert_eq!(j["node"], "worker-9");
    assert_eq!(j["approve"], false);
    assert_eq!(j["reasons"][0]["code"], "not-expected-node");
    assert_eq!(
        j["reasons"][0]["message"],
        "node worker-9 is not an expected new node"
    );
}

// ---- structure beyond what x509-parser checks ------------------------------------------

/// Splits a DER SEQUENCE into its elements (test helper; definite short/long lengths).
fn elements(der: &[u8]) -> Vec<Vec<u8>> {
    fn read_len(b: &[u8]) -> (usize, usize) {
        if b[0] < 0x80 {
            (b[0] as usize, 1)
        } else {
            let n = (b[0] & 0x7f) as usize;
            (b[1..=n].iter().fold(0usize, |a, x| a << 8 | *x as usize), 1 + n)
        }
    }
    let (len, l) = read_len(&der[1..]);
    let mut body = &der[1 + l..1 + l + len];
    let mut out = Vec::new();
    while !body.is_empty() {
        let (len, l) = read_len(&body[1..]);
        out.push(body[..1 + l + len].to_vec());
        body = &body[1 + l + len..];
    }
    out
}

#[test]
fn extra_element_inside_the_outer_sequence_is_rejected() {
    let der = Builder::node("worker-0").der();
    let mut parts = elements(&der);
    assert_eq!(parts.len(), 3);
    parts.push(tlv(0x05, &[]));
    let v = judge(client_view(pem_of(&seq(&parts))));
    assert!(!v.approve, "{:?}", v.reasons);
    assert!(
        codes(&v)
            .iter()
            .any(|c| ["der-invalid", "der-trailing-data"].contains(c)),
        "{:?}",
        v.reasons
    );
}

#[test]
fn request_version_other_than_v1_is_rejected() {
    let mut b = Builder::node("worker-0");
    b.cri_hook = Some(|cri| {
        let mut e = elements(&cri);
        e[0] = tlv(0x02, &[1]);
        seq(&e)
    });
    let v = judge(client_view(b.pem()));
    assert_only(&v, &["version"]);
    assert_eq!(message(&v, "version"), "request version is 1, expected 0 (v1)");
}

#[test]
fn csr_view_from_k8s_reads_status_and_creation_time() {
    let yaml = format!(
        "apiVersion: certificates.k8s.io/v1\nkind: CertificateSigningRequest\nmetadata:\n  name: csr-x\n  creationTimestamp: \"2026-01-10T10:30:00Z\"\nspec:\n  signerName: {CLIENT_SIGNER}\n  request: {}\n  usages: [digital signature, client auth]\n  username: {BOOTSTRAPPER}\n  groups: [system:serviceaccounts, system:serviceaccounts:openshift-machine-config-operator, system:authenticated]\nstatus:\n  conditions:\n  - type: Approved\n    status: \"True\"\n  certificate: {}\n",
        base64_of(&Builder::node("worker-0").pem()),
        base64_of(b"cert")
    );
    let obj: CertificateSigningRequest = serde_saphyr::from_str(&yaml).unwrap();
    let view = CsrView::from_k8s(&obj);
    assert_eq!(view.name, "csr-x");
    assert_eq!(view.created, Some(created()));
    assert_eq!(view.conditions, ["Approved"]);
    assert!(view.has_certificate);
    assert_eq!(view.kind(), Kind::Client);
    let v = judge(view);
    assert_only(&v, &["not-pending"]);
    assert_eq!(
        message(&v, "not-pending"),
        "CSR is not pending (Approved, certificate issued)"
    );
}

fn base64_of(b: &[u8]) -> String {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD.encode(b)
}

#[test]
fn extra_elements_inside_signed_structures_are_rejected() {
    // Inside the CRI the signature still verifies: only the structure check catches these.
    let mut b = Builder::node("worker-0");
    b.cri_hook = Some(|cri| {
        let mut e = elements(&cri);
        let mut spki = elements(&e[2]);
        spki.push(tlv(0x05, &[]));
        e[2] = seq(&spki);
        seq(&e)
    });
    let v = judge(client_view(b.pem()));
    assert_only(&v, &["der-invalid"]);
    assert!(
        message(&v, "der-invalid").contains("subjectPKInfo"),
        "{}",
        message(&v, "der-invalid")
    );

    // A second value in the CN's AttributeTypeAndValue: some parsers would read that one.
    let mut b = Builder::node("worker-0");
    b.cri_hook = Some(|cri| {
        let mut e = elements(&cri);
        let mut rdns = elements(&e[1]);
        let mut atv = elements(&elements(&rdns[1])[0]);
        atv.push(utf8("system:node:master-0"));
        rdns[1] = set(&[seq(&atv)]);
        e[1] = seq(&rdns);
        seq(&e)
    });
    let v = judge(client_view(b.pem()));
    assert_has(&v, "der-invalid");
    assert!(!codes(&v).contains(&"signature-invalid"));

    // Data after the attributes inside the CRI.
    let mut b = Builder::node("worker-0");
    b.cri_hook = Some(|cri| {
        let mut e = elements(&cri);
        e.push(tlv(0x05, &[]));
        seq(&e)
    });
    assert_only(&judge(client_view(b.pem())), &["der-invalid"]);
}

#[test]
fn malformed_san_and_non_der_extensions_are_rejected() {
    // SAN value that is not a SEQUENCE of GeneralName.
    let mut b = Builder::node("worker-0");
    b.attributes
        .push(ext_req_attr(&[vec![ext(SAN_OID, false, &utf8("worker-0"))]]));
    let v = judge(serving_view("worker-0", b.pem()));
    assert_only(&v, &["san-malformed", "no-san"]);
    // Empty GeneralNames.
    let mut b = Builder::node("worker-0");
    b.attributes
        .push(ext_req_attr(&[vec![ext(SAN_OID, false, &seq(&[]))]]));
    let v = judge(serving_view("worker-0", b.pem()));
    assert_only(&v, &["san-malformed", "no-san"]);
    // critical explicitly FALSE: DER forbids encoding the DEFAULT.
    let mut b = Builder::node("worker-0");
    let e = seq(&[
        oid(SAN_OID),
        tlv(0x01, &[0x00]),
        octets(&san_value(&[dns("worker-0"), ip("192.168.111.30")])),
    ]);
    b.attributes.push(ext_req_attr(&[vec![e]]));
    let v = judge(serving_view("worker-0", b.pem()));
    assert_only(&v, &["attributes-malformed", "no-san"]);
}

#[test]
fn kind_and_reason_codes_are_stable_strings() {
    assert_eq!(serde_json::to_value(Kind::NotKubelet).unwrap(), "not-kubelet");
    assert_eq!(Kind::NotKubelet.to_string(), "not-kubelet");
    assert_eq!(Reason::NoSan.code(), "no-san");
    assert_eq!(Reason::MultiValuedRdn.code(), "subject-multi-valued-rdn");
}

// ---- several CSRs at once (verdict_all) ---------------------------------------------------

fn named(mut v: CsrView, name: &str, created_at: &str) -> CsrView {
    v.name = name.into();
    v.created = Some(t(created_at));
    v
}

#[test]
fn rival_client_csrs_with_different_keys_are_both_held() {
    let sc = Scenario::new();
    let real = named(good_client(), "csr-real", "2026-01-10T10:30:00Z");
    let rival = named(good_client(), "csr-rival", "2026-01-10T10:30:01Z");
    let other = named(
        client_view(Builder::node("worker-1").pem()),
        "csr-w1",
        "2026-01-10T10:31:00Z",
    );
    let vs = verdict_all(
        &[real.clone(), rival.clone(), other],
        &sc.expected,
        &sc.existing,
        &sc.approvals,
        &sc.policy,
        sc.now,
    );
    // One second apart with different keys: no kubelet re-keys that fast (issue 14).
    assert_only(&vs[0], &["second-requester"]);
    assert_only(&vs[1], &["second-requester"]);
    assert_only(&vs[2], &[]);
    assert!(message(&vs[0], "second-requester").starts_with(
        "a second requester exists: 2 pending client CSRs for worker-0 with different keys (csr-real at 2026-01-10T10:30:00Z, csr-rival at 2026-01-10T10:30:01Z)"
    ));
    // Each alone passes: only the listing shows the race.
    assert_only(&sc.judge(&real), &[]);
    assert_only(&sc.judge(&rival), &[]);
    // Without a reboot record (approved only on --trust-unverified-boot) the old rule holds both.
    let mut sc = Scenario::new();
    sc.expected.nodes[0].rebooted_at = None;
    sc.policy.trust_unverified_boot = true;
    let vs = verdict_all(
        &[real, rival],
        &sc.expected,
        &sc.existing,
        &sc.approvals,
        &sc.policy,
        sc.now,
    );
    assert!(message(&vs[0], "competing-requests")
        .starts_with("2 pending client CSRs for worker-0 pass with different keys (csr-real, csr-rival)"));
}

#[test]
fn kubelet_retries_with_the_same_key_approve_only_the_newest() {
    let sc = Scenario::new();
    let pem = Builder::node("worker-0").pem();
    let old = named(client_view(pem.clone()), "csr-old", "2026-01-10T10:30:00Z");
    let new = named(client_view(pem), "csr-new", "2026-01-10T10:45:00Z");
    let vs = verdict_all(
        &[new, old],
        &sc.expected,
        &sc.existing,
        &sc.approvals,
        &sc.policy,
        sc.now,
    );
    assert_only(&vs[0], &[]);
    assert_only(&vs[1], &["superseded"]);
    assert!(message(&vs[1], "superseded")
        .starts_with("a newer client CSR for worker-0 (csr-new) is approved instead"));
}

#[test]
fn kubelet_rekeying_every_15_minutes_approves_only_the_newest() {
    let sc = Scenario::new();
    let a = named(good_client(), "csr-a", "2026-01-10T10:21:00Z");
    let b = named(good_client(), "csr-b", "2026-01-10T10:36:00Z");
    let c = named(good_client(), "csr-c", "2026-01-10T10:51:00Z");
    let vs = verdict_all(
        &[a, b, c],
        &sc.expected,
        &sc.existing,
        &sc.approvals,
        &sc.policy,
        sc.now,
    );
    assert_only(&vs[0], &["superseded"]);
    assert_only(&vs[1], &["superseded"]);
    assert_only(&vs[2], &[]);
}

#[test]
fn client_csr_made_before_the_hosts_reboot_report_is_never_approved() {
    let sc = Scenario::new();
    let rogue = named(good_client(), "csr-rogue", "2026-01-10T10:05:00Z");
    assert_only(&sc.judge(&rogue), &["created-before-reboot"]);
    let mut sc = Scenario::new();
    sc.expected.nodes[0].rebooted_at = None;
    assert_only(&sc.judge(&good_client()), &["boot-unverified"]);
    sc.policy.trust_unverified_boot = true;
    assert_only(&sc.judge(&good_client()), &[]);
}

#[test]
fn several_serving_csrs_approve_only_the_newest_and_rejected_ones_do_not_count() {
    let sc = Scenario::new();
    let a = named(good_serving(), "csr-a", "2026-01-10T10:40:00Z");
    let b = named(good_serving(), "csr-b", "2026-01-10T10:50:00Z");
    let bad = named(
        serving_view(
            "worker-0",
            Builder::serving("worker-0", &[dns("worker-0"), ip("10.0.0.9")]).pem(),
        ),
        "csr-z",
        "2026-01-10T10:55:00Z",
    );
    let vs = verdict_all(
        &[a, b, bad],
        &sc.expected,
        &sc.existing,
        &sc.approvals,
        &sc.policy,
        sc.now,
    );
    assert_only(&vs[0], &["superseded"]);
    assert_only(&vs[1], &[]);
    assert_only(&vs[2], &["ip-san-not-node-address"]);
}

#[test]
fn object_identifiers_with_a_wrong_tag_are_rejected() {
    // asn1-rs 0.7 reads any primitive TLV as an OID: a PrintableString-tagged "2.5.4.3" is a
    // CN to x509-parser. Signed validly, so only our own walk can refuse it.
    fn retag(cri: Vec<u8>, pattern: &[u8], tag: u8) -> Vec<u8> {
        let mut cri = cri;
        let pos = cri
            .windows(pattern.len())
            .position(|w| w == pattern)
            .expect("pattern in CRI");
        cri[pos] = tag;
        cri
    }
    let mut b = Builder::node("worker-0");
    b.cri_hook = Some(|cri| retag(cri, &[0x06, 0x03, 0x55, 0x04, 0x03], 0x13));
    let v = judge(client_view(b.pem()));
    assert_has(&v, "der-invalid");
    assert!(!codes(&v).contains(&"signature-invalid"), "{:?}", v.reasons);
    assert!(message(&v, "der-invalid").contains("subject attribute type is not an OBJECT IDENTIFIER"));

    // The key algorithm (id-ecPublicKey) with a wrong tag.
    let mut b = Builder::node("worker-0");
    b.cri_hook = Some(|cri| retag(cri, &[0x06, 0x07, 0x2a, 0x86, 0x48, 0xce, 0x3d, 0x02, 0x01], 0x04));
    let v = judge(client_view(b.pem()));
    assert!(!v.approve);
    assert!(
        codes(&v).contains(&"der-invalid") || codes(&v).contains(&"key-not-allowed"),
        "{:?}",
        v.reasons
    );

    // The subjectAltName extension id with a wrong tag.
    let mut b = Builder::serving("worker-0", &[dns("worker-0"), ip("192.168.111.30")]);
    b.cri_hook = Some(|cri| retag(cri, &[0x06, 0x03, 0x55, 0x1d, 0x11], 0x0c));
    let v = judge(serving_view("worker-0", b.pem()));
    assert!(!v.approve);
    assert!(
        codes(&v)
            .iter()
            .any(|c| ["attributes-malformed", "der-invalid"].contains(c)),
        "{:?}",
        v.reasons
    );

    // Outside the signed part: the signature algorithm OID with a wrong tag.
    let der = Builder::node("worker-0").der();
    let pat = [
        0x30u8, 0x0a, 0x06, 0x08, 0x2a, 0x86, 0x48, 0xce, 0x3d, 0x04, 0x03, 0x02,
    ];
    let pos = der.windows(12).rposition(|w| w == pat).unwrap();
    let mut d = der.clone();
    d[pos + 2] = 0x13;
    assert_has(&judge(client_view(pem_of(&d))), "der-invalid");
}

#[test]
fn non_minimal_object_identifier_encoding_is_rejected() {
    // 2.5.4.3 written with a padded sub-identifier (0x80 0x03): same number, different bytes.
    let mut b = Builder::node("worker-0");
    b.cri_hook = Some(|cri| {
        // Re-encode the CN's AttributeTypeAndValue so the enclosing lengths stay right.
        let mut parts = elements(&cri);
        let mut rdns = elements(&parts[1]);
        let atv = elements(&elements(&rdns[1])[0]);
        rdns[1] = set(&[seq(&[vec![0x06, 0x04, 0x55, 0x04, 0x80, 0x03], atv[1].clone()])]);
        parts[1] = seq(&rdns);
        seq(&parts)
    });
    let v = judge(client_view(b.pem()));
    assert_has(&v, "der-invalid");
    assert!(
        message(&v, "der-invalid").contains("not a valid OBJECT IDENTIFIER encoding"),
        "{:?}",
        v.reasons
    );
}

#[test]
fn non_minimal_length_encoding_is_rejected() {
    // The CN value's length written in long form (0x81 0x14 instead of 0x14): BER, not DER.
    let mut b = Builder::node("worker-0");
    b.cri_hook = Some(|cri| {
        let mut parts = elements(&cri);
        let mut rdns = elements(&parts[1]);
        let atv = elements(&elements(&rdns[1])[0]);
        let mut value = vec![0x0c, 0x81, 0x14];
        value.extend(b"system:node:worker-0");
        rdns[1] = set(&[seq(&[atv[0].clone(), value])]);
        parts[1] = seq(&rdns);
        seq(&parts)
    });
    let v = judge(client_view(b.pem()));
    assert_only(&v, &["der-invalid"]);
    assert!(
        message(&v, "der-invalid").contains("non-minimal length"),
        "{:?}",
        v.reasons
    );
}
