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
fs = "fat"
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
    assert_eq!(
        blkid_value(&fat, "UUID").as_deref(),
        Some("1234-ABCD"),
        "{fat}"
    );
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
    assert_eq!(
        blkid_value(&fat, "UUID").as_deref(),
        Some("0BAD-F00D"),
        "{fat}"
    );
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
        &format!(
            "{gpt}[[partition]]\nfs = \"fat\"\nsize = \"36MiB\"\nvolume-id = \"12345-ABCD\"\n"
        ),
        "partition[2].volume-id: \"12345-ABCD\" is not a FAT volume ID",
    );
    build_fails(
        d,
        &format!("{gpt}[[partition]]\nfs = \"fat\"\nsize = \"36MiB\"\nfs-uuid = \"01234567-89ab-4cde-8f01-23456789abcd\"\n"),
        "partition[2].fs-uuid: FAT has no UUID",
    );
    build_fails(
        d,
        &format!("{gpt}[[partition]]\nfs = \"ext4\"\nsize = \"8MiB\"\nvolume-id = 5\n"),
        "partition[2].volume-id: only FAT and exFAT have a volume ID",
    );
    build_fails(
        d,
        "[image]\nsize = \"64MiB\"\n[[partition]]\nfs = \"none\"\nsize = \"4MiB\"\nuuid = \"01234567-89ab-4cde-8f01-23456789abcd\"\n",
        "partition[1].uuid: only GPT stores partition UUIDs",
    );
}

#[test]
fn explicit_start_is_checked_and_reported() {
    if !have("sfdisk") {
        return;
    }
    let dir = tempdir!();
    // 8 MiB is on the 4 MiB erase block; 13 MiB is not: a warning, NO in plan, and verify
    // says not aligned (a warning). The partition after it goes on the next erase block.
    let spec = r#"
[image]
size = "64MiB"
table = "gpt"

[[partition]]
fs = "none"
size = "4MiB"
start = "8MiB"

[[partition]]
fs = "none"
size = "1MiB"
start = "13MiB"

[[partition]]
fs = "ext4"
size = "fill"
"#;
    let spec_path = write_file(dir.path(), "start.toml", spec);
    let plan = plan_json(&spec_path);
    let parts = plan["partitions"].as_array().unwrap();
    let starts: Vec<u64> = parts
        .iter()
        .map(|p| p["start_bytes"].as_u64().unwrap())
        .collect();
    // Sizes round up to the erase block: 13 MiB + 4 MiB, then the next erase block.
    assert_eq!(starts, [8 * MIB, 13 * MIB, 20 * MIB]);
    assert_eq!(parts[1]["aligned"], false);
    assert_eq!(plan["aligned"], false);
    assert!(
        plan["notes"][0]
            .as_str()
            .unwrap()
            .contains("partition[2].start: 13 MiB is not on a 4 MiB erase-block boundary"),
        "{plan}"
    );
    let o = blockwise!().run(["plan".as_ref(), spec_path.as_os_str()]);
    let text = stdout(&o);
    assert!(o.status.success());
    assert!(text.contains("warning: partition[2].start"), "{text}");
    let img = dir.path().join("start.img");
    blockwise!().build(&spec_path, &img);
    let t = sfdisk_json(&img);
    let s: Vec<u64> = t["partitiontable"]["partitions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["start"].as_u64().unwrap())
        .collect();
    assert_eq!(s, [8 * MIB / 512, 13 * MIB / 512, 20 * MIB / 512]);
    let v = verify_json(&img);
    assert_eq!(v["aligned"], false);
    assert_eq!(v["partitions"][1]["aligned"], false);
    assert_eq!(v["partitions"][0]["aligned"], true);

    // Overlaps and disorder are errors naming the key.
    let d = dir.path();
    build_fails(
        d,
        "[image]\nsize = \"64MiB\"\n[[partition]]\nfs = \"none\"\nsize = \"8MiB\"\n[[partition]]\nfs = \"none\"\nsize = \"4MiB\"\nstart = \"8MiB\"\n",
        "partition[2].start: 8 MiB (8388608 bytes) overlaps partition[1], which ends at 12 MiB",
    );
    build_fails(
        d,
        "[image]\nsize = \"64MiB\"\ntable = \"gpt\"\n[[partition]]\nfs = \"none\"\nsize = \"4MiB\"\nstart = \"8KiB\"\n",
        "partition[1].start: 8 KiB (8192 bytes) overlaps the gpt partition table",
    );
    build_fails(
        d,
        "[image]\nsize = \"64MiB\"\n[[partition]]\nfs = \"none\"\nsize = \"4MiB\"\nstart = 1000\n",
        "partition[1].start: 1000 must be a non-zero multiple of the 512-byte sector",
    );
    build_fails(
        d,
        "[image]\nsize = \"64MiB\"\n[[partition]]\nfs = \"none\"\nsize = \"4MiB\"\nstart = \"62MiB\"\n",
        "image.size",
    );
}

#[test]
fn partitions_left_out_of_the_table() {
    if !(have("sfdisk") && have("blkid") && have("mdir")) {
        return;
    }
    let dir = tempdir!();
    let contents = dir.path().join("boot");
    std::fs::create_dir_all(&contents).unwrap();
    std::fs::write(contents.join("hello.txt"), "hi\n").unwrap();
    let spec_path = write_file(
        dir.path(),
        "untabled.toml",
        r#"
[image]
size = "64MiB"
table = "mbr"

[[partition]]
fs = "fat16"
size = "8MiB"
label = "HIDDEN"
contents = "boot"
in-partition-table = false

[[partition]]
fs = "ext4"
size = "fill"
"#,
    );
    let plan = plan_json(&spec_path);
    assert_eq!(plan["partitions"][0]["in_table"], false);
    assert_eq!(plan["partitions"][0]["index"], 0);
    assert_eq!(plan["partitions"][1]["index"], 1);
    let o = blockwise!().run(["plan".as_ref(), spec_path.as_os_str()]);
    assert!(stdout(&o).contains("left out of the partition table"));
    let img = dir.path().join("untabled.img");
    blockwise!().build(&spec_path, &img);
    // One table entry, for the ext4 partition at 12 MiB.
    let t = sfdisk_json(&img);
    let parts = t["partitiontable"]["partitions"].as_array().unwrap();
    assert_eq!(parts.len(), 1, "{t}");
    assert_eq!(parts[0]["start"], 12 * MIB / 512);
    // The FAT volume is at 4 MiB all the same.
    let fat = blkid(&img, 4 * MIB);
    assert_eq!(
        blkid_value(&fat, "LABEL").as_deref(),
        Some("HIDDEN"),
        "{fat}"
    );
    let o = blockwise_test_kit::command("mdir")
        .env("MTOOLS_SKIP_CHECK", "1")
        .args(["-i", &format!("{}@@{}", img.display(), 4 * MIB), "::/"])
        .output()
        .unwrap();
    assert!(stdout(&o).contains("hello"), "{}", stdout(&o));
    // verify lists it outside the partitions.
    let v = verify_json(&img);
    let regions = v["regions"].as_array().expect("regions");
    assert_eq!(regions[0]["kind"], "untabled fat", "{v}");
    assert_eq!(regions[0]["start_bytes"], 4 * MIB);
    let o = blockwise!().run(["verify".as_ref(), img.as_os_str()]);
    assert!(
        stdout(&o).contains("untabled fat: sectors 8192-"),
        "{}",
        stdout(&o)
    );

    build_fails(
        dir.path(),
        "[image]\nsize = \"64MiB\"\n[[partition]]\nfs = \"none\"\nsize = \"4MiB\"\nbootable = true\nin-partition-table = false\n",
        "partition[1].bootable: is stored in the partition table",
    );
}

/// Deterministic dummy bootloader bytes (no zero 4 KiB blocks).
fn blob(seed: u64, len: usize) -> Vec<u8> {
    blockwise_test_kit::xorshift64star_bytes(seed, len)
        .into_iter()
        .map(|b| b | 1)
        .collect()
}

#[test]
fn rockchip_raw_writes() {
    if !(have("sfdisk") && have("sgdisk")) {
        return;
    }
    let dir = tempdir!();
    let d = dir.path();
    let idb = blob(1, 100_000);
    let itb = blob(2, 300_000);
    std::fs::write(d.join("idbloader.img"), &idb).unwrap();
    std::fs::write(d.join("u-boot.itb"), &itb).unwrap();
    let spec = r#"
[image]
size = "128MiB"
table = "gpt"
first-partition = "16MiB"

[[raw]]
source = "idbloader.img"
offset-sectors = 64

[[raw]]
source = "u-boot.itb"
offset-sectors = 16384

[[partition]]
fs = "fat"
size = "36MiB"
label = "BOOT"

[[partition]]
fs = "ext4"
size = "fill"
"#;
    let spec_path = write_file(d, "rk.toml", spec);
    let plan = plan_json(&spec_path);
    assert_eq!(plan["raw"][0]["offset_bytes"], 64 * 512);
    assert_eq!(plan["raw"][0]["size_bytes"], 100_000);
    assert_eq!(plan["raw"][1]["offset_bytes"], 8 * MIB);
    let o = blockwise!().run(["plan".as_ref(), spec_path.as_os_str()]);
    assert!(stdout(&o).contains("bootloader area"), "{}", stdout(&o));
    let img = d.join("rk.img");
    blockwise!().build(&spec_path, &img);
    let bytes = std::fs::read(&img).unwrap();
    assert_eq!(&bytes[32768..32768 + idb.len()], &idb[..]);
    assert_eq!(
        &bytes[(8 * MIB) as usize..(8 * MIB) as usize + itb.len()],
        &itb[..]
    );
    let t = sfdisk_json(&img);
    let parts = t["partitiontable"]["partitions"].as_array().unwrap();
    assert_eq!(parts[0]["start"], 16 * MIB / 512);
    let o = run("sgdisk", &["-v".as_ref(), img.as_os_str()]);
    let text = stdout(&o);
    assert!(o.status.success(), "{text}");
    assert!(text.contains("No problems found"), "{text}");
    let v = verify_json(&img);
    let regions = v["regions"].as_array().expect("regions");
    assert_eq!(regions.len(), 2, "{v}");
    assert_eq!(regions[0]["kind"], "bootloader area");
    assert_eq!(regions[0]["start_bytes"], 32768);
    assert_eq!(regions[1]["start_bytes"], 8 * MIB);
    assert_eq!(v["aligned"], true);
    let o = blockwise!().run(["verify".as_ref(), img.as_os_str()]);
    assert_eq!(o.status.code(), Some(0), "{}", stdout(&o));
    assert!(
        stdout(&o).contains("bootloader area: sectors 64-"),
        "{}",
        stdout(&o)
    );

    // The example spec builds as well (its placeholder files are committed).
    let ex = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/rockchip.toml");
    let ex_img = d.join("example.img");
    blockwise!().build(&ex, &ex_img);
    let o = run("sgdisk", &["-v".as_ref(), ex_img.as_os_str()]);
    assert!(stdout(&o).contains("No problems found"), "{}", stdout(&o));
}

#[test]
fn raw_writes_that_overlap_are_refused() {
    let dir = tempdir!();
    let d = dir.path();
    std::fs::write(d.join("u-boot.bin"), blob(3, 600_000)).unwrap();
    std::fs::write(d.join("small.bin"), blob(4, 1000)).unwrap();
    // Allwinner: U-Boot at 8 KiB overlaps the primary GPT entries…
    build_fails(
        d,
        "[image]\nsize = \"64MiB\"\ntable = \"gpt\"\n[[raw]]\nsource = \"u-boot.bin\"\noffset = \"8KiB\"\n[[partition]]\nfs = \"none\"\nsize = \"fill\"\n",
        "raw[1].offset: 600000 bytes at 8 KiB (sector 16) overlap the primary GPT",
    );
    // …but is fine with MBR.
    let img = blockwise!().build_spec(
        d,
        "allwinner",
        "[image]\nsize = \"64MiB\"\n[[raw]]\nsource = \"u-boot.bin\"\noffset = \"8KiB\"\n[[partition]]\nfs = \"none\"\nsize = \"fill\"\n",
    );
    let bytes = std::fs::read(&img).unwrap();
    assert_eq!(&bytes[8192..8192 + 600_000], &blob(3, 600_000)[..]);
    // Over a partition, over the MBR, over each other, past the end, into the backup GPT.
    build_fails(
        d,
        "[image]\nsize = \"64MiB\"\n[[raw]]\nsource = \"u-boot.bin\"\noffset = \"3.5MiB\"\n[[partition]]\nfs = \"none\"\nsize = \"fill\"\n",
        "raw[1].offset: 600000 bytes at 3.50 MiB (sector 7168) overlap partition[1] (4 MiB to 64 MiB)",
    );
    build_fails(
        d,
        "[image]\nsize = \"64MiB\"\n[[raw]]\nsource = \"small.bin\"\noffset = 0\n[[partition]]\nfs = \"none\"\nsize = \"fill\"\n",
        "raw[1].offset: 1000 bytes at 0 B (sector 0) overlap the MBR",
    );
    build_fails(
        d,
        "[image]\nsize = \"64MiB\"\n[[raw]]\nsource = \"small.bin\"\noffset-sectors = 64\n[[raw]]\nsource = \"small.bin\"\noffset-sectors = 65\n[[partition]]\nfs = \"none\"\nsize = \"fill\"\n",
        "raw[2].offset-sectors: 1000 bytes at 32.50 KiB (sector 65) overlap raw[1] (small.bin)",
    );
    build_fails(
        d,
        "[image]\nsize = \"64MiB\"\ntable = \"gpt\"\n[[raw]]\nsource = \"small.bin\"\noffset = \"63.99MiB\"\n[[partition]]\nfs = \"none\"\nsize = \"8MiB\"\n",
        "raw[1].offset",
    );
    build_fails(
        d,
        "[image]\nsize = \"64MiB\"\n[[raw]]\nsource = \"missing.bin\"\noffset = \"8KiB\"\n[[partition]]\nfs = \"none\"\nsize = \"fill\"\n",
        "raw[1].source: \"missing.bin\" cannot be read",
    );
    build_fails(
        d,
        "[image]\nsize = \"64MiB\"\n[[raw]]\nsource = \"small.bin\"\n[[partition]]\nfs = \"none\"\nsize = \"fill\"\n",
        "raw[1].offset: missing",
    );
    build_fails(
        d,
        "[image]\nsize = \"64MiB\"\n[[raw]]\nsource = \"u-boot.bin\"\noffset = \"8KiB\"\nsize = \"512KiB\"\n[[partition]]\nfs = \"none\"\nsize = \"fill\"\n",
        "raw[1].size: 524288 bytes reserved, but the source has 600000",
    );
}

#[test]
fn swap_header_matches_mkswap() {
    if !(have("mkswap") && have("blkid") && have("sfdisk")) {
        return;
    }
    let dir = tempdir!();
    let d = dir.path();
    let uuid = "01234567-89ab-4cde-8f01-23456789abcd";
    let img = blockwise!().build_spec(
        d,
        "swap",
        &format!("[image]\nsize = \"64MiB\"\ntable = \"gpt\"\n[[partition]]\nfs = \"swap\"\nsize = \"16MiB\"\nlabel = \"myswap\"\nfs-uuid = \"{uuid}\"\n[[partition]]\nfs = \"ext4\"\nsize = \"fill\"\n"),
    );
    let t = sfdisk_json(&img);
    assert_eq!(
        t["partitiontable"]["partitions"][0]["type"],
        "0657FD6D-A4AB-43C4-84E5-0933C84B4F4F"
    );
    let out = blkid(&img, 4 * MIB);
    assert_eq!(blkid_value(&out, "TYPE").as_deref(), Some("swap"), "{out}");
    assert_eq!(
        blkid_value(&out, "LABEL").as_deref(),
        Some("myswap"),
        "{out}"
    );
    assert_eq!(blkid_value(&out, "UUID").as_deref(), Some(uuid), "{out}");
    // mkswap on a file of the same size, same label and UUID: the same first page.
    let reference = d.join("ref.swap");
    std::fs::File::create(&reference)
        .unwrap()
        .set_len(16 * MIB)
        .unwrap();
    let o = run(
        "mkswap",
        &[
            "-L".as_ref(),
            "myswap".as_ref(),
            "-U".as_ref(),
            uuid.as_ref(),
            reference.as_os_str(),
        ],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let ours = std::fs::read(&img).unwrap();
    let theirs = std::fs::read(&reference).unwrap();
    let page = (4 * MIB) as usize;
    assert_eq!(&ours[page..page + 4096], &theirs[..4096]);
    // MBR type 0x82.
    let img = blockwise!().build_spec(
        d,
        "swap-mbr",
        "[image]\nsize = \"64MiB\"\n[[partition]]\nfs = \"swap\"\nsize = \"fill\"\n",
    );
    assert_eq!(
        sfdisk_json(&img)["partitiontable"]["partitions"][0]["type"],
        "82"
    );
    assert_eq!(
        blkid_value(&blkid(&img, 4 * MIB), "TYPE").as_deref(),
        Some("swap")
    );
    build_fails(
        d,
        "[image]\nsize = \"64MiB\"\n[[partition]]\nfs = \"swap\"\nsize = \"fill\"\nlabel = \"seventeen-bytes-x\"\n",
        "partition[1].label: \"seventeen-bytes-x\" is 17 bytes",
    );
}

/// `image.boot-code` that cannot go into sector 0 is refused naming the key and the file
/// (escaped): too large, empty, missing, a directory, a 512-byte sector with a table, a
/// bare filesystem.
#[test]
fn boot_code_bad_inputs() {
    let dir = tempdir!();
    let d = dir.path();
    std::fs::write(d.join("big.bin"), [0x90u8; 441]).unwrap();
    std::fs::write(d.join("empty.bin"), b"").unwrap();
    let mut sector = [0u8; 512];
    sector[..440].fill(0x90);
    sector[0x1be] = 0x80;
    sector[0x1c2] = 0x83;
    sector[510] = 0x55;
    sector[511] = 0xaa;
    std::fs::write(d.join("table.bin"), sector).unwrap();
    std::fs::create_dir(d.join("adir")).unwrap();
    let spec = |file: &str, table: &str| {
        format!("[image]\ntable = \"{table}\"\nboot-code = \"{file}\"\n[[partition]]\nfs = \"none\"\nsize = \"4MiB\"\n")
    };
    build_fails(
        d,
        &spec("big.bin", "mbr"),
        "image.boot-code: \"big.bin\" is 441 bytes",
    );
    build_fails(
        d,
        &spec("empty.bin", "mbr"),
        "image.boot-code: \"empty.bin\" is empty",
    );
    build_fails(d, &spec("table.bin", "gpt"), "partition entries");
    build_fails(
        d,
        &spec("nope.bin", "mbr"),
        "image.boot-code: \"nope.bin\" cannot be read",
    );
    build_fails(
        d,
        &spec("adir", "mbr"),
        "image.boot-code: \"adir\" is not a regular file",
    );
    build_fails(d, &spec("big.bin", "none"), "table = \"none\" has none");
    // A hostile name is quoted escaped.
    build_fails(d, &spec("\\u001b[31mx", "mbr"), "x1b[31mx\" cannot be read");
    let bad = write_file(d, "esc.toml", &spec("\\u001b[31mx", "mbr"));
    let o = blockwise!().run(["plan".as_ref(), bad.as_os_str()]);
    assert!(!stderr(&o).contains('\x1b'), "{:?}", stderr(&o));
    // The blank-table sector is taken: its first 440 bytes.
    sector[0x1be] = 0;
    sector[0x1c2] = 0;
    std::fs::write(d.join("ok.bin"), sector).unwrap();
    let spec_path = write_file(d, "ok.toml", &spec("ok.bin", "mbr"));
    let out = d.join("ok.img");
    let o = blockwise!().run([
        "build".as_ref(),
        "-q".as_ref(),
        spec_path.as_os_str(),
        "-o".as_ref(),
        out.as_os_str(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let img = std::fs::read(&out).unwrap();
    assert_eq!(&img[..440], &sector[..440]);
    assert_eq!(plan_json(&spec_path)["table"]["boot_code"]["bytes"], 440);
}

/// `fat.bootloader = "syslinux"` without the installer on PATH fails naming the Debian
/// package; an installer that fails or installs nothing fails the build too; none leaves
/// an output or a temp file behind.
#[test]
fn syslinux_missing_names_the_package() {
    let dir = tempdir!();
    let d = dir.path();
    std::fs::create_dir(d.join("boot")).unwrap();
    let spec = write_file(
        d,
        "s.toml",
        "[[partition]]\nfs = \"fat\"\nsize = \"8MiB\"\ncontents = \"boot\"\nfat.bootloader = \"syslinux\"\n",
    );
    let out = d.join("o.img");
    let o = std::process::Command::new(blockwise!().path())
        .env("PATH", d.join("empty-path"))
        .arg("build")
        .arg(&spec)
        .arg("-o")
        .arg(&out)
        .output()
        .unwrap();
    let err = stderr(&o);
    assert_ne!(o.status.code(), Some(0), "{err}");
    assert!(
        err.contains("partition[1].fat.bootloader") && err.contains("Debian package syslinux"),
        "{err}"
    );
    let left: Vec<_> = std::fs::read_dir(d)
        .unwrap()
        .flatten()
        .map(|e| e.file_name())
        .filter(|n| n != "boot" && n != "s.toml")
        .collect();
    assert!(left.is_empty(), "left behind: {left:?}");
    // A syslinux that fails, and one that exits 0 but installs nothing: both fail the build
    // (never a false success) and leave nothing behind.
    use std::os::unix::fs::PermissionsExt;
    let fake = d.join("fake");
    std::fs::create_dir(&fake).unwrap();
    for (script, needle) in [
        (
            "#!/bin/sh\necho 'no space' >&2\nexit 1\n",
            "syslinux --install failed",
        ),
        ("#!/bin/sh\nexit 0\n", "without syslinux's name"),
    ] {
        let tool = fake.join("syslinux");
        std::fs::write(&tool, script).unwrap();
        std::fs::set_permissions(&tool, std::fs::Permissions::from_mode(0o755)).unwrap();
        let o = std::process::Command::new(blockwise!().path())
            .env("PATH", &fake)
            .arg("build")
            .arg(&spec)
            .arg("-o")
            .arg(&out)
            .output()
            .unwrap();
        let err = stderr(&o);
        assert_ne!(o.status.code(), Some(0), "{err}");
        assert!(err.contains(needle), "{needle:?} not in {err}");
        let left: Vec<_> = std::fs::read_dir(d)
            .unwrap()
            .flatten()
            .map(|e| e.file_name())
            .filter(|n| n != "boot" && n != "s.toml" && n != "fake")
            .collect();
        assert!(left.is_empty(), "left behind: {left:?}");
    }
    // An unknown bootloader is a spec error naming the key.
    build_fails(
        d,
        "[[partition]]\nfs = \"fat\"\nsize = \"8MiB\"\nfat.bootloader = \"grub\"\n",
        "partition[1].fat.bootloader",
    );
}

/// GPT with syslinux's gptmbr.bin and a FAT32 volume with syslinux: two builds are
/// byte-identical, fsck.fat passes (the backup boot sector follows the new one), and plan
/// and verify say the same of the boot code and the bootloader.
#[test]
fn syslinux_fat32_on_gpt() {
    let gptmbr = Path::new("/usr/lib/syslinux/mbr/gptmbr.bin");
    if !have("syslinux") || !have("fsck.fat") || !gptmbr.exists() {
        assert!(
            !blockwise_test_kit::oracles_required(),
            "syslinux, syslinux-common and fsck.fat are needed"
        );
        return;
    }
    let dir = tempdir!();
    let d = dir.path();
    std::fs::create_dir(d.join("boot")).unwrap();
    std::fs::write(d.join("boot/syslinux.cfg"), "DEFAULT x\n").unwrap();
    let spec = write_file(
        d,
        "s.toml",
        "[image]\ntable = \"gpt\"\nerase-block = \"1MiB\"\nboot-code = \"/usr/lib/syslinux/mbr/gptmbr.bin\"\ntimestamp = 1700000000\n[[partition]]\nfs = \"fat32\"\nsize = \"40MiB\"\ncontents = \"boot\"\nattributes = [\"legacy-bios-bootable\"]\nfat.bootloader = \"syslinux\"\n",
    );
    let (a, b) = (d.join("a.img"), d.join("b.img"));
    for out in [&a, &b] {
        let o = blockwise!().run([
            "build".as_ref(),
            "-q".as_ref(),
            spec.as_os_str(),
            "-o".as_ref(),
            out.as_os_str(),
        ]);
        assert!(o.status.success(), "{}", stderr(&o));
    }
    let img = std::fs::read(&a).unwrap();
    assert!(img == std::fs::read(&b).unwrap(), "two builds differ");
    assert_eq!(&img[..440], &std::fs::read(gptmbr).unwrap()[..]);
    let part = d.join("p.img");
    std::fs::write(&part, &img[MIB as usize..41 * MIB as usize]).unwrap();
    let o = run("fsck.fat", &["-n".as_ref(), part.as_os_str()]);
    assert!(o.status.success(), "{}{}", stdout(&o), stderr(&o));
    assert_eq!(&img[MIB as usize + 3..MIB as usize + 11], b"SYSLINUX");
    let plan = plan_json(&spec);
    let o = blockwise!().run(["verify".as_ref(), "--json".as_ref(), a.as_os_str()]);
    let report: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(plan["table"]["boot_code"], report["table"]["boot_code"]);
    assert_eq!(report["table"]["boot_code"]["bytes"], 428); // gptmbr.bin ends in 12 zeros
    let fs = |v: &serde_json::Value| v["partitions"][0]["filesystem"]["bootloader"].clone();
    assert_eq!(fs(&plan), "syslinux");
    assert_eq!(fs(&report), "syslinux");
    assert_eq!(
        report["findings"]
            .as_array()
            .map(|f| f.iter().filter(|x| x["severity"] == "error").count()),
        Some(0)
    );
}
