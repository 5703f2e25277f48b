//! `agent-day2-sim node0 --real --kube-api KUBECONFIG`: node 0 as the user story's option 1
//! (issue 21 item 3): the REAL assisted-service in kube-api mode on node 0's own API server (a
//! second real kube-apiserver with assisted-service's CRDs, `agent-day2-sim up --crds …`), driven
//! to the state node 0 holds just before it reboots.
//!
//! - The agent-based installer's manifests (the same ones `node0 --real` gives the
//!   agent-installer client: ClusterDeployment, AgentClusterInstall, InfraEnv, NMStateConfigs,
//!   ClusterImageSet, pull secret) are applied to that API server with `kubectl`, with the
//!   service's ServiceAccount (bound to cluster-admin, as the operator's ClusterRole binds it).
//! - The service runs as the infrastructure operator runs it ([`crate::cluster0svc`]: kube-api
//!   mode, `AUTH_TYPE=local` with its own key, node 0's database and storage): its controllers
//!   create the cluster and InfraEnv rows from the CRs.
//! - The hosts ([`crate::node0::agents`]) register with an InfraEnv token signed by the service's
//!   key (what the discovery ISO carries); the controllers create their Agents, approved here as
//!   an administrator approves them (`spec.approved: true`); once the cluster is ready the
//!   ClusterDeployments controller starts the install (local authentication refuses REST user
//!   calls, so nothing else could); the hosts report the stages and upload their logs up to the
//!   held state: cluster `installing`, the bootstrap host `Rebooting`, the others `Joined`.
//!
//! Writes `DIR/ready` (the REST base URL) and `DIR/cluster-token` (an agent token of the cluster,
//! `{"cluster_id": …}` signed by the service's key: what its signed URLs carry), then holds
//! until killed. Stand-ins, as in `node0 --real`: the hosts, `oc`, `DUMMY_IGNITION`.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use serde_json::Value;

use crate::cluster0svc::{self, Cluster0Service};
use crate::node0::agents::{self, Api, Host, Tokens};
use crate::node0::real::{manifests, RealOpts};

/// The namespace of the service's ServiceAccount on node 0's API server.
pub const SERVICE_NAMESPACE: &str = "multicluster-engine";

/// `kubectl ARGS` against `kubeconfig` (stdin fed when given): stdout, or an error with stderr.
fn kubectl(kubeconfig: &Path, cache: &Path, args: &[&str], stdin: Option<&str>) -> anyhow::Result<String> {
    use std::io::Write;
    let mut child = Command::new("kubectl")
        .args(args)
        .env("KUBECONFIG", kubeconfig)
        .env("KUBECACHEDIR", cache)
        .stdin(if stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .context("cannot run kubectl (is it on PATH?)")?;
    if let Some(s) = stdin {
        child.stdin.take().expect("piped").write_all(s.as_bytes())?;
    }
    let o = child.wait_with_output()?;
    if !o.status.success() {
        bail!(
            "kubectl {} failed: {}",
            args.join(" "),
            String::from_utf8_lossy(&o.stderr).trim()
        );
    }
    Ok(String::from_utf8_lossy(&o.stdout).trim().to_string())
}

/// `node0 --real --kube-api KUBECONFIG` (blocking): the exit status.
pub fn run_sync(args: crate::node0::Node0Args) -> i32 {
    let go = || -> anyhow::Result<()> {
        std::fs::create_dir_all(&args.dir).with_context(|| format!("creating {}", args.dir.display()))?;
        let _ = std::fs::remove_file(args.dir.join("ready"));
        let kubeconfig = std::path::absolute(args.kube_api.clone().expect("--kube-api"))?;
        run(&crate::node0::real_opts(&args), &kubeconfig)
    };
    match go() {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("error: {e:#}");
            1
        }
    }
}

/// Runs node 0 of option 1 (the module docs) and holds it until killed. Errors: kubectl or the
/// API server refusing, the service not starting, a request it refused, the timeout (the state
/// reached named).
pub fn run(o: &RealOpts, kubeconfig: &Path) -> anyhow::Result<()> {
    if o.hosts < 3 {
        bail!("--kube-api: node 0's install needs at least 3 hosts (three control-plane agents)");
    }
    let real = std::path::absolute(o.dir.join("real"))?;
    let _ = std::fs::remove_dir_all(&real);
    std::fs::create_dir_all(real.join("manifests"))?;
    let cache = real.join("kubecache");
    let kc = |args: &[&str], stdin: Option<&str>| kubectl(kubeconfig, &cache, args, stdin);

    // The agent-based installer's manifests and the service's account.
    kc(
        &["apply", "-f", "-"],
        Some(&format!(
            "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: agent-cluster\n---\n\
             apiVersion: v1\nkind: Namespace\nmetadata:\n  name: {SERVICE_NAMESPACE}\n---\n\
             apiVersion: v1\nkind: ServiceAccount\nmetadata:\n  name: assisted-service\n  namespace: {SERVICE_NAMESPACE}\n---\n\
             apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRoleBinding\nmetadata:\n  name: agent-day2-sim:node0-assisted-service\n\
             roleRef:\n  apiGroup: rbac.authorization.k8s.io\n  kind: ClusterRole\n  name: cluster-admin\n\
             subjects:\n- kind: ServiceAccount\n  name: assisted-service\n  namespace: {SERVICE_NAMESPACE}\n"
        )),
    )?;
    for (name, text) in manifests(o.hosts) {
        std::fs::write(real.join("manifests").join(name), text)?;
    }
    kc(
        &["apply", "-f", &real.join("manifests").display().to_string()],
        None,
    )?;
    let token = kc(
        &[
            "create",
            "token",
            "assisted-service",
            "-n",
            SERVICE_NAMESPACE,
            "--duration",
            "24h",
        ],
        None,
    )?;
    let server = kc(
        &[
            "config",
            "view",
            "--raw",
            "--minify",
            "-o",
            "jsonpath={.clusters[0].cluster.server}",
        ],
        None,
    )?;
    let ca_b64 = kc(
        &[
            "config",
            "view",
            "--raw",
            "--minify",
            "-o",
            "jsonpath={.clusters[0].cluster.certificate-authority-data}",
        ],
        None,
    )?;
    use base64::Engine;
    let ca = base64::engine::general_purpose::STANDARD
        .decode(ca_b64.trim())
        .context("the kubeconfig's certificate-authority-data")?;
    let ca_file = real.join("ca.crt");
    std::fs::write(&ca_file, ca)?;

    let mut svc = Cluster0Service::start(&cluster0svc::Opts {
        bin_dir: o.bin_dir.clone(),
        dir: real.join("svc"),
        api_url: server.clone(),
        ca_file,
        token,
        namespace: SERVICE_NAMESPACE.into(),
        db_url: o.db_url.clone(),
        storage: real.join("data"),
        listen: o.listen,
    })?;
    eprintln!(
        "node0: real assisted-service in kube-api mode on {} against {server} (log {})",
        svc.base,
        svc.log.display()
    );
    let deadline = Instant::now() + o.timeout;
    let check = |what: &str, svc: &mut Cluster0Service| -> anyhow::Result<()> {
        if !svc.running() {
            bail!(
                "node 0's assisted-service exited; its log ends:\n{}",
                svc.tail(40)
            );
        }
        if Instant::now() > deadline {
            bail!(
                "node 0's install did not reach {what} within --timeout {}s; its log ends:\n{}",
                o.timeout.as_secs(),
                svc.tail(20)
            );
        }
        Ok(())
    };

    // The controllers make the rows from the CRs.
    let one = |sql: &str| -> String {
        crate::postgres::psql(&o.db_url, sql)
            .map(|s| s.trim().to_string())
            .unwrap_or_default()
    };
    let (cid, ie) = loop {
        check("a cluster and an InfraEnv row", &mut svc)?;
        let (c, i) = (one("SELECT id FROM clusters"), one("SELECT id FROM infra_envs"));
        if !c.is_empty() && !i.is_empty() && !c.contains('\n') && !i.contains('\n') {
            break (c, i);
        }
        std::thread::sleep(Duration::from_millis(500));
    };
    eprintln!("node0: cluster {cid}, infra-env {ie} made by the controllers from the CRs");
    let tokens = Tokens {
        user: String::new(),
        agent: svc.infra_env_token(&ie)?,
        watcher: String::new(),
    };
    let cluster_token = svc.cluster_token(&cid)?;
    let api = Api::new(&svc.base, &tokens);
    let hosts: Vec<Host> = (0..o.hosts).map(Host::new).collect();
    for h in &hosts {
        api.register(&ie, h)?;
    }
    let get_cluster = |svc: &Cluster0Service| -> anyhow::Result<Value> {
        let (code, b) = svc.get(
            &format!("{}/clusters/{cid}", agents::API_BASE),
            Some(&cluster_token),
        )?;
        if code != 200 {
            bail!("GET cluster {cid}: HTTP {code} {}", String::from_utf8_lossy(&b));
        }
        Ok(serde_json::from_slice(&b)?)
    };
    // Discovery; each Agent approved as the controllers make it; the install starts by itself.
    let mut last = String::new();
    loop {
        check("installing", &mut svc)?;
        api.answer_steps(&ie, &hosts)?;
        let names = kc(
            &[
                "get",
                "agents",
                "-n",
                "agent-cluster",
                "-o",
                "jsonpath={range .items[?(@.spec.approved!=true)]}{.metadata.name}{\"\\n\"}{end}",
            ],
            None,
        )?;
        for n in names.lines().filter(|l| !l.is_empty()) {
            kc(
                &[
                    "patch",
                    "agent",
                    n,
                    "-n",
                    "agent-cluster",
                    "--type",
                    "merge",
                    "-p",
                    "{\"spec\":{\"approved\":true}}",
                ],
                None,
            )?;
            eprintln!("node0: Agent {n} approved");
        }
        let c = get_cluster(&svc)?;
        let now = format!(
            "cluster {}: {}",
            c["status"].as_str().unwrap_or("?"),
            c["status_info"].as_str().unwrap_or("")
        );
        if now != last {
            eprintln!("node0: {now}");
            last = now;
        }
        let installing = c["status"] == "installing"
            && c["hosts"]
                .as_array()
                .is_some_and(|hs| hs.len() == hosts.len() && hs.iter().all(|h| h["status"] == "installing"));
        if installing {
            break;
        }
        std::thread::sleep(Duration::from_secs(1));
    }
    let c = get_cluster(&svc)?;
    agents::install(&api, &ie, &cid, &hosts, &agents::bootstrap_host(&c)?)?;
    std::thread::sleep(Duration::from_secs(3));
    check("the held state", &mut svc)?;
    let c = get_cluster(&svc)?;
    let states: Vec<String> = c["hosts"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|h| {
            format!(
                "{}={}/{}",
                h["requested_hostname"].as_str().unwrap_or("?"),
                h["status"].as_str().unwrap_or("?"),
                h["progress"]["current_stage"].as_str().unwrap_or("")
            )
        })
        .collect();
    eprintln!(
        "node0: held before node 0's reboot: cluster {}; {}",
        c["status"].as_str().unwrap_or("?"),
        states.join(", ")
    );
    crate::node0::keys::write_private(&o.dir.join("cluster-token"), cluster_token.as_bytes())?;
    let tmp = o.dir.join(".ready.tmp");
    std::fs::write(&tmp, format!("{}\n", svc.base))?;
    std::fs::rename(&tmp, o.dir.join("ready"))?;
    eprintln!("node0: serving {}{}", svc.base, agents::API_BASE);
    while svc.running() {
        std::thread::sleep(Duration::from_millis(500));
    }
    bail!(
        "node 0's assisted-service exited; its log ends:\n{}",
        svc.tail(40)
    )
}
