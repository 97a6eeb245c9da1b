//! Extended attributes: in-inode storage (after `i_extra_isize`) or one xattr block.

use core::mem::size_of;

use zerocopy::little_endian::{U16, U32};
use zerocopy::FromZeros;

use crate::csum::crc32c_raw;
use crate::raw::{
    put_struct, XattrEntryRaw, XattrHeaderRaw, XattrIbodyHeaderRaw, XATTR_INDEX_SECURITY,
    XATTR_INDEX_SYSTEM, XATTR_INDEX_TRUSTED, XATTR_INDEX_USER, XATTR_MAGIC,
};
use crate::Error;

/// The zero word ending an entry list.
const END: usize = size_of::<u32>();

/// One attribute split into ext4's name index and suffix.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Attr {
    pub index: u8,
    pub name: Vec<u8>,
    pub value: Vec<u8>,
}

/// Splits `security.capability` into `(6, "capability")`.
pub(crate) fn split(full: &str, value: &[u8]) -> Result<Attr, Error> {
    let table: [(&str, u8); 4] = [
        ("user.", XATTR_INDEX_USER),
        ("trusted.", XATTR_INDEX_TRUSTED),
        ("security.", XATTR_INDEX_SECURITY),
        ("system.", XATTR_INDEX_SYSTEM),
    ];
    if full.starts_with("system.posix_acl") {
        return Err(Error::UnsupportedXattr {
            name: full.to_string(),
        });
    }
    for (prefix, index) in table {
        if let Some(rest) = full.strip_prefix(prefix) {
            if rest.is_empty() || rest.len() > 255 {
                break;
            }
            return Ok(Attr {
                index,
                name: rest.as_bytes().to_vec(),
                value: value.to_vec(),
            });
        }
    }
    Err(Error::UnsupportedXattr {
        name: full.to_string(),
    })
}

fn entry_len(a: &Attr) -> usize {
    (size_of::<XattrEntryRaw>() + a.name.len() + 3) & !3
}
fn value_len(a: &Attr) -> usize {
    (a.value.len() + 3) & !3
}

/// `ext4_xattr_hash_entry`.
fn entry_hash(a: &Attr) -> u32 {
    let mut h: u32 = 0;
    for &c in &a.name {
        h = (h << 5) ^ (h >> 27) ^ u32::from(c);
    }
    let mut padded = a.value.clone();
    padded.resize(value_len(a), 0);
    for w in padded.chunks_exact(4) {
        h = (h << 16) ^ (h >> 16) ^ u32::from_le_bytes([w[0], w[1], w[2], w[3]]);
    }
    h
}

/// Bytes needed in-inode (magic + entries + terminator + values).
pub(crate) fn inode_bytes(attrs: &[Attr]) -> usize {
    size_of::<XattrIbodyHeaderRaw>() + entries_and_values(attrs) + END
}

/// Bytes needed in a block (header + entries + terminator + values).
pub(crate) fn block_bytes(attrs: &[Attr]) -> usize {
    size_of::<XattrHeaderRaw>() + entries_and_values(attrs) + END
}

fn entries_and_values(attrs: &[Attr]) -> usize {
    attrs.iter().map(|a| entry_len(a) + value_len(a)).sum()
}

/// Sort order of block entries (the kernel's: index, name length, name).
pub(crate) fn sort(attrs: &mut [Attr]) {
    attrs.sort_by(|a, b| (a.index, a.name.len(), &a.name).cmp(&(b.index, b.name.len(), &b.name)));
}

/// Writes entries at `entries_off` of `area` and values from its end down; value offsets are
/// relative to `base`. Returns the entry hashes.
fn place(area: &mut [u8], entries_off: usize, base: usize, attrs: &[Attr]) -> Vec<u32> {
    let mut e = entries_off;
    let mut v = area.len();
    let mut hashes = Vec::new();
    for a in attrs {
        v -= value_len(a);
        area[v..v + a.value.len()].copy_from_slice(&a.value);
        let h = entry_hash(a);
        hashes.push(h);
        let raw = XattrEntryRaw {
            e_name_len: a.name.len() as u8,
            e_name_index: a.index,
            e_value_offs: U16::new((v - base) as u16),
            e_value_inum: U32::ZERO,
            e_value_size: U32::new(a.value.len() as u32),
            e_hash: U32::new(h),
        };
        put_struct(area, e, &raw);
        let name = e + size_of::<XattrEntryRaw>();
        area[name..name + a.name.len()].copy_from_slice(&a.name);
        e += entry_len(a);
    }
    hashes
}

/// Fills the in-inode area (everything after `128 + i_extra_isize`).
pub(crate) fn write_in_inode(area: &mut [u8], attrs: &[Attr]) {
    area.fill(0);
    let header = XattrIbodyHeaderRaw {
        h_magic: U32::new(XATTR_MAGIC),
    };
    put_struct(area, 0, &header);
    let body = &mut area[size_of::<XattrIbodyHeaderRaw>()..];
    place(body, 0, 0, attrs);
}

/// Builds an xattr block at `block_nr`; `csum_seed` when metadata_csum.
pub(crate) fn build_block(
    bs: usize,
    attrs: &[Attr],
    block_nr: u64,
    csum_seed: Option<u32>,
) -> Vec<u8> {
    let mut b = vec![0u8; bs];
    let hashes = place(&mut b, size_of::<XattrHeaderRaw>(), 0, attrs);
    let mut h: u32 = 0;
    for eh in hashes {
        h = (h << 16) ^ (h >> 16) ^ eh;
    }
    let mut header = XattrHeaderRaw::new_zeroed();
    header.h_magic.set(XATTR_MAGIC);
    header.h_refcount.set(1);
    header.h_blocks.set(1);
    header.h_hash.set(h);
    put_struct(&mut b, 0, &header);
    if let Some(seed) = csum_seed {
        let c = crc32c_raw(crc32c_raw(seed, &block_nr.to_le_bytes()), &b);
        header.h_checksum.set(c);
        put_struct(&mut b, 0, &header);
    }
    b
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn split_names() {
        let a = split("security.capability", b"x").unwrap();
        assert_eq!((a.index, a.name.as_slice()), (6, &b"capability"[..]));
        assert!(split("bogus.x", b"").is_err());
        assert!(split("system.posix_acl_access", b"").is_err());
        assert_eq!(inode_bytes(&[a]), 4 + 28 + 4 + 4);
    }
}
