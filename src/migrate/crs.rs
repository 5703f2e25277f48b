//! (being written; see mod.rs)
