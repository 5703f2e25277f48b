//! `migrate export`: node 0's assisted-service (REST v2 + a PostgreSQL dump) into a bundle.
//!
//! Reads, over the REST v2 API at `--from` (docs/migrate.md "The migration contract", "Node 0"; swagger paths
//! under `/api/assisted-install/v2`, userAuth `Authorization: <token>` (the bare token, as
//! assisted-service's agent-installer-local authentication reads it) from `--token-file`): the cluster with its hosts, the infra-envs and their hosts, every event
//! page (cluster and infra-env events, 1000 per page, ascending), the logs archive (streamed to
//! disk), the credentials (kubeconfig, kubeconfig-noingress, kubeadmin-password and the
//! credentials object), install-config.yaml and metadata.json, and the custom manifests. The
//! database comes from exactly one of `--db-url` (local `pg_dump`), `--db-container` (`podman
//! exec NAME pg_dump`) or `--db-dump FILE`, always `pg_dump --data-only --no-owner
//! --no-privileges` plain text ([`super::dump`]). The dump must be of the same install (its
//! clusters row is the REST cluster; its host count is REST's). The CRs are recreated from all
//! that ([`super::crs`]). Everything is written through [`BundleWriter`]: on any failure
//! (node 0 gone mid-way, a refused dump) nothing is left on disk.

use std::collections::BTreeMap;
use std::io::{BufReader, Read, Write};
use std::process::{Command, Stdio};
use std::time::Duration;

use serde_json::Value;

use super::bundle::{self, BundleCluster, BundleCounts, BundleManifest, BundleSource, BundleWriter};
use super::crs::{self, CrInputs};
use super::dump;
use crate::assisted::path_segment;
use crate::error::{Error, ResourceRef};

/// Events per page (swagger `v2ListEvents` `limit`).
pub const EVENT_PAGE: u64 = 1000;
/// Largest JSON answer read into memory (a cluster list with hundreds of hosts is a few MiB).
const MAX_JSON: usize = 256 << 20;
/// Largest `--db-dump` accepted (it is copied, streamed).
const MAX_DUMP: u64 = 1 << 40;

pub use super::plan::DbSource;

/// How the dump is made from each source.
impl DbSource {
    /// The command that makes the dump (None for a file). For `--db-url` the URL without its
    /// password ([`split_db_password`]; the password goes in `PGPASSWORD`, see [`Self::password`]).
    pub fn command(&self) -> Option<(String, Vec<String>)> {
        let base = ["--data-only", "--no-owner", "--no-privileges"].map(String::from);
        match self {
            DbSource::Url(u) => {
                let mut v = base.to_vec();
                v.extend(["-d".into(), super::dump::split_db_password(u).0]);
                Some(("pg_dump".into(), v))
            }
            DbSource::Container(n) => {
                let mut v = vec!["exec".to_string(), n.clone(), "pg_dump".into()];
                v.extend(base);
                // start_db.sh: socket only in /tmp (-k /tmp); it connects with -h localhost itself.
                v.extend(["-h", "localhost", "-U", "admin", "-d", "installer"].map(String::from));
                Some(("podman".into(), v))
            }
            DbSource::File(_) => None,
        }
    }

    /// The password of `--db-url` (for `PGPASSWORD`), None when it has none or for the other
    /// sources.
    pub fn password(&self) -> Option<Vec<u8>> {
        match self {
            DbSource::Url(u) => super::dump::split_db_password(u).1,
            _ => None,
        }
    }
}

/// A reader of node 0's REST API.
struct Source {
    http: reqwest::Client,
    /// `http://IP:8090` (no trailing slash).
    origin: String,
    token: Option<String>,
    token_file: Option<String>,
}

/// `--out` before anything is read: its parent must be an existing directory (the bundle is
/// written next to it and renamed). Errors: [`Error::Usage`] (exit 2) naming `--out`.
pub fn check_out(out: &std::path::Path) -> Result<(), Error> {
    let parent = match out.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => std::path::Path::new("."),
    };
    match std::fs::metadata(parent) {
        Ok(m) if m.is_dir() => Ok(()),
        Ok(_) => Err(Error::Usage(format!(
            "--out {}: {} is not a directory",
            out.display(),
            parent.display()
        ))),
        Err(e) => Err(Error::Usage(format!(
            "--out {}: its directory {} cannot be used ({e}); create it first",
            out.display(),
            parent.display()
        ))),
    }
}

/// The `--from` value as an origin: scheme, host and port. The URL may end in `/` or in the API
/// path (`/api/assisted-install/v2`), nothing else: another path, a query or a fragment would be
/// dropped silently, so they are refused, as is a URL without `//` (`http:/x`, which URL parsers
/// read as `http://x`). Errors: [`Error::Usage`] (exit 2) naming `--from`.
pub fn origin_of(from: &str) -> Result<String, Error> {
    let bad = |why: &str| Error::Usage(format!("--from {from:?}: {why}; e.g. http://192.168.111.20:8090"));
    let u = reqwest::Url::parse(from.trim()).map_err(|e| bad(&e.to_string()))?;
    if u.scheme() != "http" && u.scheme() != "https" {
        return Err(bad("not an http(s) URL"));
    }
    if !from.trim().contains("://") {
        return Err(bad("not a URL of the form SCHEME://HOST[:PORT]"));
    }
    let path = u.path().trim_end_matches('/');
    if !(path.is_empty() || path == crate::assisted::BASE_PATH)
        || u.query().is_some()
        || u.fragment().is_some()
    {
        return Err(bad(&format!(
            "give node 0's address only (a path other than {}, a query or a fragment would be ignored)",
            crate::assisted::BASE_PATH
        )));
    }
    let host = u.host_str().ok_or_else(|| bad("no host"))?;
    let host = if host.contains(':') && !host.starts_with('[') {
        format!("[{host}]")
    } else {
        host.to_string()
    };
    Ok(match u.port() {
        Some(p) => format!("{}://{host}:{p}", u.scheme()),
        None => format!("{}://{host}", u.scheme()),
    })
}

pub(super) fn source_error(url: &str, message: String) -> Error {
    Error::Api {
        verb: "read".into(),
        resource: ResourceRef::cluster("node 0's assisted-service", url),
        message,
    }
}

impl Source {
    fn url(&self, path_and_query: &str) -> String {
        format!("{}{}{path_and_query}", self.origin, crate::assisted::BASE_PATH)
    }

    /// Sends a GET; a 2xx answer's response, else the classified error.
    async fn get(&self, path_and_query: &str) -> Result<reqwest::Response, Error> {
        let url = self.url(path_and_query);
        let shown = url.split('?').next().unwrap_or(&url).to_string();
        let mut req = self.http.get(&url);
        if let Some(t) = &self.token {
            // The bare token: assisted-service reads userAuth with go-openapi's APIKeyAuth (the
            // header value as it is) and its jwt parser refuses a "bearer " prefix with a 401
            // (pkg/auth/agent_local_authenticator.go, local_authenticator.go validateToken).
            req = req.header("Authorization", t.as_str());
        }
        let resp = req.send().await.map_err(|e| unreachable(&shown, &e))?;
        let status = resp.status().as_u16();
        if (200..300).contains(&status) {
            return Ok(resp);
        }
        let body = resp.bytes().await.unwrap_or_default();
        let msg = serde_json::from_slice::<Value>(&body)
            .ok()
            .and_then(|v| {
                v.get("message")
                    .or_else(|| v.get("reason"))
                    .and_then(Value::as_str)
                    .map(str::to_string)
            })
            .unwrap_or_else(|| String::from_utf8_lossy(&body).into_owned());
        let msg = crate::output::http_message(&msg);
        Err(match status {
            401 => source_error(
                &shown,
                format!(
                    "HTTP 401 ({msg}): {}. export needs node 0's user token (the userAuth token of the \
                     agent installer's local authentication, OpenShift 4.18+): it is made with the \
                     agent ISO and kept in the assets directory's .openshift_install_state.json and in \
                     node 0's assisted-service environment; put it in a file and pass --token-file FILE",
                    match &self.token_file {
                        Some(f) => format!("the token in {f} was refused"),
                        None => "no token was sent (no --token-file)".to_string(),
                    }
                ),
            ),
            403 => source_error(
                &shown,
                format!(
                    "HTTP 403 ({msg}): the token is not the user token; --token-file must hold the \
                     userAuth token (not the agent or watcher one)"
                ),
            ),
            _ => source_error(&shown, format!("HTTP {status}: {msg}")),
        })
    }

    /// GET returning the body (at most [`MAX_JSON`] bytes); `Ok(None)` on 404 when `optional`.
    async fn get_bytes(&self, path_and_query: &str, optional: bool) -> Result<Option<Vec<u8>>, Error> {
        let resp = match self.get(path_and_query).await {
            Ok(r) => r,
            Err(Error::Api { message, .. }) if optional && message.starts_with("HTTP 404") => {
                return Ok(None)
            }
            Err(e) => return Err(e),
        };
        let shown = self.url(path_and_query);
        let mut out = Vec::new();
        let mut resp = resp;
        while let Some(chunk) = resp.chunk().await.map_err(|e| unreachable(&shown, &e))? {
            out.extend_from_slice(&chunk);
            if out.len() > MAX_JSON {
                return Err(source_error(
                    &shown,
                    format!("answer larger than {MAX_JSON} bytes"),
                ));
            }
        }
        Ok(Some(out))
    }

    async fn get_json(&self, path_and_query: &str) -> Result<(Vec<u8>, Value), Error> {
        let bytes = self
            .get_bytes(path_and_query, false)
            .await?
            .expect("not optional");
        let v = serde_json::from_slice(&bytes)
            .map_err(|e| source_error(&self.url(path_and_query), format!("the answer is not JSON: {e}")))?;
        Ok((bytes, v))
    }
}

fn unreachable(url: &str, e: &reqwest::Error) -> Error {
    source_error(
        url,
        format!(
            "no answer ({}): node 0's assisted-service is not reachable or went away; check --from and \
             that node 0 has not rebooted yet (nothing was written)",
            crate::kube::errors::connect_failure(e)
        ),
    )
}

fn q(s: &str) -> String {
    path_segment(s)
}

/// Bundle folder of the host logs as node 0 stored them: `logs/<cluster-id>/objects/<rest>` holds
/// node 0's storage object `<cluster-id>/logs/<rest>` (`<host-id>/logs.tar.gz`,
/// `controller/logs.tar.gz`; assisted-service's `getLogsFullName`).
pub const LOG_OBJECTS: &str = "objects";
/// Bundle folder of the Ignition configs (`ignition/<cluster-id>/<name>.ign`, node 0's storage
/// object `<cluster-id>/<name>.ign`). They hold the cluster's keys: never on the side volume.
pub const IGNITION_DIR: &str = "ignition";

/// Whether a REST time field says something happened: set and not Go's zero time
/// (`0001-01-01T00:00:00.000Z`, what assisted-service returns for "never").
pub fn time_set(v: &Value, field: &str) -> bool {
    let t = str_of(v, field);
    !t.is_empty() && !t.starts_with("0001-01-01")
}

/// The host's uploaded `logs.tar.gz` out of the tar `logs?logs_type=host` answers (assisted-service
/// `PrepareHostLogFile`: one `<cluster>_<role>_<host>.tar.gz` entry per stored object of the host,
/// `..._boot_...` for boot logs). Ok(None) when the tar has no such entry; Err(message) when it is
/// not a tar or has more than one candidate.
pub fn host_log_from_tar(tar_bytes: &[u8]) -> Result<Option<Vec<u8>>, String> {
    let mut found: Vec<(String, Vec<u8>)> = Vec::new();
    let mut a = tar::Archive::new(tar_bytes);
    for e in a.entries().map_err(|e| format!("not a tar archive: {e}"))? {
        let mut e = e.map_err(|e| format!("not a tar archive: {e}"))?;
        let name = e.path().map_err(|e| e.to_string())?.display().to_string();
        if !e.header().entry_type().is_file() || name.contains("_boot_") || !name.ends_with(".tar.gz") {
            continue;
        }
        let mut b = Vec::new();
        e.read_to_end(&mut b).map_err(|e| format!("entry {name}: {e}"))?;
        found.push((name, b));
    }
    match found.len() {
        0 => Ok(None),
        1 => Ok(found.pop().map(|(_, b)| b)),
        _ => Err(format!(
            "{} log archives where one is expected: {}",
            found.len(),
            found
                .iter()
                .map(|(n, _)| n.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        )),
    }
}

/// The storage object name of a host's Ignition config (assisted-service
/// `hostutil.IgnitionFileName`: `<effective role>-<host-id>.ign`; the effective role is
/// `suggested_role` while `role` is `auto-assign`).
pub fn host_ignition_name(host: &Value) -> String {
    let role = match str_of(host, "role") {
        "" | "auto-assign" => str_of(host, "suggested_role"),
        r => r,
    };
    format!("{role}-{}.ign", str_of(host, "id"))
}

/// Node 0's storage objects that only it has: every host's uploaded logs (hosts with
/// `logs_collected_at`), the controller's logs (`controller_logs_collected_at`), the cluster's
/// and each host's Ignition config. A 404 (not generated) leaves the object out with one warning
/// line per kind.
async fn export_storage_objects(
    src: &Source,
    w: &mut BundleWriter,
    cid: &str,
    cluster: &Value,
    hosts: &[Value],
) -> Result<(), Error> {
    let c = path_segment(cid);
    for h in hosts.iter().filter(|h| time_set(h, "logs_collected_at")) {
        let hid = path_id(str_of(h, "id"), "host id")?;
        let path = format!("/clusters/{c}/logs?logs_type=host&host_id={}", q(&hid));
        let Some(t) = src.get_bytes(&path, true).await? else {
            crate::say!("warning: node 0 has no logs of host {hid} (HTTP 404) although it recorded them");
            continue;
        };
        match host_log_from_tar(&t) {
            Ok(Some(b)) => {
                w.write_file(&format!("logs/{cid}/{LOG_OBJECTS}/{hid}/logs.tar.gz"), &b)?;
            }
            Ok(None) => crate::say!("warning: node 0's logs of host {hid} hold no log archive"),
            Err(m) => return Err(source_error(&src.url(&path), m)),
        }
    }
    if time_set(cluster, "controller_logs_collected_at") {
        export_stream(
            src,
            w,
            &format!("/clusters/{c}/logs?logs_type=controller"),
            &format!("logs/{cid}/{LOG_OBJECTS}/controller/logs.tar.gz"),
            true,
        )
        .await?;
    }
    let mut missing = Vec::new();
    for name in ["bootstrap.ign", "master.ign", "worker.ign"] {
        match src
            .get_bytes(&format!("/clusters/{c}/downloads/files?file_name={name}"), true)
            .await?
        {
            Some(b) => {
                w.write_file(&format!("{IGNITION_DIR}/{cid}/{name}"), &b)?;
            }
            None => missing.push(name.to_string()),
        }
    }
    for h in hosts {
        let hid = path_id(str_of(h, "id"), "host id")?;
        let ie = path_id(str_of(h, "infra_env_id"), "infra-env id")?;
        let path = format!(
            "/infra-env/{}/hosts/{}/downloads/ignition",
            path_segment(&ie),
            path_segment(&hid)
        );
        let name = host_ignition_name(h);
        match src.get_bytes(&path, true).await? {
            Some(b) => {
                w.write_file(
                    &format!("{IGNITION_DIR}/{cid}/{}", path_id(&name, "host ignition")?),
                    &b,
                )?;
            }
            None => missing.push(name),
        }
    }
    if !missing.is_empty() {
        crate::say!(
            "warning: node 0 has no Ignition config {} (HTTP 404): the bundle carries none; harmless \
             before node 0 has generated them (installation not started), otherwise check that --from \
             is the cluster's node 0",
            missing.join(", ")
        );
    }
    Ok(())
}

fn str_of<'a>(v: &'a Value, k: &str) -> &'a str {
    v.get(k).and_then(Value::as_str).unwrap_or("")
}

/// An id from the wire used in a bundle path: a plain path component.
pub(super) fn path_id(id: &str, what: &str) -> Result<String, Error> {
    if bundle::is_safe_component(id) {
        Ok(id.to_string())
    } else {
        Err(Error::InvalidInput {
            field: what.to_string(),
            message: format!("{id:?} cannot be used in a file name"),
        })
    }
}

/// Streams every event page of `filter` (`cluster_id=ID` / `infra_env_id=ID`) into bundle file
/// `rel` as one JSON array; returns the number of events.
async fn export_events(src: &Source, w: &mut BundleWriter, filter: &str, rel: &str) -> Result<u64, Error> {
    let mut f = w.create_file(rel)?;
    let path = f.path().to_path_buf();
    let io = |e: std::io::Error| Error::Io {
        path: path.display().to_string(),
        source: e,
    };
    f.write_all(b"[").map_err(io)?;
    let mut n = 0u64;
    let mut offset = 0u64;
    loop {
        let pq = format!("/events?{filter}&limit={EVENT_PAGE}&offset={offset}&order=ascending");
        let resp = src.get(&pq).await?;
        let total: Option<u64> = resp
            .headers()
            .get("Event-Count")
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.trim().parse().ok());
        let url = src.url(&pq);
        let body = resp.bytes().await.map_err(|e| unreachable(&url, &e))?;
        let page: Vec<Value> = serde_json::from_slice(&body)
            .map_err(|e| source_error(&url, format!("the answer is not an event list: {e}")))?;
        for e in &page {
            if n > 0 {
                f.write_all(b",").map_err(io)?;
            }
            serde_json::to_writer(&mut f, e).map_err(|e| io(e.into()))?;
            n += 1;
        }
        offset += page.len() as u64;
        let more = match total {
            Some(t) => offset < t && !page.is_empty(),
            None => page.len() as u64 == EVENT_PAGE,
        };
        if !more {
            if let Some(t) = total.filter(|t| *t != n) {
                return Err(source_error(
                    &url,
                    format!("Event-Count says {t} events but {n} were served; run export again"),
                ));
            }
            break;
        }
    }
    f.write_all(b"]\n").map_err(io)?;
    f.finish()?;
    Ok(n)
}

/// Streams a GET answer into bundle file `rel`; false (nothing written) on 404 when `optional`.
async fn export_stream(
    src: &Source,
    w: &mut BundleWriter,
    pq: &str,
    rel: &str,
    optional: bool,
) -> Result<bool, Error> {
    let mut resp = match src.get(pq).await {
        Ok(r) => r,
        Err(Error::Api { message, .. }) if optional && message.starts_with("HTTP 404") => return Ok(false),
        Err(e) => return Err(e),
    };
    let url = src.url(pq);
    let mut f = w.create_file(rel)?;
    while let Some(chunk) = resp.chunk().await.map_err(|e| unreachable(&url, &e))? {
        let p = f.path().display().to_string();
        f.write_all(&chunk)
            .map_err(|e| Error::Io { path: p, source: e })?;
    }
    f.finish()?;
    Ok(true)
}

/// The usage error for a dump program that is not installed.
fn missing_program(db: &DbSource) -> Error {
    Error::Usage(match db {
        DbSource::Url(_) => "pg_dump is not installed here: install the PostgreSQL client \
            (e.g. `dnf install postgresql` / `apt-get install postgresql-client`), or use \
            --db-container NAME on node 0, or --db-dump FILE"
            .into(),
        _ => "podman is not installed here: run export on node 0 (where the assisted-db \
            container runs), or use --db-url / --db-dump"
            .into(),
    })
}

/// Checked before anything is downloaded: the dump program is on PATH.
pub(super) fn check_program(db: &DbSource) -> Result<(), Error> {
    use std::os::unix::fs::PermissionsExt;
    let Some((prog, _)) = db.command() else {
        return Ok(());
    };
    let path = std::env::var_os("PATH").unwrap_or_default();
    let found = std::env::split_paths(&path).any(|d| {
        std::fs::metadata(d.join(&prog)).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    });
    if found {
        Ok(())
    } else {
        Err(missing_program(db))
    }
}

/// Runs the dump command into bundle file db/dump.sql, or copies `--db-dump`.
pub(super) fn export_dump(db: &DbSource, w: &mut BundleWriter) -> Result<(), Error> {
    const REL: &str = "db/dump.sql";
    if let DbSource::File(p) = db {
        let what = format!("--db-dump {}", p.display());
        crate::files::check_input_file(p, MAX_DUMP, "--db-dump").map_err(|e| Error::InvalidInput {
            field: "--db-dump".into(),
            message: e.to_string(),
        })?;
        let mut f = std::fs::File::open(p).map_err(|e| Error::Io {
            path: p.display().to_string(),
            source: e,
        })?;
        let mut start = Vec::new();
        (&mut f)
            .take(4096)
            .read_to_end(&mut start)
            .map_err(|e| Error::Io {
                path: p.display().to_string(),
                source: e,
            })?;
        dump::check_start(&what, &start)?;
        let mut all = std::io::Cursor::new(start).chain(f);
        w.copy_file(REL, &mut all)?;
        return Ok(());
    }
    let (prog, args) = db.command().expect("a command source");
    let shown = format!("{prog} {}", args.join(" "));
    let mut cmd = Command::new(&prog);
    if let Some(pw) = db.password() {
        use std::os::unix::ffi::OsStringExt;
        cmd.env("PGPASSWORD", std::ffi::OsString::from_vec(pw));
    }
    let mut child = cmd
        .args(&args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| {
            if e.kind() == std::io::ErrorKind::NotFound {
                missing_program(db)
            } else {
                Error::Unexpected(format!("cannot run {prog}: {e}"))
            }
        })?;
    // stderr is read on a thread so a chatty pg_dump cannot block on a full pipe.
    let mut stderr = child.stderr.take().expect("piped");
    let errs = std::thread::spawn(move || {
        let mut s = Vec::new();
        let _ = (&mut stderr).take(64 << 10).read_to_end(&mut s);
        let _ = std::io::copy(&mut stderr, &mut std::io::sink());
        String::from_utf8_lossy(&s).into_owned()
    });
    let mut out = child.stdout.take().expect("piped");
    let copied = w.copy_file(REL, &mut out);
    drop(out);
    let status = child
        .wait()
        .map_err(|e| Error::Unexpected(format!("{prog}: {e}")))?;
    let err_text = errs.join().unwrap_or_default();
    if !status.success() {
        let shown = match db {
            // The URL may carry a password: show the command without it.
            DbSource::Url(_) => "pg_dump --data-only --no-owner --no-privileges -d <--db-url>".to_string(),
            _ => shown,
        };
        return Err(Error::Api {
            verb: "dump".into(),
            resource: ResourceRef::cluster("database", "installer"),
            message: format!(
                "`{shown}` failed ({status}): {}",
                crate::output::display(err_text.trim())
            ),
        });
    }
    copied?;
    Ok(())
}

pub(super) fn rfc3339_now() -> String {
    time::OffsetDateTime::now_utc()
        .replace_nanosecond(0)
        .ok()
        .and_then(|t| t.format(&time::format_description::well_known::Rfc3339).ok())
        .unwrap_or_default()
}

pub(super) fn human_size(n: u64) -> String {
    if n >= 1 << 30 {
        format!("{:.1} GiB", n as f64 / (1u64 << 30) as f64)
    } else if n >= 1 << 20 {
        format!("{:.1} MiB", n as f64 / (1u64 << 20) as f64)
    } else if n >= 1 << 10 {
        format!("{:.1} KiB", n as f64 / 1024.0)
    } else {
        format!("{n} B")
    }
}

/// Removes the temporary bundles of exports beside `out` that were killed (SIGKILL, power
/// loss): they hold credentials. One warning line names them.
pub(super) fn remove_stale_bundles(out: &std::path::Path) {
    if let Some(parent) = out.parent().filter(|p| !p.as_os_str().is_empty()) {
        let stale = crate::tempfiles::remove_stale(&[parent.to_path_buf()]);
        if !stale.is_empty() {
            let names: Vec<String> = stale.iter().map(|p| p.display().to_string()).collect();
            crate::say!(
                "warning: removed temporary files of an interrupted run (its process no longer runs): {}",
                names.join(", ")
            );
        }
    }
}

/// The dump written to bundle file db/dump.sql and read once ([`dump::summarize`]).
pub(super) struct DumpRead {
    /// How messages name it (`--db-dump FILE`, `the dump of --db-url`).
    pub what_src: String,
    /// The bundle file's path in the temporary bundle.
    pub path: std::path::PathBuf,
    /// Its row counts and migrations.
    pub summary: dump::DumpSummary,
    /// The greatest `migrations.id`.
    pub schema_version: String,
}

impl DumpRead {
    /// The dump file, buffered, from its start.
    pub fn open(&self) -> Result<BufReader<std::fs::File>, Error> {
        std::fs::File::open(&self.path)
            .map(|f| BufReader::with_capacity(1 << 16, f))
            .map_err(|e| Error::Io {
                path: self.path.display().to_string(),
                source: e,
            })
    }
}

/// Makes db/dump.sql from `db` ([`export_dump`]) and summarizes it. Errors: as
/// [`export_dump`] and [`dump::summarize`]; [`Error::InvalidInput`] (exit 3) for a dump without
/// `migrations` rows.
pub(super) fn dump_and_summarize(db: &DbSource, w: &mut BundleWriter) -> Result<DumpRead, Error> {
    export_dump(db, w)?;
    let path = w.written_path("db/dump.sql").expect("written");
    let what_src = match db {
        DbSource::File(p) => format!("--db-dump {}", p.display()),
        other => format!("the dump of --{}", other.name()),
    };
    let mut d = DumpRead {
        what_src,
        path,
        summary: dump::DumpSummary::default(),
        schema_version: String::new(),
    };
    d.summary = dump::summarize(&d.what_src, &mut d.open()?)?;
    d.schema_version = d
        .summary
        .schema_version
        .clone()
        .ok_or_else(|| Error::InvalidInput {
            field: d.what_src.clone(),
            message: "it has no rows in table migrations, so its schema version is unknown: dump the \
                  whole installer database"
                .into(),
        })?;
    Ok(d)
}

/// `migrate export --from` (see the module doc): option 2, node 0's REST API and its database
/// (option 1, `--from-kube`, is [`super::export_kube`]). Returns exit code 0.
pub async fn run(
    a: &super::plan::Export,
    from: &str,
    token_file: Option<&std::path::PathBuf>,
) -> Result<u8, Error> {
    let db = &a.db;
    check_out(&a.out)?;
    check_program(db)?;
    let origin = origin_of(from)?;
    let token = match token_file {
        Some(p) => {
            let t = crate::files::read_input_file(p, crate::files::MAX_KEY_FILE, "--token-file").map_err(
                |e| Error::InvalidInput {
                    field: "--token-file".into(),
                    message: e.to_string(),
                },
            )?;
            let t = t.trim().to_string();
            if t.is_empty() || !t.bytes().all(|b| b.is_ascii_graphic()) {
                return Err(Error::InvalidInput {
                    field: "--token-file".into(),
                    message: format!(
                        "{} must hold one token (printable ASCII without spaces)",
                        p.display()
                    ),
                });
            }
            Some(t)
        }
        None => None,
    };
    let _ = rustls::crypto::ring::default_provider().install_default();
    let http = reqwest::Client::builder()
        .connect_timeout(Duration::from_secs(10))
        .read_timeout(Duration::from_secs(120))
        .user_agent(concat!("agent-day2/", env!("CARGO_PKG_VERSION")))
        .build()
        .map_err(|e| Error::Unexpected(format!("cannot build the HTTP client: {e}")))?;
    let src = Source {
        http,
        origin: origin.clone(),
        token,
        token_file: token_file.map(|p| p.display().to_string()),
    };
    remove_stale_bundles(&a.out);
    let mut w = BundleWriter::create(&a.out)?;

    // The cluster (an agent-based install has one).
    let (bytes, clusters) = src.get_json("/clusters?with_hosts=true").await?;
    let list = clusters.as_array().cloned().unwrap_or_default();
    let cluster =
        match list.as_slice() {
            [c] => c.clone(),
            [] => {
                return Err(source_error(
                    &src.url("/clusters"),
                    "it holds no cluster: is this node 0 of an agent-based install?".into(),
                ))
            }
            more => {
                return Err(source_error(
                    &src.url("/clusters"),
                    format!(
                    "it holds {} clusters ({}); an agent-based install has one and export takes exactly one",
                    more.len(),
                    more.iter().map(|c| str_of(c, "id")).collect::<Vec<_>>().join(", ")
                ),
                ))
            }
        };
    w.write_file("api/clusters.json", &bytes)?;
    let cid = path_id(str_of(&cluster, "id"), "cluster id")?;

    // Infra-envs and their hosts.
    let (bytes, ies) = src.get_json("/infra-envs").await?;
    w.write_file("api/infra-envs.json", &bytes)?;
    let ies: Vec<Value> = ies
        .as_array()
        .cloned()
        .unwrap_or_default()
        .into_iter()
        // The cluster's infra-envs, and unbound ones (late binding) holding hosts of the cluster.
        .filter(|ie| {
            str_of(ie, "cluster_id") == cid
                || cluster
                    .get("hosts")
                    .and_then(Value::as_array)
                    .is_some_and(|hs| hs.iter().any(|h| str_of(h, "infra_env_id") == str_of(ie, "id")))
        })
        .collect();
    let mut hosts: Vec<Value> = Vec::new();
    let mut ie_ids = Vec::new();
    for ie in &ies {
        let id = path_id(str_of(ie, "id"), "infra-env id")?;
        let (bytes, hs) = src
            .get_json(&format!("/infra-envs/{}/hosts", path_segment(&id)))
            .await?;
        w.write_file(&format!("api/hosts-{id}.json"), &bytes)?;
        hosts.extend(
            hs.as_array()
                .cloned()
                .unwrap_or_default()
                .into_iter()
                .filter(|h| str_of(h, "cluster_id") == cid),
        );
        ie_ids.push(id);
    }
    // Hosts the cluster lists but no infra-env answered for (should not happen): from the cluster.
    if let Some(ch) = cluster.get("hosts").and_then(Value::as_array) {
        for h in ch {
            if !hosts.iter().any(|x| str_of(x, "id") == str_of(h, "id")) {
                hosts.push(h.clone());
            }
        }
    }
    hosts.sort_by(|x, y| str_of(x, "id").cmp(str_of(y, "id")));

    // Events.
    let events = export_events(
        &src,
        &mut w,
        &format!("cluster_id={}", q(&cid)),
        &format!("api/events-{cid}.json"),
    )
    .await?;
    for id in &ie_ids {
        export_events(
            &src,
            &mut w,
            &format!("infra_env_id={}", q(id)),
            &format!("api/events-infraenv-{id}.json"),
        )
        .await?;
    }

    // Logs, credentials, files, manifests.
    let c = path_segment(&cid);
    if !export_stream(
        &src,
        &mut w,
        &format!("/clusters/{c}/logs?logs_type=all"),
        &format!("logs/{cid}/logs-all.tar"),
        true,
    )
    .await?
    {
        crate::say!("warning: node 0 has no logs of cluster {cid} (HTTP 404); the bundle carries none");
    }
    let mut creds: BTreeMap<&str, Vec<u8>> = BTreeMap::new();
    for name in ["kubeconfig", "kubeconfig-noingress", "kubeadmin-password"] {
        let b = src
            .get_bytes(
                &format!("/clusters/{c}/downloads/credentials?file_name={name}"),
                false,
            )
            .await?
            .expect("not optional");
        w.write_file(&format!("credentials/{cid}/{name}"), &b)?;
        creds.insert(name, b);
    }
    let (bytes, cred_obj) = src.get_json(&format!("/clusters/{c}/credentials")).await?;
    w.write_file(&format!("credentials/{cid}/credentials.json"), &bytes)?;
    for name in ["install-config.yaml", "metadata.json"] {
        match src
            .get_bytes(&format!("/clusters/{c}/downloads/files?file_name={name}"), true)
            .await?
        {
            Some(b) => {
                w.write_file(&format!("files/{cid}/{name}"), &b)?;
            }
            None => crate::say!("warning: node 0 has no {name} for cluster {cid} (HTTP 404)"),
        }
    }
    // System-generated ones too (chrony, iSCSI NIC, scheduler patches): node 0 stored them and
    // cluster 0's service lists them from its storage.
    let (_, manifests) = src
        .get_json(&format!("/clusters/{c}/manifests?include_system_generated=true"))
        .await?;
    for m in manifests.as_array().cloned().unwrap_or_default() {
        let folder = str_of(&m, "folder");
        let folder = if folder.is_empty() { "manifests" } else { folder };
        let name = str_of(&m, "file_name");
        let rel = format!(
            "manifests/{cid}/{}/{}",
            path_id(folder, "manifest folder")?,
            path_id(name, "manifest file_name")?
        );
        let b = src
            .get_bytes(
                &format!(
                    "/clusters/{c}/manifests/files?folder={}&file_name={}",
                    q(folder),
                    q(name)
                ),
                false,
            )
            .await?
            .expect("not optional");
        w.write_file(&rel, &b)?;
    }

    // Node 0's storage objects cluster 0's service reads (docs/migrate.md "Files on cluster
    // 0"): each host's uploaded logs, the controller's logs, the Ignition configs.
    export_storage_objects(&src, &mut w, &cid, &cluster, &hosts).await?;

    // The database.
    let d = dump_and_summarize(db, &mut w)?;
    let (what_src, summary, schema_version) = (d.what_src.clone(), &d.summary, d.schema_version.clone());
    let what = "db/dump.sql";
    let open_dump = || d.open();
    // Rows soft-deleted by gorm (deleted_at set) are not served over REST: not compared.
    let live = |r: &BTreeMap<String, Option<String>>| r.get("deleted_at").is_none_or(Option::is_none);
    let crows = dump::table_rows(what, &mut open_dump()?, "clusters")?;
    let Some(crow) = crows
        .iter()
        .find(|r| live(r) && r.get("id").cloned().flatten().as_deref() == Some(cid.as_str()))
    else {
        return Err(Error::InvalidInput {
            field: what_src,
            message: format!(
                "it has no clusters row with id {cid} (it has: {}): the dump is from another install; \
                 dump node 0's database of this cluster",
                crows
                    .iter()
                    .filter_map(|r| r.get("id").cloned().flatten())
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        });
    };
    let pull_secret = crow.get("pull_secret").cloned().flatten().unwrap_or_default();
    let hrows = dump::table_rows(what, &mut open_dump()?, "hosts")?;
    let dump_hosts = hrows
        .iter()
        .filter(|r| live(r) && r.get("cluster_id").cloned().flatten().as_deref() == Some(cid.as_str()))
        .count();
    if dump_hosts != hosts.len() {
        return Err(Error::InvalidInput {
            field: what_src,
            message: format!(
                "it has {dump_hosts} hosts of cluster {cid}, the REST API {}: the dump is from another \
                 install or another moment; dump the database again",
                hosts.len()
            ),
        });
    }

    // Import restores only this cluster's rows of assisted-service's tables, and only COPY
    // data: checked here as import will (a dump with other statements or other clusters' rows
    // is refused now rather than in the middle of an import).
    let checked = super::restore::check_dump(
        &what_src,
        &mut open_dump()?,
        &super::restore::Scope::new(&cid, &ie_ids),
        &super::restore::Expect {
            sha256: None,
            schema_version: Some(&schema_version),
            migration_ids: None,
        },
    )?;
    // What import will restore and key must be what the REST API lists: node 0's REST answer
    // is the manifest's id lists, its database the rows (a lying answer would make import
    // take over rows it does not restore).
    let rest_hosts: std::collections::BTreeSet<(String, String)> = hosts
        .iter()
        .map(|h| (str_of(h, "id").to_string(), str_of(h, "infra_env_id").to_string()))
        .collect();
    let rest_ies: std::collections::BTreeSet<String> = ie_ids.iter().cloned().collect();
    // Every live host import would restore (also those in the cluster's infra-envs not bound
    // to it yet), not only the rows with this cluster_id.
    let dump_hosts_live = &checked.live_host_keys;
    let missing_ie: Vec<&String> = rest_ies.difference(&checked.infra_env_ids).collect();
    let missing_h: Vec<String> = rest_hosts
        .symmetric_difference(dump_hosts_live)
        .map(|(h, ie)| format!("{h} (infra-env {ie})"))
        .collect();
    // Names: the CRs are named from REST, import keys the rows by them.
    let mut names = Vec::new();
    let dump_name = crow.get("name").cloned().flatten().unwrap_or_default();
    if dump_name != str_of(&cluster, "name") {
        names.push(format!(
            "cluster name {:?} over REST, {:?} in the dump",
            str_of(&cluster, "name"),
            dump_name
        ));
    }
    let ierows = dump::table_rows(what, &mut open_dump()?, "infra_envs")?;
    for ie in &ies {
        let id = str_of(ie, "id");
        let row = ierows
            .iter()
            .find(|r| r.get("id").cloned().flatten().as_deref() == Some(id));
        let dn = row
            .and_then(|r| r.get("name").cloned().flatten())
            .unwrap_or_default();
        if dn != str_of(ie, "name") {
            names.push(format!(
                "infra-env {id} name {:?} over REST, {:?} in the dump",
                str_of(ie, "name"),
                dn
            ));
        }
    }
    if !names.is_empty() {
        return Err(Error::InvalidInput {
            field: what_src,
            message: crate::output::display(&format!(
                "node 0's REST answer and its database disagree: {}; dump the database again",
                names.join("; ")
            )),
        });
    }
    if !missing_ie.is_empty() || !missing_h.is_empty() {
        return Err(Error::InvalidInput {
            field: what_src,
            message: crate::output::display(&format!(
                "node 0's REST answer and its database disagree: infra-envs listed over REST without \
                 a row in the dump: [{}]; hosts in only one of the two: [{}]; dump the database \
                 again (or check what answers at {origin})",
                missing_ie
                    .iter()
                    .map(|s| s.as_str())
                    .collect::<Vec<_>>()
                    .join(", "),
                missing_h.join(", ")
            )),
        });
    }

    // The CRs.
    let kubeconfig = creds.get("kubeconfig").cloned().unwrap_or_default();
    let set = crs::build(&CrInputs {
        cluster: &cluster,
        infra_envs: &ies,
        hosts: &hosts,
        pull_secret: &pull_secret,
        kubeconfig: &kubeconfig,
        username: str_of(&cred_obj, "username"),
        password: str_of(&cred_obj, "password"),
        console_url: cred_obj.get("console_url").and_then(Value::as_str),
    })?;
    let crs_json = serde_json::to_vec_pretty(&Value::Array(set.objects.clone()))
        .map_err(|e| Error::Unexpected(format!("cannot serialize the CRs: {e}")))?;
    w.write_file("crs/crs.json", &crs_json)?;
    for n in &set.notes {
        crate::say!("note: {n}");
    }

    let manifest = BundleManifest {
        format: bundle::FORMAT.into(),
        created: rfc3339_now(),
        tool_version: env!("CARGO_PKG_VERSION").into(),
        source: BundleSource {
            url: origin.clone(),
            db_source: db.name().into(),
            schema_version: schema_version.clone(),
            migration_ids: summary.migration_ids.iter().cloned().collect(),
            crs: String::new(),
        },
        cluster: BundleCluster {
            id: cid.clone(),
            name: str_of(&cluster, "name").into(),
            base_domain: str_of(&cluster, "base_dns_domain").into(),
            openshift_cluster_id: str_of(&cluster, "openshift_cluster_id").into(),
            openshift_version: str_of(&cluster, "openshift_version").into(),
            release_image: str_of(&cluster, "ocp_release_image").into(),
            infra_env_ids: ie_ids.clone(),
            host_ids: hosts.iter().map(|h| str_of(h, "id").to_string()).collect(),
        },
        counts: BundleCounts {
            hosts: hosts.len() as u64,
            infra_envs: ie_ids.len() as u64,
            events,
            nmstate_configs: set.nmstate_configs,
            rows: summary.rows.clone(),
        },
        files: vec![],
    };
    let files = w.files().len() + 2;
    let size: u64 = w.files().values().map(|e| e.size).sum();
    let checksum = w.commit(manifest)?;
    let rows: u64 = summary.rows.values().sum();
    let out = a.out.display();
    let mut text = format!(
        "Exported cluster {} ({cid}) from {origin} to {out}\n",
        crate::output::display(str_of(&cluster, "name"))
    );
    text.push_str(&format!(
        "  hosts {}, infra-envs {}, events {events}, database rows {rows} in {} tables ({} migrations)\n",
        hosts.len(),
        ie_ids.len(),
        summary.rows.len(),
        summary.migration_ids.len()
    ));
    text.push_str(&format!(
        "  {files} files, {}; checksum sha256:{checksum}\n",
        human_size(size)
    ));
    text.push_str(
        "  the bundle holds credentials (kubeconfig, kubeadmin password, pull secret): keep it private\n",
    );
    text.push_str(&format!(
        "  next: oc agent-day2 migrate import {out}   (on cluster 0's context)\n"
    ));
    // Through emit: `| head` closing stdout is not a panic.
    crate::output::emit(&text);
    Ok(0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::migrate::plan::Export;

    fn tar_of(entries: &[(&str, &[u8])]) -> Vec<u8> {
        let mut b = tar::Builder::new(Vec::new());
        for (n, d) in entries {
            let mut h = tar::Header::new_gnu();
            h.set_size(d.len() as u64);
            h.set_mode(0o644);
            h.set_entry_type(tar::EntryType::Regular);
            b.append_data(&mut h, n, *d).unwrap();
        }
        b.into_inner().unwrap()
    }

    /// The tar `logs?logs_type=host` answers holds the uploaded archive under a display name;
    /// boot logs are not it.
    #[test]
    fn the_host_log_archive_comes_out_of_the_download_tar() {
        let t = tar_of(&[("ostest_master_master-1.tar.gz", b"GZ")]);
        assert_eq!(host_log_from_tar(&t).unwrap(), Some(b"GZ".to_vec()));
        let t = tar_of(&[
            ("ostest_master_boot_master-1.tar.gz", b"BOOT"),
            ("ostest_bootstrap_master-1.tar.gz", b"GZ"),
        ]);
        assert_eq!(host_log_from_tar(&t).unwrap(), Some(b"GZ".to_vec()));
        assert_eq!(host_log_from_tar(&tar_of(&[("x.txt", b"?")])).unwrap(), None);
        let two = tar_of(&[("a_master_x.tar.gz", b"1"), ("b_master_y.tar.gz", b"2")]);
        assert!(host_log_from_tar(&two).unwrap_err().contains("2 log archives"));
        assert!(host_log_from_tar(&[7u8; 1024]).unwrap_err().contains("not a tar"));
    }

    #[test]
    fn host_ignition_names_and_zero_times() {
        let h = serde_json::json!({"id": "h1", "role": "master", "suggested_role": "worker"});
        assert_eq!(host_ignition_name(&h), "master-h1.ign");
        let h = serde_json::json!({"id": "h2", "role": "auto-assign", "suggested_role": "worker"});
        assert_eq!(host_ignition_name(&h), "worker-h2.ign");
        let v = serde_json::json!({"a": "0001-01-01T00:00:00.000Z", "b": "2026-12-03T17:24:06.802Z"});
        assert!(!time_set(&v, "a") && time_set(&v, "b") && !time_set(&v, "c"));
    }

    fn from_of(a: &Export) -> String {
        match &a.node0 {
            crate::migrate::plan::Node0::Rest { from, .. } => from.clone(),
            _ => unreachable!(),
        }
    }

    fn rest(from: String) -> crate::migrate::plan::Node0 {
        crate::migrate::plan::Node0::Rest {
            from,
            token_file: None,
        }
    }

    /// A plan as `migrate export` makes it (the flags' reading is tested in `plan`).
    fn args() -> Export {
        Export {
            node0: crate::migrate::plan::Node0::Rest {
                from: "http://192.168.111.20:8090".into(),
                token_file: None,
            },
            out: "/tmp/x".into(),
            db: DbSource::Container("assisted-db".into()),
        }
    }

    #[test]
    fn database_source_commands() {
        let d = args().db;
        assert_eq!(d.name(), "db-container");
        let (p, v) = d.command().unwrap();
        assert_eq!(
            format!("{p} {}", v.join(" ")),
            "podman exec assisted-db pg_dump --data-only --no-owner --no-privileges -h localhost -U admin -d installer"
        );
        let d = DbSource::Url("postgres://u@h/installer".into());
        assert_eq!(
            d.command().unwrap().1,
            vec![
                "--data-only",
                "--no-owner",
                "--no-privileges",
                "-d",
                "postgres://u@h/installer"
            ]
        );
    }

    #[test]
    fn db_url_password_leaves_the_command_line() {
        let pw = |s: &str| Some(s.as_bytes().to_vec());
        for (conn, want, password) in [
            ("postgres://u@h/installer", "postgres://u@h/installer", None),
            (
                "postgres://u:s3cr%40t@h:5432/installer",
                "postgres://u@h:5432/installer",
                pw("s3cr@t"),
            ),
            (
                "postgresql://u:p@[::1]:5432/db?sslmode=disable",
                "postgresql://u@[::1]:5432/db?sslmode=disable",
                pw("p"),
            ),
            ("postgres://u:@h/db", "postgres://u@h/db", pw("")),
            (
                "postgres://h/db?password=x%26y&sslmode=require",
                "postgres://h/db?sslmode=require",
                pw("x&y"),
            ),
            ("postgres://u:a@h/db?password=b", "postgres://u@h/db", pw("b")),
            // The userinfo ends at the first @ before any /, as libpq reads it.
            ("postgres://h/db@x", "postgres://h/db@x", None),
            (
                "host=h password=p dbname=installer",
                "host=h dbname=installer",
                pw("p"),
            ),
            (
                "host=h password = 'it''s' user=u",
                "host=h password = 'it''s' user=u",
                None,
            ),
            ("host=h password='a b\\'c' user=u", "host=h user=u", pw("a b'c")),
            ("installer", "installer", None),
        ] {
            assert_eq!(
                super::super::dump::split_db_password(conn),
                (want.to_string(), password),
                "{conn}"
            );
        }
        let d = DbSource::Url("postgres://admin:hunter2@h/installer".into());
        let argv = d.command().unwrap().1.join(" ");
        assert!(!argv.contains("hunter2"), "{argv}");
        assert_eq!(d.password(), pw("hunter2"));
        assert_eq!(DbSource::Container("assisted-db".into()).password(), None);
    }

    #[test]
    fn origins() {
        assert_eq!(
            origin_of("http://192.168.111.20:8090/").unwrap(),
            "http://192.168.111.20:8090"
        );
        assert_eq!(
            origin_of("http://192.168.111.20:8090/api/assisted-install/v2").unwrap(),
            "http://192.168.111.20:8090"
        );
        assert_eq!(
            origin_of("http://[fd00::20]:8090").unwrap(),
            "http://[fd00::20]:8090"
        );
        assert_eq!(origin_of("ftp://x").unwrap_err().exit_code(), 2);
        assert!(origin_of("192.168.111.20:8090").is_err());
        // Nothing that would be dropped silently (a regression trial found /nope ignored).
        for bad in [
            "http://192.168.111.20:8090/nope",
            "http://192.168.111.20:8090/api/assisted-install/v1",
            "http://192.168.111.20:8090/?x=1",
            "http://192.168.111.20:8090/#f",
            "http:/192.168.111.20:8090",
        ] {
            assert_eq!(origin_of(bad).unwrap_err().exit_code(), 2, "{bad}");
        }
        assert_eq!(
            origin_of("http://192.168.111.20:8090/api/assisted-install/v2/").unwrap(),
            "http://192.168.111.20:8090"
        );
        assert_eq!(path_segment("a/../b?c"), "a%2F..%2Fb%3Fc");
    }

    #[tokio::test]
    async fn closed_port_is_an_access_error_naming_the_url_and_leaves_nothing() {
        // A port nobody listens on: bind, read the port, close.
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = l.local_addr().unwrap().port();
        drop(l);
        let d = tempfile::tempdir().unwrap();
        let dump = d.path().join("dump.sql");
        std::fs::write(&dump, "--\n-- PostgreSQL database dump\n--\n").unwrap();
        let mut a = args();
        a.node0 = rest(format!("http://127.0.0.1:{port}"));
        a.out = d.path().join("bundle");
        a.db = DbSource::File(dump);
        let e = run(&a, &from_of(&a), None).await.unwrap_err();
        assert_eq!(e.exit_code(), 4, "{e}");
        let s = e.to_string();
        assert!(
            s.contains(&format!(
                "http://127.0.0.1:{port}/api/assisted-install/v2/clusters"
            )),
            "{s}"
        );
        assert!(
            s.contains("no answer (connection refused: nothing listens at that address and port)")
                && !s.contains("os error")
                && !s.contains("error sending request"),
            "{s}"
        );
        let left: Vec<_> = std::fs::read_dir(d.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(left, vec![std::ffi::OsString::from("dump.sql")]);
    }

    /// `--out` under a missing directory or a file: a usage error naming --out, before any
    /// request (the source here is a closed port, which would be exit 4).
    #[tokio::test]
    async fn out_whose_parent_is_missing_or_a_file_is_a_usage_error() {
        let d = tempfile::tempdir().unwrap();
        let dump = d.path().join("dump.sql");
        std::fs::write(&dump, "--\n").unwrap();
        for out in [d.path().join("missing/bundle"), dump.join("bundle")] {
            let mut a = args();
            a.node0 = rest("http://127.0.0.1:9".into());
            a.out = out.clone();
            a.db = DbSource::File(dump.clone());
            let e = run(&a, &from_of(&a), None).await.unwrap_err();
            assert_eq!(e.exit_code(), 2, "{e}");
            assert!(e.to_string().contains("--out"), "{e}");
            assert!(!e.to_string().contains(".tmp-"), "{e}");
        }
        assert!(check_out(&d.path().join("b")).is_ok());
        assert!(
            check_out(std::path::Path::new("b")).is_ok(),
            "relative: the current directory"
        );
    }
}
