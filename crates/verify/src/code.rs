//! [`FindingCode`]: the stable code of every finding, serialised kebab-case.

use core::fmt;

use serde::Serialize;

/// Declares [`FindingCode`] from `Variant = "code"` pairs: the enum (serialised by serde's
/// kebab-case, with explicit renames where that differs from the code), [`FindingCode::ALL`]
/// and [`FindingCode::as_str`]. A unit test checks that serde and `as_str` agree.
macro_rules! finding_codes {
    ($( $(#[$attr:meta])* $variant:ident = $code:literal, )*) => {
        /// The stable code of a [`Finding`](crate::Finding). The JSON report carries it as its
        /// kebab-case string (`partition-not-4k-aligned`); the crate docs list every code
        /// with its severity.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
        #[serde(rename_all = "kebab-case")]
        #[non_exhaustive]
        pub enum FindingCode {
            $( $(#[$attr])* $variant, )*
        }

        impl FindingCode {
            /// Every code, in the order of the crate-doc table.
            pub const ALL: &'static [FindingCode] = &[$(FindingCode::$variant),*];

            /// The kebab-case code, as in the JSON report.
            #[must_use]
            pub const fn as_str(self) -> &'static str {
                match self {
                    $(FindingCode::$variant => $code,)*
                }
            }
        }
    };
}

finding_codes! {
    // source
    /// `empty-source`: The source is 0 bytes long.
    EmptySource = "empty-source",
    /// `unrecognised`: Neither a partition table nor a known filesystem (exit code 2).
    Unrecognised = "unrecognised",
    /// `read-failed`: Reading the source failed.
    ReadFailed = "read-failed",
    /// `erase-block-odd`: The erase block checked against is not a power of two of at least 4 KiB.
    EraseBlockOdd = "erase-block-odd",
    /// `sector-size-guessed`: The MBR's LBAs were read as 4096-byte sectors because filesystems are found there.
    SectorSizeGuessed = "sector-size-guessed",
    /// `size-not-sector-multiple`: The source's size is not a multiple of its sector size (an error with `strict`).
    SizeNotSectorMultiple = "size-not-sector-multiple",
    // MBR
    /// `mbr-corrupt`: The MBR does not parse (bad status byte, …).
    MbrCorrupt = "mbr-corrupt",
    /// `ebr-chain`: The EBR chain stops early (loop, bad signature, outside the extended partition).
    EbrChain = "ebr-chain",
    /// `logical-outside-extended`: A logical partition does not lie inside its extended partition.
    LogicalOutsideExtended = "logical-outside-extended",
    /// `gpt-missing`: An 0xEE entry next to other MBR entries, but no GPT header.
    GptMissing = "gpt-missing",
    /// `mbr-many-partitions`: Logical partitions numbered above 60, which fdisk and sfdisk drop.
    MbrManyPartitions = "mbr-many-partitions",
    /// `no-partitions`: The MBR has no entries.
    NoPartitions = "no-partitions",
    // GPT
    /// `gpt-primary-bad`: The primary GPT is invalid; the backup is used.
    GptPrimaryBad = "gpt-primary-bad",
    /// `gpt-backup-bad`: The backup GPT at the last LBA is invalid.
    GptBackupBad = "gpt-backup-bad",
    /// `gpt-backup-missing`: The primary GPT puts its backup past the end of the source.
    GptBackupMissing = "gpt-backup-missing",
    /// `gpt-corrupt`: Neither GPT copy is valid.
    GptCorrupt = "gpt-corrupt",
    /// `gpt-copies-differ`: The primary and backup GPT list different partitions.
    GptCopiesDiffer = "gpt-copies-differ",
    /// `gpt-entry-range`: A GPT entry ends before it starts.
    GptEntryRange = "gpt-entry-range",
    /// `gpt-entry-outside-usable`: A GPT entry lies outside the header's usable LBAs.
    GptEntryOutsideUsable = "gpt-entry-outside-usable",
    /// `mbr-gpt-disagree`: A hybrid MBR entry matches no GPT partition.
    MbrGptDisagree = "mbr-gpt-disagree",
    /// `gpt-backup-not-at-end`: The backup GPT is not at the last LBA of the disk.
    GptBackupNotAtEnd = "gpt-backup-not-at-end",
    /// `gpt-no-protective-mbr`: A GPT without a valid protective MBR.
    GptNoProtectiveMbr = "gpt-no-protective-mbr",
    /// `hybrid-mbr`: The MBR also lists real partitions beside its 0xEE entry (a hybrid MBR,
    /// as `mbr-type` builds it); info.
    HybridMbr = "hybrid-mbr",
    /// `protective-mbr-size`: The 0xEE entry does not cover the whole disk.
    ProtectiveMbrSize = "protective-mbr-size",
    /// `protective-mbr-bootable`: The 0xEE entry is marked bootable.
    ProtectiveMbrBootable = "protective-mbr-bootable",
    // partitions
    /// `partition-not-4k-aligned`: A partition does not start on a 4 KiB flash page.
    #[serde(rename = "partition-not-4k-aligned")]
    PartitionNot4kAligned = "partition-not-4k-aligned",
    /// `partition-overlap`: Two partitions overlap.
    PartitionOverlap = "partition-overlap",
    /// `partition-past-end`: A partition ends past the end of the source.
    PartitionPastEnd = "partition-past-end",
    /// `partition-overlaps-table`: A partition starts at LBA 0, on the table.
    PartitionOverlapsTable = "partition-overlaps-table",
    /// `partition-not-erase-aligned`: A partition does not start on the erase block (an error with `strict`).
    PartitionNotEraseAligned = "partition-not-erase-aligned",
    /// `partition-empty`: A partition has 0 sectors.
    PartitionEmpty = "partition-empty",
    /// `not-checked`: Contents whose internal layout is not checked (swap, raw bytes, a filesystem verify only names; an error with `strict`).
    NotChecked = "not-checked",
    // FAT
    /// `fat-corrupt`: The FAT boot sector does not parse.
    FatCorrupt = "fat-corrupt",
    /// `fat-cluster-count`: The BPB layout and the cluster count disagree on the FAT type.
    FatClusterCount = "fat-cluster-count",
    /// `fat-too-many-clusters`: More clusters than FAT32 can address.
    FatTooManyClusters = "fat-too-many-clusters",
    /// `fat-too-small`: The FAT has fewer entries than the volume has clusters.
    FatTooSmall = "fat-too-small",
    /// `fat-root-cluster`: RootClus lies outside the cluster range.
    FatRootCluster = "fat-root-cluster",
    /// `fat-reserved-location`: FSInfo or BkBootSec lies outside the reserved region.
    FatReservedLocation = "fat-reserved-location",
    /// `fat-larger-than-partition`: The volume claims more sectors than the partition holds.
    FatLargerThanPartition = "fat-larger-than-partition",
    /// `fat-data-not-4k-aligned`: The data area does not start on a 4 KiB flash page.
    #[serde(rename = "fat-data-not-4k-aligned")]
    FatDataNot4kAligned = "fat-data-not-4k-aligned",
    /// `fat-sector-below-logical`: The FAT sector is smaller than the device's logical sector.
    FatSectorBelowLogical = "fat-sector-below-logical",
    /// `fat-copies-differ`: Sampled sectors of a FAT copy differ from the first FAT.
    FatCopiesDiffer = "fat-copies-differ",
    /// `fat-data-not-aligned`: The data area does not start on the erase block (an error with `strict`).
    FatDataNotAligned = "fat-data-not-aligned",
    /// `fat32-field`: A FAT32 BPB has a FAT12/16-only field set.
    Fat32Field = "fat32-field",
    /// `fat-many-fats`: More than two FATs.
    FatManyFats = "fat-many-fats",
    /// `fat-boot-signature`: No `55 AA` at byte 510 of the boot sector.
    FatBootSignature = "fat-boot-signature",
    /// `fat-cluster-straddles`: The cluster size does not divide the erase block.
    FatClusterStraddles = "fat-cluster-straddles",
    /// `fat-sector-4096`: 4096-byte logical sectors, which much firmware cannot read.
    #[serde(rename = "fat-sector-4096")]
    FatSector4096 = "fat-sector-4096",
    /// `fat-sector-smaller-than-device`: The FAT sector is smaller than the device's physical sector.
    FatSectorSmallerThanDevice = "fat-sector-smaller-than-device",
    /// `fat-fsinfo`: The FSInfo sector is invalid.
    FatFsinfo = "fat-fsinfo",
    /// `fat-backup-boot-differs`: The backup boot sector differs from the boot sector.
    FatBackupBootDiffers = "fat-backup-boot-differs",
    /// `fat-entry0-media`: FAT\[0\] does not hold the BPB media byte (rest ones).
    #[serde(rename = "fat-entry0-media")]
    FatEntry0Media = "fat-entry0-media",
    /// `fat-entry1-eoc`: FAT\[1\] is not an end-of-chain mark.
    #[serde(rename = "fat-entry1-eoc")]
    FatEntry1Eoc = "fat-entry1-eoc",
    /// `fat-table-not-aligned`: The first FAT does not start on the erase block.
    FatTableNotAligned = "fat-table-not-aligned",
    /// `fat-no-backup-boot`: A FAT32 volume without a backup boot sector.
    FatNoBackupBoot = "fat-no-backup-boot",
    /// `fat-hidden-sectors`: HiddSec does not match the partition start.
    FatHiddenSectors = "fat-hidden-sectors",
    // EROFS, squashfs, dm-verity
    /// `erofs-corrupt`: The EROFS superblock does not parse.
    ErofsCorrupt = "erofs-corrupt",
    /// `erofs-superblock-checksum`: The EROFS superblock checksum does not match.
    ErofsSuperblockChecksum = "erofs-superblock-checksum",
    /// `erofs-larger-than-partition`: The EROFS filesystem has more blocks than the partition holds.
    ErofsLargerThanPartition = "erofs-larger-than-partition",
    /// `squashfs-corrupt`: The squashfs superblock does not parse (magic, block size, compressor, table order).
    SquashfsCorrupt = "squashfs-corrupt",
    /// `squashfs-larger-than-partition`: The squashfs filesystem uses more bytes than the partition holds.
    SquashfsLargerThanPartition = "squashfs-larger-than-partition",
    /// `verity-corrupt`: A dm-verity superblock does not parse, or covers its own blocks.
    VerityCorrupt = "verity-corrupt",
    /// `verity-hash-too-small`: The hash area is smaller than the tree for its data blocks.
    VerityHashTooSmall = "verity-hash-too-small",
    /// `verity-hash-not-4k-aligned`: A hash area does not start on a 4 KiB page.
    #[serde(rename = "verity-hash-not-4k-aligned")]
    VerityHashNot4kAligned = "verity-hash-not-4k-aligned",
    /// `erofs-unsupported`: Incompatible EROFS feature bits no kernel knows.
    ErofsUnsupported = "erofs-unsupported",
    /// `erofs-small-blocks`: EROFS blocks smaller than a 4 KiB page, or not dividing the erase block.
    ErofsSmallBlocks = "erofs-small-blocks",
    /// `squashfs-unsupported`: A squashfs version or compressor the Linux kernel does not read.
    SquashfsUnsupported = "squashfs-unsupported",
    /// `verity-small-blocks`: dm-verity data or hash blocks smaller than a 4 KiB page.
    VeritySmallBlocks = "verity-small-blocks",
    /// `verity-no-data`: No partition has the size a verity superblock covers.
    VerityNoData = "verity-no-data",
    /// `verity-hash-not-erase-aligned`: An appended hash area does not start on the erase block.
    VerityHashNotEraseAligned = "verity-hash-not-erase-aligned",
    // exFAT
    /// `exfat-corrupt`: The exFAT boot sector does not parse.
    ExfatCorrupt = "exfat-corrupt",
    /// `exfat-boot-checksum`: The main boot region's checksum sector does not match (or an extended boot signature is missing).
    ExfatBootChecksum = "exfat-boot-checksum",
    /// `exfat-cluster-count`: ClusterCount exceeds what fits the volume.
    ExfatClusterCount = "exfat-cluster-count",
    /// `exfat-fat-too-small`: The FAT has fewer entries than the heap has clusters.
    ExfatFatTooSmall = "exfat-fat-too-small",
    /// `exfat-root-cluster`: The root directory's first cluster lies outside the heap.
    ExfatRootCluster = "exfat-root-cluster",
    /// `exfat-larger-than-partition`: The volume claims more sectors than the partition holds.
    ExfatLargerThanPartition = "exfat-larger-than-partition",
    /// `exfat-no-bitmap`: The root directory has no allocation bitmap entry (or it is too small or outside the heap).
    ExfatNoBitmap = "exfat-no-bitmap",
    /// `exfat-no-upcase`: The root directory has no up-case table entry (or it is outside the heap).
    ExfatNoUpcase = "exfat-no-upcase",
    /// `exfat-upcase-checksum`: The up-case table does not match its checksum.
    ExfatUpcaseChecksum = "exfat-upcase-checksum",
    /// `exfat-heap-not-4k-aligned`: The cluster heap does not start on a 4 KiB flash page.
    #[serde(rename = "exfat-heap-not-4k-aligned")]
    ExfatHeapNot4kAligned = "exfat-heap-not-4k-aligned",
    /// `exfat-sector-below-logical`: The exFAT sector is smaller than the device's logical sector.
    ExfatSectorBelowLogical = "exfat-sector-below-logical",
    /// `exfat-heap-not-aligned`: The cluster heap does not start on the erase block (an error with `strict`).
    ExfatHeapNotAligned = "exfat-heap-not-aligned",
    /// `exfat-backup-boot`: The backup boot region differs from the main one or is invalid.
    ExfatBackupBoot = "exfat-backup-boot",
    /// `exfat-boot-signature`: No `55 AA` at byte 510 of the boot sector.
    ExfatBootSignature = "exfat-boot-signature",
    /// `exfat-field`: A boot sector field has an unusual value (revision, MustBeZero, size).
    ExfatField = "exfat-field",
    /// `exfat-cluster-straddles`: Clusters straddle erase blocks.
    ExfatClusterStraddles = "exfat-cluster-straddles",
    /// `exfat-fat-entries`: FAT\[0\]/FAT\[1\] are not F8FFFFFF/FFFFFFFF.
    ExfatFatEntries = "exfat-fat-entries",
    /// `exfat-guid-checksum`: The volume GUID entry's set checksum does not match.
    ExfatGuidChecksum = "exfat-guid-checksum",
    /// `exfat-partition-offset`: PartitionOffset is neither 0 nor the partition's start.
    ExfatPartitionOffset = "exfat-partition-offset",
    /// `exfat-fat-not-aligned`: The FAT does not start on the erase block.
    ExfatFatNotAligned = "exfat-fat-not-aligned",
    // ext2/3/4
    /// `ext4-corrupt`: The ext2/3/4 superblock does not parse.
    Ext4Corrupt = "ext4-corrupt",
    /// `ext4-inodes-count`: s_inodes_count is not inodes per group × groups.
    Ext4InodesCount = "ext4-inodes-count",
    /// `ext4-superblock-checksum`: The superblock checksum does not match.
    Ext4SuperblockChecksum = "ext4-superblock-checksum",
    /// `ext4-larger-than-partition`: The filesystem has more blocks than the partition holds.
    Ext4LargerThanPartition = "ext4-larger-than-partition",
    /// `ext4-group-desc`: A group descriptor points outside the filesystem.
    Ext4GroupDesc = "ext4-group-desc",
    /// `ext4-group-desc-checksum`: A group descriptor's bg_checksum (crc16 or crc32c, by feature) does not match.
    Ext4GroupDescChecksum = "ext4-group-desc-checksum",
    /// `ext4-journal-not-aligned`: The journal does not start on the erase block (an error with `strict`).
    Ext4JournalNotAligned = "ext4-journal-not-aligned",
    /// `ext4-reserved-blocks`: More reserved blocks than blocks.
    Ext4ReservedBlocks = "ext4-reserved-blocks",
    /// `ext4-first-data-block`: s_first_data_block is unexpected for the block size.
    Ext4FirstDataBlock = "ext4-first-data-block",
    /// `ext4-unsupported`: Incompatible feature bits Linux does not support: it refuses to mount.
    Ext4Unsupported = "ext4-unsupported",
    /// `ext4-read-only`: Read-only-compatible feature bits Linux does not support, or a revision above 1: it mounts read-only only.
    Ext4ReadOnly = "ext4-read-only",
    /// `ext4-first-ino`: s_first_ino below 11: Linux refuses to mount.
    Ext4FirstIno = "ext4-first-ino",
    /// `ext4-flex-bg`: s_log_groups_per_flex above 31 with flex_bg: Linux refuses to mount.
    Ext4FlexBg = "ext4-flex-bg",
    /// `ext4-stride-mismatch`: The RAID stride neither divides nor is a multiple of the erase block.
    Ext4StrideMismatch = "ext4-stride-mismatch",
    /// `ext4-stripe-mismatch`: The RAID stripe width neither divides nor is a multiple of the erase block.
    Ext4StripeMismatch = "ext4-stripe-mismatch",
    /// `ext4-block-smaller-than-device`: Blocks smaller than the device's physical sector.
    Ext4BlockSmallerThanDevice = "ext4-block-smaller-than-device",
    /// `ext4-small-blocks`: Blocks smaller than a 4 KiB flash page.
    Ext4SmallBlocks = "ext4-small-blocks",
    /// `ext4-no-stride`: Stride and stripe width are 0.
    Ext4NoStride = "ext4-no-stride",
    /// `ext4-stripe-smaller`: The stripe width is a divisor of the erase block, smaller than it.
    Ext4StripeSmaller = "ext4-stripe-smaller",
    /// `ext4-inode-table-not-aligned`: The first inode table does not start on the erase block.
    Ext4InodeTableNotAligned = "ext4-inode-table-not-aligned",
    // F2FS
    /// `f2fs-corrupt`: Neither F2FS superblock copy parses.
    F2fsCorrupt = "f2fs-corrupt",
    /// `f2fs-larger-than-partition`: The F2FS volume claims more blocks than the partition holds.
    F2fsLargerThanPartition = "f2fs-larger-than-partition",
    /// `f2fs-section-not-aligned`: F2FS sections are not a whole number of erase blocks (an error with `strict`).
    F2fsSectionNotAligned = "f2fs-section-not-aligned",
    /// `f2fs-main-not-aligned`: The F2FS main area does not start on the erase block (an error with `strict`).
    F2fsMainNotAligned = "f2fs-main-not-aligned",
    /// `f2fs-superblock-copies`: One F2FS superblock copy is unusable, or the two differ.
    F2fsSuperblockCopies = "f2fs-superblock-copies",
    /// `f2fs-segment0-not-aligned`: F2FS segment0 (the checkpoint) does not start on the erase block.
    #[serde(rename = "f2fs-segment0-not-aligned")]
    F2fsSegment0NotAligned = "f2fs-segment0-not-aligned",
    // other formats
    /// `fs-header-invalid`: A format found by its magic number has an impossible header.
    FsHeaderInvalid = "fs-header-invalid",
    /// `fs-larger-than-partition`: A recognised format's header claims more than the partition holds.
    FsLargerThanPartition = "fs-larger-than-partition",
}

impl fmt::Display for FindingCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl PartialEq<str> for FindingCode {
    fn eq(&self, other: &str) -> bool {
        self.as_str() == other
    }
}

impl PartialEq<&str> for FindingCode {
    fn eq(&self, other: &&str) -> bool {
        self.as_str() == *other
    }
}

impl PartialEq<FindingCode> for str {
    fn eq(&self, other: &FindingCode) -> bool {
        self == other.as_str()
    }
}

impl PartialEq<FindingCode> for &str {
    fn eq(&self, other: &FindingCode) -> bool {
        *self == other.as_str()
    }
}

#[cfg(test)]
mod tests {
    use super::FindingCode;

    #[test]
    fn as_str_is_the_serde_name() {
        for &code in FindingCode::ALL {
            let json = serde_json::to_string(&code).unwrap_or_default();
            assert_eq!(json, format!("\"{code}\""));
        }
    }

    #[test]
    fn codes_are_unique() {
        let mut all: Vec<&str> = FindingCode::ALL.iter().map(|c| c.as_str()).collect();
        all.sort_unstable();
        all.dedup();
        assert_eq!(all.len(), FindingCode::ALL.len());
    }

    /// The crate docs list every code, and nothing else, in their table.
    #[test]
    fn doc_table_lists_every_code() {
        let mut documented: Vec<&str> = include_str!("lib.rs")
            .lines()
            .filter_map(|l| l.strip_prefix("//! | "))
            .skip(1) // the header row
            .flat_map(|row| row.split('`').skip(1).step_by(2))
            .collect();
        documented.sort_unstable();
        let mut all: Vec<&str> = FindingCode::ALL.iter().map(|c| c.as_str()).collect();
        all.sort_unstable();
        assert_eq!(documented, all);
    }
}
