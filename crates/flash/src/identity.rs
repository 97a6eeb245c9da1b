//! Which stored data a path names, so that a write never targets what it reads: the same
//! file through another name (a symlink, a hard link, `./x` for `x`), the same block device
//! through another node, a partition of the disk being read (or the disk of a partition), or
//! the loop device backed by the source file (`LOOP_GET_STATUS64`, else sysfs
//! `loop/backing_file`).

use std::fs::{self, File};
use std::io;
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::{Path, PathBuf};

use rustix::fs::{Mode, OFlags};
use rustix::ioctl::{self, opcode, Getter, Opcode};

use crate::safety::sysfs_of;
use crate::Refusal;

/// The major number of loop devices.
const LOOP_MAJOR: u64 = 7;
/// `LOOP_GET_STATUS64` = 0x4C05, `struct loop_info64` by pointer.
const LOOP_GET_STATUS64: Opcode = opcode::none(b'L', 5);

/// `struct loop_info64` (linux/loop.h): only the first two fields are read.
#[repr(C)]
#[derive(Clone, Copy)]
struct LoopInfo64 {
    lo_device: u64,
    lo_inode: u64,
    lo_rdevice: u64,
    lo_offset: u64,
    lo_sizelimit: u64,
    lo_number: u32,
    lo_encrypt_type: u32,
    lo_encrypt_key_size: u32,
    lo_flags: u32,
    lo_file_name: [u8; 64],
    lo_crypt_name: [u8; 64],
    lo_encrypt_key: [u8; 32],
    lo_init: [u64; 2],
}

const _: () = assert!(core::mem::size_of::<LoopInfo64>() == 232);

impl Default for LoopInfo64 {
    fn default() -> Self {
        LoopInfo64 {
            lo_device: 0,
            lo_inode: 0,
            lo_rdevice: 0,
            lo_offset: 0,
            lo_sizelimit: 0,
            lo_number: 0,
            lo_encrypt_type: 0,
            lo_encrypt_key_size: 0,
            lo_flags: 0,
            lo_file_name: [0; 64],
            lo_crypt_name: [0; 64],
            lo_encrypt_key: [0; 32],
            lo_init: [0; 2],
        }
    }
}

/// The data behind a path: regular files as (device, inode), block devices as (device
/// number, device number of its whole disk), and for a loop device also the (device, inode)
/// of its backing file. Two paths whose `DataId`s [overlap](DataId::overlaps) share bytes.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DataId {
    files: Vec<(u64, u64)>,
    blocks: Vec<(u64, u64)>,
}

impl DataId {
    /// A regular file known by its device and inode (from a scan).
    #[must_use]
    pub fn file(dev: u64, ino: u64) -> Self {
        DataId {
            files: vec![(dev, ino)],
            blocks: Vec::new(),
        }
    }

    /// Whether this names the regular file `(dev, ino)` (as [`DataId::file`] of it would
    /// [overlap](DataId::overlaps) it), without building one.
    #[must_use]
    pub fn has_file(&self, dev: u64, ino: u64) -> bool {
        self.files.contains(&(dev, ino))
    }

    /// What `path` names, symlinks followed; `None` when it does not exist. A loop device is
    /// opened read-only (never with O_EXCL) to ask for its backing file.
    pub fn of_path(path: &Path) -> io::Result<Option<Self>> {
        let md = match fs::metadata(path) {
            Ok(md) => md,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(e),
        };
        let open = || {
            rustix::fs::open(
                path,
                OFlags::RDONLY | OFlags::NONBLOCK | OFlags::CLOEXEC | OFlags::NOCTTY,
                Mode::empty(),
            )
            .ok()
            .map(File::from)
        };
        Ok(Some(Self::of_metadata(&md, open)))
    }

    /// What the open file `f` is (for a target, after it is opened: no race with a renamed
    /// path).
    pub fn of_file(f: &File) -> io::Result<Self> {
        let md = f.metadata()?;
        Ok(Self::of_metadata(&md, || f.try_clone().ok()))
    }

    fn of_metadata(md: &fs::Metadata, open: impl FnOnce() -> Option<File>) -> Self {
        if !md.file_type().is_block_device() {
            return DataId::file(md.dev(), md.ino());
        }
        let rdev = md.rdev();
        let sys = sysfs_of(rdev);
        let disk_dir = if sys.join("partition").exists() {
            fs::canonicalize(&sys)
                .ok()
                .and_then(|p| p.parent().map(Path::to_path_buf))
        } else {
            Some(sys.clone())
        };
        let disk = disk_dir
            .as_deref()
            .and_then(|d| fs::read_to_string(d.join("dev")).ok())
            .and_then(|s| parse_dev(s.trim()))
            .unwrap_or(rdev);
        let mut id = DataId {
            files: Vec::new(),
            blocks: vec![(rdev, disk)],
        };
        // The loop driver answers LOOP_GET_STATUS64 with the backing file's device and inode.
        if major_of(disk) == LOOP_MAJOR {
            if let Some(f) = open() {
                if let Some(backing) = loop_backing(&f) {
                    id.files.push(backing);
                }
            }
        }
        // Where the ioctl is not answered (a partition of a loop device), sysfs has the path.
        if let Some(d) = &disk_dir {
            if let Ok(p) = fs::read_to_string(d.join("loop/backing_file")) {
                if let Ok(bmd) = fs::metadata(p.trim_end_matches('\n')) {
                    let f = (bmd.dev(), bmd.ino());
                    if !id.files.contains(&f) {
                        id.files.push(f);
                    }
                }
            }
        }
        id
    }

    /// True when writing one would change the other: the same file, the same block device,
    /// a disk and one of its partitions, or a loop device and its backing file.
    #[must_use]
    pub fn overlaps(&self, other: &DataId) -> bool {
        self.files.iter().any(|f| other.files.contains(f))
            || self.blocks.iter().any(|&(dev, disk)| {
                other
                    .blocks
                    .iter()
                    .any(|&(odev, odisk)| dev == odev || disk == odev || dev == odisk)
            })
    }
}

/// The backing file's (device, inode) of an open loop device.
fn loop_backing(f: &File) -> Option<(u64, u64)> {
    // SAFETY: LOOP_GET_STATUS64 fills one `struct loop_info64` (232 bytes, `LoopInfo64`
    // mirrors its layout) through the pointer the `Getter` provides; the fd is an open block
    // device of the loop driver, which rejects the call (ENXIO) when unbound.
    let info: LoopInfo64 =
        unsafe { ioctl::ioctl(f, Getter::<LOOP_GET_STATUS64, LoopInfo64>::new()) }.ok()?;
    // `lo_device` is the kernel's `huge_encode_dev` of the backing file's device: the
    // encoding `st_dev` has (for major numbers below 4096, which is all of them).
    (info.lo_inode != 0).then_some((info.lo_device, info.lo_inode))
}

fn major_of(rdev: u64) -> u64 {
    ((rdev >> 32) & 0xffff_f000) | ((rdev >> 8) & 0x0fff)
}

/// `MAJ:MIN` (sysfs `dev`) as a `dev_t`.
fn parse_dev(s: &str) -> Option<u64> {
    let (ma, mi) = s.split_once(':')?;
    let (ma, mi): (u64, u64) = (ma.parse().ok()?, mi.parse().ok()?);
    Some(
        ((ma & 0xffff_f000) << 32) | ((ma & 0xfff) << 8) | ((mi & 0xffff_ff00) << 12) | (mi & 0xff),
    )
}

/// Refuses `target` when it shares data with one of `inputs` (named paths with their
/// [`DataId`]s): [`Refusal::TargetIsInput`], naming both.
pub fn refuse_input_as_target(
    target: &Path,
    target_id: &DataId,
    inputs: &[(PathBuf, DataId)],
) -> Result<(), Refusal> {
    match inputs.iter().find(|(_, id)| id.overlaps(target_id)) {
        Some((input, _)) => Err(Refusal::TargetIsInput {
            target: target.to_path_buf(),
            input: input.clone(),
        }),
        None => Ok(()),
    }
}

/// The [`DataId`]s of `paths` that exist (a path that cannot be examined is left out: it
/// cannot be read either, and its reader reports that).
#[must_use]
pub fn data_ids(paths: &[&Path]) -> Vec<(PathBuf, DataId)> {
    paths
        .iter()
        .filter_map(|p| Some((p.to_path_buf(), DataId::of_path(p).ok()??)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn links_and_names_of_one_file_overlap() {
        let dir = tempfile::tempdir().unwrap();
        let a = dir.path().join("a.img");
        fs::write(&a, b"x").unwrap();
        let hard = dir.path().join("hard.img");
        fs::hard_link(&a, &hard).unwrap();
        let soft = dir.path().join("soft.img");
        std::os::unix::fs::symlink(&a, &soft).unwrap();
        let other = dir.path().join("other.img");
        fs::write(&other, b"x").unwrap();
        let id = |p: &Path| DataId::of_path(p).unwrap().unwrap();
        assert!(id(&a).overlaps(&id(&hard)));
        assert!(id(&a).overlaps(&id(&soft)));
        assert!(id(&a).overlaps(&id(&dir.path().join(".").join("a.img"))));
        assert!(!id(&a).overlaps(&id(&other)));
        assert_eq!(DataId::of_path(&dir.path().join("none")).unwrap(), None);
        let f = File::open(&soft).unwrap();
        assert!(DataId::of_file(&f).unwrap().overlaps(&id(&a)));
        let inputs = data_ids(&[&other, &hard]);
        let err = refuse_input_as_target(&a, &id(&a), &inputs).unwrap_err();
        assert!(matches!(err, Refusal::TargetIsInput { ref input, .. } if *input == hard));
        assert!(refuse_input_as_target(&a, &id(&a), &data_ids(&[&other])).is_ok());
    }

    #[test]
    fn disks_and_their_partitions_overlap_sibling_partitions_do_not() {
        let disk = DataId {
            files: vec![],
            blocks: vec![(0x0800, 0x0800)],
        };
        let p1 = DataId {
            files: vec![],
            blocks: vec![(0x0801, 0x0800)],
        };
        let p2 = DataId {
            files: vec![],
            blocks: vec![(0x0802, 0x0800)],
        };
        assert!(disk.overlaps(&p1) && p1.overlaps(&disk));
        assert!(p1.overlaps(&p1.clone()));
        assert!(!p1.overlaps(&p2));
        assert_eq!(parse_dev("7:3"), Some(0x0703));
        assert_eq!(parse_dev("259:1"), Some(0x1_0301));
        assert_eq!(major_of(parse_dev("259:1").unwrap()), 259);
    }
}
