//! `migrate export --from-kube KUBECONFIG [--from-context NAME] --storage DIR`: option 1 of the
//! user story (docs/migrate.md "Two options on node 0"). Node 0's assisted-service runs in
//! kube-api mode on node 0's own API server; its controllers made the rows from the CRs there,
//! so the rows carry the CRs' keys and the CRs are copied, not recreated.
//!
//! Reads, on node 0:
//! - from its API server: the one ClusterDeployment whose `clusterInstallRef` is an
//!   AgentClusterInstall, that AgentClusterInstall, its ClusterImageSet, the pull Secrets, the
//!   InfraEnvs of the cluster (bound by `clusterRef`, or holding its Agents), the NMStateConfigs
//!   they select, the Agents of the cluster, each with its status ([`super::copied::build`]);
//! - the database, as option 2 does (`--db-url`, `--db-container`, `--db-dump`); its rows are
//!   matched to the CRs by their kube keys (`clusters.kube_key_namespace/name` the
//!   ClusterDeployment's, `infra_envs.kube_key_namespace/name` the InfraEnvs', hosts named as
//!   the Agents);
//! - the service's storage directory (`--storage`, its `WORK_DIR` with `STORAGE=filesystem`),
//!   read directly: every object of the cluster with a place in a bundle
//!   ([`super::copy::bundle_path`]), the admin kubeconfig and kubeadmin password among them.
//!
//! Not read: the REST API. Local authentication (`AUTH_TYPE=local`, as the operator runs the
//! service) refuses user tokens, and events and logs are in the database and the storage
//! anyway. Everything is written through [`BundleWriter`]: on any failure nothing is left.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use kube::api::{Api, DynamicObject, ListParams};
use serde_json::Value;

use super::bundle::{self, BundleCluster, BundleCounts, BundleManifest, BundleSource, BundleWriter};
use super::copied::{self, Additions, Node0Objects};
use super::dump;
use super::export as rest;
use super::plan::{Export, Node0Kube};
use crate::error::{Error, ResourceRef};
use crate::kube::{classify, KubeTarget};

/// The field messages name for what node 0's API server holds.
const API: &str = "node 0's API server (--from-kube)";

fn invalid(message: String) -> Error {
    Error::InvalidInput {
        field: API.into(),
        message: crate::output::display(&message),
    }
}

/// Every object of `kind` (a kind of [`super::import::KINDS`]) in namespace `ns` (None: all
/// namespaces, or a cluster-scoped kind), as JSON.
async fn list(t: &KubeTarget, kind: &str, ns: Option<&str>) -> Result<Vec<Value>, Error> {
    let info = super::import::KINDS
        .iter()
        .find(|k| k.kind == kind)
        .expect("a kind import knows");
    let ar = info.api_resource();
    let api: Api<DynamicObject> = match ns {
        Some(n) if info.namespaced => Api::namespaced_with(t.client.clone(), n, &ar),
        _ => Api::all_with(t.client.clone(), &ar),
    };
    let what = ResourceRef {
        namespace: ns.map(str::to_string),
        ..ResourceRef::list(&format!("{kind}s"))
    };
    let list = api
        .list(&ListParams::default())
        .await
        .map_err(|e| classify(e, "list", what, t))?;
    list.items
        .into_iter()
        .map(|o| {
            let mut v = serde_json::to_value(o)
                .map_err(|e| Error::Unexpected(format!("cannot read a {kind} of node 0: {e}")))?;
            // The list's items lack apiVersion/kind in some servers' answers: set them.
            v["apiVersion"] = Value::String(if info.group.is_empty() {
                info.version.to_string()
            } else {
                format!("{}/{}", info.group, info.version)
            });
            v["kind"] = Value::String(kind.to_string());
            Ok(v)
        })
        .collect()
}

fn name(o: &Value) -> &str {
    o.pointer("/metadata/name").and_then(Value::as_str).unwrap_or("")
}

fn at<'a>(o: &'a Value, ptr: &str) -> &'a str {
    o.pointer(ptr).and_then(Value::as_str).unwrap_or("")
}

/// Reads the cluster's objects from node 0's API server (see the module doc). Errors:
/// [`Error::InvalidInput`] (exit 3) when there is not exactly one agent ClusterDeployment, or an
/// object it names is missing; access errors as [`classify`] says them (exit 4/5).
async fn read_node0(t: &KubeTarget) -> Result<(Node0Objects, String), Error> {
    let cds: Vec<Value> = list(t, "ClusterDeployment", None)
        .await?
        .into_iter()
        .filter(|o| at(o, "/spec/clusterInstallRef/kind") == "AgentClusterInstall")
        .collect();
    let cd = match cds.as_slice() {
        [cd] => cd.clone(),
        [] => {
            return Err(invalid(
                "it holds no ClusterDeployment installed by an AgentClusterInstall: is this node 0's \
                 API server of an agent-based install?"
                    .into(),
            ))
        }
        more => {
            return Err(invalid(format!(
                "it holds {} agent ClusterDeployments ({}); an agent-based install has one",
                more.len(),
                more.iter()
                    .map(|o| format!("{}/{}", at(o, "/metadata/namespace"), name(o)))
                    .collect::<Vec<_>>()
                    .join(", ")
            )))
        }
    };
    let ns = at(&cd, "/metadata/namespace").to_string();
    let cd_name = name(&cd).to_string();
    let one = |items: Vec<Value>, kind: &str, want: &str, by: &str| -> Result<Value, Error> {
        items
            .into_iter()
            .find(|o| name(o) == want)
            .ok_or_else(|| invalid(format!("{kind} {ns}/{want}, which {by} names, is not there")))
    };
    let aci_name = at(&cd, "/spec/clusterInstallRef/name").to_string();
    let aci = one(
        list(t, "AgentClusterInstall", Some(&ns)).await?,
        "AgentClusterInstall",
        &aci_name,
        &format!("ClusterDeployment {cd_name}"),
    )?;
    let cis_name = at(&aci, "/spec/imageSetRef/name").to_string();
    let cis = list(t, "ClusterImageSet", None)
        .await?
        .into_iter()
        .find(|o| name(o) == cis_name)
        .ok_or_else(|| {
            invalid(format!(
                "ClusterImageSet {cis_name:?}, which AgentClusterInstall {ns}/{aci_name} names, is not there"
            ))
        })?;
    let agents: Vec<Value> = list(t, "Agent", Some(&ns))
        .await?
        .into_iter()
        .filter(|a| {
            at(a, "/spec/clusterDeploymentName/name") == cd_name
                && [ns.as_str(), ""].contains(&at(a, "/spec/clusterDeploymentName/namespace"))
        })
        .collect();
    let agent_ies: BTreeSet<String> = agents
        .iter()
        .map(|a| {
            at(
                a,
                &format!(
                    "/metadata/labels/{}",
                    super::crs::INFRAENV_LABEL.replace('/', "~1")
                ),
            )
            .to_string()
        })
        .collect();
    let infra_envs: Vec<Value> = list(t, "InfraEnv", Some(&ns))
        .await?
        .into_iter()
        .filter(|ie| at(ie, "/spec/clusterRef/name") == cd_name || agent_ies.contains(name(ie)))
        .collect();
    let selectors: Vec<serde_json::Map<String, Value>> = infra_envs
        .iter()
        .filter_map(|ie| {
            ie.pointer("/spec/nmStateConfigLabelSelector/matchLabels")
                .and_then(Value::as_object)
                .filter(|m| !m.is_empty())
                .cloned()
        })
        .collect();
    let nmstate_configs: Vec<Value> = list(t, "NMStateConfig", Some(&ns))
        .await?
        .into_iter()
        .filter(|n| {
            let labels = n.pointer("/metadata/labels").and_then(Value::as_object);
            selectors
                .iter()
                .any(|sel| sel.iter().all(|(k, v)| labels.and_then(|l| l.get(k)) == Some(v)))
        })
        .collect();
    let mut secret_names: BTreeSet<String> = BTreeSet::new();
    secret_names.insert(at(&cd, "/spec/pullSecretRef/name").to_string());
    for ie in &infra_envs {
        secret_names.insert(at(ie, "/spec/pullSecretRef/name").to_string());
    }
    secret_names.remove("");
    let all_secrets = list(t, "Secret", Some(&ns)).await?;
    let mut secrets = Vec::new();
    for s in &secret_names {
        secrets.push(one(
            all_secrets.clone(),
            "Secret",
            s,
            "the ClusterDeployment or an InfraEnv",
        )?);
    }
    Ok((
        Node0Objects {
            cluster_deployment: cd,
            agent_cluster_install: aci,
            cluster_image_set: cis,
            secrets,
            infra_envs,
            nmstate_configs,
            agents,
        },
        ns,
    ))
}

/// Node 0's storage objects of cluster `cid` under `storage/<cid>/` (regular files; symlinks
/// and other kinds are skipped), as (object name under `<cid>/`, path), sorted. Errors:
/// [`Error::Io`] naming what cannot be read.
fn storage_files(storage: &Path, cid: &str) -> Result<Vec<(String, std::path::PathBuf)>, Error> {
    let root = storage.join(cid);
    let mut out = Vec::new();
    let mut todo = vec![root.clone()];
    while let Some(dir) = todo.pop() {
        let rd = match std::fs::read_dir(&dir) {
            Ok(rd) => rd,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound && dir == root => return Ok(out),
            Err(e) => {
                return Err(Error::Io {
                    path: dir.display().to_string(),
                    source: e,
                })
            }
        };
        for e in rd {
            let e = e.map_err(|e| Error::Io {
                path: dir.display().to_string(),
                source: e,
            })?;
            let ty = e.file_type().map_err(|err| Error::Io {
                path: e.path().display().to_string(),
                source: err,
            })?;
            if ty.is_dir() {
                todo.push(e.path());
            } else if ty.is_file() {
                let rel = e
                    .path()
                    .strip_prefix(&root)
                    .expect("under root")
                    .to_string_lossy()
                    .replace(std::path::MAIN_SEPARATOR, "/");
                out.push((rel, e.path()));
            }
        }
    }
    out.sort();
    Ok(out)
}

/// A kubeconfig error of `--from-kube`/`--from-context` said with those flags: the resolver is
/// kubectl's (`cli::kube_flags`), whose messages name `--kubeconfig` and `--context`.
fn node0_flags(e: Error) -> Error {
    let fix = |s: String| {
        s.replace("(from --kubeconfig)", "(from --from-kube)")
            .replace("give --kubeconfig another", "give --from-kube another")
            .replace("with --context", "with --from-context")
            .replace("check --server/--context", "check --from-kube/--from-context")
            .replace(
                "check the path, or log in with `oc login` to create ~/.kube/config",
                "check the path given to --from-kube (node 0's API server's kubeconfig)",
            )
    };
    match e {
        Error::Kubeconfig { message } => Error::Kubeconfig {
            message: fix(message),
        },
        Error::KubeconfigEntry { message, hint } => Error::KubeconfigEntry {
            message: fix(message),
            hint: fix(hint),
        },
        other => other,
    }
}

/// The origin (`scheme://host[:port]`) of a URL; None when it has none.
fn origin(url: &str) -> Option<String> {
    let (scheme, rest) = url.split_once("://")?;
    let host = rest.split(['/', '?', '#']).next().filter(|h| !h.is_empty())?;
    Some(format!("{scheme}://{host}"))
}

/// `migrate export --from-kube` (see the module doc). Returns exit code 0.
pub async fn run(a: &Export, k: &Node0Kube) -> Result<u8, Error> {
    let db = &a.db;
    rest::check_out(&a.out)?;
    rest::check_program(db)?;
    if !k.storage.is_dir() {
        return Err(Error::Usage(format!(
            "--storage {}: not a directory; give the storage directory of node 0's assisted-service \
             (its WORK_DIR)",
            k.storage.display()
        )));
    }
    rest::remove_stale_bundles(&a.out);
    // Before any read: an existing --out is refused first (exit 3); dropped on failure.
    let mut w = BundleWriter::create(&a.out)?;
    let target = (k.resolve)().await.map_err(node0_flags)?;
    let (n0, ns) = read_node0(&target).await?;
    let cd_name = name(&n0.cluster_deployment).to_string();

    // The database, matched to the CRs by the rows' kube keys.
    let d = rest::dump_and_summarize(db, &mut w)?;
    let what = "db/dump.sql";
    let live = |r: &BTreeMap<String, Option<String>>| r.get("deleted_at").is_none_or(Option::is_none);
    let col = |r: &BTreeMap<String, Option<String>>, c: &str| r.get(c).cloned().flatten().unwrap_or_default();
    let crows = dump::table_rows(what, &mut d.open()?, "clusters")?;
    let keyed: Vec<&BTreeMap<String, Option<String>>> = crows
        .iter()
        .filter(|r| live(r) && col(r, "kube_key_namespace") == ns && col(r, "kube_key_name") == cd_name)
        .collect();
    let crow = match keyed.as_slice() {
        [r] => *r,
        _ => {
            return Err(Error::InvalidInput {
                field: d.what_src.clone(),
                message: format!(
                    "it has {} clusters rows keyed {ns}/{cd_name} (ClusterDeployment {ns}/{cd_name} on \
                     node 0's API server); dump the database of this node 0",
                    keyed.len()
                ),
            })
        }
    };
    let cid = rest::path_id(&col(crow, "id"), "cluster id")?;
    let ierows = dump::table_rows(what, &mut d.open()?, "infra_envs")?;
    let mut ie_ids: BTreeMap<String, String> = BTreeMap::new();
    for ie in &n0.infra_envs {
        let row = ierows
            .iter()
            // As assisted-service finds an InfraEnv's row (GetInfraEnvByKubeKey: `name` and
            // `kube_key_namespace`; infra_envs has no kube_key_name).
            .find(|r| live(r) && col(r, "kube_key_namespace") == ns && col(r, "name") == name(ie))
            .ok_or_else(|| Error::InvalidInput {
                field: d.what_src.clone(),
                message: format!(
                    "it has no infra_envs row named {} in kube_key_namespace {ns} (InfraEnv on node \
                     0's API server); dump the database again",
                    name(ie)
                ),
            })?;
        ie_ids.insert(
            name(ie).to_string(),
            rest::path_id(&col(row, "id"), "infra-env id")?,
        );
    }
    // Every infra-env row of the cluster has its InfraEnv among those read (else the restore
    // scope would call its hosts another cluster's).
    if let Some(r) = ierows
        .iter()
        .find(|r| live(r) && col(r, "cluster_id") == cid && !ie_ids.values().any(|id| *id == col(r, "id")))
    {
        return Err(invalid(format!(
            "the dump's infra-env {} (name {:?}, kube_key_namespace {:?}) is of cluster {cid}, but \
             no InfraEnv of ClusterDeployment {ns}/{cd_name} with that name was found there (an \
             InfraEnv binds by spec.clusterRef or by holding the cluster's Agents)",
            col(r, "id"),
            col(r, "name"),
            col(r, "kube_key_namespace")
        )));
    }
    let ie_list: Vec<String> = ie_ids.values().cloned().collect();
    let checked = super::restore::check_dump(
        &d.what_src,
        &mut d.open()?,
        &super::restore::Scope::new(&cid, &ie_list),
        &super::restore::Expect {
            sha256: None,
            schema_version: Some(&d.schema_version),
            migration_ids: None,
        },
    )?;
    // The hosts the rows hold are the Agents (named by host id, in their InfraEnv).
    let label = format!(
        "/metadata/labels/{}",
        super::crs::INFRAENV_LABEL.replace('/', "~1")
    );
    let agent_keys: BTreeSet<(String, String)> = n0
        .agents
        .iter()
        .map(|a| {
            (
                name(a).to_string(),
                ie_ids.get(at(a, &label)).cloned().unwrap_or_default(),
            )
        })
        .collect();
    if agent_keys != checked.live_host_keys {
        let show = |a: &BTreeSet<(String, String)>, b: &BTreeSet<(String, String)>| {
            a.difference(b)
                .map(|(h, ie)| format!("{h} (infra-env {})", if ie.is_empty() { "?" } else { ie }))
                .collect::<Vec<_>>()
                .join(", ")
        };
        return Err(Error::InvalidInput {
            field: d.what_src.clone(),
            message: format!(
                "node 0's Agents and its database disagree: Agents without a hosts row: [{}]; hosts \
                 rows without an Agent: [{}]; dump the database again",
                crate::output::display(&show(&agent_keys, &checked.live_host_keys)),
                crate::output::display(&show(&checked.live_host_keys, &agent_keys))
            ),
        });
    }

    // Node 0's storage objects of the cluster.
    let mut carried = 0usize;
    let mut left: Vec<String> = Vec::new();
    let mut creds: BTreeMap<String, Vec<u8>> = BTreeMap::new();
    for (object, path) in storage_files(&k.storage, &cid)? {
        let Some(rel) = super::copy::bundle_path(&object, &cid) else {
            left.push(object);
            continue;
        };
        let mut f = std::fs::File::open(&path).map_err(|e| Error::Io {
            path: path.display().to_string(),
            source: e,
        })?;
        w.copy_file(&rel, &mut f)?;
        if ["kubeconfig-noingress", "kubeadmin-password"].contains(&object.as_str()) {
            let b = std::fs::read(w.written_path(&rel).expect("written")).map_err(|e| Error::Io {
                path: rel.clone(),
                source: e,
            })?;
            creds.insert(object.clone(), b);
        }
        carried += 1;
    }
    if !left.is_empty() {
        crate::say!(
            "note: {} of node 0's storage objects of cluster {cid} have no place on cluster 0 and are not carried: {}",
            left.len(),
            left.join(", ")
        );
    }
    let cred = |n: &str| -> Result<Vec<u8>, Error> {
        creds.get(n).cloned().ok_or_else(|| Error::InvalidInput {
            field: "--storage".into(),
            message: format!(
                "{} has no {cid}/{n}: node 0's service writes it when the install starts; is this its \
                 storage directory, and has the install started?",
                k.storage.display()
            ),
        })
    };
    let set = copied::build(
        &n0,
        &Additions {
            cluster_id: &cid,
            openshift_cluster_id: &col(crow, "openshift_cluster_id"),
            kubeconfig: &cred("kubeconfig-noingress")?,
            password: &cred("kubeadmin-password")?,
        },
    )?;
    // What import accepts, checked now: a name cluster 0 cannot take (a ClusterDeployment
    // `os.test`) is refused here rather than after node 0 is gone.
    let host_ids: Vec<String> = agent_keys.iter().map(|(h, _)| h.clone()).collect();
    copied::check(
        &set,
        &super::crs::ExpectedSet {
            cluster_id: &cid,
            cluster_name: &col(crow, "name"),
            openshift_version: &col(crow, "openshift_version"),
            release_image: &col(crow, "ocp_release_image"),
            infra_env_ids: &ie_list,
            host_ids: &host_ids,
        },
        &col(crow, "openshift_cluster_id"),
    )
    .map_err(|e| match e {
        Error::InvalidInput { message, .. } => {
            invalid(format!("what it holds cannot be imported as it is: {message}"))
        }
        other => other,
    })?;
    let crs_json = serde_json::to_vec_pretty(&Value::Array(set))
        .map_err(|e| Error::Unexpected(format!("cannot serialize the CRs: {e}")))?;
    w.write_file("crs/crs.json", &crs_json)?;

    // Events are rows: the cluster's and its infra-envs'.
    let events = dump::table_rows(what, &mut d.open()?, "events")?
        .iter()
        .filter(|r| col(r, "cluster_id") == cid || ie_ids.values().any(|ie| col(r, "infra_env_id") == *ie))
        .count() as u64;
    let url = origin(at(&n0.agent_cluster_install, "/status/debugInfo/eventsURL"))
        .unwrap_or_else(|| target.server.trim_end_matches('/').to_string());
    let manifest = BundleManifest {
        format: bundle::FORMAT.into(),
        created: rest::rfc3339_now(),
        tool_version: env!("CARGO_PKG_VERSION").into(),
        source: BundleSource {
            url: url.clone(),
            db_source: db.name().into(),
            schema_version: d.schema_version.clone(),
            migration_ids: d.summary.migration_ids.iter().cloned().collect(),
            crs: copied::COPIED.into(),
        },
        cluster: BundleCluster {
            id: cid.clone(),
            name: col(crow, "name"),
            base_domain: col(crow, "base_dns_domain"),
            openshift_cluster_id: col(crow, "openshift_cluster_id"),
            openshift_version: col(crow, "openshift_version"),
            release_image: col(crow, "ocp_release_image"),
            infra_env_ids: ie_list.clone(),
            host_ids: host_ids.clone(),
        },
        counts: BundleCounts {
            hosts: host_ids.len() as u64,
            infra_envs: ie_list.len() as u64,
            events,
            nmstate_configs: n0.nmstate_configs.len() as u64,
            rows: d.summary.rows.clone(),
        },
        files: vec![],
    };
    let files = w.files().len() + 2;
    let size: u64 = w.files().values().map(|e| e.size).sum();
    let checksum = w.commit(manifest)?;
    let rows: u64 = d.summary.rows.values().sum();
    let out = a.out.display();
    let mut text = format!(
        "Exported cluster {} ({cid}) from {} (ClusterDeployment {ns}/{cd_name}, CRs copied) to {out}\n",
        crate::output::display(&col(crow, "name")),
        target.server.trim_end_matches('/')
    );
    text.push_str(&format!(
        "  Agents {}, InfraEnvs {}, NMStateConfigs {}, events {events}, storage objects {carried}, database rows {rows} in {} tables\n",
        host_ids.len(),
        ie_list.len(),
        n0.nmstate_configs.len(),
        d.summary.rows.len(),
    ));
    text.push_str(&format!(
        "  {files} files, {}; checksum sha256:{checksum}\n",
        rest::human_size(size)
    ));
    text.push_str(
        "  the bundle holds credentials (kubeconfig, kubeadmin password, pull secret): keep it private\n",
    );
    text.push_str(&format!(
        "  next: oc agent-day2 migrate import {out}   (on cluster 0's context)\n"
    ));
    crate::output::emit(&text);
    Ok(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn origins() {
        assert_eq!(
            origin("http://192.168.111.80:8090/api/assisted-install/v2/events?api_key=x").as_deref(),
            Some("http://192.168.111.80:8090")
        );
        assert_eq!(origin(""), None);
        assert_eq!(origin("http://"), None);
    }

    #[test]
    fn storage_files_are_listed_relative_and_sorted() {
        let d = tempfile::tempdir().unwrap();
        let c = d.path().join("c1");
        std::fs::create_dir_all(c.join("logs/h1")).unwrap();
        std::fs::write(c.join("logs/h1/logs.tar.gz"), b"x").unwrap();
        std::fs::write(c.join("kubeadmin-password"), b"p").unwrap();
        std::os::unix::fs::symlink("/etc/passwd", c.join("link")).unwrap();
        let names: Vec<String> = storage_files(d.path(), "c1")
            .unwrap()
            .into_iter()
            .map(|(n, _)| n)
            .collect();
        assert_eq!(names, ["kubeadmin-password", "logs/h1/logs.tar.gz"]);
        assert!(storage_files(d.path(), "none").unwrap().is_empty());
    }
}
