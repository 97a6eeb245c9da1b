//! The zstd seekable format (facebook/zstd `contrib/seekable_format`): independent frames,
//! then a skippable frame holding the seek table, found from the end of the file.
//!
//! ```text
//! ... frames ... | 5E 2A 4D 18 | frame size | entries: compressed u32, decompressed u32,
//!                [checksum u32] ... | number of frames u32 | descriptor u8 | B1 EA 92 8F
//! ```

use blockwise_geometry::BlockSource;

use super::input::{Input, Segment};
use super::zstd_frame;
use super::{Codec, Frame, Piece};
use crate::Error;

const FORMAT: &str = "zstd seekable";
/// The seek table footer's magic, little-endian.
pub(crate) const SEEKABLE_MAGIC: u32 = 0x8F92_EAB1;
/// The seek table's skippable-frame magic.
const TABLE_FRAME: u32 = 0x184D_2A5E;
/// Most frames read from a seek table (12 bytes each; a 1 TiB image in 4 MiB frames has
/// 262,144).
pub const MAX_FRAMES: u32 = 1 << 22;

/// The frames of a seekable zstd file and the image size; `None` when the file ends in no
/// seek table (a plain zstd stream). A table that is there but wrong is an error.
pub(crate) fn seek_table<I: BlockSource>(
    input: &Input<I>,
) -> Result<Option<(Vec<Frame>, u64)>, Error> {
    let len = input.len();
    let corrupt = |r: String| Error::corrupt(FORMAT, r);
    let Some(foot_at) = len.checked_sub(9) else {
        return Ok(None);
    };
    let foot: [u8; 9] = input.array(foot_at, FORMAT, "seek table footer")?;
    let [n0, n1, n2, n3, desc, m0, m1, m2, m3] = foot;
    if u32::from_le_bytes([m0, m1, m2, m3]) != SEEKABLE_MAGIC {
        return Ok(None);
    }
    let count = u32::from_le_bytes([n0, n1, n2, n3]);
    if desc & 0x7c != 0 {
        return Err(corrupt(format!(
            "reserved bits set in the seek table descriptor ({desc:#04x})"
        )));
    }
    let with_checksum = desc & 0x80 != 0;
    let entry = if with_checksum { 12u64 } else { 8 };
    if count > MAX_FRAMES {
        return Err(Error::Limit {
            what: format!("{FORMAT}: {count} frames; blockwise reads at most {MAX_FRAMES}"),
        });
    }
    let table = u64::from(count)
        .checked_mul(entry)
        .and_then(|t| t.checked_add(9))
        .ok_or_else(|| corrupt("seek table size overflows".into()))?;
    let frame_at = len
        .checked_sub(table)
        .and_then(|t| t.checked_sub(8))
        .ok_or_else(|| {
            corrupt(format!(
                "the seek table of {count} frames is larger than the file ({len} bytes)"
            ))
        })?;
    let head: [u8; 8] = input.array(frame_at, FORMAT, "seek table frame header")?;
    let [a0, a1, a2, a3, s0, s1, s2, s3] = head;
    if u32::from_le_bytes([a0, a1, a2, a3]) != TABLE_FRAME
        || u64::from(u32::from_le_bytes([s0, s1, s2, s3])) != table
    {
        return Err(corrupt(
            "the seek table footer is not inside a seek-table skippable frame of its size".into(),
        ));
    }
    let bytes = input.read_clamped(
        frame_at.saturating_add(8),
        usize::try_from(table.saturating_sub(9)).unwrap_or(0),
    )?;
    let mut frames = Vec::with_capacity(usize::try_from(count).unwrap_or(0));
    let mut c_at = 0u64;
    let mut d_at = 0u64;
    let step = usize::try_from(entry).unwrap_or(12);
    for (i, e) in bytes.chunks_exact(step).enumerate() {
        let c = u64::from(u32::from_le_bytes(
            e.get(..4).and_then(|s| s.try_into().ok()).unwrap_or([0; 4]),
        ));
        let d = u64::from(u32::from_le_bytes(
            e.get(4..8)
                .and_then(|s| s.try_into().ok())
                .unwrap_or([0; 4]),
        ));
        if c == 0 && d > 0 {
            return Err(corrupt(format!(
                "frame {i} has no compressed bytes but {d} decompressed"
            )));
        }
        if d > 0 {
            frames.push(Frame {
                start: d_at,
                len: d,
                piece: Piece::Coded {
                    segs: vec![Segment::Range { at: c_at, len: c }],
                    codec: Codec::Zstd,
                },
            });
        }
        c_at = c_at
            .checked_add(c)
            .ok_or_else(|| corrupt("frame offsets overflow".into()))?;
        d_at = d_at
            .checked_add(d)
            .ok_or_else(|| corrupt("image size overflows".into()))?;
    }
    if c_at != frame_at {
        return Err(corrupt(format!(
            "the seek table's frames add up to {c_at} bytes, but the table starts at byte {frame_at}"
        )));
    }
    Ok(Some((frames, d_at)))
}

/// Whether the compressed frame `b` (header included) decodes to `len` zero bytes: every
/// block an RLE block of zero bytes (or a raw block of zeros), but for a small compressed
/// first block, which is decoded on its own (at most 128 KiB) to be sure.
pub(crate) fn frame_is_zero(b: &[u8], len: u64) -> bool {
    let Ok(h) = zstd_frame::parse_header(b) else {
        return false;
    };
    if h.content_size.is_some_and(|c| c != len) {
        return false;
    }
    let Some(z) = b
        .get(h.header_len..)
        .and_then(|blocks| zstd_frame::zero_blocks(blocks, h.checksum, len))
    else {
        return false;
    };
    if z.total != len {
        return false;
    }
    let Some((at, n, first_len)) = z.first_compressed else {
        return true;
    };
    let Some(frame) = h
        .header_len
        .checked_add(at)
        .and_then(|s| b.get(s..s.checked_add(n)?))
        .and_then(zstd_frame::lone_block)
    else {
        return false;
    };
    let Ok(mut d) = super::codec::decoder(Codec::Zstd, &frame[..]) else {
        return false;
    };
    let mut out = Vec::new();
    let limit = first_len.saturating_add(1);
    std::io::Read::read_to_end(&mut std::io::Read::take(&mut *d, limit), &mut out).is_ok()
        && u64::try_from(out.len()).ok() == Some(first_len)
        && out.iter().all(|&x| x == 0)
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

    /// A seekable zstd file of `frames` (each compressed on its own), with checksums.
    pub(crate) fn build(frames: &[&[u8]]) -> Vec<u8> {
        let mut out = Vec::new();
        let mut table = Vec::new();
        for f in frames {
            let c = zstd::bulk::compress(f, 3).unwrap();
            table.extend((c.len() as u32).to_le_bytes());
            table.extend((f.len() as u32).to_le_bytes());
            table.extend(0u32.to_le_bytes());
            out.extend(c);
        }
        table.extend((frames.len() as u32).to_le_bytes());
        table.push(0x80);
        table.extend(SEEKABLE_MAGIC.to_le_bytes());
        out.extend(TABLE_FRAME.to_le_bytes());
        out.extend((table.len() as u32).to_le_bytes());
        out.extend(table);
        out
    }

    #[test]
    fn seek_table_is_read_from_the_end() {
        let a = vec![1u8; 100_000];
        let b = vec![0u8; 1 << 20];
        let file = build(&[&a, &b, &a]);
        let (frames, size) = seek_table(&Input::new(file.clone())).unwrap().unwrap();
        assert_eq!(size, 200_000 + (1 << 20));
        assert_eq!(frames.len(), 3);
        assert_eq!(frames[2].start, 100_000 + (1 << 20));
        // The zero frame is known from its block headers.
        let Piece::Coded { segs, .. } = &frames[1].piece else {
            panic!()
        };
        let [Segment::Range { at, len }] = segs.as_slice() else {
            panic!()
        };
        let bytes = &file[*at as usize..(*at + *len) as usize];
        assert!(frame_is_zero(bytes, 1 << 20));
        let Piece::Coded { segs, .. } = &frames[0].piece else {
            panic!()
        };
        let [Segment::Range { at, len }] = segs.as_slice() else {
            panic!()
        };
        assert!(!frame_is_zero(
            &file[*at as usize..(*at + *len) as usize],
            100_000
        ));
        // A plain zstd stream has no table.
        let plain = zstd::bulk::compress(&a, 1).unwrap();
        assert!(seek_table(&Input::new(plain)).unwrap().is_none());
    }

    #[test]
    fn hostile_tables_are_refused() {
        let file = build(&[&[1u8; 1000]]);
        let n = file.len();
        let mut many = file.clone();
        many[n - 9..n - 5].copy_from_slice(&u32::MAX.to_le_bytes());
        assert!(seek_table(&Input::new(many)).is_err());
        let mut big = file.clone();
        big[n - 9..n - 5].copy_from_slice(&1000u32.to_le_bytes());
        assert!(seek_table(&Input::new(big)).is_err());
        let mut off = file.clone();
        off.insert(0, 0);
        assert!(seek_table(&Input::new(off))
            .unwrap_err()
            .to_string()
            .contains("add up"));
    }
}
