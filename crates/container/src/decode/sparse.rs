//! Android sparse images (libsparse's format, `img2simg`, fastboot): a 28-byte header, then
//! chunks of whole blocks — RAW (the bytes follow), FILL (one 32-bit value), DONT_CARE
//! (nothing stored: a hole) and CRC32 (a checksum of the data so far, 0 blocks).
//!
//! ```text
//! header:  magic ED26FF3A | major 1 | minor 0 | file_hdr_sz 28 | chunk_hdr_sz 12
//!          | blk_sz | total_blks | total_chunks | image_checksum          (little-endian)
//! chunk:   chunk_type CAC1..CAC4 | reserved | chunk_sz (blocks) | total_sz (bytes, header incl.)
//! ```

use blockwise_geometry::BlockSource;

use super::input::Input;
use super::{Frame, Piece};
use crate::Error;

const FORMAT: &str = "Android sparse";
/// The magic number, little-endian at byte 0.
pub const MAGIC: u32 = 0xED26_FF3A;
const RAW: u16 = 0xCAC1;
const FILL: u16 = 0xCAC2;
const DONT_CARE: u16 = 0xCAC3;
const CRC32: u16 = 0xCAC4;
/// Most chunks read: 16 bytes of memory each; libsparse images of 32 GiB have thousands.
pub const MAX_CHUNKS: u32 = 1 << 20;
/// Largest block size accepted (libsparse uses 4096; fastboot devices up to 64 KiB).
const MAX_BLOCK: u32 = 1 << 24;

fn u16_at(b: &[u8], o: usize) -> u16 {
    let mut a = [0u8; 2];
    if let Some(s) = b.get(o..o.saturating_add(2)) {
        a.copy_from_slice(s);
    }
    u16::from_le_bytes(a)
}

fn u32_at(b: &[u8], o: usize) -> u32 {
    let mut a = [0u8; 4];
    if let Some(s) = b.get(o..o.saturating_add(4)) {
        a.copy_from_slice(s);
    }
    u32::from_le_bytes(a)
}

/// The chunk map of an Android sparse image as frames, and the image size
/// (`total_blks × blk_sz`). Every size field is checked before it is used: chunks must add
/// up to `total_blks`, RAW data must lie inside the file, counts are bounded.
pub(crate) fn chunk_map<I: BlockSource>(input: &Input<I>) -> Result<(Vec<Frame>, u64), Error> {
    let corrupt = |r: String| Error::corrupt(FORMAT, r);
    let h: [u8; 28] = input.array(0, FORMAT, "header")?;
    if u32_at(&h, 0) != MAGIC {
        return Err(corrupt("bad magic number".into()));
    }
    let (major, minor) = (u16_at(&h, 4), u16_at(&h, 6));
    if major != 1 {
        return Err(Error::unsupported(
            FORMAT,
            format!("format version {major}.{minor}; blockwise reads version 1"),
        ));
    }
    let file_hdr = u16_at(&h, 8);
    let chunk_hdr = u16_at(&h, 10);
    if file_hdr < 28 || chunk_hdr < 12 {
        return Err(corrupt(format!(
            "header sizes {file_hdr}/{chunk_hdr} are smaller than the format's 28/12"
        )));
    }
    let blk = u32_at(&h, 12);
    if blk == 0 || blk % 4 != 0 || blk > MAX_BLOCK {
        return Err(corrupt(format!(
            "block size {blk} is not a multiple of 4 between 4 and {MAX_BLOCK}"
        )));
    }
    let total_blks = u32_at(&h, 16);
    let total_chunks = u32_at(&h, 20);
    let blk64 = u64::from(blk);
    let size = u64::from(total_blks)
        .checked_mul(blk64)
        .ok_or_else(|| corrupt("image size overflows".into()))?;
    let file_len = input.len();
    // Each chunk takes at least chunk_hdr bytes of the file.
    let fit = file_len
        .saturating_sub(u64::from(file_hdr))
        .checked_div(u64::from(chunk_hdr))
        .unwrap_or(0);
    if u64::from(total_chunks) > fit {
        return Err(corrupt(format!(
            "the header promises {total_chunks} chunks; a {file_len}-byte file holds at most {fit}"
        )));
    }
    if total_chunks > MAX_CHUNKS {
        return Err(Error::Limit {
            what: format!("{FORMAT}: {total_chunks} chunks; blockwise reads at most {MAX_CHUNKS}"),
        });
    }
    let mut frames: Vec<Frame> = Vec::with_capacity(usize::try_from(total_chunks).unwrap_or(0));
    let mut at = u64::from(file_hdr);
    let mut blocks = 0u64;
    for i in 0..total_chunks {
        let mut c = [0u8; 12];
        let got = input.read_clamped(at, usize::from(chunk_hdr).min(12))?;
        if got.len() < 12 {
            return Err(corrupt(format!(
                "chunk {i} header at byte {at} is cut short"
            )));
        }
        c.copy_from_slice(got.get(..12).unwrap_or_default());
        let kind = u16_at(&c, 0);
        let chunk_blocks = u64::from(u32_at(&c, 4));
        let total_sz = u64::from(u32_at(&c, 8));
        let data = at
            .checked_add(u64::from(chunk_hdr))
            .ok_or_else(|| corrupt("offset overflows".into()))?;
        let len = chunk_blocks
            .checked_mul(blk64)
            .ok_or_else(|| corrupt("chunk size overflows".into()))?;
        let start = blocks.saturating_mul(blk64);
        let payload = total_sz.checked_sub(u64::from(chunk_hdr)).ok_or_else(|| {
            corrupt(format!(
                "chunk {i}: total size {total_sz} is smaller than its header"
            ))
        })?;
        let piece = match kind {
            RAW => {
                if payload != len {
                    return Err(corrupt(format!(
                        "chunk {i} (RAW, {chunk_blocks} blocks) holds {payload} bytes, not {len}"
                    )));
                }
                if data.checked_add(len).is_none_or(|e| e > file_len) {
                    return Err(corrupt(format!(
                        "chunk {i} (RAW) runs past the end of the file"
                    )));
                }
                Some(Piece::Raw { at: data })
            }
            FILL => {
                if payload != 4 {
                    return Err(corrupt(format!("chunk {i} (FILL) holds {payload} bytes, not 4")));
                }
                let v: [u8; 4] = input.array(data, FORMAT, "fill value")?;
                Some(Piece::Fill(v))
            }
            DONT_CARE => {
                if payload != 0 {
                    return Err(corrupt(format!(
                        "chunk {i} (DONT_CARE) holds {payload} bytes, not 0"
                    )));
                }
                Some(Piece::Hole)
            }
            CRC32 => {
                if payload != 4 {
                    return Err(corrupt(format!("chunk {i} (CRC32) holds {payload} bytes, not 4")));
                }
                None
            }
            other => {
                return Err(corrupt(format!(
                    "chunk {i} has unknown type {other:#06x} (RAW CAC1, FILL CAC2, DONT_CARE CAC3, CRC32 CAC4)"
                )))
            }
        };
        if let Some(piece) = piece {
            if len > 0 {
                let merge = matches!(
                    (frames.last().map(|f| &f.piece), &piece),
                    (Some(Piece::Hole), Piece::Hole)
                );
                match frames.last_mut() {
                    Some(last) if merge => last.len = last.len.saturating_add(len),
                    _ => frames.push(Frame { start, len, piece }),
                }
            }
            blocks = blocks
                .checked_add(chunk_blocks)
                .ok_or_else(|| corrupt("block count overflows".into()))?;
            if blocks > u64::from(total_blks) {
                return Err(corrupt(format!(
                    "the chunks cover more than the header's {total_blks} blocks"
                )));
            }
        }
        at = data
            .checked_add(payload)
            .ok_or_else(|| corrupt("offset overflows".into()))?;
    }
    if blocks != u64::from(total_blks) {
        return Err(corrupt(format!(
            "the chunks cover {blocks} blocks, the header says {total_blks}"
        )));
    }
    Ok((frames, size))
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

    /// A sparse image of `blk`-byte blocks from `(type, blocks, payload)` chunks.
    pub(crate) fn build(blk: u32, chunks: &[(u16, u32, Vec<u8>)]) -> Vec<u8> {
        let total: u32 = chunks.iter().filter(|c| c.0 != CRC32).map(|c| c.1).sum();
        let mut v = Vec::new();
        v.extend(MAGIC.to_le_bytes());
        v.extend(1u16.to_le_bytes());
        v.extend(0u16.to_le_bytes());
        v.extend(28u16.to_le_bytes());
        v.extend(12u16.to_le_bytes());
        v.extend(blk.to_le_bytes());
        v.extend(total.to_le_bytes());
        v.extend((chunks.len() as u32).to_le_bytes());
        v.extend(0u32.to_le_bytes());
        for (t, n, p) in chunks {
            v.extend(t.to_le_bytes());
            v.extend(0u16.to_le_bytes());
            v.extend(n.to_le_bytes());
            v.extend((12 + p.len() as u32).to_le_bytes());
            v.extend(p);
        }
        v
    }

    #[test]
    fn chunks_become_frames() {
        let img = build(
            4096,
            &[
                (RAW, 1, vec![7; 4096]),
                (DONT_CARE, 2, vec![]),
                (DONT_CARE, 1, vec![]),
                (FILL, 2, vec![1, 2, 3, 4]),
                (CRC32, 0, vec![0; 4]),
            ],
        );
        let input = Input::new(img);
        let (frames, size) = chunk_map(&input).unwrap();
        assert_eq!(size, 6 * 4096);
        assert_eq!(frames.len(), 3, "adjacent holes merge: {frames:?}");
        assert_eq!((frames[1].start, frames[1].len), (4096, 3 * 4096));
        assert!(matches!(frames[2].piece, Piece::Fill([1, 2, 3, 4])));
    }

    #[test]
    fn hostile_headers_are_refused() {
        let good = build(4096, &[(RAW, 1, vec![7; 4096])]);
        let check = |mutate: &dyn Fn(&mut Vec<u8>), what: &str| {
            let mut b = good.clone();
            mutate(&mut b);
            let e = chunk_map(&Input::new(b)).unwrap_err().to_string();
            assert!(e.contains(what), "{what}: {e}");
        };
        check(
            &|b| b[12..16].copy_from_slice(&3u32.to_le_bytes()),
            "block size",
        );
        check(
            &|b| b[20..24].copy_from_slice(&u32::MAX.to_le_bytes()),
            "chunks",
        );
        check(
            &|b| b[16..20].copy_from_slice(&2u32.to_le_bytes()),
            "header says 2",
        );
        check(
            &|b| b[28 + 4..28 + 8].copy_from_slice(&2u32.to_le_bytes()),
            "holds",
        );
        check(
            &|b| b[28..30].copy_from_slice(&0xCAC9u16.to_le_bytes()),
            "unknown type",
        );
        check(&|b| b.truncate(1000), "past the end");
        check(&|b| b[4] = 2, "version 2");
        // 2^32 - 1 blocks of 16 MiB: the size is computed, nothing is allocated for it.
        let mut big = build(1 << 24, &[(DONT_CARE, u32::MAX, vec![])]);
        big[16..20].copy_from_slice(&u32::MAX.to_le_bytes());
        let (frames, size) = chunk_map(&Input::new(big)).unwrap();
        assert_eq!(size, u64::from(u32::MAX) << 24);
        assert_eq!(frames.len(), 1);
    }
}
