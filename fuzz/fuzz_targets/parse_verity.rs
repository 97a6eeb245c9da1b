//! dm-verity superblock parsing on arbitrary bytes, then the tree geometry and the root hash
//! from the bytes after it, as verify computes them (input = superblock, then a hash block).
#![no_main]

use blockwise_verify::verity::parse_superblock;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(sb) = parse_superblock(data) {
        let _ = blockwise_verity::levels(sb.data_blocks, sb.hash_block_bytes);
        let top = data.get(512..).unwrap_or_default();
        let _ = blockwise_verity::root_from_top(&sb.salt, top);
        let _ = sb.to_bytes();
    }
});
