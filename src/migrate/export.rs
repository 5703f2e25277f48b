//! (being written; see mod.rs)
use crate::error::Error;
pub async fn run(_a: &super::ExportArgs) -> Result<u8, Error> {
    Err(Error::Unexpected("migrate export is not built yet".into()))
}
