//! FAT12/16/32 boot sector (BPB) and FSInfo parser, safe on hostile bytes.
//!
//! ```text
//! 0x00 jmpBoot[3]  0x03 OEM[8]  0x0B BytsPerSec u16  0x0D SecPerClus u8  0x0E RsvdSecCnt u16
//! 0x10 NumFATs u8  0x11 RootEntCnt u16  0x13 TotSec16 u16  0x15 Media u8  0x16 FATSz16 u16
//! 0x1C HiddSec u32  0x20 TotSec32 u32
//! FAT32: 0x24 FATSz32 u32  0x2C RootClus u32  0x30 FSInfo u16  0x32 BkBootSec u16
//!        0x42 BootSig  0x43 VolID  0x47 VolLab[11]
//! FAT12/16: 0x26 BootSig  0x27 VolID  0x2B VolLab[11]
//! 0x1FE 55 AA (at 510 even with 4096-byte sectors)
//! ```
//! The FAT type is decided by the cluster count (Microsoft's rule, fatgen103 §3.5); the BPB
//! layout (FAT32 when `FATSz16 == 0`) is what Linux goes by. A mismatch is reported.
//!
//! Parsing (`parse`) reads the bytes through the shared layouts of [`blockwise_fat::raw`],
//! turns them into validated values and never panics; checking
//! (`check`) judges a parsed volume against its partition, the erase block and the device.

mod check;
mod parse;

pub use parse::*;
