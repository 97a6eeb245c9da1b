//! The on-disk layouts of EROFS (`include/erofs_fs.h` of erofs-utils and the kernel's
//! `fs/erofs/erofs_fs.h`), as zerocopy structs every bit pattern of which is valid. The
//! writer fills them, the verifier reads them.

use core::mem::size_of;

use zerocopy::little_endian::{U16, U32, U64};
use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout, Unaligned};

/// `EROFS_SUPER_MAGIC_V1`.
pub const MAGIC: u32 = 0xE0F5_E1E2;
/// Where the superblock starts (room for an x86 boot sector before it).
pub const SUPER_OFFSET: u64 = 1024;
/// `EROFS_FEATURE_COMPAT_SB_CHKSUM`: the superblock carries a crc32c.
pub const COMPAT_SB_CHKSUM: u32 = 0x1;
/// `EROFS_FEATURE_COMPAT_MTIME`: compact inodes carry an mtime relative to `epoch`.
pub const COMPAT_MTIME: u32 = 0x2;
/// `EROFS_FEATURE_COMPAT_XATTR_FILTER`: inline xattr headers carry a name bloom filter.
pub const COMPAT_XATTR_FILTER: u32 = 0x4;
/// Every incompatible feature bit a current kernel knows (`EROFS_ALL_FEATURE_INCOMPAT`).
pub const ALL_INCOMPAT: u32 = 0x1ff;
/// The compatible and incompatible feature names, bit by bit, as `dump.erofs` prints them.
pub const COMPAT_NAMES: &[(u32, &str)] = &[
    (0x1, "sb_csum"),
    (0x2, "mtime"),
    (0x4, "xattr_filter"),
    (0x8, "shared_ea_in_metabox"),
    (0x10, "plain_xattr_pfx"),
    (0x20, "ishare_xattrs"),
];
/// The incompatible feature names.
pub const INCOMPAT_NAMES: &[(u32, &str)] = &[
    (0x1, "0padding"),
    (0x2, "compr_cfgs"),
    (0x4, "chunked_file"),
    (0x8, "device_table"),
    (0x10, "ztailpacking"),
    (0x20, "fragments"),
    (0x40, "xattr_prefixes"),
    (0x80, "48bit"),
    (0x100, "metabox"),
];

/// The superblock, 128 bytes at [`SUPER_OFFSET`] (`sb_extslots` × 16 more may follow).
#[repr(C)]
#[derive(Clone, Copy, Debug, FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned)]
pub struct SuperblockRaw {
    /// 0x00: [`MAGIC`].
    pub magic: U32,
    /// 0x04: `!crc32c` of the superblock block from here on, this field zero
    /// ([`COMPAT_SB_CHKSUM`]).
    pub checksum: U32,
    /// 0x08: compatible features.
    pub feature_compat: U32,
    /// 0x0C: block size = 1 << this.
    pub blkszbits: u8,
    /// 0x0D: superblock size = 128 + this × 16.
    pub sb_extslots: u8,
    /// 0x0E: nid of the root directory (without the 48bit feature).
    pub root_nid: U16,
    /// 0x10: inodes.
    pub inos: U64,
    /// 0x18: seconds of compact inodes' mtime (`build_time` before 6.15).
    pub epoch: U64,
    /// 0x20: nanoseconds of compact inodes' mtime.
    pub fixed_nsec: U32,
    /// 0x24: blocks of the filesystem.
    pub blocks: U32,
    /// 0x28: block of nid 0.
    pub meta_blkaddr: U32,
    /// 0x2C: block of the shared xattr area.
    pub xattr_blkaddr: U32,
    /// 0x30: UUID.
    pub uuid: [u8; 16],
    /// 0x40: volume name (label), NUL-padded.
    pub volume_name: [u8; 16],
    /// 0x50: incompatible features.
    pub feature_incompat: U32,
    /// 0x54: compression algorithm bitmap (or the lz4 window).
    pub available_compr_algs: U16,
    /// 0x56: extra devices.
    pub extra_devices: U16,
    /// 0x58: device table slot offset.
    pub devt_slotoff: U16,
    /// 0x5A: directory block size shift beyond the block size (must be 0).
    pub dirblkbits: u8,
    /// 0x5B: long xattr prefixes.
    pub xattr_prefix_count: u8,
    /// 0x5C: where the long xattr prefixes start.
    pub xattr_prefix_start: U32,
    /// 0x60: nid of the packed inode.
    pub packed_nid: U64,
    /// 0x68: xattr name filter reservation.
    pub xattr_filter_reserved: u8,
    /// 0x69: reserved.
    pub reserved: [u8; 23],
}

const _: () = assert!(size_of::<SuperblockRaw>() == 128);

/// `i_format`: bit 0 the inode version (compact / extended), bits 1–3 the data layout.
pub const I_VERSION_EXTENDED: u16 = 1;
/// Data layout: blocks from `startblk`, the last one partial.
pub const LAYOUT_FLAT_PLAIN: u16 = 0;
/// Data layout: full blocks from `startblk`, the tail right after the inode.
pub const LAYOUT_FLAT_INLINE: u16 = 2;

/// A compact inode (32 bytes).
#[repr(C)]
#[derive(Clone, Copy, Debug, FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned)]
pub struct InodeCompactRaw {
    /// 0x00: format (version and layout).
    pub i_format: U16,
    /// 0x02: inline xattr size in 4-byte units beyond the 12-byte header.
    pub i_xattr_icount: U16,
    /// 0x04: mode (type and permissions).
    pub i_mode: U16,
    /// 0x06: links.
    pub i_nlink: U16,
    /// 0x08: size.
    pub i_size: U32,
    /// 0x0C: mtime relative to `epoch` (with [`COMPAT_MTIME`]; 0 here).
    pub i_mtime: U32,
    /// 0x10: start block, or the device number of a device node.
    pub i_u: U32,
    /// 0x14: inode number for 32-bit `stat`.
    pub i_ino: U32,
    /// 0x18: owner.
    pub i_uid: U16,
    /// 0x1A: group.
    pub i_gid: U16,
    /// 0x1C: reserved.
    pub i_reserved: U32,
}

/// An extended inode (64 bytes).
#[repr(C)]
#[derive(Clone, Copy, Debug, FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned)]
pub struct InodeExtendedRaw {
    /// 0x00: format (version and layout).
    pub i_format: U16,
    /// 0x02: inline xattr size in 4-byte units beyond the 12-byte header.
    pub i_xattr_icount: U16,
    /// 0x04: mode.
    pub i_mode: U16,
    /// 0x06: reserved (high bits of the start block with 48bit).
    pub i_nb: U16,
    /// 0x08: size.
    pub i_size: U64,
    /// 0x10: start block, or the device number.
    pub i_u: U32,
    /// 0x14: inode number for 32-bit `stat`.
    pub i_ino: U32,
    /// 0x18: owner.
    pub i_uid: U32,
    /// 0x1C: group.
    pub i_gid: U32,
    /// 0x20: mtime seconds.
    pub i_mtime: U64,
    /// 0x28: mtime nanoseconds.
    pub i_mtime_nsec: U32,
    /// 0x2C: links.
    pub i_nlink: U32,
    /// 0x30: reserved.
    pub i_reserved2: [u8; 16],
}

const _: () = assert!(size_of::<InodeCompactRaw>() == 32);
const _: () = assert!(size_of::<InodeExtendedRaw>() == 64);

/// The header of inline xattrs (12 bytes), followed by `h_shared_count` shared xattr ids
/// (4 bytes each) and the inline entries.
#[repr(C)]
#[derive(Clone, Copy, Debug, FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned)]
pub struct XattrIbodyHeaderRaw {
    /// Name filter (with [`COMPAT_XATTR_FILTER`]); 0 otherwise.
    pub h_name_filter: U32,
    /// Shared xattr ids that follow.
    pub h_shared_count: u8,
    /// Reserved.
    pub h_reserved2: [u8; 7],
}

/// One xattr entry (4 bytes), followed by the name (without its prefix) and the value,
/// padded to 4 bytes.
#[repr(C)]
#[derive(Clone, Copy, Debug, FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned)]
pub struct XattrEntryRaw {
    /// Name length.
    pub e_name_len: u8,
    /// Prefix index ([`XATTR_PREFIXES`]).
    pub e_name_index: u8,
    /// Value length.
    pub e_value_size: U16,
}

/// One directory entry (12 bytes); names follow the entry array of each block.
#[repr(C)]
#[derive(Clone, Copy, Debug, FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned)]
pub struct DirentRaw {
    /// nid of the inode.
    pub nid: U64,
    /// Offset of the name in the block.
    pub nameoff: U16,
    /// File type ([`FileType`]).
    pub file_type: u8,
    /// Reserved.
    pub reserved: u8,
}

const _: () = assert!(size_of::<XattrIbodyHeaderRaw>() == 12);
const _: () = assert!(size_of::<XattrEntryRaw>() == 4);
const _: () = assert!(size_of::<DirentRaw>() == 12);

/// Name prefixes by index (`EROFS_XATTR_INDEX_*`): the full prefix and the index. The ACLs
/// have the whole name as prefix and an empty name.
pub const XATTR_PREFIXES: &[(&str, u8)] = &[
    ("user.", 1),
    ("system.posix_acl_access", 2),
    ("system.posix_acl_default", 3),
    ("trusted.", 4),
    ("security.", 6),
];

/// Directory entry file types (`EROFS_FT_*`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum FileType {
    /// A regular file.
    Reg = 1,
    /// A directory.
    Dir = 2,
    /// A character device.
    Chr = 3,
    /// A block device.
    Blk = 4,
    /// A FIFO.
    Fifo = 5,
    /// A socket.
    Sock = 6,
    /// A symbolic link.
    Symlink = 7,
}

/// The superblock checksum: `crc32c(~0, block from the superblock on, checksum zeroed)` as the
/// kernel computes it (no final inversion). `sb_block` is the whole first block.
#[must_use]
pub fn superblock_checksum(sb_block: &[u8]) -> u32 {
    let mut tail = sb_block.get(1024..).unwrap_or_default().to_vec();
    if let Some(c) = tail.get_mut(4..8) {
        c.fill(0);
    }
    !crc32c::crc32c(&tail)
}

/// `new_encode_dev`: the device number as EROFS and squashfs store it.
#[must_use]
pub fn encode_dev(major: u32, minor: u32) -> u32 {
    (minor & 0xff) | ((major & 0xfff) << 8) | ((minor & !0xff) << 12)
}
