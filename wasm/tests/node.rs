//! The JS API under node (wasm-bindgen-test): `plan`, `verify` over a `Blob`, `build`, and
//! the JS error names. Run by `wasm/test.sh` through `wasm-bindgen-test-runner`.
#![cfg(target_arch = "wasm32")]

use blockwise_wasm::{build, plan, verify, JsBlob};
use js_sys::{Array, Reflect, Uint8Array};
use wasm_bindgen::{JsCast, JsValue};
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
}

#[wasm_bindgen_test]
fn plan_lists_the_alignment_findings_verify_will_give() {
    let aligned = plan(JsValue::from_str(SPEC)).unwrap();
    assert_eq!(
        Array::from(&get(&aligned, "findings")).length(),
        0,
        "{:?}",
        js_sys::JSON::stringify(&aligned)
    );
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
}

#[wasm_bindgen_test]
fn spec_errors_are_named_and_name_the_key() {
    let e = plan(eval(
        r#"({ image: { size: "64MiB" }, partition: [ { fs: "fat33", size: "fill" } ] })"#,
    ))
    .unwrap_err();
    let (name, message) = name_and_message(&e);
    assert_eq!(name, "SpecError");
    assert!(message.starts_with("partition[1].fs"), "{message}");
}

#[wasm_bindgen_test]
async fn builds_an_image_whose_blob_verifies_aligned() {
    let files = Array::new();
    let f = js_sys::Object::new();
    Reflect::set(&f, &"path".into(), &"config.txt".into()).unwrap();
    Reflect::set(&f, &"data".into(), &Uint8Array::from(&b"hello"[..])).unwrap();
    files.push(&f);
    let img = build(JsValue::from_str(SPEC), files).unwrap();
    assert_eq!(img.size(), 64.0 * 1024.0 * 1024.0);
    let report = verify(img.blob(), eval(r#"({ name: "built.img" })"#))
        .await
        .unwrap();
    assert_eq!(get(&report, "aligned").as_bool(), Some(true));
    assert_eq!(get(&report, "exit_code").as_f64(), Some(0.0));
    assert_eq!(
        get(&report, "source").as_string().as_deref(),
        Some("built.img")
    );
    assert!(get(&report, "stats.bytes_read").as_f64().unwrap() < 1048576.0);
}

#[wasm_bindgen_test]
async fn compressed_images_and_bad_options_are_refused_by_name() {
    let gz: JsBlob = eval("new Blob([new Uint8Array([0x1f, 0x8b, 8, 0, 0, 0])])").unchecked_into();
    let e = verify(gz, JsValue::UNDEFINED).await.unwrap_err();
    let (name, message) = name_and_message(&e);
    assert_eq!(name, "UnsupportedError");
    assert!(message.contains("gzip"), "{message}");
    let empty: JsBlob = eval("new Blob([new Uint8Array(4096)])").unchecked_into();
    let e = verify(empty, eval("({ sectorSize: 1000 })"))
        .await
        .unwrap_err();
    let (name, message) = name_and_message(&e);
    assert_eq!(name, "SpecError");
    assert!(message.starts_with("options.sectorSize"), "{message}");
}
