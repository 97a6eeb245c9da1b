"""Flash-aligned disk images built in userspace: plan, build, verify, write, probe (Python)."""

from blockwise._native import CorruptImageError as CorruptImageError
from blockwise._native import SpecError as SpecError
from blockwise._native import UnsafeTargetError as UnsafeTargetError
from blockwise._native import UnsupportedError as UnsupportedError
from blockwise._native import build as build
from blockwise._native import plan as plan
from blockwise._native import probe as probe
from blockwise._native import verify as verify
from blockwise._native import write as write

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
