//! A real PostgreSQL server for tests (Debian's, `/usr/lib/postgresql/<major>/bin`).
//!
//! [`Postgres::start`] runs `initdb` (trust auth, superuser `postgres`, `--no-sync`) in
//! `DIR/pgdata` and `pg_ctl start` with `fsync=off`, listening on a free TCP port of the given
//! address (inside the test network namespace 127.0.0.1 and 192.168.111.0/24 are local), the
//! unix socket in `DIR/pgsock` (or a short directory under /tmp when that path is too long for a
//! socket). The server stops (`pg_ctl stop -m immediate`) when the value is dropped.
//!
//! `initdb`, `pg_ctl` and `postgres` refuse to run as root: when the effective uid is 0 they run
//! as the `postgres` user (`runuser -u postgres --`), the data and socket directories are given
//! to that user, and `DIR`'s ancestors get the search bit for others (`o+x`, never read) when they
//! lack it so the server can reach its data directory. Not root: everything runs as the caller.
//! Root inside a user namespace that maps only itself (`agent-day2-sim netns` as non-root) cannot
//! run the server: [`unavailable`] says so, tests skip.
//!
//! `initdb` runs once per machine and user: later servers start from a copy of that template
//! (see [`Postgres::start`]); a server is ready in a few hundred milliseconds.
//!
//! The server is a daemon (`pg_ctl start`), not a child: a test process killed before the drop
//! leaves it running inside that test's network namespace until it is stopped by hand.
//!
//! ```no_run
//! use agent_day2_sim::postgres::Postgres;
//! let pg = Postgres::start(std::path::Path::new("/tmp/x"), "127.0.0.1".parse().unwrap()).unwrap();
//! pg.create_db("installer", "admin").unwrap();
//! agent_day2_sim::node0schema::create(&pg.url("installer"), "20240617140000").unwrap();
//! ```

use std::net::IpAddr;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use anyhow::{bail, Context};

/// The directory holding `initdb`, `pg_ctl` and `postgres` of the newest installed major
/// version (`/usr/lib/postgresql/<major>/bin`), or None when the server is not installed
/// (Debian package `postgresql`).
pub fn bin_dir() -> Option<PathBuf> {
    let mut best: Option<(u32, PathBuf)> = None;
    for e in std::fs::read_dir("/usr/lib/postgresql").ok()?.flatten() {
        let Ok(major) = e.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let bin = e.path().join("bin");
        if bin.join("initdb").is_file()
            && bin.join("pg_ctl").is_file()
            && best.as_ref().is_none_or(|b| b.0 < major)
        {
            best = Some((major, bin));
        }
    }
    best.map(|b| b.1)
}

/// Why tests needing a server cannot run here, or None when [`Postgres::start`] can work:
/// the binaries are missing (install Debian's `postgresql`), or we are root and there is no
/// `postgres` user to run them as.
pub fn unavailable() -> Option<String> {
    if bin_dir().is_none() {
        return Some(
            "PostgreSQL server not installed (/usr/lib/postgresql/*/bin/initdb; apt-get install postgresql)"
                .into(),
        );
    }
    if is_root() {
        let Some((uid, _)) = postgres_ids() else {
            return Some("running as root but there is no `postgres` user to run initdb/pg_ctl as".into());
        };
        if !uid_mapped(uid) {
            return Some(format!(
                "root inside a user namespace that does not map the `postgres` user (uid {uid}): \
                 initdb/pg_ctl refuse root and cannot switch user here (run the tests as real root)"
            ));
        }
    }
    None
}

/// Whether `uid` (of the parent namespace) is mapped into ours (`/proc/self/uid_map`), i.e.
/// `runuser -u` can switch to it. True when the map cannot be read.
fn uid_mapped(uid: u32) -> bool {
    let Ok(map) = std::fs::read_to_string("/proc/self/uid_map") else {
        return true;
    };
    map.lines().any(|l| {
        let f: Vec<u64> = l.split_whitespace().filter_map(|x| x.parse().ok()).collect();
        // inside, outside, count: `postgres_ids` reads /etc/passwd, i.e. the outside id.
        f.len() == 3 && (f[1]..f[1] + f[2]).contains(&(uid as u64))
    })
}

/// `psql` to use: the server's own when installed, else the one on PATH.
pub fn psql_bin() -> PathBuf {
    bin_dir()
        .map(|b| b.join("psql"))
        .filter(|p| p.is_file())
        .unwrap_or_else(|| PathBuf::from("psql"))
}

fn is_root() -> bool {
    // SAFETY: geteuid cannot fail.
    unsafe { libc::geteuid() == 0 }
}

/// uid and gid of the `postgres` user.
fn postgres_ids() -> Option<(u32, u32)> {
    let name = std::ffi::CString::new("postgres").ok()?;
    // SAFETY: getpwnam returns a pointer to static storage or null; read at once.
    let pw = unsafe { libc::getpwnam(name.as_ptr()) };
    if pw.is_null() {
        return None;
    }
    // SAFETY: non-null pointer from getpwnam.
    unsafe { Some(((*pw).pw_uid, (*pw).pw_gid)) }
}

/// A running PostgreSQL server; stopped (immediate mode) on drop. The data stays in `DIR/pgdata`
/// (the caller removes `DIR`).
pub struct Postgres {
    host: IpAddr,
    port: u16,
    data: PathBuf,
    socket_dir: PathBuf,
    log: PathBuf,
    bin: PathBuf,
    /// A socket directory made under /tmp (removed on drop) when `DIR` is too deep.
    tmp_socket_dir: bool,
}

impl Postgres {
    /// Initializes a cluster in `dir/pgdata` (`dir` is created when missing) and starts it on a
    /// free TCP port of `listen`; returns once it accepts connections (`pg_ctl -w`, 60 s).
    ///
    /// Authentication: trust for every local and TCP connection (the server only listens on
    /// `listen`, inside the test's private network namespace). Superuser `postgres`, database
    /// `postgres`. Tuned for tests: `fsync=off`, `synchronous_commit=off`,
    /// `full_page_writes=off`.
    ///
    /// Errors: binaries missing ([`unavailable`] says why), `initdb` failing (its output), the
    /// server not starting (the tail of `dir/postgres.log`).
    pub fn start(dir: &Path, listen: IpAddr) -> anyhow::Result<Postgres> {
        Postgres::start_on(dir, listen, None)
    }

    /// [`Postgres::start`] on TCP port `fixed_port` of `listen` when given (an error when it is
    /// taken), else on a free one.
    pub fn start_on(dir: &Path, listen: IpAddr, fixed_port: Option<u16>) -> anyhow::Result<Postgres> {
        if let Some(why) = unavailable() {
            bail!("{why}");
        }
        let bin = bin_dir().expect("checked by unavailable()");
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        let dir = dir.canonicalize()?;
        let data = dir.join("pgdata");
        let log = dir.join("postgres.log");
        let mut socket_dir = dir.join("pgsock");
        let mut tmp_socket_dir = false;
        // sun_path holds 108 bytes; the socket is SOCKDIR/.s.PGSQL.NNNNN (+18).
        if socket_dir.as_os_str().len() > 80 {
            socket_dir = PathBuf::from(format!("/tmp/pgsock-{}-{}", std::process::id(), unique()));
            tmp_socket_dir = true;
        }
        std::fs::create_dir_all(&data)?;
        std::fs::create_dir_all(&socket_dir)?;
        std::fs::set_permissions(&data, std::fs::Permissions::from_mode(0o700))?;
        std::fs::File::create(&log)?;
        let root = is_root();
        if root {
            let (uid, gid) = postgres_ids().expect("checked by unavailable()");
            for p in [&data, &socket_dir, &log] {
                std::os::unix::fs::chown(p, Some(uid), Some(gid))
                    .with_context(|| format!("chown postgres {}", p.display()))?;
            }
            // The server must be able to walk down to its data directory.
            for anc in data.ancestors().skip(1) {
                let meta = std::fs::metadata(anc)?;
                let mode = meta.permissions().mode();
                if mode & 0o001 == 0 {
                    std::fs::set_permissions(anc, std::fs::Permissions::from_mode(mode | 0o001))
                        .with_context(|| format!("chmod o+x {}", anc.display()))?;
                }
            }
        }
        let mut pg = Postgres {
            host: listen,
            port: 0,
            data,
            socket_dir,
            log,
            bin,
            tmp_socket_dir,
        };
        pg.init_data().context("initializing the data directory")?;
        // A free port now; taken by someone else before the server binds it → try again.
        let mut last_err = None;
        for _ in 0..5 {
            let port = match fixed_port {
                Some(p) => p,
                None => std::net::TcpListener::bind((listen, 0))
                    .with_context(|| format!("no free port on {listen}"))?
                    .local_addr()?
                    .port(),
            };
            pg.port = port;
            let opts = format!(
                "-c listen_addresses={} -p {port} -k {} -c fsync=off -c synchronous_commit=off \
                 -c full_page_writes=off -c max_connections=50 -c shared_buffers=16MB",
                listen,
                pg.socket_dir.display()
            );
            let out = pg
                .cmd("pg_ctl")
                .arg("-D")
                .arg(&pg.data)
                .arg("-l")
                .arg(&pg.log)
                .args(["-w", "-t", "60", "-o", &opts, "start"])
                .stdin(Stdio::null())
                .output()
                .context("running pg_ctl start")?;
            if out.status.success() {
                return Ok(pg);
            }
            let tail = pg.log_tail(30);
            last_err = Some(format!(
                "pg_ctl start failed ({}): {}{}\n--- {} (tail) ---\n{tail}",
                out.status,
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr),
                pg.log.display()
            ));
            if fixed_port.is_some()
                || !tail.contains("could not bind") && !tail.contains("Address already in use")
            {
                break;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        pg.port = 0; // nothing to stop
        bail!("{}", last_err.unwrap_or_default())
    }

    /// A command running `BIN/<prog>`, through `runuser -u postgres --` when root.
    fn cmd(&self, prog: &str) -> Command {
        let path = self.bin.join(prog);
        if is_root() {
            let mut c = Command::new("runuser");
            c.args(["-u", "postgres", "--"]).arg(path);
            c
        } else {
            Command::new(path)
        }
    }

    /// Runs `initdb` into `dir` (trust auth, superuser `postgres`, UTF8, C locale, no fsync) and
    /// opens TCP to trust (the server listens only on its `listen` address, inside the test's
    /// own network namespace).
    fn initdb(&self, dir: &Path) -> anyhow::Result<()> {
        let out = self
            .cmd("initdb")
            .arg("-D")
            .arg(dir)
            .args([
                "--no-sync",
                "--wal-segsize=1",
                "-U",
                "postgres",
                "--auth=trust",
                "-E",
                "UTF8",
                "--locale=C",
            ])
            .output()
            .context("running initdb")?;
        if !out.status.success() {
            bail!(
                "initdb failed ({}):\n{}{}",
                out.status,
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
        }
        use std::io::Write;
        let mut hba = std::fs::OpenOptions::new()
            .append(true)
            .open(dir.join("pg_hba.conf"))?;
        writeln!(hba, "host all all 0.0.0.0/0 trust\nhost all all ::/0 trust")?;
        Ok(())
    }

    /// Fills `self.data` with a fresh cluster: a copy (`cp -a`) of a template made once by
    /// [`Postgres::initdb`] in `$TMPDIR/agent-day2-sim-pgdata-<major>-<euid>` and shared by every
    /// test process (initdb takes about 2 s, the copy a fraction of that). The template appears
    /// by an atomic rename, so a half-made one is never used.
    fn init_data(&self) -> anyhow::Result<()> {
        let major = self
            .bin
            .parent()
            .and_then(|p| p.file_name())
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        // SAFETY: geteuid cannot fail.
        let euid = unsafe { libc::geteuid() };
        let template = std::env::temp_dir().join(format!("agent-day2-sim-pgdata-v2-{major}-{euid}"));
        if !template.join("PG_VERSION").is_file() {
            let tmp = std::env::temp_dir().join(format!(
                "agent-day2-sim-pgdata-v2-{major}-{euid}.tmp-{}-{}",
                std::process::id(),
                unique()
            ));
            std::fs::create_dir(&tmp)?;
            std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(0o700))?;
            if is_root() {
                let (uid, gid) = postgres_ids().expect("checked by unavailable()");
                std::os::unix::fs::chown(&tmp, Some(uid), Some(gid))?;
            }
            let made = self.initdb(&tmp);
            if made.is_err() || std::fs::rename(&tmp, &template).is_err() {
                // Failed, or another process made the template first.
                let _ = std::fs::remove_dir_all(&tmp);
            }
            made?;
        }
        let out = Command::new("cp")
            .arg("-a")
            .arg(template.join("."))
            .arg(&self.data)
            .output()
            .context("running cp")?;
        if !out.status.success() {
            bail!(
                "copying {} to {}: {}",
                template.display(),
                self.data.display(),
                String::from_utf8_lossy(&out.stderr).trim()
            );
        }
        Ok(())
    }

    /// The last `n` lines of the server log.
    pub fn log_tail(&self, n: usize) -> String {
        let s = std::fs::read_to_string(&self.log).unwrap_or_default();
        let lines: Vec<&str> = s.lines().collect();
        lines[lines.len().saturating_sub(n)..].join("\n")
    }

    /// TCP port the server listens on.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// Address the server listens on (the `listen` given to [`Postgres::start`]).
    pub fn host(&self) -> IpAddr {
        self.host
    }

    /// Directory of the server's unix socket (for `psql -h DIR`).
    pub fn socket_dir(&self) -> &Path {
        &self.socket_dir
    }

    /// `postgres://postgres@HOST:PORT/<db>` (IPv6 hosts in brackets): the superuser, no
    /// password (trust).
    pub fn url(&self, db: &str) -> String {
        self.url_as("postgres", db)
    }

    /// `postgres://<user>@HOST:PORT/<db>`, e.g. `url_as("admin", "installer")`.
    pub fn url_as(&self, user: &str, db: &str) -> String {
        let host = match self.host {
            IpAddr::V6(a) => format!("[{a}]"),
            IpAddr::V4(a) => a.to_string(),
        };
        format!("postgres://{user}@{host}:{}/{db}", self.port)
    }

    /// Runs SQL as the superuser on database `db` (`psql -X -q -v ON_ERROR_STOP=1`) and returns
    /// its unaligned, tuples-only output (`-At`). Errors carry psql's stderr.
    pub fn sql(&self, db: &str, sql: &str) -> anyhow::Result<String> {
        psql(&self.url(db), sql)
    }

    /// Creates role `admin` (LOGIN, password `admin`) and role `owner` (LOGIN) when missing,
    /// then database `name` owned by `owner` (UTF8, template0). Errors: the database exists, or
    /// psql's error.
    pub fn create_db(&self, name: &str, owner: &str) -> anyhow::Result<()> {
        for role in ["admin", owner] {
            let q = sql_literal(role);
            let exists = self.sql("postgres", &format!("SELECT 1 FROM pg_roles WHERE rolname = {q}"))?;
            if exists.trim() != "1" {
                let pw = if role == "admin" { " PASSWORD 'admin'" } else { "" };
                self.sql("postgres", &format!("CREATE ROLE {} LOGIN{pw}", sql_ident(role)))?;
            }
        }
        self.sql(
            "postgres",
            &format!(
                "CREATE DATABASE {} OWNER {} ENCODING 'UTF8' TEMPLATE template0",
                sql_ident(name),
                sql_ident(owner)
            ),
        )?;
        Ok(())
    }
}

impl Drop for Postgres {
    fn drop(&mut self) {
        if self.port != 0 {
            let _ = self
                .cmd("pg_ctl")
                .arg("-D")
                .arg(&self.data)
                .args(["-m", "immediate", "-w", "-t", "20", "stop"])
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status();
        }
        if self.tmp_socket_dir {
            let _ = std::fs::remove_dir_all(&self.socket_dir);
        }
    }
}

fn unique() -> u128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0)
}

/// Runs `sql` with `psql -X -q -At -v ON_ERROR_STOP=1 -d <url>` (SQL on stdin, so any size) and
/// returns stdout. Errors carry psql's stderr.
pub fn psql(url: &str, sql: &str) -> anyhow::Result<String> {
    psql_bytes(url, sql.as_bytes())
}

/// Like [`psql`] with raw bytes on stdin (e.g. COPY data).
pub fn psql_bytes(url: &str, input: &[u8]) -> anyhow::Result<String> {
    use std::io::Write;
    let mut child = Command::new(psql_bin())
        .args(["-X", "-q", "-At", "-v", "ON_ERROR_STOP=1", "-d", url, "-f", "-"])
        .env("PGCONNECT_TIMEOUT", "10")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .context("running psql (install postgresql-client)")?;
    let mut stdin = child.stdin.take().expect("stdin");
    let input = input.to_vec();
    let writer = std::thread::spawn(move || {
        let _ = stdin.write_all(&input);
    });
    let out = child.wait_with_output()?;
    let _ = writer.join();
    if !out.status.success() {
        bail!(
            "psql {url} failed ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// `'text'` with quotes doubled (a SQL string literal).
pub fn sql_literal(s: &str) -> String {
    format!("'{}'", s.replace('\'', "''"))
}

/// `"name"` with double quotes doubled (a SQL identifier).
pub fn sql_ident(s: &str) -> String {
    format!("\"{}\"", s.replace('"', "\"\""))
}
