//! (being written; see mod.rs)
use crate::error::Error;
pub fn run(_a: &super::UnitArgs) -> Result<u8, Error> {
    Err(Error::Unexpected("migrate node0-unit is not built yet".into()))
}
