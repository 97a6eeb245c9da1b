//! btrfs: the primary superblock at 64 KiB.
//!
//! ```text
//! 0x000 csum[32] (crc32c of 0x20..0x1000 in the first 4 bytes when csum_type = 0)
//! 0x020 fsid[16]  0x030 bytenr u64 (= 65536)  0x040 "_BHRfS_M"  0x070 total_bytes u64
//! 0x088 num_devices u64  0x090 sectorsize u32  0x094 nodesize u32  0x0C4 csum_type u16
//! 0x0C9 dev_item (0x62 bytes; 0x08 its total_bytes u64, this device's share)  0x12B label[256]
//! ```

use blockwise_geometry::OtherFs;

use super::{crc32c, le16, utf8_label, uuid_string};
use crate::bytes::{has, le32, le64};

/// Where the primary superblock is, from the volume start.
pub const SUPER_OFFSET: u64 = 0x10000;

/// Parses the 4096-byte superblock read at [`SUPER_OFFSET`].
pub fn parse(sb: &[u8]) -> Result<OtherFs, String> {
    if !has(sb, 0x40, b"_BHRfS_M") {
        return Err("no btrfs magic".into());
    }
    if sb.len() < 4096 {
        return Err("the superblock is cut off by the end of the partition".into());
    }
    if le64(sb, 0x30) != SUPER_OFFSET {
        return Err(format!(
            "the superblock says it lies at byte {}, not {SUPER_OFFSET}",
            le64(sb, 0x30)
        ));
    }
    let csum_type = le16(sb, 0xc4);
    if csum_type == 0 {
        let want = crc32c(sb.get(0x20..4096).unwrap_or_default());
        if le32(sb, 0) != want {
            return Err(format!(
                "superblock checksum 0x{:08x}, computed 0x{want:08x}",
                le32(sb, 0)
            ));
        }
    }
    let sectorsize = le32(sb, 0x90);
    let nodesize = le32(sb, 0x94);
    if !sectorsize.is_power_of_two() || !(4096..=65536).contains(&sectorsize) {
        return Err(format!("sector size {sectorsize}"));
    }
    if !nodesize.is_power_of_two() || nodesize < sectorsize || nodesize > 65536 {
        return Err(format!("node size {nodesize}"));
    }
    // This device's size (dev_item.total_bytes); the filesystem's total may span devices.
    let dev_bytes = le64(sb, 0xc9 + 8);
    Ok(OtherFs {
        kind: "btrfs".into(),
        label: utf8_label(sb.get(0x12b..0x12b + 256).unwrap_or_default()),
        uuid: uuid_string(sb.get(0x20..0x30).unwrap_or_default()),
        size_bytes: Some(dev_bytes),
        block_bytes: Some(sectorsize),
        ..OtherFs::default()
    })
}
