"""The PEP 517 build backend of blockwise: maturin's hooks, after a check for cargo.

Without a Rust toolchain maturin would download rustup into a temporary directory (and fail
with a long traceback where the network or the platform does not allow it). Building
blockwise from source needs cargo; without it every hook stops with one line saying so.
"""

from __future__ import annotations

import os
import shutil
import sys
from typing import Any, Mapping, Optional

import maturin

MESSAGE = (
    "blockwise: building from source needs Rust's cargo (1.85 or newer) on PATH: install it "
    "from your package manager or https://rustup.rs, or install a prebuilt wheel "
    "(pip install --only-binary=:all: blockwise)"
)


def _need_cargo() -> None:
    cargo = os.environ.get("CARGO") or shutil.which("cargo")
    if cargo is None or not os.access(cargo, os.X_OK):
        # SystemExit with a message: printed as one line on stderr, exit status 1, no
        # traceback (pip shows it in its "subprocess-exited-with-error" box).
        raise SystemExit(MESSAGE)


def get_requires_for_build_wheel(config_settings: Optional[Mapping[str, Any]] = None) -> list[str]:
    _need_cargo()
    return maturin.get_requires_for_build_wheel(config_settings)


def get_requires_for_build_editable(
    config_settings: Optional[Mapping[str, Any]] = None,
) -> list[str]:
    _need_cargo()
    return maturin.get_requires_for_build_editable(config_settings)


def get_requires_for_build_sdist(config_settings: Optional[Mapping[str, Any]] = None) -> list[str]:
    _need_cargo()
    return maturin.get_requires_for_build_sdist(config_settings)


def prepare_metadata_for_build_wheel(
    metadata_directory: str, config_settings: Optional[Mapping[str, Any]] = None
) -> str:
    _need_cargo()
    return maturin.prepare_metadata_for_build_wheel(metadata_directory, config_settings)


def build_wheel(
    wheel_directory: str,
    config_settings: Optional[Mapping[str, Any]] = None,
    metadata_directory: Optional[str] = None,
) -> str:
    _need_cargo()
    return maturin.build_wheel(wheel_directory, config_settings, metadata_directory)


def build_editable(
    wheel_directory: str,
    config_settings: Optional[Mapping[str, Any]] = None,
    metadata_directory: Optional[str] = None,
) -> str:
    _need_cargo()
    return maturin.build_editable(wheel_directory, config_settings, metadata_directory)


def build_sdist(sdist_directory: str, config_settings: Optional[Mapping[str, Any]] = None) -> str:
    _need_cargo()
    return maturin.build_sdist(sdist_directory, config_settings)


if sys.version_info < (3, 9):  # pragma: no cover - requires-python keeps this out
    raise SystemExit("blockwise needs Python 3.9 or newer")
