//! [`Target`]: a block device or regular file opened for writing, O_DIRECT when it can be.

use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::{FileExt, FileTypeExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use rustix::fs::OFlags;
use rustix::ioctl::{self, opcode, NoArg, Opcode, Setter};

use crate::{Device, Error, Refusal};

/// Whether O_DIRECT is preferred (buffered fallback with a warning) or required.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum DirectMode {
    /// Use O_DIRECT; fall back to buffered writes + fdatasync when the filesystem refuses it.
    #[default]
    Prefer,
    /// Use O_DIRECT or fail with [`Refusal::DirectRefused`].
    Require,
}

/// What kind of target it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TargetKind {
    /// A whole disk (opened with O_EXCL).
    Disk,
    /// A partition of a disk (opened with O_EXCL).
    Partition,
    /// A regular file.
    File,
}

/// A block device or regular file opened read-write for flashing. A block device stays open
/// with O_EXCL (no mount or other exclusive claim while it is held).
#[derive(Debug)]
pub struct Target {
    file: File,
    path: PathBuf,
    kind: TargetKind,
    len: Option<u64>,
    block: u32,
    mem_align: usize,
    direct: bool,
}

const BLK: u8 = 0x12;
/// `BLKRRPART` = `_IO(0x12, 95)`.
const BLKRRPART: Opcode = opcode::none(BLK, 95);
/// `BLKDISCARD` = `_IO(0x12, 119)`, argument `uint64_t[2]` by pointer.
const BLKDISCARD: Opcode = opcode::none(BLK, 119);
/// `BLKFLSBUF` = `_IO(0x12, 97)`.
const BLKFLSBUF: Opcode = opcode::none(BLK, 97);
/// `BLKROGET` = `_IO(0x12, 94)`, `int` result by pointer.
const BLKROGET: Opcode = opcode::none(BLK, 94);

const EINVAL: i32 = 22;
const EBUSY: i32 = 16;

impl Target {
    /// Opens `path` (a block device, or a regular file created when missing) for writing.
    ///
    /// Returns the target and the warnings to show (O_DIRECT refused). `kind` tells whether a
    /// block device is a whole disk or a partition (see [`crate::inspect`]).
    pub fn open(path: &Path, mode: DirectMode) -> Result<(Target, Vec<String>), Error> {
        let open_err = |source: io::Error| Error::Open {
            path: path.to_path_buf(),
            source,
        };
        let meta = std::fs::metadata(path);
        let (is_blk, kind) = match &meta {
            Ok(m) if m.file_type().is_block_device() => {
                let part = crate::safety::sysfs_of(m.rdev()).join("partition").exists();
                (
                    true,
                    if part {
                        TargetKind::Partition
                    } else {
                        TargetKind::Disk
                    },
                )
            }
            Ok(m) if m.is_file() => {
                crate::check_file_target(path)?;
                (false, TargetKind::File)
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                crate::check_file_target(path)?;
                (false, TargetKind::File)
            }
            Ok(_) => {
                return Err(Refusal::NotUsable {
                    path: path.to_path_buf(),
                }
                .into())
            }
            Err(e) => return Err(open_err(io::Error::new(e.kind(), e.to_string()))),
        };
        let mut flags = OFlags::CLOEXEC;
        if is_blk {
            flags |= OFlags::EXCL;
        }
        let try_open = |direct: bool| {
            let mut o = OpenOptions::new();
            o.read(true).write(true).create(!is_blk);
            let f = if direct {
                flags | OFlags::DIRECT
            } else {
                flags
            };
            o.custom_flags(f.bits() as i32);
            o.open(path)
        };
        let (file, direct, warnings) = open_direct_or_buffered(path, is_blk, mode, try_open)?;
        let (block, mem_align) = alignment(&file, is_blk).map_err(open_err)?;
        let len = if is_blk {
            Some(device_len(&file).map_err(open_err)?)
        } else {
            None
        };
        Ok((
            Target {
                file,
                path: path.to_path_buf(),
                kind,
                len,
                block,
                mem_align,
                direct,
            },
            warnings,
        ))
    }

    /// The path it was opened as.
    #[must_use]
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Disk, partition or file.
    #[must_use]
    pub fn kind(&self) -> TargetKind {
        self.kind
    }

    /// What the opened target is (the file or device behind the open descriptor, symlinks
    /// resolved when it was opened), to compare with the write's inputs
    /// ([`crate::refuse_input_as_target`]) before [`Device::prepare`] empties a file.
    pub fn data_id(&self) -> io::Result<crate::DataId> {
        crate::DataId::of_file(&self.file)
    }

    /// True when writes bypass the page cache (O_DIRECT).
    #[must_use]
    pub fn is_direct(&self) -> bool {
        self.direct
    }

    /// For a regular file: makes it at least `len` bytes, allocated where the filesystem
    /// can (fallocate; otherwise just extended). Does nothing for a block device.
    pub fn preallocate(&mut self, len: u64) -> io::Result<()> {
        if self.kind != TargetKind::File {
            return Ok(());
        }
        if rustix::fs::fallocate(&self.file, rustix::fs::FallocateFlags::empty(), 0, len).is_err()
            && self.file.metadata()?.len() < len
        {
            self.file.set_len(len)?;
        }
        Ok(())
    }

    /// The read-only flag of a block device (BLKROGET); false for files.
    pub fn read_only(&self) -> io::Result<bool> {
        if self.kind == TargetKind::File {
            return Ok(false);
        }
        // SAFETY: BLKROGET writes one `int` through the pointer the `Getter` provides; the
        // fd is an open block device.
        let ro: i32 = unsafe { ioctl::ioctl(&self.file, ioctl::Getter::<BLKROGET, i32>::new()) }?;
        Ok(ro != 0)
    }
}

/// Opens with O_DIRECT (`try_open(true)`); where the filesystem refuses it (EINVAL), fails
/// under [`DirectMode::Require`] and otherwise opens buffered (`try_open(false)`) with a
/// warning. EBUSY on a block device (O_EXCL) is [`Refusal::Busy`].
fn open_direct_or_buffered<F>(
    path: &Path,
    is_blk: bool,
    mode: DirectMode,
    try_open: impl Fn(bool) -> io::Result<F>,
) -> Result<(F, bool, Vec<String>), Error> {
    let open_err = |source: io::Error| Error::Open {
        path: path.to_path_buf(),
        source,
    };
    match try_open(true) {
        Ok(f) => Ok((f, true, Vec::new())),
        Err(e) if e.raw_os_error() == Some(EBUSY) && is_blk => Err(Refusal::Busy {
            dev: path.display().to_string(),
        }
        .into()),
        Err(e) if e.raw_os_error() == Some(EINVAL) => {
            if mode == DirectMode::Require {
                return Err(Refusal::DirectRefused {
                    path: path.to_path_buf(),
                }
                .into());
            }
            let warning = format!(
                "{}: O_DIRECT refused by the filesystem; writing buffered with fdatasync",
                path.display()
            );
            Ok((try_open(false).map_err(open_err)?, false, vec![warning]))
        }
        Err(e) => Err(open_err(e)),
    }
}

/// The offset/length granularity and the buffer alignment: statx DIOALIGN when the kernel
/// reports it, else the logical block size (devices) or 4096 (files).
fn alignment(file: &File, is_blk: bool) -> io::Result<(u32, usize)> {
    let lbs = if is_blk {
        rustix::fs::ioctl_blksszget(file)?
    } else {
        512
    };
    let dio = rustix::fs::statx(
        file,
        "",
        rustix::fs::AtFlags::EMPTY_PATH,
        rustix::fs::StatxFlags::DIOALIGN,
    )
    .ok()
    .filter(|s| {
        s.stx_mask & rustix::fs::StatxFlags::DIOALIGN.bits() != 0 && s.stx_dio_offset_align != 0
    })
    .map(|s| (s.stx_dio_offset_align, s.stx_dio_mem_align));
    Ok(match dio {
        Some((off, mem)) => (off.max(lbs), usize::try_from(mem).unwrap_or(4096).max(4096)),
        None if is_blk => (lbs, 4096),
        None => (4096, 4096),
    })
}

fn device_len(file: &File) -> io::Result<u64> {
    use std::io::Seek as _;
    let mut f = file;
    f.seek(io::SeekFrom::End(0))
}

impl Device for Target {
    fn size(&self) -> Option<u64> {
        self.len
    }
    fn block_size(&self) -> u32 {
        self.block
    }
    fn mem_align(&self) -> usize {
        self.mem_align
    }
    fn write_at(&mut self, offset: u64, buf: &[u8]) -> io::Result<usize> {
        loop {
            match self.file.write_at(buf, offset) {
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                r => return r,
            }
        }
    }
    fn read_at(&mut self, offset: u64, buf: &mut [u8]) -> io::Result<usize> {
        loop {
            match self.file.read_at(buf, offset) {
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                r => return r,
            }
        }
    }
    fn sync(&mut self) -> io::Result<()> {
        self.file.sync_data()
    }
    fn drop_cache(&mut self) -> io::Result<()> {
        if self.direct {
            return Ok(());
        }
        if self.kind == TargetKind::File {
            rustix::fs::fadvise(&self.file, 0, None, rustix::fs::Advice::DontNeed)?;
            return Ok(());
        }
        // SAFETY: BLKFLSBUF takes no argument; the fd is an open block device.
        unsafe { ioctl::ioctl(&self.file, NoArg::<BLKFLSBUF>::new()) }?;
        Ok(())
    }
    fn discard(&mut self, offset: u64, len: u64) -> io::Result<()> {
        if self.kind == TargetKind::File {
            return Err(io::ErrorKind::Unsupported.into());
        }
        // SAFETY: BLKDISCARD reads a `[u64; 2]` (start, length) through the pointer the
        // `Setter` passes; the fd is an open block device.
        unsafe {
            ioctl::ioctl(
                &self.file,
                Setter::<BLKDISCARD, [u64; 2]>::new([offset, len]),
            )
        }?;
        Ok(())
    }
    fn prepare(&mut self) -> io::Result<()> {
        if self.kind == TargetKind::File {
            // Emptied, as bmaptool does: what the image leaves unwritten then reads as zeros.
            self.file.set_len(0)?;
        }
        Ok(())
    }
    fn holes_read_zero(&self) -> bool {
        self.kind == TargetKind::File
    }
    fn finish(&mut self, image_size: u64) -> io::Result<()> {
        if self.kind != TargetKind::File {
            return Ok(());
        }
        if self.file.metadata()?.len() != image_size {
            self.file.set_len(image_size)?;
            self.file.sync_all()?;
        }
        Ok(())
    }
    fn is_disk(&self) -> bool {
        self.kind == TargetKind::Disk
    }
    fn reread_partitions(&mut self) -> io::Result<()> {
        // SAFETY: BLKRRPART takes no argument; the fd is an open whole-disk block device.
        let result = unsafe { ioctl::ioctl(&self.file, NoArg::<BLKRRPART>::new()) };
        match result {
            Ok(()) => Ok(()),
            // A loop device attached without partition scanning (`losetup` without -P) never
            // has its table read by the kernel: not a failure of this write.
            Err(e) if e == rustix::io::Errno::INVAL && !loop_partscan(&self.path) => {
                Err(io::Error::new(
                    io::ErrorKind::Unsupported,
                    "a loop device without partition scanning",
                ))
            }
            Err(e) => Err(e.into()),
        }
    }
}

/// Whether `dev` is a loop device whose partitions the kernel scans (`losetup -P`); true for
/// anything that is not a loop device.
fn loop_partscan(dev: &Path) -> bool {
    let Ok(real) = std::fs::canonicalize(dev) else {
        return true;
    };
    let Some(name) = real.file_name().and_then(|n| n.to_str()) else {
        return true;
    };
    if !name.starts_with("loop") {
        return true;
    }
    std::fs::read_to_string(format!("/sys/block/{name}/loop/partscan"))
        .map_or(true, |s| s.trim() == "1")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A filesystem that refuses O_DIRECT at open (as tmpfs did before Linux 6.6).
    fn no_direct(direct: bool) -> io::Result<&'static str> {
        if direct {
            Err(io::Error::from_raw_os_error(EINVAL))
        } else {
            Ok("buffered")
        }
    }

    #[test]
    fn o_direct_refused_falls_back_with_a_warning_or_fails_when_required() {
        let p = Path::new("/mnt/t.img");
        let (f, direct, warnings) =
            open_direct_or_buffered(p, false, DirectMode::Prefer, no_direct).unwrap();
        assert_eq!((f, direct), ("buffered", false));
        assert!(warnings[0].contains("O_DIRECT refused"), "{warnings:?}");
        let err = open_direct_or_buffered(p, false, DirectMode::Require, no_direct).unwrap_err();
        assert!(
            matches!(err, Error::Refused(Refusal::DirectRefused { .. })),
            "{err}"
        );
        let busy = |_| -> io::Result<()> { Err(io::Error::from_raw_os_error(EBUSY)) };
        let err = open_direct_or_buffered(p, true, DirectMode::Prefer, busy).unwrap_err();
        assert!(matches!(err, Error::Refused(Refusal::Busy { .. })), "{err}");
        let (_, direct, warnings) =
            open_direct_or_buffered(p, false, DirectMode::Require, |_| Ok(())).unwrap();
        assert!(direct && warnings.is_empty());
    }

    #[test]
    fn a_real_file_is_written_at_its_alignment_and_sized_at_the_end() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.img");
        let (mut t, _) = Target::open(&path, DirectMode::Prefer).unwrap();
        assert_eq!(t.kind(), TargetKind::File);
        let bs = t.block_size() as usize;
        let mut buf = crate::AlignedBuf::new(bs, t.mem_align()).unwrap();
        buf.fill(7);
        assert_eq!(t.write_at(u64::try_from(bs).unwrap(), &buf).unwrap(), bs);
        t.sync().unwrap();
        t.finish(3 * bs as u64).unwrap();
        assert_eq!(std::fs::metadata(&path).unwrap().len(), 3 * bs as u64);
    }
}
