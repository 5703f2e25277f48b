//! (being written; see mod.rs)
use crate::error::Error;
pub async fn run(_k: &crate::kube_flags::KubeFlags, _a: &super::ImportArgs) -> Result<u8, Error> {
    Err(Error::Unexpected("migrate import is not built yet".into()))
}
