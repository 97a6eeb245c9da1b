//! The EROFS options of a partition (`partition.erofs` in a spec) and their rules. The serde
//! names are the spec keys; errors name an [`Invalid::key`] the image crate turns into the
//! spec key the user wrote.

use blockwise_geometry::de::{from_str, opt_uint};
use serde::de::Deserializer;
use serde::Deserialize;

/// Which implementation writes the filesystem.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum ErofsBackend {
    /// The pure-Rust writer (uncompressed).
    #[default]
    Native,
    /// `mkfs.erofs` from erofs-utils (fallback, for compressed EROFS).
    MkfsErofs,
}

impl ErofsBackend {
    /// The spec spelling.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            ErofsBackend::Native => "native",
            ErofsBackend::MkfsErofs => "mkfs.erofs",
        }
    }
}

impl<'de> Deserialize<'de> for ErofsBackend {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        from_str(d, "\"native\" or \"mkfs.erofs\"", |s| match s {
            "native" => Ok(ErofsBackend::Native),
            "mkfs.erofs" => Ok(ErofsBackend::MkfsErofs),
            _ => Err(format!("{s:?}: must be \"native\" or \"mkfs.erofs\"")),
        })
    }
}

/// Compressors `mkfs.erofs` may know (which ones depends on its version and build).
pub const COMPRESSORS: &[&str] = &["lz4", "lz4hc", "lzma", "deflate", "zstd"];

const LEVEL_MAX: u64 = 22;

/// EROFS options (`partition.erofs`).
#[derive(Clone, Debug, PartialEq, Eq, Default, Deserialize)]
#[serde(default, deny_unknown_fields, rename_all = "kebab-case")]
pub struct ErofsOptions {
    /// `none` (default) or a compressor of `mkfs.erofs` (needs `backend = "mkfs.erofs"`).
    pub compression: Option<String>,
    /// Compression level passed to `mkfs.erofs -zALG,LEVEL`.
    #[serde(deserialize_with = "opt_uint::<_, u32, LEVEL_MAX>")]
    pub level: Option<u32>,
    /// Writer backend.
    pub backend: ErofsBackend,
    /// Pinned UUID in textual byte order; not a key of `partition.erofs`: the image crate
    /// sets it from the partition's `fs-uuid`.
    #[serde(skip)]
    pub uuid: Option<[u8; 16]>,
}

/// An option that cannot be used: the key inside `partition.erofs` (or `label`/`size` of
/// the partition) and why.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{reason}")]
pub struct Invalid {
    /// `compression`, `level`, `backend`, or the partition keys `label`, `size`.
    pub key: &'static str,
    /// What is wrong and what to do.
    pub reason: String,
}

impl Invalid {
    /// A new error.
    pub fn new(key: &'static str, reason: impl Into<String>) -> Self {
        Invalid {
            key,
            reason: reason.into(),
        }
    }

    /// True for keys of the partition itself (`label`, `size`), not of `partition.erofs`.
    #[must_use]
    pub fn is_partition_key(&self) -> bool {
        matches!(self.key, "label" | "size")
    }
}

impl ErofsOptions {
    /// The compressor, `None` for uncompressed.
    #[must_use]
    pub fn compressor(&self) -> Option<&str> {
        self.compression.as_deref().filter(|c| *c != "none")
    }

    /// Checks the options on their own.
    pub fn validate(&self) -> Result<(), Invalid> {
        if let Some(c) = self.compressor() {
            if !COMPRESSORS.contains(&c) {
                return Err(Invalid::new(
                    "compression",
                    format!(
                        "{c:?}: must be \"none\" or one of {}",
                        COMPRESSORS.join(", ")
                    ),
                ));
            }
            if self.backend == ErofsBackend::Native {
                return Err(Invalid::new(
                    "compression",
                    format!("the native writer makes uncompressed EROFS; for {c} set erofs.backend = \"mkfs.erofs\" (erofs-utils), or leave compression out"),
                ));
            }
        }
        if self.level.is_some() && self.compressor().is_none() {
            return Err(Invalid::new(
                "level",
                "a compression level needs compression = \"lz4hc\" (or another compressor)",
            ));
        }
        Ok(())
    }
}

/// Checks a label: EROFS volume names hold 16 bytes.
pub fn validate_label(label: &str) -> Result<(), Invalid> {
    if label.len() > 16 {
        return Err(Invalid::new(
            "label",
            format!(
                "{label:?} is {} bytes; EROFS volume names hold at most 16",
                label.len()
            ),
        ));
    }
    Ok(())
}
