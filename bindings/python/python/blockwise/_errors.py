"""The exceptions and the warning category of :mod:`blockwise`.

Every exception blockwise defines derives from :class:`Error` and from the builtin exception
a caller would catch without knowing blockwise: a bad spec is a ``ValueError``, a refused
target a ``PermissionError``, and so on. Failures of the operating system (a missing file,
a full disk, a device that fails mid-write) are the builtin ``OSError`` subclass that
matches the errno (``FileNotFoundError``, ``IsADirectoryError``, ``PermissionError``, …),
with ``errno``, ``strerror`` and ``filename`` set to the path the caller gave.
"""

from __future__ import annotations

from typing import Optional

__all__ = [
    "BlockwiseWarning",
    "CancelledError",
    "CorruptImageError",
    "Error",
    "SpecError",
    "UnsafeTargetError",
    "UnsupportedError",
]


class Error(Exception):
    """The base class of every exception blockwise defines.

    ``except blockwise.Error`` catches a bad spec, an unrecognised image, an unsupported
    feature, a refused target and a cancelled operation, but not the ``OSError`` of a failed
    read or write (catch ``OSError`` for those).
    """


class SpecError(Error, ValueError):
    """The spec (or an argument) asks for something impossible.

    ``key`` names what is wrong as the spec spells it: ``partition[2].size``,
    ``image.erase-block``, or an argument's name (``chunk``, ``erase_block``); ``""`` when the
    error is not about one key. The message starts with the key and says why and what to do.
    """

    key: str = ""
    """The key, e.g. ``partition[2].size`` (``""`` when the error is not about one key)."""


class UnsafeTargetError(Error, PermissionError):
    """``write`` refused its target before writing anything, or ``build`` refused an output.

    A block device is refused when it (or one of its partitions) is mounted, holds the running
    system, is swap, is held by device mapper, md or LVM, is read-only, is too small, is busy,
    or is a partition without ``partition_ok=True``; a non-removable disk without ``yes=True``;
    any target that is one of the write's own inputs (the source through a link, its bmap, a
    file of the spec, the loop device backed by the source), a missing node under ``/dev``, or
    neither a block device nor a regular file. ``build`` refuses an ``out`` or ``bmap`` that is
    one of its inputs or the other output.

    ``filename`` is the refused path, ``strerror`` the reason, ``errno`` ``EPERM``;
    ``str(e)`` is the whole message.
    """

    def __str__(self) -> str:
        message: Optional[str] = getattr(self, "message", None)
        if message is not None:
            return message
        return super().__str__()


class CorruptImageError(Error, ValueError):
    """The bytes are not what they should be: ``verify`` recognised neither a partition table
    nor a filesystem, or ``write`` met an unusable bmap, a bmap checksum mismatch or a
    truncated compressed image.

    ``filename`` is the image (or bmap) concerned.
    """

    filename: Optional[str] = None
    """The file concerned."""


class UnsupportedError(Error, NotImplementedError):
    """The input is valid, but blockwise does not handle it (an ext4 feature the native writer
    lacks, a format it names but cannot read). The message names the partition or file."""


class CancelledError(Error):
    """The operation was stopped through its ``cancel`` event.

    A build leaves nothing behind (no output, no temp file; an existing output is untouched);
    a write stops after the chunk in flight with block 0 unwritten, or, during the read-back,
    after the read in flight (the image was written in full but not verified). Ctrl-C raises
    ``KeyboardInterrupt`` instead, after the same clean-up.
    """


class BlockwiseWarning(UserWarning):
    """Something worth knowing that did not stop the operation: a build's own output left out
    of its contents, O_DIRECT refused by a filesystem, a spec sector size other than the
    device's. Every warning is issued with :func:`warnings.warn` and also listed in the
    result's ``warnings``."""
