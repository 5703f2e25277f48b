#!/usr/bin/env bash
# The test command (README "Run the tests"). On a fresh machine it installs what the tests
# need, builds the workspace and runs every test. End-to-end tests run each in a private
# network namespace; they need root (as CI is) or this script run under `agent-day2-sim netns`.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/setup.sh
. scripts/setup.sh
ensure_packages
ensure_coreos_installer
cargo build --workspace --all-targets
if cargo nextest --version >/dev/null 2>&1; then
  cargo nextest run --workspace --no-fail-fast "$@"
else
  cargo test --workspace --no-fail-fast "$@"
fi
