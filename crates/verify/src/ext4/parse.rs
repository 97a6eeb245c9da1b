//! Superblock, group-descriptor and extent-root parsing. The layout is in the [module docs](super).

use core::mem::{offset_of, size_of};

use blockwise_ext4::raw::{
    CompatFeatures, ExtentHeaderRaw, ExtentIdxRaw, ExtentRaw, FeatureSet, GroupDesc64Raw,
    GroupDescRaw, IncompatFeatures, InodeFlags, InodeRaw, RoCompatFeatures, SuperblockRaw,
    DYNAMIC_REV, EXT_MAGIC, GOOD_OLD_INODE_SIZE, GOOD_OLD_REV, JNL_BACKUP_BLOCKS,
};
use zerocopy::little_endian::U32;
use zerocopy::{FromBytes, IntoBytes};

use blockwise_ext4::csum::{crc16, crc32c_raw};

use crate::bytes::read_zero_extended;
use crate::FindingCode;

pub use blockwise_ext4::raw::SUPERBLOCK_OFFSET;
/// Superblock magic (`s_magic`).
pub use blockwise_ext4::raw::SUPER_MAGIC as MAGIC;
/// Most group descriptors the summary reads (bounds the read to 64 KiB × 64 bytes).
pub const MAX_DESCRIPTORS: u64 = 65536;

/// The superblock fields verify uses, validated.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Superblock {
    /// s_inodes_count.
    pub inodes_count: u32,
    /// s_blocks_count (hi word only with 64bit).
    pub blocks_count: u64,
    /// s_r_blocks_count.
    pub reserved_blocks: u64,
    /// s_free_blocks_count.
    pub free_blocks: u64,
    /// s_free_inodes_count.
    pub free_inodes: u32,
    /// s_first_data_block.
    pub first_data_block: u32,
    /// Block size in bytes.
    pub block_bytes: u32,
    /// s_blocks_per_group.
    pub blocks_per_group: u32,
    /// s_inodes_per_group.
    pub inodes_per_group: u32,
    /// s_rev_level.
    pub rev_level: u32,
    /// Inode size (128 for revision 0).
    pub inode_size: u16,
    /// s_feature_compat.
    pub compat: u32,
    /// s_feature_incompat.
    pub incompat: u32,
    /// s_feature_ro_compat.
    pub ro_compat: u32,
    /// s_uuid (text order).
    pub uuid: [u8; 16],
    /// s_volume_name.
    pub label: Option<String>,
    /// Group descriptor size (32 without 64bit).
    pub desc_size: u16,
    /// s_jnl_backup_type (1 = s_jnl_blocks holds inode 8's i_block).
    pub jnl_backup_type: u8,
    /// s_jnl_blocks[0..15]: a copy of the journal inode's i_block.
    pub jnl_blocks: [u8; 60],
    /// s_journal_inum.
    pub journal_inum: u32,
    /// s_raid_stride.
    pub raid_stride: u16,
    /// s_raid_stripe_width.
    pub raid_stripe_width: u32,
    /// s_log_groups_per_flex.
    pub log_groups_per_flex: u8,
    /// s_first_ino (11 for revision 0).
    pub first_ino: u32,
    /// `Some(ok)` when metadata_csum is set.
    pub checksum_ok: Option<bool>,
    /// How the group descriptors are checksummed (`bg_checksum`, offset 0x1E).
    pub desc_csum: DescChecksum,
    /// Problems that do not stop the volume from being understood.
    pub issues: Vec<Ext4Issue>,
}

impl Superblock {
    /// Number of block groups.
    #[must_use]
    pub fn groups(&self) -> u64 {
        let data = self
            .blocks_count
            .saturating_sub(u64::from(self.first_data_block));
        data.div_ceil(u64::from(self.blocks_per_group.max(1)))
    }

    /// The three feature words as flags.
    pub(crate) fn feature_set(&self) -> FeatureSet {
        FeatureSet {
            compat: CompatFeatures::from_bits_retain(self.compat),
            incompat: IncompatFeatures::from_bits_retain(self.incompat),
            ro_compat: RoCompatFeatures::from_bits_retain(self.ro_compat),
        }
    }

    /// `ext2`, `ext3` or `ext4` (e2fsprogs' classification).
    #[must_use]
    pub fn kind(&self) -> &'static str {
        self.feature_set().kind()
    }

    /// Enabled features, mke2fs spelling (unknown bits as `FEATURE_C12` like e2fsprogs).
    #[must_use]
    pub fn features(&self) -> Vec<String> {
        self.feature_set().names()
    }

    /// Incompat bits Linux does not mount ([`KERNEL_INCOMPAT`]).
    #[must_use]
    pub fn unknown_incompat(&self) -> u32 {
        self.incompat & !KERNEL_INCOMPAT.bits()
    }

    /// The journal is internal (has_journal, inode set, no journal_dev).
    #[must_use]
    pub fn has_internal_journal(&self) -> bool {
        let f = self.feature_set();
        f.compat.contains(CompatFeatures::HAS_JOURNAL)
            && self.journal_inum != 0
            && !f.incompat.contains(IncompatFeatures::JOURNAL_DEV)
    }

    /// Where the `s_jnl_blocks` copy of the journal inode's `i_block` says the journal
    /// starts (see [`first_data_block`]); `None` without that copy.
    pub(crate) fn journal_backup_start(&self) -> Option<Result<u64, u64>> {
        if self.jnl_backup_type != JNL_BACKUP_BLOCKS {
            return None;
        }
        first_data_block(&self.jnl_blocks, is_extent_node(&self.jnl_blocks))
    }

    /// The UUID as text.
    #[must_use]
    pub fn uuid_string(&self) -> String {
        let u = self.uuid;
        let hex = |r: core::ops::Range<usize>| -> String {
            u.get(r)
                .unwrap_or_default()
                .iter()
                .map(|b| format!("{b:02x}"))
                .collect()
        };
        format!(
            "{}-{}-{}-{}-{}",
            hex(0..4),
            hex(4..6),
            hex(6..8),
            hex(8..10),
            hex(10..16)
        )
    }

    /// Byte offset of the group descriptor table inside the volume.
    #[must_use]
    pub fn gdt_offset(&self) -> u64 {
        u64::from(self.first_data_block)
            .saturating_add(1)
            .saturating_mul(u64::from(self.block_bytes))
    }
}

/// Why bytes are not a usable ext2/3/4 superblock. Each names the field and offset.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Ext4Error {
    /// Fewer than 1024 bytes.
    #[error("superblock truncated: {len} bytes, 1024 needed")]
    Truncated {
        /// Bytes available.
        len: usize,
    },
    /// No 0xEF53.
    #[error("no ext2/3/4 magic 0xEF53 at superblock offset 0x38 (found {found:#06x})")]
    Magic {
        /// Found.
        found: u16,
    },
    /// Block size over 64 KiB.
    #[error("s_log_block_size (offset 0x18) is {value}: block size over 64 KiB")]
    LogBlockSize {
        /// Value.
        value: u32,
    },
    /// Blocks per group invalid.
    #[error("s_blocks_per_group (offset 0x20) is {value}; must be 1..={max} and a multiple of 8")]
    BlocksPerGroup {
        /// Value.
        value: u32,
        /// 8 × block size.
        max: u64,
    },
    /// Inodes per group invalid.
    #[error("s_inodes_per_group (offset 0x28) is {value}; must be 1..={max}")]
    InodesPerGroup {
        /// Value.
        value: u32,
        /// 8 × block size.
        max: u64,
    },
    /// Inode size invalid.
    #[error(
        "s_inode_size (offset 0x58) is {value}; must be a power of two from 128 to the block size"
    )]
    InodeSize {
        /// Value.
        value: u16,
    },
    /// Block count not past the first data block.
    #[error("s_blocks_count (offset 0x04) is {value}, not past s_first_data_block {first}")]
    BlocksCount {
        /// Value.
        value: u64,
        /// s_first_data_block.
        first: u32,
    },
    /// Descriptor size invalid with 64bit.
    #[error("s_desc_size (offset 0xFE) is {value}; with 64bit it must be a power of two from 64 to 1024")]
    DescSize {
        /// Value.
        value: u16,
    },
}

/// A problem in an otherwise understood ext2/3/4 volume.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Ext4Issue {
    /// s_inodes_count ≠ inodes_per_group × groups.
    #[error("s_inodes_count is {count} but {ipg} inodes per group × {groups} groups = {expected} — e2fsck will refuse it")]
    InodesCount {
        /// Stored.
        count: u32,
        /// Per group.
        ipg: u32,
        /// Groups.
        groups: u64,
        /// Product.
        expected: u64,
    },
    /// Reserved blocks over the block count.
    #[error("s_r_blocks_count {reserved} exceeds s_blocks_count {blocks}")]
    ReservedBlocks {
        /// Reserved.
        reserved: u64,
        /// Blocks.
        blocks: u64,
    },
    /// s_first_data_block unexpected for the block size.
    #[error("s_first_data_block is {value}, expected {expected} for {block}-byte blocks (only bigalloc differs)")]
    FirstDataBlock {
        /// Value.
        value: u32,
        /// Expected.
        expected: u32,
        /// Block size.
        block: u32,
    },
    /// Superblock checksum mismatch.
    #[error("superblock checksum (offset 0x3FC) is {stored:#010x}, computed {computed:#010x} — the kernel refuses to mount it; run e2fsck")]
    Checksum {
        /// Stored.
        stored: u32,
        /// Computed.
        computed: u32,
    },
    /// Incompat features Linux does not support: the kernel refuses to mount.
    #[error("incompatible feature bits {bits:#x} ({names}) that Linux does not support: the kernel refuses to mount it (\"Couldn't mount because of unsupported optional features\"); not checked further")]
    UnknownIncompat {
        /// Bits.
        bits: u32,
        /// Their names (e2fsprogs spelling, `FEATURE_I31` for unnamed bits).
        names: String,
    },
    /// Read-only-compatible features Linux does not support (or `read-only`): the kernel
    /// mounts read-only only.
    #[error("read-only-compatible feature bits {bits:#x} ({names}){}: the kernel mounts it read-only only", if *readonly_flag { "" } else { " that Linux does not support" })]
    ReadOnlyCompat {
        /// Bits.
        bits: u32,
        /// Their names.
        names: String,
        /// Only the `read-only` feature itself.
        readonly_flag: bool,
    },
    /// A revision above 1: the kernel mounts read-only only.
    #[error("s_rev_level (offset 0x4C) is {value}, above the dynamic revision 1: the kernel mounts it read-only only (\"revision level too high, forcing read-only mode\")")]
    Revision {
        /// Value.
        value: u32,
    },
    /// The first non-reserved inode below 11: the kernel refuses to mount.
    #[error("s_first_ino (offset 0x54) is {value}, below 11 (the reserved inodes): the kernel refuses to mount it (\"invalid first ino\")")]
    FirstIno {
        /// Value.
        value: u32,
    },
    /// `s_log_groups_per_flex` over 31 with flex_bg: the kernel refuses to mount.
    #[error("s_log_groups_per_flex (offset 0x174) is {value} with flex_bg: above 31, the kernel refuses to mount it")]
    LogGroupsPerFlex {
        /// Value.
        value: u8,
    },
}

/// The incompat features Linux (6.x, `EXT4_FEATURE_INCOMPAT_SUPP`) mounts: every other bit
/// (`compression`, `journal_dev`, `dirdata`, unnamed ones) makes it refuse.
pub const KERNEL_INCOMPAT: IncompatFeatures = IncompatFeatures::FILETYPE
    .union(IncompatFeatures::RECOVER)
    .union(IncompatFeatures::META_BG)
    .union(IncompatFeatures::EXTENTS)
    .union(IncompatFeatures::BIT64)
    .union(IncompatFeatures::MMP)
    .union(IncompatFeatures::FLEX_BG)
    .union(IncompatFeatures::EA_INODE)
    .union(IncompatFeatures::CSUM_SEED)
    .union(IncompatFeatures::LARGEDIR)
    .union(IncompatFeatures::INLINE_DATA)
    .union(IncompatFeatures::ENCRYPT)
    .union(IncompatFeatures::CASEFOLD);

/// The read-only-compatible features Linux (6.x, `EXT4_FEATURE_RO_COMPAT_SUPP`) mounts
/// read-write, with `btree_dir` (0x4), which it accepts and ignores: every other bit, and
/// `read-only` (0x1000) itself, makes it mount read-only only.
pub const KERNEL_RO_COMPAT: u32 = RoCompatFeatures::SPARSE_SUPER
    .union(RoCompatFeatures::LARGE_FILE)
    .union(RoCompatFeatures::HUGE_FILE)
    .union(RoCompatFeatures::GDT_CSUM)
    .union(RoCompatFeatures::DIR_NLINK)
    .union(RoCompatFeatures::EXTRA_ISIZE)
    .union(RoCompatFeatures::QUOTA)
    .union(RoCompatFeatures::BIGALLOC)
    .union(RoCompatFeatures::METADATA_CSUM)
    .union(RoCompatFeatures::PROJECT)
    .union(RoCompatFeatures::VERITY)
    .union(RoCompatFeatures::ORPHAN_PRESENT)
    .bits()
    | 0x4;

impl Ext4Issue {
    /// Stable kebab-case code.
    #[must_use]
    pub fn code(&self) -> FindingCode {
        match self {
            Ext4Issue::InodesCount { .. } => FindingCode::Ext4InodesCount,
            Ext4Issue::ReservedBlocks { .. } => FindingCode::Ext4ReservedBlocks,
            Ext4Issue::FirstDataBlock { .. } => FindingCode::Ext4FirstDataBlock,
            Ext4Issue::Checksum { .. } => FindingCode::Ext4SuperblockChecksum,
            Ext4Issue::UnknownIncompat { .. } => FindingCode::Ext4Unsupported,
            Ext4Issue::ReadOnlyCompat { .. } | Ext4Issue::Revision { .. } => {
                FindingCode::Ext4ReadOnly
            }
            Ext4Issue::FirstIno { .. } => FindingCode::Ext4FirstIno,
            Ext4Issue::LogGroupsPerFlex { .. } => FindingCode::Ext4FlexBg,
        }
    }

    /// True for problems a reader trips over: everything that stops the kernel from
    /// mounting it (or from mounting it read-write) and a wrong count or checksum.
    #[must_use]
    pub fn is_error(&self) -> bool {
        !matches!(
            self,
            Ext4Issue::ReservedBlocks { .. } | Ext4Issue::FirstDataBlock { .. }
        )
    }
}

/// How `bg_checksum` (offset 0x1E of every group descriptor) is computed, by feature.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DescChecksum {
    /// Neither `gdt_csum`/`uninit_bg` nor `metadata_csum`: the field is unused.
    None,
    /// `gdt_csum`/`uninit_bg`: crc16 over s_uuid, the group number and the descriptor.
    Crc16,
    /// `metadata_csum`: the low 16 bits of crc32c (seeded with this value) over the group
    /// number and the descriptor with the checksum field zeroed.
    Crc32c(u32),
}

impl DescChecksum {
    /// `crc16` or `crc32c`.
    #[must_use]
    pub fn name(self) -> &'static str {
        match self {
            DescChecksum::None => "none",
            DescChecksum::Crc16 => "crc16",
            DescChecksum::Crc32c(_) => "crc32c",
        }
    }
}

/// Does `sb` (the 1024 bytes at volume offset 1024) carry the ext2/3/4 magic?
#[must_use]
pub fn has_magic(sb: &[u8]) -> bool {
    read_zero_extended::<SuperblockRaw>(sb).s_magic.get() == MAGIC
}

/// Whether `sb` (the 1024 bytes at volume offset 1024) is a primary ext2/3/4 superblock:
/// the magic, and `s_block_group_nr` 0 (a backup names its group).
#[must_use]
pub fn is_primary_superblock(sb: &[u8]) -> bool {
    let raw = read_zero_extended::<SuperblockRaw>(sb);
    raw.s_magic.get() == MAGIC && raw.s_block_group_nr.get() == 0
}

/// Parses the superblock (the 1024 bytes at volume offset 1024).
pub fn parse_superblock(sb: &[u8]) -> Result<Superblock, Ext4Error> {
    let (raw, _) =
        SuperblockRaw::ref_from_prefix(sb).map_err(|_| Ext4Error::Truncated { len: sb.len() })?;
    let magic = raw.s_magic.get();
    if magic != MAGIC {
        return Err(Ext4Error::Magic { found: magic });
    }
    let log = raw.s_log_block_size.get();
    if log > 6 {
        return Err(Ext4Error::LogBlockSize { value: log });
    }
    let block_bytes = 1024u32.checked_shl(log).unwrap_or(1024);
    let max = u64::from(block_bytes).saturating_mul(8);
    let bpg = raw.s_blocks_per_group.get();
    if bpg == 0 || u64::from(bpg) > max || bpg % 8 != 0 {
        return Err(Ext4Error::BlocksPerGroup { value: bpg, max });
    }
    let ipg = raw.s_inodes_per_group.get();
    if ipg == 0 || u64::from(ipg) > max {
        return Err(Ext4Error::InodesPerGroup { value: ipg, max });
    }
    let rev = raw.s_rev_level.get();
    let old_rev = rev == GOOD_OLD_REV;
    let inode_size = if old_rev {
        GOOD_OLD_INODE_SIZE
    } else {
        raw.s_inode_size.get()
    };
    if !inode_size.is_power_of_two()
        || inode_size < GOOD_OLD_INODE_SIZE
        || u32::from(inode_size) > block_bytes
    {
        return Err(Ext4Error::InodeSize { value: inode_size });
    }
    // Revision 0 has no feature words.
    let features = if old_rev {
        FeatureSet::empty()
    } else {
        raw.features()
    };
    let is64 = features.incompat.contains(IncompatFeatures::BIT64);
    let wide = |lo: U32, hi: U32| -> u64 {
        let hi = if is64 { u64::from(hi.get()) } else { 0 };
        (hi << 32) | u64::from(lo.get())
    };
    let blocks_count = wide(raw.s_blocks_count_lo, raw.s_blocks_count_hi);
    let first_data_block = raw.s_first_data_block.get();
    if blocks_count <= u64::from(first_data_block) {
        return Err(Ext4Error::BlocksCount {
            value: blocks_count,
            first: first_data_block,
        });
    }
    let desc_size = if is64 {
        let d = raw.s_desc_size.get();
        if !d.is_power_of_two() || !(64..=1024).contains(&d) {
            return Err(Ext4Error::DescSize { value: d });
        }
        d
    } else {
        32
    };
    let mut s = Superblock {
        inodes_count: raw.s_inodes_count.get(),
        blocks_count,
        reserved_blocks: wide(raw.s_r_blocks_count_lo, raw.s_r_blocks_count_hi),
        free_blocks: wide(raw.s_free_blocks_count_lo, raw.s_free_blocks_count_hi),
        free_inodes: raw.s_free_inodes_count.get(),
        first_data_block,
        block_bytes,
        blocks_per_group: bpg,
        inodes_per_group: ipg,
        rev_level: rev,
        inode_size,
        compat: features.compat.bits(),
        incompat: features.incompat.bits(),
        ro_compat: features.ro_compat.bits(),
        uuid: raw.s_uuid,
        label: crate::label::utf8_label(&raw.s_volume_name),
        desc_size,
        jnl_backup_type: raw.s_jnl_backup_type,
        jnl_blocks: read_zero_extended(raw.s_jnl_blocks.as_bytes()),
        journal_inum: raw.s_journal_inum.get(),
        raid_stride: raw.s_raid_stride.get(),
        raid_stripe_width: raw.s_raid_stripe_width.get(),
        log_groups_per_flex: raw.s_log_groups_per_flex,
        first_ino: if old_rev {
            FIRST_INO
        } else {
            raw.s_first_ino.get()
        },
        checksum_ok: None,
        desc_csum: if features.ro_compat.contains(RoCompatFeatures::METADATA_CSUM) {
            // The kernel's s_csum_seed: s_checksum_seed with metadata_csum_seed, else
            // crc32c(~0, s_uuid).
            DescChecksum::Crc32c(if features.incompat.contains(IncompatFeatures::CSUM_SEED) {
                raw.s_checksum_seed.get()
            } else {
                crc32c_raw(!0, &raw.s_uuid)
            })
        } else if features.ro_compat.contains(RoCompatFeatures::GDT_CSUM) {
            DescChecksum::Crc16
        } else {
            DescChecksum::None
        },
        issues: Vec::new(),
    };
    let groups = s.groups();
    let expected = groups.saturating_mul(u64::from(ipg));
    if u64::from(s.inodes_count) != expected {
        s.issues.push(Ext4Issue::InodesCount {
            count: s.inodes_count,
            ipg,
            groups,
            expected,
        });
    }
    if s.reserved_blocks > blocks_count {
        s.issues.push(Ext4Issue::ReservedBlocks {
            reserved: s.reserved_blocks,
            blocks: blocks_count,
        });
    }
    let expected_fdb = u32::from(block_bytes == 1024);
    if first_data_block != expected_fdb && !features.ro_compat.contains(RoCompatFeatures::BIGALLOC)
    {
        s.issues.push(Ext4Issue::FirstDataBlock {
            value: first_data_block,
            expected: expected_fdb,
            block: block_bytes,
        });
    }
    if features.ro_compat.contains(RoCompatFeatures::METADATA_CSUM) {
        let stored = raw.s_checksum.get();
        let computed = raw.checksum();
        s.checksum_ok = Some(stored == computed);
        if stored != computed {
            s.issues.push(Ext4Issue::Checksum { stored, computed });
        }
    }
    // What makes Linux refuse to mount it, or mount it read-only only (fs/ext4/super.c).
    let unknown = s.unknown_incompat();
    if unknown != 0 {
        s.issues.push(Ext4Issue::UnknownIncompat {
            bits: unknown,
            names: feature_names(FeatureSet {
                incompat: IncompatFeatures::from_bits_retain(unknown),
                ..FeatureSet::empty()
            }),
        });
    }
    let ro = s.ro_compat & !KERNEL_RO_COMPAT;
    if ro != 0 {
        s.issues.push(Ext4Issue::ReadOnlyCompat {
            bits: ro,
            names: feature_names(FeatureSet {
                ro_compat: RoCompatFeatures::from_bits_retain(ro),
                ..FeatureSet::empty()
            }),
            readonly_flag: ro == RoCompatFeatures::READONLY.bits(),
        });
    }
    if rev > DYNAMIC_REV {
        s.issues.push(Ext4Issue::Revision { value: rev });
    }
    if !old_rev && s.first_ino < FIRST_INO {
        s.issues.push(Ext4Issue::FirstIno { value: s.first_ino });
    }
    if features.incompat.contains(IncompatFeatures::FLEX_BG) && s.log_groups_per_flex > 31 {
        s.issues.push(Ext4Issue::LogGroupsPerFlex {
            value: s.log_groups_per_flex,
        });
    }
    Ok(s)
}

/// The first inode that is not reserved, for revision 0 and the least the kernel accepts.
const FIRST_INO: u32 = 11;

/// Feature names, space separated, as e2fsprogs spells them.
fn feature_names(f: FeatureSet) -> String {
    f.names().join(" ")
}

/// What the group descriptors say, summarised.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct GroupSummary {
    /// Descriptors read.
    pub read: u64,
    /// Group 0's block bitmap block.
    pub first_block_bitmap: Option<u64>,
    /// Group 0's inode table block.
    pub first_inode_table: Option<u64>,
    /// Sum of the free block counts.
    pub free_blocks: u64,
    /// Sum of the free inode counts.
    pub free_inodes: u64,
    /// Groups whose bitmap or inode table lies outside the filesystem: (group, field, block).
    pub out_of_range: Vec<(u64, &'static str, u64)>,
    /// The first descriptors whose `bg_checksum` does not match: (group, stored, computed).
    pub bad_checksums: Vec<(u64, u16, u16)>,
    /// How many descriptors' `bg_checksum` does not match.
    pub bad_checksum_count: u64,
}

/// The `bg_checksum` a descriptor `d` (`desc_size` bytes) of group `group` should carry,
/// as the kernel's `ext4_group_desc_csum`; `None` when the feature set has no checksum.
#[must_use]
pub fn desc_checksum(sb: &Superblock, group: u64, d: &[u8]) -> Option<u16> {
    let at = offset_of!(GroupDescRaw, bg_checksum);
    let head = d.get(..at)?;
    let tail = d.get(at.saturating_add(2)..).unwrap_or(&[]);
    // The group number is hashed as a little-endian u32 (group counts fit 32 bits).
    let le_group = u32::try_from(group).ok()?.to_le_bytes();
    match sb.desc_csum {
        DescChecksum::None => None,
        DescChecksum::Crc32c(seed) => {
            let c = crc32c_raw(seed, &le_group);
            let c = crc32c_raw(c, head);
            let c = crc32c_raw(c, &[0, 0]);
            let c = crc32c_raw(c, tail);
            Some(u16::try_from(c & 0xffff).unwrap_or(0))
        }
        DescChecksum::Crc16 => {
            let c = crc16(0xffff, &sb.uuid);
            let c = crc16(c, &le_group);
            let c = crc16(c, head);
            Some(crc16(c, tail))
        }
    }
}

/// Summarises `count` descriptors from `gdt` (the bytes at [`Superblock::gdt_offset`]).
#[must_use]
pub fn summarise_groups(sb: &Superblock, gdt: &[u8], count: u64) -> GroupSummary {
    let mut out = GroupSummary::default();
    let ds = usize::from(sb.desc_size);
    let narrow = size_of::<GroupDescRaw>();
    let wide = ds >= size_of::<GroupDesc64Raw>();
    for (g, d) in (0u64..count.min(MAX_DESCRIPTORS)).zip(gdt.chunks_exact(ds.max(narrow))) {
        // A 32-byte descriptor zero-extended: its high halves read as 0.
        let d = if wide {
            d
        } else {
            d.get(..narrow).unwrap_or(d)
        };
        let desc: GroupDesc64Raw = read_zero_extended(d);
        if let Some(computed) = desc_checksum(sb, g, d.get(..ds).unwrap_or(d)) {
            let stored = desc.base.bg_checksum.get();
            if stored != computed {
                out.bad_checksum_count = out.bad_checksum_count.saturating_add(1);
                if out.bad_checksums.len() < 8 {
                    out.bad_checksums.push((g, stored, computed));
                }
            }
        }
        let bb = desc.block_bitmap();
        let it = desc.inode_table();
        if g == 0 {
            out.first_block_bitmap = Some(bb);
            out.first_inode_table = Some(it);
        }
        for (field, block) in [
            ("block bitmap", bb),
            ("inode bitmap", desc.inode_bitmap()),
            ("inode table", it),
        ] {
            if (block < u64::from(sb.first_data_block) || block >= sb.blocks_count)
                && out.out_of_range.len() < 8
            {
                out.out_of_range.push((g, field, block));
            }
        }
        out.free_blocks = out
            .free_blocks
            .saturating_add(desc.free_blocks_count().into());
        out.free_inodes = out
            .free_inodes
            .saturating_add(desc.free_inodes_count().into());
        out.read = out.read.saturating_add(1);
    }
    out
}

/// Where an inode's `i_block` (60 bytes) says its data starts, cheaply: the first extent of
/// a depth-0 extent tree, the first index of a deeper one (`Err(block)` = read that block and
/// call [`first_extent_block`] again), or the first direct block of a block-mapped inode.
#[must_use]
pub fn first_data_block(i_block: &[u8], extents: bool) -> Option<Result<u64, u64>> {
    if !extents {
        let (b, _) = U32::read_from_prefix(i_block).ok()?;
        return (b.get() != 0).then_some(Ok(u64::from(b.get())));
    }
    first_extent_block(i_block)
}

/// Reads an extent node (header + entries): `Ok(start)` of the first leaf extent, or
/// `Err(block)` of the first index's child.
#[must_use]
pub fn first_extent_block(node: &[u8]) -> Option<Result<u64, u64>> {
    let h: ExtentHeaderRaw = read_zero_extended(node);
    if h.eh_magic.get() != EXT_MAGIC || h.eh_entries.get() == 0 {
        return None;
    }
    let first = node.get(size_of::<ExtentHeaderRaw>()..).unwrap_or_default();
    if h.eh_depth.get() == 0 {
        Some(Ok(read_zero_extended::<ExtentRaw>(first).start()))
    } else {
        Some(Err(read_zero_extended::<ExtentIdxRaw>(first).leaf()))
    }
}

/// Does `node` start with an extent header?
fn is_extent_node(node: &[u8]) -> bool {
    read_zero_extended::<ExtentHeaderRaw>(node).eh_magic.get() == EXT_MAGIC
}

/// Where an inode record (its first 128 bytes) says its data starts (see
/// [`first_data_block`]); `None` when the record is cut off before the end of `i_block`.
pub(crate) fn inode_first_data_block(record: &[u8]) -> Option<Result<u64, u64>> {
    if record.len() < offset_of!(InodeRaw, i_generation) {
        return None;
    }
    let inode: InodeRaw = read_zero_extended(record);
    let extents = InodeFlags::from_bits_retain(inode.i_flags.get()).contains(InodeFlags::EXTENTS);
    first_data_block(&inode.i_block, extents)
}

#[cfg(test)]
#[expect(clippy::indexing_slicing, clippy::unwrap_used, reason = "tests")]
mod tests {
    use super::*;

    fn golden() -> Vec<u8> {
        let mut sb = vec![0u8; 1024];
        sb[0x00..0x04].copy_from_slice(&16384u32.to_le_bytes());
        sb[0x04..0x08].copy_from_slice(&65536u32.to_le_bytes());
        sb[0x18..0x1c].copy_from_slice(&2u32.to_le_bytes());
        sb[0x20..0x24].copy_from_slice(&32768u32.to_le_bytes());
        sb[0x28..0x2c].copy_from_slice(&8192u32.to_le_bytes());
        sb[0x38..0x3a].copy_from_slice(&MAGIC.to_le_bytes());
        sb[0x4c..0x50].copy_from_slice(&1u32.to_le_bytes());
        sb[0x54..0x58].copy_from_slice(&11u32.to_le_bytes());
        sb[0x58..0x5a].copy_from_slice(&256u16.to_le_bytes());
        sb[0x60..0x64].copy_from_slice(&(0x2u32 | 0x40).to_le_bytes());
        sb[0x78..0x7e].copy_from_slice(b"rootfs");
        sb[0x164..0x166].copy_from_slice(&32u16.to_le_bytes());
        sb[0x170..0x174].copy_from_slice(&128u32.to_le_bytes());
        sb
    }

    fn check(mutate: impl Fn(&mut Vec<u8>), expected: Result<(), Ext4Error>) {
        let mut b = golden();
        mutate(&mut b);
        assert_eq!(parse_superblock(&b).map(|_| ()), expected);
    }

    #[test]
    fn golden_superblock() {
        let s = parse_superblock(&golden()).unwrap();
        assert_eq!(s.block_bytes, 4096);
        assert_eq!(s.groups(), 2);
        assert_eq!(s.kind(), "ext4");
        assert_eq!(s.label.as_deref(), Some("rootfs"));
        assert_eq!((s.raid_stride, s.raid_stripe_width), (32, 128));
        assert_eq!(s.features(), ["filetype", "extent"]);
        assert!(s.issues.is_empty(), "{:?}", s.issues);
    }

    #[test]
    fn negative_fields() {
        check(|b| b[0x38] = 0, Err(Ext4Error::Magic { found: 0xef00 }));
        check(|b| b[0x18] = 7, Err(Ext4Error::LogBlockSize { value: 7 }));
        check(
            |b| b[0x20..0x24].fill(0),
            Err(Ext4Error::BlocksPerGroup {
                value: 0,
                max: 32768,
            }),
        );
        check(
            |b| b[0x28..0x2c].fill(0),
            Err(Ext4Error::InodesPerGroup {
                value: 0,
                max: 32768,
            }),
        );
        check(|b| b[0x58] = 100, Err(Ext4Error::InodeSize { value: 356 }));
        check(
            |b| b[0x04..0x08].fill(0),
            Err(Ext4Error::BlocksCount { value: 0, first: 0 }),
        );
        check(|b| b[0x60] |= 0x80, Err(Ext4Error::DescSize { value: 0 }));
        assert_eq!(
            parse_superblock(&[0; 10]),
            Err(Ext4Error::Truncated { len: 10 })
        );
        let mut b = golden();
        b[0] = 1;
        assert_eq!(
            parse_superblock(&b).unwrap().issues[0].code(),
            "ext4-inodes-count"
        );
    }

    /// The golden superblock with flex_bg (16 groups per flex) and metadata_csum, `mutate`d,
    /// with its checksum computed afterwards (as a tool that edits it would).
    fn checksummed(mutate: impl Fn(&mut Vec<u8>)) -> Vec<u8> {
        let mut b = golden();
        b[0x61] |= 0x02; // flex_bg (0x200)
        b[0x64..0x68].copy_from_slice(&0x400u32.to_le_bytes()); // metadata_csum
        b[0x174] = 4;
        mutate(&mut b);
        let sum = SuperblockRaw::ref_from_prefix(&b).unwrap().0.checksum();
        b[0x3fc..0x400].copy_from_slice(&sum.to_le_bytes());
        b
    }

    /// The issues of the checksummed golden superblock after `mutate`.
    fn issues(mutate: impl Fn(&mut Vec<u8>)) -> Vec<Ext4Issue> {
        parse_superblock(&checksummed(mutate)).unwrap().issues
    }

    /// r26: superblocks the kernel refuses to mount (or mounts read-only only) are errors,
    /// even with their checksum made to match; each mutates one field of a good one.
    #[test]
    fn r26_superblocks_the_kernel_refuses() {
        assert_eq!(issues(|_| {}), []);
        // Every bit the kernel mounts, and the ignored btree_dir, is fine.
        assert_eq!(
            issues(|b| {
                let all = KERNEL_INCOMPAT.bits() & !0x80; // 64bit needs s_desc_size
                b[0x60..0x64].copy_from_slice(&all.to_le_bytes());
                b[0x64..0x68].copy_from_slice(&(KERNEL_RO_COMPAT & !0x10).to_le_bytes());
            }),
            []
        );
        let one = |m: &dyn Fn(&mut Vec<u8>)| {
            let got = issues(m);
            assert_eq!(got.len(), 1, "{got:?}");
            assert!(got[0].is_error(), "{:?}", got[0]);
            got.into_iter().next().unwrap()
        };
        let set32 = |at: usize, v: u32| {
            move |b: &mut Vec<u8>| b[at..at + 4].copy_from_slice(&v.to_le_bytes())
        };
        let orr32 = |at: usize, v: u32| {
            move |b: &mut Vec<u8>| {
                let old = u32::from_le_bytes(b[at..at + 4].try_into().unwrap());
                b[at..at + 4].copy_from_slice(&(old | v).to_le_bytes());
            }
        };
        let i = one(&orr32(0x60, 0x8000_0000));
        assert_eq!(i.code(), "ext4-unsupported");
        assert_eq!(
            i,
            Ext4Issue::UnknownIncompat {
                bits: 0x8000_0000,
                names: "FEATURE_I31".into()
            }
        );
        for (bit, name) in [
            (0x1, "compression"),
            (0x8, "journal_dev"),
            (0x1000, "dirdata"),
        ] {
            let i = one(&orr32(0x60, bit));
            assert_eq!(
                i,
                Ext4Issue::UnknownIncompat {
                    bits: bit,
                    names: name.into()
                }
            );
        }
        let i = one(&orr32(0x64, 0x8000_0000));
        assert_eq!(i.code(), "ext4-read-only");
        assert!(
            i.to_string()
                .contains("that Linux does not support: the kernel mounts it read-only only"),
            "{i}"
        );
        let i = one(&orr32(0x64, 0x1000));
        assert_eq!(
            i,
            Ext4Issue::ReadOnlyCompat {
                bits: 0x1000,
                names: "read-only".into(),
                readonly_flag: true
            }
        );
        assert_eq!(
            one(&set32(0x4c, 0xffff_ffff)),
            Ext4Issue::Revision { value: 0xffff_ffff }
        );
        assert_eq!(one(&set32(0x4c, 2)).code(), "ext4-read-only");
        assert_eq!(one(&set32(0x54, 0)), Ext4Issue::FirstIno { value: 0 });
        assert_eq!(one(&set32(0x54, 10)).code(), "ext4-first-ino");
        assert_eq!(issues(set32(0x54, 11)), []);
        assert_eq!(
            one(&|b: &mut Vec<u8>| b[0x174] = 255),
            Ext4Issue::LogGroupsPerFlex { value: 255 }
        );
        assert_eq!(one(&|b: &mut Vec<u8>| b[0x174] = 32).code(), "ext4-flex-bg");
        assert_eq!(issues(|b| b[0x174] = 31), []);
        assert_eq!(issues(|b| b[0x174] = 0), []);
        // Without flex_bg the field means nothing to the kernel.
        assert_eq!(
            issues(|b| {
                b[0x61] &= !0x02;
                b[0x174] = 255;
            }),
            []
        );
        // A wrong checksum is still its own error.
        let mut b = checksummed(|_| {});
        b[0x3fc] ^= 1;
        assert_eq!(
            parse_superblock(&b).unwrap().issues[0].code(),
            "ext4-superblock-checksum"
        );
    }

    #[test]
    fn extents() {
        let mut n = [0u8; 60];
        n[0..2].copy_from_slice(&0xf30au16.to_le_bytes());
        n[2..4].copy_from_slice(&1u16.to_le_bytes());
        n[20..24].copy_from_slice(&32801u32.to_le_bytes());
        assert_eq!(first_data_block(&n, true), Some(Ok(32801)));
        n[6] = 1;
        n[20..24].fill(0);
        n[16..20].copy_from_slice(&99u32.to_le_bytes());
        assert_eq!(first_data_block(&n, true), Some(Err(99)));
        assert_eq!(first_data_block(&[0; 60], true), None);
    }
}
