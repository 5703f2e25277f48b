//! The install stages a day-2 host walks through on its local assisted-service, as a pure plan.
//!
//! Host statuses and stage names are the enums of swagger.yaml (`host.status`, `host-stage`).
//! A day-2 host goes discovering → known (or insufficient while a validation fails) → installing
//! → installing-in-progress (Starting installation, Installing, Writing image to disk, Rebooting)
//! → added-to-existing-cluster, where assisted-service stops following it (status_info text of
//! assisted-service's day-2 "Rebooting" state). An install failure puts the host in `error`.

use serde_json::{json, Value};

/// How a step ends the walk.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum End {
    /// Go on to the next step.
    Next,
    /// Stay here for ever (a failing validation, a stalled host).
    Stall,
    /// The installation failed with this reason.
    Failed(String),
    /// The live system reboots into the installed system: 8090 goes away.
    Reboot,
    /// The machine loses power mid-install (`--power-off`): 8090 goes away and nothing comes
    /// back (stands in for a pulled plug or a crashed live system).
    PowerOff,
}

/// One state of the host as the REST API shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Step {
    pub status: &'static str,
    pub status_info: String,
    /// `progress.current_stage` (swagger `host-stage`), if installing.
    pub stage: Option<&'static str>,
    pub percent: Option<u8>,
    /// Failing validation (id, message), if any.
    pub failing: Option<(String, String)>,
    /// Event message posted when the step starts (`info` unless the step failed).
    pub event: String,
    /// Nominal duration on a real machine, in seconds (scaled by the fast clock).
    pub nominal_secs: u32,
    pub end: End,
}

/// What may go wrong with a host (`--fail-validation`, `--fail-install`, `--stall`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Faults {
    /// Validation id that fails, e.g. `ntp-synced`.
    pub fail_validation: Option<String>,
    pub fail_install: bool,
    pub stall: bool,
    /// Loses power at "Writing image to disk", 50 % (`--power-off`).
    pub power_off: bool,
}

/// Stages that `progress_stages` lists for a day-2 worker (swagger `host-stage`).
pub const WORKER_STAGES: &[&str] = &[
    "Starting installation",
    "Installing",
    "Writing image to disk",
    "Rebooting",
];

/// Host validations this simulator reports, (id, success message, failure message), grouped
/// as assisted-service groups them in `validations_info`.
pub const VALIDATIONS: &[(&str, &str, &str, &str)] = &[
    (
        "hardware",
        "has-inventory",
        "Valid inventory exists for the host",
        "Inventory has not been received for the host",
    ),
    (
        "hardware",
        "has-min-cpu-cores",
        "Sufficient CPU cores",
        "The host does not have enough CPU cores: 2 required",
    ),
    (
        "hardware",
        "has-min-memory",
        "Sufficient minimum RAM",
        "The host does not have enough RAM: 8.00 GiB required",
    ),
    (
        "hardware",
        "has-min-valid-disks",
        "Sufficient disk capacity",
        "No eligible disks were found, please check specific disks to see why they are not eligible",
    ),
    (
        "network",
        "ntp-synced",
        "Host NTP is synced",
        "Host couldn't synchronize with any NTP server",
    ),
    (
        "network",
        "ignition-downloadable",
        "Ignition is downloadable",
        "Ignition is not downloadable. Please ensure host connectivity to the cluster's API",
    ),
    (
        "network",
        "api-int-domain-name-resolved-correctly",
        "Domain name resolution for the api-int domain name was successful or not required",
        "Couldn't resolve domain name api-int on the host",
    ),
    (
        "operators",
        "lso-requirements-satisfied",
        "lso is disabled",
        "lso requirements not met",
    ),
];

/// `validations_info` JSON text: every validation success except `failing`.
pub fn validations_info(failing: Option<&str>) -> String {
    let mut groups = serde_json::Map::new();
    for (group, id, ok, bad) in VALIDATIONS {
        let fail = failing == Some(*id);
        let entry = json!({"id": id, "status": if fail {"failure"} else {"success"}, "message": if fail {*bad} else {*ok}});
        groups
            .entry(group.to_string())
            .or_insert_with(|| Value::Array(vec![]))
            .as_array_mut()
            .unwrap()
            .push(entry);
    }
    if let Some(f) = failing {
        if !VALIDATIONS.iter().any(|v| v.1 == f) {
            groups.entry("network".to_string()).or_insert_with(|| Value::Array(vec![])).as_array_mut().unwrap().push(
                json!({"id": f, "status": "failure", "message": format!("Validation {f} failed (simulated)")}),
            );
        }
    }
    Value::Object(groups).to_string()
}

/// The failure message of validation `id`.
pub fn failure_message(id: &str) -> String {
    VALIDATIONS
        .iter()
        .find(|v| v.1 == id)
        .map(|v| v.3.to_string())
        .unwrap_or_else(|| format!("Validation {id} failed (simulated)"))
}

/// The plan of `hostname` under `faults`. The last step always ends with something other than
/// [`End::Next`].
pub fn plan(hostname: &str, faults: &Faults) -> Vec<Step> {
    let step = |status, info: String, stage, percent, event: String, secs, end| Step {
        status,
        status_info: info,
        stage,
        percent,
        failing: None,
        event,
        nominal_secs: secs,
        end,
    };
    let mut s = vec![step(
        "discovering",
        "Waiting for host to send hardware details".into(),
        None,
        None,
        format!("Host {hostname}: Successfully registered"),
        30,
        if faults.stall { End::Stall } else { End::Next },
    )];
    if faults.stall {
        return s;
    }
    if let Some(v) = &faults.fail_validation {
        let msg = failure_message(v);
        let mut st = step(
            "insufficient",
            format!("Host cannot be installed due to following failing validation(s): {msg}"),
            None,
            None,
            format!("Host {hostname}: validation '{v}' that used to succeed is now failing"),
            30,
            End::Stall,
        );
        st.failing = Some((v.clone(), msg));
        s.push(st);
        return s;
    }
    s.push(step(
        "known",
        "Host is ready to be installed".into(),
        None,
        None,
        format!("Host {hostname}: updated status from discovering to known (Host is ready to be installed)"),
        20,
        End::Next,
    ));
    s.push(step(
        "installing",
        "Installation is in progress".into(),
        Some("Starting installation"),
        Some(0),
        format!("Host {hostname}: updated status from known to installing (Installation is in progress)"),
        10,
        End::Next,
    ));
    s.push(step(
        "installing-in-progress",
        "Host is being installed".into(),
        Some("Installing"),
        Some(17),
        format!("Host {hostname}: reached installation stage Installing: worker"),
        30,
        End::Next,
    ));
    for pct in [33u8, 50] {
        s.push(step(
            "installing-in-progress",
            "Host is being installed".into(),
            Some("Writing image to disk"),
            Some(pct),
            format!("Host {hostname}: reached installation stage Writing image to disk: {pct}%"),
            60,
            if pct == 50 && faults.power_off {
                End::PowerOff
            } else {
                End::Next
            },
        ));
    }
    if faults.power_off {
        return s;
    }
    if faults.fail_install {
        let reason = "failed to write image to disk: exit status 1 (simulated --fail-install)".to_string();
        s.push(step("error", format!("Host failed to install because its installation stage Writing image to disk failed: {reason}"),
            Some("Failed"), Some(50), format!("Host {hostname}: updated status from installing-in-progress to error ({reason})"), 5,
            End::Failed(reason)));
        return s;
    }
    s.push(step(
        "installing-in-progress",
        "Host is being installed".into(),
        Some("Writing image to disk"),
        Some(67),
        format!("Host {hostname}: reached installation stage Writing image to disk: 100%"),
        60,
        End::Next,
    ));
    s.push(step(
        "installing-in-progress",
        "Host is being installed".into(),
        Some("Rebooting"),
        Some(83),
        format!("Host {hostname}: reached installation stage Rebooting"),
        10,
        End::Next,
    ));
    s.push(step("added-to-existing-cluster",
        "Host has rebooted and no further updates will be posted. Please check console for progress and to possibly approve pending CSRs".into(),
        Some("Rebooting"), Some(100),
        format!("Host {hostname}: updated status from installing-in-progress to added-to-existing-cluster"), 10, End::Reboot));
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn statuses(p: &[Step]) -> Vec<&str> {
        p.iter().map(|s| s.status).collect()
    }

    #[test]
    fn normal_walk_ends_with_reboot() {
        let p = plan("worker-0", &Faults::default());
        assert_eq!(statuses(&p).first(), Some(&"discovering"));
        assert!(statuses(&p).contains(&"known"));
        assert!(statuses(&p).contains(&"installing"));
        assert!(statuses(&p).contains(&"installing-in-progress"));
        assert_eq!(p.last().unwrap().status, "added-to-existing-cluster");
        assert_eq!(p.last().unwrap().end, End::Reboot);
        assert!(p[..p.len() - 1].iter().all(|s| s.end == End::Next));
        // Percent never goes down; every stage is a swagger host-stage of a worker.
        let pcts: Vec<u8> = p.iter().filter_map(|s| s.percent).collect();
        assert!(pcts.windows(2).all(|w| w[0] <= w[1]), "{pcts:?}");
        assert!(p
            .iter()
            .filter_map(|s| s.stage)
            .all(|s| WORKER_STAGES.contains(&s)));
    }

    #[test]
    fn failing_validation_stays_insufficient() {
        let p = plan(
            "w",
            &Faults {
                fail_validation: Some("ntp-synced".into()),
                ..Default::default()
            },
        );
        assert_eq!(statuses(&p), vec!["discovering", "insufficient"]);
        assert_eq!(p[1].end, End::Stall);
        assert!(p[1].status_info.contains("NTP"));
        let vi: serde_json::Value = serde_json::from_str(&validations_info(Some("ntp-synced"))).unwrap();
        let ntp = vi["network"]
            .as_array()
            .unwrap()
            .iter()
            .find(|v| v["id"] == "ntp-synced")
            .unwrap();
        assert_eq!(ntp["status"], "failure");
        assert!(vi["hardware"]
            .as_array()
            .unwrap()
            .iter()
            .all(|v| v["status"] == "success"));
    }

    #[test]
    fn fail_install_ends_in_error_and_stall_never_leaves_discovering() {
        let p = plan(
            "w",
            &Faults {
                fail_install: true,
                ..Default::default()
            },
        );
        let last = p.last().unwrap();
        assert_eq!(last.status, "error");
        assert_eq!(last.stage, Some("Failed"));
        assert!(matches!(&last.end, End::Failed(r) if r.contains("write image")));
        let p = plan(
            "w",
            &Faults {
                stall: true,
                ..Default::default()
            },
        );
        assert_eq!(statuses(&p), vec!["discovering"]);
        assert_eq!(p[0].end, End::Stall);
    }
}
