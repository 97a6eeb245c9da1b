//! Inodes (`struct ext4_inode`, ondisk §"Index Nodes").

use core::mem::{offset_of, size_of};

use zerocopy::little_endian::{U16, U32};
use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout, Unaligned};

use super::N_BLOCKS;

/// An inode: the first 160 bytes of an `s_inode_size` record. The first 128 bytes
/// ([`GOOD_OLD_INODE_SIZE`](super::GOOD_OLD_INODE_SIZE)) are in every record; the fields from
/// `i_extra_isize` on exist only in larger records and only up to `128 + i_extra_isize`.
/// A 256-byte record is this struct (with `i_extra_isize` = 32) followed by 96 bytes of
/// in-inode extended attributes ([`XattrIbodyHeaderRaw`](super::XattrIbodyHeaderRaw)).
///
/// Inode `n` lives in group `(n - 1) / s_inodes_per_group`, slot `(n - 1) % s_inodes_per_group`
/// of that group's inode table. Times are seconds since the epoch; the `_extra` words hold
/// `nanoseconds << 2 | epoch bits`.
#[repr(C)]
#[derive(Clone, Copy, Debug, FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned)]
pub struct InodeRaw {
    /// 0x00: file type ([`S_IFMT`](super::S_IFMT) bits) and permissions.
    pub i_mode: U16,
    /// 0x02: owner uid, low 16 bits.
    pub i_uid: U16,
    /// 0x04: size in bytes, low 32 bits.
    pub i_size_lo: U32,
    /// 0x08: access time.
    pub i_atime: U32,
    /// 0x0C: inode change time.
    pub i_ctime: U32,
    /// 0x10: modification time.
    pub i_mtime: U32,
    /// 0x14: deletion time.
    pub i_dtime: U32,
    /// 0x18: group id, low 16 bits.
    pub i_gid: U16,
    /// 0x1A: hard links (directories: 2 + subdirectories, or 1 past 65000 with dir_nlink).
    pub i_links_count: U16,
    /// 0x1C: 512-byte sectors held (data, extent-tree and xattr blocks), low 32 bits.
    pub i_blocks_lo: U32,
    /// 0x20: [`InodeFlags`](super::InodeFlags).
    pub i_flags: U32,
    /// 0x24: `l_i_version` (Linux).
    pub i_osd1: U32,
    /// 0x28: `i_block[15]`: the extent tree root ([`ExtentHeaderRaw`](super::ExtentHeaderRaw)
    /// and four entries), a fast symlink's target, or a device number.
    pub i_block: [u8; N_BLOCKS * 4],
    /// 0x64: file version (NFS); part of the inode checksum seed.
    pub i_generation: U32,
    /// 0x68: extended attribute block, low 32 bits.
    pub i_file_acl_lo: U32,
    /// 0x6C: size in bytes, high 32 bits.
    pub i_size_high: U32,
    /// 0x70: fragment address (obsolete).
    pub i_obso_faddr: U32,
    /// 0x74: `l_i_blocks_high`: `i_blocks`, high 16 bits (huge_file).
    pub l_i_blocks_high: U16,
    /// 0x76: `l_i_file_acl_high`: extended attribute block, high 16 bits.
    pub l_i_file_acl_high: U16,
    /// 0x78: `l_i_uid_high`: owner uid, high 16 bits.
    pub l_i_uid_high: U16,
    /// 0x7A: `l_i_gid_high`: group id, high 16 bits.
    pub l_i_gid_high: U16,
    /// 0x7C: `l_i_checksum_lo`: inode crc32c, low 16 bits (metadata_csum).
    pub l_i_checksum_lo: U16,
    /// 0x7E: `l_i_reserved`.
    pub l_i_reserved: U16,
    /// 0x80: bytes used past the first 128 (32 for this whole struct).
    pub i_extra_isize: U16,
    /// 0x82: inode crc32c, high 16 bits (only when `i_extra_isize` >= 4).
    pub i_checksum_hi: U16,
    /// 0x84: extra change time bits.
    pub i_ctime_extra: U32,
    /// 0x88: extra modification time bits.
    pub i_mtime_extra: U32,
    /// 0x8C: extra access time bits.
    pub i_atime_extra: U32,
    /// 0x90: creation time.
    pub i_crtime: U32,
    /// 0x94: extra creation time bits.
    pub i_crtime_extra: U32,
    /// 0x98: file version, high 32 bits.
    pub i_version_hi: U32,
    /// 0x9C: project id.
    pub i_projid: U32,
}

const _: () = assert!(size_of::<InodeRaw>() == 160);
const _: () = assert!(offset_of!(InodeRaw, i_block) == 0x28);
const _: () = assert!(offset_of!(InodeRaw, l_i_checksum_lo) == 0x7C);
const _: () = assert!(offset_of!(InodeRaw, i_extra_isize) == 0x80);
const _: () = assert!(offset_of!(InodeRaw, i_crtime) == 0x90);
