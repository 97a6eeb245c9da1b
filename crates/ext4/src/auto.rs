//! `size = "auto"`: the smallest multiple of the erase block whose ext4 filesystem holds a
//! tree, found with the planner that [`crate::plan()`] runs (geometry, inode records,
//! directory and htree blocks, extent and xattr blocks, block allocation: metadata only,
//! nothing written).
//!
//! The walk starts at one erase block and jumps by what the planner says is missing: a
//! filesystem `x` blocks larger has at most `x` more free blocks, so no size inside a jump
//! can fit. Two thresholds break that rule — the inode ratio falls at 3 MiB and 512 MiB
//! (mke2fs's table), so a filesystem just above them has fewer inode-table blocks than one
//! just below — and the walk stops at each of them instead of jumping over it; a last group
//! too small to keep (dropped, as mke2fs does) can also make a larger size gain more than it
//! grew, so once a size fits the walk steps down while the next smaller multiple fits too.
//! The result therefore fits and the multiple below it does not.

use blockwise_geometry::{format_size, round_up, Ext4Plan, Tree};

use crate::build::Prepared;
use crate::features::Features;
use crate::{to_plan, Error, Ext4Request, Field, Invalid};

/// The kernel's own reserve on an extent-mapped ext4 (`ext4_calculate_resv_clusters`): 2% of
/// the blocks, at most 4096, which `df` does not count as available. A block-mapped ext2 or
/// ext3 (no `extents` feature) has none.
#[must_use]
pub fn kernel_reserve_blocks(blocks: u64) -> u64 {
    (blocks / 50).min(4096)
}

/// The result of [`smallest`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AutoExt4 {
    /// The partition size: a multiple of the erase block.
    pub size_bytes: u64,
    /// The plan of a filesystem of that size (what [`crate::plan()`] gives for it).
    pub plan: Ext4Plan,
    /// Blocks of the tree: file data, directories (htree included), extent-tree and xattr
    /// blocks, lost+found.
    pub data_blocks: u64,
    /// Blocks of the filesystem's own metadata: superblocks and descriptors, bitmaps, inode
    /// tables, the journal.
    pub metadata_blocks: u64,
    /// Journal blocks (0 without one).
    pub journal_blocks: u64,
    /// Inodes the tree takes (the reserved ones and lost+found included).
    pub used_inodes: u64,
    /// Free blocks after the tree.
    pub free_blocks: u64,
    /// Of those, reserved for root (`reserved-percent`).
    pub reserved_blocks: u64,
    /// What `df` shows as available: free blocks minus the reserved ones and the kernel's
    /// own reserve, in bytes.
    pub available_bytes: u64,
    /// Free bytes that were asked for.
    pub headroom_bytes: u64,
}

/// Inode ratios change at these sizes (see `Geometry::new`): never jump over them.
const RATIO_STEPS: [u64; 2] = [0x30_0000, 0x2000_0000];

/// What one candidate size gives: `Ok(fit)` or `Err(blocks at least missing)`.
fn try_size(
    req: &Ext4Request,
    tree: &Tree,
    headroom: u64,
    journal: bool,
) -> Result<Result<AutoExt4, u64>, Error> {
    if journal && req.options.kind == crate::ExtKind::Ext3 {
        // ext3 always has a journal, and mke2fs's smallest takes a filesystem of 2048 blocks
        // (ext4 would be made without one, which the check below counts as not holding).
        let blocks = req.partition_size_bytes / u64::from(req.options.block_size.max(1));
        if blocks < 2048 {
            return Ok(Err(2048 - blocks));
        }
    }
    let prep = match Prepared::new(req, tree, None) {
        Ok(p) => p,
        Err(Error::NoSpace {
            more_blocks,
            more_inodes,
            block_bytes,
        }) => {
            if more_blocks == 0 {
                // Only a fixed inode count (ext4.inodes) runs out: size does not help.
                return Err(Error::NoSpace {
                    more_blocks,
                    more_inodes,
                    block_bytes,
                });
            }
            let hb = headroom.div_ceil(block_bytes.max(1));
            return Ok(Err(more_blocks.saturating_add(hb)));
        }
        Err(e) => return Err(e),
    };
    let g = &prep.geo;
    if journal && !g.feat.has_journal {
        // Too small for mke2fs's smallest journal: the journal asked for needs 2048 blocks.
        return Ok(Err(2048u64.saturating_sub(g.blocks).max(1)));
    }
    let free = g.used.free_total();
    let avail_blocks = free
        .saturating_sub(g.reserved_blocks)
        .saturating_sub(if g.feat.extents {
            kernel_reserve_blocks(g.blocks)
        } else {
            0
        });
    let avail = avail_blocks.saturating_mul(g.bs);
    if avail < headroom {
        return Ok(Err((headroom - avail).div_ceil(g.bs)));
    }
    let journal_blocks = if g.feat.has_journal {
        g.journal_blocks
    } else {
        0
    };
    Ok(Ok(AutoExt4 {
        size_bytes: req.partition_size_bytes,
        plan: to_plan(req, &prep),
        data_blocks: prep.data_blocks,
        metadata_blocks: g.blocks - free - prep.data_blocks,
        journal_blocks,
        used_inodes: prep.need_inodes,
        free_blocks: free,
        reserved_blocks: g.reserved_blocks,
        available_bytes: avail,
        headroom_bytes: headroom,
    }))
}

/// The smallest multiple of `req.erase_block_bytes` whose filesystem holds `tree` with at
/// least `headroom_bytes` available to files (as `df` counts them);
/// `req.partition_size_bytes` is ignored. With a journal asked for (the default), sizes too
/// small for one do not count.
///
/// # Errors
/// The planner's errors for the options, label and tree; [`Error::NoSpace`] when only a
/// fixed `ext4.inodes` is short; [`Error::Invalid`] naming [`Field::Size`] when no
/// filesystem blockwise makes holds the tree.
pub fn smallest(req: &Ext4Request, tree: &Tree, headroom_bytes: u64) -> Result<AutoExt4, Error> {
    let e = req.erase_block_bytes.max(1);
    let journal = Features::resolve(&req.options)?.has_journal;
    let at = |size: u64| Ext4Request {
        partition_size_bytes: size,
        ..req.clone()
    };
    let too_large = || {
        Error::Invalid(Invalid::new(
            Field::Size,
            format!(
                "\"auto\": the contents need a filesystem larger than blockwise makes (2^32 blocks of {} bytes)",
                req.options.block_size
            ),
        ))
    };
    let step = |size: u64| size.checked_add(e).ok_or_else(too_large);
    let mut size = round_up(headroom_bytes, e).ok_or_else(too_large)?.max(e);
    // The largest size known not to fit.
    let mut failed: Option<u64> = None;
    for _ in 0..256 {
        match try_size(&at(size), tree, headroom_bytes, journal)? {
            Ok(mut fit) => {
                // Step down while the multiple below fits too (see the module docs).
                for _ in 0..64 {
                    let Some(below) = size.checked_sub(e).filter(|&b| b > 0) else {
                        break;
                    };
                    if failed.is_some_and(|f| below <= f) {
                        break;
                    }
                    match try_size(&at(below), tree, headroom_bytes, journal)? {
                        Ok(smaller) => {
                            size = below;
                            fit = smaller;
                        }
                        Err(_) => break,
                    }
                }
                return Ok(fit);
            }
            Err(missing) => {
                failed = Some(size);
                let bs = u64::from(req.options.block_size);
                let want = missing
                    .checked_mul(bs)
                    .and_then(|m| size.checked_add(m))
                    .and_then(|b| round_up(b, e))
                    .ok_or_else(too_large)?;
                let mut next = want.max(step(size)?);
                if let Some(t) = RATIO_STEPS.iter().find(|&&t| size < t && t < next) {
                    next = round_up(*t, e).ok_or_else(too_large)?.max(step(size)?);
                }
                size = next;
            }
        }
    }
    Err(Error::Invalid(Invalid::new(
        Field::Size,
        format!(
            "\"auto\": no size up to {} was found to hold the contents",
            format_size(size)
        ),
    )))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{plan, Ext4Options};
    use blockwise_geometry::{Meta, NodeKind};

    fn req(e: u64, opts: Ext4Options) -> Ext4Request {
        Ext4Request {
            partition_start_bytes: e,
            partition_size_bytes: 0,
            erase_block_bytes: e,
            options: opts,
            label: None,
            seed: 1,
            timestamp: 0,
        }
    }

    fn tree(sizes: &[u64]) -> Tree {
        let mut t = Tree::default();
        for (i, &size) in sizes.iter().enumerate() {
            let file = NodeKind::File {
                size,
                content: 0,
                data_ranges: None,
                link: None,
            };
            t.add(0, format!("f{i}"), file, Meta::default()).unwrap();
        }
        t
    }

    /// Fits: planned without error, and with the journal asked for.
    fn fits(r: &Ext4Request, size: u64, t: &Tree) -> bool {
        let r = Ext4Request {
            partition_size_bytes: size,
            ..r.clone()
        };
        match plan(&r, Some(t)) {
            Ok(p) => !r.options.journal || p.features.iter().any(|f| f == "has_journal"),
            Err(_) => false,
        }
    }

    #[test]
    fn tight_around_the_inode_ratio_and_journal_steps() {
        // Data sizes around the thresholds where the geometry is not monotone: the inode
        // ratio at 3 MiB and 512 MiB, the journal at 128 MiB (32768 blocks) and 1 GiB.
        const MIB: u64 = 1 << 20;
        for (e, block) in [(4 * MIB, 4096u32), (MIB, 4096), (MIB, 1024)] {
            for data in [1, 2, 3, 100, 118, 122, 126, 470, 480, 490, 500, 1000, 1010] {
                for journal in [true, false] {
                    let opts = Ext4Options {
                        block_size: block,
                        journal,
                        ..Ext4Options::default()
                    };
                    let r = req(e, opts);
                    let t = tree(&[data * MIB / 2, data * MIB / 2, 5]);
                    let fit = smallest(&r, &t, 0).unwrap();
                    let ctx = format!("E {e}, {block}-byte blocks, {data} MiB, journal {journal}");
                    assert_eq!(fit.size_bytes % e, 0, "{ctx}");
                    assert!(fits(&r, fit.size_bytes, &t), "{ctx}: {}", fit.size_bytes);
                    assert!(
                        fit.size_bytes == e || !fits(&r, fit.size_bytes - e, &t),
                        "{ctx}: {} also fits",
                        fit.size_bytes - e
                    );
                }
            }
        }
    }

    #[test]
    fn headroom_is_available_and_tight() {
        const MIB: u64 = 1 << 20;
        let r = req(MIB, Ext4Options::default());
        let t = tree(&[10 * MIB]);
        for headroom in [1, MIB, 50 * MIB, 700 * MIB] {
            let fit = smallest(&r, &t, headroom).unwrap();
            assert!(fit.available_bytes >= headroom, "{headroom}");
            let below = Ext4Request {
                partition_size_bytes: fit.size_bytes - MIB,
                ..r.clone()
            };
            match try_size(&below, &t, headroom, true).unwrap() {
                Ok(f) => panic!(
                    "{headroom}: {} also leaves {}",
                    f.size_bytes, f.available_bytes
                ),
                Err(missing) => assert!(missing > 0),
            }
        }
    }

    #[test]
    fn a_fixed_inode_count_too_small_is_an_error_not_a_loop() {
        let opts = Ext4Options {
            inodes: Some(16),
            ..Ext4Options::default()
        };
        let t = tree(&[1; 40]);
        assert!(matches!(
            smallest(&req(1 << 20, opts), &t, 0),
            Err(Error::NoSpace { more_inodes, .. }) if more_inodes > 0
        ));
    }
}
