//! `size = "auto"`: the smallest multiple of the erase block whose FAT volume holds a tree,
//! computed from the planner's geometry and the writer's own directory scan (entries with
//! their long names, dot entries, the label), never by writing.
//!
//! What a tree needs does not depend on the volume's size, only on the cluster size and on
//! whether the root is the fixed FAT12/16 one: [`FatNeeds`] keeps the directories' entry
//! counts and the file sizes, and [`smallest`] walks the erase-block multiples upwards from a
//! lower bound, planning each one exactly as [`crate::plan()`] does, until the clusters the
//! plan gives hold what the tree needs plus the headroom. For one FAT type the cluster size
//! only grows with the volume, so a volume `x` bytes larger holds at most `x` more bytes of
//! clusters and the walk may jump by what is missing; with `fs = "fat"` below 512 MiB the
//! type changes (fat16 at 16 MiB has smaller clusters than fat12 below it) and the walk goes
//! one multiple at a time. The FAT padding that aligns the data area can shrink as the volume
//! grows, so after the first fit the multiples below it are checked down to the last size
//! known not to fit: the result holds the tree and the multiple below it does not.

use std::collections::HashMap;

use blockwise_geometry::fsplan::walk::{no_fit_reason, smallest_multiple, Candidate, Walk};
use blockwise_geometry::{format_size, FatPlan, FatType, FsKind, Tree};

use crate::options::{Field, Invalid};
use crate::plan::{check_request, plan_layout};
use crate::write::{scan, MAX_DIR_ENTRIES};
use crate::{Error, FatRequest};

/// What a tree needs of any FAT volume.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FatNeeds {
    /// 32-byte entries of the root directory (label, long and short names).
    pub root_entries: u64,
    /// 32-byte entries of every other directory (dot entries included), in scan order.
    dir_entries: Vec<u64>,
    /// Sizes of the non-empty files (hard links are copies on FAT).
    file_sizes: Vec<u64>,
    /// Regular files written (empty ones included).
    pub files: u64,
    /// Directories below the root.
    pub directories: u64,
    /// Bytes of file data.
    pub file_bytes: u64,
}

impl FatNeeds {
    /// Scans `tree` as the writer does (names checked, long names counted, symlinks and
    /// special files left out); `label` says whether the root holds a volume-label entry.
    ///
    /// # Errors
    /// The writer's own refusals: bad or clashing names, files of 4 GiB, directories over
    /// 65,536 entries.
    pub fn new(tree: &Tree, label: bool) -> Result<FatNeeds, Error> {
        let dirs = scan(tree, None, label, &mut Vec::new())?;
        let mut out = FatNeeds {
            root_entries: 0,
            dir_entries: Vec::with_capacity(dirs.len()),
            file_sizes: Vec::new(),
            files: 0,
            directories: 0,
            file_bytes: 0,
        };
        for (i, d) in dirs.iter().enumerate() {
            if i == 0 {
                out.root_entries = d.slots;
            } else {
                out.dir_entries.push(d.slots);
                out.directories += 1;
            }
            for size in d.file_sizes() {
                out.files += 1;
                out.file_bytes = out.file_bytes.saturating_add(size);
                if size > 0 {
                    out.file_sizes.push(size);
                }
            }
        }
        Ok(out)
    }

    /// 32-byte directory entries of every directory, the root included.
    #[must_use]
    pub fn entries(&self) -> u64 {
        self.dir_entries
            .iter()
            .fold(self.root_entries, |a, &s| a.saturating_add(s))
    }

    /// Clusters of `cluster_bytes` the tree takes: every directory (the root too unless it
    /// is the fixed FAT12/16 one) at least one cluster, every non-empty file its own run.
    #[must_use]
    pub fn clusters(&self, cluster_bytes: u64, fixed_root: bool) -> u64 {
        let cb = cluster_bytes.max(1);
        let dir = |slots: u64| slots.saturating_mul(32).div_ceil(cb).max(1);
        let root = if fixed_root {
            0
        } else {
            dir(self.root_entries)
        };
        let dirs = self
            .dir_entries
            .iter()
            .fold(0u64, |a, &s| a.saturating_add(dir(s)));
        let files = self
            .file_sizes
            .iter()
            .fold(0u64, |a, &s| a.saturating_add(s.div_ceil(cb)));
        root.saturating_add(dirs).saturating_add(files)
    }
}

/// Candidates [`smallest`] plans at most before giving up.
const MAX_ROUNDS: u32 = 1 << 20;

/// The result of [`smallest`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AutoFat {
    /// The partition size: a multiple of the erase block.
    pub size_bytes: u64,
    /// The plan of a volume of that size (what [`crate::plan()`] gives for it).
    pub plan: FatPlan,
    /// What the tree needs.
    pub needs: FatNeeds,
    /// Clusters the tree takes in this volume.
    pub used_clusters: u64,
    /// Clusters left free.
    pub free_clusters: u64,
    /// Free bytes that were asked for.
    pub headroom_bytes: u64,
}

/// Why a candidate size does not hold the tree, for the message when none does.
fn shortfall_text(plan: &FatPlan, used: u64, headroom: u64, needs: &FatNeeds) -> String {
    let cb = u64::from(plan.cluster_bytes);
    if plan.kind != FatType::Fat32 && needs.root_entries > crate::ROOT_ENTRIES {
        return format!(
            "the {} root directory holds {} entries but needs {}",
            plan.kind.name(),
            crate::ROOT_ENTRIES,
            needs.root_entries
        );
    }
    format!(
        "{} needs {used} clusters of {} and {} free, the volume has {}",
        plan.kind.name(),
        format_size(cb),
        format_size(headroom),
        plan.cluster_count
    )
}

/// The smallest multiple of `req.erase_block_bytes` (at least one) whose volume holds `tree`
/// with at least `headroom_bytes` free; `req.partition_size_bytes` is ignored.
///
/// # Errors
/// The request's own errors (options, label), the writer's refusals of the tree
/// ([`FatNeeds::new`]), and [`Error::Invalid`] naming [`Field::Size`] when no volume of the
/// requested type holds it.
pub fn smallest(req: &FatRequest, tree: &Tree, headroom_bytes: u64) -> Result<AutoFat, Error> {
    let e = req.erase_block_bytes;
    let at = |size: u64| FatRequest {
        partition_size_bytes: size,
        ..req.clone()
    };
    // Options, label and erase block are checked once, at the smallest candidate.
    let checked = check_request(&at(e.max(512)))?;
    let s = checked.g.s;
    let needs = FatNeeds::new(tree, checked.label.is_some())?;
    if needs.root_entries > MAX_DIR_ENTRIES {
        return Err(Error::DirectoryTooLarge {
            path: "/".into(),
            entries: needs.root_entries,
            max: MAX_DIR_ENTRIES,
        });
    }
    // The largest volume any allowed type can have (FAT counts sectors in 32 bits).
    let kinds: &[FatType] = match req.fs {
        FsKind::Fat(Some(t)) => match t {
            FatType::Fat12 => &[FatType::Fat12],
            FatType::Fat16 => &[FatType::Fat16],
            FatType::Fat32 => &[FatType::Fat32],
        },
        _ => &[FatType::Fat12, FatType::Fat16, FatType::Fat32],
    };
    if !kinds.contains(&FatType::Fat32) && needs.root_entries > crate::ROOT_ENTRIES {
        let kind = kinds.first().map_or("fat16", |k| k.name());
        return Err(Error::RootDirFull {
            kind,
            entries: needs.root_entries,
            max: crate::ROOT_ENTRIES,
        });
    }
    // A lower bound: the files and directories in clusters of one sector, and the headroom.
    let floor = needs
        .clusters(s, true)
        .saturating_mul(s)
        .saturating_add(headroom_bytes);
    let max_cluster = req.options.cluster.unwrap_or(e.min(128 * s));
    let type_max = kinds
        .iter()
        .map(|k| {
            (k.max_clusters() + 2)
                .saturating_mul(max_cluster)
                .saturating_mul(2)
                .saturating_add(4 * e)
        })
        .max()
        .unwrap_or(0);
    let ceiling = type_max.min(u64::from(u32::MAX).saturating_mul(s));
    let mut cache: HashMap<(u64, bool), u64> = HashMap::new();
    // One candidate: it fits, or it is short (0 bytes missing when growing may not help at
    // once: the plan failed or the fixed root is full), with the reason.
    let eval = |size: u64| -> Result<Candidate<AutoFat>, Error> {
        let (layout, plan) = match plan_layout(&at(size)) {
            Ok(v) => v,
            Err(Error::Invalid(i)) => {
                return Ok(Candidate::Short {
                    missing: 0,
                    why: i.reason,
                })
            }
            Err(other) => return Err(other),
        };
        let fixed = layout.kind != FatType::Fat32;
        let cb = layout.cluster_bytes();
        let used = *cache
            .entry((cb, fixed))
            .or_insert_with(|| needs.clusters(cb, fixed));
        let why = || shortfall_text(&plan, used, headroom_bytes, &needs);
        if fixed && needs.root_entries > layout.root_entries {
            return Ok(Candidate::Short {
                missing: 0,
                why: why(),
            });
        }
        let need = used.saturating_mul(cb).saturating_add(headroom_bytes);
        let have = layout.clusters.saturating_mul(cb);
        if need > have {
            return Ok(Candidate::Short {
                missing: need - have,
                why: why(),
            });
        }
        Ok(Candidate::Fits(AutoFat {
            size_bytes: size,
            plan,
            needs: needs.clone(),
            used_clusters: used,
            free_clusters: layout.clusters - used,
            headroom_bytes,
        }))
    };
    // With fs = "fat" the type (and with it the cluster size) changes below 512 MiB (fat12
    // that runs out of clusters gives way to fat16 with smaller ones, fat16 to fat32 at
    // 512 MiB): there the walk goes one multiple at a time; above, and for a fixed type,
    // the cluster size only grows with the size.
    let walk = Walk {
        erase_block: e,
        from_bytes: floor,
        ceiling_bytes: ceiling,
        linear_below: if matches!(req.fs, FsKind::Fat(None)) {
            512 << 20
        } else {
            0
        },
        max_rounds: MAX_ROUNDS,
    };
    let last_why = match smallest_multiple(walk, |f: &AutoFat| f.size_bytes, eval)? {
        Ok(fit) => return Ok(fit),
        Err(why) => why,
    };
    let kind = match req.fs {
        FsKind::Fat(Some(t)) => t.name(),
        _ => "FAT",
    };
    Err(Error::Invalid(Invalid::new(
        Field::Size,
        no_fit_reason(
            kind,
            needs.files,
            needs.file_bytes,
            headroom_bytes,
            last_why,
        ),
    )))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{plan, write, FatOptions};
    use blockwise_geometry::{Meta, NodeKind, SectorSize, SparseImage};

    fn req(fs: FsKind, e: u64) -> FatRequest {
        FatRequest {
            partition_start_bytes: e,
            partition_size_bytes: 0,
            device_sector: SectorSize::S512,
            erase_block_bytes: e,
            fs,
            options: FatOptions::default(),
            label: Some("AUTO".into()),
            seed: 1,
        }
    }

    /// `files` files of `size` bytes (all content 0), half of them in a subdirectory, with
    /// long names.
    fn tree(files: usize, size: u64) -> Tree {
        let mut t = Tree::default();
        let sub = t
            .add(
                0,
                "sub dir",
                NodeKind::Dir {
                    children: Vec::new(),
                },
                Meta::default(),
            )
            .unwrap();
        for i in 0..files {
            let file = NodeKind::File {
                size,
                content: 0,
                data_ranges: None,
                link: None,
            };
            let parent = if i % 2 == 0 { 0 } else { sub };
            t.add(
                parent,
                format!("a long file name {i}.bin"),
                file,
                Meta::default(),
            )
            .unwrap();
        }
        t
    }

    /// The writer's verdict: planned and written without error.
    fn holds(r: &FatRequest, size: u64, t: &Tree, content: &Vec<Vec<u8>>) -> bool {
        let r = FatRequest {
            partition_size_bytes: size,
            ..r.clone()
        };
        let Ok(p) = plan(&r) else { return false };
        let mut img = SparseImage::new(size);
        write(&mut img, &r, &p, t, content, 0).is_ok()
    }

    #[test]
    fn tight_across_the_automatic_type_steps() {
        // Around 16 MiB fs = "fat" moves from fat12 (4 KiB clusters) to fat16 (2 KiB).
        const MIB: u64 = 1 << 20;
        let content = vec![vec![7u8; (MIB / 2) as usize]];
        for (fs, e) in [
            (FsKind::Fat(None), MIB),
            (FsKind::Fat(None), 256 << 10),
            (FsKind::Fat(Some(FatType::Fat12)), 256 << 10),
            (FsKind::Fat(Some(FatType::Fat16)), MIB),
        ] {
            for files in [1, 20, 28, 30, 31, 33, 40] {
                let t = tree(files, MIB / 2);
                let r = req(fs, e);
                let ctx = format!("{fs} E {e}, {files} files");
                match smallest(&r, &t, 0) {
                    Ok(fit) => {
                        assert!(holds(&r, fit.size_bytes, &t, &content), "{ctx}");
                        assert!(
                            fit.size_bytes == e || !holds(&r, fit.size_bytes - e, &t, &content),
                            "{ctx}: {} also holds it",
                            fit.size_bytes - e
                        );
                    }
                    // fat12 tops out near 16 MiB with 4 KiB clusters.
                    Err(Error::Invalid(i)) if fs == FsKind::Fat(Some(FatType::Fat12)) => {
                        assert_eq!(i.field, Field::Size, "{ctx}");
                        assert!(
                            i.reason.contains("no fat12 volume holds"),
                            "{ctx}: {}",
                            i.reason
                        );
                    }
                    Err(other) => panic!("{ctx}: {other}"),
                }
            }
        }
    }

    #[test]
    fn a_full_fixed_root_needs_fat32() {
        // 600 short names do not fit the 512-entry FAT16 root.
        let mut t = Tree::default();
        for i in 0..600 {
            let file = NodeKind::File {
                size: 1,
                content: 0,
                data_ranges: None,
                link: None,
            };
            t.add(0, format!("F{i}.TXT"), file, Meta::default())
                .unwrap();
        }
        let err = smallest(&req(FsKind::Fat(Some(FatType::Fat16)), 1 << 20), &t, 0).unwrap_err();
        assert!(err.to_string().contains("root directory"), "{err}");
        let fit = smallest(&req(FsKind::Fat(Some(FatType::Fat32)), 1 << 20), &t, 0).unwrap();
        assert_eq!(fit.plan.kind, FatType::Fat32);
    }
}
