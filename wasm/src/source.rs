//! A [`BlockSource`] over the byte ranges fetched so far from a JS `Blob`.
//!
//! The verifier is synchronous and a `Blob` can only be read asynchronously, so verifying
//! runs in rounds: the verifier runs over the ranges fetched so far; its first read of
//! bytes not yet fetched fails with [`Missing`], which names the range; the caller fetches
//! that range (rounded out to whole 4 KiB pages) and runs the verifier again. The verifier
//! reads only metadata, so a few dozen rounds and some KiB suffice even for a 32 GiB image.

use std::collections::BTreeMap;

use blockwise_geometry::BlockSource;

/// Unit ranges are fetched in: every fetch is rounded out to whole pages.
pub const FETCH_UNIT: u64 = 4096;

/// A read of bytes that have not been fetched yet.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("bytes {offset}..{end} have not been fetched yet", end = offset.saturating_add(*len))]
pub struct Missing {
    /// First byte wanted.
    pub offset: u64,
    /// Number of bytes wanted.
    pub len: u64,
}

/// The fetched ranges of a source of `size` bytes: page-aligned chunks keyed by offset.
#[derive(Debug, Default)]
pub struct Fetched {
    size: u64,
    chunks: BTreeMap<u64, Vec<u8>>,
}

impl Fetched {
    /// Nothing fetched yet of a source of `size` bytes.
    #[must_use]
    pub fn new(size: u64) -> Self {
        Fetched {
            size,
            chunks: BTreeMap::new(),
        }
    }

    /// The range `[start, end)` to fetch for `m`: page-aligned, clamped to the source.
    #[must_use]
    pub fn range_for(&self, m: Missing) -> (u64, u64) {
        let start = m.offset - m.offset % FETCH_UNIT;
        let want_end = m.offset.saturating_add(m.len.max(1));
        let end = want_end
            .div_ceil(FETCH_UNIT)
            .saturating_mul(FETCH_UNIT)
            .min(self.size);
        (start.min(self.size), end)
    }

    /// Stores bytes fetched at `offset`.
    pub fn insert(&mut self, offset: u64, bytes: Vec<u8>) {
        if !bytes.is_empty() {
            self.chunks.insert(offset, bytes);
        }
    }

    /// Copies `[offset, offset + buf.len())` from the chunks, or names the first byte
    /// that is not there.
    fn copy(&self, offset: u64, buf: &mut [u8]) -> Result<(), Missing> {
        let len = buf.len() as u64;
        let mut pos = offset;
        let end = offset.saturating_add(len);
        while pos < end {
            let hit = self
                .chunks
                .range(..=pos)
                .next_back()
                .filter(|(&s, c)| pos < s.saturating_add(Vec::len(c) as u64));
            let Some((&start, chunk)) = hit else {
                return Err(Missing {
                    offset: pos,
                    len: end - pos,
                });
            };
            let from = usize::try_from(pos - start).unwrap_or(usize::MAX);
            let into = usize::try_from(pos - offset).unwrap_or(usize::MAX);
            let n = chunk
                .len()
                .saturating_sub(from)
                .min(buf.len().saturating_sub(into));
            let (Some(src), Some(dst)) = (
                chunk.get(from..from.saturating_add(n)),
                buf.get_mut(into..into.saturating_add(n)),
            ) else {
                return Err(Missing {
                    offset: pos,
                    len: end - pos,
                });
            };
            dst.copy_from_slice(src);
            if n == 0 {
                return Err(Missing {
                    offset: pos,
                    len: end - pos,
                });
            }
            pos = pos.saturating_add(n as u64);
        }
        Ok(())
    }
}

impl BlockSource for Fetched {
    type Error = Missing;

    fn len(&self) -> u64 {
        self.size
    }

    fn read_at(&self, offset: u64, buf: &mut [u8]) -> Result<(), Missing> {
        self.copy(offset, buf)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_across_chunks_and_names_the_gap() {
        let mut f = Fetched::new(3 * FETCH_UNIT);
        f.insert(0, vec![1; 4096]);
        f.insert(4096, vec![2; 4096]);
        let mut buf = [0u8; 8];
        f.read_at(4092, &mut buf).unwrap();
        assert_eq!(buf, [1, 1, 1, 1, 2, 2, 2, 2]);
        let m = f.read_at(8190, &mut buf).unwrap_err();
        assert_eq!(
            m,
            Missing {
                offset: 8192,
                len: 6
            }
        );
        assert_eq!(f.range_for(m), (8192, 12288));
    }

    #[test]
    fn ranges_clamp_to_the_source() {
        let f = Fetched::new(5000);
        assert_eq!(
            f.range_for(Missing {
                offset: 4500,
                len: 8
            }),
            (4096, 5000)
        );
    }
}
