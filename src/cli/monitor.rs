//! The clap types of `monitor` (run by [`crate::monitor::run`]).

use std::net::IpAddr;
use std::path::PathBuf;

use clap::Args;

/// Arguments of `monitor`.
#[derive(Debug, Clone, Args)]
pub struct MonitorArgs {
    /// Follow only this batch's hosts, e.g. --batch batch-20261129-211034-ab12 (default: every
    /// batch record).
    #[arg(long, value_name = "NAME", value_parser = parse_batch_name)]
    pub batch: Option<String>,
    /// Follow the hosts at these addresses (comma-separated or repeated), e.g. --ip-addresses
    /// 192.168.111.30,192.168.111.31. A DHCP host of a batch is recognised by its MAC and its
    /// address recorded on the batch.
    #[arg(long = "ip-addresses", value_name = "IP,...", value_delimiter = ',', value_parser = parse_host_ip)]
    pub ip_addresses: Vec<IpAddr>,
    /// Follow this node at this address (repeatable), e.g. --node worker-1=192.168.111.31.
    #[arg(long = "node", value_name = "NAME=IP", value_parser = parse_node)]
    pub nodes: Vec<(String, IpAddr)>,
    /// Approve the nodes' kubelet CSRs as they arrive, with every check of `approve`
    /// (needs --yes when stdin is not a terminal).
    #[arg(long)]
    pub approve: bool,
    /// With --approve: approve without asking.
    #[arg(long, short = 'y', requires = "approve")]
    pub yes: bool,
    /// With --approve: approve client CSRs of hosts whose reboot was not seen (monitor started
    /// after they rebooted, or a DHCP host without its address) on the other checks alone; only
    /// after checking on the host's console (each such approval is warned about).
    #[arg(long, requires = "approve")]
    pub trust_unverified_boot: bool,
    /// With --approve: how long a kubelet waits for its client CSR before it re-keys and posts
    /// another (15m, the kubelet certificate manager's); as approve's, e.g. --kubelet-retry 5m.
    #[arg(long, value_name = "DURATION", default_value = "15m", requires = "approve", value_parser = duration_text)]
    pub kubelet_retry: String,
    /// When a node fails, save its assisted-service logs here (created 0700 if missing), e.g.
    /// --gather ./logs.
    #[arg(long, value_name = "DIR")]
    pub gather: Option<PathBuf>,
    /// Give up after this long, e.g. --timeout 2h (exit 5, or 7 when CSRs are pending).
    #[arg(long, value_name = "DURATION", default_value = "90m", value_parser = duration_text)]
    pub timeout: String,
    /// Output: a live table on a terminal (one line per change otherwise), or -o json (one
    /// JSON event per line).
    #[arg(short = 'o', long = "output", value_enum, default_value_t = Format::Table)]
    pub output: Format,
    /// How often a node's API is polled once it answers.
    #[arg(long, value_name = "DURATION", default_value = "5s", hide = true, value_parser = duration_text)]
    pub poll_interval: String,
    /// Bound on assisted-service requests in flight, all nodes together.
    #[arg(long, value_name = "N", default_value_t = 16, hide = true)]
    pub max_in_flight: usize,
}

/// Output mode.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// A live table on a terminal, else one line per change.
    Table,
    /// One JSON event per line (apiVersion agent-day2/v1, kind MonitorEvent).
    Json,
}

pub(crate) fn parse_node(s: &str) -> std::result::Result<(String, IpAddr), String> {
    let (n, ip) = s
        .split_once('=')
        .ok_or_else(|| format!("{s:?}: expected NAME=IP, e.g. worker-1=192.168.111.31"))?;
    let ip = ip.trim().trim_start_matches('[').trim_end_matches(']');
    let ip: IpAddr = ip
        .parse()
        .map_err(|_| format!("{s:?}: {ip:?} is not an IP address"))?;
    if n.is_empty() {
        return Err(format!("{s:?}: the node name is empty"));
    }
    if let Some(why) = crate::net::not_a_host_address(ip) {
        return Err(format!("{s:?}: {ip} is {why}"));
    }
    Ok((n.to_string(), ip))
}

/// Parses `--node NAME=IP[,IP]` (`NAME=` alone is refused: give an address).
pub(crate) fn parse_node_flag(s: &str) -> std::result::Result<(String, Vec<IpAddr>), String> {
    let (name, ips) = s
        .split_once('=')
        .ok_or_else(|| format!("{s:?}: expected NAME=IP[,IP]"))?;
    if !crate::k8s_names::is_dns1123_subdomain(name) {
        return Err(format!(
            "{:?}: {:?} is not a node name (lowercase RFC 1123)",
            s, name
        ));
    }
    let ips = ips
        .split(',')
        .map(|i| {
            i.trim()
                .parse::<IpAddr>()
                .map_err(|_| format!("{s:?}: {i:?} is not an IP address"))
        })
        .collect::<std::result::Result<Vec<_>, _>>()?;
    if let Some((ip, why)) = ips
        .iter()
        .find_map(|ip| Some((ip, crate::net::not_a_host_address(*ip)?)))
    {
        return Err(format!("{s:?}: {ip} is {why}"));
    }
    Ok((name.to_string(), ips))
}

/// A duration flag's text, checked as clap reads it (a Go duration such as `30m` or `1h30m`,
/// or seconds; [`crate::duration::parse_duration`]): a bad one is a usage error (exit 2) before
/// any cluster read, where it was found only after connecting (and masked by exit 4 when the
/// cluster could not be reached). The command reads the value from the text.
pub(crate) fn duration_text(s: &str) -> std::result::Result<String, String> {
    crate::duration::parse_duration(s).map(|_| s.to_string())
}

/// `--ip-addresses` items: an IP address that can be a host's ([`crate::net::not_a_host_address`]).
pub(crate) fn parse_host_ip(s: &str) -> std::result::Result<IpAddr, String> {
    let t = s.trim().trim_start_matches('[').trim_end_matches(']');
    let ip: IpAddr = t.parse().map_err(|_| format!("{s:?} is not an IP address"))?;
    match crate::net::not_a_host_address(ip) {
        Some(why) => Err(format!("{ip} is {why}")),
        None => Ok(ip),
    }
}

/// A node name flag's value (`--reissue`): a lowercase RFC 1123 subdomain, as a Node's name.
pub(crate) fn parse_node_name(s: &str) -> std::result::Result<String, String> {
    if crate::k8s_names::is_dns1123_subdomain(s) {
        Ok(s.to_string())
    } else {
        Err(format!(
            "{:?} is not a node name (lowercase RFC 1123, e.g. worker-1)",
            crate::text::escape_for_display(s, 80)
        ))
    }
}

/// `--batch` values: a batch's name is its ConfigMap's (a lowercase RFC 1123 subdomain, e.g.
/// batch-20261129-211034-ab12): anything else is a usage error (exit 2), not a lookup that
/// fails (exit 4).
pub(crate) fn parse_batch_name(s: &str) -> std::result::Result<String, String> {
    if crate::k8s_names::is_dns1123_subdomain(s) {
        Ok(s.to_string())
    } else {
        Err(format!(
            "{:?} is not a batch name (lowercase letters, digits, '-' and '.', e.g. batch-20261129-211034-ab12; see `oc agent-day2 add-nodes batch list`)",
            crate::text::escape_for_display(s, 80)
        ))
    }
}
