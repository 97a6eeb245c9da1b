//! The read-only filesystems of a spec: squashfs and EROFS partitions (their requests, sizes
//! and plans), and dm-verity hash trees over other partitions (`fs = "verity"`, `of =
//! "NAME"`) or appended to the data partition (`verity = "appended"`).
//!
//! A partition of these kinds may leave `size` out: an EROFS image's size is computed from
//! the tree, a squashfs image's from its compressed length (the host fills
//! [`PartitionSpec::prebuilt`] after compressing), a hash tree's from the data it covers.
//! The root hash is known once the data is written: [`verity_trees`] reads the data back
//! through any [`BlockSource`] and [`write_verity`] writes the trees and puts the root hashes
//! into the plan.

use core::fmt;

use blockwise_erofs::{ErofsBackend, ErofsRequest};
use blockwise_geometry::de::from_str;
use blockwise_geometry::{
    derive_u64, round_up, BlockSink, BlockSource, ErofsPlan, FsKind, FsPlan, Guid, Layout, Plan,
    SizeSpec, SquashfsPlan, Tree, VerityPlan,
};
use blockwise_squashfs::{SquashfsBackend, SquashfsRequest};
use blockwise_verity::{hex, Params, TreeBuilder};
use serde::de::Deserializer;
use serde::Deserialize;

use crate::error::PartitionError;
use crate::spec::{PartitionSpec, Spec, SpecError};
use crate::Error;

/// A filesystem image made before planning: its length and, when known, its geometry (what
/// verify reads from it, for the tool backends).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Prebuilt {
    /// Bytes of the filesystem.
    pub len: u64,
    /// Its plan, as read back.
    pub fs: Option<FsPlan>,
}

/// `verity = "appended"`: the hash tree goes into the data partition itself, after the
/// filesystem, on the next erase-block boundary.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum VerityMode {
    /// After the filesystem, in the same partition.
    Appended,
}

impl fmt::Display for VerityMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("appended")
    }
}

impl<'de> Deserialize<'de> for VerityMode {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        from_str(d, "\"appended\"", |s| {
            match s {
            "appended" => Ok(VerityMode::Appended),
            _ => Err(format!(
                "{s:?}: must be \"appended\" (for a tree in a partition of its own, add a [[partition]] with fs = \"verity\" and of = \"NAME\")"
            )),
        }
        })
    }
}

/// Whether a partition of `fs` is filled from a directory tree (`contents`, entries) by a
/// writer of this crate: FAT, exFAT, ext4, EROFS and squashfs.
#[must_use]
pub fn takes_tree(fs: FsKind) -> bool {
    fs.is_fat()
        || matches!(
            fs,
            FsKind::Ext4
                | FsKind::Ext2
                | FsKind::Ext3
                | FsKind::Exfat
                | FsKind::Erofs
                | FsKind::Squashfs
        )
}

fn pkey(i: usize, k: &str) -> String {
    format!("partition[{}].{k}", i.saturating_add(1))
}

/// The name a partition is known by for `of`: `name`, else `label`.
fn known_name(p: &PartitionSpec) -> Option<&str> {
    p.name.as_deref().or(p.label.as_deref())
}

/// The spec index of the partition a verity partition `i` covers.
pub fn verity_target(spec: &Spec, i: usize) -> Result<usize, SpecError> {
    let p = spec
        .partitions
        .get(i)
        .ok_or_else(|| SpecError::new(pkey(i, "of"), "no such partition"))?;
    let of = p.of.as_deref().ok_or_else(|| {
        SpecError::new(
            pkey(i, "of"),
            "missing; fs = \"verity\" covers another partition: of = \"NAME\" (its name or label)",
        )
    })?;
    let hits: Vec<usize> = spec
        .partitions
        .iter()
        .enumerate()
        .filter(|(_, q)| known_name(q) == Some(of))
        .map(|(j, _)| j)
        .collect();
    let names: Vec<&str> = spec.partitions.iter().filter_map(known_name).collect();
    match hits.as_slice() {
        [j] if *j == i => Err(SpecError::new(pkey(i, "of"), "names this partition itself")),
        [j] => {
            let q = spec.partitions.get(*j);
            match q.map(|q| (q.fs, q.verity)) {
                Some((FsKind::Verity | FsKind::None, _)) => Err(SpecError::new(
                    pkey(i, "of"),
                    format!(
                        "{of:?} is fs = \"{}\", which holds no data to protect",
                        q.map_or(FsKind::None, |q| q.fs)
                    ),
                )),
                Some((_, Some(_))) => Err(SpecError::new(
                    pkey(i, "of"),
                    format!(
                        "{of:?} already carries its own appended hash tree (verity = \"appended\")"
                    ),
                )),
                _ => Ok(*j),
            }
        }
        [] => Err(SpecError::new(
            pkey(i, "of"),
            format!(
                "no partition is named {of:?} (partitions are known by name, else label: {})",
                if names.is_empty() {
                    "none has one".to_string()
                } else {
                    names.join(", ")
                }
            ),
        )),
        _ => Err(SpecError::new(
            pkey(i, "of"),
            format!(
                "{} partitions are named {of:?}; give them different names",
                hits.len()
            ),
        )),
    }
}

/// A hash partition `i` over partition `j` has `j`'s slots: one tree per copy, each over the
/// copy of its own slot (`system_a-verity` over `system_a`).
fn same_slots(spec: &Spec, i: usize, j: usize) -> Result<(), SpecError> {
    let (Some(p), Some(q)) = (spec.partitions.get(i), spec.partitions.get(j)) else {
        return Ok(());
    };
    if p.slots == q.slots {
        return Ok(());
    }
    let of = p.of.as_deref().unwrap_or("");
    let list = |s: &[String]| {
        s.iter()
            .map(|x| format!("{x:?}"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    Err(SpecError::new(
        pkey(i, "slots"),
        if q.slots.is_empty() {
            format!("{of:?} has no slots, so one hash tree covers it; leave slots out here")
        } else {
            format!(
                "{of:?} has slots = [{}]: give this verity partition the same slots = [{}] (one hash tree per slot, each over the copy of its own slot){}",
                list(&q.slots),
                list(&q.slots),
                if p.slots.is_empty() {
                    String::new()
                } else {
                    format!(", not [{}]", list(&p.slots))
                }
            )
        },
    ))
}

/// The checks of the read-only kinds that need the whole spec: `of` and `verity`.
pub(crate) fn validate(spec: &Spec) -> Result<(), SpecError> {
    for (i, p) in spec.partitions.iter().enumerate() {
        if p.fs == FsKind::Verity {
            let j = verity_target(spec, i)?;
            same_slots(spec, i, j)?;
        } else if p.of.is_some() {
            return Err(SpecError::new(
                pkey(i, "of"),
                format!(
                    "only fs = \"verity\" covers another partition (this one is {})",
                    p.fs
                ),
            ));
        }
        if p.verity.is_some() && !matches!(p.fs, FsKind::Erofs | FsKind::Squashfs) {
            return Err(SpecError::new(
                pkey(i, "verity"),
                format!("an appended hash tree follows a read-only filesystem: fs = \"erofs\" or \"squashfs\" (this one is {}); or add a [[partition]] with fs = \"verity\" and of = \"NAME\"", p.fs),
            ));
        }
        match p.fs {
            FsKind::Erofs => {
                p.erofs.validate().map_err(|e| erofs_invalid(i, e))?;
                if let Some(l) = &p.label {
                    blockwise_erofs::validate_label(l).map_err(|e| erofs_invalid(i, e))?;
                }
                if !p.slots.is_empty() && p.erofs.backend == ErofsBackend::MkfsErofs {
                    return Err(SpecError::new(
                        pkey(i, "slots"),
                        "the mkfs.erofs backend makes one image before planning, but each slot needs its own UUID and label; use erofs.backend = \"native\" (uncompressed), or leave slots out",
                    ));
                }
                if !p.entries.is_empty() && p.erofs.backend == ErofsBackend::MkfsErofs {
                    return Err(SpecError::new(
                        pkey(i, "entry"),
                        "mkfs.erofs reads the contents directory itself and cannot apply [[partition.entry]]; use erofs.backend = \"native\"",
                    ));
                }
            }
            FsKind::Squashfs => {
                p.squashfs.validate().map_err(|e| squashfs_invalid(i, e))?;
                if !p.entries.is_empty() && p.squashfs.backend == SquashfsBackend::Mksquashfs {
                    return Err(SpecError::new(
                        pkey(i, "entry"),
                        "mksquashfs reads the contents directory itself and cannot apply [[partition.entry]]; use squashfs.backend = \"native\"",
                    ));
                }
            }
            _ => {}
        }
    }
    Ok(())
}

/// An EROFS option error as a spec error.
#[must_use]
pub fn erofs_invalid(i: usize, e: blockwise_erofs::Invalid) -> SpecError {
    let key = if e.is_partition_key() {
        pkey(i, e.key)
    } else {
        pkey(i, &format!("erofs.{}", e.key))
    };
    SpecError::new(key, e.reason)
}

/// A squashfs option error as a spec error.
#[must_use]
pub fn squashfs_invalid(i: usize, e: blockwise_squashfs::Invalid) -> SpecError {
    let key = if e.is_partition_key() {
        pkey(i, e.key)
    } else {
        pkey(i, &format!("squashfs.{}", e.key))
    };
    SpecError::new(key, e.reason)
}

/// The index the IDs of spec partition `si`'s copy for `slot` derive from: the spec index,
/// and for the second and later A/B slots the slot's position above bit 32
/// ([`crate::id_index`]'s rule), so each slot gets its own UUID.
fn slot_id(spec: &Spec, si: usize, slot: Option<&str>) -> u64 {
    let k = spec
        .partitions
        .get(si)
        .map_or(0, |ps| ps.slot_position(slot));
    (si as u64) | ((k as u64) << 32)
}

/// The EROFS request for spec partition `si` (its copy for `slot`) placed at `start`/`size`.
#[must_use]
pub fn erofs_request(
    spec: &Spec,
    si: usize,
    slot: Option<&str>,
    start: u64,
    size: u64,
    timestamp: i64,
) -> Option<ErofsRequest> {
    let ps = spec.partitions.get(si)?;
    let mut options = ps.erofs.clone();
    options.uuid = ps.fs_uuid.map(Guid::to_uuid_bytes);
    Some(ErofsRequest {
        partition_start_bytes: start,
        partition_size_bytes: size,
        erase_block_bytes: spec.image.erase_block,
        options,
        label: ps.label_for(slot),
        seed: derive_u64(spec.image.seed, "erofs", slot_id(spec, si, slot)),
        timestamp,
    })
}

/// The squashfs request for spec partition `si`.
#[must_use]
pub fn squashfs_request(
    spec: &Spec,
    si: usize,
    size: u64,
    timestamp: i64,
) -> Option<SquashfsRequest> {
    let ps = spec.partitions.get(si)?;
    Some(SquashfsRequest {
        partition_size_bytes: size,
        options: ps.squashfs.clone(),
        timestamp,
    })
}

fn erofs_failure(si: usize, e: blockwise_erofs::Error) -> Error {
    match e {
        blockwise_erofs::Error::Invalid(inv) => Error::Spec(erofs_invalid(si, inv)),
        blockwise_erofs::Error::NoSpace { .. } => {
            Error::Spec(SpecError::new(pkey(si, "size"), e.to_string()))
        }
        other => Error::partition(si + 1, PartitionError::Erofs(other)),
    }
}

/// The squashfs writer's error for spec partition `si`.
pub fn squashfs_failure(si: usize, e: blockwise_squashfs::Error) -> Error {
    match e {
        blockwise_squashfs::Error::Invalid(inv) => Error::Spec(squashfs_invalid(si, inv)),
        blockwise_squashfs::Error::NoSpace { .. } => {
            Error::Spec(SpecError::new(pkey(si, "size"), e.to_string()))
        }
        other => Error::partition(si + 1, PartitionError::Squashfs(other)),
    }
}

/// The bytes of the filesystem image of partition `si` (whole 4 KiB blocks), when known
/// before the layout: EROFS from the tree, squashfs and the tool backends from
/// [`PartitionSpec::prebuilt`].
fn image_bytes(
    spec: &Spec,
    si: usize,
    trees: &[Option<Tree>],
    timestamp: i64,
) -> Result<Option<u64>, Error> {
    let Some(ps) = spec.partitions.get(si) else {
        return Ok(None);
    };
    if let Some(pb) = &ps.prebuilt {
        return Ok(Some(pb.len.next_multiple_of(4096)));
    }
    match ps.fs {
        FsKind::Erofs if ps.erofs.backend == ErofsBackend::Native => {
            let empty = Tree::default();
            let tree = trees.get(si).and_then(Option::as_ref).unwrap_or(&empty);
            let req = erofs_request(spec, si, None, 0, u64::MAX, timestamp)
                .ok_or_else(|| internal(si))?;
            blockwise_erofs::image_bytes(&req, tree)
                .map(Some)
                .map_err(|e| erofs_failure(si, e))
        }
        _ => Ok(None),
    }
}

fn internal(si: usize) -> Error {
    Error::Spec(SpecError::new(
        format!("partition[{}]", si + 1),
        "internal: the plan has no such partition",
    ))
}

/// Hash-area bytes (superblock and tree) for `data_bytes` of data.
#[must_use]
pub fn hash_bytes(data_bytes: u64) -> u64 {
    Params::new(data_bytes / 4096, Vec::new(), [0; 16]).hash_area_bytes()
}

/// Where an appended tree starts inside its partition: after the filesystem, on the next
/// erase block.
fn appended_data_bytes(fs_bytes: u64, e: u64) -> Option<u64> {
    round_up(fs_bytes.max(1), e)
}

/// Fills in the sizes the spec left out of EROFS and squashfs partitions in `layout`, whose
/// partitions are the spec's in order (compressing or running mkfs.erofs to learn them).
pub(crate) fn resolve_image_sizes(
    spec: &Spec,
    trees: &[Option<Tree>],
    timestamp: i64,
    layout: &mut Layout,
) -> Result<(), Error> {
    let e = spec.image.erase_block.max(1);
    let overflow = |i: usize| {
        Error::Spec(SpecError::new(
            pkey(i, "size"),
            "size arithmetic overflows 64 bits",
        ))
    };
    for (i, ps) in spec.partitions.iter().enumerate() {
        if ps.size != SizeSpec::Source || !matches!(ps.fs, FsKind::Erofs | FsKind::Squashfs) {
            continue;
        }
        let Some(fs) = image_bytes(spec, i, trees, timestamp)? else {
            return Err(Error::Spec(SpecError::new(
                pkey(i, "size"),
                format!(
                    "missing, and the {} image's size is known only after {}: give a size, or plan and build with blockwise plan/build (which compress first)",
                    ps.fs,
                    if ps.fs == FsKind::Squashfs { "compressing" } else { "mkfs.erofs has run" }
                ),
            )));
        };
        let need = if ps.verity.is_some() {
            let data = appended_data_bytes(fs, e).ok_or_else(|| overflow(i))?;
            data.checked_add(hash_bytes(data))
                .ok_or_else(|| overflow(i))?
        } else {
            fs
        };
        if let Some(l) = layout.partitions.get_mut(i) {
            l.size = SizeSpec::Bytes(need);
        }
    }
    Ok(())
}

/// Fills in the sizes the spec left out of verity partitions in `layout` (the hash tree of
/// the partition each covers, whose size must be known by then). Cheap: sizes only.
pub(crate) fn resolve_verity_sizes(spec: &Spec, layout: &mut Layout) -> Result<(), Error> {
    let e = spec.image.erase_block.max(1);
    let overflow = |i: usize| {
        Error::Spec(SpecError::new(
            pkey(i, "size"),
            "size arithmetic overflows 64 bits",
        ))
    };
    for (i, ps) in spec.partitions.iter().enumerate() {
        if ps.fs != FsKind::Verity || ps.size != SizeSpec::Source {
            continue;
        }
        let j = verity_target(spec, i)?;
        let data = match layout.partitions.get(j).map(|l| l.size) {
            Some(SizeSpec::Bytes(b)) => round_up(b, e).ok_or_else(|| overflow(j))?,
            _ => {
                return Err(Error::Spec(SpecError::new(
                    pkey(i, "size"),
                    format!("missing, and the partition it covers ({:?}) has no size of its own yet (\"fill\"): give the verity partition a size", ps.of.as_deref().unwrap_or("")),
                )))
            }
        };
        if let Some(l) = layout.partitions.get_mut(i) {
            l.size = SizeSpec::Bytes(hash_bytes(data));
        }
    }
    Ok(())
}

/// 32 bytes of salt derived from the seed.
fn salt(seed: u64, si: usize) -> Vec<u8> {
    (0..4u64)
        .flat_map(|k| derive_u64(seed, "verity-salt", (si as u64) * 4 + k).to_be_bytes())
        .collect()
}

/// The hash area's description, without the root hash.
///
/// Every A/B slot gets its own superblock UUID; the salt is the spec partition's, so slots
/// holding the same bytes have the same root hash.
fn verity_plan(
    spec: &Spec,
    (si, slot): (usize, Option<&str>),
    of: Option<u32>,
    data: (u64, u64),
    hash_start: u64,
) -> VerityPlan {
    let (data_start, data_blocks) = data;
    let uuid = spec
        .partitions
        .get(si)
        .and_then(|p| p.fs_uuid)
        .unwrap_or_else(|| Guid::derive(spec.image.seed, "verity-uuid", slot_id(spec, si, slot)))
        .to_uuid_bytes();
    let mut v = VerityPlan {
        kind: "verity".into(),
        of,
        data_start_bytes: Some(data_start),
        hash_algorithm: "sha256".into(),
        data_block_bytes: 4096,
        hash_block_bytes: 4096,
        data_blocks,
        hash_start_bytes: hash_start,
        hash_bytes: hash_bytes(data_blocks.saturating_mul(4096)),
        salt: hex(&salt(spec.image.seed, si)),
        uuid: Some(blockwise_erofs::uuid_string(&uuid)),
        root_hash: None,
        aligned: true,
    };
    v.aligned = v.alignment_holds();
    v
}

/// The appended tree of the partition at plan index `i` whose filesystem takes `fs_bytes`.
fn appended(spec: &Spec, plan: &Plan, i: usize, fs_bytes: u64) -> Result<VerityPlan, Error> {
    let p = plan.partitions.get(i).ok_or_else(|| internal(i))?;
    let si = p.spec_index;
    let e = plan.erase_block_bytes;
    let data = appended_data_bytes(fs_bytes, e).ok_or_else(|| internal(si))?;
    let v = verity_plan(
        spec,
        (si, p.slot.as_deref()),
        None,
        (p.start_bytes, data / 4096),
        p.start_bytes.saturating_add(data),
    );
    let need = data.saturating_add(v.hash_bytes);
    if need > p.size_bytes {
        return Err(Error::Spec(SpecError::new(
            pkey(si, "size"),
            format!(
                "the filesystem ({fs_bytes} bytes, {data} with the erase-block padding) and its appended hash tree ({} bytes) need {need} bytes, more than the partition's {}; grow it or leave its size out",
                v.hash_bytes, p.size_bytes
            ),
        )));
    }
    Ok(v)
}

/// The filesystem plan of a read-only kind at plan index `i`.
pub(crate) fn fs_plan(
    spec: &Spec,
    plan: &Plan,
    i: usize,
    trees: &[Option<Tree>],
    timestamp: i64,
) -> Result<Option<FsPlan>, Error> {
    let p = plan.partitions.get(i).ok_or_else(|| internal(i))?;
    let si = p.spec_index;
    let ps = spec.partitions.get(si).ok_or_else(|| internal(si))?;
    Ok(Some(match ps.fs {
        FsKind::Erofs => {
            let req = erofs_request(
                spec,
                si,
                p.slot.as_deref(),
                p.start_bytes,
                p.size_bytes,
                timestamp,
            )
            .ok_or_else(|| internal(si))?;
            let mut ep: ErofsPlan = match ps.erofs.backend {
                ErofsBackend::Native => {
                    let empty = Tree::default();
                    let tree = trees.get(si).and_then(Option::as_ref).unwrap_or(&empty);
                    blockwise_erofs::plan(&req, tree).map_err(|e| erofs_failure(si, e))?
                }
                ErofsBackend::MkfsErofs => {
                    match ps.prebuilt.as_ref().and_then(|pb| pb.fs.clone()) {
                        Some(FsPlan::Erofs(found)) => ErofsPlan {
                            aligned: found.alignment_holds(plan.erase_block_bytes),
                            ..found
                        },
                        _ => blockwise_erofs::plan_of(&req, None, None),
                    }
                }
            };
            if ps.verity.is_some() {
                let fs = ep
                    .blocks
                    .map(|b| b * 4096)
                    .ok_or_else(|| needs_len(si, "mkfs.erofs has run"))?;
                ep.verity = Some(appended(spec, plan, i, fs)?);
                ep.aligned = ep.alignment_holds(plan.erase_block_bytes);
            }
            FsPlan::Erofs(ep)
        }
        FsKind::Squashfs => {
            let inodes = trees
                .get(si)
                .and_then(Option::as_ref)
                .map(blockwise_squashfs::count_inodes);
            let len = ps.prebuilt.as_ref().map(|pb| pb.len);
            let mut sp: SquashfsPlan = match ps.prebuilt.as_ref().and_then(|pb| pb.fs.clone()) {
                Some(FsPlan::Squashfs(found)) => found,
                _ => blockwise_squashfs::plan_of(&ps.squashfs, len, inodes),
            };
            if let Some(len) = len {
                if len > p.size_bytes {
                    return Err(Error::Spec(SpecError::new(
                        pkey(si, "size"),
                        format!("the squashfs image is {len} bytes, more than the partition's {}; grow it or leave its size out", p.size_bytes),
                    )));
                }
            }
            if ps.verity.is_some() {
                let fs = len
                    .map(|l| l.next_multiple_of(4096))
                    .ok_or_else(|| needs_len(si, "compressing"))?;
                sp.verity = Some(appended(spec, plan, i, fs)?);
                sp.aligned = sp.alignment_holds();
            }
            FsPlan::Squashfs(sp)
        }
        FsKind::Verity => {
            let j = verity_target(spec, si)?;
            // A slotted tree covers the copy of its own slot (validated: same slots).
            let d = plan
                .slot_copy(j, p.slot.as_deref())
                .ok_or_else(|| internal(j))?;
            let v = verity_plan(
                spec,
                (si, p.slot.as_deref()),
                Some(d.index),
                (d.start_bytes, d.size_bytes / 4096),
                p.start_bytes,
            );
            if v.hash_bytes > p.size_bytes {
                return Err(Error::Spec(SpecError::new(
                    pkey(si, "size"),
                    format!("the hash tree of {:?} ({} bytes of data) takes {} bytes, more than this partition's {}; leave the size out (it is then the tree's)", ps.of.as_deref().unwrap_or(""), d.size_bytes, v.hash_bytes, p.size_bytes),
                )));
            }
            FsPlan::Verity(v)
        }
        _ => return Ok(None),
    }))
}

fn needs_len(si: usize, after: &str) -> Error {
    Error::Spec(SpecError::new(
        pkey(si, "verity"),
        format!("an appended hash tree goes after the filesystem, whose size is known only after {after}: plan and build with blockwise plan/build"),
    ))
}

/// The warning for extended attributes squashfs cannot store, or none.
#[must_use]
pub fn dropped_xattrs_warning(index: usize, names: &[String]) -> Option<String> {
    (!names.is_empty()).then(|| {
        format!(
            "partition[{index}]: squashfs stores only user., trusted. and security. attributes; left out: {}",
            names.join(", ")
        )
    })
}

/// Writes an EROFS or squashfs partition from its tree into `sub` (the partition window),
/// returning its warnings; `Ok(None)` when the partition is not one of these.
pub(crate) fn write_tree<S: BlockSink + ?Sized>(
    sub: &mut S,
    spec: &Spec,
    plan: &Plan,
    i: usize,
    tree: &Tree,
    content: &dyn blockwise_geometry::ContentSource,
    timestamp: i64,
) -> Result<Option<Vec<String>>, Error> {
    let p = plan.partitions.get(i).ok_or_else(|| internal(i))?;
    let si = p.spec_index;
    match &p.filesystem {
        Some(FsPlan::Erofs(ep)) => {
            let req = erofs_request(
                spec,
                si,
                p.slot.as_deref(),
                p.start_bytes,
                p.size_bytes,
                timestamp,
            )
            .ok_or_else(|| internal(si))?;
            blockwise_erofs::write(sub, &req, ep, tree, content)
                .map_err(|e| erofs_failure(si, e))?;
            Ok(Some(Vec::new()))
        }
        Some(FsPlan::Squashfs(sp)) => {
            let room = sp.verity.as_ref().map_or(p.size_bytes, |v| {
                v.hash_start_bytes.saturating_sub(p.start_bytes)
            });
            let req = squashfs_request(spec, si, room, timestamp).ok_or_else(|| internal(si))?;
            let w = blockwise_squashfs::write(sub, &req, tree, content)
                .map_err(|e| squashfs_failure(si, e))?;
            if sp.bytes_used.is_some_and(|b| b != w.bytes_used) {
                return Err(Error::partition(
                    si + 1,
                    PartitionError::Squashfs(blockwise_squashfs::Error::Tree(format!(
                        "the image came out at {} bytes, {} were planned",
                        w.bytes_used,
                        sp.bytes_used.unwrap_or(0)
                    ))),
                ));
            }
            Ok(Some(
                dropped_xattrs_warning(si + 1, &w.dropped_xattrs)
                    .into_iter()
                    .collect(),
            ))
        }
        _ => Ok(None),
    }
}

/// One computed hash area.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VerityTree {
    /// Index in `plan.partitions` of the partition that holds the tree.
    pub partition: usize,
    /// Absolute offset of the hash area.
    pub offset: u64,
    /// Superblock and tree.
    pub bytes: Vec<u8>,
    /// Root hash.
    pub root: [u8; 32],
}

/// `(plan index, data start, VerityPlan)` for every hash area of the plan.
fn verity_areas(plan: &Plan) -> Vec<(usize, u64, &VerityPlan)> {
    let mut out = Vec::new();
    for (k, p) in plan.partitions.iter().enumerate() {
        let v = match &p.filesystem {
            Some(FsPlan::Verity(v))
            | Some(FsPlan::Erofs(ErofsPlan {
                verity: Some(v), ..
            }))
            | Some(FsPlan::Squashfs(SquashfsPlan {
                verity: Some(v), ..
            })) => v,
            _ => continue,
        };
        if let Some(start) = v.data_start_bytes {
            out.push((k, start, v));
        }
    }
    out
}

/// The byte ranges `[start, end)` that hash trees cover. Every byte there must reach the
/// medium (a hole keeps whatever a used card held, and the root hash would not match), so
/// writers map them whole ([`fill_unmapped`]).
#[must_use]
pub fn verity_data_regions(plan: &Plan) -> Vec<(u64, u64)> {
    verity_areas(plan)
        .into_iter()
        .map(|(_, s, v)| (s, s.saturating_add(v.data_blocks.saturating_mul(4096))))
        .collect()
}

static ZEROS: [u8; 65536] = [0; 65536];

/// Writes zeros into the parts of `regions` not in `mapped` (sorted, merged ranges: what
/// `ImageMap::mapped_ranges` and `SparseImage::mapped_ranges` give). Those sinks record zero
/// writes as ranges, not bytes.
pub fn fill_unmapped<S: BlockSink + ?Sized>(
    sink: &mut S,
    mapped: &[(u64, u64)],
    regions: &[(u64, u64)],
) -> Result<(), Error> {
    for &(rs, re) in regions {
        let mut pos = rs;
        let mut gaps = Vec::new();
        for &(ms, me) in mapped.iter().filter(|(ms, me)| *me > rs && *ms < re) {
            if ms > pos {
                gaps.push((pos, ms));
            }
            pos = pos.max(me);
        }
        if pos < re {
            gaps.push((pos, re));
        }
        for (mut s, e) in gaps {
            while s < e {
                let n = (e - s).min(ZEROS.len() as u64);
                sink.write_at(s, ZEROS.get(..n as usize).unwrap_or_default())
                    .map_err(|err| Error::Table {
                        source: Box::new(err),
                    })?;
                s += n;
            }
        }
    }
    Ok(())
}

fn unhex(s: &str) -> Vec<u8> {
    (0..s.len() / 2)
        .filter_map(|i| {
            s.get(2 * i..2 * i + 2)
                .and_then(|b| u8::from_str_radix(b, 16).ok())
        })
        .collect()
}

fn uuid_bytes(s: Option<&str>) -> [u8; 16] {
    let b = unhex(&s.unwrap_or("").replace('-', ""));
    let mut u = [0u8; 16];
    for (d, s) in u.iter_mut().zip(b) {
        *d = s;
    }
    u
}

/// Computes every hash tree of `plan` from the image as written so far (read through
/// `image`, 1 MiB at a time: the cost is one read of each covered partition and sha256 over
/// its non-zero blocks).
pub fn verity_trees<R: BlockSource + ?Sized>(
    plan: &Plan,
    image: &R,
) -> Result<Vec<VerityTree>, Error> {
    let mut out = Vec::new();
    for (k, start, v) in verity_areas(plan) {
        let index = plan.partitions.get(k).map_or(0, |p| p.spec_index + 1);
        let params = Params::new(v.data_blocks, unhex(&v.salt), uuid_bytes(v.uuid.as_deref()));
        let mut b = TreeBuilder::new(&params);
        let total = v.data_blocks.saturating_mul(4096);
        let mut buf = vec![0u8; 1 << 20];
        let mut done = 0u64;
        while done < total {
            let n = (total - done).min(buf.len() as u64) as usize;
            let chunk = buf.get_mut(..n).unwrap_or_default();
            image.read_at(start + done, chunk).map_err(|e| {
                Error::partition(
                    index,
                    PartitionError::Verity(format!(
                        "reading the data at byte {}: {e}",
                        start + done
                    )),
                )
            })?;
            for block in chunk.chunks(4096) {
                b.push_block(block)
                    .map_err(|e| Error::partition(index, PartitionError::Verity(e.to_string())))?;
            }
            done += n as u64;
        }
        let tree = b
            .finish()
            .map_err(|e| Error::partition(index, PartitionError::Verity(e.to_string())))?;
        out.push(VerityTree {
            partition: k,
            offset: v.hash_start_bytes,
            bytes: tree.bytes,
            root: tree.root,
        });
    }
    Ok(out)
}

/// Writes the trees and records their root hashes in `plan`.
pub fn write_verity<S: BlockSink + ?Sized>(
    sink: &mut S,
    plan: &mut Plan,
    trees: &[VerityTree],
) -> Result<(), Error> {
    for t in trees {
        let index = plan
            .partitions
            .get(t.partition)
            .map_or(0, |p| p.spec_index + 1);
        sink.write_at(t.offset, &t.bytes).map_err(|e| {
            Error::partition(
                index,
                PartitionError::Sink {
                    offset: t.offset,
                    source: Box::new(e),
                },
            )
        })?;
        let root = Some(hex(&t.root));
        match plan
            .partitions
            .get_mut(t.partition)
            .and_then(|p| p.filesystem.as_mut())
        {
            Some(FsPlan::Verity(v))
            | Some(FsPlan::Erofs(ErofsPlan {
                verity: Some(v), ..
            }))
            | Some(FsPlan::Squashfs(SquashfsPlan {
                verity: Some(v), ..
            })) => v.root_hash = root,
            _ => {}
        }
    }
    Ok(())
}

/// Every root hash of a plan: `(partition name or number, root hash)`, for `OUT.roothash`.
#[must_use]
pub fn root_hashes(plan: &Plan, spec: &Spec) -> Vec<(String, String)> {
    verity_areas(plan)
        .into_iter()
        .filter_map(|(k, _, v)| {
            let p = plan.partitions.get(k)?;
            let ps = spec.partitions.get(p.spec_index)?;
            // Name the data: the partition `of` names, or the partition itself.
            let name = match &ps.of {
                Some(of) => of.clone(),
                None => known_name(ps)
                    .map_or_else(|| format!("partition{}", p.spec_index + 1), str::to_string),
            };
            let name = blockwise_geometry::slots::with_suffix(&name, p.slot.as_deref());
            Some((name, v.root_hash.clone()?))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use blockwise_geometry::{FsPlan, Meta, Tree};

    use crate::{assemble_sparse_verity, plan_full, Fill, Spec};

    /// Slotted EROFS with an appended tree and with a hash partition of its own: every copy
    /// gets its slot's label and UUIDs, each tree covers its own slot's data, and the built
    /// trees differ (different UUIDs in the data); every byte a tree covers is mapped.
    #[test]
    fn slots_get_their_own_ids_and_trees() {
        let spec = Spec::from_toml(
            "[image]\ntable=\"gpt\"\nerase-block=\"1MiB\"\ntimestamp=1\n\
             [[partition]]\nname=\"sys\"\nfs=\"erofs\"\nlabel=\"sys\"\nsize=\"4MiB\"\nslots=[\"a\",\"b\"]\n\
             [[partition]]\nname=\"sys-verity\"\nfs=\"verity\"\nof=\"sys\"\nslots=[\"a\",\"b\"]\n\
             [[partition]]\nname=\"app\"\nfs=\"erofs\"\nverity=\"appended\"\nslots=[\"a\",\"b\"]\n",
        )
        .unwrap();
        let trees = vec![
            Some(Tree::new(Meta::default())),
            None,
            Some(Tree::new(Meta::default())),
        ];
        let mut plan = plan_full(&spec, &trees, 1).unwrap();
        assert_eq!(plan.partitions.len(), 6);
        let fs = |i: usize| plan.partitions[i].filesystem.clone().unwrap();
        let (FsPlan::Erofs(a), FsPlan::Erofs(b)) = (fs(0), fs(1)) else {
            panic!("{plan:#?}")
        };
        assert_eq!(a.label.as_deref(), Some("sys_a"));
        assert_eq!(b.label.as_deref(), Some("sys_b"));
        assert_ne!(a.uuid, b.uuid);
        // sys-verity_a covers sys_a (index 1), sys-verity_b covers sys_b (index 2).
        for (k, of) in [(2usize, 1u32), (3, 2)] {
            let FsPlan::Verity(v) = fs(k) else { panic!() };
            assert_eq!(v.of, Some(of));
            assert_eq!(
                v.data_start_bytes,
                Some(plan.partitions[of as usize - 1].start_bytes)
            );
        }
        let (FsPlan::Verity(va), FsPlan::Verity(vb)) = (fs(2), fs(3)) else {
            panic!()
        };
        assert_ne!(va.uuid, vb.uuid);
        assert_eq!(va.salt, vb.salt);
        for k in [4usize, 5] {
            let FsPlan::Erofs(e) = fs(k) else { panic!() };
            let v = e.verity.unwrap();
            let p = &plan.partitions[k];
            assert_eq!(v.data_start_bytes, Some(p.start_bytes));
            assert!(v.hash_start_bytes + v.hash_bytes <= p.start_bytes + p.size_bytes);
        }
        let fills: Vec<Fill<'_>> = trees
            .iter()
            .map(|t| t.as_ref().map_or(Fill::Nothing, Fill::Tree))
            .collect();
        let (img, _) =
            assemble_sparse_verity(&spec, &mut plan, &fills, &Vec::<Vec<u8>>::new(), 1).unwrap();
        let roots = crate::root_hashes(&plan, &spec);
        let names: Vec<&str> = roots.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, ["sys_a", "sys_b", "app_a", "app_b"]);
        assert_ne!(roots[0].1, roots[1].1);
        // Every covered byte is mapped, so a device written from the map holds what was hashed.
        let mapped = img.mapped_ranges();
        for (s, e) in crate::verity_data_regions(&plan) {
            assert!(
                mapped.iter().any(|&(ms, me)| ms <= s && e <= me),
                "{s}..{e} not mapped"
            );
        }
    }
}
