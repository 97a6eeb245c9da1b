//! `[[partition.entry]]` for F2FS: modes and owners of paths that `sload.f2fs` copied from
//! `contents`, set afterwards in the inodes of the temporary filesystem.
//!
//! sload.f2fs takes modes from the source files and owners only from them (`-P`; its
//! `-C fs_config` works only in Android builds), and f2fs-tools has no debugfs-like editor
//! before 1.17. So, as debugfs does for the mke2fs backend, this module edits the result:
//! it finds the valid checkpoint pack (higher version, CRC checked), looks node ids up in the
//! NAT (the copy the checkpoint's NAT bitmap names), walks the directories from the root
//! inode (their dentry blocks, slot bitmap and names), and rewrites `i_mode` (permission bits
//! only; the file type stays), `i_uid` and `i_gid` of the inode block, after checking that
//! the block's node footer names that inode. Creating files is not possible this way and is
//! refused naming the entry; so is a volume this reader does not know (inline or very large
//! directories, the inode checksum feature, large NAT bitmaps). Every read is bounded and
//! checked: a surprise is an error, never a silently skipped entry.

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::Path;

use blockwise_geometry::fsplan::f2fs::{F2FS_BLOCK, F2FS_SUPER_OFFSET};
use blockwise_image::{EntryKind, EntrySpec};
use blockwise_verify::f2fs::{crc32, MAGIC};

const BLOCK: usize = 4096;
/// NAT entries per block (4096 / 9).
const NAT_PER_BLOCK: u32 = 455;
/// `CP_LARGE_NAT_BITMAP_FLAG`.
const CP_LARGE_NAT_BITMAP: u32 = 0x400;
/// `F2FS_FEATURE_INODE_CHKSUM`: inodes carry a checksum this editor would have to redo.
const FEATURE_INODE_CHKSUM: u32 = 0x20;
/// `i_inline` flags.
const INLINE_XATTR: u8 = 0x01;
const INLINE_DENTRY: u8 = 0x04;
const EXTRA_ATTR: u8 = 0x20;
/// Offset of `i_addr` in the inode, and the default count of addresses.
const I_ADDR: usize = 360;
const ADDRS_PER_INODE: usize = 923;
/// Inline xattr space in addresses (`DEFAULT_INLINE_XATTR_ADDRS`).
const INLINE_XATTR_ADDRS: usize = 50;
/// The node footer's offset in a node block.
const FOOTER: usize = BLOCK - 24;
/// Dentry block layout: bitmap (27 bytes), reserved (3), 214 entries of 11 bytes, names.
const DENTRIES: usize = 214;
const DENTRY_AT: usize = 30;
const NAMES_AT: usize = DENTRY_AT + DENTRIES * 11;
/// Deepest path walked.
const MAX_DEPTH: usize = 4096;

fn le16(b: &[u8], o: usize) -> u16 {
    b.get(o..o + 2)
        .map_or(0, |s| u16::from_le_bytes([s[0], s[1]]))
}

fn le32(b: &[u8], o: usize) -> u32 {
    b.get(o..o + 4)
        .map_or(0, |s| u32::from_le_bytes([s[0], s[1], s[2], s[3]]))
}

fn le64(b: &[u8], o: usize) -> u64 {
    b.get(o..o + 8).map_or(0, |s| {
        let mut a = [0u8; 8];
        a.copy_from_slice(s);
        u64::from_le_bytes(a)
    })
}

/// The F2FS volume in a file, opened for these edits.
struct Volume<'a> {
    f: &'a File,
    blocks: u64,
    nat_blkaddr: u64,
    nat_bitmap: Vec<u8>,
    root_ino: u32,
}

impl<'a> Volume<'a> {
    fn block(&self, addr: u64) -> Result<Vec<u8>, String> {
        if addr >= self.blocks {
            return Err(format!(
                "block {addr} lies past the volume ({} blocks)",
                self.blocks
            ));
        }
        let mut b = vec![0u8; BLOCK];
        self.f
            .read_exact_at(&mut b, addr * F2FS_BLOCK)
            .map_err(|e| format!("reading block {addr}: {e}"))?;
        Ok(b)
    }

    fn open(f: &'a File) -> Result<Self, String> {
        let mut b0 = vec![0u8; BLOCK];
        f.read_exact_at(&mut b0, 0)
            .map_err(|e| format!("reading the superblock: {e}"))?;
        // Superblock fields (struct f2fs_super_block offsets, as in blockwise_verify::f2fs::raw).
        let sb = &b0[usize::try_from(F2FS_SUPER_OFFSET).unwrap_or(1024)..];
        if le32(sb, 0) != MAGIC || le32(sb, 0x14) != 9 {
            return Err("not the F2FS superblock mkfs.f2fs writes".into());
        }
        if le32(sb, 0x884) & FEATURE_INODE_CHKSUM != 0 {
            return Err("inodes carry checksums (inode_checksum feature)".into());
        }
        let cp_payload = le32(sb, 0x680);
        let vol = Volume {
            f,
            blocks: le64(sb, 0x24),
            nat_blkaddr: u64::from(le32(sb, 0x54)),
            nat_bitmap: Vec::new(),
            root_ino: le32(sb, 0x60),
        };
        // The valid checkpoint pack: CRC right, the higher version.
        let cp0 = u64::from(le32(sb, 0x4c));
        let mut best: Option<(u64, Vec<u8>)> = None;
        for at in [cp0, cp0 + 512] {
            let cp = vol.block(at)?;
            let crc_at = le32(&cp, 164) as usize;
            if !(192..=BLOCK - 4).contains(&crc_at) || crc32(&cp[..crc_at]) != le32(&cp, crc_at) {
                continue;
            }
            let ver = le64(&cp, 0);
            if best.as_ref().is_none_or(|(v, _)| ver > *v) {
                best = Some((ver, cp));
            }
        }
        let (_, cp) = best.ok_or("no checkpoint pack with a valid CRC")?;
        if le32(&cp, 132) & CP_LARGE_NAT_BITMAP != 0 {
            return Err("a large NAT bitmap (mkfs.f2fs -i)".into());
        }
        let sit_len = le32(&cp, 156) as usize;
        let nat_len = le32(&cp, 160) as usize;
        let at = if cp_payload > 0 { 192 } else { 192 + sit_len };
        let nat_bitmap = cp
            .get(at..at + nat_len)
            .ok_or("the NAT bitmap does not fit the checkpoint")?
            .to_vec();
        Ok(Volume { nat_bitmap, ..vol })
    }

    /// The block holding node `nid`, from the valid NAT copy.
    fn node_addr(&self, nid: u32) -> Result<u64, String> {
        let block_off = nid / NAT_PER_BLOCK;
        let seg_off = u64::from(block_off >> 9);
        let mut addr = self.nat_blkaddr + (seg_off << 10) + u64::from(block_off & 511);
        let byte = self
            .nat_bitmap
            .get((block_off / 8) as usize)
            .ok_or_else(|| format!("node {nid} is beyond the NAT"))?;
        if byte & (0x80 >> (block_off % 8)) != 0 {
            addr += 512;
        }
        let nat = self.block(addr)?;
        let e = (nid % NAT_PER_BLOCK) as usize * 9;
        let blk = le32(&nat, e + 5);
        if le32(&nat, e + 1) != nid || blk == 0 || blk == u32::MAX {
            return Err(format!("node {nid} has no NAT entry"));
        }
        Ok(u64::from(blk))
    }

    /// Inode `ino`: its block address and contents, the footer checked.
    fn inode(&self, ino: u32) -> Result<(u64, Vec<u8>), String> {
        let addr = self.node_addr(ino)?;
        let b = self.block(addr)?;
        if le32(&b, FOOTER) != ino || le32(&b, FOOTER + 4) != ino {
            return Err(format!(
                "block {addr} is not inode {ino}'s node (its footer says node {} of inode {})",
                le32(&b, FOOTER),
                le32(&b, FOOTER + 4)
            ));
        }
        Ok((addr, b))
    }

    /// The inode number of `name` in directory `dir` (an inode block), if present.
    fn lookup(&self, dir: &[u8], name: &[u8]) -> Result<Option<u32>, String> {
        if le16(dir, 0) & 0o170000 != 0o040000 {
            return Err("not a directory".into());
        }
        let inline = dir.get(3).copied().unwrap_or(0);
        if inline & INLINE_DENTRY != 0 {
            return Err("an inline directory (not made by sload.f2fs)".into());
        }
        let extra = if inline & EXTRA_ATTR != 0 {
            usize::from(le16(dir, I_ADDR))
        } else {
            0
        };
        let xattr = if inline & INLINE_XATTR != 0 {
            INLINE_XATTR_ADDRS
        } else {
            0
        };
        let direct = ADDRS_PER_INODE.saturating_sub(extra / 4 + xattr);
        let size = le64(dir, 16);
        let nblocks = usize::try_from(size.div_ceil(F2FS_BLOCK)).unwrap_or(usize::MAX);
        if nblocks > direct {
            return Err(format!(
                "a directory of {nblocks} blocks (more than the {direct} its inode addresses)"
            ));
        }
        for k in 0..nblocks {
            let addr = le32(dir, I_ADDR + extra + 4 * k);
            if addr == 0 || addr == u32::MAX {
                continue;
            }
            let b = self.block(u64::from(addr))?;
            let mut slot = 0;
            while slot < DENTRIES {
                if b[slot / 8] & (1 << (slot % 8)) == 0 {
                    slot += 1;
                    continue;
                }
                let d = DENTRY_AT + slot * 11;
                let ino = le32(&b, d + 4);
                let len = usize::from(le16(&b, d + 8));
                let start = NAMES_AT + slot * 8;
                let stored = b
                    .get(start..start + len)
                    .ok_or_else(|| format!("a {len}-byte name overruns its dentry block"))?;
                if stored == name {
                    return Ok(Some(ino));
                }
                slot += len.div_ceil(8).max(1);
            }
        }
        Ok(None)
    }

    /// Walks `path` (absolute) from the root: the inode number, or `None` when a component
    /// is missing.
    fn resolve(&self, path: &str) -> Result<Option<u32>, String> {
        let mut ino = self.root_ino;
        for (depth, comp) in path.split('/').filter(|c| !c.is_empty()).enumerate() {
            if depth > MAX_DEPTH {
                return Err("the path is too deep".into());
            }
            let (_, dir) = self.inode(ino)?;
            match self.lookup(&dir, comp.as_bytes())? {
                Some(i) => ino = i,
                None => return Ok(None),
            }
        }
        Ok(Some(ino))
    }
}

/// Why an entry cannot be applied: the error names the entry (`entry[N]`, 1-based) and says why.
#[derive(Debug)]
pub(crate) struct EntryError {
    /// 1-based entry number.
    pub entry: usize,
    /// What is wrong.
    pub reason: String,
}

/// The file type bits an entry kind asks for (`None`: any, for `Existing`).
fn type_of(kind: EntryKind) -> Option<u16> {
    match kind {
        EntryKind::Existing => None,
        EntryKind::File => Some(0o100000),
        EntryKind::Dir => Some(0o040000),
        EntryKind::Symlink => Some(0o120000),
        EntryKind::Char => Some(0o020000),
        EntryKind::Block => Some(0o060000),
        EntryKind::Fifo => Some(0o010000),
        EntryKind::Socket => Some(0o140000),
    }
}

/// Applies `entries` to the F2FS volume in `img`: mode and owners of existing paths.
pub(crate) fn apply(img: &Path, entries: &[EntrySpec]) -> Result<(), EntryError> {
    let err = |entry: usize, reason: String| EntryError { entry, reason };
    let f = File::options()
        .read(true)
        .write(true)
        .open(img)
        .map_err(|e| err(1, format!("{}: {e}", blockwise_geometry::display_path(img))))?;
    let vol = Volume::open(&f).map_err(|r| {
        err(
            1,
            format!("the F2FS volume sload.f2fs wrote cannot be edited here: {r}"),
        )
    })?;
    for (j, e) in entries.iter().enumerate() {
        let n = j + 1;
        let shown = blockwise_geometry::display_str(&e.path);
        let ino = vol
            .resolve(&e.path)
            .map_err(|r| err(n, format!("{shown}: {r}")))?
            .ok_or_else(|| {
                err(
                    n,
                    format!(
                        "{shown} is not in contents: sload.f2fs cannot create files, directories or special files from entries (fs = \"ext4\" can); add it to the contents tree"
                    ),
                )
            })?;
        let (addr, mut b) = vol
            .inode(ino)
            .map_err(|r| err(n, format!("{shown}: {r}")))?;
        let old = le16(&b, 0);
        if let Some(t) = type_of(e.kind) {
            if old & 0o170000 != t {
                return Err(err(
                    n,
                    format!(
                        "{shown} is a {} in contents, not the kind the entry gives",
                        match old & 0o170000 {
                            0o040000 => "directory",
                            0o120000 => "symlink",
                            _ => "file",
                        }
                    ),
                ));
            }
        }
        if let Some(m) = e.mode {
            let mode = (old & 0o170000) | u16::try_from(m & 0o7777).unwrap_or(0);
            b[0..2].copy_from_slice(&mode.to_le_bytes());
        }
        if let Some(u) = e.uid {
            b[4..8].copy_from_slice(&u.to_le_bytes());
        }
        if let Some(g) = e.gid {
            b[8..12].copy_from_slice(&g.to_le_bytes());
        }
        f.write_all_at(&b, addr * F2FS_BLOCK)
            .map_err(|x| err(n, format!("{shown}: writing its inode: {x}")))?;
    }
    f.sync_data().map_err(|e| {
        err(
            entries.len(),
            format!("{}: {e}", blockwise_geometry::display_path(img)),
        )
    })
}
