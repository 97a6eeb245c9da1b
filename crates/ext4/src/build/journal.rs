//! The internal journal: inode 8 over the runs geometry reserved, its clean JBD2
//! superblock, and the `s_jnl_blocks` backup in the superblock.

use blockwise_geometry::BlockSink;
use zerocopy::little_endian::U32;
use zerocopy::{FromZeros, IntoBytes};

use super::extent::push_run;
use super::inode::{Body, Ino};
use super::{put, Prepared};
use crate::geom::Geometry;
use crate::raw::{
    InodeFlags, JournalSuperblockRaw, JBD2_MAGIC_NUMBER, JBD2_SUPERBLOCK_V2, JOURNAL_INO, N_BLOCKS,
    S_IFREG,
};
use crate::Error;

/// The journal inode (mode 0600, mapped over the reserved runs).
pub(super) fn inode(geo: &Geometry, ts: i64) -> Ino {
    let mut j = Ino::new(JOURNAL_INO, S_IFREG | 0o600, ts);
    j.size = geo.journal_blocks * geo.bs;
    let mut l = 0;
    for &(s, n) in &geo.journal {
        push_run(&mut j.extents, l, s, n);
        l += n;
    }
    j.body = Body::Journal;
    if geo.feat.extents {
        j.flags = InodeFlags::EXTENTS;
    }
    j
}

impl Prepared {
    /// `s_jnl_blocks`: the journal inode's `i_block`, then `i_size_high` and `i_size`.
    pub(super) fn jnl_blocks(&self) -> Option<[U32; 17]> {
        let j = self.inodes.iter().find(|r| r.ino == JOURNAL_INO)?;
        let mut out = [U32::ZERO; 17];
        out.as_mut_bytes()[..N_BLOCKS * 4].copy_from_slice(&self.mapping(j).0);
        out[N_BLOCKS].set((j.size >> 32) as u32);
        out[N_BLOCKS + 1].set(j.size as u32);
        Some(out)
    }

    /// Writes the journal superblock: an empty (clean, `s_start` = 0) v2 journal without
    /// features, sharing the filesystem's UUID.
    pub(super) fn write_journal_superblock<S: BlockSink + ?Sized>(
        &self,
        sink: &mut S,
    ) -> Result<(), Error> {
        let g = &self.geo;
        let Some(&(js, _)) = g.journal.first() else {
            return Ok(());
        };
        let mut j = JournalSuperblockRaw::new_zeroed();
        j.s_header.h_magic.set(JBD2_MAGIC_NUMBER);
        j.s_header.h_blocktype.set(JBD2_SUPERBLOCK_V2);
        j.s_blocksize.set(g.bs as u32);
        j.s_maxlen.set(g.journal_blocks as u32);
        j.s_first.set(1);
        j.s_sequence.set(1);
        j.s_uuid = self.uuid;
        j.s_nr_users.set(1);
        put(sink, js * g.bs, j.as_bytes())
    }
}
