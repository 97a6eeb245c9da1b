"""fs = "f2fs" through the Python package, as FAT and ext4 are: plan gives sections of one
erase block, build from a dict with contents and [[partition.entry]] modes, verify reproduces
the plan (findings too), fsck.f2fs is clean, fsck.f2fs -t lists the tree and dump.f2fs shows
the mode; errors name the key; two builds are byte-identical."""

from __future__ import annotations

import hashlib
import pathlib
import subprocess
from typing import Any

import pytest

import blockwise
from conftest import extract, fsck_partition, need_tool
from test_api import assert_same

MIB = 1 << 20


def f2fs_spec(size: str, erase: str, **part: Any) -> dict[str, Any]:
    return {
        "image": {"size": size, "erase-block": erase, "seed": 11, "timestamp": 1700000000},
        "partition": [{"fs": "f2fs", "size": "fill", **part}],
    }


def test_plan_sections_of_one_erase_block() -> None:
    plan = blockwise.plan(f2fs_spec("2GiB", "8MiB", label="DATA"))
    part = plan["partitions"][0]
    fs = part["filesystem"]
    assert fs is not None and fs["kind"] == "f2fs"
    f2 = fs  # narrowed by the kind, checked below key by key
    assert f2["label"] == "DATA"
    assert f2["segment_bytes"] == 2 * MIB
    assert f2["segments_per_section"] == 4 and f2["section_bytes"] == 8 * MIB
    assert f2["segment0_start_bytes"] % (8 * MIB) == 0
    assert f2["main_start_bytes"] % (8 * MIB) == 0
    assert f2["aligned"] is True and plan["aligned"] is True
    assert plan["findings"] == []
    assert part["type"] == "0x83"


def test_plan_predicts_a_section_smaller_than_the_erase_block() -> None:
    plan = blockwise.plan(f2fs_spec("1GiB", "8MiB", f2fs={"segments-per-section": 1}))
    fs = plan["partitions"][0]["filesystem"]
    assert fs is not None and fs["aligned"] is False
    codes = [f["code"] for f in plan["findings"]]
    assert "f2fs-section-not-aligned" in codes, plan["findings"]


@pytest.fixture
def tree(tmp_path: pathlib.Path) -> pathlib.Path:
    root = tmp_path / "tree"
    (root / "etc" / "ssh").mkdir(parents=True)
    (root / "usr" / "share" / "doc").mkdir(parents=True)
    (root / "etc" / "hostname").write_text("board\n")
    (root / "etc" / "ssh" / "key").write_bytes(b"private\n")
    (root / "usr" / "share" / "doc" / "big.bin").write_bytes(bytes(range(256)) * 12_000)
    (root / "été.txt").write_text("unicode\n")
    return root


def build_one(tmp_path: pathlib.Path, tree: pathlib.Path, name: str) -> tuple[pathlib.Path, Any]:
    need_tool("mkfs.f2fs")
    need_tool("sload.f2fs")
    spec = f2fs_spec(
        "512MiB",
        "4MiB",
        label="ROOT",
        contents=str(tree),
        entry=[{"path": "/etc/ssh/key", "mode": "0600"}],
    )
    out = tmp_path / name
    return out, blockwise.build(spec, out)


def test_build_verify_fsck(tmp_path: pathlib.Path, tree: pathlib.Path) -> None:
    out, built = build_one(tmp_path, tree, "f2fs.img")
    assert built["warnings"] == [], built["warnings"]
    report = blockwise.verify(out, built["erase_block_bytes"])
    assert report["findings"] == built["findings"] == []
    assert report["aligned"] is True
    assert_same(built["partitions"], report["partitions"])
    part = report["partitions"][0]
    fs = part["filesystem"]
    assert fs is not None and fs["kind"] == "f2fs" and fs["label"] == "ROOT"
    fsck_partition(out, dict(part), tmp_path)

    # The tree as fsck.f2fs lists it, and the entry's mode as dump.f2fs shows it.
    piece = extract(out, part["start_bytes"], part["size_bytes"], tmp_path / "p.img")
    fsck = need_tool("fsck.f2fs")
    listed = subprocess.run([fsck, "--dry-run", "-t", str(piece)], capture_output=True, text=True)
    assert listed.returncode == 0, listed.stdout + listed.stderr
    names = {
        line.split("|-- ", 1)[1].split(" <ino = ", 1)[0]
        for line in listed.stdout.splitlines()
        if "|-- " in line
    }
    assert {"etc", "ssh", "key", "hostname", "usr", "share", "doc", "big.bin", "été.txt"} <= names
    ino = next(
        line.split(" <ino = ", 1)[1].split(">", 1)[0]
        for line in listed.stdout.splitlines()
        if "|-- key <ino = " in line
    )
    dump = subprocess.run(
        [need_tool("dump.f2fs"), "-i", ino, str(piece)],
        input="n\n",
        capture_output=True,
        text=True,
        cwd=tmp_path,
    )
    mode = next(
        (line for line in dump.stdout.splitlines() if line.startswith("i_mode")), ""
    )
    # `i_mode   [0x    8180 : 33152]`: a regular file, 0600.
    assert mode.rstrip("]").rsplit(":", 1)[-1].strip() == str(0o100600), dump.stdout
    piece.unlink()


def test_two_builds_are_identical(tmp_path: pathlib.Path, tree: pathlib.Path) -> None:
    a, _ = build_one(tmp_path, tree, "a.img")
    b, _ = build_one(tmp_path, tree, "b.img")

    def digest(p: pathlib.Path) -> str:
        h = hashlib.sha256()
        with open(p, "rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                h.update(block)
        return h.hexdigest()

    assert digest(a) == digest(b)


def test_errors_name_the_key(tmp_path: pathlib.Path, tree: pathlib.Path) -> None:
    for extra, key in (
        ({"f2fs": {"segments-per-section": 0}}, "partition[1].f2fs.segments-per-section"),
        ({"f2fs": {"sections-per-zone": 0}}, "partition[1].f2fs.sections-per-zone"),
        ({"f2fs": {"segments-per-section": "two"}}, "partition[1].f2fs.segments-per-section"),
    ):
        with pytest.raises(blockwise.SpecError) as e:
            blockwise.plan(f2fs_spec("1GiB", "4MiB", **extra))
        assert e.value.key == key, e.value
    # A partition too small for mkfs.f2fs: refused by the plan, naming the partition.
    with pytest.raises(blockwise.SpecError) as e:
        blockwise.plan(
            {"image": {"size": "64MiB", "erase-block": "4MiB"},
             "partition": [{"fs": "f2fs", "size": "16MiB"}]}
        )
    assert e.value.key.startswith("partition[1]"), e.value
    # An entry for a path that is not in contents: nothing is left behind.
    need_tool("mkfs.f2fs")
    spec = f2fs_spec(
        "512MiB", "4MiB", contents=str(tree), entry=[{"path": "/etc/missing", "mode": "0600"}]
    )
    with pytest.raises(blockwise.SpecError) as e:
        blockwise.build(spec, tmp_path / "bad.img")
    assert e.value.key.startswith("partition[1].entry[1]"), e.value
    assert "/etc/missing" in str(e.value)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["tree"]


def test_write_a_spec_dict_streams_f2fs(tmp_path: pathlib.Path, tree: pathlib.Path) -> None:
    """write() of an F2FS spec dict builds it on the way to the target (no image file); the
    target verifies aligned and fsck.f2fs is clean; the build's temp file is gone."""
    need_tool("mkfs.f2fs")
    spec = f2fs_spec("512MiB", "4MiB", label="ROOT", contents=str(tree))
    (tmp_path / "out").mkdir()
    target = tmp_path / "out" / "card.img"
    written = blockwise.write(spec, target, True)
    assert written["verified"] is True
    report = blockwise.verify(target, "4MiB")
    assert report["aligned"] is True and report["findings"] == []
    fsck_partition(target, dict(report["partitions"][0]), tmp_path)
    assert [p.name for p in (tmp_path / "out").iterdir()] == ["card.img"]


def test_a_read_only_directory_names_the_output(tmp_path: pathlib.Path) -> None:
    """The F2FS backend's work file cannot be created next to `out` (a read-only tmpfs): the
    OSError is EROFS and names out.img, never the work file; nothing is created."""
    import errno
    import os

    need_tool("mkfs.f2fs")
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    ro = tmp_path / "ro"
    ro.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "ro,size=1m", "tmpfs", str(ro)]).returncode:
        pytest.skip("cannot mount a tmpfs here")
    try:
        out = ro / "out.img"
        with pytest.raises(OSError) as e:
            blockwise.build(f2fs_spec("512MiB", "4MiB"), out)
        assert e.value.errno == errno.EROFS, e.value
        assert e.value.filename == str(out), e.value
        assert "f2fs" not in str(e.value.filename) and ".blockwise" not in str(e.value), e.value
        assert "F2FS work file" in str(e.value)
        assert os.listdir(ro) == []
    finally:
        subprocess.run(["umount", str(ro)])
