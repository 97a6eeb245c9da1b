//! squashfs: the superblock (through `blockwise_squashfs::raw`), its version, block size,
//! compressor and table order, its size against the partition, an appended dm-verity hash
//! area.

use blockwise_geometry::{
    format_size, BlockSource, FsKind, FsPlan, OtherFs, PartitionPlan, SquashfsPlan,
};
use blockwise_squashfs::raw::{SuperblockRaw, MAGIC, NOT_SET};
use blockwise_squashfs::Compression;
use zerocopy::FromBytes;

use crate::{read_clamped, FindingCode, Severity, Verifier};

/// A superblock that does not parse.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Corrupt {
    /// Fewer than 96 bytes.
    #[error("the superblock is cut short")]
    Truncated,
    /// No `hsqs` magic (`sqsh` is a big-endian squashfs 3 or older).
    #[error("no little-endian squashfs magic")]
    Magic,
    /// A block size that is not a power of two from 4 KiB to 1 MiB, or that `block_log`
    /// contradicts.
    #[error(
        "block size {size} (log {log}) is not a power of two from 4 KiB to 1 MiB matching its log"
    )]
    BlockSize {
        /// `block_size`.
        size: u32,
        /// `block_log`.
        log: u16,
    },
    /// An unknown compressor id.
    #[error("compressor id {0} is unknown")]
    Compressor(u16),
    /// Tables out of order or past `bytes_used`.
    #[error("the {0} lies outside the filesystem or before the table preceding it")]
    Tables(&'static str),
}

/// What the superblock says.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SquashfsSuper {
    /// Major and minor version.
    pub version: (u16, u16),
    /// Compressor name.
    pub compression: &'static str,
    /// Block size.
    pub block_bytes: u32,
    /// Bytes used.
    pub bytes_used: u64,
    /// Inodes.
    pub inodes: u64,
    /// Fragments.
    pub fragments: u32,
    /// Ids.
    pub ids: u16,
    /// Flags.
    pub flags: u16,
    /// Creation time.
    pub mkfs_time: u32,
}

/// Parses a squashfs 4.0 superblock from the first bytes of a volume. Other versions parse
/// as far as their version (for the finding); their fields are not trusted.
pub fn parse_superblock(b: &[u8]) -> Result<SquashfsSuper, Corrupt> {
    let (raw, _) = SuperblockRaw::read_from_prefix(b).map_err(|_| Corrupt::Truncated)?;
    if raw.s_magic.get() != MAGIC {
        return Err(Corrupt::Magic);
    }
    let version = (raw.s_major.get(), raw.s_minor.get());
    let size = raw.block_size.get();
    let log = raw.block_log.get();
    let log_ok = 1u32.checked_shl(u32::from(log)) == Some(size);
    if version.0 == 4 && (!size.is_power_of_two() || !(4096..=1 << 20).contains(&size) || !log_ok) {
        return Err(Corrupt::BlockSize { size, log });
    }
    let id = raw.compression.get();
    let compression = Compression::name_of_id(id).ok_or(Corrupt::Compressor(id))?;
    let used = raw.bytes_used.get();
    if version.0 == 4 {
        // The tables follow one another: inodes, directories, then each optional table.
        let mut last = raw.inode_table_start.get();
        if last > used {
            return Err(Corrupt::Tables("inode table"));
        }
        for (name, at) in [
            ("directory table", raw.directory_table_start.get()),
            ("fragment table", raw.fragment_table_start.get()),
            ("export table", raw.lookup_table_start.get()),
            ("id table", raw.id_table_start.get()),
            ("xattr table", raw.xattr_id_table_start.get()),
        ] {
            if at == NOT_SET {
                continue;
            }
            if at < last || at > used {
                return Err(Corrupt::Tables(name));
            }
            last = at;
        }
    }
    Ok(SquashfsSuper {
        version,
        compression,
        block_bytes: size,
        bytes_used: used,
        inodes: u64::from(raw.inodes.get()),
        fragments: raw.fragments.get(),
        ids: raw.no_ids.get(),
        flags: raw.flags.get(),
        mkfs_time: raw.mkfs_time.get(),
    })
}

impl<S: BlockSource + ?Sized> Verifier<'_, S> {
    pub(crate) fn squashfs(&mut self, p: &mut PartitionPlan) -> Result<(), S::Error> {
        let i = p.index;
        p.content = FsKind::Squashfs;
        let raw = read_clamped(self.src, p.start_bytes, 96)?;
        let sb = match parse_superblock(&raw) {
            Ok(sb) => sb,
            Err(err) => {
                p.filesystem = Some(FsPlan::Other(OtherFs {
                    kind: "squashfs".into(),
                    aligned: None,
                    ..OtherFs::default()
                }));
                self.add(
                    Severity::Error,
                    FindingCode::SquashfsCorrupt,
                    Some(i),
                    format!(
                        "partition {i}: squashfs superblock: {err} — the kernel will not mount it"
                    ),
                );
                return Ok(());
            }
        };
        if sb.version != (4, 0) {
            let (a, b) = sb.version;
            self.add(
                Severity::Warning,
                FindingCode::SquashfsUnsupported,
                Some(i),
                format!("partition {i} (squashfs): version {a}.{b}; Linux reads only squashfs 4.0"),
            );
        } else if matches!(sb.compression, "lzma") {
            self.add(
                Severity::Warning,
                FindingCode::SquashfsUnsupported,
                Some(i),
                format!("partition {i} (squashfs): lzma compression, which the Linux kernel does not read (xz does)"),
            );
        }
        if sb.bytes_used > p.size_bytes {
            self.add(
                Severity::Error,
                FindingCode::SquashfsLargerThanPartition,
                Some(i),
                format!(
                    "partition {i} (squashfs): the filesystem uses {} but the partition holds {}: its tables are cut off",
                    format_size(sb.bytes_used),
                    format_size(p.size_bytes)
                ),
            );
        }
        let mut plan = SquashfsPlan {
            kind: "squashfs".into(),
            compression: sb.compression.into(),
            block_bytes: sb.block_bytes,
            bytes_used: Some(sb.bytes_used),
            inodes: Some(sb.inodes),
            verity: None,
            aligned: true,
        };
        plan.verity = self.appended_verity(p, sb.bytes_used)?;
        plan.aligned = plan.alignment_holds();
        let fs = FsPlan::Squashfs(plan);
        self.r
            .findings
            .extend(crate::rofs::alignment(i, &fs, self.e));
        p.filesystem = Some(fs);
        Ok(())
    }
}

#[cfg(test)]
#[expect(clippy::indexing_slicing, clippy::unwrap_used, reason = "tests")]
mod tests {
    use super::*;
    use zerocopy::IntoBytes;

    fn golden() -> Vec<u8> {
        let mut raw = SuperblockRaw::new_zeroed();
        raw.s_magic = MAGIC.into();
        raw.inodes = 3.into();
        raw.block_size = (128u32 << 10).into();
        raw.block_log = 17.into();
        raw.compression = 1.into();
        raw.s_major = 4.into();
        raw.bytes_used = 5000.into();
        raw.inode_table_start = 100.into();
        raw.directory_table_start = 200.into();
        raw.fragment_table_start = 300.into();
        raw.lookup_table_start = NOT_SET.into();
        raw.id_table_start = 400.into();
        raw.xattr_id_table_start = NOT_SET.into();
        raw.as_bytes().to_vec()
    }

    use zerocopy::FromZeros;

    #[test]
    fn parses_and_rejects_each_bad_field() {
        let b = golden();
        let sb = parse_superblock(&b).unwrap();
        assert_eq!(
            (sb.compression, sb.block_bytes, sb.inodes),
            ("gzip", 131072, 3)
        );
        assert_eq!(parse_superblock(&b[..50]), Err(Corrupt::Truncated));
        let set = |at: usize, v: &[u8]| {
            let mut x = b.clone();
            x[at..at + v.len()].copy_from_slice(v);
            parse_superblock(&x)
        };
        assert_eq!(set(0, b"sqsh"), Err(Corrupt::Magic));
        assert_eq!(
            set(0x16, &16u16.to_le_bytes()),
            Err(Corrupt::BlockSize {
                size: 131072,
                log: 16
            })
        );
        assert_eq!(set(0x14, &9u16.to_le_bytes()), Err(Corrupt::Compressor(9)));
        assert_eq!(
            set(0x48, &50u64.to_le_bytes()),
            Err(Corrupt::Tables("directory table"))
        );
        assert_eq!(
            set(0x30, &9000u64.to_le_bytes()),
            Err(Corrupt::Tables("id table"))
        );
    }
}
