//! The feature set: profiles plus single-feature edits, in mke2fs spelling.

use crate::raw::{
    CompatFeatures as C, Feature, FeatureSet, IncompatFeatures as I, RoCompatFeatures as R,
};
use crate::{Error, Ext4Backend, Ext4Options, Ext4Profile, ExtKind, Field, Invalid};

/// Picks one switch out of [`Features`].
type Slot = fn(&mut Features) -> &mut bool;

/// Each switch of [`Features`] and the feature bit it controls (names come from
/// [`FEATURE_NAMES`](crate::raw::FEATURE_NAMES)).
const SWITCHES: [(Feature, Slot); 13] = [
    (Feature::Compat(C::HAS_JOURNAL), |f| &mut f.has_journal),
    (Feature::Compat(C::EXT_ATTR), |f| &mut f.ext_attr),
    (Feature::Compat(C::DIR_INDEX), |f| &mut f.dir_index),
    (Feature::Incompat(I::FILETYPE), |f| &mut f.filetype),
    (Feature::Incompat(I::EXTENTS), |f| &mut f.extents),
    (Feature::Incompat(I::BIT64), |f| &mut f.bit64),
    (Feature::Incompat(I::FLEX_BG), |f| &mut f.flex_bg),
    (Feature::RoCompat(R::SPARSE_SUPER), |f| &mut f.sparse_super),
    (Feature::RoCompat(R::HUGE_FILE), |f| &mut f.huge_file),
    (Feature::RoCompat(R::GDT_CSUM), |f| &mut f.uninit_bg),
    (Feature::RoCompat(R::DIR_NLINK), |f| &mut f.dir_nlink),
    (Feature::RoCompat(R::EXTRA_ISIZE), |f| &mut f.extra_isize),
    (Feature::RoCompat(R::METADATA_CSUM), |f| {
        &mut f.metadata_csum
    }),
];

/// Always written; cannot be removed.
const ALWAYS: FeatureSet = FeatureSet {
    compat: C::empty(),
    incompat: I::empty(),
    ro_compat: R::LARGE_FILE,
};

/// Never written: removing them is a no-op, adding them is unsupported.
const NEVER_WRITTEN: FeatureSet = FeatureSet {
    compat: C::RESIZE_INODE
        .union(C::SPARSE_SUPER2)
        .union(C::FAST_COMMIT)
        .union(C::STABLE_INODES)
        .union(C::ORPHAN_FILE),
    incompat: I::JOURNAL_DEV
        .union(I::META_BG)
        .union(I::MMP)
        .union(I::EA_INODE)
        .union(I::CSUM_SEED)
        .union(I::LARGEDIR)
        .union(I::INLINE_DATA)
        .union(I::ENCRYPT)
        .union(I::CASEFOLD),
    ro_compat: R::QUOTA
        .union(R::BIGALLOC)
        .union(R::PROJECT)
        .union(R::VERITY),
};

/// Features this writer can produce. Every image also has `large_file`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct Features {
    /// compat 0x4: internal journal.
    pub has_journal: bool,
    /// compat 0x8: extended attributes.
    pub ext_attr: bool,
    /// compat 0x20: htree directories.
    pub dir_index: bool,
    /// incompat 0x2: file type in directory entries.
    pub filetype: bool,
    /// incompat 0x40: files mapped by extents (else by ext2's direct and indirect blocks).
    pub extents: bool,
    /// incompat 0x80: 64-bit block numbers, 64-byte group descriptors.
    pub bit64: bool,
    /// incompat 0x200: flexible block groups.
    pub flex_bg: bool,
    /// ro_compat 0x1: superblock backups only in groups 0, 1 and powers of 3, 5, 7.
    pub sparse_super: bool,
    /// ro_compat 0x8: i_blocks in 48 bits.
    pub huge_file: bool,
    /// ro_compat 0x10 (`uninit_bg`, a.k.a. gdt_csum): crc16 descriptor checksums, so
    /// unused inode-table tails need not be written (off when metadata_csum is on).
    pub uninit_bg: bool,
    /// ro_compat 0x20: more than 65000 subdirectories.
    pub dir_nlink: bool,
    /// ro_compat 0x40: large inodes carry extra fields.
    pub extra_isize: bool,
    /// ro_compat 0x400: crc32c metadata checksums.
    pub metadata_csum: bool,
}

impl Features {
    /// The profile's features, then the edits applied in order.
    pub fn resolve(opts: &Ext4Options) -> Result<Features, Error> {
        let compat = opts.profile == Ext4Profile::Compat;
        // The mke2fs backend passes every edit on to mke2fs: only plan what we know.
        let lenient = opts.backend == Ext4Backend::Mke2fs;
        let mut f = Features {
            has_journal: opts.journal,
            ext_attr: true,
            dir_index: true,
            filetype: true,
            extents: true,
            bit64: !compat,
            flex_bg: true,
            sparse_super: true,
            huge_file: true,
            uninit_bg: compat,
            dir_nlink: true,
            extra_isize: true,
            metadata_csum: !compat,
        };
        if opts.kind != ExtKind::Ext4 {
            // mke2fs.conf's base_features (resize_inode aside, which this writer never
            // makes), and for ext3 its journal.
            if opts.kind == ExtKind::Ext3 && !opts.journal {
                return Err(Error::Invalid(Invalid::new(
                    Field::Journal,
                    "fs = \"ext3\" is ext2 with a journal: use fs = \"ext2\" for none",
                )));
            }
            f = Features {
                has_journal: opts.kind == ExtKind::Ext3,
                ext_attr: true,
                dir_index: true,
                filetype: true,
                sparse_super: true,
                ..Features::default()
            };
        }
        for edit in &opts.features {
            let edit = edit.trim();
            let (on, name) =
                if let Some(n) = edit.strip_prefix('^').or_else(|| edit.strip_prefix('-')) {
                    (false, n)
                } else {
                    (true, edit.strip_prefix('+').unwrap_or(edit))
                };
            let known = Feature::from_name(name);
            if let Some(&(_, slot)) = known.and_then(|k| SWITCHES.iter().find(|(b, _)| *b == k)) {
                *slot(&mut f) = on;
                continue;
            }
            match known {
                Some(k) if ALWAYS.contains(k) => {
                    if on || lenient {
                        continue;
                    }
                    return Err(Error::Unsupported {
                        feature: "removing large_file (the writer always sets it)",
                    });
                }
                Some(k) if NEVER_WRITTEN.contains(k) => {
                    if !on || lenient {
                        continue;
                    }
                    return Err(Error::UnsupportedFeature {
                        name: name.to_string(),
                    });
                }
                _ if lenient => continue,
                _ => {
                    return Err(Error::Invalid(Invalid::new(
                        Field::Features,
                        format!("unknown ext4 feature {name:?} (mke2fs spelling, e.g. \"^metadata_csum\", \"+64bit\")"),
                    )))
                }
            }
        }
        if f.metadata_csum {
            f.uninit_bg = false;
        }
        if f.bit64 && !f.extents && !lenient {
            return Err(Error::Invalid(Invalid::new(
                Field::Features,
                "64bit needs extent (as mke2fs says): remove \"^extent\" or add \"^64bit\"",
            )));
        }
        Ok(f)
    }

    /// The three superblock feature words.
    pub(crate) fn flags(&self) -> FeatureSet {
        let mut set = ALWAYS;
        let mut me = *self;
        for (bit, slot) in SWITCHES {
            set.set(bit, *slot(&mut me));
        }
        set
    }

    /// `s_feature_compat`.
    #[must_use]
    pub fn compat(&self) -> u32 {
        self.flags().compat.bits()
    }

    /// `s_feature_incompat`.
    #[must_use]
    pub fn incompat(&self) -> u32 {
        self.flags().incompat.bits()
    }

    /// `s_feature_ro_compat`.
    #[must_use]
    pub fn ro_compat(&self) -> u32 {
        self.flags().ro_compat.bits()
    }

    /// Names in `dumpe2fs` order.
    #[must_use]
    pub fn names(&self) -> Vec<String> {
        self.flags().names()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(profile: Ext4Profile, edits: &[&str], expect: &[&str]) {
        let opts = Ext4Options {
            profile,
            features: edits.iter().map(|s| (*s).to_string()).collect(),
            ..Ext4Options::default()
        };
        assert_eq!(Features::resolve(&opts).unwrap().names(), expect);
    }

    #[test]
    fn profiles_and_edits() {
        let all = [
            "has_journal",
            "ext_attr",
            "dir_index",
            "filetype",
            "extent",
            "64bit",
            "flex_bg",
            "sparse_super",
            "large_file",
            "huge_file",
            "dir_nlink",
            "extra_isize",
            "metadata_csum",
        ];
        check(Ext4Profile::Default, &[], &all);
        let mut compat: Vec<&str> = all
            .iter()
            .copied()
            .filter(|n| *n != "64bit" && *n != "metadata_csum")
            .collect();
        compat.insert(9, "uninit_bg");
        check(Ext4Profile::Compat, &[], &compat);
        let no_csum: Vec<&str> = all
            .iter()
            .copied()
            .filter(|n| *n != "metadata_csum")
            .collect();
        check(
            Ext4Profile::Default,
            &["^metadata_csum", "^resize_inode"],
            &no_csum,
        );
        let mut c64 = compat.clone();
        c64.insert(5, "64bit");
        check(Ext4Profile::Compat, &["+64bit"], &c64);
        let opts = Ext4Options {
            features: vec!["+inline_data".into()],
            ..Ext4Options::default()
        };
        assert!(matches!(
            Features::resolve(&opts),
            Err(Error::UnsupportedFeature { .. })
        ));
        let opts = Ext4Options {
            features: vec!["bogus".into()],
            ..Ext4Options::default()
        };
        assert!(matches!(Features::resolve(&opts), Err(Error::Invalid(_))));
    }
}
