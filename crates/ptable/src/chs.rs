//! CHS addresses as fdisk/sfdisk write them (255 heads, 63 sectors per track).

/// Heads per cylinder.
pub const HEADS: u64 = 255;
/// Sectors per track.
pub const SECTORS: u64 = 63;

/// The 3-byte CHS encoding of `lba`; past cylinder 1023 it is `FE FF FF` (1023/254/63).
#[must_use]
pub fn encode(lba: u64) -> [u8; 3] {
    let c = lba / (HEADS * SECTORS);
    if c > 1023 {
        return [0xfe, 0xff, 0xff];
    }
    let h = (lba / SECTORS) % HEADS;
    let s = (lba % SECTORS).saturating_add(1);
    let c = u16::try_from(c).unwrap_or(1023);
    [
        u8::try_from(h).unwrap_or(0xfe),
        u8::try_from(s).unwrap_or(63) | u8::try_from((c >> 2) & 0xc0).unwrap_or(0),
        u8::try_from(c & 0xff).unwrap_or(0xff),
    ]
}

/// Decodes 3 CHS bytes into (cylinder, head, sector).
#[must_use]
pub fn decode(b: [u8; 3]) -> (u16, u8, u8) {
    let [h, s, c] = b;
    let cyl = u16::from(c) | (u16::from(s & 0xc0) << 2);
    (cyl, h, s & 0x3f)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(lba: u64, expected: [u8; 3]) {
        assert_eq!(encode(lba), expected, "lba {lba}");
    }

    #[test]
    fn sfdisk_values() {
        // From partition-tables.md: p1 2048..526335, p2 526336..end on 16 GiB.
        check(2048, [0x20, 0x21, 0x00]);
        check(2048 + 524_288 - 1, [0xc2, 0x22, 0x20]);
        check(526_336, [0xc2, 0x23, 0x20]);
        check(33_554_431, [0xfe, 0xff, 0xff]);
        check(0, [0, 1, 0]);
        assert_eq!(decode([0xc2, 0x22, 0x20]), (32, 194, 34));
    }
}
