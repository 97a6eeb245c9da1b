"""examples/python: the post-build hook builds, verifies and fails on misalignment."""

from __future__ import annotations

import pathlib
import subprocess
import sys

import pytest

from conftest import ROOT, fsck_partition

import blockwise

HOOK = ROOT / "examples" / "python" / "post_build.py"


def hook(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(HOOK), *args], capture_output=True, text=True)


@pytest.fixture
def rootfs(tmp_path: pathlib.Path) -> pathlib.Path:
    root = tmp_path / "rootfs"
    (root / "boot").mkdir(parents=True)
    (root / "etc").mkdir()
    (root / "boot" / "config.txt").write_text("arm_64bit=1\n")
    (root / "etc" / "hostname").write_text("pi\n")
    return root


def test_post_build_hook(rootfs: pathlib.Path, tmp_path: pathlib.Path) -> None:
    out = tmp_path / "sd.img"
    r = hook(str(rootfs), str(out), "--size", "1GiB", "--bmap", str(tmp_path / "sd.bmap"))
    assert r.returncode == 0, r.stderr
    assert "aligned" in r.stdout
    report = blockwise.verify(out)
    assert [p["content"] for p in report["partitions"]] == ["fat32", "ext4"]
    for p in report["partitions"]:
        fsck_partition(out, p, tmp_path)


def test_post_build_hook_fails_on_misalignment(rootfs: pathlib.Path, tmp_path: pathlib.Path) -> None:
    out = tmp_path / "sd.img"
    r = hook(str(rootfs), str(out), "--size", "1GiB", "--verify-erase-block", "16MiB")
    assert r.returncode == 1, r.stderr
    assert "NOT aligned" in r.stderr


def test_post_build_hook_bad_spec(rootfs: pathlib.Path, tmp_path: pathlib.Path) -> None:
    r = hook(str(rootfs), str(tmp_path / "sd.img"), "--erase-block", "3MiB")
    assert r.returncode == 2
    assert "image.erase-block" in r.stderr
    assert not (tmp_path / "sd.img").exists()
