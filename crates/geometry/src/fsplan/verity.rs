//! The dm-verity hash tree a plan carries (filled by `blockwise-image` with `blockwise-verity`),
//! in a partition of its own (`fs = "verity"`) or appended to the data partition.

use serde::Serialize;

/// A dm-verity hash area (superblock + hash tree, format 1) as planned or as found. Offsets are
/// absolute from the start of the disk.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Default)]
pub struct VerityPlan {
    /// `verity`.
    pub kind: String,
    /// The partition (number as the OS sees it) whose bytes the tree covers; `None` when it
    /// is the partition the tree is appended to, or (verify) when no partition matches.
    pub of: Option<u32>,
    /// Where the data the tree covers starts (the data partition's start); `None` when
    /// verify finds no partition the superblock fits.
    pub data_start_bytes: Option<u64>,
    /// Hash algorithm (`sha256`).
    pub hash_algorithm: String,
    /// Bytes per data block.
    pub data_block_bytes: u32,
    /// Bytes per hash block.
    pub hash_block_bytes: u32,
    /// Data blocks covered (from the start of the data partition).
    pub data_blocks: u64,
    /// Where the verity superblock starts (the `--hash-offset` of `veritysetup`, plus the
    /// partition start).
    pub hash_start_bytes: u64,
    /// Bytes of superblock and tree.
    pub hash_bytes: u64,
    /// Salt, hex.
    pub salt: String,
    /// Superblock UUID.
    pub uuid: Option<String>,
    /// Root hash, hex: known once the data is written (`build`, `verify`), `None` in `plan`.
    pub root_hash: Option<String>,
    /// Block sizes at least a 4 KiB page ([`VerityPlan::alignment_holds`]).
    pub aligned: bool,
}

impl VerityPlan {
    /// The one alignment rule for a hash area, for the planner and `verify`: data and hash
    /// blocks of at least a 4 KiB flash page, and the hash area starting on one.
    #[must_use]
    pub fn alignment_holds(&self) -> bool {
        self.data_block_bytes >= 4096
            && self.hash_block_bytes >= 4096
            && self.hash_start_bytes % 4096 == 0
    }
}
