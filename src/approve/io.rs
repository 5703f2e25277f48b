//! The cluster side of the approval engine: the reads that build an [`Approver`] (cluster
//! facts, batch records, Nodes, CSRs), the reads just before a decision is acted on, and the
//! writes (approval records, `/approval`, `/approval` with `Denied`). The decisions themselves
//! (what a CSR's verdict is, what to do with it) are the parent module's, on plain values.

use kube::api::{Api, DynamicObject, ListParams};
use kube::core::{ApiResource, GroupVersionKind};

use super::*;
use crate::kube::classify;
use crate::kube::write::post_params;

/// The writes of `p`: the Node read again (client CSRs), the approval record created, the
/// `Approved` condition appended through `/approval`. Returns the record made (if any) with
/// what happened. Errors: the API's (a 403 names the permission), as [`Approver::approve`].
pub async fn execute(p: &Planned) -> Result<(Option<ConfigMap>, Executed)> {
    let name = p.csr_name().to_string();
    if p.verdict.kind == Kind::Client {
        let napi: Api<Node> = Api::all(p.target.client.clone());
        match napi.get_opt(&p.node).await {
            Ok(Some(n)) => return Ok((None, Executed::NodeExists(Box::new(n)))),
            Ok(None) => {}
            Err(e) => {
                return Err(classify(
                    e,
                    "read",
                    ResourceRef::cluster("Node", &p.node),
                    &p.target,
                ))
            }
        }
    }
    if !batch::exists(&p.target, &p.batch).await? {
        return Ok((None, Executed::BatchGone));
    }
    let mut made = None;
    if let Some(cm) = &p.record {
        match records::create(&p.target, cm).await? {
            Created::Made(cm) => made = Some(cm),
            Created::Existed(other) => return Ok((None, Executed::Taken(Box::new(other)))),
        }
    }
    // Read once more just before the approval itself: a delete that landed while the record
    // was written stops it (the record is left on a batch that no longer exists).
    if !batch::exists(&p.target, &p.batch).await? {
        return Ok((made, Executed::BatchGone));
    }
    let capi: Api<CertificateSigningRequest> = Api::all(p.target.client.clone());
    let obj = with_approved_condition(&p.csr, p.verdict.kind, &p.node, &p.batch);
    match capi
        .replace_subresource("approval", &name, &post_params(), &obj)
        .await
    {
        Ok(done) => Ok((made, Executed::Approved(Box::new(done)))),
        Err(e) if kube_409(&e) => Ok((made, Executed::Conflict)),
        Err(e) => Err(classify(
            e,
            "approve",
            ResourceRef::cluster("CertificateSigningRequest", &name),
            &p.target,
        )),
    }
}

/// The cluster facts the checks need: API names from `Infrastructure/cluster`
/// `status.apiServerURL`, networks from `Network.config.openshift.io/cluster` (status, else spec).
/// Errors (exit 4) name the object.
pub async fn read_policy(target: &KubeTarget) -> Result<Policy> {
    let get = |kind: &str, plural: &str| {
        let ar = ApiResource::from_gvk_with_plural(
            &GroupVersionKind::gvk("config.openshift.io", "v1", kind),
            plural,
        );
        Api::<DynamicObject>::all_with(target.client.clone(), &ar)
    };
    let r_infra = ResourceRef::cluster("Infrastructure", "cluster");
    let infra = get("Infrastructure", "infrastructures")
        .get("cluster")
        .await
        .map_err(|e| classify(e, "read", r_infra.clone(), target))?;
    let url = infra
        .data
        .pointer("/status/apiServerURL")
        .and_then(|v| v.as_str())
        .unwrap_or("");
    let host = url
        .parse::<http::Uri>()
        .ok()
        .and_then(|u| u.host().map(str::to_string))
        .unwrap_or_default();
    let (name, domain) = host
        .strip_prefix("api.")
        .and_then(|r| r.split_once('.'))
        .map(|(n, d)| (n.to_string(), d.to_string()))
        .ok_or_else(|| Error::BadObject {
            resource: r_infra.clone(),
            message: format!(
                "status.apiServerURL {:?} is not https://api.<cluster name>.<base domain>:PORT; cannot tell the API names a node must not claim",
                escape_for_display(url, 200)
            ),
        })?;
    let r_net = ResourceRef::cluster("Network.config.openshift.io", "cluster");
    let net = get("Network", "networks")
        .get("cluster")
        .await
        .map_err(|e| classify(e, "read", r_net.clone(), target))?;
    let nets = |ptrs: &[&str], cidr_field: bool| -> Result<Vec<IpNet>> {
        for p in ptrs {
            let Some(a) = net
                .data
                .pointer(p)
                .and_then(|v| v.as_array())
                .filter(|a| !a.is_empty())
            else {
                continue;
            };
            return a
                .iter()
                .map(|v| if cidr_field { v.get("cidr") } else { Some(v) })
                .map(|v| {
                    let s = v.and_then(|v| v.as_str()).unwrap_or("");
                    s.parse::<IpNet>().map_err(|_| Error::BadObject {
                        resource: r_net.clone(),
                        message: format!("{p}: {:?} is not a CIDR", escape_for_display(s, 80)),
                    })
                })
                .collect();
        }
        Ok(vec![])
    };
    let cluster_networks = nets(&["/status/clusterNetwork", "/spec/clusterNetwork"], true)?;
    let service_networks = nets(&["/status/serviceNetwork", "/spec/serviceNetwork"], false)?;
    if service_networks.is_empty() {
        return Err(Error::BadObject {
            resource: r_net,
            message: "has no serviceNetwork (status or spec): cannot check serving certificates against it"
                .into(),
        });
    }
    Ok(Policy::for_cluster(
        &name,
        &domain,
        cluster_networks,
        service_networks,
    ))
}

pub(super) async fn read_batches(
    target: &KubeTarget,
    only: Option<&str>,
) -> Result<(ReadBatches, OtherHosts)> {
    let api: Api<ConfigMap> = Api::namespaced(target.client.clone(), batch::NAMESPACE);
    let listed = || async {
        match api.list(&ListParams::default().labels(batch::LABEL)).await {
            Ok(l) => Ok(l.items),
            Err(kube::Error::Api(s)) if s.code == 404 => Ok(vec![]),
            Err(e) => Err(classify(
                e,
                "list",
                ResourceRef {
                    kind: "ConfigMaps".into(),
                    namespace: Some(batch::NAMESPACE.into()),
                    name: None,
                },
                target,
            )),
        }
    };
    let mut others = OtherHosts::new();
    let mut bad = Vec::new();
    // Checked first: a clear 404 for a batch that does not exist, and the label.
    let this = match only {
        Some(name) => Some(batch::get_labelled(target, name).await?),
        None => None,
    };
    let all = listed().await?;
    let cms: Vec<ConfigMap> = match this {
        Some(this) => {
            others = other_batches_hosts(&this, &all);
            vec![this]
        }
        None => all.clone(),
    };
    let all: BTreeMap<String, ConfigMap> = all
        .into_iter()
        .map(|c| (c.metadata.name.clone().unwrap_or_default(), c))
        .collect();
    let mut out = Vec::new();
    for cm in &cms {
        match batch_state(cm) {
            Ok(b) => out.push(b),
            // One hand-edited record must not stop approve for every batch: skipped, its
            // hosts' CSRs held naming the field ([`Approver::amend`]), exit 3 at the end.
            Err(Error::BadObject { message, .. }) => {
                let name = cm.metadata.name.clone().unwrap_or_default();
                let hosts = cm_hostnames(cm);
                bad.push((name, message, hosts));
            }
            Err(e) => return Err(e),
        }
    }
    out.sort_by(|a, b| (b.created, &b.rec.name).cmp(&(a.created, &a.rec.name)));
    let (stored, bad_records) = records::list(target, only).await?;
    let mut by_batch: BTreeMap<String, Vec<Record>> = BTreeMap::new();
    let mut seen = BTreeSet::new();
    for s in stored {
        seen.insert(s.name);
        by_batch.entry(s.batch).or_default().push(s.record);
    }
    for b in &mut out {
        for r in by_batch.get(&b.rec.name).into_iter().flatten() {
            records::add(&mut b.rec, r);
        }
    }
    // A record that does not parse may be an approval: its batch is not judged without it.
    for (b, name, message) in bad_records {
        if let Some(i) = out.iter().position(|x| x.rec.name == b) {
            let st = out.remove(i);
            let msg = bad_record_message(&name, &message);
            bad.push((b, msg, st.rec.hosts.iter().map(|h| h.hostname.clone()).collect()));
        }
    }
    Ok(((out, bad, by_batch, seen, all), others))
}

impl Approver {
    /// Reads the cluster facts ([`read_policy`]), the batch records, the Nodes and the CSRs.
    ///
    /// Errors: exit 4 for reads that fail or no batch record at all ("run add-nodes first");
    /// exit 3 for `extra_nodes` / `reissue` names no batch expects, or when every batch
    /// ConfigMap is not a batch record (naming it and the field). A batch ConfigMap that is not
    /// a batch record (a field missing or mistyped, `tokenExpiresAt` not a time) among good ones
    /// is skipped instead ([`Approver::bad_batches`]: its hosts' CSRs held, `bad-batch-record`;
    /// the commands exit 3 at the end).
    pub async fn new(target: &KubeTarget, opts: ApproveOptions) -> Result<Approver> {
        let mut policy = read_policy(target).await?;
        policy.trust_unverified_boot = opts.trust_unverified_boot;
        if let Some(r) = opts.kubelet_retry_seconds {
            policy.kubelet_retry_seconds = r;
        }
        let ((batches, bad_batches, recs, seen_records, batch_cms), other_hosts) =
            read_batches(target, opts.batch.as_deref()).await?;
        if batches.is_empty() {
            if let Some((name, message, _)) = bad_batches.first() {
                return Err(bad_batch_error(name, message));
            }
            return Err(no_batch());
        }
        let by = batch::whoami(target).await;
        let mut a = Approver {
            target: target.clone(),
            opts,
            policy,
            batches,
            expected: ExpectedNodes::default(),
            node_batch: BTreeMap::new(),
            existing: BTreeSet::new(),
            ready: BTreeSet::new(),
            csrs: BTreeMap::new(),
            node_cache: Default::default(),
            records: recs,
            seen_records,
            recorded: ApprovalsRecorded::default(),
            by_node: BTreeMap::new(),
            serving: BTreeMap::new(),
            done: BTreeSet::new(),
            in_flight: BTreeSet::new(),
            own_pending: BTreeSet::new(),
            by,
            write_failures: BTreeMap::new(),
            bad_batches,
            bad_reboots: BTreeMap::new(),
            other_hosts,
            batch_cms,
            others_named: BTreeMap::new(),
            forgotten: Vec::new(),
            broken: Vec::new(),
        };
        a.rebuild_expected(true)?;
        a.refresh().await?;
        Ok(a)
    }

    /// Lists CSRs and Nodes again (non-watch mode, and after a watch restart).
    pub async fn refresh(&mut self) -> Result<()> {
        let capi: Api<CertificateSigningRequest> = Api::all(self.target.client.clone());
        let l = capi.list(&ListParams::default()).await.map_err(|e| {
            classify(
                e,
                "list",
                ResourceRef::list("CertificateSigningRequests"),
                &self.target,
            )
        })?;
        self.csrs.clear();
        self.by_node.clear();
        self.serving.clear();
        for c in &l.items {
            self.observe_csr(c);
        }
        let napi: Api<Node> = Api::all(self.target.client.clone());
        let l = napi
            .list(&ListParams::default())
            .await
            .map_err(|e| classify(e, "list", ResourceRef::list("Nodes"), &self.target))?;
        self.existing.clear();
        self.ready.clear();
        for n in &l.items {
            self.observe_node(n);
        }
        // The CSRs are known now: older approval records take their time from them.
        self.rebuild_expected(false)
    }

    /// A CSR as it arrives: judge it and, unless `dry_run`, approve it when it passes (the
    /// checked write path of [`Approver::approve`]) or, with `deny_invalid`, deny it when it
    /// fails and names an expected node. Not-pending CSRs and other signers are left alone.
    pub async fn handle(&mut self, csr: &CertificateSigningRequest) -> Result<Outcome> {
        self.observe_csr(csr);
        let name = csr.metadata.name.clone().unwrap_or_default();
        let view = CsrView::from_k8s(csr);
        if view.kind() == Kind::NotKubelet || self.out_of_scope(csr) {
            let v = crate::csr::verdict(
                &view,
                &self.expected,
                &ExistingNodes::default(),
                &Default::default(),
                &self.policy,
                now(),
            );
            return Ok(Outcome {
                csr: name,
                verdict: v,
                action: Action::Ignored,
            });
        }
        if !is_pending(csr) {
            return Ok(Outcome {
                csr: name,
                verdict: self.settled_verdict(&view),
                action: Action::NotPending,
            });
        }
        let Some(v) = self.evaluate(&name, now()) else {
            return Ok(Outcome {
                csr: name,
                verdict: self.settled_verdict(&view),
                action: Action::NotPending,
            });
        };
        if v.approve {
            if self.opts.dry_run {
                return Ok(Outcome {
                    csr: name,
                    verdict: v,
                    action: Action::WouldApprove,
                });
            }
            return self.approve(&name).await;
        }
        if self.opts.deny_invalid && !self.opts.dry_run && self.deniable(&v) {
            return self.deny(&name).await;
        }
        Ok(Outcome {
            csr: name,
            action: Action::refused(&v),
            verdict: v,
        })
    }

    /// The checked approval of pending CSR `name`: reads the CSR, (client) the Node and the
    /// node's batch again, judges again; records the approval on the batch (CAS; 409 → read
    /// again and re-check); appends `Approved` (reason [`APPROVED_REASON`], a message naming
    /// the checks) through `/approval` (409 → read again, re-check). Returns
    /// [`Action::Rejected`] / [`Action::NotPending`] when the fresh reads say so.
    pub async fn approve(&mut self, name: &str) -> Result<Outcome> {
        if let Some(o) = self.unaddressable(name) {
            return Ok(o);
        }
        let capi: Api<CertificateSigningRequest> = Api::all(self.target.client.clone());
        let r_csr = ResourceRef::cluster("CertificateSigningRequest", name);
        for _ in 0..CONFLICT_RETRIES {
            let fresh = self.read_fresh(&capi, &r_csr, name).await?;
            let view = CsrView::from_k8s(&fresh);
            if !is_pending(&fresh) {
                return Ok(Outcome {
                    csr: name.into(),
                    verdict: self.settled_verdict(&view),
                    action: Action::NotPending,
                });
            }
            // The node named by the CN (if any): read the Node and the batch again.
            let pre = self.evaluate(name, now());
            let node = pre.as_ref().and_then(|v| v.node.clone());
            if let Some(n) = &node {
                self.reread_node(n).await?;
                // The batch is read again just before the approval is recorded (deleted: no
                // approval); the create of the approval record proves no other approval took
                // its place (a 409: read it, judge again).
            }
            let Some(v) = self.evaluate(name, now()) else {
                return Ok(Outcome {
                    csr: name.into(),
                    verdict: self.settled_verdict(&view),
                    action: Action::NotPending,
                });
            };
            if !v.approve {
                return Ok(Outcome {
                    csr: name.into(),
                    action: Action::refused(&v),
                    verdict: v,
                });
            }
            let node = v.node.clone().unwrap_or_default();
            let Some(bname) = self.node_batch.get(&node).cloned() else {
                return Ok(Outcome {
                    csr: name.into(),
                    verdict: v,
                    action: Action::Rejected,
                });
            };
            // 1. Record the approval (its own ConfigMap, created once), unless this CSR is
            //    recorded already (a run interrupted between record and /approval finishes it).
            let kind_s = v.kind.to_string();
            let bi = self
                .batches
                .iter()
                .position(|b| b.rec.name == bname)
                .expect("batch of an expected node");
            if self.batches[bi].rec.embedded > 0 || self.batches[bi].rec.api_version != batch::API_VERSION {
                // An earlier version's batch: its approvals become records first.
                let r = batch::convert(&self.target, &bname).await;
                if let Err(e) = r {
                    self.write_failures.insert(
                        name.to_string(),
                        format!(
                            "converting batch {bname} to {} failed: {}",
                            batch::API_VERSION,
                            e.render().trim()
                        ),
                    );
                    return Err(e);
                }
                self.reread_batch(&bname).await?;
                continue;
            }
            if !batch::exists(&self.target, &bname).await? {
                self.forget_batch(&bname)?;
                continue;
            }
            if let Some((index, record)) = self.approval_record(&self.batches[bi].rec, &node, v.kind, &view) {
                match records::create(&self.target, &record).await {
                    Ok(Created::Made(cm)) => {
                        self.observe_record(&cm)?;
                    }
                    Ok(Created::Existed(cm)) => {
                        // Another approver recorded this node's approval number `index` first:
                        // judge again with it. One already known cannot be why the name is
                        // taken: the ConfigMap is not what its name says; stop, naming it.
                        tracing::debug!("approval {index} of {node} recorded meanwhile; judging again");
                        if self.observe_record(&cm)? == Touched::Nothing {
                            return Err(Error::InvalidInput {
                                field: format!(
                                    "ConfigMap {}/{}",
                                    batch::NAMESPACE,
                                    cm.metadata.name.clone().unwrap_or_default()
                                ),
                                message: format!(
                                    "holds the name of {node}'s {kind_s} approval number {index} but is not that record; fix or delete it, then run approve again"
                                ),
                            });
                        }
                        continue;
                    }
                    Err(e) => {
                        self.write_failures.insert(
                            name.to_string(),
                            format!(
                                "recording its approval for batch {bname} failed: {}",
                                e.render().trim()
                            ),
                        );
                        return Err(e);
                    }
                }
            }
            // 2. /approval: append our condition to the fresh object, the batch read once more
            //    (a delete that landed while the record was written stops it).
            if !batch::exists(&self.target, &bname).await? {
                self.forget_batch(&bname)?;
                continue;
            }
            let obj = with_approved_condition(&fresh, v.kind, &node, &bname);
            match capi
                .replace_subresource("approval", name, &post_params(), &obj)
                .await
            {
                Ok(done) => {
                    self.observe_csr(&done);
                    tracing::info!(csr = name, node = %node, kind = %v.kind, "approved");
                    return Ok(Outcome {
                        csr: name.into(),
                        verdict: v,
                        action: Action::Approved,
                    });
                }
                Err(e) if kube_409(&e) => {
                    tracing::debug!("CSR {name} changed meanwhile; reading it again");
                    continue;
                }
                Err(e) => return Err(classify(e, "approve", r_csr.clone(), &self.target)),
            }
        }
        Err(Error::Api {
            verb: "approve".into(),
            resource: r_csr,
            message: format!("still conflicting after {CONFLICT_RETRIES} attempts (someone else keeps changing it or its batch); run approve again"),
        })
    }

    /// Denies pending CSR `name` (`--deny-invalid`) after reading it again and judging it
    /// again: a `Denied` condition (reason [`DENIED_REASON`]) whose message lists the reasons.
    pub async fn deny(&mut self, name: &str) -> Result<Outcome> {
        if let Some(o) = self.unaddressable(name) {
            return Ok(o);
        }
        let capi: Api<CertificateSigningRequest> = Api::all(self.target.client.clone());
        let r_csr = ResourceRef::cluster("CertificateSigningRequest", name);
        for _ in 0..CONFLICT_RETRIES {
            let fresh = self.read_fresh(&capi, &r_csr, name).await?;
            let view = CsrView::from_k8s(&fresh);
            let Some(v) = self.evaluate(name, now()).filter(|_| is_pending(&fresh)) else {
                return Ok(Outcome {
                    csr: name.into(),
                    verdict: self.settled_verdict(&view),
                    action: Action::NotPending,
                });
            };
            if !self.deniable(&v) {
                return Ok(Outcome {
                    csr: name.into(),
                    action: if v.approve {
                        Action::WouldApprove
                    } else {
                        Action::refused(&v)
                    },
                    verdict: v,
                });
            }
            let mut msg = String::from("agent-day2 refused it: ");
            msg.push_str(
                &v.reasons
                    .iter()
                    .map(|r| format!("{}: {r}", r.code()))
                    .collect::<Vec<_>>()
                    .join("; "),
            );
            let obj = with_condition(&fresh, "Denied", DENIED_REASON, msg);
            match capi
                .replace_subresource("approval", name, &post_params(), &obj)
                .await
            {
                Ok(done) => {
                    self.observe_csr(&done);
                    return Ok(Outcome {
                        csr: name.into(),
                        verdict: v,
                        action: Action::Denied,
                    });
                }
                Err(e) if kube_409(&e) => continue,
                Err(e) => return Err(classify(e, "deny", r_csr.clone(), &self.target)),
            }
        }
        Err(Error::Api {
            verb: "deny".into(),
            resource: r_csr,
            message: format!("still conflicting after {CONFLICT_RETRIES} attempts"),
        })
    }

    /// CSR `name` read again (and observed) before acting on it. Errors: the read's (exit 4).
    async fn read_fresh(
        &mut self,
        capi: &Api<CertificateSigningRequest>,
        r_csr: &ResourceRef,
        name: &str,
    ) -> Result<CertificateSigningRequest> {
        let fresh = capi
            .get(name)
            .await
            .map_err(|e| classify(e, "read", r_csr.clone(), &self.target))?;
        self.observe_csr(&fresh);
        Ok(fresh)
    }

    pub(super) async fn reread_node(&mut self, name: &str) -> Result<()> {
        let napi: Api<Node> = Api::all(self.target.client.clone());
        match napi.get_opt(name).await {
            Ok(Some(n)) => self.observe_node(&n),
            Ok(None) => self.forget_node(name),
            Err(e) => {
                return Err(classify(
                    e,
                    "read",
                    ResourceRef::cluster("Node", name),
                    &self.target,
                ))
            }
        }
        Ok(())
    }

    pub(super) async fn reread_batch(&mut self, name: &str) -> Result<()> {
        let api: Api<ConfigMap> = Api::namespaced(self.target.client.clone(), batch::NAMESPACE);
        let cm = api.get(name).await.map_err(|e| {
            classify(
                e,
                "read",
                ResourceRef::namespaced("ConfigMap", batch::NAMESPACE, name),
                &self.target,
            )
        })?;
        // Its records too (a conversion has just made some).
        let (stored, _) = records::list(&self.target, Some(name)).await?;
        for s in &stored {
            if !self.seen_records.contains(&s.name) {
                self.seen_records.insert(s.name.clone());
                self.records
                    .entry(s.batch.clone())
                    .or_default()
                    .push(s.record.clone());
            }
        }
        self.observe_batch(&cm)?;
        Ok(())
    }
}
