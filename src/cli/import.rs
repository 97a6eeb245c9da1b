//! `blockwise import genimage.cfg | image.wks`: the equivalent spec as TOML; and the loader
//! that lets `plan` and `build` take those files directly.

use std::collections::HashSet;
use std::fs;
use std::io::Read as _;
use std::os::unix::fs::MetadataExt as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{bail, Context as _};
use blockwise_geometry::{display_path, display_str};
use blockwise_host::SpecFile;
use blockwise_import::{Format, Host, ImportError, Imported, Options};

/// Arguments of `blockwise import`.
#[derive(Debug, clap::Args)]
pub struct ImportArgs {
    /// A genimage config (.cfg, .config, .conf) or a wic kickstart (.wks).
    pub file: PathBuf,
    /// Read FILE as this format whatever its name says: genimage or wic.
    #[arg(long, value_name = "FORMAT", value_parser = parse_kind)]
    pub from: Option<Format>,
    /// genimage: the disk image to import when the config defines several.
    #[arg(long, value_name = "NAME")]
    pub image: Option<String>,
    /// genimage: the directory partition images are in (default `input`), relative to the
    /// config's directory.
    #[arg(long, value_name = "DIR")]
    pub inputpath: Option<String>,
    /// genimage: the root of filesystem contents (default `root`), relative to the config's
    /// directory.
    #[arg(long, value_name = "DIR")]
    pub rootpath: Option<String>,
    /// genimage: directories searched for include("…") files (colon-separated, repeatable),
    /// before the including file's directory.
    #[arg(long, value_name = "DIRS")]
    pub includepath: Vec<String>,
    /// wic: the staged directory of a partition filled from content, by mount point
    /// (`/=rootfs`, `/boot=bootfs`) or by --rootfs-dir name; relative to the kickstart's
    /// directory. Import measures it (du) to size the partition as wic would.
    #[arg(long = "contents", value_name = "MOUNT=DIR")]
    pub contents: Vec<String>,
    /// wic: the rootfs directory (wic's -r), the same as --contents /=DIR.
    #[arg(long, value_name = "DIR")]
    pub rootfs_dir: Option<String>,
}

fn parse_kind(s: &str) -> Result<Format, String> {
    match s {
        "genimage" => Ok(Format::Genimage),
        "wic" | "wks" => Ok(Format::Wic),
        _ => Err(format!("{:?} is not genimage or wic", display_str(s))),
    }
}

impl ImportArgs {
    fn options(&self) -> anyhow::Result<Options> {
        let mut contents = Vec::new();
        for c in &self.contents {
            let Some((m, d)) = c.split_once('=') else {
                bail!(
                    "--contents {:?}: give MOUNT=DIR, like /=rootfs",
                    display_str(c)
                );
            };
            contents.push((m.to_string(), d.to_string()));
        }
        if let Some(r) = &self.rootfs_dir {
            contents.push(("rootfs".into(), r.clone()));
        }
        Ok(Options {
            image: self.image.clone(),
            input_path: self.inputpath.clone(),
            root_path: self.rootpath.clone(),
            contents,
        })
    }
}

/// The file system behind the importer: paths relative to the config's directory.
struct FsHost {
    base: PathBuf,
    include_dirs: Vec<PathBuf>,
}

/// Include files and configs larger than this are refused.
const MAX_TEXT: u64 = 4 << 20;
/// `du` stops counting after this many entries.
const MAX_ENTRIES: usize = 10_000_000;

fn read_text(path: &Path) -> Result<String, String> {
    let f = fs::File::open(path).map_err(|e| format!("{}: {e}", display_path(path)))?;
    let mut buf = Vec::new();
    f.take(MAX_TEXT.saturating_add(1))
        .read_to_end(&mut buf)
        .map_err(|e| format!("{}: {e}", display_path(path)))?;
    if u64::try_from(buf.len()).unwrap_or(u64::MAX) > MAX_TEXT {
        return Err(format!("{}: larger than 4 MiB", display_path(path)));
    }
    String::from_utf8(buf).map_err(|_| format!("{}: not UTF-8 text", display_path(path)))
}

impl Host for FsHost {
    fn include(&self, name: &str, from: &str) -> Result<(String, String), String> {
        let from_dir = Path::new(from)
            .parent()
            .map(Path::to_path_buf)
            .unwrap_or_default();
        let candidates: Vec<PathBuf> = if Path::new(name).is_absolute() {
            vec![PathBuf::from(name)]
        } else {
            self.include_dirs
                .iter()
                .map(|d| d.join(name))
                .chain(std::iter::once(from_dir.join(name)))
                .collect()
        };
        for c in &candidates {
            if c.is_file() {
                let text = read_text(c)?;
                return Ok((display_path(c), text));
            }
        }
        Err(format!(
            "{:?} is not in {}",
            display_str(name),
            candidates
                .iter()
                .filter_map(|c| c.parent())
                .map(display_path)
                .collect::<Vec<_>>()
                .join(", ")
        ))
    }

    fn file_size(&self, path: &str) -> Option<u64> {
        let md = fs::metadata(self.base.join(path)).ok()?;
        md.is_file().then_some(md.len())
    }

    fn dir_usage_kib(&self, path: &str, apparent: bool) -> Option<u64> {
        du(&self.base.join(path), apparent)
    }

    fn env(&self, name: &str) -> Option<String> {
        std::env::var(name).ok()
    }
}

/// `du -ks DIR` (blocks) or `du -bks DIR` (apparent sizes): every entry once (hard links by
/// device and inode), symbolic links not followed, the directory itself included, the total
/// rounded up to KiB.
pub fn du(dir: &Path, apparent: bool) -> Option<u64> {
    let md = fs::symlink_metadata(dir).ok()?;
    if !md.is_dir() {
        return None;
    }
    let mut seen: HashSet<(u64, u64)> = HashSet::new();
    let mut total: u64 = 0;
    let mut stack = vec![(dir.to_path_buf(), md)];
    let mut count = 0usize;
    while let Some((p, md)) = stack.pop() {
        count = count.saturating_add(1);
        if count > MAX_ENTRIES {
            return None;
        }
        if md.nlink() > 1 && !md.is_dir() && !seen.insert((md.dev(), md.ino())) {
            continue;
        }
        total = total.saturating_add(if apparent {
            md.size()
        } else {
            md.blocks().saturating_mul(512)
        });
        if md.is_dir() {
            let rd = fs::read_dir(&p).ok()?;
            for ent in rd {
                let ent = ent.ok()?;
                let m = fs::symlink_metadata(ent.path()).ok()?;
                stack.push((ent.path(), m));
            }
        }
    }
    Some(total.div_ceil(1024))
}

fn import_file(
    path: &Path,
    from: Option<Format>,
    a: &Options,
    include: &[String],
) -> anyhow::Result<Imported> {
    let name = path.to_string_lossy();
    let Some(format) = from.or_else(|| Format::from_name(&name)) else {
        bail!(
            "{}: not a genimage config (.cfg, .config, .conf) or wic kickstart (.wks) by its name; say which with --from genimage|wic",
            display_path(path)
        );
    };
    let text = read_text(path).map_err(anyhow::Error::msg)?;
    let base = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .map_or_else(|| PathBuf::from("."), Path::to_path_buf);
    let include_dirs = include
        .iter()
        .flat_map(|s| s.split(':'))
        .filter(|s| !s.is_empty())
        .map(|s| base.join(s))
        .collect();
    let host = FsHost { base, include_dirs };
    blockwise_import::import(format, &display_path(path), &text, &host, a)
        .map_err(|e| anyhow::Error::new(ImportFailed(e)))
}

/// The import's problems, one per line.
#[derive(Debug)]
struct ImportFailed(ImportError);

impl std::fmt::Display for ImportFailed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let n = self.0.diags.len();
        if n > 1 {
            writeln!(f, "{n} options cannot be imported:")?;
        }
        write!(f, "{}", self.0)
    }
}

impl std::error::Error for ImportFailed {}

/// `blockwise import`.
pub fn run(a: &ImportArgs) -> anyhow::Result<ExitCode> {
    if !a.file.exists() {
        bail!("{}: no such file", display_path(&a.file));
    }
    match import_file(&a.file, a.from, &a.options()?, &a.includepath) {
        Ok(imported) => {
            super::emit(&imported.toml);
            Ok(ExitCode::SUCCESS)
        }
        Err(e) => match e.downcast_ref::<ImportFailed>() {
            Some(f) => {
                // One line per option, so each names its own file:line.
                for d in &f.0.diags {
                    eprintln!("blockwise: {}", display_str(&d.to_string()));
                }
                Ok(ExitCode::from(super::EXIT_USAGE))
            }
            None => Err(e),
        },
    }
}

/// A spec file for `plan` and `build`: a genimage config or wic kickstart (by its name) is
/// imported with the default options, anything else read as TOML.
pub fn load_spec(path: &Path, quiet: bool) -> anyhow::Result<SpecFile> {
    let name = path.to_string_lossy();
    if Format::from_name(&name).is_none() {
        return Ok(SpecFile::load(path)?);
    }
    let imported = import_file(path, None, &Options::default(), &[])
        .with_context(|| format!("importing {}", display_path(path)))?;
    for n in imported.notes.iter().filter(|_| !quiet) {
        eprintln!("blockwise: note: {}", display_str(n));
    }
    let base = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .map_or_else(|| PathBuf::from("."), Path::to_path_buf);
    let mut sf = SpecFile::new(imported.spec, base);
    sf.path = Some(path.to_path_buf());
    Ok(sf)
}
