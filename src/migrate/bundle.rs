//! The migration bundle: a directory written by `migrate export` and read by `import`, `wait`
//! and `status` (layout and manifest: docs/migrate.md "The migration contract", "Bundle").
//!
//! ```text
//! manifest.json           BundleManifest
//! manifest.json.sha256    lowercase hex sha256 of manifest.json + "\n" (the bundle checksum)
//! db/dump.sql, api/…, credentials/…, files/…, manifests/…, logs/…, crs/crs.json
//! ```
//!
//! Writing ([`BundleWriter`]): a sibling temporary directory `.<name>.tmp-<pid>-<n>` created with
//! mode 0700 (never chmod-ed afterwards), every file created new with mode 0600 and hashed while
//! it is written (constant memory), fsync-ed; the manifest files last; then the directory is
//! renamed to the target with `renameat2(RENAME_NOREPLACE)` ([`crate::iso::output::rename_noreplace`]),
//! so the target name only ever shows a complete bundle. The temporary directory is registered
//! with [`crate::tempfiles`] (Ctrl-C removes it) and removed when the writer is dropped
//! without [`BundleWriter::commit`].
//!
//! Reading ([`Bundle::open`]): the manifest against its checksum, the format string, every
//! listed file's size and sha256, and no unlisted file; any mismatch is
//! [`Error::InvalidInput`] (exit 3) naming the file.

use std::collections::{BTreeMap, BTreeSet};
use std::fs::{DirBuilder, File, OpenOptions};
use std::io::{self, Read, Write};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::{Component, Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::error::Error;

/// The `format` string of every bundle this version writes and reads.
pub const FORMAT: &str = "agent-day2.openshift.io/migration-bundle/v1";
/// The manifest file (relative to the bundle directory).
pub const MANIFEST: &str = "manifest.json";
/// The checksum file: lowercase hex sha256 of [`MANIFEST`] and a newline.
pub const MANIFEST_SHA256: &str = "manifest.json.sha256";
/// Mode of the bundle directory and its subdirectories.
pub const DIR_MODE: u32 = 0o700;
/// Mode of every file in the bundle.
pub const FILE_MODE: u32 = 0o600;
/// Largest manifest.json [`Bundle::open`] reads (a manifest lists a few hundred files).
const MAX_MANIFEST: u64 = 64 << 20;

/// `manifest.json` (contract "Bundle").
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BundleManifest {
    /// Always [`FORMAT`].
    pub format: String,
    /// When the export finished, RFC 3339 UTC.
    pub created: String,
    /// The plugin version that wrote it.
    pub tool_version: String,
    /// Where the data came from.
    pub source: BundleSource,
    /// The exported cluster.
    pub cluster: BundleCluster,
    /// Counts that import and status compare against.
    pub counts: BundleCounts,
    /// Every file of the bundle except the two manifest files, sorted by path.
    pub files: Vec<BundleFileEntry>,
}

/// `manifest.source`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct BundleSource {
    /// Node 0's service as given to `--from`.
    pub url: String,
    /// How the dump was made: `db-url`, `db-container` or `db-dump`.
    pub db_source: String,
    /// The greatest `migrations.id` of the dump (longest, then greatest as text). Kept for
    /// readers of older bundles and as a cross-check of the dump; it is no version order:
    /// assisted-service's id `21211125182200` (a typo for 2021) is the greatest on every real
    /// database since late 2021 (docs/migrate.md "Node 0 and cluster 0"), so import compares
    /// [`Self::migration_ids`] and the dump's columns instead.
    pub schema_version: String,
    /// Every `migrations.id` of the dump (gormigrate's applied migrations of node 0's
    /// assisted-service), sorted and unique. Empty in bundles of earlier versions: import then
    /// takes the dump's ids as they are.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub migration_ids: Vec<String>,
    /// How crs/crs.json was made: [`super::copied::COPIED`] (option 1: copied from node 0's
    /// API server, `export --from-kube`); empty in option 2's bundles (recreated from REST).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub crs: String,
}

/// `manifest.cluster`: the assisted cluster as its REST API showed it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct BundleCluster {
    /// Assisted cluster id (uuid).
    pub id: String,
    /// Cluster name as the service holds it (the CR names use its DNS-1123 form).
    pub name: String,
    /// `base_dns_domain`.
    pub base_domain: String,
    /// `openshift_cluster_id` (ClusterVersion spec.clusterID); empty when unknown.
    pub openshift_cluster_id: String,
    /// `openshift_version`.
    pub openshift_version: String,
    /// `ocp_release_image`.
    pub release_image: String,
    /// The infra-envs of the cluster.
    pub infra_env_ids: Vec<String>,
    /// The hosts of the cluster.
    pub host_ids: Vec<String>,
}

/// `manifest.counts`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct BundleCounts {
    /// Hosts of the cluster (REST; equal to the dump's `hosts` rows of the cluster).
    pub hosts: u64,
    /// Infra-envs exported.
    pub infra_envs: u64,
    /// Events exported over REST (cluster and infra-env events).
    pub events: u64,
    /// NMStateConfig CRs in crs/crs.json.
    pub nmstate_configs: u64,
    /// Rows per table in db/dump.sql (table name without the `public.` schema).
    pub rows: BTreeMap<String, u64>,
}

/// One entry of `manifest.files`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BundleFileEntry {
    /// Path relative to the bundle directory, `/`-separated.
    pub path: String,
    /// Lowercase hex sha256 of the content.
    pub sha256: String,
    /// Size in bytes.
    pub size: u64,
}

fn bundle_err(rel: &str, message: impl Into<String>) -> Error {
    Error::InvalidInput {
        field: format!("bundle file {rel}"),
        message: message.into(),
    }
}

fn io_err(path: &Path, source: io::Error) -> Error {
    Error::Io {
        path: path.display().to_string(),
        source,
    }
}

/// Checks that `rel` is a relative `/`-separated path of plain components (no `..`, `.`,
/// empty or absolute parts, no NUL, no backslash), as every bundle path must be. Names from
/// node 0's API (ids, manifest folders and file names) pass through here before they become
/// paths. Errors: [`Error::InvalidInput`] naming `rel`.
pub fn check_rel_path(rel: &str) -> Result<(), Error> {
    let bad = |why: &str| bundle_err(rel, format!("not a plain relative path ({why})"));
    if rel.is_empty() {
        return Err(bad("empty"));
    }
    if rel.contains('\0') || rel.contains('\\') {
        return Err(bad("NUL or backslash"));
    }
    // Names come from node 0 (manifest file names, ids): a newline or escape sequence in a
    // file name would forge lines of the listings and messages that show it.
    if rel.chars().any(char::is_control) {
        return Err(bad("a control character"));
    }
    for part in rel.split('/') {
        if part.is_empty() || part == "." || part == ".." {
            return Err(bad("empty, `.` or `..` component"));
        }
    }
    if Path::new(rel)
        .components()
        .any(|c| !matches!(c, Component::Normal(_)))
    {
        return Err(bad("not normal components"));
    }
    Ok(())
}

/// Whether `name` can be one path component of a bundle path (see [`check_rel_path`]).
pub fn is_safe_component(name: &str) -> bool {
    !name.contains('/') && check_rel_path(name).is_ok()
}

static COUNTER: AtomicU32 = AtomicU32::new(0);

/// A bundle being written (see the module doc). Files are added with [`BundleWriter::create_file`]
/// (streaming) or [`BundleWriter::write_file`]; [`BundleWriter::commit`] writes the manifest and
/// moves the directory into place. Dropping it uncommitted removes the temporary directory.
#[derive(Debug)]
pub struct BundleWriter {
    tmp: PathBuf,
    dest: PathBuf,
    files: BTreeMap<String, BundleFileEntry>,
    dirs: BTreeSet<PathBuf>,
    done: bool,
}

impl BundleWriter {
    /// Starts a bundle that will be `dest`. `dest` must not exist (checked here, and again
    /// atomically at the rename). Errors: [`Error::InvalidInput`] (exit 3, as add-nodes' existing output) when `dest` exists; [`Error::Io`]
    /// naming the temporary directory (missing or read-only parent).
    pub fn create(dest: &Path) -> Result<BundleWriter, Error> {
        if dest.symlink_metadata().is_ok() {
            return Err(Error::InvalidInput {
                field: format!("--out {}", dest.display()),
                message: "already exists; export writes a new directory and never replaces one: \
                          give a path that does not exist"
                    .into(),
            });
        }
        let name = dest
            .file_name()
            .ok_or_else(|| Error::Usage(format!("--out {}: the path has no file name", dest.display())))?;
        let parent = match dest.parent() {
            Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
            _ => PathBuf::from("."),
        };
        let tmp = parent.join(format!(
            ".{}.tmp-{}-{}",
            name.to_string_lossy(),
            std::process::id(),
            COUNTER.fetch_add(1, Ordering::Relaxed)
        ));
        // Mode 0700 from the start (the umask can only remove bits); never chmod-ed.
        DirBuilder::new()
            .mode(DIR_MODE)
            .create(&tmp)
            .map_err(|e| io_err(&tmp, e))?;
        crate::tempfiles::register(&tmp);
        Ok(BundleWriter {
            tmp,
            dest: dest.to_path_buf(),
            files: BTreeMap::new(),
            dirs: BTreeSet::new(),
            done: false,
        })
    }

    /// The temporary directory being written.
    pub fn temp_path(&self) -> &Path {
        &self.tmp
    }

    /// The final path.
    pub fn dest(&self) -> &Path {
        &self.dest
    }

    /// The files written so far (path → entry).
    pub fn files(&self) -> &BTreeMap<String, BundleFileEntry> {
        &self.files
    }

    /// The full temporary path of a file already written (e.g. to read the dump back).
    pub fn written_path(&self, rel: &str) -> Option<PathBuf> {
        self.files.get(rel).map(|_| self.tmp.join(rel))
    }

    fn make_dirs(&mut self, rel: &str) -> Result<(), Error> {
        let mut cur = self.tmp.clone();
        let parts: Vec<&str> = rel.split('/').collect();
        for p in &parts[..parts.len() - 1] {
            cur.push(p);
            if self.dirs.contains(&cur) {
                continue;
            }
            match DirBuilder::new().mode(DIR_MODE).create(&cur) {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists && cur.is_dir() => {}
                Err(e) => return Err(io_err(&cur, e)),
            }
            self.dirs.insert(cur.clone());
        }
        Ok(())
    }

    /// Creates the bundle file `rel` (mode 0600, must be new) and returns a writer that hashes
    /// as it writes; call [`BundleFile::finish`] to record it. Errors: [`Error::InvalidInput`]
    /// for a path that is not plain or is a manifest file, [`Error::Io`].
    pub fn create_file(&mut self, rel: &str) -> Result<BundleFile<'_>, Error> {
        check_rel_path(rel)?;
        if rel == MANIFEST || rel == MANIFEST_SHA256 || self.files.contains_key(rel) {
            return Err(bundle_err(rel, "written twice"));
        }
        self.make_dirs(rel)?;
        let path = self.tmp.join(rel);
        let file = OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(FILE_MODE)
            .open(&path)
            .map_err(|e| io_err(&path, e))?;
        Ok(BundleFile {
            writer: self,
            rel: rel.to_string(),
            path,
            file,
            hasher: Sha256::new(),
            size: 0,
        })
    }

    /// Writes `bytes` as the bundle file `rel` (see [`BundleWriter::create_file`]).
    pub fn write_file(&mut self, rel: &str, bytes: &[u8]) -> Result<BundleFileEntry, Error> {
        let mut f = self.create_file(rel)?;
        f.write_all(bytes).map_err(|e| io_err(&f.path.clone(), e))?;
        f.finish()
    }

    /// Copies `src` (a reader, streamed in constant memory) into the bundle file `rel`.
    pub fn copy_file(&mut self, rel: &str, src: &mut dyn Read) -> Result<BundleFileEntry, Error> {
        let mut f = self.create_file(rel)?;
        let p = f.path.clone();
        io::copy(src, &mut f).map_err(|e| io_err(&p, e))?;
        f.finish()
    }

    /// Writes manifest.json (with `manifest.files` replaced by the files written, sorted) and
    /// manifest.json.sha256, fsyncs every directory, and renames the temporary directory to
    /// the destination without replacing anything. Returns the bundle checksum (hex sha256 of
    /// manifest.json). Errors: [`Error::InvalidInput`] when the destination appeared meanwhile (the
    /// temporary directory is removed); [`Error::Io`].
    pub fn commit(mut self, mut manifest: BundleManifest) -> Result<String, Error> {
        manifest.files = self.files.values().cloned().collect();
        let json = serde_json::to_vec_pretty(&manifest)
            .map_err(|e| Error::Unexpected(format!("cannot serialize the bundle manifest: {e}")))?;
        let checksum = hex::encode(Sha256::digest(&json));
        for (name, bytes) in [
            (MANIFEST, json.as_slice()),
            (MANIFEST_SHA256, format!("{checksum}\n").as_bytes()),
        ] {
            let path = self.tmp.join(name);
            let mut f = OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(FILE_MODE)
                .open(&path)
                .map_err(|e| io_err(&path, e))?;
            f.write_all(bytes).map_err(|e| io_err(&path, e))?;
            f.sync_all().map_err(|e| io_err(&path, e))?;
        }
        // Directory entries must survive a crash too: deepest first, then the top.
        for d in self.dirs.iter().rev().chain(std::iter::once(&self.tmp)) {
            File::open(d)
                .and_then(|f| f.sync_all())
                .map_err(|e| io_err(d, e))?;
        }
        match crate::iso::output::rename_noreplace(&self.tmp, &self.dest) {
            Ok(()) => {}
            Err(e)
                if e.kind() == io::ErrorKind::AlreadyExists || e.raw_os_error() == Some(libc::ENOTEMPTY) =>
            {
                return Err(Error::InvalidInput {
                    field: format!("--out {}", self.dest.display()),
                    message: "appeared while the bundle was written; nothing was replaced: give a \
                              path that does not exist"
                        .into(),
                });
            }
            Err(e) => return Err(io_err(&self.dest, e)),
        }
        self.done = true;
        crate::tempfiles::unregister(&self.tmp);
        if let Some(parent) = self.dest.parent() {
            let parent = if parent.as_os_str().is_empty() {
                Path::new(".")
            } else {
                parent
            };
            if let Ok(d) = File::open(parent) {
                let _ = d.sync_all();
            }
        }
        Ok(checksum)
    }
}

impl Drop for BundleWriter {
    fn drop(&mut self) {
        if !self.done {
            let _ = std::fs::remove_dir_all(&self.tmp);
            crate::tempfiles::unregister(&self.tmp);
        }
    }
}

/// One bundle file being written: [`Write`] hashes and counts; [`BundleFile::finish`] fsyncs
/// and records it. Dropped unfinished, the file stays unlisted (and goes with the directory).
pub struct BundleFile<'a> {
    writer: &'a mut BundleWriter,
    rel: String,
    path: PathBuf,
    file: File,
    hasher: Sha256,
    size: u64,
}

impl BundleFile<'_> {
    /// The temporary path of this file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Bytes written so far.
    pub fn size(&self) -> u64 {
        self.size
    }

    /// fsyncs the file and records its entry (path, sha256, size).
    pub fn finish(self) -> Result<BundleFileEntry, Error> {
        self.file.sync_all().map_err(|e| io_err(&self.path, e))?;
        let entry = BundleFileEntry {
            path: self.rel.clone(),
            sha256: hex::encode(self.hasher.finalize()),
            size: self.size,
        };
        self.writer.files.insert(self.rel, entry.clone());
        Ok(entry)
    }
}

impl Write for BundleFile<'_> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let n = self.file.write(buf)?;
        self.hasher.update(&buf[..n]);
        self.size += n as u64;
        Ok(n)
    }
    fn flush(&mut self) -> io::Result<()> {
        self.file.flush()
    }
}

/// A verified bundle (see [`Bundle::open`]).
#[derive(Debug, Clone)]
pub struct Bundle {
    /// The bundle directory.
    pub dir: PathBuf,
    /// Its manifest.
    pub manifest: BundleManifest,
    /// Lowercase hex sha256 of manifest.json (= manifest.json.sha256 without the newline).
    pub checksum: String,
}

/// sha256 and size of a reader, streamed.
fn hash_reader(r: &mut dyn Read) -> io::Result<(String, u64)> {
    let mut h = Sha256::new();
    let mut buf = vec![0u8; 1 << 16];
    let mut n = 0u64;
    loop {
        let k = r.read(&mut buf)?;
        if k == 0 {
            break;
        }
        h.update(&buf[..k]);
        n += k as u64;
    }
    Ok((hex::encode(h.finalize()), n))
}

/// Opens a bundle file without following a symlink at its last component; it must be a
/// regular file.
fn open_regular(dir: &Path, rel: &str) -> Result<(File, std::fs::Metadata), Error> {
    let path = dir.join(rel);
    let f = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW)
        .open(&path)
        .map_err(|e| match e.kind() {
            io::ErrorKind::NotFound => bundle_err(rel, "missing: the bundle is incomplete; export again"),
            _ if e.raw_os_error() == Some(libc::ELOOP) => {
                bundle_err(rel, "is a symbolic link; a bundle holds regular files only")
            }
            _ => bundle_err(rel, format!("cannot read it: {e}")),
        })?;
    let md = f
        .metadata()
        .map_err(|e| bundle_err(rel, format!("cannot read it: {e}")))?;
    if !md.is_file() {
        return Err(bundle_err(rel, "is not a regular file"));
    }
    Ok((f, md))
}

/// Every entry under `dir` (relative paths; directories as well as files), not following symlinks.
fn walk(dir: &Path, prefix: &str, out: &mut Vec<(String, std::fs::FileType)>) -> io::Result<()> {
    for e in std::fs::read_dir(dir)? {
        let e = e?;
        let name = e.file_name().to_string_lossy().into_owned();
        let rel = if prefix.is_empty() {
            name
        } else {
            format!("{prefix}/{name}")
        };
        let ft = e.file_type()?;
        out.push((rel.clone(), ft));
        if ft.is_dir() {
            walk(&e.path(), &rel, out)?;
        }
    }
    Ok(())
}

impl Bundle {
    /// Opens and verifies the bundle at `dir`: manifest.json against manifest.json.sha256, the
    /// format string, every listed file's size and sha256 (streamed), no unlisted file.
    /// Files or directories readable by group/other give a `warning:` line (the bundle holds
    /// credentials), not an error.
    ///
    /// Errors: [`Error::InvalidInput`] (exit 3) naming the file, e.g. `bundle file db/dump.sql:
    /// sha256 mismatch: the bundle is corrupt or was edited; export again`; a missing or
    /// unreadable directory is [`Error::InvalidInput`] too (field `bundle <dir>`).
    pub fn open(dir: &Path) -> Result<Bundle, Error> {
        let md = std::fs::metadata(dir).map_err(|e| Error::InvalidInput {
            field: format!("bundle {}", dir.display()),
            message: format!(
                "cannot open it: {}; give the directory written by `migrate export`",
                crate::files::io_reason(&e)
            ),
        })?;
        if !md.is_dir() {
            return Err(Error::InvalidInput {
                field: format!("bundle {}", dir.display()),
                message: "not a directory; give the directory written by `migrate export`".into(),
            });
        }
        let (f, _) = open_regular(dir, MANIFEST_SHA256)?;
        let mut want = String::new();
        f.take(256)
            .read_to_string(&mut want)
            .map_err(|e| bundle_err(MANIFEST_SHA256, format!("cannot read it: {e}")))?;
        let want = want.trim_end_matches('\n');
        if want.len() != 64
            || !want
                .bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
        {
            return Err(bundle_err(
                MANIFEST_SHA256,
                "is not a lowercase hex sha256: the bundle is corrupt or was edited; export again",
            ));
        }
        let (f, md) = open_regular(dir, MANIFEST)?;
        if md.len() > MAX_MANIFEST {
            return Err(bundle_err(MANIFEST, format!("larger than {MAX_MANIFEST} bytes")));
        }
        let mut json = Vec::new();
        f.take(MAX_MANIFEST + 1)
            .read_to_end(&mut json)
            .map_err(|e| bundle_err(MANIFEST, format!("cannot read it: {e}")))?;
        let checksum = hex::encode(Sha256::digest(&json));
        if checksum != want {
            return Err(bundle_err(
                MANIFEST,
                "sha256 mismatch with manifest.json.sha256: the bundle is corrupt or was edited; export again",
            ));
        }
        let manifest: BundleManifest = serde_json::from_slice(&json).map_err(|e| {
            bundle_err(
                MANIFEST,
                format!("not a bundle manifest ({e}); give a bundle written by `migrate export`"),
            )
        })?;
        if manifest.format != FORMAT {
            return Err(bundle_err(
                MANIFEST,
                format!(
                    "format {:?} is not {FORMAT:?}: written by another version of agent-day2; \
                     export again with this version",
                    manifest.format
                ),
            ));
        }
        let mut listed = BTreeSet::new();
        for e in &manifest.files {
            check_rel_path(&e.path)?;
            if e.path == MANIFEST || e.path == MANIFEST_SHA256 || !listed.insert(e.path.clone()) {
                return Err(bundle_err(&e.path, "listed twice in manifest.json"));
            }
        }
        // Unlisted entries, symlinks and group/other-readable entries.
        let mut entries = Vec::new();
        walk(dir, "", &mut entries).map_err(|e| Error::InvalidInput {
            field: format!("bundle {}", dir.display()),
            message: format!("cannot list it: {e}"),
        })?;
        let mut loose = Vec::new();
        for (rel, ft) in &entries {
            if ft.is_dir() {
                continue;
            }
            if ft.is_symlink() {
                return Err(bundle_err(
                    rel,
                    "is a symbolic link; a bundle holds regular files only",
                ));
            }
            if rel != MANIFEST && rel != MANIFEST_SHA256 && !listed.contains(rel) {
                return Err(bundle_err(
                    rel,
                    "is not listed in manifest.json: the bundle was edited; export again",
                ));
            }
        }
        for (rel, _) in entries
            .iter()
            .map(|(r, t)| (r.as_str(), t))
            .chain(std::iter::once(("", &md.file_type())))
        {
            let p = if rel.is_empty() {
                dir.to_path_buf()
            } else {
                dir.join(rel)
            };
            if let Ok(m) = std::fs::symlink_metadata(&p) {
                if m.permissions().mode() & 0o077 != 0 {
                    loose.push(if rel.is_empty() {
                        ".".to_string()
                    } else {
                        rel.to_string()
                    });
                }
            }
        }
        if !loose.is_empty() {
            crate::say!(
                "warning: bundle {}: {} can be read by other users (the bundle holds credentials): \
                 run `chmod -R go-rwx {}`",
                dir.display(),
                loose.join(", "),
                dir.display()
            );
        }
        for e in &manifest.files {
            let (mut f, md) = open_regular(dir, &e.path)?;
            if md.len() != e.size {
                return Err(bundle_err(
                    &e.path,
                    format!(
                        "size {} differs from the manifest's {}: the bundle is corrupt or was edited; export again",
                        md.len(),
                        e.size
                    ),
                ));
            }
            let (sum, n) =
                hash_reader(&mut f).map_err(|err| bundle_err(&e.path, format!("cannot read it: {err}")))?;
            if n != e.size || sum != e.sha256 {
                return Err(bundle_err(
                    &e.path,
                    "sha256 mismatch: the bundle is corrupt or was edited; export again",
                ));
            }
        }
        Ok(Bundle {
            dir: dir.to_path_buf(),
            manifest,
            checksum,
        })
    }

    /// The bundle checksum (lowercase hex sha256 of manifest.json): what the completion record
    /// names and `wait` compares.
    pub fn checksum(&self) -> &str {
        &self.checksum
    }

    /// The manifest entry of `rel`, if listed.
    pub fn entry(&self, rel: &str) -> Option<&BundleFileEntry> {
        self.manifest.files.iter().find(|e| e.path == rel)
    }

    /// The full path of the listed file `rel`. Errors: [`Error::InvalidInput`] when not listed.
    pub fn path(&self, rel: &str) -> Result<PathBuf, Error> {
        self.entry(rel)
            .map(|_| self.dir.join(rel))
            .ok_or_else(|| bundle_err(rel, "not in this bundle"))
    }

    /// Opens the listed file `rel` for streaming (e.g. db/dump.sql); its content was verified
    /// by [`Bundle::open`]. Errors: [`Error::InvalidInput`] when not listed or unreadable.
    pub fn open_file(&self, rel: &str) -> Result<File, Error> {
        self.path(rel)?;
        Ok(open_regular(&self.dir, rel)?.0)
    }

    /// Reads the listed file `rel` whole and checks it against the manifest again (it may have
    /// changed since [`Bundle::open`]). For the small files (JSON, credentials, crs/crs.json).
    /// Errors: [`Error::InvalidInput`] naming the file.
    pub fn read(&self, rel: &str) -> Result<Vec<u8>, Error> {
        let entry = self
            .entry(rel)
            .ok_or_else(|| bundle_err(rel, "not in this bundle"))?;
        let (f, _) = open_regular(&self.dir, rel)?;
        let mut v = Vec::with_capacity(entry.size as usize);
        f.take(entry.size + 1)
            .read_to_end(&mut v)
            .map_err(|e| bundle_err(rel, format!("cannot read it: {e}")))?;
        if v.len() as u64 != entry.size || hex::encode(Sha256::digest(&v)) != entry.sha256 {
            return Err(bundle_err(
                rel,
                "sha256 mismatch: the bundle is corrupt or was edited; export again",
            ));
        }
        Ok(v)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn manifest() -> BundleManifest {
        BundleManifest {
            format: FORMAT.into(),
            created: "2026-12-01T13:00:00Z".into(),
            tool_version: "0.1.0".into(),
            source: BundleSource {
                url: "http://192.168.111.20:8090".into(),
                db_source: "db-dump".into(),
                schema_version: "21211125182200".into(),
                migration_ids: vec!["20201019194303".into(), "21211125182200".into()],
                crs: String::new(),
            },
            cluster: BundleCluster {
                id: "c1".into(),
                name: "agent-cluster".into(),
                ..Default::default()
            },
            counts: BundleCounts::default(),
            files: vec![],
        }
    }

    fn mode(p: &Path) -> u32 {
        std::fs::symlink_metadata(p).unwrap().permissions().mode() & 0o777
    }

    fn write_bundle(dest: &Path) -> String {
        let mut w = BundleWriter::create(dest).unwrap();
        w.write_file("db/dump.sql", b"COPY public.x (a) FROM stdin;\n1\n\\.\n")
            .unwrap();
        let mut f = w.create_file("logs/c1/logs-all.tar").unwrap();
        for _ in 0..100 {
            f.write_all(&[7u8; 1000]).unwrap();
        }
        let e = f.finish().unwrap();
        assert_eq!(e.size, 100_000);
        assert_eq!(e.sha256, hex::encode(Sha256::digest(vec![7u8; 100_000])));
        w.commit(manifest()).unwrap()
    }

    #[test]
    fn written_bundle_has_private_modes_and_verifies() {
        let d = tempfile::tempdir().unwrap();
        let dest = d.path().join("b");
        let sum = write_bundle(&dest);
        assert_eq!(mode(&dest), 0o700);
        assert_eq!(mode(&dest.join("db")), 0o700);
        assert_eq!(mode(&dest.join("logs/c1")), 0o700);
        for f in [
            "manifest.json",
            "manifest.json.sha256",
            "db/dump.sql",
            "logs/c1/logs-all.tar",
        ] {
            assert_eq!(mode(&dest.join(f)), 0o600, "{f}");
        }
        assert_eq!(
            std::fs::read_to_string(dest.join(MANIFEST_SHA256)).unwrap(),
            format!("{sum}\n")
        );
        // Only the bundle is left: no temporary directory.
        assert_eq!(std::fs::read_dir(d.path()).unwrap().count(), 1);
        let b = Bundle::open(&dest).unwrap();
        assert_eq!(b.checksum(), sum);
        assert_eq!(
            b.manifest
                .files
                .iter()
                .map(|e| e.path.as_str())
                .collect::<Vec<_>>(),
            vec!["db/dump.sql", "logs/c1/logs-all.tar"]
        );
        assert_eq!(b.read("db/dump.sql").unwrap().len(), 35);
        assert!(b.read("nope").is_err());
        // Existing destination: refused before writing, and at commit.
        assert!(matches!(
            BundleWriter::create(&dest),
            Err(Error::InvalidInput { .. })
        ));
        let dest2 = d.path().join("c");
        let w = BundleWriter::create(&dest2).unwrap();
        std::fs::create_dir(&dest2).unwrap();
        let tmp = w.temp_path().to_path_buf();
        assert!(matches!(w.commit(manifest()), Err(Error::InvalidInput { .. })));
        assert!(!tmp.exists(), "temp dir removed after a refused commit");
    }

    #[test]
    fn migration_ids_round_trip_and_older_manifests_still_read() {
        let m = manifest();
        let v = serde_json::to_value(&m).unwrap();
        assert_eq!(
            v["source"]["migration_ids"],
            serde_json::json!(["20201019194303", "21211125182200"])
        );
        let back: BundleManifest = serde_json::from_value(v.clone()).unwrap();
        assert_eq!(back, m);
        // A manifest written before the field existed has none: read as empty.
        let mut old = v;
        old["source"].as_object_mut().unwrap().remove("migration_ids");
        let back: BundleManifest = serde_json::from_value(old).unwrap();
        assert!(back.source.migration_ids.is_empty());
        assert_eq!(back.source.schema_version, "21211125182200");
    }

    #[test]
    fn dropped_writer_leaves_nothing() {
        let d = tempfile::tempdir().unwrap();
        let dest = d.path().join("b");
        let mut w = BundleWriter::create(&dest).unwrap();
        w.write_file("api/clusters.json", b"[]").unwrap();
        let tmp = w.temp_path().to_path_buf();
        assert!(tmp.join("api/clusters.json").exists());
        assert_eq!(mode(&tmp), 0o700);
        drop(w);
        assert!(!tmp.exists() && !dest.exists());
        assert_eq!(std::fs::read_dir(d.path()).unwrap().count(), 0);
    }

    #[test]
    fn paths_from_the_wire_must_be_plain() {
        let d = tempfile::tempdir().unwrap();
        let mut w = BundleWriter::create(&d.path().join("b")).unwrap();
        for bad in [
            "../x",
            "/etc/passwd",
            "a//b",
            "a/./b",
            "a/../../b",
            "",
            "a\\b",
            "manifest.json",
        ] {
            assert!(w.create_file(bad).is_err(), "{bad}");
        }
        w.write_file("a/b", b"x").unwrap();
        assert!(w.write_file("a/b", b"y").is_err(), "twice");
        assert!(
            is_safe_component("openshift-x.yaml") && !is_safe_component("a/b") && !is_safe_component("..")
        );
        // Control characters (a newline forging a listing line, an escape sequence): refused.
        for bad in ["x\ny.yaml", "x\ry", "x\u{1b}[31m", "x\u{7f}", "x\u{85}"] {
            assert!(!is_safe_component(bad), "{bad:?}");
            let e = check_rel_path(&format!("manifests/c/{bad}")).unwrap_err();
            assert_eq!(e.exit_code(), 3);
            assert!(e.to_string().contains("control character"), "{e}");
        }
    }

    fn expect_invalid(dir: &Path, needle: &str) {
        match Bundle::open(dir) {
            Err(e @ Error::InvalidInput { .. }) => {
                assert_eq!(e.exit_code(), 3);
                assert!(e.to_string().contains(needle), "{e}");
            }
            other => panic!("expected InvalidInput with {needle}: {other:?}"),
        }
    }

    #[test]
    fn any_change_is_refused_naming_the_file() {
        let d = tempfile::tempdir().unwrap();
        let dest = d.path().join("b");
        write_bundle(&dest);
        // One changed byte in a listed file (same size).
        let p = dest.join("db/dump.sql");
        let mut bytes = std::fs::read(&p).unwrap();
        bytes[0] ^= 1;
        std::fs::write(&p, &bytes).unwrap();
        expect_invalid(
            &dest,
            "bundle file db/dump.sql: sha256 mismatch: the bundle is corrupt or was edited; export again",
        );
        bytes[0] ^= 1;
        std::fs::write(&p, &bytes).unwrap();
        Bundle::open(&dest).unwrap();
        // Truncated.
        std::fs::write(&p, &bytes[1..]).unwrap();
        expect_invalid(&dest, "bundle file db/dump.sql: size 34 differs");
        std::fs::write(&p, &bytes).unwrap();
        // Unlisted file.
        std::fs::write(dest.join("extra"), b"x").unwrap();
        expect_invalid(&dest, "bundle file extra: is not listed");
        std::fs::remove_file(dest.join("extra")).unwrap();
        // Missing file.
        std::fs::rename(&p, d.path().join("saved")).unwrap();
        expect_invalid(&dest, "bundle file db/dump.sql: missing");
        std::fs::rename(d.path().join("saved"), &p).unwrap();
        // Symlink in place of a file.
        std::fs::rename(&p, d.path().join("saved")).unwrap();
        std::os::unix::fs::symlink(d.path().join("saved"), &p).unwrap();
        expect_invalid(&dest, "bundle file db/dump.sql: is a symbolic link");
        std::fs::remove_file(&p).unwrap();
        std::fs::rename(d.path().join("saved"), &p).unwrap();
        // Edited manifest.
        let m = dest.join(MANIFEST);
        let text = std::fs::read_to_string(&m).unwrap();
        std::fs::write(&m, text.replace("agent-cluster", "agent-clustex")).unwrap();
        expect_invalid(&dest, "bundle file manifest.json: sha256 mismatch");
        // A consistent manifest of another format.
        let text = text.replace(FORMAT, "something/v9");
        std::fs::write(&m, &text).unwrap();
        std::fs::write(
            dest.join(MANIFEST_SHA256),
            format!("{}\n", hex::encode(Sha256::digest(text.as_bytes()))),
        )
        .unwrap();
        expect_invalid(&dest, "format \"something/v9\"");
        expect_invalid(&d.path().join("nope"), "cannot open it");
    }
}
