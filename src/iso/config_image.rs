//! The appliance config image (design.md "The node ISO", last part): an ISO9660 image with
//! volume label `agent_configimage` holding one file, `config.gz`: a gzip of a newc cpio of
//! the config files at their absolute target paths. The appliance's loader finds the device
//! by that label, checks the ClusterImageSet `releaseImage` inside the archive
//! (`cpio -i --to-stdout /etc/assisted/manifests/cluster-image-set.yaml`) and extracts the
//! rest with `cpio -icvd` by absolute path, without replacing existing files.

use std::io::Write;
use std::path::Path;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use agent_day2_iso9660::{write_iso, IsoData, IsoInput};

use super::cpio::{newc_archive_flat, CpioFile};
use super::output::AtomicFile;
use super::{IsoError, Result};

/// Volume label the appliance's loader looks for.
pub const VOLUME_ID: &str = "agent_configimage";
/// The one file of the image.
pub const ARCHIVE_NAME: &str = "config.gz";

/// `config.gz`: gzip (level 9) of a newc cpio of `files` with no directory members. Each path
/// must be absolute (`/etc/assisted/manifests/cluster-image-set.yaml`); mtimes are kept as
/// given. Errors: [`IsoError::Invalid`] naming a relative, malformed or duplicate path.
pub fn config_archive(files: &[CpioFile<'_>]) -> Result<Vec<u8>> {
    if let Some(f) = files.iter().find(|f| !f.path.starts_with('/')) {
        return Err(IsoError::Invalid(format!(
            "config image file {:?} must have an absolute target path: the appliance extracts config.gz by absolute path",
            f.path
        )));
    }
    let cpio = newc_archive_flat(files)?;
    let mut gz = flate2::write::GzEncoder::new(
        Vec::with_capacity(cpio.len() / 3 + 64),
        flate2::Compression::best(),
    );
    gz.write_all(&cpio)
        .map_err(|e| IsoError::io("gzip-compressing config.gz", e))?;
    gz.finish()
        .map_err(|e| IsoError::io("gzip-compressing config.gz", e))
}

/// The whole config image. The ISO's timestamps are the newest file mtime (deterministic for
/// equal inputs).
pub fn config_image_bytes(files: &[CpioFile<'_>]) -> Result<Vec<u8>> {
    let gz = config_archive(files)?;
    let newest = files.iter().map(|f| f.mtime).max().unwrap_or(0);
    let mut out = Vec::with_capacity(gz.len() + 64 * 1024);
    write_iso(
        &mut out,
        VOLUME_ID,
        &[IsoInput {
            path: ARCHIVE_NAME.into(),
            data: IsoData::Bytes(gz),
            mtime: UNIX_EPOCH + Duration::from_secs(newest),
        }],
    )
    .map_err(IsoError::from)?;
    Ok(out)
}

/// Writes the config image to `out_path` through [`AtomicFile`] (mode 0600, no replacing
/// unless `force`). Errors: as [`config_archive`] and [`AtomicFile`].
pub fn write_config_image(out_path: &Path, files: &[CpioFile<'_>], force: bool) -> Result<()> {
    let bytes = config_image_bytes(files)?;
    let mut f = AtomicFile::create(out_path, force)?;
    let tmp = f.temp_path().display().to_string();
    f.write_all(&bytes)
        .map_err(|e| IsoError::io(format!("writing {tmp}"), e))?;
    f.commit()
}

/// Seconds since the epoch of a [`SystemTime`] (0 before 1970), for [`CpioFile::mtime`].
pub fn unix_secs(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Cursor;

    #[test]
    fn image_holds_gzip_cpio_at_absolute_paths() {
        let files = [
            CpioFile {
                path: "/etc/assisted/manifests/cluster-image-set.yaml",
                mode: 0o100644,
                mtime: 1_700_000_100,
                data: b"releaseImage: quay.io/x@sha256:1\n",
            },
            CpioFile {
                path: "/etc/assisted/rendezvous-host.env",
                mode: 0o100600,
                mtime: 1_700_000_000,
                data: b"NODE_ZERO_IP=192.168.111.80\n",
            },
        ];
        let img = config_image_bytes(&files).unwrap();
        let mut r = Cursor::new(&img);
        assert_eq!(agent_day2_iso9660::volume_id(&mut r).unwrap(), VOLUME_ID);
        let e = agent_day2_iso9660::get(&mut r, "config.gz").unwrap();
        let gz = agent_day2_iso9660::read_entry(&mut r, &e).unwrap();
        let cpio = super::super::embed::decompress_initrd(&gz).unwrap();
        let m = super::super::cpio::read_newc(&cpio).unwrap();
        assert_eq!(m.len(), 2, "no directory members");
        assert_eq!(m[0].path, "/etc/assisted/manifests/cluster-image-set.yaml");
        assert_eq!(m[0].mtime, 1_700_000_100);
        assert_eq!(m[1].mode, 0o100600);
        assert_eq!(m[1].data, files[1].data);
        assert!(config_archive(&[CpioFile {
            path: "etc/x",
            mode: 0o644,
            mtime: 0,
            data: b""
        }])
        .is_err());
        // GNU cpio picks one member by absolute path, as the appliance's loader does. (The
        // loader says `cpio -icv`; RHEL's cpio patch makes -c mean newc, Debian's means the
        // old ASCII format, so here the format is auto-detected instead.)
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("c"), &cpio).unwrap();
        match std::process::Command::new("sh")
            .arg("-c")
            .arg("cpio -iv --to-stdout /etc/assisted/manifests/cluster-image-set.yaml < c")
            .current_dir(dir.path())
            .output()
        {
            Ok(o) if o.status.success() => assert_eq!(o.stdout, files[0].data),
            Ok(o) => panic!("cpio failed: {}", String::from_utf8_lossy(&o.stderr)),
            Err(e) => panic!("cpio not runnable ({e}): apt-get install cpio (scripts/test.sh installs it)"),
        }
    }
}
