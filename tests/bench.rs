//! `blockwise bench`: on a regular file of a disk-backed filesystem and on a loop device it
//! completes, prints every case (table, `--json`, `--csv`); it refuses without
//! `--yes-destroy-data` and refuses a mounted target like `write` does. Never asserts on
//! timing. Loop devices need root: elsewhere those tests skip with a message (test-kit).

use std::fs;
use std::process::Output;

use blockwise_test_kit::{
    assert_success, blockwise, have, have_loop, output_text, run, tempdir, LoopDevice,
};

const MIB: u64 = 1 << 20;
/// 2 data kinds x 6 patterns x 4 shifts.
const CASES: usize = 48;

fn bench(args: &[&dyn AsRef<std::ffi::OsStr>]) -> Output {
    let mut v: Vec<std::ffi::OsString> = vec!["bench".into()];
    v.extend(args.iter().map(|a| a.as_ref().to_os_string()));
    blockwise!().run(&v)
}

fn assert_refused(o: &Output, needle: &str) {
    assert_eq!(o.status.code(), Some(2), "{}", output_text(o));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains(needle), "expected {needle:?} in {err}");
    assert_eq!(err.lines().count(), 1, "one line: {err}");
}

/// The table has its header, a row per data and pattern, every shift column, and labels the
/// method; `block` is the logical block the target should report.
fn check_table(o: &Output, kind: &str, block: u32) {
    assert!(o.status.success(), "{}", output_text(o));
    let t = String::from_utf8_lossy(&o.stdout);
    assert!(
        t.starts_with("blockwise bench ")
            && t.contains(&format!("({kind}): logical block {block}")),
        "{t}"
    );
    assert!(
        t.contains("O_DIRECT writes; each case ends with fdatasync"),
        "{t}"
    );
    for col in ["aligned", "+512 B", "+63 sectors", "+1/2 erase block"] {
        assert!(t.contains(col), "{col}: {t}");
    }
    for data in ["random", "zero"] {
        for pat in [
            "seq 4 KiB",
            "seq 16 KiB",
            "seq 64 KiB",
            "seq 512 KiB",
            "seq 4 MiB",
            "small files",
        ] {
            let row = t
                .lines()
                .find(|l| l.starts_with(data) && l.contains(pat))
                .unwrap_or_else(|| panic!("no row {data} {pat}: {t}"));
            // Four cells: a number each, ratios on the three shifted ones (or "not possible").
            let cells = row.matches("(x").count() + 3 * row.matches("not possible").count();
            assert!(cells >= 3, "{row}");
        }
    }
}

/// `--json` parses and has every case measured with positive MB/s (or, for 512-byte shifts
/// on a 4096-byte device, "not possible (logical block 4096)").
fn check_json(o: &Output, block: u32) {
    assert!(o.status.success(), "{}", output_text(o));
    let j: serde_json::Value =
        serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("{e}: {}", output_text(o)));
    assert_eq!(j["logical_block"], block, "{j}");
    assert_eq!(j["direct"], true, "{j}");
    assert!(j["sync"].as_str().unwrap().contains("fdatasync"));
    let cases = j["cases"].as_array().unwrap();
    assert_eq!(cases.len(), CASES, "{j}");
    for c in cases {
        let shift = c["shift"].as_str().unwrap();
        if block == 4096 && (shift == "512b" || shift == "63s") {
            assert_eq!(c["status"], "not_possible", "{c}");
            assert_eq!(c["reason"], "not possible (logical block 4096)", "{c}");
            continue;
        }
        assert_eq!(c["status"], "measured", "{c}");
        assert!(c["mb_per_s"].as_f64().unwrap() > 0.0, "{c}");
        assert!(c["writes"].as_u64().unwrap() >= 1, "{c}");
        assert!(c["aligned_ratio"].as_f64().unwrap() > 0.0, "{c}");
    }
}

/// `--csv`: a header and one row per case, all with the header's number of fields.
fn check_csv(o: &Output) {
    assert!(o.status.success(), "{}", output_text(o));
    let csv = String::from_utf8_lossy(&o.stdout);
    let rows: Vec<&str> = csv.lines().collect();
    assert_eq!(rows.len(), 1 + CASES, "{csv}");
    assert!(rows[0].starts_with("data,pattern,chunk_bytes,shift,shift_bytes,status,"));
    let width = rows[0].split(',').count();
    for r in &rows[1..] {
        assert_eq!(r.split(',').count(), width, "{r}");
        assert!(r.starts_with("random,") || r.starts_with("zero,"), "{r}");
    }
}

#[test]
fn refuses_without_yes_destroy_data() {
    let dir = tempdir!();
    let f = dir.path().join("stick.img");
    fs::write(&f, b"precious").unwrap();
    let o = bench(&[&f, &"--seconds", &"1"]);
    assert_refused(&o, "--yes-destroy-data");
    assert!(String::from_utf8_lossy(&o.stderr).contains("destroys"));
    assert_eq!(fs::read(&f).unwrap(), b"precious");
    assert!(o.stdout.is_empty());
    // Bad numbers are refused too, before anything is written.
    for bad in [
        &["--seconds", "0"][..],
        &["--seconds", "nan"],
        &["--erase-block", "3000"],
        &["--size", "lots"],
    ] {
        let mut args: Vec<&dyn AsRef<std::ffi::OsStr>> = vec![&f, &"--yes-destroy-data"];
        args.extend(bad.iter().map(|s| s as &dyn AsRef<std::ffi::OsStr>));
        let o = bench(&args);
        assert_eq!(o.status.code(), Some(2), "{bad:?}: {}", output_text(&o));
        assert_eq!(fs::read(&f).unwrap(), b"precious", "{bad:?}");
    }
}

#[test]
fn a_regular_file_on_a_disk_backed_filesystem() {
    let dir = tempdir!();
    let f = dir.path().join("bench.img");
    let size = "32MiB";
    let common: [&dyn AsRef<std::ffi::OsStr>; 6] = [
        &f,
        &"--yes-destroy-data",
        &"--seconds",
        &"3",
        &"--size",
        &size,
    ];
    let o = bench(&common);
    check_table(&o, "file", 512);
    // The numbers are the filesystem's and the page cache's, and it says so.
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("is a regular file") && err.contains("page cache"),
        "{err}"
    );
    assert_eq!(fs::metadata(&f).unwrap().len(), 32 * MIB);
    let mut args = common.to_vec();
    args.push(&"--json");
    check_json(&bench(&args), 512);
    let mut args = common.to_vec();
    args.push(&"--csv");
    check_csv(&bench(&args));
}

#[test]
fn loop_devices_of_512_and_4096_byte_sectors() {
    if !have_loop() {
        return;
    }
    let dir = tempdir!();
    let backing = dir.path().join("dev.bin");
    for sector in [512u32, 4096] {
        fs::File::create(&backing)
            .unwrap()
            .set_len(64 * MIB)
            .unwrap();
        let lo = LoopDevice::attach(&backing, false, Some(sector));
        let dev = lo.path();
        let common: [&dyn AsRef<std::ffi::OsStr>; 4] =
            [&dev, &"--yes-destroy-data", &"--seconds", &"3"];
        let o = bench(&common);
        check_table(&o, "loop device", sector);
        if sector == 4096 {
            let t = String::from_utf8_lossy(&o.stdout);
            assert!(t.contains("* not possible (logical block 4096)"), "{t}");
        }
        let mut args = common.to_vec();
        args.push(&"--json");
        check_json(&bench(&args), sector);
        let mut args = common.to_vec();
        args.push(&"--csv");
        check_csv(&bench(&args));
        // --size keeps the writes inside the first MiBs: the rest keeps its 0xA5 filler. (A
        // filler, not zeros: the zero-data cases may overwrite every random block.)
        fs::write(&backing, vec![0xA5u8; usize::try_from(64 * MIB).unwrap()]).unwrap();
        let o = bench(&[
            &dev,
            &"--yes-destroy-data",
            &"--seconds",
            &"1",
            &"--size",
            &"16MiB",
            &"--json",
        ]);
        check_json(&o, sector);
        let j: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        assert_eq!(j["region_bytes"], 16 * MIB);
        lo.detach();
        let data = fs::read(&backing).unwrap();
        let end = usize::try_from(16 * MIB).unwrap();
        assert!(
            data[end..].iter().all(|&b| b == 0xA5),
            "wrote beyond --size"
        );
        assert!(data[..end].iter().any(|&b| b != 0xA5), "wrote nothing");
    }
}

#[test]
fn refuses_a_mounted_target_like_write() {
    if !have_loop() || !have("mkfs.ext4") {
        return;
    }
    let dir = tempdir!();
    let backing = dir.path().join("ext4.bin");
    fs::File::create(&backing)
        .unwrap()
        .set_len(32 * MIB)
        .unwrap();
    assert_success(
        &run(
            "mkfs.ext4",
            &["-q".as_ref(), "-F".as_ref(), backing.as_os_str()],
        ),
        "mkfs.ext4",
    );
    let before = fs::read(&backing).unwrap();
    let lo = LoopDevice::attach(&backing, false, None);
    let mnt = dir.path().join("mnt");
    fs::create_dir_all(&mnt).unwrap();
    assert_success(
        &run(
            "mount",
            &[
                "-o".as_ref(),
                "ro,noload".as_ref(),
                lo.path().as_os_str(),
                mnt.as_os_str(),
            ],
        ),
        "mount -o ro",
    );
    let o = bench(&[&lo.path(), &"--yes-destroy-data", &"--seconds", &"1"]);
    let _ = run("umount", &[&mnt]);
    lo.detach();
    assert_refused(&o, "mounted");
    assert!(o.stdout.is_empty());
    assert!(fs::read(&backing).unwrap() == before, "the device changed");
}

/// Not a block device nor a regular file: refused with exit 2.
#[test]
fn refuses_a_directory() {
    let dir = tempdir!();
    let o = bench(&[&dir.path(), &"--yes-destroy-data", &"--seconds", &"1"]);
    assert_refused(&o, "neither a block device nor a regular file");
}

/// A file on tmpfs: labelled as memory, and either O_DIRECT at tmpfs's granularity (Linux ≥
/// 6.6) or a buffered fallback labelled BUFFERED; every case is still there.
#[test]
fn a_file_on_tmpfs_is_labelled() {
    let shm = std::path::Path::new("/dev/shm");
    let is_tmpfs = run("stat", &["-f", "-c", "%T", "/dev/shm"]);
    if !shm.is_dir() || String::from_utf8_lossy(&is_tmpfs.stdout).trim() != "tmpfs" {
        eprintln!("SKIP: /dev/shm is not a tmpfs here");
        return;
    }
    let f = shm.join(format!("blockwise-bench-test-{}.img", std::process::id()));
    let o = bench(&[
        &f,
        &"--yes-destroy-data",
        &"--seconds",
        &"1",
        &"--size",
        &"16MiB",
        &"--csv",
    ]);
    let o2 = bench(&[
        &f,
        &"--yes-destroy-data",
        &"--seconds",
        &"1",
        &"--size",
        &"16MiB",
    ]);
    let _ = fs::remove_file(&f);
    check_csv(&o);
    assert!(o2.status.success(), "{}", output_text(&o2));
    let t = String::from_utf8_lossy(&o2.stdout);
    assert!(t.contains("(file on tmpfs, in memory)"), "{t}");
    assert!(
        t.contains("O_DIRECT writes") || t.contains("BUFFERED writes"),
        "{t}"
    );
    assert!(String::from_utf8_lossy(&o2.stderr).contains("memory"));
}
