//! The squashfs options of a partition (`partition.squashfs` in a spec) and their rules.

use core::fmt;

use blockwise_geometry::de::{from_str, opt_uint, size};
use serde::de::Deserializer;
use serde::Deserialize;

/// Which implementation writes the filesystem.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum SquashfsBackend {
    /// The pure-Rust writer.
    #[default]
    Native,
    /// `mksquashfs` from squashfs-tools (fallback).
    Mksquashfs,
}

impl SquashfsBackend {
    /// The spec spelling.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            SquashfsBackend::Native => "native",
            SquashfsBackend::Mksquashfs => "mksquashfs",
        }
    }
}

impl<'de> Deserialize<'de> for SquashfsBackend {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        from_str(d, "\"native\" or \"mksquashfs\"", |s| match s {
            "native" => Ok(SquashfsBackend::Native),
            "mksquashfs" => Ok(SquashfsBackend::Mksquashfs),
            _ => Err(format!("{s:?}: must be \"native\" or \"mksquashfs\"")),
        })
    }
}

/// The compressor of data and metadata blocks.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Compression {
    /// zlib (squashfs id 1): every kernel that has squashfs reads it (mksquashfs' default).
    #[default]
    Gzip,
    /// xz (id 4).
    Xz,
    /// lz4 (id 5).
    Lz4,
    /// zstd (id 6).
    Zstd,
}

impl Compression {
    /// Every compressor, in spec spelling.
    pub const NAMES: &'static str = "\"gzip\", \"xz\", \"lz4\" or \"zstd\"";

    /// The spec (and `mksquashfs -comp`) spelling.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Compression::Gzip => "gzip",
            Compression::Xz => "xz",
            Compression::Lz4 => "lz4",
            Compression::Zstd => "zstd",
        }
    }

    /// The superblock's compression id.
    #[must_use]
    pub fn id(self) -> u16 {
        match self {
            Compression::Gzip => 1,
            Compression::Xz => 4,
            Compression::Lz4 => 5,
            Compression::Zstd => 6,
        }
    }

    /// The name of a superblock compression id (`lzma` and `lzo` too, which only readers
    /// meet).
    #[must_use]
    pub fn name_of_id(id: u16) -> Option<&'static str> {
        Some(match id {
            1 => "gzip",
            2 => "lzma",
            3 => "lzo",
            4 => "xz",
            5 => "lz4",
            6 => "zstd",
            _ => return None,
        })
    }

    /// The level range `level` accepts, and the default.
    #[must_use]
    pub fn levels(self) -> Option<(u32, u32, u32)> {
        match self {
            Compression::Gzip => Some((1, 9, 9)),
            Compression::Xz => Some((0, 9, 6)),
            Compression::Zstd => Some((1, 22, 15)),
            Compression::Lz4 => None,
        }
    }
}

impl fmt::Display for Compression {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for Compression {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        from_str(d, Compression::NAMES, |s| match s {
            "gzip" | "zlib" => Ok(Compression::Gzip),
            "xz" => Ok(Compression::Xz),
            "lz4" => Ok(Compression::Lz4),
            "zstd" => Ok(Compression::Zstd),
            _ => Err(format!("{s:?}: must be {}", Compression::NAMES)),
        })
    }
}

const LEVEL_MAX: u64 = 22;

/// squashfs options (`partition.squashfs`).
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
#[serde(default, deny_unknown_fields, rename_all = "kebab-case")]
pub struct SquashfsOptions {
    /// Compressor.
    pub compression: Compression,
    /// Data block size: a power of two from 4 KiB to 1 MiB.
    #[serde(deserialize_with = "size_u32")]
    pub block_size: u32,
    /// Compression level (gzip 1–9, default 9; xz presets 0–9, default 6; zstd 1–22, default
    /// 15); `None` = the compressor's default.
    #[serde(deserialize_with = "opt_uint::<_, u32, LEVEL_MAX>")]
    pub level: Option<u32>,
    /// Pack the tails of files (and small files) into shared fragment blocks.
    pub fragments: bool,
    /// Writer backend.
    pub backend: SquashfsBackend,
}

impl Default for SquashfsOptions {
    fn default() -> Self {
        SquashfsOptions {
            compression: Compression::Gzip,
            block_size: 128 << 10,
            level: None,
            fragments: true,
            backend: SquashfsBackend::Native,
        }
    }
}

fn size_u32<'de, D: Deserializer<'de>>(d: D) -> Result<u32, D::Error> {
    size(d).map(|v| u32::try_from(v).unwrap_or(u32::MAX))
}

/// An option that cannot be used: the key inside `partition.squashfs` and why.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{reason}")]
pub struct Invalid {
    /// `compression`, `block-size`, `level`, `backend`, or the partition key `size`.
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

    /// True for keys of the partition itself (`size`), not of `partition.squashfs`.
    #[must_use]
    pub fn is_partition_key(&self) -> bool {
        matches!(self.key, "size" | "label")
    }
}

impl SquashfsOptions {
    /// Checks the options on their own.
    pub fn validate(&self) -> Result<(), Invalid> {
        let bs = self.block_size;
        if !bs.is_power_of_two() || !(4096..=1 << 20).contains(&bs) {
            return Err(Invalid::new(
                "block-size",
                format!("{bs}: must be a power of two from 4 KiB to 1 MiB (mksquashfs' default is 128 KiB)"),
            ));
        }
        if let Some(l) = self.level {
            match self.compression.levels() {
                Some((lo, hi, _)) if (lo..=hi).contains(&l) => {}
                Some((lo, hi, _)) => {
                    return Err(Invalid::new(
                        "level",
                        format!("{l}: {} levels go from {lo} to {hi}", self.compression),
                    ))
                }
                None => {
                    return Err(Invalid::new(
                        "level",
                        format!("{} has no level here", self.compression),
                    ))
                }
            }
        }
        Ok(())
    }
}
