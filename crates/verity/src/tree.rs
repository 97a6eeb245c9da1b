//! The hash tree: its geometry ([`levels`], [`Params::hash_area_bytes`]) and its computation
//! ([`TreeBuilder`]), block by block, so a caller can stream a partition through it.

use sha2::{Digest, Sha256};

use crate::raw::{Superblock, SUPERBLOCK_BYTES};
use crate::{BLOCK_BYTES, DIGEST_BYTES};

/// What a hash tree covers and how it is salted. Data and hash blocks are 4 KiB, the
/// algorithm sha256, format 1.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Params {
    /// Bytes per data block.
    pub data_block_bytes: u32,
    /// Bytes per hash block.
    pub hash_block_bytes: u32,
    /// Data blocks covered.
    pub data_blocks: u64,
    /// Salt (at most 256 bytes; blockwise derives 32 from the seed).
    pub salt: Vec<u8>,
    /// Superblock UUID.
    pub uuid: [u8; 16],
}

impl Params {
    /// 4 KiB data and hash blocks over `data_blocks` blocks.
    #[must_use]
    pub fn new(data_blocks: u64, salt: Vec<u8>, uuid: [u8; 16]) -> Self {
        Params {
            data_block_bytes: BLOCK_BYTES,
            hash_block_bytes: BLOCK_BYTES,
            data_blocks,
            salt,
            uuid,
        }
    }

    /// The superblock describing this tree.
    #[must_use]
    pub fn superblock(&self) -> Superblock {
        Superblock {
            hash_type: 1,
            uuid: self.uuid,
            algorithm: "sha256".into(),
            data_block_bytes: self.data_block_bytes,
            hash_block_bytes: self.hash_block_bytes,
            data_blocks: self.data_blocks,
            salt: self.salt.clone(),
        }
    }

    /// Hash blocks of each level, level 0 (digests of data blocks) first.
    #[must_use]
    pub fn levels(&self) -> Vec<u64> {
        levels(self.data_blocks, self.hash_block_bytes)
    }

    /// Bytes of the whole hash area: the superblock's hash block plus every level.
    #[must_use]
    pub fn hash_area_bytes(&self) -> u64 {
        let blocks = self.levels().iter().fold(1u64, |a, &b| a.saturating_add(b));
        blocks.saturating_mul(u64::from(self.hash_block_bytes))
    }
}

/// Digests per hash block, as a power of two (sha256's 32-byte digests: 128 per 4 KiB).
fn per_block_bits(hash_block_bytes: u32) -> u32 {
    let per = u64::from(hash_block_bytes)
        .checked_div(u64::try_from(DIGEST_BYTES).unwrap_or(32))
        .unwrap_or(1)
        .max(2);
    per.ilog2()
}

/// Hash blocks per level for `data_blocks` data blocks, level 0 first, as the kernel and
/// cryptsetup count them: levels are added while a level would still need more than one
/// block (so a single data block has no level at all: its digest is the root).
#[must_use]
pub fn levels(data_blocks: u64, hash_block_bytes: u32) -> Vec<u64> {
    let bits = per_block_bits(hash_block_bytes);
    let mut n = 0u32;
    let last = data_blocks.saturating_sub(1);
    while bits.saturating_mul(n) < 64 && last.checked_shr(bits.saturating_mul(n)).unwrap_or(0) != 0
    {
        n = n.saturating_add(1);
    }
    (0..n)
        .map(|i| {
            let shift = bits.saturating_mul(i.saturating_add(1));
            let unit = 1u64.checked_shl(shift).unwrap_or(u64::MAX);
            data_blocks.div_ceil(unit)
        })
        .collect()
}

/// The digest `sha256(salt ‖ block)` of format 1.
fn digest(salted: &Sha256, block: &[u8]) -> [u8; DIGEST_BYTES] {
    let mut h = salted.clone();
    h.update(block);
    h.finalize().into()
}

/// The root hash from the top-level hash block (`sha256(salt ‖ block)`): what verify computes
/// from one block of a hash area.
#[must_use]
pub fn root_from_top(salt: &[u8], top: &[u8]) -> [u8; DIGEST_BYTES] {
    digest(&Sha256::new_with_prefix(salt), top)
}

/// Lower-case hex.
#[must_use]
pub fn hex(bytes: &[u8]) -> String {
    const H: &[u8; 16] = b"0123456789abcdef";
    let mut s = String::with_capacity(bytes.len().saturating_mul(2));
    for &b in bytes {
        s.push(char::from(
            H.get(usize::from(b >> 4)).copied().unwrap_or(b'0'),
        ));
        s.push(char::from(
            H.get(usize::from(b & 15)).copied().unwrap_or(b'0'),
        ));
    }
    s
}

/// Building a tree went wrong.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum TreeError {
    /// A data block of the wrong length was pushed.
    #[error("a data block of {got} bytes was given; blocks are {want} bytes")]
    BlockLength {
        /// Its length.
        got: usize,
        /// The data block size.
        want: u32,
    },
    /// More or fewer data blocks were pushed than the parameters say.
    #[error("{pushed} data blocks were hashed, the tree covers {want}")]
    Count {
        /// Blocks pushed.
        pushed: u64,
        /// Blocks expected.
        want: u64,
    },
    /// The parameters are not 4 KiB blocks.
    #[error("only 4096-byte data and hash blocks are written")]
    BlockSize,
}

/// A finished hash area.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Tree {
    /// Superblock (padded to a hash block) and every level, top first:
    /// [`Params::hash_area_bytes`] bytes, written at the hash offset.
    pub bytes: Vec<u8>,
    /// The root hash.
    pub root: [u8; DIGEST_BYTES],
}

/// Computes a tree from the data blocks in order. Memory: 32 bytes per data block (level 0)
/// plus the tree itself (about 1/128 of the data).
#[derive(Clone, Debug)]
pub struct TreeBuilder {
    params: Params,
    salted: Sha256,
    zero: [u8; DIGEST_BYTES],
    level0: Vec<u8>,
    pushed: u64,
}

impl TreeBuilder {
    /// A builder for `params`.
    #[must_use]
    pub fn new(params: &Params) -> Self {
        let salted = Sha256::new_with_prefix(&params.salt);
        let zeros = vec![0u8; usize::try_from(params.data_block_bytes).unwrap_or(4096)];
        let zero = digest(&salted, &zeros);
        TreeBuilder {
            params: params.clone(),
            salted,
            zero,
            level0: Vec::new(),
            pushed: 0,
        }
    }

    /// Blocks pushed so far.
    #[must_use]
    pub fn pushed(&self) -> u64 {
        self.pushed
    }

    /// Hashes the next data block (exactly one data block long; all-zero blocks take a
    /// cached digest).
    pub fn push_block(&mut self, block: &[u8]) -> Result<(), TreeError> {
        let want = self.params.data_block_bytes;
        if u32::try_from(block.len()).ok() != Some(want) {
            return Err(TreeError::BlockLength {
                got: block.len(),
                want,
            });
        }
        let d = if block.iter().all(|&b| b == 0) {
            self.zero
        } else {
            digest(&self.salted, block)
        };
        self.level0.extend_from_slice(&d);
        self.pushed = self.pushed.saturating_add(1);
        Ok(())
    }

    /// Hashes `n` all-zero data blocks (holes).
    pub fn push_zero_blocks(&mut self, n: u64) {
        for _ in 0..n {
            self.level0.extend_from_slice(&self.zero);
        }
        self.pushed = self.pushed.saturating_add(n);
    }

    /// The hash area and root hash.
    pub fn finish(self) -> Result<Tree, TreeError> {
        let p = &self.params;
        if p.data_block_bytes != BLOCK_BYTES || p.hash_block_bytes != BLOCK_BYTES {
            return Err(TreeError::BlockSize);
        }
        if self.pushed != p.data_blocks {
            return Err(TreeError::Count {
                pushed: self.pushed,
                want: p.data_blocks,
            });
        }
        let hb = usize::try_from(p.hash_block_bytes).unwrap_or(4096);
        let counts = p.levels();
        // Each level as whole hash blocks: its digests, zero-padded to the block.
        let pad = |mut v: Vec<u8>, blocks: u64| {
            v.resize(usize::try_from(blocks).unwrap_or(0).saturating_mul(hb), 0);
            v
        };
        let mut levels: Vec<Vec<u8>> = Vec::with_capacity(counts.len());
        let mut below = self.level0;
        for &blocks in &counts {
            let level = pad(below, blocks);
            let mut up = Vec::with_capacity(
                usize::try_from(blocks)
                    .unwrap_or(0)
                    .saturating_mul(DIGEST_BYTES),
            );
            for chunk in level.chunks(hb) {
                up.extend_from_slice(&digest(&self.salted, chunk));
            }
            levels.push(level);
            below = up;
        }
        // `below` now holds the digest of the top block, or (no levels) of the one data
        // block.
        let mut root = [0u8; DIGEST_BYTES];
        if let Some(r) = below.get(..DIGEST_BYTES) {
            root.copy_from_slice(r);
        }
        let mut bytes = Vec::with_capacity(usize::try_from(p.hash_area_bytes()).unwrap_or(0));
        bytes.extend_from_slice(&p.superblock().to_bytes());
        bytes.resize(hb.max(SUPERBLOCK_BYTES), 0);
        for level in levels.iter().rev() {
            bytes.extend_from_slice(level);
        }
        Ok(Tree { bytes, root })
    }
}

#[cfg(test)]
#[expect(
    clippy::unwrap_used,
    clippy::indexing_slicing,
    clippy::as_conversions,
    reason = "tests"
)]
mod tests {
    use super::*;

    #[test]
    fn level_counts_follow_the_kernel() {
        assert_eq!(levels(1, 4096), Vec::<u64>::new());
        assert_eq!(levels(2, 4096), vec![1]);
        assert_eq!(levels(128, 4096), vec![1]);
        assert_eq!(levels(129, 4096), vec![2, 1]);
        assert_eq!(levels(1024, 4096), vec![8, 1]);
        assert_eq!(levels(16384, 4096), vec![128, 1]);
        assert_eq!(levels(16385, 4096), vec![129, 2, 1]);
        let p = Params::new(1024, vec![], [0; 16]);
        assert_eq!(p.hash_area_bytes(), (1 + 8 + 1) * 4096);
    }

    #[test]
    fn zero_blocks_hash_like_pushed_zeros() {
        let p = Params::new(300, vec![5; 32], [1; 16]);
        let mut a = TreeBuilder::new(&p);
        let mut b = TreeBuilder::new(&p);
        for _ in 0..300 {
            a.push_block(&[0; 4096]).unwrap();
        }
        b.push_zero_blocks(300);
        let (a, b) = (a.finish().unwrap(), b.finish().unwrap());
        assert_eq!(a, b);
        assert_eq!(a.bytes.len() as u64, p.hash_area_bytes());
        // The root is the digest of the top block, which comes right after the superblock.
        assert_eq!(a.root, root_from_top(&p.salt, &a.bytes[4096..8192]));
    }

    #[test]
    fn counts_and_lengths_are_checked() {
        let p = Params::new(2, vec![], [0; 16]);
        let mut b = TreeBuilder::new(&p);
        assert!(b.push_block(&[1; 100]).is_err());
        b.push_block(&[1; 4096]).unwrap();
        assert_eq!(b.finish(), Err(TreeError::Count { pushed: 1, want: 2 }));
        assert_eq!(hex(&[0xab, 0x01]), "ab01");
    }
}
