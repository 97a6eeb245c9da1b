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
    start_len: u64,
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
            Ok(m) if m.is_file() => (false, TargetKind::File),
            Err(e) if e.kind() == io::ErrorKind::NotFound => (false, TargetKind::File),
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
        let mut warnings = Vec::new();
        let (file, direct) = match try_open(true) {
            Ok(f) => (f, true),
            Err(e) if e.raw_os_error() == Some(EBUSY) && is_blk => {
                return Err(Refusal::Busy {
                    dev: path.display().to_string(),
                }
                .into())
            }
            Err(e) if e.raw_os_error() == Some(EINVAL) => {
                if mode == DirectMode::Require {
                    return Err(Refusal::DirectRefused {
                        path: path.to_path_buf(),
                    }
                    .into());
                }
                warnings.push(format!(
                    "{}: O_DIRECT refused by the filesystem; writing buffered with fdatasync",
                    path.display()
                ));
                (try_open(false).map_err(open_err)?, false)
            }
            Err(e) => return Err(open_err(e)),
        };
        let (block, mem_align) = alignment(&file, is_blk).map_err(open_err)?;
        let len = if is_blk {
            Some(device_len(&file).map_err(open_err)?)
        } else {
            None
        };
        let start_len = file.metadata().map_err(open_err)?.len();
        Ok((
            Target {
                file,
                path: path.to_path_buf(),
                kind,
                len,
                block,
                mem_align,
                direct,
                start_len,
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

    /// True when writes bypass the page cache (O_DIRECT).
    #[must_use]
    pub fn is_direct(&self) -> bool {
        self.direct
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
    fn finish(&mut self, image_size: u64) -> io::Result<()> {
        if self.kind != TargetKind::File {
            return Ok(());
        }
        let now = self.file.metadata()?.len();
        let want = image_size.max(self.start_len);
        if now != want {
            self.file.set_len(want)?;
            self.file.sync_all()?;
        }
        Ok(())
    }
    fn is_disk(&self) -> bool {
        self.kind == TargetKind::Disk
    }
    fn reread_partitions(&mut self) -> io::Result<()> {
        // SAFETY: BLKRRPART takes no argument; the fd is an open whole-disk block device.
        unsafe { ioctl::ioctl(&self.file, NoArg::<BLKRRPART>::new()) }?;
        Ok(())
    }
}
