//! The compressors: in pure Rust zlib (miniz_oxide), xz (an LZMA2 stream from lzma-rust2 in
//! an xz container written here, CRC32 check, as the kernel's xz decoder wants), lz4 blocks
//! (lz4_flex); zstd frames from libzstd (compiled to wasm32 too, so the page writes the same
//! bytes).

use std::io::Write;

use crate::options::Compression;

/// Compresses `data`; `None` when the result is not smaller (the caller stores it as is).
pub(crate) fn compress(
    c: Compression,
    level: Option<u32>,
    dict: u32,
    data: &[u8],
) -> Option<Vec<u8>> {
    let out = match c {
        Compression::Gzip => {
            let level = level.unwrap_or(9).min(10);
            miniz_oxide::deflate::compress_to_vec_zlib(data, u8::try_from(level).unwrap_or(9))
        }
        Compression::Lz4 => lz4_flex::block::compress(data),
        Compression::Zstd => zstd(data, level)?,
        Compression::Xz => xz(data, level.unwrap_or(6), dict)?,
    };
    (out.len() < data.len()).then_some(out)
}

/// A zstd frame: libzstd at `level` (default 15, as mksquashfs), on the host and in the
/// browser alike (the same library, so the same bytes).
fn zstd(data: &[u8], level: Option<u32>) -> Option<Vec<u8>> {
    let level = i32::try_from(level.unwrap_or(15)).unwrap_or(15);
    zstd::bulk::compress(data, level).ok()
}

/// The LZMA2 dictionary-size byte for a power of two from 4 KiB (`2 * (log2 - 12)`).
fn dict_byte(dict: u32) -> u8 {
    let log = dict.max(4096).next_power_of_two().ilog2();
    u8::try_from((log - 12) * 2).unwrap_or(0)
}

/// Appends `v` as an xz multibyte integer.
fn varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push(u8::try_from(v & 0x7f).unwrap_or(0) | 0x80);
        v >>= 7;
    }
    out.push(u8::try_from(v).unwrap_or(0));
}

fn crc32(data: &[u8]) -> [u8; 4] {
    crc32fast::hash(data).to_le_bytes()
}

/// One xz stream holding one block of `data`: LZMA2 with a `dict`-byte dictionary, CRC32
/// check.
fn xz(data: &[u8], preset: u32, dict: u32) -> Option<Vec<u8>> {
    let dict = dict.max(4096).next_power_of_two();
    let mut opts = lzma_rust2::Lzma2Options::with_preset(preset.min(9));
    opts.lzma_options.dict_size = dict;
    let mut w = lzma_rust2::Lzma2Writer::new(Vec::new(), opts);
    w.write_all(data).ok()?;
    let lzma2 = w.finish().ok()?;

    const FLAGS: [u8; 2] = [0x00, 0x01]; // check: CRC32
    let mut out = Vec::with_capacity(lzma2.len() + 64);
    // Stream header.
    out.extend_from_slice(&[0xfd, b'7', b'z', b'X', b'Z', 0x00]);
    out.extend_from_slice(&FLAGS);
    out.extend_from_slice(&crc32(&FLAGS));
    // Block header: size, flags (one filter, no sizes), LZMA2 filter with its dictionary byte.
    let mut header = vec![0u8, 0x00, 0x21, 0x01, dict_byte(dict)];
    header.resize(8, 0);
    header[0] = u8::try_from((header.len() + 4) / 4 - 1).unwrap_or(0);
    let hcrc = crc32(&header);
    header.extend_from_slice(&hcrc);
    let block_start = out.len();
    out.extend_from_slice(&header);
    out.extend_from_slice(&lzma2);
    let unpadded = (out.len() - block_start) as u64 + 4;
    while (out.len() - block_start) % 4 != 0 {
        out.push(0);
    }
    out.extend_from_slice(&crc32(data));
    // Index: one record.
    let index_start = out.len();
    out.push(0x00);
    varint(&mut out, 1);
    varint(&mut out, unpadded);
    varint(&mut out, data.len() as u64);
    while (out.len() - index_start) % 4 != 0 {
        out.push(0);
    }
    let icrc = crc32(&out[index_start..]);
    out.extend_from_slice(&icrc);
    let index_size = (out.len() - index_start) as u32;
    // Stream footer.
    let mut footer = Vec::with_capacity(6);
    footer.extend_from_slice(&(index_size / 4 - 1).to_le_bytes());
    footer.extend_from_slice(&FLAGS);
    out.extend_from_slice(&crc32(&footer));
    out.extend_from_slice(&footer);
    out.extend_from_slice(b"YZ");
    Some(out)
}

/// The compressor options that follow the superblock, when the kernel or readers need them:
/// lz4's (always: the kernel refuses lz4 without), gzip's and zstd's when their level is not
/// the default.
pub(crate) fn options_block(c: Compression, level: Option<u32>, block: u32) -> Option<Vec<u8>> {
    match c {
        Compression::Lz4 => Some([1u32.to_le_bytes(), 0u32.to_le_bytes()].concat()),
        Compression::Zstd if level.is_some_and(|l| l != 15) => {
            Some(level.unwrap_or(15).to_le_bytes().to_vec())
        }
        Compression::Gzip if level.is_some_and(|l| l != 9) => {
            let mut v = level.unwrap_or(9).to_le_bytes().to_vec();
            v.extend_from_slice(&15u16.to_le_bytes());
            v.extend_from_slice(&0u16.to_le_bytes());
            Some(v)
        }
        _ => {
            // xz needs none: the kernel's dictionary is max(block, 8 KiB), ours the block.
            let _ = block;
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn xz_is_a_valid_stream_shape() {
        let data: Vec<u8> = (0..20000u32).map(|i| (i % 251) as u8).collect();
        let z = xz(&data, 6, 131072).unwrap();
        assert_eq!(&z[..6], &[0xfd, b'7', b'z', b'X', b'Z', 0]);
        assert_eq!(&z[z.len() - 2..], b"YZ");
        assert_eq!(z.len() % 4, 0);
        assert!(z.len() < data.len());
        assert_eq!(dict_byte(131072), 10);
        assert_eq!(dict_byte(4096), 0);
    }
}
