// The wrapper module that names the real discovery agent the node image runs (item 4 of issue
// 20): github.com/openshift/assisted-installer-agent's `agent` binary (src/agent/main: the
// agent, next_step_runner, inventory, free_addresses, disk_speed_check, logs_sender by the
// name it is called as), pinned to one commit as a pseudo-version.
// scripts/real-components.sh (group `agent`) builds it from here; nothing upstream is copied
// into this repository.
module agent-day2.invalid/real-agent

go 1.25.0

// The git tree id of that commit's snapshot (`git archive` of a272a11d4f78; `git add -A -f` +
// `git write-tree` of the unpacked tree in a throw-away repository): scripts/real-components.sh
// compares a source tree that is not a git checkout (an unpacked tarball) with it, exactly.
require github.com/openshift/assisted-installer-agent v0.0.0-20260416183132-a272a11d4f78 // tree 9d9c2390f9be7663c10cf11a765ed901909f93d3

// Upstream's own replace block (ignored when it is a dependency), repeated for the module
// proxy route.
replace (
	github.com/jackc/pgx/v4 => github.com/jackc/pgx/v4 v4.18.3
	github.com/metal3-io/baremetal-operator => github.com/openshift/baremetal-operator v0.0.0-20260123083846-066225b39a39
	github.com/metal3-io/baremetal-operator/apis => github.com/openshift/baremetal-operator/apis v0.0.0-20260123083846-066225b39a39
	github.com/metal3-io/baremetal-operator/pkg/hardwareutils => github.com/openshift/baremetal-operator/pkg/hardwareutils v0.0.0-20260123083846-066225b39a39
	github.com/opencontainers/runc => github.com/opencontainers/runc v1.1.12
	github.com/openshift/assisted-service => github.com/openshift/assisted-service v1.0.10-0.20250430094626-07e5c4388c55
	github.com/openshift/assisted-service/api => github.com/openshift/assisted-service/api v0.0.0-20250430094626-07e5c4388c55
	github.com/openshift/assisted-service/client => github.com/openshift/assisted-service/client v0.0.0-20250430094626-07e5c4388c55
	github.com/openshift/assisted-service/models => github.com/openshift/assisted-service/models v0.0.0-20250430094626-07e5c4388c55
	sigs.k8s.io/cluster-api-provider-aws => github.com/openshift/cluster-api-provider-aws v0.2.1-0.20201022175424-d30c7a274820
	sigs.k8s.io/cluster-api-provider-azure => github.com/openshift/cluster-api-provider-azure v0.1.0-alpha.3.0.20201016155852-4090a6970205
)
