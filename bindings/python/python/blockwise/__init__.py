"""Flash-aligned disk images built in userspace: plan, build, verify, write and probe.

The functions mirror the ``blockwise`` command line and return exactly what its ``--json``
prints, as dicts typed by :class:`Plan`, :class:`BuildResult`, :class:`Report`,
:class:`WriteResult` and :class:`ProbeResult`::

    import blockwise

    spec = {
        "image": {"size": "2GiB", "erase-block": "4MiB", "table": "mbr"},
        "partition": [
            {"fs": "fat32", "size": "256MiB", "label": "BOOT", "contents": "boot/"},
            {"fs": "ext4", "size": "fill", "label": "rootfs", "contents": "rootfs/"},
        ],
    }
    plan = blockwise.plan(spec)                      # nothing written
    built = blockwise.build(spec, "sd.img", "sd.img.bmap")
    assert blockwise.verify("sd.img")["aligned"]
    blockwise.write("sd.img", "/dev/sdb")            # refuses mounted, system, fixed disks

**Specs.** ``spec`` is a dict with the keys of the TOML spec file (``os.PathLike`` values
are paths), a ``str``/``os.PathLike`` naming a spec file (relative ``contents`` and ``source``
paths resolve against its directory), or TOML text wrapped in :class:`Spec`
(``blockwise.Spec.from_toml(text)``). A ``str`` is always a path (an old call passing TOML
text as a ``str`` still works when the text has a line break, with a ``DeprecationWarning``).
``write`` recognises a spec file by its content, whatever its name.

**Progress and cancelling.** ``progress(phase, done, total)`` is called at most every 50 ms
with the phase (``"scan"``: entries, ``total`` ``None``; ``"write"``, ``"hash"``,
``"verify"``: bytes), from the calling thread. ``cancel=`` takes a ``threading.Event``:
setting it (from any thread) stops the operation within 50 ms of its current phase with
:class:`CancelledError`. Ctrl-C raises ``KeyboardInterrupt`` in the main thread and stops
every operation running in other threads too (``ThreadPoolExecutor`` builds). A build leaves
nothing behind; SIGTERM and SIGHUP stop running operations, which clean up, before the
process ends by the signal as it would have. The GIL is released while working.

**Errors.** Every exception blockwise defines derives from :class:`Error` and a builtin:
:class:`SpecError` (``ValueError``, ``.key``), :class:`UnsafeTargetError`
(``PermissionError``), :class:`CorruptImageError` (``ValueError``),
:class:`UnsupportedError` (``NotImplementedError``), :class:`CancelledError`. Failures of the
OS are the builtin ``OSError`` subclass of their errno (``FileNotFoundError``,
``IsADirectoryError``, …) with ``errno``, ``strerror`` and the path you gave as ``filename``.
Warnings are :class:`BlockwiseWarning` and are also listed in results.

``python -m blockwise`` is a small command line over this API (``plan``, ``build``,
``verify``, ``write``, ``probe``).
"""

from blockwise._errors import (
    BlockwiseWarning,
    CancelledError,
    CorruptImageError,
    Error,
    SpecError,
    UnsafeTargetError,
    UnsupportedError,
)
from blockwise._native import __version__, build, plan, probe, verify, write
from blockwise._spec import Spec
from blockwise._types import (
    BootCode,
    BuildResult,
    ChunkSpeeds,
    ContainerRead,
    EraseBlockSource,
    ContainerSummary,
    DeviceHints,
    Estimate,
    EstimateSize,
    ExfatFilesystem,
    Ext4Filesystem,
    Extended,
    F2fsFilesystem,
    FatFilesystem,
    Filesystem,
    Finding,
    GptLocations,
    KernelPartition,
    OtherFilesystem,
    Partition,
    Plan,
    ProbeResult,
    RawWrite,
    Recommendation,
    Region,
    Report,
    SlotGroup,
    SlotMember,
    Table,
    WriteResult,
)

__all__ = [
    "__version__",
    "BlockwiseWarning",
    "BuildResult",
    "CancelledError",
    "ChunkSpeeds",
    "ContainerRead",
    "EraseBlockSource",
    "ContainerSummary",
    "CorruptImageError",
    "DeviceHints",
    "Error",
    "Estimate",
    "EstimateSize",
    "ExfatFilesystem",
    "Ext4Filesystem",
    "Extended",
    "F2fsFilesystem",
    "FatFilesystem",
    "Filesystem",
    "Finding",
    "GptLocations",
    "KernelPartition",
    "OtherFilesystem",
    "Partition",
    "Plan",
    "ProbeResult",
    "RawWrite",
    "Recommendation",
    "Region",
    "Report",
    "SlotGroup",
    "SlotMember",
    "Spec",
    "SpecError",
    "Table",
    "BootCode",
    "UnsafeTargetError",
    "UnsupportedError",
    "WriteResult",
    "build",
    "plan",
    "probe",
    "verify",
    "write",
]
