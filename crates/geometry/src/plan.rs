//! The planner: [`Layout`] → [`Plan`], pure arithmetic. Every partition starts on a multiple of
//! the erase block from the start of the disk and its size is rounded up to the erase block.

use serde::{Serialize, Serializer};

use crate::attrs::GptAttributes;
use crate::fsplan::FsPlan;
use crate::guid::{derive_u64, Guid};
use crate::layout::{
    DiskId, FsKind, ImageKey, Layout, LayoutError, LayoutKey, PartKey, PartitionLayout, SizeSpec,
    TableKind,
};
use crate::slots::{slot_groups, SlotGroup};
use crate::types::{resolve, PartType};
use crate::units::{alignment_of, format_size, round_down, round_up, SectorSize};

/// Size of a GPT partition entry array: 128 entries of 128 bytes.
pub const GPT_ENTRY_ARRAY_BYTES: u64 = 128 * 128;

/// The partition table part of a plan.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct TablePlan {
    /// `mbr`, `gpt` or `none`.
    #[serde(serialize_with = "ser_display")]
    pub kind: TableKind,
    /// MBR signature (`0x…`) or GPT disk GUID; `None` for a bare filesystem.
    #[serde(serialize_with = "ser_disk_id")]
    pub disk_id: Option<DiskId>,
    /// The boot code in sector 0 (`image.boot-code`), when it is not all zeros.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub boot_code: Option<crate::BootCode>,
}

fn ser_display<T: core::fmt::Display, S: Serializer>(v: &T, s: S) -> Result<S::Ok, S::Error> {
    s.collect_str(v)
}

fn ser_disk_id<S: Serializer>(v: &Option<DiskId>, s: S) -> Result<S::Ok, S::Error> {
    match v {
        None => s.serialize_none(),
        Some(DiskId::Mbr(n)) => s.collect_str(&format_args!("0x{n:08x}")),
        Some(DiskId::Gpt(g)) => s.collect_str(g),
    }
}

fn ser_fs<S: Serializer>(v: &FsKind, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(v.as_str())
}

/// GPT geometry: where the primary and backup structures live (in logical sectors).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct GptPlan {
    /// Sectors of the entry array (32 @512, 4 @4096).
    pub entry_sectors: u64,
    /// First usable LBA (2 + entry_sectors).
    pub first_usable_lba: u64,
    /// Last usable LBA (just before the backup entry array).
    pub last_usable_lba: u64,
    /// LBA of the backup entry array.
    pub backup_entries_lba: u64,
    /// LBA of the backup header (the last LBA of the disk).
    pub backup_header_lba: u64,
}

/// The MBR extended partition that holds logical partitions 5, 6, …
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ExtendedPlan {
    /// Start of the extended partition (= the first EBR), bytes.
    pub start_bytes: u64,
    /// Size of the extended partition, bytes.
    pub size_bytes: u64,
    /// The MBR entry (1–4) that holds it.
    #[serde(skip)]
    pub entry: u8,
}

/// Which MBR entries the partitions take.
struct MbrNumbers {
    /// The entry of the extended partition, when there is one.
    ext_entry: Option<u8>,
    /// Per partition copy (in spec order, slots expanded): logical, and its number (0 when
    /// not in the table).
    of: Vec<(bool, u32)>,
}

/// Numbers the partitions of an MBR table: with an extended partition in entry N (the
/// spec's `extended-partition`, else 4 when there are more than four partitions), the first
/// N-1 are primary, the rest logical (5, 6, …) except those with `primary = true`, which
/// must follow every logical one and take the entries after N.
fn mbr_numbers(spec: &Layout) -> Result<MbrNumbers, LayoutError> {
    let img = &spec.image;
    let ext_key = || LayoutKey::Image(ImageKey::ExtendedPartition);
    let tabled: usize = spec
        .partitions
        .iter()
        .filter(|p| p.in_table)
        .map(PartitionLayout::copies)
        .sum();
    if img.table != TableKind::Mbr {
        if img.extended_partition.is_some() {
            return Err(LayoutError::new(
                ext_key(),
                format!(
                    "is for MBR tables; table = \"{}\" has no extended partition",
                    img.table
                ),
            ));
        }
        if let Some(i) = spec.partitions.iter().position(|p| p.primary) {
            return Err(LayoutError::part(
                i,
                PartKey::Primary,
                format!(
                    "is for MBR tables; table = \"{}\" has no logical partitions",
                    img.table
                ),
            ));
        }
    }
    let ext = match img.extended_partition {
        Some(0) => {
            return Err(LayoutError::new(
                ext_key(),
                "0: the extended partition takes one of the MBR's entries 1 to 4",
            ))
        }
        Some(n) => Some(n),
        None if img.table == TableKind::Mbr && tabled > 4 => Some(4),
        None => None,
    };
    let mut of = Vec::new();
    let (mut t, mut logicals, mut forced) = (0u32, 0u32, 0u32);
    let mut first_forced: Option<usize> = None;
    for (i, p) in spec.partitions.iter().enumerate() {
        for _ in 0..p.copies() {
            if !p.in_table {
                of.push((false, 0));
                continue;
            }
            let n = match ext {
                None => (false, t + 1),
                Some(e) if t + 1 < u32::from(e) => (false, t + 1),
                Some(e) if p.primary => {
                    forced += 1;
                    first_forced.get_or_insert(i);
                    let entry = u32::from(e) + forced;
                    if entry > 4 {
                        return Err(LayoutError::part(
                            i,
                            PartKey::Primary,
                            format!("extended-partition = {e} leaves {} primary entries after it, and more partitions ask for one", 4 - u32::from(e)),
                        ));
                    }
                    (false, entry)
                }
                Some(_) => {
                    if let Some(j) = first_forced {
                        return Err(LayoutError::part(
                            i,
                            PartKey::Primary,
                            format!("a logical partition after partition[{}], which has primary = true: the logical partitions must be consecutive; put the primary ones after them", j + 1),
                        ));
                    }
                    logicals += 1;
                    (true, 4 + logicals)
                }
            };
            of.push(n);
            t += 1;
        }
    }
    if let Some(e) = ext {
        if logicals == 0 {
            return Err(LayoutError::new(
                ext_key(),
                format!("= {e}, but no partition follows the first {} to be logical; leave extended-partition out", u32::from(e) - 1),
            ));
        }
    }
    Ok(MbrNumbers { ext_entry: ext, of })
}

/// One planned partition.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct PartitionPlan {
    /// Partition number as the OS sees it: 1–4 primary, 5… logical, 0 = bare filesystem.
    pub index: u32,
    /// Index into the spec's (and the [`Layout`]'s) partitions, 0-based.
    #[serde(skip)]
    pub spec_index: usize,
    /// Absolute start.
    pub start_bytes: u64,
    /// Size.
    pub size_bytes: u64,
    /// MBR type byte or GPT type GUID.
    #[serde(rename = "type")]
    pub type_: PartType,
    /// GPT partition name.
    pub name: Option<String>,
    /// Bootable flag.
    pub bootable: bool,
    /// GPT unique partition GUID.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub guid: Option<Guid>,
    /// What the spec puts in it.
    #[serde(serialize_with = "ser_fs")]
    pub content: FsKind,
    /// A logical partition inside the MBR extended partition.
    pub logical: bool,
    /// Where this logical partition's EBR lives, bytes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ebr_bytes: Option<u64>,
    /// Start on the erase block, and the contents checked and aligned: `false` for a
    /// partition whose contents are not checked (see [`PartitionPlan::checked`]), whatever
    /// its start.
    pub aligned: bool,
    /// The contents are checked: empty, or a filesystem whose layout a planner or parser
    /// knows ([`FsPlan::alignment`] is `Some`). `false` for swap, raw bytes and filesystems
    /// verify only names. Serialised only when false.
    #[serde(skip_serializing_if = "is_true")]
    pub checked: bool,
    /// Largest power of two dividing the start.
    pub alignment_bytes: u64,
    /// The filesystem geometry, filled in by the FAT and ext4 planners.
    pub filesystem: Option<FsPlan>,
    /// Listed in the partition table; `false` for `in-partition-table = false` (written,
    /// but no entry points at it; index 0). Serialised only when false.
    #[serde(skip_serializing_if = "is_true")]
    pub in_table: bool,
    /// GPT attribute bits other than bit 2 (reported as `bootable`); serialised as names
    /// (`["read-only", "no-auto"]`) only when some are set.
    #[serde(skip_serializing_if = "GptAttributes::is_empty_ref")]
    pub attributes: GptAttributes,
    /// The A/B slot this partition is (`"a"`), from the spec's `slots` or, in a report,
    /// from its name; serialised only when set.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub slot: Option<String>,
    /// GPT: the MBR type byte under which this partition is mirrored into a hybrid MBR
    /// (`mbr-type`; see [`crate::hybrid`]); serialised as `"0x0c"` only when set.
    #[serde(
        skip_serializing_if = "Option::is_none",
        serialize_with = "ser_mbr_type"
    )]
    pub mbr_type: Option<u8>,
}

fn ser_mbr_type<S: Serializer>(v: &Option<u8>, s: S) -> Result<S::Ok, S::Error> {
    match v {
        Some(b) => s.collect_str(&format_args!("0x{b:02x}")),
        None => s.serialize_none(),
    }
}

fn is_true(v: &bool) -> bool {
    *v
}

impl PartitionPlan {
    /// Sets [`PartitionPlan::checked`] and [`PartitionPlan::aligned`] from the start and the
    /// filesystem: the one rule for plans and reports alike.
    pub fn refresh_aligned(&mut self, erase_block: u64) {
        let fs = self.filesystem.as_ref().map(FsPlan::alignment);
        self.checked = !matches!(fs, Some(None));
        let start_ok = erase_block != 0 && self.start_bytes % erase_block == 0;
        self.aligned = start_ok && matches!(fs, None | Some(Some(true)));
    }

    /// Start in logical sectors.
    #[must_use]
    pub fn start_lba(&self, s: SectorSize) -> u64 {
        self.start_bytes / s.bytes_u64()
    }

    /// Size in logical sectors.
    #[must_use]
    pub fn size_sectors(&self, s: SectorSize) -> u64 {
        self.size_bytes / s.bytes_u64()
    }

    /// The exclusive end, bytes.
    #[must_use]
    pub fn end_bytes(&self) -> u64 {
        self.start_bytes.saturating_add(self.size_bytes)
    }
}

/// A complete disk layout: what `blockwise plan` prints and `blockwise build` writes.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Plan {
    /// Total image size.
    pub size_bytes: u64,
    /// Device logical sector size.
    pub sector_bytes: SectorSize,
    /// Erase block E.
    pub erase_block_bytes: u64,
    /// Partition table.
    pub table: TablePlan,
    /// Partitions in disk order.
    pub partitions: Vec<PartitionPlan>,
    /// The MBR extended partition, when there are more than four partitions.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub extended: Option<ExtendedPlan>,
    /// GPT structure locations.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gpt: Option<GptPlan>,
    /// Every partition and filesystem aligned.
    pub aligned: bool,
    /// Warnings about the layout (an explicit start off the erase block, …), for the user.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
    /// Raw writes at fixed offsets outside the partitions (`[[raw]]`: bootloaders), in spec
    /// order. Placed by [`place_raw`].
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub raw: Vec<RawPlan>,
    /// Partitions that are A/B slots of one another ([`slot_groups`] of the partitions).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub slots: Vec<SlotGroup>,
    /// The seed every derived ID comes from (`image.seed`, given or resolved), as a `0x`
    /// string (JSON numbers lose precision past 2^53; the spec takes the string back).
    #[serde(serialize_with = "seed_hex")]
    pub seed: u64,
}

fn seed_hex<S: serde::Serializer>(seed: &u64, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&format!("{seed:#018x}"))
}

/// One raw write outside the partitions (a bootloader at a fixed offset).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct RawPlan {
    /// Index into the spec's `[[raw]]` array, 0-based.
    #[serde(skip)]
    pub spec_index: usize,
    /// Absolute offset.
    pub offset_bytes: u64,
    /// Length (of the source, or the reserved `size`).
    pub size_bytes: u64,
    /// The file written there, as the spec names it.
    pub source: String,
}

impl RawPlan {
    /// The exclusive end, bytes.
    #[must_use]
    pub fn end_bytes(&self) -> u64 {
        self.offset_bytes.saturating_add(self.size_bytes)
    }
}

/// Checks raw writes against everything else on the disk of `plan` — the MBR (and EBRs),
/// the primary and backup GPT, the partitions and each other — and records them in
/// [`Plan::raw`]. `Err((i, reason))` names the 0-based index of the offending write.
pub fn place_raw(plan: &mut Plan, raws: Vec<RawPlan>) -> Result<(), (usize, String)> {
    let sb = plan.sector_bytes.bytes_u64();
    // (start, end, what) of every structure a raw write must not touch.
    let mut taken: Vec<(u64, u64, String)> = Vec::new();
    match plan.table.kind {
        TableKind::None => {}
        TableKind::Mbr => taken.push((0, sb, "the MBR (sector 0)".into())),
        TableKind::Gpt => taken.push((0, sb, "the protective MBR (sector 0)".into())),
    }
    if let Some(g) = &plan.gpt {
        let end = g.first_usable_lba.saturating_mul(sb);
        taken.push((
            sb,
            end,
            format!(
                "the primary GPT (LBA 1 to {}, bytes {sb} to {}); GPT keeps the first {} free — use table = \"mbr\" for a boot ROM that reads there (e.g. Allwinner at 8 KiB)",
                g.first_usable_lba.saturating_sub(1),
                end.saturating_sub(1),
                format_size(end)
            ),
        ));
        taken.push((
            g.backup_entries_lba.saturating_mul(sb),
            plan.size_bytes,
            format!("the backup GPT (LBA {} to the end)", g.backup_entries_lba),
        ));
    }
    for p in &plan.partitions {
        if let Some(ebr) = p.ebr_bytes {
            taken.push((
                ebr,
                ebr.saturating_add(sb),
                format!("the EBR of partition[{}]", p.spec_index + 1),
            ));
        }
        taken.push((
            p.start_bytes,
            p.end_bytes(),
            format!(
                "partition[{}] ({} to {})",
                p.spec_index + 1,
                format_size(p.start_bytes),
                format_size(p.end_bytes())
            ),
        ));
    }
    for r in &raws {
        let i = r.spec_index;
        if r.size_bytes == 0 {
            return Err((i, "the source is empty (0 bytes)".into()));
        }
        if r.end_bytes() > plan.size_bytes || r.offset_bytes.checked_add(r.size_bytes).is_none() {
            return Err((
                i,
                format!(
                    "{} bytes at {} end past the image ({}); raise image.size",
                    r.size_bytes,
                    format_size(r.offset_bytes),
                    format_size(plan.size_bytes)
                ),
            ));
        }
        if let Some((_, _, what)) = taken
            .iter()
            .find(|(s, e, _)| r.offset_bytes < *e && *s < r.end_bytes())
        {
            return Err((
                i,
                format!(
                    "{} bytes at {} (sector {}) overlap {what}",
                    r.size_bytes,
                    format_size(r.offset_bytes),
                    r.offset_bytes / sb
                ),
            ));
        }
        taken.push((
            r.offset_bytes,
            r.end_bytes(),
            format!("raw[{}] ({})", i + 1, r.source),
        ));
    }
    plan.raw = raws;
    Ok(())
}

impl Plan {
    /// The copy of the spec's partition `spec_index` for `slot` (`None`: an unslotted
    /// partition, or the only copy): how a partition that names another one (`of =
    /// "system"`) finds the copy of its own slot.
    #[must_use]
    pub fn slot_copy(&self, spec_index: usize, slot: Option<&str>) -> Option<&PartitionPlan> {
        self.partitions
            .iter()
            .find(|p| p.spec_index == spec_index && p.slot.as_deref() == slot)
    }

    /// Recomputes [`Plan::slots`] from the partitions (after their filesystems are planned,
    /// whose labels name slots on an MBR disk).
    pub fn refresh_slots(&mut self) {
        self.slots = slot_groups(&self.partitions);
    }

    /// Recomputes every `checked` and `aligned` flag from starts and filesystem plans
    /// ([`PartitionPlan::refresh_aligned`]): the plan is aligned when every partition is.
    pub fn refresh_aligned(&mut self) {
        let e = self.erase_block_bytes;
        for p in &mut self.partitions {
            p.refresh_aligned(e);
        }
        self.aligned = self.partitions.iter().all(|p| p.aligned);
    }
}

/// The SD Association's partition offset: when the first partition is exFAT on a disk whose
/// size is in the SD Association's table and the erase block fits its boundary unit (BU),
/// the first partition starts on one BU, as SD cards come from the factory (16 MiB on a 64 GB
/// card). `None` otherwise (the default is one erase block).
fn sda_first_partition(spec: &Layout) -> Option<u64> {
    let first = spec.partitions.first()?;
    if first.fs != FsKind::Exfat || first.start.is_some() {
        return None;
    }
    let (_, bu) = crate::fsplan::sda_exfat_params(spec.image.size?)?;
    (bu >= spec.image.erase_block).then_some(bu)
}

fn gpt_entry_sectors(s: SectorSize) -> u64 {
    GPT_ENTRY_ARRAY_BYTES / s.bytes_u64()
}

/// Derives the MBR disk signature from the seed (never 0: Windows rewrites a zero signature).
#[must_use]
pub fn derive_mbr_signature(seed: u64) -> u32 {
    let v = derive_u64(seed, "mbr-disk-signature", 0);
    let s = u32::try_from(v & 0xffff_ffff).unwrap_or(1);
    if s == 0 {
        1
    } else {
        s
    }
}

/// Plans the layout. The filesystem slots are left empty for the FAT/ext4 planners.
///
/// ```
/// use blockwise_geometry::{plan, FsKind, ImageSpec, Layout, PartitionLayout, SizeSpec};
/// let layout = Layout {
///     image: ImageSpec { size: Some(1 << 30), ..ImageSpec::default() },
///     partitions: vec![
///         PartitionLayout::new(FsKind::None, SizeSpec::Bytes(256 << 20)),
///         PartitionLayout::new(FsKind::None, SizeSpec::Fill),
///     ],
/// };
/// let p = plan(&layout).unwrap();
/// assert_eq!(p.partitions[0].start_bytes, 4 << 20);
/// assert_eq!(p.partitions[1].start_bytes, 260 << 20);
/// ```
pub fn plan(spec: &Layout) -> Result<Plan, LayoutError> {
    spec.validate()?;
    if spec.image.table == TableKind::None {
        return plan_bare(spec);
    }
    let img = &spec.image;
    let gpt = img.table == TableKind::Gpt;
    let table = TableBounds::of(img);
    let first = first_partition(spec, &table)?;
    let placed = place_partitions(spec, &table, first)?;
    let size = disk_size(img, &table, placed.end)?;
    let extended = placed.ext_start.map(|start| ExtendedPlan {
        start_bytes: start,
        size_bytes: placed.ext_end - start,
        entry: placed.ext_entry.unwrap_or(4),
    });
    let mut placed = placed;
    // Forced primaries follow the logical partitions on disk; list them as fdisk and verify
    // do, primaries before logicals.
    if placed
        .parts
        .iter()
        .any(|p| p.in_table && !p.logical && p.index > 0)
        && placed
            .parts
            .iter()
            .skip_while(|p| !p.logical)
            .any(|p| !p.logical && p.in_table)
    {
        placed.parts.sort_by_key(|p| p.logical);
    }
    if gpt {
        crate::hybrid::check_limits(&placed.parts, img.sector_size)?;
    } else {
        check_mbr_limit(&placed.parts, img.sector_size)?;
    }
    let mut plan = Plan {
        size_bytes: size,
        sector_bytes: img.sector_size,
        erase_block_bytes: img.erase_block,
        table: TablePlan {
            kind: img.table,
            disk_id: Some(disk_id(img)),
            boot_code: spec.boot_code()?,
        },
        partitions: placed.parts,
        extended,
        gpt: gpt.then(|| gpt_plan(size, img.sector_size)),
        aligned: true,
        notes: placed.notes,
        raw: Vec::new(),
        slots: Vec::new(),
        seed: img.seed,
    };
    plan.refresh_aligned();
    plan.refresh_slots();
    Ok(plan)
}

fn overflow(key: LayoutKey) -> LayoutError {
    LayoutError::new(key, "size arithmetic overflows 64 bits")
}

fn psize(i: usize) -> LayoutKey {
    LayoutKey::Partition(i, PartKey::Size)
}

const IMAGE_SIZE: LayoutKey = LayoutKey::Image(ImageKey::Size);

/// `table = "none"`: the one partition is the whole image, from byte 0.
fn plan_bare(spec: &Layout) -> Result<Plan, LayoutError> {
    let img = &spec.image;
    let sb = img.sector_size.bytes_u64();
    let p = spec
        .partitions
        .first()
        .ok_or_else(|| LayoutError::new(LayoutKey::Partitions, "missing"))?;
    let req = match p.size {
        SizeSpec::Bytes(b) => Some(b),
        SizeSpec::Fill => None,
        SizeSpec::Source => return Err(unresolved_source(0)),
        SizeSpec::Auto(_) => return Err(unresolved_auto(0)),
    };
    let size = match (img.size, req) {
        (Some(sz), Some(r)) if r > sz => {
            return Err(LayoutError::new(
                IMAGE_SIZE,
                format!(
                    "{} is smaller than partition[1].size ({}): {} more needed",
                    format_size(sz),
                    format_size(r),
                    format_size(r - sz)
                ),
            ))
        }
        (Some(sz), _) => sz,
        (None, Some(r)) => round_up(r, sb).ok_or_else(|| overflow(psize(0)))?,
        (None, None) => return Err(LayoutError::new(psize(0), "\"fill\" needs image.size")),
    };
    let mut plan = Plan {
        size_bytes: size,
        sector_bytes: img.sector_size,
        erase_block_bytes: img.erase_block,
        table: TablePlan {
            kind: TableKind::None,
            disk_id: None,
            boot_code: None,
        },
        partitions: vec![PartitionPlan {
            index: 0,
            spec_index: 0,
            start_bytes: 0,
            size_bytes: size,
            type_: resolve(TableKind::None, p.fs, None)
                .map_err(|r| LayoutError::new(LayoutKey::Partition(0, PartKey::Type), r))?,
            name: None,
            bootable: false,
            guid: None,
            content: p.fs,
            logical: false,
            ebr_bytes: None,
            aligned: true,
            checked: true,
            alignment_bytes: alignment_of(0).min(largest_pow2_le(size)),
            filesystem: None,
            in_table: true,
            attributes: GptAttributes::NONE,
            slot: None,
            mbr_type: None,
        }],
        extended: None,
        gpt: None,
        aligned: true,
        notes: Vec::new(),
        raw: Vec::new(),
        slots: Vec::new(),
        seed: img.seed,
    };
    plan.refresh_aligned();
    Ok(plan)
}

/// What the partition table takes at the start and the end of the disk.
struct TableBounds {
    gpt: bool,
    /// Bytes from 0 the table needs (MBR sector, or GPT header and entries).
    head_bytes: u64,
    /// Bytes at the end (the backup GPT), 0 for MBR.
    tail_bytes: u64,
}

impl TableBounds {
    fn of(img: &crate::layout::ImageSpec) -> Self {
        let s = img.sector_size;
        let sb = s.bytes_u64();
        let gpt = img.table == TableKind::Gpt;
        TableBounds {
            gpt,
            head_bytes: if gpt {
                (2 + gpt_entry_sectors(s)) * sb
            } else {
                sb
            },
            tail_bytes: if gpt {
                (1 + gpt_entry_sectors(s)) * sb
            } else {
                0
            },
        }
    }
}

/// Where the first partition starts: `first-partition`, else one erase block (or the SD
/// Association's boundary unit for an exFAT first partition), past the table.
fn first_partition(spec: &Layout, table: &TableBounds) -> Result<u64, LayoutError> {
    let img = &spec.image;
    match img.first_partition {
        Some(fp) if fp < table.head_bytes => Err(LayoutError::new(
            LayoutKey::Image(ImageKey::FirstPartition),
            format!(
                "{} leaves no room for the {} partition table ({} needed)",
                format_size(fp),
                img.table,
                format_size(table.head_bytes)
            ),
        )),
        Some(fp) => Ok(fp),
        None => round_up(
            table
                .head_bytes
                .max(sda_first_partition(spec).unwrap_or(img.erase_block)),
            img.erase_block,
        )
        .ok_or_else(|| overflow(LayoutKey::Image(ImageKey::FirstPartition))),
    }
}

/// The partitions placed one after another.
struct Placed {
    parts: Vec<PartitionPlan>,
    notes: Vec<String>,
    /// End of the last partition.
    end: u64,
    /// Start of the MBR extended partition, when there is one.
    ext_start: Option<u64>,
    /// End of the last logical partition.
    ext_end: u64,
    /// The MBR entry of the extended partition.
    ext_entry: Option<u8>,
}

/// The cursor of [`place_partitions`]: where the next partition goes and what ends last.
struct Cursor {
    next: u64,
    /// The end of what is already placed (the table, then each partition), for explicit
    /// starts.
    placed_end: u64,
    placed_what: String,
}

/// Checks an explicit `start` against what is placed before it; a start off the erase block
/// is allowed with a note.
fn explicit_start(
    i: usize,
    st: u64,
    logical: bool,
    e: u64,
    cur: &Cursor,
    notes: &mut Vec<String>,
) -> Result<(), LayoutError> {
    if logical {
        // The EBR goes before the start (see `logical_ebr`), checked there.
        return Ok(());
    }
    if st < cur.placed_end {
        return Err(LayoutError::part(
            i,
            PartKey::Start,
            format!(
                "{} ({} bytes) overlaps {}, which ends at {} ({} bytes); partitions are placed in spec order",
                format_size(st),
                st,
                cur.placed_what,
                format_size(cur.placed_end),
                cur.placed_end
            ),
        ));
    }
    if st % e != 0 {
        notes.push(format!(
            "partition[{}].start: {} is not on a {} erase-block boundary: writes to it straddle erase blocks (marked NO)",
            i + 1,
            format_size(st),
            format_size(e)
        ));
    }
    Ok(())
}

/// Where the EBR of a logical partition with an explicit `start` goes: one erase block
/// before it, as for every logical partition, when that is after what is placed already;
/// else in the sector just before it (where genimage and fdisk put it), with a note, since
/// that EBR shares an erase block with the partition's first sector.
fn logical_ebr(
    i: usize,
    st: u64,
    e: u64,
    sector: u64,
    cur: &Cursor,
    notes: &mut Vec<String>,
) -> Result<u64, LayoutError> {
    if let Some(ebr) = st.checked_sub(e).filter(|&b| b >= cur.placed_end) {
        if st % e != 0 {
            notes.push(format!(
                "partition[{}].start: {} is not on a {} erase-block boundary: writes to it straddle erase blocks (marked NO)",
                i + 1,
                format_size(st),
                format_size(e)
            ));
        }
        return Ok(ebr);
    }
    match st.checked_sub(sector).filter(|&b| b >= cur.placed_end && b > 0) {
        Some(ebr) => {
            notes.push(format!(
                "partition[{}].start: {} leaves no whole {} erase block for its EBR after {}: the EBR goes in the sector before it ({}), as genimage and fdisk put it",
                i + 1,
                format_size(st),
                format_size(e),
                cur.placed_what,
                ebr / sector
            ));
            Ok(ebr)
        }
        None => Err(LayoutError::part(
            i,
            PartKey::Start,
            format!(
                "{} ({} bytes) leaves no room for the logical partition's EBR after {}, which ends at {} ({} bytes): a logical partition needs at least one sector before it",
                format_size(st),
                st,
                cur.placed_what,
                format_size(cur.placed_end),
                cur.placed_end
            ),
        )),
    }
}

/// The size of partition `i` starting at `start`: its size rounded up to the erase block,
/// or ("fill") up to the last erase block before the table's tail.
fn partition_size(
    spec: &Layout,
    i: usize,
    p: &PartitionLayout,
    start: u64,
    tail_bytes: u64,
) -> Result<u64, LayoutError> {
    let e = spec.image.erase_block;
    match p.size {
        SizeSpec::Bytes(b) => round_up(b, e).ok_or_else(|| overflow(psize(i))),
        SizeSpec::Source => Err(unresolved_source(i)),
        SizeSpec::Auto(_) => Err(unresolved_auto(i)),
        SizeSpec::Fill => {
            let disk = spec.image.size.unwrap_or(0);
            let usable_end = round_down(disk.saturating_sub(tail_bytes), e);
            if usable_end <= start {
                return Err(LayoutError::new(
                    IMAGE_SIZE,
                    format!(
                        "{} leaves nothing for partition[{}] (\"fill\"), which would start at {}: at least {} more needed",
                        format_size(disk),
                        i + 1,
                        format_size(start),
                        format_size(start + e + tail_bytes - disk.min(start + e + tail_bytes))
                    ),
                ));
            }
            Ok(usable_end - start)
        }
    }
}

/// The GPT unique partition GUID of copy `k` of partition `i`.
fn partition_guid(seed: u64, i: usize, p: &PartitionLayout, k: usize) -> Guid {
    match (p.uuid, k) {
        (Some(u), _) => u,
        (None, 0) => Guid::derive(seed, "gpt-partition", i as u64),
        // Later slots: their own GUIDs (k < 256 slots).
        (None, k) => Guid::derive(seed, "gpt-partition-slot", ((i as u64) << 8) | k as u64),
    }
}

/// Places every partition (each A/B slot a copy of its own) in spec order from `first`.
fn place_partitions(spec: &Layout, table: &TableBounds, first: u64) -> Result<Placed, LayoutError> {
    let img = &spec.image;
    let e = img.erase_block;
    let gpt = table.gpt;
    let numbers = mbr_numbers(spec)?;
    let mut ext_end = 0;

    let mut parts = Vec::with_capacity(spec.partitions.len());
    let mut notes = Vec::new();
    let mut cur = Cursor {
        next: first,
        placed_end: table.head_bytes,
        placed_what: format!("the {} partition table", img.table),
    };
    let mut ext_start = None;
    // One entry per copy: a partition with slots is laid out once per slot.
    let copies = spec.partitions.iter().enumerate().flat_map(|(i, p)| {
        crate::slots::each(&p.slots)
            .enumerate()
            .map(move |(k, slot)| (i, p, k, slot))
    });
    for (c, (i, p, k, slot)) in copies.enumerate() {
        let (logical, number) = numbers.of.get(c).copied().unwrap_or((false, 0));
        let mut ebr = None;
        // An explicit start places the first slot; the others follow it.
        let explicit = p.start.filter(|_| k == 0);
        if let Some(st) = explicit {
            explicit_start(i, st, logical, e, &cur, &mut notes)?;
            cur.next = st;
        }
        if let (true, Some(st)) = (logical, explicit) {
            let at = logical_ebr(i, st, e, img.sector_size.bytes_u64(), &cur, &mut notes)?;
            ext_start.get_or_insert(at);
            ebr = Some(at);
        } else if logical {
            // Each logical partition is preceded by one erase block that holds its EBR, so
            // both the EBR and the partition start on erase-block boundaries.
            ext_start.get_or_insert(cur.next);
            ebr = Some(cur.next);
            cur.next = cur.next.checked_add(e).ok_or_else(|| overflow(psize(i)))?;
        }
        let start = cur.next;
        let size = partition_size(spec, i, p, start, table.tail_bytes)?;
        // With an extended partition in entry N, logicals are 5, 6, … (mbr_numbers). A
        // partition left out of the table has no number (0).
        let index = number;
        let type_ = resolve(img.table, p.fs, p.type_.as_deref())
            .map_err(|r| LayoutError::new(LayoutKey::Partition(i, PartKey::Type), r))?;
        parts.push(PartitionPlan {
            index,
            spec_index: i,
            start_bytes: start,
            size_bytes: size,
            type_,
            name: if gpt { p.name_for(slot) } else { None },
            bootable: p.bootable,
            guid: (gpt && p.in_table).then(|| partition_guid(img.seed, i, p, k)),
            content: p.fs,
            logical,
            ebr_bytes: ebr,
            aligned: true,
            checked: true,
            alignment_bytes: alignment_of(start),
            filesystem: None,
            in_table: p.in_table,
            attributes: p.attributes,
            slot: slot.map(str::to_string),
            mbr_type: match p.mbr_type.as_deref() {
                Some(t) if gpt && p.in_table => Some(
                    crate::hybrid::mbr_type_byte(p.fs, t)
                        .map_err(|r| LayoutError::part(i, PartKey::MbrType, r))?,
                ),
                _ => None,
            },
        });
        let pend = start.checked_add(size).ok_or_else(|| overflow(psize(i)))?;
        if logical {
            ext_end = pend;
        }
        cur.placed_end = pend;
        cur.placed_what = format!("partition[{}]", i + 1);
        // Following partitions go on the next erase block, as without an explicit start.
        cur.next = round_up(pend, e).ok_or_else(|| overflow(psize(i)))?;
    }
    Ok(Placed {
        parts,
        notes,
        end: cur.placed_end,
        ext_start,
        ext_end,
        ext_entry: numbers.ext_entry,
    })
}

/// The disk size: `image.size` (checked to hold the layout), else the end of the last
/// partition on the erase block, plus the GPT tail rounded up to it.
fn disk_size(
    img: &crate::layout::ImageSpec,
    table: &TableBounds,
    end: u64,
) -> Result<u64, LayoutError> {
    let e = img.erase_block;
    match img.size {
        Some(disk) => {
            let need = end
                .checked_add(table.tail_bytes)
                .ok_or_else(|| overflow(IMAGE_SIZE))?;
            if need > disk {
                return Err(LayoutError::new(
                    IMAGE_SIZE,
                    format!(
                        "the layout needs {} ({} bytes{}) but image.size is {}: {} more needed",
                        format_size(need),
                        need,
                        if table.gpt {
                            ", including the backup GPT"
                        } else {
                            ""
                        },
                        format_size(disk),
                        format_size(need - disk)
                    ),
                ));
            }
            Ok(disk)
        }
        None => {
            // The derived size ends on the erase block (and the GPT tail with it), even
            // when an explicit start put the last partition off the grid.
            let tail = if table.gpt {
                round_up(table.tail_bytes, e).ok_or_else(|| overflow(IMAGE_SIZE))?
            } else {
                0
            };
            round_up(end, e)
                .and_then(|end| end.checked_add(tail))
                .ok_or_else(|| overflow(IMAGE_SIZE))
        }
    }
}

/// MBR stores LBAs and counts as u32: no partition may end past 2^32 sectors.
fn check_mbr_limit(parts: &[PartitionPlan], s: SectorSize) -> Result<(), LayoutError> {
    let limit = (1u64 << 32) * s.bytes_u64();
    let over = parts
        .iter()
        .find(|p| p.end_bytes() > limit)
        .map(|p| (p.spec_index, p.end_bytes()));
    match over {
        Some((i, pend)) => Err(LayoutError::new(
            psize(i),
            format!(
                "the partition ends at {}, past the MBR limit of {} with {}-byte sectors; use table = \"gpt\"{}",
                format_size(pend),
                format_size(limit),
                s,
                if s == SectorSize::S512 { " (or sector-size = 4096 if the device has 4 KiB sectors)" } else { "" }
            ),
        )),
        None => Ok(()),
    }
}

/// Where the GPT structures of a disk of `size` bytes go.
fn gpt_plan(size: u64, s: SectorSize) -> GptPlan {
    let total = size / s.bytes_u64();
    let es = gpt_entry_sectors(s);
    GptPlan {
        entry_sectors: es,
        first_usable_lba: 2 + es,
        last_usable_lba: total - 2 - es,
        backup_entries_lba: total - 1 - es,
        backup_header_lba: total - 1,
    }
}

/// `disk-id`, else derived from the seed.
fn disk_id(img: &crate::layout::ImageSpec) -> DiskId {
    match (img.table, img.disk_id) {
        (_, Some(id)) => id,
        (TableKind::Gpt, None) => DiskId::Gpt(Guid::derive(img.seed, "gpt-disk", 0)),
        _ => DiskId::Mbr(derive_mbr_signature(img.seed)),
    }
}

fn unresolved_source(i: usize) -> LayoutError {
    LayoutError::new(
        LayoutKey::Partition(i, PartKey::Size),
        "missing; give a size, or plan through the image builder, which takes the size of source",
    )
}

fn unresolved_auto(i: usize) -> LayoutError {
    LayoutError::new(
        LayoutKey::Partition(i, PartKey::Size),
        "\"auto\" is computed from the contents by the image builder (blockwise_image::plan_full), not by the layout planner alone",
    )
}

fn largest_pow2_le(v: u64) -> u64 {
    if v == 0 {
        1
    } else {
        1 << (63 - v.leading_zeros())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::layout::{ImageSpec, PartitionLayout};
    use proptest::prelude::*;

    fn spec(
        table: TableKind,
        size: Option<u64>,
        e: u64,
        s: SectorSize,
        parts: &[SizeSpec],
    ) -> Layout {
        Layout {
            image: ImageSpec {
                size,
                erase_block: e,
                sector_size: s,
                table,
                ..ImageSpec::default()
            },
            partitions: parts
                .iter()
                .map(|&sz| PartitionLayout::new(FsKind::None, sz))
                .collect(),
        }
    }

    fn check(sp: &Layout, starts: &[u64], sizes: &[u64]) {
        let p = plan(sp).unwrap();
        let got: Vec<u64> = p.partitions.iter().map(|p| p.start_bytes).collect();
        assert_eq!(got, starts);
        let got: Vec<u64> = p.partitions.iter().map(|p| p.size_bytes).collect();
        assert_eq!(got, sizes);
    }

    const MIB: u64 = 1 << 20;

    /// Explicit starts of logical partitions (genimage's hdimage6): the EBR one erase block
    /// before the start when there is room, else in the sector before it with a note, else
    /// refused naming `start`.
    #[test]
    fn explicit_starts_of_logical_partitions() {
        let mut sp = spec(
            TableKind::Mbr,
            Some(64 * MIB),
            MIB,
            SectorSize::S512,
            &[SizeSpec::Bytes(MIB); 6],
        );
        sp.partitions[3].start = Some(10 * MIB);
        sp.partitions[4].start = Some(12 * MIB + 4096);
        let p = plan(&sp).unwrap();
        let ebrs: Vec<_> = p.partitions.iter().map(|q| q.ebr_bytes).collect();
        assert_eq!(
            ebrs,
            [
                None,
                None,
                None,
                Some(9 * MIB),
                Some(11 * MIB + 4096),
                Some(14 * MIB)
            ]
        );
        assert_eq!(p.extended.as_ref().unwrap().start_bytes, 9 * MIB);
        assert_eq!(p.notes.len(), 1, "{:?}", p.notes);
        assert!(p.notes[0].contains("not on a 1 MiB erase-block boundary"));
        // Right after the previous partition: the EBR in the sector before the start.
        sp.partitions[4].start = Some(11 * MIB + 4096);
        let p = plan(&sp).unwrap();
        assert_eq!(p.partitions[4].ebr_bytes, Some(11 * MIB + 3584));
        assert!(
            p.notes
                .iter()
                .any(|n| n.contains("the EBR goes in the sector before it (22535)")),
            "{:?}",
            p.notes
        );
        // No sector left for the EBR.
        sp.partitions[4].start = Some(11 * MIB);
        let e = plan(&sp).unwrap_err();
        assert_eq!(e.key, LayoutKey::Partition(4, PartKey::Start));
        assert!(
            e.reason
                .contains("leaves no room for the logical partition's EBR after partition[4]"),
            "{e}"
        );
    }

    #[test]
    fn issue_example_layout() {
        let sp = spec(
            TableKind::Mbr,
            Some(1024 * MIB),
            4 * MIB,
            SectorSize::S512,
            &[SizeSpec::Bytes(256 * MIB), SizeSpec::Fill],
        );
        check(&sp, &[4 * MIB, 260 * MIB], &[256 * MIB, 764 * MIB]);
        let sp = spec(
            TableKind::Gpt,
            Some(1024 * MIB),
            4 * MIB,
            SectorSize::S512,
            &[SizeSpec::Bytes(256 * MIB), SizeSpec::Fill],
        );
        check(&sp, &[4 * MIB, 260 * MIB], &[256 * MIB, 760 * MIB]);
        let p = plan(&sp).unwrap();
        let g = p.gpt.unwrap();
        assert_eq!(g.backup_header_lba, 2 * 1024 * 1024 - 1);
        assert_eq!(g.backup_entries_lba, 2 * 1024 * 1024 - 33);
    }

    #[test]
    fn sizes_round_up_and_total_is_computed() {
        let sp = spec(
            TableKind::Mbr,
            None,
            4 * MIB,
            SectorSize::S512,
            &[SizeSpec::Bytes(MIB), SizeSpec::Bytes(5 * MIB)],
        );
        check(&sp, &[4 * MIB, 8 * MIB], &[4 * MIB, 8 * MIB]);
        assert_eq!(plan(&sp).unwrap().size_bytes, 16 * MIB);
        let sp = spec(
            TableKind::Gpt,
            None,
            4 * MIB,
            SectorSize::S512,
            &[SizeSpec::Bytes(MIB)],
        );
        assert_eq!(plan(&sp).unwrap().size_bytes, 12 * MIB);
    }

    #[test]
    fn extended_partitions_are_aligned() {
        let parts = [SizeSpec::Bytes(MIB); 6];
        let sp = spec(TableKind::Mbr, None, 4 * MIB, SectorSize::S512, &parts);
        let p = plan(&sp).unwrap();
        let idx: Vec<u32> = p.partitions.iter().map(|p| p.index).collect();
        assert_eq!(idx, [1, 2, 3, 5, 6, 7]);
        let ext = p.extended.unwrap();
        assert_eq!(ext.start_bytes, 16 * MIB);
        for q in &p.partitions[3..] {
            assert_eq!(q.start_bytes % (4 * MIB), 0);
            assert_eq!(q.ebr_bytes.unwrap() % (4 * MIB), 0);
            assert_eq!(q.ebr_bytes.unwrap() + 4 * MIB, q.start_bytes);
        }
        assert_eq!(ext.start_bytes + ext.size_bytes, p.size_bytes);
    }

    /// genimage's `extended-partition = 2` with two `forced-primary` partitions at the end
    /// (its hdimage-forced-primary test): entries 1, 3, 4 primary, 2 the container.
    #[test]
    fn extended_partition_entry_and_forced_primaries() {
        let parts = [SizeSpec::Bytes(MIB); 8];
        let mut sp = spec(TableKind::Mbr, None, MIB, SectorSize::S512, &parts);
        sp.image.extended_partition = Some(2);
        sp.partitions[6].primary = true;
        sp.partitions[7].primary = true;
        let p = plan(&sp).unwrap();
        let got: Vec<(u32, u64, bool)> = p
            .partitions
            .iter()
            .map(|q| (q.index, q.start_bytes / 512, q.logical))
            .collect();
        assert_eq!(
            got,
            [
                (1, 2048, false),
                (3, 24576, false),
                (4, 26624, false),
                (5, 6144, true),
                (6, 10240, true),
                (7, 14336, true),
                (8, 18432, true),
                (9, 22528, true),
            ]
        );
        let ext = p.extended.unwrap();
        assert_eq!(
            (ext.entry, ext.start_bytes / 512, ext.size_bytes / 512),
            (2, 4096, 20480)
        );
        // The refusals, each naming its key.
        let key = |f: &dyn Fn(&mut Layout)| {
            let mut s = spec(TableKind::Mbr, None, MIB, SectorSize::S512, &parts);
            f(&mut s);
            plan(&s).unwrap_err().key
        };
        let ext_key = LayoutKey::Image(ImageKey::ExtendedPartition);
        assert_eq!(key(&|s| s.image.extended_partition = Some(0)), ext_key);
        assert_eq!(
            key(&|s| {
                s.image.table = TableKind::Gpt;
                s.image.extended_partition = Some(2);
            }),
            ext_key
        );
        // Entry 4 with only three partitions leaves nothing logical.
        assert_eq!(
            key(&|s| {
                s.partitions.truncate(3);
                s.image.extended_partition = Some(4);
            }),
            ext_key
        );
        // A logical partition after a forced primary one.
        assert_eq!(
            key(&|s| {
                s.image.extended_partition = Some(2);
                s.partitions[5].primary = true;
            }),
            LayoutKey::Partition(6, PartKey::Primary)
        );
        // No primary entry after entry 4.
        assert_eq!(
            key(&|s| s.partitions[7].primary = true),
            LayoutKey::Partition(7, PartKey::Primary)
        );
        // Entry 3 leaves one primary entry after it.
        assert_eq!(
            key(&|s| {
                s.image.extended_partition = Some(3);
                s.partitions[6].primary = true;
                s.partitions[7].primary = true;
            }),
            LayoutKey::Partition(7, PartKey::Primary)
        );
    }

    #[test]
    fn errors() {
        let sp = spec(
            TableKind::Mbr,
            Some(64 * MIB),
            4 * MIB,
            SectorSize::S512,
            &[SizeSpec::Bytes(64 * MIB)],
        );
        let e = plan(&sp).unwrap_err();
        assert_eq!(e.key, LayoutKey::Image(ImageKey::Size));
        assert!(e.reason.contains("4 MiB more needed"), "{e}");
        let sp = spec(
            TableKind::Mbr,
            Some(3 << 40),
            4 * MIB,
            SectorSize::S512,
            &[SizeSpec::Fill],
        );
        let e = plan(&sp).unwrap_err();
        assert!(e.reason.contains("use table = \"gpt\""), "{e}");
        let sp = spec(
            TableKind::Mbr,
            Some(3 << 40),
            4 * MIB,
            SectorSize::S4096,
            &[SizeSpec::Fill],
        );
        assert!(plan(&sp).is_ok());
    }

    #[test]
    fn explicit_starts_and_untabled_partitions() {
        let mut sp = spec(
            TableKind::Mbr,
            Some(64 * MIB),
            4 * MIB,
            SectorSize::S512,
            &[SizeSpec::Bytes(MIB), SizeSpec::Bytes(MIB), SizeSpec::Fill],
        );
        sp.partitions[0].in_table = false;
        sp.partitions[1].start = Some(13 * MIB);
        let p = plan(&sp).unwrap();
        let idx: Vec<u32> = p.partitions.iter().map(|q| q.index).collect();
        assert_eq!(idx, [0, 1, 2]);
        check(
            &sp,
            &[4 * MIB, 13 * MIB, 20 * MIB],
            &[4 * MIB, 4 * MIB, 44 * MIB],
        );
        assert!(!p.aligned && !p.partitions[1].aligned && p.partitions[2].aligned);
        assert!(
            p.notes[0].starts_with("partition[2].start: 13 MiB"),
            "{:?}",
            p.notes
        );
        sp.partitions[1].start = Some(6 * MIB);
        let e = plan(&sp).unwrap_err();
        assert_eq!(e.key, LayoutKey::Partition(1, PartKey::Start));
        assert!(e.reason.contains("overlaps partition[1]"), "{e}");
    }

    /// r26: an explicit start off the erase block on the last partition, with the image size
    /// derived: the image (and the GPT backup tail) still ends on the erase block.
    #[test]
    fn r26_derived_size_ends_on_the_erase_block() {
        for (table, tail) in [(TableKind::Mbr, 0), (TableKind::Gpt, 4 * MIB)] {
            let mut sp = spec(
                table,
                None,
                4 * MIB,
                SectorSize::S512,
                &[SizeSpec::Bytes(MIB), SizeSpec::Bytes(MIB)],
            );
            sp.partitions[1].start = Some(13 * MIB + 512 * 8);
            let p = plan(&sp).unwrap();
            assert_eq!(p.partitions[1].end_bytes(), 17 * MIB + 4096);
            assert_eq!(p.size_bytes, 20 * MIB + tail, "{table}");
            assert_eq!(p.size_bytes % (4 * MIB), 0);
            if let Some(g) = p.gpt {
                assert_eq!((g.backup_entries_lba * 512) % (4 * MIB), 4 * MIB - 33 * 512);
                assert_eq!(g.backup_header_lba, p.size_bytes / 512 - 1);
            }
        }
    }

    #[test]
    fn explicit_start_overlap_is_an_error() {
        let mut sp = spec(
            TableKind::Mbr,
            Some(64 * MIB),
            4 * MIB,
            SectorSize::S512,
            &[SizeSpec::Bytes(MIB), SizeSpec::Bytes(MIB), SizeSpec::Fill],
        );
        sp.partitions[0].in_table = false;
        sp.partitions[1].start = Some(6 * MIB);
        let e = plan(&sp).unwrap_err();
        assert_eq!(e.key, LayoutKey::Partition(1, PartKey::Start));
        assert!(e.reason.contains("overlaps partition[1]"), "{e}");
    }

    #[test]
    fn raw_writes_are_checked() {
        let sp = spec(
            TableKind::Gpt,
            Some(64 * MIB),
            4 * MIB,
            SectorSize::S512,
            &[SizeSpec::Bytes(MIB), SizeSpec::Fill],
        );
        let base = plan(&sp).unwrap();
        let raw = |i: usize, off: u64, len: u64| RawPlan {
            spec_index: i,
            offset_bytes: off,
            size_bytes: len,
            source: "b".into(),
        };
        let mut p = base.clone();
        place_raw(&mut p, vec![raw(0, 64 * 512, 1000), raw(1, 2 * MIB, 4096)]).unwrap();
        assert_eq!(p.raw.len(), 2);
        for (raws, who, what) in [
            (vec![raw(0, 8192, 1000)], 0, "primary GPT"),
            (vec![raw(0, 0, 10)], 0, "protective MBR"),
            (vec![raw(0, 4 * MIB - 10, 20)], 0, "partition[1]"),
            (vec![raw(0, 64 * MIB - 512, 512)], 0, "backup GPT"),
            (
                vec![raw(0, 64 * 512, 1000), raw(1, 65 * 512, 10)],
                1,
                "raw[1]",
            ),
            (vec![raw(0, 64 * MIB, 1)], 0, "past the image"),
            (vec![raw(0, 64 * 512, 0)], 0, "empty"),
        ] {
            let mut p = base.clone();
            let (i, reason) = place_raw(&mut p, raws).unwrap_err();
            assert_eq!(i, who, "{reason}");
            assert!(reason.contains(what), "{reason}");
        }
    }

    fn arb_spec() -> impl Strategy<Value = Layout> {
        (
            prop_oneof![
                Just(TableKind::Mbr),
                Just(TableKind::Gpt),
                Just(TableKind::None)
            ],
            prop_oneof![Just(SectorSize::S512), Just(SectorSize::S4096)],
            12u32..=24,
            prop::collection::vec(1u64..(64 * MIB), 1..10),
            any::<bool>(),
            prop::option::of(0u64..(2048 * MIB)),
        )
            .prop_map(|(table, s, eshift, sizes, fill, disk)| {
                let mut parts: Vec<SizeSpec> = sizes.into_iter().map(SizeSpec::Bytes).collect();
                if table == TableKind::None {
                    parts.truncate(1);
                }
                if fill {
                    if let Some(l) = parts.last_mut() {
                        *l = SizeSpec::Fill;
                    }
                }
                let disk = disk.map(|d| round_down(d, s.bytes_u64()).max(s.bytes_u64()));
                spec(table, disk, (1u64 << eshift).max(s.bytes_u64()), s, &parts)
            })
    }

    proptest! {
        #[test]
        fn plans_are_aligned_ordered_and_inside(sp in arb_spec()) {
            match plan(&sp) {
                Err(e) => prop_assert!(!e.reason.is_empty()),
                Ok(p) => {
                    let e = p.erase_block_bytes;
                    let mut prev_end = 0;
                    for (q, ps) in p.partitions.iter().zip(&sp.partitions) {
                        prop_assert_eq!(q.start_bytes % e, 0);
                        prop_assert!(q.start_bytes >= prev_end);
                        if sp.image.table != TableKind::None {
                            prop_assert!(q.start_bytes > 0);
                        }
                        prop_assert!(q.end_bytes() <= p.size_bytes);
                        if let SizeSpec::Bytes(b) = ps.size { prop_assert!(q.size_bytes >= b); }
                        prev_end = q.end_bytes();
                    }
                    if let Some(g) = p.gpt {
                        let sb = p.sector_bytes.bytes_u64();
                        prop_assert!(prev_end <= (g.last_usable_lba + 1) * sb);
                        prop_assert_eq!(g.backup_header_lba, p.size_bytes / sb - 1);
                        prop_assert!(p.partitions[0].start_bytes >= g.first_usable_lba * sb);
                    }
                    prop_assert!(p.aligned);
                    if sp.image.size.is_none() && sp.image.table != TableKind::None {
                        prop_assert_eq!(p.size_bytes % e, 0);
                    }
                }
            }
        }

        #[test]
        fn random_invalid_specs_are_errors_not_panics(
            table in prop_oneof![Just(TableKind::Mbr), Just(TableKind::Gpt), Just(TableKind::None)],
            e in any::<u64>(),
            fp in prop::option::of(any::<u64>()),
            disk in prop::option::of(any::<u64>()),
            sizes in prop::collection::vec(prop_oneof![any::<u64>().prop_map(SizeSpec::Bytes), Just(SizeSpec::Fill), Just(SizeSpec::Source)], 0..140),
        ) {
            let mut sp = spec(table, disk, e, SectorSize::S512, &sizes);
            sp.image.first_partition = fp;
            match plan(&sp) {
                Ok(p) => prop_assert!(p.partitions.iter().all(|q| q.start_bytes % p.erase_block_bytes == 0 && q.end_bytes() <= p.size_bytes)),
                Err(err) => prop_assert!(!err.reason.is_empty()),
            }
        }

    }
}
