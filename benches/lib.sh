# Shared set-up of the cluster benches (sourced inside `agent-day2-sim netns` with NODES and W
# set, from the repository's root): checks NODES, puts the addresses beyond 200 nodes on
# loopback, starts the simulated cluster on the real control plane in W/sim (with the registry
# when docker-registry is installed, else a release cache entry), exports KUBECONFIG and
# XDG_CACHE_HOME, defines node_ip, prefix_len and mk_config, and sets the EXIT trap that
# stops $APP (when set) and the simulator and removes W. B is the binaries' directory:
# target/debug, or target/release with RELEASE=1 (the caller built them).
[ "$NODES" -le 1000 ] || { echo "NODES must be <= 1000"; exit 2; }
# Up to 200 nodes: 192.168.111.30-229 (the machine network); more: 192.168.112.10-115.241, a
# /22 put on this namespace's loopback (outside the machine network: add-nodes warns, as it
# does for routed remote workers).
if [ "$NODES" -gt 200 ]; then
    ip addr add 192.168.112.1/22 dev lo
fi
node_ip() { # node_ip I: the address of bench host I (1-based)
    if [ "$NODES" -le 200 ]; then
        echo "192.168.111.$((29 + $1))"
    else
        local j=$(($1 + 9))
        echo "192.168.$((112 + j / 256)).$((j % 256))"
    fi
}
prefix_len() { if [ "$NODES" -le 200 ]; then echo 24; else echo 22; fi; }
B="$PWD/target/$([ "${RELEASE:-}" = 1 ] && echo release || echo debug)"
chmod 700 "$W"
REG=()
[ -x /usr/bin/docker-registry ] && REG=(--registry)
"$B/agent-day2-sim" up --dir "$W/sim" --listen 192.168.111.5:6443 "${REG[@]}" >"$W/sim.log" 2>&1 &
SIM=$!
APP=
trap '[ -n "$APP" ] && kill $APP 2>/dev/null; kill $SIM 2>/dev/null; wait 2>/dev/null; rm -rf "$W"' EXIT
for _ in $(seq 1 1200); do [ -f "$W/sim/ready" ] && break; sleep 0.1; done
[ -f "$W/sim/ready" ] || { cat "$W/sim.log"; echo "simulator did not start"; exit 1; }
export KUBECONFIG="$W/sim/kubeconfig" XDG_CACHE_HOME="$W/cache"
unset HTTPS_PROXY https_proxy HTTP_PROXY http_proxy

if [ ${#REG[@]} -eq 0 ]; then
REL=$(kubectl get clusterversion version -o jsonpath='{.status.history[0].image}')
DIG=${REL#*@}
mkdir -p "$XDG_CACHE_HOME/agent-day2/releases"
img() { printf 'quay.io/openshift-release-dev/ocp-v4.0-art-dev@sha256:%s' "$(printf "$1%.0s" $(seq 64))"; }
printf '{"releaseImage":"%s","platforms":{"x86_64":{"apiServer":"%s","nodeAgent":"%s","orchestrator":"%s","utils":"%s","machineOsImages":null}}}' \
    "$REL" "$(img 1)" "$(img 2)" "$(img 3)" "$(img 4)" >"$XDG_CACHE_HOME/agent-day2/releases/$DIG.json"
fi

# nodes-config with N static hosts named $1-i at node_ip i.
mk_config() {
    local prefix=$1 n=$2 macbyte=$3 out=$4
    echo "hosts:" >"$out"
    for i in $(seq 1 "$n"); do
        mac=$(printf '52:54:00:%s:%02x:%02x' "$macbyte" $((i / 256)) $((i % 256)))
        cat >>"$out" <<Y
- hostname: $prefix-$i
  interfaces: [{name: eth0, macAddress: "$mac"}]
  networkConfig:
    interfaces:
    - {name: eth0, type: ethernet, state: up, mac-address: "$mac", ipv4: {enabled: true, dhcp: false, address: [{ip: $(node_ip "$i"), prefix-length: $(prefix_len)}]}}
Y
    done
}

