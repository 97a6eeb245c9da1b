//! Checked little/big-endian reads from untrusted byte slices. A read past the end yields 0,
//! so parsers must check the length they need first (they do, and report `Truncated`).

/// Byte `o`, or 0.
pub(crate) fn u8_at(b: &[u8], o: usize) -> u8 {
    b.get(o).copied().unwrap_or(0)
}

/// `N` bytes at `o`, or zeros.
pub(crate) fn arr<const N: usize>(b: &[u8], o: usize) -> [u8; N] {
    o.checked_add(N)
        .and_then(|end| b.get(o..end))
        .and_then(|s| <[u8; N]>::try_from(s).ok())
        .unwrap_or([0; N])
}

/// Little-endian u16 at `o`, or 0.
pub(crate) fn le16(b: &[u8], o: usize) -> u16 {
    u16::from_le_bytes(arr(b, o))
}

/// Little-endian u32 at `o`, or 0.
pub(crate) fn le32(b: &[u8], o: usize) -> u32 {
    u32::from_le_bytes(arr(b, o))
}

/// Little-endian u64 at `o`, or 0.
pub(crate) fn le64(b: &[u8], o: usize) -> u64 {
    u64::from_le_bytes(arr(b, o))
}

/// Does `b` hold `magic` at `o`?
pub(crate) fn has(b: &[u8], o: usize, magic: &[u8]) -> bool {
    o.checked_add(magic.len())
        .and_then(|end| b.get(o..end))
        .is_some_and(|s| s == magic)
}

/// Text field: printable ASCII up to the first NUL, trailing spaces trimmed; `None` if empty.
pub(crate) fn text(b: &[u8], o: usize, n: usize) -> Option<String> {
    let s = o
        .checked_add(n)
        .and_then(|end| b.get(o..end))
        .unwrap_or_default();
    let s: String = s
        .iter()
        .take_while(|&&c| c != 0)
        .map(|&c| {
            if (0x20..0x7f).contains(&c) {
                char::from(c)
            } else {
                '?'
            }
        })
        .collect();
    let t = s.trim_end().to_string();
    (!t.is_empty()).then_some(t)
}

/// Bitwise reflected CRC-32 over `data` with the reversed polynomial `poly`, starting from
/// `crc`, without pre/post inversion. Metadata checksums only: a superblock is 1 KiB.
fn crc32_reflected(poly: u32, mut crc: u32, data: &[u8]) -> u32 {
    for &b in data {
        crc ^= u32::from(b);
        for _ in 0..8 {
            crc = if crc & 1 == 1 {
                (crc >> 1) ^ poly
            } else {
                crc >> 1
            };
        }
    }
    crc
}

/// CRC32C without pre/post inversion (ext4's `ext4_chksum`): `raw(0xffff_ffff, d)`.
pub(crate) fn crc32c_raw(crc: u32, data: &[u8]) -> u32 {
    crc32_reflected(0x82f6_3b78, crc, data)
}

/// The IEEE CRC-32 of GPT and zlib, for tests that forge GPT headers.
#[cfg(test)]
pub(crate) fn crc32_ieee(data: &[u8]) -> u32 {
    !crc32_reflected(0xedb8_8320, !0, data)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_are_checked() {
        let b = [1u8, 2, 3];
        assert_eq!(le16(&b, 0), 0x0201);
        assert_eq!(le16(&b, 2), 0);
        assert_eq!(le32(&b, usize::MAX), 0);
        assert!(has(&b, 1, &[2, 3]));
        assert!(!has(&b, 2, &[3, 4]));
        assert_eq!(text(b"AB  \0x", 0, 6), Some("AB".into()));
        assert_eq!(text(b"   ", 0, 3), None);
    }

    #[test]
    fn crc32c_check_value() {
        assert_eq!(!crc32c_raw(!0, b"123456789"), 0xe306_9283);
        assert_eq!(crc32_ieee(b"123456789"), 0xcbf4_3926);
    }
}
