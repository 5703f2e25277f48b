#!/usr/bin/env bash
# Builds real components from their Go modules, outside the work tree, and prints what it built.
# Four groups; name one to build only it (default: all, in this order):
#
#   assisted  the real consumer components of the node ISO:
#     assisted-service        github.com/openshift/assisted-service/cmd
#     agent-installer-client  github.com/openshift/assisted-service/cmd/agentbasedinstaller/client
#   both linked (cgo) against libnmstate built from the nmstate-clib crate (crates.io).
#   The module and its pin are named by tests/real/go.mod (a wrapper module of ours; nothing
#   upstream is copied into this repository). Binaries go to
#     ${AGENT_DAY2_REAL_DIR:-${XDG_CACHE_HOME:-~/.cache}/agent-day2/real/<commit>}/bin
#   and are reused while they exist (delete the directory to rebuild).
#   Where the module comes from:
#     1. the Go module proxy (GOPROXY), with retries;
#     2. if the proxy refuses the module, a local checkout of the pinned commit named by
#        AGENT_DAY2_ASSISTED_SERVICE_SRC (upstream commits its vendor/ tree; it is built with
#        -mod=vendor, the way upstream's Dockerfiles build it).
#
#   kube  the real control plane the simulator can run (issue 12):
#     kube-apiserver, kube-controller-manager  k8s.io/kubernetes/cmd/...  (CGO_ENABLED=0, with
#       the version ldflags, so /version reports the pinned release)
#     etcd                                     go.etcd.io/etcd/server/v3 (its main package)
#     kubelet-exec  ours (tests/real/kube/kubelet-exec): the simulated control-plane kubelets'
#       pod-exec endpoint, serving kube-apiserver's SPDY/WebSocket sessions with the kubelet's
#       streaming code (k8s.io/kubelet/pkg/cri/streaming/remotecommand)
#   pinned by tests/real/kube/go.mod + go.sum (a wrapper module of ours: the staging modules'
#   replace block that k8s.io/kubernetes needs as a dependency, and `tool` lines naming the
#   three main packages; etcd at the version the Kubernetes graph pins). Built with
#   -mod=readonly, so go.sum verifies every module. Binaries go to
#     ${AGENT_DAY2_REAL_KUBE_DIR:-${XDG_CACHE_HOME:-~/.cache}/agent-day2/real/kube-<k8s version>}/bin
#   with a Go build cache of their own in go-build/ beside it (AGENT_DAY2_KUBE_GOCACHE
#   overrides it), reused while the binaries exist and bin/go.mod equals the wrapper's.
#
#   agent  the real discovery agent of the node image (issue 20, item 4):
#     agent  github.com/openshift/assisted-installer-agent/src/agent/main (CGO_ENABLED=0), one
#       binary that is the agent, next_step_runner, inventory, free_addresses, disk_speed_check
#       and logs_sender by the name it is called as
#   pinned by tests/real/agent/go.mod (with the snapshot's git tree id). From the module proxy,
#   or, as it refuses the module, from the tree AGENT_DAY2_AGENT_SRC names (a checkout or the
#   snapshot tarball ../shared/real-src/assisted-installer-agent-<commit>.tar.zst), built with
#   -mod=vendor. Binaries go to
#     ${AGENT_DAY2_REAL_AGENT_DIR:-${XDG_CACHE_HOME:-~/.cache}/agent-day2/real/agent-<commit>}/bin
#   and are reused while they exist.
#
#   krew  the real krew, the kubectl plugin manager (issue 22, item 13):
#     kubectl-krew            sigs.k8s.io/krew/cmd/krew (`kubectl krew`; CGO_ENABLED=0, the
#                             version stamped as upstream's hack/make-binaries.sh does)
#     validate-krew-manifest  sigs.k8s.io/krew/cmd/validate-krew-manifest (krew-index's check)
#   pinned by tests/real/krew/go.mod + go.sum (a wrapper module of ours whose `tool` lines name
#   the two main packages), built with -mod=readonly from the module proxy. Binaries go to
#     ${AGENT_DAY2_REAL_KREW_DIR:-${XDG_CACHE_HOME:-~/.cache}/agent-day2/real/krew-<version>}/bin
#   and are reused while they exist and bin/go.mod equals the wrapper's.
#
# Usage: scripts/real-components.sh [assisted|kube|agent|krew|all]
# Exit status: 0 built (or cached); 3 blocked: the proxy refused a module and no other source
# was given (the exact command and the proxy's answer are printed); 1 any other failure or a
# bad argument. With `all`, every group is tried: 1 if any failed, else 3 if any was blocked.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cache_root=${XDG_CACHE_HOME:-$HOME/.cache}/agent-day2/real
src_cache=${XDG_CACHE_HOME:-$HOME/.cache}/agent-day2/src
say() { echo "real-components: $*" >&2; }

# The module proxy's "no" (it answers at once and it is final): not retried.
refusal='(403|404|410) (Forbidden|Not Found|Gone)'

retry() { # retry N CMD...: runs CMD up to N times, 5 s apart, unless it was refused
  local n=$1 i err rc; shift
  err=$(mktemp)
  for ((i = 1; i <= n; i++)); do
    rc=0
    "$@" 2>"$err" || rc=$?
    cat "$err" >&2
    [ "$rc" = 0 ] && { rm -f "$err"; return 0; }
    grep -qE "$refusal" "$err" && break
    [ "$i" -lt "$n" ] && { say "attempt $i of $n failed: $*; retrying in 5 s"; sleep 5; }
  done
  rm -f "$err"
  return 1
}

print_versions() {
  cat "$bin/versions"
}

# --- source trees the proxy refuses ----------------------------------------------------------
# A user with network access clones the public repository at the pinned commit; CI (.ci/run)
# and the project's machines unpack the snapshot tarball ../shared/real-src/ holds. Both routes
# end here: a checkout is checked by its HEAD, any other tree by its git tree id, exactly.

# unpack TARBALL: unpacks a source tarball (.tar, .tar.gz, .tar.zst, ...; one top folder) once
# into ${XDG_CACHE_HOME:-~/.cache}/agent-day2/src/<name>-<first 16 hex of its sha256>/ (outside
# the work tree, keyed by content: a changed tarball is a new folder) and prints the top
# folder's path. It is unpacked in a temporary folder renamed into place, so an interrupted
# unpack leaves nothing that is used.
unpack() {
  local tarball=$1 sum name dest tmp top
  [ -f "$tarball" ] || { say "$tarball: no such file (give a source tarball; a folder is used as it is)"; return 1; }
  sum=$(sha256sum "$tarball" | cut -c1-16)
  name=$(basename "$tarball"); name=${name%%.tar*}
  dest="$src_cache/$name-$sum"
  if [ ! -d "$dest" ]; then
    mkdir -p "$src_cache"
    tmp=$(mktemp -d "$dest.partial.XXXXXX")
    # An interrupted unpack removes its partial folder (a KILL leaves it; it is never used).
    unpack_tmp=$tmp
    trap 'rm -rf "${unpack_tmp:-}"' EXIT
    trap 'rm -rf "${unpack_tmp:-}"; exit 130' INT TERM
    say "unpacking $tarball (sha256 $sum...) into $dest"
    tar -xf "$tarball" -C "$tmp" || { rm -rf "$tmp"; say "cannot unpack $tarball"; return 1; }
    top=$(find "$tmp" -mindepth 1 -maxdepth 1)
    if [ -z "$top" ] || [ "$(printf '%s\n' "$top" | wc -l)" != 1 ] || [ ! -d "$top" ]; then
      say "$tarball: expected one top folder in it, found: $(ls -A "$tmp" | tr '\n' ' ')"
      rm -rf "$tmp"; return 1
    fi
    # Another unpack of the same tarball may have won the race: then its folder is used.
    mv -T "$tmp" "$dest" 2>/dev/null || rm -rf "$tmp"
    unpack_tmp=
    trap - EXIT INT TERM
  fi
  top=$(find "$dest" -mindepth 1 -maxdepth 1 -type d)
  [ -n "$top" ] && [ "$(printf '%s\n' "$top" | wc -l)" = 1 ] ||
    { say "$dest: expected one top folder, found: $(ls -A "$dest" | tr '\n' ' ') (delete it and unpack again)"; return 1; }
  (cd "$top" && pwd)
}

# source_tree PATH: PATH when it is a folder, else the folder `unpack PATH` gives.
source_tree() {
  if [ -d "$1" ]; then echo "$1"; else unpack "$1"; fi
}

# pinned_tree WRAPPER MODULE: the `// tree <id>` recorded beside MODULE's require line.
pinned_tree() {
  awk -v m="$2" '$1 == "require" && $2 == m { for (i = 4; i < NF; i++) if ($i == "tree") print $(i + 1) }' "$1"
}

# verify_tree DIR COMMIT TREE: DIR holds that commit's tree, or the build stops (exit 1). A git
# checkout is checked by its HEAD; any other tree (an unpacked tarball) by its git tree id,
# computed in a throw-away repository and index (`git add -A -f`, `git write-tree`), so one
# changed, missing or extra file, or a changed mode, is a mismatch.
verify_tree() {
  local dir=$1 commit=$2 want=$3 head got tmpgit
  if [ -e "$dir/.git" ] && head=$(git -C "$dir" rev-parse HEAD 2>/dev/null); then
    case "$head" in
      "$commit"*)
        # At the pin, and nothing changed: local edits would be built as the real component.
        if [ -n "$(git -C "$dir" status --porcelain --untracked-files=no 2>&1)" ]; then
          say "$dir is at $commit but has uncommitted changes (git status): build from a clean checkout"
          exit 1
        fi
        return 0 ;;
    esac
    say "$dir is at $head, not the pinned $commit: check out $commit there"; exit 1
  fi
  [ -n "$want" ] || { say "no '// tree <id>' beside the pin in $wrapper: cannot check $dir"; exit 1; }
  command -v git >/dev/null || { say "needs git to check the tree id of $dir"; exit 1; }
  tmpgit=$(mktemp -d)
  got=$(git init -q --bare "$tmpgit" &&
    export GIT_DIR="$tmpgit" GIT_WORK_TREE="$dir" &&
    git -c core.autocrlf=false -c core.fileMode=true -c core.symlinks=true add -A -f . &&
    git write-tree) || { rm -rf "$tmpgit"; say "cannot compute the git tree id of $dir"; exit 1; }
  rm -rf "$tmpgit"
  if [ "$got" != "$want" ]; then
    say "$dir is not the pinned commit $commit's tree: its git tree id is $got, the pin's $want"
    say "(a file was changed, added or removed there): unpack or clone it again"
    exit 1
  fi
  say "$dir: git tree $got, the pinned commit's"
}

# --- group assisted ------------------------------------------------------------------------
build_assisted() {
  wrapper="$root/tests/real/go.mod"
  module=github.com/openshift/assisted-service
  pseudo=$(awk -v m="$module" '$1 == "require" && $2 == m {print $3}' "$wrapper")
  [ -n "$pseudo" ] || { echo "real-components: no 'require $module' line in $wrapper" >&2; exit 1; }
  commit=${pseudo##*-}
  nmstate_version=2.2.62
  out=${AGENT_DAY2_REAL_DIR:-$cache_root/$commit}
  bin="$out/bin"

  # The source tree the binaries come from, linked as $out/source: the tests take
  # assisted-service's CRDs (config/crd/bases, hack/crds/hive) and swagger.yaml from it
  # (tests/sim/src/upstream.rs). Made for cached binaries too (from the checkout named, or the
  # proxy), and never a reason to fail: without it those tests say what is missing.
  link_source() {
    local dir
    if [ -n "${AGENT_DAY2_ASSISTED_SERVICE_SRC:-}" ] &&
      dir=$(source_tree "$AGENT_DAY2_ASSISTED_SERVICE_SRC") && [ -d "$dir/config/crd/bases" ]; then
      dir=$(cd "$dir" && pwd)
      # The tests take the CRDs and swagger.yaml from it: the pinned tree only (checked once
      # per run; the build path has checked it already).
      [ "${verified:-}" = "$dir" ] || verify_tree "$dir" "$commit" "$(pinned_tree "$wrapper" "$module")"
    elif ! dir=$(go mod download -json "$module@$pseudo" 2>/dev/null | jq -er '.Dir'); then
      say "no assisted-service source tree for its CRDs and swagger.yaml (the proxy refuses the module): set AGENT_DAY2_ASSISTED_SERVICE_SRC to a checkout of $commit"
      return 0
    fi
    ln -sfn "$dir" "$out/source"
  }
  if [ -x "$bin/assisted-service" ] && [ -x "$bin/agent-installer-client" ] && [ -s "$bin/versions" ]; then
    say "cached in $bin"
    [ -d "$out/source/config/crd/bases" ] || link_source
    print_versions
    exit 0
  fi
  command -v go >/dev/null || { say "needs Go (go1.26 or newer) on PATH"; exit 1; }
  mkdir -p "$bin"

  # --- assisted-service and its client.
  work="$out/wrapper"
  mkdir -p "$work"
  cp "$wrapper" "$work/go.mod"
  rm -f "$work/go.sum"
  source_desc=
  proxy_log="$out/proxy.log"
  get_cmd=(go get "$module/cmd@$pseudo" "$module/cmd/agentbasedinstaller/client@$pseudo")
  # Where the module comes from is decided first: a blocked group costs no build.
  if (cd "$work" && retry 3 "${get_cmd[@]}") >"$proxy_log" 2>&1; then
    source_kind=proxy
  elif ! grep -qE "$refusal" "$proxy_log"; then
    # Not the proxy's "no": the proxy could not be reached (or go failed otherwise).
    say "cannot fetch $module@$pseudo from the module proxy ($(go env GOPROXY)), and it did not refuse it either:"
    sed 's/^/real-components:   /' "$proxy_log" >&2
    exit 1
  elif [ -n "${AGENT_DAY2_ASSISTED_SERVICE_SRC:-}" ]; then
    source_kind=checkout
    src=$(source_tree "$AGENT_DAY2_ASSISTED_SERVICE_SRC")
    say "the module proxy refused $module@$pseudo ($(grep -m1 -o '40[0-9] [A-Za-z ]*' "$proxy_log" || echo 'see '"$proxy_log"))"
    [ -f "$src/go.mod" ] && grep -q "^module $module\$" "$src/go.mod" ||
      { say "$src is not a checkout of $module"; exit 1; }
    # Built with -mod=vendor: upstream's vendor/ tree and the two main packages must be there.
    for f in vendor/modules.txt cmd/main.go cmd/agentbasedinstaller/client/main.go; do
      [ -f "$src/$f" ] || { say "$src has no $f: not a full checkout of $module at $commit"; exit 1; }
    done
    verify_tree "$src" "$commit" "$(pinned_tree "$wrapper" "$module")"
    verified=$(cd "$src" && pwd)
  else
    say "BLOCKED: the Go module proxy does not serve $module@$pseudo."
    say "command: (cd $work && ${get_cmd[*]})"
    sed 's/^/real-components:   /' "$proxy_log" >&2
    say "set AGENT_DAY2_ASSISTED_SERVICE_SRC to a clone of https://github.com/openshift/assisted-service at commit $commit (or a tarball of that tree) to build from it instead (README: where the assisted-service source comes from)."
    exit 3
  fi

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
    # Not `src`: that names the assisted-service tree the build below runs in.
    local nmsrc="$out/nmstate-src"
    rm -rf "$nmsrc" && cp -r "$(dirname "$manifest")" "$nmsrc" && chmod -R u+w "$nmsrc"
    # The crate is its own workspace root (it carries a Cargo.lock).
    CARGO_TARGET_DIR="$out/nmstate-target" cargo build --quiet --release --locked --manifest-path "$nmsrc/Cargo.toml"
    mkdir -p "$nm/lib" "$nm/include"
    cp "$out/nmstate-target/release/libnmstate.so" "$nm/lib/libnmstate.so.2"
    ln -sf libnmstate.so.2 "$nm/lib/libnmstate.so"
    IFS=. read -r ma mi mc <<<"$nmstate_version"
    sed -e "s/@_VERSION_MAJOR@/$ma/" -e "s/@_VERSION_MINOR@/$mi/" -e "s/@_VERSION_MICRO@/$mc/" \
      "$nmsrc/nmstate.h.in" >"$nm/include/nmstate.h"
  fi
  export CGO_ENABLED=1
  export CGO_CFLAGS="-I$nm/include"
  export CGO_LDFLAGS="-L$nm/lib -Wl,-rpath,$nm/lib"

  if [ "$source_kind" = proxy ]; then
    say "building from the module proxy ($module@$pseudo)"
    (cd "$work" &&
      go build -trimpath -o "$bin/assisted-service" "$module/cmd" &&
      go build -trimpath -o "$bin/agent-installer-client" "$module/cmd/agentbasedinstaller/client")
    source_desc="module proxy"
  else
    say "building from the checkout $src (-mod=vendor)"
    (cd "$src" &&
      go build -mod=vendor -trimpath -o "$bin/assisted-service" ./cmd &&
      go build -mod=vendor -trimpath -o "$bin/agent-installer-client" ./cmd/agentbasedinstaller/client)
    source_desc="checkout $src (vendor/)"
  fi
  {
    echo "assisted-service: $module@$pseudo (from the $source_desc; go $(go env GOVERSION))"
    echo "agent-installer-client: $module/cmd/agentbasedinstaller/client@$pseudo"
    echo "libnmstate: nmstate-clib $nmstate_version (crates.io)"
  } >"$bin/versions"
  link_source
  say "built into $bin"
  print_versions
}

# --- group kube ----------------------------------------------------------------------------
build_kube() {
  local wrapper_dir="$root/tests/real/kube" kver ever out bin work log gocache t0 ld minor
  # openshift/api on its release-4.18 branch (Kubernetes 1.31 APIs): the commit a public
  # release-4.18 go.mod pins; the proxy serves it.
  local openshift_api=v0.0.0-20241210155609-29859d55727b
  local pkgs=(k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-controller-manager go.etcd.io/etcd/server/v3)
  command -v go >/dev/null || { say "kube: needs Go (go1.24 or newer) on PATH"; exit 1; }
  command -v jq >/dev/null || { say "kube: needs jq on PATH"; exit 1; }
  [ -f "$wrapper_dir/go.mod" ] && [ -f "$wrapper_dir/go.sum" ] ||
    { say "kube: $wrapper_dir must hold go.mod and go.sum"; exit 1; }
  modver() { # modver MODULE: the version the wrapper requires (its require lines, not replaces)
    (cd "$wrapper_dir" && go mod edit -json) | jq -r --arg m "$1" '.Require[]? | select(.Path == $m) | .Version'
  }
  kver=$(modver k8s.io/kubernetes)
  ever=$(modver go.etcd.io/etcd/server/v3)
  [ -n "$kver" ] && [ -n "$ever" ] ||
    { say "kube: $wrapper_dir/go.mod must require k8s.io/kubernetes and go.etcd.io/etcd/server/v3"; exit 1; }
  out=${AGENT_DAY2_REAL_KUBE_DIR:-$cache_root/kube-$kver}
  bin="$out/bin"
  work="$out/wrapper"
  gocache=${AGENT_DAY2_KUBE_GOCACHE:-$out/go-build}
  prepare_work() {
    mkdir -p "$bin" "$work" "$gocache"
    cp "$wrapper_dir/go.mod" "$wrapper_dir/go.sum" "$work/"
    rm -rf "$work/kubelet-exec" && cp -r "$wrapper_dir/kubelet-exec" "$work/"
    export GOCACHE="$gocache" GOFLAGS="-mod=readonly ${GOFLAGS:-}" CGO_ENABLED=0
  }
  # kubelet-exec: our main package in the wrapper module (the simulated control-plane
  # kubelets' exec endpoint, on the kubelet's streaming code); rebuilt alone when its source
  # changed. Its source is kept beside it to tell.
  build_kubelet_exec() {
    (cd "$work" && go build -trimpath -ldflags "-s -w" -o "$bin/kubelet-exec" ./kubelet-exec)
    cp "$wrapper_dir/kubelet-exec/main.go" "$bin/kubelet-exec.go"
  }
  if [ -x "$bin/kube-apiserver" ] && [ -x "$bin/kube-controller-manager" ] && [ -x "$bin/etcd" ] &&
    [ -d "$bin/openshift-api" ] && [ -s "$bin/versions" ] && cmp -s "$bin/go.mod" "$wrapper_dir/go.mod"; then
    if ! { [ -x "$bin/kubelet-exec" ] && cmp -s "$bin/kubelet-exec.go" "$wrapper_dir/kubelet-exec/main.go"; }; then
      say "kube: building kubelet-exec (its source changed)"
      prepare_work
      build_kubelet_exec
      sed -i '/^kubelet-exec:/d' "$bin/versions"
      echo "kubelet-exec: tests/real/kube/kubelet-exec (ours) on k8s.io/kubelet@$(modver k8s.io/kubelet || true)'s streaming code" >>"$bin/versions"
    fi
    say "kube: cached in $bin"
    print_versions
    return 0
  fi
  prepare_work

  # Download (retried): exactly the modules the three main packages load, checked against go.sum.
  log="$out/proxy.log"
  local get_cmd=(go list -deps -f '{{if .Error}}{{.ImportPath}}: {{.Error}}{{end}}' "${pkgs[@]}")
  t0=$SECONDS
  if ! (cd "$work" && retry 3 "${get_cmd[@]}") >"$log" 2>&1; then
    if grep -qE "$refusal" "$log"; then
      say "kube: BLOCKED: the Go module proxy refused a module k8s.io/kubernetes@$kver needs."
      say "kube: command: (cd $work && ${get_cmd[*]})"
      grep -E 'reading https?://|server response' "$log" | sort -u | sed 's/^/real-components:   /' >&2
      say "kube: pin a served version of that module in $wrapper_dir/go.mod's replace block (go list -m -versions MODULE)."
      exit 3
    fi
    say "kube: downloading the modules failed:"
    sed 's/^/real-components:   /' "$log" >&2
    exit 1
  fi
  say "kube: modules ready in $((SECONDS - t0)) s (GOMODCACHE $(go env GOMODCACHE))"

  # /version: the variables k8s' hack/lib/version.sh sets (component-base and client-go's copy).
  minor=${kver#v1.}; minor=${minor%%.*}
  ld="-s -w"
  for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    ld="$ld -X $p.gitVersion=$kver -X $p.gitMajor=1 -X $p.gitMinor=$minor -X $p.gitTreeState=clean"
    ld="$ld -X $p.buildDate=$(date -u +%Y-%m-%dT%H:%M:%SZ)"
  done
  say "kube: building kube-apiserver and kube-controller-manager $kver, etcd $ever (GOCACHE $gocache)"
  t0=$SECONDS
  (cd "$work" &&
    go build -trimpath -ldflags "$ld" -o "$bin/" "${pkgs[0]}" "${pkgs[1]}" &&
    go build -trimpath -ldflags "-s -w" -o "$bin/etcd" "${pkgs[2]}")
  build_kubelet_exec
  local built=$((SECONDS - t0))

  # The OpenShift CRDs the simulator installs come from openshift/api at a pinned commit (its
  # @latest is an ancient v3.9.0): downloaded (checked against the checksum database) into the
  # module cache; bin/openshift-api points at that read-only tree.
  local api_dir
  if ! api_dir=$(retry 3 go mod download -json "github.com/openshift/api@$openshift_api" 2>>"$log" | jq -er '.Dir'); then
    say "kube: cannot download github.com/openshift/api@$openshift_api (for its CRDs):"
    sed 's/^/real-components:   /' "$log" >&2
    grep -qE '40[34] ' "$log" && exit 3
    exit 1
  fi
  ln -sfn "$api_dir" "$bin/openshift-api"
  {
    echo "kube-apiserver: k8s.io/kubernetes/cmd/kube-apiserver@$kver ($("$bin/kube-apiserver" --version))"
    echo "kube-controller-manager: k8s.io/kubernetes/cmd/kube-controller-manager@$kver ($("$bin/kube-controller-manager" --version))"
    echo "etcd: go.etcd.io/etcd/server/v3@$ever ($("$bin/etcd" --version | tr '\n' ' ' | sed 's/ *$//'))"
    echo "openshift-api: github.com/openshift/api@$openshift_api (CRDs)"
    echo "kubelet-exec: tests/real/kube/kubelet-exec (ours) on k8s.io/kubelet@$(modver k8s.io/kubelet || true)'s streaming code"
    echo "go: $(go env GOVERSION), CGO_ENABLED=0; wrapper tests/real/kube/go.mod sha256 $(sha256sum "$wrapper_dir/go.mod" | cut -c1-12)"
  } >"$bin/versions"
  cp "$wrapper_dir/go.mod" "$bin/go.mod"
  say "kube: built into $bin in $built s"
  print_versions
}

# --- group agent ---------------------------------------------------------------------------
# The real discovery agent: github.com/openshift/assisted-installer-agent's one binary (built
# from src/agent/main as upstream's Makefile does: CGO_ENABLED=0, -tags strictfipsruntime), the
# `agent`, `next_step_runner`, `inventory`, `free_addresses`, `disk_speed_check` and
# `logs_sender` of the node-agent image by the name it is called as (upstream's Dockerfile
# links those names to it). Pinned by tests/real/agent/go.mod; built like assisted-service:
# from the module proxy, or (the proxy refuses it) from the tree AGENT_DAY2_AGENT_SRC names
# (a checkout or a tarball), with -mod=vendor.
build_agent() {
  wrapper="$root/tests/real/agent/go.mod"
  local module=github.com/openshift/assisted-installer-agent pseudo commit out work log src source_desc t0
  pseudo=$(awk -v m="$module" '$1 == "require" && $2 == m {print $3}' "$wrapper")
  [ -n "$pseudo" ] || { say "agent: no 'require $module' line in $wrapper"; exit 1; }
  commit=${pseudo##*-}
  out=${AGENT_DAY2_REAL_AGENT_DIR:-$cache_root/agent-$commit}
  bin="$out/bin"
  if [ -x "$bin/agent" ] && [ -s "$bin/versions" ]; then
    say "agent: cached in $bin"
    print_versions
    return 0
  fi
  command -v go >/dev/null || { say "agent: needs Go (go1.25 or newer) on PATH"; exit 1; }
  mkdir -p "$bin"
  work="$out/wrapper"
  mkdir -p "$work"
  cp "$wrapper" "$work/go.mod"
  rm -f "$work/go.sum"
  log="$out/proxy.log"
  local get_cmd=(go get "$module/src/agent/main@$pseudo")
  export CGO_ENABLED=0
  t0=$SECONDS
  if (cd "$work" && retry 3 "${get_cmd[@]}") >"$log" 2>&1; then
    say "agent: building from the module proxy ($module@$pseudo)"
    (cd "$work" && go build -trimpath -tags strictfipsruntime -ldflags "-s -w" -o "$bin/agent" "$module/src/agent/main")
    source_desc="module proxy"
  elif ! grep -qE "$refusal" "$log"; then
    say "agent: cannot fetch $module@$pseudo from the module proxy ($(go env GOPROXY)), and it did not refuse it either:"
    sed 's/^/real-components:   /' "$log" >&2
    exit 1
  elif [ -n "${AGENT_DAY2_AGENT_SRC:-}" ]; then
    src=$(source_tree "$AGENT_DAY2_AGENT_SRC")
    say "agent: the module proxy refused $module@$pseudo ($(grep -m1 -o '40[0-9] [A-Za-z ]*' "$log" || echo 'see '"$log"))"
    [ -f "$src/go.mod" ] && grep -q "^module $module\$" "$src/go.mod" ||
      { say "agent: $src is not a checkout of $module"; exit 1; }
    for f in vendor/modules.txt src/agent/main/main.go; do
      [ -f "$src/$f" ] || { say "agent: $src has no $f: not a full checkout of $module at $commit"; exit 1; }
    done
    verify_tree "$src" "$commit" "$(pinned_tree "$wrapper" "$module")"
    say "agent: building from the checkout $src (-mod=vendor)"
    (cd "$src" && go build -mod=vendor -trimpath -tags strictfipsruntime -ldflags "-s -w" -o "$bin/agent" ./src/agent/main)
    source_desc="checkout $src (vendor/)"
  else
    say "agent: BLOCKED: the Go module proxy does not serve $module@$pseudo."
    say "agent: command: (cd $work && ${get_cmd[*]})"
    sed 's/^/real-components:   /' "$log" >&2
    say "agent: set AGENT_DAY2_AGENT_SRC to a checkout (or the snapshot tarball) of commit $commit to build from it instead."
    exit 3
  fi
  echo "agent: $module/src/agent/main@$pseudo (from the $source_desc; go $(go env GOVERSION), CGO_ENABLED=0, -tags strictfipsruntime)" >"$bin/versions"
  say "agent: built into $bin in $((SECONDS - t0)) s"
  print_versions
}

# --- group krew ----------------------------------------------------------------------------
# The real krew: `kubectl krew` (tests/krew.rs installs the plugin's archive with it, from a
# manifest and from a local index) and validate-krew-manifest (the check krew-index runs on a
# manifest), from sigs.k8s.io/krew at the version tests/real/krew/go.mod requires.
build_krew() {
  local wrapper_dir="$root/tests/real/krew" module=sigs.k8s.io/krew ver out work log t0 probe
  command -v go >/dev/null || { say "krew: needs Go (go1.24 or newer) on PATH"; exit 1; }
  command -v jq >/dev/null || { say "krew: needs jq on PATH"; exit 1; }
  [ -f "$wrapper_dir/go.mod" ] && [ -f "$wrapper_dir/go.sum" ] ||
    { say "krew: $wrapper_dir must hold go.mod and go.sum"; exit 1; }
  ver=$( (cd "$wrapper_dir" && go mod edit -json) | jq -r --arg m "$module" '.Require[]? | select(.Path == $m) | .Version')
  [ -n "$ver" ] || { say "krew: $wrapper_dir/go.mod must require $module"; exit 1; }
  out=${AGENT_DAY2_REAL_KREW_DIR:-$cache_root/krew-$ver}
  bin="$out/bin"
  if [ -x "$bin/kubectl-krew" ] && [ -x "$bin/validate-krew-manifest" ] && [ -s "$bin/versions" ] &&
    cmp -s "$bin/go.mod" "$wrapper_dir/go.mod"; then
    say "krew: cached in $bin"
    print_versions
    return 0
  fi
  work="$out/wrapper"
  mkdir -p "$bin" "$work"
  cp "$wrapper_dir/go.mod" "$wrapper_dir/go.sum" "$work/"
  export GOFLAGS="-mod=readonly ${GOFLAGS:-}" CGO_ENABLED=0
  log="$out/proxy.log"
  # Download (retried): exactly the modules the two main packages load, checked against go.sum.
  local get_cmd=(go list -deps -f '{{if .Error}}{{.ImportPath}}: {{.Error}}{{end}}' "$module/cmd/krew" "$module/cmd/validate-krew-manifest")
  t0=$SECONDS
  if ! (cd "$work" && retry 3 "${get_cmd[@]}") >"$log" 2>&1; then
    if grep -qE "$refusal" "$log"; then
      say "krew: BLOCKED: the Go module proxy refused a module $module@$ver needs."
      say "krew: command: (cd $work && ${get_cmd[*]})"
      grep -E 'reading https?://|server response' "$log" | sort -u | sed 's/^/real-components:   /' >&2
      exit 3
    fi
    say "krew: downloading the modules failed:"
    sed 's/^/real-components:   /' "$log" >&2
    exit 1
  fi
  say "krew: building kubectl-krew and validate-krew-manifest $ver"
  (cd "$work" &&
    go build -trimpath -ldflags "-s -w -X $module/internal/version.gitTag=$ver" -o "$bin/kubectl-krew" "$module/cmd/krew" &&
    go build -trimpath -ldflags "-s -w" -o "$bin/validate-krew-manifest" "$module/cmd/validate-krew-manifest")
  # `kubectl krew version` makes its directories under KREW_ROOT (default ~/.krew): a throw-away one.
  probe=$(mktemp -d)
  {
    echo "kubectl-krew: $module/cmd/krew@$ver ($(KREW_ROOT=$probe KREW_NO_UPGRADE_CHECK=1 "$bin/kubectl-krew" version 2>/dev/null | awk '$1 == "GitTag" {print "GitTag " $2}'))"
    echo "validate-krew-manifest: $module/cmd/validate-krew-manifest@$ver"
    echo "go: $(go env GOVERSION), CGO_ENABLED=0; wrapper tests/real/krew/go.mod sha256 $(sha256sum "$wrapper_dir/go.mod" | cut -c1-12)"
  } >"$bin/versions"
  rm -rf "$probe"
  cp "$wrapper_dir/go.mod" "$bin/go.mod"
  say "krew: built into $bin in $((SECONDS - t0)) s"
  print_versions
}

# --- which groups --------------------------------------------------------------------------
# run_group NAME: runs build_NAME in a subshell (its `exit` ends only it) and sets rc to its
# status. Never call it where its status is tested (`|| ...`, `if`): bash then ignores the
# subshell's `set -e`.
run_group() {
  set +e
  (set -e; "build_$1")
  rc=$?
  set -e
  # The documented statuses: 0 built, 3 blocked, 1 anything else (a command's own status, a
  # signal's 128+n, is said above and reported as 1, so `all` never shows a failure as 3).
  [ "$rc" = 0 ] || [ "$rc" = 3 ] || rc=1
}
if [ "${1:-}" = unpack ]; then
  [ $# -eq 2 ] || { say "usage: $0 unpack TARBALL"; exit 1; }
  unpack "$2"; exit
fi
[ $# -le 1 ] || { say "usage: $0 [assisted|kube|agent|krew|all] (one group, got $#: $*)"; exit 1; }
case "${1:-all}" in
  assisted | kube | agent | krew)
    run_group "$1"; exit "$rc" ;;
  all)
    worst=0
    for g in assisted kube agent krew; do
      run_group "$g"
      if [ "$rc" -eq 1 ] || { [ "$rc" -ne 0 ] && [ "$worst" -ne 1 ]; }; then worst=$rc; fi
      [ "$rc" -eq 0 ] || say "group $g ended with exit status $rc"
    done
    exit "$worst" ;;
  *) say "usage: $0 [assisted|kube|agent|krew|all] (unknown group '$1')"; exit 1 ;;
esac
