//! MBR + EBR chain parsing on arbitrary bytes: no panic, bounded work. The same bytes as a
//! boot code file (`image.boot-code`) and as sector 0's boot code area.
#![no_main]

use blockwise_geometry::SectorSize;
use blockwise_ptable::{parse_mbr, read_logical};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(code) = blockwise_geometry::boot_code_bytes(data) {
        assert!(code.len() <= blockwise_geometry::BOOT_CODE_BYTES);
    }
    let _ = blockwise_geometry::BootCode::of(data);
    if let Ok(mbr) = parse_mbr(data, 0) {
        let _ = mbr.is_protective();
        let _ = mbr.is_hybrid();
        for s in [SectorSize::S512, SectorSize::S4096] {
            let _ = read_logical(data, s, &mbr);
        }
    }
});
