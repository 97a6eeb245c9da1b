//! Check in rounds: a [`BlockSource`] over the byte ranges fetched so far from a JS `Blob`,
//! and the round that runs the verifier over it.
//!
//! The verifier is synchronous and a `Blob` can only be read asynchronously, so verifying
//! runs in rounds: [`check_round`] runs over the ranges fetched so far; its first read of
//! bytes not yet fetched fails with [`Missing`], which names the range; the caller fetches
//! that range (rounded out to whole 4 KiB pages) and runs the round again. The verifier
//! reads only metadata, so a few dozen rounds and some KiB suffice even for a 32 GiB image.
//!
//! **Containers.** A round first asks what the input is ([`Input::of`], by its first bytes).
//! A raw image is verified over [`Fetched`] directly. A container (xz, gzip, zstd, bzip2,
//! lz4, zip, Android sparse) is refused here with a message that says what the file is and
//! how to unpack it whatever its name: rounds that restart on every missing range would
//! decode a stream from its start each time. The page checks containers in a Web Worker
//! instead ([`crate::worker`]), where `blockwise_container`'s decoders read the `Blob`
//! synchronously.

use std::collections::BTreeMap;

use blockwise_geometry::BlockSource;
use blockwise_verify::{Options, Report};

use crate::api::Failure;

/// Unit ranges are fetched in: every fetch is rounded out to whole pages.
pub const FETCH_UNIT: u64 = 4096;

/// A read of bytes that have not been fetched yet.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("bytes {offset}..{end} have not been fetched yet", end = offset.saturating_add(*len))]
pub struct Missing {
    /// First byte wanted.
    pub offset: u64,
    /// Number of bytes wanted.
    pub len: u64,
}

/// The fetched ranges of a source of `size` bytes: page-aligned chunks keyed by offset.
#[derive(Debug, Default)]
pub struct Fetched {
    size: u64,
    chunks: BTreeMap<u64, Vec<u8>>,
}

impl Fetched {
    /// Nothing fetched yet of a source of `size` bytes.
    #[must_use]
    pub fn new(size: u64) -> Self {
        Fetched {
            size,
            chunks: BTreeMap::new(),
        }
    }

    /// The range `[start, end)` to fetch for `m`: page-aligned, clamped to the source.
    #[must_use]
    pub fn range_for(&self, m: Missing) -> (u64, u64) {
        let start = m.offset - m.offset % FETCH_UNIT;
        let want_end = m.offset.saturating_add(m.len.max(1));
        let end = want_end
            .div_ceil(FETCH_UNIT)
            .saturating_mul(FETCH_UNIT)
            .min(self.size);
        (start.min(self.size), end)
    }

    /// Stores bytes fetched at `offset`.
    pub fn insert(&mut self, offset: u64, bytes: Vec<u8>) {
        if !bytes.is_empty() {
            self.chunks.insert(offset, bytes);
        }
    }

    /// Copies `[offset, offset + buf.len())` from the chunks, or names the first byte
    /// that is not there.
    fn copy(&self, offset: u64, buf: &mut [u8]) -> Result<(), Missing> {
        let len = buf.len() as u64;
        let mut pos = offset;
        let end = offset.saturating_add(len);
        while pos < end {
            let hit = self
                .chunks
                .range(..=pos)
                .next_back()
                .filter(|(&s, c)| pos < s.saturating_add(Vec::len(c) as u64));
            let Some((&start, chunk)) = hit else {
                return Err(Missing {
                    offset: pos,
                    len: end - pos,
                });
            };
            let from = usize::try_from(pos - start).unwrap_or(usize::MAX);
            let into = usize::try_from(pos - offset).unwrap_or(usize::MAX);
            let n = chunk
                .len()
                .saturating_sub(from)
                .min(buf.len().saturating_sub(into));
            let (Some(src), Some(dst)) = (
                chunk.get(from..from.saturating_add(n)),
                buf.get_mut(into..into.saturating_add(n)),
            ) else {
                return Err(Missing {
                    offset: pos,
                    len: end - pos,
                });
            };
            dst.copy_from_slice(src);
            if n == 0 {
                return Err(Missing {
                    offset: pos,
                    len: end - pos,
                });
            }
            pos = pos.saturating_add(n as u64);
        }
        Ok(())
    }
}

impl BlockSource for Fetched {
    type Error = Missing;

    fn len(&self) -> u64 {
        self.size
    }

    fn read_at(&self, offset: u64, buf: &mut [u8]) -> Result<(), Missing> {
        self.copy(offset, buf)
    }
}

/// Bytes of the input's head that [`Input::of`] looks at.
pub const HEAD_BYTES: u64 = 512;

/// A container an image travels in, recognised by its magic bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Container {
    /// xz (`.img.xz`).
    Xz,
    /// gzip (`.img.gz`).
    Gzip,
    /// zstd, seekable or not (`.img.zst`).
    Zstd,
    /// bzip2 (`.img.bz2`).
    Bzip2,
    /// LZ4 frame (`.img.lz4`).
    Lz4,
    /// zip archive (`.zip`).
    Zip,
    /// Android sparse image (`.simg`, `.sparse`).
    AndroidSparse,
    /// QEMU qcow2 (not an image to flash as it is).
    Qcow2,
    /// VMware VMDK (sparse extent).
    Vmdk,
    /// Hyper-V VHDX.
    Vhdx,
}

impl Container {
    /// Its name in messages.
    #[must_use]
    pub fn name(self) -> &'static str {
        match self {
            Container::Xz => "xz",
            Container::Gzip => "gzip",
            Container::Zstd => "zstd",
            Container::Bzip2 => "bzip2",
            Container::Lz4 => "lz4",
            Container::Zip => "zip",
            Container::AndroidSparse => "Android sparse",
            Container::Qcow2 => "qcow2",
            Container::Vmdk => "VMDK",
            Container::Vhdx => "VHDX",
        }
    }

    /// The command that unpacks `file` into `image.img`, whatever the file is called
    /// (`xz -dk` refuses a name without `.xz`; `-c` to stdout does not care).
    #[must_use]
    pub fn unpack_command(self, file: &str) -> String {
        let f = shell_quote(file);
        match self {
            Container::Xz => format!("xz -dc {f} > image.img"),
            Container::Gzip => format!("gzip -dc {f} > image.img"),
            Container::Zstd => format!("zstd -dc {f} > image.img"),
            Container::Bzip2 => format!("bzip2 -dc {f} > image.img"),
            Container::Lz4 => format!("lz4 -dc {f} > image.img"),
            Container::Zip => format!("unzip -p {f} > image.img"),
            Container::AndroidSparse => format!("simg2img {f} image.img"),
            Container::Qcow2 | Container::Vmdk | Container::Vhdx => {
                format!("qemu-img convert -O raw {f} image.img")
            }
        }
    }

    /// `verify`'s answer (it reads raw images over fetched ranges): what the file is, that
    /// [`crate::worker::verify_container`] decodes it, and the command that unpacks it.
    #[must_use]
    pub fn refusal(self, file: &str) -> Failure {
        let what = match self {
            Container::Qcow2 | Container::Vmdk | Container::Vhdx => {
                format!(
                    "{file} is a {} virtual-machine disk, not a raw image",
                    self.name()
                )
            }
            Container::Zip => format!("{file} is a zip archive"),
            Container::AndroidSparse => format!("{file} is an Android sparse image"),
            _ => format!("{file} is {}-compressed", self.name()),
        };
        match self {
            Container::Qcow2 | Container::Vmdk | Container::Vhdx => Failure::unsupported(format!(
                "{what}: this page does not convert it, so its partition table cannot be read here. Convert it with `{}` and check image.img.",
                self.unpack_command(file)
            )),
            _ => Failure::unsupported(format!(
                "{what}: verify() reads raw images; verifyContainer() decodes it in a Web Worker (as the page's Check does), or unpack it with `{}` and check image.img (an image in a container is aligned exactly when the image inside is).",
                self.unpack_command(file)
            )),
        }
    }
}

/// `name` as one shell word: as it is when it is plain, else in single quotes.
fn shell_quote(name: &str) -> String {
    let plain = !name.is_empty()
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "._-+/@%:,=".contains(c));
    if plain {
        name.to_string()
    } else {
        format!("'{}'", name.replace('\'', r"'\''"))
    }
}

/// What an input is, by its first bytes. (`blockwise_container::recognise` takes this
/// over when it lands: one recogniser for the CLI and the page.)
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Input {
    /// A raw disk image or filesystem (or something the verifier will call unrecognised).
    Raw,
    /// A container.
    Container(Container),
}

impl Input {
    /// Recognises `head`, the first [`HEAD_BYTES`] of the input (or all of it when shorter).
    #[must_use]
    pub fn of(head: &[u8]) -> Input {
        let magics: [(&[u8], Container); 10] = [
            (&[0xfd, b'7', b'z', b'X', b'Z', 0], Container::Xz),
            (&[0x1f, 0x8b], Container::Gzip),
            (&[0x28, 0xb5, 0x2f, 0xfd], Container::Zstd),
            (b"BZh", Container::Bzip2),
            (&[0x04, 0x22, 0x4d, 0x18], Container::Lz4),
            (b"PK\x03\x04", Container::Zip),
            (&[0x3a, 0xff, 0x26, 0xed], Container::AndroidSparse),
            (b"QFI\xfb", Container::Qcow2),
            (b"KDMV", Container::Vmdk),
            (b"vhdxfile", Container::Vhdx),
        ];
        magics
            .iter()
            .find(|(m, _)| head.starts_with(m))
            .map_or(Input::Raw, |&(_, c)| Input::Container(c))
    }
}

/// The outcome of one round of Check.
#[derive(Debug)]
pub enum Round {
    /// The report.
    Done(Box<Report>),
    /// Fetch this and run the round again.
    Need(Missing),
}

/// One round of Check over what has been fetched: recognise the input, then verify it (see
/// the module docs for where a container decoder goes).
pub fn check_round(fetched: &Fetched, options: &Options) -> Result<Round, Failure> {
    let n = usize::try_from(fetched.len().min(HEAD_BYTES)).unwrap_or(0);
    let mut head = vec![0u8; n];
    if let Err(m) = fetched.read_at(0, &mut head) {
        return Ok(Round::Need(m));
    }
    match Input::of(&head) {
        Input::Raw => Ok(match blockwise_verify::verify(fetched, options) {
            Ok(report) => Round::Done(Box::new(report)),
            Err(m) => Round::Need(m),
        }),
        // The decoder slot: `verify(&decoder_over(fetched), options)`, with the decoder's
        // "need undecoded bytes" error mapped back to its `Missing`.
        Input::Container(c) => Err(c.refusal(&options.source)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_across_chunks_and_names_the_gap() {
        let mut f = Fetched::new(3 * FETCH_UNIT);
        f.insert(0, vec![1; 4096]);
        f.insert(4096, vec![2; 4096]);
        let mut buf = [0u8; 8];
        f.read_at(4092, &mut buf).unwrap();
        assert_eq!(buf, [1, 1, 1, 1, 2, 2, 2, 2]);
        let m = f.read_at(8190, &mut buf).unwrap_err();
        assert_eq!(
            m,
            Missing {
                offset: 8192,
                len: 6
            }
        );
        assert_eq!(f.range_for(m), (8192, 12288));
    }

    #[test]
    fn ranges_clamp_to_the_source() {
        let f = Fetched::new(5000);
        assert_eq!(
            f.range_for(Missing {
                offset: 4500,
                len: 8
            }),
            (4096, 5000)
        );
    }

    #[test]
    fn containers_are_named_with_a_command_that_ignores_the_name() {
        let c = |b: &[u8]| match Input::of(b) {
            Input::Container(c) => Some(c),
            Input::Raw => None,
        };
        assert_eq!(
            c(&[0xfd, b'7', b'z', b'X', b'Z', 0, 0, 4]),
            Some(Container::Xz)
        );
        assert_eq!(c(&[0x1f, 0x8b, 8, 0]), Some(Container::Gzip));
        assert_eq!(c(&[0x28, 0xb5, 0x2f, 0xfd, 0]), Some(Container::Zstd));
        assert_eq!(c(b"PK\x03\x04rest"), Some(Container::Zip));
        assert_eq!(
            c(&[0x3a, 0xff, 0x26, 0xed, 1, 0]),
            Some(Container::AndroidSparse)
        );
        assert_eq!(c(&[0xeb, 0x3c, 0x90]), None);
        assert_eq!(c(&[]), None);
        let f = Container::Xz.refusal("renamed.img");
        assert!(
            f.message.contains("`xz -dc renamed.img > image.img`"),
            "{}",
            f.message
        );
        assert!(
            f.message
                .starts_with("renamed.img is xz-compressed: verify() reads raw images; verifyContainer() decodes it"),
            "{}",
            f.message
        );
        let f = Container::Gzip.refusal("my image's.gz");
        assert!(
            f.message
                .contains(r"`gzip -dc 'my image'\''s.gz' > image.img`"),
            "{}",
            f.message
        );
    }

    #[test]
    fn a_round_asks_for_the_head_first_then_refuses_a_container() {
        let mut f = Fetched::new(1 << 20);
        let opts = Options::new("x.img.gz");
        match check_round(&f, &opts) {
            Ok(Round::Need(m)) => assert_eq!(m.offset, 0),
            other => panic!("{other:?}"),
        }
        let mut head = vec![0u8; 4096];
        head[0] = 0x1f;
        head[1] = 0x8b;
        f.insert(0, head);
        let err = check_round(&f, &opts).unwrap_err();
        assert_eq!(err.category, crate::api::Category::Unsupported);
    }
}
