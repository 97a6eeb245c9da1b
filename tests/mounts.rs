//! Mount points and `exclude` (issue 32 item 3): a pi-gen-style single rootfs tree with
//! `/boot/firmware` split off onto the FAT builds the same bytes as the same files staged into
//! one directory per partition; `exclude` leaves paths out as if they had been deleted; the
//! FAT and ext4 results pass fsck.fat / e2fsck and hold what they should (mcopy, debugfs).

use std::fs;
use std::os::unix::fs::FileExt as _;
use std::path::{Path, PathBuf};
use std::process::Output;

use blockwise_test_kit::{
    blockwise, debugfs, e2fsck_clean, fsck_fat_clean, have, mcopy_out, output_text, run, tempdir,
    write_file,
};

fn build(spec: &Path, out: &Path) -> Output {
    blockwise!().run([
        "build".as_ref(),
        spec.as_os_str(),
        "-o".as_ref(),
        out.as_os_str(),
        "-q".as_ref(),
    ])
}

fn build_ok(spec: &Path, out: &Path) {
    let o = build(spec, out);
    assert!(o.status.success(), "{}", output_text(&o));
}

/// A Raspberry Pi OS-like root tree: the firmware partition's files under boot/firmware.
fn rootfs(dir: &Path) -> PathBuf {
    let r = dir.join("rootfs");
    for d in [
        "boot/firmware/overlays",
        "etc/ssh",
        "home/pi/.cache",
        "usr/lib/python3/x",
        "var/cache/apt/archives",
    ] {
        fs::create_dir_all(r.join(d)).unwrap();
    }
    write_file(&r.join("boot/firmware"), "config.txt", "dtparam=audio=on\n");
    write_file(
        &r.join("boot/firmware"),
        "cmdline.txt",
        "console=tty1 root=PARTUUID=x\n",
    );
    write_file(
        &r.join("boot/firmware/overlays"),
        "vc4-kms-v3d.dtbo",
        "dtbo",
    );
    write_file(&r.join("boot"), "vmlinuz", "kernel");
    write_file(&r.join("etc"), "hostname", "raspberrypi\n");
    write_file(&r.join("etc/ssh"), "ssh_host_rsa_key", "secret\n");
    write_file(&r.join("home/pi"), "notes.txt", "hello\n");
    write_file(&r.join("home/pi/.cache"), "big", &"x".repeat(100_000));
    write_file(&r.join("usr/lib/python3/x"), "m.py", "print(1)\n");
    write_file(&r.join("usr/lib/python3/x"), "m.pyc", "\x00\x01");
    write_file(
        &r.join("var/cache/apt/archives"),
        "a.deb",
        &"d".repeat(50_000),
    );
    r
}

fn cp_a(from: &Path, to: &Path) {
    let o = run("cp", &["-a".as_ref(), from.as_os_str(), to.as_os_str()]);
    assert!(o.status.success(), "{}", output_text(&o));
}

const HEAD: &str = "[image]\nsize = \"256MiB\"\nerase-block = \"4MiB\"\ntable = \"mbr\"\nseed = 7\ntimestamp = 1700000000\n";

/// The bytes of partition `index` (1-based) of `image`, as `verify --json` places it.
fn partition(image: &Path, index: usize, out: &Path) -> PathBuf {
    let o = blockwise!().run(["verify".as_ref(), "--json".as_ref(), image.as_os_str()]);
    let j: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let p = &j["partitions"][index - 1];
    let (start, size) = (
        p["start_bytes"].as_u64().unwrap(),
        p["size_bytes"].as_u64().unwrap(),
    );
    let src = fs::File::open(image).unwrap();
    let dst = fs::File::create(out).unwrap();
    dst.set_len(size).unwrap();
    let mut buf = vec![0u8; 1 << 20];
    let mut at = 0u64;
    while at < size {
        let n = usize::try_from((size - at).min(1 << 20)).unwrap();
        src.read_exact_at(&mut buf[..n], start + at).unwrap();
        if buf[..n].iter().any(|&b| b != 0) {
            dst.write_all_at(&buf[..n], at).unwrap();
        }
        at += n as u64;
    }
    out.to_path_buf()
}

/// Builds `spec` (as `WHAT.img`) and `staged` and asserts equal bytes; then, where the tools
/// are, checks partition 1's FAT with fsck.fat and copies it out with mcopy. Returns the
/// image and the copied-out directory, or `None` without the tools.
fn same_bytes_and_fat_out(
    w: &Path,
    spec: &Path,
    staged: &Path,
    what: &str,
) -> Option<(PathBuf, PathBuf)> {
    let (a, b) = (w.join(format!("{what}.img")), w.join("staged.img"));
    build_ok(spec, &a);
    build_ok(staged, &b);
    assert!(
        fs::read(&a).unwrap() == fs::read(&b).unwrap(),
        "{what} and staged builds differ"
    );
    if !(have("fsck.fat") && have("mcopy") && have("e2fsck") && have("debugfs")) {
        return None;
    }
    let fat = partition(&a, 1, &w.join("p1.img"));
    fsck_fat_clean(&fat);
    let got = w.join("fat-out");
    mcopy_out(&fat, 0, &got);
    Some((a, got))
}

#[test]
fn a_single_rootfs_split_by_mount_points_equals_the_staged_directories() {
    let dir = tempdir!();
    let w = dir.path();
    rootfs(w);
    let split = write_file(
        w,
        "split.toml",
        &format!("{HEAD}[[partition]]\nfs = \"fat32\"\nsize = \"64MiB\"\nlabel = \"bootfs\"\nmount = \"/boot/firmware\"\n\n[[partition]]\nfs = \"ext4\"\nsize = \"fill\"\nlabel = \"rootfs\"\ncontents = \"rootfs/\"\n"),
    );
    // The same files staged by hand: the firmware directory copied out, and emptied in the
    // root (the mount point stays).
    fs::create_dir(w.join("staged")).unwrap();
    cp_a(&w.join("rootfs/boot/firmware"), &w.join("staged/boot"));
    cp_a(&w.join("rootfs"), &w.join("staged/root"));
    fs::remove_dir_all(w.join("staged/root/boot/firmware")).unwrap();
    fs::create_dir(w.join("staged/root/boot/firmware")).unwrap();
    let staged = write_file(
        w,
        "staged.toml",
        &format!("{HEAD}[[partition]]\nfs = \"fat32\"\nsize = \"64MiB\"\nlabel = \"bootfs\"\ncontents = \"staged/boot/\"\n\n[[partition]]\nfs = \"ext4\"\nsize = \"fill\"\nlabel = \"rootfs\"\ncontents = \"staged/root/\"\n"),
    );
    let Some((a, got)) = same_bytes_and_fat_out(w, &split, &staged, "split") else {
        return;
    };
    assert_eq!(
        fs::read_to_string(got.join("config.txt")).unwrap(),
        "dtparam=audio=on\n"
    );
    assert_eq!(
        fs::read(got.join("overlays/vc4-kms-v3d.dtbo")).unwrap(),
        b"dtbo"
    );
    let ext = partition(&a, 2, &w.join("p2.img"));
    e2fsck_clean(&ext, Some("rootfs"));
    let ls = debugfs(&ext, "ls -l /boot/firmware");
    assert!(!ls.contains("config.txt"), "{ls}");
    assert!(debugfs(&ext, "ls -l /boot").contains("vmlinuz"));
}

#[test]
fn exclude_leaves_paths_out_as_if_deleted() {
    let dir = tempdir!();
    let w = dir.path();
    rootfs(w);
    let spec = write_file(
        w,
        "ex.toml",
        &format!("{HEAD}[[partition]]\nfs = \"ext4\"\nsize = \"fill\"\nlabel = \"rootfs\"\ncontents = \"rootfs/\"\nexclude = [\"var/cache/apt/archives/**\", \"**/*.pyc\", \"/etc/ssh/ssh_host_*\", \"home/*/.cache\"]\n"),
    );
    cp_a(&w.join("rootfs"), &w.join("deleted"));
    for p in [
        "var/cache/apt/archives/a.deb",
        "usr/lib/python3/x/m.pyc",
        "etc/ssh/ssh_host_rsa_key",
    ] {
        fs::remove_file(w.join("deleted").join(p)).unwrap();
    }
    fs::remove_dir_all(w.join("deleted/home/pi/.cache")).unwrap();
    fs::remove_dir(w.join("deleted/var/cache/apt/archives")).unwrap();
    let by_hand = write_file(
        w,
        "hand.toml",
        &format!("{HEAD}[[partition]]\nfs = \"ext4\"\nsize = \"fill\"\nlabel = \"rootfs\"\ncontents = \"deleted/\"\n"),
    );
    let (a, b) = (w.join("ex.img"), w.join("hand.img"));
    build_ok(&spec, &a);
    build_ok(&by_hand, &b);
    assert!(
        fs::read(&a).unwrap() == fs::read(&b).unwrap(),
        "exclude differs from deleting"
    );
    if have("debugfs") {
        let ext = partition(&a, 1, &w.join("p1.img"));
        let ls = debugfs(&ext, "ls -l /var/cache/apt");
        assert!(!ls.contains("archives"), "{ls}");
        assert!(debugfs(&ext, "ls -l /usr/lib/python3/x").contains("m.py"));
    }
}

#[test]
fn bad_mount_points_are_refused_naming_the_key() {
    let dir = tempdir!();
    let w = dir.path();
    rootfs(w);
    let cases = [
        (
            "mount = \"/boot/efi\"\n",
            "",
            "partition[1].mount",
            "not a directory in partition[2]",
        ),
        (
            "mount = \"boot\"\n",
            "",
            "partition[1].mount",
            "absolute path",
        ),
        (
            "mount = \"/boot/../x\"\n",
            "",
            "partition[1].mount",
            "absolute path",
        ),
        (
            "mount = \"/boot/firmware\"\n",
            "ext4 = { backend = \"mke2fs\" }\n",
            "partition[1].mount",
            "copies its contents whole",
        ),
        (
            "exclude = [\"/\"]\n",
            "",
            "partition[1].exclude[1]",
            "not a path pattern",
        ),
    ];
    for (fat_extra, ext_extra, key, why) in cases {
        let spec = write_file(
            w,
            "bad.toml",
            &format!("{HEAD}[[partition]]\nfs = \"fat32\"\nsize = \"64MiB\"\n{fat_extra}\n[[partition]]\nfs = \"ext4\"\nsize = \"fill\"\ncontents = \"rootfs/\"\n{ext_extra}"),
        );
        let out = w.join("bad.img");
        let o = build(&spec, &out);
        let text = output_text(&o);
        assert_eq!(o.status.code(), Some(2), "{fat_extra}: {text}");
        assert!(
            text.contains(key) && text.contains(why),
            "{fat_extra}{ext_extra}: {text}"
        );
        assert!(!out.exists());
    }
    // Nothing above it: no partition has contents.
    let spec = write_file(
        w,
        "alone.toml",
        &format!(
            "{HEAD}[[partition]]\nfs = \"fat32\"\nsize = \"64MiB\"\nmount = \"/boot/firmware\"\n"
        ),
    );
    let o = build(&spec, &w.join("alone.img"));
    let text = output_text(&o);
    assert_eq!(o.status.code(), Some(2), "{text}");
    assert!(
        text.contains("partition[1].mount") && text.contains("no partition holds it"),
        "{text}"
    );
}

// ---------------------------------------------------------------- files lists

/// `files = [...]` (genimage's vfat `files` / `file NAME { image = … }`): several sources
/// mapped into one FAT and one ext4 beside `contents` build the same bytes as the same files
/// staged into one directory per partition by `cp -a`; fsck.fat, mtools, e2fsck and debugfs
/// read them back.
#[test]
fn files_lists_equal_the_staged_directories() {
    let dir = tempdir!();
    let w = dir.path();
    for d in ["fw/overlays", "base_boot/boot", "base_root/lib", "extra"] {
        fs::create_dir_all(w.join(d)).unwrap();
    }
    write_file(&w.join("fw"), "start4.elf", "firmware\n");
    write_file(
        &w.join("fw/overlays"),
        "vc4-kms-v3d.dtbo",
        &"d".repeat(70_000),
    );
    write_file(&w.join("base_boot"), "config.txt", "dtparam=audio=on\n");
    write_file(&w.join("base_root/lib"), "libc.so", "elf");
    write_file(&w.join("extra"), "cmdline.txt", "console=tty1\n");
    write_file(w, "kernel", &"k".repeat(5000));
    std::os::unix::fs::symlink("kernel", w.join("kernel.link")).unwrap();
    let files = write_file(
        w,
        "files.toml",
        "[image]\nsize = \"64MiB\"\nseed = 7\ntimestamp = 1700000000\n\
         [[partition]]\nfs = \"fat16\"\nsize = \"16MiB\"\ncontents = \"base_boot\"\n\
         files = [\"fw/start4.elf\", \"fw/overlays/\", { source = \"kernel.link\", dest = \"/boot/kernel.img\" }, { source = \"extra\", dest = \"/\" }]\n\
         [[partition]]\nfs = \"ext4\"\nsize = \"fill\"\ncontents = \"base_root\"\n\
         files = [{ source = \"fw\", dest = \"/lib/firmware\" }, \"kernel\"]\n",
    );
    cp_a(&w.join("base_boot"), &w.join("s1"));
    cp_a(&w.join("fw/start4.elf"), &w.join("s1/start4.elf"));
    cp_a(&w.join("fw/overlays"), &w.join("s1/overlays"));
    cp_a(&w.join("kernel"), &w.join("s1/boot/kernel.img"));
    cp_a(&w.join("extra/cmdline.txt"), &w.join("s1/cmdline.txt"));
    cp_a(&w.join("base_root"), &w.join("s2"));
    cp_a(&w.join("fw"), &w.join("s2/lib/firmware"));
    cp_a(&w.join("kernel"), &w.join("s2/kernel"));
    let staged = write_file(
        w,
        "staged.toml",
        "[image]\nsize = \"64MiB\"\nseed = 7\ntimestamp = 1700000000\n\
         [[partition]]\nfs = \"fat16\"\nsize = \"16MiB\"\ncontents = \"s1\"\n\
         [[partition]]\nfs = \"ext4\"\nsize = \"fill\"\ncontents = \"s2\"\n",
    );
    let Some((a, got)) = same_bytes_and_fat_out(w, &files, &staged, "files") else {
        return;
    };
    for (inside, host) in [
        ("start4.elf", "fw/start4.elf"),
        ("overlays/vc4-kms-v3d.dtbo", "fw/overlays/vc4-kms-v3d.dtbo"),
        ("boot/kernel.img", "kernel"),
        ("cmdline.txt", "extra/cmdline.txt"),
        ("config.txt", "base_boot/config.txt"),
    ] {
        assert_eq!(
            fs::read(got.join(inside)).unwrap(),
            fs::read(w.join(host)).unwrap(),
            "{inside}"
        );
    }
    let ext = partition(&a, 2, &w.join("p2.img"));
    e2fsck_clean(&ext, None);
    let out = w.join("dumped");
    debugfs(
        &ext,
        &format!(
            "dump /lib/firmware/overlays/vc4-kms-v3d.dtbo {}",
            out.display()
        ),
    );
    assert_eq!(
        fs::read(&out).unwrap(),
        fs::read(w.join("fw/overlays/vc4-kms-v3d.dtbo")).unwrap()
    );
    assert!(debugfs(&ext, "ls -l /").contains("kernel"));
}

/// Every bad `files` item is refused naming `partition[N].files[K]`, before anything is
/// written.
#[test]
fn bad_files_items_are_refused_naming_the_key() {
    let dir = tempdir!();
    let w = dir.path();
    fs::create_dir_all(w.join("boot")).unwrap();
    write_file(&w.join("boot"), "config.txt", "x");
    write_file(w, "config.txt", "y");
    let head = "[image]\nsize = \"64MiB\"\nseed = 1\n[[partition]]\n";
    for (part, want) in [
        (
            "fs = \"fat16\"\nsize = \"16MiB\"\nfiles = [\"missing.bin\"]",
            "partition[1].files[1]: \"missing.bin\" cannot be read",
        ),
        (
            "fs = \"fat16\"\nsize = \"16MiB\"\ncontents = \"boot\"\nfiles = [\"config.txt\"]",
            "partition[1].files[1]: /config.txt is there already (from contents or an earlier item of files)",
        ),
        (
            "fs = \"ext4\"\nsize = \"16MiB\"\nfiles = [\"boot\", { source = \"config.txt\", dest = \"/boot/config.txt\" }]",
            "partition[1].files[2]: /boot/config.txt is there already",
        ),
        (
            "fs = \"ext4\"\nsize = \"16MiB\"\nfiles = [{ source = \"config.txt\", dest = \"/a/../../etc/x\" }]",
            "partition[1].files[1]: dest \"/a/../../etc/x\" leaves the filesystem",
        ),
        (
            "fs = \"ext4\"\nsize = \"16MiB\"\nfiles = [{ source = \"config.txt\", dest = \"etc/x\" }]",
            "partition[1].files[1]: dest \"etc/x\" must be an absolute path",
        ),
        (
            "fs = \"ext4\"\nsize = \"16MiB\"\nfiles = [{ source = \"config.txt\", dest = \"/\" }]",
            "partition[1].files[1]: a file cannot replace the root directory",
        ),
        (
            "fs = \"ext4\"\nsize = \"16MiB\"\nfiles = [{ source = \"config.txt\", to = \"/x\" }]",
            "partition[1].files[1].to: unknown key; this table takes dest, source",
        ),
        (
            "fs = \"raw\"\nsource = \"config.txt\"\nfiles = [\"boot\"]",
            "partition[1].files: fs = \"raw\" holds no files",
        ),
        (
            "fs = \"ext4\"\nsize = \"16MiB\"\next4 = { backend = \"mke2fs\" }\nfiles = [\"boot\"]",
            "partition[1].files: the external backend copies one contents directory whole",
        ),
    ] {
        let spec = write_file(w, "bad.toml", &format!("{head}{part}\n"));
        let out = w.join("bad.img");
        let o = build(&spec, &out);
        let text = output_text(&o);
        assert!(!o.status.success() && text.contains(want), "{part}\n{text}");
        assert!(!out.exists(), "{part}: an image was left behind");
    }
}
