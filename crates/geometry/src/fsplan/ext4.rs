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
    /// Alignment holds (block size, stride, journal, inode tables vs the erase block).
    pub aligned: bool,
    /// One sentence per choice, explaining it.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
}
