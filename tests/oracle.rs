//! Partition tables checked by real tools: sfdisk, sgdisk, loop devices with 4096-byte
//! sectors, and byte equality with what sfdisk writes for the same layout.

use blockwise_test_kit::{blockwise, have, have_loop, run, sfdisk_json, tempdir, LoopDevice};
use serde_json::Value;

fn starts_sizes_types(v: &Value) -> Vec<(u64, u64, String)> {
    v["partitiontable"]["partitions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            (
                p["start"].as_u64().unwrap(),
                p["size"].as_u64().unwrap(),
                p["type"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

const MBR_SPEC: &str = r#"
[image]
size = "1GiB"
erase-block = "4MiB"
disk-id = "0x5452574f"
[[partition]]
fs = "none"
type = "fat32"
size = "256MiB"
bootable = true
[[partition]]
fs = "none"
type = "linux"
size = "fill"
"#;

#[test]
fn mbr_layout_matches_sfdisk() {
    if !have("sfdisk") {
        return;
    }
    let dir = tempdir!();
    let img = blockwise!().build_spec(dir.path(), "mbr", MBR_SPEC);
    let v = sfdisk_json(&img);
    assert_eq!(v["partitiontable"]["label"], "dos");
    assert_eq!(v["partitiontable"]["id"], "0x5452574f");
    assert_eq!(
        starts_sizes_types(&v),
        vec![
            (8192, 524_288, "c".to_string()),
            (532_480, 1_564_672, "83".to_string())
        ]
    );
    assert_eq!(v["partitiontable"]["partitions"][0]["bootable"], true);
    let o = run("sfdisk", &["--verify", img.to_str().unwrap()]);
    assert!(o.status.success());
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(out.contains("No errors detected"), "{out}");
    assert!(!out.to_lowercase().contains("warning"), "{out}");
}

#[test]
fn mbr_entries_are_byte_identical_to_sfdisk() {
    if !have("sfdisk") {
        return;
    }
    let dir = tempdir!();
    let ours = blockwise!().build_spec(dir.path(), "ours", MBR_SPEC);
    let reference = dir.path().join("ref.img");
    std::fs::File::create(&reference)
        .unwrap()
        .set_len(1 << 30)
        .unwrap();
    let script = "label: dos\nlabel-id: 0x5452574f\nstart=8192, size=524288, type=c, bootable\nstart=532480, size=1564672, type=83\n";
    let mut child = std::process::Command::new("sfdisk")
        .args([
            "--no-reread",
            "--no-tell-kernel",
            "-q",
            reference.to_str().unwrap(),
        ])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    std::io::Write::write_all(child.stdin.as_mut().unwrap(), script.as_bytes()).unwrap();
    assert!(child.wait().unwrap().success());
    let a = std::fs::read(&ours).unwrap();
    let b = std::fs::read(&reference).unwrap();
    // Disk signature, the four entries and 55 AA.
    assert_eq!(
        a[0x1b8..0x200],
        b[0x1b8..0x200],
        "MBR differs from sfdisk's"
    );
}

#[test]
fn gpt_is_valid_deterministic_and_backup_on_last_lba() {
    if !have("sgdisk") || !have("sfdisk") {
        return;
    }
    let dir = tempdir!();
    let spec = MBR_SPEC
        .replace("disk-id = \"0x5452574f\"", "table = \"gpt\"\nseed = 7")
        .replace("\"fat32\"", "\"esp\"");
    let a = blockwise!().build_spec(dir.path(), "a", &spec);
    let b = blockwise!().build_spec(dir.path(), "b", &spec);
    assert_eq!(
        std::fs::read(&a).unwrap(),
        std::fs::read(&b).unwrap(),
        "two builds differ"
    );
    let o = run("sgdisk", &["-v", a.to_str().unwrap()]);
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        o.status.success() && out.contains("No problems found"),
        "{out}"
    );
    let v = sfdisk_json(&a);
    let t = &v["partitiontable"];
    assert_eq!(t["label"], "gpt");
    let parts = starts_sizes_types(&v);
    assert_eq!(
        parts[0],
        (
            8192,
            524_288,
            "C12A7328-F81F-11D2-BA4B-00A0C93EC93B".to_string()
        )
    );
    assert_eq!(parts[1].0, 532_480);
    assert_eq!(parts[1].0 % 8192, 0);
    // Backup header on the last LBA; entries just before it.
    let bytes = std::fs::read(&a).unwrap();
    let last = bytes.len() - 512;
    assert_eq!(&bytes[last..last + 8], b"EFI PART");
    assert_eq!(
        u64::from_le_bytes(bytes[last + 24..last + 32].try_into().unwrap()),
        (bytes.len() / 512 - 1) as u64
    );
    // GUIDs derive from the seed: another seed, other GUIDs.
    let c = blockwise!().build_spec(dir.path(), "c", &spec.replace("seed = 7", "seed = 8"));
    let vc = sfdisk_json(&c);
    assert_ne!(vc["partitiontable"]["id"], t["id"]);
    assert_ne!(
        vc["partitiontable"]["partitions"][0]["uuid"],
        t["partitions"][0]["uuid"]
    );
}

#[test]
fn logical_partitions_through_extended() {
    if !have("sfdisk") {
        return;
    }
    let dir = tempdir!();
    let mut spec = String::from("[image]\nerase-block = \"1MiB\"\n");
    for _ in 0..6 {
        spec.push_str("[[partition]]\nfs = \"none\"\nsize = \"3MiB\"\n");
    }
    let img = blockwise!().build_spec(dir.path(), "ext", &spec);
    let v = sfdisk_json(&img);
    let parts = starts_sizes_types(&v);
    // 3 primaries, the extended container, 3 logicals.
    assert_eq!(parts.len(), 7, "{v}");
    let mib = 2048;
    assert_eq!(parts[3].2, "f");
    for (i, p) in parts.iter().enumerate() {
        if i != 3 {
            assert_eq!(p.0 % mib, 0, "partition {i} at {}", p.0);
            assert_eq!(p.1, 3 * mib);
        }
    }
    let o = run("sfdisk", &["--verify", img.to_str().unwrap()]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stdout));
}

#[test]
fn sector_size_4096_on_a_loop_device() {
    if !have("sfdisk") || !have_loop() {
        return;
    }
    let dir = tempdir!();
    for table in ["mbr", "gpt"] {
        let spec = MBR_SPEC
            .replace(
                "disk-id = \"0x5452574f\"",
                &format!("table = \"{table}\"\nsector-size = 4096"),
            )
            .replace(
                "\"fat32\"",
                if table == "gpt" {
                    "\"fat\""
                } else {
                    "\"fat32\""
                },
            );
        let img = blockwise!().build_spec(dir.path(), table, &spec);
        let dev = LoopDevice::attach(&img, true, Some(4096));
        let v = sfdisk_json(dev.path());
        assert_eq!(v["partitiontable"]["sectorsize"], 4096);
        let parts = starts_sizes_types(&v);
        // 4 MiB = 1024 sectors of 4096; 260 MiB = 66560.
        assert_eq!(parts[0].0, 1024, "{table}");
        assert_eq!(parts[0].1, 65_536, "{table}");
        assert_eq!(parts[1].0, 66_560, "{table}");
        let o = run("sfdisk", &["--verify", dev.path().to_str().unwrap()]);
        assert!(
            o.status.success(),
            "{table}: {}",
            String::from_utf8_lossy(&o.stdout)
        );
        if table == "gpt" {
            let o = run("sgdisk", &["-v", dev.path().to_str().unwrap()]);
            let out = String::from_utf8_lossy(&o.stdout);
            assert!(out.contains("No problems found"), "{out}");
        }
    }
}
