//! What board layouts need (issue 17): pinned IDs, explicit starts, partitions left out of
//! the table, raw writes at fixed offsets (bootloaders) and swap — each checked with the
//! real tools (`sfdisk --json`, `blkid -p`, `dumpe2fs -h`, `sgdisk -v`, `mkswap`).

use std::path::Path;

use blockwise_test_kit::{blkid, blockwise, have, run, sfdisk_json, tempdir, write_file};

const MIB: u64 = 1 << 20;

fn stdout(o: &std::process::Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &std::process::Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// `blockwise build` of `spec` that must fail with exit 2 and `needle` on stderr.
fn build_fails(dir: &Path, spec: &str, needle: &str) {
    let spec_path = write_file(dir, "bad.toml", spec);
    let out = dir.join("bad.img");
    let o = blockwise!().run([
        "build".as_ref(),
        spec_path.as_os_str(),
        "-o".as_ref(),
        out.as_os_str(),
    ]);
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(2), "{spec}\nstderr: {err}");
    assert!(err.contains(needle), "{needle:?} not in {err:?}");
    assert!(!out.exists());
}

/// `blockwise plan --json SPEC`, parsed.
fn plan_json(spec: &Path) -> serde_json::Value {
    let o = blockwise!().run(["plan".as_ref(), "--json".as_ref(), spec.as_os_str()]);
    assert!(o.status.success(), "{}", stderr(&o));
    serde_json::from_slice(&o.stdout).unwrap()
}

/// `blockwise verify --json IMG` (exit status not checked), parsed.
fn verify_json(img: &Path) -> serde_json::Value {
    let o = blockwise!().run(["verify".as_ref(), "--json".as_ref(), img.as_os_str()]);
    serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("{e}: {}", stderr(&o)))
}

fn blkid_value(out: &str, key: &str) -> Option<String> {
    out.lines()
        .find_map(|l| l.strip_prefix(&format!("{key}=")))
        .map(str::to_string)
}

#[test]
fn pinned_ids_reach_the_table_and_the_filesystems() {
    if !(have("sfdisk") && have("blkid") && have("dumpe2fs")) {
        return;
    }
    let dir = tempdir!();
    let img = blockwise!().build_spec(
        dir.path(),
        "ids",
        r#"
[image]
size = "64MiB"
table = "gpt"
disk-id = "11111111-2222-4333-8444-555555555555"

[[partition]]
fs = "fat32"
size = "36MiB"
label = "BOOT"
uuid = "aaaaaaaa-bbbb-4ccc-8ddd-eeeeeeeeeeee"
volume-id = "1234-ABCD"

[[partition]]
fs = "ext4"
size = "fill"
uuid = "{0FC63DAF-8483-4772-8E79-3D69D8477DE5}"
fs-uuid = "01234567-89ab-4cde-8f01-23456789abcd"
"#,
    );
    let t = sfdisk_json(&img);
    let pt = &t["partitiontable"];
    assert_eq!(pt["id"], "11111111-2222-4333-8444-555555555555");
    assert_eq!(
        pt["partitions"][0]["uuid"],
        "AAAAAAAA-BBBB-4CCC-8DDD-EEEEEEEEEEEE"
    );
    assert_eq!(
        pt["partitions"][1]["uuid"],
        "0FC63DAF-8483-4772-8E79-3D69D8477DE5"
    );
    let fat = blkid(&img, 4 * MIB);
    assert_eq!(blkid_value(&fat, "UUID").as_deref(), Some("1234-ABCD"), "{fat}");
    let ext_start = pt["partitions"][1]["start"].as_u64().unwrap() * 512;
    let ext = blkid(&img, ext_start);
    assert_eq!(
        blkid_value(&ext, "UUID").as_deref(),
        Some("01234567-89ab-4cde-8f01-23456789abcd"),
        "{ext}"
    );
    // dumpe2fs reads the superblock of the partition (extracted).
    let part = dir.path().join("p2.img");
    let bytes = std::fs::read(&img).unwrap();
    std::fs::write(&part, &bytes[ext_start as usize..]).unwrap();
    let o = run("dumpe2fs", &["-h".as_ref(), part.as_os_str()]);
    let text = stdout(&o);
    assert!(
        text.contains("Filesystem UUID:          01234567-89ab-4cde-8f01-23456789abcd"),
        "{text}"
    );
    blockwise_test_kit::e2fsck_clean(&part, None);
    blockwise_test_kit::fsck_fat_clean(&{
        let p = dir.path().join("p1.img");
        std::fs::write(&p, &bytes[(4 * MIB) as usize..(40 * MIB) as usize]).unwrap();
        p
    });

    // The MBR disk ID and a hex volume ID.
    let img = blockwise!().build_spec(
        dir.path(),
        "mbr",
        "[image]\nsize = \"48MiB\"\ndisk-id = \"0xdeadbeef\"\n[[partition]]\nfs = \"fat16\"\nsize = \"fill\"\nvolume-id = \"0x0badf00d\"\n",
    );
    assert_eq!(sfdisk_json(&img)["partitiontable"]["id"], "0xdeadbeef");
    let fat = blkid(&img, 4 * MIB);
    assert_eq!(blkid_value(&fat, "UUID").as_deref(), Some("0BAD-F00D"), "{fat}");
}

#[test]
fn pinned_ids_are_validated_naming_the_key() {
    let dir = tempdir!();
    let d = dir.path();
    let gpt = "[image]\nsize = \"64MiB\"\ntable = \"gpt\"\n[[partition]]\nfs = \"none\"\nsize = \"4MiB\"\n";
    build_fails(
        d,
        &format!("{gpt}[[partition]]\nfs = \"ext4\"\nsize = \"8MiB\"\nfs-uuid = \"xyz\"\n"),
        "partition[2].fs-uuid: \"xyz\" is not a UUID",
    );
    build_fails(
        d,
        &format!("{gpt}[[partition]]\nfs = \"ext4\"\nsize = \"8MiB\"\nuuid = \"1234\"\n"),
        "partition[2].uuid: \"1234\" is not a UUID",
    );
    build_fails(
        d,
        &format!("{gpt}[[partition]]\nfs = \"fat32\"\nsize = \"36MiB\"\nvolume-id = \"12345-ABCD\"\n"),
        "partition[2].volume-id: \"12345-ABCD\" is not a FAT volume ID",
    );
    build_fails(
        d,
        &format!("{gpt}[[partition]]\nfs = \"fat32\"\nsize = \"36MiB\"\nfs-uuid = \"01234567-89ab-4cde-8f01-23456789abcd\"\n"),
        "partition[2].fs-uuid: FAT has no UUID",
    );
    build_fails(
        d,
        &format!("{gpt}[[partition]]\nfs = \"ext4\"\nsize = \"8MiB\"\nvolume-id = 5\n"),
        "partition[2].volume-id: only FAT has a volume ID",
    );
    build_fails(
        d,
        "[image]\nsize = \"64MiB\"\n[[partition]]\nfs = \"none\"\nsize = \"4MiB\"\nuuid = \"01234567-89ab-4cde-8f01-23456789abcd\"\n",
        "partition[1].uuid: only GPT stores partition UUIDs",
    );
}
