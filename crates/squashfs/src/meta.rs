//! Metadata streams: bytes cut into 8 KiB blocks, each compressed (or stored) behind a 2-byte
//! header, kept in memory until the tables are written. A position in a stream is the
//! compressed offset of its block and the offset inside the uncompressed block.

use crate::compress::compress;
use crate::options::Compression;
use crate::raw::{METADATA_BYTES, METADATA_UNCOMPRESSED};

pub(crate) struct Meta {
    comp: Compression,
    level: Option<u32>,
    dict: u32,
    /// Finished blocks, headers included.
    pub out: Vec<u8>,
    /// The block being filled.
    cur: Vec<u8>,
    /// Block starts (offsets in `out`), for the tables' indexes.
    pub starts: Vec<u64>,
}

impl Meta {
    pub(crate) fn new(comp: Compression, level: Option<u32>, dict: u32) -> Self {
        Meta {
            comp,
            level,
            dict,
            out: Vec::new(),
            cur: Vec::with_capacity(METADATA_BYTES),
            starts: Vec::new(),
        }
    }

    /// Where the next byte goes: `(block start in the stream, offset in the block)`.
    pub(crate) fn pos(&self) -> (u64, u16) {
        (
            self.out.len() as u64,
            u16::try_from(self.cur.len()).unwrap_or(0),
        )
    }

    /// A squashfs reference to the next byte: block start << 16 | offset.
    pub(crate) fn reference(&self) -> u64 {
        let (b, o) = self.pos();
        (b << 16) | u64::from(o)
    }

    pub(crate) fn write(&mut self, mut bytes: &[u8]) {
        while !bytes.is_empty() {
            let room = METADATA_BYTES - self.cur.len();
            let n = room.min(bytes.len());
            self.cur.extend_from_slice(&bytes[..n]);
            bytes = &bytes[n..];
            if self.cur.len() == METADATA_BYTES {
                self.flush();
            }
        }
    }

    fn flush(&mut self) {
        if self.cur.is_empty() {
            return;
        }
        self.starts.push(self.out.len() as u64);
        match compress(self.comp, self.level, self.dict, &self.cur) {
            Some(z) => {
                let len = u16::try_from(z.len()).unwrap_or(0);
                self.out.extend_from_slice(&len.to_le_bytes());
                self.out.extend_from_slice(&z);
            }
            None => {
                let len = u16::try_from(self.cur.len()).unwrap_or(0) | METADATA_UNCOMPRESSED;
                self.out.extend_from_slice(&len.to_le_bytes());
                self.out.extend_from_slice(&self.cur);
            }
        }
        self.cur.clear();
    }

    /// Flushes the last block and returns the stream and its block starts.
    pub(crate) fn finish(mut self) -> (Vec<u8>, Vec<u64>) {
        self.flush();
        (self.out, self.starts)
    }
}
