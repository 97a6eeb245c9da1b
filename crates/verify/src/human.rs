//! Human output: `fdisk -l`-like listing, findings, one-line verdict.

use core::fmt::Write as _;

use blockwise_geometry::{
    display_str, format_size, types::gpt_type_name, DiskId, FsPlan, PartType, TableKind,
};

use crate::num::div;
use crate::{partition_name, Report, Severity};

fn short_size(b: u64) -> String {
    format_size(b).replace(' ', "")
}

fn type_text(t: &PartType) -> String {
    match t {
        PartType::Mbr(b) => format!("{b:x}"),
        PartType::Gpt(g) => gpt_type_name(*g).map_or_else(|| g.to_string(), str::to_string),
    }
}

/// ` "LABEL"`, or nothing. A label comes from the image: control characters are shown
/// escaped (`\xNN`), never sent to the terminal.
fn label_text(label: Option<&str>) -> String {
    label
        .map(|l| format!(" \"{}\"", display_str(l)))
        .unwrap_or_default()
}

/// ` + verity@OFFSET`, or nothing.
fn verity_text(v: Option<&blockwise_geometry::VerityPlan>) -> String {
    v.map(|v| format!(" + dm-verity@{}", v.hash_start_bytes))
        .unwrap_or_default()
}

fn fs_text(fs: Option<&FsPlan>) -> String {
    match fs {
        None => "-".into(),
        Some(FsPlan::Fat(f)) => format!(
            "{}{} sector {} cluster {} FAT@{} data@{}{}",
            f.kind,
            label_text(f.label.as_deref()),
            f.sector_bytes,
            short_size(f.cluster_bytes.into()),
            f.fat_start_bytes,
            f.data_start_bytes,
            f.bootloader
                .as_deref()
                .map(|b| format!(" boot {}", display_str(b)))
                .unwrap_or_default()
        ),
        Some(FsPlan::Ext4(x)) => format!(
            "{}{} block {} stride {} stripe {}{}",
            x.kind,
            label_text(x.label.as_deref()),
            x.block_bytes,
            x.stride,
            x.stripe_width,
            x.journal_start_bytes
                .map(|j| format!(" journal@{j}"))
                .unwrap_or_default()
        ),
        Some(FsPlan::Squashfs(q)) => format!(
            "squashfs {} block {}{}{}",
            q.compression,
            short_size(q.block_bytes.into()),
            q.bytes_used
                .map(|b| format!(" used {}", short_size(b)))
                .unwrap_or_default(),
            verity_text(q.verity.as_ref())
        ),
        Some(FsPlan::Erofs(x)) => format!(
            "erofs{} block {}{}{}",
            label_text(x.label.as_deref()),
            x.block_bytes,
            if x.compression == "none" {
                String::new()
            } else {
                format!(" {}", x.compression)
            },
            verity_text(x.verity.as_ref())
        ),
        Some(FsPlan::Verity(v)) => format!(
            "dm-verity {} of {} root {}",
            v.hash_algorithm,
            v.of.map_or_else(|| "?".to_string(), |o| o.to_string()),
            v.root_hash.as_deref().unwrap_or("?")
        ),
        Some(FsPlan::F2fs(f)) => format!(
            "f2fs{} section {} zone {} main@{}",
            label_text(f.label.as_deref()),
            short_size(f.section_bytes),
            short_size(f.zone_bytes),
            f.main_start_bytes
        ),
        Some(FsPlan::Exfat(x)) => format!(
            "exfat{} sector {} cluster {} FAT@{} heap@{}",
            label_text(x.label.as_deref()),
            x.sector_bytes,
            short_size(x.cluster_bytes.into()),
            x.fat_start_bytes,
            x.heap_start_bytes
        ),
        Some(FsPlan::Other(o)) => {
            format!("{}{} (not checked)", o.kind, label_text(o.label.as_deref()))
        }
    }
}

pub(crate) fn render(r: &Report) -> String {
    let mut out = String::new();
    let sb = u64::from(r.sector_bytes.bytes());
    let _ = writeln!(
        out,
        "Disk {}: {}, {} bytes, {} sectors",
        display_str(&r.source),
        format_size(r.size_bytes),
        r.size_bytes,
        div(r.size_bytes, sb)
    );
    let phys = r
        .device
        .as_ref()
        .and_then(|d| d.physical_block_bytes)
        .unwrap_or(sb);
    let _ = writeln!(out, "Units: sectors of 1 * {sb} = {sb} bytes");
    let _ = writeln!(
        out,
        "Sector size (logical/physical): {sb} bytes / {phys} bytes"
    );
    if let Some(d) = &r.device {
        let f = |v: Option<u64>| v.map_or_else(|| "-".to_string(), |b| b.to_string());
        let _ = writeln!(
            out,
            "I/O size (minimum/optimal): {} bytes / {} bytes; preferred erase size: {}",
            f(d.minimum_io_bytes),
            f(d.optimal_io_bytes),
            d.preferred_erase_bytes
                .map_or_else(|| "-".to_string(), format_size)
        );
    }
    match &r.erase_block_source {
        Some(why) => {
            let _ = writeln!(
                out,
                "Erase block checked: {}; --erase-block overrides",
                why.message
            );
        }
        None => {
            let _ = writeln!(
                out,
                "Erase block checked: {}",
                format_size(r.erase_block_bytes)
            );
        }
    }
    let label = match r.table.kind {
        TableKind::Mbr => "dos",
        TableKind::Gpt => "gpt",
        TableKind::None => "none (bare filesystem)",
    };
    if r.recognised {
        let _ = writeln!(out, "Disklabel type: {label}");
    }
    match &r.table.disk_id {
        Some(DiskId::Mbr(n)) => {
            let _ = writeln!(out, "Disk identifier: 0x{n:08x}");
        }
        Some(DiskId::Gpt(g)) => {
            let _ = writeln!(out, "Disk identifier: {g}");
        }
        None => {}
    }
    if let Some(b) = &r.table.boot_code {
        let _ = writeln!(out, "Boot code: {} in sector 0", b.describe());
    }
    if !r.partitions.is_empty() {
        let rows: Vec<[String; 9]> = r
            .partitions
            .iter()
            .map(|p| {
                let start = div(p.start_bytes, sb);
                let sectors = div(p.size_bytes, sb);
                [
                    display_str(&partition_name(&r.source, p.index)),
                    if p.bootable {
                        "*".into()
                    } else {
                        String::new()
                    },
                    start.to_string(),
                    start.saturating_add(sectors).saturating_sub(1).to_string(),
                    sectors.to_string(),
                    short_size(p.size_bytes),
                    type_text(&p.type_),
                    if p.alignment_bytes >= 1 << 62 {
                        "-".into()
                    } else {
                        short_size(p.alignment_bytes)
                    },
                    fs_text(p.filesystem.as_ref()),
                ]
            })
            .collect();
        let header = [
            "Device",
            "Boot",
            "Start",
            "End",
            "Sectors",
            "Size",
            "Type",
            "Align",
            "Filesystem",
        ];
        let mut w = header.map(str::len);
        for row in &rows {
            for (wi, c) in w.iter_mut().zip(row) {
                *wi = (*wi).max(c.chars().count());
            }
        }
        let line = |cells: [&str; 9]| -> String {
            let mut l = String::new();
            for (k, (c, wi)) in cells.iter().zip(w).enumerate() {
                let right = matches!(k, 2..=5);
                if k == 8 {
                    l.push_str(c);
                } else if right {
                    let _ = write!(l, "{c:>wi$} ");
                } else {
                    let _ = write!(l, "{c:<wi$} ");
                }
            }
            l.trim_end().to_string()
        };
        let _ = writeln!(out);
        let _ = writeln!(out, "{}", line(header));
        for row in &rows {
            let cells = [
                &row[0], &row[1], &row[2], &row[3], &row[4], &row[5], &row[6], &row[7], &row[8],
            ];
            let _ = writeln!(out, "{}", line(cells.map(String::as_str)));
        }
    }
    if !r.regions.is_empty() {
        let _ = writeln!(out);
        let _ = writeln!(out, "Outside the partitions:");
        for g in &r.regions {
            let start = div(g.start_bytes, sb);
            let sectors = div(g.size_bytes, sb);
            let _ = writeln!(
                out,
                "  {}: sectors {}-{} ({} at {})",
                g.kind,
                start,
                start.saturating_add(sectors).saturating_sub(1),
                short_size(g.size_bytes),
                short_size(g.start_bytes)
            );
        }
    }
    if !r.slots.is_empty() {
        let _ = writeln!(out);
        for g in &r.slots {
            let members: Vec<String> = g
                .partitions
                .iter()
                .map(|m| format!("{} = {}", m.slot, partition_name(&r.source, m.index)))
                .collect();
            let _ = writeln!(out, "A/B slots of {}: {}", g.name, members.join(", "));
        }
    }
    if !r.findings.is_empty() {
        let _ = writeln!(out);
        for f in &r.findings {
            let _ = writeln!(
                out,
                "{:<7} {}: {}",
                f.severity.as_str(),
                f.code,
                display_str(&f.message)
            );
        }
    }
    let _ = writeln!(out);
    let _ = writeln!(out, "{}", verdict(r));
    out
}

/// What an unchecked partition holds, for the verdict: `btrfs in partition 3`, `raw bytes in
/// partition 2`, `swap (the whole image)`.
fn unchecked_text(p: &blockwise_geometry::PartitionPlan) -> String {
    let kind = p
        .filesystem
        .as_ref()
        .map_or_else(|| "contents".to_string(), FsPlan::kind_name);
    let kind = if kind == "raw" { "raw bytes" } else { &kind };
    if p.index == 0 {
        format!("{kind} (the whole image)")
    } else {
        format!("{kind} in partition {}", p.index)
    }
}

pub(crate) fn verdict(r: &Report) -> String {
    let (e, w) = (r.count(Severity::Error), r.count(Severity::Warning));
    let plural = |n: usize, s: &str| format!("{n} {s}{}", if n == 1 { "" } else { "s" });
    let eb = format_size(r.erase_block_bytes);
    if !r.recognised {
        return "verdict: UNRECOGNISED — no partition table or filesystem found".into();
    }
    let unchecked: Vec<String> = r
        .partitions
        .iter()
        .filter(|p| !p.checked)
        .map(unchecked_text)
        .collect();
    // "2 of 3 partitions checked; exfat in partition 3 not checked"
    let coverage = (!unchecked.is_empty()).then(|| {
        let n = r.partitions.len();
        format!(
            "{} of {} checked; {} not checked",
            n.saturating_sub(unchecked.len()),
            plural(n, "partition"),
            unchecked.join(", ")
        )
    });
    if e > 0 {
        let base = format!(
            "verdict: NOT OK — {}, {}",
            plural(e, "error"),
            plural(w, "warning")
        );
        return match coverage {
            Some(c) => format!("{base}; {c}"),
            None => base,
        };
    }
    if let Some(c) = coverage {
        // Unchecked partitions count with their start only.
        let starts_ok = r.partitions.iter().all(|p| {
            if p.checked {
                p.aligned
            } else {
                crate::num::is_multiple(p.start_bytes, r.erase_block_bytes)
            }
        });
        let rest = if starts_ok {
            format!("what was checked sits on the {eb} erase block")
        } else {
            format!("not everything checked is on the {eb} erase block")
        };
        return format!("verdict: {c} — {rest} ({})", plural(w, "warning"));
    }
    if r.aligned && w == 0 {
        format!("verdict: aligned — every partition and filesystem sits on the {eb} erase block")
    } else if r.aligned {
        format!(
            "verdict: aligned to the {eb} erase block, with {}",
            plural(w, "warning")
        )
    } else {
        format!("verdict: consistent and 4 KiB aligned, but not everything is on the {eb} erase block ({})", plural(w, "warning"))
    }
}
