//! `blockwise probe` without the terminal: a device probed through sysfs
//! ([`blockwise_flash::probe`]), an erase-block estimate from read timing when the kernel
//! gives none ([`blockwise_flash::estimate_erase_block`]), the recommendation, and the
//! `verify` analysis of the device read-only through a [`FileSource`]. The CLI's `probe`
//! (human and `--json`), `plan`/`build --device` and Python's `probe` all start here; the
//! JSON is [`crate::json::probe_json`].

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use blockwise_flash::{
    estimate_erase_block, DirectReader, Estimate, EstimateOptions, Probe, ProbeError, ReadTimer,
    Recommendation, Transport, ValueSource,
};
use blockwise_geometry::{format_size, ImageSpec, SectorSize};
use blockwise_verify::{verify, Options, Report};

use crate::{FileSource, Taken};

/// The longest read-timing estimate a caller may ask for, in seconds.
pub const MAX_ESTIMATE_SECONDS: f64 = 600.0;

/// The estimate's read-time budget for `seconds`, or `None` when `seconds` is not a number
/// from 0 to [`MAX_ESTIMATE_SECONDS`]. Front ends word their own error (naming their flag or
/// argument).
#[must_use]
pub fn estimate_budget(seconds: f64) -> Option<Duration> {
    if seconds.is_finite() && (0.0..=MAX_ESTIMATE_SECONDS).contains(&seconds) {
        Some(Duration::from_secs_f64(seconds))
    } else {
        None
    }
}

/// How to probe: whether to estimate the erase block from read timing (only done when the
/// kernel gives none), for how long, and whom to tell before the reads start.
#[derive(Debug, Clone, Copy)]
pub struct ProbeOptions {
    /// Time reads to estimate the erase block when the kernel gives none (default `true`).
    pub estimate: bool,
    /// Read time the estimate may spend (default 2 s; it always does a few rounds).
    pub budget: Duration,
    /// Called with the device and the budget just before the timed reads start (the CLI
    /// says so on a terminal); `None` by default.
    pub on_estimate: Option<fn(&Path, Duration)>,
}

impl Default for ProbeOptions {
    fn default() -> Self {
        ProbeOptions {
            estimate: true,
            budget: Duration::from_secs(2),
            on_estimate: None,
        }
    }
}

impl ProbeOptions {
    /// Sets [`ProbeOptions::estimate`].
    #[must_use]
    pub fn estimate(mut self, estimate: bool) -> Self {
        self.estimate = estimate;
        self
    }

    /// Sets [`ProbeOptions::budget`].
    #[must_use]
    pub fn budget(mut self, budget: Duration) -> Self {
        self.budget = budget;
        self
    }

    /// Sets [`ProbeOptions::on_estimate`].
    #[must_use]
    pub fn on_estimate(mut self, f: fn(&Path, Duration)) -> Self {
        self.on_estimate = Some(f);
        self
    }
}

/// A probe with everything derived from it.
#[derive(Debug, Clone)]
pub struct Probed {
    /// What sysfs says.
    pub probe: Probe,
    /// The read-timing estimate, when one was made.
    pub estimate: Option<Estimate>,
    /// Why no estimate was made, when none was.
    pub estimate_skipped: Option<String>,
    /// What to plan with.
    pub rec: Recommendation,
    /// Notes (unreadable device, …).
    pub notes: Vec<String>,
}

/// Probes `device` and, when the kernel gives no erase block, estimates it from read timing
/// (unless `opts` says not to). Errors only when `device` is not a block device with a sysfs
/// entry; a failed estimate is [`Probed::estimate_skipped`].
pub fn probe_device(device: &Path, opts: &ProbeOptions) -> Result<Probed, ProbeError> {
    let probe = blockwise_flash::probe(device)?;
    Ok(Probed::new(device, probe, opts))
}

/// A [`ReadTimer`] whose reads fail with `Interrupted` once `cancel` is set, so that the
/// estimate stops within one read (a front end's cancel button or Ctrl-C).
struct Stoppable<'a> {
    inner: &'a mut dyn ReadTimer,
    cancel: &'a AtomicBool,
}

impl ReadTimer for Stoppable<'_> {
    fn time_read(&mut self, offset: u64, len: usize) -> std::io::Result<Duration> {
        if self.cancel.load(Ordering::Relaxed) {
            return Err(std::io::Error::new(
                std::io::ErrorKind::Interrupted,
                "cancelled",
            ));
        }
        self.inner.time_read(offset, len)
    }
}

impl Probed {
    /// Derives the estimate, the recommendation and the notes from `probe`, a probe of
    /// `device` (made by [`blockwise_flash::probe`], or by `probe_in` over another sysfs root).
    #[must_use]
    pub fn new(device: &Path, probe: Probe, opts: &ProbeOptions) -> Probed {
        Probed::new_cancellable(device, probe, opts, &AtomicBool::new(false))
    }

    /// [`Probed::new`], stopping the read-timing estimate within one read once `cancel` is
    /// set (the estimate is then skipped, saying so); the caller checks `cancel` after.
    #[must_use]
    pub fn new_cancellable(
        device: &Path,
        probe: Probe,
        opts: &ProbeOptions,
        cancel: &AtomicBool,
    ) -> Probed {
        let mut notes = Vec::new();
        let known = probe
            .preferred_erase_bytes
            .is_some_and(|p| blockwise_geometry::check_erase_block(p).is_ok());
        let (est, skipped) = if known {
            (
                None,
                Some("the kernel gives the erase block (preferred_erase_size)".to_string()),
            )
        } else if !opts.estimate {
            (None, Some("--no-estimate".to_string()))
        } else if probe.partition_start_bytes.is_some() {
            (
                None,
                Some(format!(
                    "{} is a partition: probe the whole disk /dev/{} for an estimate",
                    probe.path.display(),
                    probe.disk
                )),
            )
        } else {
            let lbs = probe.logical_block_bytes;
            let len = usize::try_from(lbs.saturating_mul(2)).unwrap_or(8192);
            match DirectReader::open(device, len) {
                Ok(mut reader) => {
                    if let Some(f) = opts.on_estimate {
                        f(device, opts.budget);
                    }
                    let mut eopts = EstimateOptions::new(probe.size_bytes, lbs);
                    eopts.budget = opts.budget;
                    let mut reader = Stoppable {
                        inner: &mut reader,
                        cancel,
                    };
                    match estimate_erase_block(&mut reader, &eopts) {
                        Ok(e) => (Some(e), None),
                        Err(e) => (None, Some(format!("reading {}: {e}", device.display()))),
                    }
                }
                Err(e) => (
                    None,
                    Some(format!(
                        "cannot open {} with O_DIRECT for reading: {e}",
                        device.display()
                    )),
                ),
            }
        };
        if probe.rotational && probe.transport != Transport::Loop {
            notes.push(
                "the device says it is rotational (a hard disk?): erase blocks are a flash notion"
                    .into(),
            );
        }
        let rec = probe.recommend(est.as_ref());
        if rec.sector_bytes.is_none() {
            notes.push(rec.sector_reason.clone());
        }
        Probed {
            probe,
            estimate: est,
            estimate_skipped: skipped,
            rec,
            notes,
        }
    }

    /// Where the recommended erase block came from, for the messages of `plan`/`build
    /// --device`.
    #[must_use]
    pub fn erase_origin(&self) -> String {
        match &self.rec.erase_block_source {
            ValueSource::Sysfs(path) => format!("from {}", path.display()),
            ValueSource::Estimate { .. } => format!(
                "from the read-timing estimate on {} ({} confidence)",
                self.probe.path.display(),
                self.estimate
                    .as_ref()
                    .map_or("low", Estimate::confidence_label)
            ),
            ValueSource::Default => format!(
                "the default: {} gives no erase block ({})",
                self.probe.path.display(),
                self.estimate.as_ref().map_or_else(
                    || "no preferred_erase_size".to_string(),
                    |e| e.summary.clone()
                )
            ),
        }
    }

    /// What planning a spec for this device took from it, in the words `plan`/`build
    /// --device` and `write SPEC DEVICE` print and Python's `write` returns: `image` is the
    /// spec's `[image]` after [`take_device_values`](crate::take_device_values), `taken`
    /// what that took, and `key_prefix` how the spec's own keys are named (`"image."` for a
    /// spec, `"--"` for the CLI's layout flags).
    #[must_use]
    pub fn device_notes(&self, image: &ImageSpec, taken: Taken, key_prefix: &str) -> DeviceNotes {
        let dev = self.probe.path.display();
        let mut out = DeviceNotes::default();
        if taken.erase_block {
            out.notes.push(format!(
                "erase block {}: {}",
                format_size(image.erase_block),
                self.erase_origin()
            ));
        } else {
            out.notes.push(format!(
                "erase block {}: from {key_prefix}erase-block ({dev} suggests {}: {})",
                format_size(image.erase_block),
                format_size(self.rec.erase_block_bytes),
                self.erase_origin()
            ));
        }
        if taken.size {
            out.notes.push(format!(
                "image size {}: the size of {dev}",
                format_size(self.probe.size_bytes)
            ));
        }
        let lbs = self.probe.logical_block_bytes;
        let sector = image.sector_size.bytes_u64();
        if taken.sector_size {
            out.notes.push(format!(
                "sector size {sector}: from {}",
                self.probe.attr("queue/logical_block_size").display()
            ));
        } else {
            out.notes.push(format!(
                "sector size {sector}: from {key_prefix}sector-size"
            ));
            if sector != lbs {
                out.warnings.push(format!(
                    "{dev} has {lbs}-byte logical blocks; a table written in {sector}-byte sectors will not be read correctly from it"
                ));
            }
        }
        out
    }
}

/// Where the values a spec was planned with came from, when planned for a device
/// ([`Probed::device_notes`]).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DeviceNotes {
    /// One line per value: `erase block 4 MiB: from /sys/…/preferred_erase_size`,
    /// `image size 96 MiB: the size of /dev/sdb`, `sector size 512: from image.sector-size`.
    pub notes: Vec<String>,
    /// What the device will not read as planned: a sector size other than its logical
    /// block size.
    pub warnings: Vec<String>,
}

/// Why the layout of a probed device could not be analysed. Not a failure of the probe: it
/// becomes [`ProbeReport::layout_note`].
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LayoutError {
    /// Opening the device read-only failed.
    #[error(transparent)]
    Open(#[from] crate::Error),
    /// Reading the device failed.
    #[error("reading {}", path.display())]
    Read {
        /// The device.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
}

/// The `verify` report of the probed device, read-only, checked against `erase` bytes and
/// the device's logical block size.
pub fn layout(p: &Probe, erase: u64) -> Result<Report, LayoutError> {
    let src = FileSource::open(&p.path)?;
    let name = p.path.display().to_string();
    let opts = Options::new(name)
        .erase_block(erase)
        .sector_size(SectorSize::from_bytes(p.logical_block_bytes))
        .device(src.hints());
    verify(&src, &opts).map_err(|source| LayoutError::Read {
        path: p.path.clone(),
        source,
    })
}

/// Everything `blockwise probe` shows: the probe, and the layout or why there is none.
#[derive(Debug, Clone)]
pub struct ProbeReport {
    /// The probe and what was derived from it.
    pub probed: Probed,
    /// The `verify` report of the device, checked against the recommended erase block.
    pub layout: Option<Report>,
    /// Why there is no layout (`not analysed: …`), when there is none.
    pub layout_note: Option<String>,
}

/// [`probe_device`], then the [`layout`] of the device against the recommended erase block.
pub fn probe_report(device: &Path, opts: &ProbeOptions) -> Result<ProbeReport, ProbeError> {
    probe_report_cancellable(device, opts, &AtomicBool::new(false))
}

/// [`probe_report`], stopping the read-timing estimate within one read once `cancel` is set
/// (see [`Probed::new_cancellable`]); the caller checks `cancel` after.
pub fn probe_report_cancellable(
    device: &Path,
    opts: &ProbeOptions,
    cancel: &AtomicBool,
) -> Result<ProbeReport, ProbeError> {
    let probe = blockwise_flash::probe(device)?;
    let probed = Probed::new_cancellable(device, probe, opts, cancel);
    Ok(ProbeReport::new(probed))
}

impl ProbeReport {
    /// Adds the [`layout`] of the probed device (a failure becomes the note).
    #[must_use]
    pub fn new(probed: Probed) -> ProbeReport {
        let (layout, layout_note) = match layout(&probed.probe, probed.rec.erase_block_bytes) {
            Ok(r) => (Some(r), None),
            Err(e) => (None, Some(format!("not analysed: {}", one_line(&e)))),
        };
        ProbeReport {
            probed,
            layout,
            layout_note,
        }
    }
}

/// The error and its causes on one line: each cause is added after `: ` unless the text so
/// far already contains it (as the CLI prints errors).
fn one_line(e: &(dyn std::error::Error + 'static)) -> String {
    let mut s = e.to_string();
    let mut cause = e.source();
    // Bounded: error chains are short; a cycle would otherwise never end.
    for _ in 0..32 {
        let Some(c) = cause else { break };
        let text = c.to_string();
        if !s.contains(&text) {
            s.push_str(": ");
            s.push_str(&text);
        }
        cause = c.source();
    }
    s.replace('\n', " ")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A 96 MiB loop device with `lbs`-byte logical blocks and no erase block, probed
    /// without an estimate: the 4 MiB default.
    fn loop_device(lbs: u64) -> Probed {
        let probe = Probe {
            path: "/dev/loop7".into(),
            name: "loop7".into(),
            disk: "loop7".into(),
            dev: "7:7".into(),
            sysfs: "/sys/class/block/loop7".into(),
            partition_start_bytes: None,
            size_bytes: 96 << 20,
            logical_block_bytes: lbs,
            physical_block_bytes: lbs,
            minimum_io_raw: lbs,
            optimal_io_raw: 0,
            optimal_io_bytes: None,
            discard_granularity_bytes: 0,
            discard_max_bytes: 0,
            preferred_erase_bytes: None,
            alignment_offset_bytes: 0,
            removable: false,
            rotational: false,
            read_only: false,
            vendor: String::new(),
            model: String::new(),
            serial: String::new(),
            transport: Transport::Loop,
            device_type: String::new(),
            partitions: Vec::new(),
            notes: Vec::new(),
        };
        Probed::new(
            Path::new("/dev/loop7"),
            probe,
            &ProbeOptions::default().estimate(false),
        )
    }

    /// The lines `write SPEC DEVICE` prints (and Python's `write` returns): what was taken
    /// says where from, what the spec gave says so, a sector size that is not the device's
    /// is a warning.
    #[test]
    fn device_notes_say_where_each_value_came_from() {
        let image = |erase: u64, sector: u64| ImageSpec {
            erase_block: erase,
            sector_size: SectorSize::from_bytes(sector).unwrap(),
            ..ImageSpec::default()
        };
        let all = Taken {
            erase_block: true,
            sector_size: true,
            size: true,
        };
        let n = loop_device(4096).device_notes(&image(4 << 20, 4096), all, "image.");
        assert_eq!(
            n.notes,
            [
                "erase block 4 MiB: the default: /dev/loop7 gives no erase block (no preferred_erase_size)",
                "image size 96 MiB: the size of /dev/loop7",
                "sector size 4096: from /sys/class/block/loop7/queue/logical_block_size",
            ]
        );
        assert!(n.warnings.is_empty());
        let n = loop_device(4096).device_notes(&image(1 << 20, 512), Taken::default(), "--");
        assert_eq!(
            n.notes,
            [
                "erase block 1 MiB: from --erase-block (/dev/loop7 suggests 4 MiB: the default: /dev/loop7 gives no erase block (no preferred_erase_size))",
                "sector size 512: from --sector-size",
            ]
        );
        assert_eq!(
            n.warnings,
            ["/dev/loop7 has 4096-byte logical blocks; a table written in 512-byte sectors will not be read correctly from it"]
        );
        // The spec's own sector size, when it is the device's, is no warning.
        let n = loop_device(512).device_notes(&image(4 << 20, 512), Taken::default(), "image.");
        assert_eq!(n.notes[1], "sector size 512: from image.sector-size");
        assert!(n.warnings.is_empty());
    }

    #[test]
    fn estimate_budget_is_0_to_600_seconds() {
        let check = |s: f64, want: Option<Duration>| assert_eq!(estimate_budget(s), want, "{s}");
        check(0.0, Some(Duration::ZERO));
        check(2.0, Some(Duration::from_secs(2)));
        check(0.25, Some(Duration::from_millis(250)));
        check(600.0, Some(Duration::from_secs(600)));
        for bad in [
            -1.0,
            -0.0001,
            600.5,
            f64::NAN,
            f64::INFINITY,
            f64::NEG_INFINITY,
        ] {
            check(bad, None);
        }
    }

    #[test]
    fn one_line_adds_causes_not_repeated() {
        let io = || std::io::Error::from_raw_os_error(5);
        let read = LayoutError::Read {
            path: "/dev/sdz".into(),
            source: io(),
        };
        assert_eq!(
            one_line(&read),
            format!("reading /dev/sdz: {}", io()),
            "the cause follows the context"
        );
        let open = LayoutError::from(crate::Error::io("/dev/sdz", io()));
        assert_eq!(
            one_line(&open),
            format!("/dev/sdz: {}", io()),
            "a cause already in the text is not repeated"
        );
    }

    /// A fake sysfs with one disk `sdz` (7:9) under `devices/<parent>`, its `attrs`, and
    /// optionally a partition `sdz1` (259:0) starting at 1 MiB; the probe of `dev` (7:9, or
    /// 259:0 for the partition).
    fn fake_probe(
        parent: &str,
        attrs: &[(&str, &str)],
        partition: bool,
    ) -> (tempfile::TempDir, Probe) {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        let put = |rel: &str, v: &str| {
            let p = root.join(rel);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, format!("{v}\n")).unwrap();
        };
        let link = |rel: &str, dev: &str| {
            let p = root.join(format!("dev/block/{dev}"));
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::os::unix::fs::symlink(root.join(rel), p).unwrap();
        };
        let disk = format!("devices/{parent}/block/sdz");
        put(&format!("{disk}/dev"), "7:9");
        put(&format!("{disk}/size"), "131072");
        for (k, v) in attrs {
            put(&format!("{disk}/{k}"), v);
        }
        link(&disk, "7:9");
        let (major, minor) = if partition {
            let part = format!("{disk}/sdz1");
            put(&format!("{part}/dev"), "259:0");
            put(&format!("{part}/partition"), "1");
            put(&format!("{part}/start"), "2048");
            put(&format!("{part}/size"), "4096");
            link(&part, "259:0");
            (259, 0)
        } else {
            (7, 9)
        };
        let probe = blockwise_flash::probe_sysfs(root, major, minor, Path::new("/nonexistent/sdz"))
            .unwrap();
        (dir, probe)
    }

    const QUEUE: [(&str, &str); 3] = [
        ("queue/logical_block_size", "512"),
        ("queue/physical_block_size", "512"),
        ("queue/rotational", "0"),
    ];

    fn check_probed(
        parent: &str,
        more: &[(&str, &str)],
        partition: bool,
        opts: &ProbeOptions,
        skipped: &str,
        origin: &str,
        notes: &[&str],
    ) {
        let attrs: Vec<(&str, &str)> = QUEUE.iter().chain(more).copied().collect();
        let (_dir, probe) = fake_probe(parent, &attrs, partition);
        let p = Probed::new(Path::new("/nonexistent/sdz"), probe, opts);
        assert!(p.estimate.is_none());
        let got = p.estimate_skipped.as_deref().unwrap();
        assert!(got.starts_with(skipped), "{got}");
        let got = p.erase_origin();
        assert!(got.starts_with(origin), "{got}");
        assert_eq!(p.notes, notes);
    }

    /// Why no estimate was made, where the erase block came from, and the notes.
    #[test]
    fn probed_says_why_no_estimate_and_where_the_erase_block_comes_from() {
        let no_estimate = ProbeOptions::default().estimate(false);
        // The kernel's preferred_erase_size wins, whatever the options say.
        check_probed(
            "platform/mmc0",
            &[("device/preferred_erase_size", "4194304")],
            false,
            &ProbeOptions::default(),
            "the kernel gives the erase block (preferred_erase_size)",
            "from ",
            &[],
        );
        check_probed(
            "virtual",
            &[],
            false,
            &no_estimate,
            "--no-estimate",
            "the default: /nonexistent/sdz gives no erase block (no preferred_erase_size)",
            &[],
        );
        check_probed(
            "virtual",
            &[],
            true,
            &ProbeOptions::default(),
            "/nonexistent/sdz is a partition: probe the whole disk /dev/sdz for an estimate",
            "the default: ",
            &[],
        );
        // The estimate needs the device: a failed open is the reason, not an error.
        check_probed(
            "virtual",
            &[],
            false,
            &ProbeOptions::default().on_estimate(|_, _| panic!("no reads without a device")),
            "cannot open /nonexistent/sdz with O_DIRECT for reading: ",
            "the default: ",
            &[],
        );
        // A rotational disk (not a loop device) and a sector size the planner lacks get notes.
        let (_dir, probe) = fake_probe(
            "pci0000:00/0000:00:17.0/ata1/host0/target0:0:0/0:0:0:0",
            &[
                ("queue/logical_block_size", "1024"),
                ("queue/rotational", "1"),
            ],
            false,
        );
        let p = Probed::new(Path::new("/nonexistent/sdz"), probe, &no_estimate);
        assert_eq!(p.notes.len(), 2, "{:?}", p.notes);
        assert!(p.notes[0].contains("rotational"), "{:?}", p.notes);
        assert_eq!(p.notes[1], p.rec.sector_reason);
        assert!(p.rec.sector_bytes.is_none());
    }

    /// The keys of `probe --json`, in order, and the values taken from the probe.
    #[test]
    fn probe_json_has_the_cli_keys() {
        let attrs: Vec<(&str, &str)> = QUEUE.to_vec();
        let (_dir, probe) = fake_probe("virtual", &attrs, false);
        let probed = Probed::new(
            Path::new("/nonexistent/sdz"),
            probe,
            &ProbeOptions::default().estimate(false),
        );
        let r = ProbeReport {
            probed,
            layout: None,
            layout_note: Some("not analysed: x".into()),
        };
        let v = crate::json::probe_json(&r).unwrap();
        let keys: Vec<&str> = v.as_object().unwrap().keys().map(String::as_str).collect();
        assert_eq!(
            keys,
            [
                "device",
                "name",
                "disk",
                "dev",
                "sysfs",
                "partition_start_bytes",
                "size_bytes",
                "logical_block_bytes",
                "physical_block_bytes",
                "minimum_io_bytes",
                "optimal_io_bytes",
                "optimal_io_raw",
                "discard_granularity_bytes",
                "discard_max_bytes",
                "preferred_erase_bytes",
                "alignment_offset_bytes",
                "removable",
                "rotational",
                "read_only",
                "vendor",
                "model",
                "serial",
                "transport",
                "device_type",
                "kernel_partitions",
                "layout",
                "layout_note",
                "estimate",
                "estimate_skipped",
                "recommendation",
                "notes",
            ]
        );
        assert_eq!(v["device"], "/nonexistent/sdz");
        assert_eq!(v["size_bytes"], 131_072 * 512);
        assert_eq!(v["transport"], "virtual");
        assert_eq!(v["layout"], serde_json::Value::Null);
        assert_eq!(v["layout_note"], "not analysed: x");
        assert_eq!(v["estimate"], serde_json::Value::Null);
        assert_eq!(v["estimate_skipped"], "--no-estimate");
        assert_eq!(v["recommendation"]["erase_block_source"], "default");
        assert_eq!(v["recommendation"]["erase_block_bytes"], 4 << 20);
        assert_eq!(v["recommendation"]["sector_bytes"], 512);
    }

    /// A layout that cannot be read becomes the note, as the CLI prints it.
    #[test]
    fn an_unreadable_device_gives_a_layout_note() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("gone");
        let err = FileSource::open(&path).unwrap_err();
        let note = format!("not analysed: {}", one_line(&LayoutError::from(err)));
        assert!(
            note.starts_with(&format!("not analysed: {}: ", path.display())),
            "{note}"
        );
        assert!(!note.contains('\n'));
    }
}
