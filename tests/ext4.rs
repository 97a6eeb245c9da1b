//! CLI-level ext4 tests: `blockwise build SPEC -o OUT.img` with ext4 partitions, checked with
//! e2fsck, debugfs, dumpe2fs and the kernel (loop mount, as root); native and mke2fs
//! backends compared through debugfs.

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use blockwise_test_kit::{
    assert_same_tree, blockwise, command, debugfs, e2fsck_clean, have, have_loop, tempdir,
    with_kernel_mount,
};

/// A small contents directory: nested files, empty file, fast and slow symlinks, hard link.
fn make_contents(dir: &Path) {
    fs::create_dir_all(dir.join("etc/ssh")).unwrap();
    fs::create_dir_all(dir.join("usr/share/doc")).unwrap();
    fs::write(dir.join("etc/hostname"), "blockwise\n").unwrap();
    fs::write(dir.join("etc/shadow"), "root:*:19000:0:99999:7:::\n").unwrap();
    fs::write(dir.join("etc/empty"), "").unwrap();
    fs::write(
        dir.join("etc/ssh/sshd_config"),
        "PermitRootLogin no\n".repeat(200),
    )
    .unwrap();
    let big: Vec<u8> = (0..3_000_000u32)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 24) as u8)
        .collect();
    fs::write(dir.join("usr/share/doc/big.bin"), &big).unwrap();
    fs::hard_link(
        dir.join("usr/share/doc/big.bin"),
        dir.join("usr/share/doc/big-link.bin"),
    )
    .unwrap();
    std::os::unix::fs::symlink("hostname", dir.join("etc/fast")).unwrap();
    std::os::unix::fs::symlink(
        "../".repeat(30) + "usr/share/doc/big.bin",
        dir.join("etc/slow"),
    )
    .unwrap();
    fs::set_permissions(dir.join("etc/shadow"), fs::Permissions::from_mode(0o600)).unwrap();
    for i in 0..300 {
        fs::write(
            dir.join("usr/share/doc").join(format!("page-{i:03}.txt")),
            format!("{i}\n"),
        )
        .unwrap();
    }
}

fn spec_text(backend: &str, table: &str, extra_ext4: &str, size: &str) -> String {
    format!(
        r#"
[image]
erase-block = "4MiB"
table = "{table}"
seed = 11
timestamp = 1700000000

[[partition]]
fs = "ext4"
size = "{size}"
label = "rootfs"
contents = "root/"
ext4 = {{ backend = "{backend}"{extra_ext4} }}

[[partition.entry]]
path = "/etc/shadow"
mode = "0640"
uid = 0
gid = 42

[[partition.entry]]
path = "/dev/console"
kind = "char"
major = 5
minor = 1
mode = "0600"

[[partition.entry]]
path = "/dev/sda"
kind = "block"
major = 8
minor = 0

[[partition.entry]]
path = "/run/initctl"
kind = "fifo"
mode = "0600"

[[partition.entry]]
path = "/usr/bin/ping"
kind = "file"
mode = "0755"
xattrs = {{ "security.capability" = "0x0100000200200000000000000000000000000000" }}
"#
    )
}

/// Writes contents + spec under `d` and builds; returns the image path.
fn build(d: &Path, name: &str, spec: &str) -> PathBuf {
    let root = d.join("root");
    if !root.exists() {
        make_contents(&root);
    }
    blockwise!().build_spec(d, name, spec)
}

/// The ext4 partition of a built image as a file of its own (bare images are used as is).
fn partition_file(d: &Path, name: &str, img: &Path) -> PathBuf {
    let sp = d.join(format!("{name}.toml"));
    let o = blockwise!().run(["plan".as_ref(), sp.as_os_str(), "--json".as_ref()]);
    assert!(
        o.status.success(),
        "plan: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("plan --json");
    let p = &v["partitions"][0];
    let start = p["start_bytes"].as_u64().unwrap();
    let size = p["size_bytes"].as_u64().unwrap();
    if start == 0 {
        return img.to_path_buf();
    }
    let out = d.join(format!("{name}.part"));
    let o = command("dd")
        .arg(format!("if={}", img.display()))
        .arg(format!("of={}", out.display()))
        .args([
            "bs=1M",
            "conv=sparse",
            "status=none",
            "iflag=skip_bytes,count_bytes",
        ])
        .arg(format!("skip={start}"))
        .arg(format!("count={size}"))
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "dd: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    out
}

/// What the trees compared with the contents directory leave out: lost+found, and the entries
/// the spec adds (device nodes, the fifo, the capability file).
const SKIPPED: &[&str] = &["lost+found", "dev", "run", "bin"];

fn rdump(part: &Path, out: &Path) {
    fs::create_dir_all(out).unwrap();
    debugfs(part, &format!("rdump / {}", out.display()));
}

/// `stat` fields that must not depend on the backend.
fn stat_summary(part: &Path, path: &str) -> String {
    let st = debugfs(part, &format!("stat {path}"));
    st.lines()
        .filter_map(|l| {
            let l = l.trim();
            if l.starts_with("Inode:") {
                l.find("Type:").map(|i| {
                    l[i..]
                        .split("Flags")
                        .next()
                        .unwrap_or("")
                        .split_whitespace()
                        .collect::<Vec<_>>()
                        .join(" ")
                })
            } else if l.starts_with("User:") {
                Some(
                    l.split("Project")
                        .next()
                        .unwrap_or("")
                        .split_whitespace()
                        .collect::<Vec<_>>()
                        .join(" ")
                        + " "
                        + l.split("Size:").nth(1).unwrap_or("").trim(),
                )
            } else if l.starts_with("Links:") {
                l.split("Blockcount").next().map(|s| s.trim().to_string())
            } else if l.starts_with("Device major/minor") {
                Some(l.to_string())
            } else {
                None
            }
        })
        .collect::<Vec<_>>()
        .join(" | ")
}

#[test]
fn native_build_passes_e2fsck_debugfs_dumpe2fs() {
    if !have("e2fsck") || !have("debugfs") || !have("dumpe2fs") {
        return;
    }
    let d = tempdir!();
    let img = build(
        d.path(),
        "native",
        &spec_text("native", "gpt", "", "256MiB"),
    );
    let part = partition_file(d.path(), "native", &img);
    e2fsck_clean(&part, Some("rootfs"));
    let out = d.path().join("native-out");
    rdump(&part, &out);
    assert_same_tree(&d.path().join("root"), &out, SKIPPED);
    let s = stat_summary(&part, "/etc/shadow");
    assert!(
        s.contains("Mode: 0640") && s.contains("User: 0 Group: 42"),
        "{s}"
    );
    let s = stat_summary(&part, "/usr/share/doc/big.bin");
    assert!(s.contains("Links: 2") && s.contains("3000000"), "{s}");
    let s = stat_summary(&part, "/dev/console");
    assert!(
        s.contains("character special") && s.contains("05:01"),
        "{s}"
    );
    let s = stat_summary(&part, "/dev/sda");
    assert!(s.contains("block special") && s.contains("08:00"), "{s}");
    let s = stat_summary(&part, "/run/initctl");
    assert!(s.contains("FIFO"), "{s}");
    let ea = debugfs(&part, "ea_list /usr/bin/ping");
    assert!(ea.contains("security.capability"), "{ea}");
    let h = command("dumpe2fs").arg("-h").arg(&part).output().unwrap();
    let h = String::from_utf8_lossy(&h.stdout);
    assert!(h.contains("RAID stride:              1024"), "{h}");
    assert!(h.contains("RAID stripe width:        1024"), "{h}");
    assert!(h.contains("Filesystem volume name:   rootfs"), "{h}");
    assert!(
        h.contains("metadata_csum") && h.contains("64bit") && h.contains("has_journal"),
        "{h}"
    );
    // The plan's UUID is what dumpe2fs shows.
    let o = blockwise!().run([
        "plan".as_ref(),
        d.path().join("native.toml").as_os_str(),
        "--json".as_ref(),
    ]);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let fsj = &v["partitions"][0]["filesystem"];
    assert_eq!(fsj["block_bytes"], 4096);
    assert_eq!(fsj["stride"], 1024);
    assert_eq!(fsj["stripe_width"], 1024);
    assert_eq!(fsj["aligned"], true);
    if let Some(u) = fsj["uuid"].as_str() {
        assert!(
            h.to_lowercase().contains(&u.to_lowercase()),
            "uuid {u} not in {h}"
        );
    }
    for k in ["journal_start_bytes", "inode_table_start_bytes"] {
        let off = fsj[k]
            .as_u64()
            .unwrap_or_else(|| panic!("{k} missing: {fsj}"));
        assert_eq!(off % (4 << 20), 0, "{k} = {off} is not erase-block aligned");
    }
    // Same spec, same bytes.
    let again = build(
        d.path(),
        "native-again",
        &spec_text("native", "gpt", "", "256MiB"),
    );
    assert!(
        fs::read(&img).unwrap() == fs::read(&again).unwrap(),
        "two builds differ"
    );
}

#[test]
fn compat_and_no_journal_profiles() {
    if !have("e2fsck") || !have("dumpe2fs") {
        return;
    }
    let d = tempdir!();
    let img = build(
        d.path(),
        "compat",
        &spec_text(
            "native",
            "none",
            r#", profile = "compat", journal = false, block-size = 1024"#,
            "96MiB",
        ),
    );
    let part = partition_file(d.path(), "compat", &img);
    e2fsck_clean(&part, Some("rootfs"));
    let h = command("dumpe2fs").arg("-h").arg(&part).output().unwrap();
    let h = String::from_utf8_lossy(&h.stdout);
    let feats = h
        .lines()
        .find(|l| l.starts_with("Filesystem features:"))
        .unwrap_or("")
        .to_string();
    assert!(
        !feats.contains("metadata_csum")
            && !feats.contains("64bit")
            && !feats.contains("has_journal"),
        "{feats}"
    );
    assert!(h.contains("Block size:               1024"), "{h}");
}

#[test]
fn too_small_partition_says_how_much_more() {
    let d = tempdir!();
    let root = d.path().join("root");
    make_contents(&root);
    let sp = d.path().join("small.toml");
    fs::write(&sp, spec_text("native", "none", "", "4MiB")).unwrap();
    let o = blockwise!().run([
        "build".as_ref(),
        sp.as_os_str(),
        "-o".as_ref(),
        d.path().join("x.img").as_os_str(),
    ]);
    assert_eq!(
        o.status.code(),
        Some(2),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("more blocks"), "{err}");
    assert!(!err.contains("panicked"), "{err}");
}

#[test]
fn native_and_mke2fs_backends_agree() {
    if !have("mke2fs") || !have("debugfs") || !have("e2fsck") {
        return;
    }
    let d = tempdir!();
    // Sockets cannot be made by debugfs; the spec has none.
    let a = build(d.path(), "n", &spec_text("native", "gpt", "", "256MiB"));
    let b = build(d.path(), "m", &spec_text("mke2fs", "gpt", "", "256MiB"));
    let pa = partition_file(d.path(), "n", &a);
    let pb = partition_file(d.path(), "m", &b);
    e2fsck_clean(&pa, Some("rootfs"));
    e2fsck_clean(&pb, Some("rootfs"));
    let (oa, ob) = (d.path().join("n-out"), d.path().join("m-out"));
    rdump(&pa, &oa);
    rdump(&pb, &ob);
    assert_same_tree(&oa, &ob, SKIPPED);
    for p in [
        "/etc/shadow",
        "/etc/hostname",
        "/etc/empty",
        "/etc/fast",
        "/etc/slow",
        "/usr/share/doc/big.bin",
        "/dev/console",
        "/dev/sda",
        "/run/initctl",
        "/usr/bin/ping",
    ] {
        assert_eq!(stat_summary(&pa, p), stat_summary(&pb, p), "{p}");
    }
    assert!(debugfs(&pb, "ea_list /usr/bin/ping").contains("security.capability"));
    // The mke2fs backend is deterministic too (pinned UUID, hash seed and times).
    let b2 = build(d.path(), "m2", &spec_text("mke2fs", "gpt", "", "256MiB"));
    assert!(
        fs::read(&b).unwrap() == fs::read(&b2).unwrap(),
        "two mke2fs builds differ"
    );
}

#[test]
fn kernel_mounts_the_built_image() {
    if !have("e2fsck") || !have_loop() {
        return;
    }
    let d = tempdir!();
    let img = build(d.path(), "k", &spec_text("native", "none", "", "128MiB"));
    with_kernel_mount(&img, "ext4", &d.path().join("mnt"), |mnt| {
        assert_same_tree(&d.path().join("root"), mnt, SKIPPED);
        let st = command("stat")
            .args(["-c", "%a %u %g %F %t:%T"])
            .arg(mnt.join("dev/console"))
            .output()
            .unwrap();
        assert_eq!(
            String::from_utf8_lossy(&st.stdout).trim(),
            "600 0 0 character special file 5:1"
        );
    });
}
