//! FAT boot sector and FSInfo parsing on arbitrary bytes.
#![no_main]

use blockwise_verify::fat::{check_fsinfo, looks_like_fat, parse_fat};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = looks_like_fat(data);
    if let Ok(v) = parse_fat(data) {
        let _ = (v.cluster_bytes(), v.volume_bytes());
        for i in &v.issues {
            let _ = (i.code(), i.to_string());
        }
        let _ = check_fsinfo(data.get(512..).unwrap_or_default(), v.clusters);
    }
});
