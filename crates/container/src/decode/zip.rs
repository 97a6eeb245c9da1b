//! Zip archives (PKWARE APPNOTE 6.3): the central directory read from the end of the file
//! (zip64 included), one entry chosen as the image, its data located through its local
//! header. Stored entries are random access; deflate, bzip2, zstd and xz entries stream.
//!
//! Which entry is the image: directories and entries under 1 MiB are not candidates, nor are
//! names that end in a text, checksum, signature or block-map extension (`.txt`, `.md`,
//! `.sha256`, `.sig`, `.bmap`, ...). One candidate is decoded; none or several are refused,
//! naming them.

use blockwise_geometry::BlockSource;

use super::input::{Input, Segment};
use super::{Codec, Frame, Piece};
use crate::Error;

const FORMAT: &str = "zip";
const EOCD: u32 = 0x0605_4b50;
const ZIP64_LOCATOR: u32 = 0x0706_4b50;
const ZIP64_EOCD: u32 = 0x0606_4b50;
const CENTRAL: u32 = 0x0201_4b50;
const LOCAL: u32 = 0x0403_4b50;
/// Largest central directory read.
pub const MAX_DIRECTORY: u64 = 16 << 20;
/// An entry smaller than this is never the image.
pub const MIN_IMAGE: u64 = 1 << 20;
/// Names that are never the image.
const NOT_IMAGES: &[&str] = &[
    ".txt", ".md", ".rst", ".html", ".htm", ".pdf", ".json", ".xml", ".yaml", ".yml", ".toml",
    ".sha1", ".sha256", ".sha512", ".md5", ".sum", ".sig", ".asc", ".gpg", ".minisig", ".bmap",
    ".log", ".csv", ".license", ".cfg", ".ini", ".sh", ".py",
];

/// One entry of the central directory.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Entry {
    /// The name as stored (lossily UTF-8).
    pub name: String,
    /// Compression method (0 stored, 8 deflate, 12 bzip2, 93 zstd, 95 xz, ...).
    pub method: u16,
    /// General-purpose flags (bit 0: encrypted).
    pub flags: u16,
    /// Uncompressed size.
    pub size: u64,
    /// Compressed size.
    pub compressed: u64,
    /// Where its local header starts.
    pub local_header: u64,
    /// CRC-32 of the uncompressed data.
    pub crc32: u32,
}

impl Entry {
    /// A directory entry (name ends in `/`).
    #[must_use]
    pub fn is_dir(&self) -> bool {
        self.name.ends_with('/')
    }

    /// Whether this entry could be the image: a file of at least 1 MiB (`MIN_IMAGE`) whose
    /// name is not a text, checksum, signature or block map.
    #[must_use]
    pub fn could_be_image(&self) -> bool {
        let lower = self.name.to_ascii_lowercase();
        !self.is_dir()
            && self.size >= MIN_IMAGE
            && !NOT_IMAGES.iter().any(|ext| lower.ends_with(ext))
    }
}

/// A zip's central directory.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ZipDirectory {
    /// Entries in directory order.
    pub entries: Vec<Entry>,
}

fn le16(b: &[u8], o: usize) -> u16 {
    u16::from_le_bytes(
        b.get(o..o.saturating_add(2))
            .and_then(|s| s.try_into().ok())
            .unwrap_or([0; 2]),
    )
}

fn le32(b: &[u8], o: usize) -> u32 {
    u32::from_le_bytes(
        b.get(o..o.saturating_add(4))
            .and_then(|s| s.try_into().ok())
            .unwrap_or([0; 4]),
    )
}

fn le64(b: &[u8], o: usize) -> u64 {
    u64::from_le_bytes(
        b.get(o..o.saturating_add(8))
            .and_then(|s| s.try_into().ok())
            .unwrap_or([0; 8]),
    )
}

fn corrupt(r: impl Into<String>) -> Error {
    Error::corrupt(FORMAT, r)
}

/// Escapes a name for a message: control characters and quotes as `\xNN`.
pub(crate) fn escape(name: &str) -> String {
    crate::escape(name)
}

impl ZipDirectory {
    /// Reads the central directory of the zip in `input`.
    pub(crate) fn read<I: BlockSource>(input: &Input<I>) -> Result<Self, Error> {
        let len = input.len();
        // The end record is 22 bytes plus a comment of up to 65535 bytes.
        let tail_len = len.min(22 + 65_535);
        let tail_at = len.saturating_sub(tail_len);
        let tail = input.read_clamped(tail_at, usize::try_from(tail_len).unwrap_or(0))?;
        let eocd = (0..tail.len().saturating_sub(21))
            .rev()
            .find(|&i| le32(&tail, i) == EOCD)
            .ok_or_else(|| {
                corrupt("no end of central directory record (the file is cut short, or not a zip)")
            })?;
        let rec = tail.get(eocd..).unwrap_or_default();
        let eocd_at = tail_at.saturating_add(u64::try_from(eocd).unwrap_or(0));
        if le16(rec, 4) != 0 || le16(rec, 6) != 0 {
            return Err(Error::unsupported(
                FORMAT,
                "a multi-part (split) archive: join the parts first (zip -s 0 ...)",
            ));
        }
        let mut count = u64::from(le16(rec, 10));
        let mut cd_size = u64::from(le32(rec, 12));
        let mut cd_at = u64::from(le32(rec, 16));
        if count == 0xffff || cd_size == 0xffff_ffff || cd_at == 0xffff_ffff {
            let loc_at = eocd_at
                .checked_sub(20)
                .ok_or_else(|| corrupt("zip64 locator missing"))?;
            let loc: [u8; 20] = input.array(loc_at, FORMAT, "zip64 locator")?;
            if le32(&loc, 0) != ZIP64_LOCATOR {
                return Err(corrupt("zip64 locator missing"));
            }
            let z_at = le64(&loc, 8);
            let z: [u8; 56] = input.array(z_at, FORMAT, "zip64 end record")?;
            if le32(&z, 0) != ZIP64_EOCD {
                return Err(corrupt("zip64 end of central directory record missing"));
            }
            count = le64(&z, 32);
            cd_size = le64(&z, 40);
            cd_at = le64(&z, 48);
        }
        if cd_size > MAX_DIRECTORY {
            return Err(Error::Limit {
                what: format!(
                    "{FORMAT}: a central directory of {cd_size} bytes; blockwise reads at most {MAX_DIRECTORY}"
                ),
            });
        }
        if cd_at.checked_add(cd_size).is_none_or(|e| e > len) {
            return Err(corrupt("the central directory lies outside the file"));
        }
        // Each entry takes at least 46 bytes.
        if count > cd_size / 46 {
            return Err(corrupt(format!(
                "{count} entries cannot fit in a {cd_size}-byte central directory"
            )));
        }
        let cd = input.read_clamped(cd_at, usize::try_from(cd_size).unwrap_or(0))?;
        let mut entries = Vec::with_capacity(usize::try_from(count).unwrap_or(0));
        let mut at = 0usize;
        for i in 0..count {
            let e = cd.get(at..).unwrap_or_default();
            if e.len() < 46 || le32(e, 0) != CENTRAL {
                return Err(corrupt(format!("central directory entry {i} is damaged")));
            }
            let name_len = usize::from(le16(e, 28));
            let extra_len = usize::from(le16(e, 30));
            let comment_len = usize::from(le16(e, 32));
            let name_bytes = e
                .get(46..46usize.saturating_add(name_len))
                .ok_or_else(|| corrupt(format!("central directory entry {i} is cut short")))?;
            let extra_at = 46usize.saturating_add(name_len);
            let extra = e
                .get(extra_at..extra_at.saturating_add(extra_len))
                .ok_or_else(|| corrupt(format!("central directory entry {i} is cut short")))?;
            let mut size = u64::from(le32(e, 24));
            let mut compressed = u64::from(le32(e, 20));
            let mut local_header = u64::from(le32(e, 42));
            // The zip64 extra field holds the fields whose 32-bit value is all ones, in order.
            let mut x = 0usize;
            while x.saturating_add(4) <= extra.len() {
                let id = le16(extra, x);
                let n = usize::from(le16(extra, x.saturating_add(2)));
                let body = extra
                    .get(x.saturating_add(4)..x.saturating_add(4).saturating_add(n))
                    .unwrap_or_default();
                if id == 1 {
                    let mut f = 0usize;
                    let mut next = |v: &mut u64| {
                        if *v == 0xffff_ffff {
                            if body.len() >= f.saturating_add(8) {
                                *v = le64(body, f);
                            }
                            f = f.saturating_add(8);
                        }
                    };
                    next(&mut size);
                    next(&mut compressed);
                    next(&mut local_header);
                }
                x = x.saturating_add(4).saturating_add(n);
            }
            entries.push(Entry {
                name: String::from_utf8_lossy(name_bytes).into_owned(),
                method: le16(e, 10),
                flags: le16(e, 8),
                size,
                compressed,
                local_header,
                crc32: le32(e, 16),
            });
            at = at
                .saturating_add(46)
                .saturating_add(name_len)
                .saturating_add(extra_len)
                .saturating_add(comment_len);
        }
        Ok(ZipDirectory { entries })
    }

    /// The one entry that is the image, or why there is none.
    pub fn image_entry(&self) -> Result<&Entry, Error> {
        let images: Vec<&Entry> = self.entries.iter().filter(|e| e.could_be_image()).collect();
        let list = |es: &[&Entry]| {
            let mut names: Vec<String> = es
                .iter()
                .take(5)
                .map(|e| format!("\"{}\"", escape(&e.name)))
                .collect();
            if es.len() > 5 {
                names.push(format!("and {} more", es.len().saturating_sub(5)));
            }
            names.join(", ")
        };
        match images.as_slice() {
            [one] => Ok(one),
            [] => {
                let all: Vec<&Entry> = self.entries.iter().collect();
                Err(Error::unsupported(
                    FORMAT,
                    if all.is_empty() {
                        "the archive is empty".to_string()
                    } else {
                        format!(
                            "no entry of the archive looks like a disk image (at least 1 MiB, not a text or checksum): {}",
                            list(&all)
                        )
                    },
                ))
            }
            several => Err(Error::unsupported(
                FORMAT,
                format!(
                    "the archive holds {} files that could be the image: {}; unpack it (unzip) and write the one you mean",
                    several.len(),
                    list(several)
                ),
            )),
        }
    }
}

/// The frame of `entry`'s data, and whether it is random access (stored).
pub(crate) fn entry_frame<I: BlockSource>(
    input: &Input<I>,
    entry: &Entry,
) -> Result<(Frame, bool), Error> {
    let name = escape(&entry.name);
    if entry.flags & 1 != 0 {
        return Err(Error::unsupported(
            FORMAT,
            format!("\"{name}\" is encrypted: unpack it with its password first"),
        ));
    }
    let local: [u8; 30] = input.array(entry.local_header, FORMAT, "local header")?;
    if le32(&local, 0) != LOCAL {
        return Err(corrupt(format!(
            "the local header of \"{name}\" is missing"
        )));
    }
    let data = entry
        .local_header
        .checked_add(30)
        .and_then(|d| d.checked_add(u64::from(le16(&local, 26))))
        .and_then(|d| d.checked_add(u64::from(le16(&local, 28))))
        .ok_or_else(|| corrupt("offset overflows"))?;
    if data
        .checked_add(entry.compressed)
        .is_none_or(|e| e > input.len())
    {
        return Err(corrupt(format!(
            "the data of \"{name}\" runs past the end of the file"
        )));
    }
    let coded = |codec| Piece::Coded {
        segs: vec![Segment::Range {
            at: data,
            len: entry.compressed,
        }],
        codec,
    };
    let (piece, seekable) = match entry.method {
        0 => {
            if entry.compressed != entry.size {
                return Err(corrupt(format!(
                    "stored entry \"{name}\" has {} bytes of data for {} bytes",
                    entry.compressed, entry.size
                )));
            }
            (Piece::Raw { at: data }, true)
        }
        8 => (coded(Codec::Deflate), false),
        12 => (coded(Codec::Bzip2Single), false),
        93 => (coded(Codec::Zstd), false),
        95 => (coded(Codec::Xz), false),
        m => {
            let what = match m {
                9 => "deflate64",
                14 => "lzma",
                98 => "ppmd",
                99 => "AES-encrypted",
                _ => "an unknown method",
            };
            return Err(Error::unsupported(
                FORMAT,
                format!("\"{name}\" is compressed with {what} (method {m}), which blockwise does not decode: unpack it (unzip, 7z x) first"),
            ));
        }
    };
    Ok((
        Frame {
            start: 0,
            len: entry.size,
            piece,
        },
        seekable,
    ))
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
pub(crate) mod tests {
    use super::*;

    /// A zip of `(name, method, data)` entries (stored or deflated), as `zip` writes them.
    pub(crate) fn build(files: &[(&str, u16, &[u8])]) -> Vec<u8> {
        use std::io::Write;
        let mut out = Vec::new();
        let mut cd = Vec::new();
        for (name, method, data) in files {
            let packed = if *method == 8 {
                let mut e =
                    flate2::write::DeflateEncoder::new(Vec::new(), flate2::Compression::fast());
                e.write_all(data).unwrap();
                e.finish().unwrap()
            } else {
                data.to_vec()
            };
            let crc = crc32fast::hash(data);
            let off = out.len() as u32;
            out.extend(LOCAL.to_le_bytes());
            out.extend([20, 0, 0, 0]);
            out.extend(method.to_le_bytes());
            out.extend([0; 4]);
            out.extend(crc.to_le_bytes());
            out.extend((packed.len() as u32).to_le_bytes());
            out.extend((data.len() as u32).to_le_bytes());
            out.extend((name.len() as u16).to_le_bytes());
            out.extend(0u16.to_le_bytes());
            out.extend(name.as_bytes());
            out.extend(&packed);
            cd.extend(CENTRAL.to_le_bytes());
            cd.extend([20, 3, 20, 0, 0, 0]);
            cd.extend(method.to_le_bytes());
            cd.extend([0; 4]);
            cd.extend(crc.to_le_bytes());
            cd.extend((packed.len() as u32).to_le_bytes());
            cd.extend((data.len() as u32).to_le_bytes());
            cd.extend((name.len() as u16).to_le_bytes());
            cd.extend([0; 12]);
            cd.extend(off.to_le_bytes());
            cd.extend(name.as_bytes());
        }
        let cd_at = out.len() as u32;
        out.extend(&cd);
        out.extend(EOCD.to_le_bytes());
        out.extend([0; 4]);
        out.extend((files.len() as u16).to_le_bytes());
        out.extend((files.len() as u16).to_le_bytes());
        out.extend((cd.len() as u32).to_le_bytes());
        out.extend(cd_at.to_le_bytes());
        out.extend([0, 0]);
        out
    }

    #[test]
    fn one_image_among_readmes_is_chosen() {
        let img = vec![9u8; 2 << 20];
        let z = build(&[
            ("docs/", 0, b""),
            ("README.txt", 8, b"hello"),
            ("os.img", 8, &img),
            ("os.img.bmap", 8, &[b'x'; 3 << 20]),
        ]);
        let input = Input::new(z);
        let dir = ZipDirectory::read(&input).unwrap();
        assert_eq!(dir.entries.len(), 4);
        let e = dir.image_entry().unwrap();
        assert_eq!(e.name, "os.img");
        let (frame, seekable) = entry_frame(&input, e).unwrap();
        assert!(!seekable);
        assert_eq!(frame.len, 2 << 20);
    }

    #[test]
    fn several_images_are_refused_by_name() {
        let img = vec![9u8; 2 << 20];
        let z = build(&[("a.img", 0, &img), ("b\x1b[31m.img", 0, &img)]);
        let dir = ZipDirectory::read(&Input::new(z)).unwrap();
        let e = dir.image_entry().unwrap_err().to_string();
        assert!(e.contains("2 files") && e.contains("\"a.img\""), "{e}");
        assert!(e.contains("b\\x1b[31m.img") && !e.contains('\x1b'), "{e}");
        let none = build(&[("README", 0, b"hi")]);
        let e = ZipDirectory::read(&Input::new(none))
            .unwrap()
            .image_entry()
            .unwrap_err()
            .to_string();
        assert!(e.contains("no entry"), "{e}");
    }

    #[test]
    fn hostile_directories_are_refused() {
        let z = build(&[("a.img", 0, &[1u8; 100])]);
        let n = z.len();
        let mut many = z.clone();
        many[n - 12..n - 10].copy_from_slice(&0xfffeu16.to_le_bytes());
        assert!(ZipDirectory::read(&Input::new(many)).is_err());
        let mut far = z.clone();
        far[n - 6..n - 2].copy_from_slice(&0x7fff_0000u32.to_le_bytes());
        assert!(ZipDirectory::read(&Input::new(far)).is_err());
        assert!(ZipDirectory::read(&Input::new(z[..n - 1].to_vec())).is_err());
    }
}
