#!/usr/bin/env bash
# The test command (README "Run the tests"). On a fresh machine it installs what the tests
# need, builds the workspace and the real consumer components (scripts/real-components.sh),
# and runs every test. End-to-end tests run each in a private network namespace; they need
# root (as CI is) or this script run under `agent-day2-sim netns`.
#
# Tests that need a real component are marked #[ignore] with the reason, so a machine without
# it counts them as ignored in the runner's summary; once the component is built they run
# in a second pass below. The assisted-service group is blocked on machines whose module proxy
# refuses github.com/openshift/assisted-service (exit 3 of real-components.sh): say so, go on.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/setup.sh
. scripts/setup.sh
ensure_packages
ensure_coreos_installer
declare -A real=()
for group in assisted kube; do
  rc=0
  scripts/real-components.sh "$group" || rc=$?
  case $rc in
    0) real[$group]=1 ;;
    3) echo "test.sh: the real $group components are blocked here (see above); their tests stay ignored" >&2 ;;
    *) echo "test.sh: building the real $group components failed (exit $rc)" >&2; exit "$rc" ;;
  esac
done
cargo build --workspace --all-targets
run() {
  if cargo nextest --version >/dev/null 2>&1; then
    cargo nextest run --workspace --no-fail-fast "$@"
  else
    cargo test --workspace --no-fail-fast "$@"
  fi
}
status=0
run "$@" || status=$?
# Second pass: the ignored tests whose component is present.
if [ -n "${real[assisted]:-}" ]; then
  cargo test --no-fail-fast --test real_node -- --ignored || status=1
fi
if [ -n "${real[kube]:-}" ]; then
  cargo test --no-fail-fast --test real_apiserver -- --ignored || status=1
fi
exit "$status"
