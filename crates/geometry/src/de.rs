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
        float_bytes(v).map_err(E::custom)
    }

    fn visit_str<E: de::Error>(self, s: &str) -> Result<u64, E> {
        parse_size(s).map_err(E::custom)
    }
}

/// Largest float taken as a byte count: 2^53, below which every whole number is exact.
const FLOAT_EXACT: f64 = 9_007_199_254_740_992.0;

/// A float as a byte count: a whole number from 0 to 2^53 (what Python's `1.5 * 2**30` or a
/// JSON number from JavaScript gives) is taken; a fraction, a negative, a larger value,
/// infinity or NaN is an error that says which, without printing 300 digits.
pub(crate) fn float_bytes(v: f64) -> Result<u64, String> {
    if v.is_nan() {
        return Err("NaN is not a number of bytes".into());
    }
    if v < 0.0 || (v == 0.0 && v.is_sign_negative()) {
        let shown = if v > -1e16 {
            format!("{v}")
        } else {
            format!("{v:e}")
        };
        return Err(format!("size must not be negative, found {shown}"));
    }
    if v > FLOAT_EXACT {
        return Err(format!(
            "{v:e} is too large for a number with a decimal point or exponent (at most 2^53); write a size like \"16TiB\" as a string"
        ));
    }
    if v.fract() != 0.0 {
        return Err(format!(
            "{v} is not a whole number of bytes; write a size like \"1.5GiB\" as a string"
        ));
    }
    // A whole number in 0..=2^53, checked above: the cast is exact.
    Ok(v as u64)
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
        // Whole floats (Python arithmetic, JavaScript numbers) up to 2^53 are bytes.
        check(r#"{"size": 1073741824.0}"#, Ok((Some(1 << 30), None)));
        check(r#"{"size": 9007199254740992.0}"#, Ok((Some(1 << 53), None)));
        check(
            r#"{"size": 1e300}"#,
            Err("1e300 is too large for a number with a decimal point"),
        );
        check(
            r#"{"size": -0.0}"#,
            Err("size must not be negative, found -0"),
        );
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
