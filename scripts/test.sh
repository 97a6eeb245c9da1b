#!/usr/bin/env bash
# Runs every test of the workspace. Installs the oracle tools the tests compare against
# (sfdisk, sgdisk, fsck.fat, mtools, e2fsprogs, losetup, blkid, bmaptool, f2fs-tools,
# btrfs-progs, ntfs-3g, genisoimage, cryptsetup, …) when they are
# missing and we are root. In CI (CI set) a missing oracle is a failure, not a skip.
set -euo pipefail
cd "$(dirname "$0")/.."

need=()
for pair in sfdisk:fdisk sgdisk:gdisk fsck.fat:dosfstools mcopy:mtools e2fsck:e2fsprogs \
            losetup:mount blkid:util-linux bmaptool:bmap-tools xxd:xxd xz:xz-utils bzip2:bzip2 \
            mkfs.xfs:xfsprogs zstd:zstd dmsetup:dmsetup mkfifo:coreutils python3:python3 \
            setfattr:attr setfacl:acl setcap:libcap2-bin /usr/bin/time:time \
            fsck.exfat:exfatprogs mount.exfat-fuse:exfat-fuse \
            simg2img:android-sdk-libsparse-utils simg_dump:android-sdk-libsparse-utils \
            cmp:diffutils prlimit:util-linux \
            mkfs.f2fs:f2fs-tools mkfs.btrfs:btrfs-progs mkfs.ntfs:ntfs-3g genisoimage:genisoimage \
            cryptsetup:cryptsetup-bin mkswap:util-linux \
            unsquashfs:squashfs-tools mkfs.erofs:erofs-utils veritysetup:cryptsetup-bin \
            genimage:genimage genext2fs:genext2fs clang:clang \
            lz4:lz4 zip:zip qemu-img:qemu-utils img2simg:android-sdk-libsparse-utils \
            syslinux:syslinux; do

  command -v "${pair%%:*}" >/dev/null 2>&1 || need+=("${pair#*:}")
done
# syslinux's MBR boot code (image.boot-code in tests/board.rs and tests/import.rs).
[ -e /usr/lib/syslinux/mbr/mbr.bin ] || need+=(syslinux-common)
if [ "${#need[@]}" -gt 0 ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    echo "installing oracle tools: ${need[*]}" >&2
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null
  else
    echo "missing oracle tools (tests that need them will be skipped): ${need[*]}" >&2
  fi
fi

if [ -n "${CI:-}" ]; then
  export DISKIMG_REQUIRE_ORACLES=1
fi
# One test graph: every test of every default member and of the Python and page crates'
# host side, the slow ones too (--include-ignored: 200,000 empty files into ext4 and FAT32,
# the byte-for-byte exFAT up-case table). The CLI it builds (target/debug/blockwise, for the
# root package's integration tests) is the one the Python and page tests compare with.
cargo test --workspace "$@" -- --include-ignored
target_dir="$(cargo metadata --format-version 1 --no-deps |
  python3 -c 'import json, sys; print(json.load(sys.stdin)["target_directory"])')"
export BLOCKWISE_CLI="$target_dir/debug/blockwise" BLOCKWISE_BIN="$target_dir/debug/blockwise"
# The Python package: a venv in bindings/python/.venv, maturin, pytest, mypy, stubtest.
bindings/python/test.sh
# The browser tool: release wasm (the wasm32 / Rust 1.85 proof of the pure crates),
# wasm-bindgen, node tests and the Chromium end-to-end test.
wasm/test.sh
# benches/compare.sh parses its flags (its real smoke test, `benches/compare.sh --quick`, takes
# about a minute and needs root, so it is run by hand; see docs/performance.md "Against the peers").
python3 benches/compare.py --help >/dev/null
# The library example (built by cargo test above): a front end through blockwise::host and
# verify only (what Python and the browser build do). Exit 0 means built, read back and
# aligned as planned.
"$target_dir/debug/examples/library" examples/rpi.toml "$target_dir/library-example.img"
rm -f "$target_dir/library-example.img"
