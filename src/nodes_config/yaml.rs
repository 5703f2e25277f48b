//! YAML text → JSON value for user input, with duplicate keys reported by field path and
//! parser errors worded for users.
//!
//! serde-saphyr's default refusal of a repeated key says `duplicate mapping key: macAddress,
//! set DuplicateKeyPolicy in Options if acceptable`: no field path, and an option of the
//! library offered to the user. Here the document is read with repeated entries passed through
//! ([`serde_saphyr::DuplicateKeyPolicy::PassThrough`]) into a tree that keeps every entry and
//! the line of its key; [`load`] then builds the value (first entry wins) and lists each
//! repetition as a [`Duplicate`] with its path. Every other parser error is rendered with
//! serde-saphyr's [`UserMessageFormatter`](serde_saphyr::UserMessageFormatter) (no source
//! snippet, no developer advice): [`error_text`].

use std::fmt;

use serde::de::{self, Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Number, Value};

/// A key that appears more than once in the same mapping.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Duplicate {
    /// Path of the repeated key (`hosts[0].interfaces[0].macAddress`), in the notation of
    /// [`FieldError`](super::FieldError) paths.
    pub path: String,
    /// 1-based line of the first occurrence (0: unknown).
    pub first_line: u64,
    /// 1-based line of each later occurrence (0: unknown).
    pub again: Vec<u64>,
}

impl Duplicate {
    /// `given twice (lines 10 and 11); keep one (...)`.
    pub fn message(&self) -> String {
        let times = match self.again.len() {
            1 => "twice".to_string(),
            n => format!("{} times", n + 1),
        };
        let mut lines: Vec<String> = std::iter::once(self.first_line)
            .chain(self.again.iter().copied())
            .filter(|l| *l > 0)
            .map(|l| l.to_string())
            .collect();
        let at = match lines.len() {
            0 => String::new(),
            1 => format!(" (line {})", lines[0]),
            _ => {
                let last = lines.pop().unwrap_or_default();
                format!(" (lines {} and {last})", lines.join(", "))
            }
        };
        format!("given {times}{at}; keep one (YAML allows each key once per mapping)")
    }
}

/// Parses one YAML document into a JSON value; repeated keys are not an error here but listed
/// (the first entry's value is kept), so the caller reports them with the rest of its errors.
///
/// Errors: the YAML does not parse (the text of [`error_text`]: `line N column M: reason`).
pub fn load(text: &str) -> Result<(Value, Vec<Duplicate>), String> {
    let opts = serde_saphyr::options! {
        duplicate_keys: serde_saphyr::DuplicateKeyPolicy::PassThrough,
    };
    let node: Node = serde_saphyr::from_str_with_options(text, opts).map_err(|e| error_text(&e))?;
    let mut dups = Vec::new();
    let v = node.into_value("", &mut dups);
    Ok((v, dups))
}

/// A serde-saphyr error as one line for users: the reason and position, without the source
/// snippet and without advice meant for programmers (library options, Rust types).
pub fn error_text(e: &serde_saphyr::Error) -> String {
    let opts = serde_saphyr::render_options! {
        formatter: &serde_saphyr::UserMessageFormatter,
        snippets: serde_saphyr::SnippetMode::Off,
    };
    let s = e.render_with_options(opts);
    let s = s.lines().next().unwrap_or("").trim_start_matches("error: ");
    // `<reason> at line 2, column 3` → `line 2 column 3: <reason>` (the position first, as
    // the rest of our messages put the place first).
    if let Some(i) = s.rfind(" at line ") {
        let (reason, pos) = (&s[..i], &s[i + 4..]);
        if let Some((l, c)) = pos.split_once(", column ") {
            if l.trim_start_matches("line ").bytes().all(|b| b.is_ascii_digit())
                && c.bytes().all(|b| b.is_ascii_digit())
            {
                return format!("{l} column {c}: {reason}");
            }
        }
    }
    s.to_string()
}

/// A YAML node with every mapping entry kept, keys with their line.
enum Node {
    Null,
    Bool(bool),
    Number(Number),
    String(String),
    Seq(Vec<Node>),
    Map(Vec<(Key, Node)>),
}

struct Key {
    text: String,
    line: u64,
}

impl Node {
    fn into_value(self, path: &str, dups: &mut Vec<Duplicate>) -> Value {
        match self {
            Node::Null => Value::Null,
            Node::Bool(b) => Value::Bool(b),
            Node::Number(n) => Value::Number(n),
            Node::String(s) => Value::String(s),
            Node::Seq(items) => Value::Array(
                items
                    .into_iter()
                    .enumerate()
                    .map(|(i, n)| n.into_value(&format!("{path}[{i}]"), dups))
                    .collect(),
            ),
            Node::Map(entries) => {
                let mut m = Map::new();
                let mut first_line: Vec<(String, u64)> = Vec::new();
                let mut mine: Vec<Duplicate> = Vec::new();
                for (k, n) in entries {
                    let child = if path.is_empty() {
                        k.text.clone()
                    } else {
                        format!("{path}.{}", k.text)
                    };
                    if m.contains_key(&k.text) {
                        match mine.iter_mut().find(|d| d.path == child) {
                            Some(d) => d.again.push(k.line),
                            None => mine.push(Duplicate {
                                path: child,
                                first_line: first_line
                                    .iter()
                                    .find(|(t, _)| *t == k.text)
                                    .map_or(0, |(_, l)| *l),
                                again: vec![k.line],
                            }),
                        }
                        continue;
                    }
                    let v = n.into_value(&child, dups);
                    first_line.push((k.text.clone(), k.line));
                    m.insert(k.text, v);
                }
                dups.extend(mine);
                Value::Object(m)
            }
        }
    }
}

impl<'de> Deserialize<'de> for Key {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = serde_saphyr::Spanned::<KeyText>::deserialize(d)?;
        Ok(Key {
            text: s.value.0,
            line: s.referenced.line(),
        })
    }
}

/// A mapping key as text: strings as they are, other scalars as written (`1`, `true`), as
/// serde_json's own `Value` would see them.
struct KeyText(String);

impl<'de> Deserialize<'de> for KeyText {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        String::deserialize(d).map(KeyText)
    }
}

impl<'de> Deserialize<'de> for Node {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(NodeVisitor)
    }
}

struct NodeVisitor;

impl<'de> Visitor<'de> for NodeVisitor {
    type Value = Node;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a YAML value")
    }
    fn visit_bool<E: de::Error>(self, b: bool) -> Result<Node, E> {
        Ok(Node::Bool(b))
    }
    fn visit_i64<E: de::Error>(self, n: i64) -> Result<Node, E> {
        Ok(Node::Number(n.into()))
    }
    fn visit_u64<E: de::Error>(self, n: u64) -> Result<Node, E> {
        Ok(Node::Number(n.into()))
    }
    fn visit_f64<E: de::Error>(self, n: f64) -> Result<Node, E> {
        Number::from_f64(n)
            .map(Node::Number)
            .ok_or_else(|| E::custom(format!("{n} is not a finite number")))
    }
    fn visit_str<E: de::Error>(self, s: &str) -> Result<Node, E> {
        Ok(Node::String(s.to_string()))
    }
    fn visit_string<E: de::Error>(self, s: String) -> Result<Node, E> {
        Ok(Node::String(s))
    }
    fn visit_none<E: de::Error>(self) -> Result<Node, E> {
        Ok(Node::Null)
    }
    fn visit_unit<E: de::Error>(self) -> Result<Node, E> {
        Ok(Node::Null)
    }
    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Node, D::Error> {
        Node::deserialize(d)
    }
    fn visit_newtype_struct<D: Deserializer<'de>>(self, d: D) -> Result<Node, D::Error> {
        Node::deserialize(d)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut a: A) -> Result<Node, A::Error> {
        let mut v = Vec::new();
        while let Some(n) = a.next_element::<Node>()? {
            v.push(n);
        }
        Ok(Node::Seq(v))
    }
    fn visit_map<A: MapAccess<'de>>(self, mut a: A) -> Result<Node, A::Error> {
        let mut v = Vec::new();
        while let Some(k) = a.next_key::<Key>()? {
            let n = a.next_value::<Node>()?;
            v.push((k, n));
        }
        Ok(Node::Map(v))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_match_serde_saphyr_for_unique_keys() {
        let y = "a: 1\nb: [true, null, 2.5, -3, \"x\"]\nc:\n  d: e\n  7: seven\nf: ~\n";
        let (v, d) = load(y).unwrap();
        let plain: Value = serde_saphyr::from_str(y).unwrap();
        assert_eq!(v, plain);
        assert!(d.is_empty());
    }

    #[test]
    fn duplicates_have_path_and_lines() {
        let y = "hosts:\n- hostname: a\n  interfaces:\n  - name: eth0\n    macAddress: x\n    macAddress: y\n    macAddress: z\n  hostname: b\n";
        let (v, d) = load(y).unwrap();
        assert_eq!(v["hosts"][0]["interfaces"][0]["macAddress"], "x");
        assert_eq!(v["hosts"][0]["hostname"], "a");
        assert_eq!(
            d,
            vec![
                Duplicate {
                    path: "hosts[0].interfaces[0].macAddress".into(),
                    first_line: 5,
                    again: vec![6, 7],
                },
                Duplicate {
                    path: "hosts[0].hostname".into(),
                    first_line: 2,
                    again: vec![8],
                },
            ]
        );
        assert_eq!(
            d[0].message(),
            "given 3 times (lines 5, 6 and 7); keep one (YAML allows each key once per mapping)"
        );
        assert_eq!(
            d[1].message(),
            "given twice (lines 2 and 8); keep one (YAML allows each key once per mapping)"
        );
    }

    #[test]
    fn syntax_errors_carry_no_library_advice() {
        for bad in ["a: [1\n", "a: *nope\n", "a: !!binary \"//8=\"\n", "- a\nb: c\n"] {
            let e = load(bad).unwrap_err();
            assert!(e.starts_with("line "), "{bad:?}: {e}");
            for leak in ["Options", "Option<", "DuplicateKeyPolicy", "Cow<", "<input>"] {
                assert!(!e.contains(leak), "{bad:?}: {e}");
            }
        }
    }
}
