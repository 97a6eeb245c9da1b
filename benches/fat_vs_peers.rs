//! blockwise-fat against `mkfs.fat -F 32 -C` + `mcopy -s`, side by side.
//!
//! `cargo bench --manifest-path benches/Cargo.toml --bench fat_vs_peers` generates two trees on disk and times both sides
//! end to end (scan the host tree, format, copy, image file on disk):
//! - ~5,000 files / ~150 MB in nested directories, into a 1 GiB FAT32;
//! - 20,000 files in one directory (mcopy is quadratic there).
//!
//! It prints both times and the ratio; it asserts nothing about wall-clock time.

use std::path::Path;
use std::time::{Duration, Instant};

use blockwise_fat::FatOptions;
use blockwise_fat::{plan, write, FatRequest};
use blockwise_geometry::{FatType, FsKind, ImageMap, SectorSize};
use blockwise_host::{tree_from_dir, HostContent};
use blockwise_test_kit::{
    command, flat, installed, medians, nested, report, tempdir, tool_version,
};

const MIB: u64 = 1 << 20;
const IMAGE_BYTES: u64 = 1 << 30;

fn ours(src: &Path, out: &Path) -> Duration {
    let t = Instant::now();
    let mut content = HostContent::default();
    let tree = tree_from_dir(src, None, &mut content).expect("scan");
    let req = FatRequest {
        partition_start_bytes: 0,
        partition_size_bytes: IMAGE_BYTES,
        device_sector: SectorSize::S512,
        erase_block_bytes: 4 * MIB,
        fs: FsKind::Fat(Some(FatType::Fat32)),
        options: FatOptions::default(),
        label: Some("BENCH".into()),
        seed: 1,
    };
    let p = plan(&req).expect("plan");
    let mut img = ImageMap::new(IMAGE_BYTES);
    write(&mut img, &req, &p, &tree, &content, 0).expect("write");
    // The image file as `blockwise build` writes it: holes kept, content copied by the
    // kernel, then fsync.
    blockwise_host::write_image_file(&img, &content, out, None, &mut ()).expect("write image");
    t.elapsed()
}

fn peer(src: &Path, out: &Path) -> Option<Duration> {
    let t = Instant::now();
    let _ = std::fs::remove_file(out);
    let mkfs = command("mkfs.fat")
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
    let m = command("mcopy")
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

fn main() {
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    let work = tempdir!();
    let have_peer = installed("mkfs.fat") && installed("mcopy");
    if have_peer {
        println!(
            "peers: {}; {}",
            tool_version("mkfs.fat", &["--version"]),
            tool_version("mcopy", &["--version"])
        );
    }

    let src = work.path().join("nested");
    let (n, total) = nested(&src);
    println!("tree 1: {n} files, {:.1} MB nested", total as f64 / 1e6);
    let (t_ours, t_peer) = medians(
        5,
        || ours(&src, &work.path().join("ours-nested.img")),
        || {
            have_peer
                .then(|| peer(&src, &work.path().join("peer-nested.img")))
                .flatten()
        },
    );
    report(
        "5,000 files / 150 MB nested (medians of 5)",
        "blockwise-fat",
        "mkfs.fat + mcopy",
        t_ours,
        t_peer,
    );

    let src = work.path().join("flat");
    // 8.3-sized names: mcopy needs no numeric-tail search, only its duplicate scan.
    let n = flat(&src, |i| format!("f{i:05}.txt"));
    println!("tree 2: {n} files in one directory");
    let t_ours = ours(&src, &work.path().join("ours-flat.img"));
    let t_peer = if have_peer {
        peer(&src, &work.path().join("peer-flat.img"))
    } else {
        None
    };
    report(
        "20,000 files in one directory",
        "blockwise-fat",
        "mkfs.fat + mcopy",
        t_ours,
        t_peer,
    );

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
        "blockwise-fat",
        "mkfs.fat + mcopy",
        t_ours,
        None,
    );
}
