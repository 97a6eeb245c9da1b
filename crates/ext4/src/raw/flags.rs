//! Flag words: the three superblock feature words with their mke2fs names, and the inode,
//! group descriptor and superblock flags.

use bitflags::bitflags;

bitflags! {
    /// `s_feature_compat`: a kernel that does not know a bit may still mount read-write.
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
    pub struct CompatFeatures: u32 {
        /// `dir_prealloc`: preallocate directory blocks.
        const DIR_PREALLOC = 0x1;
        /// `imagic_inodes`: AFS server inodes.
        const IMAGIC_INODES = 0x2;
        /// `has_journal`: an internal (inode 8) or external journal.
        const HAS_JOURNAL = 0x4;
        /// `ext_attr`: extended attributes.
        const EXT_ATTR = 0x8;
        /// `resize_inode`: reserved descriptor blocks for online growth (inode 7).
        const RESIZE_INODE = 0x10;
        /// `dir_index`: hashed-tree directories.
        const DIR_INDEX = 0x20;
        /// `sparse_super2`: exactly two superblock backups, in `s_backup_bgs`.
        const SPARSE_SUPER2 = 0x200;
        /// `fast_commit`: fast commits in the journal.
        const FAST_COMMIT = 0x400;
        /// `stable_inodes`: inode numbers never change (encryption).
        const STABLE_INODES = 0x800;
        /// `orphan_file`: an orphan file instead of the orphan list.
        const ORPHAN_FILE = 0x1000;
    }
}

bitflags! {
    /// `s_feature_incompat`: a kernel that does not know a bit must not mount.
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
    pub struct IncompatFeatures: u32 {
        /// `compression` (never implemented).
        const COMPRESSION = 0x1;
        /// `filetype`: directory entries carry the file type.
        const FILETYPE = 0x2;
        /// `needs_recovery`: the journal must be replayed.
        const RECOVER = 0x4;
        /// `journal_dev`: this is an external journal device.
        const JOURNAL_DEV = 0x8;
        /// `meta_bg`: meta block groups.
        const META_BG = 0x10;
        /// `extent`: files mapped by extent trees.
        const EXTENTS = 0x40;
        /// `64bit`: 64-bit block numbers, descriptors of `s_desc_size` bytes.
        const BIT64 = 0x80;
        /// `mmp`: multi-mount protection.
        const MMP = 0x100;
        /// `flex_bg`: group metadata may live outside its group.
        const FLEX_BG = 0x200;
        /// `ea_inode`: large attribute values in inodes.
        const EA_INODE = 0x400;
        /// `dirdata`: data in directory entries.
        const DIRDATA = 0x1000;
        /// `metadata_csum_seed`: the checksum seed is in `s_checksum_seed`.
        const CSUM_SEED = 0x2000;
        /// `large_dir`: directories over 2 GiB or with 3-level htrees.
        const LARGEDIR = 0x4000;
        /// `inline_data`: data in the inode.
        const INLINE_DATA = 0x8000;
        /// `encrypt`: encrypted inodes.
        const ENCRYPT = 0x10000;
        /// `casefold`: case-insensitive directories.
        const CASEFOLD = 0x20000;
    }
}

bitflags! {
    /// `s_feature_ro_compat`: a kernel that does not know a bit may mount read-only.
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
    pub struct RoCompatFeatures: u32 {
        /// `sparse_super`: superblock backups only in groups 0, 1 and powers of 3, 5, 7.
        const SPARSE_SUPER = 0x1;
        /// `large_file`: files of 2 GiB and more.
        const LARGE_FILE = 0x2;
        /// `huge_file`: `i_blocks` in 48 bits.
        const HUGE_FILE = 0x8;
        /// `uninit_bg` (kernel `GDT_CSUM`): crc16 descriptor checksums, uninitialised groups.
        const GDT_CSUM = 0x10;
        /// `dir_nlink`: more than 65000 subdirectories.
        const DIR_NLINK = 0x20;
        /// `extra_isize`: large inodes reserve `s_min_extra_isize` bytes.
        const EXTRA_ISIZE = 0x40;
        /// `quota`: quota inodes.
        const QUOTA = 0x100;
        /// `bigalloc`: allocation in clusters.
        const BIGALLOC = 0x200;
        /// `metadata_csum`: crc32c checksums on all metadata.
        const METADATA_CSUM = 0x400;
        /// `read-only`: mount read-only only.
        const READONLY = 0x1000;
        /// `project`: project quotas.
        const PROJECT = 0x2000;
        /// `verity`: fs-verity files.
        const VERITY = 0x8000;
        /// `orphan_present`: the orphan file has entries.
        const ORPHAN_PRESENT = 0x10000;
    }
}

/// One feature bit in one of the three superblock words.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Feature {
    /// A bit of `s_feature_compat`.
    Compat(CompatFeatures),
    /// A bit of `s_feature_incompat`.
    Incompat(IncompatFeatures),
    /// A bit of `s_feature_ro_compat`.
    RoCompat(RoCompatFeatures),
}

/// Every named feature in mke2fs / dumpe2fs spelling, in dumpe2fs order (compat, incompat,
/// ro_compat; bits ascending). The first entry for a bit is the name printed; a later
/// entry for the same bit is an alias accepted when parsing.
pub const FEATURE_NAMES: &[(Feature, &str)] = &[
    (
        Feature::Compat(CompatFeatures::DIR_PREALLOC),
        "dir_prealloc",
    ),
    (
        Feature::Compat(CompatFeatures::IMAGIC_INODES),
        "imagic_inodes",
    ),
    (Feature::Compat(CompatFeatures::HAS_JOURNAL), "has_journal"),
    (Feature::Compat(CompatFeatures::EXT_ATTR), "ext_attr"),
    (
        Feature::Compat(CompatFeatures::RESIZE_INODE),
        "resize_inode",
    ),
    (Feature::Compat(CompatFeatures::DIR_INDEX), "dir_index"),
    (
        Feature::Compat(CompatFeatures::SPARSE_SUPER2),
        "sparse_super2",
    ),
    (Feature::Compat(CompatFeatures::FAST_COMMIT), "fast_commit"),
    (
        Feature::Compat(CompatFeatures::STABLE_INODES),
        "stable_inodes",
    ),
    (Feature::Compat(CompatFeatures::ORPHAN_FILE), "orphan_file"),
    (
        Feature::Incompat(IncompatFeatures::COMPRESSION),
        "compression",
    ),
    (Feature::Incompat(IncompatFeatures::FILETYPE), "filetype"),
    (
        Feature::Incompat(IncompatFeatures::RECOVER),
        "needs_recovery",
    ),
    (
        Feature::Incompat(IncompatFeatures::JOURNAL_DEV),
        "journal_dev",
    ),
    (Feature::Incompat(IncompatFeatures::META_BG), "meta_bg"),
    (Feature::Incompat(IncompatFeatures::EXTENTS), "extent"),
    (Feature::Incompat(IncompatFeatures::EXTENTS), "extents"),
    (Feature::Incompat(IncompatFeatures::BIT64), "64bit"),
    (Feature::Incompat(IncompatFeatures::MMP), "mmp"),
    (Feature::Incompat(IncompatFeatures::FLEX_BG), "flex_bg"),
    (Feature::Incompat(IncompatFeatures::EA_INODE), "ea_inode"),
    (Feature::Incompat(IncompatFeatures::DIRDATA), "dirdata"),
    (
        Feature::Incompat(IncompatFeatures::CSUM_SEED),
        "metadata_csum_seed",
    ),
    (Feature::Incompat(IncompatFeatures::LARGEDIR), "large_dir"),
    (
        Feature::Incompat(IncompatFeatures::INLINE_DATA),
        "inline_data",
    ),
    (Feature::Incompat(IncompatFeatures::ENCRYPT), "encrypt"),
    (Feature::Incompat(IncompatFeatures::CASEFOLD), "casefold"),
    (
        Feature::RoCompat(RoCompatFeatures::SPARSE_SUPER),
        "sparse_super",
    ),
    (
        Feature::RoCompat(RoCompatFeatures::LARGE_FILE),
        "large_file",
    ),
    (Feature::RoCompat(RoCompatFeatures::HUGE_FILE), "huge_file"),
    (Feature::RoCompat(RoCompatFeatures::GDT_CSUM), "uninit_bg"),
    // The kernel's name, accepted too.
    (Feature::RoCompat(RoCompatFeatures::GDT_CSUM), "gdt_csum"),
    (Feature::RoCompat(RoCompatFeatures::DIR_NLINK), "dir_nlink"),
    (
        Feature::RoCompat(RoCompatFeatures::EXTRA_ISIZE),
        "extra_isize",
    ),
    (Feature::RoCompat(RoCompatFeatures::QUOTA), "quota"),
    (Feature::RoCompat(RoCompatFeatures::BIGALLOC), "bigalloc"),
    (
        Feature::RoCompat(RoCompatFeatures::METADATA_CSUM),
        "metadata_csum",
    ),
    (Feature::RoCompat(RoCompatFeatures::READONLY), "read-only"),
    (Feature::RoCompat(RoCompatFeatures::PROJECT), "project"),
    (Feature::RoCompat(RoCompatFeatures::VERITY), "verity"),
    (
        Feature::RoCompat(RoCompatFeatures::ORPHAN_PRESENT),
        "orphan_present",
    ),
];

impl Feature {
    /// The feature a mke2fs name (or alias) stands for.
    #[must_use]
    pub fn from_name(name: &str) -> Option<Feature> {
        FEATURE_NAMES
            .iter()
            .find(|(_, n)| *n == name)
            .map(|&(f, _)| f)
    }

    /// The name dumpe2fs prints, when the bit has one.
    #[must_use]
    pub fn name(self) -> Option<&'static str> {
        FEATURE_NAMES
            .iter()
            .find(|(f, _)| *f == self)
            .map(|&(_, n)| n)
    }
}

/// The three feature words of a superblock.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct FeatureSet {
    /// `s_feature_compat`.
    pub compat: CompatFeatures,
    /// `s_feature_incompat`.
    pub incompat: IncompatFeatures,
    /// `s_feature_ro_compat`.
    pub ro_compat: RoCompatFeatures,
}

impl Default for FeatureSet {
    fn default() -> Self {
        FeatureSet::empty()
    }
}

impl FeatureSet {
    /// No feature.
    #[must_use]
    pub const fn empty() -> FeatureSet {
        FeatureSet {
            compat: CompatFeatures::empty(),
            incompat: IncompatFeatures::empty(),
            ro_compat: RoCompatFeatures::empty(),
        }
    }

    /// `ext2`, `ext3` or `ext4`, as e2fsprogs classifies a filesystem by its features: any
    /// ext4-only feature makes it ext4, else a journal ext3, else ext2. The planner names
    /// its plans and the verifier its findings by this one rule.
    #[must_use]
    pub fn kind(&self) -> &'static str {
        let ext4_incompat = IncompatFeatures::EXTENTS
            | IncompatFeatures::BIT64
            | IncompatFeatures::FLEX_BG
            | IncompatFeatures::META_BG
            | IncompatFeatures::EA_INODE
            | IncompatFeatures::INLINE_DATA
            | IncompatFeatures::LARGEDIR;
        let ext4_ro = RoCompatFeatures::HUGE_FILE
            | RoCompatFeatures::DIR_NLINK
            | RoCompatFeatures::EXTRA_ISIZE
            | RoCompatFeatures::GDT_CSUM
            | RoCompatFeatures::METADATA_CSUM
            | RoCompatFeatures::BIGALLOC;
        if self.incompat.intersects(ext4_incompat) || self.ro_compat.intersects(ext4_ro) {
            "ext4"
        } else if self.compat.contains(CompatFeatures::HAS_JOURNAL) {
            "ext3"
        } else {
            "ext2"
        }
    }

    /// Whether every bit of `f` is set.
    #[must_use]
    pub fn contains(&self, f: Feature) -> bool {
        match f {
            Feature::Compat(b) => self.compat.contains(b),
            Feature::Incompat(b) => self.incompat.contains(b),
            Feature::RoCompat(b) => self.ro_compat.contains(b),
        }
    }

    /// Sets or clears the bits of `f`.
    pub fn set(&mut self, f: Feature, on: bool) {
        match f {
            Feature::Compat(b) => self.compat.set(b, on),
            Feature::Incompat(b) => self.incompat.set(b, on),
            Feature::RoCompat(b) => self.ro_compat.set(b, on),
        }
    }

    /// The enabled features in dumpe2fs order and spelling; a bit without a name prints as
    /// `FEATURE_C12` (`C`, `I` or `R` for the word, then the bit number), as e2fsprogs does.
    #[must_use]
    pub fn names(&self) -> Vec<String> {
        type Bit = fn(u32) -> Feature;
        let words: [(u32, char, Bit); 3] = [
            (self.compat.bits(), 'C', |m| {
                Feature::Compat(CompatFeatures::from_bits_retain(m))
            }),
            (self.incompat.bits(), 'I', |m| {
                Feature::Incompat(IncompatFeatures::from_bits_retain(m))
            }),
            (self.ro_compat.bits(), 'R', |m| {
                Feature::RoCompat(RoCompatFeatures::from_bits_retain(m))
            }),
        ];
        let mut out = Vec::new();
        for (word, letter, feature) in words {
            for bit in 0..32u32 {
                let mask = 1u32 << bit;
                if word & mask == 0 {
                    continue;
                }
                let f = feature(mask);
                match f.name() {
                    Some(n) => out.push(n.to_string()),
                    None => out.push(format!("FEATURE_{letter}{bit}")),
                }
            }
        }
        out
    }
}

bitflags! {
    /// `i_flags` (the subset with a meaning for images; others are kept as unnamed bits).
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
    pub struct InodeFlags: u32 {
        /// `EXT4_IMMUTABLE_FL`.
        const IMMUTABLE = 0x10;
        /// `EXT4_APPEND_FL`.
        const APPEND = 0x20;
        /// `EXT4_NODUMP_FL`.
        const NODUMP = 0x40;
        /// `EXT4_NOATIME_FL`.
        const NOATIME = 0x80;
        /// `EXT4_INDEX_FL`: the directory is an htree.
        const INDEX = 0x1000;
        /// `EXT4_HUGE_FILE_FL`: `i_blocks` counts filesystem blocks, not sectors.
        const HUGE_FILE = 0x4_0000;
        /// `EXT4_EXTENTS_FL`: `i_block` holds an extent tree.
        const EXTENTS = 0x8_0000;
        /// `EXT4_EA_INODE_FL`: the inode holds a large attribute value.
        const EA_INODE = 0x20_0000;
        /// `EXT4_INLINE_DATA_FL`: data lives in the inode.
        const INLINE_DATA = 0x1000_0000;
    }
}

bitflags! {
    /// `bg_flags` of a group descriptor.
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
    pub struct GroupFlags: u16 {
        /// `EXT4_BG_INODE_UNINIT`: inode table and bitmap not initialised.
        const INODE_UNINIT = 0x1;
        /// `EXT4_BG_BLOCK_UNINIT`: block bitmap not initialised.
        const BLOCK_UNINIT = 0x2;
        /// `EXT4_BG_INODE_ZEROED`: the inode table is zeroed.
        const ITABLE_ZEROED = 0x4;
    }
}

bitflags! {
    /// `s_flags`.
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
    pub struct SuperFlags: u32 {
        /// `EXT2_FLAGS_SIGNED_HASH`: directory hashes treat names as signed chars (x86).
        const SIGNED_HASH = 0x1;
        /// `EXT2_FLAGS_UNSIGNED_HASH`: directory hashes treat names as unsigned chars.
        const UNSIGNED_HASH = 0x2;
        /// `EXT2_FLAGS_TEST_FILESYS`: a development filesystem.
        const TEST_FILESYS = 0x4;
    }
}

bitflags! {
    /// `s_default_mount_opts` (the flag bits; the journal mode field 0x60 is kept unnamed).
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
    pub struct DefaultMountOpts: u32 {
        /// `EXT4_DEFM_DEBUG`.
        const DEBUG = 0x1;
        /// `EXT4_DEFM_BSDGROUPS`.
        const BSDGROUPS = 0x2;
        /// `EXT4_DEFM_XATTR_USER`: `user_xattr`.
        const XATTR_USER = 0x4;
        /// `EXT4_DEFM_ACL`: `acl`.
        const ACL = 0x8;
        /// `EXT4_DEFM_UID16`.
        const UID16 = 0x10;
        /// `EXT4_DEFM_NOBARRIER`.
        const NOBARRIER = 0x100;
        /// `EXT4_DEFM_BLOCK_VALIDITY`.
        const BLOCK_VALIDITY = 0x200;
        /// `EXT4_DEFM_DISCARD`.
        const DISCARD = 0x400;
        /// `EXT4_DEFM_NODELALLOC`.
        const NODELALLOC = 0x800;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_aliases() {
        for &(f, n) in FEATURE_NAMES {
            let parsed = Feature::from_name(n).unwrap();
            assert_eq!(parsed, f, "{n}");
            // The printed name parses back to the same bit.
            assert_eq!(Feature::from_name(f.name().unwrap()), Some(f));
        }
        assert_eq!(
            Feature::from_name("extents"),
            Some(Feature::Incompat(IncompatFeatures::EXTENTS))
        );
        assert_eq!(
            Feature::Incompat(IncompatFeatures::EXTENTS).name(),
            Some("extent")
        );
        assert_eq!(Feature::from_name("bogus"), None);
    }

    #[test]
    fn table_is_in_dumpe2fs_order_and_names_every_flag() {
        let key = |f: Feature| match f {
            Feature::Compat(b) => (0, b.bits()),
            Feature::Incompat(b) => (1, b.bits()),
            Feature::RoCompat(b) => (2, b.bits()),
        };
        assert!(FEATURE_NAMES.windows(2).all(|w| key(w[0].0) <= key(w[1].0)));
        for f in CompatFeatures::all().iter() {
            assert!(Feature::Compat(f).name().is_some());
        }
        for f in IncompatFeatures::all().iter() {
            assert!(Feature::Incompat(f).name().is_some());
        }
        for f in RoCompatFeatures::all().iter() {
            assert!(Feature::RoCompat(f).name().is_some());
        }
    }

    #[test]
    fn set_names_with_unknown_bits() {
        let mut s = FeatureSet::empty();
        s.set(Feature::Compat(CompatFeatures::HAS_JOURNAL), true);
        s.incompat = IncompatFeatures::from_bits_retain(0x40 | 0x80_0000);
        s.ro_compat = RoCompatFeatures::METADATA_CSUM;
        assert_eq!(
            s.names(),
            ["has_journal", "extent", "FEATURE_I23", "metadata_csum"]
        );
        assert!(s.contains(Feature::Incompat(IncompatFeatures::EXTENTS)));
    }
}
