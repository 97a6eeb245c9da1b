use blockwise_geometry::{BlockSource, SparseImage};
use blockwise_image::{assemble, Fill};

use super::*;
use crate::build::{clamp_time, prepare, prepare_with, FileEntry, Job, Part};
use crate::source::{check_round, Fetched, Missing, Round, FETCH_UNIT};

const SPEC: &str = r#"
[image]
size = "64MiB"
table = "mbr"
[[partition]]
fs = "fat32"
size = "fill"
label = "BOOT"
"#;

/// Entries and their bytes (content id = entry index; directories have none).
fn files() -> (Vec<FileEntry>, Vec<Vec<u8>>) {
    let list = vec![
        (
            FileEntry {
                path: "config.txt".into(),
                size: 12,
                ..FileEntry::default()
            },
            b"arm_64bit=1\n".to_vec(),
        ),
        (
            FileEntry {
                path: "overlays/a.dtbo".into(),
                size: 10_000,
                mtime_ms: Some(1_700_000_000_123),
                ..FileEntry::default()
            },
            vec![7; 10_000],
        ),
    ];
    list.into_iter().unzip()
}

/// Runs Check the way `verify` does in the page: rounds of fetching what it asks for from
/// `src`. Returns the report and the bytes read.
fn verify_in_rounds<S: BlockSource + ?Sized>(src: &S, opts: &Options) -> (Report, ReadStats) {
    let mut fetched = Fetched::new(src.len());
    let mut stats = ReadStats::default();
    loop {
        let missing = match check_round(&fetched, opts).unwrap() {
            Round::Done(r) => return (*r, stats),
            Round::Need(m) => m,
        };
        let (start, end) = fetched.range_for(missing);
        check_budget(&stats, (start, end)).unwrap();
        let mut buf = vec![0u8; usize::try_from(end - start).unwrap()];
        src.read_at(start, &mut buf).unwrap();
        stats.add(buf.len() as u64);
        fetched.insert(start, buf);
    }
}

/// The whole built image, read with the entries' bytes.
fn image_bytes(job: &Job, content: &Vec<Vec<u8>>) -> Vec<u8> {
    let mut out = vec![0u8; usize::try_from(job.size()).unwrap()];
    job.read_at(content, 0, &mut out).unwrap();
    out
}

#[test]
fn plans_toml_and_names_the_key_of_a_bad_spec() {
    let p = plan(&spec_from_toml(SPEC).unwrap()).unwrap();
    assert_eq!(p.partitions[0].start_bytes, 4 << 20);
    assert!(p.aligned);
    let err = spec_from_toml("[image]\nsize = \"4XB\"").unwrap_err();
    assert_eq!(err.category, Category::Spec);
    assert!(err.message.starts_with("image.size: "), "{}", err.message);
    assert_eq!(err.key.as_deref(), Some("image.size"));
    let err = spec_from_toml(
        "[image]\nsize = \"64MiB\"\n[[partition]]\nfs = \"fat32\"\nsize = \"1GiB\"\n",
    )
    .and_then(|s| plan(&s))
    .unwrap_err();
    assert_eq!(err.category, Category::Spec);
    assert!(err.message.starts_with("image.size: "), "{}", err.message);
    assert_eq!(err.key.as_deref(), Some("image.size"));
}

#[test]
fn builds_by_reference_an_image_that_verifies_and_holds_the_files() {
    let spec = spec_from_toml(SPEC).unwrap();
    let (entries, content) = files();
    let job = prepare(&spec, &entries).unwrap();
    assert_eq!(job.size(), 64 << 20);
    // Nothing of the files is in memory: only references.
    assert_eq!(job.map.content_bytes(), 10_012);
    assert!(job.map.metadata_bytes() < 2 << 20);
    let img = image_bytes(&job, &content);
    let report = blockwise_verify::verify_bytes(&img, &Options::new("built.img"));
    assert!(report.aligned, "{}", report.to_human());
    assert_eq!(report.exit_code(), 0);
    assert!(img.windows(12).any(|w| w == b"arm_64bit=1\n"));
    // The parts cover the image exactly, in order.
    let total: u64 = job.parts().iter().map(Part::len).sum();
    assert_eq!(total, job.size());
    // Deterministic.
    let again = prepare(&spec, &entries).unwrap();
    assert_eq!(image_bytes(&again, &content), img);
}

#[test]
fn routes_files_by_partition_or_contents_and_refuses_strays() {
    let spec = spec_from_toml(
        r#"
[image]
size = "64MiB"
table = "gpt"
[[partition]]
fs = "fat16"
size = "16MiB"
contents = "boot"
[[partition]]
fs = "ext4"
size = "fill"
contents = "root"
"#,
    )
    .unwrap();
    let e = |path: &str, partition: Option<usize>| FileEntry {
        path: path.into(),
        size: 3,
        partition,
        ..FileEntry::default()
    };
    let ok = vec![
        e("boot/cmdline.txt", None),
        e("root/etc/hostname", None),
        e("etc/motd", Some(2)),
    ];
    let content = vec![b"abc".to_vec(); 3];
    let job = prepare(&spec, &ok).unwrap();
    let img = image_bytes(&job, &content);
    let report = blockwise_verify::verify_bytes(&img, &Options::new("two.img"));
    assert_eq!(report.exit_code(), 0, "{}", report.to_human());
    let err = prepare(&spec, &[e("home/x", None)]).unwrap_err();
    assert_eq!(err.category, Category::Spec);
    assert!(
        err.message.starts_with("files[0].path: "),
        "{}",
        err.message
    );
    let err = prepare(&spec, &[e("x", Some(3))]).unwrap_err();
    assert_eq!(err.key.as_deref(), Some("files[0].partition"));
    let err = prepare(&spec, &[e("boot/a", None), e("boot/a", None)]).unwrap_err();
    assert_eq!(err.key.as_deref(), Some("files[1].path"), "{}", err.message);
    let err = prepare(&spec, &[e("boot/../a", None)]).unwrap_err();
    assert!(err.message.contains("\"..\""), "{}", err.message);
}

#[test]
fn times_follow_the_cli_clamp_rule() {
    // With a timestamp: later times become it (ns 0), earlier ones stay.
    assert_eq!(
        clamp_time(1_800_000_000_500, Some(1_700_000_000)),
        (1_700_000_000, 0)
    );
    assert_eq!(
        clamp_time(1_600_000_000_500, Some(1_700_000_000)),
        (1_600_000_000, 500_000_000)
    );
    assert_eq!(clamp_time(-1, None), (-1, 999_000_000));
    let toml = |ts: &str| {
        format!("[image]\nsize = \"64MiB\"\n{ts}\n[[partition]]\nfs = \"ext4\"\nsize = \"fill\"\n")
    };
    let entries = vec![FileEntry {
        path: "a/b/c.txt".into(),
        size: 1,
        mtime_ms: Some(1_650_000_000_000),
        ..FileEntry::default()
    }];
    let content = vec![vec![1u8]];
    // The root directory's time as the ext4 inode holds it.
    let root_mtime = |job: &Job| -> u32 {
        let img = image_bytes(job, &content);
        let p = &job.plan.partitions[0];
        let start = usize::try_from(p.start_bytes).unwrap();
        // ext4: inode 2 in the first inode table (4 KiB blocks, bg_inode_table_lo at
        // descriptor offset 8), i_mtime at offset 0x10 of the inode.
        let gd = start + 4096;
        let table = u32::from_le_bytes(img[gd + 8..gd + 12].try_into().unwrap());
        let isz = u16::from_le_bytes(
            img[start + 1024 + 0x58..start + 1024 + 0x5a]
                .try_into()
                .unwrap(),
        );
        let ino = start + table as usize * 4096 + usize::from(isz);
        u32::from_le_bytes(img[ino + 0x10..ino + 0x14].try_into().unwrap())
    };
    let with = prepare(
        &spec_from_toml(&toml("timestamp = 1700000000")).unwrap(),
        &entries,
    )
    .unwrap();
    assert_eq!(root_mtime(&with), 1_700_000_000);
    let without = prepare(&spec_from_toml(&toml("")).unwrap(), &entries).unwrap();
    assert_eq!(root_mtime(&without), 1_650_000_000);
    // An empty filesystem: the timestamp (the CLI's rule for a partition without contents).
    let empty = prepare(
        &spec_from_toml(&toml("timestamp = 1700000000")).unwrap(),
        &[],
    )
    .unwrap();
    let img = {
        let mut out = vec![0u8; usize::try_from(empty.size()).unwrap()];
        empty.read_at(&Vec::<Vec<u8>>::new(), 0, &mut out).unwrap();
        out
    };
    assert!(blockwise_verify::verify_bytes(&img, &Options::new("e.img")).aligned);
}

#[test]
fn containers_are_refused_with_an_unpack_command() {
    let mut gz = vec![0u8; 8192];
    gz[..3].copy_from_slice(&[0x1f, 0x8b, 8]);
    let mut fetched = Fetched::new(gz.len() as u64);
    fetched.insert(0, gz);
    let err = check_round(&fetched, &Options::new("os.img.gz")).unwrap_err();
    assert_eq!(err.category, Category::Unsupported);
    assert!(
        err.message.contains("`gzip -dc os.img.gz > image.img`"),
        "{}",
        err.message
    );
}

#[test]
fn verify_options_parse_and_name_their_key() {
    let o = VerifyOptions {
        erase_block: Some(SizeValue::Text("8MiB".into())),
        ..VerifyOptions::default()
    };
    assert_eq!(o.to_options().unwrap().erase_block, 8 << 20);
    let bad = VerifyOptions {
        sector_size: Some(1000),
        ..VerifyOptions::default()
    };
    let err = bad.to_options().unwrap_err();
    assert!(
        err.message.starts_with("options.sectorSize: "),
        "{}",
        err.message
    );
}

#[test]
fn a_32_gib_sparse_image_verifies_in_rounds_reading_under_1_mib() {
    let spec = spec_from_toml(
        r#"
[image]
seed = 1
size = "32GiB"
table = "gpt"
[[partition]]
fs = "fat32"
size = "256MiB"
[[partition]]
fs = "ext4"
size = "fill"
"#,
    )
    .unwrap();
    let p = plan(&spec).unwrap();
    let trees = empty_trees(&spec, 0).unwrap();
    let fills: Vec<Fill<'_>> = trees
        .iter()
        .map(|t| t.as_ref().map_or(Fill::Nothing, Fill::Tree))
        .collect();
    let mut img = SparseImage::new(p.size_bytes);
    assemble(&mut img, &spec, &p, &fills, &Vec::<Vec<u8>>::new(), 0).unwrap();
    // As the page verifies: without the gap scan (which reads up to 256 MiB).
    let opts = Options::new("big.img").scan_gaps(false);
    let direct = blockwise_verify::verify_sparse(&img, &opts);
    let (report, stats) = verify_in_rounds(&img, &opts);
    assert_eq!(report, direct);
    assert!(report.aligned, "{}", report.to_human());
    assert!(stats.bytes_read < 1 << 20, "{stats:?}");
    let out = VerifyOutput::new(&report, stats);
    assert_eq!(out.safe.answer, blockwise_verify::Safety::Yes);
    assert_eq!(out.input, "GPT partition table");
    assert_eq!(out.json, serde_json::to_string_pretty(&report).unwrap());
}

#[test]
fn a_misaligned_mbr_verifies_in_rounds_like_the_whole_image() {
    let mut disk = vec![0u8; 8 << 20];
    disk[0x1be + 4] = 0x83;
    disk[0x1be + 8..0x1be + 12].copy_from_slice(&63u32.to_le_bytes());
    disk[0x1be + 12..0x1be + 16].copy_from_slice(&8000u32.to_le_bytes());
    disk[510] = 0x55;
    disk[511] = 0xaa;
    let opts = Options::new("old.img");
    let (report, _) = verify_in_rounds(disk.as_slice(), &opts);
    assert_eq!(report, blockwise_verify::verify_bytes(&disk, &opts));
    assert!(!report.aligned);
    let out = VerifyOutput::new(&report, ReadStats::default());
    assert_eq!(out.safe.answer, blockwise_verify::Safety::No);
    assert_eq!(out.rows[0].severity, Some(Severity::Error));
    assert!(out.rows[0]
        .codes
        .contains(&"partition-not-4k-aligned".to_string()));
}

#[test]
fn past_the_end_and_unrecognised_are_marked_as_such() {
    // A partition of 16 MiB in an 8 MiB image.
    let mut disk = vec![0u8; 8 << 20];
    disk[0x1be + 4] = 0x83;
    disk[0x1be + 8..0x1be + 12].copy_from_slice(&8192u32.to_le_bytes());
    disk[0x1be + 12..0x1be + 16].copy_from_slice(&32768u32.to_le_bytes());
    disk[510] = 0x55;
    disk[511] = 0xaa;
    let r = blockwise_verify::verify_bytes(&disk, &Options::new("cut.img"));
    let out = VerifyOutput::new(&r, ReadStats::default());
    assert!(out.rows[0].past_end, "{:?}", out.rows);
    assert!(
        out.safe.line.starts_with("Safe to flash: no"),
        "{}",
        out.safe.line
    );
    let junk = vec![0x42u8; 1 << 20];
    let r = blockwise_verify::verify_bytes(&junk, &Options::new("junk.bin"));
    let out = VerifyOutput::new(&r, ReadStats::default());
    assert!(out.input.starts_with("unrecognised"), "{}", out.input);
    assert!(!out.recognised);
}

#[test]
fn sizes_read_in_decimal_and_binary() {
    let i = size_info("8GiB", "image.size").unwrap();
    assert_eq!(i.bytes, 8 << 30);
    assert_eq!(i.binary, "8 GiB");
    assert_eq!(i.decimal, "8.59 GB");
    assert_eq!(format_decimal(8_000_000_000), "8 GB");
    assert_eq!(format_decimal(7_950_000_000), "7.95 GB");
    assert_eq!(format_decimal(1_500_000), "1.5 MB");
    assert_eq!(format_decimal(999), "999 B");
    let err = size_info("8 parsecs", "image.size").unwrap_err();
    assert_eq!(err.key.as_deref(), Some("image.size"));
    let eb = erase_block_choices();
    assert_eq!(eb.first().map(|e| e.0), Some(128 << 10));
    assert_eq!(eb.last().map(|e| e.0), Some(256 << 20));
    assert_eq!(eb.len(), 12);
}

#[test]
fn add_partition_keeps_the_plan_valid() {
    // After a fill row: the new one goes before it.
    let spec = spec_from_toml(
        "[image]\nsize = \"8GiB\"\n[[partition]]\nfs = \"fat32\"\nsize = \"256MiB\"\n[[partition]]\nfs = \"ext4\"\nsize = \"fill\"\n",
    )
    .unwrap();
    let s = suggest_partition(&spec).unwrap();
    assert_eq!(
        (s.position, s.fs.as_str(), s.size.as_str()),
        (1, "ext4", "256MiB")
    );
    // A full disk: a smaller one, or a clear error.
    let tight = spec_from_toml(
        "[image]\nsize = \"300MiB\"\n[[partition]]\nfs = \"fat32\"\nsize = \"256MiB\"\n[[partition]]\nfs = \"ext4\"\nsize = \"fill\"\n",
    )
    .unwrap();
    let s = suggest_partition(&tight).unwrap();
    assert_eq!(s.position, 1);
    assert_ne!(s.size, "256MiB");
    let full = spec_from_toml(
        "[image]\nsize = \"264MiB\"\n[[partition]]\nfs = \"fat32\"\nsize = \"256MiB\"\n[[partition]]\nfs = \"ext4\"\nsize = \"fill\"\n",
    );
    if let Ok(full) = full {
        if plan(&full).is_ok() {
            let err = suggest_partition(&full).unwrap_err();
            assert_eq!(err.key.as_deref(), Some("image.size"));
        }
    }
}

#[test]
fn read_stats_budget_stops_a_hostile_image() {
    let mut s = ReadStats::default();
    s.add(MAX_READ_BYTES);
    let err = check_budget(&s, (0, 4096)).unwrap_err();
    assert_eq!(err.category, Category::CorruptImage);
    let m = Missing {
        offset: 0,
        len: FETCH_UNIT,
    };
    assert_eq!(Fetched::new(100).range_for(m), (0, 100));
}

/// Builds `toml` (in a temp dir, with `files` under it) with the CLI's code
/// (`blockwise_host::build`) and with the page's (`prepare_with`, the files' bytes in
/// memory), and checks the plans and every byte are equal. False when it was skipped (the
/// files are not owned by root: the page writes uid/gid 0).
#[cfg(not(target_arch = "wasm32"))]
fn equals_the_cli(toml: &str, files: &[(&str, Vec<u8>)]) -> bool {
    use std::os::unix::fs::MetadataExt as _;
    use std::os::unix::fs::PermissionsExt as _;
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("sd.toml"), toml).unwrap();
    for (p, data) in files {
        let path = dir.path().join(p);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, data).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
    }
    for (p, _) in files {
        let mut d = std::path::Path::new(p).parent();
        while let Some(x) = d.filter(|x| !x.as_os_str().is_empty()) {
            std::fs::set_permissions(dir.path().join(x), std::fs::Permissions::from_mode(0o755))
                .unwrap();
            d = x.parent();
        }
    }
    let mut sf = blockwise_host::SpecFile::load(&dir.path().join("sd.toml")).unwrap();
    let cli = blockwise_host::build(&mut sf, dir.path()).unwrap();
    let same_owner = files.iter().all(|(p, _)| {
        let md = std::fs::metadata(dir.path().join(p)).unwrap();
        md.uid() == 0 && md.gid() == 0
    });
    if !same_owner {
        eprintln!("skipped: the files are not owned by root (the page writes uid/gid 0)");
        return false;
    }
    let entries: Vec<FileEntry> = files
        .iter()
        .map(|(p, data)| {
            let md = std::fs::metadata(dir.path().join(p)).unwrap();
            FileEntry {
                path: (*p).into(),
                size: data.len() as u64,
                mtime_ms: Some(md.mtime() * 1000 + md.mtime_nsec() / 1_000_000),
                ..FileEntry::default()
            }
        })
        .collect();
    let content: Vec<Vec<u8>> = files.iter().map(|(_, d)| d.clone()).collect();
    let job = prepare_with(&spec_from_toml(toml).unwrap(), &entries, &content).unwrap();
    assert_eq!(job.plan, cli.plan);
    assert_eq!(job.root_hashes, cli.root_hashes);
    assert_eq!(job.map.mapped_ranges(), cli.image.mapped_ranges());
    let page = image_bytes(&job, &content);
    let mut host = vec![0u8; page.len()];
    cli.image
        .reader(&cli.content)
        .read_at(0, &mut host)
        .unwrap();
    let first = page.iter().zip(&host).position(|(a, b)| a != b);
    assert_eq!(first, None, "the images differ from byte {first:?}");
    true
}

/// The page's build and the CLI's of the same spec and files give the same bytes: FAT32 +
/// ext4 in an MBR, nested directories, a timestamp older than the files (so every time is
/// clamped, as the page must assume for directories).
#[cfg(not(target_arch = "wasm32"))]
#[test]
fn equals_the_cli_build_of_the_same_files() {
    // seed pinned: the page's trees carry no owners or sub-second times, so a derived seed
    // may differ from the CLI's for the same files; the bytes are what is compared.
    let toml = r#"
[image]
size = "200MiB"
table = "mbr"
timestamp = 1700000000
seed = 5
[[partition]]
fs = "fat32"
size = "64MiB"
label = "BOOT"
contents = "boot"
[[partition]]
fs = "ext4"
size = "fill"
label = "rootfs"
contents = "root"
"#;
    let files: [(&str, Vec<u8>); 5] = [
        ("boot/config.txt", b"arm_64bit=1\n".to_vec()),
        ("boot/overlays/x.dtbo", vec![3; 70_000]),
        ("root/etc/hostname", b"pi\n".to_vec()),
        ("root/usr/share/doc/a b.txt", vec![9; 5000]),
        (
            "root/usr/lib/big.bin",
            (0..300_000u32).map(|i| (i % 251) as u8).collect(),
        ),
    ];
    equals_the_cli(toml, &files);
}

/// squashfs (compressed from the files), EROFS (tails packed beside the inodes), a
/// dm-verity partition over the EROFS one and a tree appended to the squashfs: the page
/// reads the files' bytes for these and still gives the CLI's bytes and root hashes.
#[cfg(not(target_arch = "wasm32"))]
#[test]
fn read_only_filesystems_and_verity_equal_the_cli() {
    let toml = r#"
[image]
table = "gpt"
erase-block = "1MiB"
timestamp = 1700000000
seed = 7
[[partition]]
name = "system"
fs = "erofs"
contents = "sys"
[[partition]]
name = "system-verity"
fs = "verity"
of = "system"
[[partition]]
name = "apps"
fs = "squashfs"
contents = "apps"
verity = "appended"
[[partition]]
name = "xz"
fs = "squashfs"
contents = "more"
squashfs = { compression = "xz" }
"#;
    let files: [(&str, Vec<u8>); 6] = [
        ("sys/etc/os-release", b"ID=test\n".to_vec()),
        (
            "sys/usr/lib/big.bin",
            (0..300_000u32).map(|i| (i % 253) as u8).collect(),
        ),
        ("sys/usr/share/tail", vec![5; 4096 + 77]),
        ("apps/a/b/c.txt", b"hello\n".to_vec()),
        (
            "apps/data.bin",
            (0..200_000u32).map(|i| (i * 7 % 256) as u8).collect(),
        ),
        ("more/x.txt", vec![b'x'; 70_000]),
    ];
    equals_the_cli(toml, &files);
}

#[test]
fn tool_backends_are_refused_naming_their_key_and_planned() {
    let toml = |rest: &str| {
        format!("[image]\ntable = \"gpt\"\nerase-block = \"1MiB\"\ntimestamp = 1700000000\n[[partition]]\nname = \"boot\"\nfs = \"fat32\"\nsize = \"40MiB\"\n{rest}")
    };
    let (entries, _) = files();
    for (rest, key) in [
        (
            "[[partition]]\nname = \"system\"\nfs = \"erofs\"\nsize = \"4MiB\"\nerofs = { backend = \"mkfs.erofs\" }\n",
            "partition[2].erofs.backend",
        ),
        (
            "[[partition]]\nname = \"q\"\nfs = \"squashfs\"\nsize = \"4MiB\"\nsquashfs = { backend = \"mksquashfs\" }\n",
            "partition[2].squashfs.backend",
        ),
    ] {
        let spec = spec_from_toml(&toml(rest)).unwrap();
        // Planned in the page…
        let p = plan(&spec).unwrap();
        assert_eq!(p.partitions.len(), 2, "{rest}");
        // …but not built: the page cannot run the program.
        let err = prepare(&spec, &entries).map(|_| ()).unwrap_err();
        assert_eq!(err.category, Category::Unsupported, "{rest}");
        assert!(err.message.starts_with(key), "{rest}: {}", err.message);
        assert!(err.message.contains("blockwise build"), "{}", err.message);
    }
}

/// The page's plan of squashfs partitions is `blockwise plan`'s: compressed first (from the
/// empty tree) only when its size is left out or it carries an appended hash tree.
#[cfg(not(target_arch = "wasm32"))]
#[test]
fn squashfs_plans_as_the_cli_plans_it() {
    let toml = "[image]\ntable = \"gpt\"\nsize = \"64MiB\"\ntimestamp = 1700000000\nseed = 3\n[[partition]]\nfs = \"squashfs\"\nsize = \"8MiB\"\n[[partition]]\nfs = \"squashfs\"\nverity = \"appended\"\n[[partition]]\nfs = \"squashfs\"\n";
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("s.toml"), toml).unwrap();
    let mut sf = blockwise_host::SpecFile::load(&dir.path().join("s.toml")).unwrap();
    let cli = blockwise_host::plan_file(&mut sf).unwrap();
    let page = plan(&spec_from_toml(toml).unwrap()).unwrap();
    assert_eq!(page, cli);
}
