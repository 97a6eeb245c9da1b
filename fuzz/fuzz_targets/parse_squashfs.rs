//! squashfs superblock parsing (magic, version, block size and log, compressor, table order)
//! on arbitrary bytes.
#![no_main]

use blockwise_verify::squashfs::parse_superblock;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = parse_superblock(data);
});
