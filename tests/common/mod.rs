//! Helpers shared by the integration tests: locating the binary, oracle tools, temp dirs.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// The `blockwise` binary under test.
pub fn bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_blockwise"))
}

/// Runs `blockwise ARGS`.
pub fn blockwise<I, S>(args: I) -> Output
where
    I: IntoIterator<Item = S>,
    S: AsRef<std::ffi::OsStr>,
{
    Command::new(bin())
        .args(args)
        .output()
        .expect("run blockwise")
}

/// True when CI demands every oracle tool (`DISKIMG_REQUIRE_ORACLES=1`).
pub fn oracles_required() -> bool {
    std::env::var_os("DISKIMG_REQUIRE_ORACLES").is_some_and(|v| v == "1")
}

/// Whether `tool` is on PATH. When it is not: a skip message locally, a panic in CI.
pub fn have(tool: &str) -> bool {
    let found = Command::new("sh")
        .arg("-c")
        .arg(format!("command -v {tool}"))
        .output()
        .is_ok_and(|o| o.status.success());
    if !found {
        assert!(
            !oracles_required(),
            "oracle tool {tool} is missing and DISKIMG_REQUIRE_ORACLES=1"
        );
        eprintln!("SKIP: {tool} not installed");
    }
    found
}

/// True when running as root (loop devices available).
pub fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| o.stdout.starts_with(b"0"))
}

/// Whether loop devices can be used; in CI (`DISKIMG_REQUIRE_ORACLES=1`) they must be.
pub fn have_loop() -> bool {
    let ok = is_root() && Path::new("/dev/loop-control").exists() && have("losetup");
    if !ok {
        assert!(
            !oracles_required(),
            "loop devices are required in CI (run as root)"
        );
        eprintln!("SKIP: loop devices need root");
    }
    ok
}

/// Runs a command, panicking with its output on a spawn failure.
pub fn run(cmd: &str, args: &[&str]) -> Output {
    Command::new(cmd)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("running {cmd}: {e}"))
}

/// A temp dir on a disk-backed filesystem (under target/), removed on drop.
pub fn tempdir() -> tempfile::TempDir {
    let base = Path::new(env!("CARGO_TARGET_TMPDIR"));
    std::fs::create_dir_all(base).ok();
    tempfile::tempdir_in(base).expect("tempdir")
}

/// Writes `text` to `dir/name` and returns the path.
pub fn write_file(dir: &Path, name: &str, text: &str) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, text).expect("write file");
    p
}
