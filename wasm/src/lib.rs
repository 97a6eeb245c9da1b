//! blockwise in the browser: the pure crates (`blockwise-image`, `blockwise-verify`) behind
//! wasm-bindgen functions. Nothing is uploaded and nothing is reimplemented in JavaScript:
//! every number, verdict and finding comes from here.
//!
//! - [`plan`]`(spec)`: a spec (TOML text or a JS object with the TOML's keys) → the plan,
//!   in the JSON shape of `blockwise plan --json`, with the findings verify will give.
//! - [`verify`]`(blob, options)`: checks a `File`/`Blob` reading only the byte ranges the
//!   verifier asks for (`blob.slice()`), so a 32 GiB image costs some KiB
//!   (see [`source`]). Resolves to the report of `blockwise verify --json`, plus the
//!   safe-to-flash answer, the human text and JSON of the CLI, and the bytes read.
//! - [`worker::verify_container`]`(blob, options)`, in a Web Worker: the same for an image
//!   in a container, decoded by `blockwise_container` (the CLI's decoders) over the `Blob`
//!   read with `FileReaderSync`; [`worker::is_container`]`(head)` says which inputs need it.
//! - [`prepare_build`]`(spec, entries)`: plans and assembles an image from the files'
//!   names, sizes and times (see [`build`]); its [`BuildJob::image_blob`] composes the image
//!   as a `Blob` of the metadata and slices of the files themselves, and
//!   [`BuildJob::bmap_hasher`] hashes the `.bmap` from that `Blob`. The page runs this in a
//!   Web Worker (`www/build-worker.js`).
//!
//! Errors are JS `Error`s whose `name` is the category: `SpecError` (the message starts
//! with the spec key, e.g. `partition[2].size: …`, and `error.key` is the key alone),
//! `UnsupportedError`, `CorruptImageError`, `IoError`.
//!
//! Everything except the JS glue is plain Rust and is tested on the host too
//! (`cargo test -p blockwise-wasm`); the JS side is tested with wasm-bindgen-test under node
//! and end to end in Chromium (`wasm/test.sh`).

pub mod api;
pub mod bmap;
pub mod build;
pub mod encode;
pub mod source;
pub mod worker;

use wasm_bindgen::prelude::*;

use crate::api::{Failure, VerifyOptions};
use crate::source::{Fetched, Round};

#[wasm_bindgen]
extern "C" {
    /// A JS `Blob` (or `File`): read with `slice(start, end).arrayBuffer()`.
    #[wasm_bindgen(js_name = Blob)]
    pub type JsBlob;

    #[wasm_bindgen(constructor, js_class = "Blob")]
    fn new_with_parts(parts: &js_sys::Array, options: &JsValue) -> JsBlob;

    /// `blob.size`.
    #[wasm_bindgen(method, getter)]
    pub fn size(this: &JsBlob) -> f64;

    #[wasm_bindgen(method, getter)]
    fn name(this: &JsBlob) -> JsValue;

    /// `blob.slice(start, end)`.
    #[wasm_bindgen(method)]
    pub fn slice(this: &JsBlob, start: f64, end: f64) -> JsBlob;

    /// `blob.arrayBuffer()`.
    #[wasm_bindgen(method, js_name = arrayBuffer)]
    pub fn array_buffer(this: &JsBlob) -> js_sys::Promise;
}

/// A JS `Error` whose `name` is the failure's category.
fn js_error(f: &Failure) -> JsValue {
    let e = js_sys::Error::new(&f.message);
    e.set_name(f.category.name());
    if let Some(k) = &f.key {
        let _ = js_sys::Reflect::set(&e, &JsValue::from_str("key"), &JsValue::from_str(k));
    }
    e.into()
}

fn to_js<T: serde::Serialize + ?Sized>(v: &T) -> Result<JsValue, JsValue> {
    v.serialize(&serde_wasm_bindgen::Serializer::json_compatible())
        .map_err(|e| js_error(&Failure::internal(e.to_string())))
}

/// The spec from TOML text or a JS object.
fn spec_of(spec: JsValue) -> Result<blockwise_image::Spec, Failure> {
    match spec.as_string() {
        Some(text) => api::spec_from_toml(&text),
        None => blockwise_image::Spec::from_deserializer(
            serde_wasm_bindgen::Deserializer::from(spec),
            ToString::to_string,
        )
        .map_err(Failure::from),
    }
}

/// Plans a spec (TOML text or an object with the TOML's keys): layout and filesystem
/// geometry, in the JSON shape of `blockwise plan --json`, plus `findings` (what verify will
/// say of the build) and `rows` (each partition's worst finding).
#[wasm_bindgen]
pub fn plan(spec: JsValue) -> Result<JsValue, JsValue> {
    let spec = spec_of(spec).map_err(|f| js_error(&f))?;
    let plan = api::plan(&spec).map_err(|f| js_error(&f))?;
    to_js(&api::PlanOutput::new(&plan))
}

/// Verifies a `File` or `Blob` without loading it: the verifier runs over the ranges read so
/// far and names the next one it needs, which is read with `blob.slice()`; this repeats until
/// it has what it needs (only metadata: some KiB). `options`: `{ eraseBlock: 4194304 or
/// "4MiB", strict: false, sectorSize: 512 | 4096, name: "disk.img" }`, all optional.
/// Images in a container (xz, gzip, zstd, bzip2, lz4, zip, Android sparse, VM disks) are
/// refused with an `UnsupportedError` that says how to unpack them: check those with
/// [`worker::verify_container`] in a Web Worker ([`worker::is_container`] tells them apart).
#[wasm_bindgen]
pub async fn verify(blob: JsBlob, options: JsValue) -> Result<JsValue, JsValue> {
    let mut opts: VerifyOptions = if options.is_undefined() || options.is_null() {
        VerifyOptions::default()
    } else {
        serde_wasm_bindgen::from_value(options)
            .map_err(|e| js_error(&Failure::spec("options", e.to_string())))?
    };
    if opts.name.is_none() {
        opts.name = blob.name().as_string();
    }
    let size = blob.size();
    if !(size.is_finite() && size >= 0.0) {
        return Err(js_error(&Failure::io("the blob has no size")));
    }
    // A Blob's size is an exact integer below 2^53.
    let size = format!("{size:.0}").parse::<u64>().unwrap_or(0);
    let mut fetched = Fetched::new(size);
    let mut stats = api::ReadStats::default();
    let options = opts.to_options().map_err(|f| js_error(&f))?;
    loop {
        match source::check_round(&fetched, &options).map_err(|f| js_error(&f))? {
            Round::Done(report) => return to_js(&api::VerifyOutput::new(&report, stats)),
            Round::Need(missing) => {
                let range = fetched.range_for(missing);
                api::check_budget(&stats, range).map_err(|f| js_error(&f))?;
                fetch(&blob, &mut fetched, range, &mut stats).await?;
            }
        }
    }
}

/// Reads `[start, end)` of `blob` into `fetched`.
async fn fetch(
    blob: &JsBlob,
    fetched: &mut Fetched,
    (start, end): (u64, u64),
    stats: &mut api::ReadStats,
) -> Result<(), JsValue> {
    // Offsets of a Blob are below 2^53, so they are exact as f64.
    let part = blob.slice(start as f64, end as f64);
    let buf = wasm_bindgen_futures::JsFuture::from(part.array_buffer())
        .await
        .map_err(|e| {
            let why = e
                .dyn_ref::<js_sys::Error>()
                .map_or_else(|| format!("{e:?}"), |e| String::from(e.message()));
            js_error(&Failure::io(format!(
                "reading bytes {start}..{end} failed: {why}"
            )))
        })?;
    let bytes = js_sys::Uint8Array::new(&buf).to_vec();
    if bytes.len() as u64 != end.saturating_sub(start) {
        return Err(js_error(&Failure::io(format!(
            "reading bytes {start}..{end} returned {} bytes (the file changed?)",
            bytes.len()
        ))));
    }
    stats.add(bytes.len() as u64);
    fetched.insert(start, bytes);
    Ok(())
}

/// Size of the shared zero `Blob` the holes of a built image are made of: a 64 GiB image of
/// holes is 4096 references to it, not 64 GiB.
const ZERO_BLOB: u32 = 16 << 20;

fn f64_of(v: u64) -> f64 {
    // Sizes and offsets of images and Blobs are below 2^53: exact as f64.
    v as f64
}

/// A u64 from a JS number that must be a non-negative integer below 2^53.
fn u64_of(v: f64, key: &str) -> Result<u64, Failure> {
    if v.is_finite() && v >= 0.0 && v.fract() == 0.0 && v <= 9_007_199_254_740_992.0 {
        format!("{v:.0}")
            .parse()
            .map_err(|_| Failure::spec(key, format!("{v}: not a byte count")))
    } else {
        Err(Failure::spec(key, format!("{v}: not a byte count")))
    }
}

/// An image planned and assembled by [`prepare_build`]: metadata in memory, file data as
/// references to the entries' files.
#[wasm_bindgen]
pub struct BuildJob {
    job: build::Job,
}

#[wasm_bindgen]
impl BuildJob {
    /// Image size in bytes.
    #[wasm_bindgen(getter)]
    pub fn size(&self) -> f64 {
        f64_of(self.job.size())
    }

    /// The plan it follows (the JSON of `blockwise plan --json`, with `findings` and `rows`).
    #[wasm_bindgen(getter)]
    pub fn plan(&self) -> Result<JsValue, JsValue> {
        to_js(&api::PlanOutput::new(&self.job.plan))
    }

    /// What the writers skipped or worried about (e.g. a name FAT cannot store).
    #[wasm_bindgen(getter)]
    pub fn warnings(&self) -> Vec<String> {
        self.job.warnings.clone()
    }

    /// Metadata bytes held in memory (tables, boot sectors, FATs, inode tables, …).
    #[wasm_bindgen(getter, js_name = metadataBytes)]
    pub fn metadata_bytes(&self) -> f64 {
        f64_of(self.job.map.metadata_bytes())
    }

    /// File bytes placed by reference.
    #[wasm_bindgen(getter, js_name = contentBytes)]
    pub fn content_bytes(&self) -> f64 {
        f64_of(self.job.map.content_bytes())
    }

    /// The image as a `Blob`: metadata bytes, slices of `files` (entry `i`'s file is
    /// `files[i]`; a directory's may be anything) and references to one shared zero `Blob`
    /// for the holes. Nothing is copied but the metadata; the browser reads the files when
    /// the `Blob` is read (downloaded, hashed, checked).
    #[wasm_bindgen(js_name = imageBlob)]
    pub fn image_blob(&self, files: &js_sys::Array) -> Result<JsBlob, JsValue> {
        let parts = js_sys::Array::new();
        let opts = js_sys::Object::new();
        let _ = js_sys::Reflect::set(
            &opts,
            &JsValue::from_str("type"),
            &JsValue::from_str("application/octet-stream"),
        );
        let mut zero: Option<JsBlob> = None;
        for part in self.job.parts() {
            match part {
                build::Part::Bytes(b) => {
                    parts.push(&js_sys::Uint8Array::from(&b[..]));
                }
                build::Part::File {
                    content,
                    offset,
                    len,
                } => {
                    let i = u32::try_from(content).unwrap_or(u32::MAX);
                    let file: JsBlob = files.get(i).dyn_into::<JsBlob>().map_err(|_| {
                        js_error(&Failure::spec(format!("files[{i}]"), "not a File or Blob"))
                    })?;
                    let want = usize::try_from(content)
                        .ok()
                        .and_then(|c| self.job.sizes.get(c))
                        .copied()
                        .unwrap_or(0);
                    if u64_of(file.size(), "size").ok() != Some(want) {
                        return Err(js_error(&Failure::io(format!(
                            "files[{i}] is {} bytes now, but {want} when the image was planned (the file changed?)",
                            file.size()
                        ))));
                    }
                    parts.push(&file.slice(f64_of(offset), f64_of(offset + len)));
                }
                build::Part::Zeros(n) => {
                    let z = zero.get_or_insert_with(|| {
                        let z = js_sys::Array::of1(&js_sys::Uint8Array::new_with_length(ZERO_BLOB));
                        JsBlob::new_with_parts(&z, &opts)
                    });
                    let chunk = u64::from(ZERO_BLOB);
                    for _ in 0..n / chunk {
                        parts.push(z);
                    }
                    if n % chunk > 0 {
                        parts.push(&z.slice(0.0, f64_of(n % chunk)));
                    }
                }
            }
        }
        Ok(JsBlob::new_with_parts(&parts, &opts))
    }

    /// The dm-verity root hashes: `[[name, hex], …]`, what `blockwise build` writes to
    /// `OUT.roothash` (one tree) or `OUT.NAME.roothash` (several).
    #[wasm_bindgen(getter, js_name = rootHashes)]
    pub fn root_hashes(&self) -> Result<JsValue, JsValue> {
        to_js(&self.job.root_hashes)
    }

    /// An encoder of the image as `"simg"` (Android sparse) or `"zst"` (seekable zstd), the
    /// CLI's `-o x.simg` / `-o x.img.zst` byte for byte: see [`ImageEncoder`]. A format this
    /// build cannot write is an `UnsupportedError` (seekable zstd: the page's build leaves
    /// out the container crate's zstd encoder).
    pub fn encoder(&self, format: &str) -> Result<ImageEncoder, JsValue> {
        let f = match format {
            "simg" => blockwise_container::encode::Format::AndroidSparse,
            "zst" => blockwise_container::encode::Format::SeekableZstd,
            other => {
                return Err(js_error(&Failure::spec(
                    "format",
                    format!("{other:?}: \"simg\" or \"zst\""),
                )))
            }
        };
        let plan = &self.job.plan;
        let e = encode::ImageEncoder::new(
            &self.job.map,
            f,
            plan.erase_block_bytes,
            plan.sector_bytes.bytes_u64(),
        )
        .map_err(|f| js_error(&f))?;
        Ok(ImageEncoder { e })
    }

    /// A hasher for the image's `.bmap`: read `next()` from the image `Blob`, `feed()` it,
    /// until `next()` is `undefined`; then `text()`. Or feed it spans in order with
    /// `feedSpan(offset, bytes)` (each mapped window an encoder reads).
    #[wasm_bindgen(js_name = bmapHasher)]
    pub fn bmap_hasher(&self) -> BmapHasher {
        BmapHasher {
            h: bmap::BmapHasher::new(&self.job.map),
        }
    }
}

/// Hashes a built image's `.bmap` from chunks of the image read in order.
#[wasm_bindgen]
pub struct BmapHasher {
    h: bmap::BmapHasher,
}

#[wasm_bindgen]
impl BmapHasher {
    /// The next `[start, end]` of the image to read and feed, or `undefined` when done.
    pub fn next(&self) -> Option<Vec<f64>> {
        self.h.next().map(|(s, e)| vec![f64_of(s), f64_of(e)])
    }

    /// Hashes the bytes `next()` named.
    pub fn feed(&mut self, bytes: &[u8]) -> Result<(), JsValue> {
        self.h
            .feed(bytes)
            .map_err(|m| js_error(&Failure::internal(m)))
    }

    /// Hashes what the ranges still to hash have in `bytes`, the image's bytes at `offset`
    /// (spans in order, covering every mapped byte).
    #[wasm_bindgen(js_name = feedSpan)]
    pub fn feed_span(&mut self, offset: f64, bytes: &[u8]) -> Result<(), JsValue> {
        let offset = u64_of(offset, "offset").map_err(|f| js_error(&f))?;
        self.h
            .feed_span(offset, bytes)
            .map_err(|m| js_error(&Failure::internal(m)))
    }

    /// Bytes hashed so far.
    #[wasm_bindgen(getter, js_name = doneBytes)]
    pub fn done_bytes(&self) -> f64 {
        f64_of(self.h.done_bytes())
    }

    /// Bytes to hash in all.
    #[wasm_bindgen(getter, js_name = totalBytes)]
    pub fn total_bytes(&self) -> f64 {
        f64_of(self.h.total_bytes())
    }

    /// The `.bmap` file (bmaptool 2.0, as `blockwise build --bmap` writes it).
    pub fn text(&self) -> Result<String, JsValue> {
        self.h.text().map_err(|m| js_error(&Failure::internal(m)))
    }
}

/// Encodes a built image window by window (one erase block each):
/// `header()`; then while `next()` gives `[start, end, mapped]`, read those bytes of the
/// image (`mapped` false: none) and `pack(bytes)`, which gives the output's next pieces —
/// `Uint8Array`s and `[start, end]` ranges of the image itself (the data of Android sparse
/// RAW chunks, so the page composes the `.simg` from slices of the image `Blob`); then
/// `finish()` → `{ header, trailer }`: write `header` over the start and append `trailer`.
#[wasm_bindgen]
pub struct ImageEncoder {
    e: encode::ImageEncoder,
}

#[wasm_bindgen]
impl ImageEncoder {
    /// The bytes the output starts with (rewritten by `finish().header`).
    pub fn header(&self) -> Vec<u8> {
        self.e.header()
    }

    /// The next window: `[start, end, mapped]`, or `undefined` when every window is packed.
    pub fn next(&self) -> Option<Vec<f64>> {
        self.e
            .next_window()
            .map(|(s, e, m)| vec![f64_of(s), f64_of(e), if m { 1.0 } else { 0.0 }])
    }

    /// Image bytes of the mapped windows packed so far.
    #[wasm_bindgen(getter, js_name = doneBytes)]
    pub fn done_bytes(&self) -> f64 {
        f64_of(self.e.progress().0)
    }

    /// Image bytes of all mapped windows.
    #[wasm_bindgen(getter, js_name = totalBytes)]
    pub fn total_bytes(&self) -> f64 {
        f64_of(self.e.progress().1)
    }

    /// Packs the window `next()` named: the output's next pieces.
    pub fn pack(&mut self, bytes: &[u8]) -> Result<js_sys::Array, JsValue> {
        let out = js_sys::Array::new();
        for p in self.e.pack(bytes).map_err(|f| js_error(&f))? {
            match p {
                encode::OutPiece::Bytes(b) => out.push(&js_sys::Uint8Array::from(b.as_slice())),
                encode::OutPiece::Image(s, e) => out.push(&js_sys::Array::of2(
                    &JsValue::from_f64(f64_of(s)),
                    &JsValue::from_f64(f64_of(e)),
                )),
            };
        }
        Ok(out)
    }

    /// Ends the encoding: `{ header, trailer, units, outputBytes }`.
    pub fn finish(&mut self) -> Result<JsValue, JsValue> {
        let (header, trailer, summary) = self.e.finish().map_err(|f| js_error(&f))?;
        let o = js_sys::Object::new();
        let set = |k: &str, v: &JsValue| js_sys::Reflect::set(&o, &JsValue::from_str(k), v);
        set(
            "header",
            &js_sys::Uint8Array::from(header.as_slice()).into(),
        )?;
        set(
            "trailer",
            &js_sys::Uint8Array::from(trailer.as_slice()).into(),
        )?;
        set("units", &JsValue::from_f64(f64_of(summary.units)))?;
        set(
            "outputBytes",
            &JsValue::from_f64(f64_of(summary.output_bytes)),
        )?;
        Ok(o.into())
    }
}

/// One entry of [`prepare_build`], from JS.
#[derive(serde::Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct EntryIn {
    path: String,
    #[serde(default)]
    size: f64,
    #[serde(default)]
    mtime: Option<f64>,
    #[serde(default)]
    partition: Option<usize>,
    #[serde(default)]
    dir: bool,
}

/// Plans and assembles an image. `spec`: TOML text or an object.
/// `entries`: `[{ path, size, mtime?, partition?, dir? }]` — `mtime` in ms
/// (`File.lastModified`), `partition` 1-based (else the path starts with a partition's
/// `contents`), `dir: true` for a directory. Entry `i`'s file is `files[i]` of
/// [`BuildJob::image_blob`]. FAT, exFAT and ext4 partitions are made from the names, sizes
/// and times alone; squashfs, EROFS and dm-verity need the files' bytes: pass `files` (the
/// same array) and call this in a Web Worker, which reads them with `FileReaderSync`.
#[wasm_bindgen(js_name = prepareBuild)]
pub fn prepare_build(
    spec: JsValue,
    entries: JsValue,
    files: Option<js_sys::Array>,
) -> Result<BuildJob, JsValue> {
    let spec = spec_of(spec).map_err(|f| js_error(&f))?;
    let raw: Vec<EntryIn> = serde_wasm_bindgen::from_value(entries)
        .map_err(|e| js_error(&Failure::spec("files", e.to_string())))?;
    let mut list = Vec::with_capacity(raw.len());
    for (i, e) in raw.into_iter().enumerate() {
        let size = u64_of(e.size, &format!("files[{i}].size")).map_err(|f| js_error(&f))?;
        let mtime_ms = e
            .mtime
            .filter(|t| t.is_finite())
            .map(|t| format!("{:.0}", t.floor()).parse::<i64>().unwrap_or(0));
        list.push(build::FileEntry {
            path: e.path,
            size,
            mtime_ms,
            partition: e.partition,
            dir: e.dir,
        });
    }
    let job = match files {
        Some(files) => build::prepare_with(&spec, &list, &worker::SyncFiles::new(files)),
        None => build::prepare(&spec, &list),
    }
    .map_err(|f| js_error(&f))?;
    Ok(BuildJob { job })
}

/// Reads a size as the spec does: `{ bytes, binary: "7.45 GiB", decimal: "8 GB" }`. A bad
/// size is a `SpecError` whose key is `key` (default `size`).
#[wasm_bindgen(js_name = sizeInfo)]
pub fn size_info(text: &str, key: Option<String>) -> Result<JsValue, JsValue> {
    let key = key.unwrap_or_else(|| "size".into());
    let info = api::size_info(text, &key).map_err(|f| js_error(&f))?;
    to_js(&info)
}

/// The erase blocks the page offers: `[{ bytes, label }]`, every power of two from 128 KiB
/// to 256 MiB.
#[wasm_bindgen(js_name = eraseBlockChoices)]
pub fn erase_block_choices() -> Result<JsValue, JsValue> {
    #[derive(serde::Serialize)]
    struct Choice {
        bytes: u64,
        label: String,
    }
    let list: Vec<Choice> = api::erase_block_choices()
        .into_iter()
        .map(|(bytes, label)| Choice { bytes, label })
        .collect();
    to_js(&list)
}

/// Where "Add partition" puts a new partition and how big, so that `spec` stays valid:
/// `{ position, fs, size }`.
#[wasm_bindgen(js_name = suggestPartition)]
pub fn suggest_partition(spec: JsValue) -> Result<JsValue, JsValue> {
    let spec = spec_of(spec).map_err(|f| js_error(&f))?;
    let s = api::suggest_partition(&spec).map_err(|f| js_error(&f))?;
    to_js(&s)
}

/// The blockwise version.
#[wasm_bindgen]
pub fn version() -> String {
    env!("CARGO_PKG_VERSION").to_string()
}
