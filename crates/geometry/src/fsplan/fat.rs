//! The FAT geometry a plan carries (filled by `blockwise-fat`), and the one [`FatType`].

use core::fmt;

use serde::{Serialize, Serializer};

/// Largest FAT32 cluster count (cluster numbers 2..=0x0FFFFFF6; 0x0FFFFFF7 marks bad).
pub const MAX_FAT32_CLUSTERS: u64 = 268_435_445;

/// The three FAT variants: what the planner chooses, the formatter writes, the verifier
/// finds and the spec names (`fs = "fat16"`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum FatType {
    /// 12-bit entries, fewer than 4085 clusters.
    Fat12,
    /// 16-bit entries, 4085–65524 clusters.
    Fat16,
    /// 28-bit entries, 65525–268435445 clusters.
    Fat32,
}

impl FatType {
    /// Every variant, smallest first.
    pub const ALL: [FatType; 3] = [FatType::Fat12, FatType::Fat16, FatType::Fat32];

    /// Bits per FAT entry.
    #[must_use]
    pub const fn bits(self) -> u64 {
        match self {
            FatType::Fat12 => 12,
            FatType::Fat16 => 16,
            FatType::Fat32 => 32,
        }
    }

    /// `fat12`, `fat16` or `fat32`.
    #[must_use]
    pub const fn name(self) -> &'static str {
        match self {
            FatType::Fat12 => "fat12",
            FatType::Fat16 => "fat16",
            FatType::Fat32 => "fat32",
        }
    }

    /// Smallest cluster count of this type (Microsoft's rule).
    #[must_use]
    pub const fn min_clusters(self) -> u64 {
        match self {
            FatType::Fat12 => 1,
            FatType::Fat16 => 4085,
            FatType::Fat32 => 65525,
        }
    }

    /// Largest cluster count of this type.
    #[must_use]
    pub const fn max_clusters(self) -> u64 {
        match self {
            FatType::Fat12 => 4084,
            FatType::Fat16 => 65524,
            FatType::Fat32 => MAX_FAT32_CLUSTERS,
        }
    }

    /// The type a cluster count implies (the only rule FAT drivers use).
    #[must_use]
    pub const fn from_cluster_count(clusters: u64) -> Self {
        if clusters < 4085 {
            FatType::Fat12
        } else if clusters < 65525 {
            FatType::Fat16
        } else {
            FatType::Fat32
        }
    }

    /// The MBR partition type byte for this FAT: 0x01 (FAT12), 0x0e (FAT16, LBA),
    /// 0x0c (FAT32, LBA). The one place this mapping is decided.
    #[must_use]
    pub const fn mbr_type(self) -> u8 {
        match self {
            FatType::Fat12 => 0x01,
            FatType::Fat16 => 0x0e,
            FatType::Fat32 => 0x0c,
        }
    }

    /// Parses `fat12`/`fat16`/`fat32`.
    #[must_use]
    pub fn from_name(s: &str) -> Option<Self> {
        FatType::ALL.into_iter().find(|t| t.name() == s)
    }
}

impl fmt::Display for FatType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl Serialize for FatType {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.name())
    }
}

/// The planned (or found) geometry of a FAT filesystem. All `*_bytes` offsets are absolute
/// from the start of the disk.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct FatPlan {
    /// `fat12`, `fat16` or `fat32`.
    pub kind: FatType,
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
    /// The BIOS bootloader in the volume's boot sector (`syslinux`), when it is not
    /// blockwise's own (which boots nothing): `fat.bootloader` in a plan, the boot sector's
    /// OEM name `SYSLINUX` when verify reads one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bootloader: Option<String>,
    /// Data area (and, with `align-fat`, the FAT) on erase-block boundaries.
    pub aligned: bool,
    /// One sentence per choice, explaining it.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
}

impl FatPlan {
    /// The one alignment rule for a FAT volume on a medium with `erase_block`-byte erase
    /// blocks, applied by the planner and by `verify` alike: the data area (cluster 2) starts
    /// on the erase block and the cluster size divides it, so no cluster straddles two erase
    /// blocks. (The first FAT off the erase block is worth a note, not a misalignment.)
    #[must_use]
    pub fn alignment_holds(&self, erase_block: u64) -> bool {
        let cluster = u64::from(self.cluster_bytes);
        erase_block != 0
            && self.data_start_bytes % erase_block == 0
            && cluster != 0
            && erase_block % cluster == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fat_type_rules() {
        for t in FatType::ALL {
            assert_eq!(FatType::from_name(t.name()), Some(t));
            assert_eq!(FatType::from_cluster_count(t.min_clusters().max(1)), t);
            assert_eq!(FatType::from_cluster_count(t.max_clusters()), t);
        }
        assert_eq!(FatType::Fat16.mbr_type(), 0x0e);
        assert_eq!(serde_json::to_string(&FatType::Fat32).unwrap(), "\"fat32\"");
    }
}
