//! bmaptool `.bmap` parsing (`Bmap::parse`, what `blockwise write` reads beside an image).
//!
//! The input is parsed twice: as it is, and with its `<BmapFileChecksum>` replaced by the
//! right sha256, so the fuzzer gets past the file checksum to the sizes and ranges.
#![no_main]

use blockwise_flash::Bmap;
use libfuzzer_sys::fuzz_target;
use sha2::{Digest as _, Sha256};

fn with_right_checksum(text: &str) -> Option<String> {
    let open = "<BmapFileChecksum>";
    let s = text.find(open)? + open.len();
    let len = text.get(s..)?.find("</BmapFileChecksum>")?;
    let raw = text.get(s..s + len)?;
    let hex = raw.trim();
    if hex.len() != 64 || !hex.is_ascii() {
        return None;
    }
    // Bmap::parse zeroes the first occurrence of the checksum text: do the same.
    let zeroed = text.replacen(hex, &"0".repeat(64), 1);
    let sum: String = Sha256::digest(zeroed.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    Some(zeroed.replacen(&"0".repeat(64), &sum, 1))
}

fn check(text: &str) {
    if let Ok(b) = Bmap::parse(text) {
        let ranges = b.byte_ranges();
        assert!(ranges.windows(2).all(|w| w[0].1 <= w[1].0), "sorted");
        assert!(ranges.iter().all(|&(s, e)| s <= e && e <= b.image_size));
    }
}

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    check(text);
    if let Some(fixed) = with_right_checksum(text) {
        check(&fixed);
    }
});
