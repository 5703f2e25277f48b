//! The database restore stream of `migrate import`, built from the bundle's `db/dump.sql` so
//! that nothing of the dump's text except COPY row data ever reaches `psql` (pure, streaming).
//!
//! A dump is text a bundle author controls (a bundle can be edited and its checksums
//! recomputed, and `export --db-dump` takes any file); `psql -f -` runs whatever it reads,
//! including meta-commands (`\!` runs a shell, `\copy` writes files) and SQL that ends the
//! transaction. So the dump is parsed, never passed through:
//! - outside COPY data only pg_dump's own lines are accepted ([`dump::classify_line`]:
//!   comments, blank lines, known `SET`s, `set_config`/`setval`, `\restrict`/`\unrestrict`), and
//!   all of them are dropped; anything else is refused with the line number;
//! - a COPY block is restored only for a table of [`RESTORED_TABLES`] (names compared after
//!   PostgreSQL's identifier folding, schema `public`); `migrations` is read for the schema
//!   version and never restored; blocks of other tables are left out (listed in
//!   [`Checked::skipped_tables`]);
//! - column names must be plain identifiers ([`dump::is_plain_ident`]); the COPY statement
//!   sent is made here (`COPY public."t" ("c", ...) FROM stdin;`), the row lines are passed as
//!   they are after checking their field count, that they cannot end the block early or join
//!   the next line (no `\.`, no bare CR or NUL, no trailing escaping backslash), and that each
//!   row belongs to the bundle's cluster ([`Scope`]);
//! - the stream is `BEGIN;`, fixed settings, the COPYs, the caller's kube-key UPDATEs, the
//!   `events` id sequence set after the restored ids, `COMMIT;` — or `ROLLBACK;` when the
//!   input fails a check on the way (the file's sha256 is computed while it is read and
//!   compared with the manifest's at the end: a file changed after the bundle was verified is
//!   rolled back too).
//!
//! Rows soft-deleted by gorm (`deleted_at` set; never served over REST and not counted by
//! export's cross-checks) that belong to another cluster are left out rather than refused
//! ([`Checked::skipped_deleted`]); those of the bundle's cluster are restored as they are.

use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufRead, BufReader, Read, Write};

use sha2::{Digest, Sha256};

use super::dump::{self, CopyHeader, Statement};
use crate::error::Error;

/// The assisted-service tables restored (docs/migrate.md "Node 0 and cluster 0", "Tables"), in no
/// particular order. `migrations` is not one of them: the target keeps its own.
pub const RESTORED_TABLES: &[&str] = &[
    "clusters",
    "infra_envs",
    "hosts",
    "events",
    "cluster_networks",
    "service_networks",
    "machine_networks",
    "api_vips",
    "ingress_vips",
    "monitored_operators",
];

/// gormigrate's table: read for the schema version, never restored.
pub const SCHEMA_TABLE: &str = "migrations";

/// The sequence of `events.id` (gorm's `bigserial` column `id` of table `events`: PostgreSQL
/// names it `events_id_seq`; the simulator's schema, tests/sim/src/node0schema.rs, too).
pub const EVENTS_SEQUENCE: &str = "public.events_id_seq";

/// The bundle's cluster: the rows a dump may hold.
#[derive(Debug, Clone, Default)]
pub struct Scope {
    /// assisted-service id of the cluster (`manifest.cluster.id`).
    pub cluster_id: String,
    /// Its infra-envs (`manifest.cluster.infra_env_ids`: bound ones and late-binding ones
    /// holding its hosts).
    pub infra_env_ids: BTreeSet<String>,
}

impl Scope {
    /// The scope of cluster `cluster_id` with infra-envs `infra_env_ids`.
    pub fn new(cluster_id: &str, infra_env_ids: &[String]) -> Scope {
        Scope {
            cluster_id: cluster_id.to_string(),
            infra_env_ids: infra_env_ids.iter().cloned().collect(),
        }
    }
}

/// What the checks found (and, for [`write_stream`], what was sent).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Checked {
    /// Rows restored per table of [`RESTORED_TABLES`] (tables with a block, also empty ones).
    pub rows: BTreeMap<String, u64>,
    /// Blocks left out (table key as [`CopyHeader::key`] → rows): `migrations` and tables
    /// migrate does not restore (e.g. assisted-service's `release_images`).
    pub skipped_tables: BTreeMap<String, u64>,
    /// Soft-deleted rows of other clusters left out, per table.
    pub skipped_deleted: BTreeMap<String, u64>,
    /// The greatest `migrations.id` (None without rows there).
    pub schema_version: Option<String>,
    /// Every `migrations.id` of the dump (unescaped; [`dump::DumpSummary::migration_ids`]).
    pub migration_ids: BTreeSet<String>,
    /// The columns of each restored table's COPY block, in the dump's order (table as
    /// [`RESTORED_TABLES`] names it): what the target's tables must have.
    pub columns: BTreeMap<String, Vec<String>>,
    /// Lowercase hex sha256 of every byte read.
    pub sha256: String,
    /// Bytes read.
    pub bytes: u64,
    /// `id`s of the `infra_envs` rows restored (unescaped).
    pub infra_env_ids: BTreeSet<String>,
    /// `(id, infra_env_id)` of the `hosts` rows restored (unescaped; hosts' primary key).
    pub host_keys: BTreeSet<(String, String)>,
    /// The [`Checked::host_keys`] whose row is not soft-deleted (`deleted_at` NULL): the hosts
    /// node 0's REST API lists (manifest `cluster.host_ids`).
    pub live_host_keys: BTreeSet<(String, String)>,
    /// COPY blocks sent: (table, first line, last line) of the stream, 1-based, as psql
    /// numbers its input lines (`psql:<stdin>:N:`).
    blocks: Vec<(String, u64, u64)>,
}

impl Checked {
    /// When psql's `stderr` of a failed restore reports an error inside a COPY block this
    /// stream sent (`psql:<stdin>:N: ERROR:` with N between the block's `COPY` and `\.` lines,
    /// or the server's `CONTEXT:  COPY table, line N`), the table: the data was refused, not
    /// the connection.
    pub fn copy_error(&self, stderr: &str) -> Option<String> {
        for l in stderr.lines() {
            if let Some(rest) = l.strip_prefix("psql:<stdin>:") {
                if let Some(n) = rest.split(':').next().and_then(|n| n.parse::<u64>().ok()) {
                    if rest.contains(" ERROR: ") {
                        if let Some((t, _, _)) = self.blocks.iter().find(|(_, a, b)| (*a..=*b).contains(&n)) {
                            return Some(t.clone());
                        }
                    }
                }
            }
            if let Some(rest) = l.trim_start().strip_prefix("CONTEXT:  COPY ") {
                let t = rest.split(',').next().unwrap_or("").to_string();
                if self.blocks.iter().any(|(b, _, _)| *b == t) {
                    return Some(t);
                }
            }
        }
        None
    }
}

/// What [`write_stream`] checks at the end of the input, before it commits.
#[derive(Debug, Clone, Default)]
pub struct Expect<'a> {
    /// The manifest's sha256 of the file (None: not checked).
    pub sha256: Option<&'a str>,
    /// The manifest's `source.schema_version` (None or empty: not checked).
    pub schema_version: Option<&'a str>,
    /// The manifest's `source.migration_ids` (None or empty, as in bundles of earlier
    /// versions: not checked); else the dump's set of `migrations.id` must be exactly these.
    pub migration_ids: Option<&'a [String]>,
}

fn invalid(what: &str, message: impl Into<String>) -> Error {
    Error::InvalidInput {
        field: what.to_string(),
        message: message.into(),
    }
}

/// A reader that hashes and counts what passes through it.
struct Hashing<R> {
    inner: R,
    hash: Sha256,
    bytes: u64,
}

impl<R: Read> Read for Hashing<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.hash.update(&buf[..n]);
        self.bytes += n as u64;
        Ok(n)
    }
}

/// Where a row's owner is read from, per restored table.
struct Owner {
    table: String,
    /// Column indexes: id, cluster_id, infra_env_id, deleted_at (those the table has).
    id: Option<usize>,
    cluster_id: Option<usize>,
    infra_env_id: Option<usize>,
    deleted_at: Option<usize>,
}

impl Owner {
    fn of(what: &str, lineno: u64, h: &CopyHeader) -> Result<Owner, Error> {
        let at = |c: &str| h.columns.iter().position(|x| x == c);
        let o = Owner {
            table: h.table.clone(),
            id: at("id"),
            cluster_id: at("cluster_id"),
            infra_env_id: at("infra_env_id"),
            deleted_at: at("deleted_at"),
        };
        let needed: &[(&str, Option<usize>)] = match h.table.as_str() {
            "clusters" => &[("id", o.id)],
            "infra_envs" => &[("id", o.id), ("cluster_id", o.cluster_id)],
            "hosts" => &[
                ("id", o.id),
                ("cluster_id", o.cluster_id),
                ("infra_env_id", o.infra_env_id),
            ],
            "events" => &[("cluster_id", o.cluster_id), ("infra_env_id", o.infra_env_id)],
            _ => &[("cluster_id", o.cluster_id)],
        };
        for (c, i) in needed {
            if i.is_none() {
                return Err(invalid(
                    what,
                    format!(
                        "line {lineno}: the COPY block of table {} has no column {c}, which says \
                         which cluster a row belongs to",
                        h.table
                    ),
                ));
            }
        }
        Ok(o)
    }

    /// Field `i` of a row, unescaped as the server reads it (None: no such column or NULL).
    fn value(&self, fields: &[&[u8]], i: Option<usize>) -> Option<String> {
        i.and_then(|i| fields.get(i))
            .and_then(|f| dump::unescape_copy(&String::from_utf8_lossy(f)))
    }

    /// Ok(true) the row is the cluster's; Ok(false) a soft-deleted row of another one (left
    /// out); Err(why) refused.
    fn check(&self, scope: &Scope, fields: &[&[u8]]) -> Result<bool, String> {
        let val = |i: Option<usize>| -> Option<String> {
            i.and_then(|i| fields.get(i))
                .and_then(|f| dump::unescape_copy(&String::from_utf8_lossy(f)))
        };
        let cid = val(self.cluster_id);
        let cid = cid.as_deref().filter(|s| !s.is_empty());
        let ours = |v: Option<&str>| v == Some(scope.cluster_id.as_str());
        let in_set = |v: Option<String>| v.is_some_and(|v| scope.infra_env_ids.contains(&v));
        let (ok, why) = match self.table.as_str() {
            "clusters" => {
                let id = val(self.id);
                (ours(id.as_deref()), format!("id {:?}", id.unwrap_or_default()))
            }
            // Bound to this cluster or late-binding (no cluster), and listed in the manifest:
            // a listed id does not let another cluster's infra-env through.
            "infra_envs" => {
                let id = val(self.id);
                (
                    (cid.is_none() || ours(cid)) && in_set(id.clone()),
                    format!(
                        "infra-env {:?} of cluster {:?}",
                        id.unwrap_or_default(),
                        cid.unwrap_or("")
                    ),
                )
            }
            // A host is in one of the cluster's infra-envs, and of this cluster or of none yet.
            "hosts" => {
                let ie = val(self.infra_env_id);
                (
                    (cid.is_none() || ours(cid)) && in_set(ie.clone()),
                    format!(
                        "cluster_id {:?}, infra_env_id {:?}",
                        cid.unwrap_or(""),
                        ie.unwrap_or_default()
                    ),
                )
            }
            "events" => {
                let ie = val(self.infra_env_id);
                (
                    ours(cid) || (cid.is_none() && in_set(ie.clone())),
                    format!(
                        "cluster_id {:?}, infra_env_id {:?}",
                        cid.unwrap_or(""),
                        ie.unwrap_or_default()
                    ),
                )
            }
            _ => (ours(cid), format!("cluster_id {:?}", cid.unwrap_or(""))),
        };
        if ok {
            return Ok(true);
        }
        if val(self.deleted_at).is_some() {
            return Ok(false);
        }
        Err(why)
    }
}

/// Whether a COPY row holds a backslash-period that is not an escaped backslash followed by a
/// period: PostgreSQL's end-of-data marker, which ends the block early (the rest of the rows
/// would be lost or read as SQL).
pub fn has_end_marker(row: &[u8]) -> bool {
    let mut i = 0;
    while i < row.len() {
        if row[i] == b'\\' {
            if row.get(i + 1) == Some(&b'.') {
                return true;
            }
            i += 2;
        } else {
            i += 1;
        }
    }
    false
}

/// A SQL string literal (`'…'`, quotes doubled; standard_conforming_strings is on in the
/// stream). Errors: [`Error::InvalidInput`] for a NUL, which PostgreSQL text cannot hold.
pub fn sql_literal(s: &str) -> Result<String, Error> {
    if s.contains('\0') {
        return Err(invalid(
            "bundle",
            format!("{s:?}: NUL in a value written to the database"),
        ));
    }
    Ok(format!("'{}'", s.replace('\'', "''")))
}

/// The dollar-quote tag of [`verify_sql`]'s `DO` block.
const VERIFY_TAG: &str = "$agent_day2_verify$";

/// The `DO` block that checks, inside the restore transaction, that each restored table now
/// holds exactly as many rows of the cluster as the stream restored (`checked.rows`), with
/// the owner rules of the checks: `clusters` by id, `infra_envs` by the restored ids, `hosts`
/// by the restored `(id, infra_env_id)` keys, `events` by cluster id or (no cluster and) one
/// of the restored infra-envs, the other tables by cluster id. A difference (rows dropped by
/// the server, or rows of the cluster already there) raises an exception: with psql's
/// ON_ERROR_STOP the transaction is never committed.
/// Errors: [`Error::InvalidInput`] for a value that cannot be quoted.
pub fn verify_sql(scope: &Scope, checked: &Checked) -> Result<String, Error> {
    let cid = sql_literal(&scope.cluster_id)?;
    let list = |col: &str, v: Vec<String>| match v.is_empty() {
        true => "false".to_string(),
        false => format!("{col} IN ({})", v.join(", ")),
    };
    let ie_in = |col: &str| -> Result<String, Error> {
        Ok(list(
            col,
            checked
                .infra_env_ids
                .iter()
                .map(|s| sql_literal(s))
                .collect::<Result<_, _>>()?,
        ))
    };
    let hosts = list(
        "(id::text, infra_env_id::text)",
        checked
            .host_keys
            .iter()
            .map(|(a, b)| Ok(format!("({}, {})", sql_literal(a)?, sql_literal(b)?)))
            .collect::<Result<_, Error>>()?,
    );
    let mut body = String::new();
    for (table, n) in &checked.rows {
        let cond = match table.as_str() {
            "clusters" => format!("id::text = {cid}"),
            "infra_envs" => ie_in("id::text")?,
            "hosts" => hosts.clone(),
            "events" => format!(
                "cluster_id::text = {cid} OR (coalesce(cluster_id::text, '') = '' AND {})",
                ie_in("infra_env_id::text")?
            ),
            _ => format!("cluster_id::text = {cid}"),
        };
        body.push_str(&format!(
            "  SELECT count(*) INTO n FROM public.\"{table}\" WHERE {cond};\n  \
             IF n <> {n} THEN RAISE EXCEPTION 'agent-day2 migrate: table {table} holds % rows of \
             the cluster after the restore, {n} were restored', n; END IF;\n"
        ));
    }
    if body.contains(VERIFY_TAG) {
        return Err(invalid(
            "bundle file db/dump.sql",
            "a restored id holds the text $agent_day2_verify$",
        ));
    }
    Ok(format!(
        "DO {VERIFY_TAG}\nDECLARE n bigint;\nBEGIN\n{body}END\n{VERIFY_TAG};\n"
    ))
}

/// Checks a dump as [`write_stream`] does, sending nothing (export checks the dump it puts in a
/// bundle with it). Errors: as [`write_stream`].
pub fn check_dump(
    what: &str,
    r: &mut dyn Read,
    scope: &Scope,
    expect: &Expect<'_>,
) -> Result<Checked, Error> {
    let mut checked = Checked::default();
    let sink = &mut std::io::sink();
    run(
        what,
        r,
        scope,
        expect,
        &|_| Ok(String::new()),
        sink,
        false,
        &mut checked,
    )?;
    Ok(checked)
}

/// The SQL a caller adds after the COPYs, made from what was restored (e.g. the kube-key
/// UPDATEs of exactly the restored rows).
pub type Updates<'a> = &'a dyn Fn(&Checked) -> Result<String, Error>;

/// Writes the restore stream of the dump `r` to `w` (see the module doc): `BEGIN;`, settings,
/// the checked COPY blocks, `updates(checked)` (SQL made by the caller from the restored rows,
/// e.g. the kube-key UPDATEs), a check that the target now holds exactly as many rows of the
/// cluster per table as were restored ([`verify_sql`]: a `DO` block raising an exception,
/// so psql's ON_ERROR_STOP rolls the transaction back), the `events` sequence set after the
/// greatest restored id, `COMMIT;`.
///
/// On a refused input the stream ends with `ROLLBACK;` (after closing an open COPY block with
/// `\.`), so what was sent is undone, and the error is returned. Checks at the end: `expect`'s
/// sha256 and schema version, and that the dump holds the cluster's `clusters` row.
///
/// `checked` is filled as the input is read, also when it fails (psql's errors are mapped to
/// the blocks with it: [`Checked::copy_error`]).
///
/// Errors: [`Error::InvalidInput`] naming `what` (and the line) for anything refused;
/// [`Error::Io`] when `w` fails (e.g. psql stopped reading).
pub fn write_stream(
    what: &str,
    r: &mut dyn Read,
    scope: &Scope,
    expect: &Expect<'_>,
    updates: Updates<'_>,
    w: &mut dyn Write,
    checked: &mut Checked,
) -> Result<(), Error> {
    run(what, r, scope, expect, updates, w, true, checked)
}

/// Counts the lines written, for [`Checked::copy_error`].
struct Out<'a> {
    w: &'a mut dyn Write,
    lines: u64,
}

impl Out<'_> {
    fn put(&mut self, b: &[u8]) -> Result<(), Error> {
        self.lines += b.iter().filter(|c| **c == b'\n').count() as u64;
        self.w.write_all(b).map_err(|e| Error::Io {
            path: "the restore stream".into(),
            source: e,
        })
    }
}

#[allow(clippy::too_many_arguments)]
fn run(
    what: &str,
    r: &mut dyn Read,
    scope: &Scope,
    expect: &Expect<'_>,
    updates: Updates<'_>,
    w: &mut dyn Write,
    send: bool,
    checked: &mut Checked,
) -> Result<(), Error> {
    let mut out = Out { w, lines: 0 };
    let mut hashing = Hashing {
        inner: r,
        hash: Sha256::new(),
        bytes: 0,
    };
    let mut in_copy = false;
    let res = body(
        what,
        &mut hashing,
        scope,
        expect,
        updates,
        &mut out,
        send,
        checked,
        &mut in_copy,
    );
    match res {
        Ok(()) => Ok(()),
        Err(e) => {
            if send {
                // Undo what was sent; psql may be gone already (then its own error tells why).
                let end: &[u8] = if in_copy {
                    b"\\.\nROLLBACK;\n"
                } else {
                    b"ROLLBACK;\n"
                };
                let _ = out.put(end);
                let _ = out.w.flush();
            }
            Err(e)
        }
    }
}

#[allow(clippy::too_many_arguments)]
fn body(
    what: &str,
    hashing: &mut Hashing<&mut dyn Read>,
    scope: &Scope,
    expect: &Expect<'_>,
    updates: Updates<'_>,
    out: &mut Out<'_>,
    send: bool,
    checked: &mut Checked,
    in_copy: &mut bool,
) -> Result<(), Error> {
    // The start is checked as the other readers of a dump do, then read again as input.
    let mut start = Vec::with_capacity(4096);
    (&mut *hashing)
        .take(4096)
        .read_to_end(&mut start)
        .map_err(|e| invalid(what, format!("cannot read it: {e}")))?;
    dump::check_start(what, &start)?;
    let mut br = BufReader::with_capacity(256 * 1024, std::io::Cursor::new(start).chain(&mut *hashing));
    if send {
        out.put(b"BEGIN;\n")?;
    }
    let mut settings_sent = false;
    // The block being read: its header, whether it is sent, its owner columns.
    let mut block: Option<(CopyHeader, bool, Option<Owner>)> = None;
    let mut buf = Vec::with_capacity(8192);
    let mut lineno = 0u64;
    let mut row_in_block = 0u64;
    let mut events_restored = false;
    let mut has_cluster = false;
    loop {
        buf.clear();
        let n = br
            .read_until(b'\n', &mut buf)
            .map_err(|e| invalid(what, format!("cannot read it: {e}")))?;
        if n == 0 {
            break;
        }
        lineno += 1;
        let raw = buf.strip_suffix(b"\n").unwrap_or(&buf);
        match &mut block {
            Some((h, sent, owner)) => {
                // psql ends COPY data at `\.` alone on a line (also before a CR).
                if raw == b"\\." || raw == b"\\.\r" {
                    if *sent {
                        out.put(b"\\.\n")?;
                        if let Some(b) = checked.blocks.last_mut() {
                            b.2 = out.lines;
                        }
                        *in_copy = false;
                    }
                    block = None;
                    continue;
                }
                row_in_block += 1;
                let table = h.key();
                let bad = |m: String| {
                    invalid(
                        what,
                        format!("line {lineno} (table {table}, row {row_in_block}): {m}"),
                    )
                };
                if table == SCHEMA_TABLE {
                    let fields = dump::split_fields(raw);
                    if let Some(i) = h.columns.iter().position(|c| c == "id") {
                        let text = String::from_utf8_lossy(fields.get(i).copied().unwrap_or(b"\\N"));
                        if let Some(id) = dump::unescape_copy(&text) {
                            let newer = match &checked.schema_version {
                                None => true,
                                Some(cur) => (id.len(), id.as_str()) > (cur.len(), cur.as_str()),
                            };
                            if newer {
                                checked.schema_version = Some(id.clone());
                            }
                            checked.migration_ids.insert(id);
                        }
                    }
                }
                if !*sent {
                    *checked.skipped_tables.entry(table).or_insert(0) += 1;
                    continue;
                }
                if std::str::from_utf8(raw).is_err() {
                    return Err(bad(
                        "the row is not valid UTF-8 (the stream is sent as UTF8)".into()
                    ));
                }
                if has_end_marker(raw) {
                    return Err(bad(
                        "an unescaped backslash-period in COPY data, which ends the block early on \
                         the server (pg_dump writes a backslash as two)"
                            .into(),
                    ));
                }
                if raw.contains(&b'\r') || raw.contains(&0) {
                    return Err(bad(
                        "a carriage return or NUL byte in COPY data (pg_dump writes a carriage \
                         return as an escape and never writes NUL)"
                            .into(),
                    ));
                }
                let fields = dump::split_fields(raw);
                let trailing = raw.iter().rev().take_while(|c| **c == b'\\').count();
                if trailing % 2 == 1 {
                    return Err(bad(
                        "the row ends in a backslash, which would join it with the next line".into(),
                    ));
                }
                if fields.len() != h.columns.len() {
                    return Err(bad(format!(
                        "{} fields for {} columns",
                        fields.len(),
                        h.columns.len()
                    )));
                }
                let owner = owner.as_ref().expect("sent blocks have an owner");
                match owner.check(scope, &fields) {
                    Ok(true) => {}
                    Ok(false) => {
                        *checked.skipped_deleted.entry(table).or_insert(0) += 1;
                        continue;
                    }
                    Err(why) => {
                        return Err(bad(format!(
                            "the row is not of this bundle's cluster {} ({why}): the dump holds \
                             rows of another cluster; export again from node 0",
                            scope.cluster_id
                        )))
                    }
                }
                match h.table.as_str() {
                    "clusters" => has_cluster = true,
                    "infra_envs" => {
                        if let Some(id) = owner.value(&fields, owner.id) {
                            checked.infra_env_ids.insert(id);
                        }
                    }
                    "hosts" => {
                        let id = owner.value(&fields, owner.id).unwrap_or_default();
                        let ie = owner.value(&fields, owner.infra_env_id).unwrap_or_default();
                        if owner.value(&fields, owner.deleted_at).is_none() {
                            checked.live_host_keys.insert((id.clone(), ie.clone()));
                        }
                        checked.host_keys.insert((id, ie));
                    }
                    _ => {}
                }
                *checked.rows.entry(table).or_insert(0) += 1;
                out.put(raw)?;
                out.put(b"\n")?;
            }
            None => match dump::classify_line(what, lineno, raw.strip_suffix(b"\r").unwrap_or(raw))? {
                Statement::Ignored => {}
                // Only UTF8: under another client encoding the server reads the row bytes
                // differently from the owner checks here (e.g. SJIS's multi-byte characters
                // swallow a following backslash or tab).
                Statement::ClientEncoding(e) => {
                    if !e.eq_ignore_ascii_case("UTF8") {
                        return Err(invalid(
                            what,
                            format!(
                                "line {lineno}: client_encoding {e:?}: only UTF8 dumps are restored \
                                 (pg_dump of assisted-service's UTF8 database writes UTF8)"
                            ),
                        ));
                    }
                }
                Statement::Copy(h) => {
                    for c in &h.columns {
                        if !dump::is_plain_ident(c) {
                            return Err(invalid(
                                what,
                                format!(
                                    "line {lineno}: column {} of table {} is not a plain identifier \
                                     ([a-z_][a-z0-9_]*, at most 63 bytes)",
                                    c,
                                    h.key()
                                ),
                            ));
                        }
                    }
                    let key = h.key();
                    let restored = RESTORED_TABLES.contains(&key.as_str());
                    row_in_block = 0;
                    if !restored {
                        checked.skipped_tables.entry(key).or_insert(0);
                        block = Some((h, false, None));
                        continue;
                    }
                    if checked.rows.contains_key(&key) {
                        return Err(invalid(
                            what,
                            format!("line {lineno}: a second COPY block of table {key}"),
                        ));
                    }
                    let owner = Owner::of(what, lineno, &h)?;
                    if !settings_sent {
                        out.put(b"SET client_encoding = 'UTF8';\nSET standard_conforming_strings = on;\n")?;
                        settings_sent = true;
                    }
                    let cols: Vec<String> = h.columns.iter().map(|c| format!("\"{c}\"")).collect();
                    out.put(
                        format!("COPY public.\"{}\" ({}) FROM stdin;\n", h.table, cols.join(", ")).as_bytes(),
                    )?;
                    checked.blocks.push((key.clone(), out.lines, out.lines));
                    *in_copy = true;
                    if key == "events" {
                        events_restored = true;
                    }
                    checked.rows.insert(key.clone(), 0);
                    checked.columns.insert(key, h.columns.clone());
                    block = Some((h, true, Some(owner)));
                }
            },
        }
    }
    drop(br);
    if let Some((h, _, _)) = block {
        return Err(invalid(
            what,
            format!(
                "the COPY block of {} has no end-of-data line (a backslash and a period): the dump is cut short; make it again",
                h.key()
            ),
        ));
    }
    checked.bytes = hashing.bytes;
    checked.sha256 = hex::encode(std::mem::take(&mut hashing.hash).finalize());
    if let Some(want) = expect.sha256 {
        if checked.sha256 != want {
            return Err(invalid(
                what,
                "the file changed after the bundle was verified (its sha256 differs from the \
                 manifest's now): nothing was restored; check who writes to the bundle directory",
            ));
        }
    }
    if let Some(want) = expect.schema_version.filter(|v| !v.trim().is_empty()) {
        if checked.schema_version.as_deref() != Some(want.trim()) {
            return Err(invalid(
                what,
                format!(
                    "its schema version (greatest migrations.id) is {:?}, the manifest says {want}",
                    checked.schema_version.as_deref().unwrap_or("")
                ),
            ));
        }
    }
    if let Some(want) = expect.migration_ids.filter(|v| !v.is_empty()) {
        let want: BTreeSet<String> = want.iter().cloned().collect();
        if checked.migration_ids != want {
            let only = |a: &BTreeSet<String>, b: &BTreeSet<String>| {
                a.difference(b).cloned().collect::<Vec<_>>().join(", ")
            };
            return Err(invalid(
                what,
                crate::output::display(&format!(
                    "the ids of its migrations table differ from the manifest's source.migration_ids: only in \
                     the dump [{}], only in the manifest [{}]",
                    only(&checked.migration_ids, &want),
                    only(&want, &checked.migration_ids)
                )),
            ));
        }
    }
    if send && !has_cluster {
        return Err(invalid(
            what,
            format!(
                "it has no clusters row of this bundle's cluster {}",
                scope.cluster_id
            ),
        ));
    }
    if send {
        let updates = updates(checked)?;
        out.put(updates.as_bytes())?;
        if !updates.is_empty() && !updates.ends_with('\n') {
            out.put(b"\n")?;
        }
        out.put(verify_sql(scope, checked)?.as_bytes())?;
        if events_restored {
            out.put(
                format!(
                    "SELECT pg_catalog.setval('{EVENTS_SEQUENCE}', \
                     COALESCE((SELECT max(id) FROM public.events), 1));\n"
                )
                .as_bytes(),
            )?;
        }
        out.put(b"COMMIT;\n")?;
        out.w.flush().map_err(|e| Error::Io {
            path: "the restore stream".into(),
            source: e,
        })?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const CID: &str = "c0ffee00-0000-0000-0000-000000000001";
    const IE: &str = "1e000000-0000-0000-0000-000000000001";
    const LATE: &str = "1e000000-0000-0000-0000-000000000002";

    /// A dump as pg_dump 15 writes it (with pg_dump 17.6+'s `\restrict` lines).
    fn dump() -> String {
        format!(
            "--\n-- PostgreSQL database dump\n--\n\n\\restrict abcDEF123\n\n\
             SET statement_timeout = 0;\nSET lock_timeout = 0;\nSET transaction_timeout = 0;\n\
             SET client_encoding = 'UTF8';\nSET standard_conforming_strings = on;\n\
             SELECT pg_catalog.set_config('search_path', '', false);\nSET check_function_bodies = false;\n\
             SET xmloption = content;\nSET client_min_messages = warning;\nSET row_security = off;\n\n\
             --\n-- Data for Name: clusters; Type: TABLE DATA; Schema: public; Owner: -\n--\n\n\
             COPY public.clusters (id, name, \"primary\", deleted_at) FROM stdin;\n\
             {CID}\tagent-cluster\tt\t\\N\n\
             dead0000-0000-0000-0000-000000000009\told\tf\t2026-01-01 00:00:00+00\n\\.\n\n\n\
             COPY public.infra_envs (id, cluster_id, name) FROM stdin;\n\
             {IE}\t{CID}\tagent-cluster\n{LATE}\t\\N\tlate\n\\.\n\n\
             COPY public.hosts (id, infra_env_id, cluster_id) FROM stdin;\n\
             h1\t{IE}\t{CID}\nh2\t{LATE}\t{CID}\nh3\t{LATE}\t\\N\n\\.\n\n\
             COPY public.events (id, cluster_id, infra_env_id, message, deleted_at) FROM stdin;\n\
             1\t{CID}\t\\N\tinstalled\\tok\t\\N\n2\t\\N\t{LATE}\timage\t\\N\n\\.\n\n\
             COPY public.api_vips (cluster_id, ip) FROM stdin;\n{CID}\t192.168.111.5\n\\.\n\n\
             COPY public.release_images (openshift_version, url) FROM stdin;\n4.18\tq\n\\.\n\n\
             COPY public.migrations (id) FROM stdin;\n20240617140000\n20230101000000\n\\.\n\n\
             SELECT pg_catalog.setval('public.events_id_seq', 2, true);\n\n\
             --\n-- PostgreSQL database dump complete\n--\n\n\\unrestrict abcDEF123\n\n"
        )
    }

    fn scope() -> Scope {
        Scope::new(CID, &[IE.to_string(), LATE.to_string()])
    }

    /// [`write_stream`] returning what it found.
    fn ws(
        what: &str,
        r: &mut dyn Read,
        scope: &Scope,
        expect: &Expect<'_>,
        updates: &str,
        w: &mut dyn Write,
    ) -> Result<Checked, Error> {
        let mut c = Checked::default();
        write_stream(what, r, scope, expect, &|_| Ok(updates.to_string()), w, &mut c).map(|_| c)
    }

    fn stream(d: &str) -> (Result<Checked, Error>, String) {
        let mut out = Vec::new();
        let r = ws(
            "bundle file db/dump.sql",
            &mut d.as_bytes(),
            &scope(),
            &Expect::default(),
            "UPDATE public.clusters SET kube_key_name = 'x';\n",
            &mut out,
        );
        (r, String::from_utf8(out).unwrap())
    }

    #[test]
    fn the_stream_is_made_here_with_the_rows_verbatim() {
        let d = dump();
        let (r, out) = stream(&d);
        let c = r.unwrap();
        let want = format!(
            "BEGIN;\nSET client_encoding = 'UTF8';\nSET standard_conforming_strings = on;\n\
             COPY public.\"clusters\" (\"id\", \"name\", \"primary\", \"deleted_at\") FROM stdin;\n\
             {CID}\tagent-cluster\tt\t\\N\n\\.\n\
             COPY public.\"infra_envs\" (\"id\", \"cluster_id\", \"name\") FROM stdin;\n\
             {IE}\t{CID}\tagent-cluster\n{LATE}\t\\N\tlate\n\\.\n\
             COPY public.\"hosts\" (\"id\", \"infra_env_id\", \"cluster_id\") FROM stdin;\n\
             h1\t{IE}\t{CID}\nh2\t{LATE}\t{CID}\nh3\t{LATE}\t\\N\n\\.\n\
             COPY public.\"events\" (\"id\", \"cluster_id\", \"infra_env_id\", \"message\", \"deleted_at\") FROM stdin;\n\
             1\t{CID}\t\\N\tinstalled\\tok\t\\N\n2\t\\N\t{LATE}\timage\t\\N\n\\.\n\
             COPY public.\"api_vips\" (\"cluster_id\", \"ip\") FROM stdin;\n{CID}\t192.168.111.5\n\\.\n\
             UPDATE public.clusters SET kube_key_name = 'x';\n{}\
             SELECT pg_catalog.setval('public.events_id_seq', COALESCE((SELECT max(id) FROM public.events), 1));\n\
             COMMIT;\n",
            verify_sql(&scope(), &c).unwrap()
        );
        assert_eq!(out, want);
        assert_eq!(c.rows["clusters"], 1);
        assert_eq!(c.rows["hosts"], 3);
        assert_eq!(
            c.skipped_deleted["clusters"], 1,
            "a soft-deleted other cluster is left out"
        );
        assert_eq!(c.skipped_tables["migrations"], 2);
        assert_eq!(c.skipped_tables["release_images"], 1);
        assert_eq!(c.schema_version.as_deref(), Some("20240617140000"));
        assert_eq!(c.sha256, hex::encode(Sha256::digest(d.as_bytes())));
        assert_eq!(c.bytes, d.len() as u64);
        // psql's line numbers map back to the blocks (the clusters block is lines 4-6).
        assert_eq!(
            c.copy_error(
                "psql:<stdin>:6: ERROR:  duplicate key value violates unique constraint \"clusters_pkey\""
            ),
            Some("clusters".into())
        );
        assert_eq!(
            c.copy_error("psql:<stdin>:2: ERROR:  invalid value\nCONTEXT:  COPY hosts, line 2"),
            Some("hosts".into())
        );
        assert_eq!(
            c.copy_error("psql:<stdin>:26: ERROR:  relation \"x\" does not exist"),
            None
        );
        assert_eq!(c.copy_error("psql: error: connection to server failed"), None);
        // Validation only: the same findings, nothing written.
        let v = check_dump("d", &mut d.as_bytes(), &scope(), &Expect::default()).unwrap();
        assert_eq!(v.rows, c.rows);
    }

    /// Each attack: refused with exit 3 naming the line; the stream ends in ROLLBACK and holds
    /// no byte of the attack and no COMMIT.
    #[test]
    fn attacks_are_refused_and_rolled_back() {
        let d = dump();
        let before_copy = "COPY public.clusters ";
        let cases: Vec<(String, &str)> = vec![
            (
                d.replacen("SET lock_timeout = 0;", "\\! id > /tmp/pwned", 1),
                "\\! id",
            ),
            (
                d.replacen("SET lock_timeout = 0;", "\\copy (select 1) to '/tmp/pwned'", 1),
                "\\copy",
            ),
            (
                d.replacen(before_copy, &format!("COMMIT;\n{before_copy}"), 1),
                "COMMIT;",
            ),
            (
                d.replacen(
                    before_copy,
                    &format!("create table public.attacker(x text);\n{before_copy}"),
                    1,
                ),
                "create table",
            ),
            (
                d.replacen(
                    before_copy,
                    &format!(" drop table public.service_networks;\n{before_copy}"),
                    1,
                ),
                "drop table",
            ),
            (
                d.replacen("\\restrict abcDEF123", "\\set ON_ERROR_STOP 0", 1),
                "\\set",
            ),
            (
                d.replacen(
                    "SET lock_timeout = 0;",
                    "SET session_replication_role = replica;",
                    1,
                ),
                "session_replication_role",
            ),
            (
                d.replacen("SET lock_timeout = 0;", "SET lock_timeout = 0; DROP TABLE x;", 1),
                "DROP TABLE x",
            ),
            (
                d.replacen(
                    "SELECT pg_catalog.setval('public.events_id_seq', 2, true);",
                    "SELECT pg_catalog.setval('s', 1); DROP TABLE x; SELECT pg_catalog.setval('s', 1);",
                    1,
                ),
                "DROP TABLE x",
            ),
            (
                d.replacen(
                    "COPY public.api_vips (cluster_id, ip) FROM stdin;",
                    "COPY public.api_vips (cluster_id, ip) FROM stdin; DROP TABLE x;",
                    1,
                ),
                "DROP TABLE x",
            ),
        ];
        for (bad, needle) in cases {
            let (r, out) = stream(&bad);
            let e = r.unwrap_err();
            assert_eq!(e.exit_code(), 3, "{needle}: {e}");
            assert!(e.to_string().contains("line "), "{e}");
            assert!(
                !out.contains(needle) && !out.contains("COMMIT") && out.ends_with("ROLLBACK;\n"),
                "{needle}: {out}"
            );
            let e = check_dump("d", &mut bad.as_bytes(), &scope(), &Expect::default()).unwrap_err();
            assert_eq!(e.exit_code(), 3);
        }
        // The pg_dump-only message for a meta-command.
        let (r, _) = stream(&d.replacen("SET lock_timeout = 0;", "\\! id", 1));
        let e = r.unwrap_err().to_string();
        assert!(
            e.contains("line 8:") && e.contains("not something pg_dump --data-only writes"),
            "{e}"
        );
    }

    #[test]
    fn the_schema_table_is_never_restored_whatever_its_spelling() {
        for header in [
            "COPY public.MIGRATIONS (id) FROM stdin;",
            "COPY public.\"migrations\" (id) FROM stdin;",
            "COPY \"public\".Migrations (\"id\") FROM stdin;",
        ] {
            let d = dump().replacen(
                "\\unrestrict abcDEF123",
                &format!("{header}\n29990101000000\n\\.\n\\unrestrict abcDEF123"),
                1,
            );
            let (r, out) = stream(&d);
            let c = r.unwrap();
            assert!(
                !out.contains("29990101000000") && !out.to_lowercase().contains("migrations"),
                "{out}"
            );
            assert_eq!(c.schema_version.as_deref(), Some("29990101000000"), "{header}");
            assert_eq!(c.skipped_tables["migrations"], 3);
        }
        // A quoted name in another case is another table: not restored either.
        let d = dump().replacen(
            "\\unrestrict",
            "COPY public.\"Clusters\" (id) FROM stdin;\nx\n\\.\n\\unrestrict",
            1,
        );
        let (r, out) = stream(&d);
        assert_eq!(r.unwrap().skipped_tables["Clusters"], 1);
        assert!(!out.contains("Clusters"));
        // Unquoted upper case is the same table.
        let d = dump().replace("COPY public.api_vips", "COPY PUBLIC.API_VIPS");
        let (r, out) = stream(&d);
        assert_eq!(r.unwrap().rows["api_vips"], 1);
        assert!(out.contains("COPY public.\"api_vips\""));
    }

    #[test]
    fn rows_of_other_clusters_are_refused() {
        let other = "0be00000-0000-0000-0000-000000000099";
        let cases = [
            (
                format!("{CID}\tagent-cluster\tt\t\\N\n"),
                format!("{CID}\tagent-cluster\tt\t\\N\n{other}\tx\tt\t\\N\n"),
                "clusters, row 2",
            ),
            (
                format!("{LATE}\t\\N\tlate\n"),
                format!("{LATE}\t\\N\tlate\n{other}\t{other}\tx\n"),
                "infra_envs, row 3",
            ),
            (
                format!("h3\t{LATE}\t\\N\n"),
                format!("h3\t{LATE}\t{other}\n"),
                "hosts, row 3",
            ),
            (
                format!("h3\t{LATE}\t\\N\n"),
                "h3\tx\t\\N\n".to_string(),
                "hosts, row 3",
            ),
            (
                format!("2\t\\N\t{LATE}\timage\t\\N\n"),
                format!("2\t{other}\t{LATE}\timage\t\\N\n"),
                "events, row 2",
            ),
            (
                format!("2\t\\N\t{LATE}\timage\t\\N\n"),
                "2\t\\N\t\\N\timage\t\\N\n".to_string(),
                "events, row 2",
            ),
            (
                format!("{CID}\t192.168.111.5\n"),
                format!("{CID}\t192.168.111.5\n{other}\t10.0.0.1\n"),
                "api_vips, row 2",
            ),
            // An escaped spelling of our id is read as the server reads it.
            (
                format!("{CID}\t192.168.111.5\n"),
                format!("\\x63{}\t192.168.111.5\n", &CID[1..]),
                "",
            ),
            // A data tab (backslash + TAB) does not split fields: the server (and this reader)
            // sees cluster_id "<ours><TAB><other>", a naive split would see ours.
            (
                format!("{CID}\t192.168.111.5\n"),
                format!("{CID}\\\t{other}\t1\n"),
                "api_vips, row 1): the row is not of this bundle's cluster",
            ),
        ];
        for (from, to, needle) in cases {
            let d = dump();
            assert!(d.contains(&from), "{from}");
            let (r, out) = stream(&d.replacen(&from, &to, 1));
            if needle.is_empty() {
                r.unwrap();
                continue;
            }
            let e = r.unwrap_err();
            assert_eq!(e.exit_code(), 3);
            assert!(e.to_string().contains(needle), "{needle}: {e}");
            assert!(!out.contains(other) && out.ends_with("\\.\nROLLBACK;\n"), "{out}");
        }
    }

    #[test]
    fn columns_and_rows_that_could_escape_are_refused() {
        let d = dump();
        let cases = [
            (
                "COPY public.api_vips (cluster_id, ip) FROM stdin;",
                "COPY public.api_vips (cluster_id, \"id); drop table x; --\") FROM stdin;",
                "not a plain identifier",
            ),
            (
                "COPY public.api_vips (cluster_id, ip) FROM stdin;",
                "COPY public.api_vips (cluster_id, \"IP\") FROM stdin;",
                "not a plain identifier",
            ),
            (
                "\t192.168.111.5\n",
                "\t192.168.111.5\textra\n",
                "3 fields for 2 columns",
            ),
            ("\t192.168.111.5\n", "\n", "1 fields for 2 columns"),
            ("\t192.168.111.5\n", "\t192.168.111.5\\\n", "ends in a backslash"),
            ("\t192.168.111.5\n", "\t192.168.111.5\r\n", "carriage return"),
            ("\t192.168.111.5\n", "\t192.168\0.111.5\n", "NUL"),
            (
                "COPY public.hosts (id, infra_env_id, cluster_id)",
                "COPY public.hosts (id, infra_env_id)",
                "no column cluster_id",
            ),
        ];
        for (from, to, needle) in cases {
            assert!(d.contains(from), "{from}");
            let (r, out) = stream(&d.replacen(from, to, 1));
            let e = r.unwrap_err();
            assert_eq!(e.exit_code(), 3);
            assert!(e.to_string().contains(needle), "{needle}: {e}");
            assert!(!out.contains("drop table") && !out.contains("COMMIT"), "{out}");
        }
    }

    /// Only UTF8 is restored: under SJIS the server reads a 0x81-0x9f lead byte and the next
    /// byte (a backslash or tab) as one character, so it would see other fields than the checks.
    #[test]
    fn only_utf8_dumps_and_rows_are_restored() {
        let d = dump();
        for enc in ["SJIS", "LATIN1", "sql_ascii", "EUC_JP"] {
            let (r, out) = stream(&d.replacen("'UTF8'", &format!("'{enc}'"), 1));
            let e = r.unwrap_err();
            assert_eq!(e.exit_code(), 3);
            assert!(e.to_string().contains("only UTF8"), "{enc}: {e}");
            assert!(!out.contains("COMMIT") && !out.contains(enc), "{out}");
        }
        let (r, out) = stream(&d.replacen("'UTF8'", "'utf8'", 1));
        r.unwrap();
        assert!(out.contains("SET client_encoding = 'UTF8';"), "{out}");
        // Not valid UTF-8 (an SJIS lead byte before the field separator).
        let bad = d
            .replacen("\t192.168.111.5", "\u{1}\t192.168.111.5", 1)
            .into_bytes();
        let pos = bad.windows(2).position(|w| w == b"\x01\t").unwrap();
        let mut bad = bad;
        bad[pos] = 0x83;
        let mut out = Vec::new();
        let e = ws("d", &mut &bad[..], &scope(), &Expect::default(), "", &mut out).unwrap_err();
        assert!(e.to_string().contains("not valid UTF-8"), "{e}");
        assert!(String::from_utf8_lossy(&out).ends_with("ROLLBACK;\n"));
    }

    /// A backslash-period inside a row would end the COPY on the server and drop the rest.
    #[test]
    fn an_end_marker_inside_a_row_is_refused() {
        let d = dump();
        for (to, refused) in [
            ("\t192.168.111.5\\.\n", true),
            ("\t192.168\\.111.5\n", true),
            ("\t192.168.111.5\\\\.\n", false),
            ("\t192.168.111.5\\\\\\.\n", true),
        ] {
            let (r, out) = stream(&d.replacen("\t192.168.111.5\n", to, 1));
            match refused {
                true => {
                    let e = r.unwrap_err();
                    assert!(e.to_string().contains("backslash-period"), "{to:?}: {e}");
                    assert!(out.ends_with("ROLLBACK;\n"));
                }
                false => {
                    r.unwrap();
                }
            }
        }
        assert!(has_end_marker(b"a\\."));
        assert!(!has_end_marker(b"a\\\\."));
        assert!(!has_end_marker(b"a.b"));
    }

    /// A listed infra-env id does not let another cluster's infra-env or host through.
    #[test]
    fn listed_ids_do_not_admit_other_clusters_rows() {
        let other = "0be00000-0000-0000-0000-000000000099";
        let d = dump();
        for (from, to) in [
            (
                format!("{IE}\t{CID}\tagent-cluster\n"),
                format!("{IE}\t{other}\tagent-cluster\n"),
            ),
            (format!("{LATE}\t\\N\tlate\n"), format!("{LATE}\t{other}\tlate\n")),
            (format!("h2\t{LATE}\t{CID}\n"), format!("h2\t{LATE}\t{other}\n")),
            (format!("h1\t{IE}\t{CID}\n"), format!("h1\tnot-listed\t{CID}\n")),
            (format!("2\t\\N\t{LATE}"), format!("2\t{other}\t{LATE}")),
        ] {
            assert!(d.contains(&from), "{from}");
            let (r, out) = stream(&d.replacen(&from, &to, 1));
            let e = r.unwrap_err();
            assert!(
                e.to_string().contains("not of this bundle's cluster"),
                "{to}: {e}"
            );
            assert!(!out.contains("COMMIT"), "{out}");
        }
    }

    /// The count check runs inside the transaction, after the UPDATEs, and names each table
    /// with the number restored.
    #[test]
    fn restored_counts_are_verified_before_commit() {
        let (r, out) = stream(&dump());
        let c = r.unwrap();
        assert_eq!(
            c.infra_env_ids,
            [IE.to_string(), LATE.to_string()].into_iter().collect()
        );
        assert_eq!(c.host_keys.len(), 3);
        let v = verify_sql(&scope(), &c).unwrap();
        let (upd, do_at, commit) = (
            out.find("UPDATE").unwrap(),
            out.find("DO $agent_day2_verify$").unwrap(),
            out.find("COMMIT;").unwrap(),
        );
        assert!(upd < do_at && do_at < commit, "{out}");
        assert!(
            v.contains("FROM public.\"hosts\" WHERE (id::text, infra_env_id::text) IN"),
            "{v}"
        );
        assert!(
            v.contains("IF n <> 3 THEN RAISE EXCEPTION 'agent-day2 migrate: table hosts"),
            "{v}"
        );
        assert!(
            v.contains(&format!(
                "FROM public.\"clusters\" WHERE id::text = '{CID}';\n  IF n <> 1 "
            )),
            "{v}"
        );
        assert!(
            v.contains("FROM public.\"api_vips\" WHERE cluster_id::text"),
            "{v}"
        );
        let mut c2 = c.clone();
        c2.infra_env_ids.insert("x$agent_day2_verify$".into());
        assert!(verify_sql(&scope(), &c2).is_err());
    }

    /// Our own wording carries no backslash (the error line escapes each as two, which read as
    /// a doubled one): cut short, CR, end marker.
    #[test]
    fn fixed_messages_show_no_doubled_backslash() {
        let d = dump();
        let cut = &d[..d.find("h3\t").unwrap()];
        for bad in [
            cut.to_string(),
            d.replacen("\t192.168.111.5\n", "\t192.168.111.5\r\n", 1),
            d.replacen("\t192.168.111.5\n", "\t192.168\\.111.5\n", 1),
        ] {
            let e = stream(&bad).0.unwrap_err().to_string();
            let shown = crate::output::escape_for_display(&e, 4000);
            assert!(!shown.contains('\\'), "{shown}");
        }
    }

    #[test]
    fn end_checks_roll_back() {
        let d = dump();
        let mut out = Vec::new();
        let e = ws(
            "d",
            &mut d.as_bytes(),
            &scope(),
            &Expect {
                sha256: Some(&"0".repeat(64)),
                schema_version: None,
                migration_ids: None,
            },
            "",
            &mut out,
        )
        .unwrap_err();
        assert!(
            e.to_string().contains("changed after the bundle was verified"),
            "{e}"
        );
        let out = String::from_utf8(out).unwrap();
        assert!(
            out.ends_with("\\.\nROLLBACK;\n") && !out.contains("COMMIT"),
            "{out}"
        );
        let sha = hex::encode(Sha256::digest(d.as_bytes()));
        let ids = ["20230101000000".to_string(), "20240617140000".to_string()];
        let ok = Expect {
            sha256: Some(&sha),
            schema_version: Some("20240617140000"),
            migration_ids: Some(&ids),
        };
        let c = ws("d", &mut d.as_bytes(), &scope(), &ok, "", &mut Vec::new()).unwrap();
        assert_eq!(c.migration_ids, ids.iter().cloned().collect());
        assert_eq!(c.columns["clusters"], vec!["id", "name", "primary", "deleted_at"]);
        assert!(
            !c.columns.contains_key("migrations"),
            "not restored: no target columns needed"
        );
        let newer = Expect {
            schema_version: Some("20230101000000"),
            ..ok.clone()
        };
        let e = ws("d", &mut d.as_bytes(), &scope(), &newer, "", &mut Vec::new()).unwrap_err();
        assert!(e.to_string().contains("schema version"), "{e}");
        // The manifest's migration ids must be the dump's, both ways.
        for other in [
            &ids[..1],
            &[
                "20230101000000".to_string(),
                "20240617140000".to_string(),
                "x".into(),
            ][..],
        ] {
            let lying = Expect {
                migration_ids: Some(other),
                ..ok.clone()
            };
            let e = ws("d", &mut d.as_bytes(), &scope(), &lying, "", &mut Vec::new()).unwrap_err();
            assert!(e.to_string().contains("source.migration_ids"), "{e}");
        }
        // An older manifest without them: not checked.
        let old = Expect {
            migration_ids: Some(&[]),
            ..ok.clone()
        };
        ws("d", &mut d.as_bytes(), &scope(), &old, "", &mut Vec::new()).unwrap();
        // Without this cluster's row.
        let other = Scope::new("0be00000-0000-0000-0000-000000000099", &[]);
        let only_vips =
            "--\n-- PostgreSQL database dump\n--\nCOPY public.clusters (id, deleted_at) FROM stdin;\n\\.\n";
        let mut out = Vec::new();
        let e = ws(
            "d",
            &mut only_vips.as_bytes(),
            &other,
            &Expect::default(),
            "",
            &mut out,
        )
        .unwrap_err();
        assert!(e.to_string().contains("no clusters row"), "{e}");
        assert!(String::from_utf8(out).unwrap().ends_with("\\.\nROLLBACK;\n"));
        // Cut short inside a block.
        let cut = &d[..d.find("h3\t").unwrap()];
        let (r, out) = stream(cut);
        assert!(r.unwrap_err().to_string().contains("hosts has no end"));
        assert!(out.ends_with("\\.\nROLLBACK;\n"), "{out}");
    }
}
