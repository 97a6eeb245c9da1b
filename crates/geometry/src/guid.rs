//! GUIDs in GPT's mixed-endian on-disk byte order, and IDs derived from the spec seed.

use core::fmt;
use core::str::FromStr;

use serde::{Serialize, Serializer};

/// A GUID, stored in on-disk order: the first three fields little-endian, the last eight
/// bytes as written (UEFI spec, appendix A).
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct Guid(pub [u8; 16]);

impl Guid {
    /// The all-zero GUID (an unused GPT entry).
    pub const ZERO: Guid = Guid([0; 16]);

    /// From the on-disk bytes.
    #[must_use]
    pub const fn from_bytes(b: [u8; 16]) -> Self {
        Guid(b)
    }

    /// The on-disk bytes.
    #[must_use]
    pub const fn to_bytes(self) -> [u8; 16] {
        self.0
    }

    /// From the big-endian (textual order) bytes, as a UUID is usually written.
    #[must_use]
    pub fn from_uuid_bytes(u: [u8; 16]) -> Self {
        let mut b = u;
        b[0..4].reverse();
        b[4..6].reverse();
        b[6..8].reverse();
        Guid(b)
    }

    /// The bytes in textual order (what ext4 and FAT store as a UUID).
    #[must_use]
    pub fn to_uuid_bytes(self) -> [u8; 16] {
        Guid::from_uuid_bytes(self.0).0
    }

    /// A random-looking version-4 GUID derived from `seed` and a purpose string, so the same
    /// spec always yields the same GUID and different purposes never collide by accident.
    #[must_use]
    pub fn derive(seed: u64, purpose: &str, index: u64) -> Self {
        let a = derive_u64(seed, purpose, index.wrapping_mul(2));
        let b = derive_u64(seed, purpose, index.wrapping_mul(2).wrapping_add(1));
        let mut u = [0u8; 16];
        u[..8].copy_from_slice(&a.to_be_bytes());
        u[8..].copy_from_slice(&b.to_be_bytes());
        u[6] = (u[6] & 0x0f) | 0x40;
        u[8] = (u[8] & 0x3f) | 0x80;
        Guid::from_uuid_bytes(u)
    }
}

/// A 64-bit value derived deterministically from `seed`, `purpose` and `index`
/// (FNV-1a over the purpose, mixed with SplitMix64).
#[must_use]
pub fn derive_u64(seed: u64, purpose: &str, index: u64) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in purpose.bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    let mut z = seed
        .wrapping_add(h)
        .wrapping_add(index.wrapping_mul(0x9e37_79b9_7f4a_7c15))
        .wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// A GUID string that does not parse.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("not a GUID (expected 8-4-4-4-12 hex digits)")]
pub struct GuidParseError;

impl FromStr for Guid {
    type Err = GuidParseError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let s = s.trim().trim_start_matches('{').trim_end_matches('}');
        let groups: Vec<&str> = s.split('-').collect();
        if groups.iter().map(|g| g.len()).collect::<Vec<_>>() != [8, 4, 4, 4, 12] {
            return Err(GuidParseError);
        }
        let hex: String = groups.concat();
        let mut u = [0u8; 16];
        for (i, byte) in u.iter_mut().enumerate() {
            let pair = hex.get(i * 2..i * 2 + 2).ok_or(GuidParseError)?;
            *byte = u8::from_str_radix(pair, 16).map_err(|_| GuidParseError)?;
        }
        Ok(Guid::from_uuid_bytes(u))
    }
}

impl fmt::Display for Guid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let u = self.to_uuid_bytes();
        for (i, b) in u.iter().enumerate() {
            if matches!(i, 4 | 6 | 8 | 10) {
                f.write_str("-")?;
            }
            write!(f, "{b:02X}")?;
        }
        Ok(())
    }
}

impl fmt::Debug for Guid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Guid({self})")
    }
}

impl Serialize for Guid {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn esp_guid_on_disk_order() {
        let g: Guid = "C12A7328-F81F-11D2-BA4B-00A0C93EC93B".parse().unwrap();
        assert_eq!(
            g.0,
            [
                0x28, 0x73, 0x2a, 0xc1, 0x1f, 0xf8, 0xd2, 0x11, 0xba, 0x4b, 0x00, 0xa0, 0xc9, 0x3e,
                0xc9, 0x3b
            ]
        );
        assert_eq!(g.to_string(), "C12A7328-F81F-11D2-BA4B-00A0C93EC93B");
        assert!("C12A7328F81F11D2BA4B00A0C93EC93B".parse::<Guid>().is_err());
    }

    #[test]
    fn derived_guids_are_stable_and_v4() {
        let a = Guid::derive(1, "disk", 0);
        assert_eq!(a, Guid::derive(1, "disk", 0));
        assert_ne!(a, Guid::derive(2, "disk", 0));
        assert_ne!(a, Guid::derive(1, "part", 0));
        assert_eq!(a.to_string().as_bytes()[14], b'4');
    }
}
