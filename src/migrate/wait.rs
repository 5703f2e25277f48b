//! (being written; see mod.rs)
use crate::error::Error;
pub async fn run(_k: &crate::kube_flags::KubeFlags, _a: &super::WaitArgs) -> Result<u8, Error> {
    Err(Error::Unexpected("migrate wait is not built yet".into()))
}
