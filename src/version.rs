//! `version`: the plugin's version and build.

use serde::Serialize;

use crate::cli::{OutputFormat, VersionArgs};
use crate::error::Result;
use crate::output;

/// The `version -o json` document.
#[derive(Debug, Clone, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct VersionInfo {
    /// `agent-day2/v1`.
    pub api_version: &'static str,
    /// `Version`.
    pub kind: &'static str,
    /// Semantic version of the plugin (Cargo package version).
    pub version: &'static str,
    /// Git commit the binary was built from (`AGENT_DAY2_GIT_COMMIT` at build time), if known.
    pub git_commit: Option<&'static str>,
    /// Target triple's OS/arch, Go style as krew uses them (linux/amd64).
    pub platform: String,
}

/// The build's version facts.
pub fn info() -> VersionInfo {
    let arch = match std::env::consts::ARCH {
        "x86_64" => "amd64",
        "aarch64" => "arm64",
        a => a,
    };
    VersionInfo {
        api_version: "agent-day2/v1",
        kind: "Version",
        version: env!("CARGO_PKG_VERSION"),
        git_commit: option_env!("AGENT_DAY2_GIT_COMMIT").filter(|c| !c.is_empty()),
        platform: format!("{}/{arch}", std::env::consts::OS),
    }
}

/// Renders `version` output.
pub fn run(args: &VersionArgs) -> Result<String> {
    let v = info();
    output::render(args.output, &v, || {
        let mut s = format!("agent-day2 v{}", v.version);
        if let Some(c) = v.git_commit {
            s.push_str(&format!(" ({c})"));
        }
        s.push_str(&format!(" {}", v.platform));
        if args.output == OutputFormat::Table {
            s.push('\n');
        }
        s
    })
}
