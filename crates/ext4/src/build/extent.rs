//! Extents: splitting block runs into extents, and the extent tree (root in `i_block`,
//! index and leaf blocks below it).

use super::inode::Ino;
use super::{Prepared, MAX_EXTENT};
use crate::csum::{crc32c_raw, inode_seed};

/// Extent-tree blocks needed for `n` extents (0 when they fit in the inode).
pub(super) fn tree_blocks_for(n: u64, bs: u64) -> u64 {
    let per = (bs - 12) / 12;
    let mut m = n;
    let mut total = 0;
    while m > 4 {
        m = m.div_ceil(per);
        total += m;
    }
    total
}

/// Appends the physical run `(physical, len)` mapped from logical block `logical`, as
/// extents of at most 32768 blocks, extending the last extent when contiguous.
pub(super) fn push_run(extents: &mut Vec<(u64, u64, u64)>, logical: u64, physical: u64, len: u64) {
    let mut lb = logical;
    let mut off = 0;
    while off < len {
        let k = (len - off).min(MAX_EXTENT);
        // Merge with the previous extent when contiguous.
        if let Some(last) = extents.last_mut() {
            if last.0 + last.1 == lb
                && last.2 + last.1 == physical + off
                && last.1 + k <= MAX_EXTENT
            {
                last.1 += k;
                lb += k;
                off += k;
                continue;
            }
        }
        extents.push((lb, k, physical + off));
        lb += k;
        off += k;
    }
}

impl Prepared {
    /// Builds the extent tree: the 60-byte root and the tree blocks.
    pub(super) fn extent_tree(&self, r: &Ino) -> ([u8; 60], Vec<(u64, Vec<u8>)>) {
        let bs = self.geo.bs as usize;
        let per = (bs - 12) / 12;
        let header = |b: &mut [u8], n: usize, max: usize, depth: u16| {
            b[0..2].copy_from_slice(&0xF30Au16.to_le_bytes());
            b[2..4].copy_from_slice(&(n as u16).to_le_bytes());
            b[4..6].copy_from_slice(&(max as u16).to_le_bytes());
            b[6..8].copy_from_slice(&depth.to_le_bytes());
        };
        let leaf = |b: &mut [u8], (l, len, p): (u64, u64, u64)| {
            b[0..4].copy_from_slice(&(l as u32).to_le_bytes());
            b[4..6].copy_from_slice(&(len as u16).to_le_bytes());
            b[6..8].copy_from_slice(&((p >> 32) as u16).to_le_bytes());
            b[8..12].copy_from_slice(&(p as u32).to_le_bytes());
        };
        let index = |b: &mut [u8], (l, p): (u64, u64)| {
            b[0..4].copy_from_slice(&(l as u32).to_le_bytes());
            b[4..8].copy_from_slice(&(p as u32).to_le_bytes());
            b[8..10].copy_from_slice(&((p >> 32) as u16).to_le_bytes());
            b[10..12].copy_from_slice(&0u16.to_le_bytes());
        };
        let iseed = self.csum().map(|s| inode_seed(s, r.ino, 0));
        let mut root = [0u8; 60];
        let mut blocks = Vec::new();
        if r.extents.len() <= 4 {
            header(&mut root, r.extents.len(), 4, 0);
            for (k, &e) in r.extents.iter().enumerate() {
                leaf(&mut root[12 + 12 * k..24 + 12 * k], e);
            }
            return (root, blocks);
        }
        let mut tb = r.tree_blocks.iter().copied();
        let finish = |b: &mut Vec<u8>| {
            if let Some(s) = iseed {
                let t = 12 + 12 * per;
                let c = crc32c_raw(s, &b[..t]);
                b[t..t + 4].copy_from_slice(&c.to_le_bytes());
            }
        };
        // Leaves.
        let mut level: Vec<(u64, u64)> = Vec::new();
        for chunk in r.extents.chunks(per) {
            let nr = tb.next().unwrap_or(0);
            let mut b = vec![0u8; bs];
            header(&mut b, chunk.len(), per, 0);
            for (k, &e) in chunk.iter().enumerate() {
                leaf(&mut b[12 + 12 * k..24 + 12 * k], e);
            }
            finish(&mut b);
            level.push((chunk[0].0, nr));
            blocks.push((nr, b));
        }
        let mut depth = 1u16;
        while level.len() > 4 {
            let mut up = Vec::new();
            for chunk in level.chunks(per) {
                let nr = tb.next().unwrap_or(0);
                let mut b = vec![0u8; bs];
                header(&mut b, chunk.len(), per, depth);
                for (k, &e) in chunk.iter().enumerate() {
                    index(&mut b[12 + 12 * k..24 + 12 * k], e);
                }
                finish(&mut b);
                up.push((chunk[0].0, nr));
                blocks.push((nr, b));
            }
            level = up;
            depth += 1;
        }
        header(&mut root, level.len(), 4, depth);
        for (k, &e) in level.iter().enumerate() {
            index(&mut root[12 + 12 * k..24 + 12 * k], e);
        }
        (root, blocks)
    }
}
