//! Errors of the partition-table builders and parsers.

use core::fmt;

use blockwise_geometry::TableKind;

/// Which GPT copy.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Which {
    /// The primary header at LBA 1 and its entries.
    Primary,
    /// The backup header at the last LBA and its entries.
    Backup,
}

impl fmt::Display for Which {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Which::Primary => "primary",
            Which::Backup => "backup",
        })
    }
}

/// The bytes of a table are wrong. Every variant names the field and, where it has one, the
/// byte offset on the disk.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Corrupt {
    /// The source is shorter than the structure.
    #[error("{what} at byte {offset} needs {needed} bytes but the source ends at {len}")]
    Truncated {
        /// Structure.
        what: &'static str,
        /// Where it starts.
        offset: u64,
        /// Bytes needed.
        needed: u64,
        /// Source length.
        len: u64,
    },
    /// No `55 AA` at byte 510 of an MBR or EBR.
    #[error(
        "{what} at byte {offset} has no 55 AA boot signature (found {found:02x} {found2:02x})"
    )]
    BootSignature {
        /// `MBR` or `EBR`.
        what: &'static str,
        /// Sector offset.
        offset: u64,
        /// Byte 510.
        found: u8,
        /// Byte 511.
        found2: u8,
    },
    /// An entry's status byte is neither 0x00 nor 0x80.
    #[error("MBR entry {slot} status byte (offset {offset}) is 0x{value:02x}; only 0x00 and 0x80 are valid")]
    Status {
        /// Entry 1–4.
        slot: u8,
        /// Byte offset of the field.
        offset: u64,
        /// Value found.
        value: u8,
    },
    /// The EBR chain revisits or goes backwards.
    #[error("EBR chain loops or goes backwards at LBA {lba} (after LBA {previous})")]
    EbrLoop {
        /// The offending EBR.
        lba: u64,
        /// The EBR before it.
        previous: u64,
    },
    /// The EBR chain is longer than any sane table.
    #[error("EBR chain has more than {max} links; stopped")]
    EbrChainTooLong {
        /// The bound.
        max: usize,
    },
    /// An EBR lies outside the extended partition or the disk.
    #[error("EBR at LBA {lba} lies outside the extended partition or the disk")]
    EbrOutside {
        /// Its LBA.
        lba: u64,
    },
    /// No `EFI PART` signature.
    #[error("{copy} GPT header at byte {offset}: no \"EFI PART\" signature")]
    GptSignature {
        /// Which copy.
        copy: Which,
        /// Byte offset.
        offset: u64,
    },
    /// Header size field out of range.
    #[error(
        "{copy} GPT header: header size {value} (offset {offset}) must be 92 to the sector size"
    )]
    GptHeaderSize {
        /// Which copy.
        copy: Which,
        /// Field offset.
        offset: u64,
        /// Value.
        value: u32,
    },
    /// Header CRC mismatch.
    #[error("{copy} GPT header CRC32 (offset {offset}) is {stored:08x}, computed {computed:08x}")]
    GptHeaderCrc {
        /// Which copy.
        copy: Which,
        /// Field offset.
        offset: u64,
        /// Stored.
        stored: u32,
        /// Computed.
        computed: u32,
    },
    /// MyLBA does not match where the header was read.
    #[error("{copy} GPT header says it lives at LBA {my_lba} but was read at LBA {read_at}")]
    GptMyLba {
        /// Which copy.
        copy: Which,
        /// Field value.
        my_lba: u64,
        /// Actual location.
        read_at: u64,
    },
    /// Entry size not 128·2^k or count × size unreasonable.
    #[error("{copy} GPT header: {count} entries of {size} bytes (offset {offset}) is not a valid entry array (size must be 128·2^k, total at most 1 MiB)")]
    GptEntryArray {
        /// Which copy.
        copy: Which,
        /// Field offset.
        offset: u64,
        /// Entry count.
        count: u32,
        /// Entry size.
        size: u32,
    },
    /// Usable range nonsense.
    #[error(
        "{copy} GPT header: usable LBAs {first}..={last} are not inside the {sectors}-sector disk"
    )]
    GptUsableRange {
        /// Which copy.
        copy: Which,
        /// First usable.
        first: u64,
        /// Last usable.
        last: u64,
        /// Disk sectors.
        sectors: u64,
    },
    /// Entry array outside the disk or overlapping the usable area.
    #[error("{copy} GPT entry array at LBA {lba} lies outside the disk or inside the usable area")]
    GptEntriesLocation {
        /// Which copy.
        copy: Which,
        /// Its LBA.
        lba: u64,
    },
    /// Entry array CRC mismatch.
    #[error("{copy} GPT entry array CRC32 is {stored:08x}, computed {computed:08x}")]
    GptEntriesCrc {
        /// Which copy.
        copy: Which,
        /// Stored.
        stored: u32,
        /// Computed.
        computed: u32,
    },
}

/// Why a plan cannot be written as a table. `blockwise_geometry::plan` never makes such a
/// plan; a hand-made or edited one can.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PlanError {
    /// The sink is smaller than the image the plan describes.
    #[error("the sink holds {sink_bytes} bytes but the plan needs {plan_bytes}")]
    SinkTooSmall {
        /// Sink length.
        sink_bytes: u64,
        /// `Plan::size_bytes`.
        plan_bytes: u64,
    },
    /// A GPT plan without its GPT layout (`Plan::gpt`).
    #[error("GPT plan has no GPT layout")]
    MissingGptLayout,
    /// A GPT plan whose disk ID is not a GUID.
    #[error("GPT plan without a disk GUID")]
    MissingDiskGuid,
    /// A partition whose type belongs to the other table kind.
    #[error("partition {partition}: {}", type_mismatch(*.table))]
    TypeMismatch {
        /// Partition number.
        partition: u32,
        /// The plan's table kind.
        table: TableKind,
    },
    /// More partitions than the GPT entry array holds.
    #[error("{count} partitions but the GPT entry array holds {max}")]
    GptEntriesFull {
        /// Partitions in the plan.
        count: usize,
        /// Entries in the array.
        max: u32,
    },
    /// More partitions mirrored into a hybrid MBR than it has entries besides the 0xEE one.
    #[error(
        "{count} partitions mirrored into the hybrid MBR: it holds three besides the 0xEE entry"
    )]
    TooManyMirrored {
        /// Mirrored partitions in the plan.
        count: usize,
    },
    /// More primary partitions than the MBR has slots.
    #[error("{count} primary partitions: an MBR has four slots")]
    TooManyPrimaries {
        /// Primary partitions in the plan.
        count: usize,
    },
    /// Four primary partitions and an extended one.
    #[error("no MBR slot left for the extended partition after {primaries} primary partitions")]
    NoSlotForExtended {
        /// Primary partitions in the plan.
        primaries: usize,
    },
    /// A logical partition without an EBR location (`PartitionPlan::ebr_bytes`).
    #[error("logical partition {partition} has no EBR")]
    MissingEbr {
        /// Partition number.
        partition: u32,
    },
    /// A logical partition whose EBR does not lie before its end.
    #[error("logical partition {partition}: its EBR at LBA {ebr_lba} does not lie before its end (LBA {end_lba})")]
    EbrPastEnd {
        /// Partition number.
        partition: u32,
        /// Its EBR.
        ebr_lba: u64,
        /// End of the partition (exclusive).
        end_lba: u64,
    },
    /// An MBR entry's start lies before the LBA it is stored relative to.
    #[error("LBA {lba} lies before its base {base}")]
    LbaBeforeBase {
        /// Absolute start.
        lba: u64,
        /// The MBR (0), the EBR or the extended partition it is relative to.
        base: u64,
    },
    /// A start LBA that does not fit the 32-bit MBR field.
    #[error("LBA {lba} does not fit an MBR entry (32 bits)")]
    MbrLbaOverflow {
        /// Relative start.
        lba: u64,
    },
    /// A sector count that does not fit the 32-bit MBR field.
    #[error("{sectors} sectors do not fit an MBR entry (32 bits)")]
    MbrSectorsOverflow {
        /// Sector count.
        sectors: u64,
    },
    /// A GPT partition that ends inside LBA 0 (its last LBA would be negative).
    #[error("partition {partition} ends at byte {end_bytes}, inside LBA 0")]
    EndsInFirstSector {
        /// Partition number.
        partition: u32,
        /// Its end.
        end_bytes: u64,
    },
    /// An LBA whose byte offset does not fit 64 bits.
    #[error("LBA {lba} of {sector_bytes}-byte sectors lies past 2^64 bytes")]
    OffsetOverflow {
        /// The LBA.
        lba: u64,
        /// Sector size.
        sector_bytes: u64,
    },
    /// `mbrman` could not encode an MBR or EBR.
    #[error("encoding the MBR/EBR sector failed")]
    Encode(#[source] mbrman::Error),
}

fn type_mismatch(table: TableKind) -> &'static str {
    match table {
        TableKind::Gpt => "an MBR type in a GPT plan",
        TableKind::Mbr | TableKind::None => "a GPT type in an MBR plan",
    }
}

/// Errors of reading or writing a table.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error<E: core::error::Error + 'static> {
    /// The bytes are wrong.
    #[error(transparent)]
    Corrupt(#[from] Corrupt),
    /// The plan cannot be written as a table (a bug in the caller or a hand-made plan).
    #[error(transparent)]
    InvalidPlan(#[from] PlanError),
    /// The sink or source failed.
    #[error("I/O: {0}")]
    Io(#[source] E),
}
