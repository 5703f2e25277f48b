//! How the plugin writes to the cluster: always with `fieldValidation=Strict`, so a field the
//! server does not know (a typo, a version skew) fails the request instead of being dropped.
//!
//! kube 5's `PostParams` has no `field_validation`, so creates go through [`create_strict`],
//! which builds the request itself; patches and server-side apply use [`patch_params`].

use std::fmt::Debug;

use kube::api::{PatchParams, PostParams};
use kube::core::params::ValidationDirective;
use kube::{Client, Resource};
use serde::de::DeserializeOwned;
use serde::Serialize;

/// Field manager recorded on every object the plugin writes.
pub const FIELD_MANAGER: &str = "agent-day2";

/// `PostParams` for creates and replaces (field manager set). Pair it with [`create_strict`]
/// or [`with_strict_validation`]: kube's `PostParams` cannot carry `fieldValidation`.
pub fn post_params() -> PostParams {
    PostParams {
        dry_run: false,
        field_manager: Some(FIELD_MANAGER.into()),
    }
}

/// `PatchParams` for server-side apply and merge patches: field manager `agent-day2`,
/// `fieldValidation=Strict`.
pub fn patch_params() -> PatchParams {
    PatchParams::apply(FIELD_MANAGER).validation(ValidationDirective::Strict)
}

/// Adds `fieldValidation=Strict` to a request built by `kube::core::Request`.
pub fn with_strict_validation(mut req: http::Request<Vec<u8>>) -> http::Request<Vec<u8>> {
    let uri = req.uri().to_string();
    let sep = if uri.contains('?') { '&' } else { '?' };
    if let Ok(u) = format!("{uri}{sep}fieldValidation=Strict").parse() {
        *req.uri_mut() = u;
    }
    req
}

/// Creates `obj` (typed or `DynamicObject` with its `ApiResource` as `dt`) with
/// `fieldManager=agent-day2&fieldValidation=Strict`. Errors are kube's (map them with
/// `kube::classify`).
pub async fn create_strict<K>(
    client: &Client,
    dt: &K::DynamicType,
    namespace: Option<&str>,
    obj: &K,
) -> Result<K, kube::Error>
where
    K: Resource + Serialize + DeserializeOwned + Clone + Debug,
{
    let url = K::url_path(dt, namespace);
    let body = serde_json::to_vec(obj).map_err(kube::Error::SerdeError)?;
    let req = kube::core::Request::new(url)
        .create(&post_params(), body)
        .map_err(kube::Error::BuildRequest)?;
    client.request::<K>(with_strict_validation(req)).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strict_validation_is_in_the_query() {
        let req = kube::core::Request::new("/api/v1/namespaces/x/configmaps")
            .create(&post_params(), b"{}".to_vec())
            .unwrap();
        let req = with_strict_validation(req);
        let q = req.uri().query().unwrap();
        assert!(q.contains("fieldManager=agent-day2"), "{q}");
        assert!(q.contains("fieldValidation=Strict"), "{q}");
        let pp = patch_params();
        assert!(matches!(pp.field_validation, Some(ValidationDirective::Strict)));
        assert_eq!(pp.field_manager.as_deref(), Some("agent-day2"));
    }
}
