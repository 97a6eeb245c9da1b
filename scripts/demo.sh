#!/usr/bin/env bash
# Builds blockwise, then builds (printing the plan) the Raspberry-Pi-style example image (FAT32 boot +
# ext4 root, MBR, 4 MiB alignment) without root, then checks it with blockwise verify and,
# when installed, sfdisk, fsck.fat and e2fsck.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release --quiet
bw=target/release/blockwise
out=${1:-rpi.img}
$bw build examples/rpi.toml -o "$out" --bmap "$out.bmap"
$bw verify "$out"
if command -v sfdisk >/dev/null && command -v python3 >/dev/null; then
  sfdisk -l "$out"
  part() { # part N -> "start size" in bytes
    sfdisk --json "$out" | python3 -c "import json,sys; p=json.load(sys.stdin)['partitiontable']['partitions'][$1]; print(p['start']*512, p['size']*512)"
  }
  extract() { # extract N FILE
    read -r s n < <(part "$1")
    dd if="$out" of="$2" bs=1M iflag=skip_bytes,count_bytes skip="$s" count="$n" conv=sparse status=none
  }
  if command -v fsck.fat >/dev/null; then extract 0 "$out.p1"; fsck.fat -n "$out.p1"; rm -f "$out.p1"; fi
  if command -v e2fsck >/dev/null; then extract 1 "$out.p2"; e2fsck -fn "$out.p2"; rm -f "$out.p2"; fi
fi
echo "built $out and $out.bmap; write it (mapped blocks only, verified, block 0 last) with: sudo $bw write $out /dev/sdX   (or: sudo bmaptool copy $out /dev/sdX)"
