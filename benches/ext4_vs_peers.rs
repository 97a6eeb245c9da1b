//! blockwise-ext4 against `mke2fs -t ext4 -d`, side by side.
//!
//! `cargo bench --bench ext4_vs_peers` generates two trees on disk and times both sides end
//! to end (scan the host tree, format, copy contents, image file on disk, fsync):
//! - ~5,000 files / ~150 MB in nested directories, into a 1 GiB ext4;
//! - 20,000 files in one directory (mke2fs -d writes a linear directory: quadratic).
//!
//! It prints both times and the ratio, and checks our images with `e2fsck -fn` (untimed);
//! it asserts nothing about wall-clock time.

use std::os::unix::fs::FileExt;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use blockwise_ext4::{plan, write, Ext4Request};
use blockwise_geometry::{Ext4Options, SparseImage};
use blockwise_image::{tree_from_dir, HostContent};

const MIB: u64 = 1 << 20;
const IMAGE_BYTES: u64 = 1 << 30;
const TIMESTAMP: i64 = 1_700_000_000;

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
    let mut content = HostContent::default();
    let tree = tree_from_dir(src, Some(TIMESTAMP), &mut content).expect("scan");
    let req = Ext4Request {
        partition_start_bytes: 0,
        partition_size_bytes: IMAGE_BYTES,
        erase_block_bytes: 4 * MIB,
        options: Ext4Options::default(),
        label: Some("bench".into()),
        seed: 1,
        timestamp: TIMESTAMP,
    };
    let t1 = t.elapsed();
    let p = plan(&req, Some(&tree)).expect("plan");
    let t2 = t.elapsed();
    let mut img = SparseImage::new(IMAGE_BYTES);
    write(&mut img, &req, &p, &tree, &content).expect("write");
    let t3 = t.elapsed();
    save(&img, out);
    eprintln!(
        "  phases (cumulative): scan {t1:.2?}, plan {t2:.2?}, write {t3:.2?}, save+fsync {:.2?}",
        t.elapsed()
    );
    t.elapsed()
}

fn peer(src: &Path, out: &Path) -> Option<Duration> {
    let t = Instant::now();
    let _ = std::fs::remove_file(out);
    let f = std::fs::File::create(out).ok()?;
    f.set_len(IMAGE_BYTES).ok()?;
    let m = Command::new("mke2fs")
        .args([
            "-q",
            "-F",
            "-t",
            "ext4",
            "-L",
            "bench",
            "-E",
            "stride=1024,stripe_width=1024",
            "-d",
        ])
        .arg(src)
        .arg(out)
        .env("E2FSPROGS_FAKE_TIME", TIMESTAMP.to_string())
        .output()
        .ok()?;
    if !m.status.success() {
        eprintln!("mke2fs failed: {}", String::from_utf8_lossy(&m.stderr));
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
        std::fs::write(many.join(format!("file {i:05}.txt")), format!("{i}\n")).expect("write");
    }
    20_000
}

fn check(img: &Path) {
    if let Ok(o) = Command::new("e2fsck").arg("-fn").arg(img).output() {
        let ok = o.status.success();
        println!(
            "  e2fsck -fn on our image: {}",
            if ok { "clean" } else { "PROBLEMS" }
        );
        if !ok {
            println!("{}", String::from_utf8_lossy(&o.stdout));
        }
    }
}

fn report(what: &str, ours: Duration, peer: Option<Duration>) {
    match peer {
        Some(p) => println!(
            "{what}: blockwise-ext4 {:.3} s, mke2fs -d {:.3} s, ratio {:.3}",
            ours.as_secs_f64(),
            p.as_secs_f64(),
            ours.as_secs_f64() / p.as_secs_f64()
        ),
        None => println!(
            "{what}: blockwise-ext4 {:.3} s (mke2fs unavailable)",
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
        .arg("command -v mke2fs")
        .output()
        .is_ok_and(|o| o.status.success());

    let src = work.path().join("nested");
    let (n, total) = nested(&src);
    println!("tree 1: {n} files, {:.1} MB nested", total as f64 / 1e6);
    let out = work.path().join("ours-nested.img");
    let t_ours = ours(&src, &out);
    let t_peer = if have_peer {
        peer(&src, &work.path().join("peer-nested.img"))
    } else {
        None
    };
    report("5,000 files / 150 MB nested", t_ours, t_peer);
    check(&out);

    let src = work.path().join("flat");
    let n = flat(&src);
    println!("tree 2: {n} files in one directory");
    let out = work.path().join("ours-flat.img");
    let t_ours = ours(&src, &out);
    let t_peer = if have_peer {
        peer(&src, &work.path().join("peer-flat.img"))
    } else {
        None
    };
    report("20,000 files in one directory", t_ours, t_peer);
    check(&out);
}
