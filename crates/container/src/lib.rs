//! What an input is, decided by its bytes, and the containers images travel in.
//!
//! DESIGN.md, "Formats beyond FAT and ext4": this crate is the only place that decides what
//! an input is; `write`, `verify`, Python and the page ask it. It is pure (no OS I/O) and
//! builds for `wasm32-unknown-unknown`, so the page reads what the CLI reads.
//!
//! - [`recognise`](mod@recognise): an input's first bytes → a partition table, a filesystem, a container
//!   blockwise decodes (xz, gzip, zstd, bzip2, lz4, zip, Android sparse), or a format it
//!   names and refuses (tar, qcow2, VMDK, VHD/VHDX, VDI).
//! - [`decode`]: containers as [`BlockSource`](blockwise_geometry::BlockSource)s, with random
//!   access where the format allows it (sparse chunk map, zstd seek table, xz index).
//! - [`encode`]: an [`ImageMap`](blockwise_geometry::ImageMap) written as Android sparse,
//!   seekable zstd or multi-block xz, straight from the map.

// Every parser here takes hostile bytes: no indexing, unchecked arithmetic, `as`, unwrap or
// panic. Escapes go through `#[expect(.., reason = "…")]`.
#![deny(
    clippy::indexing_slicing,
    clippy::arithmetic_side_effects,
    clippy::as_conversions,
    clippy::unwrap_used,
    clippy::panic
)]

pub mod decode;
pub mod encode;
mod error;
mod open;
pub mod recognise;
pub mod verify;

pub use crate::decode::Decoded;
pub use crate::error::Error;
pub use crate::open::{open, Content, OpenError, Opened};
pub use crate::recognise::{recognise, ContainerKind, Format, ImageKind, Refusal, Unknown};

/// `s` with control characters, quotes and backslashes as `\xNN` escapes, for messages that
/// quote names taken from the input (a zip entry called `"\x1b[2J"` must not clear the
/// terminal).
#[must_use]
pub fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        if c.is_control() || c == '"' || c == '\\' {
            let mut buf = [0u8; 4];
            for b in c.encode_utf8(&mut buf).bytes() {
                out.push_str(&format!("\\x{b:02x}"));
            }
        } else {
            out.push(c);
        }
    }
    out
}
