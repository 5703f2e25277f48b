//! The containers behind pod exec (issue 12): what `agent-day2-sim container-exec` runs when
//! a control-plane node's kubelet API (`kubelet-exec`, on the kubelet's own streaming code) gets
//! a `pods/exec` session from the real kube-apiserver. [`plan`] decides what a command does,
//! [`run_local`] runs it with the session's stdin, stdout and stderr.
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

use serde_json::Value;
use std::ffi::OsString;
use std::path::{Component, Path, PathBuf};

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

/// Runs `plan` in this process's place, as a container runtime would: stdin is ours (the
/// session's), stdout and stderr go to ours (host paths rewritten as in a session); returns the
/// exit code (128+signal when killed, [`NOT_AVAILABLE_EXIT_CODE`] when the program cannot start).
///
/// `cut_stdin`: a fault (issue 21 item 6): pass only that many bytes of stdin to the program,
/// close its stdin, swallow the rest, and report exit 0 whatever it did, as a client sees an
/// exec whose stream broke while the API server still said `Success`.
pub fn run_local(plan: Plan, cut_stdin: Option<u64>) -> i32 {
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
                .stdin(if cut_stdin.is_some() {
                    Stdio::piped()
                } else {
                    Stdio::inherit()
                })
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
            let t0 = cut_stdin.map(|n| {
                let mut to = child.stdin.take().expect("stdin piped");
                std::thread::spawn(move || {
                    let mut from = std::io::stdin();
                    let _ = std::io::copy(&mut (&mut from).take(n), &mut to);
                    drop(to);
                    let _ = std::io::copy(&mut from, &mut std::io::sink());
                })
            });
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
            if let Some(t) = t0 {
                let _ = t.join();
                return 0;
            }
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
    use serde_json::json;

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
