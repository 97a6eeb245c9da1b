//! dm-verity hash trees, format 1 (what `veritysetup format` writes and the kernel's
//! `dm-verity` target reads), computed in pure Rust, and the verity superblock that the
//! verifier parses.
//!
//! A hash area is a 512-byte superblock padded to one hash block, then the tree, top level
//! first. Level 0 holds the digests of the data blocks, each level above the digests of the
//! hash blocks below it, until one block is left; the root hash is the digest of that block.
//! Every digest is `sha256(salt ‖ block)` (format 1 prepends the salt), each stored in 32
//! bytes, 128 per 4 KiB hash block, the rest of a block zero.
//!
//! ```text
//! hash offset ─► [superblock 512 B][pad to hash block]
//!                [level n-1: 1 block][level n-2] … [level 0: ⌈data blocks / 128⌉ blocks]
//! ```
//!
//! ```
//! use blockwise_verity::{Params, TreeBuilder, Superblock};
//! let params = Params::new(4, [7; 32].to_vec(), [1; 16]);
//! let mut b = TreeBuilder::new(&params);
//! for i in 0..4u8 {
//!     b.push_block(&[i; 4096]);
//! }
//! let tree = b.finish().unwrap();
//! assert_eq!(tree.bytes.len() as u64, params.hash_area_bytes());
//! let sb = Superblock::parse(&tree.bytes).unwrap();
//! assert_eq!(sb.data_blocks, 4);
//! assert_eq!(tree.root.len(), 32);
//! ```

#![deny(
    clippy::indexing_slicing,
    clippy::arithmetic_side_effects,
    clippy::as_conversions,
    clippy::unwrap_used,
    clippy::panic
)]

mod raw;
mod tree;

pub use raw::{Corrupt, Superblock, SuperblockRaw, MAGIC, SUPERBLOCK_BYTES};
pub use tree::{hex, levels, root_from_top, Params, Tree, TreeBuilder, TreeError};

/// The one block size blockwise writes for data and hash blocks (4 KiB: a flash page, and
/// the kernel's page size on the boards that boot read-only slots).
pub const BLOCK_BYTES: u32 = 4096;
/// Bytes of a sha256 digest.
pub const DIGEST_BYTES: usize = 32;
