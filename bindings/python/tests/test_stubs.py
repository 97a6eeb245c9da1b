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


@pytest.mark.parametrize("name", ["plan", "build", "verify", "write", "probe"])
def test_docstrings_name_every_argument(name: str) -> None:
    """help() shows arguments, return shape, exceptions and an example; every parameter of
    the signature is described."""
    import inspect

    import blockwise

    f = getattr(blockwise, name)
    doc = f.__doc__ or ""
    for section in ("Args:", "Returns:", "Raises:", "Example"):
        assert section in doc, f"{name}: no {section}"
    args = doc.split("Args:", 1)[1].split("Returns:", 1)[0]
    for p in inspect.signature(f).parameters:
        assert f"{p}:" in args, f"{name}: argument {p} is not described"
