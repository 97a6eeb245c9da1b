//! `blockwise import` (issue 32 item 5): genimage's own test configs and the oe-core /
//! meta-raspberrypi kickstarts of ../shared/corpus, imported, built, and their partition
//! tables (`sfdisk -d`) compared with genimage's (the `.fdisk` expectations beside the
//! configs, or genimage 16 run on the same config) and with the table wic's rules give
//! (`--align` in KiB, `--size` in MiB, sizes from `du` of the content). Where blockwise puts
//! a partition elsewhere, the import must say so in a comment with the other tool's numbers;
//! where it cannot express an option, it must fail naming the option and the file:line.

use std::fs;
use std::path::{Path, PathBuf};

use blockwise_test_kit::{blockwise, have, oracles_required, run, tempdir, write_file};

fn stderr(o: &std::process::Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// `blockwise build -q SPEC -o OUT`.
fn build_quiet(spec: &Path, out: &Path) -> std::process::Output {
    blockwise!().run([
        "build".as_ref(),
        "-q".as_ref(),
        spec.as_os_str(),
        "-o".as_ref(),
        out.as_os_str(),
    ])
}

fn stdout(o: &std::process::Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// The shared corpus: `../shared/corpus` beside the checkout, or beside its parent (the
/// helpers' worktrees); `None` (after saying SKIP) when there is none.
fn corpus() -> Option<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    for c in [
        root.join("../shared/corpus"),
        root.join("../../shared/corpus"),
    ] {
        if c.join("genimage/test").is_dir() {
            return Some(c);
        }
    }
    assert!(
        !oracles_required(),
        "no ../shared/corpus and DISKIMG_REQUIRE_ORACLES=1"
    );
    eprintln!("SKIP: no shared corpus");
    None
}

fn copy_dir(from: &Path, to: &Path) {
    fs::create_dir_all(to).unwrap();
    for e in fs::read_dir(from).unwrap().flatten() {
        let p = e.path();
        let t = to.join(e.file_name());
        if p.is_dir() {
            copy_dir(&p, &t);
        } else {
            fs::copy(&p, &t).unwrap();
        }
    }
}

/// One partition line of `sfdisk -d`, as genimage's tests sanitise it
/// (`start=2048,size=2048,type=83`), without the device name.
fn table(image: &Path) -> (Option<String>, Vec<String>) {
    let o = run("sfdisk", &["-d".as_ref(), image.as_os_str()]);
    if !o.status.success() {
        return (None, Vec::new());
    }
    let text = stdout(&o);
    let mut id = None;
    let mut parts = Vec::new();
    for l in text.lines() {
        if let Some(v) = l.strip_prefix("label-id: ") {
            id = Some(
                v.trim()
                    .to_ascii_uppercase()
                    .trim_start_matches("0X")
                    .to_string(),
            );
        }
        if let Some((_, rest)) = l.split_once(" : ") {
            parts.push(rest.replace(' ', "").replace("Id=", "type="));
        }
    }
    (id, parts)
}

/// A `.fdisk` expectation file: the disk identifier and the partition lines.
fn fdisk_file(path: &Path) -> (Option<String>, Vec<String>) {
    let text = fs::read_to_string(path).unwrap();
    let mut id = None;
    let mut parts = Vec::new();
    for l in text.lines() {
        if let Some(v) = l.strip_prefix("Disk identifier: ") {
            id = Some(
                v.trim()
                    .to_ascii_uppercase()
                    .trim_start_matches("0X")
                    .to_string(),
            );
        } else if let Some((_, rest)) = l.split_once(':') {
            parts.push(rest.to_string());
        }
    }
    (id, parts)
}

fn field(line: &str, key: &str) -> Option<u64> {
    line.split(',')
        .find_map(|f| f.strip_prefix(&format!("{key}=")))
        .and_then(|v| v.parse().ok())
}

/// `n` bytes as the import's comments write them.
fn size_text(n: u64) -> String {
    for (u, name) in [
        (1u64 << 40, "TiB"),
        (1 << 30, "GiB"),
        (1 << 20, "MiB"),
        (1 << 10, "KiB"),
    ] {
        if n != 0 && n % u == 0 {
            return format!("{}{name}", n / u);
        }
    }
    format!("{n} bytes")
}

/// Every error line names the file and line it is about (`NAME:LINE: …`).
fn assert_clear_error(o: &std::process::Output, file: &str) {
    assert_eq!(o.status.code(), Some(2), "{file}: {}", stderr(o));
    let err = stderr(o);
    let lines: Vec<&str> = err
        .lines()
        .filter(|l| !l.ends_with("cannot be imported:"))
        .collect();
    assert!(!lines.is_empty(), "{file}: no message");
    for l in lines {
        let rest = l.strip_prefix("blockwise: ").unwrap_or(l);
        let rest = rest.strip_prefix("importing ").unwrap_or(rest);
        let at = rest.split(": ").next().unwrap_or_default();
        let ok = at
            .rsplit_once(':')
            .is_some_and(|(f, n)| !f.is_empty() && n.parse::<u32>().is_ok())
            || at.ends_with(file);
        assert!(ok, "{file}: error without file:line: {l:?}");
        assert!(
            !l.contains("panicked") && !l.contains("internal error"),
            "{l}"
        );
    }
}

/// Compares blockwise's table with the other tool's: equal lines, or the import's comment
/// giving the other tool's start and size for that partition (and blockwise's own, which
/// must be what was built). Returns how many partitions moved.
fn compare(tool: &str, what: &str, toml: &str, ours: &[String], theirs: &[String]) -> usize {
    assert_eq!(
        ours.len(),
        theirs.len(),
        "{what}: partition count\nours {ours:#?}\ntheirs {theirs:#?}\n{toml}"
    );
    let mut moved = 0;
    for (o, t) in ours.iter().zip(theirs) {
        if o == t {
            continue;
        }
        // Only start and size may differ, and only with a comment saying so.
        let strip = |l: &str| {
            l.split(',')
                .filter(|f| !f.starts_with("start=") && !f.starts_with("size="))
                .collect::<Vec<_>>()
                .join(",")
        };
        assert_eq!(
            strip(o),
            strip(t),
            "{what}: type, uuid or name differ\n{toml}"
        );
        let (ts, tz) = (
            field(t, "start").unwrap() * 512,
            field(t, "size").unwrap() * 512,
        );
        let (os, oz) = (
            field(o, "start").unwrap() * 512,
            field(o, "size").unwrap() * 512,
        );
        let said = format!(
            "{tool} puts it at {} with {}; blockwise at {} with {}",
            size_text(ts),
            size_text(tz),
            size_text(os),
            size_text(oz)
        );
        assert!(
            toml.contains(&said),
            "{what}: no comment {said:?} for\n  ours   {o}\n  theirs {t}\n{toml}"
        );
        moved += 1;
    }
    moved
}

/// The inputs genimage's own tests make (test-setup.sh, hdimage.test).
fn genimage_inputs(dir: &Path) {
    let input = dir.join("input");
    fs::create_dir_all(&input).unwrap();
    fs::write(input.join("part1.img"), vec![0u8; 7 * 512]).unwrap();
    fs::write(input.join("part2.img"), vec![0u8; 11 * 512]).unwrap();
    fs::write(input.join("part3.img"), b"").unwrap();
    fs::write(input.join("3K.img"), vec![0u8; 3 << 10]).unwrap();
    fs::write(input.join("70K.img"), vec![0u8; 70 << 10]).unwrap();
    for d in ["root", "root.orig"] {
        fs::create_dir_all(dir.join(d).join("sub")).unwrap();
        fs::write(dir.join(d).join("sub/file.txt"), b"hello\n").unwrap();
    }
}

/// A config, its `--image`, its `--includepath` and its `.fdisk` expectation.
type Case = (
    String,
    Option<&'static str>,
    Option<&'static str>,
    Option<PathBuf>,
);

/// What genimage makes of a config.
enum Oracle {
    /// Its partition table: disk identifier and partition lines.
    Table((Option<String>, Vec<String>)),
    /// An image without a table (a bare filesystem): its length and `blkid` TYPE and LABEL.
    Bare(u64, String),
    /// It refuses the config.
    Refused(String),
    /// It cannot run here (a tool it calls is missing).
    Unknown(String),
}

/// genimage 16 run on `config` in `d`.
fn genimage_oracle(d: &Path, config: &str, image: Option<&str>, include: Option<&str>) -> Oracle {
    let mut args: Vec<&str> = vec![
        "--config",
        config,
        "--inputpath",
        "input",
        "--outputpath",
        "images",
        "--tmppath",
        "tmp",
        "--rootpath",
        "root",
    ];
    if let Some(i) = include {
        args.extend(["--includepath", i]);
    }
    let _ = fs::remove_dir_all(d.join("images"));
    let _ = fs::remove_dir_all(d.join("tmp"));
    let o = std::process::Command::new("genimage")
        .args(&args)
        .current_dir(d)
        .output()
        .unwrap();
    let err = stderr(&o);
    if !o.status.success() {
        if err.contains("not found") {
            return Oracle::Unknown(
                err.lines()
                    .find(|l| l.contains("not found"))
                    .unwrap_or_default()
                    .to_string(),
            );
        }
        return Oracle::Refused(
            err.lines()
                .find(|l| l.contains("ERROR"))
                .unwrap_or_default()
                .to_string(),
        );
    }
    let imgs: Vec<PathBuf> = fs::read_dir(d.join("images"))
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .collect();
    let chosen = match image {
        Some(i) => d.join("images").join(i),
        None => imgs
            .iter()
            .find(|p| table(p).0.is_some())
            .cloned()
            .unwrap_or_else(|| imgs[0].clone()),
    };
    let t = table(&chosen);
    if t.0.is_some() {
        Oracle::Table(t)
    } else {
        Oracle::Bare(
            fs::metadata(&chosen).unwrap().len(),
            blkid_type_label(&chosen),
        )
    }
}

/// `blkid -p`'s TYPE and LABEL of a bare filesystem image.
fn blkid_type_label(image: &Path) -> String {
    let o = run(
        "blkid",
        &[
            "-p".as_ref(),
            "-o".as_ref(),
            "value".as_ref(),
            "-s".as_ref(),
            "TYPE".as_ref(),
            "-s".as_ref(),
            "LABEL".as_ref(),
            image.as_os_str(),
        ],
    );
    stdout(&o)
}

#[derive(Default, Debug)]
struct Tally {
    same: Vec<String>,
    moved: Vec<String>,
    both_refuse: Vec<String>,
    refused: Vec<String>,
}

/// genimage's test configs: every one is imported; those that import are built and their
/// table compared with genimage's; those genimage refuses must be refused too, clearly.
#[test]
fn genimage_test_configs_round_trip() {
    let Some(corpus) = corpus() else { return };
    if !have("sfdisk") {
        return;
    }
    let src = corpus.join("genimage/test");
    let have_genimage = have("genimage");
    let mut configs: Vec<PathBuf> = fs::read_dir(&src)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "config"))
        .collect();
    configs.sort();
    let mut cases: Vec<Case> = Vec::new();
    for c in &configs {
        let name = c.file_name().unwrap().to_string_lossy().into_owned();
        let stem = name.trim_end_matches(".config").to_string();
        match name.as_str() {
            "hdimage.config" => {
                cases.push((
                    name.clone(),
                    Some("test.hdimage"),
                    None,
                    Some(src.join("hdimage.fdisk")),
                ));
                cases.push((
                    name.clone(),
                    Some("test.hdimage-2"),
                    None,
                    Some(src.join("hdimage.fdisk-2")),
                ));
            }
            "hdimage-hybrid.config" => {
                cases.push((
                    name.clone(),
                    Some("hybrid.hdimage"),
                    None,
                    Some(src.join("hdimage-hybrid.fdisk")),
                ));
                cases.push((name.clone(), Some("mbr.hdimage"), None, None));
            }
            "include.config" => {
                cases.push((
                    name.clone(),
                    None,
                    None,
                    Some(src.join("include-ccc.fdisk")),
                ));
                cases.push((
                    name.clone(),
                    None,
                    Some("include/aaa"),
                    Some(src.join("include-aaa.fdisk")),
                ));
                cases.push((
                    name.clone(),
                    None,
                    Some("include/bbb"),
                    Some(src.join("include-bbb.fdisk")),
                ));
            }
            // Only included by include.config.
            "include-test.config" => {}
            _ => {
                let f = src.join(format!("{stem}.fdisk"));
                cases.push((name.clone(), None, None, f.is_file().then_some(f)));
            }
        }
    }
    let mut tally = Tally::default();
    for (n, (config, image, include, fdisk)) in cases.iter().enumerate() {
        let what = format!("{config} {image:?} {include:?}");
        let dir = tempdir!();
        let d = dir.path();
        copy_dir(&src, d);
        genimage_inputs(d);
        // The oracle: the expectation file, else genimage 16 itself.
        let oracle = match fdisk {
            Some(f) => Oracle::Table(fdisk_file(f)),
            None if have_genimage => genimage_oracle(d, config, *image, *include),
            None => {
                eprintln!("SKIP: {what}: no expectation and no genimage");
                continue;
            }
        };
        let mut args: Vec<std::ffi::OsString> = vec!["import".into(), d.join(config).into()];
        if let Some(i) = image {
            args.extend(["--image".into(), (*i).into()]);
        }
        if let Some(i) = include {
            args.extend(["--includepath".into(), (*i).into()]);
        }
        let o = blockwise!().run(&args);
        let fail_config = config.starts_with("hdimage-fail");
        if !o.status.success() {
            assert_clear_error(&o, config);
            if fail_config || matches!(oracle, Oracle::Refused(_)) {
                tally.both_refuse.push(what);
            } else {
                tally.refused.push(format!(
                    "{what}: {}",
                    stderr(&o).lines().last().unwrap_or_default()
                ));
            }
            continue;
        }
        let toml = stdout(&o);
        assert!(
            !fail_config,
            "{what}: genimage refuses it, blockwise imported it:\n{toml}"
        );
        let spec = write_file(d, &format!("spec{n}.toml"), &toml);
        let out = d.join(format!("out{n}.img"));
        let b = build_quiet(&spec, &out);
        let (their_id, theirs) = match oracle {
            Oracle::Table(t) => t,
            Oracle::Refused(why) => {
                panic!("{what}: genimage refuses it ({why}) but blockwise imports it (build: {})\n{toml}", b.status)
            }
            Oracle::Bare(len, kind) => {
                assert!(
                    b.status.success(),
                    "{what}: build failed: {}\n{toml}",
                    stderr(&b)
                );
                assert_eq!(fs::metadata(&out).unwrap().len(), len, "{what}: image size");
                assert_eq!(blkid_type_label(&out), kind, "{what}: blkid TYPE and LABEL");
                tally.same.push(format!("{what} (no table, same size)"));
                continue;
            }
            Oracle::Unknown(why) => {
                assert!(
                    b.status.success(),
                    "{what}: build failed: {}\n{toml}",
                    stderr(&b)
                );
                eprintln!("SKIP: {what}: genimage cannot run here ({why})");
                continue;
            }
        };
        assert!(
            b.status.success(),
            "{what}: build failed: {}\n{toml}",
            stderr(&b)
        );
        let (our_id, ours) = table(&out);
        let moved = compare("genimage", &what, &toml, &ours, &theirs);
        if toml.contains("disk-id = ") {
            assert_eq!(our_id, their_id, "{what}: disk identifier");
        }
        // Where the config's alignment is already an erase block, nothing may move.
        if toml.contains("erase-block = ") && !toml.contains("genimage aligns partitions to") {
            assert_eq!(
                moved, 0,
                "{what}: aligned config, yet partitions moved\n{toml}"
            );
        }
        if moved == 0 {
            tally.same.push(what.clone());
        } else {
            tally.moved.push(what.clone());
        }
        // `build CONFIG` directly gives the same image as the imported spec (default options).
        if image.is_none() && include.is_none() {
            let direct = d.join(format!("direct{n}.img"));
            let b2 = blockwise!().run([
                "build".as_ref(),
                "-q".as_ref(),
                d.join(config).as_os_str(),
                "-o".as_ref(),
                direct.as_os_str(),
            ]);
            assert!(b2.status.success(), "{what}: build CONFIG: {}", stderr(&b2));
            assert!(
                fs::read(&direct).unwrap() == fs::read(&out).unwrap(),
                "{what}: build CONFIG differs from build of the imported spec"
            );
        }
    }
    eprintln!("{tally:#?}");
    // Every hdimage-fail config is refused; the tables compared are the round trips.
    assert!(tally.same.len() + tally.moved.len() >= 12, "{tally:#?}");
    // extended-partition = 2 with forced-primary, and ext2/ext3 images, as genimage makes them.
    for name in [
        "hdimage-forced-primary.config",
        "hdimage.config Some(\"test.hdimage-2\")",
        "ext2.config",
        "ext3.config",
    ] {
        assert!(
            tally.same.iter().any(|s| s.starts_with(name)),
            "{name}: {tally:#?}"
        );
    }
    // The hybrid MBR imports and builds (at blockwise's 4 MiB: moved; genimage_hybrid_mbr
    // compares it at genimage's alignment), and so do hdimage6's explicit offsets of logical
    // partitions (on the 8 KiB they share: only the extended container moves, to the erase
    // block before its first logical partition, where blockwise puts EBRs).
    for name in [
        "hdimage-hybrid.config Some(\"hybrid.hdimage\")",
        "hdimage6.config",
    ] {
        assert!(
            tally
                .same
                .iter()
                .chain(&tally.moved)
                .any(|s| s.starts_with(name)),
            "{name}: {tally:#?}"
        );
    }
    assert!(
        tally
            .both_refuse
            .iter()
            .filter(|w| w.starts_with("hdimage-fail"))
            .count()
            == 11,
        "{tally:#?}"
    );
}

/// What `du -ks` / `du -bks` print for a directory (the oracle for wic's sizes).
fn du_kib(dir: &Path, apparent: bool) -> u64 {
    let flag = if apparent { "-bks" } else { "-ks" };
    let o = run("du", &[flag.as_ref(), dir.as_os_str()]);
    stdout(&o)
        .split_whitespace()
        .next()
        .unwrap()
        .parse()
        .unwrap()
}

/// The five kickstarts: imported with staged content, built, and compared with the table
/// wic's rules give; the bootimg-pcbios one also boots as wic's does (`check_pcbios`).
#[test]
fn wic_kickstarts_round_trip() {
    let Some(corpus) = corpus() else { return };
    if !have("sfdisk") || !have("du") {
        return;
    }
    let mut wks: Vec<PathBuf> = Vec::new();
    for sub in ["oe-core", "meta-raspberrypi-fork"] {
        for e in fs::read_dir(corpus.join("wic").join(sub))
            .unwrap()
            .flatten()
        {
            wks.push(e.path());
        }
    }
    wks.sort();
    assert_eq!(wks.len(), 5);
    let (mut built, mut refused) = (Vec::new(), Vec::new());
    for (n, k) in wks.iter().enumerate() {
        let name = k.file_name().unwrap().to_string_lossy().into_owned();
        let dir = tempdir!();
        let d = dir.path();
        fs::copy(k, d.join(&name)).unwrap();
        let rootfs = d.join("rootfs");
        fs::create_dir_all(rootfs.join("etc")).unwrap();
        fs::write(rootfs.join("etc/hostname"), b"board\n").unwrap();
        fs::write(
            rootfs.join("etc/big"),
            blockwise_test_kit::bytes(n as u64, 700_000),
        )
        .unwrap();
        let boot = d.join("bootfs");
        fs::create_dir_all(boot.join("EFI/BOOT")).unwrap();
        fs::write(
            boot.join("kernel.img"),
            blockwise_test_kit::bytes(99, 123_456),
        )
        .unwrap();
        // bootloader --configfile: beside the kickstart, as wic looks it up.
        let cfg_text = b"DEFAULT boot\nLABEL boot\nKERNEL /kernel.img\n";
        for l in fs::read_to_string(k).unwrap().lines() {
            if let Some(c) = l
                .split_whitespace()
                .find_map(|w| w.strip_prefix("--configfile="))
            {
                fs::write(d.join(c.trim_matches('"')), cfg_text).unwrap();
            }
        }
        let o = blockwise!().run([
            "import".as_ref(),
            d.join(&name).as_os_str(),
            "--rootfs-dir".as_ref(),
            "rootfs".as_ref(),
            "--contents".as_ref(),
            "/boot=bootfs".as_ref(),
        ]);
        if !o.status.success() {
            assert_clear_error(&o, &name);
            refused.push(format!("{name}: {}", stderr(&o).trim()));
            continue;
        }
        let toml = stdout(&o);
        let text = fs::read_to_string(k).unwrap();
        // wic's table by its rules, written out here from partition.py / direct.py.
        let gpt = text.contains("--ptable gpt");
        let parts: Vec<&str> = text.lines().filter(|l| l.starts_with("part ")).collect();
        let opt = |l: &str, key: &str| -> Option<String> {
            let words: Vec<&str> = l.split_whitespace().collect();
            words.iter().enumerate().find_map(|(i, w)| {
                if let Some(v) = w.strip_prefix(&format!("{key}=")) {
                    Some(v.trim_matches('"').to_string())
                } else if *w == key {
                    words.get(i + 1).map(|v| v.to_string())
                } else {
                    None
                }
            })
        };
        let mut offset: u64 = if gpt { 34 } else { 1 };
        let mut theirs = Vec::new();
        for l in &parts {
            let fat = opt(l, "--fstype").is_none_or(|f| f == "vfat");
            let size_mib: u64 = opt(l, "--size").map_or(0, |s| s.parse().unwrap());
            let kib = match opt(l, "--source").as_deref() {
                None => size_mib * 1024,
                Some("bootimg-efi") => {
                    let du = du_kib(&boot, true);
                    du + (size_mib * 1024).saturating_sub(du).max(16 * 1024)
                }
                Some("rootfs") => {
                    let du = du_kib(&rootfs, false);
                    (du + (size_mib * 1024).saturating_sub(du).max(10 * 1024)) * 13 / 10
                }
                Some("bootimg-partition") => {
                    let du = du_kib(&boot, fat);
                    (du + (size_mib * 1024).saturating_sub(du).max(10 * 1024)) * 13 / 10
                }
                // bootimg-pcbios: du -bks of the staged directory (here the directory given
                // plus syslinux.cfg), then at least BOOTDD_EXTRA_SPACE (16 MiB) more, no
                // overhead factor.
                Some("bootimg-pcbios") => {
                    let du = du_kib(&boot, true) + (cfg_text.len() as u64).div_ceil(1024);
                    du + (size_mib * 1024).saturating_sub(du).max(16 * 1024)
                }
                Some(other) => panic!("{name}: {other} imported"),
            };
            if let Some(a) = opt(l, "--align") {
                let a: u64 = a.parse::<u64>().unwrap() * 2;
                offset = offset.div_ceil(a) * a;
            }
            let size = kib * 2;
            theirs.push((offset, size));
            offset += size;
        }
        let spec = write_file(d, "spec.toml", &toml);
        let out = d.join("out.img");
        let b = build_quiet(&spec, &out);
        assert!(b.status.success(), "{name}: {}\n{toml}", stderr(&b));
        let (_, ours) = table(&out);
        let eb: u64 = if toml.contains("erase-block = \"1MiB\"") {
            1 << 20
        } else {
            4 << 20
        };
        let ours: Vec<String> = ours.into_iter().filter(|l| !l.contains("type=f")).collect();
        let theirs_lines: Vec<String> = theirs
            .iter()
            .zip(&ours)
            .map(|((s, z), o)| {
                let rest: Vec<&str> = o.split(',').skip(2).collect();
                format!("start={s},size={z},{}", rest.join(","))
            })
            .collect();
        compare("wic", &name, &toml, &ours, &theirs_lines);
        // Aligned starts stay; every size is wic's rounded up to the erase block.
        for ((s, z), o) in theirs.iter().zip(&ours) {
            if (s * 512) % eb == 0 {
                assert_eq!(field(o, "start"), Some(*s), "{name}: {o}\n{toml}");
            }
            assert_eq!(
                field(o, "size").unwrap() * 512,
                (z * 512).div_ceil(eb) * eb,
                "{name}: {o}"
            );
        }
        if text.contains("bootimg-pcbios") {
            check_pcbios(&name, &out, &ours, &toml, cfg_text);
            // Deterministic: a second build is byte-identical (mtools' times are pinned).
            let again = d.join("again.img");
            let b = build_quiet(&spec, &again);
            assert!(b.status.success(), "{name}: {}", stderr(&b));
            assert!(
                fs::read(&out).unwrap() == fs::read(&again).unwrap(),
                "{name}: two builds differ"
            );
        }
        built.push(name);
    }
    eprintln!("built {built:?}\nrefused {refused:#?}");
    assert_eq!(built.len(), 5, "{built:?} {refused:?}");
}

/// The boot partition of an imported bootimg-pcbios kickstart: sector 0's boot code is
/// syslinux's mbr.bin, the FAT passes fsck.fat, holds ldlinux.sys, ldlinux.c32 and
/// syslinux.cfg (mtools), and its boot sector is the one `syslinux --install` writes into the
/// same volume (the oracle: the installer run here on blockwise's FAT without it).
fn check_pcbios(name: &str, img: &Path, ours: &[String], toml: &str, cfg: &[u8]) {
    if !have("fsck.fat") || !have("mcopy") || !have("syslinux") {
        return;
    }
    let mbr = fs::read("/usr/lib/syslinux/mbr/mbr.bin").unwrap();
    let bytes = fs::read(img).unwrap();
    assert_eq!(
        &bytes[..mbr.len()],
        &mbr[..],
        "{name}: sector 0 is not mbr.bin"
    );
    let line = &ours[0];
    let start = field(line, "start").unwrap() as usize * 512;
    let size = field(line, "size").unwrap() as usize * 512;
    let dir = tempdir!();
    let part = dir.path().join("boot.img");
    fs::write(&part, &bytes[start..start + size]).unwrap();
    let o = run("fsck.fat", &["-n".as_ref(), part.as_os_str()]);
    assert!(
        o.status.success(),
        "{name}: fsck.fat: {}{}",
        stdout(&o),
        stderr(&o)
    );
    let o = run(
        "mdir",
        &[
            "-a".as_ref(),
            "-i".as_ref(),
            part.as_os_str(),
            "::/".as_ref(),
        ],
    );
    let listing = stdout(&o).to_ascii_lowercase();
    for f in [
        "ldlinux  sys",
        "ldlinux  c32",
        "syslinux cfg",
        "kernel   img",
    ] {
        assert!(listing.contains(f), "{name}: no {f} in\n{listing}");
    }
    let got = dir.path().join("syslinux.cfg");
    let o = run(
        "mcopy",
        &[
            "-i".as_ref(),
            part.as_os_str(),
            "::/syslinux.cfg".as_ref(),
            got.as_os_str(),
        ],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(fs::read(&got).unwrap(), cfg, "{name}: syslinux.cfg");
    // The oracle: the same spec without the bootloader, then syslinux's own installer.
    let plain = toml.replace("fat.bootloader = \"syslinux\"\n", "");
    assert_ne!(plain, toml);
    // Beside the imported spec: the same content files, times and all.
    let spec = write_file(img.parent().unwrap(), "plain.toml", &plain);
    let plain_img = dir.path().join("plain.img");
    let b = build_quiet(&spec, &plain_img);
    assert!(b.status.success(), "{}", stderr(&b));
    let oracle = dir.path().join("oracle.img");
    let mut plain_part = fs::read(&plain_img).unwrap()[start..start + size].to_vec();
    // The seed derives from the spec text, so the volume ID differs: take ours.
    plain_part[0x27..0x2b].copy_from_slice(&bytes[start + 0x27..start + 0x2b]);
    fs::write(&oracle, &plain_part).unwrap();
    let o = std::process::Command::new("syslinux")
        .arg("--install")
        .arg(&oracle)
        .env("SOURCE_DATE_EPOCH", "315532800")
        .env("TZ", "UTC")
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    let theirs = fs::read(&oracle).unwrap();
    assert_eq!(&theirs[3..11], b"SYSLINUX");
    assert!(
        bytes[start..start + 512] == theirs[..512],
        "{name}: the boot sector is not the one syslinux --install writes"
    );
    // And the whole volume: ldlinux.sys and ldlinux.c32 where the installer puts them,
    // stamped alike.
    assert!(
        bytes[start..start + size] == theirs[..],
        "{name}: the volume is not the one syslinux --install makes"
    );
}

/// A content-sized wic partition without its directory is refused with what to give, and a
/// partition size nothing provides is refused as wic refuses it.
#[test]
fn wic_needs_content_or_size() {
    let dir = tempdir!();
    let d = dir.path();
    let k = write_file(
        d,
        "a.wks",
        "part / --source rootfs --fstype=ext4 --align 4096\n",
    );
    let o = blockwise!().run(["import".as_ref(), k.as_os_str()]);
    assert_clear_error(&o, "a.wks");
    assert!(
        stderr(&o).contains("a.wks:1: --source:") && stderr(&o).contains("--contents /=DIR"),
        "{}",
        stderr(&o)
    );
    let k = write_file(d, "b.wks", "part /data --fstype=ext4 --label data\n");
    let o = blockwise!().run(["import".as_ref(), k.as_os_str()]);
    assert!(stderr(&o).contains("b.wks:1: --size:"), "{}", stderr(&o));
    // Several problems: one line each.
    let k = write_file(d, "c.wks", "part / --fstype=btrfs --size 10\npart /x --fstype=ext4 --size 5 --exclude-path foo\nbogus line\n");
    let o = blockwise!().run(["import".as_ref(), k.as_os_str()]);
    let err = stderr(&o);
    assert!(
        err.contains("c.wks:1: --fstype:")
            && err.contains("c.wks:2: --exclude-path:")
            && err.contains("c.wks:3: bogus:"),
        "{err}"
    );
}

/// Hostile input: truncations of every corpus config and kickstart, and bytes that are not
/// text, end in exit 0 or 2, never a panic; quoted names are escaped.
#[test]
fn hostile_configs_never_panic() {
    let dir = tempdir!();
    let d = dir.path();
    let mut inputs: Vec<(String, Vec<u8>)> = vec![
        ("nul.config".into(), b"image a\0 { hdimage {} }".to_vec()),
        (
            "esc.config".into(),
            b"image \x1b[31mred { hdimage {} partition \x1b]0;x\x07 { size = 1M } }".to_vec(),
        ),
        ("deep.config".into(), "a {".repeat(10_000).into_bytes()),
        (
            "env.config".into(),
            b"image x { hdimage { align = ${NOPE_NOT_SET:-1M} } partition p { size = ${ } }"
                .to_vec(),
        ),
        ("self.config".into(), b"include(\"self.config\")".to_vec()),
        (
            "big.wks".into(),
            format!("part / --size {}\n", "9".repeat(40)).into_bytes(),
        ),
        ("q.wks".into(), b"part / --label \"unterminated\n".to_vec()),
    ];
    if let Some(c) = corpus() {
        for f in fs::read_dir(c.join("genimage/test")).unwrap().flatten() {
            let p = f.path();
            if p.extension().is_some_and(|e| e == "config") {
                let b = fs::read(&p).unwrap();
                for cut in (0..b.len()).step_by(97) {
                    inputs.push((
                        format!("cut{cut}-{}", p.file_name().unwrap().to_string_lossy()),
                        b[..cut].to_vec(),
                    ));
                }
            }
        }
        for sub in ["oe-core", "meta-raspberrypi-fork"] {
            for f in fs::read_dir(c.join("wic").join(sub)).unwrap().flatten() {
                let b = fs::read(f.path()).unwrap();
                for cut in (0..b.len()).step_by(53) {
                    inputs.push((
                        format!("cut{cut}-{}", f.file_name().to_string_lossy()),
                        b[..cut].to_vec(),
                    ));
                }
            }
        }
    }
    for (name, bytes) in &inputs {
        let p = d.join(name);
        fs::write(&p, bytes).unwrap();
        let o = blockwise!().run(["import".as_ref(), p.as_os_str()]);
        let code = o.status.code();
        assert!(
            matches!(code, Some(0 | 2)),
            "{name}: exit {code:?}: {}",
            stderr(&o)
        );
        assert!(
            !stderr(&o).contains('\x1b'),
            "{name}: unescaped control character: {:?}",
            stderr(&o)
        );
        if code == Some(0) {
            assert!(
                !stdout(&o).contains('\x1b'),
                "{name}: unescaped control character in the spec"
            );
        }
    }
}

/// The MBR entries of `image`'s LBA 0 as `sfdisk -d` reads them (sector 0 copied into a
/// file of its own, so sfdisk sees an MBR, not the GPT behind it).
fn mbr_entries(dir: &Path, image: &Path) -> Vec<String> {
    let sector = fs::read(image).unwrap()[..512].to_vec();
    let alone = dir.join("lba0.img");
    let mut bytes = sector;
    bytes.resize(16 << 20, 0);
    fs::write(&alone, bytes).unwrap();
    table(&alone).1
}

/// genimage's hybrid MBR (`partition-table-type = "hybrid"`): imported as `mbr-type`, built
/// at genimage's 1 MiB alignment, LBA 0 is byte for byte genimage 16's (or, without genimage,
/// the entries of genimage's own expectation: its test compares it with an MBR image whose
/// fourth entry is a "fake-gpt" 0xEE at sector 1 of 33 sectors); sgdisk finds no problem and
/// gdisk calls it hybrid; verify reads the mirrored types back and plan predicts its findings.
#[test]
fn genimage_hybrid_mbr() {
    let Some(corpus) = corpus() else { return };
    if !have("sfdisk") {
        return;
    }
    let dir = tempdir!();
    let d = dir.path();
    copy_dir(&corpus.join("genimage/test"), d);
    genimage_inputs(d);
    let o = blockwise!().run([
        "import".as_ref(),
        d.join("hdimage-hybrid.config").as_os_str(),
        "--image".as_ref(),
        "hybrid.hdimage".as_ref(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let toml = stdout(&o);
    assert_eq!(toml.matches("mbr-type = \"0x83\"").count(), 3, "{toml}");
    // genimage's 1 MiB alignment as the erase block, so nothing moves.
    let toml = toml.replacen(
        "table = \"gpt\"\n",
        "table = \"gpt\"\nerase-block = \"1MiB\"\n",
        1,
    );
    let spec = write_file(d, "hybrid.toml", &toml);
    let out = d.join("ours.img");
    let b = build_quiet(&spec, &out);
    assert!(b.status.success(), "{}", stderr(&b));
    assert_eq!(
        table(&out).1,
        fdisk_file(&d.join("hdimage-hybrid.fdisk")).1,
        "GPT"
    );
    let ours = mbr_entries(d, &out);
    assert_eq!(
        ours,
        [
            "start=2048,size=2048,type=83",
            "start=4096,size=2048,type=83",
            "start=6144,size=2048,type=83",
            "start=1,size=33,type=ee",
        ],
        "hybrid MBR"
    );
    if have("genimage") {
        match genimage_oracle(d, "hdimage-hybrid.config", Some("hybrid.hdimage"), None) {
            Oracle::Table(_) => {
                let theirs = fs::read(d.join("images/hybrid.hdimage")).unwrap();
                let mine = fs::read(&out).unwrap();
                assert!(
                    theirs[..512] == mine[..512],
                    "LBA 0 differs from genimage's"
                );
                // verify reads genimage's hybrid MBR as agreeing with its GPT.
                let v = blockwise!().run([
                    "verify".as_ref(),
                    "--json".as_ref(),
                    d.join("images/hybrid.hdimage").as_os_str(),
                ]);
                let text = stdout(&v);
                assert!(text.contains("\"hybrid-mbr\"") && !text.contains("mbr-gpt-disagree"));
            }
            Oracle::Unknown(why) => eprintln!("SKIP: genimage cannot run here: {why}"),
            Oracle::Refused(why) => panic!("genimage refuses its own hybrid test: {why}"),
            Oracle::Bare(..) => panic!("genimage made no partition table"),
        }
    }
    if have("sgdisk") {
        let v = run("sgdisk", &["-v".as_ref(), out.as_os_str()]);
        assert!(stdout(&v).contains("No problems found"), "{}", stdout(&v));
    }
    if have("gdisk") {
        let l = run("gdisk", &["-l".as_ref(), out.as_os_str()]);
        assert!(stdout(&l).contains("MBR: hybrid"), "{}", stdout(&l));
    }
    let human = stdout(&blockwise!().run(["plan".as_ref(), spec.as_os_str()]));
    assert!(
        human.contains("Hybrid MBR: partitions 1 as 0x83, 2 as 0x83, 3 as 0x83 (mbr-type), then 0xEE over LBA 1..33 (the primary GPT)"),
        "{human}"
    );
    // verify: the mirrored types read back, and exactly the findings plan predicted.
    let json = |args: &[&std::ffi::OsStr]| -> serde_json::Value {
        let o = blockwise!().run(args);
        serde_json::from_slice(&o.stdout).expect("json")
    };
    let v = json(&["verify".as_ref(), "--json".as_ref(), out.as_os_str()]);
    let p = json(&["plan".as_ref(), "--json".as_ref(), spec.as_os_str()]);
    let types: Vec<_> = v["partitions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["mbr_type"].as_str().unwrap_or("-").to_string())
        .collect();
    assert_eq!(types, ["0x83", "0x83", "0x83", "-", "-", "-"]);
    // The table's findings (the partitions hold zeros: verify finds them empty, plan calls
    // raw contents not checked; that is not this test's business).
    let table_findings = |r: &serde_json::Value| -> Vec<serde_json::Value> {
        r["findings"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|f| f["code"] != "not-checked")
            .cloned()
            .collect()
    };
    assert_eq!(table_findings(&v), table_findings(&p));
    assert_eq!(table_findings(&v).len(), 1, "{v}");
    assert_eq!(table_findings(&v)[0]["code"], "hybrid-mbr");
}

/// Every regular file under `dir`, as (path relative to `dir`, bytes), sorted.
fn files_under(dir: &Path) -> Vec<(String, Vec<u8>)> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in fs::read_dir(&d).unwrap().flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else {
                let rel = p.strip_prefix(dir).unwrap().to_string_lossy().into_owned();
                out.push((rel, fs::read(&p).unwrap()));
            }
        }
    }
    out.sort();
    out
}

/// A Buildroot-style vfat filled by genimage's `files = {…}` (a file from a subdirectory, a
/// whole directory, a file) and `file NAME { image = … }`: imported as `files`, built, and
/// the FAT holds exactly what genimage 16's does (both read out with mcopy); the table is
/// genimage's. An image the config builds, or a missing file, is refused naming the option.
#[test]
fn genimage_vfat_files() {
    if !(have("sfdisk") && have("mcopy")) {
        return;
    }
    let dir = tempdir!();
    let d = dir.path();
    fs::create_dir_all(d.join("input/rpi-firmware/overlays")).unwrap();
    fs::create_dir_all(d.join("root")).unwrap();
    write_file(&d.join("input/rpi-firmware"), "start4.elf", "firmware\n");
    write_file(
        &d.join("input/rpi-firmware/overlays"),
        "vc4-kms-v3d.dtbo",
        &"o".repeat(70_000),
    );
    write_file(&d.join("input"), "Image", &"k".repeat(5000));
    write_file(&d.join("input"), "cmdline.txt", "console=tty1\n");
    let cfg = "image boot.vfat {\n\tvfat {\n\t\tfiles = {\n\t\t\t\"rpi-firmware/start4.elf\",\n\t\t\t\"rpi-firmware/overlays\",\n\t\t\t\"Image\"\n\t\t}\n\t\tfile cmd.txt { image = \"cmdline.txt\" }\n\t}\n\tsize = 32M\n}\n\nimage sdcard.img {\n\thdimage {\n\t\talign = 4M\n\t}\n\tpartition boot {\n\t\tpartition-type = 0xC\n\t\tbootable = \"true\"\n\t\timage = \"boot.vfat\"\n\t}\n}\n";
    let config = write_file(d, "genimage.cfg", cfg);
    let o = blockwise!().run(["import".as_ref(), config.as_os_str()]);
    assert!(o.status.success(), "{}", stderr(&o));
    let toml = stdout(&o);
    assert!(
        toml.contains("files = [\"input/rpi-firmware/start4.elf\", \"input/rpi-firmware/overlays\", \"input/Image\", { source = \"input/cmdline.txt\", dest = \"/cmd.txt\" }]"),
        "{toml}"
    );
    assert!(!toml.contains("contents ="), "{toml}");
    let spec = write_file(d, "spec.toml", &toml);
    let out = d.join("ours.img");
    let b = build_quiet(&spec, &out);
    assert!(b.status.success(), "{}", stderr(&b));
    let (_, ours) = table(&out);
    let start = field(&ours[0], "start").unwrap();
    let got = d.join("ours");
    blockwise_test_kit::mcopy_out(&out, start * 512, &got);
    let expected: Vec<(String, Vec<u8>)> = vec![
        ("Image".into(), fs::read(d.join("input/Image")).unwrap()),
        (
            "cmd.txt".into(),
            fs::read(d.join("input/cmdline.txt")).unwrap(),
        ),
        (
            "overlays/vc4-kms-v3d.dtbo".into(),
            fs::read(d.join("input/rpi-firmware/overlays/vc4-kms-v3d.dtbo")).unwrap(),
        ),
        (
            "start4.elf".into(),
            fs::read(d.join("input/rpi-firmware/start4.elf")).unwrap(),
        ),
    ];
    assert_eq!(files_under(&got), expected);
    if have("genimage") && have("mkdosfs") {
        match genimage_oracle(d, "genimage.cfg", Some("sdcard.img"), None) {
            Oracle::Table((_, theirs)) => {
                assert_eq!(ours, theirs, "partition table");
                let gen = d.join("theirs");
                blockwise_test_kit::mcopy_out(&d.join("images/boot.vfat"), 0, &gen);
                assert_eq!(files_under(&gen), expected, "genimage's FAT");
            }
            Oracle::Unknown(why) => eprintln!("SKIP: genimage cannot run here: {why}"),
            Oracle::Refused(why) => panic!("genimage refuses the config: {why}"),
            Oracle::Bare(..) => panic!("genimage made no partition table"),
        }
    }
    // Refusals: a file that is not there, an image the config builds.
    let bad = cfg
        .replace("\"Image\"", "\"nope.bin\"")
        .replace("image = \"cmdline.txt\"", "image = \"boot.vfat\"");
    let config = write_file(d, "bad.cfg", &bad);
    let o = blockwise!().run(["import".as_ref(), config.as_os_str()]);
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.contains("bad.cfg:3: files: \"input/nope.bin\" does not exist"),
        "{err}"
    );
    assert!(
        err.contains("bad.cfg:8: file: \"boot.vfat\" is an image this config builds"),
        "{err}"
    );
}

/// bootimg-pcbios's refusals name the option and line: grub as the loader, a configfile that
/// is not beside the kickstart, an mbr.bin that is not where `--contents syslinux=DIR` says,
/// and bootimg-biosplusefi; `--ptable gpt` takes syslinux's gptmbr.bin.
#[test]
fn wic_pcbios_options() {
    let dir = tempdir!();
    let d = dir.path();
    fs::create_dir(d.join("boot")).unwrap();
    let k = write_file(
        d,
        "bad.wks",
        "part /boot --source bootimg-pcbios --sourceparams=\"loader-bios=grub\" --align 1024\npart / --source bootimg-biosplusefi\npart /b --source bootimg-pcbios --fstype=ext4\nbootloader --configfile=missing.cfg\n",
    );
    let o = blockwise!().run([
        "import".as_ref(),
        k.as_os_str(),
        "--contents".as_ref(),
        "/boot=boot".as_ref(),
    ]);
    assert_clear_error(&o, "bad.wks");
    let err = stderr(&o);
    for needle in [
        "bad.wks:1: --sourceparams:",
        "bad.wks:4: --configfile: \"missing.cfg\" does not exist",
        "bad.wks:2: --source: bootimg-biosplusefi",
        "bad.wks:3: --fstype: \"ext4\" with bootimg-pcbios",
    ] {
        assert!(err.contains(needle), "{needle:?} not in {err}");
    }
    let k = write_file(
        d,
        "g.wks",
        "part /boot --source bootimg-pcbios --align 1024\nbootloader --ptable gpt\n",
    );
    let import = |extra: &str| {
        blockwise!().run([
            "import".as_ref(),
            k.as_os_str(),
            "--contents".as_ref(),
            "/boot=boot".as_ref(),
            "--contents".as_ref(),
            extra.as_ref(),
        ])
    };
    let o = import("syslinux=nowhere");
    assert!(
        stderr(&o)
            .contains("g.wks:1: --source: bootimg-pcbios: \"nowhere/gptmbr.bin\" does not exist"),
        "{}",
        stderr(&o)
    );
    fs::create_dir(d.join("sl")).unwrap();
    fs::write(d.join("sl/gptmbr.bin"), [0x90u8; 440]).unwrap();
    let o = import("syslinux=sl");
    assert!(o.status.success(), "{}", stderr(&o));
    let toml = stdout(&o);
    assert!(toml.contains("boot-code = \"sl/gptmbr.bin\""), "{toml}");
    assert!(toml.contains("fat.bootloader = \"syslinux\""), "{toml}");
    assert!(toml.contains("no bootloader --configfile"), "{toml}");
}
