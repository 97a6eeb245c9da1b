//! The container's own bytes: any [`BlockSource`], with the bytes read counted, and buffered
//! readers over ranges of it for the decoder libraries.

use std::cell::Cell;
use std::io::{self, BufRead, Read};
use std::rc::Rc;

use blockwise_geometry::BlockSource;

use crate::Error;

/// Buffer of a [`Segments`] reader: large enough that a decoder library reads in few calls,
/// small enough that a frame of a few bytes does not read a megabyte.
const READ_BUF: usize = 1 << 20;

/// The container file or device, shared by the decoders; counts the bytes read.
#[derive(Debug)]
pub(crate) struct Input<I> {
    src: I,
    read: Cell<u64>,
}

impl<I: BlockSource> Input<I> {
    pub(crate) fn new(src: I) -> Rc<Self> {
        Rc::new(Input {
            src,
            read: Cell::new(0),
        })
    }

    pub(crate) fn len(&self) -> u64 {
        self.src.len()
    }

    pub(crate) fn bytes_read(&self) -> u64 {
        self.read.get()
    }

    pub(crate) fn inner(&self) -> &I {
        &self.src
    }

    /// Fills `buf` from `offset`; past the end is an error (the caller checks first).
    pub(crate) fn read_at(&self, offset: u64, buf: &mut [u8]) -> Result<(), Error> {
        let n = u64::try_from(buf.len()).unwrap_or(u64::MAX);
        self.read.set(self.read.get().saturating_add(n));
        self.src
            .read_at(offset, buf)
            .map_err(|e| Error::Input(Box::new(e)))
    }

    /// Up to `len` bytes at `offset`, fewer at the end of the input.
    pub(crate) fn read_clamped(&self, offset: u64, len: usize) -> Result<Vec<u8>, Error> {
        let avail = self.len().saturating_sub(offset);
        let n = usize::try_from(avail).unwrap_or(usize::MAX).min(len);
        let mut buf = vec![0u8; n];
        if n > 0 {
            self.read_at(offset, &mut buf)?;
        }
        Ok(buf)
    }

    /// Exactly `N` bytes at `offset`, or a `Corrupt` error naming `what` of `format`.
    pub(crate) fn array<const N: usize>(
        &self,
        offset: u64,
        format: &'static str,
        what: &str,
    ) -> Result<[u8; N], Error> {
        let n = u64::try_from(N).unwrap_or(u64::MAX);
        if offset.checked_add(n).is_none_or(|end| end > self.len()) {
            return Err(Error::corrupt(
                format,
                format!(
                    "the {what} at byte {offset} runs past the end of the file ({} bytes)",
                    self.len()
                ),
            ));
        }
        let mut b = [0u8; N];
        self.read_at(offset, &mut b)?;
        Ok(b)
    }
}

/// One part of what a [`Segments`] reader yields.
#[derive(Clone, Debug)]
pub(crate) enum Segment {
    /// Bytes in memory (a stream header made up around one xz block).
    Mem(Rc<[u8]>),
    /// `len` bytes of the input from `at`.
    Range {
        /// Offset in the input.
        at: u64,
        /// Length.
        len: u64,
    },
}

/// A buffered reader over segments of memory and of the input, in order.
pub(crate) struct Segments<I> {
    input: Rc<Input<I>>,
    segs: Vec<Segment>,
    /// Current segment and the offset inside it.
    seg: usize,
    within: u64,
    buf: Vec<u8>,
    lo: usize,
    hi: usize,
}

impl<I: BlockSource> Segments<I> {
    pub(crate) fn new(input: Rc<Input<I>>, segs: Vec<Segment>) -> Self {
        Segments {
            input,
            segs,
            seg: 0,
            within: 0,
            buf: Vec::new(),
            lo: 0,
            hi: 0,
        }
    }

    /// `len` bytes of `input` from `at`.
    #[cfg(test)]
    pub(crate) fn range(input: Rc<Input<I>>, at: u64, len: u64) -> Self {
        Segments::new(input, vec![Segment::Range { at, len }])
    }

    fn refill(&mut self) -> io::Result<()> {
        self.lo = 0;
        self.hi = 0;
        while let Some(seg) = self.segs.get(self.seg) {
            let seg_len = match seg {
                Segment::Mem(m) => u64::try_from(m.len()).unwrap_or(u64::MAX),
                Segment::Range { len, .. } => *len,
            };
            let left = seg_len.saturating_sub(self.within);
            if left == 0 {
                self.seg = self.seg.saturating_add(1);
                self.within = 0;
                continue;
            }
            let mut n = usize::try_from(left).unwrap_or(usize::MAX).min(READ_BUF);
            if let Segment::Range { at, .. } = seg {
                // A container that promises more bytes than the file has: the reader ends
                // where the file does, and the decoder reports the truncation.
                let avail = self
                    .input
                    .len()
                    .saturating_sub(at.saturating_add(self.within));
                n = n.min(usize::try_from(avail).unwrap_or(usize::MAX));
                if n == 0 {
                    return Ok(());
                }
            }
            if self.buf.len() < n {
                self.buf.resize(n, 0);
            }
            let dst = self.buf.get_mut(..n).unwrap_or_default();
            match seg {
                Segment::Mem(m) => {
                    let from = usize::try_from(self.within).unwrap_or(usize::MAX);
                    let src = from
                        .checked_add(n)
                        .and_then(|end| m.get(from..end))
                        .unwrap_or_default();
                    if src.len() != n {
                        return Err(io::Error::other("segment bounds"));
                    }
                    dst.copy_from_slice(src);
                }
                Segment::Range { at, .. } => {
                    let off = at.saturating_add(self.within);
                    self.input.read_at(off, dst).map_err(Error::into_io)?;
                }
            }
            self.within = self
                .within
                .saturating_add(u64::try_from(n).unwrap_or(u64::MAX));
            self.hi = n;
            return Ok(());
        }
        Ok(())
    }
}

impl<I: BlockSource> Read for Segments<I> {
    fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
        let avail = self.fill_buf()?;
        let n = avail.len().min(out.len());
        if let (Some(d), Some(s)) = (out.get_mut(..n), avail.get(..n)) {
            d.copy_from_slice(s);
        }
        self.consume(n);
        Ok(n)
    }
}

impl<I: BlockSource> BufRead for Segments<I> {
    fn fill_buf(&mut self) -> io::Result<&[u8]> {
        if self.lo >= self.hi {
            self.refill()?;
        }
        Ok(self.buf.get(self.lo..self.hi).unwrap_or_default())
    }

    fn consume(&mut self, amt: usize) {
        self.lo = self.lo.saturating_add(amt).min(self.hi);
    }
}

/// Reads until `buf` is full or the reader ends; the count read.
pub(crate) fn read_full(r: &mut dyn Read, buf: &mut [u8]) -> io::Result<usize> {
    let mut n = 0;
    while n < buf.len() {
        match r.read(buf.get_mut(n..).unwrap_or_default()) {
            Ok(0) => break,
            Ok(k) => n = n.saturating_add(k),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(n)
}

#[cfg(test)]
#[allow(
    clippy::unwrap_used,
    clippy::indexing_slicing,
    clippy::arithmetic_side_effects,
    clippy::as_conversions,
    clippy::panic,
    reason = "tests"
)]
mod tests {
    use super::*;

    #[test]
    fn segments_chain_memory_and_input() {
        let data: Vec<u8> = (0..200_000u32).map(|i| (i % 251) as u8).collect();
        let input = Input::new(data.clone());
        let mut r = Segments::new(
            input.clone(),
            vec![
                Segment::Mem(Rc::from(&b"head"[..])),
                Segment::Range {
                    at: 10,
                    len: 100_000,
                },
                Segment::Mem(Rc::from(&b"tail"[..])),
            ],
        );
        let mut out = Vec::new();
        r.read_to_end(&mut out).unwrap();
        assert_eq!(&out[..4], b"head");
        assert_eq!(&out[4..100_004], &data[10..100_010]);
        assert_eq!(&out[100_004..], b"tail");
        assert_eq!(input.bytes_read(), 100_000);
        // A range past the end of the input ends where the input does.
        let mut r = Segments::range(input, 150_000, 100_000);
        let mut out = Vec::new();
        r.read_to_end(&mut out).unwrap();
        assert_eq!(out, &data[150_000..]);
    }
}
