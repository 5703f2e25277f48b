#!/bin/bash
# The experiment of 2026-12-03 (README.md beside it). As root: ./run.sh  (re-execs itself in a private netns).
# PG (as user postgres) + real assisted-service + real agent-installer-client registerCluster/registerInfraEnv.
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
D=${WORK:-/tmp/node0-real}; export SPIKE_DIR=$D
BIN=${AGENT_DAY2_REAL_BIN:-$HOME/.cache/agent-day2/real/063b257950f7/bin}   # scripts/real-components.sh assisted
if [ "${IN_NS:-}" != 1 ]; then exec env IN_NS=1 unshare -n "$0" "$@"; fi
mkdir -p $D && cp -r $HERE/manifests $HERE/extra-manifests $HERE/bin $HERE/keys.py $HERE/hosts.py $HERE/service.env.sh $D/
[ -f $D/keys/user ] || (cd $D && python3 keys.py >/dev/null)
ip link set lo up
PGB=$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -1)
rm -rf $D/pg $D/data $D/out; mkdir -p $D/pg $D/data $D/out; chown postgres $D/pg; chmod o+x $D
runuser -u postgres -- $PGB/initdb -D $D/pg/data -A trust -U postgres --no-sync >$D/out/initdb.log 2>&1 || { echo initdb failed; cat $D/out/initdb.log; exit 1; }
runuser -u postgres -- $PGB/pg_ctl -D $D/pg/data -l $D/pg/log -o "-c listen_addresses=127.0.0.1 -c port=5432 -c fsync=off -k $D/pg" -w start >/dev/null || { cat $D/pg/log; exit 1; }
psql -h 127.0.0.1 -U postgres -qc "CREATE ROLE admin LOGIN SUPERUSER PASSWORD 'admin'" -c "CREATE DATABASE installer OWNER admin"
source $D/service.env.sh
( cd $D/data && PATH=$D/bin:$PATH exec $BIN/assisted-service ) >$D/out/service.log 2>&1 &
SVC=$!; echo "service pid $SVC"
U=$(cat $D/keys/user); API=http://127.0.0.1:8090/api/assisted-install/v2
for i in $(seq 1 120); do
  code=$(curl -s -o /dev/null -w '%{http_code}' -H "Authorization: $U" $API/clusters); [ "$code" = 200 ] && break
  kill -0 $SVC 2>/dev/null || { echo "service died"; tail -30 $D/out/service.log; break; }; sleep 1
done; echo "service answered $code after ${i}s"
client() {  # the real client, /etc/assisted on a private tmpfs; its client_config copied out
  rm -rf $D/etcov; mkdir -p $D/etcov/up $D/etcov/work
  unshare -m --propagation private bash -c "mount -t overlay overlay -o lowerdir=/etc,upperdir=$D/etcov/up,workdir=$D/etcov/work /etc && mkdir -p /etc/assisted || echo 'overlay on /etc failed: client_config not captured' >&2
    env -i PATH=$D/bin:/usr/bin:/bin HOME=/root SERVICE_BASE_URL=http://127.0.0.1:8090/ USER_AUTH_TOKEN=$U \
      CLUSTER_DEPLOYMENT_FILE=$D/manifests/cluster-deployment.yaml AGENT_CLUSTER_INSTALL_FILE=$D/manifests/agent-cluster-install.yaml \
      INFRA_ENV_FILE=$D/manifests/infraenv.yaml PULL_SECRET_FILE=$D/manifests/pull-secret.yaml \
      CLUSTER_IMAGE_SET_FILE=$D/manifests/cluster-image-set.yaml NMSTATE_CONFIG_FILE=${NMSTATE:-$D/manifests/nmstateconfig.yaml} \
      EXTRA_MANIFESTS_PATH=$D/extra-manifests OPERATOR_INSTALL_FILE=$D/manifests/operators.yaml OC_LOG=$D/out/oc.log \
      $BIN/agent-installer-client $1; rc=\$?; cat /etc/assisted/client_config > $D/out/client_config.$1 2>/dev/null; exit \$rc"
}
client registerCluster >$D/out/registerCluster.log 2>&1; echo "registerCluster rc=$?"; tail -5 $D/out/registerCluster.log
client registerInfraEnv >$D/out/registerInfraEnv.log 2>&1; echo "registerInfraEnv rc=$?"; tail -5 $D/out/registerInfraEnv.log
cat $D/out/client_config.* 2>/dev/null; echo
sleep ${SETTLE:-12}   # let the cluster monitor refresh status/validations
curl -s -H "Authorization: $U" $API/clusters > $D/out/clusters.json
curl -s -H "Authorization: $U" $API/infra-envs > $D/out/infra-envs.json
jq -r '.[] | "cluster \(.id) \(.name) status=\(.status) info=\(.status_info) platform=\(.platform.type) umn=\(.user_managed_networking) ha=\(.high_availability_mode) cp=\(.control_plane_count) ver=\(.openshift_version)"' $D/out/clusters.json
jq -r '.[0].validations_info | fromjson | to_entries[] | .value[] | "  \(.status)\t\(.id)\t\(.message)"' $D/out/clusters.json
jq -r '.[] | "infraenv \(.id) \(.name) cluster=\(.cluster_id) type=\(.type) static=\(.static_network_config|length)"' $D/out/infra-envs.json
if [ -n "${AGENTS:-}" ]; then IE=$(jq -r '.[0].id' $D/out/infra-envs.json); python3 $D/hosts.py $IE 2>&1 | tee $D/out/hosts.log
  curl -s -H "Authorization: $U" $API/clusters > $D/out/clusters2.json
  jq -r '.[] | "cluster after agents: status=\(.status) info=\(.status_info)"' $D/out/clusters2.json
  jq -r '.[0].validations_info | fromjson | to_entries[] | .value[] | select(.status!="success") | "  \(.status)\t\(.id)\t\(.message)"' $D/out/clusters2.json; fi
[ -n "${HOLD:-}" ] && { echo "holding; service pid $SVC"; wait $SVC; }
kill $SVC; wait $SVC 2>/dev/null
runuser -u postgres -- $PGB/pg_ctl -D $D/pg/data -m immediate stop >/dev/null
