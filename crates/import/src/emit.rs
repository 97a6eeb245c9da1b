//! The spec being built: keys with their comments, rendered as TOML, checked by parsing it
//! back with [`blockwise_image::Spec::from_toml`] and planning it, and annotated with what
//! the plan does differently from the foreign tool's placement.

use blockwise_geometry::SizeSpec;
use blockwise_image::Spec;

use crate::{size_text, Diag, Host, ImportError};

/// The result of an import.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Imported {
    /// The spec as TOML, with a comment per option blockwise does differently.
    pub toml: String,
    /// The parsed spec (what `toml` says), ready to build.
    pub spec: Spec,
    /// The differences, one line each (the same text as the comments), for a summary.
    pub notes: Vec<String>,
}

/// Where the foreign tool puts a partition, in bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Placed {
    pub start: u64,
    pub size: u64,
}

/// One `[[partition]]` or `[[raw]]` on its way out.
#[derive(Clone, Debug, Default)]
pub(crate) struct Entry {
    /// The partition's name in the config, for comments.
    pub name: String,
    /// `file:line` of its definition.
    pub at: String,
    /// `(key, TOML value)` in output order.
    pub keys: Vec<(String, String)>,
    /// Comments above the entry.
    pub comments: Vec<String>,
    /// The foreign tool's placement (partitions in its table only).
    pub placed: Option<Placed>,
}

impl Entry {
    pub fn key(&mut self, k: &str, v: String) {
        self.keys.push((k.to_string(), v));
    }
    pub fn note(&mut self, n: String) {
        self.comments.push(n);
    }
}

/// The whole spec on its way out.
#[derive(Clone, Debug, Default)]
pub(crate) struct Out {
    /// Comment lines at the top.
    pub header: Vec<String>,
    /// `[image]` keys.
    pub image: Vec<(String, String)>,
    /// Comments for the `[image]` table.
    pub image_notes: Vec<String>,
    pub partitions: Vec<Entry>,
    pub raws: Vec<Entry>,
    /// What the foreign tool calls itself in comments ("genimage", "wic").
    pub tool: &'static str,
    /// Where the foreign tool puts the MBR extended partition, when it makes one.
    pub extended: Option<Placed>,
}

/// A TOML basic string.
pub(crate) fn tstr(s: &str) -> String {
    let mut o = String::with_capacity(s.len().saturating_add(2));
    o.push('"');
    for c in s.chars() {
        match c {
            '"' => o.push_str("\\\""),
            '\\' => o.push_str("\\\\"),
            '\n' => o.push_str("\\n"),
            '\t' => o.push_str("\\t"),
            '\r' => o.push_str("\\r"),
            c if c.is_control() => o.push_str(&format!("\\u{:04X}", u32::from(c))),
            c => o.push(c),
        }
    }
    o.push('"');
    o
}

/// A size as a TOML value: `"4MiB"` when exact in a binary unit, else a number of bytes.
pub(crate) fn tsize(n: u64) -> String {
    let t = size_text(n);
    if t.ends_with(" bytes") {
        n.to_string()
    } else {
        tstr(&t)
    }
}

/// A comment line: one line, no control characters.
fn comment(s: &str) -> String {
    let clean: String = blockwise_geometry::display_str(s)
        .chars()
        .map(|c| if c == '\n' || c == '\r' { ' ' } else { c })
        .collect();
    format!("# {clean}\n")
}

fn render(out: &Out) -> String {
    let mut t = String::new();
    for h in &out.header {
        t.push_str(&comment(h));
    }
    if !out.header.is_empty() {
        t.push('\n');
    }
    for n in &out.image_notes {
        t.push_str(&comment(n));
    }
    t.push_str("[image]\n");
    for (k, v) in &out.image {
        t.push_str(&format!("{k} = {v}\n"));
    }
    for (head, list) in [("[[raw]]", &out.raws), ("[[partition]]", &out.partitions)] {
        for e in list {
            t.push('\n');
            for n in &e.comments {
                t.push_str(&comment(n));
            }
            t.push_str(head);
            t.push('\n');
            for (k, v) in &e.keys {
                t.push_str(&format!("{k} = {v}\n"));
            }
        }
    }
    t
}

/// The 1-based index in `partition[N].…` / `raw[N].…`, if the key names one.
fn key_index(key: &str, table: &str) -> Option<usize> {
    let rest = key.strip_prefix(table)?.strip_prefix('[')?;
    let (n, _) = rest.split_once(']')?;
    n.parse::<usize>().ok()?.checked_sub(1)
}

/// Renders `out`, checks it parses and plans, and adds the comparison comments.
pub(crate) fn finish(mut out: Out, host: &dyn Host, top: &str) -> Result<Imported, ImportError> {
    let first = render(&out);
    let spec = Spec::from_toml(&first).map_err(|e| spec_diag(&out, top, &e.key, &e.reason))?;
    let mut sized = spec.clone();
    // The layout does not depend on the boot code: a stand-in lets the plan run (the import
    // checked that the file exists; build reads it and applies its rules).
    if sized.image.boot_code.is_some() {
        sized.image.boot_code_bytes = Some(vec![0]);
    }
    for (i, p) in sized.partitions.iter_mut().enumerate() {
        if let Some(src) = &p.source {
            let Some(len) = host.file_size(src) else {
                let at = out
                    .partitions
                    .get(i)
                    .map_or(top.to_string(), |e| e.at.clone());
                return Err(Diag {
                    at,
                    option: Some("image".into()),
                    message: format!(
                        "{:?} does not exist (give the directory it is in with --inputpath)",
                        blockwise_geometry::display_str(src)
                    ),
                }
                .into());
            };
            if p.size == SizeSpec::Source {
                p.size = SizeSpec::Bytes(len.max(1));
            }
        }
    }
    for (i, r) in sized.raw.iter_mut().enumerate() {
        let Some(len) = host.file_size(&r.source) else {
            let at = out.raws.get(i).map_or(top.to_string(), |e| e.at.clone());
            return Err(Diag {
                at,
                option: Some("image".into()),
                message: format!(
                    "{:?} does not exist (give the directory it is in with --inputpath)",
                    blockwise_geometry::display_str(&r.source)
                ),
            }
            .into());
        };
        r.source_len = Some(len);
    }
    let plan = blockwise_image::plan_full(&sized, &[], 0).map_err(|e| match &e {
        blockwise_image::Error::Spec(s) => spec_diag(&out, top, &s.key, &s.reason),
        other => ImportError::from(Diag {
            at: top.to_string(),
            option: None,
            message: format!("the equivalent spec cannot be planned: {other}"),
        }),
    })?;
    let eb = plan.erase_block_bytes;
    let mut notes = Vec::new();
    for p in plan.partitions.iter().filter(|p| p.in_table) {
        let Some(e) = out.partitions.get_mut(p.spec_index) else {
            continue;
        };
        let Some(f) = e.placed else {
            continue;
        };
        if f.start == p.start_bytes && f.size == p.size_bytes {
            continue;
        }
        let n = format!(
            "{} {:?}: {} puts it at {} with {}; blockwise at {} with {} (every partition starts on a multiple of the {} erase block and its size rounds up to one)",
            e.at,
            e.name,
            out.tool,
            size_text(f.start),
            size_text(f.size),
            size_text(p.start_bytes),
            size_text(p.size_bytes),
            size_text(eb)
        );
        e.note(n.clone());
        notes.push(n);
    }
    if let (Some(f), Some(x)) = (out.extended, &plan.extended) {
        if f.start != x.start_bytes || f.size != x.size_bytes {
            let n = format!(
                "the extended partition (MBR entry {}): {} puts it at {} with {}; blockwise at {} with {} (blockwise puts each EBR in the erase block before its logical partition)",
                x.entry,
                out.tool,
                size_text(f.start),
                size_text(f.size),
                size_text(x.start_bytes),
                size_text(x.size_bytes)
            );
            out.image_notes.push(n);
        }
    }
    for e in &out.partitions {
        for c in &e.comments {
            if !notes.contains(c) {
                notes.push(c.clone());
            }
        }
    }
    notes.extend(out.image_notes.iter().cloned());
    out.header.push(
        "The partition table follows the input except where a comment says otherwise.".into(),
    );
    let toml = render(&out);
    Ok(Imported { toml, spec, notes })
}

fn spec_diag(out: &Out, top: &str, key: &str, reason: &str) -> ImportError {
    let (at, name) = if let Some(i) = key_index(key, "partition") {
        out.partitions.get(i).map_or((top.to_string(), None), |e| {
            (e.at.clone(), Some(e.name.clone()))
        })
    } else if let Some(i) = key_index(key, "raw") {
        out.raws.get(i).map_or((top.to_string(), None), |e| {
            (e.at.clone(), Some(e.name.clone()))
        })
    } else {
        (top.to_string(), None)
    };
    let whose = name.map_or(String::new(), |n| {
        format!(" (partition {:?})", blockwise_geometry::display_str(&n))
    });
    ImportError::from(Diag {
        at,
        option: None,
        message: format!("blockwise cannot build this{whose}: {key}: {reason}"),
    })
}
