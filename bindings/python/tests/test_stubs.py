"""The stubs match the module (mypy.stubtest) and type-check."""

from __future__ import annotations

import subprocess
import sys

import pytest


def test_stubtest() -> None:
    pytest.importorskip("mypy")
    r = subprocess.run(
        [sys.executable, "-m", "mypy.stubtest", "blockwise"], capture_output=True, text=True
    )
    assert r.returncode == 0, r.stdout + r.stderr
