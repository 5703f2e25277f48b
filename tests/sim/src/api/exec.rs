//! Pod exec (`pods/exec`) the way kube-apiserver serves it to kubectl and kube-rs: a WebSocket
//! upgrade of `GET|POST /api/v1/namespaces/NS/pods/NAME/exec?container=C&command=A&command=B&
//! stdin=true&stdout=true&stderr=true&tty=false` with the remote-command channel protocol.
//!
//! Protocol (apimachinery `util/remotecommand` and `util/httpstream/wsstream`): subprotocols
//! `v5.channel.k8s.io` and `v4.channel.k8s.io` (the first the client offers that is one of these
//! is chosen); each binary message starts with its stream id: 0 stdin, 1 stdout, 2 stderr,
//! 3 error/status, 4 resize; v5 adds 255 "close" whose next byte is the stream being closed
//! (`[255, 0]` = stdin EOF). All stdout/stderr is sent before the final status on stream 3, a
//! JSON `metav1.Status` as the kubelet writes it (`{"metadata":{},"status":"Success"}`, or
//! reason `NonZeroExitCode` with cause `ExitCode` = the code), then the connection is closed.
//! A client that goes away closes the process's stdin (the process is not killed, as with a real
//! container runtime) and its output is discarded.
//!
//! The simulated containers run only a few real host programs ([`plan`]):
//! - container `postgres` of a pod labelled `app=assisted-service`, when `up --assisted-db-url`
//!   was given: `psql ARGS` with `PGHOST`, `PGPORT`, `PGUSER` (and `PGPASSWORD` when the URL has
//!   one) from that URL;
//! - a container mounting PersistentVolumeClaims: `tar`, `ls`, `cat`, `sha256sum`, `mkdir` with
//!   absolute paths under a mountPath rewritten to `VOLUMES/<namespace>/<claimName>[/<subPath>]/...`
//!   (the claim's directory is created on first use; the rest behaves like the real program, e.g.
//!   `tar -C DIR` fails when DIR does not exist); host paths in their stderr (and in the stdout of
//!   `ls`/`sha256sum`) are written back as container paths;
//! - anything else: exit code 126 with `... not available in the simulated container` on stderr.
//!
//! Authorization: verb `create` on `pods/exec` (the `AuthorizePodWebsocketUpgradeCreatePermission`
//! rule of Kubernetes 1.31+, for GET too).

use super::authz::{Attributes, UserInfo};
use super::server::{err_response, Body, Server};
use super::status::ApiError;
use bytes::Bytes;
use futures::{SinkExt, StreamExt};
use http::{Request, Response};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use serde_json::{json, Value};
use std::ffi::OsString;
use std::path::{Component, Path, PathBuf};
use std::sync::Arc;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::mpsc;
use tokio_tungstenite::tungstenite::protocol::{frame::coding::CloseCode, CloseFrame, Role};
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::WebSocketStream;

/// Stream ids of the channel protocol.
const STDIN: u8 = 0;
const STDOUT: u8 = 1;
const STDERR: u8 = 2;
const ERROR: u8 = 3;
/// v5 only: `[CLOSE, stream]` = that stream reached EOF.
const CLOSE: u8 = 255;

/// Exit code of a command the simulated container does not have.
pub const NOT_AVAILABLE_EXIT_CODE: i32 = 126;

/// Programs a container with PersistentVolumeClaim mounts can run (host binaries from `PATH`).
pub const VOLUME_PROGRAMS: &[&str] = &["tar", "ls", "cat", "sha256sum", "mkdir"];

/// tar options that run other programs or reach other hosts: refused (exit 2) in the simulation.
const TAR_REFUSED: &[&str] = &[
    "--to-command",
    "--use-compress-program",
    "-I",
    "--rsh-command",
    "--rmt-command",
    "--info-script",
    "--new-volume-script",
    "-F",
    "--checkpoint-action",
];

/// The subprotocols served, in no particular order (the client's order decides).
const PROTOCOLS: &[&str] = &["v5.channel.k8s.io", "v4.channel.k8s.io"];

/// Where `psql` in the assisted-service pod's `postgres` container connects: the database of
/// `up --assisted-db-url postgres://USER[:PASSWORD]@HOST:PORT/DB`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AssistedDb {
    pub user: String,
    pub password: Option<String>,
    pub host: String,
    pub port: u16,
    pub dbname: String,
}

impl AssistedDb {
    /// Parses `postgres://USER[:PASSWORD]@HOST[:PORT]/DB` (also `postgresql://`; percent-escapes
    /// decoded; `[v6]` hosts; port 5432 when absent; a query string is ignored).
    /// Errors: another scheme, no user, no host, no database, a bad port.
    pub fn parse(url: &str) -> anyhow::Result<AssistedDb> {
        let dec = |s: &str| {
            percent_encoding::percent_decode_str(s)
                .decode_utf8_lossy()
                .into_owned()
        };
        let rest = url
            .strip_prefix("postgres://")
            .or_else(|| url.strip_prefix("postgresql://"))
            .ok_or_else(|| anyhow::anyhow!("{url:?}: expected postgres://USER@HOST:PORT/DB"))?;
        let rest = rest.split(['?', '#']).next().unwrap_or("");
        let (auth, hostpart) = rest
            .rsplit_once('@')
            .ok_or_else(|| anyhow::anyhow!("{url:?}: no user (postgres://USER@HOST:PORT/DB)"))?;
        let (user, password) = match auth.split_once(':') {
            Some((u, p)) => (dec(u), Some(dec(p))),
            None => (dec(auth), None),
        };
        let (hostport, db) = hostpart
            .split_once('/')
            .ok_or_else(|| anyhow::anyhow!("{url:?}: no database name"))?;
        let (host, port) = if let Some(v6) = hostport.strip_prefix('[') {
            let (h, after) = v6
                .split_once(']')
                .ok_or_else(|| anyhow::anyhow!("{url:?}: unclosed [ in the host"))?;
            (h.to_string(), after.strip_prefix(':'))
        } else {
            match hostport.rsplit_once(':') {
                Some((h, p)) => (h.to_string(), Some(p)),
                None => (hostport.to_string(), None),
            }
        };
        let port = match port {
            Some(p) => p
                .parse::<u16>()
                .map_err(|_| anyhow::anyhow!("{url:?}: bad port {p:?}"))?,
            None => 5432,
        };
        let db = dec(db);
        if user.is_empty() || host.is_empty() || db.is_empty() {
            anyhow::bail!(
                "{url:?}: user, host and database name are required (postgres://USER@HOST:PORT/DB)"
            );
        }
        Ok(AssistedDb {
            user,
            password,
            host: dec(&host),
            port,
            dbname: db,
        })
    }
}

/// What pod exec may run in the simulated containers.
#[derive(Debug, Clone, Default)]
pub struct ExecConfig {
    /// The target database of `psql` in the assisted-service pod (None: `psql` is not available).
    pub assisted_db: Option<AssistedDb>,
    /// Root of the PersistentVolumeClaims' contents: `<dir>/<namespace>/<claimName>/`.
    pub volumes_dir: PathBuf,
}

/// The exec request's query (`PodExecOptions`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ExecOptions {
    pub container: Option<String>,
    pub command: Vec<String>,
    pub stdin: bool,
    pub stdout: bool,
    pub stderr: bool,
    pub tty: bool,
}

impl ExecOptions {
    /// Parses the query string (every `command` value in order; booleans `true`/`1`).
    pub fn parse(query: Option<&str>) -> ExecOptions {
        let mut o = ExecOptions::default();
        for (k, v) in form_urlencoded::parse(query.unwrap_or("").as_bytes()) {
            let flag = matches!(v.as_ref(), "true" | "1" | "True" | "TRUE");
            match k.as_ref() {
                "container" if !v.is_empty() => o.container = Some(v.into_owned()),
                "command" => o.command.push(v.into_owned()),
                "stdin" => o.stdin = flag,
                "stdout" => o.stdout = flag,
                "stderr" => o.stderr = flag,
                "tty" => o.tty = flag,
                _ => {}
            }
        }
        o
    }
}

/// How one exec runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Plan {
    /// Run `program` with `args` and exactly the environment `env`, in `cwd`. `dirs` are
    /// created first (the claims' directories). `rewrite` maps host path prefixes back to
    /// container paths in stderr (and stdout when `rewrite_stdout`).
    Run {
        program: String,
        args: Vec<OsString>,
        env: Vec<(String, String)>,
        cwd: PathBuf,
        dirs: Vec<PathBuf>,
        rewrite: Vec<(String, String)>,
        rewrite_stdout: bool,
    },
    /// Do not run anything: write `stderr` and report exit code `code`.
    Refuse { code: i32, stderr: String },
}

/// `(mountPath, host dir)` of every PersistentVolumeClaim volume `container` mounts, longest
/// mountPath first.
pub fn claim_mounts(cfg: &ExecConfig, ns: &str, pod: &Value, container: &Value) -> Vec<(String, PathBuf)> {
    let mut out = Vec::new();
    let volumes = pod["spec"]["volumes"].as_array().cloned().unwrap_or_default();
    for m in container["volumeMounts"].as_array().into_iter().flatten() {
        let (Some(vname), Some(mp)) = (m["name"].as_str(), m["mountPath"].as_str()) else {
            continue;
        };
        let Some(claim) = volumes
            .iter()
            .find(|v| v["name"].as_str() == Some(vname))
            .and_then(|v| v["persistentVolumeClaim"]["claimName"].as_str())
        else {
            continue;
        };
        if claim.is_empty() || claim.contains('/') || claim.starts_with('.') {
            continue;
        }
        let mut host = cfg.volumes_dir.join(ns).join(claim);
        if let Some(sub) = m["subPath"].as_str().filter(|s| !s.is_empty()) {
            if !Path::new(sub)
                .components()
                .all(|c| matches!(c, Component::Normal(_)))
            {
                continue;
            }
            host = host.join(sub);
        }
        let mp = if mp.len() > 1 {
            mp.trim_end_matches('/')
        } else {
            mp
        };
        out.push((mp.to_string(), host));
    }
    out.sort_by_key(|m| std::cmp::Reverse(m.0.len()));
    out
}

/// Maps the container path `p` (absolute) to the host, or an error message.
fn map_path(p: &str, mounts: &[(String, PathBuf)]) -> Result<PathBuf, String> {
    if Path::new(p).components().any(|c| c == Component::ParentDir) {
        return Err(format!(
            "{p}: paths with '..' are refused by the simulated container"
        ));
    }
    for (mp, host) in mounts {
        if mp == "/" {
            return Ok(host.join(p.trim_start_matches('/')));
        }
        if p == mp {
            return Ok(host.clone());
        }
        if let Some(rest) = p.strip_prefix(mp.as_str()).and_then(|r| r.strip_prefix('/')) {
            return Ok(host.join(rest));
        }
    }
    Err(format!(
        "{p}: only paths under the pod's PersistentVolumeClaim mounts ({}) exist in the simulated container",
        mounts.iter().map(|m| m.0.as_str()).collect::<Vec<_>>().join(", ")
    ))
}

/// Rewrites one argument of a volume program: a whole absolute path, `--opt=/path` or
/// `-X/path` (short option with an attached value).
fn map_arg(a: &str, mounts: &[(String, PathBuf)]) -> Result<OsString, String> {
    if a.starts_with('/') {
        if a == "/dev/null" {
            return Ok(a.into());
        }
        return map_path(a, mounts).map(OsString::from);
    }
    if let Some((opt, val)) = a
        .split_once('=')
        .filter(|(o, v)| o.starts_with("--") && v.starts_with('/'))
    {
        let mut s = OsString::from(format!("{opt}="));
        s.push(map_path(val, mounts)?);
        return Ok(s);
    }
    let b = a.as_bytes();
    if b.len() > 2 && b[0] == b'-' && b[1] != b'-' && b[2] == b'/' {
        let mut s = OsString::from(&a[..2]);
        s.push(map_path(&a[2..], mounts)?);
        return Ok(s);
    }
    Ok(a.into())
}

/// The program name `argv0` names: `tar` for `tar`, `/usr/bin/tar` or `/bin/tar`.
fn program_name(argv0: &str) -> &str {
    for p in ["/usr/bin/", "/bin/", "/usr/local/bin/"] {
        if let Some(n) = argv0.strip_prefix(p) {
            return n;
        }
    }
    argv0
}

/// Decides what `argv` in `container` of `pod` (namespace `ns`) runs (see the module doc).
pub fn plan(cfg: &ExecConfig, ns: &str, pod: &Value, container: &Value, argv: &[String]) -> Plan {
    let not_available = || {
        Plan::Refuse {
        code: NOT_AVAILABLE_EXIT_CODE,
        stderr: format!(
            "exec failed: unable to start container process: exec: {:?}: not available in the simulated container\n",
            argv.first().map(String::as_str).unwrap_or("")
        ),
    }
    };
    let Some(argv0) = argv.first() else {
        return not_available();
    };
    let name = program_name(argv0);
    let scratch = cfg.volumes_dir.join(".root");
    let base_env = |home: &Path| {
        vec![
            ("PATH".to_string(), "/usr/local/bin:/usr/bin:/bin".to_string()),
            ("HOME".to_string(), home.display().to_string()),
            ("LANG".to_string(), "C.UTF-8".to_string()),
        ]
    };
    let is_assisted = pod["metadata"]["labels"]["app"].as_str() == Some("assisted-service");
    if name == "psql" && container["name"].as_str() == Some("postgres") && is_assisted {
        let Some(db) = &cfg.assisted_db else {
            return not_available();
        };
        let mut env = base_env(&scratch);
        env.push(("PGHOST".into(), db.host.clone()));
        env.push(("PGPORT".into(), db.port.to_string()));
        env.push(("PGUSER".into(), db.user.clone()));
        if let Some(p) = &db.password {
            env.push(("PGPASSWORD".into(), p.clone()));
        }
        return Plan::Run {
            program: "psql".into(),
            args: argv[1..].iter().map(OsString::from).collect(),
            env,
            cwd: scratch.clone(),
            dirs: vec![scratch],
            rewrite: Vec::new(),
            rewrite_stdout: false,
        };
    }
    let mounts = claim_mounts(cfg, ns, pod, container);
    if mounts.is_empty() || !VOLUME_PROGRAMS.contains(&name) {
        return not_available();
    }
    let mut args = Vec::new();
    for a in &argv[1..] {
        if name == "tar"
            && TAR_REFUSED
                .iter()
                .any(|r| a == r || (r.starts_with("--") && a.starts_with(&format!("{r}="))))
        {
            return Plan::Refuse {
                code: 2,
                stderr: format!("tar: {a}: not available in the simulated container\n"),
            };
        }
        match map_arg(a, &mounts) {
            Ok(m) => args.push(m),
            Err(msg) => {
                return Plan::Refuse {
                    code: 2,
                    stderr: format!("{name}: {msg}\n"),
                }
            }
        }
    }
    let mut env = base_env(&scratch);
    if name == "tar" {
        // A container runs as a random non-root user: tar cannot restore owners there; `-f
        // host:path` would be a remote archive.
        // Members archived by absolute path are named by their container path (`kubectl cp
        // POD:/migration/x` expects `migration/x`).
        let mut opts = String::from("--no-same-owner --force-local");
        for (mp, host) in &mounts {
            let (h, m) = (host.display().to_string(), mp.trim_start_matches('/'));
            let plain = |s: &str| {
                s.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"/_.-".contains(&b))
            };
            if plain(&h) && plain(m) {
                let re = h.trim_start_matches('/').replace('.', "\\.");
                opts.push_str(&format!(" --transform=s|^{re}|{m}|"));
            }
        }
        env.push(("TAR_OPTIONS".into(), opts));
    }
    let mut dirs: Vec<PathBuf> = mounts.iter().map(|m| m.1.clone()).collect();
    dirs.push(scratch.clone());
    let rewrite = mounts
        .iter()
        .map(|(mp, host)| (host.display().to_string(), mp.clone()))
        .collect();
    Plan::Run {
        program: name.to_string(),
        args,
        env,
        cwd: scratch,
        dirs,
        rewrite,
        rewrite_stdout: matches!(name, "ls" | "sha256sum"),
    }
}

fn bad_request(msg: impl Into<String>) -> Response<Body> {
    err_response(ApiError::bad_request(msg.into()))
}

fn header<'a>(req: &'a Request<Incoming>, name: &str) -> &'a str {
    req.headers()
        .get(name)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
}

/// Serves one `pods/exec` request (already authenticated as `user`): authorization, the pod
/// and container checks, the WebSocket handshake, then the session in a task of its own.
pub async fn handle(
    srv: Arc<Server>,
    mut req: Request<Incoming>,
    ns: String,
    name: String,
    user: &UserInfo,
) -> Response<Body> {
    let opts = ExecOptions::parse(req.uri().query());
    let attrs = Attributes {
        verb: "create".into(),
        group: String::new(),
        resource: "pods".into(),
        subresource: Some("exec".into()),
        namespace: Some(ns.clone()),
        name: Some(name.clone()),
    };
    if let Err(e) = srv.authorize(user, &attrs) {
        return err_response(e);
    }
    let pod = {
        let st = srv.state.lock().unwrap();
        st.objects
            .get("/pods")
            .and_then(|b| b.get(&(ns.clone(), name.clone())))
            .cloned()
    };
    let Some(pod) = pod else {
        return err_response(ApiError::not_found("", "pods", &name));
    };
    let containers = pod["spec"]["containers"].as_array().cloned().unwrap_or_default();
    let container = match &opts.container {
        Some(c) => match containers.iter().find(|x| x["name"].as_str() == Some(c)) {
            Some(x) => x.clone(),
            // pod.ExecLocation → streamLocation: a BadRequest, as kube-apiserver answers.
            None => return bad_request(format!("container {c} is not valid for pod {name}")),
        },
        None if containers.len() == 1 => containers[0].clone(),
        None => {
            let names: Vec<&str> = containers.iter().filter_map(|c| c["name"].as_str()).collect();
            return bad_request(format!(
                "a container name must be specified for pod {name}, choose one of: [{}]",
                names.join(" ")
            ));
        }
    };
    if let Some(phase @ ("Succeeded" | "Failed")) = pod["status"]["phase"].as_str() {
        return bad_request(format!(
            "cannot exec into a container in a completed pod; current phase is {phase}"
        ));
    }
    if opts.command.is_empty() {
        return bad_request("you must specify at least one command for the container");
    }
    if !opts.stdin && !opts.stdout && !opts.stderr {
        return bad_request("you must specify at least 1 of stdin, stdout, stderr");
    }
    // The WebSocket handshake (RFC 6455) with the channel subprotocol.
    let upgrade = header(&req, "upgrade");
    if !upgrade.eq_ignore_ascii_case("websocket") {
        let what = if upgrade.is_empty() { "none" } else { upgrade };
        return bad_request(format!(
            "Upgrade request required: the simulator serves exec over WebSocket ({}) only, got upgrade {what}",
            PROTOCOLS.join(", ")
        ));
    }
    let key = header(&req, "sec-websocket-key").to_string();
    if key.is_empty() {
        return bad_request("missing Sec-WebSocket-Key");
    }
    let offered: Vec<String> = req
        .headers()
        .get_all("sec-websocket-protocol")
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(',').map(|s| s.trim().to_string()))
        .filter(|s| !s.is_empty())
        .collect();
    let Some(proto) = offered.iter().find(|p| PROTOCOLS.contains(&p.as_str())).cloned() else {
        return bad_request(format!(
            "none of the offered subprotocols {offered:?} is served (supported: {})",
            PROTOCOLS.join(", ")
        ));
    };
    let plan = plan(&srv.exec, &ns, &pod, &container, &opts.command);
    tracing::debug!(%ns, pod = %name, command = ?opts.command, ?plan, %proto, "exec");
    let on_upgrade = hyper::upgrade::on(&mut req);
    let v5 = proto == "v5.channel.k8s.io";
    tokio::spawn(async move {
        match on_upgrade.await {
            Ok(up) => {
                let ws = WebSocketStream::from_raw_socket(TokioIo::new(up), Role::Server, None).await;
                session(ws, v5, plan, opts).await;
            }
            Err(e) => tracing::warn!("exec upgrade: {e}"),
        }
    });
    Response::builder()
        .status(101)
        .header("Upgrade", "websocket")
        .header("Connection", "Upgrade")
        .header(
            "Sec-WebSocket-Accept",
            tokio_tungstenite::tungstenite::handshake::derive_accept_key(key.as_bytes()),
        )
        .header("Sec-WebSocket-Protocol", proto)
        .body(Full::new(Bytes::new()).boxed())
        .expect("response")
}

/// `metav1.Status` of the finished command, as the kubelet writes it on the error stream.
pub fn exit_status(argv: &[String], code: i32) -> Value {
    if code == 0 {
        return json!({"metadata": {}, "status": "Success"});
    }
    json!({
        "metadata": {},
        "status": "Failure",
        "message": format!(
            "command terminated with non-zero exit code: error executing command [{}], exit code {code}",
            argv.join(" ")
        ),
        "reason": "NonZeroExitCode",
        "details": {"causes": [{"reason": "ExitCode", "message": code.to_string()}]},
    })
}

fn frame(stream: u8, data: &[u8]) -> Message {
    let mut v = Vec::with_capacity(data.len() + 1);
    v.push(stream);
    v.extend_from_slice(data);
    Message::binary(v)
}

/// Host path prefixes → container paths, applied to complete lines.
struct Rewriter {
    map: Vec<(String, String)>,
    pending: Vec<u8>,
}

impl Rewriter {
    fn apply(&self, line: &[u8]) -> Vec<u8> {
        let mut s = String::from_utf8_lossy(line).into_owned();
        for (host, ctr) in &self.map {
            s = s.replace(host.as_str(), ctr);
        }
        s.into_bytes()
    }
    /// The complete lines of `pending + chunk`, rewritten; the rest stays pending.
    fn feed(&mut self, chunk: &[u8]) -> Vec<u8> {
        self.pending.extend_from_slice(chunk);
        match self.pending.iter().rposition(|b| *b == b'\n') {
            Some(i) => {
                let rest = self.pending.split_off(i + 1);
                let done = std::mem::replace(&mut self.pending, rest);
                self.apply(&done)
            }
            None => Vec::new(),
        }
    }
    fn finish(&mut self) -> Vec<u8> {
        let p = std::mem::take(&mut self.pending);
        self.apply(&p)
    }
}

/// Copies a child's output to the writer as frames of `stream` (rewritten when `map` is not
/// empty); discards it when `tx` is None.
async fn forward(
    mut r: impl tokio::io::AsyncRead + Unpin,
    stream: u8,
    tx: Option<mpsc::Sender<Message>>,
    map: Vec<(String, String)>,
) {
    let mut rw = (!map.is_empty()).then_some(Rewriter {
        map,
        pending: Vec::new(),
    });
    let mut buf = vec![0u8; 32 * 1024];
    loop {
        let n = match r.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        let data = match rw.as_mut() {
            Some(rw) => rw.feed(&buf[..n]),
            None => buf[..n].to_vec(),
        };
        if let (Some(tx), false) = (&tx, data.is_empty()) {
            let _ = tx.send(frame(stream, &data)).await;
        }
    }
    if let (Some(rw), Some(tx)) = (rw.as_mut(), &tx) {
        let rest = rw.finish();
        if !rest.is_empty() {
            let _ = tx.send(frame(stream, &rest)).await;
        }
    }
}

/// One exec session on an upgraded connection.
async fn session<S>(ws: WebSocketStream<S>, v5: bool, plan: Plan, opts: ExecOptions)
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let (mut sink, mut source) = ws.split();
    let (out_tx, mut out_rx) = mpsc::channel::<Message>(16);
    // The only writer: frames in order; after a failed send, keeps draining so producers never block.
    let writer = tokio::spawn(async move {
        let mut ok = true;
        while let Some(m) = out_rx.recv().await {
            if ok && sink.send(m).await.is_err() {
                ok = false;
            }
        }
        if ok {
            let _ = sink
                .send(Message::Close(Some(CloseFrame {
                    code: CloseCode::Normal,
                    reason: "".into(),
                })))
                .await;
        }
        let _ = sink.close().await;
    });
    let stdout_tx = opts.stdout.then(|| out_tx.clone());
    let stderr_tx = (opts.stderr || opts.tty).then(|| out_tx.clone());

    let code = match plan {
        Plan::Refuse { code, stderr } => {
            if let Some(tx) = &stderr_tx {
                let _ = tx.send(frame(STDERR, stderr.as_bytes())).await;
            }
            // Whatever the client sends until then is ignored.
            code
        }
        Plan::Run {
            program,
            args,
            env,
            cwd,
            dirs,
            rewrite,
            rewrite_stdout,
        } => {
            for d in &dirs {
                let _ = std::fs::create_dir_all(d);
            }
            let mut cmd = tokio::process::Command::new(&program);
            cmd.args(&args)
                .env_clear()
                .envs(env)
                .current_dir(&cwd)
                .stdin(if opts.stdin {
                    std::process::Stdio::piped()
                } else {
                    std::process::Stdio::null()
                })
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .kill_on_drop(true);
            match cmd.spawn() {
                Err(e) => {
                    if let Some(tx) = &stderr_tx {
                        let msg = format!("exec failed: {program}: {e} (on the simulator's host)\n");
                        let _ = tx.send(frame(STDERR, msg.as_bytes())).await;
                    }
                    NOT_AVAILABLE_EXIT_CODE
                }
                Ok(mut child) => {
                    run_child(
                        &mut child,
                        &mut source,
                        v5,
                        stdout_tx.clone(),
                        stderr_tx.clone(),
                        rewrite,
                        rewrite_stdout,
                    )
                    .await
                }
            }
        }
    };
    drop(stdout_tx);
    drop(stderr_tx);
    let status = exit_status(&opts.command, code);
    let _ = out_tx
        .send(frame(ERROR, &serde_json::to_vec(&status).unwrap_or_default()))
        .await;
    drop(out_tx);
    let _ = writer.await;
    // Let the client's close reach us (bounded), so the TCP connection ends cleanly.
    let _ = tokio::time::timeout(std::time::Duration::from_secs(2), async {
        while let Some(Ok(_)) = source.next().await {}
    })
    .await;
}

/// Feeds stdin from the WebSocket to the child and its output back until it exits and its
/// output is drained; returns the exit code (128+signal when killed).
async fn run_child<R>(
    child: &mut tokio::process::Child,
    source: &mut R,
    v5: bool,
    stdout_tx: Option<mpsc::Sender<Message>>,
    stderr_tx: Option<mpsc::Sender<Message>>,
    rewrite: Vec<(String, String)>,
    rewrite_stdout: bool,
) -> i32
where
    R: futures::Stream<Item = Result<Message, tokio_tungstenite::tungstenite::Error>> + Unpin,
{
    let out = child.stdout.take().expect("stdout piped");
    let err = child.stderr.take().expect("stderr piped");
    let out_task = tokio::spawn(forward(
        out,
        STDOUT,
        stdout_tx,
        if rewrite_stdout {
            rewrite.clone()
        } else {
            Vec::new()
        },
    ));
    let err_task = tokio::spawn(forward(err, STDERR, stderr_tx, rewrite));
    // stdin: a task of its own so a child that does not read cannot stall the WebSocket reader.
    let mut in_tx: Option<mpsc::Sender<Bytes>> = child.stdin.take().map(|mut w| {
        let (tx, mut rx) = mpsc::channel::<Bytes>(8);
        tokio::spawn(async move {
            while let Some(b) = rx.recv().await {
                if w.write_all(&b).await.is_err() {
                    break;
                }
            }
            let _ = w.shutdown().await;
            // Dropping `w` closes the pipe: EOF for the child.
        });
        tx
    });
    let done = async {
        let st = child.wait().await;
        let _ = out_task.await;
        let _ = err_task.await;
        st
    };
    tokio::pin!(done);
    let mut source_open = true;
    let st = loop {
        tokio::select! {
            st = &mut done => break st,
            m = source.next(), if source_open => match m {
                Some(Ok(Message::Binary(b))) => match b.first() {
                    Some(&STDIN) => {
                        if let Some(tx) = &in_tx {
                            if b.len() > 1 && tx.send(b.slice(1..)).await.is_err() {
                                in_tx = None;
                            }
                        }
                    }
                    Some(&CLOSE) if v5 && b.get(1) == Some(&STDIN) => in_tx = None,
                    // Resize (4) and anything else: nothing to do without a terminal.
                    _ => {}
                },
                Some(Ok(Message::Close(_))) | Some(Err(_)) | None => {
                    // v4 clients close the connection at stdin EOF; either way stdin ends.
                    source_open = false;
                    in_tx = None;
                }
                Some(Ok(_)) => {}
            },
        }
    };
    match st {
        Ok(s) => s.code().unwrap_or_else(|| {
            use std::os::unix::process::ExitStatusExt;
            128 + s.signal().unwrap_or(0)
        }),
        Err(_) => 1,
    }
}

/// Runs `plan` in this process's place, as a container runtime would: stdin is ours (the
/// session's), stdout and stderr go to ours (host paths rewritten as in a session); returns the
/// exit code (128+signal when killed, [`NOT_AVAILABLE_EXIT_CODE`] when the program cannot start).
pub fn run_local(plan: Plan) -> i32 {
    use std::io::{Read, Write};
    use std::process::{Command, Stdio};
    fn copy(mut r: impl Read, mut w: impl Write, map: Vec<(String, String)>) {
        let mut rw = (!map.is_empty()).then_some(Rewriter {
            map,
            pending: Vec::new(),
        });
        let mut buf = vec![0u8; 32 * 1024];
        loop {
            let n = match r.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(n) => n,
            };
            let data = match rw.as_mut() {
                Some(rw) => rw.feed(&buf[..n]),
                None => buf[..n].to_vec(),
            };
            if w.write_all(&data).and_then(|()| w.flush()).is_err() {
                return;
            }
        }
        if let Some(rw) = rw.as_mut() {
            let _ = w.write_all(&rw.finish());
        }
        let _ = w.flush();
    }
    match plan {
        Plan::Refuse { code, stderr } => {
            eprint!("{stderr}");
            code
        }
        Plan::Run {
            program,
            args,
            env,
            cwd,
            dirs,
            rewrite,
            rewrite_stdout,
        } => {
            for d in &dirs {
                let _ = std::fs::create_dir_all(d);
            }
            let child = Command::new(&program)
                .args(&args)
                .env_clear()
                .envs(env)
                .current_dir(&cwd)
                .stdin(Stdio::inherit())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn();
            let mut child = match child {
                Ok(c) => c,
                Err(e) => {
                    eprintln!("exec failed: {program}: {e} (on the simulator's host)");
                    return NOT_AVAILABLE_EXIT_CODE;
                }
            };
            let out = child.stdout.take().expect("stdout piped");
            let err = child.stderr.take().expect("stderr piped");
            let out_map = if rewrite_stdout {
                rewrite.clone()
            } else {
                Vec::new()
            };
            let t1 = std::thread::spawn(move || copy(out, std::io::stdout(), out_map));
            let t2 = std::thread::spawn(move || copy(err, std::io::stderr(), rewrite));
            let st = child.wait();
            let _ = t1.join();
            let _ = t2.join();
            match st {
                Ok(s) => s.code().unwrap_or_else(|| {
                    use std::os::unix::process::ExitStatusExt;
                    128 + s.signal().unwrap_or(0)
                }),
                Err(_) => 1,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg() -> ExecConfig {
        ExecConfig {
            assisted_db: Some(AssistedDb::parse("postgres://admin:pw@127.0.0.1:5433/installer").unwrap()),
            volumes_dir: PathBuf::from("/v"),
        }
    }

    fn copy_pod() -> (Value, Value) {
        let pod = json!({
            "metadata": {"name": "copy", "namespace": "ns1"},
            "spec": {
                "containers": [{"name": "c", "volumeMounts": [
                    {"name": "data", "mountPath": "/migration"},
                    {"name": "other", "mountPath": "/migration/sub", "subPath": "x"},
                    {"name": "tmp", "mountPath": "/tmp"},
                ]}],
                "volumes": [
                    {"name": "data", "persistentVolumeClaim": {"claimName": "pvc1"}},
                    {"name": "other", "persistentVolumeClaim": {"claimName": "pvc2"}},
                    {"name": "tmp", "emptyDir": {}},
                ],
            },
        });
        let c = pod["spec"]["containers"][0].clone();
        (pod, c)
    }

    fn argv(s: &[&str]) -> Vec<String> {
        s.iter().map(|x| x.to_string()).collect()
    }

    #[test]
    fn parses_db_urls() {
        let d =
            AssistedDb::parse("postgres://admin:p%40ss@127.0.0.1:5433/installer?sslmode=disable").unwrap();
        assert_eq!(
            d,
            AssistedDb {
                user: "admin".into(),
                password: Some("p@ss".into()),
                host: "127.0.0.1".into(),
                port: 5433,
                dbname: "installer".into()
            }
        );
        let d = AssistedDb::parse("postgresql://u@[::1]/db").unwrap();
        assert_eq!((d.host.as_str(), d.port, d.password), ("::1", 5432, None));
        for bad in [
            "http://u@h/db",
            "postgres://h:5432/db",
            "postgres://u@h:x/db",
            "postgres://u@h:1/",
        ] {
            assert!(AssistedDb::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn parses_exec_query() {
        let o = ExecOptions::parse(Some(
            "command=tar&command=-x&command=-f&command=-&container=c&stdin=true&stdout=true&stderr=1&tty=false",
        ));
        assert_eq!(o.command, argv(&["tar", "-x", "-f", "-"]));
        assert_eq!(o.container.as_deref(), Some("c"));
        assert!(o.stdin && o.stdout && o.stderr && !o.tty);
    }

    #[test]
    fn tar_paths_map_to_claims() {
        let (pod, c) = copy_pod();
        let Plan::Run {
            program,
            args,
            env,
            dirs,
            ..
        } = plan(
            &cfg(),
            "ns1",
            &pod,
            &c,
            &argv(&[
                "tar",
                "-x",
                "-f",
                "-",
                "-C",
                "/migration/abc",
                "--directory=/migration/sub/y",
                "-f/migration",
            ]),
        )
        else {
            panic!("runs")
        };
        assert_eq!(program, "tar");
        assert_eq!(
            args,
            [
                "-x",
                "-f",
                "-",
                "-C",
                "/v/ns1/pvc1/abc",
                "--directory=/v/ns1/pvc2/x/y",
                "-f/v/ns1/pvc1"
            ]
            .map(OsString::from)
        );
        assert!(dirs.contains(&PathBuf::from("/v/ns1/pvc1")));
        let tar_options = &env.iter().find(|(k, _)| k == "TAR_OPTIONS").unwrap().1;
        assert!(tar_options.contains("--no-same-owner"), "{tar_options}");
        assert!(
            tar_options.contains(" --transform=s|^v/ns1/pvc1|migration|"),
            "{tar_options}"
        );
    }

    #[test]
    fn refuses_escapes_and_other_paths() {
        let (pod, c) = copy_pod();
        for a in [
            &["tar", "-C", "/migration/../etc", "-x"][..],
            &["cat", "/etc/passwd"],
            &["ls", "/tmp"],
            &["tar", "--to-command=sh", "-x"],
            &["tar", "-I", "gzip", "-x"],
        ] {
            match plan(&cfg(), "ns1", &pod, &c, &argv(a)) {
                Plan::Refuse { code: 2, stderr } => assert!(!stderr.is_empty()),
                p => panic!("{a:?}: {p:?}"),
            }
        }
        match plan(&cfg(), "ns1", &pod, &c, &argv(&["sh", "-c", "true"])) {
            Plan::Refuse { code: 126, stderr } => {
                assert!(
                    stderr.contains("not available in the simulated container"),
                    "{stderr}"
                )
            }
            p => panic!("{p:?}"),
        }
    }

    #[test]
    fn psql_only_in_the_assisted_postgres_container() {
        let pod = json!({"metadata": {"labels": {"app": "assisted-service"}},
            "spec": {"containers": [{"name": "postgres"}, {"name": "assisted-service"}]}});
        let pg = pod["spec"]["containers"][0].clone();
        let Plan::Run {
            program, args, env, ..
        } = plan(&cfg(), "mce", &pod, &pg, &argv(&["psql", "-X", "-c", "SELECT 1"]))
        else {
            panic!("runs")
        };
        assert_eq!(program, "psql");
        assert_eq!(args, ["-X", "-c", "SELECT 1"].map(OsString::from));
        for kv in [("PGHOST", "127.0.0.1"), ("PGPORT", "5433"), ("PGPASSWORD", "pw")] {
            assert!(
                env.iter().any(|(k, v)| (k.as_str(), v.as_str()) == kv),
                "{kv:?} in {env:?}"
            );
        }
        let other = pod["spec"]["containers"][1].clone();
        assert!(matches!(
            plan(&cfg(), "mce", &pod, &other, &argv(&["psql"])),
            Plan::Refuse { code: 126, .. }
        ));
        let no_db = ExecConfig {
            assisted_db: None,
            ..cfg()
        };
        assert!(matches!(
            plan(&no_db, "mce", &pod, &pg, &argv(&["psql"])),
            Plan::Refuse { code: 126, .. }
        ));
    }

    #[test]
    fn statuses_match_the_kubelet() {
        assert_eq!(
            exit_status(&argv(&["true"]), 0),
            json!({"metadata": {}, "status": "Success"})
        );
        let s = exit_status(&argv(&["sh", "-c", "exit 3"]), 3);
        assert_eq!(s["reason"], "NonZeroExitCode");
        assert_eq!(
            s["details"]["causes"][0],
            json!({"reason": "ExitCode", "message": "3"})
        );
        assert_eq!(
            s["message"],
            "command terminated with non-zero exit code: error executing command [sh -c exit 3], exit code 3"
        );
    }

    #[test]
    fn rewriter_maps_complete_lines() {
        let mut r = Rewriter {
            map: vec![("/v/ns1/pvc1".into(), "/migration".into())],
            pending: Vec::new(),
        };
        assert_eq!(r.feed(b"abc  /v/ns1/pv"), b"");
        assert_eq!(r.feed(b"c1/a\nx /v/ns1/pvc1"), b"abc  /migration/a\n");
        assert_eq!(r.finish(), b"x /migration");
    }
}
