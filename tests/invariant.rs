//! Architecture invariant: verify(build(spec)) reproduces plan(spec) field for field, and a
//! freshly built image has no findings.

use std::path::Path;

use blockwise_test_kit::{assert_same_json as assert_same, blockwise, tempdir, write_file};
use serde_json::Value;

fn json(args: &[&std::ffi::OsStr]) -> (Value, std::process::Output) {
    let o = blockwise!().run(args);
    let v = serde_json::from_slice(&o.stdout).unwrap_or(Value::Null);
    (v, o)
}

fn check(dir: &Path, name: &str, spec: &str) {
    let spec_path = write_file(dir, &format!("{name}.toml"), spec);
    let img = dir.join(format!("{name}.img"));
    let (plan, o) = json(&[
        "build".as_ref(),
        spec_path.as_os_str(),
        "-o".as_ref(),
        img.as_os_str(),
        "--json".as_ref(),
    ]);
    assert!(
        o.status.success(),
        "{name}: build: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    // `plan` promises exactly what `build` does.
    let (planned, o) = json(&["plan".as_ref(), spec_path.as_os_str(), "--json".as_ref()]);
    assert!(
        o.status.success(),
        "{name}: plan: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert_eq!(
        planned["partitions"], plan["partitions"],
        "{name}: plan and build differ"
    );
    let eb = plan["erase_block_bytes"].to_string();
    let (report, o) = json(&[
        "verify".as_ref(),
        img.as_os_str(),
        "--json".as_ref(),
        "--erase-block".as_ref(),
        eb.as_ref(),
    ]);
    assert_eq!(
        o.status.code(),
        Some(0),
        "{name}: verify: {}\n{report:#}",
        String::from_utf8_lossy(&o.stderr)
    );
    let errors: Vec<&Value> = report["findings"]
        .as_array()
        // The one expected warning: 4096-byte FAT sectors on a 4Kn layout.
        .map(|f| {
            f.iter()
                .filter(|x| x["severity"] != "info" && x["code"] != "fat-sector-4096")
                .collect()
        })
        .unwrap_or_default();
    assert!(
        errors.is_empty(),
        "{name}: a fresh image has findings: {errors:#?}"
    );
    assert_eq!(report["aligned"], true, "{name}");
    // One verdict from one rule: plan and verify agree.
    assert_eq!(
        plan["aligned"], report["aligned"],
        "{name}: plan and verify verdicts differ"
    );
    for k in ["size_bytes", "sector_bytes", "erase_block_bytes"] {
        assert_eq!(plan[k], report[k], "{name}: {k}");
    }
    assert_eq!(plan["table"]["kind"], report["table"]["kind"], "{name}");
    assert_same(&plan["partitions"], &report["partitions"], name);
}

#[test]
fn verify_reproduces_plan() {
    let dir = tempdir!();
    let d = dir.path();
    std::fs::create_dir_all(d.join("tree/sub")).unwrap();
    std::fs::write(d.join("tree/hello.txt"), "hello\n").unwrap();
    std::fs::write(d.join("tree/sub/data.bin"), vec![7u8; 100_000]).unwrap();
    check(
        d,
        "rpi",
        r#"
[image]
size = "1GiB"
[[partition]]
fs = "fat32"
size = "256MiB"
contents = "tree"
label = "BOOT"
[[partition]]
fs = "ext4"
size = "fill"
contents = "tree"
label = "root"
"#,
    );
    // One erase block of ext4: no room for an aligned inode table (a note, not a verdict).
    // genimage parity: extended partition in entry 2, a forced primary after the logical
    // ones (entry 3), native ext2/ext3 and an inode ratio; sfdisk reads the same table.
    check(
        d,
        "ext23-logical",
        r#"
[image]
erase-block = "1MiB"
extended-partition = 2
[[partition]]
fs = "ext2"
size = "8MiB"
contents = "tree"
ext4 = { inode-ratio = 8192 }
[[partition]]
fs = "ext3"
size = "16MiB"
contents = "tree"
[[partition]]
fs = "ext4"
size = "8MiB"
ext4 = { inode-ratio = 65536 }
[[partition]]
fs = "fat16"
size = "16MiB"
primary = true
"#,
    );
    let sf = blockwise_test_kit::run(
        "sfdisk",
        &["-d".as_ref(), d.join("ext23-logical.img").as_os_str()],
    );
    let sf = String::from_utf8_lossy(&sf.stdout).into_owned();
    for want in [
        "img1 : start=        2048, size=       16384, type=83",
        "img2 : start=       18432, size=       53248, type=f",
        "img3 : start=       71680, size=       32768, type=e",
        "img5 : start=       20480, size=       32768, type=83",
        "img6 : start=       55296, size=       16384, type=83",
    ] {
        if blockwise_test_kit::have("sfdisk") {
            assert!(sf.contains(want), "{want}\n{sf}");
        }
    }
    check(
        d,
        "small-ext4",
        "[image]\nsize = \"10MiB\"\n[[partition]]\nfs = \"ext4\"\nsize = \"fill\"\n",
    );
    let many = d.join("many");
    std::fs::create_dir_all(&many).unwrap();
    // 10,000 empty files: more inodes than the default one per 4 KiB of a small filesystem.
    for i in 0..10_000 {
        std::fs::write(many.join(format!("f{i}")), "").unwrap();
    }
    check(
        d,
        "inodes",
        r#"
[image]
erase-block = "1MiB"
[[partition]]
fs = "ext4"
size = "32MiB"
contents = "many"
"#,
    );
    check(
        d,
        "gpt4k",
        r#"
[image]
size = "2GiB"
table = "gpt"
sector-size = 4096
erase-block = "8MiB"
[[partition]]
fs = "fat32"
type = "esp"
size = "512MiB"
[[partition]]
fs = "ext4"
size = "fill"
"#,
    );
    check(
        d,
        "usb",
        r#"
[image]
size = "8GiB"
erase-block = "128KiB"
first-partition = "128KiB"
[[partition]]
fs = "fat32"
size = "fill"
fat = { cluster = "64KiB" }
"#,
    );
    check(
        d,
        "bare",
        r#"
[image]
table = "none"
erase-block = "1MiB"
[[partition]]
fs = "fat16"
size = "64MiB"
contents = "tree"
"#,
    );
    check(
        d,
        "exfat",
        r#"
[image]
size = "2GiB"
erase-block = "4MiB"
[[partition]]
fs = "exfat"
size = "fill"
contents = "tree"
label = "CARD"
exfat = { cluster = "64KiB", boundary = "8MiB" }
"#,
    );
    let mut many = String::from("[image]\nerase-block = \"1MiB\"\n");
    for fs in ["fat16", "ext4", "none", "fat32", "ext4", "none"] {
        let size = if fs == "fat32" { "300MiB" } else { "64MiB" };
        many.push_str(&format!(
            "[[partition]]\nfs = \"{fs}\"\nsize = \"{size}\"\n"
        ));
    }
    check(d, "logical", &many);
}
