//! The decoders: a codec turns a reader of compressed bytes into a reader of image bytes.
//!
//! Pure Rust by default (ruzstd, lzma-rust2, flate2 on miniz_oxide, libbz2-rs-sys through
//! bzip2, lz4_flex), so the crate builds for wasm32. The `native` feature swaps zstd and xz
//! for the C libraries (libzstd, liblzma), which the CLI uses where it matters for speed
//! (see README, "Containers": the numbers).

use std::io::{self, BufRead, Chain, Cursor, Read};

use crate::decode::lz4_walk::Lz4Walk;
use crate::decode::zstd_frame;

/// How a run of compressed bytes is decoded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Codec {
    /// zstd frames, skippable frames among them.
    Zstd,
    /// xz streams (with stream padding between them).
    Xz,
    /// gzip members.
    Gzip,
    /// bzip2 streams.
    Bzip2,
    /// lz4 frames (and the legacy format).
    Lz4,
    /// Raw deflate (a zip entry, method 8).
    Deflate,
    /// One bzip2 stream (a zip entry, method 12).
    Bzip2Single,
}

impl Codec {
    /// The name used in messages.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Codec::Zstd => "zstd",
            Codec::Xz => "xz",
            Codec::Gzip => "gzip",
            Codec::Bzip2 | Codec::Bzip2Single => "bzip2",
            Codec::Lz4 => "lz4",
            Codec::Deflate => "deflate",
        }
    }
}

/// Memory an xz block's dictionary may take: `xz -9` needs 64 MiB; larger dictionaries (only
/// by hand, up to 1.5 GiB) are refused by the decoder with a message that says so.
pub const XZ_MEMLIMIT: u64 = 96 << 20;

/// A decoder of `codec` over `input`.
pub(crate) fn decoder<'r, R: BufRead + 'r>(
    codec: Codec,
    input: R,
) -> io::Result<Box<dyn Read + 'r>> {
    Ok(match codec {
        Codec::Zstd => zstd_decoder(input)?,
        Codec::Xz => xz_decoder(input)?,
        Codec::Gzip => Box::new(flate2::bufread::MultiGzDecoder::new(input)),
        Codec::Deflate => Box::new(flate2::bufread::DeflateDecoder::new(input)),
        Codec::Bzip2 => Box::new(bzip2::bufread::MultiBzDecoder::new(input)),
        Codec::Bzip2Single => Box::new(bzip2::bufread::BzDecoder::new(input)),
        Codec::Lz4 => Box::new(Lz4Frames(Some(lz4_flex::frame::FrameDecoder::new(
            Walked {
                inner: input,
                walk: Lz4Walk::default(),
                taken: 0,
            },
        )))),
    })
}

/// Concatenated lz4 frames, as the `lz4` tool decodes them: lz4_flex's decoder returns end
/// of file at the end of each frame; a fresh decoder (its buffers sized for the frame's
/// block size) takes the next one. It also returns end of file where the input stops at a
/// block boundary, so the input goes through an [`Lz4Walk`] that says whether it stopped
/// where a frame may end.
struct Lz4Frames<R: BufRead>(Option<lz4_flex::frame::FrameDecoder<Walked<R>>>);

impl<R: BufRead> Read for Lz4Frames<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        // Every round without output consumes input (a frame's header and end mark, or a
        // skippable frame) or returns, so the loop ends with the input.
        loop {
            let Some(d) = self.0.as_mut() else {
                return Ok(0);
            };
            let before = d.get_ref().taken;
            let n = match d.read(buf) {
                Ok(n) => n,
                Err(e) => match lz4_error(e) {
                    Lz4Error::Skippable(len) => {
                        // The decoder took the magic number and the length: pass the data.
                        let inner = d.get_mut();
                        let skipped =
                            io::copy(&mut inner.by_ref().take(u64::from(len)), &mut io::sink())?;
                        if skipped < u64::from(len) {
                            return Err(truncated());
                        }
                        self.next_frame();
                        continue;
                    }
                    Lz4Error::Other(e) => return Err(e),
                },
            };
            if n > 0 || buf.is_empty() {
                return Ok(n);
            }
            if d.get_mut().fill_buf()?.is_empty() {
                return if d.get_ref().walk.complete() {
                    Ok(0)
                } else {
                    Err(truncated())
                };
            }
            if d.get_ref().taken == before && before > 0 {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    "bytes after a frame that do not start another frame",
                ));
            }
            self.next_frame();
        }
    }
}

impl<R: BufRead> Lz4Frames<R> {
    /// A fresh decoder (buffers sized for the next frame's block size) on the same input.
    fn next_frame(&mut self) {
        let rest = self.0.take().map(lz4_flex::frame::FrameDecoder::into_inner);
        self.0 = rest.map(lz4_flex::frame::FrameDecoder::new);
    }
}

fn truncated() -> io::Error {
    io::Error::new(
        io::ErrorKind::UnexpectedEof,
        "the input ends inside a frame (the file is truncated)",
    )
}

/// An lz4_flex error: a skippable frame to pass over, or an error in blockwise's words
/// (lz4_flex prints its variant names).
enum Lz4Error {
    Skippable(u32),
    Other(io::Error),
}

fn lz4_error(e: io::Error) -> Lz4Error {
    use lz4_flex::frame::Error as E;
    let Some(inner) = e.get_ref().and_then(|i| i.downcast_ref::<E>()) else {
        return Lz4Error::Other(e);
    };
    let words = match inner {
        E::SkippableFrame(len) => return Lz4Error::Skippable(*len),
        E::WrongMagicNumber => "bytes that do not start an lz4 frame",
        E::UnsupportedBlocksize(_) => "a frame with a block size lz4 does not define",
        E::UnsupportedVersion(_) => "a frame of an lz4 format version blockwise does not read",
        E::ReservedBitsSet => "a frame with reserved bits set",
        E::InvalidBlockInfo => "a malformed block header",
        E::BlockTooBig => "a block larger than its frame allows",
        E::HeaderChecksumError => "a frame header whose checksum does not match",
        E::BlockChecksumError => "a block whose checksum does not match (the file is damaged)",
        E::ContentChecksumError => {
            "a frame whose content checksum does not match (the file is damaged)"
        }
        E::ContentLengthError { .. } => "a frame shorter or longer than its header says",
        E::DictionaryNotSupported => "a frame that needs an external dictionary",
        E::DecompressionError(_) => "a block that does not decode (the file is damaged)",
        _ => return Lz4Error::Other(e),
    };
    Lz4Error::Other(io::Error::new(io::ErrorKind::InvalidData, words))
}

/// The compressed input, with the frame walk following every byte the decoder takes.
struct Walked<R> {
    inner: R,
    walk: Lz4Walk,
    /// Bytes taken so far.
    taken: u64,
}

impl<R: BufRead> Read for Walked<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.walk.feed(buf.get(..n).unwrap_or_default());
        self.taken = self
            .taken
            .saturating_add(u64::try_from(n).unwrap_or(u64::MAX));
        Ok(n)
    }
}

impl<R: BufRead> BufRead for Walked<R> {
    fn fill_buf(&mut self) -> io::Result<&[u8]> {
        self.inner.fill_buf()
    }

    fn consume(&mut self, amt: usize) {
        if let Ok(b) = self.inner.fill_buf() {
            self.walk.feed(b.get(..amt).unwrap_or(b));
        }
        self.taken = self
            .taken
            .saturating_add(u64::try_from(amt).unwrap_or(u64::MAX));
        self.inner.consume(amt);
    }
}

#[cfg(feature = "native")]
fn zstd_decoder<'r, R: BufRead + 'r>(input: R) -> io::Result<Box<dyn Read + 'r>> {
    let mut d = zstd::stream::read::Decoder::with_buffer(input)?;
    d.window_log_max(27)?;
    Ok(Box::new(NativeZstd(d)))
}

/// libzstd's "too much memory" in blockwise's words.
#[cfg(feature = "native")]
struct NativeZstd<R: Read>(R);

#[cfg(feature = "native")]
impl<R: Read> Read for NativeZstd<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.0.read(buf).map_err(|e| {
            if e.to_string().contains("too much memory") {
                io::Error::other(format!(
                    "a frame needs a window larger than blockwise decodes ({}; made with --long=31 or --ultra): decompress it with `zstd -d --memory=2048MB` first",
                    blockwise_geometry::format_size(zstd_frame::MAX_WINDOW)
                ))
            } else {
                e
            }
        })
    }
}

#[cfg(not(feature = "native"))]
fn zstd_decoder<'r, R: BufRead + 'r>(input: R) -> io::Result<Box<dyn Read + 'r>> {
    Ok(Box::new(ZstdFrames::new(input)))
}

#[cfg(feature = "native")]
fn xz_decoder<'r, R: BufRead + 'r>(input: R) -> io::Result<Box<dyn Read + 'r>> {
    let stream = xz2::stream::Stream::new_stream_decoder(XZ_MEMLIMIT, xz2::stream::CONCATENATED)?;
    Ok(Box::new(NativeXz(xz2::bufread::XzDecoder::new_stream(
        input, stream,
    ))))
}

/// liblzma's "memory limit reached" in blockwise's words.
#[cfg(feature = "native")]
struct NativeXz<R>(xz2::bufread::XzDecoder<R>);

#[cfg(feature = "native")]
impl<R: BufRead> Read for NativeXz<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.0.read(buf).map_err(|e| {
            let memlimit = e
                .get_ref()
                .and_then(|inner| inner.downcast_ref::<xz2::stream::Error>())
                .is_some_and(|x| matches!(x, xz2::stream::Error::MemLimit));
            if memlimit {
                xz_memlimit_error()
            } else {
                e
            }
        })
    }
}

fn xz_memlimit_error() -> io::Error {
    io::Error::other(format!(
        "the xz header asks for a dictionary larger than blockwise allows ({}; `xz -9` needs 64 MiB): not decompressed; if the file is genuine, decompress it with `xz -dk` first",
        blockwise_geometry::format_size(XZ_MEMLIMIT)
    ))
}

#[cfg(not(feature = "native"))]
fn xz_decoder<'r, R: BufRead + 'r>(input: R) -> io::Result<Box<dyn Read + 'r>> {
    let kb = u32::try_from(XZ_MEMLIMIT >> 10).unwrap_or(u32::MAX);
    Ok(Box::new(PureXz(lzma_rust2::XzReader::new_mem_limit(
        input, true, kb,
    ))))
}

/// lzma-rust2's out-of-memory error in blockwise's words.
#[cfg(not(feature = "native"))]
struct PureXz<R: Read>(lzma_rust2::XzReader<R>);

#[cfg(not(feature = "native"))]
impl<R: Read> Read for PureXz<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.0.read(buf).map_err(|e| {
            if e.kind() == io::ErrorKind::OutOfMemory {
                xz_memlimit_error()
            } else {
                e
            }
        })
    }
}

/// Reads exactly `buf.len()` bytes, or fewer only when the reader ends first.
fn read_upto<R: Read>(r: &mut R, buf: &mut [u8]) -> io::Result<usize> {
    crate::decode::input::read_full(r, buf)
}

fn bad(msg: impl Into<String>) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, msg.into())
}

/// The zstd frames of a stream, one after the other, skippable frames skipped (pure Rust).
#[cfg_attr(feature = "native", allow(dead_code))]
pub(crate) struct ZstdFrames<R: BufRead> {
    state: ZstdState<R>,
}

type Framed<R> =
    ruzstd::decoding::StreamingDecoder<Chain<Cursor<Vec<u8>>, R>, ruzstd::decoding::FrameDecoder>;

enum ZstdState<R: BufRead> {
    Between(R),
    InFrame(Box<Framed<R>>, bool),
    Done,
}

#[cfg_attr(feature = "native", allow(dead_code))]
impl<R: BufRead> ZstdFrames<R> {
    pub(crate) fn new(input: R) -> Self {
        ZstdFrames {
            state: ZstdState::Between(input),
        }
    }

    /// Starts the next frame, skipping skippable ones; `Ok(false)` at the end of the input.
    fn start(&mut self) -> io::Result<bool> {
        let ZstdState::Between(mut r) = std::mem::replace(&mut self.state, ZstdState::Done) else {
            return Ok(false);
        };
        // Each skippable frame consumes at least 8 bytes: bounded by the input.
        loop {
            let mut magic = [0u8; 4];
            match read_upto(&mut r, &mut magic)? {
                0 => return Ok(false),
                4 => {}
                _ => return Err(bad("zstd: trailing bytes after the last frame")),
            }
            let m = u32::from_le_bytes(magic);
            if m & zstd_frame::SKIPPABLE_MASK == zstd_frame::SKIPPABLE {
                let mut len = [0u8; 4];
                if read_upto(&mut r, &mut len)? != 4 {
                    return Err(bad("zstd: skippable frame cut short"));
                }
                let n = u64::from(u32::from_le_bytes(len));
                let skipped = io::copy(&mut (&mut r).take(n), &mut io::sink())?;
                if skipped != n {
                    return Err(bad("zstd: skippable frame cut short"));
                }
                continue;
            }
            if m != zstd_frame::MAGIC {
                return Err(bad("zstd: not a zstd frame (bad magic number)"));
            }
            let mut head = magic.to_vec();
            let mut fhd = [0u8; 1];
            if read_upto(&mut r, &mut fhd)? != 1 {
                return Err(bad("zstd: frame header cut short"));
            }
            head.extend(fhd);
            let mut rest = vec![0u8; zstd_frame::header_rest(fhd[0])];
            if read_upto(&mut r, &mut rest)? != rest.len() {
                return Err(bad("zstd: frame header cut short"));
            }
            head.extend(&rest);
            let header = zstd_frame::parse_header(&head).map_err(|e| bad(e.to_string()))?;
            let dec = ruzstd::decoding::StreamingDecoder::new(Cursor::new(head).chain(r))
                .map_err(|e| bad(format!("zstd: {e}")))?;
            self.state = ZstdState::InFrame(Box::new(dec), header.checksum);
            return Ok(true);
        }
    }
}

impl<R: BufRead> Read for ZstdFrames<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if buf.is_empty() {
            return Ok(0);
        }
        // Every round either returns bytes, ends, or moves past one frame of the input.
        loop {
            match &mut self.state {
                ZstdState::Done => return Ok(0),
                ZstdState::Between(_) => {
                    if !self.start()? {
                        return Ok(0);
                    }
                }
                ZstdState::InFrame(dec, checksum) => {
                    let n = dec.read(buf).map_err(|e| bad(format!("zstd: {e}")))?;
                    if n > 0 {
                        return Ok(n);
                    }
                    if *checksum {
                        let d = &dec.decoder;
                        if d.get_checksum_from_data() != d.get_calculated_checksum() {
                            return Err(bad("zstd: frame checksum does not match its data"));
                        }
                    }
                    let ZstdState::InFrame(dec, _) =
                        std::mem::replace(&mut self.state, ZstdState::Done)
                    else {
                        return Ok(0);
                    };
                    let (cursor, r) = dec.into_inner().into_inner();
                    if usize::try_from(cursor.position()).ok() != Some(cursor.get_ref().len()) {
                        return Err(bad("zstd: frame header cut short"));
                    }
                    self.state = ZstdState::Between(r);
                }
            }
        }
    }
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

    fn roundtrip(codec: Codec, packed: &[u8], want: &[u8]) {
        let mut out = Vec::new();
        decoder(codec, packed)
            .unwrap()
            .read_to_end(&mut out)
            .unwrap();
        assert_eq!(out, want, "{codec:?}");
    }

    #[test]
    fn zstd_frames_skippable_and_concatenated() {
        let a: Vec<u8> = (0..300_000u32).map(|i| (i % 7) as u8).collect();
        let b = vec![0u8; 200_000];
        let mut packed = vec![0x5a, 0x2a, 0x4d, 0x18, 3, 0, 0, 0, 1, 2, 3];
        packed.extend(zstd::bulk::compress(&a, 3).unwrap());
        packed.extend(zstd::bulk::compress(&b, 1).unwrap());
        let mut want = a.clone();
        want.extend(&b);
        roundtrip(Codec::Zstd, &packed, &want);
        // With a checksum, a flipped byte in the data fails.
        let mut enc = zstd::stream::Encoder::new(Vec::new(), 3).unwrap();
        enc.include_checksum(true).unwrap();
        std::io::Write::write_all(&mut enc, &a).unwrap();
        let mut c = enc.finish().unwrap();
        roundtrip(Codec::Zstd, &c, &a);
        let last = c.len() - 1;
        c[last] ^= 1;
        let mut out = Vec::new();
        assert!(decoder(Codec::Zstd, &c[..])
            .unwrap()
            .read_to_end(&mut out)
            .is_err());
        // Trailing garbage is an error, not silence.
        let mut t = zstd::bulk::compress(&a, 1).unwrap();
        t.extend([1, 2]);
        let mut out = Vec::new();
        assert!(decoder(Codec::Zstd, &t[..])
            .unwrap()
            .read_to_end(&mut out)
            .is_err());
    }

    #[test]
    fn other_codecs() {
        use std::io::Write;
        let data: Vec<u8> = (0..100_000u32).map(|i| (i * 7 % 256) as u8).collect();
        let mut xz = xz2::write::XzEncoder::new(Vec::new(), 6);
        xz.write_all(&data).unwrap();
        roundtrip(Codec::Xz, &xz.finish().unwrap(), &data);
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        gz.write_all(&data).unwrap();
        roundtrip(Codec::Gzip, &gz.finish().unwrap(), &data);
        let mut bz = bzip2::write::BzEncoder::new(Vec::new(), bzip2::Compression::fast());
        bz.write_all(&data).unwrap();
        roundtrip(Codec::Bzip2, &bz.finish().unwrap(), &data);
        let mut lz = lz4_flex::frame::FrameEncoder::new(Vec::new());
        lz.write_all(&data).unwrap();
        roundtrip(Codec::Lz4, &lz.finish().unwrap(), &data);
    }

    /// Concatenated lz4 frames decode whole (`cat a.lz4 b.lz4`, as the lz4 tool reads it);
    /// bytes after the last frame that are not a frame are an error.
    #[test]
    fn concatenated_lz4_frames() {
        use std::io::Write as _;
        let frame = |d: &[u8]| {
            let mut lz = lz4_flex::frame::FrameEncoder::new(Vec::new());
            lz.write_all(d).unwrap();
            lz.finish().unwrap()
        };
        let (a, b) = (vec![1u8; 300_000], vec![2u8; 70_000]);
        let mut both = frame(&a);
        both.extend_from_slice(&frame(&b));
        let mut want = a.clone();
        want.extend_from_slice(&b);
        roundtrip(Codec::Lz4, &both, &want);
        // A skippable frame between them is passed over, as the lz4 tool does.
        let mut skip = frame(&a);
        skip.extend_from_slice(&0x184D_2A51u32.to_le_bytes());
        skip.extend_from_slice(&5u32.to_le_bytes());
        skip.extend_from_slice(b"hello");
        skip.extend_from_slice(&frame(&b));
        roundtrip(Codec::Lz4, &skip, &want);
        let mut junk = frame(&a);
        junk.extend_from_slice(&[0u8; 16]);
        let mut out = Vec::new();
        let r = decoder(Codec::Lz4, &junk[..])
            .unwrap()
            .read_to_end(&mut out);
        let e = r.expect_err("junk after a frame");
        assert!(!e.to_string().contains("Magic"), "{e}");
    }

    /// A stream cut exactly after a block (where lz4_flex sees a clean end) is an error, as is
    /// one cut anywhere else inside a frame; the whole stream decodes.
    #[test]
    fn truncated_lz4_is_an_error() {
        use std::io::Write as _;
        let info =
            lz4_flex::frame::FrameInfo::new().block_size(lz4_flex::frame::BlockSize::Max64KB);
        let mut enc = lz4_flex::frame::FrameEncoder::with_frame_info(info, Vec::new());
        enc.write_all(&vec![0u8; 1 << 20]).unwrap();
        let whole = enc.finish().unwrap();
        roundtrip(Codec::Lz4, &whole, &vec![0u8; 1 << 20]);
        // Without the end mark: the input stops right after the last block.
        for cut in [whole.len() - 4, whole.len() / 2, 7] {
            let mut out = Vec::new();
            let r = decoder(Codec::Lz4, &whole[..cut])
                .unwrap()
                .read_to_end(&mut out);
            assert!(r.is_err(), "cut at {cut}: {} bytes decoded", out.len());
        }
    }
}
