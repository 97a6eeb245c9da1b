//! ext2/3/4 checks on a parsed superblock: size against the partition, group descriptors,
//! the journal and inode table against the erase block, stride and stripe width, block size
//! against the page and the device.

use blockwise_ext4::raw::{IncompatFeatures, EXT_MAX_DEPTH, GOOD_OLD_INODE_SIZE};
use blockwise_geometry::{
    format_size, BlockSource, Ext4Plan, FsKind, FsPlan, OtherFs, PartitionPlan,
};

use crate::num::{div, is_multiple};
use crate::{align, ext4, read_clamped, FindingCode, Severity, Verifier, PAGE};

impl<S: BlockSource + ?Sized> Verifier<'_, S> {
    pub(crate) fn ext(&mut self, p: &mut PartitionPlan) -> Result<(), S::Error> {
        let i = p.index;
        let base = p.start_bytes;
        let raw = read_clamped(self.src, base.saturating_add(ext4::SUPERBLOCK_OFFSET), 1024)?;
        p.content = FsKind::Ext4;
        let sb = match ext4::parse_superblock(&raw) {
            Ok(sb) => sb,
            Err(err) => {
                p.filesystem = Some(FsPlan::Other(OtherFs {
                    kind: "ext4".into(),
                    aligned: None,
                    ..OtherFs::default()
                }));
                self.add(
                    Severity::Error,
                    FindingCode::Ext4Corrupt,
                    Some(i),
                    format!("partition {i}: ext2/3/4 superblock: {err} — the kernel will not mount it; run e2fsck (it can use a backup superblock)"),
                );
                return Ok(());
            }
        };
        let kind = sb.kind();
        self.add_issues(
            i,
            kind,
            sb.issues.iter().map(|x| (x.code(), x.is_error(), x)),
        );
        let bs = u64::from(sb.block_bytes);
        let e = self.e;
        let vol_bytes = sb.blocks_count.saturating_mul(bs);
        if vol_bytes > p.size_bytes {
            self.add(
                Severity::Error,
                FindingCode::Ext4LargerThanPartition,
                Some(i),
                format!(
                    "partition {i} ({kind}): the filesystem has {} blocks ({}) but the partition holds {}: the kernel refuses it (\"block count exceeds size of device\"); resize2fs it or grow the partition",
                    sb.blocks_count,
                    format_size(vol_bytes),
                    format_size(p.size_bytes)
                ),
            );
        }
        // Group descriptors (bounded).
        let groups = sb.groups();
        let per_block = div(bs, u64::from(sb.desc_size.max(32)));
        let count = if sb
            .feature_set()
            .incompat
            .contains(IncompatFeatures::META_BG)
        {
            groups.min(per_block)
        } else {
            groups
        }
        .min(ext4::MAX_DESCRIPTORS);
        // At most 1 MiB of descriptors (16384 groups of 64 bytes = a 2 TiB filesystem with 4 KiB blocks).
        let count = count.min(div(1 << 20, u64::from(sb.desc_size.max(32))));
        let gdt_len = usize::try_from(count.saturating_mul(u64::from(sb.desc_size))).unwrap_or(0);
        let gdt = read_clamped(self.src, base.saturating_add(sb.gdt_offset()), gdt_len)?;
        let summary = ext4::summarise_groups(&sb, &gdt, count);
        for (g, field, block) in &summary.out_of_range {
            self.add(
                Severity::Error,
                FindingCode::Ext4GroupDesc,
                Some(i),
                format!("partition {i} ({kind}): group {g}'s {field} is block {block}, outside the filesystem (blocks {}..{}): e2fsck will have to rebuild it", sb.first_data_block, sb.blocks_count),
            );
        }
        let gdt_at = base.saturating_add(sb.gdt_offset());
        for &(g, stored, computed) in &summary.bad_checksums {
            let at = gdt_at.saturating_add(g.saturating_mul(u64::from(sb.desc_size)));
            self.add(
                Severity::Error,
                FindingCode::Ext4GroupDescChecksum,
                Some(i),
                format!(
                    "partition {i} ({kind}): group {g}'s descriptor checksum bg_checksum (offset 0x1E of the descriptor at byte {at}) is {stored:#06x}, computed {computed:#06x} ({}, as {} requires) — the kernel refuses to mount it read-write (\"ext4_check_descriptors: Checksum for group {g} failed\"); run e2fsck",
                    sb.desc_csum.name(),
                    if matches!(sb.desc_csum, ext4::DescChecksum::Crc16) { "gdt_csum/uninit_bg" } else { "metadata_csum" },
                ),
            );
        }
        let more = summary
            .bad_checksum_count
            .saturating_sub(u64::try_from(summary.bad_checksums.len()).unwrap_or(0));
        if more > 0 {
            self.add(
                Severity::Error,
                FindingCode::Ext4GroupDescChecksum,
                Some(i),
                format!("partition {i} ({kind}): {more} more group descriptors with a wrong bg_checksum (offset 0x1E)"),
            );
        }
        let first_it = summary.first_inode_table.filter(|&b| b < sb.blocks_count);
        let inode_table_start = first_it.map(|b| base.saturating_add(b.saturating_mul(bs)));
        // Journal.
        let journal_block = if sb.has_internal_journal() {
            self.journal_block(base, &sb, first_it)?
        } else {
            None
        };
        let journal_start = journal_block.map(|b| base.saturating_add(b.saturating_mul(bs)));
        let mut aligned = true;
        if let Some(j) = journal_start {
            if let Some(f) = align::ext4_journal(i, kind, j, e, self.opts.strict) {
                aligned = false;
                self.r.findings.push(f);
            }
        }
        if let Some(it) = inode_table_start {
            self.r
                .findings
                .extend(align::ext4_inode_table(i, kind, it, e));
        }
        let stride = u64::from(sb.raid_stride);
        let stripe = u64::from(sb.raid_stripe_width);
        let e_blocks = div(e, bs);
        if stride == 0 && stripe == 0 {
            self.add(
                Severity::Info,
                FindingCode::Ext4NoStride,
                Some(i),
                format!("partition {i} ({kind}): stride and stripe_width are 0, so the block allocator does not know the {} erase block; set them with `tune2fs -E stride={e_blocks},stripe_width={e_blocks}`", format_size(e)),
            );
        }
        for (field, v, code) in [
            ("stride", stride, FindingCode::Ext4StrideMismatch),
            ("stripe_width", stripe, FindingCode::Ext4StripeMismatch),
        ] {
            if v == 0 {
                continue;
            }
            let bytes = v.saturating_mul(bs);
            if !is_multiple(e, bytes) && !is_multiple(bytes, e) {
                if field == "stripe_width" {
                    aligned = false;
                }
                self.add(
                    Severity::Warning,
                    code,
                    Some(i),
                    format!(
                        "partition {i} ({kind}): {field} is {v} blocks ({}), neither a divisor nor a multiple of the {} erase block — the allocator aligns large files to boundaries that straddle erase blocks; `tune2fs -E {field}={e_blocks}`",
                        format_size(bytes),
                        format_size(e)
                    ),
                );
            } else if field == "stripe_width" && bytes < e {
                self.add(
                    Severity::Info,
                    FindingCode::Ext4StripeSmaller,
                    Some(i),
                    format!(
                        "partition {i} ({kind}): stripe_width is {v} blocks ({}), smaller than the {} erase block: large files are aligned to {} only; `tune2fs -E stripe_width={e_blocks}` aligns them to whole erase blocks",
                        format_size(bytes),
                        format_size(e),
                        format_size(bytes)
                    ),
                );
            }
        }
        if let Some(phys) = self.physical_sector_above(bs) {
            self.add(
                Severity::Warning,
                FindingCode::Ext4BlockSmallerThanDevice,
                Some(i),
                format!("partition {i} ({kind}): {bs}-byte blocks are smaller than the device's {phys}-byte physical sector: single-block writes become read-modify-write cycles"),
            );
        }
        if bs < PAGE {
            self.add(
                Severity::Warning,
                FindingCode::Ext4SmallBlocks,
                Some(i),
                format!("partition {i} ({kind}): {bs}-byte blocks are smaller than a 4 KiB flash page: metadata writes become read-modify-write cycles; use 4096-byte blocks (mke2fs -b 4096)"),
            );
        }
        let mut found = Ext4Plan {
            kind: kind.into(),
            label: sb.label.clone(),
            uuid: Some(sb.uuid_string()),
            block_bytes: sb.block_bytes,
            blocks: sb.blocks_count,
            inodes: sb.inodes_count.into(),
            stride: sb.raid_stride.into(),
            stripe_width: sb.raid_stripe_width,
            journal_start_bytes: journal_start,
            inode_table_start_bytes: inode_table_start,
            features: sb.features(),
            aligned: false,
            notes: Vec::new(),
        };
        // The same rule as the planner's; the findings above say which part failed.
        found.aligned = found.alignment_holds(base, e);
        debug_assert!(found.aligned || !aligned || !is_multiple(base, bs));
        p.filesystem = Some(FsPlan::Ext4(found));
        Ok(())
    }

    /// The journal's first block: from the `s_jnl_blocks` backup, else from inode 8.
    fn journal_block(
        &self,
        base: u64,
        sb: &ext4::Superblock,
        first_it: Option<u64>,
    ) -> Result<Option<u64>, S::Error> {
        let bs = u64::from(sb.block_bytes);
        let mut node = sb.journal_backup_start();
        if node.is_none() {
            let (Some(it), Some(slot)) = (first_it, u64::from(sb.journal_inum).checked_sub(1))
            else {
                return Ok(None);
            };
            if slot >= u64::from(sb.inodes_per_group) {
                return Ok(None);
            }
            let off = base
                .saturating_add(it.saturating_mul(bs))
                .saturating_add(slot.saturating_mul(u64::from(sb.inode_size)));
            let inode = read_clamped(self.src, off, GOOD_OLD_INODE_SIZE.into())?;
            node = ext4::inode_first_data_block(&inode);
        }
        // Follow at most 5 index levels (ext4's maximum depth).
        for _ in 0..EXT_MAX_DEPTH {
            match node {
                Some(Ok(b)) => return Ok((b < sb.blocks_count).then_some(b)),
                Some(Err(child)) if child < sb.blocks_count => {
                    let blk = read_clamped(
                        self.src,
                        base.saturating_add(child.saturating_mul(bs)),
                        usize::try_from(bs).unwrap_or(4096),
                    )?;
                    node = ext4::first_extent_block(&blk);
                }
                _ => return Ok(None),
            }
        }
        Ok(None)
    }
}
