//! The writer's compressed-image handling on arbitrary bytes: format detection by magic
//! bytes (`Compression::sniff`), then every decoder (`Stream::from_reader`) read through the
//! `Source` interface for at most 1 MiB: errors, never panics or hangs.
#![no_main]

use std::io::Cursor;

use blockwise_flash::{Compression, Source, Stream};
use libfuzzer_sys::fuzz_target;

const LIMIT: u64 = 1 << 20;

fn drain(data: &[u8], c: Compression, size: Option<u64>) {
    let Ok(mut s) = Stream::from_reader(Cursor::new(data.to_vec()), c, size) else {
        return;
    };
    let mut buf = vec![0u8; 64 << 10];
    // Skip forward once (the writer skips holes), then read in order.
    let mut offset = u64::from(data.first().copied().unwrap_or(0)) * 512;
    while offset < LIMIT {
        match s.read(offset, &mut buf) {
            Ok(0) | Err(_) => return,
            Ok(n) => offset += n as u64,
        }
    }
}

fuzz_target!(|data: &[u8]| {
    let sniffed = Compression::sniff(data);
    for c in [
        Compression::Xz,
        Compression::Gzip,
        Compression::Zstd,
        Compression::Bzip2,
    ] {
        if sniffed.is_none() || sniffed == Some(c) {
            drain(data, c, None);
            drain(data, c, Some(300_000));
        }
    }
});
