//! The ext4 geometry a plan carries (filled by `blockwise-ext4`).

use serde::Serialize;

/// The planned (or found) geometry of an ext2/3/4 filesystem. `*_bytes` offsets are absolute
/// from the start of the disk.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Default)]
pub struct Ext4Plan {
    /// `ext4` (or `ext2`/`ext3` when found by verify).
    pub kind: String,
    /// Volume label.
    pub label: Option<String>,
    /// Filesystem UUID.
    pub uuid: Option<String>,
    /// Block size.
    pub block_bytes: u32,
    /// Total blocks.
    pub blocks: u64,
    /// Inodes.
    pub inodes: u64,
    /// RAID stride (blocks).
    pub stride: u32,
    /// RAID stripe width (blocks).
    pub stripe_width: u32,
    /// Absolute offset of the journal, if any.
    pub journal_start_bytes: Option<u64>,
    /// Absolute offset of the first inode table.
    pub inode_table_start_bytes: Option<u64>,
    /// Enabled features, mke2fs spelling.
    pub features: Vec<String>,
    /// Alignment holds, by [`Ext4Plan::alignment_holds`] (the planner and the verifier use
    /// the same rule).
    pub aligned: bool,
    /// One sentence per choice, explaining it.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
}

impl Ext4Plan {
    /// The one alignment rule for an ext4 filesystem starting at `start_bytes` on a medium
    /// with `erase_block`-byte erase blocks, applied by the planner and by `verify` alike: the
    /// partition starts on a block, the journal (when there is one) starts on the erase
    /// block, and `stripe_width` (when set) divides the erase block or is a multiple of it.
    /// The inode tables are put on erase-block boundaries where there is room; where there is
    /// not (a filesystem of one erase block), that is a note, not a misalignment.
    #[must_use]
    pub fn alignment_holds(&self, start_bytes: u64, erase_block: u64) -> bool {
        let bs = u64::from(self.block_bytes);
        let on = |v: u64, unit: u64| unit != 0 && v % unit == 0;
        let start_ok = on(start_bytes, bs);
        let journal_ok = self.journal_start_bytes.is_none_or(|j| on(j, erase_block));
        let stripe = u64::from(self.stripe_width).saturating_mul(bs);
        let stripe_ok = stripe == 0 || on(erase_block, stripe) || on(stripe, erase_block);
        start_ok && journal_ok && stripe_ok
    }
}
