//! Truth and parity (issue 26): what `plan` says, `build` writes and `verify` reads agree, and
//! the real tools agree with all three — the most partitions an MBR takes, `[[partition.entry]]`
//! on hard links, reproducible builds after `touch`, labels as the filesystems define them,
//! and `plan --json` = `verify --json` of the build for the mke2fs backend.

use std::path::Path;

use blockwise_test_kit::{blockwise, have, run, sfdisk_json, tempdir, write_file};

fn stderr(o: &std::process::Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// `blockwise plan --json SPEC`, parsed.
fn plan_json(spec: &Path) -> serde_json::Value {
    let o = blockwise!().run(["plan".as_ref(), "--json".as_ref(), spec.as_os_str()]);
    assert!(o.status.success(), "{}", stderr(&o));
    serde_json::from_slice(&o.stdout).unwrap()
}

/// `blockwise verify --json [ARGS] IMG` and its exit code.
fn verify_json(img: &Path, args: &[&str]) -> (serde_json::Value, i32) {
    let mut a: Vec<&std::ffi::OsStr> = vec!["verify".as_ref(), "--json".as_ref()];
    a.extend(args.iter().map(std::ffi::OsStr::new));
    a.push(img.as_os_str());
    let o = blockwise!().run(a);
    let v = serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("{e}: {}", stderr(&o)));
    (v, o.status.code().unwrap_or(-1))
}

fn mbr_spec(n: usize) -> String {
    let mut s = String::from("[image]\ntable = \"mbr\"\nerase-block = \"128KiB\"\nseed = 5\n");
    for _ in 0..n {
        s.push_str("[[partition]]\nfs = \"none\"\nsize = \"128KiB\"\n");
    }
    s
}

/// r26 item 8: the most partitions an MBR layout takes (59: 1–3 primary, 5–60 logical) builds,
/// verifies whole and is listed whole by sfdisk; one more is refused by plan and build, naming
/// the limit.
#[test]
fn r26_the_largest_mbr_layout_verifies_whole() {
    let dir = tempdir!();
    let max = blockwise_geometry::MAX_MBR_PARTITIONS;
    let img = blockwise!().build_spec(dir.path(), "max", &mbr_spec(max));
    let (report, code) = verify_json(&img, &["--erase-block", "128KiB"]);
    assert_eq!(code, 0, "{report:#}");
    let parts = report["partitions"].as_array().unwrap();
    assert_eq!(parts.len(), max);
    assert_eq!(parts.last().unwrap()["index"], 60);
    assert_eq!(report["findings"], serde_json::json!([]), "{report:#}");
    let plan = plan_json(&dir.path().join("max.toml"));
    assert_eq!(plan["partitions"].as_array().unwrap().len(), max);
    if have("sfdisk") {
        let t = sfdisk_json(&img);
        let listed = t["partitiontable"]["partitions"].as_array().unwrap();
        // The extended partition (number 4) is listed too.
        assert_eq!(listed.len(), max + 1, "{t:#}");
        let o = run("sfdisk", &["--verify".as_ref(), img.as_os_str()]);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stdout));
    }
    let spec = write_file(dir.path(), "over.toml", &mbr_spec(max + 1));
    for cmd in ["plan", "build"] {
        let out = dir.path().join("over.img");
        let mut args: Vec<&std::ffi::OsStr> = vec![cmd.as_ref(), spec.as_os_str()];
        if cmd == "build" {
            args.extend(["-o".as_ref(), out.as_os_str()]);
        }
        let o = blockwise!().run(args);
        let err = stderr(&o);
        assert_eq!(o.status.code(), Some(2), "{cmd}: {err}");
        assert!(
            err.contains("an MBR table holds at most 59 partitions") && err.contains("gpt"),
            "{cmd}: {err}"
        );
        assert!(!out.exists());
    }
}
