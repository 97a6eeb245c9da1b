//! Hostile-input-safe parsing of an ext2/3/4 superblock and group descriptors (used by
//! tests; `verify` may reuse it). Every value derived from the input goes through checked
//! arithmetic; nothing here panics or allocates more than the input justifies.

#![deny(
    clippy::indexing_slicing,
    clippy::arithmetic_side_effects,
    clippy::as_conversions,
    clippy::unwrap_used,
    clippy::panic
)]

use crate::csum::crc32c_raw;

/// What a superblock says, validated (reference §13).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SuperblockInfo {
    /// Block size in bytes.
    pub block_bytes: u64,
    /// Total blocks.
    pub blocks: u64,
    /// Total inodes.
    pub inodes: u64,
    /// Blocks per group.
    pub blocks_per_group: u64,
    /// Inodes per group.
    pub inodes_per_group: u64,
    /// Number of groups.
    pub groups: u64,
    /// First data block (1 for 1 KiB blocks).
    pub first_data_block: u64,
    /// Group descriptor size (32 or 64..=1024).
    pub desc_size: u64,
    /// `s_feature_compat`, `s_feature_incompat`, `s_feature_ro_compat`.
    pub features: [u32; 3],
    /// RAID stride and stripe width (blocks).
    pub raid: (u32, u32),
    /// UUID bytes.
    pub uuid: [u8; 16],
    /// `Some(ok)` when metadata_csum is on: whether `s_checksum` matches.
    pub checksum_ok: Option<bool>,
}

/// Why a superblock was rejected.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SuperblockError {
    /// Fewer than 1024 bytes.
    #[error("superblock truncated")]
    Truncated,
    /// No 0xEF53.
    #[error("no ext2/3/4 magic")]
    Magic,
    /// A field is out of range.
    #[error("superblock field {0} is invalid")]
    Field(&'static str),
}

fn u16_at(b: &[u8], o: usize) -> Result<u16, SuperblockError> {
    let s = b
        .get(o..o.checked_add(2).ok_or(SuperblockError::Truncated)?)
        .ok_or(SuperblockError::Truncated)?;
    Ok(u16::from_le_bytes(
        s.try_into().map_err(|_| SuperblockError::Truncated)?,
    ))
}

fn u32_at(b: &[u8], o: usize) -> Result<u32, SuperblockError> {
    let s = b
        .get(o..o.checked_add(4).ok_or(SuperblockError::Truncated)?)
        .ok_or(SuperblockError::Truncated)?;
    Ok(u32::from_le_bytes(
        s.try_into().map_err(|_| SuperblockError::Truncated)?,
    ))
}

/// Parses the 1024-byte superblock (the bytes at offset 1024 of the filesystem).
pub fn superblock(b: &[u8]) -> Result<SuperblockInfo, SuperblockError> {
    use SuperblockError::Field;
    if b.len() < 1024 {
        return Err(SuperblockError::Truncated);
    }
    if u16_at(b, 0x38)? != 0xEF53 {
        return Err(SuperblockError::Magic);
    }
    let log = u32_at(b, 0x18)?;
    if log > 6 {
        return Err(Field("s_log_block_size"));
    }
    let block_bytes = 1024u64.checked_shl(log).ok_or(Field("s_log_block_size"))?;
    let max_per_group = block_bytes
        .checked_mul(8)
        .ok_or(Field("s_log_block_size"))?;
    let bpg = u64::from(u32_at(b, 0x20)?);
    if bpg == 0 || bpg > max_per_group || bpg % 8 != 0 {
        return Err(Field("s_blocks_per_group"));
    }
    let ipg = u64::from(u32_at(b, 0x28)?);
    if ipg == 0 || ipg > max_per_group {
        return Err(Field("s_inodes_per_group"));
    }
    let rev = u32_at(b, 0x4C)?;
    if rev >= 1 {
        let isz = u64::from(u16_at(b, 0x58)?);
        if !isz.is_power_of_two() || isz < 128 || isz > block_bytes {
            return Err(Field("s_inode_size"));
        }
    }
    let features = [u32_at(b, 0x5C)?, u32_at(b, 0x60)?, u32_at(b, 0x64)?];
    let bit64 = features[1] & 0x80 != 0;
    let mut blocks = u64::from(u32_at(b, 0x04)?);
    let desc_size = if bit64 {
        blocks |= u64::from(u32_at(b, 0x150)?) << 32;
        let d = u64::from(u16_at(b, 0xFE)?);
        if !d.is_power_of_two() || !(64..=1024).contains(&d) {
            return Err(Field("s_desc_size"));
        }
        d
    } else {
        32
    };
    let fdb = u64::from(u32_at(b, 0x14)?);
    let span = blocks
        .checked_sub(fdb)
        .filter(|&s| s > 0)
        .ok_or(Field("s_blocks_count"))?;
    let groups = span.div_ceil(bpg);
    let inodes = u64::from(u32_at(b, 0x00)?);
    if groups.checked_mul(ipg) != Some(inodes) {
        return Err(Field("s_inodes_count"));
    }
    let r_blocks = u64::from(u32_at(b, 0x08)?);
    if r_blocks > blocks {
        return Err(Field("s_r_blocks_count"));
    }
    let mut uuid = [0u8; 16];
    uuid.copy_from_slice(b.get(0x68..0x78).ok_or(SuperblockError::Truncated)?);
    let checksum_ok = if features[2] & 0x400 != 0 {
        let body = b.get(..0x3FC).ok_or(SuperblockError::Truncated)?;
        Some(crc32c_raw(0xffff_ffff, body) == u32_at(b, 0x3FC)?)
    } else {
        None
    };
    Ok(SuperblockInfo {
        block_bytes,
        blocks,
        inodes,
        blocks_per_group: bpg,
        inodes_per_group: ipg,
        groups,
        first_data_block: fdb,
        desc_size,
        features,
        raid: (u32::from(u16_at(b, 0x164)?), u32_at(b, 0x170)?),
        uuid,
        checksum_ok,
    })
}

/// One group descriptor's locations.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GroupDesc {
    /// Block bitmap block.
    pub block_bitmap: u64,
    /// Inode bitmap block.
    pub inode_bitmap: u64,
    /// First inode table block.
    pub inode_table: u64,
}

/// Parses the descriptor table `gdt` (the bytes of the blocks after the superblock),
/// rejecting locations outside the filesystem. At most `sb.groups` entries, bounded by
/// the input length.
pub fn group_descriptors(
    sb: &SuperblockInfo,
    gdt: &[u8],
) -> Result<Vec<GroupDesc>, SuperblockError> {
    let ds = usize::try_from(sb.desc_size).map_err(|_| SuperblockError::Field("s_desc_size"))?;
    let n = usize::try_from(sb.groups).map_err(|_| SuperblockError::Field("s_blocks_count"))?;
    if gdt.len().checked_div(ds).is_none_or(|k| k < n) {
        return Err(SuperblockError::Truncated);
    }
    let mut out = Vec::with_capacity(n);
    for d in gdt.chunks_exact(ds).take(n) {
        let lohi = |lo: usize, hi: usize| -> Result<u64, SuperblockError> {
            let l = u64::from(u32_at(d, lo)?);
            let h = if ds >= 64 {
                u64::from(u32_at(d, hi)?)
            } else {
                0
            };
            Ok(l | (h << 32))
        };
        let g = GroupDesc {
            block_bitmap: lohi(0x00, 0x20)?,
            inode_bitmap: lohi(0x04, 0x24)?,
            inode_table: lohi(0x08, 0x28)?,
        };
        for b in [g.block_bitmap, g.inode_bitmap, g.inode_table] {
            if b < sb.first_data_block || b >= sb.blocks {
                return Err(SuperblockError::Field("group descriptor location"));
            }
        }
        out.push(g);
    }
    Ok(out)
}

#[cfg(test)]
#[allow(
    clippy::indexing_slicing,
    clippy::unwrap_used,
    clippy::arithmetic_side_effects,
    clippy::as_conversions
)]
mod tests {
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn random_bytes_never_panic(b in prop::collection::vec(any::<u8>(), 0..1100), magic in any::<bool>(), gdt in prop::collection::vec(any::<u8>(), 0..4096)) {
            let mut b = b;
            if magic && b.len() > 0x3A { b[0x38] = 0x53; b[0x39] = 0xEF; }
            if let Ok(sb) = super::superblock(&b) {
                let _ = super::group_descriptors(&sb, &gdt);
            }
        }

        #[test]
        fn mutated_superblocks_never_panic(pos in 0usize..1024, val in any::<u8>(), pos2 in 0usize..1024, val2 in any::<u8>()) {
            let mut sb = golden();
            sb[pos] = val;
            sb[pos2] = val2;
            if let Ok(info) = super::superblock(&sb) {
                let _ = super::group_descriptors(&info, &[0xffu8; 256]);
            }
        }
    }

    fn golden() -> Vec<u8> {
        use blockwise_geometry::{BlockSource, Ext4Options, SparseImage, Tree};
        let req = crate::Ext4Request {
            partition_start_bytes: 0,
            partition_size_bytes: 64 << 20,
            erase_block_bytes: 4 << 20,
            options: Ext4Options::default(),
            label: None,
            seed: 1,
            timestamp: 0,
        };
        let t = Tree::default();
        let p = crate::plan(&req, Some(&t)).unwrap();
        let mut img = SparseImage::new(64 << 20);
        crate::write(&mut img, &req, &p, &t, &Vec::<Vec<u8>>::new()).unwrap();
        let mut sb = vec![0u8; 1024];
        img.read_at(1024, &mut sb).unwrap();
        sb
    }

    #[test]
    fn golden_superblock_parses() {
        let sb = golden();
        let info = super::superblock(&sb).unwrap();
        assert_eq!(
            (info.block_bytes, info.blocks, info.groups),
            (4096, 16384, 1)
        );
        assert_eq!(info.checksum_ok, Some(true));
        assert_eq!(info.raid, (1024, 1024));
        let mut bad = sb.clone();
        bad[0x58] = 100;
        assert_eq!(
            super::superblock(&bad),
            Err(super::SuperblockError::Field("s_inode_size"))
        );
        let mut bad = sb.clone();
        bad[0x18] = 9;
        assert_eq!(
            super::superblock(&bad),
            Err(super::SuperblockError::Field("s_log_block_size"))
        );
        let mut bad = sb;
        bad[0x10] ^= 1;
        assert_eq!(super::superblock(&bad).unwrap().checksum_ok, Some(false));
    }
}
