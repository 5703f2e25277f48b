//! The control-plane nodes' simulated kubelets on the real control plane (issue 12, item 5),
//! with the two cluster parts a pod needs that the simulator does not run for real.
//!
//! - **Kubelet, per control-plane Node** (`node-role.kubernetes.io/master` or
//!   `control-plane`), acting as `system:node:<name>` (a client certificate the cluster CA
//!   issued, group `system:nodes`, so the Node authorizer and NodeRestriction judge it): a pod
//!   bound to the node whose PersistentVolumeClaims are all Bound gets a Running status
//!   ([`running_pod_status`]) through `pods/status`; a pod being deleted
//!   (`deletionTimestamp` set) is deleted for good (grace period 0, UID precondition), as the
//!   kubelet does once its containers stopped. Pod exec reaches the node's kubelet API, which
//!   `kubelet-exec` serves (our Go program on the kubelet's own streaming code, built by
//!   `scripts/real-components.sh kube`): kube-apiserver proxies `pods/exec` to
//!   `https://<InternalIP>:<kubeletEndpoint port>/exec/...` with its kubelet client
//!   certificate and checks the serving certificate against the cluster CA; the command runs
//!   through `agent-day2-sim container-exec` ([`super::exec::plan`]).
//! - **Scheduler stand-in**: a pod with no `spec.nodeName` is bound (`pods/binding`) to the
//!   first control-plane node.
//! - **Volume provisioner stand-in**: a Pending PersistentVolumeClaim with no volume gets a
//!   `hostPath` PersistentVolume `pvc-<claim uid>` of the requested size and access modes, with
//!   a `claimRef` to it, on `VOLUMES/<namespace>/<claim>` (where pod exec's `tar` finds the
//!   claim's contents); kube-controller-manager's real `persistentvolume-binder` controller
//!   then binds the two, as with any external provisioner. Reclaim policy Retain (nothing here
//!   could delete a hostPath volume's data).

use super::exec::AssistedDb;
use crate::pki::Ca;
use anyhow::Context;
use futures::StreamExt;
use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim, Pod};
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams, Preconditions};
use kube::runtime::watcher;
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};

/// File in `DIR` that `container-exec` reads: what pod exec may run ([`ExecFile`]).
pub const EXEC_FILE: &str = "exec.json";

/// `DIR/exec.json`: `{"assistedDbUrl": URL or null, "volumesDir": PATH}`.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ExecFile {
    pub assisted_db_url: Option<String>,
    pub volumes_dir: PathBuf,
}

impl ExecFile {
    /// The [`super::exec::ExecConfig`] it describes. Errors: a URL that does not parse.
    pub fn config(&self) -> anyhow::Result<super::exec::ExecConfig> {
        Ok(super::exec::ExecConfig {
            assisted_db: self
                .assisted_db_url
                .as_deref()
                .map(AssistedDb::parse)
                .transpose()?,
            volumes_dir: self.volumes_dir.clone(),
        })
    }
}

/// A control-plane node of the seed: its name and kubelet API addresses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ControlPlaneNode {
    pub name: String,
    /// `InternalIP:kubeletEndpoint.Port` for each InternalIP, in the Node's order.
    pub kubelet: Vec<SocketAddr>,
}

/// The control-plane Nodes among the seed objects, in seed order.
pub fn control_plane_nodes(objects: &[Value]) -> Vec<ControlPlaneNode> {
    objects
        .iter()
        .filter(|o| o["kind"] == "Node" && o["apiVersion"] == "v1")
        .filter(|o| {
            let l = &o["metadata"]["labels"];
            l.get("node-role.kubernetes.io/master").is_some()
                || l.get("node-role.kubernetes.io/control-plane").is_some()
        })
        .filter_map(|o| {
            let name = o["metadata"]["name"].as_str()?.to_string();
            let port = o["status"]["daemonEndpoints"]["kubeletEndpoint"]["Port"]
                .as_u64()
                .and_then(|p| u16::try_from(p).ok())
                .unwrap_or(10250);
            let kubelet = o["status"]["addresses"]
                .as_array()
                .into_iter()
                .flatten()
                .filter(|a| a["type"] == "InternalIP")
                .filter_map(|a| a["address"].as_str()?.parse::<IpAddr>().ok())
                .map(|ip| SocketAddr::new(ip, port))
                .collect();
            Some(ControlPlaneNode { name, kubelet })
        })
        .collect()
}

/// `kubelet-exec`'s flags: every node's kubelet address, the serving pair, the client CA, and
/// `RUNTIME container-exec --dir DIR` as the runtime.
pub fn kubelet_exec_args(
    nodes: &[ControlPlaneNode],
    cert: &Path,
    key: &Path,
    ca: &Path,
    runtime: &Path,
    dir: &Path,
) -> Vec<String> {
    let mut a: Vec<String> = nodes
        .iter()
        .flat_map(|n| n.kubelet.iter())
        .map(|s| format!("-listen={s}"))
        .collect();
    a.extend([
        format!("-tls-cert-file={}", cert.display()),
        format!("-tls-private-key-file={}", key.display()),
        format!("-client-ca-file={}", ca.display()),
        format!("-runtime={}", runtime.display()),
        "-runtime-arg=container-exec".into(),
        "-runtime-arg=--dir".into(),
        format!("-runtime-arg={}", dir.display()),
    ]);
    a
}

/// The hostPath PersistentVolume that provisions `pvc` (None: the claim needs none: it has a
/// volume, is not Pending, or is being deleted).
pub fn volume_for(pvc: &Value, volumes_dir: &Path) -> Option<Value> {
    let meta = &pvc["metadata"];
    if !meta["deletionTimestamp"].is_null()
        || pvc["spec"]["volumeName"].as_str().is_some_and(|v| !v.is_empty())
        || pvc["status"]["phase"].as_str().is_some_and(|p| p != "Pending")
    {
        return None;
    }
    let (ns, name, uid) = (
        meta["namespace"].as_str()?,
        meta["name"].as_str()?,
        meta["uid"].as_str()?,
    );
    let size = pvc["spec"]["resources"]["requests"]["storage"]
        .as_str()
        .unwrap_or("1Gi");
    let modes = match &pvc["spec"]["accessModes"] {
        Value::Array(a) if !a.is_empty() => Value::Array(a.clone()),
        _ => json!(["ReadWriteOnce"]),
    };
    let mut spec = json!({
        "capacity": {"storage": size},
        "accessModes": modes,
        "persistentVolumeReclaimPolicy": "Retain",
        "volumeMode": pvc["spec"]["volumeMode"].as_str().unwrap_or("Filesystem"),
        "hostPath": {"path": volumes_dir.join(ns).join(name).display().to_string(), "type": "DirectoryOrCreate"},
        "claimRef": {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "namespace": ns, "name": name, "uid": uid},
    });
    if let Some(class) = pvc["spec"]["storageClassName"].as_str() {
        spec["storageClassName"] = json!(class);
    }
    Some(json!({
        "apiVersion": "v1", "kind": "PersistentVolume",
        "metadata": {"name": format!("pvc-{uid}"), "annotations": {"pv.kubernetes.io/provisioned-by": "agent-day2-sim"}},
        "spec": spec,
    }))
}

/// What the kubelet of `node` does with `pod` next.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PodAction {
    /// Bind it to this node (the scheduler stand-in).
    Bind(String),
    /// Report it Running (its claims are Bound).
    Run,
    /// Finish its deletion.
    Remove,
    /// Nothing (yet).
    None,
}

/// The next step for `pod`, given the control-plane node names (the first takes unscheduled
/// pods) and whether every claim it mounts is Bound.
pub fn pod_action(pod: &Value, nodes: &[String], claims_bound: bool) -> PodAction {
    let node = pod["spec"]["nodeName"].as_str().unwrap_or("");
    let ours = nodes.iter().any(|n| n == node);
    if !pod["metadata"]["deletionTimestamp"].is_null() {
        return if ours { PodAction::Remove } else { PodAction::None };
    }
    if node.is_empty() {
        return nodes
            .first()
            .map_or(PodAction::None, |n| PodAction::Bind(n.clone()));
    }
    let phase = pod["status"]["phase"].as_str().unwrap_or("Pending");
    if ours && phase == "Pending" && claims_bound {
        return PodAction::Run;
    }
    PodAction::None
}

/// The claim names `pod` mounts.
pub fn claims_of(pod: &Value) -> Vec<String> {
    pod["spec"]["volumes"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|v| v["persistentVolumeClaim"]["claimName"].as_str().map(String::from))
        .collect()
}

/// The running kubelets: admin and per-node clients.
struct Kubelets {
    admin: kube::Client,
    nodes: BTreeMap<String, kube::Client>,
    order: Vec<String>,
    volumes_dir: PathBuf,
}

impl Kubelets {
    async fn claims_bound(&self, ns: &str, pod: &Value) -> anyhow::Result<bool> {
        let api: Api<PersistentVolumeClaim> = Api::namespaced(self.admin.clone(), ns);
        for c in claims_of(pod) {
            match api.get_opt(&c).await? {
                Some(p) if p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Bound") => {}
                _ => return Ok(false),
            }
        }
        Ok(true)
    }

    async fn pod(&self, pod: &Pod) -> anyhow::Result<()> {
        let v = serde_json::to_value(pod)?;
        let (Some(ns), Some(name)) = (
            v["metadata"]["namespace"].as_str(),
            v["metadata"]["name"].as_str(),
        ) else {
            return Ok(());
        };
        let bound = self.claims_bound(ns, &v).await?;
        match pod_action(&v, &self.order, bound) {
            PodAction::None => {}
            PodAction::Bind(node) => {
                let api: Api<Pod> = Api::namespaced(self.admin.clone(), ns);
                let binding = json!({"apiVersion": "v1", "kind": "Binding", "metadata": {"name": name},
                    "target": {"apiVersion": "v1", "kind": "Node", "name": node}});
                let _: Value = api
                    .create_subresource("binding", name, &PostParams::default(), &binding)
                    .await
                    .with_context(|| format!("binding pod {ns}/{name} to {node}"))?;
            }
            PodAction::Run => {
                let node = v["spec"]["nodeName"].as_str().unwrap_or_default();
                let api: Api<Pod> = Api::namespaced(self.nodes[node].clone(), ns);
                let status = running_pod_status(&v);
                api.patch_status(
                    name,
                    &PatchParams::default(),
                    &Patch::Merge(json!({"status": status})),
                )
                .await
                .with_context(|| format!("Running status of pod {ns}/{name} as system:node:{node}"))?;
            }
            PodAction::Remove => {
                let node = v["spec"]["nodeName"].as_str().unwrap_or_default();
                let api: Api<Pod> = Api::namespaced(self.nodes[node].clone(), ns);
                let dp = DeleteParams {
                    grace_period_seconds: Some(0),
                    preconditions: Some(Preconditions {
                        uid: v["metadata"]["uid"].as_str().map(String::from),
                        resource_version: None,
                    }),
                    ..Default::default()
                };
                match api.delete(name, &dp).await {
                    Ok(_) => {}
                    Err(kube::Error::Api(e)) if e.code == 404 || e.code == 409 => {}
                    Err(e) => {
                        return Err(e)
                            .with_context(|| format!("deleting pod {ns}/{name} as system:node:{node}"))
                    }
                }
            }
        }
        Ok(())
    }

    async fn claim(&self, pvc: &PersistentVolumeClaim) -> anyhow::Result<()> {
        let v = serde_json::to_value(pvc)?;
        let ns = v["metadata"]["namespace"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        if let Some(pv) = volume_for(&v, &self.volumes_dir) {
            let api: Api<PersistentVolume> = Api::all(self.admin.clone());
            let pv: PersistentVolume = serde_json::from_value(pv)?;
            match api.create(&PostParams::default(), &pv).await {
                // A new claim starts empty, even where an earlier one of its name left data.
                Ok(_) => {
                    let d = self
                        .volumes_dir
                        .join(&ns)
                        .join(v["metadata"]["name"].as_str().unwrap_or_default());
                    let _ = std::fs::remove_dir_all(&d);
                    std::fs::create_dir_all(&d).with_context(|| format!("cannot create {}", d.display()))?;
                }
                Err(kube::Error::Api(e)) if e.code == 409 => {}
                Err(e) => return Err(e).context("provisioning a PersistentVolume"),
            }
        } else if v["status"]["phase"] == "Bound" {
            // The pods that waited for it.
            let pods: Api<Pod> = Api::namespaced(self.admin.clone(), &ns);
            for p in pods.list(&Default::default()).await? {
                let pv = serde_json::to_value(&p)?;
                if claims_of(&pv)
                    .iter()
                    .any(|c| Some(c.as_str()) == v["metadata"]["name"].as_str())
                {
                    self.pod(&p).await?;
                }
            }
        }
        Ok(())
    }
}

/// Runs `handle` on every object of `api` as it is created or changed (a watch, re-listed by
/// kube's watcher when it breaks); its errors are logged as `who`'s warnings. Never returns.
async fn each_applied<K, F, Fut>(api: Api<K>, who: &'static str, handle: F)
where
    K: kube::Resource + Clone + std::fmt::Debug + serde::de::DeserializeOwned + Send + 'static,
    F: Fn(K) -> Fut,
    Fut: std::future::Future<Output = anyhow::Result<()>>,
{
    let mut s = watcher::watcher(api, watcher::Config::default()).boxed();
    while let Some(ev) = s.next().await {
        match ev {
            Ok(watcher::Event::Apply(o)) | Ok(watcher::Event::InitApply(o)) => {
                if let Err(e) = handle(o).await {
                    // The API server's refusal in a line, not kube's Status struct (issue 22
                    // item 11: the demo printed Rust debug structs as warnings); a conflict is
                    // the object having moved on, judged again at its next event.
                    match e.chain().find_map(|c| c.downcast_ref::<kube::Error>()) {
                        Some(kube::Error::Api(s)) if s.code == 409 => {
                            tracing::debug!("{who}: {}: HTTP 409 {}", e, s.message)
                        }
                        Some(kube::Error::Api(s)) => {
                            tracing::warn!("{who}: {e}: HTTP {} {}: {}", s.code, s.reason, s.message)
                        }
                        _ => tracing::warn!("{who}: {e:#}"),
                    }
                }
            }
            Ok(_) => {}
            Err(e) => {
                tracing::debug!("{who}: watch: {e}");
                tokio::time::sleep(std::time::Duration::from_millis(500)).await;
            }
        }
    }
}

/// Starts the kubelets, scheduler and provisioner stand-ins of `nodes` (see the module
/// documentation) as tasks that run until aborted. `kubeconfig` is the admin kubeconfig text
/// (context `admin`); node identities are issued by `ca` for `api_url`.
pub async fn start(
    kubeconfig: &str,
    ca: &Ca,
    api_url: &str,
    nodes: &[ControlPlaneNode],
    volumes_dir: &Path,
) -> anyhow::Result<Vec<tokio::task::JoinHandle<()>>> {
    let admin = super::client::client_for(kubeconfig).await?;
    let mut clients = BTreeMap::new();
    for n in nodes {
        let leaf = ca.issue_client(&format!("system:node:{}", n.name), &["system:nodes"])?;
        let kc = crate::kubeconfig::render(&crate::kubeconfig::KubeconfigParams {
            cluster_name: "sim",
            server: api_url,
            ca_pem: &ca.cert_pem,
            admin_cert_pem: &leaf.cert_pem,
            admin_key_pem: &leaf.key_pem,
            bootstrapper_token: "unused",
            viewer_token: "unused",
        });
        clients.insert(n.name.clone(), super::client::client_for(&kc).await?);
    }
    std::fs::create_dir_all(volumes_dir)
        .with_context(|| format!("cannot create {}", volumes_dir.display()))?;
    let k = std::sync::Arc::new(Kubelets {
        admin: admin.clone(),
        nodes: clients,
        order: nodes.iter().map(|n| n.name.clone()).collect(),
        volumes_dir: volumes_dir.to_path_buf(),
    });
    let k1 = k.clone();
    let pods = tokio::spawn(each_applied(
        Api::<Pod>::all(admin.clone()),
        "kubelets",
        move |p| {
            let k = k1.clone();
            async move { k.pod(&p).await }
        },
    ));
    let claims = tokio::spawn(each_applied(
        Api::<PersistentVolumeClaim>::all(admin),
        "provisioner",
        move |p| {
            let k = k.clone();
            async move { k.claim(&p).await }
        },
    ));
    Ok(vec![pods, claims])
}

/// The status of a pod that started at once: phase Running, conditions true, every container
/// running and ready (a made-up pod IP and container ids).
pub fn running_pod_status(pod: &Value) -> Value {
    let now = now_rfc3339();
    let statuses: Vec<Value> = pod["spec"]["containers"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|c| {
            json!({
                "name": c["name"],
                "image": c["image"],
                "imageID": "",
                "containerID": format!("cri-o://{}", hex::encode(random_bytes::<32>())),
                "ready": true,
                "started": true,
                "restartCount": 0,
                "state": {"running": {"startedAt": now}},
            })
        })
        .collect();
    let b = random_bytes::<2>();
    let cond =
        |t: &str| json!({"type": t, "status": "True", "lastProbeTime": null, "lastTransitionTime": now});
    json!({
        "phase": "Running",
        "conditions": [cond("PodReadyToStartContainers"), cond("Initialized"), cond("Ready"), cond("ContainersReady"), cond("PodScheduled")],
        "podIP": format!("10.128.{}.{}", b[0], b[1].max(2)),
        "startTime": now,
        "qosClass": "BestEffort",
        "containerStatuses": statuses,
    })
}

/// Now, whole seconds, RFC 3339 (as kube-apiserver writes timestamps).
fn now_rfc3339() -> String {
    let t = time::OffsetDateTime::now_utc()
        .replace_nanosecond(0)
        .unwrap_or(time::OffsetDateTime::UNIX_EPOCH);
    t.format(&time::format_description::well_known::Rfc3339)
        .unwrap_or_default()
}

fn random_bytes<const N: usize>() -> [u8; N] {
    let mut b = [0u8; N];
    getrandom::getrandom(&mut b).expect("getrandom");
    b
}

/// A test's fault file in the cluster directory: `DIR/FAULT_CUT_TAR` holding `N [TIMES]` makes
/// the next TIMES (default 1) `tar -x` execs get only N bytes of their stdin and report success
/// ([`super::exec::run_local`]'s `cut_stdin`); the file is removed once used up.
pub const FAULT_CUT_TAR: &str = "fault-cut-next-tar-x";

fn take_cut_fault(dir: &Path, command: &[String]) -> Option<u64> {
    let is_tar_x = command.first().is_some_and(|c| c.ends_with("tar")) && command.iter().any(|a| a == "-x");
    if !is_tar_x {
        return None;
    }
    let f = dir.join(FAULT_CUT_TAR);
    let text = std::fs::read_to_string(&f).ok()?;
    let mut w = text.split_whitespace();
    let n: u64 = w.next()?.parse().ok()?;
    let times: u32 = w.next().and_then(|t| t.parse().ok()).unwrap_or(1);
    if times > 1 {
        std::fs::write(&f, format!("{n} {}\n", times - 1)).ok()?;
    } else {
        std::fs::remove_file(&f).ok()?;
    }
    eprintln!("container-exec: fault: stdin cut after {n} bytes, exit 0 reported");
    Some(n)
}

/// `agent-day2-sim container-exec --dir DIR NAMESPACE POD CONTAINER -- COMMAND...`: the
/// "container runtime" of `kubelet-exec`: reads `DIR/exec.json` and the pod (as the admin of
/// `DIR/kubeconfig`), plans the command ([`super::exec::plan`]) and runs it with this process's
/// stdin, stdout and stderr ([`super::exec::run_local`]). Returns the exit code: the command's;
/// 1 with a message on stderr when DIR, the pod or the container cannot be read.
pub fn container_exec(dir: &Path, ns: &str, pod: &str, container: &str, command: &[String]) -> i32 {
    let planned = (|| -> anyhow::Result<super::exec::Plan> {
        let file = dir.join(EXEC_FILE);
        let text =
            std::fs::read_to_string(&file).with_context(|| format!("cannot read {}", file.display()))?;
        let cfg = serde_json::from_str::<ExecFile>(&text)
            .with_context(|| format!("{}", file.display()))?
            .config()?;
        let kc_path = dir.join("kubeconfig");
        let kc = std::fs::read_to_string(&kc_path)
            .with_context(|| format!("cannot read {}", kc_path.display()))?;
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        let pod_v = rt.block_on(async {
            let client = super::client::client_for(&kc).await?;
            let p = Api::<Pod>::namespaced(client, ns).get(pod).await?;
            anyhow::Ok(serde_json::to_value(p)?)
        })?;
        // A real kubelet has no such container before the pod runs.
        let phase = pod_v["status"]["phase"].as_str().unwrap_or("Pending");
        if phase != "Running" {
            anyhow::bail!("container {container} of pod {ns}/{pod} is not running (pod phase {phase})");
        }
        let c = pod_v["spec"]["containers"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|c| c["name"] == container)
            .cloned()
            .ok_or_else(|| anyhow::anyhow!("pod {ns}/{pod} has no container {container}"))?;
        Ok(super::exec::plan(&cfg, ns, &pod_v, &c, command))
    })();
    match planned {
        Ok(plan) => {
            let cut = take_cut_fault(dir, command);
            super::exec::run_local(plan, cut)
        }
        Err(e) => {
            eprintln!("container-exec: {e:#}");
            1
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(node: &str, phase: &str, deleting: bool) -> Value {
        let mut p = json!({"metadata": {"name": "p", "namespace": "n", "uid": "u"},
            "spec": {"nodeName": node, "volumes": [{"name": "v", "persistentVolumeClaim": {"claimName": "c"}}]},
            "status": {"phase": phase}});
        if deleting {
            p["metadata"]["deletionTimestamp"] = json!("2026-12-02T00:00:00Z");
        }
        p
    }

    #[test]
    fn pods_are_bound_run_and_removed() {
        let nodes = vec!["master-0".to_string(), "master-1".to_string()];
        assert_eq!(
            pod_action(&pod("", "Pending", false), &nodes, true),
            PodAction::Bind("master-0".into())
        );
        assert_eq!(
            pod_action(&pod("master-1", "Pending", false), &nodes, true),
            PodAction::Run
        );
        // Waits for its claims.
        assert_eq!(
            pod_action(&pod("master-1", "Pending", false), &nodes, false),
            PodAction::None
        );
        assert_eq!(
            pod_action(&pod("master-1", "Running", false), &nodes, true),
            PodAction::None
        );
        assert_eq!(
            pod_action(&pod("master-1", "Running", true), &nodes, true),
            PodAction::Remove
        );
        // Another node's pods are its kubelet's.
        assert_eq!(
            pod_action(&pod("worker-0", "Pending", false), &nodes, true),
            PodAction::None
        );
        assert_eq!(
            pod_action(&pod("worker-0", "Running", true), &nodes, true),
            PodAction::None
        );
        assert_eq!(claims_of(&pod("", "Pending", false)), vec!["c".to_string()]);
    }

    #[test]
    fn a_pending_claim_gets_a_host_path_volume() {
        let pvc = json!({"metadata": {"name": "data", "namespace": "ns1", "uid": "1234"},
            "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "300Mi"}}},
            "status": {"phase": "Pending"}});
        let pv = volume_for(&pvc, Path::new("/v")).unwrap();
        assert_eq!(pv["metadata"]["name"], "pvc-1234");
        assert_eq!(pv["spec"]["capacity"]["storage"], "300Mi");
        assert_eq!(pv["spec"]["hostPath"]["path"], "/v/ns1/data");
        assert_eq!(pv["spec"]["claimRef"]["uid"], "1234");
        assert!(pv["spec"].get("storageClassName").is_none());
        let mut bound = pvc.clone();
        bound["spec"]["volumeName"] = json!("pvc-1234");
        assert!(volume_for(&bound, Path::new("/v")).is_none());
        let mut deleting = pvc;
        deleting["metadata"]["deletionTimestamp"] = json!("2026-12-02T00:00:00Z");
        assert!(volume_for(&deleting, Path::new("/v")).is_none());
    }

    #[test]
    fn control_plane_nodes_and_their_kubelet_addresses() {
        let objs = vec![
            json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "master-0", "labels": {"node-role.kubernetes.io/master": ""}},
                "status": {"addresses": [{"type": "InternalIP", "address": "192.168.111.20"}, {"type": "Hostname", "address": "master-0"},
                    {"type": "InternalIP", "address": "fd2e:6f44:5dd8:c956::14"}], "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}}}}),
            json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "worker-0", "labels": {"node-role.kubernetes.io/worker": ""}},
                "status": {"addresses": [{"type": "InternalIP", "address": "192.168.111.30"}]}}),
        ];
        let n = control_plane_nodes(&objs);
        assert_eq!(n.len(), 1);
        assert_eq!(n[0].name, "master-0");
        assert_eq!(
            n[0].kubelet,
            vec![
                "192.168.111.20:10250".parse().unwrap(),
                "[fd2e:6f44:5dd8:c956::14]:10250".parse().unwrap()
            ]
        );
        let a = kubelet_exec_args(
            &n,
            Path::new("c"),
            Path::new("k"),
            Path::new("ca"),
            Path::new("/sim"),
            Path::new("/d"),
        );
        assert_eq!(a[0], "-listen=192.168.111.20:10250");
        assert!(a.ends_with(&[
            "-runtime-arg=container-exec".into(),
            "-runtime-arg=--dir".into(),
            "-runtime-arg=/d".into()
        ]));
    }
}
