"""The native extension behind :mod:`blockwise` (see its docstrings)."""

import os
import threading
from collections.abc import Callable, Mapping
from typing import Any, Optional, Union

from blockwise._errors import BlockwiseWarning as BlockwiseWarning
from blockwise._errors import CancelledError as CancelledError
from blockwise._errors import CorruptImageError as CorruptImageError
from blockwise._errors import Error as Error
from blockwise._errors import SpecError as SpecError
from blockwise._errors import UnsafeTargetError as UnsafeTargetError
from blockwise._errors import UnsupportedError as UnsupportedError
from blockwise._spec import Spec as Spec
from blockwise._types import BuildResult, Plan, ProbeResult, Report, WriteResult

_StrPath = Union[str, os.PathLike[str]]
"""A path: a ``str`` or any ``os.PathLike`` (``pathlib.Path``)."""

_Spec = Union[Mapping[str, Any], _StrPath, Spec]
"""A dict with the TOML's keys, the path of a spec file, or TOML text in a ``Spec``."""

_Progress = Callable[[str, int, Optional[int]], object]
"""``progress(phase, done, total)``: ``"scan"`` (entries, ``total`` ``None``), ``"write"``,
``"hash"``, ``"verify"`` (bytes)."""

__version__: str

__all__ = [
    "BlockwiseWarning",
    "CancelledError",
    "CorruptImageError",
    "Error",
    "Spec",
    "SpecError",
    "UnsafeTargetError",
    "UnsupportedError",
    "build",
    "plan",
    "probe",
    "verify",
    "write",
]

def plan(
    spec: _Spec,
    *,
    base_dir: Optional[_StrPath] = None,
    progress: Optional[_Progress] = None,
    cancel: Optional[threading.Event] = None,
) -> Plan: ...
def build(
    spec: _Spec,
    out: _StrPath,
    bmap: Optional[_StrPath] = None,
    progress: Optional[_Progress] = None,
    *,
    base_dir: Optional[_StrPath] = None,
    cancel: Optional[threading.Event] = None,
    format: Optional[str] = None,
    level: Optional[int] = None,
) -> BuildResult: ...
def verify(
    path: _StrPath,
    erase_block: Union[int, str, None] = None,
    *,
    strict: bool = False,
    sector_size: Optional[int] = None,
    cancel: Optional[threading.Event] = None,
) -> Report: ...
def write(
    source: _Spec,
    target: _StrPath,
    verify: bool = True,
    progress: Optional[_Progress] = None,
    *,
    yes: bool = False,
    partition_ok: bool = False,
    bmap: Optional[_StrPath] = None,
    chunk: Union[int, str, None] = None,
    zero_holes: bool = False,
    discard: bool = False,
    direct: bool = False,
    base_dir: Optional[_StrPath] = None,
    raw: bool = False,
    cancel: Optional[threading.Event] = None,
) -> WriteResult: ...
def probe(
    device: _StrPath,
    *,
    estimate: bool = True,
    estimate_seconds: float = 2.0,
    cancel: Optional[threading.Event] = None,
) -> ProbeResult: ...
