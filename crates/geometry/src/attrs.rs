//! GPT partition attribute bits (UEFI 2.10 §5.3.3 table 5-8, and the Discoverable Partitions
//! Specification's flags): what `attributes = ["read-only", "no-auto"]` asks for, what the
//! GPT entry stores, what `plan` and `verify` report.
//!
//! Bits 0–2 are defined for every partition type (bit 2, legacy BIOS bootable, is the
//! `bootable` key and reported as `bootable`, never here); 3–47 are reserved by UEFI and must
//! be zero; 48–63 belong to the partition type. systemd (and Microsoft for basic data
//! partitions) name 59, 60, 62 and 63.
//!
//! ```
//! use blockwise_geometry::GptAttributes;
//! let a = GptAttributes::parse_list(&["read-only", "no-auto", "50"]).unwrap();
//! assert_eq!(a.bits(), (1 << 60) | (1 << 63) | (1 << 50));
//! assert_eq!(a.names(), ["50", "read-only", "no-auto"]);
//! assert!(GptAttributes::parse_list(&["7"]).is_err());
//! ```

use core::fmt;

use serde::de::{self, Deserializer, SeqAccess, Visitor};
use serde::ser::{SerializeSeq, Serializer};
use serde::{Deserialize, Serialize};

/// Bit 2: legacy BIOS bootable (the `bootable` key).
pub const LEGACY_BIOS_BOOTABLE_BIT: u32 = 2;

/// The named bits, in bit order: `(bit, spec name)`.
pub const NAMED_BITS: &[(u32, &str)] = &[
    (0, "required"),
    (1, "no-block-io"),
    (2, "legacy-bios-bootable"),
    (59, "grow-file-system"),
    (60, "read-only"),
    (62, "hidden"),
    (63, "no-auto"),
];

/// The set of GPT attribute bits of one partition. Serialises as a list of names (numbers
/// for unnamed type-specific bits), in bit order.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct GptAttributes(pub u64);

impl GptAttributes {
    /// No bit set.
    pub const NONE: GptAttributes = GptAttributes(0);

    /// The raw 64-bit value as stored in the GPT entry.
    #[must_use]
    pub const fn bits(self) -> u64 {
        self.0
    }

    /// No bit set.
    #[must_use]
    pub const fn is_empty(self) -> bool {
        self.0 == 0
    }

    /// [`GptAttributes::is_empty`] by reference (for serde's `skip_serializing_if`).
    #[must_use]
    pub fn is_empty_ref(&self) -> bool {
        self.0 == 0
    }

    /// Whether `bit` is set.
    #[must_use]
    pub const fn has(self, bit: u32) -> bool {
        bit < 64 && self.0 & (1u64 << bit) != 0
    }

    /// These attributes without bit 2 (which `bootable` reports), and whether bit 2 was set.
    #[must_use]
    pub const fn split_bootable(self) -> (GptAttributes, bool) {
        let b = 1u64 << LEGACY_BIOS_BOOTABLE_BIT;
        (GptAttributes(self.0 & !b), self.0 & b != 0)
    }

    /// The name of one attribute: its spec name, or the bit number.
    #[must_use]
    pub fn name_of(bit: u32) -> String {
        NAMED_BITS
            .iter()
            .find(|(b, _)| *b == bit)
            .map_or_else(|| bit.to_string(), |(_, n)| (*n).to_string())
    }

    /// The set bits as names (numbers where unnamed), in bit order.
    #[must_use]
    pub fn names(self) -> Vec<String> {
        (0..64u32)
            .filter(|&b| self.has(b))
            .map(Self::name_of)
            .collect()
    }

    /// Parses one attribute: a name of [`NAMED_BITS`] or a bit number 0–2 or 48–63.
    pub fn parse_one(s: &str) -> Result<u32, String> {
        let t = s.trim();
        if let Some((b, _)) = NAMED_BITS.iter().find(|(_, n)| n.eq_ignore_ascii_case(t)) {
            return Ok(*b);
        }
        match t.parse::<u32>() {
            Ok(b) => Self::check_bit(u64::from(b)),
            Err(_) => Err(format!(
                "{s:?} is not a GPT attribute: use {}, or a bit number 48-63 (type-specific)",
                NAMED_BITS
                    .iter()
                    .map(|(_, n)| *n)
                    .collect::<Vec<_>>()
                    .join(", ")
            )),
        }
    }

    fn check_bit(b: u64) -> Result<u32, String> {
        match u32::try_from(b) {
            Ok(b @ (0..=2 | 48..=63)) => Ok(b),
            _ if (3..48).contains(&b) => Err(format!(
                "bit {b} is reserved by the UEFI specification (bits 3-47 must be zero); type-specific bits are 48-63"
            )),
            _ => Err(format!("bit {b} does not exist: GPT attributes are bits 0-63")),
        }
    }

    /// Parses a list of names and numbers (a repeated attribute is taken once).
    pub fn parse_list(items: &[&str]) -> Result<Self, String> {
        let mut v = 0u64;
        for i in items {
            v |= 1u64 << Self::parse_one(i)?;
        }
        Ok(GptAttributes(v))
    }
}

impl fmt::Display for GptAttributes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.names().join(","))
    }
}

impl Serialize for GptAttributes {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let bits: Vec<u32> = (0..64u32).filter(|&b| self.has(b)).collect();
        let mut seq = s.serialize_seq(Some(bits.len()))?;
        for b in bits {
            match NAMED_BITS.iter().find(|(n, _)| *n == b) {
                Some((_, name)) => seq.serialize_element(name)?,
                None => seq.serialize_element(&b)?,
            }
        }
        seq.end()
    }
}

impl<'de> Deserialize<'de> for GptAttributes {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = GptAttributes;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a list like [\"read-only\", \"no-auto\"] (names or bit numbers 48-63)")
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<GptAttributes, A::Error> {
                let mut v = 0u64;
                // At most 64 distinct bits; a longer list repeats some, which is harmless,
                // but stop a hostile endless sequence.
                let mut n = 0usize;
                while let Some(item) = seq.next_element::<Item>()? {
                    n += 1;
                    if n > 256 {
                        return Err(de::Error::custom("more than 256 attributes"));
                    }
                    let bit = match item {
                        Item::Name(s) => GptAttributes::parse_one(&s),
                        Item::Bit(b) => GptAttributes::check_bit(b),
                    }
                    .map_err(de::Error::custom)?;
                    v |= 1u64 << bit;
                }
                Ok(GptAttributes(v))
            }
        }
        d.deserialize_seq(V)
    }
}

/// One element of an `attributes` list.
enum Item {
    Name(String),
    Bit(u64),
}

impl<'de> Deserialize<'de> for Item {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = Item;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("an attribute name like \"read-only\" or a bit number")
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<Item, E> {
                Ok(Item::Bit(v))
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<Item, E> {
                u64::try_from(v).map(Item::Bit).map_err(|_| {
                    E::custom(format!(
                        "bit {v} does not exist: GPT attributes are bits 0-63"
                    ))
                })
            }
            fn visit_str<E: de::Error>(self, s: &str) -> Result<Item, E> {
                Ok(Item::Name(s.to_string()))
            }
        }
        d.deserialize_any(V)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        let a: GptAttributes =
            serde_json::from_str(r#"["no-auto", "read-only", 48, "grow-file-system", "required"]"#)
                .unwrap();
        assert_eq!(a.bits(), 1 | (1 << 48) | (1 << 59) | (1 << 60) | (1 << 63));
        assert_eq!(
            serde_json::to_string(&a).unwrap(),
            r#"["required",48,"grow-file-system","read-only","no-auto"]"#
        );
        let (rest, boot) = GptAttributes(0b111).split_bootable();
        assert!(boot);
        assert_eq!(rest.bits(), 0b11);
    }

    #[test]
    fn refusals_say_why() {
        let e = serde_json::from_str::<GptAttributes>(r#"["readonly"]"#).unwrap_err();
        assert!(e.to_string().contains("is not a GPT attribute"), "{e}");
        let e = serde_json::from_str::<GptAttributes>("[5]").unwrap_err();
        assert!(e.to_string().contains("reserved by the UEFI"), "{e}");
        let e = serde_json::from_str::<GptAttributes>("[64]").unwrap_err();
        assert!(e.to_string().contains("bits 0-63"), "{e}");
        let e = serde_json::from_str::<GptAttributes>("[-1]").unwrap_err();
        assert!(e.to_string().contains("bits 0-63"), "{e}");
        assert!(serde_json::from_str::<GptAttributes>(r#""read-only""#).is_err());
    }
}
