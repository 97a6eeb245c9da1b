//! The exFAT options of a partition (`partition.exfat` in a spec) and their rules.
//!
//! This crate owns them: the spec layer deserialises them (the serde names are the spec
//! keys), [`ExfatOptions::validate`] checks them when the spec is read and again when the
//! planner runs, and every error names a [`Field`], which the spec layer turns into the key
//! the user wrote (`partition[2].exfat.cluster`).

use blockwise_geometry::de::opt_size;
use blockwise_geometry::format_size;
use serde::Deserialize;

/// Largest exFAT cluster (§3.1.16: 32 MiB).
pub const MAX_CLUSTER: u64 = 32 << 20;

/// exFAT options (`partition.exfat`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(default, deny_unknown_fields, rename_all = "kebab-case")]
pub struct ExfatOptions {
    /// Cluster size in bytes; `None` = the SD Association's size for the card, or by the
    /// volume size.
    #[serde(deserialize_with = "opt_size")]
    pub cluster: Option<u64>,
    /// Boundary unit in bytes: the FAT ends and the cluster heap starts on a multiple of it
    /// from the start of the disk; `None` = the SD Association's BU for the card, or the
    /// erase block.
    #[serde(deserialize_with = "opt_size")]
    pub boundary: Option<u64>,
    /// Pinned volume serial number; `None` = derived from the seed. Not a key of
    /// `partition.exfat`: the image crate sets it from the partition's `volume-id`.
    #[serde(skip)]
    pub volume_serial: Option<u32>,
    /// Pinned volume GUID (on-disk byte order); `None` = derived from the seed. Set from the
    /// partition's `fs-uuid`.
    #[serde(skip)]
    pub volume_guid: Option<[u8; 16]>,
}

impl ExfatOptions {
    /// Sets the cluster size.
    #[must_use]
    pub fn cluster(mut self, bytes: u64) -> Self {
        self.cluster = Some(bytes);
        self
    }

    /// Sets the boundary unit.
    #[must_use]
    pub fn boundary(mut self, bytes: u64) -> Self {
        self.boundary = Some(bytes);
        self
    }

    /// Checks the options against the sector size and the erase block. The planner runs this
    /// first, so a spec that validates never fails later for the same reason in other words.
    pub fn validate(&self, sector: u32, erase_block: u64) -> Result<(), Invalid> {
        let s = u64::from(sector);
        if let Some(c) = self.cluster {
            if !c.is_power_of_two() || c < s || c > MAX_CLUSTER {
                return Err(Invalid::new(
                    Field::Cluster,
                    format!(
                        "{c}: an exFAT cluster is a power of two from one {s}-byte sector to 32 MiB"
                    ),
                ));
            }
        }
        if let Some(b) = self.boundary {
            if !b.is_power_of_two() || b < s {
                return Err(Invalid::new(
                    Field::Boundary,
                    format!(
                        "{b}: the boundary unit is a power of two of at least one {s}-byte sector"
                    ),
                ));
            }
            if b < erase_block {
                return Err(Invalid::new(
                    Field::Boundary,
                    format!(
                        "{} is smaller than the erase block ({}): the cluster heap always starts on the erase block; use at least {} (or leave it out)",
                        format_size(b),
                        format_size(erase_block),
                        format_size(erase_block)
                    ),
                ));
            }
            if b > 1 << 30 {
                return Err(Invalid::new(
                    Field::Boundary,
                    format!("{}: a boundary unit above 1 GiB is not a card's; the SD Association's largest is 64 MiB", format_size(b)),
                ));
            }
        }
        Ok(())
    }
}

/// Checks a volume label: 1 to 11 UTF-16 units, no control characters. Returns it with
/// trailing spaces dropped (`None` when nothing is left).
pub fn validate_label(label: &str) -> Result<Option<String>, Invalid> {
    let units = label.encode_utf16().count();
    if units == 0 || units > 11 || label.chars().any(char::is_control) {
        return Err(Invalid::new(
            Field::Label,
            format!(
                "{label:?} is not an exFAT label: 1 to 11 UTF-16 characters, no control characters"
            ),
        ));
    }
    Ok(Some(label.trim_end().to_string()).filter(|s| !s.is_empty()))
}

/// What an exFAT request error is about. The spec layer maps each to the key the user wrote.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Field {
    /// The partition size.
    Size,
    /// The partition start.
    Start,
    /// The volume label.
    Label,
    /// The disk's erase block.
    EraseBlock,
    /// `exfat.cluster`.
    Cluster,
    /// `exfat.boundary`.
    Boundary,
}

impl Field {
    /// The key inside `partition.exfat` for the options' own fields, `None` for fields that
    /// live elsewhere in a spec.
    #[must_use]
    pub fn option_key(self) -> Option<&'static str> {
        match self {
            Field::Cluster => Some("cluster"),
            Field::Boundary => Some("boundary"),
            _ => None,
        }
    }
}

/// A request the exFAT planner cannot meet, with the field that is wrong.
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

    fn check(o: ExfatOptions, e: u64, want: Result<(), Field>) {
        assert_eq!(o.validate(512, e).map_err(|i| i.field), want, "{o:?}");
    }

    #[test]
    fn rules() {
        let d = ExfatOptions::default;
        check(d(), 4 << 20, Ok(()));
        check(d().cluster(128 << 10).boundary(16 << 20), 4 << 20, Ok(()));
        check(d().cluster(3000), 4 << 20, Err(Field::Cluster));
        check(d().cluster(256), 4 << 20, Err(Field::Cluster));
        check(d().cluster(64 << 20), 4 << 20, Err(Field::Cluster));
        check(d().boundary(1 << 20), 4 << 20, Err(Field::Boundary));
        check(d().boundary(3 << 20), 1 << 20, Err(Field::Boundary));
        assert_eq!(validate_label("Caméra"), Ok(Some("Caméra".into())));
        assert_eq!(validate_label("  "), Ok(None));
        assert!(validate_label("twelve chars").is_err());
        assert!(validate_label("a\nb").is_err());
    }

    #[test]
    fn deserialises_with_spec_keys() {
        let o: ExfatOptions =
            serde_json::from_str(r#"{"cluster": "128KiB", "boundary": "16MiB"}"#).unwrap();
        assert_eq!(
            o,
            ExfatOptions::default()
                .cluster(128 << 10)
                .boundary(16 << 20)
        );
        let e = serde_json::from_str::<ExfatOptions>(r#"{"clustr": 1}"#).unwrap_err();
        assert!(e.to_string().contains("unknown field `clustr`"), "{e}");
    }
}
