//! blockwise in the browser: the pure crates (`blockwise-image`, `blockwise-verify`) behind
//! three wasm-bindgen functions. Nothing is uploaded and nothing is reimplemented in
//! JavaScript.
//!
//! - [`plan`]`(spec)`: a spec (TOML text or a JS object with the TOML's keys) → the plan,
//!   in the JSON shape of `blockwise plan --json`.
//! - [`verify`]`(blob, options)`: checks a `File`/`Blob` reading only the byte ranges the
//!   verifier asks for (`blob.slice()`), so a 32 GiB image costs some KiB
//!   (see [`source`]). Resolves to the report of `blockwise verify --json`, plus the human
//!   text, the verdict and the bytes read.
//! - [`build`]`(spec, files)`: a small image from in-memory files, as a [`BuiltImage`]
//!   whose `blob()` is the image (the holes are shared zero pages, not copies).
//!
//! Errors are JS `Error`s whose `name` is the category: `SpecError` (the message starts
//! with the spec key, e.g. `partition[2].size: …`), `UnsupportedError`, `CorruptImageError`,
//! `IoError`.
//!
//! Everything except the JS glue is plain Rust and is tested on the host too
//! (`cargo test -p blockwise-wasm`); the JS side is tested with wasm-bindgen-test under node
//! and end to end in Chromium (`wasm/test.sh`).

pub mod api;
pub mod source;

use wasm_bindgen::prelude::*;

use crate::api::{Failure, VerifyOptions};
use crate::source::{Fetched, Missing};

#[wasm_bindgen]
extern "C" {
    /// A JS `Blob` (or `File`): read with `slice(start, end).arrayBuffer()`.
    #[wasm_bindgen(js_name = Blob)]
    pub type JsBlob;

    #[wasm_bindgen(constructor, js_class = "Blob")]
    fn new_with_parts(parts: &js_sys::Array, options: &JsValue) -> JsBlob;

    #[wasm_bindgen(method, getter)]
    fn size(this: &JsBlob) -> f64;

    #[wasm_bindgen(method, getter)]
    fn name(this: &JsBlob) -> JsValue;

    #[wasm_bindgen(method)]
    fn slice(this: &JsBlob, start: f64, end: f64) -> JsBlob;

    #[wasm_bindgen(method, js_name = arrayBuffer)]
    fn array_buffer(this: &JsBlob) -> js_sys::Promise;
}

/// A JS `Error` whose `name` is the failure's category.
fn js_error(f: &Failure) -> JsValue {
    let e = js_sys::Error::new(&f.message);
    e.set_name(f.category.name());
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
/// geometry, in the JSON shape of `blockwise plan --json`, plus `toml`, the spec as TOML
/// when it was given as text.
#[wasm_bindgen]
pub fn plan(spec: JsValue) -> Result<JsValue, JsValue> {
    let spec = spec_of(spec).map_err(|f| js_error(&f))?;
    let plan = api::plan(&spec).map_err(|f| js_error(&f))?;
    to_js(&WithFindings::of(&plan))
}

/// A plan with `findings`: the alignment findings `verify` will give the built image (an
/// explicit start off the erase block, …), as `blockwise plan --json` prints them.
#[derive(serde::Serialize)]
struct WithFindings<'a> {
    #[serde(flatten)]
    plan: &'a blockwise_geometry::Plan,
    findings: Vec<blockwise_verify::Finding>,
}

impl<'a> WithFindings<'a> {
    fn of(plan: &'a blockwise_geometry::Plan) -> Self {
        WithFindings {
            plan,
            findings: blockwise_verify::plan_findings(plan),
        }
    }
}

/// Verifies a `File` or `Blob` without loading it: the verifier runs over the ranges read so
/// far and names the next one it needs, which is read with `blob.slice()`; this repeats until
/// it has what it needs (only metadata: some KiB). `options`: `{ eraseBlock: 4194304 or
/// "4MiB", strict: false, sectorSize: 512 | 4096, name: "disk.img" }`, all optional.
/// Compressed images (xz, gzip, zstd, bzip2) are refused with an `UnsupportedError` that
/// says how to decompress them.
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
    let head = fetched.range_for(Missing {
        offset: 0,
        len: source::FETCH_UNIT,
    });
    fetch(&blob, &mut fetched, head, &mut stats).await?;
    let mut magic = [0u8; 8];
    let n = usize::try_from(size.min(8)).unwrap_or(0);
    if let Some(m) = magic.get_mut(..n) {
        use blockwise_geometry::BlockSource as _;
        fetched
            .read_at(0, m)
            .map_err(|e| js_error(&Failure::io(e)))?;
    }
    api::refuse_compressed(&magic, opts.name.as_deref()).map_err(|f| js_error(&f))?;
    let options = opts.to_options().map_err(|f| js_error(&f))?;
    loop {
        match blockwise_verify::verify(&fetched, &options) {
            Ok(report) => return to_js(&api::VerifyOutput::new(&report, stats)),
            Err(missing) => {
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
    #[allow(clippy::cast_precision_loss)]
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

/// An image built by [`build`].
#[wasm_bindgen]
pub struct BuiltImage {
    built: api::Built,
}

#[wasm_bindgen]
impl BuiltImage {
    /// Image size in bytes.
    #[wasm_bindgen(getter)]
    pub fn size(&self) -> f64 {
        #[allow(clippy::cast_precision_loss)]
        let s = self.built.image.size() as f64;
        s
    }

    /// The plan the image follows (JSON shape of `blockwise plan --json`).
    #[wasm_bindgen(getter)]
    pub fn plan(&self) -> Result<JsValue, JsValue> {
        to_js(&WithFindings::of(&self.built.plan))
    }

    /// What the writers skipped or worried about (e.g. a name FAT cannot store).
    #[wasm_bindgen(getter)]
    pub fn warnings(&self) -> Vec<String> {
        self.built.warnings.clone()
    }

    /// Bytes holding data (the rest are zeros).
    #[wasm_bindgen(getter, js_name = dataBytes)]
    pub fn data_bytes(&self) -> f64 {
        #[allow(clippy::cast_precision_loss)]
        let s = self.built.image.data_bytes() as f64;
        s
    }

    /// The image as a `Blob` (`application/octet-stream`): the written extents, with the
    /// holes between them made of one shared zero buffer.
    pub fn blob(&self) -> JsBlob {
        let parts = js_sys::Array::new();
        let zeros = js_sys::Uint8Array::new_with_length(api::ZERO_CHUNK);
        for piece in api::pieces(&self.built.image) {
            match piece {
                api::Part::Data(bytes) => {
                    parts.push(&js_sys::Uint8Array::from(bytes));
                }
                api::Part::Zeros(n) => {
                    let full = n / u64::from(api::ZERO_CHUNK);
                    for _ in 0..full {
                        parts.push(&zeros);
                    }
                    let rest = u32::try_from(n % u64::from(api::ZERO_CHUNK)).unwrap_or(0);
                    if rest > 0 {
                        parts.push(&zeros.subarray(0, rest));
                    }
                }
            }
        }
        let opts = js_sys::Object::new();
        let _ = js_sys::Reflect::set(
            &opts,
            &JsValue::from_str("type"),
            &JsValue::from_str("application/octet-stream"),
        );
        JsBlob::new_with_parts(&parts, &opts)
    }
}

/// Builds a small image in memory. `spec`: TOML text or an object. `files`: an array of
/// `{ path: "boot/config.txt", data: Uint8Array, mtime?: seconds }`. Files go into the
/// partition whose `contents` names their top directory (`boot/config.txt` with
/// `contents = "boot"` becomes `/config.txt`); when no partition names `contents`, all of
/// them go into the first FAT, ext4, EROFS or squashfs partition. Images above 1 GiB are refused
/// (`UnsupportedError`): use the `blockwise` CLI.
#[wasm_bindgen]
pub fn build(spec: JsValue, files: js_sys::Array) -> Result<BuiltImage, JsValue> {
    let spec = spec_of(spec).map_err(|f| js_error(&f))?;
    let mut inputs = Vec::new();
    for (i, f) in files.iter().enumerate() {
        let get = |k: &str| js_sys::Reflect::get(&f, &JsValue::from_str(k)).ok();
        let path = get("path").and_then(|v| v.as_string()).ok_or_else(|| {
            js_error(&Failure::spec(
                format!("files[{i}].path"),
                "missing (a string like \"boot/config.txt\")",
            ))
        })?;
        let data = get("data")
            .filter(|v| v.is_instance_of::<js_sys::Uint8Array>())
            .map(|v| js_sys::Uint8Array::from(v).to_vec())
            .ok_or_else(|| {
                js_error(&Failure::spec(
                    format!("files[{i}].data"),
                    "missing (a Uint8Array)",
                ))
            })?;
        let mtime = get("mtime")
            .and_then(|v| v.as_f64())
            .filter(|t| t.is_finite())
            .map(|t| format!("{:.0}", t.floor()).parse::<i64>().unwrap_or(0));
        inputs.push(api::FileInput { path, data, mtime });
    }
    let built = api::build(&spec, inputs).map_err(|f| js_error(&f))?;
    Ok(BuiltImage { built })
}

/// The largest image [`build`] makes, in bytes.
#[wasm_bindgen(js_name = maxBuildBytes)]
pub fn max_build_bytes() -> f64 {
    #[allow(clippy::cast_precision_loss)]
    let m = api::MAX_BUILD_BYTES as f64;
    m
}

/// The blockwise version.
#[wasm_bindgen]
pub fn version() -> String {
    env!("CARGO_PKG_VERSION").to_string()
}
