//! Python exceptions for blockwise's errors.
//!
//! The classes live in `blockwise._errors` (Python source, so each has its docstring and its
//! builtin base: `SpecError(Error, ValueError)`, `UnsafeTargetError(Error, PermissionError)`,
//! …). Failures of the operating system become the builtin `OSError` subclass that matches
//! the errno (`OSError(errno, strerror, filename)` picks it: `FileNotFoundError`,
//! `IsADirectoryError`, …), with `filename` the path the caller gave, never a temp file.
//! Every message goes through [`python_words`]: no `(os error 2)`, the command line's flags
//! as the keyword arguments that stand for them, serde's type names as Python's.

use std::path::Path;

use pyo3::prelude::*;
use pyo3::sync::GILOnceCell;
use pyo3::types::PyType;

/// The exception classes of `blockwise._errors`.
struct Classes {
    spec: Py<PyType>,
    unsafe_target: Py<PyType>,
    corrupt: Py<PyType>,
    unsupported: Py<PyType>,
    cancelled: Py<PyType>,
    warning: Py<PyType>,
}

fn classes(py: Python<'_>) -> PyResult<&Classes> {
    static CLASSES: GILOnceCell<Classes> = GILOnceCell::new();
    CLASSES.get_or_try_init(py, || {
        let m = py.import("blockwise._errors")?;
        let get = |name: &str| -> PyResult<Py<PyType>> {
            Ok(m.getattr(name)?.downcast_into::<PyType>()?.unbind())
        };
        Ok(Classes {
            spec: get("SpecError")?,
            unsafe_target: get("UnsafeTargetError")?,
            corrupt: get("CorruptImageError")?,
            unsupported: get("UnsupportedError")?,
            cancelled: get("CancelledError")?,
            warning: get("BlockwiseWarning")?,
        })
    })
}

/// Adds the classes of `blockwise._errors` to the module `m`.
pub(crate) fn add_classes(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let errors = m.py().import("blockwise._errors")?;
    for name in [
        "Error",
        "SpecError",
        "UnsafeTargetError",
        "CorruptImageError",
        "UnsupportedError",
        "CancelledError",
        "BlockwiseWarning",
    ] {
        m.add(name, errors.getattr(name)?)?;
    }
    Ok(())
}

/// `type(obj).__name__`, for `TypeError` messages.
pub(crate) fn type_name(obj: &Bound<'_, PyAny>) -> String {
    obj.get_type()
        .name()
        .map_or_else(|_| "?".to_string(), |n| n.to_string())
}

/// The message in Python's words: blockwise's text with control characters escaped,
/// without Rust's `(os error N)`, with the command line's flags as the keyword arguments
/// that stand for them and serde's type names as Python's.
pub(crate) fn python_words(message: &str) -> String {
    let mut s = blockwise_geometry::display_str(message);
    // " (os error 2)": the errno is in `.errno`, the text says it already.
    while let Some(i) = s.find(" (os error ") {
        let Some(len) = s.get(i..).and_then(|rest| rest.find(')')) else {
            break;
        };
        s.replace_range(i..=i + len, "");
    }
    for (cli, py) in [
        ("--raw (Python: raw=True)", "raw=True"),
        ("--partition-ok", "partition_ok=True"),
        ("--zero-holes", "zero_holes=True"),
        ("--direct", "direct=True"),
        ("--no-estimate", "estimate=False"),
        ("--yes", "yes=True"),
        // serde's names for what a dict held (pythonize's deserializer).
        ("unit value", "None"),
        ("type: sequence", "type: list"),
        ("type: map", "type: dict"),
        ("type: string", "type: str"),
        ("value: string", "value: str"),
        ("expected a sequence", "expected a list"),
        ("expected a map", "expected a dict"),
        ("expected a borrowed string", "expected a str"),
        ("expected a string", "expected a str"),
        ("expected a boolean", "expected a bool"),
        ("expected unit", "expected None"),
        ("expected u8", "expected an int from 0 to 255"),
        ("expected u16", "expected an int from 0 to 65535"),
        ("expected u32", "expected an int from 0 to 4294967295"),
        ("expected u64", "expected an int from 0 to 2**64-1"),
        ("expected i64", "expected an int"),
        ("expected i32", "expected an int"),
    ] {
        if s.contains(cli) {
            s = s.replace(cli, py);
        }
    }
    serde_values(&pythonize_types(&s))
}

/// serde's ``integer `5` as u128``, ``floating point `1.5` ``, ``boolean `true` `` as
/// Python's `int 5`, `float 1.5`, `bool True`.
fn serde_values(message: &str) -> String {
    let mut s = message.to_string();
    for (serde, py) in [
        ("integer `", "int "),
        ("floating point `", "float "),
        ("boolean `", "bool "),
    ] {
        let mut from = 0;
        while let Some(at) = s.get(from..).and_then(|r| r.find(serde)).map(|i| i + from) {
            let value_at = at + serde.len();
            let Some(len) = s.get(value_at..).and_then(|r| r.find('`')) else {
                break;
            };
            let value = s.get(value_at..value_at + len).unwrap_or_default();
            let value = match value {
                "true" => "True".to_string(),
                "false" => "False".to_string(),
                v => v.to_string(),
            };
            let mut end = value_at + len + 1;
            for suffix in [" as u128", " as i128"] {
                if s.get(end..).is_some_and(|r| r.starts_with(suffix)) {
                    end += suffix.len();
                }
            }
            let text = format!("{py}{value}");
            s.replace_range(at..end, &text);
            from = at + text.len();
        }
    }
    s
}

/// pythonize's ``unexpected type: 'dict' object cannot be converted to 'Sequence'`` as
/// `wrong type: dict, expected a list`.
fn pythonize_types(message: &str) -> String {
    const HEAD: &str = "unexpected type: '";
    const MID: &str = "' object cannot be converted to '";
    let Some(at) = message.find(HEAD) else {
        return message.to_string();
    };
    let rest = message.get(at + HEAD.len()..).unwrap_or_default();
    let Some((found, rest)) = rest.split_once(MID) else {
        return message.to_string();
    };
    let Some((wanted, tail)) = rest.split_once('\'') else {
        return message.to_string();
    };
    let wanted = match wanted {
        "Sequence" | "PyList" | "PySequence" => "a list",
        "Mapping" | "PyDict" | "PyMapping" => "a dict",
        "PyString" => "a str",
        "PyInt" | "PyLong" => "an int",
        "PyFloat" => "a float",
        "PyBool" => "a bool",
        other => other,
    };
    format!(
        "{}wrong type: {found}, expected {wanted}{tail}",
        message.get(..at).unwrap_or_default()
    )
}

/// A `SpecError` carrying `key`.
pub(crate) fn spec_error(py: Python<'_>, key: &str, message: &str) -> PyErr {
    let err = match classes(py) {
        Ok(c) => PyErr::from_type(c.spec.bind(py).clone(), python_words(message)),
        Err(e) => return e,
    };
    let _ = err.value(py).setattr("key", key);
    err
}

/// An `UnsafeTargetError` (a `PermissionError` with `EPERM`) for `path`: `strerror` is the
/// reason, `str(e)` the whole message.
pub(crate) fn unsafe_target(py: Python<'_>, path: Option<&Path>, message: &str) -> PyErr {
    let message = python_words(message);
    let c = match classes(py) {
        Ok(c) => c,
        Err(e) => return e,
    };
    let reason = path
        .map(blockwise_geometry::display_path)
        .and_then(|p| message.strip_prefix(p.as_str()))
        .map(|r| r.trim_start_matches(':').trim_start().to_string())
        .unwrap_or_else(|| message.clone());
    let err = match path {
        Some(p) => PyErr::from_type(
            c.unsafe_target.bind(py).clone(),
            (EPERM, reason, p.as_os_str().to_os_string()),
        ),
        None => PyErr::from_type(c.unsafe_target.bind(py).clone(), (EPERM, reason)),
    };
    let _ = err.value(py).setattr("message", message);
    err
}

/// A `CorruptImageError` naming `path` (also its `.filename`).
pub(crate) fn corrupt(py: Python<'_>, path: Option<&Path>, message: &str) -> PyErr {
    let err = match classes(py) {
        Ok(c) => PyErr::from_type(c.corrupt.bind(py).clone(), python_words(message)),
        Err(e) => return e,
    };
    if let Some(p) = path {
        let _ = err
            .value(py)
            .setattr("filename", p.as_os_str().to_os_string());
    }
    err
}

/// An `UnsupportedError`.
pub(crate) fn unsupported(py: Python<'_>, message: &str) -> PyErr {
    match classes(py) {
        Ok(c) => PyErr::from_type(c.unsupported.bind(py).clone(), python_words(message)),
        Err(e) => e,
    }
}

/// A `CancelledError`.
pub(crate) fn cancelled(py: Python<'_>, message: &str) -> PyErr {
    match classes(py) {
        Ok(c) => PyErr::from_type(c.cancelled.bind(py).clone(), python_words(message)),
        Err(e) => e,
    }
}

/// Issues each of `warnings` as a `BlockwiseWarning`.
pub(crate) fn warn_all(py: Python<'_>, warnings: &[String]) -> PyResult<()> {
    let c = classes(py)?;
    for w in warnings {
        let text = python_words(w).replace('\0', " ");
        let text = std::ffi::CString::new(text).unwrap_or_default();
        PyErr::warn(py, c.warning.bind(py), &text, 2)?;
    }
    Ok(())
}

/// `EPERM`, "operation not permitted": the errno of a refused target.
const EPERM: i32 = 1;
/// `ENOENT`: no such file or directory.
pub(crate) const ENOENT: i32 = 2;
/// `EIO`: a device failure that came without an errno (a read-back mismatch).
pub(crate) const EIO: i32 = 5;
/// `ENOTBLK`, "block device required": a path given to `probe` that is something else.
pub(crate) const ENOTBLK: i32 = 15;
/// `ENOTDIR`: a file where a directory is needed (the output's directory).
const ENOTDIR: i32 = 20;
/// `EISDIR`: a directory where a file is needed.
pub(crate) const EISDIR: i32 = 21;
/// `EINVAL`: a path that cannot be used for what was asked (a device as a build output).
pub(crate) const EINVAL: i32 = 22;
/// `ENOSPC`: the device ended before the image.
pub(crate) const ENOSPC: i32 = 28;
/// `ESTALE`: an input changed while the build ran.
const ESTALE: i32 = 116;

/// The OS's text for `errno`, without Rust's `(os error N)`.
pub(crate) fn strerror(errno: i32) -> String {
    python_words(&std::io::Error::from_raw_os_error(errno).to_string())
}

/// The errno of `io`, or one for its kind when it has none.
pub(crate) fn errno_of(io: &std::io::Error) -> Option<i32> {
    use std::io::ErrorKind as K;
    io.raw_os_error().or(match io.kind() {
        K::NotFound => Some(ENOENT),
        K::PermissionDenied => Some(13),
        K::AlreadyExists => Some(17),
        K::NotADirectory => Some(20),
        K::IsADirectory => Some(EISDIR),
        K::InvalidInput => Some(EINVAL),
        K::StorageFull => Some(ENOSPC),
        K::UnexpectedEof => Some(EIO),
        _ => None,
    })
}

/// The builtin `OSError` subclass for `errno` (`OSError(errno, strerror, filename)`), naming
/// `path` as the caller gave it.
pub(crate) fn os_error(path: &Path, errno: i32, strerror: &str) -> PyErr {
    pyo3::exceptions::PyOSError::new_err((
        errno,
        python_words(strerror),
        path.as_os_str().to_os_string(),
    ))
}

/// An `OSError` for an `io::Error` on `path`: its errno (or one for its kind, else `EIO`),
/// the OS's text, and `extra` (blockwise's words, e.g. `writing at offset 4096`) before it.
pub(crate) fn io_error(path: &Path, io: &std::io::Error, extra: &str) -> PyErr {
    let errno = errno_of(io);
    let text = match io.raw_os_error() {
        Some(code) => strerror(code),
        None => python_words(&io.to_string()),
    };
    let text = if extra.is_empty() {
        text
    } else {
        format!("{extra}: {text}")
    };
    os_error(path, errno.unwrap_or(EIO), &text)
}

/// The Python exception for a host error (not a cancel: the [`crate::cancel::Op`] knows
/// why it stopped).
pub(crate) fn host_error(py: Python<'_>, e: &blockwise_host::Error) -> PyErr {
    use blockwise_host::Error as E;
    use blockwise_image::ErrorKind;
    match e {
        E::Io { path, source } => io_error(path, source, ""),
        E::Write { path, source, note } => {
            let errno = errno_of(source).unwrap_or(EIO);
            let text = match source.raw_os_error() {
                Some(code) => strerror(code),
                None => python_words(&source.to_string()),
            };
            os_error(path, errno, &format!("writing failed: {text}{note}"))
        }
        E::NotUsable { path, what } => {
            // A missing output directory is FileNotFoundError, a file where it should be is
            // NotADirectoryError, a directory given as the output IsADirectoryError.
            let errno = match std::fs::symlink_metadata(path) {
                Err(io) if io.kind() == std::io::ErrorKind::NotFound => ENOENT,
                Ok(_) if path.is_dir() => EISDIR,
                Ok(_) if what.starts_with("is not a directory") => ENOTDIR,
                _ => EINVAL,
            };
            os_error(path, errno, what)
        }
        E::Changed { path, what } => os_error(
            path,
            ESTALE,
            &format!("changed while building ({what}); nothing was written, run the build again"),
        ),
        E::OutputIsInput { output, .. } => unsafe_target(py, Some(output), &e.to_string()),
        E::Cancelled => cancelled(py, &e.to_string()),
        E::F2fs { index, source } => {
            use blockwise_host::f2fs::F2fsError as F;
            let message = e.to_string();
            match source {
                F::Entry { entry, .. } => spec_error(
                    py,
                    &format!("partition[{index}].entry[{entry}].path"),
                    &message,
                ),
                // f2fs-tools is not installed: the one-line reason, as FileNotFoundError.
                F::Missing { .. } => {
                    pyo3::exceptions::PyOSError::new_err((ENOENT, python_words(&message)))
                }
                _ => match find_io(e) {
                    Some(io) => pyo3::exceptions::PyOSError::new_err((
                        errno_of(io).unwrap_or(EIO),
                        python_words(&message),
                    )),
                    None => pyo3::exceptions::PyOSError::new_err((EIO, python_words(&message))),
                },
            }
        }
        _ => {
            let message = e.to_string();
            if let Some(se) = e.spec_error() {
                return spec_error(py, &se.key, &message);
            }
            match e.kind() {
                ErrorKind::Spec => {
                    let key = match e {
                        E::Image(blockwise_image::Error::Partition { index, .. }) => {
                            format!("partition[{index}]")
                        }
                        _ => String::new(),
                    };
                    spec_error(py, &key, &message)
                }
                ErrorKind::Unsupported => unsupported(py, &message),
                _ => match find_io(e) {
                    Some(io) => pyo3::exceptions::PyOSError::new_err((
                        errno_of(io).unwrap_or(EIO),
                        python_words(&message),
                    )),
                    None => pyo3::exceptions::PyOSError::new_err((EIO, python_words(&message))),
                },
            }
        }
    }
}

/// The first `std::io::Error` in `e`'s source chain.
fn find_io<'a>(e: &'a (dyn std::error::Error + 'static)) -> Option<&'a std::io::Error> {
    let mut cur: Option<&(dyn std::error::Error + 'static)> = Some(e);
    for _ in 0..16 {
        let c = cur?;
        if let Some(io) = c.downcast_ref::<std::io::Error>() {
            return Some(io);
        }
        cur = c.source();
    }
    None
}

/// The Python exception for a path `probe` cannot probe: `FileNotFoundError` for a missing
/// path, `OSError` with `ENOTBLK` for anything but a block device, the OS's errno for sysfs
/// problems; `.filename` is the path.
pub(crate) fn probe_error(e: &blockwise_flash::ProbeError) -> PyErr {
    use blockwise_flash::ProbeError as P;
    let message = e.to_string();
    match e {
        P::Missing { path } => os_error(path, ENOENT, &strerror(ENOENT)),
        P::NotBlockDevice { path, .. } => {
            let reason = reason_after(path, &message);
            os_error(path, ENOTBLK, &reason)
        }
        P::Io { path, source } => io_error(path, source, ""),
        P::NoSysfs { path, .. } => {
            let reason = reason_after(path, &message);
            os_error(path, ENODEV, &reason)
        }
        _ => pyo3::exceptions::PyOSError::new_err((EIO, python_words(&message))),
    }
}

/// `ENODEV`: no such device (a block device without a sysfs entry).
const ENODEV: i32 = 19;

/// `message` without the path it starts with (`/dev/x: reason` → `reason`).
pub(crate) fn reason_after(path: &Path, message: &str) -> String {
    let shown = blockwise_geometry::display_path(path);
    message
        .strip_prefix(shown.as_str())
        .or_else(|| message.strip_prefix(&*path.to_string_lossy()))
        .map(|r| r.trim_start_matches(':').trim_start().to_string())
        .unwrap_or_else(|| message.to_string())
}
