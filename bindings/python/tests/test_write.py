"""write: an image to a regular file and to loop devices, a spec dict as source, a spec planned
for the device it is written to, the safety refusals (too small, read-only, partition,
non-removable without yes), progress and cancelling, OS errors."""

from __future__ import annotations

import errno
import hashlib
import json
import os
import pathlib
import re
import shutil
import signal
import subprocess
import sys
import threading
from typing import Any

import pytest

from conftest import loop, need_root_losetup, need_tool

import blockwise

SMALL = {
    "image": {"size": "64MiB", "seed": 7, "timestamp": 1700000000},
    "partition": [{"fs": "fat32", "size": "fill", "label": "SMALL"}],
}

KEYS = {
    "source",
    "target",
    "image_bytes",
    "mapped_bytes",
    "bytes_written",
    "offset_reached",
    "seconds",
    "mb_per_s",
    "chunk_mb_per_s",
    "fsync_seconds",
    "verified",
    "verify_mb_per_s",
    "direct",
    "interrupted",
    "interrupted_verifying",
    "verified_bytes",
    "notes",
    # Python's addition to the CLI's JSON: what was also issued as BlockwiseWarning.
    "warnings",
}


def data_ranges(path: pathlib.Path) -> list[tuple[int, int]]:
    """The data ranges of a sparse file (SEEK_DATA/SEEK_HOLE)."""
    out = []
    with open(path, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        pos = 0
        while pos < size:
            try:
                start = os.lseek(f.fileno(), pos, os.SEEK_DATA)
            except OSError:
                break
            end = os.lseek(f.fileno(), start, os.SEEK_HOLE)
            out.append((start, end))
            pos = end
    return out


def read_at(path: pathlib.Path | str, offset: int, size: int) -> bytes:
    with open(path, "rb") as f:
        f.seek(offset)
        return f.read(size)


def assert_block0_unwritten(target: pathlib.Path) -> None:
    """After a cancelled write to a regular file: the file was emptied first (so it ends up
    identical to the image when the write completes), and block 0 is written last, so it is
    still zeros (or not there): the file holds no valid image."""
    head = read_at(target, 0, 512)
    assert head.count(0) == len(head), head[:16]


def assert_same_where_mapped(image: pathlib.Path, target: pathlib.Path | str) -> None:
    ranges = data_ranges(image)
    assert ranges, "the image has no data"
    for start, end in ranges:
        pos = start
        while pos < end:
            n = min(end - pos, 4 << 20)
            assert read_at(image, pos, n) == read_at(target, pos, n), f"differs in [{pos}, {pos + n})"
            pos += n


@pytest.fixture(scope="module")
def image(tmp_path_factory: pytest.TempPathFactory) -> pathlib.Path:
    out = tmp_path_factory.mktemp("img") / "small.img"
    blockwise.build(SMALL, out)
    return out


def sha256(path: pathlib.Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def test_write_image_to_a_new_file(image: pathlib.Path, tmp_path: pathlib.Path) -> None:
    target = tmp_path / "out.img"
    r = blockwise.write(image, target, verify=True)
    assert set(r) == KEYS
    assert r["source"] == str(image) and r["target"] == str(target)
    assert r["verified"] is True and r["interrupted"] is False
    assert r["verify_mb_per_s"] is not None
    assert r["image_bytes"] == image.stat().st_size == target.stat().st_size
    assert 0 < r["mapped_bytes"] <= r["bytes_written"]
    assert sha256(image) == sha256(target)
    assert blockwise.verify(target)["aligned"] is True


def test_write_to_a_larger_file_gives_the_image_byte_for_byte(
    image: pathlib.Path, tmp_path: pathlib.Path
) -> None:
    """A regular-file target larger than the image and full of old bytes ends up identical to
    the image (cut to its size, its holes zeros), as bmaptool leaves it (issue 25)."""
    target = tmp_path / "old.img"
    target.write_bytes(b"\xee" * (80 << 20))
    r = blockwise.write(str(image), str(target), chunk="1MiB")
    assert r["verified"] is True
    assert_same_where_mapped(image, target)
    assert not any("holes" in n for n in r["notes"]), r["notes"]
    assert target.stat().st_size == image.stat().st_size
    assert sha256(target) == sha256(image)


def test_write_spec_dict(image: pathlib.Path, tmp_path: pathlib.Path) -> None:
    target = tmp_path / "spec.img"
    r = blockwise.write(SMALL, target, verify=False)
    assert r["source"] == "<dict>" and r["verified"] is False and r["verify_mb_per_s"] is None
    # The same spec built to a file gives the same bytes (seed and timestamp fixed).
    assert sha256(image) == sha256(target)


def test_write_spec_file(tmp_path: pathlib.Path) -> None:
    (tmp_path / "boot").mkdir()
    (tmp_path / "boot" / "config.txt").write_text("arm_64bit=1\n")
    spec = tmp_path / "sd.toml"
    spec.write_text(
        '[image]\nsize = "64MiB"\n[[partition]]\nfs = "fat32"\nsize = "fill"\ncontents = "boot"\n'
    )
    r = blockwise.write(spec, tmp_path / "sd.img")
    assert r["source"] == str(spec) and r["verified"] is True
    assert blockwise.verify(tmp_path / "sd.img")["aligned"] is True


def test_progress_callbacks_arrive(image: pathlib.Path, tmp_path: pathlib.Path) -> None:
    calls: list[tuple[int, int]] = []
    r = blockwise.write(image, tmp_path / "p.img", progress=lambda d, t: calls.append((d, t)))
    assert len(calls) >= 2
    total = calls[0][1]
    assert total == r["mapped_bytes"] > 0
    assert calls[0] == (0, total) and calls[-1] == (total, total)
    assert all(t == total for _, t in calls)
    assert [d for d, _ in calls] == sorted(d for d, _ in calls)


class Stop(Exception):
    pass


@pytest.mark.parametrize("after", [0, 1])
def test_raising_progress_cancels_with_block_0_unwritten(
    image: pathlib.Path, tmp_path: pathlib.Path, after: int
) -> None:
    target = tmp_path / "t.img"
    old = b"\xab" * (72 << 20)
    target.write_bytes(old)
    calls = []

    def progress(done: int, total: int) -> None:
        calls.append(done)
        if len(calls) > after:
            raise Stop(f"stop at {done}/{total}")

    with pytest.raises(Stop):
        blockwise.write(image, target, progress=progress, chunk="64KiB")
    assert len(calls) == after + 1
    # LBA 0 (and the GPT/MBR head) is written last: not written.
    assert_block0_unwritten(target)


def test_keyboard_interrupt_cancels(image: pathlib.Path, tmp_path: pathlib.Path) -> None:
    target = tmp_path / "t.img"
    target.write_bytes(b"\xab" * 4096)

    def progress(done: int, total: int) -> None:
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        blockwise.write(image, target, progress=progress)
    assert_block0_unwritten(target)


def test_ctrl_c_cancels(tmp_path: pathlib.Path) -> None:
    # A real SIGINT, sent by another thread while the write runs without the GIL: the write
    # notices it at its next progress poll, stops before block 0 and raises KeyboardInterrupt.
    source = tmp_path / "big.img"
    source.write_bytes(b"\x5a" * (256 << 20))
    target = tmp_path / "t.img"
    target.write_bytes(b"\xab" * 4096)
    timers: list[threading.Timer] = []

    def progress(done: int, total: int) -> None:
        if not timers:
            timers.append(threading.Timer(0.001, os.kill, (os.getpid(), signal.SIGINT)))
            timers[0].start()

    old = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        with pytest.raises(KeyboardInterrupt):
            blockwise.write(source, target, progress=progress, chunk="64KiB", raw=True)
    finally:
        signal.signal(signal.SIGINT, old)
        for t in timers:
            t.join()
    assert_block0_unwritten(target)


def test_writes_in_two_threads(image: pathlib.Path, tmp_path: pathlib.Path) -> None:
    errors: list[BaseException] = []
    ticks: list[int] = []

    def run(i: int) -> None:
        try:
            blockwise.write(image, tmp_path / f"t{i}.img", progress=lambda d, t: ticks.append(i))
        except BaseException as e:  # noqa: BLE001 - collected and re-raised below
            errors.append(e)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert set(ticks) == {0, 1}
    assert sha256(tmp_path / "t0.img") == sha256(tmp_path / "t1.img") == sha256(image)


def test_os_errors(image: pathlib.Path, tmp_path: pathlib.Path) -> None:
    with pytest.raises(FileNotFoundError) as e:
        blockwise.write(tmp_path / "missing.img", tmp_path / "out.img")
    assert e.value.errno == errno.ENOENT and e.value.filename == str(tmp_path / "missing.img")
    target = tmp_path / "no" / "dir" / "out.img"
    with pytest.raises(OSError) as oe:
        blockwise.write(image, target)
    assert oe.value.errno == errno.ENOENT and oe.value.filename == str(target)
    with pytest.raises(TypeError):
        blockwise.write(42, tmp_path / "out.img")  # type: ignore[arg-type]


def test_a_directory_is_refused(image: pathlib.Path, tmp_path: pathlib.Path) -> None:
    with pytest.raises(blockwise.UnsafeTargetError) as e:
        blockwise.write(image, tmp_path)
    assert str(tmp_path) in str(e.value)


def test_bad_chunk_is_a_spec_error(image: pathlib.Path, tmp_path: pathlib.Path) -> None:
    with pytest.raises(blockwise.SpecError) as e:
        blockwise.write(image, tmp_path / "o.img", chunk="1000")
    assert e.value.key == "chunk"


# --- loop devices (root) ---------------------------------------------------------------


def backing(tmp_path: pathlib.Path, size: int, fill: bytes = b"\xee") -> pathlib.Path:
    f = tmp_path / "backing.bin"
    f.write_bytes(fill * size)
    return f


def test_write_to_a_loop_device(image: pathlib.Path, tmp_path: pathlib.Path) -> None:
    need_root_losetup()
    with loop(backing(tmp_path, 96 << 20)) as dev:
        # A loop device is not removable: refused without yes=True, nothing written.
        with pytest.raises(blockwise.UnsafeTargetError) as e:
            blockwise.write(image, dev)
        assert "yes=True" in str(e.value) and dev in str(e.value)
        assert read_at(dev, 0, 512) == b"\xee" * 512
        calls: list[tuple[int, int]] = []
        r = blockwise.write(image, dev, yes=True, progress=lambda d, t: calls.append((d, t)))
        assert r["target"] == dev and r["verified"] is True and r["interrupted"] is False
        assert calls and calls[-1][0] == calls[-1][1]
        assert_same_where_mapped(image, pathlib.Path(dev))
        assert blockwise.verify(dev)["aligned"] is True


def test_the_command_line_names_its_own_flags(image: pathlib.Path, tmp_path: pathlib.Path) -> None:
    """`python -m blockwise write` refuses a non-removable disk naming `--yes`, not the
    library's `yes=True`; `--raw` writes a blob no recogniser knows."""
    need_root_losetup()
    with loop(backing(tmp_path, 96 << 20)) as dev:
        cli = [sys.executable, "-m", "blockwise", "write"]
        r = subprocess.run([*cli, str(image), dev, "--no-verify"], capture_output=True, text=True)
        assert r.returncode == 2, r.stderr
        assert "--yes" in r.stderr and "yes=True" not in r.stderr, r.stderr
        assert read_at(dev, 0, 512) == b"\xee" * 512
        blob = tmp_path / "firmware.bin"
        blob.write_bytes(bytes(range(1, 256)) * 4096)
        r = subprocess.run([*cli, str(blob), dev, "--yes", "--verify", "-q"], capture_output=True, text=True)
        assert r.returncode == 2 and "--raw" in r.stderr and "raw=True" not in r.stderr, r.stderr
        r = subprocess.run([*cli, str(blob), dev, "--yes", "--verify", "--raw", "-q"], capture_output=True, text=True)
        assert r.returncode == 0, r.stderr
        assert read_at(dev, 0, len(blob.read_bytes())) == blob.read_bytes()


def test_too_small_loop_device_is_refused(image: pathlib.Path, tmp_path: pathlib.Path) -> None:
    need_root_losetup()
    with loop(backing(tmp_path, 32 << 20)) as dev:
        with pytest.raises(blockwise.UnsafeTargetError) as e:
            blockwise.write(image, dev, yes=True)
        assert "too small" in str(e.value)
        assert read_at(dev, 0, 512) == b"\xee" * 512


def test_read_only_loop_device_is_refused(image: pathlib.Path, tmp_path: pathlib.Path) -> None:
    need_root_losetup()
    with loop(backing(tmp_path, 96 << 20), "-r") as dev:
        with pytest.raises(blockwise.UnsafeTargetError) as e:
            blockwise.write(image, dev, yes=True)
        assert "read-only" in str(e.value)


def test_partition_needs_partition_ok(image: pathlib.Path, tmp_path: pathlib.Path) -> None:
    need_root_losetup()
    disk = tmp_path / "disk.img"
    shutil.copyfile(image, disk)
    with disk.open("r+b") as f:
        f.truncate(96 << 20)
    with loop(disk, "-P") as dev:
        part = f"{dev}p1"
        # The kernel may not scan loop devices itself (and there may be no udev): partx adds
        # the partitions, as tests/write.rs does.
        for cmd in (["partx", "-a", dev], ["udevadm", "settle"]):
            if not os.path.exists(part) and shutil.which(cmd[0]):
                subprocess.run(cmd, check=False, capture_output=True)
        if not os.path.exists(part):
            pytest.skip(f"{part} did not appear (no partition scan on loop devices here)")
        with pytest.raises(blockwise.UnsafeTargetError) as e:
            blockwise.write(image, part, yes=True)
        assert "partition" in str(e.value)


# --- a spec planned for the device it is written to -------------------------------------

# erase-block "auto", no image.size, one partition filling the rest: written to a block device
# it takes the device's erase block, sector size and size, as `blockwise write SPEC DEVICE`.
AUTO_TOML = """\
[image]
erase-block = "auto"
table = "gpt"
[[partition]]
fs = "fat"
size = "fill"
"""
AUTO: dict[str, Any] = {
    "image": {"erase-block": "auto", "table": "gpt"},
    "partition": [{"fs": "fat", "size": "fill"}],
}
# The same, with None for keys it leaves out: None is a left-out key (TOML has no null).
AUTO_NONES: dict[str, Any] = {
    "image": {"erase-block": "auto", "table": "gpt", "size": None, "sector-size": None},
    "partition": [{"fs": "fat", "size": "fill", "label": None}],
}


def auto_source(kind: str, tmp_path: pathlib.Path) -> dict[str, Any] | pathlib.Path:
    if kind == "file":
        spec = tmp_path / "auto.toml"
        spec.write_text(AUTO_TOML)
        return spec
    return AUTO if kind == "dict" else AUTO_NONES


@pytest.mark.parametrize("kind", ["dict", "dict with None", "file"])
def test_auto_spec_to_a_regular_file_is_a_spec_error(kind: str, tmp_path: pathlib.Path) -> None:
    target = tmp_path / "plain.img"
    with pytest.raises(blockwise.SpecError) as e:
        blockwise.write(auto_source(kind, tmp_path), target)
    assert e.value.key == "image.erase-block", str(e.value)
    # The same reason for a dict and a file: "auto" needs the device, and how to give it.
    assert "from a probe of the device" in str(e.value)
    assert "blockwise.write(spec" in str(e.value)
    assert not target.exists()


@pytest.mark.parametrize("kind", ["dict", "toml", "file"])
def test_auto_spec_planned_without_a_device_says_how_to_give_one(
    kind: str, tmp_path: pathlib.Path
) -> None:
    spec: Any = {"dict": AUTO, "toml": AUTO_TOML}.get(kind) or auto_source("file", tmp_path)
    with pytest.raises(blockwise.SpecError) as e:
        blockwise.plan(spec)
    assert e.value.key == "image.erase-block", str(e.value)
    assert "from a probe of the device" in str(e.value)
    assert "blockwise.write(spec" in str(e.value)


@pytest.mark.parametrize("sector", [512, 4096])
@pytest.mark.parametrize("kind", ["dict", "dict with None", "file"])
def test_spec_to_a_device_is_planned_for_it(
    kind: str, sector: int, tmp_path: pathlib.Path
) -> None:
    need_root_losetup()
    sfdisk = need_tool("sfdisk")
    size = 96 << 20
    source = auto_source(kind, tmp_path)
    with loop(backing(tmp_path, size), "-b", str(sector)) as dev:
        r = blockwise.write(source, dev, yes=True)
        table = json.loads(
            subprocess.run(
                [sfdisk, "--json", dev], capture_output=True, text=True, check=True
            ).stdout
        )["partitiontable"]
        notes = r["notes"]
        m = re.match(r"erase block (\d+) (KiB|MiB): ", notes[0])
        assert m, notes
        erase = int(m.group(1)) << (10 if m.group(2) == "KiB" else 20)
        report = blockwise.verify(dev, erase_block=erase)
    # What the CLI prints on stderr, first in the notes; the erase block is the probe's
    # (sysfs, a read-timing estimate or the 4 MiB default: a loop device gives none).
    assert notes[1] == f"image size 96 MiB: the size of {dev}", notes
    assert re.fullmatch(rf"sector size {sector}: from /sys/.*/queue/logical_block_size", notes[2])
    assert r["image_bytes"] == size and r["verified"] is True
    assert r["source"] == ("<dict>" if kind != "file" else str(source))
    assert table["label"] == "gpt" and table["sectorsize"] == sector, table
    (part,) = table["partitions"]
    start, end = part["start"] * sector, (part["start"] + part["size"]) * sector
    # Aligned, and filling the device up to its last erase block before the GPT tail.
    assert start % erase == 0 and end % erase == 0, table
    assert size - 2 * erase < end <= size, table
    assert report["aligned"] is True, report["findings"]
    assert report["size_bytes"] == size


def test_a_dict_value_toml_cannot_hold_is_a_spec_error_for_a_device(tmp_path: pathlib.Path) -> None:
    need_root_losetup()
    spec = {
        "image": {"erase-block": "auto", "size": 2**63},
        "partition": [{"fs": "fat", "size": "fill"}],
    }
    with loop(backing(tmp_path, 32 << 20)) as dev:
        with pytest.raises(blockwise.SpecError) as e:
            blockwise.write(spec, dev, yes=True)
        assert e.value.key == "(dict)" and "TOML" in str(e.value), str(e.value)
        assert read_at(dev, 0, 512) == b"\xee" * 512


def test_spec_sector_size_other_than_the_devices_warns(tmp_path: pathlib.Path) -> None:
    need_root_losetup()
    spec = {
        "image": {"size": "16MiB", "erase-block": "1MiB", "sector-size": 512},
        "partition": [{"fs": "fat", "size": "fill"}],
    }
    with loop(backing(tmp_path, 32 << 20), "-b", "4096") as dev:
        with pytest.warns(blockwise.BlockwiseWarning, match="4096-byte logical blocks"):
            r = blockwise.write(spec, dev, yes=True, verify=False)
    assert any("4096-byte logical blocks" in w for w in r["warnings"]), r["warnings"]
    assert r["notes"][0].startswith("erase block 1 MiB: from image.erase-block"), r["notes"]
    assert "sector size 512: from image.sector-size" in r["notes"]
    assert r["image_bytes"] == 16 << 20


def test_a_file_target_inside_the_contents_is_left_out(tmp_path: pathlib.Path) -> None:
    """Writing a spec to a regular file inside its own contents tree: the second write does
    not copy the first one's output into the image (a warning says so)."""
    (tmp_path / "a.txt").write_text("a\n")
    spec = {
        "image": {"size": "32MiB", "table": "none", "timestamp": 1700000000},
        "partition": [{"fs": "ext4", "size": "fill", "contents": tmp_path}],
    }
    target = tmp_path / "w.img"
    blockwise.write(spec, target, verify=False)
    first = target.read_bytes()
    with pytest.warns(blockwise.BlockwiseWarning, match="w.img: left out of the image"):
        blockwise.write(spec, target, verify=False)
    assert target.read_bytes() == first


STRICT_CASES = [
    # (the partition's keys, the key the error names): a value TOML refuses is refused in a
    # dict too (pythonize alone would take any string's truthiness for a boolean).
    ({"bootable": "no"}, "partition[1].bootable"),
    ({"bootable": "false"}, "partition[1].bootable"),
    ({"bootable": 1}, "partition[1].bootable"),
    ({"in-partition-table": "false"}, "partition[1].in-partition-table"),
    ({"fat": {"align-fat": "no"}}, "partition[1].fat.align-fat"),
    ({"fat": {"fats": True}}, "partition[1].fat.fats"),
    ({"fat": {"fats": "two"}}, "partition[1].fat.fats"),
    ({"fat": {"fats": 2.0}}, "partition[1].fat.fats"),
]


def strict_spec(extra: dict[str, Any]) -> dict[str, Any]:
    return {
        "image": {"size": "32MiB", "erase-block": "1MiB", "seed": 1},
        "partition": [{"fs": "fat16", "size": "fill", **extra}],
    }


@pytest.mark.parametrize("front", ["plan", "build", "write to a file", "write to a device"])
@pytest.mark.parametrize("extra,key", STRICT_CASES)
def test_dict_specs_are_as_strict_as_toml(
    front: str, extra: dict[str, Any], key: str, tmp_path: pathlib.Path
) -> None:
    spec = strict_spec(extra)
    out = tmp_path / "out.img"
    if front == "plan":
        call = lambda: blockwise.plan(spec)  # noqa: E731
    elif front == "build":
        call = lambda: blockwise.build(spec, out)  # noqa: E731
    elif front == "write to a file":
        call = lambda: blockwise.write(spec, out)  # noqa: E731
    else:
        need_root_losetup()
        dev_ctx = loop(backing(tmp_path, 32 << 20))
        dev = dev_ctx.__enter__()
        try:
            with pytest.raises(blockwise.SpecError) as e:
                blockwise.write(spec, dev, yes=True)
            assert e.value.key == key, str(e.value)
            assert read_at(dev, 0, 512) == b"\xee" * 512
        finally:
            dev_ctx.__exit__(None, None, None)
        return
    with pytest.raises(blockwise.SpecError) as e:
        call()
    assert e.value.key == key, str(e.value)
    assert not out.exists()


def test_the_same_values_are_refused_in_toml(tmp_path: pathlib.Path) -> None:
    for toml in (
        '[image]\nsize = "32MiB"\n[[partition]]\nfs = "fat16"\nsize = "fill"\nbootable = "no"\n',
        '[image]\nsize = "32MiB"\n[[partition]]\nfs = "fat16"\nsize = "fill"\nfat = { fats = true }\n',
    ):
        with pytest.raises(blockwise.SpecError) as e:
            blockwise.plan(toml)
        assert e.value.key.startswith("partition[1]."), str(e.value)
