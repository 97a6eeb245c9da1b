//! XFS: the primary superblock (sector 0 of the volume), big-endian.
//!
//! ```text
//! 0x00 "XFSB"  0x04 blocksize u32  0x08 dblocks u64  0x20 uuid[16]  0x54 agblocks u32
//! 0x58 agcount u32  0x64 versionnum u16 (low nibble 5 = v5, CRCs)  0x66 sectsize u16
//! 0x6C fname[12] (label)  0xB8 unit u32 (sunit, blocks)  0xBC width u32 (swidth, blocks)
//! 0xE0 crc (v5: CRC-32C of the sector with this field zeroed, stored little-endian)
//! ```

use blockwise_geometry::OtherFs;

use super::{be16, be32, be64, crc32c, utf8_label, uuid_string};
use crate::bytes::{has, le32};

/// Parses the superblock sector(s) at the volume start.
pub fn parse(sb: &[u8]) -> Result<OtherFs, String> {
    if !has(sb, 0, b"XFSB") {
        return Err("no XFS magic".into());
    }
    let bs = be32(sb, 4);
    if !bs.is_power_of_two() || !(512..=65536).contains(&bs) {
        return Err(format!("block size {bs}"));
    }
    let sect = be16(sb, 0x66);
    if !sect.is_power_of_two() || !(512..=32768).contains(&sect) || u32::from(sect) > bs {
        return Err(format!("sector size {sect}"));
    }
    let agcount = be32(sb, 0x58);
    let agblocks = be32(sb, 0x54);
    let dblocks = be64(sb, 8);
    if agcount == 0
        || agblocks == 0
        || dblocks > u64::from(agcount).saturating_mul(u64::from(agblocks))
    {
        return Err(format!(
            "{dblocks} blocks do not fit {agcount} allocation groups of {agblocks} blocks"
        ));
    }
    if be16(sb, 0x64) & 0xf == 5 {
        let n = usize::from(sect);
        let sector = sb
            .get(..n)
            .ok_or_else(|| "the superblock sector is cut off".to_string())?;
        let mut copy = sector.to_vec();
        if let Some(c) = copy.get_mut(0xe0..0xe4) {
            c.fill(0);
        }
        let want = crc32c(&copy);
        if le32(sb, 0xe0) != want {
            return Err(format!(
                "superblock checksum 0x{:08x}, computed 0x{want:08x}",
                le32(sb, 0xe0)
            ));
        }
    }
    let blocks = |v: u32| u64::from(v).checked_mul(u64::from(bs)).filter(|&b| b > 0);
    Ok(OtherFs {
        kind: "xfs".into(),
        version: Some((be16(sb, 0x64) & 0xf).to_string()),
        label: utf8_label(sb.get(0x6c..0x78).unwrap_or_default()),
        uuid: uuid_string(sb.get(0x20..0x30).unwrap_or_default()),
        size_bytes: dblocks.checked_mul(u64::from(bs)),
        block_bytes: Some(bs),
        stripe_unit_bytes: blocks(be32(sb, 0xb8)),
        stripe_width_bytes: blocks(be32(sb, 0xbc)),
        ..OtherFs::default()
    })
}
