//! Finding and running the host tools the tests compare against (the oracles), and the
//! `DISKIMG_REQUIRE_ORACLES` policy: a missing tool is a skip locally and a failure in CI.

use std::ffi::OsStr;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// Searched after `PATH`: e2fsprogs, dosfstools, util-linux and losetup live in the sbin
/// directories, which a user's `PATH` often lacks.
const SYSTEM_DIRS: [&str; 4] = ["/usr/sbin", "/sbin", "/usr/bin", "/bin"];

/// True when CI demands every oracle tool (`DISKIMG_REQUIRE_ORACLES=1`).
pub fn oracles_required() -> bool {
    std::env::var_os("DISKIMG_REQUIRE_ORACLES").is_some_and(|v| v == "1")
}

/// Where `tool` is: the first executable of that name on `PATH`, then in the sbin and bin
/// directories.
pub fn which(tool: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .filter(|d| !d.as_os_str().is_empty())
        .chain(SYSTEM_DIRS.iter().map(PathBuf::from))
        .map(|d| d.join(tool))
        .find(|p| is_executable(p))
}

fn is_executable(p: &Path) -> bool {
    p.metadata()
        .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// Whether `tool` is installed, with no policy: for benches, whose peers are optional.
pub fn installed(tool: &str) -> bool {
    which(tool).is_some()
}

/// Whether the oracle `tool` is installed. When it is not: a `SKIP` message locally, a panic
/// under `DISKIMG_REQUIRE_ORACLES=1`.
///
/// The copies this replaces differed: the CLI and ext4 tests looked on `PATH` only, the FAT
/// crate's tests also in `/usr/sbin` and `/sbin`. The kit looks in both places, and
/// [`command`] and [`run`] start the tool from where this found it, so a tool that counts as
/// present is also the one that runs.
pub fn have(tool: &str) -> bool {
    let found = installed(tool);
    if !found {
        assert!(
            !oracles_required(),
            "oracle tool {tool} is missing and DISKIMG_REQUIRE_ORACLES=1"
        );
        eprintln!("SKIP: {tool} not installed");
    }
    found
}

/// True when running as root.
pub fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| o.status.success() && o.stdout.trim_ascii() == b"0")
}

/// Whether loop devices can be used (root, `/dev/loop-control`, `losetup`). When they cannot:
/// a `SKIP` message locally, a panic under `DISKIMG_REQUIRE_ORACLES=1`.
pub fn have_loop() -> bool {
    let ok = is_root() && Path::new("/dev/loop-control").exists() && have("losetup");
    if !ok {
        assert!(
            !oracles_required(),
            "loop devices are required in CI (run as root)"
        );
        eprintln!("SKIP: loop devices and kernel mounts need root");
    }
    ok
}

/// A `Command` for `tool`, resolved as [`which`] does (the bare name when it is not found, so
/// the spawn error names it).
pub fn command(tool: &str) -> Command {
    Command::new(which(tool).unwrap_or_else(|| PathBuf::from(tool)))
}

/// Runs `tool ARGS` and returns its output, panicking (with the tool's name) only when it
/// cannot be started; the exit status is the caller's to check.
pub fn run<S: AsRef<OsStr>>(tool: &str, args: &[S]) -> Output {
    command(tool)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("running {tool}: {e}"))
}

/// stdout followed by stderr, as text.
pub fn output_text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// Asserts that `o` exited 0, printing `what` and both of its streams when not.
pub fn assert_success(o: &Output, what: &str) {
    assert!(
        o.status.success(),
        "{what} failed ({}): {}\n{}",
        o.status,
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sh_is_found_and_nonsense_is_not() {
        assert!(which("sh").is_some());
        assert!(which("no-such-tool-blockwise").is_none());
        assert!(installed("sh"));
    }

    #[test]
    fn run_captures_and_assert_success_passes() {
        let o = run("sh", &["-c", "echo out; echo err >&2"]);
        assert_success(&o, "sh");
        assert_eq!(output_text(&o), "out\nerr\n");
    }

    #[test]
    #[should_panic(expected = "false failed")]
    fn assert_success_fails_on_a_nonzero_exit() {
        assert_success(&run::<&str>("false", &[]), "false");
    }
}
