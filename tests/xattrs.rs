//! Extended attributes of a contents tree: read from the source (no symlinks followed) into
//! ext4 by both backends, spec entries overriding them, one warning on FAT, and a clear error
//! when a node's attributes do not fit the inode plus one block.

use std::fs;
use std::path::{Path, PathBuf};

use blockwise_test_kit::{
    blockwise, debugfs, e2fsck_clean, fsck_fat_clean, have, is_root, oracles_required, run,
    tempdir, with_kernel_mount,
};

/// setfattr/getfattr (package attr) and setfacl (package acl) are needed; skipped without
/// them unless the oracles are required (CI).
fn tools() -> bool {
    let ok = have("setfattr") && have("getfattr") && have("setfacl");
    assert!(
        ok || !oracles_required(),
        "setfattr, getfattr and setfacl are required (apt-get install attr acl)"
    );
    if !ok {
        eprintln!("skipped: setfattr, getfattr or setfacl missing (apt-get install attr acl)");
    }
    ok
}

fn ok(o: &std::process::Output, what: &str) {
    assert!(
        o.status.success(),
        "{what}: {}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
}

fn setfattr(path: &Path, name: &str, value: &str) {
    ok(
        &run(
            "setfattr",
            &[
                "-n".as_ref(),
                name.as_ref(),
                "-v".as_ref(),
                value.as_ref(),
                path.as_os_str(),
            ],
        ),
        name,
    );
}

/// The tree: user.* on a file, a directory and the root, a 3000-byte value (spills into the
/// xattr block), POSIX ACLs (access and default), and as root security.capability and
/// trusted.*.
fn source(dir: &Path) -> PathBuf {
    let c = dir.join("c");
    fs::create_dir_all(c.join("bin")).unwrap();
    fs::create_dir_all(c.join("shared")).unwrap();
    fs::write(c.join("bin/ping"), b"\x7fELF not really\n").unwrap();
    fs::write(c.join("data.txt"), "data\n").unwrap();
    fs::write(c.join("big.txt"), "big\n").unwrap();
    fs::write(c.join("plain.txt"), "no attributes\n").unwrap();
    std::os::unix::fs::symlink("data.txt", c.join("link")).unwrap();
    setfattr(&c, "user.root", "top");
    setfattr(&c.join("data.txt"), "user.note", "from the tree");
    setfattr(&c.join("data.txt"), "user.kept", "0x00ff10");
    setfattr(&c.join("shared"), "user.dir", "a directory");
    setfattr(&c.join("big.txt"), "user.big", &"b".repeat(3000));
    setfattr(&c.join("big.txt"), "user.small", "s");
    ok(
        &run(
            "setfacl",
            &[
                "-m",
                "u:1000:r,g:100:rw",
                c.join("data.txt").to_str().unwrap(),
            ],
        ),
        "setfacl",
    );
    ok(
        &run(
            "setfacl",
            &["-d", "-m", "u:1000:rx", c.join("shared").to_str().unwrap()],
        ),
        "setfacl -d",
    );
    if is_root() {
        setfattr(&c.join("data.txt"), "trusted.t", "root only");
        if have("setcap") {
            ok(
                &run(
                    "setcap",
                    &["cap_net_raw+ep", c.join("bin/ping").to_str().unwrap()],
                ),
                "setcap",
            );
        } else {
            setfattr(
                &c.join("bin/ping"),
                "security.capability",
                "0x0100000200200000000000000000000000000000",
            );
        }
    }
    c
}

const PATHS: [&str; 7] = [
    "/",
    "/data.txt",
    "/shared",
    "/big.txt",
    "/bin/ping",
    "/plain.txt",
    "/link",
];

fn spec(dir: &Path, name: &str, fs_kind: &str, extra: &str) -> PathBuf {
    let p = dir.join(format!("{name}.toml"));
    // FAT takes no entries (they set what FAT cannot store).
    let entry = if fs_kind == "ext4" {
        "[[partition.entry]]\npath = \"/data.txt\"\nxattrs = { \"user.note\" = \"from the spec\" }\n"
    } else {
        ""
    };
    fs::write(
        &p,
        format!(
            "[image]\ntable = \"none\"\nsize = \"64MiB\"\ntimestamp = 1700000000\n\
             [[partition]]\nfs = \"{fs_kind}\"\nsize = \"fill\"\ncontents = \"c\"\n{extra}\n{entry}"
        ),
    )
    .unwrap();
    p
}

fn build(spec: &Path, out: &Path) -> std::process::Output {
    blockwise!().try_build(spec, out)
}

/// `getfattr -d -m - -e hex -h` of one path (names and values, without the `# file:` line).
fn getfattr(path: &Path) -> String {
    let o = run(
        "getfattr",
        &[
            "-d".as_ref(),
            "-m".as_ref(),
            "-".as_ref(),
            "-e".as_ref(),
            "hex".as_ref(),
            "-h".as_ref(),
            path.as_os_str(),
        ],
    );
    String::from_utf8_lossy(&o.stdout)
        .lines()
        .filter(|l| !l.starts_with("# file:") && !l.is_empty())
        .map(|l| format!("{l}\n"))
        .collect()
}

/// `debugfs ea_list` of every path, each path's lines sorted (the order inside an inode is
/// not part of the format).
fn ea_lists(img: &Path) -> String {
    PATHS
        .iter()
        .map(|p| {
            let text = debugfs(img, &format!("ea_list \"{p}\""));
            let mut lines: Vec<&str> = text.lines().collect();
            lines.sort_unstable();
            format!("{p}:\n{}\n", lines.join("\n"))
        })
        .collect()
}

#[test]
fn source_xattrs_reach_ext4_with_both_backends() {
    if !tools() {
        return;
    }
    let dir = tempdir!();
    let c = source(dir.path());
    let native = dir.path().join("native.img");
    let o = build(&spec(dir.path(), "native", "ext4", ""), &native);
    ok(&o, "native build");
    e2fsck_clean(&native, None);
    let mke2fs = dir.path().join("mke2fs.img");
    let o = build(
        &spec(dir.path(), "mke2fs", "ext4", "ext4.backend = \"mke2fs\""),
        &mke2fs,
    );
    ok(&o, "mke2fs build");
    e2fsck_clean(&mke2fs, None);

    let lists = ea_lists(&native);
    // The spec entry wins for its name; the tree's other attributes stay.
    assert!(
        lists.contains("user.note (13) = \"from the spec\""),
        "{lists}"
    );
    assert!(!lists.contains("from the tree"), "{lists}");
    assert!(lists.contains("user.kept (3) = 00 ff 10"), "{lists}");
    assert!(lists.contains("user.root (3) = \"top\""), "{lists}");
    assert!(lists.contains("user.dir (11)"), "{lists}");
    assert!(lists.contains("user.big (3000)"), "{lists}");
    assert!(lists.contains("system.posix_acl_access"), "{lists}");
    assert!(lists.contains("system.posix_acl_default"), "{lists}");
    if is_root() {
        assert!(lists.contains("trusted.t (9)"), "{lists}");
        assert!(lists.contains("security.capability (20)"), "{lists}");
    }
    // The same attributes as mke2fs -d (plus debugfs ea_set for the entry) stores.
    assert_eq!(lists, ea_lists(&mke2fs), "native vs mke2fs backend");
    println!("debugfs ea_list, native writer:\n{lists}");

    if !blockwise_test_kit::have_loop() {
        return;
    }
    // What the kernel reads back: the source's attributes, with the spec's override.
    setfattr(&c.join("data.txt"), "user.note", "from the spec");
    for img in [&native, &mke2fs] {
        let mnt = dir.path().join("mnt");
        with_kernel_mount(img, "ext4", &mnt, |m| {
            for p in PATHS {
                let rel = p.trim_start_matches('/');
                let (src, got) = (getfattr(&c.join(rel)), getfattr(&m.join(rel)));
                assert_eq!(got, src, "{p} in {}", img.display());
            }
            if have("getcap") {
                let caps = run("getcap", &[m.join("bin/ping")]);
                let text = String::from_utf8_lossy(&caps.stdout);
                assert!(text.contains("cap_net_raw=ep"), "getcap: {text}");
            }
            let acl = run("getfacl", &["-n", m.join("data.txt").to_str().unwrap()]);
            let text = String::from_utf8_lossy(&acl.stdout);
            assert!(
                text.contains("user:1000:r--") && text.contains("group:100:rw-"),
                "{text}"
            );
        });
    }
}

#[test]
fn fat_warns_once_about_xattrs() {
    if !tools() {
        return;
    }
    let dir = tempdir!();
    source(dir.path());
    let out = dir.path().join("fat.img");
    let o = build(&spec(dir.path(), "fat", "fat", ""), &out);
    ok(&o, "fat build");
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(err.matches("extended attributes").count(), 1, "{err}");
    assert!(err.contains("FAT cannot store them"), "{err}");
    fsck_fat_clean(&out);
}

#[test]
fn xattrs_larger_than_inode_and_block_are_refused() {
    let dir = tempdir!();
    let c = dir.path().join("c");
    fs::create_dir(&c).unwrap();
    fs::write(c.join("f"), "x").unwrap();
    let big = "v".repeat(3000);
    let sp = dir.path().join("big.toml");
    fs::write(
        &sp,
        format!(
            "[image]\ntable = \"none\"\nsize = \"64MiB\"\n[[partition]]\nfs = \"ext4\"\nsize = \"fill\"\n\
             contents = \"c\"\n[[partition.entry]]\npath = \"/f\"\n\
             xattrs = {{ \"user.a\" = \"{big}\", \"user.b\" = \"{big}\" }}\n"
        ),
    )
    .unwrap();
    let out = dir.path().join("big.img");
    let o = build(&sp, &out);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.contains("/f") && err.contains("do not fit the inode and one 4096-byte"),
        "{err}"
    );
    assert!(!out.exists());
}
