//! Shared helpers for the ext4 crate's oracle tests.
#![allow(dead_code, missing_docs, clippy::new_without_default)]

use std::fs;
use std::io::{Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::process::Command;

use blockwise_ext4::Ext4Options;
use blockwise_ext4::{plan, write, Ext4Request};
use blockwise_geometry::{Meta, NodeId, NodeKind, SparseImage, Tree};

/// True when CI demands every oracle tool.
pub fn oracles_required() -> bool {
    std::env::var_os("DISKIMG_REQUIRE_ORACLES").is_some_and(|v| v == "1")
}

/// Whether `tool` is on PATH (skip message otherwise; panic in CI).
pub fn have(tool: &str) -> bool {
    let found = Command::new("sh")
        .arg("-c")
        .arg(format!("command -v {tool}"))
        .output()
        .is_ok_and(|o| o.status.success());
    if !found {
        assert!(
            !oracles_required(),
            "oracle tool {tool} is missing and DISKIMG_REQUIRE_ORACLES=1"
        );
        eprintln!("SKIP: {tool} not installed");
    }
    found
}

/// A temp dir under the target dir (disk-backed).
pub fn tempdir() -> tempfile::TempDir {
    let base = Path::new(env!("CARGO_TARGET_TMPDIR"));
    fs::create_dir_all(base).ok();
    tempfile::tempdir_in(base).expect("tempdir")
}

/// A request with defaults.
pub fn request(size: u64, opts: Ext4Options) -> Ext4Request {
    Ext4Request {
        partition_start_bytes: 4 << 20,
        partition_size_bytes: size,
        erase_block_bytes: 4 << 20,
        options: opts,
        label: Some("testfs".into()),
        seed: 42,
        timestamp: 1_700_000_000,
    }
}

/// Builds an image in memory.
pub fn build(req: &Ext4Request, tree: &Tree, content: &Vec<Vec<u8>>) -> SparseImage {
    let p = plan(req, Some(tree)).expect("plan");
    let mut img = SparseImage::new(req.partition_size_bytes);
    write(&mut img, req, &p, tree, content).expect("write");
    img
}

/// Saves a sparse image to a file, keeping holes.
pub fn save(img: &SparseImage, path: &Path) {
    if let Ok(dir) = std::env::var("EXT4_KEEP") {
        let _ = fs::copy(path, path); // placeholder to keep signature
        let _ = dir;
    }
    let mut f = fs::File::create(path).unwrap();
    f.set_len(img.size()).unwrap();
    for (o, d) in img.extents() {
        f.seek(SeekFrom::Start(o)).unwrap();
        f.write_all(d).unwrap();
    }
}

/// Runs `e2fsck -fn` and asserts rc 0 and only the pass lines.
pub fn e2fsck_clean(path: &Path) {
    let out = Command::new("e2fsck")
        .arg("-fn")
        .arg(path)
        .output()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let bad: Vec<&str> = text
        .lines()
        .filter(|l| {
            !(l.starts_with("Pass ")
                || l.starts_with("e2fsck ")
                || l.is_empty()
                || l.contains(" files (")
                || l.starts_with("testfs:")
                || l.contains(": clean")
                || l.starts_with("Warning: skipping journal recovery"))
        })
        .collect();
    if let Ok(dir) = std::env::var("EXT4_KEEP") {
        let _ = fs::copy(path, Path::new(&dir).join(path.file_name().unwrap()));
    }
    assert!(
        out.status.success() && bad.is_empty(),
        "e2fsck rc={:?}:\n{text}",
        out.status.code()
    );
}

/// Tree builder helpers.
pub struct Gen {
    pub tree: Tree,
    pub content: Vec<Vec<u8>>,
}

impl Gen {
    pub fn new() -> Gen {
        Gen {
            tree: Tree::new(Meta {
                mode: 0o755,
                mtime: 1_700_000_000,
                ..Meta::default()
            }),
            content: Vec::new(),
        }
    }
    pub fn meta(mode: u32) -> Meta {
        Meta {
            mode,
            uid: 1000,
            gid: 100,
            mtime: 1_650_000_000,
            mtime_nsec: 123_456_789,
            xattrs: Vec::new(),
        }
    }
    pub fn dir(&mut self, parent: NodeId, name: &str) -> NodeId {
        self.tree
            .add(
                parent,
                name,
                NodeKind::Dir { children: vec![] },
                Self::meta(0o755),
            )
            .unwrap()
    }
    pub fn file(&mut self, parent: NodeId, name: &str, data: Vec<u8>) -> NodeId {
        let h = self.content.len() as u64;
        let size = data.len() as u64;
        self.content.push(data);
        self.tree
            .add(
                parent,
                name,
                NodeKind::File {
                    size,
                    content: h,
                    data_ranges: None,
                    link: None,
                },
                Self::meta(0o644),
            )
            .unwrap()
    }
    pub fn sparse(
        &mut self,
        parent: NodeId,
        name: &str,
        size: u64,
        ranges: Vec<(u64, u64)>,
    ) -> NodeId {
        let mut data = vec![0u8; size as usize];
        for &(s, e) in &ranges {
            for (i, b) in data[s as usize..e as usize].iter_mut().enumerate() {
                *b = (i % 251) as u8 + 1;
            }
        }
        let h = self.content.len() as u64;
        self.content.push(data);
        self.tree
            .add(
                parent,
                name,
                NodeKind::File {
                    size,
                    content: h,
                    data_ranges: Some(ranges),
                    link: None,
                },
                Self::meta(0o600),
            )
            .unwrap()
    }
    pub fn hardlinks(&mut self, parents: &[(NodeId, &str)], data: Vec<u8>, link: u64) {
        let h = self.content.len() as u64;
        let size = data.len() as u64;
        self.content.push(data);
        for (p, n) in parents {
            self.tree
                .add(
                    *p,
                    n,
                    NodeKind::File {
                        size,
                        content: h,
                        data_ranges: None,
                        link: Some(link),
                    },
                    Self::meta(0o644),
                )
                .unwrap();
        }
    }
    pub fn node(&mut self, parent: NodeId, name: &str, kind: NodeKind) -> NodeId {
        let mode = if matches!(kind, NodeKind::Symlink { .. }) {
            0o777
        } else {
            0o640
        };
        self.tree.add(parent, name, kind, Self::meta(mode)).unwrap()
    }
}

/// Deterministic pseudo-random bytes.
pub fn bytes(seed: u64, len: usize) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

/// The small tree used by most tests: every node kind.
pub fn small_tree() -> Gen {
    let mut g = Gen::new();
    let etc = g.dir(0, "etc");
    g.file(etc, "hostname", b"blockwise\n".to_vec());
    g.file(etc, "empty", Vec::new());
    g.file(0, "big.bin", bytes(1, 300_000));
    g.node(
        0,
        "link-fast",
        NodeKind::Symlink {
            target: "etc/hostname".into(),
        },
    );
    g.node(
        0,
        "link-slow",
        NodeKind::Symlink {
            target: "x/".repeat(50) + "end",
        },
    );
    let dev = g.dir(0, "dev");
    g.node(dev, "console", NodeKind::CharDev { major: 5, minor: 1 });
    g.node(dev, "sda", NodeKind::BlockDev { major: 8, minor: 0 });
    g.node(
        dev,
        "big",
        NodeKind::CharDev {
            major: 300,
            minor: 70000,
        },
    );
    g.node(dev, "fifo", NodeKind::Fifo);
    g.node(dev, "sock", NodeKind::Socket);
    g.hardlinks(&[(0, "hl-a"), (etc, "hl-b")], b"linked\n".to_vec(), 7);
    g.sparse(
        0,
        "sparse.img",
        10 << 20,
        vec![
            (0, 5000),
            (4 << 20, (4 << 20) + 10),
            ((10 << 20) - 3, 10 << 20),
        ],
    );
    let f = g.file(0, "cap", b"#!/bin/true\n".to_vec());
    g.tree.nodes[f].meta.xattrs = vec![
        (
            "security.capability".into(),
            vec![
                1, 0, 0, 2, 0x20, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
            ],
        ),
        ("user.comment".into(), b"hello".to_vec()),
    ];
    let f = g.file(0, "bigxattr", b"x".to_vec());
    g.tree.nodes[f].meta.xattrs = vec![("user.big".into(), vec![7u8; 600])];
    g
}

/// Target dir for images.
pub fn out(dir: &Path, name: &str) -> PathBuf {
    dir.join(name)
}

/// The big generated tree: ≥ 2,000 nested files, a 20,000-entry directory, a 100 MiB file,
/// fast and slow symlinks, hard links, an empty file and a sparse file.
pub fn big_tree() -> Gen {
    let mut g = small_tree();
    let usr = g.dir(0, "usr");
    let share = g.dir(usr, "share");
    for d in 0..40u64 {
        let dd = g.dir(share, &format!("pkg{d:02}"));
        let sub = g.dir(dd, "sub");
        for i in 0..55u64 {
            let size = ((d * 55 + i) * 7919 % 20000) as usize;
            let parent = if i % 3 == 0 { sub } else { dd };
            g.file(
                parent,
                &format!("file{i:03}.dat"),
                bytes(d * 1000 + i, size),
            );
        }
        g.node(
            dd,
            "fast",
            NodeKind::Symlink {
                target: format!("sub/file{:03}.dat", d % 55),
            },
        );
        g.node(
            dd,
            "slow",
            NodeKind::Symlink {
                target: format!(
                    "{}/file000.dat",
                    "../pkg00/sub".repeat(1 + (d as usize % 20))
                ),
            },
        );
    }
    let many = g.dir(0, "many");
    for i in 0..20_000u64 {
        let name = format!("entry-{i:05}-{}", "n".repeat((i % 50) as usize));
        if i % 1000 == 0 {
            g.file(many, &name, bytes(i, 100));
        } else {
            g.file(many, &name, Vec::new());
        }
    }
    let big = g.dir(0, "big");
    let tile = bytes(99, 1 << 20);
    let mut data = Vec::with_capacity(100 << 20);
    for k in 0..100u8 {
        let at = data.len();
        data.extend_from_slice(&tile);
        data[at] = k;
    }
    g.file(big, "100m.bin", data);
    g.hardlinks(
        &[(big, "h1"), (big, "h2"), (many, "h3")],
        bytes(5, 9000),
        99,
    );
    g
}

/// Writes the tree's files, dirs, symlinks and hard links (not device nodes, fifos,
/// sockets) under `dir`, with modes.
pub fn materialize(g: &Gen, dir: &Path) {
    use std::os::unix::fs::PermissionsExt;
    let mut links: std::collections::BTreeMap<u64, PathBuf> = Default::default();
    let mut stack = vec![(0usize, dir.to_path_buf())];
    while let Some((id, path)) = stack.pop() {
        for &c in g.tree.children(id).unwrap() {
            let n = &g.tree.nodes[c];
            let p = path.join(&n.name);
            match &n.kind {
                NodeKind::Dir { .. } => {
                    fs::create_dir(&p).unwrap();
                    stack.push((c, p));
                }
                NodeKind::File { content, link, .. } => {
                    if let Some(first) = link.and_then(|l| links.get(&l)) {
                        fs::hard_link(first, &p).unwrap();
                        continue;
                    }
                    fs::write(&p, &g.content[*content as usize]).unwrap();
                    fs::set_permissions(&p, fs::Permissions::from_mode(n.meta.mode)).unwrap();
                    if let Some(l) = link {
                        links.insert(*l, p.clone());
                    }
                }
                NodeKind::Symlink { target } => std::os::unix::fs::symlink(target, &p).unwrap(),
                _ => {}
            }
        }
    }
}

/// True when loop devices can be used (root); otherwise a skip message (panic in CI).
pub fn have_loop() -> bool {
    let root = Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| o.stdout.starts_with(b"0"));
    let ok = root && Path::new("/dev/loop-control").exists() && have("losetup");
    if !ok {
        assert!(
            !oracles_required(),
            "loop devices are required in CI (run as root)"
        );
        eprintln!("SKIP: kernel mount needs root and loop devices");
    }
    ok
}

/// Mounts `img` read-only through a loop device, runs `f` on the mount point, cleans up.
pub fn with_kernel_mount(img: &Path, mnt: &Path, f: impl FnOnce(&Path)) {
    let o = Command::new("losetup")
        .args(["-f", "--show", "-r"])
        .arg(img)
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "losetup: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    let dev = String::from_utf8_lossy(&o.stdout).trim().to_string();
    fs::create_dir_all(mnt).unwrap();
    let m = Command::new("mount")
        .args(["-t", "ext4", "-o", "ro"])
        .arg(&dev)
        .arg(mnt)
        .output()
        .unwrap();
    let result = if m.status.success() {
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| f(mnt)))
    } else {
        Ok(())
    };
    if m.status.success() {
        let _ = Command::new("umount").arg(mnt).status();
    }
    let _ = Command::new("losetup").arg("-d").arg(&dev).status();
    assert!(
        m.status.success(),
        "mount: {}",
        String::from_utf8_lossy(&m.stderr)
    );
    if let Err(e) = result {
        std::panic::resume_unwind(e);
    }
}
