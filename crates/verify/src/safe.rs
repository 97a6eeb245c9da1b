//! "Safe to flash?": the answer a user acts on, from a [`Report`]. One rule for every front
//! end (the page's first line; the CLI and Python can print the same).
//!
//! - **no** — the input is not recognised, or any finding is an error (truncated, overlapping,
//!   corrupt, not 4 KiB aligned, …): flashing it gives a card that does not work as meant.
//! - **yes, but slower than it could be** — consistent, but something is off the erase-block
//!   grid (or another finding that costs write speed or wear): it works, writes cost extra.
//! - **yes** — consistent and aligned (other warnings, e.g. firmware compatibility, are listed
//!   with the findings but do not change the answer).

use serde::Serialize;

use crate::{Finding, FindingCode, Report, Severity};

/// The answer.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Safety {
    /// Consistent and aligned.
    Yes,
    /// Works, but writes cost more than they need to (misaligned regions, odd strides).
    Slower,
    /// Unrecognised, inconsistent or not 4 KiB aligned.
    No,
}

/// One finding behind the answer, in a few words.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Reason {
    /// The finding's code.
    pub code: FindingCode,
    /// The partition it concerns (0 = bare filesystem), `None` for the disk.
    pub partition: Option<u32>,
    /// The finding's message up to its first consequence (`" — "` or `"; "`).
    pub text: String,
}

/// The answer with its reasons and the line a front end prints first.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct SafeToFlash {
    /// The answer.
    pub answer: Safety,
    /// `Safe to flash: no — because …` / `yes, but slower than it could be — because …` /
    /// `yes — …`.
    pub line: String,
    /// The findings behind a "no" or "slower", errors first; empty for "yes".
    pub because: Vec<Reason>,
}

/// Warnings that cost write speed or wear but not correctness: the erase-block alignment
/// findings of `align.rs` and the geometry choices that make writes straddle erase blocks
/// or flash pages.
const SLOWER: &[FindingCode] = &[
    FindingCode::PartitionNotEraseAligned,
    FindingCode::FatDataNotAligned,
    FindingCode::FatTableNotAligned,
    FindingCode::FatClusterStraddles,
    FindingCode::FatSectorSmallerThanDevice,
    FindingCode::Ext4JournalNotAligned,
    FindingCode::Ext4InodeTableNotAligned,
    FindingCode::Ext4StrideMismatch,
    FindingCode::Ext4StripeMismatch,
    FindingCode::Ext4BlockSmallerThanDevice,
    FindingCode::Ext4SmallBlocks,
];

/// The message up to its first consequence or advice.
fn short(message: &str) -> &str {
    let cut = [" — ", "; "]
        .iter()
        .filter_map(|s| message.find(s))
        .min()
        .unwrap_or(message.len());
    message.get(..cut).unwrap_or(message)
}

impl Finding {
    /// The message up to its first consequence or advice (`" — "` or `"; "`): what is
    /// wrong, in a few words, for a table row or a drawing.
    #[must_use]
    pub fn summary(&self) -> &str {
        short(&self.message)
    }
}

fn reason(f: &Finding) -> Reason {
    Reason {
        code: f.code,
        partition: f.partition,
        text: f.summary().to_string(),
    }
}

/// The first reason, and how many more there are: one line stays readable, the rest are
/// listed with the findings.
fn join(reasons: &[Reason]) -> String {
    match reasons {
        [] => String::new(),
        [one] => one.text.clone(),
        [first, rest @ ..] => format!(
            "{}; and {} more problem{}",
            first.text,
            rest.len(),
            if rest.len() == 1 { "" } else { "s" }
        ),
    }
}

impl Report {
    /// Whether this image is safe to flash, and why not: no when it is unrecognised or has
    /// an error finding, "yes, but slower than it could be" when something costs write
    /// speed (off the erase block), else yes.
    #[must_use]
    pub fn safe_to_flash(&self) -> SafeToFlash {
        let eb = blockwise_geometry::format_size(self.erase_block_bytes);
        if !self.recognised {
            let because: Vec<Reason> = self
                .findings
                .iter()
                .filter(|f| f.severity == Severity::Error)
                .map(reason)
                .collect();
            return SafeToFlash {
                answer: Safety::No,
                line: "Safe to flash: no — because it is not a disk image blockwise recognises: no partition table and no known filesystem".into(),
                because,
            };
        }
        let errors: Vec<Reason> = self
            .findings
            .iter()
            .filter(|f| f.severity == Severity::Error)
            .map(reason)
            .collect();
        if !errors.is_empty() {
            return SafeToFlash {
                answer: Safety::No,
                line: format!("Safe to flash: no — because {}", join(&errors)),
                because: errors,
            };
        }
        let slower: Vec<Reason> = self
            .findings
            .iter()
            .filter(|f| f.severity == Severity::Warning && SLOWER.contains(&f.code))
            .map(reason)
            .collect();
        if !slower.is_empty() || !self.aligned {
            let why = if slower.is_empty() {
                format!("not every partition and filesystem region is on the {eb} erase block")
            } else {
                join(&slower)
            };
            return SafeToFlash {
                answer: Safety::Slower,
                line: format!("Safe to flash: yes, but slower than it could be — because {why}"),
                because: slower,
            };
        }
        let others = self.count(Severity::Warning);
        let note = match others {
            0 => String::new(),
            1 => "; read the warning below".into(),
            n => format!("; read the {n} warnings below"),
        };
        SafeToFlash {
            answer: Safety::Yes,
            line: format!(
                "Safe to flash: yes — consistent, and every partition and filesystem sits on the {eb} erase block{note}"
            ),
            because: Vec::new(),
        }
    }
}

#[cfg(test)]
#[expect(
    clippy::indexing_slicing,
    clippy::arithmetic_side_effects,
    reason = "tests"
)]
mod tests {
    use super::*;
    use crate::{verify_bytes, Options};

    fn mbr(entries: &[(u8, u32, u32)], len: usize) -> Vec<u8> {
        let mut d = vec![0u8; len];
        for (i, &(t, start, sectors)) in entries.iter().enumerate() {
            let e = 0x1be + 16 * i;
            d[e + 4] = t;
            d[e + 8..e + 12].copy_from_slice(&start.to_le_bytes());
            d[e + 12..e + 16].copy_from_slice(&sectors.to_le_bytes());
        }
        d[510] = 0x55;
        d[511] = 0xaa;
        d
    }

    fn check(disk: &[u8], answer: Safety, line_starts: &str) -> SafeToFlash {
        let s = verify_bytes(disk, &Options::new("t.img")).safe_to_flash();
        assert_eq!(s.answer, answer, "{s:?}");
        assert!(s.line.starts_with(line_starts), "{}", s.line);
        s
    }

    #[test]
    fn errors_say_no_with_the_reason() {
        // Sector 63: not 4 KiB aligned (an error).
        let s = check(
            &mbr(&[(0x83, 63, 8000)], 8 << 20),
            Safety::No,
            "Safe to flash: no — because partition 1 starts at sector 63",
        );
        assert_eq!(s.because[0].code, FindingCode::PartitionNot4kAligned);
        assert_eq!(s.because[0].partition, Some(1));
        assert!(!s.because[0].text.contains(" — "), "{:?}", s.because);
        // Past the end: truncated.
        let s = check(
            &mbr(&[(0x83, 8192, 1 << 20)], 8 << 20),
            Safety::No,
            "Safe to flash: no — because",
        );
        assert!(s
            .because
            .iter()
            .any(|r| r.code == FindingCode::PartitionPastEnd));
    }

    #[test]
    fn misaligned_but_consistent_is_slower() {
        // 1 MiB start: 4 KiB aligned, not on the 4 MiB erase block (a warning).
        let s = check(
            &mbr(&[(0x83, 2048, 8192)], 8 << 20),
            Safety::Slower,
            "Safe to flash: yes, but slower than it could be — because partition 1 starts at sector 2048",
        );
        assert_eq!(s.because[0].code, FindingCode::PartitionNotEraseAligned);
    }

    #[test]
    fn aligned_is_yes_and_unrecognised_is_no() {
        check(
            &mbr(&[(0x83, 8192, 8192)], 8 << 20),
            Safety::Yes,
            "Safe to flash: yes — consistent, and every partition and filesystem sits on the 4 MiB erase block",
        );
        let s = check(
            &[7u8; 4096],
            Safety::No,
            "Safe to flash: no — because it is not a disk image",
        );
        assert_eq!(s.because[0].code, FindingCode::Unrecognised);
    }

    #[test]
    fn short_stops_at_the_first_consequence() {
        assert_eq!(short("a (b: c): d; e — f"), "a (b: c): d");
        assert_eq!(short("a — b; c"), "a");
        assert_eq!(short("plain"), "plain");
        let r = |t: &str| Reason {
            code: FindingCode::PartitionOverlap,
            partition: None,
            text: t.into(),
        };
        assert_eq!(join(&[r("x")]), "x");
        assert_eq!(join(&[r("x"), r("y")]), "x; and 1 more problem");
        assert_eq!(join(&[r("x"), r("y"), r("z")]), "x; and 2 more problems");
    }
}
