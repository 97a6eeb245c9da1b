//! Which names exFAT can store: the VFAT long-name rules (shared with `blockwise-fat`), in
//! exFAT's words.

use blockwise_fat::BadName;

/// Why a name cannot be stored on exFAT.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NameProblem(pub BadName);

impl core::fmt::Display for NameProblem {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self.0 {
            BadName::Empty => write!(f, "the name is empty"),
            BadName::Dots => write!(f, "\".\" and \"..\" are reserved"),
            BadName::TooLong => write!(f, "exFAT names hold at most 255 UTF-16 units"),
            BadName::BadChar(c) => write!(
                f,
                "exFAT names cannot contain {c:?} (control characters and \"*/:<>?\\| are not allowed)"
            ),
            BadName::TrailingDotOrSpace => write!(
                f,
                "names ending with a space or a period cannot be opened on Windows or Linux (which strip them); rename it"
            ),
            BadName::NotUtf8 => write!(
                f,
                "the name is not valid UTF-8 (non-UTF-8 bytes shown as \\xNN), and exFAT stores names as UTF-16: rename it, or use ext4, which keeps names as bytes"
            ),
        }
    }
}

/// Checks `name` and returns its UTF-16 form.
pub(crate) fn utf16_name(name: Option<&str>) -> Result<Vec<u16>, NameProblem> {
    let name = name.ok_or(NameProblem(BadName::NotUtf8))?;
    blockwise_fat::long_name(name).map_err(NameProblem)
}
