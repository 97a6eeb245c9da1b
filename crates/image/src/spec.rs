//! The image spec: what the user asks for, from a TOML file, a Python dict or a JS object.
//!
//! Every input struct derives serde's `Deserialize` with `deny_unknown_fields` and
//! kebab-case names, so the three front ends accept the same keys and reject the same typos.
//! Parts are owned by the crates that understand them: the `[image]` table and the layout
//! by `blockwise-geometry` ([`ImageSpec`]), `partition.fat` by `blockwise-fat`
//! ([`FatOptions`]), `partition.ext4` by `blockwise-ext4` ([`Ext4Options`]). This module
//! adds the partitions' contents, the `[[partition.entry]]` overrides and the one place that
//! turns every error — of deserialisation, of validation, of the planners — into a
//! [`SpecError`] naming a key that exists (`partition[2].fat.cluster`; partition and entry
//! numbers are 1-based).

use core::fmt;
use std::collections::BTreeMap;

use blockwise_erofs::ErofsOptions;
use blockwise_exfat::ExfatOptions;
use blockwise_ext4::Ext4Options;
use blockwise_fat::FatOptions;
use blockwise_squashfs::SquashfsOptions;

use crate::rofs::VerityMode;
use blockwise_geometry::de::{from_str, opt_size, opt_uint};
use blockwise_geometry::{
    F2fsOptions, FsKind, GptAttributes, Guid, ImageSpec, Layout, LayoutError, LayoutKey, PartKey,
    PartitionLayout, SizeSpec,
};
use serde::de::{self, Deserializer, Visitor};
use serde::Deserialize;

/// A spec that cannot be used, with the key that is wrong.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{key}: {reason}")]
pub struct SpecError {
    /// The key path, e.g. `partition[2].size` or `image.erase-block`.
    pub key: String,
    /// What is wrong and, where possible, what to do.
    pub reason: String,
}

impl SpecError {
    /// A new error for `key`.
    pub fn new(key: impl Into<String>, reason: impl Into<String>) -> Self {
        SpecError {
            key: key.into(),
            reason: reason.into(),
        }
    }
}

/// Kind of a `[[partition.entry]]`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum EntryKind {
    /// Change the metadata of a path that comes from `contents` (or must exist there).
    #[default]
    Existing,
    /// A regular file (created empty when absent from `contents`).
    File,
    /// A directory (created when absent).
    Dir,
    /// A symbolic link to `target`.
    Symlink,
    /// A character device `major:minor`.
    Char,
    /// A block device `major:minor`.
    Block,
    /// A named pipe.
    Fifo,
    /// A socket.
    Socket,
}

impl EntryKind {
    fn parse(s: &str) -> Result<Self, String> {
        Ok(match s {
            "file" => EntryKind::File,
            "dir" | "directory" => EntryKind::Dir,
            "symlink" => EntryKind::Symlink,
            "char" => EntryKind::Char,
            "block" => EntryKind::Block,
            "fifo" => EntryKind::Fifo,
            "socket" => EntryKind::Socket,
            _ => {
                return Err(format!(
                    "{s:?}: must be file, dir, symlink, char, block, fifo or socket"
                ))
            }
        })
    }
}

impl<'de> Deserialize<'de> for EntryKind {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        from_str(d, "an entry kind", EntryKind::parse)
    }
}

const U32_MAX: u64 = u32::MAX as u64;
const MAJOR_MAX: u64 = 4095;
const MINOR_MAX: u64 = (1 << 20) - 1;

/// One `[[partition.entry]]`: ownership, mode and special files without root.
#[derive(Clone, Debug, PartialEq, Eq, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct EntrySpec {
    /// Absolute path inside the filesystem, e.g. `/etc/shadow`.
    pub path: String,
    /// What the entry is.
    #[serde(default)]
    pub kind: EntryKind,
    /// Permission bits (and setuid/setgid/sticky), e.g. 0o640.
    #[serde(default, deserialize_with = "opt_mode")]
    pub mode: Option<u32>,
    /// Owner.
    #[serde(default, deserialize_with = "opt_uint::<_, u32, U32_MAX>")]
    pub uid: Option<u32>,
    /// Group.
    #[serde(default, deserialize_with = "opt_uint::<_, u32, U32_MAX>")]
    pub gid: Option<u32>,
    /// Device major number.
    #[serde(default, deserialize_with = "opt_uint::<_, u32, MAJOR_MAX>")]
    pub major: Option<u32>,
    /// Device minor number.
    #[serde(default, deserialize_with = "opt_uint::<_, u32, MINOR_MAX>")]
    pub minor: Option<u32>,
    /// Symlink target.
    #[serde(default)]
    pub target: Option<String>,
    /// Extended attributes: `(name, value)`, sorted by name; values given as strings,
    /// `0x…` hex for binary.
    #[serde(default, deserialize_with = "xattr_table")]
    pub xattrs: Vec<(String, Vec<u8>)>,
}

/// Mode strings are octal: `"0640"`, `"640"`, `"0o640"`; integers are taken as written.
fn opt_mode<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u32>, D::Error> {
    struct V;
    const WANT: &str = "expected an octal mode string like \"0640\"";
    impl Visitor<'_> for V {
        type Value = u32;
        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("an octal mode string like \"0640\"")
        }
        fn visit_u64<E: de::Error>(self, v: u64) -> Result<u32, E> {
            u32::try_from(v)
                .ok()
                .filter(|&m| m <= 0o7777)
                .ok_or_else(|| E::custom(WANT))
        }
        fn visit_i64<E: de::Error>(self, v: i64) -> Result<u32, E> {
            u64::try_from(v)
                .map_err(|_| E::custom(WANT))
                .and_then(|v| self.visit_u64(v))
        }
        fn visit_str<E: de::Error>(self, s: &str) -> Result<u32, E> {
            let s = s.trim();
            let s = s.strip_prefix("0o").unwrap_or(s);
            u32::from_str_radix(s, 8)
                .ok()
                .filter(|&m| m <= 0o7777)
                .ok_or_else(|| E::custom(WANT))
        }
    }
    d.deserialize_any(V).map(Some)
}

/// An xattr value: text, or `0x…` hex for binary.
struct XattrValue(Vec<u8>);

impl<'de> Deserialize<'de> for XattrValue {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        from_str(d, "a string (\"0x…\" for binary)", |s| {
            match s.strip_prefix("0x") {
                Some(hex) => decode_hex(hex)
                    .map(XattrValue)
                    .ok_or_else(|| format!("{s:?} is not valid hex")),
                None => Ok(XattrValue(s.as_bytes().to_vec())),
            }
        })
    }
}

fn xattr_table<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<(String, Vec<u8>)>, D::Error> {
    let t = BTreeMap::<String, XattrValue>::deserialize(d)?;
    Ok(t.into_iter().map(|(k, v)| (k, v.0)).collect())
}

fn decode_hex(s: &str) -> Option<Vec<u8>> {
    if s.len() % 2 != 0 {
        return None;
    }
    (0..s.len())
        .step_by(2)
        .map(|i| s.get(i..i + 2).and_then(|b| u8::from_str_radix(b, 16).ok()))
        .collect()
}

/// `type = "0x0c"`, `type = "esp"` or `type = 12`.
fn opt_type<'de, D: Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
    struct V;
    impl Visitor<'_> for V {
        type Value = String;
        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("a string like \"0x0c\" or \"esp\"")
        }
        fn visit_u64<E: de::Error>(self, v: u64) -> Result<String, E> {
            Ok(format!("0x{v:02x}"))
        }
        fn visit_i64<E: de::Error>(self, v: i64) -> Result<String, E> {
            Ok(format!("0x{v:02x}"))
        }
        fn visit_str<E: de::Error>(self, s: &str) -> Result<String, E> {
            Ok(s.to_string())
        }
    }
    d.deserialize_any(V).map(Some)
}

/// One `[[partition]]`.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct PartitionSpec {
    /// GPT partition name; default = label.
    #[serde(default)]
    pub name: Option<String>,
    /// Filesystem or content kind.
    pub fs: FsKind,
    /// Requested size ([`SizeSpec::Source`] when absent: only `fs = "raw"` may omit it).
    #[serde(default = "SizeSpec::absent")]
    pub size: SizeSpec,
    /// Directory to populate from, relative to the spec file.
    #[serde(default)]
    pub contents: Option<String>,
    /// Where this filesystem is mounted in the system (`/boot/firmware`): without `contents`,
    /// it is filled from that directory of the partition mounted above it (`mount = "/"`, or
    /// the one partition with `contents` and no `mount`), which keeps only the empty mount
    /// point; with `contents`, that directory of the partition above is emptied.
    #[serde(default)]
    pub mount: Option<String>,
    /// Paths of `contents` left out of this partition: globs over the path inside the
    /// partition (`var/cache/**`, `**/*.pyc`; `*` and `?` stay within one name, `**` spans
    /// any number of directories); a directory matched goes with everything in it.
    #[serde(default)]
    pub exclude: Vec<String>,
    /// File copied verbatim (`fs = "raw"`), relative to the spec file.
    #[serde(default)]
    pub source: Option<String>,
    /// Explicit partition type (MBR byte, GPT GUID or alias); `None` = from `fs`.
    #[serde(default, rename = "type", deserialize_with = "opt_type")]
    pub type_: Option<String>,
    /// Bootable flag (MBR 0x80; GPT legacy-BIOS-bootable attribute).
    #[serde(default, deserialize_with = "blockwise_geometry::de::boolean")]
    pub bootable: bool,
    /// Filesystem label.
    #[serde(default)]
    pub label: Option<String>,
    /// FAT options.
    #[serde(default)]
    pub fat: FatOptions,
    /// ext4 options.
    #[serde(default)]
    pub ext4: Ext4Options,
    /// squashfs options.
    #[serde(default)]
    pub squashfs: SquashfsOptions,
    /// EROFS options.
    #[serde(default)]
    pub erofs: ErofsOptions,
    /// `fs = "verity"`: the partition (by name, else label) the hash tree covers.
    #[serde(default)]
    pub of: Option<String>,
    /// `verity = "appended"`: a hash tree after the filesystem, in this partition.
    #[serde(default)]
    pub verity: Option<VerityMode>,
    /// The filesystem image when it was made before planning (squashfs, the `mkfs.erofs`
    /// and `mksquashfs` backends), filled in by the host (not a spec key).
    #[serde(skip)]
    pub prebuilt: Option<crate::rofs::Prebuilt>,
    /// F2FS options.
    #[serde(default)]
    pub f2fs: F2fsOptions,
    /// exFAT options.
    #[serde(default)]
    pub exfat: ExfatOptions,
    /// Metadata overrides and special files (`[[partition.entry]]`).
    #[serde(default, rename = "entry")]
    pub entries: Vec<EntrySpec>,
    /// Pinned GPT unique partition GUID (PARTUUID); `None` = derived from `image.seed`.
    #[serde(default, deserialize_with = "opt_uuid")]
    pub uuid: Option<Guid>,
    /// Pinned filesystem UUID (ext4, swap); `None` = derived from `image.seed`.
    #[serde(default, deserialize_with = "opt_uuid")]
    pub fs_uuid: Option<Guid>,
    /// Pinned FAT volume ID (serial number); `None` = derived from `image.seed`.
    #[serde(default, deserialize_with = "opt_volume_id")]
    pub volume_id: Option<u32>,
    /// Explicit start (a size like `"8MiB"` or a number of bytes); `None` = after the
    /// previous partition, on the erase block.
    #[serde(default, deserialize_with = "opt_size")]
    pub start: Option<u64>,
    /// Listed in the partition table (genimage's `in-partition-table`); default true.
    #[serde(default = "yes", deserialize_with = "blockwise_geometry::de::boolean")]
    pub in_partition_table: bool,
    /// GPT attribute bits (`["read-only", "no-auto", 50]`); `legacy-bios-bootable` is
    /// `bootable = true`.
    #[serde(default)]
    pub attributes: GptAttributes,
    /// A/B slots (`["a", "b"]`): one partition per slot, names and labels suffixed.
    #[serde(default)]
    pub slots: Vec<String>,
    /// MBR: primary although it follows logical partitions (genimage's `forced-primary`).
    #[serde(default, deserialize_with = "blockwise_geometry::de::boolean")]
    pub primary: bool,
    /// Files and directories copied into the filesystem beside `contents`
    /// (`["u-boot.bin", { source = "Image", dest = "/boot/Image" }]`; see [`crate::files`]).
    #[serde(default)]
    pub files: Vec<crate::files::FileSpec>,
    /// GPT: mirror this partition into a hybrid MBR under this MBR type (byte or alias;
    /// genimage's `partition-type` with `partition-table-type = "hybrid"`).
    #[serde(default, deserialize_with = "opt_type")]
    pub mbr_type: Option<String>,
}

fn yes() -> bool {
    true
}

/// A UUID string like `"0fc63daf-8483-4772-8e79-3d69d8477de4"` (braces allowed).
fn opt_uuid<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Guid>, D::Error> {
    from_str(d, "a UUID like \"0fc63daf-8483-4772-8e79-3d69d8477de4\"", |s| {
        s.parse::<Guid>().map_err(|_| {
            format!("{s:?} is not a UUID (8-4-4-4-12 hex digits, like \"0fc63daf-8483-4772-8e79-3d69d8477de4\")")
        })
    })
    .map(Some)
}

/// Parses a FAT volume ID: `"1234-ABCD"` (as `blkid` prints it), `"0x1234abcd"` or a number.
pub fn parse_volume_id(s: &str) -> Result<u32, String> {
    let t = s.trim();
    let bad = || format!("{s:?} is not a FAT volume ID (like \"1234-ABCD\" or \"0x1234abcd\")");
    let hex = |h: &str| {
        (!h.is_empty() && h.len() <= 8 && h.bytes().all(|b| b.is_ascii_hexdigit()))
            .then(|| u32::from_str_radix(h, 16).ok())
            .flatten()
    };
    if let Some((hi, lo)) = t.split_once('-') {
        if hi.len() == 4 && lo.len() == 4 {
            if let (Some(h), Some(l)) = (hex(hi), hex(lo)) {
                return Ok((h << 16) | l);
            }
        }
        return Err(bad());
    }
    if let Some(h) = t.strip_prefix("0x").or_else(|| t.strip_prefix("0X")) {
        return hex(h).ok_or_else(bad);
    }
    t.parse::<u32>().map_err(|_| bad())
}

fn opt_volume_id<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u32>, D::Error> {
    struct V;
    impl Visitor<'_> for V {
        type Value = u32;
        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("a FAT volume ID like \"1234-ABCD\" or \"0x1234abcd\"")
        }
        fn visit_u64<E: de::Error>(self, v: u64) -> Result<u32, E> {
            u32::try_from(v).map_err(|_| E::custom(format!("{v} does not fit 32 bits")))
        }
        fn visit_i64<E: de::Error>(self, v: i64) -> Result<u32, E> {
            u32::try_from(v).map_err(|_| E::custom(format!("{v} does not fit 32 bits")))
        }
        fn visit_str<E: de::Error>(self, s: &str) -> Result<u32, E> {
            parse_volume_id(s).map_err(E::custom)
        }
    }
    d.deserialize_any(V).map(Some)
}

impl PartitionSpec {
    /// A partition of `fs` with `size` and every option at its default.
    #[must_use]
    pub fn new(fs: FsKind, size: SizeSpec) -> Self {
        PartitionSpec {
            name: None,
            fs,
            size,
            contents: None,
            mount: None,
            exclude: Vec::new(),
            source: None,
            type_: None,
            bootable: false,
            label: None,
            fat: FatOptions::default(),
            ext4: Ext4Options::default(),
            squashfs: SquashfsOptions::default(),
            erofs: ErofsOptions::default(),
            of: None,
            verity: None,
            prebuilt: None,
            f2fs: F2fsOptions::default(),
            exfat: ExfatOptions::default(),
            entries: Vec::new(),
            uuid: None,
            fs_uuid: None,
            volume_id: None,
            start: None,
            in_partition_table: true,
            attributes: GptAttributes::NONE,
            slots: Vec::new(),
            primary: false,
            files: Vec::new(),
            mbr_type: None,
        }
    }

    /// What the layout planner needs of this partition. `attributes` naming bit 2
    /// (`legacy-bios-bootable`) is `bootable`.
    #[must_use]
    pub fn layout(&self) -> PartitionLayout {
        let (attributes, boot_bit) = self.attributes.split_bootable();
        PartitionLayout {
            name: self.name.clone(),
            fs: self.fs,
            size: self.size,
            type_: self.type_.clone(),
            bootable: self.bootable || boot_bit,
            label: self.label.clone(),
            uuid: self.uuid,
            start: self.start,
            in_table: self.in_partition_table,
            attributes,
            slots: self.slots.clone(),
            primary: self.primary,
            mbr_type: self.mbr_type.clone(),
        }
    }

    /// The filesystem label of the copy for `slot`: `label`, suffixed `_SLOT` when slotted.
    #[must_use]
    pub fn label_for(&self, slot: Option<&str>) -> Option<String> {
        self.label
            .as_deref()
            .map(|l| blockwise_geometry::slots::with_suffix(l, slot))
    }

    /// The 0-based position of `slot` in `slots` (0 without slots).
    #[must_use]
    pub fn slot_position(&self, slot: Option<&str>) -> usize {
        slot.and_then(|s| self.slots.iter().position(|x| x == s))
            .unwrap_or(0)
    }
}

/// A whole spec.
#[derive(Clone, Debug, PartialEq, Eq, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Spec {
    /// The `[image]` table.
    #[serde(default)]
    pub image: ImageSpec,
    /// The `[[partition]]` array, in order.
    #[serde(default, rename = "partition")]
    pub partitions: Vec<PartitionSpec>,
    /// The `[[raw]]` array: files written at fixed offsets outside the partitions.
    #[serde(default)]
    pub raw: Vec<RawSpec>,
}

/// One `[[raw]]`: a file written at a fixed offset outside every partition (a bootloader:
/// U-Boot at 8 KiB on Allwinner, idbloader at sector 64 on Rockchip).
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct RawSpec {
    /// The file to write, relative to the spec file.
    pub source: String,
    /// Offset in bytes or with a unit (`"8KiB"`).
    #[serde(default, deserialize_with = "opt_size")]
    pub offset: Option<u64>,
    /// Offset in logical sectors of `image.sector-size` (`64`), instead of `offset`.
    #[serde(default, deserialize_with = "opt_uint::<_, u64, U64_MAX>")]
    pub offset_sectors: Option<u64>,
    /// Bytes reserved for it (at least the file's length); `None` = the file's length,
    /// filled in by the host before planning.
    #[serde(default, deserialize_with = "opt_size")]
    pub size: Option<u64>,
    /// The file's length, filled in by the host (not a spec key).
    #[serde(skip)]
    pub source_len: Option<u64>,
}

const U64_MAX: u64 = u64::MAX;

impl RawSpec {
    /// A raw write of `source` at `offset` bytes.
    #[must_use]
    pub fn at(source: impl Into<String>, offset: u64) -> Self {
        RawSpec {
            source: source.into(),
            offset: Some(offset),
            offset_sectors: None,
            size: None,
            source_len: None,
        }
    }

    /// The offset in bytes (`offset`, or `offset-sectors` × the sector size).
    #[must_use]
    pub fn offset_bytes(&self, sector: u64) -> Option<u64> {
        self.offset
            .or_else(|| self.offset_sectors.and_then(|s| s.checked_mul(sector)))
    }
}

impl Spec {
    /// Parses and validates a TOML spec.
    ///
    /// ```
    /// let spec = blockwise_image::Spec::from_toml(r#"
    ///     [image]
    ///     size = "1GiB"
    ///     [[partition]]
    ///     fs = "fat32"
    ///     size = "256MiB"
    /// "#).unwrap();
    /// assert_eq!(spec.partitions.len(), 1);
    /// let err = blockwise_image::Spec::from_toml("[image]\nsize = \"4XB\"").unwrap_err();
    /// assert_eq!(err.key, "image.size");
    /// ```
    pub fn from_toml(text: &str) -> Result<Spec, SpecError> {
        let de = toml::Deserializer::parse(text).map_err(|e| toml_syntax(&e))?;
        let mut spec: Spec = serde_path_to_error::deserialize(de)
            .map_err(|e| from_serde(e.path(), e.inner().message()))?;
        spec.validate()?;
        crate::auto::normalise(&mut spec);
        spec.pin_seed();
        Ok(spec)
    }

    /// Parses and validates a spec from any serde data format — a JSON value, a Python dict
    /// through `pythonize`, a JS object through `serde-wasm-bindgen` — with the same keys as
    /// the TOML file. `message` turns the format's error into its bare message (without
    /// positions).
    ///
    /// ```
    /// let json: serde_json::Value = serde_json::json!({
    ///     "image": { "size": "1GiB" },
    ///     "partition": [ { "fs": "fat32", "size": 268435456 } ]
    /// });
    /// let spec = blockwise_image::Spec::from_deserializer(json, |e| e.to_string()).unwrap();
    /// assert_eq!(spec.partitions[0].size, blockwise_geometry::SizeSpec::Bytes(256 << 20));
    /// ```
    pub fn from_deserializer<'de, D: Deserializer<'de>>(
        de: D,
        message: impl Fn(&D::Error) -> String,
    ) -> Result<Spec, SpecError> {
        let mut spec: Spec = serde_path_to_error::deserialize(de)
            .map_err(|e| from_serde(e.path(), &message(e.inner())))?;
        spec.validate()?;
        crate::auto::normalise(&mut spec);
        spec.pin_seed();
        Ok(spec)
    }

    /// `seed = N` is the seed at once; `"random"` and no seed are resolved by the front end
    /// once the inputs are known ([`crate::resolve_seed`]).
    fn pin_seed(&mut self) {
        if let blockwise_geometry::SeedChoice::Fixed(n) = self.image.seed_choice {
            self.image.seed = n;
        }
    }

    /// The planner's input.
    #[must_use]
    pub fn layout(&self) -> Layout {
        Layout {
            image: self.image.clone(),
            partitions: self.partitions.iter().map(PartitionSpec::layout).collect(),
        }
    }

    /// Every check that needs no files: the layout's cross-key rules, each partition's
    /// contents rules, and the filesystem crates' own option checks. Also run for specs built
    /// in code (CLI flags, bindings).
    pub fn validate(&self) -> Result<(), SpecError> {
        for (i, p) in self.partitions.iter().enumerate() {
            if p.size == SizeSpec::Source
                && !matches!(
                    p.fs,
                    FsKind::Raw | FsKind::Squashfs | FsKind::Erofs | FsKind::Verity
                )
            {
                return Err(SpecError::new(
                    pkey(i, "size"),
                    "missing; a size like \"256MiB\" or \"fill\"",
                ));
            }
        }
        crate::auto::validate(self)?;
        self.layout().validate().map_err(layout_error)?;
        for (i, p) in self.partitions.iter().enumerate() {
            p.validate(i, &self.image)?;
        }
        crate::rofs::validate(self)?;
        let sb = self.image.sector_size.bytes_u64();
        for (i, r) in self.raw.iter().enumerate() {
            let k = |s: &str| format!("raw[{}].{s}", i + 1);
            match (r.offset, r.offset_sectors) {
                (Some(_), Some(_)) => {
                    return Err(SpecError::new(
                        k("offset-sectors"),
                        "give either offset or offset-sectors, not both",
                    ))
                }
                (None, None) => {
                    return Err(SpecError::new(
                        k("offset"),
                        "missing; where to write the file, like \"8KiB\" (or offset-sectors = 64)",
                    ))
                }
                _ => {}
            }
            if r.offset_bytes(sb).is_none() {
                return Err(SpecError::new(k("offset-sectors"), "too large"));
            }
            if self.image.table == blockwise_geometry::TableKind::None {
                return Err(SpecError::new(
                    "raw",
                    "[[raw]] writes outside the partitions, and table = \"none\" has none: the filesystem is the whole image",
                ));
            }
            if r.size == Some(0) {
                return Err(SpecError::new(k("size"), "must not be 0"));
            }
            if r.source.is_empty() {
                return Err(SpecError::new(k("source"), "empty; the file to write"));
            }
        }
        Ok(())
    }
}

impl PartitionSpec {
    fn validate(&self, i: usize, img: &ImageSpec) -> Result<(), SpecError> {
        let k = |s: &str| pkey(i, s);
        match self.fs {
            FsKind::Raw if self.source.is_none() => {
                return Err(SpecError::new(
                    k("source"),
                    "fs = \"raw\" needs source = \"FILE\" (the bytes to copy)",
                ));
            }
            FsKind::Raw => {}
            _ if self.source.is_some() => {
                return Err(SpecError::new(
                    k("source"),
                    format!("only fs = \"raw\" takes a source (this partition is {}); use contents = \"DIR\" for filesystems", self.fs),
                ));
            }
            _ => {}
        }
        if let Some(m) = &self.mount {
            let ok = m.starts_with('/')
                && m.split('/').all(|c| c != "." && c != "..")
                && !m.contains('\0');
            if !ok {
                return Err(SpecError::new(
                    k("mount"),
                    format!("{m:?} is not an absolute path like \"/boot/firmware\" (no . or ..)"),
                ));
            }
        }
        let tree_fs = self.fs.is_fat() || self.fs.is_ext() || self.fs == FsKind::Exfat;
        if (self.mount.is_some() || !self.exclude.is_empty()) && !tree_fs {
            let key = if self.mount.is_some() {
                "mount"
            } else {
                "exclude"
            };
            return Err(SpecError::new(
                k(key),
                format!("fs = \"{}\": mount points and exclude are for FAT, exFAT and ext4 partitions filled from contents", self.fs),
            ));
        }
        for (n, g) in self.exclude.iter().enumerate() {
            if g.trim_matches('/').is_empty() || g.contains('\0') {
                return Err(SpecError::new(
                    format!("{}[{}]", k("exclude"), n + 1),
                    format!("{g:?} is not a path pattern (it would leave out everything)"),
                ));
            }
        }
        if self.contents.is_some()
            && matches!(
                self.fs,
                FsKind::Raw | FsKind::None | FsKind::Swap | FsKind::Verity
            )
        {
            return Err(SpecError::new(
                k("contents"),
                format!(
                    "fs = \"{}\" has no filesystem to fill; use fat32, ext4, f2fs, erofs or squashfs",
                    self.fs
                ),
            ));
        }
        if let Some(why) = crate::files::files_unsupported(self) {
            return Err(SpecError::new(k("files"), why));
        }
        for (n, f) in self.files.iter().enumerate() {
            if let Err(why) = f.dest_components() {
                return Err(SpecError::new(format!("{}[{}]", k("files"), n + 1), why));
            }
        }
        if self.fs_uuid.is_some()
            && !matches!(
                self.fs,
                FsKind::Ext4
                    | FsKind::Ext2
                    | FsKind::Ext3
                    | FsKind::Swap
                    | FsKind::Exfat
                    | FsKind::F2fs
                    | FsKind::Erofs
                    | FsKind::Verity
            )
        {
            return Err(SpecError::new(
                k("fs-uuid"),
                if self.fs.is_fat() {
                    "FAT has no UUID, only a 32-bit volume ID: use volume-id = \"1234-ABCD\""
                        .to_string()
                } else {
                    format!(
                        "fs = \"{}\" has no filesystem UUID to set; it applies to ext4, f2fs, erofs, verity, swap and exfat (its volume GUID)",
                        self.fs
                    )
                },
            ));
        }
        if self.volume_id.is_some() && !self.fs.is_fat() && self.fs != FsKind::Exfat {
            return Err(SpecError::new(
                k("volume-id"),
                format!(
                    "only FAT and exFAT have a volume ID (this partition is {}){}",
                    self.fs,
                    if self.fs.is_ext() {
                        "; use fs-uuid for ext4"
                    } else {
                        ""
                    }
                ),
            ));
        }
        if !self.attributes.is_empty() && img.table != blockwise_geometry::TableKind::Gpt {
            return Err(SpecError::new(
                k("attributes"),
                format!(
                    "only GPT stores partition attributes (this table is {}); use table = \"gpt\", or bootable = true for the MBR boot flag",
                    img.table
                ),
            ));
        }
        if self.fs == FsKind::F2fs {
            // sload.f2fs copies the tree; entries can only change modes and owners of what
            // it copied (set in the inodes afterwards).
            for (j, en) in self.entries.iter().enumerate() {
                let ek = |s: &str| format!("{}.entry[{}].{s}", pbase(i), j + 1);
                if !en.xattrs.is_empty() {
                    return Err(SpecError::new(
                        ek("xattrs"),
                        "sload.f2fs stores no extended attributes; use fs = \"ext4\"",
                    ));
                }
                if matches!(
                    en.kind,
                    EntryKind::Char | EntryKind::Block | EntryKind::Fifo | EntryKind::Socket
                ) {
                    return Err(SpecError::new(
                        ek("kind"),
                        "sload.f2fs stores regular files, directories and symlinks only; use fs = \"ext4\" for special files",
                    ));
                }
                if en.target.is_some() {
                    return Err(SpecError::new(
                        ek("target"),
                        "an F2FS entry changes the mode and owners of a path from contents; a symlink's target comes from contents",
                    ));
                }
            }
        }
        if !self.entries.is_empty()
            && !matches!(
                self.fs,
                FsKind::Ext4
                    | FsKind::Ext2
                    | FsKind::Ext3
                    | FsKind::Exfat
                    | FsKind::F2fs
                    | FsKind::Erofs
                    | FsKind::Squashfs
            )
        {
            return Err(SpecError::new(
                k("entry"),
                "ownership, modes and special files need a filesystem that stores them: use fs = \"ext4\", \"erofs\" or \"squashfs\" (exfat takes entries too, keeping only the read-only attribute)",
            ));
        }
        if self.fs != FsKind::F2fs && self.f2fs != F2fsOptions::default() {
            return Err(SpecError::new(
                k("f2fs"),
                format!(
                    "f2fs options apply to fs = \"f2fs\" (this partition is {})",
                    self.fs
                ),
            ));
        }
        if let Err((key, reason)) = self.f2fs.validate() {
            return Err(SpecError::new(k(&format!("f2fs.{key}")), reason));
        }
        // Every copy's label: slots add a suffix.
        for slot in blockwise_geometry::slots::each(&self.slots) {
            let Some(label) = self.label_for(slot) else {
                break;
            };
            let label = &label;
            if self.fs.is_fat() {
                blockwise_fat::validate_label(label).map_err(|e| fat_error(i, e))?;
            } else if self.fs.is_ext() {
                blockwise_ext4::validate_label(label).map_err(|e| ext4_error(i, e))?;
            } else if self.fs == FsKind::Exfat {
                blockwise_exfat::validate_label(label).map_err(|e| exfat_error(i, e))?;
            } else if self.fs == FsKind::Swap {
                crate::swap::validate_label(label).map_err(|r| SpecError::new(k("label"), r))?;
            } else if self.fs == FsKind::F2fs {
                blockwise_geometry::fsplan::f2fs::validate_label(label)
                    .map_err(|r| SpecError::new(k("label"), r))?;
            }
        }
        if !self.slots.is_empty() && (self.fs_uuid.is_some() || self.volume_id.is_some()) {
            return Err(SpecError::new(
                k(if self.fs_uuid.is_some() { "fs-uuid" } else { "volume-id" }),
                "pins one filesystem ID, but slots make several filesystems; leave it out (each slot's ID derives from image.seed)",
            ));
        }
        self.fat
            .validate(img.sector_size.bytes(), img.erase_block)
            .map_err(|e| fat_error(i, e))?;
        self.ext4.validate().map_err(|e| ext4_error(i, e))?;
        self.exfat
            .validate(img.sector_size.bytes(), img.erase_block)
            .map_err(|e| exfat_error(i, e))?;
        for (j, en) in self.entries.iter().enumerate() {
            let ek = |s: &str| format!("{}.entry[{}].{s}", pbase(i), j + 1);
            if !en.path.starts_with('/') || en.path.split('/').any(|c| c == ".." || c == ".") {
                return Err(SpecError::new(
                    ek("path"),
                    format!(
                        "{:?} must be an absolute path like \"/etc/shadow\" without . or ..",
                        en.path
                    ),
                ));
            }
            if let Some(c) = en.path.split('/').find(|c| c.len() > 255) {
                return Err(SpecError::new(
                    ek("path"),
                    format!(
                        "the name {:?}… is {} bytes; a file name holds at most 255",
                        c.chars().take(32).collect::<String>(),
                        c.len()
                    ),
                ));
            }
            if en.path.contains('\0') {
                return Err(SpecError::new(ek("path"), "contains a NUL byte"));
            }
            let dev = matches!(en.kind, EntryKind::Char | EntryKind::Block);
            if dev && (en.major.is_none() || en.minor.is_none()) {
                return Err(SpecError::new(
                    ek("major"),
                    "device entries need major and minor",
                ));
            }
            if !dev && (en.major.is_some() || en.minor.is_some()) {
                return Err(SpecError::new(
                    ek("major"),
                    "only kind = \"char\" or \"block\" takes major/minor",
                ));
            }
            if (en.kind == EntryKind::Symlink) != en.target.is_some() {
                return Err(SpecError::new(
                    ek("target"),
                    "kind = \"symlink\" needs target, and only symlinks take one",
                ));
            }
        }
        Ok(())
    }
}

// ---- The one place where fields become spec keys. ----

fn pbase(i: usize) -> String {
    format!("partition[{}]", i.saturating_add(1))
}

pub(crate) fn pkey(i: usize, k: &str) -> String {
    format!("{}.{k}", pbase(i))
}

/// A layout error as a spec error (its key prints as the spec key).
#[must_use]
pub fn layout_error(e: LayoutError) -> SpecError {
    SpecError::new(e.key.to_string(), e.reason)
}

/// A FAT planner error about the partition at 0-based spec index `i`, keyed.
#[must_use]
pub fn fat_error(i: usize, e: blockwise_fat::Invalid) -> SpecError {
    use blockwise_fat::Field;
    let key = match e.field {
        Field::EraseBlock => LayoutKey::Image(blockwise_geometry::ImageKey::EraseBlock).to_string(),
        Field::Fs => LayoutKey::Partition(i, PartKey::Fs).to_string(),
        Field::Size | Field::Start => LayoutKey::Partition(i, PartKey::Size).to_string(),
        Field::Label => pkey(i, "label"),
        other => pkey(i, &format!("fat.{}", other.option_key().unwrap_or("?"))),
    };
    SpecError::new(key, e.reason)
}

/// An ext4 planner error about the partition at 0-based spec index `i`, keyed.
#[must_use]
pub fn ext4_error(i: usize, e: blockwise_ext4::Invalid) -> SpecError {
    use blockwise_ext4::Field;
    let key = match e.field {
        Field::Size => LayoutKey::Partition(i, PartKey::Size).to_string(),
        Field::Label => pkey(i, "label"),
        other => pkey(i, &format!("ext4.{}", other.option_key().unwrap_or("?"))),
    };
    SpecError::new(key, e.reason)
}

/// An exFAT planner error about the partition at 0-based spec index `i`, keyed.
#[must_use]
pub fn exfat_error(i: usize, e: blockwise_exfat::Invalid) -> SpecError {
    use blockwise_exfat::Field;
    let key = match e.field {
        Field::EraseBlock => LayoutKey::Image(blockwise_geometry::ImageKey::EraseBlock).to_string(),
        Field::Size | Field::Start => LayoutKey::Partition(i, PartKey::Size).to_string(),
        Field::Label => pkey(i, "label"),
        other => pkey(i, &format!("exfat.{}", other.option_key().unwrap_or("?"))),
    };
    SpecError::new(key, e.reason)
}

/// A TOML syntax error: key `(toml)`, the first line of the message plus its detail.
fn toml_syntax(e: &toml::de::Error) -> SpecError {
    let msg = e.to_string();
    let first = msg.lines().next().unwrap_or("invalid TOML").to_string();
    let detail = e.message().trim().to_string();
    SpecError::new(
        "(toml)",
        if detail.is_empty() || detail == first {
            first
        } else {
            format!("{first}: {detail}")
        },
    )
}

/// Key path of a serde path, with partition and entry numbers 1-based.
fn key_of(path: &serde_path_to_error::Path) -> String {
    use serde_path_to_error::Segment;
    let mut out = String::new();
    for seg in path.iter() {
        match seg {
            Segment::Seq { index } => out.push_str(&format!("[{}]", index.saturating_add(1))),
            Segment::Map { key } | Segment::Enum { variant: key } => {
                if !out.is_empty() {
                    out.push('.');
                }
                out.push_str(key);
            }
            Segment::Unknown => {}
        }
    }
    out
}

/// Names in backticks, in order (serde's "unknown field `x`, expected `a` or `b`").
fn backticked(msg: &str) -> Vec<&str> {
    msg.split('`').skip(1).step_by(2).collect()
}

/// What the table around `key` is called in messages.
fn table_name(parent: &str) -> &'static str {
    let last = parent.rsplit('.').next().unwrap_or("");
    let last = last.split('[').next().unwrap_or("");
    match last {
        "" => "the top level",
        "image" => "[image]",
        "partition" => "[[partition]]",
        "entry" => "[[partition.entry]]",
        "raw" => "[[raw]]",
        "fat" => "fat",
        "ext4" => "ext4",
        "squashfs" => "squashfs",
        "erofs" => "erofs",
        "f2fs" => "f2fs",
        "exfat" => "exfat",
        "xattrs" => "xattrs",
        _ => "this table",
    }
}

/// A serde error (at `path`, with the format's bare `message`) as a spec error.
fn from_serde(path: &serde_path_to_error::Path, message: &str) -> SpecError {
    let key = key_of(path);
    if let Some(rest) = message.strip_prefix("unknown field ") {
        let names = backticked(rest);
        let mut known: Vec<&str> = names.iter().skip(1).copied().collect();
        known.sort_unstable();
        let unknown = names.first().copied().unwrap_or("");
        let parent = key
            .strip_suffix(unknown)
            .unwrap_or(&key)
            .trim_end_matches('.');
        let hint = closest(unknown, &known)
            .map(|c| format!(" (did you mean {c:?}?)"))
            .unwrap_or_default();
        return SpecError::new(
            key.clone(),
            format!(
                "unknown key{hint}; {} takes {}",
                table_name(parent),
                known.join(", ")
            ),
        );
    }
    if let Some(rest) = message.strip_prefix("missing field ") {
        let field = backticked(rest).first().copied().unwrap_or("");
        let reason = match field {
            "fs" => format!("missing; one of {}", FsKind::CHOICES),
            "path" => "missing; the absolute path inside the filesystem".to_string(),
            "source" => "missing; the file to write, relative to the spec file".to_string(),
            _ => "missing".to_string(),
        };
        let key = if key.is_empty() {
            field.to_string()
        } else {
            format!("{key}.{field}")
        };
        return SpecError::new(key, reason);
    }
    let reason = message
        .strip_prefix("invalid type: ")
        .map_or_else(|| message.to_string(), |r| format!("wrong type: {r}"));
    SpecError::new(if key.is_empty() { "(spec)".into() } else { key }, reason)
}

fn closest<'k>(key: &str, known: &[&'k str]) -> Option<&'k str> {
    known
        .iter()
        .map(|k| (edit_distance(key, k), *k))
        .filter(|(d, _)| *d <= 2)
        .min()
        .map(|(_, k)| k)
}

fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut cur = vec![i + 1];
        for (j, cb) in b.iter().enumerate() {
            let sub = prev.get(j).copied().unwrap_or(0) + usize::from(ca != *cb);
            let del = prev.get(j + 1).copied().unwrap_or(0) + 1;
            let ins = cur.get(j).copied().unwrap_or(0) + 1;
            cur.push(sub.min(del).min(ins));
        }
        prev = cur;
    }
    prev.last().copied().unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use blockwise_geometry::{plan, DiskId};
    use proptest::prelude::*;

    fn err(text: &str) -> String {
        Spec::from_toml(text).unwrap_err().to_string()
    }

    const BASE: &str = "[image]\nsize = \"1GiB\"\n";

    #[test]
    fn errors_name_the_key() {
        let e = err(&format!("{BASE}[[partition]]\nfs=\"none\"\nsize=\"fill\"\n[[partition]]\nfs=\"none\"\nsize=\"fill\""));
        assert_eq!(
            e,
            "partition[1].size: \"fill\" is only allowed on the last partition"
        );
        let e = err(&format!(
            "{BASE}sise = 3\n[[partition]]\nfs=\"none\"\nsize=1"
        ));
        assert!(
            e.starts_with("image.sise: unknown key (did you mean \"size\"?)"),
            "{e}"
        );
        let e = err("[image]\nsize = \"4XB\"\n[[partition]]\nfs=\"none\"\nsize=1");
        assert!(
            e.starts_with("image.size: \"4XB\" has an unknown unit"),
            "{e}"
        );
        let e = err(&format!("{BASE}[[partition]]\nfs=\"raw\""));
        assert!(e.starts_with("partition[1].source:"), "{e}");
        let e = err(&format!(
            "{BASE}[[partition]]\nfs=\"fat32\"\nsize=1\nfat={{clustr=4096}}"
        ));
        assert!(e.starts_with("partition[1].fat.clustr: unknown key"), "{e}");
        let e = err("[image\n");
        assert!(e.starts_with("(toml):"), "{e}");
    }

    #[test]
    fn every_error_names_a_key_that_exists() {
        // (spec text, expected key) — each key is one a user can write.
        let cases: &[(&str, &str)] = &[
            ("[[partition]]\nfs=\"fat32\"\nsize=\"1MiB\"\nfat={cluster=3000}", "partition[1].fat.cluster"),
            ("[[partition]]\nfs=\"fat32\"\nsize=\"1MiB\"\nfat={fats=3}", "partition[1].fat.fats"),
            ("[[partition]]\nfs=\"fat32\"\nsize=\"1MiB\"\nfat={sector-size=1024}", "partition[1].fat.sector-size"),
            ("[[partition]]\nfs=\"fat32\"\nsize=\"1MiB\"\nlabel=\"a.b\"", "partition[1].label"),
            ("[[partition]]\nfs=\"exfat\"\nsize=\"1MiB\"\nexfat={cluster=3000}", "partition[1].exfat.cluster"),
            ("[[partition]]\nfs=\"exfat\"\nsize=\"1MiB\"\nexfat={boundary=\"1MiB\"}", "partition[1].exfat.boundary"),
            ("[[partition]]\nfs=\"exfat\"\nsize=\"1MiB\"\nlabel=\"twelve chars\"", "partition[1].label"),
            ("[[partition]]\nfs=\"ext4\"\nsize=\"1MiB\"\nlabel=\"seventeen-chars-x\"", "partition[1].label"),
            ("[[partition]]\nfs=\"ext4\"\nsize=\"1MiB\"\next4={block-size=8192}", "partition[1].ext4.block-size"),
            ("[[partition]]\nfs=\"ext4\"\nsize=\"1MiB\"\next4={inode-size=100}", "partition[1].ext4.inode-size"),
            ("[[partition]]\nfs=\"ext4\"\nsize=\"1MiB\"\next4={reserved-percent=60}", "partition[1].ext4.reserved-percent"),
            ("[[partition]]\nfs=\"ext4\"\nsize=\"1MiB\"\next4={stride=0}", "partition[1].ext4.stride"),
            ("[[partition]]\nfs=\"ext4\"\nsize=\"1MiB\"\next4={features=[\"A B\"]}", "partition[1].ext4.features"),
            ("[[partition]]\nfs=\"ext4\"\nsize=\"1MiB\"\next4={backend=\"x\"}", "partition[1].ext4.backend"),
            ("[[partition]]\nfs=\"ext4\"\nsize=\"1MiB\"\n[[partition.entry]]\npath=\"etc\"", "partition[1].entry[1].path"),
            ("[[partition]]\nfs=\"ext4\"\nsize=\"1MiB\"\n[[partition.entry]]\npath=\"/a\"\nmode=\"999\"", "partition[1].entry[1].mode"),
            ("[[partition]]\nfs=\"ext4\"\nsize=\"1MiB\"\n[[partition.entry]]\npath=\"/a\"\nmajor=5000", "partition[1].entry[1].major"),
            ("[[partition]]\nfs=\"ext4\"\nsize=\"1MiB\"\n[[partition.entry]]\nkind=\"file\"", "partition[1].entry[1].path"),
            ("[[partition]]\nsize=\"1MiB\"", "partition[1].fs"),
            ("[[partition]]\nfs=\"fat32\"", "partition[1].size"),
            ("[[partition]]\nfs=\"xfs\"\nsize=1", "partition[1].fs"),
            ("[[partition]]\nfs=\"none\"\nsize=1\ntype=\"0x05\"", "partition[1].type"),
            ("[image]\nerase-block=\"3MiB\"\n[[partition]]\nfs=\"none\"\nsize=1", "image.erase-block"),
            ("[image]\ntable=\"apm\"\n[[partition]]\nfs=\"none\"\nsize=1", "image.table"),
            ("[image]\nsector-size=1024\n[[partition]]\nfs=\"none\"\nsize=1", "image.sector-size"),
            ("[image]\ndisk-id=\"zz\"\n[[partition]]\nfs=\"none\"\nsize=1", "image.disk-id"),
            ("[image]\ntimestamp=-1\n[[partition]]\nfs=\"none\"\nsize=1", "image.timestamp"),
            ("[image]\nsize=\"1GiB\"", "partition"),
            ("bogus=1", "bogus"),
            ("[[partition]]\nfs=\"none\"\nsize=1\nattributes=[\"read-only\"]", "partition[1].attributes"),
            ("[image]\ntable=\"gpt\"\n[[partition]]\nfs=\"none\"\nsize=1\nattributes=[\"bogus\"]", "partition[1].attributes"),
            ("[[partition]]\nfs=\"none\"\nsize=1\nname=\"x\"\nslots=[\"a\"]", "partition[1].slots"),
            ("[[partition]]\nfs=\"f2fs\"\nsize=\"1MiB\"", "partition[1].size"),
            ("[[partition]]\nfs=\"f2fs\"\nsize=\"1GiB\"\nf2fs={segments-per-section=0}", "partition[1].f2fs.segments-per-section"),
            ("[[partition]]\nfs=\"f2fs\"\nsize=\"1GiB\"\nf2fs={sections-per-zone=2000}", "partition[1].f2fs.sections-per-zone"),
            ("[[partition]]\nfs=\"f2fs\"\nsize=\"1GiB\"\nf2fs={segs=2}", "partition[1].f2fs.segs"),
            ("[[partition]]\nfs=\"ext4\"\nsize=\"1GiB\"\nf2fs={segments-per-section=2}", "partition[1].f2fs"),
            ("[[partition]]\nfs=\"f2fs\"\nsize=\"1GiB\"\n[[partition.entry]]\npath=\"/a\"\nkind=\"fifo\"", "partition[1].entry[1].kind"),
            ("[[partition]]\nfs=\"f2fs\"\nsize=\"1GiB\"\n[[partition.entry]]\npath=\"/a\"\nxattrs={\"user.a\"=\"b\"}", "partition[1].entry[1].xattrs"),
        ];
        let known = [
            "image.size",
            "image.erase-block",
            "image.sector-size",
            "image.table",
            "image.first-partition",
            "image.disk-id",
            "image.seed",
            "image.timestamp",
            "partition",
            "bogus",
        ];
        let part_keys = [
            "fs",
            "size",
            "name",
            "contents",
            "source",
            "type",
            "bootable",
            "label",
            "fat.cluster",
            "fat.fats",
            "fat.sector-size",
            "fat.align-fat",
            "exfat.cluster",
            "exfat.boundary",
            "ext4.block-size",
            "ext4.inode-size",
            "ext4.reserved-percent",
            "ext4.stride",
            "ext4.stripe-width",
            "ext4.features",
            "ext4.backend",
            "ext4.profile",
            "ext4.journal",
            "ext4.journal-size",
            "ext4.inodes",
            "entry[1].path",
            "entry[1].mode",
            "entry[1].major",
            "entry[1].kind",
            "entry[1].xattrs",
            "attributes",
            "slots",
            "f2fs",
            "f2fs.segments-per-section",
            "f2fs.sections-per-zone",
            "f2fs.segs",
        ];
        for (text, want) in cases {
            // Parsing, validation or planning: whichever refuses names the key.
            let e = match Spec::from_toml(text) {
                Err(e) => e,
                Ok(spec) => match crate::plan_full(&spec, &[], 0) {
                    Err(crate::Error::Spec(e)) => e,
                    other => panic!("{text}: {other:?}"),
                },
            };
            assert_eq!(&e.key, want, "{text}: {e}");
            let exists = known.contains(&e.key.as_str())
                || e.key
                    .strip_prefix("partition[1].")
                    .is_some_and(|k| part_keys.contains(&k));
            assert!(
                exists || e.key == "bogus",
                "{text}: {} is not a spec key",
                e.key
            );
        }
        // Planner errors are keyed by the same map.
        let spec = Spec::from_toml(
            "[image]\nerase-block=\"4MiB\"\n[[partition]]\nfs=\"fat32\"\nsize=\"8MiB\"",
        )
        .unwrap();
        let e = crate::plan_full(&spec, &[], 0).unwrap_err().to_string();
        assert!(
            e.starts_with("partition[1].size: fat32 with 512-byte sectors needs"),
            "{e}"
        );
    }

    #[test]
    fn volume_ids_parse() {
        assert_eq!(parse_volume_id("1234-ABCD"), Ok(0x1234_abcd));
        assert_eq!(parse_volume_id("0x0badf00d"), Ok(0x0bad_f00d));
        assert_eq!(parse_volume_id("42"), Ok(42));
        for bad in ["12345-ABCD", "0x", "0x123456789", "xyz", "-", "12-34"] {
            assert!(parse_volume_id(bad).is_err(), "{bad}");
        }
        let e = err(&format!(
            "{BASE}[[raw]]\nsource=\"b\"\noffst=1\n[[partition]]\nfs=\"none\"\nsize=1"
        ));
        assert!(
            e.starts_with("raw[1].offst: unknown key (did you mean \"offset\"?); [[raw]] takes"),
            "{e}"
        );
        let e = err(&format!(
            "{BASE}[[raw]]\nsource=\"b\"\noffset=1\noffset-sectors=2\n[[partition]]\nfs=\"none\"\nsize=1"
        ));
        assert!(e.starts_with("raw[1].offset-sectors: give either"), "{e}");
    }

    #[test]
    fn dict_and_json_deserialise_like_toml() {
        let toml = Spec::from_toml(
            "[image]\nsize=\"1GiB\"\n[[partition]]\nfs=\"fat32\"\nsize=\"256MiB\"\nfat={cluster=\"4KiB\"}\n[[partition]]\nfs=\"ext4\"\nsize=\"fill\"\n[[partition.entry]]\npath=\"/etc\"\nmode=\"0750\"",
        )
        .unwrap();
        let json = serde_json::json!({
            "image": {"size": 1073741824u64},
            "partition": [
                {"fs": "fat32", "size": "256MiB", "fat": {"cluster": 4096}},
                {"fs": "ext4", "size": "fill", "entry": [{"path": "/etc", "mode": 0o750}]},
            ]
        });
        let from_json = Spec::from_deserializer(json, |e| e.to_string()).unwrap();
        assert_eq!(toml, from_json);
        let bad = serde_json::json!({"partition": [{"fs": "fat32", "size": 1}, {"fs": "ext4", "size": 1, "ext4": {"blok-size": 1}}]});
        let e = Spec::from_deserializer(bad, |e| e.to_string()).unwrap_err();
        assert_eq!(e.key, "partition[2].ext4.blok-size");
        assert!(e.reason.contains("did you mean \"block-size\""), "{e}");
    }

    #[test]
    fn full_design_spec_parses() {
        let s = Spec::from_toml(r#"
[image]
size = "2GiB"
erase-block = "4MiB"
sector-size = 512
table = "mbr"
first-partition = "4MiB"
disk-id = "0x5452574f"
seed = 1
timestamp = 1700000000

[[partition]]
name = "boot"
fs = "fat32"
size = "512MiB"
contents = "boot/"
type = "0x0c"
bootable = true
label = "BOOTFS"
fat  = { sector-size = 512, cluster = "4KiB", align-fat = true, fats = 2 }

[[partition]]
fs = "ext4"
size = "fill"
label = "rootfs"
ext4 = { block-size = 4096, stride = 1024, stripe-width = 1024, journal = true, inode-size = 256, reserved-percent = 5, backend = "native" }
[[partition.entry]]
path = "/etc/shadow"
mode = "0640"
uid = 0
gid = 42
[[partition.entry]]
path = "/dev/console"
kind = "char"
major = 5
minor = 1
mode = "0600"
xattrs = { "user.x" = "0x0102", "user.y" = "text" }
"#).unwrap();
        assert_eq!(s.image.disk_id, Some(DiskId::Mbr(0x5452_574f)));
        assert_eq!(s.partitions[1].entries[0].mode, Some(0o640));
        assert_eq!(s.partitions[1].entries[1].kind, EntryKind::Char);
        assert_eq!(
            s.partitions[1].entries[1].xattrs,
            [
                ("user.x".to_string(), vec![1, 2]),
                ("user.y".to_string(), b"text".to_vec())
            ]
        );
        assert_eq!(s.partitions[0].fat.cluster, Some(4096));
        assert_eq!(s.partitions[1].size, SizeSpec::Fill);
    }

    #[test]
    fn f2fs_needs_its_backend_and_slots_keep_their_spec_index() {
        let spec = Spec::from_toml(
            "[image]\ntable=\"gpt\"\nerase-block=\"4MiB\"\n[[partition]]\nname=\"sys\"\nfs=\"f2fs\"\nsize=\"256MiB\"\nlabel=\"sys\"\nslots=[\"a\",\"b\"]",
        )
        .unwrap();
        let plan = crate::plan_full(&spec, &[], 0).unwrap();
        assert_eq!(plan.partitions.len(), 2);
        let labels: Vec<_> = plan
            .partitions
            .iter()
            .map(|p| {
                p.filesystem
                    .as_ref()
                    .and_then(|f| f.label())
                    .map(str::to_string)
            })
            .collect();
        assert_eq!(
            labels,
            [Some("sys_a".to_string()), Some("sys_b".to_string())]
        );
        assert!(plan.partitions.iter().all(|p| p.spec_index == 0));
        let uuid = |i: usize| match &plan.partitions[i].filesystem {
            Some(blockwise_geometry::FsPlan::F2fs(f)) => f.uuid.clone(),
            _ => None,
        };
        assert_ne!(uuid(0), uuid(1), "each slot has its own filesystem UUID");
        assert_eq!(plan.slots.len(), 1);
        assert_eq!(plan.slot_copy(0, Some("b")).map(|p| p.index), Some(2));
        // A front end without mkfs.f2fs (the browser) gets an error, never an empty partition.
        let tree = blockwise_geometry::Tree::default();
        let e = crate::assemble_sparse(
            &spec,
            &plan,
            &[crate::Fill::Tree(&tree)],
            &Vec::<Vec<u8>>::new(),
            0,
        )
        .unwrap_err()
        .to_string();
        assert!(
            e.starts_with("partition[1].fs: fs = \"f2fs\" is built by mkfs.f2fs"),
            "{e}"
        );
    }

    proptest! {
        #[test]
        fn random_toml_never_panics(text in "\\PC{0,200}") {
            let _ = Spec::from_toml(&text).map(|s| plan(&s.layout()));
        }

        #[test]
        fn random_partition_keys_never_panic(size in "[0-9a-zA-Z. ]{0,12}", fs in "[a-z0-9]{0,6}", e in "[0-9a-zA-Z]{0,6}") {
            let text = format!("[image]\nerase-block = \"{e}\"\nsize = \"1GiB\"\n[[partition]]\nfs = \"{fs}\"\nsize = \"{size}\"\n");
            if let Ok(s) = Spec::from_toml(&text) { let _ = plan(&s.layout()); }
        }
    }
}
