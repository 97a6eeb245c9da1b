//! The filesystem part of a plan: what the FAT and ext4 planners decide, in the same shape
//! that `verify` reports, so that `verify(build(spec))` can be compared with `plan(spec)`.

mod exfat;
mod ext4;
mod fat;

pub use exfat::{sda_exfat_params, ExfatPlan};
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
    /// exFAT.
    Exfat(ExfatPlan),
    /// Something recognised but not checked (swap, squashfs, …) or raw bytes.
    Other(OtherFs),
}

impl FsPlan {
    /// The filesystem's kind as the JSON `kind` field spells it (`fat32`, `ext4`, `exfat`,
    /// `squashfs`, …).
    #[must_use]
    pub fn kind_name(&self) -> String {
        match self {
            FsPlan::Fat(x) => x.kind.to_string(),
            FsPlan::Ext4(x) => x.kind.clone(),
            FsPlan::Exfat(x) => x.kind.to_string(),
            FsPlan::Other(x) => x.kind.clone(),
        }
    }
}

/// A filesystem that is only named, not planned or checked.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct OtherFs {
    /// What it is (`raw`, `swap`, `squashfs`, …).
    pub kind: String,
    /// Whether alignment was checked (`None`: not checked).
    pub aligned: Option<bool>,
}
