//! A Linux swap header as `mkswap` writes it for 4 KiB pages: version 1, the last page
//! number, no bad pages, UUID, label and the `SWAPSPACE2` signature at the end of the first
//! page. The rest of the partition is not touched (the kernel needs nothing else).

use blockwise_geometry::{Guid, OtherFs};

/// The page size the header is written for (x86, arm64 with 4 KiB pages).
pub const SWAP_PAGE: u64 = 4096;
/// Fewest pages `mkswap` accepts.
pub const MIN_PAGES: u64 = 10;
/// Longest label (bytes).
pub const MAX_LABEL: usize = 16;

/// Checks a swap label: at most 16 bytes.
pub fn validate_label(label: &str) -> Result<(), String> {
    if label.len() > MAX_LABEL {
        Err(format!(
            "{label:?} is {} bytes; a swap label holds at most {MAX_LABEL}",
            label.len()
        ))
    } else {
        Ok(())
    }
}

/// The first page of a swap area of `size_bytes`: `Err` when it is too small or too large.
pub fn header(size_bytes: u64, uuid: Guid, label: Option<&str>) -> Result<Vec<u8>, String> {
    let pages = size_bytes / SWAP_PAGE;
    if pages < MIN_PAGES {
        return Err(format!(
            "{size_bytes} bytes is too small for swap: at least {MIN_PAGES} pages of {SWAP_PAGE} bytes"
        ));
    }
    let last_page = u32::try_from(pages - 1)
        .map_err(|_| format!("{size_bytes} bytes is more swap than version 1 can describe"))?;
    let mut page = vec![0u8; 4096];
    let mut put = |off: usize, b: &[u8]| {
        if let Some(dst) = page.get_mut(off..off + b.len()) {
            dst.copy_from_slice(b);
        }
    };
    put(1024, &1u32.to_le_bytes());
    put(1028, &last_page.to_le_bytes());
    put(1032, &0u32.to_le_bytes());
    put(1036, &uuid.to_uuid_bytes());
    if let Some(l) = label {
        validate_label(l)?;
        put(1052, l.as_bytes());
    }
    put(4086, b"SWAPSPACE2");
    Ok(page)
}

/// What `verify` reads from the header [`header`] writes: version 1, the label (trailing
/// spaces trimmed, none when empty), the UUID as `blkid` prints it, the size the last page
/// number claims and the page size.
pub fn plan(size_bytes: u64, uuid: Guid, label: Option<&str>) -> Result<OtherFs, String> {
    header(size_bytes, uuid, label)?;
    let pages = size_bytes / SWAP_PAGE;
    let u = uuid.to_uuid_bytes();
    let uuid = (u != [0; 16]).then(|| uuid.to_string().to_ascii_lowercase());
    Ok(OtherFs {
        kind: "swap".into(),
        version: Some("1".into()),
        label: label
            .map(str::trim_end)
            .filter(|l| !l.is_empty())
            .map(str::to_string),
        uuid,
        size_bytes: Some(pages * SWAP_PAGE),
        block_bytes: Some(4096),
        ..OtherFs::default()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_fields() {
        let g: Guid = "01234567-89ab-4cde-8f01-23456789abcd".parse().unwrap();
        let h = header(4 << 20, g, Some("swap")).unwrap();
        assert_eq!(&h[4086..], b"SWAPSPACE2");
        assert_eq!(u32::from_le_bytes(h[1028..1032].try_into().unwrap()), 1023);
        assert_eq!(h[1036], 0x01);
        assert_eq!(&h[1052..1056], b"swap");
        assert!(header(9 * 4096, g, None).is_err());
        assert!(validate_label("seventeen-bytes-x").is_err());
    }
}
