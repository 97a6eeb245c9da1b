//! `blockwise probe`: what the kernel says about a block device, read from sysfs
//! (`/sys/dev/block/MAJ:MIN`, its `queue/` and `device/`), and the erase block to plan with.
//!
//! Every sysfs read goes through a root directory parameter ([`probe_sysfs`]), so the unit
//! tests run against a fake tree in a temp dir. Nothing here writes; the device itself is
//! only opened for the read-timing estimate ([`crate::estimate`]).

use std::fs;
use std::io;
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::{Path, PathBuf};

/// The planner's default erase block, used when nothing better is known.
pub const DEFAULT_ERASE_BLOCK: u64 = 4 << 20;
/// `optimal_io_size` values that mean "not given": 32767 and 65535 sectors of 512 bytes,
/// which some USB bridges report.
const BOGUS_OPTIMAL_IO: [u64; 2] = [32_767 * 512, 65_535 * 512];

/// Why a path cannot be probed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ProbeError {
    /// The path does not exist.
    #[error("{path}: no such file or directory")]
    Missing {
        /// The path given.
        path: PathBuf,
    },
    /// The path is something else than a block device.
    #[error("{path} is not a block device ({what}); probe reads what the kernel knows about a device — use `blockwise verify` for an image file")]
    NotBlockDevice {
        /// The path given.
        path: PathBuf,
        /// What it is instead (`a regular file`, `a character device`, …).
        what: &'static str,
    },
    /// The device has no usable sysfs directory.
    #[error("{path}: no sysfs entry {sysfs} for this block device")]
    NoSysfs {
        /// The device.
        path: PathBuf,
        /// The sysfs directory looked for.
        sysfs: PathBuf,
    },
    /// Reading the path or sysfs failed.
    #[error("{path}: {source}")]
    Io {
        /// What was read.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: io::Error,
    },
}

/// How the device is attached, derived from its sysfs path (and `device/type` for MMC).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transport {
    /// A USB mass-storage device (stick, card reader).
    Usb,
    /// An SD/MMC card on an SD host controller (`mmcblkN`).
    Mmc,
    /// An NVMe namespace.
    Nvme,
    /// A SATA/PATA disk behind libata.
    Sata,
    /// Another SCSI device.
    Scsi,
    /// A virtio disk (virtual machine).
    Virtio,
    /// A loop device (a file).
    Loop,
    /// Another virtual device (zram, device mapper, md, nbd).
    Virtual,
    /// Not recognised.
    Unknown,
}

impl Transport {
    /// `usb`, `mmc`, `nvme`, `sata`, `scsi`, `virtio`, `loop`, `virtual`, `unknown`.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Transport::Usb => "usb",
            Transport::Mmc => "mmc",
            Transport::Nvme => "nvme",
            Transport::Sata => "sata",
            Transport::Scsi => "scsi",
            Transport::Virtio => "virtio",
            Transport::Loop => "loop",
            Transport::Virtual => "virtual",
            Transport::Unknown => "unknown",
        }
    }

    /// From the canonical sysfs directory of the disk and its kernel name.
    fn detect(disk_dir: &Path, name: &str) -> Transport {
        let comps: Vec<String> = disk_dir
            .components()
            .map(|c| c.as_os_str().to_string_lossy().into_owned())
            .collect();
        let has = |f: &dyn Fn(&str) -> bool| comps.iter().any(|c| f(c));
        let prefixed_digit = |c: &str, p: &str| {
            c.strip_prefix(p)
                .is_some_and(|r| r.starts_with(|ch: char| ch.is_ascii_digit()))
        };
        if name.starts_with("loop") {
            Transport::Loop
        } else if has(&|c| prefixed_digit(c, "usb")) {
            Transport::Usb
        } else if name.starts_with("mmcblk") || has(&|c| c == "mmc_host") {
            Transport::Mmc
        } else if name.starts_with("nvme") || has(&|c| c.starts_with("nvme")) {
            Transport::Nvme
        } else if has(&|c| prefixed_digit(c, "virtio")) || name.starts_with("vd") {
            Transport::Virtio
        } else if has(&|c| prefixed_digit(c, "ata")) {
            Transport::Sata
        } else if has(&|c| c == "virtual") {
            Transport::Virtual
        } else if has(&|c| prefixed_digit(c, "host") || prefixed_digit(c, "target")) {
            Transport::Scsi
        } else {
            Transport::Unknown
        }
    }
}

/// A partition the kernel knows (`/sys/class/block/<disk>/<part>/`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SysPartition {
    /// Kernel name, e.g. `sdb1`.
    pub name: String,
    /// Partition number (`partition`).
    pub number: u32,
    /// Start on the disk in bytes (sysfs `start` is in 512-byte units).
    pub start_bytes: u64,
    /// Size in bytes (sysfs `size` × 512).
    pub size_bytes: u64,
}

/// What sysfs says about a block device. Values of the disk (`queue/…`, `device/…`) also for
/// a partition, whose own `start` is in [`Probe::partition_start_bytes`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Probe {
    /// The device node as given (symlinks resolved), e.g. `/dev/sdb`.
    pub path: PathBuf,
    /// Kernel name of the device, e.g. `sdb` or `sdb1`.
    pub name: String,
    /// Kernel name of its whole disk (itself for a disk).
    pub disk: String,
    /// `MAJ:MIN`.
    pub dev: String,
    /// `/sys/class/block/<disk>`: where the values were read (for messages).
    pub sysfs: PathBuf,
    /// The start of a partition on its disk, in bytes; `None` for a disk.
    pub partition_start_bytes: Option<u64>,
    /// Size of the device in bytes (sysfs `size` × 512).
    pub size_bytes: u64,
    /// `queue/logical_block_size`.
    pub logical_block_bytes: u64,
    /// `queue/physical_block_size`.
    pub physical_block_bytes: u64,
    /// `queue/minimum_io_size` as read (0 when absent).
    pub minimum_io_raw: u64,
    /// `queue/optimal_io_size` as read (0 when absent or not reported).
    pub optimal_io_raw: u64,
    /// `queue/optimal_io_size` when it means something: `None` for 0, the bogus 32767 or
    /// 65535 sectors, and values that are not a multiple of the logical block size.
    pub optimal_io_bytes: Option<u64>,
    /// `queue/discard_granularity` (0 = no discard).
    pub discard_granularity_bytes: u64,
    /// `queue/discard_max_bytes`.
    pub discard_max_bytes: u64,
    /// `device/preferred_erase_size` (SD/MMC cards): the erase/allocation unit.
    pub preferred_erase_bytes: Option<u64>,
    /// `alignment_offset` of the device.
    pub alignment_offset_bytes: u64,
    /// `removable`.
    pub removable: bool,
    /// `queue/rotational`.
    pub rotational: bool,
    /// `ro` of the device or its disk.
    pub read_only: bool,
    /// `device/vendor`, trimmed; empty when absent.
    pub vendor: String,
    /// `device/model` (`device/name` for MMC), trimmed.
    pub model: String,
    /// Serial number: `device/serial`, else the nearest USB device's `serial`.
    pub serial: String,
    /// How it is attached.
    pub transport: Transport,
    /// `device/type` when present (MMC: `SD`, `MMC`).
    pub device_type: String,
    /// The disk's partitions as the kernel sees them, by number.
    pub partitions: Vec<SysPartition>,
    /// Values that were read but ignored, and why.
    pub notes: Vec<String>,
}

fn read_trim(p: &Path) -> Option<String> {
    fs::read_to_string(p).ok().map(|s| s.trim().to_string())
}

fn read_u64(p: &Path) -> Option<u64> {
    read_trim(p).and_then(|s| s.parse().ok())
}

fn split_dev(rdev: u64) -> (u64, u64) {
    let major = ((rdev >> 32) & 0xffff_f000) | ((rdev >> 8) & 0x0fff);
    let minor = ((rdev >> 12) & 0xffff_ff00) | (rdev & 0xff);
    (major, minor)
}

/// Probes the block device at `path` through `/sys`.
pub fn probe(path: &Path) -> Result<Probe, ProbeError> {
    probe_in(Path::new("/sys"), path)
}

/// Probes the block device at `path` with sysfs mounted at `sys`.
pub fn probe_in(sys: &Path, path: &Path) -> Result<Probe, ProbeError> {
    let meta = match fs::metadata(path) {
        Ok(m) => m,
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            return Err(ProbeError::Missing {
                path: path.to_path_buf(),
            })
        }
        Err(source) => {
            return Err(ProbeError::Io {
                path: path.to_path_buf(),
                source,
            })
        }
    };
    let ft = meta.file_type();
    if !ft.is_block_device() {
        let what = if ft.is_file() {
            "a regular file"
        } else if ft.is_dir() {
            "a directory"
        } else if ft.is_char_device() {
            "a character device"
        } else if ft.is_fifo() {
            "a FIFO"
        } else {
            "a socket or other special file"
        };
        return Err(ProbeError::NotBlockDevice {
            path: path.to_path_buf(),
            what,
        });
    }
    let real = fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
    let (major, minor) = split_dev(meta.rdev());
    probe_sysfs(sys, major, minor, &real)
}

/// Probes device `major:minor` (whose node is `path`) from the sysfs tree at `sys`: reads
/// `sys/dev/block/MAJ:MIN` (a symlink into `sys/devices/…`), the disk's `queue/` and
/// `device/`, and the partitions beside it.
pub fn probe_sysfs(sys: &Path, major: u64, minor: u64, path: &Path) -> Result<Probe, ProbeError> {
    let link = sys.join(format!("dev/block/{major}:{minor}"));
    let dir = fs::canonicalize(&link).map_err(|_| ProbeError::NoSysfs {
        path: path.to_path_buf(),
        sysfs: link.clone(),
    })?;
    let is_partition = dir.join("partition").exists();
    // A partition has no queue/: its disk is the parent directory.
    let disk_dir = if is_partition && !dir.join("queue").is_dir() {
        dir.parent().map_or_else(|| dir.clone(), Path::to_path_buf)
    } else {
        dir.clone()
    };
    let name_of = |d: &Path| {
        d.file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default()
    };
    let name = name_of(&dir);
    let disk = name_of(&disk_dir);
    let q = |f: &str| read_u64(&disk_dir.join("queue").join(f));
    let mut notes = Vec::new();
    let logical = q("logical_block_size").filter(|&v| v > 0).unwrap_or(512);
    let physical = q("physical_block_size")
        .filter(|&v| v > 0)
        .unwrap_or(logical);
    let minimum_io_raw = q("minimum_io_size").unwrap_or(0);
    let optimal_io_raw = q("optimal_io_size").unwrap_or(0);
    let optimal_io_bytes = match optimal_io_raw {
        0 => None,
        v if BOGUS_OPTIMAL_IO.contains(&v) => {
            notes.push(format!(
                "optimal_io_size {v} ({} sectors) ignored: a placeholder some USB bridges report, not a real value",
                v / 512
            ));
            None
        }
        v if v % logical != 0 => {
            notes.push(format!(
                "optimal_io_size {v} ignored: not a multiple of the {logical}-byte logical block"
            ));
            None
        }
        v => Some(v),
    };
    let preferred_erase_bytes =
        read_u64(&disk_dir.join("device/preferred_erase_size")).filter(|&v| v > 0);
    let flag = |d: &Path, f: &str| read_trim(&d.join(f)).is_some_and(|v| v == "1");
    let text = |f: &str| read_trim(&disk_dir.join(f)).unwrap_or_default();
    let transport = Transport::detect(&disk_dir, &disk);
    let model = match text("device/model") {
        m if m.is_empty() => text("device/name"),
        m => m,
    };
    let serial = match text("device/serial") {
        s if s.is_empty() => usb_serial(&disk_dir),
        s => s,
    };
    let mut partitions = Vec::new();
    if let Ok(rd) = fs::read_dir(&disk_dir) {
        for e in rd.flatten() {
            let p = e.path();
            let Some(number) = read_u64(&p.join("partition")) else {
                continue;
            };
            partitions.push(SysPartition {
                name: name_of(&p),
                number: u32::try_from(number).unwrap_or(u32::MAX),
                start_bytes: read_u64(&p.join("start")).unwrap_or(0).saturating_mul(512),
                size_bytes: read_u64(&p.join("size")).unwrap_or(0).saturating_mul(512),
            });
        }
    }
    partitions.sort_by_key(|p| (p.number, p.start_bytes));
    Ok(Probe {
        path: path.to_path_buf(),
        name,
        disk: disk.clone(),
        dev: read_trim(&dir.join("dev")).unwrap_or_else(|| format!("{major}:{minor}")),
        sysfs: sys.join("class/block").join(&disk),
        partition_start_bytes: if is_partition {
            Some(
                read_u64(&dir.join("start"))
                    .unwrap_or(0)
                    .saturating_mul(512),
            )
        } else {
            None
        },
        size_bytes: read_u64(&dir.join("size")).unwrap_or(0).saturating_mul(512),
        logical_block_bytes: logical,
        physical_block_bytes: physical,
        minimum_io_raw,
        optimal_io_raw,
        optimal_io_bytes,
        discard_granularity_bytes: q("discard_granularity").unwrap_or(0),
        discard_max_bytes: q("discard_max_bytes").unwrap_or(0),
        preferred_erase_bytes,
        alignment_offset_bytes: read_u64(&dir.join("alignment_offset")).unwrap_or(0),
        removable: flag(&disk_dir, "removable"),
        rotational: flag(&disk_dir, "queue/rotational"),
        read_only: flag(&dir, "ro") || flag(&disk_dir, "ro"),
        vendor: text("device/vendor"),
        model,
        serial,
        transport,
        device_type: text("device/type"),
        partitions,
        notes,
    })
}

/// The `serial` of the nearest USB device above the disk (`…/usb1/1-2/serial`).
fn usb_serial(disk_dir: &Path) -> String {
    disk_dir
        .ancestors()
        .take_while(|a| a.file_name().is_some_and(|n| n != "devices"))
        .filter(|a| a.join("idVendor").exists() || a.join("serial").is_file())
        .find_map(|a| read_trim(&a.join("serial")).filter(|s| !s.is_empty()))
        .unwrap_or_default()
}

/// The least confidence (0–1, "medium") a read-timing estimate needs to be planned with;
/// a weaker one is reported by `probe` but the default is recommended.
pub const MIN_USED_CONFIDENCE: f64 = 0.5;

/// Where a recommended value comes from.
#[derive(Debug, Clone, PartialEq)]
pub enum Source {
    /// A sysfs attribute (its path).
    Sysfs(PathBuf),
    /// The read-timing estimate, with its confidence (0–1).
    Estimate {
        /// How sure the estimate is.
        confidence: f64,
    },
    /// Nothing known: the default.
    Default,
}

/// The erase block and sector size to plan with, and why.
#[derive(Debug, Clone, PartialEq)]
pub struct Recommendation {
    /// `image.erase-block` in bytes.
    pub erase_block_bytes: u64,
    /// Where it came from.
    pub erase_block_source: Source,
    /// Why, in one sentence.
    pub erase_block_reason: String,
    /// `image.sector-size` (512 or 4096), `None` when the logical block size is neither.
    pub sector_bytes: Option<u64>,
    /// Why, in one sentence.
    pub sector_reason: String,
}

fn fmt_size(b: u64) -> String {
    blockwise_geometry::format_size(b)
}

fn usable_erase(v: u64) -> bool {
    blockwise_geometry::check_erase_block(v).is_ok()
}

impl Probe {
    /// The sysfs file an attribute of the disk was read from, for messages.
    #[must_use]
    pub fn attr(&self, rel: &str) -> PathBuf {
        self.sysfs.join(rel)
    }

    /// The erase block and sector size to plan with: `preferred_erase_size` when the kernel
    /// gives a usable one, else a read-timing `estimate` of at least medium confidence
    /// ([`MIN_USED_CONFIDENCE`]), else the 4 MiB default (raised to the optimal I/O size
    /// when that is a larger power of two).
    #[must_use]
    pub fn recommend(&self, estimate: Option<&crate::Estimate>) -> Recommendation {
        let mut skipped = Vec::new();
        let pick = if let Some(p) = self.preferred_erase_bytes {
            if usable_erase(p) {
                Some((
                    p,
                    Source::Sysfs(self.attr("device/preferred_erase_size")),
                    format!(
                        "the kernel's preferred_erase_size for this card ({})",
                        fmt_size(p)
                    ),
                ))
            } else {
                skipped.push(format!(
                    "preferred_erase_size {p} is not a power of two between 4 KiB and 256 MiB"
                ));
                None
            }
        } else {
            None
        };
        let pick = pick.or_else(|| {
            let e = estimate?;
            let bytes = e.erase_block_bytes()?;
            if e.confidence < MIN_USED_CONFIDENCE {
                // A low-confidence step is what timing noise (a busy machine, a cached
                // loop device) produces now and then: reported, not planned with.
                skipped.push(format!(
                    "the read-timing estimate ({}, {} confidence {:.2}) is too weak to plan with",
                    fmt_size(bytes),
                    e.confidence_label(),
                    e.confidence
                ));
                return None;
            }
            Some((
                bytes,
                Source::Estimate {
                    confidence: e.confidence,
                },
                format!(
                    "estimated from read timing: reads straddling {} boundaries are slower ({} confidence)",
                    fmt_size(bytes),
                    e.confidence_label()
                ),
            ))
        });
        let (erase, source, mut reason) = pick.unwrap_or_else(|| {
            let io = match (self.minimum_io_raw, self.optimal_io_bytes) {
                (min, Some(opt)) => format!("minimum I/O {}, optimal I/O {}", fmt_size(min), fmt_size(opt)),
                (min, None) => format!("minimum I/O {}, no optimal I/O size", fmt_size(min)),
            };
            match self.optimal_io_bytes {
                Some(opt) if usable_erase(opt) && opt > DEFAULT_ERASE_BLOCK => (
                    opt,
                    Source::Sysfs(self.attr("queue/optimal_io_size")),
                    format!("no erase block known; the optimal I/O size ({}) is larger than the 4 MiB default ({io})", fmt_size(opt)),
                ),
                _ => (
                    DEFAULT_ERASE_BLOCK,
                    Source::Default,
                    format!("the 4 MiB default: neither the kernel nor the read timing gives an erase block ({io}); 4 MiB is a multiple of the erase blocks of most sticks and cards"),
                ),
            }
        });
        for s in skipped {
            reason.push_str("; ");
            reason.push_str(&s);
        }
        let lbs = self.logical_block_bytes;
        let (sector_bytes, sector_reason) = match lbs {
            512 | 4096 => (
                Some(lbs),
                format!("the device's logical block size ({lbs} bytes): the partition table counts in it"),
            ),
            _ => (
                None,
                format!("the device's logical block size {lbs} is neither 512 nor 4096: blockwise cannot lay out a table for it"),
            ),
        };
        Recommendation {
            erase_block_bytes: erase,
            erase_block_source: source,
            erase_block_reason: reason,
            sector_bytes,
            sector_reason,
        }
    }
}

impl Recommendation {
    /// The spec lines to use: `erase-block = "4MiB"` (and `sector-size = 4096` when the
    /// device has 4096-byte logical blocks).
    #[must_use]
    pub fn spec_lines(&self) -> String {
        let mut s = format!(
            "erase-block = \"{}\"",
            blockwise_geometry::format_size(self.erase_block_bytes).replace(' ', "")
        );
        if let Some(b) = self.sector_bytes {
            s.push_str(&format!("\nsector-size = {b}"));
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    /// A fake sysfs: `devices/<path>/block/<disk>` with `queue/` and `device/` values,
    /// partitions, and the `dev/block/MAJ:MIN` and `class/block/<disk>` links.
    struct FakeSys {
        dir: tempfile::TempDir,
    }

    impl FakeSys {
        fn new() -> Self {
            FakeSys {
                dir: tempfile::tempdir().unwrap(),
            }
        }
        fn root(&self) -> &Path {
            self.dir.path()
        }
        fn put(&self, rel: &str, value: &str) {
            let p = self.root().join(rel);
            fs::create_dir_all(p.parent().unwrap()).unwrap();
            fs::write(p, format!("{value}\n")).unwrap();
        }
        /// A disk at `devices/<parent>/block/<name>` as `maj:min`, with `attrs` relative to it.
        fn disk(&self, parent: &str, name: &str, dev: &str, attrs: &[(&str, &str)]) -> String {
            let rel = format!("devices/{parent}/block/{name}");
            self.put(&format!("{rel}/dev"), dev);
            for (k, v) in attrs {
                self.put(&format!("{rel}/{k}"), v);
            }
            self.link(&rel, dev, name);
            rel
        }
        fn partition(&self, disk_rel: &str, name: &str, dev: &str, n: u32, start: u64, size: u64) {
            let rel = format!("{disk_rel}/{name}");
            self.put(&format!("{rel}/dev"), dev);
            self.put(&format!("{rel}/partition"), &n.to_string());
            self.put(&format!("{rel}/start"), &start.to_string());
            self.put(&format!("{rel}/size"), &size.to_string());
            self.link(&rel, dev, name);
        }
        fn link(&self, rel: &str, dev: &str, name: &str) {
            for l in [format!("dev/block/{dev}"), format!("class/block/{name}")] {
                let p = self.root().join(l);
                fs::create_dir_all(p.parent().unwrap()).unwrap();
                symlink(self.root().join(rel), p).unwrap();
            }
        }
        fn probe(&self, major: u64, minor: u64) -> Probe {
            probe_sysfs(self.root(), major, minor, Path::new("/dev/x")).unwrap()
        }
    }

    fn queue(lbs: &str, pbs: &str, min: &str, opt: &str) -> Vec<(&'static str, String)> {
        vec![
            ("queue/logical_block_size", lbs.into()),
            ("queue/physical_block_size", pbs.into()),
            ("queue/minimum_io_size", min.into()),
            ("queue/optimal_io_size", opt.into()),
            ("queue/discard_granularity", "4096".into()),
            ("queue/discard_max_bytes", "4294966784".into()),
            ("queue/rotational", "0".into()),
        ]
    }

    fn attrs<'a>(
        q: &'a [(&'static str, String)],
        more: &[(&'a str, &'a str)],
    ) -> Vec<(&'a str, &'a str)> {
        q.iter()
            .map(|(k, v)| (*k, v.as_str()))
            .chain(more.iter().copied())
            .collect()
    }

    #[test]
    fn an_sd_card_gives_its_preferred_erase_size() {
        let s = FakeSys::new();
        let q = queue("512", "512", "512", "0");
        let disk = s.disk(
            "platform/fe340000.mmc/mmc_host/mmc0/mmc0:aaaa",
            "mmcblk0",
            "179:0",
            &attrs(
                &q,
                &[
                    ("size", "62333952"),
                    ("removable", "0"),
                    ("ro", "0"),
                    ("device/preferred_erase_size", "4194304"),
                    ("device/name", "SC32G"),
                    ("device/serial", "0x1234abcd"),
                    ("device/type", "SD"),
                ],
            ),
        );
        s.partition(&disk, "mmcblk0p1", "179:1", 1, 8192, 524_288);
        s.partition(&disk, "mmcblk0p2", "179:2", 2, 532_480, 61_801_472);
        let p = s.probe(179, 0);
        assert_eq!(p.transport, Transport::Mmc);
        assert_eq!(p.device_type, "SD");
        assert_eq!(p.model, "SC32G");
        assert_eq!(p.serial, "0x1234abcd");
        assert_eq!(p.preferred_erase_bytes, Some(4 << 20));
        assert_eq!(p.size_bytes, 62_333_952 * 512);
        assert_eq!(p.optimal_io_bytes, None);
        assert_eq!(p.partitions.len(), 2);
        assert_eq!(p.partitions[1].start_bytes, 532_480 * 512);
        let r = p.recommend(None);
        assert_eq!(r.erase_block_bytes, 4 << 20);
        assert_eq!(
            r.erase_block_source,
            Source::Sysfs(
                s.root()
                    .join("class/block/mmcblk0/device/preferred_erase_size")
            )
        );
        assert_eq!(r.spec_lines(), "erase-block = \"4MiB\"\nsector-size = 512");

        // A partition reports its disk's values and its own start.
        let part = s.probe(179, 2);
        assert_eq!(
            (part.name.as_str(), part.disk.as_str()),
            ("mmcblk0p2", "mmcblk0")
        );
        assert_eq!(part.partition_start_bytes, Some(532_480 * 512));
        assert_eq!(part.preferred_erase_bytes, Some(4 << 20));
        assert_eq!(part.size_bytes, 61_801_472 * 512);
    }

    #[test]
    fn bogus_optimal_io_sizes_are_not_given() {
        for (lbs, opt, want) in [
            ("512", "0", None),
            ("512", "16776704", None), // 32767 sectors
            ("512", "33553920", None), // 65535 sectors
            ("4096", "6144", None),    // not a multiple of the logical block
            ("512", "1048576", Some(1 << 20)),
            ("4096", "33554432", Some(32 << 20)),
        ] {
            let s = FakeSys::new();
            let q = queue(lbs, "4096", lbs, opt);
            s.disk(
                "pci0000:00/0000:00:14.0/usb2/2-1/2-1:1.0/host6/target6:0:0/6:0:0:0",
                "sdb",
                "8:16",
                &attrs(
                    &q,
                    &[
                        ("size", "1000"),
                        ("removable", "1"),
                        ("device/vendor", "ACME    "),
                        ("device/model", "Stick"),
                    ],
                ),
            );
            s.put("devices/pci0000:00/0000:00:14.0/usb2/2-1/serial", "AA0011");
            s.put("devices/pci0000:00/0000:00:14.0/usb2/2-1/idVendor", "abcd");
            let p = s.probe(8, 16);
            assert_eq!(
                p.optimal_io_bytes, want,
                "optimal_io_size {opt} with lbs {lbs}"
            );
            assert_eq!(p.optimal_io_raw, opt.parse::<u64>().unwrap());
            assert_eq!(
                p.notes.is_empty(),
                opt == "0" || want.is_some(),
                "{:?}",
                p.notes
            );
            assert_eq!(p.transport, Transport::Usb);
            assert_eq!((p.vendor.as_str(), p.model.as_str()), ("ACME", "Stick"));
            assert_eq!(p.serial, "AA0011");
            assert!(p.removable && !p.rotational && !p.read_only);
            assert_eq!(p.physical_block_bytes, 4096);
            let r = p.recommend(None);
            // Only a power-of-two optimal I/O size above 4 MiB raises the default.
            let e = if want == Some(32 << 20) {
                32 << 20
            } else {
                4 << 20
            };
            assert_eq!(r.erase_block_bytes, e);
            if e == 4 << 20 {
                assert_eq!(r.erase_block_source, Source::Default);
                assert!(
                    r.erase_block_reason.contains("4 MiB default"),
                    "{}",
                    r.erase_block_reason
                );
            }
        }
    }

    #[test]
    fn transports_from_the_sysfs_path() {
        for (parent, name, want) in [
            ("virtual", "loop3", Transport::Loop),
            (
                "pci0000:00/0000:00:1d.0/0000:3d:00.0/nvme/nvme0",
                "nvme0n1",
                Transport::Nvme,
            ),
            (
                "pci0000:00/0000:00:17.0/ata3/host2/target2:0:0/2:0:0:0",
                "sda",
                Transport::Sata,
            ),
            ("pci0000:00/0000:00:04.0/virtio1", "vda", Transport::Virtio),
            ("virtual", "zram0", Transport::Virtual),
            ("platform/xyz", "foo0", Transport::Unknown),
        ] {
            let s = FakeSys::new();
            s.disk(parent, name, "7:3", &[("size", "8")]);
            let p = s.probe(7, 3);
            assert_eq!(p.transport, want, "{parent}/{name}");
            // Missing queue values fall back to 512-byte blocks, nothing else invented.
            assert_eq!((p.logical_block_bytes, p.physical_block_bytes), (512, 512));
            assert_eq!(p.optimal_io_bytes, None);
        }
    }

    #[test]
    fn odd_preferred_erase_sizes_fall_back_with_the_reason() {
        let s = FakeSys::new();
        let q = queue("4096", "4096", "4096", "0");
        s.disk(
            "platform/mmc_host/mmc1/mmc1:0001",
            "mmcblk1",
            "179:8",
            &attrs(
                &q,
                &[("size", "100"), ("device/preferred_erase_size", "12582912")],
            ),
        );
        let p = s.probe(179, 8);
        let r = p.recommend(None);
        assert_eq!(r.erase_block_bytes, 4 << 20);
        assert!(
            r.erase_block_reason.contains("not a power of two"),
            "{}",
            r.erase_block_reason
        );
        assert_eq!(r.sector_bytes, Some(4096));
        assert_eq!(r.spec_lines(), "erase-block = \"4MiB\"\nsector-size = 4096");
    }

    /// A read-timing estimate is planned with from medium confidence up; a weaker one (what
    /// noise on a busy machine gives now and then) leaves the default, and says why.
    #[test]
    fn weak_estimates_are_reported_not_used() {
        let s = FakeSys::new();
        let q = queue("512", "512", "512", "0");
        s.disk(
            "usb1/1-1/host0/target0",
            "sdb",
            "8:16",
            &attrs(&q, &[("size", "100")]),
        );
        let p = s.probe(8, 16);
        let est = |confidence: f64| crate::Estimate {
            erase_block: Some(16 << 20),
            confidence,
            summary: String::new(),
            sizes: Vec::new(),
            reads: 0,
            rounds: 0,
            measured: std::time::Duration::ZERO,
        };
        let r = p.recommend(Some(&est(0.27)));
        assert_eq!(r.erase_block_bytes, DEFAULT_ERASE_BLOCK);
        assert_eq!(r.erase_block_source, Source::Default);
        assert!(
            r.erase_block_reason
                .contains("estimate (16 MiB, low confidence 0.27) is too weak"),
            "{}",
            r.erase_block_reason
        );
        let r = p.recommend(Some(&est(0.6)));
        assert_eq!(r.erase_block_bytes, 16 << 20);
        assert_eq!(r.erase_block_source, Source::Estimate { confidence: 0.6 });
    }

    #[test]
    fn not_a_block_device_or_missing() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("img");
        fs::write(&f, b"x").unwrap();
        assert!(matches!(
            probe(&f),
            Err(ProbeError::NotBlockDevice {
                what: "a regular file",
                ..
            })
        ));
        assert!(matches!(
            probe(dir.path()),
            Err(ProbeError::NotBlockDevice {
                what: "a directory",
                ..
            })
        ));
        assert!(matches!(
            probe(Path::new("/dev/null")),
            Err(ProbeError::NotBlockDevice {
                what: "a character device",
                ..
            })
        ));
        assert!(matches!(
            probe(&dir.path().join("nope")),
            Err(ProbeError::Missing { .. })
        ));
        let s = FakeSys::new();
        assert!(matches!(
            probe_sysfs(s.root(), 8, 0, Path::new("/dev/sda")),
            Err(ProbeError::NoSysfs { .. })
        ));
    }
}
