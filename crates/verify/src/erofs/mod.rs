//! EROFS: the superblock (through `blockwise_erofs::raw`), its checksum, its size against
//! the partition, an appended dm-verity hash area.

use blockwise_erofs::raw::{
    superblock_checksum, SuperblockRaw, ALL_INCOMPAT, COMPAT_NAMES, COMPAT_SB_CHKSUM,
    INCOMPAT_NAMES, MAGIC, SUPER_OFFSET,
};
use blockwise_geometry::{
    format_size, BlockSource, ErofsPlan, FsKind, FsPlan, OtherFs, PartitionPlan,
};
use zerocopy::FromBytes;

use crate::{read_clamped, FindingCode, Severity, Verifier};

/// A superblock that does not parse.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Corrupt {
    /// Too few bytes.
    #[error("the superblock is cut short")]
    Truncated,
    /// No EROFS magic.
    #[error("no EROFS magic")]
    Magic,
    /// A block size outside 512 B – 64 KiB.
    #[error("block size 2^{0} is outside 512 B – 64 KiB")]
    BlockSize(u8),
    /// A superblock size (`sb_extslots`) larger than a block.
    #[error("superblock of {0} bytes does not fit the block")]
    Extslots(u32),
    /// No blocks.
    #[error("the filesystem has 0 blocks")]
    NoBlocks,
}

/// What the superblock says.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ErofsSuper {
    /// Block size in bytes.
    pub block_bytes: u32,
    /// Blocks.
    pub blocks: u64,
    /// Inodes.
    pub inodes: u64,
    /// Compatible features.
    pub feature_compat: u32,
    /// Incompatible features.
    pub feature_incompat: u32,
    /// Compression algorithm bitmap (with `compr_cfgs`).
    pub compr_algs: u16,
    /// UUID.
    pub uuid: [u8; 16],
    /// Volume name, NULs cut.
    pub label: String,
    /// The checksum matches (`None`: no `sb_csum` feature, or the block was cut short).
    pub checksum_ok: Option<bool>,
}

impl ErofsSuper {
    /// Feature names, compatible first.
    #[must_use]
    pub fn features(&self) -> Vec<String> {
        let c = COMPAT_NAMES
            .iter()
            .filter(|(b, _)| self.feature_compat & b != 0)
            .map(|(_, n)| (*n).to_string());
        let i = INCOMPAT_NAMES
            .iter()
            .filter(|(b, _)| self.feature_incompat & b != 0)
            .map(|(_, n)| (*n).to_string());
        c.chain(i).collect()
    }

    /// Incompatible bits no kernel knows.
    #[must_use]
    pub fn unknown_incompat(&self) -> u32 {
        self.feature_incompat & !ALL_INCOMPAT
    }

    /// The compression on disk: `none`, or the algorithms joined by `+`.
    #[must_use]
    pub fn compression(&self) -> String {
        const COMPR_CFGS: u32 = 0x2;
        const ZERO_PADDING: u32 = 0x1;
        if self.feature_incompat & COMPR_CFGS != 0 {
            let names: Vec<&str> = ["lz4", "lzma", "deflate", "zstd"]
                .iter()
                .enumerate()
                .filter(|(k, _)| {
                    u32::try_from(*k)
                        .ok()
                        .and_then(|k| 1u16.checked_shl(k))
                        .is_some_and(|bit| self.compr_algs & bit != 0)
                })
                .map(|(_, n)| *n)
                .collect();
            if names.is_empty() {
                "lz4".into()
            } else {
                names.join("+")
            }
        } else if self.feature_incompat & ZERO_PADDING != 0 {
            // Before compression configurations, lz4 was the only algorithm.
            "lz4".into()
        } else {
            "none".into()
        }
    }
}

/// Parses the superblock from the first block of a volume (`block` starts at byte 0 of the
/// volume; its first 4 KiB, or the whole block, for the checksum).
pub fn parse_superblock(block: &[u8]) -> Result<ErofsSuper, Corrupt> {
    let at = usize::try_from(SUPER_OFFSET).unwrap_or(1024);
    let raw_bytes = block.get(at..).ok_or(Corrupt::Truncated)?;
    let (raw, _) = SuperblockRaw::read_from_prefix(raw_bytes).map_err(|_| Corrupt::Truncated)?;
    if raw.magic.get() != MAGIC {
        return Err(Corrupt::Magic);
    }
    let bits = raw.blkszbits;
    if !(9..=16).contains(&bits) {
        return Err(Corrupt::BlockSize(bits));
    }
    let block_bytes = 1u32.checked_shl(u32::from(bits)).unwrap_or(0);
    let sb_len = u32::from(raw.sb_extslots)
        .saturating_mul(16)
        .saturating_add(128);
    if sb_len.saturating_add(1024) > block_bytes.max(4096) {
        return Err(Corrupt::Extslots(sb_len));
    }
    let blocks = u64::from(raw.blocks.get());
    if blocks == 0 {
        return Err(Corrupt::NoBlocks);
    }
    let compat = raw.feature_compat.get();
    let checksum_ok = (compat & COMPAT_SB_CHKSUM != 0)
        .then(|| {
            let len = usize::try_from(block_bytes).unwrap_or(4096);
            block
                .get(..len)
                .map(|b| superblock_checksum(b) == raw.checksum.get())
        })
        .flatten();
    let name_len = raw
        .volume_name
        .iter()
        .position(|&b| b == 0)
        .unwrap_or(raw.volume_name.len());
    Ok(ErofsSuper {
        block_bytes,
        blocks,
        inodes: raw.inos.get(),
        feature_compat: compat,
        feature_incompat: raw.feature_incompat.get(),
        compr_algs: raw.available_compr_algs.get(),
        uuid: raw.uuid,
        label: String::from_utf8_lossy(raw.volume_name.get(..name_len).unwrap_or_default())
            .into_owned(),
        checksum_ok,
    })
}

impl<S: BlockSource + ?Sized> Verifier<'_, S> {
    pub(crate) fn erofs(&mut self, p: &mut PartitionPlan) -> Result<(), S::Error> {
        let i = p.index;
        p.content = FsKind::Erofs;
        let head = read_clamped(self.src, p.start_bytes, 64 << 10)?;
        let head = head
            .get(
                ..usize::try_from(p.size_bytes)
                    .unwrap_or(usize::MAX)
                    .min(head.len()),
            )
            .unwrap_or_default();
        let sb = match parse_superblock(head) {
            Ok(sb) => sb,
            Err(err) => {
                p.filesystem = Some(FsPlan::Other(OtherFs {
                    kind: "erofs".into(),
                    aligned: None,
                    ..OtherFs::default()
                }));
                self.add(
                    Severity::Error,
                    FindingCode::ErofsCorrupt,
                    Some(i),
                    format!(
                        "partition {i}: EROFS superblock: {err} — the kernel will not mount it"
                    ),
                );
                return Ok(());
            }
        };
        if sb.checksum_ok == Some(false) {
            self.add(
                Severity::Error,
                FindingCode::ErofsSuperblockChecksum,
                Some(i),
                format!("partition {i} (erofs): the superblock checksum does not match — the kernel refuses to mount it (\"bad checksum\"); the image was changed or damaged after mkfs"),
            );
        }
        let unknown = sb.unknown_incompat();
        if unknown != 0 {
            self.add(
                Severity::Warning,
                FindingCode::ErofsUnsupported,
                Some(i),
                format!("partition {i} (erofs): incompatible feature bits {unknown:#x} unknown to current kernels: it may not mount"),
            );
        }
        let bytes = sb.blocks.saturating_mul(u64::from(sb.block_bytes));
        if bytes > p.size_bytes {
            self.add(
                Severity::Error,
                FindingCode::ErofsLargerThanPartition,
                Some(i),
                format!(
                    "partition {i} (erofs): the filesystem has {} blocks ({}) but the partition holds {}: the end of the filesystem is cut off",
                    sb.blocks,
                    format_size(bytes),
                    format_size(p.size_bytes)
                ),
            );
        }
        let uuid = (sb.uuid != [0; 16]).then(|| blockwise_erofs::uuid_string(&sb.uuid));
        let mut plan = ErofsPlan {
            kind: "erofs".into(),
            label: (!sb.label.is_empty()).then(|| sb.label.clone()),
            uuid,
            block_bytes: sb.block_bytes,
            blocks: Some(sb.blocks),
            inodes: Some(sb.inodes),
            compression: sb.compression(),
            features: Some(sb.features()),
            verity: None,
            aligned: true,
        };
        plan.verity = self.appended_verity(p, bytes)?;
        plan.aligned = plan.alignment_holds(self.e);
        let fs = FsPlan::Erofs(plan);
        self.r
            .findings
            .extend(crate::rofs::alignment(i, &fs, self.e));
        p.filesystem = Some(fs);
        Ok(())
    }
}

#[cfg(test)]
#[expect(clippy::indexing_slicing, clippy::unwrap_used, reason = "tests")]
mod tests {
    use super::*;
    use blockwise_erofs::{plan, write, ErofsOptions, ErofsRequest};
    use blockwise_geometry::{BlockSource, SparseImage, Tree};

    fn image() -> Vec<u8> {
        let req = ErofsRequest {
            partition_start_bytes: 0,
            partition_size_bytes: 1 << 20,
            erase_block_bytes: 1 << 20,
            options: ErofsOptions::default(),
            label: Some("sys".into()),
            seed: 3,
            timestamp: 0,
        };
        let tree = Tree::default();
        let p = plan(&req, &tree).unwrap();
        let mut img = SparseImage::new(1 << 20);
        write(&mut img, &req, &p, &tree, &Vec::<Vec<u8>>::new()).unwrap();
        let mut b = vec![0u8; 4096];
        img.read_at(0, &mut b).unwrap();
        b
    }

    #[test]
    fn parses_ours_and_rejects_each_bad_field() {
        let b = image();
        let sb = parse_superblock(&b).unwrap();
        assert_eq!(sb.block_bytes, 4096);
        assert_eq!(sb.label, "sys");
        assert_eq!(sb.checksum_ok, Some(true));
        assert_eq!(sb.compression(), "none");
        assert_eq!(sb.features(), ["sb_csum"]);
        assert_eq!(parse_superblock(&b[..1100]), Err(Corrupt::Truncated));
        let mut x = b.clone();
        x[1024] ^= 1;
        assert_eq!(parse_superblock(&x), Err(Corrupt::Magic));
        let mut x = b.clone();
        x[1024 + 12] = 20;
        assert_eq!(parse_superblock(&x), Err(Corrupt::BlockSize(20)));
        let mut x = b.clone();
        x[1024 + 0x24..1024 + 0x28].fill(0);
        assert_eq!(parse_superblock(&x), Err(Corrupt::NoBlocks));
        let mut x = b;
        x[3000] ^= 0xff;
        assert_eq!(parse_superblock(&x).unwrap().checksum_ok, Some(false));
    }
}
