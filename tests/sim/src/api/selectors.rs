//! Label selectors (`k8s.io/apimachinery/pkg/labels` syntax: `a=b`, `a==b`, `a!=b`,
//! `a in (x,y)`, `a notin (x)`, `a`, `!a`) and field selectors (`f=v`, `f==v`, `f!=v`).

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
}

/// Splits on commas that are not inside parentheses.
fn split_top(s: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut depth = 0;
    let mut cur = String::new();
    for ch in s.chars() {
        match ch {
            '(' => {
                depth += 1;
                cur.push(ch)
            }
            ')' => {
                depth -= 1;
                cur.push(ch)
            }
            ',' if depth == 0 => out.push(std::mem::take(&mut cur)),
            _ => cur.push(ch),
        }
    }
    out.push(cur);
    out.into_iter().map(|s| s.trim().to_string()).filter(|s| !s.is_empty()).collect()
}

fn set_values(s: &str) -> Result<Vec<String>, String> {
    let s = s.trim();
    let inner = s
        .strip_prefix('(')
        .and_then(|x| x.strip_suffix(')'))
        .ok_or_else(|| format!("found '{s}', expected: '('"))?;
    Ok(inner.split(',').map(|v| v.trim().to_string()).collect())
}

/// Parses a label selector; the error text is used in a 400 BadRequest.
pub fn parse_labels(sel: &str) -> Result<Vec<LabelReq>, String> {
    let mut reqs = Vec::new();
    for part in split_top(sel) {
        if let Some(k) = part.strip_prefix('!') {
            reqs.push(LabelReq::NotExists(k.trim().to_string()));
        } else if let Some((k, v)) = part.split_once("!=") {
            reqs.push(LabelReq::NotEq(k.trim().into(), v.trim().into()));
        } else if let Some((k, v)) = part.split_once("==") {
            reqs.push(LabelReq::Eq(k.trim().into(), v.trim().into()));
        } else if let Some((k, v)) = part.split_once('=') {
            reqs.push(LabelReq::Eq(k.trim().into(), v.trim().into()));
        } else if let Some(idx) = part.find(" notin ") {
            reqs.push(LabelReq::NotIn(part[..idx].trim().into(), set_values(&part[idx + 7..])?));
        } else if let Some(idx) = part.find(" in ") {
            reqs.push(LabelReq::In(part[..idx].trim().into(), set_values(&part[idx + 4..])?));
        } else if part.chars().all(|c| c.is_ascii_alphanumeric() || "-_./".contains(c)) {
            reqs.push(LabelReq::Exists(part));
        } else {
            return Err(format!("unable to parse requirement: {part}"));
        }
    }
    Ok(reqs)
}

/// True when `labels` (the object's `metadata.labels`, maybe null) satisfy all requirements.
pub fn labels_match(reqs: &[LabelReq], labels: Option<&Value>) -> bool {
    let get = |k: &str| labels.and_then(|l| l.get(k)).and_then(Value::as_str);
    reqs.iter().all(|r| match r {
        LabelReq::Eq(k, v) => get(k) == Some(v.as_str()),
        LabelReq::NotEq(k, v) => get(k) != Some(v.as_str()),
        LabelReq::In(k, vs) => get(k).is_some_and(|x| vs.iter().any(|v| v == x)),
        LabelReq::NotIn(k, vs) => !get(k).is_some_and(|x| vs.iter().any(|v| v == x)),
        LabelReq::Exists(k) => get(k).is_some(),
        LabelReq::NotExists(k) => get(k).is_none(),
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
    fn field_selector_refuses_unknown_fields() {
        assert!(parse_fields("spec.x=1", &["metadata.name"]).unwrap_err().contains("not supported"));
        let r = parse_fields("metadata.name=n1", &["metadata.name"]).unwrap();
        assert!(fields_match(&r, &json!({"metadata": {"name": "n1"}})));
        assert!(!fields_match(&r, &json!({"metadata": {"name": "n2"}})));
    }
}
