//! Spec files: a [`Spec`] read from disk, with the directory its relative paths are
//! resolved against, and the build time from the spec or the environment.

use std::fs;
use std::path::{Path, PathBuf};

use blockwise_image::{Spec, SpecError};

use crate::Error;

/// The largest file [`is_spec_file`] reads: a spec is a page of text, an image is not.
const MAX_SPEC_BYTES: u64 = 1 << 20;

/// Whether `path` holds a spec rather than an image, by its name and its bytes: a name
/// ending in `.toml` (any case), or a file of at most 1 MiB of UTF-8 text (no NUL byte) that
/// parses as a TOML table with at least one key. No disk image is such text (its first
/// sector alone has NUL bytes), so a spec named `sd.conf` or `SD.TOML` is built, never written
/// to a target as raw bytes; a spec with a mistake in it is still a spec (its parse error
/// names the key). Errors are the OS's, reading `path`.
pub fn is_spec_file(path: &Path) -> std::io::Result<bool> {
    use std::io::Read as _;
    let named = path
        .extension()
        .and_then(|e| e.to_str())
        .is_some_and(|e| e.eq_ignore_ascii_case("toml"));
    if named {
        return Ok(true);
    }
    // stat before open: opening a FIFO would take (and, closed, break) the stream the image
    // is read from, and a device needs no look.
    if !fs::metadata(path)?.is_file() {
        return Ok(false);
    }
    let f = fs::File::open(path)?;
    let md = f.metadata()?;
    if !md.is_file() || md.len() == 0 || md.len() > MAX_SPEC_BYTES {
        return Ok(false);
    }
    let mut bytes = Vec::new();
    f.take(MAX_SPEC_BYTES).read_to_end(&mut bytes)?;
    if bytes.contains(&0) {
        return Ok(false);
    }
    let Ok(text) = std::str::from_utf8(&bytes) else {
        return Ok(false);
    };
    Ok(text.parse::<toml::Table>().is_ok_and(|t| !t.is_empty()))
}

/// A spec read from a file, with the directory its relative paths are resolved against.
#[derive(Clone, Debug)]
pub struct SpecFile {
    /// The parsed spec.
    pub spec: Spec,
    /// Directory of the spec file.
    pub base_dir: PathBuf,
    /// The files the build writes (image, `.bmap`), when known: a `contents` tree that holds
    /// them leaves them (and their temp files) out, with a warning; the mke2fs backend, which
    /// cannot leave anything out, refuses such a tree. Empty from [`SpecFile::load`] and
    /// [`SpecFile::new`]; set it before building.
    pub outputs: Vec<PathBuf>,
    /// The spec file itself, when the spec came from one ([`SpecFile::load`] and
    /// [`SpecFile::load_for_device`] set it): an input of the build, so no output may be it.
    pub path: Option<PathBuf>,
}

impl SpecFile {
    /// Reads and validates a TOML spec file. `erase-block = "auto"` (or `sector-size =
    /// "auto"`) is an error here naming the key: it needs a device, see
    /// [`SpecFile::load_for_device`].
    pub fn load(path: &Path) -> Result<Self, Error> {
        Self::load_with_auto_hint(path, "give the device (--device /dev/sdX)")
    }

    /// [`SpecFile::load`], saying `how` to give the device when a key is `"auto"` (see
    /// [`explain_auto`]): the Python bindings name their own call.
    pub fn load_with_auto_hint(path: &Path, how: &str) -> Result<Self, Error> {
        let text = fs::read_to_string(path).map_err(|e| Error::io(path, e))?;
        // A syntax error has no key: name the file instead (`spec.toml: TOML parse error …`).
        let spec = Spec::from_toml(&text).map_err(|mut e| {
            if e.key == "(toml)" {
                e.key = path.display().to_string();
            } else {
                explain_auto_toml(&mut e, how, &text);
            }
            e
        })?;
        let mut sf = SpecFile::new(spec, base_dir_of(path));
        sf.path = Some(path.to_path_buf());
        Ok(sf)
    }

    /// Reads a TOML spec file for `device`: `image.erase-block` and `image.sector-size` that
    /// are `"auto"` or left out take the device's values, and so does a left-out
    /// `image.size` when `device` gives one; values the spec gives stay. Returns the spec
    /// and, per key, whether the device's value was taken.
    pub fn load_for_device(path: &Path, device: &DeviceValues) -> Result<(Self, Taken), Error> {
        let text = fs::read_to_string(path).map_err(|e| Error::io(path, e))?;
        let Ok(table) = text.parse::<toml::Table>() else {
            // Not TOML: the usual error, naming the file.
            return Self::load(path).map(|s| (s, Taken::default()));
        };
        let (mut sf, taken) = Self::from_table_for_device(table, device, base_dir_of(path))?;
        sf.path = Some(path.to_path_buf());
        Ok((sf, taken))
    }

    /// A spec given as a TOML table (a parsed spec file, or a spec dict of the Python
    /// package converted to TOML) planned for `device`: [`take_device_values`], then parsed
    /// and validated as a file is, with relative paths resolved against `base_dir`.
    pub fn from_table_for_device(
        mut table: toml::Table,
        device: &DeviceValues,
        base_dir: PathBuf,
    ) -> Result<(Self, Taken), Error> {
        let taken = take_device_values(&mut table, device)?;
        let spec = Spec::from_deserializer(toml::Value::Table(table), |e| e.message().to_string())?;
        Ok((SpecFile::new(spec, base_dir), taken))
    }

    /// A spec built in code, with relative paths resolved against `base_dir`.
    #[must_use]
    pub fn new(spec: Spec, base_dir: PathBuf) -> Self {
        SpecFile {
            spec,
            base_dir,
            outputs: Vec::new(),
            path: None,
        }
    }

    /// A path of the spec, relative to the spec file's directory.
    #[must_use]
    pub fn resolve(&self, rel: &str) -> PathBuf {
        self.base_dir.join(rel)
    }
}

/// The directory a spec file's relative paths are resolved against.
fn base_dir_of(path: &Path) -> PathBuf {
    let base_dir = path
        .parent()
        .map_or_else(|| PathBuf::from("."), Path::to_path_buf);
    if base_dir.as_os_str().is_empty() {
        PathBuf::from(".")
    } else {
        base_dir
    }
}

/// Takes `device`'s values into the `[image]` table of a spec's TOML `table` (added when the
/// spec has none): `erase-block` and `sector-size` that are `"auto"` (any case) or left out
/// become the device's, and so does a left-out `size` when `device` gives one; values the
/// spec gives stay. Returns, per key, whether the device's value was taken. An `image` that
/// is not a table is left for the spec's parser to reject.
///
/// The step [`SpecFile::load_for_device`] and [`SpecFile::from_table_for_device`] share, so
/// the CLI's `write SPEC DEVICE` and the Python package's `write(spec, device)` plan alike.
///
/// ```
/// use blockwise_host::{take_device_values, DeviceValues};
/// let mut table: toml::Table = "[image]\nerase-block = \"auto\"\n".parse().unwrap();
/// let device = DeviceValues { erase_block_bytes: 8 << 20, sector_bytes: Some(512), size_bytes: None };
/// let taken = take_device_values(&mut table, &device).unwrap();
/// assert!(taken.erase_block && taken.sector_size && !taken.size);
/// assert_eq!(table["image"]["erase-block"].as_integer(), Some(8 << 20));
/// ```
pub fn take_device_values(
    table: &mut toml::Table,
    device: &DeviceValues,
) -> Result<Taken, SpecError> {
    let image = table
        .entry("image")
        .or_insert_with(|| toml::Value::Table(toml::Table::new()));
    let mut taken = Taken::default();
    let toml::Value::Table(image) = image else {
        return Ok(taken);
    };
    let is_auto = |v: Option<&toml::Value>| match v {
        None => true,
        Some(toml::Value::String(s)) => s.eq_ignore_ascii_case("auto"),
        Some(_) => false,
    };
    if is_auto(image.get("erase-block")) {
        let v = i64::try_from(device.erase_block_bytes).map_err(|_| {
            SpecError::new("image.erase-block", "the device's erase block is too large")
        })?;
        image.insert("erase-block".into(), toml::Value::Integer(v));
        taken.erase_block = true;
    }
    if let (Some(size), false) = (device.size_bytes, image.contains_key("size")) {
        let v = i64::try_from(size)
            .map_err(|_| SpecError::new("image.size", "the device is larger than 8 EiB"))?;
        image.insert("size".into(), toml::Value::Integer(v));
        taken.size = true;
    }
    if is_auto(image.get("sector-size")) {
        match device.sector_bytes {
            Some(b) => {
                image.insert(
                    "sector-size".into(),
                    toml::Value::Integer(i64::from(u16::try_from(b).unwrap_or(512))),
                );
                taken.sector_size = true;
            }
            None if image.contains_key("sector-size") => {
                return Err(SpecError::new(
                    "image.sector-size",
                    "\"auto\": the device's logical block size is neither 512 nor 4096",
                ))
            }
            None => {}
        }
    }
    Ok(taken)
}

/// The `[image]` values a device gives (`plan`/`build --device`, from a probe).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DeviceValues {
    /// The erase block to use.
    pub erase_block_bytes: u64,
    /// The logical sector size, when it is 512 or 4096.
    pub sector_bytes: Option<u64>,
    /// The device's size, taken for an `image.size` the spec leaves out (`write SPEC
    /// DEVICE`: the image is the device); `None` keeps the spec's default size.
    pub size_bytes: Option<u64>,
}

/// Which `[image]` keys took the device's value.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Taken {
    /// `image.erase-block` was `"auto"` or absent.
    pub erase_block: bool,
    /// `image.sector-size` was `"auto"` or absent.
    pub sector_size: bool,
    /// `image.size` was absent and the device's size was given.
    pub size: bool,
}

/// A key that may say `"auto"`.
#[derive(Clone, Copy, Debug)]
enum AutoKey {
    EraseBlock,
    SectorSize,
}

impl AutoKey {
    fn what(self) -> &'static str {
        match self {
            AutoKey::EraseBlock => "erase block",
            AutoKey::SectorSize => "sector size",
        }
    }
    fn example(self) -> &'static str {
        match self {
            AutoKey::EraseBlock => "\"4MiB\"",
            AutoKey::SectorSize => "512",
        }
    }
}

/// For a spec error on `image.erase-block` or `image.sector-size` whose value is `"auto"`
/// (`value_is_auto` answers for the key's name in `[image]`, `"erase-block"` or
/// `"sector-size"`), replaces the reason with one saying that `"auto"` needs the device the
/// image is for, and `how` to give it (`"give the device (--device /dev/sdX)"`); other
/// errors stay as they are. The CLI and the Python bindings (spec files and dicts) share it.
pub fn explain_auto(
    e: &mut blockwise_image::SpecError,
    how: &str,
    value_is_auto: impl FnOnce(&str) -> bool,
) {
    let (name, key) = match e.key.as_str() {
        "image.erase-block" => ("erase-block", AutoKey::EraseBlock),
        "image.sector-size" => ("sector-size", AutoKey::SectorSize),
        _ => return,
    };
    if value_is_auto(name) {
        e.reason = format!(
            "\"auto\" takes the {} from a probe of the device the image is for: {how}, or a value such as {}",
            key.what(),
            key.example()
        );
    }
}

/// [`explain_auto`] for a spec given as TOML `text` (parsed again only when the error is on
/// one of the two keys).
pub fn explain_auto_toml(e: &mut blockwise_image::SpecError, how: &str, text: &str) {
    explain_auto(e, how, |name| {
        text.parse::<toml::Table>()
            .ok()
            .and_then(|t| t.get("image")?.get(name)?.as_str().map(str::to_owned))
            .is_some_and(|v| v.eq_ignore_ascii_case("auto"))
    });
}

/// The file-creation time: spec `timestamp`, else `SOURCE_DATE_EPOCH`, else 0.
#[must_use]
pub fn resolve_timestamp(spec: &Spec) -> i64 {
    spec.image
        .timestamp
        .and_then(|t| i64::try_from(t).ok())
        .or_else(|| {
            std::env::var("SOURCE_DATE_EPOCH")
                .ok()
                .and_then(|v| v.trim().parse().ok())
        })
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// r31: a spec is recognised by its bytes whatever its name; images, empty files and
    /// text that is not TOML are not specs.
    #[test]
    fn r31_specs_are_recognised_by_content() {
        let dir = tempfile::tempdir().unwrap();
        let spec = "[image]\nsize = \"64MiB\"\n[[partition]]\nfs = \"fat32\"\nsize = \"fill\"\n";
        let cases: [(&str, &[u8], bool); 9] = [
            ("sd.conf", spec.as_bytes(), true),
            ("SD.TOML", b"not toml at all", true),
            ("sd", b"[imgae]\nsise = 1\n", true),
            ("disk.img", b"\x00\x00\xeb\x3c\x90mkfs.fat", false),
            ("mbr.img", &[0u8; 512], false),
            ("empty.img", b"", false),
            ("notes.txt", b"hello world\n", false),
            ("latin1.img", b"[image]\nlabel = \"\xe9\"\n", false),
            ("x.toml.img", b"\x7fELF\x02\x01", false),
        ];
        for (name, bytes, want) in cases {
            let p = dir.path().join(name);
            fs::write(&p, bytes).unwrap();
            assert_eq!(is_spec_file(&p).unwrap(), want, "{name}");
        }
        // A large file is an image, whatever it holds.
        let big = dir.path().join("big.img");
        fs::write(&big, spec.repeat(20_000)).unwrap();
        assert!(!is_spec_file(&big).unwrap());
        assert!(is_spec_file(&dir.path().join("missing")).is_err());
    }

    fn spec_at(dir: &Path, text: &str) -> PathBuf {
        let p = dir.join("s.toml");
        fs::write(&p, text).unwrap();
        p
    }

    const DEV: DeviceValues = DeviceValues {
        erase_block_bytes: 8 << 20,
        sector_bytes: Some(4096),
        size_bytes: None,
    };

    #[test]
    fn auto_without_a_device_names_the_key() {
        let dir = tempfile::tempdir().unwrap();
        for (text, key) in [
            (
                "[image]\nerase-block = \"auto\"\n[[partition]]\nfs = \"none\"\nsize = \"8MiB\"\n",
                "image.erase-block",
            ),
            (
                "[image]\nsector-size = \"AUTO\"\n[[partition]]\nfs = \"none\"\nsize = \"8MiB\"\n",
                "image.sector-size",
            ),
        ] {
            let e = SpecFile::load(&spec_at(dir.path(), text)).unwrap_err();
            let se = e.spec_error().unwrap();
            assert_eq!(se.key, key);
            assert!(se.reason.contains("--device"), "{e}");
            // Another caller's hint; a key that is not "auto" keeps its own reason.
            let e = SpecFile::load_with_auto_hint(&spec_at(dir.path(), text), "call it so")
                .unwrap_err();
            assert!(e.to_string().contains(": call it so, or a value"), "{e}");
            let wrong = text
                .replace("\"auto\"", "\"x\"")
                .replace("\"AUTO\"", "\"x\"");
            let e = SpecFile::load(&spec_at(dir.path(), &wrong)).unwrap_err();
            assert!(!e.to_string().contains("probe"), "{e}");
        }
    }

    #[test]
    fn a_device_fills_auto_and_absent_keys_and_spec_values_stay() {
        let dir = tempfile::tempdir().unwrap();
        let part = "[[partition]]\nfs = \"none\"\nsize = \"16MiB\"\n";
        let (sf, taken) = SpecFile::load_for_device(
            &spec_at(
                dir.path(),
                &format!("[image]\nerase-block = \"auto\"\n{part}"),
            ),
            &DEV,
        )
        .unwrap();
        assert_eq!(sf.spec.image.erase_block, 8 << 20);
        assert_eq!(sf.spec.image.sector_size.bytes_u64(), 4096);
        assert_eq!(
            taken,
            Taken {
                erase_block: true,
                sector_size: true,
                size: false
            }
        );
        // No [image] table at all.
        let (sf, taken) = SpecFile::load_for_device(&spec_at(dir.path(), part), &DEV).unwrap();
        assert_eq!(sf.spec.image.erase_block, 8 << 20);
        assert!(taken.erase_block && taken.sector_size);
        // Given values win.
        let (sf, taken) = SpecFile::load_for_device(
            &spec_at(
                dir.path(),
                &format!("[image]\nerase-block = \"1MiB\"\nsector-size = 512\n{part}"),
            ),
            &DEV,
        )
        .unwrap();
        assert_eq!(sf.spec.image.erase_block, 1 << 20);
        assert_eq!(sf.spec.image.sector_size.bytes_u64(), 512);
        assert_eq!(taken, Taken::default());
        // Other errors still name their key.
        let e = SpecFile::load_for_device(
            &spec_at(
                dir.path(),
                "[image]\nerase-block = \"auto\"\nsize = \"x\"\n",
            ),
            &DEV,
        )
        .unwrap_err();
        assert_eq!(e.spec_error().unwrap().key, "image.size");
    }

    /// With the device's size (`write SPEC DEVICE`), a left-out `image.size` is the device's,
    /// so `"fill"` fills it; a given size stays.
    #[test]
    fn a_device_size_is_taken_only_when_the_spec_has_none() {
        let dir = tempfile::tempdir().unwrap();
        let dev = DeviceValues {
            size_bytes: Some(64 << 20),
            ..DEV
        };
        let part = "[[partition]]\nfs = \"none\"\nsize = \"fill\"\n";
        let (sf, taken) = SpecFile::load_for_device(&spec_at(dir.path(), part), &dev).unwrap();
        assert_eq!(sf.spec.image.size, Some(64 << 20));
        assert!(taken.size);
        let (sf, taken) = SpecFile::load_for_device(
            &spec_at(dir.path(), &format!("[image]\nsize = \"32MiB\"\n{part}")),
            &dev,
        )
        .unwrap();
        assert_eq!(sf.spec.image.size, Some(32 << 20));
        assert!(!taken.size);
    }
    /// The table-level step alone: what it writes into `[image]` and what it reports taken.
    #[test]
    fn take_device_values_fills_auto_and_absent_keys() {
        let dev = DeviceValues {
            size_bytes: Some(96 << 20),
            ..DEV
        };
        // (spec table, device, [image] afterwards, taken)
        let check = |text: &str, dev: &DeviceValues, image: &str, want: Taken| {
            let mut table: toml::Table = text.parse().unwrap();
            let taken = take_device_values(&mut table, dev).unwrap();
            let image: toml::Table = image.parse().unwrap();
            assert_eq!(table["image"], toml::Value::Table(image), "{text}");
            assert_eq!(taken, want, "{text}");
        };
        let all = Taken {
            erase_block: true,
            sector_size: true,
            size: true,
        };
        // No [image] at all: one is added with every value.
        check(
            "",
            &dev,
            "erase-block = 8388608\nsector-size = 4096\nsize = 100663296\n",
            all,
        );
        // "auto" in any case is taken; other keys stay.
        check(
            "[image]\nerase-block = \"Auto\"\nsector-size = \"auto\"\ntable = \"gpt\"\n",
            &dev,
            "erase-block = 8388608\nsector-size = 4096\nsize = 100663296\ntable = \"gpt\"\n",
            all,
        );
        // Given values stay, whatever their form.
        check(
            "[image]\nerase-block = \"1MiB\"\nsector-size = 512\nsize = \"32MiB\"\n",
            &dev,
            "erase-block = \"1MiB\"\nsector-size = 512\nsize = \"32MiB\"\n",
            Taken::default(),
        );
        // Without a device size, a left-out size stays left out.
        check(
            "[image]\nerase-block = \"auto\"\n",
            &DEV,
            "erase-block = 8388608\nsector-size = 4096\n",
            Taken {
                erase_block: true,
                sector_size: true,
                size: false,
            },
        );
        // A device whose logical blocks are neither 512 nor 4096: a left-out sector size
        // stays left out (the default), "auto" is an error naming the key.
        let odd = DeviceValues {
            sector_bytes: None,
            ..dev
        };
        check(
            "[image]\nsize = 1024\n",
            &odd,
            "size = 1024\nerase-block = 8388608\n",
            Taken {
                erase_block: true,
                ..Taken::default()
            },
        );
        let mut table: toml::Table = "[image]\nsector-size = \"auto\"\n".parse().unwrap();
        let e = take_device_values(&mut table, &odd).unwrap_err();
        assert_eq!(e.key, "image.sector-size");
        // Values TOML cannot hold name their key.
        let huge = DeviceValues {
            erase_block_bytes: u64::MAX,
            ..dev
        };
        let e = take_device_values(&mut toml::Table::new(), &huge).unwrap_err();
        assert_eq!(e.key, "image.erase-block");
        let huge = DeviceValues {
            size_bytes: Some(u64::MAX),
            ..dev
        };
        let e = take_device_values(&mut toml::Table::new(), &huge).unwrap_err();
        assert_eq!(e.key, "image.size");
        // An `image` that is not a table is left to the parser.
        let mut table: toml::Table = "image = 3\n".parse().unwrap();
        assert_eq!(
            take_device_values(&mut table, &dev).unwrap(),
            Taken::default()
        );
        assert_eq!(table["image"], toml::Value::Integer(3));
    }

    /// A table (as a Python dict gives it) planned for a device is the same spec as the file
    /// with the same text, with relative paths against the given directory.
    #[test]
    fn a_table_for_a_device_is_the_file_for_it() {
        let dir = tempfile::tempdir().unwrap();
        let dev = DeviceValues {
            size_bytes: Some(96 << 20),
            ..DEV
        };
        let text = "[image]\nerase-block = \"auto\"\ntable = \"gpt\"\n[[partition]]\nfs = \"fat\"\nsize = \"fill\"\n";
        let (from_file, taken_file) =
            SpecFile::load_for_device(&spec_at(dir.path(), text), &dev).unwrap();
        let (from_table, taken_table) =
            SpecFile::from_table_for_device(text.parse().unwrap(), &dev, "/base".into()).unwrap();
        assert_eq!(from_table.spec, from_file.spec);
        assert_eq!(taken_table, taken_file);
        assert_eq!(from_table.base_dir, PathBuf::from("/base"));
        assert_eq!(from_table.spec.image.size, Some(96 << 20));
        // Spec errors after the step still name their key.
        let e = SpecFile::from_table_for_device(
            "[image]\ntable = \"zip\"\n".parse().unwrap(),
            &dev,
            "/base".into(),
        )
        .unwrap_err();
        assert_eq!(e.spec_error().unwrap().key, "image.table");
    }
}
