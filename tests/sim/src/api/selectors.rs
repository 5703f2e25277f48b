//! Label selectors and field selectors, parsed like `k8s.io/apimachinery/pkg/labels`
//! (`selector.go`: Lexer + Parser, `a=b`, `a==b`, `a!=b`, `a in (x,y)`, `a notin (x)`, `a`, `!a`,
//! `a>1`, `a<1`) and `pkg/fields` (`f=v`, `f==v`, `f!=v`). Label keys and values are checked
//! with `pkg/util/validation` (`IsQualifiedName`, `IsValidLabelValue`), which
//! [`label_key_errors`] and [`label_value_errors`] also provide for `metadata.labels`.

use serde_json::Value;

/// One label requirement.
#[derive(Debug, Clone, PartialEq)]
pub enum LabelReq {
    Eq(String, String),
    NotEq(String, String),
    In(String, Vec<String>),
    NotIn(String, Vec<String>),
    Exists(String),
    NotExists(String),
    /// `key>n`: the label parses as an integer greater than n.
    Gt(String, i64),
    /// `key<n`.
    Lt(String, i64),
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Tok {
    Ident,
    In,
    NotIn,
    Not,
    NotEq,
    OpenPar,
    ClosePar,
    Comma,
    Eq,
    DoubleEq,
    Gt,
    Lt,
    End,
    Error,
}

fn is_special(c: char) -> bool {
    matches!(c, '=' | '!' | '(' | ')' | ',' | '>' | '<')
}

/// The lexer of `labels.Lexer`: whitespace separates; special symbols take the longest known
/// token; anything else up to whitespace or a special symbol is an identifier or keyword.
fn lex(sel: &str) -> Vec<(Tok, String)> {
    let chars: Vec<char> = sel.chars().collect();
    let mut i = 0;
    let mut out = Vec::new();
    loop {
        while i < chars.len() && matches!(chars[i], ' ' | '\t' | '\r' | '\n') {
            i += 1;
        }
        if i >= chars.len() {
            out.push((Tok::End, String::new()));
            return out;
        }
        if is_special(chars[i]) {
            let mut buf = String::new();
            let mut last: Option<(Tok, String)> = None;
            while i < chars.len() && is_special(chars[i]) {
                buf.push(chars[i]);
                let t = match buf.as_str() {
                    "!" => Some(Tok::Not),
                    "!=" => Some(Tok::NotEq),
                    "(" => Some(Tok::OpenPar),
                    ")" => Some(Tok::ClosePar),
                    "," => Some(Tok::Comma),
                    "=" => Some(Tok::Eq),
                    "==" => Some(Tok::DoubleEq),
                    ">" => Some(Tok::Gt),
                    "<" => Some(Tok::Lt),
                    _ => None,
                };
                match t {
                    Some(t) => last = Some((t, buf.clone())),
                    None if last.is_some() => break,
                    None => {}
                }
                i += 1;
            }
            match last {
                Some(l) => out.push(l),
                None => {
                    out.push((Tok::Error, format!("error expected: keyword found '{buf}'")));
                }
            }
            continue;
        }
        let start = i;
        while i < chars.len() && !is_special(chars[i]) && !matches!(chars[i], ' ' | '\t' | '\r' | '\n') {
            i += 1;
        }
        let w: String = chars[start..i].iter().collect();
        let t = match w.as_str() {
            "in" => Tok::In,
            "notin" => Tok::NotIn,
            _ => Tok::Ident,
        };
        out.push((t, w));
    }
}

struct Parser {
    toks: Vec<(Tok, String)>,
    pos: usize,
}

impl Parser {
    /// The next token; in the Values context the keywords `in`/`notin` are identifiers.
    fn lookahead(&self, values: bool) -> (Tok, String) {
        let (t, l) = self.toks[self.pos.min(self.toks.len() - 1)].clone();
        match t {
            Tok::In | Tok::NotIn if values => (Tok::Ident, l),
            _ => (t, l),
        }
    }
    fn consume(&mut self, values: bool) -> (Tok, String) {
        let r = self.lookahead(values);
        if self.pos < self.toks.len() - 1 {
            self.pos += 1;
        }
        r
    }
}

const QNAME_MSG: &str = "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character";
const QNAME_EXAMPLES: &str = "(e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')";
const DNS1123_SUBDOMAIN_MSG: &str = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')";

fn qname_part_ok(s: &str) -> bool {
    let b = s.as_bytes();
    !b.is_empty()
        && b[0].is_ascii_alphanumeric()
        && b[b.len() - 1].is_ascii_alphanumeric()
        && b.iter()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_' | b'.'))
}

fn dns1123_subdomain_ok(s: &str) -> bool {
    s.split('.').all(|l| {
        !l.is_empty()
            && l.bytes()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == b'-')
            && !l.starts_with('-')
            && !l.ends_with('-')
    })
}

/// `validation.IsQualifiedName` (label keys, annotation keys): `[prefix/]name`, the prefix a DNS
/// subdomain, the name at most 63 characters of `[A-Za-z0-9][-A-Za-z0-9_.]*[A-Za-z0-9]`.
/// Returns the real server's messages (empty when valid).
pub fn label_key_errors(key: &str) -> Vec<String> {
    let parts: Vec<&str> = key.split('/').collect();
    let mut errs = Vec::new();
    let name = match parts.as_slice() {
        [n] => *n,
        [prefix, n] => {
            if prefix.is_empty() {
                errs.push("prefix part must be non-empty".to_string());
            } else {
                if prefix.len() > 253 {
                    errs.push("prefix part must be no more than 253 characters".to_string());
                }
                if !dns1123_subdomain_ok(prefix) {
                    errs.push(format!("prefix part {DNS1123_SUBDOMAIN_MSG}"));
                }
            }
            *n
        }
        _ => {
            return vec![format!(
                "a qualified name {QNAME_MSG} {QNAME_EXAMPLES} with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"
            )]
        }
    };
    if name.is_empty() {
        errs.push("name part must be non-empty".to_string());
    } else if name.len() > 63 {
        errs.push("name part must be no more than 63 characters".to_string());
    }
    if !qname_part_ok(name) {
        errs.push(format!("name part {QNAME_MSG} {QNAME_EXAMPLES}"));
    }
    errs
}

/// `validation.IsValidLabelValue`: empty, or at most 63 characters of the qualified-name form.
pub fn label_value_errors(v: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if v.len() > 63 {
        errs.push("must be no more than 63 characters".to_string());
    }
    if !v.is_empty() && !qname_part_ok(v) {
        errs.push("a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')".to_string());
    }
    errs
}

/// Go's `%q` for these strings.
fn q(s: &str) -> String {
    Value::String(s.to_string()).to_string()
}

fn parse_requirement(p: &mut Parser) -> Result<LabelReq, String> {
    // parseKeyAndInferOperator
    let (mut tok, mut lit) = p.consume(true);
    let not = tok == Tok::Not;
    if not {
        (tok, lit) = p.consume(true);
    }
    if tok != Tok::Ident {
        return Err(format!("found '{lit}', expected: identifier"));
    }
    let errs = label_key_errors(&lit);
    if !errs.is_empty() {
        return Err(format!("<nil>: Invalid value: {}: {}", q(&lit), errs.join("; ")));
    }
    let key = lit;
    let (next, _) = p.lookahead(true);
    if not {
        return Ok(LabelReq::NotExists(key));
    }
    if next == Tok::End || next == Tok::Comma {
        return Ok(LabelReq::Exists(key));
    }
    // parseOperator
    let (op, lit) = p.consume(false);
    let values: Vec<String> = match op {
        Tok::In | Tok::NotIn => {
            let (t, l) = p.consume(true);
            if t != Tok::OpenPar {
                return Err(format!("found '{l}' expected: '('"));
            }
            let (t, l) = p.lookahead(true);
            match t {
                Tok::Ident | Tok::Comma => {
                    let s = parse_identifiers_list(p)?;
                    let (t, _) = p.consume(true);
                    if t != Tok::ClosePar {
                        return Err(format!("found '{l}', expected: ')'"));
                    }
                    s
                }
                Tok::ClosePar => {
                    p.consume(true);
                    vec![String::new()]
                }
                _ => return Err(format!("found '{l}', expected: ',', ')' or identifier")),
            }
        }
        Tok::Eq | Tok::DoubleEq | Tok::NotEq | Tok::Gt | Tok::Lt => {
            let (t, _) = p.lookahead(true);
            if t == Tok::End || t == Tok::Comma {
                vec![String::new()]
            } else {
                let (t, l) = p.consume(true);
                if t != Tok::Ident {
                    return Err(format!("found '{l}', expected: identifier"));
                }
                vec![l]
            }
        }
        _ => return Err(format!("found '{lit}', expected: in, notin, =, ==, !=, gt, lt")),
    };
    // NewRequirement's value checks.
    for (i, v) in values.iter().enumerate() {
        if matches!(op, Tok::Gt | Tok::Lt) && v.parse::<i64>().is_err() {
            return Err(format!(
                "values[{i}]: Invalid value: {}: for 'Gt', 'Lt' operators, the value must be an integer",
                q(v)
            ));
        }
        let errs = label_value_errors(v);
        if !errs.is_empty() {
            return Err(format!(
                "values[{i}][{key}]: Invalid value: {}: {}",
                q(v),
                errs.join("; ")
            ));
        }
    }
    let one = values.first().cloned().unwrap_or_default();
    Ok(match op {
        Tok::In => LabelReq::In(key, values),
        Tok::NotIn => LabelReq::NotIn(key, values),
        Tok::NotEq => LabelReq::NotEq(key, one),
        Tok::Gt => LabelReq::Gt(key, one.parse().unwrap_or(0)),
        Tok::Lt => LabelReq::Lt(key, one.parse().unwrap_or(0)),
        _ => LabelReq::Eq(key, one),
    })
}

/// `parseIdentifiersList`: `(a,b)`, with `(,`, `,,` and `,)` meaning the empty value.
fn parse_identifiers_list(p: &mut Parser) -> Result<Vec<String>, String> {
    let mut s: Vec<String> = Vec::new();
    let insert = |s: &mut Vec<String>, v: String| {
        if !s.contains(&v) {
            s.push(v);
        }
    };
    loop {
        let (t, l) = p.consume(true);
        match t {
            Tok::Ident => {
                insert(&mut s, l);
                let (t2, l2) = p.lookahead(true);
                match t2 {
                    Tok::Comma => continue,
                    Tok::ClosePar => return Ok(s),
                    _ => return Err(format!("found '{l2}', expected: ',' or ')'")),
                }
            }
            Tok::Comma => {
                if s.is_empty() {
                    insert(&mut s, String::new());
                }
                let (t2, _) = p.lookahead(true);
                if t2 == Tok::ClosePar {
                    insert(&mut s, String::new());
                    return Ok(s);
                }
                if t2 == Tok::Comma {
                    p.consume(true);
                    insert(&mut s, String::new());
                }
            }
            _ => return Err(format!("found '{l}', expected: ',', or identifier")),
        }
    }
}

/// Parses a label selector like `labels.Parse`. The error is the real server's 400 message,
/// e.g. `unable to parse requirement: found '(', expected: identifier` or
/// `found '=', expected: !, identifier, or 'end of string'`.
pub fn parse_labels(sel: &str) -> Result<Vec<LabelReq>, String> {
    let mut p = Parser {
        toks: lex(sel),
        pos: 0,
    };
    let mut reqs = Vec::new();
    loop {
        let (t, l) = p.lookahead(true);
        match t {
            Tok::Ident | Tok::Not => {
                let r = parse_requirement(&mut p).map_err(|e| format!("unable to parse requirement: {e}"))?;
                reqs.push(r);
                let (t, l) = p.consume(true);
                match t {
                    Tok::End => return Ok(reqs),
                    Tok::Comma => {
                        let (t2, l2) = p.lookahead(true);
                        if t2 != Tok::Ident && t2 != Tok::Not {
                            return Err(format!("found '{l2}', expected: identifier after ','"));
                        }
                    }
                    _ => return Err(format!("found '{l}', expected: ',' or 'end of string'")),
                }
            }
            Tok::End => return Ok(reqs),
            _ => {
                return Err(format!(
                    "found '{l}', expected: !, identifier, or 'end of string'"
                ))
            }
        }
    }
}

/// True when `labels` (the object's `metadata.labels`, maybe null) satisfy all requirements
/// (`Requirement.Matches`: `!=` and `notin` match objects without the label).
pub fn labels_match(reqs: &[LabelReq], labels: Option<&Value>) -> bool {
    let get = |k: &str| labels.and_then(|l| l.get(k)).and_then(Value::as_str);
    let num = |k: &str| get(k).and_then(|v| v.parse::<i64>().ok());
    reqs.iter().all(|r| match r {
        LabelReq::Eq(k, v) => get(k) == Some(v.as_str()),
        LabelReq::NotEq(k, v) => get(k) != Some(v.as_str()),
        LabelReq::In(k, vs) => get(k).is_some_and(|x| vs.iter().any(|v| v == x)),
        LabelReq::NotIn(k, vs) => !get(k).is_some_and(|x| vs.iter().any(|v| v == x)),
        LabelReq::Exists(k) => get(k).is_some(),
        LabelReq::NotExists(k) => get(k).is_none(),
        LabelReq::Gt(k, n) => num(k).is_some_and(|x| x > *n),
        LabelReq::Lt(k, n) => num(k).is_some_and(|x| x < *n),
    })
}

/// One field requirement: (path, value, negated).
pub type FieldReq = (String, String, bool);

/// Parses a field selector, refusing fields outside `allowed` with the real server's message
/// (`field label not supported: x`).
pub fn parse_fields(sel: &str, allowed: &[&str]) -> Result<Vec<FieldReq>, String> {
    let mut out = Vec::new();
    for part in sel.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let (k, v, neg) = if let Some((k, v)) = part.split_once("!=") {
            (k, v, true)
        } else if let Some((k, v)) = part.split_once("==") {
            (k, v, false)
        } else if let Some((k, v)) = part.split_once('=') {
            (k, v, false)
        } else {
            return Err(format!("invalid selector: '{part}'; can't understand '{part}'"));
        };
        let k = k.trim();
        if !allowed.contains(&k) {
            return Err(format!("field label not supported: {k}"));
        }
        out.push((k.to_string(), v.trim().to_string(), neg));
    }
    Ok(out)
}

/// The string value of a dotted field path, as the field selector compares it ("" when absent;
/// booleans and numbers as text).
pub fn field_value(obj: &Value, path: &str) -> String {
    let mut cur = obj;
    for seg in path.split('.') {
        match cur.get(seg) {
            Some(v) => cur = v,
            None => return String::new(),
        }
    }
    match cur {
        Value::String(s) => s.clone(),
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

/// True when `obj` satisfies every field requirement.
pub fn fields_match(reqs: &[FieldReq], obj: &Value) -> bool {
    reqs.iter().all(|(k, v, neg)| (field_value(obj, k) == *v) != *neg)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn label_selector_forms() {
        let l = json!({"a": "1", "b": "x"});
        let m = |s: &str| labels_match(&parse_labels(s).unwrap(), Some(&l));
        assert!(m("a=1"));
        assert!(m("a==1,b"));
        assert!(!m("a!=1"));
        assert!(m("b in (x, y)"));
        assert!(!m("b notin (x)"));
        assert!(m("!c"));
        assert!(!m("c"));
    }

    #[test]
    fn label_selector_errors_like_apimachinery() {
        let e = |s: &str| parse_labels(s).unwrap_err();
        assert_eq!(e("=b"), "found '=', expected: !, identifier, or 'end of string'");
        assert_eq!(
            e("a=("),
            "unable to parse requirement: found '(', expected: identifier"
        );
        assert_eq!(e("a=b c"), "found 'c', expected: ',' or 'end of string'");
        assert_eq!(e("a=b,,c=d"), "found ',', expected: identifier after ','");
        assert!(e("x/y/z=1").starts_with("unable to parse requirement: <nil>: Invalid value: \"x/y/z\": a qualified name must consist of"), "{}", e("x/y/z=1"));
        let long = format!("{}=1", "k".repeat(64));
        assert!(
            e(&long).ends_with("name part must be no more than 63 characters"),
            "{}",
            e(&long)
        );
        assert_eq!(
            e("a b"),
            "unable to parse requirement: found 'b', expected: in, notin, =, ==, !=, gt, lt"
        );
        assert_eq!(
            e("a in b"),
            "unable to parse requirement: found 'b' expected: '('"
        );
        assert!(
            e("a=b$").contains("a valid label must be an empty string"),
            "{}",
            e("a=b$")
        );
        // `()` is the set holding the empty value, as in labels.Parse.
        assert_eq!(
            parse_labels("a in ()").unwrap(),
            vec![LabelReq::In("a".into(), vec![String::new()])]
        );
        assert_eq!(
            parse_labels("a=").unwrap(),
            vec![LabelReq::Eq("a".into(), String::new())]
        );
        assert_eq!(
            parse_labels("!a,b notin (x, ,y)").unwrap(),
            vec![
                LabelReq::NotExists("a".into()),
                LabelReq::NotIn("b".into(), vec!["x".into(), "".into(), "y".into()])
            ]
        );
        let l = json!({"n": "5"});
        assert!(labels_match(&parse_labels("n>4,n<6").unwrap(), Some(&l)));
        assert!(!labels_match(&parse_labels("n>5").unwrap(), Some(&l)));
        assert!(parse_labels("in in (in)").is_ok());
    }

    #[test]
    fn label_keys_and_values() {
        assert!(label_key_errors("example.com/My_Name.1").is_empty());
        assert_eq!(
            label_key_errors("UPPER/x"),
            vec![format!("prefix part {DNS1123_SUBDOMAIN_MSG}")]
        );
        assert_eq!(
            label_key_errors("/x"),
            vec!["prefix part must be non-empty".to_string()]
        );
        assert!(label_value_errors("").is_empty());
        assert_eq!(
            label_value_errors(&"v".repeat(64)),
            vec!["must be no more than 63 characters".to_string()]
        );
    }

    #[test]
    fn field_selector_refuses_unknown_fields() {
        assert!(parse_fields("spec.x=1", &["metadata.name"])
            .unwrap_err()
            .contains("not supported"));
        let r = parse_fields("metadata.name=n1", &["metadata.name"]).unwrap();
        assert!(fields_match(&r, &json!({"metadata": {"name": "n1"}})));
        assert!(!fields_match(&r, &json!({"metadata": {"name": "n2"}})));
    }
}
