//! The native part of the Python package `blockwise`: `plan`, `build`, `verify` and `probe` on
//! top of `blockwise-host`, `write` on top of `blockwise-flash`, returning the CLI's JSON as
//! Python objects and raising one exception class per error kind. The Python side
//! (`python/blockwise`) re-exports it, adds the stubs and `python -m blockwise`.
//!
//! The GIL is released while files are scanned, written or read; progress callbacks and
//! signal checks (Ctrl-C) take it back briefly, at most every `POLL` (50 ms).

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use blockwise_geometry::{parse_size, BlockSource, SectorSize};
use blockwise_host::{
    build_with_progress, explain_auto, explain_auto_toml, plan_file, FileSource, Phase, Progress,
    SpecFile,
};
use blockwise_image::{ErrorKind, Spec};
use pyo3::create_exception;
use pyo3::exceptions::{PyException, PyOSError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PyMapping, PyString, PyTuple};

create_exception!(
    blockwise,
    SpecError,
    PyValueError,
    "The spec asks for something impossible; `.key` names the key, e.g. `partition[2].size`."
);
create_exception!(
    blockwise,
    CorruptImageError,
    PyException,
    "The image or device holds neither a partition table nor a filesystem blockwise recognises."
);
create_exception!(
    blockwise,
    UnsupportedError,
    PyException,
    "The input is valid, but blockwise does not handle it."
);
create_exception!(
    blockwise,
    UnsafeTargetError,
    PyException,
    "`write` refused the target before writing anything: mounted, swap, held, read-only, the running system, a partition without `partition_ok=True`, a non-removable disk without `yes=True`, too small, busy, neither a block device nor a regular file, a missing device under /dev, or one of the write's own inputs (the source through a link, its bmap, a spec's files, the loop device backed by the source); or `build` refused an output that is one of its inputs or its other output."
);

/// How often a long operation takes the GIL back to report progress and check for Ctrl-C.
const POLL: Duration = Duration::from_millis(50);

/// A `SpecError` carrying `key`.
fn spec_error(py: Python<'_>, key: &str, message: String) -> PyErr {
    // A message quotes the user's text (keys, values, paths): control characters escaped.
    let err = SpecError::new_err(blockwise_geometry::display_str(&message));
    let _ = err.value(py).setattr("key", key);
    err
}

/// An `OSError` for `path`: with errno (and so the matching subclass, e.g.
/// `FileNotFoundError`) when the OS gave one.
fn os_error(py: Python<'_>, path: Option<&Path>, message: String, errno: Option<i32>) -> PyErr {
    let filename = path.map(|p| p.display().to_string());
    match errno {
        Some(code) => {
            let strerror = std::io::Error::from_raw_os_error(code).to_string();
            let strerror = match strerror.find(" (os error") {
                Some(i) => strerror.get(..i).unwrap_or(&strerror).to_string(),
                None => strerror,
            };
            PyOSError::new_err((code, strerror, filename))
        }
        None => {
            let err = PyOSError::new_err(message);
            if let Some(f) = filename {
                let _ = err.value(py).setattr("filename", f);
            }
            err
        }
    }
}

/// The first `std::io::Error` in `e`'s source chain, for its errno.
fn find_errno(e: &(dyn std::error::Error + 'static)) -> Option<i32> {
    let mut cur: Option<&(dyn std::error::Error + 'static)> = Some(e);
    let mut depth = 0;
    while let Some(c) = cur {
        if let Some(io) = c.downcast_ref::<std::io::Error>() {
            return io.raw_os_error();
        }
        depth += 1;
        if depth > 16 {
            break;
        }
        cur = c.source();
    }
    None
}

/// The Python exception for a host error. `pending` is the exception that asked to cancel
/// (a progress callback's, or `KeyboardInterrupt`), re-raised as it was.
fn host_error(py: Python<'_>, e: blockwise_host::Error, pending: Option<PyErr>) -> PyErr {
    use blockwise_host::Error as E;
    if let Some(err) = pending {
        return err;
    }
    let message = blockwise_geometry::display_str(&e.to_string());
    match &e {
        E::Io { path, source } | E::Write { path, source, .. } => {
            os_error(py, Some(path), message, source.raw_os_error())
        }
        E::NotUsable { path, .. } | E::Changed { path, .. } => {
            os_error(py, Some(path), message, None)
        }
        E::Cancelled => pyo3::exceptions::PyKeyboardInterrupt::new_err(message),
        E::OutputIsInput { .. } => UnsafeTargetError::new_err(message),
        _ => {
            if let Some(se) = e.spec_error() {
                return spec_error(py, &se.key, message);
            }
            match e.kind() {
                ErrorKind::Spec => {
                    let key = match &e {
                        E::Image(blockwise_image::Error::Partition { index, .. }) => {
                            format!("partition[{index}]")
                        }
                        _ => String::new(),
                    };
                    spec_error(py, &key, message)
                }
                ErrorKind::Unsupported => UnsupportedError::new_err(message),
                _ => os_error(py, None, message, find_errno(&e)),
            }
        }
    }
}

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

/// `spec` as a dict (the TOML's keys), a TOML string or an `os.PathLike` to a spec file.
fn load_spec(
    py: Python<'_>,
    spec: &Bound<'_, PyAny>,
    base_dir: Option<PathBuf>,
) -> PyResult<Loaded> {
    let base = || base_dir.clone().unwrap_or_else(|| PathBuf::from("."));
    let spec_err = |e: blockwise_image::SpecError| {
        let message = e.to_string();
        spec_error(py, &e.key, message)
    };
    if let Ok(text) = spec.downcast::<PyString>() {
        let parsed = toml_spec(&text.to_cow()?).map_err(spec_err)?;
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
        pyo3::exceptions::PyTypeError::new_err(format!(
            "spec must be a dict, a TOML string or a path (os.PathLike), not {}",
            spec.get_type()
                .name()
                .map_or_else(|_| "?".to_string(), |n| n.to_string())
        ))
    })?;
    if !path.exists() {
        return Err(os_error(
            py,
            Some(&path),
            String::new(),
            Some(2), // ENOENT
        ));
    }
    let mut file =
        SpecFile::load_with_auto_hint(&path, AUTO_HOW).map_err(|e| host_error(py, e, None))?;
    if let Some(b) = base_dir {
        file.base_dir = b;
    }
    Ok(Loaded {
        file,
        source: path.display().to_string(),
    })
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

/// Progress for a build: calls the Python callback with `(done, total)` bytes while writing,
/// and checks for signals; the first exception either raises cancels the build.
struct PyProgress {
    callback: Option<Py<PyAny>>,
    writing: bool,
    done: u64,
    total: u64,
    reported: Option<u64>,
    last_poll: Instant,
    error: Option<PyErr>,
}

impl PyProgress {
    fn new(callback: Option<Py<PyAny>>) -> Self {
        PyProgress {
            callback,
            writing: false,
            done: 0,
            total: 0,
            reported: None,
            last_poll: Instant::now(),
            error: None,
        }
    }

    /// Takes the GIL (at most every [`POLL`] unless `force`), checks for signals and reports
    /// new progress.
    fn poll(&mut self, force: bool) {
        if self.error.is_some() || (!force && self.last_poll.elapsed() < POLL) {
            return;
        }
        self.last_poll = Instant::now();
        let result = Python::with_gil(|py| -> PyResult<()> {
            py.check_signals()?;
            if let (Some(cb), true) = (&self.callback, self.writing) {
                if self.reported != Some(self.done) {
                    self.reported = Some(self.done);
                    cb.call1(py, (self.done, self.total))?;
                }
            }
            Ok(())
        });
        if let Err(e) = result {
            self.error = Some(e);
        }
    }
}

impl Progress for PyProgress {
    fn phase(&mut self, phase: Phase) {
        match phase {
            Phase::Writing { bytes } => {
                self.writing = true;
                self.total = bytes;
                self.done = 0;
                self.poll(true);
            }
            Phase::Syncing => {
                self.done = self.total;
                self.poll(true);
            }
            _ => self.poll(false),
        }
    }

    fn advance(&mut self, n: u64) {
        if self.writing {
            self.done = self.done.saturating_add(n).min(self.total);
        }
        self.poll(false);
    }

    fn cancelled(&mut self) -> bool {
        self.poll(false);
        self.error.is_some()
    }
}

/// The aligned layout a spec would produce, as the CLI's `plan --json` prints it.
#[pyfunction]
#[pyo3(signature = (spec, *, base_dir=None))]
fn plan(py: Python<'_>, spec: &Bound<'_, PyAny>, base_dir: Option<PathBuf>) -> PyResult<PyObject> {
    let Loaded { mut file, source } = load_spec(py, spec, base_dir)?;
    let planned = py.allow_threads(|| plan_file(&mut file));
    let planned = planned.map_err(|e| host_error(py, e, None))?;
    let v = blockwise_host::json::plan_json(&planned, &source, None).map_err(json_error)?;
    to_python(py, &v)
}

/// Builds the image of `spec` into `out` (atomically), as the CLI's `build --json` prints it;
/// `format` (`"raw"`, `"simg"`, `"zst"`, `"xz"`) overrides what `out`'s name says, `level`
/// is the zstd/xz compression level.
#[pyfunction]
#[pyo3(signature = (spec, out, bmap=None, progress=None, *, base_dir=None, format=None, level=None))]
#[expect(clippy::too_many_arguments, reason = "the Python signature")]
fn build(
    py: Python<'_>,
    spec: &Bound<'_, PyAny>,
    out: PathBuf,
    bmap: Option<PathBuf>,
    progress: Option<Py<PyAny>>,
    base_dir: Option<PathBuf>,
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
        blockwise_host::OutputFormat::resolve(&out, format).map_err(|e| host_error(py, e, None))?;
    let options = blockwise_host::OutputOptions {
        format: Some(format),
        level,
    };
    let Loaded { mut file, source } = load_spec(py, spec, base_dir)?;
    file.outputs = std::iter::once(out.clone()).chain(bmap.clone()).collect();
    let work_dir = out
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."))
        .to_path_buf();
    let mut p = PyProgress::new(progress);
    let result = py.allow_threads(|| -> Result<serde_json::Value, blockwise_host::Error> {
        let built = build_with_progress(&mut file, &work_dir, &mut p)?;
        let written = built.write_as(&out, bmap.as_deref(), &options, &mut p)?;
        blockwise_host::json::build_output_json(
            &built,
            &written,
            &source,
            &out.display().to_string(),
        )
        .map_err(|e| blockwise_host::Error::Io {
            path: out.clone(),
            source: std::io::Error::other(e),
        })
    });
    match result {
        Ok(v) => to_python(py, &v),
        Err(e) => Err(host_error(py, e, p.error.take())),
    }
}

/// A source that takes the GIL back now and then to check for Ctrl-C.
struct Interruptible {
    inner: FileSource,
    last_poll: std::cell::Cell<Instant>,
    /// The pending Python exception, shared with the caller (the source itself is handed to
    /// the container decoders and dropped there).
    error: std::rc::Rc<std::cell::RefCell<Option<PyErr>>>,
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
        if self.last_poll.get().elapsed() >= POLL {
            self.last_poll.set(Instant::now());
            if let Err(e) = Python::with_gil(|py| py.check_signals()) {
                *self.error.borrow_mut() = Some(e);
            }
        }
        if self.error.borrow().is_some() {
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
            format!("{key}: expected a size in bytes or a string like \"4MiB\""),
        )
    })?;
    parse_size(&text).map_err(|e| spec_error(py, key, format!("{key}: {text:?}: {e}")))
}

/// The alignment and consistency report of an image file or block device, as the CLI's
/// `verify --json` prints it. Misalignment is reported in `findings`, not raised.
#[pyfunction]
#[pyo3(signature = (path, erase_block=None, *, strict=false, sector_size=None))]
fn verify(
    py: Python<'_>,
    path: PathBuf,
    erase_block: Option<&Bound<'_, PyAny>>,
    strict: bool,
    sector_size: Option<u64>,
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
            format!("erase_block {erase}: must be a power of two from 4 KiB to 1 GiB (flash erase blocks are typically 4 MiB)"),
        ));
    }
    let sector = match sector_size {
        None => None,
        Some(n) => Some(SectorSize::from_bytes(n).ok_or_else(|| {
            spec_error(
                py,
                "sector_size",
                format!("sector_size {n}: only 512 and 4096 are supported"),
            )
        })?),
    };
    let src = FileSource::open(&path).map_err(|e| host_error(py, e, None))?;
    let opts = blockwise_verify::Options::new(path.display().to_string())
        .erase_block(erase)
        .strict(strict)
        .sector_size(sector)
        .device(src.hints());
    let (result, pending) = py.allow_threads(|| {
        let error = std::rc::Rc::new(std::cell::RefCell::new(None));
        let source = Interruptible {
            inner: src,
            last_poll: std::cell::Cell::new(Instant::now()),
            error: error.clone(),
        };
        let result = blockwise_container::verify::verify(source, &opts);
        let pending = error.borrow_mut().take();
        (result, pending)
    });
    use blockwise_container::verify::VerifyError;
    let (report, container) = match result {
        Ok(r) => r,
        Err(VerifyError::Refused(r)) => {
            return Err(UnsupportedError::new_err(format!(
                "{}: {r}",
                blockwise_container::escape(&path.display().to_string())
            )));
        }
        Err(VerifyError::Decode(blockwise_container::Error::Input(e))) => {
            return Err(match e.downcast::<ReadError>() {
                Ok(read) => match *read {
                    ReadError::Io(e) => {
                        let message = format!("{}: {e}", path.display());
                        os_error(py, Some(&path), message, e.raw_os_error())
                    }
                    ReadError::Interrupted => pending.unwrap_or_else(|| {
                        pyo3::exceptions::PyKeyboardInterrupt::new_err("interrupted")
                    }),
                },
                Err(other) => {
                    let message = format!("{}: {other}", path.display());
                    os_error(py, Some(&path), message, None)
                }
            });
        }
        Err(e) => {
            if let Some(p) = pending {
                return Err(p);
            }
            return Err(CorruptImageError::new_err(format!(
                "{}: {e}",
                path.display()
            )));
        }
    };
    if !report.recognised {
        let why: Vec<&str> = report.findings.iter().map(|f| f.message.as_str()).collect();
        return Err(CorruptImageError::new_err(format!(
            "{}: {}",
            path.display(),
            if why.is_empty() {
                "neither a partition table nor a filesystem was recognised".to_string()
            } else {
                why.join("; ")
            }
        )));
    }
    let v = blockwise_container::verify::report_json(&report, container.as_ref())
        .map_err(json_error)?;
    to_python(py, &v)
}

/// `ENOTBLK`, "block device required": a path given to `probe` that is something else.
const ENOTBLK: i32 = 15;

/// The Python exception for a path `probe` cannot probe: `FileNotFoundError` (ENOENT) for a
/// missing path, `OSError` with `ENOTBLK` for anything but a block device, `OSError` with the
/// OS's errno (or none) for sysfs problems; `.filename` is the path, the message blockwise's.
fn probe_error(py: Python<'_>, e: &blockwise_flash::ProbeError) -> PyErr {
    use blockwise_flash::ProbeError as P;
    let message = e.to_string();
    match e {
        P::Missing { path } => os_error_msg(path, message, Some(2)), // ENOENT
        P::NotBlockDevice { path, .. } => os_error_msg(path, message, Some(ENOTBLK)),
        P::Io { path, source } => match source.raw_os_error() {
            Some(code) => os_error_msg(path, message, Some(code)),
            None => os_error(py, Some(path), message, None),
        },
        P::NoSysfs { path, .. } => os_error(py, Some(path), message, None),
        _ => PyOSError::new_err(message),
    }
}

/// What the kernel knows about a block device, its layout (the verify analysis, read-only),
/// an erase-block estimate from read timing when the kernel gives none, and the spec values to
/// use, as the CLI's `probe --json` prints it (`--no-estimate` when `estimate` is false).
#[pyfunction]
#[pyo3(signature = (device, *, estimate=true, estimate_seconds=2.0))]
fn probe(
    py: Python<'_>,
    device: PathBuf,
    estimate: bool,
    estimate_seconds: f64,
) -> PyResult<PyObject> {
    let Some(budget) = blockwise_host::estimate_budget(estimate_seconds) else {
        return Err(spec_error(
            py,
            "estimate_seconds",
            format!(
                "estimate_seconds {estimate_seconds}: must be between 0 and {}",
                blockwise_host::MAX_ESTIMATE_SECONDS
            ),
        ));
    };
    let opts = blockwise_host::ProbeOptions::default()
        .estimate(estimate)
        .budget(budget);
    let report = py.allow_threads(|| blockwise_host::probe_report(&device, &opts));
    let report = report.map_err(|e| probe_error(py, &e))?;
    let v = blockwise_host::json::probe_json(&report).map_err(json_error)?;
    to_python(py, &v)
}

/// An `OSError` whose message keeps blockwise's wording (offset, bytes written) next to the
/// errno and the file name.
fn os_error_msg(path: &Path, message: String, errno: Option<i32>) -> PyErr {
    let filename = path.display().to_string();
    match errno {
        Some(code) => PyOSError::new_err((code, message, filename)),
        None => PyOSError::new_err((EIO, message, filename)),
    }
}

/// The errno of a device failure that came without one (a read-back mismatch).
const EIO: i32 = 5;

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
    /// Stopped by a progress callback or Ctrl-C.
    Cancelled,
}

impl From<blockwise_flash::Refusal> for WriteFailure {
    fn from(r: blockwise_flash::Refusal) -> Self {
        WriteFailure::Flash(r.into())
    }
}

/// The write's progress: `(done, total)` bytes of the writing phase to the Python callback,
/// at most every [`POLL`] (always the first and the last), and Ctrl-C checks; the first
/// exception either raises sets `cancel`.
struct WriteProgress<'a> {
    callback: Option<Py<PyAny>>,
    cancel: &'a std::sync::atomic::AtomicBool,
    writing: bool,
    done: u64,
    total: u64,
    reported: Option<(u64, u64)>,
    last_poll: Instant,
    error: Option<PyErr>,
}

impl WriteProgress<'_> {
    fn poll(&mut self, force: bool) {
        if self.error.is_some() || (!force && self.last_poll.elapsed() < POLL) {
            return;
        }
        self.last_poll = Instant::now();
        let now = (self.done, self.total);
        let result = Python::with_gil(|py| -> PyResult<()> {
            py.check_signals()?;
            if let (Some(cb), true) = (&self.callback, self.writing) {
                if self.reported != Some(now) {
                    self.reported = Some(now);
                    cb.call1(py, now)?;
                }
            }
            Ok(())
        });
        if let Err(e) = result {
            self.error = Some(e);
            self.cancel
                .store(true, std::sync::atomic::Ordering::Relaxed);
        }
    }

    fn event(&mut self, e: blockwise_flash::Event) {
        use blockwise_flash::Event;
        match e {
            Event::Writing { total } => {
                self.writing = true;
                self.total = total.unwrap_or(0);
                self.done = 0;
                self.poll(true);
            }
            Event::Written(n) => {
                self.done = if self.total > 0 { n.min(self.total) } else { n };
                self.poll(false);
            }
            Event::Syncing => {
                if self.total == 0 {
                    self.total = self.done;
                }
                self.done = self.total;
                self.poll(true);
                self.writing = false;
            }
            // The read-back stops at the next read (at most 1 MiB) once Ctrl-C or the
            // callback raised: polled here as while writing.
            Event::Verifying { .. } | Event::Verified(_) => self.poll(false),
        }
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
        parsed: Result<Spec, blockwise_image::SpecError>,
        table: Result<toml::Table, String>,
        base_dir: PathBuf,
    },
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
                    parsed.clone().map_err(|e| host(e.into()))?,
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
                    let e = match parsed {
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
    build_progress: &mut PyProgress,
    progress: &mut WriteProgress<'_>,
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
    let mut outcome =
        blockwise_flash::write(&mut target, source, &a.opts, progress.cancel, &mut |e| {
            progress.event(e)
        })
        .map_err(WriteFailure::Flash)?;
    outcome.notes.splice(0..0, planned);
    Ok((outcome, target.is_direct(), warnings))
}

/// The Python exception for a failed write. `pending` (a callback's exception or
/// `KeyboardInterrupt`) wins.
fn write_error(
    py: Python<'_>,
    e: WriteFailure,
    pending: Option<PyErr>,
    source: &Path,
    target: &Path,
) -> PyErr {
    use blockwise_flash::{Error as F, OpenError, SourceError};
    if let Some(err) = pending {
        return err;
    }
    match e {
        WriteFailure::Host(e) => host_error(py, e, None),
        WriteFailure::Cancelled => pyo3::exceptions::PyKeyboardInterrupt::new_err("interrupted"),
        WriteFailure::Inspect(io) => {
            let message = format!("{}: {io}", target.display());
            os_error_msg(target, message, io.raw_os_error())
        }
        WriteFailure::WorkDir(dir, io) => {
            let message = format!("{}: {io}", dir.display());
            os_error_msg(&dir, message, io.raw_os_error())
        }
        WriteFailure::Probe(e) => probe_error(py, &e),
        WriteFailure::Open(e) => {
            let message = blockwise_geometry::display_str(&e.to_string());
            match &e {
                OpenError::Io { path, source } => {
                    os_error_msg(path, message, source.raw_os_error())
                }
                OpenError::Refused { .. } | OpenError::NotImage { .. } => {
                    UnsupportedError::new_err(message)
                }
                _ => CorruptImageError::new_err(message),
            }
        }
        WriteFailure::Flash(e) => {
            let message = blockwise_geometry::display_str(&e.to_string());
            match &e {
                F::Refused(_) => UnsafeTargetError::new_err(message),
                F::Open { path, source } => os_error_msg(path, message, source.raw_os_error()),
                F::Write { source, .. } | F::Sync { source, .. } | F::VerifyRead { source, .. } => {
                    os_error_msg(target, message, source.raw_os_error())
                }
                F::ShortWrite { .. } => os_error_msg(target, message, Some(28)), // ENOSPC
                F::VerifyMismatch { .. } => os_error_msg(target, message, None),
                F::Source {
                    source: SourceError::Io(io),
                    ..
                } => os_error_msg(source, message, io.raw_os_error()),
                F::Source { .. } => CorruptImageError::new_err(message),
                F::Options(_) => spec_error(py, "chunk", message),
                F::Alloc { .. } => pyo3::exceptions::PyMemoryError::new_err(message),
                _ => os_error_msg(target, message, None),
            }
        }
    }
}

/// Writes an image file (raw; .xz/.gz/.zst/.bz2/.lz4/.zip or Android sparse, recognised by
/// its bytes; a block device copied whole; with a bmap beside it or given), a spec
/// file (`.toml`) or a spec dict to a block device or regular file, as the CLI's
/// `write --json` prints it. A spec written to a block device is planned for it as the CLI's
/// `write SPEC DEVICE` plans it ("auto" or left-out `erase-block`/`sector-size` and a
/// left-out `size` take the device's values; a dict's `None` values count as left out), and
/// the lines the CLI prints about that come first in `notes`.
#[pyfunction]
#[pyo3(signature = (
    source, target, verify=true, progress=None, *, yes=false, partition_ok=false, bmap=None,
    chunk=None, zero_holes=false, discard=false, direct=false, base_dir=None, raw=false
))]
#[expect(clippy::too_many_arguments, reason = "the Python signature")]
fn write(
    py: Python<'_>,
    source: &Bound<'_, PyAny>,
    target: PathBuf,
    verify: bool,
    progress: Option<Py<PyAny>>,
    yes: bool,
    partition_ok: bool,
    bmap: Option<PathBuf>,
    chunk: Option<&Bound<'_, PyAny>>,
    zero_holes: bool,
    discard: bool,
    direct: bool,
    base_dir: Option<PathBuf>,
    raw: bool,
) -> PyResult<PyObject> {
    let chunk = match chunk {
        None => 4 << 20,
        Some(v) => size_arg(py, "chunk", v)?,
    };
    if chunk == 0 {
        return Err(spec_error(py, "chunk", "chunk: must not be 0".into()));
    }
    if chunk > blockwise_flash::MAX_CHUNK {
        return Err(spec_error(
            py,
            "chunk",
            format!("chunk {chunk}: at most 64 MiB (erase blocks are 4 to 16 MiB; a larger chunk only costs memory)"),
        ));
    }
    let (mut src, source_path, source_name) = if let Ok(map) = source.downcast::<PyMapping>() {
        // Both forms now, while the GIL is held; which one is used depends on the target.
        let parsed = dict_spec(map)?;
        let plain = fspath_values(map.as_any(), 0, true)?;
        let table = pythonize::depythonize::<toml::Table>(&plain).map_err(|e| {
            format!("a value has no TOML form ({e}), which planning for a device needs")
        });
        let spec = WriteSpec::Dict {
            parsed,
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
            pyo3::exceptions::PyTypeError::new_err(format!(
                "source must be a path (str or os.PathLike) to an image or spec file, or a spec dict, not {}",
                source
                    .get_type()
                    .name()
                    .map_or_else(|_| "?".to_string(), |n| n.to_string())
            ))
        })?;
        if !path.exists() {
            let message = format!("{}: no such file", path.display());
            return Err(os_error_msg(&path, message, Some(2))); // ENOENT
        }
        let name = path.display().to_string();
        if path.extension().is_some_and(|e| e == "toml") {
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
    let cancel = std::sync::atomic::AtomicBool::new(false);
    let mut build_progress = PyProgress::new(None);
    let mut p = WriteProgress {
        callback: progress,
        cancel: &cancel,
        writing: false,
        done: 0,
        total: 0,
        reported: None,
        last_poll: Instant::now(),
        error: None,
    };
    let result = py.allow_threads(|| {
        let r = write_steps(&mut src, &args, &mut build_progress, &mut p);
        match r {
            Ok((out, ..)) if out.interrupted => Err(WriteFailure::Cancelled),
            other => other,
        }
    });
    let pending = p.error.take().or_else(|| build_progress.error.take());
    match result {
        Ok((outcome, direct, warnings)) => {
            if let Some(err) = pending {
                return Err(err);
            }
            let category = py.get_type::<pyo3::exceptions::PyRuntimeWarning>();
            for w in &warnings {
                PyErr::warn(
                    py,
                    &category,
                    &std::ffi::CString::new(w.replace('\0', " "))?,
                    1,
                )?;
            }
            let v = blockwise_flash::write_json(
                &outcome,
                &source_name,
                &args.target.display().to_string(),
                direct,
            );
            to_python(py, &v)
        }
        Err(e) => Err(write_error(py, e, pending, &source_path, &args.target)),
    }
}

/// The module `blockwise._native`.
#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    m.add_function(wrap_pyfunction!(plan, m)?)?;
    m.add_function(wrap_pyfunction!(build, m)?)?;
    m.add_function(wrap_pyfunction!(verify, m)?)?;
    m.add_function(wrap_pyfunction!(write, m)?)?;
    m.add_function(wrap_pyfunction!(probe, m)?)?;
    let spec_error = py.get_type::<SpecError>();
    // The class default, so `.key` exists on every instance.
    spec_error.setattr("key", "")?;
    m.add("SpecError", spec_error)?;
    m.add("CorruptImageError", py.get_type::<CorruptImageError>())?;
    m.add("UnsupportedError", py.get_type::<UnsupportedError>())?;
    m.add("UnsafeTargetError", py.get_type::<UnsafeTargetError>())?;
    m.add(
        "__all__",
        [
            "CorruptImageError",
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
