//! Raw on-disk structures of exFAT (Microsoft's exFAT file system specification, the
//! section numbers below), as little-endian zerocopy structs: every bit pattern is a valid
//! value, so parsing is a bounds check and a copy. The writer and `blockwise-verify` share
//! them, and the checksums.
//!
//! ```text
//! sector  0      main boot sector (BootSectorRaw)              §3.1
//!         1–8    main extended boot sectors (…55 AA 00 00 at the end) §3.2
//!         9      main OEM parameters (FlashParamsRaw in slot 0)  §3.3
//!         10     reserved
//!         11     main boot checksum (one u32, repeated)          §3.4
//!         12–23  backup boot region (the same 12 sectors)
//! FatOffset      FAT (32-bit entries; FAT[0] = F8FFFFFF, FAT[1] = FFFFFFFF)  §4
//! ClusterHeapOffset  cluster 2 …: allocation bitmap, up-case table, root directory, files
//! ```

use zerocopy::little_endian::{U16, U32, U64};
use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout, Unaligned};

/// `FileSystemName` of an exFAT boot sector.
pub const FILE_SYSTEM_NAME: [u8; 8] = *b"EXFAT   ";
/// `JumpBoot`.
pub const JUMP_BOOT: [u8; 3] = [0xEB, 0x76, 0x90];
/// `BootSignature` (bytes 510–511: 55 AA).
pub const BOOT_SIGNATURE: u16 = 0xAA55;
/// `ExtendedBootSignature` at the end of each extended boot sector.
pub const EXTENDED_BOOT_SIGNATURE: u32 = 0xAA55_0000;
/// `FileSystemRevision` 1.00.
pub const REVISION: u16 = 0x0100;
/// Sectors of one boot region (main or backup).
pub const BOOT_REGION_SECTORS: u64 = 12;
/// The FAT must start after both boot regions.
pub const MIN_FAT_OFFSET: u64 = 24;
/// Largest `ClusterCount` (§3.1.9: 2^32 − 11).
pub const MAX_CLUSTERS: u64 = 0xFFFF_FFF5;
/// FAT\[0\] (media descriptor F8, rest ones).
pub const FAT_MEDIA: u32 = 0xFFFF_FFF8;
/// End-of-chain mark (FAT\[1\] too).
pub const FAT_EOC: u32 = 0xFFFF_FFFF;

/// The main boot sector (§3.1); 512 bytes, at the start of a sector of any size.
#[repr(C)]
#[derive(Clone, Copy, Debug, FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned)]
pub struct BootSectorRaw {
    /// `JumpBoot`: EB 76 90.
    pub jump_boot: [u8; 3],
    /// `FileSystemName`: "EXFAT   ".
    pub file_system_name: [u8; 8],
    /// `MustBeZero` (where a FAT BPB would be).
    pub must_be_zero: [u8; 53],
    /// `PartitionOffset`: sectors before the volume on the medium (0 = ignore).
    pub partition_offset: U64,
    /// `VolumeLength`: sectors of the volume.
    pub volume_length: U64,
    /// `FatOffset`: first FAT, in sectors from the volume start.
    pub fat_offset: U32,
    /// `FatLength`: sectors of one FAT.
    pub fat_length: U32,
    /// `ClusterHeapOffset`: cluster 2, in sectors from the volume start.
    pub cluster_heap_offset: U32,
    /// `ClusterCount`.
    pub cluster_count: U32,
    /// `FirstClusterOfRootDirectory`.
    pub first_cluster_of_root_directory: U32,
    /// `VolumeSerialNumber`.
    pub volume_serial_number: U32,
    /// `FileSystemRevision`: 0x0100.
    pub file_system_revision: U16,
    /// `VolumeFlags`: ActiveFat, VolumeDirty, MediaFailure (not in the boot checksum).
    pub volume_flags: U16,
    /// `BytesPerSectorShift`: 9–12.
    pub bytes_per_sector_shift: u8,
    /// `SectorsPerClusterShift`: cluster ≤ 32 MiB.
    pub sectors_per_cluster_shift: u8,
    /// `NumberOfFats`: 1 (2 with TexFAT).
    pub number_of_fats: u8,
    /// `DriveSelect`: 0x80.
    pub drive_select: u8,
    /// `PercentInUse` (0xFF = unknown; not in the boot checksum).
    pub percent_in_use: u8,
    /// `Reserved`.
    pub reserved: [u8; 7],
    /// `BootCode`.
    pub boot_code: [u8; 390],
    /// `BootSignature`: 0xAA55.
    pub boot_signature: U16,
}
const _: () = assert!(core::mem::size_of::<BootSectorRaw>() == 512);

/// Byte offsets of the boot sector left out of the boot checksum (§3.4: `VolumeFlags` and
/// `PercentInUse`, which change while the volume is used).
pub const CHECKSUM_SKIPPED: [usize; 3] = [106, 107, 112];

/// The flash parameters OEM parameter (§3.3.2), in slot 0 of the OEM parameters sector.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned)]
pub struct FlashParamsRaw {
    /// `ParametersGuid`: [`FLASH_PARAMETERS_GUID`].
    pub parameters_guid: [u8; 16],
    /// `EraseBlockSize` in bytes (0 = unknown).
    pub erase_block_size: U32,
    /// `PageSize` in bytes (0 = unknown).
    pub page_size: U32,
    /// `SpareSectors`.
    pub spare_sectors: U32,
    /// `RandomAccessTime` in ns.
    pub random_access_time: U32,
    /// `ProgrammingTime` in ns.
    pub programming_time: U32,
    /// `ReadCycle` in ns.
    pub read_cycle: U32,
    /// `WriteCycle` in ns.
    pub write_cycle: U32,
    /// `Reserved`.
    pub reserved: [u8; 4],
}
const _: () = assert!(core::mem::size_of::<FlashParamsRaw>() == 48);

/// {0A0C7E46-3399-4021-90C8-FA6D389C4BA2} in on-disk (mixed-endian) byte order.
pub const FLASH_PARAMETERS_GUID: [u8; 16] = [
    0x46, 0x7E, 0x0C, 0x0A, 0x99, 0x33, 0x21, 0x40, 0x90, 0xC8, 0xFA, 0x6D, 0x38, 0x9C, 0x4B, 0xA2,
];

/// Directory entry types (§6.2: TypeCode | TypeImportance | TypeCategory | InUse).
pub mod entry_type {
    /// End of directory (no entry here or after).
    pub const END: u8 = 0x00;
    /// Allocation bitmap (§7.1).
    pub const BITMAP: u8 = 0x81;
    /// Up-case table (§7.2).
    pub const UPCASE: u8 = 0x82;
    /// Volume label (§7.3).
    pub const LABEL: u8 = 0x83;
    /// File (§7.4).
    pub const FILE: u8 = 0x85;
    /// Volume GUID (§7.5).
    pub const GUID: u8 = 0xA0;
    /// Stream extension (§7.6).
    pub const STREAM: u8 = 0xC0;
    /// File name (§7.7).
    pub const NAME: u8 = 0xC1;
    /// The InUse bit: clear in deleted entries.
    pub const IN_USE: u8 = 0x80;
}

/// File attributes (§7.4.4).
pub mod attr {
    /// ReadOnly.
    pub const READ_ONLY: u16 = 0x01;
    /// Hidden.
    pub const HIDDEN: u16 = 0x02;
    /// System.
    pub const SYSTEM: u16 = 0x04;
    /// Directory.
    pub const DIRECTORY: u16 = 0x10;
    /// Archive.
    pub const ARCHIVE: u16 = 0x20;
}

/// `GeneralSecondaryFlags` of a stream extension (§6.4.1).
pub mod stream_flags {
    /// AllocationPossible.
    pub const ALLOCATION_POSSIBLE: u8 = 0x01;
    /// NoFatChain: the data is one contiguous run; the FAT is not consulted.
    pub const NO_FAT_CHAIN: u8 = 0x02;
}

/// Any 32-byte directory entry, by its type byte.
#[repr(C)]
#[derive(Clone, Copy, Debug, FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned)]
pub struct GenericEntryRaw {
    /// `EntryType`.
    pub entry_type: u8,
    /// The rest, by type.
    pub custom: [u8; 19],
    /// `FirstCluster` (primary and secondary templates).
    pub first_cluster: U32,
    /// `DataLength`.
    pub data_length: U64,
}
const _: () = assert!(core::mem::size_of::<GenericEntryRaw>() == 32);

/// Allocation bitmap entry (§7.1).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned)]
pub struct BitmapEntryRaw {
    /// 0x81.
    pub entry_type: u8,
    /// `BitmapFlags`: bit 0 = which FAT/bitmap (0 = first).
    pub bitmap_flags: u8,
    /// `Reserved`.
    pub reserved: [u8; 18],
    /// `FirstCluster`.
    pub first_cluster: U32,
    /// `DataLength`: bytes of the bitmap (ClusterCount / 8, rounded up).
    pub data_length: U64,
}
const _: () = assert!(core::mem::size_of::<BitmapEntryRaw>() == 32);

/// Up-case table entry (§7.2).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned)]
pub struct UpcaseEntryRaw {
    /// 0x82.
    pub entry_type: u8,
    /// `Reserved1`.
    pub reserved1: [u8; 3],
    /// `TableChecksum` ([`table_checksum`] of the table's bytes).
    pub table_checksum: U32,
    /// `Reserved2`.
    pub reserved2: [u8; 12],
    /// `FirstCluster`.
    pub first_cluster: U32,
    /// `DataLength`: bytes of the (compressed) table.
    pub data_length: U64,
}
const _: () = assert!(core::mem::size_of::<UpcaseEntryRaw>() == 32);

/// Volume label entry (§7.3).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned)]
pub struct LabelEntryRaw {
    /// 0x83.
    pub entry_type: u8,
    /// `CharacterCount`: 0–11 UTF-16 units.
    pub character_count: u8,
    /// `VolumeLabel`.
    pub volume_label: [U16; 11],
    /// `Reserved`.
    pub reserved: [u8; 8],
}
const _: () = assert!(core::mem::size_of::<LabelEntryRaw>() == 32);

/// Volume GUID entry (§7.5): a benign primary entry with no secondaries.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned)]
pub struct GuidEntryRaw {
    /// 0xA0.
    pub entry_type: u8,
    /// `SecondaryCount`: 0.
    pub secondary_count: u8,
    /// `SetChecksum` ([`set_checksum`] of this one entry).
    pub set_checksum: U16,
    /// `GeneralPrimaryFlags`: 0.
    pub general_primary_flags: U16,
    /// `VolumeGuid` (on-disk GUID byte order).
    pub volume_guid: [u8; 16],
    /// `Reserved`.
    pub reserved: [u8; 10],
}
const _: () = assert!(core::mem::size_of::<GuidEntryRaw>() == 32);

/// File directory entry (§7.4), the primary of a file or directory entry set.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned)]
pub struct FileEntryRaw {
    /// 0x85.
    pub entry_type: u8,
    /// `SecondaryCount`: 1 stream extension + the file name entries.
    pub secondary_count: u8,
    /// `SetChecksum` over the whole set ([`set_checksum`]).
    pub set_checksum: U16,
    /// `FileAttributes` ([`attr`]).
    pub file_attributes: U16,
    /// `Reserved1`.
    pub reserved1: U16,
    /// `CreateTimestamp` (FAT date << 16 | FAT time).
    pub create_timestamp: U32,
    /// `LastModifiedTimestamp`.
    pub last_modified_timestamp: U32,
    /// `LastAccessedTimestamp`.
    pub last_accessed_timestamp: U32,
    /// `Create10msIncrement`: 0–199.
    pub create_10ms_increment: u8,
    /// `LastModified10msIncrement`: 0–199.
    pub last_modified_10ms_increment: u8,
    /// `CreateUtcOffset`: bit 7 = valid, bits 0–6 = signed 15-minute offset.
    pub create_utc_offset: u8,
    /// `LastModifiedUtcOffset`.
    pub last_modified_utc_offset: u8,
    /// `LastAccessedUtcOffset`.
    pub last_accessed_utc_offset: u8,
    /// `Reserved2`.
    pub reserved2: [u8; 7],
}
const _: () = assert!(core::mem::size_of::<FileEntryRaw>() == 32);

/// Stream extension entry (§7.6): where the data is.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned)]
pub struct StreamEntryRaw {
    /// 0xC0.
    pub entry_type: u8,
    /// `GeneralSecondaryFlags` ([`stream_flags`]).
    pub general_secondary_flags: u8,
    /// `Reserved1`.
    pub reserved1: u8,
    /// `NameLength`: UTF-16 units of the name (1–255).
    pub name_length: u8,
    /// `NameHash` ([`name_hash`] of the up-cased name).
    pub name_hash: U16,
    /// `Reserved2`.
    pub reserved2: U16,
    /// `ValidDataLength`.
    pub valid_data_length: U64,
    /// `Reserved3`.
    pub reserved3: U32,
    /// `FirstCluster` (0 when nothing is allocated).
    pub first_cluster: U32,
    /// `DataLength`.
    pub data_length: U64,
}
const _: () = assert!(core::mem::size_of::<StreamEntryRaw>() == 32);

/// File name entry (§7.7): 15 UTF-16 units of the name.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned)]
pub struct NameEntryRaw {
    /// 0xC1.
    pub entry_type: u8,
    /// `GeneralSecondaryFlags`: 0.
    pub general_secondary_flags: u8,
    /// `FileName`.
    pub file_name: [U16; 15],
}
const _: () = assert!(core::mem::size_of::<NameEntryRaw>() == 32);

/// UTF-16 units one file name entry holds.
pub const NAME_UNITS_PER_ENTRY: usize = 15;

/// The boot checksum (§3.4) over the first 11 sectors of a boot region, `region` being those
/// bytes (`VolumeFlags` and `PercentInUse` of sector 0 skipped).
#[must_use]
pub fn boot_checksum(region: &[u8]) -> u32 {
    let mut sum: u32 = 0;
    for (i, &b) in region.iter().enumerate() {
        if CHECKSUM_SKIPPED.contains(&i) {
            continue;
        }
        sum = sum.rotate_right(1).wrapping_add(u32::from(b));
    }
    sum
}

/// `SetChecksum` (§6.3.3) over the entries of a set (bytes 2–3 of the first entry skipped).
#[must_use]
pub fn set_checksum(entries: &[u8]) -> u16 {
    let mut sum: u16 = 0;
    for (i, &b) in entries.iter().enumerate() {
        if i == 2 || i == 3 {
            continue;
        }
        sum = sum.rotate_right(1).wrapping_add(u16::from(b));
    }
    sum
}

/// `NameHash` (§7.6.4) of an up-cased name: each unit's low then high byte.
#[must_use]
pub fn name_hash(upcased: &[u16]) -> u16 {
    let mut hash: u16 = 0;
    for &u in upcased {
        for b in u.to_le_bytes() {
            hash = hash.rotate_right(1).wrapping_add(u16::from(b));
        }
    }
    hash
}

/// `TableChecksum` of the up-case table (§7.2.2): the boot checksum's rule over every byte.
#[must_use]
pub fn table_checksum(table: &[u8]) -> u32 {
    table.iter().fold(0u32, |sum, &b| {
        sum.rotate_right(1).wrapping_add(u32::from(b))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn checksums() {
        // Rotating right by one and adding is the spec's ((x & 1) ? 0x80000000 : 0) + (x >> 1).
        assert_eq!(table_checksum(&[1, 2]), 0x8000_0002);
        assert_eq!(set_checksum(&[1, 0, 9, 9]), 0x8000);
        assert_eq!(name_hash(&[0x0041]), 0x8020);
        let mut r = vec![0u8; 11 * 512];
        r[106] = 0xff;
        r[112] = 0xff;
        assert_eq!(boot_checksum(&r), 0);
    }
}
