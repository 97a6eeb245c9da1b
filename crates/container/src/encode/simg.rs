//! Android sparse images (AOSP `system/core/libsparse/sparse_format.h`): a 28-byte file
//! header, then chunks with a 12-byte header each.
//!
//! ```text
//! file header  magic 0xED26FF3A | major 1 | minor 0 | 28 | 12 | block size | total blocks | chunks | checksum 0
//! chunk header type (RAW 0xCAC1, FILL 0xCAC2, DONT_CARE 0xCAC3) | 0 | blocks | bytes incl. header
//!              RAW: blocks × block size of data; FILL: the 4-byte value; DONT_CARE: nothing
//! ```
//! All little-endian. No CRC32 chunk and no image checksum are written (0 means none, as
//! libsparse writes them by default).

use super::{EncodeError, Format, Window};

/// The file header's magic number.
pub const SIMG_MAGIC: u32 = 0xED26_FF3A;
/// The block size written (the device's logical block when larger).
pub const SIMG_BLOCK_BYTES: u64 = 4096;
/// File header bytes.
pub(crate) const HEADER_BYTES: u64 = 28;
/// Chunk header bytes.
const CHUNK_HEADER_BYTES: u32 = 12;
const RAW: u16 = 0xCAC1;
const FILL: u16 = 0xCAC2;
const DONT_CARE: u16 = 0xCAC3;
/// No chunk's output (header and data) is larger than this.
pub(crate) const MAX_CHUNK_BYTES: u64 = 64 << 20;

/// What one window became.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Counts {
    pub(crate) chunks: u32,
    pub(crate) raw: u64,
    pub(crate) fill: u64,
    pub(crate) dont_care: u64,
    pub(crate) block: u64,
}

impl Counts {
    /// Blocks the chunks cover.
    pub(crate) fn blocks(&self) -> u64 {
        self.raw
            .saturating_add(self.fill)
            .saturating_add(self.dont_care)
            .checked_div(self.block)
            .unwrap_or(0)
    }
}

fn unsupported(reason: String) -> EncodeError {
    EncodeError::Unsupported {
        format: Format::AndroidSparse,
        reason,
    }
}

/// An Android sparse image counts whole blocks, in 32 bits.
pub(crate) fn check_size(size: u64, block: u64) -> Result<(), EncodeError> {
    if size.checked_rem(block) != Some(0) {
        return Err(unsupported(format!(
            "the image is {size} bytes, not a whole number of {block}-byte blocks (Android sparse images count whole blocks); make image.size a multiple of {block}"
        )));
    }
    total_blocks(size, block).map(|_| ())
}

fn total_blocks(size: u64, block: u64) -> Result<u32, EncodeError> {
    size.checked_div(block)
        .and_then(|b| u32::try_from(b).ok())
        .ok_or_else(|| {
            unsupported(format!(
                "the image is {size} bytes, more than 2^32 - 1 blocks of {block} bytes"
            ))
        })
}

/// The file header for an image of `size` bytes in `chunks` chunks.
pub(crate) fn header(block: u64, size: u64, chunks: u32) -> Result<[u8; 28], EncodeError> {
    let blk = u32::try_from(block).map_err(|_| unsupported(format!("block {block}")))?;
    let total = total_blocks(size, block)?;
    let mut h = [0u8; 28];
    let fields: [&[u8]; 9] = [
        &SIMG_MAGIC.to_le_bytes(),
        &1u16.to_le_bytes(),
        &0u16.to_le_bytes(),
        &28u16.to_le_bytes(),
        &12u16.to_le_bytes(),
        &blk.to_le_bytes(),
        &total.to_le_bytes(),
        &chunks.to_le_bytes(),
        &0u32.to_le_bytes(),
    ];
    let mut at = 0usize;
    for f in fields {
        let end = at.saturating_add(f.len());
        if let Some(dst) = h.get_mut(at..end) {
            dst.copy_from_slice(f);
        }
        at = end;
    }
    Ok(h)
}

/// What a block of a window is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    DontCare,
    Fill([u8; 4]),
    Raw,
}

/// The 32-bit value `b` repeats, if it is one (a multiple of 4 bytes equal to itself
/// shifted by 4).
fn fill_value(b: &[u8]) -> Option<[u8; 4]> {
    let first: [u8; 4] = b.get(..4)?.try_into().ok()?;
    let n = b.len();
    let rest = b.get(4..)?;
    let head = b.get(..n.checked_sub(4)?)?;
    (n % 4 == 0 && rest == head).then_some(first)
}

/// Encodes window `w` (its bytes `data`, ignored when it is unmapped) as chunks appended to
/// `out`: DONT_CARE for blocks outside its runs, FILL for blocks of one 32-bit value, RAW
/// for the rest; consecutive blocks of one kind share a chunk, up to [`MAX_CHUNK_BYTES`].
pub(crate) fn pack(
    w: &Window,
    data: &[u8],
    block: u64,
    out: &mut Vec<u8>,
) -> Result<Counts, EncodeError> {
    let mut counts = Counts {
        block,
        ..Counts::default()
    };
    let blocks = w.len.checked_div(block).unwrap_or(0);
    let max_raw = MAX_CHUNK_BYTES
        .saturating_sub(u64::from(CHUNK_HEADER_BYTES))
        .checked_div(block)
        .unwrap_or(1)
        .max(1);
    let max_any = u64::from(u32::MAX);
    let mut runs = w.runs.iter().peekable();
    // The chunk being gathered: kind, first block (in the window), block count.
    let mut cur: Option<(Kind, u64, u64)> = None;
    for i in 0..blocks {
        let at = w.offset.saturating_add(i.saturating_mul(block));
        while runs.next_if(|&&(_, e)| e <= at).is_some() {}
        let mapped = runs.peek().is_some_and(|&&(s, _)| s <= at);
        let kind = if mapped {
            let from = usize::try_from(i.saturating_mul(block)).unwrap_or(usize::MAX);
            let to = from.saturating_add(usize::try_from(block).unwrap_or(0));
            let b = data.get(from..to).ok_or(EncodeError::OutOfOrder {
                expected: w.len,
                got: super::len_u64(data),
            })?;
            fill_value(b).map_or(Kind::Raw, Kind::Fill)
        } else {
            Kind::DontCare
        };
        cur = match cur {
            Some((k, first, n))
                if k == kind && n < if k == Kind::Raw { max_raw } else { max_any } =>
            {
                Some((k, first, n.saturating_add(1)))
            }
            Some(c) => {
                emit(c, data, block, out, &mut counts)?;
                Some((kind, i, 1))
            }
            None => Some((kind, i, 1)),
        };
    }
    if let Some(c) = cur {
        emit(c, data, block, out, &mut counts)?;
    }
    Ok(counts)
}

fn emit(
    (kind, first, n): (Kind, u64, u64),
    data: &[u8],
    block: u64,
    out: &mut Vec<u8>,
    counts: &mut Counts,
) -> Result<(), EncodeError> {
    let too_big = || unsupported(format!("a chunk of {n} blocks"));
    let blocks = u32::try_from(n).map_err(|_| too_big())?;
    let bytes = n.checked_mul(block).ok_or_else(too_big)?;
    let (ty, payload): (u16, &[u8]) = match kind {
        Kind::DontCare => (DONT_CARE, &[]),
        Kind::Fill(ref v) => (FILL, v),
        Kind::Raw => {
            let from = usize::try_from(first.saturating_mul(block)).map_err(|_| too_big())?;
            let len = usize::try_from(bytes).map_err(|_| too_big())?;
            let d = data
                .get(from..from.saturating_add(len))
                .ok_or_else(too_big)?;
            (RAW, d)
        }
    };
    let total = u32::try_from(payload.len())
        .ok()
        .and_then(|p| p.checked_add(CHUNK_HEADER_BYTES))
        .ok_or_else(too_big)?;
    out.extend_from_slice(&ty.to_le_bytes());
    out.extend_from_slice(&0u16.to_le_bytes());
    out.extend_from_slice(&blocks.to_le_bytes());
    out.extend_from_slice(&total.to_le_bytes());
    out.extend_from_slice(payload);
    counts.chunks = counts.chunks.checked_add(1).ok_or_else(too_big)?;
    let slot = match kind {
        Kind::DontCare => &mut counts.dont_care,
        Kind::Fill(_) => &mut counts.fill,
        Kind::Raw => &mut counts.raw,
    };
    *slot = slot.saturating_add(bytes);
    Ok(())
}
