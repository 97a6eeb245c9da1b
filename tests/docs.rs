//! Every `blockwise …` command in README.md's and docs/*.md's `sh` blocks runs as written
//! (issue 33): the lines are taken from the Markdown, in order, and run in one temp dir against
//! the examples, so a later line may use what an earlier one built (`rpi.img`).
//!
//! A synopsis line is run too, made concrete: `[optional]` parts are kept, the first of
//! `a|b` alternatives is taken, and its placeholders become real files (`SPEC.toml` →
//! examples/rpi.toml, `IMAGE` → the image README's example built, `OUT.img` → a new file,
//! `FILE` → a file target). Lines that need a block device (`DEVICE`, `/dev/…`) or run for a
//! minute (`bench`) cannot run here; for those, the subcommand and every `--flag` they name
//! must be in the subcommand's `--help`.

use std::path::{Path, PathBuf};

use blockwise_test_kit::{blockwise, output_text, tempdir};

/// The `blockwise …` lines of the `sh` blocks of `file`, with their line numbers.
fn commands(file: &Path) -> Vec<(usize, String)> {
    let text = std::fs::read_to_string(file).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
    let mut out = Vec::new();
    let mut fence: Option<String> = None;
    for (n, line) in text.lines().enumerate() {
        if let Some(info) = line.strip_prefix("```") {
            fence = match fence {
                None => Some(info.trim().to_string()),
                Some(_) => None,
            };
            continue;
        }
        if fence.as_deref() == Some("sh") && line.trim_start().starts_with("blockwise ") {
            out.push((n + 1, line.trim().to_string()));
        }
    }
    out
}

/// The words of a line, its `# comment` dropped, `[…]` kept without the brackets, each word
/// as its `a|b` alternatives (`[--json | --csv]` is `--json`; `IMAGE[.xz|.gz]|SPEC.toml` is
/// `IMAGE` or `SPEC.toml`).
fn words(line: &str) -> Vec<Vec<String>> {
    let code = line.split(" #").next().unwrap_or(line);
    let mut out: Vec<Vec<String>> = Vec::new();
    let mut skip_alternative = false;
    for w in code.split_whitespace() {
        if w == "|" {
            skip_alternative = true;
            continue;
        }
        let w = w.trim_start_matches('[').trim_end_matches(']');
        if skip_alternative {
            skip_alternative = false;
            continue;
        }
        if w.is_empty() {
            continue;
        }
        // An optional suffix inside a word (`IMAGE[.xz|.gz]`) is left out.
        let mut plain = String::new();
        let mut depth = 0usize;
        for c in w.chars() {
            match c {
                '[' => depth += 1,
                ']' => depth = depth.saturating_sub(1),
                c if depth == 0 => plain.push(c),
                _ => {}
            }
        }
        out.push(plain.split('|').map(str::to_string).collect());
    }
    out
}

/// What a placeholder stands for here; `None` when the line cannot run on this machine.
fn concrete(word: &str, repo: &Path, work: &Path) -> Option<String> {
    let path = |p: PathBuf| p.to_string_lossy().into_owned();
    Some(match word {
        "SPEC.toml" => path(repo.join("examples/rpi.toml")),
        "IMAGE" => path(work.join("rpi.img")),
        "OUT.img" => path(work.join("docs-out.img")),
        "OUT.img.bmap" => path(work.join("docs-out.img.bmap")),
        "F" => path(work.join("rpi.img.bmap")),
        "FILE" => path(work.join("docs-target.img")),
        "N" => "3".to_string(),
        "SIZE" => "4MiB".to_string(),
        "DEVICE" => return None,
        w if w.starts_with("/dev/") => return None,
        // A board's own files (docs/import.md's genimage.cfg, kickstarts).
        w if w.starts_with("board/") || w.ends_with(".wks") || w.ends_with(".cfg") => return None,
        w if w.starts_with("examples/") => path(repo.join(w)),
        w => w.to_string(),
    })
}

#[test]
fn every_documented_command_runs_as_written() {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = vec![repo.join("README.md")];
    let mut docs: Vec<PathBuf> = std::fs::read_dir(repo.join("docs"))
        .expect("docs/")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "md"))
        .collect();
    docs.sort();
    files.extend(docs);

    let dir = tempdir!();
    let work = dir.path();
    let (mut ran, mut checked) = (0usize, 0usize);
    for file in &files {
        for (n, line) in commands(file) {
            let at = format!("{}:{n}: {line}", file.display());
            let w = words(&line);
            let sub = w
                .get(1)
                .and_then(|a| a.first())
                .cloned()
                .unwrap_or_default();
            // The target of a write to a file is made fresh for each line.
            let _ = std::fs::remove_file(work.join("docs-target.img"));
            let args: Option<Vec<String>> = w
                .iter()
                .skip(1)
                .map(|alts| alts.iter().find_map(|x| concrete(x, repo, work)))
                .collect();
            match args {
                // bench runs for a minute, probe needs a device, import a foreign config.
                Some(args) if !matches!(sub.as_str(), "bench" | "probe" | "import") => {
                    let o = std::process::Command::new(blockwise!().path())
                        .current_dir(work)
                        .args(&args)
                        .output()
                        .expect("run blockwise");
                    assert!(
                        o.status.success(),
                        "{at}\n  ran: blockwise {}\n{}",
                        args.join(" "),
                        output_text(&o)
                    );
                    ran += 1;
                }
                _ => {
                    let o = blockwise!().run([sub.as_str(), "--help"]);
                    assert!(o.status.success(), "{at}: no subcommand {sub:?}");
                    let help = String::from_utf8_lossy(&o.stdout).into_owned();
                    for flag in w.iter().flatten().filter(|x| x.starts_with("--")) {
                        assert!(
                            help.contains(flag.as_str()),
                            "{at}: `blockwise {sub} --help` does not know {flag}"
                        );
                    }
                    checked += 1;
                }
            }
        }
    }
    eprintln!("documented commands: {ran} run, {checked} checked against --help");
    assert!(ran >= 5, "too few documented commands ran ({ran})");
}

#[test]
fn synopsis_words_are_made_concrete() {
    let flat =
        |line: &str| -> Vec<String> { words(line).into_iter().map(|a| a.join("|")).collect() };
    assert_eq!(
        flat("blockwise bench  DEVICE|FILE --yes-destroy-data [--json | --csv]   # destroys"),
        [
            "blockwise",
            "bench",
            "DEVICE|FILE",
            "--yes-destroy-data",
            "--json"
        ]
    );
    assert_eq!(
        flat("blockwise write  IMAGE[.xz|.gz]|SPEC.toml DEVICE|FILE [--bmap F]"),
        [
            "blockwise",
            "write",
            "IMAGE|SPEC.toml",
            "DEVICE|FILE",
            "--bmap",
            "F"
        ]
    );
}
