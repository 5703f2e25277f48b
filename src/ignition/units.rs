//! The systemd units and scripts of the day-2 live system (node-contract.md "Units (roles)",
//! research/node-image.md §5): written from the roles, not copied from any template.
//!
//! Order of a boot (every unit `After=` what it needs):
//! `pre-network-manager-config` (keyfiles by MAC, before NetworkManager) →
//! `set-hostname` (name by MAC) → `assisted-service-pod` → `assisted-service-db` →
//! `assisted-service` (REST on :8090) → `agent-import-cluster` (POST /v2/clusters/import) →
//! `agent-register-infraenv` → `agent` (discovery agent) and `apply-host-config` (root device,
//! role) → `agent-add-node` (install once the host is `known`). `agent-auth-token-status`
//! runs on its own and shows a console message once the token has expired.

/// Environment files the units read (paths are node-contract facts).
pub const SERVICE_ENV: &str = "/usr/local/share/assisted-service/assisted-service.env";
/// Component image pull specs (not secret).
pub const IMAGES_ENV: &str = "/usr/local/share/assisted-service/images.env";
/// Database settings of the local assisted-service (secret: its password).
pub const DB_ENV: &str = "/usr/local/share/assisted-service/assisted-db.env";
/// Day-2 marker and cluster identity.
pub const ADD_NODES_ENV: &str = "/etc/assisted/add-nodes.env";
/// Rendezvous settings (the node is its own rendezvous host).
pub const RENDEZVOUS_ENV: &str = "/etc/assisted/rendezvous-host.env";
/// The pull secret for podman (root's legacy auth file, which podman reads).
pub const PODMAN_AUTH: &str = "/root/.docker/config.json";

/// A unit: name, contents (enabled through its `[Install]` section).
pub struct UnitText {
    /// e.g. `agent.service`.
    pub name: &'static str,
    /// Full unit file text.
    pub contents: String,
}

/// A script installed under `/usr/local/bin` (mode 0755).
pub struct Script {
    /// Absolute path.
    pub path: &'static str,
    /// Script text.
    pub contents: &'static str,
}

const INSTALL: &str = "\n[Install]\nWantedBy=multi-user.target\n";

/// `podman run` of a one-shot `agent-installer-client` command from the API server image,
/// with the service's env (tokens, InfraEnv ID) and the manifests/cluster config read-only.
fn client_run(cmd: &str) -> String {
    format!(
        "/usr/bin/podman run --rm --net host --authfile {PODMAN_AUTH} --env-file {SERVICE_ENV} --env-file {IMAGES_ENV} --env-file {ADD_NODES_ENV} --env-file {RENDEZVOUS_ENV} -v /etc/assisted:/etc/assisted:z,ro ${{SERVICE_IMAGE}} /usr/local/bin/agent-installer-client {cmd}"
    )
}

/// The units; `with_network` adds `pre-network-manager-config.service` (only images with
/// NMState keyfiles need it).
pub fn units(with_network: bool) -> Vec<UnitText> {
    let mut out = vec![
        UnitText {
            name: "assisted-service-pod.service",
            contents: format!(
                "[Unit]\nDescription=Pod of the local assisted-service (host network: API :8090, images :8888)\nWants=network-online.target\nAfter=network-online.target set-hostname.service\n\n[Service]\nType=oneshot\nRemainAfterExit=yes\nExecStartPre=-/usr/bin/podman pod rm --force assisted-service\nExecStart=/usr/bin/podman pod create --name assisted-service --network host\nExecStop=/usr/bin/podman pod rm --force assisted-service\n{INSTALL}"
            ),
        },
        UnitText {
            name: "assisted-service-db.service",
            contents: format!(
                "[Unit]\nDescription=Database of the local assisted-service\nRequires=assisted-service-pod.service\nAfter=assisted-service-pod.service\n\n[Service]\nEnvironmentFile={IMAGES_ENV}\nExecStartPre=-/usr/bin/podman rm --force assisted-db\nExecStart=/usr/bin/podman run --name assisted-db --pod assisted-service --authfile {PODMAN_AUTH} --env-file {DB_ENV} ${{SERVICE_IMAGE}} /bin/bash start_db.sh\nExecStop=/usr/bin/podman stop --ignore assisted-db\nRestart=on-failure\nRestartSec=5\n{INSTALL}"
            ),
        },
        UnitText {
            name: "assisted-service.service",
            contents: format!(
                "[Unit]\nDescription=Local assisted-service REST API (:8090) of this day-2 host\nRequires=assisted-service-db.service\nAfter=assisted-service-db.service\n\n[Service]\nEnvironmentFile={IMAGES_ENV}\nExecStartPre=-/usr/bin/podman rm --force assisted-service-api\nExecStart=/usr/bin/podman run --name assisted-service-api --pod assisted-service --authfile {PODMAN_AUTH} --env-file {SERVICE_ENV} --env-file {DB_ENV} --env-file {IMAGES_ENV} --env-file {RENDEZVOUS_ENV} -v /etc/assisted:/etc/assisted:z,ro -v {PODMAN_AUTH}:{PODMAN_AUTH}:z,ro ${{SERVICE_IMAGE}} /assisted-service\nExecStop=/usr/bin/podman stop --ignore assisted-service-api\nRestart=on-failure\nRestartSec=5\n{INSTALL}"
            ),
        },
        UnitText {
            name: "agent-import-cluster.service",
            contents: format!(
                "[Unit]\nDescription=Import the cluster into the local assisted-service (POST /v2/clusters/import, ignition endpoint, networking mode)\nConditionPathExists={ADD_NODES_ENV}\nRequires=assisted-service.service\nAfter=assisted-service.service\n\n[Service]\nType=oneshot\nRemainAfterExit=yes\nEnvironmentFile={IMAGES_ENV}\nExecStart={}\nRestart=on-failure\nRestartSec=10\n{INSTALL}",
                client_run("importCluster")
            ),
        },
        UnitText {
            name: "agent-register-infraenv.service",
            contents: format!(
                "[Unit]\nDescription=Register the InfraEnv of /etc/assisted/manifests\nRequires=agent-import-cluster.service\nAfter=agent-import-cluster.service\n\n[Service]\nType=oneshot\nRemainAfterExit=yes\nEnvironmentFile={IMAGES_ENV}\nExecStart={}\nRestart=on-failure\nRestartSec=10\n{INSTALL}",
                client_run("registerInfraEnv")
            ),
        },
        UnitText {
            name: "agent.service",
            contents: format!(
                "[Unit]\nDescription=Discovery agent: registers this host and runs the pre-flight validations\nRequires=agent-register-infraenv.service\nAfter=agent-register-infraenv.service set-hostname.service\n\n[Service]\nEnvironmentFile={IMAGES_ENV}\nEnvironmentFile={SERVICE_ENV}\nExecStartPre=-/usr/bin/podman rm --force agent\nExecStart=/usr/bin/podman run --name agent --privileged --net host --pid host --authfile {PODMAN_AUTH} -v /:/host:rslave -v /var/log:/var/log -v /run/systemd/journal/socket:/run/systemd/journal/socket -v /etc/pki:/etc/pki:ro -e PULL_SECRET_TOKEN=${{AGENT_AUTH_TOKEN}} ${{AGENT_DOCKER_IMAGE}} /usr/bin/agent --url http://127.0.0.1:8090 --infra-env-id ${{INFRA_ENV_ID}} --agent-version ${{AGENT_DOCKER_IMAGE}} --insecure=true\nExecStop=/usr/bin/podman stop --ignore agent\nRestart=on-failure\nRestartSec=5\n{INSTALL}"
            ),
        },
        UnitText {
            name: "apply-host-config.service",
            contents: format!(
                "[Unit]\nDescription=Apply this host's config from /etc/assisted/hostconfig (root device hints, role; matched by MAC)\nRequires=agent-register-infraenv.service\nAfter=agent-register-infraenv.service agent.service\n\n[Service]\nType=oneshot\nRemainAfterExit=yes\nEnvironmentFile={IMAGES_ENV}\nExecStart={}\nRestart=on-failure\nRestartSec=10\n{INSTALL}",
                client_run("configure")
            ),
        },
        UnitText {
            name: "set-hostname.service",
            contents: format!(
                "[Unit]\nDescription=Set the hostname from /etc/assisted/hostnames (by MAC)\nAfter=pre-network-manager-config.service\nBefore=NetworkManager.service\n\n[Service]\nType=oneshot\nRemainAfterExit=yes\nExecStart=/usr/local/bin/set-hostname.sh\n{INSTALL}"
            ),
        },
        UnitText {
            name: "agent-add-node.service",
            contents: format!(
                "[Unit]\nDescription=Start this host's installation once the local assisted-service reports it known\nConditionPathExists={ADD_NODES_ENV}\nRequires=agent.service apply-host-config.service\nAfter=agent.service apply-host-config.service\n\n[Service]\nType=oneshot\nRemainAfterExit=yes\nExecStart=/usr/local/bin/add-node.sh\nRestart=on-failure\nRestartSec=30\n{INSTALL}"
            ),
        },
        UnitText {
            name: "agent-auth-token-status.service",
            contents: format!(
                "[Unit]\nDescription=Show on the console when this image's auth token has expired\nConditionPathExists={ADD_NODES_ENV}\nBefore=getty.target\n\n[Service]\nType=oneshot\nRemainAfterExit=yes\nExecStart=/usr/local/bin/agent-auth-token-status.sh\n{INSTALL}"
            ),
        },
    ];
    if with_network {
        out.push(UnitText {
            name: "pre-network-manager-config.service",
            contents: format!(
                "[Unit]\nDescription=Copy this host's NetworkManager keyfiles (matched by MAC) before NetworkManager starts\nDefaultDependencies=no\nWants=network-pre.target\nAfter=systemd-udev-settle.service systemd-udev-trigger.service local-fs.target\nBefore=network-pre.target NetworkManager.service\n\n[Service]\nType=oneshot\nRemainAfterExit=yes\nExecStart=/usr/local/bin/pre-network-manager-config.sh\n{INSTALL}"
            ),
        });
    }
    out
}

/// `add-node.sh`: waits for the imported cluster and for this host to be `known`, then
/// `POST /v2/infra-envs/{id}/hosts/{host}/actions/install` (202 expected), with the user
/// token (header `Authorization`). With a custom pool it first sets the host's
/// `machine_config_pool_name`. `POOL` is substituted by the builder.
const ADD_NODE: &str = r#"#!/bin/bash
# Starts this host's day-2 installation once its local assisted-service reports it "known".
set -euo pipefail
source /etc/assisted/rendezvous-host.env
source /usr/local/share/assisted-service/assisted-service.env
api="${SERVICE_BASE_URL%/}/api/assisted-install/v2"
pool="@POOL@"
say() { echo "add-node: $*" >&2; }
get() { curl -fsS -H "Authorization: ${USER_AUTH_TOKEN}" "$api/$1"; }
until [ -n "$(get clusters 2>/dev/null | jq -r '.[0].id // empty')" ]; do
  say "waiting for the imported cluster"; sleep 5
done
while :; do
  host=$(get "infra-envs/${INFRA_ENV_ID}/hosts" 2>/dev/null | jq -c '.[0] // empty') || host=
  status=$(jq -r '.status // empty' <<<"${host:-null}")
  case "$status" in
    known) break ;;
    "") say "waiting for this host to register" ;;
    *) say "host is $status: $(jq -r '.status_info // ""' <<<"$host")" ;;
  esac
  sleep 5
done
host_id=$(jq -r .id <<<"$host")
if [ "$pool" != worker ]; then
  curl -fsS -X PATCH -H "Authorization: ${USER_AUTH_TOKEN}" -H 'Content-Type: application/json' \
    -d "{\"machine_config_pool_name\":\"$pool\"}" "$api/infra-envs/${INFRA_ENV_ID}/hosts/$host_id" >/dev/null
fi
out=$(mktemp)
code=$(curl -sS -o "$out" -w '%{http_code}' -X POST -H "Authorization: ${USER_AUTH_TOKEN}" \
  "$api/infra-envs/${INFRA_ENV_ID}/hosts/$host_id/actions/install")
if [ "$code" != 202 ]; then
  say "install request for host $host_id failed with HTTP $code: $(cat "$out")"; exit 1
fi
say "installation of host $host_id started (pool $pool)"
"#;

/// `add-node.sh` for `pool` (a MachineConfigPool name, already checked to be a DNS label).
pub fn add_node_script(pool: &str) -> String {
    ADD_NODE.replace("@POOL@", pool)
}

const SET_HOSTNAME: &str = r#"#!/bin/bash
# Sets the hostname listed for one of this machine's MACs in /etc/assisted/hostnames/<mac>.
for dev in /sys/class/net/*; do
  [ -r "$dev/address" ] || continue
  mac=$(tr 'A-F' 'a-f' <"$dev/address")
  if [ -s "/etc/assisted/hostnames/$mac" ]; then
    name=$(head -n1 "/etc/assisted/hostnames/$mac")
    hostnamectl set-hostname "$name"
    echo "set-hostname: $name (MAC $mac on ${dev##*/})"
    exit 0
  fi
done
echo "set-hostname: no MAC of this machine is listed in /etc/assisted/hostnames; keeping $(hostname)" >&2
"#;

const TOKEN_STATUS: &str = r#"#!/bin/bash
# Tells the operator on the console when this image's auth token has expired: the local
# assisted-service then refuses every request and the host cannot join.
source /etc/assisted/add-nodes.env
expiry=$(date -d "$AUTH_TOKEN_EXPIRY" +%s) || exit 0
if [ "$(date +%s)" -ge "$expiry" ]; then
  msg="\e[1;31mThe auth token of this node image expired at ${AUTH_TOKEN_EXPIRY}: this host cannot join the cluster.\nCreate a new image with 'oc agent-day2 add-nodes' and boot it.\e[0m"
  mkdir -p /etc/issue.d
  printf '%b\n' "$msg" >/etc/issue.d/90-agent-day2-token.issue
  printf '%b\n' "$msg" >/dev/console
  agetty --reload 2>/dev/null || true
fi
"#;

const PRE_NETWORK: &str = r#"#!/bin/bash
# Copies the NetworkManager keyfiles of the host whose MAC is on this machine
# (/etc/assisted/network/<host>/) into NetworkManager's system connections, renaming
# interfaces by MAC (mac_interface.ini: <mac>=<name>) when the machine names them differently.
set -u
shopt -s nullglob
declare -A local_if
for dev in /sys/class/net/*; do
  [ -r "$dev/address" ] || continue
  local_if[$(tr 'A-F' 'a-f' <"$dev/address")]=${dev##*/}
done
for dir in /etc/assisted/network/*/; do
  map="${dir}mac_interface.ini"
  [ -r "$map" ] || continue
  found=
  while IFS='=' read -r mac name; do [ -n "${local_if[$mac]:-}" ] && found=1; done <"$map"
  [ -n "$found" ] || continue
  for f in "$dir"*.nmconnection; do
    out="/etc/NetworkManager/system-connections/${f##*/}"
    install -m 0600 "$f" "$out"
    while IFS='=' read -r mac name; do
      real=${local_if[$mac]:-}
      if [ -n "$real" ] && [ "$real" != "$name" ]; then
        sed -i "s/^interface-name=${name}\$/interface-name=${real}/" "$out"
      fi
    done <"$map"
  done
  echo "pre-network-manager-config: applied the network config of $(basename "$dir")"
  exit 0
done
echo "pre-network-manager-config: no host of this image has a MAC of this machine; NetworkManager uses DHCP"
"#;

/// Scripts other than `add-node.sh` ([`add_node_script`]); `with_network` adds the
/// pre-NetworkManager one.
pub fn scripts(with_network: bool) -> Vec<Script> {
    let mut out = vec![
        Script {
            path: "/usr/local/bin/set-hostname.sh",
            contents: SET_HOSTNAME,
        },
        Script {
            path: "/usr/local/bin/agent-auth-token-status.sh",
            contents: TOKEN_STATUS,
        },
    ];
    if with_network {
        out.push(Script {
            path: "/usr/local/bin/pre-network-manager-config.sh",
            contents: PRE_NETWORK,
        });
    }
    out
}
