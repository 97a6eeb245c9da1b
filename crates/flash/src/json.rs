//! The JSON a write reports: what `blockwise write --json` prints and what the Python
//! package's `write` returns.

use serde_json::{json, Value};

use crate::Outcome;

/// A finished (or interrupted) write as JSON: `source` and `target` as the caller names them,
/// the sizes, the [`Stats`](crate::Stats), whether the target was written with O_DIRECT, and
/// the outcome's `interrupted` flag (with `interrupted_verifying` and `verified_bytes`: a
/// cancel during the read-back) and notes.
#[must_use]
pub fn write_json(out: &Outcome, source: &str, target: &str, direct: bool) -> Value {
    let s = &out.stats;
    json!({
        "source": source,
        "target": target,
        "image_bytes": out.image_size,
        "mapped_bytes": out.mapped_bytes,
        "bytes_written": s.bytes_written,
        "offset_reached": out.offset_reached,
        "seconds": s.seconds,
        "mb_per_s": s.mb_per_s,
        "chunk_mb_per_s": {
            "min": s.chunk_mb_per_s.min,
            "median": s.chunk_mb_per_s.median,
            "max": s.chunk_mb_per_s.max,
        },
        "fsync_seconds": s.fsync_seconds,
        "verified": s.verified,
        "verify_mb_per_s": s.verify_mb_per_s,
        "direct": direct,
        "interrupted": out.interrupted,
        "interrupted_verifying": out.interrupted_verifying,
        "verified_bytes": out.verified_bytes,
        "notes": out.notes,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{DeviceInfo, Stats};

    #[test]
    fn keys_in_the_cli_order_and_values() {
        let out = Outcome {
            stats: Stats {
                bytes_written: 8192,
                verified: true,
                verify_mb_per_s: Some(12.5),
                ..Stats::default()
            },
            interrupted: false,
            interrupted_verifying: false,
            verified_bytes: 8192,
            offset_reached: 8192,
            image_size: 16384,
            mapped_bytes: 8192,
            notes: vec!["a note".into()],
        };
        let v = write_json(&out, "a.img", "/dev/sdz", true);
        let keys: Vec<&str> = v
            .as_object()
            .map(|o| o.keys().map(String::as_str).collect())
            .unwrap_or_default();
        assert_eq!(
            keys,
            [
                "source",
                "target",
                "image_bytes",
                "mapped_bytes",
                "bytes_written",
                "offset_reached",
                "seconds",
                "mb_per_s",
                "chunk_mb_per_s",
                "fsync_seconds",
                "verified",
                "verify_mb_per_s",
                "direct",
                "interrupted",
                "interrupted_verifying",
                "verified_bytes",
                "notes"
            ]
        );
        assert_eq!(v["image_bytes"], 16384);
        assert_eq!(v["verify_mb_per_s"], 12.5);
        assert_eq!(v["notes"][0], "a note");
        assert_eq!(v["chunk_mb_per_s"]["median"], 0.0);
    }

    #[test]
    fn describe_names_model_size_and_partitions() {
        let mut info = DeviceInfo {
            path: "/dev/sdz".into(),
            name: "sdz".into(),
            disk: "sdz".into(),
            is_partition: false,
            devs: vec![],
            size_bytes: 32 << 30,
            removable: true,
            read_only: false,
            model: "ACME Stick".into(),
            partitions: vec!["sdz1".into(), "sdz2".into()],
        };
        assert_eq!(
            info.describe(),
            "/dev/sdz (ACME Stick, 32 GiB, partitions sdz1, sdz2)"
        );
        info.model.clear();
        info.partitions.clear();
        assert!(
            info.describe().contains("unknown model") && info.describe().contains("no partitions")
        );
    }
}
