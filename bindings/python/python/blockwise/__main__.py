"""``python -m blockwise``: the command line's plan, build, verify, write and probe, on the
Python API.

Exit codes as in the CLI: 0 success/aligned, 1 verify found errors, 2 bad usage, bad spec,
unreadable or unrecognised input, a refused target; 3 the target failed mid-write; 130
interrupted. Output closed early (``python -m blockwise plan --json spec | head -1``) ends
quietly.
"""

from __future__ import annotations

import argparse
import errno
import json
import os
import pathlib
import sys
from typing import Any, Callable, Optional, Sequence

import blockwise

EXIT_FINDINGS = 1
EXIT_USAGE = 2
EXIT_DEVICE = 3
EXIT_INTERRUPTED = 130


def _size(n: int) -> str:
    for unit, shift in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if n >= 1 << shift and n % (1 << shift) == 0:
            return f"{n >> shift} {unit}"
    return f"{n} B"


def _human(result: blockwise.Plan | blockwise.Report) -> str:
    lines = [
        f"{result['source']}: {_size(result['size_bytes'])}, "
        f"{result['table']['kind']} table, erase block {_size(result['erase_block_bytes'])}",
        f"{'#':>3} {'start':>12} {'size':>12}  {'type':<10} {'ok':>3}",
    ]
    for p in result["partitions"]:
        lines.append(
            f"{p['index']:>3} {_size(p['start_bytes']):>12} {_size(p['size_bytes']):>12}  "
            f"{p['type']:<10} {'yes' if p['aligned'] else 'NO':>3}"
        )
    for f in result["findings"]:
        lines.append(f"{f['severity']}: {f['message']}")
    lines.append("aligned" if result["aligned"] else "NOT aligned")
    return "\n".join(lines) + "\n"


def _probe_human(r: blockwise.ProbeResult) -> str:
    rec = r["recommendation"]
    lines = [
        f"{r['device']}: {_size(r['size_bytes'])}, {r['transport']}, "
        f"{'removable' if r['removable'] else 'not removable'}"
        f"{', read-only' if r['read_only'] else ''}",
        f"logical block {r['logical_block_bytes']} B, physical block "
        f"{r['physical_block_bytes']} B",
        f"erase block {_size(rec['erase_block_bytes'])} ({rec['erase_block_source']}: "
        f"{rec['erase_block_reason']})",
    ]
    if r["estimate"] is not None:
        e = r["estimate"]
        lines.append(f"estimate: {e['summary']} (confidence {e['confidence_label']})")
    if r["layout"] is not None:
        lines.append(
            "layout: " + ("aligned" if r["layout"]["aligned"] else "NOT aligned")
            + f", {len(r['layout']['partitions'])} partition(s)"
        )
    elif r["layout_note"]:
        lines.append(f"layout: {r['layout_note']}")
    lines.extend(f"note: {n}" for n in r["notes"])
    lines.append("spec [image]:")
    lines.extend(f"  {line}" for line in rec["spec"].splitlines())
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


_NAMES = {"scan": "scanning", "write": "writing", "hash": "hashing", "verify": "verifying"}


def _progress(quiet: bool) -> Optional[Callable[[str, int, Optional[int]], None]]:
    if quiet or not sys.stderr.isatty():
        return None

    def show(phase: str, done: int, total: Optional[int]) -> None:
        name = _NAMES.get(phase, phase)
        if total is None:
            print(f"\r{name} {done}", end="", file=sys.stderr)
            return
        pct = 100 * done // total if total else 100
        end = "" if done < total else "\n"
        print(f"\r{name} {pct:3}%", end=end, file=sys.stderr)

    return show


def _write_summary(r: blockwise.WriteResult) -> str:
    c = r["chunk_mb_per_s"]
    speed = r["verify_mb_per_s"]
    verified = f", verified at {speed:.1f} MB/s" if r["verified"] and speed is not None else ""
    return (
        f"wrote {_size(r['bytes_written'])} of {r['source']} to {r['target']} in "
        f"{r['seconds']:.2f} s: {r['mb_per_s']:.1f} MB/s (chunks {c['min']:.1f}/"
        f"{c['median']:.1f}/{c['max']:.1f} MB/s min/median/max, fsync "
        f"{r['fsync_seconds']:.2f} s){verified}\n"
    )


def _parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(
        prog="python -m blockwise",
        description="Flash-aligned disk images built in userspace.",
    )
    ap.add_argument(
        "--version", action="version", version=f"blockwise {blockwise.__version__} (Python)"
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
    b.add_argument("--format", choices=["raw", "simg", "zst", "xz"], help="output format (default: by the name)")
    b.add_argument("--level", type=int, metavar="N", help="zstd (1-22) or xz (0-9) level")
    b.add_argument("--json", action="store_true", help="print JSON")
    b.add_argument("-q", "--quiet", action="store_true", help="no progress")

    v = sub.add_parser("verify", help="check the alignment of an image or block device")
    v.add_argument("source", type=pathlib.Path)
    v.add_argument("--erase-block", default="4MiB")
    v.add_argument("--strict", action="store_true")
    v.add_argument("--json", action="store_true")
    v.add_argument("--sector-size", type=int)

    w = sub.add_parser("write", help="write an image or a spec to a block device or file")
    w.add_argument(
        "source", type=pathlib.Path, help="image (.img, .img.xz/.gz/.zst/.bz2) or spec file"
    )
    w.add_argument("target", type=pathlib.Path, help="block device or regular file")
    w.add_argument("--bmap", type=pathlib.Path, metavar="FILE")
    w.add_argument("--chunk", default="4MiB", metavar="SIZE")
    w.add_argument("--zero-holes", action="store_true")
    w.add_argument("--discard", action="store_true")
    wv = w.add_mutually_exclusive_group()
    wv.add_argument(
        "--verify", action="store_true", help="read back and compare (default on a terminal)"
    )
    wv.add_argument("--no-verify", action="store_true")
    w.add_argument(
        "--direct", action="store_true", help="fail instead of falling back to buffered writes"
    )
    w.add_argument("--yes", action="store_true", help="needed for a non-removable disk")
    w.add_argument("--partition-ok", action="store_true", help="allow a partition as target")
    w.add_argument(
        "--raw",
        action="store_true",
        help="write a source that is no known disk image (a firmware blob) byte for byte",
    )
    w.add_argument("--json", action="store_true")
    w.add_argument("-q", "--quiet", action="store_true", help="no progress")

    pr = sub.add_parser("probe", help="what the kernel knows about a device (reads only)")
    pr.add_argument("device", type=pathlib.Path, help="block device, e.g. /dev/sdb")
    pr.add_argument(
        "--no-estimate", action="store_true", help="no read-timing erase-block estimate"
    )
    pr.add_argument(
        "--seconds", type=float, default=2.0, help="read time the estimate may spend (0-600)"
    )
    pr.add_argument("--json", action="store_true")
    return ap


def _run(a: argparse.Namespace, ap: argparse.ArgumentParser) -> int:
    result: Any
    text: str
    code = 0
    if a.cmd == "plan":
        flags = any(
            x is not None
            for x in (a.size, a.erase_block, a.sector_size, a.table, a.first_partition, a.seed)
        ) or bool(a.partition)
        if a.spec is not None and flags:
            ap.error("give either a spec file or layout flags, not both")
        if a.spec is None and not flags:
            ap.error("give a spec file, or flags like --size 8GiB --partition fat32:256MiB")
        planned = blockwise.plan(a.spec if a.spec is not None else _flags_spec(a))
        result, text = planned, _human(planned)
    elif a.cmd == "build":
        built = blockwise.build(
            a.spec,
            a.output,
            a.bmap,
            _progress(a.quiet or a.json),
            format=a.format,
            level=a.level,
        )
        result, text = built, _human(built)
    elif a.cmd == "write":
        verify = a.verify or (not a.no_verify and sys.stdin.isatty() and sys.stderr.isatty())
        written = blockwise.write(
            a.source,
            a.target,
            verify,
            _progress(a.quiet or a.json),
            yes=a.yes,
            partition_ok=a.partition_ok,
            bmap=a.bmap,
            chunk=a.chunk,
            zero_holes=a.zero_holes,
            discard=a.discard,
            direct=a.direct,
            raw=a.raw,
        )
        if not a.quiet and not a.json:
            for n in written["notes"]:
                print(f"blockwise: {n}", file=sys.stderr)
        result, text = written, _write_summary(written)
    elif a.cmd == "probe":
        probed = blockwise.probe(
            a.device, estimate=not a.no_estimate, estimate_seconds=a.seconds
        )
        result, text = probed, _probe_human(probed)
    else:
        report = blockwise.verify(
            a.source, a.erase_block, strict=a.strict, sector_size=a.sector_size
        )
        errors = [f for f in report["findings"] if f["severity"] == "error"]
        code = EXIT_FINDINGS if errors else 0
        result, text = report, _human(report)
    sys.stdout.write(json.dumps(result, indent=2) + "\n" if a.json else text)
    sys.stdout.flush()
    return code


def _warning(
    message: Warning | str,
    category: type[Warning],
    filename: str,
    lineno: int,
    file: Any = None,
    line: Optional[str] = None,
) -> None:
    print(f"blockwise: warning: {message}", file=sys.stderr)


# The library's messages name its keyword arguments; on the command line they are flags.
_FLAGS = (
    ("raw=True", "--raw"),
    ("partition_ok=True", "--partition-ok"),
    ("zero_holes=True", "--zero-holes"),
    ("direct=True", "--direct"),
    ("estimate=False", "--no-estimate"),
    ("yes=True", "--yes"),
)


def _flag_words(message: str) -> str:
    """A library message in the command line's words: `yes=True` is `--yes` here."""
    for kw, flag in _FLAGS:
        message = message.replace(kw, flag)
    return message


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Runs the command line; returns the exit code."""
    import warnings

    ap = _parser()
    a = ap.parse_args(argv)
    warnings.showwarning = _warning
    try:
        return _run(a, ap)
    except BrokenPipeError:
        # The reader went away (`| head -1`): nothing more to say. Python would complain
        # about the unflushed stdout at exit: point it at /dev/null.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 0
    except blockwise.Error as e:
        if isinstance(e, blockwise.CancelledError):
            print(f"blockwise {a.cmd}: {e}", file=sys.stderr)
            return EXIT_INTERRUPTED
        print(f"blockwise {a.cmd}: error: {_flag_words(str(e))}", file=sys.stderr)
        return EXIT_USAGE
    except OSError as e:
        if e.errno == errno.EPIPE:
            return 0
        where = f"{e.filename}: " if e.filename is not None else ""
        reason = e.strerror if e.strerror is not None else str(e)
        print(f"blockwise {a.cmd}: error: {where}{reason}", file=sys.stderr)
        # The target failing mid-write is 3, as in the CLI; unreadable input is 2.
        if a.cmd == "write" and e.filename == str(a.target):
            return EXIT_DEVICE
        return EXIT_USAGE
    except KeyboardInterrupt:
        print(f"blockwise {a.cmd}: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED


if __name__ == "__main__":
    sys.exit(main())
