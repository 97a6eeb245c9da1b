//! Building without holding the content: the image is metadata plus references, file data
//! is copied when the output is written, inputs that change in between are errors, FIFOs
//! never hang a build, and on XFS the copy shares the sources' blocks.

use std::fs;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant, SystemTime};

use blockwise_host::{build, Error, SpecFile};
use sha2::{Digest, Sha256};

use blockwise_test_kit::{assert_success, blockwise, bytes, have, have_loop, run, tempdir};

const MIB: u64 = 1 << 20;

/// Deterministic pseudo-random bytes.
fn noise(seed: u64, len: u64) -> Vec<u8> {
    bytes(seed, usize::try_from(len).unwrap())
}

/// `dir/contents` with `big` files of `big_len` bytes, a nested small file and a sparse file.
fn make_tree(dir: &Path, big: u64, big_len: u64) -> PathBuf {
    let c = dir.join("contents");
    fs::create_dir_all(c.join("sub/deeper")).unwrap();
    for i in 0..big {
        fs::write(c.join(format!("big{i}.bin")), noise(i + 1, big_len)).unwrap();
    }
    fs::write(c.join("sub/deeper/small.txt"), b"small\n").unwrap();
    let f = fs::File::create(c.join("sparse.bin")).unwrap();
    f.set_len(8 * MIB).unwrap();
    use std::os::unix::fs::FileExt;
    f.write_all_at(&noise(99, 5000), 3 * MIB + 17).unwrap();
    c
}

/// A one-partition MBR spec of `size` over `dir/contents`.
fn spec_sized(dir: &Path, fs_line: &str, size: &str) -> PathBuf {
    let p = dir.join("spec.toml");
    fs::write(
        &p,
        format!(
            "[image]\nsize = \"{size}\"\ntable = \"mbr\"\nseed = 3\ntimestamp = 1700000000\n\n[[partition]]\n{fs_line}\nsize = \"fill\"\ncontents = \"contents\"\n"
        ),
    )
    .unwrap();
    p
}

fn spec(dir: &Path, fs_line: &str) -> PathBuf {
    spec_sized(dir, fs_line, "256MiB")
}

fn leftovers(dir: &Path) -> Vec<String> {
    fs::read_dir(dir)
        .unwrap()
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains(".tmp"))
        .collect()
}

/// The image holds the metadata and references; no content byte is read before writing.
#[test]
fn the_image_holds_metadata_and_references_not_content() {
    for fs_line in ["fs = \"fat32\"", "fs = \"ext4\""] {
        let dir = tempdir!();
        make_tree(dir.path(), 12, 4 * MIB + 123);
        let sp = spec(dir.path(), fs_line);
        let mut sf = SpecFile::load(&sp).unwrap();
        let built = build(&mut sf, dir.path()).unwrap();
        let content = 12 * (4 * MIB + 123) + 5000 + 6;
        // Sparse data is referenced block-wise around its data.
        assert!(
            built.image.content_bytes() >= content && built.image.content_bytes() <= content + 8192,
            "{fs_line}: {} content bytes referenced",
            built.image.content_bytes()
        );
        assert!(
            built.image.metadata_bytes() < 2 * MIB,
            "{fs_line}: {} metadata bytes in memory",
            built.image.metadata_bytes()
        );
        let out = dir.path().join("out.img");
        let stats = built.write(&out, None, &mut ()).unwrap();
        assert_eq!(stats.content_bytes, built.image.content_bytes());
        eprintln!("{fs_line}: {stats:?}");
    }
}

/// Each way a source can change between scan and copy fails the write, names the file and
/// leaves neither the image, nor the .bmap, nor a temp file.
#[test]
fn sources_changed_after_the_scan_fail_the_write() {
    type Mutation = fn(&Path);
    let mutations: [(&str, Mutation); 5] = [
        ("grown", |p| {
            fs::OpenOptions::new()
                .append(true)
                .open(p)
                .unwrap()
                .write_all(b"more")
                .unwrap();
        }),
        ("shrunk", |p| {
            fs::OpenOptions::new()
                .write(true)
                .open(p)
                .unwrap()
                .set_len(1000)
                .unwrap();
        }),
        ("rewritten (same size, new mtime)", |p| {
            let f = fs::OpenOptions::new().write(true).open(p).unwrap();
            f.set_modified(SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000))
                .unwrap();
        }),
        ("replaced", |p| {
            let tmp = p.with_extension("new");
            fs::write(&tmp, noise(7, 2 * MIB)).unwrap();
            fs::rename(&tmp, p).unwrap();
        }),
        ("replaced by a FIFO", |p| {
            fs::remove_file(p).unwrap();
            assert!(run("mkfifo", &[p.to_str().unwrap()]).status.success());
        }),
    ];
    // 2 MiB: copied with `copy_file_range`; 64 KiB: read into the writer's gathering.
    for (fs_line, len) in [
        ("fs = \"fat32\"", 2 * MIB),
        ("fs = \"ext4\"", 2 * MIB),
        ("fs = \"ext4\"", 64 << 10),
        ("fs = \"fat32\"", 64 << 10),
    ] {
        for (what, mutate) in mutations {
            let dir = tempdir!();
            let c = make_tree(dir.path(), 2, len);
            let sp = spec(dir.path(), fs_line);
            let mut sf = SpecFile::load(&sp).unwrap();
            let built = build(&mut sf, dir.path()).unwrap();
            mutate(&c.join("big1.bin"));
            let out = dir.path().join("out.img");
            let bmap = dir.path().join("out.bmap");
            let t = Instant::now();
            let err = built.write(&out, Some(&bmap), &mut ()).unwrap_err();
            assert!(t.elapsed() < Duration::from_secs(60), "{what}: hung");
            match &err {
                Error::Changed { path, .. } => assert!(path.ends_with("big1.bin"), "{err}"),
                other => panic!("{fs_line}, {len} B, {what}: expected Changed, got {other:?}"),
            }
            assert!(
                !out.exists() && !bmap.exists(),
                "{what}: output left behind"
            );
            assert!(leftovers(dir.path()).is_empty(), "{what}: temp files left");
        }
    }
}

/// Waits for `child` at most `limit`; kills it and fails on a hang.
fn wait_or_kill(mut child: Child, limit: Duration) -> std::process::Output {
    let t = Instant::now();
    while child.try_wait().unwrap().is_none() {
        if t.elapsed() > limit {
            child.kill().ok();
            panic!("blockwise build hung (FIFO read?)");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    child.wait_with_output().unwrap()
}

/// A FIFO among the contents is a FIFO node in ext4 and skipped with a warning in FAT; the
/// build never opens it. stderr carries nothing but that warning when it is not a terminal.
#[test]
fn a_fifo_in_the_contents_never_hangs_the_build() {
    if !have("mkfifo") {
        return;
    }
    for (fs_line, warns) in [("fs = \"ext4\"", false), ("fs = \"fat32\"", true)] {
        let dir = tempdir!();
        let c = make_tree(dir.path(), 1, MIB);
        assert!(run("mkfifo", &[c.join("pipe").to_str().unwrap()])
            .status
            .success());
        let sp = spec(dir.path(), fs_line);
        let out = dir.path().join("out.img");
        let child = Command::new(blockwise!().path())
            .args(["build", sp.to_str().unwrap(), "-o", out.to_str().unwrap()])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let o = wait_or_kill(child, Duration::from_secs(120));
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(o.status.success(), "{fs_line}: {err}");
        assert_eq!(err.contains("pipe"), warns, "{fs_line}: stderr {err:?}");
        assert_eq!(
            err.lines().count(),
            usize::from(warns),
            "{fs_line}: only the warning on a non-terminal stderr: {err:?}"
        );
    }
}

fn sha256_file(p: &Path) -> String {
    let mut f = fs::File::open(p).unwrap();
    let mut h = Sha256::new();
    std::io::copy(&mut f, &mut h).unwrap();
    format!("{:x}", h.finalize())
}

/// Runs `cmd` and returns stdout, panicking with stderr on failure.
fn ok(cmd: &str, args: &[&str]) -> String {
    let o = run(cmd, args);
    assert_success(&o, cmd);
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// Unmounts and detaches on drop.
struct XfsMount {
    dir: PathBuf,
    dev: String,
}

impl Drop for XfsMount {
    fn drop(&mut self) {
        let _ = run("umount", &[self.dir.to_str().unwrap_or("")]);
        let _ = run("losetup", &["-d", &self.dev]);
    }
}

fn df_used(dir: &Path) -> u64 {
    ok("sync", &[]);
    let out = ok("df", &["--output=used", "-B1", dir.to_str().unwrap()]);
    out.lines().nth(1).unwrap().trim().parse().unwrap()
}

/// On XFS (reflink on by default) the written image shares the files' blocks with
/// the sources, so the filesystem grows by far less than the content, and the image is
/// byte-identical to the one built on the project's own filesystem.
#[test]
fn on_xfs_the_image_shares_blocks_with_its_sources() {
    if !have_loop() || !have("mkfs.xfs") || !have("filefrag") {
        return;
    }
    let work = tempdir!();
    let backing = work.path().join("xfs.raw");
    fs::File::create(&backing)
        .unwrap()
        .set_len(2 << 30)
        .unwrap();
    ok(
        "mkfs.xfs",
        &["-q", "-m", "reflink=1", backing.to_str().unwrap()],
    );
    let dev = ok("losetup", &["-f", "--show", backing.to_str().unwrap()])
        .trim()
        .to_string();
    let mnt = work.path().join("mnt");
    fs::create_dir(&mnt).unwrap();
    let m = XfsMount {
        dir: mnt.clone(),
        dev: dev.clone(),
    };
    ok("mount", &[&dev, mnt.to_str().unwrap()]);

    let mut images = Vec::new();
    for (where_, base) in [("xfs", m.dir.clone()), ("disk", work.path().join("plain"))] {
        fs::create_dir_all(&base).unwrap();
        // 128 MiB in files of 512 KiB: files this small are read into the writer's gathering
        // elsewhere, and copied by the kernel (shared) on XFS.
        make_tree(&base, 256, MIB / 2);
        for fs_line in ["fs = \"ext4\"", "fs = \"fat32\""] {
            // 512 MiB: FAT32 gets 4 KiB clusters, so file data is block-aligned (with 2 KiB
            // clusters every other file starts mid-block and cannot share blocks).
            let sp = spec_sized(&base, fs_line, "512MiB");
            let out = base.join(format!("{}.img", &fs_line[6..fs_line.len() - 1]));
            let before = df_used(&base);
            let o = Command::new(blockwise!().path())
                .args(["build", sp.to_str().unwrap(), "-o", out.to_str().unwrap()])
                .args(["--json", "-q"])
                .output()
                .unwrap();
            assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
            let grew = df_used(&base).saturating_sub(before);
            if where_ == "xfs" {
                // 128 MiB of files: shared, not copied.
                assert!(
                    grew < 32 * MIB,
                    "{fs_line}: XFS grew by {grew} bytes for 128 MiB of content"
                );
                let frag = ok("filefrag", &["-v", out.to_str().unwrap()]);
                assert!(
                    frag.contains("shared"),
                    "{fs_line}: no shared extents:\n{frag}"
                );
            }
            images.push((where_, fs_line, sha256_file(&out)));
            fs::remove_file(&out).unwrap();
        }
    }
    for fs_line in ["fs = \"ext4\"", "fs = \"fat32\""] {
        let shas: Vec<_> = images.iter().filter(|i| i.1 == fs_line).collect();
        assert_eq!(shas.len(), 2);
        assert_eq!(
            shas[0].2, shas[1].2,
            "{fs_line}: XFS and disk images differ"
        );
    }
    drop(m);
}

/// A killed build's temp file (its owner gone) is removed by the next build to the same
/// output, and so is the temp filesystem of the mke2fs backend (what a second Ctrl-C
/// leaves); a temp file whose owner still runs is left alone.
#[test]
fn the_next_build_removes_a_killed_builds_temp_file() {
    let dir = tempdir!();
    make_tree(dir.path(), 1, MIB);
    let mke2fs = have("mke2fs");
    let fs_line = if mke2fs {
        "fs = \"ext4\"\next4 = { backend = \"mke2fs\" }"
    } else {
        "fs = \"fat32\""
    };
    let sp = spec(dir.path(), fs_line);
    // A PID above the kernel's limit never runs; start time 1.
    let stale = dir.path().join(".out.img.tmp-4194305-1");
    fs::write(&stale, b"left by a killed build").unwrap();
    let stale_mke2fs = dir.path().join(".blockwise-mke2fs-4194305-1-4194304.img");
    fs::write(&stale_mke2fs, b"left by a killed mke2fs build").unwrap();
    // This test process is alive: its PID and start time make a live owner.
    let me = std::process::id();
    let start = fs::read_to_string(format!("/proc/{me}/stat")).unwrap();
    let start = start[start.rfind(')').unwrap() + 1..]
        .split_whitespace()
        .nth(19)
        .unwrap()
        .to_string();
    let live = dir.path().join(format!(".out.img.tmp-{me}-{start}"));
    fs::write(&live, b"a build still running").unwrap();
    let live_mke2fs = dir
        .path()
        .join(format!(".blockwise-mke2fs-{me}-{start}-4194304.img"));
    fs::write(&live_mke2fs, b"a build still running").unwrap();
    let unrelated = dir.path().join(".out.img.tmp-notes");
    fs::write(&unrelated, b"not ours").unwrap();
    let unrelated_mke2fs = dir.path().join(".blockwise-mke2fs-notes.img");
    fs::write(&unrelated_mke2fs, b"not ours").unwrap();
    let out = dir.path().join("out.img");
    let o = Command::new(blockwise!().path())
        .args([
            "build",
            sp.to_str().unwrap(),
            "-o",
            out.to_str().unwrap(),
            "-q",
        ])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(!stale.exists(), "the stale temp file stayed");
    assert_eq!(!stale_mke2fs.exists(), mke2fs, "the stale mke2fs temp file");
    assert!(
        live.exists() && unrelated.exists() && live_mke2fs.exists() && unrelated_mke2fs.exists(),
        "a live or foreign file was removed"
    );
}

/// Metadata past the budget is spilled to an unnamed file that a raw output then becomes
/// (issue 34): with almost everything spilled (a 4 KiB budget) the image is byte for byte the
/// one built with nothing spilled, and so is an Android sparse output of the same build (which
/// copies the spilled bytes back instead); fsck.fat -n and e2fsck -fn find it clean and mcopy
/// and debugfs read every file back equal.
#[test]
fn spilled_metadata_written_in_place_is_the_same_image() {
    let dir = tempdir!();
    let d = dir.path();
    let c = d.join("contents");
    for i in 0..600u64 {
        let sub = c.join(format!("D{:02}", i % 12));
        fs::create_dir_all(&sub).unwrap();
        fs::write(
            sub.join(format!("F{i:04}.BIN")),
            noise(i + 7, (i * 997) % 9000),
        )
        .unwrap();
    }
    for (fs_kind, oracle) in [("fat32", "fsck.fat"), ("ext4", "e2fsck")] {
        if !have(oracle) || !have("simg2img") {
            assert!(
                !blockwise_test_kit::oracles_required(),
                "{oracle}, simg2img"
            );
            continue;
        }
        let spec = d.join(format!("{fs_kind}.toml"));
        fs::write(
            &spec,
            format!(
                "[image]\nsize = \"64MiB\"\ntable = \"none\"\nseed = 5\ntimestamp = 1700000000\n\n\
                 [[partition]]\nfs = \"{fs_kind}\"\nsize = \"fill\"\ncontents = \"contents\"\n"
            ),
        )
        .unwrap();
        let build = |budget: &str, out: &Path| {
            let o = Command::new(blockwise!().path())
                .env("BLOCKWISE_METADATA_BUDGET", budget)
                .arg("build")
                .arg(&spec)
                .arg("-o")
                .arg(out)
                .arg("-q")
                .output()
                .unwrap();
            assert_success(&o, "blockwise build");
        };
        let (spilled, held) = (
            d.join(format!("{fs_kind}-s.img")),
            d.join(format!("{fs_kind}-h.img")),
        );
        let simg = d.join(format!("{fs_kind}-s.simg"));
        build("4096", &spilled);
        build("1099511627776", &held);
        build("4096", &simg);
        let unpacked = d.join(format!("{fs_kind}-u.img"));
        assert_success(&run("simg2img", &[&simg, &unpacked]), "simg2img");
        let want = fs::read(&held).unwrap();
        assert!(
            fs::read(&spilled).unwrap() == want,
            "{fs_kind}: spilled build differs"
        );
        assert!(
            fs::read(&unpacked).unwrap() == want,
            "{fs_kind}: .simg differs"
        );
        let out = d.join(format!("{fs_kind}-files"));
        if fs_kind == "fat32" {
            blockwise_test_kit::fsck_fat_clean(&spilled);
            blockwise_test_kit::mcopy_out(&spilled, 0, &out);
            blockwise_test_kit::assert_same_tree(&c, &out, &[]);
        } else {
            blockwise_test_kit::e2fsck_clean(&spilled, None);
            fs::create_dir_all(&out).unwrap();
            blockwise_test_kit::debugfs(&spilled, &format!("rdump / {}", out.display()));
            blockwise_test_kit::assert_same_tree(&c, &out, &["lost+found"]);
        }
        assert!(leftovers(d).is_empty(), "{:?}", leftovers(d));
    }
}
