//! ext2/ext3 block maps (the `extent` feature off): twelve direct pointers in `i_block`,
//! then one single, one double and one triple indirect block, each a block of 32-bit block
//! numbers.
//!
//! The walk goes up the logical runs a leaf node at a time; the same walk counts the
//! pointer blocks before allocation ([`map_blocks_for`]) and fills them afterwards
//! ([`Prepared::block_map`]), taking the inode's reserved blocks in the order the nodes are
//! first needed (a parent before its children), so the count and the layout always agree.

use std::collections::BTreeMap;

use super::inode::Ino;
use super::Prepared;
use crate::raw::N_BLOCKS;

/// Direct pointers in `i_block`.
const DIRECT: u64 = 12;

/// One pointer block: which tree (0 single, 1 double, 2 triple indirect), its level in it
/// (0 = the block `i_block` points to) and its index at that level.
type Key = (u8, u8, u64);

/// The pointer blocks on the way to one logical block, root first, each with the slot the
/// way goes through.
type Path = Vec<(Key, u64)>;

/// The pointer blocks on the way to logical block `l` (root first) and the slot of `l` in
/// the last one; `None` for a direct block, `Err(())` past what three levels map.
fn path(l: u64, p: u64) -> Result<Option<(Path, u64)>, ()> {
    if l < DIRECT {
        return Ok(None);
    }
    let mut x = l - DIRECT;
    if x < p {
        return Ok(Some((vec![((0, 0, 0), x)], x)));
    }
    x -= p;
    if x < p * p {
        return Ok(Some((
            vec![((1, 0, 0), x / p), ((1, 1, x / p), x % p)],
            x % p,
        )));
    }
    x -= p * p;
    if x < p * p * p {
        let (mid, leaf) = (x / (p * p), x / p);
        return Ok(Some((
            vec![
                ((2, 0, 0), mid),
                ((2, 1, mid), leaf % p),
                ((2, 2, leaf), x % p),
            ],
            x % p,
        )));
    }
    Err(())
}

/// Logical blocks a block map of `bs`-byte blocks holds (12 + P + P² + P³).
#[must_use]
pub(super) fn max_blocks(bs: u64) -> u64 {
    let p = bs / 4;
    DIRECT + p + p * p + p * p * p
}

/// Visits every pointer block the logical runs `(start, len)` (ascending) need, once each,
/// in the order they are first needed, with the leaf-level slots: `visit(path, first
/// logical block, blocks)` per stretch of one leaf node. Stops at the first block past
/// [`max_blocks`] and returns it.
fn walk(
    runs: impl Iterator<Item = (u64, u64)>,
    bs: u64,
    mut visit: impl FnMut(&[(Key, u64)], u64, u64),
) -> Result<(), u64> {
    let p = bs / 4;
    for (start, len) in runs {
        let end = start + len;
        let mut cur = start;
        while cur < end {
            match path(cur, p) {
                Ok(None) => {
                    let n = (DIRECT - cur).min(end - cur);
                    visit(&[], cur, n);
                    cur += n;
                }
                Ok(Some((nodes, slot))) => {
                    let n = (p - slot).min(end - cur);
                    visit(&nodes, cur, n);
                    cur += n;
                }
                Err(()) => return Err(cur),
            }
        }
    }
    Ok(())
}

/// Pointer blocks the logical runs `(start, len)` (ascending) need; `Err` with the first
/// logical block past what a block map holds.
pub(super) fn map_blocks_for(runs: impl Iterator<Item = (u64, u64)>, bs: u64) -> Result<u64, u64> {
    let mut last: [Option<Key>; 3] = [None; 3];
    let mut seen = BTreeMap::new();
    walk(runs, bs, |nodes, _, _| {
        for (level, &(k, _)) in nodes.iter().enumerate() {
            if last[level] != Some(k) {
                last[level] = Some(k);
                seen.insert(k, ());
            }
        }
    })?;
    Ok(seen.len() as u64)
}

impl Prepared {
    /// The block map of `r`: the `i_block` array and the pointer blocks `(block, bytes)`.
    pub(super) fn block_map(&self, r: &Ino) -> ([u8; N_BLOCKS * 4], Vec<(u64, Vec<u8>)>) {
        let bs = self.geo.bs;
        let mut root = [0u8; N_BLOCKS * 4];
        let mut reserved = r.tree_blocks().iter().copied();
        // Pointer blocks as they are first needed: block number and contents.
        let mut nodes: BTreeMap<Key, (u64, Vec<u8>)> = BTreeMap::new();
        let mut order: Vec<Key> = Vec::new();
        let put = |buf: &mut [u8], slot: u64, v: u64| {
            let at = (slot * 4) as usize;
            buf[at..at + 4].copy_from_slice(&(v as u32).to_le_bytes());
        };
        for &(l0, len, p0) in &r.extents {
            // Runs past max_blocks were refused when the records were built.
            let _ = walk(core::iter::once((l0, len)), bs, |path, first, n| {
                let phys = |l: u64| p0 + (l - l0);
                if path.is_empty() {
                    for l in first..first + n {
                        put(&mut root, l, phys(l));
                    }
                    return;
                }
                // Every node on the path, root first, takes the next reserved block when
                // first needed; then each is linked from its parent.
                for (level, &(k, _)) in path.iter().enumerate() {
                    if let std::collections::btree_map::Entry::Vacant(v) = nodes.entry(k) {
                        let nr = reserved.next().unwrap_or(0);
                        v.insert((nr, vec![0u8; bs as usize]));
                        order.push(k);
                        if level == 0 {
                            put(&mut root, DIRECT + u64::from(k.0), nr);
                        }
                    }
                }
                for level in 0..path.len().saturating_sub(1) {
                    let (k, slot) = path[level];
                    let child_nr = nodes[&path[level + 1].0].0;
                    if let Some(node) = nodes.get_mut(&k) {
                        put(&mut node.1, slot, child_nr);
                    }
                }
                let (leaf, slot) = path[path.len() - 1];
                if let Some(node) = nodes.get_mut(&leaf) {
                    for (i, l) in (first..first + n).enumerate() {
                        put(&mut node.1, slot + i as u64, phys(l));
                    }
                }
            });
        }
        let blocks = order.into_iter().filter_map(|k| nodes.remove(&k)).collect();
        (root, blocks)
    }

    /// The mapping of `r` as its inode has it: an extent tree, or a block map.
    pub(super) fn mapping(&self, r: &Ino) -> ([u8; N_BLOCKS * 4], Vec<(u64, Vec<u8>)>) {
        if self.geo.feat.extents {
            self.extent_tree(r)
        } else {
            self.block_map(r)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn count(runs: &[(u64, u64)], bs: u64) -> u64 {
        map_blocks_for(runs.iter().copied(), bs).unwrap()
    }

    #[test]
    fn pointer_blocks_like_ext2() {
        // 1 KiB blocks: 256 pointers per block.
        assert_eq!(count(&[(0, 12)], 1024), 0);
        assert_eq!(count(&[(0, 13)], 1024), 1);
        assert_eq!(count(&[(0, 12 + 256)], 1024), 1);
        assert_eq!(count(&[(0, 12 + 256 + 1)], 1024), 3);
        assert_eq!(count(&[(0, 12 + 256 + 512)], 1024), 4);
        let full_double = 12 + 256 + 256 * 256;
        assert_eq!(count(&[(0, full_double)], 1024), 1 + 1 + 256);
        assert_eq!(count(&[(0, full_double + 1)], 1024), 1 + 1 + 256 + 3);
        // A hole skips the nodes it covers.
        assert_eq!(count(&[(0, 1), (12 + 256 + 256 * 5, 1)], 1024), 2);
        // Two runs in one leaf share it.
        assert_eq!(count(&[(20, 1), (30, 1)], 1024), 1);
        assert_eq!(max_blocks(1024), 12 + 256 + 65536 + 16_777_216);
        assert_eq!(
            map_blocks_for(core::iter::once((max_blocks(1024) - 1, 2)), 1024),
            Err(max_blocks(1024))
        );
    }
}
