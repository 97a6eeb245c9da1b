//! The image spec: what the user asks for. Parsed from TOML by hand so that every error
//! names its key (`partition[2].size: …`) and unknown keys are rejected.
//!
//! Partition indices in key paths are 1-based, like partition numbers.

use core::fmt;

use toml::{Table, Value};

use crate::guid::Guid;
use crate::units::{parse_size, SectorSize};

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

/// Partition table kind.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum TableKind {
    /// DOS/MBR table (primary partitions, logical ones through an extended partition).
    #[default]
    Mbr,
    /// GUID partition table with protective MBR.
    Gpt,
    /// No table: the image is one bare filesystem.
    None,
}

impl TableKind {
    /// The spec spelling.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            TableKind::Mbr => "mbr",
            TableKind::Gpt => "gpt",
            TableKind::None => "none",
        }
    }
}

impl fmt::Display for TableKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What goes into a partition.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum FsKind {
    /// FAT, type chosen from the size (`fs = "fat"`).
    FatAuto,
    /// FAT12.
    Fat12,
    /// FAT16.
    Fat16,
    /// FAT32.
    Fat32,
    /// ext4.
    Ext4,
    /// A file copied verbatim (`source`).
    Raw,
    /// Nothing: the partition is left empty (a hole).
    None,
}

impl FsKind {
    /// The spec spelling.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            FsKind::FatAuto => "fat",
            FsKind::Fat12 => "fat12",
            FsKind::Fat16 => "fat16",
            FsKind::Fat32 => "fat32",
            FsKind::Ext4 => "ext4",
            FsKind::Raw => "raw",
            FsKind::None => "none",
        }
    }

    /// Any FAT variant.
    #[must_use]
    pub fn is_fat(self) -> bool {
        matches!(
            self,
            FsKind::FatAuto | FsKind::Fat12 | FsKind::Fat16 | FsKind::Fat32
        )
    }

    /// Parses the spec spelling (`fat32`, `ext4`, …), case-insensitively.
    #[must_use]
    pub fn parse(s: &str) -> Option<Self> {
        Some(match s.to_ascii_lowercase().as_str() {
            "fat" | "vfat" => FsKind::FatAuto,
            "fat12" => FsKind::Fat12,
            "fat16" => FsKind::Fat16,
            "fat32" => FsKind::Fat32,
            "ext4" => FsKind::Ext4,
            "raw" => FsKind::Raw,
            "none" => FsKind::None,
            _ => return None,
        })
    }
}

impl fmt::Display for FsKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A partition size request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SizeSpec {
    /// At least this many bytes (rounded up to the erase block).
    Bytes(u64),
    /// Everything up to the end of the disk (last partition only).
    Fill,
    /// `fs = "raw"` without `size`: the length of `source`, filled in by the image builder
    /// before planning.
    Source,
}

/// A disk identifier from `image.disk-id`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DiskId {
    /// MBR disk signature.
    Mbr(u32),
    /// GPT disk GUID.
    Gpt(Guid),
}

/// The `[image]` table.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ImageSpec {
    /// Total image size; `None` = computed from the partitions.
    pub size: Option<u64>,
    /// Erase block E in bytes (power of two).
    pub erase_block: u64,
    /// Device logical sector size.
    pub sector_size: SectorSize,
    /// Partition table kind.
    pub table: TableKind,
    /// Start of the first partition; `None` = one erase block (or more if the table needs it).
    pub first_partition: Option<u64>,
    /// Explicit disk ID; `None` = derived from `seed`.
    pub disk_id: Option<DiskId>,
    /// Seed of every derived ID, UUID and hash seed.
    pub seed: u64,
    /// File timestamps when not preserved; `None` = `SOURCE_DATE_EPOCH` or 0 (resolved by the caller).
    pub timestamp: Option<u64>,
}

impl Default for ImageSpec {
    fn default() -> Self {
        ImageSpec {
            size: None,
            erase_block: 4 << 20,
            sector_size: SectorSize::S512,
            table: TableKind::Mbr,
            first_partition: None,
            disk_id: None,
            seed: 1,
            timestamp: None,
        }
    }
}

/// FAT options (`partition.fat`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FatOptions {
    /// Filesystem logical sector size; `None` = the device sector size.
    pub sector_size: Option<u32>,
    /// Cluster size in bytes; `None` = chosen from the volume size.
    pub cluster: Option<u64>,
    /// Put the first FAT on an erase-block boundary too.
    pub align_fat: bool,
    /// Number of FAT copies (1 or 2).
    pub fats: u8,
}

impl Default for FatOptions {
    fn default() -> Self {
        FatOptions {
            sector_size: None,
            cluster: None,
            align_fat: true,
            fats: 2,
        }
    }
}

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

/// ext4 options (`partition.ext4`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Ext4Options {
    /// Block size: 1024, 2048 or 4096.
    pub block_size: u32,
    /// RAID stride in blocks; `None` = erase block / block size.
    pub stride: Option<u32>,
    /// RAID stripe width in blocks; `None` = erase block / block size.
    pub stripe_width: Option<u32>,
    /// Internal journal.
    pub journal: bool,
    /// Journal size in bytes; `None` = sized like mke2fs.
    pub journal_size: Option<u64>,
    /// Inode size: 128 or 256 (or larger power of two up to the block size).
    pub inode_size: u32,
    /// Number of inodes; `None` = like mke2fs (one per 16 KiB).
    pub inodes: Option<u64>,
    /// Reserved blocks percentage (0–50).
    pub reserved_percent: u8,
    /// Writer backend.
    pub backend: Ext4Backend,
    /// Feature profile.
    pub profile: Ext4Profile,
    /// Feature edits on top of the profile: `"+name"`/`"name"` adds, `"-name"`/`"^name"` removes.
    pub features: Vec<String>,
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
            reserved_percent: 5,
            backend: Ext4Backend::Native,
            profile: Ext4Profile::Default,
            features: Vec::new(),
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

/// One `[[partition.entry]]`: ownership, mode and special files without root.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct EntrySpec {
    /// Absolute path inside the filesystem, e.g. `/etc/shadow`.
    pub path: String,
    /// What the entry is.
    pub kind: EntryKind,
    /// Permission bits (and setuid/setgid/sticky), e.g. 0o640.
    pub mode: Option<u32>,
    /// Owner.
    pub uid: Option<u32>,
    /// Group.
    pub gid: Option<u32>,
    /// Device major number.
    pub major: Option<u32>,
    /// Device minor number.
    pub minor: Option<u32>,
    /// Symlink target.
    pub target: Option<String>,
    /// Extended attributes: `(name, value)`; values given as strings, `0x…` hex for binary.
    pub xattrs: Vec<(String, Vec<u8>)>,
}

/// One `[[partition]]`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PartitionSpec {
    /// GPT partition name; default = label.
    pub name: Option<String>,
    /// Filesystem or content kind.
    pub fs: FsKind,
    /// Requested size.
    pub size: SizeSpec,
    /// Directory to populate from, relative to the spec file.
    pub contents: Option<String>,
    /// File copied verbatim (`fs = "raw"`), relative to the spec file.
    pub source: Option<String>,
    /// Explicit partition type (MBR byte, GPT GUID or alias); `None` = from `fs`.
    pub type_: Option<String>,
    /// Bootable flag (MBR 0x80; GPT legacy-BIOS-bootable attribute).
    pub bootable: bool,
    /// Filesystem label.
    pub label: Option<String>,
    /// FAT options.
    pub fat: FatOptions,
    /// ext4 options.
    pub ext4: Ext4Options,
    /// Metadata overrides and special files.
    pub entries: Vec<EntrySpec>,
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
            source: None,
            type_: None,
            bootable: false,
            label: None,
            fat: FatOptions::default(),
            ext4: Ext4Options::default(),
            entries: Vec::new(),
        }
    }
}

/// A whole spec.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct Spec {
    /// The `[image]` table.
    pub image: ImageSpec,
    /// The `[[partition]]` array, in order.
    pub partitions: Vec<PartitionSpec>,
}

/// Walks one TOML table, remembering which keys were read, so unknown ones can be reported.
struct Obj<'a> {
    path: String,
    table: &'a Table,
    seen: Vec<&'static str>,
}

impl<'a> Obj<'a> {
    fn new(path: impl Into<String>, table: &'a Table) -> Self {
        Obj {
            path: path.into(),
            table,
            seen: Vec::new(),
        }
    }

    fn key(&self, k: &str) -> String {
        if self.path.is_empty() {
            k.to_string()
        } else {
            format!("{}.{k}", self.path)
        }
    }

    fn err(&self, k: &str, reason: impl Into<String>) -> SpecError {
        SpecError::new(self.key(k), reason)
    }

    fn get(&mut self, k: &'static str) -> Option<&'a Value> {
        self.seen.push(k);
        self.table.get(k)
    }

    fn string(&mut self, k: &'static str) -> Result<Option<String>, SpecError> {
        match self.get(k) {
            None => Ok(None),
            Some(Value::String(s)) => Ok(Some(s.clone())),
            Some(v) => Err(self.err(k, format!("expected a string, found {}", v.type_str()))),
        }
    }

    fn boolean(&mut self, k: &'static str) -> Result<Option<bool>, SpecError> {
        match self.get(k) {
            None => Ok(None),
            Some(Value::Boolean(b)) => Ok(Some(*b)),
            Some(v) => Err(self.err(k, format!("expected true or false, found {}", v.type_str()))),
        }
    }

    /// A non-negative integer, also accepted as a decimal or `0x`/`0o` string.
    fn uint(&mut self, k: &'static str, max: u64) -> Result<Option<u64>, SpecError> {
        let v = match self.get(k) {
            None => return Ok(None),
            Some(v) => v,
        };
        let n = match v {
            Value::Integer(i) => u64::try_from(*i)
                .map_err(|_| self.err(k, format!("must not be negative, found {i}")))?,
            Value::String(s) => {
                parse_uint(s).ok_or_else(|| self.err(k, format!("{s:?} is not a whole number")))?
            }
            v => {
                return Err(self.err(
                    k,
                    format!("expected a whole number, found {}", v.type_str()),
                ))
            }
        };
        if n > max {
            return Err(self.err(k, format!("{n} is too large (at most {max})")));
        }
        Ok(Some(n))
    }

    /// A size: integer bytes or a string like `4MiB`.
    fn size(&mut self, k: &'static str) -> Result<Option<u64>, SpecError> {
        match self.get(k) {
            None => Ok(None),
            Some(Value::Integer(i)) => u64::try_from(*i)
                .map(Some)
                .map_err(|_| self.err(k, format!("size must not be negative, found {i}"))),
            Some(Value::String(s)) => parse_size(s)
                .map(Some)
                .map_err(|e| self.err(k, e.to_string())),
            Some(v) => Err(self.err(
                k,
                format!(
                    "expected a size like \"4MiB\" or a number of bytes, found {}",
                    v.type_str()
                ),
            )),
        }
    }

    fn table(&mut self, k: &'static str) -> Result<Option<&'a Table>, SpecError> {
        match self.get(k) {
            None => Ok(None),
            Some(Value::Table(t)) => Ok(Some(t)),
            Some(v) => Err(self.err(k, format!("expected a table, found {}", v.type_str()))),
        }
    }

    fn array(&mut self, k: &'static str) -> Result<Option<&'a Vec<Value>>, SpecError> {
        match self.get(k) {
            None => Ok(None),
            Some(Value::Array(a)) => Ok(Some(a)),
            Some(v) => Err(self.err(k, format!("expected an array, found {}", v.type_str()))),
        }
    }

    /// Rejects keys nobody asked for: a typo must not pass silently.
    fn finish(self, known_hint: &str) -> Result<(), SpecError> {
        for k in self.table.keys() {
            if !self.seen.contains(&k.as_str()) {
                let mut known: Vec<&str> = self.seen.clone();
                known.sort_unstable();
                known.dedup();
                let hint = closest(k, &known)
                    .map(|c| format!(" (did you mean {c:?}?)"))
                    .unwrap_or_default();
                return Err(SpecError::new(
                    self.key(k),
                    format!("unknown key{hint}; {known_hint} takes {}", known.join(", ")),
                ));
            }
        }
        Ok(())
    }
}

fn parse_uint(s: &str) -> Option<u64> {
    let s = s.trim();
    if let Some(h) = s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        u64::from_str_radix(h, 16).ok()
    } else if let Some(o) = s.strip_prefix("0o") {
        u64::from_str_radix(o, 8).ok()
    } else {
        s.parse().ok()
    }
}

/// Mode strings are octal: `"0640"`, `"640"`, `"0o640"`; integers are taken as written.
fn parse_mode(v: &Value) -> Option<u32> {
    match v {
        Value::String(s) => {
            let s = s.trim();
            let s = s.strip_prefix("0o").unwrap_or(s);
            u32::from_str_radix(s, 8).ok().filter(|&m| m <= 0o7777)
        }
        Value::Integer(i) => u32::try_from(*i).ok().filter(|&m| m <= 0o7777),
        _ => None,
    }
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

impl Spec {
    /// Parses and validates a TOML spec.
    ///
    /// ```
    /// let spec = blockwise_geometry::Spec::from_toml(r#"
    ///     [image]
    ///     size = "1GiB"
    ///     [[partition]]
    ///     fs = "fat32"
    ///     size = "256MiB"
    /// "#).unwrap();
    /// assert_eq!(spec.partitions.len(), 1);
    /// let err = blockwise_geometry::Spec::from_toml("[image]\nsize = \"4XB\"").unwrap_err();
    /// assert_eq!(err.key, "image.size");
    /// ```
    pub fn from_toml(text: &str) -> Result<Spec, SpecError> {
        let root: Table = text.parse::<Table>().map_err(|e| {
            let msg = e.to_string();
            let first = msg.lines().next().unwrap_or("invalid TOML").to_string();
            let detail = msg
                .lines()
                .rev()
                .find(|l| !l.trim().is_empty())
                .unwrap_or_default()
                .trim()
                .to_string();
            SpecError::new(
                "(toml)",
                if detail.is_empty() || detail == first {
                    first
                } else {
                    format!("{first}: {detail}")
                },
            )
        })?;
        Self::from_table(&root)
    }

    /// Parses an already-decoded TOML table (used by the bindings too).
    pub fn from_table(root: &Table) -> Result<Spec, SpecError> {
        let mut top = Obj::new("", root);
        let image = match top.table("image")? {
            Some(t) => parse_image(t)?,
            None => ImageSpec::default(),
        };
        let mut partitions = Vec::new();
        if let Some(arr) = top.array("partition")? {
            for (i, v) in arr.iter().enumerate() {
                let key = format!("partition[{}]", i + 1);
                let Value::Table(t) = v else {
                    return Err(SpecError::new(key, "expected a table ([[partition]])"));
                };
                partitions.push(parse_partition(&key, t)?);
            }
        }
        top.finish("the top level")?;
        let spec = Spec { image, partitions };
        spec.validate()?;
        Ok(spec)
    }

    /// Cross-key checks, also run for specs built in code (CLI flags, bindings).
    pub fn validate(&self) -> Result<(), SpecError> {
        let img = &self.image;
        let eb = img.erase_block;
        if !eb.is_power_of_two() || !(4096..=(256 << 20)).contains(&eb) {
            return Err(SpecError::new(
                "image.erase-block",
                format!("{eb} must be a power of two between 4KiB and 256MiB (SD cards: 4MiB or 8MiB, old USB sticks: 128KiB)"),
            ));
        }
        if eb < img.sector_size.bytes_u64() {
            return Err(SpecError::new(
                "image.erase-block",
                format!("{eb} is smaller than the {}-byte sector", img.sector_size),
            ));
        }
        if let Some(s) = img.size {
            if s == 0 || s % img.sector_size.bytes_u64() != 0 {
                return Err(SpecError::new(
                    "image.size",
                    format!(
                        "{s} must be a non-zero multiple of the {}-byte sector size",
                        img.sector_size
                    ),
                ));
            }
        }
        if let Some(fp) = img.first_partition {
            if img.table == TableKind::None {
                return Err(SpecError::new(
                    "image.first-partition",
                    "has no meaning with table = \"none\" (the filesystem starts at byte 0)",
                ));
            }
            if fp == 0 || fp % eb != 0 {
                return Err(SpecError::new(
                    "image.first-partition",
                    format!("{fp} must be a non-zero multiple of the erase block ({eb})"),
                ));
            }
        }
        match (img.table, img.disk_id) {
            (TableKind::Gpt, Some(DiskId::Mbr(_))) => {
                return Err(SpecError::new(
                    "image.disk-id",
                    "a GPT disk ID is a GUID like \"8f3c…-…\", not a 32-bit number",
                ))
            }
            (TableKind::Mbr, Some(DiskId::Gpt(_))) => {
                return Err(SpecError::new(
                    "image.disk-id",
                    "an MBR disk ID is a 32-bit number like \"0x5452574f\", not a GUID",
                ))
            }
            (TableKind::None, Some(_)) => return Err(SpecError::new(
                "image.disk-id",
                "has no meaning with table = \"none\"; the filesystem UUID derives from image.seed",
            )),
            _ => {}
        }
        if self.partitions.is_empty() {
            return Err(SpecError::new(
                "partition",
                "the spec has no [[partition]]; add at least one",
            ));
        }
        if img.table == TableKind::None && self.partitions.len() != 1 {
            return Err(SpecError::new(
                "partition",
                format!(
                    "table = \"none\" makes a bare filesystem image and takes exactly one [[partition]], found {}",
                    self.partitions.len()
                ),
            ));
        }
        if img.table == TableKind::Gpt && self.partitions.len() > 128 {
            return Err(SpecError::new(
                "partition",
                format!(
                    "GPT holds at most 128 partitions, found {}",
                    self.partitions.len()
                ),
            ));
        }
        let last = self.partitions.len() - 1;
        for (i, p) in self.partitions.iter().enumerate() {
            let key = format!("partition[{}]", i + 1);
            if p.size == SizeSpec::Fill && i != last {
                return Err(SpecError::new(
                    format!("{key}.size"),
                    "\"fill\" is only allowed on the last partition",
                ));
            }
            if p.size == SizeSpec::Fill && img.size.is_none() {
                return Err(SpecError::new(
                    format!("{key}.size"),
                    "\"fill\" needs image.size (the disk size to fill up to)",
                ));
            }
            if p.size == SizeSpec::Bytes(0) {
                return Err(SpecError::new(format!("{key}.size"), "must not be 0"));
            }
            p.validate(&key, img)?;
        }
        Ok(())
    }
}

impl PartitionSpec {
    fn validate(&self, key: &str, img: &ImageSpec) -> Result<(), SpecError> {
        let k = |s: &str| format!("{key}.{s}");
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
        if self.contents.is_some() && matches!(self.fs, FsKind::Raw | FsKind::None) {
            return Err(SpecError::new(
                k("contents"),
                format!(
                    "fs = \"{}\" has no filesystem to fill; use fat32 or ext4",
                    self.fs
                ),
            ));
        }
        if !self.entries.is_empty() && self.fs != FsKind::Ext4 {
            return Err(SpecError::new(
                k("entry"),
                "ownership, modes and special files need a filesystem that stores them: use fs = \"ext4\"",
            ));
        }
        if img.table == TableKind::None && (self.type_.is_some() || self.bootable) {
            return Err(SpecError::new(
                k(if self.bootable { "bootable" } else { "type" }),
                "has no meaning with table = \"none\" (there is no partition table)",
            ));
        }
        // Names exist only in GPT; with MBR they are accepted and ignored, so one spec can
        // switch tables.
        if let Some(name) = &self.name {
            if name.encode_utf16().count() > 36 {
                return Err(SpecError::new(
                    k("name"),
                    "GPT names hold at most 36 UTF-16 units",
                ));
            }
        }
        if let Some(label) = &self.label {
            if self.fs.is_fat() {
                if label.len() > 11
                    || !label.chars().all(|c| {
                        c.is_ascii() && !c.is_ascii_control() && !"\"*+,./:;<=>?[\\]|".contains(c)
                    })
                {
                    return Err(SpecError::new(
                        k("label"),
                        format!("{label:?} is not a FAT label: at most 11 ASCII characters, none of \"*+,./:;<=>?[\\]|"),
                    ));
                }
            } else if self.fs == FsKind::Ext4 && label.len() > 16 {
                return Err(SpecError::new(
                    k("label"),
                    format!("{label:?}: ext4 labels hold at most 16 bytes"),
                ));
            }
        }
        let f = &self.fat;
        if let Some(ss) = f.sector_size {
            if ss != 512 && ss != 4096 {
                return Err(SpecError::new(
                    k("fat.sector-size"),
                    format!("{ss}: must be 512 or 4096"),
                ));
            }
            if ss < img.sector_size.bytes() {
                return Err(SpecError::new(
                    k("fat.sector-size"),
                    format!(
                        "{ss} is smaller than the device's {}-byte sectors",
                        img.sector_size
                    ),
                ));
            }
        }
        if let Some(c) = f.cluster {
            if !c.is_power_of_two() || !(512..=(2 << 20)).contains(&c) {
                return Err(SpecError::new(
                    k("fat.cluster"),
                    format!("{c}: a cluster is a power of two from 512B to 2MiB"),
                ));
            }
            if c > img.erase_block {
                return Err(SpecError::new(
                    k("fat.cluster"),
                    format!("{c} is larger than the erase block ({}): clusters would straddle erase blocks", img.erase_block),
                ));
            }
        }
        if f.fats != 1 && f.fats != 2 {
            return Err(SpecError::new(
                k("fat.fats"),
                format!("{}: must be 1 or 2", f.fats),
            ));
        }
        let e = &self.ext4;
        if ![1024, 2048, 4096].contains(&e.block_size) {
            return Err(SpecError::new(
                k("ext4.block-size"),
                format!("{}: must be 1024, 2048 or 4096", e.block_size),
            ));
        }
        if !e.inode_size.is_power_of_two() || e.inode_size < 128 || e.inode_size > e.block_size {
            return Err(SpecError::new(
                k("ext4.inode-size"),
                format!(
                    "{}: must be a power of two from 128 to the block size",
                    e.inode_size
                ),
            ));
        }
        if e.reserved_percent > 50 {
            return Err(SpecError::new(
                k("ext4.reserved-percent"),
                format!("{}: must be 0 to 50", e.reserved_percent),
            ));
        }
        for (name, v) in [
            ("ext4.stride", e.stride),
            ("ext4.stripe-width", e.stripe_width),
        ] {
            if v == Some(0) {
                return Err(SpecError::new(k(name), "must be at least 1 block"));
            }
        }
        for feat in &e.features {
            let name = feat.trim_start_matches(['+', '-', '^']);
            if name.is_empty()
                || !name
                    .chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
            {
                return Err(SpecError::new(
                    k("ext4.features"),
                    format!("{feat:?} is not a feature name like \"^metadata_csum\" or \"+64bit\""),
                ));
            }
        }
        for (j, en) in self.entries.iter().enumerate() {
            let ek = |s: &str| format!("{key}.entry[{}].{s}", j + 1);
            if !en.path.starts_with('/') || en.path.split('/').any(|c| c == ".." || c == ".") {
                return Err(SpecError::new(
                    ek("path"),
                    format!(
                        "{:?} must be an absolute path like \"/etc/shadow\" without . or ..",
                        en.path
                    ),
                ));
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

fn parse_image(t: &Table) -> Result<ImageSpec, SpecError> {
    let mut o = Obj::new("image", t);
    let d = ImageSpec::default();
    let size = o.size("size")?;
    let erase_block = o.size("erase-block")?.unwrap_or(d.erase_block);
    let sector_size = match o.size("sector-size")? {
        None => d.sector_size,
        Some(n) => SectorSize::from_bytes(n)
            .ok_or_else(|| o.err("sector-size", format!("{n}: must be 512 or 4096")))?,
    };
    let table = match o.string("table")?.as_deref() {
        None => d.table,
        Some(s) => match s.to_ascii_lowercase().as_str() {
            "mbr" | "dos" | "msdos" => TableKind::Mbr,
            "gpt" => TableKind::Gpt,
            "none" => TableKind::None,
            _ => {
                return Err(o.err(
                    "table",
                    format!("{s:?}: must be \"mbr\", \"gpt\" or \"none\""),
                ))
            }
        },
    };
    let first_partition = o.size("first-partition")?;
    let disk_id = match o.get("disk-id") {
        None => None,
        Some(Value::String(s)) => Some(parse_disk_id(s).ok_or_else(|| {
            o.err(
                "disk-id",
                format!("{s:?} is neither a 32-bit number like \"0x5452574f\" nor a GUID"),
            )
        })?),
        Some(Value::Integer(i)) => {
            Some(DiskId::Mbr(u32::try_from(*i).map_err(|_| {
                o.err("disk-id", format!("{i} does not fit 32 bits"))
            })?))
        }
        Some(v) => {
            return Err(o.err(
                "disk-id",
                format!("expected a string, found {}", v.type_str()),
            ))
        }
    };
    let seed = o.uint("seed", u64::MAX)?.unwrap_or(d.seed);
    let timestamp = o.uint("timestamp", u64::from(u32::MAX) * 4)?;
    o.finish("[image]")?;
    Ok(ImageSpec {
        size,
        erase_block,
        sector_size,
        table,
        first_partition,
        disk_id,
        seed,
        timestamp,
    })
}

fn parse_disk_id(s: &str) -> Option<DiskId> {
    if let Ok(g) = s.parse::<Guid>() {
        return Some(DiskId::Gpt(g));
    }
    let n = parse_uint(s)?;
    u32::try_from(n).ok().map(DiskId::Mbr)
}

fn parse_partition(key: &str, t: &Table) -> Result<PartitionSpec, SpecError> {
    let mut o = Obj::new(key, t);
    let fs = match o.string("fs")? {
        None => {
            return Err(o.err(
                "fs",
                "missing; one of fat12, fat16, fat32, fat, ext4, raw, none",
            ))
        }
        Some(s) => FsKind::parse(&s).ok_or_else(|| {
            o.err(
                "fs",
                format!("{s:?}: must be one of fat12, fat16, fat32, fat, ext4, raw, none"),
            )
        })?,
    };
    let size = match o.get("size") {
        None if fs == FsKind::Raw => SizeSpec::Source,
        None => return Err(o.err("size", "missing; a size like \"256MiB\" or \"fill\"")),
        Some(Value::String(s)) if s.eq_ignore_ascii_case("fill") => SizeSpec::Fill,
        Some(_) => {
            o.seen.pop();
            SizeSpec::Bytes(o.size("size")?.unwrap_or(0))
        }
    };
    let name = o.string("name")?;
    let contents = o.string("contents")?;
    let source = o.string("source")?;
    let type_ = match o.get("type") {
        None => None,
        Some(Value::String(s)) => Some(s.clone()),
        Some(Value::Integer(i)) => Some(format!("0x{i:02x}")),
        Some(v) => {
            return Err(o.err(
                "type",
                format!(
                    "expected a string like \"0x0c\" or \"esp\", found {}",
                    v.type_str()
                ),
            ))
        }
    };
    let bootable = o.boolean("bootable")?.unwrap_or(false);
    let label = o.string("label")?;
    let fat = match o.table("fat")? {
        None => FatOptions::default(),
        Some(t) => parse_fat(&format!("{key}.fat"), t)?,
    };
    let ext4 = match o.table("ext4")? {
        None => Ext4Options::default(),
        Some(t) => parse_ext4(&format!("{key}.ext4"), t)?,
    };
    let mut entries = Vec::new();
    if let Some(arr) = o.array("entry")? {
        for (j, v) in arr.iter().enumerate() {
            let ek = format!("{key}.entry[{}]", j + 1);
            let Value::Table(t) = v else {
                return Err(SpecError::new(ek, "expected a table ([[partition.entry]])"));
            };
            entries.push(parse_entry(&ek, t)?);
        }
    }
    o.finish("[[partition]]")?;
    Ok(PartitionSpec {
        name,
        fs,
        size,
        contents,
        source,
        type_,
        bootable,
        label,
        fat,
        ext4,
        entries,
    })
}

fn parse_fat(key: &str, t: &Table) -> Result<FatOptions, SpecError> {
    let mut o = Obj::new(key, t);
    let d = FatOptions::default();
    let sector_size = o
        .size("sector-size")?
        .map(|n| u32::try_from(n).unwrap_or(u32::MAX));
    let cluster = o.size("cluster")?;
    let align_fat = o.boolean("align-fat")?.unwrap_or(d.align_fat);
    let fats = o
        .uint("fats", 255)?
        .map_or(d.fats, |n| u8::try_from(n).unwrap_or(u8::MAX));
    o.finish("fat")?;
    Ok(FatOptions {
        sector_size,
        cluster,
        align_fat,
        fats,
    })
}

fn parse_ext4(key: &str, t: &Table) -> Result<Ext4Options, SpecError> {
    let mut o = Obj::new(key, t);
    let d = Ext4Options::default();
    let to32 = |v: u64| u32::try_from(v).unwrap_or(u32::MAX);
    let block_size = o.size("block-size")?.map_or(d.block_size, to32);
    let stride = o.uint("stride", u64::from(u32::MAX))?.map(to32);
    let stripe_width = o.uint("stripe-width", u64::from(u32::MAX))?.map(to32);
    let journal = o.boolean("journal")?.unwrap_or(d.journal);
    let journal_size = o.size("journal-size")?;
    let inode_size = o.size("inode-size")?.map_or(d.inode_size, to32);
    let inodes = o.uint("inodes", u64::from(u32::MAX))?;
    let reserved_percent = o
        .uint("reserved-percent", 100)?
        .map_or(d.reserved_percent, |v| u8::try_from(v).unwrap_or(u8::MAX));
    let backend = match o.string("backend")?.as_deref() {
        None => d.backend,
        Some("native") => Ext4Backend::Native,
        Some("mke2fs") => Ext4Backend::Mke2fs,
        Some(s) => {
            return Err(o.err(
                "backend",
                format!("{s:?}: must be \"native\" or \"mke2fs\""),
            ))
        }
    };
    let profile = match o.string("profile")?.as_deref() {
        None => d.profile,
        Some("default") => Ext4Profile::Default,
        Some("compat") => Ext4Profile::Compat,
        Some(s) => {
            return Err(o.err(
                "profile",
                format!("{s:?}: must be \"default\" or \"compat\""),
            ))
        }
    };
    let features = match o.get("features") {
        None => Vec::new(),
        Some(Value::String(s)) => s
            .split(',')
            .map(|f| f.trim().to_string())
            .filter(|f| !f.is_empty())
            .collect(),
        Some(Value::Array(a)) => {
            let mut v = Vec::new();
            for x in a {
                match x {
                    Value::String(s) => v.push(s.clone()),
                    _ => return Err(o.err("features", "expected strings like \"^metadata_csum\"")),
                }
            }
            v
        }
        Some(v) => {
            return Err(o.err(
                "features",
                format!("expected an array of strings, found {}", v.type_str()),
            ))
        }
    };
    o.finish("ext4")?;
    Ok(Ext4Options {
        block_size,
        stride,
        stripe_width,
        journal,
        journal_size,
        inode_size,
        inodes,
        reserved_percent,
        backend,
        profile,
        features,
    })
}

fn parse_entry(key: &str, t: &Table) -> Result<EntrySpec, SpecError> {
    let mut o = Obj::new(key, t);
    let path = o
        .string("path")?
        .ok_or_else(|| o.err("path", "missing; the absolute path inside the filesystem"))?;
    let kind = match o.string("kind")?.as_deref() {
        None => EntryKind::Existing,
        Some(s) => match s {
            "file" => EntryKind::File,
            "dir" | "directory" => EntryKind::Dir,
            "symlink" => EntryKind::Symlink,
            "char" => EntryKind::Char,
            "block" => EntryKind::Block,
            "fifo" => EntryKind::Fifo,
            "socket" => EntryKind::Socket,
            _ => {
                return Err(o.err(
                    "kind",
                    format!("{s:?}: must be file, dir, symlink, char, block, fifo or socket"),
                ))
            }
        },
    };
    let mode = match o.get("mode") {
        None => None,
        Some(v) => Some(
            parse_mode(v)
                .ok_or_else(|| o.err("mode", "expected an octal mode string like \"0640\""))?,
        ),
    };
    let to32 = |v: u64| u32::try_from(v).unwrap_or(u32::MAX);
    let uid = o.uint("uid", u64::from(u32::MAX))?.map(to32);
    let gid = o.uint("gid", u64::from(u32::MAX))?.map(to32);
    let major = o.uint("major", 4095)?.map(to32);
    let minor = o.uint("minor", (1 << 20) - 1)?.map(to32);
    let target = o.string("target")?;
    let mut xattrs = Vec::new();
    if let Some(x) = o.table("xattrs")? {
        for (name, v) in x {
            let Value::String(s) = v else {
                return Err(o.err(
                    "xattrs",
                    format!("{name}: value must be a string (\"0x…\" for binary)"),
                ));
            };
            let bytes = match s.strip_prefix("0x") {
                Some(hex) => {
                    decode_hex(hex).ok_or_else(|| o.err("xattrs", format!("{name}: bad hex")))?
                }
                None => s.as_bytes().to_vec(),
            };
            xattrs.push((name.clone(), bytes));
        }
    }
    o.finish("[[partition.entry]]")?;
    Ok(EntrySpec {
        path,
        kind,
        mode,
        uid,
        gid,
        major,
        minor,
        target,
        xattrs,
    })
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

#[cfg(test)]
mod tests {
    use super::*;

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
"#).unwrap();
        assert_eq!(s.image.disk_id, Some(DiskId::Mbr(0x5452_574f)));
        assert_eq!(s.partitions[1].entries[0].mode, Some(0o640));
        assert_eq!(s.partitions[1].entries[1].kind, EntryKind::Char);
        assert_eq!(s.partitions[0].fat.cluster, Some(4096));
        assert_eq!(s.partitions[1].size, SizeSpec::Fill);
    }
}
