//! Errors of the reader and the writer.

/// Result with an [`IsoError`].
pub type Result<T> = std::result::Result<T, IsoError>;

/// What went wrong, with the byte offset in the image or the path concerned.
#[derive(Debug, thiserror::Error)]
pub enum IsoError {
    /// The image has no `CD001` volume descriptor at sector 16 (byte 32768).
    #[error("not an ISO9660 image: no CD001 volume descriptor at byte offset {offset}; check that the file is an ISO image and not a disk image or a compressed file")]
    NotIso { offset: u64 },
    /// The descriptor set has no primary volume descriptor.
    #[error("ISO9660 image has no primary volume descriptor (descriptor set ends at byte offset {offset})")]
    NoPrimary { offset: u64 },
    /// The image ends before a structure that it points to.
    #[error("truncated ISO9660 image: {what} at byte offset {offset} lies past the end of the file")]
    Truncated { what: String, offset: u64 },
    /// A structure has an impossible value.
    #[error("corrupt ISO9660 image: {what} at byte offset {offset}")]
    Corrupt { what: String, offset: u64 },
    /// [`crate::get`] found nothing at the path.
    #[error("path {path:?} not found in the ISO9660 image")]
    NotFound { path: String },
    /// An input to [`crate::write_iso`] cannot be recorded.
    #[error("cannot write {path:?} into the ISO9660 image: {reason}")]
    BadInput { path: String, reason: String },
    /// An I/O error, with what was being done.
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
