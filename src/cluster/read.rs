//! The thin async layer of [`super`]: reads the cluster's objects into a [`ClusterObjects`] with
//! the user's own credentials (docs/design.md "What the cluster tells us"); no fact is decided
//! here. A required object's 404 or 403 is an error naming it (exit 4); an optional one's 404 is
//! "none" and its 403 makes its facts unknown ([`ClusterObjects::unreadable`]).

use kube::api::{Api, DynamicObject, ListParams};
use kube::core::{ApiResource, GroupVersionKind};
use serde_json::Value;

use super::objects::{str_at, ClusterObjects};
use crate::error::{Error, ResourceRef, Result};
use crate::kube::{classify, with_deadline, KubeTarget};

/// How a read failure is treated.
#[derive(Clone, Copy, PartialEq)]
enum Need {
    /// 404 and 403 are errors (exit 4) naming the resource.
    Required,
    /// 404 is "none"; 403 and other API errors make the fact unknown.
    Optional,
}

fn ar(group: &str, version: &str, kind: &str, plural: &str) -> ApiResource {
    ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(group, version, kind), plural)
}

/// The ConfigMap in `openshift-config` that a config object names at `pointer` (Proxy
/// `spec.trustedCA.name`, Image `spec.additionalTrustedCA.name`); None when the object or the
/// name is absent. Optional: a 404 is None, a 403 is recorded in `unreadable`.
async fn referenced_config_map(
    target: &KubeTarget,
    cm: &ApiResource,
    obj: Option<&Value>,
    pointer: &str,
    unreadable: &mut Vec<(ResourceRef, String)>,
) -> Result<Option<Value>> {
    let Some(name) = obj.and_then(|o| str_at(o, pointer)) else {
        return Ok(None);
    };
    let r = ResourceRef::namespaced("ConfigMap", "openshift-config", name);
    get_obj(
        target,
        cm,
        Some("openshift-config"),
        name,
        r,
        Need::Optional,
        unreadable,
    )
    .await
}

async fn get_obj(
    target: &KubeTarget,
    res: &ApiResource,
    namespace: Option<&str>,
    name: &str,
    r: ResourceRef,
    need: Need,
    unreadable: &mut Vec<(ResourceRef, String)>,
) -> Result<Option<Value>> {
    let api: Api<DynamicObject> = match namespace {
        Some(ns) => Api::namespaced_with(target.client.clone(), ns, res),
        None => Api::all_with(target.client.clone(), res),
    };
    tracing::debug!(resource = %r, "get");
    let answer = with_deadline(target, || format!("reading {r}"), api.get(name)).await?;
    match answer {
        Ok(o) => Ok(Some(
            serde_json::to_value(o).map_err(|e| Error::Unexpected(e.to_string()))?,
        )),
        Err(e) => match (classify(e, "read", r.clone(), target), need) {
            (Error::NotFound { .. }, Need::Optional) => Ok(None),
            (Error::NotFound { resource, .. }, Need::Required) => {
                Err(Error::NotFound { resource, why: None })
            }
            (
                e @ (Error::Unreachable { .. }
                | Error::Unauthorized { .. }
                | Error::Timeout(_)
                | Error::ImpersonationRefused { .. }),
                _,
            ) => Err(e),
            (e, Need::Required) => Err(e),
            (e, Need::Optional) => {
                tracing::debug!("{e}");
                unreadable.push((r, short_reason(&e)));
                Ok(None)
            }
        },
    }
}

fn short_reason(e: &Error) -> String {
    match e {
        Error::Forbidden { user: Some(u), .. } => format!("forbidden for user \"{u}\""),
        Error::Forbidden { .. } => "forbidden".into(),
        Error::Api { message, .. } => message.clone(),
        other => other.to_string(),
    }
}

async fn list_objs(
    target: &KubeTarget,
    res: &ApiResource,
    r: ResourceRef,
    need: Need,
    unreadable: &mut Vec<(ResourceRef, String)>,
) -> Result<Vec<Value>> {
    let api: Api<DynamicObject> = Api::all_with(target.client.clone(), res);
    tracing::debug!(resource = %r, "list");
    let lp = ListParams::default();
    let answer = with_deadline(target, || format!("listing {r}"), api.list(&lp)).await?;
    match answer {
        Ok(l) => l
            .items
            .into_iter()
            .map(|o| serde_json::to_value(o).map_err(|e| Error::Unexpected(e.to_string())))
            .collect(),
        Err(e) => match (classify(e, "list", r.clone(), target), need) {
            // A 404 on a list means the API (CRD) does not exist on this cluster: none.
            (Error::NotFound { .. }, _) if need == Need::Optional => Ok(vec![]),
            (
                e @ (Error::Unreachable { .. }
                | Error::Unauthorized { .. }
                | Error::Timeout(_)
                | Error::ImpersonationRefused { .. }),
                _,
            ) => Err(e),
            (e, Need::Required) => Err(e),
            (e, Need::Optional) => {
                tracing::debug!("{e}");
                unreadable.push((r, short_reason(&e)));
                Ok(vec![])
            }
        },
    }
}

/// Reads every object of [`ClusterObjects`] with the user's credentials.
///
/// Errors (exit 4): unreachable API server, 401, and 403/404 on the required objects
/// (ClusterVersion, Infrastructure, pull secret, coreos-bootimages, Nodes), each naming the
/// resource. 404 on optional objects means "none"; 403 on them is recorded in
/// [`ClusterObjects::unreadable`] and becomes a warning.
pub async fn fetch(target: &KubeTarget) -> Result<ClusterObjects> {
    let (objects, mut errors) = fetch_all(target).await?;
    if errors.is_empty() {
        Ok(objects)
    } else {
        Err(errors.remove(0))
    }
}

/// For [`fetch_all`]: a failed required read that is a 403/404/5xx is recorded in `failed` (and
/// in `u`, the unreadable list, unless a 404) and read as the default (absent); unreachable,
/// 401, timeouts and refused impersonation stop everything.
fn keep_failed<T: Default>(
    r: Result<T>,
    failed: &mut Vec<Error>,
    u: &mut Vec<(ResourceRef, String)>,
    what: ResourceRef,
) -> Result<T> {
    match r {
        Ok(v) => Ok(v),
        Err(
            e @ (Error::Unreachable { .. }
            | Error::Unauthorized { .. }
            | Error::Timeout(_)
            | Error::ImpersonationRefused { .. }),
        ) => Err(e),
        Err(e) => {
            if !matches!(e, Error::NotFound { .. }) {
                u.push((what, short_reason(&e)));
            }
            failed.push(e);
            Ok(T::default())
        }
    }
}

/// A required single-object read of [`fetch_all`], failures kept by [`keep_failed`].
async fn required_get(
    target: &KubeTarget,
    res: &ApiResource,
    namespace: Option<&str>,
    name: &str,
    what: ResourceRef,
    failed: &mut Vec<Error>,
    u: &mut Vec<(ResourceRef, String)>,
) -> Result<Option<Value>> {
    let r = get_obj(target, res, namespace, name, what.clone(), Need::Required, u).await;
    keep_failed(r, failed, u, what)
}

/// Like [`fetch`], but a failed required read does not stop it: the error is returned in the
/// second value (in read order), the resource recorded in [`ClusterObjects::unreadable`]
/// unless it was a 404, and reading goes on, so `info` can print what it could read.
/// Errors (first value): unreachable, 401, timeouts, refused impersonation.
pub async fn fetch_all(target: &KubeTarget) -> Result<(ClusterObjects, Vec<Error>)> {
    let cfg = "config.openshift.io";
    let mut u = Vec::new();
    let mut failed: Vec<Error> = Vec::new();
    // The first read also tells us whether the server is reachable and accepts us.
    let cluster_version = required_get(
        target,
        &ar(cfg, "v1", "ClusterVersion", "clusterversions"),
        None,
        "version",
        ResourceRef::cluster("ClusterVersion", "version"),
        &mut failed,
        &mut u,
    )
    .await?;
    let infrastructure = required_get(
        target,
        &ar(cfg, "v1", "Infrastructure", "infrastructures"),
        None,
        "cluster",
        ResourceRef::cluster("Infrastructure", "cluster"),
        &mut failed,
        &mut u,
    )
    .await?;
    let secret = ar("", "v1", "Secret", "secrets");
    let cm = ar("", "v1", "ConfigMap", "configmaps");
    let pull_secret = required_get(
        target,
        &secret,
        Some("openshift-config"),
        "pull-secret",
        ResourceRef::namespaced("Secret", "openshift-config", "pull-secret"),
        &mut failed,
        &mut u,
    )
    .await?;
    let coreos_bootimages = required_get(
        target,
        &cm,
        Some("openshift-machine-config-operator"),
        "coreos-bootimages",
        ResourceRef::namespaced(
            "ConfigMap",
            "openshift-machine-config-operator",
            "coreos-bootimages",
        ),
        &mut failed,
        &mut u,
    )
    .await?;
    let what = ResourceRef::list("Nodes");
    let nodes = list_objs(
        target,
        &ar("", "v1", "Node", "nodes"),
        what.clone(),
        Need::Required,
        &mut u,
    )
    .await;
    let nodes = keep_failed(nodes, &mut failed, &mut u, what)?;

    let proxy = get_obj(
        target,
        &ar(cfg, "v1", "Proxy", "proxies"),
        None,
        "cluster",
        ResourceRef::cluster("Proxy", "cluster"),
        Need::Optional,
        &mut u,
    )
    .await?;
    let trust_bundle =
        referenced_config_map(target, &cm, proxy.as_ref(), "/spec/trustedCA/name", &mut u).await?;
    let image_config = get_obj(
        target,
        &ar(cfg, "v1", "Image", "images"),
        None,
        "cluster",
        ResourceRef::cluster("Image.config.openshift.io", "cluster"),
        Need::Optional,
        &mut u,
    )
    .await?;
    let additional_trusted_ca = referenced_config_map(
        target,
        &cm,
        image_config.as_ref(),
        "/spec/additionalTrustedCA/name",
        &mut u,
    )
    .await?;
    let cluster_config = get_obj(
        target,
        &cm,
        Some("kube-system"),
        "cluster-config-v1",
        ResourceRef::namespaced("ConfigMap", "kube-system", "cluster-config-v1"),
        Need::Optional,
        &mut u,
    )
    .await?;
    let image_digest_mirror_sets = list_objs(
        target,
        &ar(cfg, "v1", "ImageDigestMirrorSet", "imagedigestmirrorsets"),
        ResourceRef::list("ImageDigestMirrorSets"),
        Need::Optional,
        &mut u,
    )
    .await?;
    let image_tag_mirror_sets = list_objs(
        target,
        &ar(cfg, "v1", "ImageTagMirrorSet", "imagetagmirrorsets"),
        ResourceRef::list("ImageTagMirrorSets"),
        Need::Optional,
        &mut u,
    )
    .await?;
    let image_content_source_policies = list_objs(
        target,
        &ar(
            "operator.openshift.io",
            "v1alpha1",
            "ImageContentSourcePolicy",
            "imagecontentsourcepolicies",
        ),
        ResourceRef::list("ImageContentSourcePolicies"),
        Need::Optional,
        &mut u,
    )
    .await?;
    let worker_user_data = get_obj(
        target,
        &secret,
        Some("openshift-machine-api"),
        "worker-user-data-managed",
        ResourceRef::namespaced("Secret", "openshift-machine-api", "worker-user-data-managed"),
        Need::Optional,
        &mut u,
    )
    .await?;
    let mut machine_configs = Vec::new();
    let mc = ar(
        "machineconfiguration.openshift.io",
        "v1",
        "MachineConfig",
        "machineconfigs",
    );
    for name in [
        "99-worker-ssh",
        "99-worker-fips",
        "50-workers-chrony-configuration",
    ] {
        if let Some(v) = get_obj(
            target,
            &mc,
            None,
            name,
            ResourceRef::cluster("MachineConfig", name),
            Need::Optional,
            &mut u,
        )
        .await?
        {
            machine_configs.push(v);
        }
    }
    let network = get_obj(
        target,
        &ar(cfg, "v1", "Network", "networks"),
        None,
        "cluster",
        ResourceRef::cluster("Network.config.openshift.io", "cluster"),
        Need::Optional,
        &mut u,
    )
    .await?;
    let objects = ClusterObjects {
        cluster_version,
        infrastructure,
        pull_secret,
        proxy,
        trust_bundle,
        image_config,
        additional_trusted_ca,
        cluster_config,
        image_digest_mirror_sets,
        image_tag_mirror_sets,
        image_content_source_policies,
        coreos_bootimages,
        worker_user_data,
        machine_configs,
        nodes,
        network,
        unreadable: u,
    };
    Ok((objects, failed))
}
