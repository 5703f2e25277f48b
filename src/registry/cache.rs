//! Component images cached per release digest: `<root>/releases/<digest>.json`, one entry per
//! architecture (a multi-arch release has one digest for all of them). Directories 0700, files
//! 0600, written to a temporary name and renamed, so a reader never sees half a file.

use std::collections::BTreeMap;
use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use super::types::ComponentImages;

#[derive(Serialize, Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct Entry {
    /// The pull spec it was first read for (informational).
    release_image: String,
    /// Architecture (x86_64, aarch64, …) → images.
    platforms: BTreeMap<String, ComponentImages>,
}

pub(crate) struct ReleaseCache {
    root: Option<PathBuf>,
}

/// The file name for a digest (`sha256:<hex>`): `:` is fine in Linux file names; anything but
/// safe characters is refused so a hostile digest cannot escape the directory.
fn file_stem(digest: &str) -> Option<String> {
    let ok = !digest.is_empty()
        && digest.len() < 200
        && digest
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b':' || b == b'-' || b == b'_' || b == b'.')
        && !digest.starts_with('.');
    ok.then(|| digest.to_string())
}

impl ReleaseCache {
    pub(crate) fn new(root: Option<PathBuf>) -> Self {
        ReleaseCache {
            root: root.or_else(crate::files::cache_root),
        }
    }

    fn path(&self, digest: &str) -> Option<PathBuf> {
        Some(
            self.root
                .as_ref()?
                .join("releases")
                .join(format!("{}.json", file_stem(digest)?)),
        )
    }

    fn read(&self, digest: &str) -> Option<Entry> {
        let text = std::fs::read(self.path(digest)?).ok()?;
        serde_json::from_slice(&text).ok()
    }

    /// The cached images of release `digest` for `arch`, if any (an unreadable entry is a miss).
    pub(crate) fn get(&self, digest: &str, arch: &str) -> Option<ComponentImages> {
        self.read(digest)?.platforms.remove(arch)
    }

    /// Adds `arch` → `images` to the entry of `digest`.
    pub(crate) fn put(
        &self,
        digest: &str,
        release_image: &str,
        arch: &str,
        images: &ComponentImages,
    ) -> std::io::Result<()> {
        let path = self
            .path(digest)
            .ok_or_else(|| std::io::Error::other("no cache directory (set HOME, or XDG_CACHE_HOME to an absolute path: a relative one is ignored)"))?;
        let dir = path.parent().unwrap_or(std::path::Path::new("."));
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)?;
        // Directories made before (or by someone else) keep their mode; ours should be private.
        for d in [Some(dir), dir.parent()].into_iter().flatten() {
            let ours = d.ends_with("releases") || d.ends_with("agent-day2");
            if let Ok(m) = std::fs::metadata(d) {
                if ours && m.permissions().mode() & 0o077 != 0 {
                    let _ = std::fs::set_permissions(d, std::fs::Permissions::from_mode(0o700));
                }
            }
        }
        let mut entry = self.read(digest).unwrap_or_default();
        if entry.release_image.is_empty() {
            entry.release_image = release_image.to_string();
        }
        entry.platforms.insert(arch.to_string(), images.clone());
        let body = serde_json::to_vec_pretty(&entry).map_err(std::io::Error::other)?;
        let tmp = dir.join(format!(
            ".{}.tmp-{}-{:x}",
            path.file_name().and_then(|n| n.to_str()).unwrap_or("entry"),
            std::process::id(),
            rand_suffix()
        ));
        let write = || -> std::io::Result<()> {
            let mut f = std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o600)
                .open(&tmp)?;
            f.write_all(&body)?;
            f.sync_all()?;
            std::fs::rename(&tmp, &path)
        };
        write().inspect_err(|_| {
            let _ = std::fs::remove_file(&tmp);
        })
    }
}

fn rand_suffix() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0),
    );
    h.finish()
}
