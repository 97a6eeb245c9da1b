//! The squashfs geometry a plan carries (filled by `blockwise-squashfs`).

use serde::Serialize;

use super::VerityPlan;

/// A squashfs 4.0 filesystem as planned or as found.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Default)]
pub struct SquashfsPlan {
    /// `squashfs`.
    pub kind: String,
    /// `gzip`, `xz`, `zstd`, `lz4` (verify may also report `lzo` or `lzma`).
    pub compression: String,
    /// Data block size.
    pub block_bytes: u32,
    /// Bytes the filesystem uses; `None` in a plan made before compressing.
    pub bytes_used: Option<u64>,
    /// Inodes.
    pub inodes: Option<u64>,
    /// A dm-verity hash tree appended after the filesystem (`verity = "appended"`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub verity: Option<VerityPlan>,
    /// Alignment holds ([`SquashfsPlan::alignment_holds`]).
    pub aligned: bool,
}

impl SquashfsPlan {
    /// The one alignment rule for squashfs, for the planner and `verify`: compressed blocks
    /// are packed byte by byte, so nothing inside can be aligned; only an appended hash tree
    /// is checked, by its own rule.
    #[must_use]
    pub fn alignment_holds(&self) -> bool {
        self.verity.as_ref().is_none_or(VerityPlan::alignment_holds)
    }
}
