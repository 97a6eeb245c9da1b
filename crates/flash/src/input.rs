//! What `write` reads from a path, after the recogniser has said what it is: a container
//! decoded by `blockwise-container` ([`ContainerSource`]), a block device copied as a raw
//! image ([`DeviceSource`], O_DIRECT where the kernel allows it), and the file or device as a
//! [`BlockSource`] for the recogniser and decoders ([`FileInput`]).

use std::fs::File;
use std::io;
use std::os::unix::fs::{FileExt, FileTypeExt, OpenOptionsExt};
use std::path::Path;

use blockwise_container::Decoded;
use blockwise_geometry::BlockSource;
use rustix::ioctl::{self, opcode, Getter, Opcode};

use crate::buf::AlignedBuf;
use crate::source::Source;
use crate::SourceError;

/// `BLKGETSIZE64` = `_IOR(0x12, 114, size_t)`: a block device's size in bytes.
const BLKGETSIZE64: Opcode = opcode::read::<u64>(0x12, 114);

/// The size of the block device open as `file` (BLKGETSIZE64).
pub fn block_device_size(file: &File) -> io::Result<u64> {
    // SAFETY: BLKGETSIZE64 writes one `u64` (the kernel's `size_t` on 64-bit Linux, which is
    // what `Getter` allocates and hands over) through the pointer; `file` is an open fd.
    let size: u64 = unsafe { ioctl::ioctl(file, Getter::<BLKGETSIZE64, u64>::new()) }?;
    Ok(size)
}

/// What kind of file a source path is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum InputKind {
    /// A regular file.
    File,
    /// A block device: a raw image of its size.
    BlockDevice,
}

/// A source file or block device, read-only, as a [`BlockSource`] (positioned reads).
#[derive(Debug)]
pub struct FileInput {
    file: File,
    len: u64,
    kind: InputKind,
}

impl FileInput {
    /// Opens `path`: a regular file or a block device. A character device, FIFO, socket or
    /// directory has no size to write and is refused (`InvalidInput`, naming what it is);
    /// the open never blocks on a FIFO without a writer (O_NONBLOCK).
    pub fn open(path: &Path) -> io::Result<Self> {
        let file = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(rustix::fs::OFlags::NONBLOCK.bits().try_into().unwrap_or(0))
            .open(path)?;
        let meta = file.metadata()?;
        let ft = meta.file_type();
        let (kind, len) = if ft.is_file() {
            (InputKind::File, meta.len())
        } else if ft.is_block_device() {
            (InputKind::BlockDevice, block_device_size(&file)?)
        } else {
            let what = if ft.is_char_device() {
                "a character device (like /dev/zero or /dev/urandom): it has no size, so there is no image to write"
            } else if ft.is_fifo() {
                "a FIFO (named pipe): it has no size; save the image to a file first, or send it compressed"
            } else if ft.is_socket() {
                "a socket: it has no size; save the image to a file first"
            } else if ft.is_dir() {
                "a directory: give an image file, or a spec (.toml) whose partitions name it"
            } else {
                "neither a regular file nor a block device"
            };
            return Err(io::Error::new(io::ErrorKind::InvalidInput, what));
        };
        // Reads need not wait for anything once the type is known.
        rustix::fs::fcntl_setfl(&file, rustix::fs::OFlags::empty())?;
        Ok(FileInput { file, len, kind })
    }

    /// A regular file or a block device.
    #[must_use]
    pub fn kind(&self) -> InputKind {
        self.kind
    }

    /// The open file.
    #[must_use]
    pub fn file(&self) -> &File {
        &self.file
    }
}

impl BlockSource for FileInput {
    type Error = io::Error;
    fn len(&self) -> u64 {
        self.len
    }
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        self.file.read_exact_at(buf, offset)
    }
}

/// A block device read as a raw image (cloning a card): its whole size is mapped; reads go
/// through an aligned buffer with O_DIRECT, so the copy does not fill the page cache, or
/// buffered where the device refuses O_DIRECT.
#[derive(Debug)]
pub struct DeviceSource {
    file: File,
    size: u64,
    align: usize,
    direct: bool,
    buf: Option<AlignedBuf>,
}

impl DeviceSource {
    /// Opens the block device `path` for reading (O_DIRECT when possible).
    pub fn open(path: &Path, size: u64) -> io::Result<Self> {
        let direct = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(rustix::fs::OFlags::DIRECT.bits().try_into().unwrap_or(0))
            .open(path);
        let (file, direct) = match direct {
            Ok(f) => (f, true),
            Err(e) if e.raw_os_error() == Some(rustix::io::Errno::INVAL.raw_os_error()) => {
                (File::open(path)?, false)
            }
            Err(e) => return Err(e),
        };
        let align = rustix::fs::ioctl_blksszget(&file)
            .ok()
            .and_then(|b| usize::try_from(b).ok())
            .filter(|b| b.is_power_of_two())
            .unwrap_or(4096)
            .max(512);
        Ok(DeviceSource {
            file,
            size,
            align,
            direct,
            buf: None,
        })
    }

    /// Whether reads bypass the page cache.
    #[must_use]
    pub fn is_direct(&self) -> bool {
        self.direct
    }
}

impl Source for DeviceSource {
    fn size(&self) -> Option<u64> {
        Some(self.size)
    }
    fn ranges(&self) -> Option<Vec<(u64, u64)>> {
        Some(vec![(0, self.size)])
    }
    fn read(&mut self, offset: u64, buf: &mut [u8]) -> Result<usize, SourceError> {
        let want = usize::try_from(self.size.saturating_sub(offset))
            .unwrap_or(usize::MAX)
            .min(buf.len());
        let dst = buf.get_mut(..want).unwrap_or_default();
        if !self.direct {
            self.file.read_exact_at(dst, offset)?;
            return Ok(want);
        }
        let a = u64::try_from(self.align).unwrap_or(4096);
        let start = offset - offset % a;
        let end = offset
            .saturating_add(u64::try_from(want).unwrap_or(u64::MAX))
            .div_ceil(a)
            .saturating_mul(a)
            .min(self.size.div_ceil(a).saturating_mul(a));
        let span = usize::try_from(end.saturating_sub(start))
            .map_err(|_| io::Error::other("read too large"))?;
        if self.buf.as_ref().is_none_or(|b| b.len() < span) {
            self.buf = Some(
                AlignedBuf::new(span, self.align)
                    .ok_or_else(|| io::Error::other("cannot allocate an aligned read buffer"))?,
            );
        }
        let Some(bounce) = self.buf.as_mut() else {
            return Err(io::Error::other("no read buffer").into());
        };
        let window = bounce.get_mut(..span).unwrap_or_default();
        self.file.read_exact_at(window, start)?;
        let from = usize::try_from(offset.saturating_sub(start)).unwrap_or(0);
        let src = window
            .get(from..from.saturating_add(want))
            .ok_or_else(|| io::Error::other("read window"))?;
        dst.copy_from_slice(src);
        Ok(want)
    }
}

/// A container's image, decoded as the writer reads it (ascending). Its mapped ranges are the
/// container's data (Android sparse DONT_CARE chunks and all-zero seekable-zstd frames are
/// holes); a stream without a known size maps everything up to its end.
pub struct ContainerSource {
    decoded: Decoded<FileInput>,
    /// The size the image must have (from a bmap), when the container does not say.
    expected: Option<u64>,
}

impl std::fmt::Debug for ContainerSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ContainerSource")
            .field("decoded", &self.decoded)
            .field("expected", &self.expected)
            .finish()
    }
}

impl ContainerSource {
    /// `decoded`; `expected` is the image size a bmap gives (a shorter stream is then an
    /// error).
    #[must_use]
    pub fn new(decoded: Decoded<FileInput>, expected: Option<u64>) -> Self {
        ContainerSource { decoded, expected }
    }

    /// The decoded container.
    #[must_use]
    pub fn decoded(&self) -> &Decoded<FileInput> {
        &self.decoded
    }
}

impl Source for ContainerSource {
    fn size(&self) -> Option<u64> {
        self.decoded.size().or(self.expected)
    }
    /// Android sparse DONT_CARE chunks are free space by the format's word; a seekable
    /// zstd's all-zero frames are only zeros.
    fn holes_are_free(&self) -> bool {
        self.decoded.kind() == blockwise_container::ContainerKind::AndroidSparse
    }
    fn ranges(&self) -> Option<Vec<(u64, u64)>> {
        self.decoded
            .mapped()
            .or_else(|| self.size().map(|s| vec![(0, s)]))
    }
    fn read(&mut self, offset: u64, buf: &mut [u8]) -> Result<usize, SourceError> {
        let want = match self.size() {
            Some(s) => usize::try_from(s.saturating_sub(offset))
                .unwrap_or(usize::MAX)
                .min(buf.len()),
            None => buf.len(),
        };
        let dst = buf.get_mut(..want).unwrap_or_default();
        let got = self
            .decoded
            .read_forward(offset, dst)
            .map_err(|e| match e {
                blockwise_container::Error::Truncated { at, expected, .. } => {
                    SourceError::Truncated { at, expected }
                }
                other => SourceError::Io(io::Error::other(other)),
            })?;
        if got < want {
            if let Some(expected) = self.size() {
                return Err(SourceError::Truncated {
                    at: offset.saturating_add(u64::try_from(got).unwrap_or(0)),
                    expected,
                });
            }
        }
        Ok(got)
    }
}
