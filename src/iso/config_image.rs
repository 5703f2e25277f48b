//! The appliance config image (docs/iso.md "The appliance config image"): an ISO9660 image with
//! volume label `agent_configimage` holding one file, `config.gz`: a gzip of a newc cpio of
//! the config files at their absolute target paths.
//!
//! Its reader is upstream's loader on the appliance disk (openshift/installer
//! `data/data/agent/files/usr/local/bin/load-config-iso.sh`, run by
//! `load-config-iso@.service` with `CONFIG_IMAGE_FILES` = `GetConfigImageFiles()` of
//! `pkg/asset/agent/image/unconfigured_ignition.go`, the list [`LOADER_FILES`] holds). It
//! refuses the archive unless `/etc/assisted/manifests/cluster-image-set.yaml` in it is the
//! disk's own copy line for line (`diff`, the whole file, not just `releaseImage`); then it
//! copies **only** the listed entries out of the archive with `cpio -icvdu`: an entry with a
//! `.` (or `/etc/issue`) is one required file (missing: the load fails and is retried every
//! 5 s), any other entry is the pattern `ENTRY*` (a directory's files, none required). `-u`
//! replaces the disk's files. Everything else in `config.gz` stays unread; the loader then
//! makes `/etc/assisted/extra-manifests`, sets `core`'s password from
//! `/opt/agent/tls/kubeadmin-password.hash` (unless `/etc/assisted/appliance-override-password-set`
//! exists) and, when `/etc/assisted/network` exists, runs `pre-network-manager-config.sh`.
//! [`with_loader_files`] adds the required files the node's Ignition does not carry.

use std::io::Write;
use std::path::Path;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use agent_day2_iso9660::{write_iso, IsoData, IsoInput};

use super::cpio::{newc_archive_flat, CpioFile};
use super::error::{IsoError, Result};
use super::output::AtomicFile;

/// Volume label the appliance's loader looks for.
pub const VOLUME_ID: &str = "agent_configimage";
/// The one file of the image.
pub const ARCHIVE_NAME: &str = "config.gz";

/// The loader's `CONFIG_IMAGE_FILES`, in its order: `GetConfigImageFiles()` of openshift/installer
/// `pkg/asset/agent/image/unconfigured_ignition.go` (read at 193d48fe). The appliance disk's
/// `load-config-iso@.service` gets it from the unconfigured Ignition the disk was built from
/// (install workflow); node-joiner's own `--config-iso` filters its add-nodes Ignition with
/// the same list (`configiso.go` `includeFileInImage`). Upstream keeps
/// `rendezvous-host.env` last ("This file must be last in the list").
pub const LOADER_FILES: &[&str] = &[
    "/etc/assisted/manifests/pull-secret.yaml",
    "/etc/assisted/manifests/cluster-deployment.yaml",
    "/etc/assisted/manifests/cluster-image-set.yaml",
    "/etc/assisted/manifests/agent-cluster-install.yaml",
    "/etc/assisted/manifests/infraenv.yaml",
    "/etc/assisted/manifests",
    "/etc/assisted/extra-manifests",
    "/etc/assisted/hostconfig",
    "/etc/assisted/hostnames",
    "/etc/assisted/network",
    "/etc/NetworkManager/conf.d/clientid.conf",
    "/etc/issue",
    "/etc/systemd/system.conf.d/10-default-env.conf",
    "/root/.docker/config.json",
    "/usr/local/share/start-cluster/start-cluster.env",
    "/usr/local/share/assisted-service/assisted-service.env",
    "/opt/agent/tls/kubeadmin-password.hash",
    "/opt/agent/tls/admin-kubeconfig-signer.key",
    "/opt/agent/tls/admin-kubeconfig-signer.crt",
    "/opt/agent/tls/kube-apiserver-lb-signer.key",
    "/opt/agent/tls/kube-apiserver-lb-signer.crt",
    "/opt/agent/tls/kube-apiserver-localhost-signer.key",
    "/opt/agent/tls/kube-apiserver-localhost-signer.crt",
    "/opt/agent/tls/kube-apiserver-service-network-signer.key",
    "/opt/agent/tls/kube-apiserver-service-network-signer.crt",
    "/etc/assisted/rendezvous-host.env",
];

/// The ClusterImageSet the loader compares with the disk's copy before anything is copied.
pub const CLUSTER_IMAGE_SET: &str = "/etc/assisted/manifests/cluster-image-set.yaml";

/// Whether an entry of [`LOADER_FILES`] is one required file, by the loader's own test
/// (`[[ "${file}" = *.* || "${file}" == "/etc/issue" ]]`); any other entry is a directory
/// pattern.
pub fn loader_entry_is_file(entry: &str) -> bool {
    entry.contains('.') || entry == "/etc/issue"
}

/// Whether the loader copies archive member `path`: it equals a file entry, or starts with a
/// directory entry (`cpio ... "${file}*"`: GNU cpio matches with `fnmatch` without
/// `FNM_PATHNAME`, so `*` also matches `/`, and `/etc/assisted/network*` takes
/// `/etc/assisted/network-x` too).
pub fn loader_copies(path: &str) -> bool {
    LOADER_FILES.iter().any(|e| {
        if loader_entry_is_file(e) {
            path == *e
        } else {
            path.starts_with(e)
        }
    })
}

/// `files` (path, contents, mode, as [`crate::ignition::files`] lists the node's Ignition)
/// plus every required file of [`LOADER_FILES`] they lack, so the loader finds each one (it
/// fails on the first missing file and retries forever). The additions, each of mode 0644
/// unless said otherwise:
/// * `cluster-deployment.yaml`, `agent-cluster-install.yaml`: empty (0600), as upstream's
///   add-nodes workflow writes them "to keep config ISO loader happy"
///   (`pkg/asset/agent/manifests/clusterdeployment.go`, `agentclusterinstall.go`); the
///   day-2 client imports the cluster and reads neither;
/// * `10-default-env.conf`: the proxy settings of the node's Ignition
///   ([`crate::ignition::PROXY_CONF`], 0600: a proxy URL may hold credentials), else empty as
///   upstream's template renders it without a proxy: the loader copies this path and no
///   other under `system.conf.d`, so the ISO's own file name would never reach the disk;
/// * `clientid.conf`: NetworkManager's DHCPv6 identity by link-layer DUID and the MAC as
///   IAID, the setting the appliance disk already has and the loader replaces;
/// * `/etc/issue`: the console banner;
/// * `start-cluster.env`: `REQUIRED_MASTER_NODES=0`, `REQUIRED_WORKER_NODES=<hosts>`
///   (upstream's `agent-add-node.service` reads it as an environment file);
/// * `kubeadmin-password.hash`: `!` (0600), a locked password: the loader gives `core` this
///   hash (a day-2 node has no kubeadmin password; upstream's is a random one nobody knows)
///   unless the appliance set its own (`appliance-override-password-set`);
/// * the eight `/opt/agent/tls` signer keys (0600) and certificates: empty. Only
///   assisted-service reads that directory, and only through
///   `EPHEMERAL_INSTALLER_CLUSTER_TLS_CERTS_OVERRIDE_DIR` when it makes a new cluster's
///   certificates (day 1); the node's `assisted-service.env` does not set it.
pub fn with_loader_files(mut files: Vec<(String, Vec<u8>, i64)>) -> Vec<(String, Vec<u8>, i64)> {
    let has = |files: &[(String, Vec<u8>, i64)], p: &str| files.iter().any(|f| f.0 == p);
    let hosts: std::collections::BTreeSet<&str> = files
        .iter()
        .filter_map(|f| f.0.strip_prefix("/etc/assisted/hostconfig/"))
        .filter_map(|r| r.split_once('/').map(|(h, _)| h))
        .collect();
    let workers = hosts.len();
    let proxy = files
        .iter()
        .find(|f| f.0 == crate::ignition::PROXY_CONF)
        .map(|f| (f.1.clone(), 0o600));
    let mut add = Vec::new();
    for e in LOADER_FILES.iter().filter(|e| loader_entry_is_file(e)) {
        if has(&files, e) {
            continue;
        }
        let (data, mode): (Vec<u8>, i64) = match *e {
            "/etc/systemd/system.conf.d/10-default-env.conf" => proxy.clone().unwrap_or((Vec::new(), 0o644)),
            "/etc/NetworkManager/conf.d/clientid.conf" => (
                b"[connection]\nipv6.dhcp-duid=ll\nipv6.dhcp-iaid=mac\n".to_vec(),
                0o644,
            ),
            "/etc/issue" => (
                b"\\S\nThis host is being added to an OpenShift cluster (agent-day2 config image).\n"
                    .to_vec(),
                0o644,
            ),
            "/usr/local/share/start-cluster/start-cluster.env" => (
                format!("REQUIRED_MASTER_NODES=0\nREQUIRED_WORKER_NODES={workers}\n").into_bytes(),
                0o644,
            ),
            "/opt/agent/tls/kubeadmin-password.hash" => (b"!".to_vec(), 0o600),
            p if p.ends_with(".key") || p.ends_with(".yaml") => (Vec::new(), 0o600),
            _ => (Vec::new(), 0o644),
        };
        add.push((e.to_string(), data, mode));
    }
    files.extend(add);
    files
}

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
    fn the_loader_list_splits_into_required_files_and_directory_patterns() {
        let required: Vec<&str> = LOADER_FILES
            .iter()
            .copied()
            .filter(|e| loader_entry_is_file(e))
            .collect();
        assert_eq!(required.len(), 21);
        assert!(loader_entry_is_file("/etc/issue"));
        for d in [
            "/etc/assisted/manifests",
            "/etc/assisted/extra-manifests",
            "/etc/assisted/hostconfig",
            "/etc/assisted/hostnames",
            "/etc/assisted/network",
        ] {
            assert!(!loader_entry_is_file(d), "{d}");
        }
        assert_eq!(LOADER_FILES.last(), Some(&"/etc/assisted/rendezvous-host.env"));
        assert!(loader_copies("/etc/assisted/hostconfig/worker-0/role"));
        assert!(loader_copies("/etc/assisted/network/worker-0/eth0.nmconnection"));
        assert!(loader_copies("/etc/assisted/manifests/nmstateconfig.yaml"));
        assert!(loader_copies(CLUSTER_IMAGE_SET));
        // Never read by the loader: the add-nodes files of the node's Ignition.
        for p in [
            "/etc/assisted/add-nodes.env",
            "/etc/assisted/clusterconfig/import-cluster-config.json",
            "/usr/local/share/assisted-service/images.env",
            "/usr/local/share/assisted-service/agent-images.env",
            crate::ignition::PROXY_CONF,
            "/etc/issue.d/x",
        ] {
            assert!(!loader_copies(p), "{p}");
        }
    }

    #[test]
    fn every_required_loader_file_is_added_once_and_the_proxy_moves_to_the_loaders_path() {
        let node = vec![
            (
                "/etc/assisted/hostconfig/worker-0/role".to_string(),
                b"worker\n".to_vec(),
                0o644,
            ),
            (
                "/etc/assisted/hostconfig/worker-1/role".to_string(),
                b"worker\n".to_vec(),
                0o644,
            ),
            (
                "/etc/assisted/manifests/pull-secret.yaml".to_string(),
                b"ps".to_vec(),
                0o600,
            ),
            (
                "/etc/assisted/rendezvous-host.env".to_string(),
                b"R=1\n".to_vec(),
                0o644,
            ),
            (
                crate::ignition::PROXY_CONF.to_string(),
                b"[Manager]\nDefaultEnvironment=\"HTTP_PROXY=http://p:3128\"\n".to_vec(),
                0o600,
            ),
        ];
        let all = with_loader_files(node.clone());
        for e in LOADER_FILES.iter().filter(|e| loader_entry_is_file(e)) {
            assert_eq!(all.iter().filter(|f| f.0 == *e).count(), 1, "{e}");
        }
        // Files the node has are kept as they are.
        for f in &node {
            assert!(all.contains(f), "{}", f.0);
        }
        let get = |p: &str| all.iter().find(|f| f.0 == p).unwrap().clone();
        let env = get("/etc/systemd/system.conf.d/10-default-env.conf");
        assert_eq!(env.1, node[4].1);
        assert_eq!(env.2, 0o600);
        assert_eq!(
            get("/usr/local/share/start-cluster/start-cluster.env").1,
            b"REQUIRED_MASTER_NODES=0\nREQUIRED_WORKER_NODES=2\n"
        );
        assert_eq!(get("/opt/agent/tls/kubeadmin-password.hash").1, b"!");
        assert_eq!(get("/opt/agent/tls/kube-apiserver-lb-signer.key").2, 0o600);
        assert_eq!(get("/etc/assisted/manifests/cluster-deployment.yaml").1, b"");
        // Without a proxy the default environment file is empty.
        let plain = with_loader_files(node[..4].to_vec());
        let env = plain
            .iter()
            .find(|f| f.0 == "/etc/systemd/system.conf.d/10-default-env.conf")
            .unwrap();
        assert!(env.1.is_empty());
        assert_eq!(env.2, 0o644);
    }

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
