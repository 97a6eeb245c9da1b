//! Regressions from issue 16's fuzzing (`fuzz/`, targets `spec_toml` and `spec_json`): each
//! holds the minimised input inline.

use blockwise_image::{plan_full, Spec};

/// Plans a TOML spec: the error's key and message, or the plan's size.
fn plan_toml(text: &str) -> Result<u64, (String, String)> {
    let spec = Spec::from_toml(text).map_err(|e| (e.key.clone(), e.to_string()))?;
    plan_full(&spec, &[], 0)
        .map(|p| p.size_bytes)
        .map_err(|e| (String::new(), e.to_string()))
}

/// A 1024 TiB ext4 partition made planning allocate a 32 GiB block bitmap (out of memory);
/// ext4 is now planned up to 2^32 blocks and refused beyond, naming the partition's size.
#[test]
fn r16_ext4_huge_partition_is_refused_not_allocated() {
    let spec = "[image]\nsize = \"1024TiB\"\ntable = \"gpt\"\n[[partition]]\nfs = \"ext4\"\nsize = \"fill\"\n";
    let (_, msg) = plan_toml(spec).unwrap_err();
    assert!(msg.contains("partition[1].size"), "{msg}");
    assert!(msg.contains("at most 4294967296 blocks"), "{msg}");
    // With 1 KiB blocks the same limit is 4 TiB.
    let spec = "[image]\nsize = \"5TiB\"\ntable = \"gpt\"\n[[partition]]\nfs = \"ext4\"\nsize = \"fill\"\next4 = { block-size = 1024 }\n";
    let (_, msg) = plan_toml(spec).unwrap_err();
    assert!(
        msg.contains("partition[1].size") && msg.contains("4 TiB"),
        "{msg}"
    );
}
