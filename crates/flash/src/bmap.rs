//! bmaptool 2.0 block maps: parsed as hostile input, file checksum checked, range checksums
//! checked while the bytes stream through [`Checked`].

use sha2::{Digest as _, Sha256};

use crate::source::{Source, Verify};
use crate::SourceError;

/// The most ranges a bmap may have (bmaptool writes one per extent; this is generous).
const MAX_RANGES: usize = 1 << 20;
/// The largest bmap file read.
pub const MAX_BMAP_BYTES: u64 = 64 << 20;

/// A bmap file could not be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum BmapError {
    /// A required element is missing or not a number.
    #[error("bmap: <{0}> is missing or not a number")]
    Field(&'static str),
    /// Version other than 1.4 / 2.x.
    #[error("bmap: version {0} is not supported (1.4 or 2.x with sha256)")]
    Version(String),
    /// Checksum type other than sha256.
    #[error("bmap: checksum type {0} is not supported (sha256)")]
    ChecksumType(String),
    /// The file checksum does not match.
    #[error("bmap: the file checksum does not match (edited or damaged bmap)")]
    FileChecksum,
    /// BlocksCount is inconsistent with ImageSize/BlockSize.
    #[error("bmap: inconsistent BlocksCount, ImageSize and BlockSize")]
    Inconsistent,
    /// A range is malformed, unsorted, overlapping or past the end.
    #[error("bmap: bad range {0:?}")]
    Range(String),
    /// Too many ranges.
    #[error("bmap: more than {MAX_RANGES} ranges")]
    TooManyRanges,
}

/// One mapped range: blocks `first..=last` and the sha256 of their bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BmapRange {
    /// First block.
    pub first: u64,
    /// Last block (inclusive).
    pub last: u64,
    /// sha256 of the range's bytes (truncated at the image size).
    pub sha256: [u8; 32],
}

/// A parsed bmap.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Bmap {
    /// Image size in bytes.
    pub image_size: u64,
    /// Block size in bytes.
    pub block_size: u64,
    /// The mapped ranges, sorted, not overlapping.
    pub ranges: Vec<BmapRange>,
}

fn element<'a>(text: &'a str, tag: &'static str) -> Option<&'a str> {
    let open = format!("<{tag}>");
    let close = format!("</{tag}>");
    let s = text.find(&open)?.checked_add(open.len())?;
    let len = text.get(s..)?.find(&close)?;
    text.get(s..s.checked_add(len)?).map(str::trim)
}

fn number(text: &str, tag: &'static str) -> Result<u64, BmapError> {
    element(text, tag)
        .and_then(|v| v.parse().ok())
        .ok_or(BmapError::Field(tag))
}

fn hex32(s: &str) -> Option<[u8; 32]> {
    let s = s.as_bytes();
    if s.len() != 64 {
        return None;
    }
    let mut out = [0u8; 32];
    for (o, pair) in out.iter_mut().zip(s.chunks_exact(2)) {
        let txt = std::str::from_utf8(pair).ok()?;
        *o = u8::from_str_radix(txt, 16).ok()?;
    }
    Some(out)
}

/// `text` without its XML comments: bmaptool's own header comment names the elements
/// (`<MappedBlocksCount> blocks instead of <BlocksCount> blocks`), which a search for an
/// element must not find. An unterminated comment runs to the end.
fn strip_comments(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(open) = rest.find("<!--") {
        out.push_str(rest.get(..open).unwrap_or_default());
        let after = rest.get(open.saturating_add(4)..).unwrap_or_default();
        rest = match after.find("-->") {
            Some(close) => after.get(close.saturating_add(3)..).unwrap_or_default(),
            None => "",
        };
    }
    out.push_str(rest);
    out
}

impl Bmap {
    /// Parses a bmaptool 1.4/2.0 file, checking the file checksum and every range.
    pub fn parse(raw: &str) -> Result<Bmap, BmapError> {
        let stripped = strip_comments(raw);
        let text = stripped.as_str();
        let version = text
            .find("<bmap version=\"")
            .and_then(|i| text.get(i.checked_add(15)?..))
            .and_then(|r| r.split('"').next())
            .ok_or(BmapError::Field("bmap version"))?;
        let major = version.split('.').next().unwrap_or("");
        if !(major == "2" || version == "1.4") {
            return Err(BmapError::Version(version.to_string()));
        }
        let ctype = element(text, "ChecksumType").ok_or(BmapError::Field("ChecksumType"))?;
        if ctype != "sha256" {
            return Err(BmapError::ChecksumType(ctype.to_string()));
        }
        let file_sum = element(text, "BmapFileChecksum")
            .and_then(hex32)
            .ok_or(BmapError::Field("BmapFileChecksum"))?;
        let hex = element(text, "BmapFileChecksum").unwrap_or("");
        // The checksum covers the file as written, comments included.
        let zeroed = raw.replacen(hex, &"0".repeat(hex.len()), 1);
        if Sha256::digest(zeroed.as_bytes()).as_slice() != file_sum {
            return Err(BmapError::FileChecksum);
        }
        let image_size = number(text, "ImageSize")?;
        let block_size = number(text, "BlockSize")?;
        let blocks = number(text, "BlocksCount")?;
        if block_size == 0 || block_size % 512 != 0 || image_size.div_ceil(block_size) != blocks {
            return Err(BmapError::Inconsistent);
        }
        let map = element(text, "BlockMap").ok_or(BmapError::Field("BlockMap"))?;
        let mut ranges: Vec<BmapRange> = Vec::new();
        for part in map.split("</Range>") {
            let Some(start) = part.find("<Range") else {
                continue;
            };
            let item = part.get(start..).unwrap_or("");
            if ranges.len() >= MAX_RANGES {
                return Err(BmapError::TooManyRanges);
            }
            let bad = || BmapError::Range(item.trim().chars().take(120).collect());
            let (head, body) = item.split_once('>').ok_or_else(bad)?;
            let sum = head
                .split_once("chksum=\"")
                .and_then(|(_, r)| r.split('"').next())
                .and_then(hex32)
                .ok_or_else(bad)?;
            let body = body.trim();
            let (first, last) = match body.split_once('-') {
                Some((a, b)) => (a.trim().parse().ok(), b.trim().parse().ok()),
                None => (body.parse().ok(), body.parse().ok()),
            };
            let (Some(first), Some(last)) = (first, last) else {
                return Err(bad());
            };
            let after_prev = ranges.last().is_none_or(|p| first > p.last);
            if first > last || last >= blocks || !after_prev {
                return Err(bad());
            }
            ranges.push(BmapRange {
                first,
                last,
                sha256: sum,
            });
        }
        Ok(Bmap {
            image_size,
            block_size,
            ranges,
        })
    }

    /// The mapped byte ranges `[start, end)`, clamped to the image size.
    #[must_use]
    pub fn byte_ranges(&self) -> Vec<(u64, u64)> {
        self.ranges.iter().map(|r| self.byte_range(r)).collect()
    }

    fn byte_range(&self, r: &BmapRange) -> (u64, u64) {
        let s = r.first.saturating_mul(self.block_size).min(self.image_size);
        let e = r
            .last
            .saturating_add(1)
            .saturating_mul(self.block_size)
            .min(self.image_size);
        (s, e)
    }
}

/// A bmap's range checksums, checked over bytes fed in ascending offsets (each range from its
/// start to its end, in one or more pieces): what [`Checked`] runs. The writer takes it out of
/// the source ([`Source::take_verifier`]) and runs it on a thread of its own, so hashing is
/// never on the write path.
#[derive(Debug)]
pub struct RangeCheck {
    bmap: Bmap,
    next: usize,
    hasher: Sha256,
    hashed_to: u64,
}

impl RangeCheck {
    /// Checks the ranges of `bmap`.
    #[must_use]
    pub fn new(bmap: Bmap) -> Self {
        RangeCheck {
            bmap,
            next: 0,
            hasher: Sha256::new(),
            hashed_to: 0,
        }
    }

    fn feed(&mut self, offset: u64, data: &[u8]) -> Result<(), SourceError> {
        let end = offset.saturating_add(data.len() as u64);
        while let Some(r) = self.bmap.ranges.get(self.next) {
            let (rs, re) = self.bmap.byte_range(r);
            let from = rs.max(offset).max(self.hashed_to);
            let to = re.min(end);
            if from < to {
                if from != rs.max(self.hashed_to) {
                    // A gap in this range: the bytes were not read in order.
                    return Err(SourceError::Checksum {
                        first: r.first,
                        last: r.last,
                    });
                }
                let a = usize::try_from(from - offset).unwrap_or(usize::MAX);
                let b = usize::try_from(to - offset).unwrap_or(usize::MAX);
                self.hasher.update(data.get(a..b).unwrap_or_default());
                self.hashed_to = to;
            }
            if self.hashed_to >= re {
                let sum = std::mem::take(&mut self.hasher).finalize();
                if sum.as_slice() != r.sha256 {
                    return Err(SourceError::Checksum {
                        first: r.first,
                        last: r.last,
                    });
                }
                self.next += 1;
                continue;
            }
            break;
        }
        Ok(())
    }
}

impl Verify for RangeCheck {
    fn update(&mut self, offset: u64, data: &[u8]) -> Result<(), SourceError> {
        self.feed(offset, data)
    }
    /// Every range must have been fed whole and matched: a range never read is an error too.
    fn finish(&mut self) -> Result<(), SourceError> {
        match self.bmap.ranges.get(self.next) {
            Some(r) => Err(SourceError::Checksum {
                first: r.first,
                last: r.last,
            }),
            None => Ok(()),
        }
    }
}

/// A [`Source`] whose bytes are checked against a bmap's range checksums (reads must come in
/// ascending order and cover each range, as the writer's do). It checks them as they are read,
/// unless the reader takes the check to run it elsewhere ([`Source::take_verifier`]: the
/// writer does, and hashes on a thread of its own).
pub struct Checked<S> {
    inner: S,
    ranges: Vec<(u64, u64)>,
    image_size: u64,
    check: Option<RangeCheck>,
}

impl<S: Source> Checked<S> {
    /// Wraps `inner`; its mapped ranges become the bmap's.
    pub fn new(inner: S, bmap: Bmap) -> Self {
        Checked {
            inner,
            ranges: bmap.byte_ranges(),
            image_size: bmap.image_size,
            check: Some(RangeCheck::new(bmap)),
        }
    }
}

impl<S: Source> Source for Checked<S> {
    fn size(&self) -> Option<u64> {
        Some(self.image_size)
    }
    /// The block map says what is free.
    fn holes_are_free(&self) -> bool {
        true
    }
    fn ranges(&self) -> Option<Vec<(u64, u64)>> {
        Some(self.ranges.clone())
    }
    fn read(&mut self, offset: u64, buf: &mut [u8]) -> Result<usize, SourceError> {
        let n = self.inner.read(offset, buf)?;
        if let Some(c) = &mut self.check {
            c.feed(offset, buf.get(..n).unwrap_or_default())?;
        }
        Ok(n)
    }
    fn take_verifier(&mut self) -> Option<Box<dyn Verify>> {
        self.check.take().map(|c| Box::new(c) as Box<dyn Verify>)
    }
}

/// Writes a bmap for `data` with `block_size`-byte blocks mapping `ranges` (byte ranges,
/// block-aligned): a test helper that shares the format, not the code, of host's writer.
#[must_use]
pub fn bmap_text_for(data: &[u8], block_size: u64, ranges: &[(u64, u64)]) -> String {
    let size = data.len() as u64;
    let mut body = String::new();
    let mut mapped = 0;
    for &(s, e) in ranges {
        let (first, last) = (s / block_size, e.div_ceil(block_size) - 1);
        mapped += last - first + 1;
        let bytes = data
            .get(usize::try_from(s).unwrap_or(0)..usize::try_from(e.min(size)).unwrap_or(0))
            .unwrap_or_default();
        let sum: String = Sha256::digest(bytes)
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        let span = if first == last {
            format!("{first}")
        } else {
            format!("{first}-{last}")
        };
        body.push_str(&format!("    <Range chksum=\"{sum}\"> {span} </Range>\n"));
    }
    let text = format!(
        "<?xml version=\"1.0\" ?>\n<bmap version=\"2.0\">\n    <ImageSize> {size} </ImageSize>\n    <BlockSize> {block_size} </BlockSize>\n    <BlocksCount> {} </BlocksCount>\n    <MappedBlocksCount> {mapped} </MappedBlocksCount>\n    <ChecksumType> sha256 </ChecksumType>\n    <BmapFileChecksum> {} </BmapFileChecksum>\n    <BlockMap>\n{body}    </BlockMap>\n</bmap>\n",
        size.div_ceil(block_size),
        "0".repeat(64)
    );
    let sum: String = Sha256::digest(text.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    text.replacen(&"0".repeat(64), &sum, 1)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::source::MemSource;

    fn sample() -> (Vec<u8>, String) {
        let mut data = vec![0u8; 40960];
        for (i, b) in data.iter_mut().enumerate() {
            *b = (i % 251) as u8;
        }
        let text = bmap_text_for(&data, 4096, &[(0, 8192), (16384, 20480), (36864, 40960)]);
        (data, text)
    }

    #[test]
    fn parses_and_maps() {
        let (_, text) = sample();
        let b = Bmap::parse(&text).unwrap();
        assert_eq!(b.image_size, 40960);
        assert_eq!(b.byte_ranges(), [(0, 8192), (16384, 20480), (36864, 40960)]);
    }

    /// bmaptool's header comment names `<BlocksCount>` before the element: comments are not
    /// searched, but the file checksum covers them.
    #[test]
    fn comments_naming_elements_are_skipped() {
        let data = vec![1u8; 8192];
        let plain = bmap_text_for(&data, 4096, &[(0, 8192)]);
        let commented = plain.replace(
                "<bmap version=\"2.0\">",
                "<!-- <MappedBlocksCount> blocks instead of\n <BlocksCount> blocks. -->\n<bmap version=\"2.0\">\n    <!-- Image size: <ImageSize> x -->",
            );
        // Re-sign the edited text as bmaptool would.
        let hex = element(&commented, "BmapFileChecksum").unwrap().to_string();
        let zeroed = commented.replacen(&hex, &"0".repeat(64), 1);
        let sum: String = Sha256::digest(zeroed.as_bytes())
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        let signed = zeroed.replacen(&"0".repeat(64), &sum, 1);
        let b = Bmap::parse(&signed).unwrap();
        assert_eq!((b.image_size, b.byte_ranges()), (8192, vec![(0, 8192)]));
        assert_eq!(strip_comments("a<!--b-->c<!--d"), "ac");
    }

    #[test]
    fn rejects_edits_and_hostile_ranges() {
        let (_, text) = sample();
        let edited = text.replace("> 4 <", "> 5 <");
        assert_eq!(Bmap::parse(&edited), Err(BmapError::FileChecksum));
        let data = vec![0u8; 8192];
        for bad in [
            bmap_text_for(&data, 4096, &[(4096, 8192), (0, 4096)]),
            bmap_text_for(&data, 4096, &[(0, 12288)]),
        ] {
            assert!(
                matches!(Bmap::parse(&bad), Err(BmapError::Range(_))),
                "{bad}"
            );
        }
        assert!(matches!(
            Bmap::parse(&text.replace("version=\"2.0\"", "version=\"3.0\"")),
            Err(BmapError::Version(_))
        ));
    }

    #[test]
    fn checked_source_catches_a_changed_byte() {
        let (mut data, text) = sample();
        let bmap = Bmap::parse(&text).unwrap();
        let read_all = |data: Vec<u8>| -> Result<(), SourceError> {
            let mut c = Checked::new(MemSource::new(data), bmap.clone());
            let mut buf = vec![0u8; 4096];
            for (s, e) in c.ranges().unwrap() {
                let mut o = s;
                while o < e {
                    c.read(o, &mut buf)?;
                    o += 4096;
                }
            }
            Ok(())
        };
        read_all(data.clone()).unwrap();
        // Taken out of the source, the check runs over what it is fed; a range never fed
        // fails `finish`.
        let mut c = Checked::new(MemSource::new(data.clone()), bmap.clone());
        let mut v = c.take_verifier().unwrap();
        assert!(c.take_verifier().is_none());
        v.update(0, &data[..20480]).unwrap();
        assert!(matches!(
            v.finish(),
            Err(SourceError::Checksum { first: 9, last: 9 })
        ));
        v.update(36864, &data[36864..]).unwrap();
        v.finish().unwrap();
        data[17000] ^= 1;
        assert!(matches!(
            read_all(data),
            Err(SourceError::Checksum { first: 4, last: 4 })
        ));
    }
}
