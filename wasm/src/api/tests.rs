use blockwise_geometry::{BlockSource, SparseImage};

use super::*;
use crate::source::{Fetched, Missing, FETCH_UNIT};

const SPEC: &str = r#"
[image]
size = "64MiB"
table = "mbr"
[[partition]]
fs = "fat32"
size = "fill"
label = "BOOT"
"#;

fn files() -> Vec<FileInput> {
    vec![
        FileInput {
            path: "config.txt".into(),
            data: b"arm_64bit=1\n".to_vec(),
            mtime: None,
        },
        FileInput {
            path: "overlays/a.dtbo".into(),
            data: vec![7; 10_000],
            mtime: Some(1_700_000_000),
        },
    ]
}

/// Runs the verifier the way `verify` does in the page: rounds of fetching what it asks
/// for from `src`. Returns the report and the bytes read.
fn verify_in_rounds<S: BlockSource + ?Sized>(src: &S, opts: &Options) -> (Report, ReadStats) {
    let mut fetched = Fetched::new(src.len());
    let mut stats = ReadStats::default();
    let mut missing = Missing {
        offset: 0,
        len: FETCH_UNIT,
    };
    loop {
        let (start, end) = fetched.range_for(missing);
        check_budget(&stats, (start, end)).unwrap();
        let mut buf = vec![0u8; usize::try_from(end - start).unwrap()];
        src.read_at(start, &mut buf).unwrap();
        stats.add(buf.len() as u64);
        fetched.insert(start, buf);
        match blockwise_verify::verify(&fetched, opts) {
            Ok(r) => return (r, stats),
            Err(m) => missing = m,
        }
    }
}

#[test]
fn plans_toml_and_names_the_key_of_a_bad_spec() {
    let p = plan(&spec_from_toml(SPEC).unwrap()).unwrap();
    assert_eq!(p.partitions[0].start_bytes, 4 << 20);
    assert!(p.aligned);
    let err = spec_from_toml("[image]\nsize = \"4XB\"").unwrap_err();
    assert_eq!(err.category, Category::Spec);
    assert!(err.message.starts_with("image.size: "), "{}", err.message);
    let err = spec_from_toml(
        "[image]\nsize = \"64MiB\"\n[[partition]]\nfs = \"fat32\"\nsize = \"1GiB\"\n",
    )
    .and_then(|s| plan(&s))
    .unwrap_err();
    assert_eq!(err.category, Category::Spec);
    assert!(err.message.starts_with("image.size: "), "{}", err.message);
}

#[test]
fn builds_a_fat_image_that_verifies_and_holds_the_files() {
    let spec = spec_from_toml(SPEC).unwrap();
    let built = build(&spec, files()).unwrap();
    assert_eq!(built.image.size(), 64 << 20);
    let report = blockwise_verify::verify_sparse(&built.image, &Options::new("built.img"));
    assert!(report.aligned, "{}", report.to_human());
    assert_eq!(report.exit_code(), 0);
    // The pieces cover the image exactly.
    let total: u64 = pieces(&built.image)
        .iter()
        .map(|p| match p {
            Part::Data(d) => <[u8]>::len(d) as u64,
            Part::Zeros(n) => *n,
        })
        .sum();
    assert_eq!(total, built.image.size());
    // Same bytes as a build through the same spec with the files as a tree: deterministic.
    let again = build(&spec, files()).unwrap();
    assert_eq!(
        built.image.extents().collect::<Vec<_>>(),
        again.image.extents().collect::<Vec<_>>()
    );
}

#[test]
fn routes_files_by_contents_and_refuses_strays() {
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
    let ok = vec![
        FileInput {
            path: "boot/cmdline.txt".into(),
            data: b"console=tty1".to_vec(),
            mtime: None,
        },
        FileInput {
            path: "root/etc/hostname".into(),
            data: b"pi\n".to_vec(),
            mtime: None,
        },
    ];
    let built = build(&spec, ok).unwrap();
    let report = blockwise_verify::verify_sparse(&built.image, &Options::new("two.img"));
    assert_eq!(report.exit_code(), 0, "{}", report.to_human());
    let stray = vec![FileInput {
        path: "home/x".into(),
        data: vec![1],
        mtime: None,
    }];
    let err = build(&spec, stray).unwrap_err();
    assert_eq!(err.category, Category::Spec);
    assert!(
        err.message.starts_with("files[0].path: "),
        "{}",
        err.message
    );
    let twice = vec![
        FileInput {
            path: "boot/a".into(),
            data: vec![1],
            mtime: None,
        },
        FileInput {
            path: "boot/a".into(),
            data: vec![2],
            mtime: None,
        },
    ];
    let err = build(&spec, twice).unwrap_err();
    assert!(
        err.message.starts_with("files[1].path: "),
        "{}",
        err.message
    );
}

#[test]
fn refuses_images_too_large_for_a_tab() {
    let spec = spec_from_toml(
        "[image]\nsize = \"2GiB\"\n[[partition]]\nfs = \"fat32\"\nsize = \"fill\"\n",
    )
    .unwrap();
    let err = build(&spec, Vec::new()).unwrap_err();
    assert_eq!(err.category, Category::Unsupported);
    assert!(err.message.starts_with("image.size: "), "{}", err.message);
}

#[test]
fn recognises_compressed_images() {
    assert_eq!(
        compression(&[0xfd, b'7', b'z', b'X', b'Z', 0, 0, 4]).map(|c| c.0),
        Some("xz")
    );
    assert_eq!(compression(&[0x1f, 0x8b, 8, 0]).map(|c| c.0), Some("gzip"));
    assert_eq!(
        compression(&[0x28, 0xb5, 0x2f, 0xfd, 0]).map(|c| c.0),
        Some("zstd")
    );
    assert_eq!(compression(&[0xeb, 0x3c, 0x90]), None);
    let err = refuse_compressed(&[0x1f, 0x8b, 8], Some("os.img.gz")).unwrap_err();
    assert_eq!(err.category, Category::Unsupported);
    assert!(
        err.message.contains("gunzip -k os.img.gz"),
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
}
