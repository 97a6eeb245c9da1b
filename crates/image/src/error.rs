//! Errors of planning and building an image: typed causes, so front ends (the CLI's exit
//! codes, Python's exception classes, JS error names) can tell them apart without reading
//! text.

use blockwise_geometry::OutOfBounds;

use crate::spec::SpecError;

/// Why an image could not be planned or built.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The spec asks for something impossible; the key says where.
    #[error(transparent)]
    Spec(#[from] SpecError),
    /// A partition's content could not be written.
    #[error("partition[{index}]: {source}")]
    Partition {
        /// 1-based spec index.
        index: usize,
        /// What went wrong.
        #[source]
        source: PartitionError,
    },
    /// A `[[raw]]` write failed (reading its source, or the sink).
    #[error("raw[{index}]: {source}")]
    Raw {
        /// 1-based index in `[[raw]]`.
        index: usize,
        /// What went wrong.
        #[source]
        source: PartitionError,
    },
    /// The partition table could not be written.
    #[error("partition table: {source}")]
    Table {
        /// The table writer's error.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync + 'static>,
    },
}

/// What went wrong inside one partition.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PartitionError {
    /// The FAT writer failed (a name FAT cannot store, too little space, the sink …).
    #[error(transparent)]
    Fat(blockwise_fat::Error),
    /// The ext4 writer failed.
    #[error(transparent)]
    Ext4(blockwise_ext4::Error),
    /// The EROFS writer failed.
    #[error(transparent)]
    Erofs(blockwise_erofs::Error),
    /// The squashfs writer failed.
    #[error(transparent)]
    Squashfs(blockwise_squashfs::Error),
    /// A dm-verity hash tree could not be computed (reading the data it covers).
    #[error("dm-verity: {0}")]
    Verity(String),
    /// The exFAT writer failed.
    #[error(transparent)]
    Exfat(blockwise_exfat::Error),
    /// Reading a raw partition's source failed.
    #[error(transparent)]
    Content(blockwise_geometry::ContentError),
    /// The partition does not fit the sink.
    #[error(transparent)]
    Window(OutOfBounds),
    /// The sink failed while a raw partition was copied.
    #[error("writing at byte {offset} of the partition: {source}")]
    Sink {
        /// Offset inside the partition.
        offset: u64,
        /// The sink's error.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync + 'static>,
    },
}

/// The kind of failure, for front ends that map errors to exception classes or exit codes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ErrorKind {
    /// The spec (or the contents it names) asks for something impossible.
    Spec,
    /// Something valid that blockwise does not do.
    Unsupported,
    /// Reading an input or writing the output failed.
    Io,
}

impl Error {
    /// True for errors in what the user asked (exit code 2 in the CLI).
    #[must_use]
    pub fn is_spec(&self) -> bool {
        matches!(self, Error::Spec(_))
    }

    /// The kind of failure.
    #[must_use]
    pub fn kind(&self) -> ErrorKind {
        match self {
            Error::Spec(_) => ErrorKind::Spec,
            Error::Partition { source, .. } | Error::Raw { source, .. } => source.kind(),
            Error::Table { .. } => ErrorKind::Io,
        }
    }

    pub(crate) fn partition(index: usize, source: PartitionError) -> Self {
        Error::Partition { index, source }
    }
}

impl PartitionError {
    /// The kind of failure.
    #[must_use]
    pub fn kind(&self) -> ErrorKind {
        use blockwise_exfat::Error as XF;
        use blockwise_ext4::Error as X;
        use blockwise_fat::Error as F;
        match self {
            PartitionError::Fat(F::Unsupported { .. })
            | PartitionError::Ext4(X::Unsupported { .. } | X::UnsupportedFeature { .. })
            | PartitionError::Erofs(blockwise_erofs::Error::UnsupportedXattr { .. }) => {
                ErrorKind::Unsupported
            }
            PartitionError::Fat(F::Content { .. } | F::Sink { .. })
            | PartitionError::Ext4(X::Content(_) | X::Sink { .. })
            | PartitionError::Erofs(
                blockwise_erofs::Error::Content(_) | blockwise_erofs::Error::Sink { .. },
            )
            | PartitionError::Squashfs(
                blockwise_squashfs::Error::Content(_) | blockwise_squashfs::Error::Sink { .. },
            )
            | PartitionError::Verity(_)
            | PartitionError::Exfat(XF::Content { .. } | XF::Sink { .. })
            | PartitionError::Content(_)
            | PartitionError::Sink { .. } => ErrorKind::Io,
            _ => ErrorKind::Spec,
        }
    }
}
