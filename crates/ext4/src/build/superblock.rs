//! The superblock and its backups, with the identity fields (UUID, label, hash seed).

use blockwise_geometry::{BlockSink, Guid};

use super::groups::GroupTables;
use super::{put, Prepared};
use crate::csum::crc32c_raw;
use crate::geom::has_super;
use crate::raw::JOURNAL_INO;
use crate::{Error, Ext4Request};

pub(super) fn label_bytes(req: &Ext4Request) -> Result<[u8; 16], Error> {
    let mut out = [0u8; 16];
    if let Some(l) = &req.label {
        if l.len() > 16 {
            return Err(Error::InvalidSpec {
                key: "label",
                reason: format!("ext4 label {l:?} is {} bytes; at most 16", l.len()),
            });
        }
        out[..l.len()].copy_from_slice(l.as_bytes());
    }
    Ok(out)
}

/// The filesystem UUID (textual byte order) derived from the seed.
pub(crate) fn uuid_for(req: &Ext4Request) -> [u8; 16] {
    Guid::derive(req.seed, "ext4-uuid", 0).to_uuid_bytes()
}

/// Formats a UUID the way `dumpe2fs` prints it.
pub(crate) fn uuid_string(u: &[u8; 16]) -> String {
    let mut s = String::new();
    for (i, b) in u.iter().enumerate() {
        if matches!(i, 4 | 6 | 8 | 10) {
            s.push('-');
        }
        s.push_str(&format!("{b:02x}"));
    }
    s
}

/// The directory hash seed derived from the seed.
pub(super) fn hash_seed_for(req: &Ext4Request) -> [u32; 4] {
    let hs = Guid::derive(req.seed, "ext4-hash-seed", 0).to_uuid_bytes();
    [
        u32::from_le_bytes([hs[0], hs[1], hs[2], hs[3]]),
        u32::from_le_bytes([hs[4], hs[5], hs[6], hs[7]]),
        u32::from_le_bytes([hs[8], hs[9], hs[10], hs[11]]),
        u32::from_le_bytes([hs[12], hs[13], hs[14], hs[15]]),
    ]
}

impl Prepared {
    /// Writes the superblock and the descriptor table into group 0 and every backup group.
    pub(super) fn write_superblocks<S: BlockSink + ?Sized>(
        &self,
        sink: &mut S,
        t: &GroupTables,
    ) -> Result<(), Error> {
        let g = &self.geo;
        let bs = g.bs;
        for grp in 0..g.groups {
            if !has_super(&g.feat, grp) {
                continue;
            }
            let sb = self.superblock(grp, t.free_blocks, t.free_inodes);
            let start = g.group_start(grp);
            if grp == 0 {
                put(sink, 1024, &sb)?;
                put(sink, (start + 1) * bs, &t.gdt)?;
            } else {
                put(sink, start * bs, &sb)?;
                put(sink, (start + 1) * bs, &t.gdt)?;
            }
        }
        Ok(())
    }

    fn superblock(&self, grp: u64, free_blocks: u64, free_inodes: u64) -> Vec<u8> {
        let g = &self.geo;
        let f = &g.feat;
        let mut s = vec![0u8; 1024];
        let p16 =
            |s: &mut [u8], o: usize, v: u64| s[o..o + 2].copy_from_slice(&(v as u16).to_le_bytes());
        let p32 =
            |s: &mut [u8], o: usize, v: u64| s[o..o + 4].copy_from_slice(&(v as u32).to_le_bytes());
        let ts = self.timestamp as u64;
        p32(&mut s, 0x00, g.inodes());
        p32(&mut s, 0x04, g.blocks);
        p32(&mut s, 0x08, g.reserved_blocks);
        p32(&mut s, 0x0C, free_blocks);
        p32(&mut s, 0x10, free_inodes);
        p32(&mut s, 0x14, g.fdb);
        let log = u64::from(g.bs.trailing_zeros() - 10);
        p32(&mut s, 0x18, log);
        p32(&mut s, 0x1C, log);
        p32(&mut s, 0x20, g.bpg);
        p32(&mut s, 0x24, g.bpg);
        p32(&mut s, 0x28, g.ipg);
        p32(&mut s, 0x30, ts);
        p16(&mut s, 0x36, 0xffff);
        p16(&mut s, 0x38, 0xEF53);
        p16(&mut s, 0x3A, 1);
        p16(&mut s, 0x3C, 1);
        p32(&mut s, 0x40, ts);
        p32(&mut s, 0x4C, 1);
        p32(&mut s, 0x54, 11);
        p16(&mut s, 0x58, g.inode_size);
        p16(&mut s, 0x5A, grp);
        p32(&mut s, 0x5C, u64::from(f.compat()));
        p32(&mut s, 0x60, u64::from(f.incompat()));
        p32(&mut s, 0x64, u64::from(f.ro_compat()));
        s[0x68..0x78].copy_from_slice(&self.uuid);
        s[0x78..0x88].copy_from_slice(&self.label);
        if f.has_journal {
            p32(&mut s, 0xE0, u64::from(JOURNAL_INO));
        }
        for (k, w) in self.hash_seed.iter().enumerate() {
            p32(&mut s, 0xEC + 4 * k, u64::from(*w));
        }
        s[0xFC] = 1;
        if f.has_journal {
            s[0xFD] = 1;
        }
        p16(&mut s, 0xFE, if f.bit64 { 64 } else { 0 });
        p32(&mut s, 0x100, 0x0C);
        p32(&mut s, 0x108, ts);
        if let Some(j) = self.jnl_blocks() {
            s[0x10C..0x150].copy_from_slice(&j);
        }
        if f.bit64 {
            p32(&mut s, 0x150, g.blocks >> 32);
            p32(&mut s, 0x154, g.reserved_blocks >> 32);
            p32(&mut s, 0x158, free_blocks >> 32);
        }
        if g.inode_size >= 160 {
            p16(&mut s, 0x15C, 32);
            p16(&mut s, 0x15E, 32);
        }
        p32(&mut s, 0x160, 1); // signed directory hash
        p16(&mut s, 0x164, u64::from(g.stride));
        p32(&mut s, 0x170, u64::from(g.stripe_width));
        if f.flex_bg {
            s[0x174] = 4;
        }
        if f.metadata_csum {
            s[0x175] = 1;
            let c = crc32c_raw(0xffff_ffff, &s[..0x3FC]);
            p32(&mut s, 0x3FC, u64::from(c));
        }
        s
    }
}
