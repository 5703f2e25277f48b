#!/usr/bin/env bash
# Runs inside the network namespace made by scripts/demo.sh.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
dir=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null; wait 2>/dev/null; rm -rf "$dir"' EXIT
# --registry: a real registry (docker-registry on 192.168.111.6:5000, TLS from the simulator's CA,
# credentials in the cluster's pull secret) holds the release payload the cluster names, so
# add-nodes reads the component images and the machine-os-images ISO from it, as from quay.io.
# migrate (second part) needs the assisted-service and Hive CRDs on the cluster: assisted-service's
# own where its source tree is on this machine (scripts/real-components.sh assisted links it), else
# the simulator's permissive stand-ins (same names and scopes); `agent-day2-sim upstream` finds
# them as the tests do. And real PostgreSQL servers, run as the postgres user (root only; demo.sh
# installs Debian's postgresql).
bin="${CARGO_TARGET_DIR:-$root/target}/debug"
sim="$bin/agent-day2-sim"
if crd_dirs=$("$sim" upstream assisted-crds 2>"$dir/crds.err"); then
  crd_note="assisted-service's own CRDs"
else
  crd_dirs=$("$sim" upstream permissive-assisted-crds)
  crd_note="permissive stand-ins for assisted-service's CRDs; $(cat "$dir/crds.err")"
fi
migrate_extra=()
migrate_why=
real_bin=
if [ "$(id -u)" != 0 ]; then
  migrate_why="needs root (PostgreSQL runs as the postgres user)"
elif ! ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1; then
  migrate_why="needs Debian's postgresql (apt-get install postgresql; demo.sh installs it as root)"
else
  "$sim" postgres --dir "$dir/dst-db" >"$dir/dst-db.log" 2>&1 &
  for _ in $(seq 1 300); do [ -f "$dir/dst-db/ready" ] && break; sleep 0.1; done
  [ -f "$dir/dst-db/ready" ] || { cat "$dir/dst-db.log" >&2; exit 1; }
  while IFS= read -r d; do migrate_extra+=(--crds "$d"); done <<<"$crd_dirs"
  migrate_extra+=(--assisted-db-url "$(cat "$dir/dst-db/url")")
  # With the real assisted-service built (demo.sh), migrate runs on the real pair: node 0 is the
  # real service driven to its state before the reboot, and cluster 0's database gets the schema
  # its real service makes (port 8080 stays free for that service's metrics server).
  if real_bin=$("$sim" upstream assisted-service-bin 2>/dev/null); then
    "$sim" assisted-schema --db-url "$(cat "$dir/dst-db/url")" --bin-dir "$real_bin"
    migrate_extra+=(--files-listen 192.168.111.5:8081)
  else
    real_bin=
  fi
fi
# The cluster runs on the real control plane demo.sh built (the control-plane nodes' kubelets,
# the scheduler and the volume provisioner are the simulator's).
"$sim" up --dir "$dir" --listen 192.168.111.5:6443 --registry "${migrate_extra[@]}" "$@" >"$dir/sim.log" 2>&1 &
for _ in $(seq 1 1200); do [ -f "$dir/ready" ] || [ -f "$dir/failed" ] && break; sleep 0.1; done
[ -f "$dir/ready" ] || { cat "$dir/sim.log" >&2; echo "simulator did not start" >&2; exit 1; }
# Install the plugin the way a user would: one executable on PATH (target/debug also holds
# cargo's kubectl-agent_day2.d, which `kubectl plugin list` would rightly warn about).
mkdir -p "$dir/bin" && ln -s "$bin/kubectl-agent_day2" "$dir/bin/kubectl-agent_day2"
export KUBECONFIG="$dir/kubeconfig" PATH="$dir/bin:$PATH"
step() { printf '\n\033[1m$ %s\033[0m\n' "$*"; "$@"; }
# What is real here and what is played (docs/real-vs-simulated.md).
real_parts="kube-apiserver, etcd and kube-controller-manager (the control plane), kubectl, docker-registry (the release payload), coreos-installer"
if [ -n "$migrate_why" ]; then :; else real_parts="$real_parts, PostgreSQL"; fi
if [ -n "$real_bin" ]; then
  n0_played="node 0's three hosts in the migrate part (node 0's assisted-service and cluster 0's are real)"
else
  n0_played="node 0's REST API in the migrate part"
fi
cat <<EOF

Real programs in this demo: $real_parts.
Also real where its source is on this machine: assisted-service and its agent-based-installer
client, judging the node ISO (the part after add-nodes says whether it runs).
Played by the simulator: the RHCOS machines (boot, disk install, their kubelets), the control-plane
nodes' kubelets, the scheduler and the volume provisioner, $n0_played.
EOF
step kubectl get nodes -o wide
step kubectl version
step kubectl plugin list
step kubectl agent-day2 info

# --- add-nodes, the main job, end to end: two new workers (one static IP, one DHCP).
# The release payload comes from the simulator's registry (a fresh cache: nothing is faked).
export XDG_CACHE_HOME_ORIG="${XDG_CACHE_HOME:-}" XDG_CACHE_HOME="$dir/cache"
step kubectl get clusterversion version -o jsonpath='{.status.history[0].image}{"\n"}'
cat >"$dir/nodes-config.yaml" <<'Y'
hosts:
- hostname: worker-0
  rootDeviceHints: {deviceName: /dev/vda}
  interfaces: [{name: eth0, macAddress: "52:54:00:aa:00:30"}]
  networkConfig:
    interfaces:
    - name: eth0
      type: ethernet
      state: up
      mac-address: "52:54:00:aa:00:30"
      ipv4: {enabled: true, dhcp: false, address: [{ip: 192.168.111.30, prefix-length: 24}]}
- hostname: worker-1
  interfaces: [{name: eth0, macAddress: "52:54:00:aa:00:31"}]
Y
step kubectl agent-day2 add-nodes --nodes-config "$dir/nodes-config.yaml" --dir "$dir/out"
step ls -l "$dir/out"
step kubectl agent-day2 add-nodes batch list

# --- The real consumer judges the ISO: worker-1's machine boots it in agent-day2-sim run-node,
# whose units start the REAL assisted-service and agent-based-installer client (built by
# scripts/real-components.sh), until the host is installing. Skipped, saying why, where they
# could not be built (the module proxy of the project's machines refuses the module).
real_bin="${AGENT_DAY2_REAL_BIN:-${XDG_CACHE_HOME_ORIG:-$HOME/.cache}/agent-day2/real/063b257950f7/bin}"
if [ -x "$real_bin/assisted-service" ] && [ -x "$real_bin/agent-installer-client" ]; then
  # The component images the ISO's units name (podman's stand-in maps exactly these).
  env_of() {
    coreos-installer iso ignition show "$dir/out/node.x86_64.iso" | python3 -c '
import json, sys, urllib.parse
cfg = json.load(sys.stdin)
f = next(f for f in cfg["storage"]["files"] if f["path"] == "/usr/local/share/assisted-service/agent-images.env")
text = urllib.parse.unquote(f["contents"]["source"].split(",", 1)[1])
print(next(l.split("=", 1)[1] for l in text.splitlines() if l.startswith(sys.argv[1] + "=")))' "$1"
  }
  echo
  echo "The real consumer, built from source (scripts/real-components.sh, $real_bin/versions):"
  sed 's/^/  /' "$real_bin/versions"
  printf '\n\033[1m$ agent-day2-sim run-node --iso %s --node 52:54:00:aa:00:31=192.168.111.32/24 (the real assisted-service)\033[0m\n' "$dir/out/node.x86_64.iso"
  "$sim" run-node --iso "$dir/out/node.x86_64.iso" --work "$dir/run-node" \
      --bin-dir "$real_bin" --node 52:54:00:aa:00:31=192.168.111.32/24 \
      --image "api-server=$(env_of SERVICE_IMAGE)" --image "node-agent=$(env_of AGENT_DOCKER_IMAGE)" \
      --dns api.ostest.example.com=192.168.111.5 --dns api-int.ostest.example.com=192.168.111.5 \
      --dns "console-openshift-console.apps.ostest.example.com=192.168.111.4" \
      --time-scale 0.1 --timeout 8m
else
  echo
  echo "real assisted-service part skipped: no binaries in $real_bin (the module proxy refuses the module here: set AGENT_DAY2_ASSISTED_SERVICE_SRC to a clone of it, README \"Where the assisted-service source comes from\")"
fi
# Boot the ISO on two simulated machines (their console goes to a log), then follow them with
# monitor, which checks and approves their kubelet CSRs (--approve --yes) until both are Ready
# with their serving certificates. worker-1 has no static address: monitor learns it from
# --ip-addresses once the host's own assisted-service answers with the batch token.
printf '\n\033[1m$ agent-day2-sim boot --dir %s --iso %s --node 52:54:00:aa:00:30=192.168.111.30 --node 52:54:00:aa:00:31=192.168.111.32 &\033[0m\n' "$dir" "$dir/out/node.x86_64.iso"
"$sim" boot --dir "$dir" --iso "$dir/out/node.x86_64.iso" \
    --node 52:54:00:aa:00:30=192.168.111.30 --node 52:54:00:aa:00:31=192.168.111.32 --timeout 180s >"$dir/boot.log" 2>&1 &
boot=$!
step kubectl agent-day2 monitor --approve --yes --ip-addresses 192.168.111.30,192.168.111.32 --timeout 3m
wait "$boot"
step kubectl get csr
step kubectl get nodes -o wide

# --- migrate (seed 001): node 0's ephemeral assisted-service data onto this cluster (cluster 0).
if [ -n "$migrate_why" ]; then
  echo
  echo "migrate part not run: $migrate_why" >&2
  # As root (the README's way) PostgreSQL is there (demo.sh installs it): then it is an error.
  [ "$(id -u)" = 0 ] && exit 1
  exit 0
fi
echo
echo "migrate: cluster 0 serves $crd_note"
"$sim" postgres --dir "$dir/src-db" >"$dir/src-db.log" 2>&1 &
for _ in $(seq 1 300); do [ -f "$dir/src-db/ready" ] && break; sleep 0.1; done
if [ -n "$real_bin" ]; then
  # node 0 is the real assisted-service (REST mode, its own database, 192.168.111.20:8090): the
  # real agent-installer client registers the cluster, three host stand-ins install it up to the
  # moment node 0 would reboot (about a minute; progress in node0.log).
  echo "migrate: node 0 is the real assisted-service, driven through a compact install (about a minute)"
  "$sim" node0 --real --bin-dir "$real_bin" --dir "$dir/node0" --listen 192.168.111.20:8090 \
      --db-url "$(cat "$dir/src-db/url")" >"$dir/node0.log" 2>&1 &
  node0_pid=$!
else
  # node 0 after a finished compact install, played by the simulator (no real assisted-service here).
  echo "migrate: node 0 is the simulator's stand-in (the real assisted-service is not built here)"
  "$sim" node0 --dir "$dir/node0" --listen 192.168.111.20:8090 \
      --db-url "$(cat "$dir/src-db/url")" >"$dir/node0.log" 2>&1 &
fi
for _ in $(seq 1 3000); do [ -f "$dir/node0/ready" ] && break; sleep 0.2; done
[ -f "$dir/node0/ready" ] || { cat "$dir/node0.log" >&2; exit 1; }
grep '^node0: held' "$dir/node0.log" || true
step kubectl agent-day2 migrate export --from "$(cat "$dir/node0/ready")" \
    --token-file "$dir/node0/user-token" --db-url "$(cat "$dir/src-db/url")" --out "$dir/bundle"
step kubectl agent-day2 migrate import "$dir/bundle" --dry-run
step kubectl agent-day2 migrate import "$dir/bundle"
step kubectl agent-day2 migrate status "$dir/bundle"
step kubectl agent-day2 migrate wait "$dir/bundle" --timeout 1m
step kubectl get clusterdeployments,agentclusterinstalls,infraenvs,agents -n agent-cluster
if [ -n "$real_bin" ]; then
  # wait said the import is complete: node 0 reboots now, and its assisted-service goes away.
  kill "$node0_pid"; wait "$node0_pid" 2>/dev/null || true
  # Cluster 0's own assisted-service, real, in kube-api mode as the infrastructure operator runs it
  # (its service account bound here to cluster-admin), started on what import left.
  echo
  echo "migrate: node 0 rebooted (its assisted-service is gone); starting cluster 0's real assisted-service on the imported data"
  kubectl create clusterrolebinding demo:assisted-service --clusterrole cluster-admin \
      --serviceaccount multicluster-engine:assisted-service >/dev/null
  kubectl create token assisted-service -n multicluster-engine --duration 1h >"$dir/c0-token"
  "$sim" cluster0-service --dir "$dir/c0svc" --api-url "$(head -1 "$dir/ready")" --ca-file "$dir/ca.crt" \
      --token-file "$dir/c0-token" --db-url "$(cat "$dir/dst-db/url")" \
      --storage "$dir/volumes/multicluster-engine/assisted-service" --listen 192.168.111.7:8090 \
      --bin-dir "$real_bin" >"$dir/c0svc.log" 2>&1 &
  for _ in $(seq 1 600); do [ -f "$dir/c0svc/ready" ] && break; sleep 0.2; done
  [ -f "$dir/c0svc/ready" ] || { cat "$dir/c0svc.log" >&2; exit 1; }
  reconciled=
  for _ in $(seq 1 120); do
    case "$(kubectl get agentclusterinstall -n agent-cluster -o jsonpath='{.items[0].status.debugInfo.eventsURL}')" in
      http://192.168.111.7:8090/*) reconciled=1; break ;;
    esac
    sleep 1
  done
  [ -n "$reconciled" ] || { tail -40 "$dir/c0svc/service.log" >&2; echo "cluster 0's assisted-service did not reconcile in 2 minutes" >&2; exit 1; }
  step kubectl agent-day2 migrate status "$dir/bundle"
  step kubectl get agentclusterinstalls,agents -n agent-cluster \
      -o custom-columns=KIND:.kind,NAME:.metadata.name,STATE:.status.debugInfo.state,INFO:.status.debugInfo.stateInfo
  events=$(kubectl get agentclusterinstall -n agent-cluster -o jsonpath='{.items[0].status.debugInfo.eventsURL}')
  printf '\n\033[1m$ curl -s "$(kubectl get agentclusterinstall -n agent-cluster -o jsonpath={.items[0].status.debugInfo.eventsURL})" | jq length\033[0m\n'
  curl -s "$events" | jq length
  echo "(node 0 had $(jq length "$dir/bundle/api/events-"*.json | head -1) cluster events; cluster 0's service serves them and its own)"
  # One host's logs through its Agent's logsURL: the archive the host uploaded to node 0.
  agent=$(kubectl get agents -n agent-cluster -o jsonpath='{.items[0].metadata.name}')
  logs=$(kubectl get agent "$agent" -n agent-cluster -o jsonpath='{.status.debugInfo.logsURL}')
  printf '\n\033[1m$ curl -s "$(kubectl get agent %s -n agent-cluster -o jsonpath={.status.debugInfo.logsURL})" | tar -xOf - | sha256sum\033[0m\n' "$agent"
  curl -s "$logs" | tar -xOf - | sha256sum
  cid=$(jq -r .cluster.id "$dir/bundle/manifest.json")
  echo "(node 0 stored $(sha256sum <"$dir/node0/real/data/$cid/logs/$agent/logs.tar.gz" | cut -d' ' -f1): the same bytes)"
fi
