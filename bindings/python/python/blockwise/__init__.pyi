"""Flash-aligned disk images built in userspace: plan, build and verify from Python."""

from blockwise._native import CorruptImageError as CorruptImageError
from blockwise._native import SpecError as SpecError
from blockwise._native import UnsupportedError as UnsupportedError
from blockwise._native import build as build
from blockwise._native import plan as plan
from blockwise._native import verify as verify

__all__ = [
    "CorruptImageError",
    "SpecError",
    "UnsupportedError",
    "build",
    "plan",
    "verify",
]
