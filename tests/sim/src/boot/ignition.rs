//! The parts of an Ignition 3.x config a day-2 node's live system uses: files (inline data
//! URLs, optionally gzip-compressed), systemd units and the `core` user's SSH keys.
//!
//! Spec: coreos/ignition `docs/configuration-v3_4.md` (files `contents.source` /
//! `contents.compression` / `append`, units `enabled` / `contents` / `dropins`,
//! `passwd.users[].sshAuthorizedKeys`). Only `data:` URLs are read: a live system booted from
//! the ISO has no network before NetworkManager runs, so remote sources are reported as problems.

use std::collections::BTreeMap;
use std::io::Read;

use serde_json::Value;

/// A systemd unit from `systemd.units`.
#[derive(Debug, Clone, Default)]
pub struct Unit {
    pub name: String,
    pub enabled: Option<bool>,
    pub mask: bool,
    /// `contents` followed by every dropin's contents (for reading directives).
    pub text: String,
}

/// What the node reads from its config.
#[derive(Debug, Clone, Default)]
pub struct Config {
    /// `ignition.version`.
    pub version: String,
    /// Absolute path → decoded contents (append fragments appended).
    pub files: BTreeMap<String, Vec<u8>>,
    pub units: BTreeMap<String, Unit>,
    /// user name → SSH authorized keys.
    pub ssh_keys: BTreeMap<String, Vec<String>>,
    /// Problems met while reading (remote sources, bad data URLs), each naming the path.
    pub problems: Vec<String>,
}

impl Config {
    /// The file's contents as text (lossy), if the config has it.
    pub fn text(&self, path: &str) -> Option<String> {
        self.files
            .get(path)
            .map(|b| String::from_utf8_lossy(b).into_owned())
    }

    /// Files whose path starts with `prefix`.
    pub fn under<'a>(&'a self, prefix: &'a str) -> impl Iterator<Item = (&'a String, &'a Vec<u8>)> + 'a {
        self.files
            .range(prefix.to_string()..)
            .take_while(move |(k, _)| k.starts_with(prefix))
    }
}

/// Decodes an RFC 2397 data URL (`data:[<mediatype>][;base64],<data>`).
pub fn decode_data_url(url: &str) -> Result<Vec<u8>, String> {
    let rest = url
        .strip_prefix("data:")
        .ok_or_else(|| "not a data: URL".to_string())?;
    let (meta, data) = rest
        .split_once(',')
        .ok_or_else(|| "data URL has no ','".to_string())?;
    let raw: Vec<u8> = percent_encoding::percent_decode_str(data).collect();
    if meta.split(';').any(|p| p.eq_ignore_ascii_case("base64")) {
        use base64::Engine;
        let cleaned: Vec<u8> = raw.into_iter().filter(|b| !b.is_ascii_whitespace()).collect();
        base64::engine::general_purpose::STANDARD
            .decode(&cleaned)
            .map_err(|e| format!("data URL base64: {e}"))
    } else {
        Ok(raw)
    }
}

fn resource(v: &Value, what: &str, problems: &mut Vec<String>) -> Option<Vec<u8>> {
    let source = v.get("source").and_then(|s| s.as_str());
    let Some(source) = source else {
        // No source: an empty file (Ignition creates it empty).
        return Some(Vec::new());
    };
    let data = match decode_data_url(source) {
        Ok(d) => d,
        Err(e) => {
            if source.starts_with("data:") {
                problems.push(format!("{what}: {e}"));
            } else {
                let scheme = source.split(':').next().unwrap_or("");
                problems.push(format!(
                    "{what}: contents come from a {scheme}: URL; the live system has no network yet, inline it as a data: URL"
                ));
            }
            return None;
        }
    };
    match v.get("compression").and_then(|c| c.as_str()).unwrap_or("") {
        "" => Some(data),
        "gzip" => {
            let mut out = Vec::new();
            match flate2::read::GzDecoder::new(&data[..]).read_to_end(&mut out) {
                Ok(_) => Some(out),
                Err(e) => {
                    problems.push(format!("{what}: gzip contents do not decompress: {e}"));
                    None
                }
            }
        }
        other => {
            problems.push(format!("{what}: unsupported compression {other:?}"));
            None
        }
    }
}

/// Parses `config.ign`. Errors: not JSON, or not an Ignition 3.x config (the live ISO's
/// Ignition is v3; a 2.x config fails to boot).
pub fn parse(bytes: &[u8]) -> Result<Config, String> {
    let v: Value = serde_json::from_slice(bytes).map_err(|e| format!("config.ign is not JSON: {e}"))?;
    let version = v
        .pointer("/ignition/version")
        .and_then(|s| s.as_str())
        .ok_or_else(|| "config.ign lacks ignition.version".to_string())?
        .to_string();
    if !version.starts_with("3.") {
        return Err(format!(
            "config.ign has ignition.version {version:?}; the live ISO's Ignition reads 3.x"
        ));
    }
    let mut cfg = Config {
        version,
        ..Default::default()
    };
    for f in v
        .pointer("/storage/files")
        .and_then(|f| f.as_array())
        .into_iter()
        .flatten()
    {
        let Some(path) = f.get("path").and_then(|p| p.as_str()) else {
            cfg.problems.push("storage.files entry without path".into());
            continue;
        };
        let mut data = match f.get("contents") {
            Some(c) => match resource(c, path, &mut cfg.problems) {
                Some(d) => d,
                None => continue,
            },
            None => Vec::new(),
        };
        for a in f.get("append").and_then(|a| a.as_array()).into_iter().flatten() {
            if let Some(d) = resource(a, path, &mut cfg.problems) {
                data.extend_from_slice(&d);
            }
        }
        cfg.files.insert(path.to_string(), data);
    }
    for u in v
        .pointer("/systemd/units")
        .and_then(|u| u.as_array())
        .into_iter()
        .flatten()
    {
        let Some(name) = u.get("name").and_then(|n| n.as_str()) else {
            continue;
        };
        let mut text = u
            .get("contents")
            .and_then(|c| c.as_str())
            .unwrap_or("")
            .to_string();
        for d in u.get("dropins").and_then(|d| d.as_array()).into_iter().flatten() {
            text.push('\n');
            text.push_str(d.get("contents").and_then(|c| c.as_str()).unwrap_or(""));
        }
        cfg.units.insert(
            name.to_string(),
            Unit {
                name: name.to_string(),
                enabled: u.get("enabled").and_then(|e| e.as_bool()),
                mask: u.get("mask").and_then(|m| m.as_bool()).unwrap_or(false),
                text,
            },
        );
    }
    // Unit files written as plain files count too (e.g. /etc/systemd/system/x.service).
    let written: Vec<(String, String)> = cfg
        .files
        .iter()
        .filter_map(|(p, d)| {
            p.strip_prefix("/etc/systemd/system/")
                .filter(|n| !n.contains('/'))
                .map(|n| (n.to_string(), String::from_utf8_lossy(d).into_owned()))
        })
        .collect();
    for (name, text) in written {
        cfg.units.entry(name.clone()).or_insert(Unit {
            name,
            enabled: None,
            mask: false,
            text,
        });
    }
    for u in v
        .pointer("/passwd/users")
        .and_then(|u| u.as_array())
        .into_iter()
        .flatten()
    {
        let Some(name) = u.get("name").and_then(|n| n.as_str()) else {
            continue;
        };
        let keys = u
            .get("sshAuthorizedKeys")
            .and_then(|k| k.as_array())
            .map(|a| a.iter().filter_map(|k| k.as_str().map(String::from)).collect())
            .unwrap_or_default();
        cfg.ssh_keys.insert(name.to_string(), keys);
    }
    Ok(cfg)
}

/// `KEY=VALUE` lines of an environment file (systemd `EnvironmentFile=` syntax, simplified:
/// `#` comments, optional `export `, single or double quotes around the value).
pub fn env_file(text: &str) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    for line in text.lines() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') || line.starts_with(';') {
            continue;
        }
        let line = line.strip_prefix("export ").unwrap_or(line);
        if let Some((k, v)) = line.split_once('=') {
            let v = v.trim();
            let v = v
                .strip_prefix('"')
                .and_then(|v| v.strip_suffix('"'))
                .or_else(|| v.strip_prefix('\'').and_then(|v| v.strip_suffix('\'')))
                .unwrap_or(v);
            out.insert(k.trim().to_string(), v.to_string());
        }
    }
    out
}

/// Values of directive `key` (e.g. `After`) in a unit's text, split on whitespace.
pub fn unit_directive(text: &str, key: &str) -> Vec<String> {
    let mut out = Vec::new();
    for line in text.lines() {
        let line = line.trim();
        if let Some((k, v)) = line.split_once('=') {
            if k.trim() == key {
                out.extend(v.split_whitespace().map(String::from));
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn data_urls() {
        assert_eq!(decode_data_url("data:,a%20b").unwrap(), b"a b");
        assert_eq!(
            decode_data_url("data:text/plain;charset=utf-8;base64,aGk=").unwrap(),
            b"hi"
        );
        assert!(decode_data_url("https://x/y").is_err());
    }

    #[test]
    fn files_units_users_gzip_and_remote() {
        use base64::Engine;
        use std::io::Write;
        let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        e.write_all(b"zipped").unwrap();
        let gz = base64::engine::general_purpose::STANDARD.encode(e.finish().unwrap());
        let cfg = serde_json::json!({
            "ignition": {"version": "3.2.0"},
            "passwd": {"users": [{"name": "core", "sshAuthorizedKeys": ["ssh-ed25519 AAAA k"]}]},
            "storage": {"files": [
                {"path": "/a", "contents": {"source": "data:,x"}, "append": [{"source": "data:,y"}]},
                {"path": "/b", "contents": {"source": format!("data:;base64,{gz}"), "compression": "gzip"}},
                {"path": "/c", "contents": {"source": "https://example.com/c"}},
                {"path": "/etc/systemd/system/w.service", "contents": {"source": "data:,%5BUnit%5D%0AAfter=a.service%20b.service"}}
            ]},
            "systemd": {"units": [{"name": "u.service", "enabled": true, "contents": "[Unit]\nAfter=x.service\n", "dropins": [{"name": "10.conf", "contents": "[Unit]\nAfter=y.service"}]}]}
        });
        let c = parse(cfg.to_string().as_bytes()).unwrap();
        assert_eq!(c.files["/a"], b"xy");
        assert_eq!(c.files["/b"], b"zipped");
        assert!(!c.files.contains_key("/c"));
        assert!(
            c.problems[0].contains("/c: contents come from a https: URL"),
            "{:?}",
            c.problems
        );
        assert_eq!(c.ssh_keys["core"], vec!["ssh-ed25519 AAAA k"]);
        assert_eq!(
            unit_directive(&c.units["u.service"].text, "After"),
            vec!["x.service", "y.service"]
        );
        assert_eq!(
            unit_directive(&c.units["w.service"].text, "After"),
            vec!["a.service", "b.service"]
        );
        assert_eq!(c.units["u.service"].enabled, Some(true));
    }

    #[test]
    fn v2_is_refused() {
        let e = parse(br#"{"ignition":{"version":"2.2.0"}}"#).unwrap_err();
        assert!(e.contains("3.x"), "{e}");
    }

    #[test]
    fn env_files() {
        let m = env_file("# c\nA=1\nexport B=\"two words\"\nC='x=y'\n\n");
        assert_eq!(m["A"], "1");
        assert_eq!(m["B"], "two words");
        assert_eq!(m["C"], "x=y");
    }
}
