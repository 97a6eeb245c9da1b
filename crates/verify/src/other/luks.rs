//! LUKS 1 and 2 headers (cryptsetup's on-disk formats), big-endian.
//!
//! ```text
//! LUKS1: 0x00 "LUKS\xBA\xBE"  0x06 version u16 (1)  0x08 cipher[32]  0x28 mode[32]  0x48 hash[32]
//!        0x68 payload offset u32 (512-byte sectors)  0xA8 uuid[40]
//! LUKS2: 0x00 "LUKS\xBA\xBE" (or "SKUL\xBA\xBE" for the secondary)  0x06 version u16 (2)
//!        0x08 hdr_size u64 (binary header + JSON area)  0x18 label[48]  0xA8 uuid[40]
//!        then the JSON area: {"segments": {"0": {"offset": "16777216", …}}, …}
//! ```
//! The payload (the encrypted data) starts where LUKS1's payload offset or LUKS2's first
//! segment says; the report gives it as `data_start_bytes`.

use blockwise_geometry::OtherFs;

use super::{be16, be32, be64, utf8_label};
use crate::bytes::has;

/// The largest LUKS2 header (`hdr_size`) cryptsetup makes: 4 MiB.
pub const MAX_HDR: u64 = 4 << 20;

/// How many bytes of JSON follow the 4096-byte binary header (LUKS2), bounded.
#[must_use]
pub fn json_len(head: &[u8]) -> Option<usize> {
    if be16(head, 6) != 2 {
        return None;
    }
    let hdr = be64(head, 8);
    (16384..=MAX_HDR)
        .contains(&hdr)
        .then(|| usize::try_from(hdr.saturating_sub(4096)).ok())
        .flatten()
}

fn ascii(field: &[u8]) -> Option<String> {
    utf8_label(field)
}

/// The first segment's offset in the JSON area: `segments` → the lowest-numbered key →
/// `offset` (a decimal string). A small scanner, bounded by the area's length: the JSON is
/// cryptsetup's own, so only its shape is needed, and anything else gives `None`.
fn first_segment_offset(json: &[u8]) -> Option<u64> {
    let end = json.iter().position(|&b| b == 0).unwrap_or(json.len());
    let text = core::str::from_utf8(json.get(..end)?).ok()?;
    let seg = text.find("\"segments\"")?;
    let rest = text.get(seg..)?;
    let off = rest.find("\"offset\"")?;
    let after = rest.get(off.checked_add(8)?..)?;
    let colon = after.find(':')?;
    let v = after.get(colon.checked_add(1)?..)?.trim_start();
    let v = v.strip_prefix('"')?;
    let digits: String = v.chars().take_while(char::is_ascii_digit).collect();
    digits.parse().ok()
}

/// Parses a LUKS header at `base` (absolute): `head` is the first 4096 bytes, `json` the
/// LUKS2 JSON area (empty for LUKS1).
pub fn parse(head: &[u8], json: &[u8], base: u64) -> Result<OtherFs, String> {
    if !has(head, 0, b"LUKS\xba\xbe") {
        return Err("no LUKS magic (a secondary LUKS2 header alone is not a volume)".into());
    }
    let version = be16(head, 6);
    let uuid = ascii(head.get(0xa8..0xa8 + 40).unwrap_or_default());
    match version {
        1 => {
            let payload = u64::from(be32(head, 0x68));
            let cipher = ascii(head.get(8..40).unwrap_or_default());
            if payload == 0 || cipher.is_none() {
                return Err("LUKS1 header without payload offset or cipher".into());
            }
            Ok(OtherFs {
                kind: "luks".into(),
                version: Some("1".into()),
                uuid,
                block_bytes: Some(512),
                data_start_bytes: Some(base.saturating_add(payload.saturating_mul(512))),
                ..OtherFs::default()
            })
        }
        2 => {
            let hdr = be64(head, 8);
            if !(16384..=MAX_HDR).contains(&hdr) || !hdr.is_power_of_two() {
                return Err(format!("LUKS2 header size {hdr}"));
            }
            let offset = first_segment_offset(json);
            Ok(OtherFs {
                kind: "luks".into(),
                version: Some("2".into()),
                label: ascii(head.get(0x18..0x18 + 48).unwrap_or_default()),
                uuid,
                data_start_bytes: offset.map(|o| base.saturating_add(o)),
                ..OtherFs::default()
            })
        }
        v => Err(format!("LUKS version {v}")),
    }
}

#[cfg(test)]
#[expect(clippy::indexing_slicing, clippy::unwrap_used, reason = "tests")]
mod tests {
    use super::*;

    #[test]
    fn segment_offset() {
        let j = br#"{"keyslots":{"0":{"area":{"offset":"32768"}}},"segments":{"0":{"type":"crypt","offset":"16777216","size":"dynamic"}}}"#;
        assert_eq!(first_segment_offset(j), Some(16_777_216));
        assert_eq!(first_segment_offset(b"{}"), None);
        let mut h = vec![0u8; 4096];
        h[..6].copy_from_slice(b"LUKS\xba\xbe");
        h[6..8].copy_from_slice(&2u16.to_be_bytes());
        h[8..16].copy_from_slice(&16384u64.to_be_bytes());
        h[0x18..0x1b].copy_from_slice(b"lbl");
        assert_eq!(json_len(&h), Some(12288));
        let fs = parse(&h, j, 1 << 20).unwrap();
        assert_eq!(fs.label.as_deref(), Some("lbl"));
        assert_eq!(fs.data_start_bytes, Some((1 << 20) + 16_777_216));
        h[8..16].copy_from_slice(&u64::MAX.to_be_bytes());
        assert!(parse(&h, j, 0).is_err());
        assert_eq!(json_len(&h), None);
    }
}
