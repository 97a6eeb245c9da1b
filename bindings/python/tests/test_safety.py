"""Issue 25 from Python: build and write never overwrite their inputs (UnsafeTargetError, every
input unchanged), no file is created in /dev, chunks are bounded, a cancelled build with a
.bmap stops, and builds to one output from several threads always leave one complete image."""

from __future__ import annotations

import hashlib
import os
import pathlib
import subprocess
import threading
from typing import Any

import pytest

from conftest import loop, need_root_losetup, need_tool

import blockwise


def sha256(path: pathlib.Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def project(d: pathlib.Path) -> pathlib.Path:
    """A spec file with a contents tree, a raw partition source and a [[raw]] source."""
    (d / "boot").mkdir()
    (d / "boot" / "config.txt").write_text("arm_64bit=1\n")
    (d / "uboot.bin").write_bytes(os.urandom(100_000))
    (d / "env.bin").write_bytes(os.urandom(8192))
    spec = d / "spec.toml"
    spec.write_text(
        '[image]\nsize = "64MiB"\ntimestamp = 1700000000\n'
        '[[partition]]\nfs = "fat32"\nsize = "40MiB"\ncontents = "boot"\n'
        '[[partition]]\nfs = "raw"\nsize = "4MiB"\nsource = "env.bin"\n'
        '[[raw]]\nsource = "uboot.bin"\noffset = 8192\n'
    )
    return spec


def inputs(d: pathlib.Path) -> dict[pathlib.Path, str]:
    files = [d / "spec.toml", d / "boot" / "config.txt", d / "uboot.bin", d / "env.bin"]
    return {p: sha256(p) for p in files}


def leftovers(d: pathlib.Path) -> list[str]:
    return [p.name for p in d.iterdir() if ".tmp-" in p.name or p.name.startswith(".blockwise-")]


def test_build_refuses_outputs_that_are_inputs(tmp_path: pathlib.Path) -> None:
    spec = project(tmp_path)
    hard = tmp_path / "hard.txt"
    os.link(tmp_path / "boot" / "config.txt", hard)
    before = inputs(tmp_path)
    new = tmp_path / "new.img"
    cases: list[tuple[pathlib.Path, pathlib.Path | None]] = [
        (spec, None),
        (new, spec),
        (tmp_path / "uboot.bin", None),
        (tmp_path / "env.bin", None),
        (tmp_path / "boot" / "config.txt", None),
        (hard, None),
        (new, new),
        (new, tmp_path / "." / "new.img"),
    ]
    for out, bmap in cases:
        with pytest.raises(blockwise.UnsafeTargetError) as e:
            blockwise.build(spec, out, bmap)
        assert str(out) in str(e.value) or str(bmap) in str(e.value), e.value
    # A dict spec too: its raw source.
    d: dict[str, Any] = {
        "image": {"size": "16MiB"},
        "partition": [{"fs": "raw", "size": "4MiB", "source": "env.bin"}],
    }
    with pytest.raises(blockwise.UnsafeTargetError):
        blockwise.build(d, tmp_path / "env.bin", base_dir=tmp_path)
    assert inputs(tmp_path) == before
    assert not new.exists()
    assert leftovers(tmp_path) == [] and leftovers(tmp_path / "boot") == []


def test_write_refuses_targets_that_are_inputs(tmp_path: pathlib.Path) -> None:
    spec = project(tmp_path)
    img = tmp_path / "x.img"
    blockwise.build(spec, img, tmp_path / "x.img.bmap")
    gz = tmp_path / "x.img.gz"
    subprocess.run(["sh", "-c", f"gzip -c '{img}' > '{gz}'"], check=True)
    link = tmp_path / "link.gz"
    link.symlink_to(gz)
    hard = tmp_path / "hard.img"
    os.link(img, hard)
    files = [img, gz, tmp_path / "x.img.bmap", *inputs(tmp_path)]
    before = {p: sha256(p) for p in files}
    for src, target in [
        (gz, gz),
        (gz, link),
        (img, hard),
        (img, tmp_path / "." / "x.img"),
        (img, tmp_path / "x.img.bmap"),
        (spec, tmp_path / "uboot.bin"),
        (spec, spec),
    ]:
        with pytest.raises(blockwise.UnsafeTargetError, match="input"):
            blockwise.write(src, target, verify=False)
    if os.geteuid() == 0:
        need_root_losetup()
        with loop(img) as dev:
            with pytest.raises(blockwise.UnsafeTargetError, match="which this write reads"):
                blockwise.write(img, dev, verify=False, yes=True)
    assert {p: sha256(p) for p in files} == before


def test_a_missing_dev_node_is_refused(tmp_path: pathlib.Path) -> None:
    mounts = pathlib.Path("/proc/self/mountinfo").read_text()
    if not any(" /dev " in line and " - devtmpfs " in line for line in mounts.splitlines()):
        pytest.skip("/dev is not devtmpfs here")
    img = tmp_path / "a.img"
    img.write_bytes(os.urandom(1 << 20))
    missing = pathlib.Path("/dev/blockwise-r25-py-sdz9")
    with pytest.raises(blockwise.UnsafeTargetError, match="no such device"):
        blockwise.write(img, missing, partition_ok=True, raw=True)
    assert not missing.exists()


def test_chunk_above_64mib_is_a_spec_error(tmp_path: pathlib.Path) -> None:
    img = tmp_path / "a.img"
    img.write_bytes(os.urandom(1 << 20))
    with pytest.raises(blockwise.SpecError) as e:
        blockwise.write(img, tmp_path / "o.img", chunk="1GiB", raw=True)
    assert e.value.key == "chunk"
    assert not (tmp_path / "o.img").exists()


class Stop(Exception):
    pass


def test_a_cancelled_build_with_a_bmap_stops_and_leaves_nothing(tmp_path: pathlib.Path) -> None:
    """A raising callback stops a build that also hashes a .bmap (the hasher used to run to
    the end of the image first); nothing is left behind."""
    big = tmp_path / "big.bin"
    with open(big, "wb") as f:
        for _ in range(64):
            f.write(os.urandom(1 << 20))
    spec = {
        "image": {"size": "96MiB"},
        "partition": [{"fs": "raw", "size": "64MiB", "source": "big.bin"}],
    }
    out = tmp_path / "o.img"
    for exc in (Stop, KeyboardInterrupt):

        def progress(done: int, total: int) -> None:
            if done > 0:
                raise exc("stop")

        with pytest.raises(exc):
            blockwise.build(spec, out, tmp_path / "o.bmap", progress, base_dir=tmp_path)
        assert not out.exists() and not (tmp_path / "o.bmap").exists()
        assert leftovers(tmp_path) == []


FAT = {
    "image": {"size": "64MiB", "table": "none", "seed": 3, "timestamp": 1700000000},
    "partition": [{"fs": "fat32", "size": "fill", "label": "R25"}],
}
EXT4 = {
    "image": {"size": "64MiB", "table": "none", "seed": 3, "timestamp": 1700000000},
    "partition": [{"fs": "ext4", "size": "fill", "label": "r25"}],
}


def test_threads_building_to_one_output_always_leave_a_complete_image(
    tmp_path: pathlib.Path,
) -> None:
    """4 threads x 20 rounds build FAT32 and ext4 (alternately) to one output: each build has
    its own temp file, the last rename wins, and after every round the output is one of the
    two images byte for byte and passes fsck.fat / e2fsck."""
    fsck_fat = need_tool("fsck.fat")
    e2fsck = need_tool("e2fsck")
    (tmp_path / "c").mkdir()
    (tmp_path / "c" / "hello.txt").write_text("hello\n" * 1000)
    specs = []
    for base in (FAT, EXT4):
        s: dict[str, Any] = {**base, "partition": [{**base["partition"][0], "contents": "c"}]}
        specs.append(s)
    expected = []
    for i, s in enumerate(specs):
        p = tmp_path / f"expected{i}.img"
        blockwise.build(s, p, base_dir=tmp_path)
        expected.append(sha256(p))
    assert expected[0] != expected[1]
    out = tmp_path / "out.img"
    for rnd in range(20):
        errors: list[BaseException] = []

        def run(i: int) -> None:
            try:
                blockwise.build(specs[(i + rnd) % 2], out, base_dir=tmp_path)
            except BaseException as e:  # noqa: BLE001 - collected and re-raised below
                errors.append(e)

        threads = [threading.Thread(target=run, args=(i,)) for i in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert errors == [], errors
        got = sha256(out)
        assert got in expected, f"round {rnd}: the output is neither image"
        cmd = [fsck_fat, "-n", str(out)] if got == expected[0] else [e2fsck, "-fn", str(out)]
        r = subprocess.run(cmd, capture_output=True, text=True)
        assert r.returncode == 0, f"round {rnd}: {r.stdout}{r.stderr}"
        assert leftovers(tmp_path) == [], leftovers(tmp_path)


def test_control_characters_in_names_are_escaped_in_messages(tmp_path: pathlib.Path) -> None:
    (tmp_path / "c").mkdir()
    (tmp_path / "c" / "evil\x1b[2J\nfake: ok").write_text("x")
    spec = {
        "image": {"size": "64MiB", "table": "none"},
        "partition": [{"fs": "fat32", "size": "fill", "contents": "c"}],
    }
    with pytest.raises(blockwise.SpecError) as e:
        blockwise.build(spec, tmp_path / "o.img", base_dir=tmp_path)
    message = str(e.value)
    assert "\x1b" not in message and "\n" not in message, repr(message)
    assert "/evil\\x1b[2J\\x0afake: ok" in message, message
