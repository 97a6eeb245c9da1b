//! F2FS superblock parsing (both 4 KiB blocks of the volume: primary and backup copy), the
//! plan shape and the alignment rule it feeds, on arbitrary bytes.
#![no_main]

use blockwise_verify::f2fs::parse_superblock;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    for block in [data.get(..4096).unwrap_or(data), data.get(4096..).unwrap_or_default()] {
        if let Ok(sb) = parse_superblock(block) {
            for e in [0u64, 4096, 4 << 20, u64::MAX] {
                let p = sb.to_plan(u64::MAX - 4096, e);
                let _ = p.alignment_holds(e);
            }
            let _ = (sb.segment_bytes(), sb.section_bytes());
        }
    }
});
