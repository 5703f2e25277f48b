#!/usr/bin/env bash
# Benchmark: our node-ISO embed vs `coreos-installer iso ignition embed -o` on the same 1 GiB
# CoreOS-layout ISO of random (not sparse) data, in the same run: a warm-up of each, then
# PAIRS (default 5, at least 5) interleaved rounds in alternating order. Prints the median wall
# times, the median and range of the per-round ratio ours/theirs (target <= 1.0; also against
# coreos-installer followed by an fsync, our durability) and our peak RSS (target <= 64 MiB).
#
# Usage: [PAIRS=N] bash benches/iso_embed.sh [SIZE_MIB]   (default 1024; needs ~3x SIZE free
# in $TMPDIR)
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

to_secs() { awk -F: '{ if (NF==3) print $1*3600+$2*60+$3; else print $1*60+$2 }' <<<"$1"; }
# run_ours N / run_ci N / run_ci_sync N: one timed run; appends "seconds peak_rss_kib" to
# $WORK/<name>.runs and removes the output (the next run writes a fresh file).
run_ours() {
    /usr/bin/time -v -o "$WORK/t" "$OURS" "$WORK/base.iso" "$WORK/out.iso" "$WORK/config.ign" "${OUR_FLAGS:-}" > "$WORK/ours.out"
    echo "$(to_secs "$(awk -F': ' '/Elapsed \(wall clock\)/ {print $2}' "$WORK/t")") $(awk -F': ' '/Maximum resident set size/ {print $2}' "$WORK/t")" >> "$WORK/ours.runs"
    rm -f "$WORK/out.iso"; sync
}
run_ci() {
    /usr/bin/time -v -o "$WORK/t" "$CI_BIN" iso ignition embed -i "$WORK/config.ign" -o "$WORK/out.iso" "$WORK/base.iso"
    echo "$(to_secs "$(awk -F': ' '/Elapsed \(wall clock\)/ {print $2}' "$WORK/t")") $(awk -F': ' '/Maximum resident set size/ {print $2}' "$WORK/t")" >> "$WORK/ci.runs"
    rm -f "$WORK/out.iso"; sync
}
# We fsync the output before renaming it into place (a node ISO must not be half on disk
# after a crash); coreos-installer leaves writeback to the kernel. The same durability for
# both: coreos-installer followed by an fsync of its output.
run_ci_sync() {
    local t0 t1
    t0=$(date +%s.%N)
    "$CI_BIN" iso ignition embed -i "$WORK/config.ign" -o "$WORK/out.iso" "$WORK/base.iso"
    python3 -c 'import os,sys; fd=os.open(sys.argv[1], os.O_RDONLY); os.fsync(fd)' "$WORK/out.iso"
    t1=$(date +%s.%N)
    awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.3f 0\n", b - a }' >> "$WORK/ci_sync.runs"
    rm -f "$WORK/out.iso"; sync
}

# One timed run of each program only says which ran first (the first run pays for a cold
# page cache and writeback of the previous run): one untimed warm-up of each, then PAIRS
# interleaved rounds, the order alternating (ours first in odd rounds, theirs first in even
# ones). Medians, and the range of the per-round ratios.
PAIRS="${PAIRS:-5}"
[ "$PAIRS" -ge 5 ] || { echo "PAIRS must be at least 5"; exit 2; }
echo "warm-up (not timed)..."
run_ours; rm -f "$WORK/ours.runs"
cat "$WORK/ours.out"
if [ -n "$CI_BIN" ]; then run_ci; rm -f "$WORK/ci.runs"; fi
for i in $(seq 1 "$PAIRS"); do
    if [ -z "$CI_BIN" ]; then
        run_ours
    elif [ $((i % 2)) -eq 1 ]; then
        run_ours; run_ci; run_ci_sync
    else
        run_ci_sync; run_ci; run_ours
    fi
done

# summary OURS_RUNS THEIRS_RUNS LABEL: medians and the range of per-round ratios.
summary() {
    python3 - "$@" <<'PY'
import statistics, sys
def runs(p):
    return [tuple(float(x) for x in l.split()) for l in open(p) if l.strip()]
ours = runs(sys.argv[1])
o = [t for t, _ in ours]
if len(sys.argv) == 2:
    print(f"ours: median {statistics.median(o):.2f} s wall over {len(o)} runs "
          f"({min(o):.2f}-{max(o):.2f}), peak RSS {max(r for _, r in ours) / 1024:.0f} MiB (target <= 64 MiB)")
    sys.exit()
theirs = [t for t, _ in runs(sys.argv[2])]
ratios = [a / b for a, b in zip(o, theirs) if b > 0]
print(f"{sys.argv[3]}: median {statistics.median(theirs):.2f} s wall ({min(theirs):.2f}-{max(theirs):.2f}); "
      f"ratio ours/theirs: median {statistics.median(ratios):.2f}, range {min(ratios):.2f}-{max(ratios):.2f} "
      f"over {len(ratios)} interleaved pairs (target <= 1.0)")
PY
}
summary "$WORK/ours.runs"
if [ -n "$CI_BIN" ]; then
    ci_rss=$(awk '{ if ($2 > m) m = $2 } END { print m }' "$WORK/ci.runs")
    summary "$WORK/ours.runs" "$WORK/ci.runs" "coreos-installer (peak RSS $((ci_rss / 1024)) MiB)"
    summary "$WORK/ours.runs" "$WORK/ci_sync.runs" "coreos-installer + fsync of its output"
else
    echo "skipped comparison: coreos-installer not installed"
fi
