//! Property tests ("fuzzing" on stable; cargo-fuzz needs nightly and is not installed here):
//! the CSR parser and the verdict never panic on arbitrary bytes, arbitrary PEM, mutated valid
//! requests or arbitrary spec fields, and a mutated request is never approved.

use crate::csr_support;

use agent_day2::csr::*;
use csr_support::*;
use proptest::prelude::*;

/// Built once: key generation per case would dominate the run time.
fn seeds() -> &'static [(bool, Vec<u8>)] {
    static SEEDS: std::sync::OnceLock<Vec<(bool, Vec<u8>)>> = std::sync::OnceLock::new();
    SEEDS.get_or_init(build_seeds)
}

fn build_seeds() -> Vec<(bool, Vec<u8>)> {
    // (is_serving, DER)
    let mut v = vec![
        (false, Builder::node("worker-0").der()),
        (
            true,
            Builder::serving("worker-0", &[dns("worker-0"), ip("192.168.111.30")]).der(),
        ),
        (true, {
            let mut b = Builder::serving("worker-0", &[dns("worker-0"), ip("192.168.111.30")]);
            b.key = Key::P384;
            b.der()
        }),
    ];
    // An external case table's requests too, when $AGENT_DAY2_CSR_CASES names one (extra seeds;
    // the generated ones above are the test).
    let dir = std::env::var_os("AGENT_DAY2_CSR_CASES").unwrap_or_default();
    if let Ok(rd) = std::fs::read_dir(dir) {
        for e in rd.flatten() {
            if let Ok(pem) = std::fs::read(e.path().join("request.pem")) {
                if let Ok(p) = x509_parser::pem::parse_x509_pem(&pem) {
                    let serving = e.file_name().to_string_lossy().contains("serving");
                    v.push((serving, p.1.contents));
                }
            }
        }
    }
    v
}

/// Two client keys for worker-0 (a kubelet and a rival), one for worker-1, two serving
/// requests for worker-0, one bad serving request. Built once.
fn pool() -> &'static [CsrView] {
    static POOL: std::sync::OnceLock<Vec<CsrView>> = std::sync::OnceLock::new();
    POOL.get_or_init(|| {
        vec![
            client_view(Builder::node("worker-0").pem()),
            client_view(Builder::node("worker-0").pem()),
            client_view(Builder::node("worker-1").pem()),
            serving_view(
                "worker-0",
                Builder::serving("worker-0", &[dns("worker-0"), ip("192.168.111.30")]).pem(),
            ),
            serving_view(
                "worker-0",
                Builder::serving("worker-0", &[ip("192.168.111.30")]).pem(),
            ),
            serving_view("worker-0", Builder::serving("worker-0", &[ip("10.0.0.1")]).pem()),
        ]
    })
}

fn view(serving: bool, request: Vec<u8>) -> CsrView {
    if serving {
        serving_view("worker-0", request)
    } else {
        client_view(request)
    }
}

#[derive(Debug, Clone)]
enum Mutation {
    Flip(usize, u8),
    Set(usize, u8),
    Insert(usize, u8),
    Delete(usize),
    Truncate(usize),
}

fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        (any::<usize>(), 1u8..=255).prop_map(|(i, b)| Mutation::Flip(i, b)),
        (any::<usize>(), any::<u8>()).prop_map(|(i, b)| Mutation::Set(i, b)),
        (any::<usize>(), any::<u8>()).prop_map(|(i, b)| Mutation::Insert(i, b)),
        any::<usize>().prop_map(Mutation::Delete),
        any::<usize>().prop_map(Mutation::Truncate),
    ]
}

fn apply(der: &mut Vec<u8>, m: &Mutation) {
    let n = der.len().max(1);
    match *m {
        Mutation::Flip(i, b) => {
            if !der.is_empty() {
                der[i % n] ^= b
            }
        }
        Mutation::Set(i, b) => {
            if !der.is_empty() {
                der[i % n] = b
            }
        }
        Mutation::Insert(i, b) => der.insert(i % (der.len() + 1), b),
        Mutation::Delete(i) => {
            if !der.is_empty() {
                der.remove(i % n);
            }
        }
        Mutation::Truncate(i) => der.truncate(i % n),
    }
}

/// Characters that must never reach the terminal unescaped.
fn hidden(c: char) -> bool {
    c.is_control()
        || matches!(c, '\u{00ad}' | '\u{061c}' | '\u{180e}' | '\u{200b}'..='\u{200f}' | '\u{2028}'..='\u{202e}' | '\u{2060}'..='\u{2069}' | '\u{feff}' | '\u{fff9}'..='\u{fffb}')
}

fn check_invariants(v: &Verdict) {
    assert_eq!(v.approve, v.reasons.is_empty() && v.kind != Kind::NotKubelet);
    for r in &v.reasons {
        // Codes are stable identifiers; messages are printable (everything from the CSR escaped).
        assert!(!r.code().is_empty());
        let s = r.to_string();
        assert!(!s.chars().any(hidden), "{s:?}");
    }
}

proptest! {
    // PROPTEST_CASES=N runs longer campaigns (default 2000 per property).
    #![proptest_config(ProptestConfig {
        cases: std::env::var("PROPTEST_CASES").ok().and_then(|s| s.parse().ok()).unwrap_or(2000),
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    #[test]
    fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..2048), serving in any::<bool>()) {
        let _ = parse_request(&bytes);
        let v = Scenario::new().judge(&view(serving, bytes));
        check_invariants(&v);
        prop_assert!(!v.approve);
    }

    #[test]
    fn arbitrary_der_in_pem_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..2048), serving in any::<bool>()) {
        let v = Scenario::new().judge(&view(serving, pem_of(&bytes)));
        check_invariants(&v);
        prop_assert!(!v.approve);
    }

    #[test]
    fn der_shaped_garbage_never_panics(
        tags in proptest::collection::vec((any::<u8>(), proptest::collection::vec(any::<u8>(), 0..40)), 1..30),
    ) {
        // Nested TLVs built from random tags: reaches deeper parser states than flat noise.
        let mut inner = Vec::new();
        for (tag, body) in &tags {
            let mut b = body.clone();
            b.extend(&inner);
            inner = tlv(*tag, &b);
        }
        let der = seq(&[seq(&[tlv(0x02, &[0]), inner.clone(), inner.clone(), tlv(0xa0, &inner)]), seq(&[oid("1.2.840.10045.4.3.2")]), bitstring(&inner)]);
        let v = Scenario::new().judge(&view(true, pem_of(&der)));
        check_invariants(&v);
        prop_assert!(!v.approve);
    }

    #[test]
    fn mutated_valid_requests_never_panic_and_are_never_approved(
        seed in any::<prop::sample::Index>(),
        muts in proptest::collection::vec(mutation(), 1..6),
    ) {
        let seeds = seeds();
        let (serving, orig) = &seeds[seed.index(seeds.len())];
        let mut der = orig.clone();
        for m in &muts {
            apply(&mut der, m);
        }
        let v = Scenario::new().judge(&view(*serving, pem_of(&der)));
        check_invariants(&v);
        if der != *orig {
            prop_assert!(!v.approve, "mutated request approved: {:?}", muts);
        }
    }

    #[test]
    fn mutated_pem_text_never_panics(
        muts in proptest::collection::vec(mutation(), 1..6),
    ) {
        let mut pem = Builder::node("worker-0").pem();
        let orig = pem.clone();
        for m in &muts {
            apply(&mut pem, m);
        }
        let v = Scenario::new().judge(&client_view(pem.clone()));
        check_invariants(&v);
        // Whitespace-only changes around the block may keep it valid; anything else must not.
        let squash = |b: &[u8]| b.iter().copied().filter(|c| !c.is_ascii_whitespace()).collect::<Vec<u8>>();
        if squash(&pem) != squash(&orig) {
            prop_assert!(!v.approve);
        }
    }

    #[test]
    fn arbitrary_spec_fields_never_panic(
        username in ".{0,80}",
        groups in proptest::collection::vec(".{0,40}", 0..5),
        usages in proptest::collection::vec(".{0,20}", 0..5),
        signer in prop_oneof![Just(CLIENT_SIGNER.to_string()), Just(SERVING_SIGNER.to_string()), ".{0,40}"],
        expiration in any::<Option<i32>>(),
        conditions in proptest::collection::vec(".{0,10}", 0..3),
        created in any::<Option<i64>>(),
    ) {
        let mut v = serving_view("worker-0", Builder::serving("worker-0", &[dns("worker-0"), ip("192.168.111.30")]).pem());
        v.username = username.clone();
        v.groups = groups;
        v.usages = usages;
        v.signer_name = signer;
        v.expiration_seconds = expiration;
        v.conditions = conditions;
        v.created = created.and_then(|s| Time::from_second(s % 253_402_207_200).ok());
        let out = Scenario::new().judge(&v);
        check_invariants(&out);
        if out.approve {
            prop_assert_eq!(username, "system:node:worker-0");
        }
    }

    #[test]
    fn escape_for_display_is_bounded_and_printable(s in any::<String>(), max in 0usize..200) {
        let e = escape_for_display(&s, max);
        prop_assert!(e.chars().count() <= max);
        prop_assert!(!e.chars().any(hidden), "hidden character in {:?}", e);
        let plain = s.chars().all(|c| c != '\\' && !hidden(c));
        if plain && s.chars().count() <= max {
            prop_assert_eq!(e, s);
        }
    }

    #[test]
    fn verdict_all_approves_at_most_one_per_node_and_kind(
        picks in proptest::collection::vec((0usize..6, 0i64..3600), 0..8),
    ) {
        let pool = pool();
        let csrs: Vec<CsrView> = picks
            .iter()
            .enumerate()
            .map(|(n, (i, secs))| {
                let mut v = pool[*i].clone();
                v.name = format!("csr-{n}");
                v.created = Some(Time::from_second(t0().as_second() + secs).unwrap());
                v
            })
            .collect();
        let sc = Scenario::new();
        let all = verdict_all(&csrs, &sc.expected, &sc.existing, &sc.approvals, &sc.policy, sc.now);
        prop_assert_eq!(all.len(), csrs.len());
        let mut seen = std::collections::BTreeSet::new();
        for (v, c) in all.iter().zip(&csrs) {
            check_invariants(v);
            if v.approve {
                prop_assert!(sc.judge(c).approve);
                prop_assert!(seen.insert((v.node.clone(), v.kind)), "two approvals for {:?}", (v.node.clone(), v.kind));
            }
        }
    }
}
