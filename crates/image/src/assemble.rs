//! The pure part of building: full plan (layout + filesystem geometry) and writing a plan
//! with its trees into a [`SparseImage`]. No OS I/O: builds for wasm32.

use blockwise_ext4::Ext4Request;
use blockwise_fat::FatRequest;
use blockwise_geometry::{
    plan as plan_layout, BlockSink, ContentSource, FsKind, FsPlan, OtherFs, PartType, Plan,
    SparseImage, Spec, SpecError, SubSink, TableKind, Tree,
};

use crate::Error;

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
        options: ps.fat.clone(),
        label: ps.label.clone(),
        seed: blockwise_geometry::derive_u64(spec.image.seed, "fat-volume", p.spec_index as u64),
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
        options: ps.ext4.clone(),
        label: ps.label.clone(),
        seed: blockwise_geometry::derive_u64(spec.image.seed, "ext4", p.spec_index as u64),
        timestamp,
    })
}

fn fat_error(index: usize, e: blockwise_fat::Error) -> Error {
    match e {
        blockwise_fat::Error::InvalidSpec { key, reason } => {
            Error::Spec(SpecError::new(format!("partition[{index}].{key}"), reason))
        }
        other => Error::Partition {
            index,
            message: other.to_string(),
        },
    }
}

fn ext4_error(index: usize, e: blockwise_ext4::Error) -> Error {
    match e {
        blockwise_ext4::Error::InvalidSpec { key, reason } => {
            Error::Spec(SpecError::new(format!("partition[{index}].{key}"), reason))
        }
        other => Error::Partition {
            index,
            message: other.to_string(),
        },
    }
}

/// Plans layout and filesystems. `trees[i]` (spec order), when given, lets the ext4 planner
/// size its inode count to the contents. `timestamp` is the filesystem creation time.
pub fn plan_full(spec: &Spec, trees: &[Option<Tree>], timestamp: i64) -> Result<Plan, Error> {
    let mut plan = plan_layout(spec)?;
    for i in 0..plan.partitions.len() {
        let Some(p) = plan.partitions.get(i) else {
            continue;
        };
        let si = p.spec_index;
        let Some(ps) = spec.partitions.get(si) else {
            continue;
        };
        let fs = match ps.fs {
            k if k.is_fat() => {
                let req = fat_request(spec, &plan, i)
                    .ok_or_else(|| SpecError::new("partition", "internal: missing partition"))?;
                let fp = blockwise_fat::plan(&req).map_err(|e| fat_error(si + 1, e))?;
                Some(FsPlan::Fat(fp))
            }
            FsKind::Ext4 => {
                let req = ext4_request(spec, &plan, i, timestamp)
                    .ok_or_else(|| SpecError::new("partition", "internal: missing partition"))?;
                let tree = trees.get(si).and_then(Option::as_ref);
                let xp = blockwise_ext4::plan(&req, tree).map_err(|e| ext4_error(si + 1, e))?;
                Some(FsPlan::Ext4(xp))
            }
            FsKind::Raw => Some(FsPlan::Other(OtherFs {
                kind: "raw".into(),
                aligned: None,
            })),
            _ => None,
        };
        // With fs = "fat", the MBR type follows the FAT type the planner chose.
        let chosen_type = match (&fs, ps.type_.is_none(), spec.image.table) {
            (Some(FsPlan::Fat(f)), true, TableKind::Mbr) => Some(match f.kind.as_str() {
                "fat12" => 0x01,
                "fat16" => 0x0e,
                _ => 0x0c,
            }),
            _ => None,
        };
        if let Some(p) = plan.partitions.get_mut(i) {
            p.filesystem = fs;
            if let Some(t) = chosen_type {
                p.type_ = PartType::Mbr(t);
            }
        }
    }
    plan.refresh_aligned();
    Ok(plan)
}

/// Reads raw partition content: `read(offset, buf)` returns the bytes read, 0 at the end.
pub type RawReader<'a> = dyn FnMut(u64, &mut [u8]) -> Result<usize, String> + 'a;

/// What a partition is filled from, for [`assemble`].
pub enum Fill<'a> {
    /// Nothing (fs = "none").
    Nothing,
    /// A tree (FAT or ext4 native backend).
    Tree(&'a Tree),
    /// Raw bytes from a reader: `read(offset, buf) -> bytes read` (0 at the end).
    Raw(&'a mut RawReader<'a>),
    /// Bytes already produced elsewhere (the mke2fs backend): written by the caller.
    External,
}

/// Writes the partition table and every partition of `plan` into a new [`SparseImage`].
/// `fills[i]` is in spec order. Returns the image and the writers' warnings.
pub fn assemble(
    spec: &Spec,
    plan: &Plan,
    fills: &mut [Fill<'_>],
    content: &dyn ContentSource,
    timestamp: i64,
) -> Result<(SparseImage, Vec<String>), Error> {
    let mut img = SparseImage::new(plan.size_bytes);
    let mut warnings = Vec::new();
    blockwise_ptable::write_table(&mut img, plan).map_err(|e| Error::Table(e.to_string()))?;
    for (i, p) in plan.partitions.iter().enumerate() {
        let si = p.spec_index;
        let index = si + 1;
        let part_err = |message: String| Error::Partition { index, message };
        let mut sub = SubSink::new(&mut img, p.start_bytes, p.size_bytes)
            .map_err(|e| part_err(e.to_string()))?;
        let Some(fill) = fills.get_mut(si) else {
            continue;
        };
        match (&p.filesystem, fill) {
            (Some(FsPlan::Fat(fp)), Fill::Tree(tree)) => {
                let req =
                    fat_request(spec, plan, i).ok_or_else(|| part_err("missing request".into()))?;
                let report = blockwise_fat::write(&mut sub, &req, fp, tree, content, timestamp)
                    .map_err(|e| fat_error(index, e))?;
                warnings.extend(
                    report
                        .warnings
                        .iter()
                        .map(|w| format!("partition[{index}]: {w}")),
                );
            }
            (Some(FsPlan::Ext4(xp)), Fill::Tree(tree)) => {
                let req = ext4_request(spec, plan, i, timestamp)
                    .ok_or_else(|| part_err("missing request".into()))?;
                blockwise_ext4::write(&mut sub, &req, xp, tree, content)
                    .map_err(|e| ext4_error(index, e))?;
            }
            (_, Fill::Raw(read)) => {
                let mut buf = vec![0u8; 1 << 20];
                let mut off = 0u64;
                loop {
                    let n = read(off, &mut buf).map_err(part_err)?;
                    if n == 0 {
                        break;
                    }
                    let chunk = buf.get(..n).unwrap_or_default();
                    if off + n as u64 > p.size_bytes {
                        return Err(Error::Spec(SpecError::new(
                            format!("partition[{index}].source"),
                            format!("the source is larger than the partition ({} bytes); raise partition[{index}].size", p.size_bytes),
                        )));
                    }
                    sub.write_at(off, chunk)
                        .map_err(|e| part_err(e.to_string()))?;
                    off += n as u64;
                }
            }
            (_, Fill::Nothing | Fill::External) => {}
            (_, Fill::Tree(_)) => {}
        }
    }
    Ok((img, warnings))
}
