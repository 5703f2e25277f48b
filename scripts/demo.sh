#!/usr/bin/env bash
# The demo (README "Run the demo"): builds everything, starts the simulated OpenShift cluster in a
# private network namespace (machine network 192.168.111.0/24, API on 192.168.111.5) and runs the
# plugin against it through the real kubectl. Nothing leaves the namespace; it all stops at the end.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/setup.sh
ensure_packages
ensure_coreos_installer # the real assisted-service part reads the ISO's Ignition with it
cargo build --workspace --quiet
# The real assisted-service for the part where it judges the ISO (exit 3: blocked, as on the
# project's machines, whose module proxy refuses the module; the demo then says so and goes on).
rc=0
scripts/real-components.sh assisted || rc=$?
[ "$rc" = 0 ] || [ "$rc" = 3 ] || exit "$rc"
# The real control plane (etcd, kube-apiserver, kube-controller-manager from their Go modules)
# serves the cluster.
scripts/real-components.sh kube
exec "${CARGO_TARGET_DIR:-target}/debug/agent-day2-sim" netns -- scripts/demo-inner.sh "$@"
