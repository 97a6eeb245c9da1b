//! Data blocks: file contents (streamed in 1 MiB chunks), directory blocks, slow symlink
//! targets, extent-tree blocks and xattr blocks.

use blockwise_geometry::{BlockSink, ContentRef, ContentSource, PlaceError};

use super::inode::Body;
use super::{put, Prepared};
use crate::xattr;
use crate::Error;

impl Prepared {
    /// Writes every inode's data and extra blocks. A directory's blocks are dropped once
    /// written: the sink holds them now (2,000 directories are 8 MB).
    pub(super) fn write_data<S: BlockSink + ?Sized>(
        &mut self,
        sink: &mut S,
        content: &dyn ContentSource,
    ) -> Result<(), Error> {
        // File contents (by reference where the sink keeps references), directories,
        // symlinks, extent trees, xattr blocks.
        let mut inodes = core::mem::take(&mut self.inodes);
        let written = self.write_each(&mut inodes, sink, content);
        self.inodes = inodes;
        written
    }

    fn write_each<S: BlockSink + ?Sized>(
        &self,
        inodes: &mut [super::inode::Ino],
        sink: &mut S,
        content: &dyn ContentSource,
    ) -> Result<(), Error> {
        let bs = self.geo.bs;
        for r in inodes {
            match &mut r.body {
                Body::Content(handle) => {
                    for &(l, len, p) in &r.extents {
                        let start = l * bs;
                        let end = ((l + len) * bs).min(r.size);
                        if start < end {
                            let at = p * bs;
                            let cref = ContentRef {
                                content: *handle,
                                offset: start,
                                len: end - start,
                            };
                            sink.write_content(at, cref, content).map_err(|e| match e {
                                PlaceError::Content(c) => Error::Content(c),
                                PlaceError::Sink(e) => Error::Sink {
                                    offset: at,
                                    source: Box::new(e),
                                },
                            })?;
                        }
                        // Zero the tail of the last block (the device may hold old data).
                        let tail = (bs - end % bs) % bs;
                        if tail > 0 && end > start {
                            let at = (p + (end - start) / bs) * bs + (end - start) % bs;
                            put(sink, at, &vec![0u8; tail as usize])?;
                        }
                    }
                }
                Body::Dir(data) => {
                    let mut lb = 0u64;
                    for &(l, len, p) in &r.extents {
                        debug_assert_eq!(l, lb);
                        let s = (l * bs) as usize;
                        let e = ((l + len) * bs) as usize;
                        put(sink, p * bs, &data[s..e])?;
                        lb = l + len;
                    }
                    *data = Vec::new();
                }
                Body::SlowLink(t) => {
                    if let Some(&(_, _, p)) = r.extents.first() {
                        let mut b = vec![0u8; bs as usize];
                        b[..t.len()].copy_from_slice(t);
                        put(sink, p * bs, &b)?;
                    }
                }
                _ => {}
            }
            if !r.tree_blocks().is_empty() {
                for (nr, b) in self.mapping(r).1 {
                    put(sink, nr * bs, &b)?;
                }
            }
            if let Some(x) = r.xattr_block() {
                let b = xattr::build_block(bs as usize, r.attrs(), x, self.csum());
                put(sink, x * bs, &b)?;
            }
        }
        Ok(())
    }
}
