//! A built image encoded as the CLI's `-o x.simg` / `-o x.img.zst` would encode it, by the
//! same code (`blockwise_container::encode`: windows of one erase block, the same chunking
//! and framing), driven from outside one window at a time so the front end reads the image
//! `Blob` asynchronously and shows progress.
//!
//! For Android sparse, a RAW chunk's data is the image's own bytes: [`ImageEncoder::pack`]
//! names it as a range of the image ([`OutPiece::Image`]) instead of copying it, so the
//! page composes the `.simg` `Blob` from chunk headers and slices of the image `Blob` — no
//! second copy of the content. (Seekable zstd needs a compressor: `Format::available`
//! says whether this build has one; the page links libzstd for squashfs but does not turn
//! on `blockwise-container`'s `zstd` feature, see `docs/browser.md`.)

use blockwise_container::encode::{EncodeOptions, Encoder, Format, Packer, Summary, Window};
use blockwise_geometry::ImageMap;

use crate::api::Failure;

/// A piece of an encoded output, in order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum OutPiece {
    /// Bytes made by the encoder (headers, fill values, compressed frames).
    Bytes(Vec<u8>),
    /// The image's own bytes `[start, end)` (the data of a RAW chunk).
    Image(u64, u64),
}

/// One encoding of a built image, window by window.
#[derive(Debug)]
pub struct ImageEncoder {
    enc: Option<Encoder>,
    packer: Packer,
    windows: Vec<Window>,
    next: usize,
    format: Format,
    block: u64,
    finished: Option<(Vec<u8>, Vec<u8>, Summary)>,
}

fn failure(e: blockwise_container::encode::EncodeError) -> Failure {
    use blockwise_container::encode::EncodeError;
    match e {
        EncodeError::Unsupported { .. } | EncodeError::InvalidOptions { .. } => {
            Failure::unsupported(e.to_string())
        }
        other => Failure::internal(other.to_string()),
    }
}

impl ImageEncoder {
    /// An encoder of `map` as `format`, with the plan's erase block and sector (what the
    /// CLI passes: `blockwise_host::write_output`).
    pub fn new(
        map: &ImageMap,
        format: Format,
        erase_block_bytes: u64,
        sector_bytes: u64,
    ) -> Result<Self, Failure> {
        let opts = EncodeOptions {
            format,
            erase_block_bytes,
            sector_bytes,
            level: None,
        };
        let enc = Encoder::new(map.size(), &opts).map_err(failure)?;
        let packer = enc.packer().map_err(failure)?;
        let mapped = map.mapped_ranges();
        let windows: Vec<Window> = enc.windows(&mapped).collect();
        let block = enc.block_bytes();
        Ok(ImageEncoder {
            enc: Some(enc),
            packer,
            windows,
            next: 0,
            format,
            block,
            finished: None,
        })
    }

    /// The bytes the output starts with, as the encoding begins (Android sparse: a header
    /// whose chunk count [`ImageEncoder::finish`] gives; the same length).
    #[must_use]
    pub fn header(&self) -> Vec<u8> {
        self.enc.as_ref().map(Encoder::header).unwrap_or_default()
    }

    /// The next window to read and [`pack`](Self::pack): `(offset, end, mapped)`; an
    /// unmapped window need not be read (pack it with no bytes).
    #[must_use]
    pub fn next_window(&self) -> Option<(u64, u64, bool)> {
        self.windows
            .get(self.next)
            .map(|w| (w.offset, w.end(), !w.is_unmapped()))
    }

    /// Bytes of the image in mapped windows (what will be read), and of those done.
    #[must_use]
    pub fn progress(&self) -> (u64, u64) {
        let total = self
            .windows
            .iter()
            .filter(|w| !w.is_unmapped())
            .map(|w| w.len)
            .sum();
        let done = self
            .windows
            .iter()
            .take(self.next)
            .filter(|w| !w.is_unmapped())
            .map(|w| w.len)
            .sum();
        (done, total)
    }

    /// Encodes the window [`next_window`](Self::next_window) named, whose bytes are `data`
    /// (the whole window as the image holds it; empty for an unmapped window).
    pub fn pack(&mut self, data: &[u8]) -> Result<Vec<OutPiece>, Failure> {
        let w = self
            .windows
            .get(self.next)
            .ok_or_else(|| Failure::internal("every window is encoded already"))?;
        let enc = self
            .enc
            .as_mut()
            .ok_or_else(|| Failure::internal("the encoding is finished"))?;
        let p = self.packer.pack(w, data).map_err(failure)?;
        enc.add(w, &p).map_err(failure)?;
        let pieces = if self.format == Format::AndroidSparse {
            split_raw(p.bytes(), w.offset, self.block)?
        } else {
            vec![OutPiece::Bytes(p.bytes().to_vec())]
        };
        self.next += 1;
        Ok(pieces)
    }

    /// Ends the encoding: `(header to write over the start, trailer to append, summary)`.
    pub fn finish(&mut self) -> Result<(Vec<u8>, Vec<u8>, Summary), Failure> {
        if let Some(f) = &self.finished {
            return Ok(f.clone());
        }
        let enc = self
            .enc
            .take()
            .ok_or_else(|| Failure::internal("the encoding is finished"))?;
        let f = enc.finish().map_err(failure)?;
        let out = (f.header, f.trailer, f.summary);
        self.finished = Some(out.clone());
        Ok(out)
    }
}

fn u16_at(b: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_le_bytes(
        b.get(at..at.checked_add(2)?)?.try_into().ok()?,
    ))
}

fn u32_at(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_le_bytes(
        b.get(at..at.checked_add(4)?)?.try_into().ok()?,
    ))
}

/// Android sparse chunks of the window at `offset`: each RAW chunk's data becomes a range of
/// the image; headers and fill values stay bytes.
fn split_raw(bytes: &[u8], offset: u64, block: u64) -> Result<Vec<OutPiece>, Failure> {
    const RAW: u16 = 0xCAC1;
    let bad =
        || Failure::internal("the Android sparse packer wrote a chunk this page cannot split");
    let mut out = Vec::new();
    let mut at = 0usize;
    let mut pos = offset;
    let mut pending: Vec<u8> = Vec::new();
    while at < bytes.len() {
        let kind = u16_at(bytes, at).ok_or_else(bad)?;
        let blocks = u64::from(u32_at(bytes, at + 4).ok_or_else(bad)?);
        let total = usize::try_from(u32_at(bytes, at + 8).ok_or_else(bad)?).map_err(|_| bad())?;
        let chunk = bytes
            .get(at..at.checked_add(total).ok_or_else(bad)?)
            .ok_or_else(bad)?;
        let len = blocks.checked_mul(block).ok_or_else(bad)?;
        if kind == RAW {
            let (head, data) = chunk.split_at_checked(12).ok_or_else(bad)?;
            if data.len() as u64 != len {
                return Err(bad());
            }
            pending.extend_from_slice(head);
            out.push(OutPiece::Bytes(core::mem::take(&mut pending)));
            out.push(OutPiece::Image(pos, pos + len));
        } else {
            pending.extend_from_slice(chunk);
        }
        pos = pos.checked_add(len).ok_or_else(bad)?;
        at += total;
    }
    if !pending.is_empty() {
        out.push(OutPiece::Bytes(pending));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use blockwise_geometry::{BlockSink as _, BlockSource as _};

    /// The pieces, with each image range filled from the image, are byte for byte what
    /// `encode_map` (the CLI's single-threaded path) writes.
    #[test]
    fn simg_pieces_equal_encode_map() {
        let files: Vec<Vec<u8>> = Vec::new();
        let mut map = ImageMap::new(24 << 20);
        map.write_at(0, &[0xAB; 512]).unwrap();
        map.write_at(4096 * 3, &[7; 3 * 4096]).unwrap();
        map.write_at(5 << 20, &[0; 8192]).unwrap();
        let data: Vec<u8> = (0..300_000u32).map(|i| (i % 251) as u8).collect();
        map.write_at((9 << 20) + 4096, &data).unwrap();
        let mut want = Vec::new();
        let opts = EncodeOptions::new(Format::AndroidSparse, 4 << 20);
        blockwise_container::encode::encode_map(&map, &files, &opts, &mut want).unwrap();
        let mut e = ImageEncoder::new(&map, Format::AndroidSparse, 4 << 20, 512).unwrap();
        let mut got = e.header();
        let reader = map.reader(&files);
        while let Some((s, end, mapped)) = e.next_window() {
            let mut buf = Vec::new();
            if mapped {
                buf = vec![0u8; (end - s) as usize];
                reader.read_at(s, &mut buf).unwrap();
            }
            for p in e.pack(&buf).unwrap() {
                match p {
                    OutPiece::Bytes(b) => got.extend_from_slice(&b),
                    OutPiece::Image(a, b) => {
                        let mut d = vec![0u8; (b - a) as usize];
                        reader.read_at(a, &mut d).unwrap();
                        got.extend_from_slice(&d);
                    }
                }
            }
        }
        let (head, trailer, summary) = e.finish().unwrap();
        got.extend_from_slice(&trailer);
        got[..head.len()].copy_from_slice(&head);
        assert_eq!(got, want);
        assert!(summary.data_bytes > 0 && summary.dont_care_bytes > 0);
        assert_eq!(e.progress().0, e.progress().1);
    }

    /// Seekable zstd is offered only by a build with a compressor (the host tests link
    /// libzstd through blockwise-host; the page's build does not turn it on).
    #[test]
    fn zstd_only_with_a_compressor() {
        let map = ImageMap::new(8 << 20);
        let r = ImageEncoder::new(&map, Format::SeekableZstd, 4 << 20, 512);
        match r {
            Ok(_) => assert!(Format::SeekableZstd.available()),
            Err(e) => {
                assert!(!Format::SeekableZstd.available());
                assert_eq!(e.category, crate::api::Category::Unsupported);
                assert!(e.message.contains("libzstd"), "{}", e.message);
            }
        }
    }
}
