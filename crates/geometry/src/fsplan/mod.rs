//! The filesystem part of a plan: what the FAT and ext4 planners decide, in the same shape
//! that `verify` reports, so that `verify(build(spec))` can be compared with `plan(spec)`.

mod erofs;
mod exfat;
mod ext4;
pub mod f2fs;
mod fat;
mod squashfs;
mod verity;
pub mod walk;

pub use erofs::ErofsPlan;
pub use exfat::{sda_exfat_params, ExfatPlan};
pub use ext4::Ext4Plan;
pub use f2fs::{F2fsOptions, F2fsPlan};
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
    /// F2FS.
    F2fs(F2fsPlan),
    /// exFAT.
    Exfat(ExfatPlan),
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
            FsPlan::F2fs(x) => Some(x.aligned),
            FsPlan::Exfat(x) => Some(x.aligned),
            FsPlan::Squashfs(q) => Some(q.aligned),
            FsPlan::Erofs(r) => Some(r.aligned),
            FsPlan::Verity(v) => Some(v.aligned),
            FsPlan::Other(o) => o.aligned,
        }
    }

    /// The filesystem's kind as the JSON `kind` field spells it (`fat32`, `ext4`, `exfat`,
    /// `f2fs`, `squashfs`, …).
    #[must_use]
    pub fn kind_name(&self) -> String {
        match self {
            FsPlan::Fat(x) => x.kind.to_string(),
            FsPlan::Ext4(x) => x.kind.clone(),
            FsPlan::F2fs(x) => x.kind.clone(),
            FsPlan::Exfat(x) => x.kind.to_string(),
            FsPlan::Squashfs(x) => x.kind.clone(),
            FsPlan::Erofs(x) => x.kind.clone(),
            FsPlan::Verity(x) => x.kind.clone(),
            FsPlan::Other(x) => x.kind.clone(),
        }
    }

    /// The volume label, where the filesystem has one.
    #[must_use]
    pub fn label(&self) -> Option<&str> {
        match self {
            FsPlan::Fat(f) => f.label.as_deref(),
            FsPlan::Ext4(x) => x.label.as_deref(),
            FsPlan::F2fs(f) => f.label.as_deref(),
            FsPlan::Exfat(x) => x.label.as_deref(),
            FsPlan::Erofs(x) => x.label.as_deref(),
            FsPlan::Squashfs(_) | FsPlan::Verity(_) => None,
            FsPlan::Other(o) => o.label.as_deref(),
        }
    }
}

/// A filesystem that is only named, not planned, and whose internal alignment is not
/// checked: raw bytes, or a format `verify` recognises by its header (swap, NTFS, btrfs,
/// XFS, ISO 9660, LUKS, …), with what that header says. Every field but `kind` and
/// `aligned` is left out of the JSON when unknown.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct OtherFs {
    /// What it is (`raw` for bytes that are no filesystem verify recognises, `swap`,
    /// `squashfs`, …).
    pub kind: String,
    /// Whether alignment was checked (`None`: not checked).
    pub aligned: Option<bool>,
    /// The format's version, where it has several (`1`/`2` for LUKS, swap's `1`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    /// Volume label.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub label: Option<String>,
    /// Filesystem (or container) UUID, as `blkid` prints it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub uuid: Option<String>,
    /// The size the header says the filesystem spans.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub size_bytes: Option<u64>,
    /// Its block (sector, cluster, page) size.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub block_bytes: Option<u32>,
    /// Absolute offset where its payload starts (LUKS: the encrypted data).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub data_start_bytes: Option<u64>,
    /// RAID stripe unit the filesystem was made for (XFS `sunit`), bytes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stripe_unit_bytes: Option<u64>,
    /// RAID stripe width (XFS `swidth`), bytes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stripe_width_bytes: Option<u64>,
}

impl OtherFs {
    /// Only a name, alignment not checked.
    #[must_use]
    pub fn named(kind: impl Into<String>) -> Self {
        OtherFs {
            kind: kind.into(),
            ..OtherFs::default()
        }
    }
}
