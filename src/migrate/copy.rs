//! Files into a pod's volume through exec, checked afterwards (docs/migrate.md "Files on
//! cluster 0").
//!
//! `tar -x -f - -C DIR` runs in the container with the bundle files streamed on stdin; then
//! `sha256sum DIR/...` in the same container reads every copied file back. The checksums are
//! the only proof the copy is whole: when the exec stream breaks mid-way the API server still
//! reports `Success` (issue 21 item 6), and tar on a cut archive may leave a short file behind.
//! A copy that does not match is made once more, then refused naming the first file that
//! differs.
//!
//! Two copies use this ([`super::import`]): the side volume `agent-day2-migration` (everything
//! a person may want to read, the pull secret taken out of install-config.yaml) and cluster 0's
//! assisted-service storage (`WORK_DIR`, `/data` on the `assisted-service` volume), laid out as
//! node 0's `STORAGE=filesystem` held it ([`storage_object`]) so that cluster 0's service serves
//! node 0's logs, credentials and files.

use std::io::Write;
use std::path::PathBuf;
use std::sync::Arc;

use sha2::{Digest, Sha256};

use super::bundle::BundleFileEntry;
use super::exec::{self, PodContainer, Producer};
use crate::error::{Error, ResourceRef};
use crate::kube::KubeTarget;

/// Where a copied file's bytes come from.
#[derive(Debug, Clone)]
pub enum CopySrc {
    /// A bundle file, streamed.
    File(PathBuf),
    /// Bytes made by import (install-config.yaml without its pull secret).
    Bytes(Vec<u8>),
}

/// One file to copy: its path under the target directory, its bytes, their sha256 (lower-case
/// hex) and size, its mode.
#[derive(Debug, Clone)]
pub struct CopyItem {
    /// Relative path under the target directory (no `..`, no leading `/`).
    pub dest: String,
    /// The bytes.
    pub src: CopySrc,
    /// sha256 of the bytes, lower-case hex.
    pub sha256: String,
    /// Size in bytes.
    pub size: u64,
    /// File mode in the tar (e.g. 0o640).
    pub mode: u32,
}

impl CopyItem {
    /// An item holding `bytes` (its checksum computed).
    pub fn bytes(dest: String, bytes: Vec<u8>, mode: u32) -> CopyItem {
        CopyItem {
            dest,
            sha256: hex::encode(Sha256::digest(&bytes)),
            size: bytes.len() as u64,
            src: CopySrc::Bytes(bytes),
            mode,
        }
    }

    /// An item streaming the bundle file `e` from the bundle directory `dir`.
    pub fn file(dir: &std::path::Path, dest: String, e: &BundleFileEntry, mode: u32) -> CopyItem {
        CopyItem {
            dest,
            src: CopySrc::File(dir.join(&e.path)),
            sha256: e.sha256.clone(),
            size: e.size,
            mode,
        }
    }
}

/// The storage object (path under cluster 0's assisted-service `WORK_DIR`) that the bundle file
/// `rel` of cluster `cid` becomes, as node 0 stored it (assisted-service's object names:
/// `<cid>/logs/<host-id>/logs.tar.gz`, `<cid>/logs/controller/logs.tar.gz`, `<cid>/<name>.ign`,
/// `<cid>/kubeconfig-noingress`, `<cid>/kubeadmin-password`, `<cid>/install-config.yaml`,
/// `<cid>/metadata.json`, `<cid>/manifests/<folder>/<file>`). None: the file has no place
/// there (the REST answers, events, the all-logs tar, credentials.json, the dump).
pub fn storage_object(rel: &str, cid: &str) -> Option<String> {
    let (top, rest) = rel.split_once('/')?;
    let rest = rest.strip_prefix(cid)?.strip_prefix('/')?;
    match top {
        "logs" => rest
            .strip_prefix(super::export::LOG_OBJECTS)?
            .strip_prefix('/')
            .map(|r| format!("{cid}/logs/{r}")),
        "ignition" if !rest.contains('/') && rest.ends_with(".ign") => Some(format!("{cid}/{rest}")),
        // Not `kubeconfig`: before node 0's reboot only kubeconfig-noingress exists (node 0
        // serves it under both names), and an existing `<cid>/kubeconfig` makes assisted-service
        // skip merging the ingress CA uploaded after the reboot (V2UploadClusterIngressCert).
        "credentials" if ["kubeconfig-noingress", "kubeadmin-password"].contains(&rest) => {
            Some(format!("{cid}/{rest}"))
        }
        "files" if ["install-config.yaml", "metadata.json"].contains(&rest) => Some(format!("{cid}/{rest}")),
        "manifests" if rest.matches('/').count() == 1 => Some(format!("{cid}/manifests/{rest}")),
        _ => None,
    }
}

/// The bundle file that node 0's storage object `<cid>/<object>` becomes (option 1's export
/// reads node 0's storage directly): the inverse of [`storage_object`], which stays the one
/// rule (a name is taken only when [`storage_object`] gives it back). None: the object has no
/// place in a bundle (`<cid>/kubeconfig`, which cluster 0 must not get; anything else).
pub fn bundle_path(object: &str, cid: &str) -> Option<String> {
    let candidate = if let Some(r) = object.strip_prefix("logs/") {
        format!("logs/{cid}/{}/{r}", super::export::LOG_OBJECTS)
    } else if let Some(r) = object.strip_prefix("manifests/") {
        format!("manifests/{cid}/{r}")
    } else if object.ends_with(".ign") {
        format!("ignition/{cid}/{object}")
    } else if object.starts_with("kube") {
        format!("credentials/{cid}/{object}")
    } else {
        format!("files/{cid}/{object}")
    };
    (storage_object(&candidate, cid).as_deref() == Some(format!("{cid}/{object}").as_str()))
        .then_some(candidate)
}

/// The storage items of a bundle (every file with a [`storage_object`]), mode 0600: they are the
/// service's own files, credentials and Ignition configs among them.
pub fn storage_items(dir: &std::path::Path, cid: &str, files: &[BundleFileEntry]) -> Vec<CopyItem> {
    files
        .iter()
        .filter_map(|e| storage_object(&e.path, cid).map(|d| CopyItem::file(dir, d, e, 0o600)))
        .collect()
}

/// Writes a tar of `items` to `w` (regular files, owner-less, mtime 0).
pub fn write_items_tar(items: &[CopyItem], w: &mut dyn Write) -> std::io::Result<()> {
    let mut b = tar::Builder::new(w);
    b.mode(tar::HeaderMode::Deterministic);
    for it in items {
        let mut h = tar::Header::new_gnu();
        h.set_size(it.size);
        h.set_mode(it.mode);
        h.set_mtime(0);
        h.set_entry_type(tar::EntryType::Regular);
        match &it.src {
            CopySrc::Bytes(bytes) => b.append_data(&mut h, &it.dest, &bytes[..])?,
            CopySrc::File(p) => {
                let f = std::fs::File::open(p)?;
                // Exactly `size` bytes: a file grown since export must not break the tar.
                b.append_data(&mut h, &it.dest, std::io::Read::take(f, it.size))?
            }
        }
    }
    b.finish()
}

/// The files `sha256sum` output (`<hex>  <path>` lines, paths `dir/dest`) shows missing or
/// different from `items`, one message each ("DEST: sha256 X, the bundle's Y" or "DEST:
/// missing").
pub fn check_sums(dir: &str, items: &[CopyItem], out: &str) -> Vec<String> {
    let dir = dir.trim_end_matches('/');
    let got: std::collections::HashMap<&str, &str> = out
        .lines()
        .filter_map(|l| l.split_once("  "))
        .map(|(sum, path)| (path, sum.trim_start_matches('\\')))
        .collect();
    items
        .iter()
        .filter_map(|it| {
            let path = format!("{dir}/{}", it.dest);
            match got.get(path.as_str()) {
                Some(s) if s.eq_ignore_ascii_case(&it.sha256) => None,
                Some(s) => Some(format!("{}: sha256 {s}, the bundle's {}", it.dest, it.sha256)),
                None => Some(format!("{}: missing", it.dest)),
            }
        })
        .collect()
}

/// Copies `items` into `dir` of the container `at` (tar through exec) and reads them back
/// (`sha256sum`); a copy that differs is made once more. `what` names the destination in
/// messages ("PersistentVolumeClaim ns/x"). Errors: the exec refused (classified), tar failing
/// twice, or files still differing after the second copy ([`Error::Api`] naming the first of
/// them and what to do).
pub async fn copy_verified(
    kube: &KubeTarget,
    at: &PodContainer,
    dir: &str,
    items: Vec<CopyItem>,
    what: &str,
    progress: &dyn Fn(&str),
) -> Result<(), Error> {
    if items.is_empty() {
        return Ok(());
    }
    if let Some(bad) = items.iter().find(|it| {
        it.dest.starts_with('/') || it.dest.split('/').any(|c| c.is_empty() || c == "." || c == "..")
    }) {
        return Err(Error::Unexpected(format!(
            "refusing to copy {:?}: not a plain relative path",
            bad.dest
        )));
    }
    let items = Arc::new(items);
    let pod_ref = ResourceRef::namespaced("Pod", &at.namespace, &at.pod);
    let mut last = String::new();
    for attempt in 1..=2 {
        let its = items.clone();
        let producer = Producer::spawn(move |w| write_items_tar(&its, w));
        let argv: Vec<String> = ["tar", "-x", "-f", "-", "-C", dir]
            .iter()
            .map(|s| s.to_string())
            .collect();
        let out = exec::exec(kube, at, &argv, Some(producer), 64 * 1024).await?;
        let bad = if out.code != 0 {
            vec![format!("tar exited with {}: {}", out.code, out.stderr.trim())]
        } else {
            let mut argv = vec!["sha256sum".to_string(), "--".to_string()];
            argv.extend(
                items
                    .iter()
                    .map(|it| format!("{}/{}", dir.trim_end_matches('/'), it.dest)),
            );
            let sums = exec::exec(kube, at, &argv, None, exec::STDOUT_MAX).await?;
            if sums.code >= 126 || sums.stdout_truncated {
                return Err(Error::Api {
                    verb: "check the copied files through".into(),
                    resource: pod_ref,
                    message: format!(
                        "sha256sum {}: the copy to {what} cannot be checked; run the import again \
                         where the container has sha256sum (coreutils)",
                        if sums.stdout_truncated {
                            "answered more than import reads".to_string()
                        } else {
                            format!("exited with {}: {}", sums.code, sums.stderr.trim())
                        }
                    ),
                });
            }
            check_sums(dir, &items, &String::from_utf8_lossy(&sums.stdout))
        };
        if bad.is_empty() {
            return Ok(());
        }
        last = format!(
            "{} of {} files differ from the bundle after copying to {what} (first: {})",
            bad.len(),
            items.len(),
            bad[0]
        );
        if attempt == 1 {
            progress(&format!("warning: {last}; copying them again"));
        }
    }
    Err(Error::Api {
        verb: "copy the files through".into(),
        resource: pod_ref,
        message: format!(
            "{last}, twice: the exec stream was cut or the volume is full; check the pod and its \
             volume, then run the import again"
        ),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bundle_files_map_to_node_0s_storage_objects() {
        let c = "c1";
        for (rel, want) in [
            ("logs/c1/objects/h1/logs.tar.gz", Some("c1/logs/h1/logs.tar.gz")),
            (
                "logs/c1/objects/controller/logs.tar.gz",
                Some("c1/logs/controller/logs.tar.gz"),
            ),
            ("logs/c1/logs-all.tar", None),
            ("ignition/c1/bootstrap.ign", Some("c1/bootstrap.ign")),
            ("ignition/c1/master-h1.ign", Some("c1/master-h1.ign")),
            (
                "credentials/c1/kubeconfig-noingress",
                Some("c1/kubeconfig-noingress"),
            ),
            ("credentials/c1/kubeadmin-password", Some("c1/kubeadmin-password")),
            ("credentials/c1/kubeconfig", None),
            ("credentials/c1/credentials.json", None),
            ("files/c1/install-config.yaml", Some("c1/install-config.yaml")),
            ("files/c1/metadata.json", Some("c1/metadata.json")),
            (
                "manifests/c1/openshift/50-x.yaml",
                Some("c1/manifests/openshift/50-x.yaml"),
            ),
            ("manifests/c1/x.yaml", None),
            ("api/events-c1.json", None),
            ("db/dump.sql", None),
            // Another cluster's files never land under this one.
            ("logs/c2/objects/h1/logs.tar.gz", None),
            ("ignition/c12/master.ign", None),
        ] {
            assert_eq!(storage_object(rel, c).as_deref(), want, "{rel}");
        }
        // Option 1 reads node 0's storage: every object round-trips, `kubeconfig` has no place.
        for (obj, rel) in [
            ("logs/h1/logs.tar.gz", Some("logs/c1/objects/h1/logs.tar.gz")),
            (
                "logs/controller/logs.tar.gz",
                Some("logs/c1/objects/controller/logs.tar.gz"),
            ),
            ("master-h1.ign", Some("ignition/c1/master-h1.ign")),
            (
                "kubeconfig-noingress",
                Some("credentials/c1/kubeconfig-noingress"),
            ),
            ("kubeadmin-password", Some("credentials/c1/kubeadmin-password")),
            ("install-config.yaml", Some("files/c1/install-config.yaml")),
            (
                "manifests/openshift/50-x.yaml",
                Some("manifests/c1/openshift/50-x.yaml"),
            ),
            ("kubeconfig", None),
            ("manifests/a/b/c.yaml", None),
            ("other.txt", None),
            ("x/y.ign", None),
        ] {
            assert_eq!(bundle_path(obj, "c1").as_deref(), rel, "{obj}");
            if let Some(r) = rel {
                assert_eq!(storage_object(r, "c1"), Some(format!("c1/{obj}")));
            }
        }
    }

    #[test]
    fn sums_catch_short_and_missing_files() {
        let a = CopyItem::bytes("c1/a".into(), b"whole".to_vec(), 0o600);
        let b = CopyItem::bytes("c1/logs/h/logs.tar.gz".into(), b"log".to_vec(), 0o600);
        let short = hex::encode(Sha256::digest(b"who"));
        let out = format!("{short}  /data/c1/a\n{}  /data/c1/logs/h/logs.tar.gz\n", b.sha256);
        assert_eq!(
            check_sums("/data/", &[a.clone(), b.clone()], &out),
            [format!("c1/a: sha256 {short}, the bundle's {}", a.sha256)]
        );
        let out = format!("{}  /data/c1/a\n", a.sha256);
        assert_eq!(
            check_sums("/data", &[a.clone(), b.clone()], &out),
            ["c1/logs/h/logs.tar.gz: missing"]
        );
        let out = format!(
            "{}  /data/c1/a\n{}  /data/c1/logs/h/logs.tar.gz\n",
            a.sha256, b.sha256
        );
        assert!(check_sums("/data", &[a, b], &out).is_empty());
    }

    #[test]
    fn tar_holds_exactly_the_items() {
        use std::io::Read as _;
        let d = tempfile::tempdir().unwrap();
        std::fs::write(d.path().join("f"), b"FILE and more written since").unwrap();
        let e = BundleFileEntry {
            path: "f".into(),
            sha256: String::new(),
            size: 4,
        };
        let items = [
            CopyItem::file(d.path(), "c1/x/f".into(), &e, 0o640),
            CopyItem::bytes("c1/b".into(), b"BYTES".to_vec(), 0o600),
        ];
        let mut out = Vec::new();
        write_items_tar(&items, &mut out).unwrap();
        let mut a = tar::Archive::new(&out[..]);
        let mut got = Vec::new();
        for e in a.entries().unwrap() {
            let mut e = e.unwrap();
            let mode = e.header().mode().unwrap();
            let mut s = String::new();
            e.read_to_string(&mut s).unwrap();
            got.push((e.path().unwrap().display().to_string(), s, mode));
        }
        assert_eq!(
            got,
            [
                ("c1/x/f".to_string(), "FILE".to_string(), 0o640),
                ("c1/b".to_string(), "BYTES".to_string(), 0o600)
            ]
        );
    }
}
