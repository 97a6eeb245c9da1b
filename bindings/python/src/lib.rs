//! The native part of the Python package `blockwise`: `plan`, `build`, `verify` and `probe` on
//! top of `blockwise-host`, `write` on top of `blockwise-flash`, returning the CLI's JSON as
//! Python objects and raising one exception class per error kind (`errors`). The Python side
//! (`python/blockwise`) re-exports it and adds the exception classes, the result types, the
//! stubs and `python -m blockwise`.
//!
//! The GIL is released while files are scanned, written or read; every operation runs as a
//! `cancel::Op` that the work polls, taking the GIL back at most every 50 ms for the progress
//! callback, the `cancel` event and Ctrl-C.

mod cancel;
mod errors;

use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;

use blockwise_geometry::{parse_size, BlockSource, SectorSize};
use blockwise_host::{
    build_with_progress, explain_auto, explain_auto_toml, plan_file_with_progress, FileSource,
    SpecFile,
};
use blockwise_image::Spec;
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PyMapping, PyString, PyTuple};

use cancel::{BuildProgress, Op, WriteProgress};
use errors::{host_error, probe_error, spec_error, type_name};

/// Where a spec came from: its `SpecFile` and the name the JSON's `source` shows.
struct Loaded {
    file: SpecFile,
    source: String,
}

/// A copy of a dict spec with `os.PathLike` values (`"contents": pathlib.Path(...)`) turned into
/// strings; lists and tuples are copied as lists. With `drop_none`, keys whose value is `None`
/// are left out (TOML has no null; for the spec's optional keys a left-out key means what
/// `None` does). Deeper than any spec nests is left as is.
fn fspath_values<'py>(
    obj: &Bound<'py, PyAny>,
    depth: usize,
    drop_none: bool,
) -> PyResult<Bound<'py, PyAny>> {
    let py = obj.py();
    if depth > 16 {
        return Ok(obj.clone());
    }
    if let Ok(d) = obj.downcast::<PyMapping>() {
        let out = PyDict::new(py);
        for item in d.items()?.iter() {
            let (k, v): (Bound<'py, PyAny>, Bound<'py, PyAny>) = item.extract()?;
            if drop_none && v.is_none() {
                continue;
            }
            out.set_item(k, fspath_values(&v, depth + 1, drop_none)?)?;
        }
        return Ok(out.into_any());
    }
    if obj.downcast::<PyList>().is_ok() || obj.downcast::<PyTuple>().is_ok() {
        let mut items = Vec::new();
        for v in obj.try_iter()? {
            items.push(fspath_values(&v?, depth + 1, drop_none)?);
        }
        return Ok(PyList::new(py, items)?.into_any());
    }
    if obj.downcast::<PyString>().is_err() && obj.hasattr("__fspath__")? {
        return py.import("os")?.getattr("fsdecode")?.call1((obj,));
    }
    Ok(obj.clone())
}

/// A spec dict (the TOML's keys, `os.PathLike` values for paths) parsed and validated; the
/// outer error is Python's (a `__fspath__` that raised).
fn dict_spec(map: &Bound<'_, PyMapping>) -> PyResult<Result<Spec, blockwise_image::SpecError>> {
    let plain = fspath_values(map.as_any(), 0, false)?;
    let mut de = pythonize::Depythonizer::from_object(&plain);
    Ok(
        Spec::from_deserializer(&mut de, |e| e.to_string()).map_err(|mut e| {
            explain_auto(&mut e, AUTO_HOW, |name| {
                map.get_item("image")
                    .and_then(|image| image.get_item(name))
                    .and_then(|v| v.extract::<String>())
                    .is_ok_and(|v| v.eq_ignore_ascii_case("auto"))
            });
            e
        }),
    )
}

/// How a Python caller gives the device an `"auto"` key needs (see `explain_auto`).
const AUTO_HOW: &str = "write the spec to the device (blockwise.write(spec, \"/dev/sdX\"))";

/// `Spec::from_toml`, with the reason for an `"auto"` key saying how to give the device.
fn toml_spec(text: &str) -> Result<Spec, blockwise_image::SpecError> {
    Spec::from_toml(text).map_err(|mut e| {
        explain_auto_toml(&mut e, AUTO_HOW, text);
        e
    })
}

/// The TOML text of a `blockwise.Spec`, when `obj` is one.
fn spec_text(py: Python<'_>, obj: &Bound<'_, PyAny>) -> PyResult<Option<String>> {
    static SPEC: pyo3::sync::GILOnceCell<Py<pyo3::types::PyType>> = pyo3::sync::GILOnceCell::new();
    let class = SPEC.get_or_try_init(py, || -> PyResult<_> {
        Ok(py
            .import("blockwise._spec")?
            .getattr("Spec")?
            .downcast_into::<pyo3::types::PyType>()?
            .unbind())
    })?;
    if obj.is_instance(class.bind(py))? {
        return Ok(Some(obj.getattr("text")?.extract()?));
    }
    Ok(None)
}

/// The spec of `plan`/`build`: a dict with the TOML's keys, a `blockwise.Spec` (TOML text),
/// or a `str`/`os.PathLike` naming a spec file. A `str` holding a line break that names no
/// file is taken as TOML text with a `DeprecationWarning` (the old meaning).
fn load_spec(
    py: Python<'_>,
    spec: &Bound<'_, PyAny>,
    base_dir: Option<PathBuf>,
) -> PyResult<Loaded> {
    let base = || base_dir.clone().unwrap_or_else(|| PathBuf::from("."));
    let spec_err = |e: blockwise_image::SpecError| spec_error(py, &e.key, &e.to_string());
    let mut text = spec_text(py, spec)?;
    if let Ok(st) = spec.downcast::<PyString>() {
        let t = st.to_cow()?;
        if t.contains('\n') && !Path::new(&*t).exists() {
            deprecated_toml_str(py)?;
            text = Some(t.into_owned());
        }
    }
    if let Some(text) = text {
        let parsed = toml_spec(&text).map_err(spec_err)?;
        return Ok(Loaded {
            file: SpecFile::new(parsed, base()),
            source: "<toml>".into(),
        });
    }
    if let Ok(map) = spec.downcast::<PyMapping>() {
        let parsed = dict_spec(map)?.map_err(spec_err)?;
        return Ok(Loaded {
            file: SpecFile::new(parsed, base()),
            source: "<dict>".into(),
        });
    }
    let path: PathBuf = spec.extract().map_err(|_| {
        PyTypeError::new_err(format!(
            "spec must be a dict, a blockwise.Spec (TOML text), or a str or os.PathLike naming a spec file, not {}",
            type_name(spec)
        ))
    })?;
    let md = std::fs::metadata(&path).map_err(|e| errors::io_error(&path, &e, ""))?;
    if md.is_dir() {
        return Err(errors::os_error(
            &path,
            errors::EISDIR,
            "is a directory: give the spec file (TOML)",
        ));
    }
    let mut file =
        SpecFile::load_with_auto_hint(&path, AUTO_HOW).map_err(|e| host_error(py, &e))?;
    if let Some(b) = base_dir {
        file.base_dir = b;
    }
    Ok(Loaded {
        file,
        source: path.display().to_string(),
    })
}

/// Warns that TOML text given as a `str` spec is deprecated.
fn deprecated_toml_str(py: Python<'_>) -> PyResult<()> {
    let category = py.get_type::<pyo3::exceptions::PyDeprecationWarning>();
    PyErr::warn(
        py,
        &category,
        c"TOML text as a str spec is deprecated: a str is the path of a spec file; wrap TOML text in blockwise.Spec.from_toml(text)",
        2,
    )
}

/// A `serde_json` value as Python objects (dicts, lists, ints, strings …).
fn to_python(py: Python<'_>, v: &serde_json::Value) -> PyResult<PyObject> {
    Ok(pythonize::pythonize(py, v)
        .map_err(|e| PyValueError::new_err(e.to_string()))?
        .unbind())
}

fn json_error(e: serde_json::Error) -> PyErr {
    PyValueError::new_err(format!("encoding the result: {e}"))
}

/// The aligned layout a spec produces, as `blockwise plan --json` prints it.
///
/// Contents directories are scanned (metadata only, and sparse files for their holes) so that
/// the plan is the one `build` will follow, e.g. the ext4 inode count. Nothing is written.
///
/// Args:
///     spec: a dict with the keys of the TOML spec file (`{"image": {...}, "partition":
///         [...]}`; `os.PathLike` values are paths), a `str`/`os.PathLike` naming a spec
///         file (relative `contents`/`source` paths resolve against its directory), or
///         `blockwise.Spec.from_toml(text)` for TOML text.
///     base_dir: the directory relative paths resolve against (default: the spec file's,
///         else the current directory).
///     progress: `progress(phase, done, total)`, called with `("scan", entries, None)` at
///         most every 50 ms; an exception it raises stops the plan and is re-raised.
///     cancel: a `threading.Event`; once set, the plan stops within 50 ms with
///         `CancelledError`.
///
/// Returns:
///     `Plan`: `source`, `size_bytes`, `sector_bytes`, `erase_block_bytes`, `table`
///     (`kind`, `disk_id`), `partitions` (each with `index`, `start_bytes`, `size_bytes`,
///     `type`, `aligned`, `alignment_bytes`, `filesystem` …), `findings` (what `verify`
///     will report about the built image) and `aligned`.
///
/// Raises:
///     SpecError: the spec asks for something impossible; `.key` names the key.
///     UnsupportedError: valid, but not handled (an ext4 feature the native writer lacks).
///     FileNotFoundError: the spec file or a `contents` directory is missing (an `OSError`
///         with `errno` and `filename`).
///     CancelledError: `cancel` was set. KeyboardInterrupt: Ctrl-C.
///
/// Example:
///
///     >>> import blockwise
///     >>> p = blockwise.plan({"image": {"size": "1GiB"},
///     ...                     "partition": [{"fs": "fat32", "size": "fill"}]})
///     >>> p["partitions"][0]["start_bytes"], p["aligned"]
///     (4194304, True)
#[pyfunction]
#[pyo3(signature = (spec, *, base_dir=None, progress=None, cancel=None))]
fn plan(
    py: Python<'_>,
    spec: &Bound<'_, PyAny>,
    base_dir: Option<PathBuf>,
    progress: Option<Bound<'_, PyAny>>,
    cancel: Option<Bound<'_, PyAny>>,
) -> PyResult<PyObject> {
    let op = Op::start(py, cancel, progress)?;
    let Loaded { mut file, source } = load_spec(py, spec, base_dir)?;
    let planned = py.allow_threads(|| {
        let mut p = BuildProgress::new(&op);
        plan_file_with_progress(&mut file, &mut p)
    });
    let planned = match planned {
        Ok(p) => p,
        Err(_) if op.stopped() => return Err(op.error(py, "nothing was planned")),
        Err(e) => return Err(host_error(py, &e)),
    };
    let v = blockwise_host::json::plan_json(&planned, &source, None).map_err(json_error)?;
    to_python(py, &v)
}

/// Builds the image of a spec into `out`, atomically, as `blockwise build --json` prints it.
///
/// The image goes to a temp file next to `out` (sparse: holes stay holes; file data is copied
/// by the kernel), is synced and renamed; on any error or cancel nothing is left behind and an
/// existing `out` is untouched. With `bmap`, a bmaptool block map is written beside it.
///
/// Args:
///     spec: a dict with the keys of the TOML spec file, a `str`/`os.PathLike` naming a spec
///         file, or a `blockwise.Spec` (see `plan`).
///     out: the image file to write.
///     bmap: also write a bmaptool `.bmap` there.
///     progress: `progress(phase, done, total)`, called at most every 50 ms with
///         `("scan", entries, None)`, `("write", bytes, total)` and, with `bmap`,
///         `("hash", bytes, total)`; each phase starts with `done == 0` and ends with
///         `done == total`. An exception it raises stops the build (nothing is left) and is
///         re-raised.
///     base_dir: the directory relative paths resolve against.
///     format: the output's container, `"raw"`, `"simg"` (Android sparse), `"zst"` (seekable
///         zstd) or `"xz"`; by default `out`'s name picks it (`.simg`/`.sparse`, `.zst`,
///         `.xz`, anything else raw). `bmap` maps the raw image whatever the format.
///     level: the zstd (1-22) or xz (0-9) compression level.
///     cancel: a `threading.Event`; once set, the build stops within 50 ms of the scan, the
///         write or the hashing, removes what it wrote, and raises `CancelledError`.
///
/// Returns:
///     `BuildResult`: the `Plan` of the image plus `output`, `data_bytes`,
///     `metadata_bytes`, `content_bytes`, `kernel_copied_bytes` and `warnings` (each also
///     issued as `BlockwiseWarning`).
///
/// Raises:
///     SpecError: a bad spec (`.key`). UnsupportedError: valid but not handled.
///     UnsafeTargetError: `out` or `bmap` is one of the build's inputs or the other output.
///     IsADirectoryError: `out` is a directory. OSError: reading an input or writing `out`
///         failed (`errno`, `filename` is the file you named).
///     CancelledError: `cancel` was set. KeyboardInterrupt: Ctrl-C.
///
/// Example:
///
///     >>> r = blockwise.build({"image": {"size": "64MiB"},
///     ...                      "partition": [{"fs": "fat32", "size": "fill"}]}, "sd.img")
///     >>> r["output"], r["size_bytes"]
///     ('sd.img', 67108864)
#[pyfunction]
#[pyo3(signature = (spec, out, bmap=None, progress=None, *, base_dir=None, cancel=None, format=None, level=None))]
#[expect(clippy::too_many_arguments, reason = "the Python signature")]
fn build(
    py: Python<'_>,
    spec: &Bound<'_, PyAny>,
    out: PathBuf,
    bmap: Option<PathBuf>,
    progress: Option<Bound<'_, PyAny>>,
    base_dir: Option<PathBuf>,
    cancel: Option<Bound<'_, PyAny>>,
    format: Option<String>,
    level: Option<i32>,
) -> PyResult<PyObject> {
    let format = match format.as_deref() {
        None => None,
        Some(f) => Some(blockwise_host::OutputFormat::parse(f).ok_or_else(|| {
            PyValueError::new_err(format!(
                "format {f:?}: must be one of {}",
                blockwise_host::OutputFormat::CHOICES
            ))
        })?),
    };
    // A name promising a container blockwise does not write fails before any work.
    let format =
        blockwise_host::OutputFormat::resolve(&out, format).map_err(|e| host_error(py, &e))?;
    let options = blockwise_host::OutputOptions {
        format: Some(format),
        level,
    };
    let op = Op::start(py, cancel, progress)?;
    let Loaded { mut file, source } = load_spec(py, spec, base_dir)?;
    file.outputs = std::iter::once(out.clone()).chain(bmap.clone()).collect();
    let work_dir = out
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."))
        .to_path_buf();
    let result = py.allow_threads(
        || -> Result<(serde_json::Value, Vec<String>), blockwise_host::Error> {
            let mut p = BuildProgress::new(&op);
            let built = build_with_progress(&mut file, &work_dir, &mut p)?;
            let written = built.write_as(&out, bmap.as_deref(), &options, &mut p)?;
            let v = blockwise_host::json::build_output_json(
                &built,
                &written,
                &source,
                &out.display().to_string(),
            )
            .map_err(|e| blockwise_host::Error::Io {
                path: out.clone(),
                source: std::io::Error::other(e),
            })?;
            Ok((v, built.warnings.clone()))
        },
    );
    match result {
        Ok((v, warnings)) => {
            errors::warn_all(py, &warnings)?;
            to_python(py, &v)
        }
        Err(_) if op.stopped() => Err(op.error(py, "nothing was written")),
        // The F2FS backend's work file sits next to `out`: name `out`, not the temp file.
        Err(blockwise_host::Error::F2fs {
            index,
            source: blockwise_host::f2fs::F2fsError::Io { source: io, .. },
        }) => Err(errors::io_error(
            &out,
            &io,
            &format!("partition[{index}]: the F2FS work file next to it"),
        )),
        Err(e) => Err(host_error(py, &e)),
    }
}

/// A source that polls the operation between reads (Ctrl-C, the `cancel` event). It owns
/// the file and shares the [`Op`]: the container decoders take the source and drop it there.
struct Interruptible {
    inner: FileSource,
    op: std::sync::Arc<Op>,
}

/// Why an [`Interruptible`] read failed.
#[derive(Debug)]
enum ReadError {
    Io(std::io::Error),
    Interrupted,
}

impl std::fmt::Display for ReadError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ReadError::Io(e) => e.fmt(f),
            ReadError::Interrupted => f.write_str("interrupted"),
        }
    }
}

impl std::error::Error for ReadError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            ReadError::Io(e) => Some(e),
            ReadError::Interrupted => None,
        }
    }
}

impl BlockSource for Interruptible {
    type Error = ReadError;

    fn len(&self) -> u64 {
        self.inner.len()
    }

    fn read_at(&self, offset: u64, buf: &mut [u8]) -> Result<(), ReadError> {
        if self.op.poll(None, false) {
            return Err(ReadError::Interrupted);
        }
        self.inner.read_at(offset, buf).map_err(ReadError::Io)
    }
}

/// Parses a size given as an int or a string like `"4MiB"`; errors name `key`.
fn size_arg(py: Python<'_>, key: &str, v: &Bound<'_, PyAny>) -> PyResult<u64> {
    if let Ok(n) = v.extract::<u64>() {
        return Ok(n);
    }
    let text: String = v.extract().map_err(|_| {
        spec_error(
            py,
            key,
            &format!("{key}: expected a size in bytes or a string like \"4MiB\""),
        )
    })?;
    parse_size(&text).map_err(|e| spec_error(py, key, &format!("{key}: {text:?}: {e}")))
}

/// The alignment and consistency report of an image file or block device, as
/// `blockwise verify --json` prints it. Misalignment is reported in `findings`, not raised.
///
/// Only metadata is read (partition tables, superblocks, group descriptors, FATs' first
/// sectors, and the gaps between partitions up to 256 MiB): a 32 GiB sparse image verifies
/// in milliseconds. Never writes. A container (`.zst`, `.xz`, `.gz`, `.bz2`, `.lz4`, `.zip`,
/// Android sparse; known by its bytes) is read through its decoder and reported like the raw
/// image, plus `container`.
///
/// Args:
///     path: the image file or block device.
///     erase_block: the erase block to check against, in bytes or like `"8MiB"` (default
///         4 MiB; a power of two from 4 KiB to 1 GiB).
///     strict: erase-block misalignment is an `error` finding instead of a `warning`.
///     sector_size: the logical sector size of the table (512 or 4096; default: detected).
///     cancel: a `threading.Event`; once set, the verify stops at its next read with
///         `CancelledError`.
///
/// Returns:
///     `Report`: `source`, `size_bytes`, `sector_bytes`, `erase_block_bytes`, `table`,
///     `partitions` (as in a `Plan`), `findings` (`severity` `error`/`warning`/`info`,
///     `code`, `partition`, `message`), `aligned`, for a device `device` (its sysfs
///     hints), and for a container `container` (`kind`, `seekable`, ...).
///
/// Raises:
///     CorruptImageError: neither a partition table nor a filesystem was recognised, or a
///         container that does not decode.
///     UnsupportedError: a format blockwise refuses (tar, qcow2, VMDK, VHD, ...; the
///         message says what to do instead).
///     SpecError: a bad `erase_block` or `sector_size` (`.key` names the argument).
///     FileNotFoundError, IsADirectoryError, PermissionError, OSError: the path cannot be
///         read (`errno`, `filename`).
///     CancelledError: `cancel` was set. KeyboardInterrupt: Ctrl-C.
///
/// Example:
///
///     >>> r = blockwise.verify("sd.img", "4MiB")
///     >>> r["aligned"], [f["code"] for f in r["findings"] if f["severity"] == "error"]
///     (True, [])
#[pyfunction]
#[pyo3(signature = (path, erase_block=None, *, strict=false, sector_size=None, cancel=None))]
fn verify(
    py: Python<'_>,
    path: PathBuf,
    erase_block: Option<&Bound<'_, PyAny>>,
    strict: bool,
    sector_size: Option<u64>,
    cancel: Option<Bound<'_, PyAny>>,
) -> PyResult<PyObject> {
    // None: the erase block the image declares (0).
    let erase = match erase_block {
        None => 0,
        Some(v) => size_arg(py, "erase_block", v)?,
    };
    if erase != 0 && (!erase.is_power_of_two() || !(4096..=(1 << 30)).contains(&erase)) {
        return Err(spec_error(
            py,
            "erase_block",
            &format!("erase_block {erase}: must be a power of two from 4 KiB to 1 GiB (flash erase blocks are typically 4 MiB)"),
        ));
    }
    let sector = match sector_size {
        None => None,
        Some(n) => Some(SectorSize::from_bytes(n).ok_or_else(|| {
            spec_error(
                py,
                "sector_size",
                &format!("sector_size {n}: only 512 and 4096 are supported"),
            )
        })?),
    };
    let op = std::sync::Arc::new(Op::start(py, cancel, None)?);
    let src = FileSource::open(&path).map_err(|e| host_error(py, &e))?;
    let opts = blockwise_verify::Options::new(path.display().to_string())
        .erase_block(erase)
        .strict(strict)
        .sector_size(sector)
        .device(src.hints());
    let result = py.allow_threads(|| {
        let source = Interruptible {
            inner: src,
            op: op.clone(),
        };
        blockwise_container::verify::verify(source, &opts)
    });
    use blockwise_container::verify::VerifyError;
    let (report, container) = match result {
        Ok(r) => r,
        // A stop surfaces as the read's error, or as whatever a decoder made of it.
        Err(_) if op.stopped() => return Err(op.error(py, "the verify was stopped")),
        Err(VerifyError::Refused(r)) => {
            return Err(errors::unsupported(py, &format!("{}: {r}", path.display())));
        }
        Err(VerifyError::Decode(blockwise_container::Error::Input(e))) => {
            return Err(match e.downcast::<ReadError>() {
                Ok(read) => match *read {
                    ReadError::Io(e) => errors::io_error(&path, &e, "reading"),
                    ReadError::Interrupted => op.error(py, "the verify was stopped"),
                },
                Err(other) => errors::io_error(&path, &std::io::Error::other(other), "reading"),
            });
        }
        Err(e) => {
            return Err(errors::corrupt(
                py,
                Some(&path),
                &format!("{}: {e}", path.display()),
            ));
        }
    };
    if !report.recognised {
        let why: Vec<&str> = report.findings.iter().map(|f| f.message.as_str()).collect();
        return Err(errors::corrupt(
            py,
            Some(&path),
            &format!(
                "{}: {}",
                path.display(),
                if why.is_empty() {
                    "neither a partition table nor a filesystem was recognised".to_string()
                } else {
                    why.join("; ")
                }
            ),
        ));
    }
    let v = blockwise_container::verify::report_json(&report, container.as_ref())
        .map_err(json_error)?;
    to_python(py, &v)
}

/// What the kernel knows about a block device, its layout, and the erase block and sector
/// size to put in the spec, as `blockwise probe --json` prints it. Reads only.
///
/// The sysfs values (`logical_block_bytes`, `optimal_io_bytes`, `preferred_erase_bytes`,
/// `removable`, `transport`, `kernel_partitions`, …), `layout` (the `verify` report of the
/// device against the recommended erase block; `None` with `layout_note` when it cannot be
/// read), `estimate` (an erase-block estimate from read timing, made only when the kernel
/// gives no erase block; `None` with `estimate_skipped` otherwise), `recommendation`
/// (`erase_block_bytes`, `erase_block_source`: `sysfs`, `estimate` or `default`,
/// `sector_bytes`, the reasons, and `spec`: the lines for `[image]`) and `notes`. The device
/// is opened read-only, without `O_EXCL`.
///
/// Args:
///     device: the block device (`/dev/sdb`, `/dev/mmcblk0`).
///     estimate: time reads to estimate the erase block when the kernel gives none
///         (`--no-estimate` when false).
///     estimate_seconds: the read time the estimate may spend, 0 to 600 (it always does a
///         few rounds).
///     cancel: a `threading.Event`; once set, the timed reads stop at the next read and
///         `CancelledError` is raised.
///
/// Returns:
///     `ProbeResult`.
///
/// Raises:
///     FileNotFoundError: the path does not exist.
///     OSError: `errno.ENOTBLK` for anything but a block device (use `verify` for image
///         files), the OS's errno for sysfs problems.
///     SpecError: `estimate_seconds` out of range (`.key == "estimate_seconds"`).
///     CancelledError: `cancel` was set. KeyboardInterrupt: Ctrl-C.
///
/// Example:
///
///     >>> info = blockwise.probe("/dev/sdb")
///     >>> print(info["recommendation"]["spec"])
///     erase-block = "4MiB"
///     sector-size = 512
#[pyfunction]
#[pyo3(signature = (device, *, estimate=true, estimate_seconds=2.0, cancel=None))]
fn probe(
    py: Python<'_>,
    device: PathBuf,
    estimate: bool,
    estimate_seconds: f64,
    cancel: Option<Bound<'_, PyAny>>,
) -> PyResult<PyObject> {
    let Some(budget) = blockwise_host::estimate_budget(estimate_seconds) else {
        return Err(spec_error(
            py,
            "estimate_seconds",
            &format!(
                "estimate_seconds {estimate_seconds}: must be between 0 and {}",
                blockwise_host::MAX_ESTIMATE_SECONDS
            ),
        ));
    };
    let opts = blockwise_host::ProbeOptions::default()
        .estimate(estimate)
        .budget(budget);
    let op = Op::start(py, cancel, None)?;
    let report = cancel::watched(py, &op, || {
        blockwise_host::probe_report_cancellable(&device, &opts, op.flag())
    });
    if op.stopped() {
        return Err(op.error(py, "the probe was stopped"));
    }
    let report = report.map_err(|e| probe_error(&e))?;
    let v = blockwise_host::json::probe_json(&report).map_err(json_error)?;
    to_python(py, &v)
}

/// Why a write failed, before it becomes a Python exception.
enum WriteFailure {
    /// Building a spec source failed.
    Host(blockwise_host::Error),
    /// Opening an image source failed.
    Open(blockwise_flash::OpenError),
    /// Inspecting the target failed.
    Inspect(std::io::Error),
    /// Creating the work directory of a spec build failed.
    WorkDir(PathBuf, std::io::Error),
    /// Probing the block device a spec is planned for failed.
    Probe(blockwise_flash::ProbeError),
    /// The writer (or the target's opening) failed or refused.
    Flash(blockwise_flash::Error),
    /// Stopped by a progress callback, the `cancel` event or a signal.
    Cancelled,
}

impl From<blockwise_flash::Refusal> for WriteFailure {
    fn from(r: blockwise_flash::Refusal) -> Self {
        WriteFailure::Flash(r.into())
    }
}

/// What `write` is given as its source.
enum WriteSource {
    Spec(WriteSpec),
    Image(PathBuf),
}

/// A spec source of `write`, loaded once the target is known: for a block device it is
/// planned for the device as the CLI's `write SPEC DEVICE` does
/// ([`blockwise_host::take_device_values`]), for a regular file it is used as written.
enum WriteSpec {
    /// A spec file; `base_dir` replaces its directory when given.
    File {
        path: PathBuf,
        base_dir: Option<PathBuf>,
    },
    /// A spec dict, parsed as `plan`/`build` parse it (for a regular file), and as a TOML
    /// table without its `None` values (for a device), or why it has no TOML form.
    Dict {
        parsed: Box<Result<Spec, blockwise_image::SpecError>>,
        table: Result<toml::Table, String>,
        base_dir: PathBuf,
    },
    /// A `blockwise.Spec`: TOML text.
    Text { text: String, base_dir: PathBuf },
}

impl WriteSpec {
    /// The spec for `target`, and when it is a block device (`is_device`) the lines saying
    /// where the values taken from it came from. The device is probed as the CLI's `write`
    /// probes it (erase-block estimate included, 2 s of reads at most).
    fn load(
        &self,
        target: &Path,
        is_device: bool,
    ) -> Result<(SpecFile, blockwise_host::DeviceNotes), WriteFailure> {
        let host = WriteFailure::Host;
        if !is_device {
            let sf = match self {
                WriteSpec::File { path, base_dir } => {
                    let mut sf = SpecFile::load_with_auto_hint(path, AUTO_HOW).map_err(host)?;
                    if let Some(b) = base_dir {
                        sf.base_dir.clone_from(b);
                    }
                    sf
                }
                WriteSpec::Dict {
                    parsed, base_dir, ..
                } => SpecFile::new(
                    (**parsed).clone().map_err(|e| host(e.into()))?,
                    base_dir.clone(),
                ),
                WriteSpec::Text { text, base_dir } => SpecFile::new(
                    toml_spec(text).map_err(|e| host(e.into()))?,
                    base_dir.clone(),
                ),
            };
            return Ok((sf, blockwise_host::DeviceNotes::default()));
        }
        let opts = blockwise_host::ProbeOptions::default();
        let probed = blockwise_host::probe_device(target, &opts).map_err(WriteFailure::Probe)?;
        let values = blockwise_host::DeviceValues {
            erase_block_bytes: probed.rec.erase_block_bytes,
            sector_bytes: probed.rec.sector_bytes,
            size_bytes: Some(probed.probe.size_bytes),
        };
        let (sf, taken) = match self {
            WriteSpec::File { path, base_dir } => {
                let (mut sf, taken) = SpecFile::load_for_device(path, &values).map_err(host)?;
                if let Some(b) = base_dir {
                    sf.base_dir.clone_from(b);
                }
                (sf, taken)
            }
            WriteSpec::Dict {
                parsed,
                table,
                base_dir,
            } => match table {
                Ok(t) => SpecFile::from_table_for_device(t.clone(), &values, base_dir.clone())
                    .map_err(host)?,
                // No TOML form (an int beyond i64, a None in a list …): the dict's parse
                // error names the key, unless it is about a key the device would fill.
                Err(why) => {
                    let e = match &**parsed {
                        Err(e)
                            if !matches!(
                                e.key.as_str(),
                                "image.erase-block" | "image.sector-size"
                            ) =>
                        {
                            e.clone()
                        }
                        _ => blockwise_image::SpecError::new("(dict)", why.clone()),
                    };
                    return Err(host(e.into()));
                }
            },
            WriteSpec::Text { text, base_dir } => {
                let table = text.parse::<toml::Table>().map_err(|e| {
                    host(blockwise_image::SpecError::new("(toml)", e.to_string()).into())
                })?;
                SpecFile::from_table_for_device(table, &values, base_dir.clone()).map_err(host)?
            }
        };
        let notes = probed.device_notes(&sf.spec.image, taken, "image.");
        Ok((sf, notes))
    }
}

/// What `write` needs besides the source, collected while the GIL is held.
struct WriteArgs {
    target: PathBuf,
    bmap: Option<PathBuf>,
    opts: blockwise_flash::Options,
    direct: bool,
    yes: bool,
    partition_ok: bool,
    /// Write bytes that are no disk image as they are.
    raw: bool,
}

/// A unique work directory for a spec build (mke2fs temp files), removed on drop.
struct WorkDir(PathBuf);

impl WorkDir {
    fn new() -> std::io::Result<Self> {
        static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let dir =
            std::env::temp_dir().join(format!("blockwise-py-write-{}-{n}", std::process::id()));
        std::fs::create_dir(&dir)?;
        Ok(WorkDir(dir))
    }
}

impl Drop for WorkDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The CLI's `write` steps, in its order: inspect and check the target, load a spec source
/// (planned for a block device target) and build it, or open an image source, the size and
/// confirmation checks, open, the read-only check, write. Runs without the GIL. Returns the
/// outcome (a spec's planning notes first in its notes), whether O_DIRECT was used, and
/// warnings to show.
fn write_steps(
    src: &mut WriteSource,
    a: &WriteArgs,
    build_progress: &mut BuildProgress<'_>,
    progress: &mut WriteProgress<'_>,
    cancel: &AtomicBool,
) -> Result<(blockwise_flash::Outcome, bool, Vec<String>), WriteFailure> {
    use blockwise_flash::{MapSource, Refusal, Source, Target, TargetKind};
    let info = match blockwise_flash::inspect(&a.target) {
        Ok(i) => i,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) => return Err(WriteFailure::Inspect(e)),
    };
    match &info {
        Some(info) => blockwise_flash::check(info, a.partition_ok)?,
        None => blockwise_flash::check_file_target(&a.target)?,
    }
    let mut warnings = Vec::new();
    let mut planned = Vec::new();
    let mut work = None;
    let built;
    let mut opened;
    let mut spec_source;
    let inputs;
    let source: &mut dyn Source = match src {
        WriteSource::Spec(spec) => {
            let (mut sf, notes) = spec.load(&a.target, info.is_some())?;
            // A regular file as the target may sit inside a contents tree: leave it out.
            sf.outputs.push(a.target.clone());
            planned = notes.notes;
            warnings.extend(notes.warnings);
            let dir = WorkDir::new().map_err(|e| WriteFailure::WorkDir(std::env::temp_dir(), e))?;
            let dir = work.insert(dir);
            built =
                build_with_progress(&mut sf, &dir.0, build_progress).map_err(WriteFailure::Host)?;
            warnings.extend(built.warnings.iter().cloned());
            inputs = built.inputs();
            spec_source = MapSource::new(
                built.image.reader(&built.content),
                built.image.mapped_ranges(),
            );
            &mut spec_source
        }
        WriteSource::Image(path) => {
            opened = blockwise_flash::open_image(path, a.bmap.as_deref(), a.raw)
                .map_err(WriteFailure::Open)?;
            let mut paths = vec![path.as_path()];
            paths.extend(opened.bmap.as_deref());
            inputs = blockwise_flash::data_ids(&paths);
            &mut *opened.source
        }
    };
    // The target is none of the inputs: by path now, by the opened descriptor below.
    if let Some(id) = blockwise_flash::DataId::of_path(&a.target).map_err(WriteFailure::Inspect)? {
        blockwise_flash::refuse_input_as_target(&a.target, &id, &inputs)?;
    }
    if let (Some(info), Some(size)) = (&info, source.size()) {
        if size > info.size_bytes {
            return Err(Refusal::TooSmall {
                dev: info.path.display().to_string(),
                dev_bytes: info.size_bytes,
                image_bytes: size,
            }
            .into());
        }
    }
    // The CLI's rule without a terminal to type the name on: a non-removable disk needs `yes`.
    if let Some(info) = &info {
        if !info.removable && !a.yes {
            return Err(Refusal::NotConfirmed(format!(
                "{} is not a removable disk: pass yes=True to write to it anyway",
                info.describe()
            ))
            .into());
        }
    }
    let mode = if a.direct {
        blockwise_flash::DirectMode::Require
    } else {
        blockwise_flash::DirectMode::Prefer
    };
    let (mut target, open_warnings) = Target::open(&a.target, mode).map_err(WriteFailure::Flash)?;
    warnings.extend(open_warnings);
    if info.is_none() && target.kind() != TargetKind::File {
        // A device node appeared after the checks: they were a file's, not a device's.
        return Err(Refusal::NotConfirmed(format!(
            "{} became a block device after it was checked; write again",
            blockwise_geometry::display_path(&a.target)
        ))
        .into());
    }
    let id = target.data_id().map_err(WriteFailure::Inspect)?;
    blockwise_flash::refuse_input_as_target(&a.target, &id, &inputs)?;
    if target.kind() != TargetKind::File && target.read_only().unwrap_or(false) {
        return Err(Refusal::ReadOnly {
            dev: a.target.display().to_string(),
        }
        .into());
    }
    let mut outcome = blockwise_flash::write(&mut target, source, &a.opts, cancel, &mut |e| {
        progress.event(e)
    })
    .map_err(WriteFailure::Flash)?;
    outcome.notes.splice(0..0, planned);
    Ok((outcome, target.is_direct(), warnings))
}

/// The Python exception for a failed write (not a cancel: the [`Op`] knows why it stopped).
fn write_error(py: Python<'_>, e: WriteFailure, src_path: &Path, target: &Path) -> PyErr {
    use blockwise_flash::{Error as F, OpenError, Refusal, SourceError};
    match e {
        WriteFailure::Host(e) => host_error(py, &e),
        WriteFailure::Cancelled => errors::cancelled(py, "cancelled"),
        WriteFailure::Inspect(io) => errors::io_error(target, &io, ""),
        WriteFailure::WorkDir(dir, io) => {
            errors::io_error(&dir, &io, "creating the work directory")
        }
        WriteFailure::Probe(e) => probe_error(&e),
        WriteFailure::Open(e) => {
            let message = e.to_string();
            match &e {
                OpenError::Io { path, source } => errors::io_error(path, source, ""),
                OpenError::Bmap { path, .. } => errors::corrupt(py, Some(path), &message),
                OpenError::BmapSize { bmap, .. } => errors::corrupt(py, Some(bmap), &message),
                OpenError::Refused { .. } | OpenError::NotImage { .. } => {
                    errors::unsupported(py, &message)
                }
                _ => errors::corrupt(py, Some(src_path), &message),
            }
        }
        WriteFailure::Flash(e) => {
            let message = e.to_string();
            match &e {
                F::Refused(r) => {
                    let path = match r {
                        Refusal::NotUsable { path }
                        | Refusal::NoSuchDevice { path }
                        | Refusal::FileInDev { path }
                        | Refusal::DirectRefused { path } => path.as_path(),
                        Refusal::TargetIsInput { target, .. } => target.as_path(),
                        _ => target,
                    };
                    errors::unsafe_target(py, Some(path), &message)
                }
                F::Open { path, source } => errors::io_error(path, source, ""),
                F::Write {
                    offset,
                    written,
                    source,
                } => errors::io_error(
                    target,
                    source,
                    &format!("writing at offset {offset} after {written} bytes written"),
                ),
                F::Sync { written, source } => errors::io_error(
                    target,
                    source,
                    &format!("fdatasync after {written} bytes written"),
                ),
                F::VerifyRead { offset, source } => errors::io_error(
                    target,
                    source,
                    &format!("verify: reading back at offset {offset}"),
                ),
                F::ShortWrite { .. } => errors::os_error(target, errors::ENOSPC, &message),
                F::VerifyMismatch { .. } => errors::os_error(target, errors::EIO, &message),
                F::Source {
                    source: SourceError::Io(io),
                    offset,
                    written,
                } => errors::io_error(
                    src_path,
                    io,
                    &format!(
                        "reading the source at offset {offset} (after {written} bytes written)"
                    ),
                ),
                F::Source { .. } => errors::corrupt(py, Some(src_path), &message),
                F::Options(_) => spec_error(py, "chunk", &message),
                F::Alloc { .. } => pyo3::exceptions::PyMemoryError::new_err(message),
                _ => errors::os_error(target, errors::EIO, &message),
            }
        }
    }
}

/// Writes an image file or a spec to a block device or regular file, as
/// `blockwise write --json` prints it (plus `warnings`).
///
/// `source` is an image file (raw; `.xz`/`.gz`/`.zst`/`.bz2`/`.lz4`/`.zip` or Android sparse,
/// recognised by its bytes and streamed; a block device copied whole; with the bmaptool
/// `.bmap` beside it or `bmap=`), a spec file (recognised by its content: a small
/// text file that parses as TOML, whatever its name; built in memory and streamed, without an
/// intermediate image) or a spec dict. `target` is a block device (opened with `O_EXCL` for
/// the whole write) or a regular file (created when missing, never in `/dev`; emptied first,
/// so it ends up byte-identical to the image). Only mapped ranges are written, in `chunk`-
/// sized aligned pieces with `O_DIRECT` where possible; block 0 and the GPT headers are
/// written last, after a sync, so an interrupted write never leaves a valid-looking
/// partition table. A spec written to a block device is planned for it as
/// `blockwise write SPEC DEVICE` does (`"auto"` or left-out `erase-block`/`sector-size` and a
/// left-out `size` take the device's values; a dict's `None` values count as left out), the
/// lines saying so first in `notes`.
///
/// Before anything is written the target is checked as the command line checks it; there is
/// no terminal to confirm on, so a non-removable disk needs `yes=True` and a partition
/// `partition_ok=True`.
///
/// Args:
///     source: the image or spec file (`str` or `os.PathLike`), a spec dict, or a
///         `blockwise.Spec`.
///     target: the block device or regular file to write.
///     verify: read everything written back and compare.
///     progress: `progress(phase, done, total)`, called at most every 50 ms with
///         `("scan", entries, None)` (a spec's contents), `("write", bytes, total)` (`total`
///         is `None` for a compressed image without a bmap until the end) and, with
///         `verify`, `("verify", bytes, total)`. An exception it raises stops the write
///         after the chunk in flight, block 0 unwritten, and is re-raised.
///     yes: write to a non-removable disk (an internal drive, a loop device).
///     partition_ok: allow a partition as the target.
///     bmap: the image's bmap (default: `IMAGE.bmap` or `IMAGE.img.bmap` beside it).
///     chunk: the write size, bytes or like `"4MiB"` (at most 64 MiB).
///     zero_holes: write zeros also where a block map leaves the image out (holes without
///         one are always written as zeros on a device).
///     discard: discard (TRIM) the target's unmapped ranges first.
///     direct: fail instead of falling back to buffered writes when `O_DIRECT` is refused.
///     base_dir: the directory a spec dict's relative paths resolve against.
///     raw: write bytes that are no disk image blockwise knows (no partition table, no
///         filesystem: firmware blobs, unknown filesystems) byte for byte instead of
///         raising `UnsupportedError`.
///     cancel: a `threading.Event`; once set, the write stops within 50 ms (after the chunk
///         in flight, block 0 unwritten; during the read-back after the read in flight) and
///         `CancelledError` is raised.
///
/// Returns:
///     `WriteResult`: `source`, `target`, `image_bytes`, `mapped_bytes`, `bytes_written`,
///     `seconds`, `mb_per_s`, `chunk_mb_per_s` (`min`, `median`, `max`), `fsync_seconds`,
///     `verified`, `verify_mb_per_s`, `direct`, `interrupted`, `notes` and `warnings` (each
///     also issued as `BlockwiseWarning`).
///
/// Raises:
///     UnsafeTargetError: the target was refused before anything was written (a
///         `PermissionError`; `filename` is the target).
///     SpecError: a bad spec (`.key`), or a bad `chunk` (`.key == "chunk"`).
///     CorruptImageError: an unusable bmap, a bmap checksum mismatch, a truncated image.
///     UnsupportedError: a format that cannot be written as it is (tar, qcow2, VMDK, VHD,
///         ...; the message says what to do instead), or bytes that are no disk image
///         without `raw=True`.
///     FileNotFoundError: the source is missing. OSError: the device failed (`EIO`,
///         `ENOSPC`, a read-back that differs: `errno`, `filename` is the target, the message
///         gives the offset).
///     CancelledError: `cancel` was set. KeyboardInterrupt: Ctrl-C.
///
/// Example:
///
///     >>> r = blockwise.write("sd.img.xz", "/dev/sdb")
///     >>> r["verified"], r["bytes_written"]
///     (True, 71303168)
#[pyfunction]
#[pyo3(signature = (
    source, target, verify=true, progress=None, *, yes=false, partition_ok=false, bmap=None,
    chunk=None, zero_holes=false, discard=false, direct=false, base_dir=None, raw=false,
    cancel=None
))]
#[expect(clippy::too_many_arguments, reason = "the Python signature")]
fn write(
    py: Python<'_>,
    source: &Bound<'_, PyAny>,
    target: PathBuf,
    verify: bool,
    progress: Option<Bound<'_, PyAny>>,
    yes: bool,
    partition_ok: bool,
    bmap: Option<PathBuf>,
    chunk: Option<&Bound<'_, PyAny>>,
    zero_holes: bool,
    discard: bool,
    direct: bool,
    base_dir: Option<PathBuf>,
    raw: bool,
    cancel: Option<Bound<'_, PyAny>>,
) -> PyResult<PyObject> {
    let chunk = match chunk {
        None => 4 << 20,
        Some(v) => size_arg(py, "chunk", v)?,
    };
    if chunk == 0 {
        return Err(spec_error(py, "chunk", "chunk: must not be 0"));
    }
    if chunk > blockwise_flash::MAX_CHUNK {
        return Err(spec_error(
            py,
            "chunk",
            &format!("chunk {chunk}: at most 64 MiB (erase blocks are 4 to 16 MiB; a larger chunk only costs memory)"),
        ));
    }
    let (mut src, source_path, source_name) = if let Some(text) = spec_text(py, source)? {
        let spec = WriteSpec::Text {
            text,
            base_dir: base_dir.unwrap_or_else(|| PathBuf::from(".")),
        };
        (
            WriteSource::Spec(spec),
            PathBuf::from("<toml>"),
            "<toml>".to_string(),
        )
    } else if let Ok(map) = source.downcast::<PyMapping>() {
        // Both forms now, while the GIL is held; which one is used depends on the target.
        let parsed = dict_spec(map)?;
        let plain = fspath_values(map.as_any(), 0, true)?;
        let table = pythonize::depythonize::<toml::Table>(&plain).map_err(|e| {
            format!("a value has no TOML form ({e}), which planning for a device needs")
        });
        let spec = WriteSpec::Dict {
            parsed: Box::new(parsed),
            table,
            base_dir: base_dir.unwrap_or_else(|| PathBuf::from(".")),
        };
        (
            WriteSource::Spec(spec),
            PathBuf::from("<dict>"),
            "<dict>".to_string(),
        )
    } else {
        let path: PathBuf = source.extract().map_err(|_| {
            PyTypeError::new_err(format!(
                "source must be a path (str or os.PathLike) to an image or spec file, or a spec dict, not {}",
                type_name(source)
            ))
        })?;
        let md = std::fs::metadata(&path).map_err(|e| errors::io_error(&path, &e, ""))?;
        if md.is_dir() {
            return Err(errors::os_error(
                &path,
                errors::EISDIR,
                "is a directory: give an image or a spec file",
            ));
        }
        let name = path.display().to_string();
        // A spec by its name or its bytes: never written to the target as raw bytes.
        let is_spec =
            blockwise_host::is_spec_file(&path).map_err(|e| errors::io_error(&path, &e, ""))?;
        if is_spec {
            let spec = WriteSpec::File {
                path: path.clone(),
                base_dir,
            };
            (WriteSource::Spec(spec), path, name)
        } else {
            (WriteSource::Image(path.clone()), path, name)
        }
    };
    let args = WriteArgs {
        target,
        bmap,
        opts: blockwise_flash::Options::default()
            .chunk(chunk)
            .zero_holes(zero_holes)
            .discard(discard)
            .verify(verify),
        direct,
        yes,
        partition_ok,
        raw,
    };
    let op = Op::start(py, cancel, progress)?;
    let result = py.allow_threads(|| {
        let mut build_progress = BuildProgress::new(&op);
        let mut p = WriteProgress::new(&op);
        let r = write_steps(&mut src, &args, &mut build_progress, &mut p, op.flag());
        match r {
            Ok((out, ..)) if out.interrupted => Err(WriteFailure::Cancelled),
            other => other,
        }
    });
    match result {
        Ok((outcome, direct, warnings)) => {
            let mut v = blockwise_flash::write_json(
                &outcome,
                &source_name,
                &args.target.display().to_string(),
                direct,
            );
            if let Some(obj) = v.as_object_mut() {
                obj.insert("warnings".into(), warnings.clone().into());
            }
            errors::warn_all(py, &warnings)?;
            to_python(py, &v)
        }
        Err(_) if op.stopped() => Err(op.error(
            py,
            "the write stopped after the chunk in flight, block 0 unwritten (or during the read-back, after the image was written in full)",
        )),
        Err(e) => Err(write_error(py, e, &source_path, &args.target)),
    }
}

/// The module `blockwise._native`.
#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(plan, m)?)?;
    m.add_function(wrap_pyfunction!(build, m)?)?;
    m.add_function(wrap_pyfunction!(verify, m)?)?;
    m.add_function(wrap_pyfunction!(write, m)?)?;
    m.add_function(wrap_pyfunction!(probe, m)?)?;
    errors::add_classes(m)?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add("Spec", m.py().import("blockwise._spec")?.getattr("Spec")?)?;
    m.add(
        "__all__",
        [
            "BlockwiseWarning",
            "CancelledError",
            "CorruptImageError",
            "Error",
            "Spec",
            "SpecError",
            "UnsafeTargetError",
            "UnsupportedError",
            "build",
            "plan",
            "probe",
            "verify",
            "write",
        ],
    )?;
    Ok(())
}
