//! Linux swap: the header in the first page (4 KiB, or 64 KiB on such kernels).
//!
//! ```text
//! page size − 10: "SWAPSPACE2" (version 1) or "SWAP-SPACE" (version 0, no header fields)
//! 0x400 version u32 (1)  0x404 last_page u32  0x408 nr_badpages u32  0x40C uuid[16]
//! 0x41C label[16]        (in the byte order of the machine that ran mkswap)
//! ```

use blockwise_geometry::OtherFs;

use super::{utf8_label, uuid_string};
use crate::bytes::{has, le32};

/// Parses a swap header: `head` = the first 4096 bytes, `tail64k` = the 10 bytes before
/// byte 65536 (where a 64 KiB-page swap area keeps its magic).
pub fn parse(head: &[u8], tail64k: &[u8]) -> Result<OtherFs, String> {
    let page: u64 = if has(head, 4086, b"SWAPSPACE2") || has(head, 4086, b"SWAP-SPACE") {
        4096
    } else if has(tail64k, 0, b"SWAPSPACE2") || has(tail64k, 0, b"SWAP-SPACE") {
        65536
    } else {
        return Err("no swap signature".into());
    };
    let v1 = has(head, 4086, b"SWAPSPACE2") || has(tail64k, 0, b"SWAPSPACE2");
    if !v1 {
        return Ok(OtherFs {
            kind: "swap".into(),
            version: Some("0".into()),
            block_bytes: u32::try_from(page).ok(),
            ..OtherFs::default()
        });
    }
    // Version 1 in either byte order.
    let (version, last_page) = match le32(head, 0x400) {
        1 => (1, le32(head, 0x404)),
        0x0100_0000 => (1, le32(head, 0x404).swap_bytes()),
        v => return Err(format!("swap header version {v}")),
    };
    if last_page == 0 {
        return Err("last_page is 0".into());
    }
    Ok(OtherFs {
        kind: "swap".into(),
        version: Some(format!("{version}")),
        label: utf8_label(head.get(0x41c..0x42c).unwrap_or_default()),
        uuid: uuid_string(head.get(0x40c..0x41c).unwrap_or_default()),
        size_bytes: u64::from(last_page)
            .checked_add(1)
            .and_then(|n| n.checked_mul(page)),
        block_bytes: u32::try_from(page).ok(),
        ..OtherFs::default()
    })
}
