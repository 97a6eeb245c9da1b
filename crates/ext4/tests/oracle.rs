//! e2fsck / debugfs / dumpe2fs / ext4-view round trips of images the native writer makes.

mod fixtures;

use blockwise_ext4::{Ext4Options, Ext4Profile};
use blockwise_test_kit::{
    assert_same_tree, bytes, command, debugfs, e2fsck_clean, have, have_loop, materialize, save,
    tempdir, with_kernel_mount,
};
use fixtures::*;

#[test]
fn empty_tree_is_clean() {
    if !have("e2fsck") {
        return;
    }
    let d = tempdir!();
    let g = Gen::new();
    for (name, opts) in [
        ("default", Ext4Options::default()),
        (
            "nojournal",
            Ext4Options {
                journal: false,
                ..Ext4Options::default()
            },
        ),
        (
            "compat",
            Ext4Options {
                profile: Ext4Profile::Compat,
                ..Ext4Options::default()
            },
        ),
        (
            "bs1024",
            Ext4Options {
                block_size: 1024,
                ..Ext4Options::default()
            },
        ),
        (
            "bs2048",
            Ext4Options {
                block_size: 2048,
                ..Ext4Options::default()
            },
        ),
    ] {
        let req = request(256 << 20, opts);
        let img = build(&req, &g.tree, &g.content);
        let p = out(d.path(), &format!("{name}.img"));
        save(&img, &p);
        eprintln!("checking {name}");
        e2fsck_clean(&p, Some("testfs"));
    }
}

#[test]
fn small_tree_is_clean() {
    if !have("e2fsck") {
        return;
    }
    let d = tempdir!();
    let g = small_tree();
    for (name, opts) in [
        ("default", Ext4Options::default()),
        (
            "compat",
            Ext4Options {
                profile: Ext4Profile::Compat,
                journal: false,
                ..Ext4Options::default()
            },
        ),
        (
            "bs1024",
            Ext4Options {
                block_size: 1024,
                ..Ext4Options::default()
            },
        ),
    ] {
        let req = request(128 << 20, opts);
        let img = build(&req, &g.tree, &g.content);
        let p = out(d.path(), &format!("{name}.img"));
        save(&img, &p);
        eprintln!("checking {name}");
        e2fsck_clean(&p, Some("testfs"));
    }
}

/// ext4-view reads every node back: kind, mode, owner, size, content, link targets.
fn ext4_view_matches(img: blockwise_geometry::SparseImage, g: &Gen) {
    use blockwise_geometry::NodeKind;
    let fs = blockwise_test_kit::ext4_view_at(img, 0);
    for (id, n) in g.tree.nodes.iter().enumerate() {
        let path = g.tree.path(id);
        let md = fs
            .symlink_metadata(path.as_str())
            .unwrap_or_else(|e| panic!("{path}: {e}"));
        if id != 0 {
            assert_eq!(u32::from(md.mode()), n.meta.mode & 0o7777, "{path} mode");
            assert_eq!(
                (md.uid(), md.gid()),
                (n.meta.uid, n.meta.gid),
                "{path} owner"
            );
            assert_eq!(md.modified().seconds(), n.meta.mtime, "{path} mtime");
            assert_eq!(
                md.modified().nanoseconds(),
                n.meta.mtime_nsec,
                "{path} mtime ns"
            );
        }
        match &n.kind {
            NodeKind::Dir { children } => {
                assert!(md.is_dir());
                let mut names: Vec<String> = fs
                    .read_dir(path.as_str())
                    .unwrap()
                    .map(|e| e.unwrap().file_name().as_str().unwrap().to_string())
                    .filter(|s| s != "." && s != ".." && !(id == 0 && s == "lost+found"))
                    .collect();
                names.sort();
                let want: Vec<String> = children
                    .iter()
                    .map(|&c| String::from_utf8(g.tree.nodes[c].name.to_vec()).unwrap())
                    .collect();
                assert_eq!(names, want, "{path} listing");
            }
            NodeKind::File { size, content, .. } => {
                assert_eq!(md.len(), *size, "{path} size");
                let data = fs.read(path.as_str()).unwrap();
                assert!(data == g.content[*content as usize], "{path} content");
            }
            NodeKind::Symlink { target } => {
                assert!(md.is_symlink());
                let t = fs.read_link(path.as_str()).unwrap();
                assert_eq!(
                    t.to_str().unwrap().as_bytes(),
                    target.as_slice(),
                    "{path} target"
                );
            }
            NodeKind::CharDev { .. } => assert!(md.file_type().is_char_dev()),
            NodeKind::BlockDev { .. } => assert!(md.file_type().is_block_dev()),
            NodeKind::Fifo => assert!(md.file_type().is_fifo()),
            NodeKind::Socket => assert!(md.file_type().is_socket()),
        }
    }
}

#[test]
fn small_tree_reads_back_with_ext4_view() {
    let g = small_tree();
    for opts in [
        Ext4Options::default(),
        Ext4Options {
            profile: Ext4Profile::Compat,
            ..Ext4Options::default()
        },
    ] {
        let req = request(128 << 20, opts);
        ext4_view_matches(build(&req, &g.tree, &g.content), &g);
    }
}

#[test]
fn same_inputs_same_bytes() {
    let g = small_tree();
    let req = request(64 << 20, Ext4Options::default());
    assert_eq!(
        build(&req, &g.tree, &g.content),
        build(&req, &g.tree, &g.content)
    );
}

#[test]
fn generated_tree_e2fsck_debugfs_ext4_view() {
    if !have("e2fsck") || !have("debugfs") {
        return;
    }
    let d = tempdir!();
    let g = big_tree();
    let src = d.path().join("src");
    std::fs::create_dir(&src).unwrap();
    materialize(&g.tree, &g.content, &src);
    let req = request(1 << 30, Ext4Options::default());
    let t = std::time::Instant::now();
    let img = build(&req, &g.tree, &g.content);
    eprintln!("built in {:?}", t.elapsed());
    let p = d.path().join("big.img");
    save(&img, &p);
    e2fsck_clean(&p, Some("testfs"));
    // Without journal, compat profile: e2fsck only.
    for opts in [
        Ext4Options {
            journal: false,
            ..Ext4Options::default()
        },
        Ext4Options {
            profile: Ext4Profile::Compat,
            ..Ext4Options::default()
        },
    ] {
        let req2 = request(1 << 30, opts);
        let img2 = build(&req2, &g.tree, &g.content);
        let p2 = d.path().join("variant.img");
        save(&img2, &p2);
        e2fsck_clean(&p2, Some("testfs"));
    }
    // debugfs rdump equals the source.
    let outd = d.path().join("out");
    std::fs::create_dir(&outd).unwrap();
    debugfs(&p, &format!("rdump / {}", outd.display()));
    let dumped = outd.join(""); // rdump of "/" creates the entries directly in outd
    assert_same_tree(&src, &dumped, &["lost+found", "dev"]);
    // debugfs stat shows what was specified.
    let st = debugfs(&p, "stat /etc/hostname");
    assert!(
        st.contains("Mode:  0644") && st.contains("User:  1000") && st.contains("Group:   100"),
        "{st}"
    );
    let st = debugfs(&p, "stat /big/h1");
    assert!(st.contains("Links: 3") && st.contains("Size: 9000"), "{st}");
    let st = debugfs(&p, "stat /dev/console");
    assert!(
        st.contains("Type: character special") && st.contains("major/minor number: 05:01"),
        "{st}"
    );
    let st = debugfs(&p, "stat /dev/big");
    assert!(
        st.contains("major/minor number: 300:70000") || st.contains("12c:11170"),
        "{st}"
    );
    // The sparse file keeps its holes: 4 data blocks of a 10 MiB file.
    let st = debugfs(&p, "stat /sparse.img");
    assert!(
        st.contains("Blockcount: 32") && st.contains("Size: 10485760"),
        "{st}"
    );
    let ea = debugfs(&p, "ea_list /cap");
    assert!(
        ea.contains("security.capability") && ea.contains("user.comment"),
        "{ea}"
    );
    let ea = debugfs(&p, "ea_list /bigxattr");
    assert!(ea.contains("user.big"), "{ea}");
    // dumpe2fs -h: RAID geometry, features, label, UUID.
    let h = command("dumpe2fs").arg("-h").arg(&p).output().unwrap();
    let h = String::from_utf8_lossy(&h.stdout);
    let plan = blockwise_ext4::plan(&req, Some(&g.tree)).unwrap();
    assert!(h.contains("RAID stride:              1024"), "{h}");
    assert!(h.contains("RAID stripe width:        1024"), "{h}");
    assert!(h.contains("Filesystem volume name:   testfs"), "{h}");
    assert!(
        h.contains(&format!(
            "Filesystem UUID:          {}",
            plan.uuid.clone().unwrap()
        )),
        "{h}"
    );
    assert!(
        h.contains(&format!(
            "Filesystem features:      {}",
            plan.features.join(" ")
        )),
        "{h}"
    );
    // The kernel mounts it and sees the same tree.
    if have_loop() {
        with_kernel_mount(&p, "ext4", &d.path().join("mnt"), |m| {
            assert_same_tree(&src, m, &["lost+found", "dev"]);
            let st = command("stat")
                .args(["-c", "%a %u %g %h %s %F %t:%T"])
                .arg(m.join("dev/console"))
                .output()
                .unwrap();
            assert_eq!(
                String::from_utf8_lossy(&st.stdout).trim(),
                "640 1000 100 1 0 character special file 5:1"
            );
            let st = command("getfattr")
                .args(["-d", "-m", "-"])
                .arg(m.join("cap"))
                .output();
            if let Ok(st) = st {
                if st.status.success() {
                    assert!(String::from_utf8_lossy(&st.stdout).contains("security.capability"));
                }
            }
        });
    }
    ext4_view_matches(img, &g);
}

/// Deep extent trees (depth 2 with 1,500 extents) and a two-level htree (1 KiB blocks).
#[test]
fn deep_extent_tree_and_two_level_htree() {
    let mut g = Gen::new();
    let ranges: Vec<(u64, u64)> = (0..1500u64).map(|i| (i * 8192, i * 8192 + 100)).collect();
    g.sparse(0, "fragmented", 1500 * 8192, ranges);
    let many = g.dir(0, "many");
    for i in 0..20_000u64 {
        g.file(
            many,
            &format!("entry-{i:05}-{}", "n".repeat((i % 30) as usize)),
            Vec::new(),
        );
    }
    let d = tempdir!();
    for (name, bs) in [("deep1k", 1024u32), ("deep4k", 4096)] {
        let req = request(
            128 << 20,
            Ext4Options {
                block_size: bs,
                ..Ext4Options::default()
            },
        );
        let img = build(&req, &g.tree, &g.content);
        if have("e2fsck") {
            let p = out(d.path(), &format!("{name}.img"));
            save(&img, &p);
            e2fsck_clean(&p, Some("testfs"));
            if bs == 1024 && have("debugfs") {
                let h = debugfs(&p, "htree /many");
                assert!(
                    h.contains("Indirect levels: 1"),
                    "{}",
                    &h[..h.len().min(500)]
                );
                let st = debugfs(&p, "stat /fragmented");
                assert!(
                    st.contains("Level Entries") || st.contains("EXTENTS"),
                    "{}",
                    &st[..st.len().min(800)]
                );
            }
        }
        ext4_view_matches(img, &g);
    }
}

/// Odd sizes: tiny (no journal), short last groups, many flex groups, 32-bit descriptors.
#[test]
fn geometry_sweep_is_clean() {
    if !have("e2fsck") {
        return;
    }
    let d = tempdir!();
    let g = small_tree();
    let empty = Gen::new();
    let cases: &[(u64, u32, bool, &str)] = &[
        ((300 << 20) + 5 * 4096, 4096, false, "noflex"),
        (3 << 20, 1024, false, "tiny1k"),
        (17 << 20, 4096, true, "17m"),
        ((130 << 20) + 3 * 4096, 4096, true, "130m"),
        ((130 << 20) + 3 * 1024, 1024, true, "130m1k"),
        ((8 << 30) + 12345 * 4096, 4096, true, "8g"),
        ((8 << 30) + 12345 * 4096, 4096, false, "8g-no64"),
    ];
    for &(size, bs, bit64, name) in cases {
        let mut opts = Ext4Options {
            block_size: bs,
            ..Ext4Options::default()
        };
        if !bit64 {
            opts.features = vec!["^64bit".into()];
        }
        if name == "noflex" {
            opts.features.push("^flex_bg".into());
            opts.features.push("^sparse_super".into());
        }
        let tree = if size < (10 << 20) { &empty } else { &g };
        let req = request(size, opts);
        let img = build(&req, &tree.tree, &tree.content);
        let p = out(d.path(), &format!("{name}.img"));
        save(&img, &p);
        eprintln!("checking {name}");
        e2fsck_clean(&p, Some("testfs"));
    }
}

/// lost+found given by the tree (as a directory, or as a file) is used as is.
#[test]
fn lost_found_from_the_tree() {
    for as_dir in [true, false] {
        let mut g = Gen::new();
        if as_dir {
            let lf = g.dir(0, "lost+found");
            g.file(lf, "kept", b"x".to_vec());
        } else {
            g.file(0, "lost+found", b"not a dir".to_vec());
        }
        g.file(0, "other", b"y".to_vec());
        let req = request(64 << 20, Ext4Options::default());
        let img = build(&req, &g.tree, &g.content);
        if have("e2fsck") {
            let d = tempdir!();
            let p = out(d.path(), "lf.img");
            save(&img, &p);
            e2fsck_clean(&p, Some("testfs"));
        }
    }
}

/// Flashing only what was written onto a dirty device: every byte the writer does not
/// write is garbage, and the filesystem must still be clean (itable_unused + csums).
#[test]
fn clean_on_a_dirty_device() {
    if !have("e2fsck") {
        return;
    }
    let d = tempdir!();
    let g = small_tree();
    for (name, opts) in [
        ("dirty-default", Ext4Options::default()),
        (
            "dirty-compat",
            Ext4Options {
                profile: Ext4Profile::Compat,
                ..Ext4Options::default()
            },
        ),
    ] {
        let req = request(96 << 20, opts);
        let p = blockwise_ext4::plan(&req, Some(&g.tree)).unwrap();
        let mut dev = vec![0xA5u8; 96 << 20];
        blockwise_ext4::write(&mut dev, &req, &p, &g.tree, &g.content).unwrap();
        let path = out(d.path(), &format!("{name}.img"));
        std::fs::write(&path, &dev).unwrap();
        eprintln!("checking {name}");
        e2fsck_clean(&path, Some("testfs"));
    }
}

mod random_trees {
    use super::*;
    use blockwise_geometry::{Meta, NodeKind};
    use proptest::prelude::*;

    #[derive(Debug, Clone)]
    enum Item {
        Dir(u8),
        File(u8, u32),
        Link(u8, u8),
        Dev(u8),
    }

    fn item() -> impl Strategy<Value = Item> {
        prop_oneof![
            (any::<u8>()).prop_map(Item::Dir),
            (any::<u8>(), 0u32..70_000).prop_map(|(p, s)| Item::File(p, s)),
            (any::<u8>(), 1u8..200).prop_map(|(p, l)| Item::Link(p, l)),
            (any::<u8>()).prop_map(Item::Dev),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 32, ..ProptestConfig::default() })]
        /// Random trees read back identically through ext4-view, in every profile.
        #[test]
        fn random_trees_read_back(items in prop::collection::vec(item(), 0..150), name_len in 1usize..120, compat in any::<bool>(), bs in prop::sample::select(vec![1024u32, 4096])) {
            let mut g = Gen::new();
            let mut dirs = vec![0usize];
            for (k, it) in items.iter().enumerate() {
                let name = format!("{k}-{}", "é".repeat(name_len / 2));
                let name: String = name.chars().take(120).collect();
                match *it {
                    Item::Dir(p) => {
                        let parent = dirs[p as usize % dirs.len()];
                        dirs.push(g.dir(parent, &name));
                    }
                    Item::File(p, s) => {
                        let parent = dirs[p as usize % dirs.len()];
                        g.file(parent, &name, bytes(k as u64, s as usize));
                    }
                    Item::Link(p, l) => {
                        let parent = dirs[p as usize % dirs.len()];
                        g.node(parent, &name, NodeKind::Symlink { target: "t".repeat(l as usize).into_bytes() });
                    }
                    Item::Dev(p) => {
                        let parent = dirs[p as usize % dirs.len()];
                        let id = g.node(parent, &name, NodeKind::CharDev { major: p.into(), minor: k as u32 });
                        g.tree.nodes[id].meta = Meta { mode: 0o600, ..Gen::meta(0o600) };
                    }
                }
            }
            let profile = if compat { Ext4Profile::Compat } else { Ext4Profile::Default };
            let req = request(48 << 20, Ext4Options { profile, block_size: bs, ..Ext4Options::default() });
            let img = build(&req, &g.tree, &g.content);
            if have("e2fsck") {
                let d = tempdir!();
                let p = out(d.path(), "random.img");
                save(&img, &p);
                e2fsck_clean(&p, Some("testfs"));
            }
            ext4_view_matches(img, &g);
        }
    }
}

/// A filesystem filled to the last block (data wraps into the gap before the inode tables).
#[test]
fn full_filesystem_is_clean() {
    use blockwise_geometry::BlockSource;
    let opts = Ext4Options {
        journal: false,
        ..Ext4Options::default()
    };
    let req = request(16 << 20, opts);
    let empty = Gen::new();
    let img = build(&req, &empty.tree, &empty.content);
    let mut sb = vec![0u8; 1024];
    img.read_at(1024, &mut sb).unwrap();
    let free = u64::from(u32::from_le_bytes([sb[12], sb[13], sb[14], sb[15]]));
    let mut g = Gen::new();
    g.file(0, "fill", bytes(3, (free * 4096) as usize));
    let img = build(&req, &g.tree, &g.content);
    if have("e2fsck") {
        let d = tempdir!();
        let p = out(d.path(), "full.img");
        save(&img, &p);
        e2fsck_clean(&p, Some("testfs"));
    }
    ext4_view_matches(img, &g);
}

/// `fs = "ext2"` / `"ext3"`: block-mapped files (direct, single, double and, with 1 KiB
/// blocks, triple indirect), an htree directory, no ext4 features. e2fsck finds them clean,
/// on a clean image and on a dirty device; dumpe2fs lists the features mke2fs -t ext2/ext3
/// gives for the same size (resize_inode aside, which blockwise never makes); debugfs and
/// the kernel (its ext4 driver, read-only) read back the source tree.
#[test]
fn ext2_ext3_like_mke2fs() {
    use blockwise_ext4::ExtKind;
    if !have("e2fsck") || !have("debugfs") || !have("mke2fs") {
        return;
    }
    let d = tempdir!();
    let mut g = small_tree();
    // 400 blocks of 1 KiB: past the single indirect block into the double one.
    g.file(0, "double.bin", bytes(3, 400 * 1024));
    // Data at 66 MiB of an 1 KiB-block file is under the triple indirect block.
    g.sparse(
        0,
        "triple.img",
        (66 << 20) + 4096,
        vec![(0, 100), (66 << 20, (66 << 20) + 4096)],
    );
    let many = g.dir(0, "many");
    for i in 0..400 {
        g.file(
            many,
            &format!("entry-with-a-longer-name-{i:04}"),
            vec![b'x'; i % 7],
        );
    }
    let src = d.path().join("src");
    materialize(&g.tree, &g.content, &src);
    let size: u64 = 96 << 20;
    for (kind, bs) in [
        (ExtKind::Ext2, 1024u32),
        (ExtKind::Ext3, 1024),
        (ExtKind::Ext2, 4096),
        (ExtKind::Ext3, 4096),
    ] {
        let name = format!("{}-{bs}", kind.as_str());
        eprintln!("checking {name}");
        let opts = Ext4Options {
            kind,
            block_size: bs,
            ..Ext4Options::default()
        };
        let req = request(size, opts);
        let plan = blockwise_ext4::plan(&req, Some(&g.tree)).unwrap();
        assert_eq!(plan.kind, kind.as_str());
        let img = build(&req, &g.tree, &g.content);
        let p = out(d.path(), &format!("{name}.img"));
        save(&img, &p);
        e2fsck_clean(&p, Some("testfs"));
        // The same features as mke2fs -t ext2/ext3 of this size.
        let reference = out(d.path(), "mke2fs.img");
        std::fs::write(&reference, b"").unwrap();
        let f = std::fs::OpenOptions::new()
            .write(true)
            .open(&reference)
            .unwrap();
        f.set_len(size).unwrap();
        let o = command("mke2fs")
            .args(["-q", "-F", "-t", kind.as_str(), "-O", "^resize_inode", "-b"])
            .arg(bs.to_string())
            .arg(&reference)
            .output()
            .unwrap();
        assert!(o.status.success(), "{o:?}");
        let features = |img: &std::path::Path| {
            let h = command("dumpe2fs").arg("-h").arg(img).output().unwrap();
            String::from_utf8_lossy(&h.stdout)
                .lines()
                .find(|l| l.starts_with("Filesystem features:"))
                .map(str::to_string)
                .unwrap()
        };
        assert_eq!(features(&p), features(&reference), "{name}");
        assert_eq!(
            features(&p),
            format!("Filesystem features:      {}", plan.features.join(" "))
        );
        let st = debugfs(&p, "stat /triple.img");
        assert!(!st.contains("EXTENTS"), "{st}");
        let outd = d.path().join(format!("out-{name}"));
        std::fs::create_dir(&outd).unwrap();
        debugfs(&p, &format!("rdump / {}", outd.display()));
        assert_same_tree(&src, &outd, &["lost+found", "dev"]);
        if have_loop() {
            with_kernel_mount(&p, "ext4", &d.path().join("mnt"), |m| {
                assert_same_tree(&src, m, &["lost+found", "dev"]);
            });
        }
        // Written onto a dirty device: the zeroed inode tables keep it clean.
        let mut dev = vec![0xA5u8; size as usize];
        blockwise_ext4::write(&mut dev, &req, &plan, &g.tree, &g.content).unwrap();
        std::fs::write(&p, &dev).unwrap();
        e2fsck_clean(&p, Some("testfs"));
    }
    // ext3 without a journal is refused, naming the key.
    let req = request(
        size,
        Ext4Options {
            kind: ExtKind::Ext3,
            journal: false,
            ..Ext4Options::default()
        },
    );
    let e = blockwise_ext4::plan(&req, Some(&g.tree)).unwrap_err();
    assert!(e.to_string().contains("ext2 with a journal"), "{e}");
}

/// `ext4.inode-ratio` gives the inode count `mke2fs -i` gives (mke2fs's rounding: whole
/// inode-table blocks per group, then down to a multiple of 8), and a ratio under the block
/// size is refused naming the key.
#[test]
fn inode_ratio_like_mke2fs() {
    if !have("mke2fs") || !have("dumpe2fs") {
        return;
    }
    let d = tempdir!();
    let reference = out(d.path(), "ratio.img");
    for (size, bs, ratio) in [
        (300u64 << 20, 1024u32, 8192u64),
        (300 << 20, 4096, 4096),
        (64 << 20, 1024, 1024),
        (1100 << 20, 2048, 65536),
        (300 << 20, 4096, 1 << 20),
    ] {
        let opts = Ext4Options {
            block_size: bs,
            inode_ratio: Some(ratio),
            ..Ext4Options::default()
        };
        let plan = blockwise_ext4::plan(&request(size, opts), None).unwrap();
        std::fs::write(&reference, b"").unwrap();
        let f = std::fs::OpenOptions::new()
            .write(true)
            .open(&reference)
            .unwrap();
        f.set_len(size).unwrap();
        let o = command("mke2fs")
            .args(["-q", "-F", "-t", "ext4", "-b", &bs.to_string(), "-i"])
            .arg(ratio.to_string())
            .arg(&reference)
            .output()
            .unwrap();
        assert!(o.status.success(), "{o:?}");
        let h = command("dumpe2fs")
            .arg("-h")
            .arg(&reference)
            .output()
            .unwrap();
        let h = String::from_utf8_lossy(&h.stdout);
        let count = h
            .lines()
            .find_map(|l| l.strip_prefix("Inode count:"))
            .map(|v| v.trim().parse::<u64>().unwrap())
            .unwrap();
        assert_eq!(plan.inodes, count, "{size} B, {bs}-byte blocks, -i {ratio}");
    }
    let opts = Ext4Options {
        inode_ratio: Some(2048),
        ..Ext4Options::default()
    };
    match blockwise_ext4::plan(&request(64 << 20, opts), None) {
        Err(blockwise_ext4::Error::Invalid(i)) => {
            assert_eq!(i.field, blockwise_ext4::Field::InodeRatio);
        }
        other => panic!("{other:?}"),
    }
}
