//! The base image add-nodes embeds into: where it comes from, the local cache, downloads.
//!
//! Order (issue 3, docs/iso.md "The base ISO"): `--base-iso FILE` when given; else a cache hit;
//! else the release payload's `machine-os-images` image (`/coreos/coreos-<arch>.iso`, through
//! the cluster's mirrors, so it works disconnected; [`crate::registry::machine_os_iso`]); else
//! the `coreos-bootimages` stream location, downloaded over HTTP(S) with retries and a progress
//! bar on a terminal.
//!
//! Cache: `$XDG_CACHE_HOME/agent-day2/isos/` (else `~/.cache/agent-day2/isos/`), directory
//! 0700, files 0600, written under a temporary name and renamed when complete and verified:
//! * `<sha256>.iso`: a stream download, named by the sha256 the stream promises;
//! * `machine-os-<release digest hex>-<arch>.iso` with `.sha256` beside it (the hash taken
//!   when it was extracted and checked against the image's own `.sha256`).
//!
//! The sha256 is checked after every download *and* on every cache hit; an entry that does not
//! match is reported, removed and fetched again.

use std::io::{Read, Write};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Serialize;
use sha2::{Digest, Sha256};

use crate::error::{Error, ResourceRef, Result};
use crate::registry::{RegistryContext, RetryPolicy};

/// Where the base ISO came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Source {
    /// `--base-iso FILE`.
    File,
    /// A verified cache entry.
    Cache,
    /// Extracted from the release payload's machine-os-images image now.
    MachineOsImages,
    /// Downloaded from the coreos-bootimages stream location now.
    Download,
}

impl std::fmt::Display for Source {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Source::File => "--base-iso",
            Source::Cache => "cached",
            Source::MachineOsImages => "from the release's machine-os-images",
            Source::Download => "downloaded",
        })
    }
}

/// The base ISO to use.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct BaseIsoFile {
    /// Local path.
    pub path: PathBuf,
    /// Where it came from.
    pub source: Source,
    /// Lowercase hex sha256 (None for `--base-iso`, which is not hashed: the user vouches).
    pub sha256: Option<String>,
    /// The name to show (stream file name, or the path given).
    pub name: String,
    /// Size in bytes.
    pub size: u64,
}

/// What [`resolve`] needs.
#[derive(Debug, Clone, Default)]
pub struct Request {
    /// CoreOS architecture (x86_64, aarch64, ...).
    pub arch: String,
    /// `--base-iso FILE`.
    pub explicit: Option<PathBuf>,
    /// The stream's ISO for `arch` (coreos-bootimages): location and sha256.
    pub stream: Option<crate::cluster::BaseIso>,
    /// The release payload's `machine-os-images` pull spec, when known.
    pub machine_os_images: Option<String>,
    /// The release digest (`sha256:<hex>`), for the machine-os cache entry name.
    pub release_digest: Option<String>,
    /// Cache root; None → [`crate::files::cache_root`].
    pub cache_root: Option<PathBuf>,
    /// Do not fetch anything (`--dry-run`): only `--base-iso` or a cache hit.
    pub offline: bool,
    /// Extra CA PEMs for HTTPS downloads (cluster trust bundle, registry CAs).
    pub extra_ca_pems: Vec<String>,
    /// Skip TLS verification of downloads (`--insecure`).
    pub insecure: bool,
    /// Download retries.
    pub retry: RetryPolicy,
}

use crate::files::cache_root;

/// sha256 of a file, streamed (lowercase hex).
pub fn sha256_file(path: &Path) -> std::io::Result<String> {
    let mut f = std::fs::File::open(path)?;
    let mut h = Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = f.read(&mut buf)?;
        if n == 0 {
            break;
        }
        h.update(&buf[..n]);
    }
    Ok(hex::encode(h.finalize()))
}

fn io_err(path: &Path, e: std::io::Error) -> Error {
    Error::Io {
        path: path.display().to_string(),
        source: e,
    }
}

fn make_private_dir(dir: &Path) -> Result<()> {
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .map_err(|e| io_err(dir, e))?;
    if let Ok(m) = std::fs::metadata(dir) {
        if m.permissions().mode() & 0o077 != 0 {
            // Our own cache directory: keep it private (it is not --dir).
            let _ = std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700));
        }
    }
    Ok(())
}

fn file_name_of(location: &str) -> String {
    location
        .rsplit('/')
        .next()
        .filter(|s| !s.is_empty())
        .unwrap_or("base.iso")
        .split('?')
        .next()
        .unwrap_or("base.iso")
        .to_string()
}

/// A cache entry checked against `want`: Some(size) when it matches; a mismatching entry is
/// removed with a warning (returned in `warnings`).
fn check_entry(path: &Path, want: &str, warnings: &mut Vec<String>) -> Option<u64> {
    let meta = std::fs::metadata(path).ok()?;
    match sha256_file(path) {
        Ok(got) if got == want => Some(meta.len()),
        Ok(got) => {
            warnings.push(format!(
                "cache entry {} has sha256 {got}, expected {want}: corrupt, removed and fetched again",
                path.display()
            ));
            let _ = std::fs::remove_file(path);
            let _ = std::fs::remove_file(path.with_extension("iso.sha256"));
            None
        }
        Err(e) => {
            warnings.push(format!(
                "cache entry {} cannot be read ({e}): fetched again",
                path.display()
            ));
            let _ = std::fs::remove_file(path);
            None
        }
    }
}

/// Finds or fetches the base ISO. Returns None only when `req.offline` and nothing is local.
/// `warnings` receives what the user should know (corrupt cache entries replaced, a
/// machine-os-images fallback).
///
/// Errors: `--base-iso` missing or unreadable ([`Error::InvalidInput`] on `--base-iso`, exit
/// 3); no stream ISO for the architecture and no `--base-iso` ([`Error::NotFound`], exit 4);
/// a download that fails after retries or whose sha256 does not match ([`Error::Api`], exit 4,
/// saying to use `--base-iso` on a disconnected cluster); cache I/O errors.
pub async fn resolve(
    req: &Request,
    registry: Option<&RegistryContext>,
    warnings: &mut Vec<String>,
) -> Result<Option<BaseIsoFile>> {
    if let Some(p) = &req.explicit {
        let meta = std::fs::metadata(p).map_err(|e| Error::InvalidInput {
            field: "--base-iso".into(),
            message: format!("cannot read {}: {e}", p.display()),
        })?;
        if !meta.is_file() {
            return Err(Error::InvalidInput {
                field: "--base-iso".into(),
                message: format!("{} is not a file", p.display()),
            });
        }
        return Ok(Some(BaseIsoFile {
            path: p.clone(),
            source: Source::File,
            sha256: None,
            name: p.display().to_string(),
            size: meta.len(),
        }));
    }
    let root = req.cache_root.clone().or_else(cache_root);
    let dir = root.as_ref().map(|r| r.join("isos"));

    // Cache hits first: no network at all.
    let stream_entry = match (&dir, &req.stream) {
        (Some(d), Some(s)) if is_hex64(&s.sha256) => Some(d.join(format!("{}.iso", s.sha256))),
        _ => None,
    };
    if let (Some(path), Some(s)) = (&stream_entry, &req.stream) {
        if let Some(size) = check_entry(path, &s.sha256, warnings) {
            return Ok(Some(BaseIsoFile {
                path: path.clone(),
                source: Source::Cache,
                sha256: Some(s.sha256.clone()),
                name: file_name_of(&s.location),
                size,
            }));
        }
    }
    let mos_entry = match (&dir, &req.release_digest) {
        (Some(d), Some(dg)) => {
            let hex = dg.strip_prefix("sha256:").unwrap_or(dg);
            is_hex64(hex).then(|| d.join(format!("machine-os-{hex}-{}.iso", req.arch)))
        }
        _ => None,
    };
    if let Some(path) = &mos_entry {
        if let Ok(want) = std::fs::read_to_string(path.with_extension("iso.sha256")) {
            let want = want.trim().to_string();
            if let Some(size) = check_entry(path, &want, warnings) {
                return Ok(Some(BaseIsoFile {
                    path: path.clone(),
                    source: Source::Cache,
                    sha256: Some(want),
                    name: format!("coreos-{}.iso (machine-os-images)", req.arch),
                    size,
                }));
            }
        }
    }
    if req.offline {
        return Ok(None);
    }
    let dir = dir.ok_or_else(|| {
        Error::Usage(
            "no cache directory for the base ISO: set HOME, or XDG_CACHE_HOME to an absolute path (a relative one is ignored, as the XDG spec says), or pass --base-iso FILE".into(),
        )
    })?;
    make_private_dir(&dir)?;

    // The release payload's machine-os-images (through the mirrors).
    if let (Some(image), Some(path), Some(ctx)) = (&req.machine_os_images, &mos_entry, registry) {
        let tmp = dir.join(format!(".machine-os-{}.iso.part", std::process::id()));
        match crate::registry::machine_os_iso(image, &req.arch, ctx, &tmp).await {
            Ok(Some(p)) => {
                let sha = sha256_file(&p).map_err(|e| io_err(&p, e))?;
                let side = path.with_extension("iso.sha256");
                std::fs::write(&side, format!("{sha}\n")).map_err(|e| io_err(&side, e))?;
                std::fs::rename(&p, path).map_err(|e| io_err(path, e))?;
                let size = std::fs::metadata(path).map(|m| m.len()).unwrap_or(0);
                return Ok(Some(BaseIsoFile {
                    path: path.clone(),
                    source: Source::MachineOsImages,
                    sha256: Some(sha),
                    name: format!("coreos-{}.iso (machine-os-images)", req.arch),
                    size,
                }));
            }
            Ok(None) => warnings.push(format!(
                "{image} has no /coreos/coreos-{}.iso; using the coreos-bootimages stream",
                req.arch
            )),
            Err(e) => warnings.push(format!(
                "cannot take the base ISO from machine-os-images ({e}); using the coreos-bootimages stream"
            )),
        }
        let _ = std::fs::remove_file(&tmp);
    }

    let s = req.stream.as_ref().ok_or_else(|| Error::NotFound {
        resource: ResourceRef::namespaced(
            "ConfigMap",
            "openshift-machine-config-operator",
            "coreos-bootimages",
        ),
        why: Some(format!(
            "its stream has no live ISO for {}; pass --base-iso FILE",
            req.arch
        )),
    })?;
    if !is_hex64(&s.sha256) {
        return Err(Error::BadObject {
            resource: ResourceRef::namespaced(
                "ConfigMap",
                "openshift-machine-config-operator",
                "coreos-bootimages",
            ),
            message: format!(
                "the {} ISO's sha256 {:?} is not 64 hex digits; pass --base-iso FILE",
                req.arch, s.sha256
            ),
        });
    }
    let path = stream_entry.unwrap_or_else(|| dir.join(format!("{}.iso", s.sha256)));
    let size = download(&s.location, &s.sha256, &path, req).await?;
    Ok(Some(BaseIsoFile {
        path,
        source: Source::Download,
        sha256: Some(s.sha256.clone()),
        name: file_name_of(&s.location),
        size,
    }))
}

fn is_hex64(s: &str) -> bool {
    s.len() == 64 && s.bytes().all(|b| b.is_ascii_hexdigit())
}

fn dl_error(url: &str, message: String) -> Error {
    Error::Api {
        verb: "download".into(),
        resource: ResourceRef { kind: "the base ISO".into(), namespace: None, name: Some(url.to_string()) },
        message: format!("{message}; on a disconnected cluster, or behind a proxy not set in HTTPS_PROXY, pass --base-iso FILE (the RHCOS live ISO of the cluster's release)"),
    }
}

fn client(req: &Request) -> Result<reqwest::Client> {
    // reqwest is built without a bundled crypto provider: ring, as kube and the registry use.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let mut b = reqwest::Client::builder()
        .connect_timeout(Duration::from_secs(15))
        .read_timeout(Duration::from_secs(60))
        .user_agent(concat!("agent-day2/", env!("CARGO_PKG_VERSION")))
        .danger_accept_invalid_certs(req.insecure);
    // Only blocks that are real X.509 certificates: one broken entry in a trust bundle must
    // not make every download fail (rustls refuses the whole root store then).
    for bundle in &req.extra_ca_pems {
        for p in pem::parse_many(bundle)
            .unwrap_or_default()
            .into_iter()
            .filter(|p| p.tag() == "CERTIFICATE")
        {
            if x509_parser::parse_x509_certificate(p.contents()).is_err() {
                tracing::warn!("a CA certificate of the cluster's trust bundle does not parse; not used for the base ISO download");
                continue;
            }
            if let Ok(c) = reqwest::Certificate::from_der(p.contents()) {
                b = b.add_root_certificate(c);
            }
        }
    }
    b.build()
        .map_err(|e| Error::Unexpected(format!("cannot set up the download client: {e}")))
}

/// Transient: worth another try.
fn transient(status: reqwest::StatusCode) -> bool {
    status.is_server_error()
        || status == reqwest::StatusCode::REQUEST_TIMEOUT
        || status == reqwest::StatusCode::TOO_MANY_REQUESTS
}

fn chain(e: &dyn std::error::Error) -> String {
    crate::kube::error_chain(e)
}

/// Downloads `url` into `dest` (0600, temporary name, renamed when complete), checking the
/// sha256; retries transient failures with exponential backoff, resuming with a Range request
/// where the server allows it. Returns the size.
async fn download(url: &str, want: &str, dest: &Path, req: &Request) -> Result<u64> {
    use futures::StreamExt;
    let c = client(req)?;
    let dir = dest.parent().unwrap_or(Path::new("."));
    let tmp = dir.join(format!(
        ".{}.part-{}",
        dest.file_name().and_then(|n| n.to_str()).unwrap_or("iso"),
        std::process::id()
    ));
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(&tmp)
        .map_err(|e| io_err(&tmp, e))?;
    let guard = RemoveOnDrop(tmp.clone());
    let mut hasher = Sha256::new();
    let mut have: u64 = 0;
    let bar = progress_bar();
    let mut backoff = req.retry.initial_backoff;
    let attempts = req.retry.attempts.max(1);
    let mut last = String::new();
    for attempt in 1..=attempts {
        if attempt > 1 {
            tracing::warn!("download of {url} failed ({last}); retrying in {backoff:?} (attempt {attempt} of {attempts})");
            tokio::time::sleep(backoff).await;
            backoff = (backoff * 2).min(req.retry.max_backoff);
        }
        let mut rb = c.get(url);
        if have > 0 {
            rb = rb.header(reqwest::header::RANGE, format!("bytes={have}-"));
        }
        let resp = match rb.send().await {
            Ok(r) => r,
            Err(e) => {
                last = chain(&e);
                continue;
            }
        };
        let status = resp.status();
        if status == reqwest::StatusCode::PARTIAL_CONTENT && have > 0 {
            // resuming: keep what we have
        } else if status.is_success() {
            if have > 0 {
                // The server ignored the Range: start again.
                file.set_len(0).map_err(|e| io_err(&tmp, e))?;
                use std::io::Seek;
                file.seek(std::io::SeekFrom::Start(0))
                    .map_err(|e| io_err(&tmp, e))?;
                hasher = Sha256::new();
                have = 0;
            }
        } else if transient(status) {
            last = format!("HTTP {status}");
            continue;
        } else {
            return Err(dl_error(url, format!("HTTP {status}")));
        }
        if let (Some(b), Some(len)) = (&bar, resp.content_length()) {
            b.set_length(have + len);
            b.set_position(have);
        }
        let mut stream = resp.bytes_stream();
        let mut failed = None;
        while let Some(chunk) = stream.next().await {
            match chunk {
                Ok(bytes) => {
                    file.write_all(&bytes).map_err(|e| io_err(&tmp, e))?;
                    hasher.update(&bytes);
                    have += bytes.len() as u64;
                    if let Some(b) = &bar {
                        b.set_position(have);
                    }
                }
                Err(e) => {
                    failed = Some(chain(&e));
                    break;
                }
            }
        }
        if let Some(f) = failed {
            last = format!("the transfer broke off after {have} bytes: {f}");
            continue;
        }
        if let Some(b) = &bar {
            b.finish_and_clear();
        }
        file.sync_all().map_err(|e| io_err(&tmp, e))?;
        let got = hex::encode(hasher.finalize());
        if got != want {
            return Err(dl_error(
                url,
                format!("the download ({have} bytes) has sha256 {got}, but coreos-bootimages says {want}; the server or a proxy altered it"),
            ));
        }
        std::fs::rename(&tmp, dest).map_err(|e| io_err(dest, e))?;
        std::mem::forget(guard);
        tracing::info!(url, size = have, "base ISO downloaded to {}", dest.display());
        return Ok(have);
    }
    if let Some(b) = &bar {
        b.abandon();
    }
    Err(dl_error(url, format!("{last} (after {attempts} attempts)")))
}

struct RemoveOnDrop(PathBuf);
impl Drop for RemoveOnDrop {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// A byte progress bar on stderr, only when stderr is a terminal (docs/design.md "Plugin
/// conventions").
fn progress_bar() -> Option<indicatif::ProgressBar> {
    use std::io::IsTerminal;
    if !std::io::stderr().is_terminal() {
        return None;
    }
    let b = indicatif::ProgressBar::new(0);
    b.set_style(
        indicatif::ProgressStyle::with_template(
            "base ISO {bytes}/{total_bytes} [{wide_bar}] {bytes_per_sec} {eta}",
        )
        .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
    );
    Some(b)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_names_and_hex() {
        assert_eq!(
            file_name_of("https://h/rhcos-418.x86_64.iso"),
            "rhcos-418.x86_64.iso"
        );
        assert_eq!(file_name_of("https://h/a.iso?x=1"), "a.iso");
        assert!(is_hex64(&"a".repeat(64)) && !is_hex64("abc"));
    }

    #[test]
    fn corrupt_cache_entry_is_removed() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("x.iso");
        std::fs::write(&p, b"hello").unwrap();
        let good = sha256_file(&p).unwrap();
        let mut w = vec![];
        assert_eq!(check_entry(&p, &good, &mut w), Some(5));
        assert!(w.is_empty());
        assert_eq!(check_entry(&p, &"0".repeat(64), &mut w), None);
        assert!(!p.exists());
        assert!(w[0].contains("corrupt, removed"), "{w:?}");
    }
}
