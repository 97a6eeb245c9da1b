//! The `blockwise` binary under test (root package only: see [`blockwise!`](crate::blockwise)).

use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use crate::files::write_file;
use crate::tools::output_text;

/// The `blockwise` binary; [`blockwise!`](crate::blockwise) makes one for the binary Cargo
/// built for the test.
#[derive(Debug, Clone)]
pub struct Blockwise {
    path: PathBuf,
}

impl Blockwise {
    /// The binary at `path`.
    pub fn at(path: impl Into<PathBuf>) -> Self {
        Blockwise { path: path.into() }
    }

    /// Where the binary is.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Runs `blockwise ARGS` and returns its output (the exit status is the caller's to check).
    pub fn run<I, S>(&self, args: I) -> Output
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        Command::new(&self.path)
            .args(args)
            .output()
            .expect("run blockwise")
    }

    /// `blockwise build SPEC -o OUT`, asserting exit 0.
    pub fn build(&self, spec: &Path, out: &Path) {
        self.build_with(spec, out, None::<&OsStr>);
    }

    /// `blockwise build SPEC -o OUT -q`, whatever its outcome (for tests of refusals).
    pub fn try_build(&self, spec: &Path, out: &Path) -> Output {
        self.run([
            "build".as_ref(),
            spec.as_os_str(),
            "-o".as_ref(),
            out.as_os_str(),
            "-q".as_ref(),
        ])
    }

    /// `blockwise build SPEC -o OUT EXTRA…` (e.g. `--bmap FILE`, `--json`), asserting exit 0;
    /// returns the output for the caller to read.
    pub fn build_with<I, S>(&self, spec: &Path, out: &Path, extra: I) -> Output
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        let mut args: Vec<OsString> = vec![
            "build".into(),
            spec.as_os_str().into(),
            "-o".into(),
            out.as_os_str().into(),
        ];
        args.extend(extra.into_iter().map(|a| a.as_ref().to_os_string()));
        let o = self.run(&args);
        assert!(
            o.status.success(),
            "blockwise build {}: {}",
            spec.display(),
            output_text(&o)
        );
        o
    }

    /// Writes `spec` to `DIR/NAME.toml`, builds `DIR/NAME.img` (asserting exit 0) and returns
    /// the image's path.
    pub fn build_spec(&self, dir: &Path, name: &str, spec: &str) -> PathBuf {
        let spec_path = write_file(dir, &format!("{name}.toml"), spec);
        let img = dir.join(format!("{name}.img"));
        self.build(&spec_path, &img);
        img
    }
}
