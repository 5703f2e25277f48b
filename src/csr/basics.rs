//! The CSR vocabulary every part of [`crate::csr`] shares: signers, the bootstrapper identity,
//! the clock-skew and kubelet-retry limits, [`Kind`], [`Time`] and the escaping of CSR-supplied
//! values in reason texts ([`esc`]).

use super::escape::escape_for_display;

/// A point in time (UTC), the type k8s-openapi uses for `metav1.Time`.
pub type Time = k8s_openapi::jiff::Timestamp;

/// Signer of the first (client) CSR of a new node.
pub const CLIENT_SIGNER: &str = "kubernetes.io/kube-apiserver-client-kubelet";
/// Signer of the kubelet's serving CSR.
pub const SERVING_SIGNER: &str = "kubernetes.io/kubelet-serving";
/// The only identity allowed to request a new node's client certificate (CMA `isReqFromNodeBootstrapper`).
pub const BOOTSTRAPPER: &str = "system:serviceaccount:openshift-machine-config-operator:node-bootstrapper";
/// The bootstrapper's groups, exactly (order ignored).
pub const BOOTSTRAPPER_GROUPS: [&str; 3] = [
    "system:serviceaccounts",
    "system:serviceaccounts:openshift-machine-config-operator",
    "system:authenticated",
];
/// CN prefix and username prefix of node identities.
pub const NODE_PREFIX: &str = "system:node:";
/// Clock-skew tolerance for "created in the future", in seconds.
pub const CLOCK_SKEW_SECONDS: i64 = 600;
/// How much earlier than the host's recorded reboot report a client CSR may be created and still
/// be the installed system's, in seconds. The record is written with the clock of the machine
/// running `monitor`, the CSR's creationTimestamp (whole seconds, cut down) with the API
/// server's; 2 s covers the cut and NTP-level disagreement. More is not needed and would be a
/// window for a rogue CSR posted just before the report: the assisted-installer reports the
/// Rebooting stage and then reboots with `shutdown -r +1` (its `ops.Reboot`), so the installed
/// system's kubelet asks a minute or more after the report, even with the clocks a few seconds
/// apart. A monitor clock ahead of the API server's by more than that would make the genuine
/// CSR look early (`created-before-reboot` says to compare the clocks).
pub const REBOOT_CLOCK_SKEW_SECONDS: i64 = 2;
/// The kubelet's wait for a client certificate before it makes a new key and CSR
/// (client-go certificate manager `certificateWaitTimeout`, 15 min).
pub const KUBELET_RETRY_SECONDS: i64 = 900;
/// Length at which CSR-supplied values are cut in reason texts.
pub const DISPLAY_MAX: usize = 80;

pub(crate) fn esc(s: &str) -> String {
    escape_for_display(s, DISPLAY_MAX)
}

/// Which kubelet certificate a CSR asks for, from `spec.signerName`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Kind {
    /// `kubernetes.io/kube-apiserver-client-kubelet`.
    Client,
    /// `kubernetes.io/kubelet-serving`.
    Serving,
    /// Any other signer: never approved, never touched.
    NotKubelet,
}

impl std::fmt::Display for Kind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Kind::Client => "client",
            Kind::Serving => "serving",
            Kind::NotKubelet => "not-kubelet",
        })
    }
}
