//! `add-nodes`: the main job. The flags are resolved once into a [`Plan`] ([`plan`]: every
//! flag check, before any cluster work; nothing after it sees clap types), then `make` runs
//! these steps, each a function of the plan and the previous steps' results (issue 3):
//!
//! 1. flags ([`Plan::from_args`], no cluster yet): `--token-ttl`, `--node-labels`,
//!    `--boot-artifacts-base-url`, output names, `--dir` writable (checked, not created: a run
//!    that fails validation leaves no directory);
//! 2. the cluster (`read_cluster`: [`cluster::fetch`] → [`ClusterModel`]; < 4.18 or an
//!    unsupported platform is refused with exit 4 as `info` does);
//! 3. the hosts (`validate_hosts`: the nodes config, [`nodes_config`]: parse and validation
//!    errors all at once, exit 3; warnings on stderr, including hosts an earlier unexpired batch
//!    already has; `--pool` on the cluster; the outputs not already there unless `--force`);
//! 4. auth material: Secret `openshift-config/agent-auth-token` reused by the rule of
//!    [`token::reuse_decision`], else a new key and tokens ([`crate::auth`]);
//! 5. component images from the release payload (`component_images`, [`crate::registry`],
//!    cached per digest);
//! 6. the Ignition (`node_image`, pure: [`ignition`]) and its compressed archive, measured
//!    against the 256 KiB of RHCOS live ISOs before any download;
//! 7. the base ISO (`base_image`, [`crate::base_iso`]; not for `--config-image`), and the
//!    archive measured against its actual embed area before anything is written;
//! 8. `--dir` created (0700) if missing, the outputs staged under temporary names
//!    (`write_files`; mode 0600, `boot-artifacts/` 0700);
//! 9. the cluster writes (`cluster_writes`): namespace, auth Secret (when new), the batch
//!    record ([`batch`]);
//! 10. the staged outputs renamed into place without replacing unless `--force` (`into_place`),
//!     and the report (`report`, pure).
//!
//! A failure before step 10 leaves nothing under the final names (staged files are removed);
//! a failure in step 10 removes the batch record again. `--dry-run` stops after step 7 and
//! prints the plan (hosts, files with sizes, token plan, base ISO source, the Ignition's files
//! with NetworkManager keyfiles shown, warnings; `-o json|yaml` adds the whole Ignition with
//! secrets redacted and no null fields): no file, directory, Secret or batch is written, and
//! no base ISO is downloaded (a cached or `--base-iso` one is measured; otherwise the 256 KiB
//! area of RHCOS live ISOs is assumed).

mod basics;
mod flag_checks;
pub mod plan;
pub mod report;
mod token;

use basics::{dir_error, invalid};
pub use basics::{OutputKind, DEFAULT_TTL};
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use kube::api::Api;
use serde::Serialize;

use crate::auth;
use crate::base_iso::{self, BaseIsoFile};
use crate::batch::{self, BatchHost, BatchRecord};
use crate::cli::{AddNodesArgs, AddNodesCommand, BatchArgs, BatchCommand, OutputFormat};
use crate::cluster::{self, normalize_arch, ClusterModel};
use crate::error::{Error, ResourceRef, Result};
use crate::ignition::{self, NodeImageInputs};
use crate::iso::{self, IsoError};
use crate::kube::classify;
use crate::kube::KubeTarget;
use crate::nodes_config::{self, NodesConfig, Origin, ValidatedHost};
use crate::output;
use crate::registry::{RegistryContext, ReleasePayload};
use plan::{check_base_url, probe_dir, NodesSource, Plan};
pub use plan::{parse_labels, parse_ttl};
use report::{AddNodesReport, ClusterSummary, FileSummary, HostSummary, IgnitionSize, TokenSummary};
use token::{auth_material, save_auth};
pub use token::{reuse_decision, TokenRequest};

/// File name of the appliance config image: the name `openshift-install agent create
/// config-image` gives it (`agentconfig.noarch.iso`, openshift/installer
/// `pkg/asset/agent/image/agentconfigimage` ... "noarch": the image holds no executable code),
/// kept so appliance users find the file they know.
pub const CONFIG_IMAGE_NAME: &str = "agentconfig.noarch.iso";
/// Subdirectory of `--dir` for PXE files (as `oc adm node-image create --pxe`).
pub const PXE_DIR: &str = "boot-artifacts";
/// Embed area of real RHCOS live ISOs (docs/iso.md "Embedding the Ignition config"), assumed by
/// `--dry-run` when no base ISO is at hand.
pub const RHCOS_EMBED_AREA: u64 = 256 * 1024;

/// Runs `add-nodes` (or `add-nodes batch ...`); returns what to print on stdout.
///
/// With `-o json|yaml`, an error also prints an `AddNodesError` document on stdout
/// (`errors: [{field, message}]`, crate::run) before the `error:` lines go to stderr, so a
/// script reading stdout gets JSON either way.
pub async fn run(target: &KubeTarget, args: &AddNodesArgs) -> Result<String> {
    if let Some(AddNodesCommand::Batch(b)) = &args.command {
        return batch_command(target, b).await;
    }
    let plan = Plan::from_args(args)?;
    make(target, &plan).await
}

/// Steps 2-10 of the module doc for a resolved [`Plan`]; returns what to print on stdout.
async fn make(target: &KubeTarget, plan: &Plan) -> Result<String> {
    let now = SystemTime::now();
    if !plan.dry_run {
        crate::tempfiles::remove_stale_with_warning(&[plan.dir.clone(), plan.dir.join(PXE_DIR)]);
    }
    let mut warnings: Vec<String> = Vec::new();
    let model = read_cluster(target, &mut warnings).await?;
    let hosts = validate_hosts(target, plan, &model, now, &mut warnings).await?;
    let auth = auth_material(target, &plan.token, now, plan.dry_run, &mut warnings).await?;
    let (reg, images) = component_images(target, plan, &model, &hosts.arch).await?;
    let node = node_image(plan, &model, &hosts, &auth, &images, uuid::Uuid::new_v4())?;
    let base = base_image(plan, &model, &hosts, &images, &reg, &node, &mut warnings).await?;
    let mut rep = report(plan, &model, &hosts, &auth, &node, &base, now);
    if plan.dry_run {
        return dry_run_report(plan, rep, &model, &hosts, &images, &base, &node, warnings);
    }
    prepare_dir(&plan.dir)?;
    let staged = write_files(plan, &hosts, &node, &base, now)?;
    let name = cluster_writes(target, plan, &model, &hosts, &auth, &staged, now).await?;
    rep.files = into_place(target, plan, staged, &name).await?;
    rep.replaces_batches = delete_replaced(target, &hosts.replaced, &mut warnings).await;
    rep.batch = Some(name);
    rep.warnings = warnings;
    output::render(plan.output, &rep, || report::render_table(&rep))
}

/// The error for a model with problems: a fact add-nodes needs that could not be read is that
/// read's error (a 403 names the permission, issue 22 item 6: it was a headline about
/// unsupported clusters); the rest (too old, unsupported platform) is "cannot take day-2
/// nodes". Several: each on its own `error:` line.
fn problems_error(model: &ClusterModel) -> Error {
    let mut errors: Vec<Error> = model
        .unreadable
        .iter()
        .filter(|u| u.problem.is_some())
        .filter_map(|u| {
            Some(Error::Unreadable {
                resource: u.resource_ref.clone()?,
                reason: u.reason.clone(),
                unknown: u.what.clone(),
            })
        })
        .collect();
    let other = model.other_problems();
    if !other.is_empty() {
        errors.push(Error::ClusterUnsupported { reasons: other });
    }
    match errors.len() {
        0 => Error::ClusterUnsupported {
            reasons: model.problems.clone(),
        },
        1 => errors.remove(0),
        _ => Error::Many(errors),
    }
}

/// Prints a warning on stderr and keeps it for the report.
fn warn(w: String, list: &mut Vec<String>) {
    crate::say!("warning: {w}");
    list.push(w);
}

/// Step 2: the cluster ([`cluster::fetch`] → [`ClusterModel`]); one it cannot add nodes to
/// (< 4.18, unsupported platform) is exit 4 as `info` says. Warns about the model's warnings
/// and an upgrade in progress.
async fn read_cluster(target: &KubeTarget, warnings: &mut Vec<String>) -> Result<ClusterModel> {
    let objects = cluster::fetch(target).await?;
    let model = ClusterModel::from_objects(&objects)?;
    if !model.can_add_nodes() {
        return Err(problems_error(&model));
    }
    for w in &model.warnings {
        warn(w.clone(), warnings);
    }
    if let Some(u) = &model.version.upgrade_in_progress {
        warn(
            format!(
                "an upgrade to {} is in progress: the image is made for the Completed release {} ({}); the nodes join at that version and are upgraded with the cluster",
                u.version, model.version.current, model.version.release_image
            ),
            warnings,
        );
    }
    Ok(model)
}

/// The hosts of this run as step 3 leaves them.
struct Hosts {
    /// The nodes config as read (SSH key, root device hints, NMState documents).
    cfg: NodesConfig,
    /// Its hosts, validated against the cluster.
    hosts: Vec<ValidatedHost>,
    /// CoreOS architecture of the image.
    arch: String,
    /// Where the PXE files will be served (`--boot-artifacts-base-url`, else the nodes
    /// config's `bootArtifactsBaseURL`); None for other outputs.
    base_url: Option<String>,
    /// The output paths.
    names: OutputNames,
    /// Earlier batches this run replaces ([`Overlaps::replaced`]), deleted once the new files
    /// are in place.
    replaced: Vec<String>,
}

/// Hosts of another architecture than the control plane's, on a cluster whose API does not say
/// it runs the multi-arch payload: the release image's own manifest decides (a list serving
/// that architecture; issue 22 item 12). Some(model marked multi-arch) when it does; None
/// otherwise (nothing to ask, a single-arch payload, or the registry could not tell: a warning
/// says so and the validation refuses the hosts as before).
async fn multi_arch_from_payload(
    plan: &Plan,
    model: &ClusterModel,
    cfg_arch: Option<&str>,
    warnings: &mut Vec<String>,
) -> Option<ClusterModel> {
    let want = normalize_arch(cfg_arch?.trim());
    let cp = &model.architecture.control_plane;
    if model.architecture.multi_arch || cp.is_empty() || &want == cp {
        return None;
    }
    let reg = RegistryContext::from_cluster(model, plan.registry_config.clone(), plan.insecure);
    match ReleasePayload::serves_arch(&model.version.release_image, &reg, &want).await {
        Ok(true) => {
            warn(
                format!(
                    "the release image {} is a multi-arch manifest list serving {want}, although the cluster's API does not say so (the Default feature set prunes it): {want} hosts may join",
                    model.version.release_image
                ),
                warnings,
            );
            let mut m = model.clone();
            m.architecture.multi_arch = true;
            Some(m)
        }
        Ok(false) => None,
        Err(e) => {
            warn(
                format!(
                    "cannot tell from the release image whether the cluster's payload is multi-arch: {e}"
                ),
                warnings,
            );
            None
        }
    }
}

/// Step 3: the nodes config read and validated against the cluster (every error at once,
/// exit 3), the architecture, `--pool` against the cluster's MachineConfigPools, the PXE base
/// URL, earlier batches with the same hosts (warnings), and the output paths (not there
/// already unless `--force`; checked in a dry run too, exit 3 as the real run).
async fn validate_hosts(
    target: &KubeTarget,
    plan: &Plan,
    model: &ClusterModel,
    now: SystemTime,
    warnings: &mut Vec<String>,
) -> Result<Hosts> {
    let (cfg, parse_errors) = read_nodes_config(&plan.nodes)?;
    let probed = multi_arch_from_payload(plan, model, cfg.cpu_architecture.as_deref(), warnings).await;
    let model = probed.as_ref().unwrap_or(model);
    let mut validated = nodes_config::validate(&cfg, model);
    let source = match &cfg.origin {
        Origin::File(p) => p.clone(),
        Origin::Flags => "flags".into(),
        Origin::Code => String::new(),
    };
    validated.errors = nodes_config::merge_errors(parse_errors, std::mem::take(&mut validated.errors));
    let (vhosts, vwarnings) = validated.into_result(&source)?;
    for w in vwarnings {
        warn(w.to_string(), warnings);
    }
    if let Some(n) = plan
        .reimage
        .iter()
        .find(|n| !vhosts.iter().any(|h| &h.hostname == *n))
    {
        return Err(invalid(
            "--reimage",
            format!(
                "{n:?} is not a host of this run ({}); name the hostname of the machine being re-imaged",
                vhosts
                    .iter()
                    .map(|h| h.hostname.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        ));
    }
    let arch = image_arch(&vhosts, cfg.cpu_architecture.as_deref(), model);
    if plan.pool != ignition::DEFAULT_POOL {
        check_pool(target, &plan.pool, warnings).await?;
    }
    // --boot-artifacts-base-url overrides the nodes-config's bootArtifactsBaseURL.
    let base_url = match (&plan.base_url, &cfg.boot_artifacts_base_url) {
        (Some(u), _) => Some(u.clone()),
        (None, Some(u)) if plan.kind == OutputKind::Pxe => Some(check_base_url(u, "bootArtifactsBaseURL")?),
        _ => None,
    };
    if plan.kind == OutputKind::Pxe && base_url.is_none() {
        warn(
            format!(
                "no bootArtifactsBaseURL in the nodes config and no --boot-artifacts-base-url: no node.{arch}.ipxe script is written, and the kernel command line needs coreos.live.rootfs_url=<where you serve node.{arch}-rootfs.img> (shown in Kargs with a placeholder)"
            ),
            warnings,
        );
    }
    let from_flags = cfg.origin == Origin::Flags;
    let replaced =
        earlier_batches(target, plan, model, &vhosts, (&source, from_flags), now, warnings).await?;
    let mut names = OutputNames::new(&plan.dir, plan.kind, &arch, plan.output_name.as_deref());
    if plan.kind == OutputKind::Pxe && base_url.is_some() {
        names
            .finals
            .push(plan.dir.join(PXE_DIR).join(&iso::pxe::file_names(&arch)[3]));
    }
    // The output must not be the --base-iso file: with --force it would replace the image
    // it is made from with the node ISO (which holds the pull secret).
    if let Some(b) = &plan.base_iso {
        use std::os::unix::fs::MetadataExt;
        if let Ok(bm) = std::fs::metadata(b) {
            let same =
                |p: &PathBuf| std::fs::metadata(p).is_ok_and(|m| m.dev() == bm.dev() && m.ino() == bm.ino());
            if let Some(p) = names.finals().iter().find(|p| same(p)) {
                return Err(invalid(
                    "--base-iso",
                    format!(
                        "{} is also the output {}; the node ISO would replace the base ISO it is made from: choose another --output-name or --dir",
                        b.display(),
                        p.display()
                    ),
                ));
            }
        }
    }
    // A dry run refuses what the real run would refuse (it only reads the paths).
    if plan.force {
        flag_checks::check_force_targets(names.finals())?;
    }
    if !plan.force {
        if let Some(p) = names.finals().iter().find(|p| p.symlink_metadata().is_ok()) {
            return Err(invalid(
                p.display().to_string(),
                "already exists; remove it, choose another --dir, or pass --force to replace it",
            ));
        }
    }
    Ok(Hosts {
        cfg,
        hosts: vhosts,
        arch,
        base_url,
        names,
        replaced,
    })
}

/// The image's CoreOS architecture: the first host's, else the nodes config's
/// `cpuArchitecture`, else the control plane's.
fn image_arch(hosts: &[ValidatedHost], cfg_arch: Option<&str>, model: &ClusterModel) -> String {
    hosts
        .first()
        .map(|h| h.arch.clone())
        .filter(|a| !a.is_empty())
        .unwrap_or_else(|| normalize_arch(cfg_arch.unwrap_or(&model.architecture.control_plane)))
}

/// Step 5: the agent-installer component images from the release payload, through the
/// registry context of the cluster (pull secret or `--registry-config`, mirrors, CAs).
async fn component_images(
    target: &KubeTarget,
    plan: &Plan,
    model: &ClusterModel,
    arch: &str,
) -> Result<(RegistryContext, crate::registry::ComponentImages)> {
    let mut reg = RegistryContext::from_cluster(model, plan.registry_config.clone(), plan.insecure);
    reg.arch = arch.to_string();
    reg.request_timeout = target.request_timeout;
    let images = ReleasePayload::component_images(&model.version.release_image, &reg).await?;
    Ok((reg, images))
}

/// The node's Ignition as step 6 makes it.
struct NodeImage {
    ign: ignition_config::v3_2::Config,
    /// Its JSON (what the archive holds).
    json: String,
    /// The compressed archive embedded in the ISO or the PXE initrd.
    archive: Vec<u8>,
    /// `fips=1` (FIPS clusters) and the `--karg`s, in that order.
    extra_kargs: Vec<String>,
}

/// Step 6 (pure): the Ignition of the hosts and its compressed archive, refused (exit 3) when
/// an ISO made from a real RHCOS live ISO (256 KiB embed area) could not hold it; a
/// `--base-iso` is measured exactly in step 7.
fn node_image(
    plan: &Plan,
    model: &ClusterModel,
    hosts: &Hosts,
    auth: &token::Auth,
    images: &crate::registry::ComponentImages,
    infra_env_id: uuid::Uuid,
) -> Result<NodeImage> {
    let specs = ignition::host_specs(&hosts.cfg, &hosts.hosts);
    let comp = ignition::ComponentImages {
        api_server: images.api_server.clone(),
        node_agent: images.node_agent.clone(),
        orchestrator: images.orchestrator.clone(),
        utils: images.utils.clone(),
    };
    let inputs = NodeImageInputs {
        cluster: model,
        hosts: &specs,
        auth: &auth.material,
        images: &comp,
        pull_secret: &model.pull_secret.0,
        pool: Some(plan.pool.clone()),
        infra_env_id,
        ssh_key: hosts.cfg.ssh_key.clone(),
        cpu_architecture: Some(hosts.arch.clone()),
        base_iso_url: plan.base_iso.as_ref().map(|p| {
            let abs = std::path::absolute(p).unwrap_or_else(|_| p.clone());
            format!("file://{}", abs.display())
        }),
    };
    let ign = ignition::build(&inputs)?;
    let json = ignition::to_json(&ign);
    let archive = iso::ignition_archive(json.as_bytes(), &[]).map_err(|e| iso_error(e, None))?;
    let mut extra_kargs: Vec<String> = Vec::new();
    if model.fips {
        extra_kargs.push("fips=1".into());
    }
    extra_kargs.extend(plan.kargs.iter().cloned());
    // Measured before any base ISO download: real RHCOS live ISOs hold 256 KiB; a base ISO
    // with another area size is checked exactly in step 7.
    if plan.kind == OutputKind::Iso && plan.base_iso.is_none() && archive.len() as u64 > RHCOS_EMBED_AREA {
        return Err(too_large(&ign, archive.len(), RHCOS_EMBED_AREA, None));
    }
    Ok(NodeImage {
        ign,
        json,
        archive,
        extra_kargs,
    })
}

/// The base image as step 7 finds it.
struct BaseImage {
    /// The base ISO (None for `--config-image`, and in a dry run without one at hand).
    file: Option<BaseIsoFile>,
    /// Where its Ignition and kargs areas are (ISO and PXE with a base ISO).
    layout: Option<iso::EmbedPlan>,
    /// Room for the archive (ISO only; 256 KiB assumed without a base ISO).
    area: Option<u64>,
    /// The ISO's kernel arguments with the extra ones appended (None: unchanged).
    iso_kargs: Option<String>,
    /// The PXE kernel command line.
    pxe_kargs: Option<String>,
}

/// Step 7: the base ISO ([`base_iso::resolve`]; none for `--config-image`; a dry run
/// downloads nothing), its embed areas, and the archive measured against its actual area
/// before anything is written.
async fn base_image(
    plan: &Plan,
    model: &ClusterModel,
    hosts: &Hosts,
    images: &crate::registry::ComponentImages,
    reg: &RegistryContext,
    node: &NodeImage,
    warnings: &mut Vec<String>,
) -> Result<BaseImage> {
    let kind = plan.kind;
    let arch = &hosts.arch;
    let file = if kind == OutputKind::ConfigImage {
        None
    } else {
        let req = base_iso::Request {
            arch: arch.clone(),
            explicit: plan.base_iso.clone(),
            stream: model.base_iso_for(arch),
            machine_os_images: images.machine_os_images.clone(),
            release_digest: model
                .version
                .release_image
                .rsplit_once('@')
                .map(|(_, d)| d.to_string()),
            cache_root: None,
            offline: plan.dry_run,
            extra_ca_pems: reg.extra_ca_pems.clone(),
            insecure: plan.insecure,
            retry: reg.retry.clone(),
        };
        let mut w = Vec::new();
        let r = base_iso::resolve(&req, Some(reg), &mut w).await;
        for x in w {
            warn(x, warnings);
        }
        r?
    };
    let layout = match (&file, kind) {
        (Some(b), OutputKind::Iso | OutputKind::Pxe) => {
            Some(iso::plan_file(&b.path).map_err(|e| iso_error(e, Some(b)))?)
        }
        _ => None,
    };
    let area = match (kind, &layout) {
        (OutputKind::Iso, Some(p)) => Some(p.ignition_area.length),
        (OutputKind::Iso, None) => Some(RHCOS_EMBED_AREA),
        _ => None,
    };
    if let Some(area) = area {
        if node.archive.len() as u64 > area {
            return Err(too_large(
                &node.ign,
                node.archive.len(),
                area,
                layout.as_ref().map(|p| p.ignition_file.as_str()),
            ));
        }
    }
    let iso_kargs = match (kind, &layout) {
        (OutputKind::Iso, Some(p)) => p
            .kargs_appending(&node.extra_kargs)
            .map_err(|e| iso_error(e, file.as_ref()))?,
        _ => None,
    };
    let pxe_kargs = match (kind, &layout) {
        (OutputKind::Pxe, Some(p)) => Some(
            iso::pxe::pxe_kargs(p, arch, hosts.base_url.as_deref(), &node.extra_kargs)
                .map_err(|e| iso_error(e, file.as_ref()))?,
        ),
        _ => None,
    };
    Ok(BaseImage {
        file,
        layout,
        area,
        iso_kargs,
        pxe_kargs,
    })
}

/// The report (pure): what is made, for whom, with which tokens, and what to do next; its
/// files, batch and warnings are filled in by the caller.
fn report(
    plan: &Plan,
    model: &ClusterModel,
    hosts: &Hosts,
    auth: &token::Auth,
    node: &NodeImage,
    base: &BaseImage,
    now: SystemTime,
) -> AddNodesReport {
    let (kind, arch) = (plan.kind, &hosts.arch);
    AddNodesReport {
        api_version: "agent-day2/v1",
        kind: "AddNodesReport",
        dry_run: plan.dry_run,
        cluster: ClusterSummary {
            name: model.cluster.name.clone(),
            id: model.cluster.id.clone(),
            version: model.version.current.clone(),
            release_image: model.version.release_image.clone(),
            platform: model.platform.kind.clone(),
            architecture: arch.clone(),
            api_url: model.cluster.api_url.clone(),
        },
        hosts: hosts.hosts.iter().map(host_summary).collect(),
        base_iso: base.file.clone(),
        output_kind: kind.name().into(),
        files: Vec::new(),
        kargs: match kind {
            // Without a base URL the rootfs URL is the user's to fill in: a placeholder that
            // names the file, so the line is complete apart from where it is served.
            OutputKind::Pxe if hosts.base_url.is_none() => base.pxe_kargs.clone().map(|k| {
                format!("{k} coreos.live.rootfs_url=<where-you-serve>/{}", iso::pxe::file_names(arch)[2])
            }),
            OutputKind::Pxe => base.pxe_kargs.clone(),
            _ => (!node.extra_kargs.is_empty()).then(|| node.extra_kargs.join(" ")),
        },
        ignition: IgnitionSize {
            config_bytes: node.json.len(),
            archive_bytes: node.archive.len(),
            area_bytes: base.area,
        },
        token: {
            // Whole seconds, as the tokens' times are: a new 48 h token shows 48h, not 47h 59m.
            let now_s = std::time::UNIX_EPOCH
                + Duration::from_secs(now.duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0));
            let left = auth.material.expires_at.duration_since(now_s).unwrap_or_default();
            TokenSummary {
                expires_at: auth.material.expiry_rfc3339(),
                reused: auth.reused,
                hours_left: left.as_secs() / 3600,
                left: report::human_duration(left),
                reason: auth.reason.clone(),
            }
        },
        base_iso_plan: None,
        batch: None,
        replaces_batches: hosts.replaced.clone(),
        warnings: Vec::new(),
        secrets_notice: "the files hold the cluster's pull secret and the node tokens (mode 0600): keep them private, delete them once the nodes joined".into(),
        next_steps: next_steps(
            kind,
            &hosts.names,
            arch,
            &auth.material.expiry_rfc3339(),
            hosts.base_url.as_deref(),
            plan.dry_run,
        )
        .into_iter()
        .chain(dhcp_step(&hosts.hosts))
        .collect(),
        ignition_files: Vec::new(),
    }
}

/// `--dry-run` ends here: the files that would be written (sizes when known), where the base
/// ISO would come from, the Ignition's files, the warnings.
#[allow(clippy::too_many_arguments)]
fn dry_run_report(
    plan: &Plan,
    mut rep: AddNodesReport,
    model: &ClusterModel,
    hosts: &Hosts,
    images: &crate::registry::ComponentImages,
    base: &BaseImage,
    node: &NodeImage,
    warnings: Vec<String>,
) -> Result<String> {
    let kind = plan.kind;
    rep.files = hosts
        .names
        .finals()
        .iter()
        .map(|p| FileSummary {
            path: p.display().to_string(),
            size: dry_run_size(kind, base.file.as_ref()),
            sha256: String::new(),
        })
        .collect();
    if base.file.is_none() && kind != OutputKind::ConfigImage {
        rep.base_iso_plan = Some(match (&images.machine_os_images, model.base_iso_for(&hosts.arch)) {
            (Some(m), _) => format!("not cached: would be read from the release's machine-os-images {m} (or the coreos-bootimages stream); nothing is downloaded in a dry run"),
            (None, Some(b)) => format!("not cached: would be downloaded from {} (sha256 {}); nothing is downloaded in a dry run", b.location, b.sha256),
            (None, None) => "none found: give --base-iso FILE".into(),
        });
    }
    rep.ignition_files = ignition_listing(&node.ign);
    rep.warnings = warnings;
    dry_run_output(plan.output, &rep, &node.ign)
}

/// Step 8: the outputs written under temporary names next to their final ones (mode 0600;
/// `boot-artifacts/` 0700), removed again if anything later fails.
fn write_files(
    plan: &Plan,
    hosts: &Hosts,
    node: &NodeImage,
    base: &BaseImage,
    now: SystemTime,
) -> Result<Staged> {
    let names = &hosts.names;
    Ok(match plan.kind {
        OutputKind::Iso => {
            let (b, p) = (
                base.file.as_ref().expect("ISO has a base"),
                base.layout.as_ref().expect("ISO has a plan"),
            );
            let tmp = names.staging_file(&names.finals()[0]);
            let guard = Cleanup::new(vec![tmp.clone()]);
            let w = iso::write_node_iso(
                &b.path,
                &tmp,
                p,
                &node.archive,
                base.iso_kargs.as_deref(),
                iso::WriteOptions {
                    force: false,
                    sha256: true,
                },
            )
            .map_err(|e| iso_error(e, Some(b)))?;
            Staged {
                moves: vec![(
                    tmp,
                    names.finals()[0].clone(),
                    w.size,
                    w.sha256.unwrap_or_default(),
                )],
                guard,
                dir: None,
            }
        }
        OutputKind::Pxe => {
            let (b, p) = (
                base.file.as_ref().expect("PXE has a base"),
                base.layout.as_ref().expect("PXE has a plan"),
            );
            let pxe_dir = plan.dir.join(PXE_DIR);
            // 0700 like --dir: the files hold the pull secret (an existing directory is left
            // as it is, never chmod-ed).
            std::fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(&pxe_dir)
                .map_err(|e| dir_error(&pxe_dir, e))?;
            let stage = pxe_dir.join(format!(".staging-{}", std::process::id()));
            std::fs::DirBuilder::new()
                .mode(0o700)
                .create(&stage)
                .map_err(|e| dir_error(&stage, e))?;
            let guard = Cleanup::new(vec![stage.clone()]);
            let opts = iso::pxe::PxeOptions {
                arch: hosts.arch.clone(),
                base_url: hosts.base_url.clone(),
                extra_kargs: node.extra_kargs.clone(),
                force: false,
            };
            let files = iso::pxe::write_pxe_files(&b.path, &stage, p, &node.archive, &opts)
                .map_err(|e| iso_error(e, Some(b)))?;
            let mut moves = Vec::new();
            let mut srcs = vec![files.initrd, files.kernel, files.rootfs];
            srcs.extend(files.ipxe);
            for src in srcs {
                let name = src.file_name().map(PathBuf::from).unwrap_or_default();
                let size = std::fs::metadata(&src).map(|m| m.len()).unwrap_or(0);
                let sha = base_iso::sha256_file(&src).map_err(|e| Error::Io {
                    path: src.display().to_string(),
                    source: e,
                })?;
                moves.push((src, pxe_dir.join(name), size, sha));
            }
            Staged {
                moves,
                guard,
                dir: Some(stage),
            }
        }
        OutputKind::ConfigImage => {
            let tmp = names.staging_file(&names.finals()[0]);
            let guard = Cleanup::new(vec![tmp.clone()]);
            let mtime = iso::config_image::unix_secs(now);
            // The node's files plus what upstream's appliance loader requires besides.
            let files = iso::config_image::with_loader_files(ignition::files(&node.ign));
            let cpio: Vec<iso::cpio::CpioFile<'_>> = files
                .iter()
                .map(|(path, data, mode)| iso::cpio::CpioFile {
                    path,
                    mode: 0o100000 | (*mode as u32 & 0o7777),
                    mtime,
                    data,
                })
                .collect();
            iso::config_image::write_config_image(&tmp, &cpio, false).map_err(|e| iso_error(e, None))?;
            let size = std::fs::metadata(&tmp).map(|m| m.len()).unwrap_or(0);
            let sha = base_iso::sha256_file(&tmp).map_err(|e| Error::Io {
                path: tmp.display().to_string(),
                source: e,
            })?;
            Staged {
                moves: vec![(tmp, names.finals()[0].clone(), size, sha)],
                guard,
                dir: None,
            }
        }
    })
}

/// Step 9: the cluster writes: our namespace, the node tokens' Secret (when new), the batch
/// record. Returns the batch name.
async fn cluster_writes(
    target: &KubeTarget,
    plan: &Plan,
    model: &ClusterModel,
    hosts: &Hosts,
    auth: &token::Auth,
    staged: &Staged,
    now: SystemTime,
) -> Result<String> {
    batch::ensure_namespace(target).await?;
    if !auth.reused {
        save_auth(target, auth, now).await?;
    }
    let name = batch::new_name(now);
    let rec = batch_record(
        plan,
        model,
        hosts,
        &name,
        now,
        batch::whoami(target).await,
        &auth.material.expiry_rfc3339(),
        staged,
    );
    batch::create(target, &rec).await?;
    Ok(name)
}

/// The batch record of this run (pure).
#[allow(clippy::too_many_arguments)]
fn batch_record(
    plan: &Plan,
    model: &ClusterModel,
    hosts: &Hosts,
    name: &str,
    now: SystemTime,
    created_by: String,
    token_expires_at: &str,
    staged: &Staged,
) -> BatchRecord {
    let rel = |p: &Path| p.strip_prefix(&plan.dir).unwrap_or(p).display().to_string();
    BatchRecord {
        api_version: batch::API_VERSION.into(),
        kind: batch::KIND.into(),
        name: name.to_string(),
        created_at: auth::rfc3339(now),
        created_by,
        cluster_id: model.cluster.id.clone(),
        release_image: model.version.release_image.clone(),
        version: model.version.current.clone(),
        architecture: hosts.arch.clone(),
        pool: plan.pool.clone(),
        node_labels: plan.node_labels.clone(),
        output_kind: plan.kind.name().into(),
        files: staged.moves.iter().map(|m| rel(&m.1)).collect(),
        image_sha256: staged.moves[0].3.clone(),
        token_expires_at: token_expires_at.to_string(),
        hosts: hosts
            .hosts
            .iter()
            .map(|h| BatchHost {
                hostname: h.hostname.clone(),
                macs: h.macs.clone(),
                ips: h.static_ips.iter().map(ToString::to_string).collect(),
                ip_source: if h.static_ips.is_empty() {
                    "unknown".into()
                } else {
                    "static".into()
                },
            })
            .collect(),
        approvals: vec![],
        reboots: vec![],
        embedded: 0,
    }
}

/// Step 10: the staged outputs renamed into place without replacing (unless `--force`); on a
/// failure the batch record `name` is removed again. Returns the files written.
async fn into_place(
    target: &KubeTarget,
    plan: &Plan,
    staged: Staged,
    name: &str,
) -> Result<Vec<FileSummary>> {
    let written: Vec<FileSummary> = staged
        .moves
        .iter()
        .map(|(_, dest, size, sha)| FileSummary {
            path: dest.display().to_string(),
            size: *size,
            sha256: sha.clone(),
        })
        .collect();
    if let Err(e) = staged.commit(plan.force) {
        if let Err(d) = batch::delete(target, name).await {
            crate::say!("warning: could not remove batch record {name} after the failure: {d}");
        }
        return Err(e);
    }
    Ok(written)
}

use std::os::unix::fs::DirBuilderExt;

/// Removes the listed paths (files or directories) on drop unless disarmed.
struct Cleanup(Vec<PathBuf>);
impl Cleanup {
    /// Also registers the paths with [`crate::tempfiles`], so SIGINT/SIGTERM removes them.
    fn new(paths: Vec<PathBuf>) -> Cleanup {
        paths.iter().for_each(|p| crate::tempfiles::register(p));
        Cleanup(paths)
    }
}
impl Drop for Cleanup {
    fn drop(&mut self) {
        for p in &self.0 {
            crate::tempfiles::unregister(p);
            if p.is_dir() {
                let _ = std::fs::remove_dir_all(p);
            } else {
                let _ = std::fs::remove_file(p);
            }
        }
    }
}

/// Staged outputs: (temporary path, final path, size, sha256).
struct Staged {
    moves: Vec<(PathBuf, PathBuf, u64, String)>,
    guard: Cleanup,
    dir: Option<PathBuf>,
}

impl Staged {
    /// Renames every staged file into place (no replacing unless `force`). On a failure the
    /// files already moved are removed again, so all or none are there.
    fn commit(self, force: bool) -> Result<()> {
        let mut done: Vec<PathBuf> = Vec::new();
        for (tmp, dest, _, _) in &self.moves {
            let r = if force {
                std::fs::rename(tmp, dest)
            } else {
                iso::output::rename_noreplace(tmp, dest)
            };
            if let Err(e) = r {
                for d in &done {
                    let _ = std::fs::remove_file(d);
                }
                return Err(if e.kind() == std::io::ErrorKind::AlreadyExists {
                    invalid(
                        dest.display().to_string(),
                        "was created by someone else meanwhile; remove it or pass --force to replace it",
                    )
                } else {
                    Error::Io {
                        path: dest.display().to_string(),
                        source: e,
                    }
                });
            }
            done.push(dest.clone());
        }
        if let Some(d) = &self.dir {
            let _ = std::fs::remove_dir(d);
        }
        drop(self.guard);
        Ok(())
    }
}

/// Output paths.
struct OutputNames {
    dir: PathBuf,
    finals: Vec<PathBuf>,
}

impl OutputNames {
    fn new(dir: &Path, kind: OutputKind, arch: &str, output_name: Option<&str>) -> Self {
        let finals = match kind {
            OutputKind::Iso => vec![dir.join(
                output_name
                    .map(String::from)
                    .unwrap_or_else(|| format!("node.{arch}.iso")),
            )],
            OutputKind::ConfigImage => vec![dir.join(output_name.unwrap_or(CONFIG_IMAGE_NAME))],
            OutputKind::Pxe => {
                let n = iso::pxe::file_names(arch);
                // initrd first: it carries the Ignition (the batch's image sha256)
                vec![
                    dir.join(PXE_DIR).join(&n[1]),
                    dir.join(PXE_DIR).join(&n[0]),
                    dir.join(PXE_DIR).join(&n[2]),
                ]
            }
        };
        OutputNames {
            dir: dir.to_path_buf(),
            finals,
        }
    }
    fn finals(&self) -> &[PathBuf] {
        &self.finals
    }
    fn staging_file(&self, final_path: &Path) -> PathBuf {
        let name = final_path.file_name().and_then(|n| n.to_str()).unwrap_or("out");
        final_path
            .parent()
            .unwrap_or(&self.dir)
            .join(format!(".{name}.staging-{}", std::process::id()))
    }
}

/// What to do next; for PXE it matches what was written (the `.ipxe` script only with a base
/// URL). `monitor --approve` and `approve --watch` are the commands that finish the job. A dry
/// run wrote nothing, so its first step names what a real run writes instead of a file to boot.
fn next_steps(
    kind: OutputKind,
    names: &OutputNames,
    arch: &str,
    expiry: &str,
    base_url: Option<&str>,
    dry_run: bool,
) -> Vec<String> {
    let (file, was) = if dry_run {
        ("that file".to_string(), "would be")
    } else {
        (names.finals()[0].display().to_string(), "was")
    };
    let first = match (kind, base_url) {
        (OutputKind::Iso, _) => format!("boot {file} on the hosts (virtual media, USB or a CD)"),
        (OutputKind::Pxe, Some(url)) => format!(
            "serve the files of {} at {url} (the initrd holds the pull secret, so restrict who can fetch it), then PXE-boot the hosts with node.{arch}.ipxe (e.g. chain {}/node.{arch}.ipxe from iPXE)",
            names.dir.join(PXE_DIR).display(),
            url.trim_end_matches('/')
        ),
        (OutputKind::Pxe, None) => format!(
            "serve the files of {} over HTTP (the initrd holds the pull secret, so restrict who can fetch it), then boot the hosts with kernel node.{arch}-vmlinuz, initrd node.{arch}-initrd.img and the kernel command line shown as Kargs, with <where-you-serve> replaced by the files' URL (no .ipxe script {was} written: give --boot-artifacts-base-url URL for one)",
            names.dir.join(PXE_DIR).display()
        ),
        (OutputKind::ConfigImage, _) => format!(
            "attach {file} to each appliance machine as a CD or virtual media and boot it from its appliance disk"
        ),
    };
    let first = if dry_run {
        let list = names
            .finals()
            .iter()
            .map(|p| p.display().to_string())
            .collect::<Vec<_>>()
            .join(", ");
        format!("nothing was written: run again without --dry-run to write {list}; then {first}")
    } else {
        first
    };
    let mut steps = vec![first];
    if kind == OutputKind::Pxe {
        // 0600 files of the user who ran add-nodes: a web server running as its own user
        // cannot read them (issue 22 item 10).
        steps.push(format!(
            "the files are mode 0600 and yours, so a web server running as its own user cannot read them: copy them where it serves from, readable by its group only, e.g. install -m 0640 -g apache {}/* /var/www/html/day2/",
            names.dir.join(PXE_DIR).display()
        ));
    }
    steps.extend([
        format!("boot them before {expiry}: the node tokens expire then"),
        "while they install: oc agent-day2 monitor --approve --yes (start it when you boot them: it records each host's reboot, which binds its kubelet's first CSR; it follows each node until it is Ready and approves its kubelet CSRs after checking them), or oc agent-day2 approve --watch --yes (the approvals alone, without install stages); on a terminal, leave out --yes to be asked for each CSR".into(),
    ]);
    steps
}

/// The step for DHCP hosts (None without any): monitor and `approve --watch` reach a host's
/// own service only at a known address, and without it no reboot record binds the host's
/// client CSR, which then stays held (`boot-unverified`) for good (issue 22: plain
/// `monitor --approve` held a DHCP host's client CSR until the timeout with no word why).
fn dhcp_step(hosts: &[ValidatedHost]) -> Option<String> {
    let dhcp: Vec<&str> = hosts
        .iter()
        .filter(|h| h.static_ips.is_empty())
        .map(|h| h.hostname.as_str())
        .collect();
    let first = dhcp.first()?;
    // Named up to five: the hosts table above lists them all.
    let named = if dhcp.len() > 5 {
        format!("{} and {} more", dhcp[..5].join(", "), dhcp.len() - 5)
    } else {
        dhcp.join(", ")
    };
    Some(format!(
        "DHCP host{} {}: give monitor {} address{} as the DHCP server leases {} (oc agent-day2 monitor --approve --ip-addresses IP[,IP…], or --node {first}=IP): without it nothing follows {} install, no reboot is recorded and {} client CSR{} stay{} held",
        if dhcp.len() == 1 { "" } else { "s" },
        named,
        if dhcp.len() == 1 { "its" } else { "their" },
        if dhcp.len() == 1 { "" } else { "es" },
        if dhcp.len() == 1 { "it" } else { "them" },
        if dhcp.len() == 1 { "its" } else { "their" },
        if dhcp.len() == 1 { "its" } else { "their" },
        if dhcp.len() == 1 { "" } else { "s" },
        if dhcp.len() == 1 { "s" } else { "" },
    ))
}

fn host_summary(h: &ValidatedHost) -> HostSummary {
    HostSummary {
        hostname: h.hostname.clone(),
        macs: h.macs.clone(),
        ips: h.static_ips.iter().map(ToString::to_string).collect(),
        network: if h.static_ips.is_empty() {
            "dhcp".into()
        } else {
            "static".into()
        },
    }
}

/// `--dir`: created (0700) when missing, must be a writable directory. Never chmod-ed.
fn prepare_dir(dir: &Path) -> Result<()> {
    if !dir.exists() {
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)
            .map_err(|e| dir_error(dir, e))?;
    }
    probe_dir(dir, dir)
}

/// The nodes config and, for a file, its parse errors (validated together with the rest:
/// [`nodes_config::parse_partial`]).
fn read_nodes_config(source: &NodesSource) -> Result<(NodesConfig, Vec<nodes_config::FieldError>)> {
    let cwd = std::env::current_dir().map_err(|e| Error::Io {
        path: ".".into(),
        source: e,
    })?;
    let (path, field) = match source {
        NodesSource::Flags(f) => return Ok((nodes_config::from_flags(f, &cwd)?, Vec::new())),
        NodesSource::File { path, field } => (path, *field),
    };
    let text = crate::files::read_input_file(path, crate::files::MAX_NODES_CONFIG, field).map_err(|e| {
        invalid(
            field,
            format!(
                "{e}; write the hosts there (see --help for the format), pass --nodes-config FILE, or give one host with --mac-address"
            ),
        )
    })?;
    Ok(nodes_config::parse_partial(&text, path)?)
}

/// `--pool NAME` must name an existing MachineConfigPool (else the node would fetch
/// `/config/NAME` from the MCS and fail after the reboot).
async fn check_pool(target: &KubeTarget, pool: &str, warnings: &mut Vec<String>) -> Result<()> {
    use kube::core::{ApiResource, DynamicObject, GroupVersionKind};
    let ar = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("machineconfiguration.openshift.io", "v1", "MachineConfigPool"),
        "machineconfigpools",
    );
    let api: Api<DynamicObject> = Api::all_with(target.client.clone(), &ar);
    match api.get(pool).await {
        Ok(obj) => flag_checks::check_pool_object(pool, &obj.data),
        Err(e) => match classify(e, "read", ResourceRef::cluster("MachineConfigPool", pool), target) {
            Error::NotFound { .. } => Err(invalid("--pool", format!("MachineConfigPool {pool:?} does not exist; create it first, or leave --pool out for worker"))),
            e @ (Error::Unreachable { .. } | Error::Unauthorized { .. }) => Err(e),
            other => {
                let w = format!("cannot check that MachineConfigPool {pool:?} exists: {other}");
                crate::say!("warning: {w}");
                warnings.push(w);
                Ok(())
            }
        },
    }
}

/// Maps ISO errors: problems of the base image or the request are invalid input (exit 3),
/// naming the base ISO; I/O is exit 1 with the path.
fn iso_error(e: IsoError, base: Option<&BaseIsoFile>) -> Error {
    let field = match base {
        Some(b) if b.source == base_iso::Source::File => format!("--base-iso {}", b.path.display()),
        Some(b) => format!("base ISO {}", b.path.display()),
        None => "output".into(),
    };
    match e {
        IsoError::Io { context, source } => match flag_checks::out_of_space(&context, &source) {
            Some(e) => e,
            None => Error::Io {
                path: context,
                source,
            },
        },
        IsoError::AlreadyExists { path } => invalid(
            path.display().to_string(),
            "already exists; remove it, choose another --dir, or pass --force to replace it",
        ),
        IsoError::KargsTooLong { .. } | IsoError::NoKargAreas { .. } => invalid("--karg", e.to_string()),
        other => invalid(field, other.to_string()),
    }
}

/// The "does not fit" error: both sizes, the largest contributor, and `--pxe`.
fn too_large(ign: &ignition_config::v3_2::Config, archive: usize, area: u64, file: Option<&str>) -> Error {
    let top = ignition::contributors(ign);
    let largest = top
        .first()
        .map(|(p, n)| {
            format!(
                "; the largest contributor is {p} ({n} bytes of the {} bytes of config)",
                ignition::to_json(ign).len()
            )
        })
        .unwrap_or_default();
    invalid(
        "Ignition",
        format!(
            "the compressed Ignition archive is {archive} bytes but the ISO's embed area{} holds {area} bytes{largest}; add fewer hosts per image, trim large CA bundles or NMState, or use --pxe, which has no such limit",
            file.map(|f| format!(" ({f})")).unwrap_or_default()
        ),
    )
}

/// Reads the batch records and applies [`batch_overlaps`]: owned MACs are an error
/// ([`Error::InvalidConfig`] naming each field, exit 3; `source` names the nodes config, and
/// for hosts from flags the field is `--mac-address`), the overlaps are warned about, and the
/// batches this run replaces are returned. The batch list is otherwise a courtesy check: when
/// it cannot be read, a warning says so and nothing is checked or replaced.
async fn earlier_batches(
    target: &KubeTarget,
    plan: &Plan,
    model: &ClusterModel,
    hosts: &[ValidatedHost],
    (source, from_flags): (&str, bool),
    now: SystemTime,
    warnings: &mut Vec<String>,
) -> Result<Vec<String>> {
    let records = match batch::list(target).await {
        Ok(r) => r,
        Err(e) => {
            warn(
                format!("cannot check the earlier batch records for these hosts: {e}"),
                warnings,
            );
            return Ok(Vec::new());
        }
    };
    let nodes: BTreeSet<String> = model.nodes.iter().map(|n| n.name.to_ascii_lowercase()).collect();
    let o = batch_overlaps(hosts, records.iter().map(|(r, _)| r), now, &nodes, &plan.reimage);
    if !o.errors.is_empty() {
        let errors = o
            .errors
            .into_iter()
            .map(|mut e| {
                if from_flags {
                    e.path = "--mac-address".into();
                }
                e
            })
            .collect();
        return Err(Error::InvalidConfig(nodes_config::ConfigErrors {
            source: source.to_string(),
            errors,
        }));
    }
    for w in o.warnings {
        warn(w, warnings);
    }
    Ok(o.replaced)
}

/// What the earlier batch records say about this run's hosts.
#[derive(Debug, Default, PartialEq)]
struct Overlaps {
    /// MACs that belong to a node that already joined (a batch, expired or not, lists the MAC
    /// for a hostname that is a Node now) or to a host of another unexpired batch, for hosts
    /// `--reimage` does not name: one machine would become two nodes, or be expected by two
    /// batches. Field paths `hosts[i].interfaces[j].macAddress`.
    errors: Vec<nodes_config::FieldError>,
    /// Hosts that another unexpired batch already expects by hostname only (a name given
    /// twice), and the owned MACs that `--reimage` allows.
    warnings: Vec<String>,
    /// Unexpired batches that this run replaces: each lists exactly this run's hosts (same
    /// hostnames, same MACs) and has no approval recorded. A re-run for the same hosts (new
    /// tokens, another output, a lost image) thus leaves one batch, not a pile of them whose
    /// oldest `approve` would go by.
    replaced: Vec<String>,
}

/// Whether `r` lists exactly `hosts`: the same hostnames, each with the same MACs (any case,
/// any order).
fn same_hosts(r: &BatchRecord, hosts: &[ValidatedHost]) -> bool {
    let set =
        |it: &mut dyn Iterator<Item = (&String, &Vec<String>)>| -> BTreeSet<(String, BTreeSet<String>)> {
            it.map(|(h, m)| (h.clone(), m.iter().map(|m| m.to_ascii_lowercase()).collect()))
                .collect()
        };
    r.hosts.len() == hosts.len()
        && set(&mut r.hosts.iter().map(|h| (&h.hostname, &h.macs)))
            == set(&mut hosts.iter().map(|h| (&h.hostname, &h.macs)))
}

/// The overlaps of this run's `hosts` with the batch `records` at `now` (pure), given the
/// names of the cluster's Nodes (`nodes`) and the hosts `--reimage` names: unexpired batches
/// listing exactly these hosts with no approval are replaced (see [`Overlaps`]); a MAC that a
/// joined node or another unexpired batch owns is an error, or a warning with `--reimage`; a
/// hostname another unexpired batch lists with other MACs is a warning.
fn batch_overlaps<'a>(
    hosts: &[ValidatedHost],
    records: impl Iterator<Item = &'a BatchRecord>,
    now: SystemTime,
    nodes: &BTreeSet<String>,
    reimage: &BTreeSet<String>,
) -> Overlaps {
    let mut out = Overlaps::default();
    let joined = |name: &str| nodes.contains(&name.to_ascii_lowercase());
    let mut seen_joined: BTreeSet<(String, String)> = BTreeSet::new();
    // The --reimage hosts that some overlap made use of; the others are reported at the end.
    let mut reimage_used: BTreeSet<&str> = BTreeSet::new();
    for r in records {
        let live = auth::parse_rfc3339(&r.token_expires_at).is_none_or(|t| t > now);
        if live && r.approvals.is_empty() && same_hosts(r, hosts) {
            out.replaced.push(r.name.clone());
            continue;
        }
        for (i, h) in hosts.iter().enumerate() {
            let again = reimage.contains(&h.hostname);
            for old in &r.hosts {
                let owned = h
                    .macs
                    .iter()
                    .enumerate()
                    .find(|(_, m)| old.macs.iter().any(|o| o.eq_ignore_ascii_case(m)));
                let Some((j, m)) = owned else {
                    if live && old.hostname == h.hostname {
                        out.warnings.push(format!(
                            "hostname {} is already in batch {} (tokens valid until {}): if this replaces it, delete it with `oc agent-day2 add-nodes batch delete {}`; approve checks a node's CSRs against every batch that expects it",
                            h.hostname, r.name, r.token_expires_at, r.name
                        ));
                    }
                    continue;
                };
                let path = format!("hosts[{i}].interfaces[{j}].macAddress");
                if old.hostname != h.hostname && joined(&old.hostname) {
                    if !seen_joined.insert((m.clone(), old.hostname.clone())) {
                        continue;
                    }
                    if again {
                        reimage_used.insert(&h.hostname);
                        out.warnings.push(format!(
                            "MAC {m} of {} belongs to node {}, which already joined (batch {}); --reimage {}: the machine is re-imaged on purpose, delete Node {} once it no longer runs it",
                            h.hostname, old.hostname, r.name, h.hostname, old.hostname
                        ));
                    } else {
                        out.errors.push(nodes_config::FieldError {
                            path,
                            message: format!(
                                "\"{m}\" belongs to node {}, which already joined the cluster (batch {}): an image for {} would make a second node of that machine; if it is being re-imaged on purpose, pass --reimage {} (and delete Node {} once it no longer runs it)",
                                old.hostname, r.name, h.hostname, h.hostname, old.hostname
                            ),
                        });
                    }
                } else if live {
                    let what = if old.hostname == h.hostname {
                        format!("{} ({m})", h.hostname)
                    } else {
                        format!("MAC {m} of {} (as {})", h.hostname, old.hostname)
                    };
                    if again {
                        reimage_used.insert(&h.hostname);
                        out.warnings.push(format!(
                            "{what} is already in batch {} (tokens valid until {}); --reimage {}: the machine is re-imaged on purpose; approve checks a node's CSRs against every batch that expects it",
                            r.name, r.token_expires_at, h.hostname
                        ));
                    } else {
                        out.errors.push(nodes_config::FieldError {
                            path,
                            message: format!(
                                "\"{m}\" is already the MAC of {} in batch {} (tokens valid until {}): one machine would be expected by two batches; delete that batch first (`oc agent-day2 add-nodes batch delete {}`), or pass --reimage {} if the machine is being re-imaged on purpose",
                                old.hostname, r.name, r.token_expires_at, r.name, h.hostname
                            ),
                        });
                    }
                }
            }
        }
    }
    for n in reimage.iter().filter(|n| !reimage_used.contains(n.as_str())) {
        out.warnings.push(format!(
            "--reimage {n}: no joined node and no other live batch owns a MAC of {n}, so there is nothing to allow and the option has no effect; check the hostname and MACs if you expected one"
        ));
    }
    out
}

/// After the new files are in place: deletes the batch records this run replaces; returns
/// those deleted. A failure is a warning naming the command that finishes the job.
async fn delete_replaced(
    target: &KubeTarget,
    replaced: &[String],
    warnings: &mut Vec<String>,
) -> Vec<String> {
    let mut deleted = Vec::new();
    for name in replaced {
        match batch::delete(target, name).await {
            Ok(()) => deleted.push(name.clone()),
            Err(e) => warn(
                format!("could not delete batch {name}, which this run replaces: {e}; delete it with `oc agent-day2 add-nodes batch delete {name}`"),
                warnings,
            ),
        }
    }
    deleted
}

/// The size a dry run's file would have: an ISO is as large as its base (embedding changes
/// no size); 0 when the base ISO is not at hand or the size is only known once written (PXE
/// files, config image).
fn dry_run_size(kind: OutputKind, base: Option<&BaseIsoFile>) -> u64 {
    match (kind, base) {
        (OutputKind::Iso, Some(b)) => b.size,
        _ => 0,
    }
}

/// The Ignition's files as the dry run lists them: path, mode, bytes, and the contents of
/// non-secret files that are worth reviewing (NetworkManager keyfiles; their secret values,
/// e.g. Wi-Fi keys, redacted by [`ignition::redacted`]).
fn ignition_listing(ign: &ignition_config::v3_2::Config) -> Vec<report::IgnitionFile> {
    let shown: BTreeMap<String, String> = redacted_files(ign);
    ignition::files(ign)
        .into_iter()
        .map(|(path, data, mode)| report::IgnitionFile {
            secret: mode & 0o077 == 0 && !path.ends_with(".nmconnection"),
            contents: path
                .ends_with(".nmconnection")
                .then(|| shown.get(&path).cloned().unwrap_or_default()),
            path,
            mode: format!("{:04o}", mode),
            bytes: data.len(),
        })
        .collect()
}

/// Path → contents of every file as [`ignition::redacted`] shows them.
fn redacted_files(ign: &ignition_config::v3_2::Config) -> BTreeMap<String, String> {
    let v: serde_json::Value = serde_json::from_str(&ignition::redacted(ign)).unwrap_or_default();
    v["storage"]["files"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|f| {
            let path = f["path"].as_str()?.to_string();
            let src = f["contents"]["source"].as_str()?;
            let data = ignition::decode_data_url(src)?;
            Some((path, String::from_utf8_lossy(&data).into_owned()))
        })
        .collect()
}

/// Removes every `null` from a JSON value (the Ignition types serialise unset fields as null:
/// `"gecos": null` noise in a document meant for reading).
fn drop_nulls(v: &mut serde_json::Value) {
    match v {
        serde_json::Value::Object(m) => {
            m.retain(|_, x| !x.is_null());
            m.values_mut().for_each(drop_nulls);
        }
        serde_json::Value::Array(a) => a.iter_mut().for_each(drop_nulls),
        _ => {}
    }
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct DryRunDoc<'a> {
    #[serde(flatten)]
    report: &'a AddNodesReport,
    /// The Ignition config with every secret file's contents replaced by `<redacted>` and no
    /// null fields.
    ignition: serde_json::Value,
}

fn dry_run_output(
    format: OutputFormat,
    rep: &AddNodesReport,
    ign: &ignition_config::v3_2::Config,
) -> Result<String> {
    let red = ignition::redacted(ign);
    let mut ignition: serde_json::Value = serde_json::from_str(&red).unwrap_or(serde_json::Value::Null);
    drop_nulls(&mut ignition);
    let doc = DryRunDoc {
        report: rep,
        ignition,
    };
    output::render(format, &doc, || {
        let mut s = report::render_table(rep);
        s.push_str("\nDry run: nothing was written (no file, no Secret, no batch record). The whole Ignition (secrets redacted): -o json or -o yaml.\n");
        s
    })
}

/// Status of each expected host: `Ready`, `NotReady` (a Node of that name exists), `not
/// joined`, or `unknown` when Nodes cannot be listed.
fn node_states(nodes: Option<&[k8s_openapi::api::core::v1::Node]>) -> impl Fn(&str) -> String + '_ {
    move |name: &str| match nodes {
        None => "unknown".into(),
        Some(list) => match list.iter().find(|n| n.metadata.name.as_deref() == Some(name)) {
            None => "not joined".into(),
            Some(n) => {
                let ready = n
                    .status
                    .as_ref()
                    .and_then(|s| s.conditions.as_ref())
                    .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"));
                if ready {
                    "Ready".into()
                } else {
                    "NotReady".into()
                }
            }
        },
    }
}

/// `worker-0 192.168.111.30` or `worker-1 (DHCP)`.
fn host_display(h: &BatchHost) -> String {
    if h.ips.is_empty() {
        format!("{} (DHCP)", h.hostname)
    } else {
        format!("{} {}", h.hostname, h.ips.join(","))
    }
}

/// A host of a deleted batch that other batches still list.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
struct StillExpected {
    /// The deleted batch.
    batch: String,
    /// The host.
    hostname: String,
    /// The remaining batches that list it (oldest first).
    by: Vec<String>,
}

/// For the batches `deleted` out of `before` (every record before the delete, oldest first):
/// their hosts that a remaining batch still lists (pure). `approve` and `monitor` keep
/// expecting those, by the remaining batch's record.
fn still_expected(before: &[BatchRecord], deleted: &[String]) -> Vec<StillExpected> {
    let remaining: Vec<&BatchRecord> = before.iter().filter(|r| !deleted.contains(&r.name)).collect();
    let mut out = Vec::new();
    for r in before.iter().filter(|r| deleted.contains(&r.name)) {
        for h in &r.hosts {
            let by: Vec<String> = remaining
                .iter()
                .filter(|o| o.hosts.iter().any(|x| x.hostname == h.hostname))
                .map(|o| o.name.clone())
                .collect();
            if !by.is_empty() {
                out.push(StillExpected {
                    batch: r.name.clone(),
                    hostname: h.hostname.clone(),
                    by,
                });
            }
        }
    }
    out
}

/// The line `batch delete` prints for the deleted batch `name`: which hosts approve and monitor
/// no longer expect, and which another batch still lists (pure).
fn delete_message(name: &str, before: Option<&[BatchRecord]>, still: &[StillExpected]) -> String {
    const GONE: &str =
        "(an image made for it still boots until its tokens expire, but its nodes' CSRs are not approved)";
    let mine: Vec<&StillExpected> = still.iter().filter(|s| s.batch == name).collect();
    if mine.is_empty() {
        return format!("batch {name} deleted: approve and monitor no longer expect its nodes {GONE}\n");
    }
    let kept = mine
        .iter()
        .map(|s| format!("{} (batch {})", s.hostname, s.by.join(", batch ")))
        .collect::<Vec<_>>()
        .join(", ");
    let gone: Vec<String> = before
        .and_then(|b| b.iter().find(|r| r.name == name))
        .map(|r| {
            r.hosts
                .iter()
                .filter(|h| !mine.iter().any(|s| s.hostname == h.hostname))
                .map(|h| h.hostname.clone())
                .collect()
        })
        .unwrap_or_default();
    if gone.is_empty() {
        format!("batch {name} deleted: its hosts are still expected by another batch: {kept}; approve and monitor go by that batch's record\n")
    } else {
        format!(
            "batch {name} deleted: approve and monitor no longer expect {} {GONE}; still expected by another batch: {kept}\n",
            gone.join(", ")
        )
    }
}

/// `add-nodes batch [list|delete NAME...]`.
async fn batch_command(target: &KubeTarget, b: &BatchArgs) -> Result<String> {
    match &b.command {
        None | Some(BatchCommand::List { .. }) => {
            let format = match &b.command {
                Some(BatchCommand::List { output: Some(o) }) => *o,
                _ => b.output,
            };
            let records: Vec<BatchRecord> = batch::list(target).await?.into_iter().map(|(r, _)| r).collect();
            let nodes_api: Api<k8s_openapi::api::core::v1::Node> = Api::all(target.client.clone());
            let nodes = match nodes_api.list(&Default::default()).await {
                Ok(l) => Some(l.items),
                Err(e) => {
                    let e = classify(e, "list", ResourceRef::cluster("Nodes", ""), target);
                    crate::say!("warning: the hosts' state is unknown: {e}");
                    None
                }
            };
            let state = node_states(nodes.as_deref());
            let now = SystemTime::now();
            #[derive(Serialize)]
            #[serde(rename_all = "camelCase")]
            struct HostState {
                hostname: String,
                /// `Ready`, `NotReady`, `not joined` or `unknown`.
                node: String,
            }
            #[derive(Serialize)]
            #[serde(rename_all = "camelCase")]
            struct Item<'a> {
                #[serde(flatten)]
                record: &'a BatchRecord,
                token_expired: bool,
                host_states: Vec<HostState>,
            }
            let items: Vec<Item<'_>> = records
                .iter()
                .map(|r| Item {
                    record: r,
                    token_expired: auth::parse_rfc3339(&r.token_expires_at).is_some_and(|t| t <= now),
                    host_states: r
                        .hosts
                        .iter()
                        .map(|h| HostState {
                            hostname: h.hostname.clone(),
                            node: state(&h.hostname),
                        })
                        .collect(),
                })
                .collect();
            #[derive(Serialize)]
            #[serde(rename_all = "camelCase")]
            struct BatchList<'a> {
                api_version: &'static str,
                kind: &'static str,
                items: &'a [Item<'a>],
            }
            let doc = BatchList {
                api_version: batch::API_VERSION,
                kind: "BatchList",
                items: &items,
            };
            output::render(format, &doc, || {
                if items.is_empty() {
                    return format!("No batch records in namespace {}.\n", batch::NAMESPACE);
                }
                let mut rows = Vec::new();
                for it in &items {
                    let r = it.record;
                    let expires = if it.token_expired {
                        format!("{} (expired)", r.token_expires_at)
                    } else {
                        r.token_expires_at.clone()
                    };
                    for (i, (h, st)) in r.hosts.iter().zip(&it.host_states).enumerate() {
                        let first = i == 0;
                        let pick = |v: String| if first { v } else { String::new() };
                        rows.push(vec![
                            pick(r.name.clone()),
                            pick(r.created_at.clone()),
                            pick(r.created_by.clone()),
                            pick(format!("{}/{}", r.architecture, r.pool)),
                            host_display(h),
                            st.node.clone(),
                            pick(expires.clone()),
                            pick(r.output_kind.clone()),
                        ]);
                    }
                }
                output::table(
                    &[
                        "name",
                        "created",
                        "created by",
                        "arch/pool",
                        "host",
                        "node",
                        "token expires",
                        "output",
                    ],
                    rows,
                )
            })
        }
        Some(BatchCommand::Delete { names, output }) => {
            let format = output.unwrap_or(b.output);
            // The records before deleting, to say which hosts other batches still expect (None
            // when they cannot be listed: the plain message then).
            let before: Option<Vec<BatchRecord>> = batch::list(target)
                .await
                .ok()
                .map(|l| l.into_iter().map(|(r, _)| r).collect());
            let mut deleted = Vec::new();
            let mut errors = Vec::new();
            for name in names {
                match batch::delete(target, name).await {
                    Ok(()) => deleted.push(name.clone()),
                    Err(e) => errors.push(e),
                }
            }
            let still = before
                .as_deref()
                .map(|b| still_expected(b, &deleted))
                .unwrap_or_default();
            #[derive(Serialize)]
            #[serde(rename_all = "camelCase")]
            struct Deleted<'a> {
                api_version: &'static str,
                kind: &'static str,
                deleted: &'a [String],
                /// Hosts of a deleted batch that another batch still lists.
                #[serde(skip_serializing_if = "<[StillExpected]>::is_empty")]
                still_expected: &'a [StillExpected],
                errors: Vec<String>,
            }
            let doc = Deleted {
                api_version: batch::API_VERSION,
                kind: "BatchDeleteResult",
                deleted: &deleted,
                still_expected: &still,
                errors: errors.iter().map(ToString::to_string).collect(),
            };
            let out = output::render(format, &doc, || {
                deleted
                    .iter()
                    .map(|n| delete_message(n, before.as_deref(), &still))
                    .collect()
            })?;
            if errors.is_empty() {
                Ok(out)
            } else {
                // What was deleted is reported on stdout before the errors go to stderr.
                if !deleted.is_empty() || format != OutputFormat::Table {
                    output::emit(&out);
                }
                Err(if errors.len() == 1 {
                    errors.remove(0)
                } else {
                    Error::Many(errors)
                })
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn earlier_unexpired_batches_with_the_same_host_warn() {
        let host = ValidatedHost {
            hostname: "worker-0".into(),
            macs: vec!["52:54:00:aa:00:30".into()],
            ..Default::default()
        };
        let rec = |name: &str, exp: &str, hn: &str, mac: &str| BatchRecord {
            api_version: batch::API_VERSION.into(),
            kind: batch::KIND.into(),
            name: name.into(),
            created_at: "2026-11-29T00:00:00Z".into(),
            created_by: "a".into(),
            cluster_id: "c".into(),
            release_image: "r".into(),
            version: "4.18.1".into(),
            architecture: "x86_64".into(),
            pool: "worker".into(),
            node_labels: BTreeMap::new(),
            output_kind: "iso".into(),
            files: vec![],
            image_sha256: String::new(),
            token_expires_at: exp.into(),
            hosts: vec![BatchHost {
                hostname: hn.into(),
                macs: vec![mac.into()],
                ips: vec![],
                ip_source: "unknown".into(),
            }],
            approvals: vec![],
            reboots: vec![],
            embedded: 0,
        };
        let now = auth::parse_rfc3339("2026-11-29T12:00:00Z").unwrap();
        let recs = [
            rec("b-old", "2026-11-29T11:00:00Z", "worker-0", "52:54:00:aa:00:30"),
            rec("b-name", "2026-11-30T11:00:00Z", "worker-0", "52:54:00:aa:00:99"),
            rec("b-mac", "2026-11-30T11:00:00Z", "worker-9", "52:54:00:AA:00:30"),
            rec("b-other", "2026-11-30T11:00:00Z", "worker-5", "52:54:00:aa:00:55"),
        ];
        let none = BTreeSet::new();
        let o = batch_overlaps(std::slice::from_ref(&host), recs.iter(), now, &none, &none);
        assert!(o.replaced.is_empty(), "{o:?}");
        // The hostname alone is a warning; the MAC of another live batch's host an error
        // naming the batch; the expired batch and the unrelated one say nothing.
        assert_eq!(o.warnings.len(), 1, "{o:?}");
        assert!(
            o.warnings[0].starts_with("hostname worker-0 is already in batch b-name"),
            "{o:?}"
        );
        assert_eq!(o.errors.len(), 1, "{o:?}");
        assert_eq!(o.errors[0].path, "hosts[0].interfaces[0].macAddress");
        assert!(
            o.errors[0].message.starts_with("\"52:54:00:aa:00:30\" is already the MAC of worker-9 in batch b-mac (tokens valid until 2026-11-30T11:00:00Z)")
                && o.errors[0].message.contains("--reimage worker-0"),
            "{o:?}"
        );
        // --reimage worker-0: the same overlap is a warning.
        let again = BTreeSet::from(["worker-0".to_string()]);
        let o = batch_overlaps(std::slice::from_ref(&host), recs.iter(), now, &none, &again);
        assert!(o.errors.is_empty(), "{o:?}");
        assert!(
            o.warnings[1]
                .starts_with("MAC 52:54:00:aa:00:30 of worker-0 (as worker-9) is already in batch b-mac"),
            "{o:?}"
        );
        // worker-9 joined: the MAC belongs to that node, even by an expired batch.
        let nodes = BTreeSet::from(["worker-9".to_string()]);
        let mut expired = recs[2].clone();
        expired.token_expires_at = "2026-11-29T11:00:00Z".into();
        let o = batch_overlaps(std::slice::from_ref(&host), [expired].iter(), now, &nodes, &none);
        assert_eq!(o.errors.len(), 1, "{o:?}");
        assert!(
            o.errors[0].message.starts_with("\"52:54:00:aa:00:30\" belongs to node worker-9, which already joined the cluster (batch b-mac)"),
            "{o:?}"
        );
        let o = batch_overlaps(std::slice::from_ref(&host), recs.iter(), now, &nodes, &again);
        assert!(o.errors.is_empty(), "{o:?}");
        assert!(
            o.warnings
                .iter()
                .any(|w| w.starts_with("MAC 52:54:00:aa:00:30 of worker-0 belongs to node worker-9")),
            "{o:?}"
        );
        assert!(!o.warnings.iter().any(|w| w.starts_with("--reimage")), "{o:?}");
        // --reimage for a host nothing owns: said to have no effect.
        let o = batch_overlaps(std::slice::from_ref(&host), recs[3..].iter(), now, &none, &again);
        assert!(o.errors.is_empty(), "{o:?}");
        assert_eq!(
            o.warnings,
            ["--reimage worker-0: no joined node and no other live batch owns a MAC of worker-0, so there is nothing to allow and the option has no effect; check the hostname and MACs if you expected one"],
            "{o:?}"
        );
    }

    /// A record of `hosts` (hostname, MAC) expiring at `exp`.
    fn record(name: &str, exp: &str, hosts: &[(&str, &str)]) -> BatchRecord {
        BatchRecord {
            api_version: batch::API_VERSION.into(),
            kind: batch::KIND.into(),
            name: name.into(),
            created_at: "2026-11-29T00:00:00Z".into(),
            created_by: "a".into(),
            cluster_id: "c".into(),
            release_image: "r".into(),
            version: "4.18.1".into(),
            architecture: "x86_64".into(),
            pool: "worker".into(),
            node_labels: BTreeMap::new(),
            output_kind: "iso".into(),
            files: vec![],
            image_sha256: String::new(),
            token_expires_at: exp.into(),
            hosts: hosts
                .iter()
                .map(|(h, m)| BatchHost {
                    hostname: h.to_string(),
                    macs: vec![m.to_string()],
                    ips: vec![],
                    ip_source: "unknown".into(),
                })
                .collect(),
            approvals: vec![],
            reboots: vec![],
            embedded: 0,
        }
    }

    fn vhost(h: &str, mac: &str) -> ValidatedHost {
        ValidatedHost {
            hostname: h.into(),
            macs: vec![mac.into()],
            ..Default::default()
        }
    }

    #[test]
    fn dhcp_hosts_get_a_step_naming_them_and_how_to_give_their_addresses() {
        let mut st = vhost("worker-0", "52:54:00:aa:00:30");
        st.static_ips = vec!["192.168.111.30".parse().unwrap()];
        assert_eq!(dhcp_step(std::slice::from_ref(&st)), None);
        let one = dhcp_step(&[st.clone(), vhost("worker-1", "52:54:00:aa:00:31")]).unwrap();
        assert!(
            one.starts_with("DHCP host worker-1: give monitor its address")
                && one.contains("--ip-addresses IP")
                && one.contains("--node worker-1=IP")
                && one.ends_with("its client CSR stays held"),
            "{one}"
        );
        let two = dhcp_step(&[vhost("worker-1", "m1"), vhost("worker-2", "m2")]).unwrap();
        assert!(
            two.starts_with("DHCP hosts worker-1, worker-2: give monitor their addresses"),
            "{two}"
        );
        assert!(two.ends_with("their client CSRs stay held"), "{two}");
        // A big batch: five named, the rest counted (the line stays short).
        let many: Vec<ValidatedHost> = (0..2000).map(|i| vhost(&format!("w{i}"), "m")).collect();
        let step = dhcp_step(&many).unwrap();
        assert!(
            step.starts_with("DHCP hosts w0, w1, w2, w3, w4 and 1995 more: "),
            "{step}"
        );
        assert!(step.len() < 400, "{step}");
    }

    #[test]
    fn a_live_batch_of_exactly_these_hosts_without_approvals_is_replaced() {
        let now = auth::parse_rfc3339("2026-11-29T12:00:00Z").unwrap();
        let live = "2026-11-30T11:00:00Z";
        let hosts = [
            vhost("worker-0", "52:54:00:aa:00:30"),
            vhost("worker-1", "52:54:00:aa:00:31"),
        ];
        let same = record(
            "b-same",
            live,
            &[
                ("worker-1", "52:54:00:AA:00:31"),
                ("worker-0", "52:54:00:aa:00:30"),
            ],
        );
        let expired = record(
            "b-expired",
            "2026-11-29T11:00:00Z",
            &[
                ("worker-0", "52:54:00:aa:00:30"),
                ("worker-1", "52:54:00:aa:00:31"),
            ],
        );
        let subset = record("b-subset", live, &[("worker-0", "52:54:00:aa:00:30")]);
        let other_mac = record(
            "b-mac",
            live,
            &[
                ("worker-0", "52:54:00:aa:00:99"),
                ("worker-1", "52:54:00:aa:00:31"),
            ],
        );
        let mut approved = same.clone();
        approved.name = "b-approved".into();
        approved.approvals.push(batch::Approval {
            node: "worker-0".into(),
            kind: "client".into(),
            csr: "csr-1".into(),
            at: "2026-11-29T01:00:00Z".into(),
            by: "a".into(),
            csr_created: None,
            requester: None,
        });
        let recs = [same, expired, subset, other_mac, approved];
        let none = BTreeSet::new();
        let o = batch_overlaps(&hosts, recs.iter(), now, &none, &none);
        assert_eq!(o.replaced, ["b-same"], "{o:?}");
        // The others stay, their shared MACs named (the expired one says nothing).
        let said = |name: &str| {
            o.errors
                .iter()
                .map(|e| &e.message)
                .chain(&o.warnings)
                .any(|m| m.contains(&format!("batch {name} ")))
        };
        for name in ["b-subset", "b-mac", "b-approved"] {
            assert!(said(name), "{name}: {o:?}");
        }
        assert!(!said("b-same") && !said("b-expired"), "{o:?}");
    }

    #[test]
    fn batch_delete_says_which_hosts_another_batch_still_expects() {
        let live = "2026-11-30T11:00:00Z";
        let before = [
            record("b-1", live, &[("worker-0", "m0"), ("worker-1", "m1")]),
            record("b-2", live, &[("worker-0", "m0")]),
            record("b-3", live, &[("worker-5", "m5")]),
        ];
        let deleted = ["b-1".to_string(), "b-3".to_string()];
        let still = still_expected(&before, &deleted);
        assert_eq!(
            still,
            [StillExpected {
                batch: "b-1".into(),
                hostname: "worker-0".into(),
                by: vec!["b-2".into()]
            }]
        );
        let m = delete_message("b-1", Some(&before), &still);
        assert!(
            m.starts_with("batch b-1 deleted: approve and monitor no longer expect worker-1 (")
                && m.ends_with("; still expected by another batch: worker-0 (batch b-2)\n"),
            "{m}"
        );
        let m = delete_message("b-3", Some(&before), &still);
        assert!(
            m.starts_with("batch b-3 deleted: approve and monitor no longer expect its nodes"),
            "{m}"
        );
        // Deleting b-2 alone: its only host is still in b-1.
        let still = still_expected(&before, &["b-2".to_string()]);
        let m = delete_message("b-2", Some(&before), &still);
        assert_eq!(
            m,
            "batch b-2 deleted: its hosts are still expected by another batch: worker-0 (batch b-1); approve and monitor go by that batch's record\n"
        );
        // Both batches of worker-0 deleted: nobody expects it any more.
        assert!(still_expected(&before, &["b-1".to_string(), "b-2".to_string()]).is_empty());
    }

    #[test]
    fn pxe_next_steps_match_what_is_written() {
        let n = OutputNames::new(Path::new("out"), OutputKind::Pxe, "x86_64", None);
        let with = next_steps(OutputKind::Pxe, &n, "x86_64", "T", Some("http://h/pxe"), false);
        assert!(
            with[0].contains("node.x86_64.ipxe") && with[0].contains("http://h/pxe"),
            "{with:?}"
        );
        let without = next_steps(OutputKind::Pxe, &n, "x86_64", "T", None, false);
        assert!(without[0].contains("no .ipxe script was written"), "{without:?}");
        assert!(
            without[1].contains("mode 0600") && without[1].contains("install -m 0640"),
            "{without:?}"
        );
        assert!(without[3].contains("monitor --approve") && without[3].contains("approve --watch"));
    }

    #[test]
    fn a_dry_runs_next_step_names_what_a_real_run_writes() {
        let n = OutputNames::new(Path::new("out"), OutputKind::Iso, "x86_64", None);
        let real = next_steps(OutputKind::Iso, &n, "x86_64", "T", None, false);
        assert!(
            real[0].starts_with("boot out/node.x86_64.iso on the hosts"),
            "{real:?}"
        );
        let dry = next_steps(OutputKind::Iso, &n, "x86_64", "T", None, true);
        assert_eq!(
            dry[0],
            "nothing was written: run again without --dry-run to write out/node.x86_64.iso; then boot that file on the hosts (virtual media, USB or a CD)"
        );
        let n = OutputNames::new(Path::new("out"), OutputKind::ConfigImage, "x86_64", None);
        let dry = next_steps(OutputKind::ConfigImage, &n, "x86_64", "T", None, true);
        assert!(
            dry[0].contains("to write out/agentconfig.noarch.iso; then attach that file"),
            "{dry:?}"
        );
        let n = OutputNames::new(Path::new("out"), OutputKind::Pxe, "x86_64", None);
        let dry = next_steps(OutputKind::Pxe, &n, "x86_64", "T", None, true);
        assert!(
            dry[0].contains("to write out/boot-artifacts/node.x86_64-initrd.img, ")
                && dry[0].contains("no .ipxe script would be written"),
            "{dry:?}"
        );
    }

    #[test]
    fn output_names() {
        let n = OutputNames::new(Path::new("out"), OutputKind::Iso, "x86_64", None);
        assert_eq!(n.finals(), [PathBuf::from("out/node.x86_64.iso")]);
        let n = OutputNames::new(Path::new("out"), OutputKind::ConfigImage, "x86_64", None);
        assert_eq!(n.finals(), [PathBuf::from("out/agentconfig.noarch.iso")]);
        let n = OutputNames::new(Path::new("out"), OutputKind::Pxe, "aarch64", None);
        assert_eq!(
            n.finals()[0],
            PathBuf::from("out/boot-artifacts/node.aarch64-initrd.img")
        );
        assert!(n.staging_file(&n.finals()[0]).starts_with("out/boot-artifacts"));
    }
}
