#!/usr/bin/env bash
# Builds the real consumer components of the node ISO from their Go module, outside the work
# tree, and prints what it built:
#   assisted-service        github.com/openshift/assisted-service/cmd
#   agent-installer-client  github.com/openshift/assisted-service/cmd/agentbasedinstaller/client
# both linked (cgo) against libnmstate built from the nmstate-clib crate (crates.io).
#
# The module and its pin are named by tests/real/go.mod (a wrapper module of ours; nothing
# upstream is copied into this repository). Binaries go to
#   ${AGENT_DAY2_REAL_DIR:-${XDG_CACHE_HOME:-~/.cache}/agent-day2/real/<commit>}/bin
# and are reused while they exist (delete the directory to rebuild).
#
# Where the module comes from:
#   1. the Go module proxy (GOPROXY), with retries;
#   2. if the proxy refuses the module, a local checkout of the pinned commit named by
#      AGENT_DAY2_ASSISTED_SERVICE_SRC (upstream commits its vendor/ tree; it is built with
#      -mod=vendor, the way upstream's Dockerfiles build it).
# Exit status: 0 built (or cached); 3 blocked: the proxy refused the module and no checkout
# was given (the exact command and the proxy's answer are printed); 1 any other failure.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
wrapper="$root/tests/real/go.mod"
module=github.com/openshift/assisted-service
pseudo=$(awk -v m="$module" '$1 == "require" && $2 == m {print $3}' "$wrapper")
[ -n "$pseudo" ] || { echo "real-components: no 'require $module' line in $wrapper" >&2; exit 1; }
commit=${pseudo##*-}
nmstate_version=2.2.62
out=${AGENT_DAY2_REAL_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/agent-day2/real/$commit}
bin="$out/bin"
say() { echo "real-components: $*" >&2; }

retry() { # retry N CMD...: runs CMD up to N times, 5 s apart; the last failure's output stays
  local n=$1 i; shift
  for ((i = 1; i <= n; i++)); do
    if "$@"; then return 0; fi
    [ "$i" -lt "$n" ] && { say "attempt $i of $n failed: $*; retrying in 5 s"; sleep 5; }
  done
  return 1
}

print_versions() {
  cat "$bin/versions"
}

if [ -x "$bin/assisted-service" ] && [ -x "$bin/agent-installer-client" ] && [ -s "$bin/versions" ]; then
  say "cached in $bin"
  print_versions
  exit 0
fi
command -v go >/dev/null || { say "needs Go (go1.26 or newer) on PATH"; exit 1; }
mkdir -p "$bin"

# --- libnmstate (cgo dependency of assisted-service's static network config generator).
nm="$out/nmstate"
if [ ! -e "$nm/lib/libnmstate.so.2" ]; then
  say "building libnmstate from the nmstate-clib $nmstate_version crate"
  fetch="$out/nmstate-fetch"
  mkdir -p "$fetch/src"
  printf '[package]\nname = "nmstate-fetch"\nversion = "0.0.0"\nedition = "2021"\npublish = false\n\n[dependencies]\nnmstate-clib = "=%s"\n\n[workspace]\n' \
    "$nmstate_version" >"$fetch/Cargo.toml"
  echo 'fn main() {}' >"$fetch/src/main.rs"
  retry 3 cargo fetch --quiet --manifest-path "$fetch/Cargo.toml"
  manifest=$(cargo metadata --quiet --format-version 1 --manifest-path "$fetch/Cargo.toml" |
    jq -r --arg v "$nmstate_version" '.packages[] | select(.name == "nmstate-clib" and .version == $v) | .manifest_path')
  [ -f "$manifest" ] || { say "nmstate-clib $nmstate_version not found after cargo fetch"; exit 1; }
  src="$out/nmstate-src"
  rm -rf "$src" && cp -r "$(dirname "$manifest")" "$src" && chmod -R u+w "$src"
  # The crate is its own workspace root (it carries a Cargo.lock).
  CARGO_TARGET_DIR="$out/nmstate-target" cargo build --quiet --release --locked --manifest-path "$src/Cargo.toml"
  mkdir -p "$nm/lib" "$nm/include"
  cp "$out/nmstate-target/release/libnmstate.so" "$nm/lib/libnmstate.so.2"
  ln -sf libnmstate.so.2 "$nm/lib/libnmstate.so"
  IFS=. read -r ma mi mc <<<"$nmstate_version"
  sed -e "s/@_VERSION_MAJOR@/$ma/" -e "s/@_VERSION_MINOR@/$mi/" -e "s/@_VERSION_MICRO@/$mc/" \
    "$src/nmstate.h.in" >"$nm/include/nmstate.h"
fi
export CGO_ENABLED=1
export CGO_CFLAGS="-I$nm/include"
export CGO_LDFLAGS="-L$nm/lib -Wl,-rpath,$nm/lib"

# --- assisted-service and its client.
work="$out/wrapper"
mkdir -p "$work"
cp "$wrapper" "$work/go.mod"
rm -f "$work/go.sum"
source_desc=
proxy_log="$out/proxy.log"
get_cmd=(go get "$module/cmd@$pseudo" "$module/cmd/agentbasedinstaller/client@$pseudo")
if (cd "$work" && retry 3 "${get_cmd[@]}") >"$proxy_log" 2>&1; then
  say "building from the module proxy ($module@$pseudo)"
  (cd "$work" &&
    go build -trimpath -o "$bin/assisted-service" "$module/cmd" &&
    go build -trimpath -o "$bin/agent-installer-client" "$module/cmd/agentbasedinstaller/client")
  source_desc="module proxy"
elif [ -n "${AGENT_DAY2_ASSISTED_SERVICE_SRC:-}" ]; then
  src=$AGENT_DAY2_ASSISTED_SERVICE_SRC
  say "the module proxy refused $module@$pseudo ($(grep -m1 -o '40[0-9] [A-Za-z ]*' "$proxy_log" || echo 'see '"$proxy_log"))"
  say "building from the checkout $src (-mod=vendor)"
  [ -f "$src/go.mod" ] && grep -q "^module $module\$" "$src/go.mod" ||
    { say "$src is not a checkout of $module"; exit 1; }
  if git -C "$src" rev-parse HEAD >/dev/null 2>&1; then
    head=$(git -C "$src" rev-parse HEAD)
    case "$head" in "$commit"*) ;; *) say "$src is at $head, not the pinned $commit"; exit 1 ;; esac
  fi
  (cd "$src" &&
    go build -mod=vendor -trimpath -o "$bin/assisted-service" ./cmd &&
    go build -mod=vendor -trimpath -o "$bin/agent-installer-client" ./cmd/agentbasedinstaller/client)
  source_desc="checkout $src (vendor/)"
else
  say "BLOCKED: the Go module proxy does not serve $module@$pseudo."
  say "command: (cd $work && ${get_cmd[*]})"
  sed 's/^/real-components:   /' "$proxy_log" >&2
  say "set AGENT_DAY2_ASSISTED_SERVICE_SRC to a checkout of commit $commit to build from it instead."
  exit 3
fi
{
  echo "assisted-service: $module@$pseudo (from the $source_desc; go $(go env GOVERSION))"
  echo "agent-installer-client: $module/cmd/agentbasedinstaller/client@$pseudo"
  echo "libnmstate: nmstate-clib $nmstate_version (crates.io)"
} >"$bin/versions"
say "built into $bin"
print_versions
