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
/// the blocks, at most 4096, which `df` does not count as available.
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
        .saturating_sub(kernel_reserve_blocks(g.blocks));
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
