//! Filesystem geometry and metadata placement: groups, inode tables, bitmaps, journal.
//! Pure arithmetic over a block-usage bitmap; no bytes are written here.

use std::collections::BTreeMap;

use crate::features::Features;
use crate::{Error, Ext4Options, Ext4Request, Field, Invalid};

/// Where one group's metadata lives (absolute block numbers within the filesystem).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub(crate) struct GroupLoc {
    pub block_bitmap: u64,
    pub inode_bitmap: u64,
    pub inode_table: u64,
}

/// The used blocks as sorted, disjoint, non-touching runs `start → end` (a run-length set),
/// with a count of the used ones. Metadata and data are placed in runs, so a 16 TiB
/// filesystem (2^32 blocks, a 512 MiB bitset) costs a few thousand runs; lookups are
/// logarithmic in the runs.
#[derive(Clone, Debug)]
pub(crate) struct Bitmap {
    runs: BTreeMap<u64, u64>,
    len: u64,
    used: u64,
}

impl Bitmap {
    pub fn new(len: u64) -> Self {
        Bitmap {
            runs: BTreeMap::new(),
            len,
            used: 0,
        }
    }
    /// The run holding block `b`, as `(start, end)`.
    fn run_at(&self, b: u64) -> Option<(u64, u64)> {
        self.runs
            .range(..=b)
            .next_back()
            .filter(|(_, &e)| e > b)
            .map(|(&s, &e)| (s, e))
    }
    #[cfg(test)]
    pub fn get(&self, b: u64) -> bool {
        b >= self.len || self.run_at(b).is_some()
    }
    pub fn set(&mut self, b: u64) {
        self.set_range(b, 1);
    }
    /// Sets `start..start + len` (clamped to the bitmap), merging with the runs it touches.
    pub fn set_range(&mut self, start: u64, len: u64) {
        let end = start.saturating_add(len).min(self.len);
        if start >= end {
            return;
        }
        let (mut s, mut e) = (start, end);
        let mut covered = 0;
        // Every run that overlaps or touches [start, end].
        let touching: Vec<(u64, u64)> = self
            .runs
            .range(..=end)
            .rev()
            .take_while(|(_, &re)| re >= start)
            .map(|(&rs, &re)| (rs, re))
            .collect();
        for (rs, re) in touching {
            self.runs.remove(&rs);
            covered += re.min(end).saturating_sub(rs.max(start));
            s = s.min(rs);
            e = e.max(re);
        }
        self.used += (end - start) - covered;
        self.runs.insert(s, e);
    }
    /// First free block at or after `from`.
    pub fn next_free(&self, from: u64) -> Option<u64> {
        // Runs never touch, so the end of the run holding `from` is free.
        let b = self.run_at(from).map_or(from, |(_, e)| e);
        (b < self.len).then_some(b)
    }
    /// Length of the free run at `start`, at most `max`.
    pub fn free_run(&self, start: u64, max: u64) -> u64 {
        if start >= self.len || self.run_at(start).is_some() {
            return 0;
        }
        let next = self
            .runs
            .range(start..)
            .next()
            .map_or(self.len, |(&s, _)| s);
        (next - start).min(max)
    }
    /// First position at or after `from` with `n` contiguous free blocks, below `end`.
    pub fn find_run(&self, from: u64, n: u64, end: u64) -> Option<u64> {
        let mut b = from;
        loop {
            b = self.next_free(b)?;
            if b.checked_add(n)? > end.min(self.len) {
                return None;
            }
            let run = self.free_run(b, n);
            if run == n {
                return Some(b);
            }
            b += run;
        }
    }
    /// Total free blocks.
    pub fn free_total(&self) -> u64 {
        self.len - self.used
    }
    /// Sets, in `bits` (bit `k` of byte `k / 8` for block `start + k`), the used blocks of
    /// `start..start + count`; returns how many there are.
    pub fn fill_bits(&self, start: u64, count: u64, bits: &mut [u8]) -> u64 {
        let end = start.saturating_add(count).min(self.len);
        let first = self
            .runs
            .range(..=start)
            .next_back()
            .map_or(start, |(&s, _)| s);
        let mut n = 0;
        for (&rs, &re) in self.runs.range(first..end) {
            let (a, b) = (rs.max(start) - start, re.min(end).saturating_sub(start));
            if a < b {
                set_bits(bits, a, b);
                n += b - a;
            }
        }
        n
    }
}

/// Sets bits `a..b` of `bits` (little-endian bit order within each byte), a byte at a time
/// in the middle.
pub(crate) fn set_bits(bits: &mut [u8], a: u64, b: u64) {
    let mut k = a;
    while k < b && k % 8 != 0 {
        bits[(k / 8) as usize] |= 1 << (k % 8);
        k += 1;
    }
    let full = (b - k) / 8;
    let first = (k / 8) as usize;
    bits[first..first + full as usize].fill(0xff);
    k += full * 8;
    while k < b {
        bits[(k / 8) as usize] |= 1 << (k % 8);
        k += 1;
    }
}

/// The planned geometry of one filesystem.
#[derive(Clone, Debug)]
pub(crate) struct Geometry {
    pub bs: u64,
    pub blocks: u64,
    pub fdb: u64,
    pub bpg: u64,
    pub groups: u64,
    pub ipg: u64,
    /// Inode table blocks per group.
    #[expect(
        dead_code,
        reason = "kept beside the other per-group counts for debugging output"
    )]
    pub itb: u64,
    pub inode_size: u64,
    pub desc_size: u64,
    pub gdt_blocks: u64,
    pub feat: Features,
    pub loc: Vec<GroupLoc>,
    /// Journal runs `(start, len)`; empty without a journal.
    pub journal: Vec<(u64, u64)>,
    pub journal_blocks: u64,
    pub stride: u32,
    pub stripe_width: u32,
    pub reserved_blocks: u64,
    /// Blocks used by metadata placed so far.
    pub used: Bitmap,
    /// Where data allocation starts.
    pub data_start: u64,
    pub notes: Vec<String>,
}

/// The most blocks a planned filesystem may have: 2^32, 16 TiB with 4 KiB blocks. Planning
/// keeps one entry per group (131,072 at this limit) and the used blocks as runs, so the
/// bound keeps a spec's size from choosing how much memory planning takes.
pub(crate) const MAX_BLOCKS: u64 = 1 << 32;

/// flex_bg packs the metadata of 1 << this many groups together (`s_log_groups_per_flex`).
pub(crate) const LOG_GROUPS_PER_FLEX: u8 = 4;

/// Groups holding a superblock backup under `sparse_super`: 0, 1, powers of 3, 5, 7.
pub(crate) fn has_super(feat: &Features, g: u64) -> bool {
    if g <= 1 || !feat.sparse_super {
        return true;
    }
    for base in [3u64, 5, 7] {
        let mut p = base;
        while p < g {
            p *= base;
        }
        if p == g {
            return true;
        }
    }
    false
}

/// mke2fs's default journal size in blocks (`ext2fs_default_journal_size`).
pub(crate) fn default_journal_blocks(blocks: u64) -> Option<u64> {
    Some(match blocks {
        0..2048 => return None,
        2048..32768 => 1024,
        32768..262_144 => 4096,
        262_144..524_288 => 8192,
        524_288..4_194_304 => 16384,
        4_194_304..8_388_608 => 32768,
        8_388_608..16_777_216 => 65536,
        16_777_216..33_554_432 => 131_072,
        _ => 262_144,
    })
}

fn lcm(a: u64, b: u64) -> u64 {
    let (mut x, mut y) = (a, b);
    while y != 0 {
        (x, y) = (y, x % y);
    }
    a / x * b
}

/// What planning fixes first: the request, the block and inode sizes, the per-group
/// constants.
#[derive(Clone, Copy)]
struct Base<'a> {
    req: &'a Ext4Request,
    bs: u64,
    inode_size: u64,
    fdb: u64,
    bpg: u64,
    desc_size: u64,
}

/// The group count and per-group sizes, and the blocks they cover.
#[derive(Clone, Copy)]
struct Groups {
    blocks: u64,
    groups: u64,
    ipg: u64,
    itb: u64,
    gdt_blocks: u64,
}

/// The RAID hints and the erase block (in blocks) they come from.
struct Raid {
    e_blocks: u64,
    default_stride: u64,
    stride: u64,
    stripe_width: u32,
}

impl Geometry {
    /// Group `g`'s first block.
    pub fn group_start(&self, g: u64) -> u64 {
        self.fdb + g * self.bpg
    }
    /// Blocks in group `g` (the last may be short).
    pub fn group_len(&self, g: u64) -> u64 {
        (self.blocks - self.group_start(g)).min(self.bpg)
    }
    /// Total inode count.
    pub fn inodes(&self) -> u64 {
        self.ipg * self.groups
    }
    /// Erase-block alignment: the block at or after `b` whose absolute byte offset is a
    /// multiple of the erase block (or `b` itself when that cannot hold).
    fn align_up(req: &Ext4Request, bs: u64, b: u64) -> u64 {
        let e = req.erase_block_bytes;
        if e <= bs || e % bs != 0 || req.partition_start_bytes % bs != 0 {
            return b;
        }
        let e_blocks = e / bs;
        let p = req.partition_start_bytes / bs;
        (p + b).div_ceil(e_blocks) * e_blocks - p
    }
    /// First erase-block-aligned position at or after `from` with `n` free blocks.
    fn find_aligned_run(
        req: &Ext4Request,
        bs: u64,
        used: &Bitmap,
        from: u64,
        n: u64,
        end: u64,
    ) -> Option<u64> {
        let step = if req.erase_block_bytes > bs && req.erase_block_bytes % bs == 0 {
            req.erase_block_bytes / bs
        } else {
            1
        };
        let mut c = Self::align_up(req, bs, from);
        while c.checked_add(n)? <= end {
            if used.free_run(c, n) == n {
                return Some(c);
            }
            c += step;
        }
        None
    }
    fn is_aligned(req: &Ext4Request, bs: u64, b: u64) -> bool {
        let abs = req.partition_start_bytes + b * bs;
        abs % req.erase_block_bytes.max(bs) == 0
    }

    /// Plans the geometry. `inodes_min` is what the tree needs; `inodes_exact`, when given,
    /// is a previously planned count to reproduce.
    pub fn new(
        req: &Ext4Request,
        feat: Features,
        inodes_min: u64,
        inodes_exact: Option<u64>,
    ) -> Result<Geometry, Error> {
        let opts = &req.options;
        let mut feat = feat;
        let mut notes = Vec::new();
        opts.validate().map_err(Error::Invalid)?;
        let bs = u64::from(opts.block_size);
        let inode_size = u64::from(opts.inode_size);
        let size = req.partition_size_bytes;
        let blocks = Self::block_count(&feat, size, bs)?;
        let fdb = u64::from(bs == 1024);
        let bpg = 8 * bs;
        let desc_size = if feat.bit64 { 64 } else { 32 };
        let base = Base {
            req,
            bs,
            inode_size,
            fdb,
            bpg,
            desc_size,
        };
        // Resolve the journal size first (it depends only on the block count).
        let journal_blocks = Self::journal_size(opts, &mut feat, blocks, bs, &mut notes)?;
        let sizes = Self::size_groups(&base, &feat, blocks, inodes_min, inodes_exact, &mut notes)?;
        let Groups {
            blocks,
            groups,
            ipg,
            itb,
            gdt_blocks,
        } = sizes;
        let (mut used, loc, tables_aligned) = Self::place_tables(&base, &feat, &sizes)?;
        let journal = Self::place_journal(&base, &feat, &sizes, &mut used, journal_blocks)?;
        let data_start = used.next_free(loc[0].inode_table + itb).unwrap_or(fdb);
        let Raid {
            e_blocks,
            default_stride,
            stride,
            stripe_width,
        } = Self::raid_hints(req, bs)?;
        if req.partition_start_bytes % bs == 0 && !tables_aligned {
            notes.push(format!(
                "There is no room to start the first inode table on an erase-block boundary (it starts at block {} of {blocks}); that costs little and does not count against alignment.",
                loc[0].inode_table
            ));
        }
        if req.partition_start_bytes % bs != 0 {
            notes.push(format!(
                "The partition start {} is not a multiple of the {bs}-byte block: nothing inside can be aligned.",
                req.partition_start_bytes
            ));
        }
        if req.erase_block_bytes > bs && req.erase_block_bytes % bs == 0 {
            if default_stride == e_blocks {
                notes.push(format!(
                    "stride = stripe_width = erase block / block size = {e_blocks} unless set, so the allocator writes whole erase blocks."
                ));
            } else {
                notes.push(format!(
                    "stripe_width = erase block / block size = {e_blocks} and stride = {default_stride} unless set: ext4's stride field holds at most 65535, and {default_stride} divides the erase block."
                ));
            }
        }
        if feat.flex_bg {
            notes.push(
                "flex_bg packs the bitmaps and inode tables of 16 groups together; each pack of inode tables starts on an erase-block boundary."
                    .to_string(),
            );
        }
        if feat.has_journal {
            notes.push(format!(
                "The {journal_blocks}-block journal (sized like mke2fs) sits in the middle group, starting on an erase-block boundary."
            ));
        }
        Ok(Geometry {
            bs,
            blocks,
            fdb,
            bpg,
            groups,
            ipg,
            itb,
            inode_size,
            desc_size,
            gdt_blocks,
            feat,
            loc,
            journal,
            journal_blocks,
            stride: stride as u32,
            stripe_width,
            reserved_blocks: blocks * u64::from(opts.reserved_percent) / 100,
            used,
            data_start,
            notes,
        })
    }

    /// The block count of the partition, checked against ext4's limits and blockwise's.
    fn block_count(feat: &Features, size: u64, bs: u64) -> Result<u64, Error> {
        let blocks = size / bs;
        if !feat.bit64 && blocks > u64::from(u32::MAX) {
            return Err(Error::Invalid(Invalid::new(
                Field::Size,
                format!(
                    "{blocks} blocks need the 64bit feature; remove \"^64bit\" or use a smaller partition"
                ),
            )));
        }
        if blocks > MAX_BLOCKS {
            return Err(Error::Invalid(Invalid::new(
                Field::Size,
                format!(
                    "{blocks} blocks of {bs} bytes; blockwise makes ext4 filesystems of at most {MAX_BLOCKS} blocks ({} with {bs}-byte blocks): use a smaller partition",
                    blockwise_geometry::format_size(MAX_BLOCKS * bs)
                ),
            )));
        }
        if blocks < 64 {
            return Err(Error::NoSpace {
                more_blocks: 64 - blocks,
                more_inodes: 0,
                block_bytes: bs,
            });
        }
        Ok(blocks)
    }

    /// The journal size in blocks: the one asked for, or mke2fs's default; none (and the
    /// feature off) when the filesystem is too small for one.
    fn journal_size(
        opts: &Ext4Options,
        feat: &mut Features,
        blocks: u64,
        bs: u64,
        notes: &mut Vec<String>,
    ) -> Result<u64, Error> {
        let mut journal_blocks = 0;
        if feat.has_journal {
            journal_blocks = match opts.journal_size {
                Some(bytes) => {
                    let jb = bytes.div_ceil(bs);
                    if jb < 1024 || jb > blocks / 2 {
                        return Err(Error::Invalid(Invalid::new(
                            Field::JournalSize,
                            format!(
                                "journal of {jb} blocks must be at least 1024 blocks and at most half the filesystem ({} blocks)",
                                blocks / 2
                            ),
                        )));
                    }
                    jb
                }
                None => match default_journal_blocks(blocks) {
                    Some(j) => j,
                    None if opts.kind == crate::ExtKind::Ext3 => {
                        return Err(Error::Invalid(Invalid::new(
                            Field::Size,
                            format!(
                                "{blocks} blocks are too few for ext3's journal (mke2fs needs 2048): use a larger partition or ext4.block-size = 1024"
                            ),
                        )));
                    }
                    None => {
                        notes.push(format!(
                            "The filesystem has only {blocks} blocks, too few for a journal (mke2fs needs 2048): no journal."
                        ));
                        feat.has_journal = false;
                        0
                    }
                },
            };
        }
        Ok(journal_blocks)
    }

    /// The group count and inodes per group. A last group too small for its own metadata is
    /// left out (as mke2fs does), which shrinks `blocks`.
    fn size_groups(
        base: &Base<'_>,
        feat: &Features,
        blocks: u64,
        inodes_min: u64,
        inodes_exact: Option<u64>,
        notes: &mut Vec<String>,
    ) -> Result<Groups, Error> {
        let Base {
            req,
            bs,
            inode_size,
            fdb,
            bpg,
            desc_size,
        } = *base;
        let opts = &req.options;
        let size = req.partition_size_bytes;
        let mut blocks = blocks;
        let ipb = bs / inode_size;
        let ipg_unit = lcm(8, ipb);
        let ipg_max = (8 * bs) / ipg_unit * ipg_unit;
        if let Some(r) = opts.inode_ratio.filter(|&r| r < bs) {
            return Err(Error::Invalid(Invalid::new(
                Field::InodeRatio,
                format!(
                    "{r} bytes per inode is less than the {bs}-byte block: mke2fs makes smaller block groups for that, blockwise does not; use a ratio of at least {bs} or a smaller ext4.block-size"
                ),
            )));
        }
        let ratio = opts.inode_ratio.unwrap_or(match size {
            0..0x30_0000 => 8192,
            0x30_0000..0x2000_0000 => 4096,
            0x2000_0000..0x400_0000_0000 => 16384,
            0x400_0000_0000..0x1000_0000_0000 => 32768,
            _ => 65536,
        });
        let mut groups;
        let mut ipg;
        let mut itb;
        let mut gdt_blocks;
        loop {
            groups = (blocks - fdb).div_ceil(bpg);
            let wanted = match (inodes_exact, opts.inodes) {
                (Some(n), _) | (None, Some(n)) => n,
                (None, None) => (blocks * bs / ratio).max(inodes_min),
            };
            let wanted = wanted.max(16);
            ipg = wanted.div_ceil(groups).div_ceil(ipg_unit) * ipg_unit;
            if inodes_exact.is_none() && opts.inodes.is_none() {
                // mke2fs's rounding of a ratio's count (ext2fs_initialize): per group up to
                // whole inode-table blocks, then down to a multiple of 8.
                let by_ratio = (blocks * bs / ratio).div_ceil(groups).div_ceil(ipb) * ipb / 8 * 8;
                if by_ratio >= 16 && by_ratio * groups >= inodes_min && by_ratio <= ipg_max {
                    ipg = by_ratio;
                }
            }
            if ipg > ipg_max {
                if inodes_exact.is_none() && opts.inodes.is_none() && inodes_min <= ipg_max * groups
                {
                    ipg = ipg_max;
                } else {
                    let more = (ipg - ipg_max) * groups;
                    return Err(Error::NoSpace {
                        more_blocks: more.div_ceil(ipg_max) * bpg,
                        more_inodes: more,
                        block_bytes: bs,
                    });
                }
            }
            itb = (ipg * inode_size).div_ceil(bs);
            gdt_blocks = (groups * desc_size).div_ceil(bs);
            let last_len = blocks - fdb - (groups - 1) * bpg;
            let overhead = if has_super(feat, groups - 1) {
                1 + gdt_blocks
            } else {
                0
            } + 2
                + itb;
            if groups > 1 && last_len < overhead + 50 {
                blocks -= last_len;
                notes.push(format!(
                    "The last {last_len} blocks are left unused: too few for a block group (as mke2fs does)."
                ));
                continue;
            }
            break;
        }
        Ok(Groups {
            blocks,
            groups,
            ipg,
            itb,
            gdt_blocks,
        })
    }

    /// Marks the superblocks and group descriptors used and places each group's bitmaps
    /// and inode table (packed by flex_bg); says whether the first inode table starts on
    /// an erase-block boundary.
    fn place_tables(
        base: &Base<'_>,
        feat: &Features,
        sizes: &Groups,
    ) -> Result<(Bitmap, Vec<GroupLoc>, bool), Error> {
        let Base {
            req, bs, fdb, bpg, ..
        } = *base;
        let Groups {
            blocks,
            groups,
            itb,
            gdt_blocks,
            ..
        } = *sizes;
        let mut used = Bitmap::new(blocks);
        if fdb == 1 {
            used.set(0);
        }
        for g in 0..groups {
            if has_super(feat, g) {
                used.set_range(fdb + g * bpg, 1 + gdt_blocks);
            }
        }
        let mut loc = vec![GroupLoc::default(); groups as usize];
        let too_small = |_what: &str| Error::NoSpace {
            more_blocks: itb + 2 + 50,
            more_inodes: 0,
            block_bytes: bs,
        };
        // Where the first inode table could not go on an erase-block boundary (no room).
        let mut tables_aligned = true;
        if feat.flex_bg {
            let flex = 1u64 << LOG_GROUPS_PER_FLEX;
            let mut f0 = 0;
            while f0 < groups {
                let n = flex.min(groups - f0);
                let start = fdb + f0 * bpg;
                let bb = used
                    .find_run(start, n, blocks)
                    .ok_or_else(|| too_small("bitmaps"))?;
                used.set_range(bb, n);
                let ib = used
                    .find_run(bb + n, n, blocks)
                    .ok_or_else(|| too_small("bitmaps"))?;
                used.set_range(ib, n);
                let mut cur = ib + n;
                for (k, g) in (f0..f0 + n).enumerate() {
                    let found = if k == 0 {
                        Self::find_aligned_run(req, bs, &used, cur, itb, blocks)
                            .or_else(|| used.find_run(cur, itb, blocks))
                    } else {
                        used.find_run(cur, itb, blocks)
                    };
                    let it = match found {
                        Some(b) => b,
                        None => used
                            .find_run(ib + n, itb, blocks)
                            .ok_or_else(|| too_small("inode tables"))?,
                    };
                    if k == 0 && !Self::is_aligned(req, bs, it) {
                        tables_aligned = false;
                    }
                    used.set_range(it, itb);
                    loc[g as usize] = GroupLoc {
                        block_bitmap: bb + (g - f0),
                        inode_bitmap: ib + (g - f0),
                        inode_table: it,
                    };
                    cur = it + itb;
                }
                f0 += n;
            }
        } else {
            for g in 0..groups {
                let start = fdb + g * bpg;
                let end = start + (blocks - start).min(bpg);
                let bb = used
                    .next_free(start)
                    .filter(|&b| b + 2 <= end)
                    .ok_or_else(|| too_small("bitmaps"))?;
                used.set_range(bb, 2);
                let it = match Self::find_aligned_run(req, bs, &used, bb + 2, itb, end) {
                    Some(b) => b,
                    None => used
                        .find_run(bb + 2, itb, end)
                        .ok_or_else(|| too_small("inode table"))?,
                };
                if g == 0 && !Self::is_aligned(req, bs, it) {
                    tables_aligned = false;
                }
                used.set_range(it, itb);
                loc[g as usize] = GroupLoc {
                    block_bitmap: bb,
                    inode_bitmap: bb + 1,
                    inode_table: it,
                };
            }
        }
        Ok((used, loc, tables_aligned))
    }

    /// Places the journal: in the middle group (as mke2fs), on an erase-block boundary, in
    /// free runs when no contiguous one is left. Empty without a journal.
    fn place_journal(
        base: &Base<'_>,
        feat: &Features,
        sizes: &Groups,
        used: &mut Bitmap,
        journal_blocks: u64,
    ) -> Result<Vec<(u64, u64)>, Error> {
        let Base {
            req, bs, fdb, bpg, ..
        } = *base;
        let Groups { blocks, groups, .. } = *sizes;
        // The journal: in the middle group (as mke2fs), on an erase-block boundary.
        let mut journal = Vec::new();
        if feat.has_journal {
            let free = used.free_total();
            if free < journal_blocks {
                return Err(Error::NoSpace {
                    more_blocks: journal_blocks - free,
                    more_inodes: 0,
                    block_bytes: bs,
                });
            }
            let mid = if groups > 1 {
                fdb + (groups / 2) * bpg
            } else {
                fdb
            };
            let first_free = used.next_free(mid).unwrap_or(fdb);
            let start = Self::find_aligned_run(req, bs, used, first_free, journal_blocks, blocks)
                .or_else(|| used.find_run(first_free, journal_blocks, blocks))
                .or_else(|| used.find_run(fdb, journal_blocks, blocks));
            if let Some(s) = start {
                journal.push((s, journal_blocks));
                used.set_range(s, journal_blocks);
            } else {
                // Not contiguous: take free runs from the goal on, wrapping around.
                let mut left = journal_blocks;
                let mut cur = first_free;
                let mut wrapped = false;
                while left > 0 {
                    match used.next_free(cur) {
                        Some(b) => {
                            let run = used.free_run(b, left);
                            journal.push((b, run));
                            used.set_range(b, run);
                            left -= run;
                            cur = b + run;
                        }
                        None if !wrapped => {
                            wrapped = true;
                            cur = fdb;
                        }
                        None => break,
                    }
                }
            }
        }
        Ok(journal)
    }

    /// The RAID hints (stride, stripe width) from the erase block unless set.
    fn raid_hints(req: &Ext4Request, bs: u64) -> Result<Raid, Error> {
        let opts = &req.options;
        // RAID hints.
        let e_blocks = (req.erase_block_bytes / bs).max(1);
        // The default stride is one erase block, capped to the largest power of two that
        // ext4's 16-bit field holds (32768 blocks: 128 MiB of 4 KiB blocks), which still
        // divides a larger power-of-two erase block (256 MiB).
        let default_stride = if e_blocks > 0xffff { 1 << 15 } else { e_blocks };
        let stride = opts.stride.map_or(default_stride, u64::from);
        let stripe_width = opts.stripe_width.map_or(e_blocks, u64::from);
        if stride > 0xffff {
            return Err(Error::Invalid(Invalid::new(
                Field::Stride,
                format!(
                    "stride {stride} blocks does not fit ext4's 16-bit field; set ext4.stride or a larger block size"
                ),
            )));
        }
        let stripe_width = u32::try_from(stripe_width).map_err(|_| {
            Error::Invalid(Invalid::new(
                Field::StripeWidth,
                "stripe width does not fit 32 bits",
            ))
        })?;
        Ok(Raid {
            e_blocks,
            default_stride,
            stride,
            stripe_width,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backup_groups() {
        let f = Features {
            sparse_super: true,
            ..Features::default()
        };
        let b: Vec<u64> = (0..130).filter(|&g| has_super(&f, g)).collect();
        assert_eq!(b, [0, 1, 3, 5, 7, 9, 25, 27, 49, 81, 125]);
    }

    #[test]
    fn journal_sizes_like_mke2fs() {
        assert_eq!(default_journal_blocks(2047), None);
        assert_eq!(default_journal_blocks(65536), Some(4096));
        assert_eq!(default_journal_blocks(262_144), Some(8192));
        assert_eq!(default_journal_blocks(1 << 20), Some(16384));
    }

    #[test]
    fn bitmap_runs() {
        let mut b = Bitmap::new(200);
        b.set_range(0, 70);
        b.set(75);
        assert_eq!(b.next_free(0), Some(70));
        assert_eq!(b.find_run(0, 5, 200), Some(70));
        assert_eq!(b.find_run(0, 6, 200), Some(76));
        assert_eq!(b.free_total(), 200 - 71);
        assert_eq!(b.find_run(190, 20, 200), None);
        // Word-at-a-time ranges count each block once, overlaps and the end clamp included.
        b.set_range(60, 140);
        assert_eq!(b.free_total(), 0);
        let mut c = Bitmap::new(300);
        c.set_range(3, 200);
        c.set_range(100, 500);
        c.set(1);
        c.set(1);
        assert_eq!(c.free_total(), 2);
        assert_eq!(c.next_free(0), Some(0));
        assert_eq!(c.next_free(1), Some(2));
        assert_eq!(c.next_free(3), None);
        let mut d = Bitmap::new(1000);
        d.set(700);
        assert_eq!(d.free_run(5, 1000), 695);
        assert_eq!(d.free_run(5, 100), 100);
        assert_eq!(d.free_run(701, 1000), 299);
        assert_eq!(d.free_run(700, 10), 0);
        assert_eq!(d.free_run(64, 64), 64);
        assert!(d.get(700) && !d.get(699) && d.get(1000));
    }

    /// The run set against a plain bitset: random ranges set, every query the same.
    #[test]
    fn runs_match_a_bitset() {
        let mut seed = 0x2545_f491_4f6c_dd1du64;
        let mut rnd = |m: u64| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed % m
        };
        for _ in 0..50 {
            let len = 1 + rnd(600);
            let mut b = Bitmap::new(len);
            let mut plain = vec![false; len as usize];
            for _ in 0..rnd(20) {
                let (s, n) = (rnd(len + 10), rnd(80));
                b.set_range(s, n);
                for k in s..(s + n).min(len) {
                    plain[k as usize] = true;
                }
            }
            let used = plain.iter().filter(|&&x| x).count() as u64;
            assert_eq!(b.free_total(), len - used);
            for from in 0..len {
                let next = (from..len).find(|&k| !plain[k as usize]);
                assert_eq!(b.next_free(from), next, "next_free({from})");
                let run = (from..len).take_while(|&k| !plain[k as usize]).count() as u64;
                assert_eq!(b.free_run(from, 1000), run, "free_run({from})");
                assert_eq!(b.get(from), plain[from as usize]);
            }
            let (start, count) = (rnd(len), rnd(len));
            let mut bits = vec![0u8; count.div_ceil(8) as usize + 1];
            let n = b.fill_bits(start, count, &mut bits);
            for k in 0..count {
                let want = start + k < len && plain[(start + k) as usize];
                assert_eq!(bits[(k / 8) as usize] >> (k % 8) & 1 == 1, want, "bit {k}");
            }
            assert_eq!(
                n,
                (start..(start + count).min(len))
                    .filter(|&k| plain[k as usize])
                    .count() as u64
            );
        }
    }
}
