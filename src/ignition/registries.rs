//! `/etc/containers/registries.conf` (containers-registries.conf(5), version 2) from the
//! cluster's mirror sets, in the shape upstream's node-joiner acceptance data expects
//! (`node-joiner-testdata/add-nodes.txt` expected/registries.conf): top-level
//! `credential-helpers`, `short-name-mode`, `unqualified-search-registries`, then one
//! `[[registry]]` per mirrored source with its `[[registry.mirror]]` entries.
//!
//! Rules (the same the Machine Config Operator applies to ImageDigestMirrorSets and
//! ImageTagMirrorSets): digest mirrors only → `mirror-by-digest-only = true`; a source that
//! also has tag mirrors → `false`, with `pull-from-mirror = "digest-only"` / `"tag-only"` per
//! mirror; `mirrorSourcePolicy: NeverContactSource` → `blocked = true`. Legacy
//! ImageContentSourcePolicy entries count as digest mirrors. Sources keep the order the
//! cluster lists them in; mirrors keep their order of preference, duplicates dropped.

use crate::cluster::{MirrorEntry, Mirrors};

/// A TOML basic string (quotes and backslashes escaped, control characters as \uXXXX).
fn toml_str(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if c.is_control() => out.push_str(&format!("\\u{:04X}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// `PUBLIC_CONTAINER_REGISTRIES` of the node's assisted-service: the registries whose images
/// need no pull-secret entry. Without mirrors `quay.io` (where the release lives); with
/// mirrors the hosts of the mirrored sources, each once, in the cluster's order (what the
/// agent installer passes: the host pulls those through its mirrors).
pub fn public_registries(m: &Mirrors) -> String {
    let mut hosts: Vec<String> = Vec::new();
    for e in m
        .digest_mirrors
        .iter()
        .chain(&m.tag_mirrors)
        .chain(&m.legacy_content_sources)
    {
        let host = e
            .source
            .trim_start_matches("*.")
            .split('/')
            .next()
            .unwrap_or("")
            .to_string();
        if !host.is_empty() && !hosts.contains(&host) {
            hosts.push(host);
        }
    }
    if hosts.is_empty() {
        "quay.io".to_string()
    } else {
        hosts.join(",")
    }
}

#[derive(Default)]
struct Source {
    location: String,
    digest: Vec<String>,
    tag: Vec<String>,
    blocked: bool,
}

/// The registries.conf text, or `None` when the cluster has no mirrors (the live system's
/// own file is then left alone).
pub fn registries_conf(m: &Mirrors) -> Option<String> {
    let mut sources: Vec<Source> = Vec::new();
    let mut add = |e: &MirrorEntry, tag: bool| {
        let i = match sources.iter().position(|s| s.location == e.source) {
            Some(i) => i,
            None => {
                sources.push(Source {
                    location: e.source.clone(),
                    ..Default::default()
                });
                sources.len() - 1
            }
        };
        let s = &mut sources[i];
        let list = if tag { &mut s.tag } else { &mut s.digest };
        for mirror in &e.mirrors {
            if !list.contains(mirror) {
                list.push(mirror.clone());
            }
        }
        if e.mirror_source_policy.as_deref() == Some("NeverContactSource") {
            s.blocked = true;
        }
    };
    for e in m.digest_mirrors.iter().chain(&m.legacy_content_sources) {
        add(e, false);
    }
    for e in &m.tag_mirrors {
        add(e, true);
    }
    if sources.is_empty() {
        return None;
    }
    let mut out =
        String::from("credential-helpers = []\nshort-name-mode = \"\"\nunqualified-search-registries = []\n");
    for s in &sources {
        let mixed = !s.tag.is_empty() && !s.digest.is_empty();
        out.push_str(&format!(
            "\n[[registry]]\n  location = {}\n  mirror-by-digest-only = {}\n  prefix = \"\"\n",
            toml_str(&s.location),
            s.tag.is_empty()
        ));
        if s.blocked {
            out.push_str("  blocked = true\n");
        }
        for (mirrors, kind) in [(&s.digest, "digest-only"), (&s.tag, "tag-only")] {
            for mirror in mirrors {
                out.push_str(&format!(
                    "\n  [[registry.mirror]]\n    location = {}\n",
                    toml_str(mirror)
                ));
                if mixed {
                    out.push_str(&format!("    pull-from-mirror = \"{kind}\"\n"));
                }
            }
        }
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(src: &str, mirrors: &[&str], policy: Option<&str>) -> MirrorEntry {
        MirrorEntry {
            source: src.into(),
            mirrors: mirrors.iter().map(|s| s.to_string()).collect(),
            mirror_source_policy: policy.map(String::from),
        }
    }

    #[test]
    fn none_without_mirrors() {
        assert_eq!(registries_conf(&Mirrors::default()), None);
    }

    #[test]
    fn digest_tag_blocked_and_escaping() {
        let m = Mirrors {
            digest_mirrors: vec![entry("quay.io/a", &["m1/a", "m1/a"], Some("NeverContactSource"))],
            tag_mirrors: vec![entry("quay.io/a", &["m2/a"], None), entry("q\"x", &["m3"], None)],
            ..Default::default()
        };
        let t = registries_conf(&m).unwrap();
        assert!(t.contains("location = \"quay.io/a\"\n  mirror-by-digest-only = false\n  prefix = \"\"\n  blocked = true\n"), "{t}");
        assert_eq!(t.matches("location = \"m1/a\"").count(), 1, "{t}");
        assert!(
            t.contains("location = \"m1/a\"\n    pull-from-mirror = \"digest-only\""),
            "{t}"
        );
        assert!(
            t.contains("location = \"m2/a\"\n    pull-from-mirror = \"tag-only\""),
            "{t}"
        );
        assert!(
            t.contains("location = \"q\\\"x\"\n  mirror-by-digest-only = false"),
            "{t}"
        );
        assert!(!t.contains("location = \"m3\"\n    pull-from-mirror"), "{t}");
    }
}
