//! Directory blocks (ondisk §"Directory Entries" and §"Hash Tree Directories").
//!
//! ```text
//! linear leaf block:  [DirEntryRaw name pad]…[DirEntryRaw name pad → end][DirEntryTailRaw]
//! htree root block:   [DxRootRaw ("." "..", info)][DxCountLimitRaw|block][DxEntryRaw]…[DxTailRaw]
//! htree node block:   [DxNodeRaw (empty entry over the block)][DxCountLimitRaw|block][DxEntryRaw]…[DxTailRaw]
//! ```
//! The first index entry has no hash: its hash field is the [`DxCountLimitRaw`]. The
//! checksum tails exist only with metadata_csum.

use core::mem::size_of;

use zerocopy::little_endian::{U16, U32};
use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout, Unaligned};

/// The fixed part of a directory entry (`struct ext4_dir_entry_2`); `name_len` name bytes
/// follow, then padding to a multiple of 4.
#[repr(C)]
#[derive(Clone, Copy, Debug, FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned)]
pub struct DirEntryRaw {
    /// Inode number; 0 = unused entry.
    pub inode: U32,
    /// Bytes to the next entry (a multiple of 4, at least `8 + name_len`); the last entry
    /// of a block runs to its end (or to the checksum tail).
    pub rec_len: U16,
    /// Name length in bytes.
    pub name_len: u8,
    /// [`FT_REG_FILE`](super::FT_REG_FILE), … with the filetype feature, else 0.
    pub file_type: u8,
}

const _: () = assert!(size_of::<DirEntryRaw>() == 8);

/// The checksum tail closing a leaf block (`struct ext4_dir_entry_tail`, metadata_csum):
/// looks like an unused 12-byte entry.
#[repr(C)]
#[derive(Clone, Copy, Debug, FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned)]
pub struct DirEntryTailRaw {
    /// Zero (the "inode").
    pub det_reserved_zero1: U32,
    /// 12.
    pub det_rec_len: U16,
    /// Zero (the "name length").
    pub det_reserved_zero2: u8,
    /// [`FT_DIR_CSUM`](super::FT_DIR_CSUM).
    pub det_reserved_ft: u8,
    /// crc32c with the inode seed of the block bytes before the tail.
    pub det_checksum: U32,
}

const _: () = assert!(size_of::<DirEntryTailRaw>() == 12);

/// `struct dx_root_info`: after "." and ".." in an htree root.
#[repr(C)]
#[derive(Clone, Copy, Debug, FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned)]
pub struct DxRootInfoRaw {
    /// Zero.
    pub reserved_zero: U32,
    /// [`DX_HASH_HALF_MD4`](super::DX_HASH_HALF_MD4), …
    pub hash_version: u8,
    /// Length of this struct: 8.
    pub info_length: u8,
    /// Index levels below the root (0 or 1; 2 with large_dir).
    pub indirect_levels: u8,
    /// Zero.
    pub unused_flags: u8,
}

const _: () = assert!(size_of::<DxRootInfoRaw>() == 8);

/// The start of an htree root block (`struct dx_root` up to its entries): a "." entry of
/// 12 bytes, a ".." entry spanning the rest of the block, and the root info.
#[repr(C)]
#[derive(Clone, Copy, Debug, FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned)]
pub struct DxRootRaw {
    /// "." (`rec_len` 12).
    pub dot: DirEntryRaw,
    /// `".\0\0\0"`.
    pub dot_name: [u8; 4],
    /// ".." (`rec_len` = block size - 12).
    pub dotdot: DirEntryRaw,
    /// `"..\0\0"`.
    pub dotdot_name: [u8; 4],
    /// Hash version and depth.
    pub info: DxRootInfoRaw,
}

const _: () = assert!(size_of::<DxRootRaw>() == 32);

/// The start of an interior htree block (`struct dx_node` up to its entries): an unused
/// entry covering the whole block, so linear readers skip it.
#[repr(C)]
#[derive(Clone, Copy, Debug, FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned)]
pub struct DxNodeRaw {
    /// Inode 0, `rec_len` = block size.
    pub fake: DirEntryRaw,
}

const _: () = assert!(size_of::<DxNodeRaw>() == 8);

/// `struct dx_countlimit`: overlays the hash of the first index entry.
#[repr(C)]
#[derive(Clone, Copy, Debug, FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned)]
pub struct DxCountLimitRaw {
    /// Entry capacity of the block (minus the tail with metadata_csum).
    pub limit: U16,
    /// Entries in use, including this first one.
    pub count: U16,
}

const _: () = assert!(size_of::<DxCountLimitRaw>() == 4);

/// `struct dx_entry`: names hashing to `hash` or above (up to the next entry's hash) live
/// in logical directory block `block`.
#[repr(C)]
#[derive(Clone, Copy, Debug, FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned)]
pub struct DxEntryRaw {
    /// Lowest hash (low bit set: continues a collision run from the previous block).
    pub hash: U32,
    /// Logical block within the directory.
    pub block: U32,
}

const _: () = assert!(size_of::<DxEntryRaw>() == 8);

/// `struct dx_tail` after the last index slot (`limit` entries), metadata_csum.
#[repr(C)]
#[derive(Clone, Copy, Debug, FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned)]
pub struct DxTailRaw {
    /// Zero.
    pub dt_reserved: U32,
    /// crc32c with the inode seed of the block up to the used entries, then of this tail
    /// with `dt_checksum` zero.
    pub dt_checksum: U32,
}

const _: () = assert!(size_of::<DxTailRaw>() == 8);
