//! ISO9660 (skeleton).
