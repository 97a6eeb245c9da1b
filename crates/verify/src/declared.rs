//! The erase block an image declares, for `verify` without `--erase-block`: an ext4
//! filesystem's RAID stride (× its block size, as `mke2fs -E stride=` records the flash
//! erase block blockwise and careful tools write), or else the largest power of two every
//! partition start shares, capped at 256 MiB. An image built for a 1 MiB erase block is then
//! checked against 1 MiB, not against a 4 MiB guess; `--erase-block` overrides.

use blockwise_geometry::{format_size, FsPlan, PartitionPlan};
use serde::Serialize;

use crate::DEFAULT_ERASE_BLOCK;

/// Smallest erase block a declaration may name (old USB sticks); anything smaller is a
/// sector or page alignment, not an erase block.
pub const MIN_DECLARED: u64 = 128 << 10;
/// Largest erase block inferred (SD cards' allocation units stop at 256 MiB, and so does
/// `--erase-block`).
pub const MAX_DECLARED: u64 = 256 << 20;

/// Where the erase block checked against came from, when `--erase-block` was not given.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct EraseBlockSource {
    /// `ext4-stride`, `ext4-stripe-width`, `partition-starts` or `default`.
    pub from: &'static str,
    /// The partition whose filesystem declared it (`ext4-stride`, `ext4-stripe-width`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub partition: Option<u32>,
    /// Which and why, in words.
    pub message: String,
}

/// The erase block `partitions` (as read) declare, and why.
#[must_use]
pub fn declared_erase_block(partitions: &[PartitionPlan]) -> (u64, EraseBlockSource) {
    let usable = |v: u64| v.is_power_of_two() && (MIN_DECLARED..=MAX_DECLARED).contains(&v);
    // ext4's RAID hints: the largest one that is a plausible erase block.
    let mut best: Option<(u64, &'static str, u32, String)> = None;
    for p in partitions {
        let Some(FsPlan::Ext4(x)) = &p.filesystem else {
            continue;
        };
        let bs = u64::from(x.block_bytes);
        let stride = u64::from(x.stride).saturating_mul(bs);
        let stripe = u64::from(x.stripe_width).saturating_mul(bs);
        // stride is a 16-bit block count: a 256 MiB erase block does not fit it in 4 KiB
        // blocks, so blockwise then writes half of it as the stride and the whole as the
        // stripe width. A stripe width that is a multiple of a usable stride is the larger
        // declaration.
        let found = if usable(stride)
            && usable(stripe)
            && stripe > stride
            && crate::num::is_multiple(stripe, stride)
        {
            Some((stripe, "ext4-stripe-width", x.stripe_width))
        } else if usable(stride) {
            Some((stride, "ext4-stride", x.stride))
        } else {
            None
        };
        if let Some((bytes, from, blocks)) = found {
            if best.as_ref().is_none_or(|b| bytes > b.0) {
                let field = if from == "ext4-stride" {
                    "stride"
                } else {
                    "stripe width"
                };
                let why = format!(
                    "declared by partition {}'s {} {field} ({blocks} blocks of {})",
                    p.index,
                    x.kind,
                    format_size(bs)
                );
                best = Some((bytes, from, p.index, why));
            }
        }
    }
    if let Some((bytes, from, i, why)) = best {
        return (
            bytes,
            EraseBlockSource {
                from,
                partition: Some(i),
                message: format!("{}, {why}", format_size(bytes)),
            },
        );
    }
    // The partition starts: the largest power of two they all share.
    let shared = partitions
        .iter()
        .filter(|p| p.start_bytes > 0 && p.size_bytes > 0)
        .map(|p| 1u64 << p.start_bytes.trailing_zeros().min(63))
        .min();
    match shared {
        Some(s) if s >= MIN_DECLARED => {
            let bytes = s.min(MAX_DECLARED);
            let capped = if s > MAX_DECLARED {
                format!(" (capped at {})", format_size(MAX_DECLARED))
            } else {
                String::new()
            };
            (
                bytes,
                EraseBlockSource {
                    from: "partition-starts",
                    partition: None,
                    message: format!(
                        "{}, the largest power of two every partition start is a multiple of{capped}",
                        format_size(bytes)
                    ),
                },
            )
        }
        Some(s) => (
            DEFAULT_ERASE_BLOCK,
            EraseBlockSource {
                from: "default",
                partition: None,
                message: format!(
                    "{}, the default: the partition starts share only {}, less than any erase block",
                    format_size(DEFAULT_ERASE_BLOCK),
                    format_size(s)
                ),
            },
        ),
        None => (
            DEFAULT_ERASE_BLOCK,
            EraseBlockSource {
                from: "default",
                partition: None,
                message: format!(
                    "{}, the default: nothing in the image declares an erase block",
                    format_size(DEFAULT_ERASE_BLOCK)
                ),
            },
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use blockwise_geometry::{Ext4Plan, FsKind, GptAttributes, PartType};

    fn part(index: u32, start: u64, size: u64) -> PartitionPlan {
        PartitionPlan {
            index,
            spec_index: 0,
            start_bytes: start,
            size_bytes: size,
            type_: PartType::Mbr(0x83),
            name: None,
            bootable: false,
            guid: None,
            content: FsKind::None,
            logical: false,
            ebr_bytes: None,
            aligned: true,
            checked: true,
            alignment_bytes: 0,
            filesystem: None,
            in_table: true,
            attributes: GptAttributes::NONE,
            slot: None,
            mbr_type: None,
        }
    }

    #[test]
    fn starts_give_the_largest_shared_power_of_two() {
        let (e, s) = declared_erase_block(&[part(1, 1 << 20, 8 << 20), part(2, 9 << 20, 1 << 20)]);
        assert_eq!((e, s.from), (1 << 20, "partition-starts"));
        let (e, _) = declared_erase_block(&[part(1, 8 << 20, 8 << 20), part(2, 24 << 20, 1)]);
        assert_eq!(e, 8 << 20);
        // One partition at 1 GiB: capped.
        let (e, s) = declared_erase_block(&[part(1, 1 << 30, 1 << 20)]);
        assert_eq!(e, MAX_DECLARED);
        assert!(s.message.contains("capped"), "{}", s.message);
        // Sector 63: less than any erase block, the default.
        let (e, s) = declared_erase_block(&[part(1, 63 * 512, 1 << 20)]);
        assert_eq!((e, s.from), (DEFAULT_ERASE_BLOCK, "default"));
        // A bare filesystem (start 0) and empty partitions declare nothing.
        let (e, s) = declared_erase_block(&[part(0, 0, 1 << 20), part(2, 4096, 0)]);
        assert_eq!((e, s.from), (DEFAULT_ERASE_BLOCK, "default"));
        assert!(declared_erase_block(&[]).1.message.contains("nothing"));
    }

    #[test]
    fn ext4_raid_hints_come_first() {
        let mut p = part(2, 1 << 20, 64 << 20);
        let x = |stride: u32, stripe: u32| Ext4Plan {
            block_bytes: 4096,
            stride,
            stripe_width: stripe,
            ..Ext4Plan::default()
        };
        p.filesystem = Some(FsPlan::Ext4(x(2048, 2048)));
        let (e, s) = declared_erase_block(&[part(1, 1 << 20, 1 << 20), p.clone()]);
        assert_eq!((e, s.from, s.partition), (8 << 20, "ext4-stride", Some(2)));
        p.filesystem = Some(FsPlan::Ext4(x(2048, 0)));
        let (e, s) = declared_erase_block(&[p.clone()]);
        assert_eq!((e, s.from), (8 << 20, "ext4-stride"));
        assert!(s.message.contains("2048 blocks of 4 KiB"), "{}", s.message);
        // 256 MiB: stride 32768 blocks (128 MiB), stripe width 65536 (256 MiB).
        p.filesystem = Some(FsPlan::Ext4(x(32768, 65536)));
        assert_eq!(declared_erase_block(&[p.clone()]).0, 256 << 20);
        // Hints that are no erase block (stride 3, 4 KiB) leave it to the starts.
        p.filesystem = Some(FsPlan::Ext4(x(3, 3)));
        assert_eq!(
            declared_erase_block(&[p.clone()]).1.from,
            "partition-starts"
        );
        p.filesystem = Some(FsPlan::Ext4(x(1, 1)));
        assert_eq!(declared_erase_block(&[p]).1.from, "partition-starts");
    }
}
