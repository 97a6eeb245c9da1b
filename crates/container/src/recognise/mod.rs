//! What an input is, by its bytes alone (never by its name).
//!
//! [`recognise`] reads the first 64 KiB (and a little more: the probes of
//! [`blockwise_verify::magic::PROBES`]) and the last 512 bytes of a source and returns a
//! [`Format`]:
//!
//! - an [`ImageKind`]: a GPT, an MBR (the `55 AA` signature), or a filesystem
//!   `verify` knows by its magic — written as it is;
//! - a [`ContainerKind`] blockwise decodes: Android sparse, xz, gzip, zstd (a skippable frame
//!   may come first), bzip2, lz4 (frames or the legacy format), zip;
//! - a [`Refusal`]: formats that hold an image but cannot be written as they are (tar, qcow2,
//!   VMDK, VHD/VHDX, VDI, QED, Parallels, DMG, 7z, RAR, cpio), each with a one-line hint;
//! - [`Unknown`]: none of these. Callers refuse it unless the user says `--raw` (firmware
//!   blobs are legitimate; a JPEG is not an image to write).
//!
//! Containers are checked before images: their magic numbers are specific, while `55 AA` at
//! byte 510 is two bytes anywhere in a file. Refused formats whose mark is at the end (a
//! fixed VHD is a raw image with a 512-byte footer) are checked before images too.

use blockwise_geometry::BlockSource;
use blockwise_verify::magic::{classify, Content};

/// Bytes read from the start: covers the farthest probe of `verify`'s magic table (btrfs
/// at 0x10040).
pub const HEAD: usize = 0x10050;
/// Bytes read from the end (VHD footer, DMG trailer).
pub const TAIL: usize = 512;

/// What an input is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Format {
    /// A disk or filesystem image, written as it is.
    Image(ImageKind),
    /// A container blockwise decodes.
    Container(ContainerKind),
    /// A format blockwise names and refuses, with what to do instead.
    Refused(Refusal),
    /// Nothing blockwise knows: refused unless `--raw`.
    Unknown(Unknown),
}

/// A disk image recognised by its table or filesystem.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ImageKind {
    /// A GPT header at LBA 1 (512- or 4096-byte sectors).
    Gpt,
    /// The MBR boot signature `55 AA` at byte 510.
    Mbr,
    /// A filesystem at byte 0 (`fat`, `ext4`, `squashfs`, `iso9660`, ...).
    Filesystem(&'static str),
}

impl ImageKind {
    /// The name used in messages.
    #[must_use]
    pub fn name(self) -> &'static str {
        match self {
            ImageKind::Gpt => "GPT disk image",
            ImageKind::Mbr => "MBR disk image",
            ImageKind::Filesystem(f) => f,
        }
    }
}

/// A container blockwise decodes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ContainerKind {
    /// Android sparse (libsparse, `img2simg`, fastboot): magic `3A FF 26 ED`.
    AndroidSparse,
    /// xz: `FD 37 7A 58 5A 00`.
    Xz,
    /// gzip: `1F 8B 08`.
    Gzip,
    /// zstd: `28 B5 2F FD` (after any skippable frames).
    Zstd,
    /// bzip2: `BZh1`..`BZh9`.
    Bzip2,
    /// lz4 frame format: `04 22 4D 18`.
    Lz4,
    /// lz4 legacy format (`lz4 -l`, kernel initramfs): `02 21 4C 18`.
    Lz4Legacy,
    /// zip: `PK 03 04`.
    Zip,
}

impl ContainerKind {
    /// The name used in messages.
    #[must_use]
    pub fn name(self) -> &'static str {
        match self {
            ContainerKind::AndroidSparse => "Android sparse",
            ContainerKind::Xz => "xz",
            ContainerKind::Gzip => "gzip",
            ContainerKind::Zstd => "zstd",
            ContainerKind::Bzip2 => "bzip2",
            ContainerKind::Lz4 => "lz4",
            ContainerKind::Lz4Legacy => "lz4 (legacy format)",
            ContainerKind::Zip => "zip",
        }
    }

    /// The name in JSON (`container.kind`).
    #[must_use]
    pub fn json_name(self) -> &'static str {
        match self {
            ContainerKind::AndroidSparse => "android-sparse",
            ContainerKind::Xz => "xz",
            ContainerKind::Gzip => "gzip",
            ContainerKind::Zstd => "zstd",
            ContainerKind::Bzip2 => "bzip2",
            ContainerKind::Lz4 | ContainerKind::Lz4Legacy => "lz4",
            ContainerKind::Zip => "zip",
        }
    }

    /// How to unpack it by hand, for hints.
    #[must_use]
    pub fn unpack(self) -> &'static str {
        match self {
            ContainerKind::AndroidSparse => "simg2img IN OUT.img",
            ContainerKind::Xz => "xz -dk IN",
            ContainerKind::Gzip => "gzip -dk IN",
            ContainerKind::Zstd => "zstd -d IN",
            ContainerKind::Bzip2 => "bzip2 -dk IN",
            ContainerKind::Lz4 | ContainerKind::Lz4Legacy => "lz4 -d IN",
            ContainerKind::Zip => "unzip IN",
        }
    }
}

/// A format named and refused.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{what}: {hint}")]
pub struct Refusal {
    /// What it is (`a qcow2 disk image (QEMU)`, `a tar archive inside xz`).
    pub what: String,
    /// What to do instead, in one line.
    pub hint: String,
    /// Short name for JSON and tests (`qcow2`, `tar`, `vmdk`, ...).
    pub kind: &'static str,
}

/// Bytes that are neither an image nor a container, described.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Unknown {
    /// What they look like (`a JPEG picture`, `text`, `all zeros`, `unrecognised bytes
    /// (starts FF 00 ...)`).
    pub looks_like: String,
}

const CONVERT: &str =
    "blockwise writes raw disk images; convert it first: qemu-img convert -O raw IN OUT.img";

fn refusal(kind: &'static str, what: &str, hint: &str) -> Format {
    Format::Refused(Refusal {
        what: what.to_string(),
        hint: hint.to_string(),
        kind,
    })
}

fn has(b: &[u8], at: usize, magic: &[u8]) -> bool {
    at.checked_add(magic.len())
        .and_then(|end| b.get(at..end))
        .is_some_and(|s| s == magic)
}

fn le32(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(
        b.get(at..at.saturating_add(4))
            .and_then(|s| s.try_into().ok())
            .unwrap_or([0; 4]),
    )
}

/// Reads up to `len` bytes at `off`, fewer at the end of `src`.
fn read_clamped<S: BlockSource + ?Sized>(
    src: &S,
    off: u64,
    len: usize,
) -> Result<Vec<u8>, S::Error> {
    let n = usize::try_from(src.len().saturating_sub(off))
        .unwrap_or(usize::MAX)
        .min(len);
    let mut buf = vec![0u8; n];
    if n > 0 {
        src.read_at(off, &mut buf)?;
    }
    Ok(buf)
}

/// Recognises `src` by its first [`HEAD`] and last [`TAIL`] bytes (and, for a zstd or lz4
/// file that starts with skippable frames, the first bytes after them).
pub fn recognise<S: BlockSource + ?Sized>(src: &S) -> Result<Format, S::Error> {
    let head = read_clamped(src, 0, HEAD)?;
    let len = src.len();
    let tail = read_clamped(
        src,
        len.saturating_sub(u64::try_from(TAIL).unwrap_or(0)),
        TAIL,
    )?;
    // Skippable frames (zstd and lz4 share them): the magic after them decides.
    let mut at = 0u64;
    let mut first = head.get(..4).map(<[u8]>::to_vec).unwrap_or_default();
    for _ in 0..16 {
        let m = le32(&first, 0);
        if first.len() < 4 || m & 0xFFFF_FFF0 != 0x184D_2A50 {
            break;
        }
        let size = read_clamped(src, at.saturating_add(4), 4)?;
        at = at
            .saturating_add(8)
            .saturating_add(u64::from(le32(&size, 0)));
        first = read_clamped(src, at, 4)?;
        if first.len() < 4 {
            // Nothing but skippable frames: call it zstd, whose decoder says what is wrong.
            return Ok(Format::Container(ContainerKind::Zstd));
        }
    }
    if at > 0 {
        if has(&first, 0, &[0x28, 0xb5, 0x2f, 0xfd]) {
            return Ok(Format::Container(ContainerKind::Zstd));
        }
        if has(&first, 0, &[0x04, 0x22, 0x4d, 0x18]) {
            return Ok(Format::Container(ContainerKind::Lz4));
        }
        return Ok(Format::Container(ContainerKind::Zstd));
    }
    Ok(recognise_bytes(&head, &tail, len))
}

/// [`recognise`] on bytes already read: `head` from byte 0 (up to [`HEAD`] bytes), `tail`
/// the last bytes (up to [`TAIL`]), `len` the whole size.
#[must_use]
pub fn recognise_bytes(head: &[u8], tail: &[u8], len: u64) -> Format {
    if let Some(c) = container(head) {
        return Format::Container(c);
    }
    if let Some(r) = refused(head, tail, len) {
        return r;
    }
    if let Some(i) = image(head) {
        return Format::Image(i);
    }
    Format::Unknown(Unknown {
        looks_like: describe(head),
    })
}

/// The container whose magic number starts `head`.
#[must_use]
pub fn container(head: &[u8]) -> Option<ContainerKind> {
    let b = |i: usize| head.get(i).copied().unwrap_or(0);
    if le32(head, 0) == crate::decode::SPARSE_MAGIC && head.len() >= 12 {
        return Some(ContainerKind::AndroidSparse);
    }
    if has(head, 0, &[0xfd, b'7', b'z', b'X', b'Z', 0]) {
        return Some(ContainerKind::Xz);
    }
    if has(head, 0, &[0x1f, 0x8b, 0x08]) && b(3) & 0xe0 == 0 {
        return Some(ContainerKind::Gzip);
    }
    if has(head, 0, &[0x28, 0xb5, 0x2f, 0xfd]) {
        return Some(ContainerKind::Zstd);
    }
    if has(head, 0, b"BZh")
        && (b'1'..=b'9').contains(&b(3))
        && (has(head, 4, &[0x31, 0x41, 0x59, 0x26, 0x53, 0x59])
            || has(head, 4, &[0x17, 0x72, 0x45, 0x38, 0x50, 0x90]))
    {
        return Some(ContainerKind::Bzip2);
    }
    if has(head, 0, &[0x04, 0x22, 0x4d, 0x18]) {
        return Some(ContainerKind::Lz4);
    }
    if has(head, 0, &[0x02, 0x21, 0x4c, 0x18]) {
        return Some(ContainerKind::Lz4Legacy);
    }
    if has(head, 0, b"PK\x03\x04") || has(head, 0, b"PK\x05\x06") || has(head, 0, b"PK\x07\x08") {
        return Some(ContainerKind::Zip);
    }
    None
}

/// A tar header: `ustar` at 257, or (old V7 tar) a header whose checksum field matches.
fn is_tar(h: &[u8]) -> bool {
    if has(h, 257, b"ustar") {
        return true;
    }
    let Some(block) = h.get(..512) else {
        return false;
    };
    // The name is printable and NUL-padded; the checksum is octal digits then NUL/space.
    let name = block.get(..100).unwrap_or_default();
    if name.first().is_none_or(|&c| c == 0) {
        return false;
    }
    let name_end = name.iter().position(|&c| c == 0).unwrap_or(100);
    if name
        .get(..name_end)
        .is_none_or(|n| n.iter().any(|&c| !(0x20..0x7f).contains(&c)))
    {
        return false;
    }
    let field = block.get(148..156).unwrap_or_default();
    let digits: Vec<u8> = field
        .iter()
        .copied()
        .skip_while(|&c| c == b' ')
        .take_while(u8::is_ascii_digit)
        .collect();
    if digits.is_empty() || digits.iter().any(|&d| d > b'7') {
        return false;
    }
    let stored = digits.iter().fold(0u32, |acc, &d| {
        acc.saturating_mul(8)
            .saturating_add(u32::from(d.saturating_sub(b'0')))
    });
    let sum = block.iter().enumerate().fold(0u32, |acc, (i, &c)| {
        acc.saturating_add(if (148..156).contains(&i) {
            32
        } else {
            u32::from(c)
        })
    });
    stored == sum
}

/// A format named and refused, by its marks at the start or the end.
fn refused(h: &[u8], tail: &[u8], len: u64) -> Option<Format> {
    if has(h, 0, b"QFI\xfb") {
        let v = h
            .get(4..8)
            .map_or(0, |v| u32::from_be_bytes(v.try_into().unwrap_or([0; 4])));
        return Some(if v == 1 {
            refusal("qcow", "a qcow (version 1) disk image (QEMU)", CONVERT)
        } else {
            refusal("qcow2", "a qcow2 disk image (QEMU)", CONVERT)
        });
    }
    if has(h, 0, b"QED\0") {
        return Some(refusal("qed", "a QED disk image (QEMU)", CONVERT));
    }
    if has(h, 0, b"KDMV") || has(h, 0, b"COWD") {
        return Some(refusal("vmdk", "a VMDK disk image (VMware)", CONVERT));
    }
    let text_start = h.get(..1024).unwrap_or(h);
    let text = String::from_utf8_lossy(text_start);
    if text
        .trim_start_matches('\u{feff}')
        .trim_start()
        .starts_with("# Disk DescriptorFile")
    {
        return Some(refusal(
            "vmdk",
            "a VMDK descriptor (VMware; the data is in the extent files it names)",
            CONVERT,
        ));
    }
    if has(h, 0, b"vhdxfile") {
        return Some(refusal("vhdx", "a VHDX disk image (Hyper-V)", CONVERT));
    }
    if has(h, 0, b"conectix") {
        return Some(refusal(
            "vhd",
            "a dynamic VHD disk image (Virtual PC, Hyper-V)",
            CONVERT,
        ));
    }
    let tail_at = |n: usize| tail.len().checked_sub(n);
    if tail_at(512).is_some_and(|i| has(tail, i, b"conectix"))
        || tail_at(511).is_some_and(|i| has(tail, i, b"conectix"))
    {
        return Some(refusal(
            "vhd",
            "a fixed VHD disk image (a raw image with a VHD footer)",
            CONVERT,
        ));
    }
    if le32(h, 0x40) == 0xBEDA_107F {
        return Some(refusal("vdi", "a VDI disk image (VirtualBox)", CONVERT));
    }
    if has(h, 0, b"WithoutFreeSpace") || has(h, 0, b"WithouFreSpacExt") {
        return Some(refusal("parallels", "a Parallels disk image", CONVERT));
    }
    if len >= 512 && tail_at(512).is_some_and(|i| has(tail, i, b"koly")) {
        return Some(refusal(
            "dmg",
            "an Apple disk image (DMG)",
            "convert it first: qemu-img convert -O raw IN OUT.img (or dmg2img)",
        ));
    }
    if has(h, 0, &[b'7', b'z', 0xbc, 0xaf, 0x27, 0x1c]) {
        return Some(refusal(
            "7z",
            "a 7z archive",
            "unpack it (7z x IN) and write the image inside",
        ));
    }
    if has(h, 0, b"Rar!\x1a\x07") {
        return Some(refusal(
            "rar",
            "a RAR archive",
            "unpack it (unrar x IN) and write the image inside",
        ));
    }
    if has(h, 0, b"070701") || has(h, 0, b"070702") || has(h, 0, b"070707") {
        return Some(refusal(
            "cpio",
            "a cpio archive",
            "unpack it (cpio -i < IN) and write the image inside",
        ));
    }
    if is_tar(h) {
        return Some(refusal(
            "tar",
            "a tar archive",
            "unpack it (tar -xf IN) and write the image inside",
        ));
    }
    None
}

/// The image `head` starts: a filesystem verify knows, a GPT, or an MBR.
#[must_use]
pub fn image(head: &[u8]) -> Option<ImageKind> {
    let probe = |at: usize, n: usize| {
        head.get(at..at.saturating_add(n).min(head.len()))
            .unwrap_or_default()
    };
    let content = classify(
        head.get(..4096).unwrap_or(head),
        probe(0x8000, 8),
        probe(0x10040, 8),
        probe(0xfff6, 10),
    );
    match content {
        Content::Fat => return Some(ImageKind::Filesystem("fat")),
        Content::Ext => return Some(ImageKind::Filesystem("ext4")),
        Content::Other(k) => return Some(ImageKind::Filesystem(k)),
        Content::Empty | Content::Unknown => {}
    }
    if has(head, 512, b"EFI PART") || has(head, 4096, b"EFI PART") {
        return Some(ImageKind::Gpt);
    }
    if has(head, 510, &[0x55, 0xaa]) {
        return Some(ImageKind::Mbr);
    }
    None
}

/// What bytes that are no image look like, for the refusal.
fn describe(h: &[u8]) -> String {
    let kinds: &[(usize, &[u8], &str)] = &[
        (0, &[0xff, 0xd8, 0xff], "a JPEG picture"),
        (0, b"\x89PNG\r\n\x1a\n", "a PNG picture"),
        (0, b"GIF8", "a GIF picture"),
        (0, b"%PDF", "a PDF document"),
        (0, b"\x7fELF", "an ELF executable"),
        (0, b"MZ", "a Windows executable"),
        (0, b"RIFF", "a RIFF file (audio or video)"),
        (0, b"OggS", "an Ogg file"),
        (4, b"ftyp", "an MP4/MOV video"),
        (0, b"SQLite format 3\0", "an SQLite database"),
        (0, b"#!", "a script"),
    ];
    for (at, magic, what) in kinds {
        if has(h, *at, magic) {
            return (*what).to_string();
        }
    }
    let start = h.get(..512).unwrap_or(h);
    if start.is_empty() {
        return "empty".into();
    }
    if h.iter().all(|&b| b == 0) {
        return "all zeros in its first 64 KiB".into();
    }
    if core::str::from_utf8(start).is_ok_and(|s| {
        s.chars()
            .all(|c| !c.is_control() || matches!(c, '\n' | '\r' | '\t'))
    }) {
        return "text".into();
    }
    let hex: Vec<String> = start.iter().take(8).map(|b| format!("{b:02X}")).collect();
    format!("unrecognised bytes (starts {})", hex.join(" "))
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
mod tests;
