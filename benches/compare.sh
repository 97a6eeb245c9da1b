#!/usr/bin/env bash
# blockwise against its peers in one go: FAT32 vs mkfs.fat + mcopy, ext4 vs mke2fs -d (and
# blockwise's backend = "mke2fs"), tar -cf as the floor, a Raspberry Pi OS-style image vs
# genimage and the pi-gen way, verify vs sfdisk + fsck.fat + dumpe2fs, write vs dd and
# bmaptool, and (encode) build -o .simg/.img.zst/.img.xz vs build -o .img + img2simg/zstd/xz.
# Medians of --runs runs with min/max and peak RSS (/usr/bin/time -v) for every
# row; writes benches/results.md and docs/performance.md's table (between the compare markers).
#
#   benches/compare.sh [--runs N] [--runs-slow N] [--only T1,T2,T3,T4,rpi,verify,write,encode]
#                      [--quick] [--workdir DIR] [--keep] [--fresh] [--debug]
#
# Run as root (apt-get for missing peers, loop devices for verify's peers and for write).
# --quick: small trees, one run, results in the work dir only: the smoke test.
# The driver is benches/compare.py (Python 3, standard library only); see its docstring.
set -euo pipefail
exec python3 "$(dirname "$0")/compare.py" "$@"
