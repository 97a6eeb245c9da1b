#!/usr/bin/env python3
"""Post-build hook: an SD-card image from a root filesystem folder, built and verified.

The shape a Buildroot ``post-image.sh``, a Yocto task or a pi-gen stage calls::

    python3 examples/python/post_build.py output/target output/images/sdcard.img \\
        --boot output/images/boot --size 2GiB --bmap output/images/sdcard.img.bmap

It lays out an MBR with a FAT32 boot partition (``--boot``, default ``ROOTFS/boot``) and an
ext4 root filling the rest, every partition on an erase-block boundary, builds the image
(sparse, atomically: nothing is left behind on failure or Ctrl-C), then verifies the result.

Exit codes: 0 built and aligned; 1 verify found misalignment or another error finding;
2 bad arguments, a bad spec or unreadable input.
"""

from __future__ import annotations

import argparse
import pathlib
import sys
from typing import Any, Optional, Sequence

import blockwise


def sd_card_spec(
    rootfs: pathlib.Path,
    boot: Optional[pathlib.Path],
    size: str,
    erase_block: str,
    boot_size: str,
) -> dict[str, Any]:
    """The spec, as a dict with the keys of a spec file."""
    partitions: list[dict[str, Any]] = []
    boot_part: dict[str, Any] = {
        "fs": "fat32",
        "size": boot_size,
        "bootable": True,
        "label": "BOOT",
    }
    if boot is not None:
        boot_part["contents"] = str(boot)
    partitions.append(boot_part)
    partitions.append(
        {"fs": "ext4", "size": "fill", "contents": str(rootfs), "label": "rootfs"}
    )
    return {
        "image": {"size": size, "erase-block": erase_block, "table": "mbr"},
        "partition": partitions,
    }


def main(argv: Optional[Sequence[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    ap.add_argument("rootfs", type=pathlib.Path, help="root filesystem folder")
    ap.add_argument("output", type=pathlib.Path, help="image to write")
    ap.add_argument(
        "--boot", type=pathlib.Path, help="boot partition folder (default ROOTFS/boot)"
    )
    ap.add_argument("--size", default="2GiB", help="image size (default 2GiB)")
    ap.add_argument("--boot-size", default="256MiB", help="boot partition size")
    ap.add_argument("--erase-block", default="4MiB", help="flash erase block (default 4MiB)")
    ap.add_argument(
        "--verify-erase-block",
        help="erase block to verify against, e.g. the card's real one (default --erase-block)",
    )
    ap.add_argument("--bmap", type=pathlib.Path, help="also write a bmaptool block map")
    ap.add_argument("-q", "--quiet", action="store_true", help="no progress")
    a = ap.parse_args(argv)

    boot = a.boot
    if boot is None and (a.rootfs / "boot").is_dir():
        boot = a.rootfs / "boot"
    spec = sd_card_spec(
        a.rootfs.resolve(), boot.resolve() if boot else None, a.size, a.erase_block, a.boot_size
    )

    def progress(phase: str, done: int, total: Optional[int]) -> None:
        # Phases: "scan" (entries, no total), "write" and, with --bmap, "hash" (bytes).
        if a.quiet or not sys.stderr.isatty():
            return
        if total is None:
            print(f"\r{phase} {a.output}: {done} entries", end="", file=sys.stderr)
            return
        pct = 100 * done // total if total else 100
        end = "\n" if done >= total else ""
        print(f"\r{phase} {a.output}: {pct:3}%   ", end=end, file=sys.stderr)

    try:
        built = blockwise.build(spec, a.output, a.bmap, progress)
        for w in built["warnings"]:
            print(f"post_build: warning: {w}", file=sys.stderr)
        check = a.verify_erase_block or a.erase_block
        report = blockwise.verify(a.output, check, strict=True)
    except blockwise.SpecError as e:
        print(f"post_build: bad spec ({e.key}): {e}", file=sys.stderr)
        return 2
    except (blockwise.CorruptImageError, blockwise.UnsupportedError, OSError) as e:
        print(f"post_build: {e}", file=sys.stderr)
        return 2
    errors = [f for f in report["findings"] if f["severity"] == "error"]
    for f in errors:
        print(f"post_build: {a.output}: {f['code']}: {f['message']}", file=sys.stderr)
    if errors or not report["aligned"]:
        print(f"post_build: {a.output} is NOT aligned to {check}", file=sys.stderr)
        return 1
    starts = ", ".join(str(p["start_bytes"]) for p in report["partitions"])
    print(f"{a.output}: {built['size_bytes']} bytes, partitions at {starts}: aligned")
    return 0


if __name__ == "__main__":
    sys.exit(main())
