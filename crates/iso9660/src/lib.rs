//! A small ISO9660 reader and writer for agent-day2 and its simulator.
//!
//! * [`list`], [`find`], [`get`], [`volume_id`] and [`read_entry`] read an image from any
//!   `Read + Seek`: the primary volume descriptor, the directory tree, Rock Ridge `NM` names
//!   (SUSP `SP` in the root's "." record, `CE` continuation areas followed) and, when there is
//!   no Rock Ridge, Joliet names (supplementary descriptor with escape `%/@`, `%/C` or `%/E`).
//!   What the plugin needs from an entry is where its bytes are ([`IsoEntry::offset`], in bytes
//!   from the start of the image) so it can overwrite an embed area in place, the way
//!   coreos-installer does, without re-mastering the image.
//! * [`write_iso`] writes a plain ISO9660 image (level 1 names: uppercase 8.3 identifiers with
//!   `;1`, as genisoimage writes the CoreOS live ISO) with Rock Ridge `PX`/`TF`/`NM` entries so
//!   Linux, `isoinfo -R` and `xorriso` show the original names, L and M path tables, and a
//!   volume descriptor set terminator. No El Torito: the images are test ISOs and appliance
//!   config images, not boot media.
//!
//! Path lookup follows coreos-installer's `src/iso9660.rs`: a path component matches a record
//! whose ISO9660 identifier (with `;1` and a trailing `.` removed) equals the component, compared
//! case-insensitively, or equals the component's 8.3 form ([`iso_file_name`]): so
//! `coreos/igninfo.json` finds `COREOS/IGNINFO.JSO;1`. Rock Ridge and Joliet names match exactly.
//! Specification used: ECMA-119 (ISO9660), IEEE P1282 (RRIP 1.12), IEEE P1281 (SUSP 1.12).

mod error;
mod names;
mod reader;
mod writer;

pub use error::{IsoError, Result};
pub use names::{iso_dir_name, iso_file_name};
pub use reader::{find, get, list, read_entry, volume_id, IsoEntry};
pub use writer::{write_iso, IsoData, IsoInput};

/// Size of an ISO9660 logical block (sector) in bytes; the only one we read or write.
pub const SECTOR: u64 = 2048;
