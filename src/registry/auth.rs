//! Credentials for a repository from a dockerconfigjson (the cluster's pull secret, or the file
//! of `--registry-config`).
//!
//! Keys are looked up as containers-auth.json(5) does: the most specific key wins, where a key
//! is a registry host (`quay.io`), or a namespace or repository under it
//! (`registry.example.com/team`); URL forms (`https://index.docker.io/v1/`) are reduced to their
//! host and path. Each entry holds `auth` (base64 `user:password`) or `username`/`password`; a
//! `registrytoken` is sent as a Bearer token. `identitytoken` (an OAuth2 refresh token) is not
//! supported and is treated as no credentials, with a debug log.

use base64::Engine;
use oci_client::secrets::RegistryAuth;
use serde::Deserialize;
use std::collections::BTreeMap;

/// A parsed dockerconfigjson.
#[derive(Default, Clone)]
pub struct DockerConfig {
    entries: BTreeMap<String, AuthEntry>,
}

impl std::fmt::Debug for DockerConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Keys only: the values are secrets.
        f.debug_struct("DockerConfig")
            .field("registries", &self.entries.keys().collect::<Vec<_>>())
            .finish()
    }
}

#[derive(Deserialize, Clone, Default)]
struct AuthEntry {
    #[serde(default)]
    auth: Option<String>,
    #[serde(default)]
    username: Option<String>,
    #[serde(default)]
    password: Option<String>,
    #[serde(default)]
    registrytoken: Option<String>,
    #[serde(default)]
    identitytoken: Option<String>,
}

#[derive(Deserialize)]
struct Raw {
    #[serde(default)]
    auths: BTreeMap<String, AuthEntry>,
}

/// `docker.io` spellings, reduced to one.
fn normalize_host(host: &str) -> &str {
    match host {
        "index.docker.io" | "registry-1.docker.io" | "registry.hub.docker.com" => "docker.io",
        h => h,
    }
}

/// `https://index.docker.io/v1/` → `docker.io`; `quay.io/ns/` → `quay.io/ns`.
fn normalize_key(key: &str) -> String {
    let k = key
        .trim()
        .trim_start_matches("https://")
        .trim_start_matches("http://")
        .trim_end_matches('/');
    let (host, path) = k.split_once('/').unwrap_or((k, ""));
    let host = normalize_host(host);
    // Docker Hub's legacy key carries the API version as a path.
    let path = if host == "docker.io" && (path == "v1" || path == "v2") {
        ""
    } else {
        path
    };
    if path.is_empty() {
        host.to_string()
    } else {
        format!("{host}/{path}")
    }
}

/// What kind of JSON fault `e` is, in words (never serde's text: it may quote a secret).
fn json_fault(e: &serde_json::Error) -> &'static str {
    match e.classify() {
        serde_json::error::Category::Syntax => "not valid JSON",
        serde_json::error::Category::Eof => "the JSON ends early",
        serde_json::error::Category::Data => "a value of the wrong type",
        serde_json::error::Category::Io => "a read error",
    }
}

impl DockerConfig {
    /// Parses a dockerconfigjson document. Errors (a message without any secret) when it is
    /// not JSON with an `auths` object.
    pub fn parse(json: &str) -> Result<DockerConfig, String> {
        let value: serde_json::Value = serde_json::from_str(json).map_err(|e| {
            // Position and category only: serde messages may quote a value (a secret).
            format!(
                "not a dockerconfigjson document ({} at line {}, column {})",
                json_fault(&e),
                e.line(),
                e.column()
            )
        })?;
        if !value.get("auths").is_some_and(|a| a.is_object()) {
            return Err("not a dockerconfigjson document (no \"auths\" object)".into());
        }
        let raw: Raw = serde_json::from_value(value).map_err(|e| {
            format!(
                "not a dockerconfigjson document ({} in \"auths\"; each entry is {{\"auth\": \"base64 of user:password\"}})",
                json_fault(&e)
            )
        })?;
        Ok(DockerConfig {
            entries: raw
                .auths
                .into_iter()
                .map(|(k, v)| (normalize_key(&k), v))
                .collect(),
        })
    }

    /// Whether no registry has credentials.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The key that applies to `repository` (`host[:port]/path`), if any.
    pub fn key_for(&self, repository: &str) -> Option<&str> {
        let (host, path) = repository.split_once('/').unwrap_or((repository, ""));
        let name = if path.is_empty() {
            normalize_host(host).to_string()
        } else {
            format!("{}/{path}", normalize_host(host))
        };
        self.entries
            .keys()
            .filter(|k| name == **k || name.starts_with(&format!("{k}/")))
            .max_by_key(|k| k.len())
            .map(String::as_str)
    }

    /// Credentials for `repository` (`host[:port]/path`); `Anonymous` when none apply.
    pub fn auth_for(&self, repository: &str) -> RegistryAuth {
        let Some(e) = self.key_for(repository).and_then(|k| self.entries.get(k)) else {
            return RegistryAuth::Anonymous;
        };
        if let Some(t) = e.registrytoken.as_ref().filter(|t| !t.is_empty()) {
            return RegistryAuth::Bearer(t.clone());
        }
        if let (Some(u), Some(p)) = (&e.username, &e.password) {
            if !u.is_empty() {
                return RegistryAuth::Basic(u.clone(), p.clone());
            }
        }
        if let Some(a) = e.auth.as_ref().filter(|a| !a.is_empty()) {
            if let Ok(bytes) = base64::engine::general_purpose::STANDARD.decode(a.trim()) {
                if let Ok(s) = String::from_utf8(bytes) {
                    if let Some((u, p)) = s.split_once(':') {
                        return RegistryAuth::Basic(u.to_string(), p.to_string());
                    }
                }
            }
            tracing::debug!(
                repository,
                "pull secret entry has an `auth` that is not base64 user:password"
            );
        }
        if e.identitytoken.is_some() {
            tracing::debug!(
                repository,
                "identitytoken credentials are not supported; pulling anonymously"
            );
        }
        RegistryAuth::Anonymous
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn b64(s: &str) -> String {
        base64::engine::general_purpose::STANDARD.encode(s)
    }

    #[test]
    fn most_specific_key_wins_and_forms() {
        let json = format!(
            r#"{{"auths":{{
              "quay.io":{{"auth":"{}"}},
              "quay.io/openshift-release-dev":{{"auth":"{}"}},
              "https://index.docker.io/v1/":{{"username":"hub","password":"pw"}},
              "reg:5000":{{"registrytoken":"tok"}},
              "bad":{{"auth":"%%%"}}
            }}}}"#,
            b64("wide:1"),
            b64("narrow:2:with-colon")
        );
        let c = DockerConfig::parse(&json).unwrap();
        let basic = |r: &str| match c.auth_for(r) {
            RegistryAuth::Basic(u, p) => format!("{u}:{p}"),
            RegistryAuth::Bearer(t) => format!("bearer {t}"),
            RegistryAuth::Anonymous => "anon".into(),
        };
        assert_eq!(
            basic("quay.io/openshift-release-dev/ocp-release"),
            "narrow:2:with-colon"
        );
        assert_eq!(basic("quay.io/other/x"), "wide:1");
        assert_eq!(basic("quay.iox/other/x"), "anon");
        assert_eq!(basic("docker.io/library/busybox"), "hub:pw");
        assert_eq!(basic("reg:5000/a"), "bearer tok");
        assert_eq!(basic("reg:5001/a"), "anon");
        assert_eq!(basic("bad/x"), "anon");
        assert!(DockerConfig::parse("[]").is_err());
        // The faults in words, never the document's text (it may hold a password).
        let e = DockerConfig::parse("{\"auths\": {\"r\": {\"auth\": 5}}, \"x\": \"SECRET\"}").unwrap_err();
        assert_eq!(e, "not a dockerconfigjson document (a value of the wrong type in \"auths\"; each entry is {\"auth\": \"base64 of user:password\"})");
        let e = DockerConfig::parse("{\"auths\": SECRET").unwrap_err();
        assert!(
            e.starts_with("not a dockerconfigjson document (not valid JSON at line 1, column ")
                && !e.contains("SECRET"),
            "{e}"
        );
        // Debug shows no secret.
        assert!(!format!("{c:?}").contains("pw"));
    }
}
