//! Read-only file and block-device sources for `verify` (and anything else that only reads).
//!
//! Opened read-only, never with `O_EXCL`, never written. Block devices get their size by
//! seeking to the end and their topology from sysfs (`/sys/dev/block/MAJ:MIN/queue/…`).

use std::fs::File;
use std::io::{Seek, SeekFrom};
use std::os::unix::fs::{FileExt, FileTypeExt, MetadataExt};
use std::path::{Path, PathBuf};

use blockwise_geometry::BlockSource;
use blockwise_verify::DeviceHints;

use crate::Error;

/// A regular file or block device opened read-only.
#[derive(Debug)]
pub struct FileSource {
    file: File,
    len: u64,
    /// sysfs directory of the device (`/sys/dev/block/MAJ:MIN`), for block devices.
    pub sysfs: Option<PathBuf>,
}

impl FileSource {
    /// Opens `path` read-only. Directories and other special files are refused; the open
    /// never blocks (O_NONBLOCK: a FIFO without a writer is refused, not waited for).
    pub fn open(path: &Path) -> Result<Self, Error> {
        use std::os::unix::fs::OpenOptionsExt as _;
        let nonblock = i32::try_from(rustix::fs::OFlags::NONBLOCK.bits()).unwrap_or(0);
        let mut file = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(nonblock)
            .open(path)
            .map_err(|e| Error::io(path, e))?;
        let meta = file.metadata().map_err(|e| Error::io(path, e))?;
        let ft = meta.file_type();
        let refuse = |what: &str| Error::NotUsable {
            path: path.to_path_buf(),
            what: what.to_string(),
        };
        if ft.is_dir() {
            return Err(refuse("is a directory, not an image or block device"));
        }
        if ft.is_block_device() {
            let len = file
                .seek(SeekFrom::End(0))
                .map_err(|e| Error::io(path, e))?;
            let (major, minor) = crate::tree::split_dev(meta.rdev());
            let sysfs = PathBuf::from(format!("/sys/dev/block/{major}:{minor}"));
            return Ok(FileSource {
                file,
                len,
                sysfs: Some(sysfs),
            });
        }
        if !ft.is_file() {
            return Err(refuse(if ft.is_fifo() {
                "is a FIFO (named pipe), not an image: save the image to a file first"
            } else if ft.is_char_device() {
                "is a character device, not an image or block device"
            } else if ft.is_socket() {
                "is a socket, not an image"
            } else {
                "is neither a regular file nor a block device"
            }));
        }
        Ok(FileSource {
            file,
            len: meta.len(),
            sysfs: None,
        })
    }

    /// The device's sysfs queue limits (block devices only).
    #[must_use]
    pub fn hints(&self) -> Option<DeviceHints> {
        let dir = self.sysfs.as_ref()?;
        // A partition has no queue/: its disk is the parent directory.
        let disk = if dir.join("queue").is_dir() {
            dir.clone()
        } else {
            dir.join("..")
        };
        let read = |rel: &str| -> Option<u64> {
            std::fs::read_to_string(disk.join(rel))
                .ok()
                .and_then(|s| s.trim().parse::<u64>().ok())
                .filter(|&v| v > 0)
        };
        Some(DeviceHints {
            logical_block_bytes: read("queue/logical_block_size"),
            physical_block_bytes: read("queue/physical_block_size"),
            minimum_io_bytes: read("queue/minimum_io_size"),
            // 0xFFFF×512 and 0x7FFF×512 are bogus values some USB-SATA bridges report
            // (util-linux #1221); `blockwise probe` drops the same ones.
            optimal_io_bytes: read("queue/optimal_io_size")
                .filter(|&v| v != 33_553_920 && v != 16_776_704),
            preferred_erase_bytes: read("device/preferred_erase_size"),
        })
    }

    /// For a partition device: its start on the parent disk, in bytes (sysfs `start` is
    /// always in 512-byte units).
    #[must_use]
    pub fn partition_start(&self) -> Option<u64> {
        let dir = self.sysfs.as_ref()?;
        if !dir.join("partition").exists() {
            return None;
        }
        std::fs::read_to_string(dir.join("start"))
            .ok()
            .and_then(|s| s.trim().parse::<u64>().ok())
            .map(|s| s.saturating_mul(512))
    }
}

impl BlockSource for FileSource {
    type Error = std::io::Error;
    fn len(&self) -> u64 {
        self.len
    }
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> Result<(), std::io::Error> {
        self.file.read_exact_at(buf, offset)
    }
}
