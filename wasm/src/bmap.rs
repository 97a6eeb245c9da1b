//! The `.bmap` of a built image, hashed from the very bytes the page offers for download.
//!
//! The same bmaptool 2.0 file as `blockwise build --bmap` writes (`crates/host/src/output.rs`:
//! 4 KiB blocks, the image map's mapped ranges, SHA-256 per range, the file's own checksum),
//! so `bmaptool copy` and `blockwise write` take either. The e2e test compares the two files
//! byte for byte. Hashing is driven from outside: [`BmapHasher::next`] names the next range
//! of the image to read (at most [`READ_CHUNK`] bytes, never across a mapped range), the
//! caller reads it from the image `Blob` and hands it to [`BmapHasher::feed`]; the front end
//! reads asynchronously and shows progress between chunks.

use blockwise_geometry::ImageMap;
use sha2::{Digest, Sha256};

/// The block size of the map.
pub const BMAP_BLOCK: u64 = 4096;
/// Most bytes asked for at once.
pub const READ_CHUNK: u64 = 4 << 20;

/// The image's mapped ranges as inclusive 4 KiB block ranges (what a `.bmap` lists).
#[must_use]
pub fn block_ranges(map: &ImageMap) -> Vec<(u64, u64)> {
    let mut ranges: Vec<(u64, u64)> = Vec::new();
    for (s, e) in map.mapped_ranges() {
        if e <= s {
            continue;
        }
        let (b0, b1) = (s / BMAP_BLOCK, e.div_ceil(BMAP_BLOCK).saturating_sub(1));
        match ranges.last_mut() {
            Some(last) if b0 <= last.1.saturating_add(1) => last.1 = last.1.max(b1),
            _ => ranges.push((b0, b1)),
        }
    }
    ranges
}

/// A bmaptool 2.0 block map: 4 KiB blocks, SHA-256 per range, the file's own checksum.
#[must_use]
pub fn bmap_text(size: u64, ranges: &[(u64, u64)], hashes: &[[u8; 32]]) -> String {
    use core::fmt::Write as _;
    let blocks = size.div_ceil(BMAP_BLOCK);
    let mut body = String::new();
    let mut mapped = 0u64;
    for ((b0, b1), h) in ranges.iter().zip(hashes) {
        mapped += b1 - b0 + 1;
        let r = if b0 == b1 {
            format!("{b0}")
        } else {
            format!("{b0}-{b1}")
        };
        let _ = writeln!(body, "        <Range chksum=\"{}\"> {r} </Range>", hex(h));
    }
    let zeros = "0".repeat(64);
    let text = format!(
        "<?xml version=\"1.0\" ?>\n<!-- written by blockwise -->\n<bmap version=\"2.0\">\n    <ImageSize> {size} </ImageSize>\n    <BlockSize> {BMAP_BLOCK} </BlockSize>\n    <BlocksCount> {blocks} </BlocksCount>\n    <MappedBlocksCount> {mapped} </MappedBlocksCount>\n    <ChecksumType> sha256 </ChecksumType>\n    <BmapFileChecksum> {zeros} </BmapFileChecksum>\n    <BlockMap>\n{body}    </BlockMap>\n</bmap>\n"
    );
    let digest = hex(&Sha256::digest(text.as_bytes()).into());
    text.replacen(&zeros, &digest, 1)
}

fn hex(h: &[u8; 32]) -> String {
    use core::fmt::Write as _;
    h.iter().fold(String::with_capacity(64), |mut s, b| {
        let _ = write!(s, "{b:02x}");
        s
    })
}

/// Hashes an image's mapped ranges from chunks read in order.
#[derive(Debug, Clone)]
pub struct BmapHasher {
    size: u64,
    ranges: Vec<(u64, u64)>,
    hashes: Vec<[u8; 32]>,
    /// The range being hashed.
    current: usize,
    /// Next byte expected.
    pos: u64,
    hasher: Sha256,
    done_bytes: u64,
    total_bytes: u64,
}

impl BmapHasher {
    /// A hasher for the image `map`.
    #[must_use]
    pub fn new(map: &ImageMap) -> Self {
        let size = map.size();
        let ranges = block_ranges(map);
        let total_bytes = ranges
            .iter()
            .map(|&(b0, b1)| Self::end_of(size, b1).saturating_sub(b0 * BMAP_BLOCK))
            .sum();
        let pos = ranges.first().map_or(0, |r| r.0 * BMAP_BLOCK);
        BmapHasher {
            size,
            ranges,
            hashes: Vec::new(),
            current: 0,
            pos,
            hasher: Sha256::new(),
            done_bytes: 0,
            total_bytes,
        }
    }

    fn end_of(size: u64, b1: u64) -> u64 {
        (b1 + 1).saturating_mul(BMAP_BLOCK).min(size)
    }

    /// The next `[start, end)` to read, `None` when every range is hashed.
    #[must_use]
    pub fn next(&self) -> Option<(u64, u64)> {
        let &(_, b1) = self.ranges.get(self.current)?;
        let end = Self::end_of(self.size, b1);
        Some((self.pos, end.min(self.pos.saturating_add(READ_CHUNK))))
    }

    /// Hashes the bytes of the range [`next`](Self::next) named. Anything else is refused.
    pub fn feed(&mut self, bytes: &[u8]) -> Result<(), String> {
        let Some((start, end)) = self.next() else {
            return Err("the .bmap is complete: nothing more to hash".into());
        };
        if bytes.len() as u64 != end - start {
            return Err(format!(
                "expected bytes {start}..{end} of the image ({} bytes), got {}",
                end - start,
                bytes.len()
            ));
        }
        self.hasher.update(bytes);
        self.done_bytes += end - start;
        self.pos = end;
        self.close_range_at(end);
        Ok(())
    }

    /// Hashes what the ranges still to hash have in `bytes`, the image's bytes at `offset`:
    /// spans come in order and cover every mapped byte (e.g. each mapped erase block once,
    /// read for an encoder too). A span that skips bytes still to hash is refused.
    pub fn feed_span(&mut self, offset: u64, bytes: &[u8]) -> Result<(), String> {
        let span_end = offset.saturating_add(bytes.len() as u64);
        while let Some((start, end)) = self.next() {
            if start >= span_end {
                break;
            }
            if start < offset {
                return Err(format!(
                    "bytes {start}..{offset} of the image were skipped (the span given starts at {offset})"
                ));
            }
            let end = end.min(span_end);
            let from = usize::try_from(start - offset).map_err(|e| e.to_string())?;
            let to = usize::try_from(end - offset).map_err(|e| e.to_string())?;
            let part = bytes.get(from..to).ok_or("span out of range")?;
            self.hasher.update(part);
            self.done_bytes += end - start;
            self.pos = end;
            self.close_range_at(end);
        }
        Ok(())
    }

    fn close_range_at(&mut self, end: u64) {
        if let Some(&(_, b1)) = self.ranges.get(self.current) {
            if end == Self::end_of(self.size, b1) {
                let h = core::mem::take(&mut self.hasher);
                self.hashes.push(h.finalize().into());
                self.current += 1;
                if let Some(&(b0, _)) = self.ranges.get(self.current) {
                    self.pos = b0 * BMAP_BLOCK;
                }
            }
        }
    }

    /// Bytes hashed so far.
    #[must_use]
    pub fn done_bytes(&self) -> u64 {
        self.done_bytes
    }

    /// Bytes to hash in all (the mapped ranges).
    #[must_use]
    pub fn total_bytes(&self) -> u64 {
        self.total_bytes
    }

    /// The `.bmap` text, once every range is hashed.
    pub fn text(&self) -> Result<String, String> {
        if self.current < self.ranges.len() {
            return Err(format!(
                "the .bmap is not complete: {} of {} ranges hashed",
                self.current,
                self.ranges.len()
            ));
        }
        Ok(bmap_text(self.size, &self.ranges, &self.hashes))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use blockwise_geometry::{BlockSink as _, BlockSource as _, ContentRef};

    #[test]
    fn hashes_what_it_is_fed_range_by_range() {
        let files: Vec<Vec<u8>> = vec![vec![5u8; 10_000]];
        let mut map = ImageMap::new(64 << 20);
        map.write_at(0, &[1; 512]).unwrap();
        map.write_at(8 << 20, &[2; 100]).unwrap();
        let r = ContentRef {
            content: 0,
            offset: 0,
            len: 10_000,
        };
        map.write_content((8 << 20) + 4096, r, &files).unwrap();
        assert_eq!(block_ranges(&map), vec![(0, 0), (2048, 2051)]);
        let mut h = BmapHasher::new(&map);
        assert_eq!(h.total_bytes(), 4096 + 4 * 4096);
        let reader = map.reader(&files);
        while let Some((s, e)) = h.next() {
            let mut buf = vec![0u8; usize::try_from(e - s).unwrap()];
            reader.read_at(s, &mut buf).unwrap();
            h.feed(&buf).unwrap();
        }
        assert_eq!(h.done_bytes(), h.total_bytes());
        let text = h.text().unwrap();
        assert!(
            text.contains("<MappedBlocksCount> 5 </MappedBlocksCount>"),
            "{text}"
        );
        assert!(text.contains("> 2048-2051 </Range>"), "{text}");
        // The first range is one block: 512 ones then zeros.
        let mut block = vec![0u8; 4096];
        block[..512].fill(1);
        let want = hex(&Sha256::digest(&block).into());
        assert!(
            text.contains(&format!("chksum=\"{want}\"> 0 </Range>")),
            "{text}"
        );
        assert!(h.clone().feed(&[0]).is_err());
    }

    /// Fed by erase-block spans (as the page does while encoding the `.simg`), the text
    /// is the one range-by-range feeding gives; a span past unhashed bytes is refused.
    #[test]
    fn spans_give_the_same_text() {
        let files: Vec<Vec<u8>> = Vec::new();
        let mut map = ImageMap::new(16 << 20);
        map.write_at(4096, &[1; 10_000]).unwrap();
        map.write_at((4 << 20) - 4096, &[2; 9000]).unwrap();
        map.write_at(12 << 20, &[3; 5]).unwrap();
        let reader = map.reader(&files);
        let mut a = BmapHasher::new(&map);
        while let Some((s, e)) = a.next() {
            let mut buf = vec![0u8; usize::try_from(e - s).unwrap()];
            reader.read_at(s, &mut buf).unwrap();
            a.feed(&buf).unwrap();
        }
        let mut b = BmapHasher::new(&map);
        for w in [0u64, 4 << 20, 12 << 20] {
            let mut buf = vec![0u8; 4 << 20];
            reader.read_at(w, &mut buf).unwrap();
            b.feed_span(w, &buf).unwrap();
        }
        assert_eq!(a.text().unwrap(), b.text().unwrap());
        let mut c = BmapHasher::new(&map);
        assert!(c.feed_span(4 << 20, &[0; 4096]).is_err());
    }

    #[test]
    fn refuses_a_chunk_of_the_wrong_length_and_an_early_text() {
        let mut map = ImageMap::new(1 << 20);
        map.write_at(0, &[1; 8192]).unwrap();
        let mut h = BmapHasher::new(&map);
        assert!(h.feed(&[0; 10]).is_err());
        assert!(h.text().is_err());
        h.feed(&[1; 8192]).unwrap();
        assert!(h.next().is_none());
        assert!(h.text().is_ok());
    }
}
