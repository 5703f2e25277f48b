//! Reading a `pg_dump --data-only --no-owner --no-privileges` plain-text dump (pure, streaming).
//!
//! Such a dump is SQL with one `COPY <schema>.<table> (<columns>) FROM stdin;` block per
//! non-empty table, each followed by the rows in COPY text format (one row per line, columns
//! separated by a tab) and ended by a line `\.` (PostgreSQL docs, "COPY", "Text Format"; and
//! pg_dump's plain format). What migrate needs from it:
//! - [`summarize`]: rows per table, the `migrations` ids (assisted-service's gormigrate keeps
//!   one row per applied migration; docs/migrate.md "Node 0 and cluster 0") and the
//!   greatest of them;
//! - [`classify_line`]: the lines outside COPY data, of which only pg_dump's own are accepted
//!   (the restore stream is built from the parsed COPY data: [`super::restore`]);
//! - [`column_values`]: one column of a table's rows, unescaped ([`unescape_copy`]); export
//!   reads `clusters.pull_secret` with it.
//!
//! A custom-format dump (`PGDMP` magic), a compressed file, or a text without pg_dump's header
//! is refused with [`Error::InvalidInput`] saying how to make the right one ([`DUMP_COMMAND`]);
//! a dump that also creates tables (no `--data-only`) is refused as well.

use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufRead, Read};

use crate::error::Error;

/// How to make a dump this module reads (shown in errors, the README and docs/migrate.md).
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
    /// The greatest `id` of table `migrations` (longest, then greatest as text); None when the
    /// dump has no such rows. Not a version order on real data: see [`Self::migration_ids`].
    pub schema_version: Option<String>,
    /// Every `id` of table `migrations` (unescaped): the gormigrate migrations node 0's
    /// assisted-service applied. Real ids include typos (`21211125182200`, `2021115162400`),
    /// so only the set says which migrations a database has (docs/migrate.md "Node 0 and cluster 0").
    pub migration_ids: BTreeSet<String>,
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

/// One SQL identifier as PostgreSQL resolves it: a quoted one without its quotes (`"a""b"` →
/// `a"b`, case kept), an unquoted one folded to lower case (ASCII letters only, as the server's
/// `downcase_identifier` does for UTF-8 databases): `MIGRATIONS` and `"migrations"` are both
/// `migrations`.
pub fn fold_ident(s: &str) -> String {
    let s = s.trim();
    if s.len() >= 2 && s.starts_with('"') && s.ends_with('"') {
        s[1..s.len() - 1].replace("\"\"", "\"")
    } else {
        s.to_ascii_lowercase()
    }
}

/// Whether `name` is a plain identifier migrate writes into SQL itself: `[a-z_][a-z0-9_]*`, at
/// most 63 bytes (PostgreSQL's NAMEDATALEN - 1).
pub fn is_plain_ident(name: &str) -> bool {
    let b = name.as_bytes();
    !b.is_empty()
        && b.len() <= 63
        && (b[0].is_ascii_lowercase() || b[0] == b'_')
        && b.iter()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'_')
}

/// Splits one COPY text-format row (without its newline) into its raw fields at the tabs that
/// are delimiters: a backslash escapes the byte after it (`\<TAB>` is a data tab, as the
/// server reads it), so `a\tb` and `a\<TAB>b` are one field each.
pub fn split_fields(row: &[u8]) -> Vec<&[u8]> {
    let mut out = Vec::new();
    let mut start = 0;
    let mut i = 0;
    while i < row.len() {
        match row[i] {
            b'\\' => i += 2,
            b'\t' => {
                out.push(&row[start..i]);
                i += 1;
                start = i;
            }
            _ => i += 1,
        }
    }
    out.push(&row[start.min(row.len())..]);
    out
}

/// [`split_fields`] on text (fields split at ASCII tabs stay valid UTF-8).
fn split_text(row: &str) -> Vec<&str> {
    split_fields(row.as_bytes())
        .into_iter()
        .map(|f| std::str::from_utf8(f).unwrap_or(""))
        .collect()
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
        [t] => ("public".to_string(), fold_ident(t)),
        [s, t] => (fold_ident(s), fold_ident(t)),
        _ => return None,
    };
    let columns = split_outside_quotes(cols, ',')
        .into_iter()
        .map(fold_ident)
        .collect();
    Some(CopyHeader {
        schema,
        table,
        columns,
    })
}

/// The settings pg_dump's plain format sets at its top (pg_backup_archiver.c
/// `_doSetFixedOutputState`, PostgreSQL 12–18) and around objects: lines `SET <one of these> =
/// <value>;` are pg_dump's own.
pub const PG_DUMP_SETTINGS: &[&str] = &[
    "statement_timeout",
    "lock_timeout",
    "idle_in_transaction_session_timeout",
    "transaction_timeout",
    "client_encoding",
    "standard_conforming_strings",
    "check_function_bodies",
    "xmloption",
    "client_min_messages",
    "escape_string_warning",
    "row_security",
    "default_tablespace",
    "default_table_access_method",
    "default_with_oids",
];

/// A line of a dump outside COPY data, as [`classify_line`] reads it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Statement {
    /// A comment, a blank line, or one of pg_dump's own statements that migrate never sends
    /// (`SET` of [`PG_DUMP_SETTINGS`], `SELECT pg_catalog.set_config(...)`, `SELECT
    /// pg_catalog.setval(...)`, `\restrict KEY`, `\unrestrict KEY`).
    Ignored,
    /// `SET client_encoding = 'NAME';`: the encoding of the COPY data (NAME is `[A-Za-z0-9_]+`).
    ClientEncoding(String),
    /// The start of a COPY block.
    Copy(CopyHeader),
}

/// The start of a line for an error message (errors are escaped when shown: `Error::render`).
fn shown_line(line: &[u8]) -> String {
    let text = String::from_utf8_lossy(line);
    let mut out: String = text.chars().take(80).collect();
    if text.chars().count() > 80 {
        out.push('…');
    }
    out
}

/// Reads one line outside COPY data (without its newline) as a statement of `pg_dump
/// --data-only` plain text: [`Statement`]. Anything else — psql meta-commands (`\!`, `\copy`,
/// `\set`, ...), other SQL (`COMMIT;`, `DROP ...`, `create table ...`, a leading space before
/// a keyword), a COPY that is not `COPY name (columns) FROM stdin;` — is refused.
/// Errors: [`Error::InvalidInput`] naming `what` and line `lineno`.
pub fn classify_line(what: &str, lineno: u64, line: &[u8]) -> Result<Statement, Error> {
    let how = format!("make the dump with `{DUMP_COMMAND}`");
    let text = std::str::from_utf8(line).map_err(|_| {
        invalid(
            what,
            format!("line {lineno}: not UTF-8 outside COPY data: {}", shown_line(line)),
        )
    })?;
    if text.trim().is_empty() || text.starts_with("--") {
        return Ok(Statement::Ignored);
    }
    if text.starts_with("COPY ") {
        return parse_copy_header(text).map(Statement::Copy).ok_or_else(|| {
            invalid(
                what,
                format!(
                    "line {lineno}: a COPY statement this reader does not know (pg_dump writes \
                     `COPY schema.table (columns) FROM stdin;`): {}",
                    shown_line(line)
                ),
            )
        });
    }
    if text.starts_with("CREATE ") || text.starts_with("ALTER TABLE ") || text.starts_with("DROP ") {
        return Err(invalid(
            what,
            format!(
                "line {lineno}: the dump holds schema statements ({}…); migrate restores data \
                 into the target's own schema: make the dump with `{DUMP_COMMAND}`",
                shown_line(&line[..line.len().min(30)])
            ),
        ));
    }
    let word = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_');
    if let Some(rest) = text.strip_prefix("SET ").and_then(|r| r.strip_suffix(';')) {
        if let Some((name, value)) = rest.split_once(" = ") {
            let value_ok = value
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"_'.-".contains(&b));
            if PG_DUMP_SETTINGS.contains(&name) && value_ok {
                if name == "client_encoding" {
                    let enc = value.trim_matches('\'');
                    if word(enc) && value.len() == enc.len() + 2 {
                        return Ok(Statement::ClientEncoding(enc.to_string()));
                    }
                } else {
                    return Ok(Statement::Ignored);
                }
            }
        }
    }
    for prefix in ["SELECT pg_catalog.set_config(", "SELECT pg_catalog.setval("] {
        if text.starts_with(prefix) && text.ends_with(");") && text.matches(';').count() == 1 {
            return Ok(Statement::Ignored);
        }
    }
    for cmd in ["\\restrict ", "\\unrestrict "] {
        if text.strip_prefix(cmd).is_some_and(word) {
            return Ok(Statement::Ignored);
        }
    }
    Err(invalid(
        what,
        format!(
            "line {lineno}: `{}` is not something pg_dump --data-only writes (only COPY data is \
             restored, and a dump holding other statements or psql commands is refused): {how}",
            shown_line(line)
        ),
    ))
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
                if h.key() == "migrations" {
                    if let Some(i) = h.columns.iter().position(|c| c == "id") {
                        let text = String::from_utf8_lossy(line);
                        if let Some(Some(id)) = split_text(&text).into_iter().nth(i).map(unescape_copy) {
                            let newer = match &sum.schema_version {
                                None => true,
                                Some(cur) => (id.len(), id.as_str()) > (cur.len(), cur.as_str()),
                            };
                            if newer {
                                sum.schema_version = Some(id.clone());
                            }
                            sum.migration_ids.insert(id);
                        }
                    }
                }
            }
            None => {
                if let Statement::Copy(h) = classify_line(what, lineno, line)? {
                    sum.rows.entry(h.key()).or_insert(0);
                    block = Some(h);
                }
            }
        }
    }
    if let Some(h) = block {
        return Err(invalid(
            what,
            format!(
                "the COPY block of {} has no end-of-data line (a backslash and a period): the dump is cut short; make it again",
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
                    out.push(split_text(&text).into_iter().nth(i).and_then(unescape_copy));
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
            let fields: Vec<&str> = split_text(&text);
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
                    .zip(split_text(&text).into_iter().map(unescape_copy))
                    .collect(),
            );
        },
        None,
    )?;
    Ok(out)
}

/// A libpq connection string (`--db-url` of export and import) split into the same string
/// without its password and the password, so that the password reaches `pg_dump`/`psql` in the
/// `PGPASSWORD` environment variable and never on their command line (visible to every user in
/// `ps` and /proc/PID/cmdline). libpq takes a password in the URL before `PGPASSWORD`, so the
/// connection is the same.
///
/// Forms (PostgreSQL docs "Connection Strings"): a URI `postgres[ql]://user:PASSWORD@host/db`
/// (the userinfo ends at the first `@` before any `/`, as libpq reads it; the password is
/// percent-decoded) and its `?password=...` parameter (also percent-decoded, removed with its
/// `&`); or keyword/value `host=h password=PASSWORD dbname=d` (values bare or single-quoted with
/// `\'` and `\\`). When the password is given twice the last one counts, as in libpq. Anything
/// else is returned unchanged with no password.
pub fn split_db_password(conn: &str) -> (String, Option<Vec<u8>>) {
    let t = conn.trim_start();
    let scheme = ["postgresql://", "postgres://"]
        .into_iter()
        .find(|s| t.starts_with(s));
    match scheme {
        Some(sc) => split_uri_password(&t[..sc.len()], &t[sc.len()..]),
        None if t.contains('=') => split_keyword_password(conn),
        None => (conn.to_string(), None),
    }
}

fn split_uri_password(scheme: &str, rest: &str) -> (String, Option<Vec<u8>>) {
    let mut password = None;
    let mut out = String::from(scheme);
    let mut rest = rest;
    let end = rest.find(['@', '/']).unwrap_or(rest.len());
    if rest[end..].starts_with('@') {
        let userinfo = &rest[..end];
        match userinfo.split_once(':') {
            Some((user, pw)) => {
                password = Some(percent_decode(pw));
                out.push_str(user);
            }
            None => out.push_str(userinfo),
        }
        out.push('@');
        rest = &rest[end + 1..];
    }
    let Some((before, query)) = rest.split_once('?') else {
        out.push_str(rest);
        return (out, password);
    };
    out.push_str(before);
    let kept: Vec<&str> = query
        .split('&')
        .filter(|kv| match kv.split_once('=') {
            Some(("password", v)) => {
                password = Some(percent_decode(v));
                false
            }
            _ => true,
        })
        .collect();
    if !kept.is_empty() {
        out.push('?');
        out.push_str(&kept.join("&"));
    }
    (out, password)
}

fn split_keyword_password(conn: &str) -> (String, Option<Vec<u8>>) {
    let b = conn.as_bytes();
    let mut password = None;
    let mut kept: Vec<&str> = Vec::new();
    let mut i = 0;
    while i < b.len() {
        while i < b.len() && b[i].is_ascii_whitespace() {
            i += 1;
        }
        if i >= b.len() {
            break;
        }
        let start = i;
        while i < b.len() && b[i] != b'=' && !b[i].is_ascii_whitespace() {
            i += 1;
        }
        let key = &conn[start..i];
        while i < b.len() && b[i].is_ascii_whitespace() {
            i += 1;
        }
        if i >= b.len() || b[i] != b'=' {
            // Not keyword=value: leave the string to libpq, which reports it.
            return (conn.to_string(), None);
        }
        i += 1;
        while i < b.len() && b[i].is_ascii_whitespace() {
            i += 1;
        }
        let mut value = Vec::new();
        if i < b.len() && b[i] == b'\'' {
            i += 1;
            while i < b.len() && b[i] != b'\'' {
                if b[i] == b'\\' && i + 1 < b.len() {
                    i += 1;
                }
                value.push(b[i]);
                i += 1;
            }
            i += 1; // closing quote (libpq refuses a missing one)
        } else {
            while i < b.len() && !b[i].is_ascii_whitespace() {
                if b[i] == b'\\' && i + 1 < b.len() {
                    i += 1;
                }
                value.push(b[i]);
                i += 1;
            }
        }
        if key == "password" {
            password = Some(value);
        } else {
            kept.push(&conn[start..i.min(b.len())]);
        }
    }
    (kept.join(" "), password)
}

/// `%XX` decoded (libpq's URI rule); an invalid escape is kept as it is.
fn percent_decode(s: &str) -> Vec<u8> {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let hex = |c: u8| (c as char).to_digit(16);
        if b[i] == b'%' && i + 2 < b.len() {
            if let (Some(h), Some(l)) = (hex(b[i + 1]), hex(b[i + 2])) {
                out.push((h * 16 + l) as u8);
                i += 3;
                continue;
            }
        }
        out.push(b[i]);
        i += 1;
    }
    out
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
        assert_eq!(
            s.migration_ids.iter().map(String::as_str).collect::<Vec<_>>(),
            vec!["20230101000000", "20240617140000", "9"]
        );
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
    fn only_pg_dump_lines_are_accepted_outside_copy_data() {
        for bad in [
            "\\! id > /tmp/pwned",
            "\\copy (select 1) to '/tmp/x'",
            "\\set ON_ERROR_STOP 0",
            "COMMIT;",
            "BEGIN;",
            " drop table public.service_networks;",
            "create table public.attacker (x text);",
            "SET session_replication_role = replica;",
            "SET statement_timeout = 0; DROP TABLE x;",
            "COPY public.hosts (id) FROM stdin; DROP TABLE x;",
            "COPY public.hosts (id) FROM '/etc/passwd';",
        ] {
            let d = DUMP.replace("SET statement_timeout = 0;", bad);
            let e = summarize("d", &mut Cursor::new(d)).unwrap_err();
            assert_eq!(e.exit_code(), 3, "{bad}");
            assert!(e.to_string().contains("line 8:"), "{bad}: {e}");
        }
        for ok in [
            "SET transaction_timeout = 0;",
            "SET default_table_access_method = heap;",
            "\\restrict AbC123",
            "\\unrestrict AbC123",
            "   ",
            "-- \\! only a comment",
        ] {
            let d = DUMP.replace("SET statement_timeout = 0;", ok);
            summarize("d", &mut Cursor::new(d)).unwrap();
        }
        assert_eq!(
            classify_line("d", 1, b"SET client_encoding = 'LATIN1';").unwrap(),
            Statement::ClientEncoding("LATIN1".into())
        );
        assert!(classify_line("d", 1, b"SET client_encoding = 'x; y';").is_err());
    }

    #[test]
    fn identifiers_fold_as_postgresql_does() {
        let h = parse_copy_header("COPY PUBLIC.MIGRATIONS (ID) FROM stdin;").unwrap();
        assert_eq!((h.key().as_str(), h.columns[0].as_str()), ("migrations", "id"));
        let h = parse_copy_header("COPY public.\"Migrations\" (\"ID\") FROM stdin;").unwrap();
        assert_eq!((h.key().as_str(), h.columns[0].as_str()), ("Migrations", "ID"));
        // A case-bypassed migrations block counts for the schema version.
        let d = DUMP.replace(
            "SELECT pg_catalog.setval",
            "COPY public.MIGRATIONS (id) FROM stdin;\n29990101000000\n\\.\nSELECT pg_catalog.setval",
        );
        let s = summarize("d", &mut Cursor::new(d)).unwrap();
        assert_eq!(s.schema_version.as_deref(), Some("29990101000000"));
        assert!(s.migration_ids.contains("29990101000000"));
        assert_eq!(s.rows["migrations"], 4);
        assert!(is_plain_ident("kube_key_name") && is_plain_ident("_x1"));
        for bad in ["", "Id", "1a", "id); drop table x; --", "a-b", &"a".repeat(64)] {
            assert!(!is_plain_ident(bad), "{bad}");
        }
    }

    #[test]
    fn fields_split_at_delimiter_tabs_only() {
        assert_eq!(split_fields(b"a\tb\tc"), vec![&b"a"[..], b"b", b"c"]);
        assert_eq!(split_fields(b"a\\\tb\tc"), vec![&b"a\\\tb"[..], b"c"]);
        assert_eq!(split_fields(b"a\\\\\tb"), vec![&b"a\\\\"[..], b"b"]);
        assert_eq!(split_fields(b""), vec![&b""[..]]);
        assert_eq!(split_fields(b"x\\"), vec![&b"x\\"[..]]);
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
