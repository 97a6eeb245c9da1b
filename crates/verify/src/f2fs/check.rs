//! F2FS checks on a parsed superblock: both copies, the size against the partition, the
//! section and main area against the erase block.

use blockwise_geometry::fsplan::f2fs::F2FS_BLOCK;
use blockwise_geometry::{format_size, BlockSource, FsKind, FsPlan, OtherFs, PartitionPlan};

use crate::{f2fs, read_clamped, FindingCode, Severity, Verifier};

impl<S: BlockSource + ?Sized> Verifier<'_, S> {
    pub(crate) fn f2fs(&mut self, p: &mut PartitionPlan) -> Result<(), S::Error> {
        let i = p.index;
        let block = usize::try_from(F2FS_BLOCK).unwrap_or(4096);
        let head = read_clamped(self.src, p.start_bytes, block.saturating_mul(2))?;
        p.content = FsKind::F2fs;
        let primary = f2fs::parse_superblock(head.get(..block).unwrap_or(&head));
        let backup = f2fs::parse_superblock(head.get(block..).unwrap_or_default());
        let sb = match (primary, backup) {
            (Ok(a), Ok(b)) => {
                if a != b {
                    self.add(
                        Severity::Warning,
                        FindingCode::F2fsSuperblockCopies,
                        Some(i),
                        format!("partition {i} (f2fs): the primary and backup superblocks (blocks 0 and 1) describe different layouts; the kernel uses the primary, fsck.f2fs can rewrite the other"),
                    );
                }
                a
            }
            (Ok(a), Err(e)) => {
                self.add(
                    Severity::Warning,
                    FindingCode::F2fsSuperblockCopies,
                    Some(i),
                    format!("partition {i} (f2fs): the backup superblock (block 1) is unusable ({e}); the primary is fine, fsck.f2fs can rewrite the backup"),
                );
                a
            }
            (Err(e), Ok(b)) => {
                self.add(
                    Severity::Warning,
                    FindingCode::F2fsSuperblockCopies,
                    Some(i),
                    format!("partition {i} (f2fs): the primary superblock (block 0) is unusable ({e}); the kernel falls back to the backup in block 1, which is read here; run fsck.f2fs"),
                );
                b
            }
            (Err(e), Err(_)) => {
                p.filesystem = Some(FsPlan::Other(OtherFs::named("f2fs")));
                self.add(
                    Severity::Error,
                    FindingCode::F2fsCorrupt,
                    Some(i),
                    format!("partition {i}: F2FS superblock: {e} (the backup is no better) — the kernel will not mount it"),
                );
                return Ok(());
            }
        };
        let vol = sb.block_count.saturating_mul(F2FS_BLOCK);
        if vol > p.size_bytes {
            self.add(
                Severity::Error,
                FindingCode::F2fsLargerThanPartition,
                Some(i),
                format!(
                    "partition {i} (f2fs): the filesystem has {} blocks ({}) but the partition holds {}: the kernel refuses to mount it; grow the partition or remake the filesystem",
                    sb.block_count,
                    format_size(vol),
                    format_size(p.size_bytes)
                ),
            );
        }
        let plan = sb.to_plan(p.start_bytes, self.e);
        self.r
            .findings
            .extend(f2fs::f2fs_alignment(i, &plan, self.e, self.opts.strict));
        p.filesystem = Some(FsPlan::F2fs(plan));
        Ok(())
    }
}
