//! Raw on-disk structures of ext2/3/4 and its JBD2 journal, as zerocopy structs: every bit
//! pattern is a valid value, so reading one is a bounds check and a copy
//! (`SuperblockRaw::read_from_bytes`), and writing one is `.as_bytes()`.
//!
//! Field names follow the kernel's `fs/ext4/ext4.h`, `fs/ext4/ext4_extents.h`,
//! `fs/ext4/xattr.h` and `include/linux/jbd2.h` (also e2fsprogs `lib/ext2fs/ext2_fs.h`);
//! section numbers in the doc comments refer to the kernel's
//! `Documentation/filesystems/ext4/` ("ondisk" chapters). ext4 is little-endian, the JBD2
//! journal big-endian. Nothing here is validated: a field holds what the disk holds.
//!
//! ```text
//! volume (block size bs = 1024 << s_log_block_size)
//! byte 0      ┌──────────────────────────────┐
//!             │ 1024 bytes boot area         │
//! byte 1024   ├──────────────────────────────┤
//!             │ SuperblockRaw (1024 bytes)   │ magic 0xEF53 at 0x38, crc32c at 0x3FC
//! block fdb+1 ├──────────────────────────────┤ fdb = s_first_data_block (1 if bs = 1024)
//!             │ GroupDescRaw ×groups (32 B)  │ or GroupDesc64Raw (64 B) with 64bit
//!             ├──────────────────────────────┤
//!             │ bitmaps, inode tables        │ InodeRaw (160 B) per s_inode_size record
//!             │ data blocks                  │ extent tree nodes: ExtentHeaderRaw + 12-byte
//!             │                              │   ExtentRaw / ExtentIdxRaw entries (+ tail)
//!             │                              │ directories: DirEntryRaw records, DirEntryTailRaw,
//!             │                              │   htree blocks DxRootRaw / DxNodeRaw + DxEntryRaw
//!             │                              │ xattr blocks: XattrHeaderRaw + XattrEntryRaw
//!             │ journal (inode 8)            │ block 0: JournalSuperblockRaw (big-endian)
//!             └──────────────────────────────┘
//! groups 1 and powers of 3, 5, 7 (sparse_super) begin with a superblock + descriptor copy
//! ```

mod dir;
mod extent;
mod flags;
mod group;
mod inode;
mod jbd2;
mod superblock;
mod xattr;

pub use dir::{
    DirEntryRaw, DirEntryTailRaw, DxCountLimitRaw, DxEntryRaw, DxNodeRaw, DxRootInfoRaw, DxRootRaw,
    DxTailRaw,
};
pub use extent::{ExtentHeaderRaw, ExtentIdxRaw, ExtentRaw, ExtentTailRaw};
pub use flags::{
    CompatFeatures, DefaultMountOpts, Feature, FeatureSet, GroupFlags, IncompatFeatures,
    InodeFlags, RoCompatFeatures, SuperFlags, FEATURE_NAMES,
};
pub use group::{GroupDesc64Raw, GroupDescRaw};
pub use inode::InodeRaw;
pub use jbd2::{JournalHeaderRaw, JournalSuperblockRaw};
pub use superblock::SuperblockRaw;
pub use xattr::{XattrEntryRaw, XattrHeaderRaw, XattrIbodyHeaderRaw};

// --- Superblock ---

/// Byte offset of the primary superblock from the start of the volume.
pub const SUPERBLOCK_OFFSET: u64 = 1024;
/// `EXT4_SUPER_MAGIC`, in `s_magic`.
pub const SUPER_MAGIC: u16 = 0xEF53;
/// `EXT4_GOOD_OLD_REV`: revision 0, fixed 128-byte inodes, first inode 11.
pub const GOOD_OLD_REV: u32 = 0;
/// `EXT4_DYNAMIC_REV`: revision 1, variable inode size and feature words.
pub const DYNAMIC_REV: u32 = 1;
/// `EXT4_VALID_FS` in `s_state`: cleanly unmounted.
pub const STATE_VALID_FS: u16 = 1;
/// `EXT4_ERRORS_CONTINUE` in `s_errors`.
pub const ERRORS_CONTINUE: u16 = 1;
/// `EXT4_CRC32C_CHKSUM` in `s_checksum_type`.
pub const CRC32C_CHKSUM: u8 = 1;
/// `EXT3_JNL_BACKUP_BLOCKS` in `s_jnl_backup_type`: `s_jnl_blocks` copies the journal
/// inode's `i_block`, `i_size_high` and `i_size`.
pub const JNL_BACKUP_BLOCKS: u8 = 1;
/// `DX_HASH_LEGACY` in `s_def_hash_version` and `dx_root_info.hash_version`.
pub const DX_HASH_LEGACY: u8 = 0;
/// `DX_HASH_HALF_MD4`.
pub const DX_HASH_HALF_MD4: u8 = 1;
/// `DX_HASH_TEA`.
pub const DX_HASH_TEA: u8 = 2;

// --- Reserved inodes ---

/// Bad blocks inode.
pub const BAD_INO: u32 = 1;
/// Root directory inode.
pub const ROOT_INO: u32 = 2;
/// User quota inode.
pub const USR_QUOTA_INO: u32 = 3;
/// Group quota inode.
pub const GRP_QUOTA_INO: u32 = 4;
/// Boot loader inode.
pub const BOOT_LOADER_INO: u32 = 5;
/// Undelete directory inode.
pub const UNDEL_DIR_INO: u32 = 6;
/// Reserved group descriptors inode (`resize_inode`).
pub const RESIZE_INO: u32 = 7;
/// Internal journal inode.
pub const JOURNAL_INO: u32 = 8;
/// `EXT4_GOOD_OLD_FIRST_INO`: the first non-reserved inode (lost+found by convention).
pub const GOOD_OLD_FIRST_INO: u32 = 11;
/// `EXT4_N_BLOCKS`: 32-bit words in `i_block` (60 bytes).
pub const N_BLOCKS: usize = 15;
/// `EXT4_GOOD_OLD_INODE_SIZE`: the inode size of revision 0 and the part of every inode
/// record before `i_extra_isize`.
pub const GOOD_OLD_INODE_SIZE: u16 = 128;

// --- i_mode file types ---

/// Mask of the file type bits in `i_mode`.
pub const S_IFMT: u16 = 0xF000;
/// Socket.
pub const S_IFSOCK: u16 = 0xC000;
/// Symbolic link.
pub const S_IFLNK: u16 = 0xA000;
/// Regular file.
pub const S_IFREG: u16 = 0x8000;
/// Block device.
pub const S_IFBLK: u16 = 0x6000;
/// Directory.
pub const S_IFDIR: u16 = 0x4000;
/// Character device.
pub const S_IFCHR: u16 = 0x2000;
/// FIFO.
pub const S_IFIFO: u16 = 0x1000;

// --- Directory entry file types (`file_type` with the filetype feature) ---

/// Unknown.
pub const FT_UNKNOWN: u8 = 0;
/// Regular file.
pub const FT_REG_FILE: u8 = 1;
/// Directory.
pub const FT_DIR: u8 = 2;
/// Character device.
pub const FT_CHRDEV: u8 = 3;
/// Block device.
pub const FT_BLKDEV: u8 = 4;
/// FIFO.
pub const FT_FIFO: u8 = 5;
/// Socket.
pub const FT_SOCK: u8 = 6;
/// Symbolic link.
pub const FT_SYMLINK: u8 = 7;
/// `EXT4_FT_DIR_CSUM`: marks the checksum tail of a directory leaf block.
pub const FT_DIR_CSUM: u8 = 0xDE;
/// `EXT4_NAME_LEN`: longest directory entry name.
pub const NAME_LEN: usize = 255;

// --- Extents ---

/// `EXT4_EXT_MAGIC` in `eh_magic`.
pub const EXT_MAGIC: u16 = 0xF30A;
/// `EXT_INIT_MAX_LEN`: longest initialized extent; a larger `ee_len` marks an unwritten one.
pub const EXT_INIT_MAX_LEN: u16 = 32768;
/// Most extent-tree levels the kernel builds (`EXT4_MAX_EXTENT_DEPTH`).
pub const EXT_MAX_DEPTH: u16 = 5;

// --- Extended attributes ---

/// `EXT4_XATTR_MAGIC` in `h_magic` of an xattr block and of the in-inode area.
pub const XATTR_MAGIC: u32 = 0xEA02_0000;
/// `e_name_index` of `user.` attributes.
pub const XATTR_INDEX_USER: u8 = 1;
/// `e_name_index` of `system.posix_acl_access`.
pub const XATTR_INDEX_POSIX_ACL_ACCESS: u8 = 2;
/// `e_name_index` of `system.posix_acl_default`.
pub const XATTR_INDEX_POSIX_ACL_DEFAULT: u8 = 3;
/// `e_name_index` of `trusted.` attributes.
pub const XATTR_INDEX_TRUSTED: u8 = 4;
/// `e_name_index` of `security.` attributes.
pub const XATTR_INDEX_SECURITY: u8 = 6;
/// `e_name_index` of other `system.` attributes (e.g. `system.data`).
pub const XATTR_INDEX_SYSTEM: u8 = 7;

// --- JBD2 ---

/// `JBD2_MAGIC_NUMBER` in `h_magic` of every journal metadata block.
pub const JBD2_MAGIC_NUMBER: u32 = 0xC03B_3998;
/// `JBD2_SUPERBLOCK_V1` in `h_blocktype`.
pub const JBD2_SUPERBLOCK_V1: u32 = 3;
/// `JBD2_SUPERBLOCK_V2` in `h_blocktype`.
pub const JBD2_SUPERBLOCK_V2: u32 = 4;
/// `JBD2_MIN_JOURNAL_BLOCKS`: the smallest journal jbd2 accepts.
pub const JBD2_MIN_JOURNAL_BLOCKS: u32 = 1024;

/// Copies `value`'s bytes to `buf[offset..]` (the writer's one way to place a raw struct
/// inside a larger block).
///
/// # Panics
/// When `buf` is shorter than `offset + size_of::<T>()`: the writer sizes its blocks from
/// the same layouts, so this is a bug, never a disk value.
pub(crate) fn put_struct<T: zerocopy::IntoBytes + zerocopy::Immutable>(
    buf: &mut [u8],
    offset: usize,
    value: &T,
) {
    let bytes = value.as_bytes();
    buf[offset..offset + bytes.len()].copy_from_slice(bytes);
}
