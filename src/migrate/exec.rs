//! Running a command in a pod's container over the API (what `oc exec -i` does), and `psql`
//! either there or locally (`--db-url`).
//!
//! Exec goes through kube-rs `Api::<Pod>::exec` (websocket; kube 5 offers v5.channel.k8s.io,
//! so the end of stdin reaches the command). stdin is fed from a bounded channel of chunks
//! ([`Producer`]), so a large dump or tar stream is never held in memory whole; stdout is
//! collected up to a bound, stderr up to 64 KiB; the exit status comes from the status channel
//! (metav1.Status: `Success`, or `NonZeroExitCode` with cause `ExitCode`), as the kubelet sends it.

use std::collections::BTreeMap;
use std::io::Write;

use k8s_openapi::api::core::v1::{Pod, Secret};
use kube::api::{Api, AttachParams, ListParams};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::mpsc;

use crate::error::{Error, ResourceRef};
use crate::kube::classify;
use crate::kube::KubeTarget;

/// Most stdout kept from a command (longer output is cut and `stdout_truncated` set).
pub const STDOUT_MAX: usize = 16 * 1024 * 1024;
/// Most stderr kept from a command.
pub const STDERR_MAX: usize = 64 * 1024;
/// Chunks in flight between a producer thread and the exec stream (each up to 64 KiB).
const CHANNEL_CHUNKS: usize = 16;

/// What a command left behind.
#[derive(Debug, Clone, Default)]
pub struct ExecOutput {
    /// Exit code (0 = success).
    pub code: i32,
    /// stdout, at most [`STDOUT_MAX`] bytes.
    pub stdout: Vec<u8>,
    /// Whether stdout was cut.
    pub stdout_truncated: bool,
    /// stderr (lossy UTF-8), at most [`STDERR_MAX`] bytes.
    pub stderr: String,
}

impl ExecOutput {
    /// stdout as text (lossy).
    pub fn stdout_text(&self) -> String {
        String::from_utf8_lossy(&self.stdout).into_owned()
    }
}

/// A stream of stdin chunks made by a blocking writer on its own thread.
pub struct Producer {
    rx: mpsc::Receiver<Vec<u8>>,
    handle: std::thread::JoinHandle<std::io::Result<()>>,
}

impl Producer {
    /// Runs `write` on a new thread with a [`Write`] whose bytes become the stream; the
    /// channel is bounded, so `write` blocks while the consumer is slow.
    pub fn spawn<F>(write: F) -> Producer
    where
        F: FnOnce(&mut dyn Write) -> std::io::Result<()> + Send + 'static,
    {
        let (tx, rx) = mpsc::channel(CHANNEL_CHUNKS);
        let handle = std::thread::spawn(move || {
            let mut w = std::io::BufWriter::with_capacity(64 * 1024, ChunkWriter { tx });
            write(&mut w)?;
            w.flush()
        });
        Producer { rx, handle }
    }

    /// A stream of fixed bytes.
    pub fn bytes(data: Vec<u8>) -> Producer {
        Producer::spawn(move |w| w.write_all(&data))
    }

    /// Waits for the writer thread; its error (e.g. a bundle file that cannot be read) if any.
    fn finish(self) -> std::io::Result<()> {
        drop(self.rx);
        self.handle
            .join()
            .unwrap_or_else(|_| Err(std::io::Error::other("the stdin writer panicked")))
    }
}

struct ChunkWriter {
    tx: mpsc::Sender<Vec<u8>>,
}

impl Write for ChunkWriter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        if buf.is_empty() {
            return Ok(0);
        }
        self.tx
            .blocking_send(buf.to_vec())
            .map_err(|_| std::io::Error::new(std::io::ErrorKind::BrokenPipe, "the command's stdin closed"))?;
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// A container to exec in.
#[derive(Debug, Clone)]
pub struct PodContainer {
    /// Namespace of the pod.
    pub namespace: String,
    /// Pod name.
    pub pod: String,
    /// Container name.
    pub container: String,
}

impl PodContainer {
    fn resource(&self) -> ResourceRef {
        ResourceRef::namespaced("Pod", &self.namespace, &self.pod)
    }
}

/// Runs `argv` in `target`'s container with `stdin` (if any) streamed to it; returns its exit
/// code and output. A non-zero exit is not an error here (callers decide).
///
/// Errors: the API's refusal classified ([`Error::Forbidden`], [`Error::NotFound`], …, exit
/// 4); a stream that ends without an exit status, or a status that is neither success nor an
/// exit code (e.g. the container is gone), [`Error::Api`] (exit 4) naming the pod;
/// the stdin writer's own error [`Error::Unexpected`].
pub async fn exec(
    kube: &KubeTarget,
    target: &PodContainer,
    argv: &[String],
    stdin: Option<Producer>,
    stdout_max: usize,
) -> Result<ExecOutput, Error> {
    let api: Api<Pod> = Api::namespaced(kube.client.clone(), &target.namespace);
    let ap = AttachParams::default()
        .container(target.container.clone())
        .stdin(stdin.is_some())
        .stdout(true)
        .stderr(true)
        .max_stdin_buf_size(256 * 1024)
        .max_stdout_buf_size(256 * 1024);
    let what = format!("exec {} in", argv.first().map(String::as_str).unwrap_or(""));
    let mut proc = api
        .exec(&target.pod, argv.to_vec(), &ap)
        .await
        .map_err(|e| classify(e, &what, target.resource(), kube))?;
    let status_fut = proc
        .take_status()
        .ok_or_else(|| Error::Unexpected("exec: no status channel".into()))?;
    let mut out_r = proc.stdout();
    let mut err_r = proc.stderr();
    let stdin_w = proc.stdin();

    let feed = async move {
        let (Some(mut p), Some(mut w)) = (stdin, stdin_w) else {
            return Ok::<Option<Producer>, std::io::Error>(None);
        };
        while let Some(chunk) = p.rx.recv().await {
            if let Err(e) = w.write_all(&chunk).await {
                // The command stopped reading (it failed): its status says why.
                tracing::debug!("exec stdin closed early: {e}");
                break;
            }
        }
        let _ = w.shutdown().await;
        drop(w);
        Ok(Some(p))
    };
    let read_out = async move {
        let mut buf = Vec::new();
        let mut truncated = false;
        if let Some(r) = out_r.as_mut() {
            let mut chunk = vec![0u8; 64 * 1024];
            loop {
                match r.read(&mut chunk).await {
                    Ok(0) | Err(_) => break,
                    Ok(n) => {
                        let room = stdout_max.saturating_sub(buf.len());
                        if n > room {
                            truncated = true;
                        }
                        buf.extend_from_slice(&chunk[..n.min(room)]);
                    }
                }
            }
        }
        (buf, truncated)
    };
    let read_err = async move {
        let mut buf = Vec::new();
        if let Some(r) = err_r.as_mut() {
            let mut chunk = vec![0u8; 16 * 1024];
            loop {
                match r.read(&mut chunk).await {
                    Ok(0) | Err(_) => break,
                    Ok(n) => {
                        let room = STDERR_MAX.saturating_sub(buf.len());
                        buf.extend_from_slice(&chunk[..n.min(room)]);
                    }
                }
            }
        }
        String::from_utf8_lossy(&buf).into_owned()
    };
    let (fed, (stdout, stdout_truncated), stderr, status) =
        tokio::join!(feed, read_out, read_err, status_fut);
    let joined = proc.join().await;
    if let Ok(Some(p)) = fed {
        if let Err(e) = p.finish() {
            if e.kind() != std::io::ErrorKind::BrokenPipe {
                return Err(Error::Unexpected(format!(
                    "stdin for {what} {}: {e}",
                    target.resource()
                )));
            }
        }
    }
    let code = match status {
        Some(st) => exit_code(&st).map_err(|message| Error::Api {
            verb: what.clone(),
            resource: target.resource(),
            message,
        })?,
        None => {
            return Err(Error::Api {
                verb: what,
                resource: target.resource(),
                message: match joined {
                    Err(e) => format!("the exec stream failed: {e}"),
                    Ok(()) => "the exec stream ended without an exit status".into(),
                },
            })
        }
    };
    Ok(ExecOutput {
        code,
        stdout,
        stdout_truncated,
        stderr,
    })
}

/// The exit code in the status channel's `Status` (kubelet: `Success`, or `Failure` with
/// reason `NonZeroExitCode` and a cause `ExitCode` whose message is the number). Any other
/// failure is `Err(message)`.
pub fn exit_code(st: &k8s_openapi::apimachinery::pkg::apis::meta::v1::Status) -> Result<i32, String> {
    if st.status.as_deref() == Some("Success") {
        return Ok(0);
    }
    if st.reason.as_deref() == Some("NonZeroExitCode") {
        let code = st
            .details
            .as_ref()
            .and_then(|d| d.causes.as_ref())
            .and_then(|cs| cs.iter().find(|c| c.reason.as_deref() == Some("ExitCode")))
            .and_then(|c| c.message.as_deref())
            .and_then(|m| m.trim().parse::<i32>().ok());
        if let Some(c) = code {
            return Ok(c);
        }
    }
    Err(format!(
        "{}{}",
        st.message.clone().unwrap_or_else(|| "command failed".into()),
        st.reason.as_ref().map(|r| format!(" ({r})")).unwrap_or_default()
    ))
}

/// The assisted-service database as reached by import/status.
#[derive(Debug, Clone)]
pub enum Db {
    /// `psql` exec'd in the `postgres` container of the assisted-service pod.
    Pod {
        /// The container.
        at: PodContainer,
        /// `db.user` of Secret `postgres`.
        user: String,
        /// `db.name` of Secret `postgres`.
        name: String,
    },
    /// The local `psql` with this connection URL (`--db-url`).
    Url(String),
}

impl Db {
    /// Where the database is, for messages and the record (`Pod ns/name container postgres`).
    pub fn describe(&self) -> String {
        match self {
            Db::Pod { at, name, .. } => format!(
                "database {name} in {} (container {})",
                at.resource(),
                at.container
            ),
            Db::Url(_) => "the database of --db-url".into(),
        }
    }

    /// Runs `psql -X <args>` with `stdin`: in the pod as `psql -X -U user -d name <args>`,
    /// locally as `psql -X -d URL <args>`.
    pub async fn psql(
        &self,
        kube: Option<&KubeTarget>,
        args: &[&str],
        stdin: Option<Producer>,
    ) -> Result<ExecOutput, Error> {
        match self {
            Db::Pod { at, user, name } => {
                let kube = kube.ok_or_else(|| Error::Unexpected("psql in a pod without a client".into()))?;
                let mut argv: Vec<String> = vec!["psql".into(), "-X".into(), "-U".into(), user.clone()];
                argv.extend(["-d".into(), name.clone()]);
                argv.extend(args.iter().map(|s| s.to_string()));
                exec(kube, at, &argv, stdin, STDOUT_MAX).await
            }
            Db::Url(url) => local_psql(url, args, stdin).await,
        }
    }

    /// Runs one query (`psql -X -At -v ON_ERROR_STOP=1 -c SQL`) and returns its output lines;
    /// a non-zero exit is [`Error::Api`] (exit 4) with psql's message.
    pub async fn query(&self, kube: Option<&KubeTarget>, sql: &str) -> Result<Vec<String>, Error> {
        let out = self
            .psql(kube, &["-At", "-v", "ON_ERROR_STOP=1", "-c", sql], None)
            .await?;
        if out.code != 0 {
            return Err(self.failed("query", &out));
        }
        Ok(out.stdout_text().lines().map(str::to_string).collect())
    }

    /// The error for a failed psql run.
    pub fn failed(&self, verb: &str, out: &ExecOutput) -> Error {
        Error::Api {
            verb: verb.into(),
            resource: ResourceRef {
                kind: "PostgreSQL".into(),
                namespace: None,
                name: Some(self.describe()),
            },
            message: format!("psql exited with {}: {}", out.code, out.stderr.trim()),
        }
    }
}

async fn local_psql(url: &str, args: &[&str], stdin: Option<Producer>) -> Result<ExecOutput, Error> {
    use std::process::Stdio;
    let mut cmd = tokio::process::Command::new("psql");
    // The password goes in PGPASSWORD, not on psql's command line (visible in `ps`).
    let (url, password) = super::dump::split_db_password(url);
    cmd.arg("-X").arg("-d").arg(&url).args(args);
    if let Some(pw) = password {
        use std::os::unix::ffi::OsStringExt;
        cmd.env("PGPASSWORD", std::ffi::OsString::from_vec(pw));
    }
    cmd.stdin(if stdin.is_some() {
        Stdio::piped()
    } else {
        Stdio::null()
    })
    .stdout(Stdio::piped())
    .stderr(Stdio::piped())
    .kill_on_drop(true);
    let mut child = cmd.spawn().map_err(|e| Error::Io {
        path: "psql".into(),
        source: std::io::Error::new(e.kind(), format!("cannot run the local psql (--db-url): {e}")),
    })?;
    let stdin_w = child.stdin.take();
    let mut out_r = child.stdout.take();
    let mut err_r = child.stderr.take();
    let feed = async move {
        let (Some(mut p), Some(mut w)) = (stdin, stdin_w) else {
            return None;
        };
        while let Some(chunk) = p.rx.recv().await {
            if w.write_all(&chunk).await.is_err() {
                break;
            }
        }
        drop(w);
        Some(p)
    };
    let read_out = async move {
        let mut v = Vec::new();
        if let Some(r) = out_r.as_mut() {
            let _ = r.take(STDOUT_MAX as u64).read_to_end(&mut v).await;
        }
        v
    };
    let read_err = async move {
        let mut v = Vec::new();
        if let Some(r) = err_r.as_mut() {
            let _ = r.take(STDERR_MAX as u64).read_to_end(&mut v).await;
        }
        String::from_utf8_lossy(&v).into_owned()
    };
    let (fed, stdout, stderr) = tokio::join!(feed, read_out, read_err);
    let status = child.wait().await.map_err(|e| Error::Io {
        path: "psql".into(),
        source: e,
    })?;
    if let Some(p) = fed {
        if let Err(e) = p.finish() {
            if e.kind() != std::io::ErrorKind::BrokenPipe {
                return Err(Error::Unexpected(format!("stdin for the local psql: {e}")));
            }
        }
    }
    Ok(ExecOutput {
        code: status.code().unwrap_or(-1),
        stdout_truncated: stdout.len() >= STDOUT_MAX,
        stdout,
        stderr,
    })
}

/// The assisted-service pod on cluster 0: label `app=assisted-service` in any namespace, phase
/// Running, with a container `postgres`; plus `db.user`/`db.name` of Secret `postgres` in its
/// namespace (the infrastructure operator's names, docs/migrate.md "Node 0 and cluster 0").
///
/// Errors: none found → [`Error::NotFound`] (exit 4) saying what installs it; a Secret without
/// the keys → [`Error::BadObject`]; API errors classified.
pub async fn find_assisted_db(kube: &KubeTarget) -> Result<Db, Error> {
    let pods: Api<Pod> = Api::all(kube.client.clone());
    let list = pods
        .list(&ListParams::default().labels("app=assisted-service"))
        .await
        .map_err(|e| classify(e, "list", ResourceRef::list("Pods"), kube))?;
    let pod = list
        .items
        .iter()
        .filter(|p| p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running"))
        .find(|p| {
            p.spec
                .as_ref()
                .is_some_and(|s| s.containers.iter().any(|c| c.name == "postgres"))
        })
        .ok_or_else(|| Error::NotFound {
            resource: ResourceRef::list("Pods"),
            why: Some(
                "no Running pod with label app=assisted-service and a container `postgres`: \
                 the infrastructure operator (multicluster engine) starts it once an \
                 AgentServiceConfig exists; or pass --db-url"
                    .into(),
            ),
        })?;
    let ns = pod.metadata.namespace.clone().unwrap_or_default();
    let name = pod.metadata.name.clone().unwrap_or_default();
    let secrets: Api<Secret> = Api::namespaced(kube.client.clone(), &ns);
    let sref = ResourceRef::namespaced("Secret", &ns, "postgres");
    let s = secrets
        .get("postgres")
        .await
        .map_err(|e| classify(e, "read", sref.clone(), kube))?;
    let key = |k: &str| -> Result<String, Error> {
        let v = s
            .data
            .as_ref()
            .and_then(|d| d.get(k))
            .map(|b| String::from_utf8_lossy(&b.0).into_owned())
            .or_else(|| s.string_data.as_ref().and_then(|d| d.get(k)).cloned())
            .filter(|v| !v.is_empty())
            .ok_or_else(|| Error::BadObject {
                resource: sref.clone(),
                message: format!("no key {k}"),
            })?;
        Ok(v)
    };
    Ok(Db::Pod {
        at: PodContainer {
            namespace: ns,
            pod: name,
            container: "postgres".into(),
        },
        user: key("db.user")?,
        name: key("db.name")?,
    })
}

/// `SELECT count(*)` of each of `tables` (names of letters, digits and `_` only; others are
/// skipped) in cluster 0's assisted-service database `db`: the counts (None where the query
/// failed) and one message per failure.
pub async fn table_counts(
    db: &Db,
    target: &crate::kube::KubeTarget,
    tables: &[String],
) -> (BTreeMap<String, Option<u64>>, Vec<String>) {
    let mut out = BTreeMap::new();
    let mut errors = Vec::new();
    for table in tables {
        if table.is_empty() || !table.chars().all(|ch| ch.is_ascii_alphanumeric() || ch == '_') {
            continue;
        }
        match db
            .query(Some(target), &format!("SELECT count(*) FROM public.{table}"))
            .await
        {
            Ok(l) => {
                out.insert(table.clone(), l.first().and_then(|s| s.trim().parse().ok()));
            }
            Err(e) => {
                out.insert(table.clone(), None);
                errors.push(format!("table {table}: {e}"));
            }
        }
    }
    (out, errors)
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Status, StatusCause, StatusDetails};

    fn nonzero(code: &str) -> Status {
        Status {
            status: Some("Failure".into()),
            reason: Some("NonZeroExitCode".into()),
            message: Some(format!("command terminated with non-zero exit code: {code}")),
            details: Some(StatusDetails {
                causes: Some(vec![StatusCause {
                    reason: Some("ExitCode".into()),
                    message: Some(code.into()),
                    field: None,
                }]),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    #[test]
    fn exit_codes_from_the_status_channel() {
        let ok = Status {
            status: Some("Success".into()),
            ..Default::default()
        };
        assert_eq!(exit_code(&ok), Ok(0));
        assert_eq!(exit_code(&nonzero("3")), Ok(3));
        assert_eq!(exit_code(&nonzero("126")), Ok(126));
        let other = Status {
            status: Some("Failure".into()),
            reason: Some("InternalError".into()),
            message: Some("container not found".into()),
            ..Default::default()
        };
        assert_eq!(
            exit_code(&other),
            Err("container not found (InternalError)".into())
        );
        assert!(exit_code(&nonzero("x")).is_err());
    }

    #[tokio::test]
    async fn producer_streams_in_chunks_and_reports_its_error() {
        let mut p = Producer::spawn(|w| {
            for i in 0..1000u32 {
                writeln!(w, "line {i}")?;
            }
            Ok(())
        });
        let mut all = Vec::new();
        while let Some(c) = p.rx.recv().await {
            all.extend(c);
        }
        assert!(p.finish().is_ok());
        let text = String::from_utf8(all).unwrap();
        assert_eq!(text.lines().count(), 1000);
        assert!(text.ends_with("line 999\n"));
        let p = Producer::spawn(|_| Err(std::io::Error::other("boom")));
        assert_eq!(p.finish().unwrap_err().to_string(), "boom");
    }
}
