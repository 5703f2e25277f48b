#!/usr/bin/env bash
# Builds the release archive(s) of the kubectl/oc plugin from a clean git tree and fills the krew
# manifests (plugin.yaml and krew/plugins/agent-day2.yaml, identical) with the version from
# Cargo.toml, the download URI and the archive's sha256.
#
#   scripts/release.sh [--allow-dirty] [--url-base URL] [--homepage URL] [--target TRIPLE]...
#   scripts/release.sh --deps-only
#
# --url-base  where the archives will be downloadable from; a platform's uri is
#             URL/vX.Y.Z/<archive>, the layout of GitHub release assets (default: the placeholder
#             https://github.com/OWNER/agent-day2/releases/download; set the real one before
#             publishing the krew/ index).
# --target    a Rust target triple with the glibc floor after a dot, as cargo-zigbuild takes it;
#             repeatable; default x86_64-unknown-linux-gnu.2.28 (linux/amd64, runs on RHEL 8's
#             glibc 2.28). Other Linux platforms krew knows:
#               aarch64-unknown-linux-gnu.2.28       linux/arm64
#               powerpc64le-unknown-linux-gnu.2.28   linux/ppc64le
#             (each needs `rustup target add <triple without .2.28>` first; only linux/amd64 has
#             been built on the project's machines). macOS and Windows are not buildable: the
#             plugin calls Linux-only renameat2.
# --homepage  the project page in the manifests (default: --url-base without /releases/download).
# --allow-dirty  build even if `git status` shows changes (the archive then does not match a commit).
# --deps-only  only install the build tools below when missing, then exit (no build, no git check).
#
# Output: dist/kubectl-agent_day2-vX.Y.Z-<os>-<arch>.tar.gz (the stripped binary, the
# kubectl_complete-agent_day2 completion helper, LICENSE, README.md; sorted entries, mtime of the
# commit, owner 0, gzip without name/time, so the same commit gives the same bytes) and a
# .sha256 file beside it. The manifests list exactly the platforms built in this run.
# Installs ziglang (PyPI) and cargo-zigbuild (crates.io) when missing. ziglang goes into a venv
# of its own, <target dir>/release-tools/ziglang-venv (system Pythons of Debian 12 / Ubuntu 24.04
# refuse `pip install` outside a venv: EXTERNALLY-MANAGED; on Debian/Ubuntu `python3 -m venv`
# needs the python3-venv package), used only when `python3 -m ziglang` does not work already; it
# is handed to cargo-zigbuild with CARGO_ZIGBUILD_PYTHON_PATH. In a checkout with work in
# progress, build from a clean worktree sharing the target dir (dependencies are not rebuilt):
#   git worktree add /tmp/agent-day2-release HEAD && cd /tmp/agent-day2-release &&
#   CARGO_TARGET_DIR=<checkout>/target scripts/release.sh --url-base ... && cp -r dist plugin.yaml krew <checkout>/
set -euo pipefail
cd "$(dirname "$0")/.."

url_base="https://github.com/OWNER/agent-day2/releases/download"
homepage=""
allow_dirty=0
deps_only=0
targets=()
while [ $# -gt 0 ]; do
  case "$1" in
    --allow-dirty) allow_dirty=1 ;;
    --deps-only) deps_only=1 ;;
    --url-base) url_base=${2:?--url-base needs a URL}; shift ;;
    --url-base=*) url_base=${1#*=} ;;
    --homepage) homepage=${2:?--homepage needs a URL}; shift ;;
    --homepage=*) homepage=${1#*=} ;;
    --target) targets+=("${2:?--target needs a triple}"); shift ;;
    --target=*) targets+=("${1#*=}") ;;
    -h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "release.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
  shift
done
[ ${#targets[@]} -gt 0 ] || targets=(x86_64-unknown-linux-gnu.2.28)
url_base=${url_base%/}
[ -n "$homepage" ] || homepage=${url_base%/releases/download}

# --- tools -------------------------------------------------------------------------------------
export PATH="$HOME/.cargo/bin:$PATH"
install_tools() {
  if ! command -v zig >/dev/null 2>&1 && ! python3 -m ziglang version >/dev/null 2>&1; then
    local target_dir=${CARGO_TARGET_DIR:-target}
    case $target_dir in /*) ;; *) target_dir=$PWD/$target_dir ;; esac
    local venv=$target_dir/release-tools/ziglang-venv
    if ! "$venv/bin/python3" -m ziglang version >/dev/null 2>&1; then
      echo "release.sh: installing ziglang from PyPI into $venv (the C toolchain cargo-zigbuild links with)" >&2
      mkdir -p "$(dirname "$venv")"
      python3 -m venv --clear "$venv" || {
        echo "release.sh: python3 -m venv failed; on Debian/Ubuntu install python3-venv first" >&2
        exit 1
      }
      "$venv/bin/python3" -m pip install --quiet ziglang
      "$venv/bin/python3" -m ziglang version >/dev/null
    fi
    # cargo-zigbuild runs `$CARGO_ZIGBUILD_PYTHON_PATH -m ziglang` (default python3).
    export CARGO_ZIGBUILD_PYTHON_PATH="$venv/bin/python3"
  fi
  # (`cargo zigbuild --version` is an error: the subcommand has no such flag)
  if ! cargo-zigbuild --version >/dev/null 2>&1; then
    echo "release.sh: installing cargo-zigbuild from crates.io (a few minutes)" >&2
    cargo install --locked --quiet cargo-zigbuild
  fi
}
if [ "$deps_only" = 1 ]; then
  install_tools
  if [ -n "${CARGO_ZIGBUILD_PYTHON_PATH:-}" ]; then
    zig=("$CARGO_ZIGBUILD_PYTHON_PATH" -m ziglang)
  elif command -v zig >/dev/null 2>&1; then
    zig=(zig)
  else
    zig=(python3 -m ziglang)
  fi
  echo "release.sh: zig $("${zig[@]}" version) (${zig[*]}), $(cargo-zigbuild --version)" >&2
  exit 0
fi

if [ -n "$(git status --porcelain)" ]; then
  if [ "$allow_dirty" = 1 ]; then
    echo "release.sh: warning: building from a dirty tree (--allow-dirty)" >&2
  else
    git status --short >&2
    echo "release.sh: the tree has uncommitted changes; commit them or pass --allow-dirty" >&2
    exit 1
  fi
fi

# Version of the plugin package (workspace version), e.g. 0.1.0.
# --locked: a Cargo.lock that does not match Cargo.toml is an error, not silently rewritten.
version=$(cargo metadata --locked --no-deps --format-version 1 |
  sed -n 's/.*"name":"oc-agent-day2","version":"\([^"]*\)".*/\1/p')
[ -n "$version" ] || { echo "release.sh: cannot read the version from Cargo.toml" >&2; exit 1; }
tag="v$version"
# Reproducible times: the archive's mtimes and anything that embeds a build date.
SOURCE_DATE_EPOCH=$(git log -1 --format=%ct)
export SOURCE_DATE_EPOCH
commit=$(git rev-parse --short=12 HEAD)

install_tools

# Go-style os/arch for a Rust triple (krew's selector values).
platform_of() {
  case "${1%%.*}" in
    x86_64-unknown-linux-gnu) echo "linux amd64" ;;
    aarch64-unknown-linux-gnu) echo "linux arm64" ;;
    powerpc64le-unknown-linux-gnu) echo "linux ppc64le" ;;
    *) return 1 ;;
  esac
}

mkdir -p dist
platforms_yaml=""
for target in "${targets[@]}"; do
  read -r os arch < <(platform_of "$target") || {
    echo "release.sh: unsupported --target $target (see --help)" >&2
    exit 2
  }
  rust_target=${target%%.*}
  name="kubectl-agent_day2-$tag-$os-$arch.tar.gz"
  echo "release.sh: building $tag ($commit) for $os/$arch with cargo zigbuild --target $target" >&2
  start=$(date +%s)
  # strip=symbols: no symbol table in the shipped binary (the profile has no debug info anyway).
  CARGO_PROFILE_RELEASE_STRIP=symbols AGENT_DAY2_GIT_COMMIT=$commit \
    cargo zigbuild --locked --release --target "$target" --bin kubectl-agent_day2
  echo "release.sh: build took $(($(date +%s) - start)) s" >&2
  bin="${CARGO_TARGET_DIR:-target}/$rust_target/release/kubectl-agent_day2"
  if readelf -S "$bin" | grep -q '\.symtab'; then
    echo "release.sh: $bin still has a symbol table (strip failed)" >&2
    exit 1
  fi
  # What the binary needs from the system: only glibc's libraries, symbols <= the target's floor.
  readelf -d "$bin" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/  needs \1/p' >&2
  floor=${target#"$rust_target"}
  floor=${floor#.}
  max_glibc=$(readelf --version-info "$bin" | grep -o 'GLIBC_[0-9][0-9.]*' | sort -u -V | tail -1)
  echo "release.sh: highest glibc symbol version needed: $max_glibc (floor ${floor:-none})" >&2
  if [ -n "$floor" ] && [ "$(printf '%s\n' "GLIBC_$floor" "$max_glibc" | sort -V | tail -1)" != "GLIBC_$floor" ]; then
    echo "release.sh: $bin needs $max_glibc, newer than the glibc $floor floor" >&2
    exit 1
  fi
  # Only glibc's own libraries (tests/krew.rs checks the same on the archive).
  if readelf -d "$bin" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p' |
    grep -vxE 'lib(c\.so\.6|m\.so\.6|pthread\.so\.0|dl\.so\.2|rt\.so\.1|util\.so\.1|resolv\.so\.2|anl\.so\.1)|ld-linux-x86-64\.so\.2|ld-linux-aarch64\.so\.1|ld64\.so\.2' >&2; then
    echo "release.sh: $bin needs the libraries above, which are not part of glibc" >&2
    exit 1
  fi

  stage=$(mktemp -d)
  trap 'rm -rf "$stage"' EXIT
  install -m 0755 "$bin" "$stage/kubectl-agent_day2"
  install -m 0755 scripts/kubectl_complete-agent_day2 "$stage/kubectl_complete-agent_day2"
  install -m 0644 LICENSE README.md "$stage/"
  # Deterministic tar: entries named in sorted order, commit time, root owner, fixed modes.
  (cd "$stage" && LC_ALL=C tar --format=gnu --sort=name --mtime="@$SOURCE_DATE_EPOCH" \
    --owner=0 --group=0 --numeric-owner -cf - \
    LICENSE README.md kubectl-agent_day2 kubectl_complete-agent_day2) | gzip -n -9 >"dist/$name"
  rm -rf "$stage"
  trap - EXIT
  sha=$(sha256sum "dist/$name" | cut -d' ' -f1)
  echo "$sha  $name" >"dist/$name.sha256"
  echo "release.sh: dist/$name $(stat -c %s "dist/$name") bytes sha256 $sha" >&2

  platforms_yaml+="  - selector:
      matchLabels:
        os: $os
        arch: $arch
    uri: $url_base/$tag/$name
    sha256: $sha
    files:
      - from: kubectl-agent_day2
        to: .
      - from: kubectl_complete-agent_day2
        to: .
      - from: LICENSE
        to: .
      - from: README.md
        to: .
    bin: kubectl-agent_day2
"
done

# --- manifests ---------------------------------------------------------------------------------
# The whole manifest is written here (edit its text in this script); tests/krew.rs checks it by
# krew's validation rules and against the archive in dist/.
manifest() {
  cat <<EOF
# krew plugin manifest, written by scripts/release.sh from Cargo.toml's version and the archives
# it built (edit the text there, not here). Local install:
#   kubectl krew install --manifest=plugin.yaml --archive=dist/<archive>.tar.gz
apiVersion: krew.googlecontainertools.github.com/v1alpha2
kind: Plugin
metadata:
  name: agent-day2
spec:
  version: $tag
  homepage: $homepage
  shortDescription: Add worker nodes to agent-installed OpenShift
  description: |
    Grows an OpenShift cluster installed with the agent-based installer or the
    appliance flow on day 2, without installing multicluster engine:
      info       what the cluster offers and which permissions you lack
      add-nodes  node ISO / PXE files / appliance config image from the live cluster
      approve    verifies new nodes' kubelet CSRs strictly, approves the right ones
      monitor    follows each new node until it is Ready
      migrate    carries node 0's assisted-service data onto cluster 0
    It uses your current kube context and accepts kubectl's connection flags.
    Works as "kubectl agent-day2" and "oc agent-day2". Linux binaries need
    glibc 2.28 or newer (RHEL 8 and later).
  caveats: |
    Completion of "kubectl agent-day2 <TAB>" (kubectl 1.26+) needs the
    kubectl_complete-agent_day2 helper on PATH; krew links only the plugin.
    Copy it once (it calls kubectl-agent_day2 from PATH, so upgrades keep it):
      cd "\${KREW_ROOT:-\$HOME/.krew}" &&
      install -m 0755 store/agent-day2/$tag/kubectl_complete-agent_day2 bin/
    and remove it after "kubectl krew uninstall agent-day2". Shell completion
    of the command itself: kubectl agent-day2 completion bash|zsh|fish|powershell.
  platforms:
$platforms_yaml
EOF
}
mkdir -p krew/plugins
manifest | sed '$d' >plugin.yaml # drop the heredoc's trailing blank line
cp plugin.yaml krew/plugins/agent-day2.yaml
echo "release.sh: wrote plugin.yaml and krew/plugins/agent-day2.yaml ($tag, uri base $url_base)" >&2
if [[ $url_base == *OWNER* ]]; then
  echo "release.sh: note: the uri is the placeholder $url_base; pass --url-base before publishing" >&2
fi
