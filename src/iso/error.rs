//! What goes wrong in the ISO layer ([`IsoError`]), below every writer of it.

use std::path::PathBuf;

/// What can go wrong while reading a base ISO or writing a node ISO, PXE files or a config
/// image. Each message names the file, area or field and says what to do.
#[derive(Debug, thiserror::Error)]
pub enum IsoError {
    /// The file has no ISO9660 volume descriptor (e.g. a disk image, a compressed file or an
    /// HTML error page saved as `.iso`).
    #[error("not an ISO9660 image: {detail}")]
    NotIso { detail: String },
    /// An ISO9660 image, but not a CoreOS live ISO: no `coreos/igninfo.json` and no
    /// `images/ignition.img` (coreos-installer says "Unrecognized CoreOS ISO image").
    #[error("not a CoreOS live ISO: {detail}; use the RHCOS live ISO of the cluster's release (coreos-bootimages) as the base ISO")]
    NotCoreOs { detail: String },
    /// The image ends before something it points to (an interrupted download).
    #[error("truncated ISO image: {what} at byte offset {offset} lies past the end of the file; download the base ISO again")]
    Truncated { what: String, offset: u64 },
    /// A structure of the image has an impossible value.
    #[error("corrupt ISO image: {what}")]
    Corrupt { what: String },
    /// `coreos/igninfo.json` cannot be used.
    #[error("invalid coreos/igninfo.json in the base ISO: {reason}")]
    IgnInfoInvalid { reason: String },
    /// `coreos/kargs.json` (or the legacy `coreKarg` header) cannot be used.
    #[error("invalid kernel argument embed areas (coreos/kargs.json) in the base ISO: {reason}")]
    KargsInvalid { reason: String },
    /// Kernel arguments were asked for but the image has no karg embed area.
    #[error("the base ISO has no kernel argument embed areas (no coreos/kargs.json and no coreKarg header), so kernel arguments {wanted:?} cannot be added; use a newer RHCOS live ISO or --pxe")]
    NoKargAreas { wanted: String },
    /// The new kernel arguments do not fit in the embed areas.
    #[error("kernel arguments too long for the ISO's embed areas: {len} bytes with the line end, the areas hold {size}; drop some --karg values or use --pxe")]
    KargsTooLong { len: usize, size: usize },
    /// The compressed Ignition archive is larger than the embed area.
    #[error("the Ignition config does not fit in the ISO: compressed archive is {compressed} bytes, the embed area ({file}) holds {area} bytes; reduce the config (fewer hosts, smaller CA bundles or files) or use --pxe, which has no such limit")]
    IgnitionTooLarge {
        compressed: usize,
        area: u64,
        file: String,
    },
    /// The output exists and replacing it was not asked for.
    #[error("{path} already exists; remove it, choose another --dir, or pass --force to replace it")]
    AlreadyExists { path: PathBuf },
    /// A file of the base ISO that PXE output needs is missing.
    #[error("the base ISO has no {path}; it is not a CoreOS live ISO with PXE artifacts")]
    MissingFile { path: String },
    /// An argument that cannot be encoded (a cpio name, a karg with a line break, ...).
    #[error("{0}")]
    Invalid(String),
    /// An I/O error, with what was being done and on which path.
    #[error("{context}: {source}")]
    Io {
        context: String,
        #[source]
        source: std::io::Error,
    },
}

impl IsoError {
    pub(crate) fn io(context: impl Into<String>, source: std::io::Error) -> Self {
        IsoError::Io {
            context: context.into(),
            source,
        }
    }
}

impl From<agent_day2_iso9660::IsoError> for IsoError {
    fn from(e: agent_day2_iso9660::IsoError) -> Self {
        use agent_day2_iso9660::IsoError as F;
        match e {
            // The crate's text starts with the same words as ours.
            F::NotIso { .. } | F::NoPrimary { .. } => IsoError::NotIso {
                detail: e
                    .to_string()
                    .trim_start_matches("not an ISO9660 image: ")
                    .to_string(),
            },
            F::Truncated { what, offset } => IsoError::Truncated { what, offset },
            F::Corrupt { .. } | F::BadInput { .. } => IsoError::Corrupt { what: e.to_string() },
            F::NotFound { path } => IsoError::MissingFile { path },
            F::Io { context, source } => {
                if source.kind() == std::io::ErrorKind::UnexpectedEof {
                    IsoError::Truncated {
                        what: context,
                        offset: 0,
                    }
                } else {
                    IsoError::Io { context, source }
                }
            }
        }
    }
}

/// Result with an [`IsoError`].
pub type Result<T> = std::result::Result<T, IsoError>;
