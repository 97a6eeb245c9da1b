//! The one entry point for inputs: recognise, refuse or decode, and say what the image bytes
//! are.

use blockwise_geometry::BlockSource;

use crate::decode::Decoded;
use crate::recognise::{recognise, recognise_bytes, Format, ImageKind, Refusal, Unknown, HEAD};
use crate::Error;

/// What the image bytes (after any container) are.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Content {
    /// A disk or filesystem image.
    Image(ImageKind),
    /// Nothing blockwise knows: callers refuse it unless the user says `--raw`.
    Unknown(Unknown),
}

impl Content {
    /// The refusal for unknown bytes when `--raw` was not given; `Ok` for an image or with
    /// `raw`.
    pub fn require_image(&self, raw: bool, container: Option<&str>) -> Result<(), Refusal> {
        match self {
            Content::Image(_) => Ok(()),
            Content::Unknown(_) if raw => Ok(()),
            Content::Unknown(u) => Err(Refusal {
                what: match container {
                    Some(c) => format!("not a disk image ({} inside {c})", u.looks_like),
                    None => format!("not a disk image ({})", u.looks_like),
                },
                hint: "no partition table and no filesystem blockwise knows; pass --raw (Python: raw=True) to write it byte for byte anyway (firmware blobs, unknown filesystems)".into(),
                kind: "unknown",
            }),
        }
    }
}

/// An input, opened.
#[derive(Debug)]
pub enum Opened<I> {
    /// Not a container: the bytes are the image.
    Plain {
        /// The input.
        src: I,
        /// What the bytes are.
        content: Content,
    },
    /// A container, decoded.
    Container {
        /// The decoded image.
        decoded: Box<Decoded<I>>,
        /// What the decoded bytes are.
        content: Content,
    },
}

impl<I> Opened<I> {
    /// What the image bytes are.
    #[must_use]
    pub fn content(&self) -> &Content {
        match self {
            Opened::Plain { content, .. } | Opened::Container { content, .. } => content,
        }
    }
}

/// Why an input cannot be opened.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum OpenError {
    /// A format blockwise names and refuses.
    #[error(transparent)]
    Refused(Refusal),
    /// A container that does not decode (or the input could not be read).
    #[error(transparent)]
    Decode(#[from] Error),
}

/// Recognises `src`, refuses what blockwise cannot write as it is, and decodes containers.
/// A container's first decoded bytes are recognised too: a tar inside xz, or a container
/// inside a container, is refused naming both.
pub fn open<I: BlockSource + 'static>(src: I) -> Result<Opened<I>, OpenError> {
    let format = recognise(&src).map_err(|e| Error::Input(Box::new(e)))?;
    let kind = match format {
        Format::Refused(r) => return Err(OpenError::Refused(r)),
        Format::Image(k) => {
            return Ok(Opened::Plain {
                src,
                content: Content::Image(k),
            })
        }
        Format::Unknown(u) => {
            return Ok(Opened::Plain {
                src,
                content: Content::Unknown(u),
            })
        }
        Format::Container(kind) => kind,
    };
    let decoded = Decoded::open(src, kind)?;
    let want = decoded
        .size()
        .map_or(HEAD, |s| usize::try_from(s).unwrap_or(usize::MAX).min(HEAD));
    let mut head = vec![0u8; want];
    let got = decoded.read_forward(0, &mut head)?;
    head.truncate(got);
    decoded.rewind();
    let len = decoded.size().unwrap_or(u64::try_from(got).unwrap_or(0));
    let content = match recognise_bytes(&head, &[], len) {
        Format::Image(k) => Content::Image(k),
        Format::Unknown(u) => Content::Unknown(u),
        Format::Refused(r) => {
            return Err(OpenError::Refused(Refusal {
                what: format!("{} inside {}", r.what, kind.name()),
                hint: format!("{} (decompress it first: {})", r.hint, kind.unpack()),
                kind: r.kind,
            }))
        }
        Format::Container(inner) => {
            return Err(OpenError::Refused(Refusal {
                what: format!("{} inside {}", inner.name(), kind.name()),
                hint: format!(
                    "blockwise decodes one layer; unpack the outer one first ({}) and give it the {} file",
                    kind.unpack(),
                    inner.name()
                ),
                kind: "nested",
            }))
        }
    };
    Ok(Opened::Container {
        decoded: Box::new(decoded),
        content,
    })
}
