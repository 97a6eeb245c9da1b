//! Images written by the crate, read back by the real tools: `fsck.exfat -n` and
//! `mount.exfat-fuse -o ro` (contents, names, times and the read-only attribute).

use blockwise_exfat::{plan, write, ExfatOptions, ExfatRequest};
use blockwise_geometry::{Meta, NodeKind, SectorSize, SparseImage, Tree};
use blockwise_test_kit::{
    bytes, fsck_exfat_clean, have, have_loop, mounted_files, save, tempdir, with_exfat_fuse,
    XorShift64,
};

fn request(size: u64, e: u64, label: Option<&str>) -> ExfatRequest {
    ExfatRequest {
        partition_start_bytes: 0,
        partition_size_bytes: size,
        disk_bytes: size,
        device_sector: SectorSize::S512,
        erase_block_bytes: e,
        options: ExfatOptions::default(),
        label: label.map(str::to_string),
        seed: 7,
    }
}

fn file(size: u64, content: u64) -> NodeKind {
    NodeKind::File {
        size,
        content,
        data_ranges: None,
        link: None,
    }
}

fn dir() -> NodeKind {
    NodeKind::Dir {
        children: Vec::new(),
    }
}

fn meta(mtime: i64, mode: u32) -> Meta {
    Meta {
        mode,
        mtime,
        ..Meta::default()
    }
}

/// A random tree: unicode and 255-unit names, nested directories, empty files.
fn random_tree(seed: u64, content: &mut Vec<Vec<u8>>) -> Tree {
    let mut rng = XorShift64::new(seed);
    let mut t = Tree::default();
    let mut dirs = vec![0usize];
    let alphabet: Vec<char> = "abcXYZ019 _-é漢字ü😀Ωж".chars().collect();
    for i in 0..300u64 {
        let parent = dirs[usize::try_from(rng.next_u64() % dirs.len() as u64).unwrap()];
        let len = 1 + rng.next_u64() % 40;
        let mut name: String = (0..len)
            .map(|_| alphabet[usize::try_from(rng.next_u64() % alphabet.len() as u64).unwrap()])
            .collect();
        name = format!("{}{i}", name.trim());
        let m = meta(
            1_600_000_000 + i64::try_from(rng.next_u64() % 100_000_000).unwrap(),
            0o644,
        );
        if rng.next_u64() % 5 == 0 {
            if let Some(id) = t.add(parent, &name, dir(), m) {
                dirs.push(id);
            }
        } else {
            let size = match rng.next_u64() % 4 {
                0 => 0,
                1 => rng.next_u64() % 100,
                2 => rng.next_u64() % 300_000,
                _ => 4096 * (1 + rng.next_u64() % 8),
            };
            let h = content.len() as u64;
            content.push(bytes(seed ^ i, usize::try_from(size).unwrap()));
            t.add(parent, &name, file(size, h), m);
        }
    }
    // The longest name exFAT takes: 255 UTF-16 units (one is a surrogate pair).
    let long: String = "é".repeat(253) + "😀";
    assert_eq!(long.encode_utf16().count(), 255);
    let h = content.len() as u64;
    content.push(b"long".to_vec());
    t.add(0, &long, file(4, h), meta(1_700_000_000, 0o444));
    // A deep tree.
    let mut cur = 0;
    for d in 0..40 {
        cur = t
            .add(cur, format!("deep{d}"), dir(), meta(1_700_000_000, 0o755))
            .unwrap();
    }
    let h = content.len() as u64;
    content.push(b"bottom".to_vec());
    t.add(cur, "bottom.txt", file(6, h), meta(1_700_000_001, 0o644));
    t
}

#[test]
fn random_trees_are_clean_and_read_back() {
    if !have("fsck.exfat") {
        return;
    }
    let dir = tempdir!();
    for seed in [1u64, 2, 3] {
        let mut content = Vec::new();
        let tree = random_tree(seed, &mut content);
        let size = 256 << 20;
        let req = request(size, 4 << 20, Some("Vidéos"));
        let p = plan(&req).unwrap();
        let mut img = SparseImage::new(size);
        let report = write(&mut img, &req, &p, &tree, &content, 0).unwrap();
        assert!(report.warnings.is_empty(), "{:?}", report.warnings);
        let path = dir.path().join(format!("r{seed}.img"));
        save(&img, &path);
        fsck_exfat_clean(&path);
        if !(have("mount.exfat-fuse") && have_loop()) {
            continue;
        }
        with_exfat_fuse(
            &path,
            0,
            size,
            &dir.path().join(format!("m{seed}")),
            |mnt| {
                let got = mounted_files(mnt);
                let want = blockwise_test_kit::tree_files(&tree, &content);
                let got_names: Vec<&String> = got.keys().collect();
                let want_names: Vec<&String> = want.keys().collect();
                assert_eq!(got_names, want_names, "names");
                for (path, data) in &want {
                    // exfat-fuse maps no attribute to modes (the read-only attribute is checked
                    // by the crate's unit tests and by verify).
                    let (g, mtime, _) = &got[path];
                    assert_eq!(g, data, "{path}");
                    let id = tree.lookup(path).unwrap();
                    let m = &tree.nodes[id].meta;
                    // exFAT keeps 2 s + 10 ms increments: seconds survive exactly.
                    assert_eq!(*mtime, m.mtime, "{path} mtime");
                }
            },
        );
    }
}
