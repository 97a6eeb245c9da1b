//! The filesystem part of a plan: what the FAT and ext4 planners decide, in the same shape
//! that `verify` reports, so that `verify(build(spec))` can be compared with `plan(spec)`.

mod ext4;
mod fat;

pub use ext4::Ext4Plan;
pub use fat::{FatPlan, FatType, MAX_FAT32_CLUSTERS};

use serde::Serialize;

/// A filesystem inside a partition, as planned or as found.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(untagged)]
pub enum FsPlan {
    /// FAT12/16/32.
    Fat(FatPlan),
    /// ext2/3/4.
    Ext4(Ext4Plan),
    /// Something recognised but not checked (swap, squashfs, …) or raw bytes.
    Other(OtherFs),
}

impl FsPlan {
    /// The filesystem's alignment verdict: `Some(true)`/`Some(false)` when a parser (or a
    /// planner) knows its internal layout, `None` when it is only named (swap, raw bytes, a
    /// filesystem verify has no parser for, one too damaged to read). The one place that
    /// decides whether a partition's contents count as checked: a new filesystem variant
    /// gives its verdict here.
    #[must_use]
    pub fn alignment(&self) -> Option<bool> {
        match self {
            FsPlan::Fat(f) => Some(f.aligned),
            FsPlan::Ext4(x) => Some(x.aligned),
            FsPlan::Other(o) => o.aligned,
        }
    }

    /// The kind as the JSON names it (`fat32`, `ext4`, `swap`, `raw`, …).
    #[must_use]
    pub fn kind_name(&self) -> &str {
        match self {
            FsPlan::Fat(f) => f.kind.name(),
            FsPlan::Ext4(x) => &x.kind,
            FsPlan::Other(o) => &o.kind,
        }
    }
}

/// A filesystem that is only named, not planned or checked.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct OtherFs {
    /// What it is (`raw` for bytes that are no filesystem verify recognises, `swap`,
    /// `squashfs`, …).
    pub kind: String,
    /// Whether alignment was checked (`None`: not checked).
    pub aligned: Option<bool>,
}
