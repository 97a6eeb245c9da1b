//! Hybrid MBR on GPT (genimage's `partition-table-type = "hybrid"`): partitions with an
//! `mbr-type` are mirrored into LBA 0 as well as listed in the GPT, so firmware that reads
//! only an MBR (the Raspberry Pi's boot ROM, old BIOSes) finds them.
//!
//! The MBR then holds, in GPT order, one entry per mirrored partition (its MBR type, its
//! start and size, 0x80 when `bootable`), and after them one 0xEE entry from LBA 1 over the
//! primary GPT header and entry array, as genimage 16 writes it (byte for byte with
//! 512-byte sectors). At most three partitions are mirrored: the fourth entry is the 0xEE
//! one. The MBR stores 32-bit LBAs, so a mirrored partition must start and end below
//! 2^32 sectors.
//!
//! The planner records the byte in [`PartitionPlan::mbr_type`]; the table writer and
//! `verify` (which fills the same field from what it reads) take it from there.

use crate::layout::{Layout, LayoutError, PartKey, PartitionLayout, TableKind};
use crate::plan::PartitionPlan;
use crate::types::{resolve, PartType};
use crate::units::SectorSize;
use crate::FsKind;

/// Most partitions a hybrid MBR mirrors (the fourth entry is the 0xEE one).
pub const MAX_MIRRORED: usize = 3;

/// The MBR type byte of `mbr-type = text` for a partition holding `fs`.
pub fn mbr_type_byte(fs: FsKind, text: &str) -> Result<u8, String> {
    if text
        .trim()
        .trim_start_matches("0x")
        .eq_ignore_ascii_case("ee")
    {
        return Err("type 0xee is the GPT protective entry, which the hybrid MBR adds itself after the mirrored ones".into());
    }
    match resolve(TableKind::Mbr, fs, Some(text))? {
        PartType::Mbr(b) => Ok(b),
        PartType::Gpt(_) => Err(format!("{text:?} is not an MBR type byte")),
    }
}

/// Checks `mbr-type` of the partition at 0-based index `i`.
pub(crate) fn validate(i: usize, p: &PartitionLayout, table: TableKind) -> Result<(), LayoutError> {
    let Some(text) = p.mbr_type.as_deref() else {
        return Ok(());
    };
    let err = |r: String| Err(LayoutError::part(i, PartKey::MbrType, r));
    if table != TableKind::Gpt {
        return err(format!(
            "mirrors a GPT partition into a hybrid MBR, so it needs table = \"gpt\" (this table is {table}); with an MBR table, `type` is the partition's type"
        ));
    }
    if !p.in_table {
        return err("a partition left out of the partition table (in-partition-table = false) cannot be mirrored into the MBR".into());
    }
    mbr_type_byte(p.fs, text)
        .map(|_| ())
        .map_err(|r| LayoutError::part(i, PartKey::MbrType, r))
}

/// At most [`MAX_MIRRORED`] partitions (slot copies counted) have an `mbr-type`.
pub(crate) fn validate_count(layout: &Layout) -> Result<(), LayoutError> {
    let mut count = 0usize;
    for (i, p) in layout.partitions.iter().enumerate() {
        if p.mbr_type.is_some() {
            count = count.saturating_add(p.copies());
            if count > MAX_MIRRORED {
                return Err(LayoutError::part(
                    i,
                    PartKey::MbrType,
                    format!("a hybrid MBR mirrors at most {MAX_MIRRORED} partitions (the fourth entry is the 0xEE one covering the GPT); this is the {count}th (slot copies count once each)"),
                ));
            }
        }
    }
    Ok(())
}

/// The 32-bit limit of the MBR for mirrored partitions: `Err((spec index, reason))`.
pub(crate) fn check_limits(parts: &[PartitionPlan], s: SectorSize) -> Result<(), LayoutError> {
    let limit = 1u64 << 32;
    for p in parts.iter().filter(|p| p.mbr_type.is_some()) {
        let end = p.end_bytes() / s.bytes_u64();
        if end > limit {
            return Err(LayoutError::part(
                p.spec_index,
                PartKey::MbrType,
                format!(
                    "the partition ends at sector {end}, past what an MBR entry addresses (2^32 sectors of {s} bytes); place it lower on the disk or drop mbr-type"
                ),
            ));
        }
    }
    Ok(())
}

/// The 0xEE entry of a hybrid MBR: `(first LBA, sectors)`, over the primary GPT header and
/// entry array (LBA 1 up to the first usable LBA).
#[must_use]
pub fn protective_entry(first_usable_lba: u64) -> (u64, u64) {
    (1, first_usable_lba.saturating_sub(1))
}

#[cfg(test)]
#[expect(clippy::unwrap_used, clippy::indexing_slicing, reason = "tests")]
mod tests {
    use crate::{plan, FsKind, ImageSpec, Layout, PartitionLayout, SizeSpec, TableKind};

    fn layout(table: TableKind, types: &[Option<&str>]) -> Layout {
        Layout {
            image: ImageSpec {
                table,
                ..ImageSpec::default()
            },
            partitions: types
                .iter()
                .map(|t| {
                    let mut p = PartitionLayout::new(FsKind::None, SizeSpec::Bytes(1 << 20));
                    p.mbr_type = t.map(str::to_string);
                    p
                })
                .collect(),
        }
    }

    fn err(l: &Layout) -> String {
        plan(l).unwrap_err().to_string()
    }

    #[test]
    fn mirrored_types_are_planned() {
        let p = plan(&layout(
            TableKind::Gpt,
            &[Some("fat32"), None, Some("0x83"), Some("12")],
        ))
        .unwrap();
        let got: Vec<_> = p.partitions.iter().map(|p| p.mbr_type).collect();
        assert_eq!(got, [Some(0x0c), None, Some(0x83), Some(0x12)]);
    }

    #[test]
    fn refusals_name_the_key() {
        let e = err(&layout(TableKind::Mbr, &[Some("0x0c")]));
        assert!(e.starts_with("partition[1].mbr-type: mirrors a GPT partition into a hybrid MBR, so it needs table = \"gpt\" (this table is mbr)"), "{e}");
        let e = err(&layout(TableKind::Gpt, &[Some("0xee")]));
        assert!(
            e.starts_with("partition[1].mbr-type: type 0xee is the GPT protective entry"),
            "{e}"
        );
        let e = err(&layout(TableKind::Gpt, &[Some("0x0f")]));
        assert!(e.contains("is an extended partition"), "{e}");
        let e = err(&layout(TableKind::Gpt, &[Some("bogus")]));
        assert!(
            e.starts_with("partition[1].mbr-type: \"bogus\" is neither an MBR type byte"),
            "{e}"
        );
        let e = err(&layout(
            TableKind::Gpt,
            &[Some("1"), Some("2"), None, Some("3"), Some("4")],
        ));
        assert!(
            e.starts_with("partition[5].mbr-type: a hybrid MBR mirrors at most 3 partitions"),
            "{e}"
        );
        let mut l = layout(TableKind::Gpt, &[Some("1")]);
        l.partitions[0].slots = vec!["a".into(), "b".into()];
        l.partitions[0].name = Some("boot".into());
        plan(&l).unwrap();
        l.partitions.push(l.partitions[0].clone());
        l.partitions[1].name = Some("other".into());
        let e = err(&l);
        assert!(e.contains("this is the 4th"), "{e}");
        let mut l = layout(TableKind::Gpt, &[Some("1")]);
        l.partitions[0].in_table = false;
        let e = err(&l);
        assert!(e.contains("in-partition-table = false"), "{e}");
        // Past 2^32 sectors.
        let mut l = layout(TableKind::Gpt, &[None, Some("0x83")]);
        l.partitions[0].size = SizeSpec::Bytes(3 << 40);
        let e = err(&l);
        assert!(
            e.starts_with("partition[2].mbr-type: the partition ends at sector"),
            "{e}"
        );
    }
}
