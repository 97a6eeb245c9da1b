//! EROFS superblock parsing (magic, block size, extension slots, checksum over the first
//! block, feature names, compression) on arbitrary bytes (input = the volume's first bytes).
#![no_main]

use blockwise_verify::erofs::parse_superblock;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(sb) = parse_superblock(data) {
        let _ = (sb.features(), sb.compression(), sb.unknown_incompat());
    }
});
