//! Every container of one image decodes to the same bytes and verifies to the same report.

use std::io::Write;

use super::*;
use crate::open::{open, Content, Opened};

const MIB: usize = 1 << 20;

/// A 48 MiB disk: an MBR with a FAT32 partition at 4 MiB (boot sector, FSInfo, backup, FATs)
/// and some file-like data further on; the rest zeros.
pub(crate) fn disk() -> Vec<u8> {
    let mut d = vec![0u8; 48 * MIB];
    let at = 0x1be;
    d[at + 4] = 0x0c;
    d[at + 8..at + 12].copy_from_slice(&8192u32.to_le_bytes());
    d[at + 12..at + 16].copy_from_slice(&(88 * 1024u32).to_le_bytes());
    d[510] = 0x55;
    d[511] = 0xaa;
    let total = 88 * 1024u32;
    let mut b = vec![0u8; 512];
    b[0..3].copy_from_slice(&[0xeb, 0x58, 0x90]);
    b[0x0b..0x0d].copy_from_slice(&512u16.to_le_bytes());
    b[0x0d] = 1;
    b[0x0e..0x10].copy_from_slice(&32u16.to_le_bytes());
    b[0x10] = 2;
    b[0x15] = 0xf8;
    b[0x20..0x24].copy_from_slice(&total.to_le_bytes());
    b[0x24..0x28].copy_from_slice(&700u32.to_le_bytes());
    b[0x2c..0x30].copy_from_slice(&2u32.to_le_bytes());
    b[0x30..0x32].copy_from_slice(&1u16.to_le_bytes());
    b[0x32..0x34].copy_from_slice(&6u16.to_le_bytes());
    b[0x42] = 0x29;
    b[0x47..0x52].copy_from_slice(b"NO NAME    ");
    b[0x52..0x5a].copy_from_slice(b"FAT32   ");
    b[510] = 0x55;
    b[511] = 0xaa;
    let p = 4 * MIB;
    d[p..p + 512].copy_from_slice(&b);
    d[p + 6 * 512..p + 7 * 512].copy_from_slice(&b);
    for (i, x) in d[20 * MIB..21 * MIB].iter_mut().enumerate() {
        *x = (i * 31 % 251) as u8;
    }
    // A bootloader-like run in the gap before the partition.
    for x in &mut d[8192..40_000] {
        *x = 0x5a;
    }
    d
}

pub(crate) fn sparse(raw: &[u8]) -> Vec<u8> {
    let blk = 4096;
    let mut chunks: Vec<(u16, u32, Vec<u8>)> = Vec::new();
    for block in raw.chunks(blk) {
        let zero = block.iter().all(|&b| b == 0);
        let t = if zero { 0xCAC3 } else { 0xCAC1 };
        match chunks.last_mut() {
            Some(c) if c.0 == t => {
                c.1 += 1;
                if !zero {
                    c.2.extend(block);
                }
            }
            _ => chunks.push((t, 1, if zero { vec![] } else { block.to_vec() })),
        }
    }
    super::sparse::tests::build(blk as u32, &chunks)
}

fn containers(raw: &[u8]) -> Vec<(&'static str, Vec<u8>)> {
    let frames: Vec<&[u8]> = raw.chunks(4 * MIB).collect();
    let mut xz1 = xz2::write::XzEncoder::new(Vec::new(), 1);
    xz1.write_all(raw).unwrap();
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    gz.write_all(raw).unwrap();
    let mut bz = bzip2::write::BzEncoder::new(Vec::new(), bzip2::Compression::fast());
    bz.write_all(raw).unwrap();
    let mut lz = lz4_flex::frame::FrameEncoder::new(Vec::new());
    lz.write_all(raw).unwrap();
    vec![
        ("sparse", sparse(raw)),
        ("zstd seekable", super::zstd_seekable::tests::build(&frames)),
        ("zstd", zstd::bulk::compress(raw, 1).unwrap()),
        (
            "xz multi-block",
            super::xz::tests::multi_block(raw, 4 * MIB),
        ),
        ("xz", xz1.finish().unwrap()),
        ("gzip", gz.finish().unwrap()),
        ("bzip2", bz.finish().unwrap()),
        ("lz4", lz.finish().unwrap()),
        (
            "zip stored",
            super::zip::tests::build(&[("os.img", 0, raw)]),
        ),
        (
            "zip deflate",
            super::zip::tests::build(&[("README", 8, b"hi"), ("os.img", 8, raw)]),
        ),
    ]
}

fn report_json(r: &blockwise_verify::Report) -> serde_json::Value {
    let mut v = serde_json::to_value(r).unwrap();
    v.as_object_mut().unwrap().remove("source");
    v
}

#[test]
fn every_container_decodes_and_verifies_like_the_raw_image() {
    let raw = disk();
    let opts = blockwise_verify::Options::new("x");
    let want = report_json(&blockwise_verify::verify_bytes(&raw, &opts));
    assert_eq!(
        want["partitions"][0]["filesystem"]["kind"], "fat32",
        "{want}"
    );
    assert!(want["regions"].is_array(), "{want}");
    for (name, packed) in containers(&raw) {
        let Opened::Container { decoded, content } = open(packed.clone()).unwrap() else {
            panic!("{name}: not a container")
        };
        assert_eq!(content, Content::Image(crate::ImageKind::Mbr), "{name}");
        // Forward, in odd pieces.
        let mut out = vec![0u8; raw.len()];
        let mut at = 0;
        while at < raw.len() {
            let n = (raw.len() - at).min(777_777);
            assert_eq!(
                decoded
                    .read_forward(at as u64, &mut out[at..at + n])
                    .unwrap(),
                n,
                "{name}"
            );
            at += n;
        }
        assert!(out == raw, "{name}: bytes differ");
        let mut end = [0u8; 16];
        assert_eq!(
            decoded.read_forward(raw.len() as u64, &mut end).unwrap(),
            0,
            "{name}"
        );
        // Random access where the container allows it.
        if let Some(ra) = decoded.random_access() {
            for off in [
                40 * MIB as u64 + 5,
                3,
                20 * MIB as u64 - 100,
                0,
                47 * MIB as u64,
            ] {
                let mut b = vec![0u8; 70_000];
                ra.read_at(off, &mut b).unwrap();
                assert!(
                    b[..] == raw[off as usize..off as usize + b.len()],
                    "{name} at {off}"
                );
            }
        }
        let fresh = Decoded::open(packed.clone(), decoded.kind()).unwrap();
        let (report, info) = crate::verify::verify_decoded(&fresh, &opts).unwrap();
        assert_eq!(report_json(&report), want, "{name}");
        let seekable = matches!(
            name,
            "sparse" | "zstd seekable" | "xz multi-block" | "zip stored"
        );
        assert_eq!(info.seekable, seekable, "{name}: {info:?}");
        if seekable {
            if matches!(name, "sparse" | "zstd seekable") {
                assert!(info.bytes_read < 4 * MIB as u64, "{name}: {info:?}");
            }
            assert_eq!(info.passes, 0, "{name}: {info:?}");
        } else if fresh.size().is_none() {
            assert!(info.passes >= 1 && info.passes <= 4, "{name}: {info:?}");
        }
    }
}

#[test]
fn holes_are_known_without_decoding() {
    let raw = disk();
    let d = Decoded::open(sparse(&raw), crate::ContainerKind::AndroidSparse).unwrap();
    let mapped = d.mapped().unwrap();
    let data: u64 = mapped.iter().map(|(s, e)| e - s).sum();
    assert!(data < 4 * MIB as u64, "{mapped:?}");
    assert_eq!(mapped[0].0, 0);
    let frames: Vec<&[u8]> = raw.chunks(4 * MIB).collect();
    let mut d = Decoded::open(
        super::zstd_seekable::tests::build(&frames),
        crate::ContainerKind::Zstd,
    )
    .unwrap();
    assert_eq!(d.mapped().unwrap(), [(0, raw.len() as u64)]);
    d.find_zero_frames().unwrap();
    // Frames 0 (table, bootloader), 1 (FAT) and 5 (data) hold data; the rest are zeros.
    assert_eq!(
        d.mapped().unwrap(),
        [(0, 8 * MIB as u64), (20 * MIB as u64, 24 * MIB as u64)]
    );
    let mut b = vec![1u8; 4096];
    assert_eq!(d.read_forward(30 * MIB as u64, &mut b).unwrap(), 4096);
    assert!(b.iter().all(|&x| x == 0));
}

#[test]
fn truncated_containers_fail_instead_of_writing_less() {
    let raw = disk();
    for (name, packed) in containers(&raw) {
        let cut = packed[..packed.len() * 2 / 3].to_vec();
        let r = open(cut).and_then(|o| match o {
            Opened::Container { decoded, .. } => {
                let mut buf = vec![0u8; MIB];
                let mut at = 0u64;
                loop {
                    let n = decoded.read_forward(at, &mut buf)?;
                    at += n as u64;
                    if n < buf.len() {
                        return Ok(at);
                    }
                }
            }
            Opened::Plain { .. } => Ok(0),
        });
        match r {
            Err(_) => {}
            Ok(n) => panic!("{name}: cut container read {n} bytes without an error"),
        }
    }
}

#[test]
fn a_damaged_zip_entry_fails_its_crc_when_read_through() {
    let raw = disk();
    let mut z = super::zip::tests::build(&[("os.img", 0, &raw)]);
    // Flip a byte of the stored data (after the 30-byte local header and the name).
    z[30 + 6 + 20 * MIB] ^= 1;
    let d = Decoded::open(z, crate::ContainerKind::Zip).unwrap();
    let mut buf = vec![0u8; 4 * MIB];
    let mut at = 0u64;
    let err = loop {
        match d.read_forward(at, &mut buf) {
            Ok(n) if n < buf.len() => panic!("read to the end without an error"),
            Ok(n) => at += n as u64,
            Err(e) => break e.to_string(),
        }
    };
    assert!(err.contains("CRC-32"), "{err}");
    assert_eq!(at, raw.len() as u64 - 4 * MIB as u64, "the last read fails");
}
