//! Errors of the partition-table builders and parsers.

use core::fmt;

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

/// Errors of reading or writing a table.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error<E: core::error::Error + 'static> {
    /// The bytes are wrong.
    #[error(transparent)]
    Corrupt(#[from] Corrupt),
    /// The plan cannot be written as a table (a bug in the caller or a hand-made plan).
    #[error("cannot write the table: {reason}")]
    InvalidPlan {
        /// Why.
        reason: String,
    },
    /// The sink or source failed.
    #[error("I/O: {0}")]
    Io(#[source] E),
}
