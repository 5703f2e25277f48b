# Sourced by scripts/test.sh and scripts/demo.sh: installs the Debian packages the tests and
# the demo use when they are missing (root only; otherwise says what to install).

# apt-get that waits for a busy dpkg/apt lock (another apt-get running: exit 100 at once
# otherwise) instead of failing: apt's own lock timeout, and a retry while the lists lock is held.
apt_get() {
  local i rc err
  err=$(mktemp)
  for ((i = 0; i < 120; i++)); do
    rc=0
    DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 "$@" 2>"$err" || rc=$?
    if [ "$rc" = 100 ] && grep -qiE 'could not get lock|unable to lock|is another process using it' "$err"; then
      [ "$i" = 0 ] && echo "apt-get: waiting for another package manager to finish" >&2
      sleep 5
      continue
    fi
    cat "$err" >&2
    rm -f "$err"
    return "$rc"
  done
  cat "$err" >&2
  rm -f "$err"
  return 100
}

need_pkgs() {
  local missing=() cmd pkg
  while [ $# -gt 0 ]; do
    cmd=$1 pkg=$2; shift 2
    command -v "$cmd" >/dev/null 2>&1 || missing+=("$pkg")
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  if [ "$(id -u)" = 0 ]; then
    echo "installing: ${missing[*]}" >&2
    apt_get update -qq >/dev/null
    apt_get install -y -qq "${missing[@]}" >/dev/null
  else
    echo "please install: ${missing[*]} (apt-get install ${missing[*]})" >&2
    return 1
  fi
}
ensure_packages() {
  # command package ...
  need_pkgs jq jq openssl openssl ip iproute2 unshare util-linux xz xz-utils \
    isoinfo genisoimage xorriso xorriso cpio cpio \
    docker-registry docker-registry curl curl script bsdutils systemd-analyze systemd
  command -v kubectl >/dev/null 2>&1 || need_pkgs kubectl kubernetes-client
  # migrate tests: a real PostgreSQL server (initdb/pg_ctl) plus psql/pg_dump.
  compgen -G '/usr/lib/postgresql/*/bin/initdb' >/dev/null || need_pkgs initdb postgresql
  need_pkgs psql postgresql-client pg_dump postgresql-client
}
# The test oracle for our ISOs: the real coreos-installer, built from crates.io (about 7 minutes
# the first time on 2 cores; cargo keeps it in ~/.cargo/bin afterwards).
ensure_coreos_installer() {
  command -v coreos-installer >/dev/null 2>&1 && return 0
  [ -x "$HOME/.cargo/bin/coreos-installer" ] && return 0
  if [ "$(id -u)" = 0 ]; then
    need_pkgs pkg-config pkg-config
    for p in libzstd-dev liblzma-dev libssl-dev; do
      dpkg -s "$p" >/dev/null 2>&1 || { apt_get update -qq >/dev/null; apt_get install -y -qq libzstd-dev liblzma-dev libssl-dev >/dev/null; break; }
    done
  fi
  echo "installing coreos-installer from crates.io (test oracle; takes a few minutes)" >&2
  cargo install --locked --quiet coreos-installer
}
