//! What the peer-comparison benches share: generated host trees and the printed ratio.

use std::path::Path;
use std::time::Duration;

use crate::random::bytes;

/// ~5,000 files, ~150 MB under `dir`: 50 directories of 100 files (half of them in a
/// subdirectory), incompressible. Returns (files, bytes).
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

/// 20,000 small files in `dir/many`, named by `name(i)`. Returns the count.
pub fn flat(dir: &Path, name: impl Fn(usize) -> String) -> usize {
    let many = dir.join("many");
    std::fs::create_dir_all(&many).expect("mkdir");
    for i in 0..20_000 {
        std::fs::write(many.join(name(i)), format!("{i}\n")).expect("write");
    }
    20_000
}

/// Prints both times and the ratio ours / peer (or ours alone when the peer was not timed).
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
