//! F2FS superblock parser, safe on hostile bytes, and the F2FS alignment findings shared with
//! [`plan_findings`](crate::plan_findings).
//!
//! ```text
//! block 0 and block 1 (4 KiB each) of the volume: a superblock at byte 1024 of each
//! 0x000 magic 0xF2F52010   0x008 log_sectorsize  0x00C log_sectors_per_block
//! 0x010 log_blocksize (12)  0x014 log_blocks_per_seg (9)  0x018 segs_per_sec  0x01C secs_per_zone
//! 0x024 block_count u64     0x02C section_count  0x030 segment_count … 0x044 segment_count_main
//! 0x048 segment0_blkaddr  0x04C cp  0x050 sit  0x054 nat  0x058 ssa  0x05C main_blkaddr
//! 0x06C uuid[16]  0x07C volume_name[512] (UTF-16LE)  0x684 version[256]  0x784 init_version[256]
//! 0x884 feature  0xBFC crc (with the sb_checksum feature)
//! ```
//! The areas follow each other: checkpoint (2 segments) at segment0, then SIT, NAT, SSA and
//! the main area, each a whole number of segments; the kernel refuses a superblock where they
//! do not (`sanity_check_area_boundary`), and so does this parser.

mod check;
pub mod raw;

use blockwise_geometry::fsplan::f2fs::{F2FS_BLOCK, F2FS_SUPER_OFFSET};
use blockwise_geometry::{alignment_of, format_size, F2fsPlan};
use zerocopy::FromBytes;

use crate::num::is_multiple;
use crate::{Finding, FindingCode, Severity};
use raw::SuperblockRaw;

/// The F2FS magic number.
pub const MAGIC: u32 = 0xF2F5_2010;
/// The `sb_checksum` feature bit: the superblock carries a CRC at `checksum_offset`.
pub const FEATURE_SB_CHKSUM: u32 = 0x2000;
/// Where the `crc` field is (and how many bytes it covers).
pub const CRC_OFFSET: usize = 3068;

/// Why a superblock is refused.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Corrupt(pub String);

impl core::fmt::Display for Corrupt {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(&self.0)
    }
}

/// A parsed, checked F2FS superblock.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Superblock {
    /// `log_sectorsize`.
    pub log_sectorsize: u32,
    /// `log_blocks_per_seg` (9).
    pub log_blocks_per_seg: u32,
    /// `segs_per_sec`.
    pub segs_per_sec: u32,
    /// `secs_per_zone`.
    pub secs_per_zone: u32,
    /// `block_count`.
    pub block_count: u64,
    /// `section_count`.
    pub section_count: u32,
    /// `segment_count`.
    pub segment_count: u32,
    /// `segment_count_main`.
    pub segment_count_main: u32,
    /// `segment0_blkaddr`.
    pub segment0_blkaddr: u32,
    /// `main_blkaddr`.
    pub main_blkaddr: u32,
    /// The label (UTF-16, control characters shown as `?`); `None` when empty.
    pub label: Option<String>,
    /// The UUID, lowercase with dashes as `blkid` prints it.
    pub uuid: String,
    /// `feature`.
    pub feature: u32,
}

impl Superblock {
    /// Segment size in bytes.
    #[must_use]
    pub fn segment_bytes(&self) -> u64 {
        F2FS_BLOCK.checked_shl(self.log_blocks_per_seg).unwrap_or(0)
    }

    /// Section size in bytes.
    #[must_use]
    pub fn section_bytes(&self) -> u64 {
        self.segment_bytes()
            .saturating_mul(u64::from(self.segs_per_sec))
    }

    /// The superblock as the plan shape, for a volume starting at `start` (absolute).
    #[must_use]
    pub fn to_plan(&self, start: u64, erase_block: u64) -> F2fsPlan {
        let section = self.section_bytes();
        let mut plan = F2fsPlan {
            kind: "f2fs".into(),
            label: self.label.clone(),
            uuid: Some(self.uuid.clone()),
            block_bytes: 4096,
            blocks: self.block_count,
            segment_bytes: self.segment_bytes(),
            segments_per_section: self.segs_per_sec,
            sections_per_zone: self.secs_per_zone,
            section_bytes: section,
            zone_bytes: section.saturating_mul(u64::from(self.secs_per_zone)),
            segments: self.segment_count,
            main_segments: self.segment_count_main,
            segment0_start_bytes: start
                .saturating_add(u64::from(self.segment0_blkaddr).saturating_mul(F2FS_BLOCK)),
            main_start_bytes: start
                .saturating_add(u64::from(self.main_blkaddr).saturating_mul(F2FS_BLOCK)),
            aligned: false,
            notes: Vec::new(),
        };
        plan.aligned = plan.alignment_holds(erase_block);
        plan
    }
}

/// F2FS's superblock CRC (`f2fs_cal_crc32`): CRC-32 (reflected, 0xEDB88320) starting from
/// the magic number, without a final inversion.
#[must_use]
pub fn crc32(bytes: &[u8]) -> u32 {
    let mut crc = MAGIC;
    for &b in bytes {
        crc ^= u32::from(b);
        for _ in 0..8 {
            crc = (crc >> 1) ^ if crc & 1 != 0 { 0xEDB8_8320 } else { 0 };
        }
    }
    crc
}

/// Decodes the UTF-16LE label up to its first NUL; control characters become `?`.
fn label(units: &[zerocopy::little_endian::U16]) -> Option<String> {
    let s: String = char::decode_utf16(units.iter().map(|u| u.get()).take_while(|&u| u != 0))
        .map(|c| match c {
            Ok(c) if !c.is_control() => c,
            _ => '?',
        })
        .collect();
    (!s.is_empty()).then_some(s)
}

fn uuid(b: &[u8; 16]) -> String {
    let h: Vec<String> = b.iter().map(|x| format!("{x:02x}")).collect();
    let part = |r: core::ops::Range<usize>| h.get(r).map(|v| v.concat()).unwrap_or_default();
    format!(
        "{}-{}-{}-{}-{}",
        part(0..4),
        part(4..6),
        part(6..8),
        part(8..10),
        part(10..16)
    )
}

/// Parses the superblock at byte [`F2FS_SUPER_OFFSET`] of `block` (one 4 KiB block of the
/// volume: block 0 holds the primary copy, block 1 the backup).
pub fn parse_superblock(block: &[u8]) -> Result<Superblock, Corrupt> {
    let off = usize::try_from(F2FS_SUPER_OFFSET).unwrap_or(usize::MAX);
    let bytes = block
        .get(off..)
        .ok_or_else(|| Corrupt("the volume is shorter than its superblock".into()))?;
    let (r, _) = SuperblockRaw::ref_from_prefix(bytes)
        .map_err(|_| Corrupt("the volume is shorter than its superblock".into()))?;
    if r.magic.get() != MAGIC {
        return Err(Corrupt(format!("bad magic 0x{:08x}", r.magic.get())));
    }
    let bad = |what: String| Err(Corrupt(what));
    let log_sector = r.log_sectorsize.get();
    let log_block = r.log_blocksize.get();
    if log_block != 12 {
        return bad(format!(
            "log_blocksize {log_block}: Linux mounts only 4096-byte F2FS blocks"
        ));
    }
    if !(9..=12).contains(&log_sector)
        || log_sector.checked_add(r.log_sectors_per_block.get()) != Some(log_block)
    {
        return bad(format!(
            "sector size 2^{log_sector} with 2^{} sectors per block does not make a 4096-byte block",
            r.log_sectors_per_block.get()
        ));
    }
    let log_seg = r.log_blocks_per_seg.get();
    if log_seg != 9 {
        return bad(format!(
            "log_blocks_per_seg {log_seg}: F2FS segments are 512 blocks"
        ));
    }
    let (s, z) = (r.segs_per_sec.get(), r.secs_per_zone.get());
    let segs = r.segment_count.get();
    if s == 0 || z == 0 || u64::from(s).saturating_mul(u64::from(z)) > u64::from(segs) {
        return bad(format!(
            "{s} segments per section and {z} sections per zone do not fit {segs} segments"
        ));
    }
    let block_count = r.block_count.get();
    let bps = 512u64;
    let seg0 = u64::from(r.segment0_blkaddr.get());
    if u64::from(r.cp_blkaddr.get()) != seg0 {
        return bad(format!(
            "the checkpoint (block {}) is not at segment0 (block {seg0})",
            r.cp_blkaddr.get()
        ));
    }
    // The areas, in order, each a whole number of segments after the previous one.
    let areas = [
        ("SIT", r.sit_blkaddr.get(), r.segment_count_ckpt.get()),
        ("NAT", r.nat_blkaddr.get(), r.segment_count_sit.get()),
        ("SSA", r.ssa_blkaddr.get(), r.segment_count_nat.get()),
        ("main area", r.main_blkaddr.get(), r.segment_count_ssa.get()),
    ];
    let mut at = seg0;
    for (name, addr, prev_segments) in areas {
        let want = at.saturating_add(u64::from(prev_segments).saturating_mul(bps));
        if u64::from(addr) != want {
            return bad(format!(
                "the {name} starts at block {addr}, but the area before it ends at block {want}"
            ));
        }
        at = want;
    }
    let main_segs = r.segment_count_main.get();
    let end = at.saturating_add(u64::from(main_segs).saturating_mul(bps));
    let seg_end = seg0.saturating_add(u64::from(segs).saturating_mul(bps));
    if end > seg_end || seg_end > block_count {
        return bad(format!(
            "the main area ends at block {end} and the segments at {seg_end}, past the {block_count} blocks of the volume"
        ));
    }
    if u64::from(r.section_count.get()).saturating_mul(u64::from(s)) != u64::from(main_segs) {
        return bad(format!(
            "{} sections of {s} segments are not the {main_segs} segments of the main area",
            r.section_count.get()
        ));
    }
    let feature = r.feature.get();
    if feature & FEATURE_SB_CHKSUM != 0 {
        let covered = bytes.get(..CRC_OFFSET).unwrap_or_default();
        let want = crc32(covered);
        if r.checksum_offset.get() != 3068 || r.crc.get() != want {
            return bad(format!(
                "superblock checksum 0x{:08x} at offset {}, computed 0x{want:08x} over 3068 bytes",
                r.crc.get(),
                r.checksum_offset.get()
            ));
        }
    }
    Ok(Superblock {
        log_sectorsize: log_sector,
        log_blocks_per_seg: log_seg,
        segs_per_sec: s,
        secs_per_zone: z,
        block_count,
        section_count: r.section_count.get(),
        segment_count: segs,
        segment_count_main: main_segs,
        segment0_blkaddr: r.segment0_blkaddr.get(),
        main_blkaddr: r.main_blkaddr.get(),
        label: label(&r.volume_name),
        uuid: uuid(&r.uuid),
        feature,
    })
}

fn finding(severity: Severity, code: FindingCode, i: u32, message: String) -> Finding {
    Finding {
        severity,
        code,
        partition: Some(i),
        message,
    }
}

/// The alignment findings of an F2FS volume (planned or found): sections that are not a whole
/// number of erase blocks and a main area off the erase block (warnings, errors with
/// `strict`), segment0 off the erase block (info).
pub(crate) fn f2fs_alignment(i: u32, f: &F2fsPlan, e: u64, strict: bool) -> Vec<Finding> {
    let mut out = Vec::new();
    let eb = format_size(e);
    if !is_multiple(f.section_bytes, e) {
        let want = crate::num::div(e, f.segment_bytes).max(1);
        out.push(finding(
            Severity::error_if(strict),
            FindingCode::F2fsSectionNotAligned,
            i,
            format!(
                "partition {i} (f2fs): sections of {} ({} segment{}) are not a whole number of {eb} erase blocks — F2FS cleans a section at a time, and a section that shares an erase block with another makes each cleaning rewrite parts of erase blocks; reformat with mkfs.f2fs -s {want} (or blockwise build)",
                format_size(f.section_bytes),
                f.segments_per_section,
                if f.segments_per_section == 1 { "" } else { "s" }
            ),
        ));
    }
    if !is_multiple(f.main_start_bytes, e) {
        out.push(finding(
            Severity::error_if(strict),
            FindingCode::F2fsMainNotAligned,
            i,
            format!(
                "partition {i} (f2fs): the main area starts at {} ({} aligned), not on the {eb} erase block — every segment of file data straddles erase blocks; mkfs.f2fs aligns it to the zone from the partition start: start the partition on the erase block and make the zone a multiple of it (-s/-z)",
                format_size(f.main_start_bytes),
                format_size(alignment_of(f.main_start_bytes))
            ),
        ));
    } else if !is_multiple(f.segment0_start_bytes, e) {
        out.push(finding(
            Severity::Info,
            FindingCode::F2fsSegment0NotAligned,
            i,
            format!(
                "partition {i} (f2fs): segment0 (the checkpoint) starts at {}, not on the {eb} erase block",
                format_size(f.segment0_start_bytes)
            ),
        ));
    }
    out
}

#[cfg(test)]
#[expect(clippy::indexing_slicing, clippy::unwrap_used, reason = "tests")]
mod tests {
    use super::*;
    use zerocopy::IntoBytes;

    /// A superblock as mkfs.f2fs 1.15 writes it for 256 MiB with `-s 2` (dump.f2fs values).
    pub(crate) fn sample() -> Vec<u8> {
        let mut r = SuperblockRaw::new_zeroed_sb();
        r.magic.set(MAGIC);
        r.major_ver.set(1);
        r.minor_ver.set(15);
        r.log_sectorsize.set(9);
        r.log_sectors_per_block.set(3);
        r.log_blocksize.set(12);
        r.log_blocks_per_seg.set(9);
        r.segs_per_sec.set(2);
        r.secs_per_zone.set(1);
        r.block_count.set(65536);
        r.section_count.set(59);
        r.segment_count.set(126);
        r.segment_count_ckpt.set(2);
        r.segment_count_sit.set(2);
        r.segment_count_nat.set(2);
        r.segment_count_ssa.set(2);
        r.segment_count_main.set(118);
        r.segment0_blkaddr.set(1024);
        r.cp_blkaddr.set(1024);
        r.sit_blkaddr.set(2048);
        r.nat_blkaddr.set(3072);
        r.ssa_blkaddr.set(4096);
        r.main_blkaddr.set(5120);
        r.uuid = [
            0x01, 0x23, 0x45, 0x67, 0x89, 0xab, 0xcd, 0xef, 0, 1, 2, 3, 4, 5, 6, 7,
        ];
        for (d, c) in r.volume_name.iter_mut().zip("rootfs".encode_utf16()) {
            d.set(c);
        }
        let mut block = vec![0u8; 4096];
        block[1024..1024 + 3072].copy_from_slice(r.as_bytes());
        block
    }

    #[test]
    fn parses_mkfs_values() {
        let sb = parse_superblock(&sample()).unwrap();
        assert_eq!(sb.label.as_deref(), Some("rootfs"));
        assert_eq!(sb.uuid, "01234567-89ab-cdef-0001-020304050607");
        let p = sb.to_plan(4 << 20, 4 << 20);
        assert_eq!(p.section_bytes, 4 << 20);
        assert_eq!(p.main_start_bytes, (4 << 20) + 5120 * 4096);
        assert!(p.aligned);
        assert!(f2fs_alignment(1, &p, 4 << 20, true).is_empty());
        let off = f2fs_alignment(1, &p, 16 << 20, true);
        assert_eq!(off.len(), 2, "{off:?}");
    }

    #[test]
    fn refuses_broken_superblocks() {
        let base = sample();
        // (offset, value): every field the parser relies on, broken.
        for (o, v) in [
            (0usize, 0u32),
            (0x10, 11),
            (0x08, 13),
            (0x14, 8),
            (0x18, 0),
            (0x1c, 0),
            (0x4c, 7),
            (0x50, 2049),
            (0x5c, 5121),
            (0x44, 200),
            (0x2c, 58),
            (0x24, 100),
        ] {
            let mut b = base.clone();
            b[1024 + o..1024 + o + 4].copy_from_slice(&v.to_le_bytes());
            assert!(parse_superblock(&b).is_err(), "offset {o:#x}");
        }
        assert!(parse_superblock(&base[..2000]).is_err());
        // The checksum feature: a wrong CRC is refused, the right one taken.
        let mut b = base.clone();
        b[1024 + 0x884..1024 + 0x888].copy_from_slice(&FEATURE_SB_CHKSUM.to_le_bytes());
        b[1024 + 0x20..1024 + 0x24].copy_from_slice(&3068u32.to_le_bytes());
        assert!(parse_superblock(&b).is_err());
        let crc = crc32(&b[1024..1024 + 3068]);
        b[1024 + 3068..1024 + 3072].copy_from_slice(&crc.to_le_bytes());
        assert!(parse_superblock(&b).is_ok());
    }
}
