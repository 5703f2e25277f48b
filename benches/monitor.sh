#!/usr/bin/env bash
# Benchmark of `monitor --approve` following many new nodes at once against the simulated cluster
# on the real control plane (issue 12: 500 nodes, assisted-service requests in flight bounded):
# NODES (default 500, at most 1000) static hosts in one batch booted by one `agent-day2-sim
# boot` from PXE files; one `monitor --approve --yes --max-in-flight BOUND -o json` run follows
# them all (polling each host's assisted-service, recording the reboot reports, approving the
# kubelet CSRs bound to them) until every node is Ready with its serving certificate. Prints
# the wall time from the boot's start until monitor exits, monitor's request statistics (sent,
# most in flight, the bound, how many waited for a slot) and its CPU time. Targets: every node
# done (exit 0) and most in flight <= BOUND.
#
# Usage: bash benches/monitor.sh [NODES] [BOUND]. Builds the debug binaries (RELEASE=1: the
# release ones); runs itself inside `agent-day2-sim netns` (nothing leaves it).
set -euo pipefail
cd "$(dirname "$0")/.."
NODES="${1:-500}"
BOUND="${2:-16}"
if [ "${AGENT_DAY2_NETNS:-}" != 1 ]; then
    cargo build --quiet ${RELEASE:+--release} -p oc-agent-day2 -p agent-day2-sim
    exec "target/$([ "${RELEASE:-}" = 1 ] && echo release || echo debug)/agent-day2-sim" netns -- bash "$0" "$NODES" "$BOUND"
fi
W="$(mktemp -d "${TMPDIR:-/tmp}/monitor-bench.XXXXXX")"
# shellcheck source=benches/lib.sh
. benches/lib.sh

mk_config mon "$NODES" cc "$W/mon.yaml"
"$B/kubectl-agent_day2" add-nodes --nodes-config "$W/mon.yaml" --dir "$W/mon" --pxe >/dev/null 2>&1
BOOTARGS=()
for i in $(seq 1 "$NODES"); do
    BOOTARGS+=(--node "$(printf '52:54:00:cc:%02x:%02x' $((i / 256)) $((i % 256)))=$(node_ip "$i")")
done
start=$(date +%s.%N)
# 200 ms stages, so monitor's 100 ms polls see each host's reboot report.
bash -c 'TIMEFORMAT="monitor cpu: user %U s, sys %S s, wall %R s"; time "$0" monitor --approve --yes --poll-interval 100ms --max-in-flight "$1" -o json --timeout 20m' \
    "$B/kubectl-agent_day2" "$BOUND" >"$W/monitor.out" 2>"$W/monitor.err" &
APP=$!
"$B/agent-day2-sim" boot --dir "$W/sim" --pxe-dir "$W/mon/boot-artifacts" "${BOOTARGS[@]}" \
    --stage-delay-ms 200 --timeout 20m >"$W/boot.log" 2>&1 &
BOOT=$!
set +e
wait $APP; rc=$?
end=$(date +%s.%N)
APP=
wait $BOOT; brc=$?
set -e
python3 - "$start" "$end" "$NODES" "$BOUND" "$rc" "$brc" "$W/monitor.out" <<'PY'
import json, sys
s, e, n, bound, rc, brc, out = float(sys.argv[1]), float(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), sys.argv[5], sys.argv[6], sys.argv[7]
last = None
for line in open(out):
    line = line.strip()
    if line.startswith("{"):
        try:
            last = json.loads(line)
        except ValueError:
            pass
req = (last or {}).get("requests") or {}
most = req.get("maxInFlight")
ok = rc == "0" and most is not None and most <= bound
print(f"{n} nodes followed by one monitor --approve run: {e - s:.1f} s (monitor exit {rc}, boot exit {brc}); "
      f"assisted-service requests: {req.get('requests')} sent, at most {most} in flight (bound {bound}), "
      f"{req.get('waited')} waited for a slot: {'ok' if ok else 'MISSED'}")
PY
[ "$rc" = 0 ] || { tail -20 "$W/monitor.err"; tail -20 "$W/boot.log"; }
grep -h 'cpu:' "$W/monitor.err" || true
