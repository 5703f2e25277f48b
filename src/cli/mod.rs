//! Command line definitions (clap only; nothing here talks to a cluster).
//!
//! `kubectl` and `oc` exec this binary with the words after `agent-day2` and parse none of
//! them, so the plugin takes kubectl's connection flags itself ([`KubeFlags`], flattened
//! once at the root with `global = true`, so they work before or after the subcommand).
//! Usage text says `oc agent-day2`: the plugin cannot tell which of the two called it.

pub mod completion;
pub mod kube_flags;
pub mod migrate;
pub mod monitor;

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};

use crate::cli::kube_flags::KubeFlags;

/// Add worker nodes to an OpenShift cluster installed with the agent-based installer,
/// on day 2, without multicluster engine.
#[derive(Debug, Parser)]
#[command(
    name = "oc agent-day2",
    bin_name = "oc agent-day2",
    version,
    disable_version_flag = true,
    propagate_version = false,
    after_help = ROOT_AFTER
)]
pub struct Cli {
    /// kubectl's connection flags (global).
    #[command(flatten)]
    pub kube: KubeFlags,

    /// Log verbosity on stderr: 0 warnings, 1-2 info, 3-5 debug, 6+ trace (like kubectl -v).
    #[arg(short = 'v', long = "v", global = true, value_name = "N", default_value_t = 0)]
    pub verbosity: u8,

    #[command(subcommand)]
    pub command: Command,
}

const ROOT_AFTER: &str = "\
Examples:
  # What agent-day2 reads from the cluster, and which permissions you lack
  oc agent-day2 info

  # Make a node ISO for the hosts of nodes-config.yaml, then follow them until Ready
  oc agent-day2 add-nodes --nodes-config nodes-config.yaml --dir out
  oc agent-day2 monitor --approve --yes

  # Another context of the kubeconfig, with debug logs on stderr
  oc agent-day2 info --context admin -v 4

  # A lab cluster by address and token, its API certificate not checked
  oc agent-day2 info -s https://api.ostest.example.com:6443 --token \"$TOKEN\" \\
      --insecure-skip-tls-verify

Works as `oc agent-day2` and `kubectl agent-day2` (binary kubectl-agent_day2 on PATH).
Exit codes: 0 ok, 1 unexpected, 2 usage, 3 invalid input, 4 cluster access,
5 timed out, 6 install failed, 7 CSRs rejected or pending, 8 declined.";

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Show what agent-day2 reads from the cluster, whether the cluster can take day-2
    /// nodes, and which permissions you lack.
    #[command(long_about = INFO_LONG, after_help = INFO_AFTER)]
    Info(InfoArgs),
    /// Make what turns bare metal into workers of this cluster: a bootable node ISO, PXE
    /// files or an appliance config image, and a batch record of the expected nodes.
    #[command(long_about = ADD_NODES_LONG, after_help = ADD_NODES_AFTER)]
    AddNodes(Box<AddNodesArgs>),
    /// Print the plugin's version and build, the Kubernetes API version it was built against,
    /// and the OpenShift versions it supports.
    #[command(after_help = VERSION_AFTER)]
    Version(VersionArgs),
    /// Verify the expected nodes' kubelet CSRs against a strict checklist and approve only
    /// the right ones (on a terminal after asking; --yes otherwise); --watch until all are Ready.
    #[command(long_about = APPROVE_LONG, after_help = APPROVE_AFTER)]
    Approve(ApproveArgs),
    /// Follow every expected node from boot to Ready with its serving certificate; exit 0 only
    /// when all of them got there.
    #[command(long_about = MONITOR_LONG, after_help = MONITOR_AFTER)]
    Monitor(Box<monitor::MonitorArgs>),
    /// Carry node 0's assisted-service data (database, CRs, credentials, logs) onto cluster 0:
    /// export on node 0, import on cluster 0, wait before node 0 reboots.
    Migrate(migrate::MigrateArgs),
    /// Print a shell completion script for kubectl-agent_day2 (bash, zsh, fish, powershell,
    /// elvish).
    #[command(after_help = COMPLETION_AFTER)]
    Completion(CompletionArgs),
    /// kubectl's plugin completion protocol (run by kubectl_complete-agent_day2): the words
    /// after the plugin name, the last one being completed; prints candidates and `:<directive>`.
    #[command(name = "__complete", hide = true)]
    Complete(CompleteArgs),
}

const COMPLETION_AFTER: &str = "\
Examples:
  # bash, for this shell session (completes kubectl-agent_day2 typed directly)
  source <(oc agent-day2 completion bash)

  # zsh, for every session
  oc agent-day2 completion zsh > \"${fpath[1]}/_kubectl-agent_day2\"

  # kubectl agent-day2 <TAB> (kubectl 1.26+): put the helper on PATH; batch and node names
  # are then completed from the current context (oc agent-day2 <TAB> does not complete: oc
  # runs no plugin completion helper)
  install -D -m 0755 scripts/kubectl_complete-agent_day2 ~/.local/bin/kubectl_complete-agent_day2";

/// Arguments of `completion`.
#[derive(Debug, Args)]
pub struct CompletionArgs {
    /// The shell to print the script for.
    #[arg(value_enum)]
    pub shell: clap_complete::Shell,
}

/// Arguments of the hidden `__complete`.
#[derive(Debug, Args)]
pub struct CompleteArgs {
    /// Words after the plugin name; the last one is the word under the cursor.
    #[arg(num_args = 0.., trailing_var_arg = true, allow_hyphen_values = true)]
    pub words: Vec<String>,
}

const MONITOR_LONG: &str = "\
Follow every node of the batch records (or --batch NAME, or the hosts at --ip-addresses /
--node NAME=IP) through: its live assisted-service API reachable (http://IP:8090, watcher token
from Secret openshift-config/agent-auth-token) -> host registered -> pre-flight validations
(each failing one with its message) -> installing (stage, percent) -> rebooting -> client CSR
pending -> node joined -> Ready -> serving CSR pending -> serving certificate issued. Node names
come from the batch records, not reverse DNS. A DHCP host's address is given with
--ip-addresses; when its assisted-service answers with the batch token and a MAC matches, the
address is recorded on the batch for `approve`. When a host's own assisted-service reports that
it left the installation for its reboot, that time is recorded on the batch too: `approve`
approves the host's client CSR only if made after it. Alarms (a possible impostor, a second
requester) are `alarm` lines/events. The batch's node labels are applied when the
Node appears. --approve approves the kubelet CSRs with every check of `approve`.

On a terminal: a live table, one row per node (NODE, IP, STAGE, DETAIL cut at the terminal's
width). Otherwise one line per change, or with -o json
one JSON event per line (kind MonitorEvent; the last one is the summary).

Exit status: 0 every node Ready with its serving certificate; 2 bad flags (--approve without
--yes when stdin is not a terminal); 4 cluster access; 5 timed out; 6 a node's installation
failed, was cancelled, or its token expired; 7 CSRs still pending at the end. When several
apply: 6 before 7 before 5 (a failed installation always shows).";

const MONITOR_AFTER: &str = "\
Examples:
  # Every node of every batch, approving their CSRs
  oc agent-day2 monitor --approve --yes

  # One batch only
  oc agent-day2 monitor --batch batch-20261129-211034-ab12

  # A DHCP host: its address is recorded on the batch once its MAC matches
  oc agent-day2 monitor --ip-addresses 192.168.111.31

  # A node by name and address
  oc agent-day2 monitor --node worker-1=192.168.111.31

  # Keep a failed node's logs; JSON events for a script
  oc agent-day2 monitor --gather ./logs -o json --timeout 2h

  # Hosts that rebooted before monitor looked (no reboot record): approve on the other checks
  oc agent-day2 monitor --approve --yes --trust-unverified-boot";

const APPROVE_LONG: &str = "\
Find the pending kubelet CSRs (signers kubernetes.io/kube-apiserver-client-kubelet and
kubernetes.io/kubelet-serving) of the nodes the batch records in namespace
openshift-agent-day2 expect, verify each against a strict checklist (x509-parser, signature,
key, subject, requester, usages, SANs against the expected addresses, batch window, one client
and one serving approval per node), show every verdict with all its reasons, and approve the
good ones through the /approval subresource, each recorded on its batch first. CSRs of other
signers are never touched. Rejected CSRs (REJECT) stay pending (or are denied with
--deny-invalid); held ones (HOLD: waiting for a reboot record, an address, or rivals sorted out)
stay pending and are judged again when that comes.

A client CSR is approved only when made after the host's own assisted-service reported its
reboot, as --watch (or monitor) records it: --watch follows each expected host with a known
address at http://IP:8090 while it installs (2 s of clock skew allowed); without a record,
only with --trust-unverified-boot. Of a re-keying kubelet's CSRs (a new key every 15 min) the
newest is approved; two closer together mean a second requester: all are held. A bootstrap
client CSR after a node's approved one is reported as a possible impostor (alarm:, -o json
alarms).

Exit status: 0 every expected node's CSRs approved or issued (--watch: every expected node
Ready with its serving certificate) and nothing rejected or held (denied counts as handled);
2 bad flags, or approving without --yes when stdin is not a terminal; 3 a --node/--nodes-config/
--reissue name no batch expects, or a batch record that does not parse (skipped, its hosts
held); 4 cluster access; 5 --timeout or the batch token expired
(--watch); 7 a CSR was rejected, is held or still pending; 8 declined at the prompt (nothing
changed). Alarms do not change the exit status: read them in -o json (alarms).";

const APPROVE_AFTER: &str = "\
Examples:
  # Show the verdicts, then ask before approving
  oc agent-day2 approve

  # Approve as the nodes come up, until each is Ready with its serving certificate
  oc agent-day2 approve --watch --yes --timeout 30m

  # Verdicts only, as JSON
  oc agent-day2 approve --dry-run -o json

  # One batch; deny its CSRs that fail a check
  oc agent-day2 approve --batch batch-20261129-211034-ab12 --yes --deny-invalid

  # A DHCP host's address (its serving CSR is not approved without it)
  oc agent-day2 approve --node worker-1=192.168.111.31

  # The static addresses of a nodes-config file
  oc agent-day2 approve --nodes-config nodes-config.yaml

  # One more client and serving approval for worker-0 within its batch (a machine re-installed
  # from a new image needs none: add-nodes --reimage makes a new batch, which starts afresh)
  oc agent-day2 approve --reissue worker-0 --yes

  # No monitor saw the hosts reboot and you checked them yourself: approve without that record
  oc agent-day2 approve --trust-unverified-boot --yes";

/// Arguments of `approve`.
#[derive(Debug, Args)]
pub struct ApproveArgs {
    /// Approve without asking; required when stdin is not a terminal.
    #[arg(short = 'y', long)]
    pub yes: bool,
    /// Show the verdicts only; change nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// Deny the rejected pending CSRs of expected nodes, with the reasons.
    #[arg(long)]
    pub deny_invalid: bool,
    /// Keep approving as CSRs arrive until every expected node is Ready with its serving
    /// certificate, --timeout, or the batch token expires.
    #[arg(short = 'w', long)]
    pub watch: bool,
    /// Give up watching after this long (exit 5), e.g. --timeout 30m.
    #[arg(long, value_name = "DURATION", default_value = "60m", requires = "watch", value_parser = monitor::duration_text)]
    pub timeout: String,
    /// Only the nodes of this batch record, e.g. --batch batch-20261129-211034-ab12.
    #[arg(long, value_name = "NAME", value_parser = monitor::parse_batch_name)]
    pub batch: Option<String>,
    /// Addresses of expected nodes from a nodes-config file (its static IPs), e.g.
    /// --nodes-config nodes-config.yaml.
    #[arg(long, value_name = "FILE")]
    pub nodes_config: Option<PathBuf>,
    /// An expected node's address(es) (repeatable), e.g. --node worker-1=192.168.111.31.
    #[arg(long = "node", value_name = "NAME=IP[,IP]", value_parser = monitor::parse_node_flag)]
    pub nodes: Vec<(String, Vec<std::net::IpAddr>)>,
    /// Allow one more client and serving approval for NODE within its batch (repeatable), e.g.
    /// --reissue worker-0. The client CSR must still come from a new install: a reboot recorded
    /// after the one approved before. A re-install from a new image (add-nodes --reimage NODE)
    /// needs no --reissue: its new batch's approvals start afresh.
    #[arg(long, value_name = "NODE", value_parser = monitor::parse_node_name)]
    pub reissue: Vec<String>,
    /// Approve client CSRs of hosts whose reboot no `monitor` recorded (no monitor ran while
    /// they installed, or a DHCP host without its address) on the other checks alone. Only
    /// after checking on the host's console that it rebooted into the installed system and that
    /// the CSR is its kubelet's: nothing then binds the CSR to the machine (each such approval
    /// is warned about).
    #[arg(long)]
    pub trust_unverified_boot: bool,
    /// How long a kubelet waits for its client CSR before it makes a new key and posts another
    /// (15m, the kubelet certificate manager's). approve tells a kubelet's own re-keyed CSR
    /// from a rival's by it; change it only for kubelets that retry sooner, e.g.
    /// --kubelet-retry 5m.
    #[arg(long, value_name = "DURATION", default_value = "15m", value_parser = monitor::duration_text)]
    pub kubelet_retry: String,
    /// Output format: a table with reason codes, -o wide with the SANs and every reason in
    /// full, or -o json (apiVersion agent-day2/v1, kind ApproveReport).
    #[arg(short = 'o', long = "output", value_enum, default_value_t = ApproveOutput::Table)]
    pub output: ApproveOutput,
}

/// `-o` values of `approve`: the common ones and `wide` (kubectl get's density: one line per
/// CSR, details on request).
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ApproveOutput {
    /// One line per CSR, reasons as codes.
    Table,
    /// The table with the SANs and every reason in full.
    Wide,
    /// One JSON document.
    Json,
    /// One YAML document.
    Yaml,
}

impl ApproveOutput {
    /// The document format ([`OutputFormat::Table`] for both tables).
    pub fn format(self) -> OutputFormat {
        match self {
            ApproveOutput::Table | ApproveOutput::Wide => OutputFormat::Table,
            ApproveOutput::Json => OutputFormat::Json,
            ApproveOutput::Yaml => OutputFormat::Yaml,
        }
    }

    /// Whether the table shows every detail.
    pub fn wide(self) -> bool {
        self == ApproveOutput::Wide
    }
}

const ADD_NODES_LONG: &str = "\
Make what turns bare metal into workers of this cluster, from the live cluster, on this
machine: the cluster's own RHCOS live ISO with the node's Ignition embedded (DIR/node.<arch>.iso),
or PXE files (--pxe), or an appliance config image (--config-image); and a batch record in
namespace openshift-agent-day2 that `approve` and `monitor` use.

Reads the cluster (as `info`), validates the nodes config against it (every error at once,
each naming its field), reuses the node tokens in Secret openshift-config/agent-auth-token (where
`oc adm node-image` keeps them) unless they expire within 24 h, last less than half of
--token-ttl or longer than an explicit one, or --new-token is given (then makes new ones), reads the
release payload's component images through the registry (the cluster's pull secret, mirrors
and CAs), takes the base ISO from --base-iso, the cache ($XDG_CACHE_HOME/agent-day2/isos,
sha256 checked on every use), the release's machine-os-images, or the coreos-bootimages stream
(downloaded once).

The files hold the cluster's pull secret and the node tokens: they are created with mode 0600
under a temporary name and never replace an existing file unless --force.

New tokens do not revoke older images: a booted node checks its tokens against the public key
inside its own image, so an image works until its tokens expire. To stop a lost image from
adding a node, delete its batch (`add-nodes batch delete`) and do not approve CSRs of nodes you
do not expect: a node joins only when its kubelet CSRs are approved.

A MAC that belongs to a node that already joined, or to a host of another unexpired batch, is
refused (exit 3, naming the node or batch) unless --reimage names the host.

Exit status: 0 written; 2 bad flags; 3 invalid nodes config or flag value, a MAC already owned
(see above), a base ISO that is not a CoreOS live ISO, an Ignition too large for the ISO (use
--pxe), an existing output without --force, an unwritable --dir; 4 cluster or registry access
(unreachable, forbidden, missing objects, OpenShift older than 4.18, unsupported platform).";

const ADD_NODES_AFTER: &str = "\
Examples:
  # Two hosts from a nodes-config file; writes ./out/node.x86_64.iso
  oc agent-day2 add-nodes --nodes-config nodes-config.yaml --dir out

  # One host from flags, static network from an NMState file
  oc agent-day2 add-nodes --mac-address 52:54:00:aa:00:30 --hostname worker-0 \\
      --network-config-path worker-0.nmstate.yaml --root-device-hint deviceName:/dev/sda

  # PXE files under out/boot-artifacts/ (no size limit on the Ignition)
  oc agent-day2 add-nodes --dir out --pxe

  # See what would be made, Ignition with secrets redacted; nothing is written
  oc agent-day2 add-nodes --dir out --dry-run -o yaml

  # An appliance config image with new node tokens, replacing the one made before
  oc agent-day2 add-nodes --dir out --config-image --output-name batch-2.iso --new-token --force

  # Through a mirror registry with its own credentials and a self-signed certificate
  oc agent-day2 add-nodes --dir out --registry-config ~/.docker/config.json --insecure

  # Batch records
  oc agent-day2 add-nodes batch list
  oc agent-day2 add-nodes batch delete batch-20261129-211034-ab12

nodes-config.yaml (as `oc adm node-image create` reads it):
  hosts:
  - hostname: worker-0
    rootDeviceHints: {deviceName: /dev/sda}
    interfaces: [{name: eth0, macAddress: 52:54:00:aa:00:30}]
    networkConfig: {interfaces: [{name: eth0, type: ethernet, state: up,
      ipv4: {enabled: true, dhcp: false, address: [{ip: 192.168.111.30, prefix-length: 24}]}}]}";

/// Arguments of `add-nodes` (or its `batch` subcommand).
#[derive(Debug, Args)]
#[command(args_conflicts_with_subcommands = true)]
pub struct AddNodesArgs {
    /// Batch records instead of making an image.
    #[command(subcommand)]
    pub command: Option<AddNodesCommand>,

    /// Directory for the output files (created 0700 if missing, never chmod-ed), e.g. --dir out.
    #[arg(long, value_name = "DIR", value_hint = clap::ValueHint::DirPath, default_value = ".")]
    pub dir: PathBuf,
    /// The hosts to add, e.g. --nodes-config nodes-config.yaml (default: DIR/nodes-config.yaml).
    // Every single-host flag conflicts: `requires = "mac_address"` alone does not fire once
    // --nodes-config (which conflicts with it) is given, so they were silently ignored.
    #[arg(
        long,
        value_name = "FILE",
        conflicts_with_all = ["mac_address", "hostname", "network_config_path", "root_device_hints", "cpu_architecture", "ssh_key_path"]
    )]
    pub nodes_config: Option<PathBuf>,
    /// One host from flags instead of a file: its MAC, e.g. --mac-address 52:54:00:aa:00:30.
    #[arg(long, value_name = "MAC", help_heading = "One host from flags")]
    pub mac_address: Option<String>,
    /// The host's name (the future Node name), e.g. --hostname worker-0.
    #[arg(
        long,
        value_name = "NAME",
        requires = "mac_address",
        help_heading = "One host from flags"
    )]
    pub hostname: Option<String>,
    /// NMState YAML of the host's network, e.g. --network-config-path worker-0.nmstate.yaml.
    #[arg(
        long,
        value_name = "FILE",
        requires = "mac_address",
        help_heading = "One host from flags"
    )]
    pub network_config_path: Option<PathBuf>,
    /// Root device hint KEY:VALUE (repeatable), e.g. --root-device-hint deviceName:/dev/sda.
    #[arg(
        long = "root-device-hint",
        value_name = "KEY:VALUE",
        requires = "mac_address",
        help_heading = "One host from flags"
    )]
    pub root_device_hints: Vec<String>,
    /// The host's CPU architecture, e.g. --cpu-architecture aarch64 (default: the control plane's).
    #[arg(
        long,
        value_name = "ARCH",
        requires = "mac_address",
        help_heading = "One host from flags"
    )]
    pub cpu_architecture: Option<String>,
    /// SSH public key file for user core, e.g. --ssh-key-path ~/.ssh/id_ed25519.pub.
    #[arg(
        long,
        value_name = "FILE",
        requires = "mac_address",
        help_heading = "One host from flags"
    )]
    pub ssh_key_path: Option<PathBuf>,

    /// Write PXE files to DIR/boot-artifacts/ instead of an ISO.
    #[arg(long, conflicts_with = "config_image")]
    pub pxe: bool,
    /// Where the PXE files will be served (HTTP/HTTPS): writes node.<arch>.ipxe and puts
    /// coreos.live.rootfs_url in the kernel arguments; overrides the nodes-config's
    /// bootArtifactsBaseURL, e.g. --boot-artifacts-base-url http://192.168.111.1:8000/pxe.
    #[arg(long, value_name = "URL", requires = "pxe")]
    pub boot_artifacts_base_url: Option<String>,
    /// Write an appliance config image DIR/agentconfig.noarch.iso instead of an ISO.
    #[arg(long)]
    pub config_image: bool,
    /// Use this RHCOS live ISO instead of fetching one, e.g. --base-iso rhcos-live.x86_64.iso.
    #[arg(long, value_name = "FILE")]
    pub base_iso: Option<PathBuf>,
    /// Extra kernel argument (repeatable), e.g. --karg console=ttyS0,115200.
    #[arg(long = "karg", value_name = "ARG")]
    pub kargs: Vec<String>,
    /// MachineConfigPool the hosts join, e.g. --pool infra (default worker).
    #[arg(long, value_name = "NAME")]
    pub pool: Option<String>,
    /// Lifetime of new node tokens (default 48h). Stored tokens are reused while they last at
    /// least 24 h more and at least half of this; given explicitly, also not longer than this
    /// (else new tokens are made), e.g. --token-ttl 72h.
    #[arg(long, value_name = "DURATION")]
    pub token_ttl: Option<String>,
    /// Make new node tokens now instead of reusing the stored ones; images made before keep
    /// working until their own tokens expire.
    #[arg(long)]
    pub new_token: bool,
    /// This host's machine is being re-imaged on purpose (repeatable): its MACs may belong to
    /// a node that already joined or to a host of another unexpired batch (else exit 3 naming
    /// the owner), e.g. --reimage worker-0.
    #[arg(long, value_name = "HOSTNAME")]
    pub reimage: Vec<String>,
    /// Labels for the nodes, saved on the batch record; `oc agent-day2 monitor` applies them
    /// when each Node appears, e.g. --node-labels zone=a,rack=r1.
    #[arg(long, value_name = "K=V,...")]
    pub node_labels: Option<String>,
    /// File name of the ISO or config image, e.g. --output-name batch-2.iso.
    #[arg(long, value_name = "NAME")]
    pub output_name: Option<String>,
    /// Replace existing output files.
    #[arg(long)]
    pub force: bool,
    /// Print the plan and the Ignition (secrets redacted); write nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// Registry credentials (dockerconfigjson) instead of the cluster's pull secret, e.g.
    /// --registry-config ~/.docker/config.json.
    #[arg(long, value_name = "FILE")]
    pub registry_config: Option<PathBuf>,
    /// Do not verify registry and download certificates (plain HTTP fallback).
    #[arg(long)]
    pub insecure: bool,
    /// Output format, e.g. -o json (apiVersion agent-day2/v1, kind AddNodesReport).
    #[arg(short = 'o', long = "output", value_enum, default_value_t = OutputFormat::Table)]
    pub output: OutputFormat,
}

/// Subcommands of `add-nodes`.
#[derive(Debug, Subcommand)]
pub enum AddNodesCommand {
    /// Show or remove batch records (namespace openshift-agent-day2).
    #[command(alias = "batches", after_help = BATCH_AFTER)]
    Batch(BatchArgs),
}

const BATCH_AFTER: &str = "\
Examples:
  # The batch records, oldest first (same as `batch list`)
  oc agent-day2 add-nodes batch

  # As YAML
  oc agent-day2 add-nodes batch -o yaml

  # Forget a batch: approve and monitor no longer expect its nodes
  oc agent-day2 add-nodes batch delete batch-20261129-211034-ab12";

const BATCH_LIST_AFTER: &str = "\
Examples:
  # Name, creation time, hosts and token expiry of each batch
  oc agent-day2 add-nodes batch list

  # Whole records as JSON
  oc agent-day2 add-nodes batch list -o json";

const BATCH_DELETE_AFTER: &str = "\
Examples:
  # Delete one batch record
  oc agent-day2 add-nodes batch delete batch-20261129-211034-ab12

  # Delete two, and print what was deleted as JSON
  oc agent-day2 add-nodes batch delete batch-20261129-211034-ab12 batch-20261130-090112-cd34 -o json";

/// Arguments of `add-nodes batch`.
#[derive(Debug, Args)]
pub struct BatchArgs {
    /// What to do (default: list).
    #[command(subcommand)]
    pub command: Option<BatchCommand>,
    /// Output format of the list, e.g. -o yaml.
    #[arg(short = 'o', long = "output", value_enum, default_value_t = OutputFormat::Table)]
    pub output: OutputFormat,
}

/// `add-nodes batch` subcommands.
#[derive(Debug, Subcommand)]
pub enum BatchCommand {
    /// List batch records, oldest first.
    #[command(alias = "ls", after_help = BATCH_LIST_AFTER)]
    List {
        /// Output format, e.g. -o json.
        #[arg(short = 'o', long = "output", value_enum)]
        output: Option<OutputFormat>,
    },
    /// Delete batch records: approve and monitor no longer expect their nodes.
    #[command(alias = "rm", after_help = BATCH_DELETE_AFTER)]
    Delete {
        /// The batch names (from `batch list`), e.g. batch-20261129-211034-ab12.
        #[arg(required = true, value_name = "NAME")]
        names: Vec<String>,
        /// Output format, e.g. -o json.
        #[arg(short = 'o', long = "output", value_enum)]
        output: Option<OutputFormat>,
    },
}

const INFO_LONG: &str = "\
Show what agent-day2 reads from the cluster and what add-nodes will use: cluster ID, name,
base domain, API URLs, version and release image, platform, architecture, machine networks,
Machine Config Server endpoint, base ISO, proxy, trust bundle, mirrors, FIPS, SSH key, cluster
and service networks, existing nodes, and the permissions add-nodes/approve/monitor need that
you lack (checked with SelfSubjectAccessReviews, nothing is written).

A fact whose object you may not read is shown as `unknown (cannot read ...)` (-o json|yaml:
null, and the object named in `unreadable`), never as none; add-nodes cannot go on then.
Each request has a 30 s deadline unless --request-timeout is given (0 = no limit).

Exit status:
  0  the report was printed and the cluster can take day-2 nodes (missing permissions are
     listed but do not change the status)
  4  a read failed (forbidden, missing object, server error: each message names it), or the
     cluster cannot take day-2 nodes (OpenShift older than 4.18, a platform other than
     baremetal, none, external, vsphere, no Machine Config Server CA): the report with what
     could be read is printed first (unknown facts marked; -o json|yaml: the document with
     `errors`), then one `error:` line per reason; unreachable or unauthorized: no report
  5  a request timed out (the message names it)";

const INFO_AFTER: &str = "\
Examples:
  # The report as a table
  oc agent-day2 info

  # As YAML, for a script or a support case
  oc agent-day2 info -o yaml

  # A slow API server: 2 minutes for each read instead of 30 s
  oc agent-day2 info --request-timeout 2m";

const VERSION_AFTER: &str = "\
Examples:
  # Version, git commit, build date, client types and supported Kubernetes and OpenShift
  oc agent-day2 version

  # As JSON (apiVersion agent-day2/v1, kind Version)
  oc agent-day2 version -o json";

/// Arguments of `info`.
#[derive(Debug, Args)]
pub struct InfoArgs {
    /// Output format: table, or a stable json/yaml document (apiVersion agent-day2/v1, kind
    /// ClusterInfo), e.g. -o yaml.
    #[arg(short = 'o', long = "output", value_enum, default_value_t = OutputFormat::Table)]
    pub output: OutputFormat,
}

/// Arguments of `version`.
#[derive(Debug, Args)]
pub struct VersionArgs {
    /// Output format, e.g. -o json (apiVersion agent-day2/v1, kind Version).
    #[arg(short = 'o', long = "output", value_enum, default_value_t = OutputFormat::Table)]
    pub output: OutputFormat,
}

pub use crate::output::OutputFormat;

/// `-o table|json|yaml` on the command line (the type itself is [`crate::output`]'s, below
/// every command; clap's side of it is here, with the other clap types).
impl ValueEnum for OutputFormat {
    fn value_variants<'a>() -> &'a [Self] {
        &[OutputFormat::Table, OutputFormat::Json, OutputFormat::Yaml]
    }

    fn to_possible_value(&self) -> Option<clap::builder::PossibleValue> {
        use clap::builder::PossibleValue as V;
        Some(match self {
            OutputFormat::Table => V::new("table").help("Human-readable tables"),
            OutputFormat::Json => V::new("json").help("One JSON document"),
            OutputFormat::Yaml => V::new("yaml").help("One YAML document"),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn clap_definition_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn kube_flags_work_before_and_after_the_subcommand() {
        let a = Cli::try_parse_from(["x", "--context", "c1", "info", "-n", "ns", "--token=t"]).unwrap();
        assert_eq!(a.kube.context.as_deref(), Some("c1"));
        assert_eq!(a.kube.namespace.as_deref(), Some("ns"));
        assert_eq!(a.kube.token.as_deref(), Some("t"));
        let b = Cli::try_parse_from(["x", "info", "--context", "c2", "-s", "https://h:6443"]).unwrap();
        assert_eq!(b.kube.context.as_deref(), Some("c2"));
        assert_eq!(b.kube.server.as_deref(), Some("https://h:6443"));
    }

    #[test]
    fn add_nodes_flags_and_batch_subcommands() {
        let a = Cli::try_parse_from([
            "x",
            "add-nodes",
            "--dir",
            "out",
            "--pxe",
            "--karg",
            "a=1",
            "--karg",
            "b",
            "--node-labels",
            "k=v,z=w",
        ])
        .unwrap();
        let Command::AddNodes(a) = a.command else { panic!() };
        assert!(a.pxe && a.command.is_none());
        assert_eq!(a.kargs, ["a=1", "b"]);
        assert_eq!(a.token_ttl, None, "explicit only when given");
        assert!(Cli::try_parse_from(["x", "add-nodes", "--pxe", "--config-image"]).is_err());
        assert!(
            Cli::try_parse_from(["x", "add-nodes", "--hostname", "w"]).is_err(),
            "needs --mac-address"
        );
        assert!(
            Cli::try_parse_from(["x", "add-nodes", "--nodes-config", "f", "--mac-address", "m"]).is_err()
        );
        let b = Cli::try_parse_from(["x", "add-nodes", "batches", "delete", "b1"]).unwrap();
        let Command::AddNodes(b) = b.command else { panic!() };
        let Some(AddNodesCommand::Batch(b)) = b.command else {
            panic!()
        };
        assert!(matches!(b.command, Some(BatchCommand::Delete { ref names, .. }) if names == &["b1"]));
    }
}
