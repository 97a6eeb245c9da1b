//! What can go wrong decoding a container.

use std::io;

/// A container could not be decoded.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// Reading the container itself failed (the file's or device's own error).
    #[error("{0}")]
    Input(#[source] Box<dyn core::error::Error + Send + Sync>),
    /// The container's bytes are wrong.
    #[error("{format}: {reason}")]
    Corrupt {
        /// `xz`, `zstd`, `Android sparse`, ...
        format: &'static str,
        /// What is wrong.
        reason: String,
    },
    /// The container is valid but uses something blockwise does not decode.
    #[error("{format}: {reason}")]
    Unsupported {
        /// `xz`, `zstd`, `zip`, ...
        format: &'static str,
        /// What, and what to do instead.
        reason: String,
    },
    /// The decoded data ends before the size the container promises.
    #[error(
        "{format}: the data ends at byte {at} of the image, the container says it has {expected}"
    )]
    Truncated {
        /// The container.
        format: &'static str,
        /// Where the data ended.
        at: u64,
        /// The size promised.
        expected: u64,
    },
    /// The decoder library refused the data.
    #[error("{format}: {source}")]
    Decoder {
        /// The container.
        format: &'static str,
        /// The decoder's own message.
        #[source]
        source: io::Error,
    },
    /// A bound that keeps memory and work limited was reached.
    #[error("{what}")]
    Limit {
        /// What was too large, in the user's words.
        what: String,
    },
}

impl Error {
    /// An error from a decoder's [`io::Read`]: the input's own error when that is what it
    /// carries (so an interrupted or failed read stays what it was), else a decoder error.
    pub(crate) fn from_io(format: &'static str, e: io::Error) -> Self {
        if e.get_ref().is_some_and(|inner| inner.is::<Error>()) {
            if let Some(inner) = e.into_inner() {
                return match inner.downcast::<Error>() {
                    Ok(mine) => *mine,
                    Err(other) => Error::Input(other),
                };
            }
            return Error::Corrupt {
                format,
                reason: "decoder error".into(),
            };
        }
        Error::Decoder { format, source: e }
    }

    /// The error as an [`io::Error`] for a decoder to pass through.
    pub(crate) fn into_io(self) -> io::Error {
        io::Error::other(self)
    }

    pub(crate) fn corrupt(format: &'static str, reason: impl Into<String>) -> Self {
        Error::Corrupt {
            format,
            reason: reason.into(),
        }
    }

    pub(crate) fn unsupported(format: &'static str, reason: impl Into<String>) -> Self {
        Error::Unsupported {
            format,
            reason: reason.into(),
        }
    }
}
