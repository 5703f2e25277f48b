//! The node ISO, PXE files and the appliance config image (docs/iso.md).
//!
//! * [`embed`]: find the Ignition and kernel-argument embed areas of a CoreOS/RHCOS live ISO
//!   exactly as `coreos-installer iso ignition embed` / `iso kargs modify` do, build the
//!   xz (CRC32) newc cpio holding `config.ign`, and write a copy of the base ISO in which only
//!   those areas differ: no re-mastering, so the output boots like the base.
//! * [`pxe`]: kernel, initrd (the live initrd with the Ignition archive appended), rootfs and
//!   an iPXE script, from the same base ISO.
//! * [`config_image`]: the appliance's `agent_configimage` ISO holding `config.gz`.
//! * [`cpio`]: our newc writer and reader; [`output`]: the one way every secret-bearing output
//!   file is created (0600 from the start, temporary name, rename without replacing).
//!
//! Everything takes bytes and paths; nothing here knows about the cluster, the Ignition
//! content or the CLI.

pub mod config_image;
pub mod cpio;
pub mod embed;
pub mod error;
pub mod output;
pub mod pxe;

pub use embed::{
    ignition_archive, plan, plan_file, read_embedded, read_embedded_ignition, write_node_iso, EmbedPlan,
    KargArea, Region, WriteOptions, Written,
};
pub use output::{write_new_file, AtomicFile};

pub use error::{IsoError, Result};
