//! The JSON the front ends print or return: a plan in the shape of the verify report, a
//! build's plan with what was written, and a device probe. The CLI's `--json` and the Python
//! package share it.

use blockwise_flash::{Estimate, ValueSource};
use blockwise_geometry::Plan;
use serde_json::{json, Map, Value};

use crate::{Built, ProbeReport, WriteStats};

/// A plan as JSON in the shape of the verify report: the plan's fields plus `source` and the
/// `findings` verify will give the built image for its alignment
/// ([`blockwise_verify::plan_findings`]), then the fields of `extra` (an object; anything else
/// is ignored).
pub fn plan_json(plan: &Plan, source: &str, extra: Option<Value>) -> serde_json::Result<Value> {
    let mut v = serde_json::to_value(plan)?;
    if let Some(obj) = v.as_object_mut() {
        obj.insert("source".into(), source.into());
        let findings = blockwise_verify::plan_findings(plan);
        obj.insert("findings".into(), serde_json::to_value(findings)?);
        if let Some(Value::Object(extra)) = extra {
            obj.extend(extra);
        }
    }
    Ok(v)
}

/// What `build --json` prints: [`plan_json`] of the built plan plus `output`, `data_bytes`,
/// the [`WriteStats`] and the warnings.
pub fn build_json(
    built: &Built,
    stats: &WriteStats,
    source: &str,
    output: &str,
) -> serde_json::Result<Value> {
    let mut extra = Map::new();
    extra.insert("output".into(), output.into());
    extra.insert("data_bytes".into(), built.image.data_bytes().into());
    extra.insert("metadata_bytes".into(), stats.metadata_bytes.into());
    extra.insert("content_bytes".into(), stats.content_bytes.into());
    extra.insert(
        "kernel_copied_bytes".into(),
        stats.kernel_copied_bytes.into(),
    );
    extra.insert("warnings".into(), serde_json::to_value(&built.warnings)?);
    plan_json(&built.plan, source, Some(Value::Object(extra)))
}

/// [`build_json`] of a build written by [`Built::write_as`](crate::Built::write_as): also
/// `format` (`raw`, `simg`, `zst`, `xz`), `output_bytes` (the file's size) and, for a
/// container, `container`: its `units` (chunks or frames), `data_bytes` (RAW chunks or frames
/// with data), `fill_bytes` (FILL chunks or all-zero frames) and `dont_care_bytes`.
pub fn build_output_json(
    built: &Built,
    written: &crate::Written,
    source: &str,
    output: &str,
) -> serde_json::Result<Value> {
    let mut v = build_json(built, &written.stats, source, output)?;
    if let Some(obj) = v.as_object_mut() {
        obj.insert("format".into(), written.format.name().into());
        obj.insert("output_bytes".into(), written.output_bytes.into());
        if let Some(s) = &written.summary {
            obj.insert(
                "container".into(),
                json!({
                    "units": s.units,
                    "data_bytes": s.data_bytes,
                    "fill_bytes": s.fill_bytes,
                    "dont_care_bytes": s.dont_care_bytes,
                }),
            );
        }
    }
    Ok(v)
}

fn estimate_json(e: &Estimate) -> Value {
    json!({
        "erase_block_bytes": e.erase_block,
        "confidence": (e.confidence * 100.0).round() / 100.0,
        "confidence_label": e.confidence_label(),
        "summary": e.summary,
        "reads": e.reads,
        "rounds": e.rounds,
        "measured_seconds": e.measured.as_secs_f64(),
        "sizes": e.sizes.iter().map(|s| json!({
            "size_bytes": s.size_bytes,
            "boundaries": s.boundaries,
            "straddle_ns": s.straddle_ns,
            "control_ns": s.control_ns,
            "effect_ns": s.effect_ns,
            "slower_fraction": s.slower_fraction,
            "clear": s.clear,
        })).collect::<Vec<_>>(),
    })
}

/// What `probe --json` prints: every sysfs value, the kernel's partitions, the layout (the
/// verify report) or why there is none, the estimate or why none was made, the
/// recommendation with its source (`sysfs`, `estimate`, `default`) and spec lines, and the
/// notes.
pub fn probe_json(r: &ProbeReport) -> serde_json::Result<Value> {
    let p = &r.probed;
    let d = &p.probe;
    let (source, from) = match &p.rec.erase_block_source {
        ValueSource::Sysfs(path) => ("sysfs", Some(path.display().to_string())),
        ValueSource::Estimate { .. } => ("estimate", None),
        ValueSource::Default => ("default", None),
    };
    let mut notes = d.notes.clone();
    notes.extend(p.notes.iter().cloned());
    Ok(json!({
        "device": d.path.display().to_string(),
        "name": d.name,
        "disk": d.disk,
        "dev": d.dev,
        "sysfs": d.sysfs.display().to_string(),
        "partition_start_bytes": d.partition_start_bytes,
        "size_bytes": d.size_bytes,
        "logical_block_bytes": d.logical_block_bytes,
        "physical_block_bytes": d.physical_block_bytes,
        "minimum_io_bytes": d.minimum_io_raw,
        "optimal_io_bytes": d.optimal_io_bytes,
        "optimal_io_raw": d.optimal_io_raw,
        "discard_granularity_bytes": d.discard_granularity_bytes,
        "discard_max_bytes": d.discard_max_bytes,
        "preferred_erase_bytes": d.preferred_erase_bytes,
        "alignment_offset_bytes": d.alignment_offset_bytes,
        "removable": d.removable,
        "rotational": d.rotational,
        "read_only": d.read_only,
        "vendor": d.vendor,
        "model": d.model,
        "serial": d.serial,
        "transport": d.transport.as_str(),
        "device_type": d.device_type,
        "kernel_partitions": d.partitions.iter().map(|k| json!({
            "name": k.name,
            "number": k.number,
            "start_bytes": k.start_bytes,
            "size_bytes": k.size_bytes,
        })).collect::<Vec<_>>(),
        "layout": match &r.layout {
            Some(report) => serde_json::to_value(report)?,
            None => Value::Null,
        },
        "layout_note": r.layout_note,
        "estimate": p.estimate.as_ref().map(estimate_json),
        "estimate_skipped": p.estimate_skipped,
        "recommendation": {
            "erase_block_bytes": p.rec.erase_block_bytes,
            "erase_block_source": source,
            "erase_block_from": from,
            "erase_block_reason": p.rec.erase_block_reason,
            "sector_bytes": p.rec.sector_bytes,
            "sector_reason": p.rec.sector_reason,
            "spec": p.rec.spec_lines(),
        },
        "notes": notes,
    }))
}
