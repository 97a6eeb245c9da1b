//! Truth and parity (issue 26): what `plan` says, `build` writes and `verify` reads agree, and
//! the real tools agree with all three — the most partitions an MBR takes, `[[partition.entry]]`
//! on hard links, reproducible builds after `touch`, labels as the filesystems define them,
//! and `plan --json` = `verify --json` of the build for the mke2fs backend.

use std::path::Path;

use blockwise_test_kit::{blockwise, have, run, sfdisk_json, tempdir, write_file};

fn stderr(o: &std::process::Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// `blockwise plan --json SPEC`, parsed.
fn plan_json(spec: &Path) -> serde_json::Value {
    let o = blockwise!().run(["plan".as_ref(), "--json".as_ref(), spec.as_os_str()]);
    assert!(o.status.success(), "{}", stderr(&o));
    serde_json::from_slice(&o.stdout).unwrap()
}

/// `blockwise verify --json [ARGS] IMG` and its exit code.
fn verify_json(img: &Path, args: &[&str]) -> (serde_json::Value, i32) {
    let mut a: Vec<&std::ffi::OsStr> = vec!["verify".as_ref(), "--json".as_ref()];
    a.extend(args.iter().map(std::ffi::OsStr::new));
    a.push(img.as_os_str());
    let o = blockwise!().run(a);
    let v = serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("{e}: {}", stderr(&o)));
    (v, o.status.code().unwrap_or(-1))
}

fn mbr_spec(n: usize) -> String {
    let mut s = String::from("[image]\ntable = \"mbr\"\nerase-block = \"128KiB\"\nseed = 5\n");
    for _ in 0..n {
        s.push_str("[[partition]]\nfs = \"none\"\nsize = \"128KiB\"\n");
    }
    s
}

/// r26 item 8: the most partitions an MBR layout takes (59: 1–3 primary, 5–60 logical) builds,
/// verifies whole and is listed whole by sfdisk; one more is refused by plan and build, naming
/// the limit.
#[test]
fn r26_the_largest_mbr_layout_verifies_whole() {
    let dir = tempdir!();
    let max = blockwise_geometry::MAX_MBR_PARTITIONS;
    let img = blockwise!().build_spec(dir.path(), "max", &mbr_spec(max));
    let (report, code) = verify_json(&img, &["--erase-block", "128KiB"]);
    assert_eq!(code, 0, "{report:#}");
    let parts = report["partitions"].as_array().unwrap();
    assert_eq!(parts.len(), max);
    assert_eq!(parts.last().unwrap()["index"], 60);
    assert_eq!(report["findings"], serde_json::json!([]), "{report:#}");
    let plan = plan_json(&dir.path().join("max.toml"));
    assert_eq!(plan["partitions"].as_array().unwrap().len(), max);
    if have("sfdisk") {
        let t = sfdisk_json(&img);
        let listed = t["partitiontable"]["partitions"].as_array().unwrap();
        // The extended partition (number 4) is listed too.
        assert_eq!(listed.len(), max + 1, "{t:#}");
        let o = run("sfdisk", &["--verify".as_ref(), img.as_os_str()]);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stdout));
    }
    let spec = write_file(dir.path(), "over.toml", &mbr_spec(max + 1));
    for cmd in ["plan", "build"] {
        let out = dir.path().join("over.img");
        let mut args: Vec<&std::ffi::OsStr> = vec![cmd.as_ref(), spec.as_os_str()];
        if cmd == "build" {
            args.extend(["-o".as_ref(), out.as_os_str()]);
        }
        let o = blockwise!().run(args);
        let err = stderr(&o);
        assert_eq!(o.status.code(), Some(2), "{cmd}: {err}");
        assert!(
            err.contains("an MBR table holds at most 59 partitions") && err.contains("gpt"),
            "{cmd}: {err}"
        );
        assert!(!out.exists());
    }
}

/// `debugfs -R "stat PATH"`: (inode, mode with type bits, uid, gid).
fn debugfs_stat(img: &Path, path: &str) -> (u64, u32, u32, u32) {
    let out = blockwise_test_kit::debugfs(img, &format!("stat \"{path}\""));
    let num = |key: &str, radix: u32| -> u64 {
        let rest = out
            .split(key)
            .nth(1)
            .unwrap_or_else(|| panic!("{key} not in debugfs stat {path}: {out}"));
        let word = rest.split_whitespace().next().unwrap_or("");
        u64::from_str_radix(word.trim_start_matches("0x"), radix)
            .unwrap_or_else(|e| panic!("{key} {word:?} in debugfs stat {path}: {e}\n{out}"))
    };
    let mode = u32::try_from(num("Mode:", 8)).unwrap();
    let ino = num("Inode:", 10);
    let uid = u32::try_from(num("User:", 10)).unwrap();
    let gid = u32::try_from(num("Group:", 10)).unwrap();
    (ino, mode, uid, gid)
}

/// r26 item 1: an entry for the second name of a hard-linked file applies to the file (both
/// names), on both ext4 backends, as debugfs and a kernel mount read it; entries that
/// disagree about one file are refused naming both keys.
#[test]
fn r26_entries_on_hard_links_apply_to_the_inode() {
    if !(have("debugfs") && have("mke2fs")) {
        return;
    }
    use std::os::unix::fs::MetadataExt;
    let dir = tempdir!();
    let t = dir.path().join("t");
    std::fs::create_dir_all(t.join("d")).unwrap();
    std::fs::write(t.join("a"), b"one file, two names\n").unwrap();
    std::fs::hard_link(t.join("a"), t.join("d/b")).unwrap();
    std::fs::write(t.join("c"), b"alone\n").unwrap();
    for backend in ["native", "mke2fs"] {
        let spec = format!(
            "[image]\ntable = \"none\"\nseed = 2\ntimestamp = 1700000000\n[[partition]]\nfs = \"ext4\"\nsize = \"16MiB\"\ncontents = \"t\"\next4 = {{ backend = \"{backend}\" }}\n[[partition.entry]]\npath = \"/d/b\"\nmode = \"0600\"\nuid = 70000\ngid = 5\n"
        );
        let img = blockwise!().build_spec(dir.path(), backend, &spec);
        let a = debugfs_stat(&img, "/a");
        let b = debugfs_stat(&img, "/d/b");
        assert_eq!(a, b, "{backend}: one inode");
        assert_eq!((a.1 & 0o7777, a.2, a.3), (0o600, 70_000, 5), "{backend}");
        let c = debugfs_stat(&img, "/c");
        let host = std::fs::metadata(t.join("c")).unwrap();
        assert_eq!(
            (c.1 & 0o7777, c.2),
            (host.mode() & 0o7777, host.uid()),
            "{backend}: other files keep their own"
        );
        if blockwise_test_kit::have_loop() {
            blockwise_test_kit::with_kernel_mount(&img, "ext4", &dir.path().join("mnt"), |m| {
                let (ma, mb) = (
                    std::fs::metadata(m.join("a")).unwrap(),
                    std::fs::metadata(m.join("d/b")).unwrap(),
                );
                assert_eq!(ma.ino(), mb.ino(), "{backend}");
                for md in [ma, mb] {
                    assert_eq!(
                        (md.mode() & 0o7777, md.uid(), md.gid(), md.nlink()),
                        (0o600, 70_000, 5, 2),
                        "{backend}"
                    );
                }
            });
        }
    }
    let bad = "[image]\ntable = \"none\"\n[[partition]]\nfs = \"ext4\"\nsize = \"16MiB\"\ncontents = \"t\"\n[[partition.entry]]\npath = \"/a\"\nuid = 1\n[[partition.entry]]\npath = \"/d/b\"\nuid = 2\n";
    let spec = write_file(dir.path(), "bad.toml", bad);
    let o = blockwise!().run(["plan".as_ref(), spec.as_os_str()]);
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.contains("partition[1].entry[2].uid: partition[1].entry[1].uid sets the uid of /d/b (a hard link to /a, one file) to 1, this entry to 2"),
        "{err}"
    );
}

fn sha256(path: &Path) -> String {
    use sha2::Digest;
    let bytes = std::fs::read(path).unwrap();
    format!("{:x}", sha2::Sha256::digest(&bytes))
}

/// A contents tree with a file, a hard link, a symlink, an empty directory and a nested file.
fn sample_tree(root: &Path) {
    std::fs::create_dir_all(root.join("etc/empty")).unwrap();
    std::fs::write(root.join("etc/hostname"), b"parity\n").unwrap();
    std::fs::write(root.join("data.bin"), vec![7u8; 70_000]).unwrap();
    std::fs::hard_link(root.join("data.bin"), root.join("etc/data.link")).unwrap();
    std::os::unix::fs::symlink("hostname", root.join("etc/name")).unwrap();
}

/// Touches every file, directory and symlink under `root` (and reads every file, which moves
/// atimes where the mount allows).
fn touch_all(root: &Path) {
    let o = run(
        "find",
        &[
            root.as_os_str(),
            "-exec".as_ref(),
            "touch".as_ref(),
            "-h".as_ref(),
            "{}".as_ref(),
            "+".as_ref(),
        ],
    );
    assert!(o.status.success());
    let o = run(
        "find",
        &[
            root.as_os_str(),
            "-type".as_ref(),
            "f".as_ref(),
            "-exec".as_ref(),
            "cat".as_ref(),
            "{}".as_ref(),
            "+".as_ref(),
        ],
    );
    assert!(o.status.success());
}

/// r26 item 2: building after `touch`-ing every source gives the same bytes, for FAT and both
/// ext4 backends; with no `timestamp` but `SOURCE_DATE_EPOCH` too; and every inode time of the
/// mke2fs backend's image (root, lost+found, files, directories, symlinks) is the clamp.
#[test]
fn r26_builds_after_touch_are_identical() {
    if !(have("mke2fs") && have("debugfs") && have("find") && have("touch")) {
        return;
    }
    let dir = tempdir!();
    let t = dir.path().join("t");
    sample_tree(&t);
    let ts = 1_700_000_000i64;
    for (name, part, stamp) in [
        ("fat", "fs = \"fat32\"\nsize = \"300MiB\"", true),
        ("native", "fs = \"ext4\"\nsize = \"32MiB\"", true),
        (
            "mke2fs",
            "fs = \"ext4\"\nsize = \"32MiB\"\next4 = { backend = \"mke2fs\" }",
            true,
        ),
        (
            "mke2fs-sde",
            "fs = \"ext4\"\nsize = \"32MiB\"\next4 = { backend = \"mke2fs\" }",
            false,
        ),
    ] {
        let stamp_line = if stamp {
            format!("timestamp = {ts}\n")
        } else {
            String::new()
        };
        let entry = if name == "fat" {
            ""
        } else {
            "[[partition.entry]]\npath = \"/etc/new\"\nkind = \"dir\"\n"
        };
        let spec = write_file(
            dir.path(),
            &format!("{name}.toml"),
            &format!("[image]\ntable = \"none\"\nseed = 4\n{stamp_line}[[partition]]\n{part}\ncontents = \"t\"\n{entry}"),
        );
        let build = |out: &Path| {
            let mut c = std::process::Command::new(blockwise!().path());
            c.args([
                "build".as_ref(),
                spec.as_os_str(),
                "-o".as_ref(),
                out.as_os_str(),
                "-q".as_ref(),
            ]);
            c.env("SOURCE_DATE_EPOCH", ts.to_string());
            let o = c.output().unwrap();
            assert!(o.status.success(), "{name}: {}", stderr(&o));
        };
        let first = dir.path().join(format!("{name}-1.img"));
        build(&first);
        std::thread::sleep(std::time::Duration::from_millis(1100));
        touch_all(&t);
        let second = dir.path().join(format!("{name}-2.img"));
        build(&second);
        assert_eq!(
            sha256(&first),
            sha256(&second),
            "{name}: touching the sources changed the image"
        );
        if name.starts_with("mke2fs") {
            for path in [
                "/",
                "/lost+found",
                "/etc",
                "/etc/empty",
                "/etc/name",
                "/etc/new",
                "/data.bin",
                "/etc/hostname",
            ] {
                let out = blockwise_test_kit::debugfs(&second, &format!("stat \"{path}\""));
                for field in [" ctime:", " atime:", " mtime:", "crtime:"] {
                    let line = out
                        .lines()
                        .find(|l| l.starts_with(field))
                        .unwrap_or_else(|| panic!("{name} {path}: no {field}\n{out}"));
                    assert!(
                        line.contains(&format!("0x{ts:08x}:00000000")),
                        "{name} {path}: {line}"
                    );
                }
            }
        }
    }
}

/// r26 item 3: verify reads an ext4 label as UTF-8 (what dumpe2fs and e2label show),
/// for both backends, and prints control characters escaped, never raw and never as `?`.
#[test]
fn r26_labels_read_as_the_filesystem_defines_them() {
    if !(have("dumpe2fs") && have("e2label") && have("mke2fs")) {
        return;
    }
    let dir = tempdir!();
    for (backend, label) in [
        ("native", "Données"),
        ("mke2fs", "Données"),
        ("native", "日本語ラベ"),
        ("native", "a\u{1b}[2Jb"),
    ] {
        let toml_label = label.replace('\u{1b}', "\\u001b");
        let spec = format!(
            "[image]\ntable = \"none\"\nseed = 1\n[[partition]]\nfs = \"ext4\"\nsize = \"16MiB\"\nlabel = \"{toml_label}\"\next4 = {{ backend = \"{backend}\" }}\n"
        );
        let img = blockwise!().build_spec(dir.path(), "label", &spec);
        let (report, code) = verify_json(&img, &[]);
        assert_eq!(code, 0, "{report:#}");
        assert_eq!(
            report["partitions"][0]["filesystem"]["label"], label,
            "{backend}"
        );
        let plan = plan_json(&dir.path().join("label.toml"));
        assert_eq!(plan["partitions"][0]["filesystem"]["label"], label);
        let human = blockwise!().run(["verify".as_ref(), img.as_os_str()]);
        let text = String::from_utf8(human.stdout).unwrap();
        assert!(
            !text.contains('\u{1b}'),
            "a raw ESC in the human output: {text:?}"
        );
        assert!(
            text.contains(&format!("\"{}\"", label.replace('\u{1b}', "\\x1b"))),
            "{text}"
        );
        if !label.contains('\u{1b}') {
            let d = run("dumpe2fs", &["-h".as_ref(), img.as_os_str()]);
            let d = String::from_utf8_lossy(&d.stdout).into_owned();
            assert!(
                d.lines()
                    .any(|l| l.starts_with("Filesystem volume name:") && l.ends_with(label)),
                "{d}"
            );
            let e = run("e2label", &[img.as_os_str()]);
            assert_eq!(String::from_utf8_lossy(&e.stdout).trim_end(), label);
        }
    }
}

/// Sets the superblock field of the bare ext4 image `img` at `at` to `value` (little endian,
/// `value.len()` bytes) and recomputes the superblock checksum, as a tool editing it would.
fn patch_superblock(img: &Path, at: usize, value: &[u8]) {
    use std::os::unix::fs::FileExt;
    let f = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(img)
        .unwrap();
    let mut sb = vec![0u8; 1024];
    f.read_exact_at(&mut sb, 1024).unwrap();
    sb[at..at + value.len()].copy_from_slice(value);
    let sum = blockwise_ext4::csum::crc32c_raw(!0, &sb[..0x3fc]);
    sb[0x3fc..].copy_from_slice(&sum.to_le_bytes());
    f.write_all_at(&sb, 1024).unwrap();
}

/// r26 item 9: superblocks the kernel refuses to mount (or mounts read-only only), checksums
/// made to match, make verify exit 1 with the exact finding; the kernel is asked too.
#[test]
fn r26_verify_refuses_what_the_kernel_refuses() {
    let dir = tempdir!();
    let spec =
        "[image]\ntable = \"none\"\nseed = 3\n[[partition]]\nfs = \"ext4\"\nsize = \"16MiB\"\n";
    let good = blockwise!().build_spec(dir.path(), "good", spec);
    let (report, code) = verify_json(&good, &[]);
    assert_eq!(code, 0, "{report:#}");
    let sb = std::fs::read(&good).unwrap();
    let word = |at: usize| u32::from_le_bytes(sb[1024 + at..1024 + at + 4].try_into().unwrap());
    // (what, offset in the superblock, new bytes, finding, the kernel mounts it read-only)
    let cases: [(&str, usize, Vec<u8>, &str, bool); 6] = [
        (
            "incompat bit 31",
            0x60,
            (word(0x60) | 1 << 31).to_le_bytes().to_vec(),
            "ext4-unsupported",
            false,
        ),
        (
            "ro_compat bit 31",
            0x64,
            (word(0x64) | 1 << 31).to_le_bytes().to_vec(),
            "ext4-read-only",
            true,
        ),
        (
            "s_first_ino 0",
            0x54,
            0u32.to_le_bytes().to_vec(),
            "ext4-first-ino",
            false,
        ),
        (
            "s_log_groups_per_flex 255",
            0x174,
            vec![255],
            "ext4-flex-bg",
            false,
        ),
        (
            "s_rev_level 0xFFFFFFFF",
            0x4c,
            u32::MAX.to_le_bytes().to_vec(),
            "ext4-read-only",
            true,
        ),
        (
            "s_rev_level 2",
            0x4c,
            2u32.to_le_bytes().to_vec(),
            "ext4-read-only",
            true,
        ),
    ];
    for (what, at, value, finding, ro) in cases {
        let img = dir.path().join("bad.img");
        std::fs::copy(&good, &img).unwrap();
        patch_superblock(&img, at, &value);
        let (report, code) = verify_json(&img, &[]);
        assert_eq!(code, 1, "{what}: {report:#}");
        let codes: Vec<(&str, &str)> = report["findings"]
            .as_array()
            .unwrap()
            .iter()
            .map(|f| (f["code"].as_str().unwrap(), f["severity"].as_str().unwrap()))
            .collect();
        assert_eq!(codes, [(finding, "error")], "{what}");
        if blockwise_test_kit::have_loop() && have("mount") {
            // The kernel agrees: it refuses even a read-only mount, or mounts it read-only
            // only (a read-write mount fails or comes back read-only).
            let dev = blockwise_test_kit::LoopDevice::attach(&img, false, None);
            let mnt = dir.path().join("mnt");
            std::fs::create_dir_all(&mnt).unwrap();
            let mount = |opts: &str| -> Option<bool> {
                let m = run(
                    "mount",
                    &[
                        "-t".as_ref(),
                        "ext4".as_ref(),
                        "-o".as_ref(),
                        opts.as_ref(),
                        dev.path().as_os_str(),
                        mnt.as_os_str(),
                    ],
                );
                if !m.status.success() {
                    return None;
                }
                let mounts = std::fs::read_to_string("/proc/self/mounts").unwrap();
                let read_only = mounts
                    .lines()
                    .find(|l| l.split(' ').nth(1) == mnt.to_str())
                    .and_then(|l| l.split(' ').nth(3))
                    .is_some_and(|o| o.split(',').any(|x| x == "ro"));
                let _ = run("umount", &[&mnt]);
                Some(read_only)
            };
            let rw = mount("rw");
            let ro_mount = mount("ro");
            if ro {
                assert!(
                    rw != Some(false) && ro_mount.is_some(),
                    "{what}: the kernel should mount it read-only only ({rw:?}, {ro_mount:?})"
                );
            } else {
                assert!(
                    rw.is_none() && ro_mount.is_none(),
                    "{what}: the kernel mounted it"
                );
            }
        }
    }
}

/// r25 item 7: a partition whose contents verify cannot check (swap, raw bytes) makes the
/// verdict say so, `aligned` false and `--strict` exit 1; plan says the same beforehand.
#[test]
fn r25_verdicts_say_what_was_not_checked() {
    let dir = tempdir!();
    std::fs::write(
        dir.path().join("blob.bin"),
        (0..70_000u32)
            .map(|i| u8::try_from(i % 251).unwrap() + 1)
            .collect::<Vec<u8>>(),
    )
    .unwrap();
    let spec = "[image]\ntable = \"gpt\"\nseed = 8\n[[partition]]\nfs = \"fat32\"\nsize = \"300MiB\"\n[[partition]]\nfs = \"swap\"\nsize = \"8MiB\"\n[[partition]]\nfs = \"raw\"\nsource = \"blob.bin\"\n";
    let img = blockwise!().build_spec(dir.path(), "mixed", spec);
    let (report, code) = verify_json(&img, &[]);
    assert_eq!(code, 0, "{report:#}");
    assert_eq!(report["aligned"], false);
    let parts = report["partitions"].as_array().unwrap();
    let checked: Vec<_> = parts.iter().map(|p| p.get("checked").cloned()).collect();
    assert_eq!(checked, [None, Some(false.into()), Some(false.into())]);
    assert_eq!(parts[1]["content"], "swap");
    assert_eq!(parts[2]["filesystem"]["kind"], "raw");
    let (strict, code) = verify_json(&img, &["--strict"]);
    assert_eq!(code, 1, "{strict:#}");
    let human = blockwise!().run(["verify".as_ref(), img.as_os_str()]);
    let text = String::from_utf8_lossy(&human.stdout);
    assert!(
        text.contains("verdict: 1 of 3 partitions checked; swap in partition 2, raw bytes in partition 3 not checked — what was checked sits on the 4 MiB erase block (2 warnings)"),
        "{text}"
    );
    let plan = plan_json(&dir.path().join("mixed.toml"));
    assert_eq!(plan["aligned"], false);
    assert_eq!(plan["findings"], report["findings"]);
    let o = blockwise!().run(["plan".as_ref(), dir.path().join("mixed.toml").as_os_str()]);
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(
        text.contains(
            "aligned where checked: verify cannot check inside partition 2 (swap), 3 (raw)"
        ),
        "{text}"
    );
}

/// r26 item 6: KB/MB/GB/TB are powers of 1000 (as sfdisk and parted read them), K/M/G/T and
/// KiB/MiB/GiB/TiB powers of 1024, in specs and CLI flags; plan shows a decimal size both
/// ways.
#[test]
fn r26_decimal_and_binary_units() {
    let o = blockwise!().run([
        "plan",
        "--json",
        "--size",
        "8GB",
        "--partition",
        "fat32:256MiB",
        "--partition",
        "ext4:fill",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["size_bytes"], 8_000_000_000u64);
    let parts = v["partitions"].as_array().unwrap();
    assert_eq!(parts[0]["size_bytes"], 256u64 << 20);
    let end = parts[1]["start_bytes"].as_u64().unwrap() + parts[1]["size_bytes"].as_u64().unwrap();
    assert!(
        end <= 8_000_000_000,
        "the fill partition ends past a retail 8 GB card: {end}"
    );
    let o = blockwise!().run([
        "plan",
        "--size",
        "8GB",
        "--partition",
        "fat32:256M",
        "--partition",
        "ext4:fill",
    ]);
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(
        text.contains("8 GB = 8,000,000,000 bytes = 7.45 GiB"),
        "{text}"
    );
    let dir = tempdir!();
    let spec = write_file(
        dir.path(),
        "u.toml",
        "[image]\nsize = \"1GB\"\nerase-block = \"4MiB\"\n[[partition]]\nfs = \"none\"\nsize = \"100MB\"\n[[partition]]\nfs = \"none\"\nsize = \"4M\"\n",
    );
    let v = plan_json(&spec);
    assert_eq!(v["size_bytes"], 1_000_000_000u64);
    // 100 MB rounds up to the 4 MiB erase block: 100,663,296 bytes.
    assert_eq!(v["partitions"][0]["size_bytes"], 24u64 * (4 << 20));
    assert_eq!(v["partitions"][1]["size_bytes"], 4u64 << 20);
    let bad = write_file(
        dir.path(),
        "e.toml",
        "[image]\nerase-block = \"4MB\"\n[[partition]]\nfs = \"none\"\nsize = \"4MiB\"\n",
    );
    let o = blockwise!().run(["plan".as_ref(), bad.as_os_str()]);
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        err.contains("image.erase-block") && err.contains("4,000,000 bytes is a decimal size"),
        "{err}"
    );
}
