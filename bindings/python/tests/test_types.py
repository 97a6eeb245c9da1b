"""The TypedDicts of blockwise._types describe what the functions return: every required key
is there, no key is unknown, every value has the declared type (checked recursively on
plans, builds, reports and writes of FAT, ext4, exFAT, F2FS, swap, slots, GPT attributes and
containers); and mypy --strict rejects a misspelt key."""

from __future__ import annotations

import pathlib
import subprocess
import sys
import textwrap
from typing import Any, Literal, Union, get_args, get_origin, get_type_hints

import pytest

import blockwise
from conftest import EXAMPLES, need_tool


def conforms(value: Any, tp: Any, path: str = "result") -> None:
    """Asserts that `value` is of type `tp` (TypedDict, list, Union, Optional, Literal,
    int, float, str, bool)."""
    if hasattr(tp, "__required_keys__"):
        assert isinstance(value, dict), f"{path}: {type(value).__name__}, not a dict"
        keys = set(value)
        missing = set(tp.__required_keys__) - keys
        unknown = keys - set(tp.__required_keys__) - set(tp.__optional_keys__)
        assert not missing, f"{path} ({tp.__name__}) lacks {sorted(missing)}"
        assert not unknown, f"{path} ({tp.__name__}) has undeclared {sorted(unknown)}"
        hints = get_type_hints(tp)
        for k, v in value.items():
            conforms(v, hints[k], f"{path}[{k!r}]")
        return
    origin = get_origin(tp)
    if origin is Union:
        errors = []
        for arg in get_args(tp):
            try:
                conforms(value, arg, path)
                return
            except AssertionError as e:
                errors.append(str(e))
        raise AssertionError(f"{path}: matches none of {tp}: {errors}")
    if origin is list:
        assert isinstance(value, list), f"{path}: {type(value).__name__}, not a list"
        (item,) = get_args(tp)
        for i, v in enumerate(value):
            conforms(v, item, f"{path}[{i}]")
        return
    if origin is Literal:
        assert value in get_args(tp), f"{path}: {value!r} not in {get_args(tp)}"
        return
    if tp is type(None):
        assert value is None, f"{path}: {value!r}, not None"
    elif tp is float:
        assert isinstance(value, (int, float)) and not isinstance(value, bool), f"{path}: {value!r}"
    elif tp is int:
        assert isinstance(value, int) and not isinstance(value, bool), f"{path}: {value!r}"
    else:
        assert isinstance(value, tp), f"{path}: {value!r} is not {tp}"


def test_the_checker_fails() -> None:
    good: dict[str, Any] = {"kind": "gpt", "disk_id": None}
    conforms(good, blockwise.Table)
    for bad in ({"kind": "gpt"}, {**good, "extra": 1}, {**good, "kind": "apm"},
                {**good, "disk_id": 3}):
        with pytest.raises(AssertionError):
            conforms(bad, blockwise.Table)


def test_plans_and_reports(tmp_path: pathlib.Path) -> None:
    need_tool("mkfs.f2fs")
    (tmp_path / "c").mkdir()
    (tmp_path / "c" / "f").write_text("x\n")
    spec = {
        "image": {"size": "3GiB", "table": "gpt", "seed": 5, "timestamp": 1700000000},
        "partition": [
            {"fs": "fat32", "size": "128MiB", "label": "BOOT", "contents": "c",
             "attributes": ["read-only", "no-auto"]},
            {"fs": "ext4", "size": "256MiB", "name": "system", "slots": ["a", "b"]},
            {"fs": "exfat", "size": "256MiB", "label": "CARD"},
            {"fs": "swap", "size": "64MiB"},
            {"fs": "f2fs", "size": "fill", "label": "DATA", "contents": "c"},
        ],
    }
    plan = blockwise.plan(spec, base_dir=tmp_path)
    conforms(plan, blockwise.Plan)
    kinds = [p["filesystem"]["kind"] for p in plan["partitions"] if p["filesystem"]]
    assert kinds == ["fat32", "ext4", "ext4", "exfat", "swap", "f2fs"], kinds
    assert plan["partitions"][0].get("attributes") == ["read-only", "no-auto"]
    assert [g["name"] for g in plan.get("slots", [])] == ["system"]

    built = blockwise.build(spec, tmp_path / "all.img", tmp_path / "all.bmap", base_dir=tmp_path)
    conforms(built, blockwise.BuildResult)
    assert built["format"] == "raw" and "container" not in built

    report = blockwise.verify(tmp_path / "all.img")
    conforms(report, blockwise.Report)
    assert [g["name"] for g in report.get("slots", [])] == ["system"]

    written = blockwise.write(tmp_path / "all.img", tmp_path / "copy.img", True)
    conforms(written, blockwise.WriteResult)


def test_containers_and_mbr(tmp_path: pathlib.Path) -> None:
    spec = {
        "image": {"size": "64MiB", "table": "mbr"},
        "partition": [{"fs": "fat16", "size": "16MiB"}, {"fs": "ext4", "size": "fill"}],
    }
    for name in ("a.simg", "a.img.zst"):
        built = blockwise.build(spec, tmp_path / name)
        conforms(built, blockwise.BuildResult)
        assert "container" in built
        report = blockwise.verify(tmp_path / name)
        conforms(report, blockwise.Report)
        assert report["container"]["kind"] == {"a.simg": "android-sparse", "a.img.zst": "zstd"}[name]
    conforms(blockwise.plan(spec), blockwise.Plan)
    bare = blockwise.build({"image": {"size": "64MiB", "table": "none"},
                            "partition": [{"fs": "fat32", "size": "fill"}]}, tmp_path / "b.img")
    conforms(blockwise.verify(tmp_path / "b.img", bare["erase_block_bytes"]), blockwise.Report)


def test_boot_code_and_syslinux(tmp_path: pathlib.Path) -> None:
    need_tool("syslinux")
    (tmp_path / "code.bin").write_bytes(b"\xeb\x63" + b"\x90" * 420)
    (tmp_path / "boot").mkdir()
    (tmp_path / "boot" / "syslinux.cfg").write_text("DEFAULT x\n")
    spec = {
        "image": {"table": "mbr", "boot-code": "code.bin", "timestamp": 1700000000},
        "partition": [{"fs": "fat", "size": "16MiB", "contents": "boot",
                       "fat": {"bootloader": "syslinux"}}],
    }
    plan = blockwise.plan(spec, base_dir=tmp_path)
    conforms(plan, blockwise.Plan)
    blockwise.build(spec, tmp_path / "s.img", base_dir=tmp_path)
    report = blockwise.verify(tmp_path / "s.img")
    conforms(report, blockwise.Report)
    assert report["table"].get("boot_code") == plan["table"].get("boot_code")
    assert report["table"]["boot_code"]["bytes"] == 422
    fs = report["partitions"][0]["filesystem"]
    assert fs is not None and fs["kind"] == "fat16" and fs.get("bootloader") == "syslinux"


MYPY_OK = textwrap.dedent(
    """
    import blockwise

    p = blockwise.plan({"image": {"size": "1GiB"}})
    for part in p["partitions"]:
        print(part["start_bytes"], part.get("slot"))
    r = blockwise.verify("x.img")
    print(r["findings"][0]["code"])
    """
)


@pytest.mark.parametrize(
    ("line", "key"),
    [
        ('print(p["partitoins"])', "partitoins"),
        ('print(p["partitions"][0]["start"])', "start"),
        ('print(r["findings"][0]["severty"])', "severty"),
    ],
)
def test_mypy_rejects_a_misspelt_key(tmp_path: pathlib.Path, line: str, key: str) -> None:
    pytest.importorskip("mypy")
    good = tmp_path / "good.py"
    good.write_text(MYPY_OK)
    bad = tmp_path / "bad.py"
    bad.write_text(MYPY_OK + line + "\n")
    cache = ["--cache-dir", str(pathlib.Path(__file__).parent.parent / ".mypy_cache")]
    ok = subprocess.run([sys.executable, "-m", "mypy", "--strict", *cache, str(good)],
                        capture_output=True, text=True)
    assert ok.returncode == 0, ok.stdout + ok.stderr
    r = subprocess.run([sys.executable, "-m", "mypy", "--strict", *cache, str(bad)],
                       capture_output=True, text=True)
    assert r.returncode == 1, r.stdout + r.stderr
    assert f'"{key}"' in r.stdout and "TypedDict" in r.stdout, r.stdout


def test_examples_type_check() -> None:
    pytest.importorskip("mypy")
    r = subprocess.run([sys.executable, "-m", "mypy", "--strict", str(EXAMPLES / "python")],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr


def test_probe(tmp_path: pathlib.Path) -> None:
    """probe of a loop device holding an image (root): a ProbeResult whose layout is a
    Report; with and without the estimate."""
    from conftest import loop, need_root_losetup

    need_root_losetup()
    img = tmp_path / "p.img"
    blockwise.build({"image": {"size": "64MiB", "table": "gpt"},
                     "partition": [{"fs": "fat32", "size": "fill"}]}, img)
    with loop(img) as dev:
        probed = blockwise.probe(dev, estimate=False)
        conforms(probed, blockwise.ProbeResult)
        assert probed["layout"] is not None and probed["estimate"] is None
        timed = blockwise.probe(dev, estimate_seconds=0.2)
        conforms(timed, blockwise.ProbeResult)
        assert (timed["estimate"] is None) != (timed["estimate_skipped"] is None), timed
