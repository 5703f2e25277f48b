//! Where to pull an image from: the cluster's mirrors first, then the source.
//!
//! The rules are those of containers-registries.conf(5) as the cluster's nodes apply them
//! (ImageDigestMirrorSet / ImageContentSourcePolicy → `[[registry]]` with `mirror-by-digest-only`,
//! ImageTagMirrorSet → `pull-from-mirror = "tag-only"`):
//! - digest mirrors (IDMS and legacy ICSP) apply only to references by digest, tag mirrors
//!   (ITMS) only to references by tag;
//! - a source matches a repository when it is the repository itself or a namespace of it
//!   (`quay.io/openshift-release-dev` matches `quay.io/openshift-release-dev/ocp-release`); a
//!   `*.example.com` source matches any host under that domain; the most specific (longest)
//!   matching source wins, and the mirrors of every mirror set naming that source are tried in
//!   order of appearance;
//! - the source itself is tried last unless one of those sets says `NeverContactSource`.

use crate::cluster::{MirrorEntry, Mirrors};

/// One place to try, in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PullCandidate {
    /// Full pull spec to fetch, e.g. `mirror.local:5000/ocp/release@sha256:…`.
    pub image: String,
    /// True for a mirror, false for the image's own (source) registry.
    pub mirror: bool,
}

/// A pull spec split into its repository name (`host[:port]/path`) and its suffix
/// (`@sha256:…` or `:tag`, possibly both as `:tag@sha256:…`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SplitRef {
    /// `host[:port]/path`.
    pub name: String,
    /// The tag, when present.
    pub tag: Option<String>,
    /// The digest (`sha256:<hex>`), when present.
    pub digest: Option<String>,
}

impl SplitRef {
    /// Splits `image` (`host/path[:tag][@digest]`). Errors (a message) when the repository
    /// part is empty or has no registry host (a bare `ubuntu` is not a pull spec a cluster
    /// would name; it would mean Docker Hub).
    pub fn parse(image: &str) -> Result<SplitRef, String> {
        let (rest, digest) = match image.split_once('@') {
            Some((r, d)) => (r, Some(d.to_string())),
            None => (image, None),
        };
        let slash = rest.rfind('/');
        let (name, tag) = match rest.rfind(':') {
            Some(c) if slash.is_none_or(|s| c > s) => (&rest[..c], Some(rest[c + 1..].to_string())),
            _ => (rest, None),
        };
        if name.is_empty() || !name.contains('/') {
            return Err(format!(
                "{image:?} is not a full pull spec (expected host/repository[:tag|@sha256:digest])"
            ));
        }
        if tag.is_none() && digest.is_none() {
            return Err(format!("{image:?} names neither a tag nor a digest"));
        }
        Ok(SplitRef {
            name: name.to_string(),
            tag,
            digest,
        })
    }

    /// `name` with the suffix appended again (the digest wins over a tag: by-digest pulls
    /// ignore the tag, as CRI-O does).
    pub fn with_name(&self, name: &str) -> String {
        match (&self.digest, &self.tag) {
            (Some(d), _) => format!("{name}@{d}"),
            (None, Some(t)) => format!("{name}:{t}"),
            (None, None) => name.to_string(),
        }
    }
}

/// How specific a source is for `name`: None when it does not match, else the length used to
/// pick the most specific one (exact prefixes beat wildcards), with the remainder of the name
/// to append to a mirror.
fn source_match<'n>(source: &str, name: &'n str) -> Option<(usize, &'n str)> {
    let source = source.trim_end_matches('/');
    if let Some(domain) = source.strip_prefix("*.") {
        let (host, path) = name.split_once('/').unwrap_or((name, ""));
        let host_only = host.split(':').next().unwrap_or(host);
        if host_only.ends_with(&format!(".{domain}")) {
            // Wildcards rank below any exact prefix.
            return Some((0, path));
        }
        return None;
    }
    if name == source {
        Some((source.len() + 1, ""))
    } else if let Some(rest) = name.strip_prefix(source).and_then(|r| r.strip_prefix('/')) {
        Some((source.len() + 1, rest))
    } else {
        None
    }
}

/// The places to pull `image` from, in order: the matching mirrors, then the source unless
/// `NeverContactSource`. Errors when `image` cannot be parsed ([`SplitRef::parse`]).
pub fn pull_candidates(image: &str, mirrors: &Mirrors) -> Result<Vec<PullCandidate>, String> {
    let r = SplitRef::parse(image)?;
    let rules: Vec<&MirrorEntry> = if r.digest.is_some() {
        mirrors
            .digest_mirrors
            .iter()
            .chain(mirrors.legacy_content_sources.iter())
            .collect()
    } else {
        mirrors.tag_mirrors.iter().collect()
    };
    let best = rules
        .iter()
        .filter_map(|e| source_match(&e.source, &r.name).map(|(n, _)| n))
        .max();
    let mut out: Vec<PullCandidate> = Vec::new();
    let mut never_source = false;
    if let Some(best) = best {
        for e in rules
            .iter()
            .filter(|e| source_match(&e.source, &r.name).map(|(n, _)| n) == Some(best))
        {
            let (_, rest) = source_match(&e.source, &r.name).unwrap_or((0, ""));
            if e.mirror_source_policy.as_deref() == Some("NeverContactSource") {
                never_source = true;
            }
            for m in &e.mirrors {
                let m = m.trim_end_matches('/');
                let name = if rest.is_empty() {
                    m.to_string()
                } else {
                    format!("{m}/{rest}")
                };
                let c = PullCandidate {
                    image: r.with_name(&name),
                    mirror: true,
                };
                if !out.contains(&c) {
                    out.push(c);
                }
            }
        }
    }
    if !never_source {
        out.push(PullCandidate {
            image: image.to_string(),
            mirror: false,
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    const D: &str = "sha256:0000000000000000000000000000000000000000000000000000000000000001";

    fn entry(source: &str, mirrors: &[&str], policy: Option<&str>) -> MirrorEntry {
        MirrorEntry {
            source: source.into(),
            mirrors: mirrors.iter().map(|s| s.to_string()).collect(),
            mirror_source_policy: policy.map(String::from),
        }
    }

    #[test]
    fn split_refs() {
        let r = SplitRef::parse(&format!("reg:5000/a/b:4.18@{D}")).unwrap();
        assert_eq!(r.name, "reg:5000/a/b");
        assert_eq!(r.tag.as_deref(), Some("4.18"));
        assert_eq!(r.digest.as_deref(), Some(D));
        let r = SplitRef::parse("reg:5000/a/b:4.18").unwrap();
        assert_eq!(
            (r.name.as_str(), r.tag.as_deref()),
            ("reg:5000/a/b", Some("4.18"))
        );
        assert!(SplitRef::parse("reg:5000/a/b").is_err());
        assert!(SplitRef::parse("ubuntu:22.04").is_err());
    }

    #[test]
    fn digest_mirrors_for_digests_tag_mirrors_for_tags() {
        let m = Mirrors {
            digest_mirrors: vec![entry(
                "quay.io/openshift-release-dev",
                &["m1/ocp", "m2/ocp"],
                None,
            )],
            tag_mirrors: vec![entry(
                "quay.io/openshift-release-dev",
                &["t1/ocp"],
                Some("NeverContactSource"),
            )],
            ..Default::default()
        };
        let by_digest = format!("quay.io/openshift-release-dev/ocp-release@{D}");
        let c = pull_candidates(&by_digest, &m).unwrap();
        let images: Vec<_> = c.iter().map(|c| (c.image.as_str(), c.mirror)).collect();
        assert_eq!(
            images,
            vec![
                (format!("m1/ocp/ocp-release@{D}").as_str(), true),
                (format!("m2/ocp/ocp-release@{D}").as_str(), true),
                (by_digest.as_str(), false)
            ]
        );
        let c = pull_candidates("quay.io/openshift-release-dev/ocp-release:4.18.1-x86_64", &m).unwrap();
        assert_eq!(
            c,
            vec![PullCandidate {
                image: "t1/ocp/ocp-release:4.18.1-x86_64".into(),
                mirror: true
            }]
        );
    }

    #[test]
    fn most_specific_source_and_never_contact_and_icsp() {
        let m = Mirrors {
            digest_mirrors: vec![
                entry("quay.io", &["wide"], None),
                entry(
                    "quay.io/openshift-release-dev/ocp-release",
                    &["exact/rel"],
                    Some("NeverContactSource"),
                ),
            ],
            legacy_content_sources: vec![entry(
                "quay.io/openshift-release-dev/ocp-release",
                &["legacy/rel", "exact/rel"],
                None,
            )],
            ..Default::default()
        };
        let c = pull_candidates(&format!("quay.io/openshift-release-dev/ocp-release@{D}"), &m).unwrap();
        let images: Vec<_> = c.iter().map(|c| c.image.clone()).collect();
        assert_eq!(images, vec![format!("exact/rel@{D}"), format!("legacy/rel@{D}")]);
        // The broad rule applies to other repositories, and the source is kept.
        let c = pull_candidates(&format!("quay.io/other/x@{D}"), &m).unwrap();
        assert_eq!(c[0].image, format!("wide/other/x@{D}"));
        assert_eq!(c.len(), 2);
        // A prefix that is not a path boundary does not match.
        let c = pull_candidates(&format!("quay.iox/a/b@{D}"), &m).unwrap();
        assert_eq!(c.len(), 1);
        assert!(!c[0].mirror);
    }

    #[test]
    fn wildcard_sources() {
        let m = Mirrors {
            digest_mirrors: vec![entry("*.example.com", &["mirror:5000/all"], None)],
            ..Default::default()
        };
        let c = pull_candidates(&format!("reg.example.com/ns/img@{D}"), &m).unwrap();
        assert_eq!(c[0].image, format!("mirror:5000/all/ns/img@{D}"));
        assert_eq!(
            pull_candidates(&format!("example.com/ns/img@{D}"), &m)
                .unwrap()
                .len(),
            1
        );
    }
}
