#!/usr/bin/env bash
# The test command (README "Run the tests"). On a fresh machine it installs what the tests
# need, builds the workspace and the real consumer components (scripts/real-components.sh),
# and runs every test. End-to-end tests run each in a private network namespace; they need
# root (as CI is) or this script run under `agent-day2-sim netns`.
#
# Tests that need a real component or upstream data a fresh machine may not get (see
# tests/sim/src/upstream.rs) are marked #[ignore] with the reason, so a machine without it counts
# them as ignored in the runner's summary; where it is present they run in a second pass below.
# No test returns early: a missing package or root fails it, saying what to install.
#
# The assisted-service group (and the discovery agent's, `agent`, from AGENT_DAY2_AGENT_SRC
# likewise) is built from the module proxy, else from the source tree
# AGENT_DAY2_ASSISTED_SERVICE_SRC names (a checkout of the pinned commit, or its tarball). Once
# built, AGENT_DAY2_REAL_ASSISTED=1 makes its tests ordinary tests of the first pass (build.rs:
# cfg real_assisted), run and counted, never ignored. Where it is blocked (the proxy refuses the
# module and no tree is given: exit 3 of real-components.sh) its tests stay ignored, said; with
# AGENT_DAY2_REQUIRE_REAL=assisted (CI, .ci/run, where the snapshot is there) a blocked or
# failed build fails the run. The real krew (group `krew`, from the module proxy) likewise:
# AGENT_DAY2_REAL_KREW=1 (cfg real_krew) runs tests/krew.rs's installs through `kubectl krew`;
# .ci/run requires it.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/setup.sh
. scripts/setup.sh
ensure_packages
ensure_coreos_installer
declare -A real=()
for group in assisted agent kube krew; do
  rc=0
  scripts/real-components.sh "$group" || rc=$?
  case $rc in
    0) real[$group]=1 ;;
    3)
      if [ "$group" = kube ]; then
        echo "test.sh: the real control plane is blocked here (see above): the simulated cluster of every end-to-end test runs on it" >&2
        exit 3
      fi
      case " ${AGENT_DAY2_REQUIRE_REAL//,/ } " in
        *" $group "*)
          echo "test.sh: the real $group components are required here (AGENT_DAY2_REQUIRE_REAL) but blocked (see above)" >&2
          exit 1 ;;
      esac
      echo "test.sh: the real $group components are blocked here (see above); their tests stay ignored" >&2 ;;
    *) echo "test.sh: building the real $group components failed (exit $rc)" >&2; exit "$rc" ;;
  esac
done
if [ -n "${real[assisted]:-}" ]; then export AGENT_DAY2_REAL_ASSISTED=1; else export AGENT_DAY2_REAL_ASSISTED=0; fi
# run-node's machines run the real discovery agent where the agent group was built, else its
# stand-in (tests/sim/src/noderun/agent.rs says which); the tests that judge what only the real
# agent reports need it (cfg real_agent).
if [ -n "${real[agent]:-}" ]; then export AGENT_DAY2_REAL_AGENT=1; else export AGENT_DAY2_REAL_AGENT=0; fi
# tests/krew.rs installs the plugin with the real krew (cfg real_krew).
if [ -n "${real[krew]:-}" ]; then export AGENT_DAY2_REAL_KREW=1; else export AGENT_DAY2_REAL_KREW=0; fi
# The house rules (README "The two set-up commands"): rustfmt's layout and clippy's lints, both as errors,
# before anything is built for the tests.
cargo fmt --version >/dev/null 2>&1 || rustup component add rustfmt
cargo clippy --version >/dev/null 2>&1 || rustup component add clippy
cargo fmt --all -- --check
cargo clippy --workspace --all-targets -- -D warnings
cargo build --workspace --all-targets
run() { # run PACKAGES... [ARGS]: cargo nextest run when installed, else cargo test
  if cargo nextest --version >/dev/null 2>&1; then
    cargo nextest run --no-fail-fast "$@"
  else
    cargo test --no-fail-fast "$@"
  fi
}
status=0
# The end-to-end tests' simulated cluster runs on the real control plane (agent-day2-sim up).
run --workspace "$@" || status=$?
# Second pass: the ignored tests whose component or data is present (each #[ignore] names what
# it needs; tests/sim/src/upstream.rs finds the data, `agent-day2-sim upstream WHAT` asks it).
ignored() { # ignored PACKAGE TARGET-ARGS FILTER: that target's ignored tests matching FILTER
  local pkg=$1 filter=$3 target
  read -ra target <<<"$2"
  cargo test --no-fail-fast -p "$pkg" "${target[@]}" -- --ignored "$filter" || status=1
}
have() { "${CARGO_TARGET_DIR:-target}/debug/agent-day2-sim" upstream "$1" >/dev/null 2>&1; }
# assisted-service's CRDs (its source tree: scripts/real-components.sh assisted); the plugin's
# own tests of them ran in the first pass (cfg real_assisted).
if have assisted-crds; then
  ignored agent-day2-sim "--test simulator" kubectl::assisted_crds_apply_objects_and_validation
fi
# node-joiner's acceptance data (an openshift/installer checkout: AGENT_DAY2_INSTALLER_SRC).
if have node-joiner-testdata; then
  ignored oc-agent-day2 "--test e2e" ignition::upstream_node_joiner_acceptance
  ignored oc-agent-day2 "--test e2e" add_nodes::upstream_node_joiner_cases_hold_for_our_iso
  ignored oc-agent-day2 "--test offline" cluster_model::upstream_node_joiner_testdata
  ignored oc-agent-day2 "--test offline" nodes_config::upstream_node_joiner_examples_validate
  ignored agent-day2-sim "--test simulator" seed::objects_dir_from_upstream_node_joiner_testdata
fi
# An external CSR case table (AGENT_DAY2_CSR_CASES).
if [ -n "${AGENT_DAY2_CSR_CASES:-}" ]; then
  ignored oc-agent-day2 "--test offline" csr_cases::shared_cases_table
fi
# The release archive (scripts/release.sh fills dist/).
if compgen -G 'dist/kubectl-agent_day2-*.tar.gz' >/dev/null; then
  ignored oc-agent-day2 "--test e2e" krew::release_
fi
exit "$status"
