//! Population: names, conflicts, special files, hard links, sparse files, space errors,
//! large directories, timestamps.

mod fixtures;

use std::time::Instant;

use blockwise_fat::{plan, write, Error};
use blockwise_geometry::{FsKind, Meta, NodeKind, SparseImage, Tree};
use blockwise_test_kit::{bytes, fsck_fat_clean, have, save, tempdir};
use fixtures::*;

fn small_req() -> blockwise_fat::FatRequest {
    request(
        4 * MIB,
        64 * MIB,
        4 * MIB,
        512,
        FsKind::Fat(Some(FatType::Fat16)),
    )
}

fn try_write(
    req: &blockwise_fat::FatRequest,
    tree: &Tree,
    content: &Vec<Vec<u8>>,
) -> (Result<blockwise_fat::WriteReport, Error>, SparseImage) {
    let p = plan(req).unwrap();
    let mut img = SparseImage::new(req.partition_size_bytes);
    let r = write(&mut img, req, &p, tree, content, 0);
    (r, img)
}

#[test]
fn names_differing_only_in_case_are_an_error_naming_both() {
    let mut t = Tree::default();
    let mut c = Vec::new();
    let d = add_dir(&mut t, 0, "docs");
    add_file(&mut t, &mut c, d, "Readme.md", b"a".to_vec(), 0);
    add_file(&mut t, &mut c, d, "README.md", b"b".to_vec(), 0);
    let (r, img) = try_write(&small_req(), &t, &c);
    let e = r.unwrap_err();
    assert!(matches!(e, Error::CaseConflict { .. }), "{e:?}");
    let msg = e.to_string();
    assert!(
        msg.contains("/docs/README.md") && msg.contains("/docs/Readme.md"),
        "{msg}"
    );
    assert_eq!(
        img.data_bytes(),
        0,
        "nothing is written when the tree is rejected"
    );
    // Unicode case folding too.
    let mut t = Tree::default();
    add_file(&mut t, &mut c, 0, "café", b"a".to_vec(), 0);
    add_file(&mut t, &mut c, 0, "CAFÉ", b"b".to_vec(), 0);
    assert!(matches!(
        try_write(&small_req(), &t, &c).0,
        Err(Error::CaseConflict { .. })
    ));
}

#[test]
fn names_fat_cannot_store_are_an_error_naming_the_path() {
    for bad in ["a:b", "what?", "trailing.", "back\\slash", "pipe|"] {
        let mut t = Tree::default();
        let mut c = Vec::new();
        let d = add_dir(&mut t, 0, "dir");
        add_file(&mut t, &mut c, d, bad, b"x".to_vec(), 0);
        let e = try_write(&small_req(), &t, &c).0.unwrap_err();
        assert!(matches!(e, Error::BadName { .. }), "{bad}: {e:?}");
        assert!(e.to_string().starts_with(&format!("/dir/{bad}: ")), "{e}");
    }
}

/// r25: a name with ESC and a newline is printed escaped in the error (`\x1b`, `\x0a`), so
/// it cannot drive the terminal or forge a log line; a case conflict quotes it escaped too.
#[test]
fn r25_names_with_control_characters_are_escaped_in_errors() {
    let bad = "evil\u{1b}[2J\nfake: ok";
    let mut t = Tree::default();
    let mut c = Vec::new();
    let d = add_dir(&mut t, 0, "dir");
    add_file(&mut t, &mut c, d, bad, b"x".to_vec(), 0);
    let e = try_write(&small_req(), &t, &c).0.unwrap_err();
    assert!(matches!(e, Error::BadName { .. }), "{e:?}");
    let msg = e.to_string();
    assert!(!msg.chars().any(char::is_control), "{msg:?}");
    assert!(msg.starts_with("/dir/evil\\x1b[2J\\x0afake: ok: "), "{msg}");
}

#[test]
fn no_space_says_how_much_more_is_needed() {
    let mut t = Tree::default();
    let mut c = Vec::new();
    add_file(&mut t, &mut c, 0, "big.bin", vec![7u8; 70 << 20], 0);
    let e = try_write(&small_req(), &t, &c).0.unwrap_err();
    let Error::NoSpace {
        needed_clusters,
        free_clusters,
        cluster_bytes,
        missing_bytes,
    } = e
    else {
        panic!("{e:?}")
    };
    assert!(needed_clusters > free_clusters);
    assert_eq!(
        missing_bytes,
        (needed_clusters - free_clusters) * cluster_bytes
    );
    assert!(e.to_string().contains("larger"), "{e}");
}

#[test]
fn files_of_4_gib_are_rejected_before_reading() {
    let mut t = Tree::default();
    t.add(
        0,
        "huge.iso",
        NodeKind::File {
            size: 5 << 30,
            content: 99,
            data_ranges: None,
            link: None,
        },
        Meta::default(),
    )
    .unwrap();
    let req = request(
        4 * MIB,
        8 * GIB,
        4 * MIB,
        512,
        FsKind::Fat(Some(FatType::Fat32)),
    );
    let e = try_write(&req, &t, &Vec::new()).0.unwrap_err();
    assert!(matches!(e, Error::FileTooLarge { .. }), "{e:?}");
}

#[test]
fn fat16_root_directory_full() {
    let mut t = Tree::default();
    let mut c = Vec::new();
    for i in 0..300 {
        add_file(
            &mut t,
            &mut c,
            0,
            &format!("long name number {i}.txt"),
            Vec::new(),
            0,
        );
    }
    let e = try_write(&small_req(), &t, &c).0.unwrap_err();
    assert!(matches!(e, Error::RootDirFull { .. }), "{e:?}");
    assert!(e.to_string().contains("use fat32"), "{e}");
}

#[test]
fn special_files_are_skipped_with_warnings() {
    let mut t = Tree::default();
    let mut c = Vec::new();
    add_file(&mut t, &mut c, 0, "real.txt", b"real".to_vec(), 0);
    t.add(
        0,
        "link",
        NodeKind::Symlink {
            target: "real.txt".into(),
        },
        Meta::default(),
    )
    .unwrap();
    t.add(
        0,
        "console",
        NodeKind::CharDev { major: 5, minor: 1 },
        Meta::default(),
    )
    .unwrap();
    t.add(0, "pipe", NodeKind::Fifo, Meta::default()).unwrap();
    let (r, img) = try_write(&small_req(), &t, &c);
    let r = r.unwrap();
    let codes: Vec<_> = r
        .warnings
        .iter()
        .map(|w| (w.code, w.path.as_str()))
        .collect();
    assert_eq!(
        codes,
        [
            ("fat-skipped-special", "/console"),
            ("fat-skipped-symlink", "/link"),
            ("fat-skipped-special", "/pipe")
        ]
    );
    assert_eq!(r.files, 1);
    let got = read_with_fatfs(img);
    assert_eq!(got.keys().collect::<Vec<_>>(), ["/real.txt"]);
}

#[test]
fn hard_links_become_copies_and_holes_read_as_zeros() {
    let mut t = Tree::default();
    let data = bytes(5, 20_000);
    let c = vec![data.clone()];
    for name in ["one", "two"] {
        t.add(
            0,
            name,
            NodeKind::File {
                size: 20_000,
                content: 0,
                data_ranges: None,
                link: Some(1),
            },
            Meta::default(),
        )
        .unwrap();
    }
    // A sparse file: only [4096, 8192) holds data.
    t.add(
        0,
        "sparse",
        NodeKind::File {
            size: 20_000,
            content: 0,
            data_ranges: Some(vec![(4096, 8192)]),
            link: None,
        },
        Meta::default(),
    )
    .unwrap();
    let (r, img) = try_write(&small_req(), &t, &c);
    assert_eq!(r.unwrap().files, 3);
    let got = read_with_fatfs(img);
    assert_eq!(got["/one"].as_deref(), Some(&data[..]));
    assert_eq!(got["/two"].as_deref(), Some(&data[..]));
    let mut sparse = vec![0u8; 20_000];
    sparse[4096..8192].copy_from_slice(&data[4096..8192]);
    assert_eq!(got["/sparse"].as_deref(), Some(&sparse[..]));
}

#[test]
fn plan_must_match_and_sink_must_fit() {
    let req = small_req();
    let mut p = plan(&req).unwrap();
    p.cluster_bytes *= 2;
    let mut img = SparseImage::new(req.partition_size_bytes);
    let e = write(
        &mut img,
        &req,
        &p,
        &Tree::default(),
        &Vec::<Vec<u8>>::new(),
        0,
    )
    .unwrap_err();
    assert!(
        matches!(
            e,
            Error::PlanMismatch {
                field: "cluster_bytes"
            }
        ),
        "{e:?}"
    );
    let p = plan(&req).unwrap();
    let mut small = SparseImage::new(MIB);
    let e = write(
        &mut small,
        &req,
        &p,
        &Tree::default(),
        &Vec::<Vec<u8>>::new(),
        0,
    )
    .unwrap_err();
    assert!(matches!(e, Error::SinkTooSmall { .. }), "{e:?}");
}

#[test]
fn timestamps_are_utc_and_clamped() {
    let mut t = Tree::default();
    let mut c = Vec::new();
    add_file(&mut t, &mut c, 0, "new.txt", b"n".to_vec(), 1_700_000_001); // 2023-11-14 22:13:21
    add_file(&mut t, &mut c, 0, "old.txt", b"o".to_vec(), 0); // 1970 → 1980-01-01
    let (r, img) = try_write(&small_req(), &t, &c);
    r.unwrap();
    let fs = fatfs::FileSystem::new(Cursor::whole(img), fatfs::FsOptions::new()).unwrap();
    let mut seen = 0;
    for e in fs.root_dir().iter() {
        let e = e.unwrap();
        let m = e.modified();
        let (d, tm) = (m.date, m.time);
        match e.file_name().as_str() {
            "new.txt" => {
                assert_eq!((d.year, d.month, d.day), (2023, 11, 14));
                assert_eq!((tm.hour, tm.min, tm.sec), (22, 13, 20));
                let cr = e.created();
                assert_eq!((cr.time.sec, cr.time.millis), (21, 0));
                seen += 1;
            }
            "old.txt" => {
                assert_eq!((d.year, d.month, d.day, tm.hour), (1980, 1, 1, 0));
                seen += 1;
            }
            _ => {}
        }
    }
    assert_eq!(seen, 2);
}

/// 20,000 files in one directory: linear alias search, and readers agree.
#[test]
fn twenty_thousand_files_in_one_directory() {
    let mut t = Tree::default();
    let mut c = Vec::new();
    let d = add_dir(&mut t, 0, "many");
    for i in 0..20_000 {
        add_file(
            &mut t,
            &mut c,
            d,
            &format!("file {i:05}.txt"),
            format!("{i}\n").into_bytes(),
            1_600_000_000,
        );
    }
    let req = request(
        4 * MIB,
        GIB,
        4 * MIB,
        512,
        FsKind::Fat(Some(FatType::Fat32)),
    );
    let started = Instant::now();
    let (_, img, report) = build(&req, &t, &c);
    eprintln!("20,000 files formatted in {:?}", started.elapsed());
    assert_eq!(report.files, 20_000);
    if have("fsck.fat") {
        let dir = tempdir!();
        let path = dir.path().join("many.img");
        save(&img, &path);
        let out = fsck_fat_clean(&path);
        assert!(out.contains(": 20002 files, "), "{out}");
    }
    let got = read_with_fatfs(img);
    assert_eq!(got, expected(&t, &c));
}

mod random_trees {
    use super::*;
    use proptest::prelude::*;

    fn name() -> impl Strategy<Value = String> {
        prop_oneof![
            "[A-Z0-9]{1,8}(\\.[A-Z0-9]{1,3})?",
            "[a-zA-Z0-9 _.+,;=\\[\\]-]{0,30}[a-zA-Z0-9_]",
            "[a-zäöüßéèçñ日本語ключ ]{1,20}[a-z0-9]",
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(24))]
        /// Random trees: either a clear error (case conflict) or fatfs reads back the same tree.
        #[test]
        fn fatfs_reads_back_random_trees(
            entries in prop::collection::vec((name(), 0usize..3, 0usize..9000, any::<bool>()), 1..120),
        ) {
            let mut t = Tree::default();
            let mut c = Vec::new();
            let mut dirs = vec![0usize];
            for (i, (n, parent, len, is_dir)) in entries.into_iter().enumerate() {
                let parent = dirs[parent % dirs.len()];
                if t.child(parent, &n).is_some() {
                    continue;
                }
                if is_dir {
                    dirs.push(add_dir(&mut t, parent, &n));
                } else {
                    add_file(&mut t, &mut c, parent, &n, bytes(i as u64, len), 1_600_000_000 + i as i64);
                }
            }
            let req = request(MIB, 64 * MIB, MIB, 512, FsKind::Fat(Some(FatType::Fat16)));
            let p = plan(&req).unwrap();
            let mut img = SparseImage::new(req.partition_size_bytes);
            match write(&mut img, &req, &p, &t, &c, 0) {
                Ok(_) => prop_assert_eq!(read_with_fatfs(img), expected(&t, &c)),
                Err(Error::CaseConflict { first, second }) => {
                    prop_assert_eq!(first.to_uppercase(), second.to_uppercase());
                }
                Err(Error::BadName { .. } | Error::RootDirFull { .. }) => {}
                Err(e) => prop_assert!(false, "unexpected error {e}"),
            }
        }
    }
}

#[test]
fn malformed_trees_are_errors_not_panics() {
    let req = small_req();
    // A directory listing itself as its own child, and a child id out of range.
    let mut t = Tree::default();
    let d = add_dir(&mut t, 0, "loop");
    if let NodeKind::Dir { children } = &mut t.nodes[d].kind {
        children.push(d);
    }
    let e = try_write(&req, &t, &Vec::new()).0.unwrap_err();
    assert!(matches!(e, Error::InvalidTree { .. }), "{e:?}");
    let mut t = Tree::default();
    if let NodeKind::Dir { children } = &mut t.nodes[0].kind {
        children.push(99);
    }
    let e = try_write(&req, &t, &Vec::new()).0.unwrap_err();
    assert!(matches!(e, Error::InvalidTree { .. }), "{e:?}");
    // Content shorter than the size the tree claims.
    let mut t = Tree::default();
    t.add(
        0,
        "short",
        NodeKind::File {
            size: 100,
            content: 0,
            data_ranges: None,
            link: None,
        },
        Meta::default(),
    )
    .unwrap();
    let e = try_write(&req, &t, &vec![vec![1u8; 10]]).0.unwrap_err();
    assert!(matches!(e, Error::Content { .. }), "{e:?}");
    assert!(e.to_string().starts_with("/short: "), "{e}");
}
