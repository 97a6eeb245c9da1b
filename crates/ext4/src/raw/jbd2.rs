//! The JBD2 journal superblock (`include/linux/jbd2.h`, ondisk §"Journal (jbd2)").
//! Unlike ext4 itself, the journal is **big-endian**.

use core::mem::{offset_of, size_of};

use zerocopy::big_endian::{I32, U32};
use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout, Unaligned};

/// The header of every journal metadata block (`journal_header_t`).
#[repr(C)]
#[derive(Clone, Copy, Debug, FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned)]
pub struct JournalHeaderRaw {
    /// [`JBD2_MAGIC_NUMBER`](super::JBD2_MAGIC_NUMBER).
    pub h_magic: U32,
    /// Block type: 1 descriptor, 2 commit, 3 superblock v1, 4 superblock v2, 5 revoke.
    pub h_blocktype: U32,
    /// Transaction this block belongs to.
    pub h_sequence: U32,
}

const _: () = assert!(size_of::<JournalHeaderRaw>() == 12);

/// The journal superblock (`journal_superblock_t`), the first 1024 bytes of the journal's
/// first block. `s_start` = 0 means the journal is empty (clean).
#[repr(C)]
#[derive(Clone, Copy, Debug, FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned)]
pub struct JournalSuperblockRaw {
    /// 0x00: magic, block type [`JBD2_SUPERBLOCK_V2`](super::JBD2_SUPERBLOCK_V2), sequence 0.
    pub s_header: JournalHeaderRaw,
    /// 0x0C: journal block size (the filesystem's).
    pub s_blocksize: U32,
    /// 0x10: journal length in blocks.
    pub s_maxlen: U32,
    /// 0x14: first block of log data (1).
    pub s_first: U32,
    /// 0x18: first commit id expected in the log.
    pub s_sequence: U32,
    /// 0x1C: block of the start of the log; 0 = clean, nothing to replay.
    pub s_start: U32,
    /// 0x20: error value set by `jbd2_journal_abort`.
    pub s_errno: I32,
    /// 0x24: compatible features (v2).
    pub s_feature_compat: U32,
    /// 0x28: incompatible features (v2).
    pub s_feature_incompat: U32,
    /// 0x2C: read-only compatible features (v2).
    pub s_feature_ro_compat: U32,
    /// 0x30: journal UUID (the filesystem's for an internal journal).
    pub s_uuid: [u8; 16],
    /// 0x40: filesystems sharing the journal (1).
    pub s_nr_users: U32,
    /// 0x44: block of a dynamic superblock copy (unused).
    pub s_dynsuper: U32,
    /// 0x48: journal blocks per transaction limit (unused).
    pub s_max_transaction: U32,
    /// 0x4C: data blocks per transaction limit (unused).
    pub s_max_trans_data: U32,
    /// 0x50: checksum algorithm (4 = crc32c).
    pub s_checksum_type: u8,
    /// 0x51: padding.
    pub s_padding2: [u8; 3],
    /// 0x54: fast-commit blocks at the end of the journal.
    pub s_num_fc_blks: U32,
    /// 0x58: head of the log while clean.
    pub s_head: U32,
    /// 0x5C: padding.
    pub s_padding: [U32; 40],
    /// 0xFC: crc32c of this superblock (csum v2/v3).
    pub s_checksum: U32,
    /// 0x100: UUIDs of the filesystems sharing the journal (16 × 48).
    pub s_users: [u8; 768],
}

const _: () = assert!(size_of::<JournalSuperblockRaw>() == 1024);
const _: () = assert!(offset_of!(JournalSuperblockRaw, s_uuid) == 0x30);
const _: () = assert!(offset_of!(JournalSuperblockRaw, s_checksum) == 0xFC);
