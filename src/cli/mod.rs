//! Argument parsing, dispatch, exit codes and output helpers. The only place that knows clap,
//! anyhow and the terminal.

mod bench;
mod import;
mod plan;
mod probe;
mod progress;
mod verify;
mod write;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// Exit code for bad usage, bad specs and unreadable input.
pub const EXIT_USAGE: u8 = 2;

/// Flash-aligned disk images built in userspace; alignment reports for any image or device.
#[derive(Debug, Parser)]
#[command(name = "blockwise", version, about, long_about = None)]
pub struct Cli {
    #[command(subcommand)]
    cmd: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Print the aligned layout a spec (or flags) would produce, without writing anything.
    Plan(plan::PlanArgs),
    /// Build an image file from a spec.
    Build(plan::BuildArgs),
    /// Check the alignment and consistency of an image or block device (never writes).
    Verify(verify::VerifyArgs),
    /// Write an image, a compressed image or a spec to a block device or file (O_DIRECT,
    /// block 0 last, verified).
    Write(write::WriteArgs),
    /// What the kernel knows about a stick or card, its partitions' alignment, an erase-block
    /// estimate, and the spec lines to use (reads only).
    Probe(probe::ProbeArgs),
    /// Measure write speed at aligned vs shifted offsets (DESTROYS the target's data).
    Bench(bench::BenchArgs),
    /// Print the spec equivalent to a genimage config or wic kickstart, with a comment per
    /// option blockwise does differently (plan and build also take those files directly).
    Import(import::ImportArgs),
}

/// Runs the command.
pub fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    match cli.cmd {
        Command::Plan(a) => plan::run_plan(&a),
        Command::Build(a) => plan::run_build(&a),
        Command::Verify(a) => verify::run(&a),
        Command::Write(a) => write::run(&a),
        Command::Probe(a) => probe::run(&a),
        Command::Bench(a) => bench::run(&a),
        Command::Import(a) => import::run(&a),
    }
}

/// Writes `text` to stdout. A closed pipe (`blockwise plan --json | head`) ends the program
/// quietly instead of panicking in `println!`.
pub fn emit(text: &str) {
    use std::io::Write as _;
    let mut out = std::io::stdout().lock();
    if let Err(e) = out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
        if e.kind() == std::io::ErrorKind::BrokenPipe {
            std::process::exit(0);
        }
        eprintln!("blockwise: writing to standard output: {e}");
        std::process::exit(i32::from(EXIT_USAGE));
    }
}

/// The error and its causes on one line.
pub fn one_line(e: &anyhow::Error) -> String {
    let mut s = e.to_string();
    for cause in e.chain().skip(1) {
        let c = cause.to_string();
        if !s.contains(&c) {
            s.push_str(": ");
            s.push_str(&c);
        }
    }
    s.replace('\n', " ")
}

/// Exit code for a failed write (the output image or a device).
pub const EXIT_WRITE: u8 = 3;

/// Exit code for an error: bad usage, bad specs and unreadable input are 2; a failed write
/// of the output is 3.
pub fn exit_code(e: &anyhow::Error) -> u8 {
    let write_failed = e
        .chain()
        .filter_map(|c| c.downcast_ref::<blockwise_host::Error>())
        .any(blockwise_host::Error::is_write_failure);
    if write_failed {
        EXIT_WRITE
    } else {
        EXIT_USAGE
    }
}

/// Exit code of work a signal stopped (through [`blockwise_flash::cancel_on_signals`]):
/// 128 + the signal, 130 for SIGINT, 143 for SIGTERM, 129 for SIGHUP.
pub(crate) fn exit_interrupted() -> u8 {
    blockwise_flash::cancelling_signal()
        .and_then(|s| u8::try_from(128 + s).ok())
        .unwrap_or(130)
}

/// Under a file-size limit (`ulimit -f`, RLIMIT_FSIZE) the kernel sends SIGXFSZ to a process
/// that writes or extends a file past it, and its default action kills the process: a build
/// would die by signal and leave its temp file. With a handler installed (it only records
/// the signal), the write fails with EFBIG instead and takes the ordinary path: one line,
/// exit 3, the temp file removed. CPython ignores SIGXFSZ for the same reason.
pub fn survive_file_size_limit() {
    let seen = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let _ = signal_hook::flag::register(signal_hook::consts::SIGXFSZ, seen);
}

/// No command ever prints a Rust panic: a bug becomes one line and exit code 101.
pub fn install_panic_hook() {
    std::panic::set_hook(Box::new(|info| {
        let msg = info
            .payload()
            .downcast_ref::<&str>()
            .map(|s| (*s).to_string())
            .or_else(|| info.payload().downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "unknown".into());
        let at = info
            .location()
            .map(|l| format!(" ({}:{})", l.file(), l.line()))
            .unwrap_or_default();
        eprintln!("blockwise: internal error: {msg}{at}; this is a bug, please report it");
    }));
}
