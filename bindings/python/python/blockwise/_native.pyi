"""The native extension behind :mod:`blockwise` (see its docstrings)."""

import os
from collections.abc import Callable, Mapping
from typing import Any, Union

_Spec = Union[Mapping[str, Any], str, os.PathLike[str]]
"""A dict with the TOML's keys, a TOML string, or the path of a spec file."""

_StrPath = Union[str, os.PathLike[str]]

__all__ = [
    "CorruptImageError",
    "SpecError",
    "UnsupportedError",
    "build",
    "plan",
    "verify",
]

class SpecError(ValueError):
    """The spec asks for something impossible."""

    key: str
    """The key, e.g. ``partition[2].size`` (``""`` when the error is not about one key)."""

class CorruptImageError(Exception):
    """Neither a partition table nor a filesystem was recognised."""

class UnsupportedError(Exception):
    """The input is valid, but blockwise does not handle it."""

def plan(spec: _Spec, *, base_dir: _StrPath | None = None) -> dict[str, Any]:
    """The aligned layout ``spec`` produces, as ``blockwise plan --json`` prints it."""

def build(
    spec: _Spec,
    out: _StrPath,
    bmap: _StrPath | None = None,
    progress: Callable[[int, int], object] | None = None,
    *,
    base_dir: _StrPath | None = None,
) -> dict[str, Any]:
    """Builds ``spec`` into ``out`` atomically, as ``blockwise build --json`` prints it.

    ``progress(done, total)`` is called with bytes written; an exception it raises cancels
    the build (nothing is left behind) and is re-raised.
    """

def verify(
    path: _StrPath,
    erase_block: int | str | None = None,
    *,
    strict: bool = False,
    sector_size: int | None = None,
) -> dict[str, Any]:
    """Alignment and consistency report, as ``blockwise verify --json`` prints it."""
