//! `nodes-config.yaml`: the hosts to add, as `oc adm node-image create` reads them, and their
//! validation against the cluster.
//!
//! Three steps, all pure (the only I/O is [`from_flags`] reading the files its flags name):
//! - [`parse`] turns the YAML into a [`NodesConfig`]: shape and types only, every unknown key
//!   refused with a "did you mean" (docs/add-nodes.md "nodes-config.yaml").
//! - [`from_flags`] builds the same model from the single-host flags of the anchor
//!   (`--mac-address`, `--hostname`, `--network-config-path`, `--root-device-hint`,
//!   `--cpu-architecture`, `--ssh-key-path`).
//! - [`validate`] checks the model against the [`ClusterModel`](crate::cluster::ClusterModel)
//!   and compiles each host's NMState with the `nmstate` crate into NetworkManager keyfiles,
//!   collecting every error and warning ([`Validated`]).
//!
//! Schema source: `Config` of openshift/installer `pkg/asset/agent/joiner/addnodesconfig.go`
//! and `agent.Host` of `pkg/types/agent/agent_config_type.go` (docs/add-nodes.md
//! "nodes-config.yaml").
//! Every error is a [`FieldError`]: the field path (`hosts[1].interfaces[0].macAddress`) and a
//! message that quotes the value and says what to do. [`ConfigErrors`] (all of them) becomes
//! [`Error::InvalidConfig`](crate::error::Error::InvalidConfig), exit code 3.

mod flags;
mod model;
mod parse;
mod validate;
pub mod yaml;

pub use crate::error::{ConfigErrors, FieldError};
pub use flags::{from_flags, FlagsHost};
pub use parse::{merge_errors, parse, parse_partial};
pub use validate::{validate, Validated, ValidatedHost};

pub use model::*;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn did_you_mean_finds_typos_and_case() {
        let keys = ["name", "macAddress"];
        assert_eq!(did_you_mean("macAdress", &keys), Some("macAddress"));
        assert_eq!(did_you_mean("macaddress", &keys), Some("macAddress"));
        assert_eq!(did_you_mean("nmae", &keys), Some("name"));
        assert_eq!(did_you_mean("ipAddress", &["hostname"]), None);
    }

    #[test]
    fn field_error_display() {
        let e = FieldError::new("hosts[0].hostname", "required");
        assert_eq!(e.to_string(), "hosts[0].hostname: required");
        assert_eq!(FieldError::new("", "x").to_string(), "x");
    }
}
