//! Extended attributes: in-inode storage (after `i_extra_isize`) or one xattr block.

use core::mem::size_of;

use zerocopy::little_endian::{U16, U32};
use zerocopy::FromZeros;

use crate::csum::crc32c_raw;
use crate::raw::{
    put_struct, XattrEntryRaw, XattrHeaderRaw, XattrIbodyHeaderRaw, XATTR_INDEX_POSIX_ACL_ACCESS,
    XATTR_INDEX_POSIX_ACL_DEFAULT, XATTR_INDEX_SECURITY, XATTR_INDEX_SYSTEM, XATTR_INDEX_TRUSTED,
    XATTR_INDEX_USER, XATTR_MAGIC,
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

/// `POSIX_ACL_XATTR_VERSION`: the header of an ACL as the kernel's xattr calls pass it.
const ACL_XATTR_VERSION: u32 = 2;
/// `EXT4_ACL_VERSION`: the header of an ACL as ext4 stores it.
const EXT4_ACL_VERSION: u32 = 1;

/// Converts a POSIX ACL from the xattr-call format (`u32` version 2, then 8-byte entries
/// `tag u16, perm u16, id u32`) to ext4's on-disk format (`u32` version 1, then 4-byte
/// entries for `USER_OBJ`, `GROUP_OBJ`, `MASK` and `OTHER`, 8-byte ones with the id for
/// `USER` and `GROUP`), as the kernel and e2fsprogs do. `None` when malformed.
pub(crate) fn acl_to_disk(value: &[u8]) -> Option<Vec<u8>> {
    let (head, body) = value.split_at_checked(4)?;
    if u32::from_le_bytes(head.try_into().ok()?) != ACL_XATTR_VERSION || body.len() % 8 != 0 {
        return None;
    }
    let mut out = EXT4_ACL_VERSION.to_le_bytes().to_vec();
    for e in body.chunks_exact(8) {
        let tag = u16::from_le_bytes([e[0], e[1]]);
        match tag {
            // USER_OBJ, GROUP_OBJ, MASK, OTHER: no id.
            0x01 | 0x04 | 0x10 | 0x20 => out.extend_from_slice(&e[..4]),
            // USER, GROUP: with the id.
            0x02 | 0x08 => out.extend_from_slice(e),
            _ => return None,
        }
    }
    Some(out)
}

/// Splits `security.capability` into `(6, "capability")`. POSIX ACLs
/// (`system.posix_acl_access`, `system.posix_acl_default`) take their own name index and
/// are converted to ext4's on-disk ACL format.
pub(crate) fn split(full: &str, value: &[u8]) -> Result<Attr, Error> {
    let unsupported = || Error::UnsupportedXattr {
        name: full.to_string(),
    };
    let acl = match full {
        "system.posix_acl_access" => Some(XATTR_INDEX_POSIX_ACL_ACCESS),
        "system.posix_acl_default" => Some(XATTR_INDEX_POSIX_ACL_DEFAULT),
        _ => None,
    };
    if let Some(index) = acl {
        return Ok(Attr {
            index,
            name: Vec::new(),
            value: acl_to_disk(value).ok_or_else(|| Error::BadAcl {
                name: full.to_string(),
            })?,
        });
    }
    let table: [(&str, u8); 4] = [
        ("user.", XATTR_INDEX_USER),
        ("trusted.", XATTR_INDEX_TRUSTED),
        ("security.", XATTR_INDEX_SECURITY),
        ("system.", XATTR_INDEX_SYSTEM),
    ];
    for (prefix, index) in table {
        if let Some(rest) = full.strip_prefix(prefix) {
            if rest.is_empty() || rest.len() > 255 || rest.starts_with("posix_acl") {
                break;
            }
            return Ok(Attr {
                index,
                name: rest.as_bytes().to_vec(),
                value: value.to_vec(),
            });
        }
    }
    Err(unsupported())
}

/// Splits a node's attributes between the inode (`room` bytes after the fixed fields; 0
/// for 128-byte inodes) and one block of `bs` bytes: each attribute, in the kernel's order,
/// goes into the inode when it still fits there, else into the block. `None` when the block
/// overflows.
pub(crate) fn place_attrs(
    mut attrs: Vec<Attr>,
    room: usize,
    bs: usize,
) -> Option<(Vec<Attr>, Vec<Attr>)> {
    sort(&mut attrs);
    let mut inode: Vec<Attr> = Vec::new();
    let mut block: Vec<Attr> = Vec::new();
    let mut used = size_of::<XattrIbodyHeaderRaw>() + END;
    for a in attrs {
        let need = entry_len(&a) + value_len(&a);
        if used + need <= room {
            used += need;
            inode.push(a);
        } else {
            block.push(a);
        }
    }
    if !block.is_empty() && block_bytes(&block) > bs {
        return None;
    }
    Some((inode, block))
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
#[cfg(test)]
fn inode_bytes(attrs: &[Attr]) -> usize {
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
        assert!(split("system.posix_acl_other", b"").is_err());
        assert_eq!(inode_bytes(&[a]), 4 + 28 + 4 + 4);
    }

    #[test]
    fn acls_convert_to_the_disk_format() {
        // user::rw-, user:1000:r--, group::r--, mask::r--, other::---
        let mut v = 2u32.to_le_bytes().to_vec();
        for (tag, perm, id) in [
            (1u16, 6u16, u32::MAX),
            (2, 4, 1000),
            (4, 4, u32::MAX),
            (0x10, 4, u32::MAX),
            (0x20, 0, u32::MAX),
        ] {
            v.extend_from_slice(&tag.to_le_bytes());
            v.extend_from_slice(&perm.to_le_bytes());
            v.extend_from_slice(&id.to_le_bytes());
        }
        let a = split("system.posix_acl_access", &v).unwrap();
        assert_eq!((a.index, a.name.len()), (2, 0));
        assert_eq!(a.value.len(), 4 + 4 + 8 + 4 + 4 + 4);
        assert_eq!(&a.value[..4], &1u32.to_le_bytes());
        assert_eq!(&a.value[8..16], &[2, 0, 4, 0, 0xe8, 3, 0, 0]);
        assert!(split("system.posix_acl_default", &v[..7]).is_err());
    }

    #[test]
    fn attributes_spill_into_one_block() {
        let big = |n: &str, len| split(n, &vec![1u8; len]).unwrap();
        // 256-byte inodes leave 96 bytes after the 160 fixed ones.
        let (i, b) = place_attrs(vec![big("user.a", 8), big("user.b", 300)], 96, 4096).unwrap();
        assert_eq!((i.len(), b.len()), (1, 1));
        assert!(place_attrs(vec![big("user.a", 5000)], 96, 4096).is_none());
    }
}
