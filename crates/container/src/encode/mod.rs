//! An [`ImageMap`] written as Android sparse, seekable zstd or multi-block xz, straight from
//! the map: never through a raw file.
//!
//! Every container is cut at the same places: the image's **erase blocks** ([`Window`]s of
//! `erase_block_bytes` from the start of the disk). An Android sparse chunk never crosses one;
//! a zstd frame or an xz block is exactly one, so a reader can seek by erase block and a writer
//! can write each one whole. What the map says of each byte decides how it is stored:
//!
//! | the image map says | Android sparse | seekable zstd / xz |
//! |---|---|---|
//! | metadata or file content | RAW chunk, or FILL when a block repeats one 32-bit value | compressed frame / block |
//! | written as zeros (mapped) | FILL 0 | compressed (an all-zero window is a tiny frame) |
//! | never written (free space, gaps) | DONT_CARE, whole blocks | zeros (an all-zero window is a tiny frame) |
//!
//! The work is split so that a host can compress windows on several threads while this crate
//! stays single-threaded and pure: an [`Encoder`] holds the container's state (counts, seek
//! table, index) and must see the windows in order; a [`Packer`] turns one window's bytes into
//! a [`Packed`] unit and can run anywhere (one per thread). [`encode_map`] is the whole thing
//! on one thread.
//!
//! The compressors are C libraries (libzstd, liblzma) behind the `zstd` and `xz` cargo
//! features, off by default so that the crate builds for `wasm32-unknown-unknown`; without
//! them those formats are [`EncodeError::Unsupported`]. Android sparse needs no compressor.
//!
//! ```
//! use blockwise_container::encode::{encode_map, EncodeOptions, Format};
//! use blockwise_geometry::{BlockSink, ImageMap};
//! let mut img = ImageMap::new(8 << 20);
//! img.write_at(0, &[0xAB; 512]).unwrap();
//! let files: Vec<Vec<u8>> = Vec::new();
//! let mut out = Vec::new();
//! let opts = EncodeOptions::new(Format::AndroidSparse, 4 << 20);
//! let summary = encode_map(&img, &files, &opts, &mut out).unwrap();
//! assert_eq!(&out[..4], &0xED26_FF3Au32.to_le_bytes());
//! // Block 0 is RAW (512 bytes of 0xAB, then zeros); the rest of erase block 0 and all of
//! // erase block 1 were never written: DONT_CARE, one chunk per erase block.
//! assert_eq!(summary.units, 3);
//! assert_eq!(summary.dont_care_bytes, (8 << 20) - 4096);
//! ```

mod simg;
mod xz;
mod zstd;

use blockwise_geometry::{BlockSource, ContentSource, ImageMap, MapReadError};

pub use simg::{SIMG_BLOCK_BYTES, SIMG_MAGIC};
pub use zstd::{xxh64, SEEKABLE_MAGIC};

/// A container an image can be encoded into.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Format {
    /// Android sparse (`.simg`): RAW, FILL and DONT_CARE chunks of 4 KiB blocks, as
    /// `simg2img`, fastboot and rpi-sb-provisioner read it.
    AndroidSparse,
    /// The zstd seekable format (`.img.zst`): one independent frame per erase block and a
    /// seek table in a skippable frame at the end; plain `zstd -d` decodes it.
    SeekableZstd,
    /// xz (`.img.xz`): one stream, one block per erase block (sizes in every block header),
    /// and the index that lets a reader seek by block.
    Xz,
}

impl Format {
    /// The name used in messages.
    #[must_use]
    pub fn name(self) -> &'static str {
        match self {
            Format::AndroidSparse => "Android sparse",
            Format::SeekableZstd => "seekable zstd",
            Format::Xz => "xz",
        }
    }

    /// True when this build can encode the format (zstd and xz need the `zstd` / `xz`
    /// features).
    #[must_use]
    pub fn available(self) -> bool {
        match self {
            Format::AndroidSparse => true,
            Format::SeekableZstd => cfg!(feature = "zstd"),
            Format::Xz => cfg!(feature = "xz"),
        }
    }

    /// The compression levels the format takes, and the default; `None` for Android sparse.
    #[must_use]
    pub fn levels(self) -> Option<(core::ops::RangeInclusive<i32>, i32)> {
        match self {
            Format::AndroidSparse => None,
            Format::SeekableZstd => Some((1..=22, 3)),
            Format::Xz => Some((0..=9, 6)),
        }
    }
}

impl core::fmt::Display for Format {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(self.name())
    }
}

/// How to encode an image.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EncodeOptions {
    /// The container.
    pub format: Format,
    /// The erase block: the unit frames, blocks and chunk boundaries follow (from the plan).
    pub erase_block_bytes: u64,
    /// The device's logical sector: an Android sparse block is 4096 bytes, or this when it
    /// is larger.
    pub sector_bytes: u64,
    /// Compression level (zstd 1–22, default 3; xz 0–9, default 6); `None` for the default.
    /// Android sparse takes none.
    pub level: Option<i32>,
}

impl EncodeOptions {
    /// `format` with windows of `erase_block_bytes`, 512-byte sectors and the default level.
    #[must_use]
    pub fn new(format: Format, erase_block_bytes: u64) -> Self {
        EncodeOptions {
            format,
            erase_block_bytes,
            sector_bytes: 512,
            level: None,
        }
    }
}

/// Why an image cannot be encoded as asked.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum EncodeError {
    /// The options are wrong (a level out of range, an erase block that is not a multiple of
    /// the block).
    #[error("{what}")]
    InvalidOptions {
        /// What is wrong, in the user's words.
        what: String,
    },
    /// The format cannot hold this image, or this build cannot write the format.
    #[error("{format}: {reason}")]
    Unsupported {
        /// The format.
        format: Format,
        /// Why.
        reason: String,
    },
    /// The compression library failed (out of memory, …).
    #[error("{format} compressor: {message}")]
    Codec {
        /// The format.
        format: Format,
        /// The library's message.
        message: String,
    },
    /// The windows did not reach the [`Encoder`] in order, or a window's bytes did not match
    /// it: a bug of the caller.
    #[error("window at offset {got} given where {expected} was expected")]
    OutOfOrder {
        /// The offset the encoder expected.
        expected: u64,
        /// The offset it got.
        got: u64,
    },
}

/// Encoding a whole map failed ([`encode_map`]).
#[derive(Debug, thiserror::Error)]
pub enum WriteError<E: core::error::Error + 'static> {
    /// The image cannot be encoded as asked.
    #[error(transparent)]
    Encode(#[from] EncodeError),
    /// Reading the image (a content file) failed.
    #[error(transparent)]
    Read(MapReadError),
    /// The output refused the bytes.
    #[error(transparent)]
    Output(E),
}

/// Where an encoded image goes: appended in order, and the first bytes rewritten once at
/// the end (the Android sparse header carries the chunk count).
pub trait Output {
    /// The output's own error.
    type Error: core::error::Error + Send + Sync + 'static;
    /// Appends `data`.
    fn append(&mut self, data: &[u8]) -> Result<(), Self::Error>;
    /// Overwrites the first `data.len()` bytes (already appended).
    fn rewrite_start(&mut self, data: &[u8]) -> Result<(), Self::Error>;
}

impl Output for Vec<u8> {
    type Error = core::convert::Infallible;
    fn append(&mut self, data: &[u8]) -> Result<(), Self::Error> {
        self.extend_from_slice(data);
        Ok(())
    }
    fn rewrite_start(&mut self, data: &[u8]) -> Result<(), Self::Error> {
        if let Some(dst) = self.get_mut(..data.len()) {
            dst.copy_from_slice(data);
        }
        Ok(())
    }
}

/// What an encoding wrote.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Summary {
    /// Bytes of the encoded file.
    pub output_bytes: u64,
    /// Chunks (Android sparse), frames (zstd, without the seek table) or blocks (xz).
    pub units: u64,
    /// Image bytes stored as data: RAW chunks, or frames/blocks that are not all zero.
    pub data_bytes: u64,
    /// Image bytes stored as a value: FILL chunks, or all-zero frames/blocks.
    pub fill_bytes: u64,
    /// Image bytes left out: DONT_CARE chunks (Android sparse only).
    pub dont_care_bytes: u64,
}

/// One erase block of the image, with what the map has in it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Window {
    /// Offset in the image (a multiple of the erase block).
    pub offset: u64,
    /// Length: the erase block, or what is left at the end of the image.
    pub len: u64,
    /// The mapped parts rounded out to whole blocks and clipped to the window: absolute
    /// `(start, end)`, sorted and disjoint. Everything else reads as zeros and is free space.
    pub runs: Vec<(u64, u64)>,
    /// Bytes of mapped ranges inside the window (not rounded): the progress it stands for.
    pub mapped_bytes: u64,
}

impl Window {
    /// True when nothing in the window was written: it need not be read.
    #[must_use]
    pub fn is_unmapped(&self) -> bool {
        self.runs.is_empty()
    }

    /// End offset.
    #[must_use]
    pub fn end(&self) -> u64 {
        self.offset.saturating_add(self.len)
    }
}

/// The [`Window`]s of an image, in order ([`Encoder::windows`]).
#[derive(Clone, Debug)]
pub struct Windows<'a> {
    mapped: &'a [(u64, u64)],
    cursor: usize,
    size: u64,
    window: u64,
    block: u64,
    next: u64,
}

impl Iterator for Windows<'_> {
    type Item = Window;

    fn next(&mut self) -> Option<Window> {
        if self.next >= self.size {
            return None;
        }
        let offset = self.next;
        let len = self.window.min(self.size.saturating_sub(offset));
        let end = offset.saturating_add(len);
        self.next = end;
        let mut w = Window {
            offset,
            len,
            runs: Vec::new(),
            mapped_bytes: 0,
        };
        while let Some(&(s, e)) = self.mapped.get(self.cursor) {
            if s >= end {
                break;
            }
            if e > offset {
                let (cs, ce) = (s.max(offset), e.min(end));
                w.mapped_bytes = w.mapped_bytes.saturating_add(ce.saturating_sub(cs));
                let rs = round_down(cs, self.block).max(offset);
                let re = round_up(ce, self.block).min(end);
                match w.runs.last_mut() {
                    Some(last) if rs <= last.1 => last.1 = last.1.max(re),
                    _ => w.runs.push((rs, re)),
                }
            }
            if e > end {
                break;
            }
            self.cursor = self.cursor.saturating_add(1);
        }
        Some(w)
    }
}

fn round_down(v: u64, to: u64) -> u64 {
    v.checked_rem(to).map_or(v, |r| v.saturating_sub(r))
}

fn round_up(v: u64, to: u64) -> u64 {
    match v.checked_rem(to) {
        Some(0) | None => v,
        Some(r) => v.saturating_add(to.saturating_sub(r)),
    }
}

/// True when every byte of `data` is zero.
#[cfg_attr(
    not(any(feature = "zstd", feature = "xz")),
    expect(dead_code, reason = "used by the compressors")
)]
pub(crate) fn is_zero(data: &[u8]) -> bool {
    data.chunks(4096)
        .all(|c| c.iter().fold(0u8, |acc, &b| acc | b) == 0)
}

fn len_u64(data: &[u8]) -> u64 {
    u64::try_from(data.len()).unwrap_or(u64::MAX)
}

/// One window encoded by a [`Packer`], ready for [`Encoder::add`]: the bytes to append and
/// what the container's header or index must say of them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Packed {
    bytes: Vec<u8>,
    unit: Unit,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(
    not(all(feature = "zstd", feature = "xz")),
    expect(dead_code, reason = "made by the compressors")
)]
enum Unit {
    Simg(simg::Counts),
    Zstd {
        decompressed: u32,
        checksum: u32,
        zero: bool,
    },
    Xz {
        unpadded: u64,
        uncompressed: u64,
        zero: bool,
    },
}

impl Packed {
    /// The bytes to append to the output for this window.
    #[must_use]
    pub fn bytes(&self) -> &[u8] {
        &self.bytes
    }
}

/// Turns windows into [`Packed`] units: Android sparse chunks, a zstd frame, an xz block.
/// Independent of every other window, so a host can run one per thread; the result does not
/// depend on which packer made it.
#[derive(Debug)]
pub struct Packer {
    kind: PackerKind,
}

#[derive(Debug)]
enum PackerKind {
    Simg {
        block: u64,
    },
    #[cfg(any(feature = "zstd", feature = "xz"))]
    Codec(Codec),
}

/// A compressor, and the all-zero units it made, by window length (the last window may be
/// shorter than the others).
#[cfg(any(feature = "zstd", feature = "xz"))]
struct Codec {
    kind: CodecKind,
    zeros: Vec<(u64, Packed)>,
}

#[cfg(any(feature = "zstd", feature = "xz"))]
enum CodecKind {
    #[cfg(feature = "zstd")]
    Zstd(zstd::Compressor),
    #[cfg(feature = "xz")]
    Xz(xz::Lzma2),
}

#[cfg(any(feature = "zstd", feature = "xz"))]
impl core::fmt::Debug for Codec {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(match self.kind {
            #[cfg(feature = "zstd")]
            CodecKind::Zstd(_) => "Codec(zstd)",
            #[cfg(feature = "xz")]
            CodecKind::Xz(_) => "Codec(xz)",
        })
    }
}

#[cfg(any(feature = "zstd", feature = "xz"))]
impl Codec {
    fn pack(&mut self, w: &Window, data: &[u8]) -> Result<Packed, EncodeError> {
        if !w.is_unmapped() && !is_zero(data) {
            return self.compress(data, false);
        }
        if let Some((_, p)) = self.zeros.iter().find(|(l, _)| *l == w.len) {
            return Ok(p.clone());
        }
        let p = match &self.kind {
            #[cfg(feature = "zstd")]
            CodecKind::Zstd(_) => zstd::zero_packed(w.len)?,
            #[cfg(feature = "xz")]
            CodecKind::Xz(_) => {
                // An unmapped window's `data` is not read: only a mapped one is known zero.
                let zeros;
                let buf = if !w.is_unmapped() {
                    data
                } else {
                    zeros = vec![0u8; usize::try_from(w.len).unwrap_or(0)];
                    &zeros
                };
                self.compress(buf, true)?
            }
        };
        self.zeros.push((w.len, p.clone()));
        Ok(p)
    }

    fn compress(&mut self, data: &[u8], zero: bool) -> Result<Packed, EncodeError> {
        match &mut self.kind {
            #[cfg(feature = "zstd")]
            CodecKind::Zstd(c) => c.pack(data, zero),
            #[cfg(feature = "xz")]
            CodecKind::Xz(c) => c.pack(data, zero),
        }
    }
}

impl Packer {
    /// Encodes window `w`, whose bytes are `data` (`w.len` bytes, zeros outside its runs;
    /// ignored, and may be empty, when the window is unmapped).
    pub fn pack(&mut self, w: &Window, data: &[u8]) -> Result<Packed, EncodeError> {
        if !w.is_unmapped() && len_u64(data) != w.len {
            return Err(EncodeError::OutOfOrder {
                expected: w.len,
                got: len_u64(data),
            });
        }
        match &mut self.kind {
            PackerKind::Simg { block } => {
                let mut bytes = Vec::new();
                let counts = simg::pack(w, data, *block, &mut bytes)?;
                Ok(Packed {
                    bytes,
                    unit: Unit::Simg(counts),
                })
            }
            #[cfg(any(feature = "zstd", feature = "xz"))]
            PackerKind::Codec(c) => c.pack(w, data),
        }
    }
}

/// The state of one encoding: checks that windows arrive in order and keeps what the
/// container's header (Android sparse), seek table (zstd) or index (xz) must say.
#[derive(Debug)]
pub struct Encoder {
    options: EncodeOptions,
    size: u64,
    block: u64,
    next: u64,
    summary: Summary,
    chunks: u32,
    seek_table: zstd::SeekTable,
    index: xz::Index,
}

/// What [`Encoder::finish`] returns: the bytes that end the file, the header to rewrite at
/// its start (Android sparse: the chunk count), and the summary.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Finish {
    /// Bytes to append last (zstd seek table, xz index and footer; empty for Android sparse).
    pub trailer: Vec<u8>,
    /// Bytes to write over the start of the file, the same length as [`Encoder::header`]
    /// (Android sparse), or empty.
    pub header: Vec<u8>,
    /// What was written.
    pub summary: Summary,
}

impl Encoder {
    /// An encoder for an image of `size` bytes. Fails when the options are wrong, the format
    /// cannot hold the image (an Android sparse image counts whole 4 KiB blocks in 32 bits)
    /// or this build has no compressor for it.
    pub fn new(size: u64, options: &EncodeOptions) -> Result<Encoder, EncodeError> {
        let format = options.format;
        let unsupported = |reason: String| EncodeError::Unsupported { format, reason };
        if !format.available() {
            return Err(unsupported(format!(
                "this blockwise was built without the {} compressor (cargo feature \"{}\")",
                if format == Format::Xz {
                    "liblzma"
                } else {
                    "libzstd"
                },
                if format == Format::Xz { "xz" } else { "zstd" }
            )));
        }
        let erase = options.erase_block_bytes;
        let sector = options.sector_bytes;
        if !sector.is_power_of_two() {
            return Err(EncodeError::InvalidOptions {
                what: format!("sector size {sector}: must be a power of two"),
            });
        }
        let block = SIMG_BLOCK_BYTES.max(sector);
        if erase == 0 || erase.checked_rem(block) != Some(0) {
            return Err(EncodeError::InvalidOptions {
                what: format!("erase block {erase}: must be a multiple of {block} bytes"),
            });
        }
        match (format.levels(), options.level) {
            (None, Some(l)) => {
                return Err(EncodeError::InvalidOptions {
                    what: format!(
                    "level {l}: {format} images are not compressed; a level applies to zstd and xz"
                ),
                })
            }
            (Some((range, _)), Some(l)) if !range.contains(&l) => {
                return Err(EncodeError::InvalidOptions {
                    what: format!(
                        "level {l}: {format} levels are {} to {}",
                        range.start(),
                        range.end()
                    ),
                })
            }
            _ => {}
        }
        match format {
            Format::AndroidSparse => simg::check_size(size, block)?,
            Format::SeekableZstd => zstd::check_size(size, erase)?,
            Format::Xz => {}
        }
        let mut summary = Summary::default();
        let header_len = match format {
            Format::AndroidSparse => simg::HEADER_BYTES,
            Format::SeekableZstd => 0,
            Format::Xz => xz::STREAM_HEADER_BYTES,
        };
        summary.output_bytes = header_len;
        Ok(Encoder {
            options: *options,
            size,
            block,
            next: 0,
            summary,
            chunks: 0,
            seek_table: zstd::SeekTable::default(),
            index: xz::Index::default(),
        })
    }

    /// The format.
    #[must_use]
    pub fn format(&self) -> Format {
        self.options.format
    }

    /// The Android sparse block (4096, or the sector when larger); also the granularity of
    /// [`Window::runs`].
    #[must_use]
    pub fn block_bytes(&self) -> u64 {
        self.block
    }

    /// The image's windows over its mapped ranges (`ImageMap::mapped_ranges`: sorted,
    /// merged), in the order [`Encoder::add`] wants them.
    #[must_use]
    pub fn windows<'a>(&self, mapped: &'a [(u64, u64)]) -> Windows<'a> {
        Windows {
            mapped,
            cursor: 0,
            size: self.size,
            window: self.options.erase_block_bytes,
            block: self.block,
            next: 0,
        }
    }

    /// A packer for this encoding (make one per thread).
    pub fn packer(&self) -> Result<Packer, EncodeError> {
        let kind = match self.options.format {
            Format::AndroidSparse => PackerKind::Simg { block: self.block },
            #[cfg(feature = "zstd")]
            Format::SeekableZstd => PackerKind::Codec(Codec {
                kind: CodecKind::Zstd(zstd::Compressor::new(self.options.level.unwrap_or(3))?),
                zeros: Vec::new(),
            }),
            #[cfg(feature = "xz")]
            Format::Xz => PackerKind::Codec(Codec {
                kind: CodecKind::Xz(xz::Lzma2::new(
                    u32::try_from(self.options.level.unwrap_or(6)).unwrap_or(6),
                    self.options.erase_block_bytes,
                )),
                zeros: Vec::new(),
            }),
            #[allow(unreachable_patterns, reason = "only without the compressor features")]
            other => {
                return Err(EncodeError::Unsupported {
                    format: other,
                    reason: "no compressor in this build".into(),
                })
            }
        };
        Ok(Packer { kind })
    }

    /// The bytes the file starts with (Android sparse: a header rewritten by
    /// [`Finish::header`]; xz: the stream header; zstd: nothing).
    #[must_use]
    pub fn header(&self) -> Vec<u8> {
        match self.options.format {
            Format::AndroidSparse => simg::header(self.block, self.size, 0)
                .unwrap_or_default()
                .to_vec(),
            Format::SeekableZstd => Vec::new(),
            Format::Xz => xz::stream_header().to_vec(),
        }
    }

    /// Records window `w`, packed as `p`; the caller appends `p.bytes()` to the output.
    /// Windows must come in order, each packed for this encoding.
    pub fn add(&mut self, w: &Window, p: &Packed) -> Result<(), EncodeError> {
        let out_of_order = EncodeError::OutOfOrder {
            expected: self.next,
            got: w.offset,
        };
        if w.offset != self.next || w.len == 0 || w.end() > self.size {
            return Err(out_of_order);
        }
        let bytes = len_u64(&p.bytes);
        let s = &mut self.summary;
        match (self.options.format, p.unit) {
            (Format::AndroidSparse, Unit::Simg(c)) => {
                if c.blocks() != w.len.checked_div(self.block).unwrap_or(0) {
                    return Err(out_of_order);
                }
                self.chunks =
                    self.chunks
                        .checked_add(c.chunks)
                        .ok_or_else(|| EncodeError::Unsupported {
                            format: Format::AndroidSparse,
                            reason: "more than 2^32 - 1 chunks".into(),
                        })?;
                s.units = s.units.saturating_add(u64::from(c.chunks));
                s.data_bytes = s.data_bytes.saturating_add(c.raw);
                s.fill_bytes = s.fill_bytes.saturating_add(c.fill);
                s.dont_care_bytes = s.dont_care_bytes.saturating_add(c.dont_care);
            }
            (
                Format::SeekableZstd,
                Unit::Zstd {
                    decompressed,
                    checksum,
                    zero,
                },
            ) => {
                if u64::from(decompressed) != w.len {
                    return Err(out_of_order);
                }
                self.seek_table.push(bytes, decompressed, checksum)?;
                s.units = s.units.saturating_add(1);
                count_frame(s, w.len, zero);
            }
            (
                Format::Xz,
                Unit::Xz {
                    unpadded,
                    uncompressed,
                    zero,
                },
            ) => {
                if uncompressed != w.len {
                    return Err(out_of_order);
                }
                self.index.push(unpadded, uncompressed);
                s.units = s.units.saturating_add(1);
                count_frame(s, w.len, zero);
            }
            _ => return Err(out_of_order),
        }
        s.output_bytes = s.output_bytes.saturating_add(bytes);
        self.next = w.end();
        Ok(())
    }

    /// Ends the encoding once every window was added.
    pub fn finish(self) -> Result<Finish, EncodeError> {
        if self.next != self.size {
            return Err(EncodeError::OutOfOrder {
                expected: self.next,
                got: self.size,
            });
        }
        let mut summary = self.summary;
        let (trailer, header) = match self.options.format {
            Format::AndroidSparse => (
                Vec::new(),
                simg::header(self.block, self.size, self.chunks)?.to_vec(),
            ),
            Format::SeekableZstd => (self.seek_table.finish()?, Vec::new()),
            Format::Xz => (self.index.finish()?, Vec::new()),
        };
        summary.output_bytes = summary.output_bytes.saturating_add(len_u64(&trailer));
        Ok(Finish {
            trailer,
            header,
            summary,
        })
    }
}

fn count_frame(s: &mut Summary, len: u64, zero: bool) {
    if zero {
        s.fill_bytes = s.fill_bytes.saturating_add(len);
    } else {
        s.data_bytes = s.data_bytes.saturating_add(len);
    }
}

/// Encodes `map` (content read through `content`) into `out` on the calling thread: the
/// single-threaded form of what a host does with [`Encoder`] and one [`Packer`] per thread,
/// and byte for byte the same result.
pub fn encode_map<O: Output + ?Sized>(
    map: &ImageMap,
    content: &dyn ContentSource,
    options: &EncodeOptions,
    out: &mut O,
) -> Result<Summary, WriteError<O::Error>> {
    let mut enc = Encoder::new(map.size(), options)?;
    let mut packer = enc.packer()?;
    out.append(&enc.header()).map_err(WriteError::Output)?;
    let mapped = map.mapped_ranges();
    let reader = map.reader(content);
    let mut buf = Vec::new();
    for w in enc.windows(&mapped) {
        if !w.is_unmapped() {
            read_window(&reader, &w, &mut buf).map_err(WriteError::Read)?;
        }
        let p = packer.pack(&w, &buf)?;
        enc.add(&w, &p)?;
        out.append(p.bytes()).map_err(WriteError::Output)?;
    }
    let fin = enc.finish()?;
    out.append(&fin.trailer).map_err(WriteError::Output)?;
    if !fin.header.is_empty() {
        out.rewrite_start(&fin.header).map_err(WriteError::Output)?;
    }
    Ok(fin.summary)
}

/// Reads window `w` of `source` into `buf` (resized to `w.len`): its runs, zeros elsewhere.
pub fn read_window<S: BlockSource + ?Sized>(
    source: &S,
    w: &Window,
    buf: &mut Vec<u8>,
) -> Result<(), S::Error> {
    buf.clear();
    buf.resize(usize::try_from(w.len).unwrap_or(0), 0);
    for &(s, e) in &w.runs {
        let from = usize::try_from(s.saturating_sub(w.offset)).unwrap_or(usize::MAX);
        let to = usize::try_from(e.saturating_sub(w.offset)).unwrap_or(usize::MAX);
        if let Some(dst) = buf.get_mut(from..to) {
            source.read_at(s, dst)?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests;
