//! blockwise-fat against `mkfs.fat -F 32 -C` + `mcopy -s`, side by side.
//!
//! `cargo bench --bench fat_vs_peers` generates two trees on disk and times both sides
//! end to end (scan the host tree, format, copy, image file on disk):
//! - ~5,000 files / ~150 MB in nested directories, into a 1 GiB FAT32;
//! - 20,000 files in one directory (mcopy is quadratic there).
//!
//! It prints both times and the ratio; it asserts nothing about wall-clock time.

use std::os::unix::fs::{FileExt, MetadataExt};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use blockwise_fat::{plan, write, FatRequest};
use blockwise_geometry::{
    ContentError, ContentSource, FatOptions, FsKind, Meta, NodeId, NodeKind, SectorSize,
    SparseImage, Tree,
};

const MIB: u64 = 1 << 20;
const IMAGE_BYTES: u64 = 1 << 30;

/// Host files by content handle.
struct HostFiles(Vec<PathBuf>);

impl ContentSource for HostFiles {
    fn read_at(&self, content: u64, offset: u64, buf: &mut [u8]) -> Result<(), ContentError> {
        let err = |m: String| ContentError {
            content,
            message: m,
        };
        let path = usize::try_from(content)
            .ok()
            .and_then(|i| self.0.get(i))
            .ok_or_else(|| err("no such content".into()))?;
        let f = std::fs::File::open(path).map_err(|e| err(e.to_string()))?;
        f.read_exact_at(buf, offset).map_err(|e| err(e.to_string()))
    }
}

/// Scans a host directory into a tree (what the image crate does, minimally).
fn scan(dir: &Path) -> (Tree, HostFiles) {
    let mut tree = Tree::default();
    let mut files = Vec::new();
    let mut stack: Vec<(PathBuf, NodeId)> = vec![(dir.to_path_buf(), 0)];
    while let Some((path, id)) = stack.pop() {
        let mut entries: Vec<_> = std::fs::read_dir(&path)
            .expect("read_dir")
            .map(|e| e.expect("entry"))
            .collect();
        entries.sort_by_key(std::fs::DirEntry::file_name);
        for e in entries {
            let md = e.metadata().expect("metadata");
            let name = e.file_name().into_string().expect("utf-8 name");
            let meta = Meta {
                mode: md.mode() & 0o7777,
                mtime: md.mtime(),
                ..Meta::default()
            };
            if md.is_dir() {
                let c = tree
                    .add(id, &name, NodeKind::Dir { children: vec![] }, meta)
                    .expect("add dir");
                stack.push((e.path(), c));
            } else {
                let kind = NodeKind::File {
                    size: md.len(),
                    content: files.len() as u64,
                    data_ranges: None,
                    link: None,
                };
                files.push(e.path());
                tree.add(id, &name, kind, meta).expect("add file");
            }
        }
    }
    (tree, HostFiles(files))
}

fn save(img: &SparseImage, path: &Path) {
    let f = std::fs::File::create(path).expect("create");
    f.set_len(img.size()).expect("set_len");
    for (off, data) in img.extents() {
        f.write_all_at(data, off).expect("write");
    }
    f.sync_all().expect("sync");
}

fn ours(src: &Path, out: &Path) -> Duration {
    let t = Instant::now();
    let (tree, content) = scan(src);
    let req = FatRequest {
        partition_start_bytes: 0,
        partition_size_bytes: IMAGE_BYTES,
        device_sector: SectorSize::S512,
        erase_block_bytes: 4 * MIB,
        fs: FsKind::Fat32,
        options: FatOptions::default(),
        label: Some("BENCH".into()),
        seed: 1,
    };
    let p = plan(&req).expect("plan");
    let mut img = SparseImage::new(IMAGE_BYTES);
    write(&mut img, &req, &p, &tree, &content, 0).expect("write");
    save(&img, out);
    t.elapsed()
}

fn peer(src: &Path, out: &Path) -> Option<Duration> {
    let t = Instant::now();
    let _ = std::fs::remove_file(out);
    let mkfs = Command::new("mkfs.fat")
        .args(["-F", "32", "-n", "BENCH", "-C"])
        .arg(out)
        .arg((IMAGE_BYTES / 1024).to_string())
        .output()
        .ok()?;
    if !mkfs.status.success() {
        eprintln!("mkfs.fat failed: {}", String::from_utf8_lossy(&mkfs.stderr));
        return None;
    }
    let mut args: Vec<std::ffi::OsString> = vec!["-s".into(), "-Q".into(), "-i".into(), out.into()];
    let mut tops: Vec<_> = std::fs::read_dir(src)
        .ok()?
        .map(|e| e.map(|e| e.path()))
        .collect::<Result<_, _>>()
        .ok()?;
    tops.sort();
    args.extend(tops.into_iter().map(Into::into));
    args.push("::/".into());
    let m = Command::new("mcopy")
        .env("MTOOLS_SKIP_CHECK", "1")
        .env("LC_ALL", "C.UTF-8")
        .args(&args)
        .output()
        .ok()?;
    if !m.status.success() {
        eprintln!("mcopy failed: {}", String::from_utf8_lossy(&m.stderr));
        return None;
    }
    std::fs::File::open(out).ok()?.sync_all().ok()?;
    Some(t.elapsed())
}

fn bytes(seed: u64, len: usize) -> Vec<u8> {
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

/// ~5,000 files, ~150 MB, 50 directories of 100 files (half in a subdirectory).
fn nested(dir: &Path) -> (usize, u64) {
    let mut n = 0;
    let mut total = 0u64;
    for d in 0..50 {
        let top = dir.join(format!("directory {d:02} with a long name"));
        let sub = top.join("Sub Dir");
        std::fs::create_dir_all(&sub).expect("mkdir");
        for k in 0..100 {
            let len = 1000 + (n * 7919) % 59_000;
            let parent = if k % 2 == 0 { &top } else { &sub };
            std::fs::write(
                parent.join(format!("File number {n} of the bench.dat")),
                bytes(n as u64, len),
            )
            .expect("write");
            n += 1;
            total += len as u64;
        }
    }
    (n, total)
}

/// 20,000 small files in one directory.
fn flat(dir: &Path) -> usize {
    let many = dir.join("many");
    std::fs::create_dir_all(&many).expect("mkdir");
    for i in 0..20_000 {
        // 8.3-sized names: mcopy needs no numeric-tail search, only its duplicate scan.
        std::fs::write(many.join(format!("f{i:05}.txt")), format!("{i}\n")).expect("write");
    }
    20_000
}

fn report(what: &str, ours: Duration, peer: Option<Duration>) {
    match peer {
        Some(p) => println!(
            "{what}: blockwise-fat {:.3} s, mkfs.fat + mcopy {:.3} s, ratio {:.3}",
            ours.as_secs_f64(),
            p.as_secs_f64(),
            ours.as_secs_f64() / p.as_secs_f64()
        ),
        None => println!(
            "{what}: blockwise-fat {:.3} s (peer not timed)",
            ours.as_secs_f64()
        ),
    }
}

fn main() {
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    let base = Path::new(env!("CARGO_TARGET_TMPDIR"));
    std::fs::create_dir_all(base).expect("tmpdir");
    let work = tempfile::tempdir_in(base).expect("tempdir");
    let have_peer = Command::new("sh")
        .arg("-c")
        .arg("command -v mkfs.fat && command -v mcopy")
        .output()
        .is_ok_and(|o| o.status.success());

    let src = work.path().join("nested");
    let (n, total) = nested(&src);
    println!("tree 1: {n} files, {:.1} MB nested", total as f64 / 1e6);
    let t_ours = ours(&src, &work.path().join("ours-nested.img"));
    let t_peer = if have_peer {
        peer(&src, &work.path().join("peer-nested.img"))
    } else {
        None
    };
    report("5,000 files / 150 MB nested", t_ours, t_peer);

    let src = work.path().join("flat");
    let n = flat(&src);
    println!("tree 2: {n} files in one directory");
    let t_ours = ours(&src, &work.path().join("ours-flat.img"));
    let t_peer = if have_peer {
        peer(&src, &work.path().join("peer-flat.img"))
    } else {
        None
    };
    report("20,000 files in one directory", t_ours, t_peer);

    // Long names sharing one 8.3 basis: every alias needs a numeric tail. mcopy's tail
    // search rescans the directory per candidate (it did not finish within 10 minutes
    // here), so only our side is timed.
    let src = work.path().join("flat-long");
    let many = src.join("many");
    std::fs::create_dir_all(&many).expect("mkdir");
    for i in 0..20_000 {
        std::fs::write(many.join(format!("file {i:05}.txt")), format!("{i}\n")).expect("write");
    }
    let t_ours = ours(&src, &work.path().join("ours-flat-long.img"));
    report(
        "20,000 long names sharing one 8.3 basis, one directory",
        t_ours,
        None,
    );
}
