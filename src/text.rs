//! Text shown to the operator: the escaping of cluster- and CSR-provided values (the one
//! shared place; [`crate::output`] and `csr::escape_for_display` re-export it). A leaf: it
//! imports nothing of this crate.

use std::fmt::Write as _;

/// `eprintln!` that cannot fail: progress lines, hints and the closing `error:` lines go to
/// stderr, and a closed or broken stderr (`migrate import 2>&1 | head -1`) must not abort the
/// command mid-work, as `eprintln!`'s panic (exit 101) would in the middle of an import. The
/// one way this crate writes to stderr outside tracing (tests/house.rs keeps it so).
#[macro_export]
macro_rules! say {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr(), $($arg)*);
    }};
}

/// [`say!`] without the newline (a prompt, or a text that ends with its own).
#[macro_export]
macro_rules! say_part {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = write!(std::io::stderr(), $($arg)*);
    }};
}

/// Longest cluster-provided value [`display`] shows in a table or an error line, in characters
/// after escaping (a release image pull spec by digest is ~110).
pub const VALUE_MAX: usize = 256;

/// [`escape_for_display`] with [`VALUE_MAX`]: for every cluster-provided value shown in a
/// table or an `error:`/`warning:` line.
pub fn display(s: &str) -> String {
    escape_for_display(s, VALUE_MAX)
}

/// An HTTP error's message for the operator: its first 200 characters, the whitespace around
/// it dropped (a plain-text body ends in a newline, which [`display`] would show as `\u{a}`),
/// then escaped with [`display`]. `body` is the body's text or the message a JSON body carried.
pub fn http_message(body: &str) -> String {
    let cut: String = body.trim().chars().take(200).collect();
    display(cut.trim_end())
}

/// Returns `s` with every character that could hide or reorder what an operator reads replaced
/// by a visible escape, cut to at most `max` characters (counted after escaping, including the
/// final `…` that marks a cut).
///
/// Replaced: control characters (C0, DEL, C1: `\n` becomes `\u{a}`), bidirectional controls
/// (U+061C, U+200E/F, U+202A–U+202E, U+2066–U+2069: the "Trojan Source" set), invisible format
/// characters (zero-width space/joiners, U+2028/9, U+FEFF, soft hyphen, U+2060–U+2064,
/// U+180E, U+FFF9–U+FFFB), each as `\u{hex}`; a backslash becomes `\\` so an escape in the
/// output can always be told from the same text in the input. An escape is never cut in
/// half. `max == 0` gives an empty string. Source of the rule: docs/design.md "Plugin
/// conventions" and docs/approve.md "Verifying kubelet CSRs" (everything shown to the operator
/// is escaped).
pub fn escape_for_display(s: &str, max: usize) -> String {
    if max == 0 {
        return String::new();
    }
    let mut tokens: Vec<String> = Vec::new();
    let mut total = 0usize;
    for c in s.chars() {
        let t = escape_char(c);
        total += t.chars().count();
        tokens.push(t);
    }
    if total <= max {
        return tokens.concat();
    }
    let mut out = String::new();
    let mut used = 0usize;
    for t in tokens {
        let n = t.chars().count();
        if used + n > max - 1 {
            break;
        }
        out.push_str(&t);
        used += n;
    }
    out.push('…');
    out
}

/// The last guard of the human tables: every character [`escape_for_display`] escapes, but a
/// newline (a cell's line break) and the backslash, replaced by its `\u{hex}` escape. Text
/// already escaped holds none of them, so this never escapes twice; a value some path forgot
/// to escape (a `--dir` holding ESC) reaches the terminal inert instead of raw.
pub fn neutralize(s: &str) -> std::borrow::Cow<'_, str> {
    if !s.chars().any(|c| c != '\n' && needs_escape(c)) {
        return std::borrow::Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        if c != '\n' && needs_escape(c) {
            // The same `\u{hex}` as escape_for_display (never a backslash here).
            out.push_str(&escape_char(c));
        } else {
            out.push(c);
        }
    }
    std::borrow::Cow::Owned(out)
}

fn escape_char(c: char) -> String {
    if c == '\\' {
        return "\\\\".to_string();
    }
    if needs_escape(c) {
        let mut s = String::new();
        let _ = write!(s, "\\u{{{:x}}}", c as u32);
        return s;
    }
    c.to_string()
}

fn needs_escape(c: char) -> bool {
    c.is_control()
        || matches!(c,
            '\u{00ad}' | '\u{061c}' | '\u{180e}'
            | '\u{200b}'..='\u{200f}'
            | '\u{2028}'..='\u{202e}'
            | '\u{2060}'..='\u{2069}'
            | '\u{feff}'
            | '\u{fff9}'..='\u{fffb}')
}

#[cfg(test)]
mod escape_tests {
    #[test]
    fn neutralize_leaves_escaped_text_and_line_breaks_alone() {
        use super::neutralize;
        assert_eq!(
            neutralize("esc\u{1b}]0;PWN\u{7}dir\nnext"),
            "esc\\u{1b}]0;PWN\\u{7}dir\nnext"
        );
        let escaped = super::escape_for_display("a\u{1b}b\\c", 100);
        assert_eq!(neutralize(&escaped), escaped);
    }

    use super::escape_for_display as e;
    use super::{display, http_message, VALUE_MAX};

    #[test]
    fn plain_text_is_unchanged() {
        assert_eq!(e("system:node:worker-0", 80), "system:node:worker-0");
    }

    #[test]
    fn bidi_and_controls_are_escaped() {
        assert_eq!(e("a\u{202e}b", 80), "a\\u{202e}b");
        assert_eq!(e("x\ny\x1b[31m", 80), "x\\u{a}y\\u{1b}[31m");
        assert_eq!(
            e("\u{2066}\u{200b}\u{feff}\u{85}", 80),
            "\\u{2066}\\u{200b}\\u{feff}\\u{85}"
        );
        assert_eq!(e("a\\u{202e}", 80), "a\\\\u{202e}");
    }

    #[test]
    fn long_values_are_cut_with_an_ellipsis() {
        assert_eq!(e("abcdefgh", 5), "abcd…");
        assert_eq!(e("abcde", 5), "abcde");
        assert_eq!(e("", 3), "");
        assert_eq!(e("abc", 0), "");
        assert_eq!(e("abc", 1), "…");
        // An escape is never cut in half: "ab" + "\u{202e}" (8 chars) does not fit in 9.
        assert_eq!(e("ab\u{202e}cdef", 9), "ab…");
        assert!(e(&"x".repeat(1000), 64).chars().count() == 64);
        assert_eq!(e("ääää", 3), "ää…");
    }

    #[test]
    fn http_message_drops_the_newline_of_a_plain_body() {
        assert_eq!(http_message("Unauthorized\n"), "Unauthorized");
        assert_eq!(http_message("  a\nb \r\n"), "a\\u{a}b");
        assert_eq!(http_message(&"x".repeat(300)).chars().count(), 200);
    }

    #[test]
    fn display_cuts_at_value_max_and_escapes_osc() {
        assert_eq!(display("\u{1b}]8;;http://x\u{7}x"), "\\u{1b}]8;;http://x\\u{7}x");
        assert_eq!(display(&"y".repeat(1000)).chars().count(), VALUE_MAX);
    }
}
