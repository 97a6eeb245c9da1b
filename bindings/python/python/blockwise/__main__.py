"""``python -m blockwise``: the command line's plan, build and verify, on the Python API.

Exit codes as in the CLI: 0 success/aligned, 1 verify found errors, 2 bad usage, bad spec,
unreadable or unrecognised input.
"""

from __future__ import annotations

import argparse
import json
import pathlib
import sys
from typing import Any, Optional, Sequence

import blockwise

EXIT_FINDINGS = 1
EXIT_USAGE = 2


def _size(n: int) -> str:
    for unit, shift in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if n >= 1 << shift and n % (1 << shift) == 0:
            return f"{n >> shift} {unit}"
    return f"{n} B"


def _human(result: dict[str, Any]) -> str:
    lines = [
        f"{result['source']}: {_size(result['size_bytes'])}, "
        f"{result['table']['kind']} table, erase block {_size(result['erase_block_bytes'])}",
        f"{'#':>3} {'start':>12} {'size':>12}  {'type':<10} {'ok':>3}",
    ]
    for p in result["partitions"]:
        lines.append(
            f"{p['index']:>3} {_size(p['start_bytes']):>12} {_size(p['size_bytes']):>12}  "
            f"{str(p.get('type', '')):<10} {'yes' if p.get('aligned') else 'NO':>3}"
        )
    for f in result.get("findings", []):
        lines.append(f"{f['severity']}: {f['message']}")
    lines.append("aligned" if result["aligned"] else "NOT aligned")
    return "\n".join(lines) + "\n"


def _flags_spec(a: argparse.Namespace) -> dict[str, Any]:
    image: dict[str, Any] = {}
    for key in ("size", "erase_block", "sector_size", "table", "first_partition", "seed"):
        value = getattr(a, key)
        if value is not None:
            if key == "sector_size":
                value = int(value)
            image[key.replace("_", "-")] = value
    partitions = []
    for i, p in enumerate(a.partition, 1):
        fs, sep, size = p.partition(":")
        if not sep:
            raise blockwise.SpecError(
                f"--partition #{i} ({p!r}): expected FS:SIZE, e.g. fat32:256MiB or ext4:fill"
            )
        partitions.append({"fs": fs, "size": size})
    return {"image": image, "partition": partitions}


def _progress(quiet: bool) -> Optional[Any]:
    if quiet or not sys.stderr.isatty():
        return None

    def show(done: int, total: int) -> None:
        pct = 100 * done // total if total else 100
        print(f"\rwriting {pct:3}%", end="" if done < total else "\n", file=sys.stderr)

    return show


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Runs the command line; returns the exit code."""
    ap = argparse.ArgumentParser(
        prog="python -m blockwise",
        description="Flash-aligned disk images built in userspace.",
    )
    sub = ap.add_subparsers(dest="cmd", required=True)

    p = sub.add_parser("plan", help="print the aligned layout a spec (or flags) would produce")
    p.add_argument("spec", nargs="?", type=pathlib.Path, help="spec file (TOML)")
    p.add_argument("--size")
    p.add_argument("--erase-block")
    p.add_argument("--sector-size")
    p.add_argument("--table", choices=["mbr", "gpt", "none"])
    p.add_argument("--first-partition")
    p.add_argument("--seed", type=int)
    p.add_argument("--partition", action="append", default=[], metavar="FS:SIZE")
    p.add_argument("--json", action="store_true", help="print JSON")

    b = sub.add_parser("build", help="build an image file from a spec")
    b.add_argument("spec", type=pathlib.Path, help="spec file (TOML)")
    b.add_argument("-o", "--output", required=True, type=pathlib.Path)
    b.add_argument("--bmap", type=pathlib.Path, metavar="FILE")
    b.add_argument("--json", action="store_true", help="print JSON")
    b.add_argument("-q", "--quiet", action="store_true", help="no progress")

    v = sub.add_parser("verify", help="check the alignment of an image or block device")
    v.add_argument("source", type=pathlib.Path)
    v.add_argument("--erase-block", default="4MiB")
    v.add_argument("--strict", action="store_true")
    v.add_argument("--json", action="store_true")
    v.add_argument("--sector-size", type=int)

    a = ap.parse_args(argv)
    try:
        if a.cmd == "plan":
            flags = any(
                x is not None
                for x in (a.size, a.erase_block, a.sector_size, a.table, a.first_partition, a.seed)
            ) or bool(a.partition)
            if a.spec is not None and flags:
                ap.error("give either a spec file or layout flags, not both")
            if a.spec is None and not flags:
                ap.error("give a spec file, or flags like --size 8GiB --partition fat32:256MiB")
            result = blockwise.plan(a.spec if a.spec is not None else _flags_spec(a))
            code = 0
        elif a.cmd == "build":
            result = blockwise.build(a.spec, a.output, a.bmap, _progress(a.quiet or a.json))
            for w in result.get("warnings", []):
                print(f"blockwise: warning: {w}", file=sys.stderr)
            code = 0
        else:
            result = blockwise.verify(
                a.source, a.erase_block, strict=a.strict, sector_size=a.sector_size
            )
            errors = [f for f in result["findings"] if f["severity"] == "error"]
            code = EXIT_FINDINGS if errors else 0
    except (blockwise.SpecError, blockwise.CorruptImageError, blockwise.UnsupportedError) as e:
        print(f"blockwise {a.cmd}: error: {e}", file=sys.stderr)
        return EXIT_USAGE
    except OSError as e:
        print(f"blockwise {a.cmd}: error: {e}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print(f"blockwise {a.cmd}: interrupted", file=sys.stderr)
        return 130
    if a.json:
        print(json.dumps(result, indent=2))
    else:
        print(_human(result), end="")
    return code


if __name__ == "__main__":
    sys.exit(main())
