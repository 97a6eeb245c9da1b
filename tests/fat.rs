//! FAT through the `blockwise` CLI: `plan --json` geometry, `build` of MBR, GPT and bare FAT
//! images from a `contents` directory, checked with fsck.fat, mtools and blkid.

use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use blockwise_test_kit::{
    assert_same_tree, blkid, blockwise, fsck_fat_clean, fsck_number, have, mcopy_out, tempdir,
    write_file,
};

const MIB: u64 = 1 << 20;

/// A small host tree with nested dirs, long and unicode names, an empty file and an
/// empty directory.
fn contents(dir: &Path) -> PathBuf {
    let root = dir.join("boot");
    std::fs::create_dir_all(root.join("overlays/deeper")).unwrap();
    std::fs::create_dir_all(root.join("empty dir")).unwrap();
    std::fs::write(root.join("config.txt"), "arm_64bit=1\n").unwrap();
    std::fs::write(
        root.join("Kernel Image With A Long Name.img"),
        vec![0x5a; 300_000],
    )
    .unwrap();
    std::fs::write(root.join("überraschung.txt"), "ü\n").unwrap();
    std::fs::write(root.join("zero.bin"), b"").unwrap();
    for i in 0..40 {
        std::fs::write(
            root.join(format!("overlays/overlay-{i}.dtbo")),
            format!("{i}").repeat(i + 1),
        )
        .unwrap();
    }
    std::fs::write(root.join("overlays/deeper/README"), "deep\n").unwrap();
    root
}

fn json(args: &[&str]) -> serde_json::Value {
    let o = blockwise!().run(args);
    assert!(
        o.status.success(),
        "blockwise {args:?} failed: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    serde_json::from_slice(&o.stdout)
        .unwrap_or_else(|e| panic!("bad JSON ({e}): {}", String::from_utf8_lossy(&o.stdout)))
}

fn fs_of(plan: &serde_json::Value, index: usize) -> (u64, u64, serde_json::Value) {
    let p = &plan["partitions"][index];
    (
        p["start_bytes"].as_u64().expect("start_bytes"),
        p["size_bytes"].as_u64().expect("size_bytes"),
        p["filesystem"].clone(),
    )
}

/// Copies `[start, start + len)` of `image` into its own (sparse) file, for fsck.fat.
fn extract(image: &Path, start: u64, len: u64, out: &Path) {
    let src = std::fs::File::open(image).unwrap();
    let dst = std::fs::File::create(out).unwrap();
    dst.set_len(len).unwrap();
    let mut buf = vec![0u8; 4 << 20];
    let mut pos = 0;
    while pos < len {
        let n = (len - pos).min(buf.len() as u64) as usize;
        src.read_exact_at(&mut buf[..n], start + pos).unwrap();
        if buf[..n].iter().any(|&b| b != 0) {
            dst.write_all_at(&buf[..n], pos).unwrap();
        }
        pos += n as u64;
    }
}

/// Builds `spec_text` (with `contents = "boot/"`) and checks partition `index`: plan and
/// image agree, fsck is clean, alignment holds, mcopy round trip, blkid label.
fn build_and_check(spec_text: &str, index: usize, e: u64) -> serde_json::Value {
    let dir = tempdir!();
    let src = contents(dir.path());
    let spec = write_file(dir.path(), "spec.toml", spec_text);
    let plan = json(&["plan", spec.to_str().unwrap(), "--json"]);
    let (start, size, fs) = fs_of(&plan, index);
    assert!(fs["kind"].as_str().unwrap().starts_with("fat"), "{fs}");
    assert_eq!(fs["aligned"], true, "{fs}");
    let data = fs["data_start_bytes"].as_u64().unwrap();
    let fat = fs["fat_start_bytes"].as_u64().unwrap();
    assert_eq!(data % e, 0, "{fs}");
    assert_eq!(fat % e, 0, "{fs}");

    let img = dir.path().join("out.img");
    blockwise!().build(&spec, &img);
    if have("fsck.fat") {
        let part = dir.path().join("part.img");
        extract(&img, start, size, &part);
        let out = fsck_fat_clean(&part);
        assert_eq!(start + fsck_number(&out, "First FAT starts at byte"), fat);
        assert_eq!(start + fsck_number(&out, "Data area starts at byte"), data);
        let sector = fs["sector_bytes"].as_u64().unwrap();
        assert!(
            out.contains(&format!(" {sector} bytes per logical sector")),
            "{out}"
        );
    }
    if have("mcopy") && have("diff") {
        let out = dir.path().join("out");
        mcopy_out(&img, start, &out);
        assert_same_tree(&src, &out, &[]);
    }
    if have("blkid") {
        let b = blkid(&img, start);
        assert!(b.contains("TYPE=vfat"), "{b}");
        if let Some(label) = fs["label"].as_str() {
            assert!(b.contains(&format!("LABEL={label}")), "{b}");
        }
    }
    // Two builds are byte-identical.
    let img2 = dir.path().join("again.img");
    blockwise!().build(&spec, &img2);
    assert!(
        std::fs::read(&img).unwrap() == std::fs::read(&img2).unwrap(),
        "two builds differ"
    );
    plan
}

#[test]
fn fat32_in_mbr_from_contents() {
    build_and_check(
        r#"
[image]
size = "600MiB"
erase-block = "4MiB"
table = "mbr"
[[partition]]
fs = "fat32"
size = "512MiB"
label = "BOOTFS"
contents = "boot/"
"#,
        0,
        4 * MIB,
    );
}

#[test]
fn fat32_4096_byte_sectors_in_gpt_warns_about_firmware() {
    let plan = build_and_check(
        r#"
[image]
size = "400MiB"
erase-block = "1MiB"
sector-size = 4096
table = "gpt"
[[partition]]
fs = "fat32"
size = "300MiB"
type = "esp"
label = "ESP"
contents = "boot/"
"#,
        0,
        MIB,
    );
    let fs = &plan["partitions"][0]["filesystem"];
    assert_eq!(fs["sector_bytes"], 4096);
    let notes = fs["notes"].to_string();
    assert!(notes.contains("U-Boot"), "{notes}");
}

#[test]
fn fat16_and_auto_type_with_small_erase_block() {
    let plan = build_and_check(
        r#"
[image]
size = "200MiB"
erase-block = "128KiB"
first-partition = "128KiB"
[[partition]]
fs = "fat"
size = "64MiB"
label = "small"
contents = "boot/"
[[partition]]
fs = "fat16"
size = "fill"
fat = { cluster = "16KiB" }
contents = "boot/"
"#,
        1,
        128 << 10,
    );
    assert_eq!(plan["partitions"][0]["filesystem"]["kind"], "fat16");
    // Kept as given, like mkfs.fat 4.2.
    assert_eq!(plan["partitions"][0]["filesystem"]["label"], "small");
    assert_eq!(plan["partitions"][1]["filesystem"]["cluster_bytes"], 16384);
}

#[test]
fn bare_fat_image() {
    build_and_check(
        r#"
[image]
size = "256MiB"
erase-block = "4MiB"
table = "none"
[[partition]]
fs = "fat32"
size = "fill"
label = "BARE"
contents = "boot/"
fat = { cluster = "1KiB" }
"#,
        0,
        4 * MIB,
    );
}

/// A lowercase label is kept as given, like mkfs.fat 4.2: blkid reads the same label from the
/// boot sector and the root directory entry, fsck.fat is clean, and the build says nothing
/// about it (pi-gen's `bootfs` is the norm; issue 32).
#[test]
fn lowercase_labels_keep_their_case_without_a_warning() {
    if !have("blkid") || !have("fsck.fat") {
        return;
    }
    let dir = tempdir!();
    let spec = write_file(
        dir.path(),
        "s.toml",
        "[image]\nsize = \"64MiB\"\ntable = \"none\"\n[[partition]]\nfs = \"fat16\"\nsize = \"fill\"\nlabel = \"bootfs\"\n",
    );
    let img = dir.path().join("s.img");
    let o = blockwise!().build_with(&spec, &img, ["-q"]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success() && err.is_empty(), "{err}");
    let ids = blkid(&img, 0);
    assert!(
        ids.lines().any(|l| l == "LABEL=bootfs")
            && ids.lines().any(|l| l == "LABEL_FATBOOT=bootfs"),
        "{ids}"
    );
    fsck_fat_clean(&img);
}

#[test]
fn impossible_fat_requests_say_what_to_change() {
    let dir = tempdir!();
    let spec = write_file(
        dir.path(),
        "bad.toml",
        "[image]\nsector-size = 4096\n[[partition]]\nfs = \"fat32\"\nsize = \"200MiB\"\n",
    );
    let out = dir.path().join("out.img");
    let o = blockwise!().run([
        "build".as_ref(),
        spec.as_os_str(),
        "-o".as_ref(),
        out.as_os_str(),
    ]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains("partition[1].size"), "{err}");
    assert!(
        err.contains("fat32 with 4096-byte sectors needs at least"),
        "{err}"
    );
    assert!(err.contains("use fat16"), "{err}");
    assert!(!err.contains("panicked"), "{err}");
    assert!(!out.exists());
}

#[test]
fn case_conflicts_fail_the_build_naming_both_files() {
    let dir = tempdir!();
    let root = dir.path().join("c");
    std::fs::create_dir_all(&root).unwrap();
    std::fs::write(root.join("Readme.txt"), "a").unwrap();
    std::fs::write(root.join("README.TXT"), "b").unwrap();
    let spec = write_file(
        dir.path(),
        "spec.toml",
        "[image]\n[[partition]]\nfs = \"fat32\"\nsize = \"512MiB\"\ncontents = \"c/\"\n",
    );
    let out = dir.path().join("out.img");
    let o = blockwise!().run([
        "build".as_ref(),
        spec.as_os_str(),
        "-o".as_ref(),
        out.as_os_str(),
    ]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_ne!(o.status.code(), Some(0), "{err}");
    assert!(
        err.contains("/README.TXT") && err.contains("/Readme.txt"),
        "{err}"
    );
    assert!(!err.contains("panicked"), "{err}");
}

#[test]
fn symlinks_are_skipped_with_a_warning() {
    let dir = tempdir!();
    let root = dir.path().join("c");
    std::fs::create_dir_all(&root).unwrap();
    std::fs::write(root.join("a.txt"), "a").unwrap();
    std::os::unix::fs::symlink("a.txt", root.join("link")).unwrap();
    let spec = write_file(
        dir.path(),
        "spec.toml",
        "[image]\n[[partition]]\nfs = \"fat32\"\nsize = \"512MiB\"\ncontents = \"c/\"\n",
    );
    let out = dir.path().join("out.img");
    let o = blockwise!().run([
        "build".as_ref(),
        spec.as_os_str(),
        "-o".as_ref(),
        out.as_os_str(),
    ]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(0), "{err}");
    assert!(
        err.contains("/link") && err.contains("FAT cannot store symlinks"),
        "{err}"
    );
    if have("mcopy") {
        let plan = json(&["plan", spec.to_str().unwrap(), "--json"]);
        let (start, _, _) = fs_of(&plan, 0);
        let src = dir.path().join("want");
        std::fs::create_dir_all(&src).unwrap();
        std::fs::write(src.join("a.txt"), "a").unwrap();
        let copied = dir.path().join("copied");
        mcopy_out(&out, start, &copied);
        assert_same_tree(&src, &copied, &[]);
    }
}
