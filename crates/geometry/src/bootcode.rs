//! Boot code in sector 0: the first 440 bytes of an MBR (and of GPT's protective or hybrid
//! MBR), which BIOS firmware runs. blockwise writes zeros there unless `image.boot-code`
//! names a file (syslinux's `mbr.bin` or `gptmbr.bin`, for instance); [`BootCode::of`] is
//! what `plan` says of that file and what `verify` says of the disk, from the same code.

use serde::Serialize;

/// The boot code area of an MBR: bytes 0..440 (the disk signature follows).
pub const BOOT_CODE_BYTES: usize = 440;

/// Non-zero boot code in sector 0.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct BootCode {
    /// Bytes up to and including the last non-zero one (1..=440).
    pub bytes: u16,
    /// CRC-32 (IEEE, as `crc32 FILE` prints it) of those bytes, 8 hex digits.
    pub crc32: String,
}

impl BootCode {
    /// The boot code of a boot code area (`area` is cut to 440 bytes); `None` when every
    /// byte is zero (what blockwise writes without `image.boot-code`).
    #[must_use]
    pub fn of(area: &[u8]) -> Option<BootCode> {
        let area = area.get(..BOOT_CODE_BYTES).unwrap_or(area);
        let used = area.iter().rposition(|&b| b != 0)?.checked_add(1)?;
        let code = area.get(..used)?;
        let mut h = crc32fast::Hasher::new();
        h.update(code);
        Some(BootCode {
            bytes: u16::try_from(used).unwrap_or(u16::MAX),
            crc32: format!("{:08x}", h.finalize()),
        })
    }

    /// One line for `plan` and `verify`: `440 bytes (CRC-32 1a2b3c4d)`.
    #[must_use]
    pub fn describe(&self) -> String {
        format!("{} bytes (CRC-32 {})", self.bytes, self.crc32)
    }
}

/// The bytes of a boot code file that go into sector 0: a file of at most 440 bytes whole,
/// or a whole 512-byte MBR sector (`55 AA` at its end) whose disk signature and partition
/// entries are all zero, of which the first 440 bytes. Anything else is refused with the
/// reason (the caller names the key and the file): a larger file, an empty one, or a sector
/// that holds a table blockwise would silently replace.
pub fn boot_code_bytes(file: &[u8]) -> Result<&[u8], String> {
    match file.len() {
        0 => Err("is empty: boot code is at most 440 bytes of x86 code (syslinux's mbr.bin, for instance)".into()),
        n if n <= BOOT_CODE_BYTES => Ok(file),
        512 => {
            let (code, rest) = file.split_at(BOOT_CODE_BYTES);
            let blank = rest.get(..70).is_some_and(|t| t.iter().all(|&b| b == 0));
            if rest.get(70..) != Some(&[0x55, 0xaa][..]) {
                Err("is 512 bytes but not an MBR sector (no 55 AA at its end): boot code is at most 440 bytes".into())
            } else if !blank {
                Err("is a 512-byte MBR sector with a disk signature or partition entries: blockwise writes its own table there, so give the first 440 bytes only (dd bs=440 count=1)".into())
            } else {
                Ok(code)
            }
        }
        n => Err(format!(
            "is {n} bytes: the boot code area of an MBR is 440 bytes (a 512-byte sector with a blank table is taken too)"
        )),
    }
}

#[cfg(test)]
#[expect(clippy::unwrap_used, reason = "tests")]
mod tests {
    use super::*;

    #[test]
    fn zeros_are_no_boot_code() {
        assert_eq!(BootCode::of(&[0u8; 440]), None);
        assert_eq!(BootCode::of(&[]), None);
        let mut a = [0u8; 512];
        a[500] = 1; // past the boot code area
        assert_eq!(BootCode::of(&a), None);
        a[2] = 0xeb;
        let b = BootCode::of(&a).unwrap();
        assert_eq!(b.bytes, 3);
        // crc32 of [0, 0, 0xeb]
        let mut h = crc32fast::Hasher::new();
        h.update(&[0, 0, 0xeb]);
        assert_eq!(b.crc32, format!("{:08x}", h.finalize()));
        assert_eq!(b.describe(), format!("3 bytes (CRC-32 {})", b.crc32));
    }

    #[test]
    fn file_rules() {
        assert!(boot_code_bytes(&[]).unwrap_err().contains("empty"));
        assert_eq!(boot_code_bytes(&[1; 440]).unwrap().len(), 440);
        assert_eq!(boot_code_bytes(&[1; 3]).unwrap().len(), 3);
        assert!(boot_code_bytes(&[1; 441])
            .unwrap_err()
            .contains("441 bytes"));
        let mut s = [0u8; 512];
        s[..440].fill(7);
        assert!(boot_code_bytes(&s).unwrap_err().contains("55 AA"));
        s[510] = 0x55;
        s[511] = 0xaa;
        assert_eq!(boot_code_bytes(&s).unwrap(), &[7u8; 440][..]);
        s[0x1be] = 0x80;
        assert!(boot_code_bytes(&s)
            .unwrap_err()
            .contains("partition entries"));
        s[0x1be] = 0;
        s[0x1b8] = 1;
        assert!(boot_code_bytes(&s).unwrap_err().contains("disk signature"));
    }
}
