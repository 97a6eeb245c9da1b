//! Data outside every partition: bootloaders written at fixed offsets (U-Boot at 8 KiB,
//! Rockchip's idbloader at sector 64) and partitions left out of the table. Only the gaps
//! between the partition table and the end of the last partition that starts inside the
//! image are read, never past the image's end, at most [`MAX_SCAN`] bytes in all: a table
//! entry pointing far past the end (hostile or from a larger disk) does not stretch the scan
//! over the rest of the image.

use blockwise_geometry::{BlockSource, PartitionPlan, TableKind};
use serde::Serialize;

use crate::magic::Content;
use crate::Verifier;

/// Most bytes read looking for data outside the partitions.
pub const MAX_SCAN: u64 = 256 << 20;
/// Read size.
const CHUNK: u64 = 1 << 20;
/// Runs of data closer than this are one region (bootloaders have zero padding inside).
const JOIN: u64 = 1 << 20;

/// A stretch of non-zero bytes outside every partition and the partition table.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Region {
    /// First non-zero sector.
    pub start_bytes: u64,
    /// Up to the end of the last non-zero sector.
    pub size_bytes: u64,
    /// `bootloader area`, or `untabled fat` / `untabled ext4` / `untabled swap` … when a
    /// filesystem starts there (a partition written but left out of the table; it then
    /// extends to the last data in its gap).
    pub kind: String,
}

/// The byte ranges a table occupies at the start of the disk (and EBRs), to leave out.
fn table_ranges(kind: TableKind, sb: u64, parts: &[PartitionPlan]) -> Vec<(u64, u64)> {
    let mut v = match kind {
        TableKind::None => Vec::new(),
        TableKind::Mbr => vec![(0, sb)],
        // Protective MBR, header, 16 KiB of entries.
        TableKind::Gpt => vec![(0, sb.saturating_mul(2).saturating_add(16384))],
    };
    for p in parts {
        if let Some(e) = p.ebr_bytes {
            v.push((e, e.saturating_add(sb)));
        }
    }
    v
}

impl<S: BlockSource + ?Sized> Verifier<'_, S> {
    /// Finds data in the gaps before the end of the last partition.
    pub(crate) fn find_regions(&mut self) -> Result<(), S::Error> {
        let kind = self.r.table.kind;
        if kind == TableKind::None || self.r.partitions.is_empty() {
            return Ok(());
        }
        let sb = self.sector.bytes_u64();
        let mut covered = table_ranges(kind, sb, &self.r.partitions);
        covered.extend(
            self.r
                .partitions
                .iter()
                .map(|p| (p.start_bytes, p.end_bytes())),
        );
        covered.sort_unstable();
        let len = self.src.len();
        let last = self
            .r
            .partitions
            .iter()
            .filter(|p| p.start_bytes < len)
            .map(PartitionPlan::end_bytes)
            .max()
            .unwrap_or(0)
            .min(len);
        // The gaps between covered ranges, up to `last`.
        let mut gaps = Vec::new();
        let mut at = 0u64;
        for (s, e) in covered {
            if s > at {
                gaps.push((at, s.min(last)));
            }
            at = at.max(e);
            if at >= last {
                break;
            }
        }
        let mut budget = MAX_SCAN;
        // (start, end, gap start) of each run of non-zero sectors.
        let mut runs: Vec<(u64, u64, u64)> = Vec::new();
        for (gs, ge) in gaps {
            if gs >= ge {
                continue;
            }
            let mut off = gs;
            while off < ge && budget > 0 {
                let n = ge.saturating_sub(off).min(CHUNK).min(budget);
                let len = usize::try_from(n).unwrap_or(0);
                if len == 0 {
                    break;
                }
                let mut buf = vec![0u8; len];
                self.src.read_at(off, &mut buf)?;
                budget = budget.saturating_sub(n);
                let mut bo = off;
                for block in buf.chunks(usize::try_from(sb).unwrap_or(512)) {
                    let bl = u64::try_from(block.len()).unwrap_or(0);
                    if block.iter().any(|&b| b != 0) {
                        let end = bo.saturating_add(bl);
                        match runs.last_mut() {
                            Some(r) if bo.saturating_sub(r.1) < JOIN && r.2 == gs => r.1 = end,
                            _ => runs.push((bo, end, gs)),
                        }
                    }
                    bo = bo.saturating_add(bl);
                }
                off = off.saturating_add(n);
            }
        }
        // A filesystem's metadata and data are far apart: the runs after one that starts a
        // filesystem, in the same gap, belong to it.
        let mut fs_gap = None;
        for (s, e, g) in runs {
            if fs_gap == Some(g) {
                if let Some(last) = self.r.regions.last_mut() {
                    last.size_bytes = e.saturating_sub(last.start_bytes);
                    continue;
                }
            }
            let kind = match self.classify(s)? {
                Content::Fat => "untabled fat".to_string(),
                Content::Ext => "untabled ext4".to_string(),
                Content::Other(k) => format!("untabled {k}"),
                Content::Empty | Content::Unknown => "bootloader area".to_string(),
            };
            fs_gap = kind.starts_with("untabled").then_some(g);
            self.r.regions.push(Region {
                start_bytes: s,
                size_bytes: e.saturating_sub(s),
                kind,
            });
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    #![expect(
        clippy::unwrap_used,
        clippy::indexing_slicing,
        clippy::arithmetic_side_effects,
        reason = "tests"
    )]

    use core::cell::Cell;

    use blockwise_geometry::BlockSource;

    use crate::{verify, Options};

    /// A 1 GiB disk of zeros but for its MBR, counting the bytes read.
    struct Counting {
        mbr: [u8; 512],
        read: Cell<u64>,
    }

    impl BlockSource for Counting {
        type Error = core::convert::Infallible;
        fn len(&self) -> u64 {
            1 << 30
        }
        fn read_at(&self, offset: u64, buf: &mut [u8]) -> Result<(), Self::Error> {
            self.read
                .set(self.read.get() + u64::try_from(buf.len()).unwrap());
            buf.fill(0);
            if offset < 512 {
                let from = usize::try_from(offset).unwrap();
                let n = (512 - from).min(buf.len());
                buf[..n].copy_from_slice(&self.mbr[from..from + n]);
            }
            Ok(())
        }
    }

    fn disk(entries: &[(u8, u32, u32)]) -> Counting {
        let mut mbr = [0u8; 512];
        for (slot, &(t, start, sectors)) in entries.iter().enumerate() {
            let at = 0x1be + slot * 16;
            mbr[at + 4] = t;
            mbr[at + 8..at + 12].copy_from_slice(&start.to_le_bytes());
            mbr[at + 12..at + 16].copy_from_slice(&sectors.to_le_bytes());
        }
        mbr[510] = 0x55;
        mbr[511] = 0xaa;
        Counting {
            mbr,
            read: Cell::new(0),
        }
    }

    /// r25: an MBR entry 2 TiB past the end of a 1 GiB image does not make the gap scan
    /// read the rest of the image (it read 256 MiB): the reads are those of the same disk
    /// without that entry.
    #[test]
    fn r25_an_entry_far_past_the_end_does_not_stretch_the_gap_scan() {
        let one = (0x83, 8192, 8192);
        let plain = disk(&[one]);
        let report = verify(&plain, &Options::new("plain")).unwrap();
        assert!(report.recognised);
        let base = plain.read.get();
        let hostile = disk(&[one, (0x83, 0xffff_0000, 8192)]);
        let report = verify(&hostile, &Options::new("hostile")).unwrap();
        assert!(report.recognised);
        assert!(
            hostile.read.get() <= base + (1 << 20),
            "read {} bytes, {base} without the entry",
            hostile.read.get()
        );
        assert!(hostile.read.get() < 16 << 20, "{}", hostile.read.get());
    }
}
