"""python -m blockwise: the CLI's plan, build, verify and write, with its exit codes."""

from __future__ import annotations

import json
import pathlib
import subprocess
import sys

from conftest import EXAMPLES


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "blockwise", *args], capture_output=True, text=True
    )


def test_plan_build_verify(tmp_path: pathlib.Path) -> None:
    r = run("plan", str(EXAMPLES / "rpi.toml"), "--json")
    assert r.returncode == 0, r.stderr
    planned = json.loads(r.stdout)
    assert planned["aligned"] is True
    out = tmp_path / "rpi.img"
    r = run("build", str(EXAMPLES / "rpi.toml"), "-o", str(out), "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["partitions"] == planned["partitions"]
    r = run("verify", str(out))
    assert r.returncode == 0, r.stderr
    assert "aligned" in r.stdout
    r = run("verify", str(out), "--erase-block", "16MiB", "--strict", "--json")
    assert r.returncode == 1, r.stderr
    assert json.loads(r.stdout)["aligned"] is False


def test_plan_from_flags() -> None:
    r = run("plan", "--size", "8GiB", "--partition", "fat32:256MiB", "--partition", "ext4:fill", "--json")
    assert r.returncode == 0, r.stderr
    p = json.loads(r.stdout)
    assert [x["content"] for x in p["partitions"]] == ["fat32", "ext4"]
    assert p["size_bytes"] == 8 << 30


def test_errors_exit_2(tmp_path: pathlib.Path) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text('[image]\nerase-block = "3MiB"\n')
    r = run("plan", str(bad))
    assert r.returncode == 2 and "image.erase-block" in r.stderr
    r = run("verify", str(tmp_path / "missing.img"))
    assert r.returncode == 2 and "missing.img" in r.stderr
    r = run("plan")
    assert r.returncode == 2
    # An OSError names the path and the reason, in one line, without Python's "[Errno N]".
    spec = tmp_path / "ok.toml"
    spec.write_text('[image]\nsize = "64MiB"\n[[partition]]\nfs = "fat32"\nsize = "fill"\n')
    r = run("build", str(spec), "-o", str(tmp_path))
    assert r.returncode == 2, r.stderr
    assert r.stderr.startswith(f"blockwise build: error: {tmp_path}: "), r.stderr
    assert "directory" in r.stderr and "[Errno" not in r.stderr and "None" not in r.stderr
    assert r.stderr.count("\n") == 1, r.stderr


def test_write(tmp_path: pathlib.Path) -> None:
    spec = tmp_path / "small.toml"
    spec.write_text('[image]\nsize = "64MiB"\n[[partition]]\nfs = "fat32"\nsize = "fill"\n')
    out = tmp_path / "out.img"
    r = run("write", str(spec), str(out), "--verify", "--json")
    assert r.returncode == 0, r.stderr
    result = json.loads(r.stdout)
    assert result["target"] == str(out) and result["verified"] is True
    assert result["interrupted"] is False
    r = run("write", str(spec), str(out), "--no-verify")
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("wrote ") and "verified" not in r.stdout
    # A refused target and a missing source exit 2.
    r = run("write", str(spec), str(tmp_path))
    assert r.returncode == 2 and "neither a block device nor a regular file" in r.stderr
    r = run("write", str(tmp_path / "missing.img"), str(out))
    assert r.returncode == 2 and "missing.img" in r.stderr
