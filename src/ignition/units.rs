//! The systemd units and scripts of the day-2 live system (docs/node-contract.md "Units"):
//! written from the roles and the operational facts the real consumers rely on, not copied from
//! any template.
//!
//! Order of a boot (every unit `After=` what it needs):
//! `pre-network-manager-config` (keyfiles by MAC, before NetworkManager) →
//! `set-hostname` (name by MAC) → `assisted-service-pod` → `assisted-service-db` (PostgreSQL
//! as the `postgres` user: it refuses to run as root) → `assisted-service` (REST on :8090, the
//! image's default command) → `agent-import-cluster` (once: every import makes a new cluster
//! ID) → `agent-register-infraenv` → `agent` (the discovery agent, copied out of its image and
//! run on the host as upstream does) and `apply-host-config` (root device, role) →
//! `agent-add-node` (install once the host is `known`). `agent-auth-token-status` checks every
//! 5 s whether the token has expired and says so on the console.
//!
//! The agent-based-installer client reads its inputs inside its container at fixed paths
//! (`cmd/agentbasedinstaller/client/main.go` defaults): `/manifests/*.yaml`,
//! `/clusterconfig/*.json`, `/extra-manifests`, `/etc/assisted/hostconfig`; the units bind-mount
//! them there.

pub use super::env::{ADD_NODES_ENV, AGENT_IMAGES_ENV, DB_ENV, IMAGES_ENV, RENDEZVOUS_ENV, SERVICE_ENV};

/// The pull secret for podman (root's legacy auth file, which podman reads).
pub const PODMAN_AUTH: &str = "/root/.docker/config.json";
/// The live system's CA bundle (the cluster's trust bundle and mirror CAs are anchors of it),
/// mounted into the service and client containers as upstream does.
pub const CA_BUNDLE: &str = "/etc/pki/ca-trust/extracted/pem/tls-ca-bundle.pem";
/// Extra manifests directory the client's `importCluster`/`registerCluster` read (empty for
/// day 2, but it must exist to be mounted).
pub const EXTRA_MANIFESTS_DIR: &str = "/etc/assisted/extra-manifests";

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

/// `EnvironmentFile=` lines of the units that run the client or talk to the service: the
/// identity, the tokens and URLs, the service settings and the component images.
fn env_lines() -> String {
    [ADD_NODES_ENV, RENDEZVOUS_ENV, SERVICE_ENV, AGENT_IMAGES_ENV]
        .iter()
        .map(|f| format!("EnvironmentFile={f}\n"))
        .collect()
}

/// `podman run` of one `agent-installer-client` subcommand from the API server image, on the
/// host network (`configure` keeps the host whose MAC is on this machine), with `mounts`
/// (`-v` arguments) and the variables `envs` passed from the unit's environment.
fn client_run(cmd: &str, mounts: &[&str], envs: &[&str]) -> String {
    let mut s =
        format!("/usr/bin/podman run --rm --net host --authfile {PODMAN_AUTH} -v {CA_BUNDLE}:{CA_BUNDLE}:ro");
    for m in mounts {
        s.push_str(" -v ");
        s.push_str(m);
    }
    for e in envs {
        s.push_str(" --env ");
        s.push_str(e);
    }
    s.push_str(&format!(
        " ${{SERVICE_IMAGE}} /usr/local/bin/agent-installer-client {cmd}"
    ));
    s
}

const WAIT: &str = "ExecStartPre=/usr/local/bin/wait-for-assisted-service.sh\n";

/// The units; `with_network` adds `pre-network-manager-config.service` (only images with
/// NMState keyfiles need it).
pub fn units(with_network: bool) -> Vec<UnitText> {
    let env = env_lines();
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
                "[Unit]\nDescription=Database of the local assisted-service\nRequires=assisted-service-pod.service\nAfter=assisted-service-pod.service\n\n[Service]\nEnvironmentFile={AGENT_IMAGES_ENV}\nExecStartPre=-/usr/bin/podman rm --force assisted-db\nExecStart=/usr/bin/podman run --name assisted-db --pod assisted-service --user=postgres --authfile {PODMAN_AUTH} --env-file {DB_ENV} ${{SERVICE_IMAGE}} /bin/bash start_db.sh\nExecStop=/usr/bin/podman stop --ignore assisted-db\nRestart=on-failure\nRestartSec=5\n{INSTALL}"
            ),
        },
        UnitText {
            name: "assisted-service.service",
            contents: format!(
                "[Unit]\nDescription=Local assisted-service REST API (:8090) of this day-2 host\nRequires=assisted-service-db.service\nAfter=assisted-service-db.service\n\n[Service]\nEnvironmentFile={AGENT_IMAGES_ENV}\nExecStartPre=-/usr/bin/podman rm --force assisted-service-api\nExecStart=/usr/bin/podman run --name assisted-service-api --pod assisted-service --authfile {PODMAN_AUTH} -v {CA_BUNDLE}:{CA_BUNDLE}:ro --env-file {RENDEZVOUS_ENV} --env-file {SERVICE_ENV} --env-file {IMAGES_ENV} --env-file {AGENT_IMAGES_ENV} ${{SERVICE_IMAGE}}\nExecStop=/usr/bin/podman stop --ignore assisted-service-api\nRestart=on-failure\nRestartSec=5\n{INSTALL}"
            ),
        },
        UnitText {
            name: "agent-import-cluster.service",
            contents: format!(
                "[Unit]\nDescription=Import the cluster into the local assisted-service (once), with its ignition endpoint and networking mode\nConditionPathExists={ADD_NODES_ENV}\nRequires=assisted-service.service\nAfter=assisted-service.service\n\n[Service]\nType=oneshot\nRemainAfterExit=yes\n{env}{WAIT}ExecStart=/usr/local/bin/import-cluster-once.sh {}\nRestart=on-failure\nRestartSec=10\n{INSTALL}",
                client_run(
                    "importCluster",
                    &[
                        "/etc/assisted/clusterconfig:/clusterconfig:ro",
                        "/etc/assisted/manifests:/manifests:ro",
                        "/etc/assisted/extra-manifests:/extra-manifests:ro",
                    ],
                    &[
                        "SERVICE_BASE_URL",
                        "OPENSHIFT_INSTALL_RELEASE_IMAGE_MIRROR",
                        "CLUSTER_ID",
                        "CLUSTER_NAME",
                        "CLUSTER_API_VIP_DNS_NAME",
                        "USER_AUTH_TOKEN",
                    ],
                )
            ),
        },
        UnitText {
            name: "agent-register-infraenv.service",
            contents: format!(
                "[Unit]\nDescription=Register the InfraEnv (and NMStateConfigs) of /etc/assisted/manifests\nRequires=agent-import-cluster.service\nAfter=agent-import-cluster.service\n\n[Service]\nType=oneshot\nRemainAfterExit=yes\n{env}{WAIT}ExecStart={}\nRestart=on-failure\nRestartSec=10\n{INSTALL}",
                client_run(
                    "registerInfraEnv",
                    &["/etc/assisted/manifests:/manifests:ro"],
                    &["SERVICE_BASE_URL", "USER_AUTH_TOKEN"],
                )
            ),
        },
        UnitText {
            name: "agent.service",
            contents: format!(
                "[Unit]\nDescription=Discovery agent: registers this host and runs the pre-flight validations\nRequires=agent-register-infraenv.service\nAfter=agent-register-infraenv.service set-hostname.service\n\n[Service]\n{env}ExecStartPre=/usr/bin/podman run --rm --privileged --authfile {PODMAN_AUTH} -v /usr/local/bin:/hostbin ${{AGENT_DOCKER_IMAGE}} cp /usr/bin/agent /hostbin/agent\nExecStart=/usr/local/bin/agent --url ${{SERVICE_BASE_URL}} --infra-env-id ${{INFRA_ENV_ID}} --agent-version ${{AGENT_DOCKER_IMAGE}} --insecure=true\nRestart=on-failure\nRestartSec=5\n{INSTALL}"
            ),
        },
        UnitText {
            name: "apply-host-config.service",
            contents: format!(
                "[Unit]\nDescription=Apply this host's config from /etc/assisted/hostconfig (root device hints, role; matched by MAC)\nRequires=agent-register-infraenv.service\nAfter=agent-register-infraenv.service agent.service\n\n[Service]\nType=oneshot\nRemainAfterExit=yes\n{env}{WAIT}ExecStartPre=/usr/bin/mkdir -p /run/agent-installer\nExecStart={}\nRestart=on-failure\nRestartSec=10\n{INSTALL}",
                client_run(
                    "configure",
                    &[
                        "/etc/assisted/hostconfig:/etc/assisted/hostconfig:ro",
                        "/run/agent-installer:/var/run/agent-installer:z",
                    ],
                    &["SERVICE_BASE_URL", "INFRA_ENV_ID", "WORKFLOW_TYPE", "USER_AUTH_TOKEN"],
                )
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
                "[Unit]\nDescription=Start this host's installation once the local assisted-service reports it known\nConditionPathExists={ADD_NODES_ENV}\nRequires=agent.service apply-host-config.service\nAfter=agent.service apply-host-config.service\n\n[Service]\nType=oneshot\nRemainAfterExit=yes\n{env}{WAIT}ExecStart=/usr/local/bin/add-node.sh\nRestart=on-failure\nRestartSec=30\n{INSTALL}"
            ),
        },
        UnitText {
            name: "agent-auth-token-status.service",
            contents: format!(
                "[Unit]\nDescription=Show on the console when this image's auth token has expired\nConditionPathExists={ADD_NODES_ENV}\nBefore=getty.target\n\n[Service]\nEnvironmentFile={ADD_NODES_ENV}\nExecStart=/usr/local/bin/agent-auth-token-status.sh\nRestart=on-failure\nRestartSec=5\n{INSTALL}"
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
/// token (header `Authorization`). While waiting it prints the host's `status` and
/// `status_info` and, from `validations_info`, every validation whose status is `failure`,
/// `error` or `pending` (id, status, message; the service's `status_info` lists only the
/// `failure` ones, so a host held back by a pending one showed an empty list), one `add-node:` line each. With a custom pool it first sets the host's
/// `machine_config_pool_name`. `POOL` is substituted by the builder.
const ADD_NODE: &str = r#"#!/bin/bash
# Starts this host's day-2 installation once its local assisted-service reports it "known".
# Its unit's EnvironmentFile= lines give SERVICE_BASE_URL, USER_AUTH_TOKEN and INFRA_ENV_ID.
set -euo pipefail
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
    *) say "host is $status: $(jq -r '.status_info // ""' <<<"$host")"
      # validations_info is a JSON string: {"<category>": [{"id","status","message"}, …]}.
      jq -r '.validations_info // "" | (fromjson? // {}) | objects | to_entries[] | .value | arrays
        | .[] | select(.status == "failure" or .status == "error" or .status == "pending")
        | "  validation \(.id) (\(.status)): \(.message)"' <<<"$host" 2>/dev/null |
        while IFS= read -r l; do say "$l"; done || true ;;
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
# Tells the operator on the console once this image's auth token has expired: the local
# assisted-service then refuses every request and the host cannot join. Checks every 5 s
# (the clock may still be corrected by NTP after boot); AUTH_TOKEN_EXPIRY comes from the
# unit's EnvironmentFile (add-nodes.env).
issue=/etc/issue.d/90-agent-day2-token.issue
expiry=$(date -d "$AUTH_TOKEN_EXPIRY" +%s) || {
  echo "agent-auth-token-status: AUTH_TOKEN_EXPIRY '$AUTH_TOKEN_EXPIRY' is not a time" >&2; exit 1; }
while :; do
  if [ "$(date +%s)" -ge "$expiry" ]; then
    if [ ! -e "$issue" ]; then
      msg="\e[1;31mThe auth token of this node image expired at ${AUTH_TOKEN_EXPIRY}: this host cannot join the cluster.\nCreate a new image with 'oc agent-day2 add-nodes' and boot it.\e[0m"
      mkdir -p /etc/issue.d
      printf '%b\n' "$msg" >"$issue"
      printf '%b\n' "$msg" >/dev/console 2>/dev/null || true
      agetty --reload 2>/dev/null || true
    fi
  elif [ -e "$issue" ]; then
    rm -f "$issue"
    agetty --reload 2>/dev/null || true
  fi
  sleep 5
done
"#;

const WAIT_FOR_SERVICE: &str = r#"#!/bin/bash
# Waits until the local assisted-service answers an authenticated request. SERVICE_BASE_URL
# and USER_AUTH_TOKEN come from the calling unit's EnvironmentFile= lines.
api="${SERVICE_BASE_URL%/}/api/assisted-install/v2"
until curl -fsS -o /dev/null -H "Authorization: ${USER_AUTH_TOKEN}" "$api/clusters"; do
  echo "wait-for-assisted-service: $api does not answer yet" >&2
  sleep 5
done
"#;

const IMPORT_ONCE: &str = r#"#!/bin/bash
# Runs the command in its arguments (the client's importCluster) unless the local
# assisted-service already holds this cluster: every import makes a new cluster ID, and a
# second cluster makes registerInfraEnv fail ("found multiple clusters"). A run that stopped
# between the import and its update gets the networking mode and ignition endpoint applied
# again. CLUSTER_ID, SERVICE_BASE_URL and USER_AUTH_TOKEN come from the unit's environment.
set -euo pipefail
api="${SERVICE_BASE_URL%/}/api/assisted-install/v2"
cfg=/etc/assisted/clusterconfig
id=$(curl -fsS -H "Authorization: ${USER_AUTH_TOKEN}" "$api/clusters" |
  jq -r --arg c "$CLUSTER_ID" '[.[] | select(.openshift_cluster_id == $c)][0].id // empty')
if [ -z "$id" ]; then
  exec "$@"
fi
body=$(jq -c '{user_managed_networking: .networking.userManagedNetworking}' "$cfg/import-cluster-config.json")
if [ -s "$cfg/worker-ignition-endpoint.json" ]; then
  body=$(jq -c --slurpfile e "$cfg/worker-ignition-endpoint.json" '. + {ignition_endpoint: $e[0]}' <<<"$body")
fi
curl -fsS -o /dev/null -X PATCH -H "Authorization: ${USER_AUTH_TOKEN}" -H 'Content-Type: application/json' \
  -d "$body" "$api/clusters/$id"
echo "import-cluster: cluster $CLUSTER_ID is already imported (ID $id); its settings were applied again"
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
    # A keyfile that is not in place leaves the host on DHCP: fail loudly, never say "applied".
    install -D -m 0600 "$f" "$out" || { echo "pre-network-manager-config: cannot write $out" >&2; exit 1; }
    while IFS='=' read -r mac name; do
      real=${local_if[$mac]:-}
      if [ -n "$real" ] && [ "$real" != "$name" ]; then
        sed -i "s/^interface-name=${name}\$/interface-name=${real}/" "$out" ||
          { echo "pre-network-manager-config: cannot rename $name to $real in $out" >&2; exit 1; }
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
        Script {
            path: "/usr/local/bin/wait-for-assisted-service.sh",
            contents: WAIT_FOR_SERVICE,
        },
        Script {
            path: "/usr/local/bin/import-cluster-once.sh",
            contents: IMPORT_ONCE,
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
