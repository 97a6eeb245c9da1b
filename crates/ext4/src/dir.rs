//! Directory blocks: linear leaf blocks and htree (dir_index) directories, with the
//! metadata_csum tails.

use core::mem::size_of;

use zerocopy::little_endian::{U16, U32};
use zerocopy::{FromBytes, IntoBytes};

use crate::csum::{crc32c_raw, dx_hash_half_md4};
use crate::raw::{
    put_struct, DirEntryRaw, DirEntryTailRaw, DxCountLimitRaw, DxEntryRaw, DxNodeRaw,
    DxRootInfoRaw, DxRootRaw, DxTailRaw, DX_HASH_HALF_MD4, FT_DIR, FT_DIR_CSUM,
};
use crate::Error;

/// The checksum tail at the end of a leaf block (metadata_csum).
const LEAF_TAIL: usize = size_of::<DirEntryTailRaw>();
/// An htree index entry.
const DX_ENTRY: usize = size_of::<DxEntryRaw>();

/// One name in a directory.
#[derive(Clone, Debug)]
pub(crate) struct Entry<'a> {
    pub name: &'a [u8],
    pub ino: u32,
    pub ftype: u8,
}

/// How to build the blocks of one directory.
pub(crate) struct DirParams {
    pub bs: usize,
    pub ino: u32,
    pub parent: u32,
    /// Per-inode checksum seed when metadata_csum is on.
    pub csum: Option<u32>,
    pub dir_index: bool,
    pub filetype: bool,
    pub hash_seed: [u32; 4],
    /// At least this many blocks (lost+found).
    pub min_blocks: usize,
}

/// The blocks of one directory, and whether it is an htree.
pub(crate) struct DirBlocks {
    pub data: Vec<u8>,
    pub indexed: bool,
}

/// The smallest record for a name: header, name, padding to 4 bytes.
fn rec_len_min(name_len: usize) -> usize {
    (size_of::<DirEntryRaw>() + name_len + 3) & !3
}

/// A directory entry header.
fn entry(ino: u32, rec_len: usize, name_len: usize, ftype: u8) -> DirEntryRaw {
    DirEntryRaw {
        inode: U32::new(ino),
        rec_len: U16::new(rec_len as u16),
        name_len: name_len as u8,
        file_type: ftype,
    }
}

fn put_entry(b: &mut [u8], off: usize, ino: u32, rec_len: usize, name: &[u8], ftype: u8) {
    put_struct(b, off, &entry(ino, rec_len, name.len(), ftype));
    let at = off + size_of::<DirEntryRaw>();
    b[at..at + name.len()].copy_from_slice(name);
}

fn set_rec_len(b: &mut [u8], off: usize, rec_len: usize) {
    if let Ok((e, _)) = DirEntryRaw::mut_from_prefix(&mut b[off..]) {
        e.rec_len.set(rec_len as u16);
    }
}

/// Packs entries into leaf blocks (each `bs` long, tail added when csum).
struct LeafPacker<'p> {
    p: &'p DirParams,
    cap: usize,
    blocks: Vec<Vec<u8>>,
    cur: Vec<u8>,
    off: usize,
    last: Option<usize>,
}

impl<'p> LeafPacker<'p> {
    fn new(p: &'p DirParams) -> Self {
        let cap = if p.csum.is_some() {
            p.bs - LEAF_TAIL
        } else {
            p.bs
        };
        LeafPacker {
            p,
            cap,
            blocks: Vec::new(),
            cur: vec![0; p.bs],
            off: 0,
            last: None,
        }
    }
    fn fits(&self, name_len: usize) -> bool {
        self.off + rec_len_min(name_len) <= self.cap
    }
    fn push(&mut self, name: &[u8], ino: u32, ftype: u8) {
        if !self.fits(name.len()) {
            self.close();
        }
        let rl = rec_len_min(name.len());
        let ft = if self.p.filetype { ftype } else { 0 };
        put_entry(&mut self.cur, self.off, ino, rl, name, ft);
        self.last = Some(self.off);
        self.off += rl;
    }
    fn close(&mut self) {
        let mut b = core::mem::replace(&mut self.cur, vec![0; self.p.bs]);
        match self.last {
            Some(l) => set_rec_len(&mut b, l, self.cap - l),
            None => put_entry(&mut b, 0, 0, self.cap, b"", 0),
        }
        if let Some(seed) = self.p.csum {
            finish_leaf_tail(&mut b, seed);
        }
        self.blocks.push(b);
        self.off = 0;
        self.last = None;
    }
    fn is_empty_block(&self) -> bool {
        self.last.is_none()
    }
}

fn finish_leaf_tail(b: &mut [u8], seed: u32) {
    let t = b.len() - LEAF_TAIL;
    let tail = DirEntryTailRaw {
        det_reserved_zero1: U32::ZERO,
        det_rec_len: U16::new(LEAF_TAIL as u16),
        det_reserved_zero2: 0,
        det_reserved_ft: FT_DIR_CSUM,
        det_checksum: U32::new(crc32c_raw(seed, &b[..t])),
    };
    put_struct(b, t, &tail);
}

/// Checksum of a dx (root or node) block: header up to the used entries, then the tail
/// (after the last entry slot) with its checksum zero.
fn finish_dx_tail(b: &mut [u8], seed: u32, count_offset: usize, count: usize, limit: usize) {
    let t = count_offset + limit * DX_ENTRY;
    let size = count_offset + count * DX_ENTRY;
    let mut tail = DxTailRaw {
        dt_reserved: U32::ZERO,
        dt_checksum: U32::ZERO,
    };
    let c = crc32c_raw(crc32c_raw(seed, &b[..size]), tail.as_bytes());
    tail.dt_checksum.set(c);
    put_struct(b, t, &tail);
}

/// Number of blocks the linear layout would take (with "." and "..").
fn linear_fits_one(p: &DirParams, entries: &[Entry<'_>]) -> bool {
    let cap = if p.csum.is_some() {
        p.bs - LEAF_TAIL
    } else {
        p.bs
    };
    let mut need = rec_len_min(1) + rec_len_min(2);
    for e in entries {
        need += rec_len_min(e.name.len());
        if need > cap {
            return false;
        }
    }
    true
}

/// Builds the directory's blocks. `entries` excludes "." and "..".
pub(crate) fn build(p: &DirParams, entries: &[Entry<'_>]) -> Result<DirBlocks, Error> {
    if !p.dir_index || linear_fits_one(p, entries) {
        let mut lp = LeafPacker::new(p);
        lp.push(b".", p.ino, FT_DIR);
        lp.push(b"..", p.parent, FT_DIR);
        for e in entries {
            lp.push(e.name, e.ino, e.ftype);
        }
        lp.close();
        while lp.blocks.len() < p.min_blocks {
            lp.close();
        }
        let n = lp.blocks.len();
        let mut data = Vec::with_capacity(n * p.bs);
        for b in lp.blocks {
            data.extend_from_slice(&b);
        }
        return Ok(DirBlocks {
            data,
            indexed: false,
        });
    }
    build_htree(p, entries)
}

fn build_htree(p: &DirParams, entries: &[Entry<'_>]) -> Result<DirBlocks, Error> {
    let bs = p.bs;
    let csum_sz = if p.csum.is_some() {
        size_of::<DxTailRaw>()
    } else {
        0
    };
    let root_limit = (bs - size_of::<DxRootRaw>() - csum_sz) / DX_ENTRY;
    let node_limit = (bs - size_of::<DxNodeRaw>() - csum_sz) / DX_ENTRY;
    let mut hashed: Vec<(u32, u32, usize)> = entries
        .iter()
        .enumerate()
        .map(|(i, e)| {
            let (h, m) = dx_hash_half_md4(e.name, p.hash_seed);
            (h, m, i)
        })
        .collect();
    hashed.sort_unstable();
    // Leaves, with the index hash of each (first hash, | 1 when continuing a collision).
    let mut lp = LeafPacker::new(p);
    let mut leaf_hash: Vec<u32> = vec![0];
    let mut prev_hash: Option<u32> = None;
    for &(h, _, i) in &hashed {
        let e = &entries[i];
        if !lp.fits(e.name.len()) && !lp.is_empty_block() {
            lp.close();
            let cont = prev_hash == Some(h);
            leaf_hash.push(if cont { h | 1 } else { h });
        }
        lp.push(e.name, e.ino, e.ftype);
        prev_hash = Some(h);
    }
    lp.close();
    let leaves = lp.blocks;
    let n_leaves = leaves.len();
    let (levels, n_nodes) = if n_leaves <= root_limit {
        (0u8, 0usize)
    } else {
        let nodes = n_leaves.div_ceil(node_limit);
        if nodes > root_limit {
            return Err(Error::DirectoryTooLarge {
                entries: entries.len() as u64,
            });
        }
        (1, nodes)
    };
    let total = 1 + n_nodes + n_leaves;
    let mut data = vec![0u8; total * bs];
    // Root block: ".", ".." over the rest of the block, the root info.
    let ft = if p.filetype { FT_DIR } else { 0 };
    let root = DxRootRaw {
        dot: entry(p.ino, rec_len_min(1), 1, ft),
        dot_name: *b".\0\0\0",
        dotdot: entry(p.parent, bs - rec_len_min(1), 2, ft),
        dotdot_name: *b"..\0\0",
        info: DxRootInfoRaw {
            reserved_zero: U32::ZERO,
            hash_version: DX_HASH_HALF_MD4,
            info_length: size_of::<DxRootInfoRaw>() as u8,
            indirect_levels: levels,
            unused_flags: 0,
        },
    };
    put_struct(&mut data[..bs], 0, &root);
    // (hash, logical block) lists for the root.
    let root_entries: Vec<(u32, u32)> = if levels == 0 {
        leaf_hash
            .iter()
            .enumerate()
            .map(|(k, &h)| (h, (1 + k) as u32))
            .collect()
    } else {
        (0..n_nodes)
            .map(|n| (leaf_hash[n * node_limit], (1 + n) as u32))
            .collect()
    };
    write_dx(
        &mut data[..bs],
        size_of::<DxRootRaw>(),
        root_limit,
        &root_entries,
        p.csum,
    );
    for n in 0..n_nodes {
        let first = n * node_limit;
        let last = (first + node_limit).min(n_leaves);
        let list: Vec<(u32, u32)> = (first..last)
            .map(|k| (leaf_hash[k], (1 + n_nodes + k) as u32))
            .collect();
        let b = &mut data[(1 + n) * bs..(2 + n) * bs];
        let node = DxNodeRaw {
            fake: entry(0, bs, 0, 0),
        };
        put_struct(b, 0, &node);
        write_dx(b, size_of::<DxNodeRaw>(), node_limit, &list, p.csum);
    }
    for (k, leaf) in leaves.iter().enumerate() {
        let at = (1 + n_nodes + k) * bs;
        data[at..at + bs].copy_from_slice(leaf);
    }
    Ok(DirBlocks {
        data,
        indexed: true,
    })
}

/// Writes the count/limit and the index entries at `count_offset` of a dx block. The
/// first entry has no hash: the count/limit takes its place.
fn write_dx(
    b: &mut [u8],
    count_offset: usize,
    limit: usize,
    list: &[(u32, u32)],
    csum: Option<u32>,
) {
    let o = count_offset;
    for (k, &(h, blk)) in list.iter().enumerate() {
        let e = DxEntryRaw {
            hash: U32::new(h),
            block: U32::new(blk),
        };
        put_struct(b, o + k * DX_ENTRY, &e);
    }
    let cl = DxCountLimitRaw {
        limit: U16::new(limit as u16),
        count: U16::new(list.len() as u16),
    };
    put_struct(b, o, &cl);
    if let Some(seed) = csum {
        finish_dx_tail(b, seed, count_offset, list.len(), limit);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params(csum: Option<u32>) -> DirParams {
        DirParams {
            bs: 4096,
            ino: 12,
            parent: 2,
            csum,
            dir_index: true,
            filetype: true,
            hash_seed: [1, 2, 3, 4],
            min_blocks: 1,
        }
    }

    /// Regular-file entries named `names`, all inode 20.
    fn files(names: &[String]) -> Vec<Entry<'_>> {
        names
            .iter()
            .map(|n| Entry {
                name: n.as_bytes(),
                ino: 20,
                ftype: 1,
            })
            .collect()
    }

    #[test]
    fn small_dir_is_linear() {
        let names: Vec<String> = (0..10).map(|i| format!("f{i}")).collect();
        let e = files(&names);
        let d = build(&params(Some(7)), &e).unwrap();
        assert!(!d.indexed);
        assert_eq!(d.data.len(), 4096);
        assert_eq!(d.data[4096 - 5], 0xDE);
    }

    #[test]
    fn big_dir_is_htree() {
        let names: Vec<String> = (0..20_000).map(|i| format!("file-{i:06}")).collect();
        let e = files(&names);
        let d = build(&params(Some(7)), &e).unwrap();
        assert!(d.indexed);
        assert!(d.data.len() / 4096 > 90);
    }
}
