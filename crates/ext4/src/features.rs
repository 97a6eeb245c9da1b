//! The feature set: profiles plus single-feature edits, in mke2fs spelling.

use crate::{Error, Ext4Backend, Ext4Options, Ext4Profile, Field, Invalid};

/// Features this writer can produce. Every image also has `filetype`, `extent`,
/// `large_file` and `sparse_super` unless removed where allowed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
#[allow(clippy::struct_excessive_bools)]
pub struct Features {
    /// compat 0x4: internal journal.
    pub has_journal: bool,
    /// compat 0x8: extended attributes.
    pub ext_attr: bool,
    /// compat 0x20: htree directories.
    pub dir_index: bool,
    /// incompat 0x2: file type in directory entries.
    pub filetype: bool,
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
            bit64: !compat,
            flex_bg: true,
            sparse_super: true,
            huge_file: true,
            uninit_bg: compat,
            dir_nlink: true,
            extra_isize: true,
            metadata_csum: !compat,
        };
        for edit in &opts.features {
            let edit = edit.trim();
            let (on, name) =
                if let Some(n) = edit.strip_prefix('^').or_else(|| edit.strip_prefix('-')) {
                    (false, n)
                } else {
                    (true, edit.strip_prefix('+').unwrap_or(edit))
                };
            let slot: &mut bool = match name {
                "has_journal" => &mut f.has_journal,
                "ext_attr" => &mut f.ext_attr,
                "dir_index" => &mut f.dir_index,
                "filetype" => &mut f.filetype,
                "64bit" => &mut f.bit64,
                "flex_bg" => &mut f.flex_bg,
                "sparse_super" => &mut f.sparse_super,
                "huge_file" => &mut f.huge_file,
                "dir_nlink" => &mut f.dir_nlink,
                "extra_isize" => &mut f.extra_isize,
                "metadata_csum" => &mut f.metadata_csum,
                "uninit_bg" | "gdt_csum" => &mut f.uninit_bg,
                // Always written; cannot be removed.
                "extent" | "extents" | "large_file" => {
                    if on || lenient {
                        continue;
                    }
                    return Err(Error::Unsupported {
                        feature: "removing extent or large_file (the writer always uses them)",
                    });
                }
                // Never written: removing them is a no-op, adding them is unsupported.
                "resize_inode" | "orphan_file" | "inline_data" | "bigalloc" | "quota"
                | "project" | "mmp" | "encrypt" | "casefold" | "verity" | "metadata_csum_seed"
                | "sparse_super2" | "large_dir" | "ea_inode" | "journal_dev" | "meta_bg"
                | "stable_inodes" | "fast_commit" => {
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
            };
            *slot = on;
        }
        if f.metadata_csum {
            f.uninit_bg = false;
        }
        Ok(f)
    }

    /// `s_feature_compat`.
    #[must_use]
    pub fn compat(&self) -> u32 {
        let mut v = 0;
        if self.has_journal {
            v |= 0x4;
        }
        if self.ext_attr {
            v |= 0x8;
        }
        if self.dir_index {
            v |= 0x20;
        }
        v
    }

    /// `s_feature_incompat`.
    #[must_use]
    pub fn incompat(&self) -> u32 {
        let mut v = 0x40; // extents
        if self.filetype {
            v |= 0x2;
        }
        if self.bit64 {
            v |= 0x80;
        }
        if self.flex_bg {
            v |= 0x200;
        }
        v
    }

    /// `s_feature_ro_compat`.
    #[must_use]
    pub fn ro_compat(&self) -> u32 {
        let mut v = 0x2; // large_file
        if self.sparse_super {
            v |= 0x1;
        }
        if self.huge_file {
            v |= 0x8;
        }
        if self.uninit_bg {
            v |= 0x10;
        }
        if self.dir_nlink {
            v |= 0x20;
        }
        if self.extra_isize {
            v |= 0x40;
        }
        if self.metadata_csum {
            v |= 0x400;
        }
        v
    }

    /// Names in `dumpe2fs` order.
    #[must_use]
    pub fn names(&self) -> Vec<String> {
        let mut v = Vec::new();
        let mut push = |on: bool, n: &str| {
            if on {
                v.push(n.to_string());
            }
        };
        push(self.has_journal, "has_journal");
        push(self.ext_attr, "ext_attr");
        push(self.dir_index, "dir_index");
        push(self.filetype, "filetype");
        push(true, "extent");
        push(self.bit64, "64bit");
        push(self.flex_bg, "flex_bg");
        push(self.sparse_super, "sparse_super");
        push(true, "large_file");
        push(self.huge_file, "huge_file");
        push(self.uninit_bg, "uninit_bg");
        push(self.dir_nlink, "dir_nlink");
        push(self.extra_isize, "extra_isize");
        push(self.metadata_csum, "metadata_csum");
        v
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
