//! A front end in a dozen lines: plan, build and verify an image through the library alone
//! (what the Python package and the browser build do), no code from the CLI.
//!
//! ```sh
//! cargo run --example library -- examples/rpi.toml rpi.img
//! ```

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use blockwise::host::{build, plan_file, FileSource, SpecFile};
use blockwise::verify::{verify, Options};

fn main() -> ExitCode {
    let mut args = std::env::args_os().skip(1).map(PathBuf::from);
    let spec = args.next().unwrap_or_else(|| "examples/rpi.toml".into());
    let out = args.next().unwrap_or_else(|| "library-example.img".into());
    match run(&spec, &out) {
        Ok(aligned) => ExitCode::from(u8::from(!aligned)),
        Err(e) => {
            eprintln!("library example: {e}");
            ExitCode::from(2)
        }
    }
}

fn run(spec: &Path, out: &Path) -> Result<bool, Box<dyn std::error::Error>> {
    // Plan: the same geometry `blockwise plan` prints.
    let mut sf = SpecFile::load(spec)?;
    let plan = plan_file(&mut sf)?;
    println!(
        "planned {} partitions on {} bytes",
        plan.partitions.len(),
        plan.size_bytes
    );
    // Build (metadata in memory, file data by reference), then write atomically: temp
    // file, content copied by the kernel, fsync, rename.
    let built = build(&mut sf, out.parent().unwrap_or(Path::new(".")))?;
    built.write(out, None, &mut ())?;
    // Verify the file just written, read back from disk, and compare with the plan.
    let src = FileSource::open(out)?;
    let report = verify(
        &src,
        &Options::new(out.display().to_string()).erase_block(plan.erase_block_bytes),
    )?;
    println!("{}", report.verdict());
    let same = report.partitions.len() == plan.partitions.len()
        && report
            .partitions
            .iter()
            .zip(&plan.partitions)
            .all(|(r, p)| r.start_bytes == p.start_bytes && r.size_bytes == p.size_bytes);
    println!("verify reproduces the plan's partitions: {same}");
    Ok(report.aligned && same && report.exit_code() == 0)
}
