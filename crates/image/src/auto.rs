//! `size = "auto"` and `"auto+20%+200MiB"`: partition sizes from the contents, computed by
//! the FAT, exFAT and ext4 planners (`blockwise_fat::smallest`, `blockwise_exfat::smallest`,
//! `blockwise_ext4::smallest`) before the layout is planned, so `plan` and `build` (and Python and the page, which call
//! [`crate::plan_full`] too) get the same size. For the partitions whose size comes from
//! their contents anyway (raw sources, squashfs, EROFS, dm-verity), plain `"auto"` means the
//! same as leaving `size` out.

use blockwise_geometry::{
    format_size, plan as plan_layout, AutoSize, FsKind, FsPlan, Layout, NodeKind, Plan, SizeSpec,
    Tree,
};

use crate::assemble::{
    exfat_failure, exfat_request, ext4_failure, ext4_request, fat_failure, fat_request,
};
use crate::spec::{layout_error, pkey, Spec, SpecError};
use blockwise_ext4::Ext4Backend;

use crate::Error;

/// The `size = "auto…"` rules that need no files: which filesystems take it and with what.
pub(crate) fn validate(spec: &Spec) -> Result<(), SpecError> {
    for (i, p) in spec.partitions.iter().enumerate() {
        let SizeSpec::Auto(a) = p.size else {
            continue;
        };
        match p.fs {
            FsKind::Fat(_) => {}
            FsKind::Ext4 | FsKind::Ext2 | FsKind::Ext3
                if p.ext4.backend == Ext4Backend::Mke2fs =>
            {
                return Err(SpecError::new(
                    pkey(i, "size"),
                    format!("\"{a}\" is computed by the native {} planner, and mke2fs lays the filesystem out itself; use ext4.backend = \"native\" or give a size", p.fs),
                ))
            }
            FsKind::Ext4 | FsKind::Ext2 | FsKind::Ext3 | FsKind::Exfat => {}
            FsKind::Raw | FsKind::Squashfs | FsKind::Erofs | FsKind::Verity if !a.is_plain() => {
                return Err(SpecError::new(
                    pkey(i, "size"),
                    format!("\"{a}\": fs = \"{}\" takes exactly the size of what it holds and nothing can be added to it later, so headroom has no meaning; use \"auto\" (or leave size out), or give a size", p.fs),
                ))
            }
            FsKind::Raw | FsKind::Squashfs | FsKind::Erofs | FsKind::Verity => {}
            other => {
                return Err(SpecError::new(
                    pkey(i, "size"),
                    format!("\"{a}\" is computed for fat12/16/32, exfat and ext2/3/4 partitions (and is the default for raw, squashfs, erofs and verity ones); give fs = \"{other}\" a size like \"256MiB\""),
                ))
            }
        }
    }
    Ok(())
}

/// Plain `"auto"` on a partition sized from its contents anyway is an absent size.
pub(crate) fn normalise(spec: &mut Spec) {
    for p in &mut spec.partitions {
        if matches!(p.size, SizeSpec::Auto(a) if a.is_plain())
            && matches!(
                p.fs,
                FsKind::Raw | FsKind::Squashfs | FsKind::Erofs | FsKind::Verity
            )
        {
            p.size = SizeSpec::Source;
        }
    }
}

/// Counts of a tree for the explanation and the percentage: regular files (a hard-linked
/// file once), their bytes, and directories below the root.
struct Counted {
    files: u64,
    bytes: u64,
    dirs: u64,
}

fn count(tree: &Tree) -> Counted {
    let mut links = std::collections::BTreeSet::new();
    let mut c = Counted {
        files: 0,
        bytes: 0,
        dirs: 0,
    };
    for (id, n) in tree.nodes.iter().enumerate() {
        match &n.kind {
            NodeKind::Dir { .. } if id != 0 => c.dirs += 1,
            NodeKind::File { size, link, .. } => {
                if link.is_some_and(|l| !links.insert(l)) {
                    continue;
                }
                c.files += 1;
                c.bytes = c.bytes.saturating_add(*size);
            }
            _ => {}
        }
    }
    c
}

fn plural(n: u64, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

/// Resolves every `size = "auto…"` of a FAT, exFAT or ext4 partition in `layout` (the spec's
/// partitions in order; the sizes of read-only images already resolved) and returns, per
/// spec index, the sentence that explains it.
///
/// FAT and ext4 geometry depends on where the partition starts only modulo the erase block;
/// exFAT's also on the disk's size (the SD Association's boundary unit) and on the start
/// modulo that unit, so exFAT partitions are sized against the layout with every size known
/// so far, and again until no size changes (a later partition that grows moves the disk into
/// another row of the table).
pub(crate) fn resolve(
    spec: &Spec,
    trees: &[Option<Tree>],
    timestamp: i64,
    layout: &mut Layout,
) -> Result<Vec<(usize, String)>, Error> {
    let autos: Vec<(usize, AutoSize)> = spec
        .partitions
        .iter()
        .enumerate()
        .filter_map(|(i, p)| match p.size {
            SizeSpec::Auto(a)
                if matches!(
                    p.fs,
                    FsKind::Fat(_) | FsKind::Ext4 | FsKind::Ext2 | FsKind::Ext3 | FsKind::Exfat
                ) =>
            {
                Some((i, a))
            }
            _ => None,
        })
        .collect();
    if autos.is_empty() {
        return Ok(Vec::new());
    }
    let e = spec.image.erase_block.max(1);
    // FAT and ext4 geometry depends on where the partition starts only modulo the erase
    // block, so sizes not known yet stand in as one erase block each.
    let mut probe = layout.clone();
    for l in &mut probe.partitions {
        if matches!(l.size, SizeSpec::Source | SizeSpec::Auto(_)) {
            l.size = SizeSpec::Bytes(e);
        }
    }
    let placed: Plan = plan_layout(&probe).map_err(layout_error)?;
    let mut notes: Vec<(usize, String)> = Vec::with_capacity(autos.len());
    for round in 0..MAX_EXFAT_ROUNDS {
        let mut changed = false;
        for &(si, a) in &autos {
            let is_exfat = spec
                .partitions
                .get(si)
                .is_some_and(|p| p.fs == FsKind::Exfat);
            if round > 0 && !is_exfat {
                continue;
            }
            let Some((size, note)) =
                resolve_one(spec, trees, timestamp, &placed, &probe, si, a, e)?
            else {
                continue;
            };
            if let Some(l) = probe.partitions.get_mut(si) {
                if l.size != SizeSpec::Bytes(size) {
                    changed = true;
                }
                l.size = SizeSpec::Bytes(size);
            }
            if let Some(l) = layout.partitions.get_mut(si) {
                l.size = SizeSpec::Bytes(size);
            }
            match notes.iter_mut().find(|(i, _)| *i == si) {
                Some(n) => n.1 = note,
                None => notes.push((si, note)),
            }
        }
        if round > 0 && !changed {
            return Ok(notes);
        }
        if !autos.iter().any(|&(si, _)| {
            spec.partitions
                .get(si)
                .is_some_and(|p| p.fs == FsKind::Exfat)
        }) {
            return Ok(notes);
        }
    }
    Err(Error::Spec(SpecError::new(
        "partition",
        format!("size = \"auto\": the exFAT partitions' sizes did not settle in {MAX_EXFAT_ROUNDS} rounds (each moves the disk into another row of the SD Association's table); give one of them a size"),
    )))
}

/// Rounds of exFAT sizing against the growing layout before giving up.
const MAX_EXFAT_ROUNDS: u32 = 6;

/// One `size = "auto…"`: the size and the sentence explaining it (`None`: the partition is
/// not in the plan).
#[allow(clippy::too_many_arguments)]
fn resolve_one(
    spec: &Spec,
    trees: &[Option<Tree>],
    timestamp: i64,
    placed: &Plan,
    probe: &Layout,
    si: usize,
    a: AutoSize,
    e: u64,
) -> Result<Option<(u64, String)>, Error> {
    let empty = Tree::default();
    {
        let Some(pi) = placed.partitions.iter().position(|p| p.spec_index == si) else {
            return Ok(None);
        };
        let Some(ps) = spec.partitions.get(si) else {
            return Ok(None);
        };
        let tree = trees.get(si).and_then(Option::as_ref).unwrap_or(&empty);
        let counted = count(tree);
        let headroom = a.headroom(counted.bytes).ok_or_else(|| {
            Error::Spec(SpecError::new(
                pkey(si, "size"),
                format!("\"{a}\": the headroom overflows 64 bits"),
            ))
        })?;
        let asked = if headroom == 0 {
            String::new()
        } else if a.percent_hundredths == 0 {
            format!("; {} free asked", format_size(headroom))
        } else {
            format!(
                "; {} free asked ({} of {} of file data{})",
                format_size(headroom),
                AutoSize {
                    extra_bytes: 0,
                    ..a
                }
                .to_string()
                .trim_start_matches("auto+"),
                format_size(counted.bytes),
                if a.extra_bytes > 0 {
                    format!(" + {}", format_size(a.extra_bytes))
                } else {
                    String::new()
                }
            )
        };
        let (size, explained) = match ps.fs {
            FsKind::Fat(_) => {
                let req = fat_request(spec, placed, pi).ok_or_else(|| internal(si))?;
                let fit = blockwise_fat::smallest(&req, tree, headroom)
                    .map_err(|err| fat_failure(si, err))?;
                let f = &fit.plan;
                let fixed_root = if f.kind.name() == "fat32" {
                    String::new()
                } else {
                    format!(
                        " and the fixed root directory ({} of {} entries used)",
                        fit.needs.root_entries,
                        blockwise_fat::ROOT_ENTRIES
                    )
                };
                (
                    fit.size_bytes,
                    format!(
                        "{}, {} and the directories' {} entries of 32 bytes (long names included) take {} of {}; {} adds {} reserved sectors, {} FAT{} of {} sectors{fixed_root}; {} free ({} clusters){asked}",
                        plural(fit.needs.files, "file", "files"),
                        plural(fit.needs.directories, "directory", "directories"),
                        fit.needs.entries(),
                        plural(fit.used_clusters, "cluster", "clusters"),
                        format_size(u64::from(f.cluster_bytes)),
                        f.kind.name(),
                        f.reserved_sectors,
                        f.fat_count,
                        if f.fat_count == 1 { "" } else { "s" },
                        f.fat_sectors,
                        format_size(fit.free_clusters.saturating_mul(u64::from(f.cluster_bytes))),
                        fit.free_clusters,
                    ),
                )
            }
            FsKind::Exfat => {
                // Against the layout with every size known so far: the start (modulo the
                // boundary unit) and the disk's size pick the exFAT geometry.
                let mut probe = probe.clone();
                crate::rofs::resolve_verity_sizes(spec, &mut probe)?;
                let now = plan_layout(&probe).map_err(layout_error)?;
                let npi = now
                    .partitions
                    .iter()
                    .position(|p| p.spec_index == si)
                    .ok_or_else(|| internal(si))?;
                let req = exfat_request(spec, &now, npi).ok_or_else(|| internal(si))?;
                let disk_for = |size: u64| {
                    let mut l = probe.clone();
                    l.partitions.get_mut(si)?.size = SizeSpec::Bytes(size);
                    crate::rofs::resolve_verity_sizes(spec, &mut l).ok()?;
                    plan_layout(&l).ok().map(|p| p.size_bytes)
                };
                let fit = blockwise_exfat::smallest(&req, &disk_for, tree, headroom)
                    .map_err(|err| exfat_failure(si, err))?;
                let x = &fit.plan;
                (
                    fit.size_bytes,
                    format!(
                        "{}, {} and the directories' {} entries of 32 bytes (the root's bitmap and up-case entries included) take {} of {}; exfat adds the boot regions, a FAT of {} sectors before the cluster heap at a {} boundary, the allocation bitmap and up-case table ({}); {} free ({} clusters){asked}",
                        plural(fit.needs.files, "file", "files"),
                        plural(fit.needs.directories, "directory", "directories"),
                        fit.needs.entries(),
                        plural(fit.used_clusters, "cluster", "clusters"),
                        format_size(u64::from(x.cluster_bytes)),
                        x.fat_sectors,
                        format_size(x.boundary_bytes.unwrap_or(e)),
                        plural(fit.meta_clusters, "cluster", "clusters"),
                        format_size(fit.free_clusters.saturating_mul(u64::from(x.cluster_bytes))),
                        fit.free_clusters,
                    ),
                )
            }
            _ => {
                let req = ext4_request(spec, placed, pi, timestamp).ok_or_else(|| internal(si))?;
                let fit = blockwise_ext4::smallest(&req, tree, headroom)
                    .map_err(|err| ext4_failure(si, err))?;
                let x = &fit.plan;
                let extents = x.features.iter().any(|f| f == "extent");
                let journal = if fit.journal_blocks > 0 {
                    format!(", a journal of {} blocks", fit.journal_blocks)
                } else {
                    String::new()
                };
                (
                    fit.size_bytes,
                    format!(
                        "{} and {} take {} and {} of {} (file data, directories with their htree blocks, {} and xattr blocks, lost+found); {} adds {} of metadata (superblocks, descriptors, bitmaps, inode tables for {} inodes{journal}); {} free, {} of it available to files after the {} reserved for root{}{asked}",
                        plural(counted.files, "file", "files"),
                        plural(counted.dirs, "directory", "directories"),
                        plural(fit.used_inodes, "inode", "inodes"),
                        plural(fit.data_blocks, "block", "blocks"),
                        format_size(u64::from(x.block_bytes)),
                        if extents { "extent" } else { "indirect" },
                        ps.fs,
                        plural(fit.metadata_blocks, "block", "blocks"),
                        x.inodes,
                        plural(fit.free_blocks, "block", "blocks"),
                        format_size(fit.available_bytes),
                        plural(fit.reserved_blocks, "block", "blocks"),
                        if extents { " and the kernel's reserve" } else { "" },
                    ),
                )
            }
        };
        let below = if size > e {
            format!(" ({} does not)", format_size(size - e))
        } else {
            String::new()
        };
        Ok(Some((
            size,
            format!(
                "size = \"{a}\": {explained}. {} is the smallest multiple of the {} erase block that holds this{below}.",
                format_size(size),
                format_size(e)
            ),
        )))
    }
}

/// Puts each explanation first among its partitions' filesystem notes.
pub(crate) fn attach_notes(plan: &mut Plan, notes: Vec<(usize, String)>) {
    for (si, note) in notes {
        for p in plan.partitions.iter_mut().filter(|p| p.spec_index == si) {
            match &mut p.filesystem {
                Some(FsPlan::Fat(f)) => f.notes.insert(0, note.clone()),
                Some(FsPlan::Ext4(x)) => x.notes.insert(0, note.clone()),
                Some(FsPlan::Exfat(x)) => x.notes.insert(0, note.clone()),
                _ => plan.notes.push(note.clone()),
            }
        }
    }
}

fn internal(si: usize) -> Error {
    Error::Spec(SpecError::new(
        format!("partition[{}]", si + 1),
        "internal: the layout has no such partition",
    ))
}
