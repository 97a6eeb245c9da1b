//! Group metadata: block and inode bitmaps, group descriptors with their checksums, and
//! the free counts the superblock sums up.

use blockwise_geometry::BlockSink;

use super::{put, Prepared};
use crate::csum::crc32c_raw;
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

    /// Writes every group's bitmaps and builds the descriptor table.
    pub(super) fn write_groups<S: BlockSink + ?Sized>(
        &self,
        sink: &mut S,
        dirs_per_group: &[u64],
    ) -> Result<GroupTables, Error> {
        let g = &self.geo;
        let bs = g.bs;
        let csum_on = g.feat.metadata_csum || g.feat.uninit_bg;
        let mut gdt = vec![0u8; (g.gdt_blocks * bs) as usize];
        let mut free_blocks_total = 0u64;
        let mut free_inodes_total = 0u64;
        for grp in 0..g.groups {
            let gi = grp as usize;
            let start = g.group_start(grp);
            let glen = g.group_len(grp);
            let mut bb = vec![0u8; bs as usize];
            let mut used = 0u64;
            for k in 0..g.bpg {
                if k >= glen || g.used.get(start + k) {
                    bb[(k / 8) as usize] |= 1 << (k % 8);
                    if k < glen {
                        used += 1;
                    }
                }
            }
            let free_b = glen - used;
            free_blocks_total += free_b;
            let mut ib = vec![0u8; bs as usize];
            let ui = self.used_inodes(grp);
            for k in 0..ui {
                ib[(k / 8) as usize] |= 1 << (k % 8);
            }
            for byte in ib.iter_mut().skip((g.ipg / 8) as usize) {
                *byte = 0xff;
            }
            let free_i = g.ipg - ui;
            free_inodes_total += free_i;
            put(sink, g.loc[gi].block_bitmap * bs, &bb)?;
            put(sink, g.loc[gi].inode_bitmap * bs, &ib)?;
            let ds = g.desc_size as usize;
            let d = &mut gdt[gi * ds..(gi + 1) * ds];
            let p32 = |d: &mut [u8], o: usize, v: u64| {
                d[o..o + 4].copy_from_slice(&(v as u32).to_le_bytes())
            };
            let p16 = |d: &mut [u8], o: usize, v: u64| {
                d[o..o + 2].copy_from_slice(&(v as u16).to_le_bytes())
            };
            let loc = g.loc[gi];
            p32(d, 0x00, loc.block_bitmap);
            p32(d, 0x04, loc.inode_bitmap);
            p32(d, 0x08, loc.inode_table);
            p16(d, 0x0C, free_b);
            p16(d, 0x0E, free_i);
            p16(d, 0x10, dirs_per_group[gi]);
            let mut flags = 0u64;
            let unused = g.ipg - ui;
            if csum_on {
                flags |= 4; // ITABLE_ZEROED
                if ui == 0 {
                    flags |= 1; // INODE_UNINIT
                }
                p16(d, 0x1C, unused);
            }
            p16(d, 0x12, flags);
            if ds >= 64 {
                p32(d, 0x20, loc.block_bitmap >> 32);
                p32(d, 0x24, loc.inode_bitmap >> 32);
                p32(d, 0x28, loc.inode_table >> 32);
                p16(d, 0x2C, free_b >> 16);
                p16(d, 0x2E, free_i >> 16);
                p16(d, 0x30, dirs_per_group[gi] >> 16);
                if csum_on {
                    p16(d, 0x32, unused >> 16);
                }
            }
            if let Some(seed) = self.csum() {
                let bc = crc32c_raw(seed, &bb[..(g.bpg / 8) as usize]);
                let ic = crc32c_raw(seed, &ib[..(g.ipg / 8) as usize]);
                p16(d, 0x18, u64::from(bc));
                p16(d, 0x1A, u64::from(ic));
                if ds >= 64 {
                    p16(d, 0x38, u64::from(bc >> 16));
                    p16(d, 0x3A, u64::from(ic >> 16));
                }
                let c = crc32c_raw(seed, &(grp as u32).to_le_bytes());
                let c = crc32c_raw(c, d);
                p16(d, 0x1E, u64::from(c & 0xffff));
            } else if g.feat.uninit_bg {
                let c = crate::csum::crc16(0xffff, &self.uuid);
                let c = crate::csum::crc16(c, &(grp as u32).to_le_bytes());
                let c = crate::csum::crc16(c, &d[..0x1E]);
                let c = crate::csum::crc16(c, &d[0x20..]);
                p16(d, 0x1E, u64::from(c));
            }
        }
        Ok(GroupTables {
            gdt,
            free_blocks: free_blocks_total,
            free_inodes: free_inodes_total,
        })
    }
}
