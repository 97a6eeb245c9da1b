//! The superblock and its backups, with the identity fields (UUID, label, hash seed).

use blockwise_geometry::{BlockSink, Guid};
use zerocopy::little_endian::U32;
use zerocopy::{FromZeros, IntoBytes};

use super::groups::GroupTables;
use super::inode::{EXTRA_ISIZE, INODE_RAW};
use super::{put, Prepared};
use crate::geom::{has_super, LOG_GROUPS_PER_FLEX};
use crate::raw::{
    DefaultMountOpts, SuperFlags, SuperblockRaw, CRC32C_CHKSUM, DX_HASH_HALF_MD4, DYNAMIC_REV,
    ERRORS_CONTINUE, GOOD_OLD_FIRST_INO, JNL_BACKUP_BLOCKS, JOURNAL_INO, STATE_VALID_FS,
    SUPERBLOCK_OFFSET, SUPER_MAGIC,
};
use crate::{Error, Ext4Request};

/// The volume label, NUL padded; at most 16 bytes.
pub(super) fn label_bytes(req: &Ext4Request) -> Result<[u8; 16], Error> {
    let mut out = [0u8; 16];
    if let Some(l) = &req.label {
        crate::validate_label(l).map_err(Error::Invalid)?;
        out[..l.len()].copy_from_slice(l.as_bytes());
    }
    Ok(out)
}

/// The filesystem UUID (textual byte order): the pinned one, else derived from the seed.
pub(super) fn uuid_for(req: &Ext4Request) -> [u8; 16] {
    req.options
        .uuid
        .unwrap_or_else(|| Guid::derive(req.seed, "ext4-uuid", 0).to_uuid_bytes())
}

/// Formats a UUID the way `dumpe2fs` prints it.
pub(crate) fn uuid_string(u: &[u8; 16]) -> String {
    let mut s = String::new();
    for (i, b) in u.iter().enumerate() {
        if matches!(i, 4 | 6 | 8 | 10) {
            s.push('-');
        }
        s.push_str(&format!("{b:02x}"));
    }
    s
}

/// The directory hash seed derived from the seed.
pub(super) fn hash_seed_for(req: &Ext4Request) -> [u32; 4] {
    let words: [U32; 4] =
        zerocopy::transmute!(Guid::derive(req.seed, "ext4-hash-seed", 0).to_uuid_bytes());
    words.map(U32::get)
}

impl Prepared {
    /// Writes the superblock and the descriptor table into group 0 and every backup group.
    pub(super) fn write_superblocks<S: BlockSink + ?Sized>(
        &self,
        sink: &mut S,
        t: &GroupTables,
    ) -> Result<(), Error> {
        let g = &self.geo;
        let bs = g.bs;
        for grp in 0..g.groups {
            if !has_super(&g.feat, grp) {
                continue;
            }
            let sb = self.superblock(grp, t.free_blocks, t.free_inodes);
            let start = g.group_start(grp);
            // The primary sits at byte 1024 (of block 0, or block 1 with 1 KiB blocks);
            // a backup at the start of its group.
            let at = if grp == 0 {
                SUPERBLOCK_OFFSET
            } else {
                start * bs
            };
            put(sink, at, sb.as_bytes())?;
            put(sink, (start + 1) * bs, &t.gdt)?;
        }
        Ok(())
    }

    /// The superblock copy for group `grp` (0 = the primary).
    fn superblock(&self, grp: u64, free_blocks: u64, free_inodes: u64) -> SuperblockRaw {
        let g = &self.geo;
        let f = &g.feat;
        let ts = self.timestamp as u32;
        let log = g.bs.trailing_zeros() - 10;
        let mut s = SuperblockRaw::new_zeroed();
        s.s_inodes_count.set(g.inodes() as u32);
        s.s_blocks_count_lo.set(g.blocks as u32);
        s.s_r_blocks_count_lo.set(g.reserved_blocks as u32);
        s.s_free_blocks_count_lo.set(free_blocks as u32);
        s.s_free_inodes_count.set(free_inodes as u32);
        s.s_first_data_block.set(g.fdb as u32);
        s.s_log_block_size.set(log);
        s.s_log_cluster_size.set(log);
        s.s_blocks_per_group.set(g.bpg as u32);
        s.s_clusters_per_group.set(g.bpg as u32);
        s.s_inodes_per_group.set(g.ipg as u32);
        s.s_wtime.set(ts);
        s.s_max_mnt_count.set(-1);
        s.s_magic.set(SUPER_MAGIC);
        s.s_state.set(STATE_VALID_FS);
        s.s_errors.set(ERRORS_CONTINUE);
        s.s_lastcheck.set(ts);
        s.s_rev_level.set(DYNAMIC_REV);
        s.s_first_ino.set(GOOD_OLD_FIRST_INO);
        s.s_inode_size.set(g.inode_size as u16);
        s.s_block_group_nr.set(grp as u16);
        s.set_features(f.flags());
        s.s_uuid = self.uuid;
        s.s_volume_name = self.label;
        s.s_hash_seed = self.hash_seed.map(U32::new);
        s.s_def_hash_version = DX_HASH_HALF_MD4;
        if f.has_journal {
            s.s_journal_inum.set(JOURNAL_INO);
            s.s_jnl_backup_type = JNL_BACKUP_BLOCKS;
        }
        s.s_desc_size
            .set(if f.bit64 { g.desc_size as u16 } else { 0 });
        s.s_default_mount_opts
            .set((DefaultMountOpts::XATTR_USER | DefaultMountOpts::ACL).bits());
        s.s_mkfs_time.set(ts);
        if let Some(j) = self.jnl_blocks() {
            s.s_jnl_blocks = j;
        }
        if f.bit64 {
            s.s_blocks_count_hi.set((g.blocks >> 32) as u32);
            s.s_r_blocks_count_hi.set((g.reserved_blocks >> 32) as u32);
            s.s_free_blocks_count_hi.set((free_blocks >> 32) as u32);
        }
        if g.inode_size as usize >= INODE_RAW {
            s.s_min_extra_isize.set(EXTRA_ISIZE);
            s.s_want_extra_isize.set(EXTRA_ISIZE);
        }
        s.s_flags.set(SuperFlags::SIGNED_HASH.bits());
        s.s_raid_stride.set(g.stride as u16);
        s.s_raid_stripe_width.set(g.stripe_width);
        if f.flex_bg {
            s.s_log_groups_per_flex = LOG_GROUPS_PER_FLEX;
        }
        if f.metadata_csum {
            s.s_checksum_type = CRC32C_CHKSUM;
            s.s_checksum.set(s.checksum());
        }
        s
    }
}
