//! The F2FS geometry a plan carries, the `f2fs = { … }` options, and mkfs.f2fs's layout
//! arithmetic (f2fs-tools 1.15, `f2fs_prepare_super_block`) as a pure function, so that
//! `plan` says where segment0 and the main area will be before `mkfs.f2fs` runs, and
//! `verify` of the build finds the same numbers.
//!
//! F2FS writes in 2 MiB segments (512 blocks of 4 KiB), cleans (garbage-collects) a
//! *section* of segments at a time, and groups sections into *zones*. mkfs.f2fs starts
//! segment0 (the first checkpoint pack) on the first zone boundary after the two superblock
//! blocks, counted from the start of the device it formats — here a partition that starts on
//! the erase block — and rounds the metadata (checkpoint, SIT, NAT, SSA) up to whole zones, so
//! the main area starts on a zone boundary too. A section of exactly one erase block therefore
//! makes every cleaning free whole erase blocks, and puts segment0 and the main area on
//! erase-block boundaries measured from the start of the disk.

use serde::{Deserialize, Serialize};

use crate::de::opt_uint;
use crate::units::format_size;

/// F2FS block size (the only one Linux mounts).
pub const F2FS_BLOCK: u64 = 4096;
/// Blocks per segment (`log_blocks_per_seg` = 9).
pub const F2FS_BLOCKS_PER_SEGMENT: u64 = 512;
/// Segment size: 2 MiB.
pub const F2FS_SEGMENT: u64 = F2FS_BLOCK * F2FS_BLOCKS_PER_SEGMENT;
/// The superblock's offset inside each of the first two blocks.
pub const F2FS_SUPER_OFFSET: u64 = 1024;
/// Most segments in one zone: mkfs.f2fs keeps the zone size in 32 bits.
pub const MAX_SEGMENTS_PER_ZONE: u32 = 1024;

const MAX_OPT: u64 = MAX_SEGMENTS_PER_ZONE as u64;

/// `partition.f2fs`: options of the F2FS backend (`mkfs.f2fs` + `sload.f2fs`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(default, deny_unknown_fields, rename_all = "kebab-case")]
pub struct F2fsOptions {
    /// Segments (2 MiB) per section (`mkfs.f2fs -s`); default: the erase block / 2 MiB, at
    /// least 1, so a section is the erase block.
    #[serde(deserialize_with = "opt_uint::<_, u32, MAX_OPT>")]
    pub segments_per_section: Option<u32>,
    /// Sections per zone (`mkfs.f2fs -z`); default 1.
    #[serde(deserialize_with = "opt_uint::<_, u32, MAX_OPT>")]
    pub sections_per_zone: Option<u32>,
    /// Take owners (uid, gid) from the `contents` tree (`sload.f2fs -P`); default: every
    /// file belongs to root, as sload.f2fs writes it without `-P`.
    pub preserve_owners: bool,
}

impl F2fsOptions {
    /// Checks the options on their own: `Err((key, reason))` with the key inside `f2fs`.
    pub fn validate(&self) -> Result<(), (&'static str, String)> {
        if self.segments_per_section == Some(0) {
            return Err(("segments-per-section", "must be at least 1".into()));
        }
        if self.sections_per_zone == Some(0) {
            return Err(("sections-per-zone", "must be at least 1".into()));
        }
        let s = self.segments_per_section.unwrap_or(1);
        let z = self.sections_per_zone.unwrap_or(1);
        if s.saturating_mul(z) > MAX_SEGMENTS_PER_ZONE {
            return Err((
                "sections-per-zone",
                format!(
                    "a zone of {s} × {z} segments is {}; mkfs.f2fs holds at most {MAX_SEGMENTS_PER_ZONE} segments ({}) per zone",
                    format_size(u64::from(s) * u64::from(z) * F2FS_SEGMENT),
                    format_size(u64::from(MAX_SEGMENTS_PER_ZONE) * F2FS_SEGMENT)
                ),
            ));
        }
        Ok(())
    }
}

/// What the F2FS planner needs to know.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct F2fsRequest {
    /// Absolute start of the partition (on the erase block).
    pub partition_start_bytes: u64,
    /// Partition size.
    pub partition_size_bytes: u64,
    /// The erase block.
    pub erase_block_bytes: u64,
    /// The options.
    pub options: F2fsOptions,
    /// The label (UTF-16 in the superblock, at most 512 units).
    pub label: Option<String>,
    /// The UUID, as `mkfs.f2fs -U` takes it.
    pub uuid: String,
}

/// The planned (or found) geometry of an F2FS filesystem. `*_bytes` offsets are absolute
/// from the start of the disk.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct F2fsPlan {
    /// `f2fs`.
    pub kind: String,
    /// Volume label.
    pub label: Option<String>,
    /// Filesystem UUID.
    pub uuid: Option<String>,
    /// Block size (4096).
    pub block_bytes: u32,
    /// Blocks in the filesystem (`block_count`).
    pub blocks: u64,
    /// Segment size (2 MiB).
    pub segment_bytes: u64,
    /// Segments per section (`segs_per_sec`).
    pub segments_per_section: u32,
    /// Sections per zone (`secs_per_zone`).
    pub sections_per_zone: u32,
    /// Section size: what F2FS cleans at a time.
    pub section_bytes: u64,
    /// Zone size.
    pub zone_bytes: u64,
    /// Segments from segment0 to the end (`segment_count`).
    pub segments: u32,
    /// Segments of the main area (`segment_count_main`).
    pub main_segments: u32,
    /// Absolute offset of segment0 (the first checkpoint pack).
    pub segment0_start_bytes: u64,
    /// Absolute offset of the main area (file data and nodes).
    pub main_start_bytes: u64,
    /// Alignment holds, by [`F2fsPlan::alignment_holds`].
    pub aligned: bool,
    /// One sentence per choice, explaining it.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
}

impl F2fsPlan {
    /// The one alignment rule, for the planner and `verify` alike: a section is a whole
    /// number of erase blocks (one, when the erase block is at least a segment), and segment0
    /// and the main area start on the erase block, measured from the disk start.
    #[must_use]
    pub fn alignment_holds(&self, erase_block: u64) -> bool {
        let on = |v: u64| erase_block != 0 && v % erase_block == 0;
        on(self.section_bytes) && on(self.segment0_start_bytes) && on(self.main_start_bytes)
    }
}

/// The layout `mkfs.f2fs` (1.15) gives a device of `size_bytes` with these section and zone
/// sizes, block addresses relative to the device start.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct F2fsLayout {
    /// `block_count`.
    pub blocks: u64,
    /// `segment0_blkaddr`.
    pub segment0_blkaddr: u32,
    /// `main_blkaddr`.
    pub main_blkaddr: u32,
    /// `segment_count`.
    pub segments: u32,
    /// `segment_count_main`.
    pub main_segments: u32,
    /// `section_count`.
    pub sections: u32,
    /// The checkpoint's `rsvd_segment_count`: segments kept free for cleaning.
    pub reserved_segments: u32,
}

impl F2fsLayout {
    /// Segments sload.f2fs can start writing into on the empty volume: the main area less
    /// the six current segments (the logs mkfs.f2fs opens) and `reserved + 1`. f2fs-tools
    /// (`find_next_free_block`) takes an empty segment only while more than `reserved + 1`
    /// are free, for the blocks it writes and again when it moves its six logs at the end.
    /// Negative when even that margin is missing.
    #[must_use]
    pub fn sload_room(&self) -> i64 {
        i64::from(self.main_segments) - CURSEGS_I64 - i64::from(self.reserved_segments) - 1
    }

    /// Whether sload.f2fs can store a one-file tree in the empty volume
    /// ([`MIN_SLOAD_ROOM`]).
    #[must_use]
    pub fn loadable(&self) -> bool {
        self.sload_room() >= MIN_SLOAD_ROOM
    }
}

/// The least [`F2fsLayout::sload_room`] with which sload.f2fs (1.15) stores a tree of one
/// small file, measured by sweeping sizes with 1, 2, 4 and 8 segments per section: an empty
/// tree needs 3 (moving the hot data and hot node logs, which hold the root, takes a segment
/// each, and the last move still needs one more free than reserved), a file's inode one more.
/// With less, sload.f2fs stops on an assertion (`Can't find free block`, or
/// `move_one_curseg_info`) and leaves a volume fsck.f2fs rejects.
pub const MIN_SLOAD_ROOM: i64 = 4;

/// Why [`mkfs_layout`] has no layout: mkfs.f2fs would refuse the device.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum F2fsTooSmall {
    /// Fewer segments than F2FS's minimum, or not even segment0 fits.
    Segments,
    /// Six zones or fewer for the main area (mkfs.f2fs: "Need more zones").
    Zones,
    /// The main area cannot hold the six current segments plus the reserved (GC) segments.
    Reserved,
}

/// `SIT_ENTRY_PER_BLOCK`: 4096 / 74.
const SIT_ENTRY_PER_BLOCK: u64 = 55;
/// `NAT_ENTRY_PER_BLOCK`: 4096 / 9.
const NAT_ENTRY_PER_BLOCK: u64 = 455;
/// `MAX_SIT_BITMAP_SIZE` for 512-block segments.
const MAX_SIT_BITMAP_SIZE: u64 = 19072;
/// `MAX_SIT_BITMAP_SIZE_IN_CKPT` = 4092 − 192 − 64.
const MAX_SIT_BITMAP_SIZE_IN_CKPT: u64 = 3836;
/// `MAX_BITMAP_SIZE_IN_CKPT` = 4092 − 192.
const MAX_BITMAP_SIZE_IN_CKPT: u64 = 3900;
/// `NR_CURSEG_TYPE`.
const CURSEGS: u64 = 6;
/// [`CURSEGS`] as a signed count.
const CURSEGS_I64: i64 = 6;
/// `F2FS_MIN_SEGMENTS`.
const MIN_SEGMENTS: u64 = 9;

/// The overprovision ratio mkfs.f2fs picks (`get_best_overprovision`), the same
/// floating-point steps in the same order. `main_segments` decides the candidate range,
/// `usable` and `per_section` the reserved segments.
fn best_overprovision(main_segments: u64, usable: u64, per_section: u64) -> f64 {
    let (mut candidate, end, diff) = if main_segments < 256 {
        (10.0_f64, 95.0_f64, 5.0_f64)
    } else {
        (0.01, 10.0, 0.01)
    };
    let usable = usable as f64;
    let per = per_section as f64;
    let (mut max_ovp, mut max_space) = (0.0_f64, 0.0_f64);
    while candidate <= end {
        let reserved = (2.0 * (100.0 / candidate + 1.0) + 6.0) * per;
        let ovp = (usable - reserved) * candidate / 100.0;
        let space = usable - reserved - ovp;
        if max_space < space {
            max_space = space;
            max_ovp = candidate;
        }
        candidate += diff;
    }
    max_ovp
}

/// mkfs.f2fs's `f2fs_prepare_super_block` for one regular file (or a partition seen from
/// its own start) of `size_bytes`, 512-byte sectors, `segs_per_sec` and `secs_per_zone`, no
/// extra features: where segment0 and the main area go, or why mkfs.f2fs refuses.
pub fn mkfs_layout(
    size_bytes: u64,
    segs_per_sec: u32,
    secs_per_zone: u32,
) -> Result<F2fsLayout, F2fsTooSmall> {
    let s = u64::from(segs_per_sec.max(1));
    let z = u64::from(secs_per_zone.max(1));
    let segs_per_zone = s * z;
    let zone = segs_per_zone * F2FS_SEGMENT;
    let blocks = (size_bytes / 512) >> 3;
    // The first zone boundary at or after the two superblock blocks.
    let zone_align = (2 * F2FS_BLOCK).div_ceil(zone) * zone;
    if size_bytes < zone_align {
        return Err(F2fsTooSmall::Segments);
    }
    let segment0 = zone_align / F2FS_BLOCK;
    let total_segments = (size_bytes / 512 * 512 - zone_align) / F2FS_SEGMENT;
    let segment_count = total_segments / segs_per_zone * segs_per_zone;
    let bps = F2FS_BLOCKS_PER_SEGMENT;
    let ckpt = 2u64;
    let sit = (segment_count.div_ceil(SIT_ENTRY_PER_BLOCK)).div_ceil(bps) * 2;
    let avail = segment_count
        .checked_sub(ckpt + sit)
        .ok_or(F2fsTooSmall::Segments)?
        * bps;
    let mut nat = avail.div_ceil(NAT_ENTRY_PER_BLOCK).div_ceil(bps);
    let sit_bitmap = ((sit / 2) << 9) / 8;
    let max_sit_bitmap = sit_bitmap.min(MAX_SIT_BITMAP_SIZE);
    let max_nat_bitmap = if max_sit_bitmap > MAX_SIT_BITMAP_SIZE_IN_CKPT {
        MAX_BITMAP_SIZE_IN_CKPT
    } else {
        MAX_BITMAP_SIZE_IN_CKPT - max_sit_bitmap
    };
    let max_nat_segments = (max_nat_bitmap * 8) >> 9;
    nat = nat.min(max_nat_segments) * 2;
    let avail = segment_count
        .checked_sub(ckpt + sit + nat)
        .ok_or(F2fsTooSmall::Segments)?
        * bps;
    let ssa = (avail / bps + 1).div_ceil(bps);
    let meta = ckpt + sit + nat + ssa;
    let meta_zones = meta.div_ceil(segs_per_zone);
    let main = segment0 + meta_zones * segs_per_zone * bps;
    let total_zones = (segment_count / segs_per_zone)
        .checked_sub(meta_zones)
        .ok_or(F2fsTooSmall::Zones)?;
    let sections = total_zones * z;
    let main_segments = sections * s;
    if total_segments < MIN_SEGMENTS {
        return Err(F2fsTooSmall::Segments);
    }
    if sections == 0 {
        return Err(F2fsTooSmall::Zones);
    }
    // `f2fs_get_usable_segments` as f2fs-tools builds it against Linux headers with zone
    // capacities (blk_zone_rep v2, every current distribution): the device's segments
    // before rounding to zones, less the metadata; per section, rounded up.
    let usable = total_segments.saturating_sub(meta_zones * segs_per_zone);
    let per_section = usable.div_ceil(sections);
    let ovp = best_overprovision(main_segments, usable, per_section);
    if ovp == 0.0 {
        return Err(F2fsTooSmall::Reserved);
    }
    // mkfs.f2fs computes the reserved segments in double and stores a u32 (truncating).
    let reserved = ((2.0 * (100.0 / ovp + 1.0) + 6.0) * per_section as f64) as u64;
    if main_segments.saturating_sub(CURSEGS) < reserved || main_segments < CURSEGS {
        return Err(F2fsTooSmall::Reserved);
    }
    if total_zones <= 6 {
        return Err(F2fsTooSmall::Zones);
    }
    let to32 = |v: u64| u32::try_from(v).map_err(|_| F2fsTooSmall::Segments);
    Ok(F2fsLayout {
        blocks,
        segment0_blkaddr: to32(segment0)?,
        main_blkaddr: to32(main)?,
        segments: to32(segment_count)?,
        main_segments: to32(main_segments)?,
        sections: to32(sections)?,
        reserved_segments: to32(reserved)?,
    })
}

/// Why a plan cannot be made: `(key inside the partition, reason)`.
pub type F2fsPlanError = (&'static str, String);

/// The default segments per section for an erase block: one section = one erase block, or
/// one segment when the erase block is smaller than a segment.
#[must_use]
pub fn default_segments_per_section(erase_block: u64) -> u32 {
    u32::try_from((erase_block / F2FS_SEGMENT).clamp(1, u64::from(MAX_SEGMENTS_PER_ZONE)))
        .unwrap_or(1)
}

/// Plans an F2FS filesystem: sections of one erase block (unless the options say
/// otherwise), and the layout mkfs.f2fs will give it, explained.
pub fn plan_f2fs(req: &F2fsRequest) -> Result<F2fsPlan, F2fsPlanError> {
    req.options.validate().map_err(|(k, r)| {
        (
            match k {
                "segments-per-section" => "f2fs.segments-per-section",
                _ => "f2fs.sections-per-zone",
            },
            r,
        )
    })?;
    if let Some(l) = &req.label {
        validate_label(l).map_err(|r| ("label", r))?;
    }
    let e = req.erase_block_bytes;
    let s = req
        .options
        .segments_per_section
        .unwrap_or_else(|| default_segments_per_section(e));
    let z = req.options.sections_per_zone.unwrap_or(1);
    let section = u64::from(s) * F2FS_SEGMENT;
    let zone = section * u64::from(z);
    let size = req.partition_size_bytes;
    let step = e.max(F2FS_SEGMENT);
    let l = match mkfs_layout(size, s, z) {
        Ok(l) if l.loadable() => l,
        other => {
            let what = match other {
                Err(F2fsTooSmall::Segments) => "too few segments for mkfs.f2fs".to_string(),
                Err(F2fsTooSmall::Zones) => {
                    "mkfs.f2fs needs more than 6 zones for the main area".to_string()
                }
                Err(F2fsTooSmall::Reserved) => "mkfs.f2fs finds no room for the segments F2FS reserves for cleaning, which grow with the section size".to_string(),
                Ok(l) => format!(
                    "mkfs.f2fs would make it, but of its {} main-area segments F2FS reserves {} for cleaning and 6 for its logs, which leaves {} free segments for sload.f2fs to write into, and it needs {MIN_SLOAD_ROOM} to store even one file",
                    l.main_segments,
                    l.reserved_segments,
                    l.sload_room().max(0)
                ),
            };
            return Err((
                "size",
                too_small_message(size, section, zone, s, z, step, &what),
            ));
        }
    };
    let start = req.partition_start_bytes;
    let seg0 = start + u64::from(l.segment0_blkaddr) * F2FS_BLOCK;
    let main = start + u64::from(l.main_blkaddr) * F2FS_BLOCK;
    let mut notes = Vec::new();
    if req.options.segments_per_section.is_some() {
        notes.push(format!(
            "f2fs: sections of {s} segments ({}) as asked (f2fs.segments-per-section)",
            format_size(section)
        ));
    } else if e >= F2FS_SEGMENT {
        notes.push(format!(
            "f2fs: sections of {s} × 2 MiB segments = {}, the erase block: F2FS cleans a section at a time, so each cleaning frees whole erase blocks (mkfs.f2fs -s {s})",
            format_size(section)
        ));
    } else {
        notes.push(format!(
            "f2fs: the erase block ({}) is smaller than F2FS's 2 MiB segment, its smallest section: each section covers {} whole erase blocks, so no erase block holds parts of two sections",
            format_size(e),
            section / e.max(1)
        ));
    }
    notes.push(format!(
        "f2fs: zones of {z} section{} ({}); mkfs.f2fs puts segment0 (the checkpoint) on the first zone boundary after the superblocks, counted from the partition start, which is on the erase block: segment0 at {}, and rounds the metadata (CP, SIT, NAT, SSA) up to whole zones: the main area at {}",
        if z == 1 { "" } else { "s" },
        format_size(zone),
        format_size(seg0),
        format_size(main)
    ));
    let mut plan = F2fsPlan {
        kind: "f2fs".into(),
        label: req.label.clone(),
        uuid: Some(req.uuid.clone()),
        block_bytes: 4096,
        blocks: l.blocks,
        segment_bytes: F2FS_SEGMENT,
        segments_per_section: s,
        sections_per_zone: z,
        section_bytes: section,
        zone_bytes: zone,
        segments: l.segments,
        main_segments: l.main_segments,
        segment0_start_bytes: seg0,
        main_start_bytes: main,
        aligned: false,
        notes,
    };
    plan.aligned = plan.alignment_holds(e);
    if !plan.aligned {
        plan.notes.push(format!(
            "f2fs: a section of {} is not a whole number of {} erase blocks: cleaning one section rewrites parts of erase blocks it shares with another (marked NO)",
            format_size(section),
            format_size(e)
        ));
    }
    Ok(plan)
}

/// The smallest size F2FS takes with these sections: a whole number of `step`s (the erase
/// block, or a segment when the erase block is smaller), at most 65536 of them.
#[must_use]
pub fn min_f2fs_size(segs_per_sec: u32, secs_per_zone: u32, step: u64) -> Option<u64> {
    (1..=65_536u64)
        .map(|k| k * step.max(1))
        .find(|&sz| mkfs_layout(sz, segs_per_sec, secs_per_zone).is_ok_and(|l| l.loadable()))
}

fn too_small_message(
    size: u64,
    section: u64,
    zone: u64,
    s: u32,
    z: u32,
    step: u64,
    what: &str,
) -> String {
    let min = min_f2fs_size(s, z, step);
    // mkfs.f2fs counts the reserved segments per section from the usable segments, so a
    // size between two whole sections can need more than a smaller one: name the next
    // size up that works too when it is not the minimum.
    let next = min.filter(|&m| m < size).and_then(|_| {
        (1..=65_536u64)
            .map(|k| size.div_ceil(step.max(1)).saturating_add(k - 1) * step.max(1))
            .find(|&sz| mkfs_layout(sz, s, z).is_ok_and(|l| l.loadable()))
    });
    format!(
        "{} is too small for F2FS with {} sections and {} zones ({what}){}{}",
        format_size(size),
        format_size(section),
        format_size(zone),
        min.map(|m| format!(
            "; it needs at least {} (or smaller sections: f2fs.segments-per-section, which gives up the erase-block alignment)",
            format_size(m)
        ))
        .unwrap_or_default(),
        next.map(|n| format!(
            "; sizes between whole sections can need more: the next size up that works is {}",
            format_size(n)
        ))
        .unwrap_or_default()
    )
}

/// Checks an F2FS label: at most 512 UTF-16 units (what the superblock holds), no NUL.
pub fn validate_label(label: &str) -> Result<(), String> {
    if label.contains('\0') {
        return Err("an F2FS label cannot contain NUL".into());
    }
    let n = label.encode_utf16().count();
    if n > 512 {
        return Err(format!(
            "an F2FS label holds at most 512 UTF-16 units, this one has {n}"
        ));
    }
    // mkfs.f2fs -l takes at most 512 bytes of UTF-8.
    if label.len() > 512 {
        return Err(format!(
            "mkfs.f2fs takes a label of at most 512 bytes (UTF-8), this one has {}",
            label.len()
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIB: u64 = 1 << 20;

    /// The values `dump.f2fs -d 1` printed for images of mkfs.f2fs 1.15.0.
    #[test]
    fn matches_mkfs_f2fs() {
        let l = mkfs_layout(256 * MIB, 2, 1).unwrap();
        assert_eq!(l.segment0_blkaddr, 1024);
        assert_eq!(l.main_blkaddr, 5120);
        assert_eq!(l.segments, 126);
        assert_eq!(l.main_segments, 118);
        assert_eq!(l.sections, 59);
        assert_eq!(l.blocks, 65536);
        assert!(mkfs_layout(64 * MIB, 2, 1).is_err());
        assert!(mkfs_layout(64 * MIB, 1, 1).is_ok());
        // mkfs.f2fs: "Device size is not sufficient" (the reserved segments are counted per
        // usable segment, before the zone rounding).
        assert_eq!(mkfs_layout(100 * MIB, 2, 2), Err(F2fsTooSmall::Reserved));
    }

    /// `rsvd_segment_count` and `segment_count_main` as `dump.f2fs -d 1` printed them for
    /// mkfs.f2fs 1.15.0 images, and whether sload.f2fs stored a one-file tree in them.
    #[test]
    fn reserved_segments_and_sload_room_match_f2fs_tools() {
        for (mib, s, z, main, rsvd, loads) in [
            (52u64, 1u32, 1u32, 18u32, 12u32, false),
            (62, 1, 1, 23, 13, false),
            (64, 1, 1, 24, 13, true),
            (86, 1, 1, 35, 16, true),
            (88, 2, 1, 34, 24, false),
            (92, 2, 1, 36, 24, true),
            (102, 2, 1, 40, 34, false),
            (136, 4, 1, 56, 45, true),
            (152, 4, 1, 64, 48, true),
            (154, 4, 1, 64, 55, false),
            (166, 4, 1, 68, 58, false),
            (240, 8, 1, 104, 88, true),
        ] {
            let l = mkfs_layout(mib * MIB, s, z).unwrap();
            assert_eq!(
                (l.main_segments, l.reserved_segments, l.loadable()),
                (main, rsvd, loads),
                "{mib} MiB -s {s} -z {z}"
            );
        }
    }

    #[test]
    fn too_small_names_the_minimum_and_the_next_size_that_works() {
        let req = |size: u64, sps: u32| F2fsRequest {
            partition_start_bytes: 4 * MIB,
            partition_size_bytes: size,
            erase_block_bytes: 2 * MIB,
            options: F2fsOptions {
                segments_per_section: Some(sps),
                ..F2fsOptions::default()
            },
            label: None,
            uuid: "0".into(),
        };
        // mkfs.f2fs makes it, sload.f2fs could not store a file in it.
        let (key, msg) = plan_f2fs(&req(62 * MIB, 1)).unwrap_err();
        assert_eq!(key, "size");
        assert!(msg.contains("leaves 3 free segments"), "{msg}");
        assert!(msg.contains("it needs at least 64 MiB"), "{msg}");
        assert!(plan_f2fs(&req(64 * MIB, 1)).is_ok());
        // Between whole sections: 154 MiB fails where 152 MiB works.
        let (_, msg) = plan_f2fs(&req(154 * MIB, 4)).unwrap_err();
        assert!(
            msg.contains("the next size up that works is 160 MiB"),
            "{msg}"
        );
        assert_eq!(min_f2fs_size(4, 1, 2 * MIB), Some(136 * MIB));
    }

    #[test]
    fn plan_puts_main_on_the_erase_block() {
        for (e, size) in [
            (4 * MIB, 256 * MIB),
            (8 * MIB, 1024 * MIB),
            (128 << 10, 64 * MIB),
        ] {
            let p = plan_f2fs(&F2fsRequest {
                partition_start_bytes: 3 * e,
                partition_size_bytes: size,
                erase_block_bytes: e,
                options: F2fsOptions::default(),
                label: Some("root".into()),
                uuid: "0".into(),
            })
            .unwrap();
            assert!(p.aligned, "{p:?}");
            assert_eq!(p.section_bytes, e.max(2 * MIB));
            assert_eq!(p.main_start_bytes % e, 0);
        }
        let e = plan_f2fs(&F2fsRequest {
            partition_start_bytes: 8 * MIB,
            partition_size_bytes: 64 * MIB,
            erase_block_bytes: 8 * MIB,
            options: F2fsOptions::default(),
            label: None,
            uuid: "0".into(),
        })
        .unwrap_err();
        assert_eq!(e.0, "size");
        assert!(e.1.contains("it needs at least"), "{}", e.1);
    }
}
