//! Helpers for the FAT oracle tests: temp dirs on disk, sparse image files, oracle tools,
//! generated trees.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::io::{Read, Seek, SeekFrom, Write};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use blockwise_fat::{plan, write, FatOptions, FatRequest, WriteReport};
pub use blockwise_geometry::FatType;
use blockwise_geometry::{
    BlockSink, BlockSource, FatPlan, FsKind, Meta, NodeId, NodeKind, SectorSize, SparseImage,
    SubSink, Tree,
};

pub const KIB: u64 = 1 << 10;
pub const MIB: u64 = 1 << 20;
pub const GIB: u64 = 1 << 30;

/// True when CI demands every oracle tool.
pub fn oracles_required() -> bool {
    std::env::var_os("DISKIMG_REQUIRE_ORACLES").is_some_and(|v| v == "1")
}

/// Whether `tool` is installed; a skip message locally, a panic under DISKIMG_REQUIRE_ORACLES=1.
pub fn have(tool: &str) -> bool {
    let found = Command::new("sh")
        .arg("-c")
        .arg(format!(
            "command -v {tool} || test -x /usr/sbin/{tool} || test -x /sbin/{tool}"
        ))
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

/// Resolves a tool that may live in /usr/sbin (not always on a user's PATH).
pub fn tool(name: &str) -> PathBuf {
    for dir in ["/usr/sbin", "/sbin", "/usr/bin", "/bin"] {
        let p = Path::new(dir).join(name);
        if p.exists() {
            return p;
        }
    }
    PathBuf::from(name)
}

/// A temp dir on a disk-backed filesystem (under the target dir), removed on drop.
pub fn tempdir() -> tempfile::TempDir {
    let base = Path::new(env!("CARGO_TARGET_TMPDIR"));
    std::fs::create_dir_all(base).ok();
    tempfile::tempdir_in(base).expect("tempdir")
}

/// A request with the usual defaults.
pub fn request(start: u64, size: u64, e: u64, sector: u32, fs: FsKind) -> FatRequest {
    FatRequest {
        partition_start_bytes: start,
        partition_size_bytes: size,
        device_sector: SectorSize::from_bytes(u64::from(sector)).expect("sector"),
        erase_block_bytes: e,
        fs,
        options: FatOptions::default(),
        label: Some("BLOCKWISE".into()),
        seed: 42,
    }
}

/// Plans and formats a bare volume (the sink is exactly the partition).
pub fn build(
    req: &FatRequest,
    tree: &Tree,
    content: &Vec<Vec<u8>>,
) -> (FatPlan, SparseImage, WriteReport) {
    let p = plan(req).unwrap_or_else(|e| panic!("plan {req:?}: {e}"));
    let mut img = SparseImage::new(req.partition_size_bytes);
    let report = write(&mut img, req, &p, tree, content, 1_700_000_000).expect("write");
    (p, img, report)
}

/// Formats the volume into a disk image at `req.partition_start_bytes` behind a one-entry MBR.
pub fn build_disk(req: &FatRequest, tree: &Tree, content: &Vec<Vec<u8>>) -> (FatPlan, SparseImage) {
    let p = plan(req).expect("plan");
    let start = req.partition_start_bytes;
    let mut img = SparseImage::new(start + req.partition_size_bytes);
    {
        let mut sub = SubSink::new(&mut img, start, req.partition_size_bytes).expect("window");
        write(&mut sub, req, &p, tree, content, 1_700_000_000).expect("write");
    }
    let s = u64::from(req.device_sector.bytes());
    let mut mbr = [0u8; 512];
    let e = &mut mbr[0x1BE..0x1CE];
    e[4] = 0x0c;
    e[8..12].copy_from_slice(&u32::try_from(start / s).unwrap().to_le_bytes());
    e[12..16].copy_from_slice(
        &u32::try_from(req.partition_size_bytes / s)
            .unwrap()
            .to_le_bytes(),
    );
    mbr[510] = 0x55;
    mbr[511] = 0xAA;
    img.write_at(0, &mbr).expect("mbr");
    (p, img)
}

/// Writes a sparse image to a file, keeping holes.
pub fn save(img: &SparseImage, path: &Path) {
    let f = std::fs::File::create(path).expect("create image");
    f.set_len(img.size()).expect("set_len");
    for (off, data) in img.extents() {
        f.write_all_at(data, off).expect("write image");
    }
}

/// Output of `fsck.fat -n -v`, asserting a clean result.
pub fn fsck_clean(path: &Path) -> String {
    let out = Command::new(tool("fsck.fat"))
        .arg("-n")
        .arg("-v")
        .arg(path)
        .output()
        .expect("fsck.fat");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        out.status.success(),
        "fsck.fat failed on {}:\n{text}",
        path.display()
    );
    let fine = [
        "fsck.fat ",
        "Checking we can access the last sector",
        "Boot sector contents:",
        "System ID ",
        "Media byte ",
        "bytes per logical sector",
        "bytes per cluster",
        "reserved sectors",
        "First FAT starts at byte",
        "FATs, ",
        "bytes per FAT",
        "Root directory start",
        "root directory entries",
        "Data area starts at byte",
        "data clusters",
        "sectors/track",
        "hidden sectors",
        "sectors total",
        "Checking for unused clusters.",
        "Checking free cluster summary.",
        "Volume label",
        "Checking file ",
        "Checking for bad clusters.",
        "Reclaiming unconnected clusters.",
    ];
    for line in text.lines() {
        let l = line.trim();
        if l.is_empty()
            || fine
                .iter()
                .any(|f| l.starts_with(f.trim()) || l.contains(f.trim()))
        {
            continue;
        }
        if l.contains(" files, ") && l.contains(" clusters") {
            continue;
        }
        panic!(
            "fsck.fat complained about {}: {line:?}\n{text}",
            path.display()
        );
    }
    text
}

/// A number after `key` in fsck output (e.g. "First FAT starts at byte").
pub fn fsck_number(text: &str, key: &str) -> u64 {
    let line = text
        .lines()
        .find(|l| l.contains(key))
        .unwrap_or_else(|| panic!("no {key:?} in\n{text}"));
    let rest = &line[line.find(key).unwrap() + key.len()..];
    rest.split_whitespace()
        .next()
        .and_then(|w| w.parse().ok())
        .unwrap_or_else(|| panic!("no number in {line:?}"))
}

/// A deterministic pseudo-random byte stream.
pub fn bytes(seed: u64, len: usize) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 24) as u8
        })
        .collect()
}

/// Adds a file to `tree` whose content is `data`.
pub fn add_file(
    tree: &mut Tree,
    content: &mut Vec<Vec<u8>>,
    parent: NodeId,
    name: &str,
    data: Vec<u8>,
    mtime: i64,
) -> NodeId {
    let kind = NodeKind::File {
        size: data.len() as u64,
        content: content.len() as u64,
        data_ranges: None,
        link: None,
    };
    content.push(data);
    tree.add(
        parent,
        name,
        kind,
        Meta {
            mode: 0o644,
            mtime,
            ..Meta::default()
        },
    )
    .unwrap_or_else(|| panic!("add {name}"))
}

/// Adds a directory.
pub fn add_dir(tree: &mut Tree, parent: NodeId, name: &str) -> NodeId {
    tree.add(
        parent,
        name,
        NodeKind::Dir { children: vec![] },
        Meta {
            mode: 0o755,
            mtime: 1_600_000_000,
            ..Meta::default()
        },
    )
    .unwrap_or_else(|| panic!("add dir {name}"))
}

/// The round-trip test tree: nested dirs, `files` files, long and unicode names, a 0-byte
/// file, a file over 4 MiB and an empty directory.
pub fn sample_tree(files: usize) -> (Tree, Vec<Vec<u8>>) {
    let mut t = Tree::default();
    let mut c = Vec::new();
    add_file(
        &mut t,
        &mut c,
        0,
        "README.TXT",
        b"verbatim 8.3 name\n".to_vec(),
        1_700_000_000,
    );
    add_file(&mut t, &mut c, 0, "empty.bin", Vec::new(), 1_700_000_001);
    add_file(
        &mut t,
        &mut c,
        0,
        "big file over four MiB.dat",
        bytes(1, 4 * 1024 * 1024 + 12345),
        1_700_000_002,
    );
    add_file(
        &mut t,
        &mut c,
        0,
        "Ünïcödé naïve café 日本語.txt",
        "unicode\n".as_bytes().to_vec(),
        1_650_000_000,
    );
    add_file(
        &mut t,
        &mut c,
        0,
        "a name that is definitely longer than thirteen characters.text",
        b"long".to_vec(),
        1_500_000_000,
    );
    add_file(&mut t, &mut c, 0, "x.tar.gz", bytes(2, 3000), 1_400_000_000);
    add_dir(&mut t, 0, "empty dir");
    let deep = add_dir(&mut t, 0, "deep");
    let mut cur = deep;
    for level in 0..8 {
        cur = add_dir(&mut t, cur, &format!("level {level} ü"));
        add_file(
            &mut t,
            &mut c,
            cur,
            &format!("at level {level}.txt"),
            format!("level {level}\n").into_bytes(),
            1_600_000_000 + level,
        );
    }
    let mut n = 0;
    let mut d = 0;
    while n < files {
        let dir = add_dir(&mut t, 0, &format!("dir{d:03} with a long name"));
        let sub = add_dir(&mut t, dir, "Sub Directory");
        for k in 0..100 {
            if n >= files {
                break;
            }
            let parent = if k % 2 == 0 { dir } else { sub };
            let len = (n * 37) % 9000;
            let name = match k % 4 {
                0 => format!("file_{n:05}.txt"),
                1 => format!("Mixed Case File {n} with spaces.Data"),
                2 => format!("F{n}.BIN"),
                _ => format!("ключ-{n}-ß.txt"),
            };
            add_file(
                &mut t,
                &mut c,
                parent,
                &name,
                bytes(n as u64 + 10, len),
                1_600_000_000 + n as i64 * 2,
            );
            n += 1;
        }
        d += 1;
    }
    (t, c)
}

/// Writes the tree to the host directory `dir` (for `diff -r`).
pub fn materialize(tree: &Tree, content: &[Vec<u8>], dir: &Path) {
    fn go(tree: &Tree, content: &[Vec<u8>], id: NodeId, dir: &Path) {
        std::fs::create_dir_all(dir).expect("mkdir");
        for &c in tree.children(id).unwrap_or_default() {
            let n = &tree.nodes[c];
            let p = dir.join(&n.name);
            match &n.kind {
                NodeKind::Dir { .. } => go(tree, content, c, &p),
                NodeKind::File { content: h, .. } => {
                    std::fs::write(&p, &content[*h as usize]).expect("write")
                }
                _ => {}
            }
        }
    }
    go(tree, content, 0, dir);
}

/// Read/Write/Seek over a sparse image, for the `fatfs` crate.
pub struct Cursor {
    pub img: SparseImage,
    pub pos: u64,
}

impl Read for Cursor {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = (self.img.size().saturating_sub(self.pos)).min(buf.len() as u64) as usize;
        self.img
            .read_at(self.pos, &mut buf[..n])
            .map_err(std::io::Error::other)?;
        self.pos += n as u64;
        Ok(n)
    }
}

impl Write for Cursor {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.img
            .write_at(self.pos, buf)
            .map_err(std::io::Error::other)?;
        self.pos += buf.len() as u64;
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Seek for Cursor {
    fn seek(&mut self, to: SeekFrom) -> std::io::Result<u64> {
        self.pos = match to {
            SeekFrom::Start(p) => p,
            SeekFrom::End(d) => self.img.size().checked_add_signed(d).unwrap_or(0),
            SeekFrom::Current(d) => self.pos.checked_add_signed(d).unwrap_or(0),
        };
        Ok(self.pos)
    }
}

/// What `fatfs` sees: path → Some(content) for files, None for directories.
pub fn read_with_fatfs(img: SparseImage) -> BTreeMap<String, Option<Vec<u8>>> {
    let fs = fatfs::FileSystem::new(Cursor { img, pos: 0 }, fatfs::FsOptions::new())
        .expect("fatfs mount");
    let mut out = BTreeMap::new();
    fn go<T: fatfs::ReadWriteSeek>(
        dir: fatfs::Dir<T>,
        prefix: &str,
        out: &mut BTreeMap<String, Option<Vec<u8>>>,
    ) {
        for e in dir.iter() {
            let e = e.expect("dir entry");
            let name = e.file_name();
            if name == "." || name == ".." {
                continue;
            }
            let path = format!("{prefix}/{name}");
            if e.is_dir() {
                out.insert(path.clone(), None);
                go(e.to_dir(), &path, out);
            } else {
                let mut v = Vec::new();
                e.to_file().read_to_end(&mut v).expect("read file");
                out.insert(path, Some(v));
            }
        }
    }
    go(fs.root_dir(), "", &mut out);
    out
}

/// The same map, from the tree.
pub fn expected(tree: &Tree, content: &[Vec<u8>]) -> BTreeMap<String, Option<Vec<u8>>> {
    let mut out = BTreeMap::new();
    for (id, n) in tree.nodes.iter().enumerate().skip(1) {
        match &n.kind {
            NodeKind::Dir { .. } => {
                out.insert(tree.path(id), None);
            }
            NodeKind::File { content: h, .. } => {
                out.insert(tree.path(id), Some(content[*h as usize].clone()));
            }
            _ => {}
        }
    }
    out
}
