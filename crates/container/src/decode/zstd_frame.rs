//! The zstd frame format (RFC 8878) as far as blockwise reads it without decoding: frame
//! headers (window size, content size, checksum flag), skippable frames, block headers.

use crate::Error;

/// `28 B5 2F FD`, little-endian.
pub(crate) const MAGIC: u32 = 0xFD2F_B528;
/// Skippable frames: `0x184D2A50`..=`0x184D2A5F`.
pub(crate) const SKIPPABLE_MASK: u32 = 0xFFFF_FFF0;
/// A skippable frame's magic with the low nibble cleared.
pub(crate) const SKIPPABLE: u32 = 0x184D_2A50;
/// Largest window blockwise decodes: zstd's own default limit (`--long` up to 27), and what
/// a browser can hold. Larger windows (`--long=31`) are refused with a hint.
pub(crate) const MAX_WINDOW: u64 = 128 << 20;

const FORMAT: &str = "zstd";

/// A zstd frame header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct FrameHeader {
    /// Bytes of the header, magic included.
    pub(crate) header_len: usize,
    /// The window the decoder needs.
    pub(crate) window: u64,
    /// Decompressed size, when the frame says.
    pub(crate) content_size: Option<u64>,
    /// A 4-byte checksum follows the last block.
    pub(crate) checksum: bool,
}

fn le(bytes: &[u8]) -> u64 {
    bytes
        .iter()
        .rev()
        .fold(0u64, |acc, &b| acc.wrapping_shl(8) | u64::from(b))
}

/// How many header bytes follow the magic, from the frame header descriptor byte: the
/// whole header is `4 + 1 + this`.
pub(crate) fn header_rest(fhd: u8) -> usize {
    let fcs_flag = fhd >> 6;
    let single = fhd & 0x20 != 0;
    let dict = match fhd & 3 {
        0 => 0,
        1 => 1,
        2 => 2,
        _ => 4,
    };
    let fcs = match fcs_flag {
        0 => usize::from(single),
        1 => 2,
        2 => 4,
        _ => 8,
    };
    usize::from(!single)
        .saturating_add(dict)
        .saturating_add(fcs)
}

/// Parses a frame header from `b` (magic first); `b` must hold the whole header.
pub(crate) fn parse_header(b: &[u8]) -> Result<FrameHeader, Error> {
    let magic = b.get(..4).map_or(0, le);
    if magic != u64::from(MAGIC) {
        return Err(Error::corrupt(
            FORMAT,
            "not a zstd frame (bad magic number)",
        ));
    }
    let fhd = *b
        .get(4)
        .ok_or_else(|| Error::corrupt(FORMAT, "frame header cut short"))?;
    if fhd & 0x08 != 0 {
        return Err(Error::corrupt(FORMAT, "reserved bit set in a frame header"));
    }
    let header_len = 5usize.saturating_add(header_rest(fhd));
    let h = b
        .get(..header_len)
        .ok_or_else(|| Error::corrupt(FORMAT, "frame header cut short"))?;
    let single = fhd & 0x20 != 0;
    let mut at = 5usize;
    let mut window = 0u64;
    if !single {
        let wd = h.get(at).copied().unwrap_or(0);
        let exp = u32::from(wd >> 3).saturating_add(10);
        let base = 1u64.checked_shl(exp).unwrap_or(u64::MAX);
        let add = (base / 8).saturating_mul(u64::from(wd & 7));
        window = base.saturating_add(add);
        at = at.saturating_add(1);
    }
    let dict_len = match fhd & 3 {
        0 => 0,
        1 => 1,
        2 => 2,
        _ => 4,
    };
    let dict = h.get(at..at.saturating_add(dict_len)).map_or(0, le);
    if dict != 0 {
        return Err(Error::unsupported(
            FORMAT,
            "the frame needs a dictionary (zstd -D): decompress it with the dictionary first",
        ));
    }
    at = at.saturating_add(dict_len);
    let fcs_bytes = h.get(at..).unwrap_or_default();
    let content_size = match (fhd >> 6, fcs_bytes.len()) {
        (0, 0) => None,
        (1, 2) => Some(le(fcs_bytes).saturating_add(256)),
        (_, n) if n > 0 => Some(le(fcs_bytes)),
        _ => None,
    };
    if single {
        window = content_size.unwrap_or(0);
    }
    if window > MAX_WINDOW {
        return Err(Error::unsupported(
            FORMAT,
            format!(
                "the frame needs a {} window (made with --long=31 or --ultra); blockwise decodes up to {}: decompress it with `zstd -d --memory={}MB` first",
                blockwise_geometry::format_size(window),
                blockwise_geometry::format_size(MAX_WINDOW),
                window.div_ceil(1 << 20)
            ),
        ));
    }
    Ok(FrameHeader {
        header_len,
        window,
        content_size,
        checksum: fhd & 0x04 != 0,
    })
}

/// A block header: `(last, type, size)`; type 0 raw, 1 RLE, 2 compressed.
pub(crate) fn block_header(b: [u8; 3]) -> (bool, u8, u32) {
    let v = u32::from(b[0]) | u32::from(b[1]) << 8 | u32::from(b[2]) << 16;
    (v & 1 != 0, ((v >> 1) & 3).try_into().unwrap_or(3), v >> 3)
}

/// The blocks of one frame (its bytes after the header), judged without decoding.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct ZeroBlocks {
    /// Decompressed bytes of all blocks.
    pub(crate) total: u64,
    /// The first block, when it is a compressed block (`(offset, size)` of its content in
    /// the bytes given): libzstd never makes the first block of a frame an RLE block, so a
    /// frame of zeros starts with a small compressed block that must be decoded to be sure.
    pub(crate) first_compressed: Option<(usize, usize, u64)>,
}

/// What the blocks of one frame (its bytes after the header) are: `Some` when every block
/// but a compressed first one is an RLE block of zero bytes or a raw block of zeros; `None`
/// otherwise, or when `b` is not one whole frame. `first_len` is the first block's
/// decompressed size when it is compressed (the frame's window or 128 KiB, the caller
/// checks it by decoding).
pub(crate) fn zero_blocks(b: &[u8], checksum: bool, total_len: u64) -> Option<ZeroBlocks> {
    let mut at = 0usize;
    let mut total = 0u64;
    let mut first_compressed = None;
    let mut first = true;
    // A frame of n blocks takes at least 4n bytes: the loop is bounded by `b`.
    loop {
        let hdr: [u8; 3] = b.get(at..at.checked_add(3)?)?.try_into().ok()?;
        at = at.checked_add(3)?;
        let (last, kind, size) = block_header(hdr);
        let size_us = usize::try_from(size).ok()?;
        match kind {
            0 => {
                let raw = b.get(at..at.checked_add(size_us)?)?;
                if raw.iter().any(|&x| x != 0) {
                    return None;
                }
                at = at.checked_add(size_us)?;
                total = total.checked_add(u64::from(size))?;
            }
            1 => {
                if *b.get(at)? != 0 {
                    return None;
                }
                at = at.checked_add(1)?;
                total = total.checked_add(u64::from(size))?;
            }
            2 if first && size <= 4096 => {
                // Its decompressed size is not in the header: what is left of the frame once
                // the other blocks are counted, checked by decoding it.
                first_compressed = Some((at, size_us, 0));
                at = at.checked_add(size_us)?;
            }
            _ => return None,
        }
        first = false;
        if last {
            break;
        }
    }
    let end = at.checked_add(if checksum { 4 } else { 0 })?;
    if end != b.len() {
        return None;
    }
    if let Some((o, n, _)) = first_compressed {
        let first_len = total_len.checked_sub(total)?;
        if first_len == 0 || first_len > 128 << 10 {
            return None;
        }
        first_compressed = Some((o, n, first_len));
        total = total_len;
    }
    Some(ZeroBlocks {
        total,
        first_compressed,
    })
}

/// A frame of its own around one compressed block, for decoding it alone: no content size,
/// no checksum, a 128 KiB window (a block is at most that).
pub(crate) fn lone_block(block: &[u8]) -> Option<Vec<u8>> {
    let size = u32::try_from(block.len()).ok()?;
    let hdr = 1u32 | 2 << 1 | size.checked_shl(3)?;
    let mut f = MAGIC.to_le_bytes().to_vec();
    f.extend([0x00, 0x38]);
    f.extend(hdr.to_le_bytes().get(..3)?);
    f.extend(block);
    Some(f)
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
mod tests {
    use super::*;

    #[test]
    fn headers() {
        // Single segment, 1-byte content size 100, checksum.
        let h = parse_header(&[0x28, 0xb5, 0x2f, 0xfd, 0x24, 100]).unwrap();
        assert_eq!(h.header_len, 6);
        assert_eq!(h.content_size, Some(100));
        assert_eq!(h.window, 100);
        assert!(h.checksum);
        // Window descriptor 0x58: 2^(11+10) = 2 MiB, no content size.
        let h = parse_header(&[0x28, 0xb5, 0x2f, 0xfd, 0x00, 0x58]).unwrap();
        assert_eq!((h.window, h.content_size), (2 << 20, None));
        // A 2 GiB window (--long=31) is refused with a hint.
        let e = parse_header(&[0x28, 0xb5, 0x2f, 0xfd, 0x00, 0xa8]).unwrap_err();
        assert!(e.to_string().contains("--memory=2048MB"), "{e}");
        // A dictionary id is refused.
        assert!(parse_header(&[0x28, 0xb5, 0x2f, 0xfd, 0x01, 0x58, 7]).is_err());
        assert!(parse_header(&[0x28, 0xb5, 0x2f]).is_err());
    }

    #[test]
    fn zero_frames_are_known_without_decoding() {
        // Two RLE blocks of zeros (128 KiB each), the second last.
        let rle = |last: bool, n: u32| {
            let v = u32::from(last) | 1 << 1 | n << 3;
            [v as u8, (v >> 8) as u8, (v >> 16) as u8, 0]
        };
        let total = |z: Option<ZeroBlocks>| z.map(|z| z.total);
        let mut b = rle(false, 131_072).to_vec();
        b.extend(rle(true, 131_072));
        assert_eq!(total(zero_blocks(&b, false, 262_144)), Some(262_144));
        b.extend([1, 2, 3, 4]);
        assert_eq!(total(zero_blocks(&b, true, 262_144)), Some(262_144));
        assert_eq!(zero_blocks(&b, false, 262_144), None);
        let mut ones = rle(true, 10);
        ones[3] = 1;
        assert_eq!(zero_blocks(&ones, false, 10), None);
        assert_eq!(zero_blocks(&[], false, 0), None);
    }
}
