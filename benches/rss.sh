#!/usr/bin/env bash
# Peak memory of `blockwise build` for a large tree: 40 x 100 MiB files + 20,000 small files
# (about 4.1 GiB) into a 6 GiB ext4 and a 6 GiB FAT32 image. The budget is
# 64 MiB + 1 KiB per file (memory follows metadata, not content); the script prints the peak
# RSS next to it, then checks each image with e2fsck -fn / fsck.fat -n and compares every
# file's content with the source (debugfs rdump / mcopy).
#
#   benches/rss.sh [--xfs] [WORKDIR]
#
# --xfs  also builds on a fresh XFS filesystem on a loop device (root; reflink is XFS's
#        default) and reports how much the filesystem grew: the image shares the large
#        files' blocks with the sources.
# WORKDIR defaults to target/rss (needs ~13 GiB free; the tree is kept between runs).
# Timing is not the point here (see benches/compare.sh); nothing is asserted about time.
set -euo pipefail
cd "$(dirname "$0")/.."

xfs=0
if [ "${1:-}" = "--xfs" ]; then xfs=1; shift; fi
work="$(realpath -m "${1:-target/rss}")"
mkdir -p "$work"

cargo build --release --quiet
bw="$PWD/target/release/blockwise"
command -v /usr/bin/time >/dev/null || { echo "needs /usr/bin/time (apt-get install time)" >&2; exit 2; }

make_tree() { # $1 = directory
  local t="$1"
  if [ -f "$t/.complete" ]; then return; fi
  rm -rf "$t"; mkdir -p "$t/big"
  echo "generating the tree in $t (40 x 100 MiB + 20,000 small files)" >&2
  for i in $(seq -w 1 40); do
    head -c $((100 << 20)) /dev/urandom >"$t/big/file$i.bin"
  done
  python3 - "$t" <<'EOF'
import os, random, sys
root = sys.argv[1]
rnd = random.Random(42)
for d in range(200):
    p = os.path.join(root, "small", f"dir{d:03d}")
    os.makedirs(p, exist_ok=True)
    for f in range(100):
        with open(os.path.join(p, f"f{f:03d}.txt"), "wb") as fh:
            fh.write(rnd.randbytes(rnd.randint(1, 8192)))
EOF
  touch "$t/.complete"
}

files_in() { find "$1" -type f ! -name .complete | wc -l; }

spec() { # $1 = fs, $2 = contents dir, $3 = spec path
  cat >"$3" <<EOF
[image]
size = "6GiB"
table = "mbr"
seed = 1
timestamp = 1700000000

[[partition]]
fs = "$1"
size = "fill"
contents = "$2"
EOF
}

peak_kib() { # runs "$@" under /usr/bin/time -v, prints the peak RSS in KiB
  local log; log="$(mktemp)"
  /usr/bin/time -v "$@" 2>"$log" >/dev/null || { cat "$log" >&2; rm -f "$log"; return 1; }
  awk -F: '/Maximum resident set size/ {gsub(/ /,"",$2); print $2}' "$log"
  rm -f "$log"
}

check_image() { # $1 = fs, $2 = image, $3 = tree
  local img="$2" tree="$3" off out
  off=$(( $(sfdisk --json "$img" | python3 -c 'import json,sys; print(json.load(sys.stdin)["partitiontable"]["partitions"][0]["start"])') * 512 ))
  out="$(mktemp -d "$work/check.XXXX")"
  if [ "$1" = ext4 ]; then
    dd if="$img" of="$out/part" bs=4M skip=$((off >> 22)) status=none conv=sparse
    e2fsck -fn "$out/part" >/dev/null
    mkdir "$out/root"; debugfs -R "rdump / $out/root" "$out/part" >/dev/null 2>&1
    rm -rf "$out/root/lost+found"
    diff -r "$tree" "$out/root" -x .complete
  else
    dd if="$img" of="$out/part" bs=4M skip=$((off >> 22)) status=none conv=sparse
    fsck.fat -n "$out/part" >/dev/null
    mkdir "$out/root"
    MTOOLS_SKIP_CHECK=1 mcopy -s -n -i "$out/part" ::/big ::/small "$out/root/"
    diff -r "$tree" "$out/root" -x .complete
  fi
  rm -rf "$out"
  echo "    $1: e2fsck/fsck.fat clean, every file identical"
}

run_on() { # $1 = label, $2 = base dir
  local base="$2" tree="$2/tree" n budget
  make_tree "$tree"
  n=$(files_in "$tree")
  budget=$(( 64 * 1024 + n ))
  echo "== $1: $n files, $(du -sh --apparent-size "$tree" | cut -f1) (budget: 64 MiB + 1 KiB x $n = $((budget / 1024)) MiB)"
  for fs in ext4 fat32; do
    spec "$fs" tree "$base/$fs.toml"
    local used_before used_after kib
    sync; sleep 1
    used_before=$(df --output=used -B1 "$base" | tail -1)
    kib=$(peak_kib "$bw" build "$base/$fs.toml" -o "$base/$fs.img" -q)
    sync; sleep 1
    used_after=$(df --output=used -B1 "$base" | tail -1)
    printf '    %-6s peak RSS %6d MiB  (%s of budget)  filesystem grew by %s\n' "$fs" $((kib / 1024)) \
      "$(awk -v a="$kib" -v b="$budget" 'BEGIN{printf "%.0f%%", 100*a/b}')" \
      "$(numfmt --to=iec -- $((used_after - used_before)))"
    if [ "$kib" -gt "$budget" ]; then echo "    OVER BUDGET" >&2; fi
    if command -v filefrag >/dev/null; then
      echo "    extents shared with other files (filefrag -v): $(filefrag -v "$base/$fs.img" | grep -c shared || true)"
    fi
    check_image "$fs" "$base/$fs.img" "$tree"
    rm -f "$base/$fs.img"
  done
}

run_on "$(findmnt -no FSTYPE -T "$work")" "$work"

if [ "$xfs" = 1 ]; then
  [ "$(id -u)" = 0 ] || { echo "--xfs needs root (loop device)" >&2; exit 2; }
  raw="$work/xfs.raw"; mnt="$work/xfs"
  truncate -s 16G "$raw"; mkfs.xfs -q -f -m reflink=1 "$raw"
  dev=$(losetup -f --show "$raw"); mkdir -p "$mnt"; mount "$dev" "$mnt"
  trap 'umount "$mnt"; losetup -d "$dev"; rm -f "$raw"' EXIT
  run_on "xfs (reflink)" "$mnt"
fi
