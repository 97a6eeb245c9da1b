//! Errors of planning and building an image.

use std::path::PathBuf;

use blockwise_geometry::SpecError;

/// Why an image could not be planned or built.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The spec asks for something impossible; the key says where.
    #[error(transparent)]
    Spec(#[from] SpecError),
    /// A partition's filesystem could not be written.
    #[error("partition[{index}]: {message}")]
    Partition {
        /// 1-based spec index.
        index: usize,
        /// What went wrong.
        message: String,
    },
    /// Reading an input or writing the output failed.
    #[error("{path}: {source}")]
    Io {
        /// The file involved.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// The partition table could not be written.
    #[error("partition table: {0}")]
    Table(String),
}

impl Error {
    /// True for errors in what the user asked (exit code 2 in the CLI) as opposed to I/O.
    #[must_use]
    pub fn is_spec(&self) -> bool {
        matches!(self, Error::Spec(_))
    }

    #[cfg(feature = "host")]
    pub(crate) fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        Error::Io {
            path: path.into(),
            source,
        }
    }
}
