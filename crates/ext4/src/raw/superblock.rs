//! The superblock (`struct ext4_super_block`, ondisk §"Super Block").

use core::mem::{offset_of, size_of};

use zerocopy::little_endian::{I16, U16, U32, U64};
use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout, Unaligned};

use super::flags::{CompatFeatures, FeatureSet, IncompatFeatures, RoCompatFeatures};
use crate::csum::crc32c_raw;

/// The superblock: 1024 bytes at byte 1024 of the volume; backup copies at the start of
/// groups 1, 3, 5, 7, 9, 25, … (sparse_super) with `s_block_group_nr` set. 64-bit counts
/// are split into `_lo` and `_hi` words; the `_hi` words count only with the 64bit feature.
#[repr(C)]
#[derive(Clone, Copy, Debug, FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned)]
pub struct SuperblockRaw {
    /// 0x00: total inodes (`s_inodes_per_group` × groups).
    pub s_inodes_count: U32,
    /// 0x04: total blocks, low 32 bits.
    pub s_blocks_count_lo: U32,
    /// 0x08: blocks reserved for the superuser, low 32 bits.
    pub s_r_blocks_count_lo: U32,
    /// 0x0C: free blocks, low 32 bits.
    pub s_free_blocks_count_lo: U32,
    /// 0x10: free inodes.
    pub s_free_inodes_count: U32,
    /// 0x14: the block holding the superblock: 1 with 1 KiB blocks, else 0.
    pub s_first_data_block: U32,
    /// 0x18: block size = 1024 << this.
    pub s_log_block_size: U32,
    /// 0x1C: cluster size = 1024 << this (equals `s_log_block_size` without bigalloc).
    pub s_log_cluster_size: U32,
    /// 0x20: blocks per group.
    pub s_blocks_per_group: U32,
    /// 0x24: clusters per group.
    pub s_clusters_per_group: U32,
    /// 0x28: inodes per group.
    pub s_inodes_per_group: U32,
    /// 0x2C: last mount time (seconds since the epoch).
    pub s_mtime: U32,
    /// 0x30: last write time.
    pub s_wtime: U32,
    /// 0x34: mounts since the last fsck.
    pub s_mnt_count: U16,
    /// 0x36: mounts allowed before an fsck; -1 = no limit.
    pub s_max_mnt_count: I16,
    /// 0x38: [`SUPER_MAGIC`](super::SUPER_MAGIC).
    pub s_magic: U16,
    /// 0x3A: 1 = cleanly unmounted, 2 = errors detected, 4 = orphans being recovered.
    pub s_state: U16,
    /// 0x3C: behaviour on errors: 1 continue, 2 remount read-only, 3 panic.
    pub s_errors: U16,
    /// 0x3E: minor revision level.
    pub s_minor_rev_level: U16,
    /// 0x40: time of the last check.
    pub s_lastcheck: U32,
    /// 0x44: seconds between forced checks.
    pub s_checkinterval: U32,
    /// 0x48: creator OS: 0 Linux, 1 Hurd, 2 Masix, 3 FreeBSD, 4 Lites.
    pub s_creator_os: U32,
    /// 0x4C: revision level: 0 good old, 1 dynamic.
    pub s_rev_level: U32,
    /// 0x50: default uid for reserved blocks.
    pub s_def_resuid: U16,
    /// 0x52: default gid for reserved blocks.
    pub s_def_resgid: U16,
    /// 0x54: first non-reserved inode (revision 1).
    pub s_first_ino: U32,
    /// 0x58: inode record size (revision 1; 128 for revision 0).
    pub s_inode_size: U16,
    /// 0x5A: the group holding this copy of the superblock.
    pub s_block_group_nr: U16,
    /// 0x5C: compatible features ([`CompatFeatures`]).
    pub s_feature_compat: U32,
    /// 0x60: incompatible features ([`IncompatFeatures`]).
    pub s_feature_incompat: U32,
    /// 0x64: read-only compatible features ([`RoCompatFeatures`]).
    pub s_feature_ro_compat: U32,
    /// 0x68: volume UUID (byte order as printed).
    pub s_uuid: [u8; 16],
    /// 0x78: volume label, NUL padded.
    pub s_volume_name: [u8; 16],
    /// 0x88: directory where last mounted, NUL padded.
    pub s_last_mounted: [u8; 64],
    /// 0xC8: compression algorithms (unused).
    pub s_algorithm_usage_bitmap: U32,
    /// 0xCC: blocks to preallocate for files.
    pub s_prealloc_blocks: u8,
    /// 0xCD: blocks to preallocate for directories.
    pub s_prealloc_dir_blocks: u8,
    /// 0xCE: descriptor blocks reserved for growth (`resize_inode`).
    pub s_reserved_gdt_blocks: U16,
    /// 0xD0: UUID of the external journal.
    pub s_journal_uuid: [u8; 16],
    /// 0xE0: inode of the internal journal (8).
    pub s_journal_inum: U32,
    /// 0xE4: device number of the external journal.
    pub s_journal_dev: U32,
    /// 0xE8: head of the orphan inode list.
    pub s_last_orphan: U32,
    /// 0xEC: seed of the directory-index hash.
    pub s_hash_seed: [U32; 4],
    /// 0xFC: default directory hash ([`DX_HASH_HALF_MD4`](super::DX_HASH_HALF_MD4), …).
    pub s_def_hash_version: u8,
    /// 0xFD: 1 = `s_jnl_blocks` holds a copy of the journal inode's block map.
    pub s_jnl_backup_type: u8,
    /// 0xFE: group descriptor size with 64bit (64); 0 or 32 otherwise.
    pub s_desc_size: U16,
    /// 0x100: default mount options ([`DefaultMountOpts`](super::DefaultMountOpts)).
    pub s_default_mount_opts: U32,
    /// 0x104: first metablock group (meta_bg).
    pub s_first_meta_bg: U32,
    /// 0x108: filesystem creation time.
    pub s_mkfs_time: U32,
    /// 0x10C: the journal inode's `i_block[0..15]`, then `i_size_high`, `i_size`.
    pub s_jnl_blocks: [U32; 17],
    /// 0x150: total blocks, high 32 bits (64bit).
    pub s_blocks_count_hi: U32,
    /// 0x154: reserved blocks, high 32 bits (64bit).
    pub s_r_blocks_count_hi: U32,
    /// 0x158: free blocks, high 32 bits (64bit).
    pub s_free_blocks_count_hi: U32,
    /// 0x15C: every inode has at least this many extra bytes.
    pub s_min_extra_isize: U16,
    /// 0x15E: new inodes should have this many extra bytes.
    pub s_want_extra_isize: U16,
    /// 0x160: miscellaneous flags ([`SuperFlags`](super::SuperFlags)).
    pub s_flags: U32,
    /// 0x164: RAID stride: blocks read or written per disk before moving on.
    pub s_raid_stride: U16,
    /// 0x166: seconds between multi-mount protection updates.
    pub s_mmp_update_interval: U16,
    /// 0x168: block of the multi-mount protection data.
    pub s_mmp_block: U64,
    /// 0x170: RAID stripe width: blocks on all data disks.
    pub s_raid_stripe_width: U32,
    /// 0x174: groups per flex group = 1 << this (flex_bg).
    pub s_log_groups_per_flex: u8,
    /// 0x175: metadata checksum algorithm ([`CRC32C_CHKSUM`](super::CRC32C_CHKSUM)).
    pub s_checksum_type: u8,
    /// 0x176: encryption level.
    pub s_encryption_level: u8,
    /// 0x177: padding.
    pub s_reserved_pad: u8,
    /// 0x178: KiB written over the filesystem's lifetime.
    pub s_kbytes_written: U64,
    /// 0x180: inode of the active snapshot.
    pub s_snapshot_inum: U32,
    /// 0x184: id of the active snapshot.
    pub s_snapshot_id: U32,
    /// 0x188: blocks reserved for the active snapshot.
    pub s_snapshot_r_blocks_count: U64,
    /// 0x190: inode of the head of the snapshot list.
    pub s_snapshot_list: U32,
    /// 0x194: errors seen.
    pub s_error_count: U32,
    /// 0x198: time of the first error.
    pub s_first_error_time: U32,
    /// 0x19C: inode of the first error.
    pub s_first_error_ino: U32,
    /// 0x1A0: block of the first error.
    pub s_first_error_block: U64,
    /// 0x1A8: function of the first error, NUL padded.
    pub s_first_error_func: [u8; 32],
    /// 0x1C8: source line of the first error.
    pub s_first_error_line: U32,
    /// 0x1CC: time of the last error.
    pub s_last_error_time: U32,
    /// 0x1D0: inode of the last error.
    pub s_last_error_ino: U32,
    /// 0x1D4: source line of the last error.
    pub s_last_error_line: U32,
    /// 0x1D8: block of the last error.
    pub s_last_error_block: U64,
    /// 0x1E0: function of the last error, NUL padded.
    pub s_last_error_func: [u8; 32],
    /// 0x200: mount options, NUL-terminated text.
    pub s_mount_opts: [u8; 64],
    /// 0x240: user quota inode.
    pub s_usr_quota_inum: U32,
    /// 0x244: group quota inode.
    pub s_grp_quota_inum: U32,
    /// 0x248: overhead clusters (0 = compute at mount).
    pub s_overhead_clusters: U32,
    /// 0x24C: the two backup groups of sparse_super2.
    pub s_backup_bgs: [U32; 2],
    /// 0x254: encryption algorithms in use.
    pub s_encrypt_algos: [u8; 4],
    /// 0x258: salt for the string2key algorithm.
    pub s_encrypt_pw_salt: [u8; 16],
    /// 0x268: lost+found inode.
    pub s_lpf_ino: U32,
    /// 0x26C: project quota inode.
    pub s_prj_quota_inum: U32,
    /// 0x270: checksum seed, used instead of crc32c(uuid) with `metadata_csum_seed`.
    pub s_checksum_seed: U32,
    /// 0x274: high 8 bits of `s_wtime`.
    pub s_wtime_hi: u8,
    /// 0x275: high 8 bits of `s_mtime`.
    pub s_mtime_hi: u8,
    /// 0x276: high 8 bits of `s_mkfs_time`.
    pub s_mkfs_time_hi: u8,
    /// 0x277: high 8 bits of `s_lastcheck`.
    pub s_lastcheck_hi: u8,
    /// 0x278: high 8 bits of `s_first_error_time`.
    pub s_first_error_time_hi: u8,
    /// 0x279: high 8 bits of `s_last_error_time`.
    pub s_last_error_time_hi: u8,
    /// 0x27A: error code of the first error.
    pub s_first_error_errcode: u8,
    /// 0x27B: error code of the last error.
    pub s_last_error_errcode: u8,
    /// 0x27C: filename charset encoding (casefold).
    pub s_encoding: U16,
    /// 0x27E: filename charset encoding flags.
    pub s_encoding_flags: U16,
    /// 0x280: orphan file inode.
    pub s_orphan_file_inum: U32,
    /// 0x284: padding to the end of the block.
    pub s_reserved: [U32; 94],
    /// 0x3FC: crc32c of bytes 0..0x3FC (metadata_csum); see [`SuperblockRaw::checksum`].
    pub s_checksum: U32,
}

const _: () = assert!(size_of::<SuperblockRaw>() == 1024);
const _: () = assert!(offset_of!(SuperblockRaw, s_magic) == 0x38);
const _: () = assert!(offset_of!(SuperblockRaw, s_first_ino) == 0x54);
const _: () = assert!(offset_of!(SuperblockRaw, s_hash_seed) == 0xEC);
const _: () = assert!(offset_of!(SuperblockRaw, s_desc_size) == 0xFE);
const _: () = assert!(offset_of!(SuperblockRaw, s_jnl_blocks) == 0x10C);
const _: () = assert!(offset_of!(SuperblockRaw, s_blocks_count_hi) == 0x150);
const _: () = assert!(offset_of!(SuperblockRaw, s_raid_stripe_width) == 0x170);
const _: () = assert!(offset_of!(SuperblockRaw, s_checksum_seed) == 0x270);
const _: () = assert!(offset_of!(SuperblockRaw, s_checksum) == 0x3FC);

impl SuperblockRaw {
    /// The metadata_csum value for this superblock: raw CRC32C (seed !0) of every byte
    /// before `s_checksum`. `s_checksum` must equal it when `metadata_csum` is set.
    #[must_use]
    pub fn checksum(&self) -> u32 {
        let (covered, _) = self
            .as_bytes()
            .split_at(offset_of!(SuperblockRaw, s_checksum));
        crc32c_raw(0xffff_ffff, covered)
    }

    /// The three feature words.
    #[must_use]
    pub fn features(&self) -> FeatureSet {
        FeatureSet {
            compat: CompatFeatures::from_bits_retain(self.s_feature_compat.get()),
            incompat: IncompatFeatures::from_bits_retain(self.s_feature_incompat.get()),
            ro_compat: RoCompatFeatures::from_bits_retain(self.s_feature_ro_compat.get()),
        }
    }

    /// Stores the three feature words.
    pub fn set_features(&mut self, f: FeatureSet) {
        self.s_feature_compat.set(f.compat.bits());
        self.s_feature_incompat.set(f.incompat.bits());
        self.s_feature_ro_compat.set(f.ro_compat.bits());
    }
}
