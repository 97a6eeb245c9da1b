//! ISO 9660 (ECMA-119): the volume descriptors from sector 16 (byte 32768), 2048 bytes each.
//!
//! ```text
//! 0x000 type (1 primary, 2 supplementary, 255 terminator)  0x001 "CD001"
//! 0x028 volume identifier [32]  0x050 volume space size u32 LE (then BE)
//! 0x058 escape sequences (Joliet: "%/@", "%/C", "%/E")  0x080 logical block size u16 LE
//! 0x32D creation date "YYYYMMDDHHMMSScc" + zone (blkid's UUID: YYYY-MM-DD-HH-MM-SS-cc)
//! ```
//! A Joliet descriptor's identifier is UCS-2 big-endian and keeps the case the author gave,
//! so it is the label when there is one; otherwise the primary descriptor's.

use blockwise_geometry::OtherFs;

use super::{be16, le16, utf16_label};
use crate::bytes::{has, le32};

/// Where the volume descriptors start.
pub const DESCRIPTORS_OFFSET: u64 = 0x8000;
/// Bytes of one descriptor (one 2048-byte sector).
pub const SECTOR: usize = 2048;
/// Most descriptors read before the terminator.
pub const MAX_DESCRIPTORS: usize = 16;

fn date_uuid(d: &[u8]) -> Option<String> {
    let digits = d.get(..16)?;
    if !digits.iter().all(u8::is_ascii_digit) || digits.iter().all(|&c| c == b'0') {
        return None;
    }
    let s = core::str::from_utf8(digits).ok()?;
    Some(format!(
        "{}-{}-{}-{}-{}-{}-{}",
        s.get(0..4)?,
        s.get(4..6)?,
        s.get(6..8)?,
        s.get(8..10)?,
        s.get(10..12)?,
        s.get(12..14)?,
        s.get(14..16)?
    ))
}

fn ascii_label(field: &[u8]) -> Option<String> {
    let s: String = field
        .iter()
        .map(|&c| {
            if (0x20..0x7f).contains(&c) {
                char::from(c)
            } else {
                '?'
            }
        })
        .collect();
    let t = s.trim_end_matches([' ', '?']).to_string();
    (!t.is_empty()).then_some(t)
}

/// Parses the descriptors read at [`DESCRIPTORS_OFFSET`] (up to [`MAX_DESCRIPTORS`]).
pub fn parse(vds: &[u8]) -> Result<OtherFs, String> {
    let mut pvd: Option<&[u8]> = None;
    let mut joliet: Option<&[u8]> = None;
    for d in vds.chunks_exact(SECTOR).take(MAX_DESCRIPTORS) {
        if !has(d, 1, b"CD001") {
            break;
        }
        match d.first().copied() {
            Some(1) if pvd.is_none() => pvd = Some(d),
            Some(2)
                if joliet.is_none()
                    && has(d, 88, b"%/")
                    && matches!(d.get(90), Some(b'@' | b'C' | b'E')) =>
            {
                joliet = Some(d);
            }
            Some(255) => break,
            _ => {}
        }
    }
    let p = pvd.ok_or_else(|| "no primary volume descriptor before the terminator".to_string())?;
    let block = le16(p, 128);
    if !block.is_power_of_two() || !(512..=2048).contains(&block) || be16(p, 130) != block {
        return Err(format!("logical block size {block}"));
    }
    let blocks = le32(p, 80);
    let label = joliet
        .and_then(|j| {
            utf16_label(
                j.get(40..72)
                    .unwrap_or_default()
                    .chunks_exact(2)
                    .map(|c| be16(c, 0)),
            )
        })
        .or_else(|| ascii_label(p.get(40..72).unwrap_or_default()));
    let uuid = date_uuid(p.get(813..830).unwrap_or_default())
        .or_else(|| date_uuid(p.get(830..847).unwrap_or_default()));
    Ok(OtherFs {
        kind: "iso9660".into(),
        label,
        uuid,
        size_bytes: Some(u64::from(blocks).saturating_mul(u64::from(block))),
        block_bytes: Some(u32::from(block)),
        ..OtherFs::default()
    })
}
