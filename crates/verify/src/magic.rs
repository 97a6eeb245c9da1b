//! Content recognition by magic numbers. FAT and ext2/3/4 are parsed further by their
//! modules; everything else is only named ("not checked").

use crate::bytes::{has, le32};
use crate::fat::looks_like_fat;

/// What a volume's first bytes say it is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Content {
    /// A FAT boot sector.
    Fat,
    /// ext2/3/4 superblock magic.
    Ext,
    /// Named but not checked: `swap`, `squashfs`, `iso9660`, `luks`, `ntfs`, `exfat`,
    /// `btrfs`, `xfs`, `f2fs`, `lvm2`, `erofs`, `verity` (squashfs, EROFS and verity are
    /// then parsed by their modules).
    Other(&'static str),
    /// The probed bytes are all zero.
    Empty,
    /// Not recognised.
    Unknown,
}

/// Offsets (relative to the volume start) and lengths that [`classify`] looks at.
pub const PROBES: &[(u64, usize)] = &[(0, 4096), (0x8000, 8), (0x10040, 8), (0xfff6, 10)];

/// Classifies a volume from the probe reads of [`PROBES`] (`head` = first 4096 bytes,
/// `iso` = 8 bytes at 0x8000, `btrfs` = 8 bytes at 0x10040, `swap64k` = 10 bytes at 0xFFF6;
/// shorter slices when the volume is smaller).
#[must_use]
pub fn classify(head: &[u8], iso: &[u8], btrfs: &[u8], swap64k: &[u8]) -> Content {
    if has(head, 3, b"NTFS    ") {
        return Content::Other("ntfs");
    }
    if has(head, 3, b"EXFAT   ") {
        return Content::Other("exfat");
    }
    if looks_like_fat(head) {
        return Content::Fat;
    }
    let superblock = usize::try_from(crate::ext4::SUPERBLOCK_OFFSET)
        .ok()
        .and_then(|o| head.get(o..));
    if superblock.is_some_and(crate::ext4::has_magic) {
        return Content::Ext;
    }
    if has(head, 0, b"LUKS\xba\xbe") || has(head, 0, b"SKUL\xba\xbe") {
        return Content::Other("luks");
    }
    if has(head, 0, b"XFSB") {
        return Content::Other("xfs");
    }
    if has(head, 0, b"hsqs") || has(head, 0, b"sqsh") {
        return Content::Other("squashfs");
    }
    if le32(head, 1024) == 0xe0f5_e1e2 {
        return Content::Other("erofs");
    }
    if has(head, 0, b"verity\0\0") {
        return Content::Other("verity");
    }
    if le32(head, 1024) == 0xf2f5_2010 {
        return Content::Other("f2fs");
    }
    if has(head, 512, b"LABELONE") && has(head, 512 + 24, b"LVM2") {
        return Content::Other("lvm2");
    }
    if has(head, 4086, b"SWAPSPACE2")
        || has(head, 4086, b"SWAP-SPACE")
        || has(swap64k, 0, b"SWAPSPACE2")
    {
        return Content::Other("swap");
    }
    if has(btrfs, 0, b"_BHRfS_M") {
        return Content::Other("btrfs");
    }
    if has(iso, 1, b"CD001") {
        return Content::Other("iso9660");
    }
    if head.iter().all(|&b| b == 0) {
        return Content::Empty;
    }
    Content::Unknown
}

#[cfg(test)]
#[expect(clippy::indexing_slicing, reason = "tests")]
mod tests {
    use super::*;

    #[test]
    fn magics() {
        let mut h = vec![0u8; 4096];
        assert_eq!(classify(&h, &[], &[], &[]), Content::Empty);
        h[4086..4096].copy_from_slice(b"SWAPSPACE2");
        assert_eq!(classify(&h, &[], &[], &[]), Content::Other("swap"));
        let h = b"hsqs".to_vec();
        assert_eq!(classify(&h, &[], &[], &[]), Content::Other("squashfs"));
        assert_eq!(
            classify(&[1], b"\x01CD001\x01\x00", &[], &[]),
            Content::Other("iso9660")
        );
        assert_eq!(
            classify(&[1], &[], b"_BHRfS_M", &[]),
            Content::Other("btrfs")
        );
        assert_eq!(classify(&[1], &[], &[], &[]), Content::Unknown);
    }
}
