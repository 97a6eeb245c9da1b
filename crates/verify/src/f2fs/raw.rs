//! The F2FS superblock as stored (`struct f2fs_super_block`, f2fs-tools `include/f2fs_fs.h`,
//! Linux `include/linux/f2fs_fs.h`): 3072 bytes at byte 1024 of blocks 0 and 1. Every bit
//! pattern is a valid value; [`parse_superblock`](super::parse_superblock) validates.

use zerocopy::little_endian::{U16, U32, U64};
use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout, Unaligned};

/// Bytes of `version` and `init_version`.
pub const VERSION_LEN: usize = 256;
/// Offset of `version` inside the superblock.
pub const VERSION_OFFSET: usize = 0x684;
/// Offset of `init_version` inside the superblock.
pub const INIT_VERSION_OFFSET: usize = 0x784;

/// `struct f2fs_super_block`.
#[derive(Clone, Copy, Debug, FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned)]
#[repr(C)]
pub struct SuperblockRaw {
    /// 0xF2F52010.
    pub magic: U32,
    /// Major version.
    pub major_ver: U16,
    /// Minor version.
    pub minor_ver: U16,
    /// log2 of the sector size.
    pub log_sectorsize: U32,
    /// log2 of sectors per block.
    pub log_sectors_per_block: U32,
    /// log2 of the block size (12).
    pub log_blocksize: U32,
    /// log2 of blocks per segment (9).
    pub log_blocks_per_seg: U32,
    /// Segments per section.
    pub segs_per_sec: U32,
    /// Sections per zone.
    pub secs_per_zone: U32,
    /// Offset of `crc` (with the sb_checksum feature).
    pub checksum_offset: U32,
    /// Blocks of the volume.
    pub block_count: U64,
    /// Sections of the main area.
    pub section_count: U32,
    /// Segments from segment0.
    pub segment_count: U32,
    /// Segments of the checkpoint area (2).
    pub segment_count_ckpt: U32,
    /// Segments of the SIT.
    pub segment_count_sit: U32,
    /// Segments of the NAT.
    pub segment_count_nat: U32,
    /// Segments of the SSA.
    pub segment_count_ssa: U32,
    /// Segments of the main area.
    pub segment_count_main: U32,
    /// First block of segment 0.
    pub segment0_blkaddr: U32,
    /// First block of the checkpoint area.
    pub cp_blkaddr: U32,
    /// First block of the SIT.
    pub sit_blkaddr: U32,
    /// First block of the NAT.
    pub nat_blkaddr: U32,
    /// First block of the SSA.
    pub ssa_blkaddr: U32,
    /// First block of the main area.
    pub main_blkaddr: U32,
    /// Root inode number.
    pub root_ino: U32,
    /// Node inode number.
    pub node_ino: U32,
    /// Meta inode number.
    pub meta_ino: U32,
    /// Volume UUID.
    pub uuid: [u8; 16],
    /// Volume label, UTF-16LE.
    pub volume_name: [U16; 512],
    /// Number of extensions.
    pub extension_count: U32,
    /// Cold-file extensions.
    pub extension_list: [[u8; 8]; 64],
    /// Extra checkpoint blocks.
    pub cp_payload: U32,
    /// The kernel version the volume was last used with (mkfs.f2fs: `uname`).
    pub version: [u8; VERSION_LEN],
    /// The kernel version it was made with.
    pub init_version: [u8; VERSION_LEN],
    /// Feature bits.
    pub feature: U32,
    /// Encryption level.
    pub encryption_level: u8,
    /// Encryption salt.
    pub encrypt_pw_salt: [u8; 16],
    /// Additional devices (`struct f2fs_device` × 8: a 64-byte path and `total_segments`).
    pub devs: [u8; 544],
    /// Quota inode numbers.
    pub qf_ino: [U32; 3],
    /// Hot-file extension count.
    pub hot_ext_count: u8,
    /// Filename encoding.
    pub s_encoding: U16,
    /// Filename encoding flags.
    pub s_encoding_flags: U16,
    /// Reserved.
    pub reserved: [u8; 306],
    /// CRC of the first `checksum_offset` bytes.
    pub crc: U32,
}

const _: () = assert!(size_of::<SuperblockRaw>() == 3072);

impl SuperblockRaw {
    /// An all-zero superblock (tests and writers).
    #[must_use]
    pub fn new_zeroed_sb() -> Self {
        <Self as zerocopy::FromZeros>::new_zeroed()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use core::mem::offset_of;

    #[test]
    fn offsets_match_f2fs_fs_h() {
        assert_eq!(offset_of!(SuperblockRaw, block_count), 0x24);
        assert_eq!(offset_of!(SuperblockRaw, segment0_blkaddr), 0x48);
        assert_eq!(offset_of!(SuperblockRaw, main_blkaddr), 0x5c);
        assert_eq!(offset_of!(SuperblockRaw, uuid), 0x6c);
        assert_eq!(offset_of!(SuperblockRaw, volume_name), 0x7c);
        assert_eq!(offset_of!(SuperblockRaw, version), VERSION_OFFSET);
        assert_eq!(offset_of!(SuperblockRaw, init_version), INIT_VERSION_OFFSET);
        assert_eq!(offset_of!(SuperblockRaw, feature), 0x884);
        assert_eq!(offset_of!(SuperblockRaw, crc), 0xbfc);
    }
}
