# Sourced by run.sh: the assisted-service env, as src/ignition/env.rs writes it, with the
# spike's deviations: DUMMY_IGNITION=true, WORK_DIR under $SPIKE_DIR, INFRA_ENV_ID unset.
D=${SPIKE_DIR:-/tmp/node0-real}
V=4.18.12; MM=4.18
export AUTH_TYPE=agent-installer-local
export EC_PUBLIC_KEY_PEM=$(cat $D/keys/pub.b64)
export USER_AUTH_TOKEN=$(cat $D/keys/user)
export WATCHER_AUTH_TOKEN=$(cat $D/keys/watcher)
export DB_HOST=127.0.0.1 DB_PORT=5432 DB_USER=admin DB_PASS=admin DB_NAME=installer
export DEPLOY_TARGET=onprem STORAGE=filesystem INSTALL_INVOKER=agent-installer
export DUMMY_IGNITION=true IPV6_SUPPORT=true DISK_ENCRYPTION_SUPPORT=true NTP_DEFAULT_SERVER=
export HW_VALIDATOR_REQUIREMENTS='[{"version":"default","master":{"cpu_cores":4,"ram_mib":16384,"disk_size_gb":100,"installation_disk_speed_threshold_ms":10,"network_latency_threshold_ms":100,"packet_loss_percentage":0},"arbiter":{"cpu_cores":2,"ram_mib":8192,"disk_size_gb":50,"installation_disk_speed_threshold_ms":10,"network_latency_threshold_ms":1000,"packet_loss_percentage":0},"worker":{"cpu_cores":2,"ram_mib":8192,"disk_size_gb":100,"installation_disk_speed_threshold_ms":10,"network_latency_threshold_ms":1000,"packet_loss_percentage":10},"sno":{"cpu_cores":8,"ram_mib":16384,"disk_size_gb":100,"installation_disk_speed_threshold_ms":10},"edge-worker":{"cpu_cores":2,"ram_mib":8192,"disk_size_gb":15,"installation_disk_speed_threshold_ms":10}}]'
export RELEASE_IMAGES="[{\"openshift_version\":\"$MM\",\"cpu_architecture\":\"x86_64\",\"cpu_architectures\":[\"x86_64\"],\"url\":\"quay.io/openshift-release-dev/ocp-release:$V-x86_64\",\"version\":\"$V\"}]"
export OS_IMAGES="[{\"openshift_version\":\"$MM\",\"cpu_architecture\":\"x86_64\",\"url\":\"https://example.test/rhcos-live.x86_64.iso\",\"version\":\"418.94.202501221327-0\"}]"
export PUBLIC_CONTAINER_REGISTRIES=quay.io
export ENABLE_UPGRADE_AGENT=false ENABLE_DATA_COLLECTION=false
export ASSISTED_SERVICE_HOST=127.0.0.1:8090 ASSISTED_SERVICE_SCHEME=http IMAGE_SERVICE_BASE_URL=http://127.0.0.1:8888/
export WORK_DIR=$D/data/
