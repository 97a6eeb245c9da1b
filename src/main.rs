//! The `blockwise` command line.

mod cli;

use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    cli::install_panic_hook();
    cli::survive_file_size_limit();
    let args = match cli::Cli::try_parse() {
        Ok(a) => a,
        Err(e) => {
            let code = if e.use_stderr() { 2 } else { 0 };
            let _ = e.print();
            return ExitCode::from(code);
        }
    };
    match cli::run(args) {
        Ok(code) => code,
        Err(e) => {
            // Paths, names and labels in the message may be the user's or an image's: control
            // characters come out escaped (`\xNN`).
            eprintln!(
                "blockwise: {}",
                blockwise_geometry::display_str(&cli::one_line(&e))
            );
            ExitCode::from(cli::exit_code(&e))
        }
    }
}
