//! The ext4 options of a partition (`partition.ext4` in a spec) and their rules.
//!
//! This crate owns them: the spec layer deserialises them (the serde names are the spec
//! keys), [`Ext4Options::validate`] checks them the same way when the spec is read and when
//! the planner runs, and every error names a [`Field`], which the spec layer turns into the
//! key the user wrote.

use core::fmt;

use blockwise_geometry::de::{from_str, opt_size, opt_uint, size, uint};
use serde::de::{self, Deserializer, SeqAccess, Visitor};
use serde::Deserialize;

/// Which ext4 implementation writes the filesystem.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Ext4Backend {
    /// The pure-Rust writer.
    #[default]
    Native,
    /// `mke2fs -d` from e2fsprogs (fallback).
    Mke2fs,
}

/// ext4 feature profile.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Ext4Profile {
    /// Like mke2fs 1.47's ext4 defaults.
    #[default]
    Default,
    /// No metadata_csum, no 64bit, no orphan_file: readable by U-Boot and older loaders.
    Compat,
}

/// Which generation of the format `fs` asked for: the feature set starts from it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum ExtKind {
    /// `fs = "ext2"`: no journal, block-mapped files, 32-bit descriptors (`mke2fs -t ext2`).
    Ext2,
    /// `fs = "ext3"`: ext2 with a journal (`mke2fs -t ext3`).
    Ext3,
    /// `fs = "ext4"`: the profile's features.
    #[default]
    Ext4,
}

impl ExtKind {
    /// The spec spelling.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            ExtKind::Ext2 => "ext2",
            ExtKind::Ext3 => "ext3",
            ExtKind::Ext4 => "ext4",
        }
    }
}

impl<'de> Deserialize<'de> for Ext4Backend {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        from_str(d, "\"native\" or \"mke2fs\"", |s| match s {
            "native" => Ok(Ext4Backend::Native),
            "mke2fs" => Ok(Ext4Backend::Mke2fs),
            _ => Err(format!("{s:?}: must be \"native\" or \"mke2fs\"")),
        })
    }
}

impl<'de> Deserialize<'de> for Ext4Profile {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        from_str(d, "\"default\" or \"compat\"", |s| match s {
            "default" => Ok(Ext4Profile::Default),
            "compat" => Ok(Ext4Profile::Compat),
            _ => Err(format!("{s:?}: must be \"default\" or \"compat\"")),
        })
    }
}

const U32_MAX: u64 = u32::MAX as u64;
/// mke2fs's bounds for `-i` (`EXT2_MIN_BLOCK_SIZE`, `EXT2_MAX_BLOCK_SIZE * 1024`).
const MIN_INODE_RATIO: u64 = 1024;
const MAX_INODE_RATIO: u64 = 64 << 20;

/// ext4 options (`partition.ext4`).
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
#[serde(default, deny_unknown_fields, rename_all = "kebab-case")]
pub struct Ext4Options {
    /// Block size: 1024, 2048 or 4096.
    #[serde(deserialize_with = "size_u32")]
    pub block_size: u32,
    /// RAID stride in blocks; `None` = erase block / block size.
    #[serde(deserialize_with = "opt_uint::<_, u32, U32_MAX>")]
    pub stride: Option<u32>,
    /// RAID stripe width in blocks; `None` = erase block / block size.
    #[serde(deserialize_with = "opt_uint::<_, u32, U32_MAX>")]
    pub stripe_width: Option<u32>,
    /// Internal journal.
    #[serde(deserialize_with = "blockwise_geometry::de::boolean")]
    pub journal: bool,
    /// Journal size in bytes; `None` = sized like mke2fs.
    #[serde(deserialize_with = "opt_size")]
    pub journal_size: Option<u64>,
    /// Inode size: 128 or 256 (or larger power of two up to the block size).
    #[serde(deserialize_with = "size_u32")]
    pub inode_size: u32,
    /// Number of inodes; `None` = like mke2fs (one per 16 KiB).
    #[serde(deserialize_with = "opt_uint::<_, u64, U32_MAX>")]
    pub inodes: Option<u64>,
    /// Bytes per inode (mke2fs `-i`): one inode per this many bytes of the filesystem;
    /// `None` = mke2fs's ratio for the size. Exclusive with `inodes`.
    #[serde(deserialize_with = "opt_size")]
    pub inode_ratio: Option<u64>,
    /// Reserved blocks percentage (0–50).
    #[serde(deserialize_with = "uint::<_, u8, 100>")]
    pub reserved_percent: u8,
    /// Writer backend.
    pub backend: Ext4Backend,
    /// Feature profile.
    pub profile: Ext4Profile,
    /// Feature edits on top of the profile: `"+name"`/`"name"` adds, `"-name"`/`"^name"` removes.
    #[serde(deserialize_with = "feature_list")]
    pub features: Vec<String>,
    /// Pinned filesystem UUID in textual byte order; `None` = derived from the seed. Not a
    /// key of `partition.ext4`: the image crate sets it from the partition's `fs-uuid`.
    #[serde(skip)]
    pub uuid: Option<[u8; 16]>,
    /// ext2, ext3 or ext4: not a key of `partition.ext4`, the image crate sets it from the
    /// partition's `fs`.
    #[serde(skip)]
    pub kind: ExtKind,
}

impl Default for Ext4Options {
    fn default() -> Self {
        Ext4Options {
            block_size: 4096,
            stride: None,
            stripe_width: None,
            journal: true,
            journal_size: None,
            inode_size: 256,
            inodes: None,
            inode_ratio: None,
            reserved_percent: 5,
            backend: Ext4Backend::Native,
            profile: Ext4Profile::Default,
            features: Vec::new(),
            uuid: None,
            kind: ExtKind::Ext4,
        }
    }
}

fn size_u32<'de, D: Deserializer<'de>>(d: D) -> Result<u32, D::Error> {
    size(d).map(|v| u32::try_from(v).unwrap_or(u32::MAX))
}

/// `features = ["^metadata_csum", "+64bit"]` or `features = "^metadata_csum,+64bit"`.
fn feature_list<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<String>, D::Error> {
    struct V;
    impl<'de> Visitor<'de> for V {
        type Value = Vec<String>;
        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("an array of strings like \"^metadata_csum\"")
        }
        fn visit_str<E: de::Error>(self, s: &str) -> Result<Vec<String>, E> {
            Ok(s.split(',')
                .map(|f| f.trim().to_string())
                .filter(|f| !f.is_empty())
                .collect())
        }
        fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Vec<String>, A::Error> {
            let mut out = Vec::new();
            while let Some(s) = seq.next_element::<String>()? {
                out.push(s);
            }
            Ok(out)
        }
    }
    d.deserialize_any(V)
}

impl Ext4Options {
    /// Sets the block size.
    #[must_use]
    pub fn block_size(mut self, bytes: u32) -> Self {
        self.block_size = bytes;
        self
    }

    /// Sets the inode size.
    #[must_use]
    pub fn inode_size(mut self, bytes: u32) -> Self {
        self.inode_size = bytes;
        self
    }

    /// Turns the journal on or off.
    #[must_use]
    pub fn journal(mut self, on: bool) -> Self {
        self.journal = on;
        self
    }

    /// Sets the profile.
    #[must_use]
    pub fn profile(mut self, p: Ext4Profile) -> Self {
        self.profile = p;
        self
    }

    /// Sets the backend.
    #[must_use]
    pub fn backend(mut self, b: Ext4Backend) -> Self {
        self.backend = b;
        self
    }

    /// Checks what can be checked without the partition size (the planner runs this first;
    /// the journal size and the RAID hints' field widths are checked against the geometry).
    pub fn validate(&self) -> Result<(), Invalid> {
        let bs = self.block_size;
        if !matches!(bs, 1024 | 2048 | 4096) {
            return Err(Invalid::new(
                Field::BlockSize,
                format!("{bs}: must be 1024, 2048 or 4096"),
            ));
        }
        let is = self.inode_size;
        if !is.is_power_of_two() || !(128..=bs).contains(&is) {
            return Err(Invalid::new(
                Field::InodeSize,
                format!("{is}: must be a power of two from 128 to the block size ({bs})"),
            ));
        }
        if self.reserved_percent > 50 {
            return Err(Invalid::new(
                Field::ReservedPercent,
                format!("{}: must be 0 to 50", self.reserved_percent),
            ));
        }
        if let Some(r) = self.inode_ratio {
            if !(MIN_INODE_RATIO..=MAX_INODE_RATIO).contains(&r) {
                return Err(Invalid::new(
                    Field::InodeRatio,
                    format!("{r}: must be from 1KiB to 64MiB bytes per inode (as mke2fs -i)"),
                ));
            }
            if self.inodes.is_some() {
                return Err(Invalid::new(
                    Field::InodeRatio,
                    "set either ext4.inodes (a count) or ext4.inode-ratio (bytes per inode), not both",
                ));
            }
        }
        for (field, v) in [
            (Field::Stride, self.stride),
            (Field::StripeWidth, self.stripe_width),
        ] {
            if v == Some(0) {
                return Err(Invalid::new(field, "must be at least 1 block"));
            }
        }
        for feat in &self.features {
            let name = feat.trim_start_matches(['+', '-', '^']);
            if name.is_empty()
                || !name
                    .chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
            {
                return Err(Invalid::new(
                    Field::Features,
                    format!("{feat:?} is not a feature name like \"^metadata_csum\" or \"+64bit\""),
                ));
            }
        }
        Ok(())
    }
}

/// Checks a volume label: at most 16 bytes.
pub fn validate_label(label: &str) -> Result<(), Invalid> {
    if label.contains('\0') {
        return Err(Invalid::new(
            Field::Label,
            "contains a NUL byte, which ends an ext4 label: the rest would be lost",
        ));
    }
    if label.len() > 16 {
        return Err(Invalid::new(
            Field::Label,
            format!(
                "{label:?} is {} bytes; ext4 labels hold at most 16",
                label.len()
            ),
        ));
    }
    Ok(())
}

/// What an ext4 request error is about. The spec layer maps each to the key the user wrote.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Field {
    /// The partition size.
    Size,
    /// The volume label.
    Label,
    /// `ext4.block-size`.
    BlockSize,
    /// `ext4.inode-size`.
    InodeSize,
    /// `ext4.inodes`.
    Inodes,
    /// `ext4.inode-ratio`.
    InodeRatio,
    /// `ext4.reserved-percent`.
    ReservedPercent,
    /// `ext4.journal-size`.
    JournalSize,
    /// `ext4.journal`.
    Journal,
    /// `ext4.stride`.
    Stride,
    /// `ext4.stripe-width`.
    StripeWidth,
    /// `ext4.features`.
    Features,
}

impl Field {
    /// The key inside `partition.ext4` for the options' own fields (`block-size`), `None`
    /// for fields that live elsewhere in a spec.
    #[must_use]
    pub fn option_key(self) -> Option<&'static str> {
        match self {
            Field::BlockSize => Some("block-size"),
            Field::InodeSize => Some("inode-size"),
            Field::Inodes => Some("inodes"),
            Field::InodeRatio => Some("inode-ratio"),
            Field::ReservedPercent => Some("reserved-percent"),
            Field::JournalSize => Some("journal-size"),
            Field::Journal => Some("journal"),
            Field::Stride => Some("stride"),
            Field::StripeWidth => Some("stripe-width"),
            Field::Features => Some("features"),
            Field::Size | Field::Label => None,
        }
    }
}

/// A request the ext4 planner cannot meet, with the field that is wrong.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{reason}")]
pub struct Invalid {
    /// Which field.
    pub field: Field,
    /// Why, and what to do.
    pub reason: String,
}

impl Invalid {
    /// A new error.
    pub fn new(field: Field, reason: impl Into<String>) -> Self {
        Invalid {
            field,
            reason: reason.into(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rules() {
        let d = Ext4Options::default;
        assert_eq!(d().validate(), Ok(()));
        let field = |o: Ext4Options| o.validate().unwrap_err().field;
        assert_eq!(field(d().block_size(8192)), Field::BlockSize);
        assert_eq!(field(d().inode_size(100)), Field::InodeSize);
        assert_eq!(
            field(d().block_size(1024).inode_size(2048)),
            Field::InodeSize
        );
        assert_eq!(
            field(Ext4Options {
                inode_ratio: Some(512),
                ..d()
            }),
            Field::InodeRatio
        );
        assert_eq!(
            field(Ext4Options {
                inode_ratio: Some(65536),
                inodes: Some(100),
                ..d()
            }),
            Field::InodeRatio
        );
        assert_eq!(
            field(Ext4Options {
                stride: Some(0),
                ..d()
            }),
            Field::Stride
        );
        assert_eq!(
            field(Ext4Options {
                features: vec!["^Meta csum".into()],
                ..d()
            }),
            Field::Features
        );
        assert_eq!(validate_label("rootfs"), Ok(()));
        assert_eq!(
            validate_label("a-label-that-is-too-long")
                .unwrap_err()
                .field,
            Field::Label
        );
    }

    #[test]
    fn deserialises_with_spec_keys() {
        let o: Ext4Options = serde_json::from_str(
            r#"{"block-size": "1KiB", "inode-size": 128, "journal": false, "backend": "mke2fs",
                "profile": "compat", "features": "^metadata_csum, +64bit", "inodes": "0x1000"}"#,
        )
        .unwrap();
        assert_eq!(o.block_size, 1024);
        assert_eq!(o.backend, Ext4Backend::Mke2fs);
        assert_eq!(o.features, ["^metadata_csum", "+64bit"]);
        assert_eq!(o.inodes, Some(4096));
        let e = serde_json::from_str::<Ext4Options>(r#"{"backend": "e2fs"}"#).unwrap_err();
        assert!(
            e.to_string()
                .contains("\"e2fs\": must be \"native\" or \"mke2fs\""),
            "{e}"
        );
    }
}
