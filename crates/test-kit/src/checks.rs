//! The oracle checks: `fsck.fat`, `e2fsck`, `debugfs`, `blkid`, `mcopy`, `diff -r` and
//! `sfdisk --json`, each run the same way by every test.

use std::path::Path;

use crate::tools::{assert_success, command, output_text, run};

/// Lines `fsck.fat -n -v` prints about a good volume: boot-sector fields, progress, the label.
const FSCK_FAT_FINE: [&str; 24] = [
    "fsck.fat ",
    "Checking we can access the last sector",
    "Boot sector contents:",
    "System ID ",
    "Media byte ",
    "bytes per logical sector",
    "bytes per cluster",
    "reserved sectors",
    "First FAT starts at byte",
    "FATs, ",
    "bytes per FAT",
    "Root directory start",
    "root directory entries",
    "Data area starts at byte",
    "data clusters",
    "sectors/track",
    "hidden sectors",
    "sectors total",
    "Checking for unused clusters.",
    "Checking free cluster summary.",
    "Volume label",
    "Checking file ",
    "Checking for bad clusters.",
    "Reclaiming unconnected clusters.",
];

/// Words `fsck.fat` uses for a problem.
const FSCK_FAT_BAD: [&str; 7] = [
    "differ",
    "Invalid",
    "invalid",
    "corrupt",
    "Free cluster summary wrong",
    "Dirty bit",
    "Bad",
];

/// Runs `fsck.fat -n -v IMAGE` (read-only), asserts a clean result and returns its output.
///
/// Clean means: exit 0; every non-empty line is one `-v` prints about a good volume (the
/// boot-sector fields, the `Checking …` progress, the volume label, the `N files, N/N
/// clusters` summary); and no problem word appears anywhere ("differ", "Invalid", "invalid",
/// "corrupt", "Free cluster summary wrong", "Dirty bit", "Bad").
///
/// The copies this replaces differed: the FAT crate's tests checked every line against the
/// good lines, the CLI tests searched the output for the problem words. The kit does both, so
/// neither kind of test asserts less than it did.
pub fn fsck_fat_clean(image: &Path) -> String {
    let o = run(
        "fsck.fat",
        &["-n".as_ref(), "-v".as_ref(), image.as_os_str()],
    );
    let text = output_text(&o);
    assert!(
        o.status.success(),
        "fsck.fat failed on {}:\n{text}",
        image.display()
    );
    for bad in FSCK_FAT_BAD {
        assert!(
            !text.contains(bad),
            "fsck.fat complained about {} ({bad}):\n{text}",
            image.display()
        );
    }
    for line in text.lines() {
        let l = line.trim();
        let fine = l.is_empty()
            || FSCK_FAT_FINE.iter().any(|f| l.contains(f.trim()))
            || (l.contains(" files, ") && l.contains(" clusters"));
        assert!(
            fine,
            "fsck.fat complained about {}: {line:?}\n{text}",
            image.display()
        );
    }
    text
}

/// The number after `key` in `fsck.fat -v` output (e.g. "First FAT starts at byte").
pub fn fsck_number(text: &str, key: &str) -> u64 {
    let line = text
        .lines()
        .find(|l| l.contains(key))
        .unwrap_or_else(|| panic!("no {key:?} in\n{text}"));
    let rest = line.split_once(key).map_or("", |(_, rest)| rest);
    rest.split_whitespace()
        .next()
        .and_then(|w| w.parse().ok())
        .unwrap_or_else(|| panic!("no number after {key:?} in {line:?}"))
}

/// Runs `e2fsck -fn IMAGE` (forced, read-only) and asserts exit 0 and nothing but the lines
/// of a clean check.
///
/// Accepted: empty lines, the version banner (`e2fsck 1.47.0 (5-Feb-2023)`), the `Pass N: …`
/// lines, and the one summary line `NAME: N/N files (X% non-contiguous), N/N blocks`, where
/// NAME is what e2fsck calls the volume: its `label`, or the image path as given when the
/// volume has none (`label` = `None`).
///
/// The copies this replaces differed: the CLI tests accepted exactly these lines (label
/// `rootfs`); the ext4 crate's also let through any line starting with `testfs:`, any line
/// containing `: clean` and `Warning: skipping journal recovery`. None of those extra lines
/// occurs on the images the tests build, and each could hide a problem (a `testfs: *****
/// FILE SYSTEM WAS MODIFIED *****`, a journal left needing recovery), so the strict set is the
/// one kept, with the summary line parsed rather than matched by a fragment.
///
/// With `EXT4_KEEP=DIR` set, the image is copied into DIR first, to look at after a failure.
pub fn e2fsck_clean(image: &Path, label: Option<&str>) {
    if let Some(dir) = std::env::var_os("EXT4_KEEP") {
        if let Some(name) = image.file_name() {
            let _ = std::fs::copy(image, Path::new(&dir).join(name));
        }
    }
    let o = run("e2fsck", &["-fn".as_ref(), image.as_os_str()]);
    let text = output_text(&o);
    let path = image.display().to_string();
    let name = label.unwrap_or(&path);
    let bad: Vec<&str> = text
        .lines()
        .filter(|l| {
            !(l.is_empty()
                || l.starts_with("Pass ")
                || l.starts_with("e2fsck ")
                || is_e2fsck_summary(l, name))
        })
        .collect();
    assert!(
        o.status.success() && bad.is_empty(),
        "e2fsck -fn {path}: rc {:?}, unexpected lines {bad:?}:\n{text}",
        o.status.code()
    );
}

/// `NAME: 11/65536 files (0.0% non-contiguous), 9000/262144 blocks`.
fn is_e2fsck_summary(line: &str, name: &str) -> bool {
    let ratio = |s: &str| {
        s.split_once('/')
            .is_some_and(|(a, b)| a.parse::<u64>().is_ok() && b.parse::<u64>().is_ok())
    };
    let Some(rest) = line.strip_prefix(name).and_then(|r| r.strip_prefix(": ")) else {
        return false;
    };
    let Some((files, rest)) = rest.split_once(" files (") else {
        return false;
    };
    let Some((percent, blocks)) = rest.split_once("% non-contiguous), ") else {
        return false;
    };
    ratio(files)
        && percent.parse::<f64>().is_ok()
        && blocks.strip_suffix(" blocks").is_some_and(ratio)
}

/// `debugfs -R CMD IMAGE`: its stdout (debugfs reports errors there and on stderr, and exits 0
/// either way; callers assert on the text).
pub fn debugfs(image: &Path, cmd: &str) -> String {
    let o = run("debugfs", &["-R".as_ref(), cmd.as_ref(), image.as_os_str()]);
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// `blkid -p -o export --offset OFFSET IMAGE`: its stdout (`TYPE=…`, `LABEL=…`, `UUID=…`).
pub fn blkid(image: &Path, offset: u64) -> String {
    let o = command("blkid")
        .args(["-p", "-o", "export", "--offset", &offset.to_string()])
        .arg(image)
        .output()
        .expect("running blkid");
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// Copies every file of the FAT volume at `offset` in `image` into `out` (`mcopy -s -n`),
/// asserting success.
pub fn mcopy_out(image: &Path, offset: u64, out: &Path) {
    std::fs::create_dir_all(out).expect("create mcopy output dir");
    let o = command("mcopy")
        .env("MTOOLS_SKIP_CHECK", "1")
        .env("LC_ALL", "C.UTF-8")
        .args([
            "-s",
            "-n",
            "-i",
            &format!("{}@@{offset}", image.display()),
            "::/",
        ])
        .arg(out)
        .output()
        .expect("running mcopy");
    assert_success(&o, "mcopy");
}

/// Asserts that `diff -r --no-dereference` finds the trees `a` and `b` equal, leaving out the
/// names in `exclude` (`-x`). Symlinks are compared as links, never followed.
pub fn assert_same_tree(a: &Path, b: &Path, exclude: &[&str]) {
    let mut cmd = command("diff");
    cmd.args(["-r", "--no-dereference"]);
    for x in exclude {
        cmd.args(["-x", x]);
    }
    let o = cmd.arg(a).arg(b).output().expect("running diff");
    assert!(
        o.status.success(),
        "trees differ ({} vs {}):\n{}",
        a.display(),
        b.display(),
        output_text(&o)
    );
}

/// `sfdisk --json TARGET`, asserting success, parsed.
pub fn sfdisk_json(target: &Path) -> serde_json::Value {
    let o = run("sfdisk", &["--json".as_ref(), target.as_os_str()]);
    assert_success(&o, "sfdisk --json");
    serde_json::from_slice(&o.stdout).expect("sfdisk --json output")
}

/// Every key a plan and a verify report share has the same value (recursively), except
/// prose and what only one side can know (notes, source, findings, content, GUIDs of
/// logical partitions, EBR offsets). `path` names the place in failure messages.
pub fn assert_same_json(plan: &serde_json::Value, report: &serde_json::Value, path: &str) {
    use serde_json::Value;
    match (plan, report) {
        (Value::Object(a), Value::Object(b)) => {
            for (k, va) in a {
                if matches!(
                    k.as_str(),
                    "notes" | "source" | "findings" | "content" | "guid" | "logical" | "ebr_bytes"
                ) {
                    continue;
                }
                if let Some(vb) = b.get(k) {
                    if vb.is_null() || va.is_null() {
                        continue;
                    }
                    assert_same_json(va, vb, &format!("{path}.{k}"));
                }
            }
        }
        (Value::Array(a), Value::Array(b)) => {
            assert_eq!(a.len(), b.len(), "{path}: lengths differ");
            for (i, (x, y)) in a.iter().zip(b).enumerate() {
                assert_same_json(x, y, &format!("{path}[{i}]"));
            }
        }
        (a, b) => assert_eq!(a, b, "{path}"),
    }
}

/// The boot-sector fields `fsck.fat -n -v` prints that `verify` also reports (offsets as
/// fsck.fat gives them: from the start of the volume).
#[derive(Debug, Default, PartialEq, Eq)]
pub struct FsckFatFields {
    /// Bytes per logical sector.
    pub sector: u64,
    /// Bytes per cluster.
    pub cluster: u64,
    /// Reserved sectors.
    pub reserved: u64,
    /// Byte offset of the first FAT.
    pub fat_start: u64,
    /// Byte offset of the data area.
    pub data_start: u64,
    /// Data clusters.
    pub clusters: u64,
}

/// `fsck.fat -n -v` on a volume file, parsed; `None` when it prints no boot sector (not FAT,
/// or too damaged for fsck.fat).
pub fn fsck_fat_fields(vol: &Path) -> Option<FsckFatFields> {
    let o = run("fsck.fat", &["-n".as_ref(), "-v".as_ref(), vol.as_os_str()]);
    let text = String::from_utf8_lossy(&o.stdout).into_owned();
    let first = |t: &str| t.split_whitespace().next().and_then(|w| w.parse().ok());
    let after = |t: &str, p: &str| t.strip_prefix(p).and_then(first);
    let mut f = FsckFatFields::default();
    for line in text.lines() {
        let t = line.trim();
        if t.ends_with("bytes per logical sector") {
            f.sector = first(t)?;
        } else if t.ends_with("bytes per cluster") {
            f.cluster = first(t)?;
        } else if t.ends_with("reserved sectors") || t.ends_with("reserved sector") {
            f.reserved = first(t)?;
        } else if t.starts_with("First FAT starts at byte") {
            f.fat_start = after(t, "First FAT starts at byte")?;
        } else if t.starts_with("Data area starts at byte") {
            f.data_start = after(t, "Data area starts at byte")?;
        } else if t.ends_with("data clusters") || t.contains("data clusters (") {
            f.clusters = first(t)?;
        }
    }
    (f.sector > 0 && f.data_start > 0).then_some(f)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn e2fsck_summary_lines() {
        let good = "rootfs: 11/65536 files (0.0% non-contiguous), 9000/262144 blocks";
        assert!(is_e2fsck_summary(good, "rootfs"));
        assert!(!is_e2fsck_summary(good, "testfs"));
        assert!(!is_e2fsck_summary(
            "rootfs: clean, 11/65536 files",
            "rootfs"
        ));
        assert!(!is_e2fsck_summary(
            "rootfs: ***** FILE SYSTEM WAS MODIFIED *****",
            "rootfs"
        ));
        assert!(!is_e2fsck_summary(&format!("{good} extra"), "rootfs"));
    }

    #[test]
    fn fsck_numbers() {
        let text = "First FAT starts at byte 4194304 (sector 8192)\n";
        assert_eq!(fsck_number(text, "First FAT starts at byte"), 4_194_304);
    }
}
