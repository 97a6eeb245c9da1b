//! Check of an image in a container, in a Web Worker: the container is read with
//! `FileReaderSync` (synchronous `Blob` reads, which only workers have), so
//! `blockwise_container`'s decoders — the CLI's own, compiled to wasm — run over the `Blob`
//! exactly as they run over a file: random access through the Android sparse chunk map, the
//! zstd seek table or the xz index; forward passes over a stream (gzip, plain xz/zstd,
//! bzip2, lz4, a deflated zip entry) keeping only the blocks verify asks for. Nothing is
//! unpacked to memory or disk; what was read is counted.

use std::cell::Cell;

use blockwise_container::verify::{report_human, report_json, verify as verify_any, VerifyError};
use blockwise_container::{Error as ContainerError, Format};
use blockwise_geometry::BlockSource;
use wasm_bindgen::prelude::*;

use crate::api::{self, Category, Failure, ReadStats};
use crate::JsBlob;

#[wasm_bindgen]
extern "C" {
    /// `FileReaderSync` (dedicated workers only).
    type FileReaderSync;

    #[wasm_bindgen(constructor, catch)]
    fn new() -> Result<FileReaderSync, JsValue>;

    #[wasm_bindgen(method, catch, js_name = readAsArrayBuffer)]
    fn read_as_array_buffer(
        this: &FileReaderSync,
        blob: &JsBlob,
    ) -> Result<js_sys::ArrayBuffer, JsValue>;
}

/// A read of the `Blob` failed.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct BlobError(String);

/// Reads shorter than this fetch this much from their offset on, kept for the next small
/// reads: a container's own structures are read in pieces of a few bytes (an Android sparse
/// image's chunk headers, 12 bytes each, one read per chunk), and every `FileReaderSync`
/// call costs about a millisecond whatever its size (8,321 chunk headers of a 32 GiB
/// `.simg` took 7.5 s one by one, 0.1 s read ahead).
const READ_AHEAD: u64 = 64 << 10;

/// A `Blob` as a [`BlockSource`], read synchronously, counting what it reads.
struct SyncBlob {
    blob: JsBlob,
    reader: FileReaderSync,
    size: u64,
    stats: Cell<ReadStats>,
    /// The last read-ahead block: its offset and bytes.
    ahead: std::cell::RefCell<(u64, Vec<u8>)>,
}

impl BlockSource for SyncBlob {
    type Error = BlobError;

    fn len(&self) -> u64 {
        self.size
    }

    fn read_at(&self, offset: u64, buf: &mut [u8]) -> Result<(), BlobError> {
        let want = buf.len() as u64;
        if want >= READ_AHEAD {
            return self.read_blob(offset, buf);
        }
        {
            let ahead = self.ahead.borrow();
            let from = usize::try_from(offset.wrapping_sub(ahead.0)).ok();
            let hit = (offset >= ahead.0)
                .then_some(from)
                .flatten()
                .and_then(|f| ahead.1.get(f..f.checked_add(buf.len())?));
            if let Some(src) = hit {
                buf.copy_from_slice(src);
                return Ok(());
            }
        }
        let end = offset
            .saturating_add(READ_AHEAD)
            .min(self.size)
            .max(offset.saturating_add(want));
        let mut block = vec![0u8; usize::try_from(end.saturating_sub(offset)).unwrap_or(0)];
        self.read_blob(offset, &mut block)?;
        let src = block
            .get(..buf.len())
            .ok_or_else(|| BlobError("read-ahead block".into()))?;
        buf.copy_from_slice(src);
        *self.ahead.borrow_mut() = (offset, block);
        Ok(())
    }
}

impl SyncBlob {
    /// Fills `buf` from the `Blob` at `offset`: one `FileReaderSync` read, counted.
    fn read_blob(&self, offset: u64, buf: &mut [u8]) -> Result<(), BlobError> {
        let end = offset
            .checked_add(buf.len() as u64)
            .filter(|&e| e <= self.size)
            .ok_or_else(|| {
                BlobError(format!(
                    "reading bytes {offset}..+{} of a {}-byte file",
                    buf.len(),
                    self.size
                ))
            })?;
        let part = self.blob.slice(crate::f64_of(offset), crate::f64_of(end));
        let ab = self.reader.read_as_array_buffer(&part).map_err(|e| {
            let why = e
                .dyn_ref::<js_sys::Error>()
                .map_or_else(|| format!("{e:?}"), |e| String::from(e.message()));
            BlobError(format!("reading bytes {offset}..{end} failed: {why}"))
        })?;
        let bytes = js_sys::Uint8Array::new(&ab);
        if bytes.length() as usize != buf.len() {
            return Err(BlobError(format!(
                "reading bytes {offset}..{end} returned {} bytes (the file changed?)",
                bytes.length()
            )));
        }
        bytes.copy_to(buf);
        let mut s = self.stats.get();
        s.add(buf.len() as u64);
        self.stats.set(s);
        Ok(())
    }
}

/// True when `head` (the input's first bytes, 16 bytes suffice) starts a container the
/// worker decodes (xz, gzip, zstd, bzip2, lz4, zip, Android sparse) — the recogniser's own
/// answer, so the page sends exactly those to [`verify_container`].
#[wasm_bindgen(js_name = isContainer)]
#[must_use]
pub fn is_container(head: &[u8]) -> bool {
    matches!(
        blockwise_container::recognise::recognise_bytes(head, &[], head.len() as u64),
        Format::Container(_)
    )
}

/// Verifies a `File`/`Blob` holding an image in a container, synchronously: call it in a
/// Web Worker (it reads with `FileReaderSync`). `options` as for `verify`. Resolves to what
/// `verify` resolves to, with `container` (`"zstd"`, `"Android sparse"`, …), `containerInfo`
/// (the CLI's JSON `container` field: seekable, bytes read, passes), and `human`/`json` as
/// `blockwise verify` prints them for the container. A plain image works too (no
/// container), a format blockwise refuses (tar, qcow2, …) is an `UnsupportedError` naming it.
///
/// `progress`, when given, is called as `progress(bytesRead, fileSize)` at most every
/// 200 ms while the file is read (a stream decoded forward reads it once or twice whole:
/// a 32 GiB `.img.gz` takes half a minute).
#[wasm_bindgen(js_name = verifyContainer)]
pub fn verify_container(
    blob: JsBlob,
    options: JsValue,
    progress: Option<js_sys::Function>,
) -> Result<JsValue, JsValue> {
    let mut opts: api::VerifyOptions = if options.is_undefined() || options.is_null() {
        api::VerifyOptions::default()
    } else {
        serde_wasm_bindgen::from_value(options)
            .map_err(|e| crate::js_error(&Failure::spec("options", e.to_string())))?
    };
    if opts.name.is_none() {
        opts.name = blob.name().as_string();
    }
    let size = crate::u64_of(blob.size(), "blob.size").map_err(|f| crate::js_error(&f))?;
    let options = opts.to_options().map_err(|f| crate::js_error(&f))?;
    let reader = FileReaderSync::new().map_err(|_| {
        crate::js_error(&Failure::unsupported(
            "verifyContainer reads with FileReaderSync, which only Web Workers have: call it in a worker",
        ))
    })?;
    let src = SyncBlob {
        blob,
        reader,
        size,
        stats: Cell::new(ReadStats::default()),
        ahead: std::cell::RefCell::new((0, Vec::new())),
    };
    // The decoders own their input; the counts are read back through a shared cell.
    let counted = std::rc::Rc::new(Cell::new(ReadStats::default()));
    let src = Counted {
        inner: src,
        out: counted.clone(),
        progress,
        last_report: Cell::new(js_sys::Date::now()),
    };
    let (report, info) = verify_any(src, &options).map_err(|e| {
        crate::js_error(&match e {
            VerifyError::Refused(r) => Failure::unsupported(format!("{}: {}", r.what, r.hint)),
            VerifyError::Decode(d) => {
                let category = match &d {
                    ContainerError::Input(_) => Category::Io,
                    ContainerError::Unsupported { .. } | ContainerError::Limit { .. } => {
                        Category::Unsupported
                    }
                    _ => Category::CorruptImage,
                };
                Failure {
                    category,
                    message: d.to_string(),
                    key: None,
                }
            }
            other => Failure::io(other.to_string()),
        })
    })?;
    let mut out = api::VerifyOutput::new(&report, counted.get());
    out.container = info.as_ref().map(|i| i.container.name().to_string());
    out.human = report_human(&report, info.as_ref());
    out.json = report_json(&report, info.as_ref())
        .ok()
        .and_then(|v| serde_json::to_string_pretty(&v).ok())
        .unwrap_or_default();
    let v = crate::to_js(&out)?;
    if let Some(info) = &info {
        let i = crate::to_js(info)?;
        js_sys::Reflect::set(&v, &JsValue::from_str("containerInfo"), &i)?;
    }
    Ok(v)
}

/// The source, copying its counts out after every read and reporting progress.
struct Counted {
    inner: SyncBlob,
    out: std::rc::Rc<Cell<ReadStats>>,
    progress: Option<js_sys::Function>,
    /// When progress was last reported (`Date.now()`, ms).
    last_report: Cell<f64>,
}

/// Least time between two progress reports, in ms.
const PROGRESS_EVERY_MS: f64 = 200.0;

impl BlockSource for Counted {
    type Error = BlobError;

    fn len(&self) -> u64 {
        self.inner.len()
    }

    fn read_at(&self, offset: u64, buf: &mut [u8]) -> Result<(), BlobError> {
        let r = self.inner.read_at(offset, buf);
        let stats = self.inner.stats.get();
        self.out.set(stats);
        if let Some(f) = &self.progress {
            let now = js_sys::Date::now();
            if now - self.last_report.get() >= PROGRESS_EVERY_MS {
                self.last_report.set(now);
                // A throwing callback only loses its progress line, never the check.
                let _ = f.call2(
                    &JsValue::NULL,
                    &JsValue::from_f64(crate::f64_of(stats.bytes_read)),
                    &JsValue::from_f64(crate::f64_of(self.inner.size)),
                );
            }
        }
        r
    }
}

/// The dropped files as a [`ContentSource`] (content id `i` = `files[i]`), read
/// synchronously with `FileReaderSync`: the build's squashfs, EROFS and dm-verity writers
/// read file bytes while the image is made. Only in a Web Worker; elsewhere a read fails
/// with a message saying so (FAT, exFAT and ext4 builds read nothing).
pub(crate) struct SyncFiles {
    files: js_sys::Array,
    reader: Option<FileReaderSync>,
}

impl SyncFiles {
    pub(crate) fn new(files: js_sys::Array) -> Self {
        SyncFiles {
            files,
            reader: FileReaderSync::new().ok(),
        }
    }
}

impl blockwise_geometry::ContentSource for SyncFiles {
    fn read_at(
        &self,
        content: u64,
        offset: u64,
        buf: &mut [u8],
    ) -> Result<(), blockwise_geometry::ContentError> {
        let err = |message: String| blockwise_geometry::ContentError { content, message };
        let reader = self.reader.as_ref().ok_or_else(|| {
            err("reading the files' bytes (squashfs, EROFS, dm-verity) needs a Web Worker (FileReaderSync): build in the page's worker".into())
        })?;
        let i = u32::try_from(content).map_err(|_| err("no such file".into()))?;
        let file: JsBlob = self
            .files
            .get(i)
            .dyn_into::<JsBlob>()
            .map_err(|_| err(format!("files[{i}] is not a File or Blob")))?;
        let size = crate::u64_of(file.size(), "size").map_err(|f| err(f.message))?;
        let end = offset
            .checked_add(buf.len() as u64)
            .filter(|&e| e <= size)
            .ok_or_else(|| {
                err(format!(
                    "reading bytes {offset}..+{} of files[{i}], a {size}-byte file (the file changed?)",
                    buf.len()
                ))
            })?;
        let part = file.slice(crate::f64_of(offset), crate::f64_of(end));
        let ab = reader.read_as_array_buffer(&part).map_err(|e| {
            let why = e
                .dyn_ref::<js_sys::Error>()
                .map_or_else(|| format!("{e:?}"), |e| String::from(e.message()));
            err(format!("reading files[{i}] failed: {why}: a file changed or was removed after it was chosen; choose the folder again"))
        })?;
        let bytes = js_sys::Uint8Array::new(&ab);
        if bytes.length() as usize != buf.len() {
            return Err(err(format!(
                "reading bytes {offset}..{end} of files[{i}] returned {} bytes (the file changed?)",
                bytes.length()
            )));
        }
        bytes.copy_to(buf);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::is_container;

    #[test]
    fn containers_by_their_first_bytes() {
        for head in [
            &[0xfd, b'7', b'z', b'X', b'Z', 0][..],
            &[0x1f, 0x8b, 8, 0],
            &[0x28, 0xb5, 0x2f, 0xfd, 0],
            b"BZh91AY&SY",
            &[0x04, 0x22, 0x4d, 0x18],
            b"PK\x03\x04",
            &[
                0x3a, 0xff, 0x26, 0xed, 1, 0, 0, 0, 28, 0, 12, 0, 0, 0x10, 0, 0,
            ],
        ] {
            assert!(is_container(head), "{head:02x?}");
        }
        let mut mbr = vec![0u8; 512];
        mbr[510] = 0x55;
        mbr[511] = 0xaa;
        for head in [&b"QFI\xfb\0\0\0\x03"[..], &[0xeb, 0x3c, 0x90], &[], &mbr] {
            assert!(!is_container(head), "{head:02x?}");
        }
    }
}
