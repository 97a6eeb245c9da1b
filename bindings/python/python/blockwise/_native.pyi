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
    "UnsafeTargetError",
    "UnsupportedError",
    "build",
    "plan",
    "probe",
    "verify",
    "write",
]

class SpecError(ValueError):
    """The spec asks for something impossible."""

    key: str
    """The key, e.g. ``partition[2].size`` (``""`` when the error is not about one key)."""

class CorruptImageError(Exception):
    """Neither a partition table nor a filesystem was recognised."""

class UnsupportedError(Exception):
    """The input is valid, but blockwise does not handle it."""

class UnsafeTargetError(Exception):
    """``write`` refused the target before writing anything (mounted, swap, held, read-only,
    the running system, a partition without ``partition_ok=True``, a non-removable disk
    without ``yes=True``, too small, busy, neither a block device nor a regular file, a
    missing device under /dev, or one of the write's own inputs); or ``build`` refused an
    output that is one of its inputs or its other output."""

def plan(spec: _Spec, *, base_dir: _StrPath | None = None) -> dict[str, Any]:
    """The aligned layout ``spec`` produces, as ``blockwise plan --json`` prints it."""

def build(
    spec: _Spec,
    out: _StrPath,
    bmap: _StrPath | None = None,
    progress: Callable[[int, int], object] | None = None,
    *,
    base_dir: _StrPath | None = None,
    format: str | None = None,
    level: int | None = None,
) -> dict[str, Any]:
    """Builds ``spec`` into ``out`` atomically, as ``blockwise build --json`` prints it.

    ``out``'s name picks the format (``.simg``/``.sparse`` Android sparse, ``.zst`` seekable
    zstd, ``.xz`` xz, anything else raw) unless ``format`` (``"raw"``, ``"simg"``, ``"zst"``,
    ``"xz"``) says; ``level`` is the zstd (1-22) or xz (0-9) level. ``bmap`` maps the raw
    image whatever the format. ``progress(done, total)`` is called with bytes written; an
    exception it raises cancels the build (nothing is left behind) and is re-raised.
    """

def verify(
    path: _StrPath,
    erase_block: int | str | None = None,
    *,
    strict: bool = False,
    sector_size: int | None = None,
) -> dict[str, Any]:
    """Alignment and consistency report, as ``blockwise verify --json`` prints it.

    Without ``erase_block``, the erase block the image declares (``erase_block_source``)."""

def write(
    source: Union[Mapping[str, Any], _StrPath],
    target: _StrPath,
    verify: bool = True,
    progress: Callable[[int, int], object] | None = None,
    *,
    yes: bool = False,
    partition_ok: bool = False,
    bmap: _StrPath | None = None,
    chunk: int | str | None = None,
    zero_holes: bool = False,
    discard: bool = False,
    direct: bool = False,
    base_dir: _StrPath | None = None,
    raw: bool = False,
) -> dict[str, Any]:
    """Writes an image file (raw; .xz, .gz, .zst, .bz2, .lz4, .zip or Android sparse, known by
    its bytes; a block device copied whole), a spec file (``.toml``) or a spec dict to a block
    device or regular file, as ``blockwise write --json`` prints it. Formats that cannot be
    written as they are (tar, qcow2, VMDK, VHD, ...) raise ``UnsupportedError`` naming them;
    so do bytes that are no disk image, unless ``raw=True``.

    A spec written to a block device is planned for it as ``blockwise write SPEC DEVICE``
    does: ``image.erase-block``/``image.sector-size`` that are ``"auto"`` or left out take the
    device's values and a left-out ``image.size`` is its size (a dict's ``None`` values count
    as left out); the lines the CLI prints about it come first in ``notes``. To a regular
    file the spec is used as written (``"auto"`` raises :class:`SpecError`).

    ``progress(done, total)`` is called with bytes written; an exception it raises (or
    Ctrl-C) stops the write after the current chunk, with block 0 unwritten, and is
    re-raised.
    """

def probe(
    device: _StrPath,
    *,
    estimate: bool = True,
    estimate_seconds: float = 2.0,
) -> dict[str, Any]:
    """What the kernel knows about a block device, its layout (the verify analysis, read-only),
    an erase-block estimate from read timing when the kernel gives none, and the spec values
    to use, as ``blockwise probe --json`` prints it (``--no-estimate`` when ``estimate`` is
    false). Reads only.

    Raises ``FileNotFoundError`` for a missing path, ``OSError`` (``errno.ENOTBLK``) for
    anything but a block device, and :class:`SpecError` (key ``estimate_seconds``) unless
    ``0 <= estimate_seconds <= 600``.
    """
