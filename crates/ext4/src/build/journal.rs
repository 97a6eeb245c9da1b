//! The internal journal: inode 8 over the runs geometry reserved, its clean JBD2
//! superblock, and the `s_jnl_blocks` backup in the superblock.

use blockwise_geometry::BlockSink;

use super::extent::push_run;
use super::inode::{Body, Ino};
use super::{put, Prepared};
use crate::geom::Geometry;
use crate::raw::{InodeFlags, JOURNAL_INO, S_IFREG};
use crate::Error;

/// The journal inode (mode 0600, extent-mapped over the reserved runs).
pub(super) fn inode(geo: &Geometry, ts: i64) -> Ino {
    let mut j = Ino::new(JOURNAL_INO, S_IFREG | 0o600, ts);
    j.size = geo.journal_blocks * geo.bs;
    let mut l = 0;
    for &(s, n) in &geo.journal {
        push_run(&mut j.extents, l, s, n);
        l += n;
    }
    j.body = Body::Journal;
    j.flags = InodeFlags::EXTENTS;
    j
}

impl Prepared {
    pub(super) fn jnl_blocks(&self) -> Option<[u8; 68]> {
        let j = self.inodes.iter().find(|r| r.ino == JOURNAL_INO)?;
        let ib = self.inode_bytes(j);
        let mut out = [0u8; 68];
        out[..60].copy_from_slice(&ib[0x28..0x64]);
        out[60..64].copy_from_slice(&((j.size >> 32) as u32).to_le_bytes());
        out[64..68].copy_from_slice(&(j.size as u32).to_le_bytes());
        Some(out)
    }

    /// Writes the journal superblock (clean: `s_start` = 0).
    pub(super) fn write_journal_superblock<S: BlockSink + ?Sized>(
        &self,
        sink: &mut S,
    ) -> Result<(), Error> {
        let g = &self.geo;
        let bs = g.bs;
        if let Some(&(js, _)) = g.journal.first() {
            let mut j = vec![0u8; 1024];
            let be = |j: &mut [u8], o: usize, v: u32| j[o..o + 4].copy_from_slice(&v.to_be_bytes());
            be(&mut j, 0x0, 0xC03B_3998);
            be(&mut j, 0x4, 4);
            be(&mut j, 0xC, bs as u32);
            be(&mut j, 0x10, g.journal_blocks as u32);
            be(&mut j, 0x14, 1);
            be(&mut j, 0x18, 1);
            j[0x30..0x40].copy_from_slice(&self.uuid);
            be(&mut j, 0x40, 1);
            put(sink, js * bs, &j)?;
        }
        Ok(())
    }
}
