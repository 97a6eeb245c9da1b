//! "Is it safe to write?": what a block device is (disk or partition, size, model,
//! removable, partitions) and the checks that refuse it before any byte is written.

use std::fs;
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::{Path, PathBuf};

use crate::Refusal;

/// The sysfs directory of a device number (`/sys/dev/block/MAJ:MIN`).
#[must_use]
pub fn sysfs_of(rdev: u64) -> PathBuf {
    let (major, minor) = split_dev(rdev);
    PathBuf::from(format!("/sys/dev/block/{major}:{minor}"))
}

fn split_dev(rdev: u64) -> (u64, u64) {
    let major = ((rdev >> 32) & 0xffff_f000) | ((rdev >> 8) & 0x0fff);
    let minor = ((rdev >> 12) & 0xffff_ff00) | (rdev & 0xff);
    (major, minor)
}

/// A block device as the checks see it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeviceInfo {
    /// The resolved device node, e.g. `/dev/sdb`.
    pub path: PathBuf,
    /// Kernel name, e.g. `sdb` or `sdb1`.
    pub name: String,
    /// The whole disk's kernel name (itself for a disk).
    pub disk: String,
    /// Whether the target is a partition.
    pub is_partition: bool,
    /// `MAJ:MIN` of the target and of every partition of its disk (and the disk).
    pub devs: Vec<(String, String)>,
    /// Size in bytes (sysfs `size` × 512).
    pub size_bytes: u64,
    /// sysfs `removable`.
    pub removable: bool,
    /// sysfs `ro` of the target or its disk.
    pub read_only: bool,
    /// Vendor and model from sysfs, when present.
    pub model: String,
    /// Names of the disk's partitions.
    pub partitions: Vec<String>,
}

impl DeviceInfo {
    /// For a question or a refusal: `/dev/sdb (ACME Stick, 29.7 GiB, partitions sdb1, sdb2)`.
    #[must_use]
    pub fn describe(&self) -> String {
        let model = if self.model.is_empty() {
            "unknown model".to_string()
        } else {
            self.model.clone()
        };
        let parts = if self.partitions.is_empty() {
            "no partitions the kernel lists".to_string()
        } else {
            format!("partitions {}", self.partitions.join(", "))
        };
        format!(
            "{} ({model}, {}, {parts})",
            self.path.display(),
            blockwise_geometry::format_size(self.size_bytes)
        )
    }
}

fn read_trim(p: &Path) -> Option<String> {
    fs::read_to_string(p).ok().map(|s| s.trim().to_string())
}

/// Describes the block device at `path` (symlinks followed); `None` when it is not one.
pub fn inspect(path: &Path) -> std::io::Result<Option<DeviceInfo>> {
    let real = fs::canonicalize(path)?;
    let meta = fs::metadata(&real)?;
    if !meta.file_type().is_block_device() {
        return Ok(None);
    }
    let sys = fs::canonicalize(sysfs_of(meta.rdev()))?;
    let is_partition = sys.join("partition").exists();
    let disk_dir = if is_partition {
        sys.parent()
            .map(Path::to_path_buf)
            .unwrap_or_else(|| sys.clone())
    } else {
        sys.clone()
    };
    let name_of = |d: &Path| {
        d.file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default()
    };
    let name = name_of(&sys);
    let disk = name_of(&disk_dir);
    let mut devs = vec![(
        read_trim(&disk_dir.join("dev")).unwrap_or_default(),
        disk.clone(),
    )];
    let mut partitions = Vec::new();
    if let Ok(rd) = fs::read_dir(&disk_dir) {
        for e in rd.flatten() {
            let p = e.path();
            if p.join("partition").exists() {
                let n = name_of(&p);
                devs.push((read_trim(&p.join("dev")).unwrap_or_default(), n.clone()));
                partitions.push(n);
            }
        }
    }
    partitions.sort();
    let sectors: u64 = read_trim(&sys.join("size"))
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    let flag = |d: &Path, f: &str| read_trim(&d.join(f)).is_some_and(|v| v == "1");
    let model = ["device/vendor", "device/model"]
        .iter()
        .filter_map(|f| read_trim(&disk_dir.join(f)))
        .filter(|s| !s.is_empty())
        .collect::<Vec<_>>()
        .join(" ");
    Ok(Some(DeviceInfo {
        path: real,
        name,
        disk: disk.clone(),
        is_partition,
        devs,
        size_bytes: sectors.saturating_mul(512),
        removable: flag(&disk_dir, "removable"),
        read_only: flag(&sys, "ro") || flag(&disk_dir, "ro"),
        model,
        partitions,
    }))
}

/// `statfs` magic of tmpfs, which devtmpfs reports too (`TMPFS_MAGIC`).
const TMPFS_MAGIC: i64 = 0x0102_1994;

/// Checks a target that is not a block device: a path that does not exist yet (a new image
/// file) or a regular file. Refuses both when their directory is the kernel's device
/// filesystem (devtmpfs, `/dev`): a missing `/dev/sdz9` is a card that is not plugged in (or
/// a partition node the kernel has not made), never a file to create in RAM
/// ([`Refusal::NoSuchDevice`]), and a regular file there is what such a write left
/// ([`Refusal::FileInDev`]).
pub fn check_file_target(path: &Path) -> Result<(), Refusal> {
    let exists = match fs::metadata(path) {
        Ok(md) if md.file_type().is_block_device() => return Ok(()),
        Ok(_) => true,
        Err(_) => false,
    };
    let parent = path
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let Ok(dir) = fs::canonicalize(parent) else {
        return Ok(()); // no directory: the open fails with ENOENT
    };
    if !in_devtmpfs(
        &dir,
        &fs::read_to_string("/proc/self/mountinfo").unwrap_or_default(),
    ) {
        return Ok(());
    }
    let path = path.to_path_buf();
    Err(if exists {
        Refusal::FileInDev { path }
    } else {
        Refusal::NoSuchDevice { path }
    })
}

/// Whether the directory `dir` (canonical) is on devtmpfs: its mount says so in `mountinfo`;
/// without an answer there, a tmpfs (devtmpfs reports tmpfs's magic) under `/dev` other than
/// `/dev/shm` counts.
fn in_devtmpfs(dir: &Path, mountinfo: &str) -> bool {
    let Ok(st) = rustix::fs::statfs(dir) else {
        return false;
    };
    #[allow(
        clippy::unnecessary_cast,
        reason = "f_type's width differs between targets"
    )]
    if st.f_type as i64 != TMPFS_MAGIC {
        return false;
    }
    let Ok(md) = fs::metadata(dir) else {
        return false;
    };
    let (major, minor) = split_dev(md.dev());
    let dev = format!("{major}:{minor}");
    match fstype_of(mountinfo, &dev) {
        Some(t) => t == "devtmpfs",
        None => dir.starts_with("/dev") && !dir.starts_with("/dev/shm"),
    }
}

/// The filesystem type of the mount with device number `dev` (`MAJ:MIN`) in mountinfo text.
fn fstype_of(mountinfo: &str, dev: &str) -> Option<String> {
    mountinfo.lines().find_map(|line| {
        let f: Vec<&str> = line.split(' ').collect();
        if *f.get(2)? != dev {
            return None;
        }
        let dash = f.iter().position(|&x| x == "-")?;
        Some((*f.get(dash + 1)?).to_string())
    })
}

/// Undoes mountinfo's octal escapes (`\040` etc.).
fn unescape(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while let Some(&c) = b.get(i) {
        if c == b'\\' {
            if let Some(v) = b
                .get(i + 1..i + 4)
                .and_then(|d| std::str::from_utf8(d).ok())
                .and_then(|d| u8::from_str_radix(d, 8).ok())
            {
                out.push(v);
                i += 4;
                continue;
            }
        }
        out.push(c);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// One mount: `(MAJ:MIN, mount point, source)`, from `/proc/self/mountinfo` text.
#[must_use]
pub fn parse_mountinfo(text: &str) -> Vec<(String, String, String)> {
    text.lines()
        .filter_map(|line| {
            let f: Vec<&str> = line.split(' ').collect();
            let dev = (*f.get(2)?).to_string();
            let mnt = unescape(f.get(4)?);
            let dash = f.iter().position(|&x| x == "-")?;
            let source = unescape(f.get(dash + 2)?);
            Some((dev, mnt, source))
        })
        .collect()
}

/// Refuses a device that is mounted, holds `/` or `/boot`, is swap, has holders or is
/// read-only, or is a partition without `partition_ok`. The size check is the writer's.
pub fn check(info: &DeviceInfo, partition_ok: bool) -> Result<(), Refusal> {
    check_with(
        info,
        partition_ok,
        &fs::read_to_string("/proc/self/mountinfo").unwrap_or_default(),
        &fs::read_to_string("/proc/swaps").unwrap_or_default(),
    )
}

fn check_with(
    info: &DeviceInfo,
    partition_ok: bool,
    mountinfo: &str,
    swaps: &str,
) -> Result<(), Refusal> {
    if info.is_partition && !partition_ok {
        return Err(Refusal::Partition {
            dev: format!("/dev/{}", info.name),
            disk: format!("/dev/{}", info.disk),
        });
    }
    // The devices that matter: the target itself, and, for a disk, all its partitions.
    let relevant: Vec<&(String, String)> = info
        .devs
        .iter()
        .filter(|(_, n)| !info.is_partition || *n == info.name || *n == info.disk)
        .collect();
    let names: Vec<String> = relevant.iter().map(|(_, n)| format!("/dev/{n}")).collect();
    let canon = |s: &str| {
        fs::canonicalize(s)
            .map(|p| p.display().to_string())
            .unwrap_or_else(|_| s.to_string())
    };
    for (dev, mnt, source) in parse_mountinfo(mountinfo) {
        let hit = relevant
            .iter()
            .find(|(d, n)| {
                // A partition target's disk only matters when the disk itself is mounted.
                (*d == dev || canon(&source) == format!("/dev/{n}"))
                    && (!info.is_partition || *n == info.name || dev == *d)
            })
            .map(|(_, n)| format!("/dev/{n}"));
        if let Some(d) = hit {
            if mnt == "/" || mnt == "/boot" || mnt == "/boot/efi" {
                return Err(Refusal::System {
                    dev: d,
                    mountpoint: mnt,
                });
            }
            return Err(Refusal::Mounted {
                dev: d,
                mountpoint: mnt,
            });
        }
    }
    for line in swaps.lines().skip(1) {
        if let Some(p) = line.split_whitespace().next() {
            let p = canon(&unescape(p));
            if names.contains(&p) {
                return Err(Refusal::Swap { dev: p });
            }
        }
    }
    for (_, n) in &relevant {
        let dir = PathBuf::from(format!("/sys/class/block/{n}/holders"));
        if let Some(h) = fs::read_dir(dir)
            .ok()
            .and_then(|mut r| r.next())
            .and_then(Result::ok)
        {
            return Err(Refusal::Held {
                dev: format!("/dev/{n}"),
                holder: h.file_name().to_string_lossy().into_owned(),
            });
        }
    }
    if info.read_only {
        return Err(Refusal::ReadOnly {
            dev: info.path.display().to_string(),
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn info(is_partition: bool) -> DeviceInfo {
        DeviceInfo {
            path: "/dev/loop9".into(),
            name: if is_partition { "loop9p1" } else { "loop9" }.into(),
            disk: "loop9".into(),
            is_partition,
            devs: vec![
                ("7:9".into(), "loop9".into()),
                ("259:4".into(), "loop9p1".into()),
                ("259:5".into(), "loop9p2".into()),
            ],
            size_bytes: 1 << 30,
            removable: false,
            read_only: false,
            model: String::new(),
            partitions: vec!["loop9p1".into(), "loop9p2".into()],
        }
    }

    #[test]
    fn devtmpfs_is_found_by_mount_type() {
        let mi = "24 27 0:6 / /dev rw,relatime - devtmpfs devtmpfs rw\n\
                  30 24 0:25 / /dev/shm rw - tmpfs shm rw\n";
        assert_eq!(fstype_of(mi, "0:6").as_deref(), Some("devtmpfs"));
        assert_eq!(fstype_of(mi, "0:25").as_deref(), Some("tmpfs"));
        assert_eq!(fstype_of(mi, "8:1"), None);
        // The real /dev of this machine (devtmpfs in a normal system or container).
        let real = fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
        if fstype_of(&real, "0:6").is_some() || Path::new("/dev/null").exists() {
            let on_devtmpfs = in_devtmpfs(Path::new("/dev"), &real);
            let missing = check_file_target(Path::new("/dev/blockwise-no-such-card"));
            assert_eq!(missing.is_err(), on_devtmpfs, "{missing:?}");
        }
        // A temp directory is not /dev.
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(check_file_target(&dir.path().join("new.img")), Ok(()));
    }

    #[test]
    fn mountinfo_fields_and_escapes() {
        let m = parse_mountinfo(
            "42 27 259:5 / /mnt/my\\040stick rw,relatime shared:1 - ext4 /dev/loop9p2 rw\n",
        );
        assert_eq!(
            m,
            [(
                "259:5".into(),
                "/mnt/my stick".into(),
                "/dev/loop9p2".into()
            )]
        );
    }

    #[test]
    fn refusals_name_the_reason() {
        let mounted = "42 27 259:5 / /mnt/x rw - ext4 /dev/loop9p2 rw\n";
        assert_eq!(
            check_with(&info(false), false, mounted, ""),
            Err(Refusal::Mounted {
                dev: "/dev/loop9p2".into(),
                mountpoint: "/mnt/x".into()
            })
        );
        let root = "1 0 259:4 / / rw - ext4 /dev/loop9p1 rw\n";
        assert!(matches!(
            check_with(&info(false), false, root, ""),
            Err(Refusal::System { .. })
        ));
        assert!(matches!(
            check_with(&info(true), false, "", ""),
            Err(Refusal::Partition { .. })
        ));
        // A partition target with --partition-ok ignores a mounted sibling.
        assert_eq!(check_with(&info(true), true, mounted, ""), Ok(()));
        let mut ro = info(false);
        ro.read_only = true;
        assert!(matches!(
            check_with(&ro, false, "", ""),
            Err(Refusal::ReadOnly { .. })
        ));
    }
}
