//! Reads from the cluster's release payload through the registry (Distribution) API:
//! the agent-installer component images named in `release-manifests/image-references`, and the
//! base ISO inside the `machine-os-images` image (issue 3, docs/iso.md "Disconnected clusters").
//!
//! Access is as the anchor (`oc adm release info` / `oc adm node-image`) has it: the cluster's
//! pull secret (or `--registry-config`, which replaces it), the cluster's ImageDigestMirrorSets,
//! ImageTagMirrorSets and ImageContentSourcePolicies ([`mirrors`]), its registry CAs and trust
//! bundle as extra roots, and `--insecure` (HTTPS without verification, falling back to plain
//! HTTP). HTTPS_PROXY/HTTP_PROXY/NO_PROXY are honoured (reqwest's environment proxies).
//! Transient failures (5xx, 408/429, connection errors, a stream cut short) are retried with
//! exponential backoff; 401/403 stop at once with an error naming the registry and the refused
//! credentials.
//!
//! Component images are cached per release digest in
//! `$XDG_CACHE_HOME/agent-day2/releases/<digest>.json` (else `~/.cache/...`), so a second run for
//! a release named by digest needs no network.

pub mod auth;
mod cache;
mod fetch;
mod layers;
pub mod mirrors;
mod types;

use std::path::{Path, PathBuf};

pub use fetch::{coreos_arch, go_arch};

pub use types::*;

/// The release payload, read through the registry.
pub struct ReleasePayload;

impl ReleasePayload {
    /// The component images of `release_image` (a pull spec, normally by digest as in
    /// ClusterVersion) for `ctx.arch`: fetches the release manifest (picking linux/`ctx.arch`
    /// from a manifest list), finds `release-manifests/image-references` in its layers (from
    /// the top layer down, stopping at the file), and returns the four agent-installer images
    /// and `machine-os-images`. A cached answer for the release digest is used without any
    /// network; a fresh one is cached.
    ///
    /// Errors: [`RegistryError::MissingTag`] naming the tag; `Refused` (401/403) naming the
    /// registry and the credentials; `Unavailable`/`AllSourcesFailed` after retries and mirrors;
    /// `BadContent` when no layer holds image-references.
    pub async fn component_images(
        release_image: &str,
        ctx: &RegistryContext,
    ) -> Result<ComponentImages, RegistryError> {
        let arch = coreos_arch(&ctx.arch).to_string();
        let split =
            mirrors::SplitRef::parse(release_image).map_err(|message| RegistryError::InvalidReference {
                image: release_image.to_string(),
                message,
            })?;
        let cache = cache::ReleaseCache::new(ctx.cache_dir.clone());
        if let Some(d) = &split.digest {
            if let Some(hit) = cache.get(d, &arch) {
                tracing::debug!(release_image, "component images from the cache");
                return Ok(hit);
            }
        }
        let fetcher = fetch::Fetcher::new(ctx)?;
        let resolved = fetcher.resolve(release_image, &arch).await?;
        tracing::info!(release_image, from = %resolved.image, "reading {IMAGE_REFERENCES}");
        let mut found = None;
        for layer in resolved.layers.iter().rev() {
            let got = fetcher
                .read_layer(&resolved, layer, |r| {
                    layers::find_small_file(r, IMAGE_REFERENCES, IMAGE_REFERENCES_LIMIT)
                })
                .await?;
            if got.is_some() {
                found = got;
                break;
            }
        }
        let json = found.ok_or_else(|| RegistryError::BadContent {
            image: release_image.to_string(),
            message: format!("no layer holds {IMAGE_REFERENCES}; is this a release payload image?"),
        })?;
        let images = parse_image_references(release_image, &json)?;
        if let Err(e) = cache.put(&resolved.top_digest, release_image, &arch, &images) {
            // A cache that cannot be written costs a download next time, nothing more.
            tracing::warn!("cannot cache the component images: {e}");
        }
        Ok(images)
    }

    /// Whether `release_image` is a multi-arch payload that serves `arch` (CoreOS or Go
    /// spelling): its manifest is a list (OCI index or Docker manifest list) with a
    /// `linux/<arch>` entry. The API tells this only on some clusters
    /// ([`crate::cluster::ArchitectureInfo::multi_arch`]); a Default-feature-set cluster
    /// installed straight from the multi payload says it nowhere else (issue 22 item 12).
    /// Ok(false): a single-arch manifest, or a list without `arch`. Errors: as
    /// [`ReleasePayload::component_images`].
    pub async fn serves_arch(
        release_image: &str,
        ctx: &RegistryContext,
        arch: &str,
    ) -> Result<bool, RegistryError> {
        let fetcher = fetch::Fetcher::new(ctx)?;
        match fetcher.resolve(release_image, coreos_arch(arch)).await {
            Ok(r) => Ok(r.reference.digest() != Some(r.top_digest.as_str())),
            Err(RegistryError::NoPlatform { .. }) => Ok(false),
            Err(e) => Err(e),
        }
    }
}

/// Extracts `/coreos/coreos-<arch>.iso` from the `machine-os-images` image into `dest`
/// (written as a temporary file in the same directory, renamed when complete), checking it
/// against the image's `/coreos/coreos-<arch>.iso.sha256` when present (the layer itself is
/// always checked against its digest). Goes through the mirrors, so it works disconnected.
///
/// Returns None when the image has no ISO for `arch` (the caller falls back to the
/// coreos-bootimages stream, then `--base-iso`). Errors: as
/// [`ReleasePayload::component_images`], `BadContent` for a sha256 mismatch, `Io` for `dest`.
pub async fn machine_os_iso(
    machine_os_images_ref: &str,
    arch: &str,
    ctx: &RegistryContext,
    dest: &Path,
) -> Result<Option<PathBuf>, RegistryError> {
    let arch = coreos_arch(arch).to_string();
    let iso_name = format!("coreos/coreos-{arch}.iso");
    let fetcher = fetch::Fetcher::new(ctx)?;
    let resolved = fetcher.resolve(machine_os_images_ref, &arch).await?;
    let dir = dest
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let file_name = dest.file_name().and_then(|n| n.to_str()).unwrap_or("base.iso");
    let tmp = dir.join(format!(".{file_name}.tmp-{}", std::process::id()));
    let io_err = |path: &Path, source| RegistryError::Io {
        path: path.display().to_string(),
        source,
    };
    let mut iso: Option<(PathBuf, String, u64)> = None;
    let mut expected: Option<String> = None;
    let result: Result<(), RegistryError> = async {
        for layer in resolved.layers.iter().rev() {
            let want_iso = iso.is_none();
            let (iso_name2, tmp2) = (iso_name.clone(), tmp.clone());
            let scan = fetcher
                .read_layer(&resolved, layer, move |r| {
                    if want_iso {
                        // A retried read starts the file again.
                        let _ = std::fs::remove_file(&tmp2);
                    }
                    layers::find_iso(r, &iso_name2, want_iso, &tmp2)
                })
                .await?;
            if scan.iso.is_some() {
                iso = scan.iso;
            }
            if scan.expected_sha256.is_some() && expected.is_none() {
                expected = scan.expected_sha256;
            }
            if iso.is_some() && expected.is_some() {
                break;
            }
        }
        Ok(())
    }
    .await;
    if let Err(e) = result {
        let _ = std::fs::remove_file(&tmp);
        return Err(e);
    }
    let Some((path, sha, size)) = iso else {
        let _ = std::fs::remove_file(&tmp);
        return Ok(None);
    };
    match expected {
        Some(want) if want != sha => {
            let _ = std::fs::remove_file(&path);
            return Err(RegistryError::BadContent {
                image: machine_os_images_ref.to_string(),
                message: format!("/{iso_name} has sha256 {sha}, but /{iso_name}.sha256 says {want}"),
            });
        }
        Some(_) => {}
        None => tracing::warn!(
            image = machine_os_images_ref,
            "/{iso_name}.sha256 is missing; the ISO was checked against its layer digest only"
        ),
    }
    std::fs::rename(&path, dest).map_err(|e| {
        let _ = std::fs::remove_file(&path);
        io_err(dest, e)
    })?;
    tracing::info!(image = machine_os_images_ref, size, sha256 = %sha, "base ISO extracted to {}", dest.display());
    Ok(Some(dest.to_path_buf()))
}
