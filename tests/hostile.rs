//! Hostile content trees: each has a clear outcome (an error naming the path, or a documented
//! skip or warning), never a hang, a panic or a wrong image.

use std::fs;
use std::os::unix::ffi::OsStrExt as _;
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

#[test]
fn long_names() {
    let dir = tempdir!();
    let c = contents_dir(dir.path());
    // 255 bytes: the longest name ext4 and FAT (255 UTF-16 units) store.
    fs::write(c.join("n".repeat(255)), "x").unwrap();
    for k in ["ext4", "fat"] {
        let out = dir.path().join(format!("{k}.img"));
        let o = build(&spec(dir.path(), k, "c", "64MiB"), &out);
        assert!(
            o.status.success(),
            "{k}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
    }
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
/// the temp file removed. Needs root for a small tmpfs.
#[test]
fn a_full_disk_is_a_failed_write() {
    if !blockwise_test_kit::have_loop() {
        return;
    }
    let dir = tempdir!();
    let c = contents_dir(dir.path());
    fs::write(c.join("big.bin"), blockwise_test_kit::bytes(3, 8 << 20)).unwrap();
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
    let err = String::from_utf8_lossy(&o.stderr).into_owned();
    let left: Vec<_> = fs::read_dir(&small)
        .unwrap()
        .flatten()
        .map(|e| e.file_name())
        .collect();
    let _ = run("umount", &[small.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(3), "{err}");
    assert!(
        err.contains("out.img") && err.contains("No space left"),
        "{err}"
    );
    assert_eq!(err.trim_end().lines().count(), 1, "{err}");
    assert!(left.is_empty(), "left behind: {left:?}");
}

/// SIGINT (and SIGTERM) while the image is written: the build stops, removes its temp file,
/// says so and exits 128 + the signal; the output does not appear.
#[test]
fn an_interrupted_build_leaves_nothing() {
    let dir = tempdir!();
    let c = contents_dir(dir.path());
    // Enough content that the write phase lasts a while (copied file by file).
    for i in 0..48 {
        fs::write(
            c.join(format!("f{i:02}")),
            blockwise_test_kit::bytes(i, 16 << 20),
        )
        .unwrap();
    }
    let sp = spec(dir.path(), "ext4", "c", "1GiB");
    for (signal, code) in [("-INT", 130), ("-TERM", 143)] {
        let out = dir.path().join("int.img");
        let child = build_command(&sp, &out)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let pid = child.id().to_string();
        // Signal as soon as the temp file exists (the write phase has begun).
        let t = std::time::Instant::now();
        while t.elapsed() < std::time::Duration::from_secs(60) {
            let writing = fs::read_dir(dir.path())
                .unwrap()
                .flatten()
                .any(|e| e.file_name().to_string_lossy().starts_with(".int.img.tmp-"));
            if writing {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        assert!(run("kill", &[signal, &pid]).status.success());
        let o = child.wait_with_output().unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(code), "{signal}: {err}");
        assert!(
            err.contains("interrupted") && err.contains("temp files removed"),
            "{err}"
        );
        let left: Vec<_> = fs::read_dir(dir.path())
            .unwrap()
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| n.starts_with(".int.img") || n == "int.img")
            .collect();
        assert!(left.is_empty(), "{signal}: left behind {left:?}");
    }
}
