//! What the parts of add-nodes share: the output kinds, the default token lifetime and the
//! input errors they raise.

use std::path::Path;

use crate::error::Error;

/// What kind of output.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OutputKind {
    /// `DIR/node.<arch>.iso`.
    Iso,
    /// `DIR/boot-artifacts/node.<arch>-{vmlinuz,initrd.img,rootfs.img}` (+ `.ipxe`).
    Pxe,
    /// `DIR/agentconfig.noarch.iso`.
    ConfigImage,
}

impl OutputKind {
    pub(super) fn name(self) -> &'static str {
        match self {
            OutputKind::Iso => "iso",
            OutputKind::Pxe => "pxe",
            OutputKind::ConfigImage => "config-image",
        }
    }
}

pub(super) fn invalid(field: impl Into<String>, message: impl Into<String>) -> Error {
    Error::InvalidInput {
        field: field.into(),
        message: message.into(),
    }
}

/// Default `--token-ttl` (the agent installer's 48 h, [`auth::DEFAULT_TTL`]).
pub const DEFAULT_TTL: &str = "48h";

pub(super) fn dir_error(dir: &Path, e: std::io::Error) -> Error {
    invalid(
        "--dir",
        format!(
            "cannot write to {}: {e}; choose a directory you can write to",
            dir.display()
        ),
    )
}
