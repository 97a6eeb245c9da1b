//! blockwise-ext4 against `mke2fs -t ext4 -d`, side by side.
//!
//! `cargo bench --manifest-path benches/Cargo.toml --bench ext4_vs_peers` generates two trees on disk and times both sides end
//! to end (scan the host tree, format, copy contents, image file on disk, fsync):
//! - ~5,000 files / ~150 MB in nested directories, into a 1 GiB ext4;
//! - 20,000 files in one directory (mke2fs -d writes a linear directory: quadratic).
//!
//! It prints both times and the ratio, and checks our images with `e2fsck -fn` (untimed);
//! it asserts nothing about wall-clock time.

use std::path::Path;
use std::time::{Duration, Instant};

use blockwise_ext4::Ext4Options;
use blockwise_ext4::{plan, write, Ext4Request};
use blockwise_geometry::ImageMap;
use blockwise_test_kit::{
    command, flat, installed, medians, nested, report, tempdir, tool_version,
};

use blockwise_host::{tree_from_dir, HostContent};

const MIB: u64 = 1 << 20;
const IMAGE_BYTES: u64 = 1 << 30;
const TIMESTAMP: i64 = 1_700_000_000;

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
    let mut img = ImageMap::new(IMAGE_BYTES);
    write(&mut img, &req, &p, &tree, &content).expect("write");
    let t3 = t.elapsed();
    // The image file as `blockwise build` writes it: holes kept, content copied by the
    // kernel, then fsync.
    blockwise_host::write_image_file(&img, &content, out, None, &mut ()).expect("write image");
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
    let m = command("mke2fs")
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

fn check(img: &Path) {
    if let Ok(o) = command("e2fsck").arg("-fn").arg(img).output() {
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

fn main() {
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    let work = tempdir!();
    let have_peer = installed("mke2fs");
    if have_peer {
        println!("peer: {}", tool_version("mke2fs", &["-V"]));
    }

    let src = work.path().join("nested");
    let (n, total) = nested(&src);
    println!("tree 1: {n} files, {:.1} MB nested", total as f64 / 1e6);
    let out = work.path().join("ours-nested.img");
    let (t_ours, t_peer) = medians(
        5,
        || ours(&src, &out),
        || {
            have_peer
                .then(|| peer(&src, &work.path().join("peer-nested.img")))
                .flatten()
        },
    );
    report(
        "5,000 files / 150 MB nested (medians of 5)",
        "blockwise-ext4",
        "mke2fs -d",
        t_ours,
        t_peer,
    );
    check(&out);

    let src = work.path().join("flat");
    let n = flat(&src, |i| format!("file {i:05}.txt"));
    println!("tree 2: {n} files in one directory");
    let out = work.path().join("ours-flat.img");
    let t_ours = ours(&src, &out);
    let t_peer = if have_peer {
        peer(&src, &work.path().join("peer-flat.img"))
    } else {
        None
    };
    report(
        "20,000 files in one directory",
        "blockwise-ext4",
        "mke2fs -d",
        t_ours,
        t_peer,
    );
    check(&out);
}
