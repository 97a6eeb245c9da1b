#![expect(
    clippy::unwrap_used,
    clippy::indexing_slicing,
    clippy::arithmetic_side_effects,
    clippy::as_conversions,
    clippy::panic,
    reason = "tests"
)]

use super::*;
use blockwise_geometry::{BlockSink, ContentRef};
use proptest::prelude::*;

/// A parsed Android sparse chunk: type, image offset, length in bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Chunk {
    ty: u16,
    at: u64,
    len: u64,
}

/// Expands an Android sparse image (strictly: header fields, chunk sizes, totals) into the
/// raw bytes and its chunk list.
fn unsparse(b: &[u8]) -> (Vec<u8>, Vec<Chunk>, u32) {
    let u16_at = |i: usize| u16::from_le_bytes(b[i..i + 2].try_into().unwrap());
    let u32_at = |i: usize| u32::from_le_bytes(b[i..i + 4].try_into().unwrap());
    assert_eq!(u32_at(0), SIMG_MAGIC);
    assert_eq!(
        (u16_at(4), u16_at(6), u16_at(8), u16_at(10)),
        (1, 0, 28, 12)
    );
    let block = u32_at(12) as u64;
    let total = u32_at(16) as u64;
    let chunks = u32_at(20);
    let mut out = vec![0u8; (block * total) as usize];
    let mut list = Vec::new();
    let mut at = 28usize;
    let mut pos = 0u64;
    for _ in 0..chunks {
        let ty = u16_at(at);
        let n = u32_at(at + 4) as u64 * block;
        let size = u32_at(at + 8) as usize;
        let body = &b[at + 12..at + size];
        match ty {
            0xCAC1 => {
                assert_eq!(body.len() as u64, n);
                out[pos as usize..(pos + n) as usize].copy_from_slice(body);
            }
            0xCAC2 => {
                assert_eq!(body.len(), 4);
                for w in out[pos as usize..(pos + n) as usize].chunks_mut(4) {
                    w.copy_from_slice(body);
                }
            }
            0xCAC3 => assert!(body.is_empty()),
            t => panic!("chunk type {t:#x}"),
        }
        list.push(Chunk {
            ty,
            at: pos,
            len: n,
        });
        pos += n;
        at += size;
    }
    assert_eq!(at, b.len(), "trailing bytes");
    assert_eq!(pos, block * total, "chunks cover the image");
    (out, list, block as u32)
}

/// Reads the whole map.
fn raw(map: &ImageMap, files: &Vec<Vec<u8>>) -> Vec<u8> {
    let mut v = vec![0u8; map.size() as usize];
    map.reader(files).read_at(0, &mut v).unwrap();
    v
}

fn files() -> Vec<Vec<u8>> {
    vec![
        (0..100_000u32).map(|i| (i * 31 % 251) as u8).collect(),
        vec![0u8; 50_000],
        [1u8, 2, 3, 4].repeat(20_000),
    ]
}

/// Checks the rules of a sparse image made from `map`: bytes, chunk boundaries, DONT_CARE
/// exactly where nothing is mapped.
fn check_simg(map: &ImageMap, files: &Vec<Vec<u8>>, erase: u64, b: &[u8], s: &Summary) {
    let (bytes, chunks, block) = unsparse(b);
    assert!(bytes == raw(map, files), "expanded bytes differ");
    let block = u64::from(block);
    assert_eq!(s.units, chunks.len() as u64);
    assert_eq!(s.output_bytes, b.len() as u64);
    let mapped = map.mapped_ranges();
    let touches = |a: u64, e: u64| mapped.iter().any(|&(s, t)| s < e && t > a);
    let mut dont_care = 0;
    for c in &chunks {
        assert_eq!(
            c.at / erase,
            (c.at + c.len - 1) / erase,
            "{c:?} crosses an erase block"
        );
        assert!(c.len + 12 <= 64 << 20);
        assert_eq!(c.len % block, 0);
        for blk in (c.at..c.at + c.len).step_by(block as usize) {
            assert_eq!(
                c.ty == 0xCAC3,
                !touches(blk, blk + block),
                "{c:?}: block {blk} DONT_CARE iff unmapped"
            );
        }
        if c.ty == 0xCAC3 {
            dont_care += c.len;
        }
    }
    assert_eq!(s.dont_care_bytes, dont_care);
    assert_eq!(s.data_bytes + s.fill_bytes + s.dont_care_bytes, map.size());
}

#[test]
fn sparse_chunks_follow_the_map() {
    let f = files();
    let erase = 128 << 10;
    let mut m = ImageMap::new(1 << 20);
    m.write_at(0, &[0x11; 512]).unwrap(); // block 0 RAW (partly)
    m.write_at(8192, &[0u8; 8192]).unwrap(); // zeros written: FILL 0, not DONT_CARE
    let r = |content, offset, len| ContentRef {
        content,
        offset,
        len,
    };
    m.write_content(64 << 10, r(2, 0, 3 * 4096), &f).unwrap(); // FILL 0x04030201
    m.write_content(120 << 10, r(0, 0, 20_000), &f).unwrap(); // RAW across the erase block
    let mut out = Vec::new();
    let opts = EncodeOptions::new(Format::AndroidSparse, erase);
    let s = encode_map(&m, &f, &opts, &mut out).unwrap();
    check_simg(&m, &f, erase, &out, &s);
    let (_, chunks, _) = unsparse(&out);
    let kinds: Vec<(u16, u64, u64)> = chunks.iter().map(|c| (c.ty, c.at, c.len)).collect();
    assert_eq!(
        kinds,
        vec![
            (0xCAC1, 0, 4096),
            (0xCAC3, 4096, 4096),
            (0xCAC2, 8192, 8192),
            (0xCAC3, 16384, 48 << 10),
            (0xCAC2, 64 << 10, 3 * 4096),
            (0xCAC3, 76 << 10, 44 << 10),
            (0xCAC1, 120 << 10, 8192),
            // The erase block boundary at 128 KiB cuts the RAW run.
            (0xCAC1, 128 << 10, 12288),
            (0xCAC3, 140 << 10, 116 << 10),
            (0xCAC3, 256 << 10, 128 << 10),
            (0xCAC3, 384 << 10, 128 << 10),
            (0xCAC3, 512 << 10, 128 << 10),
            (0xCAC3, 640 << 10, 128 << 10),
            (0xCAC3, 768 << 10, 128 << 10),
            (0xCAC3, 896 << 10, 128 << 10),
        ]
    );
}

#[test]
fn sparse_refuses_what_it_cannot_hold() {
    let m = ImageMap::new((1 << 20) + 512);
    let e = encode_map(
        &m,
        &Vec::<Vec<u8>>::new(),
        &EncodeOptions::new(Format::AndroidSparse, 1 << 20),
        &mut Vec::new(),
    )
    .unwrap_err();
    assert!(e.to_string().contains("multiple of 4096"), "{e}");
    // 2^32 blocks of 4 KiB do not fit the 32-bit count (16 TiB).
    assert!(Encoder::new(
        16 << 40,
        &EncodeOptions::new(Format::AndroidSparse, 4 << 20)
    )
    .is_err());
    assert!(Encoder::new(
        (16 << 40) - 4096,
        &EncodeOptions::new(Format::AndroidSparse, 4 << 20)
    )
    .is_ok());
    // A level is for compressors.
    let mut o = EncodeOptions::new(Format::AndroidSparse, 4 << 20);
    o.level = Some(3);
    assert!(Encoder::new(8 << 20, &o).is_err());
    // A 4096-byte sector keeps 4096-byte blocks; the erase block must hold whole blocks.
    let mut o = EncodeOptions::new(Format::AndroidSparse, 4 << 20);
    o.sector_bytes = 4096;
    assert_eq!(Encoder::new(8 << 20, &o).unwrap().block_bytes(), 4096);
    o.erase_block_bytes = 2048;
    assert!(Encoder::new(8 << 20, &o).is_err());
}

#[test]
fn windows_round_runs_to_blocks_and_clip_to_erase_blocks() {
    let opts = EncodeOptions::new(Format::AndroidSparse, 64 << 10);
    let enc = Encoder::new(256 << 10, &opts).unwrap();
    let mapped = [(100, 200), (5000, 70_000), (200_000, 200_001)];
    let w: Vec<Window> = enc.windows(&mapped).collect();
    assert_eq!(w.len(), 4);
    assert_eq!(w[0].runs, vec![(0, 65536)], "touching runs merge");
    assert_eq!(w[0].mapped_bytes, 100 + 65536 - 5000);
    assert_eq!(w[1].runs, vec![(65536, 73728)]);
    assert_eq!(w[1].mapped_bytes, 70_000 - 65536);
    assert!(w[2].is_unmapped());
    assert_eq!(w[3].runs, vec![(196_608, 200_704)]);
    assert_eq!(w[3].mapped_bytes, 1);
}

#[test]
fn encoder_checks_order() {
    let opts = EncodeOptions::new(Format::AndroidSparse, 64 << 10);
    let mut enc = Encoder::new(128 << 10, &opts).unwrap();
    let mut p = enc.packer().unwrap();
    let ws: Vec<Window> = enc.windows(&[]).collect();
    let p1 = p.pack(&ws[1], &[]).unwrap();
    assert!(enc.add(&ws[1], &p1).is_err());
    let p0 = p.pack(&ws[0], &[]).unwrap();
    enc.add(&ws[0], &p0).unwrap();
    let mut early = Encoder::new(128 << 10, &opts).unwrap();
    early.add(&ws[0], &p0).unwrap();
    assert!(early.finish().is_err(), "a window is missing");
    enc.add(&ws[1], &p1).unwrap();
    let f = enc.finish().unwrap();
    assert_eq!(f.header.len(), 28);
    assert_eq!(f.summary.units, 2);
    // Mapped window with the wrong number of bytes.
    let w = Window {
        offset: 0,
        len: 64 << 10,
        runs: vec![(0, 4096)],
        mapped_bytes: 4096,
    };
    assert!(p.pack(&w, &[0u8; 10]).is_err());
}

#[cfg(not(feature = "zstd"))]
#[test]
fn compressors_absent_is_a_clear_error() {
    let e = Encoder::new(1 << 20, &EncodeOptions::new(Format::SeekableZstd, 1 << 20)).unwrap_err();
    assert!(e.to_string().contains("feature"), "{e}");
}

/// One write of a random map: kind, offset, length, content selector.
type Op = (u8, u64, u64, u64);

/// A random map: erase block, size in 128 KiB, metadata writes, zero writes and content
/// references.
fn map_strategy() -> impl Strategy<Value = (u64, u64, Vec<Op>)> {
    (
        prop_oneof![Just(128u64 << 10), Just(256 << 10), Just(1 << 20)],
        1u64..=24,
        proptest::collection::vec((0u8..4, 0u64..(3 << 20), 1u64..70_000, 0u64..40_000), 0..30),
    )
}

fn build_map(size_blocks: u64, ops: &[Op], f: &Vec<Vec<u8>>) -> ImageMap {
    let size = size_blocks * (128 << 10);
    let mut m = ImageMap::new(size);
    for &(kind, at, len, src) in ops {
        let at = at % size;
        let len = len.min(size - at);
        match kind {
            0 => m
                .write_at(at, &vec![(at % 250) as u8 + 1; len as usize])
                .unwrap(),
            1 => m.write_at(at, &vec![0u8; len as usize]).unwrap(),
            2 => m
                .write_at(
                    at,
                    &[0xA5, 0x5A, 0, 1].repeat(len.div_ceil(4) as usize)[..len as usize],
                )
                .unwrap(),
            _ => {
                let c = src % 3;
                let off = src % f[c as usize].len() as u64;
                let len = len.min(f[c as usize].len() as u64 - off);
                m.write_content(
                    at,
                    ContentRef {
                        content: c,
                        offset: off,
                        len,
                    },
                    f,
                )
                .unwrap();
            }
        }
    }
    m
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    /// Any map: the sparse image expands to the map's bytes, chunks stay inside erase
    /// blocks, DONT_CARE covers exactly the unmapped blocks, and the result is the same
    /// however the windows are packed (one packer or a fresh one per window).
    #[test]
    fn sparse_image_is_the_map((erase, blocks, ops) in map_strategy()) {
        let f = files();
        let m = build_map(blocks, &ops, &f);
        let opts = EncodeOptions::new(Format::AndroidSparse, erase);
        let mut out = Vec::new();
        let s = encode_map(&m, &f, &opts, &mut out).unwrap();
        check_simg(&m, &f, erase, &out, &s);
        prop_assert!(out == pack_each_fresh(&m, &f, &opts), "packers differ");
    }
}

/// The encoding with a new packer for every window (as threads would), for comparison.
fn pack_each_fresh(m: &ImageMap, f: &Vec<Vec<u8>>, opts: &EncodeOptions) -> Vec<u8> {
    let mut enc = Encoder::new(m.size(), opts).unwrap();
    let mut out = enc.header();
    let mapped = m.mapped_ranges();
    let mut buf = Vec::new();
    for w in enc.windows(&mapped) {
        if !w.is_unmapped() {
            read_window(&m.reader(f), &w, &mut buf).unwrap();
        }
        let p = enc.packer().unwrap().pack(&w, &buf).unwrap();
        enc.add(&w, &p).unwrap();
        out.extend_from_slice(p.bytes());
    }
    let fin = enc.finish().unwrap();
    out.extend_from_slice(&fin.trailer);
    out[..fin.header.len()].copy_from_slice(&fin.header);
    out
}

/// Splits a seekable zstd file into its frames by the seek table (checked against the
/// frames' own sizes).
#[cfg(feature = "zstd")]
fn seek_table(b: &[u8]) -> Vec<(u32, u32, u32)> {
    let n = b.len();
    assert_eq!(
        u32::from_le_bytes(b[n - 4..].try_into().unwrap()),
        SEEKABLE_MAGIC
    );
    assert_eq!(b[n - 5], 0x80);
    let frames = u32::from_le_bytes(b[n - 9..n - 5].try_into().unwrap()) as usize;
    let table = &b[n - 9 - frames * 12..n - 9];
    let size = u32::from_le_bytes(
        b[n - 13 - frames * 12..n - 9 - frames * 12]
            .try_into()
            .unwrap(),
    );
    assert_eq!(size as usize, frames * 12 + 9);
    table
        .chunks(12)
        .map(|e| {
            let w = |i: usize| u32::from_le_bytes(e[i..i + 4].try_into().unwrap());
            (w(0), w(4), w(8))
        })
        .collect()
}

#[cfg(feature = "zstd")]
proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    /// Any map: libzstd decodes the seekable file to the map's bytes, every frame on its
    /// own decodes to its erase block with the checksum the table lists.
    #[test]
    fn seekable_zstd_is_the_map((erase, blocks, ops) in map_strategy()) {
        let f = files();
        let m = build_map(blocks, &ops, &f);
        let opts = EncodeOptions::new(Format::SeekableZstd, erase);
        let mut out = Vec::new();
        let s = encode_map(&m, &f, &opts, &mut out).unwrap();
        let want = raw(&m, &f);
        let all = ::zstd::stream::decode_all(&out[..]).unwrap();
        prop_assert!(all == want, "decoded bytes differ");
        let mut at = 0usize;
        let mut pos = 0usize;
        let table = seek_table(&out);
        prop_assert_eq!(table.len() as u64, s.units);
        for (c, d, sum) in table {
            let frame = &out[at..at + c as usize];
            let back = ::zstd::bulk::decompress(frame, d as usize).unwrap();
            prop_assert_eq!(back.len() as u64, (d as u64).min(erase));
            prop_assert!(back[..] == want[pos..pos + d as usize], "frame differs");
            prop_assert_eq!(sum as u64, xxh64(&back, 0) & 0xFFFF_FFFF);
            at += c as usize;
            pos += d as usize;
        }
        prop_assert_eq!(pos as u64, m.size());
        prop_assert!(out == pack_each_fresh(&m, &f, &opts), "packers differ");
    }
}

#[cfg(feature = "xz")]
proptest! {
    #![proptest_config(ProptestConfig { cases: 12, ..ProptestConfig::default() })]

    /// Any map: liblzma decodes the xz file to the map's bytes.
    #[test]
    fn xz_is_the_map((erase, blocks, ops) in map_strategy()) {
        let f = files();
        let m = build_map(blocks, &ops, &f);
        let mut opts = EncodeOptions::new(Format::Xz, erase);
        opts.level = Some(1);
        let mut out = Vec::new();
        let s = encode_map(&m, &f, &opts, &mut out).unwrap();
        prop_assert_eq!(s.units, m.size().div_ceil(erase));
        let mut dec = xz2::stream::Stream::new_stream_decoder(u64::MAX, 0).unwrap();
        let mut back = Vec::with_capacity(m.size() as usize + 16);
        let st = dec.process_vec(&out, &mut back, xz2::stream::Action::Finish).unwrap();
        prop_assert_eq!(st, xz2::stream::Status::StreamEnd);
        prop_assert!(back == raw(&m, &f), "decoded bytes differ");
        prop_assert!(out == pack_each_fresh(&m, &f, &opts), "packers differ");
    }
}
