//! Extended attributes (`fs/ext4/xattr.h`, ondisk §"Extended Attributes").
//!
//! ```text
//! xattr block:   [XattrHeaderRaw][XattrEntryRaw name pad]…[0u32]  …free…  [values, from the end]
//! in the inode:  [XattrIbodyHeaderRaw][XattrEntryRaw name pad]…[0u32] …  [values]
//! ```
//! Value offsets count from the first entry in the inode, from the block start in a block.

use core::mem::size_of;

use zerocopy::little_endian::{U16, U32};
use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout, Unaligned};

/// The header of an extended attribute block (`struct ext4_xattr_header`).
#[repr(C)]
#[derive(Clone, Copy, Debug, FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned)]
pub struct XattrHeaderRaw {
    /// [`XATTR_MAGIC`](super::XATTR_MAGIC).
    pub h_magic: U32,
    /// Inodes sharing this block.
    pub h_refcount: U32,
    /// Blocks used (1).
    pub h_blocks: U32,
    /// Hash over all entry hashes (0 = not shareable).
    pub h_hash: U32,
    /// crc32c of the block with the block number as seed (metadata_csum), computed with
    /// this field zero.
    pub h_checksum: U32,
    /// Zero.
    pub h_reserved: [U32; 3],
}

const _: () = assert!(size_of::<XattrHeaderRaw>() == 32);

/// The header of the in-inode attribute area after `128 + i_extra_isize`
/// (`struct ext4_xattr_ibody_header`).
#[repr(C)]
#[derive(Clone, Copy, Debug, FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned)]
pub struct XattrIbodyHeaderRaw {
    /// [`XATTR_MAGIC`](super::XATTR_MAGIC).
    pub h_magic: U32,
}

const _: () = assert!(size_of::<XattrIbodyHeaderRaw>() == 4);

/// One attribute (`struct ext4_xattr_entry`); `e_name_len` name bytes follow, then
/// padding to a multiple of 4. A zero u32 ends the list.
#[repr(C)]
#[derive(Clone, Copy, Debug, FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned)]
pub struct XattrEntryRaw {
    /// Name length without the namespace prefix.
    pub e_name_len: u8,
    /// Namespace ([`XATTR_INDEX_USER`](super::XATTR_INDEX_USER), …).
    pub e_name_index: u8,
    /// Offset of the value (see the module docs for its base).
    pub e_value_offs: U16,
    /// Inode holding the value (ea_inode), else 0.
    pub e_value_inum: U32,
    /// Value length in bytes.
    pub e_value_size: U32,
    /// Hash of name and value (0 in the inode is allowed).
    pub e_hash: U32,
}

const _: () = assert!(size_of::<XattrEntryRaw>() == 16);
