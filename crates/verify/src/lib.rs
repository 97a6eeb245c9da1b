//! Alignment and consistency report for any disk image or block device. Never writes.
//!
//! [`verify`] reads only metadata through a [`BlockSource`] (a slice, a [`SparseImage`], a
//! file, a device, a JS callback): the MBR or GPT (both copies), the EBR chain, and the
//! first sectors of every partition (FAT boot sector, FSInfo and backup boot sector, ext2/3/4
//! superblock, group descriptors and journal inode). A 32 GiB sparse image verifies in
//! milliseconds. Bad bytes never make it fail: they become [`Finding`]s. `Err` is only the
//! source's own I/O error.
//!
//! The report has the JSON shape of `blockwise plan --json` (it reuses [`PartitionPlan`],
//! [`FatPlan`] and [`Ext4Plan`]) so that `verify(build(spec))` can be compared with
//! `plan(spec)` field for field.
//!
//! Finding codes (stable; severity in parentheses: E error, W warning, I info, E* warning or, with `strict`, error):
//!
//! | area | codes |
//! |---|---|
//! | source | `empty-source` (E), `unrecognised` (E, exit 2), `read-failed` (E), `erase-block-odd` (W), `sector-size-guessed` (I) |
//! | MBR | `mbr-corrupt` (E), `ebr-chain` (E), `logical-outside-extended` (E), `gpt-missing` (E), `no-partitions` (I) |
//! | GPT | `gpt-primary-bad`, `gpt-backup-bad`, `gpt-backup-missing`, `gpt-corrupt`, `gpt-copies-differ`, `gpt-entry-range`, `gpt-entry-outside-usable`, `mbr-gpt-disagree` (E); `gpt-backup-not-at-end`, `gpt-no-protective-mbr`, `hybrid-mbr` (W); `protective-mbr-size`, `protective-mbr-bootable` (I) |
//! | partitions | `partition-not-4k-aligned`, `partition-overlap`, `partition-past-end`, `partition-overlaps-table` (E); `partition-not-erase-aligned` (E*); `partition-empty` (W); `not-checked` (I) |
//! | FAT | `fat-corrupt`, `fat-cluster-count`, `fat-too-many-clusters`, `fat-too-small`, `fat-root-cluster`, `fat-reserved-location`, `fat-larger-than-partition`, `fat-data-not-4k-aligned`, `fat-sector-below-logical` (E); `fat-data-not-aligned` (E*); `fat32-field`, `fat-many-fats`, `fat-boot-signature`, `fat-cluster-straddles`, `fat-sector-4096`, `fat-sector-smaller-than-device`, `fat-fsinfo`, `fat-backup-boot-differs` (W); `fat-table-not-aligned`, `fat-no-backup-boot`, `fat-hidden-sectors` (I) |
//! | ext2/3/4 | `ext4-corrupt`, `ext4-inodes-count`, `ext4-superblock-checksum`, `ext4-larger-than-partition`, `ext4-group-desc` (E); `ext4-journal-not-aligned` (E*); `ext4-reserved-blocks`, `ext4-first-data-block`, `ext4-unsupported`, `ext4-stride-mismatch`, `ext4-stripe-mismatch`, `ext4-block-smaller-than-device`, `ext4-small-blocks` (W); `ext4-no-stride`, `ext4-stripe-smaller`, `ext4-inode-table-not-aligned` (I) |
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

#![deny(clippy::unwrap_used, clippy::panic)]

mod bytes;
pub mod ext4;
pub mod fat;
mod human;
pub mod magic;

use blockwise_geometry::{
    alignment_of, format_size, BlockSource, DiskId, Ext4Plan, FatPlan, FatType, FsKind, FsPlan,
    Guid, OtherFs, PartType, PartitionPlan, SectorSize, SparseImage, TableKind, TablePlan,
};
use blockwise_ptable::{parse_mbr, read_gpt, read_logical, Corrupt, GptCopy, Mbr};
use serde::Serialize;

use crate::bytes::has;
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
    /// Erase block E to check against (default 4 MiB).
    pub erase_block: u64,
    /// Erase-block misalignment is an error instead of a warning.
    pub strict: bool,
    /// Logical sector size of the partition table; `None` = detect (GPT at 512 or 4096,
    /// then device hints, then content).
    pub sector_size: Option<SectorSize>,
    /// Device hints, when the source is a block device.
    pub device: Option<DeviceHints>,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            source: String::new(),
            erase_block: DEFAULT_ERASE_BLOCK,
            strict: false,
            sector_size: None,
            device: None,
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
    /// Stable kebab-case code (`partition-not-4k-aligned`, `gpt-backup-missing`, …).
    pub code: &'static str,
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
    /// Partition table kind and disk ID.
    pub table: TablePlan,
    /// Partitions in table order (bare filesystem: partition 0 at 0).
    pub partitions: Vec<PartitionPlan>,
    /// Findings, errors first.
    pub findings: Vec<Finding>,
    /// Every partition and filesystem aligned to the erase block.
    pub aligned: bool,
    /// Device hints, when the source is a block device.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub device: Option<DeviceHints>,
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
            table: TablePlan {
                kind: TableKind::None,
                disk_id: None,
            },
            partitions: Vec::new(),
            findings: Vec::new(),
            aligned: false,
            device: opts.device.clone(),
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
                code: "read-failed",
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
pub fn verify<S: BlockSource + ?Sized>(src: &S, opts: &Options) -> Result<Report, S::Error> {
    let e = effective_erase(opts);
    let mut v = Verifier {
        src,
        opts,
        e,
        sector: SectorSize::S512,
        r: Report::new(src.len(), opts, e),
    };
    v.run()?;
    let mut r = v.r;
    r.findings.sort_by_key(|f| f.severity);
    let fs_ok = |p: &PartitionPlan| match &p.filesystem {
        Some(FsPlan::Fat(f)) => f.aligned,
        Some(FsPlan::Ext4(x)) => x.aligned,
        Some(FsPlan::Other(o)) => o.aligned.unwrap_or(true),
        None => true,
    };
    for p in &mut r.partitions {
        p.aligned = p.start_bytes % e == 0 && fs_ok(p);
    }
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
        code: &'static str,
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

    /// Warning, or error with `--strict`.
    fn erase_severity(&self) -> Severity {
        Severity::error_if(self.opts.strict)
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
                "empty-source",
                None,
                "the source is empty (0 bytes): nothing to verify".into(),
            );
            return Ok(());
        }
        if !self.e.is_power_of_two() || self.e < PAGE {
            let e = self.e;
            self.add(
                Severity::Warning,
                "erase-block-odd",
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

        let candidates: Vec<SectorSize> = match forced {
            Some(s) => vec![s],
            None => vec![SectorSize::S512, SectorSize::S4096],
        };
        let gpt_at = candidates
            .iter()
            .copied()
            .find(|s| usize::try_from(s.bytes()).is_ok_and(|o| has(&head, o, b"EFI PART")));
        let protective = mbr
            .as_ref()
            .is_ok_and(|m| m.used().any(|(_, e)| e.type_ == 0xee));
        if let Some(s) = gpt_at {
            self.sector = s;
            self.r.sector_bytes = s;
            return self.gpt(mbr.ok());
        }
        if protective {
            // No primary header where expected: look for a usable backup at either size.
            for &s in &candidates {
                let read = read_gpt(self.src, s)?;
                if read.backup.is_ok() {
                    self.sector = s;
                    self.r.sector_bytes = s;
                    return self.gpt(mbr.ok());
                }
            }
            return self.gpt(mbr.ok());
        }
        match mbr {
            Ok(m) if m.used().count() > 0 => {
                if forced.is_none() {
                    self.sector = self.guess_mbr_sector(&m)?;
                    self.r.sector_bytes = self.sector;
                }
                self.mbr(&m)
            }
            Ok(m) => {
                if self.bare_content()? != Content::Unknown
                    && self.bare_content()? != Content::Empty
                {
                    return self.bare();
                }
                self.r.table = TablePlan {
                    kind: TableKind::Mbr,
                    disk_id: Some(DiskId::Mbr(m.disk_signature)),
                };
                self.add(
                    Severity::Info,
                    "no-partitions",
                    None,
                    "the MBR has no partition entries: nothing to check".into(),
                );
                Ok(())
            }
            Err(err) => {
                let c = self.bare_content()?;
                if c != Content::Unknown && c != Content::Empty {
                    return self.bare();
                }
                if let Corrupt::BootSignature { .. } | Corrupt::Truncated { .. } = err {
                    self.r.recognised = false;
                    let what = if c == Content::Empty {
                        "all zeros at the start"
                    } else {
                        "unrecognised bytes"
                    };
                    self.add(
                        Severity::Error,
                        "unrecognised",
                        None,
                        format!("no partition table (no MBR 55 AA signature, no GPT) and no known filesystem ({what}): not a disk image blockwise can check"),
                    );
                } else {
                    self.r.table = TablePlan {
                        kind: TableKind::Mbr,
                        disk_id: None,
                    };
                    self.add(
                        Severity::Error,
                        "mbr-corrupt",
                        None,
                        format!("{err} — partitioning tools and firmware may reject this disk; rewrite the table (sfdisk, or blockwise build)"),
                    );
                }
                Ok(())
            }
        }
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
        };
        let largest = if len == 0 {
            1
        } else {
            1u64 << (63 - len.leading_zeros())
        };
        let mut p = PartitionPlan {
            index: 0,
            spec_index: 0,
            start_bytes: 0,
            size_bytes: len,
            type_: PartType::Mbr(0x83),
            name: None,
            bootable: false,
            guid: None,
            content: FsKind::None,
            logical: false,
            ebr_bytes: None,
            aligned: true,
            alignment_bytes: alignment_of(0).min(largest),
            filesystem: None,
        };
        let c = self.classify(0)?;
        if matches!(c, Content::Empty | Content::Unknown) {
            self.r.recognised = false;
            self.add(
                Severity::Error,
                "unrecognised",
                None,
                "no partition table and no known filesystem".into(),
            );
            return Ok(());
        }
        self.content(&mut p, c)?;
        p.type_ = PartType::Mbr(match (&p.filesystem, p.content) {
            (_, FsKind::Fat(Some(t))) => t.mbr_type(),
            (Some(FsPlan::Other(o)), _) if o.kind == "swap" => 0x82,
            (Some(FsPlan::Other(o)), _) if o.kind == "ntfs" || o.kind == "exfat" => 0x07,
            _ => 0x83,
        });
        self.r.partitions.push(p);
        Ok(())
    }

    /// For an MBR without a device hint: 512 unless 4096-byte LBAs land on more
    /// recognisable filesystems.
    fn guess_mbr_sector(&mut self, m: &Mbr) -> Result<SectorSize, S::Error> {
        let mut score = [0usize; 2];
        for (i, s) in [SectorSize::S512, SectorSize::S4096]
            .into_iter()
            .enumerate()
        {
            for (_, e) in m
                .used()
                .filter(|(_, e)| !e.is_extended() && e.type_ != 0xee)
            {
                let off = u64::from(e.start_lba).saturating_mul(s.bytes_u64());
                if off == 0 || off >= self.src.len() {
                    continue;
                }
                if matches!(
                    self.classify(off)?,
                    Content::Fat | Content::Ext | Content::Other(_)
                ) {
                    if let Some(sc) = score.get_mut(i) {
                        *sc = sc.saturating_add(1);
                    }
                }
            }
        }
        if score[1] > score[0] {
            self.add(
                Severity::Info,
                "sector-size-guessed",
                None,
                "the MBR's LBAs only make sense in 4096-byte sectors (filesystems found there): read as a 4Kn disk; pass --sector-size to override".into(),
            );
            return Ok(SectorSize::S4096);
        }
        Ok(SectorSize::S512)
    }

    fn mbr(&mut self, m: &Mbr) -> Result<(), S::Error> {
        self.r.table = TablePlan {
            kind: TableKind::Mbr,
            disk_id: Some(DiskId::Mbr(m.disk_signature)),
        };
        let sb = self.sector.bytes_u64();
        let mut parts = Vec::new();
        for (slot, e) in m.used() {
            if e.type_ == 0xee {
                self.add(
                    Severity::Error,
                    "gpt-missing",
                    Some(u32::from(slot)),
                    "an 0xEE (GPT protective) entry sits next to other MBR entries but no GPT header was found: a hybrid MBR whose GPT is gone; rebuild the table".into(),
                );
                continue;
            }
            let start = u64::from(e.start_lba).saturating_mul(sb);
            let size = u64::from(e.sectors).saturating_mul(sb);
            if e.is_extended() {
                self.check_extent(u32::from(slot), start, size, "extended partition");
                continue;
            }
            parts.push(self.part(
                u32::from(slot),
                start,
                size,
                PartType::Mbr(e.type_),
                None,
                e.status == 0x80,
                None,
            ));
        }
        let chain = read_logical(self.src, self.sector, m)?;
        if let Some(problem) = &chain.problem {
            self.add(
                Severity::Error,
                "ebr-chain",
                None,
                format!("{problem} — logical partitions after this point are not visible to Linux or Windows; rebuild the extended partition"),
            );
        }
        let ext = m.extended().map(|(_, e)| {
            (
                u64::from(e.start_lba),
                u64::from(e.start_lba).saturating_add(u64::from(e.sectors)),
            )
        });
        for l in &chain.partitions {
            if let Some((es, ee)) = ext {
                if l.start_lba < es || l.start_lba.saturating_add(l.sectors) > ee {
                    self.add(
                        Severity::Error,
                        "logical-outside-extended",
                        Some(l.number),
                        format!(
                            "logical partition {} (sectors {}..{}) does not lie inside its extended partition (sectors {es}..{ee}): it overlaps other partitions or the table; rebuild the extended partition",
                            l.number,
                            l.start_lba,
                            l.start_lba.saturating_add(l.sectors)
                        ),
                    );
                }
            }
            let mut p = self.part(
                l.number,
                l.start_lba.saturating_mul(sb),
                l.sectors.saturating_mul(sb),
                PartType::Mbr(l.entry.type_),
                None,
                l.entry.status == 0x80,
                None,
            );
            p.logical = true;
            p.ebr_bytes = Some(l.ebr_lba.saturating_mul(sb));
            parts.push(p);
        }
        self.finish_partitions(parts)
    }

    fn gpt(&mut self, mbr: Option<Mbr>) -> Result<(), S::Error> {
        let s = self.sector;
        let sb = s.bytes_u64();
        let sectors = self.src.len() / sb;
        let last = sectors.saturating_sub(1);
        let mut read = read_gpt(self.src, s)?;
        if let Err(Corrupt::GptUsableRange { last: claimed, .. }) = read.primary {
            // A truncated image: the primary is fine but describes a larger disk. Read it
            // as if the missing tail were zeros; partitions past the end are reported.
            if claimed >= sectors {
                let hdr = read_clamped(self.src, sb, 92)?;
                let alt = bytes::le64(&hdr, 32).max(claimed);
                let padded = Padded {
                    inner: self.src,
                    len: alt.saturating_add(1).saturating_mul(sb),
                };
                let again = read_gpt(&padded, s)?;
                if again.primary.is_ok() {
                    read.primary = again.primary;
                }
            }
        }
        self.r.table = TablePlan {
            kind: TableKind::Gpt,
            disk_id: read.best().map(|c| DiskId::Gpt(c.header.disk_guid)),
        };
        match (&read.primary, &read.backup) {
            (Ok(p), Ok(b)) => {
                if b.header.my_lba != last {
                    self.add(
                        Severity::Warning,
                        "gpt-backup-not-at-end",
                        None,
                        format!(
                            "the backup GPT is at LBA {} but the disk ends at LBA {last} (the image was written to a larger device): the last {} are unusable and some tools warn; move it with `sgdisk -e` or `sfdisk --relocate gpt-bak-std`",
                            b.header.my_lba,
                            format_size(last.saturating_sub(b.header.my_lba).saturating_mul(sb))
                        ),
                    );
                }
                if !same_entries(p, b) {
                    self.add(
                        Severity::Error,
                        "gpt-copies-differ",
                        None,
                        "the primary and backup GPT list different partitions: tools disagree on which is right; rewrite the table from the intended copy".into(),
                    );
                }
            }
            (Ok(p), Err(be)) => {
                let alt = p.header.alternate_lba;
                if alt >= sectors {
                    self.add(
                        Severity::Error,
                        "gpt-backup-missing",
                        None,
                        format!("the primary GPT puts its backup at LBA {alt} but the source has only {sectors} sectors: the image is truncated (or the sector size is wrong); the disk has no backup table — restore the full image or run `sgdisk -e`"),
                    );
                } else if alt != last {
                    self.add(
                        Severity::Warning,
                        "gpt-backup-not-at-end",
                        None,
                        format!("the primary GPT says the backup is at LBA {alt} but the disk ends at LBA {last}, and no valid backup was found there ({be}) (typical after `dd` to a larger device): relocate it with `sgdisk -e`"),
                    );
                } else {
                    self.add(
                        Severity::Error,
                        "gpt-backup-bad",
                        None,
                        format!("{be} — the disk has no usable backup table if the primary is damaged; rewrite it with `sgdisk -e` or rebuild"),
                    );
                }
            }
            (Err(pe), Ok(_)) => {
                self.add(
                    Severity::Error,
                    "gpt-primary-bad",
                    None,
                    format!("{pe} — firmware reads the primary first and may not boot; partitions below come from the intact backup; restore the primary (gdisk: r, c, w)"),
                );
            }
            (Err(pe), Err(be)) => {
                self.add(
                    Severity::Error,
                    "gpt-corrupt",
                    None,
                    format!("no valid GPT copy: {pe}; {be} — the disk is unpartitioned to every OS; rebuild the table"),
                );
            }
        }
        self.protective(mbr.as_ref(), sectors);
        let Some(copy) = read.best().cloned() else {
            return Ok(());
        };
        let h = &copy.header;
        let mut parts = Vec::new();
        for ent in &copy.entries {
            if ent.last_lba < ent.first_lba {
                self.add(
                    Severity::Error,
                    "gpt-entry-range",
                    Some(ent.index),
                    format!("partition {} ends at LBA {} before it starts at LBA {}: unusable; delete or fix the entry", ent.index, ent.last_lba, ent.first_lba),
                );
                continue;
            }
            if ent.first_lba < h.first_usable_lba || ent.last_lba > h.last_usable_lba {
                self.add(
                    Severity::Error,
                    "gpt-entry-outside-usable",
                    Some(ent.index),
                    format!(
                        "partition {} (LBA {}..={}) lies outside the usable LBAs {}..={}: it overlaps the GPT itself, and writing to it destroys the table",
                        ent.index, ent.first_lba, ent.last_lba, h.first_usable_lba, h.last_usable_lba
                    ),
                );
            }
            let start = ent.first_lba.saturating_mul(sb);
            let size = ent
                .last_lba
                .saturating_sub(ent.first_lba)
                .saturating_add(1)
                .saturating_mul(sb);
            let name = (!ent.name.is_empty()).then(|| ent.name.clone());
            parts.push(self.part(
                ent.index,
                start,
                size,
                PartType::Gpt(ent.type_guid),
                name,
                ent.attributes & 4 != 0,
                Some(ent.unique_guid),
            ));
        }
        if let Some(m) = &mbr {
            if m.is_hybrid() {
                self.hybrid(m, &parts);
            }
        }
        self.finish_partitions(parts)
    }

    fn protective(&mut self, mbr: Option<&Mbr>, sectors: u64) {
        let Some(m) = mbr else {
            self.add(
                Severity::Warning,
                "gpt-no-protective-mbr",
                None,
                "GPT without a valid protective MBR (no 55 AA or no 0xEE entry): MBR-only tools may see an empty disk and overwrite it; rewrite the protective MBR (sgdisk -z is destructive; use gdisk: x, n, w)".into(),
            );
            return;
        };
        let Some((slot, pe)) = m.used().find(|(_, e)| e.type_ == 0xee) else {
            self.add(
                Severity::Warning,
                "gpt-no-protective-mbr",
                None,
                "GPT disk whose MBR has no 0xEE protective entry: MBR-only tools see only the MBR entries and may overwrite GPT partitions".into(),
            );
            return;
        };
        let expected = sectors.saturating_sub(1).min(0xffff_ffff);
        if u64::from(pe.sectors) != expected && !m.is_hybrid() {
            self.add(
                Severity::Info,
                "protective-mbr-size",
                Some(u32::from(slot)),
                format!("the protective MBR entry covers {} sectors, the disk has {} after LBA 0 (normal after `dd` to a larger device); harmless", pe.sectors, expected),
            );
        }
        if pe.status != 0 {
            self.add(
                Severity::Info,
                "protective-mbr-bootable",
                Some(u32::from(slot)),
                "the 0xEE entry is marked bootable (0x80): the UEFI spec says 0x00, though some old BIOSes need it".into(),
            );
        }
    }

    fn hybrid(&mut self, m: &Mbr, parts: &[PartitionPlan]) {
        self.add(
            Severity::Warning,
            "hybrid-mbr",
            None,
            "hybrid MBR: the protective MBR also lists real partitions; MBR and GPT can drift apart and Windows/firmware may use either — prefer a pure protective MBR".into(),
        );
        let sb = self.sector.bytes_u64();
        for (slot, e) in m.used().filter(|(_, e)| e.type_ != 0xee) {
            let start = u64::from(e.start_lba).saturating_mul(sb);
            let size = u64::from(e.sectors).saturating_mul(sb);
            if !parts
                .iter()
                .any(|p| p.start_bytes == start && p.size_bytes == size)
            {
                self.add(
                    Severity::Error,
                    "mbr-gpt-disagree",
                    Some(u32::from(slot)),
                    format!(
                        "MBR entry {slot} (start {}, {} bytes) matches no GPT partition: MBR-booting systems see a different disk than GPT ones; make them agree or drop the hybrid entries",
                        start / sb,
                        size
                    ),
                );
            }
        }
    }

    #[expect(
        clippy::too_many_arguments,
        reason = "one constructor for every table kind"
    )]
    fn part(
        &self,
        index: u32,
        start: u64,
        size: u64,
        type_: PartType,
        name: Option<String>,
        bootable: bool,
        guid: Option<Guid>,
    ) -> PartitionPlan {
        PartitionPlan {
            index,
            spec_index: 0,
            start_bytes: start,
            size_bytes: size,
            type_,
            name,
            bootable,
            guid,
            content: FsKind::None,
            logical: false,
            ebr_bytes: None,
            aligned: true,
            alignment_bytes: alignment_of(start),
            filesystem: None,
        }
    }

    /// Range checks an extent (partition or extended container) against the disk.
    fn check_extent(&mut self, index: u32, start: u64, size: u64, what: &str) -> bool {
        let len = self.src.len();
        let sb = self.sector.bytes_u64();
        if start == 0 {
            self.add(
                Severity::Error,
                "partition-overlaps-table",
                Some(index),
                format!("{what} {index} starts at LBA 0, on top of the partition table: writing to it destroys the table"),
            );
        }
        if size == 0 {
            self.add(
                Severity::Warning,
                "partition-empty",
                Some(index),
                format!("{what} {index} has 0 sectors"),
            );
        }
        let end = start.saturating_add(size);
        if end > len {
            self.add(
                Severity::Error,
                "partition-past-end",
                Some(index),
                format!(
                    "{what} {index} ends at sector {} ({}) but the source has only {} sectors ({}): the image is truncated or the table is wrong; data there is lost",
                    end / sb,
                    format_size(end),
                    len / sb,
                    format_size(len)
                ),
            );
            return false;
        }
        true
    }

    fn finish_partitions(&mut self, mut parts: Vec<PartitionPlan>) -> Result<(), S::Error> {
        // Overlaps, in start order.
        let mut order: Vec<usize> = (0..parts.len()).collect();
        order.sort_by_key(|&i| parts.get(i).map_or(0, |p| p.start_bytes));
        let mut overlaps = 0usize;
        for (k, &i) in order.iter().enumerate() {
            for &j in order.iter().skip(k.saturating_add(1)) {
                let (Some(a), Some(b)) = (parts.get(i), parts.get(j)) else {
                    continue;
                };
                if b.start_bytes >= a.end_bytes() {
                    break;
                }
                if a.size_bytes == 0 || b.size_bytes == 0 {
                    continue;
                }
                overlaps = overlaps.saturating_add(1);
                if overlaps <= MAX_REPEATED {
                    let (ai, bi, bs) = (a.index, b.index, b.start_bytes);
                    self.add(
                        Severity::Error,
                        "partition-overlap",
                        Some(bi),
                        format!("partition {bi} (starting at {bs} B) overlaps partition {ai}: writing one corrupts the other; fix the table"),
                    );
                }
            }
        }
        for p in &mut parts {
            let inside = self.check_extent(p.index, p.start_bytes, p.size_bytes, "partition");
            self.check_start(p);
            if p.start_bytes < self.src.len() && p.size_bytes > 0 {
                let c = self.classify(p.start_bytes)?;
                self.content(p, c)?;
            }
            let _ = inside;
        }
        self.r.partitions = parts;
        Ok(())
    }

    fn check_start(&mut self, p: &PartitionPlan) {
        let (i, start, e) = (p.index, p.start_bytes, self.e);
        if start == 0 {
            return;
        }
        let sb = self.sector.bytes_u64();
        let lba = start / sb;
        if start % PAGE != 0 {
            self.add(
                Severity::Error,
                "partition-not-4k-aligned",
                Some(i),
                format!(
                    "partition {i} starts at sector {lba} ({start} B): not 4 KiB aligned — every 4 KiB write touches two flash pages; rebuild with a start on a multiple of the erase block ({})",
                    format_size(e)
                ),
            );
        } else if start % e != 0 {
            let next = start.div_ceil(e).saturating_mul(e);
            let sev = self.erase_severity();
            self.add(
                sev,
                "partition-not-erase-aligned",
                Some(i),
                format!(
                    "partition {i} starts at sector {lba} ({}): {} aligned but not on the {} erase block — writes that cross erase blocks cost extra erases and wear; move it to a multiple of {} (e.g. sector {})",
                    format_size(start),
                    format_size(alignment_of(start)),
                    format_size(e),
                    format_size(e),
                    next / sb
                ),
            );
        }
    }

    fn content(&mut self, p: &mut PartitionPlan, c: Content) -> Result<(), S::Error> {
        match c {
            Content::Fat => self.fat(p),
            Content::Ext => self.ext(p),
            Content::Other(kind) => {
                p.content = FsKind::Raw;
                p.filesystem = Some(FsPlan::Other(OtherFs {
                    kind: kind.to_string(),
                    aligned: None,
                }));
                self.add(
                    Severity::Info,
                    "not-checked",
                    Some(p.index),
                    format!("partition {}: {kind} found; its internal layout is not checked (only the partition start)", p.index),
                );
                Ok(())
            }
            Content::Empty => Ok(()),
            Content::Unknown => {
                p.content = FsKind::Raw;
                p.filesystem = Some(FsPlan::Other(OtherFs {
                    kind: "unknown".into(),
                    aligned: None,
                }));
                Ok(())
            }
        }
    }

    fn fat(&mut self, p: &mut PartitionPlan) -> Result<(), S::Error> {
        let i = p.index;
        let base = p.start_bytes;
        let boot = read_clamped(self.src, base, 4096)?;
        let vol = match fat::parse_fat(&boot) {
            Ok(v) => v,
            Err(err) => {
                p.content = FsKind::Fat(None);
                p.filesystem = Some(FsPlan::Other(OtherFs {
                    kind: "fat".into(),
                    aligned: None,
                }));
                self.add(
                    Severity::Error,
                    "fat-corrupt",
                    Some(i),
                    format!("partition {i}: FAT boot sector: {err} — the volume cannot be mounted; reformat it (mkfs.fat) or restore the boot sector from its backup (sector 6)"),
                );
                return Ok(());
            }
        };
        let kind = vol.layout;
        let name = kind.as_str().to_uppercase();
        let fat_type = match kind {
            fat::FatKind::Fat12 => FatType::Fat12,
            fat::FatKind::Fat16 => FatType::Fat16,
            fat::FatKind::Fat32 => FatType::Fat32,
        };
        p.content = FsKind::Fat(Some(fat_type));
        for issue in &vol.issues {
            let sev = Severity::error_if(issue.is_error());
            self.add(
                sev,
                issue.code(),
                Some(i),
                format!("partition {i} ({name}): {issue}"),
            );
        }
        let bps = vol.sector_bytes();
        let cluster = vol.cluster_bytes();
        let fat_start =
            base.saturating_add(u64::from(vol.bpb.reserved_sectors).saturating_mul(bps));
        let data_start = base.saturating_add(vol.first_data_sector.saturating_mul(bps));
        let e = self.e;
        if vol.volume_bytes() > p.size_bytes {
            self.add(
                Severity::Error,
                "fat-larger-than-partition",
                Some(i),
                format!(
                    "partition {i} ({name}): the volume claims {} sectors ({}) but the partition holds {}: writes near the end land outside it; reformat to the partition size",
                    vol.total_sectors,
                    format_size(vol.volume_bytes()),
                    format_size(p.size_bytes)
                ),
            );
        }
        if data_start % PAGE != 0 {
            self.add(
                Severity::Error,
                "fat-data-not-4k-aligned",
                Some(i),
                format!(
                    "partition {i} ({name}): the data area starts at {data_start} B ({} sectors into the volume): not 4 KiB aligned — every cluster straddles two flash pages; reformat so the data area lands on the erase block (mkfs.fat -R, or blockwise build)",
                    vol.first_data_sector
                ),
            );
        } else if data_start % e != 0 {
            let gap = e.saturating_sub(data_start % e);
            let hint = if gap % bps == 0 {
                let r = u64::from(vol.bpb.reserved_sectors).saturating_add(gap / bps);
                if r <= 0xffff {
                    format!("reformat with more reserved sectors (e.g. mkfs.fat -R {r}, then check again: mkfs.fat may resize the FAT) or with blockwise build")
                } else {
                    "reformat with blockwise build, which chooses reserved sectors and FAT size so the data area lands on the erase block".into()
                }
            } else {
                "reformat with blockwise build".into()
            };
            let sev = self.erase_severity();
            self.add(
                sev,
                "fat-data-not-aligned",
                Some(i),
                format!(
                    "partition {i} ({name}): the data area starts at {data_start} B ({}), {} aligned but not on the {} erase block — clusters straddle erase blocks, so file writes cost extra erases; {hint}",
                    format_size(data_start),
                    format_size(alignment_of(data_start)),
                    format_size(e)
                ),
            );
        }
        if fat_start % e != 0 && data_start % e == 0 {
            self.add(
                Severity::Info,
                "fat-table-not-aligned",
                Some(i),
                format!(
                    "partition {i} ({name}): the first FAT starts at {fat_start} B, not on the {} erase block; FAT updates then touch two erase blocks (blockwise's align-fat puts it on E)",
                    format_size(e)
                ),
            );
        }
        let cluster_ok = cluster > 0 && e % cluster == 0;
        if !cluster_ok {
            self.add(
                Severity::Warning,
                "fat-cluster-straddles",
                Some(i),
                format!(
                    "partition {i} ({name}): the cluster size {} does not divide the {} erase block: some clusters straddle two erase blocks; use a cluster size that divides it",
                    format_size(cluster),
                    format_size(e)
                ),
            );
        }
        if bps == 4096 {
            self.add(
                Severity::Warning,
                "fat-sector-4096",
                Some(i),
                format!("partition {i} ({name}): 4096-byte logical sectors: Raspberry Pi firmware, U-Boot and many UEFI firmwares only read 512-byte FAT sectors; use 512 unless the device is 4Kn"),
            );
        }
        let dev_logical = self.sector.bytes_u64();
        if bps < dev_logical {
            self.add(
                Severity::Error,
                "fat-sector-below-logical",
                Some(i),
                format!("partition {i} ({name}): the FAT sector ({bps} B) is smaller than the device's logical sector ({dev_logical} B): Linux refuses to mount it (\"logical sector size too small for device\"); reformat with mkfs.fat -S {dev_logical}"),
            );
        } else if let Some(phys) = self
            .opts
            .device
            .as_ref()
            .and_then(|d| d.physical_block_bytes)
        {
            if bps < phys {
                self.add(
                    Severity::Warning,
                    "fat-sector-smaller-than-device",
                    Some(i),
                    format!("partition {i} ({name}): the FAT sector ({bps} B) is smaller than the device's physical sector ({phys} B): single-sector FAT writes become read-modify-write cycles"),
                );
            }
        }
        if kind == fat::FatKind::Fat32 {
            self.fat32_extras(i, base, &vol, &boot)?;
        }
        if self.r.table.kind != TableKind::None {
            let hidden = u64::from(vol.bpb.hidden_sectors);
            let ok = [bps, 512, self.sector.bytes_u64()]
                .iter()
                .any(|&u| base / u == hidden && base % u == 0);
            if !ok {
                self.add(
                    Severity::Info,
                    "fat-hidden-sectors",
                    Some(i),
                    format!("partition {i} ({name}): HiddSec is {hidden} but the partition starts at sector {}: some boot loaders locate files with it", base / bps.max(1)),
                );
            }
        }
        let aligned = data_start % e == 0 && cluster_ok;
        p.filesystem = Some(FsPlan::Fat(FatPlan {
            kind: fat_type,
            label: vol.bpb.label.clone(),
            sector_bytes: vol.bpb.bytes_per_sector.into(),
            cluster_bytes: u32::try_from(cluster).unwrap_or(u32::MAX),
            reserved_sectors: vol.bpb.reserved_sectors.into(),
            fat_count: vol.bpb.fat_count,
            fat_sectors: u32::try_from(vol.fat_sectors).unwrap_or(u32::MAX),
            cluster_count: u32::try_from(vol.clusters).unwrap_or(u32::MAX),
            fat_start_bytes: fat_start,
            data_start_bytes: data_start,
            volume_id: vol.bpb.volume_id.unwrap_or(0),
            aligned,
            notes: Vec::new(),
        }));
        Ok(())
    }

    fn fat32_extras(
        &mut self,
        i: u32,
        base: u64,
        vol: &fat::FatVolume,
        boot: &[u8],
    ) -> Result<(), S::Error> {
        let bps = vol.sector_bytes();
        let rsvd = vol.bpb.reserved_sectors;
        let fsi = vol.bpb.fs_info_sector;
        if fsi != 0 && fsi != 0xffff && fsi < rsvd {
            let s = read_clamped(
                self.src,
                base.saturating_add(u64::from(fsi).saturating_mul(bps)),
                512,
            )?;
            if let Err(pb) = fat::check_fsinfo(&s, vol.clusters) {
                self.add(
                    Severity::Warning,
                    "fat-fsinfo",
                    Some(i),
                    format!("partition {i} (FAT32): {pb} — free-space reports are wrong until fsck.fat repairs it"),
                );
            }
        }
        let bk = vol.bpb.backup_boot_sector;
        if bk == 0 || bk == 0xffff {
            self.add(
                Severity::Info,
                "fat-no-backup-boot",
                Some(i),
                format!("partition {i} (FAT32): no backup boot sector (BkBootSec = {bk}); a damaged boot sector cannot be recovered"),
            );
        } else if bk < rsvd {
            let b = read_clamped(
                self.src,
                base.saturating_add(u64::from(bk).saturating_mul(bps)),
                512,
            )?;
            if b.get(..512) != boot.get(..512) {
                self.add(
                    Severity::Warning,
                    "fat-backup-boot-differs",
                    Some(i),
                    format!("partition {i} (FAT32): the backup boot sector (sector {bk}) differs from the boot sector — recovery from it would restore a different geometry; fsck.fat can copy one over the other"),
                );
            }
        }
        Ok(())
    }

    fn ext(&mut self, p: &mut PartitionPlan) -> Result<(), S::Error> {
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
                }));
                self.add(
                    Severity::Error,
                    "ext4-corrupt",
                    Some(i),
                    format!("partition {i}: ext2/3/4 superblock: {err} — the kernel will not mount it; run e2fsck (it can use a backup superblock)"),
                );
                return Ok(());
            }
        };
        let kind = sb.kind();
        for issue in &sb.issues {
            let sev = Severity::error_if(issue.is_error());
            self.add(
                sev,
                issue.code(),
                Some(i),
                format!("partition {i} ({kind}): {issue}"),
            );
        }
        let bs = u64::from(sb.block_bytes);
        let e = self.e;
        let vol_bytes = sb.blocks_count.saturating_mul(bs);
        if vol_bytes > p.size_bytes {
            self.add(
                Severity::Error,
                "ext4-larger-than-partition",
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
        let per_block = bs / u64::from(sb.desc_size.max(32));
        let count = if sb.incompat & 0x10 != 0 {
            groups.min(per_block)
        } else {
            groups
        }
        .min(ext4::MAX_DESCRIPTORS);
        // At most 1 MiB of descriptors (16384 groups of 64 bytes = a 2 TiB filesystem with 4 KiB blocks).
        let count = count.min((1 << 20) / u64::from(sb.desc_size.max(32)));
        let gdt_len = usize::try_from(count.saturating_mul(u64::from(sb.desc_size))).unwrap_or(0);
        let gdt = read_clamped(self.src, base.saturating_add(sb.gdt_offset()), gdt_len)?;
        let summary = ext4::summarise_groups(&sb, &gdt, count);
        for (g, field, block) in &summary.out_of_range {
            self.add(
                Severity::Error,
                "ext4-group-desc",
                Some(i),
                format!("partition {i} ({kind}): group {g}'s {field} is block {block}, outside the filesystem (blocks {}..{}): e2fsck will have to rebuild it", sb.first_data_block, sb.blocks_count),
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
        let sev = self.erase_severity();
        let mut aligned = true;
        if let Some(j) = journal_start {
            if j % e != 0 {
                aligned = false;
                self.add(
                    sev,
                    "ext4-journal-not-aligned",
                    Some(i),
                    format!(
                        "partition {i} ({kind}): the journal starts at {j} B ({} aligned), not on the {} erase block — the journal is the most rewritten area, so every commit near its edges costs extra erases; blockwise build places it on E",
                        format_size(alignment_of(j)),
                        format_size(e)
                    ),
                );
            }
        }
        if let Some(it) = inode_table_start {
            if it % e != 0 {
                self.add(
                    Severity::Info,
                    "ext4-inode-table-not-aligned",
                    Some(i),
                    format!("partition {i} ({kind}): the first inode table starts at {it} B, not on the {} erase block", format_size(e)),
                );
            }
        }
        let stride = u64::from(sb.raid_stride);
        let stripe = u64::from(sb.raid_stripe_width);
        let e_blocks = e / bs.max(1);
        if stride == 0 && stripe == 0 {
            self.add(
                Severity::Info,
                "ext4-no-stride",
                Some(i),
                format!("partition {i} ({kind}): stride and stripe_width are 0, so the block allocator does not know the {} erase block; set them with `tune2fs -E stride={e_blocks},stripe_width={e_blocks}`", format_size(e)),
            );
        }
        for (field, v, code) in [
            ("stride", stride, "ext4-stride-mismatch"),
            ("stripe_width", stripe, "ext4-stripe-mismatch"),
        ] {
            if v == 0 {
                continue;
            }
            let bytes = v.saturating_mul(bs);
            if e % bytes != 0 && bytes % e != 0 {
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
                    "ext4-stripe-smaller",
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
        if let Some(phys) = self
            .opts
            .device
            .as_ref()
            .and_then(|d| d.physical_block_bytes)
        {
            if bs < phys {
                self.add(
                    Severity::Warning,
                    "ext4-block-smaller-than-device",
                    Some(i),
                    format!("partition {i} ({kind}): {bs}-byte blocks are smaller than the device's {phys}-byte physical sector: single-block writes become read-modify-write cycles"),
                );
            }
        }
        if bs < PAGE {
            self.add(
                Severity::Warning,
                "ext4-small-blocks",
                Some(i),
                format!("partition {i} ({kind}): {bs}-byte blocks are smaller than a 4 KiB flash page: metadata writes become read-modify-write cycles; use 4096-byte blocks (mke2fs -b 4096)"),
            );
        }
        p.filesystem = Some(FsPlan::Ext4(Ext4Plan {
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
            aligned,
            notes: Vec::new(),
        }));
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
        let mut node: Option<Result<u64, u64>> = None;
        if sb.jnl_backup_type == 1 {
            let extents = bytes::le16(&sb.jnl_blocks, 0) == 0xf30a;
            node = ext4::first_data_block(&sb.jnl_blocks, extents);
        }
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
            let inode = read_clamped(self.src, off, 128)?;
            let extents = bytes::le32(&inode, 0x20) & 0x8_0000 != 0;
            node = ext4::first_data_block(inode.get(0x28..0x28 + 60).unwrap_or_default(), extents);
        }
        // Follow at most 5 index levels (ext4's maximum depth).
        for _ in 0..5 {
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

/// A source seen as longer than it is; the tail reads as zeros.
struct Padded<'a, S: BlockSource + ?Sized> {
    inner: &'a S,
    len: u64,
}

impl<S: BlockSource + ?Sized> BlockSource for Padded<'_, S> {
    type Error = S::Error;
    fn len(&self) -> u64 {
        self.len
    }
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> Result<(), S::Error> {
        buf.fill(0);
        let real = self.inner.len();
        if offset < real {
            let n = usize::try_from(real - offset)
                .unwrap_or(usize::MAX)
                .min(buf.len());
            if let Some(head) = buf.get_mut(..n) {
                self.inner.read_at(offset, head)?;
            }
        }
        Ok(())
    }
}

fn same_entries(a: &GptCopy, b: &GptCopy) -> bool {
    a.entries == b.entries
}

#[cfg(test)]
mod tests;
