//! The progress display of `blockwise build`: a spinner while scanning and planning, then a
//! bar with bytes, rate and ETA while writing. Only on a terminal, never with `--json` or
//! `--quiet`.

use std::io::IsTerminal as _;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use blockwise_host::{Phase, Progress};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

/// Draws [`Progress`] on stderr with indicatif (hidden when not wanted).
pub struct Bar {
    bar: ProgressBar,
    files: u64,
    /// The signal (SIGINT, SIGTERM, SIGHUP) that asked the work to stop, 0 while none did.
    signal: Arc<AtomicUsize>,
}

/// Makes SIGINT, SIGTERM and SIGHUP set `signal` (to their number) instead of killing the
/// process, so that a build can stop, remove its temp file and exit 128 + the signal. A
/// second signal while one is pending ends the process at once.
fn catch_signals(signal: &Arc<AtomicUsize>) {
    use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
    for sig in [SIGINT, SIGTERM, SIGHUP] {
        let Ok(n) = usize::try_from(sig) else {
            continue;
        };
        let pending = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let _ =
            signal_hook::flag::register_conditional_shutdown(sig, 128 + sig, Arc::clone(&pending));
        let _ = signal_hook::flag::register(sig, pending);
        let _ = signal_hook::flag::register_usize(sig, Arc::clone(signal), n);
    }
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
        let signal = Arc::new(AtomicUsize::new(0));
        catch_signals(&signal);
        Bar {
            bar,
            files: 0,
            signal,
        }
    }

    /// The signal that stopped the work, if one did.
    pub fn signal(&self) -> Option<usize> {
        Some(self.signal.load(Ordering::Relaxed)).filter(|&s| s != 0)
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
        self.files = self.files.saturating_add(n);
        self.bar.inc(n);
    }
}

impl Drop for Bar {
    fn drop(&mut self) {
        self.bar.finish_and_clear();
    }
}
