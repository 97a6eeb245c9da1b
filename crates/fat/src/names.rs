//! File names: which names FAT can store, VFAT long names, 8.3 aliases with numeric tails
//! and the short-name checksum.
//!
//! A name that is already an upper-case 8.3 name is stored as it is. Every other name gets
//! a long-name (LFN) entry set plus a unique 8.3 alias: its upper-cased form when that is a
//! valid 8.3 name (`readme.txt` → `README.TXT`), else a lossy basis name with a numeric
//! tail (`Long File Name.text` → `LONGFI~1.TEX`). Uniqueness is checked against a hash set
//! per directory, and a counter per basis name keeps tail search linear, so a directory of
//! 20,000 similar names costs 20,000 steps, not 200 million.

use std::collections::{HashMap, HashSet};

/// Characters a short name may hold besides `A-Z` and `0-9` (fatgen103 §6.1).
const SHORT_SPECIALS: &[u8] = b"$%'-_@~`!(){}^#&";

/// Why a name cannot be stored on FAT.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BadName {
    /// Empty name.
    Empty,
    /// `.` or `..`.
    Dots,
    /// More than 255 UTF-16 code units.
    TooLong,
    /// A control character or one of `"*/:<>?\|`.
    BadChar(char),
    /// Ends with a space or a period (Windows and Linux strip those).
    TrailingDotOrSpace,
    /// The name's bytes are not UTF-8, so they have no UTF-16 long name.
    NotUtf8,
}

impl core::fmt::Display for BadName {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            BadName::Empty => write!(f, "the name is empty"),
            BadName::Dots => write!(f, "\".\" and \"..\" are reserved"),
            BadName::TooLong => write!(f, "FAT long names hold at most 255 UTF-16 units"),
            BadName::BadChar(c) => {
                write!(f, "FAT names cannot contain {c:?} (control characters and \"*/:<>?\\| are not allowed)")
            }
            BadName::TrailingDotOrSpace => {
                write!(f, "FAT names cannot end with a space or a period")
            }
            BadName::NotUtf8 => write!(
                f,
                "the name is not valid UTF-8 (non-UTF-8 bytes shown as \\xNN), and FAT stores names as UTF-16: rename it, or use ext4, which keeps names as bytes"
            ),
        }
    }
}

/// Checks that `name` can be a VFAT long name and returns its UTF-16 form.
pub fn long_name(name: &str) -> Result<Vec<u16>, BadName> {
    if name.is_empty() {
        return Err(BadName::Empty);
    }
    if name == "." || name == ".." {
        return Err(BadName::Dots);
    }
    if let Some(c) = name
        .chars()
        .find(|&c| (c as u32) < 0x20 || c == '\u{7f}' || "\"*/:<>?\\|".contains(c))
    {
        return Err(BadName::BadChar(c));
    }
    if name.ends_with('.') || name.ends_with(' ') {
        return Err(BadName::TrailingDotOrSpace);
    }
    let u: Vec<u16> = name.encode_utf16().collect();
    if u.len() > 255 {
        return Err(BadName::TooLong);
    }
    Ok(u)
}

fn short_char_ok(b: u8) -> bool {
    b.is_ascii_uppercase() || b.is_ascii_digit() || SHORT_SPECIALS.contains(&b)
}

/// Splits a name into an 8.3 base and extension when it is one already (after
/// upper-casing if `upcase`). Returns the 11-byte padded form.
fn as_short(name: &str, upcase: bool) -> Option<[u8; 11]> {
    let bytes = name.as_bytes();
    if !name.is_ascii() {
        return None;
    }
    let (base, ext) = match name.find('.') {
        Some(i) => (bytes.get(..i)?, bytes.get(i + 1..)?),
        None => (bytes, &[][..]),
    };
    if base.is_empty() || base.len() > 8 || ext.len() > 3 || (name.contains('.') && ext.is_empty())
    {
        return None;
    }
    let mut out = [b' '; 11];
    for (i, &b) in base.iter().enumerate() {
        let b = if upcase { b.to_ascii_uppercase() } else { b };
        if !short_char_ok(b) {
            return None;
        }
        *out.get_mut(i)? = b;
    }
    for (i, &b) in ext.iter().enumerate() {
        let b = if upcase { b.to_ascii_uppercase() } else { b };
        if !short_char_ok(b) {
            return None;
        }
        *out.get_mut(8 + i)? = b;
    }
    Some(out)
}

/// The lossy basis name (fatgen103 §7.4): upper case, spaces and embedded periods removed,
/// other characters a short name cannot hold replaced by `_`. Returns (base ≤ 8, ext ≤ 3).
fn basis(name: &str) -> (Vec<u8>, Vec<u8>) {
    let trimmed = name.trim_start_matches('.');
    let (base_part, ext_part) = match trimmed.rfind('.') {
        Some(i) => (
            trimmed.get(..i).unwrap_or(""),
            trimmed.get(i + 1..).unwrap_or(""),
        ),
        None => (trimmed, ""),
    };
    let conv = |s: &str, max: usize| -> Vec<u8> {
        let mut v = Vec::with_capacity(max);
        for c in s.chars() {
            if v.len() == max {
                break;
            }
            if c == ' ' || c == '.' {
                continue;
            }
            let b = if c.is_ascii() {
                let u = (c as u8).to_ascii_uppercase();
                if short_char_ok(u) {
                    u
                } else {
                    b'_'
                }
            } else {
                b'_'
            };
            v.push(b);
        }
        v
    };
    let mut base = conv(base_part, 8);
    if base.is_empty() {
        base.push(b'_');
    }
    (base, conv(ext_part, 3))
}

/// The checksum of an 11-byte short name stored in each LFN entry (fatgen103 §7.2).
#[must_use]
pub fn lfn_checksum(short: &[u8; 11]) -> u8 {
    short.iter().fold(0u8, |sum, &b| {
        ((sum & 1) << 7).wrapping_add(sum >> 1).wrapping_add(b)
    })
}

/// Number of LFN entries a UTF-16 name of `len` units needs.
#[must_use]
pub fn lfn_entries(len: usize) -> usize {
    len.div_ceil(13)
}

/// Upper-case form used to compare names the way FAT does (case-insensitively).
#[must_use]
pub fn fold(name: &str) -> String {
    name.chars()
        .map(|c| {
            let mut up = c.to_uppercase();
            match (up.next(), up.next()) {
                (Some(u), None) => u,
                _ => c,
            }
        })
        .collect()
}

/// Chooses unique 8.3 names within one directory.
#[derive(Debug, Default)]
pub struct ShortNames {
    used: HashSet<[u8; 11]>,
    next_tail: HashMap<[u8; 11], u32>,
}

/// The name entries of one directory entry.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Names {
    /// The 8.3 name, space padded.
    pub short: [u8; 11],
    /// The long name, when one is needed.
    pub long: Option<Vec<u16>>,
}

/// No unique alias could be found (more than 999,999 names share one basis).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AliasesExhausted;

impl ShortNames {
    /// An empty set.
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }

    /// Marks a verbatim short name as taken. Returns it when `name` is an upper-case 8.3
    /// name (stored without LFN), `None` otherwise.
    pub fn reserve_verbatim(&mut self, name: &str) -> Option<[u8; 11]> {
        let s = as_short(name, false)?;
        self.used.insert(s).then_some(s)
    }

    /// Picks the entry names for a name that is not stored verbatim.
    pub fn alias(&mut self, name: &str, long: Vec<u16>) -> Result<Names, AliasesExhausted> {
        if let Some(s) = as_short(name, true) {
            if self.used.insert(s) {
                return Ok(Names {
                    short: s,
                    long: Some(long),
                });
            }
        }
        let (base, ext) = basis(name);
        // `next_tail[prefix + ext]`: every `prefix~m` below it is taken. Candidates depend
        // only on (prefix, n), so the counter is keyed by the truncated prefix: names whose
        // bases differ only after the truncation point share it, and the search stays linear.
        let mut n: u32 = 1;
        while n <= 999_999 {
            let tail = format!("~{n}");
            let keep = base.len().min(8 - tail.len());
            let mut key = [b' '; 11];
            for (d, s) in key.iter_mut().zip(base.iter().take(keep)) {
                *d = *s;
            }
            for (d, s) in key.iter_mut().skip(8).zip(ext.iter()) {
                *d = *s;
            }
            let known = self.next_tail.get(&key).copied().unwrap_or(1);
            if known > n {
                n = known;
                continue;
            }
            let mut cand = key;
            for (d, s) in cand.iter_mut().skip(keep).zip(tail.as_bytes()) {
                *d = *s;
            }
            n += 1;
            self.next_tail.insert(key, n);
            if self.used.insert(cand) {
                return Ok(Names {
                    short: cand,
                    long: Some(long),
                });
            }
        }
        Err(AliasesExhausted)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(x: &str) -> [u8; 11] {
        let mut o = [b' '; 11];
        o.copy_from_slice(x.as_bytes());
        o
    }

    #[test]
    fn checksum_matches_known_values() {
        // Values computed by the fatgen103 reference algorithm.
        assert_eq!(lfn_checksum(&s("FOO     BAR")), {
            let mut sum: u8 = 0;
            for &b in b"FOO     BAR" {
                sum = (if sum & 1 != 0 { 0x80u8 } else { 0 })
                    .wrapping_add(sum >> 1)
                    .wrapping_add(b);
            }
            sum
        });
        assert_eq!(lfn_checksum(&s("README  TXT")), 0x73);
    }

    #[test]
    fn verbatim_and_aliases() {
        let mut n = ShortNames::new();
        assert_eq!(n.reserve_verbatim("README.TXT"), Some(s("README  TXT")));
        assert_eq!(n.reserve_verbatim("readme.txt"), None);
        assert_eq!(n.reserve_verbatim("LONGFI~1.TEX"), Some(s("LONGFI~1TEX")));
        let cases: &[(&str, &str)] = &[
            ("notes.txt", "NOTES   TXT"),
            ("Long File Name.text", "LONGFI~2TEX"),
            ("Long File Name 2.text", "LONGFI~3TEX"),
            (".bashrc", "BASHRC~1   "),
            ("日本語.txt", "___~1   TXT"),
            ("a+b.c", "A_B~1   C  "),
            ("x.tar.gz", "XTAR~1  GZ "),
        ];
        for (name, want) in cases {
            let long = long_name(name).unwrap();
            let got = n.alias(name, long.clone()).unwrap();
            assert_eq!(got.short, s(want), "{name}");
            assert_eq!(got.long, Some(long));
        }
    }

    #[test]
    fn tails_grow_and_shorten_the_base() {
        let mut n = ShortNames::new();
        let mut last = [0u8; 11];
        for i in 0..20_000 {
            let name = format!("file number {i}.dat");
            last = n.alias(&name, long_name(&name).unwrap()).unwrap().short;
        }
        assert_eq!(&last, b"FI~20000DAT");
    }

    #[test]
    fn bad_names() {
        let check = |name: &str, want: BadName| assert_eq!(long_name(name), Err(want), "{name}");
        check("", BadName::Empty);
        check("..", BadName::Dots);
        check("a:b", BadName::BadChar(':'));
        check("a\u{1}", BadName::BadChar('\u{1}'));
        check("trailing.", BadName::TrailingDotOrSpace);
        check("trailing ", BadName::TrailingDotOrSpace);
        check(&"x".repeat(256), BadName::TooLong);
        assert!(long_name(&"x".repeat(255)).is_ok());
        assert_eq!(long_name("😀").unwrap().len(), 2);
    }

    #[test]
    fn folding() {
        assert_eq!(fold("Straße"), "STRAßE");
        assert_eq!(fold("café"), fold("CAFÉ"));
    }
}
