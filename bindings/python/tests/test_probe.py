"""probe: the dict is what the CLI's `probe --json` prints, on 512- and 4096-byte loop
devices (root; skipped otherwise), with and without the estimate; the GIL is released while it
runs; a path that is not a block device and a bad `estimate_seconds` raise the documented
errors, with the CLI's wording."""

from __future__ import annotations

import errno
import json
import math
import pathlib
import subprocess
import threading
import time
from typing import Any

import pytest

from conftest import cli_binary, loop, need_root_losetup

import blockwise


def cli_probe(dev: str | pathlib.Path, *flags: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [cli_binary(), "probe", str(dev), "--json", *flags], capture_output=True, text=True
    )


def cli_json(dev: str, *flags: str) -> Any:
    r = cli_probe(dev, *flags)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def disk_image(tmp_path: pathlib.Path, sector: int) -> pathlib.Path:
    """A 64 MiB GPT image with a FAT partition, LBAs in `sector`-byte units."""
    spec = {
        "image": {
            "size": "64MiB",
            "table": "gpt",
            "sector-size": sector,
            "erase-block": "4MiB",
            "seed": 7,
            "timestamp": 1700000000,
        },
        "partition": [{"fs": "fat", "size": "fill", "label": "PROBE"}],
    }
    out = tmp_path / f"disk{sector}.img"
    blockwise.build(spec, out)
    return out


@pytest.mark.parametrize("sector", [512, 4096])
def test_probe_is_the_cli_json(tmp_path: pathlib.Path, sector: int) -> None:
    need_root_losetup()
    cli_binary()
    with loop(disk_image(tmp_path, sector), "-b", str(sector)) as dev:
        got = blockwise.probe(dev, estimate=False)
        assert got == cli_json(dev, "--no-estimate")
        assert got["device"] == dev and got["transport"] == "loop"
        assert got["logical_block_bytes"] == sector
        assert got["estimate"] is None and got["estimate_skipped"] == "--no-estimate"
        assert got["layout_note"] is None
        assert got["layout"]["sector_bytes"] == sector
        assert [p["content"][:3] for p in got["layout"]["partitions"]] == ["fat"]
        assert got["layout"]["aligned"] is True
        assert got["recommendation"]["sector_bytes"] == sector
        assert f"sector-size = {sector}" in got["recommendation"]["spec"]


def test_probe_with_the_estimate(tmp_path: pathlib.Path) -> None:
    """The estimate's timings differ from run to run: everything that does not depend on
    them is the CLI's, and the estimate has the CLI's keys."""
    need_root_losetup()
    cli_binary()
    with loop(disk_image(tmp_path, 512)) as dev:
        got = blockwise.probe(dev, estimate_seconds=0.2)
        want = cli_json(dev, "--estimate-seconds", "0.2")
        assert got.keys() == want.keys()
        timed = {"estimate", "recommendation", "layout"}
        assert {k: v for k, v in got.items() if k not in timed} == {
            k: v for k, v in want.items() if k not in timed
        }
        assert got["estimate_skipped"] is None
        assert got["estimate"].keys() == want["estimate"].keys()
        assert [s["size_bytes"] for s in got["estimate"]["sizes"]] == [
            s["size_bytes"] for s in want["estimate"]["sizes"]
        ]


def test_probe_releases_the_gil(tmp_path: pathlib.Path) -> None:
    """While one thread probes (thousands of timed reads, then the layout), another keeps
    running: held, the GIL would stall it for the whole probe."""
    need_root_losetup()
    with loop(disk_image(tmp_path, 512)) as dev:
        result: list[dict[str, Any]] = []
        t = threading.Thread(target=lambda: result.append(blockwise.probe(dev)))
        start = time.monotonic()
        t.start()
        last, longest = start, 0.0
        while t.is_alive():
            now = time.monotonic()
            longest = max(longest, now - last)
            last = now
        t.join()
        total = last - start
        assert result and result[0]["estimate"] is not None
        assert total > 0.05, f"the probe took only {total:.3f} s"
        assert longest < total / 2, f"the main thread stalled {longest:.3f} s of {total:.3f} s"


def test_not_a_block_device(tmp_path: pathlib.Path) -> None:
    image = tmp_path / "disk.img"
    image.write_bytes(b"not a disk")
    for path, what in [
        (image, "a regular file"),
        (tmp_path, "a directory"),
        (pathlib.Path("/dev/null"), "a character device"),
    ]:
        with pytest.raises(OSError) as e:
            blockwise.probe(path)
        assert e.value.errno == errno.ENOTBLK, e.value
        assert e.value.filename == str(path)
        # Python's OSError form: the reason, then the path as given.
        assert e.value.strerror.startswith(f"is not a block device ({what})"), e.value
        assert str(e.value) == f"[Errno 15] {e.value.strerror}: {str(path)!r}"
        assert "blockwise verify" in str(e.value)


def test_a_missing_path(tmp_path: pathlib.Path) -> None:
    missing = tmp_path / "missing"
    with pytest.raises(FileNotFoundError) as e:
        blockwise.probe(missing, estimate=False)
    assert e.value.errno == errno.ENOENT and e.value.filename == str(missing)


def test_errors_have_the_cli_wording(tmp_path: pathlib.Path) -> None:
    cli_binary()
    image = tmp_path / "disk.img"
    image.write_bytes(b"not a disk")
    for path in (image, tmp_path / "missing"):
        with pytest.raises(OSError) as e:
            blockwise.probe(path)
        r = cli_probe(path)
        assert r.returncode == 2 and r.stdout == ""
        assert e.value.strerror.lower() in r.stderr.lower(), (e.value.strerror, r.stderr)


@pytest.mark.parametrize("seconds", [-1, -0.5, 600.5, math.inf, math.nan])
def test_bad_estimate_seconds(tmp_path: pathlib.Path, seconds: float) -> None:
    with pytest.raises(blockwise.SpecError) as e:
        blockwise.probe(tmp_path, estimate_seconds=seconds)
    assert isinstance(e.value, ValueError)
    assert e.value.key == "estimate_seconds"
    assert str(e.value).startswith("estimate_seconds ")
    assert "between 0 and 600" in str(e.value)


def test_arguments_are_keywords() -> None:
    with pytest.raises(TypeError):
        blockwise.probe("/dev/null", False)  # type: ignore[misc]
