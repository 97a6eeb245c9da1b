//! The on-disk layouts of squashfs 4.0 (squashfs-tools' `squashfs_fs.h`, the kernel's
//! `fs/squashfs/squashfs_fs.h`), little endian. The writer fills them, the verifier reads the
//! superblock.

use core::mem::size_of;

use zerocopy::little_endian::{U16, U32, U64};
use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout, Unaligned};

/// `hsqs`.
pub const MAGIC: u32 = 0x7371_7368;
/// "No table" in the superblock's table pointers.
pub const NOT_SET: u64 = u64::MAX;
/// Uncompressed size of a metadata block.
pub const METADATA_BYTES: usize = 8192;
/// In a metadata block header: the block is stored uncompressed.
pub const METADATA_UNCOMPRESSED: u16 = 0x8000;
/// In a data block size: the block is stored uncompressed.
pub const DATA_UNCOMPRESSED: u32 = 1 << 24;
/// No fragment.
pub const NO_FRAGMENT: u32 = u32::MAX;
/// No xattrs.
pub const NO_XATTR: u32 = u32::MAX;

/// Superblock flags.
pub mod flags {
    /// Inodes stored uncompressed.
    pub const UNCOMPRESSED_INODES: u16 = 0x0001;
    /// Data stored uncompressed.
    pub const UNCOMPRESSED_DATA: u16 = 0x0002;
    /// Fragments stored uncompressed.
    pub const UNCOMPRESSED_FRAGMENTS: u16 = 0x0008;
    /// No fragments.
    pub const NO_FRAGMENTS: u16 = 0x0010;
    /// Always fragments.
    pub const ALWAYS_FRAGMENTS: u16 = 0x0020;
    /// Duplicate files were stored once.
    pub const DUPLICATES: u16 = 0x0040;
    /// NFS export table present.
    pub const EXPORTABLE: u16 = 0x0080;
    /// Xattrs stored uncompressed.
    pub const UNCOMPRESSED_XATTRS: u16 = 0x0100;
    /// No xattrs.
    pub const NO_XATTRS: u16 = 0x0200;
    /// Compressor options follow the superblock.
    pub const COMPRESSOR_OPTIONS: u16 = 0x0400;
    /// Id table stored uncompressed.
    pub const UNCOMPRESSED_IDS: u16 = 0x0800;
}

/// The superblock, 96 bytes at byte 0.
#[repr(C)]
#[derive(Clone, Copy, Debug, FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned)]
pub struct SuperblockRaw {
    /// 0x00: [`MAGIC`].
    pub s_magic: U32,
    /// 0x04: inodes.
    pub inodes: U32,
    /// 0x08: creation time.
    pub mkfs_time: U32,
    /// 0x0C: data block size.
    pub block_size: U32,
    /// 0x10: fragment table entries.
    pub fragments: U32,
    /// 0x14: compressor id (1 gzip, 2 lzma, 3 lzo, 4 xz, 5 lz4, 6 zstd).
    pub compression: U16,
    /// 0x16: log2 of the block size.
    pub block_log: U16,
    /// 0x18: [`flags`].
    pub flags: U16,
    /// 0x1A: entries of the id table.
    pub no_ids: U16,
    /// 0x1C: major version, 4.
    pub s_major: U16,
    /// 0x1E: minor version, 0.
    pub s_minor: U16,
    /// 0x20: root inode reference (metadata block << 16 | offset).
    pub root_inode: U64,
    /// 0x28: bytes of the filesystem.
    pub bytes_used: U64,
    /// 0x30: id table index.
    pub id_table_start: U64,
    /// 0x38: xattr id table ([`NOT_SET`] without xattrs).
    pub xattr_id_table_start: U64,
    /// 0x40: inode table.
    pub inode_table_start: U64,
    /// 0x48: directory table.
    pub directory_table_start: U64,
    /// 0x50: fragment table index.
    pub fragment_table_start: U64,
    /// 0x58: export table index ([`NOT_SET`] when not exportable).
    pub lookup_table_start: U64,
}

const _: () = assert!(size_of::<SuperblockRaw>() == 96);

/// Inode types.
pub mod itype {
    /// Directory.
    pub const DIR: u16 = 1;
    /// Regular file.
    pub const FILE: u16 = 2;
    /// Symbolic link.
    pub const SYMLINK: u16 = 3;
    /// Block device.
    pub const BLKDEV: u16 = 4;
    /// Character device.
    pub const CHRDEV: u16 = 5;
    /// FIFO.
    pub const FIFO: u16 = 6;
    /// Socket.
    pub const SOCKET: u16 = 7;
    /// Extended directory, file, … (basic + 7).
    pub const EXTENDED: u16 = 7;
}
