//! Formats `verify` recognises by their headers without checking their internal alignment:
//! NTFS, btrfs, XFS, ISO 9660, LUKS 1 and 2, and Linux swap. Each module reads only its
//! header (bounded reads, checked arithmetic) into an [`OtherFs`]: kind, version, label,
//! UUID as `blkid` prints them, the size the header claims, block size and what else is
//! simple to report (XFS's stripe unit and width, the LUKS payload offset). The verifier then
//! checks that the filesystem fits its partition; its verdict keeps saying that the
//! internals were not checked (`aligned` stays `None`).

pub mod btrfs;
pub mod iso9660;
pub mod luks;
pub mod ntfs;
pub mod swap;
pub mod xfs;

use blockwise_geometry::{format_size, BlockSource, FsKind, FsPlan, OtherFs, PartitionPlan};

use crate::{read_clamped, FindingCode, Severity, Verifier};

/// The kinds (as [`crate::magic::classify`] names them) this module parses.
pub const PARSED: &[&str] = &["ntfs", "btrfs", "xfs", "iso9660", "luks", "swap"];

/// Whether `kind` has a header parser here.
#[must_use]
pub fn parses(kind: &str) -> bool {
    PARSED.contains(&kind)
}

/// Formats `bytes` as a lowercase UUID with dashes (`blkid`'s spelling).
pub(crate) fn uuid_string(b: &[u8]) -> Option<String> {
    let b: &[u8; 16] = b.get(..16)?.try_into().ok()?;
    if b.iter().all(|&x| x == 0) {
        return None;
    }
    let h: String = b.iter().map(|x| format!("{x:02x}")).collect();
    Some(format!(
        "{}-{}-{}-{}-{}",
        h.get(0..8)?,
        h.get(8..12)?,
        h.get(12..16)?,
        h.get(16..20)?,
        h.get(20..32)?
    ))
}

/// Big-endian u16 at `o`, or 0.
pub(crate) fn be16(b: &[u8], o: usize) -> u16 {
    o.checked_add(2)
        .and_then(|e| b.get(o..e))
        .and_then(|s| <[u8; 2]>::try_from(s).ok())
        .map_or(0, u16::from_be_bytes)
}

/// Big-endian u32 at `o`, or 0.
pub(crate) fn be32(b: &[u8], o: usize) -> u32 {
    o.checked_add(4)
        .and_then(|e| b.get(o..e))
        .and_then(|s| <[u8; 4]>::try_from(s).ok())
        .map_or(0, u32::from_be_bytes)
}

/// Big-endian u64 at `o`, or 0.
pub(crate) fn be64(b: &[u8], o: usize) -> u64 {
    o.checked_add(8)
        .and_then(|e| b.get(o..e))
        .and_then(|s| <[u8; 8]>::try_from(s).ok())
        .map_or(0, u64::from_be_bytes)
}

/// Little-endian u16 at `o`, or 0.
pub(crate) fn le16(b: &[u8], o: usize) -> u16 {
    o.checked_add(2)
        .and_then(|e| b.get(o..e))
        .and_then(|s| <[u8; 2]>::try_from(s).ok())
        .map_or(0, u16::from_le_bytes)
}

/// A label from UTF-16 code units (up to the first NUL; control characters shown as `?`).
pub(crate) fn utf16_label(units: impl Iterator<Item = u16>) -> Option<String> {
    let s: String = char::decode_utf16(units.take_while(|&u| u != 0))
        .map(|c| match c {
            Ok(c) if !c.is_control() => c,
            _ => '?',
        })
        .collect();
    let t = s.trim_end().to_string();
    (!t.is_empty()).then_some(t)
}

/// A label from UTF-8 bytes up to the first NUL (invalid bytes and control characters shown
/// as `?`), trailing spaces trimmed.
pub(crate) fn utf8_label(field: &[u8]) -> Option<String> {
    let end = field.iter().position(|&b| b == 0).unwrap_or(field.len());
    let s: String = String::from_utf8_lossy(field.get(..end).unwrap_or_default())
        .chars()
        .map(|c| {
            if c.is_control() || c == '\u{fffd}' {
                '?'
            } else {
                c
            }
        })
        .collect();
    let t = s.trim_end().to_string();
    (!t.is_empty()).then_some(t)
}

/// The standard CRC-32C (Castagnoli, initial and final inversion), as btrfs and XFS store it.
pub(crate) fn crc32c(data: &[u8]) -> u32 {
    !blockwise_ext4::csum::crc32c_raw(u32::MAX, data)
}

impl<S: BlockSource + ?Sized> Verifier<'_, S> {
    /// Reads and parses the header of a format of [`PARSED`] found at partition `p`.
    pub(crate) fn other_fs(&mut self, p: &mut PartitionPlan, kind: &str) -> Result<(), S::Error> {
        let base = p.start_bytes;
        let parsed = match kind {
            "ntfs" => {
                let boot = read_clamped(self.src, base, 512)?;
                match ntfs::parse_boot(&boot) {
                    Ok(b) => {
                        let rec = match b.volume_record() {
                            Some((off, len)) => {
                                read_clamped(self.src, base.saturating_add(off), len)?
                            }
                            None => Vec::new(),
                        };
                        Ok(b.to_fs(&rec))
                    }
                    Err(e) => Err(e),
                }
            }
            "btrfs" => {
                let sb = read_clamped(self.src, base.saturating_add(btrfs::SUPER_OFFSET), 4096)?;
                btrfs::parse(&sb)
            }
            "xfs" => {
                let sb = read_clamped(self.src, base, 4096)?;
                xfs::parse(&sb)
            }
            "iso9660" => {
                let vds = read_clamped(
                    self.src,
                    base.saturating_add(iso9660::DESCRIPTORS_OFFSET),
                    iso9660::MAX_DESCRIPTORS.saturating_mul(iso9660::SECTOR),
                )?;
                iso9660::parse(&vds)
            }
            "luks" => {
                let head = read_clamped(self.src, base, 4096)?;
                match luks::json_len(&head) {
                    Some(n) => {
                        let json = read_clamped(self.src, base.saturating_add(4096), n)?;
                        luks::parse(&head, &json, base)
                    }
                    None => luks::parse(&head, &[], base),
                }
            }
            "swap" => {
                let head = read_clamped(self.src, base, 4096)?;
                let big = read_clamped(self.src, base.saturating_add(65536 - 10), 10)?;
                swap::parse(&head, &big)
            }
            _ => Ok(OtherFs::named(kind)),
        };
        p.content = FsKind::Raw;
        let i = p.index;
        let fs = match parsed {
            Ok(fs) => fs,
            Err(why) => {
                self.add(
                    Severity::Error,
                    FindingCode::FsHeaderInvalid,
                    Some(i),
                    format!("partition {i}: {kind} found by its magic number, but its header is invalid: {why}"),
                );
                p.filesystem = Some(FsPlan::Other(OtherFs::named(kind)));
                return Ok(());
            }
        };
        if let Some(size) = fs.size_bytes.filter(|&s| s > p.size_bytes) {
            self.add(
                Severity::Error,
                FindingCode::FsLargerThanPartition,
                Some(i),
                format!(
                    "partition {i} ({kind}): the {kind} header says it spans {} but the partition holds {}: what lies past the end is lost; grow the partition or remake the {kind}",
                    format_size(size),
                    format_size(p.size_bytes)
                ),
            );
        }
        if let Some(d) = fs.data_start_bytes.filter(|&d| d > p.end_bytes()) {
            self.add(
                Severity::Error,
                FindingCode::FsLargerThanPartition,
                Some(i),
                format!(
                    "partition {i} ({kind}): the payload starts at {} ({} into the partition), past its end at {}",
                    format_size(d),
                    format_size(d.saturating_sub(base)),
                    format_size(p.end_bytes())
                ),
            );
        }
        let what = match (&fs.label, &fs.uuid) {
            (Some(l), _) => format!(" (label \"{}\")", l.escape_debug()),
            (None, Some(u)) => format!(" (UUID {u})"),
            (None, None) => String::new(),
        };
        self.add(
            Severity::Info,
            FindingCode::NotChecked,
            Some(i),
            format!("partition {i}: {kind}{what} recognised; the alignment of its internals is not checked (only the partition start)"),
        );
        p.filesystem = Some(FsPlan::Other(fs));
        Ok(())
    }
}
