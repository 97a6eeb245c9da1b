//! The exFAT planner: boundary unit, cluster size, FAT and cluster heap, chosen so that the
//! heap (and the FAT) start on the erase block measured from the start of the disk, the way
//! the SD Association lays out SDXC cards when the erase block fits the card's boundary unit.
//!
//! All arithmetic is checked `u64`: a request from a hostile binding gets an error, never a
//! panic.

use std::sync::OnceLock;

use blockwise_geometry::{derive_u64, format_size, sda_exfat_params, ExfatPlan, Guid};

use crate::options::{validate_label, Field, Invalid};
use crate::raw::{MAX_CLUSTERS, MIN_FAT_OFFSET};
use crate::{upcase, Error, ExfatRequest};

const KIB: u64 = 1 << 10;
const MIB: u64 = 1 << 20;

/// The up-case table (full, and as stored), computed once.
pub(crate) fn upcase_tables() -> &'static (Vec<u16>, Vec<u8>) {
    static TABLES: OnceLock<(Vec<u16>, Vec<u8>)> = OnceLock::new();
    TABLES.get_or_init(|| {
        let full = upcase::full_table();
        let bytes = upcase::compressed_bytes(&full);
        (full, bytes)
    })
}

/// The complete on-disk geometry; counts in sectors of the volume unless named.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Layout {
    /// Bytes per sector.
    pub sector_bytes: u64,
    /// Bytes per cluster.
    pub cluster_bytes: u64,
    /// Sectors of the volume.
    pub volume_sectors: u64,
    /// `PartitionOffset`: the volume's start on the medium, in sectors.
    pub partition_offset: u64,
    /// `FatOffset`.
    pub fat_offset: u64,
    /// `FatLength`.
    pub fat_length: u64,
    /// `ClusterHeapOffset`.
    pub heap_offset: u64,
    /// `ClusterCount`.
    pub clusters: u64,
    /// Bytes of the allocation bitmap.
    pub bitmap_bytes: u64,
    /// Bytes of the stored up-case table.
    pub upcase_bytes: u64,
    /// First cluster of the root directory (after the bitmap and the up-case table).
    pub root_cluster: u64,
}

impl Layout {
    /// Sectors per cluster.
    #[must_use]
    pub fn sectors_per_cluster(&self) -> u64 {
        self.cluster_bytes / self.sector_bytes
    }

    /// Byte offset (relative to the volume) of cluster `k ≥ 2`.
    #[must_use]
    pub fn cluster_offset(&self, k: u64) -> u64 {
        self.heap_offset * self.sector_bytes + (k - 2) * self.cluster_bytes
    }

    /// Clusters needed for `bytes`.
    #[must_use]
    pub fn clusters_for(&self, bytes: u64) -> u64 {
        bytes.div_ceil(self.cluster_bytes)
    }

    /// Volume size in bytes.
    #[must_use]
    pub fn volume_bytes(&self) -> u64 {
        self.volume_sectors * self.sector_bytes
    }
}

fn invalid(field: Field, reason: impl Into<String>) -> Error {
    Error::Invalid(Invalid::new(field, reason))
}

/// FAT offset, FAT length, heap offset and cluster count for a volume of `v` sectors whose
/// first sector is `p` (mod the boundary `b`), `spc` sectors per cluster, `s`-byte sectors.
/// With `unit` the FAT length is a multiple of `unit` sectors and ends at the heap (so it
/// starts on the erase block too); without, it is as short as it can be, at sector 24.
fn place(
    v: u64,
    p: u64,
    b: u64,
    unit: Option<u64>,
    spc: u64,
    s: u64,
) -> Option<(u64, u64, u64, u64)> {
    let mut f = unit.unwrap_or(1);
    for _ in 0..64 {
        let base = p.checked_add(MIN_FAT_OFFSET)?.checked_add(f)?;
        let heap = base.div_ceil(b).checked_mul(b)?.checked_sub(p)?;
        let fat_off = if unit.is_some() {
            heap - f
        } else {
            MIN_FAT_OFFSET
        };
        if heap >= v {
            return None;
        }
        let clusters = ((v - heap) / spc).min(MAX_CLUSTERS);
        if clusters == 0 {
            return None;
        }
        let need = (clusters + 2).checked_mul(4)?.div_ceil(s);
        if need <= f {
            return Some((fat_off, f, heap, clusters));
        }
        f = match unit {
            Some(u) => need.div_ceil(u).checked_mul(u)?,
            None => need,
        };
    }
    None
}

/// The default cluster for a volume of `bytes`: the SD Association's table, 512 KiB past it.
fn default_cluster(bytes: u64) -> u64 {
    sda_exfat_params(bytes).map_or(512 * KIB, |(c, _)| c)
}

/// Plans the volume: the [`Layout`] and the [`ExfatPlan`] that `plan` shows and `verify`
/// reproduces.
pub(crate) fn plan_layout(req: &ExfatRequest) -> Result<(Layout, ExfatPlan), Error> {
    let e = req.erase_block_bytes;
    if !e.is_power_of_two() || !(512..=1 << 40).contains(&e) {
        return Err(invalid(
            Field::EraseBlock,
            format!("{e}: the erase block must be a power of two from 512 bytes to 1 TiB"),
        ));
    }
    let s = req.device_sector.bytes_u64();
    req.options
        .validate(req.device_sector.bytes(), e)
        .map_err(Error::Invalid)?;
    let start = req.partition_start_bytes;
    if start.checked_add(req.partition_size_bytes).is_none() {
        return Err(invalid(Field::Start, "the partition ends past 2^64 bytes"));
    }
    if start % s != 0 {
        return Err(invalid(
            Field::Start,
            format!("the partition starts at byte {start}, not a multiple of the {s}-byte sector"),
        ));
    }
    let label = match &req.label {
        None => None,
        Some(l) => validate_label(l).map_err(Error::Invalid)?,
    };
    let v = req.partition_size_bytes / s;
    let vol_bytes = v * s;
    if vol_bytes < MIB {
        return Err(invalid(
            Field::Size,
            format!(
                "{}: an exFAT volume is at least 1 MiB",
                format_size(req.partition_size_bytes)
            ),
        ));
    }
    let mut notes = Vec::new();
    let card = sda_exfat_params(req.disk_bytes);
    let sda = req.options.boundary.is_none() && card.is_some_and(|(_, bu)| bu >= e);
    let boundary = match (req.options.boundary, card) {
        (Some(b), _) => {
            notes.push(format!(
                "Boundary unit {} as requested (exfat.boundary): the FAT ends and the cluster heap starts on a multiple of it from the start of the disk.",
                format_size(b)
            ));
            b
        }
        (None, Some((_, bu))) if sda => {
            notes.push(format!(
                "Boundary unit {}: the SD Association's for a {} card (Physical Layer Specification Part 2, File System), a multiple of the {} erase block (the card's allocation unit); the FAT takes the half BU before the cluster heap and the heap starts on a BU, as cards come formatted from the factory.",
                format_size(bu),
                format_size(req.disk_bytes),
                format_size(e)
            ));
            bu
        }
        (None, Some((_, bu))) => {
            notes.push(format!(
                "Boundary unit {}: the erase block, which is larger than the SD Association's {} boundary unit for a {} card, so the cluster heap starts on the erase block instead.",
                format_size(e),
                format_size(bu),
                format_size(req.disk_bytes)
            ));
            e
        }
        (None, None) => {
            notes.push(format!(
                "Boundary unit {}: the erase block (the disk is larger than the SD Association's table, which ends at 2 TiB).",
                format_size(e)
            ));
            e
        }
    };
    let (mut cluster, forced) = match req.options.cluster {
        Some(c) => (c, true),
        None => (default_cluster(vol_bytes).max(s), false),
    };
    let b = boundary / s;
    let p = start / s;
    let unit = (e / s).max(b / 2);
    let mut placed = None;
    for _ in 0..16 {
        let spc = cluster / s;
        let aligned = place(v, p % b, b, Some(unit), spc, s);
        let got = aligned
            .map(|x| (x, true))
            .or_else(|| place(v, p % b, b, None, spc, s).map(|x| (x, false)));
        match got {
            Some(((_, _, heap, clusters), _))
                if !forced && clusters == MAX_CLUSTERS && (v - heap) / spc > MAX_CLUSTERS =>
            {
                cluster *= 2;
            }
            other => {
                placed = other;
                break;
            }
        }
        if cluster > crate::options::MAX_CLUSTER {
            break;
        }
    }
    let Some(((fat_offset, fat_length, heap_offset, clusters), fat_aligned)) = placed else {
        return Err(too_small(req, boundary, cluster));
    };
    if forced && (v - heap_offset) / (cluster / s) > MAX_CLUSTERS {
        return Err(invalid(
            Field::Cluster,
            format!(
                "{} with {}-byte clusters gives more than the {MAX_CLUSTERS} clusters exFAT allows; use a larger exfat.cluster",
                format_size(vol_bytes),
                cluster
            ),
        ));
    }
    let (_, up_bytes) = upcase_tables();
    let upcase_bytes = up_bytes.len() as u64;
    let bitmap_bytes = clusters.div_ceil(8);
    let meta_clusters = bitmap_bytes.div_ceil(cluster) + upcase_bytes.div_ceil(cluster);
    if clusters < meta_clusters + 1 {
        return Err(too_small(req, boundary, cluster));
    }
    let layout = Layout {
        sector_bytes: s,
        cluster_bytes: cluster,
        volume_sectors: v,
        partition_offset: p,
        fat_offset,
        fat_length,
        heap_offset,
        clusters,
        bitmap_bytes,
        upcase_bytes,
        root_cluster: 2 + meta_clusters,
    };
    notes.push(if forced {
        format!(
            "Clusters of {} as requested (exfat.cluster).",
            format_size(cluster)
        )
    } else if sda_exfat_params(vol_bytes).is_some() {
        format!(
            "Clusters of {}: the SD Association's size for a {} volume.",
            format_size(cluster),
            format_size(vol_bytes)
        )
    } else {
        format!(
            "Clusters of {}: past the SD Association's table (2 TiB), the size of its largest row.",
            format_size(cluster)
        )
    });
    let fat_start = start + fat_offset * s;
    let heap_start = start + heap_offset * s;
    if fat_aligned {
        notes.push(format!(
            "One FAT of {fat_length} sectors from byte {fat_start} ({}) to the cluster heap at byte {heap_start} ({}): both on multiples of {} from the start of the disk, so FAT updates and clusters never straddle an erase block.",
            format_size(fat_start),
            format_size(heap_start),
            format_size(if fat_length * s % boundary == 0 { boundary } else { e }),
        ));
    } else {
        notes.push(format!(
            "warning: the volume is too small to give the FAT erase blocks of its own: the FAT ({fat_length} sectors) starts at sector {fat_offset} of the volume, not on the erase block; the cluster heap still starts at byte {heap_start}, a multiple of {}.",
            format_size(boundary)
        ));
    }
    if sda && p % b == 0 && heap_offset == b && fat_offset == b / 2 {
        notes.push(format!(
            "This is the SD Association's (and the factory's) layout: the partition at {}, the FAT at {} and the cluster heap at {} into the volume.",
            format_size(start),
            format_size(fat_offset * s),
            format_size(heap_offset * s)
        ));
    }
    notes.push(format!(
        "{clusters} clusters; the allocation bitmap ({bitmap_bytes} bytes) and the up-case table ({upcase_bytes} bytes, generated from Unicode {}.{}.{}) come first, the root directory at cluster {}; files and directories are contiguous and marked NoFatChain, so the FAT only chains these three.",
        UNICODE.0, UNICODE.1, UNICODE.2, layout.root_cluster
    ));
    let idx = req.seed;
    let serial = req.options.volume_serial.unwrap_or_else(|| {
        u32::try_from(derive_u64(idx, "exfat-serial", 0) & 0xffff_ffff).unwrap_or(0)
    });
    let guid = req.options.volume_guid.map(Guid::from_bytes);
    notes.push(format!(
        "Volume serial {:04X}-{:04X} {}; {}.",
        serial >> 16,
        serial & 0xffff,
        if req.options.volume_serial.is_some() {
            "as given (volume-id)"
        } else {
            "derived from the seed"
        },
        match guid {
            Some(g) => format!("volume GUID {g} as given (fs-uuid), in a volume GUID entry of the root directory"),
            None => "no volume GUID entry (it is optional, and mkfs.exfat writes none without -U; fs-uuid adds one)".to_string(),
        }
    ));
    if guid.is_some() {
        notes.push("warning: the volume GUID entry is valid exFAT (Windows and Linux read it), but exfat-fuse 1.3 refuses to mount a volume that has one and fsck.exfat before exfatprogs 1.2.1 offers to delete it; leave fs-uuid out for those readers.".into());
    }
    let mut plan = ExfatPlan {
        kind: "exfat",
        label,
        sector_bytes: u32::try_from(s).unwrap_or(0),
        cluster_bytes: u32::try_from(cluster).unwrap_or(0),
        volume_sectors: v,
        fat_start_bytes: fat_start,
        fat_sectors: u32::try_from(fat_length).unwrap_or(u32::MAX),
        fat_count: 1,
        heap_start_bytes: heap_start,
        cluster_count: u32::try_from(clusters).unwrap_or(u32::MAX),
        root_cluster: u32::try_from(layout.root_cluster).unwrap_or(u32::MAX),
        volume_serial: serial,
        volume_guid: guid.map(|g| g.to_string()),
        boundary_bytes: Some(boundary),
        aligned: false,
        notes,
    };
    plan.aligned = plan.alignment_holds(e);
    Ok((layout, plan))
}

/// The Unicode version of the frozen up-case mappings.
pub(crate) const UNICODE: (u8, u8, u8) = (17, 0, 0);

/// Why a volume is too small, with the smallest size that works.
fn too_small(req: &ExfatRequest, boundary: u64, cluster: u64) -> Error {
    let s = req.device_sector.bytes_u64();
    let b = boundary / s;
    let p = (req.partition_start_bytes / s) % b;
    let spc = cluster / s;
    let (_, up) = upcase_tables();
    let works = |v: u64| {
        place(v, p, b, None, spc, s).is_some_and(|(_, _, _, c)| {
            c > c.div_ceil(8).div_ceil(cluster) + (up.len() as u64).div_ceil(cluster)
        })
    };
    let (mut lo, mut hi) = (req.partition_size_bytes / s, u64::MAX / s / 2);
    if works(hi) {
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            if works(mid) {
                hi = mid;
            } else {
                lo = mid + 1;
            }
        }
    }
    invalid(
        Field::Size,
        format!(
            "{} is too small for exFAT with {} clusters and the cluster heap on a {} boundary: at least {} needed",
            format_size(req.partition_size_bytes),
            format_size(cluster),
            format_size(boundary),
            format_size(lo.saturating_mul(s))
        ),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ExfatOptions;
    use blockwise_geometry::SectorSize;
    use proptest::prelude::*;

    fn req(start: u64, size: u64, disk: u64, e: u64) -> ExfatRequest {
        ExfatRequest {
            partition_start_bytes: start,
            partition_size_bytes: size,
            disk_bytes: disk,
            device_sector: SectorSize::S512,
            erase_block_bytes: e,
            options: ExfatOptions::default(),
            label: None,
            seed: 1,
        }
    }

    /// (FatOffset, FatLength, ClusterHeapOffset, ClusterCount, cluster bytes)
    fn check(r: &ExfatRequest, want: (u64, u64, u64, u64, u64)) {
        let (l, p) = plan_layout(r).unwrap();
        assert_eq!(
            (
                l.fat_offset,
                l.fat_length,
                l.heap_offset,
                l.clusters,
                l.cluster_bytes
            ),
            want,
            "{r:?}"
        );
        assert!(p.aligned);
        assert_eq!(p.heap_start_bytes % r.erase_block_bytes, 0);
    }

    #[test]
    fn factory_64gb_card() {
        // A 64 GB SDXC card as it comes from the factory (exfatprogs pull request 149):
        // 125,073,408 sectors, the partition at sector 32768 (one 16 MiB BU) to the end,
        // FAT at BU/2 and BU/2 long, heap at one BU, 128 KiB clusters, 488,312 of them.
        let card = 125_073_408 * 512;
        let r = req(32768 * 512, 125_040_640 * 512, card, 4 << 20);
        check(&r, (16384, 16384, 32768, 488_312, 128 << 10));
        let p = plan_layout(&r).unwrap().1;
        assert!(
            p.notes.iter().any(|n| n.contains("factory")),
            "{:?}",
            p.notes
        );
        assert_eq!(p.boundary_bytes, Some(16 << 20));
    }

    #[test]
    fn sd_rows_by_capacity() {
        let gb = 1_000_000_000u64;
        // 128 GB: still 16 MiB / 128 KiB; 256 GB: 32 MiB / 256 KiB; 1 TB: 64 MiB / 512 KiB.
        for (cap, bu, c) in [
            (128 * gb, 16u64 << 20, 128u64 << 10),
            (256 * gb, 32 << 20, 256 << 10),
            (1000 * gb, 64 << 20, 512 << 10),
        ] {
            let size = cap / (4 << 20) * (4 << 20) - bu;
            let (l, p) = plan_layout(&req(bu, size, cap, 4 << 20)).unwrap();
            assert_eq!(p.boundary_bytes, Some(bu), "{cap}");
            assert_eq!(l.cluster_bytes, c, "{cap}");
            assert_eq!(
                (l.fat_offset * 512, l.heap_offset * 512),
                (bu / 2, bu),
                "{cap}"
            );
        }
        // An erase block larger than the BU: the heap goes on the erase block instead.
        let (l, p) = plan_layout(&req(32 << 20, 60 * gb, 64 * gb, 32 << 20)).unwrap();
        assert_eq!(p.boundary_bytes, Some(32 << 20));
        // The FAT gets one 32 MiB erase block of its own before the heap.
        assert_eq!((32 << 20) + l.heap_offset * 512, 96 << 20);
        // A partition off the BU: the heap still lands on it, measured from the disk start.
        let (_, p) = plan_layout(&req(4 << 20, 60 * gb, 64 * gb, 4 << 20)).unwrap();
        assert_eq!(p.heap_start_bytes % (16 << 20), 0);
        assert_eq!(p.fat_start_bytes % (4 << 20), 0);
    }

    #[test]
    fn options_and_errors() {
        let mut r = req(1 << 20, 1 << 30, 1 << 30, 1 << 20);
        r.options = ExfatOptions::default().cluster(4096).boundary(8 << 20);
        let (l, p) = plan_layout(&r).unwrap();
        assert_eq!(l.cluster_bytes, 4096);
        assert_eq!(p.heap_start_bytes % (8 << 20), 0);
        assert!(p.notes.iter().any(|n| n.contains("exfat.boundary")));
        // Too small for the heap on a 4 MiB boundary.
        let e = plan_layout(&req(4 << 20, 1 << 20, 1 << 30, 4 << 20)).unwrap_err();
        assert!(e.to_string().contains("at least"), "{e}");
        let e = plan_layout(&req(4 << 20, 512 << 10, 1 << 30, 4 << 20)).unwrap_err();
        assert!(e.to_string().contains("at least 1 MiB"), "{e}");
        // Small: the FAT cannot have erase blocks of its own, the heap stays aligned.
        let (_, p) = plan_layout(&req(4 << 20, 6 << 20, 1 << 30, 4 << 20)).unwrap();
        assert_eq!(p.heap_start_bytes % (4 << 20), 0);
        assert!(
            p.notes.iter().any(|n| n.starts_with("warning:")),
            "{:?}",
            p.notes
        );
        let mut r = req(0, 1 << 30, 1 << 30, 4 << 20);
        r.label = Some("much too long".into());
        assert!(matches!(plan_layout(&r), Err(Error::Invalid(i)) if i.field == Field::Label));
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(300))]
        #[test]
        fn random_requests_plan_aligned_or_fail_clearly(
            e_shift in 12u32..28,
            start_units in 0u64..(1 << 22),
            size_shift in 20u32..44,
            size_frac in any::<u64>(),
            cluster_shift in prop::option::of(9u32..26),
            boundary_shift in prop::option::of(12u32..30),
        ) {
            let e = 1u64 << e_shift;
            let size = (1u64 << size_shift) + size_frac % (1u64 << size_shift);
            let start = start_units * 512;
            let mut r = req(start, size, start + size, e);
            r.options.cluster = cluster_shift.map(|s| 1u64 << s);
            r.options.boundary = boundary_shift.map(|s| 1u64 << s);
            match plan_layout(&r) {
                Ok((l, p)) => {
                    prop_assert!(p.aligned);
                    prop_assert_eq!(p.heap_start_bytes % e, 0);
                    prop_assert!(l.fat_offset >= 24);
                    prop_assert!(l.fat_offset + l.fat_length <= l.heap_offset);
                    prop_assert!((l.clusters + 2) * 4 <= l.fat_length * 512);
                    prop_assert!(l.heap_offset + l.clusters * l.sectors_per_cluster() <= l.volume_sectors);
                    prop_assert!(l.clusters <= MAX_CLUSTERS);
                    prop_assert!(l.root_cluster < l.clusters + 2);
                }
                Err(err) => prop_assert!(err.to_string().len() > 20),
            }
        }
    }
}
