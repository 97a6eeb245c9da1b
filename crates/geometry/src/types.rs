//! Partition type codes: MBR type bytes, GPT type GUIDs and the aliases the spec accepts.

use core::fmt;

use serde::{Serialize, Serializer};

use crate::fsplan::FatType;
use crate::guid::Guid;
use crate::layout::{FsKind, TableKind};

/// A resolved partition type.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum PartType {
    /// MBR system ID byte.
    Mbr(u8),
    /// GPT partition type GUID.
    Gpt(Guid),
}

impl fmt::Display for PartType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PartType::Mbr(b) => write!(f, "0x{b:02x}"),
            PartType::Gpt(g) => write!(f, "{g}"),
        }
    }
}

impl Serialize for PartType {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

/// Well-known GPT type GUIDs (textual form).
pub mod gpt_types {
    /// EFI System Partition.
    pub const ESP: &str = "C12A7328-F81F-11D2-BA4B-00A0C93EC93B";
    /// Microsoft basic data (FAT, exFAT, NTFS).
    pub const BASIC_DATA: &str = "EBD0A0A2-B9E5-4433-87C0-68B6B72699C7";
    /// Linux filesystem data.
    pub const LINUX: &str = "0FC63DAF-8483-4772-8E79-3D69D8477DE4";
    /// Linux swap.
    pub const SWAP: &str = "0657FD6D-A4AB-43C4-84E5-0933C84B4F4F";
    /// Linux /home.
    pub const HOME: &str = "933AC7E1-2EB4-4F13-B844-0E14E2AEF915";
    /// Linux root (x86-64).
    pub const ROOT_X86_64: &str = "4F68BCE3-E8CD-4DB1-96E7-FBCAF984B709";
    /// Linux root (AArch64).
    pub const ROOT_ARM64: &str = "B921B045-1DF0-41C3-AF44-4C6F280D3FAE";
    /// Linux root (32-bit ARM).
    pub const ROOT_ARM: &str = "69DAD710-2CE4-4E3C-B16C-21A1D49ABED3";
    /// Linux LVM.
    pub const LVM: &str = "E6D6D379-F507-44C2-A23C-238F2A3DF928";
    /// Linux RAID.
    pub const RAID: &str = "A19D880F-05FC-4D3B-A006-743F0F84911E";
    /// BIOS boot partition (GRUB).
    pub const BIOS_BOOT: &str = "21686148-6449-6E6F-744E-656564454649";
    /// Extended boot loader partition.
    pub const XBOOTLDR: &str = "BC13C2FF-59E6-4262-A352-B275FD6F7172";
    /// dm-verity hash partition of an x86-64 root (Discoverable Partitions Specification).
    pub const ROOT_X86_64_VERITY: &str = "2C7357ED-EBD2-46D9-AEC1-23D437EC2BF5";
    /// dm-verity hash partition of an arm64 root (Discoverable Partitions Specification).
    pub const ROOT_ARM64_VERITY: &str = "DF3300CE-D69F-4C92-978C-9BFB0F38D820";
}

const GPT_ALIASES: &[(&[&str], &str)] = &[
    (&["esp", "efi", "uefi", "ef00"], gpt_types::ESP),
    (
        &[
            "fat", "fat12", "fat16", "fat32", "vfat", "msdata", "basic", "ntfs", "exfat", "0700",
        ],
        gpt_types::BASIC_DATA,
    ),
    (&["linux", "ext4", "8300"], gpt_types::LINUX),
    (&["swap", "8200"], gpt_types::SWAP),
    (&["home", "8302"], gpt_types::HOME),
    (
        &["root-x86-64", "root-x86_64", "root-amd64", "8304"],
        gpt_types::ROOT_X86_64,
    ),
    (
        &["root-arm64", "root-aarch64", "8305"],
        gpt_types::ROOT_ARM64,
    ),
    (&["root-arm", "8307"], gpt_types::ROOT_ARM),
    (
        &["root-x86-64-verity", "root-amd64-verity", "830c"],
        gpt_types::ROOT_X86_64_VERITY,
    ),
    (
        &["root-arm64-verity", "root-aarch64-verity", "830e"],
        gpt_types::ROOT_ARM64_VERITY,
    ),
    (&["lvm", "8e00"], gpt_types::LVM),
    (&["raid", "fd00"], gpt_types::RAID),
    (&["bios", "bios-boot", "ef02"], gpt_types::BIOS_BOOT),
    (&["xbootldr", "ea00"], gpt_types::XBOOTLDR),
];

const MBR_ALIASES: &[(&[&str], u8)] = &[
    (&["fat12"], FatType::Fat12.mbr_type()),
    (&["fat16"], FatType::Fat16.mbr_type()),
    (
        &["fat", "fat32", "vfat", "msdata", "basic"],
        FatType::Fat32.mbr_type(),
    ),
    (&["linux", "ext4"], 0x83),
    (&["swap"], 0x82),
    (&["esp", "efi", "uefi"], 0xef),
    (&["lvm"], 0x8e),
    (&["raid"], 0xfd),
    (&["ntfs", "exfat"], 0x07),
];

/// Looks up a GPT alias or parses a GUID.
#[must_use]
pub fn gpt_type(text: &str) -> Option<Guid> {
    let t = text.trim().to_ascii_lowercase();
    GPT_ALIASES
        .iter()
        .find(|(names, _)| names.contains(&t.as_str()))
        .and_then(|(_, g)| g.parse().ok())
        .or_else(|| text.parse().ok())
}

/// A human name for a well-known GPT type GUID.
#[must_use]
pub fn gpt_type_name(g: Guid) -> Option<&'static str> {
    GPT_ALIASES
        .iter()
        .find(|(_, s)| s.parse::<Guid>().ok() == Some(g))
        .and_then(|(names, _)| names.first().copied())
}

/// Resolves the spec's `type` (or the default for `fs`) for `table`. `Err` carries the reason.
pub fn resolve(table: TableKind, fs: FsKind, text: Option<&str>) -> Result<PartType, String> {
    match table {
        TableKind::Gpt => match text {
            None => Ok(PartType::Gpt(
                gpt_type(match fs {
                    FsKind::Fat(_) | FsKind::Exfat => "fat",
                    FsKind::Swap => "swap",
                    _ => "linux",
                })
                .unwrap_or(Guid::ZERO),
            )),
            Some(t) => match gpt_type(t) {
                Some(g) if g == Guid::ZERO => Err("the all-zero GUID marks an unused entry".into()),
                Some(g) => Ok(PartType::Gpt(g)),
                None => Err(format!(
                    "{t:?} is neither a GUID nor a known alias (esp, fat, linux, swap, home, root-x86-64, root-arm64, root-x86-64-verity, root-arm64-verity, lvm, raid, bios, xbootldr)"
                )),
            },
        },
        TableKind::Mbr | TableKind::None => {
            let t = match text {
                None => {
                    return Ok(PartType::Mbr(match fs {
                        // `fs = "fat"` starts as FAT32; the image builder corrects the
                        // byte once the FAT planner has chosen the type.
                        FsKind::Fat(t) => t.unwrap_or(FatType::Fat32).mbr_type(),
                        FsKind::Swap => 0x82,
                        FsKind::Exfat => 0x07,
                        _ => 0x83,
                    }))
                }
                Some(t) => t,
            };
            let lower = t.trim().to_ascii_lowercase();
            let byte = MBR_ALIASES
                .iter()
                .find(|(names, _)| names.contains(&lower.as_str()))
                .map(|(_, b)| *b)
                .or_else(|| u8::from_str_radix(lower.trim_start_matches("0x"), 16).ok())
                .ok_or_else(|| {
                    format!("{t:?} is neither an MBR type byte like \"0x0c\" nor a known alias (fat32, fat16, fat12, linux, swap, esp, lvm, raid, ntfs)")
                })?;
            match byte {
                0x00 => Err("type 0x00 marks an unused MBR entry".into()),
                0x05 | 0x0f | 0x85 => Err(format!(
                    "type 0x{byte:02x} is an extended partition; blockwise creates it itself when there are more than four partitions"
                )),
                0xee => Err("type 0xee is the GPT protective entry; use table = \"gpt\"".into()),
                b => Ok(PartType::Mbr(b)),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn aliases() {
        assert_eq!(
            resolve(TableKind::Mbr, FsKind::Fat(Some(FatType::Fat32)), None),
            Ok(PartType::Mbr(0x0c))
        );
        assert_eq!(
            resolve(TableKind::Mbr, FsKind::None, Some("0x0C")),
            Ok(PartType::Mbr(0x0c))
        );
        assert_eq!(
            resolve(TableKind::Mbr, FsKind::None, Some("83")),
            Ok(PartType::Mbr(0x83))
        );
        assert!(resolve(TableKind::Mbr, FsKind::None, Some("0x05")).is_err());
        assert!(resolve(TableKind::Mbr, FsKind::None, Some("bogus")).is_err());
        let esp = resolve(
            TableKind::Gpt,
            FsKind::Fat(Some(FatType::Fat32)),
            Some("esp"),
        )
        .unwrap();
        assert_eq!(esp.to_string(), gpt_types::ESP);
        assert_eq!(
            resolve(TableKind::Gpt, FsKind::Ext4, None)
                .unwrap()
                .to_string(),
            gpt_types::LINUX
        );
        assert_eq!(gpt_type_name(gpt_type("swap").unwrap()), Some("swap"));
    }
}
