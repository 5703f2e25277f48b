//! Embedding an Ignition config and kernel arguments into a CoreOS/RHCOS live ISO the way
//! coreos-installer 0.27 does (`src/live/embed.rs`: `InitrdEmbedArea`, `KargEmbedAreas`;
//! docs/iso.md "Embedding the Ignition config"), without re-mastering the image.
//!
//! * Ignition area: `coreos/igninfo.json` `{file, offset?, length?}` names a file of the image
//!   and a byte range in it (s390x: inside `images/cdboot.img`); without the JSON it is the
//!   whole `images/ignition.img`. It receives an xz (CRC32 check) newc cpio holding
//!   `config.ign`, and zeros after it. The bootloader loads that file as a second initrd.
//! * Karg areas: `coreos/kargs.json` `{default, files: [{path, offset, pad?, end?}], size}`
//!   marks `size` bytes at `offset` in each bootloader config; an area holds the kargs, `end`
//!   (default `\n`), then `pad` (default `#`) up to `size`. Images from before kargs.json
//!   carry a 72-byte `coreKarg` header at byte 32672 instead (still read by coreos-installer).
//!
//! [`plan`] reads those facts, [`ignition_archive`] builds the archive, [`write_node_iso`]
//! copies the base and patches only the areas.

use std::fs::File;
use std::io::{Read, Seek, SeekFrom, Write};
use std::os::unix::fs::FileExt;
use std::path::Path;

use agent_day2_iso9660 as iso9660;
use serde::Deserialize;
use sha2::{Digest, Sha256};

use super::cpio::{newc_archive, read_newc, CpioFile, CpioMember};
use super::error::{IsoError, Result};
use super::output::AtomicFile;

/// Name of the Ignition config inside the embedded initrd archive; the kernel unpacks it to
/// `/config.ign`, which Ignition's dracut module reads on live images.
pub const IGNITION_MEMBER: &str = "config.ign";
/// Mode of `config.ign` in the archive (regular file, root read/write only: it holds the pull
/// secret).
pub const IGNITION_MODE: u32 = 0o100600;
/// Largest karg area coreos-installer accepts (`COREOS_KARG_EMBED_AREA_MAX_SIZE`).
pub const MAX_KARG_AREA: usize = 2048;
/// Byte offset of the legacy `coreKarg` header (32 KiB System Area - 24 - 72).
const LEGACY_KARG_HEADER: u64 = 32768 - 24 - 72;
const DEFAULT_IGNITION_FILE: &str = "images/ignition.img";

/// A byte range of the image.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Region {
    /// Offset in bytes from the start of the image.
    pub offset: u64,
    /// Length in bytes.
    pub length: u64,
}

impl Region {
    /// One past the last byte.
    pub fn end(&self) -> u64 {
        self.offset + self.length
    }
    fn overlaps(&self, o: &Region) -> bool {
        self.offset < o.end() && o.offset < self.end()
    }
}

/// One kernel-argument embed area.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KargArea {
    /// Where it is in the image (length = the `size` of kargs.json).
    pub region: Region,
    /// The bootloader config holding it (`EFI/redhat/grub.cfg`), or `None` for areas named by
    /// the legacy `coreKarg` header.
    pub file: Option<String>,
    /// Padding byte after the line end (kargs.json `pad`, default `#`; `\0` on s390x).
    pub pad: u8,
    /// Byte ending the kargs (kargs.json `end`, default `\n`).
    pub end: u8,
}

/// Where a base ISO takes an Ignition config and kernel arguments, read by [`plan`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EmbedPlan {
    /// Size of the base image in bytes; [`write_node_iso`] refuses a base of another size.
    pub image_size: u64,
    /// The ISO file holding the Ignition area, as igninfo.json names it
    /// (`images/ignition.img`, `images/cdboot.img`).
    pub ignition_file: String,
    /// The Ignition embed area (256 KiB on images built by cosa).
    pub ignition_area: Region,
    /// Whether the area already holds something (any non-zero byte): an ISO that was
    /// customised before. It is overwritten, as `coreos-installer iso ignition embed -f` does.
    pub ignition_present: bool,
    /// Karg areas sorted by offset; empty when the image has none (old or s390x 2023-03 images).
    pub karg_areas: Vec<KargArea>,
    /// Size of every karg area in bytes (0 when there are none).
    pub karg_area_size: usize,
    /// kargs.json `default` (the kargs the image was built with), if there are karg areas.
    pub default_kargs: Option<String>,
    /// The kargs the areas hold now (identical in every area), if there are karg areas.
    pub current_kargs: Option<String>,
}

#[derive(Deserialize)]
struct IgnInfo {
    file: String,
    offset: Option<u64>,
    length: Option<u64>,
}

#[derive(Deserialize)]
struct KargsJson {
    default: String,
    files: Vec<KargsJsonFile>,
    size: usize,
}

#[derive(Deserialize)]
struct KargsJsonFile {
    path: String,
    offset: u64,
    pad: Option<char>,
    end: Option<char>,
}

fn read_exact_at<R: Read + Seek>(
    r: &mut R,
    offset: u64,
    len: usize,
    what: &str,
    image_size: u64,
) -> Result<Vec<u8>> {
    if offset.checked_add(len as u64).is_none_or(|e| e > image_size) {
        return Err(IsoError::Truncated {
            what: format!("{what} ({len} bytes)"),
            offset,
        });
    }
    r.seek(SeekFrom::Start(offset))
        .map_err(|e| IsoError::io(format!("seeking to {what} at byte {offset}"), e))?;
    let mut buf = vec![0u8; len];
    r.read_exact(&mut buf).map_err(|e| {
        if e.kind() == std::io::ErrorKind::UnexpectedEof {
            IsoError::Truncated {
                what: what.to_string(),
                offset,
            }
        } else {
            IsoError::io(format!("reading {what} at byte {offset}"), e)
        }
    })?;
    Ok(buf)
}

fn ascii_byte(c: Option<char>, default: u8, field: &str, path: &str) -> Result<u8> {
    match c {
        None => Ok(default),
        Some(c) if c.is_ascii() => Ok(c as u8),
        Some(c) => Err(IsoError::KargsInvalid {
            reason: format!("{field} {c:?} of {path} is not a single ASCII character"),
        }),
    }
}

/// The kargs held by an area: the text up to the first `pad` run, without `end`, trimmed
/// (coreos-installer `KargEmbedAreas::parse`).
fn parse_karg_area(bytes: &[u8], pad: u8, end: u8) -> Result<String> {
    let s = std::str::from_utf8(bytes).map_err(|_| IsoError::KargsInvalid {
        reason: "a karg embed area is not valid UTF-8".into(),
    })?;
    Ok(s.trim_end_matches(pad as char)
        .trim_end_matches(end as char)
        .trim()
        .to_string())
}

/// Reads the embed areas of a CoreOS live ISO.
///
/// Errors: [`IsoError::NotIso`] (no ISO9660 volume), [`IsoError::NotCoreOs`] (no
/// `coreos/igninfo.json` and no `images/ignition.img`), [`IsoError::Truncated`] (an area or a
/// structure lies past the end), [`IsoError::IgnInfoInvalid`], [`IsoError::KargsInvalid`]
/// (bad JSON, `size` over 2048, `default` longer than `size`, a listed file missing or too
/// short, areas holding different kargs, overlapping areas), I/O errors.
pub fn plan<R: Read + Seek>(base: &mut R) -> Result<EmbedPlan> {
    let image_size = base
        .seek(SeekFrom::End(0))
        .map_err(|e| IsoError::io("finding the size of the base ISO", e))?;
    // Ignition area
    let igninfo = iso9660::find(base, "coreos/igninfo.json")?;
    let info = match &igninfo {
        Some(e) => {
            let bytes = iso9660::read_entry(base, e)?;
            serde_json::from_slice::<IgnInfo>(&bytes).map_err(|err| IsoError::IgnInfoInvalid {
                reason: format!("{err} (expected {{\"file\": ..., \"offset\"?: ..., \"length\"?: ...}})"),
            })?
        }
        None => IgnInfo {
            file: DEFAULT_IGNITION_FILE.into(),
            offset: None,
            length: None,
        },
    };
    let Some(file) = iso9660::find(base, &info.file)? else {
        return Err(if igninfo.is_none() {
            IsoError::NotCoreOs {
                detail: "it has neither coreos/igninfo.json nor images/ignition.img".into(),
            }
        } else {
            IsoError::IgnInfoInvalid {
                reason: format!("it names {:?}, which the image does not contain", info.file),
            }
        });
    };
    if file.is_dir {
        return Err(IsoError::IgnInfoInvalid {
            reason: format!("{} is a directory", info.file),
        });
    }
    let file_offset = info.offset.unwrap_or(0);
    if file_offset > file.size {
        return Err(IsoError::IgnInfoInvalid {
            reason: format!(
                "offset {file_offset} lies past the end of {} ({} bytes)",
                info.file, file.size
            ),
        });
    }
    let length = info.length.unwrap_or(file.size - file_offset);
    if file_offset + length > file.size {
        return Err(IsoError::IgnInfoInvalid {
            reason: format!(
                "offset {file_offset} + length {length} runs past the end of {} ({} bytes)",
                info.file, file.size
            ),
        });
    }
    let ignition_area = Region {
        offset: file.offset + file_offset,
        length,
    };
    let ignition_present = area_has_data(base, ignition_area, image_size)?;

    // Karg areas
    let (karg_areas, size, default) = karg_areas(base, image_size)?;
    let mut current = None;
    if let Some(first) = karg_areas.first() {
        let read = |base: &mut R, a: &KargArea| -> Result<String> {
            let b = read_exact_at(base, a.region.offset, size, "karg embed area", image_size)?;
            parse_karg_area(&b, a.pad, a.end)
        };
        let args = read(base, first)?;
        for a in &karg_areas[1..] {
            let other = read(base, a)?;
            if other != args {
                return Err(IsoError::KargsInvalid {
                    reason: format!(
                        "the areas hold different kargs ({:?} at byte {}, {:?} at byte {}); reset the base ISO with `coreos-installer iso kargs reset` or download it again",
                        args, first.region.offset, other, a.region.offset
                    ),
                });
            }
        }
        current = Some(args);
    }
    for (i, a) in karg_areas.iter().enumerate() {
        if a.region.overlaps(&ignition_area) || karg_areas[..i].iter().any(|b| b.region.overlaps(&a.region)) {
            return Err(IsoError::KargsInvalid {
                reason: format!(
                    "the karg area at byte {} overlaps another embed area",
                    a.region.offset
                ),
            });
        }
    }
    Ok(EmbedPlan {
        image_size,
        ignition_file: info.file,
        ignition_area,
        ignition_present,
        karg_area_size: if karg_areas.is_empty() { 0 } else { size },
        karg_areas,
        default_kargs: default,
        current_kargs: current,
    })
}

/// [`plan`] for a file path; I/O errors name the path.
pub fn plan_file(path: &Path) -> Result<EmbedPlan> {
    let mut f =
        File::open(path).map_err(|e| IsoError::io(format!("cannot open base ISO {}", path.display()), e))?;
    plan(&mut f)
}

fn area_has_data<R: Read + Seek>(r: &mut R, area: Region, image_size: u64) -> Result<bool> {
    if area.end() > image_size {
        return Err(IsoError::Truncated {
            what: format!("Ignition embed area ({} bytes)", area.length),
            offset: area.offset,
        });
    }
    r.seek(SeekFrom::Start(area.offset))
        .map_err(|e| IsoError::io("seeking to the Ignition embed area", e))?;
    let mut left = area.length;
    let mut buf = vec![0u8; 64 * 1024];
    let mut any = false;
    while left > 0 {
        let n = left.min(buf.len() as u64) as usize;
        r.read_exact(&mut buf[..n])
            .map_err(|e| IsoError::io("reading the Ignition embed area", e))?;
        any |= buf[..n].iter().any(|b| *b != 0);
        left -= n as u64;
    }
    Ok(any)
}

type KargAreas = (Vec<KargArea>, usize, Option<String>);

fn karg_areas<R: Read + Seek>(base: &mut R, image_size: u64) -> Result<KargAreas> {
    let Some(entry) = iso9660::find(base, "coreos/kargs.json")? else {
        return legacy_karg_areas(base, image_size);
    };
    let bytes = iso9660::read_entry(base, &entry)?;
    let info: KargsJson = serde_json::from_slice(&bytes).map_err(|e| IsoError::KargsInvalid {
        reason: format!("{e} (expected {{\"default\": ..., \"files\": [{{\"path\", \"offset\", \"pad\"?, \"end\"?}}], \"size\": ...}})"),
    })?;
    if info.size > MAX_KARG_AREA {
        return Err(IsoError::KargsInvalid {
            reason: format!("size {} is larger than {MAX_KARG_AREA}", info.size),
        });
    }
    if info.default.len() > info.size {
        return Err(IsoError::KargsInvalid {
            reason: format!(
                "default kargs ({} bytes) are larger than size {}",
                info.default.len(),
                info.size
            ),
        });
    }
    if info.files.is_empty() {
        return Err(IsoError::KargsInvalid {
            reason: "files is empty".into(),
        });
    }
    let mut areas = Vec::new();
    for f in &info.files {
        let e = iso9660::find(base, &f.path)?.ok_or_else(|| IsoError::KargsInvalid {
            reason: format!("it names {:?}, which the image does not contain", f.path),
        })?;
        if f.offset + info.size as u64 > e.size {
            return Err(IsoError::KargsInvalid {
                reason: format!(
                    "offset {} + size {} runs past the end of {} ({} bytes)",
                    f.offset, info.size, f.path, e.size
                ),
            });
        }
        let region = Region {
            offset: e.offset + f.offset,
            length: info.size as u64,
        };
        if region.end() > image_size {
            return Err(IsoError::Truncated {
                what: format!("karg embed area in {}", f.path),
                offset: region.offset,
            });
        }
        areas.push(KargArea {
            region,
            file: Some(f.path.clone()),
            pad: ascii_byte(f.pad, b'#', "pad", &f.path)?,
            end: ascii_byte(f.end, b'\n', "end", &f.path)?,
        });
    }
    areas.sort_by_key(|a| a.region.offset);
    Ok((areas, info.size, Some(info.default)))
}

/// The 72-byte header at 32672: `coreKarg`, u64 LE area length, u64 LE offset of the default
/// kargs, up to six u64 LE area offsets ended by 0 (coreos-installer
/// `for_file_via_system_area`).
fn legacy_karg_areas<R: Read + Seek>(base: &mut R, image_size: u64) -> Result<KargAreas> {
    let h = read_exact_at(base, LEGACY_KARG_HEADER, 72, "coreKarg header", image_size)?;
    if &h[..8] != b"coreKarg" {
        return Ok((Vec::new(), 0, None));
    }
    let u = |i: usize| u64::from_le_bytes(h[8 + i * 8..16 + i * 8].try_into().expect("8 bytes"));
    let size = u(0);
    if size > MAX_KARG_AREA as u64 || size == 0 {
        return Err(IsoError::KargsInvalid {
            reason: format!("coreKarg header: area length {size} is not within 1..={MAX_KARG_AREA}"),
        });
    }
    let size = size as usize;
    let default_bytes = read_exact_at(
        base,
        u(1),
        size,
        "default kargs of the coreKarg header",
        image_size,
    )?;
    let default = parse_karg_area(&default_bytes, b'#', b'\n')?;
    let mut areas = Vec::new();
    for i in 2..8 {
        let off = u(i);
        if off == 0 {
            break;
        }
        if off + size as u64 > image_size {
            return Err(IsoError::Truncated {
                what: "karg embed area of the coreKarg header".into(),
                offset: off,
            });
        }
        areas.push(KargArea {
            region: Region {
                offset: off,
                length: size as u64,
            },
            file: None,
            pad: b'#',
            end: b'\n',
        });
    }
    if areas.is_empty() {
        return Err(IsoError::KargsInvalid {
            reason: "coreKarg header lists no areas".into(),
        });
    }
    areas.sort_by_key(|a| a.region.offset);
    Ok((areas, size, Some(default)))
}

impl EmbedPlan {
    /// The kargs after appending `extra` to [`EmbedPlan::current_kargs`] the way
    /// `coreos-installer iso kargs modify -a` does (each value trimmed, space separated), or
    /// `None` when `extra` is empty (the areas are then left as they are).
    ///
    /// Errors: [`IsoError::NoKargAreas`] when the image has no areas; [`IsoError::Invalid`] for
    /// an empty value or one with a line break (it would end the bootloader's kernel line);
    /// [`IsoError::KargsTooLong`] when the result with its line end does not fit.
    pub fn kargs_appending(&self, extra: &[String]) -> Result<Option<String>> {
        if extra.is_empty() {
            return Ok(None);
        }
        let Some(current) = &self.current_kargs else {
            return Err(IsoError::NoKargAreas {
                wanted: extra.join(" "),
            });
        };
        let mut out = current.trim().to_string();
        for k in extra {
            let k = k.trim();
            if k.is_empty() || k.contains(['\n', '\r', '\0']) {
                return Err(IsoError::Invalid(format!(
                    "kernel argument {k:?} is empty or contains a line break or NUL"
                )));
            }
            if !out.is_empty() {
                out.push(' ');
            }
            out.push_str(k);
        }
        self.check_kargs(&out)?;
        Ok(Some(out))
    }

    /// Checks that `kargs` fit the areas: coreos-installer refuses `len >= size` (the line end
    /// needs a byte).
    pub fn check_kargs(&self, kargs: &str) -> Result<()> {
        if self.karg_areas.is_empty() {
            return Err(IsoError::NoKargAreas {
                wanted: kargs.to_string(),
            });
        }
        if kargs.trim().len() >= self.karg_area_size {
            return Err(IsoError::KargsTooLong {
                len: kargs.trim().len() + 1,
                size: self.karg_area_size,
            });
        }
        Ok(())
    }

    /// The bytes of one karg area holding `kargs`: the kargs, `end`, then `pad` up to the area
    /// size (coreos-installer `set_kargs`). Errors as [`EmbedPlan::check_kargs`].
    pub fn karg_area_bytes(&self, area: &KargArea, kargs: &str) -> Result<Vec<u8>> {
        self.check_kargs(kargs)?;
        let k = kargs.trim();
        let mut b = vec![area.pad; self.karg_area_size];
        b[..k.len()].copy_from_slice(k.as_bytes());
        b[k.len()] = area.end;
        Ok(b)
    }

    /// Checks early (before any output is written) that `archive` fits the Ignition area.
    /// Errors: [`IsoError::IgnitionTooLarge`] with both sizes and the `--pxe` hint.
    pub fn check_archive_fits(&self, archive: &[u8]) -> Result<()> {
        if archive.len() as u64 > self.ignition_area.length {
            return Err(IsoError::IgnitionTooLarge {
                compressed: archive.len(),
                area: self.ignition_area.length,
                file: self.ignition_file.clone(),
            });
        }
        Ok(())
    }

    /// Every region [`write_node_iso`] may change: the Ignition area and the karg areas.
    pub fn regions(&self) -> Vec<Region> {
        let mut v = vec![self.ignition_area];
        v.extend(self.karg_areas.iter().map(|a| a.region));
        v.sort();
        v
    }
}

/// xz with a CRC32 check (the kernel's initramfs xz decoder supports CRC32 but not CRC64 or
/// SHA-256: kernel `Documentation/staging/xz.rst`), LZMA2 at preset 9 as coreos-installer
/// uses, but with the dictionary no larger than the input (rounded up to a power of two, at
/// least 4 KiB): the output is the same size as with the 64 MiB preset dictionary, while
/// the encoder needs a few MiB instead of ~670 MiB and the decoder in the kernel less too.
pub fn xz_crc32(data: &[u8]) -> Result<Vec<u8>> {
    use liblzma::stream::{Check, Filters, LzmaOptions, Stream};
    let dict = (data.len().max(4096).next_power_of_two()).min(64 << 20) as u32;
    let mut opts = LzmaOptions::new_preset(9).map_err(|e| IsoError::Invalid(format!("xz preset 9: {e}")))?;
    opts.dict_size(dict);
    let mut filters = Filters::new();
    filters.lzma2(&opts);
    let stream = Stream::new_stream_encoder(&filters, Check::Crc32)
        .map_err(|e| IsoError::Invalid(format!("creating the xz encoder: {e}")))?;
    let mut enc = liblzma::write::XzEncoder::new_stream(Vec::with_capacity(data.len() / 4 + 64), stream);
    enc.write_all(data)
        .map_err(|e| IsoError::io("xz-compressing the Ignition archive", e))?;
    enc.finish()
        .map_err(|e| IsoError::io("xz-compressing the Ignition archive", e))
}

/// The initrd archive to embed: an xz (CRC32) compressed newc cpio holding `config.ign`
/// (mode 0100600, mtime 0, so equal inputs give equal bytes) followed by `extra` members
/// (with parent directories, mode 0755), like coreos-installer's `Initrd::to_bytes`. The
/// same archive appended to the live `initrd.img` serves PXE.
///
/// `extra` paths are relative to the initramfs root (e.g.
/// `etc/coreos-firstboot-network/eth0.nmconnection`). Errors: [`IsoError::Invalid`] for a bad
/// or duplicate path.
pub fn ignition_archive(config_ign: &[u8], extra: &[CpioFile<'_>]) -> Result<Vec<u8>> {
    let mut files = vec![CpioFile {
        path: IGNITION_MEMBER,
        mode: IGNITION_MODE,
        mtime: 0,
        data: config_ign,
    }];
    files.extend_from_slice(extra);
    xz_crc32(&newc_archive(&files)?)
}

/// What [`write_node_iso`] wrote.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Written {
    /// Size of the output in bytes (equal to the base's).
    pub size: u64,
    /// Lowercase hex sha256 of the output, when [`WriteOptions::sha256`] asked for it.
    pub sha256: Option<String>,
}

/// How [`write_node_iso`] writes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct WriteOptions {
    /// Replace an existing output file (`--force`).
    pub force: bool,
    /// Compute the output's sha256 while copying (one pass through user space at about
    /// 1.5 GB/s with SHA-NI). Without it the bulk is copied in the kernel (`copy_file_range`).
    pub sha256: bool,
}

/// Writes `out_path`: a copy of `base_path` in which only the Ignition area (now `archive`
/// and zeros) and, when `kargs` is `Some`, every karg area (now `kargs`) differ. The copy runs
/// in constant memory; the output is created through [`AtomicFile`] (mode 0600, temporary
/// name, no replacing unless `opts.force`).
///
/// Errors: [`IsoError::IgnitionTooLarge`] (with both sizes and the `--pxe` hint) when
/// `archive` is larger than the area; [`IsoError::KargsTooLong`] / [`IsoError::NoKargAreas`];
/// [`IsoError::Invalid`] when the base is not the size `plan` saw; [`IsoError::AlreadyExists`];
/// I/O errors naming the paths.
pub fn write_node_iso(
    base_path: &Path,
    out_path: &Path,
    plan: &EmbedPlan,
    archive: &[u8],
    kargs: Option<&str>,
    opts: WriteOptions,
) -> Result<Written> {
    let patches = patches(plan, archive, kargs)?;
    let mut base = File::open(base_path)
        .map_err(|e| IsoError::io(format!("cannot open base ISO {}", base_path.display()), e))?;
    let size = base
        .metadata()
        .map_err(|e| IsoError::io(format!("cannot stat {}", base_path.display()), e))?
        .len();
    if size != plan.image_size {
        return Err(IsoError::Invalid(format!(
            "base ISO {} is {size} bytes, but the embed plan was made for {} bytes; it changed meanwhile, run again",
            base_path.display(),
            plan.image_size
        )));
    }
    let mut out = AtomicFile::create(out_path, opts.force)?;
    let tmp = out.temp_path().display().to_string();
    let sha256 = if opts.sha256 {
        Some(copy_patched_hashing(
            &mut base,
            out.file(),
            &patches,
            size,
            base_path,
            &tmp,
        )?)
    } else {
        let n = super::output::copy_range(&base, out.file(), size)
            .map_err(|e| IsoError::io(format!("copying {} to {tmp}", base_path.display()), e))?;
        if n != size {
            return Err(IsoError::Truncated {
                what: format!("base ISO {} shrank while copying", base_path.display()),
                offset: n,
            });
        }
        for (off, bytes) in &patches {
            out.file()
                .write_all_at(bytes, *off)
                .map_err(|e| IsoError::io(format!("writing an embed area of {tmp} at byte {off}"), e))?;
        }
        None
    };
    out.commit_without_fsync()?;
    Ok(Written { size, sha256 })
}

/// The (offset, bytes) writes of a node ISO, sorted, non-overlapping.
pub fn patches(plan: &EmbedPlan, archive: &[u8], kargs: Option<&str>) -> Result<Vec<(u64, Vec<u8>)>> {
    plan.check_archive_fits(archive)?;
    let mut area = Vec::with_capacity(plan.ignition_area.length as usize);
    area.extend_from_slice(archive);
    area.resize(plan.ignition_area.length as usize, 0);
    let mut v = vec![(plan.ignition_area.offset, area)];
    if let Some(k) = kargs {
        for a in &plan.karg_areas {
            v.push((a.region.offset, plan.karg_area_bytes(a, k)?));
        }
    }
    v.sort_by_key(|p| p.0);
    Ok(v)
}

/// One pass: read the base in 1 MiB chunks, overlay the patches, hash, write.
fn copy_patched_hashing(
    base: &mut File,
    out: &mut File,
    patches: &[(u64, Vec<u8>)],
    size: u64,
    base_path: &Path,
    tmp: &str,
) -> Result<String> {
    const CHUNK: usize = 1 << 20;
    let mut buf = vec![0u8; CHUNK];
    let mut hasher = Sha256::new();
    base.seek(SeekFrom::Start(0))
        .map_err(|e| IsoError::io(format!("seeking in {}", base_path.display()), e))?;
    let mut pos = 0u64;
    while pos < size {
        let n = (size - pos).min(CHUNK as u64) as usize;
        base.read_exact(&mut buf[..n]).map_err(|e| {
            if e.kind() == std::io::ErrorKind::UnexpectedEof {
                IsoError::Truncated {
                    what: format!("base ISO {} shrank while copying", base_path.display()),
                    offset: pos,
                }
            } else {
                IsoError::io(format!("reading {}", base_path.display()), e)
            }
        })?;
        let end = pos + n as u64;
        for (off, bytes) in patches {
            let pend = off + bytes.len() as u64;
            if *off < end && pend > pos {
                let from = (*off).max(pos);
                let to = pend.min(end);
                buf[(from - pos) as usize..(to - pos) as usize]
                    .copy_from_slice(&bytes[(from - off) as usize..(to - off) as usize]);
            }
        }
        hasher.update(&buf[..n]);
        out.write_all(&buf[..n])
            .map_err(|e| IsoError::io(format!("writing {tmp}"), e))?;
        pos = end;
    }
    Ok(hex::encode(hasher.finalize()))
}

/// Decompresses an embedded or appended initrd archive: xz, gzip or plain newc cpio,
/// followed by zero padding (what coreos-installer and the kernel accept).
///
/// Errors: [`IsoError::Corrupt`] for an unknown format or a bad stream.
pub fn decompress_initrd(bytes: &[u8]) -> Result<Vec<u8>> {
    let mut out = Vec::new();
    let r = if bytes.starts_with(&[0xfd, b'7', b'z', b'X', b'Z', 0]) {
        liblzma::read::XzDecoder::new(bytes).read_to_end(&mut out)
    } else if bytes.starts_with(&[0x1f, 0x8b]) {
        flate2::read::GzDecoder::new(bytes).read_to_end(&mut out)
    } else if bytes.starts_with(b"070701") {
        out.extend_from_slice(bytes);
        Ok(0)
    } else {
        return Err(IsoError::Corrupt {
            what: "the embedded initrd archive is neither xz, gzip nor newc cpio".into(),
        });
    };
    r.map_err(|e| IsoError::Corrupt {
        what: format!("cannot decompress the embedded initrd archive: {e}"),
    })?;
    Ok(out)
}

/// The members of the archive in the Ignition area of `image` (e.g. a node ISO we wrote),
/// empty when the area is all zeros. Errors: as [`plan`] and [`decompress_initrd`].
pub fn read_embedded<R: Read + Seek>(image: &mut R) -> Result<Vec<CpioMember>> {
    let p = plan(image)?;
    let bytes = read_exact_at(
        image,
        p.ignition_area.offset,
        p.ignition_area.length as usize,
        "Ignition embed area",
        p.image_size,
    )?;
    if bytes.iter().all(|b| *b == 0) {
        return Ok(Vec::new());
    }
    read_newc(&decompress_initrd(&bytes)?)
}

/// The `config.ign` embedded in `image`, or `None` when there is none (like
/// `coreos-installer iso ignition show`).
pub fn read_embedded_ignition<R: Read + Seek>(image: &mut R) -> Result<Option<Vec<u8>>> {
    Ok(read_embedded(image)?
        .into_iter()
        .find(|m| m.path == IGNITION_MEMBER)
        .map(|m| m.data))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Cursor;

    fn sim_iso() -> Vec<u8> {
        agent_day2_sim::baseiso::base_iso_bytes("x86_64").unwrap()
    }

    #[test]
    fn plan_of_the_simulated_iso() {
        let iso = sim_iso();
        let p = plan(&mut Cursor::new(&iso)).unwrap();
        assert_eq!(p.ignition_area.length, 256 * 1024);
        assert!(!p.ignition_present);
        assert_eq!(p.karg_areas.len(), 2);
        assert_eq!(p.karg_area_size, 1139);
        assert_eq!(
            p.current_kargs.as_deref(),
            Some(agent_day2_sim::baseiso::default_kargs().as_str())
        );
        assert_eq!(p.default_kargs, p.current_kargs);
        // the area really is the file's extent
        let e = iso9660::get(&mut Cursor::new(&iso), "images/ignition.img").unwrap();
        assert_eq!(p.ignition_area.offset, e.offset);
    }

    #[test]
    fn kargs_append_and_limits() {
        let p = plan(&mut Cursor::new(sim_iso())).unwrap();
        let k = p
            .kargs_appending(&["fips=1".into(), "  console=ttyS0 ".into()])
            .unwrap()
            .unwrap();
        assert_eq!(
            k,
            format!(
                "{} fips=1 console=ttyS0",
                agent_day2_sim::baseiso::default_kargs()
            )
        );
        assert_eq!(p.kargs_appending(&[]).unwrap(), None);
        let b = p.karg_area_bytes(&p.karg_areas[0], &k).unwrap();
        assert_eq!(b.len(), 1139);
        assert_eq!(&b[..k.len()], k.as_bytes());
        assert_eq!(b[k.len()], b'\n');
        assert!(b[k.len() + 1..].iter().all(|c| *c == b'#'));
        assert_eq!(parse_karg_area(&b, b'#', b'\n').unwrap(), k);
        let long = vec!["x".repeat(1139)];
        assert!(matches!(
            p.kargs_appending(&long).unwrap_err(),
            IsoError::KargsTooLong { .. }
        ));
        // exactly size-1 bytes fits (the end byte takes the last one)
        let cur = p.current_kargs.clone().unwrap();
        let fill = vec!["y".repeat(1139 - 1 - cur.len() - 1)];
        let k2 = p.kargs_appending(&fill).unwrap().unwrap();
        assert_eq!(k2.len(), 1138);
        assert!(p.kargs_appending(&["a\nb".into()]).is_err());
        let mut none = p.clone();
        none.karg_areas.clear();
        none.current_kargs = None;
        let e = none.kargs_appending(&["fips=1".into()]).unwrap_err();
        assert!(
            e.to_string().contains("fips=1") && e.to_string().contains("--pxe"),
            "{e}"
        );
    }

    #[test]
    fn archive_is_xz_crc32_and_round_trips() {
        let cfg = br#"{"ignition":{"version":"3.2.0"}}"#;
        let extra = [CpioFile {
            path: "etc/coreos-firstboot-network/a.nmconnection",
            mode: 0o100600,
            mtime: 3,
            data: b"[connection]\n",
        }];
        let a = ignition_archive(cfg, &extra).unwrap();
        assert!(a.starts_with(&[0xfd, b'7', b'z', b'X', b'Z', 0]));
        // stream flags: byte 7 is the check type, 0x01 = CRC32
        assert_eq!(a[6], 0);
        assert_eq!(a[7], 0x01, "xz check must be CRC32 for the kernel");
        let m = read_newc(&decompress_initrd(&a).unwrap()).unwrap();
        assert_eq!(m[0].path, "config.ign");
        assert_eq!(m[0].mode, 0o100600);
        assert_eq!(m[0].data, cfg);
        assert_eq!(
            m.last().unwrap().path,
            "etc/coreos-firstboot-network/a.nmconnection"
        );
        assert_eq!(ignition_archive(cfg, &extra).unwrap(), a, "deterministic");
    }
}
