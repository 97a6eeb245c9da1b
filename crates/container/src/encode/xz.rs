//! xz (the `.xz` file format 1.x of xz-utils): one stream whose blocks are one erase block
//! each, with both sizes in every block header, CRC32 checks, and the index a reader seeks
//! by.
//!
//! ```text
//! stream header  FD 37 7A 58 5A 00 | 00 01 (CRC32 check) | CRC32
//! block          header (size, flags 0xC0, compressed size, uncompressed size, LZMA2 filter
//!                with its dictionary byte, padding, CRC32) | LZMA2 data | padding | CRC32
//! index          00 | count | (unpadded size, uncompressed size)… | padding | CRC32
//! stream footer  CRC32 | backward size | 00 01 | "YZ"
//! ```
//! The LZMA2 data comes from liblzma; everything around it is written here.

use super::{EncodeError, Format};
#[cfg(feature = "xz")]
use super::{Packed, Unit};

const MAGIC: [u8; 6] = [0xFD, b'7', b'z', b'X', b'Z', 0x00];
/// Stream flags: check type CRC32.
const FLAGS: [u8; 2] = [0x00, 0x01];
/// Stream header bytes.
pub(crate) const STREAM_HEADER_BYTES: u64 = 12;
/// The LZMA2 filter id.
#[cfg(any(feature = "xz", test))]
const LZMA2: u64 = 0x21;

fn crc32(data: &[u8]) -> u32 {
    crc32fast::hash(data)
}

fn unsupported(reason: String) -> EncodeError {
    EncodeError::Unsupported {
        format: Format::Xz,
        reason,
    }
}

/// Appends `v` as an xz variable-length integer (7 bits a byte, low first).
fn vli(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push(u8::try_from(v & 0x7F).unwrap_or(0) | 0x80);
        v >>= 7;
    }
    out.push(u8::try_from(v).unwrap_or(0));
}

/// Appends zeros until `out.len()` is a multiple of 4.
fn pad4(out: &mut Vec<u8>) {
    while out.len() % 4 != 0 {
        out.push(0);
    }
}

/// The stream header.
pub(crate) fn stream_header() -> [u8; 12] {
    let mut h = [0u8; 12];
    let crc = crc32(&FLAGS).to_le_bytes();
    for (dst, src) in h.iter_mut().zip(MAGIC.iter().chain(&FLAGS).chain(&crc)) {
        *dst = *src;
    }
    h
}

/// A whole block: header with both sizes and the LZMA2 filter (`dict` its dictionary
/// byte), the data, padding and the CRC32 of the uncompressed bytes. Returns the block and
/// its unpadded size (what the index records).
#[cfg(any(feature = "xz", test))]
fn block(lzma2: &[u8], uncompressed: u64, dict: u8, check: u32) -> (Vec<u8>, u64) {
    let compressed = u64::try_from(lzma2.len()).unwrap_or(u64::MAX);
    let mut b = Vec::with_capacity(lzma2.len().saturating_add(40));
    b.push(0); // header size, set below
    b.push(0xC0); // one filter; compressed and uncompressed sizes present
    vli(&mut b, compressed);
    vli(&mut b, uncompressed);
    vli(&mut b, LZMA2);
    vli(&mut b, 1);
    b.push(dict);
    // Header padding so that the header with its CRC32 is a multiple of 4.
    pad4(&mut b);
    let header_len = b.len().saturating_add(4);
    if let Some(first) = b.first_mut() {
        *first = u8::try_from((header_len / 4).saturating_sub(1)).unwrap_or(0);
    }
    let crc = crc32(&b);
    b.extend_from_slice(&crc.to_le_bytes());
    b.extend_from_slice(lzma2);
    let unpadded = u64::try_from(header_len)
        .unwrap_or(0)
        .saturating_add(compressed)
        .saturating_add(4);
    pad4(&mut b);
    b.extend_from_slice(&check.to_le_bytes());
    (b, unpadded)
}

/// The index, built as blocks are added.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Index {
    records: Vec<u8>,
    count: u64,
}

impl Index {
    pub(crate) fn push(&mut self, unpadded: u64, uncompressed: u64) {
        vli(&mut self.records, unpadded);
        vli(&mut self.records, uncompressed);
        self.count = self.count.saturating_add(1);
    }

    /// The index and the stream footer.
    pub(crate) fn finish(&self) -> Result<Vec<u8>, EncodeError> {
        let mut out = vec![0u8];
        vli(&mut out, self.count);
        out.extend_from_slice(&self.records);
        pad4(&mut out);
        let crc = crc32(&out);
        out.extend_from_slice(&crc.to_le_bytes());
        let backward = u32::try_from((out.len() / 4).saturating_sub(1))
            .map_err(|_| unsupported("the index is larger than 16 GiB".into()))?;
        let mut tail = Vec::with_capacity(6);
        tail.extend_from_slice(&backward.to_le_bytes());
        tail.extend_from_slice(&FLAGS);
        out.extend_from_slice(&crc32(&tail).to_le_bytes());
        out.extend_from_slice(&tail);
        out.extend_from_slice(b"YZ");
        Ok(out)
    }
}

/// Reads a variable-length integer at `*at`, advancing it.
#[cfg(any(feature = "xz", test))]
fn read_vli(b: &[u8], at: &mut usize) -> Option<u64> {
    let mut v = 0u64;
    for i in 0..9u32 {
        let byte = *b.get(*at)?;
        *at = at.checked_add(1)?;
        v |= u64::from(byte & 0x7F).checked_shl(i.checked_mul(7)?)?;
        if byte & 0x80 == 0 {
            return Some(v);
        }
    }
    None
}

/// The LZMA2 data, dictionary byte and uncompressed size of the single block of the xz
/// stream `s`, as liblzma's stream encoder writes it (no check, no sizes in the block
/// header): found through the stream footer and index. `None` when `s` is not such a
/// stream.
#[cfg(any(feature = "xz", test))]
fn single_block(s: &[u8]) -> Option<(&[u8], u8, u64)> {
    if s.get(..6)? != MAGIC || s.get(6..8)? != [0, 0] {
        return None;
    }
    let footer = s.get(s.len().checked_sub(12)?..)?;
    if footer.get(10..12)? != b"YZ" || footer.get(8..10)? != [0, 0] {
        return None;
    }
    let backward = u32::from_le_bytes(footer.get(4..8)?.try_into().ok()?);
    let index_len = usize::try_from(backward)
        .ok()?
        .checked_add(1)?
        .checked_mul(4)?;
    let index_at = s.len().checked_sub(12)?.checked_sub(index_len)?;
    let index = s.get(index_at..)?;
    let mut at = 1usize;
    if *index.first()? != 0 || read_vli(index, &mut at)? != 1 {
        return None;
    }
    let unpadded = usize::try_from(read_vli(index, &mut at)?).ok()?;
    let uncompressed = read_vli(index, &mut at)?;
    // The block header: size byte, flags (one filter, no sizes), LZMA2 with one byte.
    let header = s.get(12..)?;
    let header_len = usize::from(*header.first()?)
        .checked_add(1)?
        .checked_mul(4)?;
    let mut at = 2usize;
    if *header.get(1)? != 0
        || read_vli(header, &mut at)? != LZMA2
        || read_vli(header, &mut at)? != 1
    {
        return None;
    }
    let dict = *header.get(at)?;
    let data_len = unpadded.checked_sub(header_len)?;
    let from = header_len.checked_add(12)?;
    let data = s.get(from..from.checked_add(data_len)?)?;
    Some((data, dict, uncompressed))
}

/// liblzma's LZMA2 at one preset, with the dictionary no larger than a window needs.
#[cfg(feature = "xz")]
pub(crate) struct Lzma2 {
    preset: u32,
    dict: u32,
    out: Vec<u8>,
    /// The zstd level-1 context and buffer that judge pieces (made on first use, then kept).
    probe: Option<(zstd::bulk::Compressor<'static>, Vec<u8>)>,
}

#[cfg(feature = "xz")]
impl Lzma2 {
    pub(crate) fn new(preset: u32, window: u64) -> Self {
        // The preset's dictionary, but no larger than the window (rounded up to a power of
        // two, at least LZMA2's 4 KiB): a bigger one only costs memory in the encoder and
        // every decoder.
        let preset_dict: u32 = match preset {
            0 => 256 << 10,
            1 => 1 << 20,
            2 => 2 << 20,
            3 | 4 => 4 << 20,
            5 | 6 => 8 << 20,
            7 => 16 << 20,
            8 => 32 << 20,
            _ => 64 << 20,
        };
        let need = u32::try_from(window.max(4096).next_power_of_two()).unwrap_or(u32::MAX);
        Lzma2 {
            preset,
            dict: preset_dict.min(need),
            out: Vec::new(),
            probe: None,
        }
    }

    /// liblzma's LZMA2 data of `data` at `preset` (with this encoder's dictionary) and its
    /// dictionary byte, left in `self.out`.
    fn lzma2(&mut self, preset: u32, data: &[u8]) -> Result<(usize, usize, u8), EncodeError> {
        use xz2::stream::{Action, Check, Filters, LzmaOptions, Status, Stream};
        let mut opts = LzmaOptions::new_preset(preset).map_err(|e| codec(&e))?;
        opts.dict_size(self.dict);
        let mut filters = Filters::new();
        filters.lzma2(&opts);
        let mut enc = Stream::new_stream_encoder(&filters, Check::None).map_err(|e| codec(&e))?;
        self.out.clear();
        self.out.reserve(
            data.len()
                .saturating_add(data.len() / 64)
                .saturating_add(4096),
        );
        let mut input = data;
        loop {
            if self.out.len() == self.out.capacity() {
                self.out.reserve(64 << 10);
            }
            let before = enc.total_in();
            let status = enc
                .process_vec(input, &mut self.out, Action::Finish)
                .map_err(|e| codec(&e))?;
            let used = usize::try_from(enc.total_in().saturating_sub(before)).unwrap_or(0);
            input = input.get(used..).unwrap_or_default();
            if status == Status::StreamEnd {
                break;
            }
        }
        let (lzma2, dict, n) =
            single_block(&self.out).ok_or_else(|| codec(&"unexpected stream layout"))?;
        if n != u64::try_from(data.len()).unwrap_or(u64::MAX) {
            return Err(codec(&"block size differs from its input"));
        }
        // Where the LZMA2 data sits in `self.out`.
        let from = lzma2
            .as_ptr()
            .addr()
            .saturating_sub(self.out.as_ptr().addr());
        Ok((from, lzma2.len(), dict))
    }

    pub(crate) fn pack(&mut self, data: &[u8], zero: bool) -> Result<Packed, EncodeError> {
        let uncompressed = u64::try_from(data.len()).unwrap_or(u64::MAX);
        // Incompressible windows (compressed files, random bytes) cost LZMA2 at preset 6
        // about 2 MB/s a core for nothing: when the bytes look random (order-0 entropy)
        // and LZMA2's fastest preset, with the same dictionary, saves nothing either, the
        // window is stored in LZMA2's uncompressed chunks, as liblzma itself would store
        // it. Deterministic (a function of the bytes), valid for every xz decoder.
        if !zero {
            if let Some(packed) = self.pack_mixed(data, uncompressed)? {
                return Ok(packed);
            }
        }
        let (from, len, dict) = self.lzma2(self.preset, data)?;
        let lzma2 = self
            .out
            .get(from..from.saturating_add(len))
            .ok_or_else(|| codec(&"unexpected stream layout"))?;
        let (bytes, unpadded) = block(lzma2, uncompressed, dict, crc32(data));
        Ok(Packed {
            bytes,
            unit: Unit::Xz {
                unpadded,
                uncompressed,
                zero,
            },
        })
    }
}

#[cfg(feature = "xz")]
impl Lzma2 {
    /// Whether `piece` is stored rather than compressed: its bytes look random and zstd at
    /// level 1 (a few hundred MB/s, where LZMA2 runs at 2) saves less than 2% of it — the
    /// zero tails of a filesystem's last blocks beside random-looking file data, which LZMA2
    /// would spend a second a megabyte to save.
    fn incompressible(&mut self, piece: &[u8]) -> Result<bool, EncodeError> {
        if piece.len() < STORED_CHUNK || !looks_random(piece) {
            return Ok(false);
        }
        let (z, buf) = match &mut self.probe {
            Some(p) => p,
            none => {
                // A window as large as the piece, so that a repeat anywhere in it is found.
                let mut z = zstd::bulk::Compressor::new(1).map_err(|e| codec(&e))?;
                z.set_parameter(zstd::zstd_safe::CParameter::WindowLog(21))
                    .map_err(|e| codec(&e))?;
                none.insert((z, Vec::new()))
            }
        };
        buf.clear();
        buf.reserve(zstd::zstd_safe::compress_bound(piece.len()));
        let n = z.compress_to_buffer(piece, buf).map_err(|e| codec(&e))?;
        Ok(n.saturating_mul(50) >= piece.len().saturating_mul(49))
    }

    /// The LZMA2 dictionary-size byte of this encoder's dictionary (the smallest size of
    /// the form 2^n or 3·2^n, n ≥ 11, that holds it).
    fn dict_byte(&self) -> u8 {
        let mut b = 0u8;
        while b < 40 {
            let size = (2u64 | u64::from(b & 1)) << (u32::from(b / 2) + 11);
            if size >= u64::from(self.dict) {
                break;
            }
            b = b.saturating_add(1);
        }
        b
    }

    /// A window that is partly incompressible (file data of random-looking bytes beside
    /// metadata, code or text: most erase blocks of a real image): its 1 MiB pieces are
    /// judged one by one; runs of incompressible ones go into LZMA2's uncompressed chunks,
    /// runs of the others through the preset, each run a dictionary reset, in one LZMA2
    /// stream (a block of the window, as before). `None` when the window is all one kind
    /// (the caller packs it whole).
    fn pack_mixed(
        &mut self,
        data: &[u8],
        uncompressed: u64,
    ) -> Result<Option<Packed>, EncodeError> {
        let mut kinds = Vec::with_capacity(data.len().div_ceil(MIXED_PIECE));
        for piece in data.chunks(MIXED_PIECE) {
            kinds.push(self.incompressible(piece)?);
        }
        if !kinds.iter().any(|&k| k) {
            return Ok(None);
        }
        let mut l2 = Vec::with_capacity(data.len());
        let mut dict = None;
        let mut at = 0usize;
        for run in kinds.chunk_by(|a, b| a == b) {
            let len = run.len().saturating_mul(MIXED_PIECE);
            let end = at.saturating_add(len).min(data.len());
            let bytes = data.get(at..end).unwrap_or_default();
            if run.first() == Some(&true) {
                stored_into(&mut l2, bytes, at == 0);
            } else {
                let (from, n, d) = self.lzma2(self.preset, bytes)?;
                dict = Some(d);
                // liblzma's data starts with a dictionary reset and ends with the end mark,
                // which only the last run keeps (pushed below).
                let stream = self
                    .out
                    .get(from..from.saturating_add(n))
                    .and_then(|s| s.strip_suffix(&[0x00]))
                    .ok_or_else(|| codec(&"unexpected LZMA2 end"))?;
                l2.extend_from_slice(stream);
            }
            at = end;
        }
        l2.push(0x00);
        // All stored: the dictionary byte only has to be valid (the preset's, as always).
        let dict = dict.unwrap_or_else(|| self.dict_byte());
        let (bytes, unpadded) = block(&l2, uncompressed, dict, crc32(data));
        Ok(Some(Packed {
            bytes,
            unit: Unit::Xz {
                unpadded,
                uncompressed,
                zero: false,
            },
        }))
    }
}

#[cfg(feature = "xz")]
fn codec(e: &dyn core::fmt::Display) -> EncodeError {
    EncodeError::Codec {
        format: Format::Xz,
        message: e.to_string(),
    }
}

/// Largest LZMA2 uncompressed chunk.
#[cfg(any(feature = "xz", test))]
const STORED_CHUNK: usize = 64 << 10;

/// Bytes of `len` bytes in LZMA2 uncompressed chunks: 3 header bytes a chunk, the end mark.
#[cfg(test)]
fn stored_len(len: usize) -> usize {
    len.saturating_add(len.div_ceil(STORED_CHUNK).saturating_mul(3))
        .saturating_add(1)
}

/// `data` as LZMA2 uncompressed chunks (the first resets the dictionary) and the end mark.
#[cfg(test)]
fn stored_chunks(data: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(stored_len(data.len()));
    stored_into(&mut out, data, true);
    out.push(0x00);
    out
}

/// Appends `data` as LZMA2 uncompressed chunks, the first resetting the dictionary when
/// `reset` (the start of a block), without the end mark.
#[cfg(any(feature = "xz", test))]
fn stored_into(out: &mut Vec<u8>, data: &[u8], reset: bool) {
    for (i, chunk) in data.chunks(STORED_CHUNK).enumerate() {
        out.push(if i == 0 && reset { 0x01 } else { 0x02 });
        let n = u16::try_from(chunk.len().saturating_sub(1)).unwrap_or(u16::MAX);
        out.extend_from_slice(&n.to_be_bytes());
        out.extend_from_slice(chunk);
    }
}

/// The pieces a partly incompressible window is judged in.
#[cfg(feature = "xz")]
const MIXED_PIECE: usize = 1 << 20;

/// Whether the byte histogram of `data` is that of random bytes (order-0 entropy above
/// 7.9 bits a byte): text, code and filesystem metadata stay far below.
#[cfg(any(feature = "xz", test))]
fn looks_random(data: &[u8]) -> bool {
    if data.len() < STORED_CHUNK {
        return false;
    }
    let mut counts = [0u64; 256];
    for &b in data {
        if let Some(c) = counts.get_mut(usize::from(b)) {
            *c = c.saturating_add(1);
        }
    }
    #[expect(clippy::as_conversions, reason = "an estimate in floating point")]
    let n = data.len() as f64;
    let bits: f64 = counts
        .iter()
        .filter(|&&c| c > 0)
        .map(|&c| {
            #[expect(clippy::as_conversions, reason = "an estimate in floating point")]
            let p = c as f64 / n;
            -p * p.log2()
        })
        .sum();
    bits > 7.9
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
    fn vli_round_trip() {
        for v in [0u64, 1, 0x7F, 0x80, 0x3FFF, 0x4000, 1 << 40, u64::MAX >> 1] {
            let mut b = Vec::new();
            vli(&mut b, v);
            let mut at = 0;
            assert_eq!(read_vli(&b, &mut at), Some(v), "{v}");
            assert_eq!(at, b.len());
        }
        assert_eq!(read_vli(&[0x80; 12], &mut 0), None);
    }

    #[test]
    fn block_and_index_layout() {
        let (b, unpadded) = block(&[1, 2, 3, 4, 5], 100, 16, 0xDEAD_BEEF);
        // Header: size byte, flags, 5, 100, 0x21, 1, dict, padding → 8 + CRC = 12 bytes.
        assert_eq!(b[0], 2);
        assert_eq!(&b[1..7], &[0xC0, 5, 100, 0x21, 1, 16]);
        assert_eq!(crc32(&b[..8]).to_le_bytes(), b[8..12]);
        assert_eq!(unpadded, 12 + 5 + 4);
        assert_eq!(b.len(), 12 + 8 + 4);
        assert_eq!(&b[b.len() - 4..], &0xDEAD_BEEFu32.to_le_bytes());
        let mut ix = Index::default();
        ix.push(unpadded, 100);
        let t = ix.finish().unwrap();
        assert_eq!(&t[t.len() - 2..], b"YZ");
        let backward = u32::from_le_bytes(t[t.len() - 8..t.len() - 4].try_into().unwrap());
        assert_eq!((backward as usize + 1) * 4, t.len() - 12);
        // A stream made of these parts is read back by the single-block reader (with the
        // flags of a liblzma stream: no sizes in the header, no check).
        assert_eq!(stream_header()[6..8], FLAGS);
    }

    #[test]
    fn single_block_refuses_junk() {
        assert_eq!(single_block(&[]), None);
        assert_eq!(single_block(&[0u8; 64]), None);
        let mut s = stream_header().to_vec();
        s.extend_from_slice(&[0xFF; 40]);
        assert_eq!(single_block(&s), None);
    }

    #[test]
    fn stored_chunks_layout() {
        assert_eq!(stored_chunks(&[]), vec![0]);
        let data = vec![9u8; 70_000];
        let s = stored_chunks(&data);
        assert_eq!(s.len(), stored_len(data.len()));
        assert_eq!(&s[..3], &[0x01, 0xFF, 0xFF]);
        assert_eq!(&s[3 + 65536..3 + 65536 + 3], &[0x02, 0x11, 0x6F]);
        assert_eq!(s.last(), Some(&0));
        assert!(!looks_random(&data));
        assert!(!looks_random(&[1, 2, 3]));
    }

    /// Random bytes take the stored path; liblzma decodes them, and the same bytes give
    /// the same block whichever encoder (thread) packs them.
    #[cfg(feature = "xz")]
    #[test]
    fn random_windows_are_stored_and_decode() {
        let mut x = 0x9E37_79B9_7F4A_7C15u64;
        let data: Vec<u8> = (0..1_000_000)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                (x >> 24) as u8
            })
            .collect();
        assert!(looks_random(&data));
        let p = Lzma2::new(6, 4 << 20).pack(&data, false).unwrap();
        let q = Lzma2::new(6, 4 << 20).pack(&data, false).unwrap();
        assert_eq!(p.bytes(), q.bytes());
        // Header (16 with these sizes) + stored chunks + padding + CRC32.
        assert!(p.bytes().len() <= 16 + stored_len(data.len()) + 3 + 4);
        assert_eq!(decode_alone(&p, data.len()), data);
        // Two copies of 512 KiB of random bytes look random but compress: LZMA2 is used.
        let twice: Vec<u8> = data[..512 << 10].repeat(2);
        let p = Lzma2::new(6, 4 << 20).pack(&twice, false).unwrap();
        assert!(p.bytes().len() < 600 << 10, "{}", p.bytes().len());
    }

    /// `p`, a packed block, as a whole .xz file of its own, decoded by liblzma.
    #[cfg(feature = "xz")]
    fn decode_alone(p: &Packed, len: usize) -> Vec<u8> {
        let Unit::Xz {
            unpadded,
            uncompressed,
            ..
        } = p.unit
        else {
            unreachable!()
        };
        let mut file = stream_header().to_vec();
        file.extend_from_slice(p.bytes());
        let mut ix = Index::default();
        ix.push(unpadded, uncompressed);
        file.extend_from_slice(&ix.finish().unwrap());
        let mut dec = xz2::stream::Stream::new_stream_decoder(u64::MAX, 0).unwrap();
        let mut out = Vec::with_capacity(len);
        dec.process_vec(&file, &mut out, xz2::stream::Action::Finish)
            .unwrap();
        out
    }

    /// A window of random pieces beside compressible ones (file data beside code or text):
    /// the random runs are stored, the rest compressed, in one block liblzma decodes.
    #[cfg(feature = "xz")]
    #[test]
    fn mixed_windows_store_the_random_pieces_and_compress_the_rest() {
        let mut x = 0x2545_f491_4f6c_dd1du64;
        let mut random = |n: usize| -> Vec<u8> {
            (0..n)
                .map(|_| {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    (x >> 24) as u8
                })
                .collect()
        };
        let text: Vec<u8> = b"the quick brown fox jumps over the lazy dog 0123456789\n"
            .iter()
            .copied()
            .cycle()
            .take(2 << 20)
            .collect();
        // random 3 MiB (with a zero tail in it), text 2 MiB, random 3 MiB
        let mut data = random(3 << 20);
        for b in &mut data[(2 << 20)..(2 << 20) + 3000] {
            *b = 0;
        }
        data.extend_from_slice(&text);
        data.extend_from_slice(&random(3 << 20));
        let mut c = Lzma2::new(6, 8 << 20);
        let p = c.pack(&data, false).unwrap();
        assert_eq!(
            p.bytes(),
            Lzma2::new(6, 8 << 20).pack(&data, false).unwrap().bytes()
        );
        // Random pieces stored (6 MiB and their chunk headers), the text a few KiB.
        let n = p.bytes().len();
        assert!(n > 6 << 20 && n < (6 << 20) + (200 << 10), "{n}");
        assert_eq!(decode_alone(&p, data.len()), data);
    }

    #[cfg(feature = "xz")]
    #[test]
    fn liblzma_decodes_our_stream() {
        let data: Vec<u8> = (0..300_000u32).map(|i| (i / 7) as u8).collect();
        let mut c = Lzma2::new(6, 4 << 20);
        let mut file = stream_header().to_vec();
        let mut ix = Index::default();
        for part in [&data[..], &vec![0u8; 70_000][..]] {
            let p = c.pack(part, false).unwrap();
            let Unit::Xz {
                unpadded,
                uncompressed,
                ..
            } = p.unit
            else {
                unreachable!()
            };
            ix.push(unpadded, uncompressed);
            file.extend_from_slice(p.bytes());
        }
        file.extend_from_slice(&ix.finish().unwrap());
        let mut dec = xz2::stream::Stream::new_stream_decoder(u64::MAX, 0).unwrap();
        let mut out = Vec::with_capacity(400_000);
        dec.process_vec(&file, &mut out, xz2::stream::Action::Finish)
            .unwrap();
        assert_eq!(out.len(), 370_000);
        assert_eq!(&out[..300_000], &data[..]);
        assert!(out[300_000..].iter().all(|&b| b == 0));
    }
}
