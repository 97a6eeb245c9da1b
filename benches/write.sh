#!/usr/bin/env bash
# Throughput of `blockwise write` next to `dd bs=4M oflag=direct conv=fsync` and
# `bmaptool copy`, on the same loop device and on a regular file, for a fully mapped image
# and a sparse one. Prints the median of 5 runs of each (seconds, MB/s of image bytes) and
# the ratios. Root only (loop devices). Nothing is asserted; the goals (issue 10) are
# blockwise >= 0.95x dd on the full image, and time proportional to mapped bytes on the
# sparse one.
#
#   benches/write.sh [WORKDIR]      (default target/bench-write; needs ~2 GiB free)
#
# FULL_MIB (default 512) and SPARSE_MIB (default 2048, 64 MiB of it mapped) size the images.
set -euo pipefail
cd "$(dirname "$0")/.."

[ "$(id -u)" = 0 ] || { echo "SKIP: benches/write.sh needs root (loop devices)" >&2; exit 0; }
work="$(realpath -m "${1:-target/bench-write}")"
full_mib="${FULL_MIB:-512}"
sparse_mib="${SPARSE_MIB:-2048}"
runs=5
mkdir -p "$work"
cargo build --release --quiet
bw="$PWD/target/release/blockwise"
have_bmaptool=0
command -v bmaptool >/dev/null && have_bmaptool=1

full="$work/full.img"
sparse="$work/sparse.img"
if [ ! -f "$full" ] || [ "$(stat -c %s "$full")" != $((full_mib << 20)) ]; then
  head -c $((full_mib << 20)) /dev/urandom >"$full"
fi
if [ ! -f "$sparse" ] || [ "$(stat -c %s "$sparse")" != $((sparse_mib << 20)) ]; then
  rm -f "$sparse"; truncate -s $((sparse_mib << 20)) "$sparse"
  for i in $(seq 0 15); do   # 16 extents of 4 MiB spread over the image
    dd if=/dev/urandom of="$sparse" bs=1M count=4 seek=$((i * sparse_mib / 16)) conv=notrunc status=none
  done
fi
# The bmaps live in their own directory, so that blockwise maps the images by SEEK_DATA
# (bmaptool needs one; blockwise would pick up one beside the image and hash its ranges).
mkdir -p "$work/bmap"
if [ "$have_bmaptool" = 1 ]; then
  for img in "$full" "$sparse"; do
    b="$work/bmap/$(basename "$img").bmap"
    [ -f "$b" ] || bmaptool -q create "$img" -o "$b"
  done
fi

backing="$work/loop.bin"
filetarget="$work/target.img"
cleanup() { [ -n "${loopdev:-}" ] && losetup -d "$loopdev" 2>/dev/null || true; }
trap cleanup EXIT

median() { sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
timed() { # runs "$@" quietly, prints seconds
  local t0 t1
  t0=$(date +%s.%N)
  "$@" >/dev/null 2>"$work/last.err" || { echo "FAILED: $*" >&2; cat "$work/last.err" >&2; exit 1; }
  t1=$(date +%s.%N)
  echo "$t1 - $t0" | bc -l
}

run_case() { # $1 = image, $2 = target kind (loop|file)
  local img="$1" kind="$2" size target
  size=$(stat -c %s "$img")
  local -a tb td tm
  for r in $(seq 1 $runs); do
    if [ "$kind" = loop ]; then
      rm -f "$backing"; truncate -s "$size" "$backing"
      loopdev=$(losetup -f --show "$backing")
      target="$loopdev"
    else
      rm -f "$filetarget"; truncate -s "$size" "$filetarget"
      target="$filetarget"
    fi
    tb+=("$(timed "$bw" write "$img" "$target" --yes -q --no-verify)")
    td+=("$(timed dd if="$img" of="$target" bs=4M oflag=direct conv=fsync,notrunc)")
    if [ "$have_bmaptool" = 1 ]; then
      tm+=("$(timed bmaptool -q copy --bmap "$work/bmap/$(basename "$img").bmap" "$img" "$target")")
    fi
    if [ "$kind" = loop ]; then losetup -d "$loopdev"; loopdev=; fi
  done
  local mb b d m
  mb=$(echo "$size / 1000000" | bc -l)
  b=$(printf '%s\n' "${tb[@]}" | median)
  d=$(printf '%s\n' "${td[@]}" | median)
  printf '%-14s %-5s blockwise %7.3f s %8.1f MB/s | dd %7.3f s %8.1f MB/s | dd/blockwise time %.2fx' \
    "$(basename "$img")" "$kind" "$b" "$(echo "$mb / $b" | bc -l)" "$d" "$(echo "$mb / $d" | bc -l)" \
    "$(echo "$d / $b" | bc -l)"
  if [ "$have_bmaptool" = 1 ]; then
    m=$(printf '%s\n' "${tm[@]}" | median)
    printf ' | bmaptool %7.3f s | bmaptool/blockwise time %.2fx' "$m" "$(echo "$m / $b" | bc -l)"
  fi
  printf '\n'
}

echo "medians of $runs runs; MB/s = image bytes / 10^6 / s (sparse: the whole image's size)"
for img in "$full" "$sparse"; do
  for kind in loop file; do
    run_case "$img" "$kind"
  done
done
rm -f "$backing" "$filetarget"
