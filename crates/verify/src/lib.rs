//! Alignment and consistency report for any disk image or block device. Never writes.
//!
//! [`verify`] reads only metadata through a [`BlockSource`] (a slice, a [`SparseImage`], a
//! file, a device, a JS callback): the MBR or GPT (both copies), the EBR chain, and the
//! first sectors of every partition (FAT boot sector, FSInfo and backup boot sector, the first
//! and at most 8 sampled sectors of each FAT copy, ext2/3/4 superblock, group descriptors with
//! their checksums, and journal inode). A 32 GiB sparse image verifies in
//! milliseconds. Bad bytes never make it fail: they become [`Finding`]s. `Err` is only the
//! source's own I/O error.
//!
//! The report has the JSON shape of `blockwise plan --json` (it reuses [`PartitionPlan`],
//! [`FatPlan`](blockwise_geometry::FatPlan) and [`Ext4Plan`](blockwise_geometry::Ext4Plan)) so that `verify(build(spec))` can be compared with
//! `plan(spec)` field for field.
//!
//! Finding codes (stable; severity in parentheses: E error, W warning, I info, E* warning or, with `strict`, error):
//!
//! | area | codes |
//! |---|---|
//! | source | `empty-source` (E), `unrecognised` (E, exit 2), `read-failed` (E), `size-not-sector-multiple` (E*), `erase-block-odd` (W), `sector-size-guessed` (I) |
//! | MBR | `mbr-corrupt` (E), `ebr-chain` (E), `logical-outside-extended` (E), `gpt-missing` (E), `mbr-many-partitions` (W), `no-partitions` (I) |
//! | GPT | `gpt-primary-bad`, `gpt-backup-bad`, `gpt-backup-missing`, `gpt-corrupt`, `gpt-copies-differ`, `gpt-entry-range`, `gpt-entry-outside-usable`, `mbr-gpt-disagree` (E); `gpt-backup-not-at-end`, `gpt-no-protective-mbr` (W); `hybrid-mbr`, `protective-mbr-size`, `protective-mbr-bootable` (I) |
//! | partitions | `partition-not-4k-aligned`, `partition-overlap`, `partition-past-end`, `partition-overlaps-table` (E); `partition-not-erase-aligned`, `not-checked` (E*); `partition-empty` (W) |
//! | FAT | `fat-corrupt`, `fat-cluster-count`, `fat-too-many-clusters`, `fat-too-small`, `fat-root-cluster`, `fat-reserved-location`, `fat-larger-than-partition`, `fat-data-not-4k-aligned`, `fat-sector-below-logical` (E); `fat-data-not-aligned` (E*); `fat32-field`, `fat-many-fats`, `fat-boot-signature`, `fat-cluster-straddles`, `fat-sector-4096`, `fat-sector-smaller-than-device`, `fat-fsinfo`, `fat-backup-boot-differs`, `fat-copies-differ`, `fat-entry0-media`, `fat-entry1-eoc` (W); `fat-table-not-aligned`, `fat-no-backup-boot`, `fat-hidden-sectors` (I) |
//! | EROFS, squashfs, dm-verity | `erofs-corrupt`, `erofs-superblock-checksum`, `erofs-larger-than-partition`, `squashfs-corrupt`, `squashfs-larger-than-partition`, `verity-corrupt`, `verity-hash-too-small`, `verity-hash-not-4k-aligned` (E); `erofs-unsupported`, `erofs-small-blocks`, `squashfs-unsupported`, `verity-small-blocks`, `verity-no-data` (W); `verity-hash-not-erase-aligned` (I) |
//! | F2FS | `f2fs-corrupt`, `f2fs-larger-than-partition` (E); `f2fs-section-not-aligned`, `f2fs-main-not-aligned` (E*); `f2fs-superblock-copies` (W); `f2fs-segment0-not-aligned` (I) |
//! | other formats (NTFS, btrfs, XFS, ISO 9660, LUKS, swap) | `fs-header-invalid`, `fs-larger-than-partition` (E) |
//! | exFAT | `exfat-corrupt`, `exfat-boot-checksum`, `exfat-cluster-count`, `exfat-fat-too-small`, `exfat-root-cluster`, `exfat-larger-than-partition`, `exfat-no-bitmap`, `exfat-no-upcase`, `exfat-upcase-checksum`, `exfat-heap-not-4k-aligned`, `exfat-sector-below-logical` (E); `exfat-heap-not-aligned` (E*); `exfat-backup-boot`, `exfat-boot-signature`, `exfat-field`, `exfat-cluster-straddles`, `exfat-fat-entries`, `exfat-guid-checksum` (W); `exfat-partition-offset`, `exfat-fat-not-aligned` (I) |
//! | ext2/3/4 | `ext4-corrupt`, `ext4-inodes-count`, `ext4-superblock-checksum`, `ext4-larger-than-partition`, `ext4-group-desc`, `ext4-group-desc-checksum`, `ext4-unsupported`, `ext4-read-only`, `ext4-first-ino`, `ext4-flex-bg` (E); `ext4-journal-not-aligned` (E*); `ext4-reserved-blocks`, `ext4-first-data-block`, `ext4-stride-mismatch`, `ext4-stripe-mismatch`, `ext4-block-smaller-than-device`, `ext4-small-blocks` (W); `ext4-no-stride`, `ext4-stripe-smaller`, `ext4-inode-table-not-aligned` (I) |
//!
//! ```
//! use blockwise_verify::{verify_bytes, Options};
//! // An MBR with one partition at sector 63 (not 4 KiB aligned).
//! let mut disk = vec![0u8; 8 << 20];
//! disk[0x1be + 4] = 0x83;
//! disk[0x1be + 8..0x1be + 12].copy_from_slice(&63u32.to_le_bytes());
//! disk[0x1be + 12..0x1be + 16].copy_from_slice(&8000u32.to_le_bytes());
//! disk[510] = 0x55;
//! disk[511] = 0xaa;
//! let report = verify_bytes(&disk, &Options::new("disk.img"));
//! assert_eq!(report.partitions[0].start_bytes, 63 * 512);
//! assert!(report.findings.iter().any(|f| f.code == "partition-not-4k-aligned"));
//! assert_eq!(report.exit_code(), 1);
//! ```

// Every module parses or computes on hostile bytes: no indexing, unchecked arithmetic, `as`,
// unwrap or panic. Escapes go through `#[expect(.., reason = "…")]`.
#![deny(
    clippy::indexing_slicing,
    clippy::arithmetic_side_effects,
    clippy::as_conversions,
    clippy::unwrap_used,
    clippy::panic
)]

mod align;
mod bytes;
mod code;
pub mod declared;
pub mod erofs;
pub mod exfat;
pub mod ext4;
pub mod f2fs;
pub mod fat;
mod human;
pub mod label;
pub mod magic;
mod num;
pub mod other;
mod partition;
mod regions;
mod rofs;
mod safe;
pub mod squashfs;
mod table;
pub mod verity;

pub use crate::align::{mbr_sector_guessed, plan_findings};
pub use crate::regions::Region;
pub use crate::safe::{Reason, SafeToFlash, Safety};

use blockwise_geometry::{
    alignment_of, BlockSource, ExtendedPlan, FsKind, FsPlan, GptPlan, OtherFs, PartType,
    PartitionPlan, SectorSize, SparseImage, TableKind, TablePlan,
};
use blockwise_ptable::parse_mbr;
use serde::Serialize;

use crate::bytes::has;
pub use crate::code::FindingCode;
use crate::magic::Content;

/// Default erase block: 4 MiB.
pub const DEFAULT_ERASE_BLOCK: u64 = 4 << 20;
/// Flash page size every start must at least be aligned to.
pub const PAGE: u64 = 4096;
/// Most findings of one kind (overlaps, group descriptors) before the rest are summarised.
const MAX_REPEATED: usize = 16;

/// What the operating system says about a block device (sysfs queue limits). All optional:
/// image files have none.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct DeviceHints {
    /// `queue/logical_block_size`: the LBA unit of MBR/GPT.
    pub logical_block_bytes: Option<u64>,
    /// `queue/physical_block_size`: smallest write without read-modify-write.
    pub physical_block_bytes: Option<u64>,
    /// `queue/minimum_io_size`.
    pub minimum_io_bytes: Option<u64>,
    /// `queue/optimal_io_size` (0 = not reported, stored as `None`).
    pub optimal_io_bytes: Option<u64>,
    /// `device/preferred_erase_size` (SD/MMC).
    pub preferred_erase_bytes: Option<u64>,
}

/// How to verify.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Options {
    /// Name of the source, for the report (`source`).
    pub source: String,
    /// Erase block E to check against (default 4 MiB); 0: the erase block the image declares
    /// ([`declared::declared_erase_block`], what `verify` without `--erase-block` does).
    pub erase_block: u64,
    /// Erase-block misalignment is an error instead of a warning.
    pub strict: bool,
    /// Logical sector size of the partition table; `None` = detect (GPT at 512 or 4096,
    /// then device hints, then content).
    pub sector_size: Option<SectorSize>,
    /// Device hints, when the source is a block device.
    pub device: Option<DeviceHints>,
    /// Look for data outside the partitions (bootloader areas, untabled filesystems): reads
    /// the gaps before the last partition, up to 256 MiB. The browser turns it off to keep
    /// its fetch rounds under 1 MiB.
    pub scan_gaps: bool,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            source: String::new(),
            erase_block: DEFAULT_ERASE_BLOCK,
            strict: false,
            sector_size: None,
            device: None,
            scan_gaps: true,
        }
    }
}

impl Options {
    /// Default options for a source called `source`.
    #[must_use]
    pub fn new(source: impl Into<String>) -> Self {
        Options {
            source: source.into(),
            ..Options::default()
        }
    }

    /// Sets the erase block.
    #[must_use]
    pub fn erase_block(mut self, bytes: u64) -> Self {
        self.erase_block = bytes;
        self
    }

    /// Turns the scan for data outside the partitions on or off.
    #[must_use]
    pub fn scan_gaps(mut self, on: bool) -> Self {
        self.scan_gaps = on;
        self
    }

    /// Makes erase-block misalignment an error.
    #[must_use]
    pub fn strict(mut self, strict: bool) -> Self {
        self.strict = strict;
        self
    }

    /// Forces the logical sector size.
    #[must_use]
    pub fn sector_size(mut self, s: Option<SectorSize>) -> Self {
        self.sector_size = s;
        self
    }

    /// Attaches device hints.
    #[must_use]
    pub fn device(mut self, hints: Option<DeviceHints>) -> Self {
        self.device = hints;
        self
    }
}

/// How bad a finding is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    /// Misaligned to flash pages, inconsistent or unreadable: exit code 1.
    Error,
    /// Works, but costs write amplification or compatibility.
    Warning,
    /// Worth knowing.
    Info,
}

impl Severity {
    /// `Error` when `is_error`, else `Warning`.
    #[must_use]
    pub fn error_if(is_error: bool) -> Self {
        if is_error {
            Severity::Error
        } else {
            Severity::Warning
        }
    }

    /// `error`, `warning`, `info`.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Severity::Error => "error",
            Severity::Warning => "warning",
            Severity::Info => "info",
        }
    }
}

/// One thing verify found.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Finding {
    /// How bad.
    pub severity: Severity,
    /// Stable code, serialised kebab-case (`partition-not-4k-aligned`, `gpt-backup-missing`, …).
    pub code: FindingCode,
    /// Partition number it concerns (0 = bare filesystem), or `None` for the disk.
    pub partition: Option<u32>,
    /// What is wrong, what it costs and what to do.
    pub message: String,
}

/// The result of verifying a source: the JSON of DESIGN.md.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Report {
    /// Source name.
    pub source: String,
    /// Source size.
    pub size_bytes: u64,
    /// Logical sector size the table was read with.
    pub sector_bytes: SectorSize,
    /// Erase block checked against.
    pub erase_block_bytes: u64,
    /// Where that erase block came from, when it was not given ([`Options::erase_block`] 0):
    /// which declaration of the image and why.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub erase_block_source: Option<declared::EraseBlockSource>,
    /// Partition table kind and disk ID.
    pub table: TablePlan,
    /// Partitions in table order (bare filesystem: partition 0 at 0).
    pub partitions: Vec<PartitionPlan>,
    /// The MBR extended partition, when the MBR has one (as in a plan).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub extended: Option<ExtendedPlan>,
    /// Where the GPT structures are, from the copy used (as in a plan).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gpt: Option<GptPlan>,
    /// Findings, errors first.
    pub findings: Vec<Finding>,
    /// Every partition and filesystem aligned to the erase block.
    pub aligned: bool,
    /// Device hints, when the source is a block device.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub device: Option<DeviceHints>,
    /// Data outside every partition and the table: bootloaders at fixed offsets, partitions
    /// left out of the table.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub regions: Vec<Region>,
    /// Partitions that are A/B slots of one another (`system_a`, `system_b`), found by
    /// their names or labels; the plan of a spec with `slots` lists the same.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub slots: Vec<blockwise_geometry::SlotGroup>,
    /// False when neither a table nor a filesystem was recognised (exit code 2).
    #[serde(skip)]
    pub recognised: bool,
}

impl Report {
    fn new(src_len: u64, opts: &Options, e: u64) -> Self {
        Report {
            source: opts.source.clone(),
            size_bytes: src_len,
            sector_bytes: SectorSize::S512,
            erase_block_bytes: e,
            erase_block_source: None,
            table: TablePlan {
                kind: TableKind::None,
                disk_id: None,
                boot_code: None,
            },
            partitions: Vec::new(),
            extended: None,
            gpt: None,
            findings: Vec::new(),
            aligned: false,
            device: opts.device.clone(),
            regions: Vec::new(),
            slots: Vec::new(),
            recognised: true,
        }
    }

    /// Number of findings of `severity`.
    #[must_use]
    pub fn count(&self, severity: Severity) -> usize {
        self.findings
            .iter()
            .filter(|f| f.severity == severity)
            .count()
    }

    /// The CLI exit code: 2 unrecognised or empty input, 1 any error finding, else 0.
    #[must_use]
    pub fn exit_code(&self) -> u8 {
        if !self.recognised {
            2
        } else if self.count(Severity::Error) > 0 {
            1
        } else {
            0
        }
    }

    /// Human output: an `fdisk -l`-like table, the findings and a one-line verdict.
    #[must_use]
    pub fn to_human(&self) -> String {
        human::render(self)
    }

    /// The one-line verdict.
    #[must_use]
    pub fn verdict(&self) -> String {
        human::verdict(self)
    }
}

/// Verifies any byte slice (wasm, fuzzing, tests). Never fails: a read outside the slice
/// cannot happen (every read is bounds-checked first), and would become a finding.
#[must_use]
pub fn verify_bytes(bytes: &[u8], opts: &Options) -> Report {
    verify_bytes_like(bytes, opts)
}

/// Verifies a [`SparseImage`] (what `blockwise build` produces in memory).
pub fn verify_sparse(img: &SparseImage, opts: &Options) -> Report {
    verify_bytes_like(img, opts)
}

fn verify_bytes_like<S: BlockSource + ?Sized>(src: &S, opts: &Options) -> Report {
    match verify(src, opts) {
        Ok(r) => r,
        Err(e) => {
            let mut r = Report::new(src.len(), opts, effective_erase(opts));
            r.recognised = false;
            r.findings.push(Finding {
                severity: Severity::Error,
                code: FindingCode::ReadFailed,
                partition: None,
                message: format!("reading the source failed: {e}"),
            });
            r
        }
    }
}

fn effective_erase(opts: &Options) -> u64 {
    if opts.erase_block == 0 {
        DEFAULT_ERASE_BLOCK
    } else {
        opts.erase_block
    }
}

/// Verifies `src`. Only metadata is read. `Err` only for the source's own I/O errors; every
/// problem with the bytes is a [`Finding`].
///
/// With [`Options::erase_block`] 0 the image is read once against the default 4 MiB to find
/// what erase block it declares ([`declared::declared_erase_block`]), and again against that
/// one when it differs (metadata only, so twice the few reads).
pub fn verify<S: BlockSource + ?Sized>(src: &S, opts: &Options) -> Result<Report, S::Error> {
    let mut e = effective_erase(opts);
    let run = |e: u64| -> Result<Verifier<'_, S>, S::Error> {
        let mut v = Verifier {
            src,
            opts,
            e,
            sector: SectorSize::S512,
            r: Report::new(src.len(), opts, e),
        };
        v.run()?;
        Ok(v)
    };
    let mut v = run(e)?;
    if opts.erase_block == 0 && v.r.recognised {
        let (declared, why) = declared::declared_erase_block(&v.r.partitions);
        if declared != e {
            e = declared;
            v = run(e)?;
        }
        v.r.erase_block_source = Some(why);
    }
    if v.r.recognised && opts.scan_gaps {
        v.find_regions()?;
    }
    v.check_size();
    let mut r = v.r;
    // A/B slots, from the names (or labels) the partitions carry; a verity partition's data
    // is looked for in its own slot first.
    blockwise_geometry::infer_slots(&mut r.partitions);
    verity::link(&mut r);
    r.findings.sort_by_key(|f| f.severity);
    for p in &mut r.partitions {
        p.refresh_aligned(e);
    }
    r.slots = blockwise_geometry::slot_groups(&r.partitions);
    r.aligned = r.recognised && !r.partitions.is_empty() && r.partitions.iter().all(|p| p.aligned);
    Ok(r)
}

/// Reads up to `len` bytes at `off`, clamped to the source (never reads past the end).
fn read_clamped<S: BlockSource + ?Sized>(
    src: &S,
    off: u64,
    len: usize,
) -> Result<Vec<u8>, S::Error> {
    let avail = src.len().saturating_sub(off);
    let n = usize::try_from(avail).unwrap_or(usize::MAX).min(len);
    if n == 0 {
        return Ok(Vec::new());
    }
    let mut buf = vec![0u8; n];
    src.read_at(off, &mut buf)?;
    Ok(buf)
}

fn sector_from_hint(h: Option<&DeviceHints>) -> Option<SectorSize> {
    h.and_then(|h| h.logical_block_bytes)
        .and_then(SectorSize::from_bytes)
}

fn partition_name(source: &str, index: u32) -> String {
    if index == 0 {
        return source.to_string();
    }
    if source.ends_with(|c: char| c.is_ascii_digit()) {
        format!("{source}p{index}")
    } else {
        format!("{source}{index}")
    }
}

struct Verifier<'a, S: BlockSource + ?Sized> {
    src: &'a S,
    opts: &'a Options,
    e: u64,
    sector: SectorSize,
    r: Report,
}

impl<S: BlockSource + ?Sized> Verifier<'_, S> {
    fn add(
        &mut self,
        severity: Severity,
        code: FindingCode,
        partition: Option<u32>,
        message: String,
    ) {
        self.r.findings.push(Finding {
            severity,
            code,
            partition,
            message,
        });
    }

    /// Reports what a filesystem parser found wrong in a volume it understood, as findings
    /// of partition `i` (`name` is the filesystem type): `(code, is_error, issue)`.
    fn add_issues<I: core::fmt::Display>(
        &mut self,
        i: u32,
        name: &str,
        issues: impl IntoIterator<Item = (FindingCode, bool, I)>,
    ) {
        for (code, is_error, issue) in issues {
            self.add(
                Severity::error_if(is_error),
                code,
                Some(i),
                format!("partition {i} ({name}): {issue}"),
            );
        }
    }

    /// A source whose size is not a whole number of sectors: the last partial sector is
    /// unreachable, and writers that work in sectors (RPi Imager, some dd wrappers) fail on
    /// it.
    fn check_size(&mut self) {
        let len = self.src.len();
        let sb = self.r.sector_bytes.bytes_u64();
        if !self.r.recognised || len == 0 || num::is_multiple(len, sb) {
            return;
        }
        let tail = len.checked_rem(sb).unwrap_or(0);
        self.add(
            Severity::error_if(self.opts.strict),
            FindingCode::SizeNotSectorMultiple,
            None,
            format!("the source is {len} bytes, not a whole number of {sb}-byte sectors ({tail} bytes past the last full one): the tail cannot be addressed and some image writers refuse it; pad it to a multiple of {sb} (truncate -s) or rebuild"),
        );
    }

    /// The findings of partition `p`'s place and contents as read: the same function
    /// [`plan_findings`] applies to a plan.
    fn geometry_findings(&mut self, p: &PartitionPlan) {
        let ctx = align::Context {
            e: self.e,
            sector: self.sector,
            strict: self.opts.strict,
            device: self.opts.device.as_ref(),
        };
        self.r.findings.extend(align::partition_findings(p, &ctx));
    }

    fn run(&mut self) -> Result<(), S::Error> {
        let len = self.src.len();
        let forced = self
            .opts
            .sector_size
            .or_else(|| sector_from_hint(self.opts.device.as_ref()));
        self.sector = forced.unwrap_or(SectorSize::S512);
        self.r.sector_bytes = self.sector;
        if len == 0 {
            self.r.recognised = false;
            self.add(
                Severity::Error,
                FindingCode::EmptySource,
                None,
                "the source is empty (0 bytes): nothing to verify".into(),
            );
            return Ok(());
        }
        if !self.e.is_power_of_two() || self.e < PAGE {
            let e = self.e;
            self.add(
                Severity::Warning,
                FindingCode::EraseBlockOdd,
                None,
                format!("erase block {e} B is not a power of two of at least 4 KiB; flash erase blocks are (typically 4 MiB)"),
            );
        }
        let head = read_clamped(self.src, 0, 8192)?;

        let mbr = parse_mbr(&head, 0);
        // A FAT/NTFS/exFAT boot sector at LBA 0 (superfloppy) also ends in 55 AA: check it
        // first. Only boot code that merely resembles a FAT boot sector (it does not parse)
        // in front of sane MBR entries is read as an MBR.
        let sane_mbr = mbr.as_ref().is_ok_and(|m| {
            m.used().count() > 0
                && m.used().all(|(_, e)| {
                    e.start_lba > 0
                        && u64::from(e.start_lba)
                            .saturating_add(u64::from(e.sectors))
                            .saturating_mul(512)
                            <= len
                })
        });
        let fat_here = fat::looks_like_fat(&head) && (fat::parse_fat(&head).is_ok() || !sane_mbr);
        if fat_here || has(&head, 3, b"NTFS    ") || has(&head, 3, b"EXFAT   ") {
            return self.bare();
        }

        self.table(&head, mbr, forced)?;
        // Boot code in sector 0 (MBR, protective or hybrid MBR), as a plan predicts it.
        if self.r.table.kind != TableKind::None {
            self.r.table.boot_code = blockwise_geometry::BootCode::of(&head);
        }
        Ok(())
    }

    fn bare_content(&self) -> Result<Content, S::Error> {
        self.classify(0)
    }

    fn classify(&self, off: u64) -> Result<Content, S::Error> {
        let head = read_clamped(self.src, off, 4096)?;
        let iso = read_clamped(self.src, off.saturating_add(0x8000), 8)?;
        let btrfs = read_clamped(self.src, off.saturating_add(0x10040), 8)?;
        let swap = read_clamped(self.src, off.saturating_add(0xfff6), 10)?;
        Ok(magic::classify(&head, &iso, &btrfs, &swap))
    }

    fn bare(&mut self) -> Result<(), S::Error> {
        let len = self.src.len();
        self.r.table = TablePlan {
            kind: TableKind::None,
            disk_id: None,
            boot_code: None,
        };
        // The largest power of two that fits the source (1 for an empty one).
        let largest = len
            .checked_ilog2()
            .and_then(|b| 1u64.checked_shl(b))
            .unwrap_or(1);
        let mut p = self.part(0, 0, len, PartType::Mbr(0x83), None, false, None);
        p.alignment_bytes = alignment_of(0).min(largest);
        let c = self.classify(0)?;
        if matches!(c, Content::Empty | Content::Unknown) {
            self.r.recognised = false;
            self.add(
                Severity::Error,
                FindingCode::Unrecognised,
                None,
                "no partition table and no known filesystem".into(),
            );
            return Ok(());
        }
        self.content(&mut p, c)?;
        // A bare FAT volume's sector is the only sector size it records: a 4096-byte FAT
        // was made for 4096-byte sectors (a plan of it says the same).
        if let (None, Some(FsPlan::Fat(f))) = (self.opts.sector_size, &p.filesystem) {
            if let Some(s) = SectorSize::from_bytes(u64::from(f.sector_bytes)) {
                if self.opts.device.is_none() {
                    self.sector = s;
                    self.r.sector_bytes = s;
                }
            }
        }
        self.geometry_findings(&p);
        p.type_ = PartType::Mbr(match (&p.filesystem, p.content) {
            (_, FsKind::Fat(Some(t))) => t.mbr_type(),
            (Some(FsPlan::Exfat(_)), _) => 0x07,
            (Some(FsPlan::Other(o)), _) if o.kind == "swap" => 0x82,
            (Some(FsPlan::Other(o)), _) if o.kind == "ntfs" || o.kind == "exfat" => 0x07,
            _ => 0x83,
        });
        self.r.partitions.push(p);
        Ok(())
    }

    fn content(&mut self, p: &mut PartitionPlan, c: Content) -> Result<(), S::Error> {
        match c {
            Content::Fat => self.fat(p),
            Content::Ext => self.ext(p),
            Content::Other("erofs") => self.erofs(p),
            Content::Other("squashfs") => self.squashfs(p),
            Content::Other("verity") => self.verity(p),
            Content::Other("exfat") => self.exfat(p),
            Content::Other("f2fs") => self.f2fs(p),
            Content::Other(kind) if other::parses(kind) => self.other_fs(p, kind),
            Content::Other(kind) => {
                p.content = if kind == "swap" {
                    FsKind::Swap
                } else {
                    FsKind::Raw
                };
                p.filesystem = Some(FsPlan::Other(OtherFs {
                    kind: kind.to_string(),
                    aligned: None,
                    ..OtherFs::default()
                }));
                Ok(())
            }
            Content::Empty => Ok(()),
            Content::Unknown => {
                // Bytes that are no filesystem verify knows: what a plan calls fs = "raw".
                p.content = FsKind::Raw;
                p.filesystem = Some(FsPlan::Other(OtherFs {
                    kind: "raw".into(),
                    aligned: None,
                    ..OtherFs::default()
                }));
                Ok(())
            }
        }
    }
}

#[cfg(test)]
mod tests;
