//! The verity superblock (`struct verity_sb` of cryptsetup's `lib/verity/verity.h`), 512
//! bytes at the hash offset.

use core::mem::size_of;

use zerocopy::little_endian::{U16, U32, U64};
use zerocopy::{FromBytes, FromZeros, Immutable, IntoBytes, KnownLayout, Unaligned};

/// `verity\0\0`.
pub const MAGIC: &[u8; 8] = b"verity\0\0";
/// Size of the superblock.
pub const SUPERBLOCK_BYTES: usize = 512;

/// The on-disk superblock, little endian.
#[repr(C)]
#[derive(Clone, Copy, Debug, FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned)]
pub struct SuperblockRaw {
    /// 0x00: [`MAGIC`].
    pub signature: [u8; 8],
    /// 0x08: superblock version, 1.
    pub version: U32,
    /// 0x0C: hash type: 0 = Chrome OS (salt appended), 1 = normal (salt prepended).
    pub hash_type: U32,
    /// 0x10: UUID.
    pub uuid: [u8; 16],
    /// 0x20: hash algorithm name, NUL-padded (`sha256`).
    pub algorithm: [u8; 32],
    /// 0x40: bytes per data block.
    pub data_block_size: U32,
    /// 0x44: bytes per hash block.
    pub hash_block_size: U32,
    /// 0x48: data blocks covered.
    pub data_blocks: U64,
    /// 0x50: salt length (at most 256).
    pub salt_size: U16,
    /// 0x52: padding.
    pub pad1: [u8; 6],
    /// 0x58: salt.
    pub salt: [u8; 256],
    /// 0x158: padding to 512 bytes.
    pub pad2: [u8; 168],
}

const _: () = assert!(size_of::<SuperblockRaw>() == SUPERBLOCK_BYTES);

/// A superblock that does not parse.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Corrupt {
    /// Fewer than 512 bytes.
    #[error("the verity superblock is cut short ({0} of 512 bytes)")]
    Truncated(usize),
    /// No `verity\0\0` signature.
    #[error("no verity signature")]
    Magic,
    /// A version other than 1.
    #[error("superblock version {0} (only 1 exists)")]
    Version(u32),
    /// A hash type other than 0 or 1.
    #[error("hash type {0} (0 = Chrome OS, 1 = normal)")]
    HashType(u32),
    /// A block size that is not a power of two from 512 bytes to 512 KiB.
    #[error("{what} block size {bytes} is not a power of two from 512 B to 512 KiB")]
    BlockSize {
        /// `data` or `hash`.
        what: &'static str,
        /// The value.
        bytes: u32,
    },
    /// More than 256 bytes of salt.
    #[error("salt of {0} bytes (at most 256)")]
    SaltSize(u16),
    /// An algorithm name that is empty or not printable ASCII.
    #[error("the hash algorithm name is not readable")]
    Algorithm,
    /// No data blocks.
    #[error("it covers 0 data blocks")]
    NoData,
}

/// A parsed superblock.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Superblock {
    /// Hash type (1 = normal, salt first).
    pub hash_type: u32,
    /// UUID bytes.
    pub uuid: [u8; 16],
    /// Algorithm name (`sha256`).
    pub algorithm: String,
    /// Bytes per data block.
    pub data_block_bytes: u32,
    /// Bytes per hash block.
    pub hash_block_bytes: u32,
    /// Data blocks covered.
    pub data_blocks: u64,
    /// The salt.
    pub salt: Vec<u8>,
}

fn block_size_ok(v: u32) -> bool {
    v.is_power_of_two() && (512..=512 * 1024).contains(&v)
}

impl Superblock {
    /// Parses the first 512 bytes of `bytes`.
    pub fn parse(bytes: &[u8]) -> Result<Superblock, Corrupt> {
        let (raw, _) =
            SuperblockRaw::read_from_prefix(bytes).map_err(|_| Corrupt::Truncated(bytes.len()))?;
        if &raw.signature != MAGIC {
            return Err(Corrupt::Magic);
        }
        let version = raw.version.get();
        if version != 1 {
            return Err(Corrupt::Version(version));
        }
        let hash_type = raw.hash_type.get();
        if hash_type > 1 {
            return Err(Corrupt::HashType(hash_type));
        }
        let (d, h) = (raw.data_block_size.get(), raw.hash_block_size.get());
        if !block_size_ok(d) {
            return Err(Corrupt::BlockSize {
                what: "data",
                bytes: d,
            });
        }
        if !block_size_ok(h) {
            return Err(Corrupt::BlockSize {
                what: "hash",
                bytes: h,
            });
        }
        let salt_size = raw.salt_size.get();
        let salt = raw
            .salt
            .get(..usize::from(salt_size))
            .ok_or(Corrupt::SaltSize(salt_size))?
            .to_vec();
        let name_len = raw
            .algorithm
            .iter()
            .position(|&b| b == 0)
            .unwrap_or(raw.algorithm.len());
        let name = raw.algorithm.get(..name_len).unwrap_or_default();
        if name.is_empty() || !name.iter().all(|b| b.is_ascii_graphic()) {
            return Err(Corrupt::Algorithm);
        }
        let data_blocks = raw.data_blocks.get();
        if data_blocks == 0 {
            return Err(Corrupt::NoData);
        }
        Ok(Superblock {
            hash_type,
            uuid: raw.uuid,
            algorithm: String::from_utf8_lossy(name).into_owned(),
            data_block_bytes: d,
            hash_block_bytes: h,
            data_blocks,
            salt,
        })
    }

    /// The on-disk bytes. The salt is cut to 256 bytes and the algorithm name to 31.
    #[must_use]
    pub fn to_bytes(&self) -> [u8; SUPERBLOCK_BYTES] {
        let mut raw = SuperblockRaw::new_zeroed();
        raw.signature = *MAGIC;
        raw.version = 1.into();
        raw.hash_type = self.hash_type.into();
        raw.uuid = self.uuid;
        for (d, s) in raw
            .algorithm
            .iter_mut()
            .take(31)
            .zip(self.algorithm.bytes())
        {
            *d = s;
        }
        raw.data_block_size = self.data_block_bytes.into();
        raw.hash_block_size = self.hash_block_bytes.into();
        raw.data_blocks = self.data_blocks.into();
        let n = self.salt.len().min(256);
        raw.salt_size = u16::try_from(n).unwrap_or(256).into();
        for (d, s) in raw.salt.iter_mut().zip(&self.salt) {
            *d = *s;
        }
        let mut out = [0u8; SUPERBLOCK_BYTES];
        out.copy_from_slice(raw.as_bytes());
        out
    }
}

#[cfg(test)]
#[expect(clippy::indexing_slicing, clippy::unwrap_used, reason = "tests")]
mod tests {
    use super::*;

    fn golden() -> Superblock {
        Superblock {
            hash_type: 1,
            uuid: [9; 16],
            algorithm: "sha256".into(),
            data_block_bytes: 4096,
            hash_block_bytes: 4096,
            data_blocks: 1024,
            salt: vec![1, 2, 3],
        }
    }

    #[test]
    fn round_trips_and_rejects_each_bad_field() {
        let sb = golden();
        let b = sb.to_bytes();
        assert_eq!(Superblock::parse(&b).unwrap(), sb);
        assert_eq!(Superblock::parse(&b[..100]), Err(Corrupt::Truncated(100)));
        let check = |at: usize, v: &[u8], want: Corrupt| {
            let mut x = b;
            x[at..at + v.len()].copy_from_slice(v);
            assert_eq!(Superblock::parse(&x), Err(want));
        };
        check(0, b"x", Corrupt::Magic);
        check(8, &2u32.to_le_bytes(), Corrupt::Version(2));
        check(12, &7u32.to_le_bytes(), Corrupt::HashType(7));
        check(
            0x40,
            &3000u32.to_le_bytes(),
            Corrupt::BlockSize {
                what: "data",
                bytes: 3000,
            },
        );
        check(
            0x44,
            &256u32.to_le_bytes(),
            Corrupt::BlockSize {
                what: "hash",
                bytes: 256,
            },
        );
        check(0x48, &0u64.to_le_bytes(), Corrupt::NoData);
        check(0x50, &300u16.to_le_bytes(), Corrupt::SaltSize(300));
        check(0x20, &[0], Corrupt::Algorithm);
        check(0x20, &[0xff], Corrupt::Algorithm);
    }
}
