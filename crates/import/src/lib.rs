//! genimage configs and wic kickstarts turned into blockwise specs.
//!
//! [`import`] reads a genimage `.cfg` ([`genimage`], over the libconfuse reader in
//! [`confuse`]) or a wic `.wks` kickstart ([`wic`]) and returns the equivalent spec as TOML:
//! every option blockwise does the same way becomes a key, every option it does differently
//! (the alignment it adds, a size it rounds up) a comment beside that key, and every option it
//! cannot express an error naming the option and its `file:line` (all of them at once, in an
//! [`ImportError`]). The positions the foreign tool would give each partition are computed
//! with its own rules (genimage's `align`, wic's `--align` in KiB and `--size` in MiB) and
//! compared with blockwise's plan of the emitted spec, so the comments say exactly what moves.
//!
//! Pure: files, sizes, directory usage and the environment come through [`Host`]; the CLI
//! implements it over the file system, a browser could over uploads.

#![deny(
    clippy::indexing_slicing,
    clippy::arithmetic_side_effects,
    clippy::as_conversions,
    clippy::unwrap_used,
    clippy::panic
)]

pub mod confuse;
mod emit;
pub mod genimage;
pub mod wic;

use core::fmt;

pub use emit::Imported;

/// What the importer needs from the world outside the config text.
pub trait Host {
    /// The text of `include("name")` in the file `from`: `(display name, text)`, or a
    /// message saying why it cannot be read.
    fn include(&self, name: &str, from: &str) -> Result<(String, String), String>;
    /// The size in bytes of a file named as the emitted spec names it (relative to the spec's
    /// directory), `None` when it does not exist.
    fn file_size(&self, path: &str) -> Option<u64>;
    /// `du -ks DIR` (`apparent = false`) or `du -bks DIR` (`apparent = true`) in KiB, as wic
    /// measures a partition's content; `None` when the directory cannot be read.
    fn dir_usage_kib(&self, path: &str, apparent: bool) -> Option<u64>;
    /// An environment variable (genimage's `${VAR}`), `None` when unset.
    fn env(&self, name: &str) -> Option<String>;
}

/// The input format.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// A genimage configuration (libconfuse).
    Genimage,
    /// A wic kickstart (`.wks`).
    Wic,
}

impl Format {
    /// The format a file name says (`.wks`, `.wks.in` → wic; `.cfg`, `.config`, `.conf` →
    /// genimage); `None` for anything else (a blockwise spec).
    #[must_use]
    pub fn from_name(name: &str) -> Option<Format> {
        let lower = name.to_ascii_lowercase();
        if lower.ends_with(".wks") || lower.ends_with(".wks.in") {
            Some(Format::Wic)
        } else if lower.ends_with(".cfg") || lower.ends_with(".config") || lower.ends_with(".conf")
        {
            Some(Format::Genimage)
        } else {
            None
        }
    }
}

/// Choices the config itself does not make.
#[derive(Clone, Debug, Default)]
pub struct Options {
    /// genimage: which disk image to import when the config defines several.
    pub image: Option<String>,
    /// genimage: where partition images are read from (`--inputpath`), as the spec will name
    /// it; default `input`.
    pub input_path: Option<String>,
    /// genimage: the root of filesystem contents (`--rootpath`); default `root`.
    pub root_path: Option<String>,
    /// wic: staged content directories by mount point (`/` = the rootfs, `/boot` …), or by
    /// `--rootfs-dir` name, as the spec will name them.
    pub contents: Vec<(String, String)>,
}

impl Options {
    /// The directory for a wic partition: its mount point, or its `--rootfs-dir` name.
    #[must_use]
    pub fn contents_for(&self, keys: &[&str]) -> Option<&str> {
        keys.iter().find_map(|k| {
            self.contents
                .iter()
                .find(|(m, _)| m == k)
                .map(|(_, d)| d.as_str())
        })
    }
}

/// One problem: where, which option, what.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Diag {
    /// `file:line` (or the file alone).
    pub at: String,
    /// The option it concerns, as the config spells it.
    pub option: Option<String>,
    /// What is wrong, in the config's words.
    pub message: String,
}

impl Diag {
    pub(crate) fn at(
        files: &confuse::Files,
        loc: confuse::Loc,
        option: Option<&str>,
        message: String,
    ) -> Diag {
        Diag {
            at: files.at(loc),
            option: option.map(blockwise_geometry::display_str),
            message,
        }
    }
}

impl fmt::Display for Diag {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.option {
            Some(o) => write!(f, "{}: {o}: {}", self.at, self.message),
            None => write!(f, "{}: {}", self.at, self.message),
        }
    }
}

/// Why a config could not be imported: every option blockwise cannot express (or the first
/// syntax error), each with its place.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub struct ImportError {
    /// The problems, in file order.
    pub diags: Vec<Diag>,
}

impl fmt::Display for ImportError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, d) in self.diags.iter().enumerate() {
            if i > 0 {
                f.write_str("\n")?;
            }
            write!(f, "{d}")?;
        }
        Ok(())
    }
}

impl From<Diag> for ImportError {
    fn from(d: Diag) -> Self {
        ImportError { diags: vec![d] }
    }
}

/// Imports `text` (the file `name`) as `format`.
pub fn import(
    format: Format,
    name: &str,
    text: &str,
    host: &dyn Host,
    options: &Options,
) -> Result<Imported, ImportError> {
    match format {
        Format::Genimage => genimage::import(name, text, host, options),
        Format::Wic => wic::import(name, text, host, options),
    }
}

/// `n` bytes as the shortest exact spec size: `"4MiB"`, `"5KiB"`, or a number of bytes.
#[must_use]
pub fn size_text(n: u64) -> String {
    const UNITS: [(u64, &str); 4] = [
        (1 << 40, "TiB"),
        (1 << 30, "GiB"),
        (1 << 20, "MiB"),
        (1 << 10, "KiB"),
    ];
    for (u, name) in UNITS {
        if n != 0 && n.checked_rem(u) == Some(0) {
            return format!("{}{name}", n.checked_div(u).unwrap_or_default());
        }
    }
    format!("{n} bytes")
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    /// Files of 5000 bytes, directories of 300 KiB, no environment, includes from a table.
    struct Fake;

    impl Host for Fake {
        fn include(&self, name: &str, _from: &str) -> Result<(String, String), String> {
            match name {
                "parts.cfg" => Ok((
                    "parts.cfg".into(),
                    "partition b {\n  image = \"b.img\"\n  partition-type = 0x83\n}\n".into(),
                )),
                _ => Err(format!("{name:?} is not there")),
            }
        }
        fn file_size(&self, _path: &str) -> Option<u64> {
            Some(5000)
        }
        fn dir_usage_kib(&self, _path: &str, _apparent: bool) -> Option<u64> {
            Some(300)
        }
        fn env(&self, _name: &str) -> Option<String> {
            None
        }
    }

    #[test]
    fn genimage_config_becomes_a_spec_that_plans_the_same_table() {
        let cfg = "# comment\nimage disk.img {\n  hdimage {\n    align = 1M // erase block\n    disk-signature = 0x12345678\n  }\n  /* first */\n  partition a {\n    image = 'a.img'\n    size = 2M\n    bootable = yes\n    partition-type = 0xc\n  }\n  include(\"parts.cfg\")\n}\n";
        let i = import(Format::Genimage, "g.cfg", cfg, &Fake, &Options::default()).unwrap();
        assert!(i.toml.contains("erase-block = \"1MiB\""), "{}", i.toml);
        assert!(i.toml.contains("disk-id = \"0x12345678\""), "{}", i.toml);
        assert!(i.toml.contains("source = \"input/a.img\""), "{}", i.toml);
        assert!(i.toml.contains("type = \"0x0c\"") && i.toml.contains("bootable = true"));
        // Aligned config: no partition moves, so no comparison comment.
        assert!(!i.toml.contains("genimage puts it at"), "{}", i.toml);
        assert_eq!(i.spec.partitions.len(), 2);
    }

    #[test]
    fn inexpressible_options_are_all_named_with_file_and_line() {
        let cfg = "image d {\n hdimage {\n  partition-table-type = hybrid\n  disk-signature = 0x1234\n  gpt-location = 64K\n }\n partition a {\n  size = 1M\n  forced-primary = true\n  holes = {\"(0; 1K)\"}\n }\n}\n";
        let e = import(Format::Genimage, "g.cfg", cfg, &Fake, &Options::default()).unwrap_err();
        let text = e.to_string();
        for want in [
            "g.cfg:5: gpt-location:",
            "g.cfg:4: disk-signature: blockwise writes disk signature 0 in a hybrid MBR",
            "g.cfg:9: forced-primary:",
            "g.cfg:10: holes:",
        ] {
            assert!(text.contains(want), "{want} not in {text}");
        }
        let e = import(
            Format::Genimage,
            "g.cfg",
            "image d { hdimage {} include(\"nope\") }",
            &Fake,
            &Options::default(),
        )
        .unwrap_err();
        assert!(
            e.to_string()
                .starts_with("g.cfg:1: include: \"nope\" is not there"),
            "{e}"
        );
        let e = import(
            Format::Genimage,
            "g.cfg",
            "image d {\n hdimage {\n",
            &Fake,
            &Options::default(),
        )
        .unwrap_err();
        assert!(e.to_string().contains("never closed"), "{e}");
    }

    #[test]
    fn wic_sizes_from_content_and_alignment() {
        let ks = "part /boot --source bootimg-partition --fstype=vfat --label boot --active --align 4096 --size 20\npart / --source rootfs --fstype=ext4 --label root --align 4096\n";
        let o = Options {
            contents: vec![
                ("/boot".into(), "boot".into()),
                ("/".into(), "rootfs".into()),
            ],
            ..Options::default()
        };
        let i = import(Format::Wic, "k.wks", ks, &Fake, &o).unwrap();
        // /boot: (300 + max(20480 - 300, 10240)) * 1.3 = 26624 KiB; /: (300 + 10240) * 1.3 = 13702 KiB.
        assert!(i.toml.contains("size = \"26MiB\""), "{}", i.toml);
        assert!(i.toml.contains("size = \"13702KiB\""), "{}", i.toml);
        assert!(i.toml.contains("erase-block = \"4MiB\""), "{}", i.toml);
        // wic's sizes are not erase-block multiples: both partitions are annotated.
        assert_eq!(i.toml.matches("wic puts it at").count(), 2, "{}", i.toml);
    }

    #[test]
    fn strings_and_comments_are_escaped() {
        assert_eq!(emit::tstr("a\"b\\c\n\u{1b}"), "\"a\\\"b\\\\c\\n\\u001B\"");
        let cfg = "image \"d\u{1b}[2J\" {\n hdimage { align = 1M }\n partition \"p\u{1b}]0;x\u{7}\" { size = 1M }\n}\n";
        let i = import(Format::Genimage, "g.cfg", cfg, &Fake, &Options::default()).unwrap();
        assert!(
            !i.toml.contains('\u{1b}') && !i.toml.contains('\u{7}'),
            "{}",
            i.toml
        );
    }
}
