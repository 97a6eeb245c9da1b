//! The up-case table (§7.2): which UTF-16 unit each unit compares as, for case-insensitive
//! names. It is generated from Unicode data, not copied: `MAPPINGS` holds the BMP's simple
//! upper-case mappings that round-trip (`u` is the upper case of `c` and `c` the lower case
//! of `u`), taken from Rust's Unicode 17.0 tables and frozen here so that an image does not
//! change with the compiler (`print_mappings` below regenerates them; a test checks each
//! against the running compiler's tables). The table is stored compressed: runs of at least
//! [`MIN_RUN`] units that map to themselves become `FFFF, run length`.
//!
//! This is a valid up-case table, not byte for byte the specification's "recommended" one
//! (§7.2.5.1, which mkfs.exfat writes): that one follows an older Unicode version with a
//! few quirks and cannot be regenerated from current Unicode data. Every reader uses the
//! volume's own table (its checksum is in the root directory's up-case entry).

mod data;

pub(crate) use data::MAPPINGS;

/// Identity runs this long or longer are compressed.
pub const MIN_RUN: usize = 512;

/// The full (uncompressed) table: entry `c` is the up-case of unit `c`.
#[must_use]
pub fn full_table() -> Vec<u16> {
    let mut t: Vec<u16> = (0..=u16::MAX).collect();
    for &(first, count, stride, delta) in MAPPINGS {
        let mut c = u32::from(first);
        for _ in 0..count {
            let up = i64::from(c) + i64::from(delta);
            if let (Some(slot), Ok(up)) = (
                usize::try_from(c).ok().and_then(|i| t.get_mut(i)),
                u16::try_from(up),
            ) {
                *slot = up;
            }
            c += u32::from(stride);
        }
    }
    t
}

/// The table as stored: `full` compressed, as little-endian bytes.
#[must_use]
pub fn compressed_bytes(full: &[u16]) -> Vec<u8> {
    let mut units: Vec<u16> = Vec::with_capacity(4096);
    let mut i = 0usize;
    while i < full.len() {
        let mut j = i;
        while j < full.len() && usize::from(full[j]) == j {
            j += 1;
        }
        let run = j - i;
        if run >= MIN_RUN {
            // A run longer than 65535 units is split (it never is: the table has 65536 entries
            // and mapped units in every 64 Ki block but the last).
            let mut left = run;
            while left > 0 {
                let n = left.min(usize::from(u16::MAX));
                units.push(0xFFFF);
                units.push(u16::try_from(n).unwrap_or(u16::MAX));
                left -= n;
            }
            i = j;
        } else if run > 0 {
            units.extend(full[i..j].iter().copied());
            i = j;
        } else {
            units.push(full[i]);
            i += 1;
        }
    }
    units.iter().flat_map(|u| u.to_le_bytes()).collect()
}

/// Decompresses a stored table (hostile bytes: bounded by 65536 entries); `None` when it is
/// malformed (an odd length, a run past 65536 entries, a dangling `FFFF`).
#[must_use]
pub fn decompress(bytes: &[u8]) -> Option<Vec<u16>> {
    if bytes.len() % 2 != 0 {
        return None;
    }
    let units: Vec<u16> = bytes
        .chunks_exact(2)
        .map(|c| u16::from_le_bytes([c[0], c[1]]))
        .collect();
    let mut out: Vec<u16> = Vec::with_capacity(65536);
    let mut k = 0usize;
    while k < units.len() {
        let u = units[k];
        // FFFF followed by a count is a run; a final FFFF is the entry for FFFF itself.
        if u == 0xFFFF && k + 1 < units.len() && out.len() < 0xFFFF {
            let n = usize::from(units[k + 1]);
            let start = out.len();
            if start + n > 65536 {
                return None;
            }
            out.extend((start..start + n).map(|c| u16::try_from(c).unwrap_or(0)));
            k += 2;
        } else {
            if out.len() >= 65536 {
                return None;
            }
            out.push(u);
            k += 1;
        }
    }
    Some(out)
}

/// Up-cases a name with `table` (units past its end map to themselves).
#[must_use]
pub fn upcase_name(table: &[u16], name: &[u16]) -> Vec<u16> {
    name.iter()
        .map(|&u| table.get(usize::from(u)).copied().unwrap_or(u))
        .collect()
}

/// The mapping of one unit by the running compiler's Unicode tables, under the rule of
/// `MAPPINGS` (single, round-tripping, in the BMP).
#[must_use]
pub fn std_mapping(c: u16) -> Option<u16> {
    let ch = char::from_u32(u32::from(c))?;
    let mut up = ch.to_uppercase();
    let u = up.next()?;
    if up.next().is_some() || u == ch {
        return None;
    }
    let u16v = u16::try_from(u32::from(u)).ok()?;
    let mut down = u.to_lowercase();
    (down.next() == Some(ch) && down.next().is_none()).then_some(u16v)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frozen_mappings_agree_with_unicode() {
        let full = full_table();
        let mut mapped = 0;
        for c in 0..=u16::MAX {
            let t = full[usize::from(c)];
            if t != c {
                mapped += 1;
                // Unicode never changes an existing case mapping, so each frozen pair holds
                // with any newer compiler.
                assert_eq!(std_mapping(c), Some(t), "U+{c:04X}");
            }
        }
        assert!(mapped > 1000, "{mapped}");
        // The mandatory first 128 entries (§7.2.5.2): a–z to A–Z, the rest themselves.
        for c in 0u16..128 {
            let want = if (0x61..=0x7a).contains(&c) {
                c - 32
            } else {
                c
            };
            assert_eq!(full[usize::from(c)], want);
        }
    }

    #[test]
    fn compression_round_trips() {
        let full = full_table();
        let bytes = compressed_bytes(&full);
        assert!(bytes.len() < 10_000, "{}", bytes.len());
        assert!(decompress(&bytes) == Some(full), "round trip");
        assert_eq!(decompress(&[1]), None);
        assert_eq!(decompress(&[0xff; 8]), None);
    }

    /// Regenerates `upcase/data.rs` from the running compiler's Unicode tables:
    /// `cargo test -p blockwise-exfat print_mappings -- --ignored --nocapture`.
    #[test]
    #[ignore = "prints the frozen mappings; run by hand"]
    fn print_mappings() {
        let pairs: Vec<(u16, u16)> = (0..=u16::MAX)
            .filter_map(|c| std_mapping(c).map(|u| (c, u)))
            .collect();
        let mut runs: Vec<(u16, u16, u16, i32)> = Vec::new();
        for (c, u) in pairs {
            let delta = i32::from(u) - i32::from(c);
            if let Some(last) = runs.last_mut() {
                let next = u32::from(last.0) + u32::from(last.1) * u32::from(last.2);
                let stride_ok = last.1 == 1 && (c - last.0 == 1 || c - last.0 == 2);
                if last.3 == delta && (next == u32::from(c) || stride_ok) {
                    if stride_ok {
                        last.2 = c - last.0;
                    }
                    last.1 += 1;
                    continue;
                }
            }
            runs.push((c, 1, 1, delta));
        }
        println!("pub(crate) const MAPPINGS: &[(u16, u16, u16, i32)] = &[");
        for (c, n, s, d) in runs {
            println!("    (0x{c:04X}, {n}, {s}, {d}),");
        }
        println!("];");
    }
}
