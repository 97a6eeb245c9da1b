//! Partition-level checks, whatever the table: range (past the end, over the table, empty),
//! overlaps, and the start's alignment to the flash page and the erase block.

use blockwise_geometry::{
    alignment_of, format_size, BlockSource, FsKind, Guid, PartType, PartitionPlan,
};

use crate::num::div;
use crate::{FindingCode, Severity, Verifier, MAX_REPEATED};

impl<S: BlockSource + ?Sized> Verifier<'_, S> {
    #[expect(
        clippy::too_many_arguments,
        reason = "one constructor for every table kind"
    )]
    pub(crate) fn part(
        &self,
        index: u32,
        start: u64,
        size: u64,
        type_: PartType,
        name: Option<String>,
        bootable: bool,
        guid: Option<Guid>,
    ) -> PartitionPlan {
        PartitionPlan {
            index,
            spec_index: 0,
            start_bytes: start,
            size_bytes: size,
            type_,
            name,
            bootable,
            guid,
            content: FsKind::None,
            logical: false,
            ebr_bytes: None,
            aligned: true,
            checked: true,
            alignment_bytes: alignment_of(start),
            filesystem: None,
            in_table: true,
            attributes: blockwise_geometry::GptAttributes::NONE,
            slot: None,
            mbr_type: None,
        }
    }

    /// Range checks an extent (partition or extended container) against the disk.
    pub(crate) fn check_extent(&mut self, index: u32, start: u64, size: u64, what: &str) {
        let len = self.src.len();
        let sb = self.sector.bytes_u64();
        if start == 0 {
            self.add(
                Severity::Error,
                FindingCode::PartitionOverlapsTable,
                Some(index),
                format!("{what} {index} starts at LBA 0, on top of the partition table: writing to it destroys the table"),
            );
        }
        if size == 0 {
            self.add(
                Severity::Warning,
                FindingCode::PartitionEmpty,
                Some(index),
                format!("{what} {index} has 0 sectors"),
            );
        }
        let end = start.saturating_add(size);
        if end > len {
            self.add(
                Severity::Error,
                FindingCode::PartitionPastEnd,
                Some(index),
                format!(
                    "{what} {index} ends at sector {} ({}) but the source has only {} sectors ({}): the image is truncated or the table is wrong; data there is lost",
                    div(end, sb),
                    format_size(end),
                    div(len, sb),
                    format_size(len)
                ),
            );
        }
    }

    pub(crate) fn finish_partitions(
        &mut self,
        mut parts: Vec<PartitionPlan>,
    ) -> Result<(), S::Error> {
        // Overlaps, in start order.
        let mut order: Vec<usize> = (0..parts.len()).collect();
        order.sort_by_key(|&i| parts.get(i).map_or(0, |p| p.start_bytes));
        let mut overlaps = 0usize;
        for (k, &i) in order.iter().enumerate() {
            for &j in order.iter().skip(k.saturating_add(1)) {
                let (Some(a), Some(b)) = (parts.get(i), parts.get(j)) else {
                    continue;
                };
                if b.start_bytes >= a.end_bytes() {
                    break;
                }
                if a.size_bytes == 0 || b.size_bytes == 0 {
                    continue;
                }
                overlaps = overlaps.saturating_add(1);
                if overlaps <= MAX_REPEATED {
                    let (ai, bi, bs) = (a.index, b.index, b.start_bytes);
                    self.add(
                        Severity::Error,
                        FindingCode::PartitionOverlap,
                        Some(bi),
                        format!("partition {bi} (starting at {bs} B) overlaps partition {ai}: writing one corrupts the other; fix the table"),
                    );
                }
            }
        }
        for p in &mut parts {
            self.check_extent(p.index, p.start_bytes, p.size_bytes, "partition");
            if p.start_bytes < self.src.len() && p.size_bytes > 0 {
                let c = self.classify(p.start_bytes)?;
                self.content(p, c)?;
            }
            self.geometry_findings(p);
        }
        self.r.partitions = parts;
        Ok(())
    }
}
