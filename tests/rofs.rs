//! Read-only system partitions (issue 28): squashfs and EROFS from `contents`, dm-verity hash
//! trees, and verify's parsers, against the real tools: `unsquashfs -lls`/`-s`,
//! `fsck.erofs`, `dump.erofs`, kernel read-only mounts through `losetup --offset` compared
//! with the source tree (content, type, mode, owner, mtime, symlink target, device number,
//! link count, xattrs via `getfattr`), `veritysetup verify` (and its failure after one
//! flipped data byte), `mksquashfs`/`mkfs.erofs`/`veritysetup format` images read by verify.

use std::collections::BTreeMap;
use std::fs::{self, File};
use std::os::unix::fs::{FileExt, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::Output;

use blockwise_test_kit::{
    assert_same_json, blockwise, have, have_loop, is_root, output_text, run, tempdir, write_file,
    xorshift64star_bytes,
};
use serde_json::Value;
use sha2::{Digest, Sha256};

fn ok(o: &Output, what: &str) {
    assert!(o.status.success(), "{what}: {}", output_text(o));
}

/// Sets the mtime of anything, symlinks and FIFOs included (`touch -h`, which opens nothing).
fn set_mtime(p: &Path, secs: u64) {
    ok(
        &run(
            "touch",
            &[
                "-h".as_ref(),
                "-d".as_ref(),
                format!("@{secs}").as_ref(),
                p.as_os_str(),
            ],
        ),
        "touch",
    );
}

/// A source tree with what a root filesystem holds: nested directories, files of 0 B to
/// 300 KiB (block and page edges), a sparse file, hard links, short and long symlinks,
/// setuid/sticky modes, many small files, and as root owners, a device node, a FIFO and
/// xattrs (user.*, security.*). Every time is before the build's timestamp.
fn source(dir: &Path) -> PathBuf {
    let c = dir.join("src");
    for d in [
        "etc/ssh",
        "usr/bin",
        "usr/lib/deep/er/still",
        "var/empty",
        "tmp",
    ] {
        fs::create_dir_all(c.join(d)).unwrap();
    }
    fs::write(c.join("etc/hostname"), "board\n").unwrap();
    for (i, n) in [
        0usize, 1, 100, 4095, 4096, 4097, 8191, 131_072, 131_073, 300_001,
    ]
    .iter()
    .enumerate()
    {
        fs::write(
            c.join(format!("usr/lib/f{n}")),
            xorshift64star_bytes(i as u64 + 7, *n),
        )
        .unwrap();
    }
    // Compressible text, for the compressors to show.
    fs::write(
        c.join("usr/lib/text"),
        "all work and no play\n".repeat(20_000),
    )
    .unwrap();
    for i in 0..200 {
        fs::write(c.join(format!("usr/lib/deep/s{i:03}")), "x".repeat(i * 7)).unwrap();
    }
    let sparse = File::create(c.join("var/sparse")).unwrap();
    sparse.set_len(3 << 20).unwrap();
    sparse.write_all_at(b"middle", 1 << 20).unwrap();
    drop(sparse);
    fs::hard_link(c.join("usr/lib/f4097"), c.join("usr/bin/hardlink")).unwrap();
    std::os::unix::fs::symlink("../lib/f100", c.join("usr/bin/short")).unwrap();
    std::os::unix::fs::symlink("a/".repeat(1500), c.join("usr/bin/long")).unwrap();
    fs::write(c.join("usr/bin/su"), "#!/bin/sh\n").unwrap();
    fs::set_permissions(c.join("usr/bin/su"), fs::Permissions::from_mode(0o4755)).unwrap();
    fs::set_permissions(c.join("tmp"), fs::Permissions::from_mode(0o1777)).unwrap();
    fs::write(c.join("etc/ssh/key"), "secret\n").unwrap();
    fs::set_permissions(c.join("etc/ssh/key"), fs::Permissions::from_mode(0o600)).unwrap();
    if is_root() {
        std::os::unix::fs::chown(c.join("etc/hostname"), Some(1000), Some(2000)).unwrap();
        std::os::unix::fs::chown(c.join("var"), Some(70000), Some(70001)).unwrap();
        ok(
            &run(
                "mknod",
                &[
                    c.join("null").as_os_str(),
                    "c".as_ref(),
                    "1".as_ref(),
                    "3".as_ref(),
                ],
            ),
            "mknod",
        );
        ok(&run("mkfifo", &[c.join("fifo")]), "mkfifo");
        if have("setfattr") {
            for (p, n, v) in [
                ("etc/hostname", "user.role", "name"),
                ("usr/lib/f100", "user.role", "name"),
                ("usr", "security.selinux", "system_u:object_r:usr_t"),
                ("usr/bin/su", "user.big", &"v".repeat(3000)[..]),
            ] {
                ok(
                    &run(
                        "setfattr",
                        &[
                            "-n".as_ref(),
                            n.as_ref(),
                            "-v".as_ref(),
                            v.as_ref(),
                            c.join(p).as_os_str(),
                        ],
                    ),
                    "setfattr",
                );
            }
        }
    }
    // Times last (writing a directory's entries changes its mtime), deepest first.
    let mut all = vec![c.clone()];
    let mut k = 0;
    while k < all.len() {
        if all[k].is_dir() && !all[k].is_symlink() {
            let mut kids: Vec<PathBuf> = fs::read_dir(&all[k])
                .unwrap()
                .map(|e| e.unwrap().path())
                .collect();
            kids.sort();
            all.extend(kids);
        }
        k += 1;
    }
    for (i, p) in all.iter().enumerate().rev() {
        set_mtime(p, 1_600_000_000 + i as u64 * 61);
    }
    c
}

/// Everything a read-only image must keep of a tree, one line per path.
fn listing(root: &Path) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(p) = stack.pop() {
        let md = fs::symlink_metadata(&p).unwrap();
        let rel = p.strip_prefix(root).unwrap().display().to_string();
        let ft = md.file_type();
        let what = if ft.is_dir() {
            let mut kids: Vec<PathBuf> = fs::read_dir(&p)
                .unwrap()
                .map(|e| e.unwrap().path())
                .collect();
            kids.sort();
            stack.extend(kids);
            "dir".to_string()
        } else if ft.is_symlink() {
            format!("link {}", fs::read_link(&p).unwrap().display())
        } else if ft.is_file() {
            format!(
                "file {} {:x}",
                md.len(),
                Sha256::digest(fs::read(&p).unwrap())
            )
        } else {
            format!("special {:o} rdev {}", md.mode() & 0o170000, md.rdev())
        };
        let nlink = if ft.is_dir() { 0 } else { md.nlink() };
        let mtime = md.mtime();
        out.insert(
            rel,
            format!(
                "{what} mode {:o} {}:{} mtime {mtime} links {nlink}",
                md.mode() & 0o7777,
                md.uid(),
                md.gid()
            ),
        );
    }
    // Xattrs, as getfattr prints them (relative paths, sorted by path).
    if have("getfattr") {
        let o = blockwise_test_kit::command("getfattr")
            .args(["-R", "-h", "-d", "-m", "-", "."])
            .current_dir(root)
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&o.stdout).into_owned();
        for block in text.split("\n\n").filter(|b| !b.trim().is_empty()) {
            let mut lines = block.lines();
            let file = lines
                .next()
                .unwrap_or("")
                .trim_start_matches("# file: ")
                .trim_start_matches("./")
                .to_string();
            let mut attrs: Vec<&str> = lines.collect();
            attrs.sort_unstable();
            out.insert(format!("{file} xattrs"), attrs.join(" "));
        }
    }
    out
}

/// Mounts `len` bytes at `offset` of `image` read-only as `fstype` through
/// `losetup --offset --sizelimit`, runs `f` on the mount point, then unmounts and detaches.
fn with_mount(
    image: &Path,
    offset: u64,
    len: u64,
    fstype: &str,
    mnt: &Path,
    f: impl FnOnce(&Path),
) {
    let o = run(
        "losetup",
        &[
            "-f".to_string(),
            "--show".into(),
            "-r".into(),
            "--offset".into(),
            offset.to_string(),
            "--sizelimit".into(),
            len.to_string(),
            image.display().to_string(),
        ],
    );
    ok(&o, "losetup");
    let dev = String::from_utf8_lossy(&o.stdout).trim().to_string();
    fs::create_dir_all(mnt).unwrap();
    let m = run(
        "mount",
        &["-t", fstype, "-o", "ro", &dev, &mnt.display().to_string()],
    );
    let r = if m.status.success() {
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| f(mnt)));
        let _ = run("umount", &[mnt]);
        r
    } else {
        Ok(())
    };
    let _ = run("losetup", &["-d", &dev]);
    assert!(m.status.success(), "mount -t {fstype}: {}", output_text(&m));
    if let Err(e) = r {
        std::panic::resume_unwind(e);
    }
}

fn json_of(o: &Output) -> Value {
    serde_json::from_slice(&o.stdout).unwrap_or_else(|_| panic!("not JSON: {}", output_text(o)))
}

fn build_json(spec: &Path, out: &Path) -> Value {
    let o = blockwise!().run([
        "build".as_ref(),
        spec.as_os_str(),
        "-o".as_ref(),
        out.as_os_str(),
        "--json".as_ref(),
    ]);
    ok(&o, "blockwise build");
    json_of(&o)
}

fn verify_json(img: &Path, eb: &str) -> (Value, Output) {
    let o = blockwise!().run([
        "verify".as_ref(),
        img.as_os_str(),
        "--json".as_ref(),
        "--erase-block".as_ref(),
        eb.as_ref(),
    ]);
    (json_of(&o), o)
}

fn copy_range(img: &Path, offset: u64, len: u64, to: &Path) {
    let f = File::open(img).unwrap();
    let mut buf = vec![0u8; len as usize];
    f.read_exact_at(&mut buf, offset).unwrap();
    fs::write(to, buf).unwrap();
}

fn part(v: &Value, i: usize) -> (u64, u64, &Value) {
    let p = &v["partitions"][i];
    (
        p["start_bytes"].as_u64().unwrap(),
        p["size_bytes"].as_u64().unwrap(),
        &p["filesystem"],
    )
}

const SPEC: &str = r#"
[image]
table = "gpt"
erase-block = "1MiB"
timestamp = 1700000000
seed = 28

[[partition]]
name = "erofs"
fs = "erofs"
contents = "src"
label = "system"

[[partition]]
name = "erofs-verity"
fs = "verity"
of = "erofs"

[[partition]]
name = "sq"
fs = "squashfs"
contents = "src"
squashfs = { compression = "COMP", block-size = "BS" }

[[partition]]
name = "sq-v"
fs = "squashfs"
contents = "src"
squashfs = { compression = "COMP" }
verity = "appended"

[[partition]]
name = "ero-v"
fs = "erofs"
contents = "src"
verity = "appended"
"#;

/// Every partition kind of this issue in one GPT image, for each compressor: fsck and
/// unsquashfs clean, the kernel mounts show the source tree, verity verifies (and refuses a
/// flipped byte), verify reports what the build planned, two builds are byte-identical.
#[test]
fn read_only_partitions_match_the_source_tree() {
    let tools = ["unsquashfs", "fsck.erofs", "veritysetup"];
    if !tools.iter().all(|t| have(t)) {
        return;
    }
    let dir = tempdir!();
    let src = source(dir.path());
    let want = listing(&src);
    if is_root() && have("getfattr") {
        // The comparison covers xattrs, owners beyond 16 bits and special files.
        assert!(
            want.get("etc/hostname xattrs")
                .is_some_and(|v| v.contains("user.role")),
            "{want:?}"
        );
        assert!(want.get("var").is_some_and(|v| v.contains("70000:70001")));
        assert!(want.get("null").is_some_and(|v| v.contains("special")));
    }
    for (comp, bs) in [
        ("gzip", "128KiB"),
        ("xz", "64KiB"),
        ("lz4", "4KiB"),
        ("zstd", "1MiB"),
    ] {
        let spec = write_file(
            dir.path(),
            &format!("{comp}.toml"),
            &SPEC.replace("COMP", comp).replace("BS", bs),
        );
        let img = dir.path().join(format!("{comp}.img"));
        let built = build_json(&spec, &img);
        // Reproducible: a second build is the same bytes.
        let again = dir.path().join(format!("{comp}-again.img"));
        build_json(&spec, &again);
        assert!(
            fs::read(&img).unwrap() == fs::read(&again).unwrap(),
            "{comp}: two builds differ"
        );
        // plan = build = verify.
        let o = blockwise!().run(["plan".as_ref(), spec.as_os_str(), "--json".as_ref()]);
        ok(&o, "plan");
        assert_same_json(&json_of(&o)["partitions"], &built["partitions"], comp);
        let (report, vo) = verify_json(&img, "1MiB");
        assert_eq!(vo.status.code(), Some(0), "{comp}: {}", output_text(&vo));
        assert_eq!(report["aligned"], true, "{comp}");
        assert_same_json(&built["partitions"], &report["partitions"], comp);
        assert_eq!(
            report["findings"].as_array().map(Vec::len),
            Some(0),
            "{comp}: {:#}",
            report["findings"]
        );
        // The root hashes are in the build JSON, in verify's and beside the image.
        let roots: Vec<String> = ["erofs", "sq-v", "ero-v"]
            .iter()
            .map(|n| {
                fs::read_to_string(dir.path().join(format!("{comp}.img.{n}.roothash")))
                    .unwrap()
                    .trim()
                    .to_string()
            })
            .collect();
        assert_eq!(part(&built, 1).2["root_hash"], roots[0]);
        assert_eq!(part(&report, 3).2["verity"]["root_hash"], roots[1]);

        for (i, fstype) in [
            (0usize, "erofs"),
            (2, "squashfs"),
            (3, "squashfs"),
            (4, "erofs"),
        ] {
            let (start, size, fs_) = part(&built, i);
            let file = dir.path().join(format!("{comp}-p{i}"));
            copy_range(&img, start, size, &file);
            if fstype == "erofs" {
                ok(&run("fsck.erofs", &[&file]), "fsck.erofs");
                assert!(fs_["blocks"].as_u64().unwrap() * 4096 <= size);
            } else {
                let o = run("unsquashfs", &["-lls".as_ref(), file.as_os_str()]);
                ok(&o, "unsquashfs -lls");
                let t = output_text(&o);
                assert!(
                    !t.contains("rror") && !t.contains("ailed"),
                    "{comp} p{i}: {t}"
                );
            }
            if have_loop() {
                with_mount(&img, start, size, fstype, &dir.path().join("mnt"), |m| {
                    let got = listing(m);
                    for (k, v) in &want {
                        assert_eq!(got.get(k), Some(v), "{comp} p{i} {fstype}: {k}");
                    }
                    assert_eq!(
                        got.len(),
                        want.len(),
                        "{comp} p{i}: {:?}",
                        got.keys()
                            .filter(|k| !want.contains_key(*k))
                            .collect::<Vec<_>>()
                    );
                });
            }
        }

        // veritysetup verify, for the partition of its own and both appended trees; one
        // flipped data byte makes it fail.
        let (ds, dl, _) = part(&built, 0);
        let (hs, hl, _) = part(&built, 1);
        let data = dir.path().join("data");
        let hash = dir.path().join("hash");
        copy_range(&img, ds, dl, &data);
        copy_range(&img, hs, hl, &hash);
        let verify = |d: &Path, h: &Path, root: &str, extra: Option<u64>| {
            let mut a = vec![
                "verify".to_string(),
                d.display().to_string(),
                h.display().to_string(),
                root.to_string(),
            ];
            if let Some(off) = extra {
                a.push(format!("--hash-offset={off}"));
            }
            run("veritysetup", &a)
        };
        ok(&verify(&data, &hash, &roots[0], None), "veritysetup verify");
        let f = fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(&data)
            .unwrap();
        let mut b = [0u8; 1];
        f.read_exact_at(&mut b, 4096 * 3 + 17).unwrap();
        f.write_all_at(&[b[0] ^ 0x20], 4096 * 3 + 17).unwrap();
        drop(f);
        assert!(
            !verify(&data, &hash, &roots[0], None).status.success(),
            "{comp}: a flipped byte verifies"
        );
        for (i, root) in [(3usize, &roots[1]), (4, &roots[2])] {
            let (s, l, fs_) = part(&built, i);
            let off = fs_["verity"]["hash_start_bytes"].as_u64().unwrap() - s;
            assert_eq!(
                off % (1 << 20),
                0,
                "the appended tree starts on the erase block"
            );
            let p = dir.path().join("appended");
            copy_range(&img, s, l, &p);
            ok(
                &verify(&p, &p, root, Some(off)),
                "veritysetup verify --hash-offset",
            );
            let f = fs::OpenOptions::new().write(true).open(&p).unwrap();
            f.write_all_at(b"\xff", 100).unwrap();
            drop(f);
            assert!(
                !verify(&p, &p, root, Some(off)).status.success(),
                "{comp} p{i}: flipped byte verifies"
            );
        }
    }
}

const ENTRIES: &str = r#"
[[partition.entry]]
path = "/a/b"
mode = "0640"
uid = 0
gid = 42
xattrs = { "user.x" = "0x0102" }
[[partition.entry]]
path = "/dev/console"
kind = "char"
major = 5
minor = 1
mode = "0600"
"#;

/// A bare EROFS and a bare squashfs image (table = "none"), sizes left out: the image is the
/// filesystem, verify names it; `[[partition.entry]]` applies as for ext4.
#[test]
fn bare_images_are_the_filesystem() {
    let dir = tempdir!();
    let src = dir.path().join("src");
    fs::create_dir_all(src.join("a")).unwrap();
    fs::write(src.join("a/b"), "hello\n").unwrap();
    for fs_ in ["erofs", "squashfs"] {
        let spec = write_file(
            dir.path(),
            &format!("{fs_}.toml"),
            &format!("[image]\ntable = \"none\"\ntimestamp = 1\n[[partition]]\nfs = \"{fs_}\"\ncontents = \"src\"\n{ENTRIES}"),
        );
        let img = dir.path().join(format!("{fs_}.img"));
        let built = build_json(&spec, &img);
        let len = fs::metadata(&img).unwrap().len();
        assert_eq!(len % 4096, 0, "{fs_}: {len}");
        assert!(len <= 64 << 10, "{fs_}: {len} bytes for one file");
        let (report, o) = verify_json(&img, "4MiB");
        assert_eq!(o.status.code(), Some(0), "{}", output_text(&o));
        assert_eq!(report["partitions"][0]["filesystem"]["kind"], fs_);
        assert_same_json(&built["partitions"], &report["partitions"], fs_);
        if fs_ == "erofs" && have("fsck.erofs") {
            ok(&run("fsck.erofs", &[&img]), "fsck.erofs");
        }
        if fs_ == "squashfs" && have("unsquashfs") {
            ok(
                &run("unsquashfs", &["-s".as_ref(), img.as_os_str()]),
                "unsquashfs -s",
            );
        }
        if have_loop() {
            with_mount(&img, 0, len, fs_, &dir.path().join("mnt"), |m| {
                let got = listing(m);
                assert!(got["a/b"].contains("mode 640 0:42"), "{fs_}: {got:?}");
                assert!(
                    got["dev/console"].contains(&format!("special 20000 rdev {}", (5 << 8) | 1)),
                    "{fs_}: {got:?}"
                );
                if have("getfattr") {
                    assert!(
                        got["a/b xattrs"].contains("user.x=0sAQI="),
                        "{fs_}: {got:?}"
                    );
                }
            });
        }
    }
}

/// Field by field: what verify reports of images made by mksquashfs and mkfs.erofs (several
/// options) is what `unsquashfs -s` and `dump.erofs` say.
#[test]
fn verify_reads_images_of_the_tools_as_they_do() {
    let dir = tempdir!();
    let src = source(dir.path());
    if have("mksquashfs") && have("unsquashfs") {
        for (k, args) in [
            vec!["-comp", "gzip"],
            vec!["-comp", "xz", "-b", "4096"],
            vec!["-comp", "lz4", "-Xhc"],
            vec!["-comp", "zstd", "-b", "1M", "-no-fragments"],
            vec!["-comp", "lzo", "-all-root"],
        ]
        .into_iter()
        .enumerate()
        {
            let img = dir.path().join(format!("t{k}.sq"));
            let mut a: Vec<String> = vec![
                src.display().to_string(),
                img.display().to_string(),
                "-noappend".into(),
                "-quiet".into(),
            ];
            a.extend(args.iter().map(|s| s.to_string()));
            ok(&run("mksquashfs", &a), "mksquashfs");
            let s = output_text(&run("unsquashfs", &["-s".as_ref(), img.as_os_str()]));
            let field = |key: &str| {
                s.lines()
                    .find_map(|l| l.strip_prefix(key))
                    .map(|v| v.split_whitespace().next().unwrap_or("").to_string())
                    .unwrap_or_else(|| panic!("{key} in {s}"))
            };
            let (r, o) = verify_json(&img, "4MiB");
            assert_eq!(o.status.code(), Some(0), "{args:?}: {}", output_text(&o));
            let f = &r["partitions"][0]["filesystem"];
            assert_eq!(f["kind"], "squashfs", "{args:?}");
            assert_eq!(f["compression"], field("Compression"), "{args:?}");
            assert_eq!(
                f["block_bytes"].to_string(),
                field("Block size"),
                "{args:?}"
            );
            assert_eq!(
                f["bytes_used"].to_string(),
                field("Filesystem size"),
                "{args:?}"
            );
            assert_eq!(
                f["inodes"].to_string(),
                field("Number of inodes"),
                "{args:?}"
            );
        }
    }
    if have("mkfs.erofs") && have("dump.erofs") {
        for (k, args) in [
            vec![],
            vec!["-zlz4"],
            vec!["-zlz4hc,9", "-T1700000000"],
            vec!["-x-1", "--all-root"],
        ]
        .into_iter()
        .enumerate()
        {
            let img = dir.path().join(format!("t{k}.erofs"));
            let mut a: Vec<String> = vec!["--quiet".into()];
            a.extend(args.iter().map(|s| s.to_string()));
            a.push(img.display().to_string());
            a.push(src.display().to_string());
            ok(&run("mkfs.erofs", &a), "mkfs.erofs");
            let d = output_text(&run("dump.erofs", &[&img]));
            let field = |key: &str| {
                d.lines()
                    .find_map(|l| l.strip_prefix(key))
                    .map(|v| v.trim().to_string())
                    .unwrap_or_else(|| panic!("{key} in {d}"))
            };
            let (r, o) = verify_json(&img, "4MiB");
            assert_eq!(o.status.code(), Some(0), "{args:?}: {}", output_text(&o));
            let f = &r["partitions"][0]["filesystem"];
            assert_eq!(f["kind"], "erofs", "{args:?}");
            assert_eq!(
                f["blocks"].to_string(),
                field("Filesystem blocks:"),
                "{args:?}"
            );
            assert_eq!(
                f["inodes"].to_string(),
                field("Filesystem inode count:"),
                "{args:?}"
            );
            assert_eq!(f["uuid"], field("Filesystem UUID:"), "{args:?}");
            let feats: Vec<String> = field("Filesystem features:")
                .split_whitespace()
                .map(str::to_string)
                .collect();
            let ours: Vec<String> = f["features"]
                .as_array()
                .unwrap()
                .iter()
                .map(|v| v.as_str().unwrap().to_string())
                .collect();
            for name in &feats {
                let name = name.trim_start_matches("lz4_");
                assert!(
                    ours.iter().any(|o| o == name),
                    "{args:?}: dump.erofs says {name}, verify {ours:?}"
                );
            }
            let compressed = args.iter().any(|a| a.starts_with("-z"));
            assert_eq!(f["compression"] == "lz4", compressed, "{args:?}: {f}");
        }
    }
    if have("veritysetup") {
        // A hash device made by veritysetup format, bare: named, sized, its root hash.
        let data = dir.path().join("vdata");
        fs::write(&data, xorshift64star_bytes(9, 2 << 20)).unwrap();
        let hash = dir.path().join("vhash");
        fs::write(&hash, b"").unwrap();
        let o = run(
            "veritysetup",
            &["format".as_ref(), data.as_os_str(), hash.as_os_str()],
        );
        ok(&o, "veritysetup format");
        let t = output_text(&o);
        let root = t
            .lines()
            .find_map(|l| l.strip_prefix("Root hash:"))
            .unwrap()
            .trim()
            .to_string();
        let (r, o) = verify_json(&hash, "4MiB");
        assert_eq!(o.status.code(), Some(0), "{}", output_text(&o));
        let f = &r["partitions"][0]["filesystem"];
        assert_eq!(f["kind"], "verity");
        assert_eq!(f["data_blocks"], 512);
        assert_eq!(f["root_hash"], root.as_str());
        // No partition covers 2 MiB here: said, not an error.
        assert!(r["findings"]
            .as_array()
            .unwrap()
            .iter()
            .any(|x| x["code"] == "verity-no-data"));
    }
}

/// The backends: mksquashfs and mkfs.erofs images placed, verified, reproducible; a missing
/// tool names its Debian package.
#[test]
fn tool_backends() {
    if !(have("mksquashfs") && have("mkfs.erofs") && have("unsquashfs") && have("fsck.erofs")) {
        return;
    }
    let dir = tempdir!();
    source(dir.path());
    let spec = write_file(
        dir.path(),
        "t.toml",
        r#"
[image]
table = "gpt"
erase-block = "1MiB"
timestamp = 1700000000
[[partition]]
name = "e"
fs = "erofs"
contents = "src"
erofs = { compression = "lz4hc", backend = "mkfs.erofs" }
[[partition]]
name = "q"
fs = "squashfs"
contents = "src"
squashfs = { compression = "xz", backend = "mksquashfs" }
verity = "appended"
[[partition]]
name = "plain"
fs = "erofs"
contents = "src"
erofs = { backend = "mkfs.erofs" }
"#,
    );
    let img = dir.path().join("t.img");
    let built = build_json(&spec, &img);
    let again = dir.path().join("again.img");
    build_json(&spec, &again);
    assert!(
        fs::read(&img).unwrap() == fs::read(&again).unwrap(),
        "two builds differ"
    );
    assert_eq!(part(&built, 0).2["compression"], "lz4");
    assert_eq!(part(&built, 2).2["compression"], "none");
    let (report, o) = verify_json(&img, "1MiB");
    assert_eq!(o.status.code(), Some(0), "{}", output_text(&o));
    assert_same_json(&built["partitions"], &report["partitions"], "tools");
    let (s, l, _) = part(&built, 0);
    let p = dir.path().join("e.img");
    copy_range(&img, s, l, &p);
    ok(&run("fsck.erofs", &[&p]), "fsck.erofs");
    let (s, l, _) = part(&built, 1);
    let p = dir.path().join("q.img");
    copy_range(&img, s, l, &p);
    ok(
        &run("unsquashfs", &["-s".as_ref(), p.as_os_str()]),
        "unsquashfs",
    );

    // Without the tool on PATH: the error names the package.
    let empty = dir.path().join("nobin");
    fs::create_dir_all(&empty).unwrap();
    let o = std::process::Command::new(blockwise!().path())
        .args([
            "build".as_ref(),
            spec.as_os_str(),
            "-o".as_ref(),
            dir.path().join("x.img").as_os_str(),
        ])
        .env("PATH", &empty)
        .output()
        .unwrap();
    assert!(!o.status.success());
    let t = output_text(&o);
    assert!(
        t.contains("erofs-utils") && t.contains("mkfs.erofs not found"),
        "{t}"
    );
    assert!(!dir.path().join("x.img").exists());
}

/// Bad specs name the key and say what to do.
#[test]
fn spec_errors_name_the_key() {
    let dir = tempdir!();
    fs::create_dir_all(dir.path().join("src")).unwrap();
    fs::write(dir.path().join("src/f"), xorshift64star_bytes(3, 10_000)).unwrap();
    let cases: &[(&str, &str, &str)] = &[
        ("fs = \"verity\"\nof = \"nope\"", "partition[2].of", "no partition is named \"nope\""),
        ("fs = \"verity\"", "partition[2].of", "missing"),
        ("fs = \"ext4\"\nsize = \"8MiB\"\nverity = \"appended\"", "partition[2].verity", "erofs"),
        ("fs = \"erofs\"\ncontents = \"src\"\nerofs = { compression = \"lz4\" }", "partition[2].erofs.compression", "mkfs.erofs"),
        ("fs = \"squashfs\"\ncontents = \"src\"\nsquashfs = { block-size = \"3KiB\" }", "partition[2].squashfs.block-size", "power of two"),
        ("fs = \"squashfs\"\ncontents = \"src\"\nsquashfs = { compression = \"lzo\" }", "partition[2].squashfs.compression", "gzip"),
        ("fs = \"erofs\"\ncontents = \"src\"\nlabel = \"seventeen-bytes-xx\"", "partition[2].label", "16"),
        ("fs = \"verity\"\nof = \"data\"\nsize = \"4KiB\"", "partition[2].size", "hash tree"),
        ("fs = \"squashfs\"\ncontents = \"src\"\nsquashfs = { level = 3, compression = \"lz4\" }", "partition[2].squashfs.level", "no level"),
        ("fs = \"squashfs\"\ncontents = \"src\"\n[[partition.entry]]\npath = \"/x\"\nkind = \"fifo\"\n[partition.squashfs]\nbackend = \"mksquashfs\"", "partition[2].entry", "native"),
        ("fs = \"raw\"\nsource = \"src/f\"\nverity = \"appended\"", "partition[2].verity", "erofs"),
        ("fs = \"erofs\"\ncontents = \"src\"\nsize = \"4KiB\"", "partition[2].size", "grow"),
        ("fs = \"verity\"\nof = \"data\"\nverity = \"inline\"", "partition[2].verity", "appended"),
        ("fs = \"verity\"\nof = \"data\"\nslots = [\"a\", \"b\"]", "partition[2].slots", "\"data\" has no slots"),
        ("fs = \"erofs\"\ncontents = \"src\"\nslots = [\"a\", \"b\"]\nerofs = { compression = \"lz4\", backend = \"mkfs.erofs\" }", "partition[2].slots", "native"),
    ];
    // A slotted data partition: its tree has the same slots, one per copy.
    let slotted: &[(&str, &str, &str)] = &[
        (
            "fs = \"verity\"\nof = \"data\"",
            "partition[2].slots",
            "give this verity partition the same slots = [\"a\", \"b\"]",
        ),
        (
            "fs = \"verity\"\nof = \"data\"\nslots = [\"a\", \"c\"]",
            "partition[2].slots",
            "not [\"a\", \"c\"]",
        ),
    ];
    let cases = cases
        .iter()
        .map(|c| (c, ""))
        .chain(slotted.iter().map(|c| (c, "slots = [\"a\", \"b\"]\n")));
    for (k, ((part2, key, words), slots1)) in cases.enumerate() {
        let spec = write_file(
            dir.path(),
            &format!("e{k}.toml"),
            &format!("[image]\ntable = \"gpt\"\nerase-block = \"4KiB\"\n[[partition]]\nname = \"data\"\nfs = \"erofs\"\ncontents = \"src\"\n{slots1}[[partition]]\nname = \"x\"\n{part2}\n"),
        );
        let o = blockwise!().run(["plan".as_ref(), spec.as_os_str()]);
        assert_eq!(o.status.code(), Some(2), "{part2}: {}", output_text(&o));
        let t = output_text(&o);
        assert!(
            t.contains(key) && t.contains(words),
            "{part2}: want {key} … {words}, got {t}"
        );
    }
}

/// Damage that verify must see: a flipped EROFS superblock byte (checksum), a squashfs or
/// EROFS partition cut shorter than its filesystem, a hash area cut short.
#[test]
fn verify_sees_damage() {
    let dir = tempdir!();
    let src = dir.path().join("src");
    fs::create_dir_all(&src).unwrap();
    fs::write(src.join("f"), xorshift64star_bytes(1, 600_000)).unwrap();
    let spec = write_file(
        dir.path(),
        "d.toml",
        "[image]\ntable = \"none\"\n[[partition]]\nfs = \"erofs\"\ncontents = \"src\"\nlabel = \"L\"\n",
    );
    let img = dir.path().join("d.img");
    build_json(&spec, &img);
    let f = fs::OpenOptions::new().write(true).open(&img).unwrap();
    f.write_all_at(b"M", 1024 + 0x40 + 1).unwrap(); // the label, under the checksum
    drop(f);
    let (r, o) = verify_json(&img, "4MiB");
    assert_eq!(o.status.code(), Some(1));
    assert!(
        r["findings"][0]["code"] == "erofs-superblock-checksum",
        "{r:#}"
    );
    // Cut short.
    let short = dir.path().join("short.img");
    copy_range(&img, 0, 8192, &short);
    let (r, _) = verify_json(&short, "4MiB");
    assert!(
        r["findings"]
            .as_array()
            .unwrap()
            .iter()
            .any(|x| x["code"] == "erofs-larger-than-partition"),
        "{r:#}"
    );

    let spec = write_file(
        dir.path(),
        "q.toml",
        "[image]\ntable = \"none\"\n[[partition]]\nfs = \"squashfs\"\ncontents = \"src\"\nsquashfs = { compression = \"lz4\" }\n",
    );
    let img = dir.path().join("q.img");
    build_json(&spec, &img);
    let short = dir.path().join("qshort.img");
    copy_range(&img, 0, 4096, &short);
    let (r, o) = verify_json(&short, "4MiB");
    assert_eq!(o.status.code(), Some(1));
    assert!(
        r["findings"]
            .as_array()
            .unwrap()
            .iter()
            .any(|x| x["code"] == "squashfs-larger-than-partition"),
        "{r:#}"
    );

    let spec = write_file(
        dir.path(),
        "v.toml",
        "[image]\ntable = \"gpt\"\nerase-block = \"1MiB\"\n[[partition]]\nname = \"d\"\nfs = \"erofs\"\ncontents = \"src\"\nsize = \"8MiB\"\n[[partition]]\nname = \"h\"\nfs = \"verity\"\nof = \"d\"\n",
    );
    let img = dir.path().join("v.img");
    let built = build_json(&spec, &img);
    let (hs, _, v) = part(&built, 1);
    assert_eq!(v["data_blocks"], 2048);
    // Truncate the hash partition's table entry? Rather: a hash superblock claiming more data.
    let f = fs::OpenOptions::new().write(true).open(&img).unwrap();
    f.write_all_at(&(1u64 << 30).to_le_bytes(), hs + 0x48)
        .unwrap();
    drop(f);
    let (r, o) = verify_json(&img, "1MiB");
    assert_eq!(o.status.code(), Some(1), "{r:#}");
    let codes: Vec<&str> = r["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x["code"].as_str().unwrap())
        .collect();
    assert!(
        codes.contains(&"verity-hash-too-small") && codes.contains(&"verity-no-data"),
        "{codes:?}"
    );
}

/// Copies `len` bytes at `offset` of `img` into a sparse file (zero MiBs stay holes).
fn sparse_copy(img: &Path, offset: u64, len: u64, to: &Path) {
    let f = File::open(img).unwrap();
    let out = File::create(to).unwrap();
    out.set_len(len).unwrap();
    let mut buf = vec![0u8; 1 << 20];
    let mut done = 0u64;
    while done < len {
        let n = buf.len().min((len - done) as usize);
        f.read_exact_at(&mut buf[..n], offset + done).unwrap();
        if buf[..n].iter().any(|&b| b != 0) {
            out.write_all_at(&buf[..n], done).unwrap();
        }
        done += n as u64;
    }
}

/// The A/B and systemd-sysupdate examples (issue 28 item 4): EROFS system slots, each with a
/// dm-verity partition over the copy of its own slot. Every tree passes `veritysetup verify`
/// with the root hash of the build JSON and of `OUT.NAME.roothash`, and fails after one
/// flipped data byte; each slot is a clean EROFS with its own label and UUID whose mount shows
/// the example tree; verify pairs the slots, links each tree to its slot's data and agrees
/// with the build; two builds are byte-identical.
#[test]
fn example_system_slots_verify_with_veritysetup() {
    if !["fsck.erofs", "veritysetup", "blkid"]
        .iter()
        .all(|t| have(t))
    {
        return;
    }
    let dir = tempdir!();
    let examples = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples");
    for (name, trees) in [("ab-slots", 2usize), ("sysupdate", 1)] {
        let spec = examples.join(format!("{name}.toml"));
        let img = dir.path().join(format!("{name}.img"));
        let built = build_json(&spec, &img);
        let again = dir.path().join(format!("{name}-again.img"));
        build_json(&spec, &again);
        assert!(
            fs::read(&img).unwrap() == fs::read(&again).unwrap(),
            "{name}: two builds differ"
        );
        fs::remove_file(&again).unwrap();
        let (report, vo) = verify_json(&img, "8MiB");
        assert_eq!(vo.status.code(), Some(0), "{name}: {}", output_text(&vo));
        assert_eq!(report["aligned"], true, "{name}");
        assert_same_json(&built["partitions"], &report["partitions"], name);
        assert_eq!(report["slots"], built["slots"], "{name}");
        let parts = built["partitions"].as_array().unwrap();
        let by_index = |i: u64| {
            parts
                .iter()
                .find(|p| p["index"].as_u64() == Some(i))
                .unwrap()
        };
        let verity: Vec<&Value> = parts
            .iter()
            .filter(|p| p["filesystem"]["kind"] == "verity")
            .collect();
        assert_eq!(verity.len(), trees, "{name}");
        let mut uuids = Vec::new();
        for v in verity {
            let fs_ = &v["filesystem"];
            let data = by_index(fs_["of"].as_u64().unwrap());
            assert_eq!(data["filesystem"]["kind"], "erofs", "{name}");
            // The tree of slot a covers the data of slot a.
            assert_eq!(data["slot"], v["slot"], "{name}: {v:#}");
            let data_name = data["name"].as_str().unwrap();
            let root = fs_["root_hash"].as_str().unwrap().to_string();
            let file = if trees == 1 {
                format!("{name}.img.roothash")
            } else {
                format!("{name}.img.{data_name}.roothash")
            };
            let beside = fs::read_to_string(dir.path().join(file)).unwrap();
            assert_eq!(beside.trim(), root, "{name} {data_name}");
            let (ds, dl) = (
                data["start_bytes"].as_u64().unwrap(),
                data["size_bytes"].as_u64().unwrap(),
            );
            let (hs, hl) = (
                v["start_bytes"].as_u64().unwrap(),
                v["size_bytes"].as_u64().unwrap(),
            );
            let d = dir.path().join(format!("{data_name}.data"));
            let h = dir.path().join(format!("{data_name}.hash"));
            sparse_copy(&img, ds, dl, &d);
            sparse_copy(&img, hs, hl, &h);
            ok(&run("fsck.erofs", &[&d]), "fsck.erofs");
            let id = blockwise_test_kit::blkid(&img, ds);
            assert!(id.contains(&format!("LABEL={data_name}")), "{id}");
            uuids.push(
                id.lines()
                    .find(|l| l.starts_with("UUID="))
                    .unwrap()
                    .to_string(),
            );
            if is_root() && have_loop() {
                with_mount(&img, ds, dl, "erofs", &dir.path().join("mnt"), |m| {
                    assert_eq!(
                        fs::read(m.join("etc/os-release")).unwrap(),
                        fs::read(examples.join("ab/system/etc/os-release")).unwrap()
                    );
                });
            }
            let verify = |root: &str| {
                run(
                    "veritysetup",
                    &[
                        "verify",
                        &d.display().to_string(),
                        &h.display().to_string(),
                        root,
                    ],
                )
            };
            ok(
                &verify(&root),
                &format!("{name} {data_name}: veritysetup verify"),
            );
            let f = fs::OpenOptions::new()
                .read(true)
                .write(true)
                .open(&d)
                .unwrap();
            let mut b = [0u8; 1];
            f.read_exact_at(&mut b, 1024 + 7).unwrap();
            f.write_all_at(&[b[0] ^ 1], 1024 + 7).unwrap();
            drop(f);
            assert!(
                !verify(&root).status.success(),
                "{name} {data_name}: a flipped byte verifies"
            );
            fs::remove_file(&d).unwrap();
            fs::remove_file(&h).unwrap();
        }
        if trees == 2 {
            assert_ne!(uuids[0], uuids[1], "{name}: slots share an EROFS UUID");
            let roots: Vec<&str> = parts
                .iter()
                .filter_map(|p| p["filesystem"]["root_hash"].as_str())
                .collect();
            assert_ne!(roots[0], roots[1], "{name}: each slot has its own tree");
        }
        fs::remove_file(&img).unwrap();
    }
}
