//! A TOML spec → `Spec::from_toml` → the full plan (`plan_full`, what `blockwise plan` runs
//! after reading contents) and its `plan_findings`: errors, never panics, never allocates by
//! an unchecked number. `BLOCKWISE_FUZZ_PRINT=1` prints each outcome (triage).
#![no_main]

use blockwise_image::{plan_full, Spec};
use blockwise_verify::plan_findings;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let print = std::env::var_os("BLOCKWISE_FUZZ_PRINT").is_some();
    match Spec::from_toml(text) {
        Ok(spec) => match plan_full(&spec, &[], 0) {
            Ok(plan) => {
                // What `plan --json` adds: the alignment findings verify will give the build.
                let findings = plan_findings(&plan);
                if print {
                    eprintln!(
                        "plan: {} bytes, {:?}, {} findings",
                        plan.size_bytes,
                        plan.partitions,
                        findings.len()
                    )
                }
            }
            Err(e) if print => eprintln!("plan error: {e}"),
            Err(_) => {}
        },
        Err(e) if print => eprintln!("spec error: {e}"),
        Err(e) => {
            let _ = e.to_string();
        }
    }
});
