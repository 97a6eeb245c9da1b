//! Data block allocation: the space check, then every inode's xattr block, data runs
//! (stride-aligned when large) and extent-tree blocks, in inode order.

use super::blockmap::map_blocks_for;
use super::extent::{push_run, tree_blocks_for, MAX_EXTENT};
use super::inode::Ino;
use crate::geom::{Bitmap, Geometry};
use crate::Error;

/// A next-fit allocator over the block bitmap: the cursor starts after the first inode
/// table and wraps around to the first data block once.
struct Allocator {
    cursor: u64,
    start: u64,
    /// Blocks still to allocate (for the stride-alignment budget).
    remaining: u64,
}

impl Allocator {
    fn alloc(&mut self, used: &mut Bitmap, n: u64, align: u64) -> Option<Vec<(u64, u64)>> {
        if align > 1 && n >= align {
            let free = used.free_total();
            let aligned = self.cursor.div_ceil(align) * align;
            if free >= self.remaining + (aligned - self.cursor) + align {
                if let Some(b) = used.find_run(aligned, n.min(MAX_EXTENT), u64::MAX) {
                    if b % align == 0 {
                        self.cursor = b;
                    }
                }
            }
        }
        let mut out = Vec::new();
        let mut left = n;
        let mut wrapped = false;
        while left > 0 {
            match used.next_free(self.cursor) {
                Some(b) => {
                    let run = used.free_run(b, left);
                    used.set_range(b, run);
                    out.push((b, run));
                    left -= run;
                    self.cursor = b + run;
                }
                None if !wrapped => {
                    wrapped = true;
                    self.cursor = self.start;
                }
                None => return None,
            }
        }
        self.remaining = self.remaining.saturating_sub(n);
        Some(out)
    }
}

/// Allocates the blocks of every inode (sorted by number) from the free blocks of `geo`.
pub(super) fn allocate(geo: &mut Geometry, inodes: &mut [Ino]) -> Result<(), Error> {
    let bs = geo.bs;
    let extents = geo.feat.extents;
    // Pointer blocks of a block map (ext2/ext3) depend only on the logical runs: from the
    // wanted runs, or for the journal (placed already) from its extents.
    let map_blocks = |r: &Ino| -> u64 {
        let runs: Vec<(u64, u64)> = if r.want.is_empty() {
            r.extents.iter().map(|e| (e.0, e.1)).collect()
        } else {
            r.want.clone()
        };
        map_blocks_for(runs.into_iter(), bs).unwrap_or(0)
    };
    let need: u64 = inodes
        .iter()
        .map(|r| {
            let d: u64 = r.want.iter().map(|w| w.1).sum();
            let tree = if extents {
                tree_blocks_for(r.want.len() as u64, bs)
            } else {
                map_blocks(r)
            };
            d + tree + u64::from(!r.attrs().is_empty())
        })
        .sum();
    let free = geo.used.free_total();
    if need > free {
        return Err(Error::NoSpace {
            more_blocks: need - free,
            more_inodes: 0,
            block_bytes: bs,
        });
    }
    let mut al = Allocator {
        cursor: geo.data_start,
        start: geo.fdb,
        remaining: need,
    };
    let stride = u64::from(geo.stride).min(geo.bpg);
    let nospace = |bs| Error::NoSpace {
        more_blocks: 1,
        more_inodes: 0,
        block_bytes: bs,
    };
    for r in inodes {
        if !r.attrs().is_empty() {
            let b = al.alloc(&mut geo.used, 1, 1).ok_or_else(|| nospace(bs))?;
            r.rare_mut().xattr_block = Some(b[0].0);
        }
        let want = core::mem::take(&mut r.want);
        for (l, n) in want {
            let runs = al
                .alloc(&mut geo.used, n, stride)
                .ok_or_else(|| nospace(bs))?;
            let mut lb = l;
            for (p, len) in runs {
                push_run(&mut r.extents, lb, p, len);
                lb += len;
            }
        }
        let tb = if extents {
            tree_blocks_for(r.extents.len() as u64, bs)
        } else {
            map_blocks(r)
        };
        if tb > 0 {
            let runs = al.alloc(&mut geo.used, tb, 1).ok_or_else(|| nospace(bs))?;
            let tree = &mut r.rare_mut().tree_blocks;
            for (p, len) in runs {
                tree.extend(p..p + len);
            }
        }
    }
    Ok(())
}
