//! Stopping long work: a caller's `threading.Event`, Ctrl-C and SIGTERM, and progress
//! callbacks that raise.
//!
//! Every operation (`plan`, `build`, `verify`, `write`, `probe`) runs as an [`Op`]. While it
//! works without the GIL, the host and the writer poll it (the scan per entry, the write per
//! piece and per 64 MiB copied, the `.bmap` hasher every 20 ms, the read-back per 1 MiB read).
//! A poll reads atomics; at most every [`POLL`] it takes the GIL to run the Python side: the
//! `cancel` event's `is_set()`, the progress callback, and `PyErr_CheckSignals` in the main
//! thread. Once anything asks to stop, [`Op::flag`] is set and stays set; the host then
//! removes its temp files and returns `Cancelled`, the writer stops after the chunk in flight.
//!
//! **Signals.** Python runs its signal handlers in the main thread only: a Ctrl-C raises
//! `KeyboardInterrupt` there while builds in worker threads (a `ThreadPoolExecutor`) would
//! run to their end, and the interpreter would wait for them. So the first operation also
//! registers a flag on SIGINT (through `signal-hook`, which chains to Python's own handler,
//! so `KeyboardInterrupt` is raised in the main thread as always) that every running
//! operation polls: all of them stop. That is done only while SIGINT has Python's default
//! handler (`signal.default_int_handler`); a program with its own handler keeps it alone.
//!
//! SIGTERM and SIGHUP terminate a Python process at once by default, which would leave a
//! build's temp file behind. While their disposition is the default (`SIG_DFL`), the first
//! operation registers a flag on them too: running operations stop and clean up, and when
//! the last one has returned, the default action is carried out (the process ends by that
//! signal, as it would have). With no operation running the default action runs at once.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use pyo3::prelude::*;

use crate::errors;

/// How often a long operation takes the GIL back to report progress and check for a cancel.
pub(crate) const POLL: Duration = Duration::from_millis(50);

/// The process-wide signal flags and the count of running operations.
struct Signals {
    /// Set by SIGINT (while registered); cleared when an operation starts with none running.
    interrupt: Arc<AtomicBool>,
    /// Set by SIGTERM or SIGHUP (while registered): the signal's number.
    terminate: Arc<AtomicUsize>,
    /// True while no operation runs: SIGTERM/SIGHUP then take their default action at once.
    idle: Arc<AtomicBool>,
    /// Running operations.
    running: Mutex<usize>,
    /// Whether SIGTERM/SIGHUP were registered (their disposition was the default).
    terminate_registered: AtomicBool,
}

fn signals() -> &'static Signals {
    static SIGNALS: OnceLock<Signals> = OnceLock::new();
    SIGNALS.get_or_init(|| Signals {
        interrupt: Arc::new(AtomicBool::new(false)),
        terminate: Arc::new(AtomicUsize::new(0)),
        idle: Arc::new(AtomicBool::new(true)),
        running: Mutex::new(0),
        terminate_registered: AtomicBool::new(false),
    })
}

/// Registers the signal flags once, as the module docs say. Errors (a Python without the
/// `signal` module, a refused `sigaction`) leave Python's own handling alone.
fn register_signals(py: Python<'_>) {
    use pyo3::sync::OnceExt;
    static ONCE: std::sync::Once = std::sync::Once::new();
    // Waits for another thread's registration without the GIL: that thread imports
    // `signal`, which may release the GIL and need it back (a plain `call_once` deadlocked
    // two builds started together in a ThreadPoolExecutor).
    ONCE.call_once_py_attached(py, || {
        let _ = try_register(py);
    });
}

fn try_register(py: Python<'_>) -> PyResult<()> {
    use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
    let s = signals();
    let signal = py.import("signal")?;
    let handler_of = |sig: i32| signal.getattr("getsignal").and_then(|f| f.call1((sig,)));
    let default_int = signal.getattr("default_int_handler")?;
    if handler_of(SIGINT)?.is(&default_int) {
        let _ = signal_hook::flag::register(SIGINT, Arc::clone(&s.interrupt));
    }
    let sig_dfl = signal.getattr("SIG_DFL")?;
    let mut any = false;
    for sig in [SIGTERM, SIGHUP] {
        if !handler_of(sig)?.eq(&sig_dfl)? {
            continue;
        }
        // The default action first, when idle: registered before the flag, so it runs first.
        if signal_hook::flag::register_conditional_default(sig, Arc::clone(&s.idle)).is_ok() {
            if let Ok(n) = usize::try_from(sig) {
                let _ = signal_hook::flag::register_usize(sig, Arc::clone(&s.terminate), n);
            }
            any = true;
        }
    }
    s.terminate_registered.store(any, Ordering::SeqCst);
    Ok(())
}

/// Why an operation stopped.
pub(crate) enum Stop {
    /// The `cancel` event was set.
    Event,
    /// Ctrl-C, seen through the SIGINT flag in a thread that is not Python's main thread.
    Interrupt,
    /// SIGTERM or SIGHUP.
    Terminate(usize),
    /// Python raised: the progress callback, or a signal handler in the main thread
    /// (`KeyboardInterrupt`). Re-raised as it is.
    Raised(PyErr),
}

/// The progress callback and how to call it.
struct Callback {
    func: Py<PyAny>,
    /// `progress(done, total)`, the old form: called for the write phase only.
    legacy: bool,
}

/// One running operation: what can stop it, and its progress callback.
pub(crate) struct Op {
    flag: Arc<AtomicBool>,
    event: Option<Py<PyAny>>,
    main_thread: bool,
    callback: Option<Callback>,
    stop: Mutex<Option<Stop>>,
    last_poll: Mutex<Instant>,
    /// Held by the thread that runs this operation's Python side, taken *before* the GIL:
    /// the writer and the `.bmap` hasher both poll, and a thread that held the GIL while
    /// waiting for a Rust lock held by one that waits for the GIL (the callback released it)
    /// would deadlock both.
    python: Mutex<()>,
    /// The last `(phase, done, total)` given to the callback.
    reported: Mutex<Option<(&'static str, u64, Option<u64>)>>,
}

impl Op {
    /// Starts an operation (registering the signal flags the first time): `cancel` is the
    /// caller's `threading.Event` (anything with `is_set()`), `progress` the callback.
    pub(crate) fn start(
        py: Python<'_>,
        cancel: Option<Bound<'_, PyAny>>,
        progress: Option<Bound<'_, PyAny>>,
    ) -> PyResult<Op> {
        if let Some(c) = &cancel {
            if !c.hasattr("is_set")? {
                return Err(pyo3::exceptions::PyTypeError::new_err(format!(
                    "cancel must be a threading.Event (anything with is_set()), not {}",
                    errors::type_name(c)
                )));
            }
        }
        let callback = match progress {
            None => None,
            Some(f) if f.is_none() => None,
            Some(f) => {
                if !f.is_callable() {
                    return Err(pyo3::exceptions::PyTypeError::new_err(format!(
                        "progress must be a callable taking (phase, done, total), not {}",
                        errors::type_name(&f)
                    )));
                }
                let legacy = positional_params(py, &f) == Some(2);
                if legacy {
                    let category = py.get_type::<pyo3::exceptions::PyDeprecationWarning>();
                    PyErr::warn(
                        py,
                        &category,
                        c"progress(done, total) is deprecated: take (phase, done, total); the old form is called for the write phase only",
                        2,
                    )?;
                }
                Some(Callback {
                    func: f.unbind(),
                    legacy,
                })
            }
        };
        register_signals(py);
        let main_thread = {
            let threading = py.import("threading")?;
            let main = threading.call_method0("main_thread")?.getattr("ident")?;
            let me = threading.call_method0("get_ident")?;
            main.eq(me)?
        };
        let s = signals();
        {
            let mut n = s
                .running
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            if *n == 0 {
                // A Ctrl-C while nothing ran is not this operation's.
                s.interrupt.store(false, Ordering::SeqCst);
            }
            *n += 1;
            s.idle.store(false, Ordering::SeqCst);
        }
        Ok(Op {
            flag: Arc::new(AtomicBool::new(false)),
            event: cancel.map(Bound::unbind),
            main_thread,
            callback,
            stop: Mutex::new(None),
            // The first poll looks at the event: an operation started with it set stops at once.
            last_poll: Mutex::new(
                Instant::now()
                    .checked_sub(POLL)
                    .unwrap_or_else(Instant::now),
            ),
            python: Mutex::new(()),
            reported: Mutex::new(None),
        })
    }

    /// The flag the host and the writer poll: set once anything asked to stop.
    pub(crate) fn flag(&self) -> &Arc<AtomicBool> {
        &self.flag
    }

    /// Whether the operation must stop. Reads atomics; at most every [`POLL`] (or when
    /// `force`) takes the GIL to check the event and the main thread's signals, and reports
    /// `progress` (`(phase, done, total)`) to the callback.
    pub(crate) fn poll(
        &self,
        progress: Option<(&'static str, u64, Option<u64>)>,
        force: bool,
    ) -> bool {
        if self.flag.load(Ordering::Relaxed) {
            return true;
        }
        let s = signals();
        if s.interrupt.load(Ordering::Relaxed) && !self.main_thread {
            self.set(Stop::Interrupt);
            return true;
        }
        let term = s.terminate.load(Ordering::Relaxed);
        if term != 0 {
            self.set(Stop::Terminate(term));
            return true;
        }
        {
            let mut last = self
                .last_poll
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            if !force && last.elapsed() < POLL {
                return false;
            }
            *last = Instant::now();
        }
        // Never called with the GIL held (the work runs in `allow_threads`), so this lock is
        // always taken before the GIL, never while holding it.
        let _python = self
            .python
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if self.flag.load(Ordering::Relaxed) {
            return true;
        }
        let result = Python::with_gil(|py| -> PyResult<Option<Stop>> {
            if self.main_thread {
                // Runs Python's handlers: Ctrl-C raises KeyboardInterrupt here.
                py.check_signals()?;
            }
            if let Some(event) = &self.event {
                if event.bind(py).call_method0("is_set")?.is_truthy()? {
                    return Ok(Some(Stop::Event));
                }
            }
            if let (Some(cb), Some(now)) = (&self.callback, progress) {
                self.report(py, cb, now)?;
            }
            Ok(None)
        });
        match result {
            Ok(None) => false,
            Ok(Some(stop)) => {
                self.set(stop);
                true
            }
            Err(e) => {
                self.set(Stop::Raised(e));
                true
            }
        }
    }

    /// Calls the callback with `now` unless it was the last report.
    fn report(
        &self,
        py: Python<'_>,
        cb: &Callback,
        now: (&'static str, u64, Option<u64>),
    ) -> PyResult<()> {
        let mut reported = self
            .reported
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if *reported == Some(now) {
            return Ok(());
        }
        *reported = Some(now);
        let (phase, done, total) = now;
        if cb.legacy {
            if phase == "write" {
                cb.func.call1(py, (done, total.unwrap_or(0)))?;
            }
        } else {
            cb.func.call1(py, (phase, done, total))?;
        }
        Ok(())
    }

    fn set(&self, stop: Stop) {
        let mut s = self
            .stop
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if s.is_none() {
            *s = Some(stop);
        }
        self.flag.store(true, Ordering::SeqCst);
    }

    /// Whether the operation was asked to stop.
    pub(crate) fn stopped(&self) -> bool {
        self.flag.load(Ordering::SeqCst)
    }

    /// The exception for a stopped operation: the callback's or the signal handler's as
    /// raised, `KeyboardInterrupt` for Ctrl-C, `CancelledError` for the event or SIGTERM.
    /// `what` says what was left, e.g. `nothing was written`.
    pub(crate) fn error(&self, py: Python<'_>, what: &str) -> PyErr {
        let stop = self
            .stop
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .take();
        match stop {
            Some(Stop::Raised(e)) => e,
            Some(Stop::Event) => errors::cancelled(py, &format!("cancelled: {what}")),
            Some(Stop::Terminate(sig)) => errors::cancelled(
                py,
                &format!("stopped by signal {sig} (SIGTERM or SIGHUP): {what}"),
            ),
            Some(Stop::Interrupt) | None => {
                if self.main_thread {
                    // The handler has not run yet: let it raise (KeyboardInterrupt, or the
                    // program's own exception).
                    if let Err(e) = py.check_signals() {
                        return e;
                    }
                }
                pyo3::exceptions::PyKeyboardInterrupt::new_err(format!("interrupted: {what}"))
            }
        }
    }
}

impl Drop for Op {
    fn drop(&mut self) {
        let s = signals();
        let last = {
            let mut n = s
                .running
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            *n = n.saturating_sub(1);
            *n == 0
        };
        if !last {
            return;
        }
        // From now on SIGTERM/SIGHUP take their default action at once; one that came while
        // operations ran takes it now that they have cleaned up.
        s.idle.store(true, Ordering::SeqCst);
        let sig = s.terminate.swap(0, Ordering::SeqCst);
        if sig != 0 && s.terminate_registered.load(Ordering::SeqCst) {
            if let Ok(sig) = i32::try_from(sig) {
                let _ = signal_hook::low_level::emulate_default_handler(sig);
            }
        }
    }
}

/// The number of positional parameters `f` takes, `None` when it takes any number (`*args`)
/// or its signature is unknown.
fn positional_params(py: Python<'_>, f: &Bound<'_, PyAny>) -> Option<usize> {
    let inspect = py.import("inspect").ok()?;
    let sig = inspect.call_method1("signature", (f,)).ok()?;
    let params = sig
        .getattr("parameters")
        .ok()?
        .call_method0("values")
        .ok()?;
    let kinds = inspect.getattr("Parameter").ok()?;
    let var = kinds.getattr("VAR_POSITIONAL").ok()?;
    let only = kinds.getattr("POSITIONAL_ONLY").ok()?;
    let either = kinds.getattr("POSITIONAL_OR_KEYWORD").ok()?;
    let mut n = 0;
    for p in params.try_iter().ok()? {
        let kind = p.ok()?.getattr("kind").ok()?;
        if kind.eq(&var).ok()? {
            return None;
        }
        if kind.eq(&only).ok()? || kind.eq(&either).ok()? {
            n += 1;
        }
    }
    Some(n)
}

/// A scoped helper thread that polls `op` every [`POLL`] while `work` runs (for work that
/// polls nothing itself: the probe's timed reads). Returns what `work` returned.
pub(crate) fn watched<T: Send>(py: Python<'_>, op: &Op, work: impl FnOnce() -> T + Send) -> T {
    let done = AtomicBool::new(false);
    py.allow_threads(|| {
        std::thread::scope(|s| {
            s.spawn(|| {
                while !done.load(Ordering::SeqCst) {
                    if op.poll(None, false) {
                        break;
                    }
                    std::thread::sleep(Duration::from_millis(10));
                }
            });
            let out = work();
            done.store(true, Ordering::SeqCst);
            out
        })
    })
}

// `Op` is shared with the helper thread of [`watched`] and used from the thread that runs
// the work; its Python objects are only touched with the GIL held.
const _: fn() = || {
    fn sync<T: Sync + Send>() {}
    sync::<Op>();
};

/// Progress of a build or plan for the host: `("scan", entries, None)`, `("write", bytes,
/// total)`, `("hash", bytes, total)`, polled through the [`Op`].
pub(crate) struct BuildProgress<'a> {
    op: &'a Op,
    phase: Option<&'static str>,
    done: u64,
    total: Option<u64>,
}

impl<'a> BuildProgress<'a> {
    pub(crate) fn new(op: &'a Op) -> Self {
        BuildProgress {
            op,
            phase: None,
            done: 0,
            total: None,
        }
    }

    fn now(&self) -> Option<(&'static str, u64, Option<u64>)> {
        self.phase.map(|p| (p, self.done, self.total))
    }

    /// Reports the current phase as finished (its last `(done, total)`), before another.
    fn finish_phase(&mut self) {
        if let Some(p) = self.phase {
            if let Some(t) = self.total {
                self.done = t;
            }
            self.op.poll(Some((p, self.done, self.total)), true);
        }
    }
}

impl blockwise_host::Progress for BuildProgress<'_> {
    fn phase(&mut self, phase: blockwise_host::Phase) {
        use blockwise_host::Phase;
        let next = match phase {
            Phase::Scanning => Some(("scan", None)),
            Phase::Writing { bytes } => Some(("write", Some(bytes))),
            Phase::Hashing { bytes } => Some(("hash", Some(bytes))),
            _ => None,
        };
        match next {
            Some((name, total)) => {
                if self.phase != Some(name) {
                    self.finish_phase();
                }
                self.phase = Some(name);
                self.done = 0;
                self.total = total;
                self.op.poll(self.now(), true);
            }
            None => {
                self.finish_phase();
                self.phase = None;
                self.op.poll(None, false);
            }
        }
    }

    fn advance(&mut self, n: u64) {
        self.done = self.done.saturating_add(n);
        if let Some(t) = self.total {
            self.done = self.done.min(t);
        }
        self.op.poll(self.now(), false);
    }

    fn cancelled(&mut self) -> bool {
        self.op.poll(self.now(), false)
    }
}

/// A write's progress from the writer's events: `("write", bytes, total)` (`total` is
/// `None` for a compressed image without a bmap until the end) and `("verify", bytes,
/// total)` for the read-back, polled through the [`Op`].
pub(crate) struct WriteProgress<'a> {
    op: &'a Op,
    phase: Option<&'static str>,
    done: u64,
    total: Option<u64>,
}

impl<'a> WriteProgress<'a> {
    pub(crate) fn new(op: &'a Op) -> Self {
        WriteProgress {
            op,
            phase: None,
            done: 0,
            total: None,
        }
    }

    fn now(&self) -> Option<(&'static str, u64, Option<u64>)> {
        self.phase.map(|p| (p, self.done, self.total))
    }

    /// Handles one event of the writer.
    pub(crate) fn event(&mut self, e: blockwise_flash::Event) {
        use blockwise_flash::Event;
        match e {
            Event::Writing { total } => {
                self.phase = Some("write");
                self.total = total;
                self.done = 0;
                self.op.poll(self.now(), true);
            }
            Event::Written(n) => {
                self.done = self.total.map_or(n, |t| n.min(t));
                self.op.poll(self.now(), false);
            }
            Event::Syncing => {
                if self.total.is_none() {
                    self.total = Some(self.done);
                }
                self.done = self.total.unwrap_or(self.done);
                self.op.poll(self.now(), true);
            }
            Event::Verifying { total } => {
                self.phase = Some("verify");
                self.total = Some(total);
                self.done = 0;
                self.op.poll(self.now(), true);
            }
            Event::Verified(n) => {
                self.done = self.total.map_or(n, |t| n.min(t));
                let last = self.total == Some(self.done);
                self.op.poll(self.now(), last);
            }
        }
    }
}
