//! The progress display of `blockwise build`: a spinner while scanning and planning, then a
//! bar with bytes, rate and ETA while writing. Only on a terminal, never with `--json` or
//! `--quiet`.

use std::io::IsTerminal as _;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use blockwise_host::{Phase, Progress};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

/// Draws [`Progress`] on stderr with indicatif (hidden when not wanted).
pub struct Bar {
    bar: ProgressBar,
    files: u64,
    /// The phase reached, and the bytes written / to write while writing: how far the work
    /// got when a signal stopped it.
    phase: Option<Phase>,
    bytes: u64,
    /// Set by SIGINT, SIGTERM or SIGHUP instead of killing the process
    /// ([`blockwise_flash::cancel_on_signals`], as `write` and `bench` use it), so that a build
    /// can stop, remove its temp file and exit 128 + the signal. A second signal while one is
    /// pending ends the process at once.
    cancel: Arc<AtomicBool>,
}

impl Bar {
    /// A bar on stderr when `wanted` and stderr is a terminal; otherwise hidden.
    pub fn new(wanted: bool) -> Self {
        let target = if wanted && std::io::stderr().is_terminal() {
            ProgressDrawTarget::stderr()
        } else {
            ProgressDrawTarget::hidden()
        };
        let bar = ProgressBar::with_draw_target(None, target);
        let cancel = blockwise_flash::cancel_on_signals()
            .unwrap_or_else(|_| Arc::new(AtomicBool::new(false)));
        Bar {
            bar,
            files: 0,
            phase: None,
            bytes: 0,
            cancel,
        }
    }

    /// The signal that stopped the work, if one did.
    pub fn signal(&self) -> Option<i32> {
        if self.cancel.load(Ordering::Relaxed) {
            blockwise_flash::cancelling_signal()
        } else {
            None
        }
    }

    /// How far the work got, for the message of an interrupted plan or build: `while
    /// scanning (1234 files)`, `while writing (12 MiB of 64 MiB)` …
    pub fn reached(&self) -> String {
        match self.phase {
            None | Some(Phase::Scanning) => format!("while scanning ({} files)", self.files),
            Some(Phase::Planning) => format!("while planning ({} files scanned)", self.files),
            Some(Phase::Assembling) => "while laying out metadata".into(),
            Some(Phase::Writing { bytes }) => format!(
                "while writing ({} of {})",
                blockwise_geometry::format_size(self.bytes),
                blockwise_geometry::format_size(bytes)
            ),
            Some(Phase::Hashing { .. }) => "while hashing the .bmap".into(),
            Some(Phase::Syncing) => "while syncing".into(),
            Some(_) => "at the end".into(),
        }
    }

    /// Prints a line above the bar (or plainly when it is hidden).
    pub fn println(&self, line: &str) {
        if self.bar.is_hidden() {
            eprintln!("{line}");
        } else {
            self.bar.println(line);
        }
    }

    fn spinner(&self, message: &'static str) {
        self.bar.set_style(
            ProgressStyle::with_template("{spinner} {msg} {pos} {elapsed}")
                .unwrap_or_else(|_| ProgressStyle::default_spinner()),
        );
        self.bar.set_length(0);
        self.bar.set_position(0);
        self.bar.set_message(message);
        self.bar.enable_steady_tick(Duration::from_millis(120));
    }
}

impl Progress for Bar {
    fn phase(&mut self, phase: Phase) {
        self.phase = Some(phase);
        match phase {
            Phase::Scanning => self.spinner("scanning contents: files"),
            Phase::Planning => {
                self.bar
                    .set_message(format!("planning ({} files)", self.files));
            }
            Phase::Assembling => self.bar.set_message("laying out metadata"),
            Phase::Writing { bytes } => {
                self.bar.set_style(
                    ProgressStyle::with_template(
                        "writing  [{bar:30}] {bytes}/{total_bytes} {bytes_per_sec} ETA {eta}",
                    )
                    .unwrap_or_else(|_| ProgressStyle::default_bar())
                    .progress_chars("=> "),
                );
                self.bar.set_length(bytes);
                self.bar.set_position(0);
            }
            Phase::Hashing { bytes } => {
                self.bar.set_message("hashing the .bmap");
                self.bar.set_length(bytes);
                self.bar.set_position(0);
            }
            Phase::Syncing => {
                self.bar.set_style(
                    ProgressStyle::with_template("{spinner} {msg} {elapsed}")
                        .unwrap_or_else(|_| ProgressStyle::default_spinner()),
                );
                self.bar.set_message("syncing to disk");
            }
            Phase::Done => self.bar.finish_and_clear(),
            _ => {}
        }
    }

    fn cancelled(&mut self) -> bool {
        self.signal().is_some()
    }

    fn advance(&mut self, n: u64) {
        if matches!(
            self.phase,
            Some(Phase::Writing { .. } | Phase::Hashing { .. })
        ) {
            self.bytes = self.bytes.saturating_add(n);
        } else {
            self.files = self.files.saturating_add(n);
        }
        self.bar.inc(n);
    }
}

impl Drop for Bar {
    fn drop(&mut self) {
        self.bar.finish_and_clear();
    }
}
