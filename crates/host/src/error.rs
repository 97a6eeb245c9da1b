//! Errors of the host side: the image crate's errors plus the files and tools around them.

use std::path::PathBuf;

use blockwise_geometry::display_path;
use blockwise_image::{ErrorKind, SpecError};

/// Why a host operation failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// Planning or assembling the image failed (a bad spec, a full filesystem …).
    #[error(transparent)]
    Image(#[from] blockwise_image::Error),
    /// Reading an input or writing the output failed.
    #[error("{}: {source}", display_path(path))]
    Io {
        /// The file involved.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// Writing the output (image, temp file or `.bmap`) failed: disk full, I/O error, quota.
    #[error("writing {}: {source}{note}", display_path(path))]
    Write {
        /// The file being written.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: std::io::Error,
        /// What explains the error, when something does (`; …`), else empty: for EFBIG the
        /// process's file-size limit.
        note: String,
    },
    /// A path that must be a regular file, a directory or a block device is something else.
    #[error("{}: {what}", display_path(path))]
    NotUsable {
        /// The path.
        path: PathBuf,
        /// What it is and what was expected.
        what: String,
    },
    /// An input file changed between the scan and the copy (size, mtime or identity), or
    /// was replaced by something that is not a regular file. No output is left behind.
    #[error(
        "{}: changed while building ({what}); nothing was written, run the build again",
        display_path(path)
    )]
    Changed {
        /// The input file.
        path: PathBuf,
        /// What differs, e.g. `size 100 → 200`.
        what: String,
    },
    /// An output of the build (the image, its `.bmap`, any encoded form) is one of the build's
    /// inputs (the spec file, a `contents` file, a raw `source`) or another output, through
    /// any name (a hard link, a symlink, `./x`). Refused before anything is opened for
    /// writing.
    #[error("{}: {}", display_path(output), output_clash(output, input))]
    OutputIsInput {
        /// The output.
        output: PathBuf,
        /// The input (or the other output) it is, and what that is.
        input: Clash,
    },
    /// The [`Progress`](crate::Progress) receiver asked to stop; nothing was written.
    #[error("cancelled; nothing was written")]
    Cancelled,
    /// A squashfs or EROFS backend failed for a partition.
    #[error("partition[{index}]: {source}")]
    Rofs {
        /// 1-based spec index.
        index: usize,
        /// What went wrong.
        #[source]
        source: crate::rofs::RofsError,
    },
    /// The mke2fs backend failed for a partition.
    #[cfg(feature = "mke2fs")]
    #[error("partition[{index}]: {source}")]
    Mke2fs {
        /// 1-based spec index.
        index: usize,
        /// What went wrong.
        #[source]
        source: crate::mke2fs::Mke2fsError,
    },
    /// Installing syslinux (`fat.bootloader`) into a FAT partition failed.
    #[error("partition[{index}].fat.bootloader: {source}")]
    Syslinux {
        /// 1-based spec index.
        index: usize,
        /// What went wrong.
        #[source]
        source: crate::syslinux::SyslinuxError,
    },
    /// The F2FS backend (mkfs.f2fs, sload.f2fs) failed for a partition.
    #[cfg(feature = "f2fs")]
    #[error("partition[{index}]: {source}")]
    F2fs {
        /// 1-based spec index.
        index: usize,
        /// What went wrong.
        #[source]
        source: crate::f2fs::F2fsError,
    },
}

/// What an output of the build clashes with ([`Error::OutputIsInput`]).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Clash {
    /// An input file of the build.
    Input(PathBuf),
    /// Another output of the same build (`-o x.img --bmap x.img`).
    Output(PathBuf),
}

fn output_clash(output: &std::path::Path, c: &Clash) -> String {
    match c {
        Clash::Input(p) => format!(
            "is {}an input of this build (the spec, a contents file or a raw source): writing there would destroy it; choose another output",
            same_or(output, p)
        ),
        Clash::Output(p) => format!(
            "is also given as the output {}: two outputs cannot share a file",
            display_path(p)
        ),
    }
}

fn same_or(output: &std::path::Path, p: &std::path::Path) -> String {
    if output == p {
        String::new()
    } else {
        format!("the same file as {}, ", display_path(p))
    }
}

/// `; the file-size limit (ulimit -f) is N bytes` when the process has one (EFBIG then comes
/// from it rather than from the filesystem's largest file), else empty.
fn file_size_limit_note() -> String {
    match rustix::process::getrlimit(rustix::process::Resource::Fsize).current {
        Some(limit) => format!("; this process's file-size limit (ulimit -f) is {limit} bytes"),
        None => String::new(),
    }
}

impl From<SpecError> for Error {
    fn from(e: SpecError) -> Self {
        Error::Image(e.into())
    }
}

impl Error {
    pub(crate) fn write(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        let note = if source.raw_os_error() == Some(rustix::io::Errno::FBIG.raw_os_error()) {
            file_size_limit_note()
        } else {
            String::new()
        };
        Error::Write {
            path: path.into(),
            source,
            note,
        }
    }

    /// [`Error::Cancelled`] when `progress` asks to stop.
    pub(crate) fn check(progress: &mut dyn crate::Progress) -> Result<(), Error> {
        if progress.cancelled() {
            Err(Error::Cancelled)
        } else {
            Ok(())
        }
    }

    pub(crate) fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        Error::Io {
            path: path.into(),
            source,
        }
    }

    /// The kind of failure (spec, unsupported, I/O), for exit codes and exception classes.
    #[must_use]
    pub fn kind(&self) -> ErrorKind {
        match self {
            Error::Image(e) => e.kind(),
            Error::Io { .. } | Error::Write { .. } => ErrorKind::Io,
            Error::NotUsable { .. } | Error::OutputIsInput { .. } => ErrorKind::Spec,
            Error::Changed { .. } | Error::Cancelled => ErrorKind::Io,
            #[cfg(feature = "mke2fs")]
            Error::Mke2fs { .. } => ErrorKind::Io,
            Error::Rofs { source, .. } if source.is_missing_tool() => ErrorKind::Unsupported,
            Error::Rofs { .. } => ErrorKind::Io,
            Error::Syslinux {
                source: crate::syslinux::SyslinuxError::Missing,
                ..
            } => ErrorKind::Unsupported,
            Error::Syslinux { .. } => ErrorKind::Io,
            #[cfg(feature = "f2fs")]
            Error::F2fs { .. } => ErrorKind::Io,
        }
    }

    /// True when writing the output failed (exit code 3 in the CLI), as opposed to bad or
    /// unreadable input (2).
    #[must_use]
    pub fn is_write_failure(&self) -> bool {
        matches!(self, Error::Write { .. })
    }

    /// The spec error inside, if this is one.
    #[must_use]
    pub fn spec_error(&self) -> Option<&SpecError> {
        match self {
            Error::Image(blockwise_image::Error::Spec(e)) => Some(e),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every errno writing the output can fail with (disk full, device error, quota, file-size
    /// limit) is a write failure (exit 3 in the CLI); only EFBIG gets a note, and only under
    /// a limit. The kernel here has no quota support, so EDQUOT is checked at this level;
    /// ENOSPC, EIO and EFBIG also end to end in tests/hostile.rs.
    #[test]
    fn output_errnos_are_write_failures() {
        use rustix::io::Errno;
        for errno in [
            Errno::NOSPC,
            Errno::IO,
            Errno::DQUOT,
            Errno::FBIG,
            Errno::ROFS,
        ] {
            let e = Error::write(
                "out.img",
                std::io::Error::from_raw_os_error(errno.raw_os_error()),
            );
            assert!(e.is_write_failure(), "{e}");
            let text = e.to_string();
            assert!(text.starts_with("writing out.img: "), "{text}");
            let limited = rustix::process::getrlimit(rustix::process::Resource::Fsize)
                .current
                .is_some();
            assert_eq!(
                text.contains("ulimit -f"),
                errno == Errno::FBIG && limited,
                "{text}"
            );
        }
        assert!(!Error::io("in.txt", std::io::Error::other("x")).is_write_failure());
    }
}
