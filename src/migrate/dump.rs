//! Reading a `pg_dump --data-only --no-owner --no-privileges` plain-text dump (pure, streaming).
//!
//! Such a dump is SQL with one `COPY <schema>.<table> (<columns>) FROM stdin;` block per
//! non-empty table, each followed by the rows in COPY text format (one row per line, columns
//! separated by a tab) and ended by a line `\.` (PostgreSQL docs, "COPY", "Text Format"; and
//! pg_dump's plain format). What migrate needs from it:
//! - [`summarize`]: rows per table and the schema version (the greatest `migrations.id`, which
//!   assisted-service's gormigrate keeps; research/migration.md §5);
//! - [`filter_tables`]: the dump without some tables' blocks (import drops `migrations`, the
//!   target keeps its own), every other byte passed through unchanged;
//! - [`column_values`]: one column of a table's rows, unescaped ([`unescape_copy`]); export
//!   reads `clusters.pull_secret` with it.
//!
//! A custom-format dump (`PGDMP` magic), a compressed file, or a text without pg_dump's header
//! is refused with [`Error::InvalidInput`] saying how to make the right one ([`DUMP_COMMAND`]);
//! a dump that also creates tables (no `--data-only`) is refused as well.

use std::collections::BTreeMap;
use std::io::{BufRead, Read, Write};

use crate::error::Error;

/// How to make a dump this module reads (shown in errors and the README).
pub const DUMP_COMMAND: &str = "pg_dump --data-only --no-owner --no-privileges -d installer";

/// The header line pg_dump writes at the top of a plain-text dump.
const HEADER: &str = "-- PostgreSQL database dump";
/// Lines read before the header must have appeared.
const HEADER_WINDOW: usize = 10;

/// The start of one COPY block: `COPY public.clusters (id, name) FROM stdin;`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CopyHeader {
    /// Schema, unquoted (`public`).
    pub schema: String,
    /// Table, unquoted (`clusters`).
    pub table: String,
    /// Column names in order, unquoted.
    pub columns: Vec<String>,
}

impl CopyHeader {
    /// The table as [`DumpSummary::rows`] keys it: the bare name in schema `public`,
    /// `schema.table` otherwise.
    pub fn key(&self) -> String {
        if self.schema == "public" {
            self.table.clone()
        } else {
            format!("{}.{}", self.schema, self.table)
        }
    }
}

/// What [`summarize`] found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DumpSummary {
    /// Rows per table (key as [`CopyHeader::key`]); tables pg_dump wrote a COPY block for,
    /// also empty ones (pg_dump writes a block for every table).
    pub rows: BTreeMap<String, u64>,
    /// The greatest `id` of table `migrations`; None when the dump has no such rows.
    pub schema_version: Option<String>,
    /// Bytes read.
    pub bytes: u64,
}

fn invalid(what: &str, message: impl Into<String>) -> Error {
    Error::InvalidInput {
        field: what.to_string(),
        message: message.into(),
    }
}

/// Checks the first bytes of a dump (at least the first few hundred, if the file has them):
/// refuses pg_dump's custom format (`PGDMP`), gzip/zstd/xz compressed files, tar archives and
/// anything not starting like a plain-text dump. `what` names the dump in the error (e.g.
/// `--db-dump dump.sql`, `bundle file db/dump.sql`). Errors: [`Error::InvalidInput`].
pub fn check_start(what: &str, first: &[u8]) -> Result<(), Error> {
    let how = format!("make a plain-text data-only dump with `{DUMP_COMMAND}` (no -Fc, no compression)");
    if first.starts_with(b"PGDMP") {
        return Err(invalid(
            what,
            format!("this is a pg_dump custom-format archive (PGDMP), not a plain-text dump: {how}"),
        ));
    }
    if first.starts_with(&[0x1f, 0x8b])
        || first.starts_with(&[0x28, 0xb5, 0x2f, 0xfd])
        || first.starts_with(&[0xfd, b'7', b'z', b'X', b'Z'])
    {
        return Err(invalid(
            what,
            format!("this file is compressed: decompress it, or {how}"),
        ));
    }
    if first.len() > 262 && &first[257..262] == b"ustar" {
        return Err(invalid(
            what,
            format!("this is a tar archive (pg_dump -Ft?), not a plain-text dump: {how}"),
        ));
    }
    let text = String::from_utf8_lossy(first);
    let found = text.lines().take(HEADER_WINDOW).any(|l| l.trim_end() == HEADER);
    if !found {
        return Err(invalid(
            what,
            format!("does not start with pg_dump's \"{HEADER}\" header: {how}"),
        ));
    }
    Ok(())
}

/// Splits a SQL identifier list item, removing double quotes (`"a""b"` → `a"b`).
fn unquote_ident(s: &str) -> String {
    let s = s.trim();
    if s.len() >= 2 && s.starts_with('"') && s.ends_with('"') {
        s[1..s.len() - 1].replace("\"\"", "\"")
    } else {
        s.to_string()
    }
}

/// Splits `s` at `sep` outside double quotes.
fn split_outside_quotes(s: &str, sep: char) -> Vec<&str> {
    let mut out = Vec::new();
    let mut start = 0;
    let mut quoted = false;
    for (i, c) in s.char_indices() {
        if c == '"' {
            quoted = !quoted;
        } else if c == sep && !quoted {
            out.push(&s[start..i]);
            start = i + c.len_utf8();
        }
    }
    out.push(&s[start..]);
    out
}

/// Parses a `COPY schema.table (cols) FROM stdin;` line (without the newline); None for any
/// other line.
pub fn parse_copy_header(line: &str) -> Option<CopyHeader> {
    let rest = line.strip_prefix("COPY ")?;
    let rest = rest.strip_suffix(" FROM stdin;")?;
    let open = {
        // the first '(' outside quotes
        let mut quoted = false;
        let mut at = None;
        for (i, c) in rest.char_indices() {
            if c == '"' {
                quoted = !quoted;
            } else if c == '(' && !quoted {
                at = Some(i);
                break;
            }
        }
        at?
    };
    let name = rest[..open].trim();
    let cols = rest[open + 1..].trim_end().strip_suffix(')')?;
    let parts = split_outside_quotes(name, '.');
    let (schema, table) = match parts.as_slice() {
        [t] => ("public".to_string(), unquote_ident(t)),
        [s, t] => (unquote_ident(s), unquote_ident(t)),
        _ => return None,
    };
    let columns = split_outside_quotes(cols, ',')
        .into_iter()
        .map(unquote_ident)
        .collect();
    Some(CopyHeader {
        schema,
        table,
        columns,
    })
}

/// Unescapes one field of a COPY text-format row: `\N` (the whole field) is NULL (None);
/// `\b \f \n \r \t \v \\`, octal `\NNN` and hex `\xHH` escapes as PostgreSQL's COPY reads them;
/// a backslash before any other character stands for that character.
pub fn unescape_copy(field: &str) -> Option<String> {
    if field == "\\N" {
        return None;
    }
    let b = field.as_bytes();
    let mut out: Vec<u8> = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] != b'\\' || i + 1 >= b.len() {
            out.push(b[i]);
            i += 1;
            continue;
        }
        let c = b[i + 1];
        i += 2;
        match c {
            b'b' => out.push(8),
            b'f' => out.push(12),
            b'n' => out.push(b'\n'),
            b'r' => out.push(b'\r'),
            b't' => out.push(b'\t'),
            b'v' => out.push(11),
            b'0'..=b'7' => {
                let mut v = u32::from(c - b'0');
                let mut k = 0;
                while k < 2 && i < b.len() && (b'0'..=b'7').contains(&b[i]) {
                    v = v * 8 + u32::from(b[i] - b'0');
                    i += 1;
                    k += 1;
                }
                out.push((v & 0xff) as u8);
            }
            b'x' if i < b.len() && b[i].is_ascii_hexdigit() => {
                let mut v = 0u32;
                let mut k = 0;
                while k < 2 && i < b.len() && b[i].is_ascii_hexdigit() {
                    v = v * 16 + (b[i] as char).to_digit(16).unwrap_or(0);
                    i += 1;
                    k += 1;
                }
                out.push(v as u8);
            }
            other => out.push(other),
        }
    }
    Some(String::from_utf8_lossy(&out).into_owned())
}

/// Reads one line (with its `\n`) into `buf`; false at the end.
fn next_line(r: &mut dyn BufRead, buf: &mut Vec<u8>, what: &str) -> Result<bool, Error> {
    buf.clear();
    let n = r
        .read_until(b'\n', buf)
        .map_err(|e| invalid(what, format!("cannot read it: {e}")))?;
    Ok(n > 0)
}

fn strip_eol(line: &[u8]) -> &[u8] {
    let l = line.strip_suffix(b"\n").unwrap_or(line);
    l.strip_suffix(b"\r").unwrap_or(l)
}

/// One pass over the dump, calling `on_row(header, row_without_eol)` for each row and
/// `on_line(line_with_eol, the COPY block the line is in)` for every line when given. Checks the header
/// and refuses schema statements. Returns the summary.
fn scan(
    what: &str,
    r: &mut dyn BufRead,
    on_row: &mut dyn FnMut(&CopyHeader, &[u8]),
    mut on_line: LineFn<'_>,
) -> Result<DumpSummary, Error> {
    let mut sum = DumpSummary::default();
    let mut buf = Vec::with_capacity(8192);
    // The start is checked on the first 4 KiB, then read again as part of the input.
    let mut start = Vec::with_capacity(4096);
    (&mut *r)
        .take(4096)
        .read_to_end(&mut start)
        .map_err(|e| invalid(what, format!("cannot read it: {e}")))?;
    check_start(what, &start)?;
    let mut input = std::io::Cursor::new(start).chain(r);
    scan_body(what, &mut input, &mut sum, &mut buf, on_row, &mut on_line)?;
    Ok(sum)
}

type LineFn<'a> = Option<&'a mut dyn FnMut(&[u8], Option<&CopyHeader>) -> Result<(), Error>>;

fn scan_body(
    what: &str,
    r: &mut dyn BufRead,
    sum: &mut DumpSummary,
    buf: &mut Vec<u8>,
    on_row: &mut dyn FnMut(&CopyHeader, &[u8]),
    on_line: &mut LineFn<'_>,
) -> Result<(), Error> {
    let mut block: Option<CopyHeader> = None;
    let mut lineno = 0u64;
    while next_line(r, buf, what)? {
        lineno += 1;
        sum.bytes += buf.len() as u64;
        if let Some(f) = on_line.as_mut() {
            f(buf, block.as_ref())?;
        }
        let line = strip_eol(buf);
        match &block {
            Some(h) => {
                if line == b"\\." {
                    block = None;
                    continue;
                }
                *sum.rows.entry(h.key()).or_insert(0) += 1;
                on_row(h, line);
                if h.schema == "public" && h.table == "migrations" {
                    if let Some(i) = h.columns.iter().position(|c| c == "id") {
                        let text = String::from_utf8_lossy(line);
                        if let Some(Some(id)) = text.split('\t').nth(i).map(unescape_copy) {
                            let newer = match &sum.schema_version {
                                None => true,
                                Some(cur) => (id.len(), id.as_str()) > (cur.len(), cur.as_str()),
                            };
                            if newer {
                                sum.schema_version = Some(id);
                            }
                        }
                    }
                }
            }
            None => {
                if line.starts_with(b"COPY ") {
                    let text = String::from_utf8_lossy(line);
                    let h = parse_copy_header(&text).ok_or_else(|| {
                        invalid(
                            what,
                            format!("line {lineno}: a COPY statement this reader does not know: {text}"),
                        )
                    })?;
                    sum.rows.entry(h.key()).or_insert(0);
                    block = Some(h);
                } else if line.starts_with(b"CREATE ")
                    || line.starts_with(b"ALTER TABLE ")
                    || line.starts_with(b"DROP ")
                {
                    return Err(invalid(
                        what,
                        format!(
                            "line {lineno}: the dump holds schema statements ({}…); migrate restores data \
                             into the target's own schema: make the dump with `{DUMP_COMMAND}`",
                            String::from_utf8_lossy(&line[..line.len().min(30)])
                        ),
                    ));
                }
            }
        }
    }
    if let Some(h) = block {
        return Err(invalid(
            what,
            format!(
                "the COPY block of {} has no end (`\\.`): the dump is cut short; make it again",
                h.key()
            ),
        ));
    }
    Ok(())
}

/// Reads the whole dump: rows per table and the schema version (see the module doc).
/// Errors: [`Error::InvalidInput`] naming `what` for a dump that is not a plain-text
/// data-only pg_dump, or is cut short inside a COPY block.
pub fn summarize(what: &str, r: &mut dyn BufRead) -> Result<DumpSummary, Error> {
    scan(what, r, &mut |_, _| {}, None)
}

/// Copies the dump from `r` to `w` without the COPY blocks (statement, rows and `\.`) of the
/// tables in `drop` (keys as [`CopyHeader::key`], e.g. `migrations`); every other line passes
/// unchanged. Returns the summary of the *input*. Errors: as [`summarize`]; write errors as
/// [`Error::Io`] with path `what_out`.
pub fn filter_tables(
    what: &str,
    r: &mut dyn BufRead,
    w: &mut dyn Write,
    drop: &[&str],
    what_out: &str,
) -> Result<DumpSummary, Error> {
    let mut on_line = |line: &[u8], block: Option<&CopyHeader>| -> Result<(), Error> {
        // Inside a block: its rows and its terminator; outside: the COPY statement itself.
        let skip = match block {
            Some(h) => drop.contains(&h.key().as_str()),
            None => {
                let l = strip_eol(line);
                l.starts_with(b"COPY ")
                    && parse_copy_header(&String::from_utf8_lossy(l))
                        .is_some_and(|h| drop.contains(&h.key().as_str()))
            }
        };
        if skip {
            return Ok(());
        }
        w.write_all(line).map_err(|e| Error::Io {
            path: what_out.to_string(),
            source: e,
        })
    };
    scan(what, r, &mut |_, _| {}, Some(&mut on_line))
}

/// The values of column `column` of every row of `table` (key as [`CopyHeader::key`]), in
/// dump order, unescaped (None for NULL). Empty when the table has no block or no rows.
/// Errors: as [`summarize`], and [`Error::InvalidInput`] when the table's block lacks the column.
pub fn column_values(
    what: &str,
    r: &mut dyn BufRead,
    table: &str,
    column: &str,
) -> Result<Vec<Option<String>>, Error> {
    let mut out = Vec::new();
    let mut missing = None;
    scan(
        what,
        r,
        &mut |h, row| {
            if h.key() != table {
                return;
            }
            match h.columns.iter().position(|c| c == column) {
                Some(i) => {
                    let text = String::from_utf8_lossy(row);
                    out.push(text.split('\t').nth(i).and_then(unescape_copy));
                }
                None => missing = Some(h.columns.join(", ")),
            }
        },
        None,
    )?;
    if let Some(cols) = missing {
        return Err(invalid(
            what,
            format!("table {table} has no column {column} (it has: {cols})"),
        ));
    }
    Ok(out)
}

/// Several columns of every row of `table`, as maps column → value (None for NULL).
/// Errors: as [`column_values`].
pub fn rows(
    what: &str,
    r: &mut dyn BufRead,
    table: &str,
    columns: &[&str],
) -> Result<Vec<BTreeMap<String, Option<String>>>, Error> {
    let mut out = Vec::new();
    let mut missing = None;
    scan(
        what,
        r,
        &mut |h, row| {
            if h.key() != table {
                return;
            }
            let text = String::from_utf8_lossy(row);
            let fields: Vec<&str> = text.split('\t').collect();
            let mut m = BTreeMap::new();
            for c in columns {
                match h.columns.iter().position(|x| x == c) {
                    Some(i) => {
                        m.insert(c.to_string(), fields.get(i).and_then(|f| unescape_copy(f)));
                    }
                    None => missing = Some(c.to_string()),
                }
            }
            out.push(m);
        },
        None,
    )?;
    if let Some(c) = missing {
        return Err(invalid(what, format!("table {table} has no column {c}")));
    }
    Ok(out)
}

/// Every row of `table` as a map of all its columns (None for NULL), in dump order; for
/// small tables (clusters, hosts). Errors: as [`summarize`].
pub fn table_rows(
    what: &str,
    r: &mut dyn BufRead,
    table: &str,
) -> Result<Vec<BTreeMap<String, Option<String>>>, Error> {
    let mut out = Vec::new();
    scan(
        what,
        r,
        &mut |h, row| {
            if h.key() != table {
                return;
            }
            let text = String::from_utf8_lossy(row);
            out.push(
                h.columns
                    .iter()
                    .cloned()
                    .zip(text.split('\t').map(unescape_copy))
                    .collect(),
            );
        },
        None,
    )?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Cursor;

    const DUMP: &str = "--
-- PostgreSQL database dump
--

-- Dumped from database version 16.4
-- Dumped by pg_dump version 16.4

SET statement_timeout = 0;
SET client_encoding = 'UTF8';
SELECT pg_catalog.set_config('search_path', '', false);

--
-- Data for Name: clusters; Type: TABLE DATA; Schema: public; Owner: -
--

COPY public.clusters (id, name, pull_secret, \"primary\") FROM stdin;
c1\tagent-cluster\t{\"auths\":{\"q\":{\"auth\":\"a\\\\tb\"}}}\\nline2\tt
c2\t\\N\t\\N\tf
\\.


--
-- Data for Name: hosts; Type: TABLE DATA; Schema: public; Owner: -
--

COPY public.hosts (id, infra_env_id) FROM stdin;
h1\ti1
h2\ti1
h3\ti1
\\.


COPY public.migrations (id) FROM stdin;
20240617140000
20230101000000
9
\\.


COPY public.events (id, message) FROM stdin;
\\.


SELECT pg_catalog.setval('public.events_id_seq', 300, true);

--
-- PostgreSQL database dump complete
--
";

    #[test]
    fn counts_rows_and_finds_the_schema_version() {
        let s = summarize("d", &mut Cursor::new(DUMP)).unwrap();
        assert_eq!(
            s.rows.into_iter().collect::<Vec<_>>(),
            vec![
                ("clusters".to_string(), 2),
                ("events".into(), 0),
                ("hosts".into(), 3),
                ("migrations".into(), 3)
            ]
        );
        assert_eq!(s.schema_version.as_deref(), Some("20240617140000"));
        assert_eq!(s.bytes, DUMP.len() as u64);
    }

    #[test]
    fn reads_a_column_unescaped() {
        let v = column_values("d", &mut Cursor::new(DUMP), "clusters", "pull_secret").unwrap();
        assert_eq!(
            v,
            vec![
                Some("{\"auths\":{\"q\":{\"auth\":\"a\\tb\"}}}\nline2".to_string()),
                None
            ]
        );
        let p = column_values("d", &mut Cursor::new(DUMP), "clusters", "primary").unwrap();
        assert_eq!(p, vec![Some("t".into()), Some("f".into())]);
        let e = column_values("d", &mut Cursor::new(DUMP), "clusters", "nope").unwrap_err();
        assert!(e.to_string().contains("no column nope"), "{e}");
        let r = rows("d", &mut Cursor::new(DUMP), "hosts", &["id", "infra_env_id"]).unwrap();
        assert_eq!(r.len(), 3);
        assert_eq!(r[2]["id"].as_deref(), Some("h3"));
        let all = table_rows("d", &mut Cursor::new(DUMP), "clusters").unwrap();
        assert_eq!(all.len(), 2);
        assert_eq!(all[1]["name"], None);
        assert_eq!(all[1]["primary"].as_deref(), Some("f"));
        assert_eq!(all[0].len(), 4);
    }

    #[test]
    fn unescapes_copy_text_format() {
        assert_eq!(unescape_copy("\\N"), None);
        assert_eq!(unescape_copy("a\\\\N").as_deref(), Some("a\\N"));
        assert_eq!(unescape_copy("\\t\\n\\r\\\\").as_deref(), Some("\t\n\r\\"));
        assert_eq!(unescape_copy("\\101\\x42\\q").as_deref(), Some("ABq"));
        assert_eq!(unescape_copy("").as_deref(), Some(""));
        assert_eq!(unescape_copy("end\\").as_deref(), Some("end\\"));
    }

    #[test]
    fn parses_quoted_copy_headers() {
        let h = parse_copy_header("COPY public.\"My \"\"T\"\" (x)\" (id, \"a, b\", c) FROM stdin;").unwrap();
        assert_eq!(h.table, "My \"T\" (x)");
        assert_eq!(h.columns, vec!["id", "a, b", "c"]);
        assert_eq!(parse_copy_header("COPY x TO stdout;"), None);
        let h = parse_copy_header("COPY other.t (a) FROM stdin;").unwrap();
        assert_eq!(h.key(), "other.t");
    }

    #[test]
    fn filter_drops_whole_blocks_only() {
        let mut out = Vec::new();
        let s = filter_tables("d", &mut Cursor::new(DUMP), &mut out, &["migrations"], "out").unwrap();
        assert_eq!(s.rows["migrations"], 3);
        let text = String::from_utf8(out).unwrap();
        assert!(
            !text.contains("migrations") && !text.contains("20240617140000"),
            "{text}"
        );
        // Everything else byte for byte.
        let without: String = DUMP.replace(
            "COPY public.migrations (id) FROM stdin;\n20240617140000\n20230101000000\n9\n\\.\n",
            "",
        );
        assert_eq!(text, without);
        let again = summarize("d", &mut Cursor::new(text.as_bytes())).unwrap();
        assert!(!again.rows.contains_key("migrations"));
        assert_eq!(again.rows["hosts"], 3);
        assert_eq!(again.schema_version, None);
        // Dropping nothing copies exactly.
        let mut out = Vec::new();
        filter_tables("d", &mut Cursor::new(DUMP), &mut out, &[], "out").unwrap();
        assert_eq!(out, DUMP.as_bytes());
    }

    #[test]
    fn refuses_what_is_not_a_data_only_text_dump() {
        for (bytes, needle) in [
            (b"PGDMP\x01\x0e\x00".to_vec(), "custom-format"),
            (vec![0x1f, 0x8b, 8, 0], "compressed"),
            (b"hello\nworld\n".to_vec(), "header"),
            (b"".to_vec(), "header"),
        ] {
            let e = summarize("--db-dump x", &mut Cursor::new(bytes)).unwrap_err();
            assert_eq!(e.exit_code(), 3);
            let s = e.to_string();
            assert!(
                s.starts_with("--db-dump x: ") && s.contains(needle) && s.contains(DUMP_COMMAND),
                "{s}"
            );
        }
        let schema = DUMP.replace("SET statement_timeout = 0;", "CREATE TABLE public.x (a int);");
        let e = summarize("d", &mut Cursor::new(schema)).unwrap_err();
        assert!(
            e.to_string().contains("schema statements") && e.to_string().contains("--data-only"),
            "{e}"
        );
        let cut = &DUMP[..DUMP.find("h3\ti1").unwrap()];
        let e = summarize("d", &mut Cursor::new(cut)).unwrap_err();
        assert!(e.to_string().contains("hosts has no end"), "{e}");
    }

    #[test]
    fn large_input_streams() {
        // More than the 4 KiB start, through a small BufReader.
        let mut big = String::from(&DUMP[..DUMP.find("COPY public.hosts").unwrap()]);
        big.push_str("COPY public.events (id, message) FROM stdin;\n");
        for i in 0..5000 {
            big.push_str(&format!("{i}\tevent number {i}\n"));
        }
        big.push_str("\\.\n");
        let s = summarize(
            "d",
            &mut std::io::BufReader::with_capacity(4096, Cursor::new(big.as_bytes())),
        )
        .unwrap();
        assert_eq!(s.rows["events"], 5000);
        assert_eq!(s.rows["clusters"], 2);
    }
}
