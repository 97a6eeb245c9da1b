//! GPT parsing (both copies) on arbitrary bytes at both sector sizes.
#![no_main]

use blockwise_geometry::SectorSize;
use blockwise_ptable::read_gpt;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    for s in [SectorSize::S512, SectorSize::S4096] {
        if let Ok(r) = read_gpt(data, s) {
            let _ = r.best().map(|c| c.entries.len());
        }
    }
});
