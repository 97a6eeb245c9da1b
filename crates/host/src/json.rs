//! The JSON the front ends print or return: a plan in the shape of the verify report, and a
//! build's plan with what was written. The CLI's `--json` and the Python package share it.

use blockwise_geometry::Plan;
use serde_json::{Map, Value};

use crate::{Built, WriteStats};

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
