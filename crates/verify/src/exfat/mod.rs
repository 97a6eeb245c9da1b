//! exFAT: the boot region (main and backup, boot checksum), the FAT's place and size, the
//! cluster heap, and the root directory's first cluster (allocation bitmap, up-case table,
//! volume label and GUID), safe on hostile bytes.
//!
//! ```text
//! sector 0 boot sector: 0x03 "EXFAT   " 0x40 PartitionOffset u64 0x48 VolumeLength u64
//!          0x50 FatOffset u32 0x54 FatLength u32 0x58 ClusterHeapOffset u32
//!          0x5C ClusterCount u32 0x60 FirstClusterOfRootDirectory u32 0x64 VolumeSerial u32
//!          0x68 Revision u16 0x6A VolumeFlags u16 0x6C BytesPerSectorShift 0x6D
//!          SectorsPerClusterShift 0x6E NumberOfFats 0x1FE 55 AA
//! sectors 1–8 extended boot sectors, 9 OEM parameters, 10 reserved, 11 checksum
//! sectors 12–23 the backup boot region
//! ```
//! Parsing (`parse`) reads the bytes through the shared layouts of [`blockwise_exfat::raw`];
//! checking (`check`) judges the volume against its partition, the erase block and the
//! device; the alignment findings (`align`) are pure functions that `plan_findings` also
//! calls, so a plan predicts them.

pub(crate) mod align;
mod check;
mod parse;

pub use parse::*;
