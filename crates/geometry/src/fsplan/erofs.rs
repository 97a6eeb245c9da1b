//! The EROFS geometry a plan carries (filled by `blockwise-erofs`).

use serde::Serialize;

use super::VerityPlan;

/// An EROFS filesystem as planned or as found.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Default)]
pub struct ErofsPlan {
    /// `erofs`.
    pub kind: String,
    /// Volume name.
    pub label: Option<String>,
    /// Filesystem UUID.
    pub uuid: Option<String>,
    /// Block size.
    pub block_bytes: u32,
    /// Blocks the filesystem uses; `None` until an external tool (`mkfs.erofs`) has run.
    pub blocks: Option<u64>,
    /// Inodes.
    pub inodes: Option<u64>,
    /// `none` (the native writer) or the algorithm on disk (`lz4` — also for `lz4hc` —,
    /// `lzma`, `deflate`, `zstd`; several joined by `+`).
    pub compression: String,
    /// Feature names (`sb_csum`, `mtime`, `0padding`, `chunked_file`, …); `None` until an
    /// external tool has run.
    pub features: Option<Vec<String>>,
    /// A dm-verity hash tree appended after the filesystem (`verity = "appended"`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub verity: Option<VerityPlan>,
    /// Alignment holds ([`ErofsPlan::alignment_holds`]).
    pub aligned: bool,
}

impl ErofsPlan {
    /// The one alignment rule for EROFS, for the planner and `verify`: blocks of at least a
    /// 4 KiB page that divide the erase block (so no block straddles one), and an appended
    /// hash tree aligned by its own rule.
    #[must_use]
    pub fn alignment_holds(&self, erase_block: u64) -> bool {
        let bs = u64::from(self.block_bytes);
        bs >= 4096
            && erase_block % bs == 0
            && self.verity.as_ref().is_none_or(VerityPlan::alignment_holds)
    }
}
