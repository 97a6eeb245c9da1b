//! `size = "auto"`: the smallest multiple of the erase block whose exFAT volume holds a tree,
//! computed from the planner's geometry and the writer's own directory scan (entry sets with
//! their name entries, the root's bitmap, up-case, label and GUID entries), never by writing.
//!
//! What a tree needs depends only on the cluster size: [`ExfatNeeds`] keeps every
//! directory's 32-byte entries and the file sizes, and [`smallest`] walks the erase-block
//! multiples upwards from a lower bound, planning each exactly as [`crate::plan()`] does. The
//! geometry depends on more than the volume's own size: the SD Association's boundary unit
//! comes from the *disk's* size (which grows with the partition when the image is sized from
//! its partitions), and the cluster size from the volume's. So the caller gives the disk size
//! for each candidate (`disk_for`), and since a larger volume never has smaller clusters nor
//! less overhead per byte, a candidate short of `m` bytes lets the walk jump by `m`; after the
//! first fit the multiples below it are checked down to the last size known not to fit, so
//! the result holds the tree and the multiple below it does not.

use std::collections::HashMap;

use blockwise_geometry::fsplan::walk::{no_fit_reason, smallest_multiple, Candidate, Walk};
use blockwise_geometry::{format_size, ExfatPlan, Tree};

use crate::options::{validate_label, Field, Invalid};
use crate::plan::{plan_layout, upcase_tables};
use crate::write::scan;
use crate::{Error, ExfatRequest};

/// What a tree needs of any exFAT volume.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ExfatNeeds {
    /// 32-byte entries of every directory (index 0: the root, with its bitmap, up-case,
    /// label and GUID entries), in scan order.
    dir_entries: Vec<u64>,
    /// Sizes of the non-empty files (hard links are copies on exFAT).
    file_sizes: Vec<u64>,
    /// Regular files written (empty ones included).
    pub files: u64,
    /// Directories below the root.
    pub directories: u64,
    /// Bytes of file data.
    pub file_bytes: u64,
}

impl ExfatNeeds {
    /// Scans `tree` as the writer does (names checked and folded through the up-case table,
    /// symlinks and special files left out); `root_extra` counts the label and volume-GUID
    /// entries of the root.
    ///
    /// # Errors
    /// The writer's own refusals: bad names, names equal but for case, directories over
    /// exFAT's 256 MiB.
    pub fn new(tree: &Tree, root_extra: u64) -> Result<ExfatNeeds, Error> {
        let (upcase, _) = upcase_tables();
        let dirs = scan(tree, root_extra, upcase, &mut Vec::new())?;
        let mut out = ExfatNeeds {
            dir_entries: Vec::with_capacity(dirs.len()),
            file_sizes: Vec::new(),
            files: 0,
            directories: dirs.len().saturating_sub(1) as u64,
            file_bytes: 0,
        };
        for d in &dirs {
            out.dir_entries.push(d.slots());
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

    /// 32-byte directory entries of every directory, the root's included.
    #[must_use]
    pub fn entries(&self) -> u64 {
        self.dir_entries.iter().fold(0, |a, &s| a.saturating_add(s))
    }

    /// Clusters of `cluster_bytes` the tree takes: every directory (the root too) at least
    /// one cluster, every non-empty file its own contiguous run. The allocation bitmap and
    /// the up-case table are the plan's, not counted here.
    #[must_use]
    pub fn clusters(&self, cluster_bytes: u64) -> u64 {
        let cb = cluster_bytes.max(1);
        let dirs = self.dir_entries.iter().fold(0u64, |a, &s| {
            a.saturating_add(s.saturating_mul(32).div_ceil(cb).max(1))
        });
        self.file_sizes
            .iter()
            .fold(dirs, |a, &s| a.saturating_add(s.div_ceil(cb)))
    }

    /// Bytes of file data and directory entries: what no cluster size packs tighter.
    fn floor_bytes(&self) -> u64 {
        self.file_bytes
            .saturating_add(self.entries().saturating_mul(32))
    }
}

/// Candidates [`smallest`] plans at most before giving up.
const MAX_ROUNDS: u32 = 1 << 20;

/// The result of [`smallest`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AutoExfat {
    /// The partition size: a multiple of the erase block.
    pub size_bytes: u64,
    /// The disk size the plan was made for (what `disk_for` gave).
    pub disk_bytes: u64,
    /// The plan of a volume of that size (what [`crate::plan()`] gives for it).
    pub plan: ExfatPlan,
    /// What the tree needs.
    pub needs: ExfatNeeds,
    /// Clusters the tree takes in this volume (the bitmap and up-case table not included).
    pub used_clusters: u64,
    /// Clusters of the allocation bitmap and the up-case table.
    pub meta_clusters: u64,
    /// Clusters left free.
    pub free_clusters: u64,
    /// Free bytes that were asked for.
    pub headroom_bytes: u64,
}

/// The smallest multiple of `req.erase_block_bytes` (at least one, and at least exFAT's
/// 1 MiB) whose volume holds `tree` with at least `headroom_bytes` free.
/// `req.partition_size_bytes` and `req.disk_bytes` are ignored: `disk_for(size)` gives the
/// disk's size with the partition at `size` (`None`: it does not fit the disk or overflows,
/// which ends the walk).
///
/// # Errors
/// The request's own errors (options, label), the writer's refusals of the tree
/// ([`ExfatNeeds::new`]), and [`Error::Invalid`] naming [`Field::Size`] when no volume holds
/// it.
pub fn smallest(
    req: &ExfatRequest,
    disk_for: &dyn Fn(u64) -> Option<u64>,
    tree: &Tree,
    headroom_bytes: u64,
) -> Result<AutoExfat, Error> {
    let e = req.erase_block_bytes.max(1);
    let label = match &req.label {
        None => None,
        Some(l) => validate_label(l).map_err(Error::Invalid)?,
    };
    let root_extra = u64::from(label.is_some()) + u64::from(req.options.volume_guid.is_some());
    let needs = ExfatNeeds::new(tree, root_extra)?;
    let mut cache: HashMap<u64, u64> = HashMap::new();
    // One candidate: `Ok(fit)`, or `Err(bytes at least missing, why)` (0: growing may not
    // help at once, the plan refused the size).
    // One candidate: it fits, is short (0 bytes missing: the plan refused the size, a
    // larger one may still work), or the disk cannot grow.
    let eval = |size: u64| -> Result<Candidate<AutoExfat>, Error> {
        let Some(disk) = disk_for(size) else {
            return Ok(Candidate::Stop(format!(
                "a partition of {} does not fit the disk",
                format_size(size)
            )));
        };
        let at = ExfatRequest {
            partition_size_bytes: size,
            disk_bytes: disk,
            ..req.clone()
        };
        let (layout, plan) = match plan_layout(&at) {
            Ok(v) => v,
            Err(Error::Invalid(i)) if i.field == Field::Size => {
                return Ok(Candidate::Short {
                    missing: 0,
                    why: i.reason,
                })
            }
            Err(other) => return Err(other),
        };
        let cb = layout.cluster_bytes;
        let used = *cache.entry(cb).or_insert_with(|| needs.clusters(cb));
        let meta = layout.root_cluster - 2;
        let need = used
            .saturating_add(meta)
            .saturating_mul(cb)
            .saturating_add(headroom_bytes);
        let have = layout.clusters.saturating_mul(cb);
        if need > have {
            return Ok(Candidate::Short {
                missing: need - have,
                why: format!(
                    "it needs {} clusters of {} (and {} free), the volume has {}",
                    used.saturating_add(meta),
                    format_size(cb),
                    format_size(headroom_bytes),
                    layout.clusters
                ),
            });
        }
        Ok(Candidate::Fits(AutoExfat {
            size_bytes: size,
            disk_bytes: disk,
            plan,
            needs: needs.clone(),
            used_clusters: used,
            meta_clusters: meta,
            free_clusters: layout.clusters - used - meta,
            headroom_bytes,
        }))
    };
    let walk = Walk {
        erase_block: e,
        from_bytes: needs
            .floor_bytes()
            .saturating_add(headroom_bytes)
            .max(1 << 20),
        ceiling_bytes: u64::MAX,
        linear_below: 0,
        max_rounds: MAX_ROUNDS,
    };
    let last_why = match smallest_multiple(walk, |f: &AutoExfat| f.size_bytes, eval)? {
        Ok(fit) => return Ok(fit),
        Err(why) => why,
    };
    Err(Error::Invalid(Invalid::new(
        Field::Size,
        no_fit_reason(
            "exFAT",
            needs.files,
            needs.file_bytes,
            headroom_bytes,
            last_why,
        ),
    )))
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::indexing_slicing, clippy::panic)]
mod tests {
    use super::*;
    use crate::{plan, write, ExfatOptions};
    use blockwise_geometry::{ImageMap, Meta, NodeKind, SectorSize};

    const MIB: u64 = 1 << 20;
    const GIB: u64 = 1 << 30;

    fn req(e: u64) -> ExfatRequest {
        ExfatRequest {
            partition_start_bytes: e,
            partition_size_bytes: 0,
            disk_bytes: 0,
            device_sector: SectorSize::S512,
            erase_block_bytes: e,
            options: ExfatOptions::default(),
            label: Some("AUTO".into()),
            seed: 1,
        }
    }

    /// `files` files of `size` bytes (content 0), half of them in a subdirectory, with long
    /// names, and a directory of many entries.
    fn tree(files: usize, size: u64) -> Tree {
        let mut t = Tree::default();
        let dir = || NodeKind::Dir {
            children: Vec::new(),
        };
        let sub = t.add(0, "sub dir", dir(), Meta::default()).unwrap();
        let many = t.add(sub, "many", dir(), Meta::default()).unwrap();
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
                format!("a long file name {i} of a camera.bin"),
                file,
                Meta::default(),
            )
            .unwrap();
        }
        for i in 0..files * 7 {
            let file = NodeKind::File {
                size: 1,
                content: 0,
                data_ranges: None,
                link: None,
            };
            t.add(many, format!("entry {i}"), file, Meta::default())
                .unwrap();
        }
        t
    }

    /// The writer's verdict for a partition of `size` at the request's start on a disk of
    /// `size + 2E` (a table before it, a backup after): planned and written without error.
    /// The sink keeps references, so files of many GiB cost nothing.
    fn holds(r: &ExfatRequest, size: u64, t: &Tree) -> bool {
        let r = ExfatRequest {
            partition_size_bytes: size,
            disk_bytes: disk(r.erase_block_bytes, size).unwrap(),
            ..r.clone()
        };
        let Ok(p) = plan(&r) else { return false };
        let content: Vec<Vec<u8>> = vec![vec![7u8; 4096]];
        let mut img = ImageMap::new(size);
        write(&mut img, &r, &p, t, &content, 0).is_ok()
    }

    fn disk(e: u64, size: u64) -> Option<u64> {
        size.checked_add(2 * e)
    }

    #[test]
    fn tight_on_small_and_large_volumes_across_the_tables_rows() {
        // Around 256 MiB (16 KiB -> 32 KiB clusters), 2 GiB and 32 GiB of disk (the boundary
        // unit grows to 4 and 16 MiB), and past 32 GiB of volume (128 KiB clusters).
        for (files, size) in [
            (1, 0),
            (3, 5000),
            (40, 100_000),
            (2, 127 * MIB),
            (1, 255 * MIB),
            (2, GIB - 3 * MIB),
            (1, 2 * GIB - 9 * MIB),
            (4, 8 * GIB - 5 * MIB),
            (1, 32 * GIB - 20 * MIB),
            (2, 64 * GIB),
        ] {
            for e in [256 << 10, MIB, 4 * MIB, 16 * MIB] {
                let t = tree(files, size);
                let r = req(e);
                let ctx = format!("E {e}, {files} files of {size}");
                let fit = smallest(&r, &|s| disk(e, s), &t, 0).unwrap_or_else(|err| {
                    panic!("{ctx}: {err}");
                });
                assert_eq!(fit.size_bytes % e, 0, "{ctx}");
                assert!(holds(&r, fit.size_bytes, &t), "{ctx}: {}", fit.size_bytes);
                assert!(
                    fit.size_bytes <= MIB.max(e) || !holds(&r, fit.size_bytes - e, &t),
                    "{ctx}: {} also holds it",
                    fit.size_bytes - e
                );
                assert_eq!(
                    fit.plan,
                    plan(&ExfatRequest {
                        partition_size_bytes: fit.size_bytes,
                        disk_bytes: fit.disk_bytes,
                        ..r.clone()
                    })
                    .unwrap(),
                    "{ctx}: the plan is the planner's"
                );
            }
        }
    }

    #[test]
    fn headroom_is_left_free() {
        let t = tree(10, 300_000);
        let r = req(MIB);
        let plain = smallest(&r, &|s| disk(MIB, s), &t, 0).unwrap();
        let more = smallest(&r, &|s| disk(MIB, s), &t, 20 * MIB).unwrap();
        assert!(more.size_bytes > plain.size_bytes);
        assert!(
            more.free_clusters * u64::from(more.plan.cluster_bytes) >= 20 * MIB,
            "{more:?}"
        );
    }

    #[test]
    fn refusals_name_the_cause() {
        // A disk that cannot grow.
        let t = tree(2, 64 * MIB);
        let err = smallest(&req(MIB), &|s| (s <= 32 * MIB).then_some(s), &t, 0).unwrap_err();
        assert!(
            err.to_string()
                .contains("no exFAT volume holds the contents"),
            "{err}"
        );
        // Names equal but for case: the writer's own refusal.
        let mut t = Tree::default();
        for n in ["Readme.TXT", "README.txt"] {
            let f = NodeKind::File {
                size: 1,
                content: 0,
                data_ranges: None,
                link: None,
            };
            t.add(0, n, f, Meta::default()).unwrap();
        }
        let err = smallest(&req(MIB), &|s| disk(MIB, s), &t, 0).unwrap_err();
        assert!(matches!(err, Error::CaseConflict { .. }), "{err}");
        // A bad label.
        let r = ExfatRequest {
            label: Some("a label far too long for exFAT".into()),
            ..req(MIB)
        };
        assert!(smallest(&r, &|s| disk(MIB, s), &tree(1, 1), 0).is_err());
    }
}
