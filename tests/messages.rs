//! Messages in the user's words (issue 32 item 7): what a build says when the output's
//! directory is missing, that a standard lowercase FAT label is not a warning, and that the
//! FAT size hint never suggests a cluster smaller than one sector.

use blockwise_test_kit::{blockwise, output_text, tempdir, write_file};

const SPEC: &str = r#"
[image]
size = "128MiB"
[[partition]]
fs = "fat32"
size = "64MiB"
contents = "boot/"
label = "bootfs"
"#;

#[test]
fn a_missing_output_directory_is_named_not_the_temp_file() {
    let dir = tempdir!();
    std::fs::create_dir(dir.path().join("boot")).unwrap();
    write_file(&dir.path().join("boot"), "config.txt", "x\n");
    let spec = write_file(dir.path(), "s.toml", SPEC);
    let out = dir.path().join("missing/x.img");
    let o = blockwise!().run([
        "build".as_ref(),
        spec.as_os_str(),
        "-o".as_ref(),
        out.as_os_str(),
    ]);
    let text = output_text(&o);
    assert_eq!(o.status.code(), Some(3), "{text}");
    assert!(
        text.contains("missing: No such file or directory")
            && text.contains("create the output's directory first"),
        "{text}"
    );
    assert!(!text.contains(".x.img.tmp-"), "{text}");
    assert!(!dir.path().join("missing").exists());
}

#[test]
fn pi_gen_s_lowercase_boot_label_builds_without_a_warning() {
    let dir = tempdir!();
    std::fs::create_dir(dir.path().join("boot")).unwrap();
    write_file(&dir.path().join("boot"), "config.txt", "x\n");
    let spec = write_file(dir.path(), "s.toml", SPEC);
    let out = dir.path().join("x.img");
    let o = blockwise!().run([
        "build".as_ref(),
        spec.as_os_str(),
        "-o".as_ref(),
        out.as_os_str(),
        "-q".as_ref(),
    ]);
    assert!(o.status.success(), "{}", output_text(&o));
    assert!(o.stderr.is_empty(), "{}", output_text(&o));
    // The label is stored as given.
    let v = blockwise!().run(["verify".as_ref(), "--json".as_ref(), out.as_os_str()]);
    let j: serde_json::Value = serde_json::from_slice(&v.stdout).unwrap();
    assert_eq!(j["partitions"][0]["filesystem"]["label"], "bootfs", "{j}");
}

#[test]
fn the_fat_size_hint_offers_no_cluster_smaller_than_a_sector() {
    let dir = tempdir!();
    let one_sector = write_file(
        dir.path(),
        "a.toml",
        "[image]\nsize = \"64MiB\"\n[[partition]]\nfs = \"fat32\"\nsize = \"32MiB\"\nfat = { cluster = \"512\" }\n",
    );
    let o = blockwise!().run(["plan".as_ref(), one_sector.as_os_str()]);
    let text = output_text(&o);
    assert_eq!(o.status.code(), Some(2), "{text}");
    assert!(text.contains("needs at least 40 MiB"), "{text}");
    assert!(!text.contains("smaller fat.cluster"), "{text}");
    // With larger clusters a smaller one is still the first way out.
    let two_sectors = write_file(
        dir.path(),
        "b.toml",
        "[image]\nsize = \"64MiB\"\n[[partition]]\nfs = \"fat32\"\nsize = \"48MiB\"\nfat = { cluster = \"1024\" }\n",
    );
    let o = blockwise!().run(["plan".as_ref(), two_sectors.as_os_str()]);
    let text = output_text(&o);
    assert_eq!(o.status.code(), Some(2), "{text}");
    assert!(text.contains("a smaller fat.cluster"), "{text}");
}

/// A loop device attached without partition scanning (plain `losetup -f`) has no table for
/// the kernel to re-read: a write onto it says nothing about re-reading.
#[test]
fn a_write_to_a_plain_loop_device_says_nothing_about_rereading() {
    if !blockwise_test_kit::have_loop() {
        return;
    }
    let dir = tempdir!();
    std::fs::create_dir(dir.path().join("boot")).unwrap();
    write_file(&dir.path().join("boot"), "config.txt", "x\n");
    let spec = write_file(dir.path(), "s.toml", SPEC);
    let img = dir.path().join("x.img");
    let o = blockwise!().run([
        "build".as_ref(),
        spec.as_os_str(),
        "-o".as_ref(),
        img.as_os_str(),
        "-q".as_ref(),
    ]);
    assert!(o.status.success(), "{}", output_text(&o));
    let backing = dir.path().join("backing.img");
    std::fs::File::create(&backing)
        .unwrap()
        .set_len(128 << 20)
        .unwrap();
    let lo = blockwise_test_kit::LoopDevice::attach(&backing, false, None);
    let o = blockwise!().run([
        "write".as_ref(),
        img.as_os_str(),
        lo.path().as_os_str(),
        "--yes".as_ref(),
    ]);
    let text = output_text(&o);
    assert!(o.status.success(), "{text}");
    assert!(!text.contains("re-read"), "{text}");
}
