"""Shared fixtures: the repository's examples, the Raspberry Pi spec as a dict, fsck helpers,
loop devices (root) and the Rust CLI binary."""

from __future__ import annotations

import contextlib
import os
import pathlib
import shutil
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[3]
EXAMPLES = ROOT / "examples"


def rpi_dict() -> dict[str, Any]:
    """examples/rpi.toml as a dict (the keys of the TOML, values as Python types)."""
    if sys.version_info >= (3, 11):
        import tomllib
    else:
        # tomllib's text before 3.11 (wheel-check.sh installs it on 3.9).
        tomllib = pytest.importorskip(
            "tomli", reason="reading examples/rpi.toml needs tomllib (3.11+) or tomli"
        )
    with open(EXAMPLES / "rpi.toml", "rb") as f:
        return dict(tomllib.load(f))


def need_tool(name: str) -> str:
    """The tool's path; skips without it, fails in CI (DISKIMG_REQUIRE_ORACLES set)."""
    path = shutil.which(name) or shutil.which(name, path="/usr/sbin:/sbin")
    if path is None:
        if os.environ.get("DISKIMG_REQUIRE_ORACLES"):
            pytest.fail(f"{name} is required (DISKIMG_REQUIRE_ORACLES is set)")
        pytest.skip(f"{name} is not installed")
    return path


def extract(image: pathlib.Path, start: int, size: int, out: pathlib.Path) -> pathlib.Path:
    """Copies bytes [start, start+size) of `image` into `out`, keeping holes (SEEK_DATA)."""
    with open(image, "rb") as src, open(out, "wb") as dst:
        dst.truncate(size)
        pos = start
        end = start + size
        while pos < end:
            try:
                data = os.lseek(src.fileno(), pos, os.SEEK_DATA)
            except OSError:
                break
            if data >= end:
                break
            hole = min(os.lseek(src.fileno(), data, os.SEEK_HOLE), end)
            src.seek(data)
            dst.seek(data - start)
            left = hole - data
            while left > 0:
                chunk = src.read(min(left, 1 << 20))
                if not chunk:
                    break
                dst.write(chunk)
                left -= len(chunk)
            pos = hole
    return out


def fsck_partition(image: pathlib.Path, part: dict[str, Any], tmp: pathlib.Path) -> str:
    """Runs fsck.fat -n, fsck.exfat -n, fsck.f2fs --dry-run -f or e2fsck -fn on one partition
    of `image`; returns the output."""
    fs = part["filesystem"]["kind"]
    piece = extract(image, part["start_bytes"], part["size_bytes"], tmp / f"p{part['index']}.img")
    if fs.startswith("fat"):
        cmd = [need_tool("fsck.fat"), "-n", str(piece)]
    elif fs == "exfat":
        cmd = [need_tool("fsck.exfat"), "-n", str(piece)]
    elif fs == "f2fs":
        cmd = [need_tool("fsck.f2fs"), "--dry-run", "-f", str(piece)]
    else:
        cmd = [need_tool("e2fsck"), "-fn", str(piece)]
    r = subprocess.run(cmd, capture_output=True, text=True)
    out = r.stdout + r.stderr
    assert r.returncode == 0, f"{cmd}: rc {r.returncode}\n{out}"
    # fsck.f2fs always prints "Force to fix corruption" and "other corrupted bugs [Ok..]":
    # its verdicts are the [Fail] and [FIX] marks.
    bads = ("[Fail]", "[FIX]") if fs == "f2fs" else (
        "differ", "nvalid", "corrupt", "wrong", "Dirty bit", "MODIFIED", "ERROR")
    for bad in bads:
        assert bad not in out, f"{cmd}: {bad}\n{out}"
    piece.unlink()
    return out


def need_root_losetup() -> str:
    if os.geteuid() != 0:
        pytest.skip("loop devices need root (losetup); run test.sh as root to include them")
    path = shutil.which("losetup") or shutil.which("losetup", path="/usr/sbin:/sbin")
    if path is None:
        pytest.skip("losetup is not installed")
    return path


@contextlib.contextmanager
def loop(backing: pathlib.Path, *flags: str) -> Iterator[str]:
    """Attaches `backing` to a free loop device (`losetup -f --show`), detaches after."""
    losetup = need_root_losetup()
    r = subprocess.run([losetup, "-f", "--show", *flags, str(backing)], capture_output=True, text=True)
    if r.returncode != 0:
        pytest.skip(f"losetup failed: {r.stderr.strip()}")
    dev = r.stdout.strip()
    try:
        yield dev
    finally:
        subprocess.run([losetup, "-d", dev], check=False)


def cli_binary() -> str:
    """The Rust CLI `blockwise` (test.sh builds it and sets BLOCKWISE_CLI; else the workspace's
    target/debug/blockwise); skips without it, fails in CI (DISKIMG_REQUIRE_ORACLES set)."""
    path = os.environ.get("BLOCKWISE_CLI") or str(ROOT / "target" / "debug" / "blockwise")
    if not os.access(path, os.X_OK):
        if os.environ.get("DISKIMG_REQUIRE_ORACLES"):
            pytest.fail(f"the CLI binary {path} is required (DISKIMG_REQUIRE_ORACLES is set)")
        pytest.skip(f"the CLI binary {path} is not built (cargo build --bin blockwise)")
    return path


@pytest.fixture
def rpi() -> dict[str, Any]:
    return rpi_dict()
