//! Reading: volume descriptors, directory records, Rock Ridge and Joliet names.

use std::io::{ErrorKind, Read, Seek, SeekFrom};

use crate::error::{IsoError, Result};
use crate::names::{iso_dir_name, iso_file_name, strip_version};
use crate::SECTOR;

/// One file or directory of an image.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IsoEntry {
    /// Path from the root without a leading `/`, components joined by `/`: the Rock Ridge name
    /// when the image has Rock Ridge (`coreos/igninfo.json`), else the Joliet name, else the
    /// ISO9660 identifier as recorded without `;1` and a trailing dot (`COREOS/IGNINFO.JSO`).
    pub path: String,
    /// Byte offset of the entry's extent from the start of the image (LBA × 2048).
    pub offset: u64,
    /// Size in bytes (for a directory: the size of its record area).
    pub size: u64,
    /// Whether the entry is a directory.
    pub is_dir: bool,
}

/// Upper bound for a directory's record area we are willing to read (a guard against corrupt
/// sizes; a directory of 16 MiB holds over 100 000 records).
const MAX_DIR: u64 = 16 << 20;
/// Upper bound for nesting (ECMA-119 allows 8 levels; Rock Ridge relocation aside, more means a loop).
const MAX_DEPTH: usize = 64;

#[derive(Debug, Clone)]
struct Rec {
    extent: u32,
    size: u32,
    is_dir: bool,
    id: Vec<u8>,
    su: Vec<u8>,
    /// Byte offset of the record in the image, for error messages.
    at: u64,
}

impl Rec {
    fn offset(&self) -> u64 {
        self.extent as u64 * SECTOR
    }
    fn is_dot(&self) -> bool {
        self.id.len() == 1 && (self.id[0] == 0 || self.id[0] == 1)
    }
}

#[derive(Clone, Copy, PartialEq)]
enum Names {
    /// Primary tree; `Some(skip)` when Rock Ridge is present (SUSP `SP` len_skp).
    Primary(Option<u8>),
    Joliet,
}

struct Image<'a, R> {
    r: &'a mut R,
    volume_id: String,
    primary: Rec,
    joliet: Option<Rec>,
    rr_skip: Option<u8>,
}

fn read_at<R: Read + Seek>(r: &mut R, offset: u64, len: usize, what: &str) -> Result<Vec<u8>> {
    r.seek(SeekFrom::Start(offset))
        .map_err(|e| IsoError::io(format!("seeking to {what} at byte offset {offset}"), e))?;
    let mut buf = vec![0u8; len];
    r.read_exact(&mut buf).map_err(|e| {
        if e.kind() == ErrorKind::UnexpectedEof {
            IsoError::Truncated {
                what: what.to_string(),
                offset,
            }
        } else {
            IsoError::io(format!("reading {what} at byte offset {offset}"), e)
        }
    })?;
    Ok(buf)
}

fn parse_record(buf: &[u8], at: u64) -> Result<Rec> {
    let corrupt = |what: &str| IsoError::Corrupt {
        what: what.to_string(),
        offset: at,
    };
    if buf.len() < 34 {
        return Err(corrupt("directory record shorter than 34 bytes"));
    }
    let len = buf[0] as usize;
    if len < 34 || len > buf.len() {
        return Err(corrupt(&format!("directory record length {len}")));
    }
    let name_len = buf[32] as usize;
    if 33 + name_len > len {
        return Err(corrupt(&format!(
            "identifier length {name_len} exceeds record length {len}"
        )));
    }
    let su_start = 33 + name_len + (1 - name_len % 2);
    Ok(Rec {
        extent: u32::from_le_bytes(buf[2..6].try_into().unwrap()),
        size: u32::from_le_bytes(buf[10..14].try_into().unwrap()),
        is_dir: buf[25] & 2 != 0,
        id: buf[33..33 + name_len].to_vec(),
        su: if su_start < len {
            buf[su_start..len].to_vec()
        } else {
            Vec::new()
        },
        at,
    })
}

impl<'a, R: Read + Seek> Image<'a, R> {
    fn open(r: &'a mut R) -> Result<Self> {
        let mut primary: Option<(String, Rec)> = None;
        let mut joliet = None;
        let mut sector = 16u64;
        loop {
            let offset = sector * SECTOR;
            let vd = match read_at(r, offset, SECTOR as usize, "volume descriptor") {
                Ok(vd) => vd,
                Err(IsoError::Truncated { .. }) if sector == 16 => {
                    return Err(IsoError::NotIso { offset: offset + 1 })
                }
                Err(e) => return Err(e),
            };
            if &vd[1..6] != b"CD001" {
                if sector == 16 {
                    return Err(IsoError::NotIso { offset: offset + 1 });
                }
                return Err(IsoError::Corrupt {
                    what: "volume descriptor without CD001 before the set terminator".into(),
                    offset,
                });
            }
            match vd[0] {
                1 if primary.is_none() => {
                    let vid = String::from_utf8_lossy(&vd[40..72])
                        .trim_end_matches([' ', '\0'])
                        .to_string();
                    primary = Some((vid, parse_record(&vd[156..190], offset + 156)?));
                }
                2 if joliet.is_none() => {
                    let esc = &vd[88..120];
                    if esc.windows(3).any(|w| w == b"%/@" || w == b"%/C" || w == b"%/E") {
                        joliet = Some(parse_record(&vd[156..190], offset + 156)?);
                    }
                }
                255 => break,
                _ => {}
            }
            sector += 1;
            if sector > 16 + 256 {
                return Err(IsoError::Corrupt {
                    what: "no volume descriptor set terminator in the first 256 descriptors".into(),
                    offset,
                });
            }
        }
        let (volume_id, primary) = primary.ok_or(IsoError::NoPrimary {
            offset: sector * SECTOR,
        })?;
        let mut img = Image {
            r,
            volume_id,
            primary,
            joliet,
            rr_skip: None,
        };
        // Rock Ridge: SUSP "SP" entry at the start of the system use area of the root's "."
        let root = img.primary.clone();
        let recs = img.read_dir(&root)?;
        if let Some(dot) = recs.first() {
            let su = &dot.su;
            if su.len() >= 7 && &su[0..2] == b"SP" && su[2] == 7 && su[4] == 0xBE && su[5] == 0xEF {
                img.rr_skip = Some(su[6]);
            }
        }
        Ok(img)
    }

    /// All records of a directory, "." and ".." included, in recorded order.
    fn read_dir(&mut self, dir: &Rec) -> Result<Vec<Rec>> {
        let size = dir.size as u64;
        if size > MAX_DIR {
            return Err(IsoError::Corrupt {
                what: format!("directory size {size}"),
                offset: dir.at,
            });
        }
        let base = dir.offset();
        let buf = read_at(self.r, base, size as usize, "directory records")?;
        let mut out = Vec::new();
        let mut pos = 0usize;
        while pos < buf.len() {
            let len = buf[pos] as usize;
            if len == 0 {
                // records never cross a sector boundary: the rest of this sector is padding
                pos = (pos / SECTOR as usize + 1) * SECTOR as usize;
                continue;
            }
            if pos + len > buf.len() {
                return Err(IsoError::Corrupt {
                    what: format!("directory record of {len} bytes runs past its directory"),
                    offset: base + pos as u64,
                });
            }
            out.push(parse_record(&buf[pos..pos + len], base + pos as u64)?);
            pos += len;
        }
        Ok(out)
    }

    /// The Rock Ridge NM name of a record, following CE continuation areas.
    fn rr_name(&mut self, rec: &Rec, skip: u8) -> Result<Option<String>> {
        let mut area = rec.su.get(skip as usize..).unwrap_or(&[]).to_vec();
        let mut name: Option<Vec<u8>> = None;
        let mut hops = 0;
        loop {
            let mut next = None;
            let mut i = 0;
            while i + 4 <= area.len() {
                let sig = &area[i..i + 2];
                let len = area[i + 2] as usize;
                if len < 4 || i + len > area.len() {
                    break;
                }
                let e = &area[i..i + len];
                match sig {
                    // NM without the CURRENT/PARENT flags: a piece of the name.
                    b"NM" if len >= 5 && e[4] & 0b110 == 0 => {
                        name.get_or_insert_with(Vec::new).extend_from_slice(&e[5..]);
                    }
                    b"CE" if len >= 28 => {
                        let block = u32::from_le_bytes(e[4..8].try_into().unwrap()) as u64;
                        let off = u32::from_le_bytes(e[12..16].try_into().unwrap()) as u64;
                        let l = u32::from_le_bytes(e[20..24].try_into().unwrap()) as usize;
                        next = Some((block * SECTOR + off, l.min(SECTOR as usize)));
                    }
                    b"ST" => break,
                    _ => {}
                }
                i += len;
            }
            match next {
                Some((offset, l)) if hops < 16 => {
                    hops += 1;
                    area = read_at(self.r, offset, l, "Rock Ridge continuation area")?;
                }
                _ => break,
            }
        }
        Ok(name.map(|n| String::from_utf8_lossy(&n).into_owned()))
    }

    /// Display name of a record under the given naming.
    fn name(&mut self, rec: &Rec, names: Names) -> Result<String> {
        match names {
            Names::Joliet => {
                let units: Vec<u16> = rec
                    .id
                    .chunks_exact(2)
                    .map(|c| u16::from_be_bytes([c[0], c[1]]))
                    .collect();
                let s = String::from_utf16_lossy(&units);
                Ok(strip_version(&s).to_string())
            }
            Names::Primary(rr) => {
                if let Some(skip) = rr {
                    if let Some(n) = self.rr_name(rec, skip)? {
                        return Ok(n);
                    }
                }
                Ok(strip_version(&String::from_utf8_lossy(&rec.id)).to_string())
            }
        }
    }

    fn walk(
        &mut self,
        dir: &Rec,
        prefix: &str,
        names: Names,
        depth: usize,
        out: &mut Vec<IsoEntry>,
    ) -> Result<()> {
        if depth > MAX_DEPTH {
            return Err(IsoError::Corrupt {
                what: "directories nested too deep (a loop?)".into(),
                offset: dir.at,
            });
        }
        for rec in self.read_dir(dir)? {
            if rec.is_dot() {
                continue;
            }
            let name = self.name(&rec, names)?;
            let path = if prefix.is_empty() {
                name
            } else {
                format!("{prefix}/{name}")
            };
            out.push(IsoEntry {
                path: path.clone(),
                offset: rec.offset(),
                size: rec.size as u64,
                is_dir: rec.is_dir,
            });
            if rec.is_dir {
                self.walk(&rec, &path, names, depth + 1, out)?;
            }
        }
        Ok(())
    }

    fn list(&mut self) -> Result<Vec<IsoEntry>> {
        let mut out = Vec::new();
        let (root, names) = match (&self.rr_skip, &self.joliet) {
            (None, Some(j)) => (j.clone(), Names::Joliet),
            _ => (self.primary.clone(), Names::Primary(self.rr_skip)),
        };
        self.walk(&root, "", names, 0, &mut out)?;
        Ok(out)
    }

    fn matches(&mut self, rec: &Rec, names: Names, comp: &str) -> Result<bool> {
        if self.name(rec, names)? == comp {
            return Ok(true);
        }
        if names == Names::Joliet {
            return Ok(false);
        }
        let id = String::from_utf8_lossy(&rec.id).into_owned();
        let id = strip_version(&id);
        let short = if rec.is_dir {
            iso_dir_name(comp)
        } else {
            iso_file_name(comp)
        };
        Ok(id.eq_ignore_ascii_case(comp) || id == short.trim_end_matches('.'))
    }

    fn find_in(&mut self, root: Rec, names: Names, comps: &[&str]) -> Result<Option<IsoEntry>> {
        let mut dir = root;
        let mut path = Vec::new();
        for (i, comp) in comps.iter().enumerate() {
            let last = i + 1 == comps.len();
            let mut found = None;
            for rec in self.read_dir(&dir)? {
                if rec.is_dot() || (!last && !rec.is_dir) {
                    continue;
                }
                if self.matches(&rec, names, comp)? {
                    found = Some(rec);
                    break;
                }
            }
            let Some(rec) = found else { return Ok(None) };
            path.push(self.name(&rec, names)?);
            if last {
                return Ok(Some(IsoEntry {
                    path: path.join("/"),
                    offset: rec.offset(),
                    size: rec.size as u64,
                    is_dir: rec.is_dir,
                }));
            }
            dir = rec;
        }
        // empty path: the root directory
        Ok(Some(IsoEntry {
            path: String::new(),
            offset: dir.offset(),
            size: dir.size as u64,
            is_dir: true,
        }))
    }

    fn find(&mut self, path: &str) -> Result<Option<IsoEntry>> {
        let comps: Vec<&str> = path.split('/').filter(|c| !c.is_empty() && *c != ".").collect();
        let primary = self.primary.clone();
        if let Some(e) = self.find_in(primary, Names::Primary(self.rr_skip), &comps)? {
            return Ok(Some(e));
        }
        if let Some(j) = self.joliet.clone() {
            return self.find_in(j, Names::Joliet, &comps);
        }
        Ok(None)
    }
}

/// Every file and directory of the image, depth first, each directory's records in recorded
/// (sorted) order. Names as described at [`IsoEntry::path`].
/// Errors: [`IsoError::NotIso`], [`IsoError::Truncated`], [`IsoError::Corrupt`], I/O.
pub fn list<R: Read + Seek>(r: &mut R) -> Result<Vec<IsoEntry>> {
    Image::open(r)?.list()
}

/// The entry at `path` (`/` separated, leading `/` optional, e.g. `coreos/igninfo.json` or
/// `COREOS/IGNINFO.JSO`), or `None`. Matching is described in the crate docs; the primary tree
/// (with Rock Ridge names) is searched first, then the Joliet tree.
pub fn find<R: Read + Seek>(r: &mut R, path: &str) -> Result<Option<IsoEntry>> {
    Image::open(r)?.find(path)
}

/// Like [`find`], but a missing path is [`IsoError::NotFound`].
pub fn get<R: Read + Seek>(r: &mut R, path: &str) -> Result<IsoEntry> {
    find(r, path)?.ok_or_else(|| IsoError::NotFound {
        path: path.to_string(),
    })
}

/// The primary volume identifier as recorded, trailing spaces removed (e.g.
/// `rhcos-418.94.202501221327-0`, `agent_configimage`).
pub fn volume_id<R: Read + Seek>(r: &mut R) -> Result<String> {
    Ok(Image::open(r)?.volume_id)
}

/// The bytes of a file entry. Errors: [`IsoError::Truncated`] when the extent runs past the end.
pub fn read_entry<R: Read + Seek>(r: &mut R, entry: &IsoEntry) -> Result<Vec<u8>> {
    let size = usize::try_from(entry.size).map_err(|_| IsoError::Corrupt {
        what: format!("size {} of {}", entry.size, entry.path),
        offset: entry.offset,
    })?;
    read_at(r, entry.offset, size, &format!("file {}", entry.path))
}
