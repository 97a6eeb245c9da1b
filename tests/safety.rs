//! Issue 25: never a false success. `write` and `build` never overwrite what they read (the
//! source through a link, its `.bmap`, the loop device backed by it, the spec, a contents
//! file, a raw source, the other output); no file is created in `/dev` for a card that is not
//! there; `--chunk` is bounded; a regular-file target ends up byte-identical to the image;
//! the first SIGINT stops a slow read-back and a slow scan (real throttling: a blkio cgroup
//! on a loop device); names and labels with control characters are printed escaped.
//! Loop devices and cgroups need root: elsewhere these tests skip with a message, and fail
//! under `DISKIMG_REQUIRE_ORACLES=1`.

use std::fs;
use std::io::Read as _;
use std::os::unix::fs::FileExt as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use blockwise_test_kit::{
    assert_success, blockwise, bytes, have, have_loop, is_root, oracles_required, output_text, run,
    tempdir, write_file, LoopDevice,
};
use sha2::{Digest, Sha256};

const MIB: u64 = 1 << 20;

fn sha(path: &Path) -> String {
    let mut f = fs::File::open(path).unwrap();
    let mut h = Sha256::new();
    let mut buf = vec![0u8; MIB as usize];
    loop {
        let n = f.read(&mut buf).unwrap();
        if n == 0 {
            break;
        }
        h.update(&buf[..n]);
    }
    format!("{:x}", h.finalize())
}

/// The sha256 of every file of `paths` (symlinks followed), to compare before and after.
fn shas(paths: &[&Path]) -> Vec<(PathBuf, String)> {
    paths.iter().map(|p| (p.to_path_buf(), sha(p))).collect()
}

fn bw(args: &[&dyn AsRef<std::ffi::OsStr>]) -> Output {
    let v: Vec<std::ffi::OsString> = args.iter().map(|a| a.as_ref().to_os_string()).collect();
    blockwise!().run(&v)
}

/// Exit 2 with one line holding `needle`.
fn refused(o: &Output, needle: &str) {
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{}", output_text(o));
    assert!(err.contains(needle), "{needle:?} not in {err}");
    assert_eq!(err.trim_end().lines().count(), 1, "one line: {err}");
}

/// Exit 2, the last line holding `needle` (a spec planned for a device prints where its
/// values came from first).
fn refused_last(o: &Output, needle: &str) {
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{}", output_text(o));
    let last = err.trim_end().lines().last().unwrap_or_default();
    assert!(last.contains(needle), "{needle:?} not in {err}");
}

/// Temp files of builds or writes left in `dir`.
fn temps(dir: &Path) -> Vec<String> {
    fs::read_dir(dir)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains(".tmp-") || n.starts_with(".blockwise-"))
        .collect()
}

/// A directory with a FAT32 image spec: `boot/` contents, a `[[raw]]` source and a raw
/// partition's source; returns (spec, image built from it with a `.bmap` beside it).
fn project(dir: &Path) -> (PathBuf, PathBuf) {
    fs::create_dir(dir.join("boot")).unwrap();
    fs::write(dir.join("boot/config.txt"), "arm_64bit=1\n").unwrap();
    fs::write(dir.join("boot/kernel.img"), bytes(1, 300_000)).unwrap();
    fs::write(dir.join("uboot.bin"), bytes(2, 100_000)).unwrap();
    fs::write(dir.join("env.bin"), bytes(3, 8192)).unwrap();
    let spec = write_file(
        dir,
        "spec.toml",
        "[image]\nsize = \"64MiB\"\ntimestamp = 1700000000\n\
         [[partition]]\nfs = \"fat32\"\nsize = \"40MiB\"\ncontents = \"boot\"\n\
         [[partition]]\nfs = \"raw\"\nsize = \"4MiB\"\nsource = \"env.bin\"\n\
         [[raw]]\nsource = \"uboot.bin\"\noffset = 8192\n",
    );
    let img = dir.join("x.img");
    blockwise!().build_with(
        &spec,
        &img,
        ["--bmap", "x.img.bmap", "-q"].map(|a| {
            if a == "x.img.bmap" {
                dir.join(a).into_os_string()
            } else {
                a.into()
            }
        }),
    );
    (spec, img)
}

/// r25: `write` refuses a target that is its source (the same file through another name, a
/// symlink or a hard link; a compressed source; the `.bmap` it reads; the loop device backed
/// by the source, or the source's backing file when the source is the loop device) or a
/// file its spec reads, with exit 2, before anything is opened for writing: every input is
/// unchanged.
#[test]
fn r25_write_never_targets_its_own_input() {
    let dir = tempdir!();
    let d = dir.path();
    let (spec, img) = project(d);
    let bmap = d.join("x.img.bmap");
    let gz = d.join("x.img.gz");
    let o = run(
        "sh",
        &[
            "-c",
            &format!("gzip -c {} > {}", img.display(), gz.display()),
        ],
    );
    assert_success(&o, "gzip");
    let link = d.join("link.gz");
    std::os::unix::fs::symlink(&gz, &link).unwrap();
    let hard = d.join("hard.img");
    fs::hard_link(&img, &hard).unwrap();
    let inputs = [
        img.as_path(),
        &bmap,
        &gz,
        &spec,
        &d.join("boot/config.txt"),
        &d.join("boot/kernel.img"),
        &d.join("uboot.bin"),
        &d.join("env.bin"),
    ];
    let before = shas(&inputs);
    let same = "which this write reads";
    for (src, target) in [
        (&gz, &gz),
        (&gz, &link),
        (&img, &hard),
        (&img, &img),
        (&img, &d.join(".").join("x.img")),
        (&img, &bmap), // the .bmap found beside the image
    ] {
        refused(&bw(&[&"write", src, target, &"--no-verify"]), same);
    }
    refused(
        &bw(&[
            &"write",
            &img,
            &d.join("y.img"),
            &"--bmap",
            &spec,
            &"--no-verify",
        ]),
        "",
    );
    for target in [
        spec.clone(),
        d.join("boot/config.txt"),
        d.join("uboot.bin"),
        d.join("env.bin"),
    ] {
        // Refused by the build's own check (before its scan's results are used) or the
        // write's: both name the input.
        refused(&bw(&[&"write", &spec, &target, &"--no-verify"]), "input");
    }
    assert_eq!(shas(&inputs), before);
    assert!(!d.join("y.img").exists());

    if have_loop() {
        // The loop device backed by the source, plain and compressed.
        for src in [&img, &gz] {
            let lo = LoopDevice::attach(src, false, None);
            refused(
                &bw(&[&"write", src, &lo.path(), &"--yes", &"--no-verify"]),
                same,
            );
            lo.detach();
        }
        // The source is the loop device, the target its backing file.
        let lo = LoopDevice::attach(&img, true, None);
        let o = bw(&[&"write", &lo.path(), &img, &"--no-verify"]);
        assert_eq!(o.status.code(), Some(2), "{}", output_text(&o));
        lo.detach();
        // A spec's raw source behind a loop device.
        let lo = LoopDevice::attach(&d.join("uboot.bin"), false, None);
        refused_last(
            &bw(&[&"write", &spec, &lo.path(), &"--yes", &"--no-verify"]),
            "input",
        );
        lo.detach();
        assert_eq!(shas(&inputs), before);
    }
    assert!(temps(d).is_empty(), "{:?}", temps(d));
}

/// r25: `build` refuses an output (or `.bmap`) that is an input (the spec, a contents file
/// through its name or a hard link, a raw partition's source, a `[[raw]]` source) or the
/// other output, exit 2 before anything is created; inputs unchanged, no temp file left.
#[test]
fn r25_build_never_writes_over_its_inputs() {
    let dir = tempdir!();
    let d = dir.path();
    let (spec, _) = project(d);
    let hard = d.join("hard.txt");
    fs::hard_link(d.join("boot/config.txt"), &hard).unwrap();
    let inputs = [
        spec.as_path(),
        &d.join("boot/config.txt"),
        &d.join("boot/kernel.img"),
        &d.join("uboot.bin"),
        &d.join("env.bin"),
    ];
    let before = shas(&inputs);
    let new = d.join("new.img");
    let input = "an input of this build";
    for (out, bmap) in [
        (spec.clone(), None),
        (new.clone(), Some(spec.clone())),
        (d.join("uboot.bin"), None),
        (d.join("env.bin"), None),
        (d.join("boot/config.txt"), None),
        (d.join("boot/kernel.img"), None),
        (hard.clone(), None),
        (new.clone(), Some(d.join("env.bin"))),
    ] {
        let mut args: Vec<&dyn AsRef<std::ffi::OsStr>> = vec![&"build", &spec, &"-o", &out, &"-q"];
        if let Some(b) = &bmap {
            args.extend([&"--bmap" as &dyn AsRef<std::ffi::OsStr>, b]);
        }
        refused(&bw(&args), input);
    }
    for bmap in [new.clone(), d.join(".").join("new.img")] {
        refused(
            &bw(&[&"build", &spec, &"-o", &new, &"--bmap", &bmap, &"-q"]),
            "two outputs cannot share a file",
        );
    }
    assert_eq!(shas(&inputs), before);
    assert!(!new.exists());
    assert!(temps(d).is_empty(), "{:?}", temps(d));
    assert!(temps(&d.join("boot")).is_empty());
}

/// Whether `/dev` is the kernel's devtmpfs here (mountinfo).
fn dev_is_devtmpfs() -> bool {
    fs::read_to_string("/proc/self/mountinfo")
        .unwrap_or_default()
        .lines()
        .any(|l| l.split(' ').nth(4) == Some("/dev") && l.contains(" - devtmpfs "))
}

/// r25: a target under `/dev` that does not exist (a card not plugged in, a partition node
/// not made yet) is "no such device", exit 2, with and without `--partition-ok`, and no file
/// appears in `/dev`; a regular file left in `/dev` is refused too.
#[test]
fn r25_a_missing_dev_node_is_no_such_device() {
    if !dev_is_devtmpfs() {
        eprintln!("SKIP: /dev is not devtmpfs here");
        return;
    }
    let dir = tempdir!();
    let img = dir.path().join("a.img");
    fs::write(&img, bytes(5, 1 << 20)).unwrap();
    let missing = Path::new("/dev/blockwise-r25-sdz9");
    for extra in [&[][..], &["--partition-ok"][..], &["--yes", "--verify"][..]] {
        let mut args: Vec<&dyn AsRef<std::ffi::OsStr>> = vec![&"write", &img, &missing];
        for e in extra {
            args.push(e);
        }
        refused(&bw(&args), "no such device: is the card plugged in?");
        assert!(!missing.exists());
    }
    // A spec source too (nothing is built for it).
    let spec = write_file(
        dir.path(),
        "s.toml",
        "[image]\nsize = \"8MiB\"\n[[partition]]\nfs = \"fat16\"\nsize = \"fill\"\n",
    );
    refused(&bw(&[&"write", &spec, &missing]), "no such device");
    assert!(!missing.exists());
    if is_root() {
        let stray = Path::new("/dev/blockwise-r25-stray");
        fs::write(stray, b"x").unwrap();
        let o = bw(&[&"write", &img, &stray, &"--no-verify"]);
        let data = fs::read(stray).unwrap();
        fs::remove_file(stray).unwrap();
        refused(&o, "is a regular file in /dev");
        assert_eq!(data, b"x");
    }
}

/// r25: `--chunk` above 64 MiB is refused before anything is created (it took 29 s and
/// 3.1 GB of memory for a 64 MiB image); 64 MiB itself writes.
#[test]
fn r25_chunk_is_at_most_64mib() {
    let dir = tempdir!();
    let img = dir.path().join("a.img");
    fs::write(&img, bytes(6, 2 << 20)).unwrap();
    let out = dir.path().join("out.img");
    refused(
        &bw(&[&"write", &img, &out, &"--chunk", &"1GiB", &"--raw"]),
        "--chunk 1GiB: at most 64MiB",
    );
    assert!(!out.exists());
    // Random bytes are no disk image: --raw writes them as they are.
    let o = bw(&[
        &"write",
        &img,
        &out,
        &"--chunk",
        &"64MiB",
        &"--verify",
        &"--raw",
    ]);
    assert!(o.status.success(), "{}", output_text(&o));
    assert_eq!(fs::read(&out).unwrap(), fs::read(&img).unwrap());
}

/// r25: a regular-file target larger than the image and full of old data ends up
/// byte-identical to the image (`cmp`), as bmaptool leaves it, whether read back or not,
/// with holes in the image and with a compressed source.
#[test]
fn r25_a_larger_file_target_ends_up_identical() {
    if !have("cmp") {
        return;
    }
    let dir = tempdir!();
    let d = dir.path();
    let img = d.join("a.img");
    let f = fs::File::create(&img).unwrap();
    f.set_len(16 * MIB).unwrap();
    for (i, o) in [0, 5 * MIB + 4096, 15 * MIB].into_iter().enumerate() {
        f.write_all_at(&bytes(10 + i as u64, 300_000), o).unwrap();
    }
    drop(f);
    let gz = d.join("a.img.gz");
    assert_success(
        &run(
            "sh",
            &[
                "-c",
                &format!("gzip -c {} > {}", img.display(), gz.display()),
            ],
        ),
        "gzip",
    );
    for (src, verify) in [(&img, "--verify"), (&img, "--no-verify"), (&gz, "--verify")] {
        let target = d.join("target.bin");
        fs::write(&target, bytes(99, 48 << 20)).unwrap();
        let o = bw(&[&"write", src, &target, &verify, &"--raw"]);
        assert!(o.status.success(), "{}", output_text(&o));
        assert!(
            !String::from_utf8_lossy(&o.stderr).contains("keep their old contents"),
            "{}",
            output_text(&o)
        );
        let c = run("cmp", &[&img, &target]);
        assert!(c.status.success(), "{src:?} {verify}: {}", output_text(&c));
        fs::remove_file(&target).unwrap();
    }
}

/// A blkio (cgroup v1) or io (cgroup v2) group limiting reads from one device, removed on
/// drop: real throttling, so a read-back or a scan is slow the way a cheap card is.
struct Throttle {
    dir: PathBuf,
    dev: String,
    v2: bool,
}

impl Throttle {
    /// Reads from `dev` (a block device) limited to `bps` bytes per second, or `None` when
    /// this machine has no cgroup throttling (a failure under DISKIMG_REQUIRE_ORACLES=1).
    fn new(dev: &Path, bps: u64) -> Option<Throttle> {
        use std::os::unix::fs::MetadataExt as _;
        let rdev = fs::metadata(dev).ok()?.rdev();
        let major = ((rdev >> 32) & 0xffff_f000) | ((rdev >> 8) & 0xfff);
        let minor = ((rdev >> 12) & 0xffff_ff00) | (rdev & 0xff);
        let devno = format!("{major}:{minor}");
        let name = format!("blockwise-r25-{}-{minor}", std::process::id());
        let v1 = Path::new("/sys/fs/cgroup/blkio");
        let v2 = Path::new("/sys/fs/cgroup");
        let made = if v1.join("blkio.throttle.read_bps_device").exists() {
            let dir = v1.join(&name);
            fs::create_dir(&dir).ok()?;
            fs::write(
                dir.join("blkio.throttle.read_bps_device"),
                format!("{devno} {bps}"),
            )
            .ok()
            .map(|()| Throttle {
                dir,
                dev: devno,
                v2: false,
            })
        } else if fs::read_to_string(v2.join("cgroup.controllers"))
            .is_ok_and(|c| c.split_whitespace().any(|x| x == "io"))
        {
            let _ = fs::write(v2.join("cgroup.subtree_control"), "+io");
            let dir = v2.join(&name);
            fs::create_dir(&dir).ok()?;
            fs::write(dir.join("io.max"), format!("{devno} rbps={bps}"))
                .ok()
                .map(|()| Throttle {
                    dir,
                    dev: devno,
                    v2: true,
                })
        } else {
            None
        };
        if made.is_none() {
            assert!(
                !oracles_required(),
                "no cgroup read throttling (blkio or io.max) for the signal tests"
            );
            eprintln!("SKIP: no cgroup read throttling here");
        }
        made
    }

    /// `cmd` started inside the group (a shell puts itself in, then execs it).
    fn spawn(&self, cmd: &Command) -> std::process::Child {
        let procs = self.dir.join("cgroup.procs");
        let mut sh = Command::new("sh");
        sh.arg("-c")
            .arg(format!("echo $$ > '{}' && exec \"$@\"", procs.display()))
            .arg("sh")
            .arg(cmd.get_program())
            .args(cmd.get_args())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        sh.spawn().unwrap()
    }

    /// Bytes read from the device by the group's processes so far.
    fn read_bytes(&self) -> u64 {
        let (file, key) = if self.v2 {
            ("io.stat", "rbytes=")
        } else {
            ("blkio.throttle.io_service_bytes", "Read ")
        };
        let text = fs::read_to_string(self.dir.join(file)).unwrap_or_default();
        text.lines()
            .filter(|l| l.starts_with(&format!("{} ", self.dev)))
            .filter_map(|l| {
                let at = l.find(key)? + key.len();
                l[at..].split_whitespace().next()?.parse::<u64>().ok()
            })
            .sum()
    }
}

impl Drop for Throttle {
    fn drop(&mut self) {
        for _ in 0..50 {
            if fs::remove_dir(&self.dir).is_ok() {
                return;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

/// Waits until `cond` or the child exits; true when `cond` held.
fn wait_for(child: &mut std::process::Child, mut cond: impl FnMut() -> bool) -> bool {
    let start = Instant::now();
    while start.elapsed() < Duration::from_secs(120) {
        if cond() {
            return true;
        }
        if child.try_wait().unwrap().is_some() {
            return false;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    false
}

fn sigint(child: &std::process::Child) {
    let pid = child.id().to_string();
    assert_success(&run("kill", &["-INT", pid.as_str()]), "kill -INT");
}

/// r25: the first SIGINT during a `--verify` read-back from a card reading at 4 MB/s (a
/// loop device throttled by a blkio/io cgroup) stops it after the read in flight: exit 130,
/// "interrupted during the read-back" with how far it got, and far fewer bytes read than
/// the image holds (it used to read back everything and exit 0). The time from the signal
/// to the exit is printed, not asserted.
#[test]
fn r25_sigint_stops_a_throttled_read_back() {
    if !have_loop() {
        return;
    }
    let dir = tempdir!();
    let img = dir.path().join("a.img");
    fs::write(&img, bytes(7, 32 << 20)).unwrap();
    let backing = dir.path().join("card.bin");
    fs::File::create(&backing)
        .unwrap()
        .set_len(64 * MIB)
        .unwrap();
    let lo = LoopDevice::attach(&backing, false, None);
    let Some(throttle) = Throttle::new(lo.path(), 4 << 20) else {
        return;
    };
    let mut cmd = Command::new(blockwise!().path());
    cmd.arg("write")
        .arg(&img)
        .arg(lo.path())
        .args(["--yes", "--verify", "--direct", "--raw"]);
    let mut child = throttle.spawn(&cmd);
    // The read-back has begun once more than the writer's two probe reads came back.
    let began = wait_for(&mut child, || throttle.read_bytes() > 512 << 10);
    assert!(began, "the read-back never started");
    let t = Instant::now();
    sigint(&child);
    let out = child.wait_with_output().unwrap();
    let stopped_after = t.elapsed();
    let read = throttle.read_bytes();
    let err = String::from_utf8_lossy(&out.stderr);
    eprintln!("stopped {stopped_after:?} after SIGINT, {read} bytes read back of 32 MiB");
    assert_eq!(out.status.code(), Some(130), "{}", output_text(&out));
    assert!(err.contains("interrupted during the read-back"), "{err}");
    assert!(err.contains("NOT verified"), "{err}");
    assert!(read < 16 << 20, "read back {read} bytes after the signal");
    drop(throttle);
    lo.detach();
}

/// r25: the first SIGINT during `plan`'s scan of a contents tree on a slow device (a large
/// sparse file whose data is read to find its holes, through a throttled loop device) stops
/// it: exit 130, "interrupted … while scanning", far fewer bytes read than the file holds.
#[test]
fn r25_sigint_stops_a_slow_scan() {
    if !have_loop() || !have("mkfs.ext4") {
        return;
    }
    let dir = tempdir!();
    let fsimg = dir.path().join("fs.img");
    fs::File::create(&fsimg)
        .unwrap()
        .set_len(160 * MIB)
        .unwrap();
    assert_success(
        &run(
            "mkfs.ext4",
            &["-q".as_ref(), "-F".as_ref(), fsimg.as_os_str()],
        ),
        "mkfs.ext4",
    );
    let lo = LoopDevice::attach(&fsimg, false, None);
    let mnt = dir.path().join("mnt");
    fs::create_dir(&mnt).unwrap();
    let mount = |ro: bool| {
        let o = run(
            "mount",
            &[
                "-o".as_ref(),
                if ro { "ro" } else { "rw" }.as_ref(),
                lo.path().as_os_str(),
                mnt.as_os_str(),
            ],
        );
        assert_success(&o, "mount");
    };
    mount(false);
    // 64 MiB of data in a 128 MiB sparse file: the scan reads the data to find zero blocks.
    let c = mnt.join("c");
    fs::create_dir(&c).unwrap();
    let f = fs::File::create(c.join("sparse.bin")).unwrap();
    f.set_len(128 * MIB).unwrap();
    let chunk = bytes(8, MIB as usize);
    for i in 0..64 {
        f.write_all_at(&chunk, i * MIB).unwrap();
    }
    f.sync_all().unwrap();
    drop(f);
    // Remounted, so the data is read from the device, not the page cache.
    assert_success(&run("umount", &[&mnt]), "umount");
    mount(true);
    let spec = write_file(
        dir.path(),
        "s.toml",
        &format!(
            "[image]\ntable = \"none\"\nsize = \"256MiB\"\n[[partition]]\nfs = \"ext4\"\nsize = \"fill\"\ncontents = \"{}\"\n",
            c.display()
        ),
    );
    let result = std::panic::catch_unwind(|| {
        let Some(throttle) = Throttle::new(lo.path(), 2 << 20) else {
            return;
        };
        let mut cmd = Command::new(blockwise!().path());
        cmd.arg("plan").arg(&spec);
        let mut child = throttle.spawn(&cmd);
        let began = wait_for(&mut child, || throttle.read_bytes() > 2 << 20);
        assert!(began, "the scan never read");
        let t = Instant::now();
        sigint(&child);
        let out = child.wait_with_output().unwrap();
        let read = throttle.read_bytes();
        eprintln!(
            "plan stopped {:?} after SIGINT, {read} bytes read",
            t.elapsed()
        );
        assert_eq!(out.status.code(), Some(130), "{}", output_text(&out));
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains("interrupted by signal 2 while scanning"),
            "{err}"
        );
        assert!(read < 32 << 20, "read {read} bytes after the signal");
    });
    let _ = run("umount", &[&mnt]);
    lo.detach();
    if let Err(p) = result {
        std::panic::resume_unwind(p);
    }
}

/// r25: a FAT name holding ESC and a newline is printed escaped (`\x1b`, `\x0a`) in the
/// error, on one line, never raw; so is a volume label `verify` reads from an image.
#[test]
fn r25_control_characters_are_printed_escaped() {
    let dir = tempdir!();
    let d = dir.path();
    let c = d.join("c");
    fs::create_dir(&c).unwrap();
    fs::write(c.join("evil\u{1b}[2J\nfake: ok"), "x").unwrap();
    let spec = write_file(
        d,
        "s.toml",
        "[image]\ntable = \"none\"\nsize = \"64MiB\"\n[[partition]]\nfs = \"fat32\"\nsize = \"fill\"\ncontents = \"c\"\n",
    );
    let o = bw(&[&"build", &spec, &"-o", &d.join("o.img"), &"-q"]);
    refused(&o, "/evil\\x1b[2J\\x0afake: ok: FAT names cannot contain");
    assert!(!o.stderr.contains(&0x1b));

    // A label with ESC and a newline patched into a built FAT32 volume (shown with `?`s),
    // verified under a file name with ESC and a newline (shown as `\xNN`).
    fs::remove_file(c.join("evil\u{1b}[2J\nfake: ok")).unwrap();
    let img = d.join("l.img");
    blockwise!().build(&spec, &img);
    let f = fs::OpenOptions::new().write(true).open(&img).unwrap();
    f.write_all_at(b"A\x1b[2J\nB   ", 0x47).unwrap();
    drop(f);
    let odd = d.join("l\u{1b}]0;x\u{7}\n.img");
    fs::rename(&img, &odd).unwrap();
    let o = bw(&[&"verify", &odd]);
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{}", output_text(&o));
    assert!(!o.stdout.iter().any(|&b| b == 0x1b || b == 0x07), "{text}");
    assert!(text.contains("l\\x1b]0;x\\x07\\x0a.img"), "{text}");
    assert!(text.contains("\"A?[2J?B\""), "{text}");
    // The JSON keeps the name, escaped the JSON way.
    let o = bw(&[&"verify", &odd, &"--json"]);
    let j: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(j["source"].as_str(), Some(odd.to_str().unwrap()));
}
