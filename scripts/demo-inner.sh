#!/usr/bin/env bash
# Runs inside the network namespace made by scripts/demo.sh.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
dir=$(mktemp -d)
trap 'kill "$sim" 2>/dev/null; wait "$sim" 2>/dev/null; rm -rf "$dir"' EXIT
"$root/target/debug/agent-day2-sim" up --dir "$dir" --listen 192.168.111.5:6443 "$@" >"$dir/sim.log" 2>&1 &
sim=$!
for _ in $(seq 1 100); do [ -f "$dir/ready" ] && break; sleep 0.1; done
[ -f "$dir/ready" ] || { cat "$dir/sim.log" >&2; echo "simulator did not start" >&2; exit 1; }
# Install the plugin the way a user would: one executable on PATH (target/debug also holds
# cargo's kubectl-agent_day2.d, which `kubectl plugin list` would rightly warn about).
mkdir -p "$dir/bin" && ln -s "$root/target/debug/kubectl-agent_day2" "$dir/bin/kubectl-agent_day2"
export KUBECONFIG="$dir/kubeconfig" PATH="$dir/bin:$PATH"
step() { printf '\n\033[1m$ %s\033[0m\n' "$*"; "$@"; }
step kubectl get nodes -o wide
step kubectl plugin list
step kubectl agent-day2 info
