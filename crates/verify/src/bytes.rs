//! Checked reads from untrusted byte slices. FAT and ext4 structures are read through the
//! raw layouts of `blockwise_fat::raw` and `blockwise_ext4::raw`; what is left here is for
//! the magic numbers of other formats, the GPT header and text fields.

use zerocopy::{FromBytes, IntoBytes};

/// `N` bytes at `o`, or zeros.
fn arr<const N: usize>(b: &[u8], o: usize) -> [u8; N] {
    o.checked_add(N)
        .and_then(|end| b.get(o..end))
        .and_then(|s| <[u8; N]>::try_from(s).ok())
        .unwrap_or([0; N])
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

/// A raw structure from the start of `b`; bytes past the end of a short `b` read as zero.
///
/// For reads whose length the source decides (`read_clamped` stops at its end): a field the
/// source cut off reads as 0, as the offset reads before the raw layouts did.
pub(crate) fn read_zero_extended<T: FromBytes + IntoBytes>(b: &[u8]) -> T {
    let mut v = T::new_zeroed();
    let dst = v.as_mut_bytes();
    let n = dst.len().min(b.len());
    if let (Some(d), Some(s)) = (dst.get_mut(..n), b.get(..n)) {
        d.copy_from_slice(s);
    }
    v
}

/// Text field: printable ASCII up to the first NUL, trailing spaces trimmed; `None` if empty.
pub(crate) fn text(field: &[u8]) -> Option<String> {
    let s: String = field
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

#[cfg(test)]
mod tests {
    use super::*;
    use zerocopy::little_endian::U32;

    #[test]
    fn reads_are_checked() {
        let b = [1u8, 2, 3, 4, 5];
        assert_eq!(le32(&b, 0), 0x0403_0201);
        assert_eq!(le32(&b, 2), 0);
        assert_eq!(le32(&b, usize::MAX), 0);
        assert_eq!(le64(&b, 0), 0);
        assert!(has(&b, 1, &[2, 3]));
        assert!(!has(&b, 4, &[5, 6]));
        assert_eq!(text(b"AB  \0x"), Some("AB".into()));
        assert_eq!(text(b"   "), None);
    }

    #[test]
    fn short_reads_are_zero_extended() {
        assert_eq!(
            read_zero_extended::<[U32; 2]>(&[1, 0, 0, 0, 2]),
            [1, 2].map(U32::new)
        );
        assert_eq!(read_zero_extended::<U32>(&[]), U32::new(0));
        assert_eq!(read_zero_extended::<U32>(&[7, 0, 0, 0, 9]), U32::new(7));
    }
}
