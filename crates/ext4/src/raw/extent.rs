//! Extent trees (`fs/ext4/ext4_extents.h`, ondisk §"The Contents of inode.i_block").
//!
//! A node is an [`ExtentHeaderRaw`] followed by `eh_max` 12-byte entries: [`ExtentRaw`]
//! leaves at depth 0, [`ExtentIdxRaw`] indexes above. The root lives in `i_block` (four
//! entries); a node in its own block holds `(block size - 12) / 12` entries followed by an
//! [`ExtentTailRaw`] right after the last possible entry.

use core::mem::size_of;

use zerocopy::little_endian::{U16, U32};
use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout, Unaligned};

/// The header of every extent-tree node (`struct ext4_extent_header`).
#[repr(C)]
#[derive(Clone, Copy, Debug, FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned)]
pub struct ExtentHeaderRaw {
    /// [`EXT_MAGIC`](super::EXT_MAGIC).
    pub eh_magic: U16,
    /// Valid entries following the header.
    pub eh_entries: U16,
    /// Capacity of the node in entries.
    pub eh_max: U16,
    /// 0 for a leaf node, else the levels below.
    pub eh_depth: U16,
    /// Tree generation (unused by Linux).
    pub eh_generation: U32,
}

const _: () = assert!(size_of::<ExtentHeaderRaw>() == 12);

/// A leaf entry (`struct ext4_extent`): a run of logical blocks mapped to physical ones.
#[repr(C)]
#[derive(Clone, Copy, Debug, FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned)]
pub struct ExtentRaw {
    /// First logical block covered.
    pub ee_block: U32,
    /// Blocks covered; above [`EXT_INIT_MAX_LEN`](super::EXT_INIT_MAX_LEN) the extent is
    /// unwritten and covers `ee_len - 32768` blocks.
    pub ee_len: U16,
    /// First physical block, high 16 bits.
    pub ee_start_hi: U16,
    /// First physical block, low 32 bits.
    pub ee_start_lo: U32,
}

const _: () = assert!(size_of::<ExtentRaw>() == 12);

impl ExtentRaw {
    /// First physical block: `ee_start_hi << 32 | ee_start_lo` (48 bits).
    #[must_use]
    pub fn start(&self) -> u64 {
        (u64::from(self.ee_start_hi.get()) << 32) | u64::from(self.ee_start_lo.get())
    }
}

/// An index entry (`struct ext4_extent_idx`): points at the node covering logical blocks
/// from `ei_block` on.
#[repr(C)]
#[derive(Clone, Copy, Debug, FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned)]
pub struct ExtentIdxRaw {
    /// First logical block covered by the child node.
    pub ei_block: U32,
    /// Block of the child node, low 32 bits.
    pub ei_leaf_lo: U32,
    /// Block of the child node, high 16 bits.
    pub ei_leaf_hi: U16,
    /// Padding.
    pub ei_unused: U16,
}

const _: () = assert!(size_of::<ExtentIdxRaw>() == 12);

impl ExtentIdxRaw {
    /// Block of the child node: `ei_leaf_hi << 32 | ei_leaf_lo` (48 bits).
    #[must_use]
    pub fn leaf(&self) -> u64 {
        (u64::from(self.ei_leaf_hi.get()) << 32) | u64::from(self.ei_leaf_lo.get())
    }
}

/// The checksum after the last entry slot of a non-root node (`struct ext4_extent_tail`,
/// metadata_csum): crc32c with the inode seed of the node bytes before it.
#[repr(C)]
#[derive(Clone, Copy, Debug, FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned)]
pub struct ExtentTailRaw {
    /// crc32c of the header and all `eh_max` entry slots.
    pub et_checksum: U32,
}

const _: () = assert!(size_of::<ExtentTailRaw>() == 4);

#[cfg(test)]
mod tests {
    use super::*;
    use zerocopy::FromZeros;

    #[test]
    fn block_numbers_are_48_bits() {
        let mut e = ExtentRaw::new_zeroed();
        e.ee_start_lo.set(0xdead_beef);
        e.ee_start_hi.set(0x1234);
        assert_eq!(e.start(), 0x1234_dead_beef);
        let mut i = ExtentIdxRaw::new_zeroed();
        i.ei_leaf_lo.set(7);
        i.ei_leaf_hi.set(1);
        assert_eq!(i.leaf(), (1 << 32) | 7);
    }
}
