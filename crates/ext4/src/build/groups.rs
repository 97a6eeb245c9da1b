//! Group metadata: block and inode bitmaps, group descriptors with their checksums, and
//! the free counts the superblock sums up.

use core::mem::{offset_of, size_of};

use blockwise_geometry::BlockSink;
use zerocopy::{FromZeros, IntoBytes};

use super::{put, Prepared};
use crate::csum::{crc16, crc32c_raw};
use crate::raw::{GroupDesc64Raw, GroupDescRaw, GroupFlags};
use crate::Error;

/// The descriptor table and the totals for the superblock.
pub(super) struct GroupTables {
    /// The whole descriptor table (`gdt_blocks` blocks).
    pub gdt: Vec<u8>,
    /// Free blocks over all groups.
    pub free_blocks: u64,
    /// Free inodes over all groups.
    pub free_inodes: u64,
}

/// What one group holds, for its descriptor.
struct GroupCounts {
    free_blocks: u64,
    free_inodes: u64,
    used_inodes: u64,
    dirs: u64,
}

impl Prepared {
    /// Inodes in use in group `grp`: every slot up to the highest inode number (reserved
    /// and unused ones count as used).
    fn used_inodes(&self, grp: u64) -> u64 {
        let g = &self.geo;
        let first = grp * g.ipg + 1;
        let last = ((grp + 1) * g.ipg).min(u64::from(self.last_ino));
        if last >= first {
            last - first + 1
        } else {
            0
        }
    }

    /// Group `grp`'s block bitmap and its free block count. Bits past the end of the
    /// filesystem (in a short last group) are set.
    fn block_bitmap(&self, grp: u64) -> (Vec<u8>, u64) {
        let g = &self.geo;
        let start = g.group_start(grp);
        let glen = g.group_len(grp);
        let mut bb = vec![0u8; g.bs as usize];
        let used = g.used.fill_bits(start, glen, &mut bb);
        if glen < g.bpg {
            crate::geom::set_bits(&mut bb, glen, g.bpg);
        }
        (bb, glen - used)
    }

    /// An inode bitmap with the first `used` inodes set; the bytes past
    /// `s_inodes_per_group` bits are 0xFF, as e2fsck wants them.
    fn inode_bitmap(&self, used: u64) -> Vec<u8> {
        let g = &self.geo;
        let mut ib = vec![0u8; g.bs as usize];
        for k in 0..used {
            ib[(k / 8) as usize] |= 1 << (k % 8);
        }
        for byte in ib.iter_mut().skip((g.ipg / 8) as usize) {
            *byte = 0xff;
        }
        ib
    }

    /// Group `grp`'s descriptor (the 64-byte form; the table keeps `s_desc_size` bytes of
    /// it), checksummed.
    fn descriptor(&self, grp: u64, c: &GroupCounts, bb: &[u8], ib: &[u8]) -> GroupDesc64Raw {
        let g = &self.geo;
        let ds = g.desc_size as usize;
        let csum_on = g.feat.metadata_csum || g.feat.uninit_bg;
        let loc = g.loc[grp as usize];
        let unused = g.ipg - c.used_inodes;
        let mut d = GroupDesc64Raw::new_zeroed();
        let lo = &mut d.base;
        lo.bg_block_bitmap_lo.set(loc.block_bitmap as u32);
        lo.bg_inode_bitmap_lo.set(loc.inode_bitmap as u32);
        lo.bg_inode_table_lo.set(loc.inode_table as u32);
        lo.bg_free_blocks_count_lo.set(c.free_blocks as u16);
        lo.bg_free_inodes_count_lo.set(c.free_inodes as u16);
        lo.bg_used_dirs_count_lo.set(c.dirs as u16);
        let mut flags = GroupFlags::empty();
        if csum_on {
            flags |= GroupFlags::ITABLE_ZEROED;
            if c.used_inodes == 0 {
                flags |= GroupFlags::INODE_UNINIT;
            }
            lo.bg_itable_unused_lo.set(unused as u16);
        }
        lo.bg_flags.set(flags.bits());
        d.bg_block_bitmap_hi.set((loc.block_bitmap >> 32) as u32);
        d.bg_inode_bitmap_hi.set((loc.inode_bitmap >> 32) as u32);
        d.bg_inode_table_hi.set((loc.inode_table >> 32) as u32);
        d.bg_free_blocks_count_hi.set((c.free_blocks >> 16) as u16);
        d.bg_free_inodes_count_hi.set((c.free_inodes >> 16) as u16);
        d.bg_used_dirs_count_hi.set((c.dirs >> 16) as u16);
        if csum_on {
            d.bg_itable_unused_hi.set((unused >> 16) as u16);
        }
        let group = (grp as u32).to_le_bytes();
        if let Some(seed) = self.csum() {
            let bc = crc32c_raw(seed, &bb[..(g.bpg / 8) as usize]);
            let ic = crc32c_raw(seed, &ib[..(g.ipg / 8) as usize]);
            d.base.bg_block_bitmap_csum_lo.set(bc as u16);
            d.base.bg_inode_bitmap_csum_lo.set(ic as u16);
            d.bg_block_bitmap_csum_hi.set((bc >> 16) as u16);
            d.bg_inode_bitmap_csum_hi.set((ic >> 16) as u16);
            let c = crc32c_raw(crc32c_raw(seed, &group), &d.as_bytes()[..ds]);
            d.base.bg_checksum.set(c as u16);
        } else if g.feat.uninit_bg {
            // crc16 over uuid, group and the descriptor without its checksum field.
            let bytes = &d.as_bytes()[..ds];
            let (head, rest) = bytes.split_at(offset_of!(GroupDescRaw, bg_checksum));
            let tail = &rest[size_of::<u16>()..];
            let c = crc16(crc16(crc16(crc16(0xffff, &self.uuid), &group), head), tail);
            d.base.bg_checksum.set(c);
        }
        d
    }

    /// Writes every group's bitmaps and builds the descriptor table.
    pub(super) fn write_groups<S: BlockSink + ?Sized>(
        &self,
        sink: &mut S,
        dirs_per_group: &[u64],
    ) -> Result<GroupTables, Error> {
        let g = &self.geo;
        let bs = g.bs;
        let ds = g.desc_size as usize;
        let mut gdt = vec![0u8; (g.gdt_blocks * bs) as usize];
        let mut free_blocks_total = 0u64;
        let mut free_inodes_total = 0u64;
        for grp in 0..g.groups {
            let gi = grp as usize;
            let (bb, free_blocks) = self.block_bitmap(grp);
            let used_inodes = self.used_inodes(grp);
            let ib = self.inode_bitmap(used_inodes);
            let counts = GroupCounts {
                free_blocks,
                free_inodes: g.ipg - used_inodes,
                used_inodes,
                dirs: dirs_per_group[gi],
            };
            free_blocks_total += counts.free_blocks;
            free_inodes_total += counts.free_inodes;
            put(sink, g.loc[gi].block_bitmap * bs, &bb)?;
            put(sink, g.loc[gi].inode_bitmap * bs, &ib)?;
            let d = self.descriptor(grp, &counts, &bb, &ib);
            gdt[gi * ds..(gi + 1) * ds].copy_from_slice(&d.as_bytes()[..ds]);
        }
        Ok(GroupTables {
            gdt,
            free_blocks: free_blocks_total,
            free_inodes: free_inodes_total,
        })
    }
}
