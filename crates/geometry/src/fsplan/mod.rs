//! The filesystem part of a plan: what the FAT and ext4 planners decide, in the same shape
//! that `verify` reports, so that `verify(build(spec))` can be compared with `plan(spec)`.

mod erofs;
mod ext4;
mod fat;
mod squashfs;
mod verity;

pub use erofs::ErofsPlan;
pub use ext4::Ext4Plan;
pub use fat::{FatPlan, FatType, MAX_FAT32_CLUSTERS};
pub use squashfs::SquashfsPlan;
pub use verity::VerityPlan;

use serde::Serialize;

/// A filesystem inside a partition, as planned or as found.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(untagged)]
pub enum FsPlan {
    /// FAT12/16/32.
    Fat(FatPlan),
    /// ext2/3/4.
    Ext4(Ext4Plan),
    /// squashfs.
    Squashfs(SquashfsPlan),
    /// EROFS.
    Erofs(ErofsPlan),
    /// A dm-verity hash area in a partition of its own.
    Verity(VerityPlan),
    /// Something recognised but not checked (swap, squashfs, …) or raw bytes.
    Other(OtherFs),
}

/// A filesystem that is only named, not planned or checked.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct OtherFs {
    /// What it is (`raw`, `swap`, `squashfs`, …).
    pub kind: String,
    /// Whether alignment was checked (`None`: not checked).
    pub aligned: Option<bool>,
}
