"""fs = "exfat" through the Python package: the SD Association layout in plan, build from a
dict with contents, verify reproduces the plan, fsck.exfat is clean, errors name the key."""

from __future__ import annotations

import pathlib

import pytest

import blockwise
from conftest import fsck_partition
from test_api import assert_same

MIB = 1 << 20


def test_sd_card_plan() -> None:
    plan = blockwise.plan(
        {
            "image": {"size": 64_000_000_000, "erase-block": "4MiB"},
            "partition": [{"fs": "exfat", "size": "fill"}],
        }
    )
    part = plan["partitions"][0]
    fs = part["filesystem"]
    assert part["start_bytes"] == 16 * MIB
    assert part["type"] == "0x07"
    assert fs["kind"] == "exfat"
    assert fs["cluster_bytes"] == 128 << 10
    assert fs["boundary_bytes"] == 16 * MIB
    assert (fs["fat_start_bytes"], fs["heap_start_bytes"]) == (24 * MIB, 32 * MIB)
    assert plan["findings"] == []
    assert any("factory" in n for n in fs["notes"])


def test_build_verify_fsck(tmp_path: pathlib.Path) -> None:
    tree = tmp_path / "tree"
    (tree / "DCIM").mkdir(parents=True)
    (tree / "DCIM" / "IMG_0001.JPG").write_bytes(b"\xff\xd8" + bytes(50_000))
    (tree / "Vidéos été.txt").write_text("unicode\n")
    spec = {
        "image": {"size": "512MiB", "seed": 3, "timestamp": 1700000000},
        "partition": [
            {
                "fs": "exfat",
                "size": "fill",
                "label": "CAMERA",
                "contents": "tree",
                "exfat": {"cluster": "32KiB"},
            }
        ],
    }
    out = tmp_path / "card.img"
    built = blockwise.build(spec, out, base_dir=tmp_path)
    report = blockwise.verify(out, built["erase_block_bytes"])
    assert report["findings"] == []
    assert report["aligned"] is True
    assert_same(built["partitions"], report["partitions"])
    part = report["partitions"][0]
    assert part["filesystem"]["label"] == "CAMERA"
    assert part["filesystem"]["cluster_bytes"] == 32 << 10
    fsck_partition(out, part, tmp_path)


def test_errors_name_the_key() -> None:
    for extra, key in (
        ({"exfat": {"cluster": 3000}}, "partition[1].exfat.cluster"),
        ({"exfat": {"boundary": "1MiB"}}, "partition[1].exfat.boundary"),
        ({"label": "twelve chars"}, "partition[1].label"),
    ):
        spec = {
            "image": {"size": "1GiB"},
            "partition": [{"fs": "exfat", "size": "fill", **extra}],
        }
        with pytest.raises(blockwise.SpecError) as e:
            blockwise.plan(spec)
        assert e.value.key == key, e.value
