//! Hostile content trees: each has a clear outcome (an error naming the path, or a documented
//! skip or warning), never a hang, a panic or a wrong image.

use std::fs;
use std::os::unix::ffi::OsStrExt as _;
use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};
use std::process::Output;

use blockwise_test_kit::{blockwise, e2fsck_clean, fsck_fat_clean, is_root, run, tempdir};

fn spec(dir: &Path, fs_kind: &str, contents: &str, size: &str) -> PathBuf {
    let p = dir.join(format!("{fs_kind}.toml"));
    fs::write(
        &p,
        format!("[image]\ntable = \"none\"\nsize = \"{size}\"\ntimestamp = 1700000000\n[[partition]]\nfs = \"{fs_kind}\"\nsize = \"fill\"\ncontents = \"{contents}\"\n"),
    )
    .unwrap();
    p
}

/// An empty `dir/c` for contents.
fn contents_dir(dir: &Path) -> PathBuf {
    let c = dir.join("c");
    fs::create_dir(&c).unwrap();
    c
}

/// `blockwise build SPEC -o OUT -q`, not started yet.
fn build_command(spec: &Path, out: &Path) -> std::process::Command {
    let mut cmd = std::process::Command::new(blockwise!().path());
    cmd.arg("build").arg(spec).arg("-o").arg(out).arg("-q");
    cmd
}

fn build(spec: &Path, out: &Path) -> Output {
    blockwise!().try_build(spec, out)
}

/// Exit 2, one line, naming `needle`, nothing left behind.
fn refused(o: &Output, out: &Path, needle: &str) {
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains(needle), "{needle:?} not in {err:?}");
    assert_eq!(err.trim_end().lines().count(), 1, "{err}");
    assert!(!out.exists());
}

/// Exit 3 (a failed write), one line holding every needle, nothing left behind.
fn failed_write<T: std::fmt::Debug>(o: &Output, needles: &[&str], left: &[T]) {
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(3), "{:?} {err}", o.status);
    for n in needles {
        assert!(err.contains(n), "{n:?} not in {err}");
    }
    assert_eq!(err.trim_end().lines().count(), 1, "{err}");
    assert!(left.is_empty(), "left behind: {left:?}");
}

#[test]
fn special_files_and_symlink_loops() {
    let dir = tempdir!();
    let c = contents_dir(dir.path());
    std::os::unix::fs::symlink("loop2", c.join("loop1")).unwrap();
    std::os::unix::fs::symlink("loop1", c.join("loop2")).unwrap();
    assert!(run("mkfifo", &[c.join("fifo").to_str().unwrap()])
        .status
        .success());
    let sock = std::os::unix::net::UnixListener::bind(c.join("sock")).unwrap();
    if is_root() {
        assert!(
            run("mknod", &[c.join("null").to_str().unwrap(), "c", "1", "3"])
                .status
                .success()
        );
    }
    fs::write(c.join("data.txt"), "data\n").unwrap();
    // ext4 stores them all as what they are; FAT skips them with one warning each.
    let out = dir.path().join("ext4.img");
    let o = build(&spec(dir.path(), "ext4", "c", "32MiB"), &out);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    e2fsck_clean(&out, None);
    let out = dir.path().join("fat.img");
    let o = build(&spec(dir.path(), "fat", "c", "32MiB"), &out);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    let skipped = if is_root() { 5 } else { 4 };
    assert_eq!(err.matches("skipped").count(), skipped, "{err}");
    fsck_fat_clean(&out);
    drop(sock);
}

#[test]
fn pseudo_filesystems_are_refused() {
    let dir = tempdir!();
    for (contents, name) in [("/proc", "proc"), ("/sys/kernel", "sysfs")] {
        if !Path::new(contents).exists() {
            continue;
        }
        let out = dir.path().join("p.img");
        let o = build(&spec(dir.path(), "ext4", contents, "32MiB"), &out);
        refused(&o, &out, &format!("{name} pseudo filesystem"));
    }
}

#[test]
fn a_thousand_levels_deep() {
    let dir = tempdir!();
    let mut p = dir.path().join("deep");
    for _ in 0..1000 {
        p.push("d");
    }
    fs::create_dir_all(&p).unwrap();
    let out = dir.path().join("deep.img");
    let o = build(&spec(dir.path(), "ext4", "deep", "32MiB"), &out);
    refused(&o, &out, "deeper than 256 levels");
}

/// Names of 255 bytes (ASCII, and 85 three-byte characters) are stored and read back by
/// e2fsck/debugfs and by mtools (FAT keeps up to 255 UTF-16 units); a 256-byte component,
/// which no Linux directory can hold but a `[[partition.entry]]` path can name, is refused
/// naming the key.
#[test]
fn long_names() {
    let dir = tempdir!();
    let c = contents_dir(dir.path());
    let ascii = "n".repeat(255);
    let euro = "\u{20ac}".repeat(85);
    assert_eq!(euro.len(), 255);
    fs::write(c.join(&ascii), "ascii").unwrap();
    fs::create_dir(c.join(&euro)).unwrap();
    fs::write(c.join(&euro).join(&ascii), "inside").unwrap();
    for k in ["ext4", "fat"] {
        let out = dir.path().join(format!("{k}.img"));
        let o = build(&spec(dir.path(), k, "c", "64MiB"), &out);
        assert!(
            o.status.success(),
            "{k}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        let back = dir.path().join(format!("{k}-back"));
        if k == "ext4" {
            e2fsck_clean(&out, None);
            fs::create_dir(&back).unwrap();
            let o = run(
                "debugfs",
                &[
                    "-R".to_string(),
                    format!("rdump / {}", back.display()),
                    out.to_string_lossy().into_owned(),
                ],
            );
            assert!(o.status.success(), "{o:?}");
        } else {
            fsck_fat_clean(&out);
            blockwise_test_kit::mcopy_out(&out, 0, &back);
        }
        let base = back;
        assert_eq!(fs::read(base.join(&ascii)).unwrap(), b"ascii", "{k}");
        assert_eq!(
            fs::read(base.join(&euro).join(&ascii)).unwrap(),
            b"inside",
            "{k}"
        );
    }
    let sp = dir.path().join("entry.toml");
    fs::write(
        &sp,
        format!("[image]\ntable = \"none\"\nsize = \"32MiB\"\n[[partition]]\nfs = \"ext4\"\nsize = \"fill\"\n[[partition.entry]]\npath = \"/{}\"\nkind = \"dir\"\n", "m".repeat(256)),
    )
    .unwrap();
    let out = dir.path().join("entry.img");
    refused(&build(&sp, &out), &out, "partition[1].entry[1].path");
}

/// Names (and a symlink target) that are not UTF-8: ext4 stores the bytes with both backends,
/// as `mke2fs -d` does; FAT refuses with the partition and the path (bytes shown as `\xNN`).
#[test]
fn non_utf8_names() {
    let dir = tempdir!();
    let c = contents_dir(dir.path());
    let names: [&[u8]; 3] = [b"caf\xe9", b"\xff\xfe", b"ok.txt"];
    for n in names {
        fs::write(c.join(std::ffi::OsStr::from_bytes(n)), n).unwrap();
    }
    fs::create_dir(c.join(std::ffi::OsStr::from_bytes(b"d\xe9j\xe0"))).unwrap();
    std::os::unix::fs::symlink(std::ffi::OsStr::from_bytes(b"caf\xe9"), c.join("to-cafe")).unwrap();
    for backend in ["native", "mke2fs"] {
        let sp = dir.path().join(format!("{backend}.toml"));
        fs::write(
            &sp,
            format!("[image]\ntable = \"none\"\nsize = \"32MiB\"\ntimestamp = 1700000000\n[[partition]]\nfs = \"ext4\"\nsize = \"fill\"\ncontents = \"c\"\next4.backend = \"{backend}\"\n"),
        )
        .unwrap();
        let out = dir.path().join(format!("{backend}.img"));
        let o = build(&sp, &out);
        assert!(
            o.status.success(),
            "{backend}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        e2fsck_clean(&out, None);
        // debugfs shows the bytes that are not printable as \xNN.
        let ls = blockwise_test_kit::debugfs(&out, "ls -l /");
        for n in ["caf\\xe9", "\\xff\\xfe", "ok.txt", "d\\xe9j\\xe0"] {
            assert!(ls.contains(n), "{backend}: {n} not in debugfs ls:\n{ls}");
        }
        // Read back byte for byte: ext4-view, and the kernel when we may mount.
        let bytes = fs::read(&out).unwrap();
        let mut img = blockwise_geometry::SparseImage::new(bytes.len() as u64);
        blockwise_geometry::BlockSink::write_at(&mut img, 0, &bytes).unwrap();
        let view = blockwise_test_kit::ext4_view_at(img, 0);
        let listed: Vec<Vec<u8>> = view
            .read_dir("/")
            .unwrap()
            .map(|e| e.unwrap().file_name().as_ref().to_vec())
            .collect();
        for n in names {
            assert!(
                listed.iter().any(|l| l == n),
                "{backend}: {n:?} not in {listed:?}"
            );
        }
        if blockwise_test_kit::have_loop() {
            let mnt = dir.path().join(format!("mnt-{backend}"));
            blockwise_test_kit::with_kernel_mount(&out, "ext4", &mnt, |m| {
                for n in names {
                    let p = m.join(std::ffi::OsStr::from_bytes(n));
                    assert_eq!(fs::read(&p).unwrap(), n, "{}", p.display());
                }
                let t = fs::read_link(m.join("to-cafe")).unwrap();
                assert_eq!(t.as_os_str().as_bytes(), b"caf\xe9");
                assert!(m.join(std::ffi::OsStr::from_bytes(b"d\xe9j\xe0")).is_dir());
            });
        }
    }
    // FAT: exit 2, one line naming the partition and the path.
    let out = dir.path().join("fat.img");
    let o = build(&spec(dir.path(), "fat", "c", "32MiB"), &out);
    refused(&o, &out, "partition[1]");
    refused(&o, &out, "/caf\\xe9");
    refused(&o, &out, "not valid UTF-8");
}

#[test]
fn a_sparse_100_gib_file() {
    let dir = tempdir!();
    let c = contents_dir(dir.path());
    let f = fs::File::create(c.join("huge.bin")).unwrap();
    f.set_len(100 << 30).unwrap();
    use std::os::unix::fs::FileExt;
    f.write_all_at(b"tail", (100 << 30) - 4).unwrap();
    // ext4 keeps it sparse: a small image holds it.
    let out = dir.path().join("ext4.img");
    let o = build(&spec(dir.path(), "ext4", "c", "64MiB"), &out);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    e2fsck_clean(&out, None);
    // FAT cannot hold a file of 4 GiB or more: the error says so, with the path.
    let out = dir.path().join("fat.img");
    let o = build(&spec(dir.path(), "fat", "c", "64MiB"), &out);
    refused(&o, &out, "huge.bin");
}

/// Two builds to the same output at once: each writes its own temp file and renames it, so
/// one complete image remains (never an interleaving) and no temp file is left.
#[test]
fn two_builds_to_one_output() {
    let dir = tempdir!();
    let c = contents_dir(dir.path());
    for i in 0..20 {
        fs::write(
            c.join(format!("f{i}")),
            blockwise_test_kit::bytes(i, 300_000),
        )
        .unwrap();
    }
    let sp = spec(dir.path(), "fat", "c", "64MiB");
    let out = dir.path().join("same.img");
    let spawn = || {
        build_command(&sp, &out)
            .stdout(std::process::Stdio::null())
            .spawn()
            .unwrap()
    };
    let (a, b) = (spawn(), spawn());
    for mut child in [a, b] {
        assert!(child.wait().unwrap().success());
    }
    fsck_fat_clean(&out);
    let left: Vec<_> = fs::read_dir(dir.path())
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().contains(".tmp-"))
        .collect();
    assert!(left.is_empty(), "{left:?}");
}

/// A full disk while writing the output: exit 3 (a failed write), one line naming the file,
/// the temp file removed, whether the write that failed was a kernel copy or a gathering.
/// Needs root for a small tmpfs.
#[test]
fn a_full_disk_is_a_failed_write() {
    if !blockwise_test_kit::have_loop() {
        return;
    }
    // One large file (copied by the kernel), or 128 of 64 KiB (read into the writer's
    // gathering on its second thread).
    for files in [1u64, 128] {
        let dir = tempdir!();
        let c = contents_dir(dir.path());
        for i in 0..files {
            let data = blockwise_test_kit::bytes(3 + i, (8 << 20) / files as usize);
            fs::write(c.join(format!("f{i}.bin")), data).unwrap();
        }
        let sp = spec(dir.path(), "fat", &c.to_string_lossy(), "64MiB");
        let small = dir.path().join("small");
        fs::create_dir(&small).unwrap();
        let mounted = run(
            "mount",
            &[
                "-t",
                "tmpfs",
                "-o",
                "size=2m",
                "tmpfs",
                small.to_str().unwrap(),
            ],
        );
        assert!(mounted.status.success(), "{mounted:?}");
        let out = small.join("out.img");
        let o = build(&sp, &out);
        let left: Vec<_> = fs::read_dir(&small)
            .unwrap()
            .flatten()
            .map(|e| e.file_name())
            .collect();
        let _ = run("umount", &[small.to_str().unwrap()]);
        failed_write(&o, &["out.img", "No space left"], &left);
    }
}

/// A tree of `n` files of 16 MiB in `dir/c` and an ext4 spec for a 1 GiB image of it: a
/// write phase that lasts long enough to be caught in the middle.
fn long_build(dir: &Path, n: u64) -> PathBuf {
    let c = contents_dir(dir);
    for i in 0..n {
        fs::write(
            c.join(format!("f{i:02}")),
            blockwise_test_kit::bytes(i, 16 << 20),
        )
        .unwrap();
    }
    spec(dir, "ext4", "c", "1GiB")
}

/// The build's temp files for `out` (`.NAME.tmp-…`) in its directory.
fn temps_of(out: &Path) -> Vec<PathBuf> {
    let prefix = format!(".{}.tmp-", out.file_name().unwrap().to_string_lossy());
    fs::read_dir(out.parent().unwrap())
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with(&prefix))
        .map(|e| e.path())
        .collect()
}

/// Starts `blockwise build SPEC -o OUT -q` and returns once its temp file exists (the write
/// phase has begun), with the temp file's path.
fn start_writing(sp: &Path, out: &Path) -> (std::process::Child, PathBuf) {
    let mut child = build_command(sp, out)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let t = std::time::Instant::now();
    while t.elapsed() < std::time::Duration::from_secs(120) {
        if let Some(tmp) = temps_of(out).pop() {
            return (child, tmp);
        }
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
    let _ = child.kill();
    let o = child.wait_with_output().unwrap();
    panic!("the build never began writing: {o:?}");
}

/// SIGINT, SIGTERM and SIGHUP while the image is written: the build stops, removes its temp
/// file, says so and exits 128 + the signal; the output does not appear.
#[test]
fn an_interrupted_build_leaves_nothing() {
    let dir = tempdir!();
    let sp = long_build(dir.path(), 48);
    for (signal, code) in [("-INT", 130), ("-TERM", 143), ("-HUP", 129)] {
        let out = dir.path().join("int.img");
        let (child, _) = start_writing(&sp, &out);
        let pid = child.id().to_string();
        assert!(run("kill", &[signal, &pid]).status.success());
        let o = child.wait_with_output().unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(code), "{signal}: {err}");
        assert!(
            err.contains("interrupted") && err.contains("temp files removed"),
            "{err}"
        );
        assert_eq!(err.trim_end().lines().count(), 1, "{err}");
        let left: Vec<_> = fs::read_dir(dir.path())
            .unwrap()
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| n.starts_with(".int.img") || n == "int.img")
            .collect();
        assert!(left.is_empty(), "{signal}: left behind {left:?}");
    }
}

/// SIGKILL cannot be caught: the killed build's temp file stays, and the next build to the
/// same output recognises it by the PID and start time in its name and removes it, then
/// writes a complete image.
#[test]
fn the_next_build_removes_what_a_sigkill_left() {
    let dir = tempdir!();
    let sp = long_build(dir.path(), 24);
    let out = dir.path().join("k.img");
    let (mut child, tmp) = start_writing(&sp, &out);
    child.kill().unwrap();
    let status = child.wait().unwrap();
    assert_eq!(
        std::os::unix::process::ExitStatusExt::signal(&status),
        Some(9)
    );
    assert!(tmp.exists(), "a SIGKILLed build left no temp file to test");
    assert!(!out.exists());
    let o = build(&sp, &out);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(!tmp.exists(), "the killed build's temp file stayed");
    assert!(temps_of(&out).is_empty(), "{:?}", temps_of(&out));
    e2fsck_clean(&out, None);
}

/// `verify` of the temp file while it is written, and of the output as it appears: each
/// reports what it reads (exit 0, 1, or 2 when the file vanished under it by the rename),
/// never a panic.
#[test]
fn verify_while_the_image_is_written() {
    let dir = tempdir!();
    let c = contents_dir(dir.path());
    for i in 0..24 {
        fs::write(
            c.join(format!("f{i:02}")),
            blockwise_test_kit::bytes(i, 8 << 20),
        )
        .unwrap();
    }
    let sp = dir.path().join("two.toml");
    fs::write(
        &sp,
        "[image]\nsize = \"1GiB\"\ntimestamp = 1700000000\n[[partition]]\nfs = \"fat32\"\nsize = \"400MiB\"\ncontents = \"c\"\n[[partition]]\nfs = \"ext4\"\nsize = \"fill\"\ncontents = \"c\"\n",
    )
    .unwrap();
    let out = dir.path().join("w.img");
    let (mut child, tmp) = start_writing(&sp, &out);
    let mut runs = 0;
    let mut codes = std::collections::BTreeMap::new();
    while child.try_wait().unwrap().is_none() || runs == 0 {
        for target in [&tmp, &out] {
            let o = blockwise!().run(["verify".as_ref(), target.as_os_str()]);
            let err = String::from_utf8_lossy(&o.stderr);
            assert!(
                matches!(o.status.code(), Some(0..=2)),
                "verify {}: {:?} {err}",
                target.display(),
                o.status
            );
            assert!(
                !err.contains("panicked") && !err.contains("internal error"),
                "{err}"
            );
            *codes.entry(o.status.code()).or_insert(0) += 1;
            runs += 1;
        }
    }
    assert!(child.wait().unwrap().success());
    eprintln!("{runs} verify runs while writing, exit codes {codes:?}");
    // Once written, the image verifies.
    let o = blockwise!().run(["verify".as_ref(), out.as_os_str()]);
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stdout)
    );
}

/// A file or directory this user may not read: exit 2 with one line naming it, found by the
/// scan (before anything is written), nothing left behind. Root reads everything, so as root
/// the build runs as `nobody` (setpriv).
#[test]
fn unreadable_files_and_directories_are_named() {
    // Under the system temp dir (world-traversable, unlike a checkout under /root), with a
    // copy of the binary, so that nobody can reach the tree, the binary and the output.
    let dir = blockwise_test_kit::tempdir_in(std::env::temp_dir());
    fs::set_permissions(dir.path(), fs::Permissions::from_mode(0o777)).unwrap();
    let bin = dir.path().join("blockwise");
    fs::copy(blockwise!().path(), &bin).unwrap();
    let as_user = |args: &[&std::ffi::OsStr]| -> Output {
        let mut cmd = if is_root() {
            let mut c = blockwise_test_kit::command("setpriv");
            c.args(["--reuid=65534", "--regid=65534", "--clear-groups"])
                .arg(&bin);
            c
        } else {
            std::process::Command::new(&bin)
        };
        cmd.args(args).output().unwrap()
    };
    let c = contents_dir(dir.path());
    fs::write(c.join("fine.txt"), "fine\n").unwrap();
    fs::write(c.join("secret.txt"), "secret\n").unwrap();
    fs::set_permissions(c.join("secret.txt"), fs::Permissions::from_mode(0o000)).unwrap();
    // An unreadable empty file is fine: it is never opened.
    fs::write(c.join("empty"), "").unwrap();
    fs::set_permissions(c.join("empty"), fs::Permissions::from_mode(0o000)).unwrap();
    let locked = c.join("locked");
    fs::create_dir(&locked).unwrap();
    fs::write(locked.join("inside"), "x").unwrap();
    for kind in ["ext4", "fat"] {
        let sp = spec(dir.path(), kind, "c", "32MiB");
        let out = dir.path().join(format!("{kind}.img"));
        let o = as_user(&[
            "build".as_ref(),
            sp.as_os_str(),
            "-o".as_ref(),
            out.as_os_str(),
        ]);
        refused(&o, &out, "secret.txt: Permission denied");
        // Found by the scan, not when the copy opened it half-way through the write.
        assert!(
            !String::from_utf8_lossy(&o.stderr).contains("writing"),
            "{o:?}"
        );
        assert!(temps_of(&out).is_empty());
        // Readable file, unreadable directory.
        fs::set_permissions(c.join("secret.txt"), fs::Permissions::from_mode(0o644)).unwrap();
        fs::set_permissions(&locked, fs::Permissions::from_mode(0o000)).unwrap();
        let o = as_user(&[
            "build".as_ref(),
            sp.as_os_str(),
            "-o".as_ref(),
            out.as_os_str(),
        ]);
        refused(&o, &out, "locked: Permission denied");
        // Both readable: the build succeeds as the same user.
        fs::set_permissions(&locked, fs::Permissions::from_mode(0o755)).unwrap();
        let o = as_user(&[
            "build".as_ref(),
            sp.as_os_str(),
            "-o".as_ref(),
            out.as_os_str(),
            "-q".as_ref(),
        ]);
        assert!(
            o.status.success(),
            "{kind}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        fs::set_permissions(c.join("secret.txt"), fs::Permissions::from_mode(0o000)).unwrap();
    }
}

/// An I/O error under the output file (EIO at writeback, reported by fsync): exit 3, one line
/// naming the file, the temp file removed. The output's filesystem is ext4 on a loop device
/// whose backing file is made immutable (`chattr +i`) once mounted: the loop device's writes
/// then fail (EPERM from the backing file, EIO above it), with no device-mapper needed.
/// Needs root.
#[test]
fn an_io_error_under_the_output_is_a_failed_write() {
    if !blockwise_test_kit::have_loop() {
        return;
    }
    let dir = tempdir!();
    let c = contents_dir(dir.path());
    fs::write(c.join("big.bin"), blockwise_test_kit::bytes(7, 8 << 20)).unwrap();
    let sp = spec(dir.path(), "fat", &c.to_string_lossy(), "32MiB");
    let mnt = dir.path().join("mnt");
    fs::create_dir(&mnt).unwrap();
    let back = dir.path().join("back.img");
    fs::File::create(&back).unwrap().set_len(64 << 20).unwrap();
    let lo = blockwise_test_kit::LoopDevice::attach(&back, false, None);
    let dev = lo.path().to_str().unwrap().to_string();
    let mkfs = run(
        "mkfs.ext4",
        &[
            "-q",
            "-F",
            "-O",
            "^has_journal",
            "-E",
            "nodiscard,lazy_itable_init=0",
            &dev,
        ],
    );
    assert!(mkfs.status.success(), "{mkfs:?}");
    let m = run(
        "mount",
        &["-o", "errors=continue", &dev, mnt.to_str().unwrap()],
    );
    assert!(m.status.success(), "{m:?}");
    let out = mnt.join("out.img");
    let immutable = run("chattr", &["+i", back.to_str().unwrap()]);
    let o = immutable.status.success().then(|| build(&sp, &out));
    let left: Vec<_> = fs::read_dir(&mnt)
        .unwrap()
        .flatten()
        .map(|e| e.file_name())
        .filter(|n| n != "lost+found")
        .collect();
    let _ = run("chattr", &["-i", back.to_str().unwrap()]);
    let _ = run("umount", &[mnt.to_str().unwrap()]);
    lo.detach();
    let Some(o) = o else {
        eprintln!("SKIP: chattr +i is not supported here: {immutable:?}");
        return;
    };
    failed_write(&o, &["out.img", "Input/output error"], &left);
}

/// Under a file-size limit (`ulimit -f`) the kernel would kill the build with SIGXFSZ and
/// leave its temp file; blockwise catches it, so the write fails with EFBIG: exit 3, one line
/// that names the limit, nothing left behind. A limit above the image size changes nothing.
#[test]
fn a_file_size_limit_is_a_failed_write() {
    let dir = tempdir!();
    let c = contents_dir(dir.path());
    fs::write(c.join("data.bin"), blockwise_test_kit::bytes(9, 4 << 20)).unwrap();
    let sp = spec(dir.path(), "fat", "c", "32MiB");
    let out = dir.path().join("lim.img");
    // prlimit (util-linux) takes bytes; shells' `ulimit -f` units differ (512 in dash).
    let limited = |bytes: u64| -> Output {
        blockwise_test_kit::command("prlimit")
            .arg(format!("--fsize={bytes}:{bytes}"))
            .arg(blockwise!().path())
            .arg("build")
            .arg(&sp)
            .arg("-o")
            .arg(&out)
            .arg("-q")
            .output()
            .unwrap()
    };
    let o = limited(16 << 20);
    assert!(!out.exists());
    failed_write(
        &o,
        &[
            "File too large",
            "file-size limit (ulimit -f) is 16777216 bytes",
        ],
        &temps_of(&out),
    );
    let o = limited(33 << 20);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    fsck_fat_clean(&out);
}

/// The output written inside its own `contents` tree (`contents = "."`, `-o out.img`): the
/// native scan leaves the previous image, its `.bmap` and temp files out, with a warning, so
/// rebuilding gives the same bytes as the first build; the mke2fs backend, whose `mke2fs -d`
/// cannot leave anything out, refuses naming the key and leaves nothing behind.
#[test]
fn the_output_inside_its_contents_is_left_out() {
    let top = tempdir!();
    for kind in ["ext4", "fat"] {
        let dir = top.path().join(kind);
        fs::create_dir(&dir).unwrap();
        fs::write(dir.join("a.txt"), "a\n").unwrap();
        let sp = spec(&dir, kind, ".", "32MiB");
        let out = dir.join(format!("{kind}.img"));
        let bmap = dir.join(format!("{kind}.bmap"));
        let first = blockwise!().build_with(&sp, &out, ["--bmap".as_ref(), bmap.as_os_str()]);
        let first_bytes = fs::read(&out).unwrap();
        let again = blockwise!().build_with(&sp, &out, ["--bmap".as_ref(), bmap.as_os_str()]);
        let err = String::from_utf8_lossy(&again.stderr);
        assert!(
            !String::from_utf8_lossy(&first.stderr).contains("left out"),
            "{first:?}"
        );
        for name in [format!("{kind}.img"), format!("{kind}.bmap")] {
            assert!(
                err.contains(&format!("{name}: left out of the image")),
                "{kind}: {err}"
            );
        }
        assert!(
            fs::read(&out).unwrap() == first_bytes,
            "{kind}: the rebuild differs"
        );
        let listing = if kind == "ext4" {
            e2fsck_clean(&out, None);
            blockwise_test_kit::debugfs(&out, "ls -l /")
        } else {
            fsck_fat_clean(&out);
            String::from_utf8_lossy(
                &blockwise_test_kit::command("mdir")
                    .env("MTOOLS_SKIP_CHECK", "1")
                    .args(["-a", "-i"])
                    .arg(&out)
                    .arg("::/")
                    .output()
                    .unwrap()
                    .stdout,
            )
            .into_owned()
        };
        assert!(
            listing.contains("a.txt") || listing.contains("A       TXT"),
            "{kind}: {listing}"
        );
        assert!(
            !listing.contains(".img") && !listing.contains(".bmap") && !listing.contains("IMG"),
            "{kind}: the image holds an output:\n{listing}"
        );
    }
    let dir = top.path().join("mke2fs");
    fs::create_dir(&dir).unwrap();
    let sp = dir.join("mke2fs.toml");
    fs::write(
        &sp,
        "[image]\ntable = \"none\"\nsize = \"32MiB\"\ntimestamp = 1700000000\n[[partition]]\nfs = \"ext4\"\nsize = \"fill\"\ncontents = \".\"\next4.backend = \"mke2fs\"\n",
    )
    .unwrap();
    let out = dir.join("m.img");
    refused(&build(&sp, &out), &out, "partition[1].contents");
    let left: Vec<_> = fs::read_dir(&dir)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with(".blockwise-mke2fs") || n.contains(".tmp-"))
        .collect();
    assert!(left.is_empty(), "{left:?}");
}
