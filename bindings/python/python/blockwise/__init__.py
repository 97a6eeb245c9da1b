"""Flash-aligned disk images built in userspace: plan, build and verify from Python.

The functions mirror the ``blockwise`` command line and return what its ``--json`` prints::

    import blockwise
    report = blockwise.build(pathlib.Path("sd.toml"), "sd.img")
    assert blockwise.verify("sd.img")["aligned"]

``spec`` is a dict with the keys of the TOML spec file, a TOML string, or a ``pathlib.Path``
to a spec file (relative ``contents``/``source`` paths are resolved against the spec file's
directory, or against ``base_dir=``/the current directory for dicts and strings).

Errors: :class:`SpecError` (a ``ValueError`` with ``.key``), :class:`CorruptImageError`,
:class:`UnsupportedError`, and ``OSError`` (with ``errno`` and ``filename``) for I/O.
"""

from blockwise._native import (
    CorruptImageError,
    SpecError,
    UnsupportedError,
    build,
    plan,
    verify,
)

__all__ = [
    "CorruptImageError",
    "SpecError",
    "UnsupportedError",
    "build",
    "plan",
    "verify",
]
