#!/usr/bin/env bash
# Benchmark: our node-ISO embed vs `coreos-installer iso ignition embed -o` on the same 1 GiB
# CoreOS-layout ISO of random (not sparse) data, in the same run. Prints both wall times, the
# ratio ours/theirs (target <= 1.0) and our peak RSS (target <= 64 MiB).
#
# Usage: bash benches/iso_embed.sh [SIZE_MIB]   (default 1024; needs ~3x SIZE free in $TMPDIR)
# Needs: genisoimage, python3, /usr/bin/time; coreos-installer on PATH or in ~/.cargo/bin for
# the comparison (without it only our numbers are printed).
set -euo pipefail
cd "$(dirname "$0")/.."
SIZE_MIB="${1:-1024}"
WORK="$(mktemp -d "${TMPDIR:-/tmp}/iso-embed-bench.XXXXXX")"
trap 'rm -rf "$WORK"' EXIT

need_kib=$(( SIZE_MIB * 1024 * 3 + 65536 ))
free_kib=$(df -Pk "$WORK" | awk 'NR==2 {print $4}')
if [ "$free_kib" -lt "$need_kib" ]; then
    echo "skipped: $WORK has $((free_kib / 1024)) MiB free, the benchmark needs $((need_kib / 1024)) MiB"
    exit 0
fi
for tool in genisoimage python3 /usr/bin/time; do
    command -v "$tool" >/dev/null || { echo "skipped: $tool not installed"; exit 0; }
done
CI_BIN="$(command -v coreos-installer || true)"
[ -z "$CI_BIN" ] && [ -x "$HOME/.cargo/bin/coreos-installer" ] && CI_BIN="$HOME/.cargo/bin/coreos-installer"

echo "building the example (release)..."
cargo build --release --quiet --example iso_embed_bench
OURS="$(cargo metadata --format-version 1 --no-deps | python3 -c 'import json,sys; print(json.load(sys.stdin)["target_directory"])')/release/examples/iso_embed_bench"

# --- a CoreOS-layout tree: igninfo.json, kargs.json with two karg areas, 256 KiB ignition.img,
#     and a rootfs of random data making up the size
T="$WORK/tree"
mkdir -p "$T/coreos" "$T/images/pxeboot" "$T/EFI/redhat" "$T/isolinux"
python3 - "$T" <<'PY'
import json, os, sys
t = sys.argv[1]
size = 1139
default = "coreos.liveiso=bench-0 ignition.firstboot ignition.platform.id=metal"
files = []
for path, head in (("EFI/redhat/grub.cfg", "menuentry 'live' {\n\tlinux /images/pxeboot/vmlinuz "),
                   ("isolinux/isolinux.cfg", "label linux\n  kernel /images/pxeboot/vmlinuz\n  append initrd=/images/pxeboot/initrd.img,/images/ignition.img ")):
    area = (default + "\n").ljust(size, "#")
    with open(os.path.join(t, path), "w") as f:
        f.write(head + area + " COREOS_KARG_EMBED_AREA\n}\n")
    files.append({"path": path, "offset": len(head), "pad": "#", "end": "\n"})
json.dump({"default": default, "files": files, "size": size}, open(os.path.join(t, "coreos/kargs.json"), "w"))
open(os.path.join(t, "coreos/igninfo.json"), "w").write('{"file":"images/ignition.img"}')
open(os.path.join(t, "images/ignition.img"), "wb").write(b"\0" * 262144)
open(os.path.join(t, "images/pxeboot/vmlinuz"), "wb").write(os.urandom(8 << 20))
open(os.path.join(t, "images/pxeboot/initrd.img"), "wb").write(os.urandom(8 << 20))
PY
head -c "$(( (SIZE_MIB - 16) * 1024 * 1024 ))" /dev/urandom > "$T/images/pxeboot/rootfs.img"
genisoimage -quiet -V bench-0 -R -J -o "$WORK/base.iso" "$T"
rm -rf "$T"
echo "base ISO: $(stat -c %s "$WORK/base.iso") bytes"

# a realistic config: ~40 KiB of JSON with base64-like payload
python3 -c 'import base64,os,json; print(json.dumps({"ignition":{"version":"3.2.0"},"storage":{"files":[{"path":"/etc/x","contents":{"source":"data:;base64,"+base64.b64encode(os.urandom(30000)).decode()}}]}}))' > "$WORK/config.ign"

sync
# warm the page cache the same way for both tools
cat "$WORK/base.iso" > /dev/null

/usr/bin/time -v -o "$WORK/ours.time" "$OURS" "$WORK/base.iso" "$WORK/ours.iso" "$WORK/config.ign" "${OUR_FLAGS:-}" > "$WORK/ours.out"
cat "$WORK/ours.out"
ours_s=$(awk -F': ' '/Elapsed \(wall clock\)/ {print $2}' "$WORK/ours.time")
ours_rss=$(awk -F': ' '/Maximum resident set size/ {print $2}' "$WORK/ours.time")
rm -f "$WORK/ours.iso"; sync

to_secs() { awk -F: '{ if (NF==3) print $1*3600+$2*60+$3; else print $1*60+$2 }' <<<"$1"; }
ours=$(to_secs "$ours_s")
echo "ours: ${ours} s wall, peak RSS $((ours_rss / 1024)) MiB (target <= 64 MiB)"

if [ -n "$CI_BIN" ]; then
    /usr/bin/time -v -o "$WORK/ci.time" "$CI_BIN" iso ignition embed -i "$WORK/config.ign" -o "$WORK/ci.iso" "$WORK/base.iso"
    ci_s=$(awk -F': ' '/Elapsed \(wall clock\)/ {print $2}' "$WORK/ci.time")
    ci_rss=$(awk -F': ' '/Maximum resident set size/ {print $2}' "$WORK/ci.time")
    ci=$(to_secs "$ci_s")
    echo "coreos-installer: ${ci} s wall, peak RSS $((ci_rss / 1024)) MiB"
    awk -v a="$ours" -v b="$ci" 'BEGIN { printf "ratio ours/coreos-installer: %.2f (target <= 1.0)\n", (b > 0 ? a / b : 0) }'
    # We fsync the output before renaming it into place (a node ISO must not be half on disk
    # after a crash); coreos-installer leaves writeback to the kernel. The same durability
    # for both: time coreos-installer followed by an fsync of its output.
    rm -f "$WORK/ci.iso"; sync
    t0=$(date +%s.%N)
    "$CI_BIN" iso ignition embed -i "$WORK/config.ign" -o "$WORK/ci.iso" "$WORK/base.iso"
    python3 -c 'import os,sys; fd=os.open(sys.argv[1], os.O_RDONLY); os.fsync(fd)' "$WORK/ci.iso"
    t1=$(date +%s.%N)
    ci_sync=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.2f", b - a }')
    echo "coreos-installer + fsync of its output: ${ci_sync} s wall"
    awk -v a="$ours" -v b="$ci_sync" 'BEGIN { printf "ratio ours/(coreos-installer + fsync): %.2f (target <= 1.0)\n", (b > 0 ? a / b : 0) }'
else
    echo "skipped comparison: coreos-installer not installed"
fi
