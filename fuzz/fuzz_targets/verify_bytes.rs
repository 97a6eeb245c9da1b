//! The whole verifier on arbitrary bytes, at both sector sizes, human and JSON output.
#![no_main]

use blockwise_geometry::SectorSize;
use blockwise_verify::{verify_bytes, Options};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    for s in [None, Some(SectorSize::S4096)] {
        let r = verify_bytes(
            data,
            &Options::new("fuzz").sector_size(s).erase_block(128 << 10),
        );
        let _ = r.to_human();
        let _ = r.exit_code();
    }
});
