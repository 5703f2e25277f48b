//! Writing a plain ISO9660 image with Rock Ridge names.
//!
//! Layout (sectors of 2048 bytes): 0-15 system area (zeros), 16 primary volume descriptor,
//! 17 set terminator, then the L path table, the M path table, one sector with the Rock Ridge
//! `ER` entry (reached through a `CE` entry of the root's "." record, as genisoimage does), the
//! directories in path-table order, and the file data in path order, each extent starting on a
//! sector boundary. Same inputs give the same bytes: nothing depends on the clock or the host.

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::path::PathBuf;
use std::time::{SystemTime, UNIX_EPOCH};

use crate::error::{IsoError, Result};
use crate::names::{iso_dir_name, iso_file_name};
use crate::SECTOR;

/// Where a file's bytes come from.
#[derive(Debug, Clone)]
pub enum IsoData {
    /// The bytes themselves.
    Bytes(Vec<u8>),
    /// A file on disk, of which exactly `len` bytes are copied (an error when it is shorter).
    File { path: PathBuf, len: u64 },
}

impl IsoData {
    fn len(&self) -> u64 {
        match self {
            IsoData::Bytes(b) => b.len() as u64,
            IsoData::File { len, .. } => *len,
        }
    }
}

/// One file to record. Directories are created from the paths.
#[derive(Debug, Clone)]
pub struct IsoInput {
    /// Path inside the image, `/` separated, no leading `/`, e.g. `coreos/igninfo.json`.
    /// Recorded as the Rock Ridge name; the ISO9660 identifier is its 8.3 form.
    pub path: String,
    pub data: IsoData,
    /// Modification time recorded for the file (and, as the latest of their contents, for
    /// the directories and the volume).
    pub mtime: SystemTime,
}

const FILE_MODE: u32 = 0o100444;
const DIR_MODE: u32 = 0o040555;
const ER_ID: &[u8] = b"RRIP_1991A";
const ER_DES: &[u8] = b"THE ROCK RIDGE INTERCHANGE PROTOCOL PROVIDES SUPPORT FOR POSIX FILE SYSTEM SEMANTICS";
const ER_SRC: &[u8] = b"PLEASE CONTACT DISC PUBLISHER FOR SPECIFICATION SOURCE.  SEE PUBLISHER IDENTIFIER IN PRIMARY VOLUME DESCRIPTOR FOR CONTACT INFORMATION.";

#[derive(Default)]
struct Dir {
    /// name → child
    children: BTreeMap<String, Node>,
    mtime: i64,
}

enum Node {
    Dir(Dir),
    File(usize),
}

/// A directory flattened for layout.
struct FlatDir {
    parent: usize,
    /// Rock Ridge name ("" for the root).
    name: String,
    id: Vec<u8>,
    mtime: i64,
    /// (iso id, rr name, child)
    entries: Vec<(Vec<u8>, String, Child)>,
    size: u32,
    extent: u32,
    subdirs: u32,
}

#[derive(Clone, Copy)]
enum Child {
    Dir(usize),
    File(usize),
}

fn unix(t: SystemTime) -> i64 {
    match t.duration_since(UNIX_EPOCH) {
        Ok(d) => d.as_secs() as i64,
        Err(e) => -(e.duration().as_secs() as i64),
    }
}

/// (year, month, day, hour, minute, second) in UTC; days-from-civil inverse (H. Hinnant).
fn civil(t: i64) -> (i64, u8, u8, u8, u8, u8) {
    let days = t.div_euclid(86400);
    let secs = t.rem_euclid(86400);
    let z = days + 719468;
    let era = z.div_euclid(146097);
    let doe = z - era * 146097;
    let yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u8;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u8;
    let y = yoe + era * 400 + if m <= 2 { 1 } else { 0 };
    (
        y,
        m,
        d,
        (secs / 3600) as u8,
        (secs / 60 % 60) as u8,
        (secs % 60) as u8,
    )
}

/// 7-byte directory record date (years since 1900 .. 2155, UTC).
fn date7(t: i64) -> [u8; 7] {
    let (y, mo, d, h, mi, s) = civil(t);
    [(y - 1900).clamp(0, 255) as u8, mo, d, h, mi, s, 0]
}

/// 17-byte volume descriptor date `YYYYMMDDHHMMSScc` + UTC offset.
fn date17(t: i64) -> [u8; 17] {
    let (y, mo, d, h, mi, s) = civil(t);
    let text = format!(
        "{:04}{:02}{:02}{:02}{:02}{:02}00",
        y.clamp(0, 9999),
        mo,
        d,
        h,
        mi,
        s
    );
    let mut out = [0u8; 17];
    out[..16].copy_from_slice(text.as_bytes());
    out
}

fn both32(v: u32) -> [u8; 8] {
    let mut b = [0u8; 8];
    b[..4].copy_from_slice(&v.to_le_bytes());
    b[4..].copy_from_slice(&v.to_be_bytes());
    b
}

fn both16(v: u16) -> [u8; 4] {
    let mut b = [0u8; 4];
    b[..2].copy_from_slice(&v.to_le_bytes());
    b[2..].copy_from_slice(&v.to_be_bytes());
    b
}

fn px(mode: u32, nlink: u32) -> Vec<u8> {
    let mut e = vec![b'P', b'X', 36, 1];
    e.extend_from_slice(&both32(mode));
    e.extend_from_slice(&both32(nlink));
    e.extend_from_slice(&both32(0));
    e.extend_from_slice(&both32(0));
    e
}

fn tf(t: i64) -> Vec<u8> {
    // modify, access, attributes
    let mut e = vec![b'T', b'F', 5 + 21, 1, 0x0E];
    for _ in 0..3 {
        e.extend_from_slice(&date7(t));
    }
    e
}

fn nm(name: &str) -> Vec<u8> {
    let mut e = vec![b'N', b'M', (5 + name.len()) as u8, 1, 0];
    e.extend_from_slice(name.as_bytes());
    e
}

fn record(id: &[u8], extent: u32, size: u32, is_dir: bool, t: i64, su: &[u8]) -> Vec<u8> {
    let mut r = vec![0u8; 33];
    r[2..10].copy_from_slice(&both32(extent));
    r[10..18].copy_from_slice(&both32(size));
    r[18..25].copy_from_slice(&date7(t));
    r[25] = if is_dir { 2 } else { 0 };
    r[28..32].copy_from_slice(&both16(1));
    r[32] = id.len() as u8;
    r.extend_from_slice(id);
    if id.len().is_multiple_of(2) {
        r.push(0);
    }
    r.extend_from_slice(su);
    if r.len() % 2 == 1 {
        r.push(0);
    }
    r[0] = r.len() as u8;
    r
}

fn er_entry() -> Vec<u8> {
    let mut e = vec![
        b'E',
        b'R',
        0,
        1,
        ER_ID.len() as u8,
        ER_DES.len() as u8,
        ER_SRC.len() as u8,
        1,
    ];
    e.extend_from_slice(ER_ID);
    e.extend_from_slice(ER_DES);
    e.extend_from_slice(ER_SRC);
    e[2] = e.len() as u8;
    e
}

fn ce(block: u32, len: u32) -> Vec<u8> {
    let mut e = vec![b'C', b'E', 28, 1];
    e.extend_from_slice(&both32(block));
    e.extend_from_slice(&both32(0));
    e.extend_from_slice(&both32(len));
    e
}

fn pad_str(s: &str, n: usize) -> Vec<u8> {
    let mut v = s.as_bytes().to_vec();
    v.truncate(n);
    v.resize(n, b' ');
    v
}

/// Assign unique level-1 identifiers to a directory's children (genisoimage-style numeric
/// mangling on collisions), returned sorted by identifier as ECMA-119 9.3 requires.
fn assign_ids(path: &str, names: Vec<(String, bool)>) -> Result<Vec<(Vec<u8>, String, bool)>> {
    let mut used = std::collections::BTreeSet::new();
    let mut out = Vec::new();
    for (name, is_dir) in names {
        let short = if is_dir {
            iso_dir_name(&name)
        } else {
            iso_file_name(&name)
        };
        let mut candidate = short.clone();
        let mut n = 0u32;
        while used.contains(&candidate) {
            if n >= 1000 {
                return Err(IsoError::BadInput {
                    path: format!("{path}/{name}"),
                    reason: "more than 1000 names share the same 8.3 identifier".into(),
                });
            }
            let (base, ext) = match short.split_once('.') {
                Some((b, e)) => (b.to_string(), Some(e.to_string())),
                None => (short.clone(), None),
            };
            let keep: String = base.chars().take(5).collect();
            candidate = match ext {
                Some(e) => format!("{keep}{n:03}.{e}"),
                None => format!("{keep}{n:03}"),
            };
            n += 1;
        }
        used.insert(candidate.clone());
        let id = if is_dir {
            candidate.into_bytes()
        } else {
            format!("{candidate};1").into_bytes()
        };
        out.push((id, name, is_dir));
    }
    out.sort_by(|a, b| a.0.cmp(&b.0));
    Ok(out)
}

/// Writes an ISO9660 image holding `files` to `out`.
///
/// `volume_id` is recorded as given (at most 32 printable ASCII bytes; real CoreOS and
/// appliance images use lowercase labels such as `rhcos-418.94.202501221327-0` or
/// `agent_configimage`, which Linux and blkid show as the label). Directories get mode 0555,
/// files 0444, owner 0:0. Errors: [`IsoError::BadInput`] naming the input for an empty or
/// duplicate path, a `.`/`..` component, a file that is also a directory, a name over 150
/// bytes, a file over 4 GiB - 1 or a data file shorter than its given length; I/O errors of
/// `out` or of a data file.
pub fn write_iso(mut out: impl Write, volume_id: &str, files: &[IsoInput]) -> Result<()> {
    if volume_id.len() > 32 || !volume_id.bytes().all(|b| (0x20..0x7f).contains(&b)) {
        return Err(IsoError::BadInput {
            path: volume_id.into(),
            reason: "the volume id must be at most 32 printable ASCII characters".into(),
        });
    }
    // tree
    let mut root = Dir::default();
    let mut latest = 0i64;
    for (i, f) in files.iter().enumerate() {
        let bad = |reason: &str| IsoError::BadInput {
            path: f.path.clone(),
            reason: reason.into(),
        };
        let comps: Vec<&str> = f.path.split('/').filter(|c| !c.is_empty()).collect();
        if comps.is_empty() {
            return Err(bad("empty path"));
        }
        if comps.iter().any(|c| *c == "." || *c == "..") {
            return Err(bad("`.` and `..` are not allowed in paths"));
        }
        if comps.iter().any(|c| c.len() > 150) {
            return Err(bad("a path component is longer than 150 bytes"));
        }
        if f.data.len() > u32::MAX as u64 {
            return Err(bad(
                "files of 4 GiB or more need multi-extent records, which this writer does not write",
            ));
        }
        let t = unix(f.mtime);
        latest = latest.max(t);
        let mut dir = &mut root;
        dir.mtime = dir.mtime.max(t);
        for c in &comps[..comps.len() - 1] {
            let node = dir
                .children
                .entry(c.to_string())
                .or_insert_with(|| Node::Dir(Dir::default()));
            dir = match node {
                Node::Dir(d) => d,
                Node::File(_) => return Err(bad(&format!("{c} is both a file and a directory"))),
            };
            dir.mtime = dir.mtime.max(t);
        }
        let last = comps[comps.len() - 1].to_string();
        if dir.children.contains_key(&last) {
            return Err(bad("recorded twice (or also a directory)"));
        }
        dir.children.insert(last, Node::File(i));
    }

    // flatten breadth first: path table order (level, parent number, identifier)
    let mut flat: Vec<FlatDir> = Vec::new();
    let mut queue: std::collections::VecDeque<(usize, String, Vec<u8>, String, Dir)> =
        std::collections::VecDeque::new();
    queue.push_back((0, String::new(), vec![0], String::new(), root));
    while let Some((parent, name, id, path, dir)) = queue.pop_front() {
        let me = flat.len();
        let mtime = dir.mtime;
        let mut nodes: BTreeMap<String, Node> = dir.children;
        let ids = assign_ids(
            &path,
            nodes
                .iter()
                .map(|(n, node)| (n.clone(), matches!(node, Node::Dir(_))))
                .collect(),
        )?;
        let mut entries = Vec::new();
        let mut subdirs = 0;
        for (cid, cname, _) in ids {
            match nodes.remove(&cname).expect("child exists") {
                Node::File(i) => entries.push((cid, cname, Child::File(i))),
                Node::Dir(d) => {
                    subdirs += 1;
                    // child directory numbers are assigned when dequeued; BFS keeps the order
                    let idx = flat.len() + queue.len() + 1;
                    entries.push((cid.clone(), cname.clone(), Child::Dir(idx)));
                    let cpath = if path.is_empty() {
                        cname.clone()
                    } else {
                        format!("{path}/{cname}")
                    };
                    queue.push_back((me, cname, cid, cpath, d));
                }
            }
        }
        flat.push(FlatDir {
            parent,
            name,
            id,
            mtime,
            entries,
            size: 0,
            extent: 0,
            subdirs,
        });
    }

    // path tables
    let pt_len: usize = flat.iter().map(|d| 8 + d.id.len() + d.id.len() % 2).sum();
    let pt_sectors = (pt_len as u64).div_ceil(SECTOR) as u32;
    let l_pt = 18u32;
    let m_pt = l_pt + pt_sectors;
    let er_sector = m_pt + pt_sectors;
    let er = er_entry();
    let mut next = er_sector + 1;

    // directory sizes (record sizes do not depend on extents)
    let dir_records = |flat: &Vec<FlatDir>, d: usize, files: &[IsoInput], file_ext: &[u32]| -> Vec<Vec<u8>> {
        let dir = &flat[d];
        let mut recs = Vec::new();
        let mut dot_su = Vec::new();
        if d == 0 {
            dot_su.extend_from_slice(&[b'S', b'P', 7, 1, 0xBE, 0xEF, 0]);
        }
        dot_su.extend(px(DIR_MODE, 2 + dir.subdirs));
        dot_su.extend(tf(dir.mtime));
        if d == 0 {
            dot_su.extend(ce(er_sector, er.len() as u32));
        }
        recs.push(record(&[0], dir.extent, dir.size, true, dir.mtime, &dot_su));
        let p = &flat[dir.parent];
        let mut dotdot_su = px(DIR_MODE, 2 + p.subdirs);
        dotdot_su.extend(tf(p.mtime));
        recs.push(record(&[1], p.extent, p.size, true, p.mtime, &dotdot_su));
        for (id, name, child) in &dir.entries {
            let rec = match *child {
                Child::Dir(c) => {
                    let cd = &flat[c];
                    let mut su = px(DIR_MODE, 2 + cd.subdirs);
                    su.extend(tf(cd.mtime));
                    su.extend(nm(name));
                    record(id, cd.extent, cd.size, true, cd.mtime, &su)
                }
                Child::File(i) => {
                    let t = unix(files[i].mtime);
                    let mut su = px(FILE_MODE, 1);
                    su.extend(tf(t));
                    su.extend(nm(name));
                    record(id, file_ext[i], files[i].data.len() as u32, false, t, &su)
                }
            };
            recs.push(rec);
        }
        recs
    };
    let layout_size = |recs: &[Vec<u8>]| -> u32 {
        let mut pos = 0u64;
        for r in recs {
            if pos % SECTOR + r.len() as u64 > SECTOR {
                pos = pos.div_ceil(SECTOR) * SECTOR;
            }
            pos += r.len() as u64;
        }
        (pos.div_ceil(SECTOR) * SECTOR) as u32
    };
    let zero_ext = vec![0u32; files.len()];
    for d in 0..flat.len() {
        let size = layout_size(&dir_records(&flat, d, files, &zero_ext));
        flat[d].size = size;
        flat[d].extent = next;
        next += size / SECTOR as u32;
    }
    // file extents, in path order (BFS over directories, sorted within each)
    let mut file_ext = vec![0u32; files.len()];
    let mut order = Vec::new();
    for d in &flat {
        for (_, _, c) in &d.entries {
            if let Child::File(i) = c {
                order.push(*i);
            }
        }
    }
    for &i in &order {
        file_ext[i] = next;
        next += files[i].data.len().div_ceil(SECTOR) as u32;
    }
    let total = next;

    // ---- emit ----
    let mut written = 0u64;
    let emit = |out: &mut dyn Write, bytes: &[u8], written: &mut u64| -> Result<()> {
        out.write_all(bytes)
            .map_err(|e| IsoError::io("writing the ISO image", e))?;
        *written += bytes.len() as u64;
        Ok(())
    };
    let pad_to = |out: &mut dyn Write, sector: u32, written: &mut u64| -> Result<()> {
        let target = sector as u64 * SECTOR;
        let zeros = [0u8; SECTOR as usize];
        while *written < target {
            let n = ((target - *written) as usize).min(zeros.len());
            out.write_all(&zeros[..n])
                .map_err(|e| IsoError::io("writing the ISO image", e))?;
            *written += n as u64;
        }
        Ok(())
    };
    pad_to(&mut out, 16, &mut written)?;

    // primary volume descriptor
    let mut pvd = vec![0u8; SECTOR as usize];
    pvd[0] = 1;
    pvd[1..6].copy_from_slice(b"CD001");
    pvd[6] = 1;
    pvd[8..40].copy_from_slice(&pad_str("LINUX", 32));
    pvd[40..72].copy_from_slice(&pad_str(volume_id, 32));
    pvd[80..88].copy_from_slice(&both32(total));
    pvd[120..124].copy_from_slice(&both16(1));
    pvd[124..128].copy_from_slice(&both16(1));
    pvd[128..132].copy_from_slice(&both16(SECTOR as u16));
    pvd[132..140].copy_from_slice(&both32(pt_len as u32));
    pvd[140..144].copy_from_slice(&l_pt.to_le_bytes());
    pvd[148..152].copy_from_slice(&m_pt.to_be_bytes());
    let root_rec = record(&[0], flat[0].extent, flat[0].size, true, flat[0].mtime, &[]);
    pvd[156..190].copy_from_slice(&root_rec);
    pvd[190..318].copy_from_slice(&pad_str(volume_id, 128));
    pvd[318..446].copy_from_slice(&pad_str("", 128));
    pvd[446..574].copy_from_slice(&pad_str("", 128));
    pvd[574..702].copy_from_slice(&pad_str("AGENT-DAY2-ISO9660", 128));
    pvd[702..813].copy_from_slice(&pad_str("", 111));
    pvd[813..830].copy_from_slice(&date17(latest));
    pvd[830..847].copy_from_slice(&date17(latest));
    let mut never = [b'0'; 17];
    never[16] = 0;
    pvd[847..864].copy_from_slice(&never);
    pvd[864..881].copy_from_slice(&never);
    pvd[881] = 1;
    emit(&mut out, &pvd, &mut written)?;
    let mut term = vec![0u8; SECTOR as usize];
    term[0] = 255;
    term[1..6].copy_from_slice(b"CD001");
    term[6] = 1;
    emit(&mut out, &term, &mut written)?;

    // path tables
    for big_endian in [false, true] {
        let mut pt = Vec::with_capacity(pt_len);
        for d in &flat {
            pt.push(d.id.len() as u8);
            pt.push(0);
            pt.extend_from_slice(&if big_endian {
                d.extent.to_be_bytes()
            } else {
                d.extent.to_le_bytes()
            });
            let parent = d.parent as u16 + 1;
            pt.extend_from_slice(&if big_endian {
                parent.to_be_bytes()
            } else {
                parent.to_le_bytes()
            });
            pt.extend_from_slice(&d.id);
            if d.id.len() % 2 == 1 {
                pt.push(0);
            }
        }
        pad_to(&mut out, if big_endian { m_pt } else { l_pt }, &mut written)?;
        emit(&mut out, &pt, &mut written)?;
    }
    pad_to(&mut out, er_sector, &mut written)?;
    emit(&mut out, &er, &mut written)?;

    // directories
    for d in 0..flat.len() {
        pad_to(&mut out, flat[d].extent, &mut written)?;
        let start = written;
        for r in dir_records(&flat, d, files, &file_ext) {
            let pos = written - start;
            if pos % SECTOR + r.len() as u64 > SECTOR {
                let sector = (written.div_ceil(SECTOR)) as u32;
                pad_to(&mut out, sector, &mut written)?;
            }
            emit(&mut out, &r, &mut written)?;
        }
        debug_assert!(
            written - start <= flat[d].size as u64,
            "directory {} overflows",
            flat[d].name
        );
    }

    // file data
    for &i in &order {
        let f = &files[i];
        if f.data.len() == 0 {
            continue;
        }
        pad_to(&mut out, file_ext[i], &mut written)?;
        match &f.data {
            IsoData::Bytes(b) => emit(&mut out, b, &mut written)?,
            IsoData::File { path, len } => {
                let file = std::fs::File::open(path)
                    .map_err(|e| IsoError::io(format!("opening {} for {}", path.display(), f.path), e))?;
                let copied = std::io::copy(&mut file.take(*len), &mut out)
                    .map_err(|e| IsoError::io(format!("copying {} into the ISO image", path.display()), e))?;
                written += copied;
                if copied != *len {
                    return Err(IsoError::BadInput {
                        path: f.path.clone(),
                        reason: format!("{} holds {copied} bytes, {len} were given", path.display()),
                    });
                }
            }
        }
    }
    pad_to(&mut out, total, &mut written)?;
    out.flush()
        .map_err(|e| IsoError::io("flushing the ISO image", e))?;
    Ok(())
}
