//! MBR and EBR: building (through `mbrman`) and parsing (by hand, safe on hostile bytes).
//!
//! ```text
//! 0x000  440  boot code
//! 0x1B8    4  disk signature (LE)
//! 0x1BC    2  0x0000
//! 0x1BE 4×16  entries: status, CHS first[3], type, CHS last[3], LBA first u32, count u32
//! 0x1FE    2  55 AA
//! ```

use std::io::Cursor;

use blockwise_geometry::{
    BlockSource, DiskId, PartType, PartitionPlan, Plan, SectorSize, TableKind,
};
use mbrman::{MBRHeader, MBRPartitionEntry, CHS};

use crate::chs;
use crate::error::{Corrupt, Error, PlanError};
use crate::{lba_offset, to_lba, write_offset};

/// Offset of the first partition entry.
pub const ENTRIES_OFFSET: usize = 0x1be;
/// Offset of the `55 AA` boot signature, just past the four entries.
const SIGNATURE_OFFSET: usize = 0x1fe;
/// Size of one entry.
const ENTRY_BYTES: usize = 16;
/// Most EBRs a chain may have before the parser gives up: as many as Linux reads (partition
/// numbers up to 255, so logical partitions 5–255). Far more than blockwise builds (partition
/// numbers up to 60, what fdisk and sfdisk list).
pub const MAX_EBR_CHAIN: usize = 251;

/// One 16-byte MBR/EBR entry, as stored.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct MbrEntry {
    /// 0x80 bootable, 0x00 not.
    pub status: u8,
    /// CHS of the first sector.
    pub first_chs: [u8; 3],
    /// System ID.
    pub type_: u8,
    /// CHS of the last sector.
    pub last_chs: [u8; 3],
    /// First LBA (relative to the EBR for logical partitions).
    pub start_lba: u32,
    /// Sector count.
    pub sectors: u32,
}

impl MbrEntry {
    /// Type 0 marks an unused entry.
    #[must_use]
    pub fn is_used(&self) -> bool {
        self.type_ != 0
    }

    /// 0x05, 0x0F, 0x85: an extended partition.
    #[must_use]
    pub fn is_extended(&self) -> bool {
        matches!(self.type_, 0x05 | 0x0f | 0x85)
    }

    /// Decodes 16 bytes.
    #[must_use]
    pub fn from_bytes(b: &[u8; 16]) -> Self {
        let [status, c0, c1, c2, type_, l0, l1, l2, s0, s1, s2, s3, n0, n1, n2, n3] = *b;
        MbrEntry {
            status,
            first_chs: [c0, c1, c2],
            type_,
            last_chs: [l0, l1, l2],
            start_lba: u32::from_le_bytes([s0, s1, s2, s3]),
            sectors: u32::from_le_bytes([n0, n1, n2, n3]),
        }
    }

    /// Encodes to 16 bytes.
    #[must_use]
    pub fn to_bytes(&self) -> [u8; 16] {
        let [c0, c1, c2] = self.first_chs;
        let [l0, l1, l2] = self.last_chs;
        let [s0, s1, s2, s3] = self.start_lba.to_le_bytes();
        let [n0, n1, n2, n3] = self.sectors.to_le_bytes();
        [
            self.status,
            c0,
            c1,
            c2,
            self.type_,
            l0,
            l1,
            l2,
            s0,
            s1,
            s2,
            s3,
            n0,
            n1,
            n2,
            n3,
        ]
    }
}

/// A parsed MBR sector.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Mbr {
    /// Disk signature at 0x1B8.
    pub disk_signature: u32,
    /// The four entries, slot 1 first (unused ones included).
    pub entries: [MbrEntry; 4],
}

impl Mbr {
    /// Used entries with their slot number (1–4).
    pub fn used(&self) -> impl Iterator<Item = (u8, &MbrEntry)> {
        (1u8..)
            .zip(self.entries.iter())
            .filter(|(_, e)| e.is_used())
    }

    /// A GPT protective MBR: an 0xEE entry and nothing else.
    #[must_use]
    pub fn is_protective(&self) -> bool {
        let used: Vec<_> = self.used().collect();
        used.len() == 1 && used.iter().all(|(_, e)| e.type_ == 0xee)
    }

    /// An 0xEE entry alongside real ones (non-standard "hybrid MBR").
    #[must_use]
    pub fn is_hybrid(&self) -> bool {
        self.used().any(|(_, e)| e.type_ == 0xee) && self.used().count() > 1
    }

    /// The first extended entry, if any.
    #[must_use]
    pub fn extended(&self) -> Option<(u8, &MbrEntry)> {
        self.used().find(|(_, e)| e.is_extended())
    }
}

/// Parses an MBR (or EBR) from the first 512 bytes of `bytes`. `offset` is where the sector
/// lives on the disk, for messages. Status bytes other than 0x00/0x80 are `Corrupt::Status`.
pub fn parse_mbr(bytes: &[u8], offset: u64) -> Result<Mbr, Corrupt> {
    let sector: &[u8; 512] =
        bytes
            .get(..512)
            .and_then(|s| s.try_into().ok())
            .ok_or(Corrupt::Truncated {
                what: "MBR",
                offset,
                needed: 512,
                len: u64::try_from(bytes.len()).unwrap_or(u64::MAX),
            })?;
    let [.., sig_a, sig_b] = *sector;
    if (sig_a, sig_b) != (0x55, 0xaa) {
        return Err(Corrupt::BootSignature {
            what: "MBR",
            offset,
            found: sig_a,
            found2: sig_b,
        });
    }
    let disk_signature = sector
        .get(0x1b8..0x1bc)
        .and_then(|s| <[u8; 4]>::try_from(s).ok())
        .map_or(0, u32::from_le_bytes);
    let table = sector
        .get(ENTRIES_OFFSET..SIGNATURE_OFFSET)
        .unwrap_or_default();
    let mut entries = [MbrEntry::default(); 4];
    let mut at = offset.saturating_add(0x1be);
    for ((slot, e), raw) in (1u8..)
        .zip(entries.iter_mut())
        .zip(table.chunks_exact(ENTRY_BYTES))
    {
        *e = MbrEntry::from_bytes(&<[u8; 16]>::try_from(raw).unwrap_or([0; 16]));
        if e.is_used() && e.status != 0 && e.status != 0x80 {
            return Err(Corrupt::Status {
                slot,
                offset: at,
                value: e.status,
            });
        }
        at = at.saturating_add(16);
    }
    Ok(Mbr {
        disk_signature,
        entries,
    })
}

/// Reads and parses LBA 0 of `src`.
pub fn read_mbr<S: BlockSource + ?Sized>(src: &S) -> Result<Mbr, Error<S::Error>> {
    let len = src.len();
    if len < 512 {
        return Err(Corrupt::Truncated {
            what: "MBR",
            offset: 0,
            needed: 512,
            len,
        }
        .into());
    }
    let mut buf = [0u8; 512];
    src.read_at(0, &mut buf).map_err(Error::Io)?;
    Ok(parse_mbr(&buf, 0)?)
}

/// A logical partition found by walking the EBR chain.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Logical {
    /// Partition number (5, 6, …).
    pub number: u32,
    /// LBA of its EBR.
    pub ebr_lba: u64,
    /// The EBR's first entry, as stored (start relative to the EBR).
    pub entry: MbrEntry,
    /// Absolute first LBA.
    pub start_lba: u64,
    /// Sector count.
    pub sectors: u64,
}

/// The result of walking an EBR chain: what was found, and what stopped the walk early.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct LogicalChain {
    /// Logical partitions in chain order.
    pub partitions: Vec<Logical>,
    /// Why the walk stopped before the end, if it did.
    pub problem: Option<Corrupt>,
}

/// Walks the EBR chain of `mbr`'s extended partition. The walk is bounded: every next EBR
/// must lie strictly after the previous one and inside both the extended partition and the
/// disk, and at most [`MAX_EBR_CHAIN`] EBRs are read.
pub fn read_logical<S: BlockSource + ?Sized>(
    src: &S,
    sector: SectorSize,
    mbr: &Mbr,
) -> Result<LogicalChain, S::Error> {
    let mut chain = LogicalChain::default();
    let Some((_, ext)) = mbr.extended() else {
        return Ok(chain);
    };
    let disk_sectors = to_lba(src.len(), sector);
    let ext_start = u64::from(ext.start_lba);
    let ext_end = ext_start
        .saturating_add(u64::from(ext.sectors))
        .min(disk_sectors);
    let mut ebr = ext_start;
    let mut number = 5u32;
    for _ in 0..MAX_EBR_CHAIN {
        if ebr >= ext_end || ebr == 0 {
            chain.problem = Some(Corrupt::EbrOutside { lba: ebr });
            return Ok(chain);
        }
        let mut buf = [0u8; 512];
        let ebr_offset = lba_offset(ebr, sector);
        src.read_at(ebr_offset, &mut buf)?;
        let parsed = match parse_mbr(&buf, ebr_offset) {
            Ok(m) => m,
            Err(Corrupt::BootSignature {
                offset,
                found,
                found2,
                ..
            }) => {
                chain.problem = Some(Corrupt::BootSignature {
                    what: "EBR",
                    offset,
                    found,
                    found2,
                });
                return Ok(chain);
            }
            Err(e) => {
                chain.problem = Some(e);
                return Ok(chain);
            }
        };
        let [first, next, ..] = parsed.entries;
        if first.is_used() {
            chain.partitions.push(Logical {
                number,
                ebr_lba: ebr,
                entry: first,
                start_lba: ebr.saturating_add(u64::from(first.start_lba)),
                sectors: u64::from(first.sectors),
            });
            number = number.saturating_add(1);
        }
        if !next.is_used() {
            return Ok(chain);
        }
        let next_lba = ext_start.saturating_add(u64::from(next.start_lba));
        if next_lba <= ebr {
            chain.problem = Some(Corrupt::EbrLoop {
                lba: next_lba,
                previous: ebr,
            });
            return Ok(chain);
        }
        ebr = next_lba;
    }
    chain.problem = Some(Corrupt::EbrChainTooLong { max: MAX_EBR_CHAIN });
    Ok(chain)
}

fn to_chs(bytes: [u8; 3]) -> CHS {
    let (c, h, s) = chs::decode(bytes);
    CHS::new(c, h, s)
}

fn entry(
    status: u8,
    type_: u8,
    start: u64,
    count: u64,
    rel_base: u64,
) -> Result<MBRPartitionEntry, PlanError> {
    let rel = start
        .checked_sub(rel_base)
        .ok_or(PlanError::LbaBeforeBase {
            lba: start,
            base: rel_base,
        })?;
    let starting_lba = u32::try_from(rel).map_err(|_| PlanError::MbrLbaOverflow { lba: rel })?;
    let sectors =
        u32::try_from(count).map_err(|_| PlanError::MbrSectorsOverflow { sectors: count })?;
    let last = start.saturating_add(count).saturating_sub(1);
    Ok(MBRPartitionEntry {
        boot: status,
        first_chs: to_chs(chs::encode(start)),
        sys: type_,
        last_chs: to_chs(chs::encode(last)),
        starting_lba,
        sectors,
    })
}

/// The entry of a primary or logical partition (start relative to `rel_base`).
fn partition_entry(
    p: &PartitionPlan,
    sector: SectorSize,
    rel_base: u64,
) -> Result<MBRPartitionEntry, PlanError> {
    let PartType::Mbr(type_) = p.type_ else {
        return Err(PlanError::TypeMismatch {
            partition: p.index,
            table: TableKind::Mbr,
        });
    };
    entry(
        if p.bootable { 0x80 } else { 0 },
        type_,
        to_lba(p.start_bytes, sector),
        to_lba(p.size_bytes, sector),
        rel_base,
    )
}

/// A hybrid MBR (see `blockwise_geometry::hybrid`): the mirrored partitions in GPT order in
/// entries 1, 2, 3, then the 0xEE entry over the primary GPT.
fn hybrid_entries(
    hdr: &mut MBRHeader,
    plan: &Plan,
    mirrored: &[&PartitionPlan],
) -> Result<(), PlanError> {
    let sector = plan.sector_bytes;
    if mirrored.len() > blockwise_geometry::hybrid::MAX_MIRRORED {
        return Err(PlanError::TooManyMirrored {
            count: mirrored.len(),
        });
    }
    let gpt = plan.gpt.as_ref().ok_or(PlanError::MissingGptLayout)?;
    let mut slot = 1usize;
    for p in mirrored {
        let type_ = p.mbr_type.unwrap_or(0);
        let e = entry(
            if p.bootable { 0x80 } else { 0 },
            type_,
            to_lba(p.start_bytes, sector),
            to_lba(p.size_bytes, sector),
            0,
        )?;
        if let Some(s) = hdr.get_mut(slot) {
            *s = e;
        }
        slot = slot.saturating_add(1);
    }
    let (start, count) = blockwise_geometry::hybrid::protective_entry(gpt.first_usable_lba);
    if let Some(s) = hdr.get_mut(slot) {
        *s = entry(0, 0xee, start, count, 0)?;
    }
    Ok(())
}

fn header_bytes(h: &MBRHeader) -> Result<Vec<u8>, PlanError> {
    let mut cur = Cursor::new(vec![0u8; 512]);
    h.write_into(&mut cur).map_err(PlanError::Encode)?;
    let mut v = cur.into_inner();
    v.truncate(512);
    Ok(v)
}

/// The sectors an MBR-table plan writes: `(byte offset, 512 bytes)` for the MBR and each EBR.
/// For a GPT plan, the protective MBR.
pub fn mbr_sectors(plan: &Plan) -> Result<Vec<(u64, Vec<u8>)>, PlanError> {
    let sector = plan.sector_bytes;
    let disk_sectors = to_lba(plan.size_bytes, sector);
    let signature = match plan.table.disk_id {
        Some(DiskId::Mbr(s)) => s,
        _ => 0,
    };
    let mut hdr = MBRHeader::new(signature.to_le_bytes());
    let mut out = Vec::new();
    match plan.table.kind {
        TableKind::None => return Ok(out),
        TableKind::Gpt => {
            let mirrored: Vec<_> = plan
                .partitions
                .iter()
                .filter(|p| p.in_table && p.mbr_type.is_some())
                .collect();
            if mirrored.is_empty() {
                let count = disk_sectors.saturating_sub(1).min(u64::from(u32::MAX));
                let mut e = entry(0, 0xee, 1, count, 0)?;
                e.first_chs = to_chs(chs::encode(1));
                e.last_chs = to_chs([0xff, 0xff, 0xff]);
                if let Some(slot) = hdr.get_mut(1) {
                    *slot = e;
                }
            } else {
                hybrid_entries(&mut hdr, plan, &mirrored)?;
            }
            out.push((0, header_bytes(&hdr)?));
            return Ok(out);
        }
        TableKind::Mbr => {}
    }
    let primaries: Vec<_> = plan
        .partitions
        .iter()
        .filter(|p| p.in_table && !p.logical)
        .collect();
    // A primary's number is its entry (1–4; forced primaries come after the extended one).
    for p in &primaries {
        let e = partition_entry(p, sector, 0)?;
        let slot = usize::try_from(p.index).unwrap_or(usize::MAX);
        *hdr.get_mut(slot)
            .filter(|_| slot >= 1)
            .ok_or(PlanError::TooManyPrimaries {
                count: primaries.len(),
            })? = e;
    }
    if let Some(ext) = &plan.extended {
        let ext_start = to_lba(ext.start_bytes, sector);
        let e = entry(0, 0x0f, ext_start, to_lba(ext.size_bytes, sector), 0)?;
        let slot = usize::from(ext.entry);
        let taken = primaries.iter().any(|p| p.index == u32::from(ext.entry));
        *hdr.get_mut(slot).filter(|_| slot >= 1 && !taken).ok_or(
            PlanError::NoSlotForExtended {
                primaries: primaries.len(),
            },
        )? = e;
        let ebr_of = |p: &PartitionPlan| {
            p.ebr_bytes
                .map(|b| to_lba(b, sector))
                .ok_or(PlanError::MissingEbr { partition: p.index })
        };
        let logicals: Vec<_> = plan
            .partitions
            .iter()
            .filter(|p| p.in_table && p.logical)
            .collect();
        let nexts = logicals.iter().skip(1).map(Some).chain([None]);
        for (p, next) in logicals.iter().zip(nexts) {
            let ebr = ebr_of(p)?;
            let mut ebr_hdr = MBRHeader::new([0; 4]);
            let first = partition_entry(p, sector, ebr)?;
            if let Some(s) = ebr_hdr.get_mut(1) {
                *s = first;
            }
            if let Some(next) = next {
                let next_ebr = ebr_of(next)?;
                let next_end = to_lba(next.end_bytes(), sector);
                let sectors = next_end
                    .checked_sub(next_ebr)
                    .ok_or(PlanError::EbrPastEnd {
                        partition: next.index,
                        ebr_lba: next_ebr,
                        end_lba: next_end,
                    })?;
                let link = entry(0, 0x05, next_ebr, sectors, ext_start)?;
                // CHS of the link describe the absolute position.
                if let Some(s) = ebr_hdr.get_mut(2) {
                    *s = link;
                }
            }
            out.push((write_offset(ebr, sector)?, header_bytes(&ebr_hdr)?));
        }
    }
    out.insert(0, (0, header_bytes(&hdr)?));
    Ok(out)
}

#[cfg(test)]
#[expect(clippy::indexing_slicing, clippy::unwrap_used, reason = "tests")]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn entry_round_trip() {
        let e = MbrEntry {
            status: 0x80,
            first_chs: [0x20, 0x21, 0],
            type_: 0x0c,
            last_chs: [0xfe, 0xff, 0xff],
            start_lba: 2048,
            sectors: 524_288,
        };
        assert_eq!(MbrEntry::from_bytes(&e.to_bytes()), e);
    }

    #[test]
    fn bad_status_and_signature() {
        let mut s = [0u8; 512];
        assert!(matches!(
            parse_mbr(&s, 0),
            Err(Corrupt::BootSignature { .. })
        ));
        s[510] = 0x55;
        s[511] = 0xaa;
        s[0x1be] = 0x12;
        s[0x1be + 4] = 0x83;
        assert_eq!(
            parse_mbr(&s, 0),
            Err(Corrupt::Status {
                slot: 1,
                offset: 0x1be,
                value: 0x12
            })
        );
        assert!(matches!(
            parse_mbr(&s[..100], 0),
            Err(Corrupt::Truncated { .. })
        ));
    }

    #[test]
    fn looping_ebr_chain_is_bounded() {
        let sb = 512usize;
        let mut disk = vec![0u8; sb * 64];
        let set = |disk: &mut Vec<u8>, lba: usize, slot: usize, e: MbrEntry| {
            let at = lba * sb + ENTRIES_OFFSET + slot * 16;
            disk[at..at + 16].copy_from_slice(&e.to_bytes());
            disk[lba * sb + 510] = 0x55;
            disk[lba * sb + 511] = 0xaa;
        };
        let ext = MbrEntry {
            type_: 0x0f,
            start_lba: 8,
            sectors: 50,
            ..MbrEntry::default()
        };
        set(&mut disk, 0, 0, ext);
        let logical = MbrEntry {
            type_: 0x83,
            start_lba: 1,
            sectors: 2,
            ..MbrEntry::default()
        };
        let link = |start_lba| MbrEntry {
            type_: 0x05,
            start_lba,
            sectors: 3,
            ..MbrEntry::default()
        };
        // EBR at 8 links to 16, 16 links back to 8.
        set(&mut disk, 8, 0, logical);
        set(&mut disk, 8, 1, link(8));
        set(&mut disk, 16, 0, logical);
        set(&mut disk, 16, 1, link(0));
        let mbr = read_mbr(disk.as_slice()).unwrap();
        let chain = read_logical(disk.as_slice(), SectorSize::S512, &mbr).unwrap();
        assert_eq!(chain.partitions.len(), 2);
        assert_eq!(
            chain.problem,
            Some(Corrupt::EbrLoop {
                lba: 8,
                previous: 16
            })
        );
    }

    proptest! {
        #[test]
        fn random_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..4096), fix in any::<bool>()) {
            let mut bytes = bytes;
            if fix && bytes.len() >= 512 { bytes[510] = 0x55; bytes[511] = 0xaa; }
            if let Ok(m) = parse_mbr(&bytes, 0) {
                let _ = read_logical(bytes.as_slice(), SectorSize::S512, &m);
                let _ = read_logical(bytes.as_slice(), SectorSize::S4096, &m);
            }
        }
    }
}
