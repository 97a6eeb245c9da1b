//! Progress of long work, reported to whoever drives it (the CLI draws bars with it).

/// A phase of a build.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Phase {
    /// Walking the content directories; [`Progress::advance`] counts entries (files,
    /// directories, links) as each is reached.
    Scanning,
    /// Planning the layout and the filesystems.
    Planning,
    /// Laying out metadata and content references in memory.
    Assembling,
    /// Writing the output; [`Progress::advance`] counts bytes out of `bytes`.
    Writing {
        /// Bytes to write (metadata plus content).
        bytes: u64,
    },
    /// Hashing the `.bmap` ranges, after the writing (the hasher reads behind the writer and
    /// may lag); [`Progress::advance`] counts bytes hashed since, out of `bytes` in all.
    Hashing {
        /// Bytes the `.bmap` hashes.
        bytes: u64,
    },
    /// Making the output durable (fsync).
    Syncing,
    /// Finished.
    Done,
}

/// Receives progress. Every method has an empty default, so `&mut ()` reports nothing.
pub trait Progress {
    /// A new phase starts.
    fn phase(&mut self, phase: Phase) {
        let _ = phase;
    }
    /// `n` more units (files while scanning, bytes while writing) are done.
    fn advance(&mut self, n: u64) {
        let _ = n;
    }
    /// Polled between units of work (after each phase change and each advance). Returning
    /// `true` stops the work with [`Error::Cancelled`](crate::Error::Cancelled); an output
    /// file being written is removed, so nothing is left behind. A front end uses it for
    /// Ctrl-C or a callback that asks to stop.
    fn cancelled(&mut self) -> bool {
        false
    }
}

/// No progress reporting.
impl Progress for () {}
