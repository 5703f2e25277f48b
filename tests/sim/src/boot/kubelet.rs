//! The kubelet's TLS bootstrap after the node rebooted into the cluster (kubelet
//! `pkg/kubelet/certificate/bootstrap`, client-go certificate manager; docs/approve.md "What a
//! real kubelet sends"):
//! a client CSR as the node-bootstrapper service account, wait for it (a watch on the CSR by
//! field selector `metadata.name`), then with the issued client certificate: create the Node,
//! post Ready in `nodes/status`, send the serving CSR as `system:node:<name>`, wait for it.

use std::net::IpAddr;

use base64::Engine;
use k8s_openapi::api::certificates::v1::{CertificateSigningRequest, CertificateSigningRequestSpec};
use k8s_openapi::api::core::v1::Node;
use k8s_openapi::ByteString;
use kube::api::{Api, ObjectMeta, Patch, PatchParams, PostParams};
use kube::config::{AuthInfo, KubeConfigOptions, Kubeconfig, NamedAuthInfo, NamedContext};
use kube::{Client, Config};
use serde_json::json;

use super::csr;

/// Context of the simulator's kubeconfig that holds the node-bootstrapper token.
pub const BOOTSTRAP_CONTEXT: &str = "bootstrapper";

/// How waiting for a CSR ended badly.
#[derive(Debug, thiserror::Error)]
pub enum KubeletError {
    #[error("CSR {name} was denied: {reason}")]
    Denied { name: String, reason: String },
    #[error("CSR {name} failed: {reason}")]
    Failed { name: String, reason: String },
    #[error("CSR {name} was deleted before a certificate was issued")]
    Deleted { name: String },
    #[error("cluster access ({what}): {source}")]
    Kube {
        what: String,
        #[source]
        source: kube::Error,
    },
    #[error("{0}")]
    Other(String),
}

impl KubeletError {
    fn kube(what: impl Into<String>) -> impl FnOnce(kube::Error) -> KubeletError {
        let what = what.into();
        move |source| KubeletError::Kube { what, source }
    }
}

/// The bootstrap kubeconfig: the simulator's kubeconfig with context `bootstrapper` made current.
pub async fn bootstrap_client(kubeconfig: &Kubeconfig) -> Result<(Client, Kubeconfig), KubeletError> {
    let opts = KubeConfigOptions {
        context: Some(BOOTSTRAP_CONTEXT.into()),
        ..Default::default()
    };
    let cfg = Config::from_custom_kubeconfig(kubeconfig.clone(), &opts)
        .await
        .map_err(|e| KubeletError::Other(format!("kubeconfig context {BOOTSTRAP_CONTEXT}: {e}")))?;
    let client = Client::try_from(cfg).map_err(KubeletError::kube("building the bootstrap client"))?;
    Ok((client, kubeconfig.clone()))
}

/// A client authenticated by the node's own certificate (`client-certificate-data` /
/// `client-key-data`), to the cluster of the bootstrap context.
pub async fn node_client(
    kubeconfig: &Kubeconfig,
    cert_pem: &str,
    key_pem: &str,
) -> Result<Client, KubeletError> {
    let b64 = |s: &str| base64::engine::general_purpose::STANDARD.encode(s);
    let boot_ctx = kubeconfig
        .contexts
        .iter()
        .find(|c| c.name == BOOTSTRAP_CONTEXT)
        .and_then(|c| c.context.clone())
        .ok_or_else(|| KubeletError::Other(format!("kubeconfig has no context {BOOTSTRAP_CONTEXT}")))?;
    let mut kc = kubeconfig.clone();
    kc.auth_infos.push(NamedAuthInfo {
        name: "kubelet".into(),
        auth_info: Some(AuthInfo {
            client_certificate_data: Some(b64(cert_pem)),
            client_key_data: Some(b64(key_pem).into()),
            ..Default::default()
        }),
        other: Default::default(),
    });
    let mut ctx = boot_ctx;
    ctx.user = Some("kubelet".into());
    kc.contexts.push(NamedContext {
        name: "kubelet".into(),
        context: Some(ctx),
        other: Default::default(),
    });
    let opts = KubeConfigOptions {
        context: Some("kubelet".into()),
        ..Default::default()
    };
    let cfg = Config::from_custom_kubeconfig(kc, &opts)
        .await
        .map_err(|e| KubeletError::Other(format!("node kubeconfig: {e}")))?;
    Client::try_from(cfg).map_err(KubeletError::kube("building the node client"))
}

/// Creates a CSR (generateName `csr-`, as the kubelet does) and returns its name.
pub async fn create_csr(
    client: &Client,
    pem: &str,
    signer: &str,
    usages: &[&str],
) -> Result<String, KubeletError> {
    let api: Api<CertificateSigningRequest> = Api::all(client.clone());
    let obj = CertificateSigningRequest {
        metadata: ObjectMeta {
            generate_name: Some("csr-".into()),
            ..Default::default()
        },
        spec: CertificateSigningRequestSpec {
            request: ByteString(pem.as_bytes().to_vec()),
            signer_name: signer.into(),
            usages: Some(usages.iter().map(|u| u.to_string()).collect()),
            ..Default::default()
        },
        status: None,
    };
    let created = api
        .create(&PostParams::default(), &obj)
        .await
        .map_err(KubeletError::kube(format!("creating a {signer} CSR")))?;
    created
        .metadata
        .name
        .ok_or_else(|| KubeletError::Other("the API returned a CSR without a name".into()))
}

/// Waits (a watch by field selector `metadata.name=<name>`) until the CSR has a certificate,
/// and returns it (PEM). Denied / Failed conditions and deletion end the wait with an error.
pub async fn wait_certificate(client: &Client, name: &str) -> Result<String, KubeletError> {
    let api: Api<CertificateSigningRequest> = Api::all(client.clone());
    let done = |o: Option<&CertificateSigningRequest>| -> bool {
        match o {
            None => true,
            Some(c) => {
                let st = c.status.as_ref();
                st.and_then(|s| s.certificate.as_ref())
                    .is_some_and(|b| !b.0.is_empty())
                    || st.and_then(|s| s.conditions.as_ref()).is_some_and(|cs| {
                        cs.iter()
                            .any(|c| (c.type_ == "Denied" || c.type_ == "Failed") && c.status == "True")
                    })
            }
        }
    };
    let got = kube::runtime::wait::await_condition(api, name, done)
        .await
        .map_err(|e| KubeletError::Other(format!("watching CSR {name}: {e}")))?;
    let Some(c) = got else {
        return Err(KubeletError::Deleted { name: name.into() });
    };
    let st = c.status.unwrap_or_default();
    for cond in st.conditions.unwrap_or_default() {
        if cond.status == "True" && (cond.type_ == "Denied" || cond.type_ == "Failed") {
            let reason = format!(
                "{} {}",
                cond.reason.unwrap_or_default(),
                cond.message.unwrap_or_default()
            )
            .trim()
            .to_string();
            return Err(if cond.type_ == "Denied" {
                KubeletError::Denied {
                    name: name.into(),
                    reason,
                }
            } else {
                KubeletError::Failed {
                    name: name.into(),
                    reason,
                }
            });
        }
    }
    let cert = st.certificate.map(|b| b.0).unwrap_or_default();
    String::from_utf8(cert)
        .map_err(|_| KubeletError::Other(format!("CSR {name}: certificate is not PEM text")))
}

/// Checks that `cert_pem` is a certificate for `system:node:<node>` whose key is `key`'s.
pub fn check_issued(cert_pem: &str, node: &str, key: &rcgen::KeyPair) -> Result<(), String> {
    let (_, pem) = x509_parser::pem::parse_x509_pem(cert_pem.as_bytes())
        .map_err(|e| format!("certificate is not PEM: {e}"))?;
    let cert = pem
        .parse_x509()
        .map_err(|e| format!("certificate does not parse: {e}"))?;
    let cn: Vec<String> = cert
        .subject()
        .iter_common_name()
        .filter_map(|c| c.as_str().ok().map(String::from))
        .collect();
    if cn != [format!("system:node:{node}")] {
        return Err(format!(
            "issued certificate has CN {cn:?}, expected system:node:{node}"
        ));
    }
    if cert.public_key().raw != rcgen::PublicKeyData::subject_public_key_info(key).as_slice() {
        return Err("issued certificate is not for the key the node generated".into());
    }
    Ok(())
}

/// Go's `GOARCH` name of an RPM architecture (Node labels and nodeInfo use Go names).
pub fn go_arch(arch: &str) -> &str {
    match arch {
        "x86_64" | "" => "amd64",
        "aarch64" => "arm64",
        "ppc64le" => "ppc64le",
        "s390x" => "s390x",
        other => other,
    }
}

/// The label OpenShift's kubelet sets on its own Node (`--node-labels=node-role.kubernetes.io/worker,
/// node.openshift.io/os_id=${ID}` in the machine-config operator's kubelet.service). Upstream
/// NodeRestriction refuses it for `system:node:<name>`; OpenShift's kube-apiserver allows it
/// (openshift/kubernetes carries `node-role.kubernetes.io/{control-plane,master,worker,etcd}` in
/// k8s.io/kubelet's well-known kubelet labels, which NodeRestriction consults).
pub const WORKER_ROLE_LABEL: &str = "node-role.kubernetes.io/worker";

/// Creates Node `name` as the node (`client`: `system:node:<name>`, labels as OpenShift's
/// kubelet sets them), then posts Ready with its addresses through `nodes/<name>/status` as the
/// node (a PATCH without reading first: the Node authorizer grants no `get nodes/status`).
///
/// On an upstream kube-apiserver (the real control plane of `up --real-apiserver`, without
/// OpenShift's carry) NodeRestriction refuses [`WORKER_ROLE_LABEL`] from the node: the Node is
/// then created without it and the label added by the cluster admin of `kubeconfig` (context
/// `admin`), before the node posts Ready, so a Ready node carries its role as on OpenShift.
pub async fn register_node(
    client: &Client,
    kubeconfig: &Kubeconfig,
    name: &str,
    ips: &[IpAddr],
    arch: &str,
    version: &str,
) -> Result<(), KubeletError> {
    let api: Api<Node> = Api::all(client.clone());
    // `uname -r` ends in the RPM architecture; labels and nodeInfo use Go's name.
    let rpm_arch = if arch.is_empty() { "x86_64" } else { arch };
    let arch = go_arch(arch);
    let node: Node = serde_json::from_value(json!({
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": {
                "kubernetes.io/hostname": name,
                "kubernetes.io/arch": arch,
                "kubernetes.io/os": "linux",
                "beta.kubernetes.io/arch": arch,
                "beta.kubernetes.io/os": "linux",
                "node-role.kubernetes.io/worker": "",
                "node.openshift.io/os_id": "rhcos"
            }
        },
        "spec": {}
    }))
    .map_err(|e| KubeletError::Other(e.to_string()))?;
    match api.create(&PostParams::default(), &node).await {
        Ok(_) => {}
        // A kubelet that restarts finds its Node already there.
        Err(kube::Error::Api(s)) if s.code == 409 => {}
        Err(kube::Error::Api(s))
            if s.code == 403
                && s.message.contains("is not allowed to set the following labels")
                && s.message.contains(WORKER_ROLE_LABEL) =>
        {
            let mut plain = node.clone();
            if let Some(l) = plain.metadata.labels.as_mut() {
                l.remove(WORKER_ROLE_LABEL);
            }
            match api.create(&PostParams::default(), &plain).await {
                Ok(_) => {}
                Err(kube::Error::Api(s)) if s.code == 409 => {}
                Err(e) => return Err(KubeletError::kube(format!("creating Node {name}"))(e)),
            }
            label_role_as_admin(kubeconfig, name).await?;
        }
        Err(e) => return Err(KubeletError::kube(format!("creating Node {name}"))(e)),
    }
    let now = super::rest::now();
    let mut addresses: Vec<serde_json::Value> = ips
        .iter()
        .map(|ip| json!({"type": "InternalIP", "address": ip.to_string()}))
        .collect();
    addresses.push(json!({"type": "Hostname", "address": name}));
    let kube_version = if version.is_empty() {
        "v1.31.6".to_string()
    } else {
        kubelet_version(version)
    };
    let status = json!({
        "status": {
            "addresses": addresses,
            "conditions": [
                {"type": "MemoryPressure", "status": "False", "reason": "KubeletHasSufficientMemory", "message": "kubelet has sufficient memory available", "lastHeartbeatTime": now, "lastTransitionTime": now},
                {"type": "DiskPressure", "status": "False", "reason": "KubeletHasNoDiskPressure", "message": "kubelet has no disk pressure", "lastHeartbeatTime": now, "lastTransitionTime": now},
                {"type": "PIDPressure", "status": "False", "reason": "KubeletHasSufficientPID", "message": "kubelet has sufficient PID available", "lastHeartbeatTime": now, "lastTransitionTime": now},
                {"type": "Ready", "status": "True", "reason": "KubeletReady", "message": "kubelet is posting ready status", "lastHeartbeatTime": now, "lastTransitionTime": now}
            ],
            "capacity": {"cpu": "4", "memory": "16393852Ki", "pods": "250", "ephemeral-storage": "125293548Ki"},
            "allocatable": {"cpu": "3500m", "memory": "15242876Ki", "pods": "250", "ephemeral-storage": "114396791822"},
            "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
            "nodeInfo": {
                "architecture": arch,
                "operatingSystem": "linux",
                "osImage": "Red Hat Enterprise Linux CoreOS (simulated)",
                "kernelVersion": format!("5.14.0-427.simulated.el9_4.{rpm_arch}"),
                "containerRuntimeVersion": "cri-o://1.31.0-simulated",
                "kubeletVersion": kube_version,
                "kubeProxyVersion": "",
                "machineID": super::rest::derived_uuid(&format!("machine-{name}")).replace('-', ""),
                "systemUUID": super::rest::derived_uuid(&format!("system-{name}")),
                "bootID": super::rest::derived_uuid(&format!("boot-{name}-{now}"))
            }
        }
    });
    api.patch_status(name, &PatchParams::default(), &Patch::Merge(&status))
        .await
        .map_err(KubeletError::kube(format!("posting Node {name} status")))?;
    Ok(())
}

/// Adds [`WORKER_ROLE_LABEL`] to Node `name` as the admin of `kubeconfig` (context `admin`):
/// what OpenShift's kube-apiserver lets the kubelet set itself (see [`register_node`]).
async fn label_role_as_admin(kubeconfig: &Kubeconfig, name: &str) -> Result<(), KubeletError> {
    let opts = KubeConfigOptions {
        context: Some("admin".into()),
        ..Default::default()
    };
    let cfg = Config::from_custom_kubeconfig(kubeconfig.clone(), &opts)
        .await
        .map_err(|e| KubeletError::Other(format!("kubeconfig context admin: {e}")))?;
    let admin = Client::try_from(cfg).map_err(KubeletError::kube("building the admin client"))?;
    let api: Api<Node> = Api::all(admin);
    let patch = json!({"metadata": {"labels": {WORKER_ROLE_LABEL: ""}}});
    api.patch(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .map_err(KubeletError::kube(format!(
            "labelling Node {name} {WORKER_ROLE_LABEL} as the admin"
        )))?;
    Ok(())
}

/// OpenShift 4.N ships Kubernetes 1.(N+13) (4.18 → 1.31).
fn kubelet_version(ocp: &str) -> String {
    let minor = ocp
        .split('.')
        .nth(1)
        .and_then(|m| m.parse::<u32>().ok())
        .unwrap_or(18);
    format!("v1.{}.0", minor + 13)
}

/// Client CSR usages (ECDSA key: no key encipherment — client-go `DefaultKubeletClientGetUsages`).
pub const CLIENT_USAGES: &[&str] = &["digital signature", "client auth"];
/// Serving CSR usages for an ECDSA key.
pub const SERVING_USAGES: &[&str] = &["digital signature", "server auth"];

/// Builds a client CSR (see [`csr::client`]).
pub fn client_request(node: &str) -> Result<csr::Request, KubeletError> {
    csr::client(node).map_err(|e| KubeletError::Other(format!("building the client CSR: {e}")))
}
