//! The zstd seekable format (facebook/zstd `contrib/seekable_format`): independent zstd
//! frames, then a skippable frame holding the seek table.
//!
//! ```text
//! frame 0 … frame n-1   each one erase block, with content size and content checksum
//! 0x184D2A5E | size | n × (compressed u32, decompressed u32, checksum u32) | n u32 | 0x80 | 0x8F92EAB1
//! ```
//! The checksum of an entry is the low 32 bits of the XXH64 of the frame's decompressed
//! bytes: the same value as the frame's own content checksum, which libzstd writes. An
//! all-zero window is a frame of RLE blocks built here (about 140 bytes per 4 MiB).

use super::{EncodeError, Format, Packed, Unit};

/// The last four bytes of a seekable zstd file (little-endian).
pub const SEEKABLE_MAGIC: u32 = 0x8F92_EAB1;
const FRAME_MAGIC: u32 = 0xFD2F_B528;
const SKIPPABLE_MAGIC: u32 = 0x184D_2A5E;
/// Most frames a seek table may list (`ZSTD_SEEKABLE_MAXFRAMES`).
const MAX_FRAMES: u64 = 0x800_0000;
/// Largest decompressed frame (`ZSTD_SEEKABLE_MAX_FRAME_DECOMPRESSED_SIZE`).
const MAX_FRAME_BYTES: u64 = 0x4000_0000;
/// Largest zstd block (`ZSTD_BLOCKSIZE_MAX`).
const BLOCK_MAX: u64 = 128 << 10;
/// Seek table descriptor: checksums present.
const CHECKSUM_FLAG: u8 = 0x80;

fn unsupported(reason: String) -> EncodeError {
    EncodeError::Unsupported {
        format: Format::SeekableZstd,
        reason,
    }
}

/// Frames hold at most 1 GiB and a seek table lists at most 2^27 of them.
pub(crate) fn check_size(size: u64, window: u64) -> Result<(), EncodeError> {
    if window > MAX_FRAME_BYTES {
        return Err(unsupported(format!(
            "an erase block of {window} bytes is larger than a seekable frame may be (1 GiB)"
        )));
    }
    if size.div_ceil(window.max(1)) > MAX_FRAMES {
        return Err(unsupported(format!(
            "{size} bytes in erase blocks of {window} are more frames than a seek table lists (2^27)"
        )));
    }
    Ok(())
}

/// The seek table, built as frames are added.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct SeekTable {
    entries: Vec<u8>,
    frames: u32,
}

impl SeekTable {
    pub(crate) fn push(
        &mut self,
        compressed: u64,
        decompressed: u32,
        checksum: u32,
    ) -> Result<(), EncodeError> {
        let c = u32::try_from(compressed)
            .map_err(|_| unsupported(format!("a frame of {compressed} bytes")))?;
        self.frames = self
            .frames
            .checked_add(1)
            .filter(|&n| u64::from(n) <= MAX_FRAMES)
            .ok_or_else(|| unsupported("more than 2^27 frames".into()))?;
        self.entries.extend_from_slice(&c.to_le_bytes());
        self.entries.extend_from_slice(&decompressed.to_le_bytes());
        self.entries.extend_from_slice(&checksum.to_le_bytes());
        Ok(())
    }

    /// The skippable frame holding the table.
    pub(crate) fn finish(&self) -> Result<Vec<u8>, EncodeError> {
        let body = self.entries.len().saturating_add(9);
        let size = u32::try_from(body).map_err(|_| unsupported("seek table too large".into()))?;
        let mut out = Vec::with_capacity(body.saturating_add(8));
        out.extend_from_slice(&SKIPPABLE_MAGIC.to_le_bytes());
        out.extend_from_slice(&size.to_le_bytes());
        out.extend_from_slice(&self.entries);
        out.extend_from_slice(&self.frames.to_le_bytes());
        out.push(CHECKSUM_FLAG);
        out.extend_from_slice(&SEEKABLE_MAGIC.to_le_bytes());
        Ok(out)
    }
}

/// A zstd frame of `len` zero bytes: single segment, 4-byte content size, RLE blocks of
/// 128 KiB, content checksum `checksum`.
fn zero_frame(len: u32, checksum: u32) -> Vec<u8> {
    let blocks = u64::from(len).div_ceil(BLOCK_MAX);
    let mut f = Vec::with_capacity(
        usize::try_from(blocks)
            .unwrap_or(0)
            .saturating_mul(4)
            .saturating_add(13),
    );
    f.extend_from_slice(&FRAME_MAGIC.to_le_bytes());
    // Frame header descriptor: content size field of 4 bytes (2 << 6), single segment
    // (1 << 5), content checksum (1 << 2), no dictionary.
    f.push(0xA4);
    f.extend_from_slice(&len.to_le_bytes());
    let mut left = u64::from(len);
    while left > 0 {
        let n = left.min(BLOCK_MAX);
        left = left.saturating_sub(n);
        let last = u32::from(left == 0);
        // Block header: last flag, type 1 (RLE), size in bits 3..24; then the byte.
        let h = last | (1 << 1) | (u32::try_from(n).unwrap_or(0) << 3);
        f.extend_from_slice(h.to_le_bytes().get(..3).unwrap_or_default());
        f.push(0);
    }
    f.extend_from_slice(&checksum.to_le_bytes());
    f
}

/// The packed frame of `len` zero bytes.
#[cfg_attr(
    not(feature = "zstd"),
    allow(dead_code, reason = "used by the compressor and the tests")
)]
pub(crate) fn zero_packed(len: u64) -> Result<Packed, EncodeError> {
    let n = u32::try_from(len).map_err(|_| unsupported(format!("a frame of {len} bytes")))?;
    let zeros = vec![0u8; usize::try_from(len).unwrap_or(0)];
    let checksum = low32(xxh64(&zeros, 0));
    Ok(Packed {
        bytes: zero_frame(n, checksum),
        unit: Unit::Zstd {
            decompressed: n,
            checksum,
            zero: true,
        },
    })
}

fn low32(v: u64) -> u32 {
    u32::try_from(v & 0xFFFF_FFFF).unwrap_or(0)
}

/// The content checksum a frame ends with, when its header says it has one.
#[cfg_attr(
    not(feature = "zstd"),
    allow(dead_code, reason = "used by the compressor and the tests")
)]
fn frame_checksum(frame: &[u8]) -> Option<u32> {
    let fhd = *frame.get(4)?;
    if frame.get(..4)? != FRAME_MAGIC.to_le_bytes() || fhd & 0x04 == 0 {
        return None;
    }
    let tail = frame.get(frame.len().checked_sub(4)?..)?;
    Some(u32::from_le_bytes(tail.try_into().ok()?))
}

const P1: u64 = 0x9E37_79B1_85EB_CA87;
const P2: u64 = 0xC2B2_AE3D_27D4_EB4F;
const P3: u64 = 0x1656_67B1_9E37_79F9;
const P4: u64 = 0x85EB_CA77_C2B2_AE63;
const P5: u64 = 0x27D4_EB2F_1656_67C5;

fn xxh_round(acc: u64, input: u64) -> u64 {
    acc.wrapping_add(input.wrapping_mul(P2))
        .rotate_left(31)
        .wrapping_mul(P1)
}

fn xxh_merge(acc: u64, v: u64) -> u64 {
    (acc ^ xxh_round(0, v)).wrapping_mul(P1).wrapping_add(P4)
}

fn read64(b: &[u8]) -> u64 {
    b.get(..8)
        .and_then(|s| s.try_into().ok())
        .map_or(0, u64::from_le_bytes)
}

/// XXH64 of `data` with `seed` (the hash zstd's content checksums and seek tables use).
#[must_use]
pub fn xxh64(data: &[u8], seed: u64) -> u64 {
    let len = u64::try_from(data.len()).unwrap_or(u64::MAX);
    let mut rest = data;
    let mut h = if data.len() >= 32 {
        let mut v = [
            seed.wrapping_add(P1).wrapping_add(P2),
            seed.wrapping_add(P2),
            seed,
            seed.wrapping_sub(P1),
        ];
        let mut stripes = data.chunks_exact(32);
        for s in &mut stripes {
            for (lane, word) in v.iter_mut().zip(s.chunks_exact(8)) {
                *lane = xxh_round(*lane, read64(word));
            }
        }
        rest = stripes.remainder();
        let [v1, v2, v3, v4] = v;
        let mut h = v1
            .rotate_left(1)
            .wrapping_add(v2.rotate_left(7))
            .wrapping_add(v3.rotate_left(12))
            .wrapping_add(v4.rotate_left(18));
        for lane in v {
            h = xxh_merge(h, lane);
        }
        h
    } else {
        seed.wrapping_add(P5)
    };
    h = h.wrapping_add(len);
    let mut words = rest.chunks_exact(8);
    for w in &mut words {
        h ^= xxh_round(0, read64(w));
        h = h.rotate_left(27).wrapping_mul(P1).wrapping_add(P4);
    }
    let mut rest = words.remainder();
    if let Some((w, tail)) = rest.split_first_chunk::<4>() {
        h ^= u64::from(u32::from_le_bytes(*w)).wrapping_mul(P1);
        h = h.rotate_left(23).wrapping_mul(P2).wrapping_add(P3);
        rest = tail;
    }
    for &b in rest {
        h ^= u64::from(b).wrapping_mul(P5);
        h = h.rotate_left(11).wrapping_mul(P1);
    }
    h ^= h >> 33;
    h = h.wrapping_mul(P2);
    h ^= h >> 29;
    h = h.wrapping_mul(P3);
    h ^= h >> 32;
    h
}

/// libzstd at one level, frames with content size and checksum.
#[cfg(feature = "zstd")]
pub(crate) struct Compressor {
    ctx: ::zstd::bulk::Compressor<'static>,
    out: Vec<u8>,
}

#[cfg(feature = "zstd")]
impl Compressor {
    pub(crate) fn new(level: i32) -> Result<Self, EncodeError> {
        use ::zstd::zstd_safe::CParameter;
        let codec = |e: std::io::Error| EncodeError::Codec {
            format: Format::SeekableZstd,
            message: e.to_string(),
        };
        let mut ctx = ::zstd::bulk::Compressor::new(level).map_err(codec)?;
        ctx.set_parameter(CParameter::ChecksumFlag(true))
            .map_err(codec)?;
        ctx.set_parameter(CParameter::ContentSizeFlag(true))
            .map_err(codec)?;
        Ok(Compressor {
            ctx,
            out: Vec::new(),
        })
    }

    pub(crate) fn pack(&mut self, data: &[u8], zero: bool) -> Result<Packed, EncodeError> {
        let n = u32::try_from(data.len())
            .map_err(|_| unsupported(format!("a frame of {} bytes", data.len())))?;
        self.out.clear();
        self.out
            .reserve(::zstd::zstd_safe::compress_bound(data.len()));
        self.ctx
            .compress_to_buffer(data, &mut self.out)
            .map_err(|e| EncodeError::Codec {
                format: Format::SeekableZstd,
                message: e.to_string(),
            })?;
        let checksum = frame_checksum(&self.out).unwrap_or_else(|| low32(xxh64(data, 0)));
        Ok(Packed {
            bytes: self.out.clone(),
            unit: Unit::Zstd {
                decompressed: n,
                checksum,
                zero,
            },
        })
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
    fn xxh64_known_values() {
        // Reference values of XXH64 (seed 0, and seed 1 for the empty input).
        assert_eq!(xxh64(b"", 0), 0xEF46_DB37_51D8_E999);
        assert_eq!(xxh64(b"", 1), 0xD5AF_BA13_36A3_BE4B);
        assert_eq!(xxh64(b"a", 0), 0xD24E_C4F1_A98C_6E5B);
        assert_eq!(xxh64(b"abc", 0), 0x44BC_2CF5_AD77_0999);
    }

    #[test]
    fn zero_frame_layout() {
        let p = zero_packed(300 << 10).unwrap();
        let f = p.bytes();
        assert_eq!(&f[..4], &FRAME_MAGIC.to_le_bytes());
        assert_eq!(f[4], 0xA4);
        assert_eq!(u32::from_le_bytes(f[5..9].try_into().unwrap()), 300 << 10);
        // 128 KiB + 128 KiB + 44 KiB: three RLE blocks of 4 bytes, the last flagged.
        assert_eq!(f.len(), 9 + 3 * 4 + 4);
        let h = |i: usize| u32::from_le_bytes([f[9 + 4 * i], f[10 + 4 * i], f[11 + 4 * i], 0]);
        assert_eq!(h(0), 2 | (128 << 10) << 3);
        assert_eq!(h(2), 1 | 2 | (44 << 10) << 3);
        assert_eq!(
            frame_checksum(f),
            Some(low32(xxh64(&vec![0; 300 << 10], 0)))
        );
    }

    #[test]
    fn seek_table_layout() {
        let mut t = SeekTable::default();
        t.push(100, 4 << 20, 7).unwrap();
        t.push(20, 1 << 20, 9).unwrap();
        let b = t.finish().unwrap();
        assert_eq!(&b[..4], &SKIPPABLE_MAGIC.to_le_bytes());
        assert_eq!(
            u32::from_le_bytes(b[4..8].try_into().unwrap()) as usize,
            b.len() - 8
        );
        assert_eq!(b.len(), 8 + 2 * 12 + 9);
        assert_eq!(&b[b.len() - 4..], &SEEKABLE_MAGIC.to_le_bytes());
        assert_eq!(b[b.len() - 5], CHECKSUM_FLAG);
        assert_eq!(
            u32::from_le_bytes(b[b.len() - 9..b.len() - 5].try_into().unwrap()),
            2
        );
        assert_eq!(u32::from_le_bytes(b[8..12].try_into().unwrap()), 100);
        assert_eq!(u32::from_le_bytes(b[28..32].try_into().unwrap()), 9);
        assert!(t.push(1 << 32, 1, 1).is_err());
    }

    /// libzstd decodes the hand-made zero frames, and its own frames carry the checksum
    /// the seek table repeats.
    #[cfg(feature = "zstd")]
    #[test]
    fn libzstd_agrees() {
        for len in [1u64, 4096, 128 << 10, (128 << 10) + 1, 4 << 20] {
            let p = zero_packed(len).unwrap();
            let back = ::zstd::bulk::decompress(p.bytes(), 8 << 20).unwrap();
            assert_eq!(back, vec![0u8; len as usize]);
        }
        let data: Vec<u8> = (0..200_000u32).map(|i| (i * 7 / 13) as u8).collect();
        let mut c = Compressor::new(3).unwrap();
        let p = c.pack(&data, false).unwrap();
        assert_eq!(frame_checksum(p.bytes()), Some(low32(xxh64(&data, 0))));
        assert_eq!(::zstd::bulk::decompress(p.bytes(), 1 << 20).unwrap(), data);
    }
}
