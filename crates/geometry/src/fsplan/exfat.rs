//! The exFAT geometry a plan carries (filled by `blockwise-exfat`), and the SD Association's
//! table of cluster size and boundary unit by card capacity.

use serde::Serialize;

const KIB: u64 = 1 << 10;
const MIB: u64 = 1 << 20;
const GIB: u64 = 1 << 30;

/// The SD Association's recommended cluster size and boundary unit (BU) for a card of
/// `capacity` bytes (SD Physical Layer Simplified Specification, Part 2 File System, as
/// mkfs.exfat(8) reprints it): `(cluster_bytes, boundary_unit_bytes)`, `None` above 2 TiB,
/// where the table ends. A factory-formatted card puts its partition on one BU, the FAT at
/// half a BU into the volume and the cluster heap at one BU.
#[must_use]
pub fn sda_exfat_params(capacity: u64) -> Option<(u64, u64)> {
    const TABLE: [(u64, u64, u64); 9] = [
        (8 * MIB, 8 * KIB, 8 * KIB),
        (64 * MIB, 16 * KIB, 16 * KIB),
        (256 * MIB, 16 * KIB, 32 * KIB),
        (GIB, 16 * KIB, 64 * KIB),
        (2 * GIB, 32 * KIB, 64 * KIB),
        (32 * GIB, 32 * KIB, 4 * MIB),
        (128 * GIB, 128 * KIB, 16 * MIB),
        (512 * GIB, 256 * KIB, 32 * MIB),
        (2048 * GIB, 512 * KIB, 64 * MIB),
    ];
    TABLE
        .iter()
        .find(|(max, _, _)| capacity <= *max)
        .map(|&(_, c, bu)| (c, bu))
}

/// The planned (or found) geometry of an exFAT filesystem. All `*_bytes` offsets are absolute
/// from the start of the disk.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ExfatPlan {
    /// Always `exfat`.
    pub kind: &'static str,
    /// Volume label (the root directory's label entry).
    pub label: Option<String>,
    /// Bytes per sector (`BytesPerSectorShift`).
    pub sector_bytes: u32,
    /// Cluster size.
    pub cluster_bytes: u32,
    /// Sectors of the volume (`VolumeLength`).
    pub volume_sectors: u64,
    /// Absolute offset of the (first) FAT (`FatOffset`).
    pub fat_start_bytes: u64,
    /// Sectors of one FAT (`FatLength`).
    pub fat_sectors: u32,
    /// Number of FATs (1; 2 only with TexFAT).
    pub fat_count: u8,
    /// Absolute offset of the cluster heap (`ClusterHeapOffset`, cluster 2).
    pub heap_start_bytes: u64,
    /// Clusters in the heap (`ClusterCount`).
    pub cluster_count: u32,
    /// First cluster of the root directory.
    pub root_cluster: u32,
    /// `VolumeSerialNumber`.
    pub volume_serial: u32,
    /// The volume GUID entry of the root directory, when there is one.
    pub volume_guid: Option<String>,
    /// The boundary unit the planner aligned the heap to; `None` in a report (verify cannot
    /// know what was asked for, only where things are).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub boundary_bytes: Option<u64>,
    /// The cluster heap starts on the erase block and clusters do not straddle erase
    /// blocks (the first FAT off the erase block is a note, not a misalignment).
    pub aligned: bool,
    /// One sentence per choice, explaining it.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
}

impl ExfatPlan {
    /// The one alignment rule for an exFAT volume on a medium with `erase_block`-byte erase
    /// blocks, applied by the planner and by `verify` alike: the cluster heap starts on the
    /// erase block (clusters, powers of two, then never straddle one). The first FAT off the
    /// erase block is reported but does not make the volume misaligned.
    #[must_use]
    pub fn alignment_holds(&self, erase_block: u64) -> bool {
        erase_block != 0 && self.heap_start_bytes % erase_block == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sda_table() {
        // SDXC 64 GB and 128 GB (decimal): 128 KiB clusters, 16 MiB boundary unit.
        assert_eq!(
            sda_exfat_params(64_000_000_000),
            Some((128 * KIB, 16 * MIB))
        );
        assert_eq!(
            sda_exfat_params(128_000_000_000),
            Some((128 * KIB, 16 * MIB))
        );
        assert_eq!(
            sda_exfat_params(256_000_000_000),
            Some((256 * KIB, 32 * MIB))
        );
        assert_eq!(
            sda_exfat_params(1_000_000_000_000),
            Some((512 * KIB, 64 * MIB))
        );
        assert_eq!(sda_exfat_params(32 * GIB), Some((32 * KIB, 4 * MIB)));
        assert_eq!(sda_exfat_params(4 * MIB), Some((8 * KIB, 8 * KIB)));
        assert_eq!(sda_exfat_params(2049 * GIB), None);
    }
}
