"""Packaging and the command line's edges (issue 31): --version, a closed pipe, the build
backend without cargo, the licence texts."""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys
import tempfile

import pytest

import blockwise

HERE = pathlib.Path(__file__).resolve().parents[1]
ROOT = HERE.parents[1]


def test_version() -> None:
    r = subprocess.run([sys.executable, "-m", "blockwise", "--version"], capture_output=True,
                       text=True)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == f"blockwise {blockwise.__version__} (Python)"
    assert blockwise.__version__.count(".") == 2


def test_a_closed_pipe_is_quiet() -> None:
    """The reader goes away before the output is written (`| head -1` of a slow command):
    no BrokenPipeError traceback, exit 0."""
    child = subprocess.Popen(
        [sys.executable, "-m", "blockwise", "plan", "--size", "8GiB", "--partition",
         "fat32:256MiB", "--partition", "ext4:fill", "--json"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )
    assert child.stdout is not None and child.stderr is not None
    child.stdout.close()  # before the child has started: its write gets EPIPE
    err = child.stderr.read().decode()
    assert child.wait(60) == 0, err
    assert "Traceback" not in err and "BrokenPipe" not in err, err


def test_the_build_backend_without_cargo() -> None:
    """Building from source without cargo: one line saying so, exit 1, no traceback (and no
    rustup download)."""
    # pip installs the backend's requirement (maturin) before it calls the backend.
    pytest.importorskip("maturin", reason="the build backend runs where maturin is installed")
    env = {k: v for k, v in os.environ.items() if k not in ("CARGO", "RUSTUP_HOME")}
    env["PATH"] = os.pathsep.join(
        d for d in ("/usr/local/sbin", "/usr/local/bin", "/usr/sbin", "/usr/bin", "/sbin", "/bin")
        if not os.path.exists(os.path.join(d, "cargo"))
    )
    code = (
        "import sys; sys.path.insert(0, 'build_backend'); import blockwise_build; "
        "blockwise_build.build_wheel(sys.argv[1])"
    )
    with tempfile.TemporaryDirectory() as out:
        r = subprocess.run([sys.executable, "-c", code, out], cwd=HERE, env=env,
                           capture_output=True, text=True)
        assert os.listdir(out) == []
    assert r.returncode == 1, r.stdout + r.stderr
    assert r.stderr.count("\n") == 1 and "needs Rust's cargo" in r.stderr, r.stderr
    assert "Traceback" not in r.stderr


def test_licence_texts() -> None:
    for name in ("LICENSE-MIT", "LICENSE-APACHE"):
        root = (ROOT / name).read_text()
        assert (HERE / name).read_text() == root  # the package's are the repository's
    assert "Permission is hereby granted" in (ROOT / "LICENSE-MIT").read_text()
    assert "Apache License" in (ROOT / "LICENSE-APACHE").read_text()
