//! `blockwise write SOURCE TARGET`: an image, a compressed image or a spec flashed to a block
//! device or file through `blockwise-flash`, with the safety checks, a progress bar, a
//! summary or JSON, and one exit code per outcome.

use std::io::{BufRead, IsTerminal as _, Write};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use blockwise_flash::{
    check, check_file_target, data_ids, inspect, open_image, refuse_input_as_target, write, DataId,
    DeviceInfo, DirectMode, Error, Event, MapSource, Options, Outcome, Refusal, Source, Target,
    TargetKind, MAX_CHUNK,
};
use blockwise_geometry::format_size;
use blockwise_host::{build_with_progress, Built, SpecFile};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

/// Exit code: refused or bad input (nothing written).
pub(super) const EXIT_REFUSED: u8 = 2;
/// Exit code: the device failed mid-way.
const EXIT_DEVICE: u8 = 3;

/// Arguments of `blockwise write`.
#[derive(Debug, clap::Args)]
pub struct WriteArgs {
    /// An image (.img; .img.xz/.gz/.zst/.bz2/.lz4/.zip; Android sparse), a block device to
    /// copy, or a spec (.toml) to build and write. What it is goes by its bytes.
    pub source: PathBuf,
    /// A block device (/dev/sdX, /dev/mmcblkN, /dev/disk/by-id/...) or a regular file.
    pub target: PathBuf,
    /// A bmaptool block map: write only its ranges, checking their checksums (default: the
    /// `.bmap` beside the image, when there is one).
    #[arg(long, value_name = "FILE")]
    pub bmap: Option<PathBuf>,
    /// Chunk size, aligned to the erase block (default 4MiB).
    #[arg(long, value_name = "SIZE", default_value = "4MiB")]
    pub chunk: String,
    /// Write zeros also where a block map (.bmap, Android sparse DONT_CARE) leaves the image
    /// out (otherwise those ranges keep the old contents; holes without a block map are
    /// always written as zeros on a device).
    #[arg(long)]
    pub zero_holes: bool,
    /// Discard (BLKDISCARD) the whole device before writing.
    #[arg(long)]
    pub discard: bool,
    /// Read back with O_DIRECT and compare (the default on a terminal).
    #[arg(long, conflicts_with = "no_verify")]
    pub verify: bool,
    /// Do not read back.
    #[arg(long)]
    pub no_verify: bool,
    /// Fail instead of falling back to buffered writes when O_DIRECT is refused.
    #[arg(long)]
    pub direct: bool,
    /// Do not ask for confirmation (a non-removable disk needs it; on a terminal its name
    /// must then also be typed).
    #[arg(long)]
    pub yes: bool,
    /// Allow a partition (e.g. /dev/sdb1) as target.
    #[arg(long)]
    pub partition_ok: bool,
    /// Print the statistics as JSON.
    #[arg(long)]
    pub json: bool,
    /// No progress bar and no notes.
    #[arg(short, long)]
    pub quiet: bool,
    /// Write a source that is no disk image blockwise knows (no partition table, no known
    /// filesystem: a firmware blob) byte for byte instead of refusing it.
    #[arg(long)]
    pub raw: bool,
}

pub(super) fn fail(code: u8, msg: &str) -> ExitCode {
    // Paths and names inside may come from the user or an image: control characters are
    // printed escaped (`\xNN`), never raw.
    eprintln!(
        "blockwise: {}",
        blockwise_geometry::display_str(&msg.replace('\n', " "))
    );
    ExitCode::from(code)
}

/// `write`'s and `bench`'s safety checks on `path` (mounted, swap, held, system disk, a
/// partition without `partition_ok`): `Ok(None)` for a regular file or a path that does not
/// exist yet (a new file; never in `/dev`, where it means a card that is not there), `Err`
/// with the exit code once the refusal is printed.
pub(super) fn inspect_and_check(
    path: &std::path::Path,
    partition_ok: bool,
) -> Result<Option<blockwise_flash::DeviceInfo>, ExitCode> {
    let info = match inspect(path) {
        Ok(i) => i,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) => {
            return Err(fail(
                EXIT_REFUSED,
                &format!("{}: {e}", blockwise_geometry::display_path(path)),
            ))
        }
    };
    match &info {
        Some(info) => check(info, partition_ok),
        None => check_file_target(path),
    }
    .map_err(|r| fail(EXIT_REFUSED, &r.to_string()))?;
    Ok(info)
}

/// Refuses a target that is one of the write's `inputs` (the image, its `.bmap`, a file of
/// the spec), by path before anything is opened for writing, and again by the open
/// descriptor of `target` once it is opened (so a path changed in between is caught) but
/// before anything is written. A block device that appeared where a file was checked
/// (`info` is `None`) is refused too: its device checks were not made.
pub(super) fn refuse_inputs(
    path: &std::path::Path,
    target: Option<&Target>,
    info: Option<&DeviceInfo>,
    inputs: &[(PathBuf, DataId)],
) -> Result<(), ExitCode> {
    let refuse = |r: Refusal| fail(EXIT_REFUSED, &r.to_string());
    let id = match target {
        Some(t) => {
            if info.is_none() && t.kind() != TargetKind::File {
                return Err(fail(
                    EXIT_REFUSED,
                    &format!(
                        "{} became a block device after it was checked; run the write again",
                        blockwise_geometry::display_path(path)
                    ),
                ));
            }
            Some(t.data_id().map_err(|e| {
                fail(
                    EXIT_REFUSED,
                    &format!("{}: {e}", blockwise_geometry::display_path(path)),
                )
            })?)
        }
        None => DataId::of_path(path).map_err(|e| {
            fail(
                EXIT_REFUSED,
                &format!("{}: {e}", blockwise_geometry::display_path(path)),
            )
        })?,
    };
    match id {
        Some(id) => refuse_input_as_target(path, &id, inputs).map_err(refuse),
        None => Ok(()),
    }
}

/// Opens `path` for `write` and `bench`: the open's warnings on stderr (with `warn_suffix`),
/// a read-only device refused. `Err` is the exit code, the message already printed.
pub(super) fn open_target(
    path: &std::path::Path,
    mode: DirectMode,
    warn_suffix: &str,
) -> Result<Target, ExitCode> {
    let (target, warnings) =
        Target::open(path, mode).map_err(|e| fail(EXIT_REFUSED, &e.to_string()))?;
    for w in &warnings {
        eprintln!(
            "blockwise: warning: {}{warn_suffix}",
            blockwise_geometry::display_str(w)
        );
    }
    if target.kind() != TargetKind::File && target.read_only().unwrap_or(false) {
        let r = Refusal::ReadOnly {
            dev: path.display().to_string(),
        };
        return Err(fail(EXIT_REFUSED, &r.to_string()));
    }
    Ok(target)
}

/// The source: an opened image, or a spec built in memory (its content read on demand).
enum Input {
    Image(blockwise_flash::Opened),
    Spec(Box<Built>, PathBuf),
}

/// Runs `blockwise write`.
pub fn run(a: &WriteArgs) -> anyhow::Result<ExitCode> {
    let terminal = std::io::stderr().is_terminal();
    let show = !a.quiet && !a.json;
    let chunk = match blockwise_geometry::parse_size(&a.chunk) {
        Ok(c) if c > MAX_CHUNK => {
            return Ok(fail(
                EXIT_REFUSED,
                &format!(
                    "--chunk {}: at most 64MiB (erase blocks are 4 to 16 MiB; a larger chunk only costs memory)",
                    a.chunk
                ),
            ))
        }
        Ok(c) if c > 0 => c,
        _ => {
            return Ok(fail(
                EXIT_REFUSED,
                &format!("--chunk {}: not a size", a.chunk),
            ))
        }
    };
    let verify = a.verify || (!a.no_verify && terminal && std::io::stdin().is_terminal());
    if !a.source.exists() {
        return Ok(fail(
            EXIT_REFUSED,
            &format!("{}: no such file", a.source.display()),
        ));
    }

    // The target's checks come first: nothing is built or written for a refused target.
    let info = match inspect_and_check(&a.target, a.partition_ok) {
        Ok(i) => i,
        Err(code) => return Ok(code),
    };

    // A spec by its name or its bytes (`sd.conf`, `SD.TOML`): never written as raw bytes.
    // An unreadable source fails below, opened as an image, naming it.
    let is_spec = blockwise_host::is_spec_file(&a.source).unwrap_or(false);
    let mut input = if is_spec {
        // To a block device, the spec is planned for it as `build --device` does (an
        // `erase-block`/`sector-size` that is "auto" or left out takes the device's value),
        // and a left-out `image.size` is the device's, so "fill" fills the card.
        let loaded = match &info {
            Some(_) => super::plan::load_for(&a.source, &a.target, a.quiet || a.json),
            None => SpecFile::load(&a.source).map_err(anyhow::Error::from),
        };
        let mut sf = match loaded {
            Ok(s) => s,
            Err(e) => return Ok(fail(EXIT_REFUSED, &super::one_line(&e))),
        };

        // A regular file as the target may sit inside a contents tree: leave it out.
        sf.outputs.push(a.target.clone());
        let work = std::env::temp_dir().join(format!("blockwise-write-{}", std::process::id()));
        std::fs::create_dir_all(&work)?;
        let mut bar = super::progress::Bar::new(show);
        let built = match build_with_progress(&mut sf, &work, &mut bar) {
            Ok(b) => b,
            Err(e) => {
                let _ = std::fs::remove_dir_all(&work);
                return Ok(fail(EXIT_REFUSED, &e.to_string()));
            }
        };
        for w in &built.warnings {
            bar.println(&format!(
                "blockwise: warning: {}",
                blockwise_geometry::display_str(w)
            ));
        }
        Input::Spec(Box::new(built), work)
    } else {
        match open_image(&a.source, a.bmap.as_deref(), a.raw) {
            Ok(o) => Input::Image(o),
            Err(e) => return Ok(fail(EXIT_REFUSED, &e.to_string())),
        }
    };
    let code = write_input(a, &mut input, info.as_ref(), chunk, verify, show);
    if let Input::Spec(_, work) = &input {
        let _ = std::fs::remove_dir_all(work);
    }
    code
}

fn write_input(
    a: &WriteArgs,
    input: &mut Input,
    info: Option<&DeviceInfo>,
    chunk: u64,
    verify: bool,
    show: bool,
) -> anyhow::Result<ExitCode> {
    // What the write reads, which the target must not be.
    let inputs = match &*input {
        Input::Image(o) => {
            let mut paths = vec![a.source.as_path()];
            paths.extend(o.bmap.as_deref());
            data_ids(&paths)
        }
        Input::Spec(built, _) => built.inputs(),
    };
    if let Err(code) = refuse_inputs(&a.target, None, info, &inputs) {
        return Ok(code);
    }
    let mut spec_source;
    let source: &mut dyn Source = match input {
        Input::Image(o) => {
            if show {
                for n in &o.notes {
                    eprintln!("blockwise: {n}");
                }
            }
            &mut *o.source
        }
        Input::Spec(built, _) => {
            spec_source = MapSource::new(
                built.image.reader(&built.content),
                built.image.mapped_ranges(),
            );
            &mut spec_source
        }
    };
    if let (Some(info), Some(size)) = (info, source.size()) {
        if size > info.size_bytes {
            return Ok(fail(
                EXIT_REFUSED,
                &Refusal::TooSmall {
                    dev: info.path.display().to_string(),
                    dev_bytes: info.size_bytes,
                    image_bytes: size,
                }
                .to_string(),
            ));
        }
    }
    if let Some(info) = info {
        if let Err(msg) = confirm(info, a.yes) {
            return Ok(fail(EXIT_REFUSED, &msg));
        }
    }
    let mode = if a.direct {
        DirectMode::Require
    } else {
        DirectMode::Prefer
    };
    let mut target = match open_target(&a.target, mode, "") {
        Ok(t) => t,
        Err(code) => return Ok(code),
    };
    if let Err(code) = refuse_inputs(&a.target, Some(&target), info, &inputs) {
        return Ok(code);
    }
    let cancel = blockwise_flash::cancel_on_signals()
        .unwrap_or_else(|_| std::sync::Arc::new(AtomicBool::new(false)));
    let opts = Options::default()
        .chunk(chunk)
        .zero_holes(a.zero_holes)
        .discard(a.discard)
        .verify(verify);
    let bar = WriteBar::new(show);
    let result = write(&mut target, source, &opts, &cancel, &mut |e| bar.event(e));
    drop(bar);
    Ok(report(a, result, target.is_direct()))
}

fn report(a: &WriteArgs, result: Result<Outcome, Error>, direct: bool) -> ExitCode {
    let out = match result {
        Ok(o) => o,
        Err(e) => {
            let code = if e.is_device_failure() {
                EXIT_DEVICE
            } else {
                EXIT_REFUSED
            };
            return fail(code, &e.to_string());
        }
    };
    let s = &out.stats;
    if a.json {
        let json = blockwise_flash::write_json(
            &out,
            &a.source.display().to_string(),
            &a.target.display().to_string(),
            direct,
        );
        super::emit(&format!("{json:#}\n"));
    } else {
        if !a.quiet {
            for n in &out.notes {
                eprintln!("blockwise: {}", blockwise_geometry::display_str(n));
            }
        }
        let verified = match s.verify_mb_per_s {
            Some(v) if s.verified => format!(", verified at {v:.1} MB/s"),
            _ if out.interrupted_verifying => format!(
                ", read back {} before the interrupt",
                format_size(out.verified_bytes)
            ),
            _ => String::new(),
        };
        super::emit(&format!(
            "{} {} of {} to {} in {:.2} s: {:.1} MB/s (chunks {:.1}/{:.1}/{:.1} MB/s min/median/max, fsync {:.2} s){}\n",
            if out.interrupted && !out.interrupted_verifying { "interrupted after writing" } else { "wrote" },
            format_size(s.bytes_written),
            blockwise_geometry::display_path(&a.source),
            blockwise_geometry::display_path(&a.target),
            s.seconds,
            s.mb_per_s,
            s.chunk_mb_per_s.min,
            s.chunk_mb_per_s.median,
            s.chunk_mb_per_s.max,
            s.fsync_seconds,
            verified,
        ));
    }
    if out.interrupted_verifying {
        eprintln!(
            "blockwise: interrupted during the read-back after checking {} of the written bytes: the image was written and synced in full but is NOT verified",
            out.verified_bytes
        );
        return ExitCode::from(super::exit_interrupted());
    }
    if out.interrupted {
        eprintln!(
            "blockwise: interrupted at offset {} after {} bytes; synced; block 0 was not written, so the target holds no valid image",
            out.offset_reached, s.bytes_written
        );
        return ExitCode::from(super::exit_interrupted());
    }
    ExitCode::SUCCESS
}

/// Asks for confirmation where it is needed, on the terminal (stdin and stderr).
fn confirm(info: &DeviceInfo, yes: bool) -> Result<(), String> {
    let interactive = std::io::stdin().is_terminal() && std::io::stderr().is_terminal();
    confirm_with(
        info,
        yes,
        interactive,
        &mut std::io::stdin().lock(),
        &mut std::io::stderr(),
    )
}

/// A non-removable disk needs `yes` and, when `interactive`, its name typed back; a
/// removable one asks y/N when `interactive` unless `yes`, and needs `yes` otherwise. The
/// question shows model, size and partitions.
fn confirm_with(
    info: &DeviceInfo,
    yes: bool,
    interactive: bool,
    input: &mut dyn BufRead,
    prompt: &mut dyn Write,
) -> Result<(), String> {
    let dev = info.path.display().to_string();
    let what = info.describe();
    let mut ask = |question: String| {
        let _ = write!(prompt, "blockwise: {question}");
        let _ = prompt.flush();
        let mut line = String::new();
        let _ = input.read_line(&mut line);
        line.trim().to_string()
    };
    if !info.removable {
        if !yes {
            return Err(Refusal::NotConfirmed(format!(
                "{what} is not a removable disk: pass --yes to write to it anyway"
            ))
            .to_string());
        }
        if interactive {
            let typed = ask(format!(
                "{what} is NOT removable and will be overwritten. Type its name ({}) to go on: ",
                info.name
            ));
            if typed != info.name && typed != dev {
                return Err("not confirmed: the name typed does not match".into());
            }
        }
        return Ok(());
    }
    if yes {
        return Ok(());
    }
    if !interactive {
        return Err(format!(
            "{what} would be overwritten: pass --yes (no terminal to confirm on)"
        ));
    }
    if matches!(
        ask(format!("overwrite {what}? [y/N] ")).as_str(),
        "y" | "Y" | "yes"
    ) {
        Ok(())
    } else {
        Err("not confirmed".into())
    }
}

/// The write's progress bar: bytes, MB/s and ETA on a terminal, hidden otherwise.
struct WriteBar {
    bar: ProgressBar,
}

impl WriteBar {
    fn new(wanted: bool) -> Self {
        let target = if wanted && std::io::stderr().is_terminal() {
            ProgressDrawTarget::stderr()
        } else {
            ProgressDrawTarget::hidden()
        };
        WriteBar {
            bar: ProgressBar::with_draw_target(None, target),
        }
    }

    fn style(&self, verb: &str) {
        self.bar.set_style(
            ProgressStyle::with_template(&format!(
                "{verb} [{{bar:30}}] {{bytes}}/{{total_bytes}} {{bytes_per_sec}} ETA {{eta}}"
            ))
            .unwrap_or_else(|_| ProgressStyle::default_bar())
            .progress_chars("=> "),
        );
    }

    fn event(&self, e: Event) {
        match e {
            Event::Writing { total } => {
                self.style("writing  ");
                if let Some(t) = total {
                    self.bar.set_length(t);
                }
                self.bar.set_position(0);
            }
            Event::Written(n) | Event::Verified(n) => self.bar.set_position(n),
            Event::Syncing => {
                self.bar.set_style(
                    ProgressStyle::with_template("{spinner} {msg} {elapsed}")
                        .unwrap_or_else(|_| ProgressStyle::default_spinner()),
                );
                self.bar.set_message("syncing to the device");
                self.bar.enable_steady_tick(Duration::from_millis(120));
            }
            Event::Verifying { total } => {
                self.bar.disable_steady_tick();
                self.style("verifying");
                self.bar.set_length(total);
                self.bar.set_position(0);
            }
        }
    }
}

impl Drop for WriteBar {
    fn drop(&mut self) {
        self.bar.finish_and_clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn disk(removable: bool) -> DeviceInfo {
        DeviceInfo {
            path: "/dev/sdz".into(),
            name: "sdz".into(),
            disk: "sdz".into(),
            is_partition: false,
            devs: vec![],
            size_bytes: 32_000_000_000,
            removable,
            read_only: false,
            model: "ACME Stick".into(),
            partitions: vec!["sdz1".into()],
        }
    }

    fn check(removable: bool, yes: bool, interactive: bool, typed: &str) -> (bool, String) {
        let mut prompt = Vec::new();
        let r = confirm_with(
            &disk(removable),
            yes,
            interactive,
            &mut typed.as_bytes(),
            &mut prompt,
        );
        (r.is_ok(), String::from_utf8(prompt).unwrap())
    }

    #[test]
    fn confirmation_rules() {
        // Non-removable: --yes needed; on a terminal also the name.
        assert!(!check(false, false, true, "sdz\n").0);
        assert!(check(false, true, false, "").0);
        let (ok, prompt) = check(false, true, true, "sdz\n");
        assert!(ok && prompt.contains("NOT removable") && prompt.contains("ACME Stick"));
        assert!(check(false, true, true, "/dev/sdz\n").0);
        assert!(!check(false, true, true, "y\n").0);
        // Removable: --yes skips; a terminal asks, showing model, size and partitions.
        assert!(check(true, true, false, "").0);
        assert!(!check(true, false, false, "").0);
        let (ok, prompt) = check(true, false, true, "y\n");
        assert!(
            ok && prompt.contains("ACME Stick") && prompt.contains("sdz1"),
            "{prompt}"
        );
        assert!(!check(true, false, true, "\n").0);
    }
}
