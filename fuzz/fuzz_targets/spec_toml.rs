//! A TOML spec → `Spec::from_toml` → the full plan (`plan_full`, what `blockwise plan` runs
//! after reading contents): errors, never panics, never allocates by an unchecked number.
#![no_main]

use blockwise_image::{plan_full, Spec};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    match Spec::from_toml(text) {
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
