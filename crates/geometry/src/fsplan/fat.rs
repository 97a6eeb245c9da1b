//! The FAT geometry a plan carries (filled by `blockwise-fat`).

use serde::Serialize;

/// The planned (or found) geometry of a FAT filesystem. All `*_bytes` offsets are absolute
/// from the start of the disk.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Default)]
pub struct FatPlan {
    /// `fat12`, `fat16` or `fat32`.
    pub kind: String,
    /// Volume label.
    pub label: Option<String>,
    /// Filesystem logical sector size.
    pub sector_bytes: u32,
    /// Cluster size.
    pub cluster_bytes: u32,
    /// Reserved sectors before the first FAT.
    pub reserved_sectors: u32,
    /// Number of FATs.
    pub fat_count: u8,
    /// Sectors per FAT.
    pub fat_sectors: u32,
    /// Number of data clusters.
    pub cluster_count: u32,
    /// Absolute offset of the first FAT.
    pub fat_start_bytes: u64,
    /// Absolute offset of the data area (cluster 2).
    pub data_start_bytes: u64,
    /// Volume ID (serial number).
    pub volume_id: u32,
    /// Data area (and, with `align-fat`, the FAT) on erase-block boundaries.
    pub aligned: bool,
    /// One sentence per choice, explaining it.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
}
