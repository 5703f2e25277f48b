//! `version`: the plugin's version and build, the Kubernetes API it was built against and the
//! OpenShift releases it supports.

use serde::Serialize;

use crate::cli::VersionArgs;
use crate::cluster::MIN_VERSION;
use crate::error::Result;
use crate::output;

/// The `version -o json|yaml` document (apiVersion agent-day2/v1, kind Version).
#[derive(Debug, Clone, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct VersionInfo {
    /// `agent-day2/v1`.
    pub api_version: &'static str,
    /// `Version`.
    pub kind: &'static str,
    /// Semantic version of the plugin (Cargo package version, without the `v` of the git tag).
    pub version: &'static str,
    /// Git commit the binary was built from (`AGENT_DAY2_GIT_COMMIT`, else `git rev-parse
    /// --short=12 HEAD` at build time); None when built outside a git checkout.
    pub git_commit: Option<&'static str>,
    /// RFC 3339 UTC build time: `SOURCE_DATE_EPOCH` when set (reproducible builds), else when
    /// build.rs last ran.
    pub build_date: &'static str,
    /// Kubernetes API version of the k8s-openapi types compiled in (`1.37`): the newest API the
    /// binary knows, not the cluster's; the resources it uses (core v1, certificates v1) are
    /// stable on older servers.
    pub kubernetes_api_version: &'static str,
    /// Oldest Kubernetes server the plugin works with (`1.31`, the one the oldest supported
    /// OpenShift ships: [`MIN_KUBERNETES`]).
    pub min_kubernetes_version: String,
    /// Oldest OpenShift release the plugin works with (`4.18`); newer ones are supported too
    /// ([`crate::cluster::MIN_VERSION`], the check `info` and `add-nodes` make).
    pub min_open_shift_version: String,
    /// Target OS/arch, Go style as krew uses them (`linux/amd64`).
    pub platform: String,
}

/// The Kubernetes minor the oldest supported OpenShift ships: OpenShift 4.N ships Kubernetes
/// 1.(N+13) (4.18: 1.31, as the simulated control plane of the tests runs it).
pub const MIN_KUBERNETES: (u64, u64) = (1, MIN_VERSION.1 + 13);

/// The build's version facts.
pub fn info() -> VersionInfo {
    let arch = match std::env::consts::ARCH {
        "x86_64" => "amd64",
        "aarch64" => "arm64",
        "powerpc64" => "ppc64le",
        a => a,
    };
    VersionInfo {
        api_version: "agent-day2/v1",
        kind: "Version",
        version: env!("CARGO_PKG_VERSION"),
        git_commit: option_env!("AGENT_DAY2_GIT_COMMIT").filter(|c| !c.is_empty()),
        build_date: env!("AGENT_DAY2_BUILD_DATE"),
        kubernetes_api_version: env!("AGENT_DAY2_K8S_API"),
        min_kubernetes_version: format!("{}.{}", MIN_KUBERNETES.0, MIN_KUBERNETES.1),
        min_open_shift_version: format!("{}.{}", MIN_VERSION.0, MIN_VERSION.1),
        platform: format!("{}/{arch}", std::env::consts::OS),
    }
}

/// Renders `version` output: `-o table` is a title line `agent-day2 vX.Y.Z` (what `--version`
/// prints first) and one line per fact.
pub fn run(args: &VersionArgs) -> Result<String> {
    let v = info();
    output::render(args.output, &v, || table(&v))
}

fn table(v: &VersionInfo) -> String {
    let rows = [
        ("Git commit:", v.git_commit.unwrap_or("unknown").to_string()),
        ("Build date:", v.build_date.to_string()),
        // The compiled-in types, not the cluster's version (issue 22 item 10: "Kubernetes API
        // 1.37" read as a claim about a 1.31 cluster).
        (
            "Client types:",
            format!(
                "Kubernetes {} (servers {} and newer)",
                v.kubernetes_api_version, v.min_kubernetes_version
            ),
        ),
        ("OpenShift:", format!("{} and newer", v.min_open_shift_version)),
        ("Platform:", v.platform.clone()),
    ];
    format!("agent-day2 v{}\n{}\n", v.version, output::key_values(&rows))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn facts_come_from_the_build_and_the_one_minimum() {
        let v = info();
        assert_eq!(
            v.min_open_shift_version,
            format!("{}.{}", MIN_VERSION.0, MIN_VERSION.1)
        );
        let (major, minor) = v.kubernetes_api_version.split_once('.').unwrap();
        assert_eq!(major, "1");
        assert!(
            minor.parse::<u32>().unwrap() >= 33,
            "k8s-openapi 0.29 starts at 1.33"
        );
        let d = v.build_date.as_bytes();
        assert!(
            d.len() == 20 && d[4] == b'-' && d[10] == b'T' && d[19] == b'Z',
            "{}",
            v.build_date
        );
        assert_eq!(v.min_kubernetes_version, "1.31");
        let t = table(&v);
        assert!(
            t.contains(&format!(
                "Client types:   Kubernetes {} (servers 1.31 and newer)\n",
                v.kubernetes_api_version
            )),
            "{t}"
        );
        assert!(t.starts_with(&format!("agent-day2 v{}\n", v.version)), "{t}");
        let os = t.lines().find(|l| l.starts_with("OpenShift:")).unwrap();
        assert!(
            os.ends_with(&format!(" {} and newer", v.min_open_shift_version)),
            "{t}"
        );
    }
}
