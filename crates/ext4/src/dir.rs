//! Directory blocks: linear leaf blocks and htree (dir_index) directories, with the
//! metadata_csum tails.

use crate::csum::{crc32c_raw, dx_hash_half_md4};
use crate::Error;

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

fn rec_len_min(name_len: usize) -> usize {
    (8 + name_len + 3) & !3
}

fn put_entry(b: &mut [u8], off: usize, ino: u32, rec_len: usize, name: &[u8], ftype: u8) {
    b[off..off + 4].copy_from_slice(&ino.to_le_bytes());
    b[off + 4..off + 6].copy_from_slice(&(rec_len as u16).to_le_bytes());
    b[off + 6] = name.len() as u8;
    b[off + 7] = ftype;
    b[off + 8..off + 8 + name.len()].copy_from_slice(name);
}

fn set_rec_len(b: &mut [u8], off: usize, rec_len: usize) {
    b[off + 4..off + 6].copy_from_slice(&(rec_len as u16).to_le_bytes());
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
        let cap = if p.csum.is_some() { p.bs - 12 } else { p.bs };
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
    let bs = b.len();
    let t = bs - 12;
    b[t..t + 4].copy_from_slice(&0u32.to_le_bytes());
    b[t + 4..t + 6].copy_from_slice(&12u16.to_le_bytes());
    b[t + 6] = 0;
    b[t + 7] = 0xDE;
    let c = crc32c_raw(seed, &b[..t]);
    b[t + 8..t + 12].copy_from_slice(&c.to_le_bytes());
}

/// Checksum of a dx (root or node) block: header up to the used entries, then the tail.
fn finish_dx_tail(b: &mut [u8], seed: u32, count_offset: usize, count: usize, limit: usize) {
    let t = count_offset + limit * 8;
    let size = count_offset + count * 8;
    let c = crc32c_raw(seed, &b[..size]);
    let c = crc32c_raw(c, &b[t..t + 4]);
    let c = crc32c_raw(c, &[0u8; 4]);
    b[t + 4..t + 8].copy_from_slice(&c.to_le_bytes());
}

/// Number of blocks the linear layout would take (with "." and "..").
fn linear_fits_one(p: &DirParams, entries: &[Entry<'_>]) -> bool {
    let cap = if p.csum.is_some() { p.bs - 12 } else { p.bs };
    let mut need = 12 + 12;
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
        lp.push(b".", p.ino, 2);
        lp.push(b"..", p.parent, 2);
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
    let csum_sz = if p.csum.is_some() { 8 } else { 0 };
    let root_limit = (bs - 32 - csum_sz) / 8;
    let node_limit = (bs - 8 - csum_sz) / 8;
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
    // Root block.
    {
        let r = &mut data[..bs];
        put_entry(r, 0, p.ino, 12, b".", if p.filetype { 2 } else { 0 });
        put_entry(
            r,
            12,
            p.parent,
            bs - 12,
            b"..",
            if p.filetype { 2 } else { 0 },
        );
        r[24..28].copy_from_slice(&0u32.to_le_bytes());
        r[28] = 1; // half_md4
        r[29] = 8;
        r[30] = levels;
        r[31] = 0;
    }
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
    write_dx(&mut data[..bs], 32, root_limit, &root_entries, p.csum);
    for n in 0..n_nodes {
        let first = n * node_limit;
        let last = (first + node_limit).min(n_leaves);
        let list: Vec<(u32, u32)> = (first..last)
            .map(|k| (leaf_hash[k], (1 + n_nodes + k) as u32))
            .collect();
        let b = &mut data[(1 + n) * bs..(2 + n) * bs];
        put_entry(b, 0, 0, bs, b"", 0);
        write_dx(b, 8, node_limit, &list, p.csum);
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

fn write_dx(
    b: &mut [u8],
    count_offset: usize,
    limit: usize,
    list: &[(u32, u32)],
    csum: Option<u32>,
) {
    let o = count_offset;
    b[o..o + 2].copy_from_slice(&(limit as u16).to_le_bytes());
    b[o + 2..o + 4].copy_from_slice(&(list.len() as u16).to_le_bytes());
    for (k, &(h, blk)) in list.iter().enumerate() {
        let e = o + k * 8;
        if k > 0 {
            b[e..e + 4].copy_from_slice(&h.to_le_bytes());
        }
        b[e + 4..e + 8].copy_from_slice(&blk.to_le_bytes());
    }
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

    #[test]
    fn small_dir_is_linear() {
        let names: Vec<String> = (0..10).map(|i| format!("f{i}")).collect();
        let e: Vec<Entry<'_>> = names
            .iter()
            .map(|n| Entry {
                name: n.as_bytes(),
                ino: 20,
                ftype: 1,
            })
            .collect();
        let d = build(&params(Some(7)), &e).unwrap();
        assert!(!d.indexed);
        assert_eq!(d.data.len(), 4096);
        assert_eq!(d.data[4096 - 5], 0xDE);
    }

    #[test]
    fn big_dir_is_htree() {
        let names: Vec<String> = (0..20_000).map(|i| format!("file-{i:06}")).collect();
        let e: Vec<Entry<'_>> = names
            .iter()
            .map(|n| Entry {
                name: n.as_bytes(),
                ino: 20,
                ftype: 1,
            })
            .collect();
        let d = build(&params(Some(7)), &e).unwrap();
        assert!(d.indexed);
        assert!(d.data.len() / 4096 > 90);
    }
}
