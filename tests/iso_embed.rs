//! Node ISO embedding against the simulator's CoreOS-layout ISO and the real CoreOS ISO
//! layout fixtures of the published coreos-installer crate (`fixtures/iso`, found or fetched by
//! `agent_day2_sim::upstream::coreos_iso_fixtures`), read back with our own reader and with
//! `coreos-installer` (the oracle; scripts/test.sh installs it).

use std::fs::File;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use agent_day2::iso::cpio::{read_newc, CpioFile};
use agent_day2::iso::embed::{
    decompress_initrd, ignition_archive, plan_file, read_embedded, read_embedded_ignition, write_node_iso,
    Region, WriteOptions,
};
use agent_day2::iso::{config_image, pxe, IsoError};
use sha2::Digest;

fn config(n: usize) -> Vec<u8> {
    format!(r#"{{"ignition":{{"version":"3.2.0"}},"storage":{{"files":[{{"path":"/etc/x","contents":{{"source":"data:,{}"}}}}]}}}}"#, "a".repeat(n)).into_bytes()
}

fn sim_iso(dir: &Path) -> PathBuf {
    let p = dir.join("base.iso");
    agent_day2_sim::baseiso::build_base_iso(&p, "x86_64").unwrap();
    p
}

/// Every byte outside `regions` is equal, and the sizes are equal.
fn assert_same_outside(base: &Path, out: &Path, regions: &[Region]) {
    let a = std::fs::read(base).unwrap();
    let b = std::fs::read(out).unwrap();
    assert_eq!(a.len(), b.len(), "size changed");
    let mut diff = 0;
    for (i, (x, y)) in a.iter().zip(&b).enumerate() {
        if x != y {
            let i = i as u64;
            assert!(
                regions.iter().any(|r| i >= r.offset && i < r.end()),
                "byte {i} outside the embed areas changed"
            );
            diff += 1;
        }
    }
    assert!(diff > 0, "nothing changed");
}

fn coreos_installer() -> Option<PathBuf> {
    let candidates = [
        std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cargo/bin/coreos-installer")),
        Some(PathBuf::from("coreos-installer")),
    ];
    candidates.into_iter().flatten().find(|c| {
        Command::new(c)
            .arg("--version")
            .output()
            .map(|o| o.status.success())
            .unwrap_or(false)
    })
}

/// Reads our output with coreos-installer: the embedded config and the kargs must be ours.
fn oracle_check(out: &Path, cfg: &[u8], kargs: Option<&str>) {
    let ci = coreos_installer().expect("coreos-installer is not installed: cargo install --locked coreos-installer (scripts/test.sh does, through scripts/setup.sh)");
    let o = Command::new(&ci)
        .args(["iso", "ignition", "show"])
        .arg(out)
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "coreos-installer iso ignition show: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert_eq!(o.stdout, cfg, "coreos-installer shows another config");
    if let Some(k) = kargs {
        let o = Command::new(&ci)
            .args(["iso", "kargs", "show"])
            .arg(out)
            .output()
            .unwrap();
        assert!(
            o.status.success(),
            "coreos-installer iso kargs show: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        assert_eq!(String::from_utf8_lossy(&o.stdout).trim(), k);
    }
}

/// Embeds into `base`, checks everything, returns the output path.
fn embed_and_check(base: &Path, dir: &Path, extra_kargs: &[String], sha: bool) -> PathBuf {
    let p = plan_file(base).unwrap();
    let cfg = config(100);
    let archive = ignition_archive(&cfg, &[]).unwrap();
    let kargs = if p.karg_areas.is_empty() {
        None
    } else {
        p.kargs_appending(extra_kargs).unwrap()
    };
    let out = dir.join(format!(
        "{}.node.iso",
        base.file_name().unwrap().to_string_lossy()
    ));
    let w = write_node_iso(
        base,
        &out,
        &p,
        &archive,
        kargs.as_deref(),
        WriteOptions {
            force: false,
            sha256: sha,
        },
    )
    .unwrap();
    assert_eq!(w.size, std::fs::metadata(base).unwrap().len());
    if sha {
        assert_eq!(
            w.sha256.as_deref(),
            Some(hex::encode(sha2::Sha256::digest(std::fs::read(&out).unwrap())).as_str())
        );
    }
    assert_eq!(
        std::fs::metadata(&out).unwrap().permissions().mode() & 0o777,
        0o600
    );
    // read back with our reader
    let got = read_embedded_ignition(&mut File::open(&out).unwrap()).unwrap();
    assert_eq!(got.as_deref(), Some(cfg.as_slice()));
    let p2 = plan_file(&out).unwrap();
    assert!(p2.ignition_present);
    assert_eq!(p2.ignition_area, p.ignition_area);
    assert_eq!(p2.default_kargs, p.default_kargs);
    match &kargs {
        Some(k) => assert_eq!(p2.current_kargs.as_deref(), Some(k.as_str())),
        None => assert_eq!(p2.current_kargs, p.current_kargs),
    }
    assert_same_outside(base, &out, &p.regions());
    oracle_check(&out, &cfg, kargs.as_deref());
    out
}

#[test]
fn embeds_into_the_simulated_base_iso() {
    let d = tempfile::tempdir().unwrap();
    let base = sim_iso(d.path());
    let out = embed_and_check(&base, d.path(), &["fips=1".into(), "console=ttyS0".into()], true);
    let p = plan_file(&out).unwrap();
    assert_eq!(
        p.current_kargs.unwrap(),
        format!(
            "{} fips=1 console=ttyS0",
            agent_day2_sim::baseiso::default_kargs()
        )
    );
    // the bootloader configs end their kernel line with the new kargs
    let iso = std::fs::read(&out).unwrap();
    let mut r = std::io::Cursor::new(&iso);
    for f in ["EFI/redhat/grub.cfg", "isolinux/isolinux.cfg"] {
        let e = agent_day2_iso9660::get(&mut r, f).unwrap();
        let text = String::from_utf8(agent_day2_iso9660::read_entry(&mut r, &e).unwrap()).unwrap();
        assert!(
            text.contains("ignition.platform.id=metal fips=1 console=ttyS0\n#"),
            "{f}: {text}"
        );
        assert!(text.contains("# COREOS_KARG_EMBED_AREA"), "{f}");
    }
}

#[test]
fn kernel_copy_and_hashing_copy_write_the_same_bytes() {
    let d = tempfile::tempdir().unwrap();
    let base = sim_iso(d.path());
    let p = plan_file(&base).unwrap();
    let a = ignition_archive(&config(10), &[]).unwrap();
    let k = p.kargs_appending(&["fips=1".into()]).unwrap();
    let (o1, o2) = (d.path().join("1.iso"), d.path().join("2.iso"));
    let w1 = write_node_iso(
        &base,
        &o1,
        &p,
        &a,
        k.as_deref(),
        WriteOptions {
            force: false,
            sha256: false,
        },
    )
    .unwrap();
    let w2 = write_node_iso(
        &base,
        &o2,
        &p,
        &a,
        k.as_deref(),
        WriteOptions {
            force: false,
            sha256: true,
        },
    )
    .unwrap();
    assert_eq!(w1.sha256, None);
    assert_eq!(std::fs::read(&o1).unwrap(), std::fs::read(&o2).unwrap());
    assert_eq!(w1.size, w2.size);
}

#[test]
fn embeds_into_every_upstream_fixture() {
    let fixtures = agent_day2_sim::upstream::coreos_iso_fixtures().unwrap_or_else(|why| panic!("{why}"));
    let rd = std::fs::read_dir(&fixtures).unwrap();
    let d = tempfile::tempdir().unwrap();
    let mut names: Vec<_> = rd
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .filter(|p| p.to_string_lossy().ends_with(".iso.xz"))
        .collect();
    names.sort();
    let mut done = 0;
    for xz in names {
        let name = xz
            .file_name()
            .unwrap()
            .to_string_lossy()
            .trim_end_matches(".xz")
            .to_string();
        let iso = d.path().join(&name);
        let o = Command::new("xz").arg("-dc").arg(&xz).output().expect("xz runs");
        assert!(o.status.success());
        std::fs::write(&iso, &o.stdout).unwrap();
        if name == "synthetic.iso" {
            let e = plan_file(&iso).unwrap_err();
            assert!(matches!(e, IsoError::NotCoreOs { .. }), "{name}: {e}");
            continue;
        }
        let p = plan_file(&iso).unwrap_or_else(|e| panic!("{name}: {e}"));
        // facts of the fixtures (coreos-installer's own tests and the INDEX)
        assert_eq!(p.ignition_area.length, 262144, "{name}");
        if name.contains("s390x") {
            assert_eq!(p.ignition_file, "images/cdboot.img", "{name}");
            let e = agent_day2_iso9660::get(&mut File::open(&iso).unwrap(), "images/cdboot.img").unwrap();
            assert_eq!(p.ignition_area.offset, e.offset + 132096, "{name}");
        }
        if name == "embed-areas-2021-09.iso" {
            assert_eq!(p.ignition_area.offset, 102400);
            let offs: Vec<u64> = p.karg_areas.iter().map(|a| a.region.offset).collect();
            assert_eq!(offs, [98126, 371658]);
        }
        if name == "embed-areas-2020-09.iso" || name == "embed-areas-2023-03.s390x.iso" {
            assert!(p.karg_areas.is_empty(), "{name} has no karg areas");
            assert!(matches!(
                p.kargs_appending(&["fips=1".into()]).unwrap_err(),
                IsoError::NoKargAreas { .. }
            ));
        } else {
            assert!(!p.karg_areas.is_empty(), "{name} has karg areas");
            assert!(
                p.current_kargs.as_deref().unwrap().contains("ignition.firstboot"),
                "{name}"
            );
        }
        if name == "embed-areas-2021-01.iso" {
            assert!(
                p.karg_areas.iter().all(|a| a.file.is_none()),
                "legacy coreKarg header"
            );
        }
        if name == "embed-areas-2023-07.s390x.iso" {
            assert_eq!(p.karg_areas[0].pad, 0);
            assert_eq!(p.karg_areas[0].end, 0);
        }
        embed_and_check(&iso, d.path(), &["fips=1".into()], false);
        done += 1;
    }
    assert!(done >= 10, "only {done} fixtures embedded");
}

#[test]
fn too_large_ignition_is_refused_with_sizes_and_pxe_hint() {
    let d = tempfile::tempdir().unwrap();
    let base = sim_iso(d.path());
    let p = plan_file(&base).unwrap();
    // incompressible: pseudo-random bytes, base64-ish
    let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
    let big: Vec<u8> = (0..400_000)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"[(x % 64) as usize]
        })
        .collect();
    let a = ignition_archive(&big, &[]).unwrap();
    let out = d.path().join("node.iso");
    let e = write_node_iso(&base, &out, &p, &a, None, WriteOptions::default()).unwrap_err();
    let msg = e.to_string();
    assert!(matches!(e, IsoError::IgnitionTooLarge { .. }), "{msg}");
    assert!(
        msg.contains(&a.len().to_string()) && msg.contains("262144") && msg.contains("--pxe"),
        "{msg}"
    );
    assert!(!out.exists(), "no output on error");
    assert_eq!(
        std::fs::read_dir(d.path()).unwrap().count(),
        4,
        "no temporary file left (base + 3 PXE artifacts)"
    );
}

#[test]
fn non_iso_and_truncated_iso_give_clear_errors() {
    let d = tempfile::tempdir().unwrap();
    let txt = d.path().join("page.iso");
    std::fs::write(&txt, "<html>404 not found</html>\n".repeat(3000)).unwrap();
    let e = plan_file(&txt).unwrap_err();
    assert!(matches!(e, IsoError::NotIso { .. }), "{e}");
    assert!(e.to_string().contains("not an ISO9660 image"), "{e}");
    let empty = d.path().join("empty.iso");
    std::fs::write(&empty, b"").unwrap();
    assert!(plan_file(&empty).is_err());

    let base = sim_iso(d.path());
    let bytes = std::fs::read(&base).unwrap();
    let p = plan_file(&base).unwrap();
    // cut inside the Ignition area: directories are readable, the area is not
    let cut = d.path().join("cut.iso");
    std::fs::write(&cut, &bytes[..(p.ignition_area.offset + 1000) as usize]).unwrap();
    let e = plan_file(&cut).unwrap_err();
    assert!(matches!(e, IsoError::Truncated { .. }), "{e}");
    assert!(
        e.to_string().contains("truncated") && e.to_string().contains("download"),
        "{e}"
    );
    // cut before the directory tree
    std::fs::write(&cut, &bytes[..40_000]).unwrap();
    let e = plan_file(&cut).unwrap_err();
    assert!(
        matches!(e, IsoError::Truncated { .. } | IsoError::NotIso { .. }),
        "{e}"
    );
    // a missing base
    let e = plan_file(&d.path().join("nope.iso")).unwrap_err();
    assert!(e.to_string().contains("nope.iso"), "{e}");
}

#[test]
fn existing_output_is_not_replaced_without_force() {
    let d = tempfile::tempdir().unwrap();
    let base = sim_iso(d.path());
    let p = plan_file(&base).unwrap();
    let out = d.path().join("node.iso");
    std::fs::write(&out, b"precious").unwrap();
    let a = ignition_archive(&config(1), &[]).unwrap();
    let e = write_node_iso(&base, &out, &p, &a, None, WriteOptions::default()).unwrap_err();
    assert!(matches!(e, IsoError::AlreadyExists { .. }));
    assert!(
        e.to_string().contains("node.iso") && e.to_string().contains("--force"),
        "{e}"
    );
    assert_eq!(std::fs::read(&out).unwrap(), b"precious");
    write_node_iso(
        &base,
        &out,
        &p,
        &a,
        None,
        WriteOptions {
            force: true,
            sha256: false,
        },
    )
    .unwrap();
    assert_eq!(std::fs::read(&out).unwrap().len() as u64, p.image_size);
    assert_eq!(
        std::fs::metadata(&out).unwrap().permissions().mode() & 0o777,
        0o600
    );
}

#[test]
fn re_embedding_replaces_the_previous_config() {
    let d = tempfile::tempdir().unwrap();
    let base = sim_iso(d.path());
    let first = embed_and_check(&base, d.path(), &[], false);
    let p = plan_file(&first).unwrap();
    assert!(p.ignition_present);
    let a = ignition_archive(b"{\"second\":true}", &[]).unwrap();
    let out = d.path().join("again.iso");
    write_node_iso(&first, &out, &p, &a, None, WriteOptions::default()).unwrap();
    assert_eq!(
        read_embedded_ignition(&mut File::open(&out).unwrap())
            .unwrap()
            .unwrap(),
        b"{\"second\":true}"
    );
    assert_eq!(read_embedded(&mut File::open(&out).unwrap()).unwrap().len(), 1);
}

#[test]
fn archive_passes_xz_integrity_check_with_crc32() {
    let a = ignition_archive(
        &config(5000),
        &[CpioFile {
            path: "etc/coreos-firstboot-network/eth0.nmconnection",
            mode: 0o100600,
            mtime: 1,
            data: b"[connection]\nid=eth0\n",
        }],
    )
    .unwrap();
    let d = tempfile::tempdir().unwrap();
    let f = d.path().join("a.xz");
    std::fs::write(&f, &a).unwrap();
    let o = Command::new("xz")
        .args(["--robot", "-lv"])
        .arg(&f)
        .output()
        .expect("xz runs");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let s = String::from_utf8_lossy(&o.stdout);
    assert!(
        s.lines().any(|l| l.starts_with("file") && l.contains("CRC32")),
        "{s}"
    );
    assert!(!s.contains("CRC64"), "{s}");
    // GNU cpio lists the members
    let o = Command::new("sh")
        .arg("-c")
        .arg(format!("xz -dc {} | cpio -t --quiet", f.display()))
        .output()
        .unwrap();
    let list = String::from_utf8_lossy(&o.stdout);
    assert_eq!(
        list.lines().collect::<Vec<_>>(),
        [
            "config.ign",
            "etc",
            "etc/coreos-firstboot-network",
            "etc/coreos-firstboot-network/eth0.nmconnection"
        ]
    );
}

#[test]
fn pxe_files_from_the_simulated_iso() {
    let d = tempfile::tempdir().unwrap();
    let base = sim_iso(d.path());
    let p = plan_file(&base).unwrap();
    let cfg = config(42);
    let a = ignition_archive(&cfg, &[]).unwrap();
    let outdir = d.path().join("pxe");
    std::fs::create_dir(&outdir).unwrap();
    std::fs::set_permissions(&outdir, std::fs::Permissions::from_mode(0o755)).unwrap();
    let opts = pxe::PxeOptions {
        arch: "x86_64".into(),
        base_url: Some("http://192.168.111.1:8080/pxe/".into()),
        extra_kargs: vec!["fips=1".into()],
        force: false,
    };
    let files = pxe::write_pxe_files(&base, &outdir, &p, &a, &opts).unwrap();
    let [_, initrd_a, rootfs_a] = agent_day2_sim::baseiso::pxe_artifacts("x86_64");
    // kernel and rootfs are the ISO's bytes
    assert_eq!(std::fs::read(&files.rootfs).unwrap(), rootfs_a.1);
    assert_eq!(
        std::fs::read(&files.kernel).unwrap(),
        agent_day2_sim::baseiso::pxe_artifacts("x86_64")[0].1
    );
    // initrd = live initrd, zero padding to 4 bytes, our archive
    let initrd = std::fs::read(&files.initrd).unwrap();
    assert!(initrd.starts_with(&initrd_a.1));
    let at = initrd_a.1.len().next_multiple_of(4);
    assert!(initrd[initrd_a.1.len()..at].iter().all(|b| *b == 0));
    assert_eq!(&initrd[at..], a.as_slice());
    let m = read_newc(&decompress_initrd(&initrd[at..]).unwrap()).unwrap();
    assert_eq!(m[0].data, cfg);
    // the live initrd part still decompresses
    assert!(
        read_newc(&decompress_initrd(&initrd[..initrd_a.1.len()]).unwrap())
            .unwrap()
            .iter()
            .any(|m| m.path == "etc/sim-initrd-release")
    );
    // the oracle reads the config out of the concatenated initrd
    match coreos_installer() {
        Some(ci) => {
            let o = Command::new(ci)
                .args(["pxe", "ignition", "unwrap"])
                .arg(&files.initrd)
                .output()
                .unwrap();
            assert!(
                o.status.success(),
                "coreos-installer pxe ignition unwrap: {}",
                String::from_utf8_lossy(&o.stderr)
            );
            assert_eq!(o.stdout, cfg);
        }
        None => panic!("coreos-installer is not installed: cargo install --locked coreos-installer (scripts/test.sh does, through scripts/setup.sh)"),
    }
    assert!(!files.kargs.contains("coreos.liveiso="), "{}", files.kargs);
    assert!(
        files
            .kargs
            .contains("ignition.firstboot ignition.platform.id=metal"),
        "{}",
        files.kargs
    );
    assert!(
        files
            .kargs
            .contains("coreos.live.rootfs_url=http://192.168.111.1:8080/pxe/node.x86_64-rootfs.img"),
        "{}",
        files.kargs
    );
    assert!(files.kargs.ends_with("fips=1"));
    let ipxe = std::fs::read_to_string(files.ipxe.as_ref().unwrap()).unwrap();
    assert!(ipxe.starts_with("#!ipxe\n"));
    assert!(
        ipxe.contains("initrd --name initrd http://192.168.111.1:8080/pxe/node.x86_64-initrd.img\n"),
        "{ipxe}"
    );
    assert!(
        ipxe.contains(&format!(
            "kernel http://192.168.111.1:8080/pxe/node.x86_64-vmlinuz initrd=initrd {}\n",
            files.kargs
        )),
        "{ipxe}"
    );
    for f in [
        &files.kernel,
        &files.initrd,
        &files.rootfs,
        files.ipxe.as_ref().unwrap(),
    ] {
        assert_eq!(
            std::fs::metadata(f).unwrap().permissions().mode() & 0o777,
            0o600,
            "{}",
            f.display()
        );
    }
    assert_eq!(
        std::fs::metadata(&outdir).unwrap().permissions().mode() & 0o777,
        0o755,
        "--dir not chmod-ed"
    );
    // again without force: refused before writing anything
    let e = pxe::write_pxe_files(&base, &outdir, &p, &a, &opts).unwrap_err();
    assert!(matches!(e, IsoError::AlreadyExists { .. }), "{e}");
    let again = pxe::PxeOptions {
        force: true,
        base_url: None,
        ..opts
    };
    let f2 = pxe::write_pxe_files(&base, &outdir, &p, &a, &again).unwrap();
    assert!(f2.ipxe.is_none() && !f2.kargs.contains("rootfs_url"));
}

#[test]
fn config_image_file_is_0600_with_the_appliance_label() {
    let d = tempfile::tempdir().unwrap();
    let out = d.path().join("agentconfig.noarch.iso");
    let files = [CpioFile {
        path: "/etc/assisted/rendezvous-host.env",
        mode: 0o100600,
        mtime: 1_737_552_420,
        data: b"NODE_ZERO_IP=192.168.111.80\n",
    }];
    config_image::write_config_image(&out, &files, false).unwrap();
    assert_eq!(
        std::fs::metadata(&out).unwrap().permissions().mode() & 0o777,
        0o600
    );
    assert!(config_image::write_config_image(&out, &files, false).is_err());
    match Command::new("isoinfo").arg("-d").arg("-i").arg(&out).output() {
        Ok(o) => {
            let s = String::from_utf8_lossy(&o.stdout);
            assert!(s.contains("Volume id: agent_configimage"), "{s}");
            let o = Command::new("isoinfo")
                .args(["-R", "-x", "/config.gz", "-i"])
                .arg(&out)
                .output()
                .unwrap();
            let cpio = decompress_initrd(&o.stdout).unwrap();
            assert_eq!(read_newc(&cpio).unwrap()[0].mtime, 1_737_552_420);
        }
        Err(e) => {
            panic!("isoinfo not runnable ({e}): apt-get install genisoimage (scripts/test.sh installs it)")
        }
    }
}

#[test]
fn aarch64_pxe_kernel_is_written_decompressed() {
    use agent_day2_iso9660::{write_iso, IsoData, IsoInput};
    use std::io::Write;
    let d = tempfile::tempdir().unwrap();
    let plan = plan_file(&sim_iso(d.path())).unwrap();
    let kernel = b"ARM64 kernel image bytes".repeat(100);
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    gz.write_all(&kernel).unwrap();
    let gz = gz.finish().unwrap();
    let file = |p: &str, b: Vec<u8>| IsoInput {
        path: p.into(),
        data: IsoData::Bytes(b),
        mtime: std::time::UNIX_EPOCH,
    };
    let iso = d.path().join("arm.iso");
    let mut bytes = Vec::new();
    write_iso(
        &mut bytes,
        "arm",
        &[
            file("images/pxeboot/vmlinuz", gz.clone()),
            file("images/pxeboot/initrd.img", vec![7; 10]),
            file("images/pxeboot/rootfs.img", vec![1; 5000]),
        ],
    )
    .unwrap();
    std::fs::write(&iso, &bytes).unwrap();
    let a = ignition_archive(b"{}", &[]).unwrap();
    for (arch, want) in [("aarch64", kernel.clone()), ("x86_64", gz.clone())] {
        let opts = pxe::PxeOptions {
            arch: arch.into(),
            ..Default::default()
        };
        let f = pxe::write_pxe_files(&iso, d.path(), &plan, &a, &opts).unwrap();
        assert_eq!(std::fs::read(&f.kernel).unwrap(), want, "{arch}");
        // 10-byte initrd: 2 bytes of padding before the archive
        let initrd = std::fs::read(&f.initrd).unwrap();
        assert_eq!(&initrd[..12], &[7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 0, 0]);
        assert_eq!(&initrd[12..], a.as_slice());
    }
    // an ISO without PXE artifacts
    let mut bytes = Vec::new();
    write_iso(&mut bytes, "nopxe", &[file("images/pxeboot/vmlinuz", gz)]).unwrap();
    let nopxe = d.path().join("nopxe.iso");
    std::fs::write(&nopxe, &bytes).unwrap();
    let out = d.path().join("out");
    std::fs::create_dir(&out).unwrap();
    let e = pxe::write_pxe_files(
        &nopxe,
        &out,
        &plan,
        &a,
        &pxe::PxeOptions {
            arch: "aarch64".into(),
            ..Default::default()
        },
    )
    .unwrap_err();
    assert!(
        matches!(&e, IsoError::MissingFile { path } if path == "images/pxeboot/initrd.img"),
        "{e}"
    );
    assert_eq!(std::fs::read_dir(&out).unwrap().count(), 0, "nothing written");
}
