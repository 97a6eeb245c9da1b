//! 200,000 empty files into ext4 and FAT32: every file arrives (counted by e2fsck and
//! fsck.fat, spot-checked with debugfs and mdir), peak memory stays under a bound
//! proportional to the file count, and the time per file at 20,000 and 200,000 files is
//! printed (measured, never asserted). A FAT directory of more entries than FAT allows is a
//! clear error naming the directory.
//!
//! Ignored by default (over a minute, mostly making and checking the files); scripts/test.sh runs it with
//! `--ignored`.

use std::fs;
use std::path::{Path, PathBuf};
use std::time::Instant;

use blockwise_test_kit::{
    blockwise, debugfs, e2fsck_clean, fsck_fat_clean, have, oracles_required, run, tempdir,
};

/// Files per subdirectory: FAT32 directories hold at most 65,536 entries, so the tree is
/// spread over directories of 1,000 (upper-case 8.3 names: one entry each).
const PER_DIR: usize = 1000;

/// `n` empty files in `dir/d000/F0000000` … (n / 1000 directories).
fn make_tree(dir: &Path, n: usize) -> PathBuf {
    let c = dir.join(format!("c{n}"));
    for i in 0..n {
        let d = c.join(format!("d{:03}", i / PER_DIR));
        if i % PER_DIR == 0 {
            fs::create_dir_all(&d).unwrap();
        }
        fs::File::create(d.join(format!("F{i:07}"))).unwrap();
    }
    c
}

fn spec(dir: &Path, fs_kind: &str, contents: &Path, size: &str) -> PathBuf {
    let p = dir.join(format!(
        "{fs_kind}-{}.toml",
        contents.display().to_string().len()
    ));
    let extra = if fs_kind == "ext4" {
        "ext4.inodes = 262144\n"
    } else {
        ""
    };
    fs::write(
        &p,
        format!(
            "[image]\ntable = \"none\"\nsize = \"{size}\"\ntimestamp = 1700000000\n\
             [[partition]]\nfs = \"{fs_kind}\"\nsize = \"fill\"\ncontents = \"{}\"\n{extra}",
            contents.display()
        ),
    )
    .unwrap();
    p
}

/// Builds with `/usr/bin/time -v` when present: (seconds, peak RSS in KiB).
fn timed_build(spec: &Path, out: &Path) -> (f64, Option<u64>) {
    let bin = blockwise!().path().to_path_buf();
    let timer = Path::new("/usr/bin/time");
    let mut cmd = if timer.exists() {
        let mut c = std::process::Command::new(timer);
        c.arg("-v").arg(&bin);
        c
    } else {
        std::process::Command::new(&bin)
    };
    cmd.arg("build").arg(spec).arg("-o").arg(out).arg("-q");
    let t = Instant::now();
    let o = cmd.output().unwrap();
    let secs = t.elapsed().as_secs_f64();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{}: {err}", spec.display());
    let rss = err
        .lines()
        .find_map(|l| {
            l.trim()
                .strip_prefix("Maximum resident set size (kbytes): ")
        })
        .and_then(|v| v.trim().parse().ok());
    (secs, rss)
}

/// Peak memory allowed for a build of `n` files: 64 MiB plus 512 bytes per file. Twice what
/// it takes (measured at 1,000,000 files: about 220 bytes per file for ext4 and FAT32 above
/// 64 MiB; issue 34 asks for at most 256), but a copy of every file's blocks, a quadratic
/// structure or ext4's 0.9 KiB per file from before issue 34 would break it.
fn rss_bound_kib(n: usize) -> u64 {
    64 * 1024 + (n as u64) / 2
}

#[test]
#[ignore = "over a minute (200,000 files made and checked twice); scripts/test.sh runs it with --ignored"]
fn two_hundred_thousand_empty_files() {
    let tools = have("e2fsck") && have("debugfs") && have("fsck.fat") && have("mdir");
    assert!(
        tools || !oracles_required(),
        "e2fsprogs, dosfstools, mtools"
    );
    if !tools {
        eprintln!("skipped: e2fsprogs, dosfstools or mtools missing");
        return;
    }
    assert!(
        Path::new("/usr/bin/time").exists() || !oracles_required(),
        "/usr/bin/time (package time) measures peak memory"
    );
    let dir = tempdir!();
    let mut report = Vec::new();
    for n in [20_000usize, 200_000] {
        let c = make_tree(dir.path(), n);
        for (fs_kind, size) in [("ext4", "1GiB"), ("fat32", "512MiB")] {
            let out = dir.path().join(format!("{fs_kind}-{n}.img"));
            let (secs, rss) = timed_build(&spec(dir.path(), fs_kind, &c, size), &out);
            let dirs = n / PER_DIR;
            if fs_kind == "ext4" {
                e2fsck_clean(&out, None);
                // Used inodes: the 10 reserved (the root is inode 2), lost+found, the dirs and files.
                let text = run("e2fsck", &["-fn".as_ref(), out.as_os_str()]);
                let text = String::from_utf8_lossy(&text.stdout).into_owned();
                let used: u64 = text
                    .lines()
                    .find_map(|l| l.split(": ").nth(1)?.split('/').next()?.parse().ok())
                    .unwrap_or(0);
                assert_eq!(used, (n + dirs + 11) as u64, "{text}");
                let last = format!("d{:03}", dirs - 1);
                let ls = debugfs(&out, &format!("ls /{last}"));
                assert!(ls.contains(&format!("F{:07}", n - 1)), "{ls}");
                assert_eq!(ls.matches('F').count(), PER_DIR, "{ls}");
            } else {
                let text = fsck_fat_clean(&out);
                // fsck.fat counts files and directories (not the root).
                // "IMAGE: 20020 files, 20/130812 clusters"
                let files: u64 = text
                    .lines()
                    .find_map(|l| l.split_once(" files, ")?.0.rsplit(' ').next()?.parse().ok())
                    .unwrap_or(0);
                assert_eq!(files, (n + dirs) as u64, "{text}");
                let o = run(
                    "mdir",
                    &[
                        "-i".as_ref(),
                        out.as_os_str(),
                        format!("::/d{:03}", dirs - 1).as_ref(),
                    ],
                );
                let listing = String::from_utf8_lossy(&o.stdout);
                // mdir counts "." and ".." too.
                assert!(
                    listing.contains(&format!("F{:07}", n - 1))
                        && listing.contains(&format!(" {} files ", PER_DIR + 2)),
                    "{}",
                    listing.lines().rev().take(3).collect::<Vec<_>>().join("\n")
                );
            }
            if let Some(kib) = rss {
                assert!(
                    kib <= rss_bound_kib(n),
                    "{fs_kind}, {n} files: peak RSS {kib} KiB above {} KiB",
                    rss_bound_kib(n)
                );
            }
            report.push(format!(
                "{fs_kind:4} {n:>7} files: {secs:7.2} s, {:6.1} µs/file, peak RSS {} KiB ({:.2} KiB/file)",
                secs * 1e6 / n as f64,
                rss.map_or("?".into(), |k| k.to_string()),
                rss.map_or(0.0, |k| k as f64 / n as f64),
            ));
            fs::remove_file(&out).unwrap();
        }
        fs::remove_dir_all(&c).unwrap();
    }
    // Measured, not asserted (no wall-clock thresholds in tests): linear means the µs/file of
    // the two sizes are close.
    println!("time and memory per file:\n{}", report.join("\n"));
}

/// More entries in one FAT directory than FAT allows (65,536): an error naming the directory
/// and the partition, exit 2, no image.
#[test]
fn a_fat_directory_over_65536_entries_is_refused() {
    if !have("fsck.fat") && !oracles_required() {
        return;
    }
    let dir = tempdir!();
    let c = dir.path().join("flat");
    fs::create_dir_all(c.join("big")).unwrap();
    for i in 0..65_600 {
        fs::File::create(c.join("big").join(format!("F{i:07}"))).unwrap();
    }
    let out = dir.path().join("flat.img");
    let o = blockwise!().run([
        "build".as_ref(),
        spec(dir.path(), "fat32", &c, "512MiB").as_os_str(),
        "-o".as_ref(),
        out.as_os_str(),
        "-q".as_ref(),
    ]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains("/big") && err.contains("65536"), "{err}");
    assert!(err.contains("partition"), "{err}");
    assert!(!out.exists());
}
