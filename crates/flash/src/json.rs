//! The JSON a write reports: what `blockwise write --json` prints and what the Python
//! package's `write` returns.

use serde_json::{json, Value};

use crate::Outcome;

/// A finished (or interrupted) write as JSON: `source` and `target` as the caller names them,
/// the sizes, the [`Stats`](crate::Stats), whether the target was written with O_DIRECT, and
/// the outcome's `interrupted` flag and notes.
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
        "notes": out.notes,
    })
}
