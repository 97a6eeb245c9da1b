//! dm-verity: the superblock (through `blockwise_verity`), in a partition of its own or after
//! an EROFS/squashfs filesystem; the hash area's size against what the data needs, the data
//! partition it covers, the root hash from the top hash block.

use blockwise_geometry::{
    format_size, BlockSource, FsKind, FsPlan, OtherFs, PartitionPlan, VerityPlan,
};
use blockwise_verity::{hex, levels, root_from_top, Superblock, MAGIC, SUPERBLOCK_BYTES};

use crate::num::div;
use crate::{read_clamped, FindingCode, Report, Severity, Verifier};

pub use blockwise_verity::Corrupt;

/// Parses a verity superblock (the first 512 bytes of `bytes`).
pub fn parse_superblock(bytes: &[u8]) -> Result<Superblock, Corrupt> {
    Superblock::parse(bytes)
}

/// Bytes of superblock and tree `sb` needs, `None` for digests other than 32 bytes.
fn hash_area_bytes(sb: &Superblock) -> Option<u64> {
    if !matches!(sb.algorithm.as_str(), "sha256" | "sha1" | "md5") {
        return None;
    }
    let blocks = levels(sb.data_blocks, sb.hash_block_bytes)
        .iter()
        .fold(1u64, |a, &b| a.saturating_add(b));
    Some(blocks.saturating_mul(u64::from(sb.hash_block_bytes)))
}

/// The root hash from the top hash block, for sha256 (format 1: salt first; Chrome OS:
/// salt last).
fn root_hash(sb: &Superblock, top: &[u8]) -> Option<String> {
    if sb.algorithm != "sha256" || top.len() != usize::try_from(sb.hash_block_bytes).ok()? {
        return None;
    }
    if sb.hash_type == 1 {
        Some(hex(&root_from_top(&sb.salt, top)))
    } else {
        let mut data = top.to_vec();
        data.extend_from_slice(&sb.salt);
        Some(hex(&root_from_top(&[], &data)))
    }
}

impl<S: BlockSource + ?Sized> Verifier<'_, S> {
    /// A [`VerityPlan`] for the superblock at `at` (absolute), or the finding of why it does
    /// not parse. `room` is the bytes from `at` to the end of the partition.
    fn verity_at(&mut self, i: u32, at: u64, room: u64) -> Result<Option<VerityPlan>, S::Error> {
        let raw = read_clamped(self.src, at, SUPERBLOCK_BYTES)?;
        let sb = match parse_superblock(&raw) {
            Ok(sb) => sb,
            Err(err) => {
                self.add(
                    Severity::Error,
                    FindingCode::VerityCorrupt,
                    Some(i),
                    format!("partition {i}: dm-verity superblock at byte {at}: {err} — veritysetup will not open it"),
                );
                return Ok(None);
            }
        };
        let hb = u64::from(sb.hash_block_bytes);
        let need = hash_area_bytes(&sb);
        if let Some(need) = need.filter(|&n| n > room) {
            self.add(
                Severity::Error,
                FindingCode::VerityHashTooSmall,
                Some(i),
                format!(
                    "partition {i} (dm-verity): {} data blocks of {} B need {} of superblock and hash tree, but only {} are there: the tree is cut off and verification fails",
                    sb.data_blocks,
                    sb.data_block_bytes,
                    format_size(need),
                    format_size(room)
                ),
            );
        }
        // The top level sits right after the superblock's hash block.
        let top = read_clamped(
            self.src,
            at.saturating_add(hb),
            usize::try_from(hb).unwrap_or(0),
        )?;
        let root = if need.is_some_and(|n| n <= room) && sb.data_blocks > 1 {
            root_hash(&sb, &top)
        } else {
            None
        };
        let mut v = VerityPlan {
            kind: "verity".into(),
            of: None,
            data_start_bytes: None,
            hash_algorithm: sb.algorithm.clone(),
            data_block_bytes: sb.data_block_bytes,
            hash_block_bytes: sb.hash_block_bytes,
            data_blocks: sb.data_blocks,
            hash_start_bytes: at,
            hash_bytes: need.unwrap_or(0),
            salt: hex(&sb.salt),
            uuid: (sb.uuid != [0; 16]).then(|| blockwise_erofs::uuid_string(&sb.uuid)),
            root_hash: root,
            aligned: true,
        };
        v.aligned = v.alignment_holds();
        Ok(Some(v))
    }

    /// A partition holding a verity superblock at its start.
    pub(crate) fn verity(&mut self, p: &mut PartitionPlan) -> Result<(), S::Error> {
        let i = p.index;
        p.content = FsKind::Verity;
        match self.verity_at(i, p.start_bytes, p.size_bytes)? {
            Some(v) => {
                let fs = FsPlan::Verity(v);
                self.r
                    .findings
                    .extend(crate::rofs::alignment(i, &fs, self.e));
                p.filesystem = Some(fs);
            }
            None => {
                p.filesystem = Some(FsPlan::Other(OtherFs {
                    kind: "verity".into(),
                    aligned: None,
                }));
            }
        }
        Ok(())
    }

    /// A hash area after a filesystem of `fs_bytes` in partition `p`: looked for where
    /// `veritysetup format --hash-offset` and blockwise put it (the next 4 KiB page, the next
    /// erase block).
    pub(crate) fn appended_verity(
        &mut self,
        p: &PartitionPlan,
        fs_bytes: u64,
    ) -> Result<Option<VerityPlan>, S::Error> {
        let page = fs_bytes.div_ceil(4096).saturating_mul(4096);
        let erase =
            div(page.saturating_add(self.e.saturating_sub(1)), self.e).saturating_mul(self.e);
        for off in [page, erase] {
            if off == 0 || off.saturating_add(512) > p.size_bytes {
                continue;
            }
            let at = p.start_bytes.saturating_add(off);
            let magic = read_clamped(self.src, at, 8)?;
            if magic.as_slice() != MAGIC.as_slice() {
                continue;
            }
            let room = p.size_bytes.saturating_sub(off);
            let Some(mut v) = self.verity_at(p.index, at, room)? else {
                return Ok(None);
            };
            v.data_start_bytes = Some(p.start_bytes);
            let covered = v.data_blocks.saturating_mul(u64::from(v.data_block_bytes));
            if covered > off {
                let i = p.index;
                self.add(
                    Severity::Error,
                    FindingCode::VerityCorrupt,
                    Some(i),
                    format!("partition {i}: the appended dm-verity superblock at byte {off} of the partition covers {covered} bytes of data, past itself: the hash tree would hash its own blocks"),
                );
            }
            return Ok(Some(v));
        }
        Ok(None)
    }
}

/// After every partition is read: links each verity partition to the partition whose size its
/// data blocks cover (the nearest one before it first), or says that none does.
pub(crate) fn link(r: &mut Report) {
    let sizes: Vec<(u32, u64, u64)> = r
        .partitions
        .iter()
        .map(|p| (p.index, p.start_bytes, p.size_bytes))
        .collect();
    let mut missing = Vec::new();
    for (k, p) in r.partitions.iter_mut().enumerate() {
        let Some(FsPlan::Verity(v)) = p.filesystem.as_mut() else {
            continue;
        };
        let data = v.data_blocks.saturating_mul(u64::from(v.data_block_bytes));
        let before = sizes.get(..k).unwrap_or_default().iter().rev();
        let after = sizes.get(k.saturating_add(1)..).unwrap_or_default().iter();
        match before.chain(after).find(|(_, _, size)| *size == data) {
            Some(&(index, start, _)) => {
                v.of = Some(index);
                v.data_start_bytes = Some(start);
            }
            None => missing.push((p.index, data)),
        }
    }
    for (i, data) in missing {
        r.findings.push(crate::Finding {
            severity: Severity::Warning,
            code: FindingCode::VerityNoData,
            partition: Some(i),
            message: format!(
                "partition {i} (dm-verity): its superblock covers {} ({data} bytes) of data, and no partition has that size: the data partition was resized, or the tree belongs to another disk",
                format_size(data)
            ),
        });
    }
}
