//! NTFS: the boot sector (sizes, MFT location, serial number) and the `$VOLUME_NAME`
//! attribute of MFT record 3 (`$Volume`) for the label.
//!
//! ```text
//! boot sector: 0x03 "NTFS    "  0x0B bytes/sector u16  0x0D sectors/cluster u8 (>0x80: 2^(256-v))
//!              0x28 total sectors u64  0x30 $MFT cluster u64  0x40 clusters/MFT record i8 (<0: 2^-v bytes)
//!              0x48 serial number u64 (blkid's UUID, 16 upper-case hex digits)
//! MFT record:  "FILE", 0x04 update-sequence offset u16, 0x06 its count u16, 0x14 first attribute u16
//! attribute:   0x00 type u32 (0x60 = $VOLUME_NAME, 0xFFFFFFFF = end), 0x04 length u32,
//!              0x08 non-resident u8, 0x10 value length u32, 0x14 value offset u16
//! ```

use blockwise_geometry::OtherFs;

use super::{le16, utf16_label};
use crate::bytes::{has, le32, le64};

/// The parsed boot sector.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Boot {
    /// Bytes per sector.
    pub sector_bytes: u32,
    /// Bytes per cluster.
    pub cluster_bytes: u64,
    /// Sectors of the volume (the backup boot sector follows them).
    pub total_sectors: u64,
    /// Byte offset of `$MFT` in the volume.
    pub mft_bytes: u64,
    /// Bytes per MFT record.
    pub record_bytes: u64,
    /// Serial number.
    pub serial: u64,
}

/// The largest MFT record read for the label.
const MAX_RECORD: u64 = 64 << 10;
/// `$VOLUME_NAME`.
const VOLUME_NAME: u32 = 0x60;

/// Parses the boot sector.
pub fn parse_boot(b: &[u8]) -> Result<Boot, String> {
    if !has(b, 3, b"NTFS    ") {
        return Err("no NTFS signature".into());
    }
    let bps = u32::from(le16(b, 0x0b));
    if !bps.is_power_of_two() || !(256..=4096).contains(&bps) {
        return Err(format!("{bps} bytes per sector"));
    }
    let spc_raw = b.get(0x0d).copied().unwrap_or(0);
    let cluster_bytes = match spc_raw {
        0 => return Err("0 sectors per cluster".into()),
        v @ 1..=0x80 if v.is_power_of_two() => u64::from(bps).saturating_mul(u64::from(v)),
        // Above 0x80: 2^(256 - v) sectors (large clusters, Windows 10).
        v if v > 0x80 => u64::from(bps)
            .checked_shl(u32::from(0u8.wrapping_sub(v)))
            .unwrap_or(0),
        v => return Err(format!("sectors per cluster byte 0x{v:02x}")),
    };
    if cluster_bytes < u64::from(bps) || cluster_bytes > (2 << 20) {
        return Err(format!("clusters of {cluster_bytes} bytes"));
    }
    let total_sectors = le64(b, 0x28);
    if total_sectors == 0 {
        return Err("0 sectors".into());
    }
    let mft_bytes = le64(b, 0x30)
        .checked_mul(cluster_bytes)
        .ok_or_else(|| "the $MFT cluster number overflows".to_string())?;
    let cpr = b.get(0x40).copied().unwrap_or(0);
    let record_bytes = if cpr == 0 {
        return Err("0 clusters per MFT record".into());
    } else if cpr < 0x80 {
        cluster_bytes.saturating_mul(u64::from(cpr))
    } else {
        1u64.checked_shl(u32::from(0u8.wrapping_sub(cpr)))
            .unwrap_or(0)
    };
    if !(256..=MAX_RECORD).contains(&record_bytes) {
        return Err(format!("MFT records of {record_bytes} bytes"));
    }
    Ok(Boot {
        sector_bytes: bps,
        cluster_bytes,
        total_sectors,
        mft_bytes,
        record_bytes,
        serial: le64(b, 0x48),
    })
}

impl Boot {
    /// Where record 3 (`$Volume`) is, relative to the volume: `(offset, length)`.
    #[must_use]
    pub fn volume_record(&self) -> Option<(u64, usize)> {
        let off = self
            .mft_bytes
            .checked_add(self.record_bytes.checked_mul(3)?)?;
        Some((off, usize::try_from(self.record_bytes).ok()?))
    }

    /// The filesystem, with the label from `record` (record 3, as read; may be empty).
    #[must_use]
    pub fn to_fs(&self, record: &[u8]) -> OtherFs {
        OtherFs {
            kind: "ntfs".into(),
            label: volume_name(record),
            uuid: Some(format!("{:016X}", self.serial)),
            size_bytes: self.total_sectors.checked_mul(u64::from(self.sector_bytes)),
            block_bytes: u32::try_from(self.cluster_bytes).ok(),
            ..OtherFs::default()
        }
    }
}

/// The label in MFT record 3, after applying its update-sequence fixups; `None` when the
/// record or the attribute is missing or malformed.
#[must_use]
pub fn volume_name(record: &[u8]) -> Option<String> {
    if !has(record, 0, b"FILE") {
        return None;
    }
    let mut r = record.to_vec();
    let usa_ofs = usize::from(le16(&r, 4));
    let usa_count = usize::from(le16(&r, 6));
    let usn = le16(&r, usa_ofs);
    // One entry per 512-byte stride, after the sequence number.
    for k in 1..usa_count.min((r.len() / 512).saturating_add(1)) {
        let end = k.checked_mul(512)?;
        let at = end.checked_sub(2)?;
        if le16(&r, at) != usn {
            return None;
        }
        let fix = usa_ofs.checked_add(k.checked_mul(2)?)?;
        let v = r.get(fix..fix.checked_add(2)?)?.to_vec();
        r.get_mut(at..end)?.copy_from_slice(&v);
    }
    let mut at = usize::from(le16(&r, 0x14));
    // Attributes are at least 16 bytes long; a record holds at most len/16 of them.
    for _ in 0..r.len() / 16 {
        let ty = le32(&r, at);
        if ty == 0xffff_ffff || ty == 0 {
            return None;
        }
        let len = usize::try_from(le32(&r, at.checked_add(4)?)).ok()?;
        if len < 16 || at.checked_add(len)? > r.len() {
            return None;
        }
        if ty == VOLUME_NAME && r.get(at.checked_add(8)?) == Some(&0) {
            let vlen = usize::try_from(le32(&r, at.checked_add(0x10)?)).ok()?;
            let voff = usize::from(le16(&r, at.checked_add(0x14)?));
            let start = at.checked_add(voff)?;
            let value = r.get(start..start.checked_add(vlen)?)?;
            return utf16_label(value.chunks_exact(2).map(|c| {
                u16::from_le_bytes([
                    c.first().copied().unwrap_or(0),
                    c.get(1).copied().unwrap_or(0),
                ])
            }));
        }
        at = at.checked_add(len)?;
    }
    None
}

#[cfg(test)]
#[expect(clippy::indexing_slicing, clippy::unwrap_used, reason = "tests")]
mod tests {
    use super::*;

    #[test]
    fn boot_and_label() {
        let mut b = vec![0u8; 512];
        b[3..11].copy_from_slice(b"NTFS    ");
        b[0x0b..0x0d].copy_from_slice(&512u16.to_le_bytes());
        b[0x0d] = 8;
        b[0x28..0x30].copy_from_slice(&20479u64.to_le_bytes());
        b[0x30..0x38].copy_from_slice(&4u64.to_le_bytes());
        b[0x40] = 0xf6; // 2^10 = 1024-byte records
        b[0x48..0x50].copy_from_slice(&0x1234_5678_9abc_def0u64.to_le_bytes());
        let boot = parse_boot(&b).unwrap();
        assert_eq!(boot.cluster_bytes, 4096);
        assert_eq!(boot.record_bytes, 1024);
        assert_eq!(boot.volume_record(), Some((4 * 4096 + 3 * 1024, 1024)));
        // Record 3 with a $VOLUME_NAME "Data" and fixups (usn 7).
        let mut r = vec![0u8; 1024];
        r[0..4].copy_from_slice(b"FILE");
        r[4..6].copy_from_slice(&0x30u16.to_le_bytes());
        r[6..8].copy_from_slice(&3u16.to_le_bytes());
        r[0x30..0x32].copy_from_slice(&7u16.to_le_bytes());
        r[0x14..0x16].copy_from_slice(&0x38u16.to_le_bytes());
        let a = 0x38;
        r[a..a + 4].copy_from_slice(&0x60u32.to_le_bytes());
        r[a + 4..a + 8].copy_from_slice(&32u32.to_le_bytes());
        r[a + 0x10..a + 0x14].copy_from_slice(&8u32.to_le_bytes());
        r[a + 0x14..a + 0x16].copy_from_slice(&0x18u16.to_le_bytes());
        for (k, c) in "Data".encode_utf16().enumerate() {
            r[a + 0x18 + 2 * k..a + 0x1a + 2 * k].copy_from_slice(&c.to_le_bytes());
        }
        r[a + 32..a + 36].copy_from_slice(&0xffff_ffffu32.to_le_bytes());
        for k in 1..3 {
            let end = k * 512;
            let orig = [r[end - 2], r[end - 1]];
            r[0x30 + 2 * k..0x32 + 2 * k].copy_from_slice(&orig);
            r[end - 2..end].copy_from_slice(&7u16.to_le_bytes());
        }
        let fs = boot.to_fs(&r);
        assert_eq!(fs.label.as_deref(), Some("Data"));
        assert_eq!(fs.uuid.as_deref(), Some("123456789ABCDEF0"));
        assert_eq!(fs.size_bytes, Some(20479 * 512));
        // A torn record (fixup mismatch) gives no label, never a panic.
        r[510] = 0;
        assert_eq!(volume_name(&r), None);
        b[0x0d] = 3;
        assert!(parse_boot(&b).is_err());
    }
}
