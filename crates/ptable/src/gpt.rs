//! GPT: raw structs (zerocopy, little-endian fields), building and parsing.
//!
//! ```text
//! LBA 0          protective MBR (type 0xEE over the whole disk)
//! LBA 1          primary header ─┐ MyLBA=1, AlternateLBA=N-1, PartitionEntryLBA=2
//! LBA 2..        entry array     │ 128 × 128 bytes
//! …              partitions
//! LBA N-1-k..    backup entries  │
//! LBA N-1        backup header ──┘ MyLBA=N-1, AlternateLBA=1
//! ```

use blockwise_geometry::{BlockSource, DiskId, Guid, PartType, Plan, SectorSize, TableKind};
use zerocopy::little_endian::{U32, U64};
use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout, Unaligned};

use crate::error::{Corrupt, PlanError, Which};
use crate::{lba_offset, to_lba, write_offset};

/// `EFI PART`.
pub const SIGNATURE: [u8; 8] = *b"EFI PART";
/// Revision 1.0.
pub const REVISION: u32 = 0x0001_0000;
/// Number of entries we write.
pub const ENTRY_COUNT: u32 = 128;
/// Size of one entry.
pub const ENTRY_SIZE: u32 = 128;
/// The largest entry array the parser accepts (bound before allocating).
pub const MAX_ENTRY_ARRAY_BYTES: u64 = 1 << 20;
/// Bytes of the entry array we write: [`ENTRY_COUNT`] × [`ENTRY_SIZE`].
const ENTRY_ARRAY_BYTES: usize = 128 * 128;
const _: () = assert!(ENTRY_COUNT == 128 && ENTRY_SIZE == 128);
/// Attribute bit 2: legacy BIOS bootable.
pub const ATTR_LEGACY_BOOTABLE: u64 = 1 << 2;

/// The GPT header as stored (UEFI spec §5.3.2, table 5-5).
#[derive(Clone, Copy, Debug, FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned)]
#[repr(C)]
pub struct GptHeaderRaw {
    /// `EFI PART`.
    pub signature: [u8; 8],
    /// 0x00010000.
    pub revision: U32,
    /// Bytes of the header covered by the CRC (92).
    pub header_size: U32,
    /// CRC32 of the header with this field zero.
    pub header_crc32: U32,
    /// Zero.
    pub reserved: U32,
    /// LBA of this header.
    pub my_lba: U64,
    /// LBA of the other header.
    pub alternate_lba: U64,
    /// First LBA a partition may use.
    pub first_usable_lba: U64,
    /// Last LBA a partition may use.
    pub last_usable_lba: U64,
    /// Disk GUID (on-disk byte order).
    pub disk_guid: [u8; 16],
    /// LBA of this copy's entry array.
    pub partition_entry_lba: U64,
    /// Number of entries.
    pub num_partition_entries: U32,
    /// Size of one entry.
    pub size_of_partition_entry: U32,
    /// CRC32 of the entry array.
    pub partition_entry_array_crc32: U32,
}
const _: () = assert!(core::mem::size_of::<GptHeaderRaw>() == 92);

/// A GPT partition entry as stored (UEFI spec §5.3.3, table 5-6).
#[derive(Clone, Copy, Debug, FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned)]
#[repr(C)]
pub struct GptEntryRaw {
    /// Type GUID; zero = unused.
    pub partition_type_guid: [u8; 16],
    /// Unique GUID.
    pub unique_partition_guid: [u8; 16],
    /// First LBA.
    pub starting_lba: U64,
    /// Last LBA, inclusive.
    pub ending_lba: U64,
    /// Attribute bits.
    pub attributes: U64,
    /// UTF-16LE name, NUL padded.
    pub partition_name: [u8; 72],
}
const _: () = assert!(core::mem::size_of::<GptEntryRaw>() == 128);

/// A validated header.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GptHeader {
    /// Where it says it lives.
    pub my_lba: u64,
    /// Where it says the other copy lives.
    pub alternate_lba: u64,
    /// First usable LBA.
    pub first_usable_lba: u64,
    /// Last usable LBA.
    pub last_usable_lba: u64,
    /// Disk GUID.
    pub disk_guid: Guid,
    /// Entry array LBA.
    pub entries_lba: u64,
    /// Entry count.
    pub entry_count: u32,
    /// Entry size.
    pub entry_size: u32,
}

/// A used partition entry.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GptEntry {
    /// 1-based slot in the array.
    pub index: u32,
    /// Type GUID.
    pub type_guid: Guid,
    /// Unique GUID.
    pub unique_guid: Guid,
    /// First LBA.
    pub first_lba: u64,
    /// Last LBA, inclusive.
    pub last_lba: u64,
    /// Attribute bits.
    pub attributes: u64,
    /// Name (UTF-16 decoded, lossy, up to the first NUL).
    pub name: String,
}

/// One copy (header + used entries) that passed every check.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GptCopy {
    /// The header.
    pub header: GptHeader,
    /// Used entries in slot order.
    pub entries: Vec<GptEntry>,
}

/// Both copies, each either valid or with the reason it is not.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GptRead {
    /// Primary at LBA 1.
    pub primary: Result<GptCopy, Corrupt>,
    /// Backup at the last LBA of the source (or where the primary says it is).
    pub backup: Result<GptCopy, Corrupt>,
}

impl GptRead {
    /// The primary if valid, else the backup.
    #[must_use]
    pub fn best(&self) -> Option<&GptCopy> {
        self.primary.as_ref().ok().or(self.backup.as_ref().ok())
    }
}

fn crc32(data: &[u8]) -> u32 {
    let mut h = crc32fast::Hasher::new();
    h.update(data);
    h.finalize()
}

fn decode_name(raw: &[u8; 72]) -> String {
    let units: Vec<u16> = raw
        .chunks_exact(2)
        .map(|c| {
            u16::from_le_bytes([
                c.first().copied().unwrap_or(0),
                c.get(1).copied().unwrap_or(0),
            ])
        })
        .take_while(|&u| u != 0)
        .collect();
    String::from_utf16_lossy(&units)
}

fn encode_name(name: &str) -> [u8; 72] {
    let mut out = [0u8; 72];
    for (dst, u) in out.chunks_exact_mut(2).zip(name.encode_utf16()) {
        dst.copy_from_slice(&u.to_le_bytes());
    }
    out
}

/// Reads and checks the copy whose header is at `lba`.
fn read_copy<S: BlockSource + ?Sized>(
    src: &S,
    sector: SectorSize,
    lba: u64,
    copy: Which,
) -> Result<Result<GptCopy, Corrupt>, S::Error> {
    let sb = sector.bytes_u64();
    let len = src.len();
    let sectors = to_lba(len, sector);
    let offset = lba_offset(lba, sector);
    if lba >= sectors || sectors < 3 {
        return Ok(Err(Corrupt::Truncated {
            what: "GPT header",
            offset,
            needed: sb,
            len,
        }));
    }
    let mut buf = vec![0u8; usize::try_from(sb).unwrap_or(4096)];
    src.read_at(offset, &mut buf)?;
    let Ok((raw, _)) = GptHeaderRaw::read_from_prefix(&buf) else {
        return Ok(Err(Corrupt::Truncated {
            what: "GPT header",
            offset,
            needed: 92,
            len,
        }));
    };
    if raw.signature != SIGNATURE {
        return Ok(Err(Corrupt::GptSignature { copy, offset }));
    }
    let header_size = raw.header_size.get();
    if header_size < 92 || u64::from(header_size) > sb {
        return Ok(Err(Corrupt::GptHeaderSize {
            copy,
            offset: offset.saturating_add(12),
            value: header_size,
        }));
    }
    let stored = raw.header_crc32.get();
    let mut hdr_bytes = buf
        .get(..usize::try_from(header_size).unwrap_or(92))
        .unwrap_or_default()
        .to_vec();
    if let Some(f) = hdr_bytes.get_mut(16..20) {
        f.fill(0);
    }
    let computed = crc32(&hdr_bytes);
    if stored != computed {
        return Ok(Err(Corrupt::GptHeaderCrc {
            copy,
            offset: offset.saturating_add(16),
            stored,
            computed,
        }));
    }
    let my_lba = raw.my_lba.get();
    if my_lba != lba {
        return Ok(Err(Corrupt::GptMyLba {
            copy,
            my_lba,
            read_at: lba,
        }));
    }
    let first = raw.first_usable_lba.get();
    let last = raw.last_usable_lba.get();
    if first > last || last >= sectors || first < 2 {
        return Ok(Err(Corrupt::GptUsableRange {
            copy,
            first,
            last,
            sectors,
        }));
    }
    let count = raw.num_partition_entries.get();
    let esize = raw.size_of_partition_entry.get();
    let total = u64::from(count).saturating_mul(u64::from(esize));
    let size_ok = esize >= 128 && esize.is_power_of_two();
    if !size_ok || total > MAX_ENTRY_ARRAY_BYTES || count == 0 {
        return Ok(Err(Corrupt::GptEntryArray {
            copy,
            offset: offset.saturating_add(80),
            count,
            size: esize,
        }));
    }
    let entries_lba = raw.partition_entry_lba.get();
    let array_sectors = total.div_ceil(sb);
    let array_end = entries_lba.saturating_add(array_sectors);
    let overlaps_usable = entries_lba <= last && array_end > first;
    if entries_lba < 2
        || array_end > sectors
        || overlaps_usable
        || (entries_lba <= lba && lba < array_end)
    {
        return Ok(Err(Corrupt::GptEntriesLocation {
            copy,
            lba: entries_lba,
        }));
    }
    // Bounded by MAX_ENTRY_ARRAY_BYTES above.
    let mut array = vec![0u8; usize::try_from(total).unwrap_or(0)];
    src.read_at(lba_offset(entries_lba, sector), &mut array)?;
    let stored = raw.partition_entry_array_crc32.get();
    let computed = crc32(&array);
    if stored != computed {
        return Ok(Err(Corrupt::GptEntriesCrc {
            copy,
            stored,
            computed,
        }));
    }
    let mut entries = Vec::new();
    for (i, chunk) in (1u32..).zip(array.chunks_exact(usize::try_from(esize).unwrap_or(128))) {
        let Ok((e, _)) = GptEntryRaw::read_from_prefix(chunk) else {
            continue;
        };
        if e.partition_type_guid == [0; 16] {
            continue;
        }
        entries.push(GptEntry {
            index: i,
            type_guid: Guid(e.partition_type_guid),
            unique_guid: Guid(e.unique_partition_guid),
            first_lba: e.starting_lba.get(),
            last_lba: e.ending_lba.get(),
            attributes: e.attributes.get(),
            name: decode_name(&e.partition_name),
        });
    }
    Ok(Ok(GptCopy {
        header: GptHeader {
            my_lba,
            alternate_lba: raw.alternate_lba.get(),
            first_usable_lba: first,
            last_usable_lba: last,
            disk_guid: Guid(raw.disk_guid),
            entries_lba,
            entry_count: count,
            entry_size: esize,
        },
        entries,
    }))
}

/// Reads both GPT copies. The backup is looked for at the last LBA of the source; if it is
/// not there but the primary names another AlternateLBA inside the source, that is tried too.
pub fn read_gpt<S: BlockSource + ?Sized>(src: &S, sector: SectorSize) -> Result<GptRead, S::Error> {
    let sectors = to_lba(src.len(), sector);
    let primary = read_copy(src, sector, 1, Which::Primary)?;
    let last = sectors.saturating_sub(1);
    let mut backup = read_copy(src, sector, last, Which::Backup)?;
    if backup.is_err() {
        if let Ok(p) = &primary {
            let alt = p.header.alternate_lba;
            if alt != last && alt > 1 && alt < sectors {
                if let Ok(b) = read_copy(src, sector, alt, Which::Backup)? {
                    backup = Ok(b);
                }
            }
        }
    }
    Ok(GptRead { primary, backup })
}

/// The writes a GPT plan needs: `(byte offset, bytes)` for the primary header, primary
/// entries, backup entries and backup header (the protective MBR comes from `mbr_sectors`).
pub fn gpt_writes(plan: &Plan) -> Result<Vec<(u64, Vec<u8>)>, PlanError> {
    let g = plan.gpt.ok_or(PlanError::MissingGptLayout)?;
    let sector = plan.sector_bytes;
    let disk_guid = match plan.table.disk_id {
        Some(DiskId::Gpt(g)) => g,
        _ => return Err(PlanError::MissingDiskGuid),
    };
    let tabled: Vec<_> = plan.partitions.iter().filter(|p| p.in_table).collect();
    let count = tabled.len();
    if u32::try_from(count).map_or(true, |c| c > ENTRY_COUNT) {
        return Err(PlanError::GptEntriesFull {
            count,
            max: ENTRY_COUNT,
        });
    }
    let mut array = vec![0u8; ENTRY_ARRAY_BYTES];
    for (p, slot) in tabled
        .iter()
        .zip(array.chunks_exact_mut(size_of::<GptEntryRaw>()))
    {
        let PartType::Gpt(type_guid) = p.type_ else {
            return Err(PlanError::TypeMismatch {
                partition: p.index,
                table: TableKind::Gpt,
            });
        };
        let ending_lba =
            to_lba(p.end_bytes(), sector)
                .checked_sub(1)
                .ok_or(PlanError::EndsInFirstSector {
                    partition: p.index,
                    end_bytes: p.end_bytes(),
                })?;
        let e = GptEntryRaw {
            partition_type_guid: type_guid.0,
            unique_partition_guid: p.guid.unwrap_or_default().0,
            starting_lba: U64::new(to_lba(p.start_bytes, sector)),
            ending_lba: U64::new(ending_lba),
            attributes: U64::new(
                p.attributes.bits() | if p.bootable { ATTR_LEGACY_BOOTABLE } else { 0 },
            ),
            partition_name: encode_name(p.name.as_deref().unwrap_or("")),
        };
        slot.copy_from_slice(e.as_bytes());
    }
    let array_crc = crc32(&array);
    let header = |my: u64, alt: u64, entries: u64| {
        let mut h = GptHeaderRaw {
            signature: SIGNATURE,
            revision: U32::new(REVISION),
            header_size: U32::new(92),
            header_crc32: U32::new(0),
            reserved: U32::new(0),
            my_lba: U64::new(my),
            alternate_lba: U64::new(alt),
            first_usable_lba: U64::new(g.first_usable_lba),
            last_usable_lba: U64::new(g.last_usable_lba),
            disk_guid: disk_guid.0,
            partition_entry_lba: U64::new(entries),
            num_partition_entries: U32::new(ENTRY_COUNT),
            size_of_partition_entry: U32::new(ENTRY_SIZE),
            partition_entry_array_crc32: U32::new(array_crc),
        };
        h.header_crc32 = U32::new(crc32(h.as_bytes()));
        let mut bytes = vec![0u8; usize::try_from(sector.bytes()).unwrap_or(512)];
        if let Some(dst) = bytes.get_mut(..size_of::<GptHeaderRaw>()) {
            dst.copy_from_slice(h.as_bytes());
        }
        bytes
    };
    Ok(vec![
        (write_offset(g.backup_entries_lba, sector)?, array.clone()),
        (
            write_offset(g.backup_header_lba, sector)?,
            header(g.backup_header_lba, 1, g.backup_entries_lba),
        ),
        (write_offset(2, sector)?, array),
        (write_offset(1, sector)?, header(1, g.backup_header_lba, 2)),
    ])
}

#[cfg(test)]
#[expect(
    clippy::indexing_slicing,
    clippy::arithmetic_side_effects,
    clippy::as_conversions,
    reason = "tests"
)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn names_round_trip() {
        assert_eq!(decode_name(&encode_name("rootfs")), "rootfs");
        assert_eq!(decode_name(&encode_name("é")), "é");
    }

    proptest! {
        #[test]
        fn random_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..20_000), sig in any::<bool>(), s4k in any::<bool>()) {
            let mut bytes = bytes;
            let s = if s4k { SectorSize::S4096 } else { SectorSize::S512 };
            let sb = s.bytes() as usize;
            if sig && bytes.len() >= sb + 92 {
                bytes[sb..sb + 8].copy_from_slice(&SIGNATURE);
                bytes[sb + 12..sb + 16].copy_from_slice(&92u32.to_le_bytes());
            }
            let _ = read_gpt(bytes.as_slice(), s);
        }
    }
}
