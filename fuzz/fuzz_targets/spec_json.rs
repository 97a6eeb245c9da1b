//! A JSON spec (what the Python and wasm bindings pass: a dict / JS object) →
//! `Spec::from_deserializer` → the full plan: errors, never panics, never allocates by an
//! unchecked number.
#![no_main]

use blockwise_image::{plan_full, Spec};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(value) = serde_json::from_slice::<serde_json::Value>(data) else {
        return;
    };
    match Spec::from_deserializer(value, |e| e.to_string()) {
        Ok(spec) => {
            if let Ok(plan) = plan_full(&spec, &[], 0) {
                let _ = (plan.size_bytes, plan.partitions.len());
            }
        }
        Err(e) => {
            let _ = e.to_string();
        }
    }
});
