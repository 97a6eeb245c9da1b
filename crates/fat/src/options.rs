//! The FAT options of a partition (`partition.fat` in a spec) and their rules.
//!
//! This crate owns them: the spec layer deserialises them (the serde names are the spec
//! keys), [`FatOptions::validate`] checks them the same way when the spec is read and when
//! the planner runs, and every error names a [`Field`], which the spec layer turns into the
//! key the user wrote.

use blockwise_geometry::de::{opt_size, uint};
use serde::Deserialize;

/// FAT options (`partition.fat`).
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
#[serde(default, deny_unknown_fields, rename_all = "kebab-case")]
pub struct FatOptions {
    /// Filesystem logical sector size; `None` = the device sector size.
    #[serde(deserialize_with = "opt_fat_sector")]
    pub sector_size: Option<u32>,
    /// Cluster size in bytes; `None` = chosen from the volume size.
    #[serde(deserialize_with = "opt_size")]
    pub cluster: Option<u64>,
    /// Put the first FAT on an erase-block boundary too.
    #[serde(deserialize_with = "blockwise_geometry::de::boolean")]
    pub align_fat: bool,
    /// Number of FAT copies (1 or 2).
    #[serde(deserialize_with = "uint::<_, u8, 255>")]
    pub fats: u8,
    /// Pinned volume ID (serial number); `None` = derived from the seed. Not a key of
    /// `partition.fat`: the image crate sets it from the partition's `volume-id`.
    #[serde(skip)]
    pub volume_id: Option<u32>,
    /// `bootloader`: a BIOS bootloader installed into the volume after it is written
    /// (`"syslinux"`: its boot sector, keeping the BPB, and `ldlinux.sys`/`ldlinux.c32`, by
    /// the `syslinux` installer of the Debian package syslinux); `None` = blockwise's own
    /// boot sector, which boots nothing.
    pub bootloader: Option<Bootloader>,
}

/// A bootloader installed into a FAT volume (`fat.bootloader`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
#[non_exhaustive]
pub enum Bootloader {
    /// SYSLINUX 6 (`syslinux --install`).
    Syslinux,
}

impl Bootloader {
    /// The spec spelling, which is also what plan and verify report.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Bootloader::Syslinux => "syslinux",
        }
    }
}

impl Default for FatOptions {
    fn default() -> Self {
        FatOptions {
            sector_size: None,
            cluster: None,
            align_fat: true,
            fats: 2,
            volume_id: None,
            bootloader: None,
        }
    }
}

fn opt_fat_sector<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<u32>, D::Error> {
    let n = opt_size(d)?.unwrap_or(0);
    Ok(Some(u32::try_from(n).unwrap_or(u32::MAX)))
}

impl FatOptions {
    /// Sets the FAT sector size.
    #[must_use]
    pub fn sector_size(mut self, bytes: u32) -> Self {
        self.sector_size = Some(bytes);
        self
    }

    /// Sets the cluster size.
    #[must_use]
    pub fn cluster(mut self, bytes: u64) -> Self {
        self.cluster = Some(bytes);
        self
    }

    /// Sets `align-fat`.
    #[must_use]
    pub fn align_fat(mut self, on: bool) -> Self {
        self.align_fat = on;
        self
    }

    /// Sets the number of FATs.
    #[must_use]
    pub fn fats(mut self, n: u8) -> Self {
        self.fats = n;
        self
    }

    /// The FAT sector size these options give on a device with `device_sector`-byte sectors.
    #[must_use]
    pub fn effective_sector(&self, device_sector: u32) -> u64 {
        u64::from(self.sector_size.unwrap_or(device_sector))
    }

    /// Checks the options against the device sector size and the erase block. The rules are
    /// the planner's: it runs this first, so a spec that validates never fails later for the
    /// same reason with other words.
    pub fn validate(&self, device_sector: u32, erase_block: u64) -> Result<(), Invalid> {
        let dev = u64::from(device_sector);
        let s = self.effective_sector(device_sector);
        if s != 512 && s != 4096 {
            return Err(Invalid::new(
                Field::SectorSize,
                format!("{s}: FAT sectors must be 512 or 4096 bytes"),
            ));
        }
        if s < dev {
            return Err(Invalid::new(
                Field::SectorSize,
                format!("{s} is smaller than the device's {dev}-byte sectors; Linux refuses to mount that (use {dev})"),
            ));
        }
        if erase_block < s {
            return Err(Invalid::new(
                Field::EraseBlock,
                format!(
                    "the erase block ({erase_block} bytes) is smaller than the {s}-byte FAT sector"
                ),
            ));
        }
        if let Some(cb) = self.cluster {
            if !cb.is_power_of_two() || cb < s {
                return Err(Invalid::new(
                    Field::Cluster,
                    format!("{cb}: a cluster is a power of two of at least one {s}-byte sector"),
                ));
            }
            if cb > erase_block {
                return Err(Invalid::new(
                    Field::Cluster,
                    format!("{cb} is larger than the erase block ({erase_block}): clusters would straddle erase blocks"),
                ));
            }
            if cb > 128 * s {
                return Err(Invalid::new(
                    Field::Cluster,
                    format!(
                        "{cb}: at most 128 sectors per cluster, so at most {} with {s}-byte sectors",
                        128 * s
                    ),
                ));
            }
        }
        if self.bootloader.is_some() && s != 512 {
            return Err(Invalid::new(
                Field::Bootloader,
                format!("syslinux boots from FAT volumes of 512-byte sectors only, and this one has {s}-byte sectors (fat.sector-size)"),
            ));
        }
        if self.fats != 1 && self.fats != 2 {
            return Err(Invalid::new(
                Field::Fats,
                format!("fats = {}: a FAT volume has 1 or 2 FATs", self.fats),
            ));
        }
        Ok(())
    }
}

/// Checks a volume label and returns what the boot sector stores: the label as given (like
/// mkfs.fat 4.2, which keeps lowercase so that blkid and `/dev/disk/by-label` show what was
/// asked for), trailing spaces dropped, `None` for a label that is all spaces.
pub fn validate_label(label: &str) -> Result<Option<String>, Invalid> {
    let ok = !label.is_empty()
        && label.len() <= 11
        && label
            .bytes()
            .all(|b| b.is_ascii() && !b.is_ascii_control() && !b"\"*+,./:;<=>?[\\]|".contains(&b));
    if !ok {
        return Err(Invalid::new(
            Field::Label,
            format!("{label:?} is not a FAT label: 1 to 11 ASCII characters, none of \"*+,./:;<=>?[\\]|"),
        ));
    }
    // "NO NAME" is the boot sector's "no label" (mkfs.fat writes no label entry for it).
    Ok(Some(label.trim_end().to_string()).filter(|s| !s.is_empty() && s != "NO NAME"))
}

/// What a FAT request error is about. The spec layer maps each to the key the user wrote.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Field {
    /// The FAT type (`fs`).
    Fs,
    /// The partition size.
    Size,
    /// The partition start.
    Start,
    /// The volume label.
    Label,
    /// The disk's erase block.
    EraseBlock,
    /// `fat.sector-size`.
    SectorSize,
    /// `fat.cluster`.
    Cluster,
    /// `fat.align-fat`.
    AlignFat,
    /// `fat.fats`.
    Fats,
    /// `fat.bootloader`.
    Bootloader,
}

impl Field {
    /// The key inside `partition.fat` for the options' own fields (`cluster`), `None` for
    /// fields that live elsewhere in a spec.
    #[must_use]
    pub fn option_key(self) -> Option<&'static str> {
        match self {
            Field::SectorSize => Some("sector-size"),
            Field::Cluster => Some("cluster"),
            Field::AlignFat => Some("align-fat"),
            Field::Fats => Some("fats"),
            Field::Bootloader => Some("bootloader"),
            _ => None,
        }
    }
}

/// A request the FAT planner cannot meet, with the field that is wrong.
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

    fn check(o: FatOptions, dev: u32, e: u64, want: Result<(), Field>) {
        assert_eq!(o.validate(dev, e).map_err(|i| i.field), want, "{o:?}");
    }

    #[test]
    fn rules() {
        let d = FatOptions::default;
        check(d(), 512, 4 << 20, Ok(()));
        check(d().sector_size(1024), 512, 4 << 20, Err(Field::SectorSize));
        check(d().sector_size(512), 4096, 4 << 20, Err(Field::SectorSize));
        check(d().cluster(3000), 512, 4 << 20, Err(Field::Cluster));
        check(d().cluster(256), 512, 4 << 20, Err(Field::Cluster));
        check(d().cluster(64 << 10), 512, 4 << 20, Ok(()));
        check(d().cluster(128 << 10), 512, 4 << 20, Err(Field::Cluster));
        check(d().cluster(256 << 10), 4096, 128 << 10, Err(Field::Cluster));
        check(d().fats(3), 512, 4 << 20, Err(Field::Fats));
        let syslinux = FatOptions {
            bootloader: Some(Bootloader::Syslinux),
            ..d()
        };
        check(syslinux.clone(), 512, 4 << 20, Ok(()));
        check(
            syslinux.sector_size(4096),
            512,
            4 << 20,
            Err(Field::Bootloader),
        );
        assert_eq!(validate_label("boot"), Ok(Some("boot".into())));
        assert_eq!(validate_label("BOOT  "), Ok(Some("BOOT".into())));
        assert_eq!(validate_label("   "), Ok(None));
        assert_eq!(validate_label("NO NAME"), Ok(None));
        assert_eq!(
            validate_label("a.b").map_err(|i| i.field),
            Err(Field::Label)
        );
        assert_eq!(validate_label("").map_err(|i| i.field), Err(Field::Label));
    }

    #[test]
    fn deserialises_with_spec_keys() {
        let o: FatOptions = serde_json::from_str(
            r#"{"sector-size": 4096, "cluster": "8KiB", "align-fat": false, "fats": 1}"#,
        )
        .unwrap();
        assert_eq!(
            o,
            FatOptions::default()
                .sector_size(4096)
                .cluster(8192)
                .align_fat(false)
                .fats(1)
        );
        let o: FatOptions = serde_json::from_str(r#"{"bootloader": "syslinux"}"#).unwrap();
        assert_eq!(o.bootloader, Some(Bootloader::Syslinux));
        let e = serde_json::from_str::<FatOptions>(r#"{"bootloader": "grub"}"#).unwrap_err();
        assert!(e.to_string().contains("expected `syslinux`"), "{e}");
        let e = serde_json::from_str::<FatOptions>(r#"{"clustr": 1}"#).unwrap_err();
        assert!(e.to_string().contains("unknown field `clustr`"), "{e}");
    }
}
