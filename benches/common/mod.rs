//! Shared by the peer-comparison benches: generated trees, saving images, printing ratios.

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use blockwise_geometry::ImageMap;
use blockwise_host::HostContent;

/// Pseudo-random, incompressible bytes (xorshift), deterministic per seed.
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

/// ~5,000 files, ~150 MB: 50 directories of 100 files (half of them in a subdirectory).
pub fn nested(dir: &Path) -> (usize, u64) {
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

/// 20,000 small files in `dir/many`, named by `name(i)`.
pub fn flat(dir: &Path, name: impl Fn(usize) -> String) -> usize {
    let many = dir.join("many");
    std::fs::create_dir_all(&many).expect("mkdir");
    for i in 0..20_000 {
        std::fs::write(many.join(name(i)), format!("{i}\n")).expect("write");
    }
    20_000
}

/// Writes the image file (holes kept, fsync), as `blockwise build` does.
pub fn save(img: &ImageMap, content: &HostContent, path: &Path) {
    blockwise_host::write_image_file(img, content, path, None, &mut ()).expect("write image");
}

/// Whether every command is installed.
pub fn have(cmds: &[&str]) -> bool {
    cmds.iter().all(|c| {
        Command::new("sh")
            .arg("-c")
            .arg(format!("command -v {c}"))
            .output()
            .is_ok_and(|o| o.status.success())
    })
}

/// A scratch directory on disk (under target/), removed on drop.
pub fn workdir() -> tempfile::TempDir {
    let base = Path::new(env!("CARGO_TARGET_TMPDIR"));
    std::fs::create_dir_all(base).expect("tmpdir");
    tempfile::tempdir_in(base).expect("tempdir")
}

/// Prints both times and the ratio ours / peer.
pub fn report(
    what: &str,
    ours_name: &str,
    peer_name: &str,
    ours: Duration,
    peer: Option<Duration>,
) {
    match peer {
        Some(p) => println!(
            "{what}: {ours_name} {:.3} s, {peer_name} {:.3} s, ratio {:.3}",
            ours.as_secs_f64(),
            p.as_secs_f64(),
            ours.as_secs_f64() / p.as_secs_f64()
        ),
        None => println!(
            "{what}: {ours_name} {:.3} s ({peer_name} not timed)",
            ours.as_secs_f64()
        ),
    }
}
