//! Extents: splitting block runs into extents, and the extent tree (root in `i_block`,
//! index and leaf blocks below it).

use core::mem::size_of;

use zerocopy::little_endian::{U16, U32};
use zerocopy::{Immutable, IntoBytes};

use super::inode::Ino;
use super::Prepared;
use crate::csum::{crc32c_raw, inode_seed};
use crate::raw::{
    put_struct, ExtentHeaderRaw, ExtentIdxRaw, ExtentRaw, ExtentTailRaw, EXT_INIT_MAX_LEN,
    EXT_MAGIC, N_BLOCKS,
};

/// The longest extent written.
pub(super) const MAX_EXTENT: u64 = EXT_INIT_MAX_LEN as u64;
/// Header size; entries follow it.
const HEADER: usize = size_of::<ExtentHeaderRaw>();
/// Leaf and index entries have the same size.
const ENTRY: usize = size_of::<ExtentRaw>();
const _: () = assert!(size_of::<ExtentIdxRaw>() == ENTRY);
/// Entries of the root in `i_block`.
const ROOT_ENTRIES: usize = (N_BLOCKS * 4 - HEADER) / ENTRY;

/// Entries of a tree node in its own block.
fn entries_per_block(bs: u64) -> u64 {
    (bs - HEADER as u64) / ENTRY as u64
}

/// Extent-tree blocks needed for `n` extents (0 when they fit in the inode).
pub(super) fn tree_blocks_for(n: u64, bs: u64) -> u64 {
    let per = entries_per_block(bs);
    let mut m = n;
    let mut total = 0;
    while m > ROOT_ENTRIES as u64 {
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
        if extents.is_empty() {
            // Most files are one extent: a first push would make room for four (96 bytes
            // a file, kept until the inode tables are written).
            extents.reserve_exact(1);
        }
        extents.push((lb, k, physical + off));
        lb += k;
        off += k;
    }
}

/// Fills `node` with a header of capacity `max` at `depth` and `entries` after it.
fn fill_node<E: IntoBytes + Immutable>(node: &mut [u8], max: usize, depth: u16, entries: &[E]) {
    let header = ExtentHeaderRaw {
        eh_magic: U16::new(EXT_MAGIC),
        eh_entries: U16::new(entries.len() as u16),
        eh_max: U16::new(max as u16),
        eh_depth: U16::new(depth),
        eh_generation: U32::ZERO,
    };
    put_struct(node, 0, &header);
    for (k, e) in entries.iter().enumerate() {
        put_struct(node, HEADER + ENTRY * k, e);
    }
}

/// A tree node in its own block: header, entries, and with metadata_csum (`iseed`, the
/// inode's checksum seed) the checksum tail after the last entry slot.
fn node_block<E: IntoBytes + Immutable>(
    bs: usize,
    per: usize,
    depth: u16,
    entries: &[E],
    iseed: Option<u32>,
) -> Vec<u8> {
    let mut b = vec![0u8; bs];
    fill_node(&mut b, per, depth, entries);
    if let Some(s) = iseed {
        let t = HEADER + ENTRY * per;
        let tail = ExtentTailRaw {
            et_checksum: U32::new(crc32c_raw(s, &b[..t])),
        };
        put_struct(&mut b, t, &tail);
    }
    b
}

/// A leaf entry for `(logical, len, physical)`.
fn leaf((l, len, p): (u64, u64, u64)) -> ExtentRaw {
    ExtentRaw {
        ee_block: U32::new(l as u32),
        ee_len: U16::new(len as u16),
        ee_start_hi: U16::new((p >> 32) as u16),
        ee_start_lo: U32::new(p as u32),
    }
}

/// An index entry for the node at block `p` covering logical blocks from `l` on.
fn index((l, p): (u64, u64)) -> ExtentIdxRaw {
    ExtentIdxRaw {
        ei_block: U32::new(l as u32),
        ei_leaf_lo: U32::new(p as u32),
        ei_leaf_hi: U16::new((p >> 32) as u16),
        ei_unused: U16::ZERO,
    }
}

impl Prepared {
    /// Builds the extent tree: the `i_block` root and the tree blocks `(block, bytes)`.
    pub(super) fn extent_tree(&self, r: &Ino) -> ([u8; N_BLOCKS * 4], Vec<(u64, Vec<u8>)>) {
        let bs = self.geo.bs as usize;
        let per = entries_per_block(self.geo.bs) as usize;
        let iseed = self.csum().map(|s| inode_seed(s, r.ino, 0));
        let mut root = [0u8; N_BLOCKS * 4];
        let mut blocks = Vec::new();
        if r.extents.len() <= ROOT_ENTRIES {
            let leaves: Vec<ExtentRaw> = r.extents.iter().map(|&e| leaf(e)).collect();
            fill_node(&mut root, ROOT_ENTRIES, 0, &leaves);
            return (root, blocks);
        }
        let mut tb = r.tree_blocks().iter().copied();
        // Leaves.
        let mut level: Vec<(u64, u64)> = Vec::new();
        for chunk in r.extents.chunks(per) {
            let nr = tb.next().unwrap_or(0);
            let leaves: Vec<ExtentRaw> = chunk.iter().map(|&e| leaf(e)).collect();
            blocks.push((nr, node_block(bs, per, 0, &leaves, iseed)));
            level.push((chunk[0].0, nr));
        }
        let mut depth = 1u16;
        while level.len() > ROOT_ENTRIES {
            let mut up = Vec::new();
            for chunk in level.chunks(per) {
                let nr = tb.next().unwrap_or(0);
                let indexes: Vec<ExtentIdxRaw> = chunk.iter().map(|&e| index(e)).collect();
                blocks.push((nr, node_block(bs, per, depth, &indexes, iseed)));
                up.push((chunk[0].0, nr));
            }
            level = up;
            depth += 1;
        }
        let indexes: Vec<ExtentIdxRaw> = level.iter().map(|&e| index(e)).collect();
        fill_node(&mut root, ROOT_ENTRIES, depth, &indexes);
        (root, blocks)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A file of one extent keeps room for one (24 bytes), not four: one such list per file
    /// lives until the inode tables are written. Runs still merge and split as before.
    #[test]
    fn one_extent_takes_room_for_one() {
        let mut e = Vec::new();
        push_run(&mut e, 0, 100, 3);
        assert_eq!((e.len(), e.capacity()), (1, 1));
        push_run(&mut e, 3, 103, 2);
        assert_eq!(e, vec![(0, 5, 100)]);
        push_run(&mut e, 5, 200, MAX_EXTENT + 1);
        assert_eq!(
            e,
            vec![
                (0, 5, 100),
                (5, MAX_EXTENT, 200),
                (5 + MAX_EXTENT, 1, 200 + MAX_EXTENT)
            ]
        );
    }
}
