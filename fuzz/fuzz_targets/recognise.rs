//! The one input recogniser and every container decoder on arbitrary bytes: `recognise`,
//! `open` (refusals, nested recognition), then each decoder as `Decoded::open` of every
//! container kind (so a sparse header, a seek table, an xz index or a zip directory is parsed
//! whatever the magic says), read forward as the writer reads, read at random as verify does,
//! and verify itself in rounds or by random access. Bounded: at most 4 MiB decoded per
//! decoder; errors, never panics, hangs or unbounded allocations.
#![no_main]

use blockwise_container::decode::rounds::run_in_rounds;
use blockwise_container::{recognise, ContainerKind, Decoded};
use blockwise_geometry::BlockSource;
use libfuzzer_sys::fuzz_target;

const LIMIT: u64 = 4 << 20;

const KINDS: [ContainerKind; 8] = [
    ContainerKind::AndroidSparse,
    ContainerKind::Xz,
    ContainerKind::Gzip,
    ContainerKind::Zstd,
    ContainerKind::Bzip2,
    ContainerKind::Lz4,
    ContainerKind::Lz4Legacy,
    ContainerKind::Zip,
];

fn exercise(data: &[u8], kind: ContainerKind) {
    let Ok(mut d) = Decoded::open(data.to_vec(), kind) else {
        return;
    };
    let _ = d.find_zero_frames();
    let _ = d.mapped();
    // Forward, skipping as the writer skips.
    let mut buf = vec![0u8; 64 << 10];
    let mut at = u64::from(data.first().copied().unwrap_or(0)) * 512;
    while at < LIMIT {
        match d.read_forward(at, &mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => at += n as u64,
        }
    }
    // At random, as verify reads, on small images only.
    if d.size().is_some_and(|s| s <= LIMIT) {
        if let Some(ra) = d.random_access() {
            let len = ra.len();
            for seed in data.iter().take(8) {
                let off = len.saturating_sub(1) / 255 * u64::from(*seed);
                let n = usize::try_from(len.saturating_sub(off).min(4096)).unwrap_or(0);
                let mut b = vec![0u8; n];
                let _ = ra.read_at(off, &mut b);
            }
            let _ = blockwise_verify::verify(&ra, &blockwise_verify::Options::new("fuzz"));
        } else {
            let _ = run_in_rounds(&d, |rec| {
                blockwise_verify::verify(rec, &blockwise_verify::Options::new("fuzz"))
            });
        }
    }
}

fuzz_target!(|data: &[u8]| {
    let _ = recognise(&data.to_vec());
    if let Ok(opened) = blockwise_container::open(data.to_vec()) {
        let _ = opened.content().require_image(false, None);
    }
    for kind in KINDS {
        exercise(data, kind);
    }
});
