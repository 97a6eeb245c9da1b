//! The pure part of building: full plan (layout + filesystem geometry) and writing a plan
//! with its trees into any [`BlockSink`]. No OS I/O: builds for wasm32.

use blockwise_exfat::{ExfatOptions, ExfatRequest};
use blockwise_ext4::{Ext4Options, Ext4Request, ExtKind};
use blockwise_fat::{FatOptions, FatRequest};
use blockwise_geometry::fsplan::f2fs::{plan_f2fs, F2fsRequest};
use blockwise_geometry::{
    place_raw, plan as plan_layout, BlockSink, ContentRef, ContentSource, FsKind, FsPlan, Guid,
    OtherFs, PartType, PartitionPlan, PlaceError, Plan, RawPlan, SparseImage, SubSink, TableKind,
    Tree,
};

use crate::error::PartitionError;
use crate::spec::{exfat_error, ext4_error, fat_error, layout_error, Spec, SpecError};
use crate::Error;

/// The index every ID of partition `p` derives from (with `image.seed`): its spec index, and
/// for the second and later A/B slots the slot's position above bit 32, so each slot's
/// filesystem gets its own UUID while an unslotted partition keeps the IDs it always had.
#[must_use]
pub fn id_index(spec: &Spec, p: &PartitionPlan) -> u64 {
    let k = spec
        .partitions
        .get(p.spec_index)
        .map_or(0, |ps| ps.slot_position(p.slot.as_deref()));
    (p.spec_index as u64) | ((k as u64) << 32)
}

/// The UUID and label of the swap area of partition `p`.
fn swap_ids(spec: &Spec, p: &PartitionPlan) -> (Guid, Option<String>) {
    let ps = spec.partitions.get(p.spec_index);
    let uuid = ps
        .and_then(|ps| ps.fs_uuid)
        .unwrap_or_else(|| Guid::derive(spec.image.seed, "swap-uuid", id_index(spec, p)));
    (uuid, ps.and_then(|ps| ps.label_for(p.slot.as_deref())))
}

/// The F2FS request for the partition at `i` of `plan`.
#[must_use]
pub fn f2fs_request(spec: &Spec, plan: &Plan, i: usize) -> Option<F2fsRequest> {
    let p = plan.partitions.get(i)?;
    let ps = spec.partitions.get(p.spec_index)?;
    let uuid = ps
        .fs_uuid
        .unwrap_or_else(|| Guid::derive(spec.image.seed, "f2fs-uuid", id_index(spec, p)));
    Some(F2fsRequest {
        partition_start_bytes: p.start_bytes,
        partition_size_bytes: p.size_bytes,
        erase_block_bytes: plan.erase_block_bytes,
        options: ps.f2fs.clone(),
        label: ps.label_for(p.slot.as_deref()),
        uuid: uuid.to_string().to_lowercase(),
    })
}

/// The FAT request for the partition at `i` of `plan`.
#[must_use]
pub fn fat_request(spec: &Spec, plan: &Plan, i: usize) -> Option<FatRequest> {
    let p = plan.partitions.get(i)?;
    let ps = spec.partitions.get(p.spec_index)?;
    Some(FatRequest {
        partition_start_bytes: p.start_bytes,
        partition_size_bytes: p.size_bytes,
        device_sector: plan.sector_bytes,
        erase_block_bytes: plan.erase_block_bytes,
        fs: ps.fs,
        options: FatOptions {
            volume_id: ps.volume_id,
            ..ps.fat.clone()
        },
        label: ps.label_for(p.slot.as_deref()),
        seed: blockwise_geometry::derive_u64(spec.image.seed, "fat-volume", id_index(spec, p)),
    })
}

/// The ext4 request for the partition at `i` of `plan`.
#[must_use]
pub fn ext4_request(spec: &Spec, plan: &Plan, i: usize, timestamp: i64) -> Option<Ext4Request> {
    let p = plan.partitions.get(i)?;
    let ps = spec.partitions.get(p.spec_index)?;
    Some(Ext4Request {
        partition_start_bytes: p.start_bytes,
        partition_size_bytes: p.size_bytes,
        erase_block_bytes: plan.erase_block_bytes,
        options: Ext4Options {
            uuid: ps.fs_uuid.map(Guid::to_uuid_bytes),
            kind: match ps.fs {
                FsKind::Ext2 => ExtKind::Ext2,
                FsKind::Ext3 => ExtKind::Ext3,
                _ => ExtKind::Ext4,
            },
            ..ps.ext4.clone()
        },
        label: ps.label_for(p.slot.as_deref()),
        seed: blockwise_geometry::derive_u64(spec.image.seed, "ext4", id_index(spec, p)),
        timestamp,
    })
}

/// The exFAT request for the partition at `i` of `plan`.
#[must_use]
pub fn exfat_request(spec: &Spec, plan: &Plan, i: usize) -> Option<ExfatRequest> {
    let p = plan.partitions.get(i)?;
    let ps = spec.partitions.get(p.spec_index)?;
    Some(ExfatRequest {
        partition_start_bytes: p.start_bytes,
        partition_size_bytes: p.size_bytes,
        disk_bytes: plan.size_bytes,
        device_sector: plan.sector_bytes,
        erase_block_bytes: plan.erase_block_bytes,
        options: ExfatOptions {
            volume_serial: ps.volume_id,
            volume_guid: ps.fs_uuid.map(Guid::to_bytes),
            ..ps.exfat.clone()
        },
        label: ps.label.clone(),
        seed: blockwise_geometry::derive_u64(spec.image.seed, "exfat", p.spec_index as u64),
    })
}

/// An exFAT writer error for the partition at 0-based spec index `si`.
pub(crate) fn exfat_failure(si: usize, e: blockwise_exfat::Error) -> Error {
    match e {
        blockwise_exfat::Error::Invalid(i) => Error::Spec(exfat_error(si, i)),
        other => Error::partition(si + 1, PartitionError::Exfat(other)),
    }
}

/// A FAT writer error for the partition at 0-based spec index `si`: request errors become
/// spec errors with their key, the rest stay typed.
pub(crate) fn fat_failure(si: usize, e: blockwise_fat::Error) -> Error {
    match e {
        blockwise_fat::Error::Invalid(i) => Error::Spec(fat_error(si, i)),
        other => Error::partition(si + 1, PartitionError::Fat(other)),
    }
}

/// An ext4 writer error for the partition at 0-based spec index `si`.
pub(crate) fn ext4_failure(si: usize, e: blockwise_ext4::Error) -> Error {
    match e {
        blockwise_ext4::Error::Invalid(i) => Error::Spec(ext4_error(si, i)),
        other => Error::partition(si + 1, PartitionError::Ext4(other)),
    }
}

fn internal(si: usize) -> Error {
    Error::Spec(SpecError::new(
        format!("partition[{}]", si + 1),
        "internal: the plan has no such partition",
    ))
}

/// Plans layout and filesystems. `trees[i]` (spec order), when given, lets the ext4 planner
/// size its inode count to the contents. `timestamp` is the filesystem creation time.
pub fn plan_full(spec: &Spec, trees: &[Option<Tree>], timestamp: i64) -> Result<Plan, Error> {
    let mut layout = spec.layout();
    // Read-only images first (exFAT's `size = "auto"` depends on the disk's size), verity
    // trees last (one may cover a partition sized "auto").
    crate::rofs::resolve_image_sizes(spec, trees, timestamp, &mut layout)?;
    let auto_notes = crate::auto::resolve(spec, trees, timestamp, &mut layout)?;
    crate::rofs::resolve_verity_sizes(spec, &mut layout)?;
    let mut plan = plan_layout(&layout).map_err(layout_error)?;
    plan_raw(spec, &mut plan)?;
    for i in 0..plan.partitions.len() {
        let Some(p) = plan.partitions.get(i) else {
            continue;
        };
        let si = p.spec_index;
        let Some(ps) = spec.partitions.get(si) else {
            continue;
        };
        let fs = match ps.fs {
            FsKind::Fat(_) => {
                let req = fat_request(spec, &plan, i).ok_or_else(|| internal(si))?;
                let fp = blockwise_fat::plan(&req).map_err(|e| fat_failure(si, e))?;
                Some(FsPlan::Fat(fp))
            }
            FsKind::Ext4 | FsKind::Ext2 | FsKind::Ext3 => {
                let req = ext4_request(spec, &plan, i, timestamp).ok_or_else(|| internal(si))?;
                let tree = trees.get(si).and_then(Option::as_ref);
                let xp = blockwise_ext4::plan(&req, tree).map_err(|e| ext4_failure(si, e))?;
                Some(FsPlan::Ext4(xp))
            }
            FsKind::F2fs => {
                let req = f2fs_request(spec, &plan, i).ok_or_else(|| internal(si))?;
                let fp = plan_f2fs(&req).map_err(|(key, reason)| {
                    Error::Spec(SpecError::new(
                        format!("partition[{}].{key}", si + 1),
                        reason,
                    ))
                })?;
                Some(FsPlan::F2fs(fp))
            }
            FsKind::Exfat => {
                let req = exfat_request(spec, &plan, i).ok_or_else(|| internal(si))?;
                let xp = blockwise_exfat::plan(&req).map_err(|e| exfat_failure(si, e))?;
                Some(FsPlan::Exfat(xp))
            }
            FsKind::Raw => Some(FsPlan::Other(OtherFs::named("raw"))),
            FsKind::Swap => {
                // Checked here so that plan refuses what build would; the plan is what
                // verify reads from the header assemble writes.
                let (uuid, label) = swap_ids(spec, p);
                let fs = crate::swap::plan(p.size_bytes, uuid, label.as_deref()).map_err(|r| {
                    Error::Spec(SpecError::new(format!("partition[{}].size", si + 1), r))
                })?;
                Some(FsPlan::Other(fs))
            }
            FsKind::Squashfs | FsKind::Erofs | FsKind::Verity => {
                crate::rofs::fs_plan(spec, &plan, i, trees, timestamp)?
            }
            FsKind::None => None,
        };
        // With fs = "fat", the MBR type follows the FAT type the planner chose (also for a
        // bare filesystem, where it is nominal but what verify reports).
        let chosen_type = match (&fs, ps.type_.is_none(), spec.image.table) {
            (Some(FsPlan::Fat(f)), true, TableKind::Mbr | TableKind::None) => {
                Some(f.kind.mbr_type())
            }
            _ => None,
        };
        if let Some(p) = plan.partitions.get_mut(i) {
            // fs = "fat": the content is the type the planner chose (what verify reads).
            if let Some(FsPlan::Fat(f)) = &fs {
                p.content = FsKind::Fat(Some(f.kind));
            }
            p.filesystem = fs;
            if let Some(t) = chosen_type {
                p.type_ = PartType::Mbr(t);
            }
        }
    }
    // A bare FAT volume records no device sector but its own: a 4096-byte FAT is reported
    // (by this plan and by verify) as made for 4096-byte sectors.
    if spec.image.table == TableKind::None {
        let fat_sector = match plan.partitions.first().and_then(|p| p.filesystem.as_ref()) {
            Some(FsPlan::Fat(f)) => {
                blockwise_geometry::SectorSize::from_bytes(u64::from(f.sector_bytes))
            }
            _ => None,
        };
        if let Some(s) = fat_sector {
            plan.sector_bytes = s;
        }
    }
    plan.refresh_aligned();
    plan.refresh_slots();
    slot_notes(spec, &mut plan);
    crate::auto::attach_notes(&mut plan, auto_notes);
    Ok(plan)
}

/// Notes about A/B layouts: slots `verify` cannot pair again (on an MBR disk only a
/// filesystem label shows a partition's slot), and a systemd-sysupdate placeholder
/// (`name = "_empty"`) that holds a filesystem.
fn slot_notes(spec: &Spec, plan: &mut Plan) {
    for (i, ps) in spec.partitions.iter().enumerate() {
        if ps.name.as_deref() == Some("_empty") && ps.fs != FsKind::None {
            plan.notes.push(format!(
                "partition[{}].name: systemd-sysupdate treats a partition named \"_empty\" as free and overwrites it, but this one holds fs = \"{}\" (placeholders are fs = \"none\")",
                i + 1,
                ps.fs
            ));
        }
    }
    if plan.table.kind != TableKind::Mbr {
        return;
    }
    for (i, ps) in spec.partitions.iter().enumerate() {
        let labelled =
            (ps.fs.is_fat() || ps.fs.is_ext() || ps.fs == FsKind::F2fs) && ps.label.is_some();
        if !ps.slots.is_empty() && !labelled {
            plan.notes.push(format!(
                "partition[{}].slots: an MBR has no partition names and this partition has no filesystem label, so verify cannot tell its copies are slots (use table = \"gpt\", or a labelled filesystem)",
                i + 1
            ));
        }
    }
}

/// Places the spec's `[[raw]]` writes into `plan` (checked against the table, the
/// partitions and each other).
fn plan_raw(spec: &Spec, plan: &mut Plan) -> Result<(), Error> {
    let sb = plan.sector_bytes.bytes_u64();
    let mut raws = Vec::with_capacity(spec.raw.len());
    for (i, r) in spec.raw.iter().enumerate() {
        let k = |s: &str| format!("raw[{}].{s}", i + 1);
        let offset = r
            .offset_bytes(sb)
            .ok_or_else(|| Error::Spec(SpecError::new(k("offset"), "missing")))?;
        let size = match (r.size, r.source_len) {
            (Some(s), Some(len)) if len > s => {
                return Err(Error::Spec(SpecError::new(
                    k("size"),
                    format!("{s} bytes reserved, but the source has {len}; raise raw[{}].size or leave it out", i + 1),
                )))
            }
            (Some(s), _) => s,
            (None, Some(len)) => len,
            (None, None) => {
                return Err(Error::Spec(SpecError::new(
                    k("source"),
                    "the file's length is not known here; give raw.size, or plan with blockwise plan/build (which read the file)",
                )))
            }
        };
        raws.push(RawPlan {
            spec_index: i,
            offset_bytes: offset,
            size_bytes: size,
            source: r.source.clone(),
        });
    }
    place_raw(plan, raws).map_err(|(i, reason)| {
        let key = match spec.raw.get(i) {
            Some(r) if r.offset.is_none() => "offset-sectors",
            _ => "offset",
        };
        Error::Spec(SpecError::new(format!("raw[{}].{key}", i + 1), reason))
    })
}

/// The content of one `[[raw]]` write, for [`assemble_with_raw`]: `size` bytes of `content`
/// in the [`ContentSource`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RawFill {
    /// The content handle.
    pub content: u64,
    /// Its length in bytes.
    pub size: u64,
}

/// What a partition is filled from, for [`assemble`].
pub enum Fill<'a> {
    /// Nothing (fs = "none").
    Nothing,
    /// A tree (FAT or ext4 native backend).
    Tree(&'a Tree),
    /// Raw bytes: `size` bytes of `content` in the [`ContentSource`], copied verbatim.
    Raw {
        /// The content handle.
        content: u64,
        /// Its length in bytes.
        size: u64,
    },
    /// Bytes produced elsewhere (the mke2fs backend): written by the caller.
    External,
}

/// Writes the partition table and every partition of `plan` into `sink`, which must be at
/// least the plan's size. `fills[i]` is in spec order. Returns the writers' warnings.
/// A spec with `[[raw]]` writes needs [`assemble_with_raw`].
pub fn assemble<S: BlockSink + ?Sized>(
    sink: &mut S,
    spec: &Spec,
    plan: &Plan,
    fills: &[Fill<'_>],
    content: &dyn ContentSource,
    timestamp: i64,
) -> Result<Vec<String>, Error> {
    assemble_with_raw(sink, spec, plan, fills, &[], content, timestamp)
}

/// [`assemble`], plus the `[[raw]]` writes of `plan`: `raw[i]` is the content of the
/// spec's `raw[i]`.
pub fn assemble_with_raw<S: BlockSink + ?Sized>(
    sink: &mut S,
    spec: &Spec,
    plan: &Plan,
    fills: &[Fill<'_>],
    raw: &[RawFill],
    content: &dyn ContentSource,
    timestamp: i64,
) -> Result<Vec<String>, Error> {
    let mut warnings = Vec::new();
    blockwise_ptable::write_table(sink, plan).map_err(|e| Error::Table {
        source: Box::new(e),
    })?;
    // image.boot-code: its bytes over the zeros the table writer left in sector 0 (checked
    // when the layout was planned; a plan without a table has none).
    if plan.table.kind != blockwise_geometry::TableKind::None {
        if let Some(code) = spec
            .image
            .boot_code_bytes
            .as_deref()
            .and_then(|b| blockwise_geometry::boot_code_bytes(b).ok())
        {
            sink.write_at(0, code).map_err(|e| Error::Table {
                source: Box::new(e),
            })?;
        }
    }
    for (i, p) in plan.partitions.iter().enumerate() {
        let si = p.spec_index;
        let index = si + 1;
        let mut sub = SubSink::new(sink, p.start_bytes, p.size_bytes)
            .map_err(|e| Error::partition(index, PartitionError::Window(e)))?;
        let Some(fill) = fills.get(si) else {
            continue;
        };
        if spec
            .partitions
            .get(si)
            .is_some_and(|ps| ps.fs == FsKind::Swap)
        {
            let (uuid, label) = swap_ids(spec, p);
            let page = crate::swap::header(p.size_bytes, uuid, label.as_deref())
                .map_err(|r| Error::Spec(SpecError::new(format!("partition[{index}].size"), r)))?;
            sub.write_at(0, &page).map_err(|e| {
                Error::partition(
                    index,
                    PartitionError::Sink {
                        offset: 0,
                        source: Box::new(e),
                    },
                )
            })?;
            continue;
        }
        match (&p.filesystem, fill) {
            (Some(FsPlan::Fat(fp)), Fill::Tree(tree)) => {
                let req = fat_request(spec, plan, i).ok_or_else(|| internal(si))?;
                let report = blockwise_fat::write(&mut sub, &req, fp, tree, content, timestamp)
                    .map_err(|e| fat_failure(si, e))?;
                warnings.extend(
                    report
                        .warnings
                        .iter()
                        .map(|w| format!("partition[{index}]: {w}")),
                );
            }
            (Some(FsPlan::Ext4(xp)), Fill::Tree(tree)) => {
                let req = ext4_request(spec, plan, i, timestamp).ok_or_else(|| internal(si))?;
                blockwise_ext4::write(&mut sub, &req, xp, tree, content)
                    .map_err(|e| ext4_failure(si, e))?;
            }
            (Some(FsPlan::Erofs(_) | FsPlan::Squashfs(_)), Fill::Tree(tree)) => {
                warnings.extend(
                    crate::rofs::write_tree(&mut sub, spec, plan, i, tree, content, timestamp)?
                        .unwrap_or_default(),
                );
            }
            (Some(FsPlan::Exfat(xp)), Fill::Tree(tree)) => {
                let req = exfat_request(spec, plan, i).ok_or_else(|| internal(si))?;
                let report = blockwise_exfat::write(&mut sub, &req, xp, tree, content, timestamp)
                    .map_err(|e| exfat_failure(si, e))?;
                let owners = spec.partitions.get(si).is_some_and(|ps| {
                    ps.entries
                        .iter()
                        .any(|e| e.uid.is_some() || e.gid.is_some())
                });
                if owners {
                    warnings.push(format!("partition[{index}]: owners (uid/gid) of [[partition.entry]] ignored: exFAT stores no owners (modes only as the read-only attribute)"));
                }
                warnings.extend(
                    report
                        .warnings
                        .iter()
                        .map(|w| format!("partition[{index}]: {w}")),
                );
            }
            (_, &Fill::Raw { content: id, size }) => {
                if size > p.size_bytes {
                    return Err(Error::Spec(SpecError::new(
                        format!("partition[{index}].source"),
                        format!("the source is larger than the partition ({} bytes); raise partition[{index}].size", p.size_bytes),
                    )));
                }
                let r = ContentRef {
                    content: id,
                    offset: 0,
                    len: size,
                };
                sub.write_content(0, r, content).map_err(|e| match e {
                    PlaceError::Content(c) => Error::partition(index, PartitionError::Content(c)),
                    PlaceError::Sink(e) => Error::partition(
                        index,
                        PartitionError::Sink {
                            offset: 0,
                            source: Box::new(e),
                        },
                    ),
                })?;
            }
            (Some(FsPlan::F2fs(_)), Fill::External) => {}
            (Some(FsPlan::F2fs(_)), _) => {
                return Err(Error::Spec(SpecError::new(
                    format!("partition[{index}].fs"),
                    "fs = \"f2fs\" is built by mkfs.f2fs and sload.f2fs (f2fs-tools), which this front end cannot run; plan and verify it here, build it with the blockwise command or the Python package",
                )));
            }
            (_, Fill::Nothing | Fill::External | Fill::Tree(_)) => {}
        }
    }
    for r in &plan.raw {
        let index = r.spec_index + 1;
        let fill = raw.get(r.spec_index).ok_or_else(|| {
            Error::Spec(SpecError::new(
                format!("raw[{index}].source"),
                "no content given for this raw write (this front end does not read files)",
            ))
        })?;
        if fill.size > r.size_bytes {
            return Err(Error::Spec(SpecError::new(
                format!("raw[{index}].source"),
                format!(
                    "the source is {} bytes, more than the {} planned",
                    fill.size, r.size_bytes
                ),
            )));
        }
        let cref = ContentRef {
            content: fill.content,
            offset: 0,
            len: fill.size,
        };
        sink.write_content(r.offset_bytes, cref, content)
            .map_err(|e| match e {
                PlaceError::Content(c) => Error::Raw {
                    index,
                    source: PartitionError::Content(c),
                },
                PlaceError::Sink(e) => Error::Raw {
                    index,
                    source: PartitionError::Sink {
                        offset: 0,
                        source: Box::new(e),
                    },
                },
            })?;
    }
    Ok(warnings)
}

/// [`assemble`] into a new in-memory [`SparseImage`] of the plan's size, hash trees
/// included (their root hashes: [`assemble_sparse_verity`]).
pub fn assemble_sparse(
    spec: &Spec,
    plan: &Plan,
    fills: &[Fill<'_>],
    content: &dyn ContentSource,
    timestamp: i64,
) -> Result<(SparseImage, Vec<String>), Error> {
    let mut plan = plan.clone();
    assemble_sparse_verity(spec, &mut plan, fills, content, timestamp)
}

/// [`assemble_sparse`], recording the root hashes of the hash trees in `plan`.
pub fn assemble_sparse_verity(
    spec: &Spec,
    plan: &mut Plan,
    fills: &[Fill<'_>],
    content: &dyn ContentSource,
    timestamp: i64,
) -> Result<(SparseImage, Vec<String>), Error> {
    let mut img = SparseImage::new(plan.size_bytes);
    let warnings = assemble(&mut img, spec, plan, fills, content, timestamp)?;
    let regions = crate::rofs::verity_data_regions(plan);
    if !regions.is_empty() {
        let mapped = img.mapped_ranges();
        crate::rofs::fill_unmapped(&mut img, &mapped, &regions)?;
        let trees = crate::rofs::verity_trees(plan, &img)?;
        crate::rofs::write_verity(&mut img, plan, &trees)?;
    }
    Ok((img, warnings))
}
