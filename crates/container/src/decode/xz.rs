//! xz files read from the end: stream footers, indexes and headers give every block's place
//! and size without decoding, so one block can be decoded alone. A block is re-framed as a
//! stream of its own (the original stream header, the block as it is, a one-record index and
//! a footer), which any xz decoder reads, checks included.
//!
//! ```text
//! stream: header (FD 37 7A 58 5A 00, flags, CRC32) | blocks | index | footer (CRC32,
//!         backward size, flags, "YZ") | stream padding (zeros, multiple of 4) | next stream
//! index:  00 | count | (unpadded size, uncompressed size)* | padding | CRC32   (sizes: VLI)
//! ```

use std::rc::Rc;

use blockwise_geometry::BlockSource;

use super::input::{Input, Segment};
use super::{Codec, Frame, Piece};
use crate::Error;

const FORMAT: &str = "xz";
const HEADER_MAGIC: [u8; 6] = [0xfd, b'7', b'z', b'X', b'Z', 0];
/// Largest index read (16 bytes or less per block: a million blocks).
pub const MAX_INDEX: u64 = 16 << 20;
/// Most stream padding skipped between streams.
const MAX_PADDING: u64 = 1 << 20;

fn corrupt(r: impl Into<String>) -> Error {
    Error::corrupt(FORMAT, r)
}

/// Reads a variable-length integer (xz spec 1.2) from `b` at `*at`.
fn vli(b: &[u8], at: &mut usize) -> Result<u64, Error> {
    let mut v = 0u64;
    for i in 0..9u32 {
        let byte = *b
            .get(*at)
            .ok_or_else(|| corrupt("the index is cut short"))?;
        *at = at.saturating_add(1);
        v |= u64::from(byte & 0x7f)
            .checked_shl(i.saturating_mul(7))
            .unwrap_or(0);
        if byte & 0x80 == 0 {
            if i > 0 && byte == 0 {
                return Err(corrupt("a number in the index is not in its shortest form"));
            }
            return Ok(v);
        }
    }
    Err(corrupt("a number in the index is longer than 9 bytes"))
}

fn put_vli(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push(u8::try_from(v & 0x7f).unwrap_or(0) | 0x80);
        v >>= 7;
    }
    out.push(u8::try_from(v).unwrap_or(0));
}

fn check_size(flags: [u8; 2]) -> u64 {
    match flags[1] & 0x0f {
        0 => 0,
        t => 4u64 << ((t.saturating_sub(1)) / 3),
    }
}

fn round4(v: u64) -> Option<u64> {
    v.checked_add(3).map(|x| x & !3)
}

/// The index and footer that follow one block re-framed as a stream.
fn trailer(flags: [u8; 2], unpadded: u64, uncompressed: u64) -> Vec<u8> {
    let mut idx = vec![0u8];
    put_vli(&mut idx, 1);
    put_vli(&mut idx, unpadded);
    put_vli(&mut idx, uncompressed);
    while idx.len() % 4 != 0 {
        idx.push(0);
    }
    let crc = crc32fast::hash(&idx);
    idx.extend(crc.to_le_bytes());
    let backward = u32::try_from(idx.len() / 4).unwrap_or(1).saturating_sub(1);
    let mut foot = backward.to_le_bytes().to_vec();
    foot.extend(flags);
    let mut out = idx;
    out.extend(crc32fast::hash(&foot).to_le_bytes());
    out.extend(foot);
    out.extend(b"YZ");
    out
}

/// One stream's blocks: `(offset in the file, bytes on disk, unpadded, uncompressed)`.
type Blocks = Vec<(u64, u64, u64, u64)>;

/// Reads the stream that ends at `end` (after its footer): its header bytes and blocks,
/// and where it starts.
fn stream_before<I: BlockSource>(
    input: &Input<I>,
    end: u64,
) -> Result<([u8; 12], Blocks, u64), Error> {
    let foot_at = end
        .checked_sub(12)
        .ok_or_else(|| corrupt("the file is too short for a stream footer"))?;
    let foot: [u8; 12] = input.array(foot_at, FORMAT, "stream footer")?;
    let [c0, c1, c2, c3, b0, b1, b2, b3, f0, f1, y, z] = foot;
    if [y, z] != *b"YZ" {
        return Err(corrupt(format!(
            "no stream footer at byte {foot_at} (the file is cut short, or has bytes after the last stream)"
        )));
    }
    if crc32fast::hash(&[b0, b1, b2, b3, f0, f1]) != u32::from_le_bytes([c0, c1, c2, c3]) {
        return Err(corrupt(format!(
            "stream footer CRC32 at byte {foot_at} does not match"
        )));
    }
    let flags = [f0, f1];
    let backward = u64::from(u32::from_le_bytes([b0, b1, b2, b3]))
        .saturating_add(1)
        .saturating_mul(4);
    if backward > MAX_INDEX {
        return Err(Error::Limit {
            what: format!(
                "{FORMAT}: an index of {backward} bytes; blockwise reads at most {MAX_INDEX}"
            ),
        });
    }
    let index_at = foot_at
        .checked_sub(backward)
        .ok_or_else(|| corrupt("the index is larger than the file"))?;
    let index = input.read_clamped(index_at, usize::try_from(backward).unwrap_or(0))?;
    let (body, crc) = index.split_at(index.len().saturating_sub(4));
    let crc: [u8; 4] = crc.try_into().unwrap_or([0; 4]);
    if crc32fast::hash(body) != u32::from_le_bytes(crc) {
        return Err(corrupt(format!(
            "index CRC32 at byte {index_at} does not match"
        )));
    }
    if body.first() != Some(&0) {
        return Err(corrupt("the index does not start with its indicator byte"));
    }
    let mut at = 1usize;
    let count = vli(body, &mut at)?;
    // Each record takes at least two bytes.
    if count > u64::try_from(body.len()).unwrap_or(0) / 2 {
        return Err(corrupt(format!(
            "the index claims {count} blocks in {backward} bytes"
        )));
    }
    let mut records = Vec::with_capacity(usize::try_from(count).unwrap_or(0));
    let mut total = 0u64;
    let check = check_size(flags);
    for _ in 0..count {
        let unpadded = vli(body, &mut at)?;
        let uncompressed = vli(body, &mut at)?;
        // A block header is at least 8 bytes, and data at least 1.
        if unpadded < check.saturating_add(9) {
            return Err(corrupt(format!("a block of {unpadded} bytes is too small")));
        }
        let disk = round4(unpadded).ok_or_else(|| corrupt("block size overflows"))?;
        records.push((disk, unpadded, uncompressed));
        total = total
            .checked_add(disk)
            .ok_or_else(|| corrupt("block sizes overflow"))?;
    }
    if body
        .get(at..)
        .is_none_or(|pad| pad.len() >= 4 || pad.iter().any(|&b| b != 0))
    {
        return Err(corrupt("the index has bytes after its records"));
    }
    let start = index_at
        .checked_sub(total)
        .and_then(|s| s.checked_sub(12))
        .ok_or_else(|| corrupt("the blocks of the index do not fit in the file"))?;
    let header: [u8; 12] = input.array(start, FORMAT, "stream header")?;
    if header.get(..6) != Some(&HEADER_MAGIC[..])
        || header.get(6..8) != Some(&flags[..])
        || header
            .get(8..12)
            .and_then(|c| <[u8; 4]>::try_from(c).ok())
            .map(u32::from_le_bytes)
            != Some(crc32fast::hash(&flags))
    {
        return Err(corrupt(format!(
            "no matching stream header at byte {start} (the index does not describe the blocks before it)"
        )));
    }
    let mut blocks = Vec::with_capacity(records.len());
    let mut pos = start.saturating_add(12);
    for (disk, unpadded, uncompressed) in records {
        blocks.push((pos, disk, unpadded, uncompressed));
        pos = pos.saturating_add(disk);
    }
    Ok((header, blocks, start))
}

/// Every block of every stream of an xz file as a frame, and the image size.
pub(crate) fn blocks<I: BlockSource>(input: &Input<I>) -> Result<(Vec<Frame>, u64), Error> {
    let mut end = input.len();
    let mut streams = Vec::new();
    // Each round moves `end` back by at least one stream (≥ 32 bytes) or stops.
    loop {
        // Stream padding: zeros in multiples of 4 after a stream.
        let mut skipped = 0u64;
        while end >= 4 {
            let w: [u8; 4] = input.array(end.saturating_sub(4), FORMAT, "stream padding")?;
            if w != [0; 4] {
                break;
            }
            end = end.saturating_sub(4);
            skipped = skipped.saturating_add(4);
            if skipped > MAX_PADDING {
                return Err(corrupt(
                    "more than 1 MiB of zero bytes after the last stream",
                ));
            }
        }
        if end == 0 {
            break;
        }
        let (header, blocks, start) = stream_before(input, end)?;
        streams.push((header, blocks));
        end = start;
    }
    if streams.is_empty() {
        return Err(corrupt("no stream"));
    }
    streams.reverse();
    let mut frames = Vec::new();
    let mut image = 0u64;
    for (header, blocks) in streams {
        let head: Rc<[u8]> = Rc::from(&header[..]);
        let flags = [header[6], header[7]];
        for (at, disk, unpadded, uncompressed) in blocks {
            if uncompressed == 0 {
                continue;
            }
            frames.push(Frame {
                start: image,
                len: uncompressed,
                piece: Piece::Coded {
                    segs: vec![
                        Segment::Mem(head.clone()),
                        Segment::Range { at, len: disk },
                        Segment::Mem(Rc::from(trailer(flags, unpadded, uncompressed))),
                    ],
                    codec: Codec::Xz,
                },
            });
            image = image
                .checked_add(uncompressed)
                .ok_or_else(|| corrupt("image size overflows"))?;
        }
    }
    Ok((frames, image))
}

#[cfg(test)]
#[allow(
    clippy::unwrap_used,
    clippy::indexing_slicing,
    clippy::arithmetic_side_effects,
    clippy::as_conversions,
    clippy::panic,
    reason = "tests"
)]
pub(crate) mod tests {
    use super::*;
    use std::io::Write;

    /// A multi-block xz of `data` in `block`-byte blocks (liblzma's block encoder, as
    /// `xz -T0 --block-size` does).
    pub(crate) fn multi_block(data: &[u8], block: usize) -> Vec<u8> {
        let mut out = Vec::new();
        for part in data.chunks(block) {
            let mut e = xz2::write::XzEncoder::new(Vec::new(), 1);
            e.write_all(part).unwrap();
            out.extend(e.finish().unwrap());
            // Concatenated streams with padding between them are valid xz too.
            out.extend([0u8; 4]);
        }
        out
    }

    #[test]
    fn blocks_of_concatenated_streams() {
        let data: Vec<u8> = (0..300_000u32).map(|i| (i / 1000) as u8).collect();
        let file = multi_block(&data, 100_000);
        let (frames, size) = blocks(&Input::new(file)).unwrap();
        assert_eq!(size, 300_000);
        assert_eq!(frames.len(), 3);
        assert_eq!(frames[2].start, 200_000);
    }

    #[test]
    fn vli_round_trip() {
        for v in [0u64, 1, 127, 128, 300, u64::from(u32::MAX), 1 << 62] {
            let mut b = Vec::new();
            put_vli(&mut b, v);
            let mut at = 0;
            assert_eq!(vli(&b, &mut at).unwrap(), v);
            assert_eq!(at, b.len());
        }
        assert!(vli(&[0x80, 0], &mut 0).is_err());
        assert!(vli(&[0xff; 10], &mut 0).is_err());
    }

    #[test]
    fn damaged_indexes_are_refused() {
        let mut e = xz2::write::XzEncoder::new(Vec::new(), 1);
        e.write_all(&[5u8; 10_000]).unwrap();
        let good = e.finish().unwrap();
        let n = good.len();
        for i in [n - 1, n - 8, n - 13, n - 16, 3, 7] {
            let mut b = good.clone();
            b[i] ^= 0x40;
            assert!(blocks(&Input::new(b)).is_err(), "byte {i}");
        }
        assert!(blocks(&Input::new(good[..n - 1].to_vec())).is_err());
        assert!(blocks(&Input::new(vec![0u8; 64])).is_err());
    }
}
