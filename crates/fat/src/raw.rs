//! Raw on-disk structures (Microsoft FAT specification 1.03, "fatgen103"), as
//! little-endian zerocopy structs: every bit pattern is a valid value, so parsing is a
//! bounds check and a copy.
//!
//! ```text
//! boot sector (sector 0; copy in sector 6 on FAT32)
//! 0x00 ┌────────────────────────────┐
//!      │ BpbRaw (36 bytes)          │ jump, OEM name, common BPB
//! 0x24 ├────────────────────────────┤
//!      │ Fat32ExtRaw (54 bytes)     │ FAT32: FATSz32, root cluster, FSInfo, label …
//!      │   or Fat16ExtRaw (26 bytes)│ FAT12/16: drive, serial, label, type
//! 0x5A ├────────────────────────────┤ (0x3E on FAT12/16)
//!      │ boot code                  │
//! 0x1FE│ 55 AA                      │ even with 4096-byte sectors
//!      └────────────────────────────┘
//! ```

use zerocopy::little_endian::{U16, U32};
use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout, Unaligned};

/// The common BIOS parameter block (fatgen103 §3.1, offsets 0x00–0x23).
#[repr(C)]
#[derive(Clone, Copy, Debug, FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned)]
pub struct BpbRaw {
    /// `BS_jmpBoot`: `EB xx 90` or `E9 xx xx`.
    pub bs_jmp_boot: [u8; 3],
    /// `BS_OEMName`.
    pub bs_oem_name: [u8; 8],
    /// `BPB_BytsPerSec`: 512, 1024, 2048 or 4096.
    pub bpb_byts_per_sec: U16,
    /// `BPB_SecPerClus`: a power of two, 1–128.
    pub bpb_sec_per_clus: u8,
    /// `BPB_RsvdSecCnt`: sectors before the first FAT.
    pub bpb_rsvd_sec_cnt: U16,
    /// `BPB_NumFATs`.
    pub bpb_num_fats: u8,
    /// `BPB_RootEntCnt`: fixed root directory entries (0 on FAT32).
    pub bpb_root_ent_cnt: U16,
    /// `BPB_TotSec16`: total sectors if < 65536 (0 on FAT32).
    pub bpb_tot_sec16: U16,
    /// `BPB_Media`: 0xF8 for fixed media.
    pub bpb_media: u8,
    /// `BPB_FATSz16`: sectors per FAT on FAT12/16 (0 on FAT32).
    pub bpb_fat_sz16: U16,
    /// `BPB_SecPerTrk` (informational).
    pub bpb_sec_per_trk: U16,
    /// `BPB_NumHeads` (informational).
    pub bpb_num_heads: U16,
    /// `BPB_HiddSec`: sectors before the volume (the partition start).
    pub bpb_hidd_sec: U32,
    /// `BPB_TotSec32`: total sectors if ≥ 65536 or FAT32.
    pub bpb_tot_sec32: U32,
}
const _: () = assert!(core::mem::size_of::<BpbRaw>() == 36);

/// Offset of the boot sector signature: byte 510, whatever the sector size (fatgen103 §3.1).
pub const BOOT_SIGNATURE_OFFSET: usize = 510;
/// The boot sector signature at [`BOOT_SIGNATURE_OFFSET`].
pub const BOOT_SIGNATURE: [u8; 2] = [0x55, 0xAA];
/// `BS_BootSig` when `BS_VolID`, `BS_VolLab` and `BS_FilSysType` follow.
pub const EXT_BOOT_SIG: u8 = 0x29;
/// `BS_BootSig` of older formatters: only `BS_VolID` follows.
pub const EXT_BOOT_SIG_VOL_ID_ONLY: u8 = 0x28;

/// FAT32 extended BPB (fatgen103 §3.3, offsets 0x24–0x59).
#[repr(C)]
#[derive(Clone, Copy, Debug, FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned)]
pub struct Fat32ExtRaw {
    /// `BPB_FATSz32`: sectors per FAT.
    pub bpb_fat_sz32: U32,
    /// `BPB_ExtFlags`: 0 = mirroring to every FAT.
    pub bpb_ext_flags: U16,
    /// `BPB_FSVer`: 0.0.
    pub bpb_fs_ver: U16,
    /// `BPB_RootClus`: first cluster of the root directory (2).
    pub bpb_root_clus: U32,
    /// `BPB_FSInfo`: sector of the FSInfo structure (1).
    pub bpb_fs_info: U16,
    /// `BPB_BkBootSec`: sector of the backup boot sector (6).
    pub bpb_bk_boot_sec: U16,
    /// `BPB_Reserved`.
    pub bpb_reserved: [u8; 12],
    /// `BS_DrvNum`: 0x80.
    pub bs_drv_num: u8,
    /// `BS_Reserved1`.
    pub bs_reserved1: u8,
    /// `BS_BootSig`: 0x29 when the next three fields are valid.
    pub bs_boot_sig: u8,
    /// `BS_VolID`: volume serial number.
    pub bs_vol_id: U32,
    /// `BS_VolLab`: label, space padded.
    pub bs_vol_lab: [u8; 11],
    /// `BS_FilSysType`: `FAT32   ` (informational only).
    pub bs_fil_sys_type: [u8; 8],
}
const _: () = assert!(core::mem::size_of::<Fat32ExtRaw>() == 54);

/// FAT12/16 extended BPB (fatgen103 §3.2, offsets 0x24–0x3D).
#[repr(C)]
#[derive(Clone, Copy, Debug, FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned)]
pub struct Fat16ExtRaw {
    /// `BS_DrvNum`: 0x80.
    pub bs_drv_num: u8,
    /// `BS_Reserved1`.
    pub bs_reserved1: u8,
    /// `BS_BootSig`: 0x29.
    pub bs_boot_sig: u8,
    /// `BS_VolID`: volume serial number.
    pub bs_vol_id: U32,
    /// `BS_VolLab`: label, space padded.
    pub bs_vol_lab: [u8; 11],
    /// `BS_FilSysType`: `FAT12   ` or `FAT16   ` (informational only).
    pub bs_fil_sys_type: [u8; 8],
}
const _: () = assert!(core::mem::size_of::<Fat16ExtRaw>() == 26);

/// FAT32 FSInfo sector (fatgen103 §5); only the first 512 bytes of the sector are used.
#[repr(C)]
#[derive(Clone, Copy, Debug, FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned)]
pub struct FsInfoRaw {
    /// `FSI_LeadSig`: 0x41615252.
    pub fsi_lead_sig: U32,
    /// `FSI_Reserved1`.
    pub fsi_reserved1: [u8; 480],
    /// `FSI_StrucSig`: 0x61417272.
    pub fsi_struc_sig: U32,
    /// `FSI_Free_Count`: free clusters, 0xFFFFFFFF = unknown.
    pub fsi_free_count: U32,
    /// `FSI_Nxt_Free`: where to start looking for a free cluster, 0xFFFFFFFF = unknown.
    pub fsi_nxt_free: U32,
    /// `FSI_Reserved2`.
    pub fsi_reserved2: [u8; 12],
    /// `FSI_TrailSig`: 0xAA550000.
    pub fsi_trail_sig: U32,
}
const _: () = assert!(core::mem::size_of::<FsInfoRaw>() == 512);

/// `FSI_LeadSig`.
pub const FSI_LEAD_SIG: u32 = 0x4161_5252;
/// `FSI_StrucSig`.
pub const FSI_STRUC_SIG: u32 = 0x6141_7272;
/// `FSI_TrailSig`.
pub const FSI_TRAIL_SIG: u32 = 0xAA55_0000;
/// `FSI_Free_Count` and `FSI_Nxt_Free` when not known.
pub const FSI_UNKNOWN: u32 = 0xFFFF_FFFF;

/// A short (8.3) directory entry (fatgen103 §6).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned)]
pub struct DirEntryRaw {
    /// `DIR_Name`: 8 + 3 characters, space padded.
    pub dir_name: [u8; 11],
    /// `DIR_Attr`.
    pub dir_attr: u8,
    /// `DIR_NTRes`: case flags of Windows NT.
    pub dir_nt_res: u8,
    /// `DIR_CrtTimeTenth`: 0–199 hundredths of a second.
    pub dir_crt_time_tenth: u8,
    /// `DIR_CrtTime`.
    pub dir_crt_time: U16,
    /// `DIR_CrtDate`.
    pub dir_crt_date: U16,
    /// `DIR_LstAccDate`.
    pub dir_lst_acc_date: U16,
    /// `DIR_FstClusHI`: high 16 bits of the first cluster (FAT32).
    pub dir_fst_clus_hi: U16,
    /// `DIR_WrtTime`.
    pub dir_wrt_time: U16,
    /// `DIR_WrtDate`.
    pub dir_wrt_date: U16,
    /// `DIR_FstClusLO`: low 16 bits of the first cluster.
    pub dir_fst_clus_lo: U16,
    /// `DIR_FileSize`.
    pub dir_file_size: U32,
}
const _: () = assert!(core::mem::size_of::<DirEntryRaw>() == 32);

/// A long-name (VFAT) directory entry (fatgen103 §7).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned)]
pub struct LfnEntryRaw {
    /// `LDIR_Ord`: sequence number, 0x40 on the last (first stored) entry.
    pub ldir_ord: u8,
    /// `LDIR_Name1`: characters 1–5 (UTF-16).
    pub ldir_name1: [U16; 5],
    /// `LDIR_Attr`: 0x0F.
    pub ldir_attr: u8,
    /// `LDIR_Type`: 0.
    pub ldir_type: u8,
    /// `LDIR_Chksum`: checksum of the short name.
    pub ldir_chksum: u8,
    /// `LDIR_Name2`: characters 6–11.
    pub ldir_name2: [U16; 6],
    /// `LDIR_FstClusLO`: 0.
    pub ldir_fst_clus_lo: U16,
    /// `LDIR_Name3`: characters 12–13.
    pub ldir_name3: [U16; 2],
}
const _: () = assert!(core::mem::size_of::<LfnEntryRaw>() == 32);

/// `ATTR_READ_ONLY`.
pub const ATTR_READ_ONLY: u8 = 0x01;
/// `ATTR_HIDDEN`.
pub const ATTR_HIDDEN: u8 = 0x02;
/// `ATTR_SYSTEM`.
pub const ATTR_SYSTEM: u8 = 0x04;
/// `ATTR_VOLUME_ID`.
pub const ATTR_VOLUME_ID: u8 = 0x08;
/// `ATTR_DIRECTORY`.
pub const ATTR_DIRECTORY: u8 = 0x10;
/// `ATTR_ARCHIVE`.
pub const ATTR_ARCHIVE: u8 = 0x20;
/// `ATTR_LONG_NAME`.
pub const ATTR_LONG_NAME: u8 = ATTR_READ_ONLY | ATTR_HIDDEN | ATTR_SYSTEM | ATTR_VOLUME_ID;

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn raw_round_trips(bytes in prop::collection::vec(any::<u8>(), 512)) {
            let b = BpbRaw::read_from_prefix(&bytes).unwrap().0;
            prop_assert_eq!(b.as_bytes(), &bytes[..36]);
            let e = Fat32ExtRaw::read_from_prefix(&bytes).unwrap().0;
            prop_assert_eq!(e.as_bytes(), &bytes[..54]);
            let f = FsInfoRaw::read_from_bytes(&bytes).unwrap();
            prop_assert_eq!(f.as_bytes(), &bytes[..]);
            let d = DirEntryRaw::read_from_prefix(&bytes).unwrap().0;
            prop_assert_eq!(d.as_bytes(), &bytes[..32]);
            let l = LfnEntryRaw::read_from_prefix(&bytes).unwrap().0;
            prop_assert_eq!(l.as_bytes(), &bytes[..32]);
        }
    }

    #[test]
    fn short_buffers_are_errors_not_panics() {
        assert!(BpbRaw::read_from_prefix(&[0u8; 35][..]).is_err());
        assert!(FsInfoRaw::read_from_bytes(&[0u8; 511][..]).is_err());
    }
}
