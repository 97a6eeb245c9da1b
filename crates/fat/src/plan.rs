//! The FAT planner: FAT type, cluster size, reserved sectors and FAT size, chosen so that
//! the data area (and with `align-fat` the first FAT) starts on an erase-block boundary
//! measured from the start of the disk.
//!
//! All arithmetic is in `u64` with checked operations: a request from a hostile binding gets
//! an error, never a panic.

use blockwise_geometry::{derive_u64, format_size, FatPlan, FatType, FsKind};

use crate::options::{validate_label, Field, Invalid};
use crate::{Error, FatRequest};

/// Root directory entries of a FAT12/16 volume (the usual 512: 16 KiB).
pub const ROOT_ENTRIES: u64 = 512;
/// Reserved sectors before alignment padding on FAT32 (hosts boot, FSInfo and backups at 6, 7).
const FAT32_MIN_RESERVED: u64 = 32;
/// Largest cluster chosen automatically (bigger ones break older drivers).
const AUTO_MAX_CLUSTER: u64 = 64 << 10;

/// The complete on-disk geometry; every count is in filesystem sectors unless named.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Layout {
    /// FAT variant.
    pub kind: FatType,
    /// Bytes per sector.
    pub sector_bytes: u64,
    /// Sectors per cluster.
    pub sec_per_clus: u64,
    /// Reserved sectors (boot sector … first FAT).
    pub reserved: u64,
    /// Number of FATs.
    pub fats: u64,
    /// Sectors per FAT.
    pub fat_sectors: u64,
    /// Fixed root directory entries (0 on FAT32).
    pub root_entries: u64,
    /// Sectors of the fixed root directory (0 on FAT32).
    pub root_dir_sectors: u64,
    /// Sectors in the volume.
    pub total_sectors: u64,
    /// Data clusters.
    pub clusters: u64,
    /// Partition start in sectors (`BPB_HiddSec`), saturated to `u32`.
    pub hidden_sectors: u32,
}

impl Layout {
    /// First sector of the data area (cluster 2).
    #[must_use]
    pub fn data_start(&self) -> u64 {
        self.reserved + self.fats * self.fat_sectors + self.root_dir_sectors
    }

    /// Cluster size in bytes.
    #[must_use]
    pub fn cluster_bytes(&self) -> u64 {
        self.sec_per_clus * self.sector_bytes
    }

    /// Byte offset (relative to the volume) of cluster `k ≥ 2`.
    #[must_use]
    pub fn cluster_offset(&self, k: u64) -> u64 {
        (self.data_start() + (k - 2) * self.sec_per_clus) * self.sector_bytes
    }

    /// Volume size in bytes.
    #[must_use]
    pub fn volume_bytes(&self) -> u64 {
        self.total_sectors * self.sector_bytes
    }
}

/// What is wrong with one (type, cluster size) attempt.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Shortfall {
    /// Reserved sectors + FATs do not fit.
    TooSmall,
    /// Fewer clusters than the type allows.
    TooFew(u64),
    /// More clusters than the type allows.
    TooMany(u64),
    /// Alignment needs more reserved sectors than `u16`.
    Reserved(u64),
}

/// The request, reduced to sectors.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Geom {
    /// Sector bytes S.
    pub(crate) s: u64,
    /// Erase block in sectors.
    a: u64,
    /// Partition start in sectors, modulo `a`.
    p: u64,
    /// Total sectors T.
    total: u64,
    /// Number of FATs.
    fats: u64,
    align_fat: bool,
}

/// Sectors to add to `x` to reach a multiple of `a`.
fn pad_to(x: u64, a: u64) -> u64 {
    (a - x % a) % a
}

/// Smallest FAT (sectors) able to map every cluster that fits beside it:
/// `F·S·8 ≥ (⌊(avail − N·F)/C⌋ + 2)·bits`.
fn fat_sectors(avail: u64, spc: u64, fats: u64, bits: u64, s: u64) -> Option<u64> {
    let fits = |f: u64| -> bool {
        let Some(used) = fats.checked_mul(f) else {
            return false;
        };
        if used >= avail {
            return false;
        }
        let clusters = (avail - used) / spc;
        (clusters + 2)
            .checked_mul(bits)
            .is_some_and(|need| f.checked_mul(s * 8).is_some_and(|have| need <= have))
    };
    let num = avail.checked_add(spc.checked_mul(2)?)?.checked_mul(bits)?;
    let den = (8 * s).checked_mul(spc)?.checked_add(fats * bits)?;
    let mut f = num.div_ceil(den).max(1);
    // The closed form is sufficient; step down while one less still fits (floor effects),
    // and up in the (theoretical) case it does not.
    let mut guard = 0;
    while f > 1 && fits(f - 1) && guard < 64 {
        f -= 1;
        guard += 1;
    }
    while !fits(f) && guard < 128 {
        f += 1;
        guard += 1;
    }
    fits(f).then_some(f)
}

/// Smallest `f' ≥ f` with `(base + fats·f') % a == 0`, if any.
fn pad_fat(f: u64, fats: u64, base: u64, a: u64) -> Option<u64> {
    let t = pad_to(base, a);
    let f2 = match fats {
        1 => f.checked_add((t + a - f % a) % a)?,
        2 => {
            if a == 1 {
                f
            } else if t % 2 == 1 {
                return None;
            } else {
                let half = a / 2;
                f.checked_add((t / 2 + half - f % half) % half)?
            }
        }
        _ => return None,
    };
    ((base + fats.checked_mul(f2)?) % a == 0).then_some(f2)
}

fn compute(g: Geom, kind: FatType, spc: u64) -> Result<Layout, Shortfall> {
    let (r0, root_entries) = match kind {
        FatType::Fat32 => (FAT32_MIN_RESERVED, 0),
        _ => (1, ROOT_ENTRIES),
    };
    let rds = (root_entries * 32).div_ceil(g.s);
    let bits = kind.bits();
    let meta = |r: u64| -> Result<u64, Shortfall> {
        let avail = g
            .total
            .checked_sub(r + rds)
            .filter(|&v| v > 0)
            .ok_or(Shortfall::TooSmall)?;
        fat_sectors(avail, spc, g.fats, bits, g.s).ok_or(Shortfall::TooSmall)
    };
    let (reserved, fat) = if g.align_fat {
        let r = r0 + pad_to(g.p + r0, g.a);
        let f = meta(r)?;
        // Pad the FATs (by less than one erase block in all) so the data area is aligned.
        let f = pad_fat(f, g.fats, g.p + r + rds, g.a).ok_or(Shortfall::TooSmall)?;
        (r, f)
    } else {
        let f = meta(r0)?;
        let r = r0 + pad_to(g.p + r0 + g.fats * f + rds, g.a);
        if r <= u64::from(u16::MAX) {
            (r, f)
        } else {
            // Pad the FATs instead of the reserved area.
            let try_r = |r: u64| pad_fat(f, g.fats, g.p + r + rds, g.a).map(|f| (r, f));
            try_r(r0)
                .or_else(|| try_r(r0 + 1))
                .ok_or(Shortfall::Reserved(r))?
        }
    };
    if reserved > u64::from(u16::MAX) {
        return Err(Shortfall::Reserved(reserved));
    }
    let data = reserved + g.fats * fat + rds;
    if data >= g.total {
        return Err(Shortfall::TooSmall);
    }
    let clusters = (g.total - data) / spc;
    if clusters < kind.min_clusters() {
        return Err(Shortfall::TooFew(clusters));
    }
    if clusters > kind.max_clusters() || (kind != FatType::Fat32 && fat > u64::from(u16::MAX)) {
        return Err(Shortfall::TooMany(clusters));
    }
    Ok(Layout {
        kind,
        sector_bytes: g.s,
        sec_per_clus: spc,
        reserved,
        fats: g.fats,
        fat_sectors: fat,
        root_entries,
        root_dir_sectors: rds,
        total_sectors: g.total,
        clusters,
        hidden_sectors: 0,
    })
}

/// The default cluster size for a volume of `bytes`: the SD Association's choices for SD
/// cards (32 KiB on SDHC-sized FAT32, 16–32 KiB on large FAT16), Microsoft's elsewhere.
fn default_cluster(kind: FatType, bytes: u64) -> u64 {
    const MIB: u64 = 1 << 20;
    match kind {
        FatType::Fat12 => 4 << 10,
        FatType::Fat16 => match bytes {
            b if b <= 128 * MIB => 2 << 10,
            b if b <= 256 * MIB => 4 << 10,
            b if b <= 512 * MIB => 8 << 10,
            b if b <= 1024 * MIB => 16 << 10,
            b if b <= 2048 * MIB => 32 << 10,
            _ => 64 << 10,
        },
        FatType::Fat32 => match bytes {
            b if b < 4096 * MIB => 4 << 10,
            _ => 32 << 10,
        },
    }
}

fn mib_up(bytes: u64) -> String {
    format!("{} MiB", bytes.div_ceil(1 << 20))
}

/// Validated request parameters.
pub(crate) struct Checked {
    pub(crate) g: Geom,
    erase: u64,
    start: u64,
    size: u64,
    pub(crate) label: Option<String>,
}

fn invalid(field: Field, reason: impl Into<String>) -> Error {
    Error::Invalid(Invalid::new(field, reason))
}

pub(crate) fn check_request(req: &FatRequest) -> Result<Checked, Error> {
    let e = req.erase_block_bytes;
    if !e.is_power_of_two() || e < 512 {
        return Err(invalid(
            Field::EraseBlock,
            format!("{e}: the erase block must be a power of two of at least 512 bytes"),
        ));
    }
    if e > 1 << 40 {
        return Err(invalid(
            Field::EraseBlock,
            format!(
                "{e}: an erase block larger than 1 TiB is not a real device's; use 128KiB to 16MiB"
            ),
        ));
    }
    if req
        .partition_start_bytes
        .checked_add(req.partition_size_bytes)
        .is_none()
    {
        return Err(invalid(
            Field::Start,
            format!(
                "a partition of {} bytes cannot start at byte {}: the end is past 2^64",
                req.partition_size_bytes, req.partition_start_bytes
            ),
        ));
    }
    req.options
        .validate(req.device_sector.bytes(), e)
        .map_err(Error::Invalid)?;
    let s = req.options.effective_sector(req.device_sector.bytes());
    if req.partition_start_bytes % s != 0 {
        return Err(invalid(
            Field::Start,
            format!(
                "the partition starts at byte {}, not a multiple of the {s}-byte FAT sector",
                req.partition_start_bytes
            ),
        ));
    }
    let fats = u64::from(req.options.fats);
    let total = req.partition_size_bytes / s;
    if total > u64::from(u32::MAX) {
        return Err(invalid(
            Field::Size,
            format!(
                "{} is too large for FAT with {s}-byte sectors (at most {}); use a smaller partition{}",
                format_size(req.partition_size_bytes),
                format_size(u64::from(u32::MAX) * s),
                if s == 512 { " or 4096-byte sectors" } else { "" }
            ),
        ));
    }
    let label = match &req.label {
        None => None,
        Some(l) => validate_label(l).map_err(Error::Invalid)?,
    };
    Ok(Checked {
        g: Geom {
            s,
            a: e / s,
            p: (req.partition_start_bytes / s) % (e / s),
            total,
            fats,
            align_fat: req.options.align_fat,
        },
        erase: e,
        start: req.partition_start_bytes,
        size: req.partition_size_bytes,
        label,
    })
}

/// Why one FAT type does not fit, as an error that says what to change.
fn explain(
    c: &Checked,
    kind: FatType,
    cluster: Option<u64>,
    short: Shortfall,
    tried: u64,
) -> Error {
    let s = c.g.s;
    let name = kind.name();
    let have = format_size(c.size);
    match short {
        Shortfall::Reserved(r) => invalid(
            Field::EraseBlock,
            format!(
                "aligning to the {} erase block needs {r} reserved sectors, more than the 65535 a FAT boot sector can count; use fat.sector-size = 4096, a smaller erase-block or align-fat = false",
                format_size(c.erase)
            ),
        ),
        Shortfall::TooFew(_) | Shortfall::TooSmall => {
            // Smallest size that works with the smallest cluster tried.
            let spc = tried / s;
            let works = |t: u64| -> bool {
                let g = Geom { total: t, ..c.g };
                !matches!(compute(g, kind, spc), Err(Shortfall::TooFew(_) | Shortfall::TooSmall))
            };
            let (mut lo, mut hi) = (c.g.total, u64::from(u32::MAX));
            let need = if works(hi) {
                while lo < hi {
                    let mid = lo + (hi - lo) / 2;
                    if works(mid) {
                        hi = mid;
                    } else {
                        lo = mid + 1;
                    }
                }
                Some(lo * s)
            } else {
                None
            };
            let need_text = need.map_or_else(|| "more space".to_string(), |b| format!("at least {}", mib_up(b)));
            let alt = match (kind, cluster) {
                (_, Some(cb)) if cb > s => "a smaller fat.cluster, another FAT type or a larger partition".to_string(),
                // Clusters of one sector are the smallest there are.
                (_, Some(_)) => "another FAT type or a larger partition".to_string(),
                (FatType::Fat32, None) if s == 4096 => "fat16 or 512-byte sectors (fat.sector-size = 512), or a larger partition".into(),
                (FatType::Fat32, None) => "fat16 or a larger partition".into(),
                (FatType::Fat16, None) => "fat12 or a larger partition".into(),
                (FatType::Fat12, None) => "a larger partition".into(),
            };
            let what = match cluster {
                Some(cb) => format!("{name} with {}-byte clusters", cb),
                None => format!("{name} with {s}-byte sectors"),
            };
            let why = match short {
                Shortfall::TooFew(n) => format!(" ({have} gives {n} clusters, {name} needs at least {})", kind.min_clusters()),
                _ => format!(" ({have} does not even hold the reserved area and FATs)"),
            };
            invalid(Field::Size, format!("{what} needs {need_text}{why}; use {alt}"))
        }
        Shortfall::TooMany(n) => {
            let alt = match kind {
                FatType::Fat12 => "fat16 (or fs = \"fat\" to choose automatically)",
                FatType::Fat16 => "fat32 (or fs = \"fat\" to choose automatically)",
                FatType::Fat32 => "a larger fat.cluster",
            };
            invalid(
                if cluster.is_some() { Field::Cluster } else { Field::Size },
                format!(
                    "{have} with {}-byte clusters gives {n} clusters, more than the {} {name} allows; use {alt}",
                    tried,
                    kind.max_clusters()
                ),
            )
        }
    }
}

/// Tries one FAT type: the forced cluster, or the default adjusted until the count fits.
fn try_type(c: &Checked, kind: FatType, forced: Option<u64>) -> Result<(Layout, String), Error> {
    let s = c.g.s;
    let max_c = c.erase.min(128 * s);
    if let Some(cb) = forced {
        return compute(c.g, kind, cb / s)
            .map(|l| {
                (
                    l,
                    format!(
                        "Clusters of {} as requested (fat.cluster).",
                        format_size(cb)
                    ),
                )
            })
            .map_err(|e| explain(c, kind, forced, e, cb));
    }
    let auto_max = max_c.min(AUTO_MAX_CLUSTER.max(s));
    let mut cb = default_cluster(kind, c.size).clamp(s, auto_max);
    let first = cb;
    let mut dir = 0i8;
    let mut smallest = cb;
    for _ in 0..24 {
        smallest = smallest.min(cb);
        match compute(c.g, kind, cb / s) {
            Ok(l) => {
                let why = if cb == first {
                    format!(
                        "Clusters of {}: the SD Association/Microsoft default for a {} {} volume, capped to the sector size and the erase block.",
                        format_size(cb),
                        format_size(c.size),
                        kind.name()
                    )
                } else {
                    format!(
                        "Clusters of {}: the default {} gave a cluster count outside {}'s {}–{} range.",
                        format_size(cb),
                        format_size(first),
                        kind.name(),
                        kind.min_clusters(),
                        kind.max_clusters()
                    )
                };
                return Ok((l, why));
            }
            Err(Shortfall::TooFew(_) | Shortfall::TooSmall) if cb > s && dir <= 0 => {
                dir = -1;
                cb /= 2;
            }
            Err(Shortfall::TooMany(_)) if cb < auto_max && dir >= 0 => {
                dir = 1;
                cb *= 2;
            }
            Err(e) => {
                return Err(explain(
                    c,
                    kind,
                    None,
                    e,
                    if dir > 0 { cb } else { smallest },
                ))
            }
        }
    }
    Err(explain(c, kind, None, Shortfall::TooSmall, smallest))
}

/// Plans the layout and the [`FatPlan`] describing it.
pub fn plan_layout(req: &FatRequest) -> Result<(Layout, FatPlan), Error> {
    let c = check_request(req)?;
    let forced = req.options.cluster;
    const MIB: u64 = 1 << 20;
    let only = |t: FatType| (vec![t], format!("{} as requested.", t.name()));
    let (order, why_type): (Vec<FatType>, String) = match req.fs {
        FsKind::Fat(Some(t)) => only(t),
        FsKind::Fat(None) => {
            if c.size < 16 * MIB {
                (
                    vec![FatType::Fat12, FatType::Fat16, FatType::Fat32],
                    "fat12 chosen automatically: the volume is under 16 MiB.".into(),
                )
            } else if c.size < 512 * MIB {
                (
                    vec![FatType::Fat16, FatType::Fat32, FatType::Fat12],
                    "fat16 chosen automatically: the volume is under 512 MiB.".into(),
                )
            } else {
                (
                    vec![FatType::Fat32, FatType::Fat16, FatType::Fat12],
                    "fat32 chosen automatically: the volume is 512 MiB or more.".into(),
                )
            }
        }
        other => {
            return Err(invalid(
                Field::Fs,
                format!("{other} is not a FAT filesystem"),
            ));
        }
    };
    let pick = |c: &Checked| -> Result<(Layout, String, String), Error> {
        let mut first_err = None;
        for (i, &kind) in order.iter().enumerate() {
            match try_type(c, kind, forced) {
                Ok((l, why_cluster)) => {
                    let why_type = if i == 0 {
                        why_type.clone()
                    } else {
                        format!(
                            "{} chosen automatically: the preferred type does not fit this volume.",
                            kind.name()
                        )
                    };
                    return Ok((l, why_type, why_cluster));
                }
                Err(e) => {
                    if first_err.is_none() {
                        first_err = Some(e);
                    }
                }
            }
        }
        Err(first_err.unwrap_or_else(|| invalid(Field::Fs, "no FAT type fits this volume")))
    };
    let mut c = c;
    let mut fat_fallback = false;
    let (mut layout, why_type, why_cluster) = match pick(&c) {
        Ok(v) => v,
        Err(e) if c.g.align_fat => {
            // Too small to give the FAT its own erase block: keep only the data area aligned.
            c.g.align_fat = false;
            match pick(&c) {
                Ok(v) => {
                    fat_fallback = true;
                    v
                }
                Err(_) => return Err(e),
            }
        }
        Err(e) => return Err(e),
    };
    let s = c.g.s;
    let hidden = req.partition_start_bytes / s;
    layout.hidden_sectors = u32::try_from(hidden).unwrap_or(u32::MAX);
    let fat_start = c.start + layout.reserved * s;
    let data_start = c.start + layout.data_start() * s;
    let volume_id = req.options.volume_id.unwrap_or_else(|| {
        u32::try_from(derive_u64(req.seed, "fat-volume-id", c.start) & 0xffff_ffff).unwrap_or(0)
    });

    let mut notes = vec![why_type];
    notes.push(if req.options.sector_size.is_some() {
        format!("{s}-byte sectors as requested (fat.sector-size).")
    } else {
        format!("{s}-byte sectors: the device's logical sector size.")
    });
    notes.push(why_cluster);
    let e_text = format_size(c.erase);
    if fat_fallback {
        notes.push(format!(
            "warning: the first FAT cannot start on an erase-block boundary too (align-fat): the volume is too small or the padding exceeds the 65535 reserved sectors a boot sector counts; only the data area is aligned to {}.",
            format_size(c.erase)
        ));
    }
    notes.push(if c.g.align_fat {
        format!(
            "{} reserved sectors put the first FAT at byte {fat_start} from the start of the disk, on a {e_text} erase-block boundary.",
            layout.reserved
        )
    } else {
        format!(
            "{} reserved sectors put the data area on a {e_text} erase-block boundary (align-fat = false leaves the FAT unaligned).",
            layout.reserved
        )
    });
    notes.push(format!(
        "{} FAT{} of {} sectors each map {} clusters and are padded so that the data area starts at byte {data_start}, a multiple of {e_text}, and no cluster straddles an erase block.",
        layout.fats,
        if layout.fats == 1 { "" } else { "s" },
        layout.fat_sectors,
        layout.clusters
    ));
    if layout.kind != FatType::Fat32 {
        notes.push(format!(
            "The fixed root directory holds {} entries ({} sectors).",
            layout.root_entries, layout.root_dir_sectors
        ));
    }
    notes.push(format!(
        "Volume ID {:04X}-{:04X} {}.",
        volume_id >> 16,
        volume_id & 0xffff,
        if req.options.volume_id.is_some() {
            "as given (volume-id)"
        } else {
            "derived from the seed"
        }
    ));
    if layout.cluster_bytes() > 32 << 10 {
        notes.push(format!(
            "warning: clusters of {} are larger than 32 KiB; some older systems cannot read such volumes.",
            format_size(layout.cluster_bytes())
        ));
    }
    if s == 4096 {
        notes.push(
            "warning: 4096-byte FAT sectors are rejected by some firmware (Raspberry Pi boot ROM, U-Boot, many UEFI implementations); use fat.sector-size = 512 on a 512-byte device for partitions that must boot."
                .into(),
        );
    }
    if u32::try_from(hidden).is_err() {
        notes.push("warning: the partition start does not fit the 32-bit hidden-sectors field; it is recorded as 0xFFFFFFFF.".into());
    }
    if let Some(b) = req.options.bootloader {
        notes.push(format!(
            "{0} is installed after the volume is written: the `{0}` tool (Debian package {0}) writes its boot sector over blockwise's, keeping the BPB, and adds ldlinux.sys and ldlinux.c32 to the root directory (times from the spec's timestamp).",
            b.as_str()
        ));
    }
    let plan = FatPlan {
        kind: layout.kind,
        label: c.label,
        sector_bytes: u32::try_from(s).unwrap_or(0),
        cluster_bytes: u32::try_from(layout.cluster_bytes()).unwrap_or(0),
        reserved_sectors: u32::try_from(layout.reserved).unwrap_or(0),
        fat_count: u8::try_from(layout.fats).unwrap_or(0),
        fat_sectors: u32::try_from(layout.fat_sectors).unwrap_or(0),
        cluster_count: u32::try_from(layout.clusters).unwrap_or(0),
        fat_start_bytes: fat_start,
        data_start_bytes: data_start,
        volume_id,
        bootloader: req.options.bootloader.map(|b| b.as_str().to_string()),
        aligned: false,
        notes,
    };
    // The rule verify applies to what it reads (the first FAT off the erase block is a note).
    let plan = FatPlan {
        aligned: plan.alignment_holds(c.erase),
        ..plan
    };
    Ok((layout, plan))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::FatOptions;
    use blockwise_geometry::SectorSize;
    use proptest::prelude::*;

    const KIB: u64 = 1 << 10;
    const MIB: u64 = 1 << 20;
    const GIB: u64 = 1 << 30;

    fn req(
        start: u64,
        size: u64,
        dev: u32,
        e: u64,
        fs: FsKind,
        fat_sector: Option<u32>,
        cluster: Option<u64>,
    ) -> FatRequest {
        FatRequest {
            partition_start_bytes: start,
            partition_size_bytes: size,
            device_sector: SectorSize::from_bytes(u64::from(dev)).unwrap(),
            erase_block_bytes: e,
            fs,
            options: FatOptions {
                sector_size: fat_sector,
                cluster,
                align_fat: true,
                fats: 2,
                volume_id: None,
                bootloader: None,
            },
            label: Some("boot".into()),
            seed: 1,
        }
    }

    /// (reserved, fat sectors, first data sector, clusters)
    fn check(r: &FatRequest, want: (u64, u64, u64, u64)) {
        let (l, p) = plan_layout(r).unwrap();
        assert_eq!(
            (l.reserved, l.fat_sectors, l.data_start(), l.clusters),
            want,
            "{r:?}"
        );
        assert!(p.aligned);
        assert_eq!(p.data_start_bytes % r.erase_block_bytes, 0);
        assert_eq!(p.fat_start_bytes % r.erase_block_bytes, 0);
    }

    #[test]
    fn reference_worked_plans() {
        // fat32.md §7 worked plans (prototype verified with fsck.fat and mtools).
        // Same reserved sectors; the FATs are padded only until the data area lands on E
        // (DESIGN.md), where the prototype rounded each FAT to a whole erase block.
        check(
            &req(
                MIB,
                GIB,
                512,
                4 * MIB,
                FsKind::Fat(Some(FatType::Fat32)),
                None,
                Some(4096),
            ),
            (6144, 4096, 14336, 260_352),
        );
        check(
            &req(
                MIB,
                GIB,
                4096,
                4 * MIB,
                FsKind::Fat(Some(FatType::Fat32)),
                None,
                Some(4096),
            ),
            (768, 512, 1792, 260_352),
        );
        check(
            &req(
                MIB,
                GIB,
                512,
                MIB,
                FsKind::Fat(Some(FatType::Fat32)),
                None,
                Some(512),
            ),
            (2048, 16384, 34816, 2_062_336),
        );
    }

    #[test]
    fn classic_usb_layout() {
        // MBR partition at sector 256, E = 128 KiB, 64 KiB clusters.
        let r = req(
            256 * 512,
            4 * GIB,
            512,
            128 * KIB,
            FsKind::Fat(Some(FatType::Fat32)),
            None,
            Some(64 * KIB),
        );
        let (l, p) = plan_layout(&r).unwrap();
        assert_eq!((p.data_start_bytes / 512) % 256, 0);
        assert_eq!(l.sec_per_clus, 128);
    }

    #[test]
    fn design_example() {
        let r = req(
            4 * MIB,
            512 * MIB,
            512,
            4 * MIB,
            FsKind::Fat(Some(FatType::Fat32)),
            None,
            Some(4096),
        );
        let (_, p) = plan_layout(&r).unwrap();
        assert_eq!(p.reserved_sectors, 8192);
        assert_eq!(p.fat_start_bytes, 8 * MIB);
        assert_eq!(p.data_start_bytes, 12 * MIB);
        // Kept as given, like mkfs.fat 4.2 (the writer warns about the lowercase).
        assert_eq!(p.label.as_deref(), Some("boot"));
    }

    #[test]
    fn auto_types() {
        let kind = |size, s| {
            plan_layout(&req(
                4 * MIB,
                size,
                s,
                4 * MIB,
                FsKind::Fat(None),
                None,
                None,
            ))
            .unwrap()
            .1
            .kind
            .name()
        };
        assert_eq!(kind(8 * MIB, 512), "fat12");
        assert_eq!(kind(64 * MIB, 512), "fat16");
        assert_eq!(kind(64 * MIB, 4096), "fat16");
        assert_eq!(kind(300 * MIB, 512), "fat16");
        assert_eq!(kind(GIB, 4096), "fat32");
        assert_eq!(kind(32 * GIB, 512), "fat32");
    }

    #[test]
    fn errors_say_what_to_change() {
        let e = plan_layout(&req(
            4 * MIB,
            200 * MIB,
            4096,
            4 * MIB,
            FsKind::Fat(Some(FatType::Fat32)),
            None,
            None,
        ))
        .unwrap_err()
        .to_string();
        assert!(
            e.starts_with("fat32 with 4096-byte sectors needs at least 2"),
            "{e}"
        );
        assert!(e.contains("use fat16 or 512-byte sectors"), "{e}");
        let e = plan_layout(&req(
            4 * MIB,
            16 * GIB,
            512,
            4 * MIB,
            FsKind::Fat(Some(FatType::Fat16)),
            None,
            None,
        ))
        .unwrap_err()
        .to_string();
        assert!(e.contains("use fat32"), "{e}");
        let e = plan_layout(&req(
            4 * MIB,
            2 * MIB,
            512,
            4 * MIB,
            FsKind::Fat(Some(FatType::Fat16)),
            None,
            None,
        ))
        .unwrap_err()
        .to_string();
        assert!(e.contains("use fat12"), "{e}");
        // A 64 MiB erase block needs more than 65535 reserved 512-byte sectors to align the
        // FAT: the planner keeps only the data area aligned and says so.
        let (_, p) = plan_layout(&req(
            4 * MIB,
            GIB,
            512,
            64 * MIB,
            FsKind::Fat(Some(FatType::Fat32)),
            None,
            None,
        ))
        .unwrap();
        assert_eq!(p.data_start_bytes % (64 * MIB), 0);
        assert!(p.notes.iter().any(|n| n.contains("65535")));
        let e = plan_layout(&req(
            4 * MIB,
            GIB,
            512,
            4 * MIB,
            FsKind::Fat(Some(FatType::Fat32)),
            None,
            Some(8 * MIB),
        ))
        .unwrap_err()
        .to_string();
        assert!(e.contains("erase block"), "{e}");
        let e = plan_layout(&req(
            4 * MIB,
            GIB,
            4096,
            4 * MIB,
            FsKind::Fat(Some(FatType::Fat32)),
            Some(512),
            None,
        ))
        .unwrap_err()
        .to_string();
        assert!(e.contains("smaller than the device"), "{e}");
        let mut r = req(
            4 * MIB,
            GIB,
            512,
            4 * MIB,
            FsKind::Fat(Some(FatType::Fat32)),
            None,
            None,
        );
        r.label = Some("bad/label".into());
        assert!(plan_layout(&r)
            .unwrap_err()
            .to_string()
            .contains("not a FAT label"));
    }

    #[test]
    fn fat32_minimum_with_4k_sectors_is_about_257_mib() {
        let e = plan_layout(&req(
            MIB,
            250 * MIB,
            4096,
            MIB,
            FsKind::Fat(Some(FatType::Fat32)),
            None,
            None,
        ))
        .unwrap_err()
        .to_string();
        assert!(
            e.starts_with("fat32 with 4096-byte sectors needs at least 25"),
            "{e}"
        );
        assert!(plan_layout(&req(
            MIB,
            260 * MIB,
            4096,
            MIB,
            FsKind::Fat(Some(FatType::Fat32)),
            None,
            None
        ))
        .is_ok());
    }

    #[test]
    fn four_k_sectors_warn() {
        let (_, p) = plan_layout(&req(
            4 * MIB,
            GIB,
            4096,
            4 * MIB,
            FsKind::Fat(Some(FatType::Fat32)),
            None,
            None,
        ))
        .unwrap();
        assert!(p.notes.iter().any(|n| n.contains("U-Boot")));
    }

    #[test]
    fn unaligned_fat_option_keeps_data_aligned() {
        let mut r = req(
            63 * 512,
            GIB,
            512,
            128 * KIB,
            FsKind::Fat(Some(FatType::Fat32)),
            None,
            Some(4096),
        );
        r.options.align_fat = false;
        let (l, p) = plan_layout(&r).unwrap();
        assert!(p.aligned);
        assert_eq!(p.data_start_bytes % (128 * KIB), 0);
        assert!(l.reserved >= 32 && l.reserved < 32 + 256);
    }

    #[test]
    fn grid_of_common_requests_all_plan() {
        // Every E × device sector × size × type a user is likely to ask for plans (or, for
        // 4096-byte FAT32 below ~257 MiB, fails with advice); none panics.
        let mut ok = 0;
        for e in [128 * KIB, MIB, 4 * MIB, 8 * MIB, 16 * MIB] {
            for dev in [512u32, 4096] {
                for size in [
                    32 * MIB,
                    64 * MIB,
                    300 * MIB,
                    GIB,
                    8 * GIB,
                    32 * GIB,
                    256 * GIB,
                    2047 * GIB,
                ] {
                    for fs in [
                        FsKind::Fat(None),
                        FsKind::Fat(Some(FatType::Fat16)),
                        FsKind::Fat(Some(FatType::Fat32)),
                    ] {
                        match plan_layout(&req(e, size, dev, e, fs, None, None)) {
                            Ok((_, p)) => {
                                assert!(p.aligned);
                                ok += 1;
                            }
                            Err(err) => assert!(err.to_string().contains("use "), "{err}"),
                        }
                    }
                }
            }
        }
        assert!(ok >= 150, "{ok}");
    }

    fn kind_strategy() -> impl Strategy<Value = FsKind> {
        prop_oneof![
            Just(FsKind::Fat(None)),
            Just(FsKind::Fat(Some(FatType::Fat12))),
            Just(FsKind::Fat(Some(FatType::Fat16))),
            Just(FsKind::Fat(Some(FatType::Fat32)))
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(400))]
        #[test]
        fn random_requests_plan_aligned_or_fail_clearly(
            e_shift in 9u32..44,
            start_units in prop_oneof![0u64..(1 << 24), any::<u64>()],
            size_shift in 16u32..43,
            size_frac in any::<u64>(),
            dev4k in any::<bool>(),
            fs4k in any::<bool>(),
            cluster_shift in prop::option::of(8u32..22),
            kind in kind_strategy(),
            align_fat in any::<bool>(),
            fats in 0u8..4,
        ) {
            let e = 1u64 << e_shift;
            // Log-uniform sizes from 64 KiB to 8 TiB.
            let size = (1u64 << size_shift) + size_frac % (1u64 << size_shift);
            let dev = if dev4k { 4096 } else { 512 };
            let r = FatRequest {
                partition_start_bytes: start_units.wrapping_mul(dev),
                partition_size_bytes: size,
                device_sector: SectorSize::from_bytes(dev).unwrap(),
                erase_block_bytes: e,
                fs: kind,
                options: FatOptions {
                    sector_size: Some(if fs4k { 4096 } else { 512 }),
                    cluster: cluster_shift.map(|s| 1u64 << s),
                    align_fat,
                    fats,
                    volume_id: None,
                    bootloader: None,
                },
                label: None,
                seed: 7,
            };
            match plan_layout(&r) {
                Ok((l, p)) => {
                    let s = u64::from(p.sector_bytes);
                    prop_assert!(p.aligned);
                    prop_assert_eq!(p.data_start_bytes % e, 0);
                    let fallback = p.notes.iter().any(|n| n.contains("cannot start on an erase-block boundary"));
                    if align_fat && !fallback { prop_assert_eq!(p.fat_start_bytes % e, 0); }
                    prop_assert!(l.clusters >= l.kind.min_clusters() && l.clusters <= l.kind.max_clusters());
                    prop_assert!((l.clusters + 2) * l.kind.bits() <= l.fat_sectors * s * 8);
                    prop_assert!(l.reserved >= 1 && l.reserved <= 65535);
                    prop_assert!(l.cluster_bytes() <= e && e % l.cluster_bytes() == 0);
                    prop_assert!(l.sec_per_clus <= 128);
                    prop_assert!(l.data_start() + l.clusters * l.sec_per_clus <= l.total_sectors);
                    prop_assert!(l.volume_bytes() <= size);
                    if l.kind == FatType::Fat32 { prop_assert!(l.reserved >= 8); }
                }
                Err(err) => {
                    let msg = err.to_string();
                    prop_assert!(msg.len() > 20, "{}", msg);
                }
            }
        }
    }
}
