//! Boot region and root directory parsing. The layout is in the [module docs](super).

use blockwise_exfat::raw::{
    boot_checksum, entry_type, set_checksum, BitmapEntryRaw, BootSectorRaw, GenericEntryRaw,
    GuidEntryRaw, LabelEntryRaw, UpcaseEntryRaw, BOOT_SIGNATURE, EXTENDED_BOOT_SIGNATURE,
    FILE_SYSTEM_NAME, MAX_CLUSTERS, MIN_FAT_OFFSET,
};
use zerocopy::FromBytes;

use crate::FindingCode;

/// A parsed exFAT boot sector, with the geometry derived from it (sectors relative to the
/// volume start).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ExfatVolume {
    /// Bytes per sector (512–4096).
    pub sector_bytes: u64,
    /// Bytes per cluster.
    pub cluster_bytes: u64,
    /// `PartitionOffset`.
    pub partition_offset: u64,
    /// `VolumeLength`.
    pub volume_sectors: u64,
    /// `FatOffset`.
    pub fat_offset: u64,
    /// `FatLength`.
    pub fat_length: u64,
    /// `NumberOfFats`.
    pub fat_count: u8,
    /// `ClusterHeapOffset`.
    pub heap_offset: u64,
    /// `ClusterCount`.
    pub clusters: u64,
    /// `FirstClusterOfRootDirectory`.
    pub root_cluster: u64,
    /// `VolumeSerialNumber`.
    pub serial: u32,
    /// `FileSystemRevision` (major, minor).
    pub revision: (u8, u8),
    /// Problems that do not stop the volume from being understood.
    pub issues: Vec<ExfatIssue>,
}

impl ExfatVolume {
    /// Bytes the volume claims.
    #[must_use]
    pub fn volume_bytes(&self) -> u64 {
        self.volume_sectors.saturating_mul(self.sector_bytes)
    }

    /// Byte offset (relative to the volume) of cluster `k`, `None` outside the heap.
    #[must_use]
    pub fn cluster_offset(&self, k: u64) -> Option<u64> {
        let idx = k.checked_sub(2).filter(|&i| i < self.clusters)?;
        self.heap_offset
            .checked_mul(self.sector_bytes)?
            .checked_add(idx.checked_mul(self.cluster_bytes)?)
    }
}

/// Why bytes are not a usable exFAT boot sector. Each names the field and its offset.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ExfatError {
    /// Fewer than 512 bytes.
    #[error("boot sector truncated: {len} bytes, 512 needed")]
    Truncated {
        /// Bytes available.
        len: usize,
    },
    /// No "EXFAT   " at offset 3.
    #[error("not an exFAT boot sector (FileSystemName at offset 0x03)")]
    NotExfat,
    /// BytesPerSectorShift outside 9..=12.
    #[error("BytesPerSectorShift (offset 0x6C) is {value}; it must be 9 to 12 (512 to 4096-byte sectors)")]
    SectorShift {
        /// Value found.
        value: u8,
    },
    /// SectorsPerClusterShift makes clusters larger than 32 MiB.
    #[error("SectorsPerClusterShift (offset 0x6D) is {value}: clusters larger than 32 MiB")]
    ClusterShift {
        /// Value found.
        value: u8,
    },
    /// NumberOfFats not 1 or 2.
    #[error("NumberOfFats (offset 0x6E) is {value}; it must be 1 (or 2 with TexFAT)")]
    FatCount {
        /// Value found.
        value: u8,
    },
    /// FatOffset inside the boot regions.
    #[error(
        "FatOffset (offset 0x50) is {value}: the FAT would overlap the boot regions (at least 24)"
    )]
    FatOffset {
        /// Value found.
        value: u32,
    },
    /// ClusterHeapOffset inside the FAT(s).
    #[error("ClusterHeapOffset (offset 0x58) is {heap} but the FAT{} end at sector {fat_end}", if *.fats > 1 { "s" } else { "" })]
    HeapOffset {
        /// Value found.
        heap: u64,
        /// End of the last FAT.
        fat_end: u64,
        /// NumberOfFats.
        fats: u8,
    },
    /// The heap starts past the end of the volume.
    #[error("ClusterHeapOffset (offset 0x58) is {heap} but VolumeLength (offset 0x48) is {length} sectors")]
    HeapPastEnd {
        /// ClusterHeapOffset.
        heap: u64,
        /// VolumeLength.
        length: u64,
    },
    /// ClusterCount 0.
    #[error("ClusterCount (offset 0x5C) is 0")]
    NoClusters,
}

/// A problem in an otherwise understood exFAT volume.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ExfatIssue {
    /// More clusters than fit between the heap and the end of the volume (or than exFAT counts).
    #[error("ClusterCount is {clusters} but at most {max} clusters fit the volume after the heap — the last clusters lie outside it")]
    ClusterCount {
        /// ClusterCount.
        clusters: u64,
        /// What fits.
        max: u64,
    },
    /// The FAT has fewer entries than the heap has clusters.
    #[error("the FAT ({fat_length} sectors) has room for {entries} entries but {clusters} clusters need {} — the last clusters cannot be chained", .clusters.saturating_add(2))]
    FatTooSmall {
        /// FatLength.
        fat_length: u64,
        /// Entries that fit.
        entries: u64,
        /// ClusterCount.
        clusters: u64,
    },
    /// FirstClusterOfRootDirectory outside the heap.
    #[error("FirstClusterOfRootDirectory (offset 0x60) is {value}, outside clusters 2..={max}")]
    RootCluster {
        /// Value.
        value: u64,
        /// Largest cluster.
        max: u64,
    },
    /// No 55 AA.
    #[error("no 55 AA signature at byte 510: Windows ignores this volume")]
    NoBootSignature,
    /// FileSystemRevision other than 1.x.
    #[error("FileSystemRevision (offset 0x68) is {major}.{minor:02}; readers only know 1.x")]
    Revision {
        /// Major.
        major: u8,
        /// Minor.
        minor: u8,
    },
    /// Bytes 11–63 (where FAT keeps its BPB) are not zero.
    #[error(
        "MustBeZero (offsets 0x0B–0x3F) is not all zero: FAT drivers may take the volume for FAT"
    )]
    MustBeZero,
    /// The volume is smaller than 1 MiB.
    #[error("VolumeLength is {bytes} bytes; exFAT volumes are at least 1 MiB")]
    TooSmall {
        /// Bytes.
        bytes: u64,
    },
}

impl ExfatIssue {
    /// Stable kebab-case code.
    #[must_use]
    pub fn code(&self) -> FindingCode {
        match self {
            ExfatIssue::ClusterCount { .. } => FindingCode::ExfatClusterCount,
            ExfatIssue::FatTooSmall { .. } => FindingCode::ExfatFatTooSmall,
            ExfatIssue::RootCluster { .. } => FindingCode::ExfatRootCluster,
            ExfatIssue::NoBootSignature => FindingCode::ExfatBootSignature,
            ExfatIssue::Revision { .. } | ExfatIssue::MustBeZero | ExfatIssue::TooSmall { .. } => {
                FindingCode::ExfatField
            }
        }
    }

    /// True when a reader gets the volume wrong (an error, not a warning).
    #[must_use]
    pub fn is_error(&self) -> bool {
        matches!(
            self,
            ExfatIssue::ClusterCount { .. }
                | ExfatIssue::FatTooSmall { .. }
                | ExfatIssue::RootCluster { .. }
        )
    }
}

/// Is this sector an exFAT boot sector (the file system name at offset 3)?
#[must_use]
pub fn looks_like_exfat(sector: &[u8]) -> bool {
    sector.get(3..11) == Some(&FILE_SYSTEM_NAME[..])
}

/// The sector size an exFAT boot sector claims (for reading its boot region), if valid.
#[must_use]
pub fn sector_bytes(sector: &[u8]) -> Option<u64> {
    let shift = *sector.get(108)?;
    (9..=12).contains(&shift).then(|| 1u64 << shift)
}

/// Parses a boot sector (at least the first 512 bytes of the volume).
pub fn parse_exfat(sector: &[u8]) -> Result<ExfatVolume, ExfatError> {
    let Ok((raw, _)) = BootSectorRaw::read_from_prefix(sector) else {
        return Err(ExfatError::Truncated { len: sector.len() });
    };
    if raw.file_system_name != FILE_SYSTEM_NAME {
        return Err(ExfatError::NotExfat);
    }
    let bps_shift = raw.bytes_per_sector_shift;
    if !(9..=12).contains(&bps_shift) {
        return Err(ExfatError::SectorShift { value: bps_shift });
    }
    let spc_shift = raw.sectors_per_cluster_shift;
    if u32::from(bps_shift).saturating_add(u32::from(spc_shift)) > 25 {
        return Err(ExfatError::ClusterShift { value: spc_shift });
    }
    let fats = raw.number_of_fats;
    if !matches!(fats, 1 | 2) {
        return Err(ExfatError::FatCount { value: fats });
    }
    let fat_offset = raw.fat_offset.get();
    if u64::from(fat_offset) < MIN_FAT_OFFSET {
        return Err(ExfatError::FatOffset { value: fat_offset });
    }
    let s = 1u64 << bps_shift;
    let spc = 1u64 << spc_shift;
    let fat_length = u64::from(raw.fat_length.get());
    let fat_end = u64::from(fat_offset).saturating_add(fat_length.saturating_mul(u64::from(fats)));
    let heap = u64::from(raw.cluster_heap_offset.get());
    if heap < fat_end {
        return Err(ExfatError::HeapOffset {
            heap,
            fat_end,
            fats,
        });
    }
    let length = raw.volume_length.get();
    if heap >= length {
        return Err(ExfatError::HeapPastEnd { heap, length });
    }
    let clusters = u64::from(raw.cluster_count.get());
    if clusters == 0 {
        return Err(ExfatError::NoClusters);
    }
    let mut issues = Vec::new();
    let fits = length
        .saturating_sub(heap)
        .checked_div(spc)
        .unwrap_or(0)
        .min(MAX_CLUSTERS);
    if clusters > fits {
        issues.push(ExfatIssue::ClusterCount {
            clusters,
            max: fits,
        });
    }
    let entries = fat_length.saturating_mul(s).checked_div(4).unwrap_or(0);
    if entries < clusters.saturating_add(2) {
        issues.push(ExfatIssue::FatTooSmall {
            fat_length,
            entries,
            clusters,
        });
    }
    let root = u64::from(raw.first_cluster_of_root_directory.get());
    let max = clusters.saturating_add(1);
    if root < 2 || root > max {
        issues.push(ExfatIssue::RootCluster { value: root, max });
    }
    if raw.boot_signature.get() != BOOT_SIGNATURE {
        issues.push(ExfatIssue::NoBootSignature);
    }
    let [minor, major] = raw.file_system_revision.get().to_le_bytes();
    if major != 1 {
        issues.push(ExfatIssue::Revision { major, minor });
    }
    if raw.must_be_zero.iter().any(|&b| b != 0) {
        issues.push(ExfatIssue::MustBeZero);
    }
    let bytes = length.saturating_mul(s);
    if bytes < 1 << 20 {
        issues.push(ExfatIssue::TooSmall { bytes });
    }
    Ok(ExfatVolume {
        sector_bytes: s,
        cluster_bytes: s.saturating_mul(spc),
        partition_offset: raw.partition_offset.get(),
        volume_sectors: length,
        fat_offset: u64::from(fat_offset),
        fat_length,
        fat_count: fats,
        heap_offset: heap,
        clusters,
        root_cluster: root,
        serial: raw.volume_serial_number.get(),
        revision: (major, minor),
        issues,
    })
}

/// What is wrong with a boot region (12 sectors of `sector` bytes).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum RegionProblem {
    /// The checksum sector does not hold the checksum of sectors 0–10.
    #[error("the boot checksum sector (sector 11) holds {found:#010x} but sectors 0–10 sum to {computed:#010x}")]
    Checksum {
        /// Computed.
        computed: u32,
        /// Found (its first value).
        found: u32,
    },
    /// An extended boot sector without its signature.
    #[error("extended boot sector {sector} does not end with the signature 00 00 55 AA")]
    ExtendedSignature {
        /// Sector 1–8.
        sector: u64,
    },
    /// Fewer bytes than a boot region.
    #[error("the boot region is truncated")]
    Truncated,
}

/// Checks one boot region: the checksum sector, the extended boot signatures.
pub fn check_region(region: &[u8], sector: u64) -> Result<(), RegionProblem> {
    let s = usize::try_from(sector).map_err(|_| RegionProblem::Truncated)?;
    let body_len = s.checked_mul(11).ok_or(RegionProblem::Truncated)?;
    let end = s.checked_mul(12).ok_or(RegionProblem::Truncated)?;
    let body = region.get(..body_len).ok_or(RegionProblem::Truncated)?;
    let sums = region.get(body_len..end).ok_or(RegionProblem::Truncated)?;
    let computed = boot_checksum(body);
    let mut words = sums.chunks_exact(4).map(|c| {
        u32::from_le_bytes([
            c.first().copied().unwrap_or(0),
            c.get(1).copied().unwrap_or(0),
            c.get(2).copied().unwrap_or(0),
            c.get(3).copied().unwrap_or(0),
        ])
    });
    let found = words.next().unwrap_or(0);
    if found != computed || words.any(|w| w != computed) {
        return Err(RegionProblem::Checksum { computed, found });
    }
    for k in 1..=8u64 {
        let at = usize::try_from(k.saturating_add(1).saturating_mul(sector).saturating_sub(4))
            .map_err(|_| RegionProblem::Truncated)?;
        let sig = region
            .get(at..at.saturating_add(4))
            .ok_or(RegionProblem::Truncated)?;
        if sig != EXTENDED_BOOT_SIGNATURE.to_le_bytes() {
            return Err(RegionProblem::ExtendedSignature { sector: k });
        }
    }
    Ok(())
}

/// What the first cluster of the root directory holds.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RootInfo {
    /// Allocation bitmap: (first cluster, bytes).
    pub bitmap: Option<(u64, u64)>,
    /// Up-case table: (first cluster, bytes, checksum).
    pub upcase: Option<(u64, u64, u32)>,
    /// Volume label.
    pub label: Option<String>,
    /// Volume GUID (on-disk order) and whether its set checksum holds.
    pub guid: Option<([u8; 16], bool)>,
}

/// Reads the critical entries of the root directory from `dir` (its first bytes; the end of
/// the directory or of `dir` stops the scan). Bounded by `dir.len() / 32` entries.
#[must_use]
pub fn parse_root(dir: &[u8]) -> RootInfo {
    let mut info = RootInfo::default();
    for e in dir.chunks_exact(32) {
        let Ok(g) = GenericEntryRaw::read_from_bytes(e) else {
            break;
        };
        match g.entry_type {
            entry_type::END => break,
            entry_type::BITMAP => {
                if let Ok(b) = BitmapEntryRaw::read_from_bytes(e) {
                    // The first bitmap (a second one belongs to TexFAT's second FAT).
                    if b.bitmap_flags & 1 == 0 && info.bitmap.is_none() {
                        info.bitmap = Some((u64::from(b.first_cluster.get()), b.data_length.get()));
                    }
                }
            }
            entry_type::UPCASE => {
                if let Ok(u) = UpcaseEntryRaw::read_from_bytes(e) {
                    info.upcase.get_or_insert((
                        u64::from(u.first_cluster.get()),
                        u.data_length.get(),
                        u.table_checksum.get(),
                    ));
                }
            }
            entry_type::LABEL => {
                if let Ok(l) = LabelEntryRaw::read_from_bytes(e) {
                    let n = usize::from(l.character_count.min(11));
                    let units: Vec<u16> = l.volume_label.iter().take(n).map(|u| u.get()).collect();
                    let text = String::from_utf16_lossy(&units);
                    let clean: String = text
                        .chars()
                        .map(|c| if c.is_control() { '?' } else { c })
                        .collect();
                    info.label = Some(clean).filter(|s| !s.is_empty());
                }
            }
            entry_type::GUID => {
                if let Ok(gu) = GuidEntryRaw::read_from_bytes(e) {
                    let ok = set_checksum(e) == gu.set_checksum.get();
                    info.guid = Some((gu.volume_guid, ok));
                }
            }
            _ => {}
        }
    }
    info
}

#[cfg(test)]
#[expect(clippy::indexing_slicing, clippy::unwrap_used, reason = "tests")]
mod tests {
    use super::*;

    /// A boot sector like a 64 GB card's from the factory.
    fn sector() -> Vec<u8> {
        let mut b = vec![0u8; 512];
        b[0..3].copy_from_slice(&[0xeb, 0x76, 0x90]);
        b[3..11].copy_from_slice(b"EXFAT   ");
        b[0x40..0x48].copy_from_slice(&32768u64.to_le_bytes());
        b[0x48..0x50].copy_from_slice(&125_040_640u64.to_le_bytes());
        b[0x50..0x54].copy_from_slice(&16384u32.to_le_bytes());
        b[0x54..0x58].copy_from_slice(&16384u32.to_le_bytes());
        b[0x58..0x5c].copy_from_slice(&32768u32.to_le_bytes());
        b[0x5c..0x60].copy_from_slice(&488_312u32.to_le_bytes());
        b[0x60..0x64].copy_from_slice(&5u32.to_le_bytes());
        b[0x68..0x6a].copy_from_slice(&0x0100u16.to_le_bytes());
        b[0x6c] = 9;
        b[0x6d] = 8;
        b[0x6e] = 1;
        b[510] = 0x55;
        b[511] = 0xaa;
        b
    }

    fn check(mutate: impl Fn(&mut Vec<u8>), expected: Result<(), ExfatError>) {
        let mut b = sector();
        mutate(&mut b);
        assert_eq!(parse_exfat(&b).map(|_| ()), expected);
    }

    #[test]
    fn golden() {
        let v = parse_exfat(&sector()).unwrap();
        assert_eq!(
            (v.cluster_bytes, v.heap_offset, v.clusters),
            (128 << 10, 32768, 488_312)
        );
        assert!(v.issues.is_empty(), "{:?}", v.issues);
    }

    #[test]
    fn negative_fields() {
        check(|b| b[3] = b'X', Err(ExfatError::NotExfat));
        check(|b| b[0x6c] = 13, Err(ExfatError::SectorShift { value: 13 }));
        check(
            |b| b[0x6d] = 17,
            Err(ExfatError::ClusterShift { value: 17 }),
        );
        check(|b| b[0x6e] = 0, Err(ExfatError::FatCount { value: 0 }));
        check(
            |b| b[0x50..0x54].fill(0),
            Err(ExfatError::FatOffset { value: 0 }),
        );
        check(
            |b| b[0x58..0x5c].copy_from_slice(&100u32.to_le_bytes()),
            Err(ExfatError::HeapOffset {
                heap: 100,
                fat_end: 32768,
                fats: 1,
            }),
        );
        check(|b| b[0x5c..0x60].fill(0), Err(ExfatError::NoClusters));
        assert_eq!(
            parse_exfat(&[0u8; 10]),
            Err(ExfatError::Truncated { len: 10 })
        );
        let mut b = sector();
        b[0x5c..0x60].copy_from_slice(&u32::MAX.to_le_bytes());
        let v = parse_exfat(&b).unwrap();
        assert_eq!(v.issues[0].code(), FindingCode::ExfatClusterCount);
    }
}

#[cfg(test)]
#[expect(clippy::indexing_slicing, clippy::unwrap_used, reason = "tests")]
mod hostile {
    use blockwise_exfat::{plan, write, ExfatOptions, ExfatRequest};
    use blockwise_geometry::{BlockSource, Meta, NodeKind, SectorSize, SparseImage, Tree};
    use proptest::prelude::*;

    use crate::{verify_bytes, Options};

    /// An 8 MiB exFAT volume with a few files, as bytes.
    fn volume() -> Vec<u8> {
        let req = ExfatRequest {
            partition_start_bytes: 0,
            partition_size_bytes: 8 << 20,
            disk_bytes: 8 << 20,
            device_sector: SectorSize::S512,
            erase_block_bytes: 1 << 20,
            options: ExfatOptions::default(),
            label: Some("FUZZ".into()),
            seed: 1,
        };
        let p = plan(&req).unwrap();
        let mut t = Tree::default();
        let content: Vec<Vec<u8>> = vec![vec![7; 5000]];
        for k in 0..20 {
            let f = NodeKind::File {
                size: 5000,
                content: 0,
                data_ranges: None,
                link: None,
            };
            t.add(0, format!("file {k}"), f, Meta::default()).unwrap();
        }
        let mut img = SparseImage::new(8 << 20);
        write(&mut img, &req, &p, &t, &content, 0).unwrap();
        let mut b = vec![0u8; 8 << 20];
        img.read_at(0, &mut b).unwrap();
        b
    }

    #[test]
    fn built_volume_verifies_clean() {
        let r = verify_bytes(&volume(), &Options::new("x").erase_block(1 << 20));
        assert!(r.findings.is_empty(), "{:?}", r.findings);
        assert!(r.aligned);
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(200))]
        /// Flipped bytes in the boot region, the FAT and the first clusters never panic.
        #[test]
        fn flipped_bytes_never_panic(flips in prop::collection::vec((0usize..(3 << 20), any::<u8>()), 1..40), cut in prop::option::of(0usize..(8 << 20))) {
            thread_local!(static VOL: Vec<u8> = volume());
            let mut b = VOL.with(Clone::clone);
            for (at, v) in flips {
                // Most flips in the boot sector, where every field matters.
                let at = if v % 2 == 0 { at % 512 } else { at };
                b[at] ^= v | 1;
            }
            if let Some(c) = cut {
                b.truncate(c);
            }
            let r = verify_bytes(&b, &Options::new("x").erase_block(1 << 20));
            let _ = r.to_human();
        }
    }
}
