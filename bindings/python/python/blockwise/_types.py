"""The shapes of blockwise's results, as ``TypedDict`` classes.

Every function returns a plain ``dict`` (exactly what the ``blockwise`` command line prints
with ``--json``); these classes let a type checker know its keys, so that
``plan["partitoins"]`` is an error under ``mypy --strict``. Keys that are only present
sometimes (the CLI leaves them out when empty) are marked as not required.

A partition's ``filesystem`` is one of :class:`FatFilesystem`, :class:`Ext4Filesystem`,
:class:`ExfatFilesystem`, :class:`F2fsFilesystem` and :class:`OtherFilesystem`; its ``kind``
says which. Narrow with
``typing.cast`` after checking ``kind``::

    fs = part["filesystem"]
    if fs is not None and fs["kind"] in ("fat12", "fat16", "fat32"):
        fat = cast(blockwise.FatFilesystem, fs)
        print(fat["cluster_bytes"])
"""

from __future__ import annotations

from typing import List, Literal, Optional, TypedDict, Union

__all__ = [
    "BuildResult",
    "ChunkSpeeds",
    "ContainerRead",
    "ContainerSummary",
    "DeviceHints",
    "EraseBlockSource",
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
    "Table",
    "BootCode",
    "WriteResult",
]


class BootCode(TypedDict):
    """Boot code in sector 0 (``image.boot-code``): the bytes up to the last non-zero one and
    their CRC-32 (8 hex digits)."""

    bytes: int
    crc32: str


class _Table(TypedDict):
    kind: Literal["mbr", "gpt", "none"]
    disk_id: Optional[str]


class Table(_Table, total=False):
    """The partition table: its kind and the disk ID (MBR signature ``0x…`` or GPT GUID);
    ``boot_code`` only when sector 0 holds some."""

    boot_code: BootCode


class GptLocations(TypedDict):
    """Where the GPT structures are, in logical sectors."""

    entry_sectors: int
    first_usable_lba: int
    last_usable_lba: int
    backup_entries_lba: int
    backup_header_lba: int


class Extended(TypedDict):
    """The MBR extended partition (more than four partitions)."""

    start_bytes: int
    size_bytes: int


class RawWrite(TypedDict):
    """A ``[[raw]]`` write outside the partitions (a bootloader at a fixed offset)."""

    offset_bytes: int
    size_bytes: int
    source: str


class _FatFilesystem(TypedDict):
    kind: Literal["fat12", "fat16", "fat32"]
    label: Optional[str]
    sector_bytes: int
    cluster_bytes: int
    reserved_sectors: int
    fat_count: int
    fat_sectors: int
    cluster_count: int
    fat_start_bytes: int
    data_start_bytes: int
    volume_id: int
    aligned: bool


class FatFilesystem(_FatFilesystem, total=False):
    """A FAT12/16/32 filesystem: every ``*_bytes`` offset is absolute from the start of the
    disk; ``aligned`` says that its first FAT and data area start on the erase block;
    ``bootloader`` (``"syslinux"``) only when one is installed (``fat.bootloader``)."""

    notes: List[str]
    bootloader: str


class _Ext4Filesystem(TypedDict):
    kind: Literal["ext2", "ext3", "ext4"]
    label: Optional[str]
    uuid: Optional[str]
    block_bytes: int
    blocks: int
    inodes: int
    stride: int
    stripe_width: int
    journal_start_bytes: Optional[int]
    inode_table_start_bytes: Optional[int]
    features: List[str]
    aligned: bool


class Ext4Filesystem(_Ext4Filesystem, total=False):
    """An ext2/3/4 filesystem (``features`` as mke2fs names them)."""

    notes: List[str]


class _ExfatFilesystem(TypedDict):
    kind: Literal["exfat"]
    label: Optional[str]
    sector_bytes: int
    cluster_bytes: int
    volume_sectors: int
    fat_start_bytes: int
    fat_sectors: int
    fat_count: int
    heap_start_bytes: int
    cluster_count: int
    root_cluster: int
    volume_serial: int
    volume_guid: Optional[str]
    aligned: bool


class ExfatFilesystem(_ExfatFilesystem, total=False):
    """An exFAT filesystem (``boundary_bytes``: the boundary unit its FAT and cluster heap are
    aligned to, when it is not the erase block)."""

    boundary_bytes: int
    notes: List[str]


class _F2fsFilesystem(TypedDict):
    kind: Literal["f2fs"]
    label: Optional[str]
    uuid: Optional[str]
    block_bytes: int
    blocks: int
    segment_bytes: int
    segments_per_section: int
    sections_per_zone: int
    section_bytes: int
    zone_bytes: int
    segments: int
    main_segments: int
    segment0_start_bytes: int
    main_start_bytes: int
    aligned: bool


class F2fsFilesystem(_F2fsFilesystem, total=False):
    """An F2FS filesystem: ``aligned`` says that a section is a whole number of erase blocks
    and that segment0 and the main area start on the erase block."""

    notes: List[str]


class _OtherFilesystem(TypedDict):
    kind: str
    aligned: Optional[bool]


class OtherFilesystem(_OtherFilesystem, total=False):
    """Something only named (``raw``, ``swap``, ``squashfs``, ``ntfs``, ``btrfs``, ``xfs``,
    ``iso9660``, ``luks``, …); ``aligned`` is ``None`` when its internals were not checked.
    What the format's header says is present when known."""

    version: str
    label: str
    uuid: str
    size_bytes: int
    block_bytes: int
    data_start_bytes: int
    stripe_unit_bytes: int
    stripe_width_bytes: int


Filesystem = Union[
    FatFilesystem, Ext4Filesystem, ExfatFilesystem, F2fsFilesystem, OtherFilesystem
]
"""A partition's filesystem; ``kind`` says which of the five."""


class SlotMember(TypedDict):
    """One A/B slot of a :class:`SlotGroup`: the slot (``"a"``), its partition number and
    start."""

    slot: str
    index: int
    start_bytes: int


class SlotGroup(TypedDict):
    """Partitions that are A/B slots of one another (``system_a``, ``system_b``): the name
    without the suffix and the members in disk order."""

    name: str
    partitions: List[SlotMember]


class _Partition(TypedDict):
    index: int
    start_bytes: int
    size_bytes: int
    type: str
    name: Optional[str]
    bootable: bool
    content: str
    logical: bool
    aligned: bool
    alignment_bytes: int
    filesystem: Optional[Filesystem]


class Partition(_Partition, total=False):
    """One partition (a bare filesystem is partition 0 at offset 0). ``type`` is the MBR byte
    (``0x0c``) or the GPT type GUID; ``alignment_bytes`` the largest power of two dividing
    the start. ``in_table`` is present (``False``) only for a partition outside the table;
    ``attributes`` (GPT attribute bits by name, ``"read-only"``, or number) only when some
    are set; ``slot`` (``"a"``) only for an A/B slot; ``checked`` (``False``) only for
    contents whose layout is not checked (swap, raw bytes, formats verify only names);
    ``mbr_type`` (``"0x0c"``) only for a GPT partition mirrored into a hybrid MBR."""

    guid: str
    mbr_type: str
    ebr_bytes: int
    in_table: bool
    attributes: List[Union[str, int]]
    slot: str
    checked: bool


class Finding(TypedDict):
    """Something verify finds (and plan predicts): a stable ``code``
    (``partition-not-erase-aligned``, ``gpt-backup-missing``, …), the partition number it
    concerns (``None`` for the disk) and what to do."""

    severity: Literal["error", "warning", "info"]
    code: str
    partition: Optional[int]
    message: str


class _Plan(TypedDict):
    source: str
    size_bytes: int
    sector_bytes: int
    erase_block_bytes: int
    table: Table
    partitions: List[Partition]
    aligned: bool
    findings: List[Finding]
    #: The seed every derived ID comes from, as a ``0x`` string (``image.seed`` takes it back).
    seed: str


class Plan(_Plan, total=False):
    """What :func:`blockwise.plan` returns (``blockwise plan --json``): the layout in the
    shape of a :class:`Report`, with the findings verify will give the built image."""

    extended: Extended
    gpt: GptLocations
    notes: List[str]
    raw: List[RawWrite]
    slots: List[SlotGroup]


class ContainerSummary(TypedDict):
    """What a container output holds (``BuildResult["container"]``, present for ``simg``,
    ``zst`` and ``xz``): ``units`` (sparse chunks or zstd/xz frames), ``data_bytes`` (image
    bytes stored as data), ``fill_bytes`` (stored as a fill or an all-zero frame) and
    ``dont_care_bytes`` (holes left out)."""

    units: int
    data_bytes: int
    fill_bytes: int
    dont_care_bytes: int


class _BuildResult(Plan):
    output: str
    data_bytes: int
    metadata_bytes: int
    content_bytes: int
    kernel_copied_bytes: int
    warnings: List[str]
    format: Literal["raw", "simg", "zst", "xz"]
    output_bytes: int


class BuildResult(_BuildResult, total=False):
    """What :func:`blockwise.build` returns (``blockwise build --json``): the plan of the
    image plus what was written: ``format``, ``output_bytes`` (the file's size) and, for a
    container format, ``container``. ``warnings`` are also issued as
    :class:`blockwise.BlockwiseWarning`."""

    container: ContainerSummary


class DeviceHints(TypedDict):
    """A block device's sysfs queue limits, when the verified source is one."""

    logical_block_bytes: Optional[int]
    physical_block_bytes: Optional[int]
    minimum_io_bytes: Optional[int]
    optimal_io_bytes: Optional[int]
    preferred_erase_bytes: Optional[int]


class Region(TypedDict):
    """Data found outside the partitions (``bootloader area``, ``untabled ext4``, …)."""

    start_bytes: int
    size_bytes: int
    kind: str


class _ContainerRead(TypedDict):
    kind: Literal["android-sparse", "xz", "gzip", "zstd", "bzip2", "lz4", "zip"]
    seekable: bool
    container_bytes: int
    bytes_read: int


class ContainerRead(_ContainerRead, total=False):
    """The container a verified image was read through (``Report["container"]``): its
    ``kind``, whether it is ``seekable`` (any part decodes without the ones before it),
    ``container_bytes`` (the file's size), ``bytes_read`` (of it), the zip ``entry`` verified
    and the forward ``passes`` over a stream (left out when 0)."""

    entry: str
    passes: int


#: Which erase block verify checked against and why (``Report["erase_block_source"]``):
#: ``from`` is ``ext4-stride``, ``ext4-stripe-width``, ``partition-starts`` or ``default``;
#: ``partition`` the one whose filesystem declared it; ``message`` which and why, in words.
#: (The functional form: ``from`` is a Python keyword.)
EraseBlockSource = TypedDict(
    "EraseBlockSource", {"from": str, "partition": int, "message": str}, total=False
)


class _Report(TypedDict):
    source: str
    size_bytes: int
    sector_bytes: int
    erase_block_bytes: int
    table: Table
    partitions: List[Partition]
    findings: List[Finding]
    aligned: bool


class Report(_Report, total=False):
    """What :func:`blockwise.verify` returns (``blockwise verify --json``); ``container``
    when the image was read through one (the rest is the decoded image's report)."""

    container: ContainerRead
    device: DeviceHints
    erase_block_source: EraseBlockSource
    extended: Extended
    gpt: GptLocations
    regions: List[Region]
    slots: List[SlotGroup]


class ChunkSpeeds(TypedDict):
    """Write speed of the chunks, MB/s."""

    min: float
    median: float
    max: float


class WriteResult(TypedDict):
    """What :func:`blockwise.write` returns (``blockwise write --json``, plus ``warnings``).

    ``verify_mb_per_s`` is ``None`` without a read-back; ``notes`` starts with where a spec
    written to a device took its erase block, size and sector size from."""

    source: str
    target: str
    image_bytes: int
    mapped_bytes: int
    bytes_written: int
    offset_reached: int
    seconds: float
    mb_per_s: float
    chunk_mb_per_s: ChunkSpeeds
    fsync_seconds: float
    verified: bool
    verify_mb_per_s: Optional[float]
    direct: bool
    interrupted: bool
    interrupted_verifying: bool
    verified_bytes: int
    notes: List[str]
    warnings: List[str]


class KernelPartition(TypedDict):
    """A partition the kernel knows on the probed device."""

    name: str
    number: int
    start_bytes: int
    size_bytes: int


class EstimateSize(TypedDict):
    """The read-timing effect of one candidate erase-block size."""

    size_bytes: int
    boundaries: int
    straddle_ns: int
    control_ns: int
    effect_ns: int
    slower_fraction: float
    clear: bool


class Estimate(TypedDict):
    """The erase block estimated from read timing."""

    erase_block_bytes: Optional[int]
    confidence: float
    confidence_label: Literal["high", "medium", "low", "none"]
    summary: str
    reads: int
    rounds: int
    measured_seconds: float
    sizes: List[EstimateSize]


class Recommendation(TypedDict):
    """The erase block and sector size to put in the spec, where they came from, and
    ``spec``, the lines for ``[image]``."""

    erase_block_bytes: int
    erase_block_source: Literal["sysfs", "estimate", "default"]
    erase_block_from: Optional[str]
    erase_block_reason: str
    sector_bytes: int
    sector_reason: str
    spec: str


class ProbeResult(TypedDict):
    """What :func:`blockwise.probe` returns (``blockwise probe --json``)."""

    device: str
    name: str
    disk: str
    dev: str
    sysfs: str
    partition_start_bytes: Optional[int]
    size_bytes: int
    logical_block_bytes: int
    physical_block_bytes: int
    minimum_io_bytes: int
    optimal_io_bytes: Optional[int]
    optimal_io_raw: int
    discard_granularity_bytes: int
    discard_max_bytes: int
    preferred_erase_bytes: Optional[int]
    alignment_offset_bytes: int
    removable: bool
    rotational: bool
    read_only: bool
    vendor: str
    model: str
    serial: str
    transport: str
    device_type: str
    kernel_partitions: List[KernelPartition]
    layout: Optional[Report]
    layout_note: Optional[str]
    estimate: Optional[Estimate]
    estimate_skipped: Optional[str]
    recommendation: Recommendation
    notes: List[str]
