//! `size = "auto"` (issue 32 item 2): for random trees on FAT12/16/32, exFAT, ext4 (1 KiB
//! and 4 KiB blocks, with and without a journal), ext2 and ext3 the build succeeds, fsck.fat /
//! fsck.exfat / e2fsck find the result clean and mcopy / exfat-fuse / debugfs read the tree
//! back byte for byte; the next smaller erase-block multiple does not hold the same tree
//! (tight, not padded); with headroom (`auto+N%+SIZE`) the free space is at least what was
//! asked (fsck.fat's and dump.exfat's cluster counts, `df` on a read-only mount); `plan` explains the size and is what `build` makes; bad
//! grammar is refused naming the key.
//!
//! `AUTO_SIZE_CASES=N` runs N random cases instead of 40, `AUTO_SIZE_SEED=S` starts elsewhere.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Output;

use blockwise_test_kit::{
    assert_same_tree, blockwise, e2fsck_clean, fsck_exfat_clean, fsck_fat_clean, have, have_loop,
    is_root, mcopy_out, oracles_required, output_text, run, tempdir, with_exfat_fuse,
    with_kernel_mount, write_file, XorShift64,
};

fn build(spec: &Path, out: &Path) -> Output {
    blockwise!().run([
        "build".as_ref(),
        spec.as_os_str(),
        "-o".as_ref(),
        out.as_os_str(),
        "-q".as_ref(),
    ])
}

fn plan_json(spec: &Path) -> serde_json::Value {
    let o = blockwise!().run(["plan".as_ref(), spec.as_os_str(), "--json".as_ref()]);
    assert!(o.status.success(), "plan: {}", output_text(&o));
    serde_json::from_slice(&o.stdout).expect("plan --json")
}

/// One random case.
#[derive(Debug, Clone)]
struct Case {
    fs: &'static str,
    /// ext4 block size.
    block: u32,
    journal: bool,
    erase: u64,
    table: &'static str,
    percent: u32,
    extra: u64,
}

impl Case {
    fn size_text(&self) -> String {
        let mut s = "auto".to_string();
        if self.percent > 0 {
            s += &format!("+{}%", self.percent);
        }
        if self.extra > 0 {
            s += &format!("+{}KiB", self.extra >> 10);
        }
        s
    }

    fn spec(&self, size: &str) -> String {
        let fs_opts = if self.fs == "ext4" {
            format!(
                "ext4 = {{ block-size = {}, journal = {} }}\n",
                self.block, self.journal
            )
        } else if is_ext(self.fs) {
            // ext2 never has a journal, ext3 always has one.
            format!("ext4 = {{ block-size = {} }}\n", self.block)
        } else {
            String::new()
        };
        format!(
            "[image]\ntable = \"{}\"\nerase-block = {}\nseed = 7\ntimestamp = 1700000000\n\n[[partition]]\nfs = \"{}\"\nsize = {size}\ncontents = \"tree\"\nlabel = \"AUTO\"\n{fs_opts}",
            self.table, self.erase, self.fs
        )
    }

    /// Free bytes the headroom asks for a tree of `bytes`.
    fn headroom(&self, bytes: u64) -> u64 {
        (bytes * u64::from(self.percent)).div_ceil(100) + self.extra
    }
}

fn pick<T: Copy>(r: &mut XorShift64, xs: &[T]) -> T {
    xs[(r.next_u64() % xs.len() as u64) as usize]
}

/// A name: 8.3 upper case, a long lowercase one with spaces (long-name entries), or a very
/// long one (many long-name entries); unique within its directory by the counter.
fn name(r: &mut XorShift64, k: usize) -> String {
    match r.next_u64() % 4 {
        0 => format!("F{k}.BIN"),
        1 => format!("a longer name {k} with spaces.txt"),
        2 => format!(
            "{}-{k}",
            "very-long-name".repeat(1 + (r.next_u64() % 12) as usize)
        ),
        _ => format!("file{k}"),
    }
}

/// Writes a random tree under `root`; returns the bytes of file data. `max_bytes` bounds it;
/// `root_max` bounds the root's entries (the FAT12/16 root is fixed).
fn random_tree(r: &mut XorShift64, root: &Path, max_bytes: u64, root_max: usize) -> u64 {
    fs::create_dir_all(root).unwrap();
    let mut dirs = vec![root.to_path_buf()];
    for k in 0..(r.next_u64() % 6) as usize {
        let parent = pick(r, &(0..dirs.len()).collect::<Vec<_>>());
        let d = dirs[parent].join(format!("dir {k}"));
        fs::create_dir(&d).unwrap();
        dirs.push(d);
    }
    let mut total = 0u64;
    let files = 1 + (r.next_u64() % 40) as usize;
    let mut in_root = dirs.len() - 1;
    for k in 0..files {
        let mut d = pick(r, &(0..dirs.len()).collect::<Vec<_>>());
        if d == 0 && in_root >= root_max {
            d = dirs.len() - 1;
        }
        if d == 0 {
            in_root += 1;
        }
        let size = match r.next_u64() % 8 {
            0 => 0,
            1..=3 => r.next_u64() % 2048,
            4..=6 => r.next_u64() % (96 << 10),
            _ => r.next_u64() % (1 << 20),
        }
        .min(max_bytes.saturating_sub(total));
        total += size;
        let data = blockwise_test_kit::bytes(r.next_u64(), size as usize);
        fs::write(dirs[d].join(name(r, k)), data).unwrap();
    }
    // Sometimes one directory with many entries: more than a cluster / block of them
    // (htree on ext4, directory clusters on FAT).
    if r.next_u64() % 3 == 0 && dirs.len() > 1 {
        let d = dirs[dirs.len() - 1].join("many");
        fs::create_dir(&d).unwrap();
        for k in 0..(50 + r.next_u64() % 200) {
            fs::write(d.join(format!("entry with a long name {k}")), b"x").unwrap();
            total += 1;
        }
    }
    total
}

/// ext2, ext3 or ext4: made by the same native writer, checked by the same tools.
fn is_ext(fs: &str) -> bool {
    matches!(fs, "ext2" | "ext3" | "ext4")
}

fn random_case(r: &mut XorShift64) -> Case {
    let fs = pick(
        r,
        &[
            "fat12", "fat16", "fat32", "ext4", "ext4", "ext4", "ext2", "ext3", "exfat", "exfat",
        ],
    );
    let headroom = r.next_u64() % 3 == 0;
    let journal = r.next_u64() % 2 == 0;
    Case {
        fs,
        block: pick(r, &[1024, 4096]),
        journal: match fs {
            "ext2" => false,
            "ext3" => true,
            _ => journal,
        },
        erase: pick(r, &[128u64 << 10, 256 << 10, 1 << 20]),
        table: pick(r, &["none", "none", "mbr", "gpt"]),
        percent: if headroom {
            pick(r, &[0, 10, 20, 50])
        } else {
            0
        },
        extra: if headroom {
            pick(r, &[0u64, 64 << 10, 1 << 20])
        } else {
            0
        },
    }
}

/// Copies `len` bytes at `start` of `img` into their own file.
fn carve(img: &Path, start: u64, len: u64, out: &Path) -> PathBuf {
    use std::os::unix::fs::FileExt as _;
    let f = fs::File::open(img).unwrap();
    let mut buf = vec![0u8; len as usize];
    f.read_exact_at(&mut buf, start).unwrap();
    fs::write(out, &buf).unwrap();
    out.to_path_buf()
}

/// Free bytes fsck.fat counts: `N files, USED/TOTAL clusters` times the cluster size.
fn fat_free_bytes(fsck: &str) -> u64 {
    let cluster: u64 = fsck
        .lines()
        .find(|l| l.contains("bytes per cluster"))
        .and_then(|l| l.split_whitespace().next())
        .and_then(|w| w.parse().ok())
        .expect("bytes per cluster");
    let summary = fsck
        .lines()
        .find(|l| l.contains(" files, ") && l.contains(" clusters"))
        .expect("summary line");
    let counts = summary
        .split(" files, ")
        .nth(1)
        .and_then(|s| s.split_whitespace().next())
        .expect("clusters");
    let (used, total) = counts.split_once('/').expect("used/total");
    let (used, total): (u64, u64) = (used.parse().unwrap(), total.parse().unwrap());
    (total - used) * cluster
}

/// Free bytes dump.exfat counts: `Free Clusters` times `Cluster size`.
fn exfat_free_bytes(part: &Path) -> u64 {
    let o = run("dump.exfat", &[part]);
    let text = output_text(&o);
    let field = |key: &str| -> u64 {
        text.lines()
            .find(|l| l.trim_start().starts_with(key))
            .and_then(|l| l.split(':').nth(1))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or_else(|| panic!("dump.exfat: no {key}: {text}"))
    };
    field("Free Clusters") * field("Cluster size")
}

/// `df`'s available bytes of the ext4 filesystem in `part`, mounted read-only.
fn ext4_available(part: &Path, mnt: &Path) -> u64 {
    let mut avail = 0;
    with_kernel_mount(part, "ext4", mnt, |m| {
        let o = run(
            "df",
            &["-B1".as_ref(), "--output=avail".as_ref(), m.as_os_str()],
        );
        avail = output_text(&o)
            .lines()
            .nth(1)
            .and_then(|l| l.trim().parse().ok())
            .expect("df avail");
    });
    avail
}

fn tools_for(case: &Case) -> bool {
    let need: &[&str] = if is_ext(case.fs) {
        &["e2fsck", "debugfs"]
    } else if case.fs == "exfat" {
        if !(is_root() && have_loop()) {
            return false;
        }
        &["fsck.exfat", "dump.exfat", "mount.exfat-fuse"]
    } else {
        &["fsck.fat", "mcopy"]
    };
    need.iter().all(|t| have(t))
}

fn run_case(n: u64, case: &Case, r: &mut XorShift64) {
    let d = tempdir!();
    let tree = d.path().join("tree");
    let (max, root_max) = match case.fs {
        "fat12" => (6 << 20, 200),
        "fat16" => (12 << 20, 200),
        _ => (12 << 20, 10_000),
    };
    let bytes = random_tree(r, &tree, max, root_max);
    let ctx = format!("case {n}: {case:?}, {bytes} bytes");
    let spec = write_file(
        d.path(),
        "auto.toml",
        &case.spec(&format!("\"{}\"", case.size_text())),
    );
    let img = d.path().join("auto.img");
    let o = build(&spec, &img);
    assert!(o.status.success(), "{ctx}: {}", output_text(&o));

    // plan = build, and plan explains the size.
    let plan = plan_json(&spec);
    let p = &plan["partitions"][0];
    let (start, size) = (
        p["start_bytes"].as_u64().unwrap(),
        p["size_bytes"].as_u64().unwrap(),
    );
    assert_eq!(size % case.erase, 0, "{ctx}: size {size}");
    let notes = p["filesystem"]["notes"].to_string();
    assert!(
        notes.contains("size = \\\"auto") && notes.contains("smallest multiple"),
        "{ctx}: {notes}"
    );
    let report = blockwise!().run(["verify".as_ref(), img.as_os_str(), "--json".as_ref()]);
    let report: serde_json::Value = serde_json::from_slice(&report.stdout).expect("verify json");
    let vp = report["partitions"]
        .as_array()
        .and_then(|a| a.first())
        .expect("a partition");
    assert_eq!(vp["size_bytes"].as_u64(), Some(size), "{ctx}: verify");
    assert_eq!(vp["start_bytes"].as_u64(), Some(start), "{ctx}: verify");

    let asked = case.headroom(bytes);
    // Tight: the next smaller multiple does not hold the tree (with headroom: it does not
    // leave the free space asked for).
    if size > case.erase {
        let smaller = write_file(
            d.path(),
            "smaller.toml",
            &case.spec(&(size - case.erase).to_string()),
        );
        let simg = d.path().join("smaller.img");
        let o = build(&smaller, &simg);
        let journal_dropped = || {
            let p = plan_json(&smaller);
            !p["partitions"][0]["filesystem"]["features"]
                .to_string()
                .contains("has_journal")
        };
        if o.status.success() && case.fs == "ext4" && case.journal && journal_dropped() {
            // Too small for the journal asked for (mke2fs's smallest is 2048 blocks): the
            // smaller filesystem is made without one, which "auto" does not count as holding
            // the tree with the filesystem asked for.
        } else if asked == 0 {
            assert_eq!(
                o.status.code(),
                Some(2),
                "{ctx}: {} bytes also hold the tree: {}",
                size - case.erase,
                output_text(&o)
            );
        } else if o.status.success() && tools_for(case) {
            let part = partition(case, &simg, start, size - case.erase, d.path());
            if let Some(free) = free_bytes(case, &part, d.path()) {
                assert!(
                    free < asked,
                    "{ctx}: {} bytes also leave {free} free, {asked} asked",
                    size - case.erase
                );
            }
        }
    }

    if !tools_for(case) {
        return;
    }
    let part = partition(case, &img, start, size, d.path());
    let out = d.path().join("out");
    if is_ext(case.fs) {
        e2fsck_clean(&part, Some("AUTO"));
        fs::create_dir_all(&out).unwrap();
        blockwise_test_kit::debugfs(&part, &format!("rdump / {}", out.display()));
        assert_same_tree(&tree, &out, &["lost+found"]);
    } else if case.fs == "exfat" {
        fsck_exfat_clean(&part);
        with_exfat_fuse(&img, start, size, &d.path().join("mnt"), |m| {
            assert_same_tree(&tree, m, &[]);
        });
    } else {
        fsck_fat_clean(&part);
        mcopy_out(&part, 0, &out);
        assert_same_tree(&tree, &out, &[]);
    }
    if asked > 0 {
        if let Some(free) = free_bytes(case, &part, d.path()) {
            assert!(free >= asked, "{ctx}: {free} bytes free, {asked} asked");
        }
    }
}

/// The partition of `img` as a file of its own (the image itself when it has no table).
fn partition(case: &Case, img: &Path, start: u64, size: u64, dir: &Path) -> PathBuf {
    if case.table == "none" {
        img.to_path_buf()
    } else {
        carve(img, start, size, &dir.join("part.img"))
    }
}

/// Free space as the oracles count it: fsck.fat's free clusters, `df`'s available bytes on a
/// read-only mount (`None` without root or loop devices).
fn free_bytes(case: &Case, part: &Path, dir: &Path) -> Option<u64> {
    if is_ext(case.fs) {
        (is_root() && have_loop()).then(|| ext4_available(part, &dir.join("mnt")))
    } else if case.fs == "exfat" {
        Some(exfat_free_bytes(part))
    } else {
        Some(fat_free_bytes(&fsck_fat_clean(part)))
    }
}

#[test]
fn auto_sizes_are_tight_and_hold_the_tree() {
    if oracles_required() {
        assert!(
            is_root() && have_loop(),
            "the df check needs root and loop devices"
        );
    }
    let cases: u64 = std::env::var("AUTO_SIZE_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(40);
    let seed: u64 = std::env::var("AUTO_SIZE_SEED")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0x5eed_a070);
    let mut r = XorShift64::new(seed);
    // Every kind at least once, then random ones.
    let fixed = [
        ("fat12", 4096, true),
        ("fat16", 4096, true),
        ("fat32", 4096, true),
        ("ext4", 1024, true),
        ("ext4", 1024, false),
        ("ext4", 4096, true),
        ("ext4", 4096, false),
        ("ext2", 1024, false),
        ("ext3", 4096, true),
        ("exfat", 4096, true),
    ];
    for n in 0..cases {
        let mut case = random_case(&mut r);
        if let Some(&(fs, block, journal)) = fixed.get(n as usize) {
            (case.fs, case.block, case.journal) = (fs, block, journal);
            if n % 2 == 0 {
                (case.percent, case.extra) = (20, 256 << 10);
            }
        }
        run_case(n, &case, &mut r);
    }
}

#[test]
fn bad_grammar_and_unsupported_filesystems_name_the_key() {
    let d = tempdir!();
    fs::create_dir_all(d.path().join("tree")).unwrap();
    for (fs, size, words) in [
        ("ext4", "auto+x", "is neither a percentage"),
        ("ext4", "auto-20%", "only \"+N%\""),
        ("fat32", "auto+10%+20%", "given twice"),
        ("ext4", "auto+2000%", "not a percentage"),
        ("f2fs", "auto", "give fs = \"f2fs\" a size"),
        ("swap", "auto+1MiB", "a size like"),
        ("squashfs", "auto+20%", "headroom has no meaning"),
    ] {
        let spec = write_file(
            d.path(),
            "bad.toml",
            &format!("[[partition]]\nfs = \"{fs}\"\nsize = \"{size}\"\ncontents = \"tree\"\n"),
        );
        let o = blockwise!().run(["plan".as_ref(), spec.as_os_str(), "--json".as_ref()]);
        assert_eq!(o.status.code(), Some(2), "{fs} {size}: {}", output_text(&o));
        let text = output_text(&o);
        assert!(
            text.contains("partition[1].size") && text.contains(words),
            "{fs} {size}: {text}"
        );
    }
    // The mke2fs backend lays ext4 out itself.
    let spec = write_file(
        d.path(),
        "mke2fs.toml",
        "[[partition]]\nfs = \"ext4\"\nsize = \"auto\"\ncontents = \"tree\"\next4 = { backend = \"mke2fs\" }\n",
    );
    let o = blockwise!().run(["plan".as_ref(), spec.as_os_str()]);
    assert_eq!(o.status.code(), Some(2), "{}", output_text(&o));
    assert!(
        output_text(&o).contains("partition[1].size"),
        "{}",
        output_text(&o)
    );
}

#[test]
fn plain_auto_on_read_only_filesystems_is_their_own_size() {
    let d = tempdir!();
    let tree = d.path().join("tree");
    fs::create_dir_all(&tree).unwrap();
    fs::write(tree.join("a"), vec![7u8; 100_000]).unwrap();
    let with = |size: &str| {
        let spec = write_file(
            d.path(),
            "ro.toml",
            &format!(
                "[image]\nseed = 1\n[[partition]]\nfs = \"erofs\"\n{size}contents = \"tree\"\n"
            ),
        );
        plan_json(&spec)["partitions"][0]["size_bytes"].clone()
    };
    assert_eq!(with("size = \"auto\"\n"), with(""));
}

#[test]
fn headroom_grows_the_partition_by_what_is_asked() {
    // The same tree with more headroom never gets a smaller partition, and the extra
    // headroom shows up in the plan's explanation.
    let d = tempdir!();
    let tree = d.path().join("tree");
    fs::create_dir_all(&tree).unwrap();
    fs::write(tree.join("data"), vec![1u8; 3 << 20]).unwrap();
    let mut last = 0;
    for size in ["auto", "auto+50%", "auto+50%+4MiB", "auto+100%+8MiB"] {
        let spec = write_file(
            d.path(),
            "h.toml",
            &format!("[image]\nerase-block = \"1MiB\"\n[[partition]]\nfs = \"ext4\"\nsize = \"{size}\"\ncontents = \"tree\"\n"),
        );
        let plan = plan_json(&spec);
        let got = plan["partitions"][0]["size_bytes"].as_u64().unwrap();
        assert!(got > last, "{size}: {got} after {last}");
        last = got;
    }
}

#[test]
fn exfat_auto_follows_the_disk_into_the_sd_tables_next_row() {
    // A 40 GiB partition after the exFAT one puts the disk in the SD Association's 32–128 GB
    // row: a 16 MiB boundary unit, so the cluster heap of the exFAT volume starts 16 MiB into
    // it and "auto" must count that (the same tree alone on a small disk needs less).
    let d = tempdir!();
    let tree = d.path().join("tree");
    fs::create_dir_all(tree.join("sub")).unwrap();
    for i in 0..200u64 {
        fs::write(
            tree.join(format!("photo {i:04}.jpg")),
            blockwise_test_kit::bytes(i, (i as usize * 997) % 60_000),
        )
        .unwrap();
    }
    let spec = |size: &str, big: bool| {
        let second = if big {
            "[[partition]]\nfs = \"none\"\nsize = \"40GiB\"\n"
        } else {
            ""
        };
        format!("[image]\nerase-block = \"4MiB\"\ntable = \"gpt\"\nseed = 3\n[[partition]]\nfs = \"exfat\"\nsize = {size}\ncontents = \"tree\"\nlabel = \"CARD\"\n{second}")
    };
    let alone = plan_json(&write_file(
        d.path(),
        "alone.toml",
        &spec("\"auto\"", false),
    ));
    let auto = write_file(d.path(), "auto.toml", &spec("\"auto\"", true));
    let plan = plan_json(&auto);
    let p = &plan["partitions"][0];
    let size = p["size_bytes"].as_u64().unwrap();
    let start = p["start_bytes"].as_u64().unwrap();
    assert_eq!(p["filesystem"]["boundary_bytes"].as_u64(), Some(16 << 20));
    assert!(
        size > alone["partitions"][0]["size_bytes"].as_u64().unwrap(),
        "{plan}"
    );
    let img = d.path().join("card.img");
    let o = build(&auto, &img);
    assert!(o.status.success(), "{}", output_text(&o));
    let smaller = write_file(
        d.path(),
        "smaller.toml",
        &spec(&(size - (4 << 20)).to_string(), true),
    );
    let o = build(&smaller, &d.path().join("smaller.img"));
    assert_eq!(o.status.code(), Some(2), "{}", output_text(&o));
    if have("fsck.exfat") {
        let part = carve(&img, start, size, &d.path().join("part.img"));
        fsck_exfat_clean(&part);
    }
}
