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
                    ..OtherFs::default()
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

/// After every partition is read (and A/B slots inferred): links each verity partition to the
/// partition whose size its data blocks cover — one of its own slot first, then the nearest
/// one before it — or says that none does.
pub(crate) fn link(r: &mut Report) {
    let sizes: Vec<(u32, u64, u64, Option<String>)> = r
        .partitions
        .iter()
        .map(|p| (p.index, p.start_bytes, p.size_bytes, p.slot.clone()))
        .collect();
    let mut missing = Vec::new();
    for (k, p) in r.partitions.iter_mut().enumerate() {
        let slot = p.slot.clone();
        let Some(FsPlan::Verity(v)) = p.filesystem.as_mut() else {
            continue;
        };
        let data = v.data_blocks.saturating_mul(u64::from(v.data_block_bytes));
        let before = sizes.get(..k).unwrap_or_default().iter().rev();
        let after = sizes.get(k.saturating_add(1)..).unwrap_or_default().iter();
        let fits: Vec<_> = before.chain(after).filter(|c| c.2 == data).collect();
        let own_slot = fits
            .iter()
            .find(|c| slot.is_some() && c.3 == slot)
            .or(fits.first());
        match own_slot {
            Some(&&(index, start, _, _)) => {
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

#[cfg(test)]
#[expect(
    clippy::indexing_slicing,
    clippy::unwrap_used,
    clippy::arithmetic_side_effects,
    clippy::as_conversions,
    clippy::panic,
    reason = "tests"
)]
mod tests {
    use blockwise_geometry::{BlockSource, Meta, NodeKind, SparseImage, Tree};
    use proptest::prelude::*;

    use crate::{verify_bytes, Options};

    /// A bare EROFS image, a bare squashfs image and an EROFS with an appended hash tree,
    /// each 1 MiB: what the mutations start from.
    fn images() -> Vec<Vec<u8>> {
        let mut tree = Tree::default();
        let d = tree
            .add(0, "d", NodeKind::Dir { children: vec![] }, Meta::default())
            .unwrap();
        tree.add(
            d,
            "f",
            NodeKind::File {
                size: 9000,
                content: 0,
                data_ranges: None,
                link: None,
            },
            Meta {
                mode: 0o644,
                xattrs: vec![("user.a".into(), b"b".to_vec())],
                ..Meta::default()
            },
        )
        .unwrap();
        let content = vec![(0..9000u32).map(|i| (i % 251) as u8).collect::<Vec<u8>>()];
        let size = 1u64 << 20;
        let mut out = Vec::new();
        let req = blockwise_erofs::ErofsRequest {
            partition_start_bytes: 0,
            partition_size_bytes: size,
            erase_block_bytes: 1 << 16,
            options: blockwise_erofs::ErofsOptions::default(),
            label: Some("x".into()),
            seed: 1,
            timestamp: 0,
        };
        let p = blockwise_erofs::plan(&req, &tree).unwrap();
        let mut img = SparseImage::new(size);
        blockwise_erofs::write(&mut img, &req, &p, &tree, &content).unwrap();
        let mut v = vec![0u8; size as usize];
        img.read_at(0, &mut v).unwrap();
        out.push(v.clone());
        // The same with a tree after the filesystem, at 64 KiB.
        let params = blockwise_verity::Params::new(16, vec![3; 32], [4; 16]);
        let mut b = blockwise_verity::TreeBuilder::new(&params);
        for block in v[..65536].chunks(4096) {
            b.push_block(block).unwrap();
        }
        let t = b.finish().unwrap();
        v[65536..65536 + t.bytes.len()].copy_from_slice(&t.bytes);
        out.push(v);
        let sreq = blockwise_squashfs::SquashfsRequest {
            partition_size_bytes: size,
            options: blockwise_squashfs::SquashfsOptions::default(),
            timestamp: 0,
        };
        let mut s = vec![0u8; size as usize];
        blockwise_squashfs::write(&mut s, &sreq, &tree, &content).unwrap();
        out.push(s);
        out
    }

    #[test]
    fn built_images_verify_clean() {
        for (k, img) in images().iter().enumerate() {
            let r = verify_bytes(img, &Options::new("x").erase_block(1 << 16));
            assert_eq!(r.exit_code(), 0, "{k}: {:?}", r.findings);
        }
        let r = verify_bytes(&images()[1], &Options::new("x").erase_block(1 << 16));
        let Some(blockwise_geometry::FsPlan::Erofs(e)) = &r.partitions[0].filesystem else {
            panic!("{:?}", r.partitions);
        };
        assert_eq!(e.verity.as_ref().map(|v| v.data_blocks), Some(16));
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]
        /// Hostile bytes: up to 16 flipped or set bytes in the first 80 KiB of each image
        /// never make verify panic or hang.
        #[test]
        fn mutated_images_never_panic(which in 0usize..3, edits in proptest::collection::vec((0usize..81920, any::<u8>()), 1..16)) {
            let mut img = images().swap_remove(which);
            for (at, v) in edits {
                img[at] = v;
            }
            let _ = verify_bytes(&img, &Options::new("x").erase_block(1 << 16)).to_human();
        }
    }
}
