//! Volume labels as the filesystems define them, decoded without loss: ext2/3/4 labels are
//! UTF-8 bytes, FAT labels are in the OEM code page (code page 437, the Linux kernel's
//! default `codepage=`) in the boot sector and the root directory's volume-label entry, with
//! the UTF-16 of long-name entries in front of that entry where a tool wrote them. Bytes
//! that are not text come out as `\xNN`, never as `?`; `blockwise_geometry::display_str`
//! makes a label safe to print.

use blockwise_fat::lfn_checksum;
use blockwise_fat::raw::{ATTR_DIRECTORY, ATTR_LONG_NAME, ATTR_VOLUME_ID};

/// Code page 437, bytes 0x80–0xFF.
const CP437_HIGH: [char; 128] = [
    'Ç', 'ü', 'é', 'â', 'ä', 'à', 'å', 'ç', 'ê', 'ë', 'è', 'ï', 'î', 'ì', 'Ä', 'Å', //
    'É', 'æ', 'Æ', 'ô', 'ö', 'ò', 'û', 'ù', 'ÿ', 'Ö', 'Ü', '¢', '£', '¥', '₧', 'ƒ', //
    'á', 'í', 'ó', 'ú', 'ñ', 'Ñ', 'ª', 'º', '¿', '⌐', '¬', '½', '¼', '¡', '«', '»', //
    '░', '▒', '▓', '│', '┤', '╡', '╢', '╖', '╕', '╣', '║', '╗', '╝', '╜', '╛', '┐', //
    '└', '┴', '┬', '├', '─', '┼', '╞', '╟', '╚', '╔', '╩', '╦', '╠', '═', '╬', '╧', //
    '╨', '╤', '╥', '╙', '╘', '╒', '╓', '╫', '╪', '┘', '┌', '█', '▄', '▌', '▐', '▀', //
    'α', 'ß', 'Γ', 'π', 'Σ', 'σ', 'µ', 'τ', 'Φ', 'Θ', 'Ω', 'δ', '∞', 'φ', 'ε', '∩', //
    '≡', '±', '≥', '≤', '⌠', '⌡', '÷', '≈', '°', '∙', '·', '√', 'ⁿ', '²', '■', '\u{a0}', //
];

fn push_hex(out: &mut String, b: u8) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    out.push_str("\\x");
    for nibble in [b >> 4, b & 0xf] {
        out.push(HEX.get(usize::from(nibble)).map_or('0', |&c| char::from(c)));
    }
}

/// An ext2/3/4 label (`s_volume_name`): the bytes up to the first NUL, as UTF-8, with any
/// byte that is not part of valid UTF-8 as `\xNN`. `None` when empty.
#[must_use]
pub fn utf8_label(field: &[u8]) -> Option<String> {
    let end = field.iter().position(|&b| b == 0).unwrap_or(field.len());
    let mut rest = field.get(..end).unwrap_or_default();
    let mut out = String::new();
    while !rest.is_empty() {
        match core::str::from_utf8(rest) {
            Ok(s) => {
                out.push_str(s);
                break;
            }
            Err(e) => {
                let (good, bad) = rest.split_at(e.valid_up_to());
                out.push_str(core::str::from_utf8(good).unwrap_or_default());
                let n = e.error_len().unwrap_or(bad.len()).max(1);
                for &b in bad.iter().take(n) {
                    push_hex(&mut out, b);
                }
                rest = bad.get(n..).unwrap_or_default();
            }
        }
    }
    (!out.is_empty()).then_some(out)
}

/// One OEM (code page 437) byte as a character; control bytes stay control characters.
fn cp437(b: u8) -> char {
    match b.checked_sub(0x80) {
        Some(hi) => CP437_HIGH
            .get(usize::from(hi))
            .copied()
            .unwrap_or(char::REPLACEMENT_CHARACTER),
        None => char::from(b),
    }
}

/// A FAT label in the OEM code page (the boot sector's `BS_VolLab`, or an 8.3 name): up to
/// the first NUL, trailing spaces trimmed; `None` when empty or `NO NAME` (mkfs.fat's "no
/// label").
#[must_use]
pub fn oem_label(field: &[u8]) -> Option<String> {
    let s: String = field
        .iter()
        .take_while(|&&b| b != 0)
        .map(|&b| cp437(b))
        .collect();
    let t = s.trim_end_matches(' ');
    (!t.is_empty() && t != "NO NAME").then(|| t.to_string())
}

/// The label of a FAT root directory whose first bytes are `dir`: the first volume-label
/// entry (attribute 0x08, not deleted), as the UTF-16 of the long-name entries right in
/// front of it when their checksum matches its short name, else its 11 bytes in the OEM code
/// page. Stops at the end-of-directory mark; `None` when there is no label entry.
#[must_use]
pub fn root_dir_label(dir: &[u8]) -> Option<String> {
    // (ord, checksum, 13 UTF-16 units) of the long-name entries seen since the last short one.
    let mut lfn: Vec<(u8, u8, [u16; 13])> = Vec::new();
    for e in dir.chunks_exact(32) {
        let first = e.first().copied().unwrap_or(0);
        let attr = e.get(11).copied().unwrap_or(0);
        if first == 0 {
            break;
        }
        if first == 0xe5 {
            lfn.clear();
            continue;
        }
        if attr & 0x3f == ATTR_LONG_NAME {
            let unit = |at: usize| {
                u16::from_le_bytes([
                    e.get(at).copied().unwrap_or(0),
                    e.get(at.saturating_add(1)).copied().unwrap_or(0),
                ])
            };
            let mut units = [0u16; 13];
            let offsets = [1, 3, 5, 7, 9, 14, 16, 18, 20, 22, 24, 28, 30];
            for (u, &at) in units.iter_mut().zip(&offsets) {
                *u = unit(at);
            }
            lfn.push((first, e.get(13).copied().unwrap_or(0), units));
            continue;
        }
        if attr & (ATTR_VOLUME_ID | ATTR_DIRECTORY) == ATTR_VOLUME_ID {
            let mut name = [0u8; 11];
            if let Some(n) = e.get(..11) {
                name.copy_from_slice(n);
            }
            if name[0] == 0x05 {
                name[0] = 0xe5;
            }
            return long_name(&lfn, &name).or_else(|| oem_label(&name));
        }
        lfn.clear();
    }
    None
}

/// The long name the entries `lfn` (in disk order: last part first) give the short name
/// `short`, when they are complete and carry its checksum.
fn long_name(lfn: &[(u8, u8, [u16; 13])], short: &[u8; 11]) -> Option<String> {
    let sum = lfn_checksum(short);
    let n = lfn.len();
    let first_ord = lfn.first()?.0;
    if first_ord & 0x40 == 0 || usize::from(first_ord & 0x1f) != n {
        return None;
    }
    let mut units = Vec::with_capacity(n.saturating_mul(13));
    for (k, (ord, chk, part)) in lfn.iter().rev().enumerate() {
        if *chk != sum || usize::from(ord & 0x1f) != k.saturating_add(1) {
            return None;
        }
        units.extend_from_slice(part);
    }
    let end = units
        .iter()
        .position(|&u| u == 0 || u == 0xffff)
        .unwrap_or(units.len());
    let mut out = String::new();
    for r in char::decode_utf16(units.get(..end).unwrap_or_default().iter().copied()) {
        match r {
            Ok(c) => out.push(c),
            Err(e) => out.push_str(&format!("\\u{:04x}", e.unpaired_surrogate())),
        }
    }
    let t = out.trim_end_matches(' ');
    (!t.is_empty()).then(|| t.to_string())
}

#[cfg(test)]
#[expect(clippy::indexing_slicing, reason = "tests")]
mod tests {
    use super::*;

    #[test]
    fn ext4_labels_are_utf8() {
        let mut f = [0u8; 16];
        f[..8].copy_from_slice("Données".as_bytes());
        assert_eq!(utf8_label(&f).as_deref(), Some("Données"));
        assert_eq!(utf8_label(b"ab\xffc\0zz").as_deref(), Some("ab\\xffc"));
        assert_eq!(utf8_label(b"root \0").as_deref(), Some("root "));
        assert_eq!(utf8_label(&[0u8; 16]), None);
        // A UTF-8 sequence cut by the 16-byte field.
        assert_eq!(
            utf8_label(b"abcdefghijklmno\xc3").as_deref(),
            Some("abcdefghijklmno\\xc3")
        );
    }

    #[test]
    fn fat_labels_are_oem_or_utf16() {
        assert_eq!(oem_label(b"BOOT       ").as_deref(), Some("BOOT"));
        assert_eq!(oem_label(b"NO NAME    "), None);
        assert_eq!(oem_label(b"DONN\x90ES   ").as_deref(), Some("DONNÉES"));
        assert_eq!(oem_label(b"A\x1bB        ").as_deref(), Some("A\u{1b}B"));
        // A root directory: a deleted entry, a long name "Données", its label entry.
        let short = *b"DONNES     ";
        let sum = lfn_checksum(&short);
        let mut lfn = [0u8; 32];
        lfn[0] = 0x41;
        lfn[11] = 0x0f;
        lfn[13] = sum;
        let units: Vec<u16> = "Données".encode_utf16().chain([0]).collect();
        let offsets = [1, 3, 5, 7, 9, 14, 16, 18, 20, 22, 24, 28, 30];
        for (k, &at) in offsets.iter().enumerate() {
            let u = units.get(k).copied().unwrap_or(0xffff);
            lfn[at..at + 2].copy_from_slice(&u.to_le_bytes());
        }
        let mut label = [0u8; 32];
        label[..11].copy_from_slice(&short);
        label[11] = 0x08;
        let mut deleted = [0u8; 32];
        deleted[0] = 0xe5;
        deleted[11] = 0x08;
        let dir = [deleted, lfn, label, [0u8; 32]].concat();
        assert_eq!(root_dir_label(&dir).as_deref(), Some("Données"));
        // Without the long name, or with a wrong checksum: the short name.
        let dir = [label, [0u8; 32]].concat();
        assert_eq!(root_dir_label(&dir).as_deref(), Some("DONNES"));
        let mut bad = lfn;
        bad[13] ^= 1;
        let dir = [bad, label].concat();
        assert_eq!(root_dir_label(&dir).as_deref(), Some("DONNES"));
        assert_eq!(root_dir_label(&[0u8; 64]), None);
    }

    #[test]
    fn escaping() {
        use blockwise_geometry::display_str;
        assert_eq!(display_str("a\u{1b}[2Jb\n"), "a\\x1b[2Jb\\x0a");
        assert_eq!(display_str("Données"), "Données");
        assert_eq!(
            utf8_label(b"Donn\xe9es")
                .map(|l| display_str(&l))
                .as_deref(),
            Some("Donn\\xe9es")
        );
    }
}
