//! Block group descriptors (`struct ext4_group_desc`, ondisk §"Block Group Descriptors").

use core::mem::{offset_of, size_of};

use zerocopy::little_endian::{U16, U32};
use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout, Unaligned};

/// A 32-byte group descriptor, the only form without the 64bit feature and the first half
/// of [`GroupDesc64Raw`]. The table starts in the block after the superblock
/// (`s_first_data_block + 1`), one descriptor per group, `s_desc_size` bytes apart.
#[repr(C)]
#[derive(Clone, Copy, Debug, FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned)]
pub struct GroupDescRaw {
    /// 0x00: block bitmap block, low 32 bits.
    pub bg_block_bitmap_lo: U32,
    /// 0x04: inode bitmap block, low 32 bits.
    pub bg_inode_bitmap_lo: U32,
    /// 0x08: first inode table block, low 32 bits.
    pub bg_inode_table_lo: U32,
    /// 0x0C: free blocks, low 16 bits.
    pub bg_free_blocks_count_lo: U16,
    /// 0x0E: free inodes, low 16 bits.
    pub bg_free_inodes_count_lo: U16,
    /// 0x10: directories, low 16 bits.
    pub bg_used_dirs_count_lo: U16,
    /// 0x12: [`GroupFlags`](super::GroupFlags).
    pub bg_flags: U16,
    /// 0x14: snapshot exclusion bitmap block, low 32 bits.
    pub bg_exclude_bitmap_lo: U32,
    /// 0x18: block bitmap crc32c, low 16 bits (metadata_csum).
    pub bg_block_bitmap_csum_lo: U16,
    /// 0x1A: inode bitmap crc32c, low 16 bits (metadata_csum).
    pub bg_inode_bitmap_csum_lo: U16,
    /// 0x1C: unused inodes at the end of the inode table, low 16 bits.
    pub bg_itable_unused_lo: U16,
    /// 0x1E: descriptor checksum: low 16 bits of crc32c (metadata_csum) or crc16
    /// (`uninit_bg`), computed with this field zero.
    pub bg_checksum: U16,
}

const _: () = assert!(size_of::<GroupDescRaw>() == 32);
const _: () = assert!(offset_of!(GroupDescRaw, bg_checksum) == 0x1E);

/// A 64-byte group descriptor (64bit feature, `s_desc_size` = 64): the 32-byte form followed
/// by the high halves. A 32-byte descriptor read into this struct zero-extended has high
/// halves 0, so the accessors below ([`GroupDesc64Raw::inode_table`], …) give the values the
/// kernel reads for either size.
#[repr(C)]
#[derive(Clone, Copy, Debug, FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned)]
pub struct GroupDesc64Raw {
    /// 0x00: the 32-byte descriptor: low halves, flags and the checksum.
    pub base: GroupDescRaw,
    /// 0x20: block bitmap block, high 32 bits.
    pub bg_block_bitmap_hi: U32,
    /// 0x24: inode bitmap block, high 32 bits.
    pub bg_inode_bitmap_hi: U32,
    /// 0x28: first inode table block, high 32 bits.
    pub bg_inode_table_hi: U32,
    /// 0x2C: free blocks, high 16 bits.
    pub bg_free_blocks_count_hi: U16,
    /// 0x2E: free inodes, high 16 bits.
    pub bg_free_inodes_count_hi: U16,
    /// 0x30: directories, high 16 bits.
    pub bg_used_dirs_count_hi: U16,
    /// 0x32: unused inodes at the end of the inode table, high 16 bits.
    pub bg_itable_unused_hi: U16,
    /// 0x34: snapshot exclusion bitmap block, high 32 bits.
    pub bg_exclude_bitmap_hi: U32,
    /// 0x38: block bitmap crc32c, high 16 bits.
    pub bg_block_bitmap_csum_hi: U16,
    /// 0x3A: inode bitmap crc32c, high 16 bits.
    pub bg_inode_bitmap_csum_hi: U16,
    /// 0x3C: padding.
    pub bg_reserved: U32,
}

const _: () = assert!(size_of::<GroupDesc64Raw>() == 64);
const _: () = assert!(offset_of!(GroupDesc64Raw, bg_block_bitmap_hi) == 0x20);
const _: () = assert!(offset_of!(GroupDesc64Raw, bg_inode_bitmap_csum_hi) == 0x3A);

impl GroupDesc64Raw {
    /// Block bitmap block, both halves.
    #[must_use]
    pub fn block_bitmap(&self) -> u64 {
        join32(self.base.bg_block_bitmap_lo, self.bg_block_bitmap_hi)
    }

    /// Inode bitmap block, both halves.
    #[must_use]
    pub fn inode_bitmap(&self) -> u64 {
        join32(self.base.bg_inode_bitmap_lo, self.bg_inode_bitmap_hi)
    }

    /// First inode table block, both halves.
    #[must_use]
    pub fn inode_table(&self) -> u64 {
        join32(self.base.bg_inode_table_lo, self.bg_inode_table_hi)
    }

    /// Free blocks, both halves.
    #[must_use]
    pub fn free_blocks_count(&self) -> u32 {
        join16(
            self.base.bg_free_blocks_count_lo,
            self.bg_free_blocks_count_hi,
        )
    }

    /// Free inodes, both halves.
    #[must_use]
    pub fn free_inodes_count(&self) -> u32 {
        join16(
            self.base.bg_free_inodes_count_lo,
            self.bg_free_inodes_count_hi,
        )
    }
}

/// `hi << 32 | lo`.
fn join32(lo: U32, hi: U32) -> u64 {
    (u64::from(hi.get()) << 32) | u64::from(lo.get())
}

/// `hi << 16 | lo`.
fn join16(lo: U16, hi: U16) -> u32 {
    (u32::from(hi.get()) << 16) | u32::from(lo.get())
}

#[cfg(test)]
mod tests {
    use super::*;
    use zerocopy::FromZeros;

    #[test]
    fn accessors_join_the_halves() {
        let mut d = GroupDesc64Raw::new_zeroed();
        d.base.bg_inode_table_lo.set(0x8000_0001);
        d.bg_inode_table_hi.set(2);
        d.base.bg_free_inodes_count_lo.set(0xffff);
        d.bg_free_inodes_count_hi.set(1);
        assert_eq!(d.inode_table(), 0x2_8000_0001);
        assert_eq!(d.free_inodes_count(), 0x1_ffff);
        assert_eq!((d.block_bitmap(), d.inode_bitmap()), (0, 0));
    }
}
