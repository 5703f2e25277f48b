//! `migrate` against the REAL assisted-service as node 0 (issue 21; docs/migrate.md "Proved
//! against the real service"): `agent-day2-sim node0 --real` runs the real service in the
//! agent-based installer's REST mode on a real PostgreSQL, registers the cluster and InfraEnv
//! with the real agent-installer client, and drives a compact install up to the state node 0
//! holds just before it reboots (cluster `installing`, the bootstrap host `Rebooting`, the other
//! masters `Joined`, logs uploaded, events written by the service). Then the same flow as
//! tests/migrate.rs's `full_run`: export (REST + pg_dump of the real schema), import into
//! cluster 0 (the simulated API server with assisted-service's own CRDs, cluster 0's database
//! with the schema the real service's migrations make), killed and resumed, wait; rows, CRs,
//! Secrets and files checked.
//!
//! Needs the real binaries (`#[cfg_attr(not(real_assisted), ignore)]`, build.rs; scripts/test.sh
//! builds them), root (a network namespace) and PostgreSQL.
//!
//! Not here yet (issue 21): cluster 0's own assisted-service started on the import, option 1
//! (node 0 on its own OpenShift API), the files in cluster 0's service storage layout.

use crate::migrate::{full_run, Crds};

#[test]
#[cfg_attr(
    not(real_assisted),
    ignore = "needs the real assisted-service: scripts/real-components.sh assisted, then AGENT_DAY2_REAL_ASSISTED=1 (scripts/test.sh does both)"
)]
fn real_node0_export_import_wait_against_assisted_services_own_crds() {
    full_run(Crds::Upstream, &["--real"]);
}
