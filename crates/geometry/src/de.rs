//! Deserialisers for the value shapes a spec uses, shared by every crate that owns part of
//! the spec (the layout here, `fat` and `ext4` options, the image crate's partitions).
//!
//! They accept what a TOML file, a Python dict and a JS object give: sizes as a number of
//! bytes or a string with a binary unit (`4096`, `"4MiB"`), whole numbers as integers or
//! strings (`42`, `"0x2a"`, `"0o52"`). Their error messages are the *reason* part of a spec
//! error; the caller's deserialiser supplies the key path.
//!
//! ```
//! #[derive(serde::Deserialize)]
//! struct Opt {
//!     #[serde(deserialize_with = "blockwise_geometry::de::size")]
//!     cluster: u64,
//! }
//! let o: Opt = serde_json::from_str(r#"{ "cluster": "4KiB" }"#).unwrap();
//! assert_eq!(o.cluster, 4096);
//! ```

use core::fmt;
use core::marker::PhantomData;

use serde::de::{self, Deserializer, Visitor};

use crate::units::parse_size;

/// Parses a whole number written as `42`, `0x2a` or `0o52`.
#[must_use]
pub fn parse_uint(s: &str) -> Option<u64> {
    let s = s.trim();
    if let Some(h) = s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        u64::from_str_radix(h, 16).ok()
    } else if let Some(o) = s.strip_prefix("0o") {
        u64::from_str_radix(o, 8).ok()
    } else {
        s.parse().ok()
    }
}

struct SizeVisitor;

impl Visitor<'_> for SizeVisitor {
    type Value = u64;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a size like \"4MiB\" or a number of bytes")
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> Result<u64, E> {
        Ok(v)
    }

    fn visit_i64<E: de::Error>(self, v: i64) -> Result<u64, E> {
        u64::try_from(v).map_err(|_| E::custom(format!("size must not be negative, found {v}")))
    }

    fn visit_f64<E: de::Error>(self, v: f64) -> Result<u64, E> {
        Err(E::custom(format!(
            "{v} is not a whole number of bytes; write a size like \"1.5GiB\" as a string"
        )))
    }

    fn visit_str<E: de::Error>(self, s: &str) -> Result<u64, E> {
        parse_size(s).map_err(E::custom)
    }
}

/// A size in bytes: an integer or a string like `"4MiB"`.
pub fn size<'de, D: Deserializer<'de>>(d: D) -> Result<u64, D::Error> {
    d.deserialize_any(SizeVisitor)
}

/// An optional size (`None` when the key is absent; use with `#[serde(default)]`).
pub fn opt_size<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u64>, D::Error> {
    size(d).map(Some)
}

struct UintVisitor<T, const MAX: u64>(PhantomData<T>);

impl<T: TryFrom<u64>, const MAX: u64> UintVisitor<T, MAX> {
    fn fit<E: de::Error>(n: u64) -> Result<T, E> {
        if n > MAX {
            return Err(E::custom(format!("{n} is too large (at most {MAX})")));
        }
        T::try_from(n).map_err(|_| E::custom(format!("{n} is too large")))
    }
}

impl<T: TryFrom<u64>, const MAX: u64> Visitor<'_> for UintVisitor<T, MAX> {
    type Value = T;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a whole number")
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> Result<T, E> {
        Self::fit(v)
    }

    fn visit_i64<E: de::Error>(self, v: i64) -> Result<T, E> {
        let n =
            u64::try_from(v).map_err(|_| E::custom(format!("must not be negative, found {v}")))?;
        Self::fit(n)
    }

    fn visit_str<E: de::Error>(self, s: &str) -> Result<T, E> {
        let n = parse_uint(s).ok_or_else(|| E::custom(format!("{s:?} is not a whole number")))?;
        Self::fit(n)
    }
}

/// A whole number of at most `MAX` (integer, or a decimal/`0x`/`0o` string), converted to `T`.
pub fn uint<'de, D: Deserializer<'de>, T: TryFrom<u64>, const MAX: u64>(
    d: D,
) -> Result<T, D::Error> {
    d.deserialize_any(UintVisitor::<T, MAX>(PhantomData))
}

/// An optional [`uint`] (use with `#[serde(default)]`).
pub fn opt_uint<'de, D: Deserializer<'de>, T: TryFrom<u64>, const MAX: u64>(
    d: D,
) -> Result<Option<T>, D::Error> {
    uint::<D, T, MAX>(d).map(Some)
}

/// A value parsed from a string by `parse`, whose error text becomes the reason.
pub fn from_str<'de, D, T>(
    d: D,
    expecting: &'static str,
    parse: fn(&str) -> Result<T, String>,
) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
{
    struct V<T> {
        expecting: &'static str,
        parse: fn(&str) -> Result<T, String>,
    }
    impl<T> Visitor<'_> for V<T> {
        type Value = T;
        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str(self.expecting)
        }
        fn visit_str<E: de::Error>(self, s: &str) -> Result<T, E> {
            (self.parse)(s).map_err(E::custom)
        }
    }
    d.deserialize_str(V { expecting, parse })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::Deserialize;

    #[derive(Deserialize, Debug)]
    struct T {
        #[serde(default, deserialize_with = "opt_size")]
        size: Option<u64>,
        #[serde(default, deserialize_with = "opt_uint::<_, u32, 4095>")]
        major: Option<u32>,
    }

    fn check(json: &str, expected: Result<(Option<u64>, Option<u32>), &str>) {
        let got = serde_json::from_str::<T>(json)
            .map(|t| (t.size, t.major))
            .map_err(|e| e.to_string());
        match (got, expected) {
            (Ok(g), Ok(e)) => assert_eq!(g, e, "{json}"),
            (Err(g), Err(e)) => assert!(g.contains(e), "{json}: {g}"),
            (g, e) => panic!("{json}: got {g:?}, expected {e:?}"),
        }
    }

    #[test]
    fn shapes() {
        check(r#"{"size": 4096}"#, Ok((Some(4096), None)));
        check(r#"{"size": "4MiB"}"#, Ok((Some(4 << 20), None)));
        check(
            r#"{"size": -1}"#,
            Err("size must not be negative, found -1"),
        );
        check(r#"{"size": 1.5}"#, Err("not a whole number of bytes"));
        check(r#"{"size": "4XB"}"#, Err("has an unknown unit"));
        check(r#"{"size": true}"#, Err("expected a size like"));
        check(r#"{"major": "0x10"}"#, Ok((None, Some(16))));
        check(
            r#"{"major": 4096}"#,
            Err("4096 is too large (at most 4095)"),
        );
        check(r#"{"major": -3}"#, Err("must not be negative, found -3"));
        check(r#"{"major": "x"}"#, Err("\"x\" is not a whole number"));
        assert_eq!(parse_uint("0o17"), Some(15));
    }
}
