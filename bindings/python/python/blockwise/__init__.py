"""Flash-aligned disk images built in userspace: plan, build, verify, write, probe (Python).

The functions mirror the ``blockwise`` command line and return what its ``--json`` prints::

    import blockwise
    report = blockwise.build(pathlib.Path("sd.toml"), "sd.img")
    assert blockwise.verify("sd.img")["aligned"]

``spec`` is a dict with the keys of the TOML spec file, a TOML string, or a ``pathlib.Path``
to a spec file (relative ``contents``/``source`` paths are resolved against the spec file's
directory, or against ``base_dir=``/the current directory for dicts and strings).

``write(source, target)`` flashes an image file, a spec file or a spec dict to a block device
or regular file (``blockwise write --json``); a non-removable disk needs ``yes=True`` and a
partition ``partition_ok=True``. A spec written to a block device is planned for it
(``erase-block = "auto"``, a left-out size: the device's), saying how in ``notes``.

``probe(device)`` says what the kernel knows about a stick or card, the alignment of what is on
it, and the erase block and sector size to put in the spec (``blockwise probe --json``; reads
only).

Errors: :class:`SpecError` (a ``ValueError`` with ``.key``), :class:`CorruptImageError`,
:class:`UnsupportedError`, :class:`UnsafeTargetError` (``write`` refused the target), and
``OSError`` (with ``errno`` and ``filename``) for I/O and device failures.
"""

from blockwise._native import (
    CorruptImageError,
    SpecError,
    UnsafeTargetError,
    UnsupportedError,
    build,
    plan,
    probe,
    verify,
    write,
)

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
