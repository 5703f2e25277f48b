//! Reader against the real CoreOS layout fixtures and the writer against our reader, isoinfo
//! and xorriso.

use std::io::Cursor;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, UNIX_EPOCH};

use agent_day2_iso9660::{find, get, list, read_entry, volume_id, write_iso, IsoData, IsoError, IsoInput};

/// The CoreOS live-ISO layout fixtures of the published coreos-installer crate (its
/// `fixtures/iso`): `$AGENT_DAY2_COREOS_INSTALLER_SRC/fixtures/iso`, else the cargo registry's
/// copy (scripts/setup.sh's `cargo install coreos-installer` leaves it there; so does
/// agent-day2-sim's `upstream::coreos_iso_fixtures`, which fetches it when missing). This crate
/// cannot use that module (agent-day2-sim depends on it), so it only looks.
fn fixtures() -> Option<PathBuf> {
    const VERSION: &str = "0.27.0";
    if let Some(d) = std::env::var_os("AGENT_DAY2_COREOS_INSTALLER_SRC") {
        let p = Path::new(&d).join("fixtures/iso");
        assert!(p.join("INDEX").is_file(), "{} has no INDEX", p.display());
        return Some(p);
    }
    let cargo_home = std::env::var_os("CARGO_HOME")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(&std::env::var_os("HOME").unwrap_or_default()).join(".cargo"));
    let found = std::fs::read_dir(cargo_home.join("registry/src"))
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path().join(format!("coreos-installer-{VERSION}/fixtures/iso")))
        .find(|p| p.join("INDEX").is_file());
    Some(found.unwrap_or_else(|| {
        panic!(
            "needs the CoreOS ISO fixtures of the coreos-installer {VERSION} crate: `cargo install --locked \
             coreos-installer@{VERSION}` (scripts/test.sh does) or `cargo fetch` of it puts them in the cargo \
             registry; or set AGENT_DAY2_COREOS_INSTALLER_SRC to its source tree"
        )
    }))
}

fn unxz(path: &Path) -> Option<Vec<u8>> {
    match Command::new("xz").arg("-dc").arg(path).output() {
        Ok(o) if o.status.success() => Some(o.stdout),
        Ok(o) => panic!(
            "xz -dc {} failed: {}",
            path.display(),
            String::from_utf8_lossy(&o.stderr)
        ),
        Err(e) => panic!("xz not runnable ({e}): apt-get install xz-utils (scripts/test.sh installs it)"),
    }
}

fn has_tool(name: &str) -> bool {
    let ok = Command::new(name).arg("-version").output().is_ok();
    assert!(
        ok,
        "{name} is not installed: apt-get install -y genisoimage xorriso (scripts/test.sh installs them)"
    );
    ok
}

/// Which embed files INDEX says each fixture has.
fn index_expectations(index: &str) -> Vec<(String, bool, bool)> {
    // (file, has igninfo.json, has kargs.json)
    let mut out: Vec<(String, bool, bool)> = Vec::new();
    for line in index.lines() {
        if line.ends_with(".iso.xz") && !line.starts_with(' ') {
            out.push((line.trim().to_string(), false, false));
        } else if let Some(last) = out.last_mut() {
            if line.trim_start().starts_with("igninfo.json") {
                last.1 = true;
            }
            if line.trim_start().starts_with("kargs.json") {
                last.2 = true;
            }
        }
    }
    out
}

/// offsets of a path according to `isoinfo -R -l` (the extent LBA in brackets)
fn isoinfo_extent(iso: &Path, path: &str) -> Option<u64> {
    let out = Command::new("isoinfo")
        .args(["-R", "-l", "-i"])
        .arg(iso)
        .output()
        .ok()?;
    let text = String::from_utf8_lossy(&out.stdout);
    let (dir, name) = path.rsplit_once('/').unwrap_or(("", path));
    let header = format!(
        "Directory listing of /{}{}",
        dir,
        if dir.is_empty() { "" } else { "/" }
    );
    let mut in_dir = false;
    for line in text.lines() {
        if line.starts_with("Directory listing of ") {
            in_dir = line.trim_end() == header;
            continue;
        }
        if in_dir && line.trim_end().ends_with(&format!(" {name}")) {
            let lb = line.find('[')?;
            let lba: u64 = line[lb + 1..].split_whitespace().next()?.parse().ok()?;
            return Some(lba * 2048);
        }
    }
    None
}

#[test]
fn fixtures_have_embed_files_where_index_says() {
    let Some(dir) = fixtures() else { return };
    let index = std::fs::read_to_string(dir.join("INDEX")).unwrap();
    let exp = index_expectations(&index);
    assert!(exp.len() >= 10, "INDEX parsed into {} entries", exp.len());
    let isoinfo = has_tool("isoinfo");
    let tmp = tempfile::tempdir().unwrap();
    for (file, igninfo, kargs) in exp {
        let Some(bytes) = unxz(&dir.join(&file)) else {
            return;
        };
        let s390x = file.contains("s390x");
        let mut r = Cursor::new(&bytes);
        let vid = volume_id(&mut r).unwrap();
        assert!(
            vid.contains("coreos") || vid.starts_with("rhcos-"),
            "{file}: volume id {vid}"
        );
        let all = list(&mut r).unwrap();
        // Rock Ridge names are used for the listing
        assert!(
            all.iter()
                .any(|e| e.path == "images/pxeboot/initrd.img" && !e.is_dir),
            "{file}: {all:?}"
        );

        let ign = find(&mut r, "coreos/igninfo.json").unwrap();
        assert_eq!(ign.is_some(), igninfo, "{file}: igninfo.json presence");
        let kj = find(&mut r, "coreos/kargs.json").unwrap();
        assert_eq!(kj.is_some(), kargs, "{file}: kargs.json presence");
        // coreos-installer's spelling finds the same entries
        assert_eq!(
            find(&mut r, "COREOS/IGNINFO.JSO").unwrap().map(|e| e.offset),
            ign.as_ref().map(|e| e.offset)
        );
        let img = find(&mut r, "images/ignition.img").unwrap();
        assert_eq!(img.is_some(), !s390x, "{file}: ignition.img presence");
        if let Some(img) = &img {
            assert_eq!(img.size, 262144, "{file}: ignition.img is the 256 KiB embed area");
            assert!(
                read_entry(&mut r, img).unwrap().iter().all(|b| *b == 0),
                "{file}: pristine area is zeros"
            );
        }
        if let Some(ign) = &ign {
            let json: String = String::from_utf8(read_entry(&mut r, ign).unwrap()).unwrap();
            let want = if s390x {
                "images/cdboot.img"
            } else {
                "images/ignition.img"
            };
            assert!(json.contains(want), "{file}: igninfo.json = {json}");
        }
        if let Some(k) = &kj {
            let json = String::from_utf8(read_entry(&mut r, k).unwrap()).unwrap();
            assert!(json.contains("\"size\""), "{file}: kargs.json = {json}");
            // every kargs area file named there exists and carries the marker after the area
            let doc: serde_json::Value = serde_json::from_str(&json).unwrap();
            let v: Vec<(String, bool)> = doc["files"]
                .as_array()
                .unwrap()
                .iter()
                .map(|f| {
                    (
                        f["path"].as_str().unwrap().to_string(),
                        f.get("pad").is_none_or(|p| p == "#"),
                    )
                })
                .collect();
            assert!(!v.is_empty(), "{file}: no files in kargs.json");
            for (p, marked) in v {
                let e = get(&mut r, &p).unwrap_or_else(|e| panic!("{file}: {e}"));
                let text = read_entry(&mut r, &e).unwrap();
                assert!(
                    !marked || String::from_utf8_lossy(&text).contains("COREOS_KARG_EMBED_AREA"),
                    "{file}: {p}"
                );
            }
        }
        if isoinfo {
            let p = tmp.path().join(file.trim_end_matches(".xz"));
            std::fs::write(&p, &bytes).unwrap();
            for e in [ign, kj, img].into_iter().flatten() {
                assert_eq!(
                    isoinfo_extent(&p, &e.path),
                    Some(e.offset),
                    "{file}: {} offset vs isoinfo",
                    e.path
                );
            }
        }
    }
}

#[test]
fn known_fixture_offsets() {
    // extents read with `isoinfo -l` from embed-areas-2023-07.x86_64.iso: IGNITION.IMG at LBA 68,
    // IGNINFO.JSO at 202, KARGS.JSO at 203
    let Some(dir) = fixtures() else { return };
    let Some(bytes) = unxz(&dir.join("embed-areas-2023-07.x86_64.iso.xz")) else {
        return;
    };
    let mut r = Cursor::new(bytes);
    assert_eq!(get(&mut r, "images/ignition.img").unwrap().offset, 68 * 2048);
    assert_eq!(get(&mut r, "coreos/igninfo.json").unwrap().offset, 202 * 2048);
    assert_eq!(get(&mut r, "coreos/kargs.json").unwrap().offset, 203 * 2048);
    assert_eq!(get(&mut r, "coreos/igninfo.json").unwrap().size, 36);
}

#[test]
fn synthetic_fixture_plain_iso9660() {
    let Some(dir) = fixtures() else { return };
    let Some(bytes) = unxz(&dir.join("synthetic.iso.xz")) else {
        return;
    };
    let mut r = Cursor::new(bytes);
    assert_eq!(volume_id(&mut r).unwrap(), "volume-ID-string");
    let all = list(&mut r).unwrap();
    // 150 files in an 8 KiB directory: records continue after zero padding at sector ends
    let large = all.iter().filter(|e| e.path.starts_with("LARGEDIR/")).count();
    assert_eq!(large, 150);
    assert!(all.iter().any(|e| e.path == "LARGEDIR/150.DAT"));
    assert!(all.iter().any(|e| e.path == "NAMES/ABCDEFGH.MNO"));
    let f = get(&mut r, "really/very/deeply/nested/file.txt").unwrap();
    assert_eq!(read_entry(&mut r, &f).unwrap(), b"foo\n");
    assert!(find(&mut r, "CONTENT/FILE.TXT/STUFF.TXT").unwrap().is_none());
    assert!(find(&mut r, "MISSING").unwrap().is_none());
    assert!(matches!(get(&mut r, "MISSING/X"), Err(IsoError::NotFound { path }) if path == "MISSING/X"));
}

fn sample_inputs() -> Vec<IsoInput> {
    let t = UNIX_EPOCH + Duration::from_secs(1_737_552_420);
    let mut v = vec![
        IsoInput {
            path: "coreos/igninfo.json".into(),
            data: IsoData::Bytes(br#"{"file":"images/ignition.img"}"#.to_vec()),
            mtime: t,
        },
        IsoInput {
            path: "images/ignition.img".into(),
            data: IsoData::Bytes(vec![0; 262144]),
            mtime: t,
        },
        IsoInput {
            path: "images/pxeboot/vmlinuz".into(),
            data: IsoData::Bytes(b"kernel".to_vec()),
            mtime: t,
        },
        IsoInput {
            path: "images/pxeboot/initrd.img".into(),
            data: IsoData::Bytes(vec![7; 5000]),
            mtime: t,
        },
        IsoInput {
            path: "EFI/redhat/grub.cfg".into(),
            data: IsoData::Bytes(b"menuentry".to_vec()),
            mtime: t,
        },
        IsoInput {
            path: "empty".into(),
            data: IsoData::Bytes(Vec::new()),
            mtime: t,
        },
        // two names with the same 8.3 form
        IsoInput {
            path: "coreos/features.json".into(),
            data: IsoData::Bytes(b"{}".to_vec()),
            mtime: t,
        },
        IsoInput {
            path: "coreos/features.jsonx".into(),
            data: IsoData::Bytes(b"x".to_vec()),
            mtime: t,
        },
    ];
    // a directory spanning several sectors
    for i in 0..120 {
        v.push(IsoInput {
            path: format!("many/file-number-{i:03}.txt"),
            data: IsoData::Bytes(format!("{i}\n").into_bytes()),
            mtime: t,
        });
    }
    v
}

#[test]
fn round_trip() {
    let inputs = sample_inputs();
    let mut out = Vec::new();
    write_iso(&mut out, "rhcos-418.94.202501221327-0", &inputs).unwrap();
    assert_eq!(out.len() % 2048, 0);
    let mut r = Cursor::new(&out);
    assert_eq!(volume_id(&mut r).unwrap(), "rhcos-418.94.202501221327-0");
    for input in &inputs {
        let e = get(&mut r, &input.path).unwrap();
        assert_eq!(e.path, input.path, "Rock Ridge name read back");
        assert_eq!(e.offset % 2048, 0);
        let IsoData::Bytes(want) = &input.data else {
            unreachable!()
        };
        assert_eq!(&read_entry(&mut r, &e).unwrap(), want, "{}", input.path);
    }
    // coreos-installer's 8.3 spelling
    let a = get(&mut r, "COREOS/IGNINFO.JSO").unwrap();
    assert_eq!(a, get(&mut r, "coreos/igninfo.json").unwrap());
    get(&mut r, "IMAGES/PXEBOOT/VMLINUZ").unwrap();
    let all = list(&mut r).unwrap();
    assert_eq!(all.iter().filter(|e| !e.is_dir).count(), inputs.len());
    assert!(all.iter().any(|e| e.path == "images/pxeboot" && e.is_dir));
    // same inputs, same bytes
    let mut again = Vec::new();
    write_iso(&mut again, "rhcos-418.94.202501221327-0", &inputs).unwrap();
    assert!(out == again, "output is deterministic");
}

#[test]
fn file_data_source_and_short_file() {
    let tmp = tempfile::tempdir().unwrap();
    let p = tmp.path().join("data");
    std::fs::write(&p, vec![0xAB; 10_000]).unwrap();
    let inputs = vec![IsoInput {
        path: "config.gz".into(),
        data: IsoData::File {
            path: p.clone(),
            len: 10_000,
        },
        mtime: UNIX_EPOCH,
    }];
    let mut out = Vec::new();
    write_iso(&mut out, "agent_configimage", &inputs).unwrap();
    let mut r = Cursor::new(&out);
    assert_eq!(volume_id(&mut r).unwrap(), "agent_configimage");
    let e = get(&mut r, "config.gz").unwrap();
    assert_eq!(read_entry(&mut r, &e).unwrap(), vec![0xAB; 10_000]);
    let bad = vec![IsoInput {
        path: "config.gz".into(),
        data: IsoData::File { path: p, len: 20_000 },
        mtime: UNIX_EPOCH,
    }];
    let err = write_iso(Vec::new(), "x", &bad).unwrap_err();
    assert!(err.to_string().contains("config.gz"), "{err}");
}

#[test]
fn bad_inputs_are_refused() {
    let t = UNIX_EPOCH;
    let f = |p: &str| IsoInput {
        path: p.into(),
        data: IsoData::Bytes(vec![1]),
        mtime: t,
    };
    for (inputs, needle) in [
        (vec![f("a/../b")], "a/../b"),
        (vec![f("a"), f("a")], "recorded twice"),
        (vec![f("a"), f("a/b")], "both a file and a directory"),
        (vec![f("")], "empty path"),
    ] {
        let err = write_iso(Vec::new(), "v", &inputs).unwrap_err().to_string();
        assert!(err.contains(needle), "{err}");
    }
    assert!(write_iso(Vec::new(), &"x".repeat(33), &[]).is_err());
}

#[test]
fn reader_errors() {
    let mut r = Cursor::new(vec![0u8; 40_000]);
    assert!(matches!(list(&mut r), Err(IsoError::NotIso { offset: 32769 })));
    let mut r = Cursor::new(vec![0u8; 100]);
    let e = list(&mut r).unwrap_err();
    assert!(e.to_string().contains("not an ISO9660 image"), "{e}");
    // truncated: a valid image cut after the descriptors
    let mut out = Vec::new();
    write_iso(&mut out, "v", &sample_inputs()).unwrap();
    out.truncate(19 * 2048);
    let e = list(&mut Cursor::new(out)).unwrap_err();
    assert!(matches!(e, IsoError::Truncated { .. }), "{e}");
}

#[test]
fn external_tools_read_our_iso() {
    let inputs = sample_inputs();
    let tmp = tempfile::tempdir().unwrap();
    let iso = tmp.path().join("t.iso");
    write_iso(std::fs::File::create(&iso).unwrap(), "agent_configimage", &inputs).unwrap();
    if has_tool("isoinfo") {
        let out = Command::new("isoinfo")
            .args(["-R", "-f", "-i"])
            .arg(&iso)
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        let listed: Vec<String> = String::from_utf8_lossy(&out.stdout)
            .lines()
            .map(|l| l.trim_start_matches('/').to_string())
            .collect();
        for i in &inputs {
            assert!(
                listed.contains(&i.path),
                "isoinfo -R -f lacks {}: {listed:?}",
                i.path
            );
        }
        let out = Command::new("isoinfo")
            .args(["-d", "-i"])
            .arg(&iso)
            .output()
            .unwrap();
        let d = String::from_utf8_lossy(&out.stdout);
        assert!(d.contains("Volume id: agent_configimage"), "{d}");
        assert!(d.contains("Rock Ridge signatures version 1 found"), "{d}");
        // plain ISO9660 names and the extent agree with our reader
        assert_eq!(
            isoinfo_extent(&iso, "images/ignition.img"),
            Some(
                get(&mut std::fs::File::open(&iso).unwrap(), "images/ignition.img")
                    .unwrap()
                    .offset
            )
        );
        let out = Command::new("isoinfo")
            .args(["-x", "/COREOS/IGNINFO.JSO;1", "-i"])
            .arg(&iso)
            .output()
            .unwrap();
        assert_eq!(out.stdout, br#"{"file":"images/ignition.img"}"#);
    }
    if has_tool("xorriso") {
        let out = Command::new("xorriso")
            .args(["-indev"])
            .arg(&iso)
            .args(["-find", "/", "-type", "f"])
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{err}");
        assert!(!err.contains("FAILURE") && !err.contains("SORRY"), "{err}");
        for i in &inputs {
            assert!(
                text.contains(&format!("'/{}'", i.path)),
                "xorriso lacks {}: {text}",
                i.path
            );
        }
        let out = Command::new("xorriso")
            .arg("-indev")
            .arg(&iso)
            .args(["-osirrox", "on", "-extract", "/images/pxeboot/vmlinuz"])
            .arg(tmp.path().join("k"))
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        assert_eq!(std::fs::read(tmp.path().join("k")).unwrap(), b"kernel");
    }
}

#[test]
fn genisoimage_joliet_and_rock_ridge_images() {
    if !has_tool("genisoimage") {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let tree = tmp.path().join("tree");
    std::fs::create_dir_all(tree.join("coreos")).unwrap();
    std::fs::create_dir_all(tree.join("images/pxeboot")).unwrap();
    std::fs::write(
        tree.join("coreos/igninfo.json"),
        br#"{"file":"images/ignition.img"}"#,
    )
    .unwrap();
    std::fs::write(tree.join("images/ignition.img"), vec![0u8; 262144]).unwrap();
    std::fs::write(tree.join("images/pxeboot/vmlinuz"), b"k").unwrap();
    for (flag, expect_lower) in [("-J", true), ("-R", true), ("-l", false)] {
        let iso = tmp.path().join(format!("t{flag}.iso"));
        let out = Command::new("genisoimage")
            .args(["-quiet", "-V", "TESTISO", flag, "-o"])
            .arg(&iso)
            .arg(&tree)
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        let mut f = std::fs::File::open(&iso).unwrap();
        let names: Vec<String> = list(&mut f).unwrap().into_iter().map(|e| e.path).collect();
        assert_eq!(
            names.contains(&"images/pxeboot/vmlinuz".to_string()),
            expect_lower,
            "{flag}: {names:?}"
        );
        let e = get(&mut f, "coreos/igninfo.json").unwrap();
        assert_eq!(
            read_entry(&mut f, &e).unwrap(),
            br#"{"file":"images/ignition.img"}"#,
            "{flag}"
        );
        assert_eq!(isoinfo_extent(&iso, &e.path).or(Some(e.offset)), Some(e.offset));
    }
}
