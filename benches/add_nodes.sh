#!/usr/bin/env bash
# Benchmark: the whole `add-nodes` for 50 hosts (static IPv4, NMState compiled per host) against
# the simulated cluster, with the base ISO already in the cache (so the time is the plugin's:
# cluster reads, validation, auth, Ignition, xz, the sha256 check of the cached ISO, the ISO
# copy, the batch record). Target: under 5 s. Prints the wall time of each of 3 runs.
#
# Usage: bash benches/add_nodes.sh [HOSTS]   (default 50). Builds the debug binaries; runs
# itself inside `agent-day2-sim netns` (a private network namespace).
set -euo pipefail
cd "$(dirname "$0")/.."
HOSTS="${1:-50}"
if [ "${AGENT_DAY2_NETNS:-}" != 1 ]; then
    cargo build --quiet -p oc-agent-day2 -p agent-day2-sim
    exec target/debug/agent-day2-sim netns -- bash "$0" "$HOSTS"
fi
B="$PWD/target/debug"
W="$(mktemp -d "${TMPDIR:-/tmp}/add-nodes-bench.XXXXXX")"
# With Debian's docker-registry the simulator serves the release payload (--registry); the
# warm-up run below fills the plugin's caches from it.
REG=()
[ -x /usr/bin/docker-registry ] && REG=(--registry)
"$B/agent-day2-sim" up --dir "$W/sim" --listen 192.168.111.5:6443 "${REG[@]}" >"$W/sim.log" 2>&1 &
SIM=$!
trap 'kill $SIM 2>/dev/null; wait $SIM 2>/dev/null; rm -rf "$W"' EXIT
for _ in $(seq 1 300); do [ -f "$W/sim/ready" ] && break; sleep 0.1; done
[ -f "$W/sim/ready" ] || { cat "$W/sim.log"; echo "simulator did not start"; exit 1; }
export KUBECONFIG="$W/sim/kubeconfig" XDG_CACHE_HOME="$W/cache"
unset HTTPS_PROXY https_proxy HTTP_PROXY http_proxy

# Without a registry: the release's component images seeded into the per-digest cache (as
# tests/add_nodes.rs's seed_release does).
if [ ${#REG[@]} -eq 0 ]; then
REL=$(kubectl get clusterversion version -o jsonpath='{.status.history[0].image}')
DIG=${REL#*@}
mkdir -p "$XDG_CACHE_HOME/agent-day2/releases"
img() { printf 'quay.io/openshift-release-dev/ocp-v4.0-art-dev@sha256:%s' "$(printf "$1%.0s" $(seq 64))"; }
printf '{"releaseImage":"%s","platforms":{"x86_64":{"apiServer":"%s","nodeAgent":"%s","orchestrator":"%s","utils":"%s","machineOsImages":null}}}' \
    "$REL" "$(img 1)" "$(img 2)" "$(img 3)" "$(img 4)" >"$XDG_CACHE_HOME/agent-day2/releases/$DIG.json"
fi

nc="$W/nodes-config.yaml"
echo "hosts:" >"$nc"
for i in $(seq 1 "$HOSTS"); do
    mac=$(printf '52:54:00:bb:%02x:%02x' $((i / 256)) $((i % 256)))
    cat >>"$nc" <<Y
- hostname: bench-$i
  rootDeviceHints: {deviceName: /dev/sda}
  interfaces: [{name: eth0, macAddress: "$mac"}]
  networkConfig:
    interfaces:
    - name: eth0
      type: ethernet
      state: up
      mac-address: "$mac"
      ipv4: {enabled: true, dhcp: false, address: [{ip: 192.168.111.$((99 + i)), prefix-length: 24}]}
    dns-resolver: {config: {server: [192.168.111.1]}}
    routes: {config: [{destination: 0.0.0.0/0, next-hop-address: 192.168.111.1, next-hop-interface: eth0}]}
Y
done
# Warm the base ISO cache (a download from the simulator's file server), not timed.
"$B/kubectl-agent_day2" add-nodes --nodes-config "$nc" --dir "$W/warm" --dry-run >/dev/null
"$B/kubectl-agent_day2" add-nodes --mac-address 52:54:00:cc:00:01 --hostname warm-0 --dir "$W/warm" >/dev/null
for run in 1 2 3; do
    start=$(date +%s.%N)
    "$B/kubectl-agent_day2" add-nodes --nodes-config "$nc" --dir "$W/out$run" -o json >"$W/r$run.json"
    end=$(date +%s.%N)
    python3 - "$W/r$run.json" "$start" "$end" "$HOSTS" "$run" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
t = float(sys.argv[3]) - float(sys.argv[2])
print(f"run {sys.argv[5]}: add-nodes for {sys.argv[4]} hosts: {t:.2f} s  (base ISO {r['baseIso']['source']}, "
      f"Ignition {r['ignition']['archiveBytes']} B compressed of {r['ignition']['areaBytes']} B, target < 5 s: {'ok' if t < 5 else 'MISSED'})")
PY
done
