//! The planner's input: the disk (`[image]` of a spec) and, per partition, what decides its
//! place and type. Filesystem options and contents are not here: each filesystem crate owns
//! its options, and the image crate's spec puts the pieces together.
//!
//! [`ImageSpec`] deserialises from the `[image]` table (TOML, a Python dict, a JS object);
//! its serde names are the spec keys, which is why [`LayoutKey`] prints them.

use core::fmt;

use serde::de::{self, Deserializer, Visitor};
use serde::Deserialize;

use crate::attrs::GptAttributes;
use crate::de::{opt_size, opt_uint, parse_uint, size};
use crate::fsplan::FatType;
use crate::guid::Guid;
use crate::units::{parse_size, SectorSize};

/// Partition table kind.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum TableKind {
    /// DOS/MBR table (primary partitions, logical ones through an extended partition).
    #[default]
    Mbr,
    /// GUID partition table with protective MBR.
    Gpt,
    /// No table: the image is one bare filesystem.
    None,
}

impl TableKind {
    /// The spec spelling.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            TableKind::Mbr => "mbr",
            TableKind::Gpt => "gpt",
            TableKind::None => "none",
        }
    }

    /// Parses `mbr` (also `dos`, `msdos`), `gpt`, `none`, case-insensitively.
    pub fn parse(s: &str) -> Result<Self, String> {
        match s.to_ascii_lowercase().as_str() {
            "mbr" | "dos" | "msdos" => Ok(TableKind::Mbr),
            "gpt" => Ok(TableKind::Gpt),
            "none" => Ok(TableKind::None),
            _ => Err(format!("{s:?}: must be \"mbr\", \"gpt\" or \"none\"")),
        }
    }
}

impl fmt::Display for TableKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for TableKind {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        crate::de::from_str(d, "\"mbr\", \"gpt\" or \"none\"", TableKind::parse)
    }
}

/// What goes into a partition.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum FsKind {
    /// FAT; `None` = the type is chosen from the size (`fs = "fat"`).
    Fat(Option<FatType>),
    /// ext4.
    Ext4,
    /// ext2: the ext4 writer without journal, extents and the other ext4 features.
    Ext2,
    /// ext3: ext2 with a journal.
    Ext3,
    /// F2FS, through `mkfs.f2fs` and `sload.f2fs` (f2fs-tools).
    F2fs,
    /// exFAT (`blockwise-exfat`).
    Exfat,
    /// Linux swap: a `mkswap`-style header (label, UUID), the rest left empty.
    Swap,
    /// squashfs 4.0 (read-only, compressed) from `contents`.
    Squashfs,
    /// EROFS (read-only) from `contents`.
    Erofs,
    /// A dm-verity hash tree over another partition (`of = "NAME"`).
    Verity,
    /// A file copied verbatim (`source`).
    Raw,
    /// Nothing: the partition is left empty (a hole).
    None,
}

impl FsKind {
    /// The spellings `fs` accepts, for messages.
    pub const CHOICES: &'static str =
        "fat12, fat16, fat32, fat, exfat, ext4, ext3, ext2, f2fs, squashfs, erofs, verity, swap, raw, none";

    /// The spec spelling.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            FsKind::Fat(None) => "fat",
            FsKind::Fat(Some(t)) => t.name(),
            FsKind::Ext4 => "ext4",
            FsKind::Ext2 => "ext2",
            FsKind::Ext3 => "ext3",
            FsKind::F2fs => "f2fs",
            FsKind::Exfat => "exfat",
            FsKind::Swap => "swap",
            FsKind::Squashfs => "squashfs",
            FsKind::Erofs => "erofs",
            FsKind::Verity => "verity",
            FsKind::Raw => "raw",
            FsKind::None => "none",
        }
    }

    /// ext2, ext3 or ext4: written by the ext4 crate, options in `partition.ext4`.
    #[must_use]
    pub fn is_ext(self) -> bool {
        matches!(self, FsKind::Ext2 | FsKind::Ext3 | FsKind::Ext4)
    }

    /// Any FAT variant.
    #[must_use]
    pub fn is_fat(self) -> bool {
        matches!(self, FsKind::Fat(_))
    }

    /// Parses the spec spelling (`fat32`, `ext4`, …), case-insensitively.
    #[must_use]
    pub fn parse(s: &str) -> Option<Self> {
        let lower = s.to_ascii_lowercase();
        Some(match lower.as_str() {
            "fat" | "vfat" => FsKind::Fat(None),
            "ext4" => FsKind::Ext4,
            "ext2" => FsKind::Ext2,
            "ext3" => FsKind::Ext3,
            "f2fs" => FsKind::F2fs,
            "exfat" => FsKind::Exfat,
            "swap" => FsKind::Swap,
            "squashfs" => FsKind::Squashfs,
            "erofs" => FsKind::Erofs,
            "verity" => FsKind::Verity,
            "raw" => FsKind::Raw,
            "none" => FsKind::None,
            other => FsKind::Fat(Some(FatType::from_name(other)?)),
        })
    }
}

impl fmt::Display for FsKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for FsKind {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        crate::de::from_str(d, "a filesystem name", |s| {
            FsKind::parse(s).ok_or_else(|| format!("{s:?}: must be one of {}", FsKind::CHOICES))
        })
    }
}

/// A partition size request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SizeSpec {
    /// At least this many bytes (rounded up to the erase block).
    Bytes(u64),
    /// Everything up to the end of the disk (last partition only).
    Fill,
    /// No size given: for `fs = "raw"` the length of `source`, filled in by the image
    /// builder before planning; for anything else an error.
    Source,
    /// `"auto"`, `"auto+20%+200MiB"`: the smallest erase-block multiple that holds the
    /// contents with the filesystem's overhead and the headroom asked for, computed by the
    /// image builder (FAT and ext4 planners) before planning.
    Auto(AutoSize),
}

/// The headroom of `size = "auto…"`: space left free for files after the contents.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct AutoSize {
    /// Percent of the contents' file bytes, in hundredths (`20%` = 2000).
    pub percent_hundredths: u32,
    /// Bytes on top.
    pub extra_bytes: u64,
}

impl AutoSize {
    /// Largest percentage accepted (1000%).
    pub const MAX_PERCENT: u32 = 1000;

    /// No headroom: plain `"auto"`.
    #[must_use]
    pub fn is_plain(self) -> bool {
        self == AutoSize::default()
    }

    /// Free bytes asked for a tree whose files hold `content_bytes`: the percentage of it
    /// (rounded up) plus the fixed bytes; `None` on overflow.
    #[must_use]
    pub fn headroom(self, content_bytes: u64) -> Option<u64> {
        let pct = u128::from(content_bytes)
            .checked_mul(u128::from(self.percent_hundredths))?
            .div_ceil(10_000);
        u64::try_from(pct).ok()?.checked_add(self.extra_bytes)
    }

    /// Parses `auto`, `auto+20%`, `auto+200MiB`, `auto+20%+200MiB` (terms in any order,
    /// each kind at most once; case and spaces around `+` ignored).
    pub fn parse(s: &str) -> Result<AutoSize, String> {
        let t = s.trim();
        let head = t.get(..4).unwrap_or("");
        if !head.eq_ignore_ascii_case("auto") {
            return Err(format!("{s:?}: an automatic size starts with \"auto\""));
        }
        let mut out = AutoSize::default();
        let (mut pct, mut bytes) = (false, false);
        let rest = t.get(4..).unwrap_or("").trim_start();
        if rest.is_empty() {
            return Ok(out);
        }
        let Some(rest) = rest.strip_prefix('+') else {
            return Err(format!(
                "{s:?}: after \"auto\" only \"+N%\" (percent of the contents) and \"+SIZE\" (like \"+200MiB\") may follow"
            ));
        };
        for term in rest.split('+').map(str::trim) {
            if term.is_empty() {
                return Err(format!("{s:?}: an empty term after \"+\""));
            }
            if let Some(num) = term.strip_suffix('%') {
                if pct {
                    return Err(format!("{s:?}: the percentage is given twice"));
                }
                pct = true;
                out.percent_hundredths = parse_percent(num.trim()).ok_or_else(|| {
                    format!(
                        "{s:?}: {term:?} is not a percentage from 0% to {}% (at most two decimals)",
                        AutoSize::MAX_PERCENT
                    )
                })?;
            } else {
                if bytes {
                    return Err(format!("{s:?}: the extra size is given twice"));
                }
                bytes = true;
                out.extra_bytes = parse_size(term).map_err(|e| {
                    format!("{s:?}: {term:?} is neither a percentage like \"20%\" nor a size like \"200MiB\" ({e})")
                })?;
            }
        }
        Ok(out)
    }
}

/// `"20"`, `"12.5"`, `"0.25"` as hundredths of a percent, at most [`AutoSize::MAX_PERCENT`].
fn parse_percent(s: &str) -> Option<u32> {
    let (int, frac) = s.split_once('.').unwrap_or((s, ""));
    if int.is_empty() && frac.is_empty()
        || !int.bytes().all(|b| b.is_ascii_digit())
        || !frac.bytes().all(|b| b.is_ascii_digit())
        || frac.len() > 2
        || int.len() > 5
    {
        return None;
    }
    let whole: u32 = if int.is_empty() { 0 } else { int.parse().ok()? };
    let mut f: u32 = if frac.is_empty() {
        0
    } else {
        frac.parse().ok()?
    };
    if frac.len() == 1 {
        f *= 10;
    }
    let v = whole.checked_mul(100)?.checked_add(f)?;
    (v <= AutoSize::MAX_PERCENT * 100).then_some(v)
}

impl fmt::Display for AutoSize {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("auto")?;
        let p = self.percent_hundredths;
        if p != 0 {
            if p % 100 == 0 {
                write!(f, "+{}%", p / 100)?;
            } else {
                write!(f, "+{}.{:02}%", p / 100, p % 100)?;
            }
        }
        if self.extra_bytes != 0 {
            let b = self.extra_bytes;
            match [("TiB", 40u32), ("GiB", 30), ("MiB", 20), ("KiB", 10)]
                .into_iter()
                .find(|&(_, sh)| b >> sh > 0 && b % (1u64 << sh) == 0)
            {
                Some((unit, sh)) => write!(f, "+{}{unit}", b >> sh)?,
                None => write!(f, "+{b}")?,
            }
        }
        Ok(())
    }
}

impl SizeSpec {
    /// What an absent `size` key means: [`SizeSpec::Source`].
    #[must_use]
    pub fn absent() -> Self {
        SizeSpec::Source
    }
}

impl<'de> Deserialize<'de> for SizeSpec {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = SizeSpec;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a size like \"256MiB\", a number of bytes, \"fill\" or \"auto\"")
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<SizeSpec, E> {
                Ok(SizeSpec::Bytes(v))
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<SizeSpec, E> {
                u64::try_from(v)
                    .map(SizeSpec::Bytes)
                    .map_err(|_| E::custom(format!("size must not be negative, found {v}")))
            }
            fn visit_f64<E: de::Error>(self, v: f64) -> Result<SizeSpec, E> {
                crate::de::float_bytes(v)
                    .map(SizeSpec::Bytes)
                    .map_err(E::custom)
            }
            fn visit_str<E: de::Error>(self, s: &str) -> Result<SizeSpec, E> {
                if s.trim().eq_ignore_ascii_case("fill") {
                    return Ok(SizeSpec::Fill);
                }
                if s.trim()
                    .get(..4)
                    .is_some_and(|h| h.eq_ignore_ascii_case("auto"))
                {
                    return AutoSize::parse(s).map(SizeSpec::Auto).map_err(E::custom);
                }
                parse_size(s).map(SizeSpec::Bytes).map_err(E::custom)
            }
        }
        d.deserialize_any(V)
    }
}

/// A disk identifier from `image.disk-id`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DiskId {
    /// MBR disk signature.
    Mbr(u32),
    /// GPT disk GUID.
    Gpt(Guid),
}

impl DiskId {
    /// Parses a GUID or a 32-bit number (`"0x5452574f"`).
    pub fn parse(s: &str) -> Result<Self, String> {
        if let Ok(g) = s.parse::<Guid>() {
            return Ok(DiskId::Gpt(g));
        }
        parse_uint(s)
            .and_then(|n| u32::try_from(n).ok())
            .map(DiskId::Mbr)
            .ok_or_else(|| {
                format!("{s:?} is neither a 32-bit number like \"0x5452574f\" nor a GUID")
            })
    }
}

impl<'de> Deserialize<'de> for DiskId {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = DiskId;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a string like \"0x5452574f\" or a GUID")
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<DiskId, E> {
                u32::try_from(v)
                    .map(DiskId::Mbr)
                    .map_err(|_| E::custom(format!("{v} does not fit 32 bits")))
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<DiskId, E> {
                u32::try_from(v)
                    .map(DiskId::Mbr)
                    .map_err(|_| E::custom(format!("{v} does not fit 32 bits")))
            }
            fn visit_str<E: de::Error>(self, s: &str) -> Result<DiskId, E> {
                DiskId::parse(s).map_err(E::custom)
            }
        }
        d.deserialize_any(V)
    }
}

impl<'de> Deserialize<'de> for SectorSize {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let n = size(d)?;
        SectorSize::from_bytes(n)
            .ok_or_else(|| de::Error::custom(format!("{n}: must be 512 or 4096")))
    }
}

/// Largest `image.timestamp` accepted (a little past 2514).
pub const MAX_TIMESTAMP: u64 = 4 * u32::MAX as u64;

/// The `[image]` table.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
#[serde(default, deny_unknown_fields, rename_all = "kebab-case")]
pub struct ImageSpec {
    /// Total image size; `None` = computed from the partitions.
    #[serde(deserialize_with = "opt_size")]
    pub size: Option<u64>,
    /// Erase block E in bytes (power of two).
    #[serde(deserialize_with = "size")]
    pub erase_block: u64,
    /// Device logical sector size.
    pub sector_size: SectorSize,
    /// Partition table kind.
    pub table: TableKind,
    /// Start of the first partition; `None` = one erase block (or more if the table needs it).
    #[serde(deserialize_with = "opt_size")]
    pub first_partition: Option<u64>,
    /// Explicit disk ID; `None` = derived from `seed`.
    pub disk_id: Option<DiskId>,
    /// What `seed` the spec asks for: a number, `"random"`, or (absent) one derived from
    /// the spec and its inputs.
    #[serde(rename = "seed", deserialize_with = "crate::de::seed_choice")]
    pub seed_choice: SeedChoice,
    /// Seed of every derived ID, UUID and hash seed: the number given, or the one resolved
    /// for [`ImageSpec::seed_choice`] by the front end (`blockwise_image::resolve_seed`)
    /// before planning.
    #[serde(skip)]
    pub seed: u64,
    /// File timestamps when not preserved; `None` = `SOURCE_DATE_EPOCH` or 0 (resolved by the caller).
    #[serde(deserialize_with = "opt_uint::<_, u64, MAX_TIMESTAMP>")]
    pub timestamp: Option<u64>,
    /// MBR: the entry (1–4) that holds the extended partition (genimage's
    /// `extended-partition`): entries before it are primary, the partitions after them
    /// logical (5, 6, …) unless `primary = true`; `None` = entry 4 when there are more than
    /// four partitions.
    #[serde(deserialize_with = "opt_uint::<_, u8, 4>")]
    pub extended_partition: Option<u8>,
    /// `boot-code`: a file whose bytes (at most 440, see [`crate::boot_code_bytes`]) go into
    /// sector 0's boot code area, relative to the spec file; `None` = zeros there.
    pub boot_code: Option<String>,
    /// The bytes of [`ImageSpec::boot_code`], read by the front end (the pure crates read no
    /// files) and checked with [`crate::boot_code_bytes`] before planning.
    #[serde(skip)]
    pub boot_code_bytes: Option<Vec<u8>>,
}

impl Default for ImageSpec {
    fn default() -> Self {
        ImageSpec {
            size: None,
            erase_block: 4 << 20,
            sector_size: SectorSize::S512,
            table: TableKind::Mbr,
            first_partition: None,
            disk_id: None,
            seed_choice: SeedChoice::Derived,
            seed: 1,
            timestamp: None,
            extended_partition: None,
            boot_code: None,
            boot_code_bytes: None,
        }
    }
}

/// What `image.seed` says.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum SeedChoice {
    /// No `seed`: derived from the spec and a fingerprint of its inputs, so different images
    /// get different IDs and the same inputs the same bytes.
    #[default]
    Derived,
    /// `seed = N`: exactly this one.
    Fixed(u64),
    /// `seed = "random"`: a fresh one for each build.
    Random,
}

/// What the planner needs to know about one partition.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PartitionLayout {
    /// GPT partition name; default = label.
    pub name: Option<String>,
    /// Filesystem or content kind (decides the default type).
    pub fs: FsKind,
    /// Requested size.
    pub size: SizeSpec,
    /// Explicit partition type (MBR byte, GPT GUID or alias); `None` = from `fs`.
    pub type_: Option<String>,
    /// Bootable flag (MBR 0x80; GPT legacy-BIOS-bootable attribute).
    pub bootable: bool,
    /// Filesystem label (the GPT name when `name` is not given).
    pub label: Option<String>,
    /// Pinned GPT unique partition GUID (`uuid`); `None` = derived from `image.seed`.
    pub uuid: Option<Guid>,
    /// Explicit start in bytes (`start`); `None` = right after the previous partition, on
    /// the erase block.
    pub start: Option<u64>,
    /// Listed in the partition table (`in-partition-table`, default true). When false the
    /// partition's bytes are written at its place but no table entry points at them.
    pub in_table: bool,
    /// GPT attribute bits (`attributes`) other than bit 2, which is `bootable`.
    pub attributes: GptAttributes,
    /// A/B slots (`slots = ["a", "b"]`): the partition is laid out once per slot, each copy
    /// on its own erase blocks, its name and label suffixed `_a`, `_b`, …; empty = one.
    pub slots: Vec<String>,
    /// MBR: a primary partition after the logical ones (genimage's `forced-primary`), in
    /// the entries after the extended partition's.
    pub primary: bool,
    /// GPT: the MBR type (byte or alias, as `type` takes it for an MBR) under which this
    /// partition is mirrored into a hybrid MBR (genimage's `partition-type` with
    /// `partition-table-type = "hybrid"`); `None` = only in the GPT.
    pub mbr_type: Option<String>,
}

impl PartitionLayout {
    /// A partition of `fs` with `size` and nothing else set.
    #[must_use]
    pub fn new(fs: FsKind, size: SizeSpec) -> Self {
        PartitionLayout {
            name: None,
            fs,
            size,
            type_: None,
            bootable: false,
            label: None,
            uuid: None,
            start: None,
            in_table: true,
            attributes: GptAttributes::NONE,
            slots: Vec::new(),
            primary: false,
            mbr_type: None,
        }
    }

    /// How many partitions this one becomes: one per slot, at least one.
    #[must_use]
    pub fn copies(&self) -> usize {
        self.slots.len().max(1)
    }

    /// The GPT name of the copy for `slot`: `name` (or `label`), suffixed `_SLOT` when
    /// slotted.
    #[must_use]
    pub fn name_for(&self, slot: Option<&str>) -> Option<String> {
        let base = self.name.clone().or_else(|| self.label.clone())?;
        Some(crate::slots::with_suffix(&base, slot))
    }
}

/// The whole planner input.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct Layout {
    /// The disk.
    pub image: ImageSpec,
    /// The partitions, in spec order.
    pub partitions: Vec<PartitionLayout>,
}

/// A key of the `[image]` table.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ImageKey {
    /// `size`.
    Size,
    /// `erase-block`.
    EraseBlock,
    /// `sector-size`.
    SectorSize,
    /// `table`.
    Table,
    /// `first-partition`.
    FirstPartition,
    /// `disk-id`.
    DiskId,
    /// `extended-partition`.
    ExtendedPartition,
    /// `boot-code`.
    BootCode,
}

impl ImageKey {
    /// The spec spelling.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            ImageKey::Size => "size",
            ImageKey::EraseBlock => "erase-block",
            ImageKey::SectorSize => "sector-size",
            ImageKey::Table => "table",
            ImageKey::FirstPartition => "first-partition",
            ImageKey::DiskId => "disk-id",
            ImageKey::ExtendedPartition => "extended-partition",
            ImageKey::BootCode => "boot-code",
        }
    }
}

/// A layout key of one `[[partition]]`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum PartKey {
    /// `fs`.
    Fs,
    /// `size`.
    Size,
    /// `type`.
    Type,
    /// `name`.
    Name,
    /// `bootable`.
    Bootable,
    /// `uuid`.
    Uuid,
    /// `start`.
    Start,
    /// `in-partition-table`.
    InPartitionTable,
    /// `primary`.
    Primary,
    /// `attributes`.
    Attributes,
    /// `slots`.
    Slots,
    /// `mbr-type`.
    MbrType,
}

impl PartKey {
    /// The spec spelling.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            PartKey::Fs => "fs",
            PartKey::Size => "size",
            PartKey::Type => "type",
            PartKey::Name => "name",
            PartKey::Bootable => "bootable",
            PartKey::Uuid => "uuid",
            PartKey::Start => "start",
            PartKey::InPartitionTable => "in-partition-table",
            PartKey::Primary => "primary",
            PartKey::Attributes => "attributes",
            PartKey::Slots => "slots",
            PartKey::MbrType => "mbr-type",
        }
    }
}

/// Which part of the layout an error is about. Displays as the spec key
/// (`image.erase-block`, `partition[2].size`; partition numbers are 1-based).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum LayoutKey {
    /// A key of `[image]`.
    Image(ImageKey),
    /// The `[[partition]]` array as a whole.
    Partitions,
    /// A key of the partition at this 0-based index.
    Partition(usize, PartKey),
}

impl fmt::Display for LayoutKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LayoutKey::Image(k) => write!(f, "image.{}", k.as_str()),
            LayoutKey::Partitions => f.write_str("partition"),
            LayoutKey::Partition(i, k) => {
                write!(f, "partition[{}].{}", i.saturating_add(1), k.as_str())
            }
        }
    }
}

/// A layout that cannot be planned, with the key that is wrong.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{key}: {reason}")]
pub struct LayoutError {
    /// Which key.
    pub key: LayoutKey,
    /// What is wrong and, where possible, what to do.
    pub reason: String,
}

impl LayoutError {
    /// A new error.
    pub fn new(key: LayoutKey, reason: impl Into<String>) -> Self {
        LayoutError {
            key,
            reason: reason.into(),
        }
    }

    pub(crate) fn image(k: ImageKey, reason: impl Into<String>) -> Self {
        LayoutError::new(LayoutKey::Image(k), reason)
    }

    pub(crate) fn part(i: usize, k: PartKey, reason: impl Into<String>) -> Self {
        LayoutError::new(LayoutKey::Partition(i, k), reason)
    }
}

/// Most partitions an MBR layout may list: partitions 1–3, the extended partition 4 and
/// logical partitions 5–60. util-linux's fdisk and sfdisk read at most 60 partition numbers
/// and drop the rest when they write the table back; the kernel reads up to 255, and verify
/// reads the EBR chain at least that far.
pub const MAX_MBR_PARTITIONS: usize = 59;

/// Smallest and largest erase block accepted.
pub const ERASE_BLOCK_RANGE: (u64, u64) = (4096, 256 << 20);

/// Checks an erase-block size against [`ERASE_BLOCK_RANGE`]; the error says the rule (the
/// same words for `plan`, `build` and `verify`).
pub fn check_erase_block(bytes: u64) -> Result<(), String> {
    let (min, max) = ERASE_BLOCK_RANGE;
    if bytes.is_power_of_two() && (min..=max).contains(&bytes) {
        Ok(())
    } else {
        let decimal = if bytes % 1000 == 0 && bytes > 0 {
            format!(
                "; {} bytes is a decimal size (KB, MB, GB are powers of 1000): write KiB or MiB, e.g. \"4MiB\"",
                crate::units::group_thousands(bytes)
            )
        } else {
            String::new()
        };
        Err(format!(
            "must be a power of two from {} to {} (SD cards: 4 MiB or 8 MiB, old USB sticks: 128 KiB){decimal}",
            crate::format_size(min),
            crate::format_size(max)
        ))
    }
}

impl Layout {
    /// The boot code `image.boot-code` puts into sector 0: `None` without the key; an error
    /// when the front end did not read the file or its bytes break
    /// [`crate::boot_code_bytes`]'s rules. The planner's check (the file is read after the
    /// spec is parsed).
    pub fn boot_code(&self) -> Result<Option<crate::BootCode>, LayoutError> {
        let img = &self.image;
        let Some(path) = &img.boot_code else {
            return Ok(None);
        };
        let shown = crate::display_str(path);
        let bytes = img.boot_code_bytes.as_deref().ok_or_else(|| {
            LayoutError::image(
                ImageKey::BootCode,
                format!("{shown:?} was not read: this front end reads no files (the blockwise CLI and Python package do)"),
            )
        })?;
        let code = crate::boot_code_bytes(bytes)
            .map_err(|why| LayoutError::image(ImageKey::BootCode, format!("{shown:?} {why}")))?;
        Ok(crate::BootCode::of(code))
    }

    /// Cross-key checks of the disk and the partitions' places (also run by [`crate::plan()`]).
    pub fn validate(&self) -> Result<(), LayoutError> {
        let img = &self.image;
        if let Some(path) = &img.boot_code {
            let shown = crate::display_str(path);
            if img.table == TableKind::None {
                return Err(LayoutError::image(
                    ImageKey::BootCode,
                    format!("{shown:?}: boot code goes into an MBR, and table = \"none\" has none (a bare filesystem's sector 0 is its own boot sector)"),
                ));
            }
        }
        let eb = img.erase_block;
        if let Err(why) = check_erase_block(eb) {
            return Err(LayoutError::image(
                ImageKey::EraseBlock,
                format!("{eb}: {why}"),
            ));
        }
        if eb < img.sector_size.bytes_u64() {
            return Err(LayoutError::image(
                ImageKey::EraseBlock,
                format!("{eb} is smaller than the {}-byte sector", img.sector_size),
            ));
        }
        if let Some(s) = img.size {
            if s == 0 || s % img.sector_size.bytes_u64() != 0 {
                return Err(LayoutError::image(
                    ImageKey::Size,
                    format!(
                        "{s} must be a non-zero multiple of the {}-byte sector size",
                        img.sector_size
                    ),
                ));
            }
        }
        if let Some(fp) = img.first_partition {
            if img.table == TableKind::None {
                return Err(LayoutError::image(
                    ImageKey::FirstPartition,
                    "has no meaning with table = \"none\" (the filesystem starts at byte 0)",
                ));
            }
            if fp == 0 || fp % eb != 0 {
                return Err(LayoutError::image(
                    ImageKey::FirstPartition,
                    format!("{fp} must be a non-zero multiple of the erase block ({eb})"),
                ));
            }
        }
        let disk_id_problem = match (img.table, img.disk_id) {
            (TableKind::Gpt, Some(DiskId::Mbr(_))) => {
                Some("a GPT disk ID is a GUID like \"8f3c…-…\", not a 32-bit number")
            }
            (TableKind::Mbr, Some(DiskId::Gpt(_))) => {
                Some("an MBR disk ID is a 32-bit number like \"0x5452574f\", not a GUID")
            }
            (TableKind::None, Some(_)) => Some(
                "has no meaning with table = \"none\"; the filesystem UUID derives from image.seed",
            ),
            _ => None,
        };
        if let Some(reason) = disk_id_problem {
            return Err(LayoutError::image(ImageKey::DiskId, reason));
        }
        let n = self.partitions.len();
        if n == 0 {
            return Err(LayoutError::new(
                LayoutKey::Partitions,
                "the spec has no [[partition]]; add at least one",
            ));
        }
        if img.table == TableKind::None && n != 1 {
            return Err(LayoutError::new(
                LayoutKey::Partitions,
                format!("table = \"none\" makes a bare filesystem image and takes exactly one [[partition]], found {n}"),
            ));
        }
        let tabled: usize = self
            .partitions
            .iter()
            .filter(|p| p.in_table)
            .map(PartitionLayout::copies)
            .sum();
        if img.table == TableKind::Gpt && tabled > 128 {
            return Err(LayoutError::new(
                LayoutKey::Partitions,
                format!("GPT holds at most 128 partitions, found {tabled}"),
            ));
        }
        if img.table == TableKind::Mbr && tabled > MAX_MBR_PARTITIONS {
            return Err(LayoutError::new(
                LayoutKey::Partitions,
                format!("an MBR table holds at most {MAX_MBR_PARTITIONS} partitions (3 primary, then logical ones numbered 5 to {}: fdisk and sfdisk list no more and drop the rest when they save the table), found {tabled}; use table = \"gpt\" (up to 128)", MAX_MBR_PARTITIONS + 1),
            ));
        }
        let last = n - 1;
        for (i, p) in self.partitions.iter().enumerate() {
            if p.size == SizeSpec::Fill && i != last {
                return Err(LayoutError::part(
                    i,
                    PartKey::Size,
                    "\"fill\" is only allowed on the last partition",
                ));
            }
            if p.size == SizeSpec::Fill && img.size.is_none() {
                return Err(LayoutError::part(
                    i,
                    PartKey::Size,
                    "\"fill\" needs image.size (the disk size to fill up to)",
                ));
            }
            if p.size == SizeSpec::Bytes(0) {
                return Err(LayoutError::part(i, PartKey::Size, "must not be 0"));
            }
            if img.table == TableKind::None && (p.type_.is_some() || p.bootable) {
                return Err(LayoutError::part(
                    i,
                    if p.bootable {
                        PartKey::Bootable
                    } else {
                        PartKey::Type
                    },
                    "has no meaning with table = \"none\" (there is no partition table)",
                ));
            }
            if img.table == TableKind::None && (!p.in_table || p.start.is_some()) {
                return Err(LayoutError::part(
                    i,
                    if p.in_table {
                        PartKey::Start
                    } else {
                        PartKey::InPartitionTable
                    },
                    "has no meaning with table = \"none\" (the filesystem is the whole image)",
                ));
            }
            if !p.in_table && (p.type_.is_some() || p.bootable || p.uuid.is_some()) {
                return Err(LayoutError::part(
                    i,
                    if p.bootable {
                        PartKey::Bootable
                    } else if p.uuid.is_some() {
                        PartKey::Uuid
                    } else {
                        PartKey::Type
                    },
                    "is stored in the partition table, but this partition has in-partition-table = false",
                ));
            }
            if let Some(st) = p.start {
                let sb = img.sector_size.bytes_u64();
                if st == 0 || st % sb != 0 {
                    return Err(LayoutError::part(
                        i,
                        PartKey::Start,
                        format!("{st} must be a non-zero multiple of the {sb}-byte sector"),
                    ));
                }
            }
            if p.uuid.is_some() && img.table != TableKind::Gpt {
                return Err(LayoutError::part(
                    i,
                    PartKey::Uuid,
                    format!("only GPT stores partition UUIDs (this table is {}); use table = \"gpt\", or pin image.disk-id (MBR PARTUUIDs are DISKID-NN)", img.table),
                ));
            }
            if !p.attributes.is_empty() && img.table != TableKind::Gpt {
                return Err(LayoutError::part(
                    i,
                    PartKey::Attributes,
                    format!(
                        "only GPT stores partition attributes (this table is {}); use table = \"gpt\", or bootable = true for the MBR boot flag",
                        img.table
                    ),
                ));
            }
            if !p.attributes.is_empty() && !p.in_table {
                return Err(LayoutError::part(
                    i,
                    PartKey::Attributes,
                    "is stored in the partition table, but this partition has in-partition-table = false",
                ));
            }
            crate::slots::validate(i, p, img.table)?;
            crate::hybrid::validate(i, p, img.table)?;
            // Names exist only in GPT; with MBR they are accepted and ignored, so one spec
            // can switch tables.
            if p.name.is_some() || !p.slots.is_empty() {
                for slot in crate::slots::each(&p.slots) {
                    let Some(name) = p.name_for(slot) else {
                        continue;
                    };
                    if name.encode_utf16().count() > 36 {
                        return Err(LayoutError::part(
                            i,
                            if p.name.is_some() {
                                PartKey::Name
                            } else {
                                PartKey::Slots
                            },
                            format!("GPT names hold at most 36 UTF-16 units; {name:?} has more"),
                        ));
                    }
                }
            }
        }
        crate::hybrid::validate_count(self)?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn image_table_deserialises_with_spec_keys() {
        let img: ImageSpec = serde_json::from_str(
            r#"{"size": "2GiB", "erase-block": 4194304, "sector-size": "4KiB", "table": "GPT",
                "disk-id": "0x5452574f", "seed": "0x10", "timestamp": 1700000000}"#,
        )
        .unwrap();
        assert_eq!(img.size, Some(2 << 30));
        assert_eq!(img.sector_size, SectorSize::S4096);
        assert_eq!(img.table, TableKind::Gpt);
        assert_eq!(img.disk_id, Some(DiskId::Mbr(0x5452_574f)));
        assert_eq!(img.seed_choice, SeedChoice::Fixed(16));
        let img: ImageSpec = serde_json::from_str(r#"{"seed": "random"}"#).unwrap();
        assert_eq!(img.seed_choice, SeedChoice::Random);
        assert_eq!(ImageSpec::default().seed_choice, SeedChoice::Derived);
        let e = serde_json::from_str::<ImageSpec>(r#"{"sector-size": 1024}"#).unwrap_err();
        assert!(e.to_string().contains("1024: must be 512 or 4096"), "{e}");
        let e = serde_json::from_str::<ImageSpec>(r#"{"table": "apm"}"#).unwrap_err();
        assert!(
            e.to_string()
                .contains("must be \"mbr\", \"gpt\" or \"none\""),
            "{e}"
        );
    }

    #[test]
    fn keys_print_as_spec_keys() {
        assert_eq!(
            LayoutKey::Partition(1, PartKey::Size).to_string(),
            "partition[2].size"
        );
        assert_eq!(
            LayoutKey::Image(ImageKey::EraseBlock).to_string(),
            "image.erase-block"
        );
        assert_eq!(
            FsKind::parse("FAT16"),
            Some(FsKind::Fat(Some(FatType::Fat16)))
        );
        assert_eq!(FsKind::Fat(None).as_str(), "fat");
    }
}

#[cfg(test)]
mod auto_tests {
    use super::AutoSize;

    fn check(s: &str, want: Result<(u32, u64), &str>) {
        match (AutoSize::parse(s), want) {
            (Ok(a), Ok((p, b))) => {
                assert_eq!((a.percent_hundredths, a.extra_bytes), (p, b), "{s}");
                // Display gives a spelling that parses back to the same value.
                assert_eq!(AutoSize::parse(&a.to_string()), Ok(a), "{s} -> {a}");
            }
            (Err(e), Err(part)) => assert!(e.contains(part), "{s}: {e}"),
            (got, want) => panic!("{s}: got {got:?}, want {want:?}"),
        }
    }

    #[test]
    fn grammar() {
        check("auto", Ok((0, 0)));
        check(" AUTO ", Ok((0, 0)));
        check("auto+20%", Ok((2000, 0)));
        check("auto+200MiB", Ok((0, 200 << 20)));
        check("auto+20%+200MiB", Ok((2000, 200 << 20)));
        check("auto + 200MiB + 12.5%", Ok((1250, 200 << 20)));
        check("auto+0.25%+1000", Ok((25, 1000)));
        check("auto+1000%", Ok((100_000, 0)));
        check("auto+1001%", Err("not a percentage"));
        check("auto+20", Ok((0, 20)));
        check("auto+20%+30%", Err("given twice"));
        check("auto+1MiB+2MiB", Err("given twice"));
        check("auto+", Err("empty term"));
        check("auto-20%", Err("only \"+N%\""));
        check("auto20%", Err("only \"+N%\""));
        check("auto+x", Err("neither a percentage"));
        check("auto+1.234%", Err("not a percentage"));
        check("auto+-5%", Err("not a percentage"));
        check("auto+.%", Err("not a percentage"));
    }

    #[test]
    fn headroom_rounds_up_and_checks_overflow() {
        let a = AutoSize {
            percent_hundredths: 2000,
            extra_bytes: 100,
        };
        assert_eq!(a.headroom(1001), Some(201 + 100));
        assert_eq!(AutoSize::default().headroom(u64::MAX), Some(0));
        let big = AutoSize {
            percent_hundredths: 100_000,
            extra_bytes: 0,
        };
        assert_eq!(big.headroom(u64::MAX), None);
    }
}
