//! The JS API under node (wasm-bindgen-test): `plan`, `verify` over a `Blob`, `prepareBuild`
//! with its image `Blob` and `.bmap`, the helpers of the Plan form, and the JS error names.
//! Run by `wasm/test.sh` through `wasm-bindgen-test-runner`.
#![cfg(target_arch = "wasm32")]

use blockwise_wasm::{
    erase_block_choices, plan, prepare_build, size_info, suggest_partition, verify, JsBlob,
};
use js_sys::{Array, Reflect, Uint8Array};
use wasm_bindgen::{JsCast, JsValue};
use wasm_bindgen_futures::JsFuture;
use wasm_bindgen_test::wasm_bindgen_test;

const SPEC: &str =
    "[image]\nsize = \"64MiB\"\n[[partition]]\nfs = \"fat32\"\nsize = \"fill\"\nlabel = \"BOOT\"\n";

fn get(v: &JsValue, path: &str) -> JsValue {
    path.split('.').fold(v.clone(), |v, k| {
        Reflect::get(&v, &JsValue::from_str(k)).unwrap()
    })
}

fn name_and_message(e: &JsValue) -> (String, String) {
    let e: &js_sys::Error = e.dyn_ref().expect("an Error");
    (e.name().into(), e.message().into())
}

fn eval(code: &str) -> JsValue {
    js_sys::eval(code).unwrap()
}

#[wasm_bindgen_test]
fn plans_toml_text_and_objects_alike() {
    let from_text = plan(JsValue::from_str(SPEC)).unwrap();
    let from_object = plan(eval(
        r#"({ image: { size: "64MiB" }, partition: [ { fs: "fat32", size: "fill", label: "BOOT" } ] })"#,
    ))
    .unwrap();
    assert_eq!(
        get(&from_text, "partitions.0.start_bytes").as_f64(),
        Some(4194304.0)
    );
    assert_eq!(
        js_sys::JSON::stringify(&from_text).unwrap(),
        js_sys::JSON::stringify(&from_object).unwrap()
    );
    assert_eq!(get(&from_text, "rows.0.index").as_f64(), Some(1.0));
}

#[wasm_bindgen_test]
fn plan_lists_the_alignment_findings_verify_will_give() {
    let aligned = plan(JsValue::from_str(SPEC)).unwrap();
    assert_eq!(Array::from(&get(&aligned, "findings")).length(), 0);
    let off = plan(JsValue::from_str(
        "[image]\nerase-block = \"4MiB\"\n[[partition]]\nfs = \"fat32\"\nsize = \"64MiB\"\nstart = \"1MiB\"\n",
    ))
    .unwrap();
    let findings = Array::from(&get(&off, "findings"));
    assert_eq!(findings.length(), 1);
    assert_eq!(
        get(&findings.get(0), "code").as_string().as_deref(),
        Some("partition-not-erase-aligned")
    );
    assert_eq!(
        get(&off, "rows.0.severity").as_string().as_deref(),
        Some("warning")
    );
}

#[wasm_bindgen_test]
fn spec_errors_are_named_and_carry_their_key() {
    let e = plan(eval(
        r#"({ image: { size: "64MiB" }, partition: [ { fs: "fat32", size: "4XB" } ] })"#,
    ))
    .unwrap_err();
    let (name, message) = name_and_message(&e);
    assert_eq!(name, "SpecError");
    assert!(message.starts_with("partition[1].size: "), "{message}");
    assert_eq!(
        get(&e, "key").as_string().as_deref(),
        Some("partition[1].size")
    );
}

/// Reads `[start, end)` of a blob.
async fn read(blob: &JsBlob, start: f64, end: f64) -> Vec<u8> {
    let buf = JsFuture::from(blob.slice(start, end).array_buffer())
        .await
        .unwrap();
    Uint8Array::new(&buf).to_vec()
}

#[wasm_bindgen_test]
async fn builds_from_blobs_by_reference_verifies_and_hashes_the_bmap() {
    let entries = eval(
        r#"[{ path: "config.txt", size: 5, mtime: 1700000000000 },
            { path: "overlays", dir: true },
            { path: "overlays/a.dtbo", size: 70000 }]"#,
    );
    let files: Array =
        eval(r#"[new Blob(["hello"]), null, new Blob([new Uint8Array(70000).fill(7)])]"#)
            .unchecked_into();
    let job = prepare_build(JsValue::from_str(SPEC), entries, None).unwrap();
    assert_eq!(job.size(), 64.0 * 1024.0 * 1024.0);
    assert_eq!(job.content_bytes(), 70005.0);
    let img = job.image_blob(&files).unwrap();
    assert_eq!(img.size(), job.size());
    // The file's bytes are in the image, where the map put them.
    let all = read(&img, 0.0, img.size()).await;
    assert!(all.windows(5).any(|w| w == b"hello"));
    let again: JsBlob = JsValue::from(&img).unchecked_into();
    let report = verify(again, eval(r#"({ name: "built.img" })"#))
        .await
        .unwrap();
    assert_eq!(get(&report, "aligned").as_bool(), Some(true));
    assert_eq!(
        get(&report, "safe.answer").as_string().as_deref(),
        Some("yes")
    );
    assert_eq!(
        get(&report, "source").as_string().as_deref(),
        Some("built.img")
    );
    assert!(get(&report, "stats.bytes_read").as_f64().unwrap() < 1048576.0);
    // The .bmap, hashed from the image blob in the chunks it asks for.
    let mut h = job.bmap_hasher();
    while let Some(r) = h.next() {
        let bytes = read(&img, r[0], r[1]).await;
        h.feed(&bytes).unwrap();
    }
    assert_eq!(h.done_bytes(), h.total_bytes());
    let text = h.text().unwrap();
    assert!(text.contains("<ImageSize> 67108864 </ImageSize>"), "{text}");
    // A file that changed size since the plan is refused by name.
    let changed: Array =
        eval(r#"[new Blob(["hello!"]), null, new Blob([new Uint8Array(70000)])]"#).unchecked_into();
    let Err(e) = job.image_blob(&changed) else {
        panic!("a changed file was accepted")
    };
    let (name, message) = name_and_message(&e);
    assert_eq!(name, "IoError");
    assert!(message.starts_with("files[0] is 6 bytes now"), "{message}");
    // The .simg, window by window: header, pieces (bytes, or ranges of the image), trailer;
    // with the ranges filled from the image it is what simg2img reads back to the image
    // (here: the sparse header's counts and the image's bytes at each RAW range).
    let mut enc = job.encoder("simg").unwrap();
    let head = enc.header();
    assert_eq!(&head[..4], &0xED26_FF3Au32.to_le_bytes());
    let mut raw_bytes = 0.0;
    let mut saw_hello = false;
    while let Some(w) = enc.next() {
        let bytes = if w[2] == 1.0 {
            read(&img, w[0], w[1]).await
        } else {
            Vec::new()
        };
        for p in enc.pack(&bytes).unwrap().iter() {
            if let Some(r) = p.dyn_ref::<Array>() {
                let (a, b) = (r.get(0).as_f64().unwrap(), r.get(1).as_f64().unwrap());
                raw_bytes += b - a;
                saw_hello |= read(&img, a, b).await.windows(5).any(|w| w == b"hello");
            }
        }
    }
    assert_eq!(enc.done_bytes(), enc.total_bytes());
    let fin = enc.finish().unwrap();
    let header: Uint8Array = get(&fin, "header").unchecked_into();
    assert_eq!(header.length() as usize, head.len());
    // (the 70,000 bytes of 7s are FILL chunks: only blocks with "hello" and metadata are RAW)
    assert!(saw_hello && raw_bytes > 0.0, "{raw_bytes}");
    // Seekable zstd (libzstd compiled to wasm): a frame per window, every piece bytes, and
    // a trailer that is the seek table (a skippable frame ending in the seekable magic).
    let mut enc = job.encoder("zst").unwrap();
    let mut frames = 0;
    while let Some(w) = enc.next() {
        let bytes = if w[2] == 1.0 {
            read(&img, w[0], w[1]).await
        } else {
            Vec::new()
        };
        for p in enc.pack(&bytes).unwrap().iter() {
            let b: Uint8Array = p.dyn_into().expect("seekable zstd pieces are bytes");
            let first = b.to_vec();
            assert_eq!(&first[..4], &0xFD2F_B528u32.to_le_bytes());
            frames += 1;
        }
    }
    assert_eq!(enc.done_bytes(), enc.total_bytes());
    let fin = enc.finish().unwrap();
    let trailer: Uint8Array = get(&fin, "trailer").unchecked_into();
    let t = trailer.to_vec();
    assert!(
        frames > 1 && t.ends_with(&0x8F92_EAB1u32.to_le_bytes()),
        "{frames} frames"
    );
    // An unknown format is named.
    let Err(e) = job.encoder("bz2") else {
        panic!("an unknown format was accepted")
    };
    let (name, message) = name_and_message(&e);
    assert_eq!(name, "SpecError");
    assert!(message.contains("\"simg\" or \"zst\""), "{message}");
}

/// squashfs needs the files' bytes while the image is made: outside a Web Worker (no
/// FileReaderSync, as here under node) a build with files says so; an empty one builds.
#[wasm_bindgen_test]
fn squashfs_reads_files_only_in_a_worker() {
    let spec = JsValue::from_str(
        "[image]\ntable = \"gpt\"\ntimestamp = 1700000000\n[[partition]]\nfs = \"squashfs\"\nsize = \"8MiB\"\n",
    );
    let entries = eval(r#"[{ path: "a.txt", size: 5, partition: 1 }]"#);
    let files: Array = eval(r#"[new Blob(["hello"])]"#).unchecked_into();
    let Err(e) = prepare_build(spec.clone(), entries, Some(files)) else {
        panic!("read files without FileReaderSync")
    };
    let (_, message) = name_and_message(&e);
    assert!(message.contains("Web Worker"), "{message}");
    let job = prepare_build(spec, eval("[]"), None).unwrap();
    assert!(job.size() > 0.0);
}

#[wasm_bindgen_test]
async fn containers_and_bad_options_are_refused_by_name() {
    let gz: JsBlob = eval("new Blob([new Uint8Array([0x1f, 0x8b, 8, 0, 0, 0])])").unchecked_into();
    let e = verify(gz, eval(r#"({ name: "os.img.gz" })"#))
        .await
        .unwrap_err();
    let (name, message) = name_and_message(&e);
    assert_eq!(name, "UnsupportedError");
    assert!(
        message.contains("gzip -dc os.img.gz > image.img"),
        "{message}"
    );
    let empty: JsBlob = eval("new Blob([new Uint8Array(4096)])").unchecked_into();
    let e = verify(empty, eval("({ sectorSize: 1000 })"))
        .await
        .unwrap_err();
    let (name, message) = name_and_message(&e);
    assert_eq!(name, "SpecError");
    assert!(message.starts_with("options.sectorSize"), "{message}");
}

#[wasm_bindgen_test]
fn the_plan_form_helpers_answer_from_rust() {
    let s = size_info("8GiB", Some("image.size".into())).unwrap();
    assert_eq!(get(&s, "bytes").as_f64(), Some(8.0 * 1073741824.0));
    assert_eq!(get(&s, "decimal").as_string().as_deref(), Some("8.59 GB"));
    let e = size_info("8 parsecs", Some("image.size".into())).unwrap_err();
    assert_eq!(get(&e, "key").as_string().as_deref(), Some("image.size"));
    let choices = Array::from(&erase_block_choices().unwrap());
    assert_eq!(choices.length(), 12);
    assert_eq!(
        get(&choices.get(0), "label").as_string().as_deref(),
        Some("128 KiB")
    );
    let s = suggest_partition(JsValue::from_str(
        "[image]\nsize = \"8GiB\"\n[[partition]]\nfs = \"fat32\"\nsize = \"256MiB\"\n[[partition]]\nfs = \"ext4\"\nsize = \"fill\"\n",
    ))
    .unwrap();
    assert_eq!(get(&s, "position").as_f64(), Some(1.0));
    assert_eq!(get(&s, "size").as_string().as_deref(), Some("256MiB"));
}
