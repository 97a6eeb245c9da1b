"""plan, build and verify: the Raspberry Pi example from a dict, verify equals plan, the
exception classes, a 32 GiB sparse image, progress and cancelling, builds in threads."""

from __future__ import annotations

import errno
import hashlib
import os
import pathlib
import threading
from typing import Any

import pytest

import blockwise
from conftest import EXAMPLES, fsck_partition

SMALL = {
    "image": {"size": "64MiB", "seed": 7, "timestamp": 1700000000},
    "partition": [{"fs": "fat32", "size": "fill", "label": "SMALL"}],
}


def assert_same(plan: Any, report: Any, path: str = "") -> None:
    """Every key the report and the plan share has the same value, except prose (as
    tests/invariant.rs)."""
    if isinstance(plan, dict) and isinstance(report, dict):
        skip = {"notes", "source", "findings", "content", "guid", "logical", "ebr_bytes"}
        for k, va in plan.items():
            if k in skip or k not in report or va is None or report[k] is None:
                continue
            assert_same(va, report[k], f"{path}.{k}")
    elif isinstance(plan, list) and isinstance(report, list):
        assert len(plan) == len(report), f"{path}: lengths differ"
        for i, (a, b) in enumerate(zip(plan, report)):
            assert_same(a, b, f"{path}[{i}]")
    else:
        assert plan == report, path


def rchar() -> int:
    """Bytes this process has read so far (read, pread; /proc/self/io)."""
    with open("/proc/self/io") as f:
        for line in f:
            if line.startswith("rchar:"):
                return int(line.split()[1])
    raise AssertionError("no rchar in /proc/self/io")


def test_plan_of_dict_equals_plan_of_file(rpi: dict[str, Any]) -> None:
    from_dict = blockwise.plan(rpi, base_dir=EXAMPLES)
    from_file = blockwise.plan(EXAMPLES / "rpi.toml")
    from_text = blockwise.plan((EXAMPLES / "rpi.toml").read_text(), base_dir=EXAMPLES)
    assert from_dict["source"] == "<dict>"
    assert from_file["source"] == str(EXAMPLES / "rpi.toml")
    for k in ("partitions", "table", "size_bytes", "erase_block_bytes", "aligned"):
        assert from_dict[k] == from_file[k] == from_text[k], k
    assert from_dict["aligned"] is True
    assert from_dict["findings"] == []


def test_plan_lists_the_findings_verify_will_give(tmp_path: pathlib.Path) -> None:
    spec = {
        "image": {"erase-block": "4MiB"},
        "partition": [{"fs": "fat32", "size": "64MiB", "start": "1MiB"}],
    }
    planned = blockwise.plan(spec)
    assert [f["code"] for f in planned["findings"]] == ["partition-not-erase-aligned"]
    out = tmp_path / "off.img"
    blockwise.build(spec, out)
    report = blockwise.verify(out, planned["erase_block_bytes"])
    found = [f for f in report["findings"] if f["code"] == "partition-not-erase-aligned"]
    assert found == planned["findings"]
    # Without an erase block, verify checks against the one the image declares: its only
    # partition starts at 1 MiB, and it says so.
    declared = blockwise.verify(out)
    assert declared["erase_block_bytes"] == 1 << 20
    assert declared["erase_block_source"]["from"] == "partition-starts"
    assert not [f for f in declared["findings"] if f["code"] == "partition-not-erase-aligned"]


def test_build_rpi_from_dict(rpi: dict[str, Any], tmp_path: pathlib.Path) -> None:
    out = tmp_path / "rpi.img"
    bmap = tmp_path / "rpi.img.bmap"
    built = blockwise.build(rpi, out, bmap, base_dir=EXAMPLES)
    assert built["output"] == str(out)
    assert built["aligned"] is True
    assert built["size_bytes"] == 1 << 30 == out.stat().st_size
    assert built["content_bytes"] > 0 and built["metadata_bytes"] > 0
    assert "<bmap" in bmap.read_text()
    # Sparse: far less on disk than the image size.
    assert out.stat().st_blocks * 512 < 64 << 20
    kinds = [p["filesystem"]["kind"] for p in built["partitions"]]
    assert kinds == ["fat32", "ext4"]
    for p in built["partitions"]:
        fsck_partition(out, p, tmp_path)
    # The same spec as a file builds the same plan.
    planned = blockwise.plan(EXAMPLES / "rpi.toml")
    assert planned["partitions"] == built["partitions"]


def test_verify_equals_plan(rpi: dict[str, Any], tmp_path: pathlib.Path) -> None:
    out = tmp_path / "rpi.img"
    planned = blockwise.plan(rpi, base_dir=EXAMPLES)
    blockwise.build(rpi, out, base_dir=EXAMPLES)
    report = blockwise.verify(out, planned["erase_block_bytes"])
    assert report["source"] == str(out)
    assert report["aligned"] is True
    errors = [f for f in report["findings"] if f["severity"] != "info"]
    assert errors == []
    for k in ("size_bytes", "sector_bytes", "erase_block_bytes"):
        assert planned[k] == report[k], k
    assert planned["table"]["kind"] == report["table"]["kind"]
    assert_same(planned["partitions"], report["partitions"], "partitions")
    # Sizes as strings and str paths work too.
    assert blockwise.verify(str(out), "4MiB")["partitions"] == report["partitions"]


def test_verify_reports_misalignment(tmp_path: pathlib.Path) -> None:
    # A 4 MiB-aligned image checked against 16 MiB erase blocks: findings, not an exception.
    out = tmp_path / "small.img"
    spec = {
        "image": {"size": "64MiB", "erase-block": "4MiB", "first-partition": "4MiB"},
        "partition": [{"fs": "fat32", "size": "fill"}],
    }
    blockwise.build(spec, out)
    report = blockwise.verify(out, 16 << 20, strict=True)
    assert report["aligned"] is False
    assert any(f["severity"] == "error" for f in report["findings"])


@pytest.mark.parametrize(
    ("spec", "key"),
    [
        ({"image": {"size": "1GiB", "erase-block": "3MiB"}}, "image.erase-block"),
        ({"image": {"size": "1GiB", "sise": 1}}, "image.sise"),
        ({"partition": [{"fs": "fat32", "size": "1MiB"}, {"fs": "ext4", "size": "x"}]}, "partition[2].size"),
        ('[image]\nsize = 5\n', "image.size"),
        ({"partition": [{"fs": "fat32", "size": "64MiB", "contents": "no/such/dir"}]}, "partition[1].contents"),
        ({"image": {"size": 1.5}, "partition": [{"fs": "none", "size": "fill"}]}, "image.size"),
        ({"image": {"size": float("inf")}, "partition": [{"fs": "none", "size": "fill"}]}, "image.size"),
        ({"partition": [{"fs": "none", "size": -4096.0}]}, "partition[1].size"),
    ],
)
def test_spec_error_names_the_key(spec: Any, key: str, tmp_path: pathlib.Path) -> None:
    with pytest.raises(blockwise.SpecError) as e:
        blockwise.plan(spec, base_dir=tmp_path)
    assert isinstance(e.value, ValueError)
    assert e.value.key == key
    assert key in str(e.value)


def test_whole_float_sizes_are_bytes() -> None:
    # Arithmetic gives floats: 1.5 * 2**30 is a whole number of bytes and is taken as such.
    planned = blockwise.plan(
        {"image": {"size": 1.5 * 2**30}, "partition": [{"fs": "none", "size": 256.0 * 2**20}]}
    )
    assert planned["size_bytes"] == 3 << 29
    assert planned["partitions"][0]["size_bytes"] == 256 << 20


def test_dict_values_may_be_paths(tmp_path: pathlib.Path) -> None:
    (tmp_path / "boot").mkdir()
    (tmp_path / "boot" / "cmdline.txt").write_text("console=tty1\n")
    spec = {
        "image": {"size": 64 << 20},
        "partition": ({"fs": "fat32", "size": "fill", "contents": tmp_path / "boot"},),
    }
    built = blockwise.build(spec, tmp_path / "p.img")
    assert built["content_bytes"] == len("console=tty1\n")


def test_spec_error_from_verify_arguments(tmp_path: pathlib.Path) -> None:
    with pytest.raises(blockwise.SpecError) as e:
        blockwise.verify(tmp_path, erase_block=3 << 20)
    assert e.value.key == "erase_block" and "erase_block" in str(e.value)


def test_corrupt_image_error_names_the_path(tmp_path: pathlib.Path) -> None:
    junk = tmp_path / "junk.img"
    junk.write_bytes(b"not a disk image\n" * 4096)
    with pytest.raises(blockwise.CorruptImageError) as e:
        blockwise.verify(junk)
    assert str(junk) in str(e.value)


def test_unsupported_error_names_the_partition() -> None:
    spec = {
        "image": {"size": "64MiB"},
        "partition": [{"fs": "ext4", "size": "fill", "ext4": {"features": ["bigalloc"]}}],
    }
    with pytest.raises(blockwise.UnsupportedError) as e:
        blockwise.plan(spec)
    assert "partition[1]" in str(e.value) and "bigalloc" in str(e.value)


def test_os_errors_carry_errno_and_filename(tmp_path: pathlib.Path) -> None:
    missing = tmp_path / "missing.img"
    with pytest.raises(FileNotFoundError) as e:
        blockwise.verify(missing)
    assert e.value.errno == errno.ENOENT
    assert e.value.filename == str(missing)
    assert str(missing) in str(e.value)
    with pytest.raises(FileNotFoundError) as e:
        blockwise.plan(tmp_path / "missing.toml")
    assert e.value.filename == str(tmp_path / "missing.toml")
    # The output's directory does not exist.
    out = tmp_path / "no" / "dir" / "out.img"
    with pytest.raises(OSError) as e:
        blockwise.build(SMALL, out)
    assert e.value.errno == errno.ENOENT and isinstance(e.value, FileNotFoundError)
    assert e.value.filename is not None and str(tmp_path / "no" / "dir") in e.value.filename
    # A file where the output's directory should be.
    (tmp_path / "file").write_text("x")
    with pytest.raises(NotADirectoryError) as e:
        blockwise.build(SMALL, tmp_path / "file" / "out.img")
    assert e.value.filename == str(tmp_path / "file" / "out.img")
    # A directory is not an image.
    with pytest.raises(OSError) as e:
        blockwise.verify(tmp_path)
    assert e.value.filename == str(tmp_path)


def test_wrong_spec_type() -> None:
    with pytest.raises(TypeError):
        blockwise.plan(42)  # type: ignore[arg-type]


def test_32gib_sparse_image_verifies_reading_little(tmp_path: pathlib.Path) -> None:
    out = tmp_path / "big.img"
    spec = {
        "image": {"size": "32GiB", "table": "gpt"},
        "partition": [{"fs": "fat32", "size": "256MiB"}, {"fs": "ext4", "size": "fill"}],
    }
    blockwise.build(spec, out)
    assert out.stat().st_size == 32 << 30
    assert out.stat().st_blocks * 512 < 64 << 20
    before = rchar()
    report = blockwise.verify(out)
    read = rchar() - before
    assert report["aligned"] is True
    assert report["size_bytes"] == 32 << 30
    assert [p["content"] for p in report["partitions"]] == ["fat32", "ext4"]
    # Metadata only: a few MiB at most out of 32 GiB.
    assert read < 16 << 20, read


def test_progress_callbacks_arrive(rpi: dict[str, Any], tmp_path: pathlib.Path) -> None:
    calls: list[tuple[int, int]] = []
    blockwise.build(rpi, tmp_path / "rpi.img", progress=lambda d, t: calls.append((d, t)), base_dir=EXAMPLES)
    assert len(calls) >= 2
    total = calls[0][1]
    assert total > 0 and calls[0] == (0, total) and calls[-1] == (total, total)
    assert all(t == total for _, t in calls)
    assert [d for d, _ in calls] == sorted(d for d, _ in calls)


class Stop(Exception):
    pass


@pytest.mark.parametrize("after", [0, 1])
def test_progress_exception_cancels(
    rpi: dict[str, Any], tmp_path: pathlib.Path, after: int
) -> None:
    out = tmp_path / "rpi.img"
    out.write_bytes(b"old")
    calls = []

    def progress(done: int, total: int) -> None:
        calls.append(done)
        if len(calls) > after:
            raise Stop(f"stop at {done}/{total}")

    with pytest.raises(Stop):
        blockwise.build(rpi, out, tmp_path / "rpi.bmap", progress, base_dir=EXAMPLES)
    # Nothing left behind: the old output untouched, no temp files, no bmap.
    assert out.read_bytes() == b"old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["rpi.img"]


def test_builds_in_two_threads(tmp_path: pathlib.Path) -> None:
    results: dict[int, Any] = {}
    errors: list[BaseException] = []
    ticks = []

    def run(i: int) -> None:
        try:
            results[i] = blockwise.build(
                SMALL, tmp_path / f"t{i}.img", progress=lambda d, t: ticks.append(i)
            )
        except BaseException as e:  # noqa: BLE001 - collected and re-raised below
            errors.append(e)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert results[0]["partitions"] == results[1]["partitions"]
    digests = {hashlib.sha256((tmp_path / f"t{i}.img").read_bytes()).hexdigest() for i in range(2)}
    assert len(digests) == 1, "the same spec built twice must give the same bytes"
    assert set(ticks) == {0, 1}


def test_relative_contents_resolve_against_the_spec_file(tmp_path: pathlib.Path) -> None:
    (tmp_path / "boot").mkdir()
    (tmp_path / "boot" / "config.txt").write_text("arm_64bit=1\n")
    spec = tmp_path / "sd.toml"
    spec.write_text(
        '[image]\nsize = "64MiB"\n[[partition]]\nfs = "fat32"\nsize = "fill"\ncontents = "boot"\n'
    )
    cwd = os.getcwd()
    try:
        os.chdir("/")
        built = blockwise.build(spec, tmp_path / "sd.img")
    finally:
        os.chdir(cwd)
    assert built["content_bytes"] == len("arm_64bit=1\n")


def test_keyboard_interrupt_cancels(rpi: dict[str, Any], tmp_path: pathlib.Path) -> None:
    # What Ctrl-C does inside a callback: KeyboardInterrupt propagates, nothing is left.
    def progress(done: int, total: int) -> None:
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        blockwise.build(rpi, tmp_path / "rpi.img", progress=progress, base_dir=EXAMPLES)
    assert list(tmp_path.iterdir()) == []


def test_output_inside_its_contents_is_left_out(tmp_path: pathlib.Path) -> None:
    (tmp_path / "a.txt").write_text("a\n")
    spec = {
        "image": {"size": "32MiB", "table": "none", "timestamp": 1700000000},
        "partition": [{"fs": "ext4", "size": "fill", "contents": tmp_path}],
    }
    out = tmp_path / "out.img"
    first = blockwise.build(spec, out)
    assert first["warnings"] == []
    image = out.read_bytes()
    again = blockwise.build(spec, out)
    assert any("out.img: left out of the image" in w for w in again["warnings"]), again["warnings"]
    assert out.read_bytes() == image
    spec["partition"][0]["ext4"] = {"backend": "mke2fs"}
    with pytest.raises(blockwise.SpecError) as e:
        blockwise.build(spec, tmp_path / "m.img")
    assert e.value.key == "partition[1].contents"


def test_decimal_units_are_powers_of_1000() -> None:
    # As sfdisk and parted read them: a retail "8 GB" card is 8,000,000,000 bytes.
    planned = blockwise.plan(
        {
            "image": {"size": "8GB", "erase-block": "4MiB"},
            "partition": [{"fs": "none", "size": "100MB"}, {"fs": "none", "size": "fill"}],
        }
    )
    assert planned["size_bytes"] == 8_000_000_000
    assert planned["partitions"][0]["size_bytes"] == 24 * (4 << 20)
    last = planned["partitions"][1]
    assert last["start_bytes"] + last["size_bytes"] <= 8_000_000_000
    assert blockwise.plan({"image": {"size": "8G"}, "partition": [{"fs": "none", "size": "fill"}]})[
        "size_bytes"
    ] == 8 << 30


def test_build_outputs_android_sparse_zstd_and_xz(rpi: dict[str, Any], tmp_path: pathlib.Path) -> None:
    """The name picks the container, `format=` overrides it, `level=` sets the compression,
    and each output holds the raw build (decoded by the CLI's oracles in tests/encode.rs;
    here by the headers and the JSON)."""
    raw = blockwise.build(rpi, tmp_path / "rpi.img", base_dir=EXAMPLES)
    assert raw["format"] == "raw" and raw["output_bytes"] == 1 << 30
    simg = blockwise.build(rpi, tmp_path / "rpi.simg", tmp_path / "rpi.simg.bmap", base_dir=EXAMPLES)
    head = (tmp_path / "rpi.simg").read_bytes()[:28]
    assert head[:4] == (0xED26FF3A).to_bytes(4, "little")
    assert simg["format"] == "simg"
    c = simg["container"]
    assert c["data_bytes"] + c["fill_bytes"] + c["dont_care_bytes"] == 1 << 30
    assert "<bmap" in (tmp_path / "rpi.simg.bmap").read_text()
    zst = blockwise.build(rpi, tmp_path / "rpi.img.zst", base_dir=EXAMPLES, level=1)
    assert (tmp_path / "rpi.img.zst").read_bytes()[-4:] == (0x8F92EAB1).to_bytes(4, "little")
    assert zst["container"]["units"] == (1 << 30) // (4 << 20)
    xz = blockwise.build(rpi, tmp_path / "card", base_dir=EXAMPLES, format="xz", level=0)
    assert (tmp_path / "card").read_bytes()[:6] == b"\xfd7zXZ\x00"
    assert xz["output_bytes"] == (tmp_path / "card").stat().st_size
    with pytest.raises(ValueError):
        blockwise.build(rpi, tmp_path / "x.img", base_dir=EXAMPLES, format="gz")
    with pytest.raises(OSError):
        blockwise.build(rpi, tmp_path / "x.img.gz", base_dir=EXAMPLES)
    with pytest.raises(OSError):
        blockwise.build(rpi, tmp_path / "x.img.zst", base_dir=EXAMPLES, level=99)
    assert not any(p.name.startswith("x.") or p.name.startswith(".x.") for p in tmp_path.iterdir())
