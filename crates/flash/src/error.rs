//! Errors of the writer, the targets, the sources and the safety checks.

use std::io;
use std::path::{Path, PathBuf};

use blockwise_geometry::display_path;

/// Why a target is refused before any byte is written (the CLI's exit code 2).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Refusal {
    /// The target or one of its partitions is mounted.
    #[error("{dev} is mounted on {mountpoint}")]
    Mounted {
        /// The mounted device (the target or one of its partitions).
        dev: String,
        /// Where.
        mountpoint: String,
    },
    /// The target holds the running system's `/` or `/boot`.
    #[error("{dev} holds the running system's {mountpoint}")]
    System {
        /// The device.
        dev: String,
        /// `/` or `/boot`.
        mountpoint: String,
    },
    /// The target or one of its partitions is used as swap.
    #[error("{dev} is in use as swap")]
    Swap {
        /// The device.
        dev: String,
    },
    /// Something (dm, md, LVM) holds the target or one of its partitions.
    #[error("{dev} is held by {holder} (device mapper, md or LVM)")]
    Held {
        /// The held device.
        dev: String,
        /// The holder's name in sysfs.
        holder: String,
    },
    /// The target is read-only.
    #[error("{dev} is read-only")]
    ReadOnly {
        /// The device.
        dev: String,
    },
    /// The image does not fit.
    #[error("{dev} is too small: {dev_bytes} bytes, the image needs {image_bytes}")]
    TooSmall {
        /// The device.
        dev: String,
        /// Its size.
        dev_bytes: u64,
        /// What the image needs.
        image_bytes: u64,
    },
    /// The target is a partition and `--partition-ok` was not given.
    #[error("{dev} is a partition of {disk}; write to the whole disk, or pass --partition-ok")]
    Partition {
        /// The partition.
        dev: String,
        /// Its disk.
        disk: String,
    },
    /// Opening with O_EXCL failed: the kernel says something uses the device.
    #[error("{dev} is busy (mounted or claimed by another program)")]
    Busy {
        /// The device.
        dev: String,
    },
    /// A non-removable disk without `--yes`, or a confirmation that was not given.
    #[error("{0}")]
    NotConfirmed(String),
    /// The target is neither a block device nor a regular file.
    #[error("{path} is neither a block device nor a regular file")]
    NotUsable {
        /// The path.
        path: PathBuf,
    },
    /// The target holds (or is held by) what the write reads: the source image itself through
    /// another name (a symlink, a hard link), its `.bmap`, a file of the spec being built, the
    /// same block device, a disk and its partition, or the loop device backed by the source.
    #[error("{} is {}, which this write reads: it would be overwritten while read; write to another target", display_path(target), same_as(target, input))]
    TargetIsInput {
        /// The target.
        target: PathBuf,
        /// The input it shares data with.
        input: PathBuf,
    },
    /// The target does not exist and its directory is the kernel's device filesystem
    /// (devtmpfs, `/dev`): writing would create a regular file in RAM, not reach a card.
    #[error("{}: no such device: is the card plugged in? (nothing was written; a file is never created in /dev)", display_path(path))]
    NoSuchDevice {
        /// The missing device node.
        path: PathBuf,
    },
    /// The target is a regular file in the kernel's device filesystem (devtmpfs): a file an
    /// earlier write created there in RAM when no card was plugged in, not a device.
    #[error("{} is a regular file in /dev (devtmpfs, in RAM), not a device: remove it, plug in the card and give its device", display_path(path))]
    FileInDev {
        /// The file.
        path: PathBuf,
    },
    /// O_DIRECT was refused and `--direct` demands it.
    #[error("{path}: O_DIRECT is not supported here and --direct was given")]
    DirectRefused {
        /// The target.
        path: PathBuf,
    },
}

/// `the source image a.img`-style words for [`Refusal::TargetIsInput`].
fn same_as(target: &Path, input: &Path) -> String {
    if target == input {
        "also the input".into()
    } else {
        format!("the same data as the input {}", display_path(input))
    }
}

/// What failed while writing, reading the source, or verifying.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The target is refused before anything was written.
    #[error(transparent)]
    Refused(#[from] Refusal),
    /// Opening or inspecting the target failed.
    #[error("{path}: {source}")]
    Open {
        /// The target.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: io::Error,
    },
    /// A write failed (EIO, ENOSPC, EPERM, ...).
    #[error("write failed at offset {offset} after {written} bytes written: {source}")]
    Write {
        /// Offset of the failed write.
        offset: u64,
        /// Bytes written successfully before it.
        written: u64,
        /// The OS error.
        #[source]
        source: io::Error,
    },
    /// The device accepted fewer bytes than asked and then nothing more (its end).
    #[error("short write at offset {offset} after {written} bytes written: the device ended")]
    ShortWrite {
        /// Where the device stopped accepting bytes.
        offset: u64,
        /// Bytes written successfully.
        written: u64,
    },
    /// Syncing (fdatasync) failed: the device reported an error for earlier writes.
    #[error("fdatasync failed after {written} bytes written: {source}")]
    Sync {
        /// Bytes written.
        written: u64,
        /// The OS error.
        #[source]
        source: io::Error,
    },
    /// Reading the source failed (or a bmap checksum did not match).
    #[error("reading the source at offset {offset} (after {written} bytes written): {source}")]
    Source {
        /// Image offset being read.
        offset: u64,
        /// Bytes written to the target before.
        written: u64,
        /// What went wrong.
        #[source]
        source: SourceError,
    },
    /// Read-back differs from what was written.
    #[error("verify: the device differs from the image in the 4096-byte block at offset {offset}")]
    VerifyMismatch {
        /// Start of the first differing block.
        offset: u64,
    },
    /// Read-back failed.
    #[error("verify: reading back at offset {offset}: {source}")]
    VerifyRead {
        /// Offset of the failed read.
        offset: u64,
        /// The OS error.
        #[source]
        source: io::Error,
    },
    /// A buffer could not be allocated.
    #[error("cannot allocate a {bytes}-byte aligned buffer")]
    Alloc {
        /// Its size.
        bytes: usize,
    },
    /// A bad option (chunk size not a multiple of the block size, ...).
    #[error("{0}")]
    Options(String),
}

impl Error {
    /// True for failures of the device (the CLI's exit code 3) as opposed to refusals and bad
    /// input (exit code 2).
    #[must_use]
    pub fn is_device_failure(&self) -> bool {
        matches!(
            self,
            Error::Write { .. }
                | Error::ShortWrite { .. }
                | Error::Sync { .. }
                | Error::VerifyMismatch { .. }
                | Error::VerifyRead { .. }
        )
    }

    /// For a failure mid-way, the offset reached and the bytes written.
    #[must_use]
    pub fn progress(&self) -> Option<(u64, u64)> {
        match self {
            Error::Write {
                offset, written, ..
            }
            | Error::ShortWrite { offset, written }
            | Error::Source {
                offset, written, ..
            } => Some((*offset, *written)),
            _ => None,
        }
    }
}

/// Reading a source failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SourceError {
    /// The OS or the decompressor failed.
    #[error("{0}")]
    Io(#[from] io::Error),
    /// A bmap range's bytes do not hash to its checksum.
    #[error("bmap checksum mismatch for blocks {first}-{last}")]
    Checksum {
        /// First block of the range.
        first: u64,
        /// Last block (inclusive).
        last: u64,
    },
    /// The stream ended before the image size the bmap gives.
    #[error("the image ended at {at} bytes, before its expected size {expected}")]
    Truncated {
        /// Where it ended.
        at: u64,
        /// The size expected.
        expected: u64,
    },
    /// Reading an in-memory or built image failed.
    #[error("{0}")]
    Image(String),
}
