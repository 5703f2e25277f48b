//! Making CSR-supplied text safe to show on a terminal.
//!
//! The function moved to [`crate::text::escape_for_display`], the one place `info`, errors
//! and `approve` share; this path is kept so `csr` code keeps compiling unchanged.

pub use crate::text::escape_for_display;
