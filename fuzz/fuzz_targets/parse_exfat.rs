//! exFAT boot region and root directory parsing on arbitrary bytes; the whole verifier on the
//! same bytes as a bare volume (the checks read the FAT, the root and the up-case table).
#![no_main]

use blockwise_verify::exfat::{check_region, looks_like_exfat, parse_exfat, parse_root, sector_bytes};
use blockwise_verify::{verify_bytes, Options};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = looks_like_exfat(data);
    let s = sector_bytes(data).unwrap_or(512);
    let _ = check_region(data, s);
    let _ = check_region(data.get(usize::try_from(s * 12).unwrap_or(0)..).unwrap_or_default(), s);
    if let Ok(v) = parse_exfat(data) {
        let _ = (v.volume_bytes(), v.cluster_offset(v.root_cluster));
        for i in &v.issues {
            let _ = (i.code(), i.to_string());
        }
    }
    let _ = parse_root(data);
    let _ = verify_bytes(data, &Options::new("fuzz").scan_gaps(false));
});
