//! A JSON spec (what the Python and wasm bindings pass: a dict / JS object) →
//! `Spec::from_deserializer` → the full plan: errors, never panics, never allocates by an
//! unchecked number. `BLOCKWISE_FUZZ_PRINT=1` prints each outcome (triage).
#![no_main]

use blockwise_image::{plan_full, Spec};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(value) = serde_json::from_slice::<serde_json::Value>(data) else {
        return;
    };
    let print = std::env::var_os("BLOCKWISE_FUZZ_PRINT").is_some();
    match Spec::from_deserializer(value, |e| e.to_string()) {
        Ok(spec) => match plan_full(&spec, &[], 0) {
            Ok(plan) if print => {
                eprintln!("plan: {} bytes, {:?}", plan.size_bytes, plan.partitions)
            }
            Err(e) if print => eprintln!("plan error: {e}"),
            _ => {}
        },
        Err(e) if print => eprintln!("spec error: {e}"),
        Err(e) => {
            let _ = e.to_string();
        }
    }
});
